/* test_thread.c — pf/thread.h: pf_thread_stop() wakes a worker asleep on its condition
 * variable, which sees the stop flag set and ends; the call returns once it has been joined. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "pf/thread.h"

struct worker {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop, waiting, saw_stop;
	unsigned wakeups;
};

static void *run(void *arg)
{
	struct worker *w = arg;
	pthread_mutex_lock(&w->mu);
	w->waiting = true;
	pthread_cond_broadcast(&w->cv);
	while (!w->stop) {
		pthread_cond_wait(&w->cv, &w->mu);
		w->wakeups++;
	}
	w->saw_stop = true;
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static void stops_a_sleeping_worker(void **state)
{
	(void)state;
	struct worker w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, run, &w), 0);
	/* wait until the worker sleeps on cv, so that only the stop can wake it */
	pthread_mutex_lock(&w.mu);
	while (!w.waiting)
		pthread_cond_wait(&w.cv, &w.mu);
	pthread_mutex_unlock(&w.mu);
	pf_thread_stop(&w.mu, &w.cv, &w.stop, t);
	/* joined: the worker's last writes are visible without the mutex */
	assert_true(w.stop);
	assert_true(w.saw_stop);
	assert_true(w.wakeups >= 1);
	pthread_cond_destroy(&w.cv);
	pthread_mutex_destroy(&w.mu);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(stops_a_sleeping_worker),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
