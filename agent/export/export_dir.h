/* export_dir.h — a directory the agent keeps its own files in: the `file` exporter's exports
 * (file.c) and the spilled delivery queue (spill.c).
 *
 * Owns the directory's creation and its open descriptor, the atomic write of one file (a temp
 * file ".<name>.tmp" written, optionally fsync'ed, and renamed over <name>), and the reading of
 * its entries. What names are ours, and what becomes of other files, is the caller's.
 * Blocking I/O. Not thread-safe: one owner. */
#ifndef AGENT_EXPORT_DIR_H
#define AGENT_EXPORT_DIR_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "pf/error.h"

struct agent_export_dir {
	char *path;
	int fd; /* -1 when closed */
};

/* Creates path with mode when missing (with make_parent, its parent first, best effort) and
 * opens it. 0, or -errno with err set on key: "cannot create directory '<path>': ..." or
 * "cannot open directory '<path>': ..." (d is then closed). */
int agent_export_dir_open(struct agent_export_dir *d, const char *path, mode_t mode,
			  bool make_parent, const char *key, struct pf_error *err);
/* Closes d (a closed d is fine). */
void agent_export_dir_close(struct agent_export_dir *d);

/* d's entries from the first, over a duplicate of its descriptor; NULL and errno. The caller
 * closedir()s it. */
DIR *agent_export_dir_entries(const struct agent_export_dir *d);

/* True when n is a temp name ".<inner>.tmp"; inner (cap bytes) then holds <inner>. */
bool agent_export_dir_temp_of(const char *n, char *inner, size_t cap);

/* Writes parts[0, n) as the file name, atomically: the temp file (mode, never through a
 * link), fsync'ed with sync, renamed over name, then with sync the directory fsync'ed (so the
 * rename is durable). The temp file is removed on failure. 0 or -errno. */
int agent_export_dir_write(const struct agent_export_dir *d, const char *name, mode_t mode,
			   bool sync, const struct iovec *parts, size_t n);

#endif
