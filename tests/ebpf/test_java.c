/* test_java.c — eBPF tests of Java frames (hotspot_unwind.h, the kernel's jvm_frame) on the
 * machine's JDK ($PF_JAVA_HOME, else Debian's OpenJDK 17), with a workload compiled here
 * (no -XX:+PreserveFramePointer):
 *   Hot.java  three busy threads (given its LIB argument). main -> outer -> middle -> hot,
 *             hot a short loop middle calls 200,000 times a round, which C2 inlines into
 *             middle after warm-up; slowLoop -> slow, kept in the interpreter
 *             (-XX:CompileCommand=exclude); and jniLoop -> spin, a native method of
 *             libspin.so (hot_spin.c: Java_Hot_spin -> c_inner). The JVM starts after the
 *             sampler.
 * Of a 299 Hz capture after warm-up:
 *  - >= 90% of the hot thread's samples carry a frame typed jvm named Hot.<method> with file
 *    Hot.java, its descriptor in system_name; >= 80% of those are in Hot.hot at one of its
 *    lines and >= 50% in a frame with inlined methods (Hot.hot:4 <- Hot.middle:7); and >= 90%
 *    carry the whole chain Hot.middle <- Hot.outer <- Hot.main with native frames below it
 *    (the compiled frames walked by their frame sizes, the interpreted main by its frame);
 *  - >= 80% of the interpreted thread's carry Hot.slow <- Hot.slowLoop, at lines of their
 *    bodies (the interpreter's frames: Method* and bytecode index);
 *  - >= 80% of the JNI thread's carry c_inner <- Java_Hot_spin <- Hot.jniLoop in that order;
 *  - the sampler's java status counts the JVM, walked in the kernel.
 * With profiling.interpreters.java off, no frame is typed jvm.
 * Exit 77 when the kernel refuses BPF or perf events or there is no JDK. */
#include <fcntl.h>
#include <glob.h>
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

static char g_dir[64] = "/tmp/pf-ebpf-java-XXXXXX";
static char g_java[300], g_javac[300];

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static pid_t spawn_java(unsigned seconds)
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
		char lib[128];
		snprintf(lib, sizeof(lib), "%s/libspin.so", g_dir);
		execl(g_java, g_java, "-Xmx64m", "-XX:CompileCommand=quiet",
		      "-XX:CompileCommand=exclude,Hot.slow",
		      "-XX:CompileCommand=exclude,Hot.slowLoop", "-cp", g_dir, "Hot", arg, lib,
		      (char *)NULL);
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
	for (uint32_t j = 0; j < st->n_frames && j < 24; j++) {
		const struct pf_prof_frame *f = &p->frames[st->frames[j]];
		print_message(" %.48s[%s]", f->function ? f->function : "?",
			      pf_frame_kind_name(f->kind));
	}
	print_message("\n");
}

/* A frame of st typed jvm and named Hot.<method> in Hot.java. */
static const struct pf_prof_frame *hot_frame(const struct pf_prof_process *p,
					     const struct pf_prof_stack *st)
{
	for (uint32_t j = 0; j < st->n_frames; j++) {
		const struct pf_prof_frame *f = &p->frames[st->frames[j]];
		if (f->kind == PF_FRAME_JVM && f->function && !strncmp(f->function, "Hot.", 4) &&
		    f->file && !strcmp(f->file, "Hot.java"))
			return f;
	}
	return NULL;
}

/* st's frames leaf first, each frame's inlined methods before it: their functions into
 * fn[0, max) and their frames' kinds and lines into kind and line. How many. */
#define FLAT_MAX 256
static size_t flatten(const struct pf_prof_process *p, const struct pf_prof_stack *st,
		      const char **fn, int *kind, uint32_t *line)
{
	size_t n = 0;
	for (uint32_t j = 0; j < st->n_frames; j++) {
		const struct pf_prof_frame *f = &p->frames[st->frames[j]];
		for (uint32_t i = 0; i <= f->n_inlined && n < FLAT_MAX; i++, n++) {
			bool own = i == f->n_inlined;
			fn[n] = own ? f->function : f->inlined[i].function;
			line[n] = own ? f->line : f->inlined[i].line;
			kind[n] = f->kind;
			if (!fn[n])
				fn[n] = "?";
		}
	}
	return n;
}

/* The first index at or after from of a frame named name (of kind k, -1: any), -1 none. */
static int find(const char **fn, const int *kind, size_t n, const char *name, int k, int from)
{
	for (size_t i = (size_t)(from < 0 ? 0 : from); i < n; i++)
		if (!strcmp(fn[i], name) && (k < 0 || kind[i] == k))
			return (int)i;
	return -1;
}

/* The index of the last of names[0, k) when they appear in that order (leaf to root), each a
 * frame of kind kinds[i]; -1 when they do not. */
static int in_order(const char **fn, const int *kind, size_t n, const char *const *names,
		    const int *kinds, size_t k)
{
	int at = -1;
	for (size_t i = 0; i < k; i++)
		if ((at = find(fn, kind, n, names[i], kinds[i], at + 1)) < 0)
			return -1;
	return at;
}

/* A sampler, then a JVM started under it, warmed up for 3 s (the tables read, C2), then a
 * 299 Hz capture of it for ms; java sets profiling.interpreters.java. The JVM is killed after;
 * the java status line into status. The warm-up prints how long after the JVM's start the
 * first compiled Hot method was named. */
static struct pf_prof_window *capture(uint64_t ms, bool java, pid_t *jpid, char *status, size_t cap)
{
	struct pf_error err = {0};
	char cache[96];
	snprintf(cache, sizeof(cache), "%s/unwind-cache", g_dir);
	struct pf_sampler_options o = {.unwind_cache_dir = cache};
	struct pf_sampler *s = pf_sampler_new(&o, &err);
	if (!s)
		fail_msg("sampler: %s", err.msg);
	pid_t pid = spawn_java(12);
	struct pf_profcfg *cfg = ebpf_config(
	    "profiling:\n  sampling: {frequency_hz: 99, duration_seconds: 30}\n"
	    "  interpreters: {java: %s}\n"
	    "  filters:\n    include: [{key: process.pid, match: strict, value: \"%d\"}]\n",
	    java ? "true" : "false", (int)pid);
	assert_int_equal(pf_sampler_set_config(s, cfg, &err), 0);
	/* warm-up in windows of 250 ms: the first that names a compiled Hot method tells how
	 * long after the JVM's start its frames got names */
	uint64_t t0 = now_ms(), named_ms = 0;
	while (now_ms() < t0 + 3000) {
		poll_for(s, 250);
		struct pf_prof_window *ww = pf_sampler_close_window(s, &err);
		const struct pf_prof_process *wp = proc_of(ww, pid);
		for (size_t k = 0; !named_ms && wp && k < wp->n_samples; k++)
			if (hot_frame(wp, &wp->stacks[wp->samples[k].stack]))
				named_ms = now_ms() - t0;
		pf_prof_window_free(ww);
	}
	if (java)
		print_message("  from the JVM's start to its first named compiled frame: %lu ms\n",
			      (unsigned long)named_ms);
	uint32_t pids[1] = {(uint32_t)pid};
	assert_int_equal(pf_sampler_capture_start(s, 0, PF_PROF_CPU, 299, pids, 1, &err), 0);
	poll_for(s, ms);
	struct pf_prof_window *w = pf_sampler_capture_stop(s, 0, &err);
	if (!w)
		fail_msg("capture: %s", err.msg);
	struct pf_sampler_stats st;
	assert_int_equal(pf_sampler_stats(s, &st), 0);
	pf_sampler_java_status(&st, status, cap);
	print_message("  %s\n", status);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	pf_profcfg_free(cfg);
	pf_sampler_free(s);
	*jpid = pid;
	return w;
}

enum { T_HOT, T_INTERP, T_JNI, T_N };
static const char *const thread_mark[T_N] = {"Hot.middle", "Hot.slow", "Java_Hot_spin"};

/* The thread of p most of whose samples carry thread_mark[t]. */
static uint32_t thread_of(const struct pf_prof_process *p, int t)
{
	uint32_t best_tid = 0;
	uint64_t best = 0;
	for (size_t k = 0; k < p->n_samples; k++) {
		uint64_t n = 0;
		for (size_t j = 0; j < p->n_samples; j++) {
			const char *fn[FLAT_MAX];
			int kind[FLAT_MAX];
			uint32_t line[FLAT_MAX];
			if (p->samples[j].tid != p->samples[k].tid)
				continue;
			size_t m = flatten(p, &p->stacks[p->samples[j].stack], fn, kind, line);
			n +=
			    find(fn, kind, m, thread_mark[t], -1, 0) >= 0 ? p->samples[j].count : 0;
		}
		if (n > best) {
			best = n;
			best_tid = p->samples[k].tid;
		}
	}
	return best_tid;
}

static void test_named(void **state)
{
	(void)state;
	pid_t pid;
	char status[512];
	struct pf_prof_window *w = capture(3000, true, &pid, status, sizeof(status));
	const struct pf_prof_process *p = proc_of(w, pid);
	assert_non_null(p);
	uint32_t tid[T_N];
	for (int t = 0; t < T_N; t++)
		tid[t] = thread_of(p, t);
	uint64_t match = 0, total = 0, with_sig = 0, in_hot = 0, inlined = 0, chain = 0;
	uint64_t n_interp = 0, interp_ok = 0, n_jni = 0, jni_ok = 0;
	bool shown = false, printed[T_N] = {false};
	static const char *const hot_chain[] = {"Hot.middle", "Hot.outer", "Hot.main"};
	static const char *const interp_chain[] = {"Hot.slow", "Hot.slowLoop"};
	static const char *const jni_chain[] = {"c_inner", "Java_Hot_spin", "Hot.jniLoop"};
	static const int jvm3[] = {PF_FRAME_JVM, PF_FRAME_JVM, PF_FRAME_JVM};
	static const int jni_kinds[] = {PF_FRAME_NATIVE, PF_FRAME_NATIVE, PF_FRAME_JVM};
	for (size_t k = 0; k < p->n_samples; k++) {
		const struct pf_prof_sample *sm = &p->samples[k];
		const struct pf_prof_stack *st = &p->stacks[sm->stack];
		const char *fn[FLAT_MAX];
		int kind[FLAT_MAX];
		uint32_t line[FLAT_MAX];
		size_t m = flatten(p, st, fn, kind, line);
		bool ok = false;
		int t = -1;
		if (sm->tid == tid[T_INTERP]) {
			t = T_INTERP;
			int at = in_order(fn, kind, m, interp_chain, jvm3, 2);
			int slow = find(fn, kind, m, "Hot.slow", PF_FRAME_JVM, 0);
			ok = at >= 0 && line[slow] >= 21 && line[slow] <= 23 && line[at] == 27;
			n_interp += sm->count;
			interp_ok += ok ? sm->count : 0;
		} else if (sm->tid == tid[T_JNI]) {
			t = T_JNI;
			ok = in_order(fn, kind, m, jni_chain, jni_kinds, 3) >= 0;
			n_jni += sm->count;
			jni_ok += ok ? sm->count : 0;
		} else if (sm->tid == tid[T_HOT]) {
			t = T_HOT;
			int at = in_order(fn, kind, m, hot_chain, jvm3, 3);
			ok = at >= 0 && (size_t)at + 1 < m && kind[m - 1] == PF_FRAME_NATIVE;
			chain += ok ? sm->count : 0;
			const struct pf_prof_frame *f = hot_frame(p, st);
			total += sm->count;
			if (f) {
				match += sm->count;
				/* the innermost method of the frame: hot itself, or inlined into
				 * its callers */
				const char *inner =
				    f->n_inlined ? f->inlined[0].function : f->function;
				uint32_t ln = f->n_inlined ? f->inlined[0].line : f->line;
				if (inner && !strcmp(inner, "Hot.hot") && ln >= 3 && ln <= 5)
					in_hot += sm->count;
				inlined += f->n_inlined ? sm->count : 0;
				if (!shown && f->n_inlined) {
					shown = true;
					print_message("  a compiled frame:");
					for (uint32_t i = 0; i < f->n_inlined; i++)
						print_message(" %s:%u <-", f->inlined[i].function,
							      f->inlined[i].line);
					print_message(" %s:%u\n", f->function, f->line);
				}
				with_sig += f->system_name && strstr(f->system_name, "(J)J")
						? sm->count
						: 0;
			}
		}
		if (t >= 0 && !ok && !printed[t]) {
			printed[t] = true;
			print_message("  %s thread, a stack without its chain:\n",
				      t == T_HOT      ? "hot"
				      : t == T_INTERP ? "interpreted"
						      : "JNI");
			print_stack(p, st);
		}
	}
	print_message("Hot.java: %lu of %lu samples of the hot thread carry a named Hot frame, "
		      "%lu with the descriptor, %lu the whole chain to main and native below\n",
		      (unsigned long)match, (unsigned long)total, (unsigned long)with_sig,
		      (unsigned long)chain);
	assert_true(total >= 200);
	assert_true(match * 100 >= total * 90);
	assert_true(with_sig * 100 >= match * 50); /* hot, middle and outer are (J)J */
	print_message("Hot.java: %lu of them in Hot.hot (lines 3-5), %lu in a frame with inlined "
		      "methods\n",
		      (unsigned long)in_hot, (unsigned long)inlined);
	assert_true(in_hot * 100 >= match * 80);
	assert_true(inlined * 100 >= match * 50); /* C2 inlines hot into middle */
	assert_true(chain * 100 >= total * 90);
	print_message("Hot.java: interpreted thread %lu of %lu samples in Hot.slow <- "
		      "Hot.slowLoop:27; JNI thread %lu of %lu in c_inner <- Java_Hot_spin <- "
		      "Hot.jniLoop\n",
		      (unsigned long)interp_ok, (unsigned long)n_interp, (unsigned long)jni_ok,
		      (unsigned long)n_jni);
	assert_true(n_interp >= 100 && n_jni >= 100);
	assert_true(interp_ok * 100 >= n_interp * 80);
	assert_true(jni_ok * 100 >= n_jni * 80);
	assert_non_null(strstr(status, "java: 1 JVMs (1 walked in the kernel)"));
	pf_prof_window_free(w);
}

static void test_off(void **state)
{
	(void)state;
	pid_t pid;
	char status[512];
	struct pf_prof_window *w = capture(1000, false, &pid, status, sizeof(status));
	const struct pf_prof_process *p = proc_of(w, pid);
	assert_non_null(p);
	for (size_t i = 0; i < p->n_frames; i++)
		assert_int_not_equal(p->frames[i].kind, PF_FRAME_JVM);
	assert_string_equal(status, "java: off");
	pf_prof_window_free(w);
}

/* Finds the JDK and compiles Hot.java and hot_spin.c into g_dir: 77 (skip) without a JDK. */
static int build(void)
{
	const char *home = getenv("PF_JAVA_HOME");
	glob_t g;
	char pattern[256];
	if (home && *home)
		snprintf(pattern, sizeof(pattern), "%s", home);
	else if (access("/usr/lib/jvm/java-17-openjdk-amd64/bin/javac", X_OK) == 0)
		snprintf(pattern, sizeof(pattern), "/usr/lib/jvm/java-17-openjdk-amd64");
	else if (glob("/usr/lib/jvm/*/bin/javac", 0, NULL, &g) == 0) {
		snprintf(pattern, sizeof(pattern), "%.*s", (int)(strlen(g.gl_pathv[0]) - 10),
			 g.gl_pathv[0]);
		globfree(&g);
	} else {
		printf("SKIP: no JDK (javac) under /usr/lib/jvm\n");
		exit(77);
	}
	snprintf(g_java, sizeof(g_java), "%s/bin/java", pattern);
	snprintf(g_javac, sizeof(g_javac), "%s/bin/javac", pattern);
	if (access(g_java, X_OK) != 0 || access(g_javac, X_OK) != 0) {
		printf("SKIP: %s has no java/javac\n", pattern);
		exit(77);
	}
	if (!mkdtemp(g_dir))
		return -1;
	const char *root = getenv("PF_SOURCE_DIR");
	if (!root)
		root = ".";
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "%s -d %s %s/tests/ebpf/Hot.java", g_javac, g_dir, root);
	if (system(cmd) != 0)
		return -1;
	snprintf(cmd, sizeof(cmd),
		 "cc -O2 -shared -fPIC -I%s/include -I%s/include/linux -o %s/libspin.so "
		 "%s/tests/ebpf/hot_spin.c",
		 pattern, pattern, g_dir, root);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_named),
	    cmocka_unit_test(test_off),
	};
	return EBPF_MAIN(tests, build, g_dir);
}
