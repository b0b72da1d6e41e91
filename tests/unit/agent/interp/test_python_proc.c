/* test_python_proc.c — unit tests of agent/interp/python_proc.h on the interpreters present:
 * Debian's static /usr/bin/python3.11 (always: the CI machine has it), and the shared builds
 * of 3.9–3.13 when the machine has them (pyenv's). Each is started as a child, detected from
 * outside, its _PyRuntime, PyCode_Type and eval loop checked against its mappings, and then
 * walked from _PyRuntime through the thread list to the frames with the detected offsets: the
 * chain must name the script's functions with their lines (the offsets are right for the live
 * interpreter). Also: a deleted executable (found through map_files), versions refused with
 * the message health shows, a process without Python, a gone process, and the
 * _Py_DebugOffsets checks on crafted blocks. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "pychild.h"
#include "pywalk.h"
#include "python_code.h"
#include "python_proc.h"

/* Blocks in inner() (line 4) called from outer() (line 6) called at line 7. */
static const char script[] = "import sys, threading\n"
			     "def inner():\n"
			     "    print('ready', threading.get_ident(), flush=True)\n"
			     "    sys.stdin.readline()\n"
			     "def outer():\n"
			     "    inner()\n"
			     "outer()\n";

/* True when [addr, addr + len) lies in a mapping of pid whose path is path (or path
 * " (deleted)"; or, with path "", an anonymous one: a file's .bss) and, when perms is not
 * NULL, whose permissions start with it. */
static bool in_mapping(int pid, uint64_t addr, uint64_t len, const char *path, const char *perms)
{
	char name[64], line[1024];
	snprintf(name, sizeof(name), "/proc/%d/maps", pid);
	FILE *f = fopen(name, "r");
	assert_non_null(f);
	bool found = false;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long long s, e;
		char p[8];
		int at = 0;
		if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %n", &s, &e, p, &at) < 3 || !at)
			continue;
		line[strcspn(line, "\n")] = '\0';
		bool name_ok =
		    path[0] ? strncmp(line + at, path, strlen(path)) == 0 : line[at] == '\0';
		if (addr >= s && addr + len <= e && name_ok &&
		    (!perms || strncmp(p, perms, strlen(perms)) == 0))
			found = true;
	}
	fclose(f);
	return found;
}

/* Detects the child's interpreter; fails the test with detect's message when it cannot. */
static void detect(int pid, const char *what, struct pf_py_process *p)
{
	struct pf_error err = {0};
	int r = pf_py_detect(pid, NULL, p, &err);
	if (r < 0)
		fail_msg("%s: %d %s", what, r, err.msg);
}

/* Starts python with the script, detects it and walks its main thread. */
static void detect_and_walk(const char *python, unsigned minor, bool shared)
{
	struct pychild c;
	char line[256];
	assert_int_equal(pychild_start(&c, python, script), 0);
	assert_int_equal(pychild_line(&c, line, sizeof(line), 10000), 0);
	uint64_t ident = 0;
	assert_int_equal(sscanf(line, "ready %" SCNu64, &ident), 1);
	assert_int_equal(pychild_wait_read(&c, 10000), 0); /* on line 4, not still on 3 */

	struct pf_py_process p;
	detect(c.pid, python, &p);
	assert_int_equal(p.pid, c.pid);
	assert_int_equal(p.major, 3);
	assert_int_equal(p.minor, minor);
	assert_int_equal(p.shared, shared);
	assert_int_equal(p.offsets_source, minor >= 13 ? PF_PY_OFFSETS_DEBUG : PF_PY_OFFSETS_TABLE);
	assert_int_equal(p.off.version_hex >> 16, 0x300 | minor);
	/* _PyRuntime: in the file's data, or its .bss (zero-initialized before 3.11) */
	assert_true(in_mapping(c.pid, p.runtime_addr, 8, p.path, "rw") ||
		    (minor < 11 && in_mapping(c.pid, p.runtime_addr, 8, "", "rw")));
	assert_true(in_mapping(c.pid, p.code_type_addr, 8, p.path, NULL));
	assert_true(p.n_eval >= 1);
	for (unsigned i = 0; i < p.n_eval; i++) {
		assert_true(p.eval[i].end > p.eval[i].start);
		assert_true(in_mapping(c.pid, p.eval[i].start, p.eval[i].end - p.eval[i].start,
				       p.path, "r-x"));
		assert_true(pf_py_in_eval(&p, p.eval[i].start));
	}
	assert_false(pf_py_in_eval(&p, p.code_type_addr));
	if (minor >= 11)
		assert_non_null(strstr(p.version, "3."));

	struct pf_py_names *names = pf_py_names_new(&p, 0);
	assert_non_null(names);
	struct pywalk_frame fr[PYWALK_MAX];
	unsigned n = 0;
	int r = pywalk(&p, names, ident, fr, &n);
	if (r < 0)
		fail_msg("%s: walk %d", python, r);
	assert_int_equal(n, 3);
	assert_string_equal(fr[0].f.name, "inner");
	assert_string_equal(fr[1].f.name, "outer");
	assert_string_equal(fr[2].f.name, "<module>");
	for (unsigned i = 0; i < n; i++)
		assert_string_equal(fr[i].f.filename, "<string>");
	assert_int_equal(fr[0].f.first_line, 2);
	assert_int_equal(fr[0].f.line, 4);
	assert_int_equal(fr[1].f.first_line, 5);
	assert_int_equal(fr[1].f.line, 6);
	assert_int_equal(fr[2].f.line, 7);
	/* the walk again: every frame from the cache, re-validated */
	struct pf_py_names_stats st;
	pf_py_names_stats(names, &st);
	assert_int_equal(st.misses, 3);
	assert_int_equal(pywalk(&p, names, ident, fr, &n), 0);
	pf_py_names_stats(names, &st);
	assert_int_equal(st.hits, 3);
	assert_int_equal(st.stale, 0);
	assert_true(pf_py_names_bytes(names) > 0);
	/* a thread that does not exist */
	assert_int_equal(pywalk(&p, names, ident + 8, fr, &n), -ENOENT);
	pf_py_names_free(names);
	pychild_stop(&c);
	print_message("python %s (%s, %s): detected and walked\n", p.version, p.path,
		      shared ? "shared" : "static");
}

static void test_debian_311(void **state)
{
	(void)state;
	if (access(PYCHILD_DEBIAN_311, X_OK) != 0)
		skip();
	detect_and_walk(PYCHILD_DEBIAN_311, 11, false);
}

static void test_other_builds(void **state)
{
	(void)state;
	unsigned ran = 0;
	for (unsigned minor = 9; minor <= 13; minor++) {
		const char *py = pychild_find(minor);
		if (!py)
			continue;
		detect_and_walk(py, minor, true);
		ran++;
	}
	if (!ran)
		skip();
}

/* Two threads blocked in different functions: each found in the thread list by its
 * thread_id (native_thread_id where the version has it is the kernel's tid), each with its own
 * chain. */
static const char threads_script[] =
    "import os, sys, threading\n"
    "def say(who):\n" /* one write(2): the two threads' lines never interleave */
    "    os.write(1, ('%s %d %d\\n' % (who, threading.get_ident(),\n"
    "                                  threading.get_native_id())).encode())\n"
    "ev = threading.Event()\n"
    "def worker():\n"
    "    say('worker')\n"
    "    ev.wait()\n"
    "t = threading.Thread(target=worker)\n"
    "t.start()\n"
    "def waiter():\n"
    "    say('main')\n"
    "    sys.stdin.readline()\n"
    "waiter()\n";

static void walk_threads(const char *python, unsigned minor)
{
	struct pychild c;
	char line[256], who[16];
	uint64_t ident[2] = {0}, tid[2] = {0};
	assert_int_equal(pychild_start(&c, python, threads_script), 0);
	for (int i = 0; i < 2; i++) {
		uint64_t id, nid;
		assert_int_equal(pychild_line(&c, line, sizeof(line), 10000), 0);
		assert_int_equal(sscanf(line, "%15s %" SCNu64 " %" SCNu64, who, &id, &nid), 3);
		int k = strcmp(who, "main") == 0 ? 0 : 1;
		ident[k] = id;
		tid[k] = nid;
	}
	struct pf_py_process p;
	detect(c.pid, python, &p);
	assert_int_equal(p.minor, minor);
	assert_int_equal(tid[0], (uint64_t)c.pid);
	struct pf_py_names *names = pf_py_names_new(&p, 0);
	static const char *const leaf[2] = {"waiter", "worker"};
	for (int k = 0; k < 2; k++) {
		struct pywalk_frame fr[PYWALK_MAX];
		unsigned n = 0;
		assert_int_equal(pywalk(&p, names, ident[k], fr, &n), 0);
		assert_true(n >= 2);
		/* a thread may still be in say(), the worker waits inside threading.py's
		 * Event.wait: its own function is in the chain */
		bool found = false;
		for (unsigned i = 0; i < n; i++)
			found |= strcmp(fr[i].f.name, leaf[k]) == 0;
		if (!found)
			fail_msg("%s: thread %d: no %s in its chain (leaf %s)", python, k, leaf[k],
				 fr[0].f.name);
	}
	/* native_thread_id (3.11+): the kernel's tid of each thread in the list */
	if (p.off.tstate_native_thread_id != PF_PY_NONE) {
		uint64_t interp, ts, v, seen = 0;
		assert_int_equal(pf_py_read_mem(c.pid,
						p.runtime_addr + p.off.runtime_interpreters_head,
						&interp, 8),
				 0);
		assert_int_equal(pf_py_read_mem(c.pid, interp + p.off.interp_threads_head, &ts, 8),
				 0);
		for (int i = 0; ts && i < 16; i++) {
			assert_int_equal(
			    pf_py_read_mem(c.pid, ts + p.off.tstate_native_thread_id, &v, 8), 0);
			seen |= (v == tid[0]) | (v == tid[1]) << 1;
			assert_int_equal(pf_py_read_mem(c.pid, ts + p.off.tstate_next, &ts, 8), 0);
		}
		assert_int_equal(seen, 3);
	}
	pf_py_names_free(names);
	pychild_stop(&c);
}

static void test_threads(void **state)
{
	(void)state;
	unsigned ran = 0;
	if (access(PYCHILD_DEBIAN_311, X_OK) == 0 && ++ran)
		walk_threads(PYCHILD_DEBIAN_311, 11);
	for (unsigned minor = 9; minor <= 13; minor++) {
		const char *py = pychild_find(minor);
		if (py && ++ran)
			walk_threads(py, minor);
	}
	if (!ran)
		skip();
}

/* Versions before 3.9 are refused with the message the agent's health shows. */
static void test_unsupported(void **state)
{
	(void)state;
	unsigned ran = 0;
	for (unsigned minor = 7; minor <= 8; minor++) {
		const char *py = pychild_find(minor);
		if (!py)
			continue;
		struct pychild c;
		char line[256], want[64];
		assert_int_equal(
		    pychild_start(&c, py, "import sys\nprint('ready 0')\nsys.stdin.readline()\n"),
		    0);
		assert_int_equal(pychild_line(&c, line, sizeof(line), 10000), 0);
		struct pf_py_process p;
		struct pf_error err = {0};
		assert_int_equal(pf_py_detect(c.pid, NULL, &p, &err), -ENOTSUP);
		snprintf(want, sizeof(want), "python: 3.%u unsupported", minor);
		assert_string_equal(err.msg, want);
		pychild_stop(&c);
		ran++;
	}
	if (!ran)
		skip();
}

/* Copies Debian's python3.11 to a new file named by the mkstemp template path. */
static void copy_debian_python(char *path)
{
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "cp %s %s && chmod 755 %s", PYCHILD_DEBIAN_311, path, path);
	assert_int_equal(system(cmd), 0);
}

/* An executable deleted after it started: its path no longer opens, map_files does. */
static void test_deleted_executable(void **state)
{
	(void)state;
	if (access(PYCHILD_DEBIAN_311, X_OK) != 0)
		skip();
	char path[] = "/tmp/pf-py-deleted-XXXXXX";
	copy_debian_python(path);
	struct pychild c;
	char line[256];
	assert_int_equal(pychild_start(&c, path, script), 0);
	assert_int_equal(pychild_line(&c, line, sizeof(line), 10000), 0);
	unlink(path);
	struct pf_py_process p;
	detect(c.pid, path, &p);
	assert_int_equal(p.minor, 11);
	assert_non_null(strstr(p.path, "(deleted)"));
	pychild_stop(&c);
}

/* A process in another mount namespace runs an interpreter from a path the host does not
 * have (a tmpfs mounted only in its namespace): found through /proc/PID/root. */
static void test_other_mount_namespace(void **state)
{
	(void)state;
	if (access(PYCHILD_DEBIAN_311, X_OK) != 0 || access("/usr/bin/unshare", X_OK) != 0)
		skip();
	char dir[] = "/tmp/pf-py-ns-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char sh[1024];
	snprintf(
	    sh, sizeof(sh),
	    "mount -t tmpfs pf-py %s && cp %s %s/python3.11 && exec %s/python3.11 -u -c \"$0\"",
	    dir, PYCHILD_DEBIAN_311, dir, dir);
	char *const argv[] = {
	    "/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", sh,
	    (char *)script,	NULL};
	struct pychild c;
	char line[256];
	assert_int_equal(pychild_exec(&c, argv), 0);
	if (pychild_line(&c, line, sizeof(line), 10000) < 0) {
		pychild_stop(&c); /* no CAP_SYS_ADMIN here: unshare refused */
		rmdir(dir);
		skip();
	}
	char inside[sizeof(dir) + 16];
	snprintf(inside, sizeof(inside), "%s/python3.11", dir);
	assert_int_not_equal(access(inside, F_OK), 0); /* not on the host */
	struct pf_py_process p;
	detect(c.pid, inside, &p);
	assert_int_equal(p.minor, 11);
	assert_string_equal(p.path, inside);
	struct pf_py_names *names = pf_py_names_new(&p, 0);
	struct pywalk_frame fr[PYWALK_MAX];
	unsigned n = 0;
	uint64_t ident = 0;
	assert_int_equal(sscanf(line, "ready %" SCNu64, &ident), 1);
	assert_int_equal(pywalk(&p, names, ident, fr, &n), 0);
	assert_int_equal(n, 3);
	assert_string_equal(fr[0].f.name, "inner");
	pf_py_names_free(names);
	pychild_stop(&c);
	rmdir(dir);
}

static void test_not_python(void **state)
{
	(void)state;
	struct pf_py_process p;
	struct pf_error err = {0};
	assert_int_equal(pf_py_detect(getpid(), NULL, &p, &err), -ENOENT);
	assert_int_equal(err.code, 0);
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_int_equal(pf_py_detect(pid, NULL, &p, &err), -ESRCH);
}

/* ---- _Py_DebugOffsets ---- */

/* A file is read once: a second process of the same executable (not an interpreter, or an
 * interpreter at another load address) is answered from the cache, the per-process parts
 * still its own; a file modified in place is read again. */
static void test_file_cache(void **state)
{
	(void)state;
	struct pf_py_process p;
	struct pf_py_file_cache_stats a, b;
	pf_py_file_cache_stats(&a);
	assert_int_equal(pf_py_detect(getpid(), NULL, &p, NULL), -ENOENT);
	assert_int_equal(pf_py_detect(getpid(), NULL, &p, NULL), -ENOENT);
	pf_py_file_cache_stats(&b);
	assert_true(b.reads <= a.reads + 1 && b.hits >= a.hits + 1);
	if (access(PYCHILD_DEBIAN_311, X_OK) != 0)
		skip();
	char path[] = "/tmp/pf-py-cache-XXXXXX";
	copy_debian_python(path);
	for (unsigned round = 0; round < 3; round++) {
		if (round == 2) {
			struct timespec t[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = 1000000000}};
			assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
		}
		struct pychild c;
		char line[256];
		assert_int_equal(pychild_start(&c, path, script), 0);
		assert_int_equal(pychild_line(&c, line, sizeof(line), 10000), 0);
		pf_py_file_cache_stats(&a);
		detect(c.pid, path, &p);
		pf_py_file_cache_stats(&b);
		assert_int_equal(p.minor, 11);
		assert_true(in_mapping(c.pid, p.eval[0].start, 1, path, "r-xp"));
		/* round 0 reads the new file, round 1 finds it, round 2 reads it again */
		assert_int_equal(b.reads - a.reads, round == 1 ? 0 : 1);
		pychild_stop(&c);
	}
	unlink(path);
}

static void debug_block(uint64_t d[73])
{
	memset(d, 0, 73 * 8);
	memcpy(d, "xdebugpy", 8);
	d[1] = 0x030d00f0;
	uint64_t v[] = {
	    [3] = 1000, 30,   632,						/* runtime */
	    [6] = 8000, 7000, 7264, 7344, 0,   0,   0,	 0,  0,	  0,   0, 0, 0, /* interp */
	    [19] = 300, 0,    8,    16,	  72,  152, 160, 0,  0,			/* tstate */
	    [28] = 80,	8,    0,    56,	  72,  70,				/* frame */
	    [34] = 208, 112,  120,  128,  136, 68,  52,	 96, 104, 200,		/* code */
	    [44] = 16,	8,							/* pyobject */
	    [46] = 400, 24,   88,   168,					/* type */
	    [50] = 32,	24,   16,						/* tuple */
	    [53] = 40,	24,   16,						/* list */
	    [56] = 48,	32,   40,						/* dict */
	    [59] = 24,	16,							/* float */
	    [61] = 32,	16,   24,						/* long */
	    [64] = 40,	16,   32,						/* bytes */
	    [67] = 64,	32,   16,   40,						/* unicode */
	    [71] = 400, 8,							/* gc */
	};
	for (unsigned i = 3; i < 73; i++)
		d[i] = v[i];
}

static void test_debug_offsets(void **state)
{
	(void)state;
	uint64_t d[73];
	struct pf_py_offsets o;
	struct pf_error err = {0};
	debug_block(d);
	assert_int_equal(pf_py_offsets_from_debug((uint8_t *)d, sizeof(d), 3, 13, &o, &err), 0);
	assert_int_equal(o.frame_kind, PF_PY_FRAMES_INTERP);
	assert_int_equal(o.runtime_interpreters_head, 632);
	assert_int_equal(o.interp_threads_head, 7344);
	assert_int_equal(o.tstate_next, 8);
	assert_int_equal(o.tstate_frame, 72);
	assert_int_equal(o.tstate_thread_id, 152);
	assert_int_equal(o.tstate_native_thread_id, 160);
	assert_int_equal(o.cframe_current_frame, PF_PY_NONE);
	assert_int_equal(o.iframe_previous, 8);
	assert_int_equal(o.iframe_code, 0);
	assert_int_equal(o.iframe_instr, 56);
	assert_int_equal(o.iframe_owner, 70);
	assert_int_equal(o.owner_cstack, 3);
	assert_int_equal(o.code_basicsize, 208);
	assert_int_equal(o.code_code_adaptive, 200);
	assert_int_equal(o.code_qualname, 128);
	assert_int_equal(o.code_firstlineno, 68);
	assert_int_equal(o.unicode_ascii_size, 40);
	assert_int_equal(o.unicode_compact_size, 56);
	assert_int_equal(o.bytes_sval, 32);

	/* refusals: short, cookie, version, free-threaded, an offset past its struct, 0 size */
	assert_int_equal(pf_py_offsets_from_debug((uint8_t *)d, 100, 3, 13, &o, NULL), -ENOTSUP);
	memcpy(d, "ydebugpy", 8);
	assert_int_equal(pf_py_offsets_from_debug((uint8_t *)d, sizeof(d), 3, 13, &o, NULL),
			 -ENOTSUP);
	debug_block(d);
	pf_error_clear(&err);
	assert_int_equal(pf_py_offsets_from_debug((uint8_t *)d, sizeof(d), 3, 12, &o, &err),
			 -ENOTSUP);
	assert_non_null(strstr(err.msg, "does not match"));
	d[1] = 0x030e00f0;
	pf_error_clear(&err);
	assert_int_equal(pf_py_offsets_from_debug((uint8_t *)d, sizeof(d), 3, 14, &o, &err),
			 -ENOTSUP);
	assert_string_equal(err.msg, "python: 3.14 unsupported");
	debug_block(d);
	d[2] = 1;
	assert_int_equal(pf_py_offsets_from_debug((uint8_t *)d, sizeof(d), 3, 13, &o, NULL),
			 -ENOTSUP);
	debug_block(d);
	d[19 + 5] = 300; /* thread_id at the struct's size */
	assert_int_equal(pf_py_offsets_from_debug((uint8_t *)d, sizeof(d), 3, 13, &o, NULL),
			 -ENOTSUP);
	debug_block(d);
	d[34] = 0;
	assert_int_equal(pf_py_offsets_from_debug((uint8_t *)d, sizeof(d), 3, 13, &o, NULL),
			 -ENOTSUP);
}

static void test_tables(void **state)
{
	(void)state;
	for (unsigned m = 9; m <= 12; m++) {
		const struct pf_py_offsets *t = pf_py_offsets_table(m);
		assert_non_null(t);
		assert_int_equal(t->version_hex >> 16, 0x300 | m);
		assert_int_equal(t->frame_kind,
				 m <= 10 ? PF_PY_FRAMES_OBJECT : PF_PY_FRAMES_INTERP);
		assert_true(t->code_basicsize > t->code_filename);
	}
	assert_null(pf_py_offsets_table(8));
	assert_null(pf_py_offsets_table(13));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_debian_311),
	    cmocka_unit_test(test_other_builds),
	    cmocka_unit_test(test_threads),
	    cmocka_unit_test(test_unsupported),
	    cmocka_unit_test(test_deleted_executable),
	    cmocka_unit_test(test_other_mount_namespace),
	    cmocka_unit_test(test_not_python),
	    cmocka_unit_test(test_file_cache),
	    cmocka_unit_test(test_debug_offsets),
	    cmocka_unit_test(test_tables),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
