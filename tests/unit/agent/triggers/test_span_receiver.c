/* Unit tests of agent/triggers/span_receiver.c: the verdict per span (slow, error, neither;
 * unknown process, outside the lookback, in the future, over max_per_minute, queue full, with
 * the reasons in the message) and the HTTP side on a real socket at 127.0.0.1 (200 with an
 * ExportTraceServiceResponse, 400 with the decoder's reason, 413 by Content-Length, 404, 405,
 * 415). The hooks stand in for the data plane: a table of known pids and a bounded job list. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "triggers/span_receiver.h"

#define MS 1000000ull
#define NOW (1764000000000ull * MS)

struct fake_dp {
	struct agent_span_job jobs[8];
	size_t n_jobs, cap;
};

static int fake_resolve(void *ctx, const struct pf_span *s, uint32_t *pid, char *why, size_t n)
{
	(void)ctx;
	if (s->pid == 100 || s->pid == 101) {
		*pid = s->pid;
		return 0;
	}
	if (!s->pid && !strcmp(s->service_name, "cart")) {
		*pid = 200;
		return 0;
	}
	snprintf(why, n, "pid %u unknown", s->pid);
	return -ENOENT;
}

static int fake_submit(void *ctx, const struct agent_span_job *job)
{
	struct fake_dp *d = ctx;
	if (d->n_jobs >= d->cap)
		return -EAGAIN;
	d->jobs[d->n_jobs++] = *job;
	return 0;
}

static struct pf_span span(uint32_t pid, uint64_t start, uint64_t dur_ms, int status)
{
	struct pf_span s;
	memset(&s, 0, sizeof(s));
	memset(s.trace_id, 0xab, 16);
	memset(s.span_id, 0xcd, 8);
	s.pid = pid;
	s.start_unix_ns = start;
	s.end_unix_ns = start + dur_ms * MS;
	s.status = status;
	return s;
}

static const struct agent_span_rules rules = {.slow_enabled = true,
					      .threshold_ms = 500,
					      .slow_max_per_minute = 3,
					      .error_enabled = true,
					      .error_max_per_minute = 1,
					      .lookback_seconds = 60};

static void test_verdicts(void **state)
{
	(void)state;
	struct fake_dp dp = {.cap = 8};
	struct agent_span_hooks h = {.resolve = fake_resolve, .submit = fake_submit, .ctx = &dp};
	struct agent_span_receiver *r = agent_span_receiver_new(NULL, false, &rules, &h, NULL);
	assert_non_null(r);
	struct pf_span in[] = {
	    span(100, NOW - 2000 * MS, 600, 0),	 /* slow: job */
	    span(100, NOW - 2000 * MS, 499, 0),	 /* fast, OK: nothing */
	    span(101, NOW - 2000 * MS, 10, 2),	 /* error: job */
	    span(0, NOW - 1000 * MS, 900, 0),	 /* by service.name below: job (pid 200) */
	    span(7, NOW - 1000 * MS, 900, 0),	 /* unknown process */
	    span(100, NOW - 61000 * MS, 900, 0), /* started before the lookback */
	    span(100, NOW + 1000 * MS, 5000, 0), /* ends 6 s in the future */
	    span(100, NOW - 1000 * MS, 700, 2),	 /* slow wins over error: job */
	    span(100, NOW - 1000 * MS, 700, 0),	 /* 4th slow this minute: over 3 */
	    span(101, NOW - 1000 * MS, 10, 2),	 /* 2nd error this minute: over 1 */
	};
	snprintf(in[3].service_name, sizeof(in[3].service_name), "cart");
	struct pf_buf msg;
	pf_buf_init(&msg, 4096);
	int64_t rejected = -1;
	agent_span_receiver_process(r, in, PF_ARRAY_SIZE(in), NOW, &rejected, &msg);
	assert_int_equal(rejected, 5);
	assert_int_equal(dp.n_jobs, 4);
	assert_int_equal(dp.jobs[0].pid, 100);
	assert_int_equal(dp.jobs[0].trigger, AGENT_SPAN_SLOW);
	assert_true(dp.jobs[0].received_unix_ns == NOW);
	assert_int_equal(dp.jobs[1].pid, 101);
	assert_int_equal(dp.jobs[1].trigger, AGENT_SPAN_ERROR);
	assert_int_equal(dp.jobs[2].pid, 200);
	assert_int_equal(dp.jobs[3].trigger, AGENT_SPAN_SLOW);
	const char *m = pf_buf_str(&msg);
	assert_non_null(strstr(m, "1 rejected: pid 7 unknown (e.g. trace abababab"));
	assert_non_null(strstr(m, "1 rejected: span started 61 s ago, before the 60 s lookback"));
	assert_non_null(strstr(m, "1 rejected: span ends 6000 ms in the future"));
	assert_non_null(strstr(m, "2 rejected: over slow_span.max_per_minute (3)"));
	struct agent_span_counters c;
	agent_span_receiver_counters(r, &c);
	assert_int_equal(c.spans, PF_ARRAY_SIZE(in));
	assert_int_equal(c.triggered[AGENT_SPAN_SLOW], 3);
	assert_int_equal(c.triggered[AGENT_SPAN_ERROR], 1);
	assert_int_equal(c.rejected_unknown, 1);
	assert_int_equal(c.rejected_old, 2);
	assert_int_equal(c.rejected_rate, 2);

	/* a minute later the caps are free again; a full queue rejects and gives the slot back */
	dp.cap = 5;
	struct pf_span later[] = {span(100, NOW + 60000 * MS, 600, 0),
				  span(100, NOW + 60000 * MS, 600, 0)};
	pf_buf_reset(&msg);
	agent_span_receiver_process(r, later, 2, NOW + 61000 * MS, &rejected, &msg);
	assert_int_equal(rejected, 1);
	assert_int_equal(dp.n_jobs, 5);
	assert_non_null(strstr(pf_buf_str(&msg), "span queue is full"));
	dp.cap = 8;
	agent_span_receiver_process(r, later, 1, NOW + 61000 * MS, &rejected, &msg);
	assert_int_equal(rejected, 0); /* the queue-full span did not use up a slot */
	assert_int_equal(dp.n_jobs, 6);

	/* times near the end of time do not wrap around */
	struct pf_span far = span(100, UINT64_MAX - 10 * MS, 0, 2);
	pf_buf_reset(&msg);
	agent_span_receiver_process(r, &far, 1, NOW + 62000 * MS, &rejected, &msg);
	assert_int_equal(rejected, 1);
	assert_non_null(strstr(pf_buf_str(&msg), "in the future"));

	/* rules off: nothing triggers */
	struct agent_span_rules off = rules;
	off.slow_enabled = off.error_enabled = false;
	agent_span_receiver_set_rules(r, &off);
	agent_span_receiver_process(r, in, PF_ARRAY_SIZE(in), NOW + 200000 * MS, &rejected, NULL);
	assert_int_equal(rejected, 0);
	assert_int_equal(dp.n_jobs, 6);
	pf_buf_release(&msg);
	agent_span_receiver_free(r);
}

/* ---- HTTP ---------------------------------------------------------------------------------- */

/* One request on a new connection; returns the status, body into out. */
static int http(int port, const char *head_extra, const void *body, size_t len, char *out,
		size_t cap)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	struct timeval tv = {.tv_sec = 10};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	char head[1024];
	int n =
	    snprintf(head, sizeof(head), "%s\r\nHost: x\r\nConnection: close\r\n\r\n", head_extra);
	assert_int_equal(write(fd, head, (size_t)n), n);
	if (len)
		assert_int_equal(write(fd, body, len), (ssize_t)len);
	size_t got = 0;
	ssize_t k;
	while (got < cap - 1 && (k = read(fd, out + got, cap - 1 - got)) > 0)
		got += (size_t)k;
	out[got] = 0;
	close(fd);
	int status = 0;
	sscanf(out, "HTTP/1.1 %d", &status);
	return status;
}

static const char *body_of(const char *resp)
{
	const char *b = strstr(resp, "\r\n\r\n");
	return b ? b + 4 : "";
}

static void test_http(void **state)
{
	(void)state;
	struct fake_dp dp = {.cap = 8};
	struct agent_span_hooks h = {.resolve = fake_resolve, .submit = fake_submit, .ctx = &dp};
	struct pf_error err = {0};
	struct agent_span_receiver *r =
	    agent_span_receiver_new("127.0.0.1:0", true, &rules, &h, &err);
	if (!r)
		fprintf(stderr, "%s\n", err.msg);
	assert_non_null(r);
	int port = agent_span_receiver_port(r);
	assert_true(port > 0);
	static char resp[65536];
	char head[512];

	/* a slow span of a known pid and one of an unknown pid, as JSON */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	struct pf_span in[2] = {span(100, now - 1000 * MS, 800, 0),
				span(9, now - 1000 * MS, 800, 0)};
	struct pf_buf b;
	pf_buf_init(&b, 1 << 20);
	assert_int_equal(pf_otlp_traces_encode(in, 2, true, &b), 0);
	snprintf(head, sizeof(head),
		 "POST /v1/traces HTTP/1.1\r\nContent-Type: application/json\r\n"
		 "Content-Length: %zu",
		 b.len);
	assert_int_equal(http(port, head, b.data, b.len, resp, sizeof(resp)), 200);
	assert_non_null(strstr(body_of(resp), "\"rejectedSpans\":\"1\""));
	assert_non_null(strstr(body_of(resp), "pid 9 unknown"));
	assert_int_equal(dp.n_jobs, 1);

	/* the same as protobuf: the response is protobuf too */
	pf_buf_reset(&b);
	assert_int_equal(pf_otlp_traces_encode(in, 1, false, &b), 0);
	snprintf(head, sizeof(head),
		 "POST /v1/traces HTTP/1.1\r\nContent-Type: application/x-protobuf\r\n"
		 "Content-Length: %zu",
		 b.len);
	assert_int_equal(http(port, head, b.data, b.len, resp, sizeof(resp)), 200);
	assert_non_null(strstr(resp, "content-type: application/x-protobuf"));
	assert_int_equal(dp.n_jobs, 2);

	/* undecodable: 400 with the reason */
	static const char bad[] = "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":"
				  "\"xyz\"}]}]}]}";
	snprintf(head, sizeof(head),
		 "POST /v1/traces HTTP/1.1\r\nContent-Type: application/json\r\n"
		 "Content-Length: %zu",
		 strlen(bad));
	assert_int_equal(http(port, head, bad, strlen(bad), resp, sizeof(resp)), 400);
	assert_non_null(strstr(body_of(resp), "resourceSpans[0].scopeSpans[0].spans[0].traceId: "
					      "must be 32 hex digits"));
	/* gzip announced, plain body */
	snprintf(head, sizeof(head),
		 "POST /v1/traces HTTP/1.1\r\nContent-Type: application/json\r\n"
		 "Content-Encoding: gzip\r\nContent-Length: %zu",
		 strlen(bad));
	assert_int_equal(http(port, head, bad, strlen(bad), resp, sizeof(resp)), 400);
	assert_non_null(strstr(body_of(resp), "not valid gzip"));
	/* over the cap by Content-Length: refused before the body */
	assert_int_equal(http(port,
			      "POST /v1/traces HTTP/1.1\r\nContent-Type: application/json\r\n"
			      "Content-Length: 99999999",
			      NULL, 0, resp, sizeof(resp)),
			 413);
	assert_int_equal(http(port, "GET /v1/traces HTTP/1.1", NULL, 0, resp, sizeof(resp)), 405);
	assert_non_null(strstr(resp, "allow: POST"));
	assert_int_equal(http(port, "GET /v1/logs HTTP/1.1", NULL, 0, resp, sizeof(resp)), 404);
	assert_int_equal(http(port,
			      "POST /v1/traces HTTP/1.1\r\nContent-Type: text/plain\r\n"
			      "Content-Length: 1",
			      "x", 1, resp, sizeof(resp)),
			 415);
	assert_int_equal(http(port,
			      "POST /v1/traces HTTP/1.1\r\nContent-Type: application/json\r\n"
			      "Content-Encoding: zstd\r\nContent-Length: 1",
			      "x", 1, resp, sizeof(resp)),
			 415);
	assert_non_null(strstr(body_of(resp), "Content-Encoding must be gzip or none"));
	struct agent_span_counters c;
	agent_span_receiver_counters(r, &c);
	assert_int_equal(c.requests, 2);
	assert_int_equal(c.bad_requests, 2);
	assert_int_equal(c.too_large, 1);
	pf_buf_release(&b);
	agent_span_receiver_free(r);

	/* a taken port is an error with the reason and the key */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 1), 0);
	socklen_t al = sizeof(a);
	getsockname(fd, (struct sockaddr *)&a, &al);
	char where[64];
	snprintf(where, sizeof(where), "127.0.0.1:%d", ntohs(a.sin_port));
	pf_error_clear(&err);
	assert_null(agent_span_receiver_new(where, true, &rules, &h, &err));
	assert_string_equal(err.path, "profiling.triggers.slow_span.listen");
	assert_non_null(strstr(err.msg, "Address already in use"));
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_verdicts),
	    cmocka_unit_test(test_http),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
