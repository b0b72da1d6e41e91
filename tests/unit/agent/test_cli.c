/* test_cli.c — agent/cli.c (options, token file) and the URL forms of agent/opamp_client.c. */
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

#include "cli.h"
#include "opamp/opamp_client.h"
#include "pf/log.h"
#include "state.h"

static int parse(struct agent_opts *o, struct pf_error *err, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;
	argv[argc++] = (char *)"profleet-agent";
	va_start(ap, err);
	for (char *a; (a = va_arg(ap, char *)) != NULL && argc < 31;)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	return agent_opts_parse(argc, argv, o, err);
}

static void test_defaults(void **unused)
{
	struct agent_opts o;
	assert_int_equal(parse(&o, NULL, NULL), 0);
	assert_null(o.server_url);
	assert_string_equal(o.state_dir, AGENT_DEFAULT_STATE_DIR);
	assert_int_equal(o.heartbeat_s, 30);
	assert_int_equal(o.health_figures_s, 30);
	assert_int_equal(o.log_level, PF_LOG_INFO);
	assert_int_equal(o.max_message_bytes, (size_t)64 << 20);
}

static void test_all_flags(void **unused)
{
	struct agent_opts o;
	struct pf_error err = {0};
	assert_int_equal(parse(&o, &err, "--config", "c.yaml", "--server", "wss://h:1/v1/opamp",
			       "--token-file", "t", "--state-dir", "/s", "--label", "env=prod",
			       "--label", "team=a", "--log-level", "debug", "--heartbeat-seconds",
			       "0", "--ca-file", "ca.pem", "--health-figures-seconds", "2", NULL),
			 0);
	assert_string_equal(o.config_file, "c.yaml");
	assert_string_equal(o.server_url, "wss://h:1/v1/opamp");
	assert_string_equal(o.token_file, "t");
	assert_string_equal(o.state_dir, "/s");
	assert_string_equal(o.ca_file, "ca.pem");
	assert_int_equal(o.n_labels, 2);
	assert_string_equal(o.labels[1], "team=a");
	assert_int_equal(o.log_level, PF_LOG_DEBUG);
	assert_int_equal(o.heartbeat_s, 0);
	assert_int_equal(o.health_figures_s, 2);
}

static void test_bad_flags(void **unused)
{
	struct agent_opts o;
	struct pf_error err = {0};
	assert_int_equal(parse(&o, &err, "--label", "novalue", NULL), -EINVAL);
	assert_non_null(strstr(err.msg, "--label"));
	pf_error_clear(&err);
	assert_int_equal(parse(&o, &err, "--log-level", "loud", NULL), -EINVAL);
	pf_error_clear(&err);
	assert_int_equal(parse(&o, &err, "--heartbeat-seconds", "-1", NULL), -EINVAL);
	pf_error_clear(&err);
	assert_int_equal(parse(&o, &err, "--health-figures-seconds", "0", NULL), -EINVAL);
	assert_non_null(strstr(err.msg, "1..3600"));
	pf_error_clear(&err);
	assert_int_equal(parse(&o, &err, "--bogus", NULL), -EINVAL);
	pf_error_clear(&err);
	assert_int_equal(parse(&o, &err, "extra", NULL), -EINVAL);
	pf_error_clear(&err);
	assert_int_equal(parse(&o, &err, "--token-file", "x", NULL), -EINVAL);
}

static void test_token_file(void **unused)
{
	char path[] = "/tmp/pf-agent-token-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	char *tok = NULL;
	struct pf_error err = {0};

	assert_int_equal(agent_write_file_atomic(path, "  pf_abc123 \n\n", 14, 0600), 0);
	assert_int_equal(agent_token_load(path, &tok, &err), 0);
	assert_string_equal(tok, "pf_abc123");
	free(tok);

	assert_int_equal(agent_write_file_atomic(path, " \n", 2, 0600), 0);
	assert_int_equal(agent_token_load(path, &tok, &err), -EINVAL);
	pf_error_clear(&err);
	assert_int_equal(agent_write_file_atomic(path, "a b", 3, 0600), 0);
	assert_int_equal(agent_token_load(path, &tok, &err), -EINVAL);
	unlink(path);
	pf_error_clear(&err);
	assert_int_equal(agent_token_load(path, &tok, &err), -ENOENT);
}

/* The token goes in plain text only to loopback, unless --allow-insecure; TLS flags. */
static void test_plaintext_token(void **unused)
{
	struct agent_opts o;
	struct pf_error err = {0};
	const char *ok[] = {"ws://127.0.0.1:4320",	 "ws://127.3.2.1:1/v1/opamp",
			    "ws://localhost:1",		 "http://[::1]:4320",
			    "ws://[::ffff:127.0.0.1]:1", "wss://10.0.0.1:1",
			    "https://ctl.example:443"};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		assert_int_equal(parse(&o, &err, "--server", ok[i], "--token-file", "t", NULL), 0);
	const char *bad[] = {"ws://10.0.0.1:4320",	 "http://ctl.example",
			     "ws://[2001:db8::1]:1",	 "ws://128.0.0.1:1",
			     "ws://[::ffff:10.0.0.1]:1", "ws://localhost.evil:1"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err = (struct pf_error){0};
		assert_int_equal(parse(&o, &err, "--server", bad[i], "--token-file", "t", NULL),
				 -EINVAL);
		assert_non_null(strstr(err.msg, "refusing to send the agent token in plain text"));
		assert_int_equal(parse(&o, &err, "--server", bad[i], "--token-file", "t",
				       "--allow-insecure", NULL),
				 0);
		assert_true(o.allow_insecure);
		/* No token, nothing to leak. */
		assert_int_equal(parse(&o, &err, "--server", bad[i], NULL), 0);
	}
	assert_int_equal(parse(&o, &err, "--server", "wss://h:1", "--client-cert", "c.pem",
			       "--client-key", "k.pem", NULL),
			 0);
	assert_string_equal(o.client_cert, "c.pem");
	assert_string_equal(o.client_key, "k.pem");
	err = (struct pf_error){0};
	assert_int_equal(parse(&o, &err, "--server", "wss://h:1", "--client-cert", "c.pem", NULL),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "go together"));
	assert_int_equal(parse(&o, &err, "--client-cert", "c.pem", "--client-key", "k.pem", NULL),
			 -EINVAL);
}

static void test_metrics_flags(void **unused)
{
	struct agent_opts o;
	struct pf_error err = {0};
	(void)unused;
	assert_int_equal(parse(&o, &err, NULL), 0);
	assert_null(o.metrics_listen);
	assert_false(o.no_sampler);
	assert_int_equal(
	    parse(&o, &err, "--metrics-listen", "127.0.0.1:9464", "--no-sampler", NULL), 0);
	assert_string_equal(o.metrics_listen, "127.0.0.1:9464");
	assert_true(o.no_sampler);
	assert_false(o.frame_pointers_only);
	assert_int_equal(parse(&o, &err, "--frame-pointers-only", NULL), 0);
	assert_true(o.frame_pointers_only);
	assert_int_equal(parse(&o, &err, "--metrics-listen", "[::1]:9464", NULL), 0);
	assert_string_equal(o.metrics_listen, "[::1]:9464");
	/* a bad address is a usage error naming the flag */
	err = (struct pf_error){0};
	assert_int_equal(parse(&o, &err, "--metrics-listen", "127.0.0.1", NULL), -EINVAL);
	assert_non_null(strstr(err.msg, "--metrics-listen"));
	err = (struct pf_error){0};
	assert_int_equal(parse(&o, &err, "--metrics-listen", "127.0.0.1:70000", NULL), -EINVAL);
	assert_non_null(strstr(err.msg, "port must be 0..65535"));
	err = (struct pf_error){0};
	assert_int_equal(parse(&o, &err, "--metrics-listen", NULL), -EINVAL);
	err = (struct pf_error){0};
	assert_int_equal(parse(&o, &err, "--no-sampler=1", NULL), -EINVAL);
}

static void test_urls(void **unused)
{
	struct agent_url u;
	struct pf_error err = {0};

	assert_int_equal(agent_url_parse("ws://127.0.0.1:4320/v1/opamp", &u, &err), 0);
	assert_false(u.tls);
	assert_string_equal(u.host, "127.0.0.1");
	assert_int_equal(u.port, 4320);
	assert_string_equal(u.path, "/v1/opamp");
	assert_string_equal(u.host_header, "127.0.0.1:4320");

	assert_int_equal(agent_url_parse("https://ctl.example.com", &u, &err), 0);
	assert_true(u.tls);
	assert_int_equal(u.port, 443);
	assert_string_equal(u.path, "/v1/opamp");
	assert_string_equal(u.host_header, "ctl.example.com");

	assert_int_equal(agent_url_parse("http://[::1]:4320/", &u, &err), 0);
	assert_string_equal(u.host, "::1");
	assert_string_equal(u.host_header, "[::1]:4320");
	assert_string_equal(u.path, "/v1/opamp");

	assert_int_equal(agent_url_parse("WSS://h/custom/path?x=1", &u, &err), 0);
	assert_true(u.tls);
	assert_string_equal(u.path, "/custom/path?x=1");

	assert_int_equal(agent_url_parse("ftp://h", &u, &err), -EINVAL);
	pf_error_clear(&err);
	assert_int_equal(agent_url_parse("ws://h:0", &u, &err), -EINVAL);
	pf_error_clear(&err);
	assert_int_equal(agent_url_parse("ws://h:99999", &u, &err), -EINVAL);
	pf_error_clear(&err);
	assert_int_equal(agent_url_parse("ws://", &u, &err), -EINVAL);
	pf_error_clear(&err);
	assert_int_equal(agent_url_parse("ws://user:pw@h", &u, &err), -EINVAL);
	pf_error_clear(&err);
	assert_int_equal(agent_url_parse("ws://[::1", &u, &err), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_all_flags),
	    cmocka_unit_test(test_bad_flags),
	    cmocka_unit_test(test_token_file),
	    cmocka_unit_test(test_urls),
	    cmocka_unit_test(test_metrics_flags),
	    cmocka_unit_test(test_plaintext_token),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
