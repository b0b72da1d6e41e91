/* pf/profcfg.h — the profiling config document (docs/config.md), parsed with libyaml and
 * checked against one table of keys: key path, type, default, range and doc. The same table
 * drives parsing, validation, defaults, the effective-config output and docs/config.md
 * (pf_profcfg_doc_markdown()), so a key is described once (common/src/profcfg.c).
 *
 * Both sides use it: the controller rejects a bad document at PUT /api/v1/configs/{name}
 * with the key path, the agent validates a pushed document before applying it.
 *
 *   struct pf_profcfg *cfg;
 *   struct pf_error err = {0};
 *   if (pf_profcfg_parse(text, len, &cfg, &err) < 0)
 *           // err.path = "profiling.sampling.frequency_hz",
 *           // err.msg  = "profiling.sampling.frequency_hz: must be 1..1000, got 5000"
 *
 * Every key has a default, so "" and "profiling: {}" are valid documents. An unknown key is
 * an error naming its path; so is a wrong type, an out-of-range value, a bad enum value or a
 * duplicate key. Lists are capped (see PF_PROFCFG_MAX_*). Documents over 1 MiB are refused.
 *
 * A parsed config is an immutable value: apply by parsing the new one completely and swapping
 * pointers, so the old one stays on failure.
 *
 * Details of the document (all enforced by pf_profcfg_parse, listed in docs/config.md):
 *  - one YAML document; anchors, aliases and tags are refused (no alias expansion);
 *  - null for a section, list or map means empty; null for a scalar key is an error;
 *  - integers and numbers are plain decimal scalars ("99" in quotes is a string, refused);
 *    booleans are true/false, yes/no, on/off (any case);
 *  - strings and map keys/values are at most 4096 bytes and contain no NUL;
 *  - exporter keys apply by type (endpoint, headers, compression, timeout_seconds for
 *    otlp_http and pyroscope; path, max_bytes for file): a key the type does not use is an
 *    error, a required one missing is an error naming it;
 *  - an exporters[].headers value may not be PF_PROFCFG_REDACTED (a redacted view sent back);
 *  - exporters[].headers_from_file values are absolute paths, its names appear neither in
 *    headers nor (with auth: agent_token) as Authorization (case-insensitive);
 *  - exporters[].tls (otlp_http and pyroscope only) needs an https:// endpoint; its strings
 *    must not be empty and cert_file and key_file go together (error on the missing one);
 *  - mode: triggered needs at least one enabled trigger;
 *  - a string key may have a default (slow_span.listen): it is set in a default config and
 *    emitted like any other value.
 * Error paths name list items by index and map entries by key: profiling.exporters[1].endpoint,
 * labels.env, profiling.pprof.targets[0].attributes["service.name"]. Syntax errors have an
 * empty path and "line L, column C" in the message.
 *
 * pf_profcfg_emit_yaml writes every key in table order with strings double-quoted; keys an
 * exporter's type does not use are left out, and so are optional strings that are unset and an
 * exporter's tls block when the document had none. It fails with -EINVAL on a string that is not
 * valid UTF-8 (only possible for a config built by hand), leaving `out` unchanged. */
#ifndef PF_PROFCFG_H
#define PF_PROFCFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/buf.h"
#include "pf/error.h"

#define PF_PROFCFG_MAX_DOC ((size_t)1 << 20)
#define PF_PROFCFG_MAX_FILTERS 64
#define PF_PROFCFG_MAX_EXPORTERS 16
#define PF_PROFCFG_MAX_TARGETS 64
#define PF_PROFCFG_MAX_HEADERS 32
#define PF_PROFCFG_MAX_ATTRS 32
#define PF_PROFCFG_MAX_LABELS 64
#define PF_PROFCFG_MAX_RELABEL 32 /* profiling.relabel rules */
/* What a secret value (exporters[].headers) is replaced with in redacted output. */
#define PF_PROFCFG_REDACTED "[REDACTED]"

enum pf_prof_mode { PF_MODE_CONTINUOUS, PF_MODE_TRIGGERED };
/* What the eBPF sampler's profiles weigh (a capture's profile_type, slow_span.profile_type):
 * cpu (samples on the CPU), off_cpu (nanoseconds away from it), wall (nanoseconds on and off
 * the CPU together, per thread), alloc (allocated and live bytes). */
enum pf_prof_type { PF_PROF_CPU, PF_PROF_OFF_CPU, PF_PROF_WALL, PF_PROF_ALLOC };
enum pf_match { PF_MATCH_STRICT, PF_MATCH_REGEXP };
enum pf_relabel_action {
	PF_RELABEL_REPLACE,
	PF_RELABEL_DROP,
	PF_RELABEL_KEEP,
	PF_RELABEL_LABELDROP,
};
enum pf_exporter_type {
	PF_EXPORTER_OTLP_HTTP,
	PF_EXPORTER_PYROSCOPE,
	PF_EXPORTER_FILE,
	PF_EXPORTER_OTLP_GRPC
};
enum pf_compression { PF_COMPRESSION_GZIP, PF_COMPRESSION_NONE };
/* How a network exporter authenticates: `agent_token` sends the agent's own OpAMP token as
 * `Authorization: Bearer …`, so a config that exports to the controller's embedded store
 * carries no secret. */
enum pf_exporter_auth { PF_AUTH_NONE, PF_AUTH_AGENT_TOKEN };
enum pf_pprof_type {
	PF_PPROF_CPU,
	PF_PPROF_HEAP,
	PF_PPROF_ALLOCS,
	PF_PPROF_GOROUTINE,
	PF_PPROF_MUTEX,
	PF_PPROF_BLOCK,
	PF_PPROF_THREADCREATE,
};

struct pf_kv_str {
	char *key;
	char *value;
};

/* filters.include / filters.exclude entries. key is one of service.name,
 * process.executable.name, process.pid, container.id, k8s.namespace.name, k8s.pod.name;
 * a regexp value must compile (POSIX ERE). */
struct pf_filter {
	char *key;
	enum pf_match match;
	char *value;
};

/* profiling.relabel entries (Prometheus' relabel_configs, on resource attributes). regex is a
 * POSIX ERE within pf/regex.h's bounds, matched against the whole value (anchored); for
 * labeldrop it is matched against attribute keys and source is not used. */
struct pf_relabel_rule {
	char *source;      /* attribute key; required for replace, drop, keep */
	char *regex;       /* default "(.*)" */
	enum pf_relabel_action action; /* default replace */
	char *target;      /* replace: the key written; default source */
	char *replacement; /* replace: $0..$9 are the match and its groups; default "$1" */
};

/* exporters[].tls: TLS settings of a network exporter with an https:// endpoint (the OpenTelemetry
 * Collector's exporter `tls` keys). Parsing checks only the shape (strings non-empty, cert_file
 * and key_file together, https:// endpoint); whether the files load is checked when the config
 * is applied (the agent builds the exporter in its check hook). */
struct pf_exporter_tls {
	bool present;		   /* the document has a tls block (emitted only then) */
	char *ca_file;		   /* PEM CA bundle trusted instead of the default store; NULL: default */
	char *cert_file;	   /* client certificate chain (PEM) for mTLS; NULL: none */
	char *key_file;		   /* its private key (PEM); set exactly when cert_file is */
	bool insecure_skip_verify; /* no peer or host name verification; default false */
	char *server_name;	   /* SNI and the name verified instead of the endpoint's host */
};

struct pf_exporter {
	enum pf_exporter_type type;
	char *endpoint;       /* otlp_http, pyroscope, otlp_grpc: http:// or https:// URL */
	size_t n_headers;     /* otlp_http, pyroscope; values are secrets (redacted emit) */
	struct pf_kv_str *headers;
	size_t n_headers_from_file; /* otlp_http, pyroscope: header name -> absolute file path */
	struct pf_kv_str *headers_from_file;
	enum pf_compression compression;
	enum pf_exporter_auth auth; /* otlp_http, pyroscope: default none */
	uint32_t timeout_seconds; /* 1..300, default 10 */
	char *path;           /* file: directory */
	uint64_t max_bytes;   /* file: directory size bound, default 256 MiB */
	struct pf_exporter_tls tls; /* otlp_http, pyroscope with an https:// endpoint */
};

struct pf_pprof_target {
	char *url;
	enum pf_pprof_type type;
	uint32_t interval_seconds; /* 0 = only on trigger/capture; default 60 */
	size_t n_attributes;
	struct pf_kv_str *attributes;
	bool keep_original; /* also ship the scraped pprof as original_payload; default false */
};

struct pf_profcfg {
	bool enabled;             /* profiling.enabled, default true */
	enum pf_prof_mode mode;   /* default continuous */
	uint32_t frequency_hz;    /* sampling.frequency_hz 1..1000, default 99 */
	uint32_t duration_seconds; /* sampling.duration_seconds 1..3600, default 10 */

	size_t n_include, n_exclude;
	struct pf_filter *include, *exclude;

	struct {
		bool python; /* Python frames walked in the kernel; default true */
		bool nodejs; /* V8 (Node.js) frames walked in the kernel; default true */
		bool java;   /* HotSpot code-cache addresses named; default true */
	} interpreters;

	struct {
		bool enabled;          /* off-CPU profiles beside the CPU ones; default false */
		uint32_t min_block_us; /* 1..60000000, default 1000: shorter waits are not kept */
		double probability;    /* 0.0001..1, default 1.0: switch-outs followed */
	} off_cpu;

	struct {
		uint32_t sample_bytes;	       /* 1024..1<<30, default 524288: mean bytes per sample */
		uint32_t max_calls_per_second; /* 1000..100000000, default 1000000: the guard */
	} alloc;

	struct {
		bool enabled;                /* default false */
		uint32_t threshold_ms;       /* 1..3600000, default 500 */
		uint32_t max_per_minute;     /* 1..600, default 6 */
		char *listen;                /* OTLP/HTTP traces receiver "HOST:PORT", default
					      * "127.0.0.1:4328"; never port 4317/4318 */
		uint32_t lookback_seconds;   /* sample ring kept for spans, 5..600, default 60 */
		enum pf_prof_type profile_type; /* cpu, off_cpu or wall (default): what a span's
						 * profile weighs; error_span's too */
	} slow_span;
	struct {
		bool enabled;                /* spans with status ERROR; default false */
		uint32_t max_per_minute;     /* 1..600, default 6 */
	} error_span;
	struct {
		bool enabled;                /* default false */
		uint32_t threshold_percent;  /* 1..100 (per CPU in use), default 80 */
		uint32_t sustain_seconds;    /* 1..3600, default 10 */
		uint32_t duration_seconds;   /* 1..3600, default 30 */
		uint32_t frequency_hz;       /* 1..1000, default 199 */
		uint32_t cooldown_seconds;   /* 0..86400, default 300 */
	} high_cpu;
	struct {
		bool enabled;                  /* default true */
		uint32_t max_duration_seconds; /* 1..3600, default 300 */
	} on_demand;

	size_t n_targets;
	struct pf_pprof_target *targets;

	size_t n_relabel;
	struct pf_relabel_rule *relabel;
	bool redact_secrets; /* the built-in redaction rules first; default true */

	size_t n_exporters;
	struct pf_exporter *exporters;

	struct {
		double max_cpu_percent;          /* 0.01..100, default 1.0 */
		uint32_t max_memory_mb;          /* 8..65536, default 64 */
		uint32_t max_profiles_per_minute; /* 1..10000, default 60 */
		uint64_t queue_bytes;            /* 65536..4 GiB, default 64 MiB */
	} limits;

	/* labels: operator labels (top-level `labels:` map, agent-local configs), reported as
	 * AgentDescription attributes. */
	size_t n_labels;
	struct pf_kv_str *labels;
};

/* Parses and validates a whole document. 0 and *out, or -EINVAL with err filled (path of
 * the first bad key), -E2BIG for a document over PF_PROFCFG_MAX_DOC, -ENOMEM. */
int pf_profcfg_parse(const char *text, size_t len, struct pf_profcfg **out, struct pf_error *err);
/* A config with every default. */
struct pf_profcfg *pf_profcfg_new_default(void);
void pf_profcfg_free(struct pf_profcfg *cfg);
/* The effective config as YAML (every key, defaults filled in), appended to out.
 * Parsing this output gives an equal config. */
int pf_profcfg_emit_yaml(const struct pf_profcfg *cfg, struct pf_buf *out);
/* The same with every secret value (exporters[].headers) written as PF_PROFCFG_REDACTED:
 * what leaves the process (the agent's reported effective config, non-admin API views). It
 * does not parse back (the placeholder is refused as a header value), so nobody stores a
 * redacted view by mistake; never use it to copy a config. */
int pf_profcfg_emit_yaml_redacted(const struct pf_profcfg *cfg, struct pf_buf *out);
/* Parses a document and appends its redacted emit to out, or the text as it is when it
 * holds no secret (so comments and layout stay); the parse error (negative errno) when it
 * is not a valid config, out unchanged. */
int pf_profcfg_redact_yaml(const char *text, size_t len, struct pf_buf *out);
bool pf_profcfg_equal(const struct pf_profcfg *a, const struct pf_profcfg *b);
/* The key table as a Markdown reference (docs/config.md is generated from it). */
int pf_profcfg_doc_markdown(struct pf_buf *out);

/* Checks one filter rule outside a document (capture requests use the same rules): key among
 * the filter keys, match strict/regexp, value present, a regexp within pf/regex.h's limits, a
 * strict process.pid in decimal. Errors name path.key / path.match / path.value. */
int pf_profcfg_filter_check(const struct pf_filter *f, const char *path, struct pf_error *err);

const char *pf_prof_mode_name(enum pf_prof_mode m);
/* "cpu", "off_cpu", "wall", "alloc"; parse: -EINVAL for any other name (or NULL). */
const char *pf_prof_type_name(enum pf_prof_type t);
int pf_prof_type_parse(const char *name, enum pf_prof_type *out);
const char *pf_exporter_type_name(enum pf_exporter_type t);
const char *pf_pprof_type_name(enum pf_pprof_type t);
const char *pf_match_name(enum pf_match m);
const char *pf_compression_name(enum pf_compression c);
const char *pf_exporter_auth_name(enum pf_exporter_auth a);
const char *pf_relabel_action_name(enum pf_relabel_action a);

#endif
