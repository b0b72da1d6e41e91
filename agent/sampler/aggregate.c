/* aggregate.c — see aggregate.h. */
#include "sampler/aggregate.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sampler/bpf/cpu_sampler.h" /* PF_PY_IS_FRAME: the kernel's word for a Python frame */
#include "pf/array.h"
#include "pf/compiler.h"
#include "pf/hash.h"

#define DEFAULT_MAX_SAMPLES 262144
#define NONE UINT32_MAX

struct raw {
	uint64_t ts;
	uint32_t pid, tid;
	uint32_t stack;
	uint32_t cpu;
	char comm[16];
	uint64_t weight;  /* off-CPU; alloc: estimated bytes */
	uint64_t objects; /* alloc: estimated objects */
	uint8_t reason;   /* off-CPU; alloc: 1 while live */
};

struct stack {
	uint64_t hash;
	uint32_t nk, nu;
	uint64_t *ips; /* nk kernel then nu user, leaf first each */
};

struct pf_agg {
	size_t max_samples;
	bool off_cpu, wall;
	bool alloc;
	int64_t alloc_period;
	struct raw *s;
	size_t n, cap;
	struct stack *st;
	size_t n_st, cap_st;
	uint32_t *slots; /* open addressing, stack index + 1, 0 = empty */
	size_t n_slots;
	uint64_t added, dropped;
};

static uint64_t stack_hash(const uint64_t *k, uint32_t nk, const uint64_t *u, uint32_t nu)
{
	uint64_t h = pf_hash_combine(nk, nu);
	for (uint32_t i = 0; i < nk; i++)
		h = pf_hash_combine(h, k[i]);
	for (uint32_t i = 0; i < nu; i++)
		h = pf_hash_combine(h, u[i]);
	return h;
}

static int rehash(struct pf_agg *agg, size_t n_slots)
{
	uint32_t *slots = calloc(n_slots, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < agg->n_st; i++) {
		size_t j = agg->st[i].hash & (n_slots - 1);
		while (slots[j])
			j = (j + 1) & (n_slots - 1);
		slots[j] = (uint32_t)i + 1;
	}
	free(agg->slots);
	agg->slots = slots;
	agg->n_slots = n_slots;
	return 0;
}

static int intern(struct pf_agg *agg, const struct pf_agg_sample *s, uint32_t *id)
{
	uint64_t h = stack_hash(s->kstack, s->n_kstack, s->ustack, s->n_ustack);
	size_t mask = agg->n_slots - 1, j = h & mask;
	for (; agg->slots[j]; j = (j + 1) & mask) {
		struct stack *t = &agg->st[agg->slots[j] - 1];
		if (t->hash == h && t->nk == s->n_kstack && t->nu == s->n_ustack &&
		    (!s->n_kstack || !memcmp(t->ips, s->kstack, s->n_kstack * sizeof(uint64_t))) &&
		    (!s->n_ustack ||
		     !memcmp(t->ips + t->nk, s->ustack, s->n_ustack * sizeof(uint64_t)))) {
			*id = agg->slots[j] - 1;
			return 0;
		}
	}
	if (PF_ARRAY_GROW(agg->st, agg->cap_st, agg->n_st + 1, 256) < 0)
		return -ENOMEM;
	size_t n = (size_t)s->n_kstack + s->n_ustack;
	uint64_t *ips = malloc((n ? n : 1) * sizeof(*ips));
	if (!ips)
		return -ENOMEM;
	if (s->n_kstack)
		memcpy(ips, s->kstack, s->n_kstack * sizeof(*ips));
	if (s->n_ustack)
		memcpy(ips + s->n_kstack, s->ustack, s->n_ustack * sizeof(*ips));
	agg->st[agg->n_st] = (struct stack){h, s->n_kstack, s->n_ustack, ips};
	agg->slots[j] = (uint32_t)agg->n_st + 1;
	*id = (uint32_t)agg->n_st++;
	if (agg->n_st * 2 > agg->n_slots)
		return rehash(agg, agg->n_slots * 2);
	return 0;
}

int pf_agg_add(struct pf_agg *agg, const struct pf_agg_sample *s)
{
	if (agg->n >= agg->max_samples) {
		agg->dropped++;
		return -ENOSPC;
	}
	if (agg->n == agg->cap) {
		size_t nc = agg->cap ? agg->cap * 2 : 1024;
		if (nc > agg->max_samples)
			nc = agg->max_samples;
		struct raw *ns = realloc(agg->s, nc * sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		agg->s = ns;
		agg->cap = nc;
	}
	uint32_t id;
	int rc = intern(agg, s, &id);
	if (rc < 0)
		return rc;
	struct raw *r = &agg->s[agg->n++];
	memset(r, 0, sizeof(*r));
	r->ts = s->ts_unix_ns;
	r->pid = s->pid;
	r->tid = s->tid;
	r->stack = id;
	r->cpu = s->cpu;
	r->weight = s->weight > INT64_MAX ? INT64_MAX : s->weight;
	r->objects = s->objects > INT64_MAX ? INT64_MAX : s->objects;
	r->reason = agg->wall ? 0 : s->reason;
	if (s->comm) {
		size_t l = strnlen(s->comm, sizeof(r->comm) - 1);
		memcpy(r->comm, s->comm, l);
	}
	agg->added++;
	return 0;
}

int pf_agg_add_index(struct pf_agg *agg, const struct pf_agg_sample *s, size_t *idx)
{
	int rc = pf_agg_add(agg, s);
	if (rc == 0)
		*idx = agg->n - 1;
	return rc;
}

int pf_agg_set_reason(struct pf_agg *agg, size_t idx, uint8_t reason)
{
	if (idx >= agg->n)
		return -ENOENT;
	agg->s[idx].reason = reason;
	return 0;
}

/* qsort has no context argument: the sort key is copied next to the index. */
struct ord {
	uint32_t pid, tid, stack, idx;
	uint64_t ts;
	uint32_t reason;
};

static int ord_cmp(const void *a, const void *b)
{
	const struct ord *x = a, *y = b;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->stack != y->stack)
		return x->stack < y->stack ? -1 : 1;
	if (x->reason != y->reason)
		return x->reason < y->reason ? -1 : 1;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return 0;
}

static bool same_run(const struct ord *x, const struct ord *y)
{
	return x->tid == y->tid && x->stack == y->stack && x->reason == y->reason;
}

static const struct pf_prof_label off_reason_label[2] = {
	{.key = "profleet.off_cpu.reason", .str = "blocked"},
	{.key = "profleet.off_cpu.reason", .str = "preempted"},
};

/* A weighted (off-CPU or wall) sample of ord[i, e): the weight of each timestamp, their sum,
 * and for off-CPU the reason. */
static int weighted_values(const struct pf_agg *agg, struct pf_prof_window *w, const struct ord *o,
			   size_t i, size_t e, struct pf_prof_sample *s)
{
	int64_t *ev = pf_prof_alloc(w, (e - i) * sizeof(*ev));
	int64_t *sum = pf_prof_alloc(w, sizeof(*sum));
	if (!ev || !sum)
		return -ENOMEM;
	for (size_t k = i; k < e; k++) {
		ev[k - i] = (int64_t)agg->s[o[k].idx].weight;
		*sum = *sum > INT64_MAX - ev[k - i] ? INT64_MAX : *sum + ev[k - i];
	}
	s->values = sum;
	s->event_values = ev;
	if (!agg->off_cpu)
		return 0;
	s->n_labels = 1;
	s->labels = &off_reason_label[o[i].reason ? 1 : 0];
	return 0;
}

static int64_t sat_add(int64_t a, int64_t b)
{
	return a > INT64_MAX - b ? INT64_MAX : a + b;
}

/* An allocation sample of ord[i, e): alloc_objects, alloc_space, inuse_objects, inuse_space
 * summed over its allocations, the inuse ones over those still live. */
static int alloc_values(const struct pf_agg *agg, struct pf_prof_window *w, const struct ord *o,
			size_t i, size_t e, struct pf_prof_sample *s)
{
	int64_t *v = pf_prof_alloc(w, 4 * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t k = i; k < e; k++) {
		const struct raw *r = &agg->s[o[k].idx];
		v[0] = sat_add(v[0], (int64_t)r->objects);
		v[1] = sat_add(v[1], (int64_t)r->weight);
		if (r->reason) {
			v[2] = sat_add(v[2], (int64_t)r->objects);
			v[3] = sat_add(v[3], (int64_t)r->weight);
		}
	}
	s->values = v;
	s->n_timestamps = 0; /* four sample types: no per-event values */
	s->timestamps = NULL;
	return 0;
}

struct fkey {
	uint64_t addr;
	uint32_t kind;
	uint32_t idx_plus1; /* 0 = empty */
};

/* Builds one process from ord[a, b) (one pid). */
static int build_process(struct pf_agg *agg, struct pf_prof_window *w, const struct ord *o,
			 size_t a, size_t b, uint32_t *local, uint64_t start,
			 const struct pf_agg_hooks *hooks, struct pf_prof_process *p)
{
	/* unique stacks of this process */
	size_t n_stacks = 0, frame_refs = 0;
	_cleanup_free_ uint32_t *ustacks = malloc((b - a) * sizeof(*ustacks));
	if (!ustacks)
		return -ENOMEM;
	for (size_t i = a; i < b; i++) {
		uint32_t s = o[i].stack;
		if (local[s] != NONE)
			continue;
		local[s] = (uint32_t)n_stacks;
		ustacks[n_stacks++] = s;
		frame_refs += (size_t)agg->st[s].nk + agg->st[s].nu;
	}

	size_t n_ft = 16;
	while (n_ft < frame_refs * 2)
		n_ft *= 2;
	_cleanup_free_ struct fkey *ft = calloc(n_ft, sizeof(*ft));
	struct pf_prof_frame *frames = pf_prof_alloc(w, (frame_refs ? frame_refs : 1) * sizeof(*frames));
	struct pf_prof_stack *stacks = pf_prof_alloc(w, n_stacks * sizeof(*stacks));
	int rc = -ENOMEM;
	if (!ft || !frames || !stacks)
		goto out;
	size_t n_frames = 0;
	for (size_t k = 0; k < n_stacks; k++) {
		const struct stack *st = &agg->st[ustacks[k]];
		uint32_t n = st->nk + st->nu;
		uint32_t *fi = pf_prof_alloc(w, (n ? n : 1) * sizeof(*fi));
		if (!fi)
			goto out;
		for (uint32_t i = 0; i < n; i++) {
			uint64_t addr = st->ips[i];
			uint32_t kind = i < st->nk		? PF_FRAME_KERNEL
					: PF_PY_IS_FRAME(addr) ? PF_FRAME_PYTHON
					: PF_V8_IS_FRAME(addr) ? PF_FRAME_V8JS
					: PF_JVM_IS_FRAME(addr) ? PF_FRAME_JVM
							       : PF_FRAME_NATIVE;
			size_t j = pf_hash_combine(addr, kind) & (n_ft - 1);
			while (ft[j].idx_plus1 && (ft[j].addr != addr || ft[j].kind != kind))
				j = (j + 1) & (n_ft - 1);
			if (!ft[j].idx_plus1) {
				ft[j] = (struct fkey){addr, kind, (uint32_t)n_frames + 1};
				frames[n_frames] = (struct pf_prof_frame){.address = addr,
									  .mapping = -1,
									  .kind = (uint8_t)kind};
				n_frames++;
			}
			fi[i] = ft[j].idx_plus1 - 1;
		}
		stacks[k] = (struct pf_prof_stack){n, fi};
	}

	/* samples: one per (tid, stack, reason) run */
	size_t n_samples = 0;
	for (size_t i = a; i < b; i++)
		if (i == a || !same_run(&o[i], &o[i - 1]))
			n_samples++;
	struct pf_prof_sample *samples = pf_prof_alloc(w, n_samples * sizeof(*samples));
	if (!samples)
		goto out;
	size_t si = 0;
	for (size_t i = a; i < b;) {
		size_t e = i + 1;
		while (e < b && same_run(&o[e], &o[i]))
			e++;
		struct pf_prof_sample *s = &samples[si++];
		uint64_t *ts = pf_prof_alloc(w, (e - i) * sizeof(*ts));
		if (!ts)
			goto out;
		for (size_t k = i; k < e; k++)
			ts[k - i] = o[k].ts < start ? start : o[k].ts;
		s->stack = local[o[i].stack];
		s->tid = o[i].tid;
		const char *comm = agg->s[o[i].idx].comm;
		if (comm[0] && !(s->thread_name = pf_prof_strdup(w, comm)))
			goto out;
		s->count = e - i;
		s->n_timestamps = (uint32_t)(e - i);
		s->timestamps = ts;
		if ((agg->off_cpu || agg->wall) && weighted_values(agg, w, o, i, e, s) < 0)
			goto out;
		if (agg->alloc && alloc_values(agg, w, o, i, e, s) < 0)
			goto out;
		i = e;
	}

	p->pid = o[a].pid;
	p->frames = frames;
	p->n_frames = n_frames;
	p->stacks = stacks;
	p->n_stacks = n_stacks;
	p->samples = samples;
	p->n_samples = n_samples;
	rc = 0;
	if (hooks && hooks->resolve)
		rc = hooks->resolve(hooks->ctx, p->pid, w, p, frames, n_frames);
out:
	for (size_t k = 0; k < n_stacks; k++)
		local[ustacks[k]] = NONE;
	return rc;
}

/* Drops the samples before end and the stacks nobody uses any more. Cannot fail once the
 * two arrays are allocated, so a close either completes or leaves everything in place. */
static int keep_after(struct pf_agg *agg, uint64_t end)
{
	size_t cap = agg->cap_st ? agg->cap_st : 1;
	uint32_t *remap = malloc(cap * sizeof(*remap));
	struct stack *nst = malloc(cap * sizeof(*nst));
	if (!remap || !nst) {
		free(remap);
		free(nst);
		return -ENOMEM;
	}
	memset(remap, 0xff, cap * sizeof(*remap));
	size_t n = 0, n_st = 0;
	for (size_t i = 0; i < agg->n; i++) {
		struct raw r = agg->s[i];
		if (r.ts < end)
			continue;
		if (remap[r.stack] == NONE) {
			nst[n_st] = agg->st[r.stack];
			remap[r.stack] = (uint32_t)n_st++;
		}
		r.stack = remap[r.stack];
		agg->s[n++] = r;
	}
	for (size_t i = 0; i < agg->n_st; i++)
		if (remap[i] == NONE)
			free(agg->st[i].ips);
	free(remap);
	free(agg->st);
	agg->st = nst;
	agg->n_st = n_st;
	agg->n = n;
	/* the slot table keeps its size; rebuild it in place */
	memset(agg->slots, 0, agg->n_slots * sizeof(*agg->slots));
	for (size_t i = 0; i < agg->n_st; i++) {
		size_t j = agg->st[i].hash & (agg->n_slots - 1);
		while (agg->slots[j])
			j = (j + 1) & (agg->n_slots - 1);
		agg->slots[j] = (uint32_t)i + 1;
	}
	/* give memory back after a burst */
	if (agg->cap > 4096 && agg->n < agg->cap / 4) {
		struct raw *ns = realloc(agg->s, (agg->cap / 2) * sizeof(*ns));
		if (ns) {
			agg->s = ns;
			agg->cap /= 2;
		}
	}
	return 0;
}

int pf_agg_close(struct pf_agg *agg, uint64_t start, uint64_t end, uint32_t frequency_hz,
		 const struct pf_agg_hooks *hooks, struct pf_prof_window **out)
{
	*out = NULL;
	struct pf_prof_window *w = pf_prof_window_new();
	if (!w)
		return -ENOMEM;
	w->start_unix_ns = start;
	w->end_unix_ns = end;
	w->frequency_hz = frequency_hz;
	if (agg->off_cpu) {
		static const struct pf_prof_value_type off_cpu = {"off_cpu", "nanoseconds"};
		w->n_sample_types = 1;
		w->sample_types = &off_cpu;
		w->period_type = off_cpu;
		w->period = 1;
	} else if (agg->wall) {
		static const struct pf_prof_value_type wall = {"wall", "nanoseconds"};
		w->n_sample_types = 1;
		w->sample_types = &wall;
		w->period_type = wall;
		w->period = frequency_hz ? 1000000000 / frequency_hz : 1;
	}
	if (agg->alloc) {
		/* pprof's heap profile types, in Go's order */
		static const struct pf_prof_value_type alloc[4] = {{"alloc_objects", "count"},
								   {"alloc_space", "bytes"},
								   {"inuse_objects", "count"},
								   {"inuse_space", "bytes"}};
		w->n_sample_types = 4;
		w->sample_types = alloc;
		w->period_type = (struct pf_prof_value_type){"space", "bytes"};
		w->period = agg->alloc_period;
		w->default_sample_type = "alloc_space";
	}

	size_t n_taken = 0;
	for (size_t i = 0; i < agg->n; i++)
		n_taken += agg->s[i].ts < end;
	_cleanup_free_ struct ord *o = malloc((n_taken ? n_taken : 1) * sizeof(*o));
	_cleanup_free_ uint32_t *local = malloc((agg->n_st ? agg->n_st : 1) * sizeof(*local));
	int rc = -ENOMEM;
	if (!o || !local)
		goto fail;
	memset(local, 0xff, (agg->n_st ? agg->n_st : 1) * sizeof(*local));
	size_t k = 0;
	for (size_t i = 0; i < agg->n; i++) {
		const struct raw *r = &agg->s[i];
		if (r->ts < end)
			o[k++] = (struct ord){r->pid, r->tid, r->stack, (uint32_t)i, r->ts,
					      agg->alloc ? 0 : r->reason};
	}
	qsort(o, n_taken, sizeof(*o), ord_cmp);

	size_t n_pids = 0;
	for (size_t i = 0; i < n_taken; i++)
		n_pids += i == 0 || o[i].pid != o[i - 1].pid;
	struct pf_prof_process *procs = pf_prof_alloc(w, (n_pids ? n_pids : 1) * sizeof(*procs));
	if (!procs)
		goto fail;
	size_t np = 0;
	for (size_t a = 0; a < n_taken;) {
		size_t b = a + 1;
		while (b < n_taken && o[b].pid == o[a].pid)
			b++;
		if (!hooks || !hooks->keep || hooks->keep(hooks->ctx, o[a].pid)) {
			rc = build_process(agg, w, o, a, b, local, start, hooks, &procs[np]);
			if (rc < 0)
				goto fail;
			np++;
		}
		a = b;
	}
	w->processes = procs;
	w->n_processes = np;
	rc = keep_after(agg, end);
	if (rc < 0)
		goto fail;
	*out = w;
	return 0;
fail:
	pf_prof_window_free(w);
	return rc;
}

struct pf_agg *pf_agg_new(const struct pf_agg_options *opt)
{
	struct pf_agg *agg = calloc(1, sizeof(*agg));
	if (!agg)
		return NULL;
	agg->max_samples = opt && opt->max_samples ? opt->max_samples : DEFAULT_MAX_SAMPLES;
	agg->off_cpu = opt && opt->off_cpu;
	agg->wall = opt && opt->wall && !agg->off_cpu;
	agg->alloc = opt && opt->alloc && !agg->off_cpu && !agg->wall;
	agg->alloc_period = opt ? opt->alloc_period : 0;
	if (rehash(agg, 512) < 0) {
		free(agg);
		errno = ENOMEM;
		return NULL;
	}
	return agg;
}

void pf_agg_free(struct pf_agg *agg)
{
	if (!agg)
		return;
	for (size_t i = 0; i < agg->n_st; i++)
		free(agg->st[i].ips);
	free(agg->st);
	free(agg->slots);
	free(agg->s);
	free(agg);
}

void pf_agg_stats(const struct pf_agg *agg, struct pf_agg_stats *out)
{
	out->added = agg->added;
	out->dropped = agg->dropped;
	out->pending = agg->n;
	out->stacks = agg->n_st;
}
