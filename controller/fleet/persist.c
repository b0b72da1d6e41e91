/* persist.c — see persist.h. */
#include "persist.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fleet.h"
#include "pf/buf.h"
#include "pf/list.h"
#include "pf/log.h"
#include "pf/thread.h"
#include "store.h"

#define MAX_QUEUED_ROWS 200000

struct row {
	struct pf_agent_row r;
	char *attrs, *health, *eff, *cfg_name, *err;
};

struct batch {
	struct batch *next;
	size_t n;
	bool seen; /* only uid and last_seen_ms are filled: pf_store_agents_set_seen() */
	struct row rows[];
};

struct pf_persist {
	struct pf_store *st;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv, done_cv;
	struct batch *head, *tail;
	bool stop;
	bool busy;
	size_t queued_rows;
	struct pf_persist_stats stats;
	/* The loop's side (pf_persist_tick), not shared with the writer. */
	int64_t seen_interval_ms;
	int64_t seen_ms;  /* start of the current last_seen period, 0 before the first tick */
	bool seen_more;   /* the last sweep was cut short by max_rows */
};

static void row_release(struct row *w)
{
	free(w->attrs);
	free(w->health);
	free(w->eff);
	free(w->cfg_name);
	free(w->err);
}

static void batch_free(struct batch *b)
{
	for (size_t i = 0; i < b->n; i++)
		row_release(&b->rows[i]);
	free(b);
}

static void *writer_main(void *arg)
{
	struct pf_persist *p = arg;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->head && !p->stop)
			pthread_cond_wait(&p->cv, &p->mu);
		if (!p->head && p->stop)
			break;
		struct batch *b = p->head;
		p->head = b->next;
		if (!p->head)
			p->tail = NULL;
		p->busy = true;
		pthread_mutex_unlock(&p->mu);

		struct pf_agent_row *rows = malloc(b->n * sizeof(*rows));
		int r = -ENOMEM;
		if (rows) {
			for (size_t i = 0; i < b->n; i++)
				rows[i] = b->rows[i].r;
			r = b->seen ? pf_store_agents_set_seen(p->st, rows, b->n)
				    : pf_store_agents_upsert(p->st, rows, b->n);
			free(rows);
		}
		if (r < 0)
			pf_log_error("store: writing %zu agent rows failed: %s", b->n, strerror(-r));

		uint64_t rt = pf_store_round_trips(p->st);
		pthread_mutex_lock(&p->mu);
		p->stats.round_trips = rt;
		p->queued_rows -= b->n;
		if (r < 0) {
			p->stats.errors++;
		} else {
			p->stats.rows_written += b->n;
			p->stats.batches++;
		}
		p->busy = false;
		pthread_cond_broadcast(&p->done_cv);
		pthread_mutex_unlock(&p->mu);
		batch_free(b);
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

struct pf_persist *pf_persist_start(const char *db_path, const char *fleet_url,
				    struct pf_error *err)
{
	struct pf_persist *p = calloc(1, sizeof(*p));
	if (!p) {
		pf_error_set(err, -ENOMEM, NULL, "out of memory");
		return NULL;
	}
	p->st = pf_store_open_url(db_path, fleet_url, PF_STORE_SYNC_NORMAL, err);
	if (!p->st) {
		free(p);
		return NULL;
	}
	p->seen_interval_ms = pf_store_is_shared(p->st) ? PF_PERSIST_SEEN_SHARED_MS
							: PF_PERSIST_SEEN_SOLO_MS;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	pthread_cond_init(&p->done_cv, NULL);
	if (pthread_create(&p->thread, NULL, writer_main, p) != 0) {
		pf_error_set(err, -EAGAIN, NULL, "cannot start the store writer thread");
		pf_store_close(p->st);
		free(p);
		return NULL;
	}
	return p;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

struct fill_ctx {
	struct batch *b;
	struct pf_fleet *f;
};

static void fill_row(struct pf_agent *a, bool full, void *ud)
{
	struct fill_ctx *c = ud;
	struct row *w = &c->b->rows[c->b->n++];
	struct pf_buf attrs;
	memset(w, 0, sizeof(*w));
	if (!full) {
		/* Only last_seen changed (the sweep of a fleet at rest): no copies, no JSON. */
		memcpy(w->r.uid, a->uid, 16);
		w->r.last_seen_ms = a->last_seen_ms;
		return;
	}
	pf_buf_init(&attrs, 1 << 20);
	if (pf_agent_attrs_json(a, &attrs) == 0)
		w->attrs = (char *)pf_buf_detach(&attrs, NULL);
	pf_buf_release(&attrs);
	w->health = dup_or_null(a->health_json);
	w->eff = a->effective ? strndup(a->effective->body, a->effective->len) : NULL;
	w->cfg_name = a->desired ? strdup(a->desired->name) : NULL;
	w->err = dup_or_null(a->remote_error);

	struct pf_agent_row *r = &w->r;
	memcpy(r->uid, a->uid, 16);
	r->attributes_json = w->attrs ? w->attrs : "{}";
	r->capabilities = a->capabilities;
	r->health_json = w->health;
	r->effective_config = w->eff;
	if (a->effective) {
		memcpy(r->effective_hash, a->effective->hash, 32);
		r->has_effective_hash = true;
	}
	r->config_name = w->cfg_name;
	r->config_version = a->desired ? a->desired->version : 0;
	if (a->has_reported_hash) {
		memcpy(r->remote_hash, a->reported_hash, 32);
		r->has_remote_hash = true;
	}
	r->remote_status = a->remote_status;
	r->remote_error = w->err;
	r->connected = a->connected;
	r->first_seen_ms = a->first_seen_ms;
	r->last_seen_ms = a->last_seen_ms;
}

static size_t flush(struct pf_persist *p, struct pf_fleet *f, size_t max_rows, bool seen)
{
	pthread_mutex_lock(&p->mu);
	size_t room = p->queued_rows < MAX_QUEUED_ROWS ? MAX_QUEUED_ROWS - p->queued_rows : 0;
	pthread_mutex_unlock(&p->mu);
	if (max_rows > room)
		max_rows = room;
	/* Sized to what is pending: a fleet at rest allocates nothing. */
	size_t pending = pf_fleet_pending(f, seen);
	if (max_rows > pending)
		max_rows = pending;
	if (!max_rows)
		return 0;
	struct batch *b = malloc(sizeof(*b) + max_rows * sizeof(struct row));
	if (!b)
		return 0;
	b->next = NULL;
	b->n = 0;
	b->seen = seen;
	struct fill_ctx c = {.b = b, .f = f};
	if (seen)
		pf_fleet_drain_seen(f, max_rows, fill_row, &c);
	else
		pf_fleet_drain_dirty(f, max_rows, fill_row, &c);
	if (!b->n) {
		free(b);
		return 0;
	}
	size_t n = b->n;
	pthread_mutex_lock(&p->mu);
	PF_QUEUE_APPEND(p->head, p->tail, b, next);
	p->queued_rows += n;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return n;
}

size_t pf_persist_flush(struct pf_persist *p, struct pf_fleet *f, size_t max_rows)
{
	return flush(p, f, max_rows, false);
}

size_t pf_persist_flush_seen(struct pf_persist *p, struct pf_fleet *f, size_t max_rows)
{
	return flush(p, f, max_rows, true);
}

size_t pf_persist_tick(struct pf_persist *p, struct pf_fleet *f, int64_t now_ms, size_t max_rows)
{
	size_t n = flush(p, f, max_rows, false);
	if (!p->seen_ms || now_ms < p->seen_ms) /* the first tick, or the clock stepped back */
		p->seen_ms = now_ms;
	if (p->seen_more || now_ms - p->seen_ms >= p->seen_interval_ms) {
		if (!p->seen_more)
			p->seen_ms = now_ms;
		n += flush(p, f, max_rows, true);
		/* Cut short (max_rows, the queue bound): the rest goes on the next tick. */
		p->seen_more = pf_fleet_pending(f, true) > 0;
	}
	return n;
}

void pf_persist_stats(struct pf_persist *p, struct pf_persist_stats *out)
{
	pthread_mutex_lock(&p->mu);
	*out = p->stats;
	out->queued_rows = p->queued_rows;
	pthread_mutex_unlock(&p->mu);
}

void pf_persist_sync(struct pf_persist *p)
{
	pthread_mutex_lock(&p->mu);
	while (p->head || p->busy)
		pthread_cond_wait(&p->done_cv, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

void pf_persist_stop(struct pf_persist *p)
{
	if (!p)
		return;
	pf_thread_stop(&p->mu, &p->cv, &p->stop, p->thread);
	while (p->head) {
		struct batch *b = p->head;
		p->head = b->next;
		batch_free(b);
	}
	pf_store_close(p->st);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	pthread_cond_destroy(&p->done_cv);
	free(p);
}
