/* rcache.h — the symbolizer's resolved-address cache and the names it interns.
 *
 * Owns: the results of user addresses already resolved, kept across windows by (file id,
 * ELF virtual address) in 2-way sets (16384 entries): symbol, demangled name, source line
 * and inlined functions; and the interned copies of the names they hold (cleaned to UTF-8),
 * which kernel_syms.c uses too. Past 1 MiB of names, both caches start over. */
#ifndef PF_AGENT_RCACHE_H
#define PF_AGENT_RCACHE_H

#include <stdbool.h>
#include <stdint.h>

struct elf_file;
struct pf_symbolizer;

/* A function inlined at a resolved address (names interned). */
struct rc_inline {
	const char *name; /* linkage (mangled) name when DWARF has one, else DW_AT_name */
	const char *readable; /* demangled name, NULL when it reads as name */
	const char *file;
	uint32_t line;
};

/* One resolved user address: the symbol (pointing into the cached ELF, valid while file `id`
 * is cached, which a matching key proves), the source line and the inlined functions there
 * (strings interned here, so the DWARF handles can be dropped between windows). */
struct rcache_ent {
	uint64_t file_id; /* 0 = empty */
	uint64_t vaddr;
	const char *function;
	const char *readable; /* demangled function (interned), NULL when it reads the same */
	const char *file;
	uint32_t line;
	uint32_t n_inl;
	struct rc_inline *inl; /* malloc'd, innermost first */
};

/* Allocates the caches at their first use. False when out of memory. */
bool rcache_ready(struct pf_symbolizer *sym);
/* Symbol and line of vaddr in f, from the cache or resolved now (and cached). NULL only when
 * out of memory; ->function NULL when no symbol covers vaddr. While f's line table is being
 * built, the address gets its symbol only, in sym->partial (not cached). */
const struct rcache_ent *rcache_lookup(struct pf_symbolizer *sym, struct elf_file *f,
				       uint64_t vaddr);
/* True when (f, vaddr) is in the cache (nothing moves). */
bool rcache_has(const struct pf_symbolizer *sym, const struct elf_file *f, uint64_t vaddr);
/* A stable copy of s, cleaned to UTF-8, valid until the caches start over. NULL: no memory. */
const char *rcache_intern(struct pf_symbolizer *sym, const char *s);
/* Frees the cache and the interned names. */
void rcache_free(struct pf_symbolizer *sym);

#endif
