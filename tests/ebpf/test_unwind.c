/* test_unwind.c — eBPF tests of the kernel's .eh_frame stack walk (unwinder.h,
 * cpu_sampler.bpf.c walk_tables). The workloads are built here without frame pointers:
 *   nofp_workload.c   cc -O2 -fomit-frame-pointer: main -> chain_a -> chain_b -> chain_c ->
 *                     hot_leaf, main -> sort_chain -> qsort (libc) -> cmp_burn, main ->
 *                     search_chain -> bsearch (libc) -> key_burn, main -> clock_chain ->
 *                     clock_gettime (libc, then the vDSO); on SIGUSR1 it dlopens
 *                     nofp_dl.c (main -> dl_chain -> dl_burn -> dl_inner)
 *   nofp_workload.cc  c++ -O2 -fomit-frame-pointer: main -> Cart::total -> std::sort ->
 *                     Item::weight
 *   nofp_workload.rs  rustc -C opt-level=2 -C force-frame-pointers=no (only where rustc is)
 *   nofp_workload.go  go build -ldflags="-s -w" (only where go is): main.main -> chainA ->
 *                     chainB -> hotLeaf, a leaf without a frame; its stacks end in
 *                     runtime.main -> runtime.goexit, not C's main
 *   nofp_signal.c     cc -O2 -fomit-frame-pointer: main -> outer -> spin, interrupted
 *                     by a SIGPROF handler on_prof -> sig_burn (through libc's __restore_rt)
 * A sample is complete when its user stack reaches the C `main` through every function of its
 * chain (symbolized names). >= 95% of each workload's samples must be complete; the frame
 * pointer walk alone is measured on the C workload for comparison. >= 90% of the samples in
 * the signal handler must reach main through the interrupted chain. A library opened with
 * dlopen after sampling started is unwound too, and a process that exits during a capture
 * leaves no entries in the kernel's unwind map. With rows for two of three equal tables, the
 * least recently used table no process maps is the one evicted, and comes back from the disk
 * cache. A process with more executable mappings than its kernel array holds keeps 128 (its
 * program and the libraries loaded first), is still unwound through them, and its other addresses are walked by
 * frame pointers without a reload per sample.
 * Exit 77 when the kernel refuses BPF or perf events, or lacks what the table walk needs. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "gobuild.h"
#include "pf/profcfg.h"
#include "pf/profile.h"
#include "ebpf_util.h"
#include "sampler/sampler_bpf.h"

static char g_dir[64];
static char g_c[128], g_cc[128], g_rs[128], g_go[128], g_dl[128], g_sig[128], g_static[3][128];
static bool g_have_rust, g_have_go;

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int run(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd) == 0 ? 0 : -1;
}

static int build_workloads(void)
{
	const char *src = getenv("PF_SOURCE_DIR");
	src = src ? src : ".";
	snprintf(g_dir, sizeof(g_dir), "/tmp/pf-unwind-XXXXXX");
	if (!mkdtemp(g_dir))
		return -1;
	snprintf(g_c, sizeof(g_c), "%s/nofp_c", g_dir);
	snprintf(g_cc, sizeof(g_cc), "%s/nofp_cc", g_dir);
	snprintf(g_rs, sizeof(g_rs), "%s/nofp_rs", g_dir);
	snprintf(g_go, sizeof(g_go), "%s/nofp_go", g_dir);
	snprintf(g_dl, sizeof(g_dl), "%s/libnofp_dl.so", g_dir);
	snprintf(g_sig, sizeof(g_sig), "%s/nofp_signal", g_dir);
	if (run("cc -O2 -fomit-frame-pointer -g -o %s %s/tests/ebpf/nofp_workload.c -ldl", g_c,
		src) ||
	    run("cc -O2 -fomit-frame-pointer -g -fPIC -shared -o %s %s/tests/ebpf/nofp_dl.c", g_dl,
		src) ||
	    run("c++ -O2 -fomit-frame-pointer -g -o %s %s/tests/ebpf/nofp_workload.cc", g_cc,
		src) ||
	    run("cc -O2 -fomit-frame-pointer -g -o %s %s/tests/ebpf/nofp_signal.c", g_sig, src))
		return -1;
	/* three tables of the same size (libc linked in: ~9 chunks of rows each) */
	for (int i = 0; i < 3; i++) {
		snprintf(g_static[i], sizeof(g_static[i]), "%s/static_%d", g_dir, i);
		if (run("cc -O2 -fomit-frame-pointer -static -Wl,--build-id=0x5eed%04x -o %s "
			"%s/tests/ebpf/nofp_signal.c",
			i, g_static[i], src))
			return -1;
	}
	g_have_rust = run("command -v rustc >/dev/null 2>&1") == 0;
	if (g_have_rust &&
	    run("rustc -C opt-level=2 -C force-frame-pointers=no -g -o %s "
		"%s/tests/ebpf/nofp_workload.rs 2>&1",
		g_rs, src))
		return -1;
	g_have_go = pf_go_available();
	char go_src[256];
	snprintf(go_src, sizeof(go_src), "%s/tests/ebpf/nofp_workload.go", src);
	if (g_have_go && pf_go_build(g_dir, "-ldflags='-s -w'", g_go, go_src, NULL) != 0)
		return -1;
	return 0;
}

static pid_t spawn(const char *exe, unsigned seconds, const char *dlopen_lib)
{
	pid_t pid = fork();
	if (pid == 0) {
		char arg[16];
		snprintf(arg, sizeof(arg), "%u", seconds);
		int fd = open("/dev/null", O_WRONLY);
		if (fd >= 0)
			dup2(fd, 1);
		if (dlopen_lib)
			setenv("PF_WL_DLOPEN", dlopen_lib, 1);
		execl(exe, exe, arg, (char *)NULL);
		_exit(127);
	}
	return pid;
}

static void reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static struct pf_profcfg *include_pid(pid_t pid, unsigned hz)
{
	char yaml[512];
	snprintf(yaml, sizeof(yaml),
		 "profiling:\n  sampling: {frequency_hz: %u, duration_seconds: 30}\n"
		 "  filters:\n    include: [{key: process.pid, match: strict, value: \"%d\"}]\n",
		 hz, (int)pid);
	struct pf_profcfg *cfg = NULL;
	struct pf_error err = {0};
	if (pf_profcfg_parse(yaml, strlen(yaml), &cfg, &err) < 0)
		fail_msg("config: %s", err.msg);
	return cfg;
}

static void poll_for(struct pf_sampler *s, uint64_t ms)
{
	uint64_t end = now_ms() + ms;
	while (now_ms() < end)
		assert_true(pf_sampler_poll(s, 50) >= 0);
}

/* ---- completeness ------------------------------------------------------------------------- */

/* A chain, leaf first: name parts that must appear in this order from the anchor (the first
 * entry) up; "=main" is the exact name main. NULL-terminated. */
typedef const char *const chain_t[8];

static bool name_is(const char *fn, const char *want)
{
	if (want[0] == '=')
		return !strcmp(fn, want + 1);
	return strstr(fn, want) != NULL;
}

struct tally {
	uint64_t total, complete;
	uint64_t chain_total[5], chain_complete[5];
	bool printed;
};

/* Judges every sample of pid in w against chains (n of them). A sample is complete when it
 * reaches the last function of the first chain (C's main; the Go runtime's main) through
 * every function of the chain its frames start. */
static void tally(const struct pf_prof_window *w, pid_t pid, const chain_t *chains, size_t n,
		  struct tally *t)
{
	const char *root = "main";
	for (size_t e = 0; n && chains[0][e]; e++)
		root = chains[0][e] + (chains[0][e][0] == '=');
	for (size_t i = 0; i < w->n_processes; i++) {
		const struct pf_prof_process *p = &w->processes[i];
		if (p->pid != (uint32_t)pid)
			continue;
		for (size_t k = 0; k < p->n_samples; k++) {
			const struct pf_prof_sample *sm = &p->samples[k];
			const struct pf_prof_stack *st = &p->stacks[sm->stack];
			const char *names[160];
			size_t nn = 0;
			for (uint32_t j = 0; j < st->n_frames && nn < 160; j++) {
				const struct pf_prof_frame *f = &p->frames[st->frames[j]];
				if (f->kind != PF_FRAME_KERNEL) /* native, go */
					names[nn++] = f->function ? f->function : "?";
			}
			if (!nn)
				continue;
			bool has_main = false;
			for (size_t j = 0; j < nn; j++)
				has_main |= !strcmp(names[j], root);
			bool ok = has_main;
			int which = -1;
			for (size_t j = 0; j < nn && which < 0; j++) {
				for (size_t c = 0; c < n && which < 0; c++) {
					if (!name_is(names[j], chains[c][0]))
						continue;
					which = (int)c;
					size_t at = j;
					for (size_t e = 1; chains[c][e] && ok; e++) {
						while (at < nn && !name_is(names[at], chains[c][e]))
							at++;
						ok = at < nn;
					}
				}
			}
			t->total += sm->count;
			t->complete += ok ? sm->count : 0;
			if (which >= 0 && which < 5) {
				t->chain_total[which] += sm->count;
				t->chain_complete[which] += ok ? sm->count : 0;
			}
			if (!ok && !t->printed) {
				t->printed = true;
				print_message("  an incomplete stack (leaf first):");
				for (size_t j = 0; j < nn && j < 24; j++)
					print_message(" %s", names[j]);
				print_message("\n");
			}
		}
	}
}

static double pct(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0;
}

static chain_t c_chains[] = {
	{"hot_leaf", "chain_c", "chain_b", "chain_a", "=main", NULL},
	{"cmp_burn", "qsort", "sort_chain", "=main", NULL},
	{"key_burn", "bsearch", "search_chain", "=main", NULL},
	/* the leaf in the vDSO, named from the agent's own image, then libc's wrapper */
	{"=__vdso_clock_gettime", "=clock_gettime", "clock_chain", "=main", NULL},
	{"dl_inner", "dl_burn", "dl_chain", "=main", NULL},
};

/* Samples pid (already running) at 499 Hz: a first window of warm_ms (the process's first
 * samples, taken before its tables are loaded, are walked by frame pointers), judged into
 * *cold when not NULL, then the window of ms that is returned. Tables are cached in the test's
 * directory, like an agent's state directory. */
static struct pf_prof_window *sample_pid(pid_t pid, uint64_t warm_ms, uint64_t ms,
					 bool frame_pointers, struct pf_sampler_stats *st,
					 const chain_t *chains, size_t n, struct tally *cold)
{
	struct pf_error err = {0};
	char cache[96];
	snprintf(cache, sizeof(cache), "%s/unwind-cache", g_dir);
	struct pf_sampler_options o = {.no_dwarf_unwind = frame_pointers,
					.unwind_cache_dir = cache};
	struct pf_sampler *s = pf_sampler_new(&o, &err);
	assert_non_null(s);
	struct pf_profcfg *cfg = include_pid(pid, 499);
	assert_int_equal(pf_sampler_set_config(s, cfg, &err), 0);
	if (warm_ms) {
		poll_for(s, warm_ms);
		struct pf_prof_window *w = pf_sampler_close_window(s, &err);
		assert_non_null(w);
		if (cold)
			tally(w, pid, chains, n, cold);
		pf_prof_window_free(w);
	}
	poll_for(s, ms);
	struct pf_prof_window *w = pf_sampler_close_window(s, &err);
	assert_non_null(w);
	assert_int_equal(pf_sampler_stats(s, st), 0);
	pf_profcfg_free(cfg);
	pf_sampler_free(s);
	return w;
}

/* Runs exe, samples it (sample_pid) and judges the window into *t; prints the figures. */
static void measure_workload(const char *what, const char *exe, const chain_t *chains, size_t n,
			     struct tally *t, struct pf_sampler_stats *st)
{
	pid_t pid = spawn(exe, 8, NULL);
	assert_true(pid > 0);
	usleep(100000);
	struct tally cold = {.printed = true};
	struct pf_prof_window *w = sample_pid(pid, 500, 3000, false, st, chains, n, &cold);
	reap(pid);
	tally(w, pid, chains, n, t);
	pf_prof_window_free(w);
	print_message("%s: %lu samples, %.1f%% complete to main (chains:", what,
		      (unsigned long)t->total, pct(t->complete, t->total));
	for (size_t c = 0; c < n && c < 5; c++)
		print_message(" %s %lu/%lu", chains[c][0], (unsigned long)t->chain_complete[c],
			      (unsigned long)t->chain_total[c]);
	print_message("); first 0.5 s: %lu samples, %.1f%% complete; tables %lu, rows %lu, "
		      "built %lu in %.1f ms, from the cache %lu, table walks %lu\n",
		      (unsigned long)cold.total, pct(cold.complete, cold.total),
		      (unsigned long)st->unwind.tables, (unsigned long)st->unwind.rows,
		      (unsigned long)st->unwind.built, (double)st->unwind.build_ns / 1e6,
		      (unsigned long)st->unwind.cache_hits, (unsigned long)st->dwarf_samples);
}

static void check_workload(const char *what, const char *exe, const chain_t *chains, size_t n)
{
	struct tally t = {0};
	struct pf_sampler_stats st;
	measure_workload(what, exe, chains, n, &t, &st);
	assert_true(st.dwarf_unwind);
	assert_true(t.total >= 200);
	assert_true(t.complete * 100 >= t.total * 95);
	for (size_t c = 0; c < n && c < 5; c++)
		assert_true(t.chain_total[c] > 0); /* every chain was seen */
}

static void test_c_through_libc(void **state)
{
	check_workload("C -O2 -fomit-frame-pointer", g_c, c_chains, 4);
}

/* The workloads by frame pointers only: the figures the tables improve on (asserted for C,
 * printed for C++ and Rust). */
static double fp_only(const char *what, const char *exe, const chain_t *chains, size_t n)
{
	pid_t pid = spawn(exe, 5, NULL);
	assert_true(pid > 0);
	usleep(100000);
	struct pf_sampler_stats st;
	struct pf_prof_window *w = sample_pid(pid, 0, 1500, true, &st, NULL, 0, NULL);
	reap(pid);
	struct tally t = {0};
	tally(w, pid, chains, n, &t);
	print_message("%s, frame pointers only: %lu samples, %.1f%% complete to main\n", what,
		      (unsigned long)t.total, pct(t.complete, t.total));
	assert_false(st.dwarf_unwind);
	assert_true(t.total >= 100);
	pf_prof_window_free(w);
	return pct(t.complete, t.total);
}

/* In the handler (leaf sig_burn) through the signal frame to the interrupted chain; outside
 * it, the interrupted loop itself. */
static chain_t sig_chains[] = {
	{"sig_burn", "on_prof", "spin", "outer", "=main", NULL},
	{"spin", "outer", "=main", NULL},
};

static void test_signal_frame(void **state)
{
	struct tally t = {0};
	struct pf_sampler_stats st;
	measure_workload("C signal handler, -O2 -fomit-frame-pointer", g_sig, sig_chains, 2, &t,
			 &st);
	print_message("  in the handler: %lu samples, %.1f%% complete through the signal frame\n",
		      (unsigned long)t.chain_total[0], pct(t.chain_complete[0], t.chain_total[0]));
	assert_true(st.dwarf_unwind);
	assert_true(t.chain_total[0] >= 100);
	assert_true(t.chain_complete[0] * 100 >= t.chain_total[0] * 90);
	assert_true(t.chain_total[1] >= 100); /* the interrupted loop is sampled too */
}

static chain_t cxx_chains[] = {{"Item::weight", "Cart::total", "=main", NULL}};
static chain_t rs_chains[] = {{"hot_leaf", "chain_b", "chain_a", "nofp_workload::main", "=main",
			       NULL}};

static void test_frame_pointers_only(void **state)
{
	/* the problem the tables solve */
	assert_true(fp_only("C -O2 -fomit-frame-pointer", g_c, c_chains, 4) < 50);
	fp_only("C++ -O2 -fomit-frame-pointer", g_cc, cxx_chains, 1);
	if (g_have_rust)
		fp_only("Rust opt-level=2, no frame pointers", g_rs, rs_chains, 1);
}

static void test_cxx(void **state)
{
	check_workload("C++ -O2 -fomit-frame-pointer", g_cc, cxx_chains, 1);
}

static void test_rust(void **state)
{
	if (!g_have_rust) {
		print_message("no rustc here: the Rust workload is skipped\n");
		skip();
	}
	check_workload("Rust opt-level=2, no frame pointers", g_rs, rs_chains, 1);
}

static chain_t go_chains[] = {
	{"=main.hotLeaf", "=main.chainB", "=main.chainA", "=main.main", "=runtime.main", NULL},
};

/* A Go program without symbols or DWARF: named from its pclntab, walked with tables built
 * from the runtime's stack-pointer data; the frame-pointer walk loses hotLeaf's caller. */
static void test_go(void **state)
{
	if (!g_have_go) {
		print_message("no go here: the Go workload is skipped\n");
		skip();
	}
	check_workload("Go, -ldflags=-s -w", g_go, go_chains, 1);
	assert_true(fp_only("Go, -ldflags=-s -w", g_go, go_chains, 1) < 50);
}

/* A library opened with dlopen after sampling started: its first samples find no mapping,
 * which makes user space load the process's new mappings. */
static void test_dlopen_after_start(void **state)
{
	struct pf_error err = {0};
	pid_t pid = spawn(g_c, 8, g_dl);
	assert_true(pid > 0);
	usleep(100000);
	struct pf_sampler *s = pf_sampler_new(NULL, &err);
	assert_non_null(s);
	struct pf_profcfg *cfg = include_pid(pid, 499);
	assert_int_equal(pf_sampler_set_config(s, cfg, &err), 0);
	poll_for(s, 1000);
	assert_int_equal(kill(pid, SIGUSR1), 0);
	poll_for(s, 2500);
	struct pf_prof_window *w = pf_sampler_close_window(s, &err);
	assert_non_null(w);
	struct pf_sampler_stats st;
	assert_int_equal(pf_sampler_stats(s, &st), 0);
	reap(pid);
	struct tally t = {0};
	tally(w, pid, c_chains, 5, &t);
	print_message("dlopen after start: library samples %lu, %.1f%% complete; all %lu, %.1f%%; "
		      "reloads %lu\n",
		      (unsigned long)t.chain_total[4], pct(t.chain_complete[4], t.chain_total[4]),
		      (unsigned long)t.total, pct(t.complete, t.total),
		      (unsigned long)st.unwind.reloads);
	assert_true(t.chain_total[4] >= 50);
	assert_true(t.chain_complete[4] * 100 >= t.chain_total[4] * 90);
	assert_true(st.unwind.reloads >= 1);
	pf_prof_window_free(w);
	pf_profcfg_free(cfg);
	pf_sampler_free(s);
}

/* A process that exits while a capture samples it: its entries leave the kernel's map at its
 * exit (its pid may come back as another process). */
static void test_exit_leaves_no_entries(void **state)
{
	struct pf_error err = {0};
	/* the sampler loads before the 2 s workload starts (its load is slow on a busy host) */
	struct pf_sampler *s = pf_sampler_new(NULL, &err);
	assert_non_null(s);
	struct pf_profcfg *cfg = NULL;
	const char *yaml = "profiling:\n  mode: triggered\n  triggers: {on_demand: {enabled: true}}\n";
	assert_int_equal(pf_profcfg_parse(yaml, strlen(yaml), &cfg, &err), 0);
	assert_int_equal(pf_sampler_set_config(s, cfg, &err), 0);
	pid_t pid = spawn(g_c, 2, NULL);
	assert_true(pid > 0);
	usleep(100000);
	uint32_t pids[1] = {(uint32_t)pid};
	assert_int_equal(pf_sampler_capture_start(s, 0, PF_PROF_CPU, 499, pids, 1, &err), 0);
	poll_for(s, 700);
	size_t during = pf_sampler_unwind_entries(s, (uint32_t)pid);
	struct pf_sampler_stats st;
	assert_int_equal(pf_sampler_stats(s, &st), 0);
	uint64_t procs_during = st.unwind.processes;
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid); /* it ends on its own, mid-capture */
	poll_for(s, 500);
	size_t after = pf_sampler_unwind_entries(s, (uint32_t)pid);
	assert_int_equal(pf_sampler_stats(s, &st), 0);
	struct pf_prof_window *wc = pf_sampler_capture_stop(s, 0, &err);
	assert_non_null(wc);
	struct tally t = {0};
	tally(wc, pid, c_chains, 4, &t);
	print_message("exit mid-capture: entries %zu while it ran, %zu after its exit; processes "
		      "with tables %lu -> %lu; capture %lu samples, %.1f%% complete\n",
		      during, after, (unsigned long)procs_during,
		      (unsigned long)st.unwind.processes, (unsigned long)t.total,
		      pct(t.complete, t.total));
	assert_true(during > 0);
	assert_int_equal(after, 0);
	assert_true(st.unwind.processes < procs_during);
	assert_true(t.total > 0);
	pf_prof_window_free(wc);
	pf_profcfg_free(cfg);
	pf_sampler_free(s);
}

/* A process with 160 more executable mappings (copies of one library, dlopen'd at its start):
 * its array is cut at 128 mappings, keeping the program and the libraries loaded first (libc:
 * the chains through qsort and bsearch stay complete); the cut addresses do not make user
 * space reload it again and again. */
static void test_many_mappings(void **state)
{
	struct pf_error err = {0};
	char dir[128];
	snprintf(dir, sizeof(dir), "%s/many", g_dir);
	assert_int_equal(run("mkdir -p %s && for i in $(seq 160); do cp %s %s/lib$i.so; done", dir,
			     g_dl, dir),
			 0);
	assert_int_equal(setenv("PF_WL_DLOPEN_DIR", dir, 1), 0);
	pid_t pid = spawn(g_c, 8, NULL);
	unsetenv("PF_WL_DLOPEN_DIR");
	assert_true(pid > 0);
	usleep(300000); /* its libraries opened */
	struct pf_sampler *s = pf_sampler_new(NULL, &err);
	assert_non_null(s);
	struct pf_profcfg *cfg = include_pid(pid, 499);
	assert_int_equal(pf_sampler_set_config(s, cfg, &err), 0);
	poll_for(s, 2500);
	size_t entries = pf_sampler_unwind_entries(s, (uint32_t)pid);
	struct pf_prof_window *w = pf_sampler_close_window(s, &err);
	assert_non_null(w);
	struct pf_sampler_stats st;
	assert_int_equal(pf_sampler_stats(s, &st), 0);
	reap(pid);
	struct tally t = {0};
	tally(w, pid, c_chains, 4, &t);
	print_message("160 more mappings: %zu in the kernel's array, reloads %lu; hot_leaf chain "
		      "%lu/%lu complete, all samples %.1f%% of %lu\n",
		      entries, (unsigned long)st.unwind.reloads,
		      (unsigned long)t.chain_complete[0], (unsigned long)t.chain_total[0],
		      pct(t.complete, t.total), (unsigned long)t.total);
	assert_int_equal(entries, 128); /* PF_UNWIND_PROC_MAPS */
	assert_true(st.unwind.reloads <= 1);
	assert_true(t.chain_total[0] >= 50);
	assert_true(t.chain_complete[0] * 100 >= t.chain_total[0] * 90);
	assert_true(t.complete * 100 >= t.total * 90);
	pf_prof_window_free(w);
	pf_profcfg_free(cfg);
	pf_sampler_free(s);
}

/* Runs exe with its samples loading its tables in s, until none waits for the builder (at
 * most 6 s); then ends it and waits until its entries are gone (at most 2 s). *st: the stats
 * while it ran. */
static void run_loaded(struct pf_sampler *s, const char *exe, struct pf_sampler_stats *st)
{
	struct pf_error err = {0};
	pid_t pid = spawn(exe, 8, NULL);
	assert_true(pid > 0);
	struct pf_profcfg *cfg = include_pid(pid, 199);
	assert_int_equal(pf_sampler_set_config(s, cfg, &err), 0);
	uint64_t end = now_ms() + 6000;
	bool loaded = false;
	while (!loaded && now_ms() < end) {
		poll_for(s, 100);
		assert_int_equal(pf_sampler_stats(s, st), 0);
		loaded = st->unwind.processes == 1 && !st->unwind.pending &&
			 pf_sampler_unwind_entries(s, (uint32_t)pid) > 0;
	}
	assert_true(loaded);
	poll_for(s, 200); /* a few samples walked with the tables */
	assert_int_equal(pf_sampler_stats(s, st), 0);
	reap(pid);
	end = now_ms() + 2000;
	struct pf_sampler_stats after;
	do {
		poll_for(s, 50);
		assert_int_equal(pf_sampler_stats(s, &after), 0);
	} while (after.unwind.processes && now_ms() < end);
	assert_int_equal(after.unwind.processes, 0);
	pf_profcfg_free(cfg);
}

static void test_lru_eviction(void **state)
{
	struct pf_error err = {0};
	char cache[96];
	snprintf(cache, sizeof(cache), "%s/lru-cache", g_dir);
	/* 20 chunks: two of the static tables (~9 each) and the vDSO's (1), not three */
	struct pf_sampler_options o = {.unwind_rows = 20 * 1024, .unwind_cache_dir = cache};
	struct pf_sampler *s = pf_sampler_new(&o, &err);
	assert_non_null(s);
	struct pf_sampler_stats a, b, c, d, e, f;
	run_loaded(s, g_static[0], &a);
	assert_int_equal(a.unwind.rows_cap, 20 * 1024);
	assert_int_equal(a.unwind.tables, 2); /* its own and the vDSO's */
	run_loaded(s, g_static[1], &b);
	assert_int_equal(b.unwind.tables, 3);
	assert_int_equal(b.unwind.evicted, 0);
	/* static_0 again: its table is still loaded, nothing read or built */
	run_loaded(s, g_static[0], &c);
	assert_int_equal(c.unwind.evicted, 0);
	assert_int_equal(c.unwind.built, b.unwind.built);
	assert_int_equal(c.unwind.cache_hits, b.unwind.cache_hits);
	/* static_2 needs room: static_1's table, the least recently used, goes */
	run_loaded(s, g_static[2], &d);
	assert_int_equal(d.unwind.evicted, 1);
	assert_int_equal(d.unwind.tables, 3);
	run_loaded(s, g_static[0], &e); /* kept: no read, no build, no eviction */
	assert_int_equal(e.unwind.evicted, 1);
	assert_int_equal(e.unwind.built, d.unwind.built);
	assert_int_equal(e.unwind.cache_hits, d.unwind.cache_hits);
	/* static_1 comes back from the disk cache, evicting static_2's */
	run_loaded(s, g_static[1], &f);
	assert_int_equal(f.unwind.evicted, 2);
	assert_int_equal(f.unwind.cache_hits, e.unwind.cache_hits + 1);
	assert_int_equal(f.unwind.built, e.unwind.built);
	print_message("LRU eviction: rows %lu/%lu, tables %lu, built %lu, evicted %lu, read back "
		      "from the cache %lu\n",
		      (unsigned long)f.unwind.rows, (unsigned long)f.unwind.rows_cap,
		      (unsigned long)f.unwind.tables, (unsigned long)f.unwind.built,
		      (unsigned long)f.unwind.evicted, (unsigned long)f.unwind.cache_hits);
	/* limits.max_memory_mb: an eighth of it for rows, at most what the kernel holds */
	struct pf_profcfg *cfg = NULL;
	const char *yaml = "profiling:\n  limits: {max_memory_mb: 8}\n";
	assert_int_equal(pf_profcfg_parse(yaml, strlen(yaml), &cfg, &err), 0);
	assert_int_equal(pf_sampler_set_config(s, cfg, &err), 0);
	assert_int_equal(pf_sampler_stats(s, &f), 0);
	assert_int_equal(f.unwind.rows_cap, 20 * 1024); /* 1 MiB of rows > the 160 KiB array */
	pf_profcfg_free(cfg);
	pf_sampler_free(s);
	struct pf_sampler *big = pf_sampler_new(NULL, &err);
	assert_non_null(big);
	cfg = NULL;
	assert_int_equal(pf_profcfg_parse(yaml, strlen(yaml), &cfg, &err), 0);
	assert_int_equal(pf_sampler_set_config(big, cfg, &err), 0);
	assert_int_equal(pf_sampler_stats(big, &f), 0);
	assert_int_equal(f.unwind.rows_cap, 128 * 1024); /* 8 MiB / 8 = 1 MiB of 8-byte rows */
	pf_profcfg_free(cfg);
	pf_sampler_free(big);
}

int main(void)
{
	int code;
	struct pf_sampler *probe = ebpf_probe(&code);
	if (!probe)
		return code;
	struct pf_sampler_stats st;
	pf_sampler_stats(probe, &st);
	pf_sampler_free(probe);
	if (!st.dwarf_unwind) {
		printf("SKIP: no .eh_frame unwinding on this kernel: %s\n",
		       st.dwarf_unwind_off_reason ? st.dwarf_unwind_off_reason : "?");
		return 77;
	}
	if (build_workloads() < 0) {
		fprintf(stderr, "cannot build the workloads with cc/c++/rustc\n");
		return 1;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_c_through_libc),
		cmocka_unit_test(test_frame_pointers_only),
		cmocka_unit_test(test_cxx),
		cmocka_unit_test(test_rust),
		cmocka_unit_test(test_go),
		cmocka_unit_test(test_signal_frame),
		cmocka_unit_test(test_dlopen_after_start),
		cmocka_unit_test(test_exit_leaves_no_entries),
		cmocka_unit_test(test_lru_eviction),
		cmocka_unit_test(test_many_mappings),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	if (run("rm -rf %s", g_dir) != 0)
		rc = rc ? rc : 1;
	return rc;
}
