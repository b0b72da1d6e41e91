// SPDX-License-Identifier: GPL-2.0
/* walk_python.bpf.h — CPython frames for cpu_sampler.bpf.c, included by it alone (after
 * walk.bpf.h): the sampled thread's PyThreadState, found through the process's entry, and its
 * frame chain merged into the native walk where the eval loop runs (py_merge). The maps and
 * structs it reads are described in cpu_sampler.h. */
#ifndef PF_WALK_PYTHON_BPF_H
#define PF_WALK_PYTHON_BPF_H

/* ---- Python frames (cpu_sampler.h) ---- */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PF_PY_PROCS_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct pf_bpf_py_proc);
} py_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PF_PY_THREADS_MAX);
	__type(key, __u32);
	__type(value, struct pf_bpf_py_thread);
} py_threads SEC(".maps");

static __always_inline long read_u64(__u64 *dst, __u64 addr)
{
	return bpf_probe_read_user(dst, sizeof(*dst), (void *)addr);
}

/* The thread-list walk: t the entry looked at, found the one whose thread_id is fsbase. */
struct pf_py_find {
	__u64 t, fsbase, found;
	__u32 id_off, next_off;
};

static long py_thread_step(__u32 i, void *ctx)
{
	struct pf_py_find *f = ctx;
	__u64 id;
	if (!f->t || read_u64(&id, f->t + f->id_off) < 0)
		return 1;
	if (id == f->fsbase) {
		f->found = f->t;
		return 1;
	}
	if (read_u64(&f->t, f->t + f->next_off) < 0)
		return 1;
	return 0;
}

/* The current thread's PyThreadState, 0 when it has none: the cached one while its thread_id
 * is still this thread's pthread_self() (x86_64: fsbase, whatever the pid namespace), else
 * looked for in the main interpreter's thread list (PF_PY_MAX_THREADS entries at most). A
 * thread found without one is looked for again after PF_PY_THREAD_RETRY_NS. */
static __always_inline __u64 py_tstate(struct pf_bpf_percpu *s, __u32 pid, __u32 tid)
{
#if defined(__TARGET_ARCH_x86)
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 fsbase = task->thread.fsbase;
#else
	__u64 fsbase = 0;
	return 0;
#endif
	struct pf_bpf_py_thread *c = bpf_map_lookup_elem(&py_threads, &tid);
	__u64 now = 0;
	if (c && c->pid == pid && c->fsbase == fsbase) {
		__u64 id;
		if (!c->tstate) {
			now = bpf_ktime_get_ns();
			if (now - c->ts_ns < PF_PY_THREAD_RETRY_NS)
				return 0;
		} else if (read_u64(&id, c->tstate + s->py.tstate_thread_id) == 0 && id == fsbase) {
			return c->tstate;
		}
	}
	struct pf_py_find f = {.fsbase = fsbase,
			       .id_off = s->py.tstate_thread_id,
			       .next_off = s->py.tstate_next};
	__u64 interp;
	/* before the interpreter exists (a process starting): nothing to cache */
	if (read_u64(&interp, s->py.runtime + s->py.rt_interp_head) < 0 || !interp ||
	    read_u64(&f.t, interp + s->py.interp_threads_head) < 0 || !f.t)
		return 0;
	bpf_loop(PF_PY_MAX_THREADS, py_thread_step, &f, 0);
	struct pf_bpf_py_thread v = {.tstate = f.found,
				     .fsbase = fsbase,
				     .ts_ns = now ? now : bpf_ktime_get_ns(),
				     .pid = pid};
	bpf_map_update_elem(&py_threads, &tid, &v, BPF_ANY);
	return f.found;
}

static __always_inline bool py_in_eval(const struct pf_bpf_py_proc *py, __u64 ip)
{
	/* a return address may be just past its call, a sampled ip at the first instruction */
	bool in = false;
	for (int k = 0; k < PF_PY_EVAL_RANGES; k++)
		in |= ip >= py->eval_start[k] && ip <= py->eval_end[k] && py->eval_end[k];
	return in;
}

static __always_inline void py_put(struct pf_bpf_percpu *s, struct pf_bpf_py_merge *m, __u64 w)
{
	s->ips[(m->base + m->n) & (2 * (PF_MAX_STACK + 1) - 1)] = w;
	m->n++;
}

/* bpf_loop callback: writes one frame (a native one, or one Python frame of an eval-loop
 * frame's activation), or skips an entry shim. */
static long py_merge_step(__u32 idx, void *ctx)
{
	__u32 zero = 0;
	struct pf_bpf_percpu *s = bpf_map_lookup_elem(&scratch_map, &zero);
	if (!s)
		return 1;
	struct pf_bpf_py_merge *m = &s->pm;
	if (m->n >= PF_UNWIND_MAX_FRAMES)
		return 1;
	__u64 ip = m->i < m->n_nat ? s->nat[m->i & PF_MAX_STACK] : 0;
	/* a frame-pointer walk through code without them ends in page-zero "addresses" */
	if (ip < 4096)
		m->n_nat = m->i;
	bool tail = m->i >= m->n_nat;
	if (!tail) {
		if (!m->in_eval) {
			if (!m->cur || !py_in_eval(&s->py, ip)) {
				py_put(s, m, ip);
				m->i++;
				return 0;
			}
			m->in_eval = 1;
			m->met = 1;
			m->emitted = 0;
		}
	} else if (m->met || !m->cur) {
		return 1;
	}
	/* tail: the native walk ended before the eval loop; the whole chain follows it */
	__u32 size = s->py.frame_read;
	if (size == 0 || size > PF_PY_FRAME_READ_MAX ||
	    bpf_probe_read_user(s->pyframe, size, (void *)m->cur) < 0) {
		m->errors++;
		m->cur = 0;
		goto done;
	}
	const char *b = (const char *)s->pyframe;
	__u64 code = *(const __u64 *)(b + (s->py.f_code & 0x78));
	__u64 next = *(const __u64 *)(b + (s->py.f_back & 0x78));
	__s64 instr;
	bool last = true; /* 3.9-3.10: one frame per eval-loop call */
	if (s->py.frame_kind == PF_BPF_PY_INTERP) {
		if (s->py.owner_cstack != PF_PY_OFF_NONE &&
		    (__u8)b[s->py.f_owner & 0x7f] == s->py.owner_cstack) {
			/* the shim this activation pushed at its start: its frames end here */
			m->cur = next;
			goto done;
		}
		__u64 at = *(const __u64 *)(b + (s->py.f_instr & 0x78));
		instr = (__s64)(at - code - s->py.code_adaptive);
		last = s->py.f_is_entry != PF_PY_OFF_NONE && b[s->py.f_is_entry & 0x7f];
	} else {
		instr = *(const __s32 *)(b + (s->py.f_instr & 0x7c));
	}
	if (!code || (code & 7) || code >= (1ull << 47)) {
		m->errors++;
		m->cur = 0;
		goto done;
	}
	instr += PF_PY_INSTR_BIAS;
	if (instr < 0)
		instr = 0;
	if (instr > PF_PY_INSTR_MAX)
		instr = PF_PY_INSTR_MAX;
	py_put(s, m, PF_PY_FRAME(code, (__u64)instr));
	m->frames++;
	m->emitted++;
	m->cur = next;
	if (tail)
		return next ? 0 : 1;
	if (!last && next)
		return 0;
	m->in_eval = 0;
	m->i++;
	return 0;
done:
	if (tail) /* past a shim the chain goes on; a frame that cannot be read ends it */
		return m->cur ? 0 : 1;
	/* the activation's Python frames end: keep the native frame when none replaced it */
	if (!m->emitted)
		py_put(s, m, ip);
	m->in_eval = 0;
	m->i++;
	return 0;
}

/* The user stack of ub bytes at ips[base] with Python frames in place of the eval-loop frames
 * when pid runs CPython (py_procs): the new size in bytes. */
static __always_inline long py_merge(struct pf_bpf_percpu *s, __u32 pid, __u32 tid, __u32 base,
				     long ub, __u32 *flags)
{
	struct pf_bpf_py_proc *pp = bpf_map_lookup_elem(&py_procs, &pid);
	if (!pp)
		return ub;
	s->py = *pp;
	__u64 tstate = py_tstate(s, pid, tid);
	if (!tstate) {
		s->py_no_thread++;
		return ub;
	}
	__u64 cur;
	if (read_u64(&cur, tstate + s->py.tstate_frame) < 0)
		return ub;
	if (s->py.cframe_frame != PF_PY_OFF_NONE && cur &&
	    read_u64(&cur, cur + s->py.cframe_frame) < 0)
		return ub;
	base &= PF_MAX_STACK;
	if (!cur || bpf_probe_read_kernel(s->nat, ub & 0x3ff, (void *)s->ips + base * 8) < 0)
		return ub;
	struct pf_bpf_py_merge *m = &s->pm;
	*m = (struct pf_bpf_py_merge){.cur = cur, .base = base, .n_nat = (__u32)ub / 8};
	bpf_loop(2 * (PF_MAX_STACK + 1), py_merge_step, NULL, 0);
	/* the map value: the verifier knows nothing of what the loop left in it */
	__u32 n = m->n;
	if (n > PF_UNWIND_MAX_FRAMES)
		n = PF_UNWIND_MAX_FRAMES;
	s->py_frames += m->frames;
	s->py_read_errors += m->errors;
	if (m->frames) {
		s->py_samples++;
		*flags |= PF_SAMPLE_F_PYTHON;
	}
	return (long)n * 8;
}

#endif
