/* gopclntab.h — function names of Go programs from their .gopclntab.
 *
 * Owns: reading the table the Go runtime itself uses to name its functions (in every Go
 * binary, also in those built with -ldflags="-s -w", which drop .symtab: the usual way Go
 * services are shipped), in the formats of Go 1.2–1.15, 1.16–1.17, 1.18–1.19 and 1.20+,
 * into (entry address, name) pairs. Only the function table and the names are read: no line
 * tables, no inline trees. The bytes come from a file a sampled process mapped: every offset
 * is checked against the buffer, names must end inside it, and a table claiming more than
 * PF_GO_MAX_FUNCS functions or more than its bytes can hold is refused. */
#ifndef PF_AGENT_GOPCLNTAB_H
#define PF_AGENT_GOPCLNTAB_H

#include <stddef.h>
#include <stdint.h>

#define PF_GO_MAX_FUNCS (4u << 20)

struct pf_go_func {
	uint64_t entry, size; /* [entry, entry + size): ELF virtual addresses */
	const char *name;     /* NUL-terminated, inside the buffer parsed */
	uint32_t pcsp;        /* its stack-pointer table in the pctab (Go 1.16+), 0: none */
};

struct Elf;

/* Where an ELF file keeps its pclntab: the .gopclntab section (.data.rel.ro.gopclntab in a
 * PIE), or for an externally linked Go program (cgo) inside .data.rel.ro, looked for only
 * when .go.buildinfo says the file is a Go program. *tab and *len give the table's bytes (in
 * libelf's image of the file), *text_start where Go's code starts (what Go 1.18+ entries
 * are relative to: the header's runtime.text when it lies in .text, else .text's address).
 * 0, or -ENOENT when the file is not a Go program (or holds no table this module reads). */
int pf_gopclntab_find(struct Elf *elf, const uint8_t **tab, size_t *len, uint64_t *text_start);

/* True when tab[0, len) starts like a pclntab header of a version this module reads. */
int pf_gopclntab_looks_like(const uint8_t *tab, size_t len);

/* Parses the pclntab at tab[0, len) (the .gopclntab section's bytes, or where the header
 * was found in .data.rel.ro). text_start is where Go's code starts (pf_gopclntab_find): Go
 * 1.18+ tables give entries relative to it. Fills *out (malloc'd, *n entries in the table's
 * order, ascending) with the functions that have a name. 0; -EINVAL for a table that is not
 * one or does not fit in len; -ENOTSUP for an unknown version; -E2BIG past PF_GO_MAX_FUNCS;
 * -ENOMEM. */
int pf_gopclntab_parse(const uint8_t *tab, size_t len, uint64_t text_start,
		       struct pf_go_func **out, size_t *n);

/* The stack pointer through function f (from pf_gopclntab_parse of the same table): calls
 * fn(ctx, pc, sp) for each range of f starting at pc where the function has sp bytes on the
 * stack below its return address (0 at its entry), in address order, never past f's end. The
 * table is the runtime's pcsp program (varint pairs: zig-zag value delta, pc delta in units of
 * the instruction quantum). 0; -ENOTSUP before Go 1.16 or for a function without one; -EINVAL
 * when it runs outside the buffer or past f; fn's non-zero return. */
int pf_gopclntab_sp(const uint8_t *tab, size_t len, const struct pf_go_func *f,
		    int (*fn)(void *ctx, uint64_t pc, int32_t sp), void *ctx);

#endif
