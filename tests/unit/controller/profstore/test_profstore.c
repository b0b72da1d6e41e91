/* test_profstore.c — the profile store's plain functions: flame-graph tree building, merge,
 * top and diff on hand-made stacks and windows; the OTLP receiver (pf_profstore_ingest) with a
 * real store: full and partial success, 400/413/415, gzip, the protobuf answers, and loading
 * a stored profile back; the compact flame form: merged trees, top and diff identical to the
 * body path (with profiles stored without one mixed in, and under tight node caps), and
 * corrupt or truncated forms refused without touching the tree. */
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

#include "api_fixture.h"
#include "otlp_profiles.h"
#include "pf/gzip.h"
#include "prof_fixture.h"
#include "profstore/flame.h"
#include "profstore/profstore.h"
#include "profstore/views.h"
#include "store.h"
#include "store_downgrade.h"

/* ---- helpers */

static json_t *tree_json(const struct pf_flame *f, bool diff, uint64_t min_value)
{
	struct pf_buf b;
	json_error_t e;
	pf_buf_init(&b, 1 << 24);
	assert_int_equal(pf_flame_json(f, diff, min_value, &b), 0);
	json_t *j = json_loadb((const char *)b.data, b.len, 0, &e);
	if (!j)
		fail_msg("bad JSON: %s: %s", e.text, pf_buf_str(&b));
	pf_buf_release(&b);
	return j;
}

#define child api_fixture_child
#define ival api_fixture_int

static void add(struct pf_flame *f, const char *path, uint64_t w, int slot)
{
	/* "a;b;c" root first */
	char buf[256];
	const char *names[16];
	size_t n = 0;
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *s = buf, *e; s && n < 16; s = e) {
		e = strchr(s, ';');
		if (e)
			*e++ = 0;
		names[n++] = s;
	}
	assert_int_equal(pf_flame_add_stack(f, names, n, w, slot), 0);
}

/* ---- flame */

static void test_tree_shape(void **state)
{
	(void)state;
	struct pf_flame *f = pf_flame_new(1000);
	add(f, "main;a;x", 5, 0);
	add(f, "main;a", 2, 0);
	add(f, "main;b;x", 3, 0);
	json_t *j = tree_json(f, false, 0);
	assert_string_equal(json_string_value(json_object_get(j, "name")), "all");
	assert_int_equal(ival(j, "value"), 10);
	json_t *m = child(j, "main");
	assert_int_equal(ival(m, "value"), 10);
	json_t *a = child(m, "a"), *b = child(m, "b");
	assert_int_equal(ival(a, "value"), 7);
	assert_int_equal(ival(child(a, "x"), "value"), 5);
	assert_int_equal(ival(b, "value"), 3);
	/* leaves have no children; children sorted by name */
	assert_null(json_object_get(child(a, "x"), "children"));
	assert_string_equal(json_string_value(json_object_get(
				json_array_get(json_object_get(m, "children"), 0), "name")),
			    "a");
	assert_int_equal(pf_flame_total(f, 0), 10);
	assert_false(pf_flame_truncated(f));
	/* min_value prunes small nodes */
	json_decref(j);
	j = tree_json(f, false, 4);
	m = child(j, "main");
	assert_non_null(child(m, "a"));
	assert_null(child(m, "b"));
	json_decref(j);
	pf_flame_free(f);
}

static void test_top_self_total_recursion(void **state)
{
	(void)state;
	struct pf_flame *f = pf_flame_new(1000);
	add(f, "main;rec;rec;rec;leaf", 4, 0); /* recursion counted once in total */
	add(f, "main;rec", 6, 0);
	add(f, "main;other;leaf", 10, 0);
	struct pf_flame_fn *fns;
	size_t n;
	assert_int_equal(pf_flame_top(f, 0, 0, &fns, &n), 0);
	assert_int_equal(n, 4);
	/* sorted by self: leaf 14, rec 6, main 0 / other 0 (by total then name) */
	assert_string_equal(fns[0].name, "leaf");
	assert_int_equal(fns[0].self, 14);
	assert_int_equal(fns[0].total, 14);
	assert_string_equal(fns[1].name, "rec");
	assert_int_equal(fns[1].self, 6);
	assert_int_equal(fns[1].total, 10);
	assert_string_equal(fns[2].name, "main");
	assert_int_equal(fns[2].total, 20);
	assert_string_equal(fns[3].name, "other");
	assert_int_equal(fns[3].total, 10);
	free(fns);
	assert_int_equal(pf_flame_top(f, 0, 2, &fns, &n), 0);
	assert_int_equal(n, 2);
	free(fns);
	pf_flame_free(f);
}

static void test_diff_scaled(void **state)
{
	(void)state;
	struct pf_flame *f = pf_flame_new(1000);
	/* now: 200 samples, slow() doubled its share; base: 100 samples */
	add(f, "main;slow", 100, 0);
	add(f, "main;fast", 100, 0);
	add(f, "main;slow", 25, 1);
	add(f, "main;fast", 75, 1);
	add(f, "main;gone", 0, 1);
	json_t *j = tree_json(f, true, 0);
	assert_int_equal(ival(j, "value"), 200);
	assert_int_equal(ival(j, "base"), 100);
	assert_int_equal(ival(j, "delta"), 0);
	json_t *m = child(j, "main");
	json_t *slow = child(m, "slow"), *fast = child(m, "fast");
	assert_int_equal(ival(slow, "value"), 100);
	assert_int_equal(ival(slow, "base"), 25);
	assert_int_equal(ival(slow, "delta"), 50); /* 100 - 25 * 200/100 */
	assert_int_equal(ival(fast, "delta"), -50);
	json_decref(j);
	pf_flame_free(f);
}

static void test_truncation(void **state)
{
	(void)state;
	struct pf_flame *f = pf_flame_new(3); /* root + 2 */
	add(f, "a;b;c;d", 5, 0);
	add(f, "x", 1, 0);
	assert_true(pf_flame_truncated(f));
	assert_int_equal(pf_flame_node_count(f), 3);
	assert_int_equal(pf_flame_total(f, 0), 6);
	json_t *j = tree_json(f, false, 0);
	assert_int_equal(ival(child(j, "a"), "value"), 5);
	assert_int_equal(ival(child(child(j, "a"), "b"), "value"), 5);
	assert_null(child(j, "x")); /* no room: the root's self took it */
	json_decref(j);
	pf_flame_free(f);
}

static void test_json_escaping(void **state)
{
	(void)state;
	struct pf_flame *f = pf_flame_new(100);
	const char *names[] = {"quote\"back\\slash\ttab", "bad\xff utf8", "ok \xc3\xa9"};
	assert_int_equal(pf_flame_add_stack(f, names, 3, 1, 0), 0);
	json_t *j = tree_json(f, false, 0);
	json_t *a = child(j, "quote\"back\\slash\ttab");
	assert_non_null(a);
	assert_non_null(child(a, "bad\xef\xbf\xbd utf8"));
	assert_non_null(child(child(a, "bad\xef\xbf\xbd utf8"), "ok \xc3\xa9"));
	json_decref(j);
	assert_int_equal(pf_flame_add_stack(f, names, 1, 1, 2), -EINVAL);
	pf_flame_free(f);
}

/* The fixture: pid 100 main->work_a 4+1, main->work_b 2, main->?->do_syscall 1; pid 200
 * main->work_a 3. */
static void test_window_and_merge(void **state)
{
	(void)state;
	struct pf_prof_window *w = prof_fixture_window(0);
	struct pf_flame *f = pf_flame_new(1000);
	assert_int_equal(pf_flame_add_window(f, w, 0), 0);
	assert_int_equal(pf_flame_total(f, 0), pf_prof_window_samples(w));
	json_t *j = tree_json(f, false, 0);
	json_t *m = child(j, "main");
	assert_non_null(m);
	assert_int_equal(ival(child(m, "work_a"), "value"), 8);
	assert_int_equal(ival(child(m, "work_b"), "value"), 2);
	json_decref(j);
	/* merging the same window again doubles every value */
	assert_int_equal(pf_flame_add_window(f, w, 0), 0);
	j = tree_json(f, false, 0);
	assert_int_equal(ival(child(child(j, "main"), "work_a"), "value"), 16);
	json_decref(j);
	/* frame names: unknown frames by mapping + offset or address */
	char name[64];
	struct pf_prof_frame fr = {.address = 0x1234, .mapping = -1};
	pf_flame_frame_name(&w->processes[0], &fr, name, sizeof(name));
	assert_string_equal(name, "0x1234");
	pf_flame_free(f);
	pf_prof_window_free(w);
}

/* Functions inlined at an address are nodes of their own under the function they were inlined
 * into, innermost deepest, in the tree and in the compact form alike. */
static void test_inlined_nodes(void **state)
{
	(void)state;
	struct pf_prof_window *w = prof_fixture_window(PROF_FIX_NAMES);
	struct pf_flame *f = pf_flame_new(1000), *c = pf_flame_new(1000);
	assert_int_equal(pf_flame_add_window(f, w, 0), 0);
	struct pf_buf blob;
	for (size_t i = 0; i < w->n_processes; i++) {
		pf_buf_init(&blob, 1 << 20);
		assert_int_equal(pf_flame_compact_encode(&w->processes[i], 0, &blob), 0);
		assert_int_equal(pf_flame_add_compact(c, blob.data, blob.len, 0), 0);
		pf_buf_release(&blob);
	}
	for (int k = 0; k < 2; k++) {
		json_t *j = tree_json(k ? c : f, false, 0);
		json_t *a = child(child(j, "main"), "app::work_a(int)");
		assert_non_null(a);
		assert_int_equal(ival(a, "value"), 8);
		json_t *mid = child(a, "mid");
		assert_non_null(mid);
		json_t *leaf = child(mid, "app::leaf()");
		assert_non_null(leaf);
		assert_int_equal(ival(leaf, "value"), 8);
		assert_null(json_object_get(leaf, "children"));
		json_decref(j);
	}
	/* top functions: the innermost inlined function has the self time */
	struct pf_flame_fn *top;
	size_t n;
	assert_int_equal(pf_flame_top(f, 0, 1, &top, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(top[0].name, "app::leaf()");
	assert_int_equal(top[0].self, 8);
	free(top);
	pf_flame_free(f);
	pf_flame_free(c);
	pf_prof_window_free(w);
}

/* Distinct paths: samples of a stack met again (in any order) add their count and values to
 * the path their stack's first sample made; two stacks of equal names share one path; a name
 * of two kinds is two frames; a stack index out of range after repeats is still refused. */
static void test_paths_repeated_stacks(void **state)
{
	(void)state;
	struct pf_prof_window *w = pf_prof_window_new();
	struct pf_prof_process *p = pf_prof_alloc(w, sizeof(*p));
	struct pf_prof_frame *fr = pf_prof_alloc(w, 4 * sizeof(*fr));
	struct pf_prof_stack *st = pf_prof_alloc(w, 3 * sizeof(*st));
	struct pf_prof_sample *sa = pf_prof_alloc(w, 7 * sizeof(*sa));
	struct pf_prof_value_type *types = pf_prof_alloc(w, 2 * sizeof(*types));
	static const char *names[4] = {"main", "a", "b", "a"}; /* frames 1 and 3: same name */
	static const uint32_t s0[2] = {1, 0}, s1[2] = {2, 0}, s2[2] = {3, 0}; /* leaf first */
	static const int64_t v[7][2] = {{1, 10}, {2, 20}, {3, 30}, {4, -5}, {0, 7}, {5, 50}, {0, 0}};
	static const uint32_t stk[7] = {0, 1, 0, 2, 1, 0, 1};
	static const uint64_t cnt[7] = {1, 2, 3, 4, 0, 5, 0};
	assert_non_null(p);
	assert_non_null(fr);
	assert_non_null(st);
	assert_non_null(sa);
	assert_non_null(types);
	for (int i = 0; i < 4; i++)
		fr[i] = (struct pf_prof_frame){.address = 0x1000u + (unsigned)i, .mapping = -1,
					       .function = names[i]};
	st[0] = (struct pf_prof_stack){2, s0};
	st[1] = (struct pf_prof_stack){2, s1};
	st[2] = (struct pf_prof_stack){2, s2};
	for (int i = 0; i < 7; i++)
		sa[i] = (struct pf_prof_sample){.stack = stk[i], .count = cnt[i], .values = v[i]};
	types[0] = (struct pf_prof_value_type){"samples", "count"};
	types[1] = (struct pf_prof_value_type){"cpu", "nanoseconds"};
	*p = (struct pf_prof_process){.pid = 1, .n_frames = 4, .frames = fr, .n_stacks = 3,
				      .stacks = st, .n_samples = 7, .samples = sa};
	w->processes = p;
	w->n_processes = 1;
	w->sample_types = types;
	w->n_sample_types = 2;

	struct pf_flame_paths ps;
	assert_int_equal(pf_flame_paths_build_types(w, p, &ps), 0);
	assert_int_equal(ps.n_stacks, 2);
	assert_int_equal(ps.n_types, 2);
	assert_int_equal(ps.n_frames, 3);
	/* main;a from stacks 0 and 2: counts 1+3+4+5, values (1+3+4+5, 10+30+0+50) */
	assert_int_equal(ps.stacks[0].n, 2);
	assert_string_equal(ps.frames[ps.stacks[0].ids[0]].name, "main");
	assert_string_equal(ps.frames[ps.stacks[0].ids[1]].name, "a");
	assert_int_equal(ps.stacks[0].weight, 13);
	assert_int_equal(ps.type_weights[0], 13);
	assert_int_equal(ps.type_weights[1], 90);
	/* main;b: counts 2+0 (the sample with only cpu weighs), values (2, 27); the last sample
	 * weighs nothing and is left out */
	assert_string_equal(ps.frames[ps.stacks[1].ids[1]].name, "b");
	assert_int_equal(ps.stacks[1].weight, 2);
	assert_int_equal(ps.type_weights[2], 2);
	assert_int_equal(ps.type_weights[3], 27);
	pf_flame_paths_release(&ps);

	/* untyped: counts only, the zero-count samples left out */
	assert_int_equal(pf_flame_paths_build(p, &ps), 0);
	assert_int_equal(ps.n_stacks, 2);
	assert_int_equal(ps.stacks[0].weight, 13);
	assert_int_equal(ps.stacks[1].weight, 2);
	pf_flame_paths_release(&ps);

	/* one name, two kinds: two frames, in the order the paths first use them; a kind met
	 * again in another path is the same frame */
	static const uint32_t t0[2] = {3, 0}, t1[3] = {2, 3, 0}, t2[2] = {1, 0};
	fr[3].kind = 1;
	st[0] = (struct pf_prof_stack){2, t0}; /* main;a(1) */
	st[1] = (struct pf_prof_stack){3, t1}; /* main;a(1);b */
	st[2] = (struct pf_prof_stack){2, t2}; /* main;a(0) */
	for (int i = 0; i < 3; i++)
		sa[i] = (struct pf_prof_sample){.stack = (uint32_t)i, .count = 1};
	p->n_samples = 3;
	assert_int_equal(pf_flame_paths_build(p, &ps), 0);
	assert_int_equal(ps.n_stacks, 3);
	assert_int_equal(ps.n_frames, 4);
	static const char *const order[4] = {"main", "a", "b", "a"};
	static const uint8_t kinds[4] = {0, 1, 0, 0};
	for (int i = 0; i < 4; i++) {
		assert_string_equal(ps.frames[i].name, order[i]);
		assert_int_equal(ps.frames[i].kind, kinds[i]);
	}
	assert_int_equal(ps.stacks[0].ids[1], 1);
	assert_int_equal(ps.stacks[1].ids[1], 1);
	assert_int_equal(ps.stacks[1].ids[2], 2);
	assert_int_equal(ps.stacks[2].ids[0], 0);
	assert_int_equal(ps.stacks[2].ids[1], 3);
	pf_flame_paths_release(&ps);

	p->n_samples = 7;
	sa[6] = (struct pf_prof_sample){.stack = 3, .count = 1, .values = v[0]};
	assert_int_equal(pf_flame_paths_build_types(w, p, &ps), -EINVAL);
	assert_int_equal(ps.n_stacks, 0);
	pf_prof_window_free(w);
}

/* ---- receiver */

struct fx {
	char dir[64];
	struct pf_store *st;
};

static int setup(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));
	char db[128];
	snprintf(x->dir, sizeof(x->dir), "/tmp/pf-test-profstore-XXXXXX");
	assert_non_null(mkdtemp(x->dir));
	snprintf(db, sizeof(db), "%s/db", x->dir);
	x->st = pf_store_open(db, PF_STORE_SYNC_NORMAL, NULL);
	assert_non_null(x->st);
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fx *x = *state;
	char cmd[128];
	pf_store_close(x->st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", x->dir);
	assert_int_equal(system(cmd), 0);
	free(x);
	return 0;
}

static void encode_fixture(struct pf_buf *out, unsigned flags)
{
	struct pf_prof_window *w = prof_fixture_window(flags);
	pf_buf_init(out, 1 << 24);
	assert_int_equal(pf_otlp_profiles_encode(w, out, NULL, NULL), 0);
	pf_prof_window_free(w);
}

static int ingest(struct fx *x, const void *body, size_t len, bool gzip, const char *ctype,
		  size_t max, struct pf_profstore_result *res, struct pf_buf *resp)
{
	struct pf_profstore_request q = {.body = body, .len = len, .gzip = gzip,
					 .content_type = ctype, .max_bytes = max, .now_ms = 5000};
	pf_buf_init(resp, 1 << 20);
	assert_int_equal(pf_profstore_ingest(x->st, &q, res, resp), 0);
	return res->status;
}

static int count_cb(const struct pf_profile_row *r, void *ud)
{
	(void)r;
	(*(int *)ud)++;
	return 0;
}

static int rows(struct fx *x, const char *service)
{
	struct pf_profile_filter f = {.service = service};
	int n = 0;
	assert_int_equal(pf_store_profiles_foreach(x->st, &f, count_cb, &n), 0);
	return n;
}

/* Group commit: a batch answers each request as it alone would be answered; the good ones
 * are stored in one transaction, a bad one does not keep them out, a repeat is a duplicate. */
static void test_ingest_batch(void **state)
{
	struct fx *x = *state;
	struct pf_buf good, resp[4];
	struct pf_profstore_result res[4];
	encode_fixture(&good, PROF_FIX_LINK);
	struct pf_profstore_request q[4] = {
	    {.body = good.data, .len = good.len, .now_ms = 5000},
	    {.body = (const uint8_t *)"\xff\xff", .len = 2, .now_ms = 5000}, /* undecodable */
	    {.body = good.data, .len = good.len, .now_ms = 5000, .content_type = "text/plain"},
	    {.body = good.data, .len = good.len, .now_ms = 5000}, /* the same profiles again */
	};
	for (int i = 0; i < 4; i++)
		pf_buf_init(&resp[i], 1 << 20);
	assert_int_equal(pf_profstore_ingest_batch(x->st, q, 4, res, resp), 0);
	assert_int_equal(res[0].status, 200);
	assert_int_equal(res[0].accepted, 2);
	assert_int_equal(res[0].duplicates, 0);
	assert_int_equal(res[0].samples, 11);
	assert_int_equal(resp[0].len, 0);
	assert_int_equal(res[1].status, 400);
	assert_true(resp[1].len > 0);
	assert_int_equal(res[2].status, 415);
	assert_int_equal(res[3].status, 200);
	assert_int_equal(res[3].accepted, 2);
	assert_int_equal(res[3].duplicates, 2); /* found inside the batch's transaction */
	assert_int_equal(res[3].samples, 0);
	assert_int_equal(rows(x, NULL), 2);
	assert_false(pf_store_profiles_batch_open(x->st));
	/* the batch's content is readable like a single insert's */
	struct pf_prof_window *w = NULL;
	assert_int_equal(pf_profstore_load(x->st, 1, &w, NULL), 0);
	assert_int_equal(pf_prof_window_samples(w), 8);
	pf_prof_window_free(w);
	/* a batch of one is a plain ingest */
	pf_buf_reset(&resp[0]);
	assert_int_equal(pf_profstore_ingest_batch(x->st, q, 1, res, resp), 0);
	assert_int_equal(res[0].status, 200);
	assert_int_equal(res[0].duplicates, 2);
	for (int i = 0; i < 4; i++)
		pf_buf_release(&resp[i]);
	pf_buf_release(&good);
}

/* Inside a store batch a failed insert call leaves the calls before it in and the batch
 * open; a second batch_begin is refused. */
static void test_store_batch(void **state)
{
	struct fx *x = *state;
	struct pf_buf a, resp;
	struct pf_profstore_result res;
	assert_int_equal(pf_store_profiles_batch_begin(x->st), 0);
	assert_true(pf_store_profiles_batch_open(x->st));
	assert_int_equal(pf_store_profiles_batch_begin(x->st), -EBUSY);
	encode_fixture(&a, 0);
	assert_int_equal(ingest(x, a.data, a.len, false, NULL, 0, &res, &resp), 200);
	pf_buf_release(&resp);
	struct pf_profile_row bad = {0};
	assert_int_equal(pf_store_profiles_insert(x->st, &bad, 1, NULL, 0, NULL), -EINVAL);
	assert_true(pf_store_profiles_batch_open(x->st));
	assert_int_equal(pf_store_profiles_batch_end(x->st, NULL, 5000, NULL), 0);
	assert_false(pf_store_profiles_batch_open(x->st));
	assert_int_equal(pf_store_profiles_batch_end(x->st, NULL, 5000, NULL), -EINVAL);
	assert_int_equal(rows(x, NULL), 2);
	pf_buf_release(&a);
}

static void test_ingest_ok_and_load(void **state)
{
	struct fx *x = *state;
	struct pf_buf req, resp;
	struct pf_profstore_result res;
	encode_fixture(&req, PROF_FIX_LINK);
	assert_int_equal(ingest(x, req.data, req.len, false, "application/x-protobuf", 0, &res,
				&resp), 200);
	assert_int_equal(res.accepted, 2);
	assert_int_equal(res.rejected, 0);
	assert_int_equal(res.samples, 11);
	assert_int_equal(resp.len, 0); /* empty ExportProfilesServiceResponse */
	pf_buf_release(&resp);
	assert_int_equal(rows(x, NULL), 2);

	/* the stored body decodes back to the same stacks */
	struct pf_prof_window *w = NULL;
	struct pf_error err = {0};
	assert_int_equal(pf_profstore_load(x->st, 1, &w, &err), 0);
	assert_int_equal(w->n_processes, 1);
	assert_int_equal(pf_prof_window_samples(w), 8);
	assert_int_equal(w->processes[0].pid, 100);
	pf_prof_window_free(w);
	assert_int_equal(pf_profstore_load(x->st, 99, &w, &err), -ENOENT);

	/* gzip'd, with parameters in the content type */
	struct pf_buf gz;
	pf_buf_init(&gz, 1 << 24);
	assert_int_equal(pf_gzip_compress(req.data, req.len, 6, &gz), 0);
	assert_int_equal(ingest(x, gz.data, gz.len, true, "application/x-protobuf; charset=x", 0,
				&res, &resp), 200);
	assert_int_equal(res.accepted, 2);
	/* the same request again (a retry after a lost answer): success, nothing stored twice */
	assert_int_equal(res.duplicates, 2);
	assert_int_equal(res.samples, 0);
	assert_int_equal(resp.len, 0);
	pf_buf_release(&resp);
	assert_int_equal(rows(x, NULL), 2);
	/* the same stacks under new profile ids are new profiles */
	pf_buf_release(&req);
	encode_fixture(&req, PROF_FIX_LINK);
	assert_int_equal(ingest(x, req.data, req.len, false, NULL, 0, &res, &resp), 200);
	assert_int_equal(res.accepted, 2);
	assert_int_equal(res.duplicates, 0);
	assert_int_equal(res.samples, 11);
	pf_buf_release(&resp);
	pf_buf_release(&gz);
	pf_buf_init(&gz, 1 << 24);
	assert_int_equal(pf_gzip_compress(req.data, req.len, 6, &gz), 0);
	/* gzip flag on plain bytes: 400 */
	assert_int_equal(ingest(x, req.data, req.len, true, NULL, 0, &res, &resp), 400);
	pf_buf_release(&resp);
	/* decompressed size over the limit: 413 (gz is small, the plain body is not) */
	assert_int_equal(ingest(x, gz.data, gz.len, true, NULL, req.len - 1, &res, &resp), 413);
	pf_buf_release(&resp);
	pf_buf_release(&gz);
	assert_int_equal(rows(x, NULL), 4);
	pf_buf_release(&req);
}

static void test_ingest_errors(void **state)
{
	struct fx *x = *state;
	struct pf_buf resp, req;
	struct pf_profstore_result res;
	static const uint8_t garbage[] = {0x0a, 0xff, 0xff, 0x01, 0x02};

	assert_int_equal(ingest(x, garbage, sizeof(garbage), false, NULL, 0, &res, &resp), 400);
	assert_non_null(strstr(res.message, "undecodable"));
	/* the answer is a google.rpc.Status: code 3, message */
	assert_int_equal(resp.data[0], 0x08);
	assert_int_equal(resp.data[1], 3);
	assert_int_equal(resp.data[2], 0x12);
	assert_non_null(memmem(resp.data, resp.len, "undecodable", 11));
	pf_buf_release(&resp);

	encode_fixture(&req, 0);
	assert_int_equal(ingest(x, req.data, req.len, false, NULL, req.len - 1, &res, &resp), 413);
	pf_buf_release(&resp);
	assert_int_equal(ingest(x, req.data, req.len, false, "application/json", 0, &res, &resp),
			 415);
	pf_buf_release(&resp);
	assert_int_equal(rows(x, NULL), 0);

	/* An empty request (no profiles) is a success that stores nothing. */
	assert_int_equal(ingest(x, "", 0, false, NULL, 0, &res, &resp), 200);
	assert_int_equal(res.accepted + res.rejected, 0);
	pf_buf_release(&resp);
	pf_buf_release(&req);
}

static void test_ingest_partial(void **state)
{
	struct fx *x = *state;
	struct pf_buf req, resp;
	struct pf_profstore_result res;
	/* one more ResourceProfiles { ScopeProfiles { Profile {} } } appended: repeated fields
	 * of concatenated messages merge, so this is a third, empty profile */
	static const uint8_t empty_profile[] = {0x0a, 0x06, 0x12, 0x04, 0x12, 0x02, 0x12, 0x00};
	encode_fixture(&req, 0);
	assert_int_equal(pf_buf_append(&req, empty_profile, sizeof(empty_profile)), 0);
	assert_int_equal(ingest(x, req.data, req.len, false, NULL, 0, &res, &resp), 200);
	assert_int_equal(res.accepted, 2);
	assert_int_equal(res.rejected, 1);
	/* partial_success { rejected_profiles: 1, error_message } */
	assert_true(resp.len > 4);
	assert_int_equal(resp.data[0], 0x0a);
	assert_int_equal(resp.data[2], 0x08);
	assert_int_equal(resp.data[3], 1);
	assert_non_null(memmem(resp.data, resp.len, "no samples", 10));
	pf_buf_release(&resp);
	pf_buf_release(&req);
}

static int meta_cb(const struct pf_profile_row *r, void *ud)
{
	*(struct pf_profile_row *)ud = *r;
	((struct pf_profile_row *)ud)->service = NULL; /* strings die with the call */
	return 0;
}

struct ids {
	int64_t v[256];
	size_t n;
};

static int ids_cb(const struct pf_profile_row *r, void *ud)
{
	struct ids *l = ud;
	assert_true(l->n < PF_ARRAY_SIZE(l->v));
	l->v[l->n++] = r->id;
	return 0;
}

static void test_ingest_metadata_and_retention(void **state)
{
	struct fx *x = *state;
	struct pf_buf req, resp;
	struct pf_profstore_result res;
	encode_fixture(&req, PROF_FIX_LINK | PROF_FIX_TIMESTAMPS);
	assert_int_equal(ingest(x, req.data, req.len, false, NULL, 0, &res, &resp), 200);
	pf_buf_release(&resp);
	struct pf_profile_row r;
	assert_int_equal(pf_store_profile_get(x->st, 1, meta_cb, &r), 0);
	assert_int_equal(r.pid, 100);
	assert_int_equal(r.samples, 8);
	assert_int_equal(r.n_links, 1);
	assert_int_equal(r.start_ns, (int64_t)PROF_FIXTURE_START);
	assert_int_equal(r.received_ms, 5000);
	assert_true(r.body_bytes > 0);

	/* a byte cap below two profiles keeps only the newest ones */
	struct pf_profile_retention ret = {.max_bytes = r.body_bytes * 3};
	assert_int_equal(pf_store_profiles_set_retention(x->st, &ret), 0);
	for (int i = 0; i < 3; i++) {
		pf_buf_release(&req); /* new profile ids each time */
		encode_fixture(&req, PROF_FIX_LINK | PROF_FIX_TIMESTAMPS);
		assert_int_equal(ingest(x, req.data, req.len, false, NULL, 0, &res, &resp), 200);
		pf_buf_release(&resp);
	}
	int64_t n, bytes;
	assert_int_equal(pf_store_profiles_totals(x->st, &n, &bytes), 0);
	assert_true(bytes <= ret.max_bytes);
	assert_true(n >= 2 && n <= 3);
	assert_int_equal(pf_store_profile_get(x->st, 1, meta_cb, &r), -ENOENT);
	/* the deleted profile's detail went with it; a kept one still loads */
	struct pf_prof_window *kept = NULL;
	assert_int_equal(pf_profstore_load(x->st, 1, &kept, NULL), -ENOENT);
	struct pf_profile_filter all = {0};
	struct ids l = {0};
	assert_int_equal(pf_store_profiles_foreach(x->st, &all, ids_cb, &l), 0);
	assert_int_equal(pf_profstore_load(x->st, l.v[0], &kept, NULL), 0);
	pf_prof_window_free(kept);
	pf_buf_release(&req);
}

static void test_response_encoding(void **state)
{
	(void)state;
	struct pf_buf b;
	pf_buf_init(&b, 1024);
	assert_int_equal(pf_profstore_encode_response(0, NULL, &b), 0);
	assert_int_equal(b.len, 0);
	assert_int_equal(pf_profstore_encode_response(300, "x", &b), 0);
	static const uint8_t want[] = {0x0a, 0x06, 0x08, 0xac, 0x02, 0x12, 0x01, 'x'};
	assert_int_equal(b.len, sizeof(want));
	assert_memory_equal(b.data, want, sizeof(want));
	pf_buf_release(&b);
}

/* ---- compact flame form vs the body path */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A bench-like window (profstore_bench.c): one process, `stacks` stacks over a small
 * vocabulary with a hot path, plus what the views must name the same way: frames without a
 * function (mapping + offset, bare address, empty name), repeated stacks, different stacks
 * with the same names, zero counts, an empty stack and a deep one. */
static struct pf_prof_window *gen_window(int agent, int stacks, int64_t shift_s)
{
	enum { FUNCS = 40 };
	struct pf_prof_window *w = pf_prof_window_new();
	struct pf_prof_process *p = pf_prof_alloc(w, sizeof(*p));
	struct pf_prof_attr *attrs = pf_prof_alloc(w, 2 * sizeof(*attrs));
	struct pf_prof_mapping *m = pf_prof_alloc(w, 2 * sizeof(*m));
	struct pf_prof_frame *fr = pf_prof_alloc(w, (FUNCS + 4) * sizeof(*fr));
	struct pf_prof_stack *st = pf_prof_alloc(w, ((size_t)stacks + 2) * sizeof(*st));
	struct pf_prof_sample *sa = pf_prof_alloc(w, ((size_t)stacks + 4) * sizeof(*sa));
	char buf[64];

	w->frequency_hz = 99;
	w->start_unix_ns = PROF_FIXTURE_START + (uint64_t)shift_s * 1000000000ull;
	w->end_unix_ns = w->start_unix_ns + PROF_FIXTURE_NS;
	w->host_name = pf_prof_strdup(w, "gen-host");
	m[0] = (struct pf_prof_mapping){0x400000, 0x800000, 0x1000, "/usr/bin/gen", NULL};
	m[1] = (struct pf_prof_mapping){0x7f0000000000, 0x7f0000100000, 0, "/lib/libc.so.6",
					NULL};
	for (int i = 0; i < FUNCS; i++) {
		fr[i].address = 0x400000 + (uint64_t)i * 64;
		fr[i].mapping = 0;
		snprintf(buf, sizeof(buf), i ? "pkg%d.fn_%d" : "main", i % 5, i);
		fr[i].function = pf_prof_strdup(w, buf);
	}
	fr[FUNCS] = (struct pf_prof_frame){.address = 0x7f0000001234, .mapping = 1};
	fr[FUNCS + 1] = (struct pf_prof_frame){.address = 0xdead, .mapping = -1};
	fr[FUNCS + 2] = (struct pf_prof_frame){.address = 0x400040, .mapping = 0, .function = ""};
	/* same name as frame 1 at another address: one node in the tree */
	fr[FUNCS + 3] = (struct pf_prof_frame){.address = 0x500000, .mapping = 0,
					       .function = fr[1].function};
	snprintf(buf, sizeof(buf), "svc-%d", agent % 3);
	attrs[0] = (struct pf_prof_attr){"service.name", pf_prof_strdup(w, buf)};
	snprintf(buf, sizeof(buf), "%d", 1000 + agent);
	attrs[1] = (struct pf_prof_attr){"process.pid", pf_prof_strdup(w, buf)};
	size_t ns = 0, nsa = 0;
	for (int s = 0; s < stacks; s++) {
		int depth = 2 + (int)(rnd() % 12);
		uint32_t *f = pf_prof_alloc(w, (size_t)depth * sizeof(uint32_t));
		for (int d = 0; d < depth; d++)
			f[depth - 1 - d] = d == 0 ? 0 : d < 3 ? (uint32_t)(agent % 3) * 3 + (uint32_t)d
						     : (uint32_t)(rnd() % (FUNCS + 4));
		st[ns++] = (struct pf_prof_stack){(uint32_t)depth, f};
	}
	st[ns++] = (struct pf_prof_stack){0, NULL}; /* empty stack */
	uint32_t *deep = pf_prof_alloc(w, 300 * sizeof(uint32_t));
	for (int d = 0; d < 300; d++)
		deep[299 - d] = d == 0 ? 0 : (uint32_t)(1 + d % 7);
	st[ns++] = (struct pf_prof_stack){300, deep};
	for (size_t s = 0; s < ns; s++)
		sa[nsa++] = (struct pf_prof_sample){.stack = (uint32_t)s, .tid = 7,
						    .count = rnd() % 5 == 0 ? 0 : 1 + rnd() % 20};
	for (int k = 0; k < 4; k++) /* stacks sampled again on another thread */
		sa[nsa++] = (struct pf_prof_sample){.stack = (uint32_t)(rnd() % ns), .tid = 8,
						    .count = 1 + rnd() % 3};
	p->pid = 1000u + (uint32_t)agent;
	p->attrs = attrs;
	p->n_attrs = 2;
	p->mappings = m;
	p->n_mappings = 2;
	p->frames = fr;
	p->n_frames = FUNCS + 4;
	p->stacks = st;
	p->n_stacks = ns;
	p->samples = sa;
	p->n_samples = nsa;
	w->processes = p;
	w->n_processes = 1;
	return w;
}

static void ingest_window(struct fx *x, struct pf_prof_window *w)
{
	struct pf_buf req, resp;
	struct pf_profstore_result res;
	pf_buf_init(&req, 1 << 24);
	assert_int_equal(pf_otlp_profiles_encode(w, &req, NULL, NULL), 0);
	assert_int_equal(ingest(x, req.data, req.len, false, NULL, 0, &res, &resp), 200);
	assert_int_equal(res.rejected, 0);
	pf_buf_release(&resp);
	pf_buf_release(&req);
	pf_prof_window_free(w);
}

/* The fixture window (with flags) and the typed one, stored. */
static void ingest_fixtures(struct fx *x, unsigned flags)
{
	struct pf_buf req, resp;
	struct pf_profstore_result res;
	encode_fixture(&req, flags);
	assert_int_equal(ingest(x, req.data, req.len, false, NULL, 0, &res, &resp), 200);
	pf_buf_release(&resp);
	pf_buf_release(&req);
	struct pf_prof_window *tw = prof_fixture_typed_window();
	tw->start_unix_ns = PROF_FIXTURE_START;
	tw->end_unix_ns = PROF_FIXTURE_START + PROF_FIXTURE_NS;
	ingest_window(x, tw);
}

/* The views' outputs of a tree merged through pf_profstore_merge() with `flags`: slot 0 the
 * ids at even positions, slot 1 the odd ones (diff base). */
static char *views(struct fx *x, const struct ids *l, size_t max_nodes, unsigned flags)
{
	struct pf_buf out;
	pf_profstore_set_compact(flags);
	struct pf_flame *f = pf_flame_new(max_nodes);
	assert_non_null(f);
	for (size_t i = 0; i < l->n; i++)
		assert_int_equal(pf_profstore_merge(x->st, l->v[i], f, (int)(i % 2)), 0);
	pf_profstore_set_compact(PF_PROFSTORE_COMPACT_READ | PF_PROFSTORE_STACKS);
	pf_buf_init(&out, 1 << 26);
	assert_int_equal(pf_buf_printf(&out, "truncated=%d nodes=%zu\n", pf_flame_truncated(f),
				       pf_flame_node_count(f)),
			 0);
	assert_int_equal(pf_flame_json(f, false, 0, &out), 0);
	assert_int_equal(pf_flame_json(f, true, 0, &out), 0);
	assert_int_equal(pf_flame_json(f, true, 5, &out), 0);
	for (int slot = 0; slot < 2; slot++) {
		struct pf_flame_fn *fns = NULL;
		size_t n = 0;
		assert_int_equal(pf_flame_top(f, slot, 0, &fns, &n), 0);
		for (size_t i = 0; i < n; i++)
			assert_int_equal(pf_buf_printf(&out, "\n%s %llu %llu", fns[i].name,
						       (unsigned long long)fns[i].self,
						       (unsigned long long)fns[i].total),
					 0);
		free(fns);
	}
	pf_flame_free(f);
	char *s = strndup((const char *)out.data, out.len);
	pf_buf_release(&out);
	return s;
}

/* Drops every frame kind (,"type":"native" ...) of a JSON text in place. */
static void strip_types(char *s)
{
	static const char *const kinds[] = {",\"type\":\"native\"", ",\"type\":\"kernel\"",
					    ",\"type\":\"cpython\"", ",\"type\":\"go\""};
	char *w = s;
	for (char *r = s; *r;) {
		size_t skip = 0;
		for (size_t k = 0; k < 4 && !skip; k++)
			if (strncmp(r, kinds[k], strlen(kinds[k])) == 0)
				skip = strlen(kinds[k]);
		if (skip) {
			r += skip;
			continue;
		}
		*w++ = *r++;
	}
	*w = 0;
}

static int cmp_id(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* Profiles stored as their detail (detail.h, the default) and as their OTLP body (as before
 * schema 14) give the same flame graphs, diffs and top tables, one by one and merged, and
 * the same pprof download. */
static void test_detail_same_as_body(void **state)
{
	struct fx *x = *state;
	struct ids body = {0}, detail = {0}, all = {0};
	struct pf_profile_filter f = {0};

	for (int pass = 0; pass < 2; pass++) {
		pf_profstore_set_compact(PF_PROFSTORE_COMPACT_READ | PF_PROFSTORE_STACKS |
					 (pass ? 0 : PF_PROFSTORE_BODY));
		ingest_fixtures(x, PROF_FIX_LINK | PROF_FIX_TIMESTAMPS | PROF_FIX_NAMES);
		rng = 7; /* the same generated windows in both passes */
		for (int i = 0; i < 12; i++)
			ingest_window(x, gen_window(i, 20 + i * 3, i * 10));
		all.n = 0;
		assert_int_equal(pf_store_profiles_foreach(x->st, &f, ids_cb, &all), 0);
		struct ids *l = pass ? &detail : &body;
		/* this pass's ids in insertion order (ids increase) */
		qsort(all.v, all.n, sizeof(all.v[0]), cmp_id);
		for (size_t i = body.n * (size_t)pass; i < all.n; i++)
			l->v[l->n++] = all.v[i];
	}
	pf_profstore_set_compact(PF_PROFSTORE_COMPACT_READ | PF_PROFSTORE_STACKS);
	assert_int_equal(body.n, detail.n);
	assert_true(body.n >= 14);
	struct pf_buf gz;
	pf_buf_init(&gz, 1 << 24);
	for (size_t i = 0; i < body.n; i++) {
		pf_buf_reset(&gz);
		assert_int_equal(pf_store_profile_body(x->st, body.v[i], &gz), 0);
		assert_int_equal(pf_store_profile_body(x->st, detail.v[i], &gz), -ENOENT);
		struct ids one_b = {.v = {body.v[i]}, .n = 1}, one_d = {.v = {detail.v[i]}, .n = 1};
		char *a = views(x, &one_b, 100000, 0), *b = views(x, &one_d, 100000, 0);
		if (strcmp(a, b) != 0) {
			size_t k = 0;
			while (a[k] == b[k])
				k++;
			fail_msg("profile %zu: detail and body views differ at %zu:\n%.300s\n---\n"
				 "%.300s",
				 i, k, a + (k > 100 ? k - 100 : 0), b + (k > 100 ? k - 100 : 0));
		}
		free(a);
		free(b);
	}
	pf_buf_release(&gz);
	char *a = views(x, &body, 100000, 0), *b = views(x, &detail, 100000, 0);
	assert_string_equal(a, b);
	free(a);
	free(b);
}

static void test_compact_same_as_body(void **state)
{
	struct fx *x = *state;
	struct pf_buf b;
	struct ids l = {0};

	/* fixtures, generated windows, and some stored without a compact form (as before
	 * schema 3) */
	pf_profstore_set_compact(PF_PROFSTORE_COMPACT_READ | PF_PROFSTORE_COMPACT_WRITE);
	ingest_fixtures(x, PROF_FIX_LINK | PROF_FIX_TIMESTAMPS);
	for (int i = 0; i < 24; i++) {
		if (i % 5 == 4)
			pf_profstore_set_compact(PF_PROFSTORE_COMPACT_READ);
		ingest_window(x, gen_window(i, 20 + i * 3, i * 10));
		pf_profstore_set_compact(PF_PROFSTORE_COMPACT_READ | PF_PROFSTORE_COMPACT_WRITE);
	}
	struct pf_profile_filter all = {0};
	assert_int_equal(pf_store_profiles_foreach(x->st, &all, ids_cb, &l), 0);
	assert_true(l.n >= 27);
	size_t with = 0;
	pf_buf_init(&b, PF_PROFSTORE_FLAME_MAX_BYTES);
	for (size_t i = 0; i < l.n; i++) {
		pf_buf_reset(&b);
		int rc = pf_store_profile_flame(x->st, l.v[i], &b);
		assert_true(rc == 0 || rc == -ENOENT);
		with += rc == 0;
	}
	pf_buf_release(&b);
	assert_int_equal(with, l.n - 4);
	assert_int_equal(pf_store_profile_flame(x->st, 9999, &b), -ENOENT);

	static const size_t caps[] = {100000, 300, 37, 5, 1};
	for (size_t c = 0; c < PF_ARRAY_SIZE(caps); c++) {
		char *fast = views(x, &l, caps[c],
				   PF_PROFSTORE_COMPACT_READ | PF_PROFSTORE_COMPACT_WRITE);
		char *slow = views(x, &l, caps[c], 0);
		strip_types(fast); /* compact forms carry no frame kinds */
		strip_types(slow);
		if (strcmp(fast, slow) != 0)
			fail_msg("max_nodes %zu: compact and body paths differ", caps[c]);
		assert_true(strlen(fast) > 100);
		free(fast);
		free(slow);
	}
}

/* FNV-1a 64, as flame.c checks the compact form. */
static uint64_t fnv(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 1099511628211ull;
	}
	return h;
}

static void reseal(uint8_t *b, size_t n)
{
	if (n < 12)
		return;
	uint64_t h = fnv(b + 12, n - 12);
	for (int i = 0; i < 8; i++)
		b[4 + i] = (uint8_t)(h >> (8 * i));
}

/* A mutated form: either refused with the tree untouched, or (resealed: structurally valid
 * bytes can name other frames) accepted; never a crash or an out-of-bounds read (ASan). */
static void try_form(const uint8_t *b, size_t n, bool must_refuse)
{
	struct pf_flame *f = pf_flame_new(1000);
	uint8_t *copy = malloc(n ? n : 1); /* exact size: ASan sees any over-read */
	memcpy(copy, b, n);
	int rc = pf_flame_add_compact(f, copy, n, 0);
	if (must_refuse)
		assert_int_equal(rc, -EBADMSG);
	else
		assert_true(rc == 0 || rc == -EBADMSG);
	if (rc < 0) {
		assert_int_equal(pf_flame_node_count(f), 1);
		assert_int_equal(pf_flame_total(f, 0), 0);
	}
	free(copy);
	pf_flame_free(f);
}

static void test_compact_corrupt(void **state)
{
	struct fx *x = *state;
	struct pf_buf blob, ref_json, got_json;
	struct ids l = {0};

	pf_profstore_set_compact(PF_PROFSTORE_COMPACT_READ | PF_PROFSTORE_COMPACT_WRITE |
				 PF_PROFSTORE_BODY);
	ingest_window(x, gen_window(1, 12, 0));
	ingest_window(x, gen_window(2, 12, 10));
	pf_profstore_set_compact(PF_PROFSTORE_COMPACT_READ | PF_PROFSTORE_STACKS);
	struct pf_profile_filter all = {0};
	assert_int_equal(pf_store_profiles_foreach(x->st, &all, ids_cb, &l), 0);
	assert_int_equal(l.n, 2);
	pf_buf_init(&blob, PF_PROFSTORE_FLAME_MAX_BYTES);
	assert_int_equal(pf_store_profile_flame(x->st, l.v[0], &blob), 0);
	size_t n = blob.len;
	assert_true(n > 40);

	/* every truncation, every byte flipped (the checksum catches these) */
	for (size_t k = 0; k < n; k++)
		try_form(blob.data, k, true);
	uint8_t *m = malloc(n);
	for (size_t k = 0; k < n; k++) {
		for (int v = 0; v < 2; v++) {
			memcpy(m, blob.data, n);
			m[k] ^= v ? 0xff : 0x01;
			try_form(m, n, true);
			/* resealed: only the structural checks stand between these and the tree */
			reseal(m, n);
			try_form(m, n, k < 4);
		}
	}
	/* resealed truncations and an appended byte: refused (lengths no longer add up) */
	for (size_t k = 12; k < n; k++) {
		memcpy(m, blob.data, k);
		reseal(m, k);
		try_form(m, k, true);
	}
	uint8_t *longer = malloc(n + 1);
	memcpy(longer, blob.data, n);
	longer[n] = 0;
	reseal(longer, n + 1);
	try_form(longer, n + 1, true);
	free(longer);
	free(m);
	struct pf_flame *e = pf_flame_new(1);
	assert_int_equal(pf_flame_add_compact(e, NULL, 0, 0), -EBADMSG);
	assert_int_equal(pf_flame_add_compact(e, blob.data, blob.len, 2), -EINVAL);
	pf_flame_free(e);

	/* A stored profile whose compact form is corrupt merges from its body: same tree. */
	struct pf_buf body;
	pf_buf_init(&body, 1 << 24);
	assert_int_equal(pf_store_profile_body(x->st, l.v[0], &body), 0);
	blob.data[n / 2] ^= 0x40;
	struct pf_profile_row row = {.agent = "", .service = "svc-1", .host = "", .exe = "",
				     .type = "cpu", .start_ns = 1, .samples = 1,
				     .body = body.data, .body_len = body.len,
				     .flame = blob.data, .flame_len = blob.len};
	assert_int_equal(pf_store_profiles_insert(x->st, &row, 1, NULL, 0, NULL), 0);
	struct pf_flame *ref = pf_flame_new(1000), *got = pf_flame_new(1000);
	struct pf_prof_window *w = NULL;
	assert_int_equal(pf_profstore_load(x->st, l.v[0], &w, NULL), 0);
	assert_int_equal(pf_flame_add_window(ref, w, 0), 0);
	pf_prof_window_free(w);
	assert_int_equal(pf_profstore_merge(x->st, row.id, got, 0), 0);
	pf_buf_init(&ref_json, 1 << 24);
	pf_buf_init(&got_json, 1 << 24);
	assert_int_equal(pf_flame_json(ref, false, 0, &ref_json), 0);
	assert_int_equal(pf_flame_json(got, false, 0, &got_json), 0);
	assert_int_equal(ref_json.len, got_json.len);
	assert_memory_equal(ref_json.data, got_json.data, ref_json.len);
	assert_true(pf_flame_total(got, 0) > 0);
	/* unknown id: -ENOENT, not -ENOMEM */
	assert_int_equal(pf_profstore_merge(x->st, 9999, got, 0), -ENOENT);
	pf_flame_free(ref);
	pf_flame_free(got);
	pf_buf_release(&ref_json);
	pf_buf_release(&got_json);
	pf_buf_release(&body);
	pf_buf_release(&blob);
}

/* a == b, saying where they first differ (cmocka cuts long strings). */
static void same_text(const char *what, const char *a, const char *b)
{
	size_t i = 0;
	while (a[i] && a[i] == b[i])
		i++;
	if (a[i] || b[i])
		fail_msg("%s: differ at byte %zu of %zu/%zu: '%.80s' vs '%.80s'", what, i, strlen(a),
			 strlen(b), a + (i > 20 ? i - 20 : 0), b + (i > 20 ? i - 20 : 0));
}

/* A merged view's tree and top table as text; new_path: pf_views_merge, else the per-profile
 * reference (pf_views_merge_profiles). */
static char *merged_text(struct pf_store *st, const struct pf_profile_filter *f, bool new_path,
			 struct pf_merge_stats *ms)
{
	struct pf_flame *fl = pf_flame_new(1000000);
	struct pf_buf out;
	assert_non_null(fl);
	assert_int_equal(new_path ? pf_views_merge(st, f, fl, 0, ms)
				  : pf_views_merge_profiles(st, f, fl, 0, ms),
			 0);
	pf_buf_init(&out, 1 << 26);
	assert_int_equal(pf_flame_json(fl, false, 0, &out), 0);
	struct pf_flame_fn *fns = NULL;
	size_t n = 0;
	assert_int_equal(pf_flame_top(fl, 0, 0, &fns, &n), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(pf_buf_printf(&out, "\n%s %llu %llu", fns[i].name,
					       (unsigned long long)fns[i].self,
					       (unsigned long long)fns[i].total),
				 0);
	free(fns);
	pf_flame_free(fl);
	char *r = strndup((const char *)out.data, out.len);
	pf_buf_release(&out);
	strip_types(r);
	return r;
}

/* A store written before the content tables (schema 11: bodies and compact forms only, made
 * here by writing bodies without content and dropping the schema-12 and -13 objects with the
 * sqlite3 shell) opens at once; its profiles are merged from their bodies until the conversion
 * rewrites them, and the views give the same answers before and after. */
static void test_upgrade_and_convert(void **state)
{
	struct fx *x = *state;
	char db[128], cmd[1024];
	struct pf_merge_stats ms;

	if (system("command -v sqlite3 >/dev/null 2>&1") != 0)
		skip();
	pf_profstore_set_compact(PF_PROFSTORE_COMPACT_READ | PF_PROFSTORE_COMPACT_WRITE |
				 PF_PROFSTORE_BODY);
	for (int i = 0; i < 30; i++)
		ingest_window(x, gen_window(i % 5, 20 + i, i * 10));
	pf_profstore_set_compact(PF_PROFSTORE_COMPACT_READ | PF_PROFSTORE_STACKS);
	pf_store_close(x->st);
	snprintf(db, sizeof(db), "%s/db", x->dir);
	snprintf(cmd, sizeof(cmd),
		 "sqlite3 '%s' '" STORE_DOWNGRADE_PROFILE_CONTENT "DROP TABLE commands; "
		 "PRAGMA user_version = 11;'",
		 db);
	assert_int_equal(system(cmd), 0);
	x->st = pf_store_open(db, PF_STORE_SYNC_NORMAL, NULL);
	assert_non_null(x->st);
	assert_int_equal(pf_store_schema_version(x->st), pf_store_schema_latest());

	struct pf_profile_filter f = {.type = "cpu"};
	char *ref = merged_text(x->st, &f, false, &ms);
	assert_int_equal(ms.merged, 30);
	char *before = merged_text(x->st, &f, true, &ms);
	assert_int_equal(ms.matched, 30);
	assert_int_equal(ms.merged, 30);
	same_text("before", before, ref);
	int64_t from_ms = (int64_t)(PROF_FIXTURE_START / 1000000);
	int64_t tl_before[10], tl_after[10];
	char unit[32];
	assert_int_equal(pf_views_timeline(x->st, &f, from_ms - from_ms % 60000, 60000, 10,
					   tl_before, unit),
			 0);
	assert_string_equal(unit, "samples");

	size_t n = 0;
	assert_int_equal(pf_profstore_convert(x->st, 10, &n), 1);
	assert_int_equal(n, 10);
	char *half = merged_text(x->st, &f, true, &ms); /* converted and not, in one view */
	same_text("half", half, ref);
	assert_int_equal(pf_profstore_convert(x->st, 1000, &n), 0);
	assert_int_equal(n, 20);
	char *after = merged_text(x->st, &f, true, &ms);
	assert_int_equal(ms.matched, 30);
	assert_int_equal(ms.merged, 30);
	same_text("after", after, ref);
	assert_int_equal(pf_views_timeline(x->st, &f, from_ms - from_ms % 60000, 60000, 10,
					   tl_after, unit),
			 0);
	int64_t sum = 0;
	for (int i = 0; i < 10; i++) {
		assert_int_equal(tl_before[i], tl_after[i]);
		sum += tl_after[i];
	}
	assert_true(sum > 0);
	/* one service: from the attribute sets now */
	struct pf_profile_filter one = {.type = "cpu", .service = "svc-2"};
	char *svc_ref = merged_text(x->st, &one, false, &ms);
	size_t svc_n = ms.merged;
	char *svc = merged_text(x->st, &one, true, &ms);
	assert_int_equal(ms.merged, svc_n);
	assert_true(svc_n > 0 && svc_n < 30);
	same_text("svc", svc, svc_ref);
	char **v = NULL;
	size_t nv = 0;
	bool more = true;
	assert_int_equal(pf_views_labels(x->st, &(struct pf_profile_filter){0}, "service.name", 100,
					 &v, &nv, &more),
			 0);
	assert_int_equal(nv, 3); /* svc-<agent % 3> */
	assert_false(more);
	assert_string_equal(v[0], "svc-0");
	pf_views_strings_free(v, nv);
	free(ref);
	free(before);
	free(half);
	free(after);
	free(svc_ref);
	free(svc);
}

/* The merged total and unit of type over [from, to) ns, and the value of main;fn in it. */
static uint64_t typed_total(struct fx *x, const char *type, int64_t from, int64_t to,
			    const char *fn, uint64_t *fn_value, char unit[32])
{
	struct pf_profile_filter f = {.type = type, .from_ns = from, .to_ns = to};
	struct pf_merge_stats ms;
	struct pf_flame *fl = pf_flame_new(1000);
	assert_int_equal(pf_views_merge(x->st, &f, fl, 0, &ms), 0);
	snprintf(unit, 32, "%s", ms.unit);
	json_t *j = tree_json(fl, false, 0);
	json_t *c = child(child(j, "main"), fn);
	*fn_value = c ? (uint64_t)ival(c, "value") : 0;
	json_decref(j);
	uint64_t t = pf_flame_total(fl, 0);
	pf_flame_free(fl);
	return t;
}

static int type_cb(const struct pf_profile_row *r, void *ud)
{
	snprintf(ud, 64, "%s %lld", r->type, (long long)r->samples);
	return 0;
}

/* A profile with two sample types (the typed fixture: alloc_objects {3, 0}, alloc_space
 * {3000, 512}, default alloc_space) is stored as its default type with that type's values,
 * and its other type as a series: both are selectable in the merged views (rollups and
 * single profiles), the timeline, the list and the types, with their own units and totals;
 * the single-profile view shows either type; retention counts and uncounts the series. */
static void test_several_types(void **state)
{
	struct fx *x = *state;
	int64_t t0 = (int64_t)PROF_FIXTURE_START, hour = 3600000000000LL;
	int64_t h0 = t0 - t0 % hour;
	char unit[32], row[64] = "";
	uint64_t v;

	struct pf_prof_window *tw = prof_fixture_typed_window();
	tw->start_unix_ns = PROF_FIXTURE_START;
	tw->end_unix_ns = PROF_FIXTURE_START + PROF_FIXTURE_NS;
	ingest_window(x, tw);
	struct pf_profile_filter lf = {0};
	assert_int_equal(pf_store_profiles_foreach(x->st, &lf, type_cb, row), 0);
	assert_string_equal(row, "alloc_space 3512");
	lf.type = "alloc_objects";
	row[0] = 0;
	assert_int_equal(pf_store_profiles_foreach(x->st, &lf, type_cb, row), 0);
	assert_string_equal(row, "alloc_space 3512"); /* found by its series */
	lf.type = "inuse_space";
	row[0] = 0;
	assert_int_equal(pf_store_profiles_foreach(x->st, &lf, type_cb, row), 0);
	assert_string_equal(row, "");

	/* edges (single profiles and series) and whole hours (rollups) alike */
	int64_t ranges[2][2] = {{t0, t0 + (int64_t)PROF_FIXTURE_NS}, {h0, h0 + hour}};
	for (int i = 0; i < 2; i++) {
		assert_int_equal(
		    typed_total(x, "alloc_space", ranges[i][0], ranges[i][1], "work_b", &v, unit),
		    3512);
		assert_string_equal(unit, "bytes");
		assert_int_equal(v, 512);
		assert_int_equal(
		    typed_total(x, "alloc_objects", ranges[i][0], ranges[i][1], "work_a", &v, unit),
		    3);
		assert_string_equal(unit, "count");
		assert_int_equal(v, 3);
		assert_int_equal(
		    typed_total(x, "cpu", ranges[i][0], ranges[i][1], "work_a", &v, unit), 0);
	}
	int64_t pts[2];
	int64_t from_ms = h0 / 1000000;
	assert_int_equal(pf_views_timeline(x->st,
					   &(struct pf_profile_filter){.type = "alloc_objects",
								       .from_ns = h0,
								       .to_ns = h0 + hour},
					   from_ms, 1800000, 2, pts, unit),
			 0);
	assert_int_equal(pts[0] + pts[1], 3);
	assert_string_equal(unit, "count");
	struct pf_profile_filter edge = {
	    .type = "alloc_space", .from_ns = t0, .to_ns = t0 + (int64_t)PROF_FIXTURE_NS};
	assert_int_equal(pf_views_timeline(x->st, &edge, t0 / 1000000, 10000, 1, pts, unit), 0);
	assert_int_equal(pts[0], 3512);
	char **types, **units;
	size_t n;
	struct pf_profile_filter all = {.from_ns = h0, .to_ns = h0 + hour};
	assert_int_equal(pf_views_types(x->st, &all, &types, &units, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(types[0], "alloc_objects");
	assert_string_equal(units[0], "count");
	assert_string_equal(types[1], "alloc_space");
	assert_string_equal(units[1], "bytes");
	pf_views_strings_free(types, n);
	pf_views_strings_free(units, n);

	/* one profile: either type */
	int64_t id = 0;
	struct ids l = {0};
	assert_int_equal(
	    pf_store_profiles_foreach(x->st, &(struct pf_profile_filter){0}, ids_cb, &l), 0);
	assert_int_equal(l.n, 1);
	id = l.v[0];
	static const char *const want_type[] = {NULL, "alloc_space", "alloc_objects"};
	static const uint64_t want_total[] = {3512, 3512, 3};
	for (int i = 0; i < 3; i++) {
		struct pf_prof_window *w = NULL;
		struct pf_error err = {0};
		assert_int_equal(pf_profstore_load(x->st, id, &w, &err), 0);
		assert_string_equal(w->default_sample_type, "alloc_space");
		int k = pf_profstore_type_find(w, want_type[i]);
		assert_true(k >= 0);
		assert_int_equal(pf_profstore_pick(w, k), 0);
		struct pf_flame *fl = pf_flame_new(1000);
		assert_int_equal(pf_flame_add_window(fl, w, 0), 0);
		assert_int_equal(pf_flame_total(fl, 0), want_total[i]);
		assert_string_equal(pf_profstore_unit_of(w, k), i == 2 ? "count" : "bytes");
		assert_int_equal(pf_profstore_type_find(w, "inuse_space"), -2);
		pf_flame_free(fl);
		pf_prof_window_free(w);
	}

	/* retention: the series' bytes are counted, and taken off with the profile */
	int64_t count, bytes;
	assert_int_equal(pf_store_profiles_totals(x->st, &count, &bytes), 0);
	assert_int_equal(count, 1);
	struct pf_profile_retention ret = {.max_bytes = 1};
	size_t deleted = 0;
	assert_int_equal(pf_store_profiles_retain(x->st, &ret, 5000, 100, &deleted), 0);
	assert_int_equal(deleted, 1);
	assert_int_equal(pf_store_profiles_totals(x->st, &count, &bytes), 0);
	assert_int_equal(count, 0);
	assert_int_equal(bytes, 0);
	assert_int_equal(
	    typed_total(x, "alloc_objects", t0, t0 + (int64_t)PROF_FIXTURE_NS, "work_a", &v, unit),
	    0);
}

/* Without default_sample_type the stored type is the last one in bytes (pprof's default for
 * a Go heap profile: inuse_space); a default naming another type wins. */
static void test_stored_type_choice(void **state)
{
	struct fx *x = *state;
	char row[64] = "";
	for (int i = 0; i < 2; i++) {
		struct pf_prof_window *tw = prof_fixture_typed_window();
		tw->start_unix_ns = PROF_FIXTURE_START + (uint64_t)i * PROF_FIXTURE_NS;
		tw->end_unix_ns = tw->start_unix_ns + PROF_FIXTURE_NS;
		tw->default_sample_type = i ? "alloc_objects" : NULL;
		ingest_window(x, tw);
		struct pf_profile_filter lf = {
		    .from_ns = (int64_t)PROF_FIXTURE_START + i * (int64_t)PROF_FIXTURE_NS,
		    .to_ns = (int64_t)PROF_FIXTURE_START + (i + 1) * (int64_t)PROF_FIXTURE_NS};
		assert_int_equal(pf_store_profiles_foreach(x->st, &lf, type_cb, row), 0);
		assert_string_equal(row, i ? "alloc_objects 3" : "alloc_space 3512");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tree_shape),
	    cmocka_unit_test(test_top_self_total_recursion),
	    cmocka_unit_test(test_diff_scaled),
	    cmocka_unit_test(test_truncation),
	    cmocka_unit_test(test_json_escaping),
	    cmocka_unit_test(test_window_and_merge),
	    cmocka_unit_test(test_inlined_nodes),
	    cmocka_unit_test(test_paths_repeated_stacks),
	    cmocka_unit_test(test_response_encoding),
	    cmocka_unit_test_setup_teardown(test_ingest_ok_and_load, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ingest_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ingest_batch, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_store_batch, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ingest_partial, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ingest_metadata_and_retention, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_compact_same_as_body, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_detail_same_as_body, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_compact_corrupt, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_upgrade_and_convert, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_several_types, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stored_type_choice, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
