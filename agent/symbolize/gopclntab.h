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
};

/* True when tab[0, len) starts like a pclntab header of a version this module reads. */
int pf_gopclntab_looks_like(const uint8_t *tab, size_t len);

/* Parses the pclntab at tab[0, len) (the .gopclntab section's bytes, or where the header
 * was found in .data.rel.ro). text_start is the address of the binary's .text section: Go
 * 1.18+ tables give entries relative to it. Fills *out (malloc'd, *n entries in the table's
 * order, ascending) with the functions that have a name. 0; -EINVAL for a table that is not
 * one or does not fit in len; -ENOTSUP for an unknown version; -E2BIG past PF_GO_MAX_FUNCS;
 * -ENOMEM. */
int pf_gopclntab_parse(const uint8_t *tab, size_t len, uint64_t text_start,
		       struct pf_go_func **out, size_t *n);

#endif
