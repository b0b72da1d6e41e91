/* sampler_offcpu.c — see sampler_int.h: off-CPU records (profiling.off_cpu, the span ring's
 * waits, off_cpu and wall captures). The kernel's programs (cpu_sampler.h, "off-CPU") are
 * attached while any of them needs them; the continuous records are aggregated apart from the
 * CPU ticks and close with every window into a window of their own (type off_cpu). */
#include "sampler/sampler_int.h"

#include "sampler/sample_ring.h"

#include <bpf/libbpf.h>
#include <errno.h>
#include <string.h>

static void detach(struct pf_sampler *s)
{
	for (size_t i = 0; i < PF_ARRAY_SIZE(s->off_links); i++) {
		bpf_link__destroy(s->off_links[i]);
		s->off_links[i] = NULL;
	}
	/* records of threads still away would wait for a return nobody sees; their task
	 * storage is of an old generation at the next attach */
	sampler_map_clear(s->skel->maps.off_cpu_recs, sizeof(uint32_t));
}

static int attach(struct pf_sampler *s, struct pf_error *err)
{
	__atomic_fetch_add(&s->skel->data->off_cpu_gen, 1, __ATOMIC_SEQ_CST);
	/* the system call return first: a record made at a switch-in waits for it */
	struct bpf_program *progs[2] = {s->skel->progs.off_cpu_sys_exit,
					s->skel->progs.off_cpu_switch};
	for (size_t i = 0; i < 2; i++) {
		s->off_links[i] = bpf_program__attach(progs[i]);
		if (!s->off_links[i]) {
			int e = -errno;
			detach(s);
			return pf_error_set(err, e, "profiling.off_cpu.enabled", "attach %s: %s",
					    bpf_program__name(progs[i]), strerror(-e));
		}
	}
	return 0;
}

void sampler_off_cpu_knobs(struct pf_sampler *s, const struct pf_profcfg *cfg)
{
	double p = cfg->off_cpu.probability;
	if (!(p > 0) || p > 1)
		p = 1;
	s->off_cpu_prob = p;
	s->skel->data->off_cpu_min_ns = (uint64_t)cfg->off_cpu.min_block_us * 1000;
	s->skel->data->off_cpu_threshold = p >= 1 ? 0xffffffffu : (uint32_t)(p * 4294967295.0);
}

/* Continuous off-CPU profiles: on, and profiling samples (not between triggers). */
static bool continuous(const struct pf_sampler *s)
{
	return s->enabled && s->off_cpu_cfg && (!s->triggered_mode || s->trigger_on);
}

int sampler_off_cpu_update(struct pf_sampler *s, struct pf_error *err)
{
	bool cont = continuous(s), ring = s->enabled && s->ring && s->ring_off_cpu;
	uint32_t mask = 0;
	for (unsigned i = 0; i < PF_SAMPLER_CAPTURES; i++)
		if (s->cap[i].used && s->cap[i].type != PF_PROF_CPU)
			mask |= 1u << i;
	if (cont && !s->off_agg) {
		struct pf_agg_options ao = {.max_samples = s->opt.max_samples, .off_cpu = true};
		if (!(s->off_agg = pf_agg_new(&ao)))
			return pf_error_set(err, -ENOMEM, "", "out of memory");
	}
	s->skel->data->off_cpu_follow = cont || ring;
	s->skel->data->off_cpu_cap_mask = mask;
	bool want = cont || ring || mask, on = s->off_links[1] != NULL;
	if (want == on)
		return 0;
	if (!want) {
		detach(s);
		return 0;
	}
	return attach(s, err);
}

bool sampler_off_cpu_on(const struct pf_sampler *s)
{
	return s->off_links[1] != NULL;
}

static uint64_t clamp_weight(double w)
{
	return w >= 9.2e18 ? INT64_MAX : (uint64_t)w;
}

void sampler_off_cpu_sample(struct pf_sampler *s, const struct pf_agg_sample *as, uint64_t off_ns,
			    uint32_t flags, bool cont)
{
	struct pf_agg_sample o = *as;
	o.reason = flags & PF_SAMPLE_F_PREEMPTED ? PF_AGG_OFF_PREEMPTED : PF_AGG_OFF_BLOCKED;
	if (cont) {
		o.weight = clamp_weight((double)off_ns / s->off_cpu_prob);
		if (s->off_agg && continuous(s))
			sampler_agg_add(s, s->off_agg, &o);
		if (s->ring && s->ring_off_cpu)
			pf_sample_ring_add(s->ring, &o, 0); /* refusals are counted in its stats */
	}
	uint32_t mask = (flags >> PF_SAMPLE_CAPTURE_SHIFT) & 0xffu;
	for (unsigned i = 0; mask && i < PF_SAMPLER_CAPTURES; i++) {
		struct sampler_cap *c = &s->cap[i];
		if (!(mask & (1u << i)) || !c->used || c->type == PF_PROF_CPU ||
		    as->ts_unix_ns <= c->start)
			continue;
		/* every switch-out of its processes is followed: no probability to divide by */
		o.weight = pf_min(off_ns, as->ts_unix_ns - c->start);
		sampler_agg_add(s, c->agg, &o);
	}
}

void sampler_off_cpu_free(struct pf_sampler *s)
{
	detach(s);
	pf_agg_free(s->off_agg);
}
