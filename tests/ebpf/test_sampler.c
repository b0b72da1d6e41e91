/* test_sampler.c — eBPF integration tests of the CPU sampler (agent/sampler/sampler_bpf.h): a known
 * workload (workload.c, built here with -O0 -fno-omit-frame-pointer -g) must show up by symbol,
 * under the right callers, at the right ratio, alone; an excluded one must not show up at all,
 * a frequency change at run time must not lose the open window's samples, and a capture at a
 * higher frequency on one process must neither leak into nor slow the continuous windows. Kernel frames
 * are named by the in-kernel resolver exactly as /proc/kallsyms names them.
 * Exit 77 when the kernel refuses BPF or perf events (not root, no BTF). */
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "pf/profcfg.h"
#include "pf/profile.h"
#include "ebpf_util.h"
#include "pf/clock.h"
#include "sampler/sampler_bpf.h"
#include "symbolize/symbolize.h"

static char g_dir[64];
static char g_exe[128];
static char g_name[32];

static int build_workload(void)
{
	const char *src = getenv("PF_SOURCE_DIR");
	char cmd[1024];
	snprintf(g_dir, sizeof(g_dir), "/tmp/pf-ebpf-XXXXXX");
	if (!mkdtemp(g_dir))
		return -1;
	snprintf(g_name, sizeof(g_name), "pfwl-%d", (int)getpid());
	snprintf(g_exe, sizeof(g_exe), "%s/%s", g_dir, g_name);
	snprintf(cmd, sizeof(cmd), "cc -O0 -fno-omit-frame-pointer -g -o %s %s/tests/ebpf/workload.c",
		 g_exe, src ? src : ".");
	return system(cmd) == 0 ? 0 : -1;
}

static pid_t spawn_workload(double seconds)
{
	pid_t pid = fork();
	if (pid == 0) {
		char arg[32];
		snprintf(arg, sizeof(arg), "%.1f", seconds);
		int fd = open("/dev/null", 1);
		if (fd >= 0)
			dup2(fd, 1);
		execl(g_exe, g_name, arg, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* CPU time (user + system) the process has used so far, in seconds; -1 when unreadable. */
static double proc_cpu_s(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *p = strrchr(buf, ')'); /* comm may hold spaces */
	unsigned long long ut = 0, st = 0;
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
			 &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* Samples the workload's executable only, at hz, in windows of 10 s. */
static struct pf_profcfg *include_workload(unsigned hz)
{
	return ebpf_config("profiling:\n  sampling: {frequency_hz: %u, duration_seconds: 10}\n"
		      "  filters:\n    include: [{key: process.executable.name, match: strict, "
		      "value: \"%s\"}]\n",
		      hz, g_name);
}

static void poll_for(struct pf_sampler *s, uint64_t ms)
{
	uint64_t end = pf_mono_ms() + ms;
	while (pf_mono_ms() < end)
		assert_true(pf_sampler_poll(s, 50) >= 0);
}

struct tally {
	uint64_t total, a_ok, a_bad, b_ok, b_bad;
	bool line_ok;
	bool foreign; /* samples of another process */
	bool ts_ok;
};

static const char *user_fn(const struct pf_prof_process *p, const struct pf_prof_stack *st,
			   int nth)
{
	for (uint32_t i = 0; i < st->n_frames; i++) {
		const struct pf_prof_frame *f = &p->frames[st->frames[i]];
		if (f->kind != PF_FRAME_NATIVE)
			continue;
		if (nth-- == 0)
			return f->function ? f->function : "";
	}
	return "";
}

static void tally_window(const struct pf_prof_window *w, pid_t pid, struct tally *t)
{
	t->ts_ok = true;
	for (size_t i = 0; i < w->n_processes; i++) {
		const struct pf_prof_process *p = &w->processes[i];
		if (p->pid != (uint32_t)pid) {
			t->foreign = true;
			continue;
		}
		for (size_t k = 0; k < p->n_samples; k++) {
			const struct pf_prof_sample *sm = &p->samples[k];
			const struct pf_prof_stack *st = &p->stacks[sm->stack];
			const char *leaf = user_fn(p, st, 0), *caller = user_fn(p, st, 1);
			t->total += sm->count;
			if (sm->n_timestamps != sm->count)
				t->ts_ok = false;
			for (uint32_t j = 0; j < sm->n_timestamps; j++)
				if (sm->timestamps[j] < w->start_unix_ns ||
				    sm->timestamps[j] >= w->end_unix_ns)
					t->ts_ok = false;
			if (!strcmp(leaf, "hot_a"))
				*(strcmp(caller, "caller_a") ? &t->a_bad : &t->a_ok) += sm->count;
			if (!strcmp(leaf, "hot_b"))
				*(strcmp(caller, "caller_b") ? &t->b_bad : &t->b_ok) += sm->count;
		}
		for (size_t k = 0; k < p->n_frames; k++) {
			const struct pf_prof_frame *f = &p->frames[k];
			if (f->function && !strcmp(f->function, "hot_a") && f->file &&
			    strstr(f->file, "workload.c") && f->line > 0)
				t->line_ok = true;
		}
	}
}

static void test_include_ratio_callers(void **state)
{
	struct pf_error err = {0};
	struct pf_sampler *s = pf_sampler_new(NULL, &err);
	assert_non_null(s);
	struct pf_profcfg *cfg = include_workload(499);
	assert_int_equal(pf_sampler_set_config(s, cfg, &err), 0);
	/* spawned after the sampler: found through the exec event, not the /proc scan */
	pid_t pid = spawn_workload(6);
	assert_true(pid > 0);
	poll_for(s, 3000);
	struct pf_prof_window *w = pf_sampler_close_window(s, &err);
	reap(pid);
	assert_non_null(w);
	struct tally t = {0};
	tally_window(w, pid, &t);
	print_message("samples=%lu hot_a<-caller_a=%lu (bad %lu) hot_b<-caller_b=%lu (bad %lu) "
		      "lost=%lu\n",
		      (unsigned long)t.total, (unsigned long)t.a_ok, (unsigned long)t.a_bad,
		      (unsigned long)t.b_ok, (unsigned long)t.b_bad,
		      (unsigned long)w->lost_samples);
	assert_false(t.foreign);
	assert_true(t.ts_ok);
	assert_true(t.line_ok);
	assert_true(t.a_ok + t.b_ok >= 300);
	/* ratio 2:1 within +-20% */
	double ratio = (double)t.a_ok / (double)(t.b_ok ? t.b_ok : 1);
	assert_true(ratio >= 1.6 && ratio <= 2.4);
	/* under the right callers (a prologue sample can skip one caller: allow 5%) */
	assert_true((t.a_bad + t.b_bad) * 20 <= t.a_ok + t.b_ok);
	pf_prof_window_free(w);
	pf_profcfg_free(cfg);
	pf_sampler_free(s);
}

/* Enough samples of processes that ran cpu_s seconds on CPU, at 499 Hz, for their shares to
 * mean something: half the ticks of that time (a shared host gives them less than a CPU, and
 * a tick is one sample), and at least 50. */
static bool enough_samples(uint64_t n, double cpu_s)
{
	print_message("  %lu samples for %.2f s on CPU\n", (unsigned long)n, cpu_s);
	return n >= 50 && (double)n >= 0.5 * 499 * cpu_s;
}

/* A close held past its time (pf_sampler_close_window_at): the window ends at the time given,
 * and what was sampled after it opens the next window, not lost and not counted twice. */
static void test_close_at_earlier_end(void **state)
{
	struct pf_error err = {0};
	struct pf_sampler *s = pf_sampler_new(NULL, &err);
	assert_non_null(s);
	struct pf_profcfg *cfg = include_workload(499);
	assert_int_equal(pf_sampler_set_config(s, cfg, &err), 0);
	pid_t pid = spawn_workload(5);
	assert_true(pid > 0);
	poll_for(s, 1500);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t mid = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	double cpu_mid = (double)ebpf_proc_cpu_ns(pid) / 1e9;
	poll_for(s, 1000); /* the close is late by 1 s */
	struct pf_prof_window *w1 = pf_sampler_close_window_at(s, mid, &err);
	assert_non_null(w1);
	poll_for(s, 500);
	struct pf_prof_window *w2 = pf_sampler_close_window(s, &err);
	assert_non_null(w2);
	double cpu_end = (double)ebpf_proc_cpu_ns(pid) / 1e9;
	reap(pid);
	assert_int_equal(w1->end_unix_ns, mid);
	assert_int_equal(w2->start_unix_ns, mid);
	struct tally t1 = {0}, t2 = {0};
	tally_window(w1, pid, &t1);
	tally_window(w2, pid, &t2);
	print_message("before the given end %lu samples, after it %lu\n", (unsigned long)t1.total,
		      (unsigned long)t2.total);
	assert_true(t1.ts_ok); /* every timestamp inside its window */
	assert_true(t2.ts_ok);
	/* ~1.5 s and ~1.5 s of one busy process at 499 Hz, as much as it ran on a CPU in each;
	 * the late second is in w2 */
	assert_true(enough_samples(t1.total, cpu_mid));
	assert_true(enough_samples(t2.total, cpu_end - cpu_mid));
	pf_prof_window_free(w1);
	pf_prof_window_free(w2);
	pf_profcfg_free(cfg);
	pf_sampler_free(s);
}

enum jit_map { JIT_MAP_FILE, JIT_MAP_SYMLINK, JIT_MAP_FIFO };

/* A child that runs code it wrote into anonymous memory, as a JIT does, and names it in its
 * perf map (/tmp/perf-<pid>.map) for seconds; exits 0. x86_64 machine code. With
 * JIT_MAP_SYMLINK the map is a symlink to the file written elsewhere, with JIT_MAP_FIFO a FIFO
 * (what a hostile process could leave for the agent to open). */
static pid_t spawn_jit(double seconds, enum jit_map kind)
{
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	/* mov ecx, 0x100000; 1: dec ecx; jnz 1b; ret */
	static const unsigned char spin[] = {0xb9, 0x00, 0x00, 0x10, 0x00, 0xff,
					     0xc9, 0x75, 0xfc, 0xc3};
	unsigned char *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (code == MAP_FAILED)
		_exit(2);
	memcpy(code + 256, spin, sizeof(spin));
	if (mprotect(code, 4096, PROT_READ | PROT_EXEC) < 0)
		_exit(3);
	char path[64], real[64];
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	snprintf(real, sizeof(real), "/tmp/pf-jit-%d.txt", (int)getpid());
	if (kind == JIT_MAP_FIFO && mkfifo(path, 0600) < 0)
		_exit(5);
	if (kind == JIT_MAP_SYMLINK && symlink(real, path) < 0)
		_exit(6);
	FILE *f = fopen(kind == JIT_MAP_FILE ? path : real, "w");
	if (!f)
		_exit(4);
	fprintf(f, "%lx 40 Interpreter\n%lx %zx LazyCompile:*jit_spin app.js:7\n",
		(unsigned long)(uintptr_t)code, (unsigned long)(uintptr_t)(code + 256),
		sizeof(spin));
	fclose(f);
	void (*fn)(void) = (void (*)(void))(uintptr_t)(code + 256);
	uint64_t end = pf_mono_ms() + (uint64_t)(seconds * 1000);
	while (pf_mono_ms() < end)
		for (int i = 0; i < 64; i++)
			fn();
	unlink(path);
	unlink(real);
	_exit(0);
}

/* A sampler with the config yaml, kept in *cfg. */
static struct pf_sampler *sampler_with(const char *yaml, struct pf_profcfg **cfg)
{
	struct pf_error err = {0};
	struct pf_sampler *s = pf_sampler_new(NULL, &err);
	assert_non_null(s);
	*cfg = ebpf_config("%s", yaml);
	assert_int_equal(pf_sampler_set_config(s, *cfg, &err), 0);
	return s;
}

/* A sampler of every process at 499 Hz (no filters). */
static struct pf_sampler *sampler_everything(struct pf_profcfg **cfg)
{
	return sampler_with("profiling:\n  sampling: {frequency_hz: 499, duration_seconds: 10}\n",
			    cfg);
}

/* Frames in code a runtime compiled are named from its perf map. */
static void test_jit_frames_named(void **state)
{
#if !defined(__x86_64__)
	skip();
#endif
	struct pf_error err = {0};
	struct pf_profcfg *cfg = NULL;
	struct pf_sampler *s = sampler_everything(&cfg);
	pid_t pid = spawn_jit(4, JIT_MAP_FILE);
	assert_true(pid > 0);
	poll_for(s, 2500);
	struct pf_prof_window *w = pf_sampler_close_window(s, &err);
	assert_non_null(w);
	uint64_t total = 0, named = 0;
	for (size_t i = 0; i < w->n_processes; i++) {
		const struct pf_prof_process *p = &w->processes[i];
		if (p->pid != (uint32_t)pid)
			continue;
		for (size_t k = 0; k < p->n_samples; k++) {
			const struct pf_prof_stack *st = &p->stacks[p->samples[k].stack];
			total += p->samples[k].count;
			if (!strcmp(user_fn(p, st, 0), "LazyCompile:*jit_spin app.js:7"))
				named += p->samples[k].count;
		}
	}
	struct pf_sampler_stats ss;
	assert_int_equal(pf_sampler_stats(s, &ss), 0);
	print_message("jit child: %lu of %lu samples in jit_spin; maps %lu, frames named %lu\n",
		      (unsigned long)named, (unsigned long)total, (unsigned long)ss.sym.jit_maps,
		      (unsigned long)ss.sym.jit_frames);
	double cpu_s = (double)ebpf_proc_cpu_ns(pid) / 1e9;
	reap(pid);
	assert_true(enough_samples(total, cpu_s));
	assert_true(named * 10 >= total * 8); /* the loop is nearly all it runs */
	assert_int_equal(ss.sym.jit_maps, 1);
	pf_prof_window_free(w);
	pf_profcfg_free(cfg);
	pf_sampler_free(s);
}

/* A map that is a symlink, or a FIFO, is not read (nor does opening it stall the close). */
static void test_jit_map_not_a_file(void **state)
{
#if !defined(__x86_64__)
	skip();
#endif
	struct pf_error err = {0};
	struct pf_profcfg *cfg = NULL;
	struct pf_sampler *s = sampler_everything(&cfg);
	pid_t a = spawn_jit(3, JIT_MAP_SYMLINK), b = spawn_jit(3, JIT_MAP_FIFO);
	assert_true(a > 0 && b > 0);
	poll_for(s, 1500);
	uint64_t t0 = pf_mono_ms();
	struct pf_prof_window *w = pf_sampler_close_window(s, &err);
	uint64_t took = pf_mono_ms() - t0;
	assert_non_null(w);
	uint64_t seen = 0;
	for (size_t i = 0; i < w->n_processes; i++) {
		const struct pf_prof_process *p = &w->processes[i];
		if (p->pid != (uint32_t)a && p->pid != (uint32_t)b)
			continue;
		for (size_t k = 0; k < p->n_samples; k++) {
			seen += p->samples[k].count;
			assert_string_not_equal(user_fn(p, &p->stacks[p->samples[k].stack], 0),
						"LazyCompile:*jit_spin app.js:7");
		}
	}
	struct pf_sampler_stats ss;
	assert_int_equal(pf_sampler_stats(s, &ss), 0);
	print_message("symlinked and FIFO maps: %lu samples, none named; close took %lu ms\n",
		      (unsigned long)seen, (unsigned long)took);
	double cpu_s = (double)(ebpf_proc_cpu_ns(a) + ebpf_proc_cpu_ns(b)) / 1e9;
	reap(a);
	reap(b);
	assert_true(enough_samples(seen, cpu_s));
	assert_int_equal(ss.sym.jit_maps, 0);
	assert_true(took < 5000); /* a blocking open of the FIFO would never return */
	pf_prof_window_free(w);
	pf_profcfg_free(cfg);
	pf_sampler_free(s);
}

static void test_exclude_in_kernel(void **state)
{
	struct pf_error err = {0};
	struct pf_sampler *s = pf_sampler_new(NULL, &err);
	assert_non_null(s);
	struct pf_profcfg *cfg = ebpf_config(
		"profiling:\n  sampling: {frequency_hz: 499, duration_seconds: 10}\n"
		"  filters:\n    exclude: [{key: process.executable.name, match: regexp, "
		"value: \"^%s$\"}]\n",
		g_name);
	assert_int_equal(pf_sampler_set_config(s, cfg, &err), 0);
	struct pf_sampler_stats before, after;
	assert_int_equal(pf_sampler_stats(s, &before), 0);
	pid_t pid = spawn_workload(5);
	assert_true(pid > 0);
	poll_for(s, 2500);
	struct pf_prof_window *w = pf_sampler_close_window(s, &err);
	assert_int_equal(pf_sampler_stats(s, &after), 0);
	double cpu_s = (double)ebpf_proc_cpu_ns(pid) / 1e9;
	reap(pid);
	assert_non_null(w);
	struct tally t = {0};
	tally_window(w, pid, &t);
	print_message("excluded workload samples=%lu, filtered in kernel=%lu (workload on CPU "
		      "%.2f s), others=%d\n",
		      (unsigned long)t.total, (unsigned long)(after.filtered - before.filtered),
		      cpu_s, t.foreign);
	assert_int_equal(t.total, 0);
	/* dropped by the pid allow-map lookup, not after the fact: at least half the ticks of
	 * the CPU time the workload got (on a shared host it gets less than a CPU), and some */
	assert_true(cpu_s > 0.2);
	assert_true((double)(after.filtered - before.filtered) >= 0.5 * 499 * cpu_s);
	pf_prof_window_free(w);
	pf_profcfg_free(cfg);
	pf_sampler_free(s);
}

/* The kernel caches the pid_filter verdict of the last process per CPU: a busy process that
 * was sampled must stop being sampled at the next tick once the filters exclude it, and be
 * sampled again once they include it. */
static void test_filter_change_drops_cached_verdict(void **state)
{
	struct pf_error err = {0};
	pid_t pid = spawn_workload(8);
	assert_true(pid > 0);
	usleep(100000);
	struct pf_sampler *s = pf_sampler_new(NULL, &err);
	assert_non_null(s);
	const char *fmt = "profiling:\n  sampling: {frequency_hz: 499, duration_seconds: 10}\n"
			  "  filters:\n    %s: [{key: process.pid, match: strict, value: \"%d\"}]\n";
	struct pf_profcfg *inc = ebpf_config(fmt, "include", (int)pid);
	struct pf_profcfg *exc = ebpf_config(fmt, "exclude", (int)pid);
	struct pf_prof_window *w[3];
	double cpu[3];
	uint64_t filtered[3];
	struct pf_profcfg *seq[3] = {inc, exc, inc};
	for (int i = 0; i < 3; i++) {
		struct pf_sampler_stats st;
		assert_int_equal(pf_sampler_set_config(s, seq[i], &err), 0);
		double c0 = proc_cpu_s(pid);
		assert_int_equal(pf_sampler_stats(s, &st), 0);
		poll_for(s, 1200);
		w[i] = pf_sampler_close_window(s, &err);
		assert_non_null(w[i]);
		cpu[i] = proc_cpu_s(pid) - c0;
		filtered[i] = st.filtered;
		assert_int_equal(pf_sampler_stats(s, &st), 0);
		filtered[i] = st.filtered - filtered[i];
	}
	reap(pid);
	struct tally t[3] = {{0}};
	for (int i = 0; i < 3; i++)
		tally_window(w[i], pid, &t[i]);
	print_message("included: %lu samples (%.2f s CPU); excluded: %lu samples, %lu filtered "
		      "(%.2f s); included again: %lu samples (%.2f s)\n",
		      (unsigned long)t[0].total, cpu[0], (unsigned long)t[1].total,
		      (unsigned long)filtered[1], cpu[1], (unsigned long)t[2].total, cpu[2]);
	assert_true(cpu[0] >= 0.2 && cpu[1] >= 0.2 && cpu[2] >= 0.2); /* enough CPU to judge by */
	assert_true(t[0].total >= 0.5 * 499 * cpu[0]);
	/* a tick or two may have been recorded between closing the window and the new filter */
	assert_true(t[1].total <= 2);
	assert_true(filtered[1] >= 0.5 * 499 * cpu[1]);
	assert_true(t[2].total >= 0.5 * 499 * cpu[2]);
	for (int i = 0; i < 3; i++)
		pf_prof_window_free(w[i]);
	pf_profcfg_free(inc);
	pf_profcfg_free(exc);
	pf_sampler_free(s);
}

static void test_runtime_frequency_change(void **state)
{
	struct pf_error err = {0};
	pid_t pid = spawn_workload(6); /* before the sampler: found by the /proc scan */
	assert_true(pid > 0);
	usleep(100000);
	struct pf_sampler *s = pf_sampler_new(NULL, &err);
	assert_non_null(s);
	struct pf_profcfg *c1 = ebpf_config("profiling:\n  sampling: {frequency_hz: 499}\n"
				       "  filters:\n    include: [{key: process.pid, match: strict, "
				       "value: \"%d\"}]\n",
				       (int)pid);
	struct pf_profcfg *c2 = ebpf_config("profiling:\n  sampling: {frequency_hz: 199}\n"
				       "  filters:\n    include: [{key: process.pid, match: strict, "
				       "value: \"%d\"}]\n",
				       (int)pid);
	double cpu0 = proc_cpu_s(pid);
	assert_int_equal(pf_sampler_set_config(s, c1, &err), 0);
	poll_for(s, 1500);
	double cpu1 = proc_cpu_s(pid);
	assert_int_equal(pf_sampler_set_config(s, c2, &err), 0);
	poll_for(s, 1500);
	double cpu2 = proc_cpu_s(pid);
	struct pf_prof_window *w1 = pf_sampler_close_window(s, &err);
	struct pf_prof_window *w2 = pf_sampler_next_window(s);
	assert_null(pf_sampler_next_window(s));
	reap(pid);
	assert_non_null(w1);
	assert_non_null(w2);
	assert_int_equal(w1->frequency_hz, 499);
	assert_int_equal(w2->frequency_hz, 199);
	assert_true(w1->end_unix_ns == w2->start_unix_ns);
	struct tally t1 = {0}, t2 = {0};
	tally_window(w1, pid, &t1);
	tally_window(w2, pid, &t2);
	/* Samples follow the CPU time the workload got in each part (cpu-clock events tick on
	 * its CPU time), which a loaded machine shrinks below the wall time: judge against it. */
	double e1 = 499 * (cpu1 - cpu0), e2 = 199 * (cpu2 - cpu1);
	print_message("499 Hz part: %lu samples (%.0f expected from %.2f s of CPU), 199 Hz part: "
		      "%lu samples (%.0f expected from %.2f s)\n",
		      (unsigned long)t1.total, e1, cpu1 - cpu0, (unsigned long)t2.total, e2,
		      cpu2 - cpu1);
	assert_false(t1.foreign || t2.foreign);
	assert_true(cpu0 >= 0 && cpu1 > cpu0 && cpu2 > cpu1);
	assert_true(cpu1 - cpu0 >= 0.2 && cpu2 - cpu1 >= 0.2); /* enough CPU to judge by */
	assert_true(t1.total >= 0.7 * e1 && t1.total <= 1.3 * e1 + 20);
	assert_true(t2.total >= 0.7 * e2 && t2.total <= 1.3 * e2 + 20);
	pf_prof_window_free(w1);
	pf_prof_window_free(w2);
	pf_profcfg_free(c1);
	pf_profcfg_free(c2);
	pf_sampler_free(s);
}

static uint64_t samples_of(const struct pf_prof_window *w, pid_t pid, bool *foreign)
{
	uint64_t n = 0;
	for (size_t i = 0; i < w->n_processes; i++) {
		const struct pf_prof_process *p = &w->processes[i];
		for (size_t k = 0; k < p->n_samples; k++) {
			if (p->pid == (uint32_t)pid)
				n += p->samples[k].count;
			else if (foreign)
				*foreign = true;
		}
	}
	return n;
}

/* Selects pid by a process.pid rule and starts capture `slot` on it at hz. */
static void start_pid_capture(struct pf_sampler *s, pid_t pid, unsigned slot, uint32_t hz)
{
	struct pf_error err = {0};
	char pidtext[16];
	snprintf(pidtext, sizeof(pidtext), "%d", (int)pid);
	struct pf_filter rule = {.key = "process.pid", .match = PF_MATCH_STRICT, .value = pidtext};
	uint32_t pids[8];
	size_t n = 0;
	assert_int_equal(pf_sampler_capture_pids(s, &rule, 1, pids, 8, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(pids[0], (uint32_t)pid);
	assert_int_equal(pf_sampler_capture_start(s, slot, PF_PROF_CPU, hz, pids, n, &err), 0);
	/* the slot is taken now */
	assert_int_equal(pf_sampler_capture_start(s, slot, PF_PROF_CPU, hz, pids, n, &err), -EBUSY);
}

/* A sampler in mode triggered with no capture running: nothing is sampled. */
static struct pf_sampler *idle_sampler(struct pf_profcfg **cfg)
{
	return sampler_with(
	    "profiling:\n  mode: triggered\n  triggers: {on_demand: {enabled: true}}\n", cfg);
}

/* Two copies of the workload, both in the continuous windows at 99 Hz; a capture at 499 Hz on
 * the first only. Over the same interval the capture must hold ~499/99 times the first's
 * continuous samples and nothing of the second, while the continuous window keeps 99 Hz for
 * both (CPU shares on a loaded machine cancel out in the ratios). */
static void test_capture_beside_continuous(void **state)
{
	struct pf_error err = {0};
	pid_t a = spawn_workload(9), b = spawn_workload(9);
	assert_true(a > 0 && b > 0);
	struct pf_sampler *s = pf_sampler_new(NULL, &err);
	assert_non_null(s);
	struct pf_profcfg *cfg = include_workload(99);
	assert_int_equal(pf_sampler_set_config(s, cfg, &err), 0);
	poll_for(s, 300);
	pf_prof_window_free(pf_sampler_close_window(s, &err)); /* the interval starts here */

	start_pid_capture(s, a, 3, 499);
	poll_for(s, 3000);
	struct pf_sampler_stats st;
	assert_int_equal(pf_sampler_stats(s, &st), 0);
	assert_int_equal(st.capture_hz, 499);
	assert_int_equal(st.captures, 1);
	assert_int_equal(st.frequency_hz, 99);
	assert_true(pf_sampler_capture_samples(s, 3) > 0);
	struct pf_prof_window *wc = pf_sampler_capture_stop(s, 3, &err);
	struct pf_prof_window *w = pf_sampler_close_window(s, &err);
	assert_int_equal(pf_sampler_stats(s, &st), 0);
	double cpu_a = (double)ebpf_proc_cpu_ns(a), cpu_b = (double)ebpf_proc_cpu_ns(b);
	reap(a);
	reap(b);
	assert_non_null(wc);
	assert_non_null(w);
	assert_int_equal(st.captures, 0);
	assert_int_equal(st.capture_hz, 0); /* the capture events closed with the last capture */
	bool cap_foreign = false;
	uint64_t cap_a = samples_of(wc, a, &cap_foreign);
	uint64_t cont_a = samples_of(w, a, NULL), cont_b = samples_of(w, b, NULL);
	/* per second of each window (the continuous one also spans the /proc scan before the
	 * capture started) */
	double cap_s = (double)(wc->end_unix_ns - wc->start_unix_ns) / 1e9;
	double cont_s = (double)(w->end_unix_ns - w->start_unix_ns) / 1e9;
	double ratio = ((double)cap_a / cap_s) / ((double)(cont_a ? cont_a : 1) / cont_s);
	/* a's and b's continuous samples per second each got on CPU (the same loop, but on a
	 * shared host not the same CPU share) */
	double ab = ((double)cont_a / (cpu_a > 0 ? cpu_a : 1)) /
		    ((double)(cont_b ? cont_b : 1) / (cpu_b > 0 ? cpu_b : 1));
	print_message("capture (499 Hz, a only): %lu samples in %.2f s; continuous (99 Hz): a %lu, "
		      "b %lu in %.2f s; capture/continuous rate for a %.2f (expect ~5.04), a/b per CPU s %.2f; "
		      "lost %lu\n",
		      (unsigned long)cap_a, cap_s, (unsigned long)cont_a, (unsigned long)cont_b,
		      cont_s, ratio, ab, (unsigned long)w->lost_samples);
	assert_false(cap_foreign);
	assert_int_equal(wc->frequency_hz, 499);
	assert_int_equal(w->frequency_hz, 99);
	/* absolute counts depend on the CPU share the workloads get on a loaded machine; enough
	 * for the ratios to mean something */
	assert_true(cap_a >= 150);
	assert_true(cont_a >= 25 && cont_b >= 25);
	assert_true(ratio >= 3.5 && ratio <= 6.5);
	/* the capture did not add to (or take from) a's continuous samples */
	assert_true(ab >= 0.6 && ab <= 1.6);
	pf_prof_window_free(wc);
	pf_prof_window_free(w);
	pf_profcfg_free(cfg);
	pf_sampler_free(s);
}

/* A capture without continuous sampling (mode triggered, idle): the capture alone samples. */
static void test_capture_triggered_mode(void **state)
{
	struct pf_error err = {0};
	pid_t a = spawn_workload(5);
	assert_true(a > 0);
	struct pf_profcfg *cfg;
	struct pf_sampler *s = idle_sampler(&cfg);
	double cpu0 = (double)ebpf_proc_cpu_ns(a) / 1e9;
	start_pid_capture(s, a, 0, 199);
	poll_for(s, 1500);
	struct pf_sampler_stats st;
	assert_int_equal(pf_sampler_stats(s, &st), 0);
	assert_false(st.running); /* continuous sampling stays off */
	struct pf_prof_window *wc = pf_sampler_capture_stop(s, 0, &err);
	double cpu_s = (double)ebpf_proc_cpu_ns(a) / 1e9 - cpu0;
	reap(a);
	assert_non_null(wc);
	bool foreign = false;
	uint64_t na = samples_of(wc, a, &foreign);
	print_message("triggered mode capture at 199 Hz: %lu samples of the workload (%.2f s on "
		      "CPU)\n", (unsigned long)na, cpu_s);
	assert_false(foreign);
	/* half the ticks of its time on a CPU at least (a shared host gives it less than one),
	 * at most the ticks of 1.5 s and a margin */
	assert_true(na >= 20 && (double)na >= 0.5 * 199 * cpu_s);
	assert_true(na <= 400);
	pf_prof_window_free(wc);
	pf_profcfg_free(cfg);
	pf_sampler_free(s);
}

/* A capture of a shell that forks the workload only after the capture started: the child is
 * in the capture (inherited in the kernel at fork), though /proc never showed it at start. */
static void test_capture_fork_inherits(void **state)
{
	struct pf_error err = {0};
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "sleep 0.5; %s 2; true", g_exe);
	/* the sampler loads first (slow on a busy host): the shell's fork comes 0.5 s after the
	 * capture is asked for, not after the sampler's load */
	struct pf_profcfg *cfg;
	struct pf_sampler *s = idle_sampler(&cfg);
	pid_t sh = fork();
	if (sh == 0) {
		int fd = open("/dev/null", O_WRONLY);
		if (fd >= 0)
			dup2(fd, 1);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	assert_true(sh > 0);
	start_pid_capture(s, sh, 1, 199);
	poll_for(s, 2200);
	struct pf_prof_window *wc = pf_sampler_capture_stop(s, 1, &err);
	reap(sh);
	assert_non_null(wc);
	uint64_t child = 0;
	for (size_t i = 0; i < wc->n_processes; i++) {
		const struct pf_prof_process *p = &wc->processes[i];
		bool hot = false; /* the workload (sleep, also a child, hardly runs) */
		for (size_t k = 0; k < p->n_frames; k++)
			hot |= p->frames[k].function && !strcmp(p->frames[k].function, "hot_a");
		if (p->pid == (uint32_t)sh || !hot)
			continue;
		for (size_t k = 0; k < p->n_samples; k++)
			child += p->samples[k].count;
	}
	print_message("capture of the shell: %lu samples of its forked workload child\n",
		      (unsigned long)child);
	assert_true(child >= 30);
	pf_prof_window_free(wc);
	pf_profcfg_free(cfg);
	pf_sampler_free(s);
}

/* A child that spends most of its time in the kernel (reads of /dev/zero clear user pages). */
static pid_t spawn_syscall_child(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		static char buf[1 << 16];
		int fd = open("/dev/zero", O_RDONLY);
		for (int i = 0; i < 2000000 && fd >= 0; i++)
			if (read(fd, buf, sizeof(buf)) < 0)
				break;
		_exit(0);
	}
	return pid;
}

static void test_kernel_frames_resolver(void **state)
{
	struct pf_error err = {0};
	pid_t pid = spawn_syscall_child();
	assert_true(pid > 0);
	struct pf_sampler *s = pf_sampler_new(NULL, &err);
	assert_non_null(s);
	struct pf_profcfg *cfg = ebpf_config("profiling:\n  sampling: {frequency_hz: 499}\n"
					"  filters:\n    include: [{key: process.pid, match: "
					"strict, value: \"%d\"}]\n",
					(int)pid);
	assert_int_equal(pf_sampler_set_config(s, cfg, &err), 0);
	poll_for(s, 2000);
	struct pf_prof_window *w = pf_sampler_close_window(s, &err);
	reap(pid);
	assert_non_null(w);
	struct pf_sampler_stats st;
	assert_int_equal(pf_sampler_stats(s, &st), 0);

	/* the same addresses through /proc/kallsyms, by a symbolizer without the resolver */
	struct pf_symbolizer *ref = pf_symbolizer_new(NULL);
	assert_non_null(ref);
	struct pf_prof_window *rw = pf_prof_window_new();
	assert_non_null(rw);
	size_t n_kernel = 0, named = 0, same = 0;
	for (size_t i = 0; i < w->n_processes; i++) {
		const struct pf_prof_process *p = &w->processes[i];
		for (size_t k = 0; k < p->n_frames; k++) {
			const struct pf_prof_frame *f = &p->frames[k];
			if (f->kind != PF_FRAME_KERNEL)
				continue;
			n_kernel++;
			named += f->function != NULL;
			struct pf_prof_process rp = {0};
			struct pf_prof_frame rf = {.address = f->address, .kind = PF_FRAME_KERNEL};
			assert_int_equal(pf_symbolizer_resolve(ref, 1, rw, &rp, &rf, 1), 0);
			if (f->function && rf.function && !strcmp(f->function, rf.function))
				same++;
			else if (same + 5 > n_kernel)
				print_message("  %#lx: resolver %s, kallsyms %s\n",
					      (unsigned long)f->address,
					      f->function ? f->function : "(none)",
					      rf.function ? rf.function : "(none)");
		}
	}
	print_message("kernel frames %zu, named %zu, same name as /proc/kallsyms %zu; resolver "
		      "%d, %lu addresses, kallsyms load %lu ns\n",
		      n_kernel, named, same, st.sym.kernel_resolver,
		      (unsigned long)st.sym.kernel_resolved,
		      (unsigned long)st.sym.kernel_load_cpu_ns);
	if (!st.sym.kernel_resolver) {
		print_message("no syscall BPF programs on this kernel: /proc/kallsyms was used\n");
	} else {
		assert_int_equal(st.sym.kernel_load_cpu_ns, 0); /* /proc/kallsyms never read */
		assert_true(st.sym.kernel_resolved > 0);
	}
	assert_true(n_kernel >= 5);
	assert_true(named * 100 >= n_kernel * 95);
	assert_true(same * 100 >= n_kernel * 95);
	pf_prof_window_free(rw);
	pf_symbolizer_free(ref);
	pf_prof_window_free(w);
	pf_profcfg_free(cfg);
	pf_sampler_free(s);
}

int main(void)
{
	struct pf_error err = {0};
	int code;
	struct pf_sampler *probe = ebpf_probe(&code);
	if (!probe)
		return code;
	struct pf_profcfg *cfg = pf_profcfg_new_default();
	int rc = pf_sampler_set_config(probe, cfg, &err);
	pf_profcfg_free(cfg);
	pf_sampler_free(probe);
	if (rc == -EPERM || rc == -EACCES || rc == -ENOENT || rc == -EOPNOTSUPP) {
		printf("SKIP: perf events refused: %s\n", err.msg);
		return 77;
	}
	if (build_workload() < 0) {
		fprintf(stderr, "cannot build the workload with cc\n");
		return 1;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_include_ratio_callers),
		cmocka_unit_test(test_close_at_earlier_end),
		cmocka_unit_test(test_jit_frames_named),
		cmocka_unit_test(test_jit_map_not_a_file),
		cmocka_unit_test(test_exclude_in_kernel),
		cmocka_unit_test(test_runtime_frequency_change),
		cmocka_unit_test(test_filter_change_drops_cached_verdict),
		cmocka_unit_test(test_kernel_frames_resolver),
		cmocka_unit_test(test_capture_beside_continuous),
		cmocka_unit_test(test_capture_triggered_mode),
		cmocka_unit_test(test_capture_fork_inherits),
	};
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
	if (system(cmd) != 0)
		rc = rc ? rc : 1;
	return rc;
}
