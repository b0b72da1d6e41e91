/* capture.h — the agent's incident captures, control side: which captures exist, whether a
 * new one may run, and what the controller is told about them (OpAMP custom capability
 * io.profleet.capture.v1, payloads in pf/capture_msg.h; docs/agent.md "Captures").
 *
 * Owns a table of captures — those in progress (at most AGENT_CAPTURE_MAX_ACTIVE) and the
 * final states of the last AGENT_CAPTURE_KEEP_FINAL — the admission rules, a per-second count
 * of the profiles exported in the last minute, and the outbox of statuses for the OpAMP
 * session. It samples nothing: the data plane's worker takes admitted captures
 * (agent_captures_next_job), runs them on the sampler and reports back. Thread-safe (one
 * mutex): the loop thread admits requests and takes statuses, the worker and the exporters'
 * threads report. Times are CLOCK_MONOTONIC milliseconds passed in by the caller.
 *
 * Admission (agent_captures_request), in this order, each refusal a final `failed` status:
 *   disabled           profiling.enabled false; on_demand: triggers.on_demand.enabled false;
 *                      the agent has no eBPF sampler (agent_captures_set_sampler(false))
 *   duration_exceeded  on_demand: duration_seconds over on_demand.max_duration_seconds
 *   busy               AGENT_CAPTURE_MAX_ACTIVE captures in progress (sampling or exporting)
 *   rate_limited       the profiles exported in the last 60 s, plus this capture, would exceed
 *                      limits.max_profiles_per_minute (a capture counts as one profile, like one
 *                      continuous window). With the agent's shared rate limit
 *                      (agent_captures_set_ratelimit, ratelimit.h) an admitted capture takes
 *                      its place there, under its trigger's source; without it the engine
 *                      keeps its own tally (agent_captures_note_profiles)
 * A request whose id is already in the table is not run again: its status is sent again.
 * The worker reports process_not_found, bad_request (a processes regexp that does not compile),
 * disabled (no sampler after all), export_failed and internal (sampler or encoding errors).
 *
 * Lifecycle: accepted → running (sampling; the samples so far are sent at most every
 * AGENT_CAPTURE_PROGRESS_MS) → exporting (still `running` on the wire) → done | cancelled |
 * failed. done (or cancelled, for a capture.cancel) only once the receiver confirmed every
 * request (agent_captures_export_done); failed/export_failed when one was refused or the
 * export deadline passed (agent_captures_tick). A cancel before sampling started ends the
 * capture at once; during sampling it stops early and the partial samples are exported.
 *
 * Outbox: a capture is marked when its status changes; agent_captures_next_status() returns the
 * marked capture that waited longest and clears its mark, so a burst of changes is sent as the
 * latest status. agent_captures_on_connect() marks every capture in the table (in progress and
 * recent finals): a controller that restarted, or an agent that reconnected, gets the results.
 * Only captures of trigger "on_demand" (from the controller) are reported; local triggers
 * (high_cpu) run through the same engine and exports but are not sent over OpAMP. */
#ifndef AGENT_TRIGGERS_CAPTURE_H
#define AGENT_TRIGGERS_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/capture_msg.h"
#include "pf/error.h"
#include "pf/profcfg.h"

#define AGENT_CAPTURE_MAX_ACTIVE 4     /* captures in progress on one agent */
#define AGENT_CAPTURE_KEEP_FINAL 32    /* final statuses kept (re-sent after a reconnect) */
#define AGENT_CAPTURE_PROGRESS_MS 1000 /* least time between two `running` statuses */
#define AGENT_CAPTURE_EXPORT_MS 30000  /* the receiver must confirm within this */
#define AGENT_CAPTURE_TRIGGER_LEN 16
#define AGENT_CAPTURE_MAX_ATTRS 4 /* extra resource attributes of a local trigger's capture */

/* A resource attribute a local trigger adds to its capture's profiles. */
struct agent_capture_attr {
	char key[64];
	char value[128];
};

struct agent_captures;

struct agent_captures_opts {
	/* called (any thread, may be under the engine's lock: only wake something) when a
	 * status waits in the outbox; the agent wakes its event loop */
	void (*notify)(void *ctx);
	void *notify_ctx;
};

/* CLOCK_MONOTONIC in milliseconds: the clock of every now_ms below. */
uint64_t agent_captures_now_ms(void);

/* The controller's OTLP receiver for captures when the request names none: the OpAMP server
 * URL with ws→http, wss→https (http(s) kept), same host and port, path
 * /v1development/profiles. 0, or -EINVAL for a URL of another scheme or without a host. */
#define AGENT_CAPTURE_RECEIVER_PATH "/v1development/profiles"
int agent_capture_receiver_url(const char *opamp_url, char *out, size_t cap);

/* NULL + errno. */
struct agent_captures *agent_captures_new(const struct agent_captures_opts *o);
void agent_captures_free(struct agent_captures *c);

/* The worker's wake-up: called (under the lock) when a job or a cancel waits for it. */
void agent_captures_set_worker(struct agent_captures *c, void (*wake)(void *ctx), void *ctx);
/* Takes the settings admission needs from an applied config (the config hook's commit). */
void agent_captures_set_config(struct agent_captures *c, const struct pf_profcfg *cfg);
/* Whether the agent can sample: unknown until called (requests are admitted meanwhile). */
void agent_captures_set_sampler(struct agent_captures *c, bool available);
struct agent_ratelimit;
/* The shared limit of limits.max_profiles_per_minute (borrowed; NULL: the engine's own tally).
 * Set it to NULL before freeing it. */
void agent_captures_set_ratelimit(struct agent_captures *c, struct agent_ratelimit *rl);
/* n profiles were exported now (continuous windows; captures count themselves). Without a
 * shared rate limit only. */
void agent_captures_note_profiles(struct agent_captures *c, unsigned n, uint64_t now_ms);

/* Admits or refuses a request (copied). trigger: "on_demand" for the controller's captures
 * (reported over OpAMP, on_demand limits apply), else the local trigger's name. *st receives
 * the status it now has (accepted, or failed with error_code; for a known id its current
 * status). Returns 0 when admitted, 1 for a known id, -EPERM when refused (st says why),
 * -ENOMEM. */
int agent_captures_request(struct agent_captures *c, const struct pf_capture_request *req,
			   const char *trigger, uint64_t now_ms, struct pf_capture_status *st);
/* The same for a local trigger whose profiles carry extra resource attributes (high_cpu: the
 * measured CPU), beside profleet.capture.id / profleet.trigger / profleet.agent.uid. -EINVAL
 * when n_attrs > AGENT_CAPTURE_MAX_ATTRS. */
int agent_captures_request_attrs(struct agent_captures *c, const struct pf_capture_request *req,
				 const char *trigger, const struct agent_capture_attr *attrs,
				 size_t n_attrs, uint64_t now_ms, struct pf_capture_status *st);
/* A capture.request that did not decode but whose id could be read: a final failed status
 * with error_code bad_request and err's message (ignored when the id is known). */
void agent_captures_bad_request(struct agent_captures *c, const char *id, const char *msg);
/* capture.cancel. 0, or -ENOENT when the id is unknown or already final. */
int agent_captures_cancel(struct agent_captures *c, const char *id);

/* ---- worker side ---- */

struct agent_capture_job {
	uint64_t serial; /* names the capture in the calls below */
	char trigger[AGENT_CAPTURE_TRIGGER_LEN];
	struct pf_capture_request req; /* a copy: pf_capture_request_release() it */
	size_t n_attrs;		       /* extra resource attributes (local triggers) */
	struct agent_capture_attr attrs[AGENT_CAPTURE_MAX_ATTRS];
};

/* The next admitted capture to start (oldest first): 1 and *job, or 0 when none waits. */
int agent_captures_next_job(struct agent_captures *c, struct agent_capture_job *job);
/* Sampling started. */
void agent_captures_started(struct agent_captures *c, uint64_t serial, uint64_t now_ms);
/* Samples so far (sent when AGENT_CAPTURE_PROGRESS_MS passed since the last status). */
void agent_captures_progress(struct agent_captures *c, uint64_t serial, uint64_t samples,
			     uint64_t now_ms);
/* A capture.cancel arrived for this running capture. */
bool agent_captures_cancel_requested(struct agent_captures *c, uint64_t serial);
/* Sets the human detail (`error`, no error_code) a successful capture ends with, e.g. why it
 * has no samples. No effect on a final capture. */
void agent_captures_note(struct agent_captures *c, uint64_t serial, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Ends a capture as failed with error_code (process_not_found, export_failed, internal...). */
void agent_captures_fail(struct agent_captures *c, uint64_t serial, const char *code,
			 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Sampling is over: samples and encoded bytes, the profile ids (hex in the status; at most
 * PF_CAPTURE_MAX_PROFILE_IDS kept), and the n_requests exports whose confirmation is awaited
 * until now_ms + AGENT_CAPTURE_EXPORT_MS. n_requests 0 (nothing sampled) ends it at once. */
void agent_captures_exporting(struct agent_captures *c, uint64_t serial, uint64_t samples,
			      uint64_t bytes, const uint8_t (*ids)[16], size_t n_ids,
			      unsigned n_requests, uint64_t now_ms);
/* One export of the capture ended: rc 0 confirmed by the receiver, else refused/dropped. */
void agent_captures_export_done(struct agent_captures *c, uint64_t serial, int rc, const char *why);
/* Deadlines: exports not confirmed in time fail the capture. Returns the captures in progress. */
unsigned agent_captures_tick(struct agent_captures *c, uint64_t now_ms);

/* ---- health ---- */

struct agent_captures_summary {
	uint64_t generation; /* changes whenever a figure below does */
	unsigned in_progress;
	uint64_t done, cancelled, failed, refused; /* refused: failed at admission */
	bool healthy;	      /* false while the last capture that ended failed for a reason of the
			       * agent's own (export_failed, internal) */
	char last_error[640]; /* "<id>: <code>: <error>" of the last failure, "" when none */
};
void agent_captures_summary(struct agent_captures *c, struct agent_captures_summary *out);

/* ---- OpAMP side ---- */

/* A new connection: every capture in the table is sent again. */
void agent_captures_on_connect(struct agent_captures *c);
bool agent_captures_has_news(struct agent_captures *c);
/* The status to send next: true and *out, false when nothing waits. */
bool agent_captures_next_status(struct agent_captures *c, struct pf_capture_status *out);
/* The current status of id: 0, or -ENOENT. */
int agent_captures_status(struct agent_captures *c, const char *id, struct pf_capture_status *out);

#endif
