/* guard.h — the agent's overhead guard: profiling.limits.max_cpu_percent and max_memory_mb.
 *
 * Owns the measure of the agent's own cost and the sampling frequency it allows. Fed every
 * second or two with cumulative readings (process CPU time of all threads, run time of the
 * agent's BPF programs, RSS; readings under 0.9 s apart are ignored), it keeps a sliding
 * window of the last AGENT_GUARD_WINDOW_S seconds and decides:
 *
 *   setup   = CPU time of set-up work over the window (meeting new processes: their /proc
 *             attributes, maps and unwind tables), percent of one CPU. It has a budget of its
 *             own, AGENT_GUARD_SETUP_PERCENT: within it, it does not count against
 *             max_cpu_percent (a start meets every process of the host at once, and a lower
 *             frequency would not make that cheaper); only what exceeds it does.
 *   cpu     = (process CPU + BPF run time - setup) over the window, percent of one CPU,
 *             plus setup's excess over its own budget
 *   memory  = RSS; over budget when it stayed above max_memory_mb for the whole window
 *
 *   over budget (cpu > max_cpu_percent, or memory)  ->  one step down: the frequency halves
 *       (configured >> level), never below AGENT_GUARD_FLOOR_HZ (9 Hz; a configured frequency
 *       at or under the floor is never lowered). Every step restarts the window, so the next
 *       decision measures the new frequency: at most one step per window.
 *   throttled and under budget with a margin  ->  one step up, back along the same steps:
 *       only AGENT_GUARD_RESTORE_HOLD_S after the last change, and only when the window's cpu
 *       scaled to the next frequency (cpu x next/current, a pessimistic projection) and its
 *       highest RSS are both within AGENT_GUARD_RESTORE_MARGIN of the budget (hysteresis).
 *
 * A new budget or configured frequency (a config apply) starts over at the configured
 * frequency with an empty window. Pure: no clock, no /proc; the caller passes readings
 * (tests inject them). Not thread-safe. */
#ifndef AGENT_GUARD_H
#define AGENT_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AGENT_GUARD_WINDOW_S 10
#define AGENT_GUARD_FLOOR_HZ 9
#define AGENT_GUARD_RESTORE_HOLD_S 30
#define AGENT_GUARD_RESTORE_MARGIN 0.8
#define AGENT_GUARD_SETUP_PERCENT 5.0 /* set-up work's own budget, percent of one CPU */

struct agent_guard;

/* One reading; cpu_ns and bpf_ns are cumulative counters. */
struct agent_guard_sample {
	uint64_t mono_ns;   /* CLOCK_MONOTONIC */
	uint64_t cpu_ns;    /* agent process user + system, all threads */
	uint64_t bpf_ns;    /* run time of its BPF programs (0 when not counted) */
	uint64_t setup_ns;  /* of cpu_ns, the set-up work's (0 when not counted) */
	uint64_t rss_bytes; /* resident set */
};

struct agent_guard_budget {
	double max_cpu_percent; /* limits.max_cpu_percent */
	uint32_t max_memory_mb; /* limits.max_memory_mb */
	uint32_t frequency_hz;	/* sampling.frequency_hz as configured */
	bool fixed;		/* nothing to slow down (no sampler): measure and report only */
	bool ignore_memory;	/* RSS is not the agent's own (a sanitizer's shadow memory):
				 * max_memory_mb is not enforced */
};

struct agent_guard_state {
	uint32_t configured_hz, hz; /* hz: what the sampler should run at */
	unsigned level;		    /* steps down taken (0 = not throttled) */
	bool throttled;		    /* hz < configured_hz */
	bool measured;		    /* cpu_percent is from a full window */
	double cpu_percent;	    /* last full window; < 0 before the first */
	double setup_percent;	    /* set-up work in the last full window (apart from cpu) */
	uint64_t rss_bytes;	    /* last reading */
	bool over_cpu, over_memory; /* verdict of the last full window */
	double max_cpu_percent;
	uint32_t max_memory_mb;	       /* 0: not enforced (ignore_memory) */
	uint64_t steps_down, steps_up; /* since creation */
};

/* NULL + errno (ENOMEM). */
struct agent_guard *agent_guard_new(const struct agent_guard_budget *b);
void agent_guard_free(struct agent_guard *g);
/* A config apply. True (and a fresh start at the configured frequency) when the budget or
 * the frequency changed; false, and nothing changes, otherwise. */
bool agent_guard_set_budget(struct agent_guard *g, const struct agent_guard_budget *b);
/* Records a reading (readings closer than 0.9 s to the previous one are ignored) and returns
 * the frequency the sampler should run at. */
uint32_t agent_guard_update(struct agent_guard *g, const struct agent_guard_sample *s);
void agent_guard_state(const struct agent_guard *g, struct agent_guard_state *out);
/* One line for health and logs, e.g. "throttled: 49 Hz of 99 Hz, cpu 1.40% > 1.00%",
 * "99 Hz, cpu 0.12% of 1.00%, memory 14 of 64 MiB" (", set-up 2.10% of 5.00%" while set-up
 * work ran), "measuring (99 Hz)". Returns what
 * snprintf returns. */
int agent_guard_status(const struct agent_guard_state *st, char *buf, size_t cap);

#endif
