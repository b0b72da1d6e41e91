/* detail.h — a stored profile's exact content without its OTLP body: what the single-profile
 * views (flame graph, top, pprof download, captures, span profiles, ?trace_id= cuts) read,
 * split into the parts that repeat from profile to profile and the part that does not.
 *
 *  - locations: one per frame of the process, its whole pf_prof_frame (address, kind,
 *    function, system name, file, line, inlined functions) with its mapping (range, offset,
 *    path, build id), as canonical bytes. The store keeps each distinct one once.
 *  - stacks: each stack of the process as indices into those locations, leaf first; the
 *    store keeps each distinct sequence of location ids once.
 *  - the rest ("samples part"): the window's header (times, frequency, lost samples, host,
 *    sample and period types, period, default type), the process's pid, profile_id,
 *    resource attributes and original payload, and each sample: its stack (an index into
 *    the stacks), tid, thread name, count, timestamps (delta-encoded), trace link, values,
 *    event values and labels.
 *
 * pf_detail_split() builds the three from one process of a window; pf_detail_build() makes a
 * window again from the samples part and the stacks' locations, as the store hands them back,
 * with the same frames, stacks and samples (frames in the order the stacks first use them,
 * mappings shared by equal content). Both are plain functions over bytes; the decoders check
 * every length and index against the bytes and the counts they were given (-EBADMSG). */
#ifndef PF_PROFSTORE_DETAIL_H
#define PF_PROFSTORE_DETAIL_H

#include <stddef.h>
#include <stdint.h>

#include "pf/buf.h"
#include "pf/error.h"
#include "pf/profile.h"
#include "store.h"

/* Bound on what a stored detail may decode into (arena bytes). */
#define PF_DETAIL_MAX_BYTES ((size_t)256 << 20)

struct pf_detail_split {
	struct pf_buf locs;	     /* the location keys, back to back */
	struct pf_profile_span *loc; /* n_locs: one per frame of the process */
	size_t n_locs;
	uint32_t *stack_locs;	       /* all stacks' location indices, back to back */
	struct pf_profile_span *stack; /* n_stacks: into stack_locs */
	size_t n_stacks;
	struct pf_buf samples; /* the samples part */
};

/* Splits process `proc` of w. -ENOMEM, -EINVAL (an index out of range, err says). Release
 * with pf_detail_split_release() whatever it returns. */
int pf_detail_split(const struct pf_prof_window *w, size_t proc, struct pf_detail_split *out,
		    struct pf_error *err);
void pf_detail_split_release(struct pf_detail_split *s);

/* A new window (free with pf_prof_window_free) of one process from a samples part and its
 * n_stacks stacks. -EBADMSG when the bytes do not check out, -E2BIG past
 * PF_DETAIL_MAX_BYTES, -ENOMEM. The stacks are the store's (pf_store_profile_detail). */
int pf_detail_build(const uint8_t *samples, size_t len, const struct pf_profile_dstack *stacks,
		    size_t n_stacks, struct pf_prof_window **out, struct pf_error *err);

#endif
