/* capture_run.c — see capture_run.h. */
#include "triggers/capture_run.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/encode_submit.h"
#include "export/exporter.h"
#include "pf/log.h"

#define RECEIVER_TIMEOUT_S 10
#define RECEIVER_BACKOFF_BASE_MS 500
#define RECEIVER_BACKOFF_CAP_MS 5000

struct run {
	bool used;
	unsigned slot; /* sampler capture slot: the index of the run */
	struct agent_capture_job job;
	uint64_t end_ms;
	size_t n_pids; /* processes sampled */
	enum pf_prof_type type;
};

struct agent_capture_runner {
	struct agent_captures *engine;
	char *token, *uid, *receiver, *ca_file, *cert_file, *key_file;
	void (*submit_bytes)(void *ctx, const uint8_t *data, size_t len, const uint8_t id[16]);
	void (*submit_window)(void *ctx, const struct pf_prof_window *w);
	void (*retire)(void *ctx, struct agent_exporter *x);
	void *ctx;

	struct run runs[AGENT_CAPTURE_MAX_ACTIVE];
	uint32_t *pids; /* AGENT_CAPTURE_RUN_MAX_PIDS */

	struct agent_exporter *rx; /* the receiver's exporter, NULL until the first export */
	char *rx_url;
};

/* One export to the receiver, for its done callback (exporter thread). */
struct delivery {
	struct agent_captures *engine;
	struct agent_exporter *x;
	uint64_t serial;
	char url[PF_CAPTURE_MAX_URL + 1];
};

_Static_assert(AGENT_CAPTURE_MAX_ACTIVE <= PF_SAMPLER_CAPTURES, "not enough sampler slots");

static char *dup_opt(const char *s, bool *fail)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	*fail |= !d;
	return d;
}

struct agent_capture_runner *agent_capture_runner_new(const struct agent_capture_runner_opts *o)
{
	struct agent_capture_runner *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	bool fail = false;
	r->engine = o->engine;
	r->token = dup_opt(o->agent_token, &fail);
	r->uid = dup_opt(o->agent_uid, &fail);
	r->receiver = dup_opt(o->receiver, &fail);
	r->ca_file = dup_opt(o->ca_file, &fail);
	r->cert_file = dup_opt(o->cert_file, &fail);
	r->key_file = dup_opt(o->key_file, &fail);
	r->submit_bytes = o->submit_bytes;
	r->submit_window = o->submit_window;
	r->retire = o->retire;
	r->ctx = o->ctx;
	r->pids = calloc(AGENT_CAPTURE_RUN_MAX_PIDS, sizeof(*r->pids));
	if (fail || !r->pids) {
		agent_capture_runner_free(r, NULL, 0);
		errno = ENOMEM;
		return NULL;
	}
	for (unsigned i = 0; i < AGENT_CAPTURE_MAX_ACTIVE; i++)
		r->runs[i].slot = i;
	return r;
}

/* ---- tags ---------------------------------------------------------------------------------- */

int agent_capture_tag_window(struct pf_prof_window *w, const char *agent_uid,
			     const char *capture_id, const char *trigger,
			     const struct agent_capture_attr *extra, size_t n_extra,
			     const uint8_t *trace_id)
{
	const char *keys[3 + AGENT_CAPTURE_MAX_ATTRS] = {"profleet.agent.uid",
							 "profleet.capture.id", "profleet.trigger"};
	const char *vals[3 + AGENT_CAPTURE_MAX_ATTRS] = {agent_uid, capture_id, trigger};
	size_t n_tags = 3;
	for (size_t k = 0; k < n_extra && k < AGENT_CAPTURE_MAX_ATTRS; k++, n_tags++) {
		keys[n_tags] = extra[k].key;
		vals[n_tags] = extra[k].value;
	}
	for (size_t i = 0; i < w->n_processes; i++) {
		struct pf_prof_process *p = (struct pf_prof_process *)&w->processes[i];
		struct pf_prof_attr *a = pf_prof_alloc(w, (p->n_attrs + n_tags) * sizeof(*a));
		if (!a)
			return -ENOMEM;
		if (p->n_attrs)
			memcpy(a, p->attrs, p->n_attrs * sizeof(*a));
		size_t n = p->n_attrs;
		for (size_t k = 0; k < n_tags; k++) {
			if (!vals[k])
				continue;
			a[n].key = pf_prof_strdup(w, keys[k]);
			a[n].value = pf_prof_strdup(w, vals[k]);
			if (!a[n].key || !a[n++].value)
				return -ENOMEM;
		}
		p->attrs = a;
		p->n_attrs = n;
		if (!trace_id)
			continue;
		struct pf_prof_sample *sm = (struct pf_prof_sample *)p->samples;
		for (size_t k = 0; k < p->n_samples; k++) {
			memcpy(sm[k].trace_id, trace_id, 16);
			memset(sm[k].span_id, 0, 8);
		}
	}
	return 0;
}

/* The receiver in use finishes what it holds (bounded by its timeout); the next upload makes
 * another. */
static void drop_receiver(struct agent_capture_runner *r)
{
	if (!r->rx)
		return;
	if (r->retire)
		r->retire(r->ctx, r->rx);
	else
		agent_exporter_free(r->rx);
	r->rx = NULL;
	free(r->rx_url);
	r->rx_url = NULL;
}

int agent_capture_runner_set_identity(struct agent_capture_runner *r, const char *token,
				      const char *uid)
{
	bool fail = false;
	char *t = dup_opt(token, &fail), *u = dup_opt(uid, &fail);
	if (fail) {
		free(t);
		free(u);
		return -ENOMEM;
	}
	if (r->token) {
		explicit_bzero(r->token, strlen(r->token));
		free(r->token);
	}
	r->token = t;
	if (u) {
		free(r->uid);
		r->uid = u;
	}
	drop_receiver(r);
	return 0;
}

/* ---- the receiver -------------------------------------------------------------------------- */

/* The exporter for url, created (or replaced) as needed. NULL and err. */
static struct agent_exporter *receiver(struct agent_capture_runner *r, const char *url,
				       struct pf_error *err)
{
	if (r->rx && !strcmp(r->rx_url, url))
		return r->rx;
	if (r->rx) {
		/* another receiver: the old one finishes what it holds (bounded by its timeout) */
		pf_log_info("capture: receiver changes from %s to %s", r->rx_url, url);
		drop_receiver(r);
	}
	struct pf_exporter cfg = {
	    .type = PF_EXPORTER_OTLP_HTTP,
	    .endpoint = (char *)url,
	    .compression = PF_COMPRESSION_GZIP,
	    .auth = r->token ? PF_AUTH_AGENT_TOKEN : PF_AUTH_NONE,
	    .timeout_seconds = RECEIVER_TIMEOUT_S,
	    .tls = {.present = r->ca_file || r->cert_file,
		    .ca_file = r->ca_file,
		    .cert_file = r->cert_file,
		    .key_file = r->key_file},
	};
	if (strncmp(url, "https://", 8) != 0) /* tls is for https only */
		cfg.tls = (struct pf_exporter_tls){0};
	struct agent_exporter_opts xo = {.agent_token = r->token,
					 .backoff_base_ms = RECEIVER_BACKOFF_BASE_MS,
					 .backoff_cap_ms = RECEIVER_BACKOFF_CAP_MS};
	r->rx = agent_exporter_new_opts(&cfg, &xo, err);
	if (r->rx && !(r->rx_url = strdup(url))) {
		agent_exporter_free(r->rx);
		r->rx = NULL;
		pf_error_set(err, -ENOMEM, "", "out of memory");
	}
	return r->rx;
}

static void delivered(void *user, int rc)
{
	struct delivery *dl = user;
	char why[sizeof(((struct pf_capture_status *)0)->error)] = "";
	if (rc < 0) {
		struct agent_exporter_status st;
		agent_exporter_status(dl->x, &st);
		snprintf(why, sizeof(why), "export to %.200s: %.280s", dl->url,
			 rc == -ECANCELED   ? "cancelled at shutdown"
			 : rc == -ENOBUFS   ? "dropped from the export queue"
			 : st.last_error[0] ? st.last_error
					    : strerror(-rc));
	}
	agent_captures_export_done(dl->engine, dl->serial, rc, why);
	free(dl);
}

/* ---- one capture's end --------------------------------------------------------------------- */

/* One capture's hand-off (encode_submit.h's sink). */
struct capture_export {
	struct agent_capture_runner *r;
	struct run *run;
	const char *url;	  /* the receiver, NULL when none */
	struct agent_exporter *x; /* its exporter, NULL when none */
	uint64_t samples, now_ms;
	bool refused; /* ready() failed the capture itself */
};

/* Every profile is encoded: check the receiver, tell the engine what is being exported. */
static int capture_ready(void *ctx, const struct agent_encoded *e)
{
	struct capture_export *ce = ctx;
	struct agent_capture_runner *r = ce->r;
	const struct pf_capture_request *req = &ce->run->job.req;
	uint64_t serial = ce->run->job.serial;
	struct pf_error err = {0};
	/* a local trigger (high_cpu...) sends nothing over OpAMP: without a receiver its profiles
	 * go to the configured exporters only */
	bool local = strcmp(ce->run->job.trigger, "on_demand") != 0;
	if (e->n && !ce->url && !local) {
		agent_captures_fail(r->engine, serial, "export_failed",
				    "no receiver: the request names none and the agent has no "
				    "OpAMP server URL to derive it from");
		ce->refused = true;
		return -EDESTADDRREQ;
	}
	if (e->n && ce->url && !(ce->x = receiver(r, ce->url, &err))) {
		agent_captures_fail(r->engine, serial, "export_failed", "receiver %s: %s", ce->url,
				    err.msg);
		ce->refused = true;
		return -EHOSTUNREACH;
	}
	pf_log_info("capture %s: %" PRIu64 " samples, %zu profiles, %" PRIu64 " bytes to %s",
		    req->id, ce->samples, e->n, e->bytes,
		    !e->n    ? "(nothing)"
		    : ce->x ? ce->url
			    : "the configured exporters");
	if (!ce->samples && ce->run->type == PF_PROF_CPU) /* done, but say why it is empty */
		agent_captures_note(
		    r->engine, serial,
		    "no samples: the %zu process%s sampled did not run on a CPU during the "
		    "capture (idle, sleeping or blocked: a CPU profile shows only code that runs)",
		    ce->run->n_pids, ce->run->n_pids == 1 ? "" : "es");
	else if (!ce->samples && ce->run->type == PF_PROF_ALLOC)
		agent_captures_note(r->engine, serial,
				    "no samples: the %zu process%s probed allocated less than "
				    "profiling.alloc.sample_bytes on average during the capture",
				    ce->run->n_pids, ce->run->n_pids == 1 ? "" : "es");
	else if (!ce->samples)
		agent_captures_note(r->engine, serial,
				    "no samples: the %zu process%s followed neither ran on a CPU "
				    "nor finished a wait of at least profiling.off_cpu.min_block_us "
				    "during the capture",
				    ce->run->n_pids, ce->run->n_pids == 1 ? "" : "es");
	/* the engine waits for the receiver's confirmations from here on */
	agent_captures_exporting(r->engine, serial, ce->samples, e->bytes,
				 (const uint8_t(*)[16])e->ids, e->n, ce->x ? (unsigned)e->n : 0,
				 ce->now_ms);
	return 0;
}

/* One profile: to the configured exporters, and to the receiver. */
static void capture_bytes(void *ctx, const uint8_t *data, size_t len, const uint8_t id[16])
{
	struct capture_export *ce = ctx;
	struct agent_capture_runner *r = ce->r;
	uint64_t serial = ce->run->job.serial;
	if (r->submit_bytes)
		r->submit_bytes(r->ctx, data, len, id);
	if (!ce->x)
		return;
	struct delivery *dl = malloc(sizeof(*dl));
	int src = -ENOMEM;
	if (dl) {
		*dl = (struct delivery){.engine = r->engine, .x = ce->x, .serial = serial};
		snprintf(dl->url, sizeof(dl->url), "%s", ce->url);
		src = agent_exporter_submit(ce->x, data, len, id, delivered, dl);
	}
	if (src < 0) {
		free(dl);
		char why[160];
		snprintf(why, sizeof(why), "export to %.60s: %.60s", ce->url, strerror(-src));
		agent_captures_export_done(r->engine, serial, src, why);
	}
}

static void capture_window(void *ctx, const struct pf_prof_window *w)
{
	struct capture_export *ce = ctx;
	if (ce->r->submit_window)
		ce->r->submit_window(ce->r->ctx, w);
}

static void export_capture(struct agent_capture_runner *r, struct run *run,
			   struct pf_prof_window *w, uint64_t now_ms)
{
	const struct pf_capture_request *req = &run->job.req;
	struct pf_error err = {0};
	struct capture_export ce = {.r = r,
				    .run = run,
				    .url = req->receiver ? req->receiver : r->receiver,
				    .now_ms = now_ms};
	struct agent_submit_sink sink = {
	    .ready = capture_ready, .bytes = capture_bytes, .window = capture_window, .ctx = &ce};
	struct agent_encoded e = {0};
	int rc =
	    agent_capture_tag_window(w, r->uid, req->id, run->job.trigger, run->job.attrs,
				     run->job.n_attrs, req->has_trace_id ? req->trace_id : NULL);
	ce.samples = pf_prof_window_samples(w);
	if (rc == 0)
		rc = agent_encode_submit(w, true, AGENT_CAPTURE_RUN_MAX_PROFILES, &sink, &e, &err);
	if (rc < 0 && !ce.refused) /* capture_ready reported its own */
		agent_captures_fail(r->engine, run->job.serial, "internal",
				    "cannot encode the profiles: %s",
				    err.msg[0] ? err.msg : strerror(-rc));
	agent_encoded_release(&e);
}

static void end_run(struct agent_capture_runner *r, struct pf_sampler *sampler, struct run *run,
		    uint64_t now_ms)
{
	struct pf_error err = {0};
	struct pf_prof_window *w = pf_sampler_capture_stop(sampler, run->slot, &err);
	if (!w)
		agent_captures_fail(r->engine, run->job.serial, "internal",
				    "cannot close the capture's window: %s", err.msg);
	else
		export_capture(r, run, w, now_ms);
	const char *note = pf_sampler_capture_note(sampler, run->slot);
	if (w && note[0]) /* an alloc capture's guard or untracked samples */
		agent_captures_note(r->engine, run->job.serial, "%s", note);
	pf_prof_window_free(w);
	pf_capture_request_release(&run->job.req);
	run->used = false;
}

/* ---- one capture's start ------------------------------------------------------------------- */

static void start_run(struct agent_capture_runner *r, struct pf_sampler *sampler, struct run *run,
		      uint64_t now_ms)
{
	const struct pf_capture_request *req = &run->job.req;
	uint64_t serial = run->job.serial;
	struct pf_error err = {0};
	size_t n = 0;
	if (!sampler) {
		agent_captures_fail(
		    r->engine, serial, "disabled",
		    "this agent has no eBPF sampler (BPF unavailable or --no-sampler)");
		return;
	}
	int rc = pf_sampler_capture_pids(sampler, req->processes, req->n_processes, r->pids,
					 AGENT_CAPTURE_RUN_MAX_PIDS, &n, &err);
	if (rc < 0) {
		agent_captures_fail(r->engine, serial, rc == -EINVAL ? "bad_request" : "internal",
				    "%s", err.msg);
		return;
	}
	if (!n) {
		agent_captures_fail(r->engine, serial, "process_not_found",
				    "no running process matches the request's %zu process rule%s "
				    "(processes matching profiling.filters.exclude are never captured)",
				    req->n_processes, req->n_processes == 1 ? "" : "s");
		return;
	}
	enum pf_prof_type type = PF_PROF_CPU;
	if (pf_prof_type_parse(req->profile_type, &type) < 0 || !pf_capture_type_supported(type)) {
		agent_captures_fail(r->engine, serial, "bad_request",
				    "unsupported profile_type %.15s", req->profile_type);
		return;
	}
	rc = pf_sampler_capture_start(sampler, run->slot, type, req->frequency_hz, r->pids, n,
				      &err);
	if (rc < 0) {
		agent_captures_fail(r->engine, serial, "internal", "cannot start sampling: %s",
				    err.msg);
		return;
	}
	run->type = type;
	run->used = true;
	run->n_pids = n;
	run->end_ms = now_ms + (uint64_t)req->duration_seconds * 1000u;
	agent_captures_started(r->engine, serial, now_ms);
	pf_log_info("capture %s: %s profile of %zu process%s at %u Hz for %u s", req->id,
		    req->profile_type, n, n == 1 ? "" : "es", req->frequency_hz,
		    req->duration_seconds);
}

int64_t agent_capture_runner_poll(struct agent_capture_runner *r, struct pf_sampler *sampler,
				  const struct pf_profcfg *cfg, uint64_t now_ms)
{
	(void)cfg;
	/* ends first: a slot freed now can take a waiting capture */
	for (unsigned i = 0; i < AGENT_CAPTURE_MAX_ACTIVE; i++) {
		struct run *run = &r->runs[i];
		if (!run->used)
			continue;
		if (now_ms >= run->end_ms ||
		    agent_captures_cancel_requested(r->engine, run->job.serial))
			end_run(r, sampler, run, now_ms);
		else
			agent_captures_progress(r->engine, run->job.serial,
						pf_sampler_capture_samples(sampler, run->slot),
						now_ms);
	}
	for (unsigned i = 0; i < AGENT_CAPTURE_MAX_ACTIVE; i++) {
		struct run *run = &r->runs[i];
		if (run->used)
			continue;
		if (agent_captures_next_job(r->engine, &run->job) != 1)
			break;
		start_run(r, sampler, run, now_ms);
		if (!run->used)
			pf_capture_request_release(&run->job.req);
	}
	agent_captures_tick(r->engine, now_ms);
	int64_t next = -1;
	for (unsigned i = 0; i < AGENT_CAPTURE_MAX_ACTIVE; i++)
		if (r->runs[i].used) {
			int64_t left =
			    (int64_t)(r->runs[i].end_ms - pf_min(now_ms, r->runs[i].end_ms));
			next = next < 0 ? left : pf_min(next, left);
		}
	return next;
}

unsigned agent_capture_runner_active(const struct agent_capture_runner *r)
{
	unsigned n = 0;
	for (unsigned i = 0; i < AGENT_CAPTURE_MAX_ACTIVE; i++)
		n += r->runs[i].used;
	return n;
}

void agent_capture_runner_free(struct agent_capture_runner *r, struct pf_sampler *sampler,
			       uint32_t timeout_ms)
{
	if (!r)
		return;
	uint64_t now = agent_captures_now_ms();
	for (unsigned i = 0; i < AGENT_CAPTURE_MAX_ACTIVE; i++) {
		struct run *run = &r->runs[i];
		if (!run->used)
			continue;
		if (sampler) {
			pf_log_info("capture %s: ended early by the agent's shutdown",
				    run->job.req.id);
			end_run(r, sampler, run, now);
		} else {
			pf_capture_request_release(&run->job.req);
			run->used = false;
		}
	}
	if (r->rx) {
		if (timeout_ms && agent_exporter_flush(r->rx, timeout_ms) < 0)
			pf_log_warn("capture: the receiver did not confirm everything at shutdown");
		agent_exporter_free(r->rx);
	}
	free(r->rx_url);
	free(r->pids);
	if (r->token)
		explicit_bzero(r->token, strlen(r->token));
	free(r->token);
	free(r->uid);
	free(r->receiver);
	free(r->ca_file);
	free(r->cert_file);
	free(r->key_file);
	free(r);
}
