/* v8_names.h — V8 functions named from a live process's heap.
 *
 * Owns reading, with bounded process_vm_readv calls, what a JS frame's SharedFunctionInfo
 * (the word the kernel's walk writes, cpu_sampler.h PF_V8_FRAME) says: the function's name —
 * a String (sequential one- or two-byte, cons, thin; at most PF_V8_NAME_MAX bytes and 8 levels
 * of cons), or, for a compiled function of V8 11 (pf_v8_file_scope_info_ok), the name kept in
 * its ScopeInfo — and its Script's name (the file or URL) and the line where the function
 * starts (its ScopeInfo's start position, through the Script's line ends or, when V8 has not
 * computed them, its one-byte source, at most PF_V8_SOURCE_MAX bytes). Every object's map is
 * checked to be of the expected instance type before it is read.
 *
 * The line starts of the last PF_V8_SCRIPTS scripts are cached, keyed by the Script's address
 * and its source length. An address is the object's only until the garbage collector moves
 * or frees it: a name read after that may be another function's, or none (the callers cache
 * names by address and drop them when unused: best effort, as with any profiler reading a
 * moving heap from outside). Not thread-safe: one owner. */
#ifndef PF_AGENT_V8_NAMES_H
#define PF_AGENT_V8_NAMES_H

#include <stddef.h>
#include <stdint.h>

#include "v8_proc.h"

#define PF_V8_NAME_MAX 128
#define PF_V8_FILE_MAX 256
#define PF_V8_SCRIPTS 8
#define PF_V8_SOURCE_MAX (4u << 20)
#define PF_V8_LINE_ENDS_MAX (1u << 18)

struct pf_v8_frame {
	char name[PF_V8_NAME_MAX]; /* "" for an anonymous function */
	char file[PF_V8_FILE_MAX]; /* "" when the script has no name */
	uint32_t line;             /* 1-based line of the function's start; 0 unknown */
};

struct pf_v8_names;

/* NULL and errno. f is copied. */
struct pf_v8_names *pf_v8_names_new(const struct pf_v8_file *f);
void pf_v8_names_free(struct pf_v8_names *n);

/* The function of the SharedFunctionInfo at tagged address sfi in process pid. 0; -ENOENT
 * when the object there is no SharedFunctionInfo (moved, freed); -ESRCH, -EPERM, -EFAULT
 * from the reads. */
int pf_v8_names_resolve(struct pf_v8_names *n, int pid, uint64_t sfi, struct pf_v8_frame *out);

/* The reads of another process's memory (process_vm_readv by default): 0, or a negative
 * errno (-EFAULT for an address that is not mapped). A fuzz driver reads from its input. */
typedef int (*pf_v8_read_fn)(void *ctx, int pid, uint64_t addr, void *buf, size_t len);
void pf_v8_names_set_reader(struct pf_v8_names *n, pf_v8_read_fn fn, void *ctx);

/* The memory the script cache holds. */
size_t pf_v8_names_bytes(const struct pf_v8_names *n);

#endif
