/* elf_cache.h — the symbolizer's cache of opened ELF files.
 *
 * Owns: a bounded LRU list of struct elf_file (elf_file.h) keyed by GNU build id (dev/inode
 * for files without one), where two mappings of one build id share an entry; opening a
 * mapping's file through the process (/proc/PID/map_files, works for deleted files and other
 * mount namespaces, then /proc/PID/root) so that it symbolizes after the process is gone; and
 * the vDSO's symbols, from a copy of the agent's own image, kept outside the bound. */
#ifndef PF_AGENT_ELF_CACHE_H
#define PF_AGENT_ELF_CACHE_H

#include <stdint.h>

struct elf_file;
struct pf_symbolizer;
struct pmap;

/* The cached file with that build id (by dev/inode when build_id is NULL or ""), made the
 * most recently used; NULL when not cached. */
struct elf_file *elf_cache_find(struct pf_symbolizer *sym, const char *build_id, uint64_t dev,
				uint64_t ino);
/* Inserts f (or returns the cached twin with the same build id, freeing f), evicting the
 * least recently used past the bound. */
struct elf_file *elf_cache_insert(struct pf_symbolizer *sym, struct elf_file *f);
/* elf_file_open(fd), its thread CPU time added to the stats' elf_load_cpu_ns (set-up work,
 * pf_symbolizer_load_cpu_ns). */
struct elf_file *elf_cache_open(struct pf_symbolizer *sym, int fd);
/* The cached ELF of mapping m of pid, opening it through the process when needed; NULL
 * when it has none (anonymous code) or it cannot be read. */
struct elf_file *elf_cache_mapping(struct pf_symbolizer *sym, uint32_t pid, struct pmap *m);

#endif
