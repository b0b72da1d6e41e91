/* sampler_capture.c — see sampler_bpf.h ("Captures") and sampler_int.h. */
#include "sampler/sampler_int.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler/procinfo.h"
#include "symbolize/symbolize.h"

/* ---- captures ---------------------------------------------------------------------------- */

struct pick {
	struct pf_sampler *s;
	const struct pf_proc_match *m;
	uint32_t *pids;
	size_t max, n;
	bool env_pass; /* second pass: environ read for service.name rules */
};

static int pick_one(void *ctx, const struct pf_proc *p)
{
	struct pick *k = ctx;
	/* The capture's own rules choose; profiling.filters.exclude still protects (the agent
	 * itself is never captured); no kernel threads. */
	if (p->exited || !p->exe_path || (p->pid == k->s->self_pid && !k->s->opt.include_self) ||
	    pf_procinfo_excluded(k->s->pi, p))
		return 0;
	if (!k->env_pass && pf_proc_match_needs_env(k->m) && !p->env_read) {
		if (k->n < k->max)
			k->pids[k->n++] = p->pid; /* candidate: read its environ, test again */
		return 0;
	}
	if (pf_proc_match_test(k->s->pi, k->m, p) && k->n < k->max)
		k->pids[k->n++] = p->pid;
	return 0;
}

int pf_sampler_capture_pids(struct pf_sampler *s, const struct pf_filter *rules, size_t n,
			    uint32_t *pids, size_t max, size_t *n_out, struct pf_error *err)
{
	*n_out = 0;
	struct pf_proc_match *m = pf_proc_match_new(rules, n, err);
	if (!m)
		return err && err->code ? err->code : -errno;
	int rc = pf_procinfo_scan(s->pi);
	if (rc < 0) {
		pf_proc_match_free(m);
		return pf_error_set(err, rc, "", "cannot read the process list: %s", strerror(-rc));
	}
	if (sampler_need_filter(s)) /* processes the scan found first: verdicts into the kernel */
		pf_procinfo_foreach(s->pi, sampler_push_one, s);
	struct pick k = {.s = s, .m = m, .pids = pids, .max = max};
	pf_procinfo_foreach(s->pi, pick_one, &k);
	if (pf_proc_match_needs_env(m)) {
		/* candidates whose service.name is not known yet: read environ, then decide */
		size_t n_cand = k.n;
		k.n = 0;
		k.env_pass = true;
		for (size_t i = 0; i < n_cand; i++) {
			const struct pf_proc *p = pf_procinfo_get(s->pi, pids[i]);
			if (p && !p->env_read)
				p = pf_procinfo_read(s->pi, pids[i], NULL, true);
			if (p)
				pick_one(&k, p);
		}
	}
	pf_proc_match_free(m);
	*n_out = k.n;
	return 0;
}

static int capture_pids_update(struct pf_sampler *s, const uint32_t *pids, size_t n,
			       unsigned slot)
{
	int fd = bpf_map__fd(s->skel->maps.capture_pids);
	for (size_t i = 0; i < n; i++) {
		__u32 key = pids[i];
		__u8 mask = 0;
		if (bpf_map_lookup_elem(fd, &key, &mask) < 0)
			mask = 0;
		mask |= (__u8)(1u << slot);
		if (bpf_map_update_elem(fd, &key, &mask, BPF_ANY) < 0)
			return -errno;
	}
	return 0;
}

/* Clears slot's bit in every entry (bounded by the map size); entries left without a bit go. */
static void capture_pids_clear(struct pf_sampler *s, unsigned slot)
{
	int fd = bpf_map__fd(s->skel->maps.capture_pids);
	__u32 key, next, *gone = calloc(PF_CAPTURE_PIDS_MAX, sizeof(*gone));
	size_t n_gone = 0;
	void *prev = NULL;
	for (unsigned i = 0; i < PF_CAPTURE_PIDS_MAX && bpf_map_get_next_key(fd, prev, &next) == 0;
	     i++) {
		__u8 mask;
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &mask) < 0)
			continue;
		mask &= (__u8) ~(1u << slot);
		if (mask)
			bpf_map_update_elem(fd, &key, &mask, BPF_EXIST);
		else if (gone)
			gone[n_gone++] = key;
		else
			bpf_map_update_elem(fd, &key, &mask, BPF_EXIST); /* 0: never recorded */
	}
	for (size_t i = 0; i < n_gone; i++)
		bpf_map_delete_elem(fd, &gone[i]);
	free(gone);
}

/* Brings the capture perf events to the highest frequency of the captures running that take
 * ticks (closed when none does). */
static int capture_events_apply(struct pf_sampler *s, struct pf_error *err)
{
	uint32_t hz = 0;
	for (size_t i = 0; i < PF_SAMPLER_CAPTURES; i++)
		if (s->cap[i].used && s->cap[i].type != PF_PROF_OFF_CPU) /* off_cpu: no ticks */
			hz = pf_max(hz, s->cap[i].hz);
	int rc = 0;
	if (!hz) {
		sampler_perf_close(&s->cpe);
	} else if (!s->cpe.n) {
		rc = sampler_perf_open(s, &s->cpe, s->skel->progs.do_capture, hz, err);
	} else if (hz != s->cap_hz) {
		ring_buffer__consume(s->rb); /* ticks at the old rate are thinned at it */
		rc = sampler_perf_set_period(&s->cpe, hz, "frequency_hz", err);
	}
	if (rc == 0) {
		s->cap_hz = hz;
		for (size_t i = 0; i < PF_SAMPLER_CAPTURES; i++)
			s->cap[i].acc = 0;
	}
	return rc;
}

int pf_sampler_capture_start(struct pf_sampler *s, unsigned slot, enum pf_prof_type type,
			     uint32_t hz, const uint32_t *pids, size_t n, struct pf_error *err)
{
	if (slot >= PF_SAMPLER_CAPTURES || hz < 1 || hz > 1000)
		return pf_error_set(err, -EINVAL, "", "bad capture slot or frequency");
	if (type != PF_PROF_CPU && type != PF_PROF_OFF_CPU && type != PF_PROF_WALL &&
	    type != PF_PROF_ALLOC)
		return pf_error_set(err, -EOPNOTSUPP, "profile_type",
				    "unsupported profile_type %s", pf_prof_type_name(type));
	struct sampler_cap *c = &s->cap[slot];
	if (c->used)
		return pf_error_set(err, -EBUSY, "", "capture slot %u in use", slot);
	s->cap_note[slot][0] = 0;
	if (type == PF_PROF_ALLOC) { /* the allocator probes (sampler_alloc.c), no ticks */
		int rc = pf_sampler_alloc_start(s, pids, n, &s->alloc_opt, err);
		if (rc == 0) {
			c->used = true;
			c->type = type;
			c->hz = hz;
			c->start = pf_clock_ns(CLOCK_REALTIME);
		}
		return rc;
	}
	if (c->agg && c->type != type) { /* an aggregation weighs one kind of sample */
		pf_agg_free(c->agg);
		c->agg = NULL;
	}
	if (!c->agg) {
		struct pf_agg_options ao = {.max_samples = s->opt.max_samples,
					    .off_cpu = type == PF_PROF_OFF_CPU,
					    .wall = type == PF_PROF_WALL};
		c->agg = pf_agg_new(&ao);
		if (!c->agg)
			return pf_error_set(err, -ENOMEM, "", "out of memory");
	}
	sampler_refresh_clock(s);
	c->used = true;
	c->type = type;
	c->hz = hz;
	int rc = capture_pids_update(s, pids, n, slot);
	if (rc < 0)
		pf_error_set(err, rc, "", "capture pid map: %s", strerror(-rc));
	else
		rc = capture_events_apply(s, err);
	if (rc == 0 && type != PF_PROF_CPU)
		rc = sampler_off_cpu_update(s, err); /* the switch programs follow its processes */
	/* the window starts once its events and switch programs are on (attaching them can take
	 * a while on a busy host): a wait that began before is not in it, and not counted */
	c->start = pf_clock_ns(CLOCK_REALTIME);
	if (rc < 0) {
		capture_pids_clear(s, slot);
		c->used = false;
		capture_events_apply(s, NULL);
		sampler_off_cpu_update(s, NULL);
	}
	return rc;
}

uint64_t pf_sampler_capture_samples(const struct pf_sampler *s, unsigned slot)
{
	struct pf_agg_stats st;
	if (slot >= PF_SAMPLER_CAPTURES || !s->cap[slot].used)
		return 0;
	if (s->cap[slot].type == PF_PROF_ALLOC)
		return pf_sampler_alloc_samples(s);
	pf_agg_stats(s->cap[slot].agg, &st);
	return st.pending;
}

struct pf_prof_window *pf_sampler_capture_stop(struct pf_sampler *s, unsigned slot,
					       struct pf_error *err)
{
	if (slot >= PF_SAMPLER_CAPTURES || !s->cap[slot].used) {
		pf_error_set(err, -EINVAL, "", "no capture in slot %u", slot);
		errno = EINVAL;
		return NULL;
	}
	struct sampler_cap *c = &s->cap[slot];
	if (c->type == PF_PROF_ALLOC) {
		struct pf_alloc_result res;
		struct pf_prof_window *aw = pf_sampler_alloc_stop(s, &res, err);
		c->used = false;
		snprintf(s->cap_note[slot], sizeof(s->cap_note[slot]), "%s", res.note);
		return aw;
	}
	capture_pids_clear(s, slot);
	ring_buffer__consume(s->rb); /* what was recorded before the bit went */
	/* a wait still going on is in the kernel's records; it comes back after the end */
	struct pf_prof_window *w = NULL;
	int rc = sampler_close_capture(s, c->agg, c->start, c->hz, &w);
	c->used = false;
	capture_events_apply(s, NULL);
	if (c->type != PF_PROF_CPU)
		sampler_off_cpu_update(s, NULL); /* its processes are followed no more */
	if (rc < 0) {
		/* the samples stayed in the aggregation: drop them with it */
		pf_agg_free(c->agg);
		c->agg = NULL;
		pf_error_set(err, rc, "", "closing the capture's window: %s", strerror(-rc));
		errno = -rc;
		return NULL;
	}
	w->host_name = pf_prof_strdup(w, pf_procinfo_host_name(s->pi));
	if (!sampler_captures_running(s) && !s->pe.n)
		pf_procinfo_reap(s->pi, sampler_forget_pid, s);
	pf_symbolizer_trim(s->sym);
	return w;
}

const char *pf_sampler_capture_note(const struct pf_sampler *s, unsigned slot)
{
	return slot < PF_SAMPLER_CAPTURES ? s->cap_note[slot] : "";
}
