/* dataplane.c — see dataplane.h. */
#include "dataplane.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "capture.h"
#include "capture_run.h"
#include "exporter.h"
#include "guard.h"
#include "health.h"
#include "high_cpu.h"
#include "metrics.h"
#include "otlp_profiles.h"
#include "pf/buf.h"
#include "pf/clock.h"
#include "pf/log.h"
#include "pf/profcfg.h"
#include "pf/uuid.h"
#include "ratelimit.h"
#include "sample_ring.h"
#include "sampler_bpf.h"
#include "sampler_pprof.h"
#include "span_receiver.h"
#include "symbolize.h"

#define NAME_LEN 48
#define STATUS_LEN 1024
#define PPROF_MIN_WAIT_MS 20

struct dp_exporter {
	struct agent_exporter *x;
	char name[NAME_LEN]; /* health component "exporter/<i>:<type>" */
};

/* A pprof target of the applied config, as the data plane reports it. */
struct dp_target {
	char name[NAME_LEN];  /* health component "pprof/<i>" */
	bool registered;      /* the health registry had room for it */
	char export_err[800]; /* its last window could not be encoded, "" when it could */
};

/* The worker's tick: the overhead guard, exporter health, the metrics snapshot; every second
 * while the high_cpu trigger (which reads /proc on it) runs. A tick due within half a tick
 * runs with a window's close, so the two share a wake-up. */
#define TICK_MS AGENT_DATAPLANE_POLL_MS
#define TICK_HIGH_CPU_MS 1000
/* A window's close waits at most this long (and at most half the window) for a source-line
 * table a child is building, polling every CLOSE_HOLD_POLL_MS: see hold_close(). */
#define CLOSE_HOLD_MS 1000
#define CLOSE_HOLD_POLL_MS 20
#define HIGH_CPU_NAME "trigger/high_cpu"
#define GUARD_NAME "guard"

struct agent_dataplane {
	struct agent_health *health;
	void (*wake)(void *ctx);
	void *wake_ctx;
	bool no_sampler, include_self, frame_pointers_only;
	const struct pf_procinfo_source *attr_source;
	char *spill_dir; /* NULL: exporters keep their queue in memory only */
	char *unwind_dir; /* NULL: no unwind-table cache */
	char *lines_dir;  /* NULL: a private line-table directory */
	char *agent_token; /* NULL: exporters with auth: agent_token fail to start */
	char *agent_uid;
	int efd;	 /* eventfd: wakes the worker (config, trigger, stop, export done) */
	pthread_t thread;
	bool thread_started;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* under lock: posted by the loop thread */
	struct pf_profcfg *pending; /* private copy, owned */
	bool stop_requested;
	bool flushed;	    /* the worker finished its final flush */
	unsigned in_flight; /* submits accepted whose done callback has not run */
	bool export_failing; /* the last done callback had an error */
	unsigned n_reapers; /* threads freeing replaced exporters */
	struct agent_dataplane_counters counters;
	struct agent_ratelimit *rl; /* limits.max_profiles_per_minute (thread-safe) */
	char note[320];		    /* the effective config's runtime note, "" = none */
	uint64_t note_gen;

	atomic_uint trigger_toggles; /* from the signal handler */

	/* worker thread only */
	struct pf_sampler *sampler;
	struct pf_profcfg *cfg; /* applied config (private copy) */
	struct dp_exporter ex[PF_PROFCFG_MAX_EXPORTERS];
	size_t n_ex;
	uint64_t next_close_ms; /* CLOCK_MONOTONIC deadline of the open window, 0 = none */
	bool close_held;	/* its close waits for a line table (hold_close) */
	bool capturing;		/* triggered mode: a capture runs */
	bool running;		/* the sampler was running at the last check */
	char sampler_err[768];	/* the last config the sampler refused, "" when none */
	struct pf_buf out;

	/* overhead guard and high_cpu trigger, evaluated every TICK_MS */
	uint64_t next_tick_ms;
	struct agent_guard *guard;
	struct agent_guard_state guard_st; /* after the last tick or apply */
	uint32_t sampler_hz;		   /* frequency given to the sampler, 0 = none */
	struct agent_high_cpu *high_cpu;   /* NULL while the trigger is off */
	uint32_t *pids;			   /* scratch: AGENT_HIGH_CPU_MAX_PROCS profiled pids */

	/* pprof sources (worker thread only): their targets are those of cfg (in order) while
	 * pprof_ok, none while profiling is disabled */
	struct pf_pprof_sources *pprof;
	bool pprof_ok;
	struct dp_target pt[PF_PROFCFG_MAX_TARGETS];
	size_t n_pt;
	char host_name[256];

	/* captures: the engine (borrowed; thread-safe) and the runner (worker thread only) */
	struct agent_captures *captures;
	struct agent_capture_runner *capture_run;
	uint64_t capture_gen; /* summary generation last reported in health */

	/* span triggers (slow_span, error_span): the receiver (created and freed by the worker;
	 * its thread calls span_resolve/span_submit), the job queue it fills and the process
	 * snapshot it resolves spans against (both under lock), the jobs waiting for their
	 * samples (worker only) */
	struct agent_span_receiver *spans;
	char listening[128]; /* the running receiver's address, "" when none (written by the
			      * worker under lock: the check hook reads it) */
	char spans_err[800]; /* why the receiver is not running, "" when it is or is off */
	struct agent_span_job jobq[AGENT_DATAPLANE_SPAN_QUEUE];
	size_t n_jobq;
	struct pf_sampler_ring_proc *procs, *procs_work;
	size_t n_procs;
	uint64_t procs_ms, reap_ms;
	uint32_t lookback_seconds;
	struct agent_span_job work[AGENT_DATAPLANE_SPAN_QUEUE];
	size_t n_work;
	struct agent_dataplane_span_metrics span_m; /* under lock */

	/* metrics snapshot (opts.metrics): the worker fills snap_work, then copies it into snap
	 * under lock; NULL without opts.metrics */
	struct agent_dataplane_metrics *snap;	   /* under lock */
	struct agent_dataplane_metrics *snap_work; /* worker thread only */
};

/* ---- small helpers ------------------------------------------------------------------------- */

static void kick(struct agent_dataplane *d)
{
	uint64_t one = 1;
	ssize_t n = write(d->efd, &one, sizeof(one)); /* async-signal-safe */
	(void)n;
}

/* A private copy of a config: the engine frees its own at the next swap. The YAML emit/parse
 * round trip gives an equal config (pf/profcfg.h). */
static struct pf_profcfg *cfg_clone(const struct pf_profcfg *cfg)
{
	struct pf_buf b;
	struct pf_profcfg *copy = NULL;
	struct pf_error err = {0};
	pf_buf_init(&b, PF_PROFCFG_MAX_DOC);
	if (pf_profcfg_emit_yaml(cfg, &b) == 0 &&
	    pf_profcfg_parse((const char *)b.data, b.len, &copy, &err) < 0) {
		pf_log_error("dataplane: cannot copy the config: %s", err.msg);
		copy = NULL;
	}
	pf_buf_release(&b);
	return copy;
}

static bool str_eq(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

static bool exporter_eq(const struct pf_exporter *a, const struct pf_exporter *b)
{
	if (a->type != b->type || a->auth != b->auth || !str_eq(a->endpoint, b->endpoint) ||
	    a->compression != b->compression || a->timeout_seconds != b->timeout_seconds ||
	    !str_eq(a->path, b->path) || a->max_bytes != b->max_bytes ||
	    a->n_headers != b->n_headers)
		return false;
	for (size_t i = 0; i < a->n_headers; i++)
		if (!str_eq(a->headers[i].key, b->headers[i].key) ||
		    !str_eq(a->headers[i].value, b->headers[i].value))
			return false;
	/* headers_from_file: the files are read at creation, like tls's. */
	if (a->n_headers_from_file != b->n_headers_from_file)
		return false;
	for (size_t i = 0; i < a->n_headers_from_file; i++)
		if (!str_eq(a->headers_from_file[i].key, b->headers_from_file[i].key) ||
		    !str_eq(a->headers_from_file[i].value, b->headers_from_file[i].value))
			return false;
	/* tls: any change re-creates the exporter (a rotated file under the same name needs a
	 * config change too; the files are read once, at creation). Not part of the spill
	 * directory's name, which is the back end only (exporter.h). */
	const struct pf_exporter_tls *ta = &a->tls, *tb = &b->tls;
	return ta->present == tb->present && str_eq(ta->ca_file, tb->ca_file) &&
	       str_eq(ta->cert_file, tb->cert_file) && str_eq(ta->key_file, tb->key_file) &&
	       ta->insecure_skip_verify == tb->insecure_skip_verify &&
	       str_eq(ta->server_name, tb->server_name);
}

/* ---- apply hook (loop thread) -------------------------------------------------------------- */

static int spans_check_listen(struct agent_dataplane *d, const char *listen,
			      struct pf_error *err);

static int hook_check(void *ctx, const struct pf_profcfg *cfg, struct pf_error *err)
{
	struct agent_dataplane *d = ctx;
	/* Frequency range and filter regexps are validated by pf_profcfg_parse. Exporters: build
	 * those that have no side effect at creation (file exporters clean their directory, and
	 * config.c's own hook checks the directory). */
	for (size_t i = 0; i < cfg->n_exporters; i++) {
		const struct pf_exporter *e = &cfg->exporters[i];
		if (e->type == PF_EXPORTER_FILE)
			continue;
		struct pf_error xe = {0};
		/* No spill dir: a check must not reload and resend spilled items. */
		struct agent_exporter_opts xo = {.agent_token = d->agent_token};
		struct agent_exporter *x = agent_exporter_new_opts(e, &xo, &xe);
		if (!x) {
			char key[320];
			snprintf(key, sizeof(key), "profiling.exporters[%zu]%s%s", i,
				 xe.path[0] ? "." : "", xe.path);
			const char *detail = xe.msg;
			size_t plen = strlen(xe.path);
			/* the exporter's message may start with its own short path */
			if (plen && strncmp(detail, xe.path, plen) == 0 && detail[plen] == ':')
				detail += plen + 2;
			/* pf_error_set puts "key: " in front itself. */
			return pf_error_set(err, xe.code ? xe.code : -EINVAL, key, "%s",
					    detail[0] ? detail : "cannot create the exporter");
		}
		agent_exporter_free(x);
	}
	/* span triggers: a new receiver address must be free (the one in use is ours) */
	if (cfg->enabled && (cfg->slow_span.enabled || cfg->error_span.enabled)) {
		int rc = spans_check_listen(d, cfg->slow_span.listen, err);
		if (rc < 0)
			return rc;
	}
	/* pprof targets: the sources check every URL (scheme, host, port) the way an update will */
	if (cfg->n_targets) {
		struct pf_pprof_sources *s =
		    pf_pprof_sources_new(cfg->targets, cfg->n_targets, NULL, err);
		if (!s)
			return err && err->code ? err->code : (errno ? -errno : -EINVAL);
		pf_pprof_sources_free(s);
	}
	return 0;
}

static void hook_commit(void *ctx, const struct pf_profcfg *cfg, const struct pf_profcfg *old)
{
	struct agent_dataplane *d = ctx;
	(void)old;
	if (d->captures)
		agent_captures_set_config(d->captures, cfg);
	struct pf_profcfg *copy = cfg_clone(cfg);
	if (!copy)
		return;
	pthread_mutex_lock(&d->lock);
	pf_profcfg_free(d->pending);
	d->pending = copy;
	pthread_mutex_unlock(&d->lock);
	kick(d);
}

void agent_dataplane_hook(struct agent_dataplane *d, struct agent_config_hook *out)
{
	*out = (struct agent_config_hook){
	    .name = "dataplane", .check = hook_check, .commit = hook_commit, .ctx = d};
}

/* ---- exporters (worker thread) ------------------------------------------------------------- */

static void export_done(void *user, int rc)
{
	struct agent_dataplane *d = user;
	pthread_mutex_lock(&d->lock);
	if (d->in_flight)
		d->in_flight--;
	/* a failure, or the first success after one, refreshes the exporters' health now;
	 * other successes wait for the tick (no wake-up per export) */
	bool news = rc != 0 || d->export_failing;
	d->export_failing = rc != 0;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	if (news)
		kick(d);
}

struct reaper {
	struct agent_dataplane *d;
	struct agent_exporter *x;
};

static void *reaper_main(void *arg)
{
	struct reaper *r = arg;
	struct agent_dataplane *d = r->d;
	agent_exporter_free(r->x); /* waits for its export in flight (bounded by its timeout) */
	free(r);
	pthread_mutex_lock(&d->lock);
	d->n_reapers--;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

/* A replaced exporter finishes its export in flight on a thread of its own, so that a slow
 * endpoint does not stall the sampler's ring buffers. */
static void retire_exporter(struct agent_dataplane *d, struct agent_exporter *x)
{
	struct reaper *r = malloc(sizeof(*r));
	pthread_t t;
	pthread_attr_t attr;
	if (r) {
		*r = (struct reaper){.d = d, .x = x};
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_mutex_lock(&d->lock);
		d->n_reapers++;
		pthread_mutex_unlock(&d->lock);
		int rc = pthread_create(&t, &attr, reaper_main, r);
		pthread_attr_destroy(&attr);
		if (rc == 0)
			return;
		pthread_mutex_lock(&d->lock);
		d->n_reapers--;
		pthread_mutex_unlock(&d->lock);
		free(r);
	}
	agent_exporter_free(x);
}

static void exporter_health(struct agent_dataplane *d, struct dp_exporter *e)
{
	struct agent_exporter_status st;
	char status[160];
	agent_exporter_status(e->x, &st);
	if (st.dropped)
		snprintf(status, sizeof(status), "%s; %" PRIu64 " dropped", st.status, st.dropped);
	else
		snprintf(status, sizeof(status), "%s", st.status);
	agent_health_set(d->health, e->name, st.healthy, status, st.last_error);
}

static void exporters_health(struct agent_dataplane *d)
{
	for (size_t i = 0; i < d->n_ex; i++)
		if (d->ex[i].x)
			exporter_health(d, &d->ex[i]);
}

static struct agent_exporter *exporter_create(struct agent_dataplane *d,
					      const struct pf_profcfg *cfg, size_t i,
					      struct pf_error *err)
{
	struct agent_exporter_opts xo = {.queue_bytes = cfg->limits.queue_bytes,
					 .spill_dir = d->spill_dir,
					 .agent_token = d->agent_token};
	return agent_exporter_new_opts(&cfg->exporters[i], &xo, err);
}

static void exporter_name(char name[NAME_LEN], size_t i, enum pf_exporter_type t)
{
	snprintf(name, NAME_LEN, "exporter/%zu:%s", i, pf_exporter_type_name(t));
}

/* Keeps exporters whose settings did not change, re-creates the others. */
static void apply_exporters(struct agent_dataplane *d, const struct pf_profcfg *old,
			    const struct pf_profcfg *cfg)
{
	struct dp_exporter next[PF_PROFCFG_MAX_EXPORTERS];
	size_t n = pf_min(cfg->n_exporters, (size_t)PF_PROFCFG_MAX_EXPORTERS);
	memset(next, 0, sizeof(next));
	for (size_t i = 0; i < n; i++) {
		const struct pf_exporter *e = &cfg->exporters[i];
		exporter_name(next[i].name, i, e->type);
		if (old && i < d->n_ex && i < old->n_exporters && d->ex[i].x &&
		    exporter_eq(&old->exporters[i], e)) {
			next[i].x = d->ex[i].x; /* unchanged: keep it */
			d->ex[i].x = NULL;
		}
	}
	/* retire what is left of the old set, drop its health components */
	for (size_t i = 0; i < d->n_ex; i++) {
		bool kept_name = false;
		for (size_t j = 0; j < n; j++)
			kept_name |= strcmp(next[j].name, d->ex[i].name) == 0;
		if (d->ex[i].x) {
			pf_log_info("dataplane: %s replaced", d->ex[i].name);
			retire_exporter(d, d->ex[i].x);
		}
		if (!kept_name)
			agent_health_unregister(d->health, d->ex[i].name);
	}
	for (size_t i = 0; i < n; i++) {
		agent_health_register(d->health, next[i].name);
		if (next[i].x)
			continue;
		struct pf_error err = {0};
		next[i].x = exporter_create(d, cfg, i, &err);
		if (!next[i].x) {
			pf_log_error("dataplane: %s: %s", next[i].name, err.msg);
			agent_health_set(d->health, next[i].name, false, "cannot start", err.msg);
		} else {
			pf_log_info("dataplane: %s ready", next[i].name);
		}
	}
	memcpy(d->ex, next, sizeof(next));
	d->n_ex = n;
	exporters_health(d);
}

static void free_exporters(struct agent_dataplane *d, bool wait)
{
	for (size_t i = 0; i < d->n_ex; i++) {
		if (d->ex[i].x) {
			if (wait)
				agent_exporter_free(d->ex[i].x);
			d->ex[i].x = NULL;
		}
	}
	d->n_ex = 0;
}

/* ---- windows (worker thread) --------------------------------------------------------------- */

static bool wants_window(struct agent_exporter *x)
{
	return agent_exporter_wants_window(x);
}

/* Exporters that take the window itself (pyroscope: pprof per process). */
static void submit_window_all(struct agent_dataplane *d, const struct pf_prof_window *w)
{
	for (size_t i = 0; i < d->n_ex; i++) {
		if (!d->ex[i].x || !wants_window(d->ex[i].x))
			continue;
		size_t n = 0;
		int rc = agent_exporter_submit_window(d->ex[i].x, w, NULL, NULL, &n);
		pthread_mutex_lock(&d->lock);
		d->counters.exports += n;
		if (rc < 0)
			d->counters.dropped++;
		pthread_mutex_unlock(&d->lock);
		if (rc < 0)
			pf_log_warn("dataplane: %s refused the window: %s", d->ex[i].name,
				    strerror(-rc));
	}
}

static void submit_all(struct agent_dataplane *d, const uint8_t *data, size_t len,
		       const uint8_t id[16])
{
	for (size_t i = 0; i < d->n_ex; i++) {
		if (!d->ex[i].x || wants_window(d->ex[i].x))
			continue;
		pthread_mutex_lock(&d->lock);
		d->in_flight++;
		pthread_mutex_unlock(&d->lock);
		int rc = agent_exporter_submit(d->ex[i].x, data, len, id, export_done, d);
		pthread_mutex_lock(&d->lock);
		if (rc < 0) {
			d->in_flight--;
			d->counters.dropped++;
		} else {
			d->counters.exports++;
		}
		pthread_mutex_unlock(&d->lock);
		if (rc < 0)
			pf_log_warn("dataplane: %s refused the export: %s", d->ex[i].name,
				    strerror(-rc));
	}
}

/* Adds key=value to every process's resource attributes (allocated in the window's arena,
 * which this thread owns; the strings must outlive the window). */
static void tag_processes(struct pf_prof_window *w, const char *key, const char *value)
{
	for (size_t i = 0; i < w->n_processes; i++) {
		struct pf_prof_process *p = (struct pf_prof_process *)&w->processes[i];
		struct pf_prof_attr *a = pf_prof_alloc(w, (p->n_attrs + 1) * sizeof(*a));
		if (!a)
			return;
		if (p->n_attrs)
			memcpy(a, p->attrs, p->n_attrs * sizeof(*a));
		a[p->n_attrs].key = key;
		a[p->n_attrs].value = value;
		p->attrs = a;
		p->n_attrs++;
	}
}

/* Adds profleet.agent.uid to every process's resource attributes. */
static void tag_agent(struct agent_dataplane *d, struct pf_prof_window *w)
{
	if (d->agent_uid)
		tag_processes(w, "profleet.agent.uid", d->agent_uid);
}

/* Encodes and submits a window (taken: freed here). t is the pprof target it came from, NULL
 * for the eBPF sampler's windows; an encoding failure is reported on that component. A window
 * with samples is one profile for limits.max_profiles_per_minute, whatever the number of
 * exporters; over the limit it is dropped and counted under src in the rate limit. */
static void export_window_src(struct agent_dataplane *d, struct pf_prof_window *w,
			      struct dp_target *t, enum agent_profile_source src)
{
	uint8_t id[16];
	struct pf_error err = {0};
	uint64_t samples = pf_prof_window_samples(w);
	if (t)
		t->export_err[0] = '\0';
	if (samples && !agent_ratelimit_take(d->rl, src, pf_mono_ms())) {
		pf_log_debug("dataplane: %s profile of %" PRIu64 " samples over "
			     "limits.max_profiles_per_minute: dropped",
			     agent_profile_source_name(src), samples);
		pthread_mutex_lock(&d->lock);
		d->counters.rate_limited++;
		pthread_mutex_unlock(&d->lock);
		pf_prof_window_free(w);
		return;
	}
	tag_agent(d, w);

	size_t n_bytes_ex = 0;
	for (size_t i = 0; i < d->n_ex; i++)
		n_bytes_ex += d->ex[i].x && !wants_window(d->ex[i].x);
	if (samples)
		submit_window_all(d, w);
	if (!n_bytes_ex) { /* no exporter takes OTLP bytes: nothing to encode for */
		pf_prof_window_free(w);
		return;
	}
	pf_buf_reset(&d->out);
	int rc = pf_otlp_profiles_encode(w, &d->out, id, &err);
	if (rc == -ENODATA) {
		pf_log_debug("dataplane: window without samples, nothing to export");
	} else if (rc < 0) {
		pf_log_error("dataplane: %s: cannot encode the window: %s", t ? t->name : "sampler",
			     err.msg);
		pthread_mutex_lock(&d->lock);
		d->counters.encode_errors++;
		pthread_mutex_unlock(&d->lock);
		if (t)
			snprintf(t->export_err, sizeof(t->export_err), "cannot encode: %s",
				 err.msg);
		else
			agent_health_set(d->health, "sampler", false, "cannot encode windows",
					 err.msg);
	} else {
		pthread_mutex_lock(&d->lock);
		d->counters.profile_bytes += d->out.len;
		d->counters.last_profile_bytes = d->out.len;
		if (t)
			d->counters.pprof_windows++;
		else
			d->counters.windows++;
		pthread_mutex_unlock(&d->lock);
		pf_log_debug("dataplane: %s: window of %" PRIu64 " samples, %zu processes: "
			     "%zu bytes to %zu exporters",
			     t ? t->name : "sampler", samples, w->n_processes, d->out.len, d->n_ex);
		submit_all(d, d->out.data, d->out.len, id);
	}
	pf_prof_window_free(w);
}

/* A capture's profiles for the configured exporters (capture_run.h; already tagged). */
static void capture_submit_bytes(void *ctx, const uint8_t *data, size_t len, const uint8_t id[16])
{
	submit_all(ctx, data, len, id);
}

static void capture_submit_window(void *ctx, const struct pf_prof_window *w)
{
	submit_window_all(ctx, w);
}

static void capture_retire(void *ctx, struct agent_exporter *x)
{
	retire_exporter(ctx, x);
}

/* export_window_src() with the source told by t: a pprof target's, or the sampler's window. */
static void export_window(struct agent_dataplane *d, struct pf_prof_window *w, struct dp_target *t)
{
	export_window_src(d, w, t, t ? AGENT_SRC_PPROF : AGENT_SRC_WINDOW);
}

static void sampler_health(struct agent_dataplane *d);

/* Closes the open window (at end_unix_ns; 0: now) and exports it together with windows a
 * frequency change split off. */
static void close_and_export_at(struct agent_dataplane *d, uint64_t end_unix_ns)
{
	struct pf_error err = {0};
	struct pf_prof_window *w = pf_sampler_close_window_at(d->sampler, end_unix_ns, &err);
	if (!w) {
		pf_log_error("dataplane: cannot close the window: %s", err.msg);
		agent_health_set(d->health, "sampler", false, "cannot close windows", err.msg);
		return;
	}
	do {
		export_window(d, w, NULL);
	} while ((w = pf_sampler_next_window(d->sampler)));
	sampler_health(d);
}

static void close_and_export(struct agent_dataplane *d)
{
	close_and_export_at(d, 0);
}

/* True while the due close of the open window should wait: a child is building the
 * source-line table of a binary sampled lately (a window closed now would name its new
 * addresses without file and line), for at most CLOSE_HOLD_MS or half the window past the
 * window's end. The window still ends at its time (close_due_end). */
static bool hold_close(struct agent_dataplane *d, uint64_t now)
{
	uint64_t bound = pf_min((uint64_t)CLOSE_HOLD_MS, (uint64_t)d->cfg->duration_seconds * 500u);
	if (now >= d->next_close_ms + bound || !pf_sampler_lines_building(d->sampler))
		return false;
	if (!d->close_held)
		pf_log_debug("dataplane: window close held for a line table");
	d->close_held = true;
	return true;
}

/* The realtime end of a window whose close was held: its CLOCK_MONOTONIC deadline, in unix ns. */
static uint64_t close_due_end(const struct agent_dataplane *d, uint64_t now)
{
	uint64_t real = agent_now_unix_nano();
	uint64_t late = now > d->next_close_ms ? (now - d->next_close_ms) * 1000000u : 0;
	return real > late ? real - late : real;
}

/* ---- health (worker thread) ---------------------------------------------------------------- */

static void sampler_health(struct agent_dataplane *d)
{
	struct pf_sampler_stats st;
	char status[STATUS_LEN];
	struct pf_buf b;
	if (!d->sampler || pf_sampler_stats(d->sampler, &st) < 0)
		return;
	pf_buf_init(&b, STATUS_LEN);
	if (st.running)
		pf_buf_printf(&b, "running at %u Hz on %u CPUs", st.frequency_hz, st.n_cpus);
	else if (!d->cfg || !d->cfg->enabled)
		pf_buf_printf(&b, "disabled");
	else if (d->cfg->mode == PF_MODE_TRIGGERED)
		pf_buf_printf(&b, "idle: waiting for a trigger");
	else
		pf_buf_printf(&b, "stopped");
	if (d->guard_st.throttled)
		pf_buf_printf(&b, " (overhead guard: %u Hz configured)", d->guard_st.configured_hz);
	pf_buf_printf(&b,
		      "; samples %" PRIu64 ", lost %" PRIu64 " (kernel %" PRIu64 ", user %" PRIu64
		      "), filtered %" PRIu64 ", stack errors %" PRIu64 ", processes %" PRIu64,
		      st.samples, st.lost_kernel + st.lost_user, st.lost_kernel, st.lost_user,
		      st.filtered, st.stack_errors, st.processes);
	if (st.dwarf_unwind)
		pf_buf_printf(&b, "; user stacks by unwind tables (%" PRIu64 " tables, %" PRIu64
			      " rows of %" PRIu64 ")",
			      st.unwind_tables, st.unwind_rows, st.unwind_rows_cap);
	else
		pf_buf_printf(&b, "; user stacks by frame pointers only (%s)",
			      st.dwarf_unwind_off_reason ? st.dwarf_unwind_off_reason : "?");
	if (st.captures || st.capture_samples)
		pf_buf_printf(&b, "; captures %u%s, capture samples %" PRIu64, st.captures,
			      st.captures ? " sampling" : "", st.capture_samples);
	if (st.capture_hz)
		pf_buf_printf(&b, " at %u Hz", st.capture_hz);
	if (st.bpf_stats_enabled) {
		pf_buf_printf(&b, "; bpf run time %" PRIu64 " us (", st.bpf_run_time_ns / 1000);
		for (int i = 0; i < PF_SAMPLER_N_PROGS; i++)
			pf_buf_printf(&b, "%s%s %" PRIu64 " us/%" PRIu64 " runs", i ? ", " : "",
				      st.progs[i].name ? st.progs[i].name : "?",
				      st.progs[i].run_time_ns / 1000, st.progs[i].run_cnt);
		pf_buf_printf(&b, ")");
	}
	pthread_mutex_lock(&d->lock);
	uint64_t nwin = d->counters.windows, last = d->counters.last_profile_bytes,
		 total = d->counters.profile_bytes;
	pthread_mutex_unlock(&d->lock);
	if (nwin)
		pf_buf_printf(&b, "; profiles %" PRIu64 ", last %" PRIu64 " B, total %" PRIu64 " B",
			      nwin, last, total);
	if (d->guard_st.measured)
		pf_buf_printf(&b, "; agent overhead %.2f%% of one CPU (process%s, last %d s)",
			      d->guard_st.cpu_percent, st.bpf_stats_enabled ? " + BPF" : "",
			      AGENT_GUARD_WINDOW_S);
	snprintf(status, sizeof(status), "%s", b.data ? pf_buf_str(&b) : "");
	pf_buf_release(&b);
	char lasterr[128] = "";
	if (st.last_error)
		snprintf(lasterr, sizeof(lasterr), "last failure: %s", strerror(-st.last_error));
	/* a window/encode failure is repaired by the next good window; a refused config stays
	 * until one applies */
	if (d->sampler_err[0])
		agent_health_set(d->health, "sampler", false, status, d->sampler_err);
	else
		agent_health_set(d->health, "sampler", true, status, lasterr);

	snprintf(status, sizeof(status),
		 "frames resolved %" PRIu64 ", unresolved %" PRIu64 ", ELF files cached %" PRIu64
		 ", line tables open %" PRIu64 " (%" PRIu64 " KiB), built %" PRIu64
		 ", read from disk %" PRIu64 ", failed %" PRIu64
		 ", new addresses named without lines while their table was built %" PRIu64,
		 st.frames_resolved, st.frames_unresolved, st.elf_cached, st.line_tables,
		 (st.line_tables_bytes + 1023) >> 10, st.line_builds, st.line_cache_hits,
		 st.line_build_failed, st.line_deferred);
	agent_health_set(d->health, "symbolizer", true, status, NULL);
}

/* The "captures" component: counts, and unhealthy while the last capture failed for a reason of
 * the agent's own (export_failed, internal). */
static void captures_health(struct agent_dataplane *d)
{
	struct agent_captures_summary sum;
	if (!d->captures)
		return;
	agent_captures_summary(d->captures, &sum);
	if (sum.generation == d->capture_gen && d->capture_gen)
		return;
	d->capture_gen = sum.generation ? sum.generation : 1;
	char status[STATUS_LEN];
	snprintf(status, sizeof(status),
		 "%u in progress; done %" PRIu64 ", cancelled %" PRIu64 ", failed %" PRIu64
		 ", refused %" PRIu64,
		 sum.in_progress, sum.done, sum.cancelled, sum.failed, sum.refused);
	agent_health_set(d->health, "captures", sum.healthy, status, sum.last_error);
}

/* ---- pprof sources (worker thread) --------------------------------------------------------- */

/* The URL for a status line, without user:password@ should one be there. */
static void url_redacted(char *out, size_t cap, const char *url)
{
	const char *host = strstr(url, "://");
	host = host ? host + 3 : url;
	size_t auth_end = strcspn(host, "/?#");
	const char *at = memchr(host, '@', auth_end);
	if (at)
		snprintf(out, cap, "%.*s***%s", (int)(host - url), url, at);
	else
		snprintf(out, cap, "%s", url);
}

static void pprof_health(struct agent_dataplane *d)
{
	for (size_t i = 0; i < d->n_pt; i++) {
		struct dp_target *t = &d->pt[i];
		if (!t->registered)
			continue;
		if (!d->cfg || !d->cfg->enabled || i >= d->cfg->n_targets) {
			agent_health_set(d->health, t->name, true, "off (profiling disabled)",
					 NULL);
			continue;
		}
		if (!d->pprof || !d->pprof_ok) {
			agent_health_set(d->health, t->name, false, "not running",
					 d->pprof ? "the target list could not be applied"
						  : "pprof sources unavailable");
			continue;
		}
		const struct pf_pprof_target *c = &d->cfg->targets[i];
		struct pf_pprof_health h;
		if (pf_pprof_sources_health(d->pprof, i, &h) < 0)
			continue;
		char url[384], every[32], status[STATUS_LEN];
		url_redacted(url, sizeof(url), c->url);
		if (c->interval_seconds)
			snprintf(every, sizeof(every), "every %" PRIu32 " s", c->interval_seconds);
		else
			snprintf(every, sizeof(every), "on trigger");
		int n = snprintf(
		    status, sizeof(status), "%s %s, %s; scrapes ok %" PRIu64 ", failed %" PRIu64,
		    pf_pprof_type_name(c->type), url, every, h.scrapes_ok, h.scrapes_failed);
		if (h.scrapes_ok && n > 0 && (size_t)n < sizeof(status))
			snprintf(status + n, sizeof(status) - (size_t)n,
				 "; last %zu bytes, %" PRIu64 " samples", h.last_bytes,
				 h.last_samples);
		const char *last_error = h.last_error[0] ? h.last_error : t->export_err;
		agent_health_set(d->health, t->name, h.healthy && !t->export_err[0], status,
				 last_error);
	}
}

static void pprof_start(struct agent_dataplane *d)
{
	struct pf_error err = {0};
	struct pf_pprof_options po = {.host_name = d->host_name[0] ? d->host_name : NULL};
	d->pprof = pf_pprof_sources_new(NULL, 0, &po, &err);
	if (!d->pprof)
		pf_log_error("dataplane: pprof sources unavailable: %s",
			     err.msg[0] ? err.msg : strerror(errno));
	d->pprof_ok = d->pprof != NULL;
}

/* Exports every window the scrapes produced. */
static void pprof_drain(struct agent_dataplane *d)
{
	struct pf_pprof_result *r;
	while (d->pprof && (r = pf_pprof_sources_pop(d->pprof))) {
		struct pf_prof_window *w = r->window;
		r->window = NULL;
		/* a result of a target removed since is not produced (update drops them), so
		 * r->target is an index of the applied config */
		struct dp_target *t = r->target < d->n_pt ? &d->pt[r->target] : NULL;
		pf_log_debug("dataplane: pprof %s %s: %zu bytes", pf_pprof_type_name(r->type),
			     r->url, r->bytes);
		if (t)
			export_window(d, w, t);
		else
			pf_prof_window_free(w);
		pf_pprof_result_free(r);
	}
}

/* Swaps in cfg's targets (none while profiling is disabled) and their health components. */
static void pprof_apply(struct agent_dataplane *d, const struct pf_profcfg *cfg)
{
	size_t n = pf_min(cfg->n_targets, (size_t)PF_PROFCFG_MAX_TARGETS);
	pprof_drain(d); /* what was scraped under the old list, with its target indexes */
	if (d->pprof) {
		struct pf_error err = {0};
		int rc =
		    pf_pprof_sources_update(d->pprof, cfg->targets, cfg->enabled ? n : 0, &err);
		d->pprof_ok = rc == 0;
		if (rc < 0) /* the check hook validated them: out of memory */
			pf_log_error("dataplane: pprof targets not applied: %s", err.msg);
		else if (n)
			pf_log_info("dataplane: %zu pprof target%s%s", n, n == 1 ? "" : "s",
				    cfg->enabled ? "" : " (off: profiling disabled)");
	}
	for (size_t i = n; i < d->n_pt; i++)
		if (d->pt[i].registered)
			agent_health_unregister(d->health, d->pt[i].name);
	bool full = false;
	for (size_t i = 0; i < n; i++) {
		struct dp_target *t = &d->pt[i];
		if (i >= d->n_pt)
			*t = (struct dp_target){.registered = false};
		snprintf(t->name, sizeof(t->name), "pprof/%zu", i);
		t->export_err[0] = '\0';
		if (!t->registered) {
			t->registered = agent_health_register(d->health, t->name) == 0;
			full |= !t->registered;
		}
	}
	if (full)
		pf_log_warn("dataplane: no room in the health registry for every pprof target");
	d->n_pt = n;
}

/* Scrapes every target with interval_seconds 0 now (a triggered capture starts); cpu
 * profiles run for the capture's duration. */
static void pprof_trigger(struct agent_dataplane *d)
{
	if (!d->pprof || !d->pprof_ok || !d->cfg || !d->cfg->enabled)
		return;
	for (size_t i = 0; i < d->n_pt && i < d->cfg->n_targets; i++) {
		if (d->cfg->targets[i].interval_seconds)
			continue;
		int rc = pf_pprof_sources_trigger(d->pprof, (long)i, d->cfg->duration_seconds);
		if (rc < 0)
			pf_log_warn("dataplane: %s: trigger: %s", d->pt[i].name,
				    rc == -EBUSY ? "a scrape is already running" : strerror(-rc));
		else
			pf_log_info("dataplane: %s: triggered scrape started", d->pt[i].name);
	}
}

/* ---- config and triggers (worker thread) --------------------------------------------------- */

static bool sampler_running(struct agent_dataplane *d)
{
	struct pf_sampler_stats st;
	return d->sampler && pf_sampler_stats(d->sampler, &st) == 0 && st.running;
}

static void schedule_close(struct agent_dataplane *d, uint64_t from_ms)
{
	const struct pf_profcfg *c = d->cfg;
	d->close_held = false;
	if (!c || !c->enabled || !d->sampler)
		d->next_close_ms = 0;
	else if (c->mode == PF_MODE_CONTINUOUS)
		d->next_close_ms = from_ms + (uint64_t)c->duration_seconds * 1000u;
	else
		d->next_close_ms =
		    d->capturing ? from_ms + (uint64_t)c->duration_seconds * 1000u : 0;
}

/* ---- overhead guard, rate limit, high_cpu trigger (worker thread) -------------------------- */

static void guard_budget(const struct agent_dataplane *d, const struct pf_profcfg *cfg,
			 struct agent_guard_budget *b)
{
	*b = (struct agent_guard_budget){.max_cpu_percent = cfg->limits.max_cpu_percent,
					 .max_memory_mb = cfg->limits.max_memory_mb,
					 .frequency_hz = cfg->frequency_hz,
					 .fixed = !d->sampler};
#if defined(__SANITIZE_ADDRESS__)
	b->ignore_memory = true; /* ASan's shadow memory alone is over the default budget */
#endif
}

/* cfg with the frequency the guard allows: what the sampler is given. */
static struct pf_profcfg guarded(const struct agent_dataplane *d, const struct pf_profcfg *cfg)
{
	struct pf_profcfg c = *cfg; /* shallow: pf_sampler_set_config keeps no pointer */
	if (d->guard_st.hz)
		c.frequency_hz = d->guard_st.hz;
	return c;
}

/* The "guard" health component: the guard's line and the rate limit's. Unhealthy (the agent
 * "degraded: guard") while the guard runs the sampler below the configured frequency, or
 * the agent stays over its budget at the floor; last_error says why. */
static void guard_health(struct agent_dataplane *d)
{
	char line[256], status[STATUS_LEN];
	struct agent_ratelimit_stats rs;
	agent_guard_status(&d->guard_st, line, sizeof(line));
	agent_ratelimit_stats(d->rl, pf_mono_ms(), &rs);
	uint64_t refused = 0;
	for (int i = 0; i < AGENT_SRC_N; i++)
		refused += rs.refused[i];
	snprintf(status, sizeof(status),
		 "%s%s; profiles %u of %u in the last minute, %" PRIu64 " over the limit",
		 d->sampler ? "" : "no eBPF sampler to slow down: ", line, rs.used, rs.limit,
		 refused);
	bool at_floor = (d->guard_st.over_cpu || d->guard_st.over_memory) &&
			d->guard_st.hz <= AGENT_GUARD_FLOOR_HZ;
	char why[320] = "";
	if (at_floor)
		snprintf(why, sizeof(why), "over budget at the lowest sampling frequency (%s)",
			 line);
	else if (d->guard_st.throttled)
		snprintf(why, sizeof(why), "overhead guard: sampling.frequency_hz lowered (%s)",
			 line);
	agent_health_set(d->health, GUARD_NAME, !why[0], status, why[0] ? why : NULL);
}

/* The effective config's note follows the guard's frequency (not every new measurement). */
static void guard_note(struct agent_dataplane *d)
{
	char note[sizeof(d->note)] = "", line[256];
	if (d->guard_st.throttled) {
		agent_guard_status(&d->guard_st, line, sizeof(line));
		snprintf(note, sizeof(note),
			 "overhead guard: sampling.frequency_hz in effect: %u (%s)", d->guard_st.hz,
			 line);
	}
	pthread_mutex_lock(&d->lock);
	bool changed = strcmp(note, d->note) != 0;
	if (changed) {
		memcpy(d->note, note, sizeof(note));
		d->note_gen++;
		if (d->wake)
			d->wake(d->wake_ctx);
	}
	pthread_mutex_unlock(&d->lock);
}

uint64_t agent_dataplane_effective_note(void *dataplane, char *buf, size_t cap)
{
	struct agent_dataplane *d = dataplane;
	if (!d)
		return 0;
	pthread_mutex_lock(&d->lock);
	if (buf && cap)
		snprintf(buf, cap, "%s", d->note);
	uint64_t gen = d->note_gen;
	pthread_mutex_unlock(&d->lock);
	return gen;
}

/* Gives the sampler the guard's frequency when it changed. */
static void guard_apply(struct agent_dataplane *d)
{
	if (!d->sampler || !d->cfg || d->sampler_err[0] || d->guard_st.hz == d->sampler_hz)
		return;
	struct pf_error err = {0};
	struct pf_profcfg c = guarded(d, d->cfg);
	if (pf_sampler_set_config(d->sampler, &c, &err) < 0) {
		pf_log_error("dataplane: overhead guard: cannot set %u Hz: %s", c.frequency_hz,
			     err.msg);
		return;
	}
	char line[256];
	agent_guard_status(&d->guard_st, line, sizeof(line));
	pf_log_info("dataplane: overhead guard: sampling at %u Hz (%s)", c.frequency_hz, line);
	d->sampler_hz = c.frequency_hz;
	guard_note(d);
	sampler_health(d);
}

static void guard_tick(struct agent_dataplane *d, uint64_t now_ms)
{
	struct agent_metrics_process pr;
	uint64_t bpf_ns = 0;
	agent_metrics_process_read(&pr); /* fields stay 0 when unreadable */
	/* not the unwind table builder's children: a lower frequency would not make them
	 * cheaper; their own budget bounds them (unwinder.h) */
	if (d->sampler)
		pf_sampler_bpf_run_time(d->sampler, &bpf_ns);
	struct agent_guard_sample s = {.mono_ns = now_ms * 1000000ULL,
				       .cpu_ns = (uint64_t)(pr.cpu_seconds * 1e9),
				       .bpf_ns = bpf_ns,
				       .setup_ns = d->sampler ? pf_sampler_setup_cpu_ns(d->sampler) : 0,
				       .rss_bytes = pr.rss_bytes};
	agent_guard_update(d->guard, &s);
	agent_guard_state(d->guard, &d->guard_st);
	guard_apply(d);
	guard_health(d);
}

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

static void high_cpu_tick(struct agent_dataplane *d, uint64_t now_ms)
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
static void high_cpu_apply(struct agent_dataplane *d, const struct pf_profcfg *cfg)
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
static void spans_apply(struct agent_dataplane *d, const struct pf_profcfg *cfg);

static void apply_config(struct agent_dataplane *d, struct pf_profcfg *cfg)
{
	struct pf_profcfg *old = d->cfg;
	bool was_running = d->running;
	struct agent_guard_budget gb;
	guard_budget(d, cfg, &gb);
	if (agent_guard_set_budget(d->guard, &gb))
		pf_log_info(
		    "dataplane: overhead guard: budget cpu %.2f%%, memory %u MiB, from %u Hz",
		    gb.max_cpu_percent, gb.max_memory_mb, gb.frequency_hz);
	agent_guard_state(d->guard, &d->guard_st);
	if (agent_ratelimit_set_limit(d->rl, cfg->limits.max_profiles_per_minute) < 0)
		pf_log_error(
		    "dataplane: limits.max_profiles_per_minute not applied: out of memory");
	uint64_t window_open_ms = d->next_close_ms && old
				      ? d->next_close_ms - (uint64_t)old->duration_seconds * 1000u
				      : pf_mono_ms();

	if (d->sampler) {
		struct pf_error err = {0};
		if (old && old->mode == PF_MODE_TRIGGERED && cfg->mode != PF_MODE_TRIGGERED &&
		    d->capturing) {
			pf_sampler_trigger(d->sampler, false, &err);
			d->capturing = false;
		}
		struct pf_profcfg c = guarded(d, cfg);
		int rc = pf_sampler_set_config(d->sampler, &c, &err);
		if (rc < 0) {
			pf_log_error("dataplane: sampler refused the config: %s", err.msg);
			snprintf(d->sampler_err, sizeof(d->sampler_err), "%s", err.msg);
		} else {
			d->sampler_err[0] = '\0';
			d->sampler_hz = c.frequency_hz;
			pf_log_info("dataplane: sampler %s, mode %s, %u Hz%s, windows of %u s",
				    cfg->enabled ? "enabled" : "disabled",
				    pf_prof_mode_name(cfg->mode), c.frequency_hz,
				    d->guard_st.throttled ? " (overhead guard)" : "",
				    cfg->duration_seconds);
		}
	}
	apply_exporters(d, old, cfg);
	spans_apply(d, cfg);
	if (d->spill_dir) {
		/* spills of exporters that were removed or now send elsewhere (exporter.h) */
		struct agent_spill_sweep sw;
		agent_exporter_spill_sweep(d->spill_dir, cfg->exporters, cfg->n_exporters, &sw);
		d->counters.dropped += sw.items;
	}
	pprof_apply(d, cfg);
	d->cfg = cfg;
	pf_profcfg_free(old);
	pprof_health(d);
	high_cpu_apply(d, cfg);
	guard_note(d);
	guard_health(d);

	d->running = sampler_running(d);
	if (d->sampler && was_running && !d->running) {
		close_and_export(d); /* stopped: export what it sampled */
		d->next_close_ms = 0;
	} else if (!was_running && d->running) {
		schedule_close(d, pf_mono_ms());
	} else {
		/* running on: the open window keeps its start, with the new duration */
		schedule_close(d, window_open_ms);
	}
	sampler_health(d);
}

/* ---- span triggers (slow_span, error_span) ------------------------------------------------- */

#define SPAN_SETTLE_NS (20ull * 1000000ull)	  /* drained this long after a span's end */
#define SPAN_MAX_WAIT_NS (2000ull * 1000000ull) /* cut anyway this long after end/arrival */
#define SPAN_PROCS_MS 200			  /* process snapshot refresh */
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
	for (size_t i = 0; i < d->n_procs && rc < 0 && s->service_name[0] &&
			   !s->service_name_long;
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
			 s->pid, lookback, s->service_name[0] ? " and no sampled process has "
							      "service.name \"" : "",
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
	kick(d);
	return 0;
}

/* Loop thread (check hook): the address can be bound, or is the running receiver's. */
static int spans_check_listen(struct agent_dataplane *d, const char *listen,
			      struct pf_error *err)
{
	pthread_mutex_lock(&d->lock);
	bool ours = d->listening[0] && listen && !strcmp(d->listening, listen);
	pthread_mutex_unlock(&d->lock);
	struct agent_metrics_listen l;
	if (ours || !listen || agent_metrics_listen_parse(listen, &l, NULL) < 0)
		return 0; /* the config parser checked the syntax */
	int rc = agent_metrics_probe_bind(&l);
	if (rc < 0)
		return pf_error_set(err, rc, "profiling.triggers.slow_span.listen",
				    "cannot listen on %s: %s", listen, strerror(-rc));
	return 0;
}

static void spans_health(struct agent_dataplane *d)
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
		 d->listening, c.spans, m.profiles[0], m.profiles[1],
		 m.empty,
		 c.rejected_unknown + c.rejected_old + c.rejected_rate + c.rejected_queue);
	agent_health_set(d->health, SPANS_COMPONENT, true, status, NULL);
}

static void spans_stop(struct agent_dataplane *d)
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
static void spans_apply(struct agent_dataplane *d, const struct pf_profcfg *cfg)
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
		spans_stop(d);
		if (wanted) /* the spans would have no samples to be cut from */
			snprintf(d->spans_err, sizeof(d->spans_err),
				 "slow_span/error_span need the eBPF sampler, which is not running "
				 "(see the sampler component)");
		else
			d->spans_err[0] = '\0';
		if (d->sampler)
			pf_sampler_set_ring(d->sampler, 0, 0, &err);
		spans_health(d);
		return;
	}
	size_t ring_bytes = (size_t)cfg->limits.max_memory_mb * 1024 * 1024 / 4;
	if (pf_sampler_set_ring(d->sampler, cfg->slow_span.lookback_seconds, ring_bytes, &err) <
	    0)
		pf_log_error("dataplane: sample ring: %s", err.msg);
	pthread_mutex_lock(&d->lock);
	d->lookback_seconds = cfg->slow_span.lookback_seconds;
	pthread_mutex_unlock(&d->lock);
	if (!d->procs && (!(d->procs = calloc(AGENT_DATAPLANE_SPAN_PROCS, sizeof(*d->procs))) ||
			  !(d->procs_work =
				calloc(AGENT_DATAPLANE_SPAN_PROCS, sizeof(*d->procs_work))))) {
		free(d->procs);
		d->procs = NULL;
		snprintf(d->spans_err, sizeof(d->spans_err), "out of memory");
		spans_health(d);
		return;
	}
	if (d->spans && !strcmp(d->listening, cfg->slow_span.listen)) {
		agent_span_receiver_set_rules(d->spans, &rules);
		spans_health(d);
		return;
	}
	spans_stop(d);
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
	spans_health(d);
}

/* Links every sample to the span and names the trigger on every process. */
static void span_tag(struct pf_prof_window *w, const struct agent_span_job *j)
{
	tag_processes(w, "profleet.trigger",
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
				j->span.end_unix_ns, &w, &err);
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
	export_window_src(d, w, NULL, AGENT_SRC_SLOW_SPAN); /* error spans count here too */
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
	spans_health(d); /* the counts in its status (at most max_per_minute changes a minute) */
}

/* Worker loop: refreshes the process snapshot, cuts the profiles whose samples are in. Returns
 * the poll timeout it needs (ms), or -1 when nothing waits. */
static int spans_run(struct agent_dataplane *d)
{
	if (!d->spans || !d->sampler)
		return -1;
	uint64_t ms = pf_mono_ms();
	if (!d->procs_ms || ms - d->procs_ms >= SPAN_PROCS_MS) {
		d->procs_ms = ms;
		size_t n = pf_sampler_ring_procs(d->sampler, d->procs_work,
						 AGENT_DATAPLANE_SPAN_PROCS);
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
		if (drained < j->span.end_unix_ns + SPAN_SETTLE_NS && now < base + SPAN_MAX_WAIT_NS) {
			d->work[kept++] = *j;
			continue;
		}
		span_profile(d, j);
	}
	d->n_work = kept;
	return kept ? 10 : -1;
}

static void toggle_trigger(struct agent_dataplane *d)
{
	struct pf_error err = {0};
	if (!d->cfg || !d->cfg->enabled || d->cfg->mode != PF_MODE_TRIGGERED) {
		pf_log_info("dataplane: trigger ignored (mode %s%s)",
			    d->cfg ? pf_prof_mode_name(d->cfg->mode) : "?",
			    d->cfg && !d->cfg->enabled ? ", profiling disabled" : "");
		return;
	}
	if (!d->sampler) { /* no eBPF: every trigger asks the pprof targets only */
		pf_log_info("dataplane: trigger: no sampler, pprof targets only");
		pprof_trigger(d);
		return;
	}
	if (!d->capturing) {
		pprof_trigger(d);
		/* start the capture's window now (nothing was sampled while idle) */
		struct pf_prof_window *w = pf_sampler_close_window(d->sampler, &err);
		while (w) {
			export_window(d, w, NULL);
			w = pf_sampler_next_window(d->sampler);
		}
		if (pf_sampler_trigger(d->sampler, true, &err) < 0) {
			pf_log_error("dataplane: cannot start a capture: %s", err.msg);
			agent_health_set(d->health, "sampler", false, "capture failed", err.msg);
			return;
		}
		d->capturing = true;
		d->running = true;
		schedule_close(d, pf_mono_ms());
		pf_log_info("dataplane: triggered capture of %u s started",
			    d->cfg->duration_seconds);
	} else {
		pf_sampler_trigger(d->sampler, false, &err);
		d->capturing = false;
		d->running = false;
		close_and_export(d);
		d->next_close_ms = 0;
		pf_log_info("dataplane: triggered capture ended");
	}
	sampler_health(d);
}

/* ---- metrics snapshot (worker thread) ------------------------------------------------------ */

/* Takes the snapshot: on the worker's once-a-second tick, and after the final flush. */
static void metrics_refresh(struct agent_dataplane *d)
{
	struct agent_dataplane_metrics *m = d->snap_work;
	if (!m)
		return;
	uint64_t now = pf_mono_ms();
	memset(m, 0, sizeof(*m));
	m->refreshed_unix_ns = agent_now_unix_nano();

	if (d->sampler && pf_sampler_stats(d->sampler, &m->sampler) == 0) {
		m->has_sampler = true;
		for (int i = 0; i < PF_SAMPLER_N_PROGS; i++) {
			snprintf(m->progs[i].name, sizeof(m->progs[i].name), "%s",
				 m->sampler.progs[i].name ? m->sampler.progs[i].name : "?");
			m->progs[i].run_time_ns = m->sampler.progs[i].run_time_ns;
			m->progs[i].run_cnt = m->sampler.progs[i].run_cnt;
			m->sampler.progs[i].name = NULL; /* the sampler's memory: not copied out */
		}
	}
	/* the guard's measure (the sampler health's figure) */
	m->overhead_pct = d->guard_st.measured ? d->guard_st.cpu_percent : -1;
	m->guard = d->guard_st;
	agent_ratelimit_stats(d->rl, now, &m->rate);
	if ((m->has_high_cpu = d->high_cpu != NULL))
		agent_high_cpu_stats(d->high_cpu, &m->high_cpu);

	for (size_t i = 0; i < d->n_ex && d->cfg && i < d->cfg->n_exporters; i++) {
		struct agent_dataplane_exporter_metrics *e = &m->ex[m->n_exporters++];
		e->index = (unsigned)i;
		snprintf(e->type, sizeof(e->type), "%s",
			 pf_exporter_type_name(d->cfg->exporters[i].type));
		e->running = d->ex[i].x != NULL;
		if (e->running)
			agent_exporter_status(d->ex[i].x, &e->st);
	}
	for (size_t i = 0; i < d->n_pt && d->cfg && i < d->cfg->n_targets; i++) {
		struct agent_dataplane_target_metrics *t = &m->pt[m->n_targets++];
		struct pf_pprof_health h;
		t->index = (unsigned)i;
		snprintf(t->type, sizeof(t->type), "%s",
			 pf_pprof_type_name(d->cfg->targets[i].type));
		if (!d->cfg->enabled || !d->pprof || !d->pprof_ok ||
		    pf_pprof_sources_health(d->pprof, i, &h) < 0)
			continue;
		t->active = true;
		t->healthy = h.healthy && !d->pt[i].export_err[0];
		t->scrapes_ok = h.scrapes_ok;
		t->scrapes_failed = h.scrapes_failed;
		t->last_duration_ms = h.last_duration_ms;
		t->last_bytes = h.last_bytes;
		t->last_samples = h.last_samples;
		t->last_ok_unix_ns = h.last_ok_unix_ns;
	}
	m->has_spans = d->spans != NULL;
	if (d->spans) {
		agent_span_receiver_counters(d->spans, &m->span_rx);
		struct pf_sample_ring_stats rs;
		if (pf_sampler_ring_stats(d->sampler, &rs) == 0) {
			m->ring_bytes = rs.bytes;
			m->ring_max_bytes = rs.max_bytes;
			m->ring_samples = rs.samples;
			m->ring_evicted_memory = rs.evicted_memory;
		}
	}
	pthread_mutex_lock(&d->lock);
	m->counters = d->counters;
	m->span = d->span_m;
	memcpy(d->snap, m, sizeof(*m));
	pthread_mutex_unlock(&d->lock);
}

int agent_dataplane_metrics(struct agent_dataplane *d, struct agent_dataplane_metrics *out)
{
	if (!d || !d->snap)
		return -ENOTSUP;
	pthread_mutex_lock(&d->lock);
	memcpy(out, d->snap, sizeof(*out));
	pthread_mutex_unlock(&d->lock);
	return 0;
}

/* ---- worker -------------------------------------------------------------------------------- */

static void start_sampler(struct agent_dataplane *d)
{
	struct pf_error err = {0};
	if (d->no_sampler) {
		if (d->captures)
			agent_captures_set_sampler(d->captures, false);
		agent_health_set(d->health, "sampler", true, "off (--no-sampler)", NULL);
		agent_health_set(d->health, "symbolizer", true, "off (no sampler)", NULL);
		return;
	}
	struct pf_sampler_options so = {.include_self = d->include_self,
					.attr_source = d->attr_source,
					.unwind_cache_dir = d->unwind_dir,
					.line_cache_dir = d->lines_dir,
					.no_dwarf_unwind = d->frame_pointers_only};
	uint64_t t0 = pf_mono_ms();
	d->sampler = pf_sampler_new(&so, &err);
	if (!d->sampler) {
		if (!err.msg[0])
			pf_error_set(&err, -errno, "", "%s", strerror(errno));
		pf_log_error("dataplane: eBPF sampler unavailable: %s", err.msg);
		agent_health_set(d->health, "sampler", false, "unavailable", err.msg);
		agent_health_set(d->health, "symbolizer", true, "idle (no sampler)", NULL);
		if (d->captures)
			agent_captures_set_sampler(d->captures, false);
		return;
	}
	if (d->captures)
		agent_captures_set_sampler(d->captures, true);
	pf_log_info("dataplane: eBPF sampler loaded in %" PRIu64 " ms", pf_mono_ms() - t0);
}

/* The capture engine has a job or a cancel for the worker (any thread). */
static void capture_wake(void *ctx)
{
	kick(ctx);
}

static void drain_efd(struct agent_dataplane *d)
{
	uint64_t v;
	ssize_t n = read(d->efd, &v, sizeof(v));
	(void)n;
}

/* The final flush: export the open window and the pprof windows already scraped (scrapes in
 * flight are cancelled), wait (bounded) for the exports in flight. */
static void final_flush(struct agent_dataplane *d)
{
	spans_stop(d); /* no new spans; jobs not cut yet are dropped */
	spans_health(d);
	if (d->sampler && d->running) {
		pf_log_info("dataplane: exporting the last window");
		close_and_export(d);
	}
	pprof_drain(d);
	pf_pprof_sources_free(d->pprof); /* cancels and joins its scrapes (within ~100 ms) */
	d->pprof = NULL;
	uint64_t deadline = pf_mono_ms() + AGENT_DATAPLANE_FLUSH_MS;
	/* captures still sampling end now and are exported; the receiver gets half the bound */
	agent_capture_runner_free(d->capture_run, d->sampler, AGENT_DATAPLANE_FLUSH_MS / 2);
	d->capture_run = NULL;
	captures_health(d);
	/* queued exports (retries included) get what is left of the bound */
	for (size_t i = 0; i < d->n_ex; i++) {
		uint64_t now = pf_mono_ms();
		if (d->ex[i].x && now < deadline &&
		    agent_exporter_flush(d->ex[i].x, (uint32_t)(deadline - now)) < 0)
			pf_log_warn("dataplane: %s: exports still queued at shutdown",
				    d->ex[i].name);
	}
	pthread_mutex_lock(&d->lock);
	while (d->in_flight) {
		uint64_t now = pf_mono_ms();
		if (now >= deadline)
			break;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t wait = pf_min(deadline - now, (uint64_t)100);
		ts.tv_nsec += (long)(wait * 1000000u);
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&d->cond, &d->lock, &ts);
	}
	unsigned left = d->in_flight;
	pthread_mutex_unlock(&d->lock);
	exporters_health(d);
	if (left)
		pf_log_warn("dataplane: %u exports still in flight at shutdown", left);
	else
		pf_log_info("dataplane: flushed");
}

static void *worker_main(void *arg)
{
	struct agent_dataplane *d = arg;
	pprof_start(d);
	start_sampler(d);
	for (;;) {
		pthread_mutex_lock(&d->lock);
		struct pf_profcfg *cfg = d->pending;
		d->pending = NULL;
		bool stop = d->stop_requested;
		pthread_mutex_unlock(&d->lock);
		if (cfg)
			apply_config(d, cfg);
		if (stop)
			break;
		for (unsigned t = atomic_exchange(&d->trigger_toggles, 0); t; t--)
			toggle_trigger(d);

		if (d->sampler) {
			int rc = pf_sampler_poll(d->sampler, 0);
			if (rc < 0)
				pf_log_warn("dataplane: sampler poll: %s", strerror(-rc));
		}
		int64_t capture_next = -1;
		if (d->capture_run)
			capture_next =
			    agent_capture_runner_poll(d->capture_run, d->sampler, d->cfg, pf_mono_ms());
		captures_health(d);
		uint64_t now = pf_mono_ms();
		uint64_t tick_ms = d->high_cpu ? TICK_HIGH_CPU_MS : TICK_MS;
		bool closing = d->next_close_ms && now >= d->next_close_ms;
		bool tick = now >= d->next_tick_ms || (closing && d->next_tick_ms - now <= tick_ms / 2);
		if (tick) {
			d->next_tick_ms = now + tick_ms;
			guard_tick(d, now);
			high_cpu_tick(d, now);
		}
		if (closing) {
			if (d->cfg->mode == PF_MODE_TRIGGERED) {
				toggle_trigger(d); /* the capture is over */
			} else if (!hold_close(d, now)) {
				close_and_export_at(d, d->close_held ? close_due_end(d, now) : 0);
				schedule_close(d, d->next_close_ms);
				if (d->next_close_ms <= now) /* fell behind: restart the beat */
					schedule_close(d, now);
			}
		}
		/* pprof: reap, start due scrapes, export what they produced */
		int64_t pprof_next = -1;
		if (d->pprof) {
			int rc = pf_pprof_sources_poll(d->pprof, pf_pprof_now_ms(), &pprof_next);
			if (rc < 0) /* the target's health says so too */
				pf_log_debug("dataplane: pprof: cannot start a scrape: %s",
					     strerror(-rc));
			pprof_drain(d);
			pprof_health(d);
		}
		int span_wait = spans_run(d);
		if (tick) { /* on the tick's wake-up: no wake-up of their own */
			exporters_health(d);
			metrics_refresh(d);
		}

		int timeout = AGENT_DATAPLANE_POLL_MS;
		if (span_wait >= 0 && span_wait < timeout)
			timeout = span_wait;
		now = pf_mono_ms();
		timeout = (int)pf_min((uint64_t)timeout,
				      d->next_tick_ms > now ? d->next_tick_ms - now : 0);
		if (d->close_held)
			timeout = (int)pf_min((uint64_t)timeout, CLOSE_HOLD_POLL_MS);
		else if (d->next_close_ms)
			timeout = (int)pf_min((uint64_t)timeout,
					      d->next_close_ms > now ? d->next_close_ms - now : 0);
		if (capture_next >= 0)
			timeout = (int)pf_min((int64_t)timeout, capture_next);
		/* 0 = due but PF_PPROF_MAX_INFLIGHT scrapes run: look again a little later */
		if (pprof_next >= 0)
			timeout = (int)pf_min((int64_t)timeout,
					      pf_max(pprof_next, (int64_t)PPROF_MIN_WAIT_MS));
		struct pollfd pfd[3] = {
		    {.fd = d->efd, .events = POLLIN},
		    {.fd = d->sampler ? pf_sampler_fd(d->sampler) : -1, .events = POLLIN},
		    {.fd = d->pprof ? pf_pprof_sources_wake_fd(d->pprof) : -1, .events = POLLIN}};
		if (poll(pfd, 3, timeout) > 0 && (pfd[0].revents & POLLIN))
			drain_efd(d);
	}
	final_flush(d);
	metrics_refresh(d);
	pthread_mutex_lock(&d->lock);
	d->flushed = true;
	if (d->wake) /* under the lock: agent_dataplane_free() clears it */
		d->wake(d->wake_ctx);
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

struct agent_dataplane *agent_dataplane_new(const struct agent_dataplane_opts *o,
					    struct pf_error *err)
{
	struct agent_dataplane *d = calloc(1, sizeof(*d));
	if (!d) {
		pf_error_set(err, -ENOMEM, "", "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	d->efd = -1;
	d->health = o->health;
	d->wake = o->wake;
	d->wake_ctx = o->wake_ctx;
	d->no_sampler = o->no_sampler;
	d->include_self = o->include_self;
	d->frame_pointers_only = o->frame_pointers_only;
	d->attr_source = o->attr_source;
	if (gethostname(d->host_name, sizeof(d->host_name) - 1) < 0)
		d->host_name[0] = '\0';
	if ((o->spill_dir && !(d->spill_dir = strdup(o->spill_dir))) ||
	    (o->unwind_dir && !(d->unwind_dir = strdup(o->unwind_dir))) ||
	    (o->lines_dir && !(d->lines_dir = strdup(o->lines_dir))) ||
	    (o->agent_token && !(d->agent_token = strdup(o->agent_token))) ||
	    (o->agent_uid && !(d->agent_uid = strdup(o->agent_uid)))) {
		pf_error_set(err, -ENOMEM, "", "out of memory");
		agent_dataplane_free(d);
		errno = ENOMEM;
		return NULL;
	}
	if (o->metrics && (!(d->snap = calloc(1, sizeof(*d->snap))) ||
			   !(d->snap_work = calloc(1, sizeof(*d->snap_work))))) {
		free(d->snap);
		d->snap = NULL;
		pf_error_set(err, -ENOMEM, "", "out of memory");
		agent_dataplane_free(d);
		errno = ENOMEM;
		return NULL;
	}
	struct pf_profcfg *defaults = pf_profcfg_new_default();
	struct agent_guard_budget gb = {
	    .max_cpu_percent = 1.0, .max_memory_mb = 64, .frequency_hz = 99};
	if (defaults)
		guard_budget(d, defaults, &gb);
	d->guard = agent_guard_new(&gb);
	d->rl = agent_ratelimit_new(defaults ? defaults->limits.max_profiles_per_minute : 60);
	pf_profcfg_free(defaults);
	if (!d->guard || !d->rl) {
		pf_error_set(err, -ENOMEM, "", "out of memory");
		agent_dataplane_free(d);
		errno = ENOMEM;
		return NULL;
	}
	agent_guard_state(d->guard, &d->guard_st);
	if (o->captures) {
		struct agent_capture_runner_opts ro = {.engine = o->captures,
						       .agent_token = o->agent_token,
						       .agent_uid = o->agent_uid,
						       .receiver = o->capture_receiver,
						       .ca_file = o->capture_ca_file,
						       .cert_file = o->capture_cert_file,
						       .key_file = o->capture_key_file,
						       .submit_bytes = capture_submit_bytes,
						       .submit_window = capture_submit_window,
						       .retire = capture_retire,
						       .ctx = d};
		d->capture_run = agent_capture_runner_new(&ro);
		if (!d->capture_run) {
			pf_error_set(err, -ENOMEM, "", "out of memory");
			agent_dataplane_free(d);
			errno = ENOMEM;
			return NULL;
		}
		d->captures = o->captures;
		/* one limits.max_profiles_per_minute for windows, pprof and every capture */
		agent_captures_set_ratelimit(d->captures, d->rl);
	}
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	atomic_init(&d->trigger_toggles, 0);
	pf_buf_init(&d->out, PF_BUF_MAX_DEFAULT);
	d->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (d->efd < 0) {
		int e = errno;
		pf_error_set(err, -e, "", "eventfd: %s", strerror(e));
		agent_dataplane_free(d);
		errno = e;
		return NULL;
	}
	agent_health_register(d->health, "sampler");
	agent_health_register(d->health, "symbolizer");
	agent_health_register(d->health, GUARD_NAME);
	guard_health(d);
	if (d->captures)
		agent_health_register(d->health, "captures");
	agent_health_set(d->health, "sampler", true, "loading", NULL);
	agent_health_set(d->health, "symbolizer", true, "starting", NULL);
	int rc = pthread_create(&d->thread, NULL, worker_main, d);
	if (rc != 0) {
		pf_error_set(err, -rc, "", "cannot start the dataplane thread: %s", strerror(rc));
		agent_dataplane_free(d);
		errno = rc;
		return NULL;
	}
	d->thread_started = true;
	if (d->captures)
		agent_captures_set_worker(d->captures, capture_wake, d);
	return d;
}

void agent_dataplane_toggle_trigger(struct agent_dataplane *d)
{
	if (!d)
		return;
	atomic_fetch_add(&d->trigger_toggles, 1);
	kick(d);
}

bool agent_dataplane_flushed(void *dataplane)
{
	struct agent_dataplane *d = dataplane;
	bool done;
	if (!d)
		return true;
	pthread_mutex_lock(&d->lock);
	d->stop_requested = true;
	done = d->flushed || !d->thread_started;
	pthread_mutex_unlock(&d->lock);
	if (!done)
		kick(d);
	return done;
}

void agent_dataplane_counters(struct agent_dataplane *d, struct agent_dataplane_counters *out)
{
	pthread_mutex_lock(&d->lock);
	*out = d->counters;
	pthread_mutex_unlock(&d->lock);
}

void agent_dataplane_free(struct agent_dataplane *d)
{
	if (!d)
		return;
	if (d->thread_started) {
		pthread_mutex_lock(&d->lock);
		d->stop_requested = true;
		bool flushed = d->flushed;
		pthread_mutex_unlock(&d->lock);
		kick(d);
		if (!flushed) {
			/* wait for the worker's flush (it bounds itself) */
			pthread_mutex_lock(&d->lock);
			uint64_t deadline = pf_mono_ms() + AGENT_DATAPLANE_FLUSH_MS + 1000;
			while (!d->flushed && pf_mono_ms() < deadline) {
				pthread_mutex_unlock(&d->lock);
				usleep(20000);
				pthread_mutex_lock(&d->lock);
			}
			flushed = d->flushed;
			pthread_mutex_unlock(&d->lock);
		}
		if (!flushed) {
			pthread_mutex_lock(&d->lock);
			d->wake = NULL;
			pthread_mutex_unlock(&d->lock);
			pf_log_warn("dataplane: worker did not finish; leaving it to the exit");
			return;
		}
		pthread_join(d->thread, NULL);
	}
	/* Freeing a queued exporter is bounded: an attempt in flight ends within its timeout and
	 * queued items are cancelled (spilled ones stay on disk for the next start). */
	free_exporters(d, true);
	pthread_mutex_lock(&d->lock);
	uint64_t deadline = pf_mono_ms() + 1000;
	while (d->n_reapers && pf_mono_ms() < deadline) {
		pthread_mutex_unlock(&d->lock);
		usleep(10000);
		pthread_mutex_lock(&d->lock);
	}
	bool reaped = d->n_reapers == 0;
	pthread_mutex_unlock(&d->lock);
	if (!reaped)
		return; /* a thread may still call export_done(d) */
	if (d->captures) {
		agent_captures_set_worker(d->captures, NULL, NULL);
		agent_captures_set_ratelimit(d->captures, NULL);
	}
	/* d->pprof and d->capture_run are NULL after the final flush */
	agent_capture_runner_free(d->capture_run, NULL, 0);
	spans_stop(d);
	free(d->procs);
	free(d->procs_work);
	pf_pprof_sources_free(d->pprof);
	pf_sampler_free(d->sampler);
	agent_high_cpu_free(d->high_cpu);
	agent_guard_free(d->guard);
	agent_ratelimit_free(d->rl);
	free(d->pids);
	pf_profcfg_free(d->cfg);
	pf_profcfg_free(d->pending);
	pf_buf_release(&d->out);
	free(d->spill_dir);
	free(d->unwind_dir);
	free(d->lines_dir);
	if (d->agent_token) {
		explicit_bzero(d->agent_token, strlen(d->agent_token));
		free(d->agent_token);
	}
	free(d->agent_uid);
	free(d->snap);
	free(d->snap_work);
	if (d->efd >= 0)
		close(d->efd);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->cond);
	free(d);
}
