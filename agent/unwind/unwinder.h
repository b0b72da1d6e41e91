/* unwinder.h — the user side of the kernel's .eh_frame stack walk.
 *
 * Owns: the unwind tables loaded into the kernel (unwind_table.h builds them), keyed by GNU
 * build id (by device and inode for files without one), and each process's array of its
 * executable mappings in the kernel (cpu_sampler.h: unwind_rows, unwind_tables,
 * unwind_procs; the sampler hands over their fds, this module never sees the skeleton).
 *
 *  - Rows live in the mmapable array unwind_rows, written directly through a shared mapping
 *    of it (no syscall per row): its pages count in the agent's RSS, so limits.max_memory_mb
 *    covers them. The array is cut into chunks of PF_UNWINDER_CHUNK rows; a table takes a
 *    contiguous run of chunks: its index (one entry per 512 bytes of code, cpu_sampler.h
 *    PF_UNWIND_INDEX_SHIFT), then its rows. When a table does not fit, the least recently
 *    used tables no live process maps are evicted first; if it still does not fit, the
 *    mapping is walked by frame pointers (counted in rows_full).
 *  - Tables are built once per file by a child process (table_builder.h) into cache_dir
 *    (<build id>.unw, unwind_table.h's format), and read from there; a cache file that fails
 *    its checks is rebuilt. A table's entry in the kernel stays empty — its mappings walked by
 *    frame pointers — until the builder reports and pf_unwinder_tick loads the rows. Reading
 *    tables and the builder share a budget of CPU time (0.5 % of a core on average, 1 s
 *    bursts); over it, no builder starts, mappings are walked by frame pointers and the
 *    process is loaded again a second later. A file that would need more than half of the
 *    rows is not built.
 *  - A process's array (its mappings sorted by address, one map update for the whole
 *    process) is written from the symbolizer's capture of its maps (pf_symbolizer_exec_maps)
 *    at its first sample 50 ms or more after its first sample (pf_unwinder_seen_ms), again
 *    when the kernel reports an address outside every known mapping (a dlopen), and deleted
 *    at its exit or exec.
 *
 * Not thread-safe: one owner (the sampler). */
#ifndef PF_AGENT_UNWINDER_H
#define PF_AGENT_UNWINDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symbolize/symbolize.h"

#define PF_UNWINDER_CHUNK 1024u /* rows */
/* The table cache directory's bound: past it, the least recently used tables are deleted
 * (pf_tbuilder_prune: by modification time, touched when a table is read), at start and as
 * builds add to it. */
#define PF_UNWINDER_DIR_MAX_BYTES ((uint64_t)128 << 20)

struct pf_unwinder_options {
	int rows_fd;        /* unwind_rows (BPF_F_MMAPABLE array of struct pf_bpf_unwind_row) */
	uint32_t rows_cap;  /* its max_entries, a multiple of PF_UNWINDER_CHUNK */
	int tables_fd;      /* unwind_tables */
	uint32_t tables_cap;
	int procs_fd;       /* unwind_procs */
	const char *cache_dir; /* NULL: a private temporary directory, removed at free */
};

struct pf_unwinder_stats {
	uint64_t tables;      /* tables loaded in the kernel now */
	uint64_t rows;        /* their rows and index entries */
	uint64_t rows_cap;    /* the rows tables may use (pf_unwinder_set_rows_limit) */
	uint64_t processes;   /* processes with an array in the kernel */
	uint64_t entries;     /* mappings in those arrays */
	uint64_t built;       /* tables built from CFI */
	uint64_t build_ns;    /* CPU time of the builder's children */
	uint64_t cache_hits;  /* tables read from the disk cache */
	uint64_t cache_bad;   /* cache files refused and rebuilt */
	uint64_t no_cfi;      /* files without usable CFI (walked by frame pointers) */
	uint64_t evicted;     /* tables evicted to make room */
	uint64_t rows_full;   /* tables that did not fit even after evicting (tried again 10 s
			       * later), or larger than half the kernel's rows (never) */
	uint64_t reloads;     /* process reloads after a miss */
	uint64_t deferred;    /* loads that left tables for later (build budget spent) */
	uint64_t pending;     /* tables waiting for the builder now */
	uint64_t builder_runs;   /* builder children started */
	uint64_t builder_killed; /* ... killed at their time bound or lost */
	int last_error;
};

struct pf_unwinder;

/* NULL and errno on failure (the rows array cannot be mapped: -EPERM/-EINVAL). */
struct pf_unwinder *pf_unwinder_new(const struct pf_unwinder_options *opt);
void pf_unwinder_free(struct pf_unwinder *u);

/* Writes pid's entries from the symbolizer's last capture of its maps (the caller captures
 * first), loading the tables its files need. Entries of mappings that are gone are removed.
 * 0, -ENOENT (no capture), -ENOMEM, or a BPF map error. */
int pf_unwinder_load(struct pf_unwinder *u, struct pf_symbolizer *sym, uint32_t pid);
/* True when pid has entries. */
bool pf_unwinder_has(const struct pf_unwinder *u, uint32_t pid);
/* Monotonic ms of pid's last load, 0 when none (the sampler rate-limits reloads with it);
 * *deferred: some of its tables waited for the build budget then (load it again later);
 * *retry_ms: how long after it a miss may reload it (200 ms, doubled up to 10 s by each
 * reload that found no new mapping). */
uint64_t pf_unwinder_loaded_ms(const struct pf_unwinder *u, uint32_t pid, bool *deferred,
			       uint32_t *retry_ms);
/* Monotonic ms at which pid was first noted (noting it now if new; 0: out of memory). The
 * sampler loads a process's tables only once it has run a while, so the many processes that
 * live a few ms (a build's) cost no trie updates. */
uint64_t pf_unwinder_seen_ms(struct pf_unwinder *u, uint32_t pid);
/* pid runs V8 (v8_unwind.h): from its next load on, [start, end) (the embedded builtins
 * inside the node file; start == end: none) is a PF_UNWIND_MAP_JIT entry of its own, like
 * its anonymous executable mappings, where the kernel's V8 walk takes over. 0 or -ENOMEM. */
int pf_unwinder_set_v8(struct pf_unwinder *u, uint32_t pid, uint64_t start, uint64_t end);
/* Removes pid's entries (exit, exec); its tables stay loaded until evicted. */
void pf_unwinder_forget(struct pf_unwinder *u, uint32_t pid);

/* Lets tables use at most rows of the kernel's array (rounded down to whole chunks; at least
 * one chunk, at most rows_cap): limits.max_memory_mb sizes it. Loaded tables beyond it are
 * unloaded (their mappings walked by frame pointers until their processes load again). The
 * rows now allowed. */
uint32_t pf_unwinder_set_rows_limit(struct pf_unwinder *u, uint64_t rows);
/* Collects what the table builder finished (loading those tables' rows, which the processes
 * that map them use at once) and starts it on waiting files when the budget allows. Called
 * on every drain of the sampler; never blocks. */
void pf_unwinder_tick(struct pf_unwinder *u);
/* The pid of the builder's running child, 0 when none (its samples load no tables). */
uint32_t pf_unwinder_helper_pid(const struct pf_unwinder *u);

/* Mappings in pid's array in the kernel, 0 when it has none (tests: none after an exit). */
size_t pf_unwinder_kernel_entries(const struct pf_unwinder *u, uint32_t pid);

void pf_unwinder_stats(const struct pf_unwinder *u, struct pf_unwinder_stats *out);

#endif
