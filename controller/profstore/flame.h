/* flame.h — the profile store's views as plain functions: a flame-graph tree built from
 * profile windows (pf/profile.h), merged over any number of windows, turned into the JSON
 * d3-flame-graph takes, into a "top functions" table (self and total), and into a diff of two
 * ranges. No lws, no SQLite: unit-tested on hand-made windows.
 *
 * Owns one struct pf_flame: a call tree whose root is "all", each node a frame name reached
 * from the root by a path of names (frames root first, leaf last), with two value slots —
 * slot 0 the profile or range asked for, slot 1 the base of a diff. A node's value is the
 * weight of the samples whose stack passes through it (its "total"); its self is the weight
 * of samples whose leaf it is. A sample's weight is its count.
 *
 * Bounded: the tree holds at most max_nodes nodes; a stack that would need more stops at the
 * deepest node it already has, whose self takes the weight, and the tree is marked truncated
 * (values stay exact at every node that exists). */
#ifndef PF_PROFSTORE_FLAME_H
#define PF_PROFSTORE_FLAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/buf.h"
#include "pf/profile.h"

#define PF_FLAME_ROOT "all"
#define PF_FLAME_SLOTS 2
#define PF_FLAME_NAME_MAX 512 /* frame names are cut to this many bytes */
/* A node's kind when no frame kind is known (compact forms carry none): no "type" in JSON. */
#define PF_FLAME_KIND_NONE 0xffu

struct pf_flame;

/* NULL with errno ENOMEM. max_nodes >= 1 (the root). */
struct pf_flame *pf_flame_new(size_t max_nodes);
void pf_flame_free(struct pf_flame *f);

/* Adds every sample of every process of w into slot. 0, -EINVAL (bad slot or an index out of
 * range in w), -ENOMEM. */
int pf_flame_add_window(struct pf_flame *f, const struct pf_prof_window *w, int slot);
/* Adds one stack given root first (names[0] is the outermost caller, names[n-1] the leaf). */
int pf_flame_add_stack(struct pf_flame *f, const char *const *names, size_t n, uint64_t weight,
		       int slot);

/* Interns a frame name into f (cut to PF_FLAME_NAME_MAX - 1 bytes) for pf_flame_add_path. */
int pf_flame_name(struct pf_flame *f, const char *s, size_t n, uint32_t *id);
/* Adds one path of interned names root first; kinds (may be NULL: unknown) gives each
 * frame's enum pf_frame_kind, which a node takes from the path that creates it. -EINVAL for an
 * id f never gave. */
int pf_flame_add_path(struct pf_flame *f, const uint32_t *names, const uint8_t *kinds, size_t n,
		      uint64_t weight, int slot);

/* ---- Distinct paths: what pf_flame_add_window() would add for one process, as the distinct
 * (name, kind) frames and the distinct root-first paths over them with their summed weights,
 * both in first-occurrence order (the profile store keeps stacks in this form). Adding each
 * path once with pf_flame_add_path gives the tree pf_flame_add_window() gives (node cap
 * aside: then which nodes exist depends on the order of insertion). */
struct pf_flame_path_frame {
	char *name; /* display name (pf_flame_frame_name), at most PF_FLAME_NAME_MAX - 1 bytes */
	uint8_t kind;
};
struct pf_flame_path {
	const uint32_t *ids; /* indices into frames, root first */
	uint32_t n;
	uint64_t weight; /* > 0 */
};
struct pf_flame_paths {
	size_t n_frames, n_stacks;
	struct pf_flame_path_frame *frames;
	struct pf_flame_path *stacks;
	uint32_t *ids; /* storage of the paths */
	/* pf_flame_paths_build_types only: the summed value of each sample type per stack
	 * (negative values count 0), type_weights[stack * n_types + type]; else 0 and NULL. */
	size_t n_types;
	uint64_t *type_weights;
};
/* 0; -EINVAL for an index out of range in p, -E2BIG for a stack deeper than
 * PF_FLAME_COMPACT_MAX_DEPTH, -ENOMEM. ps is empty on error. */
int pf_flame_paths_build(const struct pf_prof_process *p, struct pf_flame_paths *ps);
/* The same with the weight of every sample type of w (p one of its processes): the paths
 * of the samples with a non-zero value of any type, each stack's weight the sum of its
 * counts (0 when only other types weigh) and its type_weights. */
int pf_flame_paths_build_types(const struct pf_prof_window *w, const struct pf_prof_process *p,
			       struct pf_flame_paths *ps);
void pf_flame_paths_release(struct pf_flame_paths *ps);

/* The name a frame gets in the tree: the function name, else "<mapping basename>+0x<file
 * offset>", else "0x<address>". Writes at most len bytes (NUL included). */
void pf_flame_frame_name(const struct pf_prof_process *p, const struct pf_prof_frame *fr,
			 char *buf, size_t len);

/* ---- Compact form: what pf_flame_add_window() would add for one process, pre-aggregated so
 * that merged views need neither gunzip nor an OTLP decode (profstore.c stores one per
 * profile at ingest). Bytes, little-endian, varints LEB128:
 *   "PFL1", 8-byte FNV-1a 64 of everything after these 12 bytes,
 *   n_strings, then per string: length (< PF_FLAME_NAME_MAX, no NUL), bytes — the frame
 *     names as pf_flame_frame_name() gives them, in order of first use;
 *   n_stacks, then per distinct stack (first-occurrence order of its samples): weight (sum of
 *     the counts of its samples, > 0), shared (number of leading names equal to the previous
 *     stack's), rest, then rest string indices: the names root first after the shared ones.
 * Samples with the same name path are one stack: inserting them once with the summed weight
 * at the place of the first gives the same tree, node cap and truncation included (a later
 * duplicate creates no node: either its path exists already or the cap was full then). */
#define PF_FLAME_COMPACT_MAX_BYTES ((size_t)4 << 20)
#define PF_FLAME_COMPACT_MAX_DEPTH 65536u

/* Appends the compact form of p to out. max_bytes caps the form (0 or more than
 * PF_FLAME_COMPACT_MAX_BYTES = that). 0; -E2BIG over the cap, a stack deeper than
 * PF_FLAME_COMPACT_MAX_DEPTH or out's cap; -EINVAL for an index out of range in p (the old
 * path then fails the same way); -ENOMEM. On error out is left as it was. */
int pf_flame_compact_encode(const struct pf_prof_process *p, size_t max_bytes,
			    struct pf_buf *out);
/* Adds a compact form into slot, exactly as pf_flame_add_window() would have added the
 * process it was made from. The whole form is checked first (magic, checksum, lengths, every
 * index): -EBADMSG and the tree untouched when anything is off. -EINVAL, -ENOMEM. */
int pf_flame_add_compact(struct pf_flame *f, const void *blob, size_t len, int slot);

uint64_t pf_flame_total(const struct pf_flame *f, int slot); /* the root's value */
size_t pf_flame_node_count(const struct pf_flame *f);
bool pf_flame_truncated(const struct pf_flame *f);

/* Appends the tree as JSON: {"name":"all","value":N,"children":[...]} with children sorted by
 * name and leaves without "children"; a node made from a frame of known kind has "type" (its
 * profile.frame.type: "native", "kernel", "go", "cpython") before "value". With diff, every node also has "base" (slot 1) and
 * "delta" = value - round(base * total / base_total) (base scaled to the same total, so a
 * range with more samples overall does not turn everything red; = value when the base is
 * empty). min_value > 0 leaves out nodes whose value and base are both below it. 0, -E2BIG
 * from out's cap, -ENOMEM. */
int pf_flame_json(const struct pf_flame *f, bool diff, uint64_t min_value, struct pf_buf *out);

struct pf_flame_fn {
	const char *name; /* owned by the tree */
	uint64_t self;    /* weight of samples where it is the leaf */
	uint64_t total;   /* weight of samples with it anywhere on the stack (counted once) */
};
/* The functions of slot, sorted by self (then total, then name), at most limit (0 = all).
 * *out is malloc'd (free it), its names owned by f. 0 or -ENOMEM. */
int pf_flame_top(const struct pf_flame *f, int slot, size_t limit, struct pf_flame_fn **out,
		 size_t *n);

#endif
