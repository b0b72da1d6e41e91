/* sampler_bpf.h — the eBPF CPU sampler: kernel to symbolized window.
 *
 * Owns the BPF skeleton (bpf/cpu_sampler.bpf.c; the files behind sampler_int.h are the only code
 * touching it), one
 * perf_event (software cpu-clock) per online CPU, the two ring buffers, the pid allow-map, and
 * the user-side pipeline: procinfo (attributes + filter verdicts), aggregate (samples of the
 * open window) and symbolize (maps, ELF/DWARF, kallsyms).
 *
 * Design: the BPF program writes one record per tick (time, pid, tid, cpu, comm, kernel + user
 * stack, sized to the stack depth) into a ring buffer instead of a stack-trace map + counts
 * map: every sample keeps its own timestamp (the slow-span trigger cuts exact time ranges),
 * there are no stack-id hash collisions to lose samples to and no map to clear racily at a
 * window boundary. Stacks are deduplicated in user space (aggregate.c). Process exec/fork/exit
 * come from tp_btf programs through a second ring buffer; the pid allow-map is updated from
 * them (forks inherit the parent's verdict in the kernel at once).
 *
 * Use (single thread; from the agent's loop, or a worker thread that owns it):
 *
 *   struct pf_error err = {0};
 *   struct pf_sampler *s = pf_sampler_new(NULL, &err);      // load, attach process tracking
 *   pf_sampler_set_config(s, cfg, &err);                     // frequency, filters, enabled/mode
 *   // poll pf_sampler_fd(s) (epoll fd) for readability and on a 100..1000 ms timer, then
 *   // pf_sampler_poll(s, 0); or call pf_sampler_poll(s, 250) in a loop
 *   struct pf_prof_window *w = pf_sampler_close_window(s, &err);   // every duration_seconds
 *   ... encode ...; pf_prof_window_free(w);
 *   while ((w = pf_sampler_next_window(s))) ...              // parts split off by a frequency change
 *   pf_sampler_free(s);
 *
 * pf_sampler_set_config() applies at once and loses nothing: the samples of the open window
 * stay; a new frequency closes the samples taken at the old one into a finished window, cut at
 * the moment of the switch (a window has one sampling period). pf_sampler_close_window() then
 * returns the oldest finished window and pf_sampler_next_window() the later ones, in order.
 *
 * Errors: -EPERM/-EACCES/-ENOTSUP/-ENOSYS from pf_sampler_new() mean the kernel refuses BPF or
 * perf events (no privileges, no BTF, locked down); err says which step. */
#ifndef PF_AGENT_SAMPLER_BPF_H
#define PF_AGENT_SAMPLER_BPF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/error.h"
#include "pf/profcfg.h"
#include "pf/profile.h"
#include "interp/python_unwind.h"
#include "interp/v8_unwind.h"
#include "interp/hotspot_unwind.h"
#include "sampler/procinfo.h"
#include "symbolize/symbolize.h"
#include "unwind/unwinder.h"

struct pf_sampler;

struct pf_sampler_options {
	const char *host_name;  /* host.name attribute; default gethostname() */
	bool command_line;      /* record process.command_line (off by default) */
	bool include_self;      /* sample the agent's own process too (default: excluded) */
	size_t max_samples;     /* samples held in the open window; 0 = 262144 */
	size_t max_elf_files;   /* symbolizer ELF cache bound; 0 = 128 */
	bool no_kernel_symbols; /* skip /proc/kallsyms */
	/* pod attribution (agent/k8s/podcache.h): extra process attributes; NULL: none */
	const struct pf_procinfo_source *attr_source;
	/* PF_BENCH_* bits of cpu_sampler.h: parts of the sample program left out, for
	 * bench/bpf_sample_cost.sh only; 0 (the whole program) everywhere else */
	uint32_t bench_omit;
	/* .eh_frame unwinding (unwinder.h): directory of the table cache (NULL: none; the agent
	 * passes <state dir>/unwind), rows the kernel holds (0: PF_SAMPLER_UNWIND_ROWS; rounded
	 * up to 1024), and a switch to walk by frame pointers only */
	const char *unwind_cache_dir;
	uint32_t unwind_rows;
	bool no_dwarf_unwind;
	/* source lines and inlined frames (symbolize.h): directory of the per-file
	 * tables a child builds from DWARF (NULL: a private temporary one; the agent passes
	 * <state dir>/lines) */
	const char *line_cache_dir;
};

#define PF_SAMPLER_UNWIND_ROWS (512u << 10) /* 8 bytes each: 4 MiB, all of it in the RSS */

struct pf_sampler_prog_stats {
	const char *name; /* BPF program name */
	uint64_t run_time_ns;
	uint64_t run_cnt;
};

#define PF_SAMPLER_N_PROGS 8 /* do_sample, handle_{exec,fork,exit}, resolve_ksyms, do_capture,
			      * off_cpu_switch, off_cpu_sys_exit */

struct pf_sampler_stats {
	bool running;            /* perf events attached */
	uint32_t frequency_hz;
	uint32_t n_cpus;         /* perf events open */
	uint64_t samples;        /* kernel: ticks recorded (continuous sampling) */
	uint64_t capture_samples; /* kernel: capture ticks recorded */
	uint32_t capture_hz;      /* capture perf events' frequency, 0 when none runs */
	uint32_t captures;        /* captures sampling now */
	uint64_t lost_kernel;    /* kernel: ring buffer full */
	uint64_t lost_user;      /* user: sample store full */
	uint64_t filtered;       /* kernel: ticks of excluded processes */
	uint64_t stack_errors;   /* kernel: no stack could be walked */
	uint64_t lost_events;    /* kernel: process events lost */
	uint64_t processes;      /* processes known to procinfo */
	uint64_t pending;        /* samples in the open window */
	bool bpf_stats_enabled;  /* run_time_ns is only counted while BPF stats are on */
	uint64_t bpf_run_time_ns; /* sum over the programs */
	uint64_t bpf_run_cnt;
	struct pf_sampler_prog_stats progs[PF_SAMPLER_N_PROGS];
	/* bench_omit PF_BENCH_TIMING only: ns in filter, kernel stack, user stack, record and
	 * ring-buffer write summed over bench_timed recorded ticks; 0 otherwise */
	uint64_t bench_part_ns[5]; /* PF_CNT_T_FILTER .. PF_CNT_T_OUTPUT */
	uint64_t bench_timed;
	/* the symbolizer's counters: ELF cache, source-line tables, JIT maps, Go pclntab,
	 * kernel symbols (symbolize.h) */
	struct pf_symbolizer_stats sym;
	uint64_t helper_samples; /* samples of the agent's table builders that reached user
				  * space (recorded before the kernel knew the child's pid) */
	uint64_t windows_held, windows_held_ns; /* closes given an earlier end, how late */
	/* off-CPU (profiling.off_cpu): the switch program attached; kernel: records written,
	 * switch-outs followed, returns sooner than min_block_us, switch-outs of filtered
	 * processes, records not kept (too many threads away), records without a user stack
	 * (the thread left again before its system call returned); user: records refused
	 * (store full), samples of the open window */
	bool off_cpu;
	uint64_t off_cpu_samples, off_cpu_switches, off_cpu_short, off_cpu_filtered, off_cpu_full;
	uint64_t off_cpu_kernel_only;
	uint64_t off_cpu_lost_user, off_cpu_pending;
	int last_error;          /* negative errno of the last failure, 0 when healthy */
	/* .eh_frame unwinding: on, or why not; the unwinder's counters (unwinder.h) */
	bool dwarf_unwind;
	const char *dwarf_unwind_off_reason; /* static string, NULL when on */
	struct pf_unwinder_stats unwind; /* zero while off */
	uint64_t dwarf_samples; /* samples whose user stack the table walk produced */
	/* Python frames: profiling.interpreters.python; the walker's own counters (processes
	 * by minor version, detections, names, the last unsupported processes:
	 * python_unwind.h); kernel: samples given Python frames, frames read, frame reads that
	 * failed, samples of threads without a PyThreadState; kernel entries refused */
	bool python;
	struct pf_py_unwind_stats py;
	uint64_t py_samples, py_frames, py_read_errors, py_no_thread, py_map_errors;
	/* JS frames: profiling.interpreters.nodejs; the walker's counters (v8_unwind.h);
	 * kernel: JS frames written, V8 frames it could not read; kernel entries refused */
	bool nodejs;
	struct pf_v8_unwind_stats v8;
	uint64_t v8_frames, v8_read_errors, v8_map_errors;
	/* Java frames: profiling.interpreters.java; the walker's counters (hotspot_unwind.h);
	 * kernel: code-cache frames stepped, those it could not step; kernel entries refused */
	bool java;
	struct pf_hs_unwind_stats jvm;
	uint64_t jvm_frames, jvm_read_errors, jvm_map_errors;
};

/* Opens, loads and attaches the process-tracking programs, reads /proc once. Not sampling
 * until pf_sampler_set_config() enables it. NULL and errno (+ err) on failure. */
struct pf_sampler *pf_sampler_new(const struct pf_sampler_options *opt, struct pf_error *err);
void pf_sampler_free(struct pf_sampler *s);

/* Applies enabled, mode, sampling.frequency_hz and filters. mode triggered samples only
 * while pf_sampler_trigger(s, true). On error the previous settings stay. */
int pf_sampler_set_config(struct pf_sampler *s, const struct pf_profcfg *cfg, struct pf_error *err);
/* The local trigger hook for mode triggered (the trigger engine comes later). */
int pf_sampler_trigger(struct pf_sampler *s, bool on, struct pf_error *err);

/* An epoll fd that becomes readable when process events arrive or the sample ring buffer is
 * a quarter full (samples do not wake it one by one, to keep wake-ups rare). An event loop
 * must also call pf_sampler_poll(s, 0) from a timer (every 100..1000 ms). */
int pf_sampler_fd(const struct pf_sampler *s);
/* Consumes ring buffer records, waiting up to timeout_ms (0: don't wait, -1: forever).
 * Returns records consumed or -errno. */
int pf_sampler_poll(struct pf_sampler *s, int timeout_ms);

/* Drains the ring buffers and closes the open window at "now": samples, processes with their
 * attributes, symbolized stacks, lost samples since the last close. The next window starts
 * where this one ends. Returns the oldest finished window (see pf_sampler_next_window).
 * NULL and err on failure (the samples stay for the next try). */
struct pf_prof_window *pf_sampler_close_window(struct pf_sampler *s, struct pf_error *err);
/* The same with the window ending at end_unix_ns (<= now; 0: now): samples taken after it
 * stay for the next window. For a close held back past its time (pf_sampler_lines_building). */
struct pf_prof_window *pf_sampler_close_window_at(struct pf_sampler *s, uint64_t end_unix_ns,
						  struct pf_error *err);
/* True while a child builds a source-line table for binaries sampled lately: a window closed
 * now would name their new addresses without file and line. */
bool pf_sampler_lines_building(struct pf_sampler *s);
/* Further finished windows after pf_sampler_close_window() (oldest first), NULL when none. */
struct pf_prof_window *pf_sampler_next_window(struct pf_sampler *s);

/* The processes the current filters profile: live user processes (kernel threads are left
 * out) whose verdict allows them, the agent itself only with include_self. Writes up to cap
 * pids to out and returns how many there are (may exceed cap). Works while sampling is off
 * (mode triggered): process tracking runs from pf_sampler_new() on. */
size_t pf_sampler_profiled_pids(struct pf_sampler *s, uint32_t *out, size_t cap);

/* ---- Captures: sampling beside the continuous windows.
 *
 * A capture samples chosen processes at its own frequency on a second set of cpu-clock perf
 * events (do_capture), whatever the continuous settings are (also in mode triggered, also
 * while continuous sampling is off). Its processes are in the kernel's capture pid map, with a
 * bit per capture slot; forks inherit the parent's bits in the kernel. The capture events run
 * at the highest frequency of the captures running; a capture at a lower frequency keeps every
 * (max/own)-th of its processes' ticks, so its window has its own period. Capture samples go
 * to the capture's own aggregation, never into the continuous windows, which keep their rate
 * and samples. The perf events close when the last capture stops. */
#define PF_SAMPLER_CAPTURES 8

/* Reads /proc and returns in pids (at most max) the processes that the profiling filters
 * allow (never the agent itself unless include_self) and that match any of the n rules (n 0:
 * all of them). *n_out may be 0. -EINVAL (err names processes[i].value), -ENOMEM. */
int pf_sampler_capture_pids(struct pf_sampler *s, const struct pf_filter *rules, size_t n,
			    uint32_t *pids, size_t max, size_t *n_out, struct pf_error *err);
/* Starts capture `slot` (< PF_SAMPLER_CAPTURES, free) of type on the n pids, at hz (1..1000):
 *  - cpu: ticks of the capture perf events (a window of samples/count);
 *  - off_cpu: no ticks (hz unused); every switch-out of the processes' threads is followed in
 *    the kernel (also while profiling.off_cpu is off, whatever its probability) and each wait
 *    of at least off_cpu.min_block_us that ends during the capture weighs its nanoseconds
 *    since the capture started (an off_cpu/nanoseconds window, as the continuous one);
 *  - wall: both, in one wall/nanoseconds window: a tick weighs 1e9 / hz nanoseconds, a wait its
 *    nanoseconds, so each thread's total is the time it spent on and off the CPU (a wait still
 *    going on when the capture stops is not in it).
 *  - alloc: no ticks; the allocator probes of the processes (pf_sampler_alloc_start, with
 *    profiling.alloc's knobs; one alloc capture at a time) and a window of the four heap
 *    sample types; what the result should say is pf_sampler_capture_note after the stop.
 * -EBUSY (slot in use, or an alloc capture runs), -EINVAL, -ENOTSUP (alloc without session
 * uprobes), -ENOENT (alloc: no process maps a known allocator), or the perf/BPF error (err
 * says). */
int pf_sampler_capture_start(struct pf_sampler *s, unsigned slot, enum pf_prof_type type,
			     uint32_t hz, const uint32_t *pids, size_t n, struct pf_error *err);
/* Samples (ticks and waits) the capture holds so far (after the last poll). */
uint64_t pf_sampler_capture_samples(const struct pf_sampler *s, unsigned slot);
/* Stops capture `slot` and returns its window [start, now) (symbolized, attributes as the
 * continuous windows have them; possibly without processes), or NULL + errno (err). The slot
 * is free again either way. */
struct pf_prof_window *pf_sampler_capture_stop(struct pf_sampler *s, unsigned slot,
					       struct pf_error *err);

/* ---- Allocation captures (sampler_alloc.c; cpu_sampler.h "allocation profiles").
 *
 * One at a time: session uprobes (entry and return in one program; the return of a call that
 * is not sampled is not probed) on the allocator entry points (alloc_syms.h) of each of the n
 * processes, for that process only, until pf_sampler_alloc_stop. Sampled in the kernel by
 * bytes, a Poisson process with mean sample_bytes; each sample weighted by the unbiased
 * estimate (alloc_track.h); frees of sampled addresses matched in the kernel (a bounded map:
 * what it cannot hold is counted as untracked, never as live). The window has the sample types
 * alloc_objects, alloc_space, inuse_objects, inuse_space (inuse: sampled allocations not freed
 * by the stop). Guard: pf_sampler_poll detaches the probes once the probed calls of the
 * capture pass max_calls_per_second over a second; the window then holds what was sampled
 * until then and the result says so. Needs session uprobes (Linux 6.13+): -ENOTSUP before. */
#define PF_ALLOC_PIDS_MAX 64 /* processes one alloc capture probes */

struct pf_alloc_options {
	uint64_t sample_bytes;	       /* mean bytes between samples; 0: 524288 */
	uint64_t max_calls_per_second; /* guard; 0: PF_ALLOC_GUARD_DEFAULT */
	bool bench_empty;	       /* bench only: an empty uprobe on the same entry points
					* instead (no samples) */
};
#define PF_ALLOC_SAMPLE_BYTES_DEFAULT (512u << 10)
#define PF_ALLOC_GUARD_DEFAULT 1000000

struct pf_alloc_result {
	uint32_t processes; /* processes probed */
	uint32_t links;	    /* (process, allocator file) probes attached */
	uint64_t calls;	    /* probed calls (entries) */
	uint64_t sampled;   /* allocations sampled */
	uint64_t frees;	    /* frees of sampled allocations */
	uint64_t untracked; /* samples whose free could not be tracked (map full) */
	uint64_t failed;    /* sampled calls that returned no memory */
	uint64_t lost;	    /* records lost (ring buffer full, the aggregation full) */
	uint64_t collided;  /* CPU ticks, switches and sampled returns dropped because they came
			     * in while an allocation record was being built on their CPU */
	uint64_t live;	    /* sampled allocations live at the stop */
	bool guard_tripped; /* the probes were detached early by the guard */
	uint64_t guard_rate; /* calls per second that tripped it */
	char note[256];	     /* what the capture's result should say, "" when all went well */
};

/* The options profiling.alloc sets (sample_bytes, max_calls_per_second). */
void pf_sampler_alloc_options(const struct pf_profcfg *cfg, struct pf_alloc_options *o);

/* What the last stop of slot should tell the capture's result ("" when nothing): an alloc
 * capture's guard or untracked samples. */
const char *pf_sampler_capture_note(const struct pf_sampler *s, unsigned slot);
/* Allocations the running alloc capture has sampled so far (0 when none runs). */
uint64_t pf_sampler_alloc_samples(const struct pf_sampler *s);

/* Starts the alloc capture on pids[0, n) (n <= PF_ALLOC_PIDS_MAX). A process without a known
 * allocator is skipped (counted out of processes); -ENOENT when none has one, -EBUSY when one
 * runs, -ENOTSUP without session uprobes, or the attach error (err says). */
int pf_sampler_alloc_start(struct pf_sampler *s, const uint32_t *pids, size_t n,
			   const struct pf_alloc_options *o, struct pf_error *err);
bool pf_sampler_alloc_running(const struct pf_sampler *s);
/* Stops it: its window [start, now) (symbolized), res filled (may be NULL); NULL + errno
 * when none runs or the close fails. */
struct pf_prof_window *pf_sampler_alloc_stop(struct pf_sampler *s, struct pf_alloc_result *res,
					     struct pf_error *err);

/* The Python part of the sampler's health status from st into out[0, cap): "python: 2
 * processes (3.11: 2), frames read 1200, read failures 0", then the last unsupported processes
 * ("pid 12: python: 3.7 unsupported"); "python: off" when profiling.interpreters.python is
 * false. The length written, 0 when there is nothing to say (on, no CPython seen). */
size_t pf_sampler_python_status(const struct pf_sampler_stats *st, char *out, size_t cap);

/* The same for node processes: "nodejs: 2 processes (V8 11.3.244), JS frames 1234, ..."; or
 * "nodejs: off"; empty when no node process was seen. */
size_t pf_sampler_nodejs_status(const struct pf_sampler_stats *st, char *out, size_t cap);
/* The same for Java: "java: 2 JVMs, Java frames 1234, lookups failed 0, names 56, not named
 * 0; pid 9: jvm: ..." ("java: off"; "" when no JVM was seen). */
size_t pf_sampler_java_status(const struct pf_sampler_stats *st, char *out, size_t cap);
/* Which unwinders the sampled processes use, for the "unwinders" health component:
 * "native: unwind tables, python: 2, nodejs: off, java: 1" — native is "unwind tables" or
 * "frame pointers", each interpreter the processes whose frames it names, or "off". The
 * length written (truncated to cap - 1). */
size_t pf_sampler_unwinders_status(const struct pf_sampler_stats *st, char *out, size_t cap);

/* Counters for the agent's metrics and health. */
int pf_sampler_stats(struct pf_sampler *s, struct pf_sampler_stats *out);
/* Only the run time of the sampler's BPF programs (their sum, what the overhead guard reads
 * on every tick): one system call per program, where pf_sampler_stats() also reads every
 * counter of every CPU. 0, or -ENODATA (*ns 0) while the kernel does not count BPF run
 * time. */
int pf_sampler_bpf_run_time(struct pf_sampler *s, uint64_t *ns);
/* Thread CPU time the sampler's thread spent setting up the processes it met (/proc
 * attributes, maps for the symbolizer, unwind tables read, built and loaded, interpreters
 * detected, the symbolizer's ELF files and kernel symbols loaded), cumulative: the overhead guard judges it apart from sampling (guard.h). Same thread as pf_sampler_poll. */
uint64_t pf_sampler_setup_cpu_ns(const struct pf_sampler *s);
/* Entries of pid in the kernel's unwind map (tests: none once it exited), 0 without .eh_frame
 * unwinding. Iterates the whole map: not for hot paths. */
size_t pf_sampler_unwind_entries(struct pf_sampler *s, uint32_t pid);

/* 1 when the kernel's Python walk has an entry for pid (tests: none once it exited), else 0. */
size_t pf_sampler_python_entries(struct pf_sampler *s, uint32_t pid);

/* ---- the span triggers' sample ring (sample_ring.h) ----
 *
 * pf_sampler_set_ring(s, lookback, max_bytes) keeps every sample also in a ring for lookback
 * seconds within max_bytes (0 lookback: no ring, freed). While a ring exists the perf events
 * run whenever profiling is enabled, also in mode triggered between captures — then samples go
 * to the ring only, so no continuous windows are built. pf_sampler_cut() builds a window of
 * exactly [start, end) of one process (and one thread when tid != 0) from the ring, attributes
 * and symbols resolved as for a window (an empty window when there are no such samples), its
 * frequency the one most of its samples were taken at.
 * pf_sampler_drained_unix_ns() is the wall-clock time at which the last poll started draining
 * the kernel's ring buffer: every sample taken before it is in the ring. Exited processes with
 * samples in the ring keep their attributes and symbols until those samples age out. */
struct pf_sample_ring_stats;

struct pf_sampler_ring_proc {
	uint32_t pid;
	char service_name[128]; /* procinfo's service.name (else the executable name), "" unknown */
};

int pf_sampler_set_ring(struct pf_sampler *s, uint32_t lookback_seconds, size_t max_bytes,
			struct pf_error *err);
/* With off_cpu the ring also keeps the profiled processes' waits (the kernel's switch
 * programs follow them while the ring exists, with profiling.off_cpu's min_block_us and
 * probability): what wall and off_cpu cuts need. */
int pf_sampler_ring_off_cpu(struct pf_sampler *s, bool off_cpu, struct pf_error *err);
/* type cpu: the CPU samples (samples/count); off_cpu: the waits (off_cpu/nanoseconds); wall:
 * both in nanoseconds (wall/nanoseconds: a sample weighs its period, a wait its time away
 * within [start, end)), so the window's total is the thread's time in the range, blocked time
 * under the call that blocked. A wait that ends after end is not in it. */
int pf_sampler_cut(struct pf_sampler *s, uint32_t pid, uint32_t tid, uint64_t start_unix_ns,
		   uint64_t end_unix_ns, enum pf_prof_type type, struct pf_prof_window **out,
		   struct pf_error *err);
uint64_t pf_sampler_drained_unix_ns(const struct pf_sampler *s);
/* The processes with samples in the ring (at most cap), ascending by pid; 0 without a ring. */
size_t pf_sampler_ring_procs(struct pf_sampler *s, struct pf_sampler_ring_proc *out, size_t cap);
/* Lets go of exited processes (attributes, symbolizer maps) that have no samples in the ring
 * any more. Window closes do it too; in mode triggered between captures, where no window
 * closes, the owner calls it now and then. */
void pf_sampler_reap(struct pf_sampler *s);
/* The ring's counters; -ENOENT without a ring. */
int pf_sampler_ring_stats(struct pf_sampler *s, struct pf_sample_ring_stats *out);

#endif
