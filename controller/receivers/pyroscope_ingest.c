/* pyroscope_ingest.c — see pyroscope_ingest.h. */
#include "receivers/pyroscope_ingest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "otlp_profiles.h"
#include "pf/array.h"
#include "pf/compiler.h"
#include "pf/gzip.h"
#include "pf/utf8.h"
#include "pprof_codec.h"
#include "profstore/profstore.h"

#define NS_PER_S 1000000000ull
#define DEFAULT_SAMPLE_RATE 100u
#define MAX_PART_HEADERS 8192
#define MAX_DISPLAY_NAME 128

/* ---- The profile types of the text formats (the name's last dot-separated part). */

enum ptype_kind {
	PT_CPU,	   /* the implicit CPU profile: frequency = sampleRate, weight = count */
	PT_SCALED, /* count × 1e9 / sampleRate nanoseconds */
	PT_PLAIN,  /* one sample type, weight = count */
};

struct ptype {
	const char *suffix;
	const char *type;
	const char *unit;
	enum ptype_kind kind;
};

static const struct ptype ptypes[] = {
    {"cpu", NULL, NULL, PT_CPU},
    {"itimer", NULL, NULL, PT_CPU},
    {"wall", "wall", "nanoseconds", PT_SCALED},
    {"inuse_objects", "inuse_objects", "count", PT_PLAIN},
    {"inuse_space", "inuse_space", "bytes", PT_PLAIN},
    {"alloc_objects", "alloc_objects", "count", PT_PLAIN},
    {"alloc_space", "alloc_space", "bytes", PT_PLAIN},
    {"goroutines", "goroutine", "count", PT_PLAIN},
    {"mutex_count", "contentions", "count", PT_PLAIN},
    {"mutex_duration", "delay", "nanoseconds", PT_PLAIN},
    {"block_count", "contentions", "count", PT_PLAIN},
    {"block_duration", "delay", "nanoseconds", PT_PLAIN},
    {"lock_count", "contentions", "count", PT_PLAIN},
    {"lock_duration", "delay", "nanoseconds", PT_PLAIN},
    {"alloc_in_new_tlab_objects", "alloc_in_new_tlab_objects", "count", PT_PLAIN},
    {"alloc_in_new_tlab_bytes", "alloc_in_new_tlab_bytes", "bytes", PT_PLAIN},
    {"alloc_outside_tlab_objects", "alloc_outside_tlab_objects", "count", PT_PLAIN},
    {"alloc_outside_tlab_bytes", "alloc_outside_tlab_bytes", "bytes", PT_PLAIN},
    {"live", "live", "count", PT_PLAIN},
    {"exceptions", "exceptions", "count", PT_PLAIN},
};
#define N_PTYPES (sizeof(ptypes) / sizeof(ptypes[0]))

const char *const *pf_pyroscope_type_names(void)
{
	static const char *names[N_PTYPES + 1];
	for (size_t i = 0; i < N_PTYPES; i++)
		names[i] = ptypes[i].suffix;
	names[N_PTYPES] = NULL;
	return names;
}

static const struct ptype *ptype_find(const char *suffix)
{
	for (size_t i = 0; i < N_PTYPES; i++)
		if (strcmp(ptypes[i].suffix, suffix) == 0)
			return &ptypes[i];
	return NULL;
}

/* ---- The query. */

enum format { FMT_FOLDED, FMT_LINES, FMT_PPROF };

struct label {
	const char *key;
	const char *value;
};

struct params {
	char name[PF_PYROSCOPE_MAX_NAME + 1]; /* the name, cut in place */
	const char *app;
	size_t n_labels;
	struct label labels[PF_PYROSCOPE_MAX_LABELS];
	uint64_t from_ns, until_ns;
	uint32_t rate;
	const char *spy;
	enum format format;
	const struct ptype *type; /* text formats */
};

static const char *arg(const struct pf_pyroscope_request *req, const char *key)
{
	size_t kl = strlen(key);
	for (size_t i = 0; i < req->n_args; i++)
		if (req->args[i] && strncmp(req->args[i], key, kl) == 0 && req->args[i][kl] == '=')
			return req->args[i] + kl + 1;
	return NULL;
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		s[--n] = 0;
	return s;
}

static bool key_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.';
}

static bool app_char(unsigned char c)
{
	return key_char(c) || c == '-' || c == '/' || c == ':';
}

static int add_label(struct params *p, char *k, char *v, struct pf_error *err)
{
	k = trim(k);
	v = trim(v);
	if (!*k)
		return pf_error_set(err, -EINVAL, "name", "a label has an empty key");
	for (const char *c = k; *c; c++)
		if (!key_char((unsigned char)*c))
			return pf_error_set(err, -EINVAL, "name",
					    "label key '%.64s' has a character outside "
					    "[A-Za-z0-9_.]",
					    k);
	if (!pf_utf8_clean(v, strlen(v)))
		return pf_error_set(err, -EINVAL, "name",
				    "the value of label '%.64s' is not UTF-8 text without "
				    "control characters",
				    k);
	for (size_t i = 0; i < p->n_labels; i++) {
		if (strcmp(p->labels[i].key, k) == 0) { /* the last one wins */
			p->labels[i] = p->labels[--p->n_labels];
			break;
		}
	}
	if (!*v)
		return 0; /* an empty value drops the label */
	if (p->n_labels == PF_PYROSCOPE_MAX_LABELS)
		return pf_error_set(err, -EINVAL, "name", "more than %d labels",
				    PF_PYROSCOPE_MAX_LABELS);
	p->labels[p->n_labels++] = (struct label){k, v};
	return 0;
}

/* "app{k=v,...}" into p->app and p->labels. */
static int parse_name(const char *s, struct params *p, struct pf_error *err)
{
	if (!s || !*s)
		return pf_error_set(err, -EINVAL, "name",
				    "required: the application name and its labels");
	size_t len = strlen(s);
	if (len > PF_PYROSCOPE_MAX_NAME)
		return pf_error_set(err, -EINVAL, "name", "longer than %d bytes",
				    PF_PYROSCOPE_MAX_NAME);
	memcpy(p->name, s, len + 1);
	char *brace = strchr(p->name, '{');
	if (brace) {
		*brace = 0;
		char *c = brace + 1;
		bool closed = false;
		while (*c && !closed) {
			char *start = c;
			while (*c && *c != ',' && *c != '}')
				c++;
			closed = *c == '}';
			if (*c)
				*c++ = 0;
			char *eq = strchr(start, '=');
			if (!eq) {
				if (*trim(start))
					return pf_error_set(err, -EINVAL, "name",
							    "label '%.64s' has no '='",
							    trim(start));
				continue;
			}
			*eq = 0;
			int rc = add_label(p, start, eq + 1, err);
			if (rc < 0)
				return rc;
		}
		if (!closed)
			return pf_error_set(err, -EINVAL, "name",
					    "the labels are not closed with '}'");
		if (*trim(c))
			return pf_error_set(err, -EINVAL, "name", "'%.32s' after the labels' '}'",
					    trim(c));
	}
	p->app = trim(p->name);
	if (!*p->app)
		return pf_error_set(err, -EINVAL, "name", "the application name is empty");
	for (const char *c = p->app; *c; c++)
		if (!app_char((unsigned char)*c))
			return pf_error_set(err, -EINVAL, "name",
					    "the application name has a character outside "
					    "[A-Za-z0-9_.:/-]");
	return 0;
}

/* Unix time in s, ms, us or ns (by magnitude) into ns. */
static int parse_time(const struct pf_pyroscope_request *req, const char *key, uint64_t *out,
		      struct pf_error *err)
{
	const char *s = arg(req, key);
	if (!s || !*s) {
		*out = (uint64_t)(req->now_ms > 0 ? req->now_ms : 0) * 1000000u;
		return 0;
	}
	uint64_t v = 0;
	size_t i = 0;
	for (; s[i]; i++) {
		if (s[i] < '0' || s[i] > '9' || i >= 19)
			return pf_error_set(err, -EINVAL, key,
					    "must be a unix time in seconds, got '%.32s'", s);
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v < 100000000000ull)
		v *= NS_PER_S;
	else if (v < 100000000000000ull)
		v *= 1000000u;
	else if (v < 100000000000000000ull)
		v *= 1000u;
	*out = v;
	return 0;
}

static int parse_params(const struct pf_pyroscope_request *req, struct params *p,
			struct pf_error *err)
{
	int rc = parse_name(arg(req, "name"), p, err);
	if (rc == 0)
		rc = parse_time(req, "from", &p->from_ns, err);
	if (rc == 0)
		rc = parse_time(req, "until", &p->until_ns, err);
	if (rc < 0)
		return rc;
	if (p->until_ns < p->from_ns)
		return pf_error_set(err, -EINVAL, "until", "before from");
	const char *sr = arg(req, "sampleRate");
	p->rate = DEFAULT_SAMPLE_RATE;
	if (sr && *sr) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(sr, &end, 10);
		if (errno || *end || sr[0] < '0' || sr[0] > '9' || v < 1 ||
		    v > PF_PYROSCOPE_MAX_SAMPLE_RATE)
			return pf_error_set(err, -EINVAL, "sampleRate",
					    "must be 1..%u Hz, got '%.32s'",
					    PF_PYROSCOPE_MAX_SAMPLE_RATE, sr);
		p->rate = (uint32_t)v;
	}
	p->spy = arg(req, "spyName");
	if (p->spy && (!*p->spy || strlen(p->spy) > 64 || !pf_utf8_clean(p->spy, strlen(p->spy))))
		return pf_error_set(err, -EINVAL, "spyName", "must be 1..64 bytes of UTF-8 text");
	const char *f = arg(req, "format");
	bool multipart = req->content_type && strcasestr(req->content_type, "multipart/form-data");
	if (multipart || (f && strcmp(f, "pprof") == 0))
		p->format = FMT_PPROF;
	else if (!f || !*f || strcmp(f, "folded") == 0 || strcmp(f, "collapsed") == 0)
		p->format = FMT_FOLDED;
	else if (strcmp(f, "lines") == 0)
		p->format = FMT_LINES;
	else
		return pf_error_set(err, -EINVAL, "format",
				    "'%.32s' is not supported (folded, lines or pprof)", f);
	if (p->format == FMT_PPROF)
		return 0;
	char *dot = strrchr(p->app, '.');
	const char *suffix = dot ? dot + 1 : "cpu";
	p->type = ptype_find(suffix);
	if (!p->type)
		return pf_error_set(err, -EINVAL, "name",
				    "unknown profile type '%.64s' (the part after the last "
				    "'.': cpu, wall, alloc_objects, inuse_space, ...)",
				    suffix);
	if (dot)
		*dot = 0;
	if (!*p->app)
		return pf_error_set(err, -EINVAL, "name", "the application name is empty");
	return 0;
}

/* ---- The text formats. */

static uint64_t fnv1a(const void *p, size_t n, uint64_t h)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 0x100000001b3ull;
	return h;
}
#define FNV_SEED 0xcbf29ce484222325ull

struct name_ref {
	const char *s; /* into the body */
	uint32_t n;
};

struct stack_ref {
	size_t off; /* into ids, leaf first */
	uint32_t n;
	uint64_t count;
};

struct text {
	struct name_ref *names;
	size_t n_names, cap_names;
	uint32_t *name_ht; /* open addressing, entries index + 1 */
	size_t name_ht_cap;
	uint32_t *ids;
	size_t n_ids, cap_ids;
	struct stack_ref *stacks;
	size_t n_stacks, cap_stacks;
	uint32_t *stack_ht;
	size_t stack_ht_cap;
	uint64_t total;
};

static void text_release(struct text *t)
{
	free(t->names);
	free(t->name_ht);
	free(t->ids);
	free(t->stacks);
	free(t->stack_ht);
}

/* A table of capacity cap (a power of two, at least twice its entries) for n + 1 entries. */
static int ht_fit(uint32_t **ht, size_t *cap, size_t n, uint64_t (*hash)(struct text *, uint32_t),
		  struct text *t)
{
	if ((n + 1) * 2 <= *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 1024;
	uint32_t *h = calloc(c, sizeof(*h));
	if (!h)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		size_t k = (size_t)hash(t, (uint32_t)i) & (c - 1);
		while (h[k])
			k = (k + 1) & (c - 1);
		h[k] = (uint32_t)i + 1;
	}
	free(*ht);
	*ht = h;
	*cap = c;
	return 0;
}

static uint64_t name_hash(struct text *t, uint32_t i)
{
	return fnv1a(t->names[i].s, t->names[i].n, FNV_SEED);
}

static uint64_t stack_hash(struct text *t, uint32_t i)
{
	return fnv1a(t->ids + t->stacks[i].off, t->stacks[i].n * sizeof(uint32_t), FNV_SEED);
}

static int name_id(struct text *t, const char *s, size_t n, uint32_t *id, struct pf_error *err)
{
	uint64_t h = fnv1a(s, n, FNV_SEED);
	if (t->name_ht_cap) {
		size_t k = (size_t)h & (t->name_ht_cap - 1);
		for (; t->name_ht[k]; k = (k + 1) & (t->name_ht_cap - 1)) {
			const struct name_ref *r = &t->names[t->name_ht[k] - 1];
			if (r->n == n && memcmp(r->s, s, n) == 0) {
				*id = t->name_ht[k] - 1;
				return 0;
			}
		}
	}
	if (t->n_names == PF_PYROSCOPE_MAX_FRAMES)
		return pf_error_set(err, -E2BIG, "body", "more than %u distinct frame names",
				    PF_PYROSCOPE_MAX_FRAMES);
	if (!pf_utf8_clean(s, n))
		return pf_error_set(err, -EBADMSG, "body",
				    "a frame name is not UTF-8 text without control characters");
	if (PF_ARRAY_GROW(t->names, t->cap_names, t->n_names + 1, 64) < 0 ||
	    ht_fit(&t->name_ht, &t->name_ht_cap, t->n_names, name_hash, t) < 0)
		return -ENOMEM;
	t->names[t->n_names] = (struct name_ref){s, (uint32_t)n};
	size_t k = (size_t)h & (t->name_ht_cap - 1);
	while (t->name_ht[k])
		k = (k + 1) & (t->name_ht_cap - 1);
	t->name_ht[k] = (uint32_t)++t->n_names;
	*id = (uint32_t)(t->n_names - 1);
	return 0;
}

/* Adds count to the stack of ids (root first, n of them). */
static int stack_add(struct text *t, const uint32_t *root_first, uint32_t n, uint64_t count,
		     struct pf_error *err)
{
	if (count > (uint64_t)INT64_MAX - t->total)
		return pf_error_set(err, -EBADMSG, "body", "the sample counts sum past 2^63");
	t->total += count;
	/* leaf first, at the end of ids (kept there only when the stack is new) */
	if (PF_ARRAY_GROW(t->ids, t->cap_ids, t->n_ids + n, 64) < 0)
		return -ENOMEM;
	uint32_t *leaf = t->ids + t->n_ids;
	for (uint32_t i = 0; i < n; i++)
		leaf[i] = root_first[n - 1 - i];
	uint64_t h = fnv1a(leaf, n * sizeof(uint32_t), FNV_SEED);
	if (t->stack_ht_cap) {
		size_t k = (size_t)h & (t->stack_ht_cap - 1);
		for (; t->stack_ht[k]; k = (k + 1) & (t->stack_ht_cap - 1)) {
			struct stack_ref *r = &t->stacks[t->stack_ht[k] - 1];
			if (r->n == n && memcmp(t->ids + r->off, leaf, n * sizeof(uint32_t)) == 0) {
				r->count += count;
				return 0;
			}
		}
	}
	if (t->n_stacks == PF_PYROSCOPE_MAX_STACKS)
		return pf_error_set(err, -E2BIG, "body", "more than %u distinct stacks",
				    PF_PYROSCOPE_MAX_STACKS);
	if (PF_ARRAY_GROW(t->stacks, t->cap_stacks, t->n_stacks + 1, 64) < 0 ||
	    ht_fit(&t->stack_ht, &t->stack_ht_cap, t->n_stacks, stack_hash, t) < 0)
		return -ENOMEM;
	t->stacks[t->n_stacks] = (struct stack_ref){t->n_ids, n, count};
	t->n_ids += n;
	size_t k = (size_t)h & (t->stack_ht_cap - 1);
	while (t->stack_ht[k])
		k = (k + 1) & (t->stack_ht_cap - 1);
	t->stack_ht[k] = (uint32_t)++t->n_stacks;
	return 0;
}

/* One line (no '\n'): its stack and count. */
static int text_line(struct text *t, const char *s, size_t n, bool folded, size_t lineno,
		     uint32_t *scratch, struct pf_error *err)
{
	uint64_t count = 1;
	if (n && s[n - 1] == '\r')
		n--;
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	if (!n)
		return 0;
	if (folded) {
		size_t sp = n;
		while (sp && s[sp - 1] != ' ')
			sp--;
		if (!sp)
			return pf_error_set(err, -EBADMSG, "body",
					    "line %zu: no count after the stack (folded lines are "
					    "'a;b;c 123')",
					    lineno);
		count = 0;
		for (size_t i = sp; i < n; i++) {
			if (s[i] < '0' || s[i] > '9' || i - sp >= 19)
				return pf_error_set(err, -EBADMSG, "body",
						    "line %zu: the count is not a number below "
						    "10^19",
						    lineno);
			count = count * 10 + (uint64_t)(s[i] - '0');
		}
		n = sp - 1;
		if (!count)
			return 0;
	}
	uint32_t depth = 0;
	size_t start = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && s[i] != ';')
			continue;
		if (i > start) {
			if (depth == PF_PYROSCOPE_MAX_DEPTH)
				return pf_error_set(err, -E2BIG, "body",
						    "line %zu: more than %d frames", lineno,
						    PF_PYROSCOPE_MAX_DEPTH);
			int rc = name_id(t, s + start, i - start, &scratch[depth], err);
			if (rc < 0)
				return rc;
			depth++;
		}
		start = i + 1;
	}
	if (!depth)
		return 0;
	return stack_add(t, scratch, depth, count, err);
}

static int text_parse(struct text *t, const uint8_t *b, size_t n, bool folded, struct pf_error *err)
{
	uint32_t *scratch = malloc(PF_PYROSCOPE_MAX_DEPTH * sizeof(*scratch));
	if (!scratch)
		return -ENOMEM;
	const char *s = (const char *)b;
	size_t line = 1, start = 0;
	int rc = 0;
	for (size_t i = 0; rc == 0 && i <= n; i++) {
		if (i < n && s[i] != '\n')
			continue;
		rc = text_line(t, s + start, i - start, folded, line++, scratch, err);
		start = i + 1;
	}
	free(scratch);
	return rc;
}

static uint8_t frame_kind(const char *spy)
{
	if (spy && strcmp(spy, "gospy") == 0)
		return PF_FRAME_GO;
	if (spy && strcmp(spy, "pyspy") == 0)
		return PF_FRAME_PYTHON;
	return PF_FRAME_NATIVE;
}

/* The window of a parsed text body: one process, one sample per distinct stack. */
static int text_window(const struct text *t, const struct params *p, struct pf_prof_window *w)
{
	struct pf_prof_process *proc = pf_prof_alloc(w, sizeof(*proc));
	struct pf_prof_frame *frames = pf_prof_alloc(w, (t->n_names + 1) * sizeof(*frames));
	struct pf_prof_stack *stacks = pf_prof_alloc(w, (t->n_stacks + 1) * sizeof(*stacks));
	struct pf_prof_sample *samples = pf_prof_alloc(w, (t->n_stacks + 1) * sizeof(*samples));
	uint32_t *ids = pf_prof_alloc(w, (t->n_ids + 1) * sizeof(*ids));
	if (!proc || !frames || !stacks || !samples || !ids)
		return -ENOMEM;
	uint8_t kind = frame_kind(p->spy);
	for (size_t i = 0; i < t->n_names; i++) {
		char *name = pf_prof_alloc(w, t->names[i].n + 1);
		if (!name)
			return -ENOMEM;
		memcpy(name, t->names[i].s, t->names[i].n);
		frames[i] = (struct pf_prof_frame){.mapping = -1, .kind = kind, .function = name};
	}
	if (t->n_ids)
		memcpy(ids, t->ids, t->n_ids * sizeof(*ids));
	uint64_t period = NS_PER_S / p->rate;
	for (size_t i = 0; i < t->n_stacks; i++) {
		const struct stack_ref *r = &t->stacks[i];
		stacks[i] = (struct pf_prof_stack){r->n, ids + r->off};
		samples[i] = (struct pf_prof_sample){.stack = (uint32_t)i, .count = r->count};
		if (p->type->kind == PT_CPU)
			continue;
		/* explicit type: count is the value (pf/profile.h) */
		int64_t *v = pf_prof_alloc(w, sizeof(*v));
		if (!v)
			return -ENOMEM;
		uint64_t val = r->count;
		if (p->type->kind == PT_SCALED)
			val = r->count > (uint64_t)INT64_MAX / period ? (uint64_t)INT64_MAX
								      : r->count * period;
		*v = (int64_t)val;
		samples[i].values = v;
		samples[i].count = val;
	}
	proc->frames = frames;
	proc->n_frames = t->n_names;
	proc->stacks = stacks;
	proc->n_stacks = t->n_stacks;
	proc->samples = samples;
	proc->n_samples = t->n_stacks;
	if (p->type->kind == PT_CPU) {
		w->frequency_hz = p->rate;
	} else {
		struct pf_prof_value_type *st = pf_prof_alloc(w, sizeof(*st));
		if (!st)
			return -ENOMEM;
		*st = (struct pf_prof_value_type){p->type->type, p->type->unit};
		w->sample_types = st;
		w->n_sample_types = 1;
		if (p->type->kind == PT_SCALED) {
			w->period_type = *st;
			w->period = (int64_t)period;
			w->frequency_hz = p->rate;
		}
	}
	w->processes = proc;
	w->n_processes = t->n_stacks ? 1 : 0;
	return 0;
}

/* ---- multipart/form-data (RFC 7578 over RFC 2046 §5.1). */

struct part {
	char name[64];
	const uint8_t *data;
	size_t len;
};

static int boundary_of(const char *ct, char *out, size_t cap, struct pf_error *err)
{
	const char *b = ct ? strcasestr(ct, "boundary=") : NULL;
	if (!b)
		return pf_error_set(err, -EBADMSG, "Content-Type",
				    "multipart/form-data without a boundary");
	b += 9;
	size_t n = 0;
	if (*b == '"') {
		b++;
		while (b[n] && b[n] != '"')
			n++;
	} else {
		while (b[n] && b[n] != ';' && b[n] != ' ')
			n++;
	}
	if (!n || n > 70 || n >= cap) /* RFC 2046: 1..70 characters */
		return pf_error_set(err, -EBADMSG, "Content-Type",
				    "multipart boundary must be 1..70 characters");
	memcpy(out, b, n);
	out[n] = 0;
	return 0;
}

/* The name parameter of a Content-Disposition value ("form-data; name=\"x\"; ..."). */
static void disposition_name(const char *v, size_t n, char *out, size_t cap)
{
	out[0] = 0;
	size_t i = 0;
	while (i < n) {
		while (i < n && (v[i] == ';' || v[i] == ' ' || v[i] == '\t'))
			i++;
		size_t ks = i;
		while (i < n && v[i] != '=' && v[i] != ';')
			i++;
		size_t kl = i - ks;
		if (i >= n || v[i] != '=')
			continue;
		i++;
		size_t vs = i, vl;
		if (i < n && v[i] == '"') {
			vs = ++i;
			while (i < n && v[i] != '"')
				i++;
			vl = i - vs;
			if (i < n)
				i++;
		} else {
			while (i < n && v[i] != ';' && v[i] != ' ')
				i++;
			vl = i - vs;
		}
		if (kl == 4 && strncasecmp(v + ks, "name", 4) == 0 && vl < cap) {
			memcpy(out, v + vs, vl);
			out[vl] = 0;
			return;
		}
	}
}

static int part_headers(const uint8_t *h, size_t n, struct part *pt)
{
	const char *s = (const char *)h;
	size_t i = 0;
	while (i < n) {
		size_t e = i;
		while (e + 1 < n && !(s[e] == '\r' && s[e + 1] == '\n'))
			e++;
		if (e + 1 >= n)
			e = n;
		static const char cd[] = "content-disposition:";
		if (e - i > sizeof(cd) - 1 && strncasecmp(s + i, cd, sizeof(cd) - 1) == 0)
			disposition_name(s + i + sizeof(cd) - 1, e - i - (sizeof(cd) - 1), pt->name,
					 sizeof(pt->name));
		i = e + 2;
	}
	return 0;
}

static int multipart_parse(const uint8_t *b, size_t n, const char *ct, struct part *parts,
			   size_t *n_parts, struct pf_error *err)
{
	char bnd[80], delim[84];
	int rc = boundary_of(ct, bnd, sizeof(bnd), err);
	if (rc < 0)
		return rc;
	size_t dl = (size_t)snprintf(delim, sizeof(delim), "\r\n--%s", bnd);
	*n_parts = 0;
	/* The first delimiter may open the body (no CRLF before it). */
	const uint8_t *p;
	if (n >= dl - 2 && memcmp(b, delim + 2, dl - 2) == 0)
		p = b + dl - 2;
	else if ((p = memmem(b, n, delim, dl)))
		p += dl;
	else
		return pf_error_set(err, -EBADMSG, "body", "multipart body without its boundary");
	const uint8_t *end = b + n;
	for (;;) {
		if (end - p >= 2 && p[0] == '-' && p[1] == '-')
			return 0; /* the close delimiter */
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
			return pf_error_set(err, -EBADMSG, "body",
					    "multipart: a delimiter not followed by CRLF");
		p += 2;
		if (*n_parts == PF_PYROSCOPE_MAX_PARTS)
			return pf_error_set(err, -EBADMSG, "body", "multipart: more than %d parts",
					    PF_PYROSCOPE_MAX_PARTS);
		const uint8_t *hend = memmem(p, (size_t)(end - p), "\r\n\r\n", 4);
		const uint8_t *content;
		size_t hlen;
		if (end - p >= 2 && p[0] == '\r' && p[1] == '\n') { /* no headers */
			hlen = 0;
			content = p + 2;
		} else if (hend && hend - p <= MAX_PART_HEADERS) {
			hlen = (size_t)(hend - p);
			content = hend + 4;
		} else {
			return pf_error_set(err, -EBADMSG, "body",
					    "multipart: part headers missing their end or over "
					    "%d bytes",
					    MAX_PART_HEADERS);
		}
		struct part *pt = &parts[*n_parts];
		memset(pt, 0, sizeof(*pt));
		part_headers(p, hlen, pt);
		const uint8_t *next = memmem(content, (size_t)(end - content), delim, dl);
		if (!next)
			return pf_error_set(err, -EBADMSG, "body",
					    "multipart: part '%s' is not closed by the boundary",
					    pt->name);
		pt->data = content;
		pt->len = (size_t)(next - content);
		(*n_parts)++;
		p = next + dl;
	}
}

/* ---- pprof. */

/* sample_type_config: {"<type>": {"display-name": "<new type name>", ...}, ...}. */
static int apply_sample_type_config(const uint8_t *b, size_t n, struct pf_prof_window *w,
				    struct pf_error *err)
{
	json_error_t je;
	json_t *root = json_loadb((const char *)b, n, JSON_REJECT_DUPLICATES, &je);
	if (!root || !json_is_object(root)) {
		json_decref(root);
		return pf_error_set(err, -EBADMSG, "sample_type_config",
				    "not a JSON object%s%.200s", root ? "" : ": ",
				    root ? "" : je.text);
	}
	const char *key;
	json_t *v;
	int rc = 0;
	json_object_foreach(root, key, v)
	{
		if (!json_is_object(v)) {
			rc = pf_error_set(err, -EBADMSG, "sample_type_config",
					  "'%.64s' is not an object", key);
			break;
		}
		json_t *dn = json_object_get(v, "display-name");
		if (!dn)
			continue;
		const char *name = json_string_value(dn);
		if (!name || !*name || strlen(name) > MAX_DISPLAY_NAME ||
		    !pf_utf8_clean(name, strlen(name))) {
			rc = pf_error_set(err, -EBADMSG, "sample_type_config",
					  "'%.64s' display-name must be 1..%d "
					  "bytes of text",
					  key, MAX_DISPLAY_NAME);
			break;
		}
		struct pf_prof_value_type *st = (struct pf_prof_value_type *)w->sample_types;
		for (size_t k = 0; k < w->n_sample_types; k++) {
			if (!st[k].type || strcmp(st[k].type, key) != 0)
				continue;
			const char *copy = pf_prof_strdup(w, name);
			if (!copy) {
				rc = -ENOMEM;
				break;
			}
			if (w->default_sample_type && strcmp(w->default_sample_type, key) == 0)
				w->default_sample_type = copy;
			st[k].type = copy;
		}
		if (rc < 0)
			break;
	}
	json_decref(root);
	return rc;
}

static int pprof_window(const uint8_t *b, size_t n, const char *ct, size_t cap,
			const struct params *p, struct pf_prof_window **out, struct pf_error *err)
{
	struct part parts[PF_PYROSCOPE_MAX_PARTS];
	size_t n_parts = 0;
	const struct part *prof = NULL, *stc = NULL;
	bool multipart = ct && strcasestr(ct, "multipart/form-data");
	int rc;

	if (multipart) {
		rc = multipart_parse(b, n, ct, parts, &n_parts, err);
		if (rc < 0)
			return rc;
		for (size_t i = 0; i < n_parts; i++) {
			if (strcmp(parts[i].name, "profile") == 0)
				prof = &parts[i];
			else if (strcmp(parts[i].name, "sample_type_config") == 0)
				stc = &parts[i];
			else if (strcmp(parts[i].name, "prev_profile") == 0)
				return pf_error_set(err, -EBADMSG, "body",
						    "multipart: prev_profile (cumulative profiles) "
						    "is not supported; send delta profiles (a "
						    "current Pyroscope SDK does)");
		}
		if (!prof)
			return pf_error_set(err, -EBADMSG, "body",
					    "multipart: no part named 'profile'");
		b = prof->data;
		n = prof->len;
	}
	if (!n) { /* an empty profile: nothing to store (an empty CPU window) */
		if (!(*out = pf_prof_window_new()))
			return -ENOMEM;
		(*out)->start_unix_ns = p->from_ns;
		(*out)->end_unix_ns = p->until_ns;
		(*out)->frequency_hz = p->rate;
		return 0;
	}
	struct pf_error derr = {0};
	rc = pf_pprof_decode(b, n, cap, out, &derr);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0)
		return pf_error_set(err, rc == -E2BIG ? -E2BIG : -EBADMSG, "body", "%s pprof: %s",
				    rc == -E2BIG ? "oversized" : "malformed", derr.msg);
	struct pf_prof_window *w = *out;
	if (!w->n_sample_types && !w->frequency_hz)
		w->frequency_hz = p->rate; /* no sample types: read as CPU samples */
	if (stc && (rc = apply_sample_type_config(stc->data, stc->len, w, err)) < 0)
		return rc;
	/* A profile without its own time (or one of 1970: an SDK that wrote microseconds)
	 * takes the query's. */
	if (w->start_unix_ns < 1000000000000000ull) {
		w->start_unix_ns = p->from_ns;
		w->end_unix_ns = p->until_ns;
	}
	if (w->end_unix_ns <= w->start_unix_ns)
		w->end_unix_ns = pf_max(w->start_unix_ns, p->until_ns);
	return 0;
}

/* ---- Attributes and the whole request. */

static int set_attrs(struct pf_prof_window *w, const struct params *p)
{
	const char *service = p->app;
	for (size_t i = 0; i < p->n_labels; i++)
		if (strcmp(p->labels[i].key, "service_name") == 0)
			service = p->labels[i].value;
	struct pf_prof_attr *a = pf_prof_alloc(w, (p->n_labels + 2) * sizeof(*a));
	if (!a)
		return -ENOMEM;
	size_t n = 0;
	a[n].key = "service.name";
	a[n++].value = pf_prof_strdup(w, service);
	for (size_t i = 0; i < p->n_labels; i++) {
		if (strcmp(p->labels[i].key, "service_name") == 0)
			continue;
		a[n].key = pf_prof_strdup(w, p->labels[i].key);
		a[n++].value = pf_prof_strdup(w, p->labels[i].value);
	}
	if (p->spy) {
		a[n].key = PF_PYROSCOPE_SPY_ATTR;
		a[n++].value = pf_prof_strdup(w, p->spy);
	}
	for (size_t i = 0; i < n; i++)
		if (!a[i].key || !a[i].value)
			return -ENOMEM;
	struct pf_prof_process *procs = (struct pf_prof_process *)w->processes;
	for (size_t i = 0; i < w->n_processes; i++) {
		procs[i].attrs = a;
		procs[i].n_attrs = n;
	}
	return 0;
}

int pf_pyroscope_decode(const struct pf_pyroscope_request *req, struct pf_prof_window **out,
			struct pf_error *err)
{
	size_t max = req->max_bytes ? req->max_bytes : PF_PROFSTORE_DEFAULT_MAX_BYTES;
	const uint8_t *data = req->body ? req->body : (const uint8_t *)"";
	size_t len = req->body ? req->len : 0;
	struct params *p = calloc(1, sizeof(*p));
	struct pf_prof_window *w = NULL;
	struct pf_buf plain;
	int rc;

	*out = NULL;
	pf_buf_init(&plain, max);
	if (!p) {
		rc = -ENOMEM;
		goto out;
	}
	rc = parse_params(req, p, err);
	if (rc < 0)
		goto out;
	if (len > max) {
		rc = pf_error_set(err, -E2BIG, "body", "request body over the %zu byte limit", max);
		goto out;
	}
	if (req->gzip) {
		rc = pf_gzip_decompress(data, len, max, &plain);
		if (rc == -E2BIG)
			rc = pf_error_set(err, -E2BIG, "body",
					  "request over the %zu byte limit after decompression",
					  max);
		else if (rc < 0 && rc != -ENOMEM)
			rc = pf_error_set(err, -EBADMSG, "body", "body is not valid gzip");
		if (rc < 0)
			goto out;
		data = plain.data ? plain.data : (const uint8_t *)"";
		len = plain.len;
	}
	if (p->format == FMT_PPROF) {
		rc = pprof_window(data, len, req->content_type, pf_max(max, (size_t)1 << 20) * 4, p,
				  &w, err);
	} else {
		struct text t = {0};
		rc = text_parse(&t, data, len, p->format == FMT_FOLDED, err);
		if (rc == 0 && !(w = pf_prof_window_new()))
			rc = -ENOMEM;
		if (rc == 0) {
			w->start_unix_ns = p->from_ns;
			w->end_unix_ns = p->until_ns;
			rc = text_window(&t, p, w);
		}
		text_release(&t);
	}
	if (rc == 0)
		rc = set_attrs(w, p);
	if (rc == 0) {
		*out = w;
		w = NULL;
	}
out:
	pf_prof_window_free(w);
	pf_buf_release(&plain);
	free(p);
	return rc;
}

static void result_error(struct pf_pyroscope_result *res, int status, const char *msg)
{
	res->status = status;
	snprintf(res->message, sizeof(res->message), "%s", msg);
}

int pf_pyroscope_ingest(struct pf_store *st, const struct pf_pyroscope_request *req,
			struct pf_pyroscope_result *res)
{
	size_t max = req->max_bytes ? req->max_bytes : PF_PROFSTORE_DEFAULT_MAX_BYTES;
	struct pf_error err = {0};
	struct pf_prof_window *w = NULL;
	int rc;

	memset(res, 0, sizeof(*res));
	rc = pf_pyroscope_decode(req, &w, &err);
	if (rc == -ENOMEM) {
		result_error(res, 500, "out of memory");
		return -ENOMEM;
	}
	if (rc < 0) {
		result_error(res, rc == -E2BIG ? 413 : 400, err.msg[0] ? err.msg : "bad request");
		return 0;
	}
	/* The store's one entry point takes OTLP: the window re-encoded, bounded like a
	 * decoded request. */
	size_t cap = pf_max(max, (size_t)1 << 20) * 4;
	struct pf_buf otlp, resp;
	pf_buf_init(&otlp, cap);
	pf_buf_init(&resp, 64 * 1024);
	rc = pf_otlp_profiles_encode(w, &otlp, NULL, &err);
	if (rc == -ENODATA) {
		res->status = 200; /* no sample carries weight: nothing to store */
		rc = 0;
	} else if (rc == -ENOMEM) {
		result_error(res, 500, "out of memory");
	} else if (rc == -E2BIG) {
		result_error(res, 413, "profile too large to store");
		rc = 0;
	} else if (rc < 0) {
		result_error(res, 400, err.msg[0] ? err.msg : "profile not storable");
		rc = 0;
	} else {
		struct pf_profstore_request q = {
		    .body = otlp.data,
		    .len = otlp.len,
		    .max_bytes = cap,
		    .now_ms = req->now_ms,
		    .check = req->check,
		    .check_ud = req->check_ud,
		    .agent_uid = req->agent_uid,
		};
		struct pf_profstore_result r;
		rc = pf_profstore_ingest(st, &q, &r, &resp);
		if (rc < 0) {
			result_error(res, 500, "out of memory");
		} else {
			res->status = r.status;
			res->stored = r.accepted;
			res->rejected = r.rejected;
			res->samples = r.samples;
			snprintf(res->message, sizeof(res->message), "%s", r.message);
		}
	}
	pf_buf_release(&otlp);
	pf_buf_release(&resp);
	pf_prof_window_free(w);
	return rc;
}
