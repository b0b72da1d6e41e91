/* python_unwind.h — the sampler's side of the kernel's Python walk.
 *
 * Owns, per sampled process: whether it runs CPython (pf_py_detect, once, at a sample 50 ms
 * after its first, a few detections per poll at most), the entry the kernel's walk reads
 * (struct pf_bpf_py_proc of cpu_sampler.h, translated and checked here from
 * struct pf_py_process), the names of its Python frames (pf_py_names, read with
 * process_vm_readv), and why a CPython process is not walked ("python: 3.7 unsupported").
 * The caller (the sampler, the only code touching the BPF maps) writes and deletes the kernel
 * entries this module hands it.
 *
 * Frames: the kernel puts one stack word PF_PY_FRAME(code object, instruction offset) in place
 * of each eval-loop frame (cpu_sampler.h); aggregate.c makes them frames of kind
 * PF_FRAME_PYTHON. Their names are read while the process lives: pf_py_unwind_note() at each
 * drained sample queues the words it has not named yet, the walker's tick names queued words
 * (bounded per call), and its name call fills a window's Python frames from those names
 * (naming any word still missing), so a process that exited mid-window keeps its names. A word
 * no window used in two closes is dropped.
 *
 * Not thread-safe: one owner (the sampler's thread). */
#ifndef PF_AGENT_PYTHON_UNWIND_H
#define PF_AGENT_PYTHON_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "interp/interp_unwind.h"
#include "sampler/bpf/cpu_sampler.h"
#include "pf/profile.h"
#include "python_proc.h"

struct pf_py_unwind;

#define PF_PY_UNWIND_DETECT_AFTER_MS 50 /* a process is looked at this long after its first
					 * sample: most short-lived ones are gone by then */
#define PF_PY_UNWIND_DETECTS_PER_TICK 8 /* detections per tick interval */
#define PF_PY_UNWIND_NAMES_PER_TICK 512 /* words named per tick */
#define PF_PY_UNWIND_UNSUPPORTED_KEPT PF_INTERP_UNSUPPORTED_KEPT
#define PF_PY_UNWIND_MSG_LEN PF_INTERP_MSG_LEN /* "pid N: " and the reason (cut at 120 bytes) */

/* names_max_bytes: the code-object cache of one process (0: 1 MiB). NULL and errno. */
struct pf_py_unwind *pf_py_unwind_new(size_t names_max_bytes);
void pf_py_unwind_free(struct pf_py_unwind *u);

/* A sample of pid at now_ms (monotonic): 1 when pid was found to run a supported CPython just
 * now and *out is its kernel entry (write it to py_procs), 0 otherwise (known already, not
 * Python, not due yet, unsupported). */
int pf_py_unwind_seen(struct pf_py_unwind *u, uint32_t pid, uint64_t now_ms,
		      struct pf_bpf_py_proc *out);
/* Whether pid was found to run a supported CPython (its kernel entry written). */
bool pf_py_unwind_has(const struct pf_py_unwind *u, uint32_t pid);
/* The user words of a drained sample of pid (leaf first): queues its Python frames to name. */
void pf_py_unwind_note(struct pf_py_unwind *u, uint32_t pid, const uint64_t *ips, size_t n);
/* The walker's calls (interp_unwind.h) on a struct pf_py_unwind: tick renews the detection
 * budget and names queued words; forget (the kernel drops its entry itself at exec and exit);
 * name fills the PF_FRAME_PYTHON frames (function: qualname or name, file, line) and marks the
 * names used; closed drops the ones unused for two closes. */
extern const struct pf_interp_walker pf_py_walker;

/* The kernel entry of a detected process: offsets checked (every frame field inside the read
 * window, aligned), ranges copied. 0, or -ENOTSUP when the layout does not fit the walk. */
int pf_py_unwind_layout(const struct pf_py_process *p, struct pf_bpf_py_proc *out);

#define PF_PY_UNWIND_MINORS 5 /* 3.9 .. 3.13 */

struct pf_py_unwind_stats {
	uint64_t processes;                     /* Python processes walked now */
	uint64_t by_minor[PF_PY_UNWIND_MINORS]; /* of them, 3.9 + i */
	uint64_t unsupported;                   /* CPython processes not walked now */
	uint64_t detected_total, detect_failed;  /* detections that found CPython; that failed */
	uint64_t named, name_failed;             /* words named; that could not be */
	uint64_t names_bytes;                    /* the code-object caches' memory */
	uint64_t words;                          /* names held now */
	/* the last unsupported processes, "pid 12: python: 3.7 unsupported" */
	char unsupported_msg[PF_PY_UNWIND_UNSUPPORTED_KEPT][PF_PY_UNWIND_MSG_LEN];
	unsigned n_unsupported_msg;
};
void pf_py_unwind_stats(const struct pf_py_unwind *u, struct pf_py_unwind_stats *out);
/* The detections' thread CPU time so far (set-up work for the overhead guard). */
uint64_t pf_py_unwind_detect_cpu_ns(const struct pf_py_unwind *u);

#endif
