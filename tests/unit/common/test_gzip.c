/* test_gzip.c — pf/gzip.h: round trips at every level, a gzip(1)-made vector, corrupt input
 * (body, CRC, ISIZE), every truncation, trailing garbage vs a second member, the exact
 * max_out boundary, and a 1 KiB bomb that expands to 1 MiB -> -E2BIG with out untouched. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pf/gzip.h"
#include "pf/hash.h"

/* `printf 'hello, gzip\n' | gzip -n -9` */
static const uint8_t hello_gz[] = {0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xcb,
				   0x48, 0xcd, 0xc9, 0xc9, 0xd7, 0x51, 0x48, 0xaf, 0xca, 0x2c, 0xe0,
				   0x02, 0x00, 0x86, 0x1f, 0x82, 0xa4, 0x0c, 0x00, 0x00, 0x00};

static uint8_t *text_sample(size_t n)
{
	uint8_t *p = malloc(n ? n : 1);
	assert_non_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)("profleet fleet of profilers "[i % 28] ^ (i / 4096 % 3));
	return p;
}

static void round_trip(const uint8_t *src, size_t n, int level)
{
	struct pf_buf z, out;

	pf_buf_init(&z, 0);
	pf_buf_init(&out, 0);
	assert_int_equal(pf_gzip_compress(src, n, level, &z), 0);
	assert_true(pf_gzip_is_gzip(z.data, z.len));
	assert_int_equal(pf_gzip_decompress(z.data, z.len, n, &out), 0);
	assert_int_equal(out.len, n);
	if (n)
		assert_memory_equal(out.data, src, n);
	pf_buf_release(&z);
	pf_buf_release(&out);
}

static void test_round_trip(void **state)
{
	static const int levels[] = {-1, 1, 5, 9};
	static const size_t sizes[] = {0, 1, 100, 16384, 16385, 300000};

	for (size_t l = 0; l < sizeof(levels) / sizeof(levels[0]); l++) {
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			uint8_t *p = text_sample(sizes[s]);
			round_trip(p, sizes[s], levels[l]);
			free(p);
		}
	}
	/* Incompressible input grows a little but still round-trips. */
	uint8_t *rnd = malloc(100000);
	assert_non_null(rnd);
	assert_int_equal(pf_random_bytes(rnd, 100000), 0);
	round_trip(rnd, 100000, 6);
	free(rnd);
}

static void test_compress_bad_level_and_cap(void **state)
{
	struct pf_buf z;

	pf_buf_init(&z, 0);
	assert_int_equal(pf_gzip_compress("x", 1, 0, &z), -EINVAL);
	assert_int_equal(pf_gzip_compress("x", 1, 10, &z), -EINVAL);
	assert_int_equal(pf_gzip_compress("x", 1, -2, &z), -EINVAL);
	assert_int_equal(z.len, 0);
	pf_buf_release(&z);

	/* out's own cap: fails with -E2BIG and leaves what was there. */
	uint8_t *p = malloc(50000);
	assert_non_null(p);
	assert_int_equal(pf_random_bytes(p, 50000), 0);
	pf_buf_init(&z, 1000);
	assert_int_equal(pf_buf_append_str(&z, "keep"), 0);
	assert_int_equal(pf_gzip_compress(p, 50000, 6, &z), -E2BIG);
	assert_int_equal(z.len, 4);
	assert_string_equal(pf_buf_str(&z), "keep");
	pf_buf_release(&z);
	free(p);
}

static void test_known_vector_and_append(void **state)
{
	struct pf_buf out;

	pf_buf_init(&out, 0);
	assert_int_equal(pf_buf_append_str(&out, ">> "), 0);
	assert_int_equal(pf_gzip_decompress(hello_gz, sizeof(hello_gz), 1024, &out), 0);
	assert_string_equal(pf_buf_str(&out), ">> hello, gzip\n");
	pf_buf_release(&out);
}

static void expect_bad(const uint8_t *p, size_t n, int want, const char *what)
{
	struct pf_buf out;

	pf_buf_init(&out, 0);
	assert_int_equal(pf_buf_append_str(&out, "pre"), 0);
	int r = pf_gzip_decompress(p, n, 1 << 20, &out);
	if (r != want)
		fail_msg("%s: got %d, want %d", what, r, want);
	assert_int_equal(out.len, 3);
	assert_string_equal(pf_buf_str(&out), "pre");
	pf_buf_release(&out);
}

static void test_corrupt(void **state)
{
	uint8_t b[sizeof(hello_gz)];
	size_t n = sizeof(hello_gz);

	memcpy(b, hello_gz, n);
	b[n - 8] ^= 0x01; /* CRC32 */
	expect_bad(b, n, -EBADMSG, "bad crc");
	memcpy(b, hello_gz, n);
	b[n - 4] ^= 0x01; /* ISIZE */
	expect_bad(b, n, -EBADMSG, "bad isize");
	memcpy(b, hello_gz, n);
	b[2] = 7; /* compression method must be 8 (deflate) */
	expect_bad(b, n, -EBADMSG, "bad method");
	memcpy(b, hello_gz, n);
	b[10] = 0xff; /* invalid deflate block type 3 */
	expect_bad(b, n, -EBADMSG, "bad block");

	/* Flipping any single bit of a larger body is always caught (CRC at worst). */
	uint8_t *t = text_sample(5000);
	struct pf_buf z;
	pf_buf_init(&z, 0);
	assert_int_equal(pf_gzip_compress(t, 5000, 6, &z), 0);
	for (size_t i = 10; i < z.len; i += 7) {
		z.data[i] ^= 0x10;
		struct pf_buf out;
		pf_buf_init(&out, 0);
		int r = pf_gzip_decompress(z.data, z.len, 1 << 20, &out);
		if (r != -EBADMSG && r != -E2BIG)
			fail_msg("flip at %zu: got %d", i, r);
		pf_buf_release(&out);
		z.data[i] ^= 0x10;
	}
	pf_buf_release(&z);
	free(t);

	/* Not gzip at all: empty, one byte, a zlib stream, text. */
	static const uint8_t zlib_stream[] = {0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01};
	expect_bad(hello_gz, 0, -EBADMSG, "empty");
	expect_bad(hello_gz, 1, -EBADMSG, "one byte");
	expect_bad(zlib_stream, sizeof(zlib_stream), -EBADMSG, "zlib");
	expect_bad((const uint8_t *)"plain text", 10, -EBADMSG, "text");
	expect_bad(NULL, 10, -EBADMSG, "NULL");
}

static void test_truncated(void **state)
{
	uint8_t *t = text_sample(40000);
	struct pf_buf z;

	pf_buf_init(&z, 0);
	assert_int_equal(pf_gzip_compress(t, 40000, 6, &z), 0);
	for (size_t n = 0; n < sizeof(hello_gz); n++)
		expect_bad(hello_gz, n, -EBADMSG, "hello prefix");
	for (size_t n = 0; n < z.len; n += (n < 20 || n > z.len - 20) ? 1 : 97)
		expect_bad(z.data, n, -EBADMSG, "prefix");
	pf_buf_release(&z);
	free(t);
}

static void test_trailing_data(void **state)
{
	uint8_t b[2 * sizeof(hello_gz) + 1];
	size_t n = sizeof(hello_gz);
	struct pf_buf out;

	memcpy(b, hello_gz, n);
	b[n] = 0;
	expect_bad(b, n + 1, -EBADMSG, "trailing NUL");
	memcpy(b + n, "garbage", 7);
	expect_bad(b, n + 7, -EBADMSG, "trailing text");
	b[n] = 0x1f;
	expect_bad(b, n + 1, -EBADMSG, "half a magic");
	/* A second complete member is valid gzip (RFC 1952 §2.2). */
	memcpy(b + n, hello_gz, n);
	pf_buf_init(&out, 0);
	assert_int_equal(pf_gzip_decompress(b, 2 * n, 1024, &out), 0);
	assert_string_equal(pf_buf_str(&out), "hello, gzip\nhello, gzip\n");
	pf_buf_release(&out);
	/* ...but a truncated second member is not. */
	expect_bad(b, 2 * n - 3, -EBADMSG, "truncated 2nd member");
	/* max_out counts both members. */
	pf_buf_init(&out, 0);
	assert_int_equal(pf_gzip_decompress(b, 2 * n, 23, &out), -E2BIG);
	assert_int_equal(out.len, 0);
	pf_buf_release(&out);
}

static void test_max_out_boundary(void **state)
{
	uint8_t *t = text_sample(50000);
	struct pf_buf z, out;

	pf_buf_init(&z, 0);
	assert_int_equal(pf_gzip_compress(t, 50000, 6, &z), 0);
	pf_buf_init(&out, 0);
	assert_int_equal(pf_gzip_decompress(z.data, z.len, 50000, &out), 0);
	assert_int_equal(out.len, 50000);
	pf_buf_reset(&out);
	assert_int_equal(pf_gzip_decompress(z.data, z.len, 49999, &out), -E2BIG);
	assert_int_equal(out.len, 0);
	assert_int_equal(pf_gzip_decompress(z.data, z.len, 0, &out), -E2BIG);
	/* Empty content fits max_out 0. */
	pf_buf_reset(&z);
	assert_int_equal(pf_gzip_compress("", 0, 6, &z), 0);
	assert_int_equal(pf_gzip_decompress(z.data, z.len, 0, &out), 0);
	assert_int_equal(out.len, 0);
	/* out's own cap below max_out also stops it. */
	pf_buf_release(&out);
	pf_buf_reset(&z);
	assert_int_equal(pf_gzip_compress(t, 50000, 6, &z), 0);
	pf_buf_init(&out, 1000);
	assert_int_equal(pf_gzip_decompress(z.data, z.len, 50000, &out), -E2BIG);
	assert_int_equal(out.len, 0);
	pf_buf_release(&out);
	pf_buf_release(&z);
	free(t);
}

static void test_bomb(void **state)
{
	const size_t expanded = 1 << 20;
	uint8_t *zeros = calloc(1, expanded);
	struct pf_buf z, out;

	assert_non_null(zeros);
	pf_buf_init(&z, 0);
	assert_int_equal(pf_gzip_compress(zeros, expanded, 9, &z), 0);
	free(zeros);
	/* ~1 KiB of input claims 1 MiB of output. */
	assert_true(z.len <= 1100);

	pf_buf_init(&out, 0);
	assert_int_equal(pf_buf_append_str(&out, "intact"), 0);
	assert_int_equal(pf_gzip_decompress(z.data, z.len, 64 * 1024, &out), -E2BIG);
	assert_int_equal(out.len, 6);
	assert_string_equal(pf_buf_str(&out), "intact");
	/* Allocation stayed near what was allowed (buffer doubling), not the full expansion. */
	assert_true(out.cap <= 2 * 64 * 1024 + 64);
	/* With enough budget it is just data. */
	assert_int_equal(pf_gzip_decompress(z.data, z.len, expanded, &out), 0);
	assert_int_equal(out.len, 6 + expanded);
	pf_buf_release(&out);
	pf_buf_release(&z);
}

static void test_is_gzip(void **state)
{
	assert_true(pf_gzip_is_gzip(hello_gz, 2));
	assert_false(pf_gzip_is_gzip(hello_gz, 1));
	assert_false(pf_gzip_is_gzip("\x1f\x8c", 2));
	assert_false(pf_gzip_is_gzip(NULL, 2));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_compress_bad_level_and_cap),
	    cmocka_unit_test(test_known_vector_and_append),
	    cmocka_unit_test(test_corrupt),
	    cmocka_unit_test(test_truncated),
	    cmocka_unit_test(test_trailing_data),
	    cmocka_unit_test(test_max_out_boundary),
	    cmocka_unit_test(test_bomb),
	    cmocka_unit_test(test_is_gzip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
