// SPDX-License-Identifier: GPL-2.0
/* cpu_sampler.bpf.c — the kernel half of the CPU sampler (see cpu_sampler.h for the data it
 * hands to user space, sampler_bpf.c for the user side).
 *
 *  do_sample   perf_event (software cpu-clock, one event per CPU): pid/tid/cpu/time/comm and
 *              kernel (only when the tick interrupted kernel mode) + user stacks of the
 *              interrupted task, into the `samples` ring buffer.
 *  do_capture  the same record on a second set of cpu-clock events (captures, at their own
 *              frequency), only for processes in `capture_pids`, flagged PF_SAMPLE_F_CAPTURE
 *              with the process's capture mask so user space keeps them out of the
 *              continuous windows.
 *  handle_*    tp_btf sched_process_{exec,fork,exit}: keep `pid_filter` coherent in the kernel
 *              (an exec forgets the verdict, a fork inherits it, an exit drops it) and tell user
 *              space, which computes the new verdict from the process's attributes.
 *  off_cpu_switch, off_cpu_sys_exit  tp_btf sched_switch and sys_exit: off-CPU records
 *              (cpu_sampler.h), attached by user space only while profiling.off_cpu is on.
 *  alloc_probe  session uprobe (entry and return) on allocator entry points of captured
 *              processes: allocation samples by bytes and the frees of sampled addresses
 *              (cpu_sampler.h), attached by user space only for an alloc capture.
 *  resolve_ksyms  syscall program run on demand by user space (BPF_PROG_TEST_RUN): kernel
 *              addresses -> "name+off/size [module]" through the kernel's kallsyms lookup
 *              (cpu_sampler.h, struct pf_bpf_ksym_req). Not loaded where the kernel lacks
 *              syscall programs (< 5.14); user space then reads /proc/kallsyms.
 *
 * The user-stack walk the programs share is in walk.bpf.h (native and JIT frames) and
 * walk_python.bpf.h (CPython frames), included below. Every map is sized explicitly; every
 * lookup is NULL-checked; losses are counted per CPU. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#include "cpu_sampler.h"

char LICENSE[] SEC("license") = "GPL";

/* 1 while include/exclude filters are active; written by user space through .bss. */
__u32 filter_on = 0;
/* Bumped after every change of pid_filter (user space and the handlers below): verdicts
 * cached per CPU (struct pf_bpf_percpu) hold only while it has not moved. */
__u32 filter_gen = 0;
/* The agent's own process (tgid), never sampled unless 0; one compare instead of a map
 * lookup per tick when no filter is active. Written by user space through .bss. */
__u32 skip_tgid = 0;
/* The agent's forked helpers (the unwind and line table builders: pf_sampler_poll keeps them
 * current), skipped the same way; 0 = no helper. */
__u32 skip_helper[2] = {0, 0};
/* Wake the consumer once this many bytes wait (a quarter of the ring buffer, whose size
 * user space picks from the CPU count before load). */
const volatile __u64 wake_bytes = PF_SAMPLES_RB_MIN_BYTES / 4;
/* 1: walk user stacks with the unwind tables where a process has them (set by user space
 * when the kernel has bpf_loop and bpf_task_pt_regs); 0: frame pointers only. */
const volatile __u32 dwarf_unwind = 0;
/* PF_BENCH_* bits: parts of do_sample left out for bench/bpf_sample_cost.sh; 0 in the agent. */
const volatile __u32 bench_omit = 0;
/* profiling.off_cpu, written by user space through .data: waits shorter than off_cpu_min_ns
 * are dropped; a switch-out is followed when a random u32 is <= off_cpu_threshold. */
__u64 off_cpu_min_ns = 1000000;
__u32 off_cpu_threshold = 0xffffffff;
/* Bumped by user space at every attach: off_cpu_task entries of another generation are
 * leftovers of an earlier attach (task storage lives as long as its task). */
__u32 off_cpu_gen = 1;
/* Whose switch-outs are followed, written by user space through .data: off_cpu_follow 1, the
 * profiled processes (pid_filter, off_cpu_threshold: continuous off-CPU profiles, the span
 * triggers' wall profiles); off_cpu_cap_mask, the processes in capture_pids with a bit of it
 * (captures of type off_cpu or wall: every switch-out, whatever the filters and the
 * probability). */
__u32 off_cpu_follow = 1;
__u32 off_cpu_cap_mask SEC(".data") = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, PF_SAMPLES_RB_MIN_BYTES); /* resized by user space before load */
} samples SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, PF_EVENTS_RB_BYTES);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PF_PID_FILTER_MAX);
	__type(key, __u32);
	__type(value, __u8);
} pid_filter SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PF_CAPTURE_PIDS_MAX);
	__type(key, __u32);
	__type(value, __u8);
} capture_pids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PF_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* Per-CPU state: the record being built, per-tick counts, the cached verdict (cpu_sampler.h). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pf_bpf_percpu);
} scratch_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pf_bpf_ksym_req);
} ksym_req SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PF_OFF_CPU_THREADS_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct pf_bpf_off_rec);
} off_cpu_recs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct pf_bpf_off_task);
} off_cpu_task SEC(".maps");

/* .eh_frame unwinding (cpu_sampler.h): rows, tables, and (pid, address) -> mapping. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PF_UNWIND_ROWS_DEFAULT); /* resized by user space before load */
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct pf_bpf_unwind_row);
} unwind_rows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PF_UNWIND_TABLES_MAX);
	__type(key, __u32);
	__type(value, struct pf_bpf_unwind_table);
} unwind_tables SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PF_UNWIND_PROCS_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct pf_bpf_unwind_proc);
} unwind_procs SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);
	if (v)
		*v += 1;
}

#define STACK_BYTES (PF_MAX_STACK * 8)

/* PF_BENCH_TIMING: adds the time since *t to counter idx and restarts *t; pruned otherwise. */
static __always_inline void lap(__u64 *t, __u32 idx)
{
	if (!(bench_omit & PF_BENCH_TIMING))
		return;
	__u64 now = bpf_ktime_get_ns();
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);
	if (v)
		*v += now - *t;
	*t = now;
}

static __always_inline __u64 lap_start(void)
{
	return (bench_omit & PF_BENCH_TIMING) ? bpf_ktime_get_ns() : 0;
}

/* True when the tick interrupted user mode: then there is no kernel stack to walk (the
 * kernel walk would find nothing but still costs a helper call and a callchain buffer). The
 * ctx's regs are the interrupted registers; reads must be 8 bytes wide. Unknown arches
 * always walk both stacks. */
static __always_inline bool in_user_mode(struct bpf_perf_event_data *ctx)
{
#if defined(__TARGET_ARCH_x86)
	__u64 cs = *(__u64 *)((char *)&ctx->regs + __builtin_offsetof(struct pt_regs, cs));
	return (cs & 3) == 3;
#elif defined(__TARGET_ARCH_arm64)
	__u64 pstate =
		*(__u64 *)((char *)&ctx->regs + __builtin_offsetof(struct user_pt_regs, pstate));
	return (pstate & 0xf) == 0; /* PSR_MODE_EL0t */
#else
	return false;
#endif
}

#include "walk.bpf.h"
#include "walk_python.bpf.h"

/* The user stack of the interrupted context (with sw: of the current task, which is in the
 * kernel) into s->ips after the kb bytes of kernel stack: its size in bytes, masked. */
static __always_inline long walk_user(struct bpf_perf_event_data *ctx, struct pf_bpf_percpu *s,
				      long kb, __u32 pid, __u32 tid, __u32 *flags, bool sw)
{
	kb &= 0x3ff;
	long ub = -1;
	s->jitw.pending = 0; /* only this walk's stop may go on in jit_walk */
	if (dwarf_unwind)
		ub = walk_tables(ctx, s, pid, kb / 8, flags, sw);
	if (ub < 0)
		ub = bpf_get_stack(ctx, (void *)s->ips + kb, STACK_BYTES, BPF_F_USER_STACK);
	if (ub < 0)
		ub = 0;
	ub &= 0x3ff;
	if (ub)
		ub = py_merge(s, pid, tid, kb / 8, ub, flags);
	return ub & 0x3ff;
}

/* The kernel stack (only when the tick interrupted kernel mode) then the user stack of the
 * interrupted context into s->ips; their sizes in bytes, masked so that the verifier can prove
 * every later offset stays inside the scratch value. */
static __always_inline void walk_stacks(struct bpf_perf_event_data *ctx,
					struct pf_bpf_percpu *s, long *kbytes, long *ubytes,
					__u64 *t, __u32 pid, __u32 tid, __u32 *flags, bool sw)
{
	long kb = !sw && in_user_mode(ctx) ? 0 : bpf_get_stack(ctx, s->ips, STACK_BYTES, 0);
	if (kb < 0)
		kb = 0;
	kb &= 0x3ff; /* <= 1016 in practice; the mask proves it to the verifier */
	lap(t, PF_CNT_T_KSTACK);
	long ub = walk_user(ctx, s, kb, pid, tid, flags, sw);
	lap(t, PF_CNT_T_USTACK);
	*kbytes = kb;
	*ubytes = ub & 0x3ff;
}

/* What a record is, for its count. */
enum rec_kind { REC_TICK, REC_CAPTURE, REC_OFF_CPU, REC_ALLOC };

static __always_inline void count_here(struct pf_bpf_percpu *s, enum rec_kind kind)
{
	if (kind == REC_CAPTURE)
		s->captures++;
	else if (kind == REC_OFF_CPU)
		s->off_cpu++;
	else if (kind == REC_ALLOC)
		s->alloc_out++;
	else
		s->samples++;
}

/* The record header in s of the current task: pid/tid, this CPU, comm, ub bytes of user
 * stack after kb of kernel stack. */
static __always_inline void hdr_fill(struct pf_bpf_percpu *s, __u64 ts, __u64 off_ns, __u32 pid,
				     __u32 tid, long kb, long ub, __u32 flags)
{
	s->hdr.ts_ns = ts;
	s->hdr.off_ns = off_ns;
	s->hdr.pid = pid;
	s->hdr.tid = tid;
	s->hdr.cpu = bpf_get_smp_processor_id();
	s->hdr.kstack_len = kb / 8;
	s->hdr.ustack_len = ub / 8;
	s->hdr.flags = flags;
	bpf_get_current_comm(s->hdr.comm, sizeof(s->hdr.comm));
}

/* Builds one sample record of the current task (stacks of the interrupted context; with sw,
 * of the task switching out, ctx being the tracepoint's) in the CPU's state s: its size in
 * bytes, 0 when it does not fit. */
static __always_inline __u64 build(struct bpf_perf_event_data *ctx, struct pf_bpf_percpu *s,
				   __u32 pid, __u32 tid, __u32 flags, __u64 *t, bool sw)
{
	long kb, ub;
	s->writes++;
	walk_stacks(ctx, s, &kb, &ub, t, pid, tid, &flags, sw);
	if (kb == 0 && ub == 0)
		count(PF_CNT_STACK_ERR);

	hdr_fill(s, bpf_ktime_get_ns(), 0, pid, tid, kb, ub, flags);

	__u64 size = sizeof(s->hdr) + kb + ub;
	return size > sizeof(s->hdr) + sizeof(s->ips) ? 0 : size;
}

/* Writes size bytes of the record at rec (s->hdr, or an off-CPU record) into the samples ring
 * buffer and counts it. Wakes the consumer only once the buffer is a quarter full; it also
 * drains on its own timer, so at 99 Hz there is about one wake-up per poll interval, not one
 * per sample. The fill is looked at only every wake_bytes / 8 this CPU wrote, not per record. */
static __always_inline int output(struct pf_bpf_percpu *s, void *rec, __u64 size, __u32 flags,
				  __u64 ts, enum rec_kind kind)
{
	__u64 wake = BPF_RB_NO_WAKEUP;
	if ((flags & PF_SAMPLE_F_UNWIND_MISS) && ts - s->miss_wake_ns >= PF_UNWIND_WAKE_NS) {
		wake = BPF_RB_FORCE_WAKEUP; /* tables to load now: see walk_tables */
		s->miss_wake_ns = ts;
	}
	s->since_query += size;
	if (s->since_query >= wake_bytes / 8) {
		s->since_query = 0;
		if (bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA) >= wake_bytes)
			wake = BPF_RB_FORCE_WAKEUP;
	}
	if (bpf_ringbuf_output(&samples, rec, size, wake) < 0) {
		count(PF_CNT_LOST_RB);
		return -1;
	}
	count_here(s, kind);
	return 0;
}

int jit_walk(struct bpf_perf_event_data *ctx);

/* jit_walk, the only entry: a tick whose walk stopped at JIT code ends there. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, int(struct bpf_perf_event_data *));
} jit_progs SEC(".maps") = {.values = {[0] = (void *)&jit_walk}};

/* Writes one sample record of the current task (stacks of the interrupted context) from the
 * CPU's state s and counts it (a capture tick or a continuous one). A walk that stopped at
 * V8 or JVM code goes on in jit_walk, which writes the record (a tail call: it does not
 * return). */
static __always_inline int record(struct bpf_perf_event_data *ctx, struct pf_bpf_percpu *s,
				  __u32 pid, __u32 tid, __u32 flags, enum rec_kind kind, __u64 *t)
{
	__u64 size = build(ctx, s, pid, tid, flags, t, false);
	if (!size)
		return 0;
	if (bench_omit & PF_BENCH_OMIT_OUTPUT) {
		count_here(s, kind);
		return 0;
	}
	lap(t, PF_CNT_T_RECORD);
	if (s->jitw.pending) {
		bpf_tail_call(ctx, &jit_progs, 0);
		s->jitw.pending = 0; /* not there: the stack as far as it went */
	}
	if (output(s, &s->hdr, size, s->hdr.flags, s->hdr.ts_ns, kind) < 0)
		return 0;
	lap(t, PF_CNT_T_OUTPUT);
	if (bench_omit & PF_BENCH_TIMING)
		count(PF_CNT_T_N);
	return 0;
}

/* The pid_filter verdict of tgid pid: the one cached on this CPU while filter_gen has not
 * moved since it was read (a busy process keeps its CPU for many ticks), else the map's. The
 * generation is read before the map, so a change racing with the read leaves a stale
 * generation behind, never a stale verdict under a current one. */
static __always_inline __u32 verdict_of(struct pf_bpf_percpu *s, __u32 pid)
{
	__u32 gen = filter_gen;
	if (s->cached_pid == pid && s->cached_gen == gen)
		return s->cached_verdict;
	__u8 *v = bpf_map_lookup_elem(&pid_filter, &pid);
	__u32 verdict = v ? *v : PF_FILTER_UNKNOWN;
	s->cached_pid = pid;
	s->cached_gen = gen;
	s->cached_verdict = verdict;
	return verdict;
}

/* True for the agent's own process and its helpers: never sampled. */
static __always_inline bool skipped(__u32 pid)
{
	return pid == skip_tgid || pid == skip_helper[0] || pid == skip_helper[1];
}

/* True (and counted) while an allocation record is being built in s on this CPU: the uprobe
 * program runs preemptible, so a tick, a switch or another task's sampled return can come in
 * the middle of its walk; they leave the CPU's record alone (that tick or switch is lost and
 * counted in alloc_collide) rather than write over it. */
static __always_inline bool alloc_busy(struct pf_bpf_percpu *s)
{
	if (!s->alloc_busy)
		return false;
	s->alloc_collide++;
	return true;
}

/* The bare floor of a sample (PF_BENCH_FLOOR): the same stack walks into the same scratch
 * record, nothing else. */
static __always_inline int stacks_only(struct bpf_perf_event_data *ctx, struct pf_bpf_percpu *s,
				       __u32 pid)
{
	long kb, ub;
	__u64 t = 0;
	__u32 flags = 0;
	walk_stacks(ctx, s, &kb, &ub, &t, pid, (__u32)bpf_get_current_pid_tgid(), &flags, false);
	return 0;
}

SEC("perf_event")
int do_sample(struct bpf_perf_event_data *ctx)
{
	if (bench_omit & PF_BENCH_EMPTY)
		return 0;
	__u64 t = lap_start();
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id;

	if (tid == 0 || skipped(pid)) /* the idle task, the agent and its helpers */
		return 0;

	__u32 zero = 0;
	struct pf_bpf_percpu *s = bpf_map_lookup_elem(&scratch_map, &zero);
	if (!s || alloc_busy(s))
		return 0;
	if (bench_omit & PF_BENCH_FLOOR)
		return stacks_only(ctx, s, pid);
	__u32 flags = 0;
	if (filter_on && !(bench_omit & PF_BENCH_OMIT_FILTER)) {
		__u32 v = verdict_of(s, pid);
		if (v == PF_FILTER_UNKNOWN)
			flags |= PF_SAMPLE_F_UNKNOWN;
		else if (v != PF_FILTER_ALLOW && !(bench_omit & PF_BENCH_KEEP_ALL)) {
			s->filtered++;
			return 0;
		}
	}
	lap(&t, PF_CNT_T_FILTER);
	return record(ctx, s, pid, tid, flags, REC_TICK, &t);
}

/* The rest of a tick's user stack from JIT code on (record's tail call): V8's JS frames named
 * by their SharedFunctionInfo and typed frames by their address, or a JVM's frames stepped
 * by its rules (interpreted ones by their Method* and bytecode index, compiled ones by their
 * address); native frames by the tables again below them; then the record goes out. */
SEC("perf_event")
int jit_walk(struct bpf_perf_event_data *ctx)
{
	__u32 zero = 0;
	struct pf_bpf_percpu *s = bpf_map_lookup_elem(&scratch_map, &zero);
	if (!s || !s->jitw.pending)
		return 0;
	s->jitw.pending = 0;
	struct pf_walk st = {.pid = s->hdr.pid,
			     .base = s->hdr.kstack_len,
			     .n = s->jitw.n,
			     .ip = s->jitw.ip,
			     .sp = s->jitw.sp,
			     .bp = s->jitw.bp,
			     .exact = s->jitw.exact,
			     .rt = s->jitw.rt};
	bpf_loop(PF_UNWIND_MAX_FRAMES, unwind_step_jit, &st, 0);
	__u32 n = st.n > PF_UNWIND_MAX_FRAMES ? PF_UNWIND_MAX_FRAMES : st.n;
	s->hdr.ustack_len = n;
	s->hdr.flags |= st.flags;
	__u64 size = sizeof(s->hdr) + ((__u64)s->hdr.kstack_len + n) * 8;
	if (size > sizeof(s->hdr) + sizeof(s->ips))
		return 0;
	output(s, &s->hdr, size, s->hdr.flags, s->hdr.ts_ns,
	       (s->hdr.flags & PF_SAMPLE_F_CAPTURE) ? REC_CAPTURE : REC_TICK);
	return 0;
}

SEC("perf_event")
int do_capture(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id;

	if (tid == 0 || skipped(pid))
		return 0;
	__u8 *mask = bpf_map_lookup_elem(&capture_pids, &pid);
	if (!mask || !*mask)
		return 0;
	__u32 flags = PF_SAMPLE_F_CAPTURE | ((__u32)*mask << PF_SAMPLE_CAPTURE_SHIFT);
	__u32 zero = 0;
	struct pf_bpf_percpu *s = bpf_map_lookup_elem(&scratch_map, &zero);
	if (!s || alloc_busy(s))
		return 0;
	__u64 t = lap_start();
	return record(ctx, s, pid, tid, flags, REC_CAPTURE, &t);
}

/* The off-CPU record at r goes out (as many bytes as its stacks fill). */
static __always_inline void off_cpu_send(struct pf_bpf_percpu *s, struct pf_bpf_off_rec *r)
{
	__u64 size = sizeof(r->hdr) + ((__u64)r->hdr.kstack_len + r->hdr.ustack_len) * 8;
	if (size <= sizeof(*r))
		output(s, r, size, r->hdr.flags, r->hdr.ts_ns, REC_OFF_CPU);
}

/* The off-CPU record at r goes out, then its entry. */
static __always_inline void off_cpu_out(struct pf_bpf_percpu *s, struct pf_bpf_off_rec *r,
					__u32 tid)
{
	off_cpu_send(s, r);
	bpf_map_delete_elem(&off_cpu_recs, &tid);
}

/* A waiting record r completed with the ub bytes of user stack walked into s->ips (nothing
 * when the CPU's state saw another record begin since writes, or the copy fails): wflags, the
 * walk's flags, join the record's. */
static __always_inline void off_cpu_fill(struct pf_bpf_percpu *s, struct pf_bpf_off_rec *r,
					 long ub, __u32 wflags, __u32 writes)
{
	long kb = ((long)r->hdr.kstack_len * 8) & 0x3ff;
	ub &= 0x3ff;
	if (ub && bpf_probe_read_kernel((void *)r->ips + kb, ub, s->ips) < 0)
		ub = 0;
	if (s->writes != writes)
		ub = 0; /* checked after the copy: what was copied was this walk's */
	if (!ub)
		s->off_cpu_kernel_only++;
	r->hdr.ustack_len = ub / 8;
	r->hdr.flags = (r->hdr.flags & ~PF_SAMPLE_F_USER_PENDING) | (ub ? wflags : 0);
}

/* The thread's off-CPU state (task storage), NULL when it has none of this generation. */
static __always_inline struct pf_bpf_off_task *off_task(struct task_struct *t, bool create)
{
	struct pf_bpf_off_task *ot = bpf_task_storage_get(
		&off_cpu_task, t, 0, create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	if (!ot)
		return NULL;
	if (ot->gen != off_cpu_gen) {
		if (!create)
			return NULL;
		ot->gen = off_cpu_gen;
		ot->state = PF_OFF_NONE;
	}
	return ot;
}

/* The thread coming back (next), away since ot->ts_ns (waiting) or with a record walked when
 * it left (preempted): nothing when it was away less than off_cpu_min_ns. A preempted thread's
 * record goes out now. A blocked one has not run since it left: its kernel stack is the one it
 * left with (bpf_get_task_stack), its user stack is read when its system call returns
 * (off_cpu_sys_exit, on this CPU, which it runs on next: pending_tid), the record waiting in
 * off_cpu_recs meanwhile. */
static __always_inline void off_cpu_back(struct pf_bpf_percpu *s, struct task_struct *next,
					 __u64 now)
{
	struct pf_bpf_off_task *ot = off_task(next, false);
	if (!ot || (ot->state != PF_OFF_WAITING && ot->state != PF_OFF_PREEMPTED))
		return;
	__u32 tid = next->pid;
	__u64 away = now - ot->ts_ns;
	__u32 flags = ot->flags;
	if (ot->state == PF_OFF_PREEMPTED) {
		/* its user stack was walked when it left; its kernel stack is the one it left
		 * with, saved by the switch (walked at the switch-out it would begin in this
		 * program's own frames) */
		ot->state = PF_OFF_NONE;
		struct pf_bpf_off_rec *r = bpf_map_lookup_elem(&off_cpu_recs, &tid);
		if (!r)
			return;
		if (away < off_cpu_min_ns) {
			s->off_cpu_short++;
			bpf_map_delete_elem(&off_cpu_recs, &tid);
			return;
		}
		s->writes++;
		long kb = bpf_get_task_stack(next, s->ips, STACK_BYTES, 0);
		if (kb < 0)
			kb = 0;
		kb &= 0x3ff;
		long ub = ((long)r->hdr.ustack_len * 8) & 0x3ff;
		s->hdr = r->hdr;
		if (ub && bpf_probe_read_kernel((void *)s->ips + kb, ub, r->ips) < 0)
			ub = 0;
		bpf_map_delete_elem(&off_cpu_recs, &tid);
		s->hdr.kstack_len = kb / 8;
		s->hdr.ustack_len = ub / 8;
		s->hdr.off_ns = away;
		s->hdr.ts_ns = now;
		output(s, &s->hdr, sizeof(s->hdr) + kb + ub, s->hdr.flags, now, REC_OFF_CPU);
		return;
	}
	ot->state = PF_OFF_NONE; /* PF_OFF_WAITING */
	if (away < off_cpu_min_ns) {
		s->off_cpu_short++;
		return;
	}
	s->writes++;
	long kb = bpf_get_task_stack(next, s->ips, STACK_BYTES, 0);
	if (kb < 0)
		kb = 0;
	kb &= 0x3ff;
	s->hdr.ts_ns = now;
	s->hdr.off_ns = away;
	s->hdr.pid = next->tgid;
	s->hdr.tid = tid;
	s->hdr.cpu = bpf_get_smp_processor_id();
	s->hdr.kstack_len = kb / 8;
	s->hdr.ustack_len = 0;
	s->hdr.flags = flags | PF_SAMPLE_F_USER_PENDING;
	bpf_probe_read_kernel_str(s->hdr.comm, sizeof(s->hdr.comm), next->comm);
	if (bpf_map_update_elem(&off_cpu_recs, &tid, &s->hdr, BPF_ANY) < 0) {
		s->off_cpu_full++;
		return;
	}
	ot->state = PF_OFF_PENDING;
	s->pending_tid = tid;
}

/* A profiled thread leaves the CPU (current is still prev). Runnable — preempted, or yielding
 * with prev_state TASK_RUNNING — its user stack is walked now, by the same unwinders as a tick
 * (preemptions come at most at the scheduler's rate); going to wait, only the time is noted
 * (its task storage), the walk left to its return, for the waits that last. A record of it
 * that still waits for its user stack (it left again before its system call returned: a page
 * fault, a wait inside the kernel) goes out with the kernel stack alone; one whose return is
 * walking it (preempted in off_cpu_sys_exit) is completed by this walk instead, and that
 * preemption is not followed. A thread coming back (next) is off_cpu_back's. */
SEC("tp_btf/sched_switch")
int BPF_PROG(off_cpu_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u32 zero = 0;
	struct pf_bpf_percpu *s = bpf_map_lookup_elem(&scratch_map, &zero);
	if (!s || alloc_busy(s))
		return 0;
	__u64 now = bpf_ktime_get_ns();
	if (next->pid)
		off_cpu_back(s, next, now);

	__u32 pid = prev->tgid, tid = prev->pid;
	if (tid == 0 || skipped(pid) || (prev->flags & 0x00200000)) /* PF_KTHREAD */
		return 0;
	struct pf_bpf_off_task *ot = off_task(prev, false);
	struct pf_bpf_off_rec *exiting = NULL;
	__u32 flags = PF_SAMPLE_F_OFF_CPU, cap = 0;
	if (ot && (ot->exit & PF_OFF_EXIT_BUSY)) {
		if (ot->state != PF_OFF_EXITING)
			return 0; /* its return has the record in hand */
		ot->state = PF_OFF_NONE;
		exiting = bpf_map_lookup_elem(&off_cpu_recs, &tid);
		if (!exiting)
			return 0;
		flags = 0;
		goto walk;
	}
	if (ot && ot->state == PF_OFF_PENDING) {
		ot->state = PF_OFF_NONE;
		struct pf_bpf_off_rec *r = bpf_map_lookup_elem(&off_cpu_recs, &tid);
		if (r) {
			r->hdr.flags &= ~PF_SAMPLE_F_USER_PENDING;
			s->off_cpu_kernel_only++;
			off_cpu_out(s, r, tid);
		}
	}
	unsigned int state = 1; /* kernels before 5.14 name it state: preempt alone tells */
	if (bpf_core_field_exists(prev->__state))
		state = BPF_CORE_READ(prev, __state);
	if (state & 0x80) /* TASK_DEAD: its last switch */
		return 0;
	if (off_cpu_cap_mask) {
		__u8 *m = bpf_map_lookup_elem(&capture_pids, &pid);
		if (m)
			cap = *m & off_cpu_cap_mask;
	}
	bool follow = off_cpu_follow &&
		      (off_cpu_threshold == 0xffffffff || bpf_get_prandom_u32() <= off_cpu_threshold);
	if (follow && filter_on) {
		__u32 v = verdict_of(s, pid);
		if (v == PF_FILTER_UNKNOWN) {
			flags |= PF_SAMPLE_F_UNKNOWN;
		} else if (v != PF_FILTER_ALLOW) {
			s->off_cpu_filtered++;
			follow = false;
		}
	}
	if (!follow && !cap)
		return 0;
	flags |= cap << PF_SAMPLE_CAPTURE_SHIFT;
	if (!follow)
		flags |= PF_SAMPLE_F_OFF_CAPTURE_ONLY;
	if (!ot && !(ot = off_task(prev, true)))
		return 0;
	s->off_cpu_out++;
	ot->ts_ns = now;
	if (!preempt && state != 0) { /* not TASK_RUNNING: it waits */
		ot->flags = flags;
		ot->state = PF_OFF_WAITING;
		return 0;
	}
	/* runnable: the user stack now (the kernel stack when it comes back) */
	flags |= PF_SAMPLE_F_PREEMPTED;
walk:;
	/* one walk, for either record: the verifier sees walk_user once */
	__u32 writes = ++s->writes;
	long ub = walk_user((struct bpf_perf_event_data *)ctx, s, 0, pid, tid, &flags, true);
	if (exiting) {
		off_cpu_fill(s, exiting, ub, flags, writes);
		off_cpu_send(s, exiting);
		ot->exit |= PF_OFF_EXIT_TAKEN;
		return 0;
	}
	hdr_fill(s, now, 0, pid, tid, 0, ub, flags);
	if (bpf_map_update_elem(&off_cpu_recs, &tid, &s->hdr, BPF_ANY) < 0) {
		s->off_cpu_full++;
		return 0;
	}
	ot->state = PF_OFF_PREEMPTED;
	return 0;
}

/* A blocked thread's system call returns (current is it, on the CPU it was switched back in
 * on): its user stack, which has not moved since it left, completes the waiting record. One
 * per-CPU compare for every other system call. This program runs preemptible, with
 * interrupts on: while it walks (PF_OFF_EXITING) a switch that preempts it completes the
 * record from its own walk (PF_OFF_EXIT_TAKEN); until it is done (PF_OFF_EXIT_BUSY) no
 * switch of it replaces the record, so what it wrote into the entry stays its own. */
SEC("tp_btf/sys_exit")
int BPF_PROG(off_cpu_sys_exit, struct pt_regs *regs, long ret)
{
	__u32 zero = 0;
	struct pf_bpf_percpu *s = bpf_map_lookup_elem(&scratch_map, &zero);
	if (!s || !s->pending_tid || alloc_busy(s))
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	if (tid != s->pending_tid)
		return 0;
	s->pending_tid = 0;
	struct pf_bpf_off_task *ot = off_task(bpf_get_current_task_btf(), false);
	if (!ot || ot->state != PF_OFF_PENDING)
		return 0;
	struct pf_bpf_off_rec *r = bpf_map_lookup_elem(&off_cpu_recs, &tid);
	if (!r || !(r->hdr.flags & PF_SAMPLE_F_USER_PENDING)) {
		ot->state = PF_OFF_NONE;
		return 0;
	}
	ot->exit = PF_OFF_EXIT_BUSY;
	ot->state = PF_OFF_EXITING;
	__u32 writes = ++s->writes, flags = 0;
	long ub = walk_user((struct bpf_perf_event_data *)ctx, s, 0, r->hdr.pid, tid, &flags, true);
	if (!(ot->exit & PF_OFF_EXIT_TAKEN)) /* else a switch sent it, from its own walk */
		off_cpu_fill(s, r, ub, flags, writes);
	ot->state = PF_OFF_NONE; /* from here a switch leaves the record alone */
	if (ot->exit & PF_OFF_EXIT_TAKEN)
		bpf_map_delete_elem(&off_cpu_recs, &tid);
	else
		off_cpu_out(s, r, tid);
	ot->exit = 0;
	return 0;
}

static __always_inline void emit(__u32 type, __u32 pid, __u32 ppid, struct task_struct *t)
{
	struct pf_bpf_proc_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(PF_CNT_LOST_EVENT);
		return;
	}
	e->type = type;
	e->pid = pid;
	e->ppid = ppid;
	e->pad = 0;
	e->ts_ns = bpf_ktime_get_ns();
	BPF_CORE_READ_STR_INTO(&e->comm, t, comm);
	/* While filters need verdicts, wake user space at once (a new process is sampled as
	 * "unknown" until its verdict lands). Otherwise the events only keep user space's
	 * process table current: like samples, they wait for its timer or a quarter-full ring,
	 * so a build's thousands of execs do not cost a wake-up each. */
	__u64 wake = 0; /* the default: wake a waiting consumer */
	if (!filter_on)
		wake = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= PF_EVENTS_RB_BYTES / 4
			       ? BPF_RB_FORCE_WAKEUP
			       : BPF_RB_NO_WAKEUP;
	bpf_ringbuf_submit(e, wake);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(handle_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 pid = BPF_CORE_READ(p, tgid);

	/* A new executable: the old verdict no longer holds until user space says so. */
	bpf_map_delete_elem(&pid_filter, &pid);
	__sync_fetch_and_add(&filter_gen, 1);
	bpf_map_delete_elem(&py_procs, &pid); /* another program, maybe no Python */
	bpf_map_delete_elem(&v8_procs, &pid);
	bpf_map_delete_elem(&jvm_procs, &pid);
	emit(PF_PROC_EXEC, pid, 0, p);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(handle_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 pid = BPF_CORE_READ(child, pid), tgid = BPF_CORE_READ(child, tgid);
	__u32 ptgid = BPF_CORE_READ(parent, tgid);

	if (pid != tgid) /* a new thread: covered by its process's entry */
		return 0;
	/* Same executable and cgroup as the parent: inherit its verdict right away. */
	__u8 *v = bpf_map_lookup_elem(&pid_filter, &ptgid);
	if (v) {
		__u8 val = *v;
		bpf_map_update_elem(&pid_filter, &tgid, &val, BPF_ANY);
		__sync_fetch_and_add(&filter_gen, 1);
	}
	/* A capture of the parent covers its children too. */
	__u8 *m = bpf_map_lookup_elem(&capture_pids, &ptgid);
	if (m) {
		__u8 mask = *m;
		bpf_map_update_elem(&capture_pids, &tgid, &mask, BPF_ANY);
	}
	emit(PF_PROC_FORK, tgid, ptgid, child);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(handle_exit, struct task_struct *p)
{
	__u32 pid = BPF_CORE_READ(p, pid), tgid = BPF_CORE_READ(p, tgid);

	bpf_map_delete_elem(&py_threads, &pid);
	bpf_map_delete_elem(&off_cpu_recs, &pid);
	if (pid != tgid)
		return 0;
	bpf_map_delete_elem(&py_procs, &tgid);
	bpf_map_delete_elem(&v8_procs, &tgid);
	bpf_map_delete_elem(&jvm_procs, &tgid);
	if (bpf_map_delete_elem(&pid_filter, &tgid) == 0)
		__sync_fetch_and_add(&filter_gen, 1);
	bpf_map_delete_elem(&capture_pids, &tgid);
	emit(PF_PROC_EXIT, tgid, 0, p);
	return 0;
}

/* ---- allocation profiles (cpu_sampler.h) ---- */

/* alloc_gaps: exponential gaps in bytes (mean sample_bytes), alloc_gen bumped at every start
 * so that each CPU draws its first gap afresh; written by user space through .bss. */
__u64 alloc_gaps[PF_ALLOC_GAPS] = {};
__u32 alloc_gen = 0;

extern bool bpf_session_is_return(void) __ksym __weak;
extern __u64 *bpf_session_cookie(void) __ksym __weak;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PF_ALLOC_LIVE_MAX);
	__type(key, __u64);
	__type(value, __u64);
} alloc_live SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PF_ALLOC_OUT_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, __u64);
} alloc_out SEC(".maps");

/* A free of addr: a sampled one leaves alloc_live and is told to user space. One lookup for
 * every other address. */
static __always_inline void alloc_free(struct pf_bpf_percpu *s, __u64 addr)
{
	if (!addr || !bpf_map_lookup_elem(&alloc_live, &addr))
		return;
	if (bpf_map_delete_elem(&alloc_live, &addr) < 0)
		return; /* another thread's free of it won */
	struct pf_bpf_sample h = {};
	__u64 id = bpf_get_current_pid_tgid();
	h.ts_ns = bpf_ktime_get_ns();
	h.off_ns = addr;
	h.pid = id >> 32;
	h.tid = (__u32)id;
	h.flags = PF_SAMPLE_F_ALLOC_FREE;
	s->alloc_frees++;
	output(s, &h, sizeof(h), h.flags, h.ts_ns, REC_ALLOC);
}

/* The return of a sampled call: its address, its caller's stack, into alloc_live. */
static __always_inline int alloc_return(struct pt_regs *ctx, struct pf_bpf_percpu *s)
{
	__u64 *c = bpf_session_cookie();
	if (!c || !*c)
		return 0;
	__u64 size = *c, addr = PT_REGS_RC(ctx);
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id;
	if (bpf_get_attach_cookie(ctx) == PF_ALLOC_FN_POSIX_ALIGN) {
		__u64 *out = bpf_map_lookup_elem(&alloc_out, &tid);
		__u64 p = out ? *out : 0;
		bpf_map_delete_elem(&alloc_out, &tid);
		if ((int)addr != 0 || !p || bpf_probe_read_user(&addr, sizeof(addr), (void *)p) < 0)
			addr = 0;
	}
	if (!addr) {
		s->alloc_failed++;
		return 0;
	}
	if (alloc_busy(s))
		return 0; /* this CPU's record is another task's (preempted in its walk) */
	s->alloc_busy = 1;
	s->writes++;
	__u32 flags = PF_SAMPLE_F_ALLOC;
	long ub = walk_user((struct bpf_perf_event_data *)ctx, s, 0, pid, tid, &flags, false);
	ub &= 0x3ff;
	s->ips[(ub / 8) & (2 * (PF_MAX_STACK + 1) - 1)] = addr;
	__u64 one = size;
	if (bpf_map_update_elem(&alloc_live, &addr, &one, BPF_ANY) < 0) {
		s->alloc_live_full++;
		flags |= PF_SAMPLE_F_ALLOC_UNTRACKED;
	}
	hdr_fill(s, bpf_ktime_get_ns(), size, pid, tid, 0, ub, flags);
	/* the address entered alloc_live before the record goes out: a free racing with it on
	 * another CPU is then written after it (the ring keeps reservation order), or is a free
	 * of an address it no longer finds, which user space matches to nothing */
	if (output(s, &s->hdr, sizeof(s->hdr) + ub + 8, flags, s->hdr.ts_ns, REC_ALLOC) < 0)
		bpf_map_delete_elem(&alloc_live, &addr);
	s->alloc_busy = 0;
	return 0;
}

/* Entry and return of an allocator entry point (its PF_ALLOC_FN_* is the attach cookie). 0
 * at entry asks for the return; anything else skips it. */
SEC("uprobe")
int alloc_probe(struct pt_regs *ctx)
{
	/* the arguments first, from ctx itself (the verifier refuses a load from a moved ctx
	 * pointer, which the compiler makes of loads it sinks into the branches) */
	__u64 a1 = PT_REGS_PARM1(ctx), a2 = PT_REGS_PARM2(ctx), a3 = PT_REGS_PARM3(ctx);
	asm volatile("" : "+r"(a1), "+r"(a2), "+r"(a3));
	__u32 zero = 0;
	struct pf_bpf_percpu *s = bpf_map_lookup_elem(&scratch_map, &zero);
	if (!s)
		return 1;
	if (bpf_session_is_return())
		return alloc_return(ctx, s);
	s->alloc_calls++;
	__u64 kind = bpf_get_attach_cookie(ctx), size;
	switch (kind) {
	case PF_ALLOC_FN_FREE:
		alloc_free(s, a1);
		return 1;
	case PF_ALLOC_FN_MALLOC:
		size = a1;
		break;
	case PF_ALLOC_FN_CALLOC: {
		__u64 lim = a2 ? ~0ull / a2 : ~0ull;
		asm volatile("" : "+r"(lim)); /* kept a division: clang would make the check a
					       * 128-bit multiply, which BPF has not */
		if (a1 > lim)
			return 1; /* fails: ENOMEM */
		size = a1 * a2;
		break;
	}
	case PF_ALLOC_FN_REALLOC:
		alloc_free(s, a1);
		size = a2;
		break;
	case PF_ALLOC_FN_ALIGNED:
		size = a2;
		break;
	case PF_ALLOC_FN_POSIX_ALIGN:
		size = a3;
		break;
	default:
		return 1;
	}
	if (s->alloc_gen != alloc_gen) {
		s->alloc_gen = alloc_gen;
		s->alloc_left = alloc_gaps[bpf_get_prandom_u32() & (PF_ALLOC_GAPS - 1)];
	}
	if (size < s->alloc_left) {
		s->alloc_left -= size;
		return 1;
	}
	/* the process is memoryless: the next gap starts after this allocation */
	s->alloc_left = alloc_gaps[bpf_get_prandom_u32() & (PF_ALLOC_GAPS - 1)];
	if (!size)
		return 1;
	__u64 *c = bpf_session_cookie();
	if (!c)
		return 1;
	if (kind == PF_ALLOC_FN_POSIX_ALIGN) {
		__u32 tid = (__u32)bpf_get_current_pid_tgid();
		if (bpf_map_update_elem(&alloc_out, &tid, &a1, BPF_ANY) < 0)
			return 1;
	}
	s->alloc_sampled++;
	*c = size;
	return 0;
}

/* What the bench compares alloc_probe with: a uprobe that does nothing, on the same entry
 * points (bench/alloc_cost). */
SEC("uprobe")
int alloc_empty(struct pt_regs *ctx)
{
	return 0;
}

static const char ksym_fmt[] = "%pS";

SEC("syscall")
int resolve_ksyms(void *ctx)
{
	__u32 zero = 0;
	struct pf_bpf_ksym_req *r = bpf_map_lookup_elem(&ksym_req, &zero);
	if (!r)
		return 0;
	__u32 n = r->n;
	for (__u32 i = 0; i < PF_KSYM_BATCH; i++) {
		if (i >= n)
			break;
		bpf_snprintf(r->text[i], PF_KSYM_TEXT_LEN, ksym_fmt, &r->addrs[i], sizeof(__u64));
	}
	return 0;
}
