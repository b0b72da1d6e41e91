/* test_high_cpu.c — agent/triggers/high_cpu.c: the per-process and host state machines with
 * injected readings, the /proc parsers, and one run against a real busy child process. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "triggers/high_cpu.h"

#define S 1000000000ULL

/* ---- a fake /proc ------------------------------------------------------------------------- */

#define NFAKE 400
struct fake {
	uint32_t pid[NFAKE];
	double pct[NFAKE]; /* percent of one CPU it uses per second */
	uint64_t cpu[NFAKE];
	bool gone[NFAKE];
	size_t n;
	double host_pct;
	uint64_t busy, total;
	unsigned reads;
};

static int fake_proc(void *ctx, uint32_t pid, uint64_t *cpu_ns)
{
	struct fake *f = ctx;
	f->reads++;
	for (size_t i = 0; i < f->n; i++)
		if (f->pid[i] == pid) {
			if (f->gone[i])
				return -ESRCH;
			*cpu_ns = f->cpu[i];
			return 0;
		}
	return -ESRCH;
}

static int fake_host(void *ctx, uint64_t *busy, uint64_t *total)
{
	struct fake *f = ctx;
	*busy = f->busy;
	*total = f->total;
	return 0;
}

static size_t add(struct fake *f, uint32_t pid, double pct)
{
	f->pid[f->n] = pid;
	f->pct[f->n] = pct;
	return f->n++;
}

/* Advances the fake clock by one second and evaluates. */
static size_t tick(struct fake *f, struct agent_high_cpu *h, uint64_t *now,
		   struct agent_high_cpu_fire *out, size_t cap)
{
	*now += S;
	for (size_t i = 0; i < f->n; i++)
		f->cpu[i] += (uint64_t)(f->pct[i] / 100.0 * (double)S);
	f->busy += (uint64_t)(f->host_pct * 2); /* 2 CPUs, 100 units per CPU-second */
	f->total += 200;
	return agent_high_cpu_update(h, *now, f->pid, f->n, out, cap);
}

static struct agent_high_cpu *fake_new(struct fake *f, uint32_t threshold, uint32_t sustain,
				       uint32_t duration, uint32_t cooldown)
{
	struct agent_high_cpu_rule r = {.threshold_percent = threshold,
					.sustain_seconds = sustain,
					.duration_seconds = duration,
					.cooldown_seconds = cooldown};
	struct agent_high_cpu_reader rd = {.proc_cpu = fake_proc, .host_cpu = fake_host, .ctx = f};
	return agent_high_cpu_new(&r, &rd);
}

/* ---- state machine ------------------------------------------------------------------------ */

static void test_sustain_then_cooldown(void **unused)
{
	(void)unused;
	static struct fake f;
	memset(&f, 0, sizeof(f));
	size_t busy = add(&f, 100, 95);
	add(&f, 200, 10);
	struct agent_high_cpu *h = fake_new(&f, 80, 10, 5, 20);
	assert_non_null(h);
	struct agent_high_cpu_fire fire[4];
	uint64_t now = 1000 * S;
	assert_int_equal(agent_high_cpu_update(h, now, f.pid, f.n, fire, 4), 0); /* baseline */
	for (int t = 1; t < 10; t++)
		assert_int_equal(tick(&f, h, &now, fire, 4), 0);
	/* over since the first reading, 10 s later: fires, with the mean since then */
	assert_int_equal(tick(&f, h, &now, fire, 4), 1);
	assert_int_equal(fire[0].pid, 100);
	assert_false(fire[0].host);
	assert_true(fire[0].cpu_percent > 94.9 && fire[0].cpu_percent < 95.1);
	/* quiet for the capture (5 s) and the cooldown (20 s), although still busy; held back
	 * from the moment it is over the threshold for sustain_seconds again */
	for (int t = 1; t < 25; t++)
		assert_int_equal(tick(&f, h, &now, fire, 4), 0);
	struct agent_high_cpu_stats st;
	agent_high_cpu_stats(h, &st);
	assert_int_equal(st.held, 24 - 9);
	assert_int_equal(st.over, 1);
	/* the same rule again (a config apply that changed other keys) keeps the sustain count:
	 * it fires as soon as the quiet time is over */
	struct agent_high_cpu_rule same = {.threshold_percent = 80,
					   .sustain_seconds = 10,
					   .duration_seconds = 5,
					   .cooldown_seconds = 20};
	agent_high_cpu_set_rule(h, &same);
	assert_int_equal(tick(&f, h, &now, fire, 4), 1);
	assert_int_equal(fire[0].pid, 100);
	/* a dip under the threshold restarts the sustain count */
	for (int t = 0; t < 24; t++)
		assert_int_equal(tick(&f, h, &now, fire, 4), 0);
	f.pct[busy] = 50;
	assert_int_equal(tick(&f, h, &now, fire, 4), 0);
	f.pct[busy] = 95;
	for (int t = 1; t < 10; t++)
		assert_int_equal(tick(&f, h, &now, fire, 4), 0);
	assert_int_equal(tick(&f, h, &now, fire, 4), 1);

	agent_high_cpu_stats(h, &st);
	assert_int_equal(st.fired, 3);
	assert_int_equal(st.tracked, 2);
	assert_int_equal(st.last_pid, 100);
	/* calls closer than the interval read nothing */
	unsigned reads = f.reads;
	assert_int_equal(agent_high_cpu_update(h, now + S / 2, f.pid, f.n, fire, 4), 0);
	assert_int_equal(f.reads, reads);
	agent_high_cpu_free(h);
}

static void test_host_rule_and_bounds(void **unused)
{
	(void)unused;
	static struct fake f;
	memset(&f, 0, sizeof(f));
	/* five processes, none over 80 % alone; the host is at 90 % */
	add(&f, 11, 30);
	add(&f, 12, 60);
	add(&f, 13, 0);
	add(&f, 14, 45);
	add(&f, 15, 20);
	f.host_pct = 90;
	struct agent_high_cpu *h = fake_new(&f, 80, 3, 1, 10);
	assert_non_null(h);
	struct agent_high_cpu_fire fire[8];
	uint64_t now = 50 * S;
	assert_int_equal(agent_high_cpu_update(h, now, f.pid, f.n, fire, 8), 0);
	assert_int_equal(tick(&f, h, &now, fire, 8), 0);
	assert_int_equal(tick(&f, h, &now, fire, 8), 0);
	/* the three busiest processes, busiest first */
	assert_int_equal(tick(&f, h, &now, fire, 8), 3);
	assert_int_equal(fire[0].pid, 12);
	assert_int_equal(fire[1].pid, 14);
	assert_int_equal(fire[2].pid, 11);
	for (int i = 0; i < 3; i++) {
		assert_true(fire[i].host);
		assert_true(fire[i].host_percent > 89.9 && fire[i].host_percent < 90.1);
	}
	assert_true(fire[0].cpu_percent > 59.9 && fire[0].cpu_percent < 60.1);
	/* host cooldown: 11 s */
	for (int t = 1; t < 11; t++)
		assert_int_equal(tick(&f, h, &now, fire, 8), 0);
	/* after the host's quiet time (capture 1 s + cooldown 10 s) it fires again on the same
	 * three, whose own quiet time ended at the same moment (13 uses nothing) */
	assert_int_equal(tick(&f, h, &now, fire, 8), 3);
	struct agent_high_cpu_stats st;
	agent_high_cpu_stats(h, &st);
	assert_int_equal(st.host_fired, 2);
	assert_int_equal(st.host_fired_procs, 6);
	assert_int_equal(st.fired, 0); /* no process over the threshold on its own */
	assert_true(st.host_percent > 89.9 && st.host_percent < 90.1);
	agent_high_cpu_free(h);

	/* bound: at most AGENT_HIGH_CPU_MAX_PROCS watched; a process that is gone is dropped */
	memset(&f, 0, sizeof(f));
	for (uint32_t i = 0; i < 300; i++)
		add(&f, 1000 + i, 1);
	h = fake_new(&f, 80, 3, 1, 10);
	assert_non_null(h);
	now = S;
	agent_high_cpu_update(h, now, f.pid, f.n, fire, 8);
	agent_high_cpu_stats(h, &st);
	assert_int_equal(st.tracked, AGENT_HIGH_CPU_MAX_PROCS);
	assert_int_equal(st.untracked, 300 - AGENT_HIGH_CPU_MAX_PROCS);
	assert_int_equal(f.reads, AGENT_HIGH_CPU_MAX_PROCS);
	f.gone[0] = true;
	tick(&f, h, &now, fire, 8);
	agent_high_cpu_stats(h, &st);
	assert_int_equal(st.tracked, AGENT_HIGH_CPU_MAX_PROCS - 1);
	/* host idle: no firing at all */
	assert_int_equal(st.host_fired, 0);
	agent_high_cpu_free(h);
}

/* A full output loses no firing: the second process fires at the next evaluation. */
static void test_full_output_keeps_firings(void **unused)
{
	(void)unused;
	static struct fake f;
	memset(&f, 0, sizeof(f));
	add(&f, 21, 99);
	add(&f, 22, 98);
	struct agent_high_cpu *h = fake_new(&f, 50, 2, 1, 60);
	assert_non_null(h);
	struct agent_high_cpu_fire fire[1];
	uint64_t now = S;
	agent_high_cpu_update(h, now, f.pid, f.n, fire, 1);
	assert_int_equal(tick(&f, h, &now, fire, 1), 0);
	assert_int_equal(tick(&f, h, &now, fire, 1), 1);
	assert_int_equal(fire[0].pid, 21);
	assert_int_equal(tick(&f, h, &now, fire, 1), 1);
	assert_int_equal(fire[0].pid, 22);
	assert_int_equal(tick(&f, h, &now, fire, 1), 0);
	agent_high_cpu_free(h);
}

/* A host firing while no watched process is busy only counts. */
static void test_host_idle_processes(void **unused)
{
	(void)unused;
	static struct fake f;
	memset(&f, 0, sizeof(f));
	add(&f, 7, 0);
	f.host_pct = 99;
	struct agent_high_cpu *h = fake_new(&f, 90, 2, 1, 60);
	assert_non_null(h);
	struct agent_high_cpu_fire fire[2];
	uint64_t now = S;
	agent_high_cpu_update(h, now, f.pid, f.n, fire, 2);
	assert_int_equal(tick(&f, h, &now, fire, 2), 0);
	assert_int_equal(tick(&f, h, &now, fire, 2), 0);
	struct agent_high_cpu_stats st;
	agent_high_cpu_stats(h, &st);
	assert_int_equal(st.host_fired, 1);
	assert_int_equal(st.host_fired_idle, 1);
	agent_high_cpu_free(h);
}

/* Processes idle at their last reading are read every 5 s, not every second; one that turns
 * busy is still found, its sustain time counted from the reading that saw it. */
static void test_idle_processes_read_less(void **unused)
{
	(void)unused;
	static struct fake f;
	memset(&f, 0, sizeof(f));
	add(&f, 1, 95);
	add(&f, 2, 0);
	add(&f, 3, 0);
	size_t late = add(&f, 4, 10);
	struct agent_high_cpu *h = fake_new(&f, 80, 3, 10, 300);
	assert_non_null(h);
	struct agent_high_cpu_fire fire[4];
	uint64_t now = 7 * S;
	agent_high_cpu_update(h, now, f.pid, f.n, fire, 4); /* 4 baselines */
	tick(&f, h, &now, fire, 4);			    /* 4 first measures */
	assert_int_equal(f.reads, 8);
	f.reads = 0;
	for (int t = 0; t < 20; t++)
		tick(&f, h, &now, fire, 4);
	/* the busy one every second, the three idle ones every 5 s */
	assert_int_equal(f.reads, 20 + 3 * 4);
	struct agent_high_cpu_stats st;
	agent_high_cpu_stats(h, &st);
	assert_int_equal(st.reads, 8 + 20 + 3 * 4);
	assert_int_equal(st.tracked, 4);

	/* pid 4 turns busy: seen at its next reading (within 5 s), fires sustain_seconds later */
	f.pct[late] = 99;
	int waited = 0;
	size_t n = 0;
	while (!n && waited < 20) {
		n = tick(&f, h, &now, fire, 4);
		waited++;
	}
	assert_int_equal(n, 1);
	assert_int_equal(fire[0].pid, 4);
	assert_true(waited >= 3 && waited <= 5 + 3);
	assert_true(fire[0].cpu_percent > 98.9 && fire[0].cpu_percent < 99.1);
	agent_high_cpu_free(h);
}

static void test_parsers(void **unused)
{
	(void)unused;
	uint64_t u = 0, s = 0, busy = 0, total = 0;
	assert_int_equal(agent_high_cpu_parse_stat(
			     "4242 (we) (ird) R 1 4242 4242 0 -1 4194304 1 2 3 4 1234 567 0 0 20 0 "
			     "1 0 9 1000 10\n",
			     &u, &s),
			 0);
	assert_int_equal(u, 1234);
	assert_int_equal(s, 567);
	assert_int_equal(agent_high_cpu_parse_stat("4242 (x) R 1 2", &u, &s), -EINVAL);
	assert_int_equal(agent_high_cpu_parse_stat("no comm", &u, &s), -EINVAL);
	assert_int_equal(
	    agent_high_cpu_parse_host("cpu  100 5 50 800 40 3 2 0 0 0\ncpu0 1 2\n", &busy, &total),
	    0);
	assert_int_equal(total, 1000);
	assert_int_equal(busy, 160);
	assert_int_equal(agent_high_cpu_parse_host("cpu0 1 2 3 4\n", &busy, &total), -EINVAL);
	assert_int_equal(agent_high_cpu_parse_host("cpu  1 2\n", &busy, &total), -EINVAL);
}

/* ---- real /proc --------------------------------------------------------------------------- */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * S + (uint64_t)ts.tv_nsec;
}

static pid_t spawn(bool busy)
{
	pid_t pid = fork();
	if (pid == 0) {
		alarm(60); /* never outlives a stuck test */
		volatile uint64_t x = 0;
		if (busy)
			for (;;)
				x++;
		for (;;)
			pause();
	}
	return pid;
}

/* A busy child fires (and an idle one does not), measured from the real /proc. The threshold is
 * low because the CPUs are shared with whatever else runs. */
static void test_real_busy_child(void **unused)
{
	(void)unused;
	pid_t busy = spawn(true), idle = spawn(false);
	assert_true(busy > 0 && idle > 0);
	struct agent_high_cpu_rule r = {.threshold_percent = 5,
					.sustain_seconds = 2,
					.duration_seconds = 1,
					.cooldown_seconds = 300};
	struct agent_high_cpu *h = agent_high_cpu_new(&r, NULL);
	assert_non_null(h);
	uint32_t pids[2] = {(uint32_t)busy, (uint32_t)idle};
	struct agent_high_cpu_fire fire[4];
	struct agent_high_cpu_fire got = {0};
	uint64_t deadline = now_ns() + 20 * S;
	size_t n = 0;
	while (!n && now_ns() < deadline) {
		n = agent_high_cpu_update(h, now_ns(), pids, 2, fire, 4);
		if (n)
			got = fire[0];
		else
			usleep(100000);
	}
	struct agent_high_cpu_stats st;
	agent_high_cpu_stats(h, &st);
	kill(busy, SIGKILL);
	kill(idle, SIGKILL);
	waitpid(busy, NULL, 0);
	waitpid(idle, NULL, 0);
	assert_int_equal(n, 1);
	assert_int_equal(got.pid, (uint32_t)busy);
	assert_true(got.cpu_percent >= 5 && got.cpu_percent <= 101);
	assert_int_equal(st.tracked, 2);
	assert_true(st.host_percent >= 0 && st.host_percent <= 100);
	/* the cost of one evaluation (2 processes + /proc/stat) */
	print_message("high_cpu: one evaluation of 2 processes read /proc in %.1f us; busy child "
		      "at %.0f%%\n",
		      (double)st.last_update_ns / 1000.0, got.cpu_percent);
	/* once gone, they are dropped at their next reading (the idle one's is 5 s on) */
	uint64_t t = now_ns() + 6 * S;
	agent_high_cpu_update(h, t, pids, 2, fire, 4);
	agent_high_cpu_stats(h, &st);
	assert_int_equal(st.tracked, 0);
	agent_high_cpu_free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sustain_then_cooldown),
	    cmocka_unit_test(test_host_rule_and_bounds),
	    cmocka_unit_test(test_host_idle_processes),
	    cmocka_unit_test(test_full_output_keeps_firings),
	    cmocka_unit_test(test_idle_processes_read_less),
	    cmocka_unit_test(test_parsers),
	    cmocka_unit_test(test_real_busy_child),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
