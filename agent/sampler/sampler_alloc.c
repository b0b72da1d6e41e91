/* sampler_alloc.c — see sampler_bpf.h ("Allocation captures") and sampler_int.h. The
 * allocator probes are uprobe_multi links, one per (process, allocator file), made with the
 * link_create call itself: the libbpf the agent builds against predates uprobe_multi and
 * session links (its bpf_link_create options have no uprobe_multi fields). */
#include "sampler/sampler_int.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pf/clock.h"
#include "sampler/alloc_syms.h"
#include "sampler/alloc_track.h"
#include "sampler/procinfo.h"
#include "symbolize/symbolize.h"

/* uapi values (linux/bpf.h of 6.13+): the agent's system headers may be older */
#define ALLOC_BPF_LINK_CREATE 28
#define ALLOC_BPF_TRACE_UPROBE_MULTI 48
#define ALLOC_BPF_TRACE_UPROBE_SESSION 57

/* union bpf_attr, its link_create.uprobe_multi part */
struct alloc_link_attr {
	uint32_t prog_fd;
	uint32_t target_fd;
	uint32_t attach_type;
	uint32_t flags;
	uint64_t path;
	uint64_t offsets;
	uint64_t ref_ctr_offsets;
	uint64_t cookies;
	uint32_t cnt;
	uint32_t um_flags;
	uint32_t pid;
	uint32_t pad;
};

#define ALLOC_LINKS_MAX (PF_ALLOC_PIDS_MAX * PF_ALLOC_FILES_MAX)

struct sampler_alloc {
	int links[ALLOC_LINKS_MAX];
	size_t n_links;
	uint32_t processes;
	uint64_t mean, guard;
	bool empty, tripped;
	uint64_t trip_rate;
	uint64_t start;		       /* unix ns */
	uint64_t base[7];	       /* per-CPU counts at the start (see counts()) */
	uint64_t last_calls, last_ns; /* the guard's previous look */
	uint64_t lost_start;
	struct pf_agg *agg;
	struct pf_alloc_track *live;
	uint64_t untracked, agg_lost;
};

void sampler_alloc_setup(struct pf_sampler *s, bool want)
{
	/* session uprobes are there when their kfunc is */
	bool ok = false;
	if (want) {
		struct btf *vm = btf__load_vmlinux_btf();
		ok = vm && btf__find_by_name_kind(vm, "bpf_session_is_return", BTF_KIND_FUNC) > 0;
		btf__free(vm);
	}
	s->alloc_prog = ok;
	bpf_program__set_autoload(s->skel->progs.alloc_probe, ok);
	bpf_program__set_autoload(s->skel->progs.alloc_empty, ok);
	if (ok) {
		bpf_program__set_expected_attach_type(s->skel->progs.alloc_probe,
						      ALLOC_BPF_TRACE_UPROBE_SESSION);
		bpf_program__set_expected_attach_type(s->skel->progs.alloc_empty,
						      ALLOC_BPF_TRACE_UPROBE_MULTI);
	}
}

/* calls, sampled, frees, live_full, failed, records, collisions over every CPU */
static int counts(struct pf_sampler *s, uint64_t out[7])
{
	size_t stride;
	int rc;
	memset(out, 0, 7 * sizeof(*out));
	_cleanup_free_ char *vals = sampler_percpu_read(s, &stride, &rc);
	if (!vals)
		return rc;
	for (int c = 0; c < s->n_cpus_possible; c++) {
		const struct pf_bpf_percpu *p = (const void *)(vals + (size_t)c * stride);
		out[0] += p->alloc_calls;
		out[1] += p->alloc_sampled;
		out[2] += p->alloc_frees;
		out[3] += p->alloc_live_full;
		out[4] += p->alloc_failed;
		out[5] += p->alloc_out;
		out[6] += p->alloc_collide;
	}
	return 0;
}

static int link_one(int prog_fd, uint32_t attach_type, uint32_t pid,
		    const struct pf_alloc_file *f)
{
	struct alloc_link_attr a = {0};
	a.prog_fd = (uint32_t)prog_fd;
	a.attach_type = attach_type;
	a.path = (uint64_t)(uintptr_t)f->path;
	a.offsets = (uint64_t)(uintptr_t)f->off;
	a.cookies = (uint64_t)(uintptr_t)f->kind;
	a.cnt = (uint32_t)f->n;
	a.pid = pid;
	long fd = syscall(__NR_bpf, ALLOC_BPF_LINK_CREATE, &a, sizeof(a));
	return fd < 0 ? -errno : (int)fd;
}

static void detach(struct sampler_alloc *a)
{
	for (size_t i = 0; i < a->n_links; i++)
		close(a->links[i]);
	a->n_links = 0;
}

/* Empties the kernel's alloc_live (bounded by its size): addresses of an earlier capture
 * would be matched to nothing, and fill it. */
static void live_clear(struct pf_sampler *s)
{
	sampler_map_clear(s->skel->maps.alloc_live, sizeof(__u64));
}

static void alloc_drop(struct pf_sampler *s)
{
	struct sampler_alloc *a = s->alloc;
	if (!a)
		return;
	detach(a);
	pf_agg_free(a->agg);
	pf_alloc_track_free(a->live);
	free(a);
	s->alloc = NULL;
	live_clear(s);
}

int pf_sampler_alloc_start(struct pf_sampler *s, const uint32_t *pids, size_t n,
			   const struct pf_alloc_options *o, struct pf_error *err)
{
	if (!s->alloc_prog)
		return pf_error_set(err, -ENOTSUP, "profile_type",
				    "alloc profiles need session uprobes (Linux 6.13 or later)");
	if (s->alloc)
		return pf_error_set(err, -EBUSY, "profile_type", "an alloc capture is running");
	if (!n || n > PF_ALLOC_PIDS_MAX)
		return pf_error_set(err, -EINVAL, "processes",
				    "an alloc capture probes 1..%d processes, got %zu",
				    PF_ALLOC_PIDS_MAX, n);
	struct sampler_alloc *a = calloc(1, sizeof(*a));
	if (!a)
		return pf_error_set(err, -ENOMEM, "", "out of memory");
	a->mean = o && o->sample_bytes ? o->sample_bytes : PF_ALLOC_SAMPLE_BYTES_DEFAULT;
	a->guard = o && o->max_calls_per_second ? o->max_calls_per_second
						: PF_ALLOC_GUARD_DEFAULT;
	a->empty = o && o->bench_empty;
	struct pf_agg_options ao = {.max_samples = s->opt.max_samples,
				    .alloc = true,
				    .alloc_period = (int64_t)a->mean};
	a->agg = pf_agg_new(&ao);
	a->live = pf_alloc_track_new(PF_ALLOC_LIVE_MAX);
	s->alloc = a;
	if (!a->agg || !a->live) {
		alloc_drop(s);
		return pf_error_set(err, -ENOMEM, "", "out of memory");
	}
	live_clear(s);
	uint64_t gaps[PF_ALLOC_GAPS];
	pf_alloc_gaps(a->mean, gaps, PF_ALLOC_GAPS);
	for (size_t i = 0; i < PF_ALLOC_GAPS; i++)
		s->skel->bss->alloc_gaps[i] = gaps[i];
	__atomic_fetch_add(&s->skel->bss->alloc_gen, 1, __ATOMIC_SEQ_CST);
	counts(s, a->base);
	a->lost_start = sampler_lost_total(s);
	sampler_refresh_clock(s);
	a->start = pf_clock_ns(CLOCK_REALTIME);
	a->last_ns = pf_clock_ns(CLOCK_MONOTONIC);
	a->last_calls = a->base[0];

	struct bpf_program *prog = a->empty ? s->skel->progs.alloc_empty
					    : s->skel->progs.alloc_probe;
	uint32_t type = a->empty ? ALLOC_BPF_TRACE_UPROBE_MULTI : ALLOC_BPF_TRACE_UPROBE_SESSION;
	int first_err = 0;
	struct pf_alloc_file *files = calloc(PF_ALLOC_FILES_MAX, sizeof(*files));
	if (!files) {
		alloc_drop(s);
		return pf_error_set(err, -ENOMEM, "", "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		size_t nf = 0;
		struct pf_error e2 = {0};
		if (pf_alloc_syms_find(pids[i], files, PF_ALLOC_FILES_MAX, &nf, &e2) < 0 || !nf)
			continue;
		size_t before = a->n_links;
		for (size_t k = 0; k < nf && a->n_links < ALLOC_LINKS_MAX; k++) {
			int fd = link_one(bpf_program__fd(prog), type, pids[i], &files[k]);
			if (fd < 0) {
				if (!first_err)
					first_err = fd;
				continue;
			}
			a->links[a->n_links++] = fd;
		}
		a->processes += a->n_links > before;
	}
	free(files);
	if (!a->n_links) {
		alloc_drop(s);
		if (first_err)
			return pf_error_set(err, first_err, "", "attach the allocator probes: %s",
					    strerror(-first_err));
		return pf_error_set(err, -ENOENT, "processes",
				    "none of the %zu processes maps an allocator the probes know "
				    "(malloc in libc, jemalloc, tcmalloc or the program)",
				    n);
	}
	return 0;
}

void pf_sampler_alloc_options(const struct pf_profcfg *cfg, struct pf_alloc_options *o)
{
	*o = (struct pf_alloc_options){.sample_bytes = cfg->alloc.sample_bytes,
				       .max_calls_per_second = cfg->alloc.max_calls_per_second};
}

uint64_t pf_sampler_alloc_samples(const struct pf_sampler *s)
{
	struct pf_agg_stats st;
	if (!s->alloc)
		return 0;
	pf_agg_stats(s->alloc->agg, &st);
	return st.pending;
}

bool pf_sampler_alloc_running(const struct pf_sampler *s)
{
	return s->alloc != NULL;
}

void sampler_alloc_record(struct pf_sampler *s, const struct pf_agg_sample *as, uint64_t size,
			  uint64_t addr, uint32_t flags)
{
	struct sampler_alloc *a = s->alloc;
	if (!a || as->ts_unix_ns < a->start)
		return;
	double bytes, objs;
	pf_alloc_weight(size, a->mean, &bytes, &objs);
	struct pf_agg_sample o = *as;
	o.weight = bytes >= 9.2e18 ? INT64_MAX : (uint64_t)(bytes + 0.5);
	o.objects = objs >= 9.2e18 ? INT64_MAX : (uint64_t)(objs + 0.5);
	bool tracked = !(flags & PF_SAMPLE_F_ALLOC_UNTRACKED);
	o.reason = tracked;
	size_t idx;
	int rc = pf_agg_add_index(a->agg, &o, &idx);
	if (rc < 0) {
		a->agg_lost++;
		if (rc != -ENOSPC)
			s->last_error = rc;
		return;
	}
	if (!tracked) {
		a->untracked++;
		return;
	}
	if (pf_alloc_track_put(a->live, addr, idx) < 0) {
		a->untracked++;
		pf_agg_set_reason(a->agg, idx, 0);
	}
}

void sampler_alloc_freed(struct pf_sampler *s, uint64_t addr)
{
	struct sampler_alloc *a = s->alloc;
	size_t idx;
	if (a && pf_alloc_track_take(a->live, addr, &idx) == 0)
		pf_agg_set_reason(a->agg, idx, 0);
}

void sampler_alloc_poll(struct pf_sampler *s)
{
	struct sampler_alloc *a = s->alloc;
	if (!a || !a->n_links)
		return;
	uint64_t now = pf_clock_ns(CLOCK_MONOTONIC), c[7];
	if (now - a->last_ns < 1000000000ull || counts(s, c) < 0)
		return;
	uint64_t rate = (c[0] - a->last_calls) * 1000000000ull / (now - a->last_ns);
	a->last_calls = c[0];
	a->last_ns = now;
	if (rate <= a->guard)
		return;
	detach(a);
	a->tripped = true;
	a->trip_rate = rate;
}

struct pf_prof_window *pf_sampler_alloc_stop(struct pf_sampler *s, struct pf_alloc_result *res,
					     struct pf_error *err)
{
	struct sampler_alloc *a = s->alloc;
	if (!a) {
		pf_error_set(err, -EINVAL, "", "no alloc capture runs");
		errno = EINVAL;
		return NULL;
	}
	detach(a);
	ring_buffer__consume(s->rb); /* what the probes wrote before they went */
	uint64_t c[7];
	counts(s, c);
	struct pf_prof_window *w = NULL;
	int rc = sampler_close_capture(s, a->agg, a->start, 0, &w);
	if (res) {
		memset(res, 0, sizeof(*res));
		res->processes = a->processes;
		res->calls = c[0] - a->base[0];
		res->sampled = c[1] - a->base[1];
		res->frees = c[2] - a->base[2];
		res->untracked = a->untracked;
		res->failed = c[4] - a->base[4];
		res->lost = sampler_lost_total(s) - a->lost_start + a->agg_lost;
		res->collided = c[6] - a->base[6];
		res->live = pf_alloc_track_count(a->live);
		res->guard_tripped = a->tripped;
		res->guard_rate = a->trip_rate;
		if (a->tripped)
			snprintf(res->note, sizeof(res->note),
				 "alloc probes detached early: %llu probed calls/s passed the "
				 "limit of %llu (alloc.max_calls_per_second); the profile covers "
				 "the time before",
				 (unsigned long long)a->trip_rate, (unsigned long long)a->guard);
		else if (res->untracked)
			snprintf(res->note, sizeof(res->note),
				 "%llu sampled allocations could not be tracked to their free "
				 "(more than %u live at once): inuse leaves them out",
				 (unsigned long long)res->untracked, PF_ALLOC_LIVE_MAX);
	}
	alloc_drop(s);
	if (rc < 0) {
		pf_error_set(err, rc, "", "closing the alloc capture's window: %s", strerror(-rc));
		errno = -rc;
		return NULL;
	}
	w->host_name = pf_prof_strdup(w, pf_procinfo_host_name(s->pi));
	pf_symbolizer_trim(s->sym);
	return w;
}

void sampler_alloc_free(struct pf_sampler *s)
{
	alloc_drop(s);
}
