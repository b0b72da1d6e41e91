/* dataplane_pprof.c — see dataplane_pprof.h. */
#include "dataplane_pprof.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "dataplane_int.h"
#include "health.h"
#include "pf/log.h"

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

void dp_pprof_health(struct agent_dataplane *d)
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

void dp_pprof_start(struct agent_dataplane *d)
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
void dp_pprof_drain(struct agent_dataplane *d)
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
			dp_export_window(d, w, t);
		else
			pf_prof_window_free(w);
		pf_pprof_result_free(r);
	}
}

/* Swaps in cfg's targets (none while profiling is disabled) and their health components. */
void dp_pprof_apply(struct agent_dataplane *d, const struct pf_profcfg *cfg)
{
	size_t n = pf_min(cfg->n_targets, (size_t)PF_PROFCFG_MAX_TARGETS);
	dp_pprof_drain(d); /* what was scraped under the old list, with its target indexes */
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
void dp_pprof_trigger(struct agent_dataplane *d)
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
