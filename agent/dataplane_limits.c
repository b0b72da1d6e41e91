/* dataplane_limits.c — see dataplane_limits.h. */
#include "dataplane_limits.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "dataplane_int.h"
#include "health.h"
#include "limits/self_usage.h"
#include "pf/clock.h"
#include "pf/log.h"

/* ---- overhead guard and rate limit (worker thread) ----------------------------------------- */

void dp_guard_budget(const struct agent_dataplane *d, const struct pf_profcfg *cfg,
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

void dp_limits_apply(struct agent_dataplane *d, const struct pf_profcfg *cfg)
{
	struct agent_guard_budget gb;
	dp_guard_budget(d, cfg, &gb);
	if (agent_guard_set_budget(d->guard, &gb))
		pf_log_info(
		    "dataplane: overhead guard: budget cpu %.2f%%, memory %u MiB, from %u Hz",
		    gb.max_cpu_percent, gb.max_memory_mb, gb.frequency_hz);
	agent_guard_state(d->guard, &d->guard_st);
	if (agent_ratelimit_set_limit(d->rl, cfg->limits.max_profiles_per_minute) < 0)
		pf_log_error(
		    "dataplane: limits.max_profiles_per_minute not applied: out of memory");
}

/* cfg with the frequency the guard allows: what the sampler is given. */
struct pf_profcfg dp_guarded(const struct agent_dataplane *d, const struct pf_profcfg *cfg)
{
	struct pf_profcfg c = *cfg; /* shallow: pf_sampler_set_config keeps no pointer */
	if (d->guard_st.hz)
		c.frequency_hz = d->guard_st.hz;
	return c;
}

/* The "guard" health component: the guard's line and the rate limit's. Unhealthy (the agent
 * "degraded: guard") while the guard runs the sampler below the configured frequency, or
 * the agent stays over its budget at the floor; last_error says why. */
void dp_guard_health(struct agent_dataplane *d)
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
void dp_guard_note(struct agent_dataplane *d)
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
	struct pf_profcfg c = dp_guarded(d, d->cfg);
	if (pf_sampler_set_config(d->sampler, &c, &err) < 0) {
		pf_log_error("dataplane: overhead guard: cannot set %u Hz: %s", c.frequency_hz,
			     err.msg);
		return;
	}
	char line[256];
	agent_guard_status(&d->guard_st, line, sizeof(line));
	pf_log_info("dataplane: overhead guard: sampling at %u Hz (%s)", c.frequency_hz, line);
	d->sampler_hz = c.frequency_hz;
	dp_guard_note(d);
	dp_sampler_health(d);
}

void dp_guard_tick(struct agent_dataplane *d, uint64_t now_ms)
{
	struct agent_self_usage pr;
	uint64_t bpf_ns = 0;
	agent_self_usage_read(&pr); /* fields stay 0 when unreadable */
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
	dp_guard_health(d);
}
