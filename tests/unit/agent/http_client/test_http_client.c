/* test_http_client.c — agent/http_client/http_client.h against a small HTTP/1.1 server run here
 * on 127.0.0.1 (keep-alive, one thread): a client's requests share one connection (its pool);
 * POST bodies and headers arrive; status, Retry-After, Content-Type and the body come back;
 * a body over the cap is cut, or fails with -E2BIG when asked (Content-Length known up front or
 * not); redirects are followed only when asked; the proxy named by http_proxy gets the request
 * in absolute form, and NO_PROXY sends it direct; a refused port is -ECONNREFUSED naming it. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "http_client/http_client.h"
#include "loopback.h"

struct server {
	int lfd, port;
	pthread_t th;
	pthread_mutex_t m;
	int accepts;          /* connections accepted */
	int requests;
	char last_line[512];  /* request line of the last request */
	char last_body[64];
	char last_hdr[128];   /* the X-Test header of the last request */
};

/* Answers one request on fd; false when the peer closed. */
static bool serve_one(struct server *s, int fd)
{
	char buf[8192];
	size_t n = 0;
	char *end = NULL;
	while (!end) {
		ssize_t r = read(fd, buf + n, sizeof(buf) - 1 - n);
		if (r <= 0)
			return false;
		n += (size_t)r;
		buf[n] = 0;
		end = strstr(buf, "\r\n\r\n");
		if (!end && n == sizeof(buf) - 1)
			return false;
	}
	size_t head = (size_t)(end - buf) + 4;
	const char *cl = strcasestr(buf, "\r\nContent-Length:");
	size_t blen = cl && cl < end ? strtoul(cl + 17, NULL, 10) : 0;
	while (n < head + blen && n < sizeof(buf) - 1) {
		ssize_t r = read(fd, buf + n, sizeof(buf) - 1 - n);
		if (r <= 0)
			return false;
		n += (size_t)r;
	}
	buf[n] = 0;
	pthread_mutex_lock(&s->m);
	s->requests++;
	snprintf(s->last_line, sizeof(s->last_line), "%.*s", (int)strcspn(buf, "\r"), buf);
	snprintf(s->last_body, sizeof(s->last_body), "%.*s", (int)blen, buf + head);
	const char *x = strcasestr(buf, "\r\nX-Test:");
	s->last_hdr[0] = 0;
	if (x && x < end)
		snprintf(s->last_hdr, sizeof(s->last_hdr), "%.*s", (int)strcspn(x + 10, "\r"),
			 x + 10);
	pthread_mutex_unlock(&s->m);
	char path[400] = "";
	sscanf(buf, "%*s %399s", path);
	char *q = strstr(path, "://"); /* absolute form (through a proxy): keep the path */
	if (q && (q = strchr(q + 3, '/')))
		memmove(path, q, strlen(q) + 1);
	char out[4096];
	int len;
	if (!strcmp(path, "/redirect")) {
		len = snprintf(out, sizeof(out), "HTTP/1.1 302 Found\r\nLocation: /ok\r\n"
						 "Content-Length: 0\r\n\r\n");
	} else if (!strcmp(path, "/busy")) {
		len = snprintf(out, sizeof(out), "HTTP/1.1 503 Busy\r\nRetry-After: 7\r\n"
						 "Content-Type: text/plain\r\nContent-Length: 4\r\n\r\nbusy");
	} else if (!strcmp(path, "/big")) { /* 2000 bytes, length announced */
		len = snprintf(out, sizeof(out), "HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n");
		memset(out + len, 'b', 2000);
		len += 2000;
	} else if (!strcmp(path, "/bigchunked")) { /* 2000 bytes, length not announced */
		len = snprintf(out, sizeof(out), "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
						 "\r\n7d0\r\n");
		memset(out + len, 'c', 2000);
		len += 2000;
		len += snprintf(out + len, sizeof(out) - (size_t)len, "\r\n0\r\n\r\n");
	} else {
		len = snprintf(out, sizeof(out), "HTTP/1.1 200 OK\r\nContent-Type: application/x-test"
						 "\r\nContent-Length: 2\r\n\r\nok");
	}
	return write(fd, out, (size_t)len) == len;
}

static void *serve(void *arg)
{
	struct server *s = arg;
	for (;;) {
		int fd = accept(s->lfd, NULL, NULL);
		if (fd < 0)
			return NULL;
		pthread_mutex_lock(&s->m);
		s->accepts++;
		pthread_mutex_unlock(&s->m);
		for (int i = 0; i < 1000 && serve_one(s, fd); i++)
			;
		close(fd);
	}
}

static void server_start(struct server *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->m, NULL);
	s->lfd = test_loopback_listen(8, &s->port);
	assert_true(s->lfd >= 0);
	assert_int_equal(pthread_create(&s->th, NULL, serve, s), 0);
}

static void server_stop(struct server *s)
{
	shutdown(s->lfd, SHUT_RDWR);
	close(s->lfd);
	pthread_join(s->th, NULL);
}

static int get(struct agent_http *c, const char *url, const struct agent_http_options *o,
	       struct agent_http_result *res, struct pf_error *err)
{
	struct agent_http_request req = {.method = "GET", .url = url};
	return agent_http_do(c, &req, o, res, err);
}

static void test_pool_post_and_answers(void **state)
{
	(void)state;
	struct server s;
	server_start(&s);
	struct agent_http *c = agent_http_new();
	assert_non_null(c);
	char url[128];
	struct agent_http_result res;
	agent_http_result_init(&res, 0);
	struct agent_http_options o = {.timeout_ms = 5000};
	struct pf_error err = {0};
	const char *hdrs[] = {"X-Test: hello", "Content-Type: text/plain"};
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/post", s.port);
	struct agent_http_request req = {.method = "POST", .url = url, .headers = hdrs,
					 .n_headers = 2, .body = (const uint8_t *)"payload",
					 .len = 7};
	for (int i = 0; i < 3; i++) {
		assert_int_equal(agent_http_do(c, &req, &o, &res, &err), 0);
		assert_int_equal(res.status, 200);
		assert_int_equal(res.http_version, 1);
		assert_string_equal(res.content_type, "application/x-test");
		assert_int_equal(res.body.len, 2);
		assert_memory_equal(res.body.data, "ok", 2);
	}
	assert_string_equal(s.last_line, "POST /post HTTP/1.1");
	assert_string_equal(s.last_body, "payload");
	assert_string_equal(s.last_hdr, "hello");
	/* one pool: three requests, one connection */
	assert_int_equal(s.requests, 3);
	assert_int_equal(s.accepts, 1);
	assert_int_equal(agent_http_connects(c), 1);
	/* a non-2xx answer is a response, with its Retry-After */
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/busy", s.port);
	assert_int_equal(get(c, url, &o, &res, &err), 0);
	assert_int_equal(res.status, 503);
	assert_string_equal(res.retry_after, "7");
	assert_string_equal(res.content_type, "text/plain");
	agent_http_result_release(&res);
	agent_http_free(c);
	server_stop(&s);
}

static void test_caps_and_redirects(void **state)
{
	(void)state;
	struct server s;
	server_start(&s);
	struct agent_http *c = agent_http_new();
	char url[128];
	struct agent_http_result res;
	struct pf_error err = {0};
	struct agent_http_options o = {.timeout_ms = 5000};
	const char *paths[] = {"/big", "/bigchunked"};
	for (int i = 0; i < 2; i++) {
		snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", s.port, paths[i]);
		/* cut at the cap */
		agent_http_result_init(&res, 1000);
		o.fail_over_cap = false;
		assert_int_equal(get(c, url, &o, &res, &err), 0);
		assert_int_equal(res.status, 200);
		assert_int_equal(res.body.len, 1000);
		assert_true(res.body_truncated);
		/* or refused */
		o.fail_over_cap = true;
		pf_error_clear(&err); /* pf_error_set keeps the first message */
		assert_int_equal(get(c, url, &o, &res, &err), -E2BIG);
		assert_non_null(strstr(err.msg, i == 0 ? "response of 2000 bytes over the 1000 byte limit"
						       : "response over 1000 bytes"));
		agent_http_result_release(&res);
	}
	o.fail_over_cap = false;
	agent_http_result_init(&res, 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/redirect", s.port);
	assert_int_equal(get(c, url, &o, &res, &err), 0);
	assert_int_equal(res.status, 302); /* not followed unless asked */
	o.follow_redirects = true;
	assert_int_equal(get(c, url, &o, &res, &err), 0);
	assert_int_equal(res.status, 200);
	assert_string_equal(s.last_line, "GET /ok HTTP/1.1");
	agent_http_result_release(&res);
	agent_http_free(c);
	server_stop(&s);
}

static void test_proxy_env_and_refused(void **state)
{
	(void)state;
	struct server proxy;
	server_start(&proxy);
	char purl[64], url[128];
	snprintf(purl, sizeof(purl), "http://127.0.0.1:%d", proxy.port);
	setenv("http_proxy", purl, 1);
	unsetenv("NO_PROXY");
	unsetenv("no_proxy");
	struct agent_http *c = agent_http_new();
	struct agent_http_result res;
	agent_http_result_init(&res, 0);
	struct pf_error err = {0};
	struct agent_http_options o = {.timeout_ms = 5000};
	/* nothing listens on the target: only the proxy can answer */
	snprintf(url, sizeof(url), "http://192.0.2.1:9/through");
	assert_int_equal(get(c, url, &o, &res, &err), 0);
	assert_int_equal(res.status, 200);
	assert_string_equal(proxy.last_line, "GET http://192.0.2.1:9/through HTTP/1.1");
	/* NO_PROXY: direct, to a port nobody listens on */
	int dead = test_dead_port();
	assert_true(dead > 0);
	setenv("NO_PROXY", "127.0.0.1", 1);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/direct", dead);
	int before = proxy.requests;
	assert_int_equal(get(c, url, &o, &res, &err), -ECONNREFUSED);
	char want[64];
	snprintf(want, sizeof(want), "connect 127.0.0.1:%d", dead);
	assert_non_null(strstr(err.msg, want));
	assert_int_equal(proxy.requests, before);
	unsetenv("http_proxy");
	unsetenv("NO_PROXY");
	agent_http_result_release(&res);
	agent_http_free(c);
	server_stop(&proxy);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool_post_and_answers),
		cmocka_unit_test(test_caps_and_redirects),
		cmocka_unit_test(test_proxy_env_and_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
