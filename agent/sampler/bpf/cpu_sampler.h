/* cpu_sampler.h — the types shared by cpu_sampler.bpf.c and sampler_bpf.c (libbpf-tools'
 * x.h of the x.bpf.c / x.h / x.c trio): fixed-width only, no kernel or libc headers.
 *
 * Two ring buffers carry data to user space:
 *  - `samples`: one struct pf_bpf_sample per CPU-clock tick of a sampled task, followed by
 *    kstack_len kernel then ustack_len user instruction pointers (leaf first). The record is
 *    sized to what the stacks used, so a 12-frame stack costs ~150 bytes, not 2 KiB.
 *  - `events`: struct pf_bpf_proc_event on exec, fork (new process, not thread) and exit of a
 *    thread-group leader; user space keeps the pid allow-map current from them.
 *
 * The allow-map `pid_filter` (tgid -> PF_FILTER_*) is consulted only while `filter_on` is set.
 * A pid missing from it is recorded with PF_SAMPLE_F_UNKNOWN so user space can decide once it
 * has computed the process's attributes (the few milliseconds after an exec). */
#ifndef PF_CPU_SAMPLER_H
#define PF_CPU_SAMPLER_H

#define PF_MAX_STACK 127 /* perf's default kernel.perf_event_max_stack */
#define PF_COMM_LEN 16

/* The samples ring buffer: 64 KiB per possible CPU (~2 s of 99 Hz samples with deep stacks,
 * drained every 0.5 s), rounded up to a power of two, at least 256 KiB, at most 8 MiB. Its
 * pages are mapped twice into the agent, so it counts twice in the agent's RSS. */
#define PF_SAMPLES_RB_PER_CPU (64u << 10)
#define PF_SAMPLES_RB_MIN_BYTES (256u << 10)
#define PF_SAMPLES_RB_MAX_BYTES (8u << 20)
#define PF_EVENTS_RB_BYTES (1u << 16)
#define PF_PID_FILTER_MAX 65536

/* Capture pid map (`capture_pids`, tgid -> bit mask of capture slots): the capture perf events'
 * program (do_capture) records only the processes in it; forks inherit the parent's mask in the
 * kernel, exits drop it. PF_CAPTURE_SLOTS captures can sample at once. */
#define PF_CAPTURE_PIDS_MAX 16384
#define PF_CAPTURE_SLOTS 8

/* pid_filter values */
#define PF_FILTER_DENY 0
#define PF_FILTER_ALLOW 1
#define PF_FILTER_UNKNOWN 0xff /* struct pf_bpf_percpu only: no entry in pid_filter */

/* Indices of the per-CPU `counters` array. The counts of every tick (samples, capture ticks,
 * filtered ticks) live in struct pf_bpf_percpu instead, next to the record the tick writes
 * anyway; their slots here stay 0 and user space adds the two. */
enum pf_bpf_counter {
	PF_CNT_SAMPLES = 0,    /* ticks recorded into the ring buffer */
	PF_CNT_LOST_RB = 1,    /* ring buffer full: sample lost */
	PF_CNT_FILTERED = 2,   /* ticks of denied processes (one map lookup each) */
	PF_CNT_STACK_ERR = 3,  /* both stack walks failed: recorded without stacks */
	PF_CNT_LOST_EVENT = 4, /* process events lost (events ring buffer full) */
	PF_CNT_CAPTURE = 5,    /* capture ticks recorded (do_capture) */
	/* PF_BENCH_TIMING only: ns spent in each part of the recorded ticks, and their count */
	PF_CNT_T_FILTER = 6,  /* entry checks and the pid_filter lookup */
	PF_CNT_T_KSTACK = 7,  /* kernel stack walk (ticks that interrupted kernel mode) */
	PF_CNT_T_USTACK = 8,  /* user stack walk */
	PF_CNT_T_RECORD = 9,  /* header, comm, counters */
	PF_CNT_T_OUTPUT = 10, /* ring-buffer write */
	PF_CNT_T_N = 11,      /* ticks timed */
	PF_CNT_MAX = 12,
};

/* Benchmark variants of do_sample (rodata `bench_omit`, set before load; 0 in the agent): the
 * verifier prunes the branches of a constant, so each variant costs exactly what is left.
 * bench/bpf_sample_cost.sh measures the full program against them for its breakdown. */
#define PF_BENCH_KEEP_ALL 1    /* pid_filter looked up as usual, every tick recorded anyway */
#define PF_BENCH_OMIT_OUTPUT 2 /* stacks walked, record built, nothing written to the ring */
#define PF_BENCH_FLOOR 4       /* the bare floor: only the stack walks, then return */
#define PF_BENCH_OMIT_FILTER 8 /* no pid_filter lookup, every tick recorded */
#define PF_BENCH_TIMING 16     /* bpf_ktime_get_ns between the parts of each recorded tick,
				* summed into the PF_CNT_T_* counters (adds ~6 clock reads) */
#define PF_BENCH_EMPTY 32      /* return at once: what running any program per tick costs */

/* flags of struct pf_bpf_sample */
#define PF_SAMPLE_F_UNKNOWN 1 /* pid not in pid_filter while filtering */
#define PF_SAMPLE_F_CAPTURE 2 /* a capture tick (do_capture): not part of continuous windows */
/* 4 and 8: PF_SAMPLE_F_UNWIND_MISS, PF_SAMPLE_F_DWARF below */
#define PF_SAMPLE_CAPTURE_SHIFT 8 /* flags >> 8: the capture_pids mask of the process */

struct pf_bpf_sample {
	unsigned long long ts_ns; /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	unsigned long long off_ns; /* PF_SAMPLE_F_OFF_CPU: nanoseconds the thread was away, ts_ns
				    * the moment it ran again; 0 for a CPU sample */
	unsigned int pid;         /* tgid */
	unsigned int tid;
	unsigned short cpu;
	unsigned char kstack_len; /* number of kernel ips following */
	unsigned char ustack_len; /* number of user ips following the kernel ones */
	unsigned int flags;
	char comm[PF_COMM_LEN];
	/* followed by kstack_len + ustack_len unsigned long long ips */
};

/* ---- Python frames (agent/interp/python_offsets.h describes CPython's side) ----
 *
 *  py_procs    hash pid -> struct pf_bpf_py_proc: a process running CPython 3.9+, filled by
 *              user space when it detects one, dropped by the kernel at exec and exit
 *  py_threads  LRU hash tid -> struct pf_bpf_py_thread: the thread's PyThreadState, found by
 *              walking the interpreter's thread list (matched on pthread_self(), which is
 *              the thread's fsbase on x86_64), validated on every use
 * When a native user frame lies in the eval loop (_PyEval_EvalFrameDefault and its .cold
 * part), the Python frames that activation runs take its place in the stack, leaf first: one
 * per call for 3.9-3.10 (PyFrameObject.f_back), for 3.11+ the _PyInterpreterFrame chain down
 * to the activation's entry frame (3.11 is_entry; 3.12+ the C stack's shim frame, which is
 * skipped). When the native walk ended before it met the eval loop (frame pointers through code
 * built without them, a frame the tables cannot step), the thread's Python frames follow the
 * native ones. A Python frame is one stack word, PF_PY_FRAME(code object, instruction offset):
 * bit 63 set and bit 62 clear is no user (below 2^47) nor kernel (0xffff8...) address. Python
 * frames count towards PF_MAX_STACK like native ones. */
#define PF_PY_PROCS_MAX 4096
#define PF_PY_THREADS_MAX 16384
#define PF_PY_EVAL_RANGES 4
#define PF_PY_MAX_THREADS 64     /* thread-list entries looked at to find a thread's state */
#define PF_PY_FRAME_READ_MAX 128 /* bytes of a frame read at once: its fields lie inside */
#define PF_PY_THREAD_RETRY_NS (500ull * 1000 * 1000) /* a thread without PyThreadState is
							* looked for again after this */
#define PF_PY_OFF_NONE 0xffff

#define PF_PY_FRAME_TAG (2ull << 62)
#define PF_PY_FRAME_MASK (3ull << 62)
#define PF_PY_CODE_BITS 44 /* code object address >> 3: objects are 8-aligned, below 2^47 */
#define PF_PY_INSTR_BITS 18
#define PF_PY_INSTR_BIAS 2 /* instr + 2 is stored: 3.11+ starts at -2, 3.9-3.10 at -1 */
#define PF_PY_INSTR_MAX ((1u << PF_PY_INSTR_BITS) - 1) /* larger offsets are clamped */
#define PF_PY_IS_FRAME(w) (((w) & PF_PY_FRAME_MASK) == PF_PY_FRAME_TAG)
#define PF_PY_FRAME(code, field)                                                               \
	(PF_PY_FRAME_TAG | (((code) >> 3) << PF_PY_INSTR_BITS) | (unsigned long long)(field))
#define PF_PY_FRAME_CODE(w) (((w) >> PF_PY_INSTR_BITS & ((1ull << PF_PY_CODE_BITS) - 1)) << 3)
#define PF_PY_FRAME_INSTR(w) ((int)((w) & PF_PY_INSTR_MAX) - PF_PY_INSTR_BIAS)

/* frame_kind of struct pf_bpf_py_proc (python_offsets.h PF_PY_FRAMES_*) */
#define PF_BPF_PY_OBJECT 1 /* 3.9-3.10: PyFrameObject */
#define PF_BPF_PY_INTERP 2 /* 3.11+: _PyInterpreterFrame */

/* A process's layout as the walk uses it: user space checked every offset (frame fields lie
 * in [0, frame_read), frame_read <= PF_PY_FRAME_READ_MAX; pointer fields 8-aligned, f_instr
 * 4-aligned for 3.9-3.10's int f_lasti). */
struct pf_bpf_py_proc {
	unsigned long long runtime; /* _PyRuntime */
	unsigned long long eval_start[PF_PY_EVAL_RANGES], eval_end[PF_PY_EVAL_RANGES];
	unsigned int frame_kind; /* PF_BPF_PY_* */
	unsigned int frame_read; /* bytes read of a frame */
	unsigned int code_adaptive; /* 3.11+: instr - code - this is the instruction's offset */
	unsigned short rt_interp_head, interp_threads_head, tstate_next, tstate_thread_id,
		tstate_frame, cframe_frame; /* cframe_frame PF_PY_OFF_NONE: tstate_frame is the
					     * frame itself */
	unsigned short f_back, f_code, f_instr, f_owner, f_is_entry; /* f_owner, f_is_entry:
								      * PF_PY_OFF_NONE */
	unsigned short owner_cstack; /* owner of the entry shim (3.12+), PF_PY_OFF_NONE */
	unsigned short pad[2];
};

/* The merge of Python frames into a user stack, in the per-CPU state (the verifier then
 * sees every step of the loop alike): nat[i] the native frame being merged, cur the next
 * Python frame of the thread's chain to read. */
struct pf_bpf_py_merge {
	unsigned long long cur; /* 0: none left */
	unsigned int base;      /* slot of the first user frame in ips */
	unsigned int n_nat;     /* native user frames in nat */
	unsigned int i;
	unsigned int n;       /* frames written from ips[base] */
	unsigned int in_eval; /* nat[i] is an eval-loop frame whose Python frames are written */
	unsigned int emitted; /* Python frames written in its place so far */
	unsigned int met;     /* an eval-loop frame was met */
	unsigned int frames, errors;
	unsigned int pad;
};

struct pf_bpf_py_thread {
	unsigned long long tstate; /* 0: none found (looked for again after a while) */
	unsigned long long fsbase; /* the thread's, when found */
	unsigned long long ts_ns;  /* when it was looked for */
	unsigned int pid, pad;
};

/* A walk stopped at JIT code of a V8 or a JVM the agent reads, for jit_walk (a tail call from
 * do_sample / do_capture: the JIT walks are verified in that program, apart from the
 * others): where it stopped. */
#define PF_JIT_V8 1
#define PF_JIT_JVM 2
struct pf_bpf_jit_walk {
	unsigned long long ip, sp, bp;
	unsigned int n;       /* user frames written (from slot hdr.kstack_len) */
	unsigned int exact;   /* ip is the interrupted context's, not a return address */
	unsigned int pending; /* set by the walk, cleared by jit_walk or the record */
	unsigned int rt;      /* PF_JIT_V8 or PF_JIT_JVM: whose frames the walk steps */
};

/* The single entry of the per-CPU array `scratch_map`: the sample program's per-CPU state.
 * One tick touches only this (and the ring buffer) in the common case:
 *  - the record is built in hdr + ips, then copied to the ring with only the frames used;
 *  - per-tick counts are plain increments here instead of `counters` map updates;
 *  - the pid_filter verdict of the last process seen on this CPU is cached with the
 *    `filter_gen` it was read at; every change of pid_filter (user space's verdicts, the
 *    kernel's exec/fork/exit handling) bumps filter_gen, which drops every cached verdict;
 *  - the ring's fill is looked at once this CPU has written wake_bytes / 8 since its last
 *    look, not at every record;
 *  - a sample that needs the unwind tables loaded (PF_SAMPLE_F_UNWIND_MISS) wakes user space
 *    at most once per PF_UNWIND_WAKE_NS on this CPU.
 * User space reads the counts with a per-CPU lookup and sums them. */
struct pf_bpf_percpu {
	unsigned long long samples;     /* PF_CNT_SAMPLES */
	unsigned long long captures;    /* PF_CNT_CAPTURE */
	unsigned long long filtered;    /* PF_CNT_FILTERED */
	unsigned long long since_query; /* bytes written since the last look at the ring's fill */
	unsigned long long miss_wake_ns; /* the last wake-up forced for an unwind miss */
	unsigned int cached_pid;        /* tgid of the cached verdict (0: none) */
	unsigned int cached_gen;        /* filter_gen the verdict was read at */
	unsigned int cached_verdict;    /* PF_FILTER_* */
	unsigned int pad;
	/* Python frames (below): samples given Python frames, frames read, frame reads that
	 * failed, samples of Python threads whose PyThreadState was not found */
	unsigned long long py_samples, py_frames, py_read_errors, py_no_thread;
	/* V8 frames: JS frames written, V8 frames whose slots could not be read; Java frames:
	 * frames of the code cache stepped, code-cache frames the walk could not step */
	unsigned long long v8_frames, v8_read_errors, jvm_frames, jvm_read_errors;
	/* off-CPU: records written, switch-outs followed, returns sooner than off_cpu_min_ns,
	 * switch-outs of filtered processes, records not kept (off_cpu_recs full), records
	 * written without a user stack; the thread whose system call return completes its
	 * record (0: none); records begun in hdr/ips (a program that runs preemptible tells
	 * by it that another went through them) */
	unsigned long long off_cpu, off_cpu_out, off_cpu_short, off_cpu_filtered, off_cpu_full;
	unsigned long long off_cpu_kernel_only;
	unsigned int pending_tid, writes;
	/* allocation profiles (alloc_probe): bytes left before the next sample, the alloc_gen
	 * it was drawn at; probed calls, sampled allocations, records written, matched frees,
	 * samples not tracked for frees (alloc_live full), sampled calls that returned NULL */
	unsigned long long alloc_left;
	unsigned int alloc_gen;
	unsigned int alloc_busy; /* an allocation record is being built in hdr/ips */
	unsigned long long alloc_collide; /* ticks, switches, sampled returns that found it busy */
	unsigned long long alloc_calls, alloc_sampled, alloc_out, alloc_frees, alloc_live_full;
	unsigned long long alloc_failed;
	struct pf_bpf_sample hdr;
	unsigned long long ips[2 * (PF_MAX_STACK + 1)]; /* 2 x 128 slots: masked offsets stay inside */
	/* the Python walk: the native user frames before Python's are merged in, the process's
	 * layout (a copy of its py_procs entry), the frame being read */
	unsigned long long nat[PF_MAX_STACK + 1];
	struct pf_bpf_jit_walk jitw;
	struct pf_bpf_py_proc py;
	struct pf_bpf_py_merge pm;
	unsigned long long pyframe[PF_PY_FRAME_READ_MAX / 8];
};

enum pf_bpf_proc_event_type {
	PF_PROC_EXEC = 1,
	PF_PROC_FORK = 2,
	PF_PROC_EXIT = 3,
};

struct pf_bpf_proc_event {
	unsigned int type;
	unsigned int pid;  /* tgid of the process */
	unsigned int ppid; /* fork: parent tgid */
	unsigned int pad;
	unsigned long long ts_ns;
	char comm[PF_COMM_LEN];
};

/* ---- .eh_frame unwinding (unwinder.h is the user side, unwind_table.h the table format) ----
 *
 *  unwind_rows    array (mmapable) of struct pf_bpf_unwind_row: every loaded table's rows, each
 *                 table a contiguous run sorted by pc (ELF virtual address)
 *  unwind_tables  array table id -> struct pf_bpf_unwind_table (its run; n 0: not loaded)
 *  unwind_procs   hash pid -> struct pf_bpf_unwind_proc: the process's executable mappings,
 *                 sorted by address (binary search); an address of none of them is a mapping
 *                 made after the process was loaded (PF_UNWIND_MAP_UNKNOWN: a dlopen)
 * A sample of a process without an entry is walked by frame pointers (bpf_get_stack). */
#define PF_UNWIND_ROWS_DEFAULT (512u << 10) /* 4 MiB of rows (user space sizes it) */
#define PF_UNWIND_TABLES_MAX 4096
#define PF_UNWIND_PROCS_MAX 2048 /* processes with tables at a time (4 KiB each, allocated
				  * as used); others are walked by frame pointers */
#define PF_UNWIND_PROC_MAPS 128  /* executable mappings per process; a process with more keeps
				  * 128 (unwinder.c proc_publish says which) and walks the rest
				  * by frame pointers */
#define PF_UNWIND_MAX_FRAMES PF_MAX_STACK
#define PF_UNWIND_SEARCH_STEPS 24 /* binary search steps: runs of up to 2^24 rows */
/* User space loads a process's tables 50 ms after its first sample and reloads a process at
 * most every 200 ms: a wake-up for an unwind miss more often than this per CPU finds nothing
 * to do (on a host whose processes come and go they were most of the agent's wake-ups). */
#define PF_UNWIND_WAKE_NS (100ull * 1000 * 1000)

/* struct pf_bpf_unwind_row kinds (unwind_table.h enum pf_unwind_kind) */
#define PF_UNWIND_ROW_STOP 0
#define PF_UNWIND_ROW_RSP 1
#define PF_UNWIND_ROW_RBP 2
#define PF_UNWIND_ROW_PLT 3
#define PF_UNWIND_ROW_END 4
#define PF_UNWIND_ROW_SIGNAL 5
/* A SIGNAL row's frame is the sigreturn trampoline: the interrupted rbp, rsp and rip are in
 * the ucontext at its rsp, at these offsets (unwind_table.h PF_UNWIND_UC_*, which explains
 * them; the BPF program checks them against the kernel's struct ucontext). */
#define PF_UNWIND_UC_RBP_OFF 120
#define PF_UNWIND_UC_RSP_OFF 160
#define PF_UNWIND_UC_RIP_OFF 168

struct pf_bpf_unwind_row {
	unsigned int pc;
	short cfa_off;
	unsigned char kind;
	signed char rbp_off8;
};

/* A table's run in unwind_rows is its index, then its rows. Index entry i (a row-sized slot
 * whose pc field holds a row number, counted from `first`) is the row covering
 * base + (i << PF_UNWIND_INDEX_SHIFT): the binary search starts between two entries, a few
 * rows (one or two cache lines) instead of the whole table. */
#define PF_UNWIND_INDEX_SHIFT 9 /* 512 bytes of code per index entry */

struct pf_bpf_unwind_table {
	unsigned int first;   /* index of the first row in unwind_rows */
	unsigned int n;       /* rows; 0: no table (walk by frame pointer) */
	unsigned int index;   /* index of the first index entry in unwind_rows */
	unsigned int n_index; /* index entries (>= 1 when n > 0) */
	unsigned int base;    /* pc of the first row */
};

/* kinds of struct pf_bpf_unwind_map */
#define PF_UNWIND_MAP_TABLE 1   /* a file with a table: table_id */
#define PF_UNWIND_MAP_FP 2      /* a file without a usable table: frame pointers */
#define PF_UNWIND_MAP_JIT 3     /* anonymous executable memory: the walk ends there (in a node
				 * process, also V8's embedded builtins: the V8 walk below) */
#define PF_UNWIND_MAP_UNKNOWN 4 /* an address of no mapping the process had at its load */

struct pf_bpf_unwind_map {
	unsigned long long start, end; /* the whole mapping */
	unsigned long long bias;       /* address - ELF virtual address */
	unsigned int table_id;
	unsigned int kind; /* PF_UNWIND_MAP_* */
};

struct pf_bpf_unwind_proc {
	unsigned int n;         /* mappings in maps[], sorted by start, disjoint */
	unsigned int truncated; /* it has more than PF_UNWIND_PROC_MAPS: an address of none is
				 * walked by frame pointers, not reported as a new mapping */
	struct pf_bpf_unwind_map maps[PF_UNWIND_PROC_MAPS];
};

/* flags of struct pf_bpf_sample, continued */
#define PF_SAMPLE_F_UNWIND_MISS 4 /* the walk met an address of no known mapping of a process
				   * with tables (user space reloads its mappings), or, without
				   * PF_SAMPLE_F_DWARF, the process has no tables yet (user space
				   * loads them); either record wakes user space at once */
#define PF_SAMPLE_F_DWARF 8	  /* the user stack was walked with the tables */
#define PF_SAMPLE_F_PYTHON 16	  /* Python frames replaced eval-loop frames */
#define PF_SAMPLE_F_OFF_CPU 32	  /* an off-CPU record (off_cpu_switch), not a tick */
#define PF_SAMPLE_F_PREEMPTED 64  /* off-CPU: the thread was runnable when switched out */
#define PF_SAMPLE_F_USER_PENDING 128 /* off_cpu_recs only: the user stack is still to walk */
/* off-CPU: flags >> PF_SAMPLE_CAPTURE_SHIFT (8 bits) are the captures that follow the thread's
 * process (off_cpu_cap_mask & its capture_pids mask); with this flag they alone do, the
 * continuous profiles and the span ring do not (the thread was not followed for them) */
#define PF_SAMPLE_F_OFF_CAPTURE_ONLY (1u << 16)
#define PF_SAMPLE_F_ALLOC (1u << 17)  /* an allocation record (alloc_probe): off_ns is the
				       * size asked for, the word after the user ips its address */
#define PF_SAMPLE_F_ALLOC_FREE (1u << 18) /* a free of a sampled address (off_ns), no stacks */
#define PF_SAMPLE_F_ALLOC_UNTRACKED (1u << 19) /* alloc_live was full: its free is not seen */

/* ---- V8 frames (agent/interp/v8_proc.h describes V8's side) ----
 *
 *  v8_procs    hash pid -> struct pf_bpf_v8_proc: a node process whose V8 the agent reads,
 *              filled by user space when it detects one, dropped by the kernel at exec and exit
 * The table walk stops at JIT code (PF_UNWIND_MAP_JIT: anonymous executable mappings, where
 * Sparkplug, Maglev and TurboFan code lies; in a node process user space also marks so the
 * range of V8's embedded builtins inside the node file, where the interpreter's entry and
 * bytecode handlers run). For a process in v8_procs, the record then goes on in jit_walk, a
 * second program (a tail call: verified on its own, so the programs that walk every other
 * process's stacks stay as they were), which walks on from that frame: v8_frame (a global
 * function) reads a JIT frame's slots below its frame pointer: a JS
 * frame (the context slot holds a heap object, not a frame-type marker) becomes one stack word
 * PF_V8_FRAME(SharedFunctionInfo) in place of its address, a typed frame (entry, exit, stub)
 * keeps its address; then the walk steps by the frame pointer (V8 keeps rbp frames) and goes
 * on by the tables when it lands in native code again. A V8 frame is bits 63..62 = 01 (no user
 * nor kernel address) with the tagged SharedFunctionInfo pointer below: user space names it. */
#define PF_V8_PROCS_MAX 4096
#define PF_V8_FRAME_TAG (1ull << 62)
#define PF_V8_IS_FRAME(w) (((w) & (3ull << 62)) == PF_V8_FRAME_TAG)
#define PF_V8_FRAME(sfi) (PF_V8_FRAME_TAG | (sfi))
#define PF_V8_FRAME_SFI(w) ((w) & ((1ull << 47) - 1))

/* ---- Java frames (agent/interp/hotspot_unwind.h describes the JVM's side) ----
 *
 *  jvm_procs   hash pid -> struct pf_bpf_jvm_proc: a JVM whose tables the agent read, filled
 *              by user space once it has, dropped by the kernel at exec and exit
 * The JVM's code cache is anonymous executable memory (PF_UNWIND_MAP_JIT), so the table walk
 * stops there as for V8; for a process in jvm_procs the record goes on in jit_walk, whose
 * jvm_frame (a global function) steps each frame of the code cache by the JVM's rules: the
 * CodeBlob holding the pc is found through its code heap's segment map (each byte: how many
 * segments back the block starts; at most PF_JVM_SEGMAP_HOPS hops), then
 *  - in the interpreter (the [interp_lo, interp_hi) codelets): a frame-pointer frame whose
 *    slots below rbp hold the Method* and the bytecode pointer; the frame becomes the word
 *    PF_JVM_INTERP_FRAME(method, bci) in place of its address, and the caller's sp is the
 *    saved sender sp (the caller's own, before the interpreter extended it);
 *  - a blob with a frame size (compiled methods, native wrappers, runtime stubs): the
 *    caller's sp is sp + frame size, the return address and the saved rbp lie just below it
 *    (before the blob's frame is complete, at the sampled pc only, the return address is at
 *    sp); its address stays, user space names it;
 *  - a blob without one (the call stub, adapters): by the frame pointer.
 * The walk goes on by the tables when it lands in native code again (JNI, the VM itself).
 *
 * A Java frame's word (in place of a code address): bits 63..61 are 0b110 (no user address; a
 * kernel address has bit 61 set as well; Python's words are 0b10x, V8's 0b01x), bits 60..59
 * its kind. User space writes kinds 0–2 in place of code addresses of compiled frames and
 * blobs (bits 46..0 the address of what names the frame): a PcDesc of an nmethod (its scopes:
 * the method and those inlined into it at that point), a Method* (compiled code whose scopes
 * were not read) or a CodeBlob of no method (stubs). The kernel writes kind 3, an interpreted
 * frame: bits 43..0 its Method* >> 3 (8-aligned), bits 58..44 its bytecode index
 * (PF_JVM_BCI_NONE: none or past 32766). */
#define PF_JVM_PCDESC 0
#define PF_JVM_METHOD 1
#define PF_JVM_BLOB 2
#define PF_JVM_INTERP 3
#define PF_JVM_FRAME_TAG (6ull << 61)
#define PF_JVM_IS_FRAME(w) (((w) >> 61) == 6)
#define PF_JVM_FRAME(addr, kind) (PF_JVM_FRAME_TAG | ((unsigned long long)(kind) << 59) | (addr))
#define PF_JVM_FRAME_KIND(w) (((w) >> 59) & 3)
#define PF_JVM_FRAME_ADDR(w) ((w) & ((1ull << 47) - 1))
#define PF_JVM_BCI_NONE 0x7fff
#define PF_JVM_INTERP_FRAME(method, bci)                                                           \
	(PF_JVM_FRAME(0, PF_JVM_INTERP) | ((unsigned long long)(bci) << 44) | ((method) >> 3))
#define PF_JVM_INTERP_METHOD(w) (((w) & ((1ull << 44) - 1)) << 3)
#define PF_JVM_INTERP_BCI(w) ((unsigned)((w) >> 44) & 0x7fff)

/* jvm_pcs (LRU hash (pid, pc) -> struct pf_bpf_jvm_pc): what jvm_frame found of a pc outside
 * the interpreter, so that a pc met again (the hot return addresses) costs one lookup instead
 * of the segment map's and the blob's reads; an entry older than PF_JVM_PC_KEEP_NS is looked
 * up again (the JVM frees and reuses code, never while a frame of it is on a stack). */
#define PF_JVM_PCS_MAX 8192
#define PF_JVM_PC_KEEP_NS 1000000000ull
struct pf_bpf_jvm_pc_key {
	unsigned int pid, pad;
	unsigned long long pc;
};
struct pf_bpf_jvm_pc {
	unsigned long long ts_ns; /* when found */
	int frame;		  /* the blob's frame size in words; 0: a frame-pointer frame */
	unsigned int prologue;	  /* pc lies before the blob's frame is complete */
};

#define PF_JVM_PROCS_MAX 1024
#define PF_JVM_HEAPS 4		    /* code heaps the walk knows (JDK 17 has 1 or 3) */
#define PF_JVM_SEGMAP_HOPS 32	    /* segment-map bytes read back to a block's start */
#define PF_JVM_FRAME_MAX (1u << 20) /* an interpreted frame's rbp at most this far above sp */

/* A code heap: its reserved range, its segment map, the log2 of its segment size (4..16). */
struct pf_bpf_jvm_heap {
	unsigned long long lo, hi, segmap;
	unsigned int log2_seg, pad;
};

/* A JVM's layout as the walk reads it; user space checked every value: heaps sorted and
 * disjoint, offsets within the blob header the walk reads (PF_JVM_BLOB_HDR bytes, 4-aligned
 * ints, an 8-aligned code_begin pointer), frame slots 8-aligned in [-64, -8]. */
#define PF_JVM_BLOB_HDR 64
struct pf_bpf_jvm_proc {
	struct pf_bpf_jvm_heap heaps[PF_JVM_HEAPS];
	unsigned long long interp_lo, interp_hi; /* the interpreter's codelets */
	unsigned int n_heaps;
	unsigned short heapblock_size;	    /* a block's header, before its CodeBlob */
	unsigned short blob_frame_size;	    /* CodeBlob::_frame_size (int, words) */
	unsigned short blob_frame_complete; /* CodeBlob::_frame_complete_offset (int, bytes) */
	unsigned short blob_code_begin;	    /* CodeBlob::_code_begin (pointer) or _code_offset */
	unsigned short code_offset;	    /* 1: blob_code_begin is an int offset from the blob */
	unsigned short method_const;	    /* Method::_constMethod */
	unsigned short constmethod_size;    /* sizeof(ConstMethod): its bytecodes follow it */
	short fp_method, fp_bcp, fp_sender_sp; /* interpreter frame slots, bytes from rbp */
	unsigned int pad;
};

/* A process's layout as the walk reads it: user space checked every offset (frame slots
 * negative, 8-aligned, at least -64; fn_shared 8-aligned below 256). */
struct pf_bpf_v8_proc {
	short fp_marker;   /* the context or frame-type marker slot, from the frame pointer */
	short fp_function; /* the JSFunction slot */
	unsigned short fn_shared; /* JSFunction -> SharedFunctionInfo */
	unsigned short pad;
};

/* ---- off-CPU (off_cpu_switch: tp_btf sched_switch, off_cpu_sys_exit: tp_btf sys_exit;
 * attached only while profiling.off_cpu is on)
 *
 * A profiled thread switched out (prev) is followed when off_cpu_follow is set and a random u32
 * is <= off_cpu_threshold, and a thread of a process in capture_pids with a bit of
 * off_cpu_cap_mask always (an off_cpu or wall capture; PF_SAMPLE_F_OFF_CAPTURE_ONLY when it is
 * followed for captures alone):
 *  - going to wait (not runnable): only the time, in its task storage (off_cpu_task, struct
 *    pf_bpf_off_task: no hashing, freed with the task). When it is switched back in (next of a later
 *    sched_switch) after at least off_cpu_min_ns, its record is made in off_cpu_recs with the
 *    kernel stack it left with (bpf_get_task_stack: it has not run since) and
 *    PF_SAMPLE_F_USER_PENDING; its user stack — which has not moved either — is walked when
 *    its system call returns (sys_exit, current being it, every unwinder of a tick), and the
 *    record goes to `samples`. The CPU it came back on remembers it (pending_tid), so any
 *    other system call costs one per-CPU compare. Leaving again before that (a page fault, a
 *    wait inside the kernel), the record goes out with the kernel stack alone. The return's
 *    walk runs preemptible: a switch that preempts it (PF_OFF_EXITING) walks the same user
 *    stack again, from its own context, and completes the record itself; anything else that
 *    went through the CPU's state meanwhile (a tick, another thread's record: the per-CPU
 *    `writes` moved) leaves the record with the kernel stack alone. While the return runs
 *    (PF_OFF_EXIT_BUSY) its record is the return's: a preemption is not followed then.
 *  - runnable (preempted, or prev_state TASK_RUNNING; PF_SAMPLE_F_PREEMPTED): its user stack
 *    is walked at once (it is still current) into off_cpu_recs; when it is switched back in
 *    after at least off_cpu_min_ns its kernel stack (bpf_get_task_stack, as for a wait: no
 *    frames of the program itself) goes before it and the record goes out. Preemptions come at most at the
 *    scheduler's rate; blocking switches, which can be far more frequent, are walked only when
 *    they lasted.
 * A record's off_ns is the time away, ts_ns the moment the thread came back. Kernel threads are
 * not followed; at most PF_OFF_CPU_THREADS_MAX records are held at once (others counted in
 * off_cpu_full). A thread's exit drops its record; its task storage goes with it. */
#define PF_OFF_CPU_THREADS_MAX 4096 /* records, ~2 KiB each, as used: at most 8.4 MiB */

/* struct pf_bpf_off_task.state */
#define PF_OFF_NONE 0
#define PF_OFF_WAITING 1   /* switched out to wait at ts_ns */
#define PF_OFF_PREEMPTED 2 /* switched out runnable at ts_ns, its record in off_cpu_recs */
#define PF_OFF_PENDING 3   /* back after a wait, its record waiting for the user stack */
#define PF_OFF_EXITING 4   /* its system call return walks the user stack for the record */

/* struct pf_bpf_off_task.exit */
#define PF_OFF_EXIT_BUSY 1  /* off_cpu_sys_exit is completing the record */
#define PF_OFF_EXIT_TAKEN 2 /* a switch preempting it completed the record */

struct pf_bpf_off_task {
	unsigned long long ts_ns;
	unsigned int flags; /* PF_SAMPLE_F_* of the record to make */
	unsigned int state; /* PF_OFF_* */
	unsigned int gen;   /* off_cpu_gen when written */
	unsigned int exit;  /* PF_OFF_EXIT_* */
};

struct pf_bpf_off_rec {
	struct pf_bpf_sample hdr;
	unsigned long long ips[2 * (PF_MAX_STACK + 1)];
};

/* ---- allocation profiles (alloc_probe: a session uprobe, entry and return, on the allocator
 * entry points of captured processes; attached by user space only for an alloc capture)
 *
 * One uprobe_multi link per (process, allocator file), the link's cookie of each offset the
 * entry point's PF_ALLOC_FN_*. At entry the call's bytes are counted against the CPU's
 * alloc_left (a Poisson process over the bytes allocated: the gap to the next sample is drawn
 * from alloc_gaps, exponential quantiles with the mean sample_bytes written by user space);
 * a call that does not reach it returns at once and its return is not probed. A sampled one
 * keeps its size in the session cookie; at its return the user stack (every unwinder of a
 * tick) goes out as a PF_SAMPLE_F_ALLOC record with the returned address after its ips, and
 * the address enters alloc_live. free (and realloc's old pointer) of an address in alloc_live
 * takes it out and writes a PF_SAMPLE_F_ALLOC_FREE record: user space matches it to its
 * sample (inuse). alloc_live full: the sample is flagged PF_SAMPLE_F_ALLOC_UNTRACKED and
 * counted (alloc_live_full), never counted as live. */
#define PF_ALLOC_GAPS 1024	 /* exponential quantiles drawn from */
#define PF_ALLOC_LIVE_MAX 65536	 /* sampled addresses awaiting their free */
#define PF_ALLOC_OUT_MAX 4096	 /* posix_memalign calls sampled and not yet returned */
#define PF_ALLOC_FN_MALLOC 1	 /* size = arg 1 (malloc, valloc, pvalloc) */
#define PF_ALLOC_FN_CALLOC 2	 /* size = arg 1 * arg 2 */
#define PF_ALLOC_FN_REALLOC 3	 /* arg 1 freed, size = arg 2 */
#define PF_ALLOC_FN_ALIGNED 4	 /* size = arg 2 (aligned_alloc, memalign) */
#define PF_ALLOC_FN_POSIX_ALIGN 5 /* *arg 1 = the address, size = arg 3, returns 0 */
#define PF_ALLOC_FN_FREE 6	 /* arg 1 freed (free, cfree) */
#define PF_ALLOC_FN_MAX 6

/* Kernel symbolization in the kernel (resolve_ksyms, a BPF_PROG_TYPE_SYSCALL program run with
 * BPF_PROG_TEST_RUN): user space writes n addresses into the single entry of `ksym_req`, runs
 * the program, and reads back each address formatted by the kernel's own kallsyms lookup as
 * "name+0xoff/0xsize [module]" (vsprintf's %pS; "0x..." when no symbol covers it). That is a
 * binary search in the kernel's table per address instead of reading all of /proc/kallsyms
 * (~120k formatted lines, tens of ms) and holding a copy of it (~4 MB). */
#define PF_KSYM_BATCH 64
#define PF_KSYM_TEXT_LEN 256

struct pf_bpf_ksym_req {
	unsigned int n; /* addresses in addrs[], <= PF_KSYM_BATCH */
	unsigned int pad;
	unsigned long long addrs[PF_KSYM_BATCH];
	char text[PF_KSYM_BATCH][PF_KSYM_TEXT_LEN];
};

#endif
