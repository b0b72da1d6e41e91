/* dataplane_int.h — the data plane's private core: struct agent_dataplane (what the worker
 * thread, the loop thread and the receiver threads share, and which lock guards what) and the
 * calls its parts share. The parts, each behind its own header: dataplane_exporters.c (the
 * exporter set), dataplane_pprof.c (pprof sources), dataplane_limits.c (overhead guard and
 * rate limit), dataplane_triggers.c (high_cpu and span triggers), dataplane_metrics.c (the
 * metrics snapshot). Only they include this header; everything runs on the worker thread
 * unless its comment says otherwise. */
#ifndef AGENT_DATAPLANE_INT_H
#define AGENT_DATAPLANE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "dataplane.h"
#include "export/encode_submit.h"
#include "export/exporter.h"
#include "limits/guard.h"
#include "limits/ratelimit.h"
#include "pf/buf.h"
#include "pf/profcfg.h"
#include "pf/profile.h"
#include "pprof/sampler_pprof.h"
#include "sampler/sampler_bpf.h"
#include "triggers/capture.h"
#include "triggers/capture_run.h"
#include "triggers/high_cpu.h"
#include "triggers/span_receiver.h"

#define NAME_LEN 48
#define STATUS_LEN 1024
#define PPROF_MIN_WAIT_MS 20

struct dp_exporter {
	struct agent_exporter *x;
	char name[NAME_LEN]; /* health component "exporter/<i>:<type>" */
};

/* A pprof target of the applied config, as the data plane reports it. */
struct dp_target {
	char name[NAME_LEN];  /* health component "pprof/<i>" */
	bool registered;      /* the health registry had room for it */
	char export_err[800]; /* its last window could not be encoded, "" when it could */
};

/* The worker's tick: the overhead guard, exporter health, the metrics snapshot; every second
 * while the high_cpu trigger (which reads /proc on it) runs. A tick due within half a tick
 * runs with a window's close, so the two share a wake-up. */
#define TICK_MS AGENT_DATAPLANE_POLL_MS
#define TICK_HIGH_CPU_MS 1000
/* A window's close waits at most this long (and at most half the window) for a source-line
 * table a child is building, polling every CLOSE_HOLD_POLL_MS: see hold_close(). */
#define CLOSE_HOLD_MS 1000
#define CLOSE_HOLD_POLL_MS 20
#define HIGH_CPU_NAME "trigger/high_cpu"
#define GUARD_NAME "guard"
/* Which unwinders the sampled processes use (pf_sampler_unwinders_status): the Fleet page's
 * column */
#define UNWINDERS_NAME "unwinders"

struct agent_dataplane {
	struct agent_health *health;
	void (*wake)(void *ctx);
	void *wake_ctx;
	bool no_sampler, include_self, frame_pointers_only;
	const struct pf_procinfo_source *attr_source;
	char *spill_dir;   /* NULL: exporters keep their queue in memory only */
	char *unwind_dir;  /* NULL: no unwind-table cache */
	char *lines_dir;   /* NULL: a private line-table directory */
	char *agent_token; /* NULL: exporters with auth: agent_token fail to start */
	char *agent_uid;
	int efd; /* eventfd: wakes the worker (config, trigger, stop, export done) */
	pthread_t thread;
	bool thread_started;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* under lock: posted by the loop thread */
	struct pf_profcfg *pending; /* private copy, owned */
	char *pending_token, *pending_uid; /* agent_dataplane_set_identity, owned */
	bool stop_requested;
	bool flushed;	     /* the worker finished its final flush */
	unsigned in_flight;  /* submits accepted whose done callback has not run */
	bool export_failing; /* the last done callback had an error */
	unsigned n_reapers;  /* threads freeing replaced exporters */
	struct agent_dataplane_counters counters;
	struct agent_ratelimit *rl; /* limits.max_profiles_per_minute (thread-safe) */
	char note[320];		    /* the effective config's runtime note, "" = none */
	uint64_t note_gen;

	atomic_uint trigger_toggles; /* from the signal handler */

	/* worker thread only */
	struct pf_sampler *sampler;
	struct pf_profcfg *cfg; /* applied config (private copy) */
	struct dp_exporter ex[PF_PROFCFG_MAX_EXPORTERS];
	size_t n_ex;
	uint64_t next_close_ms;	  /* CLOCK_MONOTONIC deadline of the open window, 0 = none */
	bool close_held;	  /* its close waits for a line table (hold_close) */
	bool capturing;		  /* triggered mode: a capture runs */
	bool running;		  /* the sampler was running at the last check */
	char sampler_err[768];	  /* the last config the sampler refused, "" when none */
	struct agent_encoded enc; /* the last window's OTLP request (buffers kept) */

	/* overhead guard and high_cpu trigger, evaluated every TICK_MS */
	uint64_t next_tick_ms;
	struct agent_guard *guard;
	struct agent_guard_state guard_st; /* after the last tick or apply */
	uint32_t sampler_hz;		   /* frequency given to the sampler, 0 = none */
	struct agent_high_cpu *high_cpu;   /* NULL while the trigger is off */
	uint32_t *pids;			   /* scratch: AGENT_HIGH_CPU_MAX_PROCS profiled pids */

	/* pprof sources (worker thread only): their targets are those of cfg (in order) while
	 * pprof_ok, none while profiling is disabled */
	struct pf_pprof_sources *pprof;
	bool pprof_ok;
	struct dp_target pt[PF_PROFCFG_MAX_TARGETS];
	size_t n_pt;
	char host_name[256];

	/* captures: the engine (borrowed; thread-safe) and the runner (worker thread only) */
	struct agent_captures *captures;
	struct agent_capture_runner *capture_run;
	uint64_t capture_gen; /* summary generation last reported in health */

	/* span triggers (slow_span, error_span): the receiver (created and freed by the worker;
	 * its thread calls span_resolve/span_submit), the job queue it fills and the process
	 * snapshot it resolves spans against (both under lock), the jobs waiting for their
	 * samples (worker only) */
	struct agent_span_receiver *spans;
	char listening[128]; /* the running receiver's address, "" when none (written by the
			      * worker under lock: the check hook reads it) */
	char spans_err[800]; /* why the receiver is not running, "" when it is or is off */
	struct agent_span_job jobq[AGENT_DATAPLANE_SPAN_QUEUE];
	size_t n_jobq;
	struct pf_sampler_ring_proc *procs, *procs_work;
	size_t n_procs;
	uint64_t procs_ms, reap_ms;
	uint32_t lookback_seconds;
	struct agent_span_job work[AGENT_DATAPLANE_SPAN_QUEUE];
	size_t n_work;
	struct agent_dataplane_span_metrics span_m; /* under lock */

	/* metrics snapshot (opts.metrics): the worker fills snap_work, then copies it into snap
	 * under lock; NULL without opts.metrics */
	struct agent_dataplane_metrics *snap;	   /* under lock */
	struct agent_dataplane_metrics *snap_work; /* worker thread only */
};

/* Wakes the worker (any thread; async-signal-safe). */
void dp_kick(struct agent_dataplane *d);
/* Refreshes the "sampler" and "symbolizer" health components from the sampler's stats. */
void dp_sampler_health(struct agent_dataplane *d);
/* Adds key=value to every process's resource attributes (allocated in the window's arena;
 * the strings must outlive the window). */
void dp_tag_processes(struct pf_prof_window *w, const char *key, const char *value);
/* Encodes and submits a window (taken: freed here). t is the pprof target it came from, NULL
 * for the eBPF sampler's windows and span profiles; an encoding failure is reported on that
 * component. A window with samples takes one place in limits.max_profiles_per_minute under
 * src, whatever the number of exporters; over the limit it is dropped and counted. */
void dp_export_window_src(struct agent_dataplane *d, struct pf_prof_window *w, struct dp_target *t,
			  enum agent_profile_source src);
/* dp_export_window_src() with the source told by t: a pprof target's, or the sampler's. */
void dp_export_window(struct agent_dataplane *d, struct pf_prof_window *w, struct dp_target *t);

#endif
