/* test_hash.c — pf/hash.h: SHA-256 against FIPS 180-4 / NIST vectors, constant-time compare,
 * random bytes, token format and uniqueness, the 64-bit table hash. */
#include <errno.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pf/hash.h"
#include "pf/uuid.h"

static void check_sha(const void *data, size_t len, const char *want_hex)
{
	uint8_t d[PF_SHA256_LEN];
	char hex[2 * PF_SHA256_LEN + 1];

	pf_sha256(data, len, d);
	pf_hex_encode(d, sizeof(d), hex);
	assert_string_equal(hex, want_hex);
}

static void test_sha256_vectors(void **state)
{
	check_sha("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	check_sha("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	check_sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
		  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	check_sha("The quick brown fox jumps over the lazy dog", 43,
		  "d7a8fbb307d7809469ca9abcb0082e4f8d5651e46d3cdb762d02d0bf37c9e592");
	/* One million 'a' (FIPS 180-2 appendix B.3). */
	char *m = malloc(1000000);
	assert_non_null(m);
	memset(m, 'a', 1000000);
	check_sha(m, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	free(m);
	/* Bytes that are not text, including NUL. */
	static const uint8_t bin[] = {0x00, 0xff, 0x00};
	uint8_t a[32], b[32];
	pf_sha256(bin, 3, a);
	pf_sha256(bin, 2, b);
	assert_memory_not_equal(a, b, 32);
}

static void test_ct_memeq(void **state)
{
	uint8_t a[64], b[64];

	memset(a, 7, sizeof(a));
	memcpy(b, a, sizeof(b));
	assert_int_equal(pf_ct_memeq(a, b, 64), 1);
	assert_int_equal(pf_ct_memeq(a, b, 0), 1);
	b[0] ^= 1;
	assert_int_equal(pf_ct_memeq(a, b, 64), 0);
	b[0] ^= 1;
	b[63] ^= 0x80;
	assert_int_equal(pf_ct_memeq(a, b, 64), 0);
	assert_int_equal(pf_ct_memeq(a, b, 63), 1);
}

static void test_random_bytes(void **state)
{
	uint8_t a[64] = {0}, b[64] = {0}, zero[64] = {0};

	assert_int_equal(pf_random_bytes(a, sizeof(a)), 0);
	assert_int_equal(pf_random_bytes(b, sizeof(b)), 0);
	assert_memory_not_equal(a, zero, sizeof(a));
	assert_memory_not_equal(a, b, sizeof(a));
	assert_int_equal(pf_random_bytes(a, 0), 0);
}

static bool is_b64url(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_';
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_token_format_and_uniqueness(void **state)
{
	enum { N = 2000 };
	static char toks[N][PF_TOKEN_BUF_LEN];
	static char *sorted[N];
	unsigned seen[256] = {0};

	for (int i = 0; i < N; i++) {
		memset(toks[i], '#', PF_TOKEN_BUF_LEN);
		assert_int_equal(pf_token_generate(toks[i], PF_TOKEN_BUF_LEN), 0);
		const char *t = toks[i];
		assert_int_equal(strlen(t), PF_TOKEN_LEN);
		assert_int_equal(strlen(t), 46);
		assert_memory_equal(t, "pf_", 3);
		for (int j = 3; j < 46; j++) {
			if (!is_b64url(t[j]))
				fail_msg("token %s has '%c' at %d", t, t[j], j);
			seen[(unsigned char)t[j]]++;
		}
		/* 43 chars carry 256 bits: the last char holds 4 data bits, its low 2 are 0. */
		const char *alpha =
		    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
		assert_int_equal((strchr(alpha, t[45]) - alpha) & 3, 0);
		sorted[i] = toks[i];
	}
	qsort(sorted, N, sizeof(sorted[0]), cmp_str);
	for (int i = 1; i < N; i++)
		assert_string_not_equal(sorted[i - 1], sorted[i]);
	/* All 64 symbols show up over 84k random chars (a stuck bit would drop half). */
	assert_true(seen['-'] > 0 && seen['_'] > 0 && seen['A'] > 0 && seen['9'] > 0);
	int used = 0;
	for (int c = 0; c < 256; c++)
		used += seen[c] > 0;
	assert_int_equal(used, 64);
}

static void test_token_small_buffer(void **state)
{
	char small[PF_TOKEN_BUF_LEN - 1];

	assert_int_equal(pf_token_generate(small, sizeof(small)), -ENOSPC);
	assert_int_equal(pf_token_generate(NULL, 100), -ENOSPC);
}

/* pf_hash64: the same bytes give the same hash wherever they lie; every byte (the tail's too)
 * and the length count; one flipped input bit flips about half of the output bits; the low
 * bits (what a power-of-two table indexes by) spread keys that differ only in their high
 * bytes. */
static void test_hash64(void **state)
{
	uint8_t a[64], b[72];

	for (size_t i = 0; i < sizeof(a); i++)
		a[i] = (uint8_t)(i * 37 + 11);
	memcpy(b + 3, a, sizeof(a)); /* unaligned */
	for (size_t n = 0; n <= sizeof(a); n++)
		assert_true(pf_hash64(a, n) == pf_hash64(b + 3, n));
	uint8_t z[16] = {0};
	for (size_t n = 1; n <= sizeof(z); n++) /* zero bytes still count through the length */
		assert_true(pf_hash64(z, n) != pf_hash64(z, n - 1));
	size_t flips = 0, trials = 0;
	for (size_t n = 1; n <= 24; n++) {
		uint64_t h = pf_hash64(a, n);
		for (size_t bit = 0; bit < n * 8; bit++) {
			a[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			uint64_t g = pf_hash64(a, n);
			a[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			assert_true(g != h);
			flips += (size_t)__builtin_popcountll(g ^ h);
			trials++;
		}
	}
	double mean = (double)flips / (double)trials;
	assert_true(mean > 28.0 && mean < 36.0);
	/* 4,096 keys differing only in bytes 6 and 7 of 8: their low 12 bits spread over at
	 * least half of the 4,096 buckets (a random function fills ~63 %). */
	static uint8_t used[4096];
	size_t buckets = 0;
	for (uint32_t i = 0; i < 4096; i++) {
		uint8_t k[8] = {1, 2, 3, 4, 5, 6, (uint8_t)(i & 0xff), (uint8_t)(i >> 8)};
		uint64_t h = pf_hash64(k, sizeof(k)) & 4095;
		buckets += !used[h];
		used[h] = 1;
	}
	assert_true(buckets > 2048);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sha256_vectors),
	    cmocka_unit_test(test_ct_memeq),
	    cmocka_unit_test(test_random_bytes),
	    cmocka_unit_test(test_token_format_and_uniqueness),
	    cmocka_unit_test(test_token_small_buffer),
	    cmocka_unit_test(test_hash64),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
