/* test_sampler_stats.c — the sampler's status lines made from its counters (sampler_bpf.h):
 * the "unwinders" health component's line, whose "name: value" pairs the console's Fleet
 * page reads, and the JS and Java walkers' parts of the sampler's status. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "sampler/sampler_bpf.h"

static void test_unwinders_status(void **state)
{
	(void)state;
	struct pf_sampler_stats st;
	memset(&st, 0, sizeof(st));
	char out[128];
	size_t n = pf_sampler_unwinders_status(&st, out, sizeof(out));
	assert_int_equal(n, strlen(out));
	assert_string_equal(out, "native: frame pointers, python: off, nodejs: off, java: off");

	st.dwarf_unwind = true;
	st.python = st.nodejs = st.java = true;
	st.py.processes = 2;
	st.jvm.processes = 1;
	pf_sampler_unwinders_status(&st, out, sizeof(out));
	assert_string_equal(out, "native: unwind tables, python: 2, nodejs: 0, java: 1");
}

/* A short buffer: the line truncated, NUL-terminated, its length returned. */
static void test_unwinders_status_truncated(void **state)
{
	(void)state;
	struct pf_sampler_stats st;
	memset(&st, 0, sizeof(st));
	char out[10];
	assert_int_equal(pf_sampler_unwinders_status(&st, out, sizeof(out)), 9);
	assert_string_equal(out, "native: f");
	assert_int_equal(pf_sampler_unwinders_status(&st, out, 0), 0);
}

/* off, nothing seen (""), then the counters and the kept reasons of unsupported processes */
static void test_walker_status(void **state)
{
	(void)state;
	struct pf_sampler_stats st;
	memset(&st, 0, sizeof(st));
	char out[512];
	pf_sampler_java_status(&st, out, sizeof(out));
	assert_string_equal(out, "java: off");
	pf_sampler_nodejs_status(&st, out, sizeof(out));
	assert_string_equal(out, "nodejs: off");
	st.java = st.nodejs = true;
	assert_int_equal(pf_sampler_java_status(&st, out, sizeof(out)), 0);
	assert_string_equal(out, "");
	st.jvm.processes = 1;
	st.jvm.walked = 1;
	st.jvm.frames = 5;
	st.jvm.n_unsupported_msg = 1;
	snprintf(st.jvm.unsupported_msg[0], sizeof(st.jvm.unsupported_msg[0]), "pid 9: jvm: x");
	size_t n = pf_sampler_java_status(&st, out, sizeof(out));
	assert_int_equal(n, strlen(out));
	assert_string_equal(out,
			    "java: 1 JVMs (1 walked in the kernel), Java frames 5, lookups "
			    "failed 0, kernel frames 0, read failures 0, names 0, not named 0; "
			    "pid 9: jvm: x");
	st.v8.processes = 2;
	snprintf(st.v8.version, sizeof(st.v8.version), "11.3");
	pf_sampler_nodejs_status(&st, out, sizeof(out));
	assert_string_equal(out, "nodejs: 2 processes (V8 11.3), JS frames 0, read failures 0, "
				 "names 0, not named 0");
	/* truncated to the buffer, NUL-terminated */
	assert_int_equal(pf_sampler_nodejs_status(&st, out, 8), 7);
	assert_string_equal(out, "nodejs:");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_unwinders_status),
	    cmocka_unit_test(test_unwinders_status_truncated),
	    cmocka_unit_test(test_walker_status),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
