/* pf/backoff.h — exponential backoff with full jitter (AWS architecture blog's "full
 * jitter": sleep = random(0, min(cap, base * 2^attempt))), plus a server-given floor
 * (Retry-After / RetryInfo), which wins when larger. Value type, no allocation. */
#ifndef PF_BACKOFF_H
#define PF_BACKOFF_H

#include <stdint.h>

struct pf_backoff {
	uint64_t base_ms;
	uint64_t cap_ms;
	uint32_t attempt;
	uint64_t floor_ms; /* set by pf_backoff_retry_after(); used once */
	uint64_t rng;      /* xorshift state */
};

void pf_backoff_init(struct pf_backoff *b, uint64_t base_ms, uint64_t cap_ms);
/* Delay before the next attempt, uniform in [0, min(cap, base * 2^attempt)], or the pending
 * floor when that is larger (the floor may exceed cap; it is consumed). Advances attempt. */
uint64_t pf_backoff_next(struct pf_backoff *b);
/* After a success: attempt = 0, pending floor dropped. */
void pf_backoff_reset(struct pf_backoff *b);
/* The server asked for at least this long before the next attempt (the larger of two wins). */
void pf_backoff_retry_after(struct pf_backoff *b, uint64_t ms);
/* Parses an HTTP Retry-After value (RFC 9110 §10.2.3): delta-seconds or an IMF-fixdate
 * ("Sun, 06 Nov 1994 08:49:37 GMT"), surrounding spaces allowed. Milliseconds from now
 * (0 for a date in the past, at most 30 days), or -EINVAL. */
int64_t pf_retry_after_parse(const char *value, int64_t now_unix_s);

#endif
