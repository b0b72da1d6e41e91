/* symbolize_int.h — the symbolizer's state, shared by symbolize.c and the parts it is made of.
 * Not for use outside agent/symbolize.
 *
 * symbolize.c owns the captured processes, their JIT maps, pf_symbolizer_resolve and the
 * lifecycle; the parts work on the same struct pf_symbolizer:
 *   elf_cache.c   the bounded LRU cache of opened ELF files, and each mapping's file
 *   elf_lines.c   their source-line tables, built by a child and opened from the line directory
 *   rcache.c      the resolved-address cache and the names it interns
 *   kernel_syms.c kernel frames: /proc/kallsyms, or batches through the BPF resolver
 * Below them, with no state of the symbolizer: elf_read.h, elf_file.h, proc_maps.h. */
#ifndef PF_AGENT_SYMBOLIZE_INT_H
#define PF_AGENT_SYMBOLIZE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "symbolize/elf_read.h"
#include "symbolize/rcache.h"
#include "symbolize/symbolize.h"
#include "unwind/table_builder.h"

#define PROC_BUCKETS 1024
#define KCACHE_SLOTS 4096 /* kernel addresses resolved by the resolver */

struct pmap;

/* Kernel text symbols: 8 bytes each (offset from kbase + name offset into one blob). */
struct ksym {
	uint32_t addr_off;
	uint32_t name_off;
};

/* One kernel address resolved by the resolver (name interned; NULL: no symbol). */
struct kcache_ent {
	uint64_t addr; /* 0 = empty */
	const char *name;
};

/* One captured process. */
struct proc_maps {
	struct proc_maps *next;
	uint32_t pid;
	uint64_t stamp;
	struct pmap *maps;
	size_t n;
	/* its JIT symbol map (/tmp/perf-<pid>.map, perf_map.h), looked at once per window
	 * that has a frame it may name; reloaded when its size or time changed */
	struct pf_perf_map *jit;
	uint64_t jit_size;
	int64_t jit_mtime_ns;
	uint32_t jit_window; /* sym->window + 1 of the last look, 0: never */
	uint32_t jit_nspid;  /* pid in its own namespace (ns_pid), 0: not read yet */
};

struct pf_symbolizer {
	struct pf_symbolizer_options opt;
	struct elf_file *lru_head, *lru_tail;
	size_t n_elf;
	struct proc_maps *procs[PROC_BUCKETS];
	size_t n_procs;
	uint64_t stamp;
	uint64_t next_file_id;
	uint64_t elf_gen; /* bumped when the cache frees a file: older pmap.elf may dangle */
	uint32_t window;  /* windows closed (pf_symbolizer_trim) */
	size_t jit_bytes; /* held by the processes' JIT maps, at most PF_SYM_JIT_MAX_BYTES */
	struct rcache_ent *rcache; /* RCACHE_SLOTS, 2-way sets; allocated at first use */
	struct iname **inames;     /* RCACHE_SLOTS buckets of interned file names */
	size_t inames_bytes;
	/* kernel */
	bool kernel_tried;
	uint64_t kbase;
	struct ksym *ksyms;
	size_t n_ksyms;
	char *knames;
	char kbuild_id[PF_BUILD_ID_HEX];
	pf_kernel_resolve_fn kresolve; /* NULL: /proc/kallsyms */
	void *kresolve_ctx;
	struct kcache_ent *kcache; /* KCACHE_SLOTS, direct-mapped */
	uint64_t ktext_start;	   /* lowest kernel text address (resolver mode) */
	bool kinfo_read;	   /* kbuild_id and ktext_start read */
	struct pf_demangler *dm; /* C++/Rust names, cached */
	struct rcache_ent partial; /* a result without the lines a table will give: returned,
				    * never cached */
	struct pf_tbuilder *lb;    /* the line tables' builder */
	struct pf_tbuilder_budget lb_budget; /* the children's CPU time */
	struct pf_line_result *lres; /* a lookup's answer */
	uint64_t lines_dir_bytes;    /* the line directory's tables, as last counted + built */
	struct elf_file *vdso;       /* the vDSO's symbols (from the agent's own image) */
	bool vdso_tried;
	struct pf_symbolizer_stats st;
};

/* The calling thread's CPU time (what the loads are timed with); 0 when unreadable. */
static inline uint64_t sym_thread_cpu_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
