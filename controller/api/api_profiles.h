/* api_profiles.h — the profile store's query routes, dispatched from api.c's route() after
 * authentication (every route here is GET, role viewer). Plain functions over the parsed
 * request; unit-tested through pf_api_handle(). docs/api.md "Profiles" documents them:
 *
 *   GET /api/v1/profiles?service=&agent=&type=&from=&to=&trace_id=&limit=   metadata, newest
 *   GET /api/v1/profiles/{id}                    metadata with the trace links
 *   GET /api/v1/profiles/{id}/pprof              gzip'd pprof (`go tool pprof` reads it)
 *   GET /api/v1/profiles/{id}/flamegraph         d3-flame-graph tree {name,value,children}
 *   GET /api/v1/flamegraph?service=&agent=&type=&from=&to=&max_profiles=&max_nodes=&min_value=
 *   GET /api/v1/top?service=&agent=&type=&from=&to=&limit=&max_profiles=
 *   GET /api/v1/flamegraph/diff?service=&agent=&type=&from=&to=&base_from=&base_to=&...
 *   GET /api/v1/timeline?from=&to=&step=&type=...  summed weight per step
 *   GET /api/v1/labels?from=&to=...                resource attribute keys seen
 *   GET /api/v1/labels/{name}/values?from=&to=...  values of one key
 *   GET /api/v1/profile_types?from=&to=            types present, with units
 * Times are unix milliseconds. `profile_type` is an alias of `type`; repeated
 * match=<key>=<value> filter on resource attributes. Merged views merge every matching
 * profile (profstore/views.h); max_profiles is accepted (validated) and ignored. */
#ifndef PF_API_PROFILES_H
#define PF_API_PROFILES_H

#include <stdbool.h>
#include <stddef.h>

#include "api.h"

#define PF_API_PROF_LIST_DEFAULT 100
#define PF_API_PROF_LIST_MAX 1000
#define PF_API_PROF_MERGE_DEFAULT 200
#define PF_API_PROF_MERGE_MAX 5000
#define PF_API_PROF_SCAN_MAX 200000 /* matches counted before picking the ones merged */
#define PF_API_PROF_NODES_DEFAULT 50000
#define PF_API_PROF_NODES_MAX 1000000
#define PF_API_PROF_RANGE_DEFAULT_MS (3600 * 1000) /* from defaults to to - 1 h */
#define PF_API_TIMELINE_DEFAULT_POINTS 1000
#define PF_API_TIMELINE_MAX_POINTS 10000
#define PF_API_LABELS_MAX 1000       /* names per answer ("more": true beyond) */
#define PF_API_LABEL_VALUES_MAX 1000 /* values per answer */

/* Whether the path segments after /api/v1/ name one of the routes above. */
bool pf_api_profiles_match(const char seg[][160], size_t n);
/* Whether the request (method, full path such as "/api/v1/flamegraph") is one of the heavy
 * routes the server runs on the query pool (profstore/query_pool.h) instead of its event
 * loop: GET of the profile list, /profiles/{id}/flamegraph, /profiles/{id}/pprof,
 * /flamegraph, /flamegraph/diff and /top. The metadata route /profiles/{id} is cheap and
 * stays on the loop. The pool runs such a request through pf_api_handle() with a struct
 * pf_api whose store is the worker's own read-only connection (fleet and metrics NULL:
 * these routes use neither). */
bool pf_api_profiles_offload(const char *method, const char *path);
/* Handles a request pf_api_profiles_match() accepted; always fills resp. */
void pf_api_profiles_handle(struct pf_api *api, const struct pf_api_request *req,
			    struct pf_api_response *resp, const char seg[][160], size_t n);

#endif
