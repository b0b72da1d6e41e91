/* test_offcpu.c — eBPF integration tests of off-CPU profiles (profiling.off_cpu, sampler_bpf.h):
 * a workload written for it (offcpu_workload.c: ~100 ms in compute(), ~300 ms blocked in
 * wait_lock() per loop, every wait reported with its end and duration) must show wait_lock's
 * stack in the off-CPU window at the time it really waited (± 15 %), as "blocked", in a window
 * of the one sample type off_cpu/nanoseconds with a timestamp and a value per wait; a process
 * the filters exclude must record nothing, dropped in the kernel; off-CPU off must attach
 * nothing; captures of type off_cpu and wall of a process outside the filters, with off-CPU
 * off, must hold its waits (and its time). Exit 77 when the kernel refuses BPF or perf events
 * (not root, no BTF). */
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

#include "pf/profcfg.h"
#include "pf/profile.h"
#include "ebpf_util.h"
#include "pf/clock.h"
#include "sampler/sampler_bpf.h"

static char g_dir[64];
static char g_exe[2][128];
static char g_name[2][32];

/* Two copies of the workload under two names: one for the filters to include, one to exclude. */
static int build_workload(void)
{
	const char *src = getenv("PF_SOURCE_DIR");
	char cmd[1024];
	snprintf(g_dir, sizeof(g_dir), "/tmp/pf-offcpu-XXXXXX");
	if (!mkdtemp(g_dir))
		return -1;
	for (int i = 0; i < 2; i++) {
		snprintf(g_name[i], sizeof(g_name[i]), "pfoff%c-%d", 'a' + i, (int)getpid());
		snprintf(g_exe[i], sizeof(g_exe[i]), "%s/%s", g_dir, g_name[i]);
	}
	snprintf(cmd, sizeof(cmd),
		 "cc -O0 -fno-omit-frame-pointer -g -pthread -o %s %s/tests/ebpf/offcpu_workload.c"
		 " && cp %s %s",
		 g_exe[0], src ? src : ".", g_exe[0], g_exe[1]);
	return system(cmd) == 0 ? 0 : -1;
}

/* Runs workload copy i for seconds, its stdout (the waits) into <dir>/waits-<i>. */
static pid_t spawn_workload(int i, double seconds)
{
	pid_t pid = fork();
	if (pid == 0) {
		char arg[32], out[160];
		snprintf(arg, sizeof(arg), "%.1f", seconds);
		snprintf(out, sizeof(out), "%s/waits-%d", g_dir, i);
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd >= 0)
			dup2(fd, 1);
		execl(g_exe[i], g_name[i], arg, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* The file workload copy i writes its waits to ("wait <end ns> <duration ns>" lines), open. */
static FILE *waits_file(int i)
{
	char path[160];
	snprintf(path, sizeof(path), "%s/waits-%d", g_dir, i);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	return f;
}

/* The waits of workload copy i that ended in [start, end): their summed duration (ns). */
static uint64_t waits_in(int i, uint64_t start, uint64_t end, unsigned *n)
{
	FILE *f = waits_file(i);
	unsigned long long t, d;
	uint64_t sum = 0;
	*n = 0;
	while (fscanf(f, "wait %llu %llu\n", &t, &d) == 2)
		if (t >= start && t < end) {
			sum += d;
			(*n)++;
		}
	fclose(f);
	return sum;
}

/* Off-CPU on (or not), the first workload copy included only. */
static struct pf_profcfg *include_first(bool off_cpu)
{
	return ebpf_config("profiling:\n  sampling: {frequency_hz: 99, duration_seconds: 10}\n"
		      "  off_cpu: {enabled: %s}\n"
		      "  filters:\n    include: [{key: process.executable.name, match: strict, "
		      "value: \"%s\"}]\n",
		      off_cpu ? "true" : "false", g_name[0]);
}

static void poll_until_exit(struct pf_sampler *s, pid_t pid, uint64_t max_ms)
{
	uint64_t end = pf_mono_ms() + max_ms;
	int st;
	while (pf_mono_ms() < end && waitpid(pid, &st, WNOHANG) == 0)
		assert_true(pf_sampler_poll(s, 50) >= 0);
	assert_int_equal(waitpid(pid, &st, WNOHANG), -1); /* reaped: it exited in time */
	for (int i = 0; i < 4; i++)
		assert_true(pf_sampler_poll(s, 50) >= 0);
}

struct off_tally {
	int64_t wait_ns, compute_ns, other_ns; /* by the stack's user frames */
	int64_t wait_preempted_ns;
	uint64_t wait_samples, wait_with_kernel; /* wait_lock samples, those with kernel frames */
	uint64_t events;
	bool shape_ok; /* timestamps == count, event values sum to the value, a reason label */
	bool foreign;  /* another process */
};

static void tally_off(const struct pf_prof_window *w, pid_t pid, struct off_tally *t)
{
	t->shape_ok = w->n_sample_types == 1 && !strcmp(w->sample_types[0].type, "off_cpu") &&
		      !strcmp(w->sample_types[0].unit, "nanoseconds") && w->period_type.type &&
		      !strcmp(w->period_type.type, "off_cpu");
	for (size_t i = 0; i < w->n_processes; i++) {
		const struct pf_prof_process *p = &w->processes[i];
		if (p->pid != (uint32_t)pid) {
			t->foreign = true;
			continue;
		}
		for (size_t k = 0; k < p->n_samples; k++) {
			const struct pf_prof_sample *sm = &p->samples[k];
			const struct pf_prof_stack *st = &p->stacks[sm->stack];
			int64_t v = sm->values ? sm->values[0] : -1, sum = 0;
			for (uint32_t j = 0; sm->event_values && j < sm->n_timestamps; j++)
				sum += sm->event_values[j];
			if (sm->n_timestamps != sm->count || !sm->event_values || sum != v ||
			    sm->n_labels != 1 || strcmp(sm->labels[0].key, "profleet.off_cpu.reason"))
				t->shape_ok = false;
			bool preempted = sm->n_labels == 1 && sm->labels[0].str &&
					 !strcmp(sm->labels[0].str, "preempted");
			t->events += sm->count;
			if (ebpf_stack_has(p, st, "wait_lock")) {
				t->wait_ns += v;
				t->wait_samples++;
				t->wait_with_kernel +=
				    st->n_frames && p->frames[st->frames[0]].kind == PF_FRAME_KERNEL;
				if (preempted)
					t->wait_preempted_ns += v;
			} else if (ebpf_stack_has(p, st, "compute")) {
				t->compute_ns += v;
			} else {
				t->other_ns += v;
			}
		}
	}
}

/* The off-CPU window among the windows closed now (the CPU one comes first), or NULL. */
static struct pf_prof_window *close_off_window(struct pf_sampler *s)
{
	struct pf_error err = {0};
	struct pf_prof_window *w = pf_sampler_close_window(s, &err), *off = NULL;
	assert_non_null(w);
	do {
		if (w->n_sample_types == 1 && !strcmp(w->sample_types[0].type, "off_cpu") && !off)
			off = w;
		else
			pf_prof_window_free(w);
	} while ((w = pf_sampler_next_window(s)));
	return off;
}

/* A sampler on the config include_first(off_cpu), and workload copy i running for seconds. */
static pid_t start_sampled(bool off_cpu, int i, double seconds, struct pf_sampler **s,
			   struct pf_profcfg **cfg)
{
	struct pf_error err = {0};
	*s = pf_sampler_new(NULL, &err);
	assert_non_null(*s);
	*cfg = include_first(off_cpu);
	assert_int_equal(pf_sampler_set_config(*s, *cfg, &err), 0);
	pid_t pid = spawn_workload(i, seconds);
	assert_true(pid > 0);
	return pid;
}

/* Polls s for ms. */
static void poll_for(struct pf_sampler *s, uint64_t ms)
{
	uint64_t end = pf_mono_ms() + ms;
	while (pf_mono_ms() < end)
		assert_true(pf_sampler_poll(s, 50) >= 0);
}

static void test_wait_lock_time(void **state)
{
	struct pf_sampler *s;
	struct pf_profcfg *cfg;
	pid_t pid = start_sampled(true, 0, 5, &s, &cfg);
	/* the first second: the process's unwind tables load (libc has no frame pointers) */
	poll_for(s, 1200);
	pf_prof_window_free(close_off_window(s));
	poll_until_exit(s, pid, 15000);
	struct pf_prof_window *w = close_off_window(s);
	assert_non_null(w);
	struct pf_sampler_stats st;
	assert_int_equal(pf_sampler_stats(s, &st), 0);
	struct off_tally t = {0};
	tally_off(w, pid, &t);
	unsigned n_waits;
	uint64_t truth = waits_in(0, w->start_unix_ns, w->end_unix_ns, &n_waits);
	double ratio = truth ? (double)t.wait_ns / (double)truth : 0;
	print_message("off-CPU: wait_lock %.1f ms of %.1f ms blocked (%u waits; ratio %.3f), "
		      "of it preempted %.1f ms (%llu of %llu stacks with kernel frames); compute "
		      "%.1f ms, other %.1f ms; %llu records; "
		      "kernel: %llu records, %llu switch-outs, %llu short\n",
		      t.wait_ns / 1e6, truth / 1e6, n_waits, ratio, t.wait_preempted_ns / 1e6,
		      (unsigned long long)t.wait_with_kernel, (unsigned long long)t.wait_samples,
		      t.compute_ns / 1e6, t.other_ns / 1e6, (unsigned long long)t.events,
		      (unsigned long long)st.off_cpu_samples,
		      (unsigned long long)st.off_cpu_switches,
		      (unsigned long long)st.off_cpu_short);
	assert_true(st.off_cpu);
	assert_true(t.shape_ok);
	assert_false(t.foreign);
	assert_true(n_waits >= 6);
	assert_true(ratio >= 0.85 && ratio <= 1.15);
	/* the blocking call under its kernel path (the stack it left with) */
	assert_true(t.wait_with_kernel * 2 >= t.wait_samples);
	/* waiting on a condition is blocking, not CPU contention */
	assert_true(t.wait_preempted_ns * 10 < t.wait_ns);
	pf_prof_window_free(w);
	pf_profcfg_free(cfg);
	pf_sampler_free(s);
}

static void test_excluded_records_nothing(void **state)
{
	struct pf_error err = {0};
	struct pf_sampler *s = pf_sampler_new(NULL, &err);
	assert_non_null(s);
	struct pf_profcfg *cfg = include_first(true);
	assert_int_equal(pf_sampler_set_config(s, cfg, &err), 0);
	struct pf_sampler_stats before, after;
	assert_int_equal(pf_sampler_stats(s, &before), 0);
	pid_t pid = spawn_workload(1, 2.5);
	assert_true(pid > 0);
	poll_until_exit(s, pid, 15000);
	struct pf_prof_window *w = close_off_window(s);
	assert_int_equal(pf_sampler_stats(s, &after), 0);
	struct off_tally t = {0};
	if (w)
		tally_off(w, pid, &t);
	unsigned n_waits;
	waits_in(1, 0, UINT64_MAX, &n_waits);
	print_message("excluded: %llu off-CPU records of it, %u waits; filtered in kernel %llu\n",
		      (unsigned long long)t.events, n_waits,
		      (unsigned long long)(after.off_cpu_filtered - before.off_cpu_filtered));
	assert_true(n_waits >= 4);
	assert_int_equal(t.events, 0);
	assert_true(after.off_cpu_filtered - before.off_cpu_filtered >= n_waits);
	pf_prof_window_free(w);
	pf_profcfg_free(cfg);
	pf_sampler_free(s);
}

/* Off by default and live: off attaches nothing and records nothing; on, then off again. */
static void test_live_switch(void **state)
{
	struct pf_error err = {0};
	struct pf_sampler *s = pf_sampler_new(NULL, &err);
	assert_non_null(s);
	struct pf_profcfg *off = include_first(false), *on = include_first(true);
	assert_false(off->off_cpu.enabled);
	assert_int_equal(pf_sampler_set_config(s, off, &err), 0);
	pid_t pid = spawn_workload(0, 1.5);
	assert_true(pid > 0);
	poll_until_exit(s, pid, 15000);
	struct pf_sampler_stats st;
	assert_int_equal(pf_sampler_stats(s, &st), 0);
	assert_false(st.off_cpu);
	assert_int_equal(st.off_cpu_switches, 0);
	assert_null(close_off_window(s));
	assert_int_equal(pf_sampler_set_config(s, on, &err), 0);
	assert_int_equal(pf_sampler_stats(s, &st), 0);
	assert_true(st.off_cpu);
	assert_int_equal(pf_sampler_set_config(s, off, &err), 0);
	assert_int_equal(pf_sampler_stats(s, &st), 0);
	assert_false(st.off_cpu);
	pf_profcfg_free(off);
	pf_profcfg_free(on);
	pf_sampler_free(s);
}

/* The waits of workload copy i within [start, end): the part of each inside the range (a
 * wait still going on at end counts up to end when with_open, else not; one that began
 * before start counts from start when with_early, else not: a capture follows the waits that
 * begin once it runs). */
static uint64_t waits_within(int i, uint64_t start, uint64_t end, bool with_open,
			     bool with_early)
{
	FILE *f = waits_file(i);
	unsigned long long t, d;
	uint64_t sum = 0;
	while (fscanf(f, "wait %llu %llu\n", &t, &d) == 2) {
		uint64_t a = t - d, b = t;
		if ((b > end && !with_open) || (a < start && !with_early))
			continue;
		a = a < start ? start : a;
		b = b > end ? end : b;
		sum += b > a ? b - a : 0;
	}
	fclose(f);
	return sum;
}

/* A capture of pid of type for ms on the sampler s: its window. */
static struct pf_prof_window *capture_for(struct pf_sampler *s, unsigned slot,
					  enum pf_prof_type type, pid_t pid, uint64_t ms)
{
	struct pf_error err = {0};
	uint32_t p = (uint32_t)pid;
	assert_int_equal(pf_sampler_capture_start(s, slot, type, 99, &p, 1, &err), 0);
	struct pf_sampler_stats st;
	assert_int_equal(pf_sampler_stats(s, &st), 0);
	/* the switch programs follow it for an off_cpu or wall capture (off-CPU is off) */
	assert_int_equal(st.off_cpu, type != PF_PROF_CPU);
	poll_for(s, ms);
	struct pf_prof_window *w = pf_sampler_capture_stop(s, slot, &err);
	assert_non_null(w);
	return w;
}

/* Captures of type off_cpu and wall while profiling.off_cpu is off, of a process the include
 * filter leaves out (captures choose among all processes): off_cpu holds wait_lock at the
 * time of the waits that began and ended in the capture (± 15 %); wall holds each request's
 * time, wait_lock ~75 % and compute ~25 % (± 10 points), its total the capture's time less
 * the waits going on at its start and its end (± 15 %); the switch programs are detached
 * again after each. */
static void test_captures_of_type(void **state)
{
	struct pf_sampler *s;
	struct pf_profcfg *cfg;
	pid_t pid = start_sampled(false, 1, 6, &s, &cfg);
	/* a CPU capture first: its ticks load the process's unwind tables (libc's waits) */
	pf_prof_window_free(capture_for(s, 2, PF_PROF_CPU, pid, 1200));

	struct pf_prof_window *w = capture_for(s, 0, PF_PROF_WALL, pid, 2000);
	struct pf_sampler_stats st;
	assert_int_equal(pf_sampler_stats(s, &st), 0);
	assert_false(st.off_cpu);
	assert_true(w->n_sample_types == 1 && !strcmp(w->sample_types[0].type, "wall") &&
		    !strcmp(w->sample_types[0].unit, "nanoseconds"));
	int64_t wait = 0, compute = 0, total = 0;
	for (size_t i = 0; i < w->n_processes; i++) {
		const struct pf_prof_process *p = &w->processes[i];
		assert_int_equal(p->pid, pid);
		for (size_t k = 0; k < p->n_samples; k++) {
			const struct pf_prof_stack *stk = &p->stacks[p->samples[k].stack];
			int64_t v = p->samples[k].values[0];
			total += v;
			wait += ebpf_stack_has(p, stk, "wait_lock") ? v : 0;
			compute += ebpf_stack_has(p, stk, "compute") ? v : 0;
		}
	}
	uint64_t w_start = w->start_unix_ns, w_end = w->end_unix_ns;
	pf_prof_window_free(w);

	w = capture_for(s, 1, PF_PROF_OFF_CPU, pid, 2000);
	assert_int_equal(pf_sampler_stats(s, &st), 0);
	assert_false(st.off_cpu);
	struct off_tally t = {0};
	tally_off(w, pid, &t);
	/* the waits file is complete once the workload exited */
	poll_until_exit(s, pid, 15000);
	uint64_t open_wait = waits_within(1, w_start, w_end, true, false) -
			     waits_within(1, w_start, w_end, false, false);
	uint64_t early_wait = waits_within(1, w_start, w_end, false, true) -
			      waits_within(1, w_start, w_end, false, false);
	double expect = (double)(w_end - w_start - open_wait - early_wait);
	print_message("wall capture: %.1f ms of %.1f ms (less %.1f ms of a wait going on at "
		      "the end, %.1f ms of one begun before the start), wait_lock %.1f %%, "
		      "compute %.1f %%\n",
		      total / 1e6, (w_end - w_start) / 1e6, open_wait / 1e6, early_wait / 1e6,
		      100.0 * wait / total, 100.0 * compute / total);
	assert_true(total >= 0.85 * expect && total <= 1.15 * expect);
	assert_true(100.0 * wait / total >= 65 && 100.0 * wait / total <= 85);
	assert_true(100.0 * compute / total >= 15 && 100.0 * compute / total <= 35);
	uint64_t truth = waits_within(1, w->start_unix_ns, w->end_unix_ns, false, false);
	double ratio = truth ? (double)t.wait_ns / (double)truth : 0;
	print_message("off_cpu capture: wait_lock %.1f ms of %.1f ms blocked (ratio %.3f), "
		      "compute %.1f ms\n",
		      t.wait_ns / 1e6, truth / 1e6, ratio, t.compute_ns / 1e6);
	assert_true(t.shape_ok);
	assert_false(t.foreign);
	assert_true(ratio >= 0.85 && ratio <= 1.15);
	pf_prof_window_free(w);
	pf_profcfg_free(cfg);
	pf_sampler_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wait_lock_time),
		cmocka_unit_test(test_excluded_records_nothing),
		cmocka_unit_test(test_live_switch),
		cmocka_unit_test(test_captures_of_type),
	};
	return EBPF_MAIN(tests, build_workload, g_dir);
}
