/* aggregate.h — raw CPU samples in, one struct pf_prof_window (pf/profile.h) out.
 *
 * Owns: the samples of the open window (a bounded array: time, pid, tid, cpu, thread name and
 * an interned stack) and the stack intern table (stacks deduplicated by content). Nothing here
 * touches BPF or /proc: the sampler feeds samples, and hooks supply process attributes and
 * symbols when a window closes, so this is unit-testable on its own.
 *
 * pf_agg_close(end) takes every sample with time < end and builds the window: one process per
 * pid (kept by hooks->keep), per process its unique frames (by kind + address; a user word the
 * kernel made for a Python frame, PF_PY_IS_FRAME, is a PF_FRAME_PYTHON frame; one for a JS frame, PF_V8_IS_FRAME, a
 * PF_FRAME_V8JS frame), stacks (leaf
 * first, kernel frames before user frames) and one sample per (tid, stack) with its count and
 * every per-sample timestamp, ascending. Samples at or after `end` stay for the next window, so
 * a close never loses a sample that raced with it. Samples are kept with their exact times
 * until then, which is what the slow-span trigger will cut time ranges from.
 *
 * An off-CPU aggregation (pf_agg_options.off_cpu) takes samples with a weight (nanoseconds
 * off the CPU) and a reason, and closes into a window of the one sample type off_cpu/
 * nanoseconds (period type the same, period 1): one sample per (tid, stack, reason), its
 * value the sum of the weights, each timestamp with its own weight (event_values), and the
 * label profleet.off_cpu.reason = blocked | preempted.
 *
 * A wall-clock aggregation (pf_agg_options.wall) takes weighted samples the same way — a CPU
 * tick weighs its sampling period in nanoseconds, an off-CPU wait its nanoseconds away — and
 * closes into a window of the one sample type wall/nanoseconds (period type the same, period
 * 1e9 / frequency_hz): one sample per (tid, stack), so a stack's time on and off the CPU adds
 * up, each timestamp with its own weight, no reason label.
 *
 * An allocation aggregation (pf_agg_options.alloc) takes samples with a weight (estimated
 * bytes), objects (estimated objects) and reason 1 while the allocation is live (changed with
 * pf_agg_set_reason when its free is seen), and closes into a window of pprof's heap profile
 * types alloc_objects/count, alloc_space/bytes, inuse_objects/count, inuse_space/bytes
 * (period type space/bytes, period alloc_period): one sample per (tid, stack), the inuse
 * values summed over its live allocations only; no timestamps.
 *
 * Not thread-safe. */
#ifndef PF_AGENT_AGGREGATE_H
#define PF_AGENT_AGGREGATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/profile.h"

struct pf_agg;

struct pf_agg_options {
	size_t max_samples; /* samples held at once; beyond it pf_agg_add drops. 0 = 262144 */
	bool off_cpu;       /* weighted off-CPU samples (above) */
	bool wall;          /* weighted on- and off-CPU samples (above); not with off_cpu */
	bool alloc;         /* allocation samples (above) */
	int64_t alloc_period; /* alloc: the mean sample interval in bytes */
};

/* pf_agg_sample.reason of an off-CPU sample */
enum pf_agg_off_reason { PF_AGG_OFF_BLOCKED = 0, PF_AGG_OFF_PREEMPTED = 1 };

struct pf_agg_sample {
	uint64_t ts_unix_ns;
	uint32_t pid, tid;
	uint32_t cpu;
	const char *comm; /* thread name, may be NULL; at most 15 bytes are kept */
	const uint64_t *kstack; /* kernel ips, leaf first */
	uint32_t n_kstack;
	const uint64_t *ustack; /* user ips, leaf first */
	uint32_t n_ustack;
	uint64_t weight; /* off-CPU and wall aggregations: nanoseconds (clamped to INT64_MAX) */
	uint8_t reason;  /* off-CPU aggregation: enum pf_agg_off_reason (ignored by wall); alloc: 1 = live */
	uint64_t objects; /* alloc aggregation: estimated objects (weight: estimated bytes) */
};

struct pf_agg_hooks {
	/* false: drop this pid's samples (filters decided after the kernel recorded them).
	 * NULL keeps every pid. */
	bool (*keep)(void *ctx, uint32_t pid);
	/* Fill p->attrs, p->mappings and for each frame (address and kind set) mapping, function,
	 * file and line, allocating from w. NULL leaves frames unsymbolized (mapping -1).
	 * A negative return fails the close. */
	int (*resolve)(void *ctx, uint32_t pid, struct pf_prof_window *w,
		       struct pf_prof_process *p, struct pf_prof_frame *frames, size_t n_frames);
	void *ctx;
};

struct pf_agg_stats {
	uint64_t added;   /* samples accepted */
	uint64_t dropped; /* samples refused: store full */
	uint64_t pending; /* samples held now */
	uint64_t stacks;  /* unique stacks held now */
};

/* NULL and errno on failure. opt may be NULL. */
struct pf_agg *pf_agg_new(const struct pf_agg_options *opt);
void pf_agg_free(struct pf_agg *agg);

/* Copies the sample in. 0, -ENOSPC (store full; counted in dropped), -ENOMEM. */
int pf_agg_add(struct pf_agg *agg, const struct pf_agg_sample *s);

/* Builds the window [start, end) from the samples with time < end (times before start are
 * clamped to start) and removes them. *out is a new window (freed with pf_prof_window_free),
 * possibly with no processes. 0, -ENOMEM, or the hook's error; on error the samples stay. */
int pf_agg_close(struct pf_agg *agg, uint64_t start_unix_ns, uint64_t end_unix_ns,
		 uint32_t frequency_hz, const struct pf_agg_hooks *hooks,
		 struct pf_prof_window **out);

/* pf_agg_add, and the sample's index (valid until the next close) into *idx. */
int pf_agg_add_index(struct pf_agg *agg, const struct pf_agg_sample *s, size_t *idx);
/* Sets the reason of the sample at idx (alloc: 0 once freed). 0 or -ENOENT. */
int pf_agg_set_reason(struct pf_agg *agg, size_t idx, uint8_t reason);

void pf_agg_stats(const struct pf_agg *agg, struct pf_agg_stats *out);

#endif
