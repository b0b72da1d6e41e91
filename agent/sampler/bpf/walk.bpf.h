// SPDX-License-Identifier: GPL-2.0
/* walk.bpf.h — the user-stack walk of cpu_sampler.bpf.c, included by it alone (after its maps
 * and counters): one step of a frame by the process's .eh_frame rows, by its frame pointer or
 * across a signal frame, and the JIT frames of V8 (its frame markers) and HotSpot (its code
 * cache, its interpreter's frame layout) met on the way, all under one bpf_loop (walk_tables).
 * The maps and structs it reads are described in cpu_sampler.h. */
#ifndef PF_WALK_BPF_H
#define PF_WALK_BPF_H

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

#endif
