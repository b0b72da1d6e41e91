/* test_bootstrap.c — start-up steps against a real store in a temp directory: the default
 * profiling config (--default-config) is stored once, never over an existing "default", and a
 * bad file is refused with the key path inside it; tokens imported from files (Kubernetes
 * Secrets) once, after which no token files are generated; the flags and file keys. */
#include <errno.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bootstrap.h"
#include "config.h"
#include "pf/hash.h"
#include "store.h"

struct fx {
	char dir[64];
	char file[128];
	struct pf_store *store;
};

static const char good_cfg[] = "profiling:\n  sampling: {frequency_hz: 49}\n";

static void write_text(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");
	assert_non_null(fp);
	assert_int_equal(fputs(text, fp) >= 0, 1);
	assert_int_equal(fclose(fp), 0);
}

static int setup(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));
	snprintf(x->dir, sizeof(x->dir), "/tmp/pf-test-bootstrap-XXXXXX");
	assert_non_null(mkdtemp(x->dir));
	char db[128];
	snprintf(db, sizeof(db), "%s/db", x->dir);
	snprintf(x->file, sizeof(x->file), "%s/default.yaml", x->dir);
	x->store = pf_store_open(db, PF_STORE_SYNC_NORMAL, NULL);
	assert_non_null(x->store);
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fx *x = *state;
	char cmd[128];
	pf_store_close(x->store);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", x->dir);
	assert_int_equal(system(cmd), 0);
	free(x);
	return 0;
}

static int64_t versions_of_default(struct fx *x, char **body)
{
	struct pf_config_version cv;
	memset(&cv, 0, sizeof(cv));
	int r = pf_store_config_get(x->store, "default", 0, &cv);
	if (r == -ENOENT)
		return 0;
	assert_int_equal(r, 0);
	if (body)
		*body = strdup(cv.body);
	int64_t v = cv.version;
	pf_config_version_release(&cv);
	return v;
}

static void test_stored_when_absent_then_kept(void **state)
{
	struct fx *x = *state;
	struct pf_error err = {0};
	write_text(x->file, good_cfg);
	assert_int_equal(pf_bootstrap_default_config(x->store, x->file, &err), 1);
	char *body = NULL;
	assert_int_equal(versions_of_default(x, &body), 1);
	assert_string_equal(body, good_cfg);
	free(body);

	/* A second start with another file: the stored default stays as it is. */
	write_text(x->file, "profiling:\n  sampling: {frequency_hz: 199}\n");
	assert_int_equal(pf_bootstrap_default_config(x->store, x->file, &err), 0);
	assert_int_equal(err.code, 0);
	assert_int_equal(versions_of_default(x, &body), 1);
	assert_string_equal(body, good_cfg);
	free(body);
}

static void test_newer_version_never_overwritten(void **state)
{
	struct fx *x = *state;
	static const char v1[] = "profiling:\n  enabled: true\n";
	static const char v2[] = "profiling:\n  enabled: false\n";
	uint8_t h[32];
	pf_sha256(v1, strlen(v1), h);
	assert_int_equal(pf_store_config_put(x->store, "default", v1, strlen(v1), h, 1, NULL, NULL),
			 0);
	pf_sha256(v2, strlen(v2), h);
	assert_int_equal(pf_store_config_put(x->store, "default", v2, strlen(v2), h, 2, NULL, NULL),
			 0);
	/* Even a file equal to version 1 does not bring version 1 back. */
	write_text(x->file, v1);
	struct pf_error err = {0};
	assert_int_equal(pf_bootstrap_default_config(x->store, x->file, &err), 0);
	char *body = NULL;
	assert_int_equal(versions_of_default(x, &body), 2);
	assert_string_equal(body, v2);
	free(body);
}

static void test_bad_file_names_key_path(void **state)
{
	struct fx *x = *state;
	struct pf_error err = {0};
	write_text(x->file, "profiling:\n  sampling: {frequency_hz: 5000}\n");
	assert_int_equal(pf_bootstrap_default_config(x->store, x->file, &err), -EINVAL);
	assert_string_equal(err.path, "profiling.sampling.frequency_hz");
	assert_non_null(strstr(err.msg, "profiling.sampling.frequency_hz: must be 1..1000"));
	assert_non_null(strstr(err.msg, x->file));
	assert_int_equal(versions_of_default(x, NULL), 0);

	pf_error_clear(&err);
	write_text(x->file, "profiling:\n  sampling: {frequncy_hz: 99}\n");
	assert_int_equal(pf_bootstrap_default_config(x->store, x->file, &err), -EINVAL);
	assert_string_equal(err.path, "profiling.sampling.frequncy_hz");
	assert_int_equal(versions_of_default(x, NULL), 0);
}

static void test_bad_file_refused_even_with_stored_default(void **state)
{
	struct fx *x = *state;
	struct pf_error err = {0};
	write_text(x->file, good_cfg);
	assert_int_equal(pf_bootstrap_default_config(x->store, x->file, &err), 1);
	write_text(x->file, "profiling:\n  mode: sometimes\n");
	assert_int_equal(pf_bootstrap_default_config(x->store, x->file, &err), -EINVAL);
	assert_string_equal(err.path, "profiling.mode");
}

static void test_unreadable_and_oversized(void **state)
{
	struct fx *x = *state;
	struct pf_error err = {0};
	char missing[160];
	snprintf(missing, sizeof(missing), "%s/nope.yaml", x->dir);
	assert_int_equal(pf_bootstrap_default_config(x->store, missing, &err), -ENOENT);
	assert_string_equal(err.path, "default_config");

	/* 1 MiB + 1 byte of comment: refused before parsing. */
	FILE *fp = fopen(x->file, "w");
	assert_non_null(fp);
	assert_int_equal(fputc('#', fp), '#');
	for (size_t i = 0; i < ((size_t)1 << 20); i++)
		assert_int_equal(fputc('x', fp), 'x');
	assert_int_equal(fclose(fp), 0);
	pf_error_clear(&err);
	assert_int_equal(pf_bootstrap_default_config(x->store, x->file, &err), -EFBIG);
	assert_non_null(strstr(err.msg, "larger than 1 MiB"));
	assert_int_equal(versions_of_default(x, NULL), 0);
}

static bool token_role(struct fx *x, const char *tok, char *role, size_t n)
{
	uint8_t h[32];
	pf_sha256(tok, strlen(tok), h);
	return pf_store_token_lookup(x->store, h, role, n) == 0;
}

static void test_import_tokens(void **state)
{
	struct fx *x = *state;
	struct pf_error err = {0};
	char adm[160], agt[160], role[16];
	snprintf(adm, sizeof(adm), "%s/admin-secret", x->dir);
	snprintf(agt, sizeof(agt), "%s/agent-secret", x->dir);
	write_text(adm, "  Adm1nT0kenFromASecret0123456789\n");
	write_text(agt, "Ag3ntT0kenFromASecret0123456789");
	assert_int_equal(pf_bootstrap_import_token(x->store, adm, "admin", &err), 1);
	assert_int_equal(pf_bootstrap_import_token(x->store, agt, "agent", &err), 1);
	assert_true(token_role(x, "Adm1nT0kenFromASecret0123456789", role, sizeof(role)));
	assert_string_equal(role, "admin");
	assert_true(token_role(x, "Ag3ntT0kenFromASecret0123456789", role, sizeof(role)));
	assert_string_equal(role, "agent");
	/* The next start: already there, nothing added. */
	assert_int_equal(pf_bootstrap_import_token(x->store, adm, "admin", &err), 0);
	int64_t count = 0;
	assert_int_equal(pf_store_token_count(x->store, &count), 0);
	assert_int_equal(count, 2);
	/* Tokens exist: no generated token files. */
	assert_int_equal(pf_bootstrap_tokens(x->store, x->dir, &err), 0);
	char path[160];
	snprintf(path, sizeof(path), "%s/admin.token", x->dir);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(err.code, 0);
}

static void test_import_token_refusals(void **state)
{
	struct fx *x = *state;
	struct pf_error err = {0};
	char f[160];
	snprintf(f, sizeof(f), "%s/tok", x->dir);
	static const char *bad[] = {"", "\n\n", "short-token", "has a space in the middle 0123",
				    "ctl\x01characters0123456789"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_text(f, bad[i]);
		pf_error_clear(&err);
		assert_int_equal(pf_bootstrap_import_token(x->store, f, "agent", &err), -EINVAL);
		assert_string_equal(err.path, "tokens.agent_file");
	}
	pf_error_clear(&err);
	snprintf(f, sizeof(f), "%s/missing", x->dir);
	assert_int_equal(pf_bootstrap_import_token(x->store, f, "admin", &err), -ENOENT);
	assert_string_equal(err.path, "tokens.admin_file");
	int64_t count = 1;
	assert_int_equal(pf_store_token_count(x->store, &count), 0);
	assert_int_equal(count, 0);
}

static void test_flag_and_file_key(void **state)
{
	struct fx *x = *state;
	struct pf_controller_config c;
	struct pf_error err = {0};
	pf_controller_config_defaults(&c);
	assert_null(c.default_config);
	char *argv[] = {"profleet-controller", "--default-config", "/etc/profleet/default.yaml",
			NULL};
	assert_int_equal(pf_controller_config_args(&c, 3, argv, &err), 0);
	assert_string_equal(c.default_config, "/etc/profleet/default.yaml");
	pf_controller_config_release(&c);

	char cfgfile[160];
	snprintf(cfgfile, sizeof(cfgfile), "%s/controller.yaml", x->dir);
	write_text(cfgfile, "default_config: /cfg/profiling.yaml\n");
	pf_controller_config_defaults(&c);
	assert_int_equal(pf_controller_config_load(&c, cfgfile, &err), 0);
	assert_string_equal(c.default_config, "/cfg/profiling.yaml");
	/* The flag wins over the file. */
	char *argv2[] = {"profleet-controller", "--default-config=/x.yaml", "--config", cfgfile,
			 NULL};
	assert_int_equal(pf_controller_config_args(&c, 4, argv2, &err), 0);
	assert_string_equal(c.default_config, "/x.yaml");
	pf_controller_config_release(&c);

	write_text(cfgfile, "tokens:\n  admin_file: /s/admin\n  agent_file: /s/agent\n");
	pf_controller_config_defaults(&c);
	char *argv3[] = {"profleet-controller", "--config", cfgfile,
			 "--agent-token-file",	"/t/a",	    NULL};
	assert_int_equal(pf_controller_config_args(&c, 5, argv3, &err), 0);
	assert_string_equal(c.admin_token_file, "/s/admin");
	assert_string_equal(c.agent_token_file, "/t/a");
	pf_controller_config_release(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_stored_when_absent_then_kept, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_newer_version_never_overwritten, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_file_names_key_path, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_file_refused_even_with_stored_default, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_unreadable_and_oversized, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_import_tokens, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_import_token_refusals, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_flag_and_file_key, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
