/* test_symbolize.c — agent/symbolize.h against test ELFs compiled here with -g: symbol and
 * file:line lookup (static and through a live PIE process's maps), GNU build id (checked
 * against binutils' readelf), unresolvable frames keeping address/mapping, a process that
 * exited after capture, kernel frames from /proc/kallsyms. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "symbolize.h"

#define TARGET_LINE 4
static const char target_src[] = "#include <stdio.h>\n"
				 "#include <unistd.h>\n"
				 "\n"
				 "__attribute__((noinline)) int pf_target_fn(int x) { return x * 3 + 1; }\n"
				 "int main(void)\n"
				 "{\n"
				 "\tprintf(\"%p\\n\", (void *)pf_target_fn);\n"
				 "\tfflush(stdout);\n"
				 "\tif (pf_target_fn(1) == 4)\n"
				 "\t\tpause();\n"
				 "\treturn 0;\n"
				 "}\n";

static char dir[64], src[128], pie[128], nopie[128], noid[128];

static void sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	assert_int_equal(system(cmd), 0);
}

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/pf-sym-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(src, sizeof(src), "%s/target.c", dir);
	snprintf(pie, sizeof(pie), "%s/target-pie", dir);
	snprintf(nopie, sizeof(nopie), "%s/target-nopie", dir);
	snprintf(noid, sizeof(noid), "%s/target-noid", dir);
	FILE *f = fopen(src, "w");
	if (!f)
		return -1;
	fwrite(target_src, 1, sizeof(target_src) - 1, f);
	fclose(f);
	sh("cc -g -O0 -fPIE -pie -Wl,--build-id=sha1 -o %s %s", pie, src);
	sh("cc -g -O0 -no-pie -Wl,--build-id=sha1 -o %s %s", nopie, src);
	sh("cc -O0 -no-pie -Wl,--build-id=none -o %s %s", noid, src);
	return 0;
}

static int teardown(void **state)
{
	sh("rm -rf %s", dir);
	return 0;
}

/* Starts path, reads the address it prints. */
static pid_t run_target(const char *path, uint64_t *addr)
{
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		execl(path, path, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	char buf[64] = {0};
	ssize_t n = 0, r;
	while (n < (ssize_t)sizeof(buf) - 1 && (r = read(p[0], buf + n, 1)) == 1 && buf[n] != '\n')
		n++;
	close(p[0]);
	*addr = strtoull(buf, NULL, 16);
	assert_true(*addr != 0);
	return pid;
}

static void stop(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void readelf_build_id(const char *path, char *out, size_t n)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "readelf -n %s | sed -n 's/.*Build ID: *//p'", path);
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	assert_non_null(fgets(out, (int)n, f));
	out[strcspn(out, "\n")] = 0;
	pclose(f);
}

static void test_build_id(void **state)
{
	char want[128], got[64];
	readelf_build_id(pie, want, sizeof(want));
	assert_int_equal(strlen(want), 40);
	int fd = open(pie, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pf_elf_build_id(fd, got, sizeof(got)), 0);
	close(fd);
	assert_string_equal(got, want);
	fd = open(noid, O_RDONLY);
	assert_int_equal(pf_elf_build_id(fd, got, sizeof(got)), -ENOENT);
	close(fd);
	fd = open(src, O_RDONLY); /* not ELF */
	assert_int_equal(pf_elf_build_id(fd, got, sizeof(got)), -EINVAL);
	close(fd);
}

static void test_static_lookup(void **state)
{
	uint64_t addr;
	pid_t pid = run_target(nopie, &addr); /* non-PIE: runtime address == ELF vaddr */
	stop(pid);
	struct pf_sym_info si;
	assert_int_equal(pf_elf_lookup(nopie, addr, &si), 0);
	assert_string_equal(si.function, "pf_target_fn");
	assert_int_equal(si.sym_addr, addr);
	assert_int_equal(si.line, TARGET_LINE);
	assert_non_null(strstr(si.file, "target.c"));
	/* inside the function still resolves to it */
	assert_int_equal(pf_elf_lookup(nopie, addr + 4, &si), 0);
	assert_string_equal(si.function, "pf_target_fn");
	assert_int_equal(pf_elf_lookup(nopie, 0x10, &si), -ENOENT);
	assert_int_equal(pf_elf_lookup("/nonexistent", 0x10, &si), -ENOENT);
	/* no DWARF: function from .symtab, no line */
	pid = run_target(noid, &addr);
	stop(pid);
	assert_int_equal(pf_elf_lookup(noid, addr, &si), 0);
	assert_string_equal(si.function, "pf_target_fn");
	assert_int_equal(si.line, 0);
}

static void test_process_resolve(void **state)
{
	uint64_t addr;
	char want[128];
	readelf_build_id(pie, want, sizeof(want));
	pid_t pid = run_target(pie, &addr);
	struct pf_symbolizer *sym = pf_symbolizer_new(NULL);
	assert_non_null(sym);
	assert_int_equal(pf_symbolizer_capture(sym, (uint32_t)pid), 0);
	assert_true(pf_symbolizer_has(sym, (uint32_t)pid));
	/* short-lived: the process is gone before its window closes */
	stop(pid);

	struct pf_prof_window *w = pf_prof_window_new();
	struct pf_prof_process p = {0};
	struct pf_prof_frame fr[2] = {{.address = addr + 1, .kind = PF_FRAME_NATIVE},
				      {.address = 0x10, .kind = PF_FRAME_NATIVE}};
	assert_int_equal(pf_symbolizer_resolve(sym, (uint32_t)pid, w, &p, fr, 2), 0);
	assert_non_null(fr[0].function);
	assert_string_equal(fr[0].function, "pf_target_fn");
	assert_int_equal(fr[0].line, TARGET_LINE);
	assert_non_null(strstr(fr[0].file, "target.c"));
	assert_true(fr[0].mapping >= 0);
	assert_int_equal(p.n_mappings, 1);
	const struct pf_prof_mapping *m = &p.mappings[fr[0].mapping];
	assert_string_equal(m->path, pie);
	assert_string_equal(m->build_id, want);
	assert_true(m->start <= addr && addr < m->limit);
	/* unresolvable: keeps its address, no mapping, no function */
	assert_int_equal(fr[1].mapping, -1);
	assert_null(fr[1].function);
	assert_int_equal(fr[1].address, 0x10);

	struct pf_symbolizer_stats st;
	pf_symbolizer_stats(sym, &st);
	assert_int_equal(st.frames_resolved, 1);
	assert_int_equal(st.frames_unresolved, 1);
	assert_true(st.elf_cached >= 1);
	assert_int_equal(st.cache_hits, 0);

	/* next window: DWARF dropped by trim, the same address comes from the result cache
	 * with the same function, file and line (strings copied into the new window) */
	pf_symbolizer_trim(sym);
	struct pf_prof_window *w2 = pf_prof_window_new();
	struct pf_prof_process p2 = {0};
	struct pf_prof_frame fr2 = {.address = addr + 1, .kind = PF_FRAME_NATIVE};
	pf_prof_window_free(w); /* the first window's strings must not be needed any more */
	w = NULL;
	assert_int_equal(pf_symbolizer_resolve(sym, (uint32_t)pid, w2, &p2, &fr2, 1), 0);
	assert_string_equal(fr2.function, "pf_target_fn");
	assert_int_equal(fr2.line, TARGET_LINE);
	assert_non_null(strstr(fr2.file, "target.c"));
	pf_symbolizer_stats(sym, &st);
	assert_int_equal(st.cache_hits, 1);
	pf_prof_window_free(w2);

	pf_symbolizer_forget(sym, (uint32_t)pid);
	assert_false(pf_symbolizer_has(sym, (uint32_t)pid));
	assert_int_equal(pf_symbolizer_capture(sym, (uint32_t)pid), -ENOENT);
	pf_prof_window_free(w);
	pf_symbolizer_free(sym);
}

static void test_cache_bound(void **state)
{
	struct pf_symbolizer_options o = {.max_elf_files = 1, .no_kernel = true};
	struct pf_symbolizer *sym = pf_symbolizer_new(&o);
	assert_int_equal(pf_symbolizer_capture(sym, (uint32_t)getpid()), 0);
	struct pf_symbolizer_stats st;
	pf_symbolizer_stats(sym, &st);
	assert_int_equal(st.elf_cached, 1);
	assert_true(st.elf_evicted >= 1); /* the test binary, libc, ld.so, ... */
	/* still resolves our own function by reopening through /proc/self/map_files */
	struct pf_prof_window *w = pf_prof_window_new();
	struct pf_prof_process p = {0};
	struct pf_prof_frame fr = {.address = (uint64_t)(uintptr_t)&test_cache_bound,
				   .kind = PF_FRAME_NATIVE};
	assert_int_equal(pf_symbolizer_resolve(sym, (uint32_t)getpid(), w, &p, &fr, 1), 0);
	assert_string_equal(fr.function, "test_cache_bound");
	pf_prof_window_free(w);
	pf_symbolizer_free(sym);
}

static void test_kernel(void **state)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	assert_non_null(f);
	char line[256], name[200] = "";
	uint64_t addr = 0;
	while (fgets(line, sizeof(line), f)) {
		char t;
		if (sscanf(line, "%" SCNx64 " %c %199s", &addr, &t, name) == 3 && addr &&
		    (t == 'T' || t == 't') && !strcmp(name, "schedule"))
			break;
		addr = 0;
	}
	fclose(f);
	if (!addr) {
		print_message("kallsyms hides addresses (kptr_restrict): kernel check skipped\n");
		return;
	}
	struct pf_symbolizer *sym = pf_symbolizer_new(NULL);
	struct pf_prof_window *w = pf_prof_window_new();
	struct pf_prof_process p = {0};
	struct pf_prof_frame fr = {.address = addr + 1, .kind = PF_FRAME_KERNEL};
	assert_int_equal(pf_symbolizer_resolve(sym, 1, w, &p, &fr, 1), 0);
	assert_string_equal(fr.function, "schedule");
	assert_int_equal(fr.mapping, 0);
	assert_string_equal(p.mappings[0].path, "[kernel.kallsyms]");
	pf_prof_window_free(w);
	pf_symbolizer_free(sym);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_build_id),
		cmocka_unit_test(test_static_lookup),
		cmocka_unit_test(test_process_resolve),
		cmocka_unit_test(test_cache_bound),
		cmocka_unit_test(test_kernel),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
