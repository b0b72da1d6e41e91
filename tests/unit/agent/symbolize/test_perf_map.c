/* test_perf_map.c — unit tests of agent/symbolize/perf_map.h: the lines JIT runtimes write
 * (hex with and without 0x, names with spaces, CRLF) are found by address, the end of a range
 * is outside it, a later line for the same start wins, malformed lines are skipped and
 * counted, names that are not UTF-8 reach profiles as valid UTF-8, and maps past their bounds
 * are refused whole. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "symbolize/perf_map.h"

static struct pf_perf_map *parse(const char *text, size_t *skipped)
{
	struct pf_perf_map *m = NULL;
	assert_int_equal(pf_perf_map_parse(text, strlen(text), &m, skipped), 0);
	assert_non_null(m);
	return m;
}

static void test_lines_and_lookup(void **state)
{
	(void)state;
	size_t skipped = 0;
	struct pf_perf_map *m =
	    parse("7f0000001000 40 LazyCompile:*render /srv/app/views.js:120\n"
		  "0x7f0000002000 0x10 Interpreter\r\n"
		  "\n"
		  "7F0000003000 8 Lcom/shop/Cart;::total\n"
		  "7f0000000800 100 stub",
		  &skipped);
	assert_int_equal(skipped, 0);
	assert_int_equal(pf_perf_map_entries(m), 4);
	assert_string_equal(pf_perf_map_find(m, 0x7f0000001000), "LazyCompile:*render /srv/app/views.js:120");
	assert_string_equal(pf_perf_map_find(m, 0x7f000000103f), "LazyCompile:*render /srv/app/views.js:120");
	assert_null(pf_perf_map_find(m, 0x7f0000001040)); /* the end is not in the range */
	assert_string_equal(pf_perf_map_find(m, 0x7f000000200f), "Interpreter"); /* no \r */
	assert_string_equal(pf_perf_map_find(m, 0x7f0000003007), "Lcom/shop/Cart;::total");
	assert_string_equal(pf_perf_map_find(m, 0x7f0000000800), "stub"); /* no final newline */
	assert_null(pf_perf_map_find(m, 0x7f00000007ff));
	assert_null(pf_perf_map_find(m, 0));
	assert_null(pf_perf_map_find(m, UINT64_MAX));
	assert_true(pf_perf_map_bytes(m) > 0);
	pf_perf_map_free(m);
	assert_null(pf_perf_map_find(NULL, 1));
}

/* Code recompiled at the same address: the later line names it. */
static void test_later_line_wins(void **state)
{
	(void)state;
	struct pf_perf_map *m = parse("1000 20 first\n2000 10 other\n1000 20 second\n", NULL);
	assert_int_equal(pf_perf_map_entries(m), 2);
	assert_string_equal(pf_perf_map_find(m, 0x1010), "second");
	assert_string_equal(pf_perf_map_find(m, 0x2000), "other");
	pf_perf_map_free(m);
}

static void test_malformed_lines(void **state)
{
	(void)state;
	size_t skipped = 0;
	struct pf_perf_map *m = parse("zzzz 10 a\n"      /* not hex */
				      "1000\n"           /* no size */
				      "1000 10\n"        /* no name */
				      "1000 0 empty\n"   /* no bytes */
				      "ffffffffffffffff 2 wraps\n"
				      "10000000000000000 1 too-long\n"
				      "1000x 10 junk\n"  /* junk after a number */
				      "3000 10 good\n",
				      &skipped);
	assert_int_equal(skipped, 7);
	assert_int_equal(pf_perf_map_entries(m), 1);
	assert_string_equal(pf_perf_map_find(m, 0x3000), "good");
	pf_perf_map_free(m);
}

/* The process writes the names: what is not UTF-8, and control characters, become '?'. */
static void test_names_made_utf8(void **state)
{
	(void)state;
	struct pf_perf_map *m = parse("1000 10 caf\xc3\xa9\n"         /* valid: kept */
				      "2000 10 a\xff" "b\n"           /* a stray byte */
				      "3000 10 \xc0\xaf" "x\n"        /* overlong '/' */
				      "4000 10 \xed\xa0\x80" "y\n"    /* a surrogate */
				      "5000 10 tab\there\x01\n"       /* control characters */
				      "6000 10 \xf0\x9f\x94\xa5 fire\n", /* 4 bytes: kept */
				      NULL);
	assert_string_equal(pf_perf_map_find(m, 0x1000), "caf\xc3\xa9");
	assert_string_equal(pf_perf_map_find(m, 0x2000), "a?b");
	assert_string_equal(pf_perf_map_find(m, 0x3000), "??x");
	assert_string_equal(pf_perf_map_find(m, 0x4000), "???y");
	assert_string_equal(pf_perf_map_find(m, 0x5000), "tab?here?");
	assert_string_equal(pf_perf_map_find(m, 0x6000), "\xf0\x9f\x94\xa5 fire");
	pf_perf_map_free(m);
	/* a name cut at the bound inside a sequence does not end in half a character */
	char line[PF_PERF_MAP_MAX_NAME + 64];
	size_t n = (size_t)snprintf(line, sizeof(line), "7000 10 ");
	memset(line + n, 'a', PF_PERF_MAP_MAX_NAME - 1);
	n += PF_PERF_MAP_MAX_NAME - 1;
	memcpy(line + n, "\xc3\xa9tail\n", 7);
	line[n + 7] = 0;
	m = parse(line, NULL);
	const char *name = pf_perf_map_find(m, 0x7000);
	assert_non_null(name);
	assert_int_equal(strlen(name), PF_PERF_MAP_MAX_NAME);
	assert_int_equal(name[PF_PERF_MAP_MAX_NAME - 1], '?');
	pf_perf_map_free(m);
}

static void test_bounds(void **state)
{
	(void)state;
	/* too many lines: refused whole */
	size_t lines = PF_PERF_MAP_MAX_ENTRIES + 1, cap = lines * 16 + 1, n = 0;
	char *text = malloc(cap);
	assert_non_null(text);
	for (size_t i = 0; i < lines; i++)
		n += (size_t)snprintf(text + n, cap - n, "%06zx 1 f%zx\n", i, i % 10);
	struct pf_perf_map *m = NULL;
	assert_int_equal(pf_perf_map_parse(text, n, &m, NULL), -EFBIG);
	assert_null(m);
	/* the bound itself is fine: the last line dropped */
	n -= strlen("020000 1 f2\n"); /* line 131,073 */
	assert_int_equal(pf_perf_map_parse(text, n, &m, NULL), 0);
	assert_int_equal(pf_perf_map_entries(m), PF_PERF_MAP_MAX_ENTRIES);
	pf_perf_map_free(m);
	free(text);
	/* too many bytes: refused before parsing */
	assert_int_equal(pf_perf_map_parse("", PF_PERF_MAP_MAX_BYTES + 1, &m, NULL), -EFBIG);
	assert_null(m);
}

/* Read from a file as the symbolizer does; a file past the byte bound is refused. */
static void test_read_fd(void **state)
{
	(void)state;
	char path[] = "/tmp/pf-perfmap.XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	const char text[] = "55aa00 20 jit_spin\n";
	assert_int_equal(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	struct pf_perf_map *m = NULL;
	assert_int_equal(pf_perf_map_read(fd, &m, NULL), 0);
	assert_string_equal(pf_perf_map_find(m, 0x55aa1f), "jit_spin");
	pf_perf_map_free(m);
	assert_int_equal(ftruncate(fd, (off_t)PF_PERF_MAP_MAX_BYTES + 4096), 0);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(pf_perf_map_read(fd, &m, NULL), -EFBIG);
	assert_null(m);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lines_and_lookup),
		cmocka_unit_test(test_later_line_wins),
		cmocka_unit_test(test_malformed_lines),
		cmocka_unit_test(test_names_made_utf8),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_read_fd),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
