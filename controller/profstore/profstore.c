/* profstore.c — see profstore.h. */
#include "profstore.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "detail.h"
#include "flame.h"
#include "otlp_profiles.h"
#include "otlp_traces.h"
#include "pf/compiler.h"
#include "pf/gzip.h"
#include "pf/hash.h"
#include "store.h"

/* google.rpc.Code values used in Status answers. */
#define RPC_INVALID_ARGUMENT 3
#define RPC_PERMISSION_DENIED 7
#define RPC_RESOURCE_EXHAUSTED 8
#define RPC_INTERNAL 13
#define RPC_UNAVAILABLE 14

/* ---- Protobuf answers, written by hand: two tiny messages, fields
 *   ExportProfilesServiceResponse { ExportProfilesPartialSuccess partial_success = 1; }
 *   ExportProfilesPartialSuccess { int64 rejected_profiles = 1; string error_message = 2; }
 *   google.rpc.Status { int32 code = 1; string message = 2; }
 * (profiles_service.proto, google/rpc/status.proto). */

/* Fields 1 (varint) and 2 (string) of a message: both answers have this shape. */
static int put_int_and_string(struct pf_buf *b, int64_t v, const char *msg)
{
	int rc = 0;
	if (v) {
		rc = pf_buf_putc(b, 0x08);
		/* negative int64/int32: 10-byte two's complement */
		if (rc == 0)
			rc = pf_buf_append_uvarint(b, (uint64_t)v);
	}
	if (rc == 0 && msg && *msg) {
		size_t n = strlen(msg);
		rc = pf_buf_putc(b, 0x12);
		if (rc == 0)
			rc = pf_buf_append_uvarint(b, n);
		if (rc == 0)
			rc = pf_buf_append(b, msg, n);
	}
	return rc;
}

int pf_profstore_encode_response(int64_t rejected, const char *msg, struct pf_buf *out)
{
	struct pf_buf inner;
	int rc;

	if (!rejected && (!msg || !*msg))
		return 0; /* the empty message: full success */
	pf_buf_init(&inner, 64 * 1024);
	rc = put_int_and_string(&inner, rejected, msg);
	if (rc == 0)
		rc = pf_buf_putc(out, 0x0a);
	if (rc == 0)
		rc = pf_buf_append_uvarint(out, inner.len);
	if (rc == 0)
		rc = pf_buf_append(out, inner.data ? inner.data : (const uint8_t *)"", inner.len);
	pf_buf_release(&inner);
	return rc;
}

int pf_profstore_encode_status(int32_t code, const char *msg, struct pf_buf *out)
{
	return pf_otlp_status_encode(code, msg, false, out);
}

/* ---- Metadata. */

static const char *attr(const struct pf_prof_process *p, const char *key)
{
	for (size_t i = 0; i < p->n_attrs; i++)
		if (p->attrs[i].key && p->attrs[i].value && strcmp(p->attrs[i].key, key) == 0)
			return p->attrs[i].value;
	return NULL;
}

static bool type_is(const struct pf_prof_value_type *t, const char *name)
{
	return t->type && strcmp(t->type, name) == 0;
}

int pf_profstore_type_index(const struct pf_prof_window *w)
{
	if (!w->n_sample_types || type_is(&w->period_type, "cpu"))
		return -1;
	if (w->default_sample_type && *w->default_sample_type)
		for (size_t k = 0; k < w->n_sample_types; k++)
			if (type_is(&w->sample_types[k], w->default_sample_type))
				return (int)k;
	for (size_t k = w->n_sample_types; k-- > 0;)
		if (w->sample_types[k].unit && strcmp(w->sample_types[k].unit, "bytes") == 0)
			return (int)k;
	return 0;
}

int pf_profstore_type_find(const struct pf_prof_window *w, const char *type)
{
	if (!type || !*type)
		return pf_profstore_type_index(w);
	if (strcmp(type, pf_profstore_type(w)) == 0)
		return pf_profstore_type_index(w);
	for (size_t k = 0; k < w->n_sample_types; k++)
		if (type_is(&w->sample_types[k], type))
			return (int)k;
	return -2;
}

const char *pf_profstore_type(const struct pf_prof_window *w)
{
	int k = pf_profstore_type_index(w);
	if (k < 0)
		return "cpu";
	if (w->sample_types[k].type && *w->sample_types[k].type)
		return w->sample_types[k].type;
	return "unknown";
}

static int link_cmp(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct pf_profile_link));
}

static bool nonzero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return true;
	return false;
}

/* The distinct links of p's samples, sorted; *n distinct ones. */
static int collect_links(const struct pf_prof_process *p, struct pf_profile_link **out, size_t *n)
{
	size_t m = 0;

	*out = NULL;
	*n = 0;
	for (size_t i = 0; i < p->n_samples; i++)
		if (nonzero(p->samples[i].trace_id, 16))
			m++;
	if (!m)
		return 0;
	struct pf_profile_link *l = malloc(m * sizeof(*l));
	if (!l)
		return -ENOMEM;
	m = 0;
	for (size_t i = 0; i < p->n_samples; i++) {
		if (!nonzero(p->samples[i].trace_id, 16))
			continue;
		memcpy(l[m].trace_id, p->samples[i].trace_id, 16);
		memcpy(l[m].span_id, p->samples[i].span_id, 8);
		m++;
	}
	qsort(l, m, sizeof(*l), link_cmp);
	size_t u = 0;
	for (size_t i = 0; i < m; i++)
		if (!u || memcmp(&l[u - 1], &l[i], sizeof(*l)) != 0)
			l[u++] = l[i];
	*out = l;
	*n = u;
	return 0;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static atomic_uint compact_flags = PF_PROFSTORE_COMPACT_READ | PF_PROFSTORE_STACKS;

void pf_profstore_set_compact(unsigned flags)
{
	atomic_store(&compact_flags, flags);
}

unsigned pf_profstore_compact(void)
{
	return atomic_load(&compact_flags);
}

const char *pf_profstore_unit_of(const struct pf_prof_window *w, int k)
{
	if (!w->n_sample_types)
		return "samples";
	const struct pf_prof_value_type *t = &w->sample_types[k < 0 ? 0 : k];
	if (type_is(t, "samples"))
		return "samples";
	return t->unit && *t->unit ? t->unit : "";
}

const char *pf_profstore_unit(const struct pf_prof_window *w)
{
	return pf_profstore_unit_of(w, pf_profstore_type_index(w));
}

int pf_profstore_pick(struct pf_prof_window *w, int k)
{
	if (k < 0 || !w->n_sample_types || (size_t)k >= w->n_sample_types)
		return k < 0 ? 0 : -EINVAL;
	struct pf_prof_process *procs =
	    pf_prof_alloc(w, (w->n_processes ? w->n_processes : 1) * sizeof(*procs));
	if (!procs)
		return -ENOMEM;
	for (size_t i = 0; i < w->n_processes; i++) {
		const struct pf_prof_process *p = &w->processes[i];
		struct pf_prof_sample *s =
		    pf_prof_alloc(w, (p->n_samples ? p->n_samples : 1) * sizeof(*s));
		if (!s)
			return -ENOMEM;
		for (size_t j = 0; j < p->n_samples; j++) {
			int64_t v = pf_prof_sample_value(w, &p->samples[j], (size_t)k);
			s[j] = p->samples[j];
			s[j].count = v > 0 ? (uint64_t)v : 0;
		}
		procs[i] = *p;
		procs[i].samples = s;
	}
	w->processes = procs;
	return 0;
}

const char *pf_profstore_unit_guess(const char *type, const char *unit)
{
	if (unit && *unit)
		return unit;
	if (!type || !strcmp(type, "cpu") || !strcmp(type, "samples"))
		return "samples";
	if (!strcmp(type, "off_cpu") || !strcmp(type, "wall"))
		return "nanoseconds";
	if (strstr(type, "space") || strstr(type, "bytes"))
		return "bytes";
	return "count";
}

/* A stored profile's content (store.h): its attributes and distinct frame paths, and with
 * several sample types the weights of the other types (series). */
struct content {
	struct pf_flame_paths paths;
	struct pf_profile_frame *frames;
	struct pf_profile_stack *stacks;
	struct pf_profile_kv *attrs;
	struct pf_profile_series *series;
	uint64_t *series_weights;
	int64_t total; /* the summed weight of the stored type */
};

static void content_release(struct content *c)
{
	pf_flame_paths_release(&c->paths);
	free(c->frames);
	free(c->stacks);
	free(c->attrs);
	free(c->series);
	free(c->series_weights);
	memset(c, 0, sizeof(*c));
}

/* Whether type k of w is one to store as a series of its own beside the stored type d: not
 * d's name and the first type of its name. */
static bool series_type(const struct pf_prof_window *w, size_t k, size_t d)
{
	const char *t = w->sample_types[k].type;
	if (k == d || !t || !*t || type_is(&w->sample_types[d], t))
		return false;
	for (size_t j = 0; j < k; j++)
		if (type_is(&w->sample_types[j], t))
			return false;
	return true;
}

/* The series of the sample types other than the stored one (index d), from the paths'
 * per-type weights. */
static int content_series(const struct pf_prof_window *w, size_t d, struct content *c,
			  struct pf_profile_row *row)
{
	size_t nt = c->paths.n_types, ns = c->paths.n_stacks, n = 0;
	c->series = malloc(nt * sizeof(*c->series));
	c->series_weights = malloc((ns ? ns : 1) * nt * sizeof(*c->series_weights));
	if (!c->series || !c->series_weights)
		return -ENOMEM;
	for (size_t k = 0; k < nt; k++) {
		if (!series_type(w, k, d))
			continue;
		uint64_t *wt = c->series_weights + n * (ns ? ns : 1);
		for (size_t i = 0; i < ns; i++)
			wt[i] = c->paths.type_weights[i * nt + k];
		c->series[n++] = (struct pf_profile_series){w->sample_types[k].type,
							    pf_profstore_unit_of(w, (int)k), wt};
	}
	row->series = c->series;
	row->n_series = n;
	return 0;
}

/* Fills row's content fields from p (they point into c). -ENOMEM, or the walk's error. */
static int content_fill(const struct pf_prof_window *w, const struct pf_prof_process *p,
			struct content *c, struct pf_profile_row *row)
{
	int d = pf_profstore_type_index(w);
	bool typed = d >= 0 && w->n_sample_types > 1;
	int rc = typed ? pf_flame_paths_build_types(w, p, &c->paths)
		       : pf_flame_paths_build(p, &c->paths);
	if (rc < 0)
		return rc;
	size_t nf = c->paths.n_frames, ns = c->paths.n_stacks;
	c->frames = malloc((nf ? nf : 1) * sizeof(*c->frames));
	c->stacks = malloc((ns ? ns : 1) * sizeof(*c->stacks));
	c->attrs = malloc((p->n_attrs ? p->n_attrs : 1) * sizeof(*c->attrs));
	if (!c->frames || !c->stacks || !c->attrs)
		return -ENOMEM;
	for (size_t i = 0; i < nf; i++)
		c->frames[i] = (struct pf_profile_frame){c->paths.frames[i].name,
							 c->paths.frames[i].kind};
	for (size_t i = 0; i < ns; i++) {
		uint64_t wt = typed ? c->paths.type_weights[i * c->paths.n_types + (size_t)d]
				    : c->paths.stacks[i].weight;
		c->stacks[i] =
		    (struct pf_profile_stack){c->paths.stacks[i].ids, c->paths.stacks[i].n, wt};
		c->total =
		    wt > (uint64_t)(INT64_MAX - c->total) ? INT64_MAX : c->total + (int64_t)wt;
	}
	if (typed && (rc = content_series(w, (size_t)d, c, row)) < 0)
		return rc;
	for (size_t i = 0; i < p->n_attrs; i++)
		c->attrs[i] = (struct pf_profile_kv){p->attrs[i].key, p->attrs[i].value};
	row->attrs = c->attrs;
	row->n_attrs = p->n_attrs;
	row->frames = c->frames;
	row->n_frames = nf;
	row->stacks = c->stacks;
	row->n_stacks = ns;
	row->unit = pf_profstore_unit(w);
	return 0;
}

/* One stored profile being prepared. */
struct prep {
	struct pf_profile_row row;
	struct pf_buf body;
	struct pf_buf flame;
	struct pf_profile_link *links;
	struct content content;
	struct pf_detail_split split;
	struct pf_profile_detail detail;
};

static void prep_release(struct prep *p)
{
	pf_buf_release(&p->body);
	pf_buf_release(&p->flame);
	free(p->links);
	content_release(&p->content);
	pf_detail_split_release(&p->split);
}

/* Encodes process i of w alone and gzips it; fills the row. -ENODATA for a profile without
 * samples, -EINVAL (err) for one the encoder refuses. */
static int prepare_one(const struct pf_prof_window *w, size_t i, int64_t now_ms,
		       struct prep *pp, struct pf_error *err)
{
	const struct pf_prof_process *p = &w->processes[i];
	struct pf_prof_window one = *w;
	struct pf_buf raw;
	uint64_t samples = 0;
	int rc;

	bool weighs = false;
	for (size_t k = 0; k < p->n_samples; k++) {
		samples += p->samples[k].count;
		weighs = weighs || pf_prof_sample_nonzero(w, &p->samples[k]);
	}
	if (!samples && !weighs)
		return -ENODATA;
	one.processes = p;
	one.n_processes = 1;
	if (!one.n_sample_types && !one.frequency_hz)
		one.frequency_hz = 100; /* period unknown on the wire: the encoder needs one */
	if (pf_profstore_compact() & PF_PROFSTORE_BODY) {
		pf_buf_init(&raw, PF_PROFSTORE_LOAD_MAX_BYTES);
		rc = pf_otlp_profiles_encode(&one, &raw, pp->row.profile_id, err);
		if (rc == 0)
			rc = pf_gzip_compress(raw.data, raw.len, PF_PROFSTORE_GZIP_LEVEL,
					      &pp->body);
		pp->row.raw_bytes = (int64_t)raw.len;
		pf_buf_release(&raw);
	} else {
		/* The profile keeps the id the body would have carried (a random one when the
		 * sender gave none), as captures report it. */
		if (nonzero(p->profile_id, 16))
			memcpy(pp->row.profile_id, p->profile_id, 16);
		else if ((rc = pf_random_bytes(pp->row.profile_id, 16)) < 0)
			return rc;
		struct pf_prof_process pc = *p;
		memcpy(pc.profile_id, pp->row.profile_id, 16);
		one.processes = &pc;
		rc = pf_detail_split(&one, 0, &pp->split, err);
		one.processes = p;
		pp->detail = (struct pf_profile_detail){
		    .locs = pp->split.locs.data,
		    .loc = pp->split.loc,
		    .n_locs = pp->split.n_locs,
		    .stack_locs = pp->split.stack_locs,
		    .stack = pp->split.stack,
		    .n_stacks = pp->split.n_stacks,
		    .samples = pp->split.samples.data,
		    .samples_len = pp->split.samples.len};
		pp->row.detail = &pp->detail;
		pp->row.raw_bytes = (int64_t)pp->split.samples.len;
	}
	if (rc < 0)
		return rc;
	rc = collect_links(p, &pp->links, &pp->row.n_link_entries);
	if (rc < 0)
		return rc;
	if (pf_profstore_compact() & PF_PROFSTORE_STACKS) {
		rc = content_fill(w, p, &pp->content, &pp->row);
		if (rc == -ENOMEM)
			return rc;
		if (rc < 0) { /* the tree fails on it the same way: no content */
			content_release(&pp->content);
			pp->row.n_stacks = pp->row.n_frames = pp->row.n_attrs = 0;
			pp->row.n_series = 0;
		} else if (pp->row.n_series || pf_profstore_type_index(w) > 0) {
			samples = (uint64_t)pp->content.total; /* the stored type's weight */
		}
	}
	/* Over the cap or not encodable: no compact form, the views decode the body. */
	if (pf_profstore_compact() & PF_PROFSTORE_COMPACT_WRITE) {
		struct pf_buf form;
		pf_buf_init(&form, PF_PROFSTORE_FLAME_MAX_BYTES);
		rc = pf_flame_compact_encode(p, PF_PROFSTORE_FLAME_MAX_BYTES, &form);
		if (rc == 0)
			rc = pf_gzip_compress(form.data, form.len, PF_PROFSTORE_FLAME_GZIP_LEVEL,
					      &pp->flame);
		pf_buf_release(&form);
		if (rc == -ENOMEM)
			return rc;
		if (rc < 0)
			pf_buf_reset(&pp->flame);
	}

	const char *exe = attr(p, "process.executable.name");
	const char *path = attr(p, "process.executable.path");
	const char *host = attr(p, "host.name");
	pp->row.agent = attr(p, PF_PROFSTORE_AGENT_ATTR);
	pp->row.service = attr(p, "service.name");
	pp->row.capture_id = attr(p, PF_PROFSTORE_CAPTURE_ATTR);
	pp->row.trigger = attr(p, PF_PROFSTORE_TRIGGER_ATTR);
	pp->row.namespace_name = attr(p, "k8s.namespace.name");
	pp->row.pod = attr(p, "k8s.pod.name");
	pp->row.container = attr(p, "k8s.container.name");
	pp->row.host = host ? host : w->host_name;
	pp->row.exe = exe ? exe : path ? base_name(path) : NULL;
	if (!pp->row.agent)
		pp->row.agent = "";
	if (!pp->row.service)
		pp->row.service = "";
	if (!pp->row.host)
		pp->row.host = "";
	if (!pp->row.exe)
		pp->row.exe = "";
	pp->row.pid = p->pid;
	pp->row.type = pf_profstore_type(w);
	pp->row.start_ns = (int64_t)pf_min(w->start_unix_ns, (uint64_t)INT64_MAX);
	pp->row.duration_ns =
	    (int64_t)pf_min(w->end_unix_ns - w->start_unix_ns, (uint64_t)INT64_MAX);
	pp->row.samples = (int64_t)pf_min(samples, (uint64_t)INT64_MAX);
	pp->row.n_links = (int64_t)pp->row.n_link_entries;
	pp->row.links = pp->links;
	pp->row.received_ms = now_ms;
	pp->row.body = pp->body.data;
	pp->row.body_len = pp->body.len;
	pp->row.flame = pp->flame.len ? pp->flame.data : NULL;
	pp->row.flame_len = pp->flame.len;
	return 0;
}

static int answer_status(struct pf_profstore_result *res, struct pf_buf *resp, int http,
			 int32_t code, const char *fmt, ...) PF_PRINTF(5, 6);
static int answer_status(struct pf_profstore_result *res, struct pf_buf *resp, int http,
			 int32_t code, const char *fmt, ...)
{
	va_list ap;

	res->status = http;
	va_start(ap, fmt);
	vsnprintf(res->message, sizeof(res->message), fmt, ap);
	va_end(ap);
	return pf_profstore_encode_status(code, res->message, resp) < 0 ? -ENOMEM : 0;
}

static bool is_protobuf(const char *ct)
{
	if (!ct || !*ct)
		return true;
	while (*ct == ' ')
		ct++;
	return strncasecmp(ct, "application/x-protobuf", 22) == 0 &&
	       (ct[22] == 0 || ct[22] == ';' || ct[22] == ' ');
}

/* One request of a batch between its decode and its answer. */
struct staged {
	struct pf_prof_window *w;
	struct prep *preps;
	size_t n_prep;
	struct pf_buf plain;
	char why[200];
	bool store; /* decoded and checked: rows to insert (n_prep may be 0), answer later */
};

static void staged_release(struct staged *sg)
{
	for (size_t i = 0; i < sg->n_prep; i++)
		prep_release(&sg->preps[i]);
	free(sg->preps);
	pf_prof_window_free(sg->w);
	pf_buf_release(&sg->plain);
	memset(sg, 0, sizeof(*sg));
}

/* Decodes, checks and prepares one request. 0 with sg->store set: its rows wait for the
 * insert; 0 without: answered already (an error); -ENOMEM: not even the answer was built. */
static int stage(struct pf_store *st, const struct pf_profstore_request *req,
		 struct pf_profstore_result *res, struct pf_buf *resp, struct staged *sg)
{
	size_t max = req->max_bytes ? req->max_bytes : PF_PROFSTORE_DEFAULT_MAX_BYTES;
	const uint8_t *data = req->body ? req->body : (const uint8_t *)"";
	size_t len = req->body ? req->len : 0;
	struct pf_error err = {0};
	int rc;

	memset(res, 0, sizeof(*res));
	pf_buf_init(&sg->plain, max);
	if (!is_protobuf(req->content_type))
		return answer_status(res, resp, 415, RPC_INVALID_ARGUMENT,
				     "unsupported Content-Type '%s': this receiver takes "
				     "application/x-protobuf",
				     req->content_type ? req->content_type : "");
	if (len > max)
		return answer_status(res, resp, 413, RPC_RESOURCE_EXHAUSTED,
				     "request body over the %zu byte limit", max);
	if (req->gzip) {
		rc = pf_gzip_decompress(data, len, max, &sg->plain);
		if (rc == -E2BIG)
			return answer_status(res, resp, 413, RPC_RESOURCE_EXHAUSTED,
					     "request over the %zu byte limit after decompression",
					     max);
		if (rc < 0)
			return answer_status(res, resp, rc == -ENOMEM ? 500 : 400,
					     rc == -ENOMEM ? RPC_INTERNAL : RPC_INVALID_ARGUMENT,
					     "%s", rc == -ENOMEM ? "out of memory"
								 : "body is not valid gzip");
		data = sg->plain.data ? sg->plain.data : (const uint8_t *)"";
		len = sg->plain.len;
	}
	/* The decoder's cap covers the protobuf-c message tree and the window built from it. */
	rc = pf_otlp_profiles_decode(data, len, pf_max(max, (size_t)1 << 20) * 4, &sg->w, &err);
	pf_buf_release(&sg->plain); /* the window holds copies */
	if (rc == -E2BIG)
		return answer_status(res, resp, 413, RPC_RESOURCE_EXHAUSTED,
				     "profiles too large to decode: %s", err.msg);
	if (rc == -ENOMEM)
		return answer_status(res, resp, 500, RPC_INTERNAL, "%s", "out of memory");
	if (rc < 0)
		return answer_status(res, resp, 400, RPC_INVALID_ARGUMENT,
				     "undecodable ExportProfilesServiceRequest: %s",
				     err.msg[0] ? err.msg : "malformed");
	const struct pf_prof_window *w = sg->w;
	for (size_t i = 0; req->check && i < w->n_processes; i++) {
		const struct pf_prof_process *p = &w->processes[i];
		rc = req->check(req->check_ud, st, attr(p, PF_PROFSTORE_AGENT_ATTR),
				attr(p, PF_PROFSTORE_CAPTURE_ATTR), sg->why, sizeof(sg->why));
		if (rc < 0)
			return rc == -EACCES ? answer_status(res, resp, 403, RPC_PERMISSION_DENIED,
							     "profile %zu: %s", i, sg->why)
					     : answer_status(res, resp, 503, RPC_UNAVAILABLE,
							     "checking the sender: %s",
							     pf_store_last_error(st));
	}
	sg->why[0] = 0;
	sg->preps = calloc(w->n_processes ? w->n_processes : 1, sizeof(*sg->preps));
	if (!sg->preps)
		return answer_status(res, resp, 500, RPC_INTERNAL, "%s", "out of memory");
	for (size_t i = 0; i < w->n_processes; i++) {
		struct prep *pp = &sg->preps[sg->n_prep];
		struct pf_error e = {0};
		pf_buf_init(&pp->body, PF_PROFSTORE_LOAD_MAX_BYTES);
		pf_buf_init(&pp->flame, PF_PROFSTORE_FLAME_MAX_BYTES);
		rc = prepare_one(w, i, req->now_ms, pp, &e);
		if (rc == 0) {
			if (!*pp->row.agent && req->agent_uid)
				pp->row.agent = req->agent_uid;
			sg->n_prep++;
			continue;
		}
		prep_release(pp);
		memset(pp, 0, sizeof(*pp));
		if (rc == -ENOMEM)
			return answer_status(res, resp, 500, RPC_INTERNAL, "%s", "out of memory");
		res->rejected++;
		if (!sg->why[0])
			snprintf(sg->why, sizeof(sg->why), "profile %zu (pid %u): %.150s", i,
				 w->processes[i].pid,
				 rc == -ENODATA ? "no samples" : e.msg[0] ? e.msg : "not storable");
	}
	sg->store = true;
	return 0;
}

/* Inserts a staged request's rows (in the open batch when there is one). 0 when stored, or
 * the insert failed and res/resp say so (503); -ENOMEM when that answer could not be built. */
static int store_rows(struct pf_store *st, const struct pf_profstore_request *req,
		      struct pf_profstore_result *res, struct pf_buf *resp, struct staged *sg)
{
	struct pf_profile_retention ret;
	int rc;

	if (!sg->n_prep)
		return 0;
	struct pf_profile_row *rows = calloc(sg->n_prep, sizeof(*rows));
	if (!rows) {
		sg->store = false;
		return answer_status(res, resp, 500, RPC_INTERNAL, "%s", "out of memory");
	}
	for (size_t i = 0; i < sg->n_prep; i++)
		rows[i] = sg->preps[i].row;
	pf_store_profiles_get_retention(st, &ret);
	rc = pf_store_profiles_insert(st, rows, sg->n_prep, &ret, req->now_ms, &res->deleted);
	for (size_t i = 0; rc == 0 && i < sg->n_prep; i++)
		if (rows[i].duplicate) {
			res->duplicates++;
			sg->preps[i].row.samples = 0; /* counted when first stored */
		}
	free(rows);
	if (rc < 0) {
		sg->store = false;
		res->duplicates = 0;
		return answer_status(res, resp, 503, RPC_UNAVAILABLE, "profile store: %s",
				     pf_store_last_error(st));
	}
	return 0;
}

/* The answer of a stored request: 200, with partial success when some were rejected. */
static int answer_stored(struct pf_profstore_result *res, struct pf_buf *resp,
			 const struct staged *sg)
{
	res->accepted = sg->n_prep;
	res->samples = 0;
	for (size_t i = 0; i < sg->n_prep; i++)
		res->samples += (uint64_t)sg->preps[i].row.samples;
	res->status = 200;
	if (res->rejected)
		snprintf(res->message, sizeof(res->message), "%zu of %zu profiles rejected: %.200s",
			 res->rejected, sg->w->n_processes, sg->why);
	return pf_profstore_encode_response((int64_t)res->rejected,
					    res->rejected ? res->message : NULL, resp) < 0
		   ? -ENOMEM
		   : 0;
}

/* A request whose answer could not be built: 500 without a body. */
static int failed(struct pf_profstore_result *res, struct pf_buf *resp)
{
	res->status = 500;
	pf_buf_reset(resp);
	return -ENOMEM;
}

int pf_profstore_ingest_batch(struct pf_store *st, const struct pf_profstore_request *reqs,
			      size_t n, struct pf_profstore_result *res, struct pf_buf *resps)
{
	struct staged *sg = calloc(n ? n : 1, sizeof(*sg));
	size_t with_rows = 0;
	int64_t now_ms = 0;
	int rc = 0, r;

	if (!sg)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		r = stage(st, &reqs[i], &res[i], &resps[i], &sg[i]);
		if (r < 0)
			rc = failed(&res[i], &resps[i]);
		if (sg[i].store && sg[i].n_prep)
			with_rows++;
		now_ms = pf_max(now_ms, reqs[i].now_ms);
	}
	/* More than one request with rows: one transaction for all (group commit). */
	bool batch = with_rows > 1 && pf_store_profiles_batch_begin(st) == 0;
	for (size_t i = 0; i < n; i++) {
		if (!sg[i].store)
			continue;
		if (with_rows > 1 && !batch) {
			sg[i].store = false;
			r = answer_status(&res[i], &resps[i], 503, RPC_UNAVAILABLE,
					  "profile store: %s", pf_store_last_error(st));
		} else {
			r = store_rows(st, &reqs[i], &res[i], &resps[i], &sg[i]);
		}
		if (r < 0)
			rc = failed(&res[i], &resps[i]);
	}
	if (batch) {
		struct pf_profile_retention ret;
		size_t deleted = 0;
		pf_store_profiles_get_retention(st, &ret);
		if (pf_store_profiles_batch_end(st, &ret, now_ms, &deleted) < 0) {
			/* nothing of the batch is stored: every request it held is unavailable */
			for (size_t i = 0; i < n; i++) {
				if (!sg[i].store || !sg[i].n_prep)
					continue;
				sg[i].store = false;
				pf_buf_reset(&resps[i]);
				size_t rejected = res[i].rejected;
				memset(&res[i], 0, sizeof(res[i]));
				res[i].rejected = rejected;
				r = answer_status(&res[i], &resps[i], 503, RPC_UNAVAILABLE,
						  "profile store: %s", pf_store_last_error(st));
				if (r < 0)
					rc = failed(&res[i], &resps[i]);
			}
		} else {
			for (size_t i = 0; i < n; i++)
				if (sg[i].store && sg[i].n_prep) {
					res[i].deleted = deleted; /* the batch's, on its first */
					deleted = 0;
				}
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (sg[i].store && answer_stored(&res[i], &resps[i], &sg[i]) < 0)
			rc = failed(&res[i], &resps[i]);
		staged_release(&sg[i]);
	}
	free(sg);
	return rc;
}

int pf_profstore_ingest(struct pf_store *st, const struct pf_profstore_request *req,
			struct pf_profstore_result *res, struct pf_buf *resp)
{
	return pf_profstore_ingest_batch(st, req, 1, res, resp);
}

struct detail_load {
	struct pf_prof_window **out;
	struct pf_error *err;
};

static int detail_cb(const void *samples, size_t len, const struct pf_profile_dstack *stacks,
		     size_t n_stacks, void *ud)
{
	struct detail_load *dl = ud;
	return pf_detail_build(samples, len, stacks, n_stacks, dl->out, dl->err);
}

int pf_profstore_load(struct pf_store *st, int64_t id, struct pf_prof_window **out,
		      struct pf_error *err)
{
	struct pf_buf gz, raw;
	struct detail_load dl = {out, err};
	int rc;

	*out = NULL;
	rc = pf_store_profile_detail(st, id, PF_PROFSTORE_LOAD_MAX_BYTES, detail_cb, &dl);
	if (rc == 0)
		return 0;
	if (rc != -ENOENT) {
		if (err && !err->code)
			pf_error_set(err, rc, NULL, "%s", pf_store_last_error(st));
		return rc;
	}
	/* stored before schema 14 (or with PF_PROFSTORE_BODY): the body */
	pf_buf_init(&gz, PF_PROFSTORE_LOAD_MAX_BYTES);
	pf_buf_init(&raw, PF_PROFSTORE_LOAD_MAX_BYTES);
	rc = pf_store_profile_body(st, id, &gz);
	if (rc == -ENOENT) {
		pf_error_set(err, rc, NULL, "no profile %lld", (long long)id);
	} else if (rc < 0) {
		pf_error_set(err, rc, NULL, "%s", pf_store_last_error(st));
	} else {
		rc = pf_gzip_decompress(gz.data ? gz.data : (const uint8_t *)"", gz.len,
					PF_PROFSTORE_LOAD_MAX_BYTES, &raw);
		if (rc < 0)
			pf_error_set(err, rc, NULL, "stored profile %lld: bad gzip body",
				     (long long)id);
		else
			rc = pf_otlp_profiles_decode(raw.data ? raw.data : (const uint8_t *)"",
						     raw.len, PF_PROFSTORE_LOAD_MAX_BYTES, out,
						     err);
	}
	pf_buf_release(&gz);
	pf_buf_release(&raw);
	return rc;
}

int pf_profstore_merge(struct pf_store *st, int64_t id, struct pf_flame *f, int slot)
{
	struct pf_prof_window *w = NULL;
	int rc;

	if (!f || slot < 0 || slot >= PF_FLAME_SLOTS)
		return -EINVAL;
	if (pf_profstore_compact() & PF_PROFSTORE_COMPACT_READ) {
		struct pf_buf gz, b;
		pf_buf_init(&gz, PF_PROFSTORE_FLAME_MAX_BYTES);
		pf_buf_init(&b, PF_PROFSTORE_FLAME_MAX_BYTES);
		rc = pf_store_profile_flame(st, id, &gz);
		if (rc == 0)
			rc = pf_gzip_decompress(gz.data ? gz.data : (const uint8_t *)"", gz.len,
						PF_PROFSTORE_FLAME_MAX_BYTES, &b);
		if (rc == 0)
			rc = pf_flame_add_compact(f, b.data, b.len, slot);
		pf_buf_release(&gz);
		pf_buf_release(&b);

		if (rc == 0 || rc == -ENOMEM)
			return rc;
		/* none (older profile), unreadable or corrupt (nothing was added): the body */
	}
	rc = pf_profstore_load(st, id, &w, NULL);
	if (rc < 0)
		return rc == -ENOMEM ? -EIO : rc;
	rc = pf_flame_add_window(f, w, slot);
	pf_prof_window_free(w);
	return rc;
}

/* ---- Conversion of profiles stored before the content tables. */

struct conv {
	struct pf_prof_window *w;
	struct content c;
};

static int conv_fill(void *ud, struct pf_store *st, int64_t id, struct pf_profile_row *row)
{
	struct conv *cv = ud;
	int rc = pf_profstore_load(st, id, &cv->w, NULL);

	if (rc == -ENOMEM)
		return rc;
	if (rc < 0 || !cv->w->n_processes)
		return -EBADMSG;
	row->type = pf_profstore_type(cv->w);
	row->start_ns = (int64_t)pf_min(cv->w->start_unix_ns, (uint64_t)INT64_MAX);
	rc = content_fill(cv->w, &cv->w->processes[0], &cv->c, row);
	row->samples = cv->c.total;
	return rc == -ENOMEM ? rc : rc < 0 ? -EBADMSG : 0;
}

static void conv_done(void *ud, struct pf_profile_row *row)
{
	struct conv *cv = ud;
	(void)row;
	content_release(&cv->c);
	pf_prof_window_free(cv->w);
	cv->w = NULL;
}

int pf_profstore_convert(struct pf_store *st, size_t max_rows, size_t *converted)
{
	struct conv cv = {0};
	struct pf_profile_converter c = {.fill = conv_fill, .done = conv_done, .ud = &cv};
	return pf_store_profiles_convert(st, max_rows, &c, converted);
}

