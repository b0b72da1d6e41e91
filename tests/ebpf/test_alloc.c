/* test_alloc.c — eBPF integration tests of allocation captures (sampler_bpf.h "Allocation
 * captures"): a workload written for it (alloc_workload.c) allocates a known number of bytes
 * in alloc_hot() and a tenth as much in alloc_cold(), then frees every other allocation. The
 * capture's window must have pprof's four heap sample types, attribute >= 80 % of the sampled
 * bytes to stacks through alloc_hot, estimate the total within +-25 % of what the workload
 * reports and its live bytes (about half) within +-25 % too. A workload past the guard's rate
 * must see the probes detached and the result say so; a capture of a process without an
 * allocator must be refused. Exit 77 when the kernel refuses BPF or perf events, or has no
 * session uprobes. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ebpf_util.h"
#include "pf/clock.h"
#include "pf/profcfg.h"
#include "pf/profile.h"
#include "sampler/sampler_bpf.h"

static char g_dir[64];
static char g_exe[128];

static int build_workload(void)
{
	const char *src = getenv("PF_SOURCE_DIR");
	char cmd[1024];
	snprintf(g_dir, sizeof(g_dir), "/tmp/pf-alloc-XXXXXX");
	if (!mkdtemp(g_dir))
		return -1;
	snprintf(g_exe, sizeof(g_exe), "%s/pfalloc", g_dir);
	snprintf(cmd, sizeof(cmd),
		 "cc -O0 -fno-omit-frame-pointer -g -o %s %s/tests/ebpf/alloc_workload.c", g_exe,
		 src ? src : ".");
	return system(cmd) == 0 ? 0 : -1;
}

struct child {
	pid_t pid;
	FILE *in, *out; /* its stdin, its stdout */
};

static void spawn(struct child *c, const char *bytes, const char *mode)
{
	int pin[2], pout[2];
	assert_int_equal(pipe(pin), 0);
	assert_int_equal(pipe(pout), 0);
	c->pid = fork();
	assert_true(c->pid >= 0);
	if (c->pid == 0) {
		dup2(pin[0], 0);
		dup2(pout[1], 1);
		close(pin[1]);
		close(pout[0]);
		execl(g_exe, "pfalloc", bytes, mode, (char *)NULL);
		_exit(127);
	}
	close(pin[0]);
	close(pout[1]);
	c->in = fdopen(pin[1], "w");
	c->out = fdopen(pout[0], "r");
	assert_non_null(c->in);
	assert_non_null(c->out);
	char line[128];
	assert_non_null(fgets(line, sizeof(line), c->out));
	assert_string_equal(line, "ready\n");
}

/* The workload's report line, the sampler drained meanwhile (at most ms). */
static void report(struct pf_sampler *s, struct child *c, char *line, size_t size, uint64_t ms)
{
	uint64_t deadline = pf_mono_ms() + ms;
	while (pf_mono_ms() < deadline) {
		assert_true(pf_sampler_poll(s, 20) >= 0);
		struct timeval tv = {0, 0};
		fd_set r;
		FD_ZERO(&r);
		FD_SET(fileno(c->out), &r);
		if (select(fileno(c->out) + 1, &r, NULL, NULL, &tv) > 0)
			break;
	}
	assert_non_null(fgets(line, (int)size, c->out));
}

static void go(struct child *c)
{
	assert_true(fputs("go\n", c->in) >= 0);
	assert_int_equal(fflush(c->in), 0);
}

static void finish(struct child *c)
{
	fclose(c->in);
	int st;
	assert_int_equal(waitpid(c->pid, &st, 0), c->pid);
	fclose(c->out);
}

static void test_hot_cold(void **state)
{
	(void)state;
	struct pf_error err = {0};
	struct pf_sampler *s = pf_sampler_new(NULL, &err);
	assert_non_null(s);
	struct child c;
	spawn(&c, "67108864", NULL); /* 64 MiB in alloc_hot, 6.4 in alloc_cold */
	uint32_t pid = (uint32_t)c.pid;
	struct pf_alloc_options o = {.sample_bytes = 64 << 10}; /* ~1100 samples */
	int rc = pf_sampler_alloc_start(s, &pid, 1, &o, &err);
	if (rc == -ENOTSUP) {
		print_message("SKIP: %s\n", err.msg);
		finish(&c);
		pf_sampler_free(s);
		skip();
	}
	assert_int_equal(rc, 0);
	go(&c);
	char line[160];
	unsigned long long total = 0, live = 0;
	size_t n_allocs = 0;
	report(s, &c, line, sizeof(line), 60000);
	assert_int_equal(sscanf(line, "total %llu live %llu allocations %zu", &total, &live,
				&n_allocs),
			 3);
	for (int i = 0; i < 5; i++)
		assert_true(pf_sampler_poll(s, 20) >= 0);
	struct pf_alloc_result res;
	struct pf_prof_window *w = pf_sampler_alloc_stop(s, &res, &err);
	assert_non_null(w);
	finish(&c);

	assert_int_equal(w->n_sample_types, 4);
	const char *types[4] = {"alloc_objects", "alloc_space", "inuse_objects", "inuse_space"};
	for (int k = 0; k < 4; k++)
		assert_string_equal(w->sample_types[k].type, types[k]);
	int64_t v[4] = {0}, hot = 0, cold = 0;
	for (size_t i = 0; i < w->n_processes; i++) {
		const struct pf_prof_process *p = &w->processes[i];
		assert_int_equal(p->pid, pid);
		for (size_t k = 0; k < p->n_samples; k++) {
			const struct pf_prof_sample *sm = &p->samples[k];
			assert_non_null(sm->values);
			for (int j = 0; j < 4; j++)
				v[j] += sm->values[j];
			if (ebpf_stack_has(p, &p->stacks[sm->stack], "alloc_hot"))
				hot += sm->values[1];
			else if (ebpf_stack_has(p, &p->stacks[sm->stack], "alloc_cold"))
				cold += sm->values[1];
		}
	}
	print_message("alloc: workload %llu bytes in %zu allocations, %llu live; estimated "
		      "%lld bytes (%lld objects), live %lld bytes (%lld objects); alloc_hot %.1f %%, "
		      "alloc_cold %.1f %%; %llu probed calls, %llu sampled, %llu frees matched, "
		      "%llu untracked, %llu failed, %llu lost, %llu live, %llu collided\n",
		      total, n_allocs, live, (long long)v[1], (long long)v[0], (long long)v[3],
		      (long long)v[2], v[1] ? 100.0 * hot / v[1] : 0, v[1] ? 100.0 * cold / v[1] : 0,
		      (unsigned long long)res.calls, (unsigned long long)res.sampled,
		      (unsigned long long)res.frees, (unsigned long long)res.untracked,
		      (unsigned long long)res.failed, (unsigned long long)res.lost,
		      (unsigned long long)res.live, (unsigned long long)res.collided);
	assert_int_equal(res.processes, 1);
	assert_false(res.guard_tripped);
	assert_true(res.sampled > 100);
	assert_true(res.calls >= n_allocs);
	assert_true(hot * 10 >= v[1] * 8);		   /* >= 80 % under alloc_hot */
	assert_true(cold > 0);
	double r = (double)v[1] / (double)total, ri = (double)v[3] / (double)live;
	assert_true(r >= 0.75 && r <= 1.25);
	assert_true(ri >= 0.75 && ri <= 1.25);
	pf_prof_window_free(w);
	pf_sampler_free(s);
}

static void test_guard(void **state)
{
	(void)state;
	struct pf_error err = {0};
	struct pf_sampler *s = pf_sampler_new(NULL, &err);
	assert_non_null(s);
	struct child c;
	spawn(&c, "0", "loop");
	uint32_t pid = (uint32_t)c.pid;
	struct pf_alloc_options o = {.max_calls_per_second = 2000};
	int rc = pf_sampler_alloc_start(s, &pid, 1, &o, &err);
	if (rc == -ENOTSUP) {
		finish(&c);
		pf_sampler_free(s);
		skip();
	}
	assert_int_equal(rc, 0);
	go(&c);
	uint64_t end = pf_mono_ms() + 2500;
	while (pf_mono_ms() < end)
		assert_true(pf_sampler_poll(s, 50) >= 0);
	struct pf_alloc_result res;
	struct pf_prof_window *w = pf_sampler_alloc_stop(s, &res, &err);
	assert_non_null(w);
	finish(&c);
	print_message("guard: %s (%llu calls)\n", res.note, (unsigned long long)res.calls);
	assert_true(res.guard_tripped);
	assert_true(res.guard_rate > 2000);
	assert_non_null(strstr(res.note, "detached"));
	pf_prof_window_free(w);
	pf_sampler_free(s);
}

/* The same through a capture slot of type alloc (what capture requests run): the profiling.alloc
 * defaults, a window of the four heap types, no note. */
static void test_capture_slot(void **state)
{
	(void)state;
	struct pf_error err = {0};
	struct pf_sampler *s = pf_sampler_new(NULL, &err);
	assert_non_null(s);
	struct pf_profcfg *cfg = ebpf_config("profiling:\n  alloc: {sample_bytes: 65536}\n");
	assert_int_equal(pf_sampler_set_config(s, cfg, &err), 0);
	struct child c;
	spawn(&c, "16777216", NULL);
	uint32_t pid = (uint32_t)c.pid;
	int rc = pf_sampler_capture_start(s, 2, PF_PROF_ALLOC, 99, &pid, 1, &err);
	if (rc == -ENOTSUP) {
		finish(&c);
		pf_profcfg_free(cfg);
		pf_sampler_free(s);
		skip();
	}
	assert_int_equal(rc, 0);
	assert_int_equal(pf_sampler_capture_start(s, 3, PF_PROF_ALLOC, 99, &pid, 1, &err), -EBUSY);
	go(&c);
	char line[160];
	report(s, &c, line, sizeof(line), 30000);
	assert_true(pf_sampler_poll(s, 20) >= 0);
	assert_true(pf_sampler_capture_samples(s, 2) > 50); /* ~18 MiB at 64 KiB */
	struct pf_prof_window *w = pf_sampler_capture_stop(s, 2, &err);
	assert_non_null(w);
	finish(&c);
	assert_int_equal(w->n_sample_types, 4);
	assert_string_equal(w->sample_types[1].type, "alloc_space");
	assert_int_equal(w->period, 65536);
	assert_true(pf_prof_window_samples(w) > 0);
	assert_string_equal(pf_sampler_capture_note(s, 2), "");
	pf_prof_window_free(w);
	pf_profcfg_free(cfg);
	pf_sampler_free(s);
}

static void test_no_allocator(void **state)
{
	(void)state;
	struct pf_error err = {0};
	struct pf_sampler *s = pf_sampler_new(NULL, &err);
	assert_non_null(s);
	uint32_t pid = 999999999u; /* no such process */
	int rc = pf_sampler_alloc_start(s, &pid, 1, NULL, &err);
	if (rc != -ENOTSUP) {
		assert_int_equal(rc, -ENOENT);
		assert_non_null(strstr(err.msg, "allocator"));
		assert_false(pf_sampler_alloc_running(s));
	}
	pf_sampler_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hot_cold),
		cmocka_unit_test(test_guard),
		cmocka_unit_test(test_capture_slot),
		cmocka_unit_test(test_no_allocator),
	};
	return EBPF_MAIN(tests, build_workload, g_dir);
}
