/* guard.c — see guard.h. */
#include "limits/guard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define NS_PER_S 1000000000ULL
#define RING (AGENT_GUARD_WINDOW_S + 1) /* readings a second or more apart span the window */
#define MIN_GAP_NS (900ULL * 1000000ULL)
#define MIB (1024ULL * 1024ULL)

struct agent_guard {
	struct agent_guard_budget b;
	struct agent_guard_sample ring[RING]; /* oldest at head */
	unsigned head, n;
	unsigned level, max_level;
	uint64_t last_change_ns; /* 0 = never */
	struct agent_guard_state st;
};

static uint32_t level_hz(const struct agent_guard *g, unsigned level)
{
	uint32_t hz = level < 32 ? g->b.frequency_hz >> level : 0;
	if (g->b.frequency_hz <= AGENT_GUARD_FLOOR_HZ)
		return g->b.frequency_hz;
	return hz < AGENT_GUARD_FLOOR_HZ ? AGENT_GUARD_FLOOR_HZ : hz;
}

static void restart(struct agent_guard *g, const struct agent_guard_budget *b)
{
	g->b = *b;
	g->n = g->head = 0;
	g->level = 0;
	g->last_change_ns = 0;
	g->max_level = 0;
	while (!b->fixed && level_hz(g, g->max_level) > AGENT_GUARD_FLOOR_HZ)
		g->max_level++;
	g->st.configured_hz = g->st.hz = b->frequency_hz;
	g->st.level = 0;
	g->st.throttled = false;
	g->st.measured = false;
	g->st.cpu_percent = -1;
	g->st.setup_percent = 0;
	g->st.over_cpu = g->st.over_memory = false;
	g->st.max_cpu_percent = b->max_cpu_percent;
	g->st.max_memory_mb = b->ignore_memory ? 0 : b->max_memory_mb;
}

struct agent_guard *agent_guard_new(const struct agent_guard_budget *b)
{
	struct agent_guard *g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	restart(g, b);
	return g;
}

void agent_guard_free(struct agent_guard *g)
{
	free(g);
}

bool agent_guard_set_budget(struct agent_guard *g, const struct agent_guard_budget *b)
{
	if (g->b.max_cpu_percent == b->max_cpu_percent && g->b.max_memory_mb == b->max_memory_mb &&
	    g->b.frequency_hz == b->frequency_hz && g->b.fixed == b->fixed &&
	    g->b.ignore_memory == b->ignore_memory)
		return false;
	restart(g, b);
	return true;
}

static const struct agent_guard_sample *at(const struct agent_guard *g, unsigned i)
{
	return &g->ring[(g->head + i) % RING];
}

static void push(struct agent_guard *g, const struct agent_guard_sample *s)
{
	if (g->n == RING) {
		g->head = (g->head + 1) % RING;
		g->n--;
	}
	g->ring[(g->head + g->n) % RING] = *s;
	g->n++;
}

/* A step to level: the window restarts at the last reading. */
static void step(struct agent_guard *g, unsigned level, const struct agent_guard_sample *s)
{
	if (level > g->level)
		g->st.steps_down++;
	else
		g->st.steps_up++;
	g->level = level;
	g->last_change_ns = s->mono_ns;
	g->head = 0;
	g->n = 0;
	push(g, s);
	g->st.level = level;
	g->st.hz = level_hz(g, level);
	g->st.throttled = g->st.hz < g->st.configured_hz;
}

uint32_t agent_guard_update(struct agent_guard *g, const struct agent_guard_sample *s)
{
	if (g->n) {
		const struct agent_guard_sample *last = at(g, g->n - 1);
		if (s->mono_ns < last->mono_ns + MIN_GAP_NS)
			return g->st.hz;
	}
	push(g, s);
	/* the window is the last AGENT_GUARD_WINDOW_S, whatever the readings' spacing: a reading
	 * goes once the next one is as old */
	while (g->n > 1 && s->mono_ns - at(g, 1)->mono_ns + NS_PER_S / 2 >=
			       (uint64_t)AGENT_GUARD_WINDOW_S * NS_PER_S) {
		g->head = (g->head + 1) % RING;
		g->n--;
	}
	g->st.rss_bytes = s->rss_bytes;
	const struct agent_guard_sample *first = at(g, 0);
	uint64_t wall = s->mono_ns - first->mono_ns;
	if (wall + NS_PER_S / 2 < (uint64_t)AGENT_GUARD_WINDOW_S * NS_PER_S)
		return g->st.hz; /* the window is not full yet */

	uint64_t used = (s->cpu_ns >= first->cpu_ns ? s->cpu_ns - first->cpu_ns : 0) +
			(s->bpf_ns >= first->bpf_ns ? s->bpf_ns - first->bpf_ns : 0);
	uint64_t setup = s->setup_ns >= first->setup_ns ? s->setup_ns - first->setup_ns : 0;
	setup = setup < used ? setup : used;
	double setup_pct = 100.0 * (double)setup / (double)wall;
	double cpu = 100.0 * (double)(used - setup) / (double)wall;
	if (setup_pct > AGENT_GUARD_SETUP_PERCENT)
		cpu += setup_pct - AGENT_GUARD_SETUP_PERCENT;
	uint64_t rss_min = UINT64_MAX, rss_max = 0;
	for (unsigned i = 0; i < g->n; i++) {
		uint64_t r = at(g, i)->rss_bytes;
		rss_min = r < rss_min ? r : rss_min;
		rss_max = r > rss_max ? r : rss_max;
	}
	double mem_budget = (double)g->b.max_memory_mb * (double)MIB;
	g->st.measured = true;
	g->st.cpu_percent = cpu;
	g->st.setup_percent = setup_pct;
	g->st.over_cpu = cpu > g->b.max_cpu_percent;
	g->st.over_memory = !g->b.ignore_memory && (double)rss_min > mem_budget;

	if (g->st.over_cpu || g->st.over_memory) {
		if (g->level < g->max_level)
			step(g, g->level + 1, s);
		return g->st.hz;
	}
	if (g->level && s->mono_ns >= g->last_change_ns + AGENT_GUARD_RESTORE_HOLD_S * NS_PER_S) {
		double next = (double)level_hz(g, g->level - 1), cur = (double)g->st.hz;
		bool cpu_ok = cpu * next / cur <= AGENT_GUARD_RESTORE_MARGIN * g->b.max_cpu_percent;
		bool mem_ok = g->b.ignore_memory ||
			      (double)rss_max <= AGENT_GUARD_RESTORE_MARGIN * mem_budget;
		if (cpu_ok && mem_ok)
			step(g, g->level - 1, s);
	}
	return g->st.hz;
}

void agent_guard_state(const struct agent_guard *g, struct agent_guard_state *out)
{
	*out = g->st;
}

int agent_guard_status(const struct agent_guard_state *st, char *buf, size_t cap)
{
	unsigned mib = (unsigned)(st->rss_bytes / MIB);
	char mem[64];
	if (st->max_memory_mb)
		snprintf(mem, sizeof(mem), "memory %u of %u MiB", mib, st->max_memory_mb);
	else
		snprintf(mem, sizeof(mem), "memory %u MiB (not enforced)", mib);
	if (!st->measured)
		return snprintf(buf, cap, "%s%u Hz of %u Hz, measuring (window %d s)",
				st->throttled ? "throttled: " : "", st->hz, st->configured_hz,
				AGENT_GUARD_WINDOW_S);
	if (st->throttled || st->over_cpu || st->over_memory) {
		char why[128];
		if (st->over_cpu)
			snprintf(why, sizeof(why), "cpu %.2f%% > %.2f%%", st->cpu_percent,
				 st->max_cpu_percent);
		else if (st->over_memory)
			snprintf(why, sizeof(why), "memory %u MiB > %u MiB", mib,
				 st->max_memory_mb);
		else
			snprintf(why, sizeof(why),
				 "cpu %.2f%% of %.2f%%, %s, restoring step by step",
				 st->cpu_percent, st->max_cpu_percent, mem);
		return snprintf(
		    buf, cap, "%s: %u Hz of %u Hz%s, %s",
		    st->throttled ? "throttled" : "over budget", st->hz, st->configured_hz,
		    st->hz <= AGENT_GUARD_FLOOR_HZ && (st->over_cpu || st->over_memory) ? " (floor)"
											: "",
		    why);
	}
	char setup[64] = "";
	if (st->setup_percent >= 0.005)
		snprintf(setup, sizeof(setup), ", set-up %.2f%% of %.2f%%", st->setup_percent,
			 AGENT_GUARD_SETUP_PERCENT);
	return snprintf(buf, cap, "%u Hz, cpu %.2f%% of %.2f%%%s, %s", st->hz, st->cpu_percent,
			st->max_cpu_percent, setup, mem);
}
