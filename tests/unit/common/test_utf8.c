/* test_utf8.c — unit tests of common/include/pf/utf8.h: every length of valid sequence decodes
 * to its code point; overlong forms, surrogates, code points past U+10FFFF, stray
 * continuation bytes and truncated sequences do not. Cleaning: valid text without control
 * characters is clean and copied as it is; every bad byte (and control character) becomes
 * '?', one for one, and the copy is clean. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pf/utf8.h"

static size_t dec(const char *s, size_t n, uint32_t *cp)
{
	return pf_utf8_decode((const unsigned char *)s, n, cp);
}

static void test_valid(void **state)
{
	(void)state;
	uint32_t cp = 0;
	assert_int_equal(dec("A", 1, &cp), 1);
	assert_int_equal(cp, 'A');
	assert_int_equal(dec("\xc3\xa9", 2, &cp), 2);
	assert_int_equal(cp, 0xe9);
	assert_int_equal(dec("\xe2\x82\xac", 3, &cp), 3);
	assert_int_equal(cp, 0x20ac);
	assert_int_equal(dec("\xf0\x9f\x94\xa5", 4, &cp), 4);
	assert_int_equal(cp, 0x1f525);
	assert_int_equal(dec("\xf4\x8f\xbf\xbf", 4, &cp), 4); /* U+10FFFF, the last */
	assert_int_equal(cp, 0x10ffff);
}

static void test_invalid(void **state)
{
	(void)state;
	uint32_t cp = 0;
	assert_int_equal(dec("\xc0\xaf", 2, &cp), 0);         /* overlong '/' */
	assert_int_equal(dec("\xe0\x80\xaf", 3, &cp), 0);     /* overlong, 3 bytes */
	assert_int_equal(dec("\xed\xa0\x80", 3, &cp), 0);     /* surrogate U+D800 */
	assert_int_equal(dec("\xf4\x90\x80\x80", 4, &cp), 0); /* U+110000 */
	assert_int_equal(dec("\xf5\x80\x80\x80", 4, &cp), 0); /* lead past f4 */
	assert_int_equal(dec("\x80", 1, &cp), 0);             /* stray continuation */
	assert_int_equal(dec("\xc3" "A", 2, &cp), 0);         /* not a continuation */
	assert_int_equal(dec("\xe2\x82\xac", 2, &cp), 0);     /* cut short */
}

static void test_clean(void **state)
{
	(void)state;
	const char ok[] = "checkout::Order::price() \xc3\xa9\xe2\x82\xac\xf0\x9f\x94\xa5";
	assert_true(pf_utf8_clean(ok, strlen(ok)));
	assert_true(pf_utf8_clean("", 0));
	char out[64];
	assert_int_equal(pf_utf8_copy_clean(out, ok, strlen(ok)), 0);
	assert_string_equal(out, ok);
	/* a stray byte, a control character, a cut sequence, a surrogate */
	const char *bad[][2] = {{"pf\xffname", "pf?name"},
				{"tab\there", "tab?here"},
				{"del\x7f", "del?"},
				{"cut\xe2\x82", "cut??"},
				{"sur\xed\xa0\x80", "sur???"}};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t n = strlen(bad[i][0]);
		assert_false(pf_utf8_clean(bad[i][0], n));
		assert_true(pf_utf8_copy_clean(out, bad[i][0], n) > 0);
		assert_string_equal(out, bad[i][1]);
		assert_true(pf_utf8_clean(out, n));
	}
	/* only the first n bytes count */
	assert_true(pf_utf8_clean("ab\xff", 2));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_clean),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
