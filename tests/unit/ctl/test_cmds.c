/* test_cmds.c — ctl/cmds.h: finding the command in argv (global options before and after it,
 * groups, help forms), positional counts, unknown commands, and the generated bash completion
 * script (every command and option in it; bash accepts its syntax). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cmds.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void test_find(void **state)
{
	const struct ctl_cmd *cmd;
	struct ctl_args a;
	struct pf_error err = {0};
	char *v1[] = {"profleetctl",   "--server", "http://x:1",
		      "--output=json", "agents",   "--selector",
		      "env=prod",      "--token",  "t"};
	assert_int_equal(ctl_cmd_parse(ARGC(v1), v1, &cmd, &a, &err), 0);
	assert_non_null(cmd);
	assert_string_equal(cmd->name, "agents");
	assert_null(cmd->group);
	assert_string_equal(ctl_args_str(&a, "server"), "http://x:1");
	assert_string_equal(ctl_args_str(&a, "output"), "json");
	assert_string_equal(ctl_args_str(&a, "selector"), "env=prod");
	assert_string_equal(ctl_args_str(&a, "token"), "t");
	assert_int_equal(a.n_pos, 0);

	char *v2[] = {"profleetctl", "config", "--token-file", "/t", "set", "fast", "fast.yaml"};
	assert_int_equal(ctl_cmd_parse(ARGC(v2), v2, &cmd, &a, &err), 0);
	assert_string_equal(cmd->group, "config");
	assert_string_equal(cmd->name, "set");
	assert_int_equal(a.n_pos, 2);
	assert_string_equal(a.pos[0], "fast");
	assert_string_equal(a.pos[1], "fast.yaml");
	assert_string_equal(ctl_args_str(&a, "token-file"), "/t");

	char *v3[] = {"profleetctl", "capture",
		      "--agents",    "env=prod",
		      "--process",   "service.name=checkout",
		      "--process",   "k8s.pod.name=~web-.*",
		      "-d",	     "30s",
		      "--wait"};
	assert_int_equal(ctl_cmd_parse(ARGC(v3), v3, &cmd, &a, &err), 0);
	assert_string_equal(cmd->name, "capture");
	assert_int_equal(ctl_args_get(&a, "process")->n_list, 2);
	assert_string_equal(ctl_args_str(&a, "duration"), "30s");
	assert_true(ctl_args_flag(&a, "wait"));
	assert_true(cmd->needs_server);

	char *v4[] = {"profleetctl", "config", "validate", "x.yaml"};
	assert_int_equal(ctl_cmd_parse(ARGC(v4), v4, &cmd, &a, &err), 0);
	assert_false(cmd->needs_server); /* local: no server, no config file */
}

static void test_help_forms(void **state)
{
	const struct ctl_cmd *cmd;
	struct ctl_args a;
	struct pf_error err = {0};
	char *v0[] = {"profleetctl"};
	assert_int_equal(ctl_cmd_parse(ARGC(v0), v0, &cmd, &a, &err), 0);
	assert_null(cmd);
	char *v1[] = {"profleetctl", "--help"};
	assert_int_equal(ctl_cmd_parse(ARGC(v1), v1, &cmd, &a, &err), 0);
	assert_null(cmd);
	assert_true(ctl_args_flag(&a, "help"));
	char *v2[] = {"profleetctl", "help", "config", "get"};
	assert_int_equal(ctl_cmd_parse(ARGC(v2), v2, &cmd, &a, &err), 0);
	assert_string_equal(cmd->name, "get");
	assert_true(ctl_args_flag(&a, "help"));
	char *v2b[] = {"profleetctl", "config", "--help"};
	assert_int_equal(ctl_cmd_parse(ARGC(v2b), v2b, &cmd, &a, &err), 0);
	assert_null(cmd); /* the overview */
	char *v2c[] = {"profleetctl", "config"};
	assert_int_equal(ctl_cmd_parse(ARGC(v2c), v2c, &cmd, &a, &err), -EINVAL);
	assert_string_equal(err.msg, "config: expected one of get, set, versions, validate");
	pf_error_clear(&err);
	/* --help skips the positional count check */
	char *v3[] = {"profleetctl", "pprof", "-h"};
	assert_int_equal(ctl_cmd_parse(ARGC(v3), v3, &cmd, &a, &err), 0);
	assert_string_equal(cmd->name, "pprof");
	assert_true(ctl_args_flag(&a, "help"));

	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ctl_print_help(f, cmd);
	fclose(f);
	assert_non_null(strstr(buf, "Usage: profleetctl pprof ID [-o FILE]"));
	assert_non_null(strstr(buf, "-o, --out FILE"));
	assert_non_null(strstr(buf, "Exit status: 0 ok"));
	free(buf);
}

static void test_errors(void **state)
{
	const struct ctl_cmd *cmd;
	struct ctl_args a;
	struct pf_error err = {0};
	char *v1[] = {"profleetctl", "frobnicate"};
	assert_int_equal(ctl_cmd_parse(ARGC(v1), v1, &cmd, &a, &err), -EINVAL);
	assert_string_equal(err.msg, "unknown command \"frobnicate\"");
	pf_error_clear(&err);
	char *v2[] = {"profleetctl", "config", "delete", "x"};
	assert_int_equal(ctl_cmd_parse(ARGC(v2), v2, &cmd, &a, &err), -EINVAL);
	assert_string_equal(err.msg,
			    "config: expected one of get, set, versions, validate, got delete");
	pf_error_clear(&err);
	char *v3[] = {"profleetctl", "config", "set", "only-name"};
	assert_int_equal(ctl_cmd_parse(ARGC(v3), v3, &cmd, &a, &err), -EINVAL);
	assert_string_equal(err.msg, "usage: profleetctl config set NAME FILE");
	pf_error_clear(&err);
	char *v4[] = {"profleetctl", "agents", "extra"};
	assert_int_equal(ctl_cmd_parse(ARGC(v4), v4, &cmd, &a, &err), -EINVAL);
	pf_error_clear(&err);
	/* an option of another command is unknown here */
	char *v5[] = {"profleetctl", "agents", "--duration", "30s"};
	assert_int_equal(ctl_cmd_parse(ARGC(v5), v5, &cmd, &a, &err), -EINVAL);
	assert_string_equal(err.msg, "unknown option --duration");
	pf_error_clear(&err);
	/* a global option's value is not taken for the command */
	char *v6[] = {"profleetctl", "--output", "agents"};
	assert_int_equal(ctl_cmd_parse(ARGC(v6), v6, &cmd, &a, &err), 0);
	assert_null(cmd);
}

static void test_completion(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ctl_print_completion_bash(f);
	fclose(f);
	static const char *want[] = {
	    "complete -F _profleetctl profleetctl",
	    "compgen -W \"agents config assign capture captures profiles pprof top rollouts "
	    "rollout completion help\"",
	    "compgen -W \"start pause resume rollback cancel\"",
	    "compgen -W \"get set versions validate\"",
	    "\"capture\") opts=\" --agents --process --duration --frequency --type --trace-id "
	    "--note --wait --wait-timeout\"",
	    "\"config get\") opts=\" --version\"",
	    "--output) COMPREPLY=($(compgen -W \"table json\"",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!strstr(buf, want[i]))
			fail_msg("completion script lacks: %s", want[i]);
	/* bash itself accepts the syntax */
	char path[] = "/tmp/test_ctl_completion.XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "bash -n %s", path);
	assert_int_equal(system(cmd), 0);
	unlink(path);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_find),
	    cmocka_unit_test(test_help_forms),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_completion),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
