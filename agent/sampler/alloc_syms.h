/* alloc_syms.h — where a process's allocator entry points are, for the allocation probes.
 *
 * Owns: reading /proc/PID/maps for the files the process maps executable, and in each one
 * that defines `malloc` (glibc's libc, jemalloc, tcmalloc, a statically linked program; never
 * the dynamic loader, whose own malloc serves only its start-up) the file offsets of malloc,
 * calloc, realloc, free, posix_memalign, aligned_alloc, memalign, valloc, pvalloc and cfree
 * from its .dynsym, else .symtab, each with its PF_ALLOC_FN_* kind (cpu_sampler.h). Offsets
 * shared by two names (aliases) are kept once. An offset is the function's entry, or on x86_64
 * a few bytes past it where its prologue begins with an instruction the kernel would have to
 * single-step and what it does cannot matter to the probe (alloc_syms.c probe_point). Paths are given as /proc/PID/root/<path>, so
 * they name the file in the process's own mount namespace. No BPF here. */
#ifndef PF_AGENT_ALLOC_SYMS_H
#define PF_AGENT_ALLOC_SYMS_H

#include <stddef.h>
#include <stdint.h>

#include "pf/error.h"

#define PF_ALLOC_SYMS_MAX 10	 /* entry points looked for per file */
#define PF_ALLOC_FILES_MAX 4	 /* allocator files probed per process */
#define PF_ALLOC_MAPS_LINES 65536 /* lines of /proc/PID/maps read at most */
#define PF_ALLOC_SYMS_SCAN (4u << 20) /* symbols looked at per table */
#define PF_ALLOC_SECTIONS_MAX 65536  /* sections looked at per file */

struct pf_alloc_file {
	char path[4096 + 32]; /* /proc/PID/root/... */
	const char *base;     /* its file name, inside path */
	size_t n;
	uint64_t off[PF_ALLOC_SYMS_MAX];	/* file offsets */
	uint64_t kind[PF_ALLOC_SYMS_MAX];	/* PF_ALLOC_FN_* */
	const char *name[PF_ALLOC_SYMS_MAX]; /* static strings */
};

/* The entry points of one ELF file at path (readable by the agent). 0 (out->n may be 0: the
 * file defines no malloc), -errno when it cannot be read (err says). */
int pf_alloc_syms_file(const char *path, struct pf_alloc_file *out, struct pf_error *err);

/* The allocator files of pid into out[0, max): *n of them. 0 (*n may be 0: nothing maps an
 * allocator the probes know), -ESRCH (no such process), -errno (err says). */
int pf_alloc_syms_find(uint32_t pid, struct pf_alloc_file *out, size_t max, size_t *n,
		       struct pf_error *err);

#endif
