/* test_uuid.c — pf/uuid.h: v7 version/variant bits and timestamp, strict monotonicity over
 * 10k ids in one millisecond, format/parse round trip, hex helpers, bad input. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "pf/uuid.h"

static uint64_t ts_ms(const uint8_t u[16])
{
	uint64_t v = 0;
	for (int i = 0; i < 6; i++)
		v = v << 8 | u[i];
	return v;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void test_version_variant_time(void **state)
{
	uint8_t u[16];

	for (int i = 0; i < 1000; i++) {
		uint64_t before = now_ms();
		assert_int_equal(pf_uuid_v7(u), 0);
		assert_int_equal(pf_uuid_version(u), 7);
		assert_int_equal(u[6] >> 4, 7);
		assert_int_equal(u[8] >> 6, 2); /* variant 10 (RFC 9562 §4.1) */
		/* The timestamp is the wall clock (or a few ms ahead after counter rollover). */
		assert_true(ts_ms(u) + 1 >= before);
		assert_true(ts_ms(u) <= now_ms() + 5);
	}
}

static void test_monotonic_10k(void **state)
{
	static uint8_t ids[10000][16];

	for (size_t i = 0; i < 10000; i++)
		assert_int_equal(pf_uuid_v7(ids[i]), 0);
	size_t same_ms = 0;
	for (size_t i = 1; i < 10000; i++) {
		if (memcmp(ids[i - 1], ids[i], 16) >= 0) {
			char a[37], b[37];
			pf_uuid_format(ids[i - 1], a);
			pf_uuid_format(ids[i], b);
			fail_msg("id %zu not greater than its predecessor: %s >= %s", i, a, b);
		}
		same_ms += ts_ms(ids[i]) == ts_ms(ids[i - 1]);
	}
	/* Generating 10k ids takes a few ms, so most pairs shared a millisecond: the counter
	 * path (RFC 9562 §6.2 method 1) was exercised, not just the clock. */
	if (same_ms < 1000)
		fail_msg("only %zu of 9999 pairs shared a millisecond", same_ms);
	/* Text forms sort the same way as the bytes. */
	char a[37], b[37];
	pf_uuid_format(ids[0], a);
	pf_uuid_format(ids[9999], b);
	assert_true(strcmp(a, b) < 0);
}

enum { THREADS = 4, PER_THREAD = 2500 };
static uint8_t thread_ids[THREADS * PER_THREAD][16];

static void *gen_thread(void *arg)
{
	uint8_t(*out)[16] = arg;
	for (int i = 0; i < PER_THREAD; i++) {
		if (pf_uuid_v7(out[i]) != 0)
			return (void *)1;
		/* Ids from one thread are increasing too. */
		if (i && memcmp(out[i - 1], out[i], 16) >= 0)
			return (void *)2;
	}
	return NULL;
}

static int cmp_id(const void *a, const void *b)
{
	return memcmp(a, b, 16);
}

static void test_threads_unique(void **state)
{
	pthread_t t[THREADS];

	for (int i = 0; i < THREADS; i++)
		assert_int_equal(
		    pthread_create(&t[i], NULL, gen_thread, thread_ids[i * PER_THREAD]), 0);
	for (int i = 0; i < THREADS; i++) {
		void *ret;
		assert_int_equal(pthread_join(t[i], &ret), 0);
		assert_null(ret);
	}
	qsort(thread_ids, THREADS * PER_THREAD, 16, cmp_id);
	for (int i = 1; i < THREADS * PER_THREAD; i++)
		assert_memory_not_equal(thread_ids[i - 1], thread_ids[i], 16);
}

static void test_format_parse_round_trip(void **state)
{
	uint8_t u[16], back[16];
	char s[PF_UUID_STR_LEN + 1];

	for (int i = 0; i < 100; i++) {
		assert_int_equal(pf_uuid_v7(u), 0);
		pf_uuid_format(u, s);
		assert_int_equal(strlen(s), 36);
		assert_int_equal(s[8], '-');
		assert_int_equal(s[13], '-');
		assert_int_equal(s[18], '-');
		assert_int_equal(s[23], '-');
		assert_int_equal(s[14], '7');
		assert_int_equal(pf_uuid_parse(s, back), 0);
		assert_memory_equal(u, back, 16);
	}
}

static void test_known_value(void **state)
{
	/* RFC 9562 Appendix A.6 example UUIDv7. */
	static const uint8_t want[16] = {0x01, 0x7f, 0x22, 0xe2, 0x79, 0xb0, 0x7c, 0xc3,
					 0x98, 0xc4, 0xdc, 0x0c, 0x0c, 0x07, 0x39, 0x8f};
	uint8_t u[16];
	char s[37];

	assert_int_equal(pf_uuid_parse("017F22E2-79B0-7CC3-98C4-DC0C0C07398F", u), 0);
	assert_memory_equal(u, want, 16);
	assert_int_equal(pf_uuid_version(u), 7);
	assert_int_equal(ts_ms(u), 0x017f22e279b0ull); /* Tue Feb 22 2022 19:22:22 UTC */
	pf_uuid_format(u, s);
	assert_string_equal(s, "017f22e2-79b0-7cc3-98c4-dc0c0c07398f");
	memset(u, 0, sizeof(u));
	assert_int_equal(pf_uuid_parse("017f22e279b07cc398c4dc0c0c07398f", u), 0);
	assert_memory_equal(u, want, 16);
}

static void test_parse_bad_input(void **state)
{
	static const char *const bad[] = {
	    "",
	    "017f22e2-79b0-7cc3-98c4-dc0c0c07398",   /* 35 chars */
	    "017f22e2-79b0-7cc3-98c4-dc0c0c07398f0", /* 37 chars */
	    "017f22e2x79b0-7cc3-98c4-dc0c0c07398f",  /* wrong separator */
	    "017f22e279b0-7cc3-98c4-dc0c0c07398f-",  /* dashes in wrong places */
	    "017f22e2-79b0-7cc3-98c4-dc0c0c07398g",  /* non-hex */
	    "017f22e2-79b0-7cc3-98c4-dc0c0c0 398f",
	    "{017f22e2-79b0-7cc3-98c4-dc0c0c07398f}",
	    "017f22e279b07cc398c4dc0c0c07398",	 /* 31 hex */
	    "017f22e279b07cc398c4dc0c0c07398fa", /* 33 hex */
	    "017f22e279b07cc398c4dc0c0c07398z",
	    "-17f22e2-79b0-7cc3-98c4-dc0c0c07398f",
	};
	uint8_t u[16], orig[16];

	memset(orig, 0xa5, sizeof(orig));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memcpy(u, orig, 16);
		if (pf_uuid_parse(bad[i], u) != -EINVAL)
			fail_msg("accepted '%s'", bad[i]);
		assert_memory_equal(u, orig, 16); /* output untouched on failure */
	}
	assert_int_equal(pf_uuid_parse(NULL, u), -EINVAL);
}

static void test_hex(void **state)
{
	static const uint8_t bytes[] = {0x00, 0x01, 0xab, 0xff, 0x7f};
	char s[11];
	uint8_t back[5];

	pf_hex_encode(bytes, sizeof(bytes), s);
	assert_string_equal(s, "0001abff7f");
	assert_int_equal(pf_hex_decode("0001ABff7f", back, 5), 0);
	assert_memory_equal(back, bytes, 5);
	assert_int_equal(pf_hex_decode("0001abff7", back, 5), -EINVAL);	   /* short */
	assert_int_equal(pf_hex_decode("0001abff7f00", back, 5), -EINVAL); /* long */
	assert_int_equal(pf_hex_decode("0001abgf7f", back, 5), -EINVAL);
	assert_int_equal(pf_hex_decode(NULL, back, 5), -EINVAL);
	pf_hex_encode(bytes, 0, s);
	assert_string_equal(s, "");
	assert_int_equal(pf_hex_decode("", back, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_version_variant_time),
	    cmocka_unit_test(test_monotonic_10k),
	    cmocka_unit_test(test_threads_unique),
	    cmocka_unit_test(test_format_parse_round_trip),
	    cmocka_unit_test(test_known_value),
	    cmocka_unit_test(test_parse_bad_input),
	    cmocka_unit_test(test_hex),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
