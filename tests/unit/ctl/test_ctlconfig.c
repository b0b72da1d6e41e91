/* test_ctlconfig.c — ctl/ctlconfig.h: precedence flags > env > file > default, the default
 * file location, the 0600 rule for a file holding a token, token files, and the file's
 * syntax errors. Real files in a temporary directory. */
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

#include "ctlconfig.h"

static char dir[64];

static const char *path_in(const char *name)
{
	static char p[4][256];
	static int k;
	k = (k + 1) % 4;
	snprintf(p[k], sizeof(p[k]), "%s/%s", dir, name);
	return p[k];
}

static const char *write_file(const char *name, const char *text, mode_t mode)
{
	const char *p = path_in(name);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(p, mode), 0);
	return p;
}

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/test_ctlconfig.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_default(void **state)
{
	struct ctl_config c;
	struct ctl_config_sources s = {.env_home = "/nonexistent-home"};
	assert_int_equal(ctl_config_resolve(&s, &c, NULL), 0);
	assert_string_equal(c.server, CTL_DEFAULT_SERVER);
	assert_null(c.token);
	assert_null(c.file);
	assert_false(c.insecure_skip_verify);
	ctl_config_release(&c);
}

static void test_precedence(void **state)
{
	const char *file = write_file("p.yaml",
				      "server: https://file:4320\ntoken: file-token\n"
				      "ca_file: /ca.pem\ninsecure_skip_verify: yes\n",
				      0600);
	struct ctl_config c;
	struct pf_error err = {0};
	/* file only */
	struct ctl_config_sources s = {.config_file = file};
	assert_int_equal(ctl_config_resolve(&s, &c, &err), 0);
	assert_string_equal(c.server, "https://file:4320");
	assert_string_equal(c.token, "file-token");
	assert_string_equal(c.ca_file, "/ca.pem");
	assert_true(c.insecure_skip_verify);
	assert_string_equal(c.file, file);
	ctl_config_release(&c);
	/* env over file */
	s.env_server = "http://env:1";
	s.env_token = "env-token";
	assert_int_equal(ctl_config_resolve(&s, &c, &err), 0);
	assert_string_equal(c.server, "http://env:1");
	assert_string_equal(c.token, "env-token");
	assert_string_equal(c.ca_file, "/ca.pem");
	ctl_config_release(&c);
	/* flags over env: --token-file, then --token over --token-file */
	const char *tf = write_file("tok", "\n  flag-file-token  \nsecond line\n", 0600);
	s.server = "http://flag:2";
	s.token_file = tf;
	s.ca_file = "/flag-ca.pem";
	assert_int_equal(ctl_config_resolve(&s, &c, &err), 0);
	assert_string_equal(c.server, "http://flag:2");
	assert_string_equal(c.token, "flag-file-token");
	assert_string_equal(c.ca_file, "/flag-ca.pem");
	ctl_config_release(&c);
	s.token = "flag-token";
	assert_int_equal(ctl_config_resolve(&s, &c, &err), 0);
	assert_string_equal(c.token, "flag-token");
	ctl_config_release(&c);
	/* empty env values count as unset */
	struct ctl_config_sources e = {.config_file = file, .env_server = "", .env_token = ""};
	assert_int_equal(ctl_config_resolve(&e, &c, &err), 0);
	assert_string_equal(c.server, "https://file:4320");
	assert_string_equal(c.token, "file-token");
	ctl_config_release(&c);
}

static void test_default_locations(void **state)
{
	char xdg[256], home[256];
	snprintf(xdg, sizeof(xdg), "%s/xdg", dir);
	snprintf(home, sizeof(home), "%s/home", dir);
	assert_int_equal(mkdir(xdg, 0700), 0);
	assert_int_equal(mkdir(path_in("xdg/profleet"), 0700), 0);
	assert_int_equal(mkdir(home, 0700), 0);
	assert_int_equal(mkdir(path_in("home/.config"), 0700), 0);
	assert_int_equal(mkdir(path_in("home/.config/profleet"), 0700), 0);
	write_file("xdg/profleet/ctl.yaml", "server: http://xdg:1\n", 0644);
	write_file("home/.config/profleet/ctl.yaml", "server: http://home:1\n", 0644);
	struct ctl_config c;
	struct ctl_config_sources s = {.env_xdg_config_home = xdg, .env_home = home};
	assert_int_equal(ctl_config_resolve(&s, &c, NULL), 0);
	assert_string_equal(c.server, "http://xdg:1");
	ctl_config_release(&c);
	s.env_xdg_config_home = NULL;
	assert_int_equal(ctl_config_resolve(&s, &c, NULL), 0);
	assert_string_equal(c.server, "http://home:1");
	ctl_config_release(&c);
	/* an explicit --config that does not exist is an error, not a fallback */
	s.config_file = path_in("missing.yaml");
	struct pf_error err = {0};
	assert_int_equal(ctl_config_resolve(&s, &c, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "missing.yaml: No such file or directory"));
}

static void test_token_file_mode(void **state)
{
	struct ctl_config c;
	struct pf_error err = {0};
	const char *f = write_file("open.yaml", "server: http://x:1\ntoken: secret\n", 0644);
	struct ctl_config_sources s = {.config_file = f};
	assert_int_equal(ctl_config_resolve(&s, &c, &err), -EPERM);
	char want[512];
	snprintf(want, sizeof(want),
		 "%s holds a token but its mode is 0644 (readable by others); run: chmod 600 %s", f,
		 f);
	assert_string_equal(err.msg, want);
	assert_null(c.server); /* released on failure */
	/* group-readable is refused too; 0600 and 0400 are fine */
	pf_error_clear(&err);
	assert_int_equal(chmod(f, 0640), 0);
	assert_int_equal(ctl_config_resolve(&s, &c, &err), -EPERM);
	assert_int_equal(chmod(f, 0400), 0);
	pf_error_clear(&err);
	assert_int_equal(ctl_config_resolve(&s, &c, &err), 0);
	ctl_config_release(&c);
	/* a file without a token may be world-readable */
	s.config_file = write_file("notoken.yaml", "server: http://x:1\n", 0644);
	assert_int_equal(ctl_config_resolve(&s, &c, &err), 0);
	assert_null(c.token);
	ctl_config_release(&c);
}

static void test_bad_files(void **state)
{
	static const struct {
		const char *text, *msg;
	} bad[] = {
	    {"server: http://x\nport: 1\n", "line 2: unknown key \"port\""},
	    {"server: [a, b]\n", "server: must be a plain value, not a list"},
	    {"server: {a: b}\n", "server: must be a plain value, not a map"},
	    {"- a\n- b\n", "must be a map of keys"},
	    {"insecure_skip_verify: maybe\n", "insecure_skip_verify: must be true or false"},
	    {"server: a\nserver: b\n", "server: duplicate key"},
	    {"server: \"\"\n", "server: must not be empty"},
	    {"server: \"open\n", "line 2, column 1: found unexpected end of stream"},
	    {"server: ftp://x\n", "must start with http:// or https://"},
	    {"server: &x http://a\nca_file: *x\n", "aliases are not allowed"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *f = write_file("bad.yaml", bad[i].text, 0600);
		struct ctl_config c;
		struct pf_error err = {0};
		struct ctl_config_sources s = {.config_file = f};
		assert_true(ctl_config_resolve(&s, &c, &err) < 0);
		if (!strstr(err.msg, bad[i].msg))
			fail_msg("%s: got \"%s\", want \"%s\"", bad[i].text, err.msg, bad[i].msg);
	}
	/* empty file: empty config */
	struct ctl_config c;
	struct ctl_config_sources s = {.config_file = write_file("empty.yaml", "", 0600)};
	assert_int_equal(ctl_config_resolve(&s, &c, NULL), 0);
	assert_string_equal(c.server, CTL_DEFAULT_SERVER);
	ctl_config_release(&c);
	/* token files: empty, too big */
	struct pf_error err = {0};
	char *tok = NULL;
	assert_int_equal(ctl_config_read_token_file(write_file("t0", " \n\n", 0600), &tok, &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "no token in the file"));
	char big[CTL_TOKEN_MAX_FILE + 2];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	pf_error_clear(&err);
	assert_int_equal(ctl_config_read_token_file(write_file("t1", big, 0600), &tok, &err),
			 -E2BIG);
	assert_null(tok);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_default),	      cmocka_unit_test(test_precedence),
	    cmocka_unit_test(test_default_locations), cmocka_unit_test(test_token_file_mode),
	    cmocka_unit_test(test_bad_files),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
