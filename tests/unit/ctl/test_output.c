/* test_output.c — ctl/output.h: table layout (widths, UTF-8, last column unpadded, missing
 * and extra cells), sanitizing of server text, JSON printing, time and duration formats. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "output.h"

/* Renders t into a string (caller frees). */
static char *render(struct ctl_table *t)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_non_null(f);
	assert_int_equal(ctl_table_print(t, f), 0);
	fclose(f);
	return buf;
}

static void test_layout(void **state)
{
	struct ctl_table *t = ctl_table_new((const char *const[]){"ID", "STATE", "NOTE", NULL});
	assert_non_null(t);
	assert_int_equal(ctl_table_row(t), 0);
	ctl_table_cell(t, "%d", 1);
	ctl_table_cell(t, "%s", "running");
	ctl_table_cell(t, "%s", "first");
	assert_int_equal(ctl_table_row(t), 0);
	ctl_table_cell(t, "%d", 12345);
	ctl_table_cell(t, "%s", "done");
	/* no third cell: empty; and a fourth on the next row is dropped */
	assert_int_equal(ctl_table_row(t), 0);
	ctl_table_cell(t, "x");
	ctl_table_cell(t, "y");
	ctl_table_cell(t, "z");
	ctl_table_cell(t, "dropped");
	assert_int_equal(ctl_table_rows(t), 3);
	char *s = render(t);
	assert_string_equal(s, "ID     STATE    NOTE\n"
			       "1      running  first\n"
			       "12345  done     \n"
			       "x      y        z\n");
	free(s);
	ctl_table_free(t);
}

static void test_utf8_and_sanitize(void **state)
{
	struct ctl_table *t = ctl_table_new((const char *const[]){"NAME", "V", NULL});
	ctl_table_row(t);
	ctl_table_cell(t, "h\xc3\xa9llo"); /* héllo: 5 characters, 6 bytes */
	ctl_table_cell(t, "1");
	ctl_table_row(t);
	ctl_table_cell(t, "a\x1b[31mb\nc\td");
	ctl_table_cell(t, "2");
	char *s = render(t);
	assert_string_equal(s, "NAME         V\n"
			       "h\xc3\xa9llo        1\n"
			       "a?[31mb?c?d  2\n");
	free(s);
	ctl_table_free(t);

	/* long cells are cut with "..." on a character boundary */
	t = ctl_table_new((const char *const[]){"X", NULL});
	char longs[600];
	for (size_t i = 0; i + 2 < sizeof(longs); i += 2)
		memcpy(longs + i, "\xc3\xa9", 2);
	longs[598] = '\0';
	ctl_table_row(t);
	ctl_table_cell(t, "%s", longs);
	s = render(t);
	char *line = strchr(s, '\n') + 1;
	size_t n = strlen(line);
	assert_true(n <= CTL_TABLE_MAX_CELL + 1);
	assert_memory_equal(line + n - 4, "...\n", 4);
	assert_memory_equal(line + n - 6, "\xc3\xa9", 2); /* whole character before the dots */
	free(s);
	ctl_table_free(t);
}

static void test_header_only_and_limits(void **state)
{
	struct ctl_table *t = ctl_table_new((const char *const[]){"A", "BB", NULL});
	ctl_table_cell(t, "ignored: no row yet");
	char *s = render(t);
	assert_string_equal(s, "A  BB\n");
	free(s);
	ctl_table_free(t);
	const char *many[CTL_TABLE_MAX_COLS + 2];
	for (int i = 0; i <= CTL_TABLE_MAX_COLS; i++)
		many[i] = "C";
	many[CTL_TABLE_MAX_COLS + 1] = NULL;
	errno = 0;
	assert_null(ctl_table_new(many));
	assert_int_equal(errno, EINVAL);
	/* many rows: the row array grows */
	t = ctl_table_new((const char *const[]){"N", NULL});
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(ctl_table_row(t), 0);
		ctl_table_cell(t, "%d", i);
	}
	s = render(t);
	assert_non_null(strstr(s, "\n999\n"));
	free(s);
	ctl_table_free(t);
}

static void test_json(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	json_t *j = json_pack("{s:i, s:[s]}", "b", 1, "a", "x");
	assert_int_equal(ctl_print_json(f, j), 0);
	fclose(f);
	/* the server's key order is kept */
	assert_string_equal(buf, "{\n  \"b\": 1,\n  \"a\": [\n    \"x\"\n  ]\n}\n");
	free(buf);
	json_decref(j);
	enum ctl_format fmt;
	assert_int_equal(ctl_format_parse("json", &fmt), 0);
	assert_int_equal(fmt, CTL_OUT_JSON);
	assert_int_equal(ctl_format_parse("table", &fmt), 0);
	assert_int_equal(fmt, CTL_OUT_TABLE);
	assert_int_equal(ctl_format_parse("yaml", &fmt), -EINVAL);
}

static void test_formats(void **state)
{
	char b[64];
	ctl_fmt_time_ms(1700000000123, b, sizeof(b));
	assert_string_equal(b, "2023-11-14 22:13:20");
	ctl_fmt_time_ms(0, b, sizeof(b));
	assert_string_equal(b, "-");
	static const struct {
		int64_t ms;
		const char *s;
	} d[] = {{0, "0s"},	{1500, "1.5s"},	  {10000, "10s"},  {59999, "59s"},
		 {60000, "1m"}, {90000, "1m30s"}, {3600000, "1h"}, {3660000, "1h1m"},
		 {-1, "-"},	{86400000, "24h"}};
	for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++) {
		ctl_fmt_duration_ms(d[i].ms, b, sizeof(b));
		assert_string_equal(b, d[i].s);
	}
	json_t *o = json_pack("{s:s, s:I, s:f}", "s", "v", "i", (json_int_t)42, "r", 2.9);
	assert_string_equal(ctl_jstr(o, "s"), "v");
	assert_string_equal(ctl_jstr(o, "i"), "");
	assert_string_equal(ctl_jstr(NULL, "s"), "");
	assert_int_equal(ctl_jint(o, "i"), 42);
	assert_int_equal(ctl_jint(o, "r"), 2);
	assert_int_equal(ctl_jint(o, "s"), 0);
	json_decref(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_layout),
	    cmocka_unit_test(test_utf8_and_sanitize),
	    cmocka_unit_test(test_header_only_and_limits),
	    cmocka_unit_test(test_json),
	    cmocka_unit_test(test_formats),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
