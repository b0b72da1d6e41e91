/* uuid.c — see pf/uuid.h. UUIDv7 layout (RFC 9562 §5.7):
 *   bytes 0-5  unix_ts_ms (48 bits, big-endian)
 *   byte  6    version (0111) in the high nibble, rand_a bits 11-8 in the low nibble
 *   byte  7    rand_a bits 7-0           (here: the monotonic counter, §6.2 method 1)
 *   byte  8    variant (10) in the top two bits, then 62 bits of rand_b (bytes 8-15) */
#include "pf/uuid.h"

#include <errno.h>
#include <stdbool.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "pf/compiler.h"
#include "pf/hash.h"

#define UUID_COUNTER_MAX 0xfffu

static pthread_mutex_t uuid_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t uuid_last_ms;
static uint32_t uuid_counter;

static uint64_t now_unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int pf_uuid_v7(uint8_t out[16])
{
	uint8_t rnd[10];
	int r = pf_random_bytes(rnd, sizeof(rnd));
	if (r < 0)
		return r;

	uint64_t ms = now_unix_ms() & 0xffffffffffffull;
	pthread_mutex_lock(&uuid_lock);
	if (ms > uuid_last_ms) {
		/* New millisecond: seed the counter randomly but keep its top bit clear, so at
		 * least 2048 more ids fit before it rolls over (RFC 9562 §6.2, counter seeding). */
		uuid_last_ms = ms;
		uuid_counter = ((uint32_t)rnd[0] << 8 | rnd[1]) & 0x7ffu;
	} else if (uuid_counter < UUID_COUNTER_MAX) {
		/* Same millisecond, or the clock stepped back: keep the last timestamp and count.
		 */
		uuid_counter++;
	} else {
		/* Counter overflow: borrow the next millisecond (§6.2 "Counter Rollover Handling").
		 */
		uuid_last_ms++;
		uuid_counter = 0;
	}
	ms = uuid_last_ms;
	uint32_t ctr = uuid_counter;
	pthread_mutex_unlock(&uuid_lock);

	for (int i = 0; i < 6; i++)
		out[i] = (uint8_t)(ms >> (40 - 8 * i));
	out[6] = (uint8_t)(0x70 | (ctr >> 8));
	out[7] = (uint8_t)(ctr & 0xff);
	memcpy(out + 8, rnd + 2, 8);
	out[8] = (uint8_t)(0x80 | (out[8] & 0x3f));
	return 0;
}

static const char hex_digits[] = "0123456789abcdef";

void pf_hex_encode(const uint8_t *src, size_t n, char *dst)
{
	for (size_t i = 0; i < n; i++) {
		dst[2 * i] = hex_digits[src[i] >> 4];
		dst[2 * i + 1] = hex_digits[src[i] & 0xf];
	}
	dst[2 * n] = '\0';
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int pf_hex_decode(const char *src, uint8_t *dst, size_t n)
{
	if (!src)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		int hi = hex_value(src[2 * i]);
		if (hi < 0)
			return -EINVAL;
		int lo = hex_value(src[2 * i + 1]);
		if (lo < 0)
			return -EINVAL;
		dst[i] = (uint8_t)(hi << 4 | lo);
	}
	return src[2 * n] == '\0' ? 0 : -EINVAL;
}

void pf_uuid_format(const uint8_t uid[16], char dst[PF_UUID_STR_LEN + 1])
{
	/* 8-4-4-4-12 (RFC 9562 §4). */
	static const uint8_t groups[] = {4, 2, 2, 2, 6};
	size_t in = 0, o = 0;

	for (size_t g = 0; g < PF_ARRAY_SIZE(groups); g++) {
		if (g)
			dst[o++] = '-';
		pf_hex_encode(uid + in, groups[g], dst + o);
		in += groups[g];
		o += 2u * groups[g];
	}
	dst[o] = '\0';
}

int pf_uuid_parse(const char *s, uint8_t out[16])
{
	char compact[33];
	size_t n = 0;

	if (!s)
		return -EINVAL;
	size_t len = strnlen(s, PF_UUID_STR_LEN + 1);
	if (len == 32) {
		memcpy(compact, s, 32);
		n = 32;
	} else if (len == PF_UUID_STR_LEN) {
		for (size_t i = 0; i < len; i++) {
			bool dash_pos = i == 8 || i == 13 || i == 18 || i == 23;
			if (dash_pos != (s[i] == '-'))
				return -EINVAL;
			if (!dash_pos)
				compact[n++] = s[i];
		}
	} else {
		return -EINVAL;
	}
	compact[n] = '\0';
	uint8_t tmp[16];
	int r = pf_hex_decode(compact, tmp, 16);
	if (r < 0)
		return r;
	memcpy(out, tmp, 16);
	return 0;
}

int pf_uuid_version(const uint8_t uid[16])
{
	return uid[6] >> 4;
}
