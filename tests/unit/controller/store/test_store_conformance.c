/* test_store_conformance.c — the same sequence of fleet store calls against SQLite and, when
 * PF_TEST_PG_URL names an empty PostgreSQL database, against PostgreSQL; every result (return
 * codes, rows, in order) goes into a transcript, and the two transcripts must be identical.
 * Without PF_TEST_PG_URL only the SQLite run happens (a unit test); the integration test
 * test_pg_store.py runs this binary with a database of the server it started. */
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

#include "pf/buf.h"
#include "store.h"

static void hex(struct pf_buf *o, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		pf_buf_printf(o, "%02x", b[i]);
}

static int cfg_cb(const struct pf_config_version *cv, void *ud)
{
	struct pf_buf *o = ud;
	pf_buf_printf(o, "  cfg %s v%lld %lld body=%s\n", cv->name, (long long)cv->version,
		      (long long)cv->created_ms, cv->body ? cv->body : "(null)");
	return 0;
}

static int asg_cb(const struct pf_assignment *a, void *ud)
{
	struct pf_buf *o = ud;
	pf_buf_printf(o, "  asg %s [%s] %s %lld %lld\n", a->name, a->selector, a->config,
		      (long long)a->priority, (long long)a->updated_ms);
	return 0;
}

static int tok_cb(const struct pf_token_info *t, void *ud)
{
	struct pf_buf *o = ud;
	pf_buf_printf(o, "  tok %s %s by=%s %lld exp=%lld used=%lld idlen=%zu\n", t->name, t->role,
		      t->created_by, (long long)t->created_ms, (long long)t->expires_ms,
		      (long long)t->last_used_ms, strlen(t->id));
	return 0;
}

static int agent_cb(const struct pf_agent_row *r, void *ud)
{
	struct pf_buf *o = ud;
	pf_buf_printf(o, "  agent ");
	hex(o, r->uid, 16);
	pf_buf_printf(o,
		      " %s caps=%llu health=%s eff=%s cfg=%s v%lld status=%d err=%s conn=%d "
		      "%lld %lld",
		      r->attributes_json, (unsigned long long)r->capabilities,
		      r->health_json ? r->health_json : "-",
		      r->effective_config ? r->effective_config : "-",
		      r->config_name ? r->config_name : "-", (long long)r->config_version,
		      r->remote_status, r->remote_error ? r->remote_error : "-", r->connected,
		      (long long)r->first_seen_ms, (long long)r->last_seen_ms);
	if (r->has_effective_hash) {
		pf_buf_printf(o, " eh=");
		hex(o, r->effective_hash, 4);
	}
	if (r->has_remote_hash) {
		pf_buf_printf(o, " rh=");
		hex(o, r->remote_hash, 4);
	}
	pf_buf_printf(o, "\n");
	return 0;
}

static int audit_cb(const struct pf_audit_entry *e, void *ud)
{
	struct pf_buf *o = ud;
	pf_buf_printf(o, "  audit %lld %lld %s %s %s %s %s %s %d\n", (long long)e->id,
		      (long long)e->ts_ms, e->actor, e->action, e->target,
		      e->detail ? e->detail : "(null)", e->actor_id, e->source, e->status);
	return 0;
}

static int cap_cb(const struct pf_capture_row *c, void *ud)
{
	struct pf_buf *o = ud;
	pf_buf_printf(o, "  cap %s %s %lld %lld %lld %lld %s %s %lld\n", c->id, c->state,
		      (long long)c->created_ms, (long long)c->started_ms, (long long)c->finished_ms,
		      (long long)c->deadline_ms, c->created_by, c->request_json,
		      (long long)c->agents_matched);
	return 0;
}

static int cap_agent_cb(const struct pf_capture_agent_row *a, void *ud)
{
	struct pf_buf *o = ud;
	pf_buf_printf(o, "  cap-agent %s ", a->capture);
	hex(o, a->uid, 16);
	pf_buf_printf(o, " %s %lld %lld ids=%zu:", a->state, (long long)a->samples,
		      (long long)a->bytes, a->n_profile_ids);
	hex(o, a->profile_ids ? a->profile_ids : (const uint8_t *)"", a->n_profile_ids * 16);
	pf_buf_printf(o, " %s %s %lld\n", a->error_code, a->error, (long long)a->updated_ms);
	return 0;
}

static int ro_cb(const struct pf_rollout_row *r, void *ud)
{
	struct pf_buf *o = ud;
	pf_buf_printf(o, "  rollout %s %s v%lld %s %lld %lld %s %s %s\n", r->id, r->config,
		      (long long)r->version, r->state, (long long)r->created_ms,
		      (long long)r->updated_ms, r->created_by, r->spec_json, r->progress_json);
	return 0;
}

static int ro_agent_cb(const struct pf_rollout_agent_row *a, void *ud)
{
	struct pf_buf *o = ud;
	pf_buf_printf(o, "  ro-agent %s ", a->rollout);
	hex(o, a->uid, 16);
	pf_buf_printf(o, " b%lld from=%lld %s [%s] [%s] %lld\n", (long long)a->batch,
		      (long long)a->from_version, a->state, a->revert, a->error,
		      (long long)a->updated_ms);
	return 0;
}

static int pin_cb(const struct pf_pin_row *p, void *ud)
{
	struct pf_buf *o = ud;
	pf_buf_printf(o, "  pin ");
	hex(o, p->uid, 16);
	pf_buf_printf(o, " %s v%lld\n", p->config, (long long)p->version);
	return 0;
}

static int serve_cb(const char *name, int64_t version, void *ud)
{
	struct pf_buf *o = ud;
	pf_buf_printf(o, "  serve %s v%lld\n", name, (long long)version);
	return 0;
}

static int count_cb(const struct pf_agent_row *r, void *ud)
{
	(void)r;
	++*(int64_t *)ud;
	return 0;
}

#define R(call) pf_buf_printf(o, "%s = %d\n", #call, (call))

/* Per-agent credentials: issue (an unused one replaced), use, confirm (older ones go), get,
 * revoke; never listed with the API tokens. h1 is stored already, h2 and h3 are free. */
static void credentials(struct pf_store *st, struct pf_buf *o, const uint8_t *h1,
			const uint8_t *h2, const uint8_t *h3, const uint8_t *ua, const uint8_t *ub)
{
	struct pf_token_info c1, c2, g;
	char ids[PF_AGENT_CREDENTIAL_MAX_IDS][PF_TOKEN_ID_LEN + 1];
	R(pf_store_agent_credential_get(st, ua, &g));
	R(pf_store_agent_credential_issue(st, ua, h2, 3000, &c1));
	R(pf_store_agent_credential_issue(st, ua, h3, 3001, &c2));
	R(pf_store_token_find(st, h2, &g));
	R(pf_store_token_find(st, h3, &g));
	pf_buf_printf(o, "  cred %s %s bound=%d uid=%d\n", g.name, g.role, g.agent_bound,
		      memcmp(g.agent_uid, ua, 16) == 0);
	R(pf_store_token_touch(st, c2.id, 3100));
	R(pf_store_agent_credential_issue(st, ua, h2, 3200, &c1));
	R(pf_store_agent_credential_get(st, ua, &g));
	R(strcmp(g.id, c2.id));
	R(pf_store_agent_credential_confirm(st, ua, c1.id, ids));
	R(strcmp(ids[0], c2.id));
	R(pf_store_agent_credential_get(st, ua, &g));
	R(strcmp(g.id, c1.id));
	R(pf_store_token_find(st, h3, &g));
	R(pf_store_token_foreach(st, tok_cb, o));
	R(pf_store_agent_credential_issue(st, ub, h1, 3300, &c2));
	R(pf_store_agent_credential_get(st, ub, &g));
	R(pf_store_agent_credential_revoke(st, ua, ids));
	R(strcmp(ids[0], c1.id));
	R(pf_store_agent_credential_revoke(st, ua, ids));
	R(pf_store_token_find(st, h2, &g));
}

/* The sequence: every fleet call, its edge cases (duplicates, missing rows, filters). */
static void run(struct pf_store *st, struct pf_buf *o)
{
	uint8_t h1[32], h2[32], h3[32], u[4][16];
	for (int i = 0; i < 32; i++) {
		h1[i] = (uint8_t)i;
		h2[i] = (uint8_t)(i * 7 + 1);
		h3[i] = (uint8_t)(255 - i);
	}
	for (int a = 0; a < 4; a++)
		for (int i = 0; i < 16; i++)
			u[a][i] = (uint8_t)(a * 16 + i + (a == 2 ? 128 : 0));
	int64_t v = 0, n = 0;
	bool created = false;
	char buf[64];

	/* tokens */
	R(pf_store_token_add(st, h1, "admin", "boot", 1000));
	R(pf_store_token_add(st, h1, "admin", "again", 1001));
	R(pf_store_token_lookup(st, h1, buf, sizeof(buf)));
	pf_buf_printf(o, "  role %s\n", buf);
	R(pf_store_token_lookup(st, h2, buf, sizeof(buf)));
	R(pf_store_token_lookup(st, h1, buf, 3));
	R(pf_store_token_name(st, h1, buf, sizeof(buf)));
	pf_buf_printf(o, "  name %s\n", buf);
	R(pf_store_token_count(st, &n));
	pf_buf_printf(o, "  count %lld\n", (long long)n);
	struct pf_token_info t = {.created_ms = 2000, .expires_ms = 9000};
	snprintf(t.name, sizeof(t.name), "oncall");
	snprintf(t.role, sizeof(t.role), "operator");
	snprintf(t.created_by, sizeof(t.created_by), "boot");
	R(pf_store_token_create(st, h2, &t));
	R(pf_store_token_create(st, h2, &t));
	struct pf_token_info f;
	R(pf_store_token_find(st, h2, &f));
	R(strcmp(f.id, t.id));
	R(pf_store_token_touch(st, t.id, 5000));
	R(pf_store_token_foreach(st, tok_cb, o));
	R(pf_store_token_revoke(st, t.id, &f));
	pf_buf_printf(o, "  revoked %s\n", f.name);
	R(pf_store_token_revoke(st, t.id, NULL));
	R(pf_store_token_find(st, h2, &f));
	credentials(st, o, h1, h2, h3, u[0], u[1]);

	/* configs */
	R(pf_store_config_put(st, "default", "a: 1\n", 5, h1, 100, &v, &created));
	pf_buf_printf(o, "  v%lld created=%d\n", (long long)v, created);
	R(pf_store_config_put(st, "default", "a: 1\n", 5, h1, 101, &v, &created));
	pf_buf_printf(o, "  v%lld created=%d\n", (long long)v, created);
	R(pf_store_config_put(st, "default", "a: 2\n", 5, h2, 102, &v, &created));
	R(pf_store_config_put(st, "default", "a: 1\n", 5, h1, 103, &v, &created));
	pf_buf_printf(o, "  v%lld created=%d\n", (long long)v, created);
	R(pf_store_config_put(st, "Zeta", "z\n", 2, h3, 104, NULL, NULL));
	R(pf_store_config_put(st, "alpha", "", 0, h3, 105, NULL, NULL));
	R(pf_store_config_put(st, "", "x", 1, h3, 105, NULL, NULL));
	struct pf_config_version cv;
	R(pf_store_config_get(st, "default", 0, &cv));
	pf_buf_printf(o, "  latest v%lld %s", (long long)cv.version, cv.body);
	pf_config_version_release(&cv);
	R(pf_store_config_get(st, "default", 2, &cv));
	pf_config_version_release(&cv);
	R(pf_store_config_get(st, "default", 9, &cv));
	R(pf_store_config_get(st, "nope", 0, &cv));
	R(pf_store_config_versions(st, "default", cfg_cb, o));
	R(pf_store_config_versions(st, "nope", cfg_cb, o));
	R(pf_store_config_foreach_latest(st, cfg_cb, o));

	/* assignments */
	struct pf_assignment a = {.priority = 5, .updated_ms = 200};
	snprintf(a.name, sizeof(a.name), "b");
	snprintf(a.selector, sizeof(a.selector), "env=prod");
	snprintf(a.config, sizeof(a.config), "default");
	R(pf_store_assignment_put(st, &a));
	snprintf(a.name, sizeof(a.name), "A");
	R(pf_store_assignment_put(st, &a));
	a.priority = 9;
	snprintf(a.selector, sizeof(a.selector), "env in (a,b)");
	R(pf_store_assignment_put(st, &a));
	R(pf_store_assignment_foreach(st, asg_cb, o));
	struct pf_assignment g;
	R(pf_store_assignment_get(st, "A", &g));
	asg_cb(&g, o);
	R(pf_store_assignment_get(st, "x", &g));
	R(pf_store_assignment_delete(st, "b"));
	R(pf_store_assignment_delete(st, "b"));
	R(pf_store_assignment_foreach(st, asg_cb, o));

	/* agents */
	struct pf_agent_row rows[3] = {
	    /* what an array literal must escape: quotes, backslashes, braces, commas, "NULL" */
	    {.attributes_json = "{\"a\":\"1 \\\"q\\\" \\\\ {x,y} NULL \u00e9\"}",
	     .capabilities = UINT64_MAX - 1,
	     .health_json = "{\"healthy\":true}",
	     .effective_config = "e: 1\nf: \"{a, b}\" # \\n\n",
	     .has_effective_hash = true,
	     .config_name = "default",
	     .config_version = 3,
	     .has_remote_hash = true,
	     .remote_status = 2,
	     .connected = true,
	     .first_seen_ms = 10,
	     .last_seen_ms = 20},
	    {.attributes_json = NULL,
	     .remote_error = "NULL",
	     .first_seen_ms = 11,
	     .last_seen_ms = 21},
	    {.attributes_json = "{}", .connected = true, .first_seen_ms = 12, .last_seen_ms = 22},
	};
	for (int i = 0; i < 3; i++)
		memcpy(rows[i].uid, u[i], 16);
	memcpy(rows[0].effective_hash, h2, 32);
	memcpy(rows[0].remote_hash, h3, 32);
	R(pf_store_agents_upsert(st, rows, 3));
	rows[1].first_seen_ms = 99; /* kept: the stored first_seen wins */
	rows[1].remote_status = 3;
	rows[1].last_seen_ms = 30;
	R(pf_store_agents_upsert(st, &rows[1], 1));
	struct pf_agent_row seen[2] = {{.last_seen_ms = 40}, {.last_seen_ms = 41}};
	memcpy(seen[0].uid, u[2], 16);
	memcpy(seen[1].uid, u[3], 16); /* not stored: skipped */
	R(pf_store_agents_set_seen(st, seen, 2));
	/* Rows come in no defined order: one call per uid, in uid order. */
	for (int i = 0; i < 4; i++)
		R(pf_store_agent_get(st, u[i], agent_cb, o));
	R(pf_store_agent_delete(st, u[1]));
	R(pf_store_agent_delete(st, u[1]));
	n = 0;
	R(pf_store_agents_foreach(st, count_cb, &n));
	pf_buf_printf(o, "  agents %lld\n", (long long)n);

	/* audit */
	struct pf_audit_entry e = {
	    .ts_ms = 300, .actor = "boot", .action = "config.put", .target = "default",
	    .detail = "version 1"};
	R(pf_store_audit_write(st, &e));
	e = (struct pf_audit_entry){.ts_ms = 301, .actor = "boot", .action = "token.create"};
	R(pf_store_audit_write(st, &e));
	e = (struct pf_audit_entry){.ts_ms = 302,
				   .actor = "oncall",
				   .action = "token.revoke",
				   .target = "x",
				   .actor_id = "abcd",
				   .source = "10.0.0.1",
				   .status = 200};
	R(pf_store_audit_write(st, &e));
	e.action = "tokens";
	e.ts_ms = 303;
	R(pf_store_audit_write(st, &e));
	R(pf_store_audit_write(st, &(struct pf_audit_entry){.ts_ms = 304, .action = "x"}));
	struct pf_audit_query aq = {.limit = SIZE_MAX};
	R(pf_store_audit_query(st, &aq, audit_cb, o));
	aq = (struct pf_audit_query){.before_id = 3, .limit = 1};
	R(pf_store_audit_query(st, &aq, audit_cb, o));
	aq = (struct pf_audit_query){.action = "token", .limit = 10};
	R(pf_store_audit_query(st, &aq, audit_cb, o));
	aq = (struct pf_audit_query){.actor = "abcd", .from_ms = 303, .limit = 10};
	R(pf_store_audit_query(st, &aq, audit_cb, o));
	aq = (struct pf_audit_query){.to_ms = 301, .before_id = 2, .limit = 10};
	R(pf_store_audit_query(st, &aq, audit_cb, o));

	/* captures */
	struct pf_capture_row caps[2] = {
	    {.id = "c1",
	     .state = "pending",
	     .created_ms = 1,
	     .deadline_ms = 9,
	     .created_by = "x",
	     .request_json = "{}",
	     .agents_matched = 2},
	    {.id = "c2",
	     .state = "done",
	     .created_ms = 2,
	     .started_ms = 3,
	     .finished_ms = 4,
	     .deadline_ms = 9,
	     .created_by = "y",
	     .request_json = "{\"d\":1}",
	     .agents_matched = 1},
	};
	uint8_t pids[32];
	memcpy(pids, h1, 32);
	struct pf_capture_agent_row ca[2] = {
	    {.capture = "c1",
	     .state = "running",
	     .samples = 5,
	     .bytes = 6,
	     .n_profile_ids = 2,
	     .profile_ids = pids,
	     .error_code = "",
	     .error = "",
	     .updated_ms = 7},
	    {.capture = "c1", .state = "failed", .error_code = "E", .error = "no", .updated_ms = 8},
	};
	memcpy(ca[0].uid, u[2], 16);
	memcpy(ca[1].uid, u[0], 16);
	R(pf_store_captures_save(st, caps, 2, ca, 2));
	caps[0].state = "running";
	caps[0].started_ms = 5;
	caps[0].created_by = "changed (not kept)";
	R(pf_store_captures_save(st, caps, 1, NULL, 0));
	struct pf_capture_agent_row bad = {.capture = "nope", .state = "x"};
	R(pf_store_captures_save(st, NULL, 0, &bad, 1) < 0);
	R(pf_store_capture_get(st, "c1", cap_cb, cap_agent_cb, o));
	R(pf_store_capture_get(st, "c9", cap_cb, cap_agent_cb, o));
	struct pf_capture_query cq = {.unfinished = true};
	R(pf_store_captures_foreach(st, &cq, cap_cb, o));
	cq = (struct pf_capture_query){.state = "done"};
	R(pf_store_captures_foreach(st, &cq, cap_cb, o));
	cq = (struct pf_capture_query){.before_id = "c2", .limit = 5};
	R(pf_store_captures_foreach(st, &cq, cap_cb, o));

	/* rollouts, pins, served versions */
	struct pf_rollout_row ro = {.id = "r1",
				    .config = "default",
				    .version = 3,
				    .state = "running",
				    .created_ms = 1,
				    .updated_ms = 2,
				    .created_by = "x",
				    .spec_json = "{}",
				    .progress_json = "{\"b\":0}"};
	struct pf_rollout_agent_row ra[2] = {
	    {.rollout = "r1",
	     .batch = 1,
	     .from_version = 2,
	     .state = "applying",
	     .revert = "",
	     .error = "",
	     .updated_ms = 3},
	    {.rollout = "r1",
	     .batch = 0,
	     .from_version = 2,
	     .state = "applied",
	     .revert = "",
	     .error = "",
	     .updated_ms = 4},
	};
	memcpy(ra[0].uid, u[0], 16);
	memcpy(ra[1].uid, u[2], 16);
	struct pf_pin_row pins[2] = {{.config = "default", .version = 3},
				     {.config = "Zeta", .version = 1}};
	memcpy(pins[0].uid, u[0], 16);
	memcpy(pins[1].uid, u[2], 16);
	R(pf_store_rollout_save(st, &ro, ra, 2, pins, 2));
	ro.state = "completed";
	ro.updated_ms = 5;
	ro.progress_json = "{\"b\":1}";
	pins[0].version = 0; /* removes */
	R(pf_store_rollout_save(st, &ro, NULL, 0, pins, 1));
	R(pf_store_rollout_get(st, "r1", ro_cb, ro_agent_cb, o));
	R(pf_store_rollout_get(st, "r9", ro_cb, ro_agent_cb, o));
	ro.id = "r2";
	ro.state = "paused";
	R(pf_store_rollout_save(st, &ro, NULL, 0, NULL, 0));
	R(pf_store_rollouts_foreach(st, true, NULL, 0, ro_cb, o));
	R(pf_store_rollouts_foreach(st, false, "r2", 5, ro_cb, o));
	R(pf_store_pins_foreach(st, pin_cb, o));
	R(pf_store_pins_clear(st, "Zeta", 2));
	R(pf_store_pins_foreach(st, pin_cb, o));
	R(pf_store_pins_clear(st, "Zeta", 0));
	R(pf_store_pins_foreach(st, pin_cb, o));
	R(pf_store_config_serving_set(st, "default", 2));
	R(pf_store_config_serving_set(st, "Zeta", 1));
	R(pf_store_config_serving_set(st, "Zeta", 0));
	R(pf_store_config_serving_foreach(st, serve_cb, o));
}

static void transcript(const char *path, const char *url, struct pf_buf *o)
{
	struct pf_error err = {0};
	struct pf_store *st = pf_store_open_url(path, url, PF_STORE_SYNC_NORMAL, &err);
	if (!st)
		fail_msg("open (%s): %s", url ? "postgres" : "sqlite", err.msg);
	run(st, o);
	pf_store_close(st);
}

static void test_same_results(void **state)
{
	char dir[] = "/tmp/pf_conf_XXXXXX", db1[64], db2[64];
	const char *url = getenv("PF_TEST_PG_URL");
	struct pf_buf a, b;
	(void)state;

	assert_non_null(mkdtemp(dir));
	snprintf(db1, sizeof(db1), "%s/a.db", dir);
	snprintf(db2, sizeof(db2), "%s/b.db", dir);
	pf_buf_init(&a, 1 << 20);
	pf_buf_init(&b, 1 << 20);
	transcript(db1, NULL, &a);
	pf_buf_putc(&a, 0);
	if (getenv("PF_CONFORMANCE_PRINT"))
		fputs((const char *)a.data, stdout);
	if (url && *url) {
		transcript(db2, url, &b);
		pf_buf_putc(&b, 0);
		if (strcmp((const char *)a.data, (const char *)b.data) != 0) {
			FILE *f = fopen("/dev/stderr", "w");
			if (f) {
				fprintf(f, "--- sqlite\n%s--- postgres\n%s", (const char *)a.data,
					(const char *)b.data);
				fclose(f);
			}
			fail_msg("SQLite and PostgreSQL transcripts differ");
		}
		printf("store conformance: %zu bytes of transcript, identical\n", a.len);
	} else {
		printf("store conformance: SQLite only (PF_TEST_PG_URL not set)\n");
	}
	pf_buf_release(&a);
	pf_buf_release(&b);
	unlink(db1);
	unlink(db2);
	char wal[80];
	snprintf(wal, sizeof(wal), "%s-wal", db1);
	unlink(wal);
	rmdir(dir);
}

/* The credential calls' results on SQLite (the transcript above shows PostgreSQL gives the
 * same). */
static void test_agent_credentials(void **state)
{
	char dir[] = "/tmp/pf_cred_XXXXXX", db[64];
	struct pf_error err = {0};
	uint8_t h1[32], h2[32], h3[32], ua[16], ub[16];
	struct pf_token_info c1, c2, c3, g;
	char ids[PF_AGENT_CREDENTIAL_MAX_IDS][PF_TOKEN_ID_LEN + 1];
	(void)state;
	for (int i = 0; i < 32; i++) {
		h1[i] = (uint8_t)i;
		h2[i] = (uint8_t)(i + 100);
		h3[i] = (uint8_t)(i + 200);
	}
	memset(ua, 0xaa, 16);
	memset(ub, 0xbb, 16);
	assert_non_null(mkdtemp(dir));
	snprintf(db, sizeof(db), "%s/c.db", dir);
	struct pf_store *st = pf_store_open_url(db, NULL, PF_STORE_SYNC_NORMAL, &err);
	assert_non_null(st);
	assert_int_equal(pf_store_token_add(st, h1, "agent", "enroll", 1), 0);
	assert_int_equal(pf_store_agent_credential_get(st, ua, &g), -ENOENT);
	assert_int_equal(pf_store_agent_credential_issue(st, ua, h2, 10, &c1), 0);
	assert_true(c1.agent_bound);
	assert_string_equal(c1.role, "agent");
	assert_int_equal(pf_store_agent_credential_get(st, ua, &g), 0);
	assert_string_equal(g.id, c1.id);
	assert_int_equal(g.last_used_ms, 0);
	/* another offer before use replaces it */
	assert_int_equal(pf_store_agent_credential_issue(st, ua, h3, 11, &c2), 0);
	assert_int_equal(pf_store_token_find(st, h2, &g), -ENOENT);
	assert_int_equal(pf_store_token_find(st, h3, &g), 0);
	assert_true(g.agent_bound);
	assert_memory_equal(g.agent_uid, ua, 16);
	/* used, then a rotation: the used one stays until the new one is used */
	assert_int_equal(pf_store_token_touch(st, c2.id, 20), 0);
	assert_int_equal(pf_store_agent_credential_issue(st, ua, h2, 30, &c3), 0);
	assert_int_equal(pf_store_agent_credential_get(st, ua, &g), 0);
	assert_string_equal(g.id, c2.id);
	assert_int_equal(pf_store_agent_credential_confirm(st, ua, c3.id, ids), 1);
	assert_string_equal(ids[0], c2.id);
	assert_int_equal(pf_store_token_find(st, h3, &g), -ENOENT);
	assert_int_equal(pf_store_agent_credential_confirm(st, ua, c3.id, ids), 0);
	/* not listed with the API tokens */
	int64_t n = 0;
	assert_int_equal(pf_store_token_count(st, &n), 0);
	struct pf_buf o;
	pf_buf_init(&o, 4096);
	assert_int_equal(pf_store_token_foreach(st, tok_cb, &o), 0);
	pf_buf_putc(&o, 0);
	assert_non_null(strstr((const char *)o.data, "enroll"));
	assert_null(strstr((const char *)o.data, "agent:"));
	pf_buf_release(&o);
	/* one agent's revocation leaves the other's */
	assert_int_equal(pf_store_agent_credential_issue(st, ub, h3, 40, &c1), 0);
	assert_int_equal(pf_store_agent_credential_revoke(st, ua, ids), 1);
	assert_string_equal(ids[0], c3.id);
	assert_int_equal(pf_store_agent_credential_revoke(st, ua, ids), -ENOENT);
	assert_int_equal(pf_store_agent_credential_get(st, ub, &g), 0);
	assert_string_equal(g.id, c1.id);
	/* a hash stored already */
	assert_int_equal(pf_store_agent_credential_issue(st, ua, h1, 50, &c2), -EEXIST);
	pf_store_close(st);
	char path[96];
	snprintf(path, sizeof(path), "%s-wal", db);
	unlink(path);
	snprintf(path, sizeof(path), "%s-shm", db);
	unlink(path);
	unlink(db);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_same_results),
	    cmocka_unit_test(test_agent_credentials),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
