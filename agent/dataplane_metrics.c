/* dataplane_metrics.c — see dataplane_metrics.h. */
#include "dataplane_metrics.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "dataplane_int.h"
#include "health.h"
#include "pf/clock.h"
#include "sampler/sample_ring.h"

/* ---- metrics snapshot (worker thread) ------------------------------------------------------ */

/* Takes the snapshot: on the worker's once-a-second tick, and after the final flush. */
void dp_metrics_refresh(struct agent_dataplane *d)
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
