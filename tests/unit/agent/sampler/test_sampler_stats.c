/* test_sampler_stats.c — the sampler's status lines made from its counters (sampler_bpf.h):
 * the "unwinders" health component's line, whose "name: value" pairs the console's Fleet
 * page reads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_unwinders_status),
	    cmocka_unit_test(test_unwinders_status_truncated),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
