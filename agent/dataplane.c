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
#include <time.h>
#include <unistd.h>

#include "dataplane_exporters.h"
#include "dataplane_int.h"
#include "dataplane_limits.h"
#include "dataplane_pprof.h"
#include "dataplane_triggers.h"
#include "export/encode_submit.h"
#include "health.h"
#include "pf/clock.h"
#include "pf/log.h"

/* ---- small helpers ------------------------------------------------------------------------- */

/* Frees a string that held a secret, zeroed first. NULL is allowed. */
static void free_secret(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

void dp_kick(struct agent_dataplane *d)
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

/* ---- apply hook (loop thread) -------------------------------------------------------------- */

static int hook_check(void *ctx, const struct pf_profcfg *cfg, struct pf_error *err)
{
	struct agent_dataplane *d = ctx;
	/* frequency range and filter regexps are validated by pf_profcfg_parse */
	int rc = dp_exporters_check(d, cfg, err);
	if (rc < 0)
		return rc;
	/* span triggers: a new receiver address must be free (the one in use is ours) */
	if (cfg->enabled && (cfg->slow_span.enabled || cfg->error_span.enabled)) {
		rc = dp_spans_check_listen(d, cfg->slow_span.listen, err);
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
	dp_kick(d);
}

void agent_dataplane_hook(struct agent_dataplane *d, struct agent_config_hook *out)
{
	*out = (struct agent_config_hook){
	    .name = "dataplane", .check = hook_check, .commit = hook_commit, .ctx = d};
}

/* ---- tags and windows (worker thread) ------------------------------------------------------ */

void dp_tag_processes(struct pf_prof_window *w, const char *key, const char *value)
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
		dp_tag_processes(w, "profleet.agent.uid", d->agent_uid);
}

/* One window's hand-off (encode_submit.h's sink). */
struct window_export {
	struct agent_dataplane *d;
	struct dp_target *t;
	const struct pf_prof_window *w;
	uint64_t samples;
};

/* Encoded: count it before the exporters see it. */
static int window_ready(void *ctx, const struct agent_encoded *e)
{
	struct window_export *we = ctx;
	struct agent_dataplane *d = we->d;
	if (!e->n) {
		if (dp_bytes_exporters(d))
			pf_log_debug("dataplane: window without samples, nothing to export");
		return 0;
	}
	pthread_mutex_lock(&d->lock);
	d->counters.profile_bytes += e->bytes;
	d->counters.last_profile_bytes = e->bytes;
	if (we->t)
		d->counters.pprof_windows++;
	else
		d->counters.windows++;
	pthread_mutex_unlock(&d->lock);
	pf_log_debug("dataplane: %s: window of %" PRIu64 " samples, %zu processes: "
		     "%" PRIu64 " bytes to %zu exporters",
		     we->t ? we->t->name : "sampler", we->samples, we->w->n_processes, e->bytes,
		     d->n_ex);
	return 0;
}

static void window_bytes(void *ctx, const uint8_t *data, size_t len, const uint8_t id[16])
{
	dp_submit_all(((struct window_export *)ctx)->d, data, len, id);
}

static void window_whole(void *ctx, const struct pf_prof_window *w)
{
	dp_submit_window_all(((struct window_export *)ctx)->d, w);
}

void dp_export_window_src(struct agent_dataplane *d, struct pf_prof_window *w, struct dp_target *t,
			  enum agent_profile_source src)
{
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

	struct window_export we = {.d = d, .t = t, .w = w, .samples = samples};
	struct agent_submit_sink sink = {.ready = window_ready,
					 /* no exporter takes OTLP bytes: nothing to encode for */
					 .bytes = dp_bytes_exporters(d) ? window_bytes : NULL,
					 .window = window_whole,
					 .ctx = &we};
	int rc = agent_encode_submit(w, false, 1, &sink, &d->enc, &err);
	if (rc < 0) {
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
		if (samples) /* the exporters that take windows do not need the encoding */
			dp_submit_window_all(d, w);
	}
	pf_prof_window_free(w);
}

/* A capture's profiles for the configured exporters (capture_run.h; already tagged). */
static void capture_submit_bytes(void *ctx, const uint8_t *data, size_t len, const uint8_t id[16])
{
	dp_submit_all(ctx, data, len, id);
}

static void capture_submit_window(void *ctx, const struct pf_prof_window *w)
{
	dp_submit_window_all(ctx, w);
}

static void capture_retire(void *ctx, struct agent_exporter *x)
{
	dp_retire_exporter(ctx, x);
}

/* dp_export_window_src() with the source told by t: a pprof target's, or the sampler's window. */
void dp_export_window(struct agent_dataplane *d, struct pf_prof_window *w, struct dp_target *t)
{
	dp_export_window_src(d, w, t, t ? AGENT_SRC_PPROF : AGENT_SRC_WINDOW);
}

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
		dp_export_window(d, w, NULL);
	} while ((w = pf_sampler_next_window(d->sampler)));
	dp_sampler_health(d);
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

void dp_sampler_health(struct agent_dataplane *d)
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
			      st.unwind.tables, st.unwind.rows, st.unwind.rows_cap);
	else
		pf_buf_printf(&b, "; user stacks by frame pointers only (%s)",
			      st.dwarf_unwind_off_reason ? st.dwarf_unwind_off_reason : "?");
	char py[STATUS_LEN];
	if (pf_sampler_python_status(&st, py, sizeof(py)))
		pf_buf_printf(&b, "; %s", py);
	if (pf_sampler_nodejs_status(&st, py, sizeof(py)))
		pf_buf_printf(&b, "; %s", py);
	if (pf_sampler_java_status(&st, py, sizeof(py)))
		pf_buf_printf(&b, "; %s", py);
	if (st.off_cpu || st.off_cpu_samples)
		pf_buf_printf(&b,
			      "; off-CPU %s: records %" PRIu64 ", switch-outs followed %" PRIu64
			      ", short %" PRIu64 ", lost %" PRIu64,
			      st.off_cpu ? "on" : "off", st.off_cpu_samples, st.off_cpu_switches,
			      st.off_cpu_short, st.off_cpu_full + st.off_cpu_lost_user);
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
		 st.sym.frames_resolved, st.sym.frames_unresolved, st.sym.elf_cached,
		 st.sym.line_tables, (st.sym.line_tables_bytes + 1023) >> 10, st.sym.line_builds,
		 st.sym.line_cache_hits, st.sym.line_build_failed, st.sym.line_deferred);
	agent_health_set(d->health, "symbolizer", true, status, NULL);

	pf_sampler_unwinders_status(&st, status, sizeof(status));
	agent_health_set(d->health, UNWINDERS_NAME, true, status, NULL);
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


/* ---- config and the manual trigger (worker thread) ----------------------------------------- */

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


static void apply_config(struct agent_dataplane *d, struct pf_profcfg *cfg)
{
	struct pf_profcfg *old = d->cfg;
	bool was_running = d->running;
	dp_limits_apply(d, cfg);
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
		struct pf_profcfg c = dp_guarded(d, cfg);
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
	dp_exporters_apply(d, old, cfg);
	dp_spans_apply(d, cfg);
	if (d->spill_dir) {
		/* spills of exporters that were removed or now send elsewhere (exporter.h) */
		struct agent_spill_sweep sw;
		agent_exporter_spill_sweep(d->spill_dir, cfg->exporters, cfg->n_exporters, &sw);
		d->counters.dropped += sw.items;
	}
	dp_pprof_apply(d, cfg);
	d->cfg = cfg;
	pf_profcfg_free(old);
	dp_pprof_health(d);
	dp_high_cpu_apply(d, cfg);
	dp_guard_note(d);
	dp_guard_health(d);

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
	dp_sampler_health(d);
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
		dp_pprof_trigger(d);
		return;
	}
	if (!d->capturing) {
		dp_pprof_trigger(d);
		/* start the capture's window now (nothing was sampled while idle) */
		struct pf_prof_window *w = pf_sampler_close_window(d->sampler, &err);
		while (w) {
			dp_export_window(d, w, NULL);
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
	dp_sampler_health(d);
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
		agent_health_set(d->health, UNWINDERS_NAME, true, "off (no sampler)", NULL);
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
		agent_health_set(d->health, UNWINDERS_NAME, true, "off (no sampler)", NULL);
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
	dp_kick(ctx);
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
	dp_spans_stop(d); /* no new spans; jobs not cut yet are dropped */
	dp_spans_health(d);
	if (d->sampler && d->running) {
		pf_log_info("dataplane: exporting the last window");
		close_and_export(d);
	}
	dp_pprof_drain(d);
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
	dp_exporters_health(d);
	if (left)
		pf_log_warn("dataplane: %u exports still in flight at shutdown", left);
	else
		pf_log_info("dataplane: flushed");
}

static void apply_identity(struct agent_dataplane *d, char *token, char *uid);

static void *worker_main(void *arg)
{
	struct agent_dataplane *d = arg;
	dp_pprof_start(d);
	start_sampler(d);
	for (;;) {
		pthread_mutex_lock(&d->lock);
		struct pf_profcfg *cfg = d->pending;
		char *token = d->pending_token, *uid = d->pending_uid;
		d->pending = NULL;
		d->pending_token = d->pending_uid = NULL;
		bool stop = d->stop_requested;
		pthread_mutex_unlock(&d->lock);
		if (cfg)
			apply_config(d, cfg);
		if (token)
			apply_identity(d, token, uid);
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
			dp_guard_tick(d, now);
			dp_high_cpu_tick(d, now);
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
			dp_pprof_drain(d);
			dp_pprof_health(d);
		}
		int span_wait = dp_spans_run(d);
		if (tick) { /* on the tick's wake-up: no wake-up of their own */
			dp_exporters_health(d);
			dp_metrics_refresh(d);
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
	dp_metrics_refresh(d);
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
		return pf_error_oom(err);
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
		dp_guard_budget(d, defaults, &gb);
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
	agent_health_register(d->health, UNWINDERS_NAME);
	agent_health_register(d->health, GUARD_NAME);
	dp_guard_health(d);
	if (d->captures)
		agent_health_register(d->health, "captures");
	agent_health_set(d->health, "sampler", true, "loading", NULL);
	agent_health_set(d->health, "symbolizer", true, "starting", NULL);
	agent_health_set(d->health, UNWINDERS_NAME, true, "starting", NULL);
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

int agent_dataplane_set_identity(struct agent_dataplane *d, const char *token, const char *uid)
{
	char *t = strdup(token), *u = uid ? strdup(uid) : NULL;
	if (!t || (uid && !u)) {
		free(t);
		free(u);
		return -ENOMEM;
	}
	pthread_mutex_lock(&d->lock);
	free_secret(d->pending_token);
	free(d->pending_uid);
	d->pending_token = t;
	d->pending_uid = u;
	pthread_mutex_unlock(&d->lock);
	dp_kick(d);
	return 0;
}

/* Worker: the identity posted by agent_dataplane_set_identity() goes into use. */
static void apply_identity(struct agent_dataplane *d, char *token, char *uid)
{
	pthread_mutex_lock(&d->lock); /* dp_exporters_check reads the token on the loop */
	free_secret(d->agent_token);
	d->agent_token = token;
	if (uid) {
		free(d->agent_uid);
		d->agent_uid = uid;
	}
	pthread_mutex_unlock(&d->lock);
	if (d->cfg)
		dp_exporters_apply(d, NULL, d->cfg); /* every exporter again, with the new token */
	if (d->capture_run && agent_capture_runner_set_identity(d->capture_run, token, uid) < 0)
		pf_log_error("dataplane: the capture receiver keeps the previous credential: out "
			     "of memory");
	pf_log_info("dataplane: uploads to the controller use the agent's own credential");
}

void agent_dataplane_toggle_trigger(struct agent_dataplane *d)
{
	if (!d)
		return;
	atomic_fetch_add(&d->trigger_toggles, 1);
	dp_kick(d);
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
		dp_kick(d);
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
		dp_kick(d);
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
	dp_exporters_free(d, true);
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
	dp_spans_stop(d);
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
	agent_encoded_release(&d->enc);
	free(d->spill_dir);
	free(d->unwind_dir);
	free(d->lines_dir);
	free_secret(d->agent_token);
	free_secret(d->pending_token);
	free(d->pending_uid);
	free(d->agent_uid);
	free(d->snap);
	free(d->snap_work);
	if (d->efd >= 0)
		close(d->efd);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->cond);
	free(d);
}
