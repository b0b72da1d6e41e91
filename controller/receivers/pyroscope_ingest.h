/* pyroscope_ingest.h — Pyroscope's push API, `POST /ingest`, as a plain function over the
 * request's query, headers and body: it turns what a Pyroscope SDK (or any client of that
 * wire format) sends into a window (pf/profile.h) and hands it to the profile store through
 * its one ingest entry point (profstore.h pf_profstore_ingest, as an OTLP request), so these
 * profiles are stored, deduplicated, retained and merged exactly as OTLP ones.
 *
 * Query (values URL-decoded):
 *  - name (required): "<app>[.<type>]{k=v,...}". <app> is 1.. of [A-Za-z0-9_.:/-]; labels
 *    are key [A-Za-z0-9_.]+, value UTF-8 without control characters, ',' or '}' (spaces
 *    around both trimmed; an empty value drops the label; a key given twice: the last
 *    wins); at most PF_PYROSCOPE_MAX_LABELS labels, the whole name at most
 *    PF_PYROSCOPE_MAX_NAME bytes. For the text formats the last dot-separated part of <app>
 *    is the profile type (below; no dot: cpu); for pprof the whole <app> is the
 *    application and the profile's own sample types are the types.
 *  - from, until: unix time in seconds (values past 1e11, 1e14, 1e17 are read as
 *    milliseconds, microseconds, nanoseconds); absent: now. until before from is an error.
 *  - sampleRate: 1..PF_PYROSCOPE_MAX_SAMPLE_RATE Hz, default 100 (text formats).
 *  - spyName: kept as the resource attribute pyroscope.spy; "gospy" and "pyspy" mark the
 *    frames of the text formats go and cpython.
 *  - format: folded (default), lines or pprof; a multipart/form-data body is pprof whatever
 *    format says. units and aggregationType are accepted and not used (the type decides).
 *
 * Bodies (after Content-Encoding gzip, bounded by max_bytes as sent and decompressed):
 *  - folded: lines "root;...;leaf <count>" (the count after the last space, decimal);
 *  - lines: one sample per line "root;...;leaf";
 *    (both: '\r' before '\n' ignored, empty lines and empty frame names skipped, UTF-8,
 *    at most PF_PYROSCOPE_MAX_DEPTH frames a stack, PF_PYROSCOPE_MAX_FRAMES distinct frame
 *    names and PF_PYROSCOPE_MAX_STACKS distinct stacks);
 *  - pprof: a perftools.profiles.Profile, gzip'd or not (proto/codec/pprof_codec.h), as the
 *    raw body or as the part `profile` of a multipart/form-data body (RFC 7578; at most
 *    PF_PYROSCOPE_MAX_PARTS parts), with an optional part `sample_type_config`: a JSON object
 *    {"<sample type>": {"display-name": "...", "units": ..., ...}}, whose display-name renames
 *    that sample type. A part `prev_profile` (cumulative profiles of old SDKs) is refused.
 *
 * Stored: one profile per process of the window (pprof: per pid label), resource attributes
 * service.name = the label service_name when given, else <app>; every other label as
 * itself; pyroscope.spy. Text formats: type cpu is the implicit CPU profile (frequency =
 * sampleRate, weight = count); wall is wall/nanoseconds (count × 1e9 / sampleRate); the
 * others are one sample type each (alloc_objects/count, inuse_space/bytes, goroutine/count,
 * mutex_count → contentions/count, mutex_duration → delay/nanoseconds, ...;
 * pf_pyroscope_type_names()). Time range [from, until]; pprof keeps its own time when it has
 * one. */
#ifndef PF_PYROSCOPE_INGEST_H
#define PF_PYROSCOPE_INGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/buf.h"
#include "pf/error.h"
#include "pf/profile.h"

struct pf_store;

#define PF_PYROSCOPE_MAX_NAME 1024
#define PF_PYROSCOPE_MAX_LABELS 64
#define PF_PYROSCOPE_MAX_SAMPLE_RATE 1000000u
#define PF_PYROSCOPE_MAX_DEPTH 4096
#define PF_PYROSCOPE_MAX_FRAMES (1u << 18)
#define PF_PYROSCOPE_MAX_STACKS (1u << 18)
#define PF_PYROSCOPE_MAX_PARTS 16
#define PF_PYROSCOPE_SPY_ATTR "pyroscope.spy"

struct pf_pyroscope_request {
	size_t n_args;
	const char *const *args; /* URL-decoded "key=value" pieces of the query */
	const uint8_t *body;
	size_t len;
	const char *content_type; /* may be NULL */
	bool gzip;		  /* Content-Encoding: gzip */
	size_t max_bytes;	  /* 0: PF_PROFSTORE_DEFAULT_MAX_BYTES */
	int64_t now_ms;
	/* Passed on to pf_profstore_ingest (profstore.h): who may be named. */
	int (*check)(void *ud, struct pf_store *st, const char *agent, const char *capture,
		     char *why, size_t why_len);
	void *check_ud;
	const char *agent_uid;
};

struct pf_pyroscope_result {
	int status;	   /* HTTP status to answer */
	size_t stored;	   /* profiles accepted by the store (duplicates included) */
	size_t rejected;   /* profiles the store refused (no samples) */
	uint64_t samples;  /* samples stored */
	char message[768]; /* why, for errors ("" on success) */
};

/* Decodes a request into a new window (free with pf_prof_window_free). 0; -EINVAL for a
 * bad query, -EBADMSG for a bad body (err says what, for a 400), -E2BIG over a bound
 * (413), -ENOMEM. A request without samples gives a window without processes. */
int pf_pyroscope_decode(const struct pf_pyroscope_request *req, struct pf_prof_window **out,
			struct pf_error *err);

/* Decodes and stores req into st; always fills res. 0, or -ENOMEM (answer 500). */
int pf_pyroscope_ingest(struct pf_store *st, const struct pf_pyroscope_request *req,
			struct pf_pyroscope_result *res);

/* The text formats' type suffixes, NULL-terminated (docs, tests). */
const char *const *pf_pyroscope_type_names(void);

#endif
