/* test_export_otlp_grpc.c — agent/export/otlp_grpc.h without a server: endpoints and headers
 * checked at creation, the OTLP specification's retryable statuses, the RetryInfo reader of
 * google.rpc.Status details (well-formed, absent, truncated, other detail types), and a call
 * to a port nobody listens on (UNAVAILABLE, retryable). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "export/otlp_grpc.h"

static const uint8_t retry_1500ms[] = {
    /* Status { code: 14, message: "x", details: [Any { type_url, value: RetryInfo {
     * retry_delay { seconds: 1, nanos: 500000000 } } }] } */
    0x08, 0x0e, 0x12, 0x01, 'x',  0x1a, 0x36, 0x0a, 0x28, 't',	'y',  'p',  'e', '.', 'g', 'o',
    'o',  'g',	'l',  'e',  'a',  'p',	'i',  's',  '.',  'c',	'o',  'm',  '/', 'g', 'o', 'o',
    'g',  'l',	'e',  '.',  'r',  'p',	'c',  '.',  'R',  'e',	't',  'r',  'y', 'I', 'n', 'f',
    'o',  0x12, 0x0a, 0x0a, 0x08, 0x08, 0x01, 0x10, 0x80, 0xca, 0xb5, 0xee, 0x01};

static void test_retry_delay(void **state)
{
	(void)state;
	assert_int_equal(agent_otlp_grpc_retry_delay(retry_1500ms, sizeof(retry_1500ms)), 1500);
	/* no details, another detail type, truncated anywhere: none */
	assert_int_equal(agent_otlp_grpc_retry_delay(retry_1500ms, 5), -1);
	uint8_t other[sizeof(retry_1500ms)];
	memcpy(other, retry_1500ms, sizeof(other));
	other[47] = 'X'; /* "...RetryInXo" */
	assert_int_equal(agent_otlp_grpc_retry_delay(other, sizeof(other)), -1);
	for (size_t n = 0; n < sizeof(retry_1500ms); n++) {
		int64_t d = agent_otlp_grpc_retry_delay(retry_1500ms, n);
		assert_true(d == -1 || (d >= 0 && d <= 86400 * 1000));
	}
}

static void test_retryable(void **state)
{
	(void)state;
	assert_true(agent_otlp_grpc_retryable(14, false)); /* UNAVAILABLE */
	assert_true(agent_otlp_grpc_retryable(4, false));  /* DEADLINE_EXCEEDED */
	assert_false(agent_otlp_grpc_retryable(8, false)); /* RESOURCE_EXHAUSTED, no RetryInfo */
	assert_true(agent_otlp_grpc_retryable(8, true));
	assert_false(agent_otlp_grpc_retryable(3, true));   /* INVALID_ARGUMENT */
	assert_false(agent_otlp_grpc_retryable(16, false)); /* UNAUTHENTICATED */
}

static void test_config_and_unreachable(void **state)
{
	(void)state;
	struct pf_error err = {0};
	struct pf_exporter c = {.type = PF_EXPORTER_OTLP_GRPC,
				.endpoint = "http://127.0.0.1:9/v1development/profiles"};
	assert_null(agent_otlp_grpc_new(&c, &err));
	assert_non_null(strstr(err.msg, "no path"));
	memset(&err, 0, sizeof(err));
	c.endpoint = "ftp://x";
	assert_null(agent_otlp_grpc_new(&c, &err));
	struct pf_kv_str bad[] = {{"X Bad", "v"}};
	c.endpoint = "http://127.0.0.1:9";
	c.headers = bad;
	c.n_headers = 1;
	memset(&err, 0, sizeof(err));
	assert_null(agent_otlp_grpc_new(&c, &err));
	assert_non_null(strstr(err.msg, "metadata"));
	struct pf_kv_str ok[] = {{"X-Tenant", "t"}};
	c.headers = ok;
	c.timeout_seconds = 2;
	struct agent_otlp_grpc *g = agent_otlp_grpc_new(&c, &err);
	assert_non_null(g);
	assert_string_equal(agent_otlp_grpc_url(g), "grpc://127.0.0.1:9");
	struct agent_otlp_grpc_result res;
	memset(&err, 0, sizeof(err));
	assert_int_equal(agent_otlp_grpc_export(g, (const uint8_t *)"", 0, &res, &err), -EPROTO);
	assert_int_equal(res.code, 14); /* UNAVAILABLE: nobody listens */
	assert_true(agent_otlp_grpc_retryable(res.code, res.retry_delay_ms >= 0));
	pf_buf_release(&res.response);
	agent_otlp_grpc_free(g);
	c.endpoint = "https://[::1]";
	c.n_headers = 0;
	c.tls.insecure_skip_verify = true;
	assert_null(agent_otlp_grpc_new(&c, &err));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_retry_delay),
	    cmocka_unit_test(test_retryable),
	    cmocka_unit_test(test_config_and_unreachable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
