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

/* The list/merge filter from the query (without the time range). */
static bool arg_filter(const struct pf_api_request *req, struct pf_api_response *resp,
		       struct pf_profile_filter *f)
{
	memset(f, 0, sizeof(*f));
	f->service = arg(req, "service");
	f->agent = arg(req, "agent");
	f->type = arg(req, "type");
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

static int list_cb(const struct pf_profile_row *r, void *ud)
{
	json_t *o = meta_json(r);
	if (!o || json_array_append_new(ud, o) < 0)
		return -ENOMEM;
	return 0;
}

static void h_list(struct pf_api *api, const struct pf_api_request *req,
		   struct pf_api_response *resp)
{
	struct pf_profile_filter f;
	int64_t limit;

	if (!arg_filter(req, resp, &f) ||
	    !arg_range(req, resp, "from", "to", 0, &f.from_ns, &f.to_ns) ||
	    !arg_i64(req, resp, "limit", 1, PF_API_PROF_LIST_MAX, PF_API_PROF_LIST_DEFAULT, &limit))
		return;
	f.limit = (size_t)limit;
	json_t *arr = json_array();
	int rc = arr ? pf_store_profiles_foreach(api->store, &f, list_cb, arr) : -ENOMEM;
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

static void h_pprof(struct pf_api *api, struct pf_api_response *resp, int64_t id)
{
	struct pf_prof_window *w = load(api, resp, id);
	struct pf_error err = {0};

	if (!w)
		return;
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
	struct pf_prof_window *w = load(api, resp, id);
	if (!w)
		return;
	struct pf_flame *f = pf_flame_new((size_t)max_nodes);
	int rc = f ? pf_flame_add_window(f, w, 0) : -ENOMEM;
	pf_prof_window_free(w);
	if (rc < 0) {
		pf_flame_free(f);
		pf_api_error(resp, 500, "internal", "building the flame graph: %s", strerror(-rc));
		return;
	}
	respond_tree(resp, f, false, (uint64_t)min_value,
		     json_pack("{s:I,s:b}", "profile", (json_int_t)id, "truncated",
			       pf_flame_truncated(f)));
	pf_flame_free(f);
}

/* ---- Merged views */

struct idlist {
	int64_t *ids;
	size_t n, cap;
};

static int ids_cb(const struct pf_profile_row *r, void *ud)
{
	struct idlist *l = ud;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		int64_t *n = realloc(l->ids, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		l->ids = n;
		l->cap = cap;
	}
	l->ids[l->n++] = r->id;
	return 0;
}

struct merge_stats {
	size_t matched, merged, failed;
	bool scan_capped;
};

/* Merges up to max_profiles of the profiles matching f into slot of fl, evenly spread over
 * the matches (newest first order, every k-th). */
static int merge(struct pf_api *api, struct pf_profile_filter *f, size_t max_profiles,
		 struct pf_flame *fl, int slot, struct merge_stats *ms)
{
	struct idlist l = {0};
	int rc;

	memset(ms, 0, sizeof(*ms));
	f->limit = PF_API_PROF_SCAN_MAX;
	rc = pf_store_profiles_foreach(api->store, f, ids_cb, &l);
	if (rc < 0) {
		free(l.ids);
		return rc;
	}
	ms->matched = l.n;
	ms->scan_capped = l.n == PF_API_PROF_SCAN_MAX;
	size_t take = pf_min(l.n, max_profiles);
	for (size_t i = 0; i < take; i++) {
		/* i-th of `take` evenly spaced picks among n */
		size_t at = (size_t)(((unsigned __int128)i * l.n) / take);
		/* the compact flame form when stored, else the body (same tree) */
		rc = pf_profstore_merge(api->store, l.ids[at], fl, slot);
		if (rc == -ENOMEM)
			break;
		if (rc < 0) {
			ms->failed++;
			rc = 0;
			continue;
		}
		ms->merged++;
	}
	free(l.ids);
	return rc;
}

static json_t *stats_json(const struct merge_stats *ms, const char *prefix, json_t *o)
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
	json_object_set_new(o, k, json_boolean(ms->merged + ms->failed < ms->matched));
	return o;
}

static void h_flame_merged(struct pf_api *api, const struct pf_api_request *req,
			   struct pf_api_response *resp, bool diff)
{
	struct pf_profile_filter f, base;
	int64_t max_profiles, max_nodes, min_value;
	struct merge_stats ms, bs = {0};

	if (!arg_filter(req, resp, &f) ||
	    !arg_range(req, resp, "from", "to", merge_span_ms(&f), &f.from_ns, &f.to_ns) ||
	    !arg_i64(req, resp, "max_profiles", 1, PF_API_PROF_MERGE_MAX,
		     PF_API_PROF_MERGE_DEFAULT, &max_profiles) ||
	    !arg_nodes(req, resp, &max_nodes, &min_value))
		return;
	if (!f.type || !*f.type)
		f.type = "cpu"; /* never add up different kinds of weight */
	base = f;
	if (diff) {
		if (!arg(req, "base_from") || !arg(req, "base_to")) {
			pf_api_error(resp, 400, "invalid_argument",
				     "a diff needs base_from and base_to (unix ms)");
			return;
		}
		if (!arg_range(req, resp, "base_from", "base_to", 0, &base.from_ns, &base.to_ns))
			return;
	}
	struct pf_flame *fl = pf_flame_new((size_t)max_nodes);
	int rc = fl ? merge(api, &f, (size_t)max_profiles, fl, 0, &ms) : -ENOMEM;
	if (rc == 0 && diff)
		rc = merge(api, &base, (size_t)max_profiles, fl, 1, &bs);
	if (rc < 0) {
		pf_flame_free(fl);
		pf_api_error(resp, 500, rc == -ENOMEM ? "internal" : "store_error", "%s",
			     rc == -ENOMEM ? "out of memory" : pf_store_last_error(api->store));
		return;
	}
	json_t *extra = json_pack("{s:I,s:I,s:s,s:b,s:I}", "from_ms",
				  (json_int_t)(f.from_ns / NS_PER_MS), "to_ms",
				  (json_int_t)(f.to_ns / NS_PER_MS), "type", f.type, "truncated",
				  pf_flame_truncated(fl), "max_profiles", (json_int_t)max_profiles);
	extra = stats_json(&ms, "", extra);
	if (diff && extra) {
		extra = stats_json(&bs, "base_", extra);
		json_object_set_new(extra, "base_from_ms",
				    json_integer((json_int_t)(base.from_ns / NS_PER_MS)));
		json_object_set_new(extra, "base_to_ms",
				    json_integer((json_int_t)(base.to_ns / NS_PER_MS)));
		json_object_set_new(extra, "base_total",
				    json_integer((json_int_t)pf_flame_total(fl, 1)));
	}
	respond_tree(resp, fl, diff, (uint64_t)min_value, extra);
	pf_flame_free(fl);
}

static void h_top(struct pf_api *api, const struct pf_api_request *req,
		  struct pf_api_response *resp)
{
	struct pf_profile_filter f;
	int64_t max_profiles, limit;
	struct merge_stats ms;

	if (!arg_filter(req, resp, &f) ||
	    !arg_range(req, resp, "from", "to", merge_span_ms(&f), &f.from_ns, &f.to_ns) ||
	    !arg_i64(req, resp, "max_profiles", 1, PF_API_PROF_MERGE_MAX,
		     PF_API_PROF_MERGE_DEFAULT, &max_profiles) ||
	    !arg_i64(req, resp, "limit", 1, PF_API_PROF_LIST_MAX, 50, &limit))
		return;
	if (!f.type || !*f.type)
		f.type = "cpu";
	struct pf_flame *fl = pf_flame_new(PF_API_PROF_NODES_MAX);
	int rc = fl ? merge(api, &f, (size_t)max_profiles, fl, 0, &ms) : -ENOMEM;
	struct pf_flame_fn *fns = NULL;
	size_t n = 0;
	if (rc == 0)
		rc = pf_flame_top(fl, 0, (size_t)limit, &fns, &n);
	if (rc < 0) {
		pf_flame_free(fl);
		pf_api_error(resp, 500, "internal", "%s", strerror(-rc));
		return;
	}
	uint64_t total = pf_flame_total(fl, 0);
	json_t *arr = json_array();
	for (size_t i = 0; arr && i < n; i++)
		json_array_append_new(
		    arr, json_pack("{s:s,s:I,s:I,s:f,s:f}", "name", fns[i].name, "self",
				   (json_int_t)fns[i].self, "total", (json_int_t)fns[i].total,
				   "self_pct", total ? 100.0 * (double)fns[i].self / (double)total : 0.0,
				   "total_pct",
				   total ? 100.0 * (double)fns[i].total / (double)total : 0.0));
	json_t *o = json_pack("{s:o,s:I,s:I,s:I,s:s,s:b}", "functions", arr, "total",
			      (json_int_t)total, "from_ms", (json_int_t)(f.from_ns / NS_PER_MS),
			      "to_ms", (json_int_t)(f.to_ns / NS_PER_MS), "type", f.type,
			      "truncated", pf_flame_truncated(fl));
	free(fns);
	pf_flame_free(fl);
	respond_json(resp, stats_json(&ms, "", o));
}

/* ---- Routing */

bool pf_api_profiles_match(const char seg[][160], size_t n)
{
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
	if (strcmp(seg[0], "flamegraph") == 0)
		return h_flame_merged(api, req, resp, n == 2);
	if (n == 1)
		return h_list(api, req, resp);
	if (!parse_id(resp, seg[1], &id))
		return;
	if (n == 2)
		return h_get(api, resp, id);
	if (strcmp(seg[2], "pprof") == 0)
		return h_pprof(api, resp, id);
	return h_flame_one(api, req, resp, id);
}
