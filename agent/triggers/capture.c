/* capture.c — see capture.h. */
#include "triggers/capture.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "limits/ratelimit.h"
#include "pf/buf.h"
#include "pf/compiler.h"
#include "pf/log.h"

#define TABLE (AGENT_CAPTURE_MAX_ACTIVE + AGENT_CAPTURE_KEEP_FINAL)
#define RATE_SLOTS 60

enum phase { PH_QUEUED, PH_SAMPLING, PH_EXPORTING, PH_FINAL };

struct entry {
	bool used;
	uint64_t serial;
	enum phase phase;
	bool admitted;	/* passed admission (a refusal is final at once) */
	bool report;	/* sent over OpAMP (on_demand) */
	bool cancel;	/* capture.cancel while sampling */
	bool failing;	/* an export failed: final failed once the others ended */
	uint64_t dirty; /* 0, or the order in which it was marked for sending */
	uint64_t last_sent_ms;
	uint64_t finished; /* order of finishing, for eviction (finals only) */
	uint64_t deadline_ms;
	unsigned pending; /* exports not confirmed yet */
	char trigger[AGENT_CAPTURE_TRIGGER_LEN];
	size_t n_attrs;
	struct agent_capture_attr attrs[AGENT_CAPTURE_MAX_ATTRS];
	uint8_t *payload; /* the request, encoded, until the worker takes it */
	size_t payload_len;
	struct pf_capture_status st;
};

struct agent_captures {
	pthread_mutex_t lock;
	void (*notify)(void *ctx);
	void *notify_ctx;
	void (*worker_wake)(void *ctx);
	void *worker_ctx;

	bool enabled, on_demand;
	bool sampler_known, sampler;
	uint32_t max_duration, max_per_minute;

	uint64_t next_serial, next_dirty, next_finished;
	struct entry e[TABLE];

	struct agent_captures_summary sum; /* in_progress is computed on demand */

	uint32_t rate_count[RATE_SLOTS]; /* profiles exported in second rate_sec[i] */
	uint64_t rate_sec[RATE_SLOTS];
	struct agent_ratelimit *rl; /* shared limit; NULL: the tally above */
};

uint64_t agent_captures_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int agent_capture_receiver_url(const char *opamp_url, char *out, size_t cap)
{
	static const struct {
		const char *from, *to;
	} schemes[] = {{"ws://", "http://"},
		       {"wss://", "https://"},
		       {"http://", "http://"},
		       {"https://", "https://"}};
	if (!opamp_url)
		return -EINVAL;
	for (size_t i = 0; i < PF_ARRAY_SIZE(schemes); i++) {
		size_t n = strlen(schemes[i].from);
		if (strncasecmp(opamp_url, schemes[i].from, n))
			continue;
		const char *host = opamp_url + n;
		size_t hlen = strcspn(host, "/?#");
		if (!hlen)
			return -EINVAL;
		int w = snprintf(out, cap, "%s%.*s%s", schemes[i].to, (int)hlen, host,
				 AGENT_CAPTURE_RECEIVER_PATH);
		return w < 0 || (size_t)w >= cap ? -EINVAL : 0;
	}
	return -EINVAL;
}

struct agent_captures *agent_captures_new(const struct agent_captures_opts *o)
{
	struct agent_captures *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	pthread_mutex_init(&c->lock, NULL);
	if (o) {
		c->notify = o->notify;
		c->notify_ctx = o->notify_ctx;
	}
	/* the config defaults until a config is applied */
	c->enabled = c->on_demand = true;
	c->max_duration = 300;
	c->max_per_minute = 60;
	c->next_serial = c->next_dirty = c->next_finished = 1;
	c->sum.healthy = true;
	return c;
}

static void entry_clear(struct entry *x)
{
	free(x->payload);
	memset(x, 0, sizeof(*x));
}

void agent_captures_free(struct agent_captures *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < TABLE; i++)
		entry_clear(&c->e[i]);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

void agent_captures_set_worker(struct agent_captures *c, void (*wake)(void *ctx), void *ctx)
{
	pthread_mutex_lock(&c->lock);
	c->worker_wake = wake;
	c->worker_ctx = ctx;
	pthread_mutex_unlock(&c->lock);
}

void agent_captures_set_config(struct agent_captures *c, const struct pf_profcfg *cfg)
{
	pthread_mutex_lock(&c->lock);
	c->enabled = cfg->enabled;
	c->on_demand = cfg->on_demand.enabled;
	c->max_duration = cfg->on_demand.max_duration_seconds;
	c->max_per_minute = cfg->limits.max_profiles_per_minute;
	pthread_mutex_unlock(&c->lock);
}

void agent_captures_set_sampler(struct agent_captures *c, bool available)
{
	pthread_mutex_lock(&c->lock);
	c->sampler_known = true;
	c->sampler = available;
	pthread_mutex_unlock(&c->lock);
}

/* ---- rate of exported profiles (under lock) ----------------------------------------------- */

static uint32_t rate_last_minute(struct agent_captures *c, uint64_t now_ms)
{
	uint64_t sec = now_ms / 1000;
	uint32_t n = 0;
	for (size_t i = 0; i < RATE_SLOTS; i++)
		if (c->rate_count[i] && c->rate_sec[i] + RATE_SLOTS > sec)
			n += c->rate_count[i];
	return n;
}

static void rate_add(struct agent_captures *c, unsigned n, uint64_t now_ms)
{
	uint64_t sec = now_ms / 1000;
	size_t i = sec % RATE_SLOTS;
	if (c->rate_sec[i] != sec) {
		c->rate_sec[i] = sec;
		c->rate_count[i] = 0;
	}
	c->rate_count[i] += n;
}

void agent_captures_set_ratelimit(struct agent_captures *c, struct agent_ratelimit *rl)
{
	pthread_mutex_lock(&c->lock);
	c->rl = rl;
	pthread_mutex_unlock(&c->lock);
}

/* The shared rate limit's source of a capture of this trigger. */
static enum agent_profile_source trigger_source(const char *trigger)
{
	if (!strcmp(trigger, "high_cpu"))
		return AGENT_SRC_HIGH_CPU;
	if (!strcmp(trigger, "slow_span"))
		return AGENT_SRC_SLOW_SPAN;
	return AGENT_SRC_CAPTURE;
}

void agent_captures_note_profiles(struct agent_captures *c, unsigned n, uint64_t now_ms)
{
	pthread_mutex_lock(&c->lock);
	rate_add(c, n, now_ms);
	pthread_mutex_unlock(&c->lock);
}

/* ---- table (under lock) ------------------------------------------------------------------- */

static void mark(struct agent_captures *c, struct entry *x)
{
	if (!x->report)
		return;
	if (!x->dirty)
		x->dirty = c->next_dirty++;
	if (c->notify)
		c->notify(c->notify_ctx);
}

static struct entry *by_id(struct agent_captures *c, const char *id)
{
	for (size_t i = 0; i < TABLE; i++)
		if (c->e[i].used && !strcmp(c->e[i].st.id, id))
			return &c->e[i];
	return NULL;
}

static struct entry *by_serial(struct agent_captures *c, uint64_t serial)
{
	for (size_t i = 0; i < TABLE; i++)
		if (c->e[i].used && c->e[i].serial == serial)
			return &c->e[i];
	return NULL;
}

static unsigned in_progress(const struct agent_captures *c)
{
	unsigned n = 0;
	for (size_t i = 0; i < TABLE; i++)
		n += c->e[i].used && c->e[i].phase != PH_FINAL;
	return n;
}

/* The final entry that finished first, and how many finals there are. */
static struct entry *oldest_final(struct agent_captures *c, size_t *n_finals)
{
	struct entry *oldest = NULL;
	*n_finals = 0;
	for (size_t i = 0; i < TABLE; i++) {
		struct entry *x = &c->e[i];
		if (x->used && x->phase == PH_FINAL) {
			(*n_finals)++;
			if (!oldest || x->finished < oldest->finished)
				oldest = x;
		}
	}
	return oldest;
}

/* A free entry, else the oldest final (the table has room for AGENT_CAPTURE_MAX_ACTIVE in
 * progress, which are never taken, and AGENT_CAPTURE_KEEP_FINAL finals). */
static struct entry *new_entry(struct agent_captures *c, const char *id, const char *trigger)
{
	struct entry *victim = NULL;
	for (size_t i = 0; i < TABLE && !victim; i++)
		if (!c->e[i].used)
			victim = &c->e[i];
	size_t finals;
	if (!victim)
		victim = oldest_final(c, &finals);
	if (!victim)
		return NULL;
	entry_clear(victim);
	victim->used = true;
	victim->serial = c->next_serial++;
	victim->report = !strcmp(trigger, "on_demand");
	snprintf(victim->trigger, sizeof(victim->trigger), "%s", trigger);
	snprintf(victim->st.id, sizeof(victim->st.id), "%s", id);
	return victim;
}

static void finish(struct agent_captures *c, struct entry *x, enum pf_capture_state state,
		   const char *code, const char *msg)
{
	x->phase = PH_FINAL;
	x->finished = c->next_finished++;
	x->st.state = state;
	if (code) {
		char text[sizeof(x->st.error)];
		snprintf(text, sizeof(text), "%s", msg ? msg : ""); /* msg may be st.error */
		snprintf(x->st.error_code, sizeof(x->st.error_code), "%s", code);
		memcpy(x->st.error, text, sizeof(text));
	}
	free(x->payload);
	x->payload = NULL;
	mark(c, x);
	c->sum.generation++;
	if (state == PF_CAPTURE_DONE)
		c->sum.done++;
	else if (state == PF_CAPTURE_CANCELLED)
		c->sum.cancelled++;
	else if (!x->admitted)
		c->sum.refused++;
	else
		c->sum.failed++;
	if (state == PF_CAPTURE_FAILED)
		snprintf(c->sum.last_error, sizeof(c->sum.last_error), "%s: %s: %s", x->st.id,
			 x->st.error_code, x->st.error);
	if (x->admitted) /* the agent's own failures make it unhealthy until one succeeds */
		c->sum.healthy =
		    state != PF_CAPTURE_FAILED || (strcmp(x->st.error_code, "export_failed") &&
						   strcmp(x->st.error_code, "internal"));
	size_t finals;
	struct entry *oldest = oldest_final(c, &finals);
	if (finals > AGENT_CAPTURE_KEEP_FINAL)
		entry_clear(oldest);
}

/* The refusal of a request, or NULL when it may run. */
static const char *admission(struct agent_captures *c, const struct pf_capture_request *req,
			     const char *trigger, bool on_demand, uint64_t now_ms, char *msg,
			     size_t cap)
{
	if (!c->enabled) {
		snprintf(msg, cap,
			 "profiling is disabled on this agent (profiling.enabled: false)");
		return "disabled";
	}
	if (on_demand && !c->on_demand) {
		snprintf(msg, cap,
			 "captures are disabled on this agent "
			 "(profiling.triggers.on_demand.enabled: false)");
		return "disabled";
	}
	if (c->sampler_known && !c->sampler) {
		snprintf(msg, cap,
			 "this agent has no eBPF sampler (BPF unavailable or --no-sampler)");
		return "disabled";
	}
	if (on_demand && req->duration_seconds > c->max_duration) {
		snprintf(msg, cap,
			 "duration_seconds %u is over profiling.triggers.on_demand."
			 "max_duration_seconds (%u)",
			 req->duration_seconds, c->max_duration);
		return "duration_exceeded";
	}
	if (in_progress(c) >= AGENT_CAPTURE_MAX_ACTIVE) {
		snprintf(msg, cap, "%d captures are already in progress on this agent",
			 AGENT_CAPTURE_MAX_ACTIVE);
		return "busy";
	}
	if (c->rl) { /* the last check: an admitted capture takes its place */
		if (agent_ratelimit_take(c->rl, trigger_source(trigger), now_ms))
			return NULL;
		struct agent_ratelimit_stats rs;
		agent_ratelimit_stats(c->rl, now_ms, &rs);
		snprintf(msg, cap,
			 "%u profiles exported in the last minute; "
			 "profiling.limits.max_profiles_per_minute is %u",
			 rs.used, rs.limit);
		return "rate_limited";
	}
	uint32_t used = rate_last_minute(c, now_ms);
	if (used + 1 > c->max_per_minute) {
		snprintf(msg, cap,
			 "%u profiles exported in the last minute; "
			 "profiling.limits.max_profiles_per_minute is %u",
			 used, c->max_per_minute);
		return "rate_limited";
	}
	return NULL;
}

int agent_captures_request(struct agent_captures *c, const struct pf_capture_request *req,
			   const char *trigger, uint64_t now_ms, struct pf_capture_status *st)
{
	return agent_captures_request_attrs(c, req, trigger, NULL, 0, now_ms, st);
}

int agent_captures_request_attrs(struct agent_captures *c, const struct pf_capture_request *req,
				 const char *trigger, const struct agent_capture_attr *attrs,
				 size_t n_attrs, uint64_t now_ms, struct pf_capture_status *st)
{
	if (n_attrs > AGENT_CAPTURE_MAX_ATTRS)
		return -EINVAL;
	struct pf_buf b;
	pf_buf_init(&b, PF_CAPTURE_MAX_MSG);
	int rc = pf_capture_request_encode(req, &b);
	if (rc < 0) {
		pf_buf_release(&b);
		memset(st, 0, sizeof(*st));
		snprintf(st->id, sizeof(st->id), "%s", req->id);
		st->state = PF_CAPTURE_FAILED;
		snprintf(st->error_code, sizeof(st->error_code), "bad_request");
		snprintf(st->error, sizeof(st->error), "the request cannot be encoded: %s",
			 strerror(-rc));
		return rc == -ENOMEM ? rc : -EPERM;
	}
	pthread_mutex_lock(&c->lock);
	struct entry *x = by_id(c, req->id);
	if (x) {
		mark(c, x); /* the controller asks again (it restarted?): tell it again */
		*st = x->st;
		pthread_mutex_unlock(&c->lock);
		pf_buf_release(&b);
		return 1;
	}
	char msg[sizeof(st->error)];
	bool on_demand = !strcmp(trigger, "on_demand");
	const char *refusal = admission(c, req, trigger, on_demand, now_ms, msg, sizeof(msg));
	x = new_entry(c, req->id, trigger);
	if (!x) { /* cannot happen: in progress ones are bounded below the table size */
		pthread_mutex_unlock(&c->lock);
		pf_buf_release(&b);
		return -ENOMEM;
	}
	if (refusal) {
		finish(c, x, PF_CAPTURE_FAILED, refusal, msg);
		rc = -EPERM;
	} else {
		x->phase = PH_QUEUED;
		x->admitted = true;
		c->sum.generation++;
		x->st.state = PF_CAPTURE_ACCEPTED;
		x->n_attrs = n_attrs;
		if (n_attrs)
			memcpy(x->attrs, attrs, n_attrs * sizeof(*attrs));
		x->payload = b.data; /* taken */
		x->payload_len = b.len;
		pf_buf_init(&b, PF_CAPTURE_MAX_MSG);
		if (!c->rl)
			rate_add(c, 1, now_ms);
		mark(c, x);
		if (c->worker_wake)
			c->worker_wake(c->worker_ctx);
		rc = 0;
	}
	*st = x->st;
	pthread_mutex_unlock(&c->lock);
	pf_buf_release(&b);
	return rc;
}

void agent_captures_bad_request(struct agent_captures *c, const char *id, const char *msg)
{
	if (!pf_capture_id_valid(id))
		return;
	pthread_mutex_lock(&c->lock);
	if (!by_id(c, id)) {
		struct entry *x = new_entry(c, id, "on_demand");
		if (x)
			finish(c, x, PF_CAPTURE_FAILED, "bad_request", msg);
	}
	pthread_mutex_unlock(&c->lock);
}

int agent_captures_cancel(struct agent_captures *c, const char *id)
{
	int rc = 0;
	pthread_mutex_lock(&c->lock);
	struct entry *x = by_id(c, id);
	if (!x || x->phase == PH_FINAL || x->phase == PH_EXPORTING) {
		rc = -ENOENT;
	} else if (x->phase == PH_QUEUED) {
		finish(c, x, PF_CAPTURE_CANCELLED, NULL, NULL);
	} else {
		x->cancel = true;
		if (c->worker_wake)
			c->worker_wake(c->worker_ctx);
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* ---- worker side -------------------------------------------------------------------------- */

int agent_captures_next_job(struct agent_captures *c, struct agent_capture_job *job)
{
	memset(job, 0, sizeof(*job));
	pthread_mutex_lock(&c->lock);
	struct entry *x = NULL;
	for (size_t i = 0; i < TABLE; i++) {
		struct entry *y = &c->e[i];
		if (y->used && y->phase == PH_QUEUED && y->payload && (!x || y->serial < x->serial))
			x = y;
	}
	int rc = 0;
	while (x && rc == 0) {
		struct pf_error err = {0};
		job->serial = x->serial;
		snprintf(job->trigger, sizeof(job->trigger), "%s", x->trigger);
		job->n_attrs = x->n_attrs;
		memcpy(job->attrs, x->attrs, sizeof(job->attrs));
		int d = pf_capture_request_decode(x->payload, x->payload_len, &job->req, &err);
		free(x->payload);
		x->payload = NULL;
		if (d < 0) { /* out of memory */
			pf_capture_request_release(&job->req);
			finish(c, x, PF_CAPTURE_FAILED, "internal", err.msg);
			x = NULL;
		} else {
			rc = 1;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void agent_captures_started(struct agent_captures *c, uint64_t serial, uint64_t now_ms)
{
	pthread_mutex_lock(&c->lock);
	struct entry *x = by_serial(c, serial);
	if (x && x->phase == PH_QUEUED) {
		x->phase = PH_SAMPLING;
		x->st.state = PF_CAPTURE_RUNNING;
		x->last_sent_ms = now_ms;
		mark(c, x);
	}
	pthread_mutex_unlock(&c->lock);
}

void agent_captures_progress(struct agent_captures *c, uint64_t serial, uint64_t samples,
			     uint64_t now_ms)
{
	pthread_mutex_lock(&c->lock);
	struct entry *x = by_serial(c, serial);
	if (x && x->phase == PH_SAMPLING && samples != x->st.samples) {
		x->st.samples = samples;
		if (now_ms - x->last_sent_ms >= AGENT_CAPTURE_PROGRESS_MS) {
			x->last_sent_ms = now_ms;
			mark(c, x);
		}
	}
	pthread_mutex_unlock(&c->lock);
}

bool agent_captures_cancel_requested(struct agent_captures *c, uint64_t serial)
{
	pthread_mutex_lock(&c->lock);
	struct entry *x = by_serial(c, serial);
	bool cancel = x && x->cancel;
	pthread_mutex_unlock(&c->lock);
	return cancel;
}

/* code NULL: the detail of a capture that goes on (agent_captures_note); else it fails. */
static void set_detail(struct agent_captures *c, uint64_t serial, const char *code,
		       const char *fmt, va_list ap) __attribute__((format(printf, 4, 0)));
static void set_detail(struct agent_captures *c, uint64_t serial, const char *code,
		       const char *fmt, va_list ap)
{
	char msg[sizeof(((struct pf_capture_status *)0)->error)];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	pthread_mutex_lock(&c->lock);
	struct entry *x = by_serial(c, serial);
	if (x && x->phase != PH_FINAL) {
		if (code)
			finish(c, x, PF_CAPTURE_FAILED, code, msg);
		else
			memcpy(x->st.error, msg, sizeof(msg));
	}
	pthread_mutex_unlock(&c->lock);
}

void agent_captures_note(struct agent_captures *c, uint64_t serial, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	set_detail(c, serial, NULL, fmt, ap);
	va_end(ap);
}

void agent_captures_fail(struct agent_captures *c, uint64_t serial, const char *code,
			 const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	set_detail(c, serial, code, fmt, ap);
	va_end(ap);
}

/* The last export ended: done/cancelled, or failed when one of them failed. */
static void exports_over(struct agent_captures *c, struct entry *x)
{
	if (x->failing)
		finish(c, x, PF_CAPTURE_FAILED, "export_failed", x->st.error);
	else
		finish(c, x, x->cancel ? PF_CAPTURE_CANCELLED : PF_CAPTURE_DONE, NULL, NULL);
}

void agent_captures_exporting(struct agent_captures *c, uint64_t serial, uint64_t samples,
			      uint64_t bytes, const uint8_t (*ids)[16], size_t n_ids,
			      unsigned n_requests, uint64_t now_ms)
{
	pthread_mutex_lock(&c->lock);
	struct entry *x = by_serial(c, serial);
	if (x && x->phase != PH_FINAL) {
		x->phase = PH_EXPORTING;
		x->st.state = PF_CAPTURE_RUNNING;
		x->st.samples = samples;
		x->st.bytes = bytes;
		x->st.n_profile_ids = pf_min(n_ids, (size_t)PF_CAPTURE_MAX_PROFILE_IDS);
		if (x->st.n_profile_ids)
			memcpy(x->st.profile_ids, ids, x->st.n_profile_ids * 16);
		x->pending = n_requests;
		x->deadline_ms = now_ms + AGENT_CAPTURE_EXPORT_MS;
		if (!n_requests)
			exports_over(c, x);
	}
	pthread_mutex_unlock(&c->lock);
}

void agent_captures_export_done(struct agent_captures *c, uint64_t serial, int rc, const char *why)
{
	pthread_mutex_lock(&c->lock);
	struct entry *x = by_serial(c, serial);
	if (x && x->phase == PH_EXPORTING && x->pending) {
		x->pending--;
		if (rc < 0 && !x->failing) {
			x->failing = true;
			snprintf(x->st.error, sizeof(x->st.error), "%s",
				 why && why[0] ? why : "the receiver did not accept the profiles");
		}
		if (!x->pending)
			exports_over(c, x);
	}
	pthread_mutex_unlock(&c->lock);
}

unsigned agent_captures_tick(struct agent_captures *c, uint64_t now_ms)
{
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < TABLE; i++) {
		struct entry *x = &c->e[i];
		if (x->used && x->phase == PH_EXPORTING && now_ms >= x->deadline_ms) {
			char msg[128];
			snprintf(
			    msg, sizeof(msg),
			    "the receiver did not confirm %u of the capture's exports within %d s",
			    x->pending, AGENT_CAPTURE_EXPORT_MS / 1000);
			x->pending = 0;
			finish(c, x, PF_CAPTURE_FAILED, "export_failed",
			       x->failing ? x->st.error : msg);
		}
	}
	unsigned n = in_progress(c);
	pthread_mutex_unlock(&c->lock);
	return n;
}

void agent_captures_summary(struct agent_captures *c, struct agent_captures_summary *out)
{
	pthread_mutex_lock(&c->lock);
	*out = c->sum;
	out->in_progress = in_progress(c);
	pthread_mutex_unlock(&c->lock);
}

/* ---- OpAMP side --------------------------------------------------------------------------- */

/* Sending order after a reconnect: finals in the order they finished, then those in
 * progress in the order they came. */
static uint64_t resend_key(const struct entry *x)
{
	return x->phase == PH_FINAL ? x->finished : (1ull << 62) + x->serial;
}

void agent_captures_on_connect(struct agent_captures *c)
{
	pthread_mutex_lock(&c->lock);
	for (size_t round = 0; round < TABLE; round++) {
		struct entry *next = NULL;
		for (size_t i = 0; i < TABLE; i++) {
			struct entry *x = &c->e[i];
			if (x->used && x->report && !x->dirty &&
			    (!next || resend_key(x) < resend_key(next)))
				next = x;
		}
		if (!next)
			break;
		next->dirty = c->next_dirty++;
	}
	pthread_mutex_unlock(&c->lock);
}

bool agent_captures_has_news(struct agent_captures *c)
{
	pthread_mutex_lock(&c->lock);
	bool news = false;
	for (size_t i = 0; i < TABLE && !news; i++)
		news = c->e[i].used && c->e[i].dirty;
	pthread_mutex_unlock(&c->lock);
	return news;
}

bool agent_captures_next_status(struct agent_captures *c, struct pf_capture_status *out)
{
	pthread_mutex_lock(&c->lock);
	struct entry *x = NULL;
	for (size_t i = 0; i < TABLE; i++) {
		struct entry *y = &c->e[i];
		if (y->used && y->dirty && (!x || y->dirty < x->dirty))
			x = y;
	}
	if (x) {
		x->dirty = 0;
		*out = x->st;
	}
	pthread_mutex_unlock(&c->lock);
	return x != NULL;
}

int agent_captures_status(struct agent_captures *c, const char *id, struct pf_capture_status *out)
{
	pthread_mutex_lock(&c->lock);
	struct entry *x = by_id(c, id);
	if (x)
		*out = x->st;
	pthread_mutex_unlock(&c->lock);
	return x ? 0 : -ENOENT;
}
