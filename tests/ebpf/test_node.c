/* test_node.c — eBPF tests of the kernel's V8 walk (cpu_sampler.bpf.c v8_frame, v8_unwind.h)
 * on the machine's `node` ($PF_NODE, else /usr/bin/node), with a workload written here:
 *   hot.js   main -> jsOuter -> jsHot, jsHot a long loop (TurboFan-compiled after warm-up, in
 *            JIT memory), jsOuter and main left to the interpreter (frames in the node file's
 *            embedded builtins). A capture of it, and the continuous window of the same time
 *            (the two sampling programs): >= 90% of its main thread's samples carry the
 *            JS frames jsHot, jsOuter, main in that order (leaf first), typed v8js, named with
 *            hot.js and jsHot's line; below them the native frames of node's own start
 *            (the walk handed back to the tables and reached _start).
 *   sort.js  jsSorter -> Array.prototype.sort (a builtin) -> jsCompare: jsCompare lies under
 *            jsSorter in the same stack.
 * With profiling.interpreters.nodejs off, no frame is typed v8js.
 * Exit 77 when the kernel refuses BPF or perf events or there is no node. */
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
#include "sampler/sampler_bpf.h"

#include "ebpf_util.h"

static char g_dir[64];
static const char *g_node = "/usr/bin/node";

/* Line numbers matter: jsHot starts on line 1. */
static const char hot_js[] = "function jsHot(n) {\n"
			     "  let x = 0;\n"
			     "  for (let i = 0; i < n; i++) x += (i * i) % 7;\n"
			     "  return x;\n"
			     "}\n"
			     "function jsOuter(end) {\n"
			     "  let t = 0;\n"
			     "  while (Date.now() < end) t += jsHot(20000000);\n"
			     "  return t;\n"
			     "}\n"
			     "function main() {\n"
			     "  return jsOuter(Date.now() + 1000 * Number(process.argv[2]));\n"
			     "}\n"
			     "main();\n";
#define HOT_LINE 1

static const char sort_js[] = "function jsCompare(a, b) {\n"
			      "  let s = 0;\n"
			      "  for (let i = 0; i < 200; i++) s += i & a;\n"
			      "  return (a - b) + (s & 0);\n"
			      "}\n"
			      "function jsSorter(end) {\n"
			      "  const data = [];\n"
			      "  for (let i = 0; i < 3000; i++) data.push((i * 7919) % 3001);\n"
			      "  while (Date.now() < end) data.slice().sort(jsCompare);\n"
			      "}\n"
			      "jsSorter(Date.now() + 1000 * Number(process.argv[2]));\n";

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void write_script(const char *name, const char *text, char *path, size_t cap)
{
	snprintf(path, cap, "%s/%s", g_dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
}

static pid_t spawn_node(const char *script, unsigned seconds)
{
	char arg[16];
	snprintf(arg, sizeof(arg), "%u", seconds);
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(g_node, g_node, script, arg, (char *)NULL);
		_exit(127);
	}
	assert_true(pid > 0);
	return pid;
}

static void poll_for(struct pf_sampler *s, uint64_t ms)
{
	uint64_t end = now_ms() + ms;
	while (now_ms() < end)
		assert_true(pf_sampler_poll(s, 50) >= 0);
}

/* A capture at 299 Hz of pid for ms, after 1.5 s of continuous sampling (detection, unwind
 * tables, TurboFan); nodejs sets profiling.interpreters.nodejs. The continuous window of the
 * same time (do_sample's records, 99 Hz) into *cont when not NULL. pid is killed after. */
static struct pf_prof_window *capture(pid_t pid, uint64_t ms, bool nodejs,
				      struct pf_prof_window **cont)
{
	struct pf_profcfg *cfg = ebpf_config(
		"profiling:\n  sampling: {frequency_hz: 99, duration_seconds: 30}\n"
		"  interpreters: {nodejs: %s}\n"
		"  filters:\n    include: [{key: process.pid, match: strict, value: \"%d\"}]\n",
		nodejs ? "true" : "false", (int)pid);
	struct pf_error err = {0};
	char cache[96];
	snprintf(cache, sizeof(cache), "%s/unwind-cache", g_dir);
	struct pf_sampler_options o = {.unwind_cache_dir = cache};
	struct pf_sampler *s = pf_sampler_new(&o, &err);
	if (!s)
		fail_msg("sampler: %s", err.msg);
	assert_int_equal(pf_sampler_set_config(s, cfg, &err), 0);
	poll_for(s, 1500);
	pf_prof_window_free(pf_sampler_close_window(s, &err));
	uint32_t pids[1] = {(uint32_t)pid};
	assert_int_equal(pf_sampler_capture_start(s, 0, PF_PROF_CPU, 299, pids, 1, &err), 0);
	poll_for(s, ms);
	struct pf_prof_window *w = pf_sampler_capture_stop(s, 0, &err);
	if (!w)
		fail_msg("capture: %s", err.msg);
	if (cont)
		assert_non_null(*cont = pf_sampler_close_window(s, &err));
	struct pf_sampler_stats st;
	assert_int_equal(pf_sampler_stats(s, &st), 0);
	char status[512];
	pf_sampler_nodejs_status(&st, status, sizeof(status));
	print_message("  %s\n", status);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	pf_profcfg_free(cfg);
	pf_sampler_free(s);
	return w;
}

static const struct pf_prof_process *proc_of(const struct pf_prof_window *w, pid_t pid)
{
	for (size_t i = 0; w && i < w->n_processes; i++)
		if (w->processes[i].pid == (uint32_t)pid)
			return &w->processes[i];
	return NULL;
}

static void print_stack(const struct pf_prof_process *p, const struct pf_prof_stack *st)
{
	print_message("  a stack (leaf first):");
	for (uint32_t j = 0; j < st->n_frames && j < 64; j++) {
		const struct pf_prof_frame *f = &p->frames[st->frames[j]];
		const char *fn = f->function ? f->function : "?";
		print_message(" %.40s[%s]", fn, pf_frame_kind_name(f->kind));
	}
	print_message("\n");
}

/* The position of the JS frame named name in st at or after from, or -1. */
static int js_at(const struct pf_prof_process *p, const struct pf_prof_stack *st, uint32_t from,
		 const char *name, const char *file, const struct pf_prof_frame **fr)
{
	for (uint32_t j = from; j < st->n_frames; j++) {
		const struct pf_prof_frame *f = &p->frames[st->frames[j]];
		if (f->kind == PF_FRAME_V8JS && f->function && !strcmp(f->function, name) &&
		    (!file || (f->file && !strcmp(f->file, file)))) {
			if (fr)
				*fr = f;
			return (int)j;
		}
	}
	return -1;
}

/* Of the main thread's samples of pid, those whose stacks hold the JS frames want[] in that
 * order (leaf first), of file; the first of them at position 0..2 when leaf is set. */
static void count_chain(const struct pf_prof_window *w, pid_t pid, const char *const *want,
			size_t n_want, const char *file, uint64_t *match, uint64_t *total)
{
	const struct pf_prof_process *p = proc_of(w, pid);
	bool printed = false;
	*match = *total = 0;
	for (size_t k = 0; p && k < p->n_samples; k++) {
		const struct pf_prof_sample *sm = &p->samples[k];
		if (sm->tid != (uint32_t)pid)
			continue;
		const struct pf_prof_stack *st = &p->stacks[sm->stack];
		int at = -1;
		bool ok = true;
		for (size_t i = 0; ok && i < n_want; i++) {
			const struct pf_prof_frame *f = NULL;
			at = js_at(p, st, (uint32_t)(at + 1), want[i], file, &f);
			ok = at >= 0;
			if (ok && i == 0 && !strcmp(want[0], "jsHot"))
				ok = f->line == HOT_LINE;
		}
		*total += sm->count;
		*match += ok ? sm->count : 0;
		if (!ok && !printed) {
			printed = true;
			print_stack(p, st);
		}
	}
}

static void test_chain(void **state)
{
	(void)state;
	char script[128];
	write_script("hot.js", hot_js, script, sizeof(script));
	pid_t pid = spawn_node(script, 10);
	struct pf_prof_window *cont = NULL;
	struct pf_prof_window *w = capture(pid, 3000, true, &cont);
	static const char *const want[] = {"jsHot", "jsOuter", "main"};
	uint64_t match, total;
	count_chain(cont, pid, want, 3, script, &match, &total);
	print_message("hot.js, continuous window: %lu of %lu main-thread samples carry the chain\n",
		      (unsigned long)match, (unsigned long)total);
	assert_true(total >= 50);
	assert_true(match * 100 >= total * 90);
	pf_prof_window_free(cont);
	count_chain(w, pid, want, 3, script, &match, &total);
	print_message("hot.js: %lu of %lu main-thread samples carry jsHot <- jsOuter <- main\n",
		      (unsigned long)match, (unsigned long)total);
	assert_true(total >= 200);
	assert_true(match * 100 >= total * 90);
	/* below the JS frames the walk went on into node's native frames down to _start */
	const struct pf_prof_process *p = proc_of(w, pid);
	uint64_t to_main = 0;
	for (size_t k = 0; k < p->n_samples; k++) {
		const struct pf_prof_stack *st = &p->stacks[p->samples[k].stack];
		int js = js_at(p, st, 0, "main", script, NULL);
		for (uint32_t j = js >= 0 ? (uint32_t)js : st->n_frames; j < st->n_frames; j++) {
			const struct pf_prof_frame *f = &p->frames[st->frames[j]];
			if (f->kind == PF_FRAME_NATIVE && f->function && !strcmp(f->function, "_start")) {
				to_main += p->samples[k].count;
				break;
			}
		}
	}
	print_message("hot.js: %lu samples reach native _start below the JS frames\n",
		      (unsigned long)to_main);
	if (to_main * 100 < match * 90 && p->n_samples)
		print_stack(p, &p->stacks[p->samples[0].stack]);
	assert_true(to_main * 100 >= match * 90);
	pf_prof_window_free(w);
}

static void test_builtin_between(void **state)
{
	(void)state;
	char script[128];
	write_script("sort.js", sort_js, script, sizeof(script));
	pid_t pid = spawn_node(script, 10);
	struct pf_prof_window *w = capture(pid, 3000, true, NULL);
	static const char *const want[] = {"jsCompare", "jsSorter"};
	uint64_t match, total;
	count_chain(w, pid, want, 2, script, &match, &total);
	print_message("sort.js: %lu of %lu main-thread samples carry jsCompare <- jsSorter\n",
		      (unsigned long)match, (unsigned long)total);
	assert_true(total >= 200);
	assert_true(match * 100 >= total * 50); /* the rest: in sort's own code */
	pf_prof_window_free(w);
}

static void test_off(void **state)
{
	(void)state;
	char script[128];
	write_script("hot.js", hot_js, script, sizeof(script));
	pid_t pid = spawn_node(script, 10);
	struct pf_prof_window *w = capture(pid, 1500, false, NULL);
	const struct pf_prof_process *p = proc_of(w, pid);
	assert_non_null(p);
	for (size_t i = 0; i < p->n_frames; i++)
		assert_int_not_equal(p->frames[i].kind, PF_FRAME_V8JS);
	pf_prof_window_free(w);
}

static int setup(void **state)
{
	(void)state;
	const char *env = getenv("PF_NODE");
	if (env && *env)
		g_node = env;
	if (access(g_node, X_OK) != 0) {
		fprintf(stderr, "%s missing: skipped\n", g_node);
		exit(77);
	}
	int code;
	struct pf_sampler *s = ebpf_probe(&code);
	if (!s)
		exit(code);
	pf_sampler_free(s);
	snprintf(g_dir, sizeof(g_dir), "/tmp/pf-ebpf-node-XXXXXX");
	return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
	return system(cmd) < 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_chain),
	    cmocka_unit_test(test_builtin_between),
	    cmocka_unit_test(test_off),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
