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
 *  resolve_ksyms  syscall program run on demand by user space (BPF_PROG_TEST_RUN): kernel
 *              addresses -> "name+off/size [module]" through the kernel's kallsyms lookup
 *              (cpu_sampler.h, struct pf_bpf_ksym_req). Not loaded where the kernel lacks
 *              syscall programs (< 5.14); user space then reads /proc/kallsyms.
 *
 * Every map is sized explicitly; every lookup is NULL-checked; losses are counted per CPU. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "cpu_sampler.h"

char LICENSE[] SEC("license") = "GPL";

/* 1 while include/exclude filters are active; written by user space through .bss. */
__u32 filter_on = 0;
/* The agent's own process (tgid), never sampled unless 0; one compare instead of a map
 * lookup per tick when no filter is active. Written by user space through .bss. */
__u32 skip_tgid = 0;
/* Wake the consumer once this many bytes wait (a quarter of the ring buffer, whose size
 * user space picks from the CPU count before load). */
const volatile __u64 wake_bytes = PF_SAMPLES_RB_MIN_BYTES / 4;
/* PF_BENCH_* bits: parts of do_sample left out for bench/bpf_sample_cost.sh; 0 in the agent. */
const volatile __u32 bench_omit = 0;

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

/* Per-CPU scratch record: header + room for both stacks. 2 x 128 slots so that the masked
 * (verifier-provable) offsets below always stay inside the value. */
struct scratch {
	struct pf_bpf_sample hdr;
	__u64 ips[2 * (PF_MAX_STACK + 1)];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pf_bpf_ksym_req);
} ksym_req SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);
	if (v)
		*v += 1;
}

#define STACK_BYTES (PF_MAX_STACK * 8)

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

/* Writes one sample record of the current task (stacks of the interrupted context) and counts
 * it under cnt. */
static __always_inline int record(struct bpf_perf_event_data *ctx, __u32 pid, __u32 tid,
				  __u32 flags, __u32 cnt)
{
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch_map, &zero);
	if (!s)
		return 0;

	long kb = in_user_mode(ctx) ? 0 : bpf_get_stack(ctx, s->ips, STACK_BYTES, 0);
	if (kb < 0)
		kb = 0;
	kb &= 0x3ff; /* <= 1016 in practice; the mask proves it to the verifier */
	long ub = bpf_get_stack(ctx, (void *)s->ips + kb, STACK_BYTES, BPF_F_USER_STACK);
	if (ub < 0)
		ub = 0;
	ub &= 0x3ff;
	if (kb == 0 && ub == 0)
		count(PF_CNT_STACK_ERR);

	s->hdr.ts_ns = bpf_ktime_get_ns();
	s->hdr.pid = pid;
	s->hdr.tid = tid;
	s->hdr.cpu = bpf_get_smp_processor_id();
	s->hdr.kstack_len = kb / 8;
	s->hdr.ustack_len = ub / 8;
	s->hdr.flags = flags;
	bpf_get_current_comm(s->hdr.comm, sizeof(s->hdr.comm));

	__u64 size = sizeof(s->hdr) + kb + ub;
	if (size > sizeof(*s))
		return 0;
	if (bench_omit & PF_BENCH_OMIT_OUTPUT) {
		count(cnt);
		return 0;
	}
	/* Wake the consumer only once the buffer is a quarter full; it also drains on its own
	 * timer, so at 99 Hz there is about one wake-up per poll interval, not one per sample. */
	__u64 wake = bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA) >= wake_bytes
			     ? BPF_RB_FORCE_WAKEUP
			     : BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_output(&samples, s, size, wake) < 0) {
		count(PF_CNT_LOST_RB);
		return 0;
	}
	count(cnt);
	return 0;
}

/* The bare floor of a sample (PF_BENCH_FLOOR): the same stack walks into the same scratch
 * record, nothing else. */
static __always_inline int stacks_only(struct bpf_perf_event_data *ctx)
{
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch_map, &zero);
	if (!s)
		return 0;
	long kb = in_user_mode(ctx) ? 0 : bpf_get_stack(ctx, s->ips, STACK_BYTES, 0);
	if (kb < 0)
		kb = 0;
	kb &= 0x3ff;
	bpf_get_stack(ctx, (void *)s->ips + kb, STACK_BYTES, BPF_F_USER_STACK);
	return 0;
}

SEC("perf_event")
int do_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id;

	if (tid == 0 || pid == skip_tgid) /* the idle task, the agent itself */
		return 0;

	if (bench_omit & PF_BENCH_FLOOR)
		return stacks_only(ctx);
	__u32 flags = 0;
	if (filter_on && !(bench_omit & PF_BENCH_OMIT_FILTER)) {
		__u8 *verdict = bpf_map_lookup_elem(&pid_filter, &pid);
		if (verdict && *verdict != PF_FILTER_ALLOW && !(bench_omit & PF_BENCH_KEEP_ALL)) {
			count(PF_CNT_FILTERED);
			return 0;
		}
		if (!verdict)
			flags |= PF_SAMPLE_F_UNKNOWN;
	}
	return record(ctx, pid, tid, flags, PF_CNT_SAMPLES);
}

SEC("perf_event")
int do_capture(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id;

	if (tid == 0 || pid == skip_tgid)
		return 0;
	__u8 *mask = bpf_map_lookup_elem(&capture_pids, &pid);
	if (!mask || !*mask)
		return 0;
	__u32 flags = PF_SAMPLE_F_CAPTURE | ((__u32)*mask << PF_SAMPLE_CAPTURE_SHIFT);
	return record(ctx, pid, tid, flags, PF_CNT_CAPTURE);
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

	if (pid != tgid)
		return 0;
	bpf_map_delete_elem(&pid_filter, &tgid);
	bpf_map_delete_elem(&capture_pids, &tgid);
	emit(PF_PROC_EXIT, tgid, 0, p);
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
