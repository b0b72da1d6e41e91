/* retention.h — the profile store's retention timer: a thread with its own store connection
 * that, every interval, deletes profiles older than max_age_ms and, oldest first, those over
 * max_bytes (store.h pf_store_profiles_retain), in short transactions of at most
 * PF_RETENTION_BATCH rows so the event loop's connection never waits long for the write
 * lock. The receiver also enforces the byte cap at every insert (pf_store_profiles_insert);
 * this timer is what removes old profiles when nothing is being received. After each pass it
 * converts the profiles stored before schema 12 (store.h pf_store_profiles_convert) from
 * their bodies, PF_RETENTION_CONVERT_BATCH per call, one short transaction each, until none
 * is left: the store opens at once and the views read those profiles from their bodies
 * meanwhile.
 *
 * Owns the thread and its connection. */
#ifndef PF_PROFSTORE_RETENTION_H
#define PF_PROFSTORE_RETENTION_H

#include <stdint.h>

#include "pf/error.h"
#include "store.h"

#define PF_RETENTION_BATCH 500
#define PF_RETENTION_INTERVAL_MS 30000
#define PF_RETENTION_CONVERT_BATCH 64

struct pf_retention;

struct pf_retention_stats {
	uint64_t runs;
	uint64_t deleted;
	uint64_t errors;
	uint64_t converted; /* profiles stored before schema 12 rewritten (pf_profstore_convert) */
};

/* Opens dbpath and starts the thread (the first pass runs at once). NULL with err set. */
struct pf_retention *pf_retention_start(const char *dbpath, const struct pf_profile_retention *ret,
					uint32_t interval_ms, struct pf_error *err);
/* Asks for a pass now (thread-safe). */
void pf_retention_kick(struct pf_retention *r);
void pf_retention_stats(struct pf_retention *r, struct pf_retention_stats *out);
/* Stops the thread and closes its connection. NULL is allowed. */
void pf_retention_stop(struct pf_retention *r);

#endif
