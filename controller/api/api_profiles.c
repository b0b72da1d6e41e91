/* api_profiles.c — see api_profiles.h and docs/api.md "Profiles". */
#include "api_profiles.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "pf/capture_msg.h"
#include "pf/compiler.h"
#include "pf/uuid.h"
#include "pprof_codec.h"
#include "profstore/flame.h"
#include "profstore/profstore.h"
#include "profstore/views.h"
#include "store.h"

#define NS_PER_MS 1000000LL

static const char *arg(const struct pf_api_request *req, const char *key)
{
	size_t kl = strlen(key);
	for (size_t i = 0; i < req->n_args; i++)
		if (strncmp(req->args[i], key, kl) == 0 && req->args[i][kl] == '=')
			return req->args[i] + kl + 1;
	return NULL;
}

static void respond_json(struct pf_api_response *resp, json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	if (!s) {
		pf_api_error(resp, 500, "internal", "out of memory building the response");
		return;
	}
	resp->status = 200;
	resp->content_type = "application/json";
	pf_buf_reset(&resp->body);
	if (pf_buf_append_str(&resp->body, s) < 0 || pf_buf_putc(&resp->body, '\n') < 0)
		pf_api_error(resp, 500, "internal", "response too large");
	free(s);
}

/* An integer query argument in [min, max]; def when absent. false (400 written) when bad. */
static bool arg_i64(const struct pf_api_request *req, struct pf_api_response *resp,
		    const char *key, int64_t min, int64_t max, int64_t def, int64_t *out)
{
	const char *s = arg(req, key);
	char *end;

	*out = def;
	if (!s || !*s)
		return true;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end || v < min || v > max) {
		pf_api_error(resp, 400, "invalid_argument", "%s: must be an integer %lld..%lld, got '%s'",
			     key, (long long)min, (long long)max, s);
		return false;
	}
	*out = v;
	return true;
}

/* Time range [from, to) in unix ms → ns. to defaults to now (+1 ms so "now" is in), from to
 * to - 1 h (merged views) or 0 (list). */
static bool arg_range(const struct pf_api_request *req, struct pf_api_response *resp,
		      const char *kfrom, const char *kto, int64_t default_span_ms, int64_t *from_ns,
		      int64_t *to_ns)
{
	const int64_t max_ms = INT64_MAX / NS_PER_MS;
	int64_t from, to;

	if (!arg_i64(req, resp, kto, 0, max_ms, req->now_ms + 1, &to))
		return false;
	if (!arg_i64(req, resp, kfrom, 0, max_ms, default_span_ms ? pf_max(to - default_span_ms, 0) : 0,
		     &from))
		return false;
	if (from >= to) {
		pf_api_error(resp, 400, "invalid_argument", "%s must be before %s", kfrom, kto);
		return false;
	}
	*from_ns = from * NS_PER_MS;
	*to_ns = to * NS_PER_MS;
	return true;
}

/* A filter with the storage of its match= pairs. */
struct qfilter {
	struct pf_profile_filter f;
	struct pf_profile_kv kv[PF_PROFILE_MATCH_MAX];
	char keys[PF_PROFILE_MATCH_MAX][PF_PROFILE_ATTR_MAX_BYTES + 1];
};

/* Every match=<key>=<value> (decoded), at most PF_PROFILE_MATCH_MAX. */
static bool arg_match(const struct pf_api_request *req, struct pf_api_response *resp,
		      struct qfilter *q)
{
	q->f.match = q->kv;
	q->f.n_match = 0;
	for (size_t i = 0; i < req->n_args; i++) {
		const char *a = req->args[i];
		if (strncmp(a, "match=", 6) != 0)
			continue;
		a += 6;
		const char *eq = strchr(a, '=');
		size_t kl = eq ? (size_t)(eq - a) : 0;
		if (!eq || !kl || kl > PF_PROFILE_ATTR_MAX_BYTES ||
		    strlen(eq + 1) > PF_PROFILE_ATTR_MAX_BYTES) {
			pf_api_error(resp, 400, "invalid_argument",
				     "match: must be <key>=<value> (key 1..%d bytes, value at most "
				     "%d), got '%s'",
				     PF_PROFILE_ATTR_MAX_BYTES, PF_PROFILE_ATTR_MAX_BYTES, a);
			return false;
		}
		if (q->f.n_match == PF_PROFILE_MATCH_MAX) {
			pf_api_error(resp, 400, "invalid_argument", "match: at most %d filters",
				     PF_PROFILE_MATCH_MAX);
			return false;
		}
		memcpy(q->keys[q->f.n_match], a, kl);
		q->keys[q->f.n_match][kl] = 0;
		q->kv[q->f.n_match] = (struct pf_profile_kv){q->keys[q->f.n_match], eq + 1};
		q->f.n_match++;
	}
	return true;
}

/* The list/merge filter from the query (without the time range). */
static bool arg_filter(const struct pf_api_request *req, struct pf_api_response *resp,
		       struct pf_profile_filter *f)
{
	memset(f, 0, sizeof(*f));
	f->service = arg(req, "service");
	f->agent = arg(req, "agent");
	f->type = arg(req, "type");
	if (!f->type || !*f->type)
		f->type = arg(req, "profile_type");
	f->capture_id = arg(req, "capture_id");
	f->trigger = arg(req, "trigger");
	f->namespace_name = arg(req, "namespace");
	f->pod = arg(req, "pod");
	f->container = arg(req, "container");
	static const char *const k8s_args[] = {"namespace", "pod", "container"};
	for (size_t i = 0; i < 3; i++) {
		const char *v = arg(req, k8s_args[i]);
		if (v && strlen(v) > 253) {
			pf_api_error(resp, 400, "invalid_argument", "%s: at most 253 characters",
				     k8s_args[i]);
			return false;
		}
	}
	if (f->capture_id && *f->capture_id && !pf_capture_id_valid(f->capture_id)) {
		pf_api_error(resp, 400, "invalid_argument",
			     "capture_id: must be 1..%d characters of [A-Za-z0-9._-]",
			     PF_CAPTURE_ID_MAX);
		return false;
	}
	if (f->trigger && strlen(f->trigger) > 32) {
		pf_api_error(resp, 400, "invalid_argument", "trigger: at most 32 characters");
		return false;
	}
	const char *t = arg(req, "trace_id");
	if (t && *t) {
		if (strlen(t) != 32 || pf_hex_decode(t, f->trace_id, 16) < 0) {
			pf_api_error(resp, 400, "invalid_argument",
				     "trace_id: must be 32 hex digits, got '%s'", t);
			return false;
		}
		f->has_trace = true;
	}
	return true;
}

/* The default span of a merged view: the last hour, or all of time for one capture (its
 * profiles are few and "the flame graph of capture X" must not depend on when it ran). */
static int64_t merge_span_ms(const struct pf_profile_filter *f)
{
	return f->capture_id && *f->capture_id ? 0 : PF_API_PROF_RANGE_DEFAULT_MS;
}

static json_t *meta_json(const struct pf_profile_row *r)
{
	char pid[33];
	pf_hex_encode(r->profile_id, 16, pid);
	json_t *o = json_pack(
	    "{s:I,s:s,s:s,s:s,s:s,s:I,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "id",
	    (json_int_t)r->id, "profile_id", pid, "agent", r->agent, "service", r->service, "host",
	    r->host, "pid", (json_int_t)r->pid, "executable", r->exe, "type", r->type, "start_ms",
	    (json_int_t)(r->start_ns / NS_PER_MS), "start_ns", (json_int_t)r->start_ns,
	    "duration_ms", (json_int_t)(r->duration_ns / NS_PER_MS), "duration_ns",
	    (json_int_t)r->duration_ns, "samples", (json_int_t)r->samples, "links",
	    (json_int_t)r->n_links, "received_ms", (json_int_t)r->received_ms, "size_bytes",
	    (json_int_t)r->body_bytes, "raw_bytes", (json_int_t)r->raw_bytes);
	if (o && r->capture_id && *r->capture_id)
		json_object_set_new(o, "capture_id", json_string(r->capture_id));
	if (o && r->trigger && *r->trigger)
		json_object_set_new(o, "trigger", json_string(r->trigger));
	if (o && r->namespace_name && *r->namespace_name)
		json_object_set_new(o, "namespace", json_string(r->namespace_name));
	if (o && r->pod && *r->pod)
		json_object_set_new(o, "pod", json_string(r->pod));
	if (o && r->container && *r->container)
		json_object_set_new(o, "container", json_string(r->container));
	return o;
}

/* ---- /profiles */

struct list_ctx {
	struct pf_store *st;
	const struct pf_profile_filter *f;
	json_t *arr;
	size_t limit;
};

struct match_ctx {
	const struct pf_profile_filter *f;
	size_t hits;
};

static int match_kv(const char *key, const char *value, void *ud)
{
	struct match_ctx *m = ud;
	for (size_t i = 0; i < m->f->n_match; i++)
		if (strcmp(m->f->match[i].key, key) == 0 && strcmp(m->f->match[i].value, value) == 0)
			m->hits++;
	return 0;
}

/* Whether a profile's attribute set has every match= pair (keys are unique in a set). */
static bool row_matches(struct pf_store *st, const struct pf_profile_filter *f, int64_t attrset)
{
	struct match_ctx m = {f, 0};
	if (!f->n_match)
		return true;
	return attrset > 0 && pf_store_attrset_foreach(st, attrset, match_kv, &m) == 0 &&
	       m.hits == f->n_match;
}

static int list_cb(const struct pf_profile_row *r, void *ud)
{
	struct list_ctx *c = ud;
	if (!row_matches(c->st, c->f, r->attrset))
		return 0;
	json_t *o = meta_json(r);
	if (!o || json_array_append_new(c->arr, o) < 0)
		return -ENOMEM;
	return json_array_size(c->arr) >= c->limit ? 1 : 0;
}

static void h_list(struct pf_api *api, const struct pf_api_request *req,
		   struct pf_api_response *resp)
{
	struct qfilter q;
	struct pf_profile_filter *f = &q.f;
	int64_t limit;

	if (!arg_filter(req, resp, f) || !arg_match(req, resp, &q) ||
	    !arg_range(req, resp, "from", "to", 0, &f->from_ns, &f->to_ns) ||
	    !arg_i64(req, resp, "limit", 1, PF_API_PROF_LIST_MAX, PF_API_PROF_LIST_DEFAULT, &limit))
		return;
	/* with match=, rows are tested one by one: the limit is counted here */
	f->limit = f->n_match ? 0 : (size_t)limit;
	json_t *arr = json_array();
	struct list_ctx c = {api->store, f, arr, (size_t)limit};
	int rc = arr ? pf_store_profiles_foreach(api->store, f, list_cb, &c) : -ENOMEM;
	if (rc == 1)
		rc = 0;
	if (rc < 0) {
		json_decref(arr);
		pf_api_error(resp, 500, "store_error", "%s", pf_store_last_error(api->store));
		return;
	}
	size_t n = json_array_size(arr);
	respond_json(resp, json_pack("{s:o,s:I,s:b}", "profiles", arr, "count", (json_int_t)n,
				     "more", n == (size_t)limit));
}

static bool parse_id(struct pf_api_response *resp, const char *s, int64_t *id)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end || !*s || v <= 0) {
		pf_api_error(resp, 404, "not_found", "no profile '%s' (ids are positive integers)", s);
		return false;
	}
	*id = v;
	return true;
}

static int get_cb(const struct pf_profile_row *r, void *ud)
{
	json_t *o = meta_json(r), *links = json_array();
	if (!o || !links) {
		json_decref(o);
		json_decref(links);
		return -ENOMEM;
	}
	for (size_t i = 0; i < r->n_link_entries; i++) {
		char t[33], s[17];
		pf_hex_encode(r->links[i].trace_id, 16, t);
		pf_hex_encode(r->links[i].span_id, 8, s);
		json_array_append_new(links, json_pack("{s:s,s:s}", "trace_id", t, "span_id", s));
	}
	json_object_set_new(o, "trace_links", links);
	*(json_t **)ud = o;
	return 0;
}

static void h_get(struct pf_api *api, struct pf_api_response *resp, int64_t id)
{
	json_t *o = NULL;
	int rc = pf_store_profile_get(api->store, id, get_cb, &o);

	if (rc == -ENOENT) {
		pf_api_error(resp, 404, "not_found", "no profile %lld", (long long)id);
		return;
	}
	if (rc < 0) {
		pf_api_error(resp, 500, "store_error", "%s", pf_store_last_error(api->store));
		return;
	}
	respond_json(resp, o);
}

/* Loads profile id or writes the error. */
static struct pf_prof_window *load(struct pf_api *api, struct pf_api_response *resp, int64_t id)
{
	struct pf_prof_window *w = NULL;
	struct pf_error err = {0};
	int rc = pf_profstore_load(api->store, id, &w, &err);

	if (rc == -ENOENT)
		pf_api_error(resp, 404, "not_found", "no profile %lld", (long long)id);
	else if (rc < 0)
		pf_api_error(resp, 500, "store_error", "%s", err.msg);
	return rc < 0 ? NULL : w;
}

/* The sample type of profile w that ?profile_type= (or ?type=) names, the stored one when
 * none: its index (-1: the CPU profile), or -2 and the error written. */
static int pick_type(const struct pf_api_request *req, struct pf_api_response *resp,
		     const struct pf_prof_window *w, int64_t id)
{
	const char *t = arg(req, "type");
	if (!t || !*t)
		t = arg(req, "profile_type");
	int k = pf_profstore_type_find(w, t);
	if (k == -2)
		pf_api_error(resp, 404, "not_found", "profile %lld has no sample type '%s'",
			     (long long)id, t);
	return k;
}

/* Loads profile id and picks its sample type (*k, as pick_type), or writes the error and
 * returns NULL. */
static struct pf_prof_window *load_typed(struct pf_api *api, const struct pf_api_request *req,
					 struct pf_api_response *resp, int64_t id, int *k)
{
	struct pf_prof_window *w = load(api, resp, id);
	if (w && (*k = pick_type(req, resp, w, id)) == -2) {
		pf_prof_window_free(w);
		return NULL;
	}
	return w;
}

static void h_pprof(struct pf_api *api, const struct pf_api_request *req,
		    struct pf_api_response *resp, int64_t id)
{
	struct pf_error err = {0};
	int k;
	struct pf_prof_window *w = load_typed(api, req, resp, id, &k);
	if (!w)
		return;
	/* The type shown by default is the one the views show (or the one asked for). */
	if (k >= 0)
		w->default_sample_type = w->sample_types[k].type;
	pf_buf_reset(&resp->body);
	int rc = pf_pprof_encode(w, PF_PPROF_ALL_PROCESSES, &resp->body, &err);
	pf_prof_window_free(w);
	if (rc < 0) {
		pf_api_error(resp, 500, "internal", "pprof encoding failed: %s", err.msg);
		return;
	}
	resp->status = 200;
	resp->content_type = "application/octet-stream";
	snprintf(resp->extra_header_name, sizeof(resp->extra_header_name),
		 "Content-Disposition:");
	snprintf(resp->extra_header_value, sizeof(resp->extra_header_value),
		 "attachment; filename=\"profile-%lld.pb.gz\"", (long long)id);
}

/* Writes the tree with extra root fields: {<extra>,"name":"all",...}. */
static void respond_tree(struct pf_api_response *resp, const struct pf_flame *f, bool diff,
			 uint64_t min_value, json_t *extra)
{
	char *x = extra ? json_dumps(extra, JSON_COMPACT) : NULL;
	size_t xl = x ? strlen(x) : 0;
	int rc;

	json_decref(extra);
	pf_buf_reset(&resp->body);
	rc = pf_flame_json(f, diff, min_value, &resp->body);
	if (rc == 0 && xl > 2) {
		/* Splice "{a:..}" + "{name:..}" into "{a:..,name:..}". */
		struct pf_buf t;
		pf_buf_init(&t, resp->body.max);
		rc = pf_buf_append(&t, x, xl - 1);
		if (rc == 0)
			rc = pf_buf_putc(&t, ',');
		if (rc == 0)
			rc = pf_buf_append(&t, resp->body.data + 1, resp->body.len - 1);
		if (rc == 0) {
			pf_buf_release(&resp->body);
			resp->body = t;
		} else {
			pf_buf_release(&t);
		}
	}
	free(x);
	if (rc == 0)
		rc = pf_buf_putc(&resp->body, '\n');
	if (rc < 0) {
		pf_api_error(resp, 500, "internal", "flame graph too large (%s)", strerror(-rc));
		return;
	}
	resp->status = 200;
	resp->content_type = "application/json";
}

static bool arg_nodes(const struct pf_api_request *req, struct pf_api_response *resp,
		      int64_t *max_nodes, int64_t *min_value)
{
	return arg_i64(req, resp, "max_nodes", 1, PF_API_PROF_NODES_MAX, PF_API_PROF_NODES_DEFAULT,
		       max_nodes) &&
	       arg_i64(req, resp, "min_value", 0, INT64_MAX, 0, min_value);
}

static void h_flame_one(struct pf_api *api, const struct pf_api_request *req,
			struct pf_api_response *resp, int64_t id)
{
	int64_t max_nodes, min_value;

	if (!arg_nodes(req, resp, &max_nodes, &min_value))
		return;
	int k;
	struct pf_prof_window *w = load_typed(api, req, resp, id, &k);
	if (!w)
		return;
	char unit[32], type[64];
	snprintf(unit, sizeof(unit), "%s", pf_profstore_unit_of(w, k));
	snprintf(type, sizeof(type), "%s", k >= 0 ? w->sample_types[k].type : "cpu");
	struct pf_flame *f = pf_flame_new((size_t)max_nodes);
	int rc = f ? pf_profstore_pick(w, k) : -ENOMEM;
	if (rc == 0)
		rc = pf_flame_add_window(f, w, 0);
	pf_prof_window_free(w);
	if (rc < 0) {
		pf_flame_free(f);
		pf_api_error(resp, 500, "internal", "building the flame graph: %s", strerror(-rc));
		return;
	}
	respond_tree(resp, f, false, (uint64_t)min_value,
		     json_pack("{s:s,s:s,s:I,s:b}", "unit", unit, "type", type, "profile",
			       (json_int_t)id, "truncated", pf_flame_truncated(f)));
	pf_flame_free(f);
}

/* ---- Merged views: every matching profile (views.h); max_profiles is accepted and
 * ignored. */

/* The filter of a merged view or time series: filters, range (default: the last hour, or all
 * of time for one capture) and the type (default cpu: never add up different kinds of
 * weight). */
static bool arg_selection(const struct pf_api_request *req, struct pf_api_response *resp,
			  struct qfilter *q, bool default_type)
{
	if (!arg_filter(req, resp, &q->f) || !arg_match(req, resp, q) ||
	    !arg_range(req, resp, "from", "to", merge_span_ms(&q->f), &q->f.from_ns, &q->f.to_ns))
		return false;
	if (default_type && (!q->f.type || !*q->f.type))
		q->f.type = "cpu";
	return true;
}

static bool arg_ignored_cap(const struct pf_api_request *req, struct pf_api_response *resp)
{
	int64_t ignored;
	return arg_i64(req, resp, "max_profiles", 1, PF_API_PROF_MERGE_MAX,
		       PF_API_PROF_MERGE_DEFAULT, &ignored);
}

static json_t *stats_json(const struct pf_merge_stats *ms, const char *prefix, json_t *o)
{
	char k[64];
	if (!o)
		return NULL;
	snprintf(k, sizeof(k), "%sprofiles_matched", prefix);
	json_object_set_new(o, k, json_integer((json_int_t)ms->matched));
	snprintf(k, sizeof(k), "%sprofiles_merged", prefix);
	json_object_set_new(o, k, json_integer((json_int_t)ms->merged));
	snprintf(k, sizeof(k), "%sprofiles_failed", prefix);
	json_object_set_new(o, k, json_integer((json_int_t)ms->failed));
	snprintf(k, sizeof(k), "%scapped", prefix);
	json_object_set_new(o, k, json_false());
	return o;
}

static void merge_error(struct pf_api *api, struct pf_api_response *resp, int rc)
{
	pf_api_error(resp, 500, rc == -ENOMEM ? "internal" : "store_error", "%s",
		     rc == -ENOMEM ? "out of memory" : pf_store_last_error(api->store));
}

/* The top table of slot 0 of fl, merged over q: what GET /api/v1/top answers. NULL with
 * *rc set on failure. */
static json_t *top_json(const struct pf_flame *fl, size_t limit, const struct qfilter *q,
			const struct pf_merge_stats *ms, int *rc)
{
	struct pf_flame_fn *fns = NULL;
	size_t n = 0;

	*rc = pf_flame_top(fl, 0, limit, &fns, &n);
	if (*rc < 0)
		return NULL;
	uint64_t total = pf_flame_total(fl, 0);
	json_t *arr = json_array();
	for (size_t i = 0; arr && i < n; i++)
		json_array_append_new(
		    arr, json_pack("{s:s,s:I,s:I,s:f,s:f}", "name", fns[i].name, "self",
				   (json_int_t)fns[i].self, "total", (json_int_t)fns[i].total,
				   "self_pct", total ? 100.0 * (double)fns[i].self / (double)total : 0.0,
				   "total_pct",
				   total ? 100.0 * (double)fns[i].total / (double)total : 0.0));
	json_t *o = json_pack("{s:o,s:I,s:s,s:I,s:I,s:s,s:b}", "functions", arr, "total",
			      (json_int_t)total, "unit", ms->unit, "from_ms",
			      (json_int_t)(q->f.from_ns / NS_PER_MS), "to_ms",
			      (json_int_t)(q->f.to_ns / NS_PER_MS), "type", q->f.type, "truncated",
			      pf_flame_truncated(fl));
	free(fns);
	o = stats_json(ms, "", o);
	if (!o)
		*rc = -ENOMEM;
	return o;
}

static void h_flame_merged(struct pf_api *api, const struct pf_api_request *req,
			   struct pf_api_response *resp, bool diff)
{
	struct qfilter q, base;
	int64_t max_nodes, min_value, top = 0;
	struct pf_merge_stats ms, bs = {0};

	if (!arg_selection(req, resp, &q, true) || !arg_ignored_cap(req, resp) ||
	    !arg_nodes(req, resp, &max_nodes, &min_value))
		return;
	if (!arg_i64(req, resp, "top", 1, PF_API_PROF_LIST_MAX, 0, &top))
		return;
	if (top && diff) {
		pf_api_error(resp, 400, "invalid_argument", "top: not on a diff");
		return;
	}
	base = q;
	base.f.match = base.kv;
	if (diff) {
		if (!arg(req, "base_from") || !arg(req, "base_to")) {
			pf_api_error(resp, 400, "invalid_argument",
				     "a diff needs base_from and base_to (unix ms)");
			return;
		}
		if (!arg_range(req, resp, "base_from", "base_to", 0, &base.f.from_ns,
			       &base.f.to_ns))
			return;
	}
	/* top: the table of the whole tree, from the same merge (full: when fl truncates) */
	struct pf_flame *fl = pf_flame_new((size_t)max_nodes), *full = NULL;
	int rc = fl ? 0 : -ENOMEM;
	if (rc == 0 && top && max_nodes < PF_API_PROF_NODES_MAX &&
	    !(full = pf_flame_new(PF_API_PROF_NODES_MAX)))
		rc = -ENOMEM;
	if (rc == 0)
		rc = pf_views_merge_both(api->store, &q.f, fl, full, 0, &ms);
	if (rc == 0 && diff)
		rc = pf_views_merge(api->store, &base.f, fl, 1, &bs);
	json_t *top_o = NULL;
	if (rc == 0 && top)
		top_o = top_json(full && pf_flame_truncated(fl) ? full : fl, (size_t)top, &q, &ms,
				 &rc);
	pf_flame_free(full);
	if (rc < 0) {
		pf_flame_free(fl);
		merge_error(api, resp, rc);
		return;
	}
	json_t *extra = json_pack("{s:s,s:I,s:I,s:s,s:b}", "unit", ms.unit, "from_ms",
				  (json_int_t)(q.f.from_ns / NS_PER_MS), "to_ms",
				  (json_int_t)(q.f.to_ns / NS_PER_MS), "type", q.f.type, "truncated",
				  pf_flame_truncated(fl));
	extra = stats_json(&ms, "", extra);
	if (top_o && extra)
		json_object_set_new(extra, "top", top_o);
	else
		json_decref(top_o);
	if (diff && extra) {
		extra = stats_json(&bs, "base_", extra);
		json_object_set_new(extra, "base_from_ms",
				    json_integer((json_int_t)(base.f.from_ns / NS_PER_MS)));
		json_object_set_new(extra, "base_to_ms",
				    json_integer((json_int_t)(base.f.to_ns / NS_PER_MS)));
		json_object_set_new(extra, "base_total",
				    json_integer((json_int_t)pf_flame_total(fl, 1)));
	}
	respond_tree(resp, fl, diff, (uint64_t)min_value, extra);
	pf_flame_free(fl);
}

static void h_top(struct pf_api *api, const struct pf_api_request *req,
		  struct pf_api_response *resp)
{
	struct qfilter q;
	int64_t limit;
	struct pf_merge_stats ms;

	if (!arg_selection(req, resp, &q, true) || !arg_ignored_cap(req, resp) ||
	    !arg_i64(req, resp, "limit", 1, PF_API_PROF_LIST_MAX, 50, &limit))
		return;
	struct pf_flame *fl = pf_flame_new(PF_API_PROF_NODES_MAX);
	int rc = fl ? pf_views_merge(api->store, &q.f, fl, 0, &ms) : -ENOMEM;
	json_t *o = rc == 0 ? top_json(fl, (size_t)limit, &q, &ms, &rc) : NULL;
	pf_flame_free(fl);
	if (rc < 0) {
		merge_error(api, resp, rc);
		return;
	}
	respond_json(resp, o);
}

/* ---- Time series and pickers */

/* The default step: the first of these giving at most PF_API_TIMELINE_DEFAULT_POINTS. */
static int64_t default_step(int64_t span_ms)
{
	static const int64_t steps[] = {1000,	 5000,	  10000,   15000,   30000,   60000,
					300000,	 600000,  900000,  1800000, 3600000, 10800000,
					21600000, 43200000, 86400000};
	for (size_t i = 0; i < PF_ARRAY_SIZE(steps); i++)
		if ((span_ms + steps[i] - 1) / steps[i] <= PF_API_TIMELINE_DEFAULT_POINTS)
			return steps[i];
	int64_t day = 86400000;
	int64_t days = (span_ms + day * PF_API_TIMELINE_DEFAULT_POINTS - 1) /
		       (day * PF_API_TIMELINE_DEFAULT_POINTS);
	return days * day;
}

static void h_timeline(struct pf_api *api, const struct pf_api_request *req,
		       struct pf_api_response *resp)
{
	struct qfilter q;
	int64_t step;
	char unit[32];

	if (!arg_selection(req, resp, &q, true))
		return;
	int64_t from = q.f.from_ns / NS_PER_MS, to = q.f.to_ns / NS_PER_MS, span = to - from;
	int64_t min_step = (span + PF_API_TIMELINE_MAX_POINTS - 1) / PF_API_TIMELINE_MAX_POINTS;
	if (!arg_i64(req, resp, "step", 1, INT64_MAX / 2, default_step(span), &step))
		return;
	if (step < min_step) {
		pf_api_error(resp, 400, "invalid_argument",
			     "step: at least %lld ms for this range (at most %d points)",
			     (long long)min_step, PF_API_TIMELINE_MAX_POINTS);
		return;
	}
	size_t n = (size_t)((span + step - 1) / step);
	_cleanup_free_ int64_t *pts = calloc(n ? n : 1, sizeof(*pts));
	int rc = pts ? pf_views_timeline(api->store, &q.f, from, step, n, pts, unit) : -ENOMEM;
	if (rc < 0) {
		merge_error(api, resp, rc);
		return;
	}
	json_t *arr = json_array();
	for (size_t i = 0; arr && i < n; i++)
		json_array_append_new(arr, json_pack("[I,I]", (json_int_t)(from + (int64_t)i * step),
						     (json_int_t)pts[i]));
	respond_json(resp, json_pack("{s:I,s:I,s:I,s:s,s:s,s:o}", "from_ms", (json_int_t)from,
				     "to_ms", (json_int_t)to, "step_ms", (json_int_t)step, "type",
				     q.f.type, "unit", unit, "points", arr));
}

static json_t *strings_json(char **s, size_t n)
{
	json_t *arr = json_array();
	for (size_t i = 0; arr && i < n; i++)
		json_array_append_new(arr, json_string(s[i]));
	return arr;
}

static void h_labels(struct pf_api *api, const struct pf_api_request *req,
		     struct pf_api_response *resp, const char *name)
{
	struct qfilter q;
	char **v = NULL;
	size_t n = 0;
	bool more = false;

	if (!arg_selection(req, resp, &q, false))
		return;
	int rc = pf_views_labels(api->store, &q.f, name,
				 name ? PF_API_LABEL_VALUES_MAX : PF_API_LABELS_MAX, &v, &n, &more);
	if (rc < 0) {
		merge_error(api, resp, rc);
		return;
	}
	json_t *o = name ? json_pack("{s:s,s:o,s:b}", "name", name, "values", strings_json(v, n),
				     "more", more)
			 : json_pack("{s:o,s:b}", "names", strings_json(v, n), "more", more);
	pf_views_strings_free(v, n);
	respond_json(resp, o);
}

static void h_types(struct pf_api *api, const struct pf_api_request *req,
		    struct pf_api_response *resp)
{
	struct qfilter q;
	char **t = NULL, **u = NULL;
	size_t n = 0;

	if (!arg_selection(req, resp, &q, false))
		return;
	q.f.type = NULL;
	int rc = pf_views_types(api->store, &q.f, &t, &u, &n);
	if (rc < 0) {
		merge_error(api, resp, rc);
		return;
	}
	json_t *arr = json_array();
	for (size_t i = 0; arr && i < n; i++)
		json_array_append_new(arr, json_pack("{s:s,s:s}", "type", t[i], "unit", u[i]));
	pf_views_strings_free(t, n);
	pf_views_strings_free(u, n);
	respond_json(resp, json_pack("{s:o}", "types", arr));
}

/* ---- Routing */

bool pf_api_profiles_match(const char seg[][160], size_t n)
{
	if (n == 1 && (strcmp(seg[0], "labels") == 0 || strcmp(seg[0], "timeline") == 0 ||
		       strcmp(seg[0], "profile_types") == 0))
		return true;
	if (n == 3 && strcmp(seg[0], "labels") == 0 && strcmp(seg[2], "values") == 0)
		return true;
	if (n >= 1 && n <= 3 && strcmp(seg[0], "profiles") == 0)
		return n < 3 || strcmp(seg[2], "pprof") == 0 || strcmp(seg[2], "flamegraph") == 0;
	if (n == 1 && (strcmp(seg[0], "flamegraph") == 0 || strcmp(seg[0], "top") == 0))
		return true;
	return n == 2 && strcmp(seg[0], "flamegraph") == 0 && strcmp(seg[1], "diff") == 0;
}

bool pf_api_profiles_offload(const char *method, const char *path)
{
	char seg[3][160];
	size_t n = 0;
	const char *p;

	if (strcmp(method, "GET") != 0 || strncmp(path, "/api/v1/", 8) != 0)
		return false;
	/* The same splitting as api.c's router: empty segments are skipped. */
	for (p = path + 8; *p == '/'; p++)
		;
	while (*p) {
		const char *e = strchr(p, '/');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (n == 3 || l >= sizeof(seg[0]))
			return false;
		memcpy(seg[n], p, l);
		seg[n++][l] = 0;
		for (p += l; *p == '/'; p++)
			;
	}
	if (!n || !pf_api_profiles_match((const char(*)[160])seg, n))
		return false;
	return !(n == 2 && strcmp(seg[0], "profiles") == 0); /* metadata: cheap */
}

void pf_api_profiles_handle(struct pf_api *api, const struct pf_api_request *req,
			    struct pf_api_response *resp, const char seg[][160], size_t n)
{
	int64_t id;

	if (strcmp(req->method, "GET") != 0) {
		pf_api_error(resp, 405, "method_not_allowed", "%s is not allowed on %s",
			     req->method, req->path);
		snprintf(resp->extra_header_name, sizeof(resp->extra_header_name), "Allow:");
		snprintf(resp->extra_header_value, sizeof(resp->extra_header_value), "GET");
		return;
	}
	if (strcmp(seg[0], "top") == 0)
		return h_top(api, req, resp);
	if (strcmp(seg[0], "timeline") == 0)
		return h_timeline(api, req, resp);
	if (strcmp(seg[0], "profile_types") == 0)
		return h_types(api, req, resp);
	if (strcmp(seg[0], "labels") == 0)
		return h_labels(api, req, resp, n == 3 ? seg[1] : NULL);
	if (strcmp(seg[0], "flamegraph") == 0)
		return h_flame_merged(api, req, resp, n == 2);
	if (n == 1)
		return h_list(api, req, resp);
	if (!parse_id(resp, seg[1], &id))
		return;
	if (n == 2)
		return h_get(api, resp, id);
	if (strcmp(seg[2], "pprof") == 0)
		return h_pprof(api, req, resp, id);
	return h_flame_one(api, req, resp, id);
}
