/* backoff.c — see pf/backoff.h. */
#include "pf/backoff.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "pf/hash.h"

/* Retry-After can name any future; cap what we hand out at 30 days. */
#define RETRY_AFTER_MAX_S (30LL * 24 * 3600)

static uint64_t xorshift64star(uint64_t *s)
{
	/* Marsaglia xorshift64, scrambled with a multiply (Vigna's xorshift64*). Not for secrets.
	 */
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

void pf_backoff_init(struct pf_backoff *b, uint64_t base_ms, uint64_t cap_ms)
{
	memset(b, 0, sizeof(*b));
	b->base_ms = base_ms;
	b->cap_ms = cap_ms;
	if (pf_random_bytes(&b->rng, sizeof(b->rng)) < 0) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		b->rng = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ (uintptr_t)b;
	}
	if (b->rng == 0) /* the one state xorshift cannot leave */
		b->rng = 0x9e3779b97f4a7c15ull;
}

uint64_t pf_backoff_next(struct pf_backoff *b)
{
	/* ceiling = min(cap, base * 2^attempt), computed without overflow. */
	uint64_t ceiling = b->base_ms ? b->cap_ms : 0;
	if (b->attempt < 64 && b->base_ms <= (b->cap_ms >> b->attempt))
		ceiling = b->base_ms << b->attempt;
	if (b->attempt < UINT32_MAX)
		b->attempt++;

	/* Full jitter: uniform in [0, ceiling] (multiply-shift range reduction). */
	uint64_t r = xorshift64star(&b->rng);
	uint64_t delay =
	    ceiling == UINT64_MAX ? r : (uint64_t)(((unsigned __int128)r * (ceiling + 1)) >> 64);

	/* The server's floor wins when larger, even over cap; it is used once. */
	if (b->floor_ms > delay)
		delay = b->floor_ms;
	b->floor_ms = 0;
	return delay;
}

void pf_backoff_reset(struct pf_backoff *b)
{
	b->attempt = 0;
	b->floor_ms = 0;
}

void pf_backoff_retry_after(struct pf_backoff *b, uint64_t ms)
{
	if (ms > b->floor_ms)
		b->floor_ms = ms;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	unsigned yoe = (unsigned)(y - era * 400);
	unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

static bool is_leap(int y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int digits(const char *s, int n)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

static int index_of3(const char *s, const char *const *names, int count)
{
	for (int i = 0; i < count; i++)
		if (memcmp(s, names[i], 3) == 0)
			return i;
	return -1;
}

/* IMF-fixdate (RFC 9110 §5.6.7): "Sun, 06 Nov 1994 08:49:37 GMT", exactly 29 chars, case-
 * sensitive. The obsolete RFC 850 and asctime forms are not accepted. */
static int parse_imf_fixdate(const char *s, size_t n, int64_t *out)
{
	static const char *const days[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
	static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
					     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
	static const uint8_t mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

	if (n != 29 || index_of3(s, days, 7) < 0 || memcmp(s + 3, ", ", 2) != 0 || s[7] != ' ' ||
	    s[11] != ' ' || s[16] != ' ' || s[19] != ':' || s[22] != ':' ||
	    memcmp(s + 25, " GMT", 4) != 0)
		return -EINVAL;
	int day = digits(s + 5, 2), mon = index_of3(s + 8, months, 12), year = digits(s + 12, 4);
	int hh = digits(s + 17, 2), mm = digits(s + 20, 2), ss = digits(s + 23, 2);
	if (day < 1 || mon < 0 || year < 0 || hh < 0 || hh > 23 || mm < 0 || mm > 59 || ss < 0 ||
	    ss > 60) /* 60: a leap second */
		return -EINVAL;
	int dim = mdays[mon] + (mon == 1 && is_leap(year));
	if (day > dim)
		return -EINVAL;
	*out = days_from_civil(year, (unsigned)mon + 1, (unsigned)day) * 86400 + hh * 3600 +
	       mm * 60 + ss;
	return 0;
}

int64_t pf_retry_after_parse(const char *value, int64_t now_unix_s)
{
	if (!value)
		return -EINVAL;
	/* Field values may carry optional whitespace around them (RFC 9110 §5.5). */
	while (*value == ' ' || *value == '\t')
		value++;
	size_t n = strlen(value);
	while (n > 0 && (value[n - 1] == ' ' || value[n - 1] == '\t'))
		n--;
	if (n == 0)
		return -EINVAL;

	int64_t secs;
	if (value[0] >= '0' && value[0] <= '9') {
		/* delta-seconds = 1*DIGIT (RFC 9110 §10.2.3); huge values saturate. */
		secs = 0;
		for (size_t i = 0; i < n; i++) {
			if (value[i] < '0' || value[i] > '9')
				return -EINVAL;
			if (secs < RETRY_AFTER_MAX_S)
				secs = secs * 10 + (value[i] - '0');
		}
	} else {
		int64_t when;
		if (parse_imf_fixdate(value, n, &when) < 0)
			return -EINVAL;
		secs = when - now_unix_s; /* a date in the past means "now" */
		if (secs < 0)
			secs = 0;
	}
	if (secs > RETRY_AFTER_MAX_S)
		secs = RETRY_AFTER_MAX_S;
	return secs * 1000;
}
