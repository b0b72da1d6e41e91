/* test_api_profiles.c — the profile routes through pf_api_handle() with a real store filled by
 * the receiver: list with filters, metadata, pprof download (decoded back), one profile's flame
 * graph, the merged flame graph with its cap, top, diff, and the JSON errors; which routes
 * the server offloads to the query pool, and that they answer the same through a struct
 * pf_api holding only a second, read-only connection (what a pool worker runs); the merged
 * views answer byte for byte the same with the compact flame forms and without them. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "api/api.h"
#include "api_fixture.h"
#include "api/api_profiles.h"
#include "fleet/fleet.h"
#include "metrics.h"
#include "otlp_profiles.h"
#include "pf/compiler.h"
#include "pf/gzip.h"
#include "pf/hash.h"
#include "pf/uuid.h"
#include "pprof_codec.h"
#include "prof_fixture.h"
#include "profstore/profstore.h"
#include "store.h"

#define START_MS ((int64_t)(PROF_FIXTURE_START / 1000000))

struct fx {
	char dir[64];
	struct pf_store *store;
	struct pf_fleet *fleet;
	struct pf_metrics metrics;
	struct pf_api api;
	char viewer[80];
};

/* Stores the fixture window shifted by `shift_s` seconds, with `hot` extra samples on the
 * first sample of pid 100 (work_a). */
static void ingest_fixture(struct fx *x, int64_t shift_s, uint64_t hot)
{
	struct pf_prof_window *w = prof_fixture_window(PROF_FIX_LINK);
	struct pf_buf req, resp;
	struct pf_profstore_result res;
	w->start_unix_ns += (uint64_t)shift_s * 1000000000ull;
	w->end_unix_ns += (uint64_t)shift_s * 1000000000ull;
	((struct pf_prof_sample *)w->processes[0].samples)[0].count += hot;
	pf_buf_init(&req, 1 << 24);
	pf_buf_init(&resp, 1 << 20);
	assert_int_equal(pf_otlp_profiles_encode(w, &req, NULL, NULL), 0);
	struct pf_profstore_request q = {.body = req.data, .len = req.len, .now_ms = 1};
	assert_int_equal(pf_profstore_ingest(x->store, &q, &res, &resp), 0);
	assert_int_equal(res.status, 200);
	assert_int_equal(res.accepted, 2);
	pf_buf_release(&req);
	pf_buf_release(&resp);
	pf_prof_window_free(w);
}

static int setup(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));
	api_fixture_open("apiprof", x->dir, &x->store, &x->fleet);
	x->api.fleet = x->fleet;
	x->api.store = x->store;
	x->api.metrics = &x->metrics;
	x->api.ready = true;
	api_fixture_token(x->store, "viewer", "viewer", x->viewer);
	/* ids 1,2 at +0 s; 3,4 at +10 s; 5,6 at +20 s with work_a much hotter */
	ingest_fixture(x, 0, 0);
	ingest_fixture(x, 10, 0);
	ingest_fixture(x, 20, 100);
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fx *x = *state;
	api_fixture_close(x->dir, x->store, x->fleet);
	free(x);
	return 0;
}

/* GET path?args...; returns JSON (NULL for other content) and fills status / raw body. */
static json_t *get(struct fx *x, const char *path, int *status, struct pf_buf *raw, ...)
{
	struct pf_api_request q = {.method = "GET", .path = path, .authorization = x->viewer,
				   .now_ms = START_MS + 3600 * 1000};
	va_list ap;
	va_start(ap, raw);
	for (const char *a; (a = va_arg(ap, const char *)) && q.n_args < PF_API_MAX_ARGS;)
		q.args[q.n_args++] = a;
	va_end(ap);
	struct pf_api_response r;
	pf_api_response_init(&r);
	pf_api_handle(&x->api, &q, &r);
	*status = r.status;
	json_t *j = NULL;
	if (strcmp(r.content_type, "application/json") == 0) {
		json_error_t e;
		j = json_loadb((const char *)r.body.data, r.body.len, 0, &e);
		if (!j)
			fail_msg("invalid JSON from %s: %s", path, pf_buf_str(&r.body));
	}
	if (raw)
		assert_int_equal(pf_buf_append(raw, r.body.data, r.body.len), 0);
	pf_api_response_release(&r);
	return j;
}

static const char *err_code(json_t *j)
{
	return api_fixture_err(j, "code");
}

#define child api_fixture_child
#define ival api_fixture_int

static void test_list(void **state)
{
	struct fx *x = *state;
	int st;
	json_t *j = get(x, "/api/v1/profiles", &st, NULL, NULL);
	assert_int_equal(st, 200);
	json_t *p = json_object_get(j, "profiles");
	assert_int_equal(json_array_size(p), 6);
	/* newest first */
	assert_int_equal(ival(json_array_get(p, 0), "start_ms"), START_MS + 20000);
	json_t *e = json_array_get(p, 5);
	assert_int_equal(ival(e, "start_ms"), START_MS);
	assert_string_equal(json_string_value(json_object_get(e, "type")), "cpu");
	assert_string_equal(json_string_value(json_object_get(e, "host")), "host-a");
	assert_true(ival(e, "size_bytes") > 0);
	json_decref(j);

	char from[32], to[32];
	snprintf(from, sizeof(from), "from=%lld", (long long)START_MS + 5000);
	snprintf(to, sizeof(to), "to=%lld", (long long)START_MS + 15000);
	j = get(x, "/api/v1/profiles", &st, NULL, from, to, "limit=1", NULL);
	assert_int_equal(st, 200);
	assert_int_equal(json_array_size(json_object_get(j, "profiles")), 1);
	assert_true(json_is_true(json_object_get(j, "more")));
	json_decref(j);

	j = get(x, "/api/v1/profiles", &st, NULL, "trace_id=0102030405060708090a0b0c0d0e0f10",
		NULL);
	assert_int_equal(st, 200);
	json_decref(j);
	j = get(x, "/api/v1/profiles", &st, NULL, "trace_id=xyz", NULL);
	assert_int_equal(st, 400);
	assert_string_equal(err_code(j), "invalid_argument");
	json_decref(j);
	j = get(x, "/api/v1/profiles", &st, NULL, "limit=1001", NULL);
	assert_int_equal(st, 400);
	json_decref(j);
	j = get(x, "/api/v1/profiles", &st, NULL, "from=10", "to=5", NULL);
	assert_int_equal(st, 400);
	json_decref(j);
	j = get(x, "/api/v1/profiles", &st, NULL, "service=nobody", NULL);
	assert_int_equal(json_array_size(json_object_get(j, "profiles")), 0);
	json_decref(j);
}

static void test_get_and_pprof(void **state)
{
	struct fx *x = *state;
	int st;
	json_t *j = get(x, "/api/v1/profiles/1", &st, NULL, NULL);
	assert_int_equal(st, 200);
	assert_int_equal(ival(j, "pid"), 100);
	assert_int_equal(ival(j, "samples"), 8);
	assert_int_equal(ival(j, "links"), 1);
	assert_int_equal(json_array_size(json_object_get(j, "trace_links")), 1);
	json_decref(j);
	j = get(x, "/api/v1/profiles/77", &st, NULL, NULL);
	assert_int_equal(st, 404);
	assert_string_equal(err_code(j), "not_found");
	json_decref(j);
	j = get(x, "/api/v1/profiles/abc", &st, NULL, NULL);
	assert_int_equal(st, 404);
	json_decref(j);

	struct pf_buf raw;
	pf_buf_init(&raw, 1 << 24);
	j = get(x, "/api/v1/profiles/1/pprof", &st, &raw, NULL);
	assert_null(j);
	assert_int_equal(st, 200);
	assert_true(pf_gzip_is_gzip(raw.data, raw.len));
	struct pf_prof_window *w = NULL;
	assert_int_equal(pf_pprof_decode(raw.data, raw.len, 1 << 26, &w, NULL), 0);
	assert_int_equal(pf_prof_window_samples(w), 8);
	pf_prof_window_free(w);
	pf_buf_release(&raw);
	json_decref(get(x, "/api/v1/profiles/77/pprof", &st, NULL, NULL));
	assert_int_equal(st, 404);
	json_decref(get(x, "/api/v1/profiles/1/nothing", &st, NULL, NULL));
	assert_int_equal(st, 404);
}

static void test_flamegraphs(void **state)
{
	struct fx *x = *state;
	int st;
	json_t *j = get(x, "/api/v1/profiles/1/flamegraph", &st, NULL, NULL);
	assert_int_equal(st, 200);
	assert_string_equal(json_string_value(json_object_get(j, "name")), "all");
	assert_int_equal(ival(j, "value"), 8);
	assert_int_equal(ival(child(child(j, "main"), "work_a"), "value"), 5);
	json_decref(j);

	char from[32];
	snprintf(from, sizeof(from), "from=%lld", (long long)START_MS);
	j = get(x, "/api/v1/flamegraph", &st, NULL, from, NULL);
	assert_int_equal(st, 200);
	assert_int_equal(ival(j, "profiles_matched"), 6);
	assert_int_equal(ival(j, "profiles_merged"), 6);
	assert_false(json_is_true(json_object_get(j, "capped")));
	assert_int_equal(ival(j, "value"), 3 * 11 + 100);
	json_decref(j);
	/* max_profiles is accepted and ignored: every profile is merged */
	j = get(x, "/api/v1/flamegraph", &st, NULL, from, "max_profiles=2", NULL);
	assert_int_equal(ival(j, "profiles_merged"), 6);
	assert_false(json_is_true(json_object_get(j, "capped")));
	assert_string_equal(json_string_value(json_object_get(j, "unit")), "samples");
	json_decref(j);
	/* profile_type is type */
	j = get(x, "/api/v1/flamegraph", &st, NULL, from, "profile_type=alloc_space", NULL);
	assert_int_equal(ival(j, "value"), 0);
	json_decref(j);
	/* a type nobody sent: empty tree */
	j = get(x, "/api/v1/flamegraph", &st, NULL, from, "type=alloc_space", NULL);
	assert_int_equal(ival(j, "value"), 0);
	json_decref(j);

	/* diff: the last 10 s against the first 20 s shows work_a got hotter */
	char f2[32], t2[32], bt[32];
	snprintf(f2, sizeof(f2), "from=%lld", (long long)START_MS + 20000);
	snprintf(t2, sizeof(t2), "to=%lld", (long long)START_MS + 30000);
	snprintf(bt, sizeof(bt), "base_to=%lld", (long long)START_MS + 20000);
	char bf[32];
	snprintf(bf, sizeof(bf), "base_from=%lld", (long long)START_MS);
	j = get(x, "/api/v1/flamegraph/diff", &st, NULL, f2, t2, bf, bt, NULL);
	assert_int_equal(st, 200);
	assert_int_equal(ival(j, "base_total"), 22);
	json_t *wa = child(child(j, "main"), "work_a");
	assert_int_equal(ival(wa, "value"), 108);
	assert_int_equal(ival(wa, "base"), 16);
	assert_true(ival(wa, "delta") > 0);
	assert_true(ival(child(child(j, "main"), "work_b"), "delta") < 0);
	json_decref(j);
	j = get(x, "/api/v1/flamegraph/diff", &st, NULL, f2, NULL);
	assert_int_equal(st, 400);
	json_decref(j);
}

static void test_top(void **state)
{
	struct fx *x = *state;
	int st;
	char from[32];
	snprintf(from, sizeof(from), "from=%lld", (long long)START_MS);
	json_t *j = get(x, "/api/v1/top", &st, NULL, from, "limit=2", NULL);
	assert_int_equal(st, 200);
	json_t *fns = json_object_get(j, "functions");
	assert_int_equal(json_array_size(fns), 2);
	json_t *f0 = json_array_get(fns, 0);
	assert_string_equal(json_string_value(json_object_get(f0, "name")), "work_a");
	assert_int_equal(ival(f0, "self"), 3 * 8 + 100);
	assert_int_equal(ival(f0, "total"), 3 * 8 + 100);
	assert_int_equal(ival(j, "total"), 3 * 11 + 100);
	json_decref(j);
	j = get(x, "/api/v1/top", &st, NULL, "from=x", NULL);
	assert_int_equal(st, 400);
	json_decref(j);
}

/* GET /flamegraph?top=N: the tree GET /flamegraph answers plus, under "top", what GET
 * /top?limit=N answers, from one merge; with a node cap that truncates the tree, the table
 * is still the whole tree's. */
static void check_flame_with_top(struct fx *x)
{
	char from[32];
	int st;
	snprintf(from, sizeof(from), "from=%lld", (long long)START_MS);
	static const char *const caps[] = {"max_nodes=50000", "max_nodes=2"};
	json_t *top = get(x, "/api/v1/top", &st, NULL, from, "limit=3", NULL);
	assert_int_equal(st, 200);
	assert_false(json_is_true(json_object_get(top, "truncated")));
	for (size_t i = 0; i < 2; i++) {
		json_t *tree = get(x, "/api/v1/flamegraph", &st, NULL, from, caps[i], NULL);
		assert_int_equal(st, 200);
		json_t *both = get(x, "/api/v1/flamegraph", &st, NULL, from, caps[i], "top=3", NULL);
		assert_int_equal(st, 200);
		assert_true(json_equal(json_object_get(both, "top"), top));
		assert_int_equal(json_array_size(json_object_get(json_object_get(both, "top"),
								 "functions")),
				 3);
		assert_int_equal(json_object_del(both, "top"), 0);
		assert_true(json_equal(both, tree));
		assert_true(json_is_true(json_object_get(tree, "truncated")) == (i == 1));
		json_decref(tree);
		json_decref(both);
	}
	json_decref(top);
	static const char *const bad[] = {"top=0", "top=1001", "top=x"};
	for (size_t i = 0; i < PF_ARRAY_SIZE(bad); i++) {
		json_t *j = get(x, "/api/v1/flamegraph", &st, NULL, from, bad[i], NULL);
		assert_int_equal(st, 400);
		assert_string_equal(err_code(j), "invalid_argument");
		json_decref(j);
	}
	char bf[32], bt[32];
	snprintf(bf, sizeof(bf), "base_from=%lld", (long long)START_MS);
	snprintf(bt, sizeof(bt), "base_to=%lld", (long long)START_MS + 20000);
	json_t *j = get(x, "/api/v1/flamegraph/diff", &st, NULL, from, bf, bt, "top=3", NULL);
	assert_int_equal(st, 400);
	json_decref(j);
}

static void test_flame_with_top(void **state)
{
	check_flame_with_top(*state);
}

static void refill(void **state, unsigned ingest_flags);

/* The same over profiles read one by one (stored without the content tables). */
static void test_flame_with_top_legacy(void **state)
{
	refill(state, 0);
	pf_profstore_set_compact(0);
	check_flame_with_top(*state);
	pf_profstore_set_compact(PF_PROFSTORE_COMPACT_READ | PF_PROFSTORE_STACKS);
}

static void test_auth_and_methods(void **state)
{
	struct fx *x = *state;
	struct pf_api_request q = {.method = "GET", .path = "/api/v1/profiles", .now_ms = 1};
	struct pf_api_response r;
	pf_api_response_init(&r);
	pf_api_handle(&x->api, &q, &r);
	assert_int_equal(r.status, 401);
	pf_api_response_release(&r);
	/* a viewer may not POST; an operator gets 405 */
	char op[80];
	api_fixture_token(x->store, "operator", "operator", op);
	q.method = "DELETE";
	q.authorization = op;
	pf_api_response_init(&r);
	pf_api_handle(&x->api, &q, &r);
	assert_int_equal(r.status, 405);
	pf_api_response_release(&r);
}

static void test_offload_routes(void **state)
{
	(void)state;
	static const char *const heavy[] = {
		"/api/v1/profiles", "/api/v1/flamegraph", "/api/v1/flamegraph/diff", "/api/v1/top",
		"/api/v1/profiles/3/flamegraph", "/api/v1/profiles/3/pprof", "/api/v1//top/",
	};
	static const char *const light[] = {
		"/api/v1/profiles/3", "/api/v1/profiles/3/other", "/api/v1/fleet/summary",
		"/api/v1/agents", "/healthz", "/metrics", "/api/v1/top/x", "/api/v2/top", "/top",
		"/api/v1/", "/api/v1/flamegraph/diff/x",
	};
	for (size_t i = 0; i < sizeof(heavy) / sizeof(heavy[0]); i++) {
		assert_true(pf_api_profiles_offload("GET", heavy[i]));
		assert_false(pf_api_profiles_offload("POST", heavy[i]));
		assert_false(pf_api_profiles_offload("DELETE", heavy[i]));
	}
	for (size_t i = 0; i < sizeof(light) / sizeof(light[0]); i++)
		assert_false(pf_api_profiles_offload("GET", light[i]));
	char longseg[400];
	memset(longseg, 'a', sizeof(longseg) - 1);
	longseg[sizeof(longseg) - 1] = 0;
	memcpy(longseg, "/api/v1/", 8);
	assert_false(pf_api_profiles_offload("GET", longseg));
}

/* What a pool worker does: the same request through a struct pf_api with only its own
 * read-only connection gives the same answer; 401 still applies there. */
static void test_worker_api_same_answers(void **state)
{
	struct fx *x = *state;
	char db[128];
	snprintf(db, sizeof(db), "%s/db", x->dir);
	struct pf_store *ro = pf_store_open(db, PF_STORE_SYNC_NORMAL, NULL);
	assert_non_null(ro);
	assert_int_equal(pf_store_set_read_only(ro), 0);
	struct pf_api wapi = {.store = ro};
	static const char *const paths[] = {
		"/api/v1/profiles", "/api/v1/flamegraph", "/api/v1/top", "/api/v1/flamegraph/diff",
		"/api/v1/profiles/3/flamegraph", "/api/v1/profiles/3/pprof",
	};
	char from[64], to[64], bf[64], bt[64];
	snprintf(from, sizeof(from), "from=%lld", (long long)START_MS);
	snprintf(to, sizeof(to), "to=%lld", (long long)START_MS + 30000);
	snprintf(bf, sizeof(bf), "base_from=%lld", (long long)START_MS);
	snprintf(bt, sizeof(bt), "base_to=%lld", (long long)START_MS + 10000);
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		struct pf_api_request q = {.method = "GET", .path = paths[i],
					   .authorization = x->viewer, .now_ms = START_MS + 3600000,
					   .n_args = 4, .args = {from, to, bf, bt}};
		struct pf_api_response a, b;
		pf_api_response_init(&a);
		pf_api_response_init(&b);
		pf_api_handle(&x->api, &q, &a);
		pf_api_handle(&wapi, &q, &b);
		assert_int_equal(a.status, 200);
		assert_int_equal(b.status, 200);
		assert_string_equal(a.content_type, b.content_type);
		assert_int_equal(a.body.len, b.body.len);
		assert_memory_equal(a.body.data, b.body.data, a.body.len);
		pf_api_response_release(&a);
		pf_api_response_release(&b);
		q.authorization = "Bearer nope";
		pf_api_response_init(&b);
		pf_api_handle(&wapi, &q, &b);
		assert_int_equal(b.status, 401);
		pf_api_response_release(&b);
	}
	pf_store_close(ro);
}

/* The merged views' raw answers; flags as pf_profstore_set_compact takes them while they
 * run. Untruncated trees only: with a node cap, which nodes exist depends on the order the
 * stacks are added in, which differs between the paths (totals do not). */
static void merged_answers(struct fx *x, unsigned flags, struct pf_buf *out)
{
	char from[32], f2[32], bf[32], bt[32];
	int st;
	snprintf(from, sizeof(from), "from=%lld", (long long)START_MS);
	snprintf(f2, sizeof(f2), "from=%lld", (long long)START_MS + 20000);
	snprintf(bf, sizeof(bf), "base_from=%lld", (long long)START_MS);
	snprintf(bt, sizeof(bt), "base_to=%lld", (long long)START_MS + 20000);
	pf_profstore_set_compact(flags);
	json_decref(get(x, "/api/v1/flamegraph", &st, out, from, NULL));
	assert_int_equal(st, 200);
	json_decref(get(x, "/api/v1/top", &st, out, from, NULL));
	assert_int_equal(st, 200);
	json_decref(get(x, "/api/v1/flamegraph/diff", &st, out, f2, bf, bt, NULL));
	assert_int_equal(st, 200);
	json_decref(get(x, "/api/v1/flamegraph/diff", &st, out, f2, bf, bt, "min_value=5", NULL));
	json_decref(get(x, "/api/v1/flamegraph", &st, out, from, "service=checkout", NULL));
	pf_profstore_set_compact(PF_PROFSTORE_COMPACT_READ | PF_PROFSTORE_STACKS);
}

/* The same store written with `ingest_flags` (the fixture plus ids 7, 8 at +25 s). */
static void refill(void **state, unsigned ingest_flags)
{
	teardown(state);
	pf_profstore_set_compact(ingest_flags);
	assert_int_equal(setup(state), 0);
	ingest_fixture(*state, 25, 7);
	pf_profstore_set_compact(PF_PROFSTORE_COMPACT_READ | PF_PROFSTORE_STACKS);
}

/* Drops every frame kind ("type":"native" ...: the compact forms carry none). */
static void strip_types(struct pf_buf *b)
{
	static const char *const kinds[] = {",\"type\":\"native\"", ",\"type\":\"kernel\"",
					    ",\"type\":\"cpython\"", ",\"type\":\"go\""};
	size_t w = 0;
	for (size_t r = 0; r < b->len;) {
		size_t skip = 0;
		for (size_t k = 0; k < 4 && !skip; k++) {
			size_t l = strlen(kinds[k]);
			if (b->len - r >= l && memcmp(b->data + r, kinds[k], l) == 0)
				skip = l;
		}
		if (skip) {
			r += skip;
			continue;
		}
		b->data[w++] = b->data[r++];
	}
	b->len = w;
}

/* The old path (every profile read one by one from its body or compact form, as profiles
 * stored before the content tables are) and the new one (stacks stored once, packed pairs,
 * rollups) give the same flame graphs, top tables and diffs on the same data. */
static void test_old_and_new_paths_same_answers(void **state)
{
	struct pf_buf stacks, bodies, forms;
	pf_buf_init(&stacks, 1 << 24);
	pf_buf_init(&bodies, 1 << 24);
	pf_buf_init(&forms, 1 << 24);
	refill(state, PF_PROFSTORE_COMPACT_READ | PF_PROFSTORE_STACKS);
	merged_answers(*state, PF_PROFSTORE_COMPACT_READ | PF_PROFSTORE_STACKS, &stacks);
	refill(state, 0); /* no content: read as legacy profiles, from their bodies */
	merged_answers(*state, 0, &bodies);
	refill(state, PF_PROFSTORE_COMPACT_READ | PF_PROFSTORE_COMPACT_WRITE);
	merged_answers(*state, PF_PROFSTORE_COMPACT_READ, &forms);
	assert_true(stacks.len > 200);
	assert_non_null(memmem(stacks.data, stacks.len, "\"type\":\"native\"", 15));
	assert_int_equal(stacks.len, bodies.len);
	assert_memory_equal(stacks.data, bodies.data, stacks.len);
	strip_types(&stacks);
	assert_int_equal(stacks.len, forms.len);
	assert_memory_equal(stacks.data, forms.data, stacks.len);
	pf_buf_release(&stacks);
	pf_buf_release(&bodies);
	pf_buf_release(&forms);
}

/* The console's routes: timeline, labels, label values, profile types, match= filters. */
static void test_timeline_labels_types(void **state)
{
	struct fx *x = *state;
	char from[48], to[48], fromall[32];
	int st;
	long long m0 = (long long)START_MS - (long long)START_MS % 60000;
	snprintf(from, sizeof(from), "from=%lld", m0);
	snprintf(to, sizeof(to), "to=%lld", m0 + 180000);
	snprintf(fromall, sizeof(fromall), "from=%lld", (long long)START_MS);

	json_t *j = get(x, "/api/v1/flamegraph", &st, NULL, fromall, NULL);
	json_int_t total = ival(j, "value");
	json_decref(j);
	assert_true(total > 0);
	j = get(x, "/api/v1/timeline", &st, NULL, from, to, "step=60000", NULL);
	assert_int_equal(st, 200);
	assert_int_equal(ival(j, "step_ms"), 60000);
	assert_string_equal(json_string_value(json_object_get(j, "unit")), "samples");
	json_t *pts = json_object_get(j, "points");
	assert_int_equal(json_array_size(pts), 3);
	json_int_t sum = 0;
	for (size_t i = 0; i < 3; i++) {
		json_t *pt = json_array_get(pts, i);
		assert_int_equal(json_integer_value(json_array_get(pt, 0)), m0 + 60000 * (long long)i);
		sum += json_integer_value(json_array_get(pt, 1));
	}
	assert_int_equal(sum, total);
	json_decref(j);
	/* default step: at most 1,000 points; more than 10,000 refused */
	j = get(x, "/api/v1/timeline", &st, NULL, from, to, NULL);
	assert_int_equal(st, 200);
	assert_true(json_array_size(json_object_get(j, "points")) <= 1000);
	json_decref(j);
	j = get(x, "/api/v1/timeline", &st, NULL, from, to, "step=1", NULL);
	assert_int_equal(st, 400);
	json_decref(j);

	j = get(x, "/api/v1/labels", &st, NULL, fromall, NULL);
	assert_int_equal(st, 200);
	json_t *names = json_object_get(j, "names");
	bool has_service = false;
	for (size_t i = 0; i < json_array_size(names); i++) {
		has_service |= strcmp(json_string_value(json_array_get(names, i)), "service.name") == 0;
		if (i)
			assert_true(strcmp(json_string_value(json_array_get(names, i - 1)),
					   json_string_value(json_array_get(names, i))) < 0);
	}
	assert_true(has_service);
	json_decref(j);
	j = get(x, "/api/v1/labels/service.name/values", &st, NULL, fromall, NULL);
	assert_int_equal(st, 200);
	assert_string_equal(json_string_value(json_object_get(j, "name")), "service.name");
	json_t *vals = json_object_get(j, "values");
	assert_true(json_array_size(vals) >= 1);
	const char *svc = json_string_value(json_array_get(vals, 0));
	char msvc[160], ssvc[160];
	snprintf(msvc, sizeof(msvc), "match=service.name=%s", svc);
	snprintf(ssvc, sizeof(ssvc), "service=%s", svc);
	json_t *a = get(x, "/api/v1/flamegraph", &st, NULL, fromall, msvc, NULL);
	assert_int_equal(st, 200);
	json_t *b = get(x, "/api/v1/flamegraph", &st, NULL, fromall, ssvc, NULL);
	assert_int_equal(ival(a, "value"), ival(b, "value"));
	assert_true(ival(a, "value") > 0);
	json_decref(a);
	json_decref(b);
	a = get(x, "/api/v1/flamegraph", &st, NULL, fromall, msvc, "match=service.name=nope", NULL);
	assert_int_equal(ival(a, "value"), 0);
	json_decref(a);
	a = get(x, "/api/v1/profiles", &st, NULL, msvc, NULL);
	assert_int_equal(st, 200);
	assert_true(ival(a, "count") > 0);
	json_decref(a);
	a = get(x, "/api/v1/flamegraph", &st, NULL, fromall, "match=novalue", NULL);
	assert_int_equal(st, 400);
	json_decref(a);
	json_decref(j);

	j = get(x, "/api/v1/profile_types", &st, NULL, fromall, NULL);
	assert_int_equal(st, 200);
	json_t *t0 = json_array_get(json_object_get(j, "types"), 0);
	assert_string_equal(json_string_value(json_object_get(t0, "type")), "cpu");
	assert_string_equal(json_string_value(json_object_get(t0, "unit")), "samples");
	json_decref(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_get_and_pprof, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flamegraphs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_top, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flame_with_top, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flame_with_top_legacy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_auth_and_methods, setup, teardown),
		cmocka_unit_test(test_offload_routes),
		cmocka_unit_test_setup_teardown(test_worker_api_same_answers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_old_and_new_paths_same_answers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeline_labels_types, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
