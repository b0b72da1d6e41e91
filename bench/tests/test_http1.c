/* test_http1.c — the benchmark's HTTP/1.1 client pieces: request building and response
 * parsing with Content-Length, chunked (extensions, trailers, split input) and EOF framing. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "http1.h"

static int parse(const char *s, size_t n, bool eof, int *st, struct pf_buf *body)
{
	struct pf_error err = { 0 };
	return http1_response_parse((const uint8_t *)s, n, eof, st, body, &err);
}

static void test_request(void **state)
{
	struct pf_buf b;
	pf_buf_init(&b, 0);
	assert_int_equal(http1_request_append(&b, "PUT", "127.0.0.1:1", "/api/v1/configs/default",
					      "tok", "application/yaml", "abc", 3),
			 0);
	assert_string_equal(pf_buf_str(&b), "PUT /api/v1/configs/default HTTP/1.1\r\n"
					    "Host: 127.0.0.1:1\r\n"
					    "Connection: close\r\n"
					    "Authorization: Bearer tok\r\n"
					    "Content-Type: application/yaml\r\n"
					    "Content-Length: 3\r\n"
					    "\r\n"
					    "abc");
	pf_buf_reset(&b);
	assert_int_equal(http1_request_append(&b, "GET", "h:2", "/x", NULL, NULL, NULL, 0), 0);
	assert_string_equal(pf_buf_str(&b), "GET /x HTTP/1.1\r\nHost: h:2\r\nConnection: close\r\n\r\n");
	pf_buf_release(&b);
}

static void test_content_length(void **state)
{
	const char *r = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
			"content-length:  7 \r\n\r\n{\"a\":1}";
	struct pf_buf body;
	pf_buf_init(&body, 0);
	int st;
	for (size_t cut = 0; cut < strlen(r); cut++)
		assert_int_equal(parse(r, cut, false, &st, &body), 0);
	assert_int_equal(parse(r, strlen(r), false, &st, &body), 1);
	assert_int_equal(st, 200);
	assert_int_equal(body.len, 7);
	assert_string_equal(pf_buf_str(&body), "{\"a\":1}");
	/* EOF before the whole body is an error. */
	assert_int_equal(parse(r, strlen(r) - 1, true, &st, &body), -EPROTO);
	pf_buf_release(&body);
}

static void test_chunked(void **state)
{
	const char *r = "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
			"4;ext=1\r\nWiki\r\n"
			"B\r\npedia in \r\n\r\n"
			"0\r\nX-Trailer: y\r\n\r\n";
	struct pf_buf body;
	pf_buf_init(&body, 0);
	int st;
	for (size_t cut = 0; cut < strlen(r); cut++) {
		assert_int_equal(parse(r, cut, false, &st, &body), 0);
		assert_int_equal(st, 0);
	}
	assert_int_equal(parse(r, strlen(r), false, &st, &body), 1);
	assert_int_equal(st, 201);
	assert_string_equal(pf_buf_str(&body), "Wikipedia in \r\n");
	/* Closed inside the chunks. */
	assert_int_equal(parse(r, strlen(r) - 3, true, &st, &body), -EPROTO);
	/* Bad size, missing CRLF after data. */
	const char *bad = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
	assert_int_equal(parse(bad, strlen(bad), false, &st, &body), -EPROTO);
	const char *bad2 = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n0\r\n\r\n";
	assert_int_equal(parse(bad2, strlen(bad2), false, &st, &body), -EPROTO);
	pf_buf_release(&body);
}

static void test_eof_and_no_body(void **state)
{
	struct pf_buf body;
	pf_buf_init(&body, 0);
	int st;
	const char *r = "HTTP/1.0 200 OK\r\nServer: x\r\n\r\nhello";
	assert_int_equal(parse(r, strlen(r), false, &st, &body), 0);
	assert_int_equal(parse(r, strlen(r), true, &st, &body), 1);
	assert_string_equal(pf_buf_str(&body), "hello");
	const char *nc = "HTTP/1.1 204 No Content\r\n\r\n";
	assert_int_equal(parse(nc, strlen(nc), false, &st, &body), 1);
	assert_int_equal(st, 204);
	assert_int_equal(body.len, 0);
	/* Head cut by EOF; garbage status line; bad Content-Length. */
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nA: b", 21, true, &st, &body), -EPROTO);
	assert_int_equal(parse("HELLO\r\n\r\n", 9, false, &st, &body), -EPROTO);
	const char *cl = "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n";
	assert_int_equal(parse(cl, strlen(cl), false, &st, &body), -EPROTO);
	/* The body cap is honoured. */
	struct pf_buf small;
	pf_buf_init(&small, 3);
	const char *big = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n12345";
	assert_int_equal(parse(big, strlen(big), false, &st, &small), -E2BIG);
	pf_buf_release(&small);
	pf_buf_release(&body);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request),
		cmocka_unit_test(test_content_length),
		cmocka_unit_test(test_chunked),
		cmocka_unit_test(test_eof_and_no_body),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
