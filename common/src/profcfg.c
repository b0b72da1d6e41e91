/* profcfg.c — see pf/profcfg.h.
 *
 * One static table (keys[] below) describes every key of the document: its path pattern
 * ("profiling.exporters[].endpoint"), type, default, range, allowed values, where it lives in
 * the struct and its doc text (STYLE.md rule 11). Parsing, defaults, validation, equality,
 * the effective-config emitter and the Markdown reference all walk that table; nothing else
 * knows the key names.
 *
 * The parser uses libyaml's event API, so it stops at the first bad event without building a
 * tree: an unexpected nesting is refused before its content is read, and anchors, aliases and
 * tags are refused as they appear (no alias expansion, no billion laughs). */
#include "pf/profcfg.h"
#include "pf/utf8.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "pf/regex.h"

#define MAX_STR 4096 /* every string value and map key */
#define MAX_PATH 256 /* concrete key paths, as in struct pf_error */

enum key_type { K_SECTION, K_BOOL, K_U32, K_U64, K_DOUBLE, K_STRING, K_ENUM, K_LIST, K_MAP };

#define F_REQUIRED 1u /* must be present (in a list item, when it applies) */
/* An item enum selecting which sibling keys apply. Only exporters[].type uses it, so messages
 * and docs name its values with exporter_names. */
#define F_DISCRIM 2u
/* A K_SECTION whose presence is recorded: off is a bool set when the document has the section
 * (even empty or null); it is compared, and emitted only when set. exporters[].tls uses it. */
#define F_PRESENT 4u
/* A K_MAP whose values are secrets (credentials in request headers): the redacting emit
 * (pf_profcfg_emit_yaml_redacted) writes PF_PROFCFG_REDACTED instead of each value. */
#define F_SECRET 8u

/* A string value's extra check: 0, or -1 with why filled. */
typedef int (*str_check_fn)(const char *s, char *why, size_t n);
/* A list item's cross-key check, after all its keys are read. */
typedef int (*item_check_fn)(const void *item, const char *path, struct pf_error *err);

struct key_desc {
	const char *path; /* pattern; "a.b[]" is an item of list a.b */
	enum key_type type;
	unsigned flags;
	size_t off;	  /* into struct pf_profcfg, or into the list element for item keys */
	size_t count_off; /* K_LIST, K_MAP: the size_t count next to the array */
	size_t elem_size; /* K_LIST */
	size_t max_items; /* K_LIST, K_MAP */
	uint64_t def_u;	  /* K_BOOL, K_U32, K_U64, K_ENUM */
	const char *def_s; /* K_STRING default, NULL = unset */
	uint64_t min_u, max_u;
	double def_d, min_d, max_d;
	const char *const *names; /* K_ENUM values; K_STRING allowed set (NULL = any) */
	size_t n_names;
	uint32_t applies; /* item keys: bit mask of discriminator values; 0 = always */
	str_check_fn check;
	const char *check_desc; /* what check wants, for "required" messages */
	item_check_fn item_check;
	const char *doc;
};

/* ---- enum names (index = enum value) ---- */

static const char *const mode_names[] = {"continuous", "triggered"};
static const char *const match_names[] = {"strict", "regexp"};
static const char *const exporter_names[] = {"otlp_http", "pyroscope", "file"};
static const char *const compression_names[] = {"gzip", "none"};
static const char *const auth_names[] = {"none", "agent_token"};
static const char *const pprof_names[] = {"cpu",   "heap",  "allocs",	   "goroutine",
					  "mutex", "block", "threadcreate"};
/* A name ending in '*' allows any non-empty suffix (pod labels). */
static const char *const filter_keys[] = {
    "service.name",	   "process.executable.name", "process.pid",
    "container.id",	   "k8s.namespace.name",      "k8s.pod.name",
    "k8s.pod.uid",	   "k8s.container.name",      "k8s.node.name",
    "k8s.deployment.name", "k8s.replicaset.name",     "k8s.statefulset.name",
    "k8s.daemonset.name",  "k8s.job.name",	      "k8s.pod.label.*"};

/* s (n bytes) is name, or has name's prefix when name ends in '*'. */
static bool name_matches(const char *name, const char *s, size_t n)
{
	size_t l = strlen(name);
	if (l && name[l - 1] == '*')
		return n > l - 1 && !memcmp(s, name, l - 1);
	return n == l && !memcmp(s, name, n);
}

_Static_assert(sizeof(enum pf_prof_mode) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(enum pf_match) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(enum pf_exporter_type) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(enum pf_compression) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(enum pf_exporter_auth) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(enum pf_pprof_type) == sizeof(int), "enums are stored as int");

const char *pf_prof_mode_name(enum pf_prof_mode m)
{
	return (unsigned)m < PF_ARRAY_SIZE(mode_names) ? mode_names[m] : "unknown";
}

const char *pf_exporter_type_name(enum pf_exporter_type t)
{
	return (unsigned)t < PF_ARRAY_SIZE(exporter_names) ? exporter_names[t] : "unknown";
}

const char *pf_pprof_type_name(enum pf_pprof_type t)
{
	return (unsigned)t < PF_ARRAY_SIZE(pprof_names) ? pprof_names[t] : "unknown";
}

const char *pf_match_name(enum pf_match m)
{
	return (unsigned)m < PF_ARRAY_SIZE(match_names) ? match_names[m] : "unknown";
}

const char *pf_exporter_auth_name(enum pf_exporter_auth a)
{
	return (unsigned)a < PF_ARRAY_SIZE(auth_names) ? auth_names[a] : "unknown";
}

const char *pf_compression_name(enum pf_compression c)
{
	return (unsigned)c < PF_ARRAY_SIZE(compression_names) ? compression_names[c] : "unknown";
}

/* ---- value checks used by the table ---- */

static int check_http_url(const char *s, char *why, size_t n)
{
	size_t skip = 0;
	if (strncmp(s, "http://", 7) == 0)
		skip = 7;
	else if (strncmp(s, "https://", 8) == 0)
		skip = 8;
	if (!skip || !s[skip] || s[skip] == '/') {
		snprintf(why, n, "must be an http:// or https:// URL with a host");
		return -1;
	}
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p <= 0x20 || *p == 0x7f) {
			snprintf(why, n, "must be a URL without spaces or control characters");
			return -1;
		}
	}
	return 0;
}

static int check_abs_path(const char *s, char *why, size_t n)
{
	if (s[0] != '/') {
		snprintf(why, n, "must be an absolute path (starting with /)");
		return -1;
	}
	return 0;
}

static void names_list(char *buf, size_t n, const char *const *names, size_t count);

static int filter_item_check(const void *item, const char *path, struct pf_error *err)
{
	const struct pf_filter *f = item;
	char p[MAX_PATH];
	snprintf(p, sizeof(p), "%s.value", path);
	if (f->match == PF_MATCH_REGEXP) {
		/* Same limits as the agent's compile (pf/regex.h), so what validates runs. */
		regex_t re;
		struct pf_error rerr = {0};
		int rc = pf_regex_compile(&re, f->value, REG_EXTENDED | REG_NOSUB, &rerr);
		if (rc == -ENOMEM)
			return pf_error_set(err, -ENOMEM, p, "out of memory");
		if (rc < 0)
			return pf_error_set(err, -EINVAL, p, "regexp does not compile: %s",
					    rerr.msg);
		regfree(&re);
	} else if (strcmp(f->key, "process.pid") == 0) {
		const char *v = f->value;
		size_t i = 0;
		while (v[i] >= '0' && v[i] <= '9')
			i++;
		if (i == 0 || v[i] || i > 10)
			return pf_error_set(
			    err, -EINVAL, p,
			    "must be a process id (decimal digits) for key process.pid");
	}
	return 0;
}

int pf_profcfg_filter_check(const struct pf_filter *f, const char *path, struct pf_error *err)
{
	char p[MAX_PATH];
	bool known = false;
	snprintf(p, sizeof(p), "%s.key", path);
	if (!f->key)
		return pf_error_set(err, -EINVAL, p, "is required");
	for (size_t i = 0; i < PF_ARRAY_SIZE(filter_keys); i++)
		known = known || name_matches(filter_keys[i], f->key, strlen(f->key));
	if (!known) {
		char allowed[512];
		names_list(allowed, sizeof(allowed), filter_keys, PF_ARRAY_SIZE(filter_keys));
		return pf_error_set(err, -EINVAL, p, "must be one of %s; got \"%.64s\"", allowed,
				    f->key);
	}
	if ((unsigned)f->match > PF_MATCH_REGEXP) {
		snprintf(p, sizeof(p), "%s.match", path);
		return pf_error_set(err, -EINVAL, p, "must be strict or regexp");
	}
	if (!f->value) {
		snprintf(p, sizeof(p), "%s.value", path);
		return pf_error_set(err, -EINVAL, p, "is required");
	}
	return filter_item_check(f, path, err);
}

/* "HOST:PORT" for a local listener: HOST an IPv4 literal, [IPv6 literal] or localhost; PORT
 * 1..65535 but not 4317/4318, the OTLP ports a Collector on the same host listens on. */
static int check_listen(const char *s, char *why, size_t n)
{
	const char *colon;
	char host[64];
	size_t hlen;
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');
		if (!rb || rb[1] != ':')
			goto bad;
		hlen = (size_t)(rb - s - 1);
		if (hlen == 0 || hlen >= sizeof(host))
			goto bad;
		memcpy(host, s + 1, hlen);
		host[hlen] = 0;
		struct in6_addr a6;
		if (inet_pton(AF_INET6, host, &a6) != 1)
			goto bad;
		colon = rb + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			goto bad;
		hlen = (size_t)(colon - s);
		if (hlen == 0 || hlen >= sizeof(host))
			goto bad;
		memcpy(host, s, hlen);
		host[hlen] = 0;
		struct in_addr a4;
		if (strcmp(host, "localhost") != 0 && inet_pton(AF_INET, host, &a4) != 1)
			goto bad;
	}
	const char *p = colon + 1;
	size_t digits = strspn(p, "0123456789");
	if (!digits || p[digits] || digits > 5)
		goto bad;
	unsigned long port = strtoul(p, NULL, 10);
	if (port < 1 || port > 65535)
		goto bad;
	if (port == 4317 || port == 4318) {
		snprintf(why, n,
			 "must not use port %lu: 4317/4318 are the OTLP ports of a Collector on "
			 "this host (default 127.0.0.1:4328)",
			 port);
		return -1;
	}
	return 0;
bad:
	snprintf(why, n,
		 "must be HOST:PORT with an IPv4 address, [IPv6 address] or localhost and a port "
		 "1..65535");
	return -1;
}

static int check_nonempty(const char *s, char *why, size_t n)
{
	if (!s[0]) {
		snprintf(why, n, "must not be empty");
		return -1;
	}
	return 0;
}

/* exporters[]: a tls block needs an https:// endpoint; cert_file and key_file go together.
 * (check_item has refused tls on a file exporter already.) */
static int exporter_item_check(const void *item, const char *path, struct pf_error *err)
{
	const struct pf_exporter *e = item;
	const struct pf_exporter_tls *t = &e->tls;
	char p[MAX_PATH];
	for (size_t i = 0; i < e->n_headers_from_file; i++) {
		const struct pf_kv_str *f = &e->headers_from_file[i];
		snprintf(p, sizeof(p), "%s.headers_from_file.%s", path, f->key);
		if (f->value[0] != '/')
			return pf_error_set(err, -EINVAL, p,
					    "must be an absolute file path, got '%s'", f->value);
		for (size_t j = 0; j < e->n_headers; j++)
			if (strcasecmp(e->headers[j].key, f->key) == 0)
				return pf_error_set(err, -EINVAL, p,
						    "header '%s' is also set in headers", f->key);
		if (e->auth == PF_AUTH_AGENT_TOKEN && strcasecmp(f->key, "authorization") == 0)
			return pf_error_set(err, -EINVAL, p,
					    "auth: agent_token sends the Authorization header");
	}
	if (!t->present)
		return 0;
	if (!e->endpoint || strncmp(e->endpoint, "https://", 8) != 0) {
		snprintf(p, sizeof(p), "%s.tls", path);
		return pf_error_set(err, -EINVAL, p,
				    "needs an https:// endpoint (endpoint is plain http://)");
	}
	if (t->cert_file && !t->key_file) {
		snprintf(p, sizeof(p), "%s.tls.key_file", path);
		return pf_error_set(err, -EINVAL, p,
				    "required when cert_file is set (the client certificate's "
				    "private key)");
	}
	if (t->key_file && !t->cert_file) {
		snprintf(p, sizeof(p), "%s.tls.cert_file", path);
		return pf_error_set(err, -EINVAL, p,
				    "required when key_file is set (the client certificate)");
	}
	return 0;
}

/* ---- the table ---- */

#define CFG struct pf_profcfg
#define SECTION(p, d)                                                                              \
	{                                                                                          \
		.path = p, .type = K_SECTION, .doc = d                                             \
	}
#define BOOLK(p, T, fld, def, d)                                                                   \
	{                                                                                          \
		.path = p, .type = K_BOOL, .off = offsetof(T, fld), .def_u = def, .doc = d         \
	}
#define U32K(p, T, fld, def, lo, hi, d)                                                            \
	{                                                                                          \
		.path = p, .type = K_U32, .off = offsetof(T, fld), .def_u = def, .min_u = lo,      \
		.max_u = hi, .doc = d                                                              \
	}
#define U64K(p, T, fld, def, lo, hi, d)                                                            \
	{                                                                                          \
		.path = p, .type = K_U64, .off = offsetof(T, fld), .def_u = def, .min_u = lo,      \
		.max_u = hi, .doc = d                                                              \
	}
#define ENUMK(p, T, fld, def, nm, d)                                                               \
	{                                                                                          \
		.path = p, .type = K_ENUM, .off = offsetof(T, fld), .def_u = def, .names = nm,     \
		.n_names = PF_ARRAY_SIZE(nm), .doc = d                                             \
	}
#define LISTK(p, fld, nfld, ET, max, d)                                                            \
	{                                                                                          \
		.path = p, .type = K_LIST, .off = offsetof(CFG, fld),                              \
		.count_off = offsetof(CFG, nfld), .elem_size = sizeof(ET), .max_items = max,       \
		.doc = d                                                                           \
	}
#define MAPK(p, T, fld, nfld, max, d)                                                              \
	{                                                                                          \
		.path = p, .type = K_MAP, .off = offsetof(T, fld), .count_off = offsetof(T, nfld), \
		.max_items = max, .doc = d                                                         \
	}

#define NET_TYPES ((1u << PF_EXPORTER_OTLP_HTTP) | (1u << PF_EXPORTER_PYROSCOPE))
#define FILE_TYPE (1u << PF_EXPORTER_FILE)

#define FILTER_KEYS(list, fld, nfld, what)                                                         \
	{.path = "profiling.filters." list,                                                        \
	 .type = K_LIST,                                                                           \
	 .off = offsetof(CFG, fld),                                                                \
	 .count_off = offsetof(CFG, nfld),                                                         \
	 .elem_size = sizeof(struct pf_filter),                                                    \
	 .max_items = PF_PROFCFG_MAX_FILTERS,                                                      \
	 .item_check = filter_item_check,                                                          \
	 .doc = what},                                                                             \
	    {.path = "profiling.filters." list "[].key",                                           \
	     .type = K_STRING,                                                                     \
	     .flags = F_REQUIRED,                                                                  \
	     .off = offsetof(struct pf_filter, key),                                               \
	     .names = filter_keys,                                                                 \
	     .n_names = PF_ARRAY_SIZE(filter_keys),                                                \
	     .doc = "Process attribute to match. The k8s.* keys other than k8s.pod.uid come "      \
		    "from the agent's pod attribution (--k8s); k8s.pod.label.KEY is the pod "     \
		    "label KEY."},                                                \
	    ENUMK("profiling.filters." list "[].match", struct pf_filter, match, PF_MATCH_STRICT,  \
		  match_names,                                                                     \
		  "strict compares the whole value; regexp matches a POSIX extended regular "      \
		  "expression, which must compile within the bounds listed in docs/api.md: "     \
		  "at most 256 bytes, no stacked quantifiers, no back-references."),               \
	{                                                                                          \
		.path = "profiling.filters." list "[].value", .type = K_STRING,                    \
		.flags = F_REQUIRED, .off = offsetof(struct pf_filter, value),                     \
		.doc = "Value or regexp; for process.pid with strict, a decimal pid."              \
	}

static const struct key_desc keys[] = {
    SECTION("profiling", "The profiling settings. Absent or null means all defaults."),
    BOOLK("profiling.enabled", CFG, enabled, true,
	  "Master switch. false stops sampling, scraping and exports."),
    ENUMK("profiling.mode", CFG, mode, PF_MODE_CONTINUOUS, mode_names,
	  "continuous samples all the time; triggered samples only when a trigger fires "
	  "(triggered needs at least one enabled trigger)."),
    SECTION("profiling.sampling", "The eBPF CPU sampler."),
    U32K("profiling.sampling.frequency_hz", CFG, frequency_hz, 99, 1, 1000,
	 "Samples per second per CPU (perf cpu-clock)."),
    U32K("profiling.sampling.duration_seconds", CFG, duration_seconds, 10, 1, 3600,
	 "Length of one profile window; one profile is exported per window."),
    SECTION("profiling.filters", "Which processes are profiled, by process attribute."),
    FILTER_KEYS("include", include, n_include,
		"If not empty, only processes matching at least one entry are profiled."),
    FILTER_KEYS("exclude", exclude, n_exclude,
		"Processes matching any entry are not profiled (wins over include)."),
    SECTION("profiling.triggers", "Events that start a profile."),
    SECTION("profiling.triggers.slow_span",
	    "Profile a span's thread for the span's time range when the span is slow."),
    BOOLK("profiling.triggers.slow_span.enabled", CFG, slow_span.enabled, false,
	  "Receive spans on the agent's local OTLP port and act on slow ones."),
    U32K("profiling.triggers.slow_span.threshold_ms", CFG, slow_span.threshold_ms, 500, 1, 3600000,
	 "A span at least this long (milliseconds) triggers a profile."),
    U32K("profiling.triggers.slow_span.max_per_minute", CFG, slow_span.max_per_minute, 6, 1, 600,
	 "At most this many slow-span profiles per minute."),
    {.path = "profiling.triggers.slow_span.listen",
     .type = K_STRING,
     .off = offsetof(CFG, slow_span.listen),
     .def_s = "127.0.0.1:4328",
     .check = check_listen,
     .check_desc = "HOST:PORT (IPv4, [IPv6] or localhost; not port 4317/4318)",
     .doc = "Address of the agent's OTLP/HTTP traces receiver (`POST /v1/traces`, protobuf or "
	    "JSON, gzip), bound exactly there; shared with error_span. A Collector fans spans "
	    "out to it. 4317/4318 are refused: they are a local Collector's own OTLP ports."},
    U32K("profiling.triggers.slow_span.lookback_seconds", CFG, slow_span.lookback_seconds, 60, 5,
	 600,
	 "How long recent samples are kept in memory for spans to be cut from (a span that "
	 "started earlier is refused). The sample ring counts against limits.max_memory_mb "
	 "(at most a quarter of it; see docs/agent.md)."),
    SECTION("profiling.triggers.error_span",
	    "Profile a span's thread for the span's time range when the span ends with status "
	    "ERROR (same receiver, ring and mechanics as slow_span)."),
    BOOLK("profiling.triggers.error_span.enabled", CFG, error_span.enabled, false,
	  "Act on spans with status code ERROR (any duration)."),
    U32K("profiling.triggers.error_span.max_per_minute", CFG, error_span.max_per_minute, 6, 1, 600,
	 "At most this many error-span profiles per minute."),
    SECTION("profiling.triggers.high_cpu",
	    "Profile at a higher frequency while CPU use stays high."),
    BOOLK("profiling.triggers.high_cpu.enabled", CFG, high_cpu.enabled, false,
	  "Watch CPU use of the profiled processes."),
    U32K("profiling.triggers.high_cpu.threshold_percent", CFG, high_cpu.threshold_percent, 80, 1,
	 100, "CPU use that fires it: a process's percent of one CPU (busy on one CPU = 100), "
	      "the host's percent of all its CPUs."),
    U32K("profiling.triggers.high_cpu.sustain_seconds", CFG, high_cpu.sustain_seconds, 10, 1, 3600,
	 "How long CPU use must stay over the threshold before it fires."),
    U32K("profiling.triggers.high_cpu.duration_seconds", CFG, high_cpu.duration_seconds, 30, 1,
	 3600, "Length of the profile taken when it fires."),
    U32K("profiling.triggers.high_cpu.frequency_hz", CFG, high_cpu.frequency_hz, 199, 1, 1000,
	 "Sampling frequency of that profile."),
    U32K("profiling.triggers.high_cpu.cooldown_seconds", CFG, high_cpu.cooldown_seconds, 300, 0,
	 86400, "Quiet time for a process after its profile ends before it can fire again."),
    SECTION("profiling.triggers.on_demand", "Captures requested from the controller."),
    BOOLK("profiling.triggers.on_demand.enabled", CFG, on_demand.enabled, true,
	  "Accept capture requests."),
    U32K("profiling.triggers.on_demand.max_duration_seconds", CFG, on_demand.max_duration_seconds,
	 300, 1, 3600, "Longest capture accepted; longer requests are refused."),
    SECTION("profiling.pprof", "Scraping Go-style pprof HTTP endpoints."),
    LISTK("profiling.pprof.targets", targets, n_targets, struct pf_pprof_target,
	  PF_PROFCFG_MAX_TARGETS, "pprof endpoints to scrape."),
    {.path = "profiling.pprof.targets[].url",
     .type = K_STRING,
     .flags = F_REQUIRED,
     .off = offsetof(struct pf_pprof_target, url),
     .check = check_http_url,
     .check_desc = "an http:// or https:// URL",
     .doc = "URL of the pprof endpoint."},
    ENUMK("profiling.pprof.targets[].type", struct pf_pprof_target, type, PF_PPROF_CPU, pprof_names,
	  "Profile type served at url."),
    U32K("profiling.pprof.targets[].interval_seconds", struct pf_pprof_target, interval_seconds, 60,
	 0, 86400, "Scrape period; 0 scrapes only on a trigger or capture."),
    MAPK("profiling.pprof.targets[].attributes", struct pf_pprof_target, attributes, n_attributes,
	 PF_PROFCFG_MAX_ATTRS,
	 "Resource attributes added to the scraped profiles (string to string)."),
    BOOLK("profiling.pprof.targets[].keep_original", struct pf_pprof_target, keep_original, false,
	  "Also send the scraped pprof bytes as the OTLP profile's original_payload."),
    {.path = "profiling.exporters",
     .type = K_LIST,
     .off = offsetof(CFG, exporters),
     .count_off = offsetof(CFG, n_exporters),
     .elem_size = sizeof(struct pf_exporter),
     .max_items = PF_PROFCFG_MAX_EXPORTERS,
     .item_check = exporter_item_check,
     .doc = "Where profiles are sent; every profile goes to each."},
    {.path = "profiling.exporters[].type",
     .type = K_ENUM,
     .flags = F_REQUIRED | F_DISCRIM,
     .off = offsetof(struct pf_exporter, type),
     .names = exporter_names,
     .n_names = PF_ARRAY_SIZE(exporter_names),
     .doc = "Exporter kind; it decides which of the keys below apply."},
    {.path = "profiling.exporters[].endpoint",
     .type = K_STRING,
     .flags = F_REQUIRED,
     .off = offsetof(struct pf_exporter, endpoint),
     .applies = NET_TYPES,
     .check = check_http_url,
     .check_desc = "an http:// or https:// URL",
     .doc = "OTLP/HTTP profiles URL, or the Pyroscope server URL."},
    {.path = "profiling.exporters[].headers",
     .type = K_MAP,
     .flags = F_SECRET,
     .off = offsetof(struct pf_exporter, headers),
     .count_off = offsetof(struct pf_exporter, n_headers),
     .max_items = PF_PROFCFG_MAX_HEADERS,
     .applies = NET_TYPES,
     .doc = "Extra HTTP request headers (string to string). The values are treated as "
	    "secrets: the agent reports them as `" PF_PROFCFG_REDACTED "` in its effective "
	    "config, and the controller's API shows them so to every role but admin; "
	    "prefer `headers_from_file` for credentials."},
    {.path = "profiling.exporters[].headers_from_file",
     .type = K_MAP,
     .off = offsetof(struct pf_exporter, headers_from_file),
     .count_off = offsetof(struct pf_exporter, n_headers_from_file),
     .max_items = PF_PROFCFG_MAX_HEADERS,
     .applies = NET_TYPES,
     .doc = "HTTP request headers whose values the agent reads from files on its host "
	    "(header name to absolute file path; the content, surrounding whitespace trimmed, "
	    "at most 4096 bytes), e.g. a mounted Kubernetes Secret, so the config carries no "
	    "secret. Read when the exporter is created (a config that changes this exporter, "
	    "or the agent's start): a file that cannot be read fails the config (FAILED, the "
	    "previous config keeps running); a rotated file needs either. A name must not also be "
	    "in `headers`, nor be `Authorization` "
	    "with `auth: agent_token`."},
    {.path = "profiling.exporters[].auth",
     .type = K_ENUM,
     .off = offsetof(struct pf_exporter, auth),
     .def_u = PF_AUTH_NONE,
     .names = auth_names,
     .n_names = PF_ARRAY_SIZE(auth_names),
     .applies = NET_TYPES,
     .doc = "agent_token: send the agent's own OpAMP token as `Authorization: Bearer` (for "
	    "the controller's embedded store), so the config carries no secret."},
    {.path = "profiling.exporters[].compression",
     .type = K_ENUM,
     .off = offsetof(struct pf_exporter, compression),
     .def_u = PF_COMPRESSION_GZIP,
     .names = compression_names,
     .n_names = PF_ARRAY_SIZE(compression_names),
     .applies = NET_TYPES,
     .doc = "Request body compression."},
    {.path = "profiling.exporters[].timeout_seconds",
     .type = K_U32,
     .off = offsetof(struct pf_exporter, timeout_seconds),
     .def_u = 10,
     .min_u = 1,
     .max_u = 300,
     .applies = NET_TYPES,
     .doc = "Timeout of one export request."},
    {.path = "profiling.exporters[].path",
     .type = K_STRING,
     .flags = F_REQUIRED,
     .off = offsetof(struct pf_exporter, path),
     .applies = FILE_TYPE,
     .check = check_abs_path,
     .check_desc = "an absolute directory path",
     .doc = "Directory the profiles are written to."},
    {.path = "profiling.exporters[].max_bytes",
     .type = K_U64,
     .off = offsetof(struct pf_exporter, max_bytes),
     .def_u = (uint64_t)256 << 20,
     .min_u = (uint64_t)1 << 20,
     .max_u = (uint64_t)1 << 40,
     .applies = FILE_TYPE,
     .doc = "Size bound of the directory; the oldest files are removed past it."},
    {.path = "profiling.exporters[].tls",
     .type = K_SECTION,
     .flags = F_PRESENT,
     .off = offsetof(struct pf_exporter, tls.present),
     .applies = NET_TYPES,
     .doc = "TLS settings (like the OpenTelemetry Collector's exporter `tls`); only with an "
	    "https:// endpoint. Without it the system CA store is trusted, the endpoint's host "
	    "is verified and no client certificate is sent. The files are read when the config "
	    "is applied: one that does not load fails the config (FAILED, the previous config "
	    "keeps running)."},
    {.path = "profiling.exporters[].tls.ca_file",
     .type = K_STRING,
     .off = offsetof(struct pf_exporter, tls.ca_file),
     .check = check_nonempty,
     .check_desc = "a file path",
     .doc = "PEM bundle of the CA certificates to trust, instead of the system store."},
    {.path = "profiling.exporters[].tls.cert_file",
     .type = K_STRING,
     .off = offsetof(struct pf_exporter, tls.cert_file),
     .check = check_nonempty,
     .check_desc = "a file path",
     .doc = "Client certificate (PEM, chain allowed) for mutual TLS; needs key_file."},
    {.path = "profiling.exporters[].tls.key_file",
     .type = K_STRING,
     .off = offsetof(struct pf_exporter, tls.key_file),
     .check = check_nonempty,
     .check_desc = "a file path",
     .doc = "Private key (PEM) of cert_file; needs cert_file."},
    {.path = "profiling.exporters[].tls.insecure_skip_verify",
     .type = K_BOOL,
     .off = offsetof(struct pf_exporter, tls.insecure_skip_verify),
     .def_u = false,
     .doc = "**Insecure:** do not verify the server's certificate or name, so anyone on the "
	    "path can read and alter the profiles (and headers such as tokens). Only for "
	    "tests."},
    {.path = "profiling.exporters[].tls.server_name",
     .type = K_STRING,
     .off = offsetof(struct pf_exporter, tls.server_name),
     .check = check_nonempty,
     .check_desc = "a host name",
     .doc = "Name sent as SNI and verified against the certificate, instead of the "
	    "endpoint's host (e.g. an IP endpoint whose certificate names a host)."},
    SECTION("profiling.limits", "The agent's own resource budget."),
    {.path = "profiling.limits.max_cpu_percent",
     .type = K_DOUBLE,
     .off = offsetof(CFG, limits.max_cpu_percent),
     .def_d = 1.0,
     .min_d = 0.01,
     .max_d = 100,
     .doc = "CPU the agent may use, process plus BPF programs over 10 s (percent of one CPU); "
	    "past it the sampling frequency halves step by step, down to 9 Hz."},
    U32K("profiling.limits.max_memory_mb", CFG, limits.max_memory_mb, 64, 8, 65536,
	 "Resident memory the agent may use, in MiB; 10 s past it, the sampling frequency "
	 "halves as for CPU."),
    U32K("profiling.limits.max_profiles_per_minute", CFG, limits.max_profiles_per_minute, 60, 1,
	 10000, "Profiles exported in any 60 s, all sources together (windows, pprof, captures, "
		"triggers); profiles over it are dropped and counted."),
    U64K("profiling.limits.queue_bytes", CFG, limits.queue_bytes, (uint64_t)64 << 20, 65536,
	 (uint64_t)4 << 30,
	 "Bytes of encoded profiles queued for export; the oldest are "
	 "dropped past it."),
    MAPK("labels", CFG, labels, n_labels, PF_PROFCFG_MAX_LABELS,
	 "Operator labels (string to string), reported as AgentDescription attributes; "
	 "used in agent-local configs."),
};

#define N_KEYS PF_ARRAY_SIZE(keys)

/* ---- table helpers ---- */

/* The last segment of k's path when k is a direct child of container pattern `parent`
 * ("" is the document root, "a.b[]" the items of list a.b), else NULL. */
static const char *child_name(const struct key_desc *k, const char *parent)
{
	size_t n = strlen(parent);
	const char *rest;
	if (n == 0) {
		rest = k->path;
	} else {
		if (strncmp(k->path, parent, n) != 0 || k->path[n] != '.')
			return NULL;
		rest = k->path + n + 1;
	}
	return strpbrk(rest, ".[") ? NULL : rest;
}

static void item_pattern(char *buf, size_t n, const struct key_desc *k)
{
	snprintf(buf, n, "%s[]", k->path);
}

/* Typed access to struct fields by offset; memcpy keeps it free of aliasing games. */
static void *fld(const void *base, const struct key_desc *k)
{
	return (char *)base + k->off;
}

static void *get_ptr(const void *base, size_t off)
{
	void *p;
	memcpy(&p, (const char *)base + off, sizeof(p));
	return p;
}

static void set_ptr(void *base, size_t off, void *p)
{
	memcpy((char *)base + off, &p, sizeof(p));
}

static size_t get_count(const void *base, const struct key_desc *k)
{
	size_t n;
	memcpy(&n, (const char *)base + k->count_off, sizeof(n));
	return n;
}

static void set_count(void *base, const struct key_desc *k, size_t n)
{
	memcpy((char *)base + k->count_off, &n, sizeof(n));
}

static uint64_t get_u(const void *base, const struct key_desc *k)
{
	bool b;
	uint32_t u32;
	uint64_t u64;
	int e;
	switch (k->type) {
	case K_BOOL:
		memcpy(&b, fld(base, k), sizeof(b));
		return b;
	case K_U32:
		memcpy(&u32, fld(base, k), sizeof(u32));
		return u32;
	case K_U64:
		memcpy(&u64, fld(base, k), sizeof(u64));
		return u64;
	case K_ENUM:
		memcpy(&e, fld(base, k), sizeof(e));
		return (uint64_t)(unsigned)e;
	default:
		return 0;
	}
}

static void set_u(void *base, const struct key_desc *k, uint64_t v)
{
	bool b = v != 0;
	uint32_t u32 = (uint32_t)v;
	int e = (int)v;
	switch (k->type) {
	case K_BOOL:
		memcpy(fld(base, k), &b, sizeof(b));
		break;
	case K_U32:
		memcpy(fld(base, k), &u32, sizeof(u32));
		break;
	case K_U64:
		memcpy(fld(base, k), &v, sizeof(v));
		break;
	case K_ENUM:
		memcpy(fld(base, k), &e, sizeof(e));
		break;
	default:
		break;
	}
}

static double get_d(const void *base, const struct key_desc *k)
{
	double d;
	memcpy(&d, fld(base, k), sizeof(d));
	return d;
}

static void set_d(void *base, const struct key_desc *k, double d)
{
	memcpy(fld(base, k), &d, sizeof(d));
}

/* Defaults of every scalar key under container `pattern` (sections recursively; lists and
 * maps start empty). */
static int fill_defaults(const char *pattern, void *base);

static int set_default_str(void *base, const struct key_desc *k)
{
	char *dup = strdup(k->def_s);
	if (!dup)
		return -ENOMEM;
	free(get_ptr(base, k->off));
	set_ptr(base, k->off, dup);
	return 0;
}

static int fill_defaults(const char *pattern, void *base)
{
	int rc = 0;
	for (size_t i = 0; i < N_KEYS; i++) {
		const struct key_desc *k = &keys[i];
		if (!child_name(k, pattern))
			continue;
		if (k->type == K_SECTION) {
			int r = fill_defaults(k->path, base);
			rc = rc < 0 ? rc : r;
		} else if (k->type == K_DOUBLE)
			set_d(base, k, k->def_d);
		else if (k->type == K_STRING && k->def_s)
			rc = rc < 0 ? rc : set_default_str(base, k);
		else
			set_u(base, k, k->def_u);
	}
	return rc;
}

static void free_kvs(struct pf_kv_str *kv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(kv[i].key);
		free(kv[i].value);
	}
	free(kv);
}

static void free_fields(const char *pattern, void *base)
{
	for (size_t i = 0; i < N_KEYS; i++) {
		const struct key_desc *k = &keys[i];
		if (!child_name(k, pattern))
			continue;
		if (k->type == K_SECTION) {
			free_fields(k->path, base);
		} else if (k->type == K_STRING) {
			free(get_ptr(base, k->off));
			set_ptr(base, k->off, NULL);
		} else if (k->type == K_MAP) {
			free_kvs(get_ptr(base, k->off), get_count(base, k));
			set_ptr(base, k->off, NULL);
			set_count(base, k, 0);
		} else if (k->type == K_LIST) {
			char ip[MAX_PATH];
			item_pattern(ip, sizeof(ip), k);
			char *arr = get_ptr(base, k->off);
			size_t n = get_count(base, k);
			for (size_t j = 0; j < n; j++)
				free_fields(ip, arr + j * k->elem_size);
			free(arr);
			set_ptr(base, k->off, NULL);
			set_count(base, k, 0);
		}
	}
}

struct pf_profcfg *pf_profcfg_new_default(void)
{
	struct pf_profcfg *cfg = calloc(1, sizeof(*cfg));
	if (!cfg) {
		errno = ENOMEM;
		return NULL;
	}
	if (fill_defaults("", cfg) < 0) {
		pf_profcfg_free(cfg);
		errno = ENOMEM;
		return NULL;
	}
	return cfg;
}

void pf_profcfg_free(struct pf_profcfg *cfg)
{
	if (!cfg)
		return;
	free_fields("", cfg);
	free(cfg);
}

/* The discriminator value of a list item (exporters[].type), or -1 when it has none. */
static int item_discrim(const char *ipattern, const void *item)
{
	for (size_t i = 0; i < N_KEYS; i++)
		if ((keys[i].flags & F_DISCRIM) && child_name(&keys[i], ipattern))
			return (int)get_u(item, &keys[i]);
	return -1;
}

static bool applies_to(const struct key_desc *k, int discrim)
{
	return !k->applies || (discrim >= 0 && discrim < 32 && (k->applies & (1u << discrim)));
}

/* ---- the parser ---- */

struct walk {
	yaml_parser_t yp;
	yaml_event_t ev;
	bool have_ev;
	struct pf_error *err;
	char path[MAX_PATH]; /* concrete path of the node being read */
	size_t plen;
};

/* A short, printable rendering of user text for messages. */
static const char *show(char *buf, size_t n, const char *s, size_t len)
{
	size_t max = n > 4 ? n - 4 : 0, o = 0;
	for (size_t i = 0; i < len && o < max; i++)
		buf[o++] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
	if (o < len && n >= 4) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o < n ? o : n - 1] = 0;
	return buf;
}

static size_t path_push(struct walk *w, const char *fmt, ...) PF_PRINTF(2, 3);
static size_t path_push(struct walk *w, const char *fmt, ...)
{
	size_t saved = w->plen;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(w->path + w->plen, sizeof(w->path) - w->plen, fmt, ap);
	va_end(ap);
	if (n > 0)
		w->plen = pf_min(w->plen + (size_t)n, sizeof(w->path) - 1);
	return saved;
}

static void path_push_key(struct walk *w, const char *key, size_t len)
{
	char shown[96];
	show(shown, sizeof(shown), key, len);
	path_push(w, "%s%s", w->plen ? "." : "", shown);
}

/* Map keys like "service.name" are shown as labels["service.name"] so the path stays
 * unambiguous; simple ones as labels.env. */
static void path_push_mapkey(struct walk *w, const char *key, size_t len)
{
	bool simple = len > 0;
	for (size_t i = 0; i < len; i++) {
		char c = key[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-'))
			simple = false;
	}
	if (simple) {
		path_push_key(w, key, len);
	} else {
		char shown[96];
		show(shown, sizeof(shown), key, len);
		path_push(w, "[\"%s\"]", shown);
	}
}

static void path_pop(struct walk *w, size_t saved)
{
	w->plen = saved;
	w->path[saved] = 0;
}

static int werr(struct walk *w, const char *fmt, ...) PF_PRINTF(2, 3);
static int werr(struct walk *w, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return pf_error_set(w->err, -EINVAL, w->path, "%s", msg);
}

static const char *event_kind(const yaml_event_t *ev)
{
	switch (ev->type) {
	case YAML_MAPPING_START_EVENT:
		return "a mapping";
	case YAML_SEQUENCE_START_EVENT:
		return "a list";
	case YAML_SCALAR_EVENT:
		return "a scalar";
	default:
		return "something else";
	}
}

static bool is_null(const yaml_event_t *ev)
{
	if (ev->type != YAML_SCALAR_EVENT || ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	const char *s = (const char *)ev->data.scalar.value;
	size_t n = ev->data.scalar.length;
	return n == 0 || (n == 1 && s[0] == '~') ||
	       (n == 4 && (!strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL")));
}

static int walk_next(struct walk *w)
{
	if (w->have_ev) {
		yaml_event_delete(&w->ev);
		w->have_ev = false;
	}
	if (!yaml_parser_parse(&w->yp, &w->ev)) {
		if (w->yp.error == YAML_MEMORY_ERROR)
			return pf_error_set(w->err, -ENOMEM, "", "out of memory");
		const yaml_mark_t *m = &w->yp.problem_mark;
		const char *problem = w->yp.problem ? w->yp.problem : "malformed YAML";
		if (w->yp.context)
			return pf_error_set(w->err, -EINVAL, "",
					    "YAML syntax error at line %zu, column %zu: %s (%s)",
					    m->line + 1, m->column + 1, problem, w->yp.context);
		return pf_error_set(w->err, -EINVAL, "",
				    "YAML syntax error at line %zu, column %zu: %s", m->line + 1,
				    m->column + 1, problem);
	}
	w->have_ev = true;
	const yaml_event_t *ev = &w->ev;
	const yaml_char_t *anchor = NULL, *tag = NULL;
	switch (ev->type) {
	case YAML_ALIAS_EVENT:
		anchor = ev->data.alias.anchor;
		break;
	case YAML_SCALAR_EVENT:
		anchor = ev->data.scalar.anchor;
		tag = ev->data.scalar.tag;
		break;
	case YAML_SEQUENCE_START_EVENT:
		anchor = ev->data.sequence_start.anchor;
		tag = ev->data.sequence_start.tag;
		break;
	case YAML_MAPPING_START_EVENT:
		anchor = ev->data.mapping_start.anchor;
		tag = ev->data.mapping_start.tag;
		break;
	default:
		break;
	}
	if (anchor || ev->type == YAML_ALIAS_EVENT)
		return werr(w, "anchors and aliases are not allowed (line %zu, column %zu)",
			    ev->start_mark.line + 1, ev->start_mark.column + 1);
	if (tag)
		return werr(w, "tags are not allowed (line %zu, column %zu)",
			    ev->start_mark.line + 1, ev->start_mark.column + 1);
	return 0;
}

/* A scalar usable as a string (map key or value, string key): not null, bounded, no NUL. */
static int scalar_string(struct walk *w, const char *what, const char **s, size_t *n)
{
	if (w->ev.type != YAML_SCALAR_EVENT)
		return werr(w, "%s must be a string, got %s", what, event_kind(&w->ev));
	if (is_null(&w->ev))
		return werr(w, "%s must be a string, got null", what);
	*s = (const char *)w->ev.data.scalar.value;
	*n = w->ev.data.scalar.length;
	if (*n > MAX_STR)
		return werr(w, "%s must be at most %d bytes, got %zu", what, MAX_STR, *n);
	if (memchr(*s, 0, *n))
		return werr(w, "%s must not contain NUL characters", what);
	return 0;
}

static void names_list(char *buf, size_t n, const char *const *names, size_t count)
{
	size_t o = 0;
	buf[0] = 0;
	for (size_t i = 0; i < count && o < n; i++) {
		int r = snprintf(buf + o, n - o, "%s%s", i ? ", " : "", names[i]);
		if (r < 0)
			break;
		o += (size_t)r;
	}
}

static int range_error(struct walk *w, const struct key_desc *k, const char *got)
{
	return werr(w, "must be %" PRIu64 "..%" PRIu64 ", got %s", k->min_u, k->max_u, got);
}

static int parse_uint(struct walk *w, const struct key_desc *k, void *base)
{
	const char *s = (const char *)w->ev.data.scalar.value;
	size_t n = w->ev.data.scalar.length;
	char shown[72];
	show(shown, sizeof(shown), s, n);
	if (w->ev.data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return werr(w, "must be an integer, got the string \"%s\"", shown);
	if (is_null(&w->ev))
		return werr(w, "must be an integer, got null");
	size_t i = 0;
	bool neg = false;
	if (i < n && (s[i] == '-' || s[i] == '+'))
		neg = s[i++] == '-';
	size_t digits = i;
	uint64_t v = 0;
	bool overflow = false;
	for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			overflow = true;
		else
			v = v * 10 + d;
	}
	if (i == digits || i != n)
		return werr(w, "must be an integer, got '%s'", shown);
	if ((neg && v != 0) || overflow || v < k->min_u || v > k->max_u)
		return range_error(w, k, shown);
	set_u(base, k, v);
	return 0;
}

static int parse_double(struct walk *w, const struct key_desc *k, void *base)
{
	const char *s = (const char *)w->ev.data.scalar.value;
	size_t n = w->ev.data.scalar.length;
	char shown[72];
	show(shown, sizeof(shown), s, n);
	if (w->ev.data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return werr(w, "must be a number, got the string \"%s\"", shown);
	if (is_null(&w->ev))
		return werr(w, "must be a number, got null");
	/* Decimal notation only: strtod alone would also take "nan", "inf" and hex. */
	bool digit = false, other = false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] >= '0' && s[i] <= '9')
			digit = true;
		else if (!s[i] || !strchr("+-.eE", s[i]))
			other = true;
	}
	char tmp[72];
	if (!digit || other || n >= sizeof(tmp))
		return werr(w, "must be a number, got '%s'", shown);
	memcpy(tmp, s, n);
	tmp[n] = 0;
	char *end;
	errno = 0;
	double d = strtod(tmp, &end);
	if (*end || end == tmp)
		return werr(w, "must be a number, got '%s'", shown);
	if (!(d >= k->min_d && d <= k->max_d))
		return werr(w, "must be %g..%g, got %s", k->min_d, k->max_d, shown);
	set_d(base, k, d);
	return 0;
}

static int parse_scalar(struct walk *w, const struct key_desc *k, void *base)
{
	char shown[72], allowed[512];
	const char *s;
	size_t n;
	int r;

	if (w->ev.type != YAML_SCALAR_EVENT) {
		static const char *const want[] = {
		    [K_BOOL] = "a boolean",  [K_U32] = "an integer",  [K_U64] = "an integer",
		    [K_DOUBLE] = "a number", [K_STRING] = "a string", [K_ENUM] = "a string",
		};
		return werr(w, "must be %s, got %s", want[k->type], event_kind(&w->ev));
	}
	s = (const char *)w->ev.data.scalar.value;
	n = w->ev.data.scalar.length;
	show(shown, sizeof(shown), s, n);

	switch (k->type) {
	case K_BOOL: {
		static const char *const t[] = {"true", "yes", "on"}, *const f[] = {"false", "no",
										    "off"};
		if (w->ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
			for (size_t i = 0; i < 3; i++) {
				if (n == strlen(t[i]) && !strncasecmp(s, t[i], n)) {
					set_u(base, k, 1);
					return 0;
				}
				if (n == strlen(f[i]) && !strncasecmp(s, f[i], n)) {
					set_u(base, k, 0);
					return 0;
				}
			}
		}
		return werr(w, "must be a boolean (true/false, yes/no, on/off), got '%s'", shown);
	}
	case K_U32:
	case K_U64:
		return parse_uint(w, k, base);
	case K_DOUBLE:
		return parse_double(w, k, base);
	case K_ENUM:
		names_list(allowed, sizeof(allowed), k->names, k->n_names);
		if (!is_null(&w->ev)) {
			for (size_t i = 0; i < k->n_names; i++) {
				if (n == strlen(k->names[i]) && !memcmp(s, k->names[i], n)) {
					set_u(base, k, i);
					return 0;
				}
			}
		}
		return werr(w, "must be one of %s, got '%s'", allowed,
			    is_null(&w->ev) ? "null" : shown);
	case K_STRING: {
		if ((r = scalar_string(w, "value", &s, &n)) < 0)
			return r;
		if (k->names) {
			bool ok = false;
			for (size_t i = 0; i < k->n_names && !ok; i++)
				ok = name_matches(k->names[i], s, n);
			if (!ok) {
				names_list(allowed, sizeof(allowed), k->names, k->n_names);
				return werr(w, "must be one of %s, got '%s'", allowed, shown);
			}
		}
		char *dup = strndup(s, n);
		if (!dup)
			return pf_error_set(w->err, -ENOMEM, w->path, "out of memory");
		char why[128];
		if (k->check && k->check(dup, why, sizeof(why)) < 0) {
			free(dup);
			return werr(w, "%s, got '%s'", why, shown);
		}
		free(get_ptr(base, k->off));
		set_ptr(base, k->off, dup);
		return 0;
	}
	default:
		return werr(w, "internal: not a scalar key");
	}
}

static int parse_section(struct walk *w, const char *pattern, void *base, uint8_t *seen);

static int parse_map(struct walk *w, const struct key_desc *k, void *base)
{
	int r;
	if (is_null(&w->ev))
		return 0;
	if (w->ev.type != YAML_MAPPING_START_EVENT)
		return werr(w, "must be a mapping of strings to strings, got %s",
			    event_kind(&w->ev));
	for (;;) {
		if ((r = walk_next(w)) < 0)
			return r;
		if (w->ev.type == YAML_MAPPING_END_EVENT)
			return 0;
		const char *ks;
		size_t kn;
		if ((r = scalar_string(w, "keys", &ks, &kn)) < 0)
			return r;
		if (kn == 0)
			return werr(w, "keys must not be empty");
		struct pf_kv_str *kv = get_ptr(base, k->off);
		size_t cnt = get_count(base, k);
		if (cnt >= k->max_items)
			return werr(w, "must have at most %zu entries", k->max_items);
		size_t saved = w->plen;
		path_push_mapkey(w, ks, kn);
		for (size_t i = 0; i < cnt; i++)
			if (strlen(kv[i].key) == kn && !memcmp(kv[i].key, ks, kn))
				return werr(w, "duplicate key");
		struct pf_kv_str *nkv = realloc(kv, (cnt + 1) * sizeof(*kv));
		if (!nkv)
			return pf_error_set(w->err, -ENOMEM, w->path, "out of memory");
		set_ptr(base, k->off, nkv);
		nkv[cnt].key = strndup(ks, kn);
		nkv[cnt].value = NULL;
		set_count(base, k, cnt + 1);
		if (!nkv[cnt].key)
			return pf_error_set(w->err, -ENOMEM, w->path, "out of memory");
		if ((r = walk_next(w)) < 0)
			return r;
		const char *vs;
		size_t vn;
		if ((r = scalar_string(w, "value", &vs, &vn)) < 0)
			return r;
		if (!(nkv[cnt].value = strndup(vs, vn)))
			return pf_error_set(w->err, -ENOMEM, w->path, "out of memory");
		path_pop(w, saved);
	}
}

/* After an item's keys: the discriminator and required keys are present, and no key is set
 * that the item's type does not use. */
static int check_item(struct walk *w, const char *ipattern, const void *item, const uint8_t *seen)
{
	int discrim = -1;
	for (size_t i = 0; i < N_KEYS; i++) {
		const struct key_desc *k = &keys[i];
		if (!(k->flags & F_DISCRIM) || !child_name(k, ipattern))
			continue;
		if (!seen[i]) {
			char allowed[256];
			names_list(allowed, sizeof(allowed), k->names, k->n_names);
			size_t saved = path_push(w, ".%s", child_name(k, ipattern));
			int r = werr(w, "required (one of %s)", allowed);
			path_pop(w, saved);
			return r;
		}
		discrim = (int)get_u(item, k);
	}
	for (size_t i = 0; i < N_KEYS; i++) {
		const struct key_desc *k = &keys[i];
		const char *name = child_name(k, ipattern);
		if (!name)
			continue;
		bool used = applies_to(k, discrim);
		const char *tname = discrim >= 0 ? pf_exporter_type_name(discrim) : "";
		int r = 0;
		size_t saved = path_push(w, ".%s", name);
		if (!used && seen[i])
			r = werr(w, "not used by type %s", tname);
		else if (used && (k->flags & F_REQUIRED) && !seen[i]) {
			if (k->applies)
				r = werr(w, "required for type %s%s%s%s", tname,
					 k->check_desc ? " (" : "",
					 k->check_desc ? k->check_desc : "",
					 k->check_desc ? ")" : "");
			else
				r = werr(w, "required%s%s%s", k->check_desc ? " (" : "",
					 k->check_desc ? k->check_desc : "",
					 k->check_desc ? ")" : "");
		}
		path_pop(w, saved);
		if (r < 0)
			return r;
	}
	return 0;
}

static int parse_list(struct walk *w, const struct key_desc *k, void *base)
{
	int r;
	char ipattern[MAX_PATH];
	item_pattern(ipattern, sizeof(ipattern), k);
	if (is_null(&w->ev))
		return 0;
	if (w->ev.type != YAML_SEQUENCE_START_EVENT)
		return werr(w, "must be a list, got %s", event_kind(&w->ev));
	for (;;) {
		if ((r = walk_next(w)) < 0)
			return r;
		if (w->ev.type == YAML_SEQUENCE_END_EVENT)
			return 0;
		size_t cnt = get_count(base, k);
		if (cnt >= k->max_items)
			return werr(w, "must have at most %zu entries", k->max_items);
		size_t saved = path_push(w, "[%zu]", cnt);
		if (w->ev.type != YAML_MAPPING_START_EVENT)
			return werr(w, "must be a mapping, got %s", event_kind(&w->ev));
		char *arr = realloc(get_ptr(base, k->off), (cnt + 1) * k->elem_size);
		if (!arr)
			return pf_error_set(w->err, -ENOMEM, w->path, "out of memory");
		set_ptr(base, k->off, arr);
		char *item = arr + cnt * k->elem_size;
		memset(item, 0, k->elem_size);
		set_count(base, k, cnt + 1);
		if (fill_defaults(ipattern, item) < 0)
			return pf_error_set(w->err, -ENOMEM, w->path, "out of memory");
		uint8_t seen[N_KEYS] = {0};
		if ((r = parse_section(w, ipattern, item, seen)) < 0)
			return r;
		if ((r = check_item(w, ipattern, item, seen)) < 0)
			return r;
		if (k->item_check && (r = k->item_check(item, w->path, w->err)) < 0)
			return r;
		path_pop(w, saved);
	}
}

static int parse_value(struct walk *w, size_t idx, void *base)
{
	const struct key_desc *k = &keys[idx];
	switch (k->type) {
	case K_SECTION: {
		if (k->flags & F_PRESENT) {
			bool on = true;
			memcpy(fld(base, k), &on, sizeof(on));
		}
		if (is_null(&w->ev))
			return 0;
		if (w->ev.type != YAML_MAPPING_START_EVENT)
			return werr(w, "must be a mapping, got %s", event_kind(&w->ev));
		uint8_t seen[N_KEYS] = {0};
		return parse_section(w, k->path, base, seen);
	}
	case K_LIST:
		return parse_list(w, k, base);
	case K_MAP:
		return parse_map(w, k, base);
	default:
		return parse_scalar(w, k, base);
	}
}

/* The current event is the MAPPING_START of container `pattern`; reads up to its end. */
static int parse_section(struct walk *w, const char *pattern, void *base, uint8_t *seen)
{
	int r;
	for (;;) {
		if ((r = walk_next(w)) < 0)
			return r;
		if (w->ev.type == YAML_MAPPING_END_EVENT)
			return 0;
		if (w->ev.type != YAML_SCALAR_EVENT)
			return werr(w, "keys must be scalars, got %s", event_kind(&w->ev));
		const char *key = (const char *)w->ev.data.scalar.value;
		size_t kn = w->ev.data.scalar.length;
		size_t idx = N_KEYS;
		for (size_t i = 0; i < N_KEYS && idx == N_KEYS; i++) {
			const char *name = child_name(&keys[i], pattern);
			if (name && strlen(name) == kn && !memcmp(name, key, kn))
				idx = i;
		}
		size_t saved = w->plen;
		path_push_key(w, key, kn);
		if (idx == N_KEYS) {
			char allowed[512];
			size_t o = 0;
			allowed[0] = 0;
			for (size_t i = 0; i < N_KEYS; i++) {
				const char *name = child_name(&keys[i], pattern);
				if (name && o < sizeof(allowed)) {
					int n = snprintf(allowed + o, sizeof(allowed) - o, "%s%s",
							 o ? ", " : "", name);
					o += n > 0 ? (size_t)n : 0;
				}
			}
			return werr(w, "unknown key (allowed here: %s)", allowed);
		}
		if (seen[idx])
			return werr(w, "duplicate key");
		seen[idx] = 1;
		if ((r = walk_next(w)) < 0)
			return r;
		if ((r = parse_value(w, idx, base)) < 0)
			return r;
		path_pop(w, saved);
	}
}

/* Checks across sections, after the whole document is read. */
static int check_config(const struct pf_profcfg *cfg, struct pf_error *err)
{
	if (cfg->mode == PF_MODE_TRIGGERED && !cfg->slow_span.enabled && !cfg->high_cpu.enabled &&
	    !cfg->on_demand.enabled && !cfg->error_span.enabled)
		return pf_error_set(err, -EINVAL, "profiling.mode",
				    "triggered needs at least one enabled trigger "
				    "(profiling.triggers.slow_span, error_span, high_cpu or "
				    "on_demand)");
	return 0;
}

static int parse_document(struct walk *w, struct pf_profcfg *cfg)
{
	int r;
	if ((r = walk_next(w)) < 0) /* STREAM_START */
		return r;
	if ((r = walk_next(w)) < 0)
		return r;
	if (w->ev.type == YAML_STREAM_END_EVENT)
		return 0;	    /* empty: all defaults */
	if ((r = walk_next(w)) < 0) /* the root node after DOCUMENT_START */
		return r;
	if (w->ev.type == YAML_MAPPING_START_EVENT) {
		uint8_t seen[N_KEYS] = {0};
		if ((r = parse_section(w, "", cfg, seen)) < 0)
			return r;
	} else if (!is_null(&w->ev)) {
		return werr(w, "the document must be a mapping (keys profiling, labels), got %s",
			    event_kind(&w->ev));
	}
	if ((r = walk_next(w)) < 0) /* DOCUMENT_END */
		return r;
	if ((r = walk_next(w)) < 0)
		return r;
	if (w->ev.type != YAML_STREAM_END_EVENT)
		return werr(w, "only one YAML document is allowed (another starts at line %zu)",
			    w->ev.start_mark.line + 1);
	return check_config(cfg, w->err);
}

/* A redacted view sent back as a document would store the placeholder as a secret. */
static int check_no_placeholder(const struct pf_profcfg *cfg, struct pf_error *err)
{
	for (size_t i = 0; i < cfg->n_exporters; i++) {
		const struct pf_exporter *e = &cfg->exporters[i];
		for (size_t j = 0; j < e->n_headers; j++) {
			if (strcmp(e->headers[j].value, PF_PROFCFG_REDACTED) != 0)
				continue;
			char p[MAX_PATH];
			snprintf(p, sizeof(p), "profiling.exporters[%zu].headers.%s", i,
				 e->headers[j].key);
			return pf_error_set(err, -EINVAL, p,
					    "is the placeholder of a redacted secret, not a value; "
					    "set the real value or use headers_from_file");
		}
	}
	return 0;
}

static int parse(const char *text, size_t len, struct pf_profcfg **out, struct pf_error *err,
		 bool allow_placeholder)
{
	struct pf_error local = {0};
	if (!err)
		err = &local;
	*out = NULL;
	if (len > PF_PROFCFG_MAX_DOC)
		return pf_error_set(err, -E2BIG, "", "document is %zu bytes, over the limit of %zu",
				    len, PF_PROFCFG_MAX_DOC);
	struct pf_profcfg *cfg = pf_profcfg_new_default();
	if (!cfg)
		return pf_error_set(err, -ENOMEM, "", "out of memory");
	struct walk *w = calloc(1, sizeof(*w));
	if (!w) {
		pf_profcfg_free(cfg);
		return pf_error_set(err, -ENOMEM, "", "out of memory");
	}
	w->err = err;
	if (!yaml_parser_initialize(&w->yp)) {
		free(w);
		pf_profcfg_free(cfg);
		return pf_error_set(err, -ENOMEM, "", "out of memory");
	}
	yaml_parser_set_input_string(&w->yp, (const unsigned char *)(text ? text : ""),
				     text ? len : 0);
	int r = parse_document(w, cfg);
	if (r < 0 && !err->code) /* every failure path sets err; keep the contract anyway */
		pf_error_set(err, r, w->path, "invalid document");
	if (r == 0 && !allow_placeholder)
		r = check_no_placeholder(cfg, err);
	if (w->have_ev)
		yaml_event_delete(&w->ev);
	yaml_parser_delete(&w->yp);
	free(w);
	if (r < 0) {
		pf_profcfg_free(cfg);
		return r;
	}
	*out = cfg;
	return 0;
}

int pf_profcfg_parse(const char *text, size_t len, struct pf_profcfg **out, struct pf_error *err)
{
	return parse(text, len, out, err, false);
}

/* ---- equality ---- */

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* Maps compare as sets: keys are unique, so same size and every pair found is enough. */
static bool map_eq(const struct pf_kv_str *a, size_t na, const struct pf_kv_str *b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++) {
		bool found = false;
		for (size_t j = 0; j < nb && !found; j++)
			found = str_eq(a[i].key, b[j].key) && str_eq(a[i].value, b[j].value);
		if (!found)
			return false;
	}
	return true;
}

static bool section_present(const void *base, const struct key_desc *k)
{
	bool on;
	memcpy(&on, fld(base, k), sizeof(on));
	return on;
}

static bool fields_eq(const char *pattern, const void *a, const void *b)
{
	for (size_t i = 0; i < N_KEYS; i++) {
		const struct key_desc *k = &keys[i];
		if (!child_name(k, pattern))
			continue;
		switch (k->type) {
		case K_SECTION:
			if ((k->flags & F_PRESENT) && section_present(a, k) != section_present(b, k))
				return false;
			if (!fields_eq(k->path, a, b))
				return false;
			break;
		case K_BOOL:
		case K_U32:
		case K_U64:
		case K_ENUM:
			if (get_u(a, k) != get_u(b, k))
				return false;
			break;
		case K_DOUBLE:
			if (get_d(a, k) != get_d(b, k))
				return false;
			break;
		case K_STRING:
			if (!str_eq(get_ptr(a, k->off), get_ptr(b, k->off)))
				return false;
			break;
		case K_MAP:
			if (!map_eq(get_ptr(a, k->off), get_count(a, k), get_ptr(b, k->off),
				    get_count(b, k)))
				return false;
			break;
		case K_LIST: {
			size_t n = get_count(a, k);
			if (n != get_count(b, k))
				return false;
			char ip[MAX_PATH];
			item_pattern(ip, sizeof(ip), k);
			const char *ia = get_ptr(a, k->off), *ib = get_ptr(b, k->off);
			for (size_t j = 0; j < n; j++)
				if (!fields_eq(ip, ia + j * k->elem_size, ib + j * k->elem_size))
					return false;
			break;
		}
		}
	}
	return true;
}

bool pf_profcfg_equal(const struct pf_profcfg *a, const struct pf_profcfg *b)
{
	if (!a || !b)
		return a == b;
	return fields_eq("", a, b);
}

/* ---- the effective-config emitter ---- */

/* A YAML double-quoted scalar (YAML 1.1 §5.7 escapes): C0/C1 controls, DEL, the YAML line
 * breaks NEL/LS/PS and the BOM are escaped, other printable UTF-8 is kept as is. */
static int emit_quoted(struct pf_buf *out, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n = strlen(str);
	int r = pf_buf_putc(out, '"');
	for (size_t i = 0; i < n && r == 0;) {
		uint32_t cp;
		size_t l = pf_utf8_decode(s + i, n - i, &cp);
		if (!l)
			return -EINVAL;
		if (cp == '"')
			r = pf_buf_append_str(out, "\\\"");
		else if (cp == '\\')
			r = pf_buf_append_str(out, "\\\\");
		else if (cp == '\n')
			r = pf_buf_append_str(out, "\\n");
		else if (cp == '\t')
			r = pf_buf_append_str(out, "\\t");
		else if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 ||
			 cp == 0xfeff || cp == 0xfffe || cp == 0xffff)
			r = pf_buf_printf(out, "\\u%04x", (unsigned)cp);
		else
			r = pf_buf_append(out, s + i, l);
		i += l;
	}
	return r ? r : pf_buf_putc(out, '"');
}

static int emit_double(struct pf_buf *out, double d)
{
	char tmp[40];
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*g", prec, d);
		if (strtod(tmp, NULL) == d)
			break;
	}
	if (!strpbrk(tmp, ".eEn"))
		return pf_buf_printf(out, "%s.0", tmp);
	return pf_buf_append_str(out, tmp);
}

/* Output with a sticky error: after the first failure every call is a no-op and the caller
 * looks at o->err once at the end. */
struct out {
	struct pf_buf *b;
	int err;
	bool redact; /* F_SECRET values written as PF_PROFCFG_REDACTED */
};

static void out_printf(struct out *o, const char *fmt, ...) PF_PRINTF(2, 3);
static void out_printf(struct out *o, const char *fmt, ...)
{
	if (o->err)
		return;
	va_list ap;
	va_start(ap, fmt);
	o->err = pf_buf_vprintf(o->b, fmt, ap);
	va_end(ap);
}

static void out_quoted(struct out *o, const char *s)
{
	if (!o->err)
		o->err = emit_quoted(o->b, s);
}

static void out_double(struct out *o, double d)
{
	if (!o->err)
		o->err = emit_double(o->b, d);
}

/* Keys of container `pattern` at column `ind`; for a list item, the first key goes after
 * "- " at column ind - 2. */
static void emit_fields(struct out *o, const char *pattern, const void *base, int ind,
			bool list_item)
{
	int discrim = list_item ? item_discrim(pattern, base) : -1;
	bool first = true;
	for (size_t i = 0; i < N_KEYS && !o->err; i++) {
		const struct key_desc *k = &keys[i];
		const char *name = child_name(k, pattern);
		if (!name || !applies_to(k, discrim))
			continue;
		/* unset optional strings and absent tracked sections are left out */
		if ((k->type == K_STRING && !get_ptr(base, k->off)) ||
		    (k->type == K_SECTION && (k->flags & F_PRESENT) && !section_present(base, k)))
			continue;
		if (list_item && first)
			out_printf(o, "%*s- %s:", ind - 2, "", name);
		else
			out_printf(o, "%*s%s:", ind, "", name);
		first = false;
		switch (k->type) {
		case K_SECTION:
			out_printf(o, "\n");
			emit_fields(o, k->path, base, ind + 2, false);
			break;
		case K_BOOL:
			out_printf(o, " %s\n", get_u(base, k) ? "true" : "false");
			break;
		case K_U32:
		case K_U64:
			out_printf(o, " %" PRIu64 "\n", get_u(base, k));
			break;
		case K_ENUM: {
			uint64_t v = get_u(base, k);
			if (v >= k->n_names)
				o->err = -EINVAL;
			else
				out_printf(o, " %s\n", k->names[v]);
			break;
		}
		case K_DOUBLE:
			out_printf(o, " ");
			out_double(o, get_d(base, k));
			out_printf(o, "\n");
			break;
		case K_STRING: {
			/* NULL (unset) strings were left out above */
			out_printf(o, " ");
			out_quoted(o, get_ptr(base, k->off));
			out_printf(o, "\n");
			break;
		}
		case K_MAP: {
			const struct pf_kv_str *kv = get_ptr(base, k->off);
			size_t n = get_count(base, k);
			out_printf(o, "%s", n ? "\n" : " {}\n");
			for (size_t j = 0; j < n; j++) {
				out_printf(o, "%*s", ind + 2, "");
				out_quoted(o, kv[j].key);
				out_printf(o, ": ");
				out_quoted(o, o->redact && (k->flags & F_SECRET)
						  ? PF_PROFCFG_REDACTED
						  : kv[j].value);
				out_printf(o, "\n");
			}
			break;
		}
		case K_LIST: {
			char ip[MAX_PATH];
			item_pattern(ip, sizeof(ip), k);
			const char *arr = get_ptr(base, k->off);
			size_t n = get_count(base, k);
			out_printf(o, "%s", n ? "\n" : " []\n");
			for (size_t j = 0; j < n; j++)
				emit_fields(o, ip, arr + j * k->elem_size, ind + 4, true);
			break;
		}
		}
	}
}

static int emit_yaml(const struct pf_profcfg *cfg, struct pf_buf *out, bool redact)
{
	if (!cfg || !out)
		return -EINVAL;
	struct out o = {.b = out, .redact = redact};
	size_t start = out->len;
	emit_fields(&o, "", cfg, 0, false);
	if (o.err < 0) { /* leave the buffer as it was */
		out->len = start;
		if (out->data)
			out->data[start] = 0;
	}
	return o.err;
}

int pf_profcfg_emit_yaml(const struct pf_profcfg *cfg, struct pf_buf *out)
{
	return emit_yaml(cfg, out, false);
}

int pf_profcfg_emit_yaml_redacted(const struct pf_profcfg *cfg, struct pf_buf *out)
{
	return emit_yaml(cfg, out, true);
}

int pf_profcfg_redact_yaml(const char *text, size_t len, struct pf_buf *out)
{
	struct pf_profcfg *cfg = NULL;
	struct pf_error err = {0};
	int r = parse(text, len, &cfg, &err, true); /* a view already redacted stays so */
	if (r < 0)
		return r;
	bool secrets = false;
	for (size_t i = 0; i < cfg->n_exporters && !secrets; i++)
		secrets = cfg->exporters[i].n_headers > 0;
	if (secrets)
		r = pf_profcfg_emit_yaml_redacted(cfg, out);
	else
		r = pf_buf_append(out, text, len) < 0 ? -ENOMEM : 0;
	pf_profcfg_free(cfg);
	return r;
}

/* ---- the Markdown reference ---- */

static const char *doc_type(const struct key_desc *k, char *buf, size_t n)
{
	switch (k->type) {
	case K_SECTION:
		return "mapping";
	case K_BOOL:
		return "bool";
	case K_U32:
	case K_U64:
		return "integer";
	case K_DOUBLE:
		return "number";
	case K_STRING:
		return "string";
	case K_ENUM:
		return "enum";
	case K_LIST:
		snprintf(buf, n, "list of mappings (at most %zu)", k->max_items);
		return buf;
	case K_MAP:
		snprintf(buf, n, "map string → string (at most %zu)", k->max_items);
		return buf;
	}
	return "";
}

static void doc_row(struct out *o, const struct key_desc *k)
{
	char tbuf[64];
	out_printf(o, "| `%s` | %s | ", k->path, doc_type(k, tbuf, sizeof(tbuf)));

	/* Default */
	if (k->flags & F_REQUIRED) {
		out_printf(o, "*required*");
	} else if (k->type == K_BOOL) {
		out_printf(o, "`%s`", k->def_u ? "true" : "false");
	} else if (k->type == K_U32 || k->type == K_U64) {
		out_printf(o, "`%" PRIu64 "`", k->def_u);
	} else if (k->type == K_DOUBLE) {
		out_printf(o, "`");
		out_double(o, k->def_d);
		out_printf(o, "`");
	} else if (k->type == K_ENUM) {
		out_printf(o, "`%s`", k->names[k->def_u]);
	} else if (k->type == K_LIST) {
		out_printf(o, "`[]`");
	} else if (k->type == K_MAP) {
		out_printf(o, "`{}`");
	} else if (k->type == K_STRING && k->def_s) {
		out_printf(o, "`%s`", k->def_s);
	} else if (k->type == K_STRING) {
		out_printf(o, "*unset*");
	}
	out_printf(o, " | ");

	/* Allowed */
	if (k->type == K_U32 || k->type == K_U64) {
		out_printf(o, "%" PRIu64 "..%" PRIu64, k->min_u, k->max_u);
	} else if (k->type == K_DOUBLE) {
		out_printf(o, "%g..%g", k->min_d, k->max_d);
	} else if (k->type == K_BOOL) {
		out_printf(o, "`true`/`false` (also yes/no, on/off)");
	} else if (k->names) {
		for (size_t i = 0; i < k->n_names; i++)
			out_printf(o, "%s`%s`", i ? ", " : "", k->names[i]);
	} else if (k->type == K_STRING) {
		out_printf(o, "%s%sat most %d bytes", k->check_desc ? k->check_desc : "",
			   k->check_desc ? ", " : "", MAX_STR);
	} else if (k->type == K_MAP) {
		out_printf(o, "keys and values at most %d bytes", MAX_STR);
	}

	/* Description */
	out_printf(o, " | %s", k->doc);
	if (k->applies) {
		out_printf(o, " Only for `type`:");
		for (size_t t = 0; t < PF_ARRAY_SIZE(exporter_names); t++)
			if (k->applies & (1u << t))
				out_printf(o, " `%s`", exporter_names[t]);
		out_printf(o, ".");
	}
	out_printf(o, " |\n");
}

int pf_profcfg_doc_markdown(struct pf_buf *out)
{
	struct out o = {.b = out};
	out_printf(&o,
		   "## Key reference\n\n"
		   "Generated from the key table in `common/src/profcfg.c`. `[]` stands for a "
		   "list index (`profiling.exporters[1].endpoint` in error messages).\n\n"
		   "Rules for the whole document:\n\n"
		   "- One YAML document of at most %zu bytes, a mapping with the keys `profiling` "
		   "and `labels`. An empty document, `profiling:` and `profiling: {}` give all "
		   "defaults.\n"
		   "- Unknown keys, duplicate keys, wrong types and out-of-range values are errors "
		   "naming the key path.\n"
		   "- Anchors, aliases and tags are refused.\n"
		   "- Integers and numbers are plain decimal scalars (not quoted); strings are at "
		   "most %d bytes.\n"
		   "- Exporter keys apply by `type`; setting a key the type does not use is an "
		   "error.\n\n"
		   "| Key | Type | Default | Allowed | Description |\n"
		   "|---|---|---|---|---|\n",
		   PF_PROFCFG_MAX_DOC, MAX_STR);
	for (size_t i = 0; i < N_KEYS; i++)
		doc_row(&o, &keys[i]);
	return o.err;
}
