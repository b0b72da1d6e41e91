/* Unit tests of the exporters' delivery (agent/export/exporter.c, spill.c, pyroscope.c and
 * the response side of otlp_http.c) against scripted HTTP servers in this test on 127.0.0.1:
 * retries on 503 (Retry-After honoured), 429 and a closed connection with nothing lost;
 * 400 not retried; a back end down longer than the queue holds (oldest dropped first and
 * counted, queue bytes bounded, submit never blocks); a dead exporter not holding up a live
 * one; partial success (chunked response) counted; the spill surviving free/new; the spill
 * sweep after a config change (real directories under /tmp: the directory of a removed or
 * re-pointed exporter discarded and counted, a respelled endpoint keeping its queue, an
 * earlier version's directory name taken over, files not ours left alone); pyroscope
 * pushes (path, query, gzip'd pprof that pf_pprof_decode reads). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "export/exporter.h"
#include "export/otlp_http.h"
#include "export/pyroscope.h"
#include "export/spill.h"
#include "pf/buf.h"
#include "pf/gzip.h"
#include "pf/hash.h"
#include "pf/uuid.h"
#include "pprof_codec.h"
#include "prof_fixture.h"

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- a scripted server: one thread, one connection at a time ---- */

enum act_kind { ACT_STATUS, ACT_CLOSE };

struct act {
	enum act_kind kind;
	int status;
	const char *retry_after; /* NULL: no header */
	const uint8_t *body;
	size_t body_len;
	bool chunked;
};

#define MAX_REQ 256

struct req {
	uint64_t at_ms;
	char head[2048];
	uint8_t *body;
	size_t len;
	int answered; /* the status sent, 0 when the connection was closed */
};

struct server {
	int lfd, port;
	pthread_t th;
	pthread_mutex_t m;
	bool stop;
	bool down; /* close every connection without a response */
	const struct act *script;
	size_t n_script, next;
	struct act dflt;
	struct req reqs[MAX_REQ];
	size_t n_reqs;
};

static int read_request(int c, struct req *r)
{
	struct pf_buf in;
	pf_buf_init(&in, 64 << 20);
	size_t head_len = 0;
	long long clen = -1;
	int rc = -1;
	for (;;) {
		uint8_t tmp[65536];
		struct pollfd q = {.fd = c, .events = POLLIN};
		if (poll(&q, 1, 5000) != 1)
			break;
		ssize_t n = read(c, tmp, sizeof(tmp));
		if (n <= 0)
			break;
		pf_buf_append(&in, tmp, (size_t)n);
		if (!head_len) {
			char *e = strstr(pf_buf_str(&in), "\r\n\r\n");
			if (e) {
				head_len = (size_t)(e - (char *)in.data) + 4;
				snprintf(r->head, sizeof(r->head), "%.*s", (int)head_len, in.data);
				char *cl = strcasestr(r->head, "\r\nContent-Length:");
				if (cl)
					clen = strtoll(cl + 17, NULL, 10);
			}
		}
		if (head_len && clen >= 0 && in.len - head_len >= (size_t)clen) {
			r->len = (size_t)clen;
			r->body = malloc(r->len ? r->len : 1);
			memcpy(r->body, in.data + head_len, r->len);
			rc = 0;
			break;
		}
	}
	pf_buf_release(&in);
	return rc;
}

static void answer(int c, const struct act *a)
{
	struct pf_buf out;
	pf_buf_init(&out, 1 << 20);
	pf_buf_printf(&out, "HTTP/1.1 %d X\r\nContent-Type: application/x-protobuf\r\n", a->status);
	if (a->retry_after)
		pf_buf_printf(&out, "Retry-After: %s\r\n", a->retry_after);
	if (a->chunked) {
		pf_buf_printf(&out, "Transfer-Encoding: chunked\r\n\r\n");
		/* two chunks and the last one */
		size_t h = a->body_len / 2;
		pf_buf_printf(&out, "%zx;ext=1\r\n", h);
		pf_buf_append(&out, a->body, h);
		pf_buf_printf(&out, "\r\n%zx\r\n", a->body_len - h);
		pf_buf_append(&out, a->body + h, a->body_len - h);
		pf_buf_printf(&out, "\r\n0\r\n\r\n");
	} else {
		pf_buf_printf(&out, "Content-Length: %zu\r\n\r\n", a->body_len);
		if (a->body_len)
			pf_buf_append(&out, a->body, a->body_len);
	}
	if (write(c, out.data, out.len) != (ssize_t)out.len)
		fprintf(stderr, "server: short write\n");
	pf_buf_release(&out);
}

static void *serve(void *arg)
{
	struct server *s = arg;
	for (;;) {
		pthread_mutex_lock(&s->m);
		bool stop = s->stop;
		pthread_mutex_unlock(&s->m);
		if (stop)
			break;
		struct pollfd p = {.fd = s->lfd, .events = POLLIN};
		if (poll(&p, 1, 50) != 1)
			continue;
		int c = accept(s->lfd, NULL, NULL);
		if (c < 0)
			continue;
		struct req r = {.at_ms = mono_ms()};
		if (read_request(c, &r) < 0) {
			close(c);
			continue;
		}
		pthread_mutex_lock(&s->m);
		struct act a = s->down		       ? (struct act){.kind = ACT_CLOSE}
			       : s->next < s->n_script ? s->script[s->next++]
						       : s->dflt;
		if (!s->down && s->n_reqs < MAX_REQ) {
			r.answered = a.kind == ACT_STATUS ? a.status : 0;
			s->reqs[s->n_reqs++] = r;
		} else {
			free(r.body);
		}
		pthread_mutex_unlock(&s->m);
		if (a.kind == ACT_STATUS)
			answer(c, &a);
		close(c);
	}
	return NULL;
}

static void server_start(struct server *s, const struct act *script, size_t n)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->m, NULL);
	s->script = script;
	s->n_script = n;
	s->dflt = (struct act){.kind = ACT_STATUS, .status = 200};
	s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s->lfd >= 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(s->lfd, 64), 0);
	socklen_t l = sizeof(a);
	getsockname(s->lfd, (struct sockaddr *)&a, &l);
	s->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&s->th, NULL, serve, s), 0);
}

static void server_set_down(struct server *s, bool down)
{
	pthread_mutex_lock(&s->m);
	s->down = down;
	pthread_mutex_unlock(&s->m);
}

static size_t server_count(struct server *s)
{
	pthread_mutex_lock(&s->m);
	size_t n = s->n_reqs;
	pthread_mutex_unlock(&s->m);
	return n;
}

static void server_stop(struct server *s)
{
	pthread_mutex_lock(&s->m);
	s->stop = true;
	pthread_mutex_unlock(&s->m);
	pthread_join(s->th, NULL);
	close(s->lfd);
	pthread_mutex_destroy(&s->m);
}

/* After server_stop, when the recorded requests are no longer needed. */
static void server_done(struct server *s)
{
	for (size_t i = 0; i < s->n_reqs; i++)
		free(s->reqs[i].body);
	s->n_reqs = 0;
}

/* ---- helpers ---- */

static char url[128];

static struct pf_exporter http_cfg(int port)
{
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	return (struct pf_exporter){.type = PF_EXPORTER_OTLP_HTTP,
				    .endpoint = url,
				    .compression = PF_COMPRESSION_NONE,
				    .timeout_seconds = 2};
}

/* Payload i: "item-<i>" then filler, len bytes. */
static void payload(uint8_t *buf, size_t len, int i)
{
	memset(buf, 'x', len);
	char tag[32];
	int n = snprintf(tag, sizeof(tag), "item-%04d;", i);
	memcpy(buf, tag, (size_t)pf_min((size_t)n, len));
}

static int payload_index(const uint8_t *b, size_t len)
{
	if (len < 10 || memcmp(b, "item-", 5) != 0)
		return -1;
	return (int)strtol((const char *)b + 5, NULL, 10);
}

static const uint8_t zero_id[16];

struct done_log {
	pthread_mutex_t m;
	int n, ok, dropped, failed, other;
};

static void on_done(void *user, int rc)
{
	struct done_log *d = user;
	pthread_mutex_lock(&d->m);
	d->n++;
	if (rc == 0)
		d->ok++;
	else if (rc == -ENOBUFS)
		d->dropped++;
	else if (rc == -EPROTO)
		d->failed++;
	else
		d->other++;
	pthread_mutex_unlock(&d->m);
}

static void check_invariant(const struct agent_exporter_status *st, uint64_t inflight_max)
{
	uint64_t acc = st->confirmed + st->failed + st->dropped + st->queued_items;
	assert_true(acc <= st->submitted && st->submitted <= acc + inflight_max);
}

/* ---- tests ---- */

static void test_retry_then_success(void **state)
{
	static const struct act script[] = {
	    {.kind = ACT_STATUS, .status = 503, .retry_after = "1"},
	    {.kind = ACT_STATUS, .status = 429},
	    {.kind = ACT_CLOSE},
	};
	struct server s;
	server_start(&s, script, 3);
	struct pf_exporter cfg = http_cfg(s.port);
	struct agent_exporter_opts o = {
	    .queue_bytes = 1 << 20, .backoff_base_ms = 50, .backoff_cap_ms = 200};
	struct pf_error err = {0};
	struct agent_exporter *x = agent_exporter_new_opts(&cfg, &o, &err);
	assert_non_null(x);
	struct done_log d = {.m = PTHREAD_MUTEX_INITIALIZER};
	uint8_t buf[3000];
	for (int i = 0; i < 3; i++) {
		payload(buf, sizeof(buf), i);
		assert_int_equal(agent_exporter_submit(x, buf, sizeof(buf), zero_id, on_done, &d),
				 0);
	}
	assert_int_equal(agent_exporter_flush(x, 20000), 0);
	server_stop(&s);

	/* 3 failed attempts then the 3 items, in order, each once */
	assert_int_equal(s.n_reqs, 6);
	assert_int_equal(s.reqs[0].answered, 503);
	assert_int_equal(s.reqs[1].answered, 429);
	assert_int_equal(s.reqs[2].answered, 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(s.reqs[3 + i].answered, 200);
		assert_int_equal(s.reqs[3 + i].len, sizeof(buf));
		assert_int_equal(payload_index(s.reqs[3 + i].body, s.reqs[3 + i].len), i);
	}
	/* Retry-After: 1 honoured */
	uint64_t gap = s.reqs[1].at_ms - s.reqs[0].at_ms;
	fprintf(stderr, "retry after 503 with Retry-After: 1 came after %llu ms\n",
		(unsigned long long)gap);
	assert_true(gap >= 1000);

	struct agent_exporter_status st;
	agent_exporter_status(x, &st);
	assert_int_equal(st.submitted, 3);
	assert_int_equal(st.confirmed, 3);
	assert_int_equal(st.exports_ok, 3);
	assert_int_equal(st.failed, 0);
	assert_int_equal(st.dropped, 0);
	assert_int_equal(st.retried, 3);
	assert_int_equal(st.sent, 6);
	assert_int_equal(st.queued_items, 0);
	assert_int_equal(st.queued_bytes, 0);
	assert_int_equal(st.bytes_ok, 3 * sizeof(buf));
	assert_true(st.healthy);
	assert_int_equal(st.last_http_status, 200);
	assert_non_null(strstr(st.status, "ok: 3 confirmed"));
	assert_int_equal(d.ok, 3);
	assert_int_equal(d.n, 3);
	server_done(&s);
	agent_exporter_free(x);
}

static void test_400_not_retried(void **state)
{
	static const uint8_t msg[] = "bad request";
	static const struct act script[] = {
	    {.kind = ACT_STATUS, .status = 400, .body = msg, .body_len = sizeof(msg) - 1},
	    {.kind = ACT_STATUS, .status = 500},
	};
	struct server s;
	server_start(&s, script, 2);
	struct pf_exporter cfg = http_cfg(s.port);
	struct agent_exporter_opts o = {.backoff_base_ms = 50, .backoff_cap_ms = 100};
	struct agent_exporter *x = agent_exporter_new_opts(&cfg, &o, NULL);
	assert_non_null(x);
	struct done_log d = {.m = PTHREAD_MUTEX_INITIALIZER};
	uint8_t buf[100];
	for (int i = 0; i < 3; i++) {
		payload(buf, sizeof(buf), i);
		assert_int_equal(agent_exporter_submit(x, buf, sizeof(buf), zero_id, on_done, &d),
				 0);
	}
	assert_int_equal(agent_exporter_flush(x, 10000), 0);
	server_stop(&s);
	assert_int_equal(s.n_reqs, 3); /* no second attempt of the refused ones */
	for (int i = 0; i < 3; i++)
		assert_int_equal(payload_index(s.reqs[i].body, s.reqs[i].len), i);
	struct agent_exporter_status st;
	agent_exporter_status(x, &st);
	assert_int_equal(st.failed, 2);
	assert_int_equal(st.exports_failed, 2);
	assert_int_equal(st.retried, 0);
	assert_int_equal(st.confirmed, 1);
	assert_int_equal(d.failed, 2);
	assert_int_equal(d.ok, 1);
	server_done(&s);
	agent_exporter_free(x);

	/* the failure shows in health until the next success */
	static const struct act only400[] = {
	    {.kind = ACT_STATUS, .status = 400, .body = msg, .body_len = sizeof(msg) - 1},
	};
	server_start(&s, only400, 1);
	cfg = http_cfg(s.port);
	x = agent_exporter_new_opts(&cfg, &o, NULL);
	assert_int_equal(agent_exporter_submit(x, buf, sizeof(buf), zero_id, NULL, NULL), 0);
	assert_int_equal(agent_exporter_flush(x, 10000), 0);
	agent_exporter_status(x, &st);
	assert_false(st.healthy);
	assert_int_equal(st.last_http_status, 400);
	assert_non_null(strstr(st.last_error, "HTTP 400: bad request"));
	assert_non_null(strstr(st.status, "failing"));
	server_stop(&s);
	server_done(&s);
	agent_exporter_free(x);
}

static void test_down_longer_than_queue(void **state)
{
	struct server s;
	server_start(&s, NULL, 0);
	server_set_down(&s, true);
	struct pf_exporter cfg = http_cfg(s.port);
	enum { ITEM = 1000, N = 200, FIT = 10 };
	struct agent_exporter_opts o = {
	    .queue_bytes = FIT * ITEM, .backoff_base_ms = 20, .backoff_cap_ms = 100};
	struct agent_exporter *x = agent_exporter_new_opts(&cfg, &o, NULL);
	assert_non_null(x);
	struct done_log d = {.m = PTHREAD_MUTEX_INITIALIZER};
	uint8_t buf[ITEM];
	uint64_t worst = 0;
	struct agent_exporter_status st;
	for (int i = 0; i < N; i++) {
		payload(buf, sizeof(buf), i);
		uint64_t t0 = mono_ms();
		assert_int_equal(agent_exporter_submit(x, buf, sizeof(buf), zero_id, on_done, &d),
				 0);
		uint64_t took = mono_ms() - t0;
		worst = pf_max(worst, took);
		assert_true(took < 50);
		agent_exporter_status(x, &st);
		assert_true(st.queued_bytes <= st.queue_limit_bytes);
		assert_int_equal(st.queue_limit_bytes, FIT * ITEM);
		check_invariant(&st, 1);
		if (i % 20 == 0)
			usleep(5000); /* let the worker fail a few attempts meanwhile */
	}
	fprintf(stderr, "slowest of %d submits with the back end down: %llu ms\n", N,
		(unsigned long long)worst);
	agent_exporter_drain(x);
	agent_exporter_status(x, &st);
	assert_true(st.dropped >= N - FIT - 1);
	assert_int_equal(st.dropped_bytes, st.dropped * ITEM);
	assert_true(st.retried > 0);
	assert_false(st.healthy);
	assert_non_null(strstr(st.status, "retrying"));
	assert_int_equal(st.confirmed, 0);
	check_invariant(&st, 1);

	/* back up: only the newest items arrive, in order, nothing twice */
	server_set_down(&s, false);
	assert_int_equal(agent_exporter_flush(x, 10000), 0);
	agent_exporter_status(x, &st);
	server_stop(&s);
	assert_int_equal(st.confirmed + st.dropped, N);
	assert_int_equal(s.n_reqs, st.confirmed);
	assert_true(st.confirmed >= FIT - 1 && st.confirmed <= FIT + 1);
	for (size_t i = 0; i < s.n_reqs; i++)
		assert_int_equal(payload_index(s.reqs[i].body, s.reqs[i].len),
				 N - (int)s.n_reqs + (int)i);
	assert_int_equal(st.queued_bytes, 0);
	pthread_mutex_lock(&d.m);
	assert_int_equal(d.dropped, (int)st.dropped);
	assert_int_equal(d.ok, (int)st.confirmed);
	pthread_mutex_unlock(&d.m);
	server_done(&s);

	/* an item larger than the whole queue is refused and counted */
	uint8_t *big = calloc(1, FIT * ITEM + 1);
	assert_int_equal(agent_exporter_submit(x, big, FIT * ITEM + 1, zero_id, NULL, NULL),
			 -E2BIG);
	free(big);
	agent_exporter_status(x, &st);
	assert_int_equal(st.confirmed + st.dropped, N + 1);
	agent_exporter_free(x);
}

static void test_dead_and_alive(void **state)
{
	/* dead: a listener nobody accepts on; requests sit in its backlog until the timeout */
	int dead = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(bind(dead, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(dead, 64), 0);
	socklen_t l = sizeof(a);
	getsockname(dead, (struct sockaddr *)&a, &l);
	struct pf_exporter dcfg = http_cfg(ntohs(a.sin_port));
	dcfg.timeout_seconds = 1;
	struct agent_exporter_opts o = {
	    .queue_bytes = 1 << 20, .backoff_base_ms = 50, .backoff_cap_ms = 200};
	struct agent_exporter *xd = agent_exporter_new_opts(&dcfg, &o, NULL);
	assert_non_null(xd);

	struct server s;
	server_start(&s, NULL, 0);
	struct pf_exporter acfg = http_cfg(s.port);
	struct agent_exporter *xa = agent_exporter_new_opts(&acfg, &o, NULL);
	assert_non_null(xa);

	enum { N = 30 };
	uint8_t buf[500];
	uint64_t t0 = mono_ms();
	for (int i = 0; i < N; i++) {
		payload(buf, sizeof(buf), i);
		uint64_t t = mono_ms();
		assert_int_equal(agent_exporter_submit(xd, buf, sizeof(buf), zero_id, NULL, NULL),
				 0);
		assert_int_equal(agent_exporter_submit(xa, buf, sizeof(buf), zero_id, NULL, NULL),
				 0);
		assert_true(mono_ms() - t < 50);
	}
	assert_int_equal(agent_exporter_flush(xa, 5000), 0);
	uint64_t took = mono_ms() - t0;
	fprintf(stderr, "alive exporter delivered %d items in %llu ms next to a dead one\n", N,
		(unsigned long long)took);
	assert_true(took < 1000); /* well under the dead one's 1 s timeout */
	assert_int_equal(server_count(&s), N);
	for (int i = 0; i < N; i++)
		assert_int_equal(payload_index(s.reqs[i].body, s.reqs[i].len), i);
	struct agent_exporter_status st;
	agent_exporter_status(xa, &st);
	assert_int_equal(st.confirmed, N);
	assert_true(st.healthy);
	agent_exporter_status(xd, &st);
	assert_int_equal(st.confirmed, 0);
	assert_true(st.queued_items >= N - 1);
	assert_int_equal(agent_exporter_flush(xd, 100), -ETIMEDOUT);

	uint64_t f0 = mono_ms();
	agent_exporter_free(xd); /* bounded by the attempt in flight */
	assert_true(mono_ms() - f0 < 2500);
	agent_exporter_free(xa);
	server_stop(&s);
	server_done(&s);
	close(dead);
}

/* ExportProfilesServiceResponse{partial_success{rejected_profiles: 3, error_message: ...}} */
static const uint8_t partial_resp[] = {0x0a, 0x10, 0x08, 0x03, 0x12, 0x0c, 'b', 'a', 'd',
				       ' ',  'p',  'r',	 'o',  'f',  'i',  'l', 'e', 's'};

static void test_partial_success(void **state)
{
	int64_t rej;
	char msg[64];
	assert_int_equal(agent_otlp_partial_success_parse(partial_resp, sizeof(partial_resp), &rej,
							  msg, sizeof(msg)),
			 1);
	assert_int_equal(rej, 3);
	assert_string_equal(msg, "bad profiles");
	assert_int_equal(agent_otlp_partial_success_parse(NULL, 0, &rej, msg, sizeof(msg)), 0);
	/* unknown fields are skipped, truncation and bad wire types refused */
	static const uint8_t unknown[] = {0x10, 0x05, 0x1a, 0x01, 'x', 0x0a, 0x02, 0x08, 0x07};
	assert_int_equal(agent_otlp_partial_success_parse(unknown, sizeof(unknown), &rej, msg, 4),
			 1);
	assert_int_equal(rej, 7);
	assert_int_equal(agent_otlp_partial_success_parse(partial_resp, sizeof(partial_resp) - 1,
							  &rej, msg, sizeof(msg)),
			 -EBADMSG);
	static const uint8_t group[] = {0x0b};
	assert_int_equal(agent_otlp_partial_success_parse(group, 1, &rej, msg, sizeof(msg)),
			 -EBADMSG);
	static const uint8_t huge_len[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f};
	assert_int_equal(
	    agent_otlp_partial_success_parse(huge_len, sizeof(huge_len), &rej, msg, sizeof(msg)),
	    -EBADMSG);

	static const uint8_t empty_ps[] = {0x0a, 0x00};
	const struct act script[] = {
	    {.kind = ACT_STATUS,
	     .status = 200,
	     .body = partial_resp,
	     .body_len = sizeof(partial_resp),
	     .chunked = true},
	    {.kind = ACT_STATUS, .status = 200, .body = empty_ps, .body_len = 2},
	};
	struct server s;
	server_start(&s, script, 2);
	struct pf_exporter cfg = http_cfg(s.port);
	struct agent_exporter *x = agent_exporter_new(&cfg, NULL);
	struct done_log d = {.m = PTHREAD_MUTEX_INITIALIZER};
	uint8_t buf[64];
	payload(buf, sizeof(buf), 1);
	for (int i = 0; i < 3; i++)
		assert_int_equal(agent_exporter_submit(x, buf, sizeof(buf), zero_id, on_done, &d),
				 0);
	assert_int_equal(agent_exporter_flush(x, 10000), 0);
	server_stop(&s);
	struct agent_exporter_status st;
	agent_exporter_status(x, &st);
	assert_int_equal(st.confirmed, 3);
	assert_int_equal(st.partial_successes, 1); /* an empty partial_success is a success */
	assert_int_equal(st.rejected_profiles, 3);
	assert_string_equal(st.last_partial_error, "bad profiles");
	assert_int_equal(st.retried, 0);
	assert_int_equal(d.ok, 3);
	server_done(&s);
	agent_exporter_free(x);
}

static void rm_tree(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char p[1024];
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		struct stat sb;
		if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
			rm_tree(p);
		else
			unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

/* Files named *.pfq in the one subdirectory of root; its path in sub. */
static size_t spill_files(const char *root, char *sub, size_t cap)
{
	DIR *d = opendir(root);
	struct dirent *de;
	sub[0] = 0;
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.')
			snprintf(sub, cap, "%s/%s", root, de->d_name);
	if (d)
		closedir(d);
	if (!sub[0])
		return 0;
	size_t n = 0;
	d = opendir(sub);
	while (d && (de = readdir(d))) {
		size_t l = strlen(de->d_name);
		n += l > 4 && !strcmp(de->d_name + l - 4, ".pfq");
	}
	if (d)
		closedir(d);
	return n;
}

static void test_spill_survives_restart(void **state)
{
	char root[64];
	snprintf(root, sizeof(root), "/tmp/pf-spill-XXXXXX");
	assert_non_null(mkdtemp(root));
	char spill[128];
	snprintf(spill, sizeof(spill), "%s/spill", root); /* created by the exporter */

	struct server s;
	server_start(&s, NULL, 0);
	server_set_down(&s, true);
	struct pf_exporter cfg = http_cfg(s.port);
	struct agent_exporter_opts o = {.queue_bytes = 8 * 1000,
					.spill_dir = spill,
					.backoff_base_ms = 20,
					.backoff_cap_ms = 100};
	struct agent_exporter *x = agent_exporter_new_opts(&cfg, &o, NULL);
	assert_non_null(x);
	uint8_t buf[1000];
	for (int i = 0; i < 10; i++) { /* 10 into a queue of 8: the 2 oldest dropped */
		payload(buf, sizeof(buf), i);
		assert_int_equal(agent_exporter_submit(x, buf, sizeof(buf), zero_id, NULL, NULL),
				 0);
	}
	agent_exporter_drain(x);
	struct agent_exporter_status st;
	agent_exporter_status(x, &st);
	assert_int_equal(st.spilled, 10);
	assert_true(st.dropped >= 2);
	uint64_t dropped_before = st.dropped;
	agent_exporter_free(x); /* the queued items stay on disk */
	char sub[512];
	size_t nfiles = spill_files(spill, sub, sizeof(sub));
	assert_int_equal(nfiles, 10 - dropped_before);

	/* a corrupt file and a stale temp file are cleaned up at load */
	char p[640];
	snprintf(p, sizeof(p), "%s/00000000000000ff.pfq", sub);
	FILE *f = fopen(p, "w");
	fputs("PFQ1garbage", f);
	fclose(f);
	snprintf(p, sizeof(p), "%s/.0000000000000100.pfq.tmp", sub);
	f = fopen(p, "w");
	fclose(f);

	server_set_down(&s, false);
	x = agent_exporter_new_opts(&cfg, &o, NULL);
	assert_non_null(x);
	assert_int_equal(agent_exporter_flush(x, 10000), 0);
	agent_exporter_status(x, &st);
	assert_int_equal(st.spill_loaded, nfiles);
	assert_int_equal(st.spill_errors, 1);
	assert_int_equal(st.confirmed, nfiles);
	server_stop(&s);
	assert_int_equal(s.n_reqs, nfiles);
	for (size_t i = 0; i < s.n_reqs; i++)
		assert_int_equal(payload_index(s.reqs[i].body, s.reqs[i].len),
				 10 - (int)nfiles + (int)i);
	server_done(&s);
	/* confirmed items leave the disk; new submits keep counting from the reloaded seq */
	assert_int_equal(spill_files(spill, sub, sizeof(sub)), 0);
	DIR *d = opendir(sub);
	struct dirent *de;
	int left = 0;
	while ((de = readdir(d)))
		left += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	assert_int_equal(left, 0);
	agent_exporter_free(x);

	/* a spill directory that cannot be created is a clear error */
	struct agent_exporter_opts bad = {.spill_dir = "/proc/pf-no/spill"};
	struct pf_error err = {0};
	assert_null(agent_exporter_new_opts(&cfg, &bad, &err));
	assert_string_equal(err.path, "spill_dir");
	rm_tree(root);
}

/* Entries of dir other than . and .. */
static int dir_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;
	while (d && (de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	if (d)
		closedir(d);
	return d ? n : -1;
}

static struct agent_exporter *queued_exporter(const struct pf_exporter *cfg, const char *spill,
					      int first, int n)
{
	struct agent_exporter_opts o = {
	    .spill_dir = spill, .backoff_base_ms = 20, .backoff_cap_ms = 100};
	struct agent_exporter *x = agent_exporter_new_opts(cfg, &o, NULL);
	assert_non_null(x);
	uint8_t buf[1000];
	for (int i = first; i < first + n; i++) {
		payload(buf, sizeof(buf), i);
		assert_int_equal(agent_exporter_submit(x, buf, sizeof(buf), zero_id, NULL, NULL),
				 0);
	}
	agent_exporter_drain(x);
	return x;
}

static void test_spill_sweep(void **state)
{
	char root[64], spill[128], p[512];
	snprintf(root, sizeof(root), "/tmp/pf-sweep-XXXXXX");
	assert_non_null(mkdtemp(root));
	snprintf(spill, sizeof(spill), "%s/spill", root);
	struct server s;
	server_start(&s, NULL, 0);
	server_set_down(&s, true);
	char ua[128], ua2[128], ub[128];
	snprintf(ua, sizeof(ua), "http://127.0.0.1:%d", s.port);
	snprintf(ua2, sizeof(ua2), "HTTP://127.0.0.1:%d/v1development/profiles", s.port);
	snprintf(ub, sizeof(ub), "http://127.0.0.1:%d/other", s.port);
	struct pf_exporter a = {.type = PF_EXPORTER_OTLP_HTTP,
				.endpoint = ua,
				.compression = PF_COMPRESSION_NONE,
				.timeout_seconds = 2};
	struct pf_exporter a2 = a, b = a;
	a2.endpoint = ua2;
	a2.timeout_seconds = 3; /* another setting: the agent re-creates the exporter */
	b.endpoint = ub;

	/* a sweep without a spill root is a no-op */
	struct agent_spill_sweep sw;
	assert_int_equal(agent_exporter_spill_sweep(spill, &a, 1, &sw), 0);
	assert_int_equal(sw.dirs, 0);

	/* two exporters leave their queues on disk (the back end is down) */
	agent_exporter_free(queued_exporter(&a, spill, 0, 3));
	agent_exporter_free(queued_exporter(&b, spill, 10, 2));
	assert_int_equal(dir_entries(spill), 2);
	/* entries that are not ours stay */
	snprintf(p, sizeof(p), "%s/notes.txt", spill);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fclose(f);
	snprintf(p, sizeof(p), "%s/otlp_http-notours", spill);
	assert_int_equal(mkdir(p, 0700), 0);

	/* the new config: a respelled a (same back end) with another timeout; b is gone */
	assert_int_equal(agent_exporter_spill_sweep(spill, &a2, 1, &sw), 0);
	assert_int_equal(sw.dirs, 1);
	assert_int_equal(sw.items, 2);
	assert_int_equal(sw.bytes, 2000);
	assert_int_equal(dir_entries(spill), 3); /* a's queue, notes.txt, otlp_http-notours */

	/* the exporter that replaced a takes its queue over and delivers it */
	server_set_down(&s, false);
	struct agent_exporter_opts o = {.spill_dir = spill};
	struct agent_exporter *x = agent_exporter_new_opts(&a2, &o, NULL);
	assert_non_null(x);
	assert_int_equal(agent_exporter_flush(x, 10000), 0);
	struct agent_exporter_status st;
	agent_exporter_status(x, &st);
	assert_int_equal(st.spill_loaded, 3);
	assert_int_equal(st.confirmed, 3);
	assert_int_equal(server_count(&s), 3);
	pthread_mutex_lock(&s.m);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(payload_index(s.reqs[i].body, s.reqs[i].len), (int)i);
		assert_true(strncmp(s.reqs[i].head, "POST " AGENT_OTLP_HTTP_DEFAULT_PATH " ",
				    strlen(AGENT_OTLP_HTTP_DEFAULT_PATH) + 6) == 0);
	}
	pthread_mutex_unlock(&s.m);
	agent_exporter_free(x);

	/* removed while an exporter (being replaced) still has it open: counted, and the
	 * exporter's later removes find nothing */
	server_set_down(&s, true);
	x = queued_exporter(&b, spill, 20, 1);
	assert_int_equal(agent_exporter_spill_sweep(spill, NULL, 0, &sw), 0);
	assert_int_equal(sw.dirs, 2); /* b's, and a's (empty) */
	assert_int_equal(sw.items, 1);
	assert_int_equal(sw.bytes, 1000);
	agent_exporter_free(x);
	assert_int_equal(dir_entries(spill), 2);
	snprintf(p, sizeof(p), "%s/otlp_http-notours", spill);
	assert_int_equal(dir_entries(p), 0);

	/* a directory named by an earlier version (hash of the endpoint as written) */
	char key[256], hex[17];
	int kl = snprintf(key, sizeof(key), "otlp_http\n%s", ua);
	uint8_t h[PF_SHA256_LEN];
	pf_sha256((const uint8_t *)key, (size_t)kl, h);
	pf_hex_encode(h, 8, hex);
	hex[16] = 0;
	snprintf(p, sizeof(p), "%s/otlp_http-%s", spill, hex);
	struct agent_spill *legacy = agent_spill_open(p, NULL);
	assert_non_null(legacy);
	uint8_t buf[1000];
	payload(buf, sizeof(buf), 30);
	assert_int_equal(agent_spill_write(legacy, 7, zero_id, 1, NULL, buf, sizeof(buf)), 0);
	agent_spill_close(legacy);
	/* kept by a sweep while its exporter is configured */
	assert_int_equal(agent_exporter_spill_sweep(spill, &a, 1, &sw), 0);
	assert_int_equal(sw.dirs, 0);
	server_set_down(&s, false);
	x = agent_exporter_new_opts(&a, &o, NULL);
	assert_non_null(x);
	assert_int_equal(agent_exporter_flush(x, 10000), 0);
	agent_exporter_status(x, &st);
	assert_int_equal(st.spill_loaded, 1);
	assert_int_equal(st.confirmed, 1);
	agent_exporter_free(x);
	assert_int_equal(dir_entries(p), -1); /* renamed to the new name */
	assert_int_equal(dir_entries(spill), 3);
	server_stop(&s);
	assert_int_equal(payload_index(s.reqs[3].body, s.reqs[3].len), 30);
	server_done(&s);
	rm_tree(root);
}

/* headers_from_file: the file's content, trimmed, goes out as the header next to the inline
 * ones and the agent token's; an unreadable, empty or oversized file fails the creation. */
static void test_headers_from_file(void **state)
{
	(void)state;
	char dir[] = "/tmp/pf-hff-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char key[64], empty[64], big[64], missing[64];
	snprintf(key, sizeof(key), "%s/key", dir);
	snprintf(empty, sizeof(empty), "%s/empty", dir);
	snprintf(big, sizeof(big), "%s/big", dir);
	snprintf(missing, sizeof(missing), "%s/missing", dir);
	FILE *f = fopen(key, "w");
	fputs("\n  k3y-from-file \r\n", f);
	fclose(f);
	f = fopen(empty, "w");
	fputs(" \n", f);
	fclose(f);
	f = fopen(big, "w");
	for (int i = 0; i < 4097; i++)
		fputc('x', f);
	fclose(f);

	struct server s;
	server_start(&s, NULL, 0);
	struct pf_exporter cfg = http_cfg(s.port);
	struct pf_kv_str hdr[] = {{"X-Inline", "in1"}};
	struct pf_kv_str hff[] = {{"X-Api-Key", key}};
	cfg.n_headers = 1;
	cfg.headers = hdr;
	cfg.n_headers_from_file = 1;
	cfg.headers_from_file = hff;
	cfg.auth = PF_AUTH_AGENT_TOKEN;
	struct agent_exporter_opts o = {.queue_bytes = 1 << 20, .agent_token = "tok-1"};
	struct pf_error err = {0};
	struct agent_exporter *x = agent_exporter_new_opts(&cfg, &o, &err);
	assert_non_null(x);
	uint8_t buf[64];
	payload(buf, sizeof(buf), 0);
	assert_int_equal(agent_exporter_submit(x, buf, sizeof(buf), zero_id, NULL, NULL), 0);
	assert_int_equal(agent_exporter_flush(x, 10000), 0);
	agent_exporter_free(x);
	server_stop(&s);
	assert_int_equal(s.n_reqs, 1);
	assert_non_null(strcasestr(s.reqs[0].head, "\r\nX-Inline: in1\r\n"));
	assert_non_null(strcasestr(s.reqs[0].head, "\r\nX-Api-Key: k3y-from-file\r\n"));
	assert_non_null(strcasestr(s.reqs[0].head, "\r\nAuthorization: Bearer tok-1\r\n"));
	server_done(&s);

	const char *bad[] = {missing, empty, big};
	const char *why[] = {"No such file or directory", "must hold 1..4096 bytes",
			     "must hold 1..4096 bytes"};
	for (int i = 0; i < 3; i++) {
		hff[0].value = (char *)bad[i];
		err = (struct pf_error){0};
		assert_null(agent_exporter_new_opts(&cfg, &o, &err));
		assert_string_equal(err.path, "headers_from_file");
		assert_non_null(strstr(err.msg, bad[i]));
		if (!strstr(err.msg, why[i]))
			fprintf(stderr, "got: %s\n", err.msg);
		assert_non_null(strstr(err.msg, why[i]));
	}
	unlink(key);
	unlink(empty);
	unlink(big);
	rmdir(dir);
}

static void test_pyroscope(void **state)
{
	struct server s;
	server_start(&s, NULL, 0);
	char purl[128];
	snprintf(purl, sizeof(purl), "http://127.0.0.1:%d/pyro/", s.port);
	struct pf_kv_str hdr[] = {{"X-Scope-OrgID", "t1"}};
	struct pf_exporter cfg = {.type = PF_EXPORTER_PYROSCOPE,
				  .endpoint = purl,
				  .compression = PF_COMPRESSION_GZIP,
				  .timeout_seconds = 2,
				  .n_headers = 1,
				  .headers = hdr};
	struct agent_exporter *x = agent_exporter_new(&cfg, NULL);
	assert_non_null(x);
	assert_string_equal(agent_exporter_type(x), "pyroscope");
	assert_true(agent_exporter_wants_window(x));
	uint8_t b[4] = {0};
	assert_int_equal(agent_exporter_submit(x, b, 4, zero_id, NULL, NULL), -ENOTSUP);
	assert_int_equal(agent_exporter_export(x, b, 4, zero_id, NULL), -ENOTSUP);

	struct pf_prof_window *w = prof_fixture_window(PROF_FIX_TIMESTAMPS);
	size_t n = 0;
	struct done_log d = {.m = PTHREAD_MUTEX_INITIALIZER};
	assert_int_equal(agent_exporter_submit_window(x, w, on_done, &d, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(agent_exporter_flush(x, 10000), 0);
	assert_int_equal(d.n, 1); /* one callback for the window */
	assert_int_equal(d.ok, 1);
	/* a window without samples queues nothing */
	struct pf_prof_window *empty = pf_prof_window_new();
	empty->frequency_hz = 99;
	assert_int_equal(agent_exporter_submit_window(x, empty, on_done, &d, &n), -ENODATA);
	assert_int_equal(n, 0);
	pf_prof_window_free(empty);
	server_stop(&s);
	assert_int_equal(s.n_reqs, 2);
	const char *want[2] = {
	    "POST /pyro/ingest?format=pprof&name=app%7Bhost_name%3Dhost-a%2C"
	    "process_executable_name%3Dapp%2Ccontainer_id%3Dc0ffee%7D"
	    "&from=1700000000&until=1700000010 HTTP/1.1\r\n",
	    "POST /pyro/ingest?format=pprof&name=other%7Bhost_name%3Dhost-a%2C"
	    "process_executable_name%3Dapp%2Ccontainer_id%3Dc0ffee%7D"
	    "&from=1700000000&until=1700000010 HTTP/1.1\r\n",
	};
	for (int i = 0; i < 2; i++) {
		struct req *r = &s.reqs[i];
		if (strncmp(r->head, want[i], strlen(want[i])) != 0)
			fprintf(stderr, "got: %s\n", r->head);
		assert_true(strncmp(r->head, want[i], strlen(want[i])) == 0);
		assert_non_null(
		    strcasestr(r->head, "\r\nContent-Type: application/octet-stream\r\n"));
		assert_null(strcasestr(r->head, "Content-Encoding"));
		assert_non_null(strcasestr(r->head, "\r\nX-Scope-OrgID: t1\r\n"));
		assert_true(pf_gzip_is_gzip(r->body, r->len));
		struct pf_prof_window *got = NULL;
		struct pf_error err = {0};
		assert_int_equal(pf_pprof_decode(r->body, r->len, 16 << 20, &got, &err), 0);
		assert_int_equal(got->n_processes, 1);
		assert_int_equal(got->processes[0].pid, w->processes[i].pid);
		uint64_t want_samples = 0;
		for (size_t k = 0; k < w->processes[i].n_samples; k++)
			want_samples += w->processes[i].samples[k].count;
		assert_int_equal(pf_prof_window_samples(got), want_samples);
		pf_prof_window_free(got);
	}
	struct agent_exporter_status st;
	agent_exporter_status(x, &st);
	assert_int_equal(st.confirmed, 2);
	server_done(&s);
	agent_exporter_free(x);

	/* the name: service.name missing -> unknown_service:<exe>; name syntax escaped */
	struct pf_prof_attr attrs[] = {{"process.executable.name", "we{ird}=,"},
				       {"k8s.pod.name", "p-1"}};
	struct pf_prof_process p = {.pid = 1, .n_attrs = 2, .attrs = attrs};
	struct pf_prof_window w2 = {.start_unix_ns = 1500000000, .end_unix_ns = 2500000001};
	struct pf_buf out;
	pf_buf_init(&out, 4096);
	assert_int_equal(agent_pyroscope_app_name(&w2, &p, &out), 0);
	assert_string_equal(pf_buf_str(&out),
			    "unknown_service:we_ird___{process_executable_name=we_ird___,"
			    "k8s_pod_name=p-1}");
	pf_buf_reset(&out);
	assert_int_equal(agent_pyroscope_target("", &w2, &p, &out), 0);
	assert_non_null(strstr(pf_buf_str(&out), "&from=1&until=3"));
	assert_true(strncmp(pf_buf_str(&out), "/ingest?format=pprof&name=unknown_service%3A", 44) ==
		    0);
	pf_buf_release(&out);
	pf_prof_window_free(w);

	/* other types refuse windows */
	struct pf_exporter ocfg = http_cfg(1);
	x = agent_exporter_new(&ocfg, NULL);
	assert_false(agent_exporter_wants_window(x));
	w = prof_fixture_window(0);
	assert_int_equal(agent_exporter_submit_window(x, w, NULL, NULL, NULL), -ENOTSUP);
	pf_prof_window_free(w);
	agent_exporter_free(x);
}

/* A wall-clock window (the agent's wall/nanoseconds type) goes to Pyroscope as pprof with the
 * sample type wall/nanoseconds, which Pyroscope names the profile type wall
 * (wall:wall:nanoseconds:wall:nanoseconds), its values the nanoseconds. */
static void test_pyroscope_wall(void **state)
{
	struct server s;
	server_start(&s, NULL, 0);
	char purl[128];
	snprintf(purl, sizeof(purl), "http://127.0.0.1:%d/", s.port);
	struct pf_exporter cfg = {.type = PF_EXPORTER_PYROSCOPE,
				  .endpoint = purl,
				  .compression = PF_COMPRESSION_GZIP,
				  .timeout_seconds = 2};
	struct agent_exporter *x = agent_exporter_new(&cfg, NULL);
	assert_non_null(x);
	struct pf_prof_window *w = prof_fixture_window(PROF_FIX_TIMESTAMPS);
	static const struct pf_prof_value_type wall = {"wall", "nanoseconds"};
	w->n_sample_types = 1;
	w->sample_types = &wall;
	w->period_type = wall;
	w->period = 10000000;
	int64_t want = 0;
	for (size_t i = 0; i < w->n_processes; i++) {
		struct pf_prof_sample *sm = (struct pf_prof_sample *)w->processes[i].samples;
		for (size_t k = 0; k < w->processes[i].n_samples; k++) {
			int64_t *v = pf_prof_alloc(w, sizeof(*v));
			int64_t *ev = pf_prof_alloc(w, sm[k].n_timestamps * sizeof(*ev));
			assert_true(v && ev);
			for (uint32_t j = 0; j < sm[k].n_timestamps; j++)
				*v += ev[j] = 10000000 + j; /* a tick, or a wait of about as long */
			sm[k].values = v;
			sm[k].event_values = ev;
			want += i == 0 ? *v : 0;
		}
	}
	size_t n = 0;
	assert_int_equal(agent_exporter_submit_window(x, w, NULL, NULL, &n), 0);
	assert_int_equal(agent_exporter_flush(x, 10000), 0);
	server_stop(&s);
	assert_int_equal(s.n_reqs, (int)n);
	struct pf_prof_window *got = NULL;
	struct pf_error err = {0};
	assert_int_equal(pf_pprof_decode(s.reqs[0].body, s.reqs[0].len, 16 << 20, &got, &err), 0);
	assert_int_equal(got->n_sample_types, 1);
	assert_string_equal(got->sample_types[0].type, "wall");
	assert_string_equal(got->sample_types[0].unit, "nanoseconds");
	int64_t total = 0;
	for (size_t k = 0; k < got->processes[0].n_samples; k++)
		total += pf_prof_sample_value(got, &got->processes[0].samples[k], 0);
	assert_int_equal(total, want);
	pf_prof_window_free(got);
	server_done(&s);
	agent_exporter_free(x);
	pf_prof_window_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_retry_then_success),
	    cmocka_unit_test(test_400_not_retried),
	    cmocka_unit_test(test_down_longer_than_queue),
	    cmocka_unit_test(test_dead_and_alive),
	    cmocka_unit_test(test_partial_success),
	    cmocka_unit_test(test_spill_survives_restart),
	    cmocka_unit_test(test_spill_sweep),
	    cmocka_unit_test(test_pyroscope),
	    cmocka_unit_test(test_pyroscope_wall),
	    cmocka_unit_test(test_headers_from_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
