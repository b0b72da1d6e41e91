/* views.h — the profile store's views over a selection of stored profiles (store.h
 * pf_store_profiles_select), for api_profiles.c on the query pool's threads: merged flame
 * graphs (every matching profile, no cap), the weight per time step (timeline), the resource
 * attribute keys and values seen (label pickers) and the profile types present.
 *
 * Merging reads packed (stack id, weight) pairs — rollups where the range covers whole hours
 * or minutes, single profiles at its edges — sums them per stack id, and adds each distinct
 * stack to the tree once, root first, from the stored frames. Profiles stored before the
 * content tables and not converted yet are merged from their compact form or body
 * (pf_profstore_merge), with the same result. pf_views_merge_profiles() is that per-profile
 * path over every matching profile: the reference the tests and profstore-bench compare
 * against.
 *
 * Owns nothing beyond a call. */
#ifndef PF_PROFSTORE_VIEWS_H
#define PF_PROFSTORE_VIEWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/buf.h"
#include "store.h"

struct pf_flame;

struct pf_merge_stats {
	size_t matched; /* profiles the filter matched */
	size_t merged;  /* of them, merged (the rest could not be read: failed) */
	size_t failed;
	size_t parts;   /* rollups and single profiles read */
	char unit[32];  /* of the merged type ("" when unknown) */
};

/* Merges every profile f matches (f->type set) into slot of fl. 0, -ENOMEM, or a store
 * error. */
int pf_views_merge(struct pf_store *st, const struct pf_profile_filter *f, struct pf_flame *fl,
		   int slot, struct pf_merge_stats *ms);
/* pf_views_merge() into fl and, from the same read of the store, into full (another node
 * cap, e.g. the whole tree a top table needs beside a bounded flame graph): full is filled
 * only when fl came out truncated (pf_flame_truncated); otherwise fl is the whole tree and
 * full stays empty. ms counts the profiles once. */
int pf_views_merge_both(struct pf_store *st, const struct pf_profile_filter *f,
			struct pf_flame *fl, struct pf_flame *full, int slot,
			struct pf_merge_stats *ms);
/* The same through each profile's compact form or body (pf_profstore_merge), in list order;
 * trace, match and attribute filters as pf_store_profiles_foreach takes them (no match). */
int pf_views_merge_profiles(struct pf_store *st, const struct pf_profile_filter *f,
			    struct pf_flame *fl, int slot, struct pf_merge_stats *ms);

/* Timeline: points[i] = the summed weight of the profiles starting in
 * [from + i * step, from + (i + 1) * step) (ms), i < n; zero-filled. */
int pf_views_timeline(struct pf_store *st, const struct pf_profile_filter *f, int64_t from_ms,
		      int64_t step_ms, size_t n, int64_t *points, char unit[32]);

/* Labels: the distinct resource attribute keys (name NULL) or the values of key `name` of the
 * profiles f matches (any type when f->type is empty), sorted, at most max; *more when there
 * were more. *out is an array of malloc'd strings (pf_views_strings_free). */
int pf_views_labels(struct pf_store *st, const struct pf_profile_filter *f, const char *name,
		    size_t max, char ***out, size_t *n, bool *more);
void pf_views_strings_free(char **s, size_t n);

/* The types with at least one profile (or rollup) in [f->from_ns, f->to_ns), sorted; each
 * with its unit. *types and *units are malloc'd arrays of malloc'd strings. */
int pf_views_types(struct pf_store *st, const struct pf_profile_filter *f, char ***types,
		   char ***units, size_t *n);

#endif
