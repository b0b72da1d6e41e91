/* v8_unwind.h — the sampler's side of the kernel's V8 walk.
 *
 * Owns, per sampled process: whether it runs a V8 the agent reads (pf_v8_unwind_seen, at the
 * process's first unwind-table load: a mapped `node`/`libnode.so` with the postmortem
 * constants, v8_proc.h), the entry the kernel's walk reads (struct pf_bpf_v8_proc of
 * cpu_sampler.h) and the span of V8's builtins the unwinder marks as V8 code, the names of
 * its JS frames (v8_names.h), and why a node process is not walked ("v8: no v8dbg_ symbols").
 *
 * Frames: the kernel writes PF_V8_FRAME(SharedFunctionInfo) in place of a JS frame's address;
 * aggregate.c makes them frames of kind PF_FRAME_V8JS. pf_v8_unwind_note() at each drained
 * sample names the words it has not seen yet (PF_V8_UNWIND_NAMES_PER_TICK per poll, the rest
 * when a window needs them), the walker's name call fills a window's JS frames. Names are cached
 * per process by word, at most PF_V8_UNWIND_WORDS_MAX of them; one that no sample or window
 * used for two minutes is dropped. A SharedFunctionInfo the garbage collector moved leaves a
 * stale entry until then: best effort (v8_names.h).
 *
 * Not thread-safe: one owner (the sampler's thread). */
#ifndef PF_AGENT_V8_UNWIND_H
#define PF_AGENT_V8_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "interp/interp_unwind.h"
#include "pf/profile.h"
#include "sampler/bpf/cpu_sampler.h"
#include "symbolize/symbolize.h"

struct pf_v8_unwind;

#define PF_V8_UNWIND_NAMES_PER_TICK 512
#define PF_V8_UNWIND_WORDS_MAX 16384 /* names cached per process */
#define PF_V8_UNWIND_UNSUPPORTED_KEPT PF_INTERP_UNSUPPORTED_KEPT
#define PF_V8_UNWIND_MSG_LEN PF_INTERP_MSG_LEN

struct pf_v8_unwind *pf_v8_unwind_new(void);
void pf_v8_unwind_free(struct pf_v8_unwind *u);

/* pid's executable mappings as sym captured them: 1 when pid runs a V8 the walk reads — *out
 * its kernel entry (write it to v8_procs), [*start, *end) its builtins in the process (0, 0:
 * unknown) —, 0 otherwise (not node, known already, off, unsupported). */
int pf_v8_unwind_seen(struct pf_v8_unwind *u, struct pf_symbolizer *sym, uint32_t pid,
		      struct pf_bpf_v8_proc *out, uint64_t *start, uint64_t *end);
/* True when pid was found to run V8. */
bool pf_v8_unwind_has(const struct pf_v8_unwind *u, uint32_t pid);
/* The user words of a drained sample of pid (leaf first): names its new JS frames. */
void pf_v8_unwind_note(struct pf_v8_unwind *u, uint32_t pid, const uint64_t *ips, size_t n);
/* The walker's calls (interp_unwind.h) on a struct pf_v8_unwind: tick renews the naming
 * budget; name fills the PF_FRAME_V8JS frames (function, "(anonymous)" for a function without
 * a name; file, the script's name; line); closed drops names unused for two minutes. */
extern const struct pf_interp_walker pf_v8_walker;

struct pf_v8_unwind_stats {
	uint64_t processes;          /* node processes walked now */
	uint64_t unsupported;        /* node processes not walked */
	uint64_t named, name_failed; /* words named; that could not be */
	uint64_t words, names_bytes; /* names held now; their memory */
	char unsupported_msg[PF_V8_UNWIND_UNSUPPORTED_KEPT][PF_V8_UNWIND_MSG_LEN];
	unsigned n_unsupported_msg;
	char version[32]; /* V8's version of the last process detected ("11.3.244") */
};
void pf_v8_unwind_stats(const struct pf_v8_unwind *u, struct pf_v8_unwind_stats *out);

#endif
