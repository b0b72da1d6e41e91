/* test_store.c — unit tests of controller/store (store.h) on a temp directory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "store.h"

struct fx {
	char dir[64];
	char db[128];
};

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/pf_store_XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->db, sizeof(f->db), "%s/fleet.db", f->dir);
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;
	DIR *d = opendir(f->dir);
	struct dirent *e;

	if (d) {
		while ((e = readdir(d))) {
			char p[512];
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			snprintf(p, sizeof(p), "%s/%s", f->dir, e->d_name);
			unlink(p);
		}
		closedir(d);
	}
	rmdir(f->dir);
	free(f);
	return 0;
}

static void fill_hash(uint8_t h[32], unsigned seed)
{
	for (unsigned i = 0; i < 32; i++)
		h[i] = (uint8_t)(seed * 31u + i * 7u + 1u);
}

static bool file_exists(const char *path, off_t *size)
{
	struct stat sb;

	if (stat(path, &sb) != 0)
		return false;
	if (size)
		*size = sb.st_size;
	return true;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static struct pf_store *open_ok(const char *path, enum pf_store_sync sync)
{
	struct pf_error err = {0};
	struct pf_store *st = pf_store_open(path, sync, &err);

	if (!st)
		fail_msg("open %s: %s", path, err.msg);
	assert_int_equal(err.code, 0);
	return st;
}

/* ---- open / migrate / reopen */

static void test_open_reopen(void **state)
{
	struct fx *f = *state;
	struct pf_store *st = open_ok(f->db, PF_STORE_SYNC_FULL);
	struct pf_config_version cv;
	uint8_t h[32];
	char role[16];
	char wal[160];
	int64_t v = 0;
	bool created = false;

	assert_true(pf_store_schema_latest() >= 1);
	assert_int_equal(pf_store_schema_version(st), pf_store_schema_latest());
	assert_string_equal(pf_store_last_error(st), "");
	fill_hash(h, 1);
	assert_int_equal(pf_store_token_add(st, h, "admin", "root", 1000), 0);
	assert_int_equal(pf_store_config_put(st, "base", "a: 1\n", 5, h, 2000, &v, &created), 0);
	assert_int_equal(v, 1);
	assert_true(created);

	/* WAL mode: the -wal file exists while a connection is open. */
	snprintf(wal, sizeof(wal), "%s-wal", f->db);
	assert_true(file_exists(wal, NULL));

	/* A second connection (the writer thread's) sees committed data. */
	struct pf_store *st2 = open_ok(f->db, PF_STORE_SYNC_NORMAL);
	assert_int_equal(pf_store_token_lookup(st2, h, role, sizeof(role)), 0);
	assert_string_equal(role, "admin");
	pf_store_close(st2);
	pf_store_close(st);

	/* Reopen: migrations are not re-run, data is kept. */
	st = open_ok(f->db, PF_STORE_SYNC_NORMAL);
	assert_int_equal(pf_store_schema_version(st), pf_store_schema_latest());
	assert_int_equal(pf_store_token_lookup(st, h, role, sizeof(role)), 0);
	assert_string_equal(role, "admin");
	assert_int_equal(pf_store_config_get(st, "base", 0, &cv), 0);
	assert_int_equal(cv.version, 1);
	assert_int_equal(cv.body_len, 5);
	assert_string_equal(cv.body, "a: 1\n");
	assert_int_equal(cv.created_ms, 2000);
	assert_memory_equal(cv.hash, h, 32);
	pf_config_version_release(&cv);
	pf_store_close(st);

	pf_store_close(NULL);
}

static void test_memory_db(void **state)
{
	struct pf_store *st = open_ok(":memory:", PF_STORE_SYNC_NORMAL);
	int64_t n = -1;

	assert_int_equal(pf_store_token_count(st, &n), 0);
	assert_int_equal(n, 0);
	pf_store_close(st);
}

/* Writes a big-endian u32 into the database header (user_version lives at offset 60). */
static void poke_header_u32(const char *path, off_t off, uint32_t v)
{
	uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
	int fd = open(path, O_WRONLY);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, b, 4, off), 4);
	assert_int_equal(fsync(fd), 0);
	close(fd);
}

static void test_too_new_refused(void **state)
{
	struct fx *f = *state;
	struct pf_store *st = open_ok(f->db, PF_STORE_SYNC_FULL);
	struct pf_error err = {0};
	char wal[160];

	pf_store_close(st);
	snprintf(wal, sizeof(wal), "%s-wal", f->db);
	assert_false(file_exists(wal, NULL)); /* checkpointed on close: the header is current */

	poke_header_u32(f->db, 60, (uint32_t)pf_store_schema_latest() + 7);
	errno = 0;
	st = pf_store_open(f->db, PF_STORE_SYNC_FULL, &err);
	assert_null(st);
	assert_int_equal(errno, ENOTSUP);
	assert_int_equal(err.code, -ENOTSUP);
	assert_non_null(strstr(err.msg, "newer"));
	print_message("too-new message: %s\n", err.msg);

	/* Left untouched: putting the version back makes it usable again. */
	poke_header_u32(f->db, 60, (uint32_t)pf_store_schema_latest());
	st = open_ok(f->db, PF_STORE_SYNC_FULL);
	pf_store_close(st);
}

/* ---- tokens */

static void test_tokens(void **state)
{
	struct fx *f = *state;
	struct pf_store *st = open_ok(f->db, PF_STORE_SYNC_FULL);
	uint8_t a[32], b[32], c[32];
	char role[16];
	char tiny[3];
	int64_t n = -1;

	fill_hash(a, 10);
	fill_hash(b, 11);
	fill_hash(c, 12);
	assert_int_equal(pf_store_token_count(st, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(pf_store_token_add(st, a, "admin", "alice", 1), 0);
	assert_int_equal(pf_store_token_add(st, b, "agent", "fleet", 2), 0);
	assert_int_equal(pf_store_token_add(st, a, "viewer", "dup", 3), -EEXIST);
	assert_non_null(strstr(pf_store_last_error(st), "exists"));
	assert_int_equal(pf_store_token_count(st, &n), 0);
	assert_int_equal(n, 2);

	assert_int_equal(pf_store_token_lookup(st, a, role, sizeof(role)), 0);
	assert_string_equal(role, "admin");
	assert_int_equal(pf_store_token_lookup(st, b, role, sizeof(role)), 0);
	assert_string_equal(role, "agent");
	assert_int_equal(pf_store_token_lookup(st, c, role, sizeof(role)), -ENOENT);
	assert_int_equal(pf_store_token_lookup(st, a, tiny, sizeof(tiny)), -ENOSPC);
	pf_store_close(st);
}

/* Token management (schema 5): public ids, find with the hash read back, revoke, touch, the
 * full audit row and its query by the token's id. */
static int count_tok(const struct pf_token_info *t, void *ud)
{
	(void)t;
	(*(int *)ud)++;
	return 0;
}

static int count_audit(const struct pf_audit_entry *e, void *ud)
{
	assert_string_equal(e->source, "10.0.0.9");
	(*(int *)ud)++;
	return 0;
}

static void test_token_management(void **state)
{
	struct fx *f = *state;
	struct pf_store *st = open_ok(f->db, PF_STORE_SYNC_FULL);
	uint8_t a[32], b[32];
	fill_hash(a, 20);
	fill_hash(b, 21);
	assert_int_equal(pf_store_token_add(st, a, "admin", "alice", 1), 0);
	struct pf_token_info t = {.created_ms = 5, .expires_ms = 99};
	snprintf(t.name, sizeof(t.name), "bot");
	snprintf(t.role, sizeof(t.role), "viewer");
	snprintf(t.created_by, sizeof(t.created_by), "alice");
	assert_int_equal(pf_store_token_create(st, b, &t), 0);
	assert_int_equal(strlen(t.id), PF_TOKEN_ID_LEN);
	assert_int_equal(pf_store_token_create(st, b, &t), -EEXIST);
	struct pf_token_info g;
	assert_int_equal(pf_store_token_find(st, b, &g), 0);
	assert_string_equal(g.id, t.id);
	assert_string_equal(g.created_by, "alice");
	assert_int_equal(g.expires_ms, 99);
	assert_memory_equal(g.hash, b, 32);
	assert_int_equal(pf_store_token_find(st, a, &g), 0);
	assert_string_not_equal(g.id, t.id);
	assert_int_equal(pf_store_token_touch(st, t.id, 1234), 0);
	assert_int_equal(pf_store_token_find(st, b, &g), 0);
	assert_int_equal(g.last_used_ms, 1234);
	int n = 0;
	assert_int_equal(pf_store_token_foreach(st, count_tok, &n), 0);
	assert_int_equal(n, 2);

	struct pf_audit_entry e = {.ts_ms = 7, .actor = "bot", .actor_id = t.id, .action = "x.y",
				   .target = "z", .source = "10.0.0.9", .status = 201};
	assert_int_equal(pf_store_audit_write(st, &e), 0);
	struct pf_audit_query q = {.actor = t.id, .limit = 10};
	n = 0;
	assert_int_equal(pf_store_audit_query(st, &q, count_audit, &n), 0);
	assert_int_equal(n, 1);
	q.action = "x";
	n = 0;
	assert_int_equal(pf_store_audit_query(st, &q, count_audit, &n), 0);
	assert_int_equal(n, 1);
	q.action = "x.";
	n = 0;
	assert_int_equal(pf_store_audit_query(st, &q, count_audit, &n), 0);
	assert_int_equal(n, 0);

	assert_int_equal(pf_store_token_revoke(st, t.id, &g), 0);
	assert_string_equal(g.name, "bot");
	assert_int_equal(pf_store_token_revoke(st, t.id, NULL), -ENOENT);
	assert_int_equal(pf_store_token_find(st, b, &g), -ENOENT);
	pf_store_close(st);
}

/* ---- configs */

struct ver_list {
	int64_t v[16];
	bool body_null[16];
	size_t n;
	int stop_after;
};

static int collect_versions(const struct pf_config_version *cv, void *ud)
{
	struct ver_list *l = ud;

	assert_true(l->n < 16);
	assert_string_equal(cv->name, "prof");
	l->v[l->n] = cv->version;
	l->body_null[l->n] = cv->body == NULL;
	l->n++;
	if (l->stop_after && (int)l->n == l->stop_after)
		return 42;
	return 0;
}

struct latest_list {
	char names[4][128];
	int64_t v[4];
	char bodies[4][32];
	size_t n;
};

static int collect_latest(const struct pf_config_version *cv, void *ud)
{
	struct latest_list *l = ud;

	assert_true(l->n < 4);
	assert_non_null(cv->body);
	assert_int_equal(strlen(cv->body), cv->body_len);
	snprintf(l->names[l->n], sizeof(l->names[0]), "%s", cv->name);
	snprintf(l->bodies[l->n], sizeof(l->bodies[0]), "%s", cv->body);
	l->v[l->n] = cv->version;
	l->n++;
	return 0;
}

static void test_config_versions(void **state)
{
	struct fx *f = *state;
	struct pf_store *st = open_ok(f->db, PF_STORE_SYNC_FULL);
	struct pf_config_version cv;
	uint8_t h1[32], h2[32];
	int64_t v = 0;
	bool created = true;
	char longname[200];

	fill_hash(h1, 1);
	fill_hash(h2, 2);
	assert_int_equal(pf_store_config_put(st, "prof", "one", 3, h1, 100, &v, &created), 0);
	assert_int_equal(v, 1);
	assert_true(created);
	/* Same hash as the latest: no new version. */
	assert_int_equal(pf_store_config_put(st, "prof", "one", 3, h1, 101, &v, &created), 0);
	assert_int_equal(v, 1);
	assert_false(created);
	assert_int_equal(pf_store_config_put(st, "prof", "two!", 4, h2, 200, &v, &created), 0);
	assert_int_equal(v, 2);
	assert_true(created);
	/* Going back to an older body is a new version: only the latest is compared. */
	assert_int_equal(pf_store_config_put(st, "prof", "one", 3, h1, 300, &v, &created), 0);
	assert_int_equal(v, 3);
	assert_true(created);
	/* Versions are per name; NULL out-parameters are fine; an empty body is allowed. */
	assert_int_equal(pf_store_config_put(st, "alpha", NULL, 0, h2, 400, NULL, NULL), 0);
	assert_int_equal(pf_store_config_put(st, "alpha", "x", 1, h1, 401, &v, NULL), 0);
	assert_int_equal(v, 2);

	/* latest */
	assert_int_equal(pf_store_config_get(st, "prof", 0, &cv), 0);
	assert_int_equal(cv.version, 3);
	assert_string_equal(cv.body, "one");
	assert_int_equal(cv.created_ms, 300);
	assert_memory_equal(cv.hash, h1, 32);
	pf_config_version_release(&cv);
	assert_null(cv.body);
	/* specific */
	assert_int_equal(pf_store_config_get(st, "prof", 2, &cv), 0);
	assert_int_equal(cv.version, 2);
	assert_string_equal(cv.name, "prof");
	assert_string_equal(cv.body, "two!");
	assert_int_equal(cv.body_len, 4);
	assert_memory_equal(cv.hash, h2, 32);
	pf_config_version_release(&cv);
	assert_int_equal(pf_store_config_get(st, "alpha", 1, &cv), 0);
	assert_string_equal(cv.body, "");
	assert_int_equal(cv.body_len, 0);
	pf_config_version_release(&cv);
	/* not found */
	assert_int_equal(pf_store_config_get(st, "prof", 9, &cv), -ENOENT);
	assert_int_equal(pf_store_config_get(st, "nope", 0, &cv), -ENOENT);
	assert_int_equal(pf_store_config_get(st, "prof", -1, &cv), -EINVAL);

	/* versions: newest first, no body */
	struct ver_list l = {0};
	assert_int_equal(pf_store_config_versions(st, "prof", collect_versions, &l), 0);
	assert_int_equal(l.n, 3);
	assert_int_equal(l.v[0], 3);
	assert_int_equal(l.v[1], 2);
	assert_int_equal(l.v[2], 1);
	assert_true(l.body_null[0] && l.body_null[1] && l.body_null[2]);
	memset(&l, 0, sizeof(l));
	l.stop_after = 2;
	assert_int_equal(pf_store_config_versions(st, "prof", collect_versions, &l), 42);
	assert_int_equal(l.n, 2);
	memset(&l, 0, sizeof(l));
	assert_int_equal(pf_store_config_versions(st, "nope", collect_versions, &l), -ENOENT);
	assert_int_equal(l.n, 0);

	/* latest of every name, in name order, body loaded */
	struct latest_list ll = {0};
	assert_int_equal(pf_store_config_foreach_latest(st, collect_latest, &ll), 0);
	assert_int_equal(ll.n, 2);
	assert_string_equal(ll.names[0], "alpha");
	assert_int_equal(ll.v[0], 2);
	assert_string_equal(ll.bodies[0], "x");
	assert_string_equal(ll.names[1], "prof");
	assert_int_equal(ll.v[1], 3);
	assert_string_equal(ll.bodies[1], "one");

	/* bad names */
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(pf_store_config_put(st, longname, "x", 1, h1, 1, &v, NULL), -EINVAL);
	assert_int_equal(pf_store_config_put(st, "", "x", 1, h1, 1, &v, NULL), -EINVAL);
	pf_store_close(st);
}

/* Two processes add versions of one name at once: max + 1 inside BEGIN IMMEDIATE means every
 * version number is taken exactly once and none is lost. */
#define RACE_PUTS 100

static int race_puts(const char *db, unsigned seed_base)
{
	struct pf_store *st = pf_store_open(db, PF_STORE_SYNC_NORMAL, NULL);
	int rc = 0;

	if (!st)
		return -EIO;
	for (unsigned i = 0; i < RACE_PUTS && rc == 0; i++) {
		uint8_t h[32];
		bool created = false;
		fill_hash(h, seed_base + i);
		rc = pf_store_config_put(st, "race", "b", 1, h, i, NULL, &created);
		if (rc == 0 && !created)
			rc = -EEXIST;
	}
	pf_store_close(st);
	return rc;
}

static int check_sequence(const struct pf_config_version *cv, void *ud)
{
	int64_t *expect = ud;

	if (cv->version != *expect)
		return -1;
	(*expect)--;
	return 0;
}

static void test_config_put_race(void **state)
{
	struct fx *f = *state;
	struct pf_store *st = open_ok(f->db, PF_STORE_SYNC_NORMAL); /* schema exists first */
	int status = 0;
	pid_t pid;

	pf_store_close(st);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(race_puts(f->db, 1000) == 0 ? 0 : 1);
	assert_int_equal(race_puts(f->db, 5000), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);

	st = open_ok(f->db, PF_STORE_SYNC_NORMAL);
	int64_t expect = 2 * RACE_PUTS;
	assert_int_equal(pf_store_config_versions(st, "race", check_sequence, &expect), 0);
	assert_int_equal(expect, 0);
	pf_store_close(st);
}

/* ---- assignments */

struct asg_list {
	char names[4][128];
	size_t n;
};

static int collect_asg(const struct pf_assignment *a, void *ud)
{
	struct asg_list *l = ud;

	assert_true(l->n < 4);
	snprintf(l->names[l->n++], sizeof(l->names[0]), "%s", a->name);
	return 0;
}

static void test_assignments(void **state)
{
	struct fx *f = *state;
	struct pf_store *st = open_ok(f->db, PF_STORE_SYNC_FULL);
	struct pf_assignment a = {0}, out;
	struct asg_list l = {0};

	snprintf(a.name, sizeof(a.name), "web");
	snprintf(a.selector, sizeof(a.selector), "service.name=web,env in (prod)");
	snprintf(a.config, sizeof(a.config), "prof");
	a.priority = 10;
	a.updated_ms = 111;
	assert_int_equal(pf_store_assignment_put(st, &a), 0);
	snprintf(a.name, sizeof(a.name), "all");
	a.selector[0] = '\0';
	a.priority = -5;
	assert_int_equal(pf_store_assignment_put(st, &a), 0);

	assert_int_equal(pf_store_assignment_get(st, "web", &out), 0);
	assert_string_equal(out.name, "web");
	assert_string_equal(out.selector, "service.name=web,env in (prod)");
	assert_string_equal(out.config, "prof");
	assert_int_equal(out.priority, 10);
	assert_int_equal(out.updated_ms, 111);
	assert_int_equal(pf_store_assignment_get(st, "all", &out), 0);
	assert_int_equal(out.priority, -5);
	assert_string_equal(out.selector, "");

	/* update in place */
	snprintf(a.name, sizeof(a.name), "web");
	snprintf(a.selector, sizeof(a.selector), "service.name=web");
	snprintf(a.config, sizeof(a.config), "prof2");
	a.priority = 20;
	a.updated_ms = 222;
	assert_int_equal(pf_store_assignment_put(st, &a), 0);
	assert_int_equal(pf_store_assignment_get(st, "web", &out), 0);
	assert_string_equal(out.selector, "service.name=web");
	assert_string_equal(out.config, "prof2");
	assert_int_equal(out.priority, 20);
	assert_int_equal(out.updated_ms, 222);

	assert_int_equal(pf_store_assignment_foreach(st, collect_asg, &l), 0);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.names[0], "all");
	assert_string_equal(l.names[1], "web");

	assert_int_equal(pf_store_assignment_delete(st, "web"), 0);
	assert_int_equal(pf_store_assignment_delete(st, "web"), -ENOENT);
	assert_int_equal(pf_store_assignment_get(st, "web", &out), -ENOENT);
	memset(&l, 0, sizeof(l));
	assert_int_equal(pf_store_assignment_foreach(st, collect_asg, &l), 0);
	assert_int_equal(l.n, 1);

	/* not NUL-terminated within its array */
	memset(a.name, 'x', sizeof(a.name));
	assert_int_equal(pf_store_assignment_put(st, &a), -EINVAL);
	pf_store_close(st);
}

/* ---- agents */

#define N_AGENTS 15000

struct agent_check {
	size_t n;
	size_t connected;
	int64_t min_first_seen;
	int64_t max_last_seen;
	int64_t min_last_seen;
	bool saw_sample;
	bool saw_sparse;
};

static void make_uid(uint8_t uid[16], unsigned i)
{
	memset(uid, 0, 16);
	uid[0] = 0x01;
	uid[12] = (uint8_t)(i >> 24);
	uid[13] = (uint8_t)(i >> 16);
	uid[14] = (uint8_t)(i >> 8);
	uid[15] = (uint8_t)i;
}

static int check_agent(const struct pf_agent_row *r, void *ud)
{
	struct agent_check *c = ud;
	uint8_t uid[16], h[32];

	c->n++;
	c->connected += r->connected;
	if (c->n == 1 || r->first_seen_ms < c->min_first_seen)
		c->min_first_seen = r->first_seen_ms;
	if (r->last_seen_ms > c->max_last_seen)
		c->max_last_seen = r->last_seen_ms;
	if (c->n == 1 || r->last_seen_ms < c->min_last_seen)
		c->min_last_seen = r->last_seen_ms;
	make_uid(uid, 7);
	if (!memcmp(uid, r->uid, 16)) {
		c->saw_sample = true;
		assert_string_equal(r->attributes_json, "{\"service.name\":\"svc-7\"}");
		assert_int_equal(r->capabilities, UINT64_C(0x8000000000000fff));
		assert_string_equal(r->health_json, "{\"healthy\":true}");
		assert_string_equal(r->effective_config, "cfg body 7");
		assert_true(r->has_effective_hash);
		fill_hash(h, 7);
		assert_memory_equal(r->effective_hash, h, 32);
		assert_string_equal(r->config_name, "prof");
		assert_int_equal(r->config_version, 3);
		assert_true(r->has_remote_hash);
		fill_hash(h, 8);
		assert_memory_equal(r->remote_hash, h, 32);
		assert_int_equal(r->remote_status, 2);
		assert_string_equal(r->remote_error, "bad");
	}
	make_uid(uid, 8);
	if (!memcmp(uid, r->uid, 16)) {
		c->saw_sparse = true;
		assert_null(r->health_json);
		assert_null(r->effective_config);
		assert_false(r->has_effective_hash);
		assert_null(r->config_name);
		assert_false(r->has_remote_hash);
		assert_null(r->remote_error);
	}
	return 0;
}

static void fill_agents(struct pf_agent_row *rows, char (*attrs)[64], int64_t first, int64_t last)
{
	for (unsigned i = 0; i < N_AGENTS; i++) {
		struct pf_agent_row *r = &rows[i];
		bool sparse = (i % 2) == 0;

		memset(r, 0, sizeof(*r));
		make_uid(r->uid, i);
		snprintf(attrs[i], 64, "{\"service.name\":\"svc-%u\"}", i);
		r->attributes_json = attrs[i];
		r->capabilities = UINT64_C(0x8000000000000fff);
		r->connected = true;
		r->first_seen_ms = first;
		r->last_seen_ms = last;
		if (sparse)
			continue;
		r->health_json = "{\"healthy\":true}";
		r->effective_config = i == 7 ? "cfg body 7" : "cfg body";
		r->has_effective_hash = true;
		fill_hash(r->effective_hash, 7);
		r->config_name = "prof";
		r->config_version = 3;
		r->has_remote_hash = true;
		fill_hash(r->remote_hash, 8);
		r->remote_status = 2;
		r->remote_error = "bad";
	}
}

static void test_agents(void **state)
{
	struct fx *f = *state;
	struct pf_store *st = open_ok(f->db, PF_STORE_SYNC_NORMAL);
	struct pf_agent_row *rows = calloc(N_AGENTS, sizeof(*rows));
	char(*attrs)[64] = calloc(N_AGENTS, 64);
	struct agent_check c = {0};
	uint8_t uid[16];
	double t0, t1;

	assert_non_null(rows);
	assert_non_null(attrs);
	assert_int_equal(pf_store_agents_upsert(st, rows, 0), 0);

	fill_agents(rows, attrs, 1000, 2000);
	t0 = now_ms();
	assert_int_equal(pf_store_agents_upsert(st, rows, N_AGENTS), 0);
	t1 = now_ms();
	print_message("bench: agents_upsert %d new rows (sync=NORMAL, 1 tx): %.1f ms\n", N_AGENTS,
		      t1 - t0);

	assert_int_equal(pf_store_agents_foreach(st, check_agent, &c), 0);
	assert_int_equal(c.n, N_AGENTS);
	assert_int_equal(c.connected, N_AGENTS);
	assert_true(c.saw_sample && c.saw_sparse);

	/* Upsert again with a later first_seen: the stored first_seen stays. */
	fill_agents(rows, attrs, 5000, 6000);
	t0 = now_ms();
	assert_int_equal(pf_store_agents_upsert(st, rows, N_AGENTS), 0);
	t1 = now_ms();
	print_message("bench: agents_upsert %d existing rows (sync=NORMAL, 1 tx): %.1f ms\n",
		      N_AGENTS, t1 - t0);
	memset(&c, 0, sizeof(c));
	t0 = now_ms();
	assert_int_equal(pf_store_agents_foreach(st, check_agent, &c), 0);
	t1 = now_ms();
	print_message("bench: agents_foreach %zu rows: %.1f ms\n", c.n, t1 - t0);
	assert_int_equal(c.n, N_AGENTS);
	assert_int_equal(c.min_first_seen, 1000);
	assert_int_equal(c.max_last_seen, 6000);

	/* Controller start: nothing connected. */
	assert_int_equal(pf_store_agents_mark_all_disconnected(st), 0);
	memset(&c, 0, sizeof(c));
	assert_int_equal(pf_store_agents_foreach(st, check_agent, &c), 0);
	assert_int_equal(c.connected, 0);

	make_uid(uid, 7);
	assert_int_equal(pf_store_agent_delete(st, uid), 0);
	assert_int_equal(pf_store_agent_delete(st, uid), -ENOENT);
	memset(&c, 0, sizeof(c));
	assert_int_equal(pf_store_agents_foreach(st, check_agent, &c), 0);
	assert_int_equal(c.n, N_AGENTS - 1);
	assert_false(c.saw_sample);

	/* Survives a reopen on the other connection kind. */
	pf_store_close(st);
	st = open_ok(f->db, PF_STORE_SYNC_FULL);
	memset(&c, 0, sizeof(c));
	assert_int_equal(pf_store_agents_foreach(st, check_agent, &c), 0);
	assert_int_equal(c.n, N_AGENTS - 1);

	pf_store_close(st);
	free(attrs);
	free(rows);
}

/* The last_seen-only write changes that column of known rows and nothing else. */
static void test_agents_set_seen(void **state)
{
	struct fx *f = *state;
	struct pf_store *st = open_ok(f->db, PF_STORE_SYNC_NORMAL);
	struct pf_agent_row *rows = calloc(N_AGENTS + 1, sizeof(*rows));
	char(*attrs)[64] = calloc(N_AGENTS, 64);
	struct agent_check c = {0};

	assert_non_null(rows);
	assert_non_null(attrs);
	fill_agents(rows, attrs, 1000, 2000);
	assert_int_equal(pf_store_agents_upsert(st, rows, N_AGENTS), 0);
	assert_int_equal(pf_store_agents_set_seen(st, rows, 0), 0);
	assert_int_equal(pf_store_agents_set_seen(st, NULL, 1), -EINVAL);

	/* Only uid and last_seen_ms count: the other fields of these rows are zeroed. */
	for (unsigned i = 0; i <= N_AGENTS; i++) {
		memset(&rows[i], 0, sizeof(rows[i]));
		make_uid(rows[i].uid, i); /* i == N_AGENTS: not stored */
		rows[i].last_seen_ms = 9000 + i;
	}
	double t0 = now_ms();
	assert_int_equal(pf_store_agents_set_seen(st, rows, N_AGENTS + 1), 0);
	print_message("bench: agents_set_seen %d rows (sync=NORMAL, 1 tx): %.1f ms\n", N_AGENTS,
		      now_ms() - t0);

	assert_int_equal(pf_store_agents_foreach(st, check_agent, &c), 0);
	assert_int_equal(c.n, N_AGENTS); /* the unknown uid was not inserted */
	assert_int_equal(c.connected, N_AGENTS);
	assert_true(c.saw_sample && c.saw_sparse); /* every other column as upserted */
	assert_int_equal(c.min_first_seen, 1000);
	assert_int_equal(c.min_last_seen, 9000); /* every stored row got its own value */
	assert_int_equal(c.max_last_seen, 9000 + N_AGENTS - 1);

	pf_store_close(st);
	free(attrs);
	free(rows);
}

/* A callback may write through the same connection, but not re-enter its own iterator. */
static int reenter_cb(const struct pf_assignment *a, void *ud)
{
	struct pf_store *st = ud;
	struct pf_assignment b;

	assert_int_equal(pf_store_assignment_foreach(st, reenter_cb, st), -EBUSY);
	assert_int_equal(pf_store_assignment_get(st, a->name, &b), 0);
	struct pf_audit_entry e = {.ts_ms = 1, .actor = "test", .action = "visit", .target = a->name};
	assert_int_equal(pf_store_audit_write(st, &e), 0);
	return 0;
}

static void test_reentrancy(void **state)
{
	struct fx *f = *state;
	struct pf_store *st = open_ok(f->db, PF_STORE_SYNC_FULL);
	struct pf_assignment a = {.name = "x", .config = "c"};

	assert_int_equal(pf_store_assignment_put(st, &a), 0);
	assert_int_equal(pf_store_assignment_foreach(st, reenter_cb, st), 0);
	pf_store_close(st);
}

/* ---- audit */

struct audit_list {
	int64_t ids[8];
	char actions[8][16];
	bool detail_null[8];
	size_t n;
};

static int collect_audit(const struct pf_audit_entry *e, void *ud)
{
	struct audit_list *l = ud;

	assert_true(l->n < 8);
	assert_string_equal(e->actor, "alice");
	l->ids[l->n] = e->id;
	snprintf(l->actions[l->n], sizeof(l->actions[0]), "%s", e->action);
	l->detail_null[l->n] = e->detail == NULL;
	l->n++;
	return 0;
}

static void test_audit(void **state)
{
	struct fx *f = *state;
	struct pf_store *st = open_ok(f->db, PF_STORE_SYNC_FULL);
	struct audit_list l = {0};
	const char *acts[5] = {"a0", "a1", "a2", "a3", "a4"};

	for (int i = 0; i < 5; i++) {
		struct pf_audit_entry e = {.ts_ms = 100 + i,
					   .actor = "alice",
					   .action = acts[i],
					   .target = "config/prof",
					   .detail = i == 2 ? NULL : "{\"v\":1}"};
		assert_int_equal(pf_store_audit_write(st, &e), 0);
	}
	struct pf_audit_entry bad = {.ts_ms = 1, .action = "x"};
	assert_int_equal(pf_store_audit_write(st, &bad), -EINVAL);

	struct pf_audit_query all = {.limit = SIZE_MAX};
	assert_int_equal(pf_store_audit_query(st, &all, collect_audit, &l), 0);
	assert_int_equal(l.n, 5);
	for (size_t i = 0; i < 5; i++) {
		assert_string_equal(l.actions[i], acts[4 - i]);
		if (i)
			assert_true(l.ids[i] < l.ids[i - 1]);
	}
	assert_true(l.detail_null[2]);
	assert_false(l.detail_null[0]);

	/* paging: 2 newest, then the 2 after those */
	int64_t after = l.ids[1];
	memset(&l, 0, sizeof(l));
	struct pf_audit_query page = {.limit = 2};
	assert_int_equal(pf_store_audit_query(st, &page, collect_audit, &l), 0);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.actions[1], "a3");
	memset(&l, 0, sizeof(l));
	page.before_id = after;
	assert_int_equal(pf_store_audit_query(st, &page, collect_audit, &l), 0);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.actions[0], "a2");
	assert_string_equal(l.actions[1], "a1");
	pf_store_close(st);
}

/* ---- crash safety and corruption */

static void test_crash_child(void **state)
{
	struct fx *f = *state;
	struct pf_config_version cv;
	char wal[160];
	off_t wal_size = 0;
	int status = 0;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		/* Child: commit a config and die without closing (no checkpoint, no cleanup). */
		uint8_t h[32];
		int64_t v = 0;
		struct pf_store *st = pf_store_open(f->db, PF_STORE_SYNC_FULL, NULL);
		fill_hash(h, 77);
		if (!st || pf_store_config_put(st, "crash", "kept", 4, h, 1, &v, NULL) != 0 ||
		    v != 1)
			_exit(1);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);

	/* The commit sits only in the WAL: the reopen has to recover it. */
	snprintf(wal, sizeof(wal), "%s-wal", f->db);
	assert_true(file_exists(wal, &wal_size));
	assert_true(wal_size > 0);

	struct pf_store *st = open_ok(f->db, PF_STORE_SYNC_FULL);
	assert_int_equal(pf_store_config_get(st, "crash", 0, &cv), 0);
	assert_int_equal(cv.version, 1);
	assert_string_equal(cv.body, "kept");
	pf_config_version_release(&cv);
	pf_store_close(st);
}

static void write_file(const char *path, const void *data, size_t len, off_t off, bool trunc)
{
	int fd = open(path, O_WRONLY | O_CREAT | (trunc ? O_TRUNC : 0), 0600);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, data, len, off), (ssize_t)len);
	close(fd);
}

static void test_corrupt_not_a_db(void **state)
{
	struct fx *f = *state;
	struct pf_error err = {0};
	char junk[8192];

	memset(junk, 0x5a, sizeof(junk));
	memcpy(junk, "this is not sqlite", 18);
	write_file(f->db, junk, sizeof(junk), 0, true);
	errno = 0;
	assert_null(pf_store_open(f->db, PF_STORE_SYNC_FULL, &err));
	assert_int_equal(errno, EIO);
	assert_int_equal(err.code, -EIO);
	assert_non_null(strstr(err.msg, "not a database"));
	print_message("not-a-db message: %s\n", err.msg);
}

static int count_agents(const struct pf_agent_row *r, void *ud)
{
	(*(size_t *)ud)++;
	return 0;
}

/* A database whose header and schema page are fine but whose table pages are garbage: open
 * works, every access fails cleanly with -EIO. */
static void test_corrupt_pages(void **state)
{
	struct fx *f = *state;
	struct pf_store *st = open_ok(f->db, PF_STORE_SYNC_FULL);
	struct pf_agent_row row = {.uid = {9}, .attributes_json = "{}"};
	uint8_t h[32];
	int64_t n = 0;
	size_t count = 0;
	off_t size = 0;
	char junk[4096];

	fill_hash(h, 3);
	assert_int_equal(pf_store_token_add(st, h, "admin", "x", 1), 0);
	assert_int_equal(pf_store_agents_upsert(st, &row, 1), 0);
	pf_store_close(st);

	assert_true(file_exists(f->db, &size));
	assert_true(size > 8192);
	/* The schema spans more than page 1: keep every page of sqlite_schema (listed by the
	 * sqlite3 shell's dbstat table, as install-deps.sh installs it) and trash the rest. */
	bool schema_page[256] = {false};
	char cmd[512];
	snprintf(cmd, sizeof(cmd),
		 "sqlite3 '%s' \"SELECT pageno FROM dbstat WHERE name = 'sqlite_schema'\"", f->db);
	FILE *pp = system("command -v sqlite3 >/dev/null 2>&1") == 0 ? popen(cmd, "r") : NULL;
	if (!pp)
		skip();
	long pg;
	size_t n_schema = 0;
	while (fscanf(pp, "%ld", &pg) == 1)
		if (pg > 0 && pg < 256) {
			schema_page[pg] = true;
			n_schema++;
		}
	if (pclose(pp) != 0 && n_schema == 0)
		skip(); /* a sqlite3 shell built without dbstat */
	assert_true(schema_page[1]);
	memset(junk, 0xa5, sizeof(junk));
	for (off_t off = 4096; off < size; off += 4096)
		if (off / 4096 + 1 >= 256 || !schema_page[off / 4096 + 1])
			write_file(f->db, junk, sizeof(junk), off, false);

	st = open_ok(f->db, PF_STORE_SYNC_FULL);
	assert_int_equal(pf_store_token_count(st, &n), -EIO);
	assert_non_null(strstr(pf_store_last_error(st), "malformed"));
	print_message("corrupt-page message: %s\n", pf_store_last_error(st));
	assert_int_equal(pf_store_agents_foreach(st, count_agents, &count), -EIO);
	assert_int_equal(pf_store_config_put(st, "c", "x", 1, h, 1, NULL, NULL), -EIO);
	assert_int_equal(pf_store_agents_upsert(st, &row, 1), -EIO);
	pf_store_close(st);

	/* Trash the schema page too: open refuses cleanly. */
	struct pf_error err = {0};
	write_file(f->db, junk, sizeof(junk) - 100, 100, false);
	assert_null(pf_store_open(f->db, PF_STORE_SYNC_FULL, &err));
	assert_int_equal(err.code, -EIO);
	print_message("corrupt-schema message: %s\n", err.msg);
}

/* ---- incident captures (schema 4) */

struct cap_seen {
	char ids[8][80];
	size_t n;
	char state[32];
	int64_t finished_ms;
	size_t n_agents, n_ids;
	char agent_state[32], error[64];
};

static int cap_cb(const struct pf_capture_row *c, void *ud)
{
	struct cap_seen *s = ud;
	if (s->n < 8)
		snprintf(s->ids[s->n++], sizeof(s->ids[0]), "%s", c->id);
	snprintf(s->state, sizeof(s->state), "%s", c->state);
	s->finished_ms = c->finished_ms;
	return 0;
}

static int cap_agent_cb(const struct pf_capture_agent_row *a, void *ud)
{
	struct cap_seen *s = ud;
	if (s->n_agents++ == 0) {
		snprintf(s->agent_state, sizeof(s->agent_state), "%s", a->state);
		snprintf(s->error, sizeof(s->error), "%s", a->error);
		s->n_ids = a->n_profile_ids;
	}
	return 0;
}

static void test_captures(void **state)
{
	struct fx *f = *state;
	struct pf_store *st = open_ok(f->db, PF_STORE_SYNC_FULL);
	const char *ids[3] = {"0190-a", "0190-b", "0190-c"};
	uint8_t pids[2][16] = {{1}, {2}};
	for (int i = 0; i < 3; i++) {
		struct pf_capture_row c = {.id = ids[i], .state = i == 2 ? "done" : "running",
					   .created_ms = 10 + i, .deadline_ms = 100,
					   .created_by = "admin", .request_json = "{}",
					   .agents_matched = 2};
		struct pf_capture_agent_row a[2] = {
		    {.capture = ids[i], .uid = {1}, .state = "pending"},
		    {.capture = ids[i], .uid = {2}, .state = "unreachable", .error = "not connected"},
		};
		assert_int_equal(pf_store_captures_save(st, &c, 1, a, 2), 0);
	}
	/* an update: capture row and one agent row */
	struct pf_capture_row c = {.id = "0190-a", .state = "partial", .created_ms = 10,
				   .finished_ms = 50, .deadline_ms = 100, .created_by = "admin",
				   .request_json = "{}", .agents_matched = 2};
	struct pf_capture_agent_row a = {.capture = "0190-a", .uid = {1}, .state = "done",
					 .n_profile_ids = 2, .profile_ids = pids[0]};
	assert_int_equal(pf_store_captures_save(st, &c, 1, &a, 1), 0);
	struct cap_seen s = {0};
	assert_int_equal(pf_store_capture_get(st, "0190-a", cap_cb, cap_agent_cb, &s), 0);
	assert_string_equal(s.state, "partial");
	assert_int_equal(s.finished_ms, 50);
	assert_int_equal(s.n_agents, 2);
	assert_string_equal(s.agent_state, "done");
	assert_int_equal(s.n_ids, 2);
	assert_int_equal(pf_store_capture_get(st, "nope", cap_cb, NULL, &s), -ENOENT);

	/* lists: newest id first, by state, unfinished only, after a cursor, limited */
	memset(&s, 0, sizeof(s));
	struct pf_capture_query q = {0};
	assert_int_equal(pf_store_captures_foreach(st, &q, cap_cb, &s), 0);
	assert_int_equal(s.n, 3);
	assert_string_equal(s.ids[0], "0190-c");
	memset(&s, 0, sizeof(s));
	q = (struct pf_capture_query){.unfinished = true};
	assert_int_equal(pf_store_captures_foreach(st, &q, cap_cb, &s), 0);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.ids[0], "0190-b");
	memset(&s, 0, sizeof(s));
	q = (struct pf_capture_query){.before_id = "0190-c", .limit = 1};
	assert_int_equal(pf_store_captures_foreach(st, &q, cap_cb, &s), 0);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.ids[0], "0190-b");
	memset(&s, 0, sizeof(s));
	q = (struct pf_capture_query){.state = "done"};
	assert_int_equal(pf_store_captures_foreach(st, &q, cap_cb, &s), 0);
	assert_int_equal(s.n, 1);

	/* all or nothing: an agent row of an unknown capture fails the whole save */
	struct pf_capture_agent_row orphan = {.capture = "0190-zz", .uid = {3}, .state = "done"};
	c.state = "failed";
	assert_int_equal(pf_store_captures_save(st, &c, 1, &orphan, 1), -EIO);
	memset(&s, 0, sizeof(s));
	assert_int_equal(pf_store_capture_get(st, "0190-a", cap_cb, NULL, &s), 0);
	assert_string_equal(s.state, "partial");
	pf_store_close(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
	    T(test_open_reopen),   T(test_memory_db),	    T(test_too_new_refused),
	    T(test_tokens),	   T(test_token_management), T(test_config_versions), T(test_config_put_race),
	    T(test_assignments),   T(test_agents),	    T(test_reentrancy),
	    T(test_audit),	   T(test_crash_child),	    T(test_corrupt_not_a_db),
	    T(test_corrupt_pages), T(test_captures), T(test_agents_set_seen),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
