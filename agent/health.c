/* health.c — see health.h. */
#include "health.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pf/buf.h"
#include "pf/compiler.h"

struct component {
	char *name;
	bool healthy;
	char *status;
	char *last_error;
	uint64_t start_ns;
	uint64_t status_ns;
};

struct agent_health {
	pthread_mutex_t lock;
	uint64_t start_ns;
	struct component comp[AGENT_HEALTH_MAX_COMPONENTS];
	size_t n;
	uint64_t generation;	  /* every change */
	uint64_t state_generation; /* every change but a status's figures */
	void (*notify)(void *ctx);
	void *notify_ctx;
};

/* Unlocks h; calls the notify hook when the state generation moved since `gen` (read under
 * the lock). */
static void unlock_notify(struct agent_health *h, uint64_t gen)
{
	bool changed = h->state_generation != gen;
	void (*fn)(void *) = h->notify;
	void *ctx = h->notify_ctx;
	pthread_mutex_unlock(&h->lock);
	if (changed && fn)
		fn(ctx);
}

void agent_health_set_notify(struct agent_health *h, void (*fn)(void *ctx), void *ctx)
{
	pthread_mutex_lock(&h->lock);
	h->notify = fn;
	h->notify_ctx = ctx;
	pthread_mutex_unlock(&h->lock);
}

uint64_t agent_now_unix_nano(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct agent_health *agent_health_new(uint64_t start_unix_nano)
{
	struct agent_health *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	pthread_mutex_init(&h->lock, NULL);
	h->start_ns = start_unix_nano;
	h->generation = h->state_generation = 1;
	return h;
}

static void comp_release(struct component *c)
{
	free(c->name);
	free(c->status);
	free(c->last_error);
	memset(c, 0, sizeof(*c));
}

void agent_health_free(struct agent_health *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->n; i++)
		comp_release(&h->comp[i]);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

static struct component *find(struct agent_health *h, const char *name)
{
	for (size_t i = 0; i < h->n; i++)
		if (strcmp(h->comp[i].name, name) == 0)
			return &h->comp[i];
	return NULL;
}

int agent_health_register(struct agent_health *h, const char *name)
{
	int r = 0;
	pthread_mutex_lock(&h->lock);
	uint64_t gen = h->state_generation;
	if (find(h, name))
		goto out;
	if (h->n >= AGENT_HEALTH_MAX_COMPONENTS) {
		r = -ENOSPC;
		goto out;
	}
	struct component *c = &h->comp[h->n];
	c->name = strdup(name);
	c->status = strdup("starting");
	if (!c->name || !c->status) {
		comp_release(c);
		r = -ENOMEM;
		goto out;
	}
	c->healthy = true;
	c->start_ns = c->status_ns = agent_now_unix_nano();
	h->n++;
	h->generation++;
	h->state_generation++;
out:
	unlock_notify(h, gen);
	return r;
}

static bool str_same(const char *a, const char *b)
{
	if (!a || !*a)
		return !b || !*b;
	return b && strcmp(a, b) == 0;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Past a figure at s: digits, with '.' between digits ("12", "0.25", "1.2.3"). */
static const char *skip_figure(const char *s)
{
	while (is_digit(*s) || (*s == '.' && is_digit(s[1]) && is_digit(s[-1])))
		s++;
	return s;
}

/* Whether a and b say the same but for their figures: "samples 10, 0.2%" and "samples 12,
 * 0.3%" do; "loading" and "sampling", "1 capture" and "1 capture sampling" do not. */
bool agent_health_same_words(const char *a, const char *b)
{
	a = a ? a : "";
	b = b ? b : "";
	for (;;) {
		bool fa = is_digit(*a), fb = is_digit(*b);
		if (fa != fb)
			return false;
		if (fa) {
			a = skip_figure(a);
			b = skip_figure(b);
			continue;
		}
		if (*a != *b)
			return false;
		if (!*a)
			return true;
		a++;
		b++;
	}
}

int agent_health_set(struct agent_health *h, const char *name, bool healthy, const char *status,
		     const char *last_error)
{
	int r = 0;
	pthread_mutex_lock(&h->lock);
	uint64_t gen = h->state_generation;
	struct component *c = find(h, name);
	if (!c) {
		r = -ENOENT;
		goto out;
	}
	if (c->healthy == healthy && str_same(c->status, status) &&
	    str_same(c->last_error, last_error))
		goto out;
	char *s = strdup(status ? status : "");
	char *e = last_error && *last_error ? strdup(last_error) : NULL;
	if (!s || (last_error && *last_error && !e)) {
		free(s);
		free(e);
		r = -ENOMEM;
		goto out;
	}
	bool state = c->healthy != healthy || !str_same(c->last_error, last_error) ||
		     !agent_health_same_words(c->status, status);
	free(c->status);
	free(c->last_error);
	c->status = s;
	c->last_error = e;
	c->healthy = healthy;
	c->status_ns = agent_now_unix_nano();
	h->generation++;
	if (state)
		h->state_generation++;
out:
	unlock_notify(h, gen);
	return r;
}

int agent_health_unregister(struct agent_health *h, const char *name)
{
	int r = -ENOENT;
	pthread_mutex_lock(&h->lock);
	uint64_t gen = h->state_generation;
	struct component *c = find(h, name);
	if (c) {
		comp_release(c);
		size_t i = (size_t)(c - h->comp);
		memmove(&h->comp[i], &h->comp[i + 1], (h->n - i - 1) * sizeof(h->comp[0]));
		h->n--;
		memset(&h->comp[h->n], 0, sizeof(h->comp[0]));
		h->generation++;
		h->state_generation++;
		r = 0;
	}
	unlock_notify(h, gen);
	return r;
}

void agent_health_tree_release(struct pf_health *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n_children; i++) {
		free(t->children[i].name);
		agent_health_tree_release(&t->children[i].health);
	}
	free(t->children);
	free(t->status);
	free(t->last_error);
	memset(t, 0, sizeof(*t));
}

int agent_health_build(struct agent_health *h, struct pf_health *out)
{
	struct pf_buf degraded;
	const char *first_error = NULL, *first_error_name = NULL;
	int r = 0;

	memset(out, 0, sizeof(*out));
	pf_buf_init(&degraded, 4096);
	pthread_mutex_lock(&h->lock);
	out->healthy = true;
	out->start_time_unix_nano = h->start_ns;
	out->status_time_unix_nano = h->start_ns;
	if (h->n) {
		out->children = calloc(h->n, sizeof(*out->children));
		if (!out->children) {
			r = -ENOMEM;
			goto out;
		}
	}
	for (size_t i = 0; i < h->n; i++) {
		const struct component *c = &h->comp[i];
		struct pf_health_entry *e = &out->children[i];
		out->n_children++;
		e->name = strdup(c->name);
		e->health.status = strdup(c->status ? c->status : "");
		e->health.last_error = c->last_error ? strdup(c->last_error) : NULL;
		if (!e->name || !e->health.status || (c->last_error && !e->health.last_error)) {
			r = -ENOMEM;
			goto out;
		}
		e->health.healthy = c->healthy;
		e->health.start_time_unix_nano = c->start_ns;
		e->health.status_time_unix_nano = c->status_ns;
		if (c->status_ns > out->status_time_unix_nano)
			out->status_time_unix_nano = c->status_ns;
		if (!c->healthy) {
			out->healthy = false;
			pf_buf_printf(&degraded, "%s%s",
				      degraded.len ? ", " : "degraded: ", c->name);
			if (!first_error && c->last_error) {
				first_error = c->last_error;
				first_error_name = c->name;
			}
		}
	}
	out->status = strdup(out->healthy ? "running" : pf_buf_str(&degraded));
	if (!out->status) {
		r = -ENOMEM;
		goto out;
	}
	if (first_error) {
		struct pf_buf eb;
		pf_buf_init(&eb, 4096);
		if (pf_buf_printf(&eb, "%s: %s", first_error_name, first_error) < 0) {
			pf_buf_release(&eb);
			r = -ENOMEM;
			goto out;
		}
		out->last_error = (char *)pf_buf_detach(&eb, NULL);
	}
out:
	pthread_mutex_unlock(&h->lock);
	pf_buf_release(&degraded);
	if (r < 0)
		agent_health_tree_release(out);
	return r;
}

uint64_t agent_health_generation(struct agent_health *h)
{
	pthread_mutex_lock(&h->lock);
	uint64_t g = h->generation;
	pthread_mutex_unlock(&h->lock);
	return g;
}

uint64_t agent_health_state_generation(struct agent_health *h)
{
	pthread_mutex_lock(&h->lock);
	uint64_t g = h->state_generation;
	pthread_mutex_unlock(&h->lock);
	return g;
}
