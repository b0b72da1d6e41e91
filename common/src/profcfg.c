/* profcfg.c — see pf/profcfg.h.
 *
 * One static table (profcfg_keys[] below) describes every key of the document: its path
 * pattern ("profiling.exporters[].endpoint"), type, default, range, allowed values, where it
 * lives in the struct and its doc text. The one table drives parsing, validation, defaults,
 * equality, the effective-config output and the docs: profcfg_parse.c, profcfg_emit.c and
 * profcfg_doc.c walk it (profcfg_int.h); nothing else knows the key names. */
#include "pf/profcfg.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pf/regex.h"
#include "profcfg_int.h"

/* ---- enum names (index = enum value) ---- */

static const char *const mode_names[] = {"continuous", "triggered"};
static const char *const prof_type_names[] = {"cpu", "off_cpu", "wall", "alloc"};
/* slow_span.profile_type: the first three (a span's profile is cut from recent samples) */
static const char *const span_type_names[] = {"cpu", "off_cpu", "wall"};
static const char *const match_names[] = {"strict", "regexp"};
static const char *const relabel_action_names[] = {"replace", "drop", "keep", "labeldrop"};
static const char *const exporter_names[] = {"otlp_http", "pyroscope", "file", "otlp_grpc"};
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
bool profcfg_name_matches(const char *name, const char *s, size_t n)
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
_Static_assert(sizeof(enum pf_prof_type) == sizeof(int), "enums are stored as int");

const char *pf_prof_mode_name(enum pf_prof_mode m)
{
	return (unsigned)m < PF_ARRAY_SIZE(mode_names) ? mode_names[m] : "unknown";
}

const char *pf_prof_type_name(enum pf_prof_type t)
{
	return (unsigned)t < PF_ARRAY_SIZE(prof_type_names) ? prof_type_names[t] : "unknown";
}

int pf_prof_type_parse(const char *name, enum pf_prof_type *out)
{
	for (size_t i = 0; name && i < PF_ARRAY_SIZE(prof_type_names); i++)
		if (!strcmp(name, prof_type_names[i])) {
			*out = (enum pf_prof_type)i;
			return 0;
		}
	return -EINVAL;
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

const char *pf_relabel_action_name(enum pf_relabel_action a)
{
	return (unsigned)a < PF_ARRAY_SIZE(relabel_action_names) ? relabel_action_names[a]
								   : "unknown";
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

/* A relabel rule: its regex compiles within pf/regex.h's bounds; source is there when the
 * action reads a value. */
static int relabel_item_check(const void *item, const char *path, struct pf_error *err)
{
	const struct pf_relabel_rule *r = item;
	char p[MAX_PATH];
	if (r->action != PF_RELABEL_LABELDROP && !r->source) {
		snprintf(p, sizeof(p), "%s.source", path);
		return pf_error_set(err, -EINVAL, p, "is required for action %s",
				    relabel_action_names[r->action]);
	}
	snprintf(p, sizeof(p), "%s.regex", path);
	regex_t re;
	struct pf_error rerr = {0};
	int rc = pf_regex_compile(&re, r->regex ? r->regex : "(.*)", REG_EXTENDED, &rerr);
	if (rc == -ENOMEM)
		return pf_error_set(err, -ENOMEM, p, "out of memory");
	if (rc < 0)
		return pf_error_set(err, -EINVAL, p, "regexp does not compile: %s", rerr.msg);
	regfree(&re);
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
		known = known || profcfg_name_matches(filter_keys[i], f->key, strlen(f->key));
	if (!known) {
		char allowed[512];
		profcfg_names_list(allowed, sizeof(allowed), filter_keys,
				   PF_ARRAY_SIZE(filter_keys));
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
#define STRK(p, T, fld, def, d)                                                                    \
	{                                                                                          \
		.path = p, .type = K_STRING, .off = offsetof(T, fld), .def_s = def, .doc = d       \
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

#define NET_TYPES                                                                                  \
	((1u << PF_EXPORTER_OTLP_HTTP) | (1u << PF_EXPORTER_PYROSCOPE) | (1u << PF_EXPORTER_OTLP_GRPC))
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

const struct key_desc profcfg_keys[] = {
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
    SECTION("profiling.interpreters", "Stacks of interpreted and JIT-compiled languages."),
    BOOLK("profiling.interpreters.python", CFG, interpreters.python, true,
	  "Name the Python functions of CPython 3.9-3.13 processes (frames of type cpython) "
	  "in place of the interpreter's eval loop; false keeps their native stacks."),
    BOOLK("profiling.interpreters.nodejs", CFG, interpreters.nodejs, true,
	  "Name the JavaScript functions of node processes (frames of type v8js) in place of "
	  "V8's JIT and interpreter addresses; false keeps their native stacks."),
    BOOLK("profiling.interpreters.java", CFG, interpreters.java, true,
	  "Name the code of HotSpot JVMs (OpenJDK; frames of type jvm) from the JVM's own "
	  "tables: compiled Java methods as package.Class.method, the interpreter and stubs "
	  "by name, in place of [anon] JIT addresses; false keeps their native frames."),
    SECTION("profiling.off_cpu",
	    "Off-CPU profiles: where the profiled threads waited, from the scheduler's switches, "
	    "through the same filters and unwinders as CPU samples."),
    BOOLK("profiling.off_cpu.enabled", CFG, off_cpu.enabled, false,
	  "Record the stack of a thread switched out and, when it runs again, one sample weighted "
	  "by the nanoseconds it was away; exported as profiles of type off_cpu beside the CPU "
	  "ones. Samples carry profleet.off_cpu.reason: blocked (it waited) or preempted (it was "
	  "runnable, so CPU contention)."),
    U32K("profiling.off_cpu.min_block_us", CFG, off_cpu.min_block_us, 1000, 1, 60000000,
	 "Waits shorter than this (microseconds) are not recorded."),
    {.path = "profiling.off_cpu.probability",
     .type = K_DOUBLE,
     .off = offsetof(CFG, off_cpu.probability),
     .def_d = 1.0,
     .min_d = 0.0001,
     .max_d = 1,
     .doc = "Share of switch-outs followed (decided at random in the kernel); the values are "
	    "divided by it, so a profile still estimates the whole off-CPU time."},
    SECTION("profiling.alloc",
	    "Allocation profiles (captures of profile type alloc): uprobes on the allocator entry "
	    "points (malloc, calloc, realloc, free, posix_memalign, aligned_alloc; libc, jemalloc "
	    "or tcmalloc, whichever the process maps) of the captured processes, for the "
	    "capture's duration only."),
    U32K("profiling.alloc.sample_bytes", CFG, alloc.sample_bytes, 524288, 1024, 1073741824,
	 "Mean bytes allocated between two samples (a Poisson process over the bytes, drawn in "
	 "the kernel); each sample is weighted by the unbiased estimate of what it stands for."),
    U32K("profiling.alloc.max_calls_per_second", CFG, alloc.max_calls_per_second, 1000000,
	 1000, 100000000,
	 "Guard: when the probed calls of a capture pass this many per second, its probes are "
	 "detached and the capture's result says so (its profile covers the time before)."),
    BOOLK("profiling.redact_secrets", CFG, redact_secrets, true,
	  "Before any export or capture upload, attribute values that look like secrets "
	  "(token=, password=, secret=, api_key=, a Bearer credential, an e-mail address) have "
	  "that part replaced with [REDACTED]; applied before profiling.relabel. false turns "
	  "it off."),
    {.path = "profiling.relabel",
     .type = K_LIST,
     .off = offsetof(CFG, relabel),
     .count_off = offsetof(CFG, n_relabel),
     .elem_size = sizeof(struct pf_relabel_rule),
     .max_items = PF_PROFCFG_MAX_RELABEL,
     .item_check = relabel_item_check,
     .doc = "Rules applied in order to every profile's resource attributes in the agent, "
	    "before any export or capture upload (Prometheus relabel_configs on attributes). "
	    "Attributes named profleet.* are the agent's own and are never changed."},
    STRK("profiling.relabel[].source", struct pf_relabel_rule, source, NULL,
	 "The attribute whose value the regex matches (required but for labeldrop)."),
    STRK("profiling.relabel[].regex", struct pf_relabel_rule, regex, "(.*)",
	 "POSIX extended regular expression matched against the whole value (labeldrop: "
	 "against each attribute key), within the bounds listed in docs/api.md: at most "
	 "256 bytes, no stacked quantifiers, no back-references."),
    ENUMK("profiling.relabel[].action", struct pf_relabel_rule, action, PF_RELABEL_REPLACE,
	  relabel_action_names,
	  "replace writes replacement to target when source matches; drop removes the "
	  "process's profile when source matches; keep removes it unless source matches; "
	  "labeldrop removes every attribute whose key matches regex."),
    STRK("profiling.relabel[].target", struct pf_relabel_rule, target, NULL,
	 "replace: the attribute written (default: source)."),
    STRK("profiling.relabel[].replacement", struct pf_relabel_rule, replacement, "$1",
	 "replace: the value written; $0 is the whole match, $1..$9 its groups. An empty "
	 "result removes the target attribute."),
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
    ENUMK("profiling.triggers.slow_span.profile_type", CFG, slow_span.profile_type, PF_PROF_WALL,
	  span_type_names,
	  "What a span's profile (slow_span and error_span) weighs: wall is the span's thread "
	  "on and off the CPU together, in nanoseconds, so the profile's total is the span's "
	  "duration and a wait sits under the call that waited (it follows the profiled "
	  "processes' context switches in the kernel while a span trigger is on, as "
	  "profiling.off_cpu does, with its min_block_us); cpu only its CPU samples; off_cpu "
	  "only its waits."),
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
     .doc = "OTLP/HTTP profiles URL, the Pyroscope server URL, or for otlp_grpc "
	    "http://HOST[:PORT] (plain text) or https://HOST[:PORT] (TLS), port 4317 by default, "
	    "no path."},
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

const size_t profcfg_n_keys = PF_ARRAY_SIZE(profcfg_keys);
_Static_assert(PF_ARRAY_SIZE(profcfg_keys) <= PROFCFG_MAX_KEYS, "PROFCFG_MAX_KEYS too small");

/* ---- table helpers ---- */

void profcfg_names_list(char *buf, size_t n, const char *const *names, size_t count)
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

/* The last segment of k's path when k is a direct child of container pattern `parent`
 * ("" is the document root, "a.b[]" the items of list a.b), else NULL. */
const char *profcfg_child_name(const struct key_desc *k, const char *parent)
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











static int set_default_str(void *base, const struct key_desc *k)
{
	char *dup = strdup(k->def_s);
	if (!dup)
		return -ENOMEM;
	free(get_ptr(base, k->off));
	set_ptr(base, k->off, dup);
	return 0;
}

int profcfg_fill_defaults(const char *pattern, void *base)
{
	int rc = 0;
	for (size_t i = 0; i < profcfg_n_keys; i++) {
		const struct key_desc *k = &profcfg_keys[i];
		if (!profcfg_child_name(k, pattern))
			continue;
		if (k->type == K_SECTION) {
			int r = profcfg_fill_defaults(k->path, base);
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
	for (size_t i = 0; i < profcfg_n_keys; i++) {
		const struct key_desc *k = &profcfg_keys[i];
		if (!profcfg_child_name(k, pattern))
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
	if (profcfg_fill_defaults("", cfg) < 0) {
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
int profcfg_item_discrim(const char *ipattern, const void *item)
{
	for (size_t i = 0; i < profcfg_n_keys; i++)
		if ((profcfg_keys[i].flags & F_DISCRIM) &&
		    profcfg_child_name(&profcfg_keys[i], ipattern))
			return (int)get_u(item, &profcfg_keys[i]);
	return -1;
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


static bool fields_eq(const char *pattern, const void *a, const void *b)
{
	for (size_t i = 0; i < profcfg_n_keys; i++) {
		const struct key_desc *k = &profcfg_keys[i];
		if (!profcfg_child_name(k, pattern))
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
