/* file.h — the `file` exporter: each export is one binary ExportProfilesServiceRequest in
 * <dir>/<UTC time>-<profile id hex>.otlp.pb, e.g.
 * 20231114T221320.123Z-0f1e2d3c4b5a69788796a5b4c3d2e1f0.otlp.pb (names sort by time).
 *
 * Owns the directory's files of that name pattern (and nothing else in it):
 *  - writes are atomic: a temp file ".<name>.tmp" is written, fsync'ed and renamed, then the
 *    directory is fsync'ed, so a reader never sees a partial file;
 *  - the directory size is bounded: after each write the oldest of our files are deleted
 *    until our files total at most max_bytes (the file just written is never deleted; an
 *    export larger than max_bytes alone is refused with -EFBIG);
 *  - stale temp files of ours (a crash mid-write) are removed when the exporter is created.
 * Blocking I/O (fsync): call from a worker thread (exporter.c does). Not thread-safe. */
#ifndef AGENT_EXPORT_FILE_H
#define AGENT_EXPORT_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "pf/error.h"

#define AGENT_EXPORT_FILE_NAME_MAX 64

struct agent_export_file;

/* Creates the directory (0755, one level) when missing. NULL + errno (err filled). */
struct agent_export_file *agent_export_file_new(const char *dir, uint64_t max_bytes,
						struct pf_error *err);
void agent_export_file_free(struct agent_export_file *f);

/* Writes one export named by now_unix_ns and profile_id; name (may be NULL) receives the file
 * name (AGENT_EXPORT_FILE_NAME_MAX bytes). 0 or -errno (-EFBIG, -ENOSPC, -EIO...). */
int agent_export_file_write(struct agent_export_file *f, const uint8_t *data, size_t len,
			    const uint8_t profile_id[16], uint64_t now_unix_ns, char *name,
			    struct pf_error *err);

/* Our files in the directory now: count and total bytes (for tests and health). */
int agent_export_file_usage(struct agent_export_file *f, size_t *n_files, uint64_t *bytes);

/* Whether name is one of ours ("<15 digits/T>.<3 digits>Z-<32 hex>.otlp.pb"). */
int agent_export_file_is_ours(const char *name);

#endif
