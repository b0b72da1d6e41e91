/* table_builder.h — per-file tables built in a child process, away from the agent.
 *
 * Owns: a bounded queue of files whose tables are wanted, and at most one short-lived child
 * process at a time that builds them with the caller's build function (a kind: unwind tables,
 * unwind_table.h; source-line tables, line_table.h) and writes each into a directory as a
 * cache file; the caller reads the finished ones from there. libdw's memory peak while it
 * parses a large file's CFI or DWARF stays in the child, and the build's time is never spent
 * on the caller's thread (the data plane's, which cuts windows on a fixed beat).
 *
 *  - The child is forked (no exec): it closes every descriptor it does not need, keeps the
 *    agent's priority (at nice 19 it would starve on the busy CPUs profiles are taken on,
 *    leaving stacks to frame pointers for seconds; the caller's budget bounds its CPU
 *    instead), dies with the thread that forked it (PR_SET_PDEATHSIG), and only builds, writes
 *    files and reports one 8-byte record per file over a pipe before _exit. It takes up to
 *    PF_TBUILDER_BATCH queued files of PF_TBUILDER_BATCH_BYTES in all (at least one); the
 *    queue holds the smallest files first (a build's time grows with the file), behind the
 *    files someone waits for. A child alive after PF_TBUILDER_CHILD_MAX_MS is killed
 *    and its unreported files fail with -ETIMEDOUT (a crash: -ECHILD).
 *  - Its CPU time (wait4's rusage) is reported back so the caller can budget it.
 *  - Without a directory from the caller, a private one is made under $TMPDIR (or /tmp) and
 *    removed with the builder.
 *
 * Not thread-safe: one owner per builder (the unwinder's, the symbolizer's). */
#ifndef PF_AGENT_TABLE_BUILDER_H
#define PF_AGENT_TABLE_BUILDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define PF_TBUILDER_QUEUE 64          /* files waiting */
#define PF_TBUILDER_BATCH 16          /* files per child */
#define PF_TBUILDER_BATCH_BYTES ((uint64_t)4 << 20) /* their size: a larger file goes alone */
#define PF_TBUILDER_CHILD_MAX_MS 60000 /* a child's wall-time bound */
#define PF_TBUILDER_KEY_MAX 72
#define PF_TBUILDER_KEY_CHARS "0123456789abcdef-" /* a key: up to 63 of them */

/* What the child does with one queued file: builds its table from fd and writes it into dir
 * under key (the kind's own format and file name). 0 or a negative errno, the rc done()
 * reports. It runs in the forked child of a threaded process: no locks of the parent's, no
 * logging. arg is the kind's (a bound, say). */
struct pf_tbuilder_kind {
	const char *name; /* the child's name (comm), up to 15 characters */
	int (*build)(uint64_t arg, int fd, const char *dir, const char *key);
	uint64_t arg;
};

struct pf_tbuilder_stats {
	uint64_t children; /* children started */
	uint64_t built;    /* files whose table the children wrote */
	uint64_t failed;   /* files they reported an error for (no CFI, too large, ...) */
	uint64_t killed;   /* children killed at the wall-time bound or lost */
	uint64_t cpu_ns;   /* the children's user + system CPU time */
	uint64_t max_rss_kb; /* the largest peak RSS of a child (wait4's ru_maxrss) */
};

struct pf_tbuilder;

/* dir: where the tables are written (NULL: a private temporary directory); kind: what is
 * built (copied). NULL and errno on failure. */
struct pf_tbuilder *pf_tbuilder_new(const char *dir, const struct pf_tbuilder_kind *kind);
/* Kills a running child, waits for it, removes a private directory. */
void pf_tbuilder_free(struct pf_tbuilder *b);

/* The directory tables are written to. */
const char *pf_tbuilder_dir(const struct pf_tbuilder *b);

/* Queues the file open at fd (duplicated; the caller keeps its own) under key (a build id, or
 * any name of PF_TBUILDER_KEY_CHARS up to 63 characters), behind the files no larger than it.
 * 0, -EEXIST when key is already queued or being built, -EAGAIN when the queue is full,
 * -EINVAL for a bad key, or -errno of fstat or dup. */
int pf_tbuilder_submit(struct pf_tbuilder *b, const char *key, int fd);
/* Keeps the files of dir whose names end with suffix within max_bytes: when they take more,
 * the least recently used (by modification time: a reader touches a table it reads) are
 * deleted until they take 3/4 of it (a file open elsewhere stays readable). The bytes left,
 * or -errno of the scan (0 when dir does not exist). */
int64_t pf_tbuilder_prune(const char *dir, const char *suffix, uint64_t max_bytes);

/* After a successful build of key (its file <dir>/<key><suffix> read by its owner): the file
 * of a "<dev>-<inode>" key is deleted (never read again), a build id's is added to
 * *dir_bytes, and past max_bytes the directory is pruned (pf_tbuilder_prune) and *dir_bytes
 * set to what is left. */
void pf_tbuilder_account(const char *dir, const char *key, const char *suffix,
			 uint64_t max_bytes, uint64_t *dir_bytes);

/* The key of a file: its GNU build id in hex, or "<dev>-<inode>" in hex when it has none (a
 * key that can never be a build id: such a table names this file only until it is
 * replaced, so its owner reads it right after the build and no later). */
void pf_tbuilder_key(const char *build_id, uint64_t dev, uint64_t ino, char *out, size_t cap);

/* Moves key, when queued, to the front of the queue: the next child builds it first (a
 * table someone waits for, ahead of those asked for ahead of time). True when it was queued
 * or is being built. */
bool pf_tbuilder_hurry(struct pf_tbuilder *b, const char *key);

/* True when key is queued or being built. */
bool pf_tbuilder_pending(const struct pf_tbuilder *b, const char *key);

/* Reaps what the child reported and, when it has exited, the child; then, if start is true
 * and files wait, forks the next one. done(ctx, key, rc) is called once per finished file:
 * rc 0 when the kind's file was written, else the build's error or
 * -ETIMEDOUT/-ECHILD. *cpu_ns (may be NULL) receives the CPU time of the children reaped by
 * this call. Never blocks. 0, or -errno when a child could not be started (the files stay
 * queued). */
int pf_tbuilder_poll(struct pf_tbuilder *b, bool start,
		     void (*done)(void *ctx, const char *key, int rc), void *ctx,
		     uint64_t *cpu_ns);

/* A CPU-time budget for table work (the children's CPU, and the owner's own reads of built
 * tables): rate_ns_per_s on average, in bursts of up to burst_ns (a token bucket, refilled by
 * whole milliseconds of monotonic time). The owner spends into ns as work is done and starts
 * work only while pf_tbuilder_budget_ok says so. */
struct pf_tbuilder_budget {
	int64_t ns; /* CPU time work may take now; below 0 after an overrun */
	int64_t rate_ns_per_ms, burst_ns;
	uint64_t at_ns; /* monotonic ns of the last refill */
};
void pf_tbuilder_budget_init(struct pf_tbuilder_budget *b, int64_t rate_ns_per_s,
			     int64_t burst_ns);
/* Refills b and tells whether work may start now. */
bool pf_tbuilder_budget_ok(struct pf_tbuilder_budget *b);

/* The owner's periodic call: when b is busy, pf_tbuilder_poll() with a new child allowed while
 * budget_ok(budget), the children's CPU time spent from budget and added to *cpu_ns_total,
 * and a failure to start a child kept in *last_error. */
void pf_tbuilder_tick(struct pf_tbuilder *b, struct pf_tbuilder_budget *budget,
		      void (*done)(void *ctx, const char *key, int rc), void *ctx,
		      uint64_t *cpu_ns_total, int *last_error);

/* How a builder child stores a kind's file: the n parts written to path (inside dir, which is
 * created 0700 when missing) through "<path>.<pid>.tmp" and a rename, so a reader sees the
 * whole file or none. 0, or -errno (-EIO for a write that wrote nothing) with the temporary
 * file removed. */
int pf_tbuilder_write_file(const char *dir, const char *path, const struct iovec *parts,
			   size_t n);

/* The running child's pid, 0 when none (the sampler does not unwind its own helper). */
pid_t pf_tbuilder_child(const struct pf_tbuilder *b);
/* True when files wait or a child runs. */
bool pf_tbuilder_busy(const struct pf_tbuilder *b);
void pf_tbuilder_stats(const struct pf_tbuilder *b, struct pf_tbuilder_stats *out);

#endif
