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
 * Every map is sized explicitly; every lookup is NULL-checked; losses are counted per CPU. */
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

/* ---- the table walk ---- */

/* A mapping as the walk caches it (two of them: stacks alternate between a program and its
 * libc, each change would cost a lookup). */
struct pf_walk_map {
	__u64 start, end, bias;
	__u32 table_id, kind;
};

struct pf_walk {
	__u64 ip, sp, bp;
	struct pf_walk_map m[2]; /* m[0] the most recent */
	__u32 pid;
	__u32 base; /* slot of the first user frame in ips */
	__u32 n;    /* frames stored */
	__u32 flags;
	__u32 guessed; /* the current frame was reached by a frame-pointer step (maybe garbage) */
	__u32 exact;   /* ip is where the context was interrupted (the sampled leaf, or the
			* frame below a signal frame), not a return address: its row is ip's */
	__u64 word;    /* v8_frame, jvm_frame: the frame's word in place of ip (0: ip stays) */
	__u32 rt;      /* jit_walk's: PF_JIT_V8 or PF_JIT_JVM (0: JIT code ends the walk) */
	__u32 pad;
};

/* The mapping of pid covering addr into *d: a binary search of the process's sorted array.
 * An address of none of them is PF_UNWIND_MAP_UNKNOWN (a mapping made after the load), or
 * PF_UNWIND_MAP_FP when the array was truncated; d's range is then empty, so the next frame
 * looks again. -1 when pid has no array (its tables are not loaded).
 * The search has no branch: steps of 128, 64, ..., 1 add themselves to lo when they stay
 * within n and land on a mapping starting at or below addr, the comparisons made with
 * arithmetic shifts (user addresses and n are far below 2^63). It is a global function, which
 * the verifier checks once and not per path of its two callers. With branches, inlined, it
 * refused the program (1 M instructions: 2^8 paths per call site); global with branches it
 * took 300 ms of CPU at the agent's start (now about what the trie took, 0.1 s). */
__noinline int proc_map(__u32 pid, __u64 addr, struct pf_walk_map *d)
{
	if (!d)
		return -1;
	struct pf_bpf_unwind_proc *p = bpf_map_lookup_elem(&unwind_procs, &pid);
	if (!p)
		return -1;
	__u64 n = p->n;
	if (n > PF_UNWIND_PROC_MAPS)
		n = PF_UNWIND_PROC_MAPS;
	__u64 lo = 0; /* maps[0, lo) start at or below addr */
	for (__u64 step = PF_UNWIND_PROC_MAPS; step > 0; step >>= 1) {
		__u64 i = (lo + step - 1) & (PF_UNWIND_PROC_MAPS - 1);
		__u64 within = 1 + ((__s64)(n - (lo + step)) >> 63);
		__u64 below = 1 + ((__s64)(addr - p->maps[i].start) >> 63);
		lo += step & -(within & below);
	}
	__u32 c = (__u32)(lo - 1) & (PF_UNWIND_PROC_MAPS - 1);
	if (lo == 0 || addr >= p->maps[c].end) {
		d->start = d->end = 0;
		d->kind = p->truncated ? PF_UNWIND_MAP_FP : PF_UNWIND_MAP_UNKNOWN;
		return 0;
	}
	d->start = p->maps[c].start;
	d->end = p->maps[c].end;
	d->bias = p->maps[c].bias;
	d->table_id = p->maps[c].table_id;
	d->kind = p->maps[c].kind;
	return 0;
}

/* The row of table id covering ELF virtual address pc: its index entries give the few rows
 * around pc, then a bounded binary search over them. NULL when no row covers it. */
static __always_inline struct pf_bpf_unwind_row *find_row(__u32 id, __u64 pc)
{
	struct pf_bpf_unwind_table *t = bpf_map_lookup_elem(&unwind_tables, &id);
	if (!t || !t->n || !t->n_index || pc > 0xffffffffull || pc < t->base)
		return NULL;
	__u32 b = (__u32)(pc - t->base) >> PF_UNWIND_INDEX_SHIFT;
	if (b >= t->n_index)
		b = t->n_index - 1;
	__u32 k = t->index + b;
	struct pf_bpf_unwind_row *e = bpf_map_lookup_elem(&unwind_rows, &k);
	if (!e)
		return NULL;
	__u32 lo = t->first + e->pc, hi = t->first + t->n; /* rows[lo].pc <= pc < rows[hi].pc */
	if (b + 1 < t->n_index) {
		k++;
		e = bpf_map_lookup_elem(&unwind_rows, &k);
		if (!e)
			return NULL;
		if (t->first + e->pc + 1 < hi)
			hi = t->first + e->pc + 1;
	}
	struct pf_bpf_unwind_row *r;
	for (int i = 0; i < PF_UNWIND_SEARCH_STEPS; i++) {
		if (hi - lo <= 1)
			break;
		__u32 mid = lo + (hi - lo) / 2;
		r = bpf_map_lookup_elem(&unwind_rows, &mid);
		if (!r)
			return NULL;
		if (r->pc <= pc)
			lo = mid;
		else
			hi = mid;
	}
	r = bpf_map_lookup_elem(&unwind_rows, &lo);
	return r && r->pc <= pc ? r : NULL;
}

/* One frame up by the frame-pointer chain: [rbp] is the caller's rbp, [rbp + 8] the return
 * address. 0 to go on, 1 to stop. */
static __always_inline long fp_step(struct pf_walk *st)
{
	__u64 frame[2];
	if (st->bp < st->sp || st->bp & 7 ||
	    bpf_probe_read_user(frame, sizeof(frame), (void *)st->bp) < 0)
		return 1;
	st->sp = st->bp + 16;
	st->bp = frame[0];
	st->ip = frame[1];
	return 0;
}

#if defined(__TARGET_ARCH_x86)
/* The slots sigframe_step reads are those of the kernel's own struct ucontext. */
_Static_assert(__builtin_offsetof(struct ucontext, uc_mcontext.bp) == PF_UNWIND_UC_RBP_OFF &&
		       __builtin_offsetof(struct ucontext, uc_mcontext.sp) == PF_UNWIND_UC_RSP_OFF &&
		       __builtin_offsetof(struct ucontext, uc_mcontext.ip) == PF_UNWIND_UC_RIP_OFF,
	       "x86_64 ucontext layout");
#endif

/* Through a signal frame (a SIGNAL row: the sigreturn trampoline, glibc's __restore_rt). To
 * deliver a signal the kernel pushes a struct rt_sigframe { char *pretcode; struct ucontext
 * uc; struct siginfo info; } and enters the handler with pretcode (the trampoline) as its
 * return address; the handler's return popped it, so in the trampoline rsp points at uc, whose
 * uc_mcontext (struct sigcontext) holds the interrupted registers. One read covers rbp to rip
 * (rbp, rbx, rdx, rax, rcx, rsp, rip). The interrupted rip is not a return address: the next
 * frame's row is looked up at rip itself. 0 to go on, 1 to stop. */
static __always_inline long sigframe_step(struct pf_walk *st)
{
	__u64 regs[(PF_UNWIND_UC_RIP_OFF - PF_UNWIND_UC_RBP_OFF) / 8 + 1];
	if (bpf_probe_read_user(regs, sizeof(regs), (void *)(st->sp + PF_UNWIND_UC_RBP_OFF)) < 0)
		return 1;
	st->bp = regs[0];
	st->sp = regs[(PF_UNWIND_UC_RSP_OFF - PF_UNWIND_UC_RBP_OFF) / 8];
	st->ip = regs[(PF_UNWIND_UC_RIP_OFF - PF_UNWIND_UC_RBP_OFF) / 8];
	st->exact = 1;
	return 0;
}

/* ---- V8 frames (cpu_sampler.h) ---- */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PF_V8_PROCS_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct pf_bpf_v8_proc);
} v8_procs SEC(".maps");

#define V8_BELOW 64 /* bytes of a frame read below its frame pointer: the slots lie there */

/* The frame at st->ip lies in V8's code: its word (a JS frame's SharedFunctionInfo) into
 * st->word, then one step by the frame pointer. One read covers the slots below the frame
 * pointer, the caller's frame pointer and the return address. 0 to go on, 1 to stop, 2 when
 * the frame could not be read. A global function: verified once, whatever the walk's paths. */
__noinline int v8_frame(struct pf_walk *st)
{
	if (!st)
		return 1;
	st->word = 0;
	__u32 pid = st->pid;
	struct pf_bpf_v8_proc *v = bpf_map_lookup_elem(&v8_procs, &pid);
	if (!v) /* not V8's: JIT code of something else, nothing tells how to leave it */
		return 1;
	__u64 slots[V8_BELOW / 8 + 2];
	if (st->bp < st->sp || st->bp & 7 || st->bp < V8_BELOW ||
	    bpf_probe_read_user(slots, sizeof(slots), (void *)(st->bp - V8_BELOW)) < 0)
		return 2;
	__u64 marker = slots[((__u32)(V8_BELOW + v->fp_marker) >> 3) & 7];
	/* a heap object there is the frame's context: a JS frame, its function next to it; a
	 * frame-type marker is a small even number */
	if ((marker & 3) == 1) {
		__u64 fn = slots[((__u32)(V8_BELOW + v->fp_function) >> 3) & 7], sfi;
		if ((fn & 3) == 1 && fn < (1ull << 47) &&
		    bpf_probe_read_user(&sfi, sizeof(sfi), (void *)(fn - 1 + (v->fn_shared & 0xf8))) ==
			    0 &&
		    (sfi & 3) == 1 && sfi < (1ull << 47))
			st->word = PF_V8_FRAME(sfi);
	}
	st->sp = st->bp + 16;
	st->bp = slots[V8_BELOW / 8];
	st->ip = slots[V8_BELOW / 8 + 1];
	st->guessed = 0; /* V8 keeps its frame-pointer chain: the return address is real */
	return 0;
}

/* ---- Java frames (cpu_sampler.h) ---- */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PF_JVM_PROCS_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct pf_bpf_jvm_proc);
} jvm_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PF_JVM_PCS_MAX);
	__type(key, struct pf_bpf_jvm_pc_key);
	__type(value, struct pf_bpf_jvm_pc);
} jvm_pcs SEC(".maps");

#define JVM_BELOW 64 /* bytes of an interpreted frame read below its rbp: the slots lie there */

/* The CodeBlob holding pc in j's code heaps: the block whose segment-map entry is 0, reached
 * back from pc's segment. 0 when none (free space, a segment map read fails, too many hops). */
static __always_inline __u64 jvm_blob(const struct pf_bpf_jvm_proc *j, __u64 pc)
{
	const struct pf_bpf_jvm_heap *h = NULL;
	for (int i = 0; i < PF_JVM_HEAPS; i++)
		if (i < j->n_heaps && pc >= j->heaps[i].lo && pc < j->heaps[i].hi)
			h = &j->heaps[i];
	if (!h)
		return 0;
	__u32 log2 = h->log2_seg & 31;
	__u64 idx = (pc - h->lo) >> log2;
	for (int hop = 0; hop < PF_JVM_SEGMAP_HOPS; hop++) {
		__u8 b;
		if (bpf_probe_read_user(&b, 1, (void *)(h->segmap + idx)) < 0 || b == 0xff ||
		    b > idx)
			return 0;
		if (b == 0)
			return h->lo + (idx << log2) + j->heapblock_size;
		idx -= b;
	}
	return 0;
}

/* The frame at st->ip (pc: the instruction it is at, ip - 1 for a return address) lies in a
 * JVM's code cache: stepped to its caller by the rules cpu_sampler.h lists, an interpreted
 * frame's word into st->word. 0 to go on, 1 to stop (not a JVM's), 2 when the frame could
 * not be read. A global function: verified once, whatever the walk's paths. */
__noinline int jvm_frame(struct pf_walk *st, __u64 pc)
{
	if (!st)
		return 1;
	st->word = 0;
	__u32 pid = st->pid;
	struct pf_bpf_jvm_proc *j = bpf_map_lookup_elem(&jvm_procs, &pid);
	if (!j)
		return 1;
	st->guessed = 0; /* each step below follows the JVM's own frame layout */
	if (pc >= j->interp_lo && pc < j->interp_hi) {
		__u64 slots[JVM_BELOW / 8 + 2], fp = st->bp;
		if (fp < st->sp || fp - st->sp > PF_JVM_FRAME_MAX || fp & 7 || fp < JVM_BELOW ||
		    bpf_probe_read_user(slots, sizeof(slots), (void *)(fp - JVM_BELOW)) < 0)
			return 2;
		__u64 method = slots[((__u32)(JVM_BELOW + j->fp_method) >> 3) & 7];
		__u64 bcp = slots[((__u32)(JVM_BELOW + j->fp_bcp) >> 3) & 7];
		__u64 sender = slots[((__u32)(JVM_BELOW + j->fp_sender_sp) >> 3) & 7];
		if (method && !(method & 7) && method < (1ull << 47)) {
			__u64 cm = 0, bci = PF_JVM_BCI_NONE;
			if (bpf_probe_read_user(&cm, sizeof(cm),
						(void *)(method + j->method_const)) == 0 &&
			    bcp >= cm + j->constmethod_size &&
			    bcp - (cm + j->constmethod_size) < PF_JVM_BCI_NONE)
				bci = bcp - (cm + j->constmethod_size);
			st->word = PF_JVM_INTERP_FRAME(method, bci);
		}
		st->sp = sender >= fp + 16 && sender - fp <= PF_JVM_FRAME_MAX ? sender : fp + 16;
		st->bp = slots[JVM_BELOW / 8];
		st->ip = slots[JVM_BELOW / 8 + 1];
		return 0;
	}
	struct pf_bpf_jvm_pc_key key = {.pid = pid, .pc = pc};
	__u64 now = bpf_ktime_get_ns();
	struct pf_bpf_jvm_pc *c = bpf_map_lookup_elem(&jvm_pcs, &key), found;
	if (!c || now - c->ts_ns > PF_JVM_PC_KEEP_NS) {
		__u64 blob = jvm_blob(j, pc);
		__u32 hdr[PF_JVM_BLOB_HDR / 4];
		if (!blob || bpf_probe_read_user(hdr, sizeof(hdr), (void *)blob) < 0)
			return 2;
		__s32 frame = (__s32)hdr[(j->blob_frame_size >> 2) & 15];
		__s32 complete = (__s32)hdr[(j->blob_frame_complete >> 2) & 15];
		__u32 cb = (j->blob_code_begin >> 2) & 15; /* a pointer: 8-aligned, not last */
		__u64 code = j->code_offset ? blob + (__s64)(__s32)hdr[cb]
					    : ((__u64)hdr[(cb + 1) & 15] << 32 | hdr[cb]);
		/* the call stub and adapters (no frame size) are frame-pointer frames */
		found = (struct pf_bpf_jvm_pc){
		    .ts_ns = now,
		    .frame = frame > 0 && frame <= 65536 ? frame : 0,
		    .prologue = complete > 0 && pc >= code && pc - code < (__u64)complete};
		bpf_map_update_elem(&jvm_pcs, &key, &found, BPF_ANY);
		c = &found;
	}
	__s32 frame = c->frame;
	if (frame <= 0)
		return fp_step(st) ? 2 : 0;
	__u64 pair[2];
	if (pc == st->ip && c->prologue) {
		/* the sampled pc in the prologue: the frame is not set up, the return address
		 * is the last thing pushed */
		if (bpf_probe_read_user(&pair[1], 8, (void *)st->sp) < 0)
			return 2;
		st->sp += 8;
		st->ip = pair[1];
		return 0;
	}
	__u64 sender = st->sp + (__u64)frame * 8;
	if (bpf_probe_read_user(pair, sizeof(pair), (void *)(sender - 16)) < 0)
		return 2;
	st->sp = sender;
	st->bp = pair[0];
	st->ip = pair[1];
	return 0;
}

/* One frame: stores the frame at st->ip, then steps to its caller. With jit (jit_walk's
 * walk), JIT code is walked by v8_frame or jvm_frame (st->rt); without (every other walk),
 * the walk stops there, as it did before JIT code was walked at all, and walk_tables leaves
 * the frame to jit_walk: the JIT walks are verified in their own program, and the other
 * walks' verification (most of the programs') is the same as without them. */
static __always_inline long unwind_frame(struct pf_walk *st, bool jit)
{
	__u32 zero = 0;
	struct pf_bpf_percpu *s = bpf_map_lookup_elem(&scratch_map, &zero);
	if (!s || st->ip < 4096)
		return 1;
	s->ips[(st->base + st->n) & (2 * (PF_MAX_STACK + 1) - 1)] = st->ip;
	st->n++;
	if (st->n >= PF_UNWIND_MAX_FRAMES)
		return 1;
	/* a caller's return address may be just past its function (a call to a noreturn
	 * function ends it): look up the call instruction instead; an interrupted context's
	 * rip (st->exact) is the instruction itself */
	__u64 pc = st->exact ? st->ip : st->ip - 1;
	st->exact = 0;
	if (pc < st->m[0].start || pc >= st->m[0].end) {
		struct pf_walk_map tmp = st->m[0];
		if (pc >= st->m[1].start && pc < st->m[1].end)
			st->m[0] = st->m[1];
		else if (proc_map(st->pid, pc, &st->m[0]) < 0)
			return 1;
		st->m[1] = tmp;
	}
	if (jit && st->m[0].kind == PF_UNWIND_MAP_JIT) {
		bool v8 = st->rt == PF_JIT_V8;
		long r = v8 ? v8_frame(st) : jvm_frame(st, pc);
		if (st->word)
			s->ips[(st->base + st->n - 1) & (2 * (PF_MAX_STACK + 1) - 1)] = st->word;
		if (v8) {
			s->v8_frames += st->word != 0;
			s->v8_read_errors += r > 1;
		} else {
			s->jvm_frames += r == 0;
			s->jvm_read_errors += r > 1;
		}
		return r ? 1 : 0;
	}
	switch (st->m[0].kind) {
	case PF_UNWIND_MAP_TABLE:
		break;
	case PF_UNWIND_MAP_JIT:
		return 1; /* its address is the last frame: nothing tells how to leave it */
	case PF_UNWIND_MAP_UNKNOWN:
		/* a new mapping (dlopen) when the address is trustworthy: the sampled one or a
		 * return address the tables found; after a frame-pointer guess it is likely
		 * garbage, which must not make user space re-read the process's maps */
		if (!st->guessed)
			st->flags |= PF_SAMPLE_F_UNWIND_MISS;
		st->guessed = 1;
		return fp_step(st);
	default:
		st->guessed = 1;
		return fp_step(st);
	}
	struct pf_bpf_unwind_row *r = find_row(st->m[0].table_id, pc - st->m[0].bias);
	if (!r) {
		st->guessed = 1;
		return fp_step(st);
	}
	st->guessed = 0;
	__u64 cfa;
	switch (r->kind) {
	case PF_UNWIND_ROW_RSP:
		cfa = st->sp + r->cfa_off;
		break;
	case PF_UNWIND_ROW_RBP:
		cfa = st->bp + r->cfa_off;
		break;
	case PF_UNWIND_ROW_PLT:
		cfa = st->sp + 8 + ((st->ip & 15) >= (__u64)r->cfa_off ? 8 : 0);
		break;
	case PF_UNWIND_ROW_SIGNAL:
		return sigframe_step(st);
	default: /* END: the outermost frame; STOP: no rule the walk can follow */
		return 1;
	}
	__u64 ra;
	if (r->rbp_off8 == -2) {
		/* the common prologue (push rbp right after the call): one read for both */
		__u64 pair[2];
		if (bpf_probe_read_user(pair, sizeof(pair), (void *)(cfa - 16)) < 0)
			return 1;
		st->bp = pair[0];
		ra = pair[1];
	} else if (bpf_probe_read_user(&ra, sizeof(ra), (void *)(cfa - 8)) < 0) {
		return 1;
	}
	if (r->rbp_off8 && r->rbp_off8 != -2) {
		__u64 bp;
		if (bpf_probe_read_user(&bp, sizeof(bp), (void *)(cfa + (__s64)r->rbp_off8 * 8)) <
		    0)
			return 1;
		st->bp = bp;
	}
	st->sp = cfa;
	st->ip = ra;
	return 0;
}

/* bpf_loop callbacks of the table walk: without JIT frames, and with them (jit_walk). */
static long unwind_step(__u32 i, void *ctx)
{
	return unwind_frame(ctx, false);
}

static long unwind_step_jit(__u32 i, void *ctx)
{
	return unwind_frame(ctx, true);
}

/* The user stack by the unwind tables into s->ips from slot base, when the process has
 * tables: its size in bytes, or -1 when it has none (then the frame-pointer walk runs). */
static __always_inline long walk_tables(struct bpf_perf_event_data *ctx, struct pf_bpf_percpu *s,
					__u32 pid, __u32 base, __u32 *flags, bool sw)
{
#if !defined(__TARGET_ARCH_x86)
	return -1; /* the rows' register rules are x86_64's (user space never enables it) */
#else
	struct pf_walk st = {.pid = pid, .base = base, .exact = 1};
	if (!sw && in_user_mode(ctx)) {
		st.ip = ctx->regs.ip;
		st.sp = ctx->regs.sp;
		st.bp = ctx->regs.bp;
	} else {
		struct task_struct *task = bpf_get_current_task_btf();
		if (task->flags & 0x00200000) /* PF_KTHREAD: no user stack */
			return -1;
		struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
		if (!regs)
			return -1;
		st.ip = BPF_CORE_READ(regs, ip);
		st.sp = BPF_CORE_READ(regs, sp);
		st.bp = BPF_CORE_READ(regs, bp);
	}
	if (proc_map(pid, st.ip, &st.m[0]) < 0) { /* the leaf's: the first step needs no lookup */
		/* no tables yet: user space loads them when it sees this sample, woken soon
		 * (record: at most every PF_UNWIND_WAKE_NS per CPU) rather than at its next
		 * drain */
		*flags |= PF_SAMPLE_F_UNWIND_MISS;
		return -1;
	}
	bpf_loop(PF_UNWIND_MAX_FRAMES, unwind_step, &st, 0);
	*flags |= st.flags | PF_SAMPLE_F_DWARF;
	/* the walk stopped at JIT code (the last mapping looked up: the step that met it
	 * returned at once; frame n - 1 is its) of a node process or a JVM: a tick's record
	 * goes on in jit_walk */
	if (st.m[0].kind == PF_UNWIND_MAP_JIT && st.n && st.n < PF_UNWIND_MAX_FRAMES && !sw) {
		__u32 rt = bpf_map_lookup_elem(&v8_procs, &pid)	   ? PF_JIT_V8
			   : bpf_map_lookup_elem(&jvm_procs, &pid) ? PF_JIT_JVM
								   : 0;
		if (rt)
			s->jitw = (struct pf_bpf_jit_walk){.ip = st.ip,
							   .sp = st.sp,
							   .bp = st.bp,
							   .n = st.n - 1,
							   .exact = st.n == 1,
							   .pending = 1,
							   .rt = rt};
	}
	return (long)st.n * 8;
#endif
}

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
