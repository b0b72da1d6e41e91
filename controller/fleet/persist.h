/* persist.h — the agent-row writer. The event loop drains dirty agents from the fleet into
 * self-contained row copies (pf_persist_flush) and hands them to a writer thread that owns
 * its own store connection and commits each batch in one transaction. The loop never waits
 * on SQLite; the queue is bounded (rows beyond the bound stay dirty in the fleet and go in a
 * later batch).
 *
 * Durability: agent rows are soft state that agents re-report on reconnect; a real change is
 * written within a second or so. A row whose only change is last_seen (an agent at rest
 * heartbeating) is written every PF_PERSIST_SEEN_SHARED_MS when replicas share the store (the
 * others judge an agent stale by it), every PF_PERSIST_SEEN_SOLO_MS on a store of one's own
 * (nothing reads it back before a restart; shutdown writes them all, so only a crash loses up
 * to that much of last_seen). Configs and assignments do not come through here: the API
 * commits them synchronously before it answers. */
#ifndef PF_PERSIST_H
#define PF_PERSIST_H

#include <stddef.h>
#include <stdint.h>

#include "pf/error.h"

struct pf_fleet;
struct pf_persist;

#define PF_PERSIST_SEEN_SHARED_MS 30000
#define PF_PERSIST_SEEN_SOLO_MS 300000

struct pf_persist_stats {
	uint64_t rows_written;
	uint64_t batches;
	uint64_t errors;
	uint64_t queued_rows;
	uint64_t round_trips; /* PostgreSQL statements the writer sent (0 on SQLite) */
};

/* fleet_url: the postgres:// URL of the shared fleet tables, NULL for the SQLite file. A
 * batch that fails (the database unreachable) is dropped with a log line: the rows are soft
 * state that the agents report again. */
struct pf_persist *pf_persist_start(const char *db_path, const char *fleet_url,
				    struct pf_error *err);
/* Copies up to max_rows dirty agents into a batch for the writer. Returns rows queued. */
size_t pf_persist_flush(struct pf_persist *p, struct pf_fleet *f, size_t max_rows);
/* The same for agents whose only change is last_seen (called far less often). */
size_t pf_persist_flush_seen(struct pf_persist *p, struct pf_fleet *f, size_t max_rows);
/* The loop's periodic call: pf_persist_flush(), and pf_persist_flush_seen() once the
 * last_seen period (see above; it starts at the first tick) is over, continued on the next
 * ticks while max_rows cuts it short. now_ms: the caller's clock (a step back restarts the
 * period). Returns rows queued. */
size_t pf_persist_tick(struct pf_persist *p, struct pf_fleet *f, int64_t now_ms, size_t max_rows);
void pf_persist_stats(struct pf_persist *p, struct pf_persist_stats *out);
/* Blocks until everything queued so far is committed (shutdown, tests). */
void pf_persist_sync(struct pf_persist *p);
/* Writes what is queued, stops the thread, closes the connection. */
void pf_persist_stop(struct pf_persist *p);

#endif
