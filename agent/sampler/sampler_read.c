/* sampler_read.c — see sampler_int.h: the ring buffers' read path (sample records into
 * the open window, the captures and the span ring; process events into procinfo). */
#include "sampler/sampler_int.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "interp/python_unwind.h"
#include "interp/v8_unwind.h"
#include "interp/hotspot_unwind.h"
#include "sampler/procinfo.h"
#include "sampler/sample_ring.h"
#include "symbolize/symbolize.h"
#include "unwind/unwinder.h"

/* ---- ring buffer callbacks ---------------------------------------------------------------- */

static const struct pf_proc *known_proc(struct pf_sampler *s, uint32_t pid, const char *comm)
{
	const struct pf_proc *p = pf_procinfo_get(s->pi, pid);
	if (!p || p->stale) {
		uint64_t t0 = sampler_setup_begin(s);
		p = pf_procinfo_read(s->pi, pid, comm, true);
		if (p && sampler_need_filter(s))
			sampler_push_verdict(s, p);
		sampler_setup_end(s, t0);
	}
	return p;
}

/* True when pid's /proc entry was found gone less than SAMPLER_GONE_MS ago. A process that lives a
 * few milliseconds leaves its samples in the ring after its exit; without this each of them
 * would try its /proc reads again (on a host whose processes come and go, most of the
 * agent's failed system calls). A fork or an exec of the pid forgets it (pid reuse). */
static bool pid_gone(struct pf_sampler *s, uint32_t pid)
{
	const struct gone_pid *g = &s->gone[pid % SAMPLER_GONE_SLOTS];
	return g->pid == pid && pid && pf_mono_ms() - g->ms < SAMPLER_GONE_MS;
}

static void gone_set(struct pf_sampler *s, uint32_t pid, bool gone)
{
	struct gone_pid *g = &s->gone[pid % SAMPLER_GONE_SLOTS];
	if (gone)
		*g = (struct gone_pid){pid, pf_mono_ms()};
	else if (g->pid == pid)
		g->pid = 0;
}

/* Captures pid's maps for the symbolizer at its first user stack, unless it is known to be
 * gone; notes it gone when its maps are. */
static void capture_maps(struct pf_sampler *s, uint32_t pid)
{
	if (pf_symbolizer_has(s->sym, pid) || pid_gone(s, pid))
		return;
	uint64_t t0 = sampler_setup_begin(s);
	if (pf_symbolizer_capture(s->sym, pid) == -ENOENT)
		gone_set(s, pid, true);
	sampler_setup_end(s, t0);
}

/* A process is given its unwind tables at its first sample this long after its first one:
 * most of a build's processes are gone by then, and each load costs tens of trie updates
 * (and as many at the exit). Its first samples are walked by frame pointers. */
#define UNWIND_LOAD_AFTER_MS 50

/* The end of a process's address space: 47 bits on x86-64 (a 57-bit space is handed out
 * only to a process that asks mmap for it), 52 on arm64. */
#if defined(__x86_64__)
#define USER_ADDR_END (1ull << 47)
#elif defined(__aarch64__)
#define USER_ADDR_END (1ull << 52)
#else
#define USER_ADDR_END UINT64_MAX
#endif

/* V8: a node process is detected at its first unwind-table load (its maps are captured then;
 * a process already looked at costs one lookup), its kernel entry written and its V8 code
 * marked for the unwinder before the load. */
static void v8_seen(struct pf_sampler *s, uint32_t pid)
{
	struct pf_bpf_v8_proc e;
	uint64_t start = 0, end = 0;
	if (pf_v8_unwind_seen(s->v8, s->sym, pid, &e, &start, &end) != 1)
		return;
	if (bpf_map__update_elem(s->skel->maps.v8_procs, &pid, sizeof(pid), &e, sizeof(e),
				 BPF_ANY) < 0 ||
	    pf_unwinder_set_v8(s->unw, pid, start, end) < 0)
		s->v8_map_errors++;
}

/* Java: a JVM's kernel entry, once its tables were read (at an unwind-table load, or at a
 * sample of a JVM that was still starting) and its interpreter exists. */
static void jvm_entry(struct pf_sampler *s, uint32_t pid)
{
	struct pf_bpf_jvm_proc e;
	if (pf_hs_unwind_kernel_entry(s->hs, pid, &e) == 1 &&
	    bpf_map__update_elem(s->skel->maps.jvm_procs, &pid, sizeof(pid), &e, sizeof(e),
				 BPF_ANY) < 0)
		s->jvm_map_errors++;
}

/* Whether w, above the user address space, is the frame of an interpreter pid runs (the
 * kernel's tagged words, cpu_sampler.h), rather than data a frame-pointer walk took for a
 * return address. */
static bool interp_word(const struct pf_sampler *s, uint32_t pid, uint64_t w)
{
	if (PF_PY_IS_FRAME(w))
		return pf_py_unwind_has(s->py, pid);
	if (PF_V8_IS_FRAME(w))
		return pf_v8_unwind_has(s->v8, pid);
	if (PF_JVM_IS_FRAME(w))
		return pf_hs_unwind_has(s->hs, pid);
	return false;
}

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
	uint64_t at = pf_unwinder_loaded_ms(s->unw, h->pid, &deferred, &retry_ms),
		 now = pf_mono_ms();
	if (!at) {
		/* first load: once the process has run for UNWIND_LOAD_AFTER_MS */
		uint64_t seen = pf_unwinder_seen_ms(s->unw, h->pid);
		if (!seen || now < seen + UNWIND_LOAD_AFTER_MS)
			return;
	} else if (!(deferred && now >= at + 1000) &&
		   !((h->flags & PF_SAMPLE_F_UNWIND_MISS) && now >= at + retry_ms)) {
		return;
	}
	uint64_t t0 = sampler_setup_begin(s);
	if (at)
		pf_symbolizer_capture(s->sym, h->pid); /* the maps changed */
	v8_seen(s, h->pid); /* at the first load; again after nodejs was turned back on */
	pf_hs_unwind_seen(s->hs, s->sym, h->pid); /* likewise, for java */
	int rc = pf_unwinder_load(s->unw, s->sym, h->pid);
	sampler_setup_end(s, t0);
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
	if (pf_py_unwind_seen(s->py, h->pid, pf_mono_ms(), &e) == 1 &&
	    bpf_map__update_elem(s->skel->maps.py_procs, &h->pid, sizeof(h->pid), &e, sizeof(e),
				 BPF_ANY) < 0)
		s->py_map_errors++;
	if (h->flags & PF_SAMPLE_F_PYTHON)
		pf_py_unwind_note(s->py, h->pid, uips, ulen);
}

/* What every sample of a process sets up (its maps at its first user stack — kernel-only
 * stacks, e.g. kernel threads, need none —, its unwind tables, its Python entry), then the
 * sample as the aggregation takes it. */
static struct pf_agg_sample sample_seen(struct pf_sampler *s, const struct pf_bpf_sample *h,
					const uint64_t *ips, uint32_t ulen, const char *comm)
{
	if (h->ustack_len)
		capture_maps(s, h->pid);
	unwind_seen(s, h);
	python_seen(s, h, ips + h->kstack_len, ulen);
	/* JS frames come only from the table walk, of a process found to run V8 */
	if ((h->flags & PF_SAMPLE_F_DWARF) && pf_v8_unwind_has(s->v8, h->pid))
		pf_v8_unwind_note(s->v8, h->pid, ips + h->kstack_len, ulen);
	const uint64_t *uips = ips + h->kstack_len;
	/* Java frames: a JVM's code addresses rewritten, in a copy (the record is read-only) */
	if (ulen && ulen <= PF_MAX_STACK && pf_hs_unwind_has(s->hs, h->pid)) {
		memcpy(s->jvm_ips, uips, ulen * sizeof(*uips));
		pf_hs_unwind_note(s->hs, h->pid, s->jvm_ips, ulen);
		uips = s->jvm_ips;
		jvm_entry(s, h->pid);
	}
	return (struct pf_agg_sample){
		.ts_unix_ns = h->ts_ns + (uint64_t)s->mono_to_unix,
		.pid = h->pid,
		.tid = h->tid,
		.cpu = h->cpu,
		.comm = comm,
		.kstack = ips,
		.n_kstack = h->kstack_len,
		.ustack = uips,
		.n_ustack = ulen,
	};
}

/* A do_capture record: into the aggregation of every capture whose bit the process carries,
 * thinned to that capture's own frequency. */
static void capture_sample(struct pf_sampler *s, const struct pf_bpf_sample *h,
			   const uint64_t *ips, uint32_t ulen, const char *comm)
{
	uint32_t mask = h->flags >> PF_SAMPLE_CAPTURE_SHIFT;
	struct pf_agg_sample as = sample_seen(s, h, ips, ulen, comm);
	for (unsigned i = 0; i < PF_SAMPLER_CAPTURES; i++) {
		struct sampler_cap *c = &s->cap[i];
		if (!(mask & (1u << i)) || !c->used || c->type == PF_PROF_OFF_CPU ||
		    as.ts_unix_ns < c->start)
			continue; /* an off_cpu capture takes no ticks */
		c->acc += c->hz;
		if (c->acc < s->cap_hz)
			continue;
		c->acc -= s->cap_hz;
		as.weight = 1000000000u / c->hz; /* wall: a tick weighs its period (cpu: unused) */
		sampler_agg_add(s, c->agg, &as);
	}
}

/* An off-CPU record: for the continuous profiles and the span ring unless the thread was
 * followed for captures only or its process turned out not to be profiled (decided after the
 * kernel recorded it, PF_SAMPLE_F_UNKNOWN), and for the captures of its flags. */
static void off_cpu_record(struct pf_sampler *s, const struct pf_proc *p,
			   const struct pf_bpf_sample *h, const uint64_t *ips, uint32_t ulen,
			   const char *comm)
{
	bool cont = !(h->flags & PF_SAMPLE_F_OFF_CAPTURE_ONLY) && (!p || sampler_proc_allowed(s, p));
	if (!cont && !((h->flags >> PF_SAMPLE_CAPTURE_SHIFT) & 0xffu))
		return;
	struct pf_agg_sample as = sample_seen(s, h, ips, ulen, comm);
	sampler_off_cpu_sample(s, &as, h->off_ns, h->flags, cont);
}

int sampler_on_sample(void *ctx, void *data, size_t size)
{
	struct pf_sampler *s = ctx;
	struct pf_bpf_sample h;
	if (size < sizeof(h))
		return 0;
	memcpy(&h, data, sizeof(h));
	size_t n = (size_t)h.kstack_len + h.ustack_len;
	if (size < sizeof(h) + n * 8)
		return 0;
	if (h.flags & PF_SAMPLE_F_ALLOC_FREE) {
		sampler_alloc_freed(s, h.off_ns);
		return 0;
	}
	/* the agent's own helpers (table builders), forked: the agent is not profiled */
	if ((s->unw && h.pid == pf_unwinder_helper_pid(s->unw)) ||
	    h.pid == pf_symbolizer_helper_pid(s->sym)) {
		s->helper_samples++;
		return 0;
	}
	const uint64_t *ips = (const uint64_t *)((const char *)data + sizeof(h));
	/* The kernel's frame-pointer walk stores whatever return address it finds while the
	 * frame chain stays in user memory: code built without frame pointers yields a tail of
	 * zero (or page-zero) "addresses", up to the depth limit, or of data (text read as an
	 * address) above the user address space. No code runs in the first page nor there, so
	 * the user stack ends at the first such entry (the leaf, at [0], is the sampled IP). An
	 * interpreter's frame is a tagged word there, but only in a process that runs it. */
	uint32_t ulen = h.ustack_len;
	for (uint32_t i = 1; i < ulen; i++) {
		uint64_t ip = ips[h.kstack_len + i];
		if (ip < 4096 || (ip >= USER_ADDR_END && !interp_word(s, h.pid, ip))) {
			ulen = i;
			break;
		}
	}
	char comm[PF_COMM_LEN + 1];
	memcpy(comm, h.comm, PF_COMM_LEN);
	comm[PF_COMM_LEN] = 0;

	/* the thread's comm stands in for the process's when it has no executable */
	const struct pf_proc *p = pid_gone(s, h.pid)
				      ? pf_procinfo_get(s->pi, h.pid)
				      : known_proc(s, h.pid, h.pid == h.tid ? comm : NULL);
	if (h.flags & (PF_SAMPLE_F_CAPTURE | PF_SAMPLE_F_OFF_CPU)) {
		if (h.flags & PF_SAMPLE_F_CAPTURE)
			capture_sample(s, &h, ips, ulen, comm);
		else
			off_cpu_record(s, p, &h, ips, ulen, comm);
		return 0;
	}
	if (h.flags & PF_SAMPLE_F_ALLOC) {
		/* the address follows the ips */
		if (size < sizeof(h) + (n + 1) * 8)
			return 0;
		uint64_t addr;
		memcpy(&addr, ips + n, sizeof(addr));
		struct pf_agg_sample as = sample_seen(s, &h, ips, ulen, comm);
		sampler_alloc_record(s, &as, h.off_ns, addr, h.flags);
		return 0;
	}
	if (p && !sampler_proc_allowed(s, p))
		return 0; /* decided after the kernel recorded it (PF_SAMPLE_F_UNKNOWN) */
	struct pf_agg_sample as = sample_seen(s, &h, ips, ulen, comm);
	if (s->ring) {
		/* refusals are counted in its stats */
		pf_sample_ring_add(s->ring, &as, s->freq_hz);
		if (s->triggered_mode && !s->trigger_on)
			return 0; /* between captures: the ring only */
	}
	sampler_agg_add(s, s->agg, &as);
	return 0;
}

void sampler_agg_add(struct pf_sampler *s, struct pf_agg *agg, const struct pf_agg_sample *as)
{
	int rc = pf_agg_add(agg, as);
	if (rc < 0 && rc != -ENOSPC)
		s->last_error = rc;
}

int sampler_on_event(void *ctx, void *data, size_t size)
{
	struct pf_sampler *s = ctx;
	struct pf_bpf_proc_event e;
	if (size < sizeof(e))
		return 0;
	memcpy(&e, data, sizeof(e));
	const struct pf_proc *p = NULL;
	uint64_t t0;
	bool filtering = sampler_need_filter(s);
	if (e.type == PF_PROC_EXEC || e.type == PF_PROC_FORK)
		gone_set(s, e.pid, false);
	switch (e.type) {
	case PF_PROC_EXEC:
		/* the old maps are void; the full maps (shared libraries are mapped after
		 * exec) are captured at the first sample */
		pf_symbolizer_forget(s->sym, e.pid);
		sampler_walkers_forget(s, e.pid); /* the kernel dropped their entries */
		if (s->unw)
			pf_unwinder_forget(s->unw, e.pid);
		if (!filtering) {
			/* nobody needs a verdict now: read the attributes when sampled, so
			 * processes that exec and die unsampled (most of a build) cost nothing */
			pf_procinfo_invalidate(s->pi, e.pid);
			return 0;
		}
		t0 = sampler_setup_begin(s);
		p = pf_procinfo_read(s->pi, e.pid, e.comm, false);
		sampler_setup_end(s, t0);
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
	if (p && sampler_need_filter(s))
		sampler_push_verdict(s, p);
	return 0;
}
