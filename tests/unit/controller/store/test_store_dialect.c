/* test_store_dialect.c — the store's dialect layer without a database server: placeholder
 * rewriting, the one migration list (every step has both forms, the PostgreSQL form has no
 * SQLite-only word and creates/alters the same fleet tables and columns), URL checks and the
 * error of an unreachable PostgreSQL. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cmocka.h>

#include "store.h"
#include "store_dialect.h"

static void test_placeholders(void **state)
{
	char out[128];
	(void)state;
	assert_int_equal(
	    store_sql_to_pg("SELECT a FROM t WHERE x = ?1 AND y = ?12", out, sizeof(out)),
	    (int)strlen("SELECT a FROM t WHERE x = $1 AND y = $12"));
	assert_string_equal(out, "SELECT a FROM t WHERE x = $1 AND y = $12");
	/* Inside quotes nothing changes. */
	assert_true(store_sql_to_pg("SELECT '?1', \"a?2\" FROM t WHERE b = ?2", out, sizeof(out)) >
		    0);
	assert_string_equal(out, "SELECT '?1', \"a?2\" FROM t WHERE b = $2");
	/* An unnumbered placeholder has no PostgreSQL form; an open quote is an error. */
	assert_int_equal(store_sql_to_pg("SELECT ? FROM t", out, sizeof(out)), -EINVAL);
	assert_int_equal(store_sql_to_pg("SELECT 'abc", out, sizeof(out)), -EINVAL);
	assert_int_equal(store_sql_to_pg("SELECT 1234567890", out, 8), -ENOSPC);
	assert_int_equal(store_sql_to_pg("", out, sizeof(out)), 0);
	assert_string_equal(out, "");
}

static void test_unportable(void **state)
{
	(void)state;
	assert_null(store_sql_pg_unportable("CREATE TABLE t (a BYTEA, b BIGINT)"));
	assert_string_equal(store_sql_pg_unportable("CREATE TABLE t (a BLOB)"), "BLOB");
	assert_string_equal(store_sql_pg_unportable("CREATE TABLE t (a INT) STRICT"), "STRICT");
	assert_string_equal(store_sql_pg_unportable("CREATE TABLE t (a INT) without rowid"),
			    "without");
	assert_string_equal(store_sql_pg_unportable("SELECT lower(hex(randomblob(8)))"), "hex");
	assert_string_equal(store_sql_pg_unportable("INSERT OR REPLACE INTO t VALUES (1)"),
			    "REPLACE");
	assert_string_equal(store_sql_pg_unportable("SELECT a FROM t WHERE b = ?1"), "?");
	/* Words inside string literals do not count. */
	assert_null(store_sql_pg_unportable("SELECT 'STRICT BLOB' FROM t"));
}

/* The fleet tables: in both dialects. The profile store's tables stay in SQLite only. */
static const char *const fleet_tables[] = {
    "tokens",	      "configs",  "assignments",    "agents",	  "audit",	    "captures",
    "capture_agents", "rollouts", "rollout_agents", "agent_pins", "config_serving",
    "replicas",       "commands",
};

static bool is_fleet(const char *name, size_t n)
{
	for (size_t i = 0; i < sizeof(fleet_tables) / sizeof(fleet_tables[0]); i++)
		if (strlen(fleet_tables[i]) == n && strncmp(fleet_tables[i], name, n) == 0)
			return true;
	return false;
}

/* Every "CREATE TABLE x" and "ALTER TABLE x ADD COLUMN c" of a fleet table in the SQLite
 * step has its twin in the PostgreSQL step; the PostgreSQL step creates nothing else. */
static void check_twins(const char *from, const char *to, size_t step, bool only_fleet)
{
	static const char *const verbs[] = {"CREATE TABLE ", "ALTER TABLE "};
	for (size_t v = 0; v < 2; v++) {
		for (const char *p = strstr(from, verbs[v]); p; p = strstr(p + 1, verbs[v])) {
			const char *name = p + strlen(verbs[v]);
			size_t n = strcspn(name, " (");
			char want[160];
			if (!is_fleet(name, n)) {
				if (only_fleet)
					fail_msg(
					    "step %zu: PostgreSQL touches non-fleet table %.*s",
					    step, (int)n, name);
				continue;
			}
			if (v == 0) {
				snprintf(want, sizeof(want), "CREATE TABLE %.*s ", (int)n, name);
			} else {
				const char *col = strstr(name, "ADD COLUMN ");
				assert_non_null(col);
				col += strlen("ADD COLUMN ");
				snprintf(want, sizeof(want), "ALTER TABLE %.*s ADD COLUMN %.*s ",
					 (int)n, name, (int)strcspn(col, " "), col);
			}
			if (!strstr(to, want))
				fail_msg("step %zu: '%s' missing on the other side", step, want);
		}
	}
}

static void test_migration_list(void **state)
{
	size_t n;
	const struct store_migration *m = store_migrations(&n);
	(void)state;
	assert_int_equal((int)n, pf_store_schema_latest());
	for (size_t i = 0; i < n; i++) {
		assert_non_null(m[i].sqlite);
		assert_non_null(m[i].pg);
		assert_true(m[i].sqlite[0]);
		const char *bad = store_sql_pg_unportable(m[i].pg);
		if (bad)
			fail_msg("step %zu: PostgreSQL form has the SQLite-only '%s'", i + 1, bad);
		check_twins(m[i].sqlite, m[i].pg, i + 1, false);
		check_twins(m[i].pg, m[i].sqlite, i + 1, true);
	}
	/* Steps 1, 4, 5 and 7 carry fleet tables; 2, 3 and 6 only the profile store. */
	assert_true(m[0].pg[0] && m[3].pg[0] && m[4].pg[0] && m[6].pg[0]);
	assert_false(m[1].pg[0] || m[2].pg[0] || m[5].pg[0]);
}

static void test_urls(void **state)
{
	(void)state;
	assert_true(pf_store_url_is_postgres("postgres://u@h/db"));
	assert_true(pf_store_url_is_postgres("postgresql://h:5433/db?sslmode=require"));
	assert_false(pf_store_url_is_postgres("sqlite:///x"));
	assert_false(pf_store_url_is_postgres("/var/lib/profleet/fleet.db"));
	assert_false(pf_store_url_is_postgres(NULL));
}

/* A port nobody listens on: open fails at once with EAGAIN and a message that names it. */
static void test_unreachable(void **state)
{
	char dir[] = "/tmp/pf_dialect_XXXXXX", db[64], url[96];
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct pf_error err = {0};
	(void)state;

	assert_non_null(mkdtemp(dir));
	snprintf(db, sizeof(db), "%s/fleet.db", dir);
	/* A port that was free a moment ago (bound, not listening, then closed). */
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	close(fd);
	snprintf(url, sizeof(url), "postgres://nobody@127.0.0.1:%u/x", ntohs(a.sin_port));
	errno = 0;
	assert_null(pf_store_open_url(db, url, PF_STORE_SYNC_NORMAL, &err));
	assert_int_equal(errno, EAGAIN);
	char want[64];
	snprintf(want, sizeof(want),
		 "store: postgres: connect to 127.0.0.1:%u:", ntohs(a.sin_port));
	if (!strstr(err.msg, want) || !strstr(err.msg, "refused"))
		fail_msg("unexpected message: %s", err.msg);

	memset(&err, 0, sizeof(err));
	assert_null(pf_store_open_url(db, "mysql://x", PF_STORE_SYNC_NORMAL, &err));
	assert_int_equal(errno, EINVAL);
	assert_non_null(strstr(err.msg, "postgres://"));

	/* Without a URL nothing changes: SQLite, not shared. */
	struct pf_store *st = pf_store_open_url(db, NULL, PF_STORE_SYNC_NORMAL, &err);
	assert_non_null(st);
	assert_false(pf_store_is_shared(st));
	assert_false(pf_store_unavailable(st));
	bool owned = false;
	assert_int_equal(pf_store_rollout_lock(st, "r1", &owned), 0);
	assert_true(owned);
	pf_store_close(st);
	unlink(db);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_placeholders),   cmocka_unit_test(test_unportable),
	    cmocka_unit_test(test_migration_list), cmocka_unit_test(test_urls),
	    cmocka_unit_test(test_unreachable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
