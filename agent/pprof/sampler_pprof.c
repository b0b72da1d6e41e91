/* sampler_pprof.c — see sampler_pprof.h.
 *
 * The scrapes go through the agent's HTTP client (http_client/http_client.h, libcurl): one
 * client per target, so its connection is kept between scrapes; each request is bounded by the
 * target's timeout and ends early when the sources are freed (the client's cancel flag).
 * Threads: the loop thread owns the schedule; each scrape runs on its own thread with a private
 * copy of its target and touches shared state only under the mutex, at its end. */
#include "pprof/sampler_pprof.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http_client/http_client.h"
#include "pf/buf.h"
#include "pf/compiler.h"
#include "pf/gzip.h"
#include "pprof_codec.h"

#define GO_DEFAULT_CPU_SECONDS 30 /* net/http/pprof's Profile handler without seconds= */

uint64_t pf_pprof_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------------------------------- */
/* URLs.                                                                                     */

struct url {
	bool tls;
	bool ip_literal;
	char host[256];
	char port[8];
	char target[4096]; /* path and query, starts with '/' */
};

static int url_parse(const char *s, struct url *u, struct pf_error *err, const char *path)
{
	memset(u, 0, sizeof(*u));
	if (!s)
		return pf_error_set(err, -EINVAL, path, "missing URL");
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c <= ' ' || *c == 0x7f)
			return pf_error_set(err, -EINVAL, path,
					    "URL contains a space or control "
					    "character");
	const char *p;
	if (strncasecmp(s, "http://", 7) == 0) {
		p = s + 7;
	} else if (strncasecmp(s, "https://", 8) == 0) {
		p = s + 8;
		u->tls = true;
	} else {
		return pf_error_set(err, -EINVAL, path, "not an http:// or https:// URL: %s", s);
	}
	size_t alen = strcspn(p, "/?#");
	const char *rest = p + alen;
	if (memchr(p, '@', alen))
		return pf_error_set(err, -EINVAL, path, "user info in URLs is not supported");
	const char *hs = p, *he, *port = NULL;
	if (*p == '[') {
		const char *rb = memchr(p, ']', alen);
		if (!rb)
			return pf_error_set(err, -EINVAL, path, "bad IPv6 address in %s", s);
		hs = p + 1;
		he = rb;
		if (rb + 1 < rest) {
			if (rb[1] != ':')
				return pf_error_set(err, -EINVAL, path, "bad authority in %s", s);
			port = rb + 2;
		}
		u->ip_literal = true;
	} else {
		const char *colon = memchr(p, ':', alen);
		he = colon ? colon : rest;
		port = colon ? colon + 1 : NULL;
	}
	size_t hlen = (size_t)(he - hs);
	if (!hlen || hlen >= sizeof(u->host))
		return pf_error_set(err, -EINVAL, path, "bad host in %s", s);
	memcpy(u->host, hs, hlen);
	if (port) {
		size_t plen = (size_t)(rest - port);
		char *end;
		char tmp[8];
		if (!plen || plen >= sizeof(tmp))
			return pf_error_set(err, -EINVAL, path, "bad port in %s", s);
		memcpy(tmp, port, plen);
		tmp[plen] = 0;
		long v = strtol(tmp, &end, 10);
		if (*end || v < 1 || v > 65535)
			return pf_error_set(err, -EINVAL, path, "bad port in %s", s);
		snprintf(u->port, sizeof(u->port), "%ld", v);
	} else {
		snprintf(u->port, sizeof(u->port), "%s", u->tls ? "443" : "80");
	}
	if (!u->ip_literal) {
		struct in6_addr a6;
		u->ip_literal =
		    inet_pton(AF_INET6, u->host, &a6) == 1 || inet_pton(AF_INET, u->host, &a6) == 1;
	}
	size_t tlen = strcspn(rest, "#");
	if (tlen + 2 > sizeof(u->target))
		return pf_error_set(err, -EINVAL, path, "URL too long");
	size_t o = 0;
	if (*rest != '/')
		u->target[o++] = '/';
	memcpy(u->target + o, rest, tlen);
	u->target[o + tlen] = 0;
	return 0;
}

/* The seconds= query parameter of the target, or `def` when absent or not a number. */
static uint32_t url_seconds(const struct url *u, uint32_t def)
{
	const char *q = strchr(u->target, '?');
	while (q) {
		q++;
		if (strncmp(q, "seconds=", 8) == 0) {
			char *end;
			long v = strtol(q + 8, &end, 10);
			if (end != q + 8 && (*end == 0 || *end == '&') && v >= 0 && v <= 86400)
				return (uint32_t)v;
			return def;
		}
		q = strchr(q, '&');
	}
	return def;
}

/* Sets seconds=N in the target's query (replacing an existing one). */
static int url_set_seconds(struct url *u, uint32_t secs)
{
	char out[sizeof(u->target)];
	const char *q = strchr(u->target, '?');
	size_t plen = q ? (size_t)(q - u->target) : strlen(u->target);
	struct pf_buf b;
	pf_buf_init(&b, sizeof(out) - 1);
	int r = pf_buf_append(&b, u->target, plen);
	char sep = '?';
	while (r == 0 && q && *q) {
		const char *param = q + 1;
		size_t n = strcspn(param, "&");
		if (n && strncmp(param, "seconds=", 8) != 0) {
			r = pf_buf_putc(&b, (uint8_t)sep);
			if (r == 0)
				r = pf_buf_append(&b, param, n);
			sep = '&';
		}
		q = param[n] ? param + n : NULL;
	}
	if (r == 0)
		r = pf_buf_printf(&b, "%cseconds=%" PRIu32, sep, secs);
	if (r == 0) {
		memcpy(u->target, b.data, b.len);
		u->target[b.len] = 0;
	}
	pf_buf_release(&b);
	return r < 0 ? -E2BIG : 0;
}

/* ---------------------------------------------------------------------------------------- */
/* HTTP GET (http_client.h, libcurl).                                                        */

/* The URL libcurl fetches: scheme, host ([v6] in brackets), port, target. */
static int url_string(const struct url *u, char *out, size_t cap)
{
	bool v6 = strchr(u->host, ':') != NULL;
	int n = snprintf(out, cap, "%s://%s%s%s:%s%s", u->tls ? "https" : "http", v6 ? "[" : "",
			 u->host, v6 ? "]" : "", u->port, u->target);
	return n < 0 || (size_t)n >= cap ? -E2BIG : 0;
}

/* GETs u into resp (the body cut at max_body is an error), redirects followed, Content-Encoding
 * gzip undone; the whole request bounded by timeout_ms. */
static int http_get(struct agent_http *http, const struct url *u, uint32_t timeout_ms,
		    size_t max_body, const atomic_bool *cancel, struct agent_http_result *resp,
		    struct pf_error *err)
{
	char url[sizeof(u->target) + 300];
	if (url_string(u, url, sizeof(url)) < 0)
		return pf_error_set(err, -E2BIG, "", "URL too long");
	static const char *const hdrs[] = {"Accept: */*"};
	struct agent_http_request req = {.method = "GET", .url = url, .headers = hdrs,
					 .n_headers = 1};
	struct agent_http_options opt = {.timeout_ms = timeout_ms,
					 .follow_redirects = true,
					 .decode_gzip = true,
					 .fail_over_cap = true,
					 .timeout_plain = true,
					 .cancel = cancel};
	agent_http_result_init(resp, max_body);
	return agent_http_do(http, &req, &opt, resp, err);
}

/* ---------------------------------------------------------------------------------------- */
/* Conversion.                                                                               */

static void opts_defaults(const struct pf_pprof_options *in, struct pf_pprof_options *o)
{
	if (in)
		*o = *in;
	else
		memset(o, 0, sizeof(*o));
	if (!o->timeout_ms)
		o->timeout_ms = PF_PPROF_DEFAULT_TIMEOUT_MS;
	if (!o->max_response_bytes)
		o->max_response_bytes = PF_PPROF_DEFAULT_MAX_RESPONSE;
	if (!o->max_decoded_bytes)
		o->max_decoded_bytes = PF_PPROF_DEFAULT_MAX_DECODED;
}

int pf_pprof_convert(const uint8_t *data, size_t len, const struct pf_pprof_target *t,
		     const struct pf_pprof_options *opts_in, uint64_t now_unix_ns,
		     struct pf_prof_window **out, struct pf_error *err)
{
	struct pf_pprof_options opts;
	opts_defaults(opts_in, &opts);
	struct pf_error derr = {0};
	struct pf_prof_window *w = NULL;
	int r = pf_pprof_decode(data, len, opts.max_decoded_bytes, &w, &derr);
	if (r < 0)
		return pf_error_set(err, r, "", "%s pprof: %s",
				    r == -E2BIG ? "oversized" : "malformed", derr.msg);
	r = -ENOMEM;
	if (opts.host_name && *opts.host_name &&
	    !(w->host_name = pf_prof_strdup(w, opts.host_name)))
		goto fail;
	if (!w->start_unix_ns) {
		w->start_unix_ns = now_unix_ns;
		w->end_unix_ns = now_unix_ns;
	}
	const uint8_t *orig = NULL;
	if (t->keep_original && len) {
		uint8_t *c = pf_prof_alloc(w, len);
		if (!c)
			goto fail;
		memcpy(c, data, len);
		orig = c;
	}
	bool have_service = false;
	for (size_t i = 0; i < t->n_attributes; i++)
		have_service |=
		    t->attributes[i].key && strcmp(t->attributes[i].key, "service.name") == 0;
	size_t na = t->n_attributes + !have_service;
	struct pf_prof_attr *attrs = pf_prof_alloc(w, (na ? na : 1) * sizeof(*attrs));
	if (!attrs)
		goto fail;
	size_t n = 0;
	if (!have_service)
		attrs[n++] = (struct pf_prof_attr){"service.name", "unknown_service"};
	for (size_t i = 0; i < t->n_attributes; i++) {
		if (!t->attributes[i].key || !t->attributes[i].value)
			continue;
		attrs[n].key = pf_prof_strdup(w, t->attributes[i].key);
		attrs[n].value = pf_prof_strdup(w, t->attributes[i].value);
		if (!attrs[n].key || !attrs[n].value)
			goto fail;
		n++;
	}
	struct pf_prof_process *procs = (struct pf_prof_process *)w->processes;
	for (size_t i = 0; i < w->n_processes; i++) {
		procs[i].attrs = attrs;
		procs[i].n_attrs = n;
		if (orig) {
			procs[i].original_payload = orig;
			procs[i].original_payload_len = len;
			procs[i].original_payload_format = "pprof";
		}
	}
	*out = w;
	return 0;
fail:
	pf_prof_window_free(w);
	return r;
}

/* Timeout of a scrape: the configured one, plus the profile's duration for cpu. */
static uint32_t scrape_timeout(const struct pf_pprof_target *t, const struct url *u,
			       uint32_t timeout_ms)
{
	if (t->type != PF_PPROF_CPU)
		return timeout_ms;
	uint64_t ms = (uint64_t)url_seconds(u, GO_DEFAULT_CPU_SECONDS) * 1000u + timeout_ms;
	return ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
}

static int scrape(const struct pf_pprof_target *t, const struct pf_pprof_options *opts,
		  uint32_t cpu_seconds, struct agent_http *http, const atomic_bool *cancel,
		  struct pf_prof_window **out, size_t *bytes, int *status, struct pf_error *err)
{
	struct url u;
	*status = 0;
	*bytes = 0;
	int r = url_parse(t->url, &u, err, "");
	if (r < 0)
		return r;
	if (t->type == PF_PPROF_CPU && cpu_seconds && url_set_seconds(&u, cpu_seconds) < 0)
		return pf_error_set(err, -E2BIG, "", "URL too long");
	uint64_t t0 = wall_ns();
	struct agent_http_result resp;
	r = http_get(http, &u, scrape_timeout(t, &u, opts->timeout_ms), opts->max_response_bytes,
		     cancel, &resp, err);
	if (r < 0) {
		*status = resp.status;
		agent_http_result_release(&resp);
		return r;
	}
	*status = resp.status;
	*bytes = resp.body.len;
	if (resp.status != 200) {
		char snippet[121];
		size_t k = 0;
		for (size_t i = 0; i < resp.body.len && k < sizeof(snippet) - 1; i++) {
			uint8_t ch = resp.body.data[i];
			if (ch == '\n' || ch == '\r' || ch == '\t')
				ch = ' ';
			snippet[k++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
		}
		while (k && snippet[k - 1] == ' ')
			k--;
		snippet[k] = 0;
		pf_buf_release(&resp.body);
		return pf_error_set(err, -EPROTO, "", "HTTP %d%s%s", resp.status, k ? ": " : "",
				    snippet);
	}
	if (!resp.body.len) {
		pf_buf_release(&resp.body);
		return pf_error_set(err, -EBADMSG, "", "empty response body");
	}
	r = pf_pprof_convert(resp.body.data, resp.body.len, t, opts, t0, out, err);
	pf_buf_release(&resp.body);
	return r;
}

int pf_pprof_scrape_once(const struct pf_pprof_target *t, const struct pf_pprof_options *opts_in,
			 uint32_t cpu_seconds, struct pf_prof_window **out, int *http_status,
			 struct pf_error *err)
{
	struct pf_pprof_options opts;
	opts_defaults(opts_in, &opts);
	struct url u;
	int r = url_parse(t->url, &u, err, "");
	if (r < 0)
		return r;
	struct agent_http *http = agent_http_new();
	if (!http)
		return pf_error_set(err, -errno, "", "cannot start the HTTP client");
	int status;
	size_t bytes;
	r = scrape(t, &opts, cpu_seconds, http, NULL, out, &bytes, &status, err);
	if (http_status)
		*http_status = status;
	agent_http_free(http);
	return r;
}

/* ---------------------------------------------------------------------------------------- */
/* Sources.                                                                                  */

struct target {
	struct pf_pprof_target cfg;
	struct pf_pprof_sources *owner;
	size_t index;
	bool removed; /* no longer configured; freed once its worker is joined */
	bool started_once;
	uint64_t last_start_ms;
	bool trigger_pending;
	uint32_t trigger_seconds;
	/* the worker */
	bool running;  /* in flight */
	bool joinable; /* a thread exists that was not joined yet */
	pthread_t thr;
	atomic_bool cancel;
	struct pf_pprof_target job; /* the worker's private copy */
	struct agent_http *http;    /* the worker's: the target's connection pool */
	uint32_t job_seconds;
	struct pf_pprof_health health;
};

struct pf_pprof_sources {
	pthread_mutex_t mu;
	struct pf_pprof_options opts;
	char *host_name;
	struct target **t;
	size_t n;
	struct target **gone; /* removed targets whose worker is not joined yet */
	size_t n_gone;
	size_t running;
	struct pf_pprof_result **q;
	size_t q_head, q_len, q_cap;
	int efd;
};

static void cfg_release(struct pf_pprof_target *c)
{
	free(c->url);
	for (size_t i = 0; i < c->n_attributes; i++) {
		free(c->attributes[i].key);
		free(c->attributes[i].value);
	}
	free(c->attributes);
	memset(c, 0, sizeof(*c));
}

static int cfg_copy(struct pf_pprof_target *d, const struct pf_pprof_target *s)
{
	memset(d, 0, sizeof(*d));
	d->type = s->type;
	d->interval_seconds = s->interval_seconds;
	d->keep_original = s->keep_original;
	d->url = strdup(s->url ? s->url : "");
	d->attributes = calloc(s->n_attributes + 1, sizeof(*d->attributes));
	if (!d->url || !d->attributes)
		goto fail;
	for (size_t i = 0; i < s->n_attributes; i++) {
		d->attributes[i].key = strdup(s->attributes[i].key ? s->attributes[i].key : "");
		d->attributes[i].value =
		    strdup(s->attributes[i].value ? s->attributes[i].value : "");
		d->n_attributes = i + 1;
		if (!d->attributes[i].key || !d->attributes[i].value)
			goto fail;
	}
	return 0;
fail:
	cfg_release(d);
	return -ENOMEM;
}

static void target_free(struct target *t)
{
	if (!t)
		return;
	cfg_release(&t->cfg);
	cfg_release(&t->job);
	agent_http_free(t->http);
	free(t);
}

static int check_targets(const struct pf_pprof_target *targets, size_t n, struct pf_error *err)
{
	for (size_t i = 0; i < n; i++) {
		char path[64];
		struct url u;
		snprintf(path, sizeof(path), "profiling.pprof.targets[%zu].url", i);
		int r = url_parse(targets[i].url, &u, err, path);
		if (r < 0)
			return r;
		if ((unsigned)targets[i].type > PF_PPROF_THREADCREATE)
			return pf_error_set(err, -EINVAL, "",
					    "profiling.pprof.targets[%zu].type: "
					    "unknown type",
					    i);
	}
	return 0;
}

static void wake(struct pf_pprof_sources *s)
{
	uint64_t one = 1;
	ssize_t w = write(s->efd, &one, sizeof(one));
	(void)w;
	if (s->opts.on_ready)
		s->opts.on_ready(s->opts.on_ready_arg);
}

/* Under the lock. */
static int q_push(struct pf_pprof_sources *s, struct pf_pprof_result *r)
{
	if (s->q_len == s->q_cap) {
		size_t cap = s->q_cap ? s->q_cap * 2 : 8;
		struct pf_pprof_result **q = malloc(cap * sizeof(*q));
		if (!q)
			return -ENOMEM;
		for (size_t i = 0; i < s->q_len; i++)
			q[i] = s->q[(s->q_head + i) % s->q_cap];
		free(s->q);
		s->q = q;
		s->q_cap = cap;
		s->q_head = 0;
	}
	s->q[(s->q_head + s->q_len++) % s->q_cap] = r;
	return 0;
}

static void *worker(void *arg)
{
	struct target *t = arg;
	struct pf_pprof_sources *s = t->owner;
	struct pf_error err = {0};
	struct pf_prof_window *w = NULL;
	size_t bytes = 0;
	int status = 0;
	uint64_t t0 = pf_pprof_now_ms();
	int r = 0;
	if (!t->http && !(t->http = agent_http_new()))
		r = pf_error_set(&err, -errno, "", "cannot start the HTTP client");
	if (r == 0)
		r = scrape(&t->job, &s->opts, t->job_seconds, t->http, &t->cancel, &w, &bytes,
			   &status, &err);
	uint64_t dur = pf_pprof_now_ms() - t0;
	struct pf_pprof_result *res = NULL;
	if (r == 0) {
		res = calloc(1, sizeof(*res));
		if (res)
			res->url = strdup(t->job.url);
		if (!res || !res->url) {
			pf_error_set(&err, -ENOMEM, "", "out of memory");
			r = -ENOMEM;
		}
	}
	bool queued = false;
	pthread_mutex_lock(&s->mu);
	struct pf_pprof_health *h = &t->health;
	h->last_duration_ms = dur > UINT32_MAX ? UINT32_MAX : (uint32_t)dur;
	h->last_http_status = status;
	if (r == 0 && !t->removed) {
		res->target = t->index;
		res->type = t->job.type;
		res->bytes = bytes;
		res->window = w;
		if (q_push(s, res) == 0) {
			queued = true;
			h->healthy = true;
			h->scrapes_ok++;
			h->last_ok_unix_ns = wall_ns();
			h->last_errno = 0;
			h->last_bytes = bytes;
			h->last_samples = pf_prof_window_samples(w);
			h->last_error[0] = 0;
		} else {
			r = pf_error_set(&err, -ENOMEM, "", "out of memory");
		}
	}
	if (r < 0 && !t->removed) {
		h->healthy = false;
		h->scrapes_failed++;
		h->last_errno = r;
		snprintf(h->last_error, sizeof(h->last_error), "%s",
			 err.msg[0] ? err.msg : strerror(-r));
	}
	pthread_mutex_unlock(&s->mu);
	if (queued) {
		wake(s);
	} else {
		if (res)
			free(res->url);
		free(res);
		pf_prof_window_free(w);
	}
	/* Only now "not running": once busy() is false, every wake-up has been delivered. */
	pthread_mutex_lock(&s->mu);
	t->running = false;
	s->running--;
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* Under the lock: starts t's scrape. */
/* now_ms: the caller's clock reading, the start of the target's interval (so a slow start
 * does not push the schedule) */
static int start(struct pf_pprof_sources *s, struct target *t, uint32_t seconds, uint64_t now_ms)
{
	cfg_release(&t->job);
	int r = cfg_copy(&t->job, &t->cfg);
	if (r == 0 && t->joinable) {
		/* finished but not reaped yet: reap now (it no longer runs) */
		pthread_join(t->thr, NULL);
		t->joinable = false;
	}
	t->last_start_ms = now_ms;
	t->started_once = true;
	t->trigger_pending = false;
	t->health.last_attempt_unix_ns = wall_ns();
	if (r == 0) {
		t->job_seconds = seconds;
		atomic_store(&t->cancel, false);
		t->running = true;
		s->running++;
		r = -pthread_create(&t->thr, NULL, worker, t);
		if (r < 0) {
			t->running = false;
			s->running--;
		} else {
			t->joinable = true;
		}
	}
	if (r < 0) {
		t->health.healthy = false;
		t->health.scrapes_failed++;
		t->health.last_errno = r;
		snprintf(t->health.last_error, sizeof(t->health.last_error),
			 "cannot start scrape: %s", strerror(-r));
	}
	return r;
}

static void health_init(struct pf_pprof_health *h)
{
	memset(h, 0, sizeof(*h));
	h->healthy = true;
}

static struct target *target_new(struct pf_pprof_sources *s, const struct pf_pprof_target *c,
				 size_t index)
{
	struct target *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	if (cfg_copy(&t->cfg, c) < 0) {
		free(t);
		return NULL;
	}
	t->owner = s;
	t->index = index;
	atomic_init(&t->cancel, false);
	health_init(&t->health);
	return t;
}

struct pf_pprof_sources *pf_pprof_sources_new(const struct pf_pprof_target *targets, size_t n,
					      const struct pf_pprof_options *opts,
					      struct pf_error *err)
{
	int r = check_targets(targets, n, err);
	if (r < 0) {
		errno = -r;
		return NULL;
	}
	struct pf_pprof_sources *s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->efd = -1;
	pthread_mutex_init(&s->mu, NULL);
	opts_defaults(opts, &s->opts);
	if (s->opts.host_name) {
		s->host_name = strdup(s->opts.host_name);
		if (!s->host_name)
			goto nomem;
		s->opts.host_name = s->host_name;
	}
	s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->efd < 0) {
		r = errno;
		pf_pprof_sources_free(s);
		pf_error_set(err, -r, "", "eventfd: %s", strerror(r));
		errno = r;
		return NULL;
	}
	s->t = calloc(n + 1, sizeof(*s->t));
	if (!s->t)
		goto nomem;
	for (size_t i = 0; i < n; i++) {
		s->t[i] = target_new(s, &targets[i], i);
		if (!s->t[i])
			goto nomem;
		s->n = i + 1;
	}
	return s;
nomem:
	pf_pprof_sources_free(s);
	return pf_error_oom(err);
}

int pf_pprof_sources_update(struct pf_pprof_sources *s, const struct pf_pprof_target *targets,
			    size_t n, struct pf_error *err)
{
	int r = check_targets(targets, n, err);
	if (r < 0)
		return r;
	pthread_mutex_lock(&s->mu);
	/* Everything is allocated before anything changes. */
	struct target **nt = calloc(n + 1, sizeof(*nt));
	struct pf_pprof_target *copies = calloc(n + 1, sizeof(*copies));
	bool *reused = calloc(s->n + 1, sizeof(*reused));
	bool *fresh = calloc(n + 1, sizeof(*fresh));
	struct target **gone = realloc(s->gone, (s->n_gone + s->n + 1) * sizeof(*gone));
	if (gone)
		s->gone = gone;
	r = nt && copies && reused && fresh && gone ? 0 : -ENOMEM;
	for (size_t i = 0; i < n && r == 0; i++) {
		size_t j = 0;
		while (j < s->n && (reused[j] || s->t[j]->cfg.type != targets[i].type ||
				    strcmp(s->t[j]->cfg.url, targets[i].url) != 0))
			j++;
		if (j < s->n) {
			reused[j] = true;
			nt[i] = s->t[j];
			r = cfg_copy(&copies[i], &targets[i]);
		} else {
			nt[i] = target_new(s, &targets[i], i);
			fresh[i] = true;
			r = nt[i] ? 0 : -ENOMEM;
		}
	}
	if (r < 0) {
		for (size_t i = 0; i < n && copies && fresh && nt; i++) {
			cfg_release(&copies[i]);
			if (fresh[i])
				target_free(nt[i]);
		}
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (!fresh[i]) {
			cfg_release(&nt[i]->cfg);
			nt[i]->cfg = copies[i];
		}
		nt[i]->index = i;
	}
	for (size_t j = 0; j < s->n; j++) {
		if (reused[j])
			continue;
		struct target *t = s->t[j];
		t->removed = true;
		atomic_store(&t->cancel, true);
		if (t->joinable)
			s->gone[s->n_gone++] = t;
		else
			target_free(t);
	}
	free(s->t);
	s->t = nt;
	s->n = n;
	nt = NULL;
out:
	pthread_mutex_unlock(&s->mu);
	free(nt);
	free(copies);
	free(reused);
	free(fresh);
	return r < 0 ? pf_error_set(err, r, "", "out of memory") : 0;
}

/* Joins finished workers (also of removed targets). Collects under the lock, joins outside:
 * a finished worker only has its wake-up left to do. */
static void reap(struct pf_pprof_sources *s)
{
	pthread_t thr[PF_PPROF_MAX_INFLIGHT * 2 + 64];
	size_t nthr = 0;
	struct target *dead[64];
	size_t ndead = 0;
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->n && nthr < PF_ARRAY_SIZE(thr); i++) {
		struct target *t = s->t[i];
		if (t->joinable && !t->running) {
			thr[nthr++] = t->thr;
			t->joinable = false;
		}
	}
	for (size_t i = 0;
	     i < s->n_gone && nthr < PF_ARRAY_SIZE(thr) && ndead < PF_ARRAY_SIZE(dead);) {
		struct target *t = s->gone[i];
		if (!t->running) {
			thr[nthr++] = t->thr;
			dead[ndead++] = t;
			s->gone[i] = s->gone[--s->n_gone];
		} else {
			i++;
		}
	}
	pthread_mutex_unlock(&s->mu);
	for (size_t i = 0; i < nthr; i++)
		pthread_join(thr[i], NULL);
	for (size_t i = 0; i < ndead; i++)
		target_free(dead[i]);
}

int pf_pprof_sources_poll(struct pf_pprof_sources *s, uint64_t now_ms, int64_t *next_ms)
{
	reap(s);
	int started = 0, err = 0;
	int64_t next = -1;
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->n; i++) {
		struct target *t = s->t[i];
		if (t->running)
			continue;
		uint64_t due = UINT64_MAX;
		if (t->trigger_pending)
			due = 0;
		else if (t->cfg.interval_seconds)
			due = t->started_once ? t->last_start_ms + t->cfg.interval_seconds * 1000ull
					      : 0;
		if (due <= now_ms && s->running < PF_PPROF_MAX_INFLIGHT) {
			int r = start(s, t, t->trigger_pending ? t->trigger_seconds : 0, now_ms);
			if (r < 0)
				err = r;
			else
				started++;
			if (t->cfg.interval_seconds)
				due = t->last_start_ms + t->cfg.interval_seconds * 1000ull;
			else
				continue;
		}
		if (due == UINT64_MAX)
			continue;
		int64_t in = due > now_ms ? (int64_t)(due - now_ms) : 0;
		if (next < 0 || in < next)
			next = in;
	}
	pthread_mutex_unlock(&s->mu);
	if (next_ms)
		*next_ms = next;
	return started ? started : err;
}

int pf_pprof_sources_trigger(struct pf_pprof_sources *s, long index, uint32_t seconds)
{
	reap(s);
	int r = 0, started = 0;
	pthread_mutex_lock(&s->mu);
	if (index != PF_PPROF_ALL_TARGETS && (index < 0 || (size_t)index >= s->n)) {
		r = -ENOENT;
		goto out;
	}
	size_t lo = index == PF_PPROF_ALL_TARGETS ? 0 : (size_t)index;
	size_t hi = index == PF_PPROF_ALL_TARGETS ? s->n : (size_t)index + 1;
	for (size_t i = lo; i < hi; i++) {
		struct target *t = s->t[i];
		if (t->running) {
			if (index != PF_PPROF_ALL_TARGETS)
				r = -EBUSY;
			continue;
		}
		if (s->running >= PF_PPROF_MAX_INFLIGHT) {
			/* started by the next poll */
			t->trigger_pending = true;
			t->trigger_seconds = seconds;
			continue;
		}
		int e = start(s, t, seconds, pf_pprof_now_ms());
		if (e < 0)
			r = e;
		else
			started++;
	}
	if (r == 0 && index == PF_PPROF_ALL_TARGETS)
		r = started;
out:
	pthread_mutex_unlock(&s->mu);
	return r;
}

struct pf_pprof_result *pf_pprof_sources_pop(struct pf_pprof_sources *s)
{
	struct pf_pprof_result *r = NULL;
	pthread_mutex_lock(&s->mu);
	if (s->q_len) {
		r = s->q[s->q_head];
		s->q_head = (s->q_head + 1) % s->q_cap;
		s->q_len--;
	}
	if (!s->q_len) {
		uint64_t v;
		ssize_t n = read(s->efd, &v, sizeof(v));
		(void)n;
	}
	pthread_mutex_unlock(&s->mu);
	return r;
}

void pf_pprof_result_free(struct pf_pprof_result *r)
{
	if (!r)
		return;
	pf_prof_window_free(r->window);
	free(r->url);
	free(r);
}

int pf_pprof_sources_wake_fd(const struct pf_pprof_sources *s)
{
	return s->efd;
}

size_t pf_pprof_sources_count(const struct pf_pprof_sources *s)
{
	return s->n;
}

int pf_pprof_sources_health(struct pf_pprof_sources *s, size_t index, struct pf_pprof_health *out)
{
	int r = -ENOENT;
	pthread_mutex_lock(&s->mu);
	if (index < s->n) {
		*out = s->t[index]->health;
		out->running = s->t[index]->running;
		r = 0;
	}
	pthread_mutex_unlock(&s->mu);
	return r;
}

bool pf_pprof_sources_busy(struct pf_pprof_sources *s)
{
	pthread_mutex_lock(&s->mu);
	bool b = s->running > 0;
	pthread_mutex_unlock(&s->mu);
	return b;
}

void pf_pprof_sources_free(struct pf_pprof_sources *s)
{
	if (!s)
		return;
	if (s->t || s->gone) {
		pthread_mutex_lock(&s->mu);
		for (size_t i = 0; i < s->n; i++) {
			atomic_store(&s->t[i]->cancel, true);
			s->t[i]->removed = true;
		}
		pthread_mutex_unlock(&s->mu);
		for (size_t i = 0; i < s->n; i++) {
			if (s->t[i]->joinable)
				pthread_join(s->t[i]->thr, NULL);
			target_free(s->t[i]);
		}
		for (size_t i = 0; i < s->n_gone; i++) {
			pthread_join(s->gone[i]->thr, NULL);
			target_free(s->gone[i]);
		}
	}
	while (s->q_len) {
		pf_pprof_result_free(s->q[s->q_head]);
		s->q_head = (s->q_head + 1) % s->q_cap;
		s->q_len--;
	}
	free(s->q);
	free(s->t);
	free(s->gone);
	if (s->efd >= 0)
		close(s->efd);
	pthread_mutex_destroy(&s->mu);
	free(s->host_name);
	free(s);
}
