/* sampler_offcpu.c — see sampler_int.h: off-CPU profiles (profiling.off_cpu). The kernel's
 * programs (cpu_sampler.h, "off-CPU") are attached while off-CPU is on and profiling
 * samples (continuous mode, or a trigger running); their records are aggregated apart from
 * the CPU ticks and close with every window into a window of their own (type off_cpu). */
#include "sampler/sampler_int.h"

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
	struct bpf_map *m = s->skel->maps.off_cpu_recs;
	uint32_t key, next;
	for (unsigned i = 0; i < PF_OFF_CPU_THREADS_MAX &&
			     bpf_map__get_next_key(m, NULL, &next, sizeof(next)) == 0;
	     i++) {
		key = next;
		if (bpf_map__delete_elem(m, &key, sizeof(key), 0) < 0)
			break;
	}
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

int sampler_off_cpu_apply(struct pf_sampler *s, bool want, struct pf_error *err)
{
	bool on = s->off_links[1] != NULL;
	if (want == on)
		return 0;
	if (!want) {
		detach(s);
		return 0;
	}
	if (!s->off_agg) {
		struct pf_agg_options ao = {.max_samples = s->opt.max_samples, .off_cpu = true};
		if (!(s->off_agg = pf_agg_new(&ao)))
			return pf_error_set(err, -ENOMEM, "", "out of memory");
	}
	return attach(s, err);
}

bool sampler_off_cpu_on(const struct pf_sampler *s)
{
	return s->off_links[1] != NULL;
}

void sampler_off_cpu_sample(struct pf_sampler *s, const struct pf_agg_sample *as, uint64_t off_ns,
			    uint32_t flags)
{
	if (!s->off_agg)
		return; /* records written before the first attach cannot exist */
	struct pf_agg_sample o = *as;
	double w = (double)off_ns / s->off_cpu_prob;
	o.weight = w >= 9.2e18 ? INT64_MAX : (uint64_t)w;
	o.reason = flags & PF_SAMPLE_F_PREEMPTED ? PF_AGG_OFF_PREEMPTED : PF_AGG_OFF_BLOCKED;
	sampler_agg_add(s, s->off_agg, &o);
}

void sampler_off_cpu_free(struct pf_sampler *s)
{
	detach(s);
	pf_agg_free(s->off_agg);
}
