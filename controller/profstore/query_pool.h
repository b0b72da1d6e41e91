/* query_pool.h — a small pool of worker threads for the profile store's heavy read queries
 * (merged flame graphs, top, diff, one-profile views, the profile list), so that they never
 * hold the controller's event loop: a merged flame graph of 200 profiles takes ≈ 0.3 s,
 * during which heartbeats and every other request would wait (docs/benchmarks.md).
 *
 * Each worker owns its own store connection (store.h: one connection per thread), opened on
 * the database file and made read-only (pf_store_set_read_only): in WAL mode readers neither
 * block the loop's writer nor wait for it. The same pool with `writer` set and one thread is
 * the OTLP receiver's writer (decode, re-encode, gzip and the synchronous=FULL insert of
 * pf_profstore_ingest() off the loop).
 *
 * The pool knows nothing about HTTP. A job is a caller-embedded struct pf_qjob with a run
 * function (called on a worker, with that worker's connection) and a free function. Finished
 * jobs go on a mutex-protected completion queue; after queueing one the worker calls the
 * notify hook (the server's is lws_cancel_service(), the one lws call safe from another
 * thread), and the loop takes the finished jobs with pf_qpool_take().
 *
 * Bounded: at most max_queued jobs, holding at most max_queued_bytes, wait for a worker;
 * pf_qpool_submit() says -EAGAIN beyond that (the server answers 503 with Retry-After). Nothing is cancelled mid-run: when the
 * requester goes away (a client that disconnects), the loop calls pf_qpool_forget() with the
 * job's handle; a job still waiting is dropped at once, a running one completes and is freed
 * instead of being delivered, so pf_qpool_take() never returns a forgotten job and the loop
 * never touches a connection that is gone.
 *
 * Threads: pf_qpool_submit/take/forget/stats/set_notify may be called from any thread, but
 * the forget-then-never-taken guarantee holds for the thread that calls both (the loop).
 *
 * Owns: the worker threads, their store connections, the waiting and completion queues, and
 * every job from a successful submit until take hands it back (then the caller frees it with
 * job->free) or the pool frees it (forgotten, or still queued at stop). */
#ifndef PF_PROFSTORE_QUERY_POOL_H
#define PF_PROFSTORE_QUERY_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/error.h"

struct pf_store;

#define PF_QPOOL_DEFAULT_THREADS 2
#define PF_QPOOL_MAX_THREADS 16
#define PF_QPOOL_DEFAULT_QUEUE 16 /* jobs waiting for a worker (running ones not counted) */
#define PF_QPOOL_MAX_BATCH 64

struct pf_qjob {
	uint64_t handle; /* the caller's; non-zero, unique among the pool's live jobs */
	/* Runs on a worker; st is the worker's read-only connection (NULL when the pool was
	 * started without a database). */
	void (*run)(struct pf_qjob *job, struct pf_store *st);
	/* Optional, on a pool with batch_max > 1: runs jobs[0..n) together (the receiver's
	 * group commit); a worker that takes a job with run_batch also takes the jobs queued
	 * right behind it with the same run_batch, up to batch_max. */
	void (*run_batch)(struct pf_qjob **jobs, size_t n, struct pf_store *st);
	void (*free)(struct pf_qjob *job);
	/* Bytes the job holds while it waits (its request body), counted against
	 * max_queued_bytes; 0 when not counted. */
	size_t cost;
	/* Filled by the pool, CLOCK_MONOTONIC µs. */
	int64_t queued_us, started_us, done_us;
	/* Pool-private. */
	struct pf_qjob *next;
	bool forgotten;
};

struct pf_profile_retention;

struct pf_qpool_options {
	const char *db_path; /* NULL: no connections (st == NULL in run; for tests) */
	/* The postgres:// URL of the shared fleet tables (NULL: SQLite): the API requests run
	 * on the pool authenticate against them. */
	const char *fleet_url;
	/* false: read-only connections (the query pool). true: writable synchronous=FULL
	 * connections with `retention` set (the receiver's writer: one thread). */
	bool writer;
	const struct pf_profile_retention *retention;
	unsigned threads;    /* 0 = PF_QPOOL_DEFAULT_THREADS, at most PF_QPOOL_MAX_THREADS */
	size_t max_queued;   /* 0 = PF_QPOOL_DEFAULT_QUEUE */
	/* Bound on the summed cost of the waiting jobs (0 = none): a job that would pass it is
	 * refused with -EAGAIN unless nothing waits (one job of any size may always wait). */
	size_t max_queued_bytes;
	/* Jobs with run_batch a worker takes at once: 0 or 1 = one at a time, at most
	 * PF_QPOOL_MAX_BATCH. */
	unsigned batch_max;
};

struct pf_qpool_stats {
	size_t waiting; /* queued, not started */
	size_t waiting_bytes; /* their summed cost */
	size_t running;
	size_t done; /* finished, not taken yet */
	/* dropped: forgotten (never delivered) */
	uint64_t submitted, rejected, completed, dropped;
};

struct pf_qpool;

/* Opens one read-only connection per thread and starts the threads. NULL with err set. */
struct pf_qpool *pf_qpool_start(const struct pf_qpool_options *opt, struct pf_error *err);
/* Stops the threads (running jobs finish first), frees the jobs still waiting or not taken,
 * closes the connections. NULL is allowed. */
void pf_qpool_stop(struct pf_qpool *p);
/* The hook called (from a worker, with the pool's lock held: keep it short and never call
 * back into the pool) after each finished job is queued. notify NULL detaches it: once this
 * returns, the old hook is not running and will not be called again. */
void pf_qpool_set_notify(struct pf_qpool *p, void (*notify)(void *ud), void *ud);
/* Queues job (handle, run and free set). 0; -EAGAIN when max_queued jobs already wait or its
 * cost would pass max_queued_bytes;
 * -EINVAL for a bad job; -ESHUTDOWN after stop began. On error the caller still owns job. */
int pf_qpool_submit(struct pf_qpool *p, struct pf_qjob *job);
/* One finished job (oldest first) or NULL; the caller owns it (free with job->free). */
struct pf_qjob *pf_qpool_take(struct pf_qpool *p);
/* The requester of handle went away: a waiting job is freed now, a running one when it
 * finishes, a finished one not taken yet now. Unknown handles are ignored. */
void pf_qpool_forget(struct pf_qpool *p, uint64_t handle);
void pf_qpool_stats(struct pf_qpool *p, struct pf_qpool_stats *out);
/* Worker count (for logs). */
unsigned pf_qpool_threads(const struct pf_qpool *p);

#endif
