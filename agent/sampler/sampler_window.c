/* sampler_window.c — see sampler_bpf.h and sampler_int.h: windows and the span triggers'
 * sample ring. */
#include "sampler/sampler_int.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interp/python_unwind.h"
#include "interp/v8_unwind.h"
#include "sampler/procinfo.h"
#include "sampler/sample_ring.h"
#include "symbolize/symbolize.h"
#include "unwind/unwinder.h"

/* ---- windows ------------------------------------------------------------------------------ */

static bool keep_pid(void *ctx, uint32_t pid)
{
	struct pf_sampler *s = ctx;
	const struct pf_proc *p = pf_procinfo_get(s->pi, pid);
	return p ? sampler_proc_allowed(s, p) : !sampler_need_filter(s);
}

static bool interp_frame(const struct pf_prof_frame *f)
{
	return f->kind == PF_FRAME_PYTHON || f->kind == PF_FRAME_V8JS || f->kind == PF_FRAME_JVM;
}

int sampler_resolve(void *ctx, uint32_t pid, struct pf_prof_window *w, struct pf_prof_process *p,
		   struct pf_prof_frame *frames, size_t n)
{
	struct pf_sampler *s = ctx;
	int rc = pf_procinfo_attrs(s->pi, pid, w, p);
	if (rc < 0)
		return rc;
	size_t n_py = 0;
	for (size_t i = 0; i < n; i++)
		n_py += interp_frame(&frames[i]);
	if (!n_py)
		return pf_symbolizer_resolve(s->sym, pid, w, p, frames, n);
	/* the symbolizer gets the native and kernel frames only (a Python or JS frame's address
	 * is no code address), the Python frames their names from the process's code objects,
	 * the JS frames theirs from its V8 heap, the Java frames theirs from its JVM's metadata */
	_cleanup_free_ struct pf_prof_frame *nat = malloc((n - n_py + 1) * sizeof(*nat));
	if (!nat)
		return -ENOMEM;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (!interp_frame(&frames[i]))
			nat[k++] = frames[i];
	rc = pf_symbolizer_resolve(s->sym, pid, w, p, nat, k);
	if (rc < 0)
		return rc;
	k = 0;
	for (size_t i = 0; i < n; i++)
		if (!interp_frame(&frames[i]))
			frames[i] = nat[k++];
	for (size_t i = 0; i < SAMPLER_WALKERS && rc >= 0; i++)
		rc = s->walkers[i].ops->name(s->walkers[i].w, pid, w, frames, n);
	return rc;
}

void sampler_walkers_forget(struct pf_sampler *s, uint32_t pid)
{
	for (size_t i = 0; i < SAMPLER_WALKERS; i++)
		s->walkers[i].ops->forget(s->walkers[i].w, pid);
}

void sampler_forget_pid(void *ctx, uint32_t pid)
{
	struct pf_sampler *s = ctx;
	pf_symbolizer_forget(s->sym, pid);
	sampler_walkers_forget(s, pid);
}

static void reap_exited(struct pf_sampler *s);

int sampler_close_capture(struct pf_sampler *s, struct pf_agg *agg, uint64_t start, uint32_t hz,
			  struct pf_prof_window **out)
{
	sampler_refresh_clock(s);
	uint64_t end = pf_clock_ns(CLOCK_REALTIME);
	if (end <= start)
		end = start + 1;
	struct pf_agg_hooks hooks = {.resolve = sampler_resolve, .ctx = s};
	return pf_agg_close(agg, start, end, hz, &hooks, out);
}

bool sampler_captures_running(const struct pf_sampler *s)
{
	for (size_t i = 0; i < PF_SAMPLER_CAPTURES; i++)
		if (s->cap[i].used)
			return true;
	return false;
}

/* The off-CPU samples of [start, end) into *off (NULL when there are none), beside the CPU
 * window. A failure drops them (counted in last_error): the CPU window stays good. */
static void close_off_cpu(struct pf_sampler *s, uint64_t start, uint64_t end, uint32_t hz,
			  const struct pf_agg_hooks *hooks, struct pf_prof_window **off)
{
	struct pf_agg_stats st;
	*off = NULL;
	if (!s->off_agg)
		return;
	pf_agg_stats(s->off_agg, &st);
	if (!st.pending)
		return;
	int rc = pf_agg_close(s->off_agg, start, end, hz, hooks, off);
	if (rc < 0) {
		s->last_error = rc;
		return;
	}
	if (!(*off)->n_processes) {
		pf_prof_window_free(*off);
		*off = NULL;
		return;
	}
	(*off)->host_name = pf_prof_strdup(*off, pf_procinfo_host_name(s->pi));
}

/* Closes the samples before `end` (unix ns; 0 = now) into *out, the off-CPU ones into *off. */
static int close_into(struct pf_sampler *s, uint64_t end, uint32_t hz, struct pf_prof_window **out,
		      struct pf_prof_window **off, struct pf_error *err)
{
	ring_buffer__consume(s->rb);
	sampler_refresh_clock(s);
	if (!end)
		end = pf_clock_ns(CLOCK_REALTIME);
	if (end <= s->window_start)
		end = s->window_start + 1;
	struct pf_agg_hooks hooks = {.keep = keep_pid, .resolve = sampler_resolve, .ctx = s};
	int rc = pf_agg_close(s->agg, s->window_start, end, hz, &hooks, out);
	if (rc < 0) {
		s->last_error = rc;
		return pf_error_set(err, rc, "", "closing the window: %s", strerror(-rc));
	}
	uint64_t lost = sampler_lost_total(s);
	(*out)->lost_samples = lost - s->lost_at_close;
	(*out)->host_name = pf_prof_strdup(*out, pf_procinfo_host_name(s->pi));
	s->lost_at_close = lost;
	close_off_cpu(s, s->window_start, end, hz, &hooks, off);
	s->window_start = end;
	/* processes that exited are symbolized now: let them go (unless a capture still needs
	 * them: its window closes later; or the span triggers' ring still has samples of them) */
	if (!sampler_captures_running(s))
		reap_exited(s);
	for (size_t i = 0; i < SAMPLER_WALKERS; i++)
		s->walkers[i].ops->closed(s->walkers[i].w);
	/* per-window symbolization state (DWARF) goes; freed heap goes back to the system when
	 * the window freed more than its usual churn (pf/heap.h) */
	pf_symbolizer_trim(s->sym);
	pf_heap_give_back(&s->heap, PF_HEAP_TRIM_SLACK);
	return 0;
}

int sampler_cut_window(struct pf_sampler *s, uint64_t end, uint32_t hz, struct pf_error *err)
{
	while (s->n_ready > SAMPLER_MAX_READY - 2) { /* nobody collects: drop the oldest */
		pf_prof_window_free(s->ready[0]);
		memmove(s->ready, s->ready + 1, (s->n_ready - 1) * sizeof(s->ready[0]));
		s->n_ready--;
	}
	struct pf_prof_window *w, *off;
	int rc = close_into(s, end, hz, &w, &off, err);
	if (rc == 0) {
		s->ready[s->n_ready++] = w;
		if (off)
			s->ready[s->n_ready++] = off;
	}
	return rc;
}

struct pf_prof_window *pf_sampler_close_window(struct pf_sampler *s, struct pf_error *err)
{
	return pf_sampler_close_window_at(s, 0, err);
}

struct pf_prof_window *pf_sampler_close_window_at(struct pf_sampler *s, uint64_t end_unix_ns,
						  struct pf_error *err)
{
	if (end_unix_ns) {
		uint64_t now = pf_clock_ns(CLOCK_REALTIME);
		s->windows_held++;
		s->windows_held_ns += now > end_unix_ns ? now - end_unix_ns : 0;
	}
	int rc = sampler_cut_window(s, end_unix_ns, s->freq_hz, err);
	if (rc < 0) {
		errno = -rc;
		return NULL;
	}
	return pf_sampler_next_window(s);
}

bool pf_sampler_lines_building(struct pf_sampler *s)
{
	return pf_symbolizer_lines_building(s->sym);
}

struct pf_prof_window *pf_sampler_next_window(struct pf_sampler *s)
{
	if (!s->n_ready)
		return NULL;
	struct pf_prof_window *w = s->ready[0];
	memmove(s->ready, s->ready + 1, (s->n_ready - 1) * sizeof(s->ready[0]));
	s->n_ready--;
	return w;
}

/* ---- span triggers: the sample ring ------------------------------------------------------- */

int pf_sampler_set_ring(struct pf_sampler *s, uint32_t lookback_seconds, size_t max_bytes,
			struct pf_error *err)
{
	if (!lookback_seconds) {
		pf_sample_ring_free(s->ring);
		s->ring = NULL;
	} else if (s->ring) {
		pf_sample_ring_set_limits(s->ring, lookback_seconds, max_bytes);
	} else if (!(s->ring = pf_sample_ring_new(lookback_seconds, max_bytes))) {
		return pf_error_set(err, -ENOMEM, "", "out of memory for the sample ring");
	}
	return sampler_apply_running(s, s->freq_hz, err);
}

int pf_sampler_ring_off_cpu(struct pf_sampler *s, bool off_cpu, struct pf_error *err)
{
	bool old = s->ring_off_cpu;
	s->ring_off_cpu = off_cpu;
	int rc = sampler_off_cpu_update(s, err);
	if (rc < 0) {
		s->ring_off_cpu = old;
		sampler_off_cpu_update(s, NULL);
	}
	return rc;
}

/* The pids of the ring, ascending, for keep_in_ring(). */
struct ring_pids {
	uint32_t *v;
	size_t n;
};

static int u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static bool keep_in_ring(void *ctx, uint32_t pid)
{
	struct ring_pids *r = ctx;
	return r->n && bsearch(&pid, r->v, r->n, sizeof(pid), u32_cmp);
}

static void reap_exited(struct pf_sampler *s)
{
	struct ring_pids r = {0};
	struct pf_sample_ring_stats st;
	if (s->ring) {
		pf_sample_ring_stats(s->ring, &st);
		if (st.samples && !(r.v = malloc(st.samples * sizeof(*r.v))))
			return; /* out of memory: keep everything until the next try */
		r.n = st.samples ? pf_sample_ring_pids(s->ring, r.v, st.samples) : 0;
	}
	pf_procinfo_reap_if(s->pi, s->ring ? keep_in_ring : NULL, &r, sampler_forget_pid, s);
	free(r.v);
}

void pf_sampler_reap(struct pf_sampler *s)
{
	reap_exited(s);
}

uint64_t pf_sampler_drained_unix_ns(const struct pf_sampler *s)
{
	return s->drained_unix_ns;
}

/* The samples of a cut, and the frequencies they were taken at (a window has one period: the
 * one most of them have). */
struct cut {
	struct pf_agg *agg;
	enum pf_prof_type type;
	uint64_t start;
	uint32_t hz[4];
	uint64_t n[4];
};

static int cut_add(void *ctx, const struct pf_agg_sample *s, uint32_t hz)
{
	struct cut *c = ctx;
	if (!hz) { /* a wait: the part of it in the range (it ended before the range's end) */
		if (c->type == PF_PROF_CPU)
			return 0;
		struct pf_agg_sample w = *s;
		w.weight = pf_min(s->weight, s->ts_unix_ns - c->start);
		int rc = pf_agg_add(c->agg, &w);
		return rc == -ENOMEM ? rc : 0;
	}
	if (c->type == PF_PROF_OFF_CPU)
		return 0;
	for (size_t i = 0; i < PF_ARRAY_SIZE(c->hz); i++) {
		if (!c->n[i] || c->hz[i] == hz) {
			c->hz[i] = hz;
			c->n[i]++;
			break;
		}
	}
	struct pf_agg_sample t = *s;
	t.weight = 1000000000u / hz; /* wall: a tick weighs its period (cpu: unused) */
	int rc = pf_agg_add(c->agg, &t);
	return rc == -ENOMEM ? rc : 0;
}

int pf_sampler_cut(struct pf_sampler *s, uint32_t pid, uint32_t tid, uint64_t start_unix_ns,
		   uint64_t end_unix_ns, enum pf_prof_type type, struct pf_prof_window **out,
		   struct pf_error *err)
{
	*out = NULL;
	if (!s->ring)
		return pf_error_set(err, -ENOENT, "", "no sample ring (no span trigger enabled)");
	if (type != PF_PROF_CPU && type != PF_PROF_OFF_CPU && type != PF_PROF_WALL)
		return pf_error_set(err, -EOPNOTSUPP, "", "no %s profiles from the sample ring",
				    pf_prof_type_name(type));
	if (end_unix_ns <= start_unix_ns)
		end_unix_ns = start_unix_ns + 1;
	struct pf_agg_options ao = {.off_cpu = type == PF_PROF_OFF_CPU,
				    .wall = type == PF_PROF_WALL};
	struct cut c = {.agg = pf_agg_new(&ao), .type = type, .start = start_unix_ns};
	if (!c.agg)
		return pf_error_set(err, -ENOMEM, "", "out of memory");
	int rc = pf_sample_ring_cut(s->ring, pid, tid, start_unix_ns, end_unix_ns, cut_add, &c);
	uint32_t hz = s->freq_hz;
	for (size_t i = 0, best = 0; i < PF_ARRAY_SIZE(c.hz); i++)
		if (c.n[i] > best) {
			best = c.n[i];
			hz = c.hz[i];
		}
	struct pf_agg_hooks hooks = {.resolve = sampler_resolve, .ctx = s};
	if (rc >= 0)
		rc = pf_agg_close(c.agg, start_unix_ns, end_unix_ns, hz, &hooks, out);
	pf_agg_free(c.agg);
	pf_symbolizer_trim(
	    s->sym); /* as after a window: DWARF handles go, resolved addresses stay */
	if (rc < 0)
		return pf_error_set(err, rc, "", "cutting the span's samples: %s", strerror(-rc));
	(*out)->host_name = pf_prof_strdup(*out, pf_procinfo_host_name(s->pi));
	return 0;
}

size_t pf_sampler_ring_procs(struct pf_sampler *s, struct pf_sampler_ring_proc *out, size_t cap)
{
	if (!s->ring || !cap)
		return 0;
	_cleanup_free_ uint32_t *pids = malloc(cap * sizeof(*pids));
	if (!pids)
		return 0;
	size_t n = pf_sample_ring_pids(s->ring, pids, cap);
	for (size_t i = 0; i < n; i++) {
		const struct pf_proc *p = pf_procinfo_get(s->pi, pids[i]);
		const char *name = p ? (p->service_name ? p->service_name : p->exe_name) : NULL;
		out[i].pid = pids[i];
		snprintf(out[i].service_name, sizeof(out[i].service_name), "%s", name ? name : "");
	}
	return n;
}

int pf_sampler_ring_stats(struct pf_sampler *s, struct pf_sample_ring_stats *out)
{
	if (!s->ring)
		return -ENOENT;
	pf_sample_ring_stats(s->ring, out);
	return 0;
}
