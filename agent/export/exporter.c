/* exporter.c — see exporter.h. One mutex guards the queue and the statistics; the worker
 * takes the oldest item, makes one attempt without the lock, and records the outcome. A
 * second mutex (backend) serialises attempts of the worker and of agent_exporter_export(). */
#include "export/exporter.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "export/file.h"
#include "export/otlp_grpc.h"
#include "export/otlp_http.h"
#include "export/pyroscope.h"
#include "export/spill.h"
#include "pf/backoff.h"
#include "pf/buf.h"
#include "pf/clock.h"
#include "pf/compiler.h"
#include "pf/hash.h"
#include "pf/list.h"
#include "pf/log.h"
#include "pf/thread.h"
#include "pf/uuid.h"
#include "pprof_codec.h"

struct item {
	struct item *next;
	uint8_t *data;
	size_t len;
	char *target; /* pyroscope: the request target; NULL otherwise */
	uint8_t id[16];
	uint64_t seq;
	uint64_t enq_unix_ns;
	bool spilled;
	bool evicted; /* dropped while its attempt was in flight */
	agent_exporter_done_fn done;
	void *user;
	int rc; /* on the finished list: what done gets */
};

enum outcome { OUT_OK, OUT_RETRY, OUT_FAIL };

struct agent_exporter {
	enum pf_exporter_type type;
	struct agent_export_file *file;
	struct agent_otlp_http *http;
	struct agent_otlp_grpc *grpc;
	struct agent_spill *spill;
	uint64_t queue_bytes;

	pthread_mutex_t backend; /* one attempt at a time */
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC; any state change is broadcast */
	pthread_t thread;
	bool thread_started, stop;

	/* under lock */
	struct item *head, *tail;
	struct item *inflight;
	struct item *finished; /* done callbacks still to run (data already freed) */
	unsigned callbacks_running;
	uint64_t next_seq;
	struct pf_backoff bo;
	uint64_t retry_at_ms; /* monotonic; 0 when not backing off */
	struct agent_exporter_status st;
	uint64_t consecutive_failures;
};

static uint64_t now_unix_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

const uint64_t agent_exporter_latency_bounds_us[AGENT_EXPORTER_LATENCY_BUCKETS] = {
    1000,   5000,    10000,   25000,   50000,	 100000,  250000,
    500000, 1000000, 2500000, 5000000, 10000000, 30000000};

static void abs_deadline(struct timespec *ts, uint64_t at_mono_ms)
{
	ts->tv_sec = (time_t)(at_mono_ms / 1000u);
	ts->tv_nsec = (long)(at_mono_ms % 1000u) * 1000000L;
}

static size_t item_cost(const struct item *it)
{
	return it->len + (it->target ? strlen(it->target) : 0);
}

static void item_free(struct item *it)
{
	if (!it)
		return;
	free(it->data);
	free(it->target);
	free(it);
}

/* ---- status text (under lock) ---- */

static void refresh_status(struct agent_exporter *x)
{
	struct agent_exporter_status *st = &x->st;
	st->exports_ok = st->confirmed;
	st->exports_failed = st->failed;
	uint64_t now = pf_mono_ms();
	st->next_retry_ms = x->retry_at_ms > now ? x->retry_at_ms - now : 0;
	if (st->healthy)
		snprintf(st->status, sizeof(st->status),
			 "ok: %" PRIu64 " confirmed, %" PRIu64 " queued", st->confirmed,
			 st->queued_items);
	else if (st->next_retry_ms || x->head || x->inflight) /* an attempt in flight is one */
		snprintf(st->status, sizeof(st->status),
			 "retrying: %" PRIu64 " consecutive "
			 "errors, next attempt in %" PRIu64 " s, %" PRIu64 " queued",
			 x->consecutive_failures, (st->next_retry_ms + 999) / 1000,
			 st->queued_items);
	else
		snprintf(st->status, sizeof(st->status), "failing: %" PRIu64 " consecutive errors",
			 x->consecutive_failures);
}

/* Moves an item to the finished list: its spill file and data go now, done runs later on the
 * worker thread. Under lock. */
static void finish(struct agent_exporter *x, struct item *it, int rc)
{
	if (it->spilled && x->spill)
		agent_spill_remove(x->spill, it->seq);
	if (!it->done) {
		item_free(it);
		return;
	}
	free(it->data);
	free(it->target);
	it->data = NULL;
	it->target = NULL;
	it->rc = rc;
	it->next = x->finished;
	x->finished = it;
}

/* Drops the oldest items until `need` more bytes fit. The item in flight is the oldest (it
 * was the head): it goes first, by no longer counting it (its attempt ends as confirmed or
 * dropped). Under lock. */
static void make_room(struct agent_exporter *x, size_t need)
{
	while (x->st.queued_bytes + need > x->queue_bytes) {
		struct item *it = x->head;
		if (x->inflight && !x->inflight->evicted) {
			x->inflight->evicted = true;
			x->st.queued_bytes -= item_cost(x->inflight);
			x->st.queued_items--;
		} else if (it) {
			x->head = it->next;
			if (!x->head)
				x->tail = NULL;
			size_t c = item_cost(it);
			x->st.queued_bytes -= c;
			x->st.queued_items--;
			x->st.dropped++;
			x->st.dropped_bytes += c;
			finish(x, it, -ENOBUFS);
		} else {
			break; /* cannot happen: need <= queue_bytes was checked */
		}
	}
}

static void *worker(void *arg);

/* Starts the worker on first use (an exporter built only to check a config has none). Under
 * lock. */
static int ensure_thread(struct agent_exporter *x)
{
	if (x->thread_started)
		return 0;
	if (pthread_create(&x->thread, NULL, worker, x) != 0)
		return -EAGAIN;
	x->thread_started = true;
	return 0;
}

/* Appends a new item (ownership taken) to the queue. Under lock. */
static void append(struct agent_exporter *x, struct item *it)
{
	make_room(x, item_cost(it));
	PF_QUEUE_APPEND(x->head, x->tail, it, next);
	x->st.queued_bytes += item_cost(it);
	x->st.queued_items++;
	x->st.submitted++;
	refresh_status(x);
	pthread_cond_broadcast(&x->cond);
}

/* ---- one attempt ---- */

static bool retryable_status(int s)
{
	/* OTLP/HTTP "Retryable Response Codes" */
	return s == 429 || s == 502 || s == 503 || s == 504;
}

/* Reads a 2xx OTLP response for a partial success (under no lock; result recorded later). */
static void check_partial(const struct agent_http_result *res, int64_t *rejected, char *msg,
			  size_t cap)
{
	*rejected = 0;
	msg[0] = 0;
	if (!res->body.len || strcasestr(res->content_type, "json"))
		return;
	if (agent_otlp_partial_success_parse(res->body.data, res->body.len, rejected, msg, cap) <
	    0) {
		*rejected = 0;
		msg[0] = 0;
		return;
	}
	for (char *c = msg; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = ' ';
}

struct attempt {
	int rc;
	enum outcome out;
	int http_status;
	int64_t retry_after_ms; /* -1 when none */
	uint64_t took_ms;
	uint64_t took_us;
	int64_t rejected;
	char partial_msg[256];
	struct pf_error err;
};

/* One otlp_grpc call: OK (with its partial success), retryable per the OTLP specification
 * (a RetryInfo's delay honoured like Retry-After), or refused. */
static void grpc_attempt(struct agent_exporter *x, const uint8_t *data, size_t len,
			 struct attempt *a)
{
	struct agent_otlp_grpc_result res;
	a->rc = agent_otlp_grpc_export(x->grpc, data, len, &res, &a->err);
	if (a->rc == 0) {
		a->out = OUT_OK;
		struct agent_http_result r = {.body = res.response};
		check_partial(&r, &a->rejected, a->partial_msg, sizeof(a->partial_msg));
	} else if (res.code < 0) {
		a->out = a->rc == -ENOMEM ? OUT_RETRY : OUT_FAIL;
	} else {
		a->out = agent_otlp_grpc_retryable(res.code, res.retry_delay_ms >= 0) ? OUT_RETRY
										       : OUT_FAIL;
		if (a->out == OUT_RETRY && res.retry_delay_ms >= 0)
			a->retry_after_ms =
			    pf_min(res.retry_delay_ms, (int64_t)AGENT_EXPORTER_MAX_RETRY_AFTER_MS);
	}
	pf_buf_release(&res.response);
}

static void run_attempt(struct agent_exporter *x, const uint8_t *data, size_t len,
			const char *target, const uint8_t id[16], struct attempt *a)
{
	memset(a, 0, sizeof(*a));
	a->retry_after_ms = -1;
	pthread_mutex_lock(&x->backend);
	uint64_t t0 = mono_us();
	if (x->file) {
		a->rc =
		    agent_export_file_write(x->file, data, len, id, now_unix_ns(), NULL, &a->err);
		a->out = a->rc == 0			       ? OUT_OK
			 : a->rc == -EFBIG || a->rc == -EINVAL ? OUT_FAIL
							       : OUT_RETRY;
	} else if (x->grpc) {
		grpc_attempt(x, data, len, a);
	} else {
		struct agent_http_result res;
		agent_http_result_init(&res, 0);
		a->rc = agent_otlp_http_send(x->http, target,
					     target ? AGENT_PYROSCOPE_CONTENT_TYPE : NULL, data,
					     len, &res, &a->err);
		a->http_status = res.status;
		if (a->rc == 0) {
			a->out = OUT_OK;
			if (x->type == PF_EXPORTER_OTLP_HTTP)
				check_partial(&res, &a->rejected, a->partial_msg,
					      sizeof(a->partial_msg));
		} else if (res.status) {
			a->out = retryable_status(res.status) ? OUT_RETRY : OUT_FAIL;
		} else {
			/* transport: connect, timeout, reset, closed early -> retry */
			a->out = a->rc == -E2BIG || a->rc == -EINVAL ? OUT_FAIL : OUT_RETRY;
		}
		if (a->out == OUT_RETRY && res.retry_after[0]) {
			int64_t ms = pf_retry_after_parse(res.retry_after,
							  (int64_t)(now_unix_ns() / 1000000000u));
			if (ms >= 0)
				a->retry_after_ms =
				    pf_min(ms, (int64_t)AGENT_EXPORTER_MAX_RETRY_AFTER_MS);
		}
		agent_http_result_release(&res);
	}
	a->took_us = mono_us() - t0;
	a->took_ms = a->took_us / 1000u;
	pthread_mutex_unlock(&x->backend);
}

/* Records an attempt's outcome in the statistics. Under lock. */
static void record(struct agent_exporter *x, const struct attempt *a, size_t len)
{
	struct agent_exporter_status *st = &x->st;
	st->sent++;
	st->last_http_status = a->http_status;
	size_t b = 0;
	while (b < AGENT_EXPORTER_LATENCY_BUCKETS &&
	       a->took_us > agent_exporter_latency_bounds_us[b])
		b++;
	st->latency_buckets[b]++;
	st->latency_sum_us += a->took_us;
	st->latency_count++;
	if (a->out == OUT_OK) {
		st->bytes_ok += len;
		st->last_ok_unix_ns = now_unix_ns();
		st->last_latency_ms = a->took_ms;
		st->max_latency_ms = pf_max(st->max_latency_ms, a->took_ms);
		x->consecutive_failures = 0;
		st->healthy = true;
		if (a->rejected > 0 || a->partial_msg[0]) {
			st->partial_successes++;
			st->rejected_profiles += a->rejected > 0 ? (uint64_t)a->rejected : 0;
			snprintf(st->last_partial_error, sizeof(st->last_partial_error), "%s",
				 a->partial_msg[0] ? a->partial_msg : "(no message)");
			pf_log_warn("exporter %s: partial success: %" PRId64
				    " profiles rejected: %s",
				    x->http   ? agent_otlp_http_url(x->http)
				    : x->grpc ? agent_otlp_grpc_url(x->grpc)
					      : agent_exporter_type(x),
				    a->rejected, st->last_partial_error);
		}
	} else {
		x->consecutive_failures++;
		st->healthy = false;
		snprintf(st->last_error, sizeof(st->last_error), "%s",
			 a->err.msg[0] ? a->err.msg : strerror(-a->rc));
		if (a->out == OUT_RETRY)
			st->retried++;
	}
}

/* ---- worker ---- */

static void run_finished(struct agent_exporter *x)
{
	while (x->finished) {
		struct item *it = x->finished;
		x->finished = it->next;
		x->callbacks_running++;
		pthread_mutex_unlock(&x->lock);
		it->done(it->user, it->rc);
		item_free(it);
		pthread_mutex_lock(&x->lock);
		x->callbacks_running--;
	}
}

static void *worker(void *arg)
{
	struct agent_exporter *x = arg;
	pthread_mutex_lock(&x->lock);
	for (;;) {
		run_finished(x);
		if (x->stop)
			break;
		if (!x->head) {
			pthread_cond_broadcast(&x->cond); /* idle: wake drain/flush */
			pthread_cond_wait(&x->cond, &x->lock);
			continue;
		}
		uint64_t now = pf_mono_ms();
		if (x->retry_at_ms > now) {
			pthread_cond_broadcast(&x->cond);
			struct timespec ts;
			abs_deadline(&ts, x->retry_at_ms);
			pthread_cond_timedwait(&x->cond, &x->lock, &ts);
			continue;
		}
		x->retry_at_ms = 0;
		struct item *it = x->head;
		x->head = it->next;
		if (!x->head)
			x->tail = NULL;
		it->next = NULL;
		x->inflight = it;
		pthread_mutex_unlock(&x->lock);

		struct attempt a;
		run_attempt(x, it->data, it->len, it->target, it->id, &a);

		pthread_mutex_lock(&x->lock);
		x->inflight = NULL;
		record(x, &a, it->len);
		size_t c = item_cost(it);
		if (a.out == OUT_OK) {
			pf_backoff_reset(&x->bo);
			x->st.confirmed++;
			if (!it->evicted) {
				x->st.queued_bytes -= c;
				x->st.queued_items--;
			}
			finish(x, it, 0);
		} else if (it->evicted) {
			x->st.dropped++;
			x->st.dropped_bytes += c;
			if (a.out == OUT_RETRY)
				pf_backoff_next(&x->bo); /* keep the backoff growing */
			finish(x, it, -ENOBUFS);
		} else if (a.out == OUT_FAIL) {
			x->st.failed++;
			x->st.queued_bytes -= c;
			x->st.queued_items--;
			pf_log_warn("exporter %s: dropping an export the back end refused: %s",
				    agent_exporter_type(x), x->st.last_error);
			finish(x, it, a.rc < 0 ? a.rc : -EPROTO);
		} else {
			/* back at the head: the oldest, so the first to go if room is needed */
			if (a.retry_after_ms >= 0)
				pf_backoff_retry_after(&x->bo, (uint64_t)a.retry_after_ms);
			x->retry_at_ms = pf_mono_ms() + pf_backoff_next(&x->bo);
			it->next = x->head;
			x->head = it;
			if (!x->tail)
				x->tail = it;
		}
		refresh_status(x);
		pthread_cond_broadcast(&x->cond);
	}
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
	return NULL;
}

/* ---- create / free ---- */

/* The back end an exporter sends to, spelled one way, so that endpoints that differ only in
 * spelling share a spill directory: scheme and host in lower case, the port explicit (80,
 * 443), for otlp_http an empty path or "/" written as the default path, for pyroscope (whose
 * path is a base) and file (a directory) trailing '/' removed. An endpoint that does not
 * parse is used as written. */
static int backend_key(const struct pf_exporter *cfg, struct pf_buf *key)
{
	const char *type = pf_exporter_type_name(cfg->type);
	if (cfg->type == PF_EXPORTER_FILE) {
		const char *p = cfg->path ? cfg->path : "";
		size_t l = strlen(p);
		while (l > 1 && p[l - 1] == '/')
			l--;
		return pf_buf_printf(key, "%s\n%.*s", type, (int)l, p);
	}
	const char *u = cfg->endpoint ? cfg->endpoint : "";
	bool tls = strncasecmp(u, "https://", 8) == 0;
	if (!tls && strncasecmp(u, "http://", 7) != 0)
		return pf_buf_printf(key, "%s\n%s", type, u);
	const char *host = u + (tls ? 8 : 7);
	const char *host_end = *host == '[' ? strchr(host, ']') : host + strcspn(host, ":/?#");
	if (!host_end)
		return pf_buf_printf(key, "%s\n%s", type, u);
	if (*host == '[')
		host_end++;
	const char *after = host_end, *port = tls ? "443" : "80";
	size_t port_len = strlen(port);
	if (*after == ':') {
		port = after + 1;
		port_len = strcspn(port, "/?#");
		after = port + port_len;
	}
	const char *path = after;
	size_t path_len = strlen(path);
	if (cfg->type == PF_EXPORTER_PYROSCOPE)
		while (path_len && path[path_len - 1] == '/')
			path_len--;
	else if (!path_len || !strcmp(path, "/"))
		path = AGENT_OTLP_HTTP_DEFAULT_PATH, path_len = strlen(path);
	int r = pf_buf_printf(key, "%s\n%s://", type, tls ? "https" : "http");
	for (const char *c = host; r == 0 && c < host_end; c++)
		r = pf_buf_putc(key, (char)((*c >= 'A' && *c <= 'Z') ? *c - 'A' + 'a' : *c));
	if (r == 0)
		r = pf_buf_printf(key, ":%.*s%.*s", (int)port_len, port, (int)path_len, path);
	return r;
}

/* <root>/<type>-<16 hex of sha256(key)>; legacy: the key was "type \n endpoint-or-path" as
 * written (before backend_key). */
static void spill_subdir(const struct pf_exporter *cfg, const char *root, bool legacy, char *dst,
			 size_t cap)
{
	struct pf_buf key;
	pf_buf_init(&key, 1 << 16);
	if (legacy)
		pf_buf_printf(&key, "%s\n%s", pf_exporter_type_name(cfg->type),
			      cfg->type == PF_EXPORTER_FILE ? (cfg->path ? cfg->path : "")
							    : (cfg->endpoint ? cfg->endpoint : ""));
	else
		backend_key(cfg, &key);
	uint8_t h[PF_SHA256_LEN];
	pf_sha256(key.data ? key.data : (const uint8_t *)"", key.len, h);
	pf_buf_release(&key);
	char hex[17];
	pf_hex_encode(h, 8, hex);
	hex[16] = 0;
	snprintf(dst, cap, "%s/%s-%s", root, pf_exporter_type_name(cfg->type), hex);
}

/* A spill directory named the way earlier versions did (the endpoint as written) becomes this
 * exporter's, so an upgrade loses nothing. Nothing happens when the names agree or the new
 * one exists already (the sweep then removes the old one). */
static void adopt_legacy_spill(const struct pf_exporter *cfg, const char *root, const char *dir)
{
	char old[4096];
	spill_subdir(cfg, root, true, old, sizeof(old));
	struct stat st;
	if (strcmp(old, dir) == 0 || stat(old, &st) < 0 || stat(dir, &st) == 0)
		return;
	if (rename(old, dir) == 0)
		pf_log_info("exporter %s: spill directory %s renamed to %s",
			    pf_exporter_type_name(cfg->type), old, dir);
}

static int reload_one(void *user, struct agent_spill_record *rec)
{
	struct agent_exporter *x = user;
	struct item *it = calloc(1, sizeof(*it));
	if (!it) {
		free(rec->data);
		free(rec->target);
		return -ENOMEM;
	}
	it->data = rec->data;
	it->len = rec->len;
	it->target = rec->target;
	memcpy(it->id, rec->id, 16);
	it->seq = rec->seq;
	it->enq_unix_ns = rec->enq_unix_ns;
	it->spilled = true;
	if (rec->seq >= x->next_seq)
		x->next_seq = rec->seq + 1;
	if (item_cost(it) > x->queue_bytes) { /* queue_bytes was lowered since */
		x->st.dropped++;
		x->st.dropped_bytes += item_cost(it);
		finish(x, it, -ENOBUFS);
		return 0;
	}
	append(x, it);
	x->st.spill_loaded++;
	return 0;
}

/* The request headers: the configured ones, one per headers_from_file entry (the file's
 * content, surrounding whitespace trimmed, read now) and `Authorization: Bearer <agent
 * token>` (auth: agent_token). Every value made here is in owned[0..*n_owned), zeroed and
 * freed by free_owned(). Returns 0 or a positive errno, like the constructor's e. */
#define HEADER_FILE_MAX 4096

/* Reads at most max bytes of path into a NUL-terminated heap buffer: 0, -EFBIG when longer,
 * or -errno. */
static int read_small_file(const char *path, size_t max, char **out, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char *buf = malloc(max + 2);
	size_t n = 0;
	int r = buf ? 0 : -ENOMEM;
	while (r == 0 && n <= max) {
		ssize_t got = read(fd, buf + n, max + 1 - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			r = -errno;
		else if (got == 0)
			break;
		else
			n += (size_t)got;
	}
	close(fd);
	if (r == 0 && n > max)
		r = -EFBIG;
	if (r < 0) {
		if (buf)
			explicit_bzero(buf, n);
		free(buf);
		return r;
	}
	buf[n] = 0;
	*out = buf;
	*len = n;
	return 0;
}

static int request_headers(const struct pf_exporter *cfg, const char *token, struct pf_kv_str **out,
			   size_t *n_out, char **owned, size_t *n_owned, struct pf_error *err)
{
	bool bearer = cfg->auth == PF_AUTH_AGENT_TOKEN;
	if (bearer && (!token || !*token)) {
		pf_error_set(err, -EINVAL, "auth",
			     "agent_token needs the agent's token (run with --token-file)");
		return EINVAL;
	}
	for (size_t i = 0; bearer && i < cfg->n_headers; i++)
		if (strcasecmp(cfg->headers[i].key, "authorization") == 0) {
			pf_error_set(err, -EINVAL, "auth",
				     "agent_token and an Authorization header exclude each other");
			return EINVAL;
		}
	size_t n = cfg->n_headers + cfg->n_headers_from_file + (bearer ? 1 : 0);
	*out = calloc(n ? n : 1, sizeof(**out));
	if (!*out)
		return ENOMEM;
	*n_out = 0;
	for (size_t i = 0; i < cfg->n_headers; i++)
		(*out)[(*n_out)++] = cfg->headers[i];
	for (size_t i = 0; i < cfg->n_headers_from_file; i++) {
		const struct pf_kv_str *f = &cfg->headers_from_file[i];
		char *text = NULL;
		size_t len = 0;
		int r = read_small_file(f->value, HEADER_FILE_MAX + 256, &text, &len);
		if (r < 0) {
			pf_error_set(err, r, "headers_from_file", "%s: cannot read '%s': %s",
				     f->key, f->value, strerror(-r));
			return (unsigned)-r;
		}
		owned[(*n_owned)++] = text;
		size_t a = 0, b = len;
		while (a < b && isspace((unsigned char)text[a]))
			a++;
		while (b > a && isspace((unsigned char)text[b - 1]))
			b--;
		memmove(text, text + a, b - a);
		text[b - a] = 0;
		if (b - a == 0 || b - a > HEADER_FILE_MAX || memchr(text, 0, b - a)) {
			pf_error_set(err, -EINVAL, "headers_from_file",
				     "%s: '%s' must hold 1..%d bytes of text", f->key, f->value,
				     HEADER_FILE_MAX);
			return EINVAL;
		}
		(*out)[*n_out].key = f->key;
		(*out)[(*n_out)++].value = text;
	}
	if (bearer) {
		size_t blen = strlen(token) + sizeof("Bearer ");
		char *v = malloc(blen);
		if (!v)
			return ENOMEM;
		owned[(*n_owned)++] = v;
		snprintf(v, blen, "Bearer %s", token);
		(*out)[*n_out].key = (char *)"Authorization";
		(*out)[(*n_out)++].value = v;
	}
	return 0;
}

static void free_owned(char **owned, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		explicit_bzero(owned[i], strlen(owned[i]));
		free(owned[i]);
	}
}

struct agent_exporter *agent_exporter_new_opts(const struct pf_exporter *cfg,
					       const struct agent_exporter_opts *opts,
					       struct pf_error *err)
{
	struct agent_exporter_opts o = opts ? *opts : (struct agent_exporter_opts){0};
	struct agent_exporter *x = calloc(1, sizeof(*x));
	if (!x)
		return NULL;
	x->type = cfg->type;
	x->queue_bytes = o.queue_bytes ? o.queue_bytes : AGENT_EXPORTER_DEFAULT_QUEUE_BYTES;
	pthread_mutex_init(&x->backend, NULL);
	pthread_mutex_init(&x->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&x->cond, &ca);
	pthread_condattr_destroy(&ca);
	pf_backoff_init(
	    &x->bo, o.backoff_base_ms ? o.backoff_base_ms : AGENT_EXPORTER_DEFAULT_BACKOFF_BASE_MS,
	    o.backoff_cap_ms ? o.backoff_cap_ms : AGENT_EXPORTER_DEFAULT_BACKOFF_CAP_MS);
	x->st.healthy = true;
	x->st.queue_limit_bytes = x->queue_bytes;
	x->next_seq = 1;

	int e = 0;
	if (cfg->type == PF_EXPORTER_FILE) {
		x->file = agent_export_file_new(cfg->path, cfg->max_bytes, err);
		if (!x->file)
			e = errno ? errno : EINVAL;
	} else {
		/* pyroscope shares the HTTP client; its pprof is gzip'd already */
		struct pf_exporter c = *cfg;
		struct pf_kv_str *hdrs = NULL;
		char *owned[PF_PROFCFG_MAX_HEADERS + 1];
		size_t n_owned = 0;
		if (cfg->type == PF_EXPORTER_PYROSCOPE)
			c.compression = PF_COMPRESSION_NONE;
		e = request_headers(cfg, o.agent_token, &hdrs, &c.n_headers, owned, &n_owned, err);
		c.headers = hdrs;
		if (!e && cfg->type == PF_EXPORTER_OTLP_GRPC) {
			x->grpc = agent_otlp_grpc_new(&c, err);
			if (!x->grpc)
				e = errno ? errno : EINVAL;
		} else if (!e) {
			x->http = agent_otlp_http_new(&c, err);
			if (!x->http)
				e = errno ? errno : EINVAL;
		}
		free(hdrs);
		free_owned(owned, n_owned);
	}
	if (!e && o.spill_dir) {
		char dir[4096];
		spill_subdir(cfg, o.spill_dir, false, dir, sizeof(dir));
		adopt_legacy_spill(cfg, o.spill_dir, dir);
		x->spill = agent_spill_open(dir, err);
		if (!x->spill)
			e = errno ? errno : EIO;
	}
	if (!e && x->spill) {
		size_t bad = 0;
		pthread_mutex_lock(&x->lock);
		int r = agent_spill_load(x->spill, x->queue_bytes, reload_one, x, &bad);
		x->st.spill_errors += bad;
		pthread_mutex_unlock(&x->lock);
		if (r < 0) {
			pf_error_set(err, r, "spill_dir", "cannot read %s: %s",
				     agent_spill_dir(x->spill), strerror(-r));
			e = -r;
		}
	}
	if (!e && x->head) { /* reloaded items: deliver them now */
		pthread_mutex_lock(&x->lock);
		if (ensure_thread(x) < 0) {
			pf_error_set(err, -EAGAIN, "", "cannot start the exporter thread");
			e = EAGAIN;
		}
		pthread_mutex_unlock(&x->lock);
	}
	if (e) {
		agent_exporter_free(x);
		errno = e;
		return NULL;
	}
	pthread_mutex_lock(&x->lock);
	refresh_status(x);
	pthread_mutex_unlock(&x->lock);
	return x;
}

struct agent_exporter *agent_exporter_new(const struct pf_exporter *cfg, struct pf_error *err)
{
	return agent_exporter_new_opts(cfg, NULL, err);
}

const char *agent_exporter_type(const struct agent_exporter *x)
{
	return pf_exporter_type_name(x->type);
}

bool agent_exporter_wants_window(const struct agent_exporter *x)
{
	return x->type == PF_EXPORTER_PYROSCOPE;
}

void agent_exporter_free(struct agent_exporter *x)
{
	if (!x)
		return;
	if (x->thread_started) {
		pf_thread_stop(&x->lock, &x->cond, &x->stop, x->thread);
	}
	/* what is left: callbacks of finished items, then the queued ones (they stay spilled) */
	while (x->finished) {
		struct item *it = x->finished;
		x->finished = it->next;
		it->done(it->user, it->rc);
		item_free(it);
	}
	while (x->head) {
		struct item *it = x->head;
		x->head = it->next;
		if (it->done)
			it->done(it->user, -ECANCELED);
		item_free(it);
	}
	pthread_mutex_destroy(&x->lock);
	pthread_mutex_destroy(&x->backend);
	pthread_cond_destroy(&x->cond);
	agent_spill_close(x->spill);
	agent_export_file_free(x->file);
	agent_otlp_http_free(x->http);
	agent_otlp_grpc_free(x->grpc);
	free(x);
}

/* ---- submit ---- */

/* Copies one payload into a new item and spills it; takes target. -E2BIG (counted dropped)
 * when it can never fit, -ENOMEM. */
static int prepare(struct agent_exporter *x, const uint8_t *data, size_t len, char *target,
		   const uint8_t id[16], struct item **out)
{
	size_t cost = len + (target ? strlen(target) : 0);
	if (cost > x->queue_bytes) {
		pthread_mutex_lock(&x->lock);
		x->st.dropped++;
		x->st.dropped_bytes += cost;
		snprintf(x->st.last_error, sizeof(x->st.last_error),
			 "export of %zu bytes is larger than the queue (%" PRIu64 " bytes)", cost,
			 x->queue_bytes);
		pthread_mutex_unlock(&x->lock);
		free(target);
		return -E2BIG;
	}
	struct item *it = calloc(1, sizeof(*it));
	uint8_t *copy = malloc(len ? len : 1);
	if (!it || !copy) {
		free(it);
		free(copy);
		free(target);
		return -ENOMEM;
	}
	memcpy(copy, data, len);
	it->data = copy;
	it->len = len;
	it->target = target;
	if (id)
		memcpy(it->id, id, 16);
	it->enq_unix_ns = now_unix_ns();
	pthread_mutex_lock(&x->lock);
	it->seq = x->next_seq++;
	pthread_mutex_unlock(&x->lock);
	if (x->spill) /* one small file, no fsync (spill.h) */
		it->spilled = agent_spill_write(x->spill, it->seq, it->id, it->enq_unix_ns,
						it->target, it->data, it->len) == 0;
	*out = it;
	return 0;
}

/* Frees prepared items that could not be queued. */
static void discard(struct agent_exporter *x, struct item **items, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (items[i]->spilled)
			agent_spill_remove(x->spill, items[i]->seq);
		item_free(items[i]);
	}
}

/* Queues prepared items in one go (so none can finish before all are queued). -EAGAIN when
 * the worker cannot start (the items are discarded). */
static int commit(struct agent_exporter *x, struct item **items, size_t n,
		  agent_exporter_done_fn done, void *user)
{
	pthread_mutex_lock(&x->lock);
	if (ensure_thread(x) < 0) {
		pthread_mutex_unlock(&x->lock);
		discard(x, items, n);
		return -EAGAIN;
	}
	for (size_t i = 0; i < n; i++) {
		items[i]->done = done;
		items[i]->user = user;
		if (items[i]->spilled)
			x->st.spilled++;
		else if (x->spill)
			x->st.spill_errors++;
		append(x, items[i]);
	}
	pthread_mutex_unlock(&x->lock);
	return 0;
}

int agent_exporter_submit(struct agent_exporter *x, const uint8_t *data, size_t len,
			  const uint8_t profile_id[16], agent_exporter_done_fn done, void *user)
{
	if (x->type == PF_EXPORTER_PYROSCOPE)
		return -ENOTSUP;
	struct item *it;
	int r = prepare(x, data, len, NULL, profile_id, &it);
	return r < 0 ? r : commit(x, &it, 1, done, user);
}

/* The pushes of one window share one done callback: it runs (on the worker thread) when the
 * last push finished, with 0 or the first failure. */
struct window_group {
	size_t pending;
	int rc;
	agent_exporter_done_fn done;
	void *user;
};

/* Callbacks run on one thread at a time (the worker, or agent_exporter_free()): no atomics. */
static void group_done(void *user, int rc)
{
	struct window_group *g = user;
	if (rc < 0 && !g->rc)
		g->rc = rc;
	if (--g->pending == 0) {
		g->done(g->user, g->rc);
		free(g);
	}
}

int agent_exporter_submit_window(struct agent_exporter *x, const struct pf_prof_window *w,
				 agent_exporter_done_fn done, void *user, size_t *n_pushes)
{
	if (n_pushes)
		*n_pushes = 0;
	if (x->type != PF_EXPORTER_PYROSCOPE)
		return -ENOTSUP;
	struct item **items = calloc(w->n_processes ? w->n_processes : 1, sizeof(*items));
	if (!items)
		return -ENOMEM;
	int first = 0;
	size_t n = 0;
	for (size_t i = 0; i < w->n_processes; i++) {
		const struct pf_prof_process *p = &w->processes[i];
		if (!p->n_samples)
			continue;
		struct pf_buf pprof, target;
		pf_buf_init(&pprof, (size_t)pf_min(x->queue_bytes, (uint64_t)SIZE_MAX));
		pf_buf_init(&target, 64 << 10);
		int r = pf_pprof_encode(w, p->pid, &pprof, NULL);
		if (r == -E2BIG) { /* larger than the whole queue */
			pthread_mutex_lock(&x->lock);
			x->st.dropped++;
			pthread_mutex_unlock(&x->lock);
		}
		if (r == 0)
			r = agent_pyroscope_target(agent_otlp_http_base_path(x->http), w, p,
						   &target);
		if (r == 0) {
			size_t tl = 0;
			char *t = (char *)pf_buf_detach(&target, &tl);
			r = t ? prepare(x, pprof.data, pprof.len, t, NULL, &items[n]) : -ENOMEM;
			if (r == 0)
				n++;
		}
		pf_buf_release(&pprof);
		pf_buf_release(&target);
		if (r < 0 && !first)
			first = r;
	}
	int r = n ? 0 : first ? first : -ENODATA;
	struct window_group *g = NULL;
	if (r == 0 && done) {
		g = malloc(sizeof(*g));
		if (!g) {
			discard(x, items, n);
			r = -ENOMEM;
		} else {
			*g = (struct window_group){
			    .pending = n, .rc = first, .done = done, .user = user};
		}
	}
	if (r == 0) {
		r = commit(x, items, n, g ? group_done : NULL, g);
		if (r < 0)
			free(g);
		else if (n_pushes)
			*n_pushes = n;
	}
	free(items);
	return r;
}

/* ---- synchronous export ---- */

int agent_exporter_export(struct agent_exporter *x, const uint8_t *data, size_t len,
			  const uint8_t profile_id[16], struct pf_error *err)
{
	if (x->type == PF_EXPORTER_PYROSCOPE)
		return pf_error_set(err, -ENOTSUP, "type", "pyroscope takes windows");
	struct attempt a;
	run_attempt(x, data, len, NULL, profile_id, &a);
	pthread_mutex_lock(&x->lock);
	record(x, &a, len);
	if (a.out == OUT_OK)
		x->st.confirmed++;
	else
		x->st.failed++;
	x->st.submitted++;
	refresh_status(x);
	pthread_mutex_unlock(&x->lock);
	if (a.rc < 0 && err)
		pf_error_set(err, a.rc, a.err.path, "%s",
			     a.err.msg[0] ? a.err.msg : strerror(-a.rc));
	return a.rc;
}

/* ---- waiting ---- */

void agent_exporter_drain(struct agent_exporter *x)
{
	pthread_mutex_lock(&x->lock);
	while (!x->stop && (x->inflight || x->finished || x->callbacks_running ||
			    (x->head && !(x->retry_at_ms > pf_mono_ms()))))
		pthread_cond_wait(&x->cond, &x->lock);
	pthread_mutex_unlock(&x->lock);
}

int agent_exporter_flush(struct agent_exporter *x, uint32_t timeout_ms)
{
	uint64_t deadline = pf_mono_ms() + timeout_ms;
	struct timespec ts;
	abs_deadline(&ts, deadline);
	int r = 0;
	pthread_mutex_lock(&x->lock);
	while (x->inflight || x->finished || x->callbacks_running || x->head) {
		if (pf_mono_ms() >= deadline) {
			r = -ETIMEDOUT;
			break;
		}
		pthread_cond_timedwait(&x->cond, &x->lock, &ts);
	}
	pthread_mutex_unlock(&x->lock);
	return r;
}

void agent_exporter_status(struct agent_exporter *x, struct agent_exporter_status *out)
{
	pthread_mutex_lock(&x->lock);
	refresh_status(x);
	*out = x->st;
	pthread_mutex_unlock(&x->lock);
}

/* ---- spill directories of exporters that are gone ---- */

/* "<type>-<16 lowercase hex>" with a type of ours. */
static bool is_spill_name(const char *n)
{
	static const char *const types[] = {"file-", "otlp_http-", "pyroscope-", "otlp_grpc-"};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		size_t tl = strlen(types[i]);
		if (strncmp(n, types[i], tl) != 0 || strlen(n + tl) != 16)
			continue;
		return strspn(n + tl, "0123456789abcdef") == 16;
	}
	return false;
}

int agent_exporter_spill_sweep(const char *spill_root, const struct pf_exporter *cfgs, size_t n,
			       struct agent_spill_sweep *out)
{
	*out = (struct agent_spill_sweep){0};
	DIR *d = opendir(spill_root);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	/* the names in use: every configured exporter's (also one that could not start: its
	 * spill waits for it), and the legacy spelling of each */
	size_t nk = 2 * n;
	char(*keep)[64] = calloc(nk ? nk : 1, sizeof(*keep));
	if (!keep) {
		closedir(d);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		/* "/<type>-<16 hex>" with an empty root */
		for (int legacy = 0; legacy < 2; legacy++)
			spill_subdir(&cfgs[i], "", legacy, keep[2 * i + (size_t)legacy],
				     sizeof(keep[0]));
		/* the legacy name only while the exporter has not taken it over */
		char cur[4096];
		struct stat st;
		snprintf(cur, sizeof(cur), "%s%s", spill_root, keep[2 * i]);
		if (stat(cur, &st) == 0)
			keep[2 * i + 1][1] = 0;
	}
	int r = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!is_spill_name(de->d_name))
			continue;
		bool used = false;
		for (size_t k = 0; k < nk && !used; k++)
			used = strcmp(keep[k] + 1, de->d_name) == 0;
		if (used)
			continue;
		char dir[4096];
		snprintf(dir, sizeof(dir), "%s/%s", spill_root, de->d_name);
		uint64_t items = 0, bytes = 0;
		int rr = agent_spill_discard_dir(dir, &items, &bytes);
		if (rr < 0 && !r)
			r = rr;
		if (rr < 0)
			pf_log_warn("exporter spill: cannot remove %s: %s", dir, strerror(-rr));
		if (items)
			pf_log_warn("exporter spill: discarded %" PRIu64 " queued items (%" PRIu64
				    " bytes) of an exporter that is no longer configured: %s",
				    items, bytes, dir);
		else
			pf_log_info("exporter spill: removed %s (no exporter uses it)", dir);
		out->dirs++;
		out->items += items;
		out->bytes += bytes;
	}
	closedir(d);
	free(keep);
	return r;
}
