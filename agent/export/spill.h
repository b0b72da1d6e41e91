/* spill.h — an exporter's queue mirrored on disk, so a restart of the agent loses nothing that
 * was queued: one file per queued item, written when the item is queued, deleted when it left
 * the queue (confirmed, failed for good, or dropped as the oldest), read back at start.
 *
 * Owns one directory and the files in it named "<16 hex seq>.pfq" (temporary ".<name>.tmp"
 * while written, removed at open when a crash left them). The file layout, little-endian:
 *   "PFQ1" | u32 target_len | u64 data_len | 16 bytes profile id | u64 enqueued unix ns |
 *   u32 CRC-32 of target and data | target | data
 * Records are written to a temporary file and renamed into place, so a reader never sees a
 * partial record; they are not fsync'ed (a spill survives the process, not a power cut, and
 * the caller's submit stays cheap). A file that does not read back (short, bad magic, bad
 * CRC, over the size limit) is deleted at load and counted. agent_spill_write and
 * agent_spill_remove of different records may run on different threads at once (they share
 * only the directory fd); load runs alone, before the exporter's worker starts. */
#ifndef AGENT_EXPORT_SPILL_H
#define AGENT_EXPORT_SPILL_H

#include <stddef.h>
#include <stdint.h>

#include "pf/error.h"

struct agent_spill;

struct agent_spill_record {
	uint64_t seq;
	uint8_t id[16];
	uint64_t enq_unix_ns;
	char *target;  /* NULL when the record has none; malloc'ed, the callback's */
	uint8_t *data; /* malloc'ed, the callback's */
	size_t len;
};

/* Opens (creating, 0700, up to two levels: dir's parent and dir) the spill directory. NULL +
 * errno, err filled. */
struct agent_spill *agent_spill_open(const char *dir, struct pf_error *err);
void agent_spill_close(struct agent_spill *s);
const char *agent_spill_dir(const struct agent_spill *s);

/* Writes the record of seq (target may be NULL). 0 or -errno. */
int agent_spill_write(struct agent_spill *s, uint64_t seq, const uint8_t id[16],
		      uint64_t enq_unix_ns, const char *target, const uint8_t *data, size_t len);
/* Deletes the record of seq; 0 also when it was not there. */
int agent_spill_remove(struct agent_spill *s, uint64_t seq);

/* Deletes a spill directory nobody uses any more (its exporter was removed or now sends
 * elsewhere): its records, temporary files, then the directory itself unless something that
 * is not ours is left in it. *n_items and *n_bytes (target + data bytes, as queued) receive
 * what was discarded. Safe while an exporter still has the directory open: its later removes
 * find nothing. 0 (also when dir does not exist) or -errno. */
int agent_spill_discard_dir(const char *dir, uint64_t *n_items, uint64_t *n_bytes);

typedef int (*agent_spill_load_fn)(void *user, struct agent_spill_record *rec);

/* Reads every record, oldest (lowest seq) first, and hands each to cb, which takes ownership
 * of rec->target and rec->data; a negative return from cb stops the load and is returned.
 * Records larger than max_len are deleted like corrupt ones; *n_bad receives their count. */
int agent_spill_load(struct agent_spill *s, size_t max_len, agent_spill_load_fn cb, void *user,
		     size_t *n_bad);

#endif
