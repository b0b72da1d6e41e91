/* exporter.h — one configured exporter (struct pf_exporter from pf/profcfg.h) behind a small
 * interface: create, export bytes, health, free. The bytes are one encoded
 * ExportProfilesServiceRequest (proto/codec/otlp_profiles.h) and its profile id.
 *
 * Owns the backend (file.c or otlp_http.c) and one worker thread. Exports block (fsync,
 * network), so the agent's lws loop never calls agent_exporter_export() itself: it calls
 * agent_exporter_submit(), which copies the bytes, hands them to the worker thread and
 * returns at once; `done` runs on the worker thread when the export finished (use
 * lws_cancel_service() there to wake the loop). One export is in flight at a time: a submit
 * while one is running is refused with -EBUSY and counted as dropped (queueing and retries are
 * the delivery issue's). agent_exporter_export() is the synchronous form (tests, shutdown).
 *
 * Health (agent_exporter_status) is thread-safe and maps onto agent_health_set(): healthy
 * until an export fails, healthy again after the next success; status "ok: <n> exports" /
 * "failing: <n> consecutive errors"; last_error the last failure's message (with the HTTP
 * status for otlp_http).
 *
 * Types: file and otlp_http; pyroscope is refused with -ENOTSUP for now. */
#ifndef AGENT_EXPORT_EXPORTER_H
#define AGENT_EXPORT_EXPORTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/error.h"
#include "pf/profcfg.h"

struct agent_exporter;

struct agent_exporter_status {
	bool healthy;
	char status[96];
	char last_error[768]; /* "" when none */
	uint64_t exports_ok, exports_failed, dropped;
	uint64_t bytes_ok;      /* bytes of the successful exports (before compression) */
	int last_http_status;   /* otlp_http: status of the last response, 0 when none */
	uint64_t last_ok_unix_ns;
};

typedef void (*agent_exporter_done_fn)(void *user, int rc);

/* NULL + errno, err with the key path ("endpoint", "path", "headers"...). */
struct agent_exporter *agent_exporter_new(const struct pf_exporter *cfg, struct pf_error *err);
/* Waits for an export in flight (bounded by its timeout), stops the worker, frees. */
void agent_exporter_free(struct agent_exporter *x);
/* "file" or "otlp_http". */
const char *agent_exporter_type(const struct agent_exporter *x);

/* Synchronous export on the calling thread (blocks). 0 or -errno; health updated. */
int agent_exporter_export(struct agent_exporter *x, const uint8_t *data, size_t len,
			  const uint8_t profile_id[16], struct pf_error *err);
/* Asynchronous export on the worker thread; never blocks. 0 when accepted, -EBUSY while an
 * export is in flight (counted as dropped), -ENOMEM, -EAGAIN when the thread cannot start. */
int agent_exporter_submit(struct agent_exporter *x, const uint8_t *data, size_t len,
			  const uint8_t profile_id[16], agent_exporter_done_fn done, void *user);
/* Waits until no export is in flight (tests and shutdown). */
void agent_exporter_drain(struct agent_exporter *x);

void agent_exporter_status(struct agent_exporter *x, struct agent_exporter_status *out);

#endif
