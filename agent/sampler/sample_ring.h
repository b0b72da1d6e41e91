/* sample_ring.h — the recent CPU samples (and off-CPU waits) of every sampled thread, kept for
 * a lookback time so a span that arrives after it ended can still be profiled exactly (the
 * slow-span and error-span triggers).
 *
 * Owns: a circular array of sample records (time, pid, tid, sampling frequency, stack id; 24
 * bytes each) in arrival order, a reference-counted intern table of the stacks they use (thread
 * name + kernel + user instruction pointers, deduplicated by content; a stack is freed with the
 * last sample that uses it), and the number of samples held per pid (so listing the sampled
 * pids costs the number of pids, not of samples). Nothing here touches BPF or /proc: the
 * sampler feeds it from its sample path and cuts from it on its own thread. Not thread-safe.
 *
 * Bounds: a sample older than lookback_seconds behind the newest one is evicted when the next
 * sample comes in; and the whole structure (records, stack table, hash buckets, pid table and
 * the stacks' instruction pointers, allocator overhead included as 16 bytes per allocation)
 * stays within max_bytes: past it the oldest samples are evicted early (counted in
 * evicted_memory), so the lookback shrinks under memory pressure instead of the agent growing.
 * pf_sample_ring_add() refuses (-ENOSPC) only a sample that alone does not fit. The agent sizes
 * max_bytes from limits.max_memory_mb (docs/agent.md "Slow-span trigger").
 *
 * Cost per minute of lookback: 24 bytes per sample (99 Hz x 2 busy CPUs: 11880 samples,
 * 278 KiB, plus up to half of it while the array grows) plus each distinct stack once (8 bytes
 * per frame + 72); bench/sample_ring_bench.c measures it (docs/benchmarks.md). */
#ifndef PF_AGENT_SAMPLE_RING_H
#define PF_AGENT_SAMPLE_RING_H

#include <stddef.h>
#include <stdint.h>

#include "sampler/aggregate.h"

struct pf_sample_ring;

#define PF_SAMPLE_RING_MIN_BYTES ((size_t)64 << 10)

struct pf_sample_ring_stats {
	uint64_t samples; /* held now */
	uint64_t stacks;  /* distinct stacks held now */
	uint64_t bytes;	  /* memory held now (see Bounds) */
	uint64_t max_bytes;
	uint64_t added;		 /* samples accepted */
	uint64_t evicted_age;	 /* samples evicted past lookback */
	uint64_t evicted_memory; /* samples evicted early to stay within max_bytes */
	uint64_t refused;	 /* samples refused (-ENOSPC, -ENOMEM) */
	uint64_t oldest_unix_ns, newest_unix_ns; /* 0 when empty */
};

/* lookback_seconds >= 1; max_bytes >= PF_SAMPLE_RING_MIN_BYTES (smaller is raised to it).
 * NULL and errno on failure. */
struct pf_sample_ring *pf_sample_ring_new(uint32_t lookback_seconds, size_t max_bytes);
void pf_sample_ring_free(struct pf_sample_ring *r);
/* New bounds, applied at once (evicts what no longer fits). */
void pf_sample_ring_set_limits(struct pf_sample_ring *r, uint32_t lookback_seconds,
			       size_t max_bytes);

/* Copies the sample in (comm: at most 15 bytes kept; cpu is not kept), taken at hz; hz 0: an
 * off-CPU wait of s->weight nanoseconds (kept in microseconds, at most 2^30 - 1 of them) and
 * s->reason. 0, -ENOSPC (does not fit at all), -ENOMEM. */
int pf_sample_ring_add(struct pf_sample_ring *r, const struct pf_agg_sample *s, uint32_t hz);

/* Calls fn for every held sample of pid (and of tid, unless tid is 0) with start <= time < end,
 * oldest first, with the frequency it was taken at (cpu is 0; an off-CPU wait: hz 0, its
 * weight and reason set, its time the moment the thread came back); the sample's pointers are
 * valid during the call only. Returns the number of samples passed to fn, or fn's first negative
 * return. */
int pf_sample_ring_cut(const struct pf_sample_ring *r, uint32_t pid, uint32_t tid, uint64_t start,
		       uint64_t end,
		       int (*fn)(void *ctx, const struct pf_agg_sample *s, uint32_t hz), void *ctx);

/* The distinct pids with samples held, ascending, at most cap of them; returns how many were
 * written. */
size_t pf_sample_ring_pids(const struct pf_sample_ring *r, uint32_t *out, size_t cap);

void pf_sample_ring_stats(const struct pf_sample_ring *r, struct pf_sample_ring_stats *out);

#endif
