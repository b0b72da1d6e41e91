/* capture_run.h — runs the captures the capture engine (capture.h) admitted: sampling on the
 * eBPF sampler beside the continuous windows, then tagging, OTLP encoding and export to the
 * controller's receiver and to the configured exporters.
 *
 * Owns the captures being sampled (one sampler capture slot each), the exporter of the
 * controller's receiver (otlp_http, gzip, `Authorization: Bearer <agent token>`, the OpAMP
 * connection's CA file; re-created when a request names another receiver) and the callbacks
 * that tie its deliveries to the engine. Runs on the data plane's worker thread, which owns
 * the sampler; nothing here blocks on the network (exporters queue and deliver on their own
 * threads).
 *
 * A capture, from agent_capture_runner_poll():
 *  - start: the processes that the profiling filters allow and the request's rules match are
 *    read from /proc (none: failed/process_not_found at once; a rule that does not compile:
 *    bad_request), put in the sampler's capture pid map and sampled at the request's
 *    frequency (pf_sampler_capture_start);
 *  - while it runs: samples so far to the engine (running statuses);
 *  - end (duration elapsed, or a capture.cancel: the partial samples count): the window is
 *    symbolized; every process gets the resource attributes profleet.agent.uid,
 *    profleet.capture.id and profleet.trigger (and a local trigger's own); with a trace_id every
 * sample gets a Link (trace_id, zero span id). Each process (the AGENT_CAPTURE_RUN_MAX_PROFILES
 * busiest) is encoded as its own OTLP request, so every profile id is known; all go to the receiver
 *    (request.receiver, else the default derived from the OpAMP URL) and to the configured
 *    exporters (submit callbacks). The engine reports done once the receiver confirmed them
 *    all. A local trigger's capture without a receiver (a standalone agent) goes to the
 *    configured exporters only and is done at once. */
#ifndef AGENT_TRIGGERS_CAPTURE_RUN_H
#define AGENT_TRIGGERS_CAPTURE_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/profcfg.h"
#include "pf/profile.h"
#include "sampler/sampler_bpf.h"
#include "triggers/capture.h"

#define AGENT_CAPTURE_RUN_MAX_PROFILES PF_CAPTURE_MAX_PROFILE_IDS
#define AGENT_CAPTURE_RUN_MAX_PIDS 4096 /* processes put in one capture's pid map */

struct agent_capture_runner;
struct agent_exporter;

struct agent_capture_runner_opts {
	struct agent_captures *engine; /* borrowed; must outlive the runner and its exporters */
	const char *agent_token;       /* copied; NULL: the receiver is called without one */
	const char *agent_uid;	       /* copied; profleet.agent.uid */
	const char *receiver;	       /* copied; default receiver URL, NULL when none */
	const char *ca_file;	       /* copied; CA bundle of the OpAMP connection, NULL: system */
	const char *cert_file, *key_file; /* copied; the OpAMP connection's client certificate
					   * (--client-cert/--client-key), NULL: none */
	/* the configured exporters (worker thread, called during poll): OTLP bytes of one
	 * profile, and the whole window for exporters that take windows (pyroscope) */
	void (*submit_bytes)(void *ctx, const uint8_t *data, size_t len, const uint8_t id[16]);
	void (*submit_window)(void *ctx, const struct pf_prof_window *w);
	/* frees a receiver exporter that a request for another receiver replaces, off this
	 * thread (its export in flight may take up to its timeout); NULL: freed here */
	void (*retire)(void *ctx, struct agent_exporter *x);
	void *ctx;
};

/* NULL + errno. */
struct agent_capture_runner *agent_capture_runner_new(const struct agent_capture_runner_opts *o);
/* Stops the captures still sampling (their windows are exported), waits at most timeout_ms for
 * the receiver's confirmations, then frees. sampler may be NULL. */
/* The agent's credential and uid changed (copied; NULL keeps the uid): later uploads use them
 * (the receiver in use finishes what it holds with the old one). Worker thread. -ENOMEM. */
int agent_capture_runner_set_identity(struct agent_capture_runner *r, const char *token,
				      const char *uid);
void agent_capture_runner_free(struct agent_capture_runner *r, struct pf_sampler *sampler,
			       uint32_t timeout_ms);

/* Starts admitted captures, reports progress, ends due or cancelled ones and exports them,
 * and applies the engine's export deadlines. sampler NULL: admitted captures fail (disabled).
 * cfg: the applied config (NULL before the first). Returns ms until the next capture ends
 * (-1: none sampling). */
int64_t agent_capture_runner_poll(struct agent_capture_runner *r, struct pf_sampler *sampler,
				  const struct pf_profcfg *cfg, uint64_t now_ms);
/* Captures sampling now. */
unsigned agent_capture_runner_active(const struct agent_capture_runner *r);

/* Adds the capture tags (and the job's extra attributes) to every process of w (allocated in
 * w's arena) and, with trace_id (not NULL), a Link to every sample. 0 or -ENOMEM. Exported for
 * tests. */
int agent_capture_tag_window(struct pf_prof_window *w, const char *agent_uid,
			     const char *capture_id, const char *trigger,
			     const struct agent_capture_attr *extra, size_t n_extra,
			     const uint8_t *trace_id);

#endif
