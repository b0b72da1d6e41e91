/* sampler_int.h — the sampler's shared internals, behind sampler_bpf.h (never included from
 * outside agent/sampler/). The pf_sampler object is one module in several files, each a seam
 * of it; only these files touch the BPF skeleton:
 *
 *   sampler_bpf.c      the object's life: BPF load and attach, perf events, pid verdicts into
 *                      the kernel's filter map, configuration, polling, clocks
 *   sampler_read.c     the ring buffers' read path: sample records and process events
 *   sampler_window.c   windows (close, cut at a frequency change) and the span triggers' ring
 *   sampler_capture.c  captures: their pid map, perf events and windows
 *   sampler_stats.c    counters for metrics and health
 *   sampler_offcpu.c   off-CPU profiles: the switch programs' links, knobs, aggregation
 *   sampler_alloc.c    allocation captures: the allocator probes' links, guard, aggregation
 *
 * Functions here take the prefix sampler_; file-local ones have none. */
#ifndef PF_AGENT_SAMPLER_INT_H
#define PF_AGENT_SAMPLER_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "cpu_sampler.skel.h"
#include "interp/interp_unwind.h"
#include "pf/clock.h"
#include "pf/heap.h"
#include "sampler/aggregate.h"
#include "sampler/bpf/cpu_sampler.h"
#include "sampler/sampler_bpf.h"

struct pf_symbolizer;
struct pf_unwinder;
struct pf_py_unwind;
struct pf_v8_unwind;
struct pf_hs_unwind;
struct pf_sample_ring;
struct sampler_alloc;

#define SAMPLER_MAX_READY 8
/* the interpreter walkers, in naming order */
#define SAMPLER_WALKER_PY 0
#define SAMPLER_WALKER_V8 1
#define SAMPLER_WALKER_JVM 2
#define SAMPLER_WALKERS 3

_Static_assert(PF_SAMPLER_CAPTURES == PF_CAPTURE_SLOTS, "capture slot counts differ");

/* One capture (pf_sampler_capture_start). */
struct sampler_cap {
	bool used;
	enum pf_prof_type type; /* cpu: ticks; off_cpu: waits; wall: both, weighted in ns */
	uint32_t hz;	 /* its own frequency (<= cap_hz unless off_cpu, which takes no ticks) */
	uint32_t acc;	 /* thinning: keeps hz of every cap_hz ticks */
	uint64_t start;	 /* unix ns */
	struct pf_agg *agg;
};

/* A set of cpu-clock perf events, one per online CPU, running one program. */
struct sampler_perf_set {
	int *fds;
	struct bpf_link **links;
	uint32_t n;
};

/* Processes found gone when their first samples were read (SAMPLER_GONE_SLOTS, direct-mapped, for
 * SAMPLER_GONE_MS): see pid_gone(). */
#define SAMPLER_GONE_SLOTS 256
#define SAMPLER_GONE_MS 2000

struct pf_sampler {
	struct pf_sampler_options opt;
	struct cpu_sampler_bpf *skel;
	struct bpf_link *proc_links[3];
	struct ring_buffer *rb;
	int stats_fd; /* BPF_ENABLE_STATS: run time is counted while open */
	bool ksym_prog;			  /* resolve_ksyms loaded: kernel frames resolved by it */
	struct pf_bpf_ksym_req *ksym_req; /* its request buffer, allocated at first use */
	struct pf_heap_trim heap;	  /* give-backs at window closes */
	uint64_t helper_samples;	  /* samples of the table builders' children dropped */
	uint64_t setup_cpu_ns; /* thread CPU time of new processes' set-up (sampler_setup_*) */
	uint64_t setup_sym_mark; /* the symbolizer's own set-up count at sampler_setup_begin */
	uint64_t windows_held, windows_held_ns; /* pf_sampler_close_window_at with an end */

	int n_cpus_possible;
	struct gone_pid {
		uint32_t pid;
		uint64_t ms;
	} gone[SAMPLER_GONE_SLOTS]; /* see pid_gone() */
	struct sampler_perf_set pe;  /* continuous sampling: do_sample */
	struct sampler_perf_set cpe; /* captures: do_capture at cap_hz */
	uint32_t cap_hz;
	struct sampler_cap cap[PF_SAMPLER_CAPTURES];

	uint32_t freq_hz;
	bool enabled, triggered_mode, trigger_on;

	struct pf_procinfo *pi;
	struct pf_symbolizer *sym;
	struct pf_agg *agg;

	uint32_t self_pid;
	int64_t mono_to_unix; /* unix ns = mono ns + this */
	uint64_t window_start;
	uint64_t lost_at_close; /* lost (kernel + user) counted at the last close */

	struct pf_prof_window *ready[SAMPLER_MAX_READY];
	size_t n_ready;
	int last_error;

	struct pf_unwinder *unw;     /* .eh_frame tables in the kernel, NULL when walking by
				      * frame pointers only */
	const char *unw_off;         /* why unw is NULL */
	char *unw_cache_dir;
	uint64_t dwarf_samples;

	struct pf_py_unwind *py;     /* CPython processes: kernel entries and frame names */
	uint64_t py_map_errors;      /* py_procs updates refused */
	struct pf_v8_unwind *v8;     /* node processes: kernel entries and JS frame names */
	uint64_t v8_map_errors;      /* v8_procs updates refused */
	struct pf_hs_unwind *hs;     /* JVMs: code-cache addresses to Java frames, their names */
	uint64_t jvm_ips[PF_MAX_STACK]; /* a JVM sample's user words, its Java frames written */
	uint64_t jvm_map_errors;	/* jvm_procs updates refused */
	/* py, v8 and hs behind their calls alike (interp_unwind.h), in naming order */
	struct sampler_walker {
		const struct pf_interp_walker *ops;
		void *w;
	} walkers[SAMPLER_WALKERS];

	/* off-CPU (sampler_offcpu.c): the sys_exit and sched_switch links while on, the
	 * aggregation of their records (created at the first attach), profiling.off_cpu */
	struct bpf_link *off_links[2];
	struct pf_agg *off_agg;
	bool off_cpu_cfg;
	double off_cpu_prob;

	struct sampler_alloc *alloc; /* the alloc capture running, NULL when none */
	bool alloc_prog;	     /* alloc_probe loaded (session uprobes) */
	struct pf_alloc_options alloc_opt; /* profiling.alloc, for captures of type alloc */
	char cap_note[PF_SAMPLER_CAPTURES][256]; /* the last stop's note per slot (alloc) */

	struct pf_sample_ring *ring; /* span triggers: recent samples, NULL when off */
	bool ring_off_cpu;	     /* the ring keeps off-CPU waits too (wall, off_cpu spans) */
	uint64_t drained_unix_ns;    /* when the last poll started draining */
};

/* ---- sampler_bpf.c ---- */

/* Set-up work (see sampler_bpf.c): thread CPU time between the two into setup_cpu_ns. */
uint64_t sampler_setup_begin(struct pf_sampler *s);
void sampler_setup_end(struct pf_sampler *s, uint64_t t0);
/* mono_to_unix from a tight pair of clock reads. */
void sampler_refresh_clock(struct pf_sampler *s);
/* Empties the BPF hash map m (keys of key_size bytes, at most 8) one delete per key, at most
 * its max_entries deletes; stops at the first that fails. */
void sampler_map_clear(struct bpf_map *m, size_t key_size);

/* Whether p is profiled (the agent itself only with include_self). */
bool sampler_proc_allowed(struct pf_sampler *s, const struct pf_proc *p);
/* p's verdict into the kernel's pid_filter; sampler_push_one is its pf_procinfo_foreach form
 * (skips exited processes). */
void sampler_push_verdict(struct pf_sampler *s, const struct pf_proc *p);
int sampler_push_one(void *ctx, const struct pf_proc *p);
/* True while include/exclude filters need verdicts in the kernel. */
bool sampler_need_filter(struct pf_sampler *s);

/* One cpu-clock event per online CPU at hz running prog; close; a new frequency. */
int sampler_perf_open(struct pf_sampler *s, struct sampler_perf_set *ps, struct bpf_program *prog,
		      uint32_t hz, struct pf_error *err);
void sampler_perf_close(struct sampler_perf_set *ps);
int sampler_perf_set_period(struct sampler_perf_set *ps, uint32_t hz, const char *key,
			    struct pf_error *err);
/* The continuous perf events in line with enabled/mode/trigger/ring and hz. */
int sampler_apply_running(struct pf_sampler *s, uint32_t hz, struct pf_error *err);

/* ---- sampler_read.c: ring buffer callbacks (libbpf ring_buffer_sample_fn) ---- */

int sampler_on_sample(void *ctx, void *data, size_t size);
/* One sample into agg; a full aggregation drops it (counted in its stats), any other error
 * becomes s->last_error. */
void sampler_agg_add(struct pf_sampler *s, struct pf_agg *agg, const struct pf_agg_sample *as);
int sampler_on_event(void *ctx, void *data, size_t size);

/* ---- sampler_window.c ---- */

/* pf_agg_hooks.resolve: attributes, native and Python frame names of pid's frames. */
int sampler_resolve(void *ctx, uint32_t pid, struct pf_prof_window *w, struct pf_prof_process *p,
		    struct pf_prof_frame *frames, size_t n);
/* pf_procinfo reap callback: lets go of pid's symbolizer and interpreter state. */
void sampler_forget_pid(void *ctx, uint32_t pid);
/* pid exec'ed or is gone: the interpreter walkers let go of it. */
void sampler_walkers_forget(struct pf_sampler *s, uint32_t pid);
bool sampler_captures_running(const struct pf_sampler *s);
/* Closes agg as a capture's window from start (unix ns) to now (at least 1 ns later) at hz,
 * its frames named by sampler_resolve: pf_agg_close()'s result. */
int sampler_close_capture(struct pf_sampler *s, struct pf_agg *agg, uint64_t start, uint32_t hz,
			  struct pf_prof_window **out);
/* Closes the samples before end (unix ns; 0 now) at hz into a finished window. */
int sampler_cut_window(struct pf_sampler *s, uint64_t end, uint32_t hz, struct pf_error *err);

/* ---- sampler_offcpu.c ---- */

/* min_block_us and probability into the kernel's knobs. */
void sampler_off_cpu_knobs(struct pf_sampler *s, const struct pf_profcfg *cfg);
/* Brings the switch programs in line with what needs them: continuous off-CPU profiles while
 * profiling samples, the span ring's waits, captures of type off_cpu or wall (their slots in
 * the kernel's off_cpu_cap_mask). Attached while any does; err names
 * profiling.off_cpu.enabled. */
int sampler_off_cpu_update(struct pf_sampler *s, struct pf_error *err);
bool sampler_off_cpu_on(const struct pf_sampler *s);
/* An off-CPU record, set up as any sample (as), off_ns away, its reason and captures in flags;
 * cont: the thread was followed for the continuous profiles (its process profiled now). Into
 * the off-CPU aggregation and the span ring (weighted by off_ns / probability) when cont, and
 * into the aggregation of every off_cpu or wall capture of its flags (the part of the wait
 * since the capture started). */
void sampler_off_cpu_sample(struct pf_sampler *s, const struct pf_agg_sample *as, uint64_t off_ns,
			    uint32_t flags, bool cont);
void sampler_off_cpu_free(struct pf_sampler *s);

/* ---- sampler_alloc.c ---- */

/* Before load: the alloc programs' attach types, loaded only when wanted and session uprobes
 * exist (s->alloc_prog says whether). */
void sampler_alloc_setup(struct pf_sampler *s, bool want);
/* A PF_SAMPLE_F_ALLOC record (as set up as any sample; size asked, address returned) or a
 * PF_SAMPLE_F_ALLOC_FREE one (addr). */
void sampler_alloc_record(struct pf_sampler *s, const struct pf_agg_sample *as, uint64_t size,
			  uint64_t addr, uint32_t flags);
void sampler_alloc_freed(struct pf_sampler *s, uint64_t addr);
/* The guard, from pf_sampler_poll. */
void sampler_alloc_poll(struct pf_sampler *s);
void sampler_alloc_free(struct pf_sampler *s);

/* ---- sampler_stats.c ---- */

/* The per-CPU state (struct pf_bpf_percpu) of every possible CPU, stride bytes apart: a
 * malloc'd array the caller frees, or NULL with *err. */
char *sampler_percpu_read(struct pf_sampler *s, size_t *stride, int *err);
/* Samples lost so far (kernel ring buffer full + user sample store full). */
uint64_t sampler_lost_total(struct pf_sampler *s);

#endif
