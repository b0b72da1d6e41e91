/* ratelimit.h — the agent's shared profile rate limit (profiling.limits.max_profiles_per_minute):
 * one budget for every source of profiles (sampler windows, pprof scrapes, captures, the
 * high_cpu and slow_span triggers).
 *
 * Owns a sliding-window log: the times of the profiles allowed during the last 60 s, at most
 * `limit` of them (a ring of limit timestamps, <= AGENT_RATELIMIT_MAX = 10000, 80 KB). A profile
 * is allowed when fewer than `limit` were allowed in the 60 s before it, so the limit holds
 * for every 60 s interval — a token bucket refilled at limit/60 per second would let 2 x limit
 * through in a minute that starts with a full bucket. Refusals are counted per source.
 *
 * Thread-safe (one mutex): the data plane's worker and other threads that export may share it.
 * Times are CLOCK_MONOTONIC milliseconds passed in by the caller (tests inject them). */
#ifndef AGENT_RATELIMIT_H
#define AGENT_RATELIMIT_H

#include <stdbool.h>
#include <stdint.h>

#define AGENT_RATELIMIT_MAX 10000 /* the key's range: 1..10000 */
#define AGENT_RATELIMIT_WINDOW_MS 60000u

enum agent_profile_source {
	AGENT_SRC_WINDOW,    /* continuous sampler windows */
	AGENT_SRC_PPROF,     /* scraped pprof targets */
	AGENT_SRC_CAPTURE,   /* on-demand captures */
	AGENT_SRC_HIGH_CPU,  /* the high_cpu trigger */
	AGENT_SRC_SLOW_SPAN, /* the slow_span trigger */
	AGENT_SRC_N
};

struct agent_ratelimit;

struct agent_ratelimit_stats {
	uint32_t limit;		       /* profiles per minute */
	uint32_t used;		       /* allowed during the last 60 s */
	uint64_t allowed[AGENT_SRC_N]; /* since creation, per source */
	uint64_t refused[AGENT_SRC_N]; /* since creation, per source */
};

/* limit 1..AGENT_RATELIMIT_MAX (clamped). NULL + errno (ENOMEM). */
struct agent_ratelimit *agent_ratelimit_new(uint32_t limit);
void agent_ratelimit_free(struct agent_ratelimit *rl);
/* Changes the limit, keeping the profiles of the last minute (a lower limit refuses until
 * enough of them age out). 0 or -ENOMEM (the old limit stays). */
int agent_ratelimit_set_limit(struct agent_ratelimit *rl, uint32_t limit);
/* Takes one profile's place at now_ms: true if allowed (counted), false if the limit is
 * reached (counted as refused for src). */
bool agent_ratelimit_take(struct agent_ratelimit *rl, enum agent_profile_source src,
			  uint64_t now_ms);
/* How many profiles would be allowed at now_ms (takes nothing). */
uint32_t agent_ratelimit_available(struct agent_ratelimit *rl, uint64_t now_ms);
void agent_ratelimit_stats(struct agent_ratelimit *rl, uint64_t now_ms,
			   struct agent_ratelimit_stats *out);
/* "window", "pprof", "capture", "high_cpu", "slow_span". */
const char *agent_profile_source_name(enum agent_profile_source src);

#endif
