/* query_pool.c — see query_pool.h. */
#include "query_pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pf/compiler.h"
#include "store.h"

struct worker {
	struct pf_qpool *pool;
	pthread_t thread;
	bool started;
	struct pf_store *st;
	struct pf_qjob *running[PF_QPOOL_MAX_BATCH]; /* under pool->mu */
	size_t n_running;
};

struct pf_qpool {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stopping;
	size_t batch_max;
	size_t max_queued;
	size_t max_queued_bytes;
	struct pf_qjob *wait_head, *wait_tail;
	struct pf_qjob *done_head, *done_tail;
	void (*notify)(void *ud);
	void *notify_ud;
	struct pf_qpool_stats stats;
	unsigned n_workers;
	struct worker workers[];
};

static int64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void push(struct pf_qjob **head, struct pf_qjob **tail, struct pf_qjob *j)
{
	j->next = NULL;
	if (*tail)
		(*tail)->next = j;
	else
		*head = j;
	*tail = j;
}

static struct pf_qjob *pop(struct pf_qjob **head, struct pf_qjob **tail)
{
	struct pf_qjob *j = *head;
	if (j) {
		*head = j->next;
		if (!*head)
			*tail = NULL;
		j->next = NULL;
	}
	return j;
}

/* Unlinks the job with handle from a list; NULL when absent. */
static struct pf_qjob *unlink_handle(struct pf_qjob **head, struct pf_qjob **tail, uint64_t h)
{
	struct pf_qjob *prev = NULL;
	for (struct pf_qjob *j = *head; j; prev = j, j = j->next) {
		if (j->handle != h)
			continue;
		if (prev)
			prev->next = j->next;
		else
			*head = j->next;
		if (*tail == j)
			*tail = prev;
		j->next = NULL;
		return j;
	}
	return NULL;
}

/* Under p->mu: takes the next waiting job and, when it has run_batch, those queued right
 * behind it with the same run_batch (up to batch_max), into w->running. */
static void take_jobs(struct pf_qpool *p, struct worker *w)
{
	struct pf_qjob *j = pop(&p->wait_head, &p->wait_tail);
	w->n_running = 0;
	for (;;) {
		p->stats.waiting--;
		p->stats.waiting_bytes -= j->cost;
		p->stats.running++;
		w->running[w->n_running++] = j;
		struct pf_qjob *next = p->wait_head;
		if (!j->run_batch || w->n_running >= p->batch_max || !next ||
		    next->run_batch != j->run_batch)
			break;
		j = pop(&p->wait_head, &p->wait_tail);
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct pf_qpool *p = w->pool;
	struct pf_qjob *jobs[PF_QPOOL_MAX_BATCH];

	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->stopping && !p->wait_head)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->stopping)
			break;
		take_jobs(p, w);
		size_t n = w->n_running;
		memcpy(jobs, w->running, n * sizeof(jobs[0]));
		pthread_mutex_unlock(&p->mu);

		int64_t t = mono_us();
		for (size_t i = 0; i < n; i++)
			jobs[i]->started_us = t;
		if (n > 1 || jobs[0]->run_batch)
			jobs[0]->run_batch(jobs, n, w->st);
		else
			jobs[0]->run(jobs[0], w->st);
		t = mono_us();

		pthread_mutex_lock(&p->mu);
		w->n_running = 0;
		for (size_t i = 0; i < n; i++) {
			struct pf_qjob *j = jobs[i];
			j->done_us = t;
			p->stats.running--;
			p->stats.completed++;
			if (j->forgotten) {
				p->stats.dropped++;
				/* Its requester is gone: freed here, never delivered. */
				pthread_mutex_unlock(&p->mu);
				j->free(j);
				pthread_mutex_lock(&p->mu);
				continue;
			}
			push(&p->done_head, &p->done_tail, j);
			p->stats.done++;
			/* Called with the lock held so that set_notify(NULL) is a barrier. */
			if (p->notify)
				p->notify(p->notify_ud);
		}
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

struct pf_qpool *pf_qpool_start(const struct pf_qpool_options *opt, struct pf_error *err)
{
	unsigned n = opt->threads ? opt->threads : PF_QPOOL_DEFAULT_THREADS;
	if (n > PF_QPOOL_MAX_THREADS) {
		pf_error_set(err, -EINVAL, "threads", "must be 1..%d, got %u", PF_QPOOL_MAX_THREADS,
			     n);
		errno = EINVAL;
		return NULL;
	}
	struct pf_qpool *p = calloc(1, sizeof(*p) + n * sizeof(struct worker));
	if (!p) {
		pf_error_set(err, -ENOMEM, NULL, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	int code = 0;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->max_queued = opt->max_queued ? opt->max_queued : PF_QPOOL_DEFAULT_QUEUE;
	p->batch_max = opt->batch_max > 1 ? pf_min(opt->batch_max, PF_QPOOL_MAX_BATCH) : 1;
	p->max_queued_bytes = opt->max_queued_bytes;
	p->n_workers = n;
	for (unsigned i = 0; i < n; i++) {
		struct worker *w = &p->workers[i];
		w->pool = p;
		if (!opt->db_path)
			continue;
		/* Opened here so that failures are reported to the caller; from now on only
		 * worker i uses it (store.h: one thread at a time). */
		w->st = pf_store_open_url(opt->db_path, opt->fleet_url,
					  opt->writer ? PF_STORE_SYNC_FULL : PF_STORE_SYNC_NORMAL, err);
		if (!w->st) {
			code = -errno;
			goto fail;
		}
		if (opt->retention)
			pf_store_profiles_set_retention(w->st, opt->retention);
		code = opt->writer ? 0 : pf_store_set_read_only(w->st);
		if (code < 0) {
			pf_error_set(err, code, NULL, "%s", pf_store_last_error(w->st));
			goto fail;
		}
	}
	for (unsigned i = 0; i < n; i++) {
		struct worker *w = &p->workers[i];
		int rc = pthread_create(&w->thread, NULL, worker_main, w);
		if (rc) {
			code = -rc;
			pf_error_set(err, code, NULL, "cannot start a query thread: %s",
				     strerror(rc));
			goto fail;
		}
		w->started = true;
	}
	return p;
fail:
	pf_qpool_stop(p);
	errno = code < 0 ? -code : EIO;
	return NULL;
}

static void free_list(struct pf_qjob *j)
{
	while (j) {
		struct pf_qjob *next = j->next;
		j->free(j);
		j = next;
	}
}

void pf_qpool_stop(struct pf_qpool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stopping = true;
	p->notify = NULL;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < p->n_workers; i++)
		if (p->workers[i].started)
			pthread_join(p->workers[i].thread, NULL);
	/* No thread left: no lock needed. */
	free_list(p->wait_head);
	free_list(p->done_head);
	for (unsigned i = 0; i < p->n_workers; i++)
		pf_store_close(p->workers[i].st);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

void pf_qpool_set_notify(struct pf_qpool *p, void (*notify)(void *ud), void *ud)
{
	pthread_mutex_lock(&p->mu);
	p->notify = notify;
	p->notify_ud = ud;
	pthread_mutex_unlock(&p->mu);
}

int pf_qpool_submit(struct pf_qpool *p, struct pf_qjob *job)
{
	if (!job || !job->handle || !job->run || !job->free)
		return -EINVAL;
	pthread_mutex_lock(&p->mu);
	int rc = 0;
	if (p->stopping) {
		rc = -ESHUTDOWN;
	} else if (p->stats.waiting >= p->max_queued ||
		   (p->max_queued_bytes && p->stats.waiting &&
		    job->cost > p->max_queued_bytes - pf_min(p->stats.waiting_bytes,
							      p->max_queued_bytes))) {
		p->stats.rejected++;
		rc = -EAGAIN;
	} else {
		job->forgotten = false;
		job->queued_us = mono_us();
		job->started_us = job->done_us = 0;
		push(&p->wait_head, &p->wait_tail, job);
		p->stats.waiting++;
		p->stats.waiting_bytes += job->cost;
		p->stats.submitted++;
		pthread_cond_signal(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return rc;
}

struct pf_qjob *pf_qpool_take(struct pf_qpool *p)
{
	pthread_mutex_lock(&p->mu);
	struct pf_qjob *j = pop(&p->done_head, &p->done_tail);
	if (j)
		p->stats.done--;
	pthread_mutex_unlock(&p->mu);
	return j;
}

void pf_qpool_forget(struct pf_qpool *p, uint64_t handle)
{
	struct pf_qjob *drop = NULL;

	if (!handle)
		return;
	pthread_mutex_lock(&p->mu);
	drop = unlink_handle(&p->wait_head, &p->wait_tail, handle);
	if (drop) {
		p->stats.waiting--;
		p->stats.waiting_bytes -= drop->cost;
	} else if ((drop = unlink_handle(&p->done_head, &p->done_tail, handle))) {
		p->stats.done--;
	} else {
		for (unsigned i = 0; i < p->n_workers; i++) {
			struct worker *w = &p->workers[i];
			for (size_t k = 0; k < w->n_running; k++)
				if (w->running[k]->handle == handle)
					w->running[k]->forgotten = true; /* freed by its worker */
		}
	}
	if (drop)
		p->stats.dropped++;
	pthread_mutex_unlock(&p->mu);
	if (drop)
		drop->free(drop);
}

void pf_qpool_stats(struct pf_qpool *p, struct pf_qpool_stats *out)
{
	pthread_mutex_lock(&p->mu);
	*out = p->stats;
	pthread_mutex_unlock(&p->mu);
}

unsigned pf_qpool_threads(const struct pf_qpool *p)
{
	return p->n_workers;
}
