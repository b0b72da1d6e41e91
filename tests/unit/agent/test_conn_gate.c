/* test_conn_gate.c — agent/endpoints/conn_gate.c: the per-address caps of a local listener
 * (the oldest connection of an address at its cap makes room), the table's slots and the
 * header deadline. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "endpoints/conn_gate.h"

/* Handles are small integers cast to pointers; the odd ones have sent part of a request. */
#define H(i) ((void *)(uintptr_t)(i))

static bool started_all(void *h)
{
	(void)h;
	return true;
}

static bool started_odd(void *h)
{
	return (uintptr_t)h % 2 == 1;
}

static agent_conn_started_fn started = started_all;

static struct agent_conn *open_ok(struct agent_conn_gate *g, const char *addr, int i,
				  int64_t now, void **evict)
{
	struct agent_conn *k = agent_conn_open(g, addr, H(i), now, started, evict);
	assert_non_null(k);
	return k;
}

static void test_pending_cap_evicts_oldest_of_address(void **unused)
{
	(void)unused;
	struct agent_conn_gate *g = calloc(1, sizeof(*g));
	assert_non_null(g);
	void *evict;
	struct agent_conn *k[AGENT_HTTP_PENDING_PRESSURE + 2];
	/* Below the pressure line a burst from one address is taken whole. */
	for (int i = 0; i < AGENT_HTTP_PENDING_PRESSURE; i++) {
		k[i] = open_ok(g, "127.0.0.1", i + 1, 1000 + i, &evict);
		assert_null(evict);
	}
	assert_int_equal(g->n_pending, AGENT_HTTP_PENDING_PRESSURE);
	/* Another address is never charged for it. */
	struct agent_conn *other = open_ok(g, "127.0.0.2", 100, 2000, &evict);
	assert_null(evict);
	/* The next one from the flooding address closes its oldest pending one (handle 1). */
	k[AGENT_HTTP_PENDING_PRESSURE] =
	    open_ok(g, "127.0.0.1", AGENT_HTTP_PENDING_PRESSURE + 1, 3000, &evict);
	assert_ptr_equal(evict, H(1));
	assert_int_equal(g->evicted, 1);
	assert_int_equal(g->n_pending, AGENT_HTTP_PENDING_PRESSURE + 1);
	/* Until its close arrives the victim holds its slot but counts for nobody. */
	k[AGENT_HTTP_PENDING_PRESSURE + 1] =
	    open_ok(g, "127.0.0.1", AGENT_HTTP_PENDING_PRESSURE + 2, 3001, &evict);
	assert_ptr_equal(evict, H(2));
	agent_conn_close(g, k[0]);
	agent_conn_close(g, k[1]);
	assert_int_equal(g->n_pending, AGENT_HTTP_PENDING_PRESSURE + 1);
	/* Connections whose headers are complete do not count against the pending cap. */
	for (int i = 2; i < AGENT_HTTP_PENDING_PRESSURE + 2; i++)
		agent_conn_headers_done(g, k[i]);
	assert_int_equal(g->n_pending, 1);
	open_ok(g, "127.0.0.1", 200, 4000, &evict);
	assert_null(evict);
	agent_conn_headers_done(g, other);
	free(g);
}

static void test_open_cap_and_slots(void **unused)
{
	(void)unused;
	struct agent_conn_gate *g = calloc(1, sizeof(*g));
	assert_non_null(g);
	void *evict;
	/* One address with every connection past its headers: its 17th closes its oldest. */
	for (int i = 0; i < AGENT_HTTP_CONNS_PER_SOURCE; i++) {
		struct agent_conn *k = open_ok(g, "10.0.0.1", i + 1, 1000 + i, &evict);
		assert_null(evict);
		agent_conn_headers_done(g, k);
	}
	open_ok(g, "10.0.0.1", 99, 5000, &evict);
	assert_ptr_equal(evict, H(1));
	/* Every slot taken (many addresses): the next connection is refused, NULL. */
	for (int i = AGENT_HTTP_CONNS_PER_SOURCE + 1; i < AGENT_HTTP_MAX_CONNS; i++) {
		char a[32];
		snprintf(a, sizeof(a), "10.0.1.%d", i);
		struct agent_conn *k = open_ok(g, a, 1000 + i, 6000, &evict);
		agent_conn_headers_done(g, k);
	}
	assert_null(agent_conn_open(g, "10.0.2.1", H(5000), 7000, started, &evict));
	free(g);
}

/* At the pending cap, a connection that sent part of a request goes first, then one past the
 * grace; a young one that sent nothing is never closed for a newer one: the new one is taken
 * over the cap. */
static void test_evicts_who_had_its_chance(void **unused)
{
	(void)unused;
	struct agent_conn_gate *g = calloc(1, sizeof(*g));
	assert_non_null(g);
	started = started_odd;
	void *evict;
	/* handles 2, 4, .. 16: sent nothing, opened at 0 .. 7 ms */
	for (int i = 0; i < AGENT_HTTP_PENDING_PRESSURE; i++)
		open_ok(g, "127.0.0.1", 2 * (i + 2) - 2, i, &evict);
	/* nothing started and nothing past the grace: taken over the cap */
	open_ok(g, "127.0.0.1", 101, 10, &evict); /* then sends a request line */
	assert_null(evict);
	open_ok(g, "127.0.0.1", 103, 11, &evict); /* likewise */
	assert_ptr_equal(evict, H(101));	  /* the oldest started one goes first */
	open_ok(g, "127.0.0.1", 200, 20, &evict);
	assert_ptr_equal(evict, H(103));
	open_ok(g, "127.0.0.1", 202, 21, &evict);
	assert_null(evict);
	/* past the grace the oldest silent one goes */
	open_ok(g, "127.0.0.1", 206, AGENT_HTTP_HEADER_GRACE_MS, &evict);
	assert_ptr_equal(evict, H(2));
	started = started_all;
	free(g);
}

static int expired_n;
static void *expired_last;
static void expired(void *h)
{
	expired_n++;
	expired_last = h;
}

static void test_header_deadline(void **unused)
{
	(void)unused;
	struct agent_conn_gate *g = calloc(1, sizeof(*g));
	assert_non_null(g);
	void *evict;
	struct agent_conn *a = open_ok(g, "::1", 1, 0, &evict);
	struct agent_conn *b = open_ok(g, "::1", 2, 1000, &evict);
	int64_t due = AGENT_HTTP_HEADER_TIMEOUT_S * 1000;
	expired_n = 0;
	agent_conn_sweep(g, due - 1, expired);
	assert_int_equal(expired_n, 0);
	agent_conn_sweep(g, due, expired);
	assert_int_equal(expired_n, 1);
	assert_ptr_equal(expired_last, H(1));
	assert_int_equal(g->header_timeouts, 1);
	agent_conn_sweep(g, due, expired); /* handed over once */
	assert_int_equal(expired_n, 1);
	/* A keep-alive answer: the next request's headers are owed from then on. */
	agent_conn_headers_done(g, b);
	agent_conn_expect_headers(g, b, 10000);
	agent_conn_sweep(g, 10000 + due - 1, expired);
	assert_int_equal(expired_n, 1);
	agent_conn_sweep(g, 10000 + due, expired);
	assert_int_equal(expired_n, 2);
	assert_ptr_equal(expired_last, H(2));
	agent_conn_close(g, a);
	agent_conn_close(g, b);
	assert_int_equal(g->n_pending, 0);
	free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pending_cap_evicts_oldest_of_address),
	    cmocka_unit_test(test_open_cap_and_slots),
	    cmocka_unit_test(test_evicts_who_had_its_chance),
	    cmocka_unit_test(test_header_deadline),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
