/* dataplane.h — the agent's data plane (modes, exporters, health, pprof sources): the eBPF
 * sampler (sampler_bpf.h), the window timer, the pprof sources
 * (sampler_pprof.h), OTLP encoding (proto/codec/otlp_profiles.h) and the configured exporters
 * (export/exporter.h), steered by the active profiling config.
 *
 * Owns one worker thread ("dataplane") that owns the sampler: it creates it, drains its ring
 * buffers (when their epoll fd wakes it, and on a once-a-second tick that also runs the
 * overhead guard, exporter health and the metrics snapshot), closes a window every sampling.duration_seconds, encodes
 * it and hands the bytes to every exporter with agent_exporter_submit() (which copies them and
 * returns at once). Nothing of this runs on the lws loop: the loop only posts configs (the
 * apply hook's commit), trigger toggles and the stop request, and waits for the final flush.
 *
 * Config (agent_config hook "dataplane"): check() refuses exporters that cannot be built
 * (unsupported type, bad otlp_http endpoint or headers; the file exporter's directory is
 * checked by config.c's own hook) with the key path; it changes nothing (frequency range and
 * filter regexps are already validated by pf_profcfg_parse). commit() posts a private copy of the
 * config to the worker, which applies it with pf_sampler_set_config() — frequency, filters, enabled
 * and mode change without a restart and without losing the open window's samples (a frequency
 * change cuts them into their own window, exported at the next close) — and re-creates only the
 * exporters whose settings changed; a replaced exporter finishes its export in flight before it is
 * freed.
 *
 * Modes: continuous closes a window every duration_seconds. triggered samples only during a
 * capture of duration_seconds, started (or ended early) by agent_dataplane_toggle_trigger() —
 * the agent calls it on SIGUSR1, the local test hook until the trigger engine exists.
 * enabled: false stops the sampler (the partial window is exported) and leaves exporters idle.
 *
 * pprof targets (profiling.pprof.targets): the same worker owns the pprof sources; it polls
 * their schedule and wake fd next to the sampler's, and every scraped profile becomes a window
 * that goes through the same encoder and exporters as the sampler's. The mode governs eBPF
 * sampling only: a target with interval_seconds > 0 is scraped on its own interval in either
 * mode; interval 0 scrapes only on a trigger — in triggered mode, the toggle that starts a
 * capture also scrapes every interval-0 target (a cpu target for duration_seconds; without a
 * sampler every toggle does). enabled: false stops the scraping too. Config changes go through
 * pf_pprof_sources_update(): a target whose url and type stay keeps its health and schedule.
 * The check hook refuses a target the sources would (profiling.pprof.targets[i].url: ...).
 * A failing target (HTTP error, timeout, malformed or oversized profile) only marks its own
 * health component; the others and the eBPF path go on. At shutdown the windows already
 * scraped are exported and the scrapes in flight are cancelled.
 *
 * Health (agent_health, components registered here):
 *   sampler            healthy while it runs as configured; unhealthy with the reason when the
 *                      kernel refuses BPF or perf events (the agent keeps running its control
 *                      side) or a config cannot be applied. Status text carries the counters
 *                      and BPF run time per program, refreshed at every window.
 *   symbolizer         frames resolved/unresolved, ELF files cached.
 *   exporter/<i>:<type>  one per configured exporter, from agent_exporter_status().
 *   pprof/<i>          one per pprof target: status "<type> <url>, every N s|on trigger; scrapes
 *                      ok N, failed N; last B bytes, S samples"; unhealthy while its last scrape
 *                      failed (last_error: "HTTP 500: ...", "timed out after N ms", ...) or its
 *                      last window could not be encoded; "off (profiling disabled)" while
 *                      profiling.enabled is false. Components past AGENT_HEALTH_MAX_COMPONENTS
 *                      are not reported (logged).
 *   guard              the overhead guard's line (guard.h: "throttled: 49 Hz of 99 Hz, cpu
 *                      1.40% > 1.00%") and the profile rate limit ("profiles 12 of 60 in the
 *                      last minute, 3 over the limit"); unhealthy only while over budget at
 *                      the guard's floor.
 *   trigger/high_cpu   while the trigger is enabled: processes watched, host CPU, firings.
 *
 * Limits and triggers (worker, on its tick: every 2 s, every second with high_cpu): the
 * overhead guard (guard.h) is fed the agent's CPU (agent_metrics_process_read), its BPF run
 * time and RSS, and the sampler runs at the frequency it allows (a shallow copy of the
 * config with frequency_hz lowered, given to pf_sampler_set_config: the samples taken at the
 * old frequency become a window of their own);
 * a config apply passes the guard its budget (a changed budget starts over at the configured
 * frequency). Every window with samples, from any source, takes a place in the shared rate
 * limit (ratelimit.h) before it is encoded; over limits.max_profiles_per_minute it is dropped
 * and counted. With triggers.high_cpu.enabled (either mode) the high_cpu trigger (high_cpu.h)
 * reads the CPU of the processes the sampler profiles (pf_sampler_profiled_pids) and of the
 * host, and each firing starts a capture of that process.
 *
 * Captures (opts.captures, triggers/capture.h): the worker runs the captures the engine
 * admitted with triggers/capture_run.h — on the sampler's second set of perf events, beside the
 * continuous windows (also in mode triggered) — and exports them to the controller's receiver
 * and to the configured exporters. The engine admits them against the data plane's shared
 * rate limit (agent_captures_set_ratelimit): one limits.max_profiles_per_minute for windows,
 * pprof profiles and captures. At shutdown, captures still sampling end early and are
 * exported.
 *
 * Span triggers (slow_span, error_span; span_receiver.h): when either is enabled the worker
 * runs the OTLP/HTTP traces receiver on slow_span.listen and gives the sampler a sample ring of
 * slow_span.lookback_seconds within a quarter of limits.max_memory_mb (pf_sampler_set_ring; in
 * mode triggered the sampler then keeps sampling into the ring only). Every 200 ms the worker
 * publishes the processes with samples in the ring (pid, service.name), which the receiver
 * resolves spans against; a triggering span becomes a job in a queue of
 * AGENT_DATAPLANE_SPAN_QUEUE (full: the receiver rejects it). The worker cuts a job once the
 * sampler has drained past the span's end (+20 ms), or 2 s after the later of end and arrival:
 * a window of exactly that process (thread when the span has thread.id) and time range,
 * every sample linked to the span (trace_id, span_id), every process tagged
 * profleet.trigger=slow_span|error_span, exported like a window. Health component
 * "triggers/spans" (unhealthy when the address cannot be bound).
 *
 * Shutdown: agent_dataplane_flushed() (called by the loop after SIGTERM/SIGINT, before the
 * OpAMP goodbye) starts the final flush on its first call — close the open window, encode,
 * submit, wait for the exports in flight (the worker bounds the wait to
 * AGENT_DATAPLANE_FLUSH_MS) — and returns true once it is over; the worker wakes the loop
 * through the wake callback. agent_dataplane_free() then releases everything; after an
 * unfinished flush it returns without waiting for exports still blocked (the process exits). */
#ifndef AGENT_DATAPLANE_H
#define AGENT_DATAPLANE_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "exporter.h"
#include "guard.h"
#include "high_cpu.h"
#include "pf/error.h"
#include "pf/profcfg.h"
#include "ratelimit.h"
#include "sampler_bpf.h"
#include "span_receiver.h"

#define AGENT_DATAPLANE_FLUSH_MS 4500
#define AGENT_DATAPLANE_SPAN_QUEUE 64   /* span jobs waiting for the worker */
#define AGENT_DATAPLANE_SPAN_PROCS 2048 /* sampled processes spans are resolved against */
/* The worker's longest sleep: its tick (1 s while the high_cpu trigger runs). Every other
 * deadline (window close, captures, spans, pprof scrapes) shortens it; config, triggers and
 * stop wake it at once. */
#define AGENT_DATAPLANE_POLL_MS 2000

struct agent_health;
struct agent_dataplane;

struct pf_procinfo_source;

struct agent_dataplane_opts {
	struct agent_health *health; /* borrowed; components are registered here */
	void (*wake)(void *ctx);     /* wakes the event loop (any thread) */
	void *wake_ctx;
	bool no_sampler;       /* tests: never load BPF, report "sampler" disabled */
	bool include_self;     /* sample the agent's own process too */
	bool frame_pointers_only; /* the sampler walks user stacks by frame pointers only */
	const char *spill_dir; /* exporters' spill directory (queued exporter API);
				* NULL: memory only */
	const char *unwind_dir; /* the sampler's unwind-table cache (state dir/unwind); NULL:
				 * tables are rebuilt at every start */
	const char *lines_dir;  /* the symbolizer's source-line tables (state dir/lines); NULL:
				 * a private directory, rebuilt at every start */
	const char *agent_token; /* copied; used by exporters with auth: agent_token */
	const char *agent_uid;   /* copied; every exported process carries it as the resource
				  * attribute profleet.agent.uid (the controller's store files
				  * profiles by agent with it) */
	bool metrics; /* keep the agent_dataplane_metrics() snapshot fresh (--metrics-listen) */
	struct agent_captures *captures; /* borrowed, outlives the data plane; NULL: none */
	const char *capture_receiver; /* copied; default receiver of captures (from the OpAMP
				       * URL), NULL when none */
	const char *capture_ca_file;  /* copied; the OpAMP connection's CA file, NULL: system */
	const char *capture_cert_file, *capture_key_file; /* copied; its client certificate */
	/* pod attribution (--k8s): the sampler's extra process attributes; borrowed, must
	 * outlive the data plane. NULL: none. */
	const struct pf_procinfo_source *attr_source;
};

/* Registers the health components and starts the worker thread, which loads the sampler in
 * the background. NULL + errno (err says why) when the thread cannot start. */
struct agent_dataplane *agent_dataplane_new(const struct agent_dataplane_opts *o,
					    struct pf_error *err);
/* The apply hook to register with agent_config_add_hook() before agent_config_start(). */
void agent_dataplane_hook(struct agent_dataplane *d, struct agent_config_hook *out);
/* The effective config's runtime note (agent_config_note_fn): while the overhead guard runs
 * the sampler below the configured frequency, "overhead guard: sampling.frequency_hz in
 * effect: 49 (throttled: 49 Hz of 99 Hz, cpu 1.40% > 1.00%)"; "" otherwise. The generation
 * grows when the frequency in effect changes; the worker wakes the loop then. Any thread. */
uint64_t agent_dataplane_effective_note(void *dataplane, char *buf, size_t cap);
/* Starts a triggered capture, or ends the running one. Async-signal-safe. */
void agent_dataplane_toggle_trigger(struct agent_dataplane *d);
/* First call requests the final flush; true once it finished (or timed out). Loop thread. */
bool agent_dataplane_flushed(void *dataplane);
/* Stops the worker (after a flush, or now), frees exporters and the sampler. */
void agent_dataplane_free(struct agent_dataplane *d);

/* The window, export and sampler counters (for logs and tests). */
struct agent_dataplane_counters {
	uint64_t windows;	/* windows closed with samples (eBPF sampler) */
	uint64_t pprof_windows; /* scraped pprof profiles encoded and submitted */
	uint64_t exports;	/* submits accepted (all exporters) */
	uint64_t dropped;	/* submits refused (exporter busy or failing to start) */
	uint64_t encode_errors;
	uint64_t profile_bytes;	     /* OTLP bytes encoded, all windows */
	uint64_t last_profile_bytes; /* size of the last encoded window */
	uint64_t rate_limited;	     /* profiles dropped by limits.max_profiles_per_minute */
	uint64_t high_cpu_fired;     /* high_cpu firings (one per process) */
	uint64_t high_cpu_captures;  /* captures they started */
};
void agent_dataplane_counters(struct agent_dataplane *d, struct agent_dataplane_counters *out);

/* Metrics snapshot (agent/endpoints/metrics.h renders it). With opts.metrics the worker copies its
 * counters, the sampler's stats, every exporter's agent_exporter_status() and every pprof
 * target's health into a snapshot under its lock on its once-a-second tick (no work per
 * sample; the sampler is read only by the worker), and once more after the final flush. Once
 * a second: reading the sampler's counters and programs' statistics is a few system calls,
 * and a scrape comes every 15-60 s. agent_dataplane_metrics() copies the last snapshot: any
 * thread, never waits for the worker beyond that copy. */
#define AGENT_DATAPLANE_NAME_LEN 32

struct agent_dataplane_exporter_metrics {
	unsigned index; /* position in profiling.exporters */
	char type[16];	/* "file", "otlp_http", "pyroscope" */
	bool running;	/* false: it could not be created (its health component says why) */
	struct agent_exporter_status st; /* zeros when not running */
};

struct agent_dataplane_target_metrics {
	unsigned index; /* position in profiling.pprof.targets */
	char type[16];	/* "cpu", "heap", ... */
	bool active;	/* scraped (profiling enabled, sources running); else zeros */
	bool healthy;	/* its last scrape succeeded (and could be encoded) */
	uint64_t scrapes_ok, scrapes_failed;
	uint32_t last_duration_ms;
	uint64_t last_bytes, last_samples;
	uint64_t last_ok_unix_ns;
};

struct agent_dataplane_prog_metrics {
	char name[AGENT_DATAPLANE_NAME_LEN]; /* BPF program name */
	uint64_t run_time_ns, run_cnt;
};

/* Span triggers (slow_span, error_span): profiles cut by the worker. */
struct agent_dataplane_span_metrics {
	uint64_t profiles[2]; /* exported, by enum agent_span_trigger */
	uint64_t empty;	      /* jobs whose process had no samples in the span's range */
	uint64_t failed;      /* cuts that failed (out of memory) */
	uint64_t last_latency_ns, max_latency_ns; /* span received -> profile submitted */
};

struct agent_dataplane_metrics {
	uint64_t refreshed_unix_ns; /* when the worker took it; 0 = not yet */
	struct agent_dataplane_counters counters;
	double overhead_pct; /* agent process + BPF CPU, % of one CPU over the overhead guard's
			      * window (the sampler health's figure); < 0 = none yet */
	struct agent_guard_state guard;	   /* the overhead guard */
	struct agent_ratelimit_stats rate; /* limits.max_profiles_per_minute */
	bool has_high_cpu;		   /* the high_cpu trigger runs: high_cpu is valid */
	struct agent_high_cpu_stats high_cpu;
	bool has_sampler;    /* the eBPF sampler is loaded: sampler and progs are valid */
	struct pf_sampler_stats sampler; /* progs[].name are NULL here: use progs below */
	struct agent_dataplane_prog_metrics progs[PF_SAMPLER_N_PROGS];
	size_t n_exporters;
	struct agent_dataplane_exporter_metrics ex[PF_PROFCFG_MAX_EXPORTERS];
	size_t n_targets;
	struct agent_dataplane_target_metrics pt[PF_PROFCFG_MAX_TARGETS];
	bool has_spans; /* the span receiver runs: the fields below are valid */
	struct agent_span_counters span_rx;
	struct agent_dataplane_span_metrics span;
	uint64_t ring_bytes, ring_max_bytes, ring_samples, ring_evicted_memory;
};

/* Copies the last snapshot into *out (about 30 KiB: allocate it). 0, or -ENOTSUP when the
 * data plane was created without opts.metrics. */
int agent_dataplane_metrics(struct agent_dataplane *d, struct agent_dataplane_metrics *out);

#endif
