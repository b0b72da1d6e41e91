/* test_python_linetable.c — unit tests of agent/interp/python_linetable.h on tables built by
 * hand in each format (3.9 lnotab, 3.10 linetable with its "no line" entries, the 3.11+
 * location table in all its entry forms with multi-byte varints), offsets at every range's
 * edges, and hostile tables (cut varints, a payload byte where an entry must start, line
 * numbers that overflow). The tables of real code objects are checked in test_python_code. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "python_linetable.h"

static uint32_t line_of(unsigned minor, const uint8_t *t, size_t len, int32_t first, uint32_t off)
{
	uint32_t line = 12345;
	assert_int_equal(pf_py_line_for(minor, t, len, first, off, &line), 0);
	return line;
}

static void test_lnotab_39(void **state)
{
	(void)state;
	/* offsets 0-5 line 10, 6-13 line 11, 14.. line 13; a pair (0, 3) then (2, -1) */
	static const uint8_t t[] = {6, 1, 8, 2, 4, 3, 0, 0xff};
	assert_int_equal(line_of(9, t, sizeof(t), 10, 0), 10);
	assert_int_equal(line_of(9, t, sizeof(t), 10, 5), 10);
	assert_int_equal(line_of(9, t, sizeof(t), 10, 6), 11);
	assert_int_equal(line_of(9, t, sizeof(t), 10, 13), 11);
	assert_int_equal(line_of(9, t, sizeof(t), 10, 14), 13);
	assert_int_equal(line_of(9, t, sizeof(t), 10, 17), 13);
	assert_int_equal(line_of(9, t, sizeof(t), 10, 18), 15); /* +3 then -1 at 18 */
	assert_int_equal(line_of(9, t, 0, 10, 18), 10);		/* empty: the first line */
	assert_int_equal(line_of(9, t, 3, 10, 18), 11);		/* an odd byte is ignored */
}

static void test_linetable_310(void **state)
{
	(void)state;
	static const uint8_t t[] = {6, 0, 8, 1, 0, 1, 4, 0x80, 10, 1};
	assert_int_equal(line_of(10, t, sizeof(t), 10, 0), 10);
	assert_int_equal(line_of(10, t, sizeof(t), 10, 5), 10);
	assert_int_equal(line_of(10, t, sizeof(t), 10, 6), 11);
	assert_int_equal(line_of(10, t, sizeof(t), 10, 13), 11);
	assert_int_equal(line_of(10, t, sizeof(t), 10, 14), 0); /* -128: no line */
	assert_int_equal(line_of(10, t, sizeof(t), 10, 17), 0);
	assert_int_equal(line_of(10, t, sizeof(t), 10, 18), 13); /* the empty range's +1 too */
	assert_int_equal(line_of(10, t, sizeof(t), 10, 27), 13);
	assert_int_equal(line_of(10, t, sizeof(t), 10, 28), 0); /* past the table */
}

/* 3.11+ entries: 1cccclll, code c, l + 1 code units */
#define E(code, units) (uint8_t)(0x80 | ((code) << 3) | ((units)-1))

static void test_loctable_311(void **state)
{
	(void)state;
	static const uint8_t t[] = {
	    E(13, 3), 0x02,		/* [0,6): no columns, +1 */
	    E(0, 1),  0x05,		/* [6,8): short form, same line */
	    E(11, 2), 4,    9,		/* [8,12): one line, +1 */
	    E(15, 1),			/* [12,14): no location */
	    E(14, 1), 0x05, 0,	  1, 2, /* [14,16): long form, -2 */
	    E(13, 1), 0x48, 0x03,	/* [16,18): +100 in a two-byte varint */
	    E(12, 8), 0,    0,		/* [18,34): one line, +2 */
	};
	for (unsigned minor = 11; minor <= 13; minor++) {
		assert_int_equal(line_of(minor, t, sizeof(t), 10, 0), 11);
		assert_int_equal(line_of(minor, t, sizeof(t), 10, 5), 11);
		assert_int_equal(line_of(minor, t, sizeof(t), 10, 6), 11);
		assert_int_equal(line_of(minor, t, sizeof(t), 10, 8), 12);
		assert_int_equal(line_of(minor, t, sizeof(t), 10, 11), 12);
		assert_int_equal(line_of(minor, t, sizeof(t), 10, 12), 0);
		assert_int_equal(line_of(minor, t, sizeof(t), 10, 14), 10);
		assert_int_equal(line_of(minor, t, sizeof(t), 10, 16), 110);
		assert_int_equal(line_of(minor, t, sizeof(t), 10, 18), 112);
		assert_int_equal(line_of(minor, t, sizeof(t), 10, 33), 112);
		assert_int_equal(line_of(minor, t, sizeof(t), 10, 34), 0);
	}
}

static void test_hostile(void **state)
{
	(void)state;
	uint32_t line = 7;
	/* a varint cut at the end, before the offset asked for */
	static const uint8_t cut[] = {E(13, 1), 0x48};
	assert_int_equal(pf_py_line_for(11, cut, sizeof(cut), 1, 4, &line), -EINVAL);
	assert_int_equal(line, 0);
	/* a payload byte (bit 7 clear) where an entry starts */
	static const uint8_t bad[] = {E(0, 1), 0x01, 0x02};
	assert_int_equal(pf_py_line_for(12, bad, sizeof(bad), 1, 4, &line), -EINVAL);
	/* ... but the offsets before the damage still get their line */
	assert_int_equal(line_of(12, bad, sizeof(bad), 1, 0), 1);
	/* a varint whose continuation never ends */
	static const uint8_t endless[] = {E(13, 1), 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f};
	assert_int_equal(pf_py_line_for(13, endless, sizeof(endless), 1, 4, &line), -EINVAL);
	/* a payload byte with bit 7 set inside a varint */
	static const uint8_t hi[] = {E(14, 1), 0xc1, 0x00};
	assert_int_equal(pf_py_line_for(11, hi, sizeof(hi), 1, 4, &line), -EINVAL);
	/* one-line and short forms missing their column bytes */
	static const uint8_t shortcol[] = {E(10, 1), 0x01};
	assert_int_equal(pf_py_line_for(11, shortcol, sizeof(shortcol), 1, 0, &line), -EINVAL);
	static const uint8_t nocol[] = {E(3, 1)};
	assert_int_equal(pf_py_line_for(11, nocol, sizeof(nocol), 1, 0, &line), -EINVAL);
	/* line numbers driven below 1 give no line, never a wrapped one */
	static const uint8_t neg[] = {E(13, 1), 0x15}; /* -10 */
	assert_int_equal(line_of(11, neg, sizeof(neg), 3, 0), 0);
	static const uint8_t neg39[] = {4, 0x80};
	assert_int_equal(line_of(9, neg39, sizeof(neg39), 3, 4), 0);
	/* lines past INT32_MAX refused */
	uint8_t big[1 + 6 * 6];
	size_t n = 0;
	big[n++] = E(13, 1);
	for (int i = 0; i < 5; i++)
		big[n++] = 0x7f;
	big[n++] = 0x3f; /* 2^36 - 1: a delta of about 2^35 */
	assert_int_equal(pf_py_line_for(11, big, n, 1, 0, &line), -EINVAL);
	/* versions outside 3.9-3.13 */
	assert_int_equal(pf_py_line_for(8, cut, sizeof(cut), 1, 0, &line), -ENOTSUP);
	assert_int_equal(pf_py_line_for(14, cut, sizeof(cut), 1, 0, &line), -ENOTSUP);
	/* no table */
	assert_int_equal(pf_py_line_for(11, NULL, 10, 1, 0, &line), 0);
	assert_int_equal(line, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lnotab_39),
		cmocka_unit_test(test_linetable_310),
		cmocka_unit_test(test_loctable_311),
		cmocka_unit_test(test_hostile),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
