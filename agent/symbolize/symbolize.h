/* symbolize.h — native and kernel symbolization on the host.
 *
 * Owns: per-process memory maps captured from /proc/PID/maps, a bounded LRU cache of opened ELF
 * files keyed by GNU build id (elfutils libelf for .symtab/.dynsym), their source-line tables
 * (line_table.h, built from DWARF by a child process, table_builder.h), a bounded cache of
 * resolved (file, address) -> symbol, source line, and the kernel symbol table from
 * /proc/kallsyms (+ the kernel build id from /sys/kernel/notes), loaded at the first kernel
 * frame as one sorted array of 8-byte (address offset, name offset) entries and one string
 * blob.
 *
 * Names: C++ and Rust symbols get their readable form as function (demangle.h) and keep the
 * mangled one as system_name. With DWARF (in the file or its separate debug file), the
 * functions inlined at an address become the frame's inlined list, each with its own file
 * and line.
 *
 * Source lines: DWARF is never decoded in this process. A file's line table is asked for
 * when the file is first mapped (pf_symbolizer_capture) or looked up, and a child builds it
 * into the line directory (kept across runs, by build id); until it is there, the file's new
 * addresses get their symbol-table names only and are not cached, so a later window
 * resolves them in full. The children's CPU time comes out of a bucket of
 * PF_SYM_LINE_BUILD_NS_PER_S; a table someone waits for goes first.
 *
 * Short-lived processes: call pf_symbolizer_capture() while the process lives (at exec or its
 * first sample). It snapshots the executable mappings and opens each file through
 * /proc/PID/map_files (works for deleted files and other mount namespaces) into the cache, so a
 * process that is gone by the end of the window still symbolizes. pf_symbolizer_forget()
 * drops a process's maps (after the window that saw its exit).
 *
 * JIT frames: an address in memory without a file (code a runtime compiled) is named from the
 * process's perf map (/tmp/perf-<pid>.map in its mount and pid namespaces, perf_map.h) when
 * it writes one; read at most once per window, again only when it changed, all processes'
 * maps within PF_SYM_JIT_MAX_BYTES.
 *
 * A frame that cannot be symbolized keeps its address and mapping (function == NULL), so a
 * backend can symbolize it later from the mapping's build id.
 *
 * The parts it is made of (ELF files and their cache, line tables, /proc maps, kernel symbols,
 * the resolved-address cache) are listed in symbolize_int.h.
 *
 * Not thread-safe: one owner (the sampler) calls it. */
#ifndef PF_AGENT_SYMBOLIZE_H
#define PF_AGENT_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/profile.h"

struct pf_symbolizer;

struct pf_symbolizer_options {
	size_t max_elf_files; /* ELF cache bound (entries); 0 = default 128 */
	size_t max_processes; /* processes whose maps are kept; 0 = default 4096 */
	bool no_kernel;       /* do not load /proc/kallsyms */
	const char *debug_dir; /* separate debug files: <debug_dir>/.build-id/xx/yyyy.debug (a
				* stripped file's .symtab and DWARF); NULL = "/usr/lib/debug" */
	const char *line_dir; /* where the line tables are kept across runs (by build id);
			       * NULL: a private temporary directory */
};

/* JIT symbol maps (/tmp/perf-<pid>.map, perf_map.h) of all processes together hold at most
 * this much; a map that would take them past it is not loaded. */
#define PF_SYM_JIT_MAX_BYTES ((size_t)16 << 20)

/* The line directory's bound: past it, the least recently used tables are deleted
 * (pf_tbuilder_prune), at the symbolizer's start and as builds add to it. */
#define PF_SYM_LINE_DIR_MAX_BYTES ((uint64_t)256 << 20)

/* Line-table builds: 5 ms of the children's CPU per second on average (a -g
 * Python's table takes about a second, once per build id: the tables stay on disk), in
 * bursts of up to 1 s. */
#define PF_SYM_LINE_BUILD_NS_PER_S 5000000ll
#define PF_SYM_LINE_BUILD_BURST_NS 1000000000ll

struct pf_symbolizer_stats {
	uint64_t elf_cached;   /* ELF files in the cache now */
	uint64_t elf_opened;   /* files opened and parsed (cache misses) */
	uint64_t elf_evicted;
	uint64_t processes;    /* processes with captured maps */
	uint64_t frames_resolved;
	uint64_t frames_unresolved;
	uint64_t kernel_symbols; /* loaded from /proc/kallsyms, 0 before the first kernel frame */
	uint64_t cache_hits;   /* user frames answered by the resolved-address cache */
	uint64_t kernel_load_cpu_ns; /* CPU time (user+sys) the /proc/kallsyms load took, once */
	uint64_t elf_load_cpu_ns;    /* thread CPU time opening and parsing ELF files */
	uint64_t kernel_resolved;    /* kernel addresses resolved by the resolver (cache misses) */
	uint64_t kernel_resolve_calls; /* resolver batches */
	uint64_t kernel_resolve_cpu_ns; /* thread CPU time spent in them */
	bool kernel_resolver;        /* the resolver is in use (no /proc/kallsyms) */
	uint64_t inlined_frames; /* inlined functions found in DWARF (per resolved address) */
	uint64_t demangle_lookups; /* C++/Rust symbols demangled (through the demangle cache) */
	uint64_t demangle_hits;    /* of those, answered by the cache */
	uint64_t demangle_failed;  /* misses the demangler refused */
	uint64_t demangle_cpu_ns;  /* thread CPU time in the demangler on misses */
	uint64_t line_tables;       /* line tables open now */
	uint64_t line_tables_bytes; /* memory they hold (their block indexes) */
	uint64_t line_builds;       /* tables the children built */
	uint64_t line_build_failed; /* files whose build failed (no line program, too large,
				     * a child killed or lost) */
	uint64_t line_build_cpu_ns; /* the children's CPU time */
	uint64_t line_build_max_rss_kb; /* the largest peak RSS of a child */
	uint64_t line_cache_hits;   /* tables found on disk, built by an earlier run */
	uint64_t line_lookups;      /* addresses looked up in a table */
	uint64_t line_deferred;     /* new addresses given symbol-table names only while their
				     * file's table was being built */
	uint64_t line_dir_bytes;    /* bytes of tables in the line directory (as last counted,
				     * plus the builds since) */
	uint64_t jit_maps;          /* processes with a JIT symbol map loaded now */
	uint64_t jit_maps_loaded;   /* maps read (loads and reloads after they grew) */
	uint64_t jit_maps_refused;  /* maps past their bounds (perf_map.h, PF_SYM_JIT_MAX_BYTES) */
	uint64_t jit_frames;        /* frames named from them */
	uint64_t jit_bytes;         /* the memory those maps hold */
	uint64_t go_files;          /* cached Go binaries without .symtab, named from their pclntab */
	uint64_t names_cleaned;     /* names from files that were not clean UTF-8 (bytes replaced) */
	int last_error;        /* negative errno of the last failure, 0 when none */
};

/* NULL and errno on failure. opt may be NULL for defaults. */
struct pf_symbolizer *pf_symbolizer_new(const struct pf_symbolizer_options *opt);
void pf_symbolizer_free(struct pf_symbolizer *sym);

/* Snapshot /proc/PID/maps (executable file mappings, [vdso]) and open their files into the
 * cache. Calling it again refreshes the snapshot. 0, -ENOENT when the process is gone, or
 * another negative errno. */
int pf_symbolizer_capture(struct pf_symbolizer *sym, uint32_t pid);
/* Cheap part of a capture, for exec events: opens only /proc/PID/exe into the ELF cache
 * (a dev/inode hit when the executable was seen before), so it symbolizes after the process
 * is gone. 0 or -errno. */
int pf_symbolizer_pin_exe(struct pf_symbolizer *sym, uint32_t pid);
/* True when maps of pid were captured. */
bool pf_symbolizer_has(const struct pf_symbolizer *sym, uint32_t pid);
void pf_symbolizer_forget(struct pf_symbolizer *sym, uint32_t pid);

/* One executable mapping of a captured process, for the kernel unwinder (unwinder.h). */
struct pf_sym_exec_map {
	uint64_t start, end;  /* [start, end) in the process */
	uint64_t bias;        /* address minus ELF virtual address (when fd >= 0) */
	int fd;               /* the mapped ELF file, owned by the symbolizer and valid until the
			       * next call into it; -1 when the mapping has no (readable) file */
	const char *build_id; /* GNU build id in hex, "" when the file has none */
	const char *path;     /* "[anon]", "[vdso]"... for mappings without a file */
	uint64_t dev, ino;
	bool anon;            /* anonymous executable memory (JIT code, trampolines) */
	bool vdso;            /* the [vdso], holding the same image as the agent's own (vdso.h) */
};
/* Calls fn for each executable mapping of pid's last capture (pf_symbolizer_capture), in
 * address order; stops at fn's first non-zero return and returns it. -ENOENT when pid has no
 * captured maps. */
int pf_symbolizer_exec_maps(struct pf_symbolizer *sym, uint32_t pid,
			    int (*fn)(void *ctx, const struct pf_sym_exec_map *m), void *ctx);

/* Fills p->mappings / p->n_mappings (allocated from w) and, for each of the n frames (address
 * and kind set by the caller), mapping, function, file and line. User addresses outside every
 * captured mapping make it re-capture the process once (a late dlopen). Strings come from w's
 * arena. 0 or -ENOMEM; unresolvable frames are not an error. */
int pf_symbolizer_resolve(struct pf_symbolizer *sym, uint32_t pid, struct pf_prof_window *w,
			  struct pf_prof_process *p, struct pf_prof_frame *frames, size_t n);

/* After each window close: reaps finished line-table builds, and gives back the resident
 * pages of every cached file's mapped image read since the last trim (symbol and string
 * tables): the page cache keeps them for the reads that come back (a Python built with -g
 * otherwise kept megabytes of its image in the agent's RSS for as long as it stayed cached).
 * Resolved addresses stay cached (by file and address, up to 16384). */
void pf_symbolizer_trim(struct pf_symbolizer *sym);

/* Kernel symbolization by the kernel itself (the sampler's BPF resolver, cpu_sampler.h): for
 * each of the n (<= PF_SYM_KRESOLVE_BATCH) addresses, write into text[i] what vsprintf's %pS
 * prints: "name+0xoff/0xsize [module]", or "0x..." when no symbol covers the address. 0, or a
 * negative errno: the symbolizer then falls back to /proc/kallsyms for good. */
#define PF_SYM_KRESOLVE_BATCH 64
#define PF_SYM_KTEXT_LEN 256
typedef int (*pf_kernel_resolve_fn)(void *ctx, const uint64_t *addrs, size_t n,
				    char (*text)[PF_SYM_KTEXT_LEN]);
/* With a resolver, kernel frames are resolved a batch of new addresses at a time (results
 * cached, up to 4096 addresses) and /proc/kallsyms is never read. */
void pf_symbolizer_set_kernel_resolver(struct pf_symbolizer *sym, pf_kernel_resolve_fn fn,
				       void *ctx);

/* Loads /proc/kallsyms now instead of at the first kernel frame (a one-time cost of some
 * tens of milliseconds, better paid at startup). 0, -EPERM (addresses hidden), -ENOENT (no
 * symbols, or no_kernel), -ENOMEM. */
int pf_symbolizer_load_kernel(struct pf_symbolizer *sym);

void pf_symbolizer_stats(const struct pf_symbolizer *sym, struct pf_symbolizer_stats *out);

/* Set-up work so far, thread CPU time of the owner's thread: ELF files opened and parsed
 * (elf_load_cpu_ns) and the /proc/kallsyms load (kernel_load_cpu_ns). A start that meets every
 * process of the host opens most of its files at once; the overhead guard judges this on the
 * set-up budget, not on max_cpu_percent. */
uint64_t pf_symbolizer_load_cpu_ns(const struct pf_symbolizer *sym);

/* The running line-table builder child's pid, 0 when none (part of the agent: its samples
 * are not the host's). */
uint32_t pf_symbolizer_helper_pid(const struct pf_symbolizer *sym);

/* Reaps finished line-table builds and starts the next (what pf_symbolizer_resolve and
 * pf_symbolizer_trim do first). True while builds wait or run. */
bool pf_symbolizer_lines_pending(struct pf_symbolizer *sym);
/* The same, then true only while a child builds (false when builds wait for the CPU budget:
 * they will not finish soon). */
bool pf_symbolizer_lines_building(struct pf_symbolizer *sym);

#endif
