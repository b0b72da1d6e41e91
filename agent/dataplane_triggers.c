/* dataplane_triggers.c — see dataplane_triggers.h. */
#include "dataplane_triggers.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dataplane_int.h"
#include "endpoints/listen_addr.h"
#include "health.h"
#include "pf/clock.h"
#include "pf/log.h"
#include "pf/uuid.h"
#include "sampler/sample_ring.h"

/* ---- the high_cpu trigger (worker thread) -------------------------------------------------- */

/* A firing: a capture of f->pid for high_cpu.duration_seconds at high_cpu.frequency_hz through
 * the capture engine (trigger "high_cpu": admission, the shared rate limit, the runner on this
 * worker, tags, exports), with the measured CPU as the profiles' resource attributes
 * profleet.trigger.cpu_percent (and profleet.trigger.host_cpu_percent for the host rule). */
static void high_cpu_capture(struct agent_dataplane *d, const struct agent_high_cpu_fire *f)
{
	const struct pf_profcfg *c = d->cfg;
	uint64_t now = pf_mono_ms();
	if (f->host)
		pf_log_info("dataplane: high_cpu: host at %.0f%%: capturing pid %u (%.0f%%)",
			    f->host_percent, f->pid, f->cpu_percent);
	else
		pf_log_info("dataplane: high_cpu: pid %u at %.0f%% for %u s: capturing %u s at "
			    "%u Hz",
			    f->pid, f->cpu_percent, c->high_cpu.sustain_seconds,
			    c->high_cpu.duration_seconds, c->high_cpu.frequency_hz);
	pthread_mutex_lock(&d->lock);
	d->counters.high_cpu_fired++;
	pthread_mutex_unlock(&d->lock);
	if (!d->captures) {
		pf_log_warn("dataplane: high_cpu: no capture engine, nothing captured");
		return;
	}
	char key[] = "process.pid", pid[16];
	struct pf_capture_request req = {.duration_seconds = c->high_cpu.duration_seconds,
					 .frequency_hz = c->high_cpu.frequency_hz,
					 .n_processes = 1};
	struct agent_capture_attr attrs[2] = {{.key = "profleet.trigger.cpu_percent"},
					      {.key = "profleet.trigger.host_cpu_percent"}};
	snprintf(req.id, sizeof(req.id), "high_cpu-%u-%" PRIu64, f->pid, now);
	snprintf(req.profile_type, sizeof(req.profile_type), "cpu");
	snprintf(pid, sizeof(pid), "%u", f->pid);
	snprintf(attrs[0].value, sizeof(attrs[0].value), "%.1f", f->cpu_percent);
	snprintf(attrs[1].value, sizeof(attrs[1].value), "%.1f", f->host_percent);
	req.processes[0] = (struct pf_filter){.key = key, .match = PF_MATCH_STRICT, .value = pid};
	struct pf_capture_status st;
	int rc = agent_captures_request_attrs(d->captures, &req, "high_cpu", attrs, f->host ? 2 : 1,
					      now, &st);
	if (rc == 0) {
		pthread_mutex_lock(&d->lock);
		d->counters.high_cpu_captures++;
		pthread_mutex_unlock(&d->lock);
	} else {
		pf_log_warn("dataplane: high_cpu: capture of pid %u refused: %s%s%s", f->pid,
			    st.error_code[0] ? st.error_code : strerror(rc < 0 ? -rc : EEXIST),
			    st.error[0] ? ": " : "", st.error);
	}
}

static void high_cpu_health(struct agent_dataplane *d)
{
	struct agent_high_cpu_stats st;
	char status[STATUS_LEN];
	if (!d->high_cpu)
		return;
	agent_high_cpu_stats(d->high_cpu, &st);
	int n = snprintf(status, sizeof(status),
			 "watching %zu processes%s, over %u%% for %u s fires; host %.0f%%; fired "
			 "%" PRIu64 " (host rule %" PRIu64 "), held by cooldown %" PRIu64,
			 st.tracked, st.untracked ? " (more not watched: over the bound)" : "",
			 d->cfg->high_cpu.threshold_percent, d->cfg->high_cpu.sustain_seconds,
			 st.host_percent < 0 ? 0 : st.host_percent, st.fired, st.host_fired,
			 st.held + st.host_held);
	if (st.last_pid && n > 0 && (size_t)n < sizeof(status))
		snprintf(status + n, sizeof(status) - (size_t)n, "; last pid %u at %.0f%%",
			 st.last_pid, st.last_percent);
	agent_health_set(d->health, HIGH_CPU_NAME, true, status, NULL);
}

void dp_high_cpu_tick(struct agent_dataplane *d, uint64_t now_ms)
{
	if (!d->high_cpu || !d->sampler)
		return;
	size_t n = pf_sampler_profiled_pids(d->sampler, d->pids, AGENT_HIGH_CPU_MAX_PROCS);
	struct agent_high_cpu_fire fire[AGENT_HIGH_CPU_HOST_TOP + 8];
	size_t nf = agent_high_cpu_update(d->high_cpu, now_ms * 1000000ULL, d->pids,
					  pf_min(n, (size_t)AGENT_HIGH_CPU_MAX_PROCS), fire,
					  PF_ARRAY_SIZE(fire));
	for (size_t i = 0; i < nf; i++)
		high_cpu_capture(d, &fire[i]);
	high_cpu_health(d);
}

/* Starts, reconfigures or stops the high_cpu trigger with the config. */
void dp_high_cpu_apply(struct agent_dataplane *d, const struct pf_profcfg *cfg)
{
	bool on = cfg->enabled && cfg->high_cpu.enabled;
	struct agent_high_cpu_rule r = {.threshold_percent = cfg->high_cpu.threshold_percent,
					.sustain_seconds = cfg->high_cpu.sustain_seconds,
					.duration_seconds = cfg->high_cpu.duration_seconds,
					.cooldown_seconds = cfg->high_cpu.cooldown_seconds};
	if (!on) {
		if (d->high_cpu)
			agent_health_unregister(d->health, HIGH_CPU_NAME);
		agent_high_cpu_free(d->high_cpu);
		d->high_cpu = NULL;
		return;
	}
	if (d->high_cpu) {
		agent_high_cpu_set_rule(d->high_cpu, &r);
		return;
	}
	if (!d->pids)
		d->pids = calloc(AGENT_HIGH_CPU_MAX_PROCS, sizeof(*d->pids));
	agent_health_register(d->health, HIGH_CPU_NAME);
	d->high_cpu = d->pids ? agent_high_cpu_new(&r, NULL) : NULL;
	if (!d->high_cpu)
		agent_health_set(d->health, HIGH_CPU_NAME, false, "not running", "out of memory");
	else if (!d->sampler)
		agent_health_set(d->health, HIGH_CPU_NAME, false, "not running",
				 "needs the eBPF sampler (its process list and captures)");
	else
		agent_health_set(d->health, HIGH_CPU_NAME, true, "starting", NULL);
}

/* ---- span triggers (slow_span, error_span) ------------------------------------------------- */

#define SPAN_SETTLE_NS (20ull * 1000000ull)	/* drained this long after a span's end */
#define SPAN_MAX_WAIT_NS (2000ull * 1000000ull) /* cut anyway this long after end/arrival */
#define SPAN_PROCS_MS 200			/* process snapshot refresh */
#define SPAN_REAP_MS 10000 /* triggered mode between captures: exited processes let go */
#define SPANS_COMPONENT "triggers/spans"

static uint64_t now_unix_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Receiver thread: the span's process in the worker's snapshot of sampled processes. */
static int span_resolve(void *ctx, const struct pf_span *s, uint32_t *pid, char *why, size_t n)
{
	struct agent_dataplane *d = ctx;
	int rc = -ENOENT;
	pthread_mutex_lock(&d->lock);
	/* procs are in ascending pid order (pf_sampler_ring_procs) */
	size_t lo = 0, hi = s->pid ? d->n_procs : 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (d->procs[mid].pid < s->pid) {
			lo = mid + 1;
		} else if (d->procs[mid].pid > s->pid) {
			hi = mid;
		} else {
			*pid = s->pid;
			rc = 0;
			break;
		}
	}
	for (size_t i = 0; i < d->n_procs && rc < 0 && s->service_name[0] && !s->service_name_long;
	     i++) {
		if (!strcmp(d->procs[i].service_name, s->service_name)) {
			*pid = d->procs[i].pid;
			rc = 0;
		}
	}
	uint32_t lookback = d->lookback_seconds;
	pthread_mutex_unlock(&d->lock);
	if (rc == 0)
		return 0;
	if (s->pid)
		snprintf(why, n,
			 "process.pid %" PRIu32 " has no samples in the last %" PRIu32
			 " s (not running here, excluded by the filters, or idle)%s%s%s",
			 s->pid, lookback,
			 s->service_name[0] ? " and no sampled process has "
					      "service.name \""
					    : "",
			 s->service_name, s->service_name[0] ? "\"" : "");
	else if (s->service_name[0])
		snprintf(why, n, "no sampled process has service.name \"%s\"", s->service_name);
	else
		snprintf(why, n, "the span's resource has neither process.pid nor service.name");
	return rc;
}

/* Receiver thread: queue a job for the worker. */
static int span_submit(void *ctx, const struct agent_span_job *job)
{
	struct agent_dataplane *d = ctx;
	pthread_mutex_lock(&d->lock);
	bool full = d->n_jobq >= AGENT_DATAPLANE_SPAN_QUEUE;
	if (!full)
		d->jobq[d->n_jobq++] = *job;
	pthread_mutex_unlock(&d->lock);
	if (full)
		return -EAGAIN;
	dp_kick(d);
	return 0;
}

/* Loop thread (check hook): the address can be bound, or is the running receiver's. */
int dp_spans_check_listen(struct agent_dataplane *d, const char *listen, struct pf_error *err)
{
	pthread_mutex_lock(&d->lock);
	bool ours = d->listening[0] && listen && !strcmp(d->listening, listen);
	pthread_mutex_unlock(&d->lock);
	struct agent_listen_addr l;
	if (ours || !listen || agent_listen_addr_parse(listen, &l, NULL) < 0)
		return 0; /* the config parser checked the syntax */
	int rc = agent_listen_addr_probe(&l);
	if (rc < 0)
		return pf_error_set(err, rc, "profiling.triggers.slow_span.listen",
				    "cannot listen on %s: %s", listen, strerror(-rc));
	return 0;
}

void dp_spans_health(struct agent_dataplane *d)
{
	char status[STATUS_LEN];
	if (!d->spans && !d->spans_err[0]) {
		agent_health_unregister(d->health, SPANS_COMPONENT);
		return;
	}
	agent_health_register(d->health, SPANS_COMPONENT);
	if (!d->spans) {
		agent_health_set(d->health, SPANS_COMPONENT, false, "not receiving spans",
				 d->spans_err);
		return;
	}
	struct agent_span_counters c;
	agent_span_receiver_counters(d->spans, &c);
	pthread_mutex_lock(&d->lock);
	struct agent_dataplane_span_metrics m = d->span_m;
	pthread_mutex_unlock(&d->lock);
	snprintf(status, sizeof(status),
		 "OTLP/HTTP traces on %s/v1/traces; spans %" PRIu64 ", profiles %" PRIu64
		 " slow + %" PRIu64 " error, empty %" PRIu64 ", rejected %" PRIu64,
		 d->listening, c.spans, m.profiles[0], m.profiles[1], m.empty,
		 c.rejected_unknown + c.rejected_old + c.rejected_rate + c.rejected_queue);
	agent_health_set(d->health, SPANS_COMPONENT, true, status, NULL);
}

void dp_spans_stop(struct agent_dataplane *d)
{
	agent_span_receiver_free(d->spans); /* joins its thread: no hook runs after this */
	d->spans = NULL;
	pthread_mutex_lock(&d->lock);
	d->listening[0] = '\0';
	d->n_procs = 0;
	d->n_jobq = 0;
	pthread_mutex_unlock(&d->lock);
	d->n_work = 0;
}

/* Starts, reconfigures or stops the receiver and the sampler's ring for cfg. */
void dp_spans_apply(struct agent_dataplane *d, const struct pf_profcfg *cfg)
{
	bool wanted = cfg->enabled && (cfg->slow_span.enabled || cfg->error_span.enabled);
	bool on = wanted && d->sampler;
	struct agent_span_rules rules = {.slow_enabled = cfg->slow_span.enabled,
					 .threshold_ms = cfg->slow_span.threshold_ms,
					 .slow_max_per_minute = cfg->slow_span.max_per_minute,
					 .error_enabled = cfg->error_span.enabled,
					 .error_max_per_minute = cfg->error_span.max_per_minute,
					 .lookback_seconds = cfg->slow_span.lookback_seconds};
	struct pf_error err = {0};
	if (!on) {
		if (d->spans)
			pf_log_info("dataplane: span triggers off");
		dp_spans_stop(d);
		if (wanted) /* the spans would have no samples to be cut from */
			snprintf(d->spans_err, sizeof(d->spans_err),
				 "slow_span/error_span need the eBPF sampler, which is not running "
				 "(see the sampler component)");
		else
			d->spans_err[0] = '\0';
		if (d->sampler)
			pf_sampler_set_ring(d->sampler, 0, 0, &err);
		dp_spans_health(d);
		return;
	}
	size_t ring_bytes = (size_t)cfg->limits.max_memory_mb * 1024 * 1024 / 4;
	if (pf_sampler_set_ring(d->sampler, cfg->slow_span.lookback_seconds, ring_bytes, &err) < 0)
		pf_log_error("dataplane: sample ring: %s", err.msg);
	/* wall and off_cpu span profiles need the waits of the profiled processes in the ring */
	else if (pf_sampler_ring_off_cpu(d->sampler, cfg->slow_span.profile_type != PF_PROF_CPU,
					 &err) < 0)
		pf_log_error("dataplane: sample ring: off-CPU waits: %s", err.msg);
	pthread_mutex_lock(&d->lock);
	d->lookback_seconds = cfg->slow_span.lookback_seconds;
	pthread_mutex_unlock(&d->lock);
	if (!d->procs &&
	    (!(d->procs = calloc(AGENT_DATAPLANE_SPAN_PROCS, sizeof(*d->procs))) ||
	     !(d->procs_work = calloc(AGENT_DATAPLANE_SPAN_PROCS, sizeof(*d->procs_work))))) {
		free(d->procs);
		d->procs = NULL;
		snprintf(d->spans_err, sizeof(d->spans_err), "out of memory");
		dp_spans_health(d);
		return;
	}
	if (d->spans && !strcmp(d->listening, cfg->slow_span.listen)) {
		agent_span_receiver_set_rules(d->spans, &rules);
		dp_spans_health(d);
		return;
	}
	dp_spans_stop(d);
	struct agent_span_hooks hooks = {.resolve = span_resolve, .submit = span_submit, .ctx = d};
	d->spans = agent_span_receiver_new(cfg->slow_span.listen, true, &rules, &hooks, &err);
	if (!d->spans) {
		pf_log_error("dataplane: span receiver: %s", err.msg);
		snprintf(d->spans_err, sizeof(d->spans_err), "%s", err.msg);
	} else {
		d->spans_err[0] = '\0';
		pthread_mutex_lock(&d->lock);
		snprintf(d->listening, sizeof(d->listening), "%s", cfg->slow_span.listen);
		pthread_mutex_unlock(&d->lock);
	}
	dp_spans_health(d);
}

/* Links every sample to the span and names the trigger on every process. */
static void span_tag(struct pf_prof_window *w, const struct agent_span_job *j)
{
	dp_tag_processes(w, "profleet.trigger",
			 j->trigger == AGENT_SPAN_SLOW ? "slow_span" : "error_span");
	for (size_t i = 0; i < w->n_processes; i++) {
		const struct pf_prof_process *p = &w->processes[i];
		for (size_t k = 0; k < p->n_samples; k++) {
			struct pf_prof_sample *x = (struct pf_prof_sample *)&p->samples[k];
			memcpy(x->trace_id, j->span.trace_id, sizeof(x->trace_id));
			memcpy(x->span_id, j->span.span_id, sizeof(x->span_id));
		}
	}
}

static void span_profile(struct agent_dataplane *d, const struct agent_span_job *j)
{
	struct pf_error err = {0};
	struct pf_prof_window *w = NULL;
	char tid[33];
	pf_hex_encode(j->span.trace_id, 16, tid);
	int rc = pf_sampler_cut(d->sampler, j->pid, j->span.tid, j->span.start_unix_ns,
				j->span.end_unix_ns, d->cfg->slow_span.profile_type, &w, &err);
	if (rc < 0) {
		pf_log_warn("dataplane: span of trace %s: %s", tid, err.msg);
		pthread_mutex_lock(&d->lock);
		d->span_m.failed++;
		pthread_mutex_unlock(&d->lock);
		return;
	}
	uint64_t samples = pf_prof_window_samples(w);
	if (!samples) {
		pf_log_info("dataplane: %s span of trace %s (pid %" PRIu32 ", %" PRIu64
			    " ms): no samples in its time range",
			    j->trigger == AGENT_SPAN_SLOW ? "slow" : "error", tid, j->pid,
			    (j->span.end_unix_ns - j->span.start_unix_ns) / 1000000u);
		pf_prof_window_free(w);
		pthread_mutex_lock(&d->lock);
		d->span_m.empty++;
		pthread_mutex_unlock(&d->lock);
		return;
	}
	span_tag(w, j);
	dp_export_window_src(d, w, NULL, AGENT_SRC_SLOW_SPAN); /* error spans count here too */
	uint64_t latency = now_unix_ns() - j->received_unix_ns;
	pf_log_info("dataplane: %s span of trace %s (pid %" PRIu32 ", %" PRIu64
		    " ms): profile of %" PRIu64 " samples, %" PRIu64 " ms after the span arrived",
		    j->trigger == AGENT_SPAN_SLOW ? "slow" : "error", tid, j->pid,
		    (j->span.end_unix_ns - j->span.start_unix_ns) / 1000000u, samples,
		    latency / 1000000u);
	pthread_mutex_lock(&d->lock);
	d->span_m.profiles[j->trigger]++;
	d->span_m.last_latency_ns = latency;
	if (latency > d->span_m.max_latency_ns)
		d->span_m.max_latency_ns = latency;
	pthread_mutex_unlock(&d->lock);
	dp_spans_health(d); /* the counts in its status (at most max_per_minute changes a minute) */
}

/* Worker loop: refreshes the process snapshot, cuts the profiles whose samples are in. Returns
 * the poll timeout it needs (ms), or -1 when nothing waits. */
int dp_spans_run(struct agent_dataplane *d)
{
	if (!d->spans || !d->sampler)
		return -1;
	uint64_t ms = pf_mono_ms();
	if (!d->procs_ms || ms - d->procs_ms >= SPAN_PROCS_MS) {
		d->procs_ms = ms;
		size_t n =
		    pf_sampler_ring_procs(d->sampler, d->procs_work, AGENT_DATAPLANE_SPAN_PROCS);
		pthread_mutex_lock(&d->lock);
		struct pf_sampler_ring_proc *t = d->procs;
		d->procs = d->procs_work;
		d->procs_work = t;
		d->n_procs = n;
		pthread_mutex_unlock(&d->lock);
	}
	/* no window closes between captures: exited processes would pile up */
	if (d->cfg && d->cfg->mode == PF_MODE_TRIGGERED && !d->capturing &&
	    (!d->reap_ms || ms - d->reap_ms >= SPAN_REAP_MS)) {
		d->reap_ms = ms;
		pf_sampler_reap(d->sampler);
	}
	pthread_mutex_lock(&d->lock);
	while (d->n_jobq && d->n_work < AGENT_DATAPLANE_SPAN_QUEUE) {
		d->work[d->n_work++] = d->jobq[0];
		memmove(d->jobq, d->jobq + 1, (d->n_jobq - 1) * sizeof(d->jobq[0]));
		d->n_jobq--;
	}
	pthread_mutex_unlock(&d->lock);
	if (!d->n_work)
		return -1;
	pf_sampler_poll(d->sampler, 0); /* drain: the samples up to now are in the ring */
	uint64_t drained = pf_sampler_drained_unix_ns(d->sampler), now = now_unix_ns();
	size_t kept = 0;
	for (size_t i = 0; i < d->n_work; i++) {
		const struct agent_span_job *j = &d->work[i];
		uint64_t base = j->span.end_unix_ns > j->received_unix_ns ? j->span.end_unix_ns
									  : j->received_unix_ns;
		if (drained < j->span.end_unix_ns + SPAN_SETTLE_NS &&
		    now < base + SPAN_MAX_WAIT_NS) {
			d->work[kept++] = *j;
			continue;
		}
		span_profile(d, j);
	}
	d->n_work = kept;
	return kept ? 10 : -1;
}
