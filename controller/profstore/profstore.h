/* profstore.h — the controller's embedded profile store, receiving side: the OTLP/HTTP
 * profiles receiver logic (POST /v1development/profiles) as a plain function over the request
 * bytes, and loading a stored profile back into a window for the views (flame.h) and the pprof
 * download. server.c calls pf_profstore_ingest_batch() on the receiver's writer threads (a
 * query_pool.h pool, a connection per thread) with the requests a writer took together, and
 * writes back what it fills; the API
 * (api/api_profiles.c) calls pf_profstore_load() and pf_profstore_merge(), on the query
 * pool's threads.
 *
 * Receiver (OTLP 1.x, "OTLP/HTTP" section of the specification):
 *  - body: a binary protobuf ExportProfilesServiceRequest (opentelemetry-proto v1.11.0
 *    profiles/v1development); Content-Type application/x-protobuf (JSON protobuf is answered
 *    415); Content-Encoding gzip accepted. The body as received and after decompression must
 *    fit max_bytes, else 413.
 *  - undecodable bytes: 400 with a google.rpc.Status {code 3 INVALID_ARGUMENT, message}.
 *  - each OTLP Profile (one process of the decoded window) is stored as its own row
 *    (store.h "Profiles") with its metadata and its detail (detail.h: locations and stacks
 *    stored once, its samples part per profile), from which pf_profstore_load() rebuilds it;
 *    with PF_PROFSTORE_BODY instead its body, that one profile re-encoded as a
 *    single-profile ExportProfilesServiceRequest and gzip'd, as before schema 14. A
 *    profile without samples is rejected and counted; success is 200 with an
 *    ExportProfilesServiceResponse: empty when everything was stored, else partial_success
 *    {rejected_profiles, error_message}. A request with no profile at all is a success.
 *  - idempotent: a profile whose (agent, profile_id) is stored already is a success and is
 *    not stored again (res->duplicates).
 *  - a store failure is 503 (retryable per OTLP) with a Status {code 14 UNAVAILABLE}.
 *
 * Content: with PF_PROFSTORE_STACKS (the default) each profile's distinct frame paths
 * (flame.h pf_flame_paths_build), its resource attributes and unit go to the store's content
 * tables (store.h), which the merged views read (views.h); the detail serves the
 * single-profile views and pprof downloads.
 *
 * Metadata taken from the resource attributes: service.name, process.pid,
 * process.executable.name (else the basename of process.executable.path), host.name,
 * profleet.agent.uid (the instance uid of the sending profleet agent; "" from other senders);
 * type "cpu" for the implicit CPU profile or a cpu period type, else the stored type
 * (pf_profstore_type_index); start and duration of the window; samples = the summed weight
 * of that type (sample counts for CPU profiles); the distinct trace links (trace_id, span_id)
 * of the samples.
 *
 * Several sample types (a pprof heap profile, an allocation capture): the profile is stored
 * with the type above and its weights, and every other sample type as a series of its own
 * (store.h pf_profile_series: the same stacks with that type's values), so that every type
 * is selectable in the merged views. */
#ifndef PF_PROFSTORE_H
#define PF_PROFSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/buf.h"
#include "pf/error.h"
#include "pf/profile.h"

struct pf_store;

#define PF_PROFSTORE_DEFAULT_MAX_BYTES ((size_t)16 << 20)
/* Cap on the memory a stored profile may take when it is decoded again for a view. */
#define PF_PROFSTORE_LOAD_MAX_BYTES ((size_t)256 << 20)
#define PF_PROFSTORE_GZIP_LEVEL 6
/* The receiver's writer pool (profstore/query_pool.h, started by main.c): threads that
 * decode and store in parallel, and the bound on requests waiting for them (count and the
 * bytes of their bodies) before the receiver answers 503 with Retry-After. */
#define PF_INGEST_THREADS 2
#define PF_INGEST_MAX_QUEUED 256
#define PF_INGEST_MAX_QUEUED_BYTES ((size_t)64 << 20)
/* Requests a writer takes from the queue at once and stores in one transaction (group
 * commit, pf_profstore_ingest_batch): under load one commit (one fsync) serves many. */
#define PF_INGEST_BATCH 32
#define PF_PROFSTORE_AGENT_ATTR "profleet.agent.uid"
/* Resource attributes indexed for ?capture_id= and ?trigger= (docs/capture-protocol.md). */
#define PF_PROFSTORE_CAPTURE_ATTR "profleet.capture.id"
#define PF_PROFSTORE_TRIGGER_ATTR "profleet.trigger"

struct pf_profstore_request {
	const uint8_t *body;
	size_t len;
	bool gzip;                /* Content-Encoding: gzip */
	const char *content_type; /* NULL = application/x-protobuf */
	size_t max_bytes;         /* 0 = PF_PROFSTORE_DEFAULT_MAX_BYTES */
	int64_t now_ms;
	/* Who the sender may name (opamp/credential.h), NULL: anyone. Called for every
	 * profile before anything is stored, with its profleet.agent.uid and
	 * profleet.capture.id (NULL when absent): -EACCES refuses the whole request (403
	 * PERMISSION_DENIED with why), another error answers 503. */
	int (*check)(void *ud, struct pf_store *st, const char *agent, const char *capture,
		     char *why, size_t why_len);
	void *check_ud;
	const char *agent_uid; /* profleet.agent.uid of profiles that name none, NULL: "" */
};

struct pf_profstore_result {
	int status;          /* HTTP status to answer */
	size_t accepted;     /* profiles stored or already stored (duplicates included) */
	size_t duplicates;   /* of them, already stored under the same agent and profile_id */
	size_t rejected;     /* profiles refused (empty) */
	uint64_t samples;    /* samples stored */
	size_t deleted;      /* profiles retention removed after the insert */
	char message[256];   /* why, for errors and partial success ("" on full success) */
};

/* Handles one request against st (retention as set with pf_store_profiles_set_retention).
 * Always fills res and appends the response body (protobuf, Content-Type
 * application/x-protobuf) to resp. Returns 0, or -ENOMEM when even the response could not
 * be built (answer 500 then). */
int pf_profstore_ingest(struct pf_store *st, const struct pf_profstore_request *req,
			struct pf_profstore_result *res, struct pf_buf *resp);
/* The same for n requests, answered as each alone would be (res[i], resps[i]), with the
 * profiles of all of them in one transaction (store.h, group commit): one commit for the
 * batch, and no answer says 200 before that commit. A request that fails to insert is
 * answered 503 and leaves the others in; a failed commit answers 503 to every request that
 * had profiles. -ENOMEM when some answer could not be built (that one answers 500). */
int pf_profstore_ingest_batch(struct pf_store *st, const struct pf_profstore_request *reqs,
			      size_t n, struct pf_profstore_result *res, struct pf_buf *resps);

/* Loads the stored profile `id` into a new window (free with pf_prof_window_free), from its
 * detail, or its body when it was stored with one. -ENOENT, -EBADMSG for a detail or body
 * that no longer decodes, -E2BIG, -ENOMEM, -EIO; err says. */
int pf_profstore_load(struct pf_store *st, int64_t id, struct pf_prof_window **out,
		      struct pf_error *err);

/* ---- Merged views. Each stored profile also gets, at ingest, its compact flame form
 * (flame.h "Compact form", at most PF_PROFSTORE_FLAME_MAX_BYTES, else none) in the store
 * (pf_store_profile_flame); merging reads that instead of gunzip + OTLP decode of the body.
 * Profiles without one (stored before schema 3, too large) or with one that does not check
 * out are merged from their body, with the same result. */
#define PF_PROFSTORE_FLAME_MAX_BYTES ((size_t)1 << 20)
#define PF_PROFSTORE_FLAME_GZIP_LEVEL 1

struct pf_flame;

/* Adds the stored profile `id` into slot of f, exactly as pf_profstore_load() followed by
 * pf_flame_add_window() would. 0; -ENOMEM only when the tree ran out of memory (stop
 * merging); any other negative errno: this profile could not be merged (-ENOENT, -EBADMSG,
 * -EINVAL, -EIO...). */
int pf_profstore_merge(struct pf_store *st, int64_t id, struct pf_flame *f, int slot);

/* Process-wide switch (tests and profstore-bench compare the paths): WRITE = ingest stores
 * compact forms, READ = pf_profstore_merge() uses them, STACKS = ingest stores the profile's
 * content (store.h: frames and stacks once, packed (stack, weight) pairs, rollups), which
 * the merged views (views.h) read. READ and STACKS by default. */
#define PF_PROFSTORE_COMPACT_WRITE 1u
#define PF_PROFSTORE_COMPACT_READ 2u
#define PF_PROFSTORE_STACKS 4u
/* BODY = ingest stores each profile's OTLP body (re-encoded, gzip'd) instead of its detail
 * (detail.h), as the store did before schema 14; for comparisons. */
#define PF_PROFSTORE_BODY 8u
void pf_profstore_set_compact(unsigned flags);
unsigned pf_profstore_compact(void);

/* The profile type name of a window (see above); never NULL. */
const char *pf_profstore_type(const struct pf_prof_window *w);
/* The index of the sample type a window is stored and shown as: -1 for a CPU profile (the
 * implicit one, or a cpu period type: weights are counts); else the type that
 * default_sample_type names, else the last type in bytes (pprof's and Pyroscope's choice:
 * inuse_space for a Go heap profile), else the first. */
int pf_profstore_type_index(const struct pf_prof_window *w);
/* The index of sample type `type` of w (NULL or "": pf_profstore_type_index; the stored
 * type's name: the same), -2 when w has no such type. */
int pf_profstore_type_find(const struct pf_prof_window *w, const char *type);
/* Makes every sample's count the value of sample type k (clamped at 0), so that the flame
 * graph of w shows that type; k -1: unchanged. 0, -EINVAL, -ENOMEM. */
int pf_profstore_pick(struct pf_prof_window *w, int k);
/* The unit of a window's weights: "samples" for the implicit CPU profile and a "samples"
 * sample type, else the unit of the stored type (pf_profstore_type_index: "bytes",
 * "nanoseconds", "count"; "" when none). And the unit to show for a stored type: unit when not
 * empty, else the usual one of that type (profiles stored before units were kept). */
const char *pf_profstore_unit(const struct pf_prof_window *w);
/* The unit of sample type k of w (-1: the CPU profile's) in the same sense. */
const char *pf_profstore_unit_of(const struct pf_prof_window *w, int k);
const char *pf_profstore_unit_guess(const char *type, const char *unit);

/* Converts up to max_rows profiles stored before the content tables from their bodies
 * (store.h pf_store_profiles_convert; the retention timer runs it). 1 while more wait. */
int pf_profstore_convert(struct pf_store *st, size_t max_rows, size_t *converted);

/* Encodes an ExportProfilesServiceResponse (rejected 0 and msg NULL: the empty message) and
 * a google.rpc.Status; exposed for tests. */
int pf_profstore_encode_response(int64_t rejected, const char *msg, struct pf_buf *out);
int pf_profstore_encode_status(int32_t code, const char *msg, struct pf_buf *out);

#endif
