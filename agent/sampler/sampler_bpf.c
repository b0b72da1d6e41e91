/* sampler_bpf.c — see sampler_bpf.h. The only code touching the BPF skeleton. */
#include "sampler/sampler_bpf.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sampler/aggregate.h"
#include "sampler/bpf/cpu_sampler.h"
#include "cpu_sampler.skel.h"
#include "pf/heap.h"
#include "pf/log.h"
#include "interp/python_unwind.h"
#include "sampler/procinfo.h"
#include "sampler/sample_ring.h"
#include "symbolize/symbolize.h"
#include "unwind/unwinder.h"

#define MAX_READY 8

_Static_assert(PF_SAMPLER_CAPTURES == PF_CAPTURE_SLOTS, "capture slot counts differ");
_Static_assert(PF_PY_UNWIND_MINORS == 5 && PF_PY_UNWIND_UNSUPPORTED_KEPT == 8 &&
		       PF_PY_UNWIND_MSG_LEN == 144,
	       "python counts of struct pf_sampler_stats differ");

/* One capture (pf_sampler_capture_start). */
struct cap_slot {
	bool used;
	uint32_t hz;	 /* its own frequency (<= cap_hz) */
	uint32_t acc;	 /* thinning: keeps hz of every cap_hz ticks */
	uint64_t start;	 /* unix ns */
	struct pf_agg *agg;
};

/* A set of cpu-clock perf events, one per online CPU, running one program. */
struct perf_set {
	int *fds;
	struct bpf_link **links;
	uint32_t n;
};

/* Processes found gone when their first samples were read (GONE_SLOTS, direct-mapped, for
 * GONE_MS): see pid_gone(). */
#define GONE_SLOTS 256
#define GONE_MS 2000

struct pf_sampler {
	struct pf_sampler_options opt;
	struct cpu_sampler_bpf *skel;
	struct bpf_link *proc_links[3];
	struct ring_buffer *rb;
	int stats_fd; /* BPF_ENABLE_STATS: run time is counted while open */
	bool ksym_prog;			/* resolve_ksyms loaded: kernel frames resolved by it */
	struct pf_bpf_ksym_req *ksym_req; /* its request buffer, allocated at first use */
	struct pf_heap_trim heap;	  /* give-backs at window closes */
	uint64_t helper_samples;	  /* samples of the table builders' children dropped */
	uint64_t setup_cpu_ns; /* thread CPU time of new processes' set-up (setup_begin/end) */
	uint64_t windows_held, windows_held_ns; /* pf_sampler_close_window_at with an end */

	int n_cpus_possible;
	struct gone_pid {
		uint32_t pid;
		uint64_t ms;
	} gone[GONE_SLOTS]; /* see pid_gone() */
	struct perf_set pe;  /* continuous sampling: do_sample */
	struct perf_set cpe; /* captures: do_capture at cap_hz */
	uint32_t cap_hz;
	struct cap_slot cap[PF_SAMPLER_CAPTURES];

	uint32_t freq_hz;
	bool enabled, triggered_mode, trigger_on;

	struct pf_procinfo *pi;
	struct pf_symbolizer *sym;
	struct pf_agg *agg;

	uint32_t self_pid;
	int64_t mono_to_unix; /* unix ns = mono ns + this */
	uint64_t window_start;
	uint64_t lost_at_close; /* lost (kernel + user) counted at the last close */

	struct pf_prof_window *ready[MAX_READY];
	size_t n_ready;
	int last_error;

	struct pf_unwinder *unw;     /* .eh_frame tables in the kernel, NULL when walking by
				      * frame pointers only */
	const char *unw_off;         /* why unw is NULL */
	char *unw_cache_dir;
	uint64_t dwarf_samples;

	struct pf_py_unwind *py;     /* CPython processes: kernel entries and frame names */
	uint64_t py_map_errors;      /* py_procs updates refused */

	struct pf_sample_ring *ring; /* span triggers: recent samples, NULL when off */
	uint64_t drained_unix_ns;    /* when the last poll started draining */
};

/* ---- clocks ------------------------------------------------------------------------------- */

static uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Set-up work: what meeting a process costs once (its /proc attributes, its maps, its
 * unwind tables), apart from the steady cost of sampling it. Its thread CPU time is counted
 * in setup_cpu_ns, which the overhead guard judges on a budget of its own; only paths that
 * do such work take the clock (a system call). */
static uint64_t setup_begin(void)
{
	return clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

static void setup_end(struct pf_sampler *s, uint64_t t0)
{
	uint64_t t = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	s->setup_cpu_ns += t > t0 ? t - t0 : 0;
}

/* bpf_ktime_get_ns() is CLOCK_MONOTONIC; take the tightest of a few paired reads. */
static void refresh_clock(struct pf_sampler *s)
{
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 3; i++) {
		uint64_t m1 = clock_ns(CLOCK_MONOTONIC), r = clock_ns(CLOCK_REALTIME),
			 m2 = clock_ns(CLOCK_MONOTONIC);
		if (m2 - m1 < best) {
			best = m2 - m1;
			s->mono_to_unix = (int64_t)(r - (m1 + (m2 - m1) / 2));
		}
	}
}

/* ---- libbpf logs into ours ---------------------------------------------------------------- */

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	enum pf_log_level l = level == LIBBPF_WARN ? PF_LOG_WARN
			      : level == LIBBPF_INFO ? PF_LOG_DEBUG
						     : PF_LOG_DEBUG;
	if ((int)l > pf_log_level_current)
		return 0;
	char line[1024];
	vsnprintf(line, sizeof(line), fmt, ap);
	pf_log_emit_raw(l, "libbpf", line);
	return 0;
}

/* ---- pid verdicts ------------------------------------------------------------------------- */

static bool proc_allowed(struct pf_sampler *s, const struct pf_proc *p)
{
	if (p->pid == s->self_pid && !s->opt.include_self)
		return false;
	return p->allowed;
}

static void push_verdict(struct pf_sampler *s, const struct pf_proc *p)
{
	__u32 key = p->pid;
	__u8 v = proc_allowed(s, p) ? PF_FILTER_ALLOW : PF_FILTER_DENY;
	bpf_map__update_elem(s->skel->maps.pid_filter, &key, sizeof(key), &v, sizeof(v), BPF_ANY);
	/* after the update: drops the verdicts the kernel cached per CPU */
	__atomic_fetch_add(&s->skel->bss->filter_gen, 1, __ATOMIC_SEQ_CST);
}

static int push_one(void *ctx, const struct pf_proc *p)
{
	if (!p->exited)
		push_verdict(ctx, p);
	return 0;
}

/* The agent itself is skipped in the kernel by a tgid compare (skip_tgid); the allow-map is
 * only consulted while include/exclude filters are active. */
static bool need_kernel_filter(struct pf_sampler *s)
{
	return pf_procinfo_filtering(s->pi);
}

static void sync_filter_map(struct pf_sampler *s)
{
	if (!need_kernel_filter(s)) {
		s->skel->bss->filter_on = 0;
		return;
	}
	/* Verdicts for the processes that exist already (also refreshes entries that exec'd
	 * while nothing was filtered); exec/fork/exit keep the table current from here on.
	 * Without filters nobody needs them before a process's first sample. */
	if (!s->skel->bss->filter_on)
		pf_procinfo_scan(s->pi);
	pf_procinfo_foreach(s->pi, push_one, s);
	s->skel->bss->filter_on = 1;
}

/* ---- ring buffer callbacks ---------------------------------------------------------------- */

static const struct pf_proc *known_proc(struct pf_sampler *s, uint32_t pid, const char *comm)
{
	const struct pf_proc *p = pf_procinfo_get(s->pi, pid);
	if (!p || p->stale) {
		uint64_t t0 = setup_begin();
		p = pf_procinfo_read(s->pi, pid, comm, true);
		if (p && need_kernel_filter(s))
			push_verdict(s, p);
		setup_end(s, t0);
	}
	return p;
}

static uint64_t mono_ms(void)
{
	return clock_ns(CLOCK_MONOTONIC) / 1000000;
}

/* True when pid's /proc entry was found gone less than GONE_MS ago. A process that lives a
 * few milliseconds leaves its samples in the ring after its exit; without this each of them
 * would try its /proc reads again (on a host whose processes come and go, most of the
 * agent's failed system calls). A fork or an exec of the pid forgets it (pid reuse). */
static bool pid_gone(struct pf_sampler *s, uint32_t pid)
{
	const struct gone_pid *g = &s->gone[pid % GONE_SLOTS];
	return g->pid == pid && pid && mono_ms() - g->ms < GONE_MS;
}

static void gone_set(struct pf_sampler *s, uint32_t pid, bool gone)
{
	struct gone_pid *g = &s->gone[pid % GONE_SLOTS];
	if (gone)
		*g = (struct gone_pid){pid, mono_ms()};
	else if (g->pid == pid)
		g->pid = 0;
}

/* Captures pid's maps for the symbolizer at its first user stack, unless it is known to be
 * gone; notes it gone when its maps are. */
static void capture_maps(struct pf_sampler *s, uint32_t pid)
{
	if (pf_symbolizer_has(s->sym, pid) || pid_gone(s, pid))
		return;
	uint64_t t0 = setup_begin();
	if (pf_symbolizer_capture(s->sym, pid) == -ENOENT)
		gone_set(s, pid, true);
	setup_end(s, t0);
}

/* A process is given its unwind tables at its first sample this long after its first one:
 * most of a build's processes are gone by then, and each load costs tens of trie updates
 * (and as many at the exit). Its first samples are walked by frame pointers. */
#define UNWIND_LOAD_AFTER_MS 50

/* The unwind tables of a sampled process: loaded at a sample UNWIND_LOAD_AFTER_MS after its
 * first with a user stack, and again (at most every 200 ms, backing off to 10 s while reloads
 * find nothing new) when the kernel's walk met an address of no known mapping —
 * a library loaded after the first load — or a second after a load the build budget cut
 * short. */
static void unwind_seen(struct pf_sampler *s, const struct pf_bpf_sample *h)
{
	if (!s->unw || !h->ustack_len)
		return;
	if (h->flags & PF_SAMPLE_F_DWARF)
		s->dwarf_samples++;
	bool deferred;
	uint32_t retry_ms;
	uint64_t at = pf_unwinder_loaded_ms(s->unw, h->pid, &deferred, &retry_ms), now = mono_ms();
	if (!at) {
		/* first load: once the process has run for UNWIND_LOAD_AFTER_MS */
		uint64_t seen = pf_unwinder_seen_ms(s->unw, h->pid);
		if (!seen || now < seen + UNWIND_LOAD_AFTER_MS)
			return;
	} else if (!(deferred && now >= at + 1000) &&
		   !((h->flags & PF_SAMPLE_F_UNWIND_MISS) && now >= at + retry_ms)) {
		return;
	}
	uint64_t t0 = setup_begin();
	if (at)
		pf_symbolizer_capture(s->sym, h->pid); /* the maps changed */
	int rc = pf_unwinder_load(s->unw, s->sym, h->pid);
	setup_end(s, t0);
	/* a full trie (-ENOSPC, -E2BIG) leaves the rest of the process to frame pointers; it is
	 * in the unwinder's last_error, not the sampler's health */
	if (rc < 0 && rc != -ENOENT && rc != -ENOSPC && rc != -E2BIG)
		s->last_error = rc;
}

/* CPython: detected at a sample of a process (python_unwind.h decides when), its entry then
 * written for the kernel's walk; the Python frames of a sample are queued to be named while
 * the process lives. */
static void python_seen(struct pf_sampler *s, const struct pf_bpf_sample *h, const uint64_t *uips,
			uint32_t ulen)
{
	if (!h->ustack_len)
		return;
	struct pf_bpf_py_proc e;
	if (pf_py_unwind_seen(s->py, h->pid, mono_ms(), &e) == 1 &&
	    bpf_map__update_elem(s->skel->maps.py_procs, &h->pid, sizeof(h->pid), &e, sizeof(e),
				 BPF_ANY) < 0)
		s->py_map_errors++;
	if (h->flags & PF_SAMPLE_F_PYTHON)
		pf_py_unwind_note(s->py, h->pid, uips, ulen);
}

/* A do_capture record: into the aggregation of every capture whose bit the process carries,
 * thinned to that capture's own frequency. */
static void capture_sample(struct pf_sampler *s, const struct pf_bpf_sample *h,
			   const uint64_t *ips, uint32_t ulen, const char *comm)
{
	uint32_t mask = h->flags >> PF_SAMPLE_CAPTURE_SHIFT;
	if (h->ustack_len)
		capture_maps(s, h->pid);
	unwind_seen(s, h);
	python_seen(s, h, ips + h->kstack_len, ulen);
	struct pf_agg_sample as = {
		.ts_unix_ns = h->ts_ns + (uint64_t)s->mono_to_unix,
		.pid = h->pid,
		.tid = h->tid,
		.cpu = h->cpu,
		.comm = comm,
		.kstack = ips,
		.n_kstack = h->kstack_len,
		.ustack = ips + h->kstack_len,
		.n_ustack = ulen,
	};
	for (unsigned i = 0; i < PF_SAMPLER_CAPTURES; i++) {
		struct cap_slot *c = &s->cap[i];
		if (!(mask & (1u << i)) || !c->used || as.ts_unix_ns < c->start)
			continue;
		c->acc += c->hz;
		if (c->acc < s->cap_hz)
			continue;
		c->acc -= s->cap_hz;
		int rc = pf_agg_add(c->agg, &as);
		if (rc < 0 && rc != -ENOSPC)
			s->last_error = rc;
	}
}

static int on_sample(void *ctx, void *data, size_t size)
{
	struct pf_sampler *s = ctx;
	struct pf_bpf_sample h;
	if (size < sizeof(h))
		return 0;
	memcpy(&h, data, sizeof(h));
	size_t n = (size_t)h.kstack_len + h.ustack_len;
	if (size < sizeof(h) + n * 8)
		return 0;
	/* the agent's own helpers (table builders), forked: the agent is not profiled */
	if ((s->unw && h.pid == pf_unwinder_helper_pid(s->unw)) ||
	    h.pid == pf_symbolizer_helper_pid(s->sym)) {
		s->helper_samples++;
		return 0;
	}
	const uint64_t *ips = (const uint64_t *)((const char *)data + sizeof(h));
	/* The kernel's frame-pointer walk stores whatever return address it finds while the
	 * frame chain stays in user memory: code built without frame pointers yields a tail of
	 * zero (or page-zero) "addresses", up to the depth limit. No code runs in the first page,
	 * so the user stack ends at the first such entry (the leaf, at [0], is the sampled IP). */
	uint32_t ulen = h.ustack_len;
	for (uint32_t i = 1; i < ulen; i++) {
		if (ips[h.kstack_len + i] < 4096) {
			ulen = i;
			break;
		}
	}
	char comm[PF_COMM_LEN + 1];
	memcpy(comm, h.comm, PF_COMM_LEN);
	comm[PF_COMM_LEN] = 0;

	/* the thread's comm stands in for the process's when it has no executable */
	const struct pf_proc *p = pid_gone(s, h.pid) ? pf_procinfo_get(s->pi, h.pid)
						     : known_proc(s, h.pid, h.pid == h.tid ? comm : NULL);
	if (h.flags & PF_SAMPLE_F_CAPTURE) {
		capture_sample(s, &h, ips, ulen, comm);
		return 0;
	}
	if (p && !proc_allowed(s, p))
		return 0; /* decided after the kernel recorded it (PF_SAMPLE_F_UNKNOWN) */
	/* First user stack of a process: capture its maps while it lives (kernel-only stacks,
	 * e.g. kernel threads, need none). */
	if (h.ustack_len)
		capture_maps(s, h.pid);
	unwind_seen(s, &h);
	python_seen(s, &h, ips + h.kstack_len, ulen);
	struct pf_agg_sample as = {
		.ts_unix_ns = h.ts_ns + (uint64_t)s->mono_to_unix,
		.pid = h.pid,
		.tid = h.tid,
		.cpu = h.cpu,
		.comm = comm,
		.kstack = ips,
		.n_kstack = h.kstack_len,
		.ustack = ips + h.kstack_len,
		.n_ustack = ulen,
	};
	if (s->ring) {
		/* refusals are counted in its stats */
		pf_sample_ring_add(s->ring, &as, s->freq_hz);
		if (s->triggered_mode && !s->trigger_on)
			return 0; /* between captures: the ring only */
	}
	int rc = pf_agg_add(s->agg, &as);
	if (rc < 0 && rc != -ENOSPC)
		s->last_error = rc;
	return 0;
}

static int on_event(void *ctx, void *data, size_t size)
{
	struct pf_sampler *s = ctx;
	struct pf_bpf_proc_event e;
	if (size < sizeof(e))
		return 0;
	memcpy(&e, data, sizeof(e));
	const struct pf_proc *p = NULL;
	uint64_t t0;
	bool filtering = need_kernel_filter(s);
	if (e.type == PF_PROC_EXEC || e.type == PF_PROC_FORK)
		gone_set(s, e.pid, false);
	switch (e.type) {
	case PF_PROC_EXEC:
		/* the old maps are void; the full maps (shared libraries are mapped after
		 * exec) are captured at the first sample */
		pf_symbolizer_forget(s->sym, e.pid);
		pf_py_unwind_forget(s->py, e.pid); /* the kernel dropped its entry */
		if (s->unw)
			pf_unwinder_forget(s->unw, e.pid);
		if (!filtering) {
			/* nobody needs a verdict now: read the attributes when sampled, so
			 * processes that exec and die unsampled (most of a build) cost nothing */
			pf_procinfo_invalidate(s->pi, e.pid);
			return 0;
		}
		t0 = setup_begin();
		p = pf_procinfo_read(s->pi, e.pid, e.comm, false);
		setup_end(s, t0);
		break;
	case PF_PROC_FORK:
		/* a copy of a known parent costs no /proc read; an unknown one is read when
		 * the child is first sampled, unless a verdict is needed now */
		if (!filtering && !pf_procinfo_get(s->pi, e.ppid))
			return 0;
		p = pf_procinfo_fork(s->pi, e.ppid, e.pid);
		break;
	case PF_PROC_EXIT:
		pf_procinfo_exited(s->pi, e.pid);
		gone_set(s, e.pid, true); /* its samples read later need no /proc reads */
		if (s->unw) /* no stale entries: the pid may come back as another process */
			pf_unwinder_forget(s->unw, e.pid);
		return 0;
	default:
		return 0;
	}
	if (p && need_kernel_filter(s))
		push_verdict(s, p);
	return 0;
}

int pf_sampler_fd(const struct pf_sampler *s)
{
	return ring_buffer__epoll_fd(s->rb);
}

/* Tells the kernel the table builders' current children, so that their ticks are not
 * recorded (on_sample drops what came before it knew). */
static void sync_helpers(struct pf_sampler *s)
{
	uint32_t h[2] = {s->unw ? pf_unwinder_helper_pid(s->unw) : 0,
			 pf_symbolizer_helper_pid(s->sym)};
	for (int i = 0; i < 2; i++)
		if (s->skel->bss->skip_helper[i] != h[i])
			s->skel->bss->skip_helper[i] = h[i];
}

int pf_sampler_poll(struct pf_sampler *s, int timeout_ms)
{
	/* timeout 0: the caller's own poll(2) watched the fd; an epoll_wait would only tell the
	 * consume below what it finds out itself */
	int rc = timeout_ms ? ring_buffer__poll(s->rb, timeout_ms) : 0;
	if (rc == -EINTR)
		rc = 0;
	if (rc < 0)
		return rc;
	/* pod attribution: verdicts taken before a process's pod reached the cache */
	if (s->skel->bss->filter_on)
		pf_procinfo_refresh_source(s->pi, push_one, s);
	/* samples do not wake us one by one (see cpu_sampler.bpf.c): drain on every call */
	refresh_clock(s);
	uint64_t t = clock_ns(CLOCK_REALTIME);
	int n = ring_buffer__consume(s->rb);
	if (s->unw) {
		/* building and reading tables (and forking their builders) is set-up */
		uint64_t t0 = setup_begin();
		pf_unwinder_tick(s->unw);
		setup_end(s, t0);
	}
	pf_py_unwind_tick(s->py);
	sync_helpers(s);
	if (n >= 0)
		s->drained_unix_ns = t;
	return n < 0 ? n : rc + n;
}

/* ---- perf events -------------------------------------------------------------------------- */

static void perf_close(struct perf_set *ps)
{
	for (uint32_t i = 0; i < ps->n; i++) {
		bpf_link__destroy(ps->links[i]);
		close(ps->fds[i]);
	}
	ps->n = 0;
}

/* Opens one cpu-clock event per online CPU at hz into ps, each running prog. */
static int perf_open(struct pf_sampler *s, struct perf_set *ps, struct bpf_program *prog,
		     uint32_t hz, struct pf_error *err)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_period = 1000000000ull / hz, /* cpu-clock counts nanoseconds */
	};
	for (int cpu = 0; cpu < s->n_cpus_possible; cpu++) {
		int fd = (int)syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0) {
			if (errno == ENODEV) /* offline CPU */
				continue;
			int e = -errno;
			perf_close(ps);
			return pf_error_set(err, e, "", "perf_event_open(cpu-clock, cpu %d): %s", cpu,
					    strerror(-e));
		}
		struct bpf_link *l = bpf_program__attach_perf_event(prog, fd);
		if (!l) {
			int e = -errno;
			close(fd);
			perf_close(ps);
			return pf_error_set(err, e, "", "attach perf_event program: %s", strerror(-e));
		}
		ps->fds[ps->n] = fd;
		ps->links[ps->n++] = l;
	}
	if (!ps->n)
		return pf_error_set(err, -ENODEV, "", "no online CPU accepted a perf event");
	return 0;
}

static int perf_set_period(struct perf_set *ps, uint32_t hz, const char *key,
			   struct pf_error *err)
{
	uint64_t period = 1000000000ull / hz;
	for (uint32_t i = 0; i < ps->n; i++)
		if (ioctl(ps->fds[i], PERF_EVENT_IOC_PERIOD, &period) < 0)
			return pf_error_set(err, -errno, key, "PERF_EVENT_IOC_PERIOD: %s",
					    strerror(errno));
	return 0;
}

/* ---- config ------------------------------------------------------------------------------- */

static bool want_running(const struct pf_sampler *s)
{
	return s->enabled && (!s->triggered_mode || s->trigger_on || s->ring);
}

static int cut_window(struct pf_sampler *s, uint64_t end, uint32_t hz, struct pf_error *err);

/* Brings the perf events in line with enabled/mode/trigger and the frequency. */
static int apply_running(struct pf_sampler *s, uint32_t hz, struct pf_error *err)
{
	bool want = want_running(s);
	int rc = 0;
	if (want && !s->pe.n) {
		rc = perf_open(s, &s->pe, s->skel->progs.do_sample, hz, err);
	} else if (!want && s->pe.n) {
		perf_close(&s->pe);
	} else if (want && hz != s->freq_hz) {
		rc = perf_set_period(&s->pe, hz, "profiling.sampling.frequency_hz", err);
	}
	if (rc == 0)
		s->freq_hz = hz;
	return rc;
}

/* profiling.interpreters.python: off forgets every process and empties the kernel's map (its
 * samples keep their native stacks); on detects processes again at their next samples. */
static void python_enable(struct pf_sampler *s, bool on)
{
	if (pf_py_unwind_enabled(s->py) == on)
		return;
	pf_py_unwind_enable(s->py, on);
	if (on)
		return;
	struct bpf_map *m = s->skel->maps.py_procs;
	uint32_t key, next;
	while (bpf_map__get_next_key(m, NULL, &next, sizeof(next)) == 0) {
		key = next;
		if (bpf_map__delete_elem(m, &key, sizeof(key), 0) < 0)
			break;
	}
}

int pf_sampler_set_config(struct pf_sampler *s, const struct pf_profcfg *cfg, struct pf_error *err)
{
	if (!cfg || cfg->frequency_hz < 1 || cfg->frequency_hz > 1000)
		return pf_error_set(err, -EINVAL, "profiling.sampling.frequency_hz",
				    "must be 1..1000");
	int rc = pf_procinfo_set_filters(s->pi, cfg->include, cfg->n_include, cfg->exclude,
					 cfg->n_exclude, err);
	if (rc < 0)
		return rc;
	sync_filter_map(s);
	python_enable(s, cfg->interpreters.python);
	/* the unwind rows may take an eighth of limits.max_memory_mb (the sample ring a quarter) */
	if (s->unw && cfg->limits.max_memory_mb)
		pf_unwinder_set_rows_limit(s->unw, (uint64_t)cfg->limits.max_memory_mb * 1024 * 1024 /
							   8 / sizeof(struct pf_bpf_unwind_row));

	bool old_enabled = s->enabled, old_mode = s->triggered_mode;
	uint32_t old_hz = s->freq_hz;
	bool was_running = s->pe.n > 0;
	s->enabled = cfg->enabled;
	s->triggered_mode = cfg->mode == PF_MODE_TRIGGERED;
	/* drain what the old period produced before switching */
	ring_buffer__consume(s->rb);
	rc = apply_running(s, cfg->frequency_hz, err);
	if (rc < 0) {
		s->enabled = old_enabled;
		s->triggered_mode = old_mode;
		s->last_error = rc;
		return rc;
	}
	/* A window has one sampling period: a new frequency closes what was sampled so far,
	 * cut at the moment of the switch (samples queued since then carry later times). */
	if (was_running && old_hz != s->freq_hz) {
		refresh_clock(s);
		rc = cut_window(s, clock_ns(CLOCK_REALTIME), old_hz, err);
	}
	return rc;
}

int pf_sampler_trigger(struct pf_sampler *s, bool on, struct pf_error *err)
{
	bool old = s->trigger_on;
	s->trigger_on = on;
	int rc = apply_running(s, s->freq_hz, err);
	if (rc < 0)
		s->trigger_on = old;
	return rc;
}

/* ---- windows ------------------------------------------------------------------------------ */

static bool keep_pid(void *ctx, uint32_t pid)
{
	struct pf_sampler *s = ctx;
	const struct pf_proc *p = pf_procinfo_get(s->pi, pid);
	return p ? proc_allowed(s, p) : !need_kernel_filter(s);
}

static int resolve(void *ctx, uint32_t pid, struct pf_prof_window *w, struct pf_prof_process *p,
		   struct pf_prof_frame *frames, size_t n)
{
	struct pf_sampler *s = ctx;
	int rc = pf_procinfo_attrs(s->pi, pid, w, p);
	if (rc < 0)
		return rc;
	size_t n_py = 0;
	for (size_t i = 0; i < n; i++)
		n_py += frames[i].kind == PF_FRAME_PYTHON;
	if (!n_py)
		return pf_symbolizer_resolve(s->sym, pid, w, p, frames, n);
	/* the symbolizer gets the native and kernel frames only (a Python frame's address is
	 * no code address), the Python frames their names from the process's code objects */
	_cleanup_free_ struct pf_prof_frame *nat = malloc((n - n_py + 1) * sizeof(*nat));
	if (!nat)
		return -ENOMEM;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (frames[i].kind != PF_FRAME_PYTHON)
			nat[k++] = frames[i];
	rc = pf_symbolizer_resolve(s->sym, pid, w, p, nat, k);
	if (rc < 0)
		return rc;
	k = 0;
	for (size_t i = 0; i < n; i++)
		if (frames[i].kind != PF_FRAME_PYTHON)
			frames[i] = nat[k++];
	return pf_py_unwind_name(s->py, pid, w, frames, n);
}

static void forget_pid(void *ctx, uint32_t pid)
{
	struct pf_sampler *s = ctx;
	pf_symbolizer_forget(s->sym, pid);
	pf_py_unwind_forget(s->py, pid);
}

static uint64_t lost_total(struct pf_sampler *s);
static void reap_exited(struct pf_sampler *s);

static bool captures_running(const struct pf_sampler *s)
{
	for (size_t i = 0; i < PF_SAMPLER_CAPTURES; i++)
		if (s->cap[i].used)
			return true;
	return false;
}

/* Closes the samples before `end` (unix ns; 0 = now) into *out. */
static int close_into(struct pf_sampler *s, uint64_t end, uint32_t hz, struct pf_prof_window **out,
		      struct pf_error *err)
{
	ring_buffer__consume(s->rb);
	refresh_clock(s);
	if (!end)
		end = clock_ns(CLOCK_REALTIME);
	if (end <= s->window_start)
		end = s->window_start + 1;
	struct pf_agg_hooks hooks = {.keep = keep_pid, .resolve = resolve, .ctx = s};
	int rc = pf_agg_close(s->agg, s->window_start, end, hz, &hooks, out);
	if (rc < 0) {
		s->last_error = rc;
		return pf_error_set(err, rc, "", "closing the window: %s", strerror(-rc));
	}
	uint64_t lost = lost_total(s);
	(*out)->lost_samples = lost - s->lost_at_close;
	(*out)->host_name = pf_prof_strdup(*out, pf_procinfo_host_name(s->pi));
	s->lost_at_close = lost;
	s->window_start = end;
	/* processes that exited are symbolized now: let them go (unless a capture still needs
	 * them: its window closes later; or the span triggers' ring still has samples of them) */
	if (!captures_running(s))
		reap_exited(s);
	pf_py_unwind_closed(s->py);
	/* per-window symbolization state (DWARF) goes; freed heap goes back to the system when
	 * the window freed more than its usual churn (pf/heap.h) */
	pf_symbolizer_trim(s->sym);
	pf_heap_give_back(&s->heap, PF_HEAP_TRIM_SLACK);
	return 0;
}

static int cut_window(struct pf_sampler *s, uint64_t end, uint32_t hz, struct pf_error *err)
{
	if (s->n_ready == MAX_READY) { /* nobody collects: drop the oldest */
		pf_prof_window_free(s->ready[0]);
		memmove(s->ready, s->ready + 1, (MAX_READY - 1) * sizeof(s->ready[0]));
		s->n_ready--;
	}
	struct pf_prof_window *w;
	int rc = close_into(s, end, hz, &w, err);
	if (rc == 0)
		s->ready[s->n_ready++] = w;
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
		uint64_t now = clock_ns(CLOCK_REALTIME);
		s->windows_held++;
		s->windows_held_ns += now > end_unix_ns ? now - end_unix_ns : 0;
	}
	int rc = cut_window(s, end_unix_ns, s->freq_hz, err);
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
	if (need_kernel_filter(s)) /* processes the scan found first: verdicts into the kernel */
		pf_procinfo_foreach(s->pi, push_one, s);
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

/* Brings the capture perf events to the highest frequency of the captures running (closed
 * when none runs). */
static int capture_events_apply(struct pf_sampler *s, struct pf_error *err)
{
	uint32_t hz = 0;
	for (size_t i = 0; i < PF_SAMPLER_CAPTURES; i++)
		if (s->cap[i].used)
			hz = pf_max(hz, s->cap[i].hz);
	int rc = 0;
	if (!hz) {
		perf_close(&s->cpe);
	} else if (!s->cpe.n) {
		rc = perf_open(s, &s->cpe, s->skel->progs.do_capture, hz, err);
	} else if (hz != s->cap_hz) {
		ring_buffer__consume(s->rb); /* ticks at the old rate are thinned at it */
		rc = perf_set_period(&s->cpe, hz, "frequency_hz", err);
	}
	if (rc == 0) {
		s->cap_hz = hz;
		for (size_t i = 0; i < PF_SAMPLER_CAPTURES; i++)
			s->cap[i].acc = 0;
	}
	return rc;
}

int pf_sampler_capture_start(struct pf_sampler *s, unsigned slot, uint32_t hz,
			     const uint32_t *pids, size_t n, struct pf_error *err)
{
	if (slot >= PF_SAMPLER_CAPTURES || hz < 1 || hz > 1000)
		return pf_error_set(err, -EINVAL, "", "bad capture slot or frequency");
	struct cap_slot *c = &s->cap[slot];
	if (c->used)
		return pf_error_set(err, -EBUSY, "", "capture slot %u in use", slot);
	if (!c->agg) {
		struct pf_agg_options ao = {.max_samples = s->opt.max_samples};
		c->agg = pf_agg_new(&ao);
		if (!c->agg)
			return pf_error_set(err, -ENOMEM, "", "out of memory");
	}
	refresh_clock(s);
	c->used = true;
	c->hz = hz;
	c->start = clock_ns(CLOCK_REALTIME);
	int rc = capture_pids_update(s, pids, n, slot);
	if (rc < 0)
		pf_error_set(err, rc, "", "capture pid map: %s", strerror(-rc));
	else
		rc = capture_events_apply(s, err);
	if (rc < 0) {
		capture_pids_clear(s, slot);
		c->used = false;
		capture_events_apply(s, NULL);
	}
	return rc;
}

uint64_t pf_sampler_capture_samples(const struct pf_sampler *s, unsigned slot)
{
	struct pf_agg_stats st;
	if (slot >= PF_SAMPLER_CAPTURES || !s->cap[slot].used)
		return 0;
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
	struct cap_slot *c = &s->cap[slot];
	capture_pids_clear(s, slot);
	ring_buffer__consume(s->rb); /* what was recorded before the bit went */
	refresh_clock(s);
	uint64_t end = clock_ns(CLOCK_REALTIME);
	if (end <= c->start)
		end = c->start + 1;
	struct pf_prof_window *w = NULL;
	struct pf_agg_hooks hooks = {.resolve = resolve, .ctx = s};
	int rc = pf_agg_close(c->agg, c->start, end, c->hz, &hooks, &w);
	c->used = false;
	capture_events_apply(s, NULL);
	if (rc < 0) {
		/* the samples stayed in the aggregation: drop them with it */
		pf_agg_free(c->agg);
		c->agg = NULL;
		pf_error_set(err, rc, "", "closing the capture's window: %s", strerror(-rc));
		errno = -rc;
		return NULL;
	}
	w->host_name = pf_prof_strdup(w, pf_procinfo_host_name(s->pi));
	if (!captures_running(s) && !s->pe.n)
		pf_procinfo_reap(s->pi, forget_pid, s);
	pf_symbolizer_trim(s->sym);
	return w;
}

/* ---- stats -------------------------------------------------------------------------------- */

static int read_counters(struct pf_sampler *s, uint64_t sum[PF_CNT_MAX])
{
	memset(sum, 0, PF_CNT_MAX * sizeof(sum[0]));
	size_t nc = (size_t)s->n_cpus_possible;
	/* every key of every CPU in one system call (BPF_MAP_LOOKUP_BATCH, Linux 5.6) */
	_cleanup_free_ uint64_t *all = calloc(PF_CNT_MAX * nc, sizeof(*all));
	if (!all)
		return -ENOMEM;
	__u32 keys[PF_CNT_MAX], out_batch = 0, count = PF_CNT_MAX;
	LIBBPF_OPTS(bpf_map_batch_opts, bo);
	int rc = bpf_map_lookup_batch(bpf_map__fd(s->skel->maps.counters), NULL, &out_batch, keys,
				      all, &count, &bo);
	if ((rc == 0 || errno == ENOENT) && count == PF_CNT_MAX) {
		for (__u32 i = 0; i < PF_CNT_MAX; i++)
			for (size_t c = 0; c < nc; c++)
				if (keys[i] < PF_CNT_MAX)
					sum[keys[i]] += all[i * nc + c];
		return 0;
	}
	_cleanup_free_ uint64_t *vals = calloc(nc, sizeof(*vals));
	if (!vals)
		return -ENOMEM;
	for (__u32 k = 0; k < PF_CNT_MAX; k++) {
		if (bpf_map__lookup_elem(s->skel->maps.counters, &k, sizeof(k), vals,
					 (size_t)s->n_cpus_possible * sizeof(*vals), 0) < 0)
			return -errno;
		for (int c = 0; c < s->n_cpus_possible; c++)
			sum[k] += vals[c];
	}
	return 0;
}

/* Adds the per-tick counts the sample program keeps in its per-CPU state (cpu_sampler.h,
 * struct pf_bpf_percpu) to sum. */
static int add_percpu_counts(struct pf_sampler *s, uint64_t sum[PF_CNT_MAX],
			     struct pf_sampler_stats *out)
{
	size_t stride = (sizeof(struct pf_bpf_percpu) + 7) & ~(size_t)7;
	_cleanup_free_ char *vals = calloc((size_t)s->n_cpus_possible, stride);
	__u32 zero = 0;
	if (!vals)
		return -ENOMEM;
	if (bpf_map__lookup_elem(s->skel->maps.scratch_map, &zero, sizeof(zero), vals,
				 (size_t)s->n_cpus_possible * stride, 0) < 0)
		return -errno;
	for (int c = 0; c < s->n_cpus_possible; c++) {
		const struct pf_bpf_percpu *p = (const void *)(vals + (size_t)c * stride);
		sum[PF_CNT_SAMPLES] += p->samples;
		sum[PF_CNT_CAPTURE] += p->captures;
		sum[PF_CNT_FILTERED] += p->filtered;
		if (out) {
			out->py_samples += p->py_samples;
			out->py_frames += p->py_frames;
			out->py_read_errors += p->py_read_errors;
			out->py_no_thread += p->py_no_thread;
		}
	}
	return 0;
}

static uint64_t lost_total(struct pf_sampler *s)
{
	uint64_t c[PF_CNT_MAX];
	struct pf_agg_stats as;
	pf_agg_stats(s->agg, &as);
	if (read_counters(s, c) < 0)
		return as.dropped;
	return c[PF_CNT_LOST_RB] + as.dropped;
}

struct profiled_ctx {
	struct pf_sampler *s;
	uint32_t *out;
	size_t cap, n;
};

static int profiled_one(void *ctx, const struct pf_proc *p)
{
	struct profiled_ctx *c = ctx;
	if (p->exited || !p->exe_path || !proc_allowed(c->s, p))
		return 0;
	if (c->n < c->cap)
		c->out[c->n] = p->pid;
	c->n++;
	return 0;
}

size_t pf_sampler_profiled_pids(struct pf_sampler *s, uint32_t *out, size_t cap)
{
	struct profiled_ctx c = {.s = s, .out = out, .cap = cap};
	pf_procinfo_foreach(s->pi, profiled_one, &c);
	return c.n;
}

/* Run time and count of each program (kernel BPF statistics), into out->progs and the sums. */
static void prog_run_stats(struct pf_sampler *s, struct pf_sampler_stats *out)
{
	struct bpf_program *progs[PF_SAMPLER_N_PROGS] = {
		s->skel->progs.do_sample,   s->skel->progs.handle_exec,
		s->skel->progs.handle_fork, s->skel->progs.handle_exit,
		s->skel->progs.resolve_ksyms, s->skel->progs.do_capture};
	for (int i = 0; i < PF_SAMPLER_N_PROGS; i++) {
		struct bpf_prog_info info;
		__u32 len = sizeof(info);
		memset(&info, 0, sizeof(info));
		out->progs[i].name = bpf_program__name(progs[i]);
		if (progs[i] == s->skel->progs.resolve_ksyms && !s->ksym_prog)
			continue; /* not loaded */
		if (bpf_obj_get_info_by_fd(bpf_program__fd(progs[i]), &info, &len) < 0)
			continue;
		out->progs[i].run_time_ns = info.run_time_ns;
		out->progs[i].run_cnt = info.run_cnt;
		out->bpf_run_time_ns += info.run_time_ns;
		out->bpf_run_cnt += info.run_cnt;
	}
}

int pf_sampler_bpf_run_time(struct pf_sampler *s, uint64_t *ns)
{
	struct pf_sampler_stats st;
	*ns = 0;
	if (s->stats_fd < 0)
		return -ENODATA;
	memset(&st, 0, sizeof(st));
	prog_run_stats(s, &st);
	*ns = st.bpf_run_time_ns;
	return 0;
}

uint64_t pf_sampler_setup_cpu_ns(const struct pf_sampler *s)
{
	return s->setup_cpu_ns + (s->py ? pf_py_unwind_detect_cpu_ns(s->py) : 0);
}

int pf_sampler_stats(struct pf_sampler *s, struct pf_sampler_stats *out)
{
	memset(out, 0, sizeof(*out));
	uint64_t c[PF_CNT_MAX];
	int rc = read_counters(s, c);
	if (rc == 0)
		rc = add_percpu_counts(s, c, out);
	if (rc < 0)
		return rc;
	out->running = s->pe.n > 0;
	out->frequency_hz = s->freq_hz;
	out->n_cpus = s->pe.n;
	out->samples = c[PF_CNT_SAMPLES];
	out->capture_samples = c[PF_CNT_CAPTURE];
	out->capture_hz = s->cpe.n ? s->cap_hz : 0;
	for (size_t i = 0; i < PF_SAMPLER_CAPTURES; i++)
		out->captures += s->cap[i].used;
	out->lost_kernel = c[PF_CNT_LOST_RB];
	out->filtered = c[PF_CNT_FILTERED];
	out->stack_errors = c[PF_CNT_STACK_ERR];
	out->lost_events = c[PF_CNT_LOST_EVENT];
	for (int i = 0; i < PF_CNT_T_N - PF_CNT_T_FILTER; i++)
		out->bench_part_ns[i] = c[PF_CNT_T_FILTER + i];
	out->bench_timed = c[PF_CNT_T_N];
	struct pf_agg_stats as;
	pf_agg_stats(s->agg, &as);
	out->lost_user = as.dropped;
	out->pending = as.pending;
	out->processes = pf_procinfo_count(s->pi);
	out->bpf_stats_enabled = s->stats_fd >= 0;

	prog_run_stats(s, out);
	struct pf_symbolizer_stats ss;
	pf_symbolizer_stats(s->sym, &ss);
	out->elf_cached = ss.elf_cached;
	out->elf_opened = ss.elf_opened;
	out->elf_evicted = ss.elf_evicted;
	out->sym_cache_hits = ss.cache_hits;
	out->frames_resolved = ss.frames_resolved;
	out->frames_unresolved = ss.frames_unresolved;
	out->line_tables = ss.line_tables;
	out->line_tables_bytes = ss.line_tables_bytes;
	out->line_builds = ss.line_builds;
	out->line_build_failed = ss.line_build_failed;
	out->line_build_cpu_ns = ss.line_build_cpu_ns;
	out->line_cache_hits = ss.line_cache_hits;
	out->line_build_max_rss_kb = ss.line_build_max_rss_kb;
	out->line_lookups = ss.line_lookups;
	out->line_deferred = ss.line_deferred;
	out->jit_maps = ss.jit_maps;
	out->jit_bytes = ss.jit_bytes;
	out->jit_frames = ss.jit_frames;
	out->jit_maps_refused = ss.jit_maps_refused;
	out->go_files = ss.go_files;
	out->names_cleaned = ss.names_cleaned;
	out->helper_samples = s->helper_samples;
	out->windows_held = s->windows_held;
	out->windows_held_ns = s->windows_held_ns;
	out->kernel_symbols_load_ns = ss.kernel_load_cpu_ns;
	out->kernel_resolver = ss.kernel_resolver;
	out->kernel_resolved = ss.kernel_resolved;
	out->kernel_resolve_cpu_ns = ss.kernel_resolve_cpu_ns;
	out->last_error = s->last_error;
	out->dwarf_unwind = s->unw != NULL;
	out->dwarf_unwind_off_reason = s->unw ? NULL : s->unw_off;
	out->dwarf_samples = s->dwarf_samples;
	struct pf_py_unwind_stats ps;
	pf_py_unwind_stats(s->py, &ps);
	out->python = pf_py_unwind_enabled(s->py);
	out->py_processes = ps.processes;
	memcpy(out->py_by_minor, ps.by_minor, sizeof(out->py_by_minor));
	out->py_unsupported = ps.unsupported;
	out->py_detected = ps.detected_total;
	out->py_detect_failed = ps.detect_failed;
	out->py_named = ps.named;
	out->py_name_failed = ps.name_failed;
	out->py_names_bytes = ps.names_bytes;
	out->py_map_errors = s->py_map_errors;
	out->py_n_unsupported_msg = ps.n_unsupported_msg;
	memcpy(out->py_unsupported_msg, ps.unsupported_msg, sizeof(out->py_unsupported_msg));
	if (s->unw) {
		struct pf_unwinder_stats us;
		pf_unwinder_stats(s->unw, &us);
		out->unwind_tables = us.tables;
		out->unwind_rows = us.rows;
		out->unwind_rows_cap = us.rows_cap;
		out->unwind_processes = us.processes;
		out->unwind_entries = us.entries;
		out->unwind_built = us.built;
		out->unwind_build_ns = us.build_ns;
		out->unwind_cache_hits = us.cache_hits;
		out->unwind_cache_bad = us.cache_bad;
		out->unwind_no_cfi = us.no_cfi;
		out->unwind_evicted = us.evicted;
		out->unwind_rows_full = us.rows_full;
		out->unwind_reloads = us.reloads;
		out->unwind_deferred = us.deferred;
		out->unwind_pending = us.pending;
		out->unwind_builder_runs = us.builder_runs;
		out->unwind_builder_killed = us.builder_killed;
	}
	return 0;
}

size_t pf_sampler_python_status(const struct pf_sampler_stats *st, char *out, size_t cap)
{
	if (!cap)
		return 0;
	out[0] = 0;
	size_t n = 0;
#define PUT(...)                                                                                   \
	do {                                                                                       \
		int k_ = snprintf(out + n, cap - n, __VA_ARGS__);                                  \
		n = k_ < 0 ? n : (size_t)k_ >= cap - n ? cap - 1 : n + (size_t)k_;                 \
	} while (0)
	if (!st->python) {
		PUT("python: off");
		return n;
	}
	if (!st->py_processes && !st->py_unsupported && !st->py_frames)
		return 0;
	PUT("python: %" PRIu64 " processes", st->py_processes);
	const char *sep = " (";
	for (unsigned i = 0; i < PF_PY_UNWIND_MINORS; i++) {
		if (!st->py_by_minor[i])
			continue;
		PUT("%s3.%u: %" PRIu64, sep, 9 + i, st->py_by_minor[i]);
		sep = ", ";
	}
	if (*sep == ',')
		PUT(")");
	PUT(", frames read %" PRIu64 ", read failures %" PRIu64 ", names %" PRIu64
	    ", not named %" PRIu64,
	    st->py_frames, st->py_read_errors, st->py_named, st->py_name_failed);
	for (unsigned i = 0; i < st->py_n_unsupported_msg && i < PF_PY_UNWIND_UNSUPPORTED_KEPT; i++)
		PUT("; %s", st->py_unsupported_msg[i]);
#undef PUT
	return n;
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

void pf_sampler_free(struct pf_sampler *s)
{
	if (!s)
		return;
	if (s->skel) {
		perf_close(&s->pe);
		perf_close(&s->cpe);
	}
	for (size_t i = 0; i < PF_SAMPLER_CAPTURES; i++)
		pf_agg_free(s->cap[i].agg);
	for (size_t i = 0; i < PF_ARRAY_SIZE(s->proc_links); i++)
		bpf_link__destroy(s->proc_links[i]);
	ring_buffer__free(s->rb);
	pf_unwinder_free(s->unw);
	free(s->unw_cache_dir);
	cpu_sampler_bpf__destroy(s->skel);
	free(s->ksym_req);
	if (s->stats_fd >= 0)
		close(s->stats_fd);
	for (size_t i = 0; i < s->n_ready; i++)
		pf_prof_window_free(s->ready[i]);
	pf_agg_free(s->agg);
	pf_sample_ring_free(s->ring);
	pf_symbolizer_free(s->sym);
	pf_py_unwind_free(s->py);
	pf_procinfo_free(s->pi);
	free(s->pe.fds);
	free(s->pe.links);
	free(s->cpe.fds);
	free(s->cpe.links);
	free(s);
}

/* pf_kernel_resolve_fn: one run of resolve_ksyms over a batch of kernel addresses. */
static int resolve_kernel(void *ctx, const uint64_t *addrs, size_t n,
			  char (*text)[PF_SYM_KTEXT_LEN])
{
	_Static_assert(PF_SYM_KRESOLVE_BATCH == PF_KSYM_BATCH, "batch sizes differ");
	_Static_assert(PF_SYM_KTEXT_LEN == PF_KSYM_TEXT_LEN, "text sizes differ");
	struct pf_sampler *s = ctx;
	if (n > PF_KSYM_BATCH)
		return -EINVAL;
	if (!s->ksym_req && !(s->ksym_req = malloc(sizeof(*s->ksym_req))))
		return -ENOMEM;
	struct pf_bpf_ksym_req *r = s->ksym_req;
	r->n = (unsigned)n;
	r->pad = 0;
	memcpy(r->addrs, addrs, n * sizeof(*addrs));
	for (size_t i = 0; i < n; i++)
		r->text[i][0] = 0;
	int fd = bpf_map__fd(s->skel->maps.ksym_req);
	__u32 zero = 0;
	if (bpf_map_update_elem(fd, &zero, r, BPF_ANY) < 0)
		return -errno;
	LIBBPF_OPTS(bpf_test_run_opts, run);
	int rc = bpf_prog_test_run_opts(bpf_program__fd(s->skel->progs.resolve_ksyms), &run);
	if (rc < 0)
		return rc;
	if (bpf_map_lookup_elem(fd, &zero, r) < 0)
		return -errno;
	for (size_t i = 0; i < n; i++)
		memcpy(text[i], r->text[i], PF_KSYM_TEXT_LEN);
	return 0;
}

/* PF_SAMPLES_RB_PER_CPU per possible CPU, a power of two within [MIN, MAX] (cpu_sampler.h). */
static uint32_t samples_rb_bytes(int n_cpus)
{
	uint64_t want = (uint64_t)n_cpus * PF_SAMPLES_RB_PER_CPU;
	uint32_t sz = PF_SAMPLES_RB_MIN_BYTES;
	while (sz < want && sz < PF_SAMPLES_RB_MAX_BYTES)
		sz <<= 1;
	return sz;
}

/* Before load: .eh_frame unwinding needs bpf_loop (5.17) and bpf_task_pt_regs (5.15) in
 * perf_event programs, and x86_64 (the tables' register rules). Returns the rows to hold. */
static uint32_t unwind_setup(struct pf_sampler *s)
{
	s->skel->rodata->dwarf_unwind = 0;
	uint32_t rows = s->opt.unwind_rows ? s->opt.unwind_rows : PF_SAMPLER_UNWIND_ROWS;
	rows = (rows + PF_UNWINDER_CHUNK - 1) / PF_UNWINDER_CHUNK * PF_UNWINDER_CHUNK;
#if !defined(__x86_64__)
	s->unw_off = "table walk implemented for x86_64 only";
	return 0;
#endif
	if (s->opt.no_dwarf_unwind) {
		s->unw_off = "off: --frame-pointers-only";
		return 0;
	}
	if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_loop, NULL) != 1 ||
	    libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_task_pt_regs, NULL) != 1) {
		s->unw_off = "kernel lacks bpf_loop or bpf_task_pt_regs (needs 5.17+)";
		pf_log_warn("sampler: .eh_frame unwinding off: %s; frame pointers only", s->unw_off);
		return 0;
	}
	if (bpf_map__set_max_entries(s->skel->maps.unwind_rows, rows) < 0) {
		s->unw_off = "cannot size the unwind rows";
		return 0;
	}
	s->skel->rodata->dwarf_unwind = 1;
	return rows;
}

/* After load: the user side of the table walk. Without it the walk finds no process and
 * every stack is walked by frame pointers, as before. */
static void unwind_start(struct pf_sampler *s, uint32_t rows)
{
	if (s->opt.unwind_cache_dir && !(s->unw_cache_dir = strdup(s->opt.unwind_cache_dir)))
		return;
	struct pf_unwinder_options uo = {
		.rows_fd = bpf_map__fd(s->skel->maps.unwind_rows),
		.rows_cap = rows,
		.tables_fd = bpf_map__fd(s->skel->maps.unwind_tables),
		.tables_cap = PF_UNWIND_TABLES_MAX,
		.procs_fd = bpf_map__fd(s->skel->maps.unwind_procs),
		.cache_dir = s->unw_cache_dir,
	};
	s->unw = pf_unwinder_new(&uo);
	if (!s->unw) {
		s->unw_off = "cannot map the unwind rows";
		pf_log_warn("sampler: .eh_frame unwinding off: %s: %s", s->unw_off, strerror(errno));
	}
}

static struct pf_sampler *fail(struct pf_sampler *s, int rc)
{
	pf_sampler_free(s);
	errno = rc < 0 ? -rc : rc;
	return NULL;
}

struct pf_sampler *pf_sampler_new(const struct pf_sampler_options *opt, struct pf_error *err)
{
	struct pf_sampler *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->stats_fd = -1;
	if (opt)
		s->opt = *opt;
	s->self_pid = (uint32_t)getpid();
	libbpf_set_print(libbpf_print);

	s->n_cpus_possible = libbpf_num_possible_cpus();
	if (s->n_cpus_possible <= 0)
		return fail(s, pf_error_set(err, -ENOTSUP, "", "cannot count possible CPUs"));
	s->pe.fds = calloc((size_t)s->n_cpus_possible, sizeof(*s->pe.fds));
	s->pe.links = calloc((size_t)s->n_cpus_possible, sizeof(*s->pe.links));
	s->cpe.fds = calloc((size_t)s->n_cpus_possible, sizeof(*s->cpe.fds));
	s->cpe.links = calloc((size_t)s->n_cpus_possible, sizeof(*s->cpe.links));
	struct pf_procinfo_options po = {.host_name = s->opt.host_name,
					 .command_line = s->opt.command_line,
					 .source = s->opt.attr_source};
	struct pf_symbolizer_options so = {.max_elf_files = s->opt.max_elf_files,
					   .no_kernel = s->opt.no_kernel_symbols,
					   .line_dir = s->opt.line_cache_dir};
	struct pf_agg_options ao = {.max_samples = s->opt.max_samples};
	s->pi = pf_procinfo_new(&po);
	s->sym = pf_symbolizer_new(&so);
	s->agg = pf_agg_new(&ao);
	s->py = pf_py_unwind_new(0);
	if (!s->pe.fds || !s->pe.links || !s->cpe.fds || !s->cpe.links || !s->pi || !s->sym ||
	    !s->agg || !s->py)
		return fail(s, pf_error_set(err, -ENOMEM, "", "out of memory"));

	/* open -> configure -> load -> attach (libbpf-tools) */
	s->skel = cpu_sampler_bpf__open();
	if (!s->skel)
		return fail(s, pf_error_set(err, -errno, "", "open BPF object: %s", strerror(errno)));
	uint32_t rb_bytes = samples_rb_bytes(s->n_cpus_possible);
	int rc = bpf_map__set_max_entries(s->skel->maps.samples, rb_bytes);
	if (rc < 0)
		return fail(s, pf_error_set(err, rc, "", "size the sample ring buffer: %s",
					    strerror(-rc)));
	s->skel->rodata->wake_bytes = rb_bytes / 4;
	s->skel->rodata->bench_omit = s->opt.bench_omit;
	/* The kernel symbol resolver needs syscall programs with bpf_snprintf (5.14+); without
	 * them the sampler loads without it and the symbolizer reads /proc/kallsyms. */
	s->ksym_prog = !s->opt.no_kernel_symbols &&
		       libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_SYSCALL, NULL) == 1 &&
		       libbpf_probe_bpf_helper(BPF_PROG_TYPE_SYSCALL, BPF_FUNC_snprintf, NULL) == 1;
	bpf_program__set_autoload(s->skel->progs.resolve_ksyms, s->ksym_prog);
	uint32_t unw_rows = unwind_setup(s);
	rc = cpu_sampler_bpf__load(s->skel);
	if (rc < 0)
		return fail(s, pf_error_set(err, rc, "", "load BPF programs (needs CAP_BPF + "
					    "CAP_PERFMON and kernel BTF): %s", strerror(-rc)));
	struct bpf_program *tp[3] = {s->skel->progs.handle_exec, s->skel->progs.handle_fork,
				     s->skel->progs.handle_exit};
	for (int i = 0; i < 3; i++) {
		s->proc_links[i] = bpf_program__attach(tp[i]);
		if (!s->proc_links[i])
			return fail(s, pf_error_set(err, -errno, "", "attach %s: %s",
						    bpf_program__name(tp[i]), strerror(errno)));
	}
	/* BPF run-time stats for the agent's metrics; optional (kernel.bpf_stats_enabled works
	 * too). */
	s->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (s->stats_fd < 0)
		s->stats_fd = -1;

	s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.samples), on_sample, s, NULL);
	if (!s->rb || ring_buffer__add(s->rb, bpf_map__fd(s->skel->maps.events), on_event, s) < 0)
		return fail(s, pf_error_set(err, -errno, "", "ring buffer: %s", strerror(errno)));

	if (s->ksym_prog)
		pf_symbolizer_set_kernel_resolver(s->sym, resolve_kernel, s);
	if (s->skel->rodata->dwarf_unwind)
		unwind_start(s, unw_rows);
	if (!s->opt.include_self)
		s->skel->bss->skip_tgid = s->self_pid;
	/* /proc is scanned once filters need verdicts (sync_filter_map); /proc/kallsyms is
	 * loaded at the first kernel frame to symbolize. */
	sync_filter_map(s);
	refresh_clock(s);
	/* libbpf freed the parsed kernel BTF (several MB) after the load: give the pages back */
	malloc_trim(0);
	s->window_start = clock_ns(CLOCK_REALTIME);
	s->freq_hz = 99;
	return s;
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
	return apply_running(s, s->freq_hz, err);
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
	pf_procinfo_reap_if(s->pi, s->ring ? keep_in_ring : NULL, &r, forget_pid, s);
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
	uint32_t hz[4];
	uint64_t n[4];
};

static int cut_add(void *ctx, const struct pf_agg_sample *s, uint32_t hz)
{
	struct cut *c = ctx;
	for (size_t i = 0; i < PF_ARRAY_SIZE(c->hz); i++) {
		if (!c->n[i] || c->hz[i] == hz) {
			c->hz[i] = hz;
			c->n[i]++;
			break;
		}
	}
	int rc = pf_agg_add(c->agg, s);
	return rc == -ENOMEM ? rc : 0;
}

int pf_sampler_cut(struct pf_sampler *s, uint32_t pid, uint32_t tid, uint64_t start_unix_ns,
		   uint64_t end_unix_ns, struct pf_prof_window **out, struct pf_error *err)
{
	*out = NULL;
	if (!s->ring)
		return pf_error_set(err, -ENOENT, "", "no sample ring (no span trigger enabled)");
	if (end_unix_ns <= start_unix_ns)
		end_unix_ns = start_unix_ns + 1;
	struct cut c = {.agg = pf_agg_new(NULL)};
	if (!c.agg)
		return pf_error_set(err, -ENOMEM, "", "out of memory");
	int rc = pf_sample_ring_cut(s->ring, pid, tid, start_unix_ns, end_unix_ns, cut_add, &c);
	uint32_t hz = s->freq_hz;
	for (size_t i = 0, best = 0; i < PF_ARRAY_SIZE(c.hz); i++)
		if (c.n[i] > best) {
			best = c.n[i];
			hz = c.hz[i];
		}
	struct pf_agg_hooks hooks = {.resolve = resolve, .ctx = s};
	if (rc >= 0)
		rc = pf_agg_close(c.agg, start_unix_ns, end_unix_ns, hz, &hooks, out);
	pf_agg_free(c.agg);
	pf_symbolizer_trim(s->sym); /* as after a window: DWARF handles go, resolved addresses stay */
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

size_t pf_sampler_unwind_entries(struct pf_sampler *s, uint32_t pid)
{
	return s->unw ? pf_unwinder_kernel_entries(s->unw, pid) : 0;
}

size_t pf_sampler_python_entries(struct pf_sampler *s, uint32_t pid)
{
	struct pf_bpf_py_proc e;
	return bpf_map__lookup_elem(s->skel->maps.py_procs, &pid, sizeof(pid), &e, sizeof(e), 0) ==
	       0;
}

int pf_sampler_ring_stats(struct pf_sampler *s, struct pf_sample_ring_stats *out)
{
	if (!s->ring)
		return -ENOENT;
	pf_sample_ring_stats(s->ring, out);
	return 0;
}
