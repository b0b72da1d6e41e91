/* ratelimit.c — see ratelimit.h. */
#include "limits/ratelimit.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct agent_ratelimit {
	pthread_mutex_t lock;
	uint32_t limit;
	uint64_t *t; /* ring of limit allow times, oldest at head */
	uint32_t head, n;
	uint64_t allowed[AGENT_SRC_N], refused[AGENT_SRC_N];
};

static uint32_t clamp_limit(uint32_t limit)
{
	if (limit < 1)
		return 1;
	return limit > AGENT_RATELIMIT_MAX ? AGENT_RATELIMIT_MAX : limit;
}

struct agent_ratelimit *agent_ratelimit_new(uint32_t limit)
{
	struct agent_ratelimit *rl = calloc(1, sizeof(*rl));
	if (!rl)
		return NULL;
	rl->limit = clamp_limit(limit);
	rl->t = calloc(rl->limit, sizeof(*rl->t));
	if (!rl->t) {
		free(rl);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&rl->lock, NULL);
	return rl;
}

void agent_ratelimit_free(struct agent_ratelimit *rl)
{
	if (!rl)
		return;
	pthread_mutex_destroy(&rl->lock);
	free(rl->t);
	free(rl);
}

/* Drops the allow times older than the window. Under lock. */
static void expire(struct agent_ratelimit *rl, uint64_t now_ms)
{
	while (rl->n && now_ms >= rl->t[rl->head] + AGENT_RATELIMIT_WINDOW_MS) {
		rl->head = (rl->head + 1) % rl->limit;
		rl->n--;
	}
}

int agent_ratelimit_set_limit(struct agent_ratelimit *rl, uint32_t limit)
{
	limit = clamp_limit(limit);
	uint64_t *t = calloc(limit, sizeof(*t));
	if (!t)
		return -ENOMEM;
	pthread_mutex_lock(&rl->lock);
	/* keep the newest min(n, limit) times, oldest first */
	uint32_t keep = rl->n < limit ? rl->n : limit;
	for (uint32_t i = 0; i < keep; i++)
		t[i] = rl->t[(rl->head + rl->n - keep + i) % rl->limit];
	free(rl->t);
	rl->t = t;
	rl->limit = limit;
	rl->head = 0;
	rl->n = keep;
	pthread_mutex_unlock(&rl->lock);
	return 0;
}

bool agent_ratelimit_take(struct agent_ratelimit *rl, enum agent_profile_source src,
			  uint64_t now_ms)
{
	if ((unsigned)src >= AGENT_SRC_N)
		src = AGENT_SRC_WINDOW;
	pthread_mutex_lock(&rl->lock);
	expire(rl, now_ms);
	bool ok = rl->n < rl->limit;
	if (ok) {
		rl->t[(rl->head + rl->n) % rl->limit] = now_ms;
		rl->n++;
		rl->allowed[src]++;
	} else {
		rl->refused[src]++;
	}
	pthread_mutex_unlock(&rl->lock);
	return ok;
}

uint32_t agent_ratelimit_available(struct agent_ratelimit *rl, uint64_t now_ms)
{
	pthread_mutex_lock(&rl->lock);
	expire(rl, now_ms);
	uint32_t a = rl->limit - rl->n;
	pthread_mutex_unlock(&rl->lock);
	return a;
}

void agent_ratelimit_stats(struct agent_ratelimit *rl, uint64_t now_ms,
			   struct agent_ratelimit_stats *out)
{
	pthread_mutex_lock(&rl->lock);
	expire(rl, now_ms);
	out->limit = rl->limit;
	out->used = rl->n;
	memcpy(out->allowed, rl->allowed, sizeof(out->allowed));
	memcpy(out->refused, rl->refused, sizeof(out->refused));
	pthread_mutex_unlock(&rl->lock);
}

const char *agent_profile_source_name(enum agent_profile_source src)
{
	static const char *const names[AGENT_SRC_N] = {"window", "pprof", "capture", "high_cpu",
						       "slow_span"};
	return (unsigned)src < AGENT_SRC_N ? names[src] : "?";
}
