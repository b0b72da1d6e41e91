/* test_query_pool.c — profstore/query_pool.h: jobs run on the workers and come back through
 * the completion queue in order with a notify per job; the waiting queue is bounded
 * (-EAGAIN); a requester that goes away while its job waits, runs or sits finished never gets
 * it back (freed exactly once, a running one only after it finished — it is not cancelled);
 * stop frees what is left; set_notify(NULL) detaches; the workers' connections are
 * read-only and see the writer's committed rows (WAL). Jobs that must be in a given state
 * block on a gate the test opens, so nothing depends on timing; waits have deadlines. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "profstore/query_pool.h"
#include "store.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static bool gate_open;
static int n_notify, n_run, n_free;

struct tjob {
	struct pf_qjob base;
	bool gated;
	int64_t result;
};

static void reset(void)
{
	pthread_mutex_lock(&mu);
	gate_open = false;
	n_notify = n_run = n_free = 0;
	pthread_mutex_unlock(&mu);
}

static void open_gate(void)
{
	pthread_mutex_lock(&mu);
	gate_open = true;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

static void run(struct pf_qjob *b, struct pf_store *st)
{
	struct tjob *j = (struct tjob *)b;
	(void)st;
	pthread_mutex_lock(&mu);
	n_run++;
	pthread_cond_broadcast(&cv);
	while (j->gated && !gate_open)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	j->result = (int64_t)b->handle * 2;
}

static void jfree(struct pf_qjob *b)
{
	pthread_mutex_lock(&mu);
	n_free++;
	pthread_mutex_unlock(&mu);
	free(b);
}

static void notify(void *ud)
{
	(void)ud;
	/* called with the pool's lock held: ours is a different one */
	pthread_mutex_lock(&mu);
	n_notify++;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

static struct tjob *mk(uint64_t handle, bool gated)
{
	struct tjob *j = calloc(1, sizeof(*j));
	assert_non_null(j);
	j->base.handle = handle;
	j->base.run = run;
	j->base.free = jfree;
	j->gated = gated;
	return j;
}

/* Waits (5 s deadline) until *counter >= want. */
static void wait_count(int *counter, int want)
{
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 5;
	pthread_mutex_lock(&mu);
	while (*counter < want) {
		if (pthread_cond_timedwait(&cv, &mu, &dl) == ETIMEDOUT)
			break;
	}
	int got = *counter;
	pthread_mutex_unlock(&mu);
	assert_true(got >= want);
}

/* Waits (5 s deadline) until the pool has completed and dropped at least that many jobs. */
static void wait_stats(struct pf_qpool *p, uint64_t completed, uint64_t dropped)
{
	struct pf_qpool_stats s;
	for (int i = 0; i < 5000; i++) {
		pf_qpool_stats(p, &s);
		if (s.completed >= completed && s.dropped >= dropped)
			return;
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	fail_msg("pool stats: completed %llu dropped %llu", (unsigned long long)s.completed,
		 (unsigned long long)s.dropped);
}

static struct pf_qpool *start(unsigned threads, size_t max_queued)
{
	struct pf_qpool_options o = {.threads = threads, .max_queued = max_queued};
	struct pf_error err = {0};
	struct pf_qpool *p = pf_qpool_start(&o, &err);
	assert_non_null(p);
	pf_qpool_set_notify(p, notify, NULL);
	return p;
}

static void test_completion_queue_order_and_notify(void **state)
{
	(void)state;
	reset();
	struct pf_qpool *p = start(1, 0);
	assert_int_equal(pf_qpool_threads(p), 1);
	for (uint64_t h = 1; h <= 10; h++)
		assert_int_equal(pf_qpool_submit(p, &mk(h, false)->base), 0);
	wait_count(&n_notify, 10);
	for (uint64_t h = 1; h <= 10; h++) {
		struct tjob *j = (struct tjob *)pf_qpool_take(p);
		assert_non_null(j);
		assert_int_equal(j->base.handle, h); /* one worker: first in, first out */
		assert_int_equal(j->result, (int64_t)h * 2);
		assert_true(j->base.queued_us <= j->base.started_us);
		assert_true(j->base.started_us <= j->base.done_us);
		j->base.free(&j->base);
	}
	assert_null(pf_qpool_take(p));
	struct pf_qpool_stats s;
	pf_qpool_stats(p, &s);
	assert_int_equal(s.submitted, 10);
	assert_int_equal(s.completed, 10);
	assert_int_equal(s.waiting + s.running + s.done, 0);
	pf_qpool_stop(p);
	assert_int_equal(n_free, 10);

	/* bad jobs */
	p = start(0, 0);
	assert_int_equal(pf_qpool_threads(p), PF_QPOOL_DEFAULT_THREADS);
	struct tjob *j = mk(0, false);
	assert_int_equal(pf_qpool_submit(p, &j->base), -EINVAL); /* handle 0 */
	j->base.handle = 1;
	j->base.run = NULL;
	assert_int_equal(pf_qpool_submit(p, &j->base), -EINVAL);
	free(j);
	pf_qpool_stop(p);
	struct pf_qpool_options o = {.threads = PF_QPOOL_MAX_THREADS + 1};
	struct pf_error err = {0};
	assert_null(pf_qpool_start(&o, &err));
	assert_int_equal(err.code, -EINVAL);
}

static void test_queue_bound(void **state)
{
	(void)state;
	reset();
	struct pf_qpool *p = start(1, 2);
	assert_int_equal(pf_qpool_submit(p, &mk(1, true)->base), 0);
	wait_count(&n_run, 1); /* job 1 is running, so it no longer counts */
	assert_int_equal(pf_qpool_submit(p, &mk(2, false)->base), 0);
	assert_int_equal(pf_qpool_submit(p, &mk(3, false)->base), 0);
	struct tjob *extra = mk(4, false);
	assert_int_equal(pf_qpool_submit(p, &extra->base), -EAGAIN);
	free(extra); /* still ours */
	struct pf_qpool_stats s;
	pf_qpool_stats(p, &s);
	assert_int_equal(s.rejected, 1);
	assert_int_equal(s.waiting, 2);
	assert_int_equal(s.running, 1);
	open_gate();
	wait_count(&n_notify, 3);
	for (int i = 0; i < 3; i++) {
		struct pf_qjob *j = pf_qpool_take(p);
		assert_non_null(j);
		j->free(j);
	}
	pf_qpool_stop(p);
	assert_int_equal(n_free, 3);
}

/* max_queued_bytes: waiting jobs' summed cost is bounded; one job of any cost may wait alone;
 * a job that leaves the queue (runs, or is forgotten) gives its bytes back. */
static void test_queue_bytes_bound(void **state)
{
	(void)state;
	reset();
	struct pf_qpool_options o = {.threads = 1, .max_queued = 100, .max_queued_bytes = 1000};
	struct pf_error err = {0};
	struct pf_qpool *p = pf_qpool_start(&o, &err);
	assert_non_null(p);
	pf_qpool_set_notify(p, notify, NULL);
	struct tjob *j1 = mk(1, true);
	j1->base.cost = 5000;
	assert_int_equal(pf_qpool_submit(p, &j1->base), 0);
	wait_count(&n_run, 1); /* running: its bytes no longer wait */
	struct tjob *big = mk(2, false);
	big->base.cost = 5000; /* over the bound, but nothing waits: accepted */
	assert_int_equal(pf_qpool_submit(p, &big->base), 0);
	struct tjob *small = mk(3, false);
	small->base.cost = 1;
	assert_int_equal(pf_qpool_submit(p, &small->base), -EAGAIN);
	struct pf_qpool_stats s;
	pf_qpool_stats(p, &s);
	assert_int_equal(s.waiting, 1);
	assert_int_equal(s.waiting_bytes, 5000);
	pf_qpool_forget(p, 2); /* the big one leaves the queue: its bytes are free again */
	pf_qpool_stats(p, &s);
	assert_int_equal(s.waiting_bytes, 0);
	small->base.cost = 600;
	assert_int_equal(pf_qpool_submit(p, &small->base), 0);
	struct tjob *j4 = mk(4, false);
	j4->base.cost = 400; /* 600 + 400 = the bound exactly */
	assert_int_equal(pf_qpool_submit(p, &j4->base), 0);
	struct tjob *j5 = mk(5, false);
	j5->base.cost = 1;
	assert_int_equal(pf_qpool_submit(p, &j5->base), -EAGAIN);
	free(j5);
	pf_qpool_stats(p, &s);
	assert_int_equal(s.waiting_bytes, 1000);
	assert_int_equal(s.rejected, 2);
	open_gate();
	wait_count(&n_notify, 3);
	for (int i = 0; i < 3; i++) {
		struct pf_qjob *j = pf_qpool_take(p);
		assert_non_null(j);
		j->free(j);
	}
	pf_qpool_stats(p, &s);
	assert_int_equal(s.waiting_bytes, 0);
	pf_qpool_stop(p);
}

/* The server's disconnect case: the connection closes while its query runs. */
static void test_forget_running_completes_and_is_dropped(void **state)
{
	(void)state;
	reset();
	struct pf_qpool *p = start(1, 4);
	assert_int_equal(pf_qpool_submit(p, &mk(7, true)->base), 0);
	assert_int_equal(pf_qpool_submit(p, &mk(8, false)->base), 0);
	wait_count(&n_run, 1);
	pf_qpool_forget(p, 7);   /* running: not cancelled, not freed yet */
	pf_qpool_forget(p, 999); /* unknown: ignored */
	pf_qpool_forget(p, 0);
	pthread_mutex_lock(&mu);
	assert_int_equal(n_free, 0);
	pthread_mutex_unlock(&mu);
	open_gate();
	wait_count(&n_notify, 1); /* job 8's; job 7 finished first without a notify */
	wait_stats(p, 2, 1);
	assert_int_equal(n_run, 2);
	assert_int_equal(n_free, 1); /* job 7, by its worker */
	struct pf_qjob *j = pf_qpool_take(p);
	assert_non_null(j);
	assert_int_equal(j->handle, 8);
	j->free(j);
	assert_null(pf_qpool_take(p));
	pf_qpool_stop(p);
	assert_int_equal(n_free, 2);
	assert_int_equal(n_notify, 1);
}

static size_t batch_sizes[8], n_batches;

static void run_batch(struct pf_qjob **jobs, size_t n, struct pf_store *st)
{
	pthread_mutex_lock(&mu);
	if (n_batches < 8)
		batch_sizes[n_batches++] = n;
	pthread_mutex_unlock(&mu);
	for (size_t i = 0; i < n; i++)
		run(jobs[i], st);
}

/* A worker takes the jobs with run_batch queued behind the one it takes, up to batch_max,
 * and stops at a job without it; each is delivered (in order) and a forgotten one of a
 * running batch is dropped. */
static void test_batch(void **state)
{
	(void)state;
	reset();
	n_batches = 0;
	struct pf_qpool_options o = {.threads = 1, .max_queued = 16, .batch_max = 3};
	struct pf_qpool *p = pf_qpool_start(&o, NULL);
	assert_non_null(p);
	pf_qpool_set_notify(p, notify, NULL);
	struct tjob *first = mk(1, true); /* holds the worker while the rest queue */
	assert_int_equal(pf_qpool_submit(p, &first->base), 0);
	wait_count(&n_run, 1);
	for (uint64_t h = 2; h <= 7; h++) {
		struct tjob *j = mk(h, false);
		if (h != 6)
			j->base.run_batch = run_batch;
		assert_int_equal(pf_qpool_submit(p, &j->base), 0);
	}
	pf_qpool_forget(p, 1); /* running */
	open_gate();
	wait_stats(p, 7, 1);
	pthread_mutex_lock(&mu);
	assert_int_equal(n_batches, 3); /* 2,3,4 | 5 | 7 — job 6 runs alone */
	assert_int_equal(batch_sizes[0], 3);
	assert_int_equal(batch_sizes[1], 1);
	assert_int_equal(batch_sizes[2], 1);
	pthread_mutex_unlock(&mu);
	for (uint64_t h = 2; h <= 7; h++) {
		struct pf_qjob *j = pf_qpool_take(p);
		assert_non_null(j);
		assert_int_equal(j->handle, h);
		assert_int_equal(((struct tjob *)j)->result, (int64_t)h * 2);
		j->free(j);
	}
	assert_null(pf_qpool_take(p));
	pf_qpool_stop(p);
	assert_int_equal(n_free, 7);
}

static void test_forget_waiting_and_finished(void **state)
{
	(void)state;
	reset();
	struct pf_qpool *p = start(1, 4);
	assert_int_equal(pf_qpool_submit(p, &mk(1, true)->base), 0);
	wait_count(&n_run, 1);
	assert_int_equal(pf_qpool_submit(p, &mk(2, false)->base), 0);
	assert_int_equal(pf_qpool_submit(p, &mk(3, false)->base), 0);
	pf_qpool_forget(p, 2); /* waiting: freed now, never runs */
	assert_int_equal(n_free, 1);
	open_gate();
	wait_count(&n_notify, 2);
	pf_qpool_forget(p, 1); /* finished, not taken: freed now */
	assert_int_equal(n_free, 2);
	struct pf_qjob *j = pf_qpool_take(p);
	assert_non_null(j);
	assert_int_equal(j->handle, 3);
	j->free(j);
	assert_null(pf_qpool_take(p));
	assert_int_equal(n_run, 2);
	struct pf_qpool_stats s;
	pf_qpool_stats(p, &s);
	assert_int_equal(s.dropped, 2);
	pf_qpool_stop(p);
	assert_int_equal(n_free, 3);
}

static void test_stop_frees_and_detach(void **state)
{
	(void)state;
	reset();
	struct pf_qpool *p = start(1, 8);
	assert_int_equal(pf_qpool_submit(p, &mk(1, false)->base), 0);
	wait_count(&n_notify, 1);
	pf_qpool_set_notify(p, NULL, NULL);
	assert_int_equal(pf_qpool_submit(p, &mk(2, true)->base), 0);
	wait_count(&n_run, 2);
	for (uint64_t h = 3; h <= 6; h++)
		assert_int_equal(pf_qpool_submit(p, &mk(h, false)->base), 0);
	open_gate();
	/* stop: job 2 finishes (no notify: detached), 1 and 2 are not taken, some of 3..6
	 * may still wait: all freed exactly once */
	pf_qpool_stop(p);
	assert_int_equal(n_free, 6);
	assert_int_equal(n_notify, 1);
	pf_qpool_stop(NULL);
}

/* Workers' connections: their own, read-only, and they see what the writer committed. */
struct store_job {
	struct pf_qjob base;
	int64_t count;
	int insert_rc, totals_rc;
};

static void store_run(struct pf_qjob *b, struct pf_store *st)
{
	struct store_job *j = (struct store_job *)b;
	int64_t bytes;
	if (!st) {
		j->totals_rc = -EFAULT; /* no cmocka asserts off the test's thread */
		return;
	}
	j->totals_rc = pf_store_profiles_totals(st, &j->count, &bytes);
	struct pf_profile_row r = {.agent = "a", .service = "s", .host = "h", .exe = "e",
				   .type = "cpu", .body = "x", .body_len = 1};
	j->insert_rc = pf_store_profiles_insert(st, &r, 1, NULL, 0, NULL);
}

static void store_free(struct pf_qjob *b)
{
	free(b);
}

static void test_real_store_read_only(void **state)
{
	(void)state;
	reset();
	char dir[64] = "/tmp/pf-test-qpool-XXXXXX", db[128], cmd[160];
	assert_non_null(mkdtemp(dir));
	snprintf(db, sizeof(db), "%s/db", dir);
	struct pf_error err = {0};
	struct pf_store *w = pf_store_open(db, PF_STORE_SYNC_NORMAL, &err);
	assert_non_null(w);
	struct pf_qpool_options o = {.db_path = db, .threads = 2};
	struct pf_qpool *p = pf_qpool_start(&o, &err);
	assert_non_null(p);
	pf_qpool_set_notify(p, notify, NULL);
	/* committed after the pool opened its connections */
	for (int i = 0; i < 3; i++) {
		struct pf_profile_row r = {.agent = "a", .service = "s", .host = "h", .exe = "e",
					   .type = "cpu", .start_ns = i, .body = "xyz",
					   .body_len = 3};
		assert_int_equal(pf_store_profiles_insert(w, &r, 1, NULL, 0, NULL), 0);
	}
	for (uint64_t h = 1; h <= 2; h++) {
		struct store_job *j = calloc(1, sizeof(*j));
		j->base = (struct pf_qjob){.handle = h, .run = store_run, .free = store_free};
		assert_int_equal(pf_qpool_submit(p, &j->base), 0);
	}
	wait_count(&n_notify, 2);
	for (int i = 0; i < 2; i++) {
		struct store_job *j = (struct store_job *)pf_qpool_take(p);
		assert_non_null(j);
		assert_int_equal(j->totals_rc, 0);
		assert_int_equal(j->count, 3);
		assert_true(j->insert_rc < 0); /* query_only */
		j->base.free(&j->base);
	}
	pf_qpool_stop(p);
	int64_t n, bytes;
	assert_int_equal(pf_store_profiles_totals(w, &n, &bytes), 0);
	assert_int_equal(n, 3);
	pf_store_close(w);

	/* a path that cannot be opened fails at start */
	o.db_path = "/nonexistent-dir/x/db";
	memset(&err, 0, sizeof(err));
	assert_null(pf_qpool_start(&o, &err));
	assert_true(err.code < 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_completion_queue_order_and_notify),
		cmocka_unit_test(test_queue_bound),
		cmocka_unit_test(test_forget_running_completes_and_is_dropped),
		cmocka_unit_test(test_forget_waiting_and_finished),
		cmocka_unit_test(test_queue_bytes_bound),
		cmocka_unit_test(test_stop_frees_and_detach),
		cmocka_unit_test(test_batch),
		cmocka_unit_test(test_real_store_read_only),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
