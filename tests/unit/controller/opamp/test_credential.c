/* test_credential.c — controller/opamp/credential.c over a real SQLite store: the settings
 * hash, issuing and confirming credentials, and the OTLP receiver's rule of who an upload may
 * name (its credential's agent, that agent's captures; a shared token not an agent with its
 * own credential). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/api.h"
#include "opamp/credential.h"
#include "pf/hash.h"
#include "pf/uuid.h"
#include "store.h"

/* Wall-clock milliseconds, as the server passes them (a first use is recorded at once). */
#define NOW 1800000000000LL

struct fx {
	char dir[32];
	struct pf_store *st;
	uint8_t ua[16], ub[16], uc[16];
	char ta[PF_UUID_STR_LEN + 1], tb[PF_UUID_STR_LEN + 1], tc[PF_UUID_STR_LEN + 1];
};

static int setup(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));
	char db[64];
	snprintf(x->dir, sizeof(x->dir), "/tmp/pf_cred_XXXXXX");
	assert_non_null(mkdtemp(x->dir));
	snprintf(db, sizeof(db), "%s/c.db", x->dir);
	x->st = pf_store_open(db, PF_STORE_SYNC_NORMAL, NULL);
	assert_non_null(x->st);
	memset(x->ua, 0xa1, 16);
	memset(x->ub, 0xb2, 16);
	memset(x->uc, 0xc3, 16);
	pf_uuid_format(x->ua, x->ta);
	pf_uuid_format(x->ub, x->tb);
	pf_uuid_format(x->uc, x->tc);
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fx *x = *state;
	char cmd[64];
	pf_store_close(x->st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", x->dir);
	assert_int_equal(system(cmd), 0);
	free(x);
	return 0;
}

/* The caller pf_api_authenticate() would make of a per-agent credential. */
static struct pf_api_caller bound_caller(const struct pf_credential_offer *o, const uint8_t *uid)
{
	struct pf_api_caller c = {.role = PF_ROLE_AGENT, .agent_bound = true, .first_use = true};
	snprintf(c.token_id, sizeof(c.token_id), "%s", o->token_id);
	memcpy(c.agent_uid, uid, 16);
	return c;
}

static void test_settings_hash(void **state)
{
	(void)state;
	uint8_t t1[32], t2[32], a[32], b[32], c[32], d[32];
	memset(t1, 1, 32);
	memset(t2, 2, 32);
	pf_credential_settings_hash(30, t1, a);
	pf_credential_settings_hash(30, t1, b);
	assert_memory_equal(a, b, 32);
	pf_credential_settings_hash(30, t2, c);
	assert_memory_not_equal(a, c, 32);
	pf_credential_settings_hash(31, t1, c);
	assert_memory_not_equal(a, c, 32);
	/* without a credential: the hash of the interval alone (what the codec sends) */
	uint8_t le[8] = {30};
	pf_credential_settings_hash(30, NULL, d);
	pf_sha256(le, 8, c);
	assert_memory_equal(c, d, 32);
}

static void test_issue_confirm(void **state)
{
	struct fx *x = *state;
	struct pf_credential_offer o1, o2;
	assert_false(pf_credential_in_use(x->st, x->ua));
	assert_int_equal(pf_credential_issue(x->st, x->ua, 30, NOW + 1000, &o1), 0);
	assert_memory_equal(o1.authorization, "Bearer ", 7);
	uint8_t h[32], want[32];
	assert_int_equal(pf_api_token_hash(o1.authorization, h), 0);
	pf_credential_settings_hash(30, h, want);
	assert_memory_equal(o1.hash, want, 32);
	/* offered, not used: the shared token may still speak for the uid */
	assert_false(pf_credential_in_use(x->st, x->ua));
	struct pf_api_caller c1;
	assert_int_equal(pf_api_authenticate(x->st, o1.authorization, NOW + 2000, &c1), 0);
	assert_true(c1.agent_bound && c1.first_use);
	assert_memory_equal(c1.agent_uid, x->ua, 16);
	assert_true(pf_credential_in_use(x->st, x->ua));
	/* a rotation: the new one, once used, retires the old one */
	assert_int_equal(pf_credential_issue(x->st, x->ua, 30, NOW + 3000, &o2), 0);
	struct pf_api_caller c2 = bound_caller(&o2, x->ua);
	assert_int_equal(pf_api_authenticate(x->st, o1.authorization, NOW + 3100, &c1), 0);
	assert_int_equal(pf_credential_confirm(x->st, &c2, false, NULL, NULL), 0);
	assert_int_equal(pf_api_authenticate(x->st, o1.authorization, NOW + 3200, &c1), -ENOENT);
	assert_int_equal(pf_api_authenticate(x->st, o2.authorization, NOW + 3200, &c1), 0);
}

static int no_cap(const struct pf_capture_row *c, void *ud)
{
	(void)c;
	(void)ud;
	return 0;
}

static void test_upload_rule(void **state)
{
	struct fx *x = *state;
	char why[256];
	struct pf_credential_offer o;
	/* a's credential is in use; b has none; capture k asked a only */
	assert_int_equal(pf_credential_issue(x->st, x->ua, 30, NOW + 1000, &o), 0);
	struct pf_api_caller c;
	assert_int_equal(pf_api_authenticate(x->st, o.authorization, NOW + 1100, &c), 0);
	struct pf_capture_row k = {.id = "k1", .state = "running", .created_by = "t",
				   .request_json = "{}", .agents_matched = 1};
	struct pf_capture_agent_row ka = {.capture = "k1", .state = "running", .error_code = "",
					  .error = ""};
	memcpy(ka.uid, x->ua, 16);
	assert_int_equal(pf_store_captures_save(x->st, &k, 1, &ka, 1), 0);
	assert_int_equal(pf_store_capture_get(x->st, "k1", no_cap, NULL, NULL), 0);

	/* a's credential: itself, nothing named, its capture */
	assert_int_equal(pf_credential_check_upload(x->ua, x->st, x->ta, NULL, why, sizeof(why)), 0);
	assert_int_equal(pf_credential_check_upload(x->ua, x->st, NULL, NULL, why, sizeof(why)), 0);
	assert_int_equal(pf_credential_check_upload(x->ua, x->st, NULL, "k1", why, sizeof(why)), 0);
	/* another agent, a capture that did not ask it, a capture that does not exist */
	assert_int_equal(pf_credential_check_upload(x->ub, x->st, x->ta, NULL, why, sizeof(why)),
			 -EACCES);
	assert_non_null(strstr(why, "this credential belongs to agent"));
	assert_int_equal(pf_credential_check_upload(x->ub, x->st, x->tb, "k1", why, sizeof(why)),
			 -EACCES);
	assert_non_null(strstr(why, "not a capture of this agent"));
	assert_int_equal(pf_credential_check_upload(x->ua, x->st, NULL, "nope", why, sizeof(why)),
			 -EACCES);
	assert_int_equal(pf_credential_check_upload(x->ua, x->st, "agent-1", NULL, why,
						    sizeof(why)),
			 -EACCES);
	/* a shared token: not an agent with its own credential; others as they name themselves */
	assert_int_equal(pf_credential_check_upload(NULL, x->st, x->ta, NULL, why, sizeof(why)),
			 -EACCES);
	assert_non_null(strstr(why, "has a credential of its own"));
	assert_int_equal(pf_credential_check_upload(NULL, x->st, x->tc, NULL, why, sizeof(why)), 0);
	assert_int_equal(pf_credential_check_upload(NULL, x->st, NULL, NULL, why, sizeof(why)), 0);
	assert_int_equal(pf_credential_check_upload(NULL, x->st, "agent-1", NULL, why,
						    sizeof(why)),
			 0);
	assert_int_equal(pf_credential_check_upload(NULL, x->st, x->tc, "k1", why, sizeof(why)),
			 -EACCES);
	assert_int_equal(pf_credential_check_upload(NULL, x->st, NULL, "k1", why, sizeof(why)),
			 -EACCES);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_settings_hash),
	    cmocka_unit_test_setup_teardown(test_issue_confirm, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_upload_rule, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
