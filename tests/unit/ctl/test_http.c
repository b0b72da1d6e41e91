/* test_http.c — ctl/http.h: query and path encoding, API errors turned into messages, and
 * real exchanges over loopback with libcurl against a scripted server (tests/lib/http_stub):
 * the request line, the bearer token, the body, non-2xx JSON errors, a non-JSON answer, the
 * body cap, a refused connection naming the URL, a timeout, and an abort flag. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "http.h"
#include "http_stub.h"

static void test_query(void **state)
{
	struct pf_buf q;
	pf_buf_init(&q, 4096);
	pf_buf_append_str(&q, "/api/v1/agents");
	assert_int_equal(ctl_query_add(&q, "selector", "env=prod,team in (a,b)"), 0);
	assert_int_equal(ctl_query_add(&q, "limit", NULL), 0); /* skipped */
	assert_int_equal(ctl_query_add(&q, "x", "a&b?c/d~e_f.g-h"), 0);
	assert_string_equal(pf_buf_str(&q), "/api/v1/agents?selector=env%3Dprod%2Cteam%20in%20%28a"
					    "%2Cb%29&x=a%26b%3Fc%2Fd~e_f.g-h");
	pf_buf_reset(&q);
	pf_buf_append_str(&q, "/api/v1/configs");
	assert_int_equal(ctl_path_add(&q, "../admin"), 0);
	assert_string_equal(pf_buf_str(&q), "/api/v1/configs/..%2Fadmin");
	pf_buf_release(&q);
	/* the cap holds */
	pf_buf_init(&q, 16);
	assert_int_equal(ctl_query_add(&q, "k", "0123456789abcdef"), -E2BIG);
	pf_buf_release(&q);
}

static void test_error_from_resp(void **state)
{
	struct ctl_http_resp r = {.status = 400};
	struct pf_error err = {0};
	pf_buf_init(&r.body, 4096);
	pf_buf_append_str(&r.body,
			  "{\"error\":{\"code\":\"invalid_config\",\"path\":\"profiling.x\","
			  "\"message\":\"profiling.x: unknown key\"}}");
	assert_int_equal(ctl_http_error_from_resp(&r, "PUT /x", &err), -EINVAL);
	assert_string_equal(err.msg, "profiling.x: unknown key (HTTP 400 invalid_config)");
	pf_buf_reset(&r.body);
	pf_error_clear(&err);
	r.status = 502;
	pf_buf_append_str(&r.body, "<html>\nBad gateway</html>");
	assert_int_equal(ctl_http_error_from_resp(&r, "GET http://h/x", &err), -EIO);
	assert_string_equal(err.msg, "HTTP 502 from GET http://h/x: <html> Bad gateway</html>");
	pf_buf_reset(&r.body);
	pf_error_clear(&err);
	r.status = 404;
	assert_int_equal(ctl_http_error_from_resp(&r, "GET http://h/x", &err), -ENOENT);
	assert_string_equal(err.msg, "HTTP 404 from GET http://h/x");
	pf_buf_release(&r.body);
	assert_int_equal(ctl_http_status_errno(401), -EACCES);
	assert_int_equal(ctl_http_status_errno(403), -EPERM);
	assert_int_equal(ctl_http_status_errno(409), -EBUSY);
	assert_int_equal(ctl_http_status_errno(422), -EINVAL);
	assert_int_equal(ctl_http_status_errno(503), -EIO);
}

static void test_bad_server(void **state)
{
	errno = 0;
	assert_null(ctl_http_new(&(struct ctl_http_opts){.server = "ftp://x"}));
	assert_int_equal(errno, EINVAL);
	assert_null(ctl_http_new(&(struct ctl_http_opts){.server = NULL}));
	struct ctl_http *h = ctl_http_new(&(struct ctl_http_opts){.server = "http://a:1///"});
	assert_non_null(h);
	assert_string_equal(ctl_http_server(h), "http://a:1");
	ctl_http_free(h);
}

static struct ctl_http *client(int port, const char *token, long timeout_ms)
{
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", port);
	struct ctl_http *h = ctl_http_new(
	    &(struct ctl_http_opts){.server = url, .token = token, .timeout_ms = timeout_ms});
	assert_non_null(h);
	return h;
}

static void test_json_exchange(void **state)
{
	struct http_stub s = {0};
	char *ans = http_stub_json("201 Created", "{\"name\":\"a\",\"version\":2}");
	assert_int_equal(http_stub_start(&s, (const char *const[]){ans}, 1, false), 0);
	struct ctl_http *h = client(s.port, "tok-123", 0);
	json_t *body = json_pack("{s:s}", "selector", "env=prod"), *out = NULL;
	struct pf_error err = {0};
	assert_int_equal(ctl_http_json(h, "PUT", "/api/v1/assignments/a", body, &out, &err), 0);
	ctl_http_free(h);
	http_stub_stop(&s);
	assert_int_equal(json_integer_value(json_object_get(out, "version")), 2);
	const char *req = s.requests[0];
	assert_non_null(strstr(req, "PUT /api/v1/assignments/a HTTP/1.1\r\n"));
	assert_non_null(strstr(req, "\r\nAuthorization: Bearer tok-123\r\n"));
	assert_non_null(strstr(req, "\r\nContent-Type: application/json\r\n"));
	assert_non_null(strstr(req, "\r\n\r\n{\"selector\":\"env=prod\"}"));
	assert_null(strstr(req, "Expect:"));
	json_decref(body);
	json_decref(out);
	free(ans);
}

static void test_api_error_and_not_json(void **state)
{
	struct http_stub s = {0};
	char *ans[] = {
	    http_stub_json("404 Not Found", "{\"error\":{\"code\":\"not_found\",\"message\":\"no "
					    "route for /api/v1/captures\"}}"),
	    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
	};
	assert_int_equal(http_stub_start(&s, (const char *const *)ans, 2, false), 0);
	struct ctl_http *h = client(s.port, NULL, 0);
	json_t *out = NULL;
	struct pf_error err = {0};
	assert_int_equal(ctl_http_json(h, "GET", "/api/v1/captures", NULL, &out, &err), -ENOENT);
	assert_null(out);
	assert_string_equal(err.msg, "no route for /api/v1/captures (HTTP 404 not_found)");
	pf_error_clear(&err);
	assert_int_equal(ctl_http_json(h, "GET", "/x", NULL, &out, &err), -EPROTO);
	assert_non_null(strstr(err.msg, "/x: the answer is not JSON"));
	ctl_http_free(h);
	http_stub_stop(&s);
	assert_null(strstr(s.requests[0], "Authorization")); /* no token, no header */
	free(ans[0]);
}

static void test_refused_timeout_abort(void **state)
{
	/* a port nobody listens on: bound then closed */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	bind(fd, (struct sockaddr *)&a, sizeof(a));
	socklen_t al = sizeof(a);
	getsockname(fd, (struct sockaddr *)&a, &al);
	int port = ntohs(a.sin_port);
	close(fd);
	struct ctl_http *h = client(port, NULL, 0);
	struct ctl_http_resp r;
	struct pf_error err = {0};
	assert_int_equal(ctl_http_request(h, "GET", "/api/v1/agents", NULL, NULL, 0, &r, &err),
			 -ECONNREFUSED);
	char want[128];
	snprintf(want, sizeof(want), "cannot connect to http://127.0.0.1:%d/api/v1/agents: ", port);
	assert_memory_equal(err.msg, want, strlen(want));
	ctl_http_free(h);

	struct http_stub s = {0};
	assert_int_equal(http_stub_start(&s, (const char *const[]){NULL}, 1, false), 0);
	h = client(s.port, NULL, 300);
	pf_error_clear(&err);
	assert_int_equal(ctl_http_request(h, "GET", "/slow", NULL, NULL, 0, &r, &err), -ETIMEDOUT);
	assert_non_null(strstr(err.msg, "GET http://127.0.0.1:"));
	assert_non_null(strstr(err.msg, "/slow timed out"));
	ctl_http_free(h); /* closes the connection: the stub goes on */
	http_stub_stop(&s);

	assert_int_equal(http_stub_start(&s, (const char *const[]){NULL}, 1, false), 0);
	h = client(s.port, NULL, 0);
	volatile sig_atomic_t flag = 1;
	ctl_http_set_abort(h, &flag);
	pf_error_clear(&err);
	assert_int_equal(ctl_http_request(h, "GET", "/a", NULL, NULL, 0, &r, &err), -EINTR);
	assert_non_null(strstr(err.msg, "interrupted"));
	ctl_http_free(h);
	http_stub_stop(&s);
}

static int setup(void **state)
{
	return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

static int teardown(void **state)
{
	curl_global_cleanup();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_query),
	    cmocka_unit_test(test_error_from_resp),
	    cmocka_unit_test(test_bad_server),
	    cmocka_unit_test(test_json_exchange),
	    cmocka_unit_test(test_api_error_and_not_json),
	    cmocka_unit_test(test_refused_timeout_abort),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
