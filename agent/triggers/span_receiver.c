/* span_receiver.c — see span_receiver.h. OTLP/HTTP: opentelemetry-proto docs/specification.md
 * "OTLP/HTTP" (request/response bodies, partial success, failures with a Status body). */
#include "triggers/span_receiver.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <libwebsockets.h>

#include "endpoints/http_server.h"
#include "pf/compiler.h"
#include "pf/log.h"
#include "pf/uuid.h"

#define TRACES_PATH "/v1/traces"
#define LISTEN_KEY "profiling.triggers.slow_span.listen"
#define MINUTE_NS (60ull * 1000000000ull)
#define MSG_MAX 1024
#define STR_(x) #x
#define STR(x) STR_(x)
#define TOO_LARGE_MSG "request body over " STR(AGENT_SPAN_MAX_BODY_MIB) " MiB"

/* The accept times of the last max_per_minute jobs of one rule (a sliding minute). */
struct rate {
	uint64_t t[AGENT_SPAN_MAX_PER_MINUTE];
	size_t head, n;
};

struct agent_span_receiver {
	struct agent_http_server *srv;
	struct agent_span_hooks hooks;

	pthread_mutex_t lock; /* rules and counters */
	struct agent_span_rules rules;
	struct agent_span_counters c;
	struct rate rate[2]; /* receiver thread only */
	size_t inflight;     /* receiver thread only: request body bytes buffered, all
			      * connections (at most AGENT_SPAN_MAX_INFLIGHT) */
};

static uint64_t unix_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the verdict ---------------------------------------------------------------------------- */

/* Whether the sliding minute has room under max (expired entries go first). */
static bool rate_room(struct rate *r, uint32_t max, uint64_t now)
{
	while (r->n && r->t[r->head] + MINUTE_NS <= now) {
		r->head = (r->head + 1) % AGENT_SPAN_MAX_PER_MINUTE;
		r->n--;
	}
	if (max > AGENT_SPAN_MAX_PER_MINUTE)
		max = AGENT_SPAN_MAX_PER_MINUTE;
	return r->n < max;
}

static bool rate_take(struct rate *r, uint32_t max, uint64_t now)
{
	if (!rate_room(r, max, now))
		return false;
	r->t[(r->head + r->n) % AGENT_SPAN_MAX_PER_MINUTE] = now;
	r->n++;
	return true;
}

enum reason { R_UNKNOWN, R_OLD, R_FUTURE, R_RATE, R_QUEUE, N_REASONS };

struct verdicts {
	int64_t count[N_REASONS];
	char first[N_REASONS][320]; /* the first message of each reason */
};

static void reject(struct verdicts *v, enum reason why, const struct pf_span *s, const char *fmt,
		   ...) PF_PRINTF(4, 5);
static void reject(struct verdicts *v, enum reason why, const struct pf_span *s, const char *fmt,
		   ...)
{
	if (!v->count[why]++) {
		char tid[33], detail[256];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(detail, sizeof(detail), fmt, ap);
		va_end(ap);
		pf_hex_encode(s->trace_id, 16, tid);
		snprintf(v->first[why], sizeof(v->first[why]), "%s (e.g. trace %s)", detail, tid);
	}
}

void agent_span_receiver_process(struct agent_span_receiver *r, const struct pf_span *spans,
				 size_t n, uint64_t now, int64_t *rejected, struct pf_buf *message)
{
	struct agent_span_rules ru;
	struct verdicts v;
	uint64_t triggered[2] = {0, 0};
	memset(&v, 0, sizeof(v));
	pthread_mutex_lock(&r->lock);
	ru = r->rules;
	pthread_mutex_unlock(&r->lock);
	uint64_t lookback = (uint64_t)ru.lookback_seconds * 1000000000ull;
	for (size_t i = 0; i < n; i++) {
		const struct pf_span *s = &spans[i];
		uint64_t dur = s->end_unix_ns - s->start_unix_ns;
		enum agent_span_trigger t;
		uint32_t max;
		if (ru.slow_enabled && dur >= (uint64_t)ru.threshold_ms * 1000000ull) {
			t = AGENT_SPAN_SLOW;
			max = ru.slow_max_per_minute;
		} else if (ru.error_enabled && s->status == PF_SPAN_STATUS_ERROR) {
			t = AGENT_SPAN_ERROR;
			max = ru.error_max_per_minute;
		} else {
			continue; /* nothing to do for it */
		}
		if (now > lookback && s->start_unix_ns < now - lookback) {
			reject(&v, R_OLD, s,
			       "span started %" PRIu64 " s ago, before the %" PRIu32
			       " s lookback of recent samples",
			       (uint64_t)((now - s->start_unix_ns) / 1000000000u),
			       ru.lookback_seconds);
			continue;
		}
		if (s->end_unix_ns > now + AGENT_SPAN_MAX_FUTURE_MS * 1000000ull) {
			reject(&v, R_FUTURE, s,
			       "span ends %" PRIu64 " ms in the future (clocks out of step?)",
			       (uint64_t)((s->end_unix_ns - now) / 1000000u));
			continue;
		}
		/* a flood over the cap costs no process lookups */
		if (!rate_room(&r->rate[t], max, now)) {
			reject(&v, R_RATE, s, "over %s.max_per_minute (%" PRIu32 ")",
			       t == AGENT_SPAN_SLOW ? "slow_span" : "error_span", max);
			continue;
		}
		struct agent_span_job job = {.span = *s, .trigger = t, .received_unix_ns = now};
		char why[256] = "";
		int rc = r->hooks.resolve
			     ? r->hooks.resolve(r->hooks.ctx, s, &job.pid, why, sizeof(why))
			     : -ENOENT;
		if (rc < 0) {
			reject(&v, R_UNKNOWN, s, "%s", why[0] ? why : "process not found");
			continue;
		}
		if (!rate_take(&r->rate[t], max, now)) {
			reject(&v, R_RATE, s, "over %s.max_per_minute (%" PRIu32 ")",
			       t == AGENT_SPAN_SLOW ? "slow_span" : "error_span", max);
			continue;
		}
		rc = r->hooks.submit ? r->hooks.submit(r->hooks.ctx, &job) : -EAGAIN;
		if (rc < 0) {
			/* the minute's budget is not spent on a span that was not profiled */
			struct rate *q = &r->rate[t];
			q->n--;
			reject(&v, R_QUEUE, s, "the agent's span queue is full");
			continue;
		}
		triggered[t]++;
	}
	int64_t total = 0;
	for (int k = 0; k < N_REASONS; k++) {
		total += v.count[k];
		if (v.count[k] && message)
			pf_buf_printf(message, "%s%" PRId64 " rejected: %s",
				      message->len ? "; " : "", v.count[k], v.first[k]);
	}
	*rejected = total;
	pthread_mutex_lock(&r->lock);
	r->c.spans += n;
	r->c.triggered[0] += triggered[0];
	r->c.triggered[1] += triggered[1];
	r->c.rejected_unknown += (uint64_t)v.count[R_UNKNOWN];
	r->c.rejected_old += (uint64_t)(v.count[R_OLD] + v.count[R_FUTURE]);
	r->c.rejected_rate += (uint64_t)v.count[R_RATE];
	r->c.rejected_queue += (uint64_t)v.count[R_QUEUE];
	pthread_mutex_unlock(&r->lock);
}

void agent_span_receiver_set_rules(struct agent_span_receiver *r,
				   const struct agent_span_rules *rules)
{
	pthread_mutex_lock(&r->lock);
	r->rules = *rules;
	pthread_mutex_unlock(&r->lock);
}

void agent_span_receiver_counters(struct agent_span_receiver *r, struct agent_span_counters *out)
{
	pthread_mutex_lock(&r->lock);
	*out = r->c;
	pthread_mutex_unlock(&r->lock);
}

/* ---- HTTP ----------------------------------------------------------------------------------- */

struct pss {
	struct pf_buf body; /* its length counts in the receiver's inflight bytes */
	struct agent_http_answer a;
	bool json, gzip, too_large, busy;
};

static void body_release(struct agent_span_receiver *r, struct pss *p)
{
	r->inflight -= p->body.len;
	pf_buf_release(&p->body);
}

static void pss_reset(struct agent_span_receiver *r, struct pss *p)
{
	body_release(r, p);
	agent_http_answer_release(&p->a);
	memset(p, 0, sizeof(*p));
}

struct pss_ref {
	struct agent_span_receiver *r;
	struct pss *p;
};

/* The answer is written: the transaction's state goes. */
static void pss_done(void *ctx)
{
	struct pss_ref *ref = ctx;
	pss_reset(ref->r, ref->p);
}

/* An error answer: a google.rpc.Status in the request's encoding. */
static void answer_status(struct lws *wsi, struct pss *p, int status, int32_t rpc_code,
			  const char *msg)
{
	struct agent_http_answer *a = &p->a;
	a->status = status;
	a->resp.len = LWS_PRE;
	a->ctype = p->json ? "application/json" : "application/x-protobuf";
	if (pf_otlp_status_encode(rpc_code, msg, p->json, &a->resp) < 0)
		a->resp.len = LWS_PRE;
	a->ready = true;
	lws_callback_on_writable(wsi);
}

static void count_too_large(struct agent_span_receiver *r)
{
	pthread_mutex_lock(&r->lock);
	r->c.too_large++;
	pthread_mutex_unlock(&r->lock);
}

/* 0: wait for the body, 1: no body is coming (complete now), -1: close. */
static int http_begin(struct agent_span_receiver *r, struct lws *wsi, struct pss *p,
		      const char *uri)
{
	pss_reset(r, p);
	if (agent_http_answer_init(&p->a, 64 * 1024) < 0)
		return -1;
	pf_buf_init(&p->body, AGENT_SPAN_MAX_BODY);
	bool post = lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI) > 0;
	char ct[128] = "";
	if (lws_hdr_copy(wsi, ct, sizeof(ct), WSI_TOKEN_HTTP_CONTENT_TYPE) < 0)
		ct[0] = 0;
	p->json = !strncasecmp(ct, "application/json", 16);
	p->gzip = agent_http_header_has(wsi, WSI_TOKEN_HTTP_CONTENT_ENCODING, "gzip");
	/* answered before the body is read: the connection closes after the answer */
	p->a.close_after = true;
	if (!uri || strcmp(uri, TRACES_PATH) != 0) {
		answer_status(wsi, p, 404, 5 /* NOT_FOUND */,
			      "not found: spans go to POST " TRACES_PATH);
		return 0;
	}
	if (!post) {
		p->a.allow = "POST";
		answer_status(wsi, p, 405, 12 /* UNIMPLEMENTED */, "method not allowed: POST only");
		return 0;
	}
	if (!p->json && ct[0] && strncasecmp(ct, "application/x-protobuf", 22) != 0) {
		answer_status(wsi, p, 415, 3 /* INVALID_ARGUMENT */,
			      "Content-Type must be application/x-protobuf or application/json");
		return 0;
	}
	char ce[64] = "";
	if (lws_hdr_copy(wsi, ce, sizeof(ce), WSI_TOKEN_HTTP_CONTENT_ENCODING) > 0 && !p->gzip &&
	    strcasecmp(ce, "identity") != 0) {
		answer_status(wsi, p, 415, 3 /* INVALID_ARGUMENT */,
			      "Content-Encoding must be gzip or none");
		return 0;
	}
	char cl[32];
	if (lws_hdr_copy(wsi, cl, sizeof(cl), WSI_TOKEN_HTTP_CONTENT_LENGTH) > 0) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(cl, &end, 10);
		if (errno || *end || v > AGENT_SPAN_MAX_BODY) {
			count_too_large(r);
			answer_status(wsi, p, 413, 8 /* RESOURCE_EXHAUSTED */, TOO_LARGE_MSG);
			return 0;
		}
		if (v == 0)
			return 1;
	}
	p->a.close_after = false;
	return 0;
}

static void http_complete(struct agent_span_receiver *r, struct lws *wsi, struct pss *p)
{
	if (p->a.ready)
		return;
	if (p->too_large) {
		count_too_large(r);
		p->a.close_after = true;
		answer_status(wsi, p, 413, 8 /* RESOURCE_EXHAUSTED */, TOO_LARGE_MSG);
		return;
	}
	if (p->busy) { /* OTLP/HTTP: 503 is retryable */
		pthread_mutex_lock(&r->lock);
		r->c.busy++;
		pthread_mutex_unlock(&r->lock);
		p->a.close_after = true;
		answer_status(wsi, p, 503, 14 /* UNAVAILABLE */,
			      "too many request bodies in flight; retry later");
		return;
	}
	struct pf_otlp_traces_opts o = {.json = p->json,
					.gzip = p->gzip,
					.max_bytes = AGENT_SPAN_MAX_BODY,
					.max_spans = AGENT_SPAN_MAX_SPANS};
	struct pf_span *spans = NULL;
	size_t n = 0;
	struct pf_error err = {0};
	int rc = pf_otlp_traces_decode(p->body.data, p->body.len, &o, &spans, &n, &err);
	body_release(r, p);
	if (rc < 0) {
		if (rc == -E2BIG) {
			count_too_large(r);
		} else {
			pthread_mutex_lock(&r->lock);
			r->c.bad_requests++;
			pthread_mutex_unlock(&r->lock);
		}
		pf_log_debug("spans: request refused: %s", err.msg);
		answer_status(wsi, p, rc == -E2BIG ? 413 : 400, rc == -E2BIG ? 8 : 3, err.msg);
		return;
	}
	int64_t rejected = 0;
	struct pf_buf msg;
	pf_buf_init(&msg, MSG_MAX);
	agent_span_receiver_process(r, spans, n, unix_ns(), &rejected, &msg);
	free(spans);
	struct agent_http_answer *a = &p->a;
	a->status = 200;
	a->ctype = p->json ? "application/json" : "application/x-protobuf";
	a->resp.len = LWS_PRE;
	if (pf_otlp_traces_response(rejected, pf_buf_str(&msg), p->json, &a->resp) < 0)
		a->resp.len = LWS_PRE;
	pf_buf_release(&msg);
	pthread_mutex_lock(&r->lock);
	r->c.requests++;
	pthread_mutex_unlock(&r->lock);
	a->ready = true;
	lws_callback_on_writable(wsi);
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		    size_t len)
{
	struct agent_span_receiver *r = agent_http_user(wsi);
	struct pss *p = user;
	switch (reason) {
	case LWS_CALLBACK_HTTP: {
		int rc = http_begin(r, wsi, p, in);
		if (rc < 0)
			return -1;
		if (rc == 1)
			http_complete(r, wsi, p);
		return 0;
	}
	case LWS_CALLBACK_HTTP_BODY:
		if (!p || p->a.ready || p->too_large || p->busy)
			return 0;
		if (r->inflight + len > AGENT_SPAN_MAX_INFLIGHT) {
			p->busy = true;
			body_release(r, p);
		} else if (pf_buf_append(&p->body, in, len) < 0) {
			p->too_large = true;
			body_release(r, p);
		} else {
			r->inflight += len;
		}
		return 0;
	case LWS_CALLBACK_HTTP_BODY_COMPLETION:
		if (p)
			http_complete(r, wsi, p);
		return 0;
	case LWS_CALLBACK_HTTP_WRITEABLE: {
		if (!p)
			return -1;
		struct pss_ref ref = {r, p};
		return agent_http_answer_writeable(wsi, &p->a, pss_done, &ref);
	}
	case LWS_CALLBACK_CLOSED_HTTP:
		if (p)
			pss_reset(r, p);
		return 0;
	default:
		break;
	}
	return lws_callback_http_dummy(wsi, reason, user, in, len);
}

static const struct lws_protocols protocols[] = {
    {"profleet-spans", callback, sizeof(struct pss), 16384, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

/* ---- lifecycle ------------------------------------------------------------------------------ */

struct agent_span_receiver *agent_span_receiver_new(const char *listen, bool serve,
						    const struct agent_span_rules *rules,
						    const struct agent_span_hooks *hooks,
						    struct pf_error *err)
{
	struct agent_span_receiver *r = calloc(1, sizeof(*r));
	if (!r) {
		return pf_error_oom(err);
	}
	pthread_mutex_init(&r->lock, NULL);
	r->rules = *rules;
	if (hooks)
		r->hooks = *hooks;
	if (!serve)
		return r;

	struct agent_listen_addr l;
	struct pf_error lerr = {0};
	int rc = agent_listen_addr_parse(listen, &l, &lerr);
	if (rc < 0) {
		pf_error_set(err, -EINVAL, LISTEN_KEY, "must be HOST:PORT, got '%s'",
			     listen ? listen : "");
		goto fail;
	}
	r->srv = agent_http_server_new(&l, "spans", protocols, r, LISTEN_KEY, err);
	if (!r->srv) {
		rc = -errno;
		goto fail;
	}
	if ((rc = agent_http_server_start(r->srv, err)) < 0)
		goto fail;
	pf_log_info("spans: OTLP/HTTP traces receiver on %s%s", agent_http_server_where(r->srv),
		    TRACES_PATH);
	return r;
fail:
	agent_span_receiver_free(r);
	errno = rc < 0 ? -rc : EINVAL;
	return NULL;
}

int agent_span_receiver_port(const struct agent_span_receiver *r)
{
	return r->srv ? agent_http_server_port(r->srv) : 0;
}

void agent_span_receiver_free(struct agent_span_receiver *r)
{
	if (!r)
		return;
	agent_http_server_free(r->srv); /* joins its thread: no callback runs after this */
	pthread_mutex_destroy(&r->lock);
	free(r);
}
