/* demangle.h — readable names for C++ (Itanium) and Rust (legacy and v0) symbols.
 *
 * Owns: the call into libiberty's demangler (cplus_demangle with DMGL_PARAMS | DMGL_ANSI, whose
 * automatic style tries Rust first, then the Itanium C++ ABI) and a bounded, 4-way
 * set-associative cache of its results keyed by the mangled name (positive and negative answers), so a steady
 * workload demangles each symbol once. Names that are not mangled ("main", kernel symbols) are
 * answered without the library.
 *
 * Not thread-safe: one owner (the symbolizer). */
#ifndef PF_AGENT_DEMANGLE_H
#define PF_AGENT_DEMANGLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pf_demangler;

struct pf_demangler_stats {
	uint64_t lookups;   /* pf_demangle() calls for names that look mangled */
	uint64_t hits;      /* answered from the cache */
	uint64_t demangled; /* library calls that produced a name */
	uint64_t failed;    /* library calls that did not (kept as negative entries) */
	uint64_t resets;    /* the cache's byte bound was reached and it started over */
	uint64_t bytes;     /* bytes of names held now */
	uint64_t cpu_ns;    /* thread CPU time in the library (misses only) */
};

/* slots: cache entries (rounded up to a power of two, 0 = 16384); max_bytes: bound on the names
 * held (0 = 4 MiB). NULL on ENOMEM. */
struct pf_demangler *pf_demangler_new(size_t slots, size_t max_bytes);
void pf_demangler_free(struct pf_demangler *d);

/* Whether name looks like a C++ or Rust mangled symbol ("_Z...", "_R..."). */
bool pf_demangle_is_mangled(const char *name);

/* The readable form of name, or NULL when name is not mangled or the demangler refused it.
 * The string belongs to d and stays valid until the next pf_demangle() call on d. */
const char *pf_demangle(struct pf_demangler *d, const char *name);

/* Uncached: a malloc'd readable form of name, or NULL (not mangled, refused, or ENOMEM). */
char *pf_demangle_dup(const char *name);

void pf_demangler_stats(const struct pf_demangler *d, struct pf_demangler_stats *out);

#endif
