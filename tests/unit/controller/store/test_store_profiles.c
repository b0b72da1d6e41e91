/* test_store_profiles.c — the profile tables of the store (store.h "Profiles"): insert with
 * bodies and links, get, body, list filters and order, totals kept by triggers, retention by
 * age and bytes in bounded batches, links deleted with their profile; compact flame forms
 * (schema 3): stored, read back, counted in the totals and by retention, deleted with their
 * profile, and a version 2 database upgraded with its profiles intact; inserts idempotent per
 * (agent, profile_id). */
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

#include "store.h"
#include "store_downgrade.h"

#define S 1000000000LL

struct fx {
	char dir[64];
	char db[128];
	struct pf_store *st;
};

static int setup(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));
	snprintf(x->dir, sizeof(x->dir), "/tmp/pf-test-storeprof-XXXXXX");
	assert_non_null(mkdtemp(x->dir));
	snprintf(x->db, sizeof(x->db), "%s/db", x->dir);
	x->st = pf_store_open(x->db, PF_STORE_SYNC_NORMAL, NULL);
	assert_non_null(x->st);
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fx *x = *state;
	char cmd[160];
	pf_store_close(x->st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", x->dir);
	assert_int_equal(system(cmd), 0);
	free(x);
	return 0;
}

/* Inserts one profile; body is `size` bytes of 'b'. Returns the id. */
static int64_t put(struct fx *x, const char *service, const char *agent, const char *type,
		   int64_t start_s, int64_t received_ms, size_t size, const struct pf_profile_link *l,
		   size_t nl)
{
	char *body = malloc(size ? size : 1);
	memset(body, 'b', size);
	struct pf_profile_row r = {
		.agent = agent, .service = service, .host = "h", .exe = "app", .type = type,
		.pid = 7, .start_ns = start_s * S, .duration_ns = 10 * S, .samples = 99,
		.n_links = (int64_t)nl, .received_ms = received_ms, .raw_bytes = (int64_t)size * 2,
		.n_link_entries = nl, .links = l, .body = body, .body_len = size,
	};
	assert_int_equal(pf_store_profiles_insert(x->st, &r, 1, NULL, received_ms, NULL), 0);
	free(body);
	assert_true(r.id > 0);
	return r.id;
}

struct collect {
	int64_t ids[64];
	size_t n;
};

static int collect_cb(const struct pf_profile_row *r, void *ud)
{
	struct collect *c = ud;
	if (c->n < 64)
		c->ids[c->n++] = r->id;
	return 0;
}

static struct collect list(struct fx *x, struct pf_profile_filter f)
{
	struct collect c = {0};
	assert_int_equal(pf_store_profiles_foreach(x->st, &f, collect_cb, &c), 0);
	return c;
}

static void test_schema(void **state)
{
	struct fx *x = *state;
	assert_true(pf_store_schema_version(x->st) >= 2);
	assert_int_equal(pf_store_schema_version(x->st), pf_store_schema_latest());
	int64_t n = -1, b = -1;
	assert_int_equal(pf_store_profiles_totals(x->st, &n, &b), 0);
	assert_int_equal(n, 0);
	assert_int_equal(b, 0);
}

static int get_cb(const struct pf_profile_row *r, void *ud)
{
	assert_string_equal(r->service, "checkout");
	assert_string_equal(r->agent, "ag1");
	assert_string_equal(r->type, "cpu");
	assert_string_equal(r->exe, "app");
	assert_int_equal(r->pid, 7);
	assert_int_equal(r->samples, 99);
	assert_int_equal(r->start_ns, 100 * S);
	assert_int_equal(r->body_bytes, 10);
	assert_int_equal(r->raw_bytes, 20);
	assert_int_equal(r->n_link_entries, 2);
	assert_int_equal(r->links[0].trace_id[0] + r->links[1].trace_id[0], 1 + 2);
	(*(int *)ud)++;
	return 0;
}

static void test_insert_get_body(void **state)
{
	struct fx *x = *state;
	struct pf_profile_link l[2] = {{.trace_id = {1}, .span_id = {9}},
				       {.trace_id = {2}, .span_id = {9}}};
	int64_t id = put(x, "checkout", "ag1", "cpu", 100, 1000, 10, l, 2);
	int called = 0;
	assert_int_equal(pf_store_profile_get(x->st, id, get_cb, &called), 0);
	assert_int_equal(called, 1);
	assert_int_equal(pf_store_profile_get(x->st, id + 1, get_cb, &called), -ENOENT);

	struct pf_buf b;
	pf_buf_init(&b, 1024);
	assert_int_equal(pf_store_profile_body(x->st, id, &b), 0);
	assert_int_equal(b.len, 10);
	assert_int_equal(b.data[0], 'b');
	assert_int_equal(pf_store_profile_body(x->st, id + 1, &b), -ENOENT);
	pf_buf_release(&b);
	/* a too small buffer cap */
	pf_buf_init(&b, 4);
	assert_int_equal(pf_store_profile_body(x->st, id, &b), -E2BIG);
	pf_buf_release(&b);

	int64_t n, bytes;
	assert_int_equal(pf_store_profiles_totals(x->st, &n, &bytes), 0);
	assert_int_equal(n, 1);
	assert_int_equal(bytes, 10);

	/* bad rows are refused and nothing is written */
	struct pf_profile_row bad = {.agent = "a"};
	assert_int_equal(pf_store_profiles_insert(x->st, &bad, 1, NULL, 0, NULL), -EINVAL);
	assert_int_equal(pf_store_profiles_totals(x->st, &n, &bytes), 0);
	assert_int_equal(n, 1);
}

/* One stored profile per (agent, non-zero profile_id): a second insert, alone or in the same
 * call, names the stored row; another agent's or a zero id is a new profile. */
static void test_insert_idempotent(void **state)
{
	struct fx *x = *state;
	struct pf_profile_row r[3] = {
	    {.profile_id = {7, 7}, .agent = "ag1", .service = "s", .host = "h", .exe = "e",
	     .type = "cpu", .samples = 5, .body = "abc", .body_len = 3},
	};
	r[1] = r[0];
	r[2] = r[0];
	r[2].agent = "ag2";
	assert_int_equal(pf_store_profiles_insert(x->st, r, 3, NULL, 0, NULL), 0);
	assert_false(r[0].duplicate);
	assert_true(r[1].duplicate);
	assert_int_equal(r[1].id, r[0].id);
	assert_false(r[2].duplicate);
	assert_true(r[2].id != r[0].id);
	int64_t n, bytes;
	assert_int_equal(pf_store_profiles_totals(x->st, &n, &bytes), 0);
	assert_int_equal(n, 2);
	assert_int_equal(bytes, 6);

	struct pf_profile_row again = r[0];
	again.id = 0;
	assert_int_equal(pf_store_profiles_insert(x->st, &again, 1, NULL, 0, NULL), 0);
	assert_true(again.duplicate);
	assert_int_equal(again.id, r[0].id);

	struct pf_profile_row zero[2] = {r[0], r[0]};
	memset(zero[0].profile_id, 0, 16);
	memset(zero[1].profile_id, 0, 16);
	assert_int_equal(pf_store_profiles_insert(x->st, zero, 2, NULL, 0, NULL), 0);
	assert_false(zero[0].duplicate || zero[1].duplicate);
	assert_true(zero[0].id != zero[1].id);
	assert_int_equal(pf_store_profiles_totals(x->st, &n, &bytes), 0);
	assert_int_equal(n, 4);
}

static void test_filters_and_order(void **state)
{
	struct fx *x = *state;
	struct pf_profile_link l = {.trace_id = {0xab}, .span_id = {1}};
	int64_t a = put(x, "checkout", "ag1", "cpu", 100, 1, 1, NULL, 0);
	int64_t b = put(x, "checkout", "ag2", "cpu", 300, 2, 1, &l, 1);
	int64_t c = put(x, "billing", "ag1", "cpu", 200, 3, 1, NULL, 0);
	int64_t d = put(x, "checkout", "ag1", "alloc_space", 250, 4, 1, NULL, 0);

	struct collect r = list(x, (struct pf_profile_filter){0});
	assert_int_equal(r.n, 4); /* newest start first */
	assert_int_equal(r.ids[0], b);
	assert_int_equal(r.ids[1], d);
	assert_int_equal(r.ids[2], c);
	assert_int_equal(r.ids[3], a);
	r = list(x, (struct pf_profile_filter){.service = "checkout"});
	assert_int_equal(r.n, 3);
	r = list(x, (struct pf_profile_filter){.service = "checkout", .type = "cpu"});
	assert_int_equal(r.n, 2);
	r = list(x, (struct pf_profile_filter){.agent = "ag1", .service = ""});
	assert_int_equal(r.n, 3);
	r = list(x, (struct pf_profile_filter){.from_ns = 200 * S, .to_ns = 300 * S});
	assert_int_equal(r.n, 2); /* [200, 300): c and d */
	assert_int_equal(r.ids[0], d);
	assert_int_equal(r.ids[1], c);
	r = list(x, (struct pf_profile_filter){.limit = 1});
	assert_int_equal(r.n, 1);
	assert_int_equal(r.ids[0], b);
	struct pf_profile_filter t = {.has_trace = true, .trace_id = {0xab}};
	r = list(x, t);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.ids[0], b);
	t.trace_id[0] = 0xac;
	r = list(x, t);
	assert_int_equal(r.n, 0);
}

/* Schema 4: the capture and trigger columns filter, alone and with the others; profile_find
 * maps an OTLP profile_id to the newest store id. */
static void test_capture_trigger_and_find(void **state)
{
	struct fx *x = *state;
	struct pf_profile_row r = {
		.agent = "ag1", .service = "checkout", .host = "h", .exe = "app", .type = "cpu",
		.start_ns = 100 * S, .duration_ns = S, .samples = 1, .received_ms = 1,
		.profile_id = {0x5f, 1}, .capture_id = "cap-1", .trigger = "on_demand",
	};
	assert_int_equal(pf_store_profiles_insert(x->st, &r, 1, NULL, 1, NULL), 0);
	int64_t a = r.id;
	r.capture_id = NULL; /* NULL stores "" */
	r.trigger = "high_cpu";
	r.start_ns = 200 * S;
	r.profile_id[1] = 2;
	assert_int_equal(pf_store_profiles_insert(x->st, &r, 1, NULL, 1, NULL), 0);
	int64_t b = r.id;
	int64_t c = put(x, "checkout", "ag2", "cpu", 300, 1, 1, NULL, 0);

	struct collect l = list(x, (struct pf_profile_filter){.capture_id = "cap-1"});
	assert_int_equal(l.n, 1);
	assert_int_equal(l.ids[0], a);
	l = list(x, (struct pf_profile_filter){.trigger = "high_cpu", .agent = "ag1"});
	assert_int_equal(l.n, 1);
	assert_int_equal(l.ids[0], b);
	l = list(x, (struct pf_profile_filter){.trigger = "on_demand", .capture_id = "cap-2"});
	assert_int_equal(l.n, 0);
	l = list(x, (struct pf_profile_filter){.capture_id = "", .trigger = ""});
	assert_int_equal(l.n, 3);
	assert_int_equal(l.ids[0], c);

	int64_t id = 0;
	uint8_t pid[16] = {0x5f, 2};
	assert_int_equal(pf_store_profile_find(x->st, pid, &id), 0);
	assert_int_equal(id, b);
	pid[1] = 9;
	assert_int_equal(pf_store_profile_find(x->st, pid, &id), -ENOENT);
}

static int check_pod_cb(const struct pf_profile_row *row, void *ud)
{
	(void)ud;
	assert_string_equal(row->namespace_name, "shop");
	assert_string_equal(row->pod, "checkout-7d9f");
	assert_string_equal(row->container, "app");
	return 0;
}

/* Schema 6: a profile's pod (k8s.namespace.name, k8s.pod.name, k8s.container.name) filters,
 * alone and with the others; rows without one store "". */
static void test_k8s_filters(void **state)
{
	struct fx *x = *state;
	struct pf_profile_row r = {
		.agent = "ag1", .service = "checkout", .host = "h", .exe = "app", .type = "cpu",
		.start_ns = 100 * S, .duration_ns = S, .samples = 1, .received_ms = 1,
		.namespace_name = "shop", .pod = "checkout-7d9f", .container = "app",
	};
	assert_int_equal(pf_store_profiles_insert(x->st, &r, 1, NULL, 1, NULL), 0);
	int64_t a = r.id;
	r.pod = "checkout-1abc";
	r.container = "sidecar";
	r.start_ns = 200 * S;
	assert_int_equal(pf_store_profiles_insert(x->st, &r, 1, NULL, 1, NULL), 0);
	int64_t b = r.id;
	int64_t c = put(x, "checkout", "ag2", "cpu", 300, 1, 1, NULL, 0); /* no pod */

	struct collect l = list(x, (struct pf_profile_filter){.namespace_name = "shop"});
	assert_int_equal(l.n, 2);
	assert_int_equal(l.ids[0], b);
	assert_int_equal(l.ids[1], a);
	l = list(x, (struct pf_profile_filter){.namespace_name = "shop", .pod = "checkout-7d9f"});
	assert_int_equal(l.n, 1);
	assert_int_equal(l.ids[0], a);
	l = list(x, (struct pf_profile_filter){.container = "sidecar", .service = "checkout"});
	assert_int_equal(l.n, 1);
	assert_int_equal(l.ids[0], b);
	l = list(x, (struct pf_profile_filter){.namespace_name = "other"});
	assert_int_equal(l.n, 0);
	l = list(x, (struct pf_profile_filter){.namespace_name = "", .pod = ""});
	assert_int_equal(l.n, 3);
	assert_int_equal(l.ids[0], c);
	/* the row read back carries them */
	assert_int_equal(pf_store_profile_get(x->st, a, check_pod_cb, NULL), 0);
}

static void test_retention_age(void **state)
{
	struct fx *x = *state;
	for (int i = 0; i < 10; i++)
		put(x, "s", "a", "cpu", i, 1000 + i * 1000, 100, NULL, 0); /* received 1 s .. 10 s */
	struct pf_profile_retention ret = {.max_age_ms = 5000};
	size_t del = 0;
	/* at 12 s: received before 7 s go (1..6 s = 6 profiles), 3 per pass */
	assert_int_equal(pf_store_profiles_retain(x->st, &ret, 12000, 3, &del), 1);
	assert_int_equal(del, 3);
	assert_int_equal(pf_store_profiles_retain(x->st, &ret, 12000, 3, &del), 1);
	assert_int_equal(del, 3);
	assert_int_equal(pf_store_profiles_retain(x->st, &ret, 12000, 3, &del), 0);
	assert_int_equal(del, 0);
	int64_t n, bytes;
	assert_int_equal(pf_store_profiles_totals(x->st, &n, &bytes), 0);
	assert_int_equal(n, 4);
	assert_int_equal(bytes, 400);
	assert_int_equal(pf_store_profiles_retain(x->st, &ret, 12000, 0, &del), -EINVAL);
}

static void test_retention_bytes_and_links(void **state)
{
	struct fx *x = *state;
	struct pf_profile_link l = {.trace_id = {5}, .span_id = {5}};
	int64_t first = put(x, "s", "a", "cpu", 1, 1, 100, &l, 1);
	for (int i = 1; i < 10; i++)
		put(x, "s", "a", "cpu", i, 1, 100, NULL, 0);
	struct pf_profile_retention ret = {.max_bytes = 450};
	size_t del = 0;
	assert_int_equal(pf_store_profiles_retain(x->st, &ret, 2, 100, &del), 0);
	assert_int_equal(del, 6); /* 1000 -> 400 bytes, oldest first */
	int64_t n, bytes;
	assert_int_equal(pf_store_profiles_totals(x->st, &n, &bytes), 0);
	assert_int_equal(n, 4);
	assert_int_equal(bytes, 400);
	int called = 0;
	assert_int_equal(pf_store_profile_get(x->st, first, get_cb, &called), -ENOENT);
	/* its link went with it (cascade) */
	struct pf_profile_filter t = {.has_trace = true, .trace_id = {5}};
	assert_int_equal(list(x, t).n, 0);

	/* insert-time cap: every insert leaves the store within max_bytes */
	for (int i = 0; i < 5; i++) {
		struct pf_profile_row r = {.agent = "", .service = "s", .host = "", .exe = "",
					   .type = "cpu", .body = "0123456789abcdef0123456789",
					   .body_len = 200, .received_ms = 3};
		char big[200] = {0};
		r.body = big;
		assert_int_equal(pf_store_profiles_insert(x->st, &r, 1, &ret, 3, &del), 0);
		assert_int_equal(pf_store_profiles_totals(x->st, &n, &bytes), 0);
		assert_true(bytes <= 450);
	}
	assert_int_equal(n, 2);
}

static int stop_cb(const struct pf_profile_row *r, void *ud)
{
	(void)r;
	(void)ud;
	return 42;
}

static int nested_cb(const struct pf_profile_row *r, void *ud)
{
	struct fx *x = ud;
	struct pf_profile_filter f = {0};
	struct pf_buf b;
	/* another query and a body read from inside the iteration */
	pf_buf_init(&b, 1 << 20);
	assert_int_equal(pf_store_profile_body(x->st, r->id, &b), 0);
	pf_buf_release(&b);
	assert_int_equal(pf_store_profiles_foreach(x->st, &f, stop_cb, NULL), -EBUSY);
	return 0;
}

static void test_iteration(void **state)
{
	struct fx *x = *state;
	put(x, "s", "a", "cpu", 1, 1, 3, NULL, 0);
	put(x, "s", "a", "cpu", 2, 1, 3, NULL, 0);
	struct pf_profile_filter f = {0};
	assert_int_equal(pf_store_profiles_foreach(x->st, &f, stop_cb, NULL), 42);
	assert_int_equal(pf_store_profiles_foreach(x->st, &f, nested_cb, x), 0);
	/* survives a reopen */
	pf_store_close(x->st);
	x->st = pf_store_open(x->db, PF_STORE_SYNC_NORMAL, NULL);
	assert_non_null(x->st);
	assert_int_equal(list(x, f).n, 2);
}

/* Inserts one profile with a body of `size` bytes and a compact flame form of `fsize` bytes
 * (0 = none). */
static int64_t put_flame(struct fx *x, int64_t start_s, size_t size, size_t fsize,
			 const struct pf_profile_retention *ret)
{
	char body[256] = {0}, flame[256];
	memset(flame, 'f', sizeof(flame));
	struct pf_profile_row r = {.agent = "", .service = "s", .host = "", .exe = "",
				   .type = "cpu", .start_ns = start_s * S, .received_ms = 1,
				   .body = body, .body_len = size, .flame = fsize ? flame : NULL,
				   .flame_len = fsize};
	assert_int_equal(pf_store_profiles_insert(x->st, &r, 1, ret, 1, NULL), 0);
	return r.id;
}

static void test_flames(void **state)
{
	struct fx *x = *state;
	struct pf_buf b;
	int64_t n, bytes;

	int64_t a = put_flame(x, 1, 100, 50, NULL);
	int64_t c = put_flame(x, 2, 100, 0, NULL);
	pf_buf_init(&b, 1024);
	assert_int_equal(pf_store_profile_flame(x->st, a, &b), 0);
	assert_int_equal(b.len, 50);
	assert_int_equal(b.data[49], 'f');
	pf_buf_reset(&b);
	assert_int_equal(pf_store_profile_flame(x->st, c, &b), -ENOENT);
	assert_int_equal(pf_store_profile_flame(x->st, 999, &b), -ENOENT);
	pf_buf_release(&b);
	pf_buf_init(&b, 10);
	assert_int_equal(pf_store_profile_flame(x->st, a, &b), -E2BIG);
	pf_buf_release(&b);
	/* body_bytes stays the body; the totals count both */
	struct collect got = list(x, (struct pf_profile_filter){0});
	assert_int_equal(got.n, 2);
	assert_int_equal(pf_store_profiles_totals(x->st, &n, &bytes), 0);
	assert_int_equal(n, 2);
	assert_int_equal(bytes, 250);
	/* a flame without its length is refused */
	struct pf_profile_row bad = {.agent = "", .service = "s", .host = "", .exe = "",
				     .type = "cpu", .flame_len = 3};
	assert_int_equal(pf_store_profiles_insert(x->st, &bad, 1, NULL, 0, NULL), -EINVAL);

	/* retention counts compact forms: 3 x 150 bytes under a 400 cap keeps 2 */
	struct pf_profile_retention ret = {.max_bytes = 400};
	for (int i = 0; i < 3; i++)
		put_flame(x, 10 + i, 100, 50, &ret);
	assert_int_equal(pf_store_profiles_totals(x->st, &n, &bytes), 0);
	assert_int_equal(n, 2);
	assert_int_equal(bytes, 300);
	/* ...and the deleted profiles' forms went with them (cascade) */
	pf_buf_init(&b, 1024);
	assert_int_equal(pf_store_profile_flame(x->st, a, &b), -ENOENT);
	pf_buf_release(&b);
	/* age retention takes their bytes off too, one row per batch */
	struct pf_profile_retention age = {.max_age_ms = 10};
	size_t del = 0;
	assert_int_equal(pf_store_profiles_retain(x->st, &age, 100, 1, &del), 1);
	assert_int_equal(pf_store_profiles_totals(x->st, &n, &bytes), 0);
	assert_int_equal(n, 1);
	assert_int_equal(bytes, 150);
	assert_int_equal(pf_store_profiles_retain(x->st, &age, 100, 5, &del), 0);
	assert_int_equal(pf_store_profiles_totals(x->st, &n, &bytes), 0);
	assert_int_equal(n, 0);
	assert_int_equal(bytes, 0);
}

/* A database as schema version 2 left it (made from a new one with the sqlite3 shell, as
 * install-deps.sh installs it), with one profile, is upgraded in place. */
static void test_upgrade_from_v2(void **state)
{
	struct fx *x = *state;
	char cmd[2048];
	int64_t n, bytes;

	put_flame(x, 1, 100, 0, NULL);
	pf_store_close(x->st);
	x->st = NULL;
	if (system("command -v sqlite3 >/dev/null 2>&1") != 0)
		skip();
	snprintf(
	    cmd, sizeof(cmd),
	    "sqlite3 '%s' '" STORE_DOWNGRADE_PROFILE_CONTENT
	    "DROP INDEX profiles_k8s; ALTER TABLE profiles DROP COLUMN "
	    "k8s_namespace; ALTER TABLE profiles DROP COLUMN k8s_pod; ALTER TABLE profiles "
	    "DROP COLUMN k8s_container; DROP TABLE rollout_agents; DROP TABLE rollouts; "
	    "DROP TABLE agent_pins; DROP TABLE config_serving; "
	    "DROP TABLE profile_flames; DROP TABLE capture_agents; "
	    "DROP TABLE captures; DROP INDEX profiles_capture; DROP INDEX profiles_trigger; "
	    "DROP INDEX profiles_profile_id; ALTER TABLE profiles DROP COLUMN capture_id; "
	    "ALTER TABLE profiles DROP COLUMN trigger_name; DROP INDEX tokens_id; "
	    "ALTER TABLE tokens DROP COLUMN id; ALTER TABLE tokens DROP COLUMN expires_ms; "
	    "ALTER TABLE tokens DROP COLUMN last_used_ms; "
	    "ALTER TABLE tokens DROP COLUMN created_by; ALTER TABLE audit DROP COLUMN actor_id; "
	    "ALTER TABLE audit DROP COLUMN source; ALTER TABLE audit DROP COLUMN status; "
	    "ALTER TABLE agents DROP COLUMN written_ms; DROP TABLE replicas; "
	    "ALTER TABLE agents DROP COLUMN replica; ALTER TABLE tokens DROP COLUMN seq; "
	    "DROP INDEX tokens_agent; ALTER TABLE tokens DROP COLUMN agent_uid; "
	    "DROP TABLE commands; "
	    "PRAGMA user_version = 2;'",
	    x->db);
	assert_int_equal(system(cmd), 0);
	x->st = pf_store_open(x->db, PF_STORE_SYNC_NORMAL, NULL);
	assert_non_null(x->st);
	assert_int_equal(pf_store_schema_version(x->st), pf_store_schema_latest());
	assert_int_equal(pf_store_profiles_totals(x->st, &n, &bytes), 0);
	assert_int_equal(n, 1);
	assert_int_equal(bytes, 100);
	struct pf_buf b;
	pf_buf_init(&b, 1024);
	assert_int_equal(pf_store_profile_body(x->st, 1, &b), 0);
	assert_int_equal(b.len, 100);
	pf_buf_reset(&b);
	assert_int_equal(pf_store_profile_flame(x->st, 1, &b), -ENOENT);
	pf_buf_release(&b);
	/* new profiles get theirs; retention still adds up across old and new */
	struct pf_profile_retention ret = {.max_bytes = 160};
	put_flame(x, 2, 100, 50, &ret);
	assert_int_equal(pf_store_profiles_totals(x->st, &n, &bytes), 0);
	assert_int_equal(n, 1);
	assert_int_equal(bytes, 150);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_schema, setup, teardown),
		cmocka_unit_test_setup_teardown(test_insert_get_body, setup, teardown),
		cmocka_unit_test_setup_teardown(test_insert_idempotent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_filters_and_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_capture_trigger_and_find, setup, teardown),
		cmocka_unit_test_setup_teardown(test_k8s_filters, setup, teardown),
		cmocka_unit_test_setup_teardown(test_retention_age, setup, teardown),
		cmocka_unit_test_setup_teardown(test_retention_bytes_and_links, setup, teardown),
		cmocka_unit_test_setup_teardown(test_iteration, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flames, setup, teardown),
		cmocka_unit_test_setup_teardown(test_upgrade_from_v2, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
