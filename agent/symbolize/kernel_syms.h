/* kernel_syms.h — the symbolizer's kernel frames.
 *
 * Owns: the kernel symbol table from /proc/kallsyms (and the kernel build id from
 * /sys/kernel/notes), loaded once as one sorted array of 8-byte (address offset, name offset)
 * entries and one string blob; or, with a resolver (pf_symbolizer_set_kernel_resolver), the
 * kernel's own %pS names asked a batch of new addresses at a time and cached by address
 * (4096 entries, direct-mapped). A resolver that fails is dropped for /proc/kallsyms. */
#ifndef PF_AGENT_KERNEL_SYMS_H
#define PF_AGENT_KERNEL_SYMS_H

#include <stddef.h>
#include <stdint.h>

struct pf_prof_frame;
struct pf_prof_window;
struct pf_symbolizer;

/* Loads /proc/kallsyms once (timed for the stats); no-op after the first call. */
void ksyms_load(struct pf_symbolizer *sym);
/* The name of the kernel text symbol holding addr, or NULL. */
const char *ksyms_find(struct pf_symbolizer *sym, uint64_t addr);
/* The address of the i-th loaded symbol (in address order). */
uint64_t ksyms_addr(const struct pf_symbolizer *sym, size_t i);
/* Resolver mode: the kernel build id and where kernel text starts, read once. */
void ksyms_info(struct pf_symbolizer *sym);
/* Names the kernel frames among frames[0, n) through the resolver. 0, -ENOMEM, or the
 * resolver's error (frames left unnamed). */
int ksyms_resolve_frames(struct pf_symbolizer *sym, struct pf_prof_window *w,
			 struct pf_prof_frame *frames, size_t n);

#endif
