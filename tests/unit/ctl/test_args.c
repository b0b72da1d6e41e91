/* test_args.c — ctl/args.h: option tables (long, =value, short, repeatable, --, order), and
 * the shared value syntaxes: durations, integers, process rules, trace ids. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "args.h"

static const struct ctl_opt opts[] = {
    {"selector", 'l', CTL_OPT_STR, "S", ""},
    {"process", 0, CTL_OPT_LIST, "RULE", ""},
    {"wait", 'w', CTL_OPT_FLAG, NULL, ""},
    {NULL},
};
static const struct ctl_opt global[] = {
    {"output", 0, CTL_OPT_STR, "F", ""},
    {NULL},
};

static int parse(struct ctl_args *a, int argc, char **argv, struct pf_error *err)
{
	const struct ctl_opt *tabs[] = {opts, global, NULL};
	return ctl_args_parse(a, tabs, argc, argv, err);
}

static void test_forms(void **state)
{
	struct ctl_args a;
	struct pf_error err = {0};
	char *argv[] = {"pos1", "--selector",	    "env=prod", "--output=json", "-w", "--process",
			"a=b",	"--process=c=~d.*", "--",	"--pos2"};
	assert_int_equal(parse(&a, 10, argv, &err), 0);
	assert_string_equal(ctl_args_str(&a, "selector"), "env=prod");
	assert_string_equal(ctl_args_str(&a, "output"), "json");
	assert_true(ctl_args_flag(&a, "wait"));
	const struct ctl_optval *p = ctl_args_get(&a, "process");
	assert_non_null(p);
	assert_int_equal(p->n_list, 2);
	assert_string_equal(p->list[0], "a=b");
	assert_string_equal(p->list[1], "c=~d.*");
	assert_int_equal(a.n_pos, 2);
	assert_string_equal(a.pos[0], "pos1");
	assert_string_equal(a.pos[1], "--pos2");
	/* not given: NULL, and not an option at all: NULL too */
	char *argv2[] = {"-l", "x=y", "-"};
	assert_int_equal(parse(&a, 3, argv2, &err), 0);
	assert_string_equal(ctl_args_str(&a, "selector"), "x=y");
	assert_false(ctl_args_flag(&a, "wait"));
	assert_null(ctl_args_str(&a, "output"));
	assert_null(ctl_args_str(&a, "nope"));
	assert_string_equal(a.pos[0], "-"); /* "-" is a positional (stdin) */
	/* the last of a repeated single-value option wins */
	char *argv3[] = {"--selector", "a=1", "--selector", "b=2"};
	assert_int_equal(parse(&a, 4, argv3, &err), 0);
	assert_string_equal(ctl_args_str(&a, "selector"), "b=2");
}

static void test_errors(void **state)
{
	struct ctl_args a;
	struct pf_error err = {0};
	char *unknown[] = {"--nope"};
	assert_int_equal(parse(&a, 1, unknown, &err), -EINVAL);
	assert_string_equal(err.msg, "unknown option --nope");
	pf_error_clear(&err);
	char *missing[] = {"--selector"};
	assert_int_equal(parse(&a, 1, missing, &err), -EINVAL);
	assert_string_equal(err.msg, "--selector needs a value (S)");
	pf_error_clear(&err);
	char *flagval[] = {"--wait=yes"};
	assert_int_equal(parse(&a, 1, flagval, &err), -EINVAL);
	assert_string_equal(err.msg, "--wait takes no value");
	pf_error_clear(&err);
	char *many[] = {"1", "2", "3", "4", "5"};
	assert_int_equal(parse(&a, 5, many, &err), -EINVAL);
	assert_string_equal(err.msg, "unexpected argument \"5\"");
	pf_error_clear(&err);
	char *shortbad[] = {"-wl"}; /* no bundling */
	assert_int_equal(parse(&a, 1, shortbad, &err), -EINVAL);
	pf_error_clear(&err);
	char *lots[CTL_ARGS_MAX_LIST * 2 + 2];
	for (int i = 0; i < CTL_ARGS_MAX_LIST + 1; i++) {
		lots[2 * i] = "--process";
		lots[2 * i + 1] = "a=b";
	}
	assert_int_equal(parse(&a, 2 * (CTL_ARGS_MAX_LIST + 1), lots, &err), -EINVAL);
	assert_string_equal(err.msg, "--process: at most 16 values");
}

static void test_duration(void **state)
{
	static const struct {
		const char *in;
		uint64_t s;
	} ok[] = {{"30s", 30},	   {"5m", 300},	   {"1h", 3600}, {"90", 90},
		  {"1h30m", 5400}, {"2d", 172800}, {"1m1s", 61}, {"3660d", 3660ULL * 86400}};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		uint64_t s = 0;
		struct pf_error err = {0};
		assert_int_equal(ctl_parse_duration("--d", ok[i].in, &s, &err), 0);
		assert_int_equal(s, ok[i].s);
	}
	static const char *bad[] = {"",	    "s",    "30x",	  "-5s", "1.5h",
				    "1h30", "30 s", "1s2s3s4s5s", "h1"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t s = 77;
		struct pf_error err = {0};
		assert_int_equal(ctl_parse_duration("--duration", bad[i], &s, &err), -EINVAL);
		assert_int_equal(s, 77);
		assert_non_null(strstr(err.msg, "--duration: expected a duration"));
	}
	static const char *range[] = {"0", "0s", "3661d", "99999999999999999999s", "9999999h"};
	for (size_t i = 0; i < sizeof(range) / sizeof(range[0]); i++) {
		uint64_t s;
		struct pf_error err = {0};
		assert_int_equal(ctl_parse_duration("--since", range[i], &s, &err), -ERANGE);
		assert_non_null(strstr(err.msg, "--since: must be 1s..3660d"));
	}
}

static void test_int(void **state)
{
	int64_t v;
	struct pf_error err = {0};
	assert_int_equal(ctl_parse_int("--limit", "10", 1, 1000, &v, &err), 0);
	assert_int_equal(v, 10);
	assert_int_equal(ctl_parse_int("--priority", "-1000000", -1000000, 1000000, &v, &err), 0);
	assert_int_equal(v, -1000000);
	assert_int_equal(ctl_parse_int("--limit", "0", 1, 1000, &v, &err), -ERANGE);
	assert_string_equal(err.msg, "--limit: must be 1..1000, got 0");
	pf_error_clear(&err);
	static const char *bad[] = {"", "1x", " 1", "0x10", "99999999999999999999"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		pf_error_clear(&err);
		assert_int_equal(ctl_parse_int("--limit", bad[i], 1, 1000, &v, &err), -EINVAL);
	}
}

static void test_process_rules(void **state)
{
	struct pf_filter f;
	struct pf_error err = {0};
	assert_int_equal(ctl_parse_process_rule("--process[0]", "service.name=checkout", &f, &err),
			 0);
	assert_string_equal(f.key, "service.name");
	assert_int_equal(f.match, PF_MATCH_STRICT);
	assert_string_equal(f.value, "checkout");
	ctl_rule_release(&f);
	assert_int_equal(ctl_parse_process_rule("--process[0]",
						"process.executable.name=~java|python[0-9]*", &f,
						&err),
			 0);
	assert_int_equal(f.match, PF_MATCH_REGEXP);
	assert_string_equal(f.value, "java|python[0-9]*");
	ctl_rule_release(&f);
	/* '=' inside the value stays in the value */
	assert_int_equal(ctl_parse_process_rule("--process[0]", "k8s.pod.name=a=b", &f, &err), 0);
	assert_string_equal(f.value, "a=b");
	ctl_rule_release(&f);

	assert_int_equal(ctl_parse_process_rule("--process[1]", "service.name", &f, &err), -EINVAL);
	assert_string_equal(err.msg, "--process[1]: expected key=value or key=~regexp, got "
				     "\"service.name\"");
	pf_error_clear(&err);
	assert_int_equal(ctl_parse_process_rule("--process[0]", "=x", &f, &err), -EINVAL);
	pf_error_clear(&err);
	/* the config's own checks: unknown key, bad regexp, non-decimal pid */
	assert_int_equal(ctl_parse_process_rule("--process[2]", "user=root", &f, &err), -EINVAL);
	assert_string_equal(err.path, "--process[2].key");
	assert_null(f.key);
	pf_error_clear(&err);
	assert_int_equal(ctl_parse_process_rule("--process[0]", "service.name=~a++", &f, &err),
			 -EINVAL);
	assert_string_equal(err.path, "--process[0].value");
	pf_error_clear(&err);
	assert_true(ctl_parse_process_rule("--process[0]", "process.pid=12a", &f, &err) < 0);
	assert_string_equal(err.path, "--process[0].value");
}

static void test_trace_id(void **state)
{
	struct pf_error err = {0};
	assert_int_equal(ctl_check_trace_id("--trace-id", "4bf92f3577b34da6a3ce929d0e0e4736", &err),
			 0);
	assert_int_equal(ctl_check_trace_id("--trace-id", "4BF92F3577B34DA6A3CE929D0E0E4736", &err),
			 0);
	static const char *bad[] = {
	    "", "4bf92f3577b34da6a3ce929d0e0e473", "00000000000000000000000000000000",
	    "4bf92f3577b34da6a3ce929d0e0e4736a", "zbf92f3577b34da6a3ce929d0e0e4736"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		pf_error_clear(&err);
		assert_int_equal(ctl_check_trace_id("--trace-id", bad[i], &err), -EINVAL);
		assert_non_null(
		    strstr(err.msg, "--trace-id: expected a trace id of 32 hex digits"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_forms),	  cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_duration),	  cmocka_unit_test(test_int),
	    cmocka_unit_test(test_process_rules), cmocka_unit_test(test_trace_id),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
