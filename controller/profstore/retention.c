/* retention.c — see retention.h. */
#include "retention.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pf/log.h"
#include "pf/thread.h"
#include "profstore.h"

struct pf_retention {
	struct pf_store *st;
	struct pf_profile_retention ret;
	uint32_t interval_ms;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop, kick;
	bool converted_all; /* the thread's own: no profile left to convert */
	struct pf_retention_stats stats;
};

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool stopping(struct pf_retention *r)
{
	pthread_mutex_lock(&r->mu);
	bool stop = r->stop;
	pthread_mutex_unlock(&r->mu);
	return stop;
}

/* Profiles stored before the content tables, rewritten from their bodies a batch at a time
 * (each in its own short transaction) until none is left. */
static void convert(struct pf_retention *r)
{
	uint64_t total = 0;
	int rc;

	if (r->converted_all)
		return;
	do {
		size_t n = 0;
		rc = pf_profstore_convert(r->st, PF_RETENTION_CONVERT_BATCH, &n);
		total += n;
	} while (rc == 1 && !stopping(r));
	pthread_mutex_lock(&r->mu);
	r->stats.converted += total;
	pthread_mutex_unlock(&r->mu);
	if (rc < 0)
		pf_log_warn("profile store: converting stored profiles: %s",
			    pf_store_last_error(r->st));
	else if (total)
		pf_log_info("profile store: converted %llu profiles stored before schema 12",
			    (unsigned long long)total);
	r->converted_all = rc == 0;
}

static void pass(struct pf_retention *r)
{
	uint64_t total = 0;
	int rc;

	do {
		size_t d = 0;
		rc = pf_store_profiles_retain(r->st, &r->ret, wall_ms(), PF_RETENTION_BATCH, &d);
		total += d;
		pthread_mutex_lock(&r->mu);
		bool stop = r->stop;
		pthread_mutex_unlock(&r->mu);
		if (stop)
			break;
	} while (rc == 1);
	pthread_mutex_lock(&r->mu);
	r->stats.runs++;
	r->stats.deleted += total;
	if (rc < 0)
		r->stats.errors++;
	pthread_mutex_unlock(&r->mu);
	if (rc < 0)
		pf_log_warn("profile retention: %s", pf_store_last_error(r->st));
	else if (total)
		pf_log_debug("profile retention: deleted %llu profiles", (unsigned long long)total);
	convert(r);
}

static void *run(void *arg)
{
	struct pf_retention *r = arg;

	for (;;) {
		pass(r);
		pthread_mutex_lock(&r->mu);
		struct timespec dl;
		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_sec += r->interval_ms / 1000;
		dl.tv_nsec += (long)(r->interval_ms % 1000) * 1000000L;
		if (dl.tv_nsec >= 1000000000L) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000L;
		}
		while (!r->stop && !r->kick)
			if (pthread_cond_timedwait(&r->cv, &r->mu, &dl) == ETIMEDOUT)
				break;
		r->kick = false;
		bool stop = r->stop;
		pthread_mutex_unlock(&r->mu);
		if (stop)
			return NULL;
	}
}

struct pf_retention *pf_retention_start(const char *dbpath, const struct pf_profile_retention *ret,
					uint32_t interval_ms, struct pf_error *err)
{
	struct pf_retention *r = calloc(1, sizeof(*r));
	pthread_condattr_t ca;

	if (!r) {
		pf_error_set(err, -ENOMEM, NULL, "out of memory");
		return NULL;
	}
	r->ret = *ret;
	r->interval_ms = interval_ms ? interval_ms : PF_RETENTION_INTERVAL_MS;
	r->st = pf_store_open(dbpath, PF_STORE_SYNC_NORMAL, err);
	if (!r->st) {
		free(r);
		return NULL;
	}
	pthread_mutex_init(&r->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cv, &ca);
	pthread_condattr_destroy(&ca);
	int e = pthread_create(&r->thread, NULL, run, r);
	if (e) {
		pf_error_set(err, -e, NULL, "cannot start the retention thread: %s", strerror(e));
		pthread_cond_destroy(&r->cv);
		pthread_mutex_destroy(&r->mu);
		pf_store_close(r->st);
		free(r);
		return NULL;
	}
	return r;
}

void pf_retention_kick(struct pf_retention *r)
{
	pthread_mutex_lock(&r->mu);
	r->kick = true;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

void pf_retention_stats(struct pf_retention *r, struct pf_retention_stats *out)
{
	pthread_mutex_lock(&r->mu);
	*out = r->stats;
	pthread_mutex_unlock(&r->mu);
}

void pf_retention_stop(struct pf_retention *r)
{
	if (!r)
		return;
	pf_thread_stop(&r->mu, &r->cv, &r->stop, r->thread);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	pf_store_close(r->st);
	free(r);
}
