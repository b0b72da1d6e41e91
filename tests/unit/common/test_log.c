/* test_log.c — pf/log.h: level parsing, level checked before formatting, line format,
 * ident/origin, raw lines lose their newline, long lines stay one line. stderr is captured
 * through a pipe. */
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pf/log.h"

static int saved_fd = -1;
static int pipe_rd = -1;

static void capture_begin(void)
{
	int p[2];

	assert_int_equal(pipe2(p, O_NONBLOCK), 0);
	saved_fd = dup(STDERR_FILENO);
	assert_true(saved_fd >= 0);
	assert_true(dup2(p[1], STDERR_FILENO) >= 0);
	close(p[1]);
	pipe_rd = p[0];
}

/* Restores stderr and returns what was written (NUL-terminated, at most cap - 1 bytes). */
static size_t capture_end(char *out, size_t cap)
{
	size_t n = 0;

	assert_true(dup2(saved_fd, STDERR_FILENO) >= 0);
	close(saved_fd);
	for (;;) {
		ssize_t r = read(pipe_rd, out + n, cap - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(pipe_rd);
	out[n] = 0;
	return n;
}

static int setup(void **state)
{
	pf_log_set_level(PF_LOG_INFO);
	pf_log_set_ident("profleet");
	return 0;
}

static void test_parse_level(void **state)
{
	assert_int_equal(pf_log_parse_level("error"), PF_LOG_ERROR);
	assert_int_equal(pf_log_parse_level("warn"), PF_LOG_WARN);
	assert_int_equal(pf_log_parse_level("info"), PF_LOG_INFO);
	assert_int_equal(pf_log_parse_level("debug"), PF_LOG_DEBUG);
	assert_int_equal(pf_log_parse_level("DEBUG"), PF_LOG_DEBUG);
	assert_int_equal(pf_log_parse_level("Warn"), PF_LOG_WARN);
	assert_int_equal(pf_log_parse_level("warning"), -EINVAL);
	assert_int_equal(pf_log_parse_level("trace"), -EINVAL);
	assert_int_equal(pf_log_parse_level(""), -EINVAL);
	assert_int_equal(pf_log_parse_level(NULL), -EINVAL);
}

static int side_effects;
static int bump(void)
{
	return ++side_effects;
}

static void test_level_checked_before_formatting(void **state)
{
	char out[4096];

	side_effects = 0;
	pf_log_set_level(PF_LOG_WARN);
	capture_begin();
	pf_log_info("info %d", bump());
	pf_log_debug("debug %d", bump());
	pf_log_warn("warn %d", bump());
	pf_log_error("error %d", bump());
	capture_end(out, sizeof(out));
	/* Disabled levels never evaluated their arguments. */
	assert_int_equal(side_effects, 2);
	assert_null(strstr(out, "info 1"));
	assert_null(strstr(out, "debug"));
	assert_non_null(strstr(out, "warn  profleet: warn 1\n"));
	assert_non_null(strstr(out, "error profleet: error 2\n"));
}

static void test_line_format(void **state)
{
	char out[4096];
	regex_t re;

	pf_log_set_ident("controller");
	capture_begin();
	pf_log_info("%d agents", 3);
	size_t n = capture_end(out, sizeof(out));
	assert_int_equal(
	    regcomp(&re,
		    "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
		    "info  controller: 3 agents\n$",
		    REG_EXTENDED | REG_NOSUB),
	    0);
	int m = regexec(&re, out, 0, NULL, 0);
	regfree(&re);
	if (m != 0)
		fail_msg("unexpected line (%zu bytes): '%s'", n, out);
}

static void test_raw_lines(void **state)
{
	char out[4096];

	capture_begin();
	pf_log_emit_raw(PF_LOG_WARN, "lws", "client connect failed\r\n");
	pf_log_emit_raw(PF_LOG_DEBUG, "libbpf", "hidden at info level\n");
	pf_log_emit_raw(PF_LOG_ERROR, "lws", NULL);
	capture_end(out, sizeof(out));
	assert_non_null(strstr(out, "warn  lws: client connect failed\n"));
	assert_null(strstr(out, "\r"));
	assert_null(strstr(out, "libbpf"));
	/* Exactly one line. */
	assert_int_equal(strchr(out, '\n') - out + 1, (long)strlen(out));
}

static void test_long_line_is_one_line(void **state)
{
	char out[8192], big[5000];

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	capture_begin();
	pf_log_error("%s", big);
	pf_log_emit_raw(PF_LOG_ERROR, "raw", big);
	size_t n = capture_end(out, sizeof(out));
	/* Two lines, each capped at 2048 bytes including the newline. */
	char *nl = strchr(out, '\n');
	assert_non_null(nl);
	assert_true(nl - out + 1 <= 2048);
	assert_true(n - (size_t)(nl - out + 1) <= 2048);
	assert_int_equal(out[n - 1], '\n');
	assert_null(memchr(nl + 1, '\n', n - (size_t)(nl - out) - 2));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_parse_level, setup),
	    cmocka_unit_test_setup(test_level_checked_before_formatting, setup),
	    cmocka_unit_test_setup(test_line_format, setup),
	    cmocka_unit_test_setup(test_raw_lines, setup),
	    cmocka_unit_test_setup(test_long_line_is_one_line, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
