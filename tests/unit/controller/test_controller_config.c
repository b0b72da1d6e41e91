/* test_controller_config.c — controller/config.c: defaults, the YAML file and flags (flags
 * win), every limit key at its bounds and one past them, and errors that name the key. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"

static int args(struct pf_controller_config *c, struct pf_error *err, const char *flag,
		const char *value)
{
	char *argv[] = {"profleet-controller", (char *)flag, (char *)value, NULL};
	optind = 0; /* getopt_long: start over for every parse */
	return pf_controller_config_args(c, 3, argv, err);
}

static void test_defaults(void **state)
{
	(void)state;
	struct pf_controller_config c;
	pf_controller_config_defaults(&c);
	assert_string_equal(c.listen_host, "127.0.0.1");
	assert_int_equal(c.port, 4320);
	assert_int_equal(c.max_conns_per_source, 4096);
	assert_int_equal(c.max_send_queue_bytes, 4u << 20);
	assert_int_equal(c.max_pending_per_source, 64);
	assert_int_equal(c.header_timeout_s, 5);
	assert_int_equal(c.replica_timeout_s, PF_REPLICA_TIMEOUT_DEFAULT_S);
	assert_int_equal(c.replica_timeout_s, 6);
	pf_controller_config_release(&c);
}

struct bound {
	const char *flag;
	const char *ok_lo, *ok_hi, *bad_lo, *bad_hi;
	const char *key;
};

static void test_limit_bounds(void **state)
{
	(void)state;
	static const struct bound b[] = {
	    {"--max-send-queue-bytes", "65536", "1073741824", "65535", "1073741825",
	     "opamp.max_send_queue_bytes"},
	    {"--max-pending-per-source", "0", "1000000", "-1", "1000001",
	     "http.max_pending_per_source"},
	    {"--header-timeout-seconds", "1", "300", "0", "301", "http.header_timeout_seconds"},
	    {"--max-connections-per-source", "0", "1000000", "-1", "1000001",
	     "opamp.max_connections_per_source"},
	    {"--replica-timeout-seconds", "3", "3600", "2", "3601",
	     "store.replica_timeout_seconds"},
	};
	for (size_t i = 0; i < sizeof(b) / sizeof(b[0]); i++) {
		struct pf_controller_config c;
		struct pf_error err = {0};
		pf_controller_config_defaults(&c);
		assert_int_equal(args(&c, &err, b[i].flag, b[i].ok_lo), 0);
		assert_int_equal(args(&c, &err, b[i].flag, b[i].ok_hi), 0);
		memset(&err, 0, sizeof(err));
		assert_int_equal(args(&c, &err, b[i].flag, b[i].bad_lo), -EINVAL);
		assert_non_null(strstr(err.msg, b[i].key));
		memset(&err, 0, sizeof(err));
		assert_int_equal(args(&c, &err, b[i].flag, b[i].bad_hi), -EINVAL);
		assert_non_null(strstr(err.msg, b[i].key));
		pf_controller_config_release(&c);
	}
	struct pf_controller_config c;
	struct pf_error err = {0};
	pf_controller_config_defaults(&c);
	assert_int_equal(args(&c, &err, "--max-send-queue-bytes", "262144"), 0);
	assert_int_equal(c.max_send_queue_bytes, 262144);
	assert_int_equal(args(&c, &err, "--max-pending-per-source", "0"), 0);
	assert_int_equal(c.max_pending_per_source, 0);
	assert_int_equal(args(&c, &err, "--header-timeout-seconds", "2"), 0);
	assert_int_equal(c.header_timeout_s, 2);
	assert_int_equal(args(&c, &err, "--replica-timeout-seconds", "10"), 0);
	assert_int_equal(c.replica_timeout_s, 10);
	pf_controller_config_release(&c);
}

static void test_file_then_flags(void **state)
{
	(void)state;
	char path[] = "/tmp/pf-ctlcfg-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	static const char yaml[] = "opamp:\n  max_send_queue_bytes: 131072\n"
				   "http:\n  max_pending_per_source: 8\n  header_timeout_seconds: 9\n";
	assert_int_equal(write(fd, yaml, sizeof(yaml) - 1), (ssize_t)sizeof(yaml) - 1);
	close(fd);
	struct pf_controller_config c;
	struct pf_error err = {0};
	pf_controller_config_defaults(&c);
	assert_int_equal(pf_controller_config_load(&c, path, &err), 0);
	assert_int_equal(c.max_send_queue_bytes, 131072);
	assert_int_equal(c.max_pending_per_source, 8);
	assert_int_equal(c.header_timeout_s, 9);
	assert_int_equal(args(&c, &err, "--header-timeout-seconds", "3"), 0);
	assert_int_equal(c.header_timeout_s, 3);
	pf_controller_config_release(&c);

	/* an unknown key in the new section is named */
	fd = open(path, O_WRONLY | O_TRUNC);
	static const char bad[] = "http:\n  header_timeout: 9\n";
	assert_true(fd >= 0);
	assert_int_equal(write(fd, bad, sizeof(bad) - 1), (ssize_t)sizeof(bad) - 1);
	close(fd);
	pf_controller_config_defaults(&c);
	memset(&err, 0, sizeof(err));
	assert_int_equal(pf_controller_config_load(&c, path, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "http.header_timeout"));
	pf_controller_config_release(&c);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_limit_bounds),
	    cmocka_unit_test(test_file_then_flags),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
