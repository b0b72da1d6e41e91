/* elf_lines.h — the source lines of the symbolizer's cached ELF files.
 *
 * Owns: asking for a file's line table (line_table.h) when it is first mapped or looked up:
 * opened from the line directory when an earlier run built it (by build id), else queued for
 * the builder child (table_builder.h), whose CPU time comes out of the symbolizer's budget;
 * reaping the builds; and looking an address up in an open table. DWARF is never decoded in
 * the agent's process. */
#ifndef PF_AGENT_ELF_LINES_H
#define PF_AGENT_ELF_LINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_INLINE_DEPTH 16 /* inlined functions kept per address */

struct elf_file;
struct pf_symbolizer;

/* A function inlined at an address, as a line table gives it (strings in its result). */
struct inl_raw {
	const char *name;
	const char *file;
	uint32_t line;
};

/* Asks for f's table: open from the directory when an earlier run built it, else queued for
 * the builder. Files without DWARF are marked at once. */
void elf_lines_request(struct pf_symbolizer *sym, struct elf_file *f);
/* Reaps finished builds and starts the next child when the budget allows. */
void elf_lines_poll(struct pf_symbolizer *sym);
/* Source line and inlined functions (inl: MAX_INLINE_DEPTH entries) of vaddr from f's table.
 * *partial when the table is not there yet: the caller does not cache the result. */
void elf_lines_find(struct pf_symbolizer *sym, struct elf_file *f, uint64_t vaddr,
		    const char **file, uint32_t *line, struct inl_raw *inl, size_t *n_inl,
		    bool *partial);

#endif
