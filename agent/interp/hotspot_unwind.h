/* hotspot_unwind.h — the sampler's side of Java (HotSpot) frames: a JVM's frames walked by the
 * kernel (cpu_sampler.h, jvm_frame) and named from the JVM's own tables, in user space.
 *
 * Owns, per sampled process: whether it runs a HotSpot the agent reads (pf_hs_unwind_seen, at
 * the process's unwind-table loads: a mapped libjvm.so whose VMStructs tables parse,
 * hotspot_proc.h; a JVM still starting is looked at again at its samples, at most once a
 * second), the kernel walk's entry (pf_hs_unwind_kernel_entry: its code heaps, interpreter,
 * CodeBlob and interpreter-frame layout), the code cache's bounds, a cache of code addresses
 * to frame words and one of frame words to names, and why a JVM is not read or walked
 * ("jvm: libjvm.so exports no gHotSpotVMStructs").
 *
 * Frames: the kernel writes an interpreted frame as PF_JVM_INTERP_FRAME(Method*, bci) and
 * leaves compiled frames and stubs at their code addresses; pf_hs_unwind_note() rewrites,
 * in each drained sample, every user address in the code cache into a frame word
 * (cpu_sampler.h PF_JVM_FRAME): for compiled code the PcDesc that describes the address (the
 * nmethod's scope descriptors, hotspot_code.h; a caller's frame at the call just before its
 * return address), else its Method* (a native method's wrapper too); for code of no method
 * (stubs, adapters) its CodeBlob — looked up while the code is live. aggregate.c makes those
 * frames of kind PF_FRAME_JVM, the walker's name call names them: a PcDesc as the compiled
 * method "pkg.Class.method" at the line of its call into the methods inlined there, which
 * become the frame's inlined functions (innermost first, each with its file and line), the
 * descriptor in system_name; an interpreted frame as its method at its bytecode's line; a
 * blob by its name ("StubRoutines (1)"). A JVM the kernel does not walk (its entry could
 * not be made) keeps what the native walk found: its leaf.
 *
 * Bounds: PF_HS_UNWIND_LOOKUPS_PER_TICK lookups of new addresses per poll (an address not
 * looked up stays a native [anon] frame), PF_HS_UNWIND_PCS_MAX addresses and
 * PF_HS_UNWIND_NAMES_MAX names per process; an address is looked up again after
 * PF_HS_UNWIND_PC_KEEP_MS (the JVM frees and reuses code), a name no window used for two
 * minutes is dropped. Not thread-safe: one owner (the sampler's thread). */
#ifndef PF_AGENT_HOTSPOT_UNWIND_H
#define PF_AGENT_HOTSPOT_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "interp/interp_unwind.h"
#include "sampler/bpf/cpu_sampler.h" /* PF_JVM_FRAME */
#include "symbolize/symbolize.h"

struct pf_hs_unwind;

#define PF_HS_UNWIND_LOOKUPS_PER_TICK 512
#define PF_HS_UNWIND_PCS_MAX 16384
#define PF_HS_UNWIND_NAMES_MAX 16384
#define PF_HS_UNWIND_PC_KEEP_MS 10000
#define PF_HS_UNWIND_RETRY_MS 1000 /* a starting JVM (tables not set yet) looked at again */

struct pf_hs_unwind *pf_hs_unwind_new(void);
void pf_hs_unwind_free(struct pf_hs_unwind *u);

/* pid's executable mappings as sym captured them: 1 when pid runs a JVM whose tables were
 * read (now or before), 0 otherwise (no libjvm.so, off, unsupported, still starting). */
int pf_hs_unwind_seen(struct pf_hs_unwind *u, struct pf_symbolizer *sym, uint32_t pid);
/* True when pid was found to run a JVM, read or still starting. */
bool pf_hs_unwind_has(const struct pf_hs_unwind *u, uint32_t pid);
/* The user words of a drained sample of pid (leaf first): each address in the JVM's code
 * cache becomes its frame word (above), within the per-poll budget. */
void pf_hs_unwind_note(struct pf_hs_unwind *u, uint32_t pid, uint64_t *ips, size_t n);
/* The kernel's walk entry of pid (cpu_sampler.h struct pf_bpf_jvm_proc) once its JVM is read:
 * 1 the first time it is made (the caller writes it to jvm_procs), 0 otherwise (no JVM read,
 * made before, its interpreter not generated yet — looked at again a second later — or a
 * layout the kernel's walk cannot take: its frames are then named where the native walk
 * stops, the reason kept). */
int pf_hs_unwind_kernel_entry(struct pf_hs_unwind *u, uint32_t pid, struct pf_bpf_jvm_proc *e);
/* The walker's calls (interp_unwind.h) on a struct pf_hs_unwind: tick renews the lookup
 * budget; name fills the PF_FRAME_JVM frames; closed drops
 * names unused for two minutes. */
extern const struct pf_interp_walker pf_hs_walker;

struct pf_hs_unwind_stats {
	uint64_t processes;	     /* JVMs read now */
	uint64_t walked;	     /* of them, with their frames walked in the kernel */
	uint64_t unsupported;	     /* JVMs not read */
	uint64_t frames;	     /* code addresses turned into Java frames */
	uint64_t interp_frames;	     /* interpreted frames the kernel's walk wrote */
	uint64_t lookup_failed;	     /* code addresses of no blob (free space, a moving heap) */
	uint64_t named, name_failed; /* frame words named; that could not be */
	uint64_t names, names_bytes; /* names held now; their memory with the caches */
	char unsupported_msg[PF_INTERP_UNSUPPORTED_KEPT][PF_INTERP_MSG_LEN];
	unsigned n_unsupported_msg;
};
void pf_hs_unwind_stats(const struct pf_hs_unwind *u, struct pf_hs_unwind_stats *out);

#endif
