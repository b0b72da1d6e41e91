/* hotspot_code.h — a JVM's code cache and methods, read from the process through the layout
 * hotspot_vm.h parsed.
 *
 * Owns the two lookups the Java walk and its names rest on, in user space (the kernel's walk
 * follows the same rules): an address to the CodeBlob holding it (the code heaps of
 * CodeCache::_heaps, each heap's segment map walked back to its block's start) with the
 * blob's name, frame size and, for a compiled method, its Method*; and a Method* to its
 * class, name and signature (Method -> ConstMethod -> ConstantPool -> holder Klass and the
 * pool's Symbols) and source file, and a bytecode index to its line. All memory is the profiled
 * process's: every read is bounded (PF_HS_HEAPS_MAX heaps, PF_HS_SEGMAP_HOPS_MAX hops, names cut at
 * their buffers) and every value checked before it is followed. Thread-safe (no state). */
#ifndef PF_AGENT_HOTSPOT_CODE_H
#define PF_AGENT_HOTSPOT_CODE_H

#include <stdint.h>

#include "hotspot_vm.h"

#define PF_HS_HEAPS_MAX 8	   /* code heaps looked at (JDK 17 has up to 3) */
#define PF_HS_SEGMAP_HOPS_MAX 4096 /* segment-map entries walked back to a block's start */
#define PF_HS_CLASS_MAX 256	   /* "java.util.HashMap", cut beyond */
#define PF_HS_METHOD_MAX 128	   /* "get", "<init>" */
#define PF_HS_SIG_MAX 256	   /* "(Ljava/lang/Object;)Ljava/lang/Object;" */

struct pf_hs_blob {
	uint64_t start;		   /* the CodeBlob */
	uint64_t code_begin;	   /* its first instruction */
	int32_t size;		   /* bytes, header included */
	int32_t frame_size;	   /* words; 0 for the interpreter and some stubs */
	uint64_t method;	   /* Method* of a compiled method ("nmethod") or of a native
				    * method's wrapper ("native nmethod"), else 0 */
	int32_t comp_level;	   /* 1–3 C1, 4 C2; -1 when unknown or not compiled */
	char name[PF_HS_NAME_MAX]; /* "nmethod", "Interpreter", a stub's name */
};

/* The blob holding pc. 0; -ENOENT when pc is outside the code cache or in free space of a
 * heap; -EINVAL for a heap or blob whose values do not hold together (the process changed
 * them while read, or the layout is not what was parsed); or the reader's error. */
int pf_hs_blob_find(const struct pf_hs_vm *vm, pf_hs_read_fn rd, void *ctx, uint64_t pc,
		    struct pf_hs_blob *out);

/* A code heap as the kernel's walk takes it: its reserved range [lo, hi), its segment map
 * (one byte per segment), log2 of its segment size. */
struct pf_hs_heap {
	uint64_t lo, hi, segmap;
	uint32_t log2_seg;
};

/* The code heaps (CodeCache::_heaps) into out[0, max), sorted by address. How many (0 while
 * the JVM has made none); -EINVAL for heaps that do not hold together (more than
 * PF_HS_HEAPS_MAX, overlapping, outside the code cache, a segment size past 2^4..2^16);
 * -ENOTSUP without pf_hs_vm_walkable(); or the reader's error. */
int pf_hs_heaps(const struct pf_hs_vm *vm, pf_hs_read_fn rd, void *ctx, struct pf_hs_heap *out,
		unsigned max);

/* The interpreter's code (AbstractInterpreter::_code's buffer) into [*lo, *hi). 0; -EAGAIN
 * before the JVM generated it; -EINVAL for a buffer past 1 GiB; -ENOTSUP as above; or the
 * reader's error. */
int pf_hs_interp_range(const struct pf_hs_vm *vm, pf_hs_read_fn rd, void *ctx, uint64_t *lo,
		       uint64_t *hi);

struct pf_hs_method {
	char klass[PF_HS_CLASS_MAX]; /* dotted: "java.util.HashMap" */
	char name[PF_HS_METHOD_MAX]; /* "get" */
	char sig[PF_HS_SIG_MAX];     /* the descriptor: "(Ljava/lang/Object;)Ljava/lang/Object;" */
	char file[PF_HS_METHOD_MAX]; /* "HashMap.java"; "" when the class does not say */
};

/* The names of Method* method. 0; -EINVAL for a pointer chain that does not hold together
 * (an index past its pool, a pool of more than 65536 slots, a symbol holding a NUL), or the
 * reader's error. */
int pf_hs_method_name(const struct pf_hs_vm *vm, pf_hs_read_fn rd, void *ctx, uint64_t method,
		      struct pf_hs_method *out);

/* The source line of bytecode index bci in Method* method, from its compressed line number
 * table (after the method's bytecodes; pairs of bci and line deltas): the line of the nearest
 * entry at or before bci, as the JVM itself answers. 0 with *line set; -ENOENT when the
 * method keeps no table, bci is past its bytecodes or no entry precedes it; -EINVAL for a
 * table without its end within PF_HS_LINE_PAIRS_MAX pairs; or the reader's error. */
#define PF_HS_LINE_PAIRS_MAX 65536
int pf_hs_method_line(const struct pf_hs_vm *vm, pf_hs_read_fn rd, void *ctx, uint64_t method,
		      int32_t bci, uint32_t *line);

/* Scope descriptors of an nmethod (b from pf_hs_blob_find): what the compiler recorded of the
 * methods its code runs at a point, inlined ones included. */
#define PF_HS_PCDESCS_MAX 65536 /* PcDesc entries of one nmethod looked through */
#define PF_HS_SCOPES_MAX 16	/* inlining depth read */

struct pf_hs_scope {
	uint64_t method; /* Method* */
	int32_t bci;	 /* bytecode index; -1 at the method's entry */
};

/* The address of the PcDesc that describes pc: the first recorded point past it with a scope
 * (as the JVM's own sampling does for a pc that is no call site). 0; -ENOENT when none
 * follows pc; -ENOTSUP when b is no nmethod or vm lacks the fields (pf_hs_vm_scopes); -EINVAL
 * for regions that do not lie inside b; or the reader's error. */
int pf_hs_pcdesc_find(const struct pf_hs_vm *vm, pf_hs_read_fn rd, void *ctx,
		      const struct pf_hs_blob *b, uint64_t pc, uint64_t *pcdesc);
/* The scopes of PcDesc pcdesc of b into out[0, max): innermost first (the method the code
 * was in), then each method it was inlined into, the last being b's own. How many (>= 1);
 * -ENOENT for a PcDesc without a scope; -EINVAL for a PcDesc not of b or data that does not
 * hold together (a metadata index past its array, a sender chain that loops); -ENOTSUP as
 * above; or the reader's error. */
int pf_hs_scopes_at(const struct pf_hs_vm *vm, pf_hs_read_fn rd, void *ctx,
		    const struct pf_hs_blob *b, uint64_t pcdesc, struct pf_hs_scope *out,
		    unsigned max);

#endif
