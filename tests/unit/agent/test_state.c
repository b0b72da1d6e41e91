/* test_state.c — agent/state.c: state dir creation, instance_uid persisted and reloaded,
 * atomic remote-config persistence. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "pf/uuid.h"
#include "state.h"

static char base[256];

static int setup(void **unused)
{
	snprintf(base, sizeof(base), "/tmp/pf-agent-state-XXXXXX");
	assert_non_null(mkdtemp(base));
	return 0;
}

static int teardown(void **unused)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static void test_creates_dir_and_uid(void **unused)
{
	char dir[512], path[600];
	struct agent_state *st = NULL;
	struct pf_error err = {0};
	struct stat sb;

	snprintf(dir, sizeof(dir), "%s/a/b/state", base);
	assert_int_equal(agent_state_open(dir, &st, &err), 0);
	assert_int_equal(stat(dir, &sb), 0);
	assert_true(S_ISDIR(sb.st_mode));
	assert_int_equal(sb.st_mode & 0777, 0700);
	assert_int_equal(pf_uuid_version(agent_state_uid(st)), 7);

	uint8_t first[16];
	memcpy(first, agent_state_uid(st), 16);
	snprintf(path, sizeof(path), "%s/instance_uid", dir);
	char *text = NULL;
	size_t len;
	assert_int_equal(agent_read_file(path, 4096, &text, &len), 0);
	assert_int_equal(len, PF_UUID_STR_LEN + 1);
	char want[PF_UUID_STR_LEN + 1];
	pf_uuid_format(first, want);
	assert_memory_equal(text, want, PF_UUID_STR_LEN);
	free(text);
	agent_state_free(st);

	/* Reloaded, not regenerated. */
	st = NULL;
	assert_int_equal(agent_state_open(dir, &st, &err), 0);
	assert_memory_equal(agent_state_uid(st), first, 16);

	/* Adopting a server-assigned uid persists it. */
	uint8_t nu[16];
	assert_int_equal(pf_uuid_v7(nu), 0);
	assert_int_equal(agent_state_set_uid(st, nu, &err), 0);
	agent_state_free(st);
	st = NULL;
	assert_int_equal(agent_state_open(dir, &st, &err), 0);
	assert_memory_equal(agent_state_uid(st), nu, 16);
	agent_state_free(st);
}

static void test_bad_uid_file_replaced(void **unused)
{
	char path[600];
	struct agent_state *st = NULL;
	snprintf(path, sizeof(path), "%s/instance_uid", base);
	assert_int_equal(agent_write_file_atomic(path, "garbage\n", 8, 0600), 0);
	assert_int_equal(agent_state_open(base, &st, NULL), 0);
	assert_int_equal(pf_uuid_version(agent_state_uid(st)), 7);
	agent_state_free(st);
}

static void test_remote_config_persisted(void **unused)
{
	struct agent_state *st = NULL;
	struct pf_error err = {0};
	const uint8_t *body, *hash;
	size_t len, hlen;
	const char doc[] = "profiling:\n  sampling: {frequency_hz: 49}\n";
	uint8_t h[32];

	for (int i = 0; i < 32; i++)
		h[i] = (uint8_t)(i * 7);
	assert_int_equal(agent_state_open(base, &st, &err), 0);
	assert_false(agent_state_remote_config(st, &body, &len, &hash, &hlen));
	assert_int_equal(
	    agent_state_save_remote_config(st, (const uint8_t *)doc, strlen(doc), h, 32, &err), 0);
	assert_true(agent_state_remote_config(st, &body, &len, &hash, &hlen));
	assert_int_equal(len, strlen(doc));
	agent_state_free(st);

	/* No temporary file left behind; reloaded at the next start. */
	char tmp[600];
	snprintf(tmp, sizeof(tmp), "%s/remote_config.tmp", base);
	assert_int_equal(access(tmp, F_OK), -1);
	st = NULL;
	assert_int_equal(agent_state_open(base, &st, &err), 0);
	assert_true(agent_state_remote_config(st, &body, &len, &hash, &hlen));
	assert_int_equal(len, strlen(doc));
	assert_memory_equal(body, doc, len);
	assert_int_equal(hlen, 32);
	assert_memory_equal(hash, h, 32);

	/* Replaced atomically by a newer one, then cleared. */
	const char doc2[] = "";
	assert_int_equal(agent_state_save_remote_config(st, (const uint8_t *)doc2, 0, h, 4, &err),
			 0);
	agent_state_free(st);
	st = NULL;
	assert_int_equal(agent_state_open(base, &st, &err), 0);
	assert_true(agent_state_remote_config(st, &body, &len, &hash, &hlen));
	assert_int_equal(len, 0);
	assert_int_equal(hlen, 4);
	assert_int_equal(agent_state_clear_remote_config(st, &err), 0);
	assert_false(agent_state_remote_config(st, &body, &len, &hash, &hlen));
	agent_state_free(st);
	st = NULL;
	assert_int_equal(agent_state_open(base, &st, &err), 0);
	assert_false(agent_state_remote_config(st, &body, &len, &hash, &hlen));
	agent_state_free(st);
}

static void test_damaged_remote_config_ignored(void **unused)
{
	char path[600];
	struct agent_state *st = NULL;
	const uint8_t *body, *hash;
	size_t len, hlen;
	snprintf(path, sizeof(path), "%s/remote_config", base);
	assert_int_equal(agent_write_file_atomic(path, "profiling: {}\n", 14, 0600), 0);
	assert_int_equal(agent_state_open(base, &st, NULL), 0);
	assert_false(agent_state_remote_config(st, &body, &len, &hash, &hlen));
	agent_state_free(st);
}

/* The agent's own credential: persisted 0600 with its settings hash, reloaded, replaced; a
 * damaged file or an unprintable token is not used. */
static void test_credential_persisted(void **unused)
{
	struct agent_state *st = NULL;
	struct pf_error err = {0};
	const char *tok;
	const uint8_t *hash;
	size_t hlen;
	uint8_t h[32];
	char path[600];
	struct stat sb;

	memset(h, 0xc3, sizeof(h));
	snprintf(path, sizeof(path), "%s/credential", base);
	assert_int_equal(agent_state_open(base, &st, &err), 0);
	assert_false(agent_state_credential(st, &tok, &hash, &hlen));
	assert_int_equal(agent_state_save_credential(st, "pf_abc123", h, 32, &err), 0);
	assert_true(agent_state_credential(st, &tok, &hash, &hlen));
	assert_string_equal(tok, "pf_abc123");
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	assert_int_equal(agent_state_save_credential(st, "bad token", h, 32, &err), -EINVAL);
	assert_int_equal(agent_state_save_credential(st, "", h, 32, &err), -EINVAL);
	agent_state_free(st);
	st = NULL;
	assert_int_equal(agent_state_open(base, &st, &err), 0);
	assert_true(agent_state_credential(st, &tok, &hash, &hlen));
	assert_string_equal(tok, "pf_abc123");
	assert_int_equal(hlen, 32);
	assert_memory_equal(hash, h, 32);
	assert_int_equal(agent_state_save_credential(st, "pf_next", h, 4, &err), 0);
	agent_state_free(st);
	st = NULL;
	assert_int_equal(agent_state_open(base, &st, &err), 0);
	assert_true(agent_state_credential(st, &tok, &hash, &hlen));
	assert_string_equal(tok, "pf_next");
	assert_int_equal(hlen, 4);
	agent_state_free(st);

	static const char *const damaged[] = {"pf_only_a_token\n", "# profleet-credential hash=zz\nx\n",
					      "# profleet-credential hash=00\n\n",
					      "# profleet-credential hash=00\na b\n"};
	for (size_t i = 0; i < sizeof(damaged) / sizeof(damaged[0]); i++) {
		assert_int_equal(agent_write_file_atomic(path, damaged[i], strlen(damaged[i]), 0600),
				 0);
		st = NULL;
		assert_int_equal(agent_state_open(base, &st, NULL), 0);
		assert_false(agent_state_credential(st, &tok, &hash, &hlen));
		agent_state_free(st);
	}
}

static void test_unusable_dir(void **unused)
{
	struct agent_state *st = NULL;
	struct pf_error err = {0};
	char file[600], dir[700];
	snprintf(file, sizeof(file), "%s/plainfile", base);
	assert_int_equal(agent_write_file_atomic(file, "x", 1, 0600), 0);
	snprintf(dir, sizeof(dir), "%s/sub", file);
	assert_true(agent_state_open(dir, &st, &err) < 0);
	assert_null(st);
	assert_non_null(strstr(err.msg, "cannot create state directory"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_creates_dir_and_uid, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_uid_file_replaced, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_remote_config_persisted, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_damaged_remote_config_ignored, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_credential_persisted, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unusable_dir, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
