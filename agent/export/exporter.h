/* exporter.h — one configured exporter (struct pf_exporter from pf/profcfg.h) with its own
 * bounded delivery queue and worker thread: create, submit, drain/flush, status, free.
 *
 * Owns the back end (file.c, otlp_http.c; pyroscope.c builds the pyroscope payloads), the
 * queue, the optional spill directory (spill.c) and one worker thread. Every exporter is
 * independent: a slow or dead back end only ever fills its own queue.
 *
 * Payloads. file and otlp_http take one encoded ExportProfilesServiceRequest
 * (proto/codec/otlp_profiles.h) and its profile id: agent_exporter_submit(). pyroscope takes
 * the closed window itself (agent_exporter_submit_window()), because it pushes pprof, one push
 * per process; agent_exporter_wants_window() says which one an exporter takes. Submitting the
 * other kind is refused with -ENOTSUP (not counted).
 *
 * Queue. submit copies the payload, appends it and returns at once; it never waits for the
 * worker or the network (with a spill directory it writes one small file, no fsync). The
 * queued bytes (payloads plus request targets) never exceed queue_bytes: to make room the
 * OLDEST items are dropped and counted (`dropped`, `dropped_bytes`, their done callback runs
 * with -ENOBUFS). An item whose attempt is in flight when it is evicted stops counting at
 * once; its copy is freed when the attempt ends (at most one request timeout later), and it is
 * counted confirmed if that attempt succeeded, dropped otherwise. An item larger than
 * queue_bytes alone is refused (-E2BIG, counted dropped).
 *
 * Retries (OTLP/HTTP spec, "Failures" and "Throttling"): 429, 502, 503, 504 and transport
 * errors (connect, timeout, a connection closed before a response) are retried with
 * exponential backoff and full jitter (pf/backoff.h; base and cap below); a Retry-After
 * header (delta-seconds or HTTP date, pf_retry_after_parse) sets the least wait, up to one
 * hour. Any other status (4xx, 500, 501...) fails the item for good (`failed`, done runs with
 * -EPROTO) and is never retried. During a backoff the item waits at the head of the queue, so
 * it can be dropped as the oldest. Items are retried until delivered or dropped (no age
 * limit). A 2xx response whose ExportProfilesServiceResponse carries a partial_success
 * (rejected_profiles > 0 or an error_message) is confirmed, logged as a warning and counted
 * (`partial_successes`, `rejected_profiles`, `last_partial_error`); it is not retried.
 * file: -EFBIG/-EINVAL fail for good, other write errors (ENOSPC...) are retried.
 *
 * Spill (opts.spill_dir): the exporter keeps its queue mirrored in
 * <spill_dir>/<type>-<16 hex of a hash of type and endpoint/path> (spill.h): a file per item
 * written at submit, deleted when the item left the queue. agent_exporter_new_opts() reads the
 * files back (oldest first, under the same queue_bytes bound: the excess oldest dropped and
 * counted) and delivers them: a restart loses nothing that was queued. Items still queued at
 * free stay on disk for the next start. The hash is of the back end (type, scheme, host, port
 * and path, spelled one way: "http://H:4318", "HTTP://h:4318/" and
 * "http://h:4318/v1development/profiles" are the same otlp_http back end), so an exporter
 * re-created with settings that do not change where it sends (timeout, headers, compression,
 * auth, tls, a respelled endpoint) takes over the queue of the one it replaces. Two exporters with
 * the same type and back end share a spill directory, so configure them with different ones.
 * A directory named by an earlier version (hash of the endpoint as written) is renamed at
 * new when it is the only one. Directories no configured exporter uses any more:
 * agent_exporter_spill_sweep().
 *
 * Callbacks: done(user, rc) runs once per accepted submit on the worker thread, never inside
 * submit (use lws_cancel_service() there to wake a loop): rc 0 confirmed, -EPROTO (or the
 * file error) failed, -ENOBUFS dropped, or -ECANCELED from agent_exporter_free() (on the
 * freeing thread) for items still queued. Items reloaded from the spill have no callback.
 *
 * Status (agent_exporter_status, thread-safe) maps onto agent_health_set(): healthy until an
 * attempt fails, healthy again after the next success; status "ok: <n> confirmed, <q> queued"
 * / "retrying: <n> consecutive errors, next attempt in <s> s, <q> queued" / "failing: ..."
 * for errors that are not retried; last_error is the last failure's message (with the HTTP
 * status). Invariant: submitted = confirmed + failed + dropped + queued_items (+ 1 in flight).
 *
 * Types: file, otlp_http, pyroscope. */
#ifndef AGENT_EXPORT_EXPORTER_H
#define AGENT_EXPORT_EXPORTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/error.h"
#include "pf/profcfg.h"
#include "pf/profile.h"

struct agent_exporter;

#define AGENT_EXPORTER_DEFAULT_QUEUE_BYTES ((uint64_t)64 << 20) /* limits.queue_bytes default */
#define AGENT_EXPORTER_DEFAULT_BACKOFF_BASE_MS 1000
#define AGENT_EXPORTER_DEFAULT_BACKOFF_CAP_MS 30000
#define AGENT_EXPORTER_MAX_RETRY_AFTER_MS (3600u * 1000u)

/* Upper bounds (microseconds, ascending) of the attempt duration histogram in
 * struct agent_exporter_status: 1 ms .. 30 s. */
#define AGENT_EXPORTER_LATENCY_BUCKETS 13
extern const uint64_t agent_exporter_latency_bounds_us[AGENT_EXPORTER_LATENCY_BUCKETS];

struct agent_exporter_opts {
	uint64_t queue_bytes;	  /* 0: AGENT_EXPORTER_DEFAULT_QUEUE_BYTES; the agent passes
				   * limits.queue_bytes */
	const char *spill_dir;	  /* NULL: memory only; else a directory of the state dir, e.g.
				   * "<state>/spill" (created when missing) */
	uint32_t backoff_base_ms; /* 0: default */
	uint32_t backoff_cap_ms;  /* 0: default */
	const char *agent_token;  /* the agent's OpAMP token: sent as `Authorization: Bearer` by
				   * network exporters configured with auth: agent_token */
};

struct agent_exporter_status {
	bool healthy;
	char status[96];
	char last_error[768]; /* "" when none */
	/* exports_ok == confirmed and exports_failed == failed (their names in health) */
	uint64_t exports_ok, exports_failed, dropped;
	uint64_t bytes_ok;    /* payload bytes of the confirmed items (before compression) */
	int last_http_status; /* otlp_http, pyroscope: status of the last response, 0 when none */
	uint64_t last_ok_unix_ns;

	/* delivery statistics */
	uint64_t submitted;	/* items queued (including those reloaded from the spill) */
	uint64_t sent;		/* attempts made (requests, file writes) */
	uint64_t confirmed;	/* items the back end accepted (2xx, partial success too) */
	uint64_t failed;	/* items refused for good (non-retryable answer) */
	uint64_t retried;	/* attempts that failed and will be retried */
	uint64_t dropped_bytes; /* bytes of the dropped items */
	uint64_t queued_items, queued_bytes, queue_limit_bytes;
	uint64_t last_latency_ms; /* duration of the last successful attempt */
	uint64_t max_latency_ms;  /* the longest successful attempt */
	uint64_t next_retry_ms;	  /* while backing off: ms until the next attempt, else 0 */
	uint64_t partial_successes, rejected_profiles;
	char last_partial_error[256];
	uint64_t spilled;      /* items written to the spill directory */
	uint64_t spill_loaded; /* items read back from it at start */
	uint64_t spill_errors; /* spill writes that failed and corrupt files found at load */

	/* duration of every attempt (successful or not; latency_count == sent), for the agent's
	 * metrics histogram: latency_buckets[i] counts attempts that took at most
	 * agent_exporter_latency_bounds_us[i] and more than the bound before (not cumulative);
	 * the last slot counts those over the largest bound */
	uint64_t latency_buckets[AGENT_EXPORTER_LATENCY_BUCKETS + 1];
	uint64_t latency_sum_us, latency_count;
};

/* done(user, rc): see the header comment. */
typedef void (*agent_exporter_done_fn)(void *user, int rc);

/* Creates the exporter and reloads its spill. The worker thread starts with the first item
 * (at once when the spill had some), so an exporter built only to check a config costs no
 * thread: build those without a spill_dir. NULL + errno, err with the key path ("endpoint",
 * "path", "headers", "spill_dir"...). */
struct agent_exporter *agent_exporter_new_opts(const struct pf_exporter *cfg,
					       const struct agent_exporter_opts *opts,
					       struct pf_error *err);
/* agent_exporter_new_opts() with default options (64 MiB queue, no spill). */
struct agent_exporter *agent_exporter_new(const struct pf_exporter *cfg, struct pf_error *err);
/* Stops the worker (an attempt in flight ends within its timeout), runs the done callbacks of
 * the items left (-ECANCELED; they stay in the spill) and frees. */
void agent_exporter_free(struct agent_exporter *x);
/* "file", "otlp_http" or "pyroscope". */
const char *agent_exporter_type(const struct agent_exporter *x);
/* True for pyroscope: feed it agent_exporter_submit_window(), not OTLP bytes. */
bool agent_exporter_wants_window(const struct agent_exporter *x);

/* One synchronous attempt on the calling thread, no queue and no retry (tests, tools). 0 or
 * -errno; statistics and health updated. -ENOTSUP for pyroscope. */
int agent_exporter_export(struct agent_exporter *x, const uint8_t *data, size_t len,
			  const uint8_t profile_id[16], struct pf_error *err);
/* Queues one OTLP request (copied) for delivery; never blocks. 0 when queued (done, unless
 * NULL, then runs exactly once), -E2BIG when it is larger than the queue (counted dropped),
 * -ENOMEM, -EAGAIN when the worker thread cannot start, -ENOTSUP for pyroscope. */
int agent_exporter_submit(struct agent_exporter *x, const uint8_t *data, size_t len,
			  const uint8_t profile_id[16], agent_exporter_done_fn done, void *user);
/* pyroscope: encodes one gzip'd pprof per process of w that has samples (pyroscope.h), on the
 * calling thread (CPU only), and queues each as one push, all at once; w is not kept. When
 * it returns 0, done runs exactly once for the whole window, after its last push finished:
 * rc 0 when every push was confirmed, else the first failure (-EPROTO, -ENOBUFS for a push
 * dropped from the queue, or the error of a process that could not be encoded). When no push
 * could be queued it returns the error (-ENODATA for a window without samples, -E2BIG,
 * -ENOMEM, -EINVAL for an invalid window) and done never runs. -ENOTSUP for other types.
 * *n_pushes (may be NULL) receives the number of pushes queued. */
int agent_exporter_submit_window(struct agent_exporter *x, const struct pf_prof_window *w,
				 agent_exporter_done_fn done, void *user, size_t *n_pushes);

/* Waits until nothing is in flight and the queue is empty or waiting out a backoff: what can
 * be delivered now was tried (tests and shutdown). Never waits for a backoff to end. */
void agent_exporter_drain(struct agent_exporter *x);
/* Waits until the queue is empty and nothing is in flight (retries included), at most
 * timeout_ms. 0, or -ETIMEDOUT with items still queued. */
int agent_exporter_flush(struct agent_exporter *x, uint32_t timeout_ms);

void agent_exporter_status(struct agent_exporter *x, struct agent_exporter_status *out);

/* What agent_exporter_spill_sweep() removed. */
struct agent_spill_sweep {
	uint64_t dirs;	/* spill directories removed */
	uint64_t items; /* queued items they held, discarded */
	uint64_t bytes; /* their bytes (payload + request target, as counted in the queue) */
};

/* After a config applied: removes the spill directories under spill_root (the spill_dir given
 * to the exporters) that none of the n configured exporters cfgs uses, i.e. those of exporters
 * that were removed or now send to another back end; their items are discarded, never sent to
 * a back end they were not meant for. Each removal is logged (a warning with items and bytes
 * when it held any). An exporter that was configured but could not start keeps its directory.
 * Safe while a replaced exporter is still being freed (it no longer writes; an item it has in
 * flight may be both delivered and counted here). Only names of ours ("<type>-<16 hex>") are
 * touched. 0 (also without spill_root) or the first -errno; out is filled either way. */
int agent_exporter_spill_sweep(const char *spill_root, const struct pf_exporter *cfgs, size_t n,
			       struct agent_spill_sweep *out);

#endif
