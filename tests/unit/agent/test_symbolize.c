/* test_symbolize.c — agent/symbolize/symbolize.h against test ELFs compiled here with -g: symbol and
 * file:line lookup (static and through a live PIE process's maps), GNU build id (checked
 * against binutils' readelf), unresolvable frames keeping address/mapping, a process that
 * exited after capture, kernel frames from /proc/kallsyms and through a kernel resolver
 * (batching, caching, unresolved results, fallback), compressed DWARF over the inflate bound,
 * a stripped file's symbols and lines from its separate debug file (by build id). */
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

static char dir[64], src[128], pie[128], nopie[128], noid[128], gz[128], stripped[128],
	dbgdir[128];

static void sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	assert_int_equal(system(cmd), 0);
}

static void readelf_build_id(const char *path, char *out, size_t n);

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
	/* compressed DWARF (zlib, SHF_COMPRESSED) */
	snprintf(gz, sizeof(gz), "%s/target-gz", dir);
	sh("cc -g -gz=zlib -O0 -no-pie -Wl,--build-id=sha1 -o %s %s", gz, src);
	/* stripped, with its debug file where a -dbgsym package puts it, under dbgdir */
	snprintf(stripped, sizeof(stripped), "%s/target-stripped", dir);
	snprintf(dbgdir, sizeof(dbgdir), "%s/debug", dir);
	char id[128];
	sh("cc -g -O0 -no-pie -Wl,--build-id=sha1 -o %s %s", stripped, src);
	readelf_build_id(stripped, id, sizeof(id));
	sh("mkdir -p %s/.build-id/%.2s && objcopy --only-keep-debug %s %s/.build-id/%.2s/%s.debug "
	   "&& strip --strip-all %s",
	   dbgdir, id, stripped, dbgdir, id, id + 2, stripped);
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

/* Resolves one native frame at addr of the non-PIE target at path (runtime == ELF address). */
static void resolve_nopie(struct pf_symbolizer *sym, const char *path, struct pf_prof_window *w,
			  struct pf_prof_frame *fr)
{
	uint64_t addr;
	pid_t pid = run_target(path, &addr);
	assert_int_equal(pf_symbolizer_capture(sym, (uint32_t)pid), 0);
	stop(pid);
	struct pf_prof_process p = {0};
	*fr = (struct pf_prof_frame){.address = addr + 1, .kind = PF_FRAME_NATIVE};
	assert_int_equal(pf_symbolizer_resolve(sym, (uint32_t)pid, w, &p, fr, 1), 0);
	pf_symbolizer_forget(sym, (uint32_t)pid);
}

static void test_compressed_dwarf_bound(void **state)
{
	struct pf_prof_window *w = pf_prof_window_new();
	struct pf_symbolizer_stats st;
	struct pf_prof_frame fr;
	/* under the (default, 1 MiB) bound: lines from the compressed DWARF */
	struct pf_symbolizer *sym = pf_symbolizer_new(NULL);
	resolve_nopie(sym, gz, w, &fr);
	assert_string_equal(fr.function, "pf_target_fn");
	assert_int_equal(fr.line, TARGET_LINE);
	pf_symbolizer_stats(sym, &st);
	assert_int_equal(st.dwarf_skipped, 0);
	pf_symbolizer_free(sym);
	/* over the bound: function name only, counted once */
	struct pf_symbolizer_options o = {.dwarf_max_inflate = 64};
	sym = pf_symbolizer_new(&o);
	resolve_nopie(sym, gz, w, &fr);
	assert_string_equal(fr.function, "pf_target_fn");
	assert_int_equal(fr.line, 0);
	assert_null(fr.file);
	pf_symbolizer_stats(sym, &st);
	assert_int_equal(st.dwarf_skipped, 1);
	/* uncompressed DWARF is never bounded (mapped, not inflated) */
	resolve_nopie(sym, nopie, w, &fr);
	assert_int_equal(fr.line, TARGET_LINE);
	pf_symbolizer_stats(sym, &st);
	assert_int_equal(st.dwarf_skipped, 1);
	pf_symbolizer_free(sym);
	pf_prof_window_free(w);
}

static void test_debug_file(void **state)
{
	struct pf_prof_window *w = pf_prof_window_new();
	struct pf_prof_frame fr;
	/* stripped of .symtab (pf_target_fn is not exported): nothing without the debug file */
	struct pf_symbolizer_options o = {.debug_dir = "/nonexistent"};
	struct pf_symbolizer *sym = pf_symbolizer_new(&o);
	resolve_nopie(sym, stripped, w, &fr);
	assert_null(fr.function);
	pf_symbolizer_free(sym);
	/* with it: the function from its .symtab, the line from its DWARF */
	o.debug_dir = dbgdir;
	sym = pf_symbolizer_new(&o);
	resolve_nopie(sym, stripped, w, &fr);
	assert_non_null(fr.function);
	assert_string_equal(fr.function, "pf_target_fn");
	assert_int_equal(fr.line, TARGET_LINE);
	assert_non_null(strstr(fr.file, "target.c"));
	pf_symbolizer_free(sym);
	pf_prof_window_free(w);
}

/* A stand-in for the sampler's BPF resolver (the real one runs in the eBPF test): formats
 * addresses the way the kernel's %pS does, by a fixed rule, and records the batches. */
struct fake_kernel {
	unsigned calls;
	size_t batch_sizes[16];
	int fail; /* negative errno to return */
};

static int fake_resolve(void *ctx, const uint64_t *addrs, size_t n,
			char (*text)[PF_SYM_KTEXT_LEN])
{
	struct fake_kernel *k = ctx;
	if (k->fail)
		return k->fail;
	assert_true(n >= 1 && n <= PF_SYM_KRESOLVE_BATCH);
	if (k->calls < 16)
		k->batch_sizes[k->calls] = n;
	k->calls++;
	for (size_t i = 0; i < n; i++) {
		uint64_t a = addrs[i];
		if (a % 7 == 0)
			snprintf(text[i], PF_SYM_KTEXT_LEN, "0x%" PRIx64, a);
		else if (a % 5 == 0)
			snprintf(text[i], PF_SYM_KTEXT_LEN, "mod_fn_%" PRIx64 "+0x4/0x20 [some_mod]",
				 a);
		else
			snprintf(text[i], PF_SYM_KTEXT_LEN, "fn_%" PRIx64 "+0x1/0x40", a);
	}
	return 0;
}

static void test_kernel_resolver(void **state)
{
	struct fake_kernel k = {0};
	struct pf_symbolizer *sym = pf_symbolizer_new(NULL);
	pf_symbolizer_set_kernel_resolver(sym, fake_resolve, &k);
	/* 150 distinct kernel addresses, each twice, and one user frame */
	enum { N = 301 };
	struct pf_prof_frame fr[N];
	for (size_t i = 0; i < 300; i++)
		fr[i] = (struct pf_prof_frame){.address = 0xffffffff81000000ull + (i % 150) * 16,
					       .kind = PF_FRAME_KERNEL};
	fr[300] = (struct pf_prof_frame){.address = 0x10, .kind = PF_FRAME_NATIVE};
	struct pf_prof_window *w = pf_prof_window_new();
	struct pf_prof_process p = {0};
	assert_int_equal(pf_symbolizer_resolve(sym, 1, w, &p, fr, N), 0);
	/* distinct addresses only, in batches of at most PF_SYM_KRESOLVE_BATCH */
	assert_int_equal(k.calls, 3);
	assert_int_equal(k.batch_sizes[0] + k.batch_sizes[1] + k.batch_sizes[2], 150);
	size_t unnamed = 0;
	for (size_t i = 0; i < 300; i++) {
		uint64_t a = fr[i].address;
		char want[64];
		assert_int_equal(fr[i].mapping, 0);
		if (a % 7 == 0) {
			assert_null(fr[i].function);
			unnamed++;
			continue;
		}
		snprintf(want, sizeof(want), a % 5 == 0 ? "mod_fn_%" PRIx64 : "fn_%" PRIx64, a);
		assert_non_null(fr[i].function);
		assert_string_equal(fr[i].function, want);
	}
	assert_true(unnamed > 0);
	assert_string_equal(p.mappings[0].path, "[kernel.kallsyms]");
	struct pf_symbolizer_stats st;
	pf_symbolizer_stats(sym, &st);
	assert_true(st.kernel_resolver);
	assert_int_equal(st.kernel_resolved, 150);
	assert_int_equal(st.kernel_symbols, 0); /* /proc/kallsyms not loaded */
	assert_int_equal(st.kernel_load_cpu_ns, 0);

	/* the next window: all cached, no call */
	struct pf_prof_window *w2 = pf_prof_window_new();
	struct pf_prof_process p2 = {0};
	for (size_t i = 0; i < 300; i++)
		fr[i].function = NULL;
	pf_prof_window_free(w);
	assert_int_equal(pf_symbolizer_resolve(sym, 1, w2, &p2, fr, 300), 0);
	assert_int_equal(k.calls, 3);
	assert_string_equal(fr[1].function, "mod_fn_ffffffff81000010"); /* % 5 == 0 */
	assert_string_equal(fr[2].function, "fn_ffffffff81000020");
	assert_null(fr[3].function); /* % 7 == 0: "0x..." */

	/* a failing resolver: the symbolizer falls back to /proc/kallsyms for good */
	k.fail = -EIO;
	struct pf_prof_frame nf = {.address = 0xffffffff81000000ull + 4096 * 16 + 3,
				   .kind = PF_FRAME_KERNEL};
	struct pf_prof_process p3 = {0};
	assert_int_equal(pf_symbolizer_resolve(sym, 1, w2, &p3, &nf, 1), 0);
	pf_symbolizer_stats(sym, &st);
	assert_false(st.kernel_resolver);
	assert_int_equal(st.last_error, -EIO);
	pf_prof_window_free(w2);
	pf_symbolizer_free(sym);
}

/* PROCMAP_QUERY and the text of /proc/PID/maps give the same executable mappings. */
static void test_maps_query_equals_text(void **state)
{
	uint64_t addr;
	pid_t pid = run_target(pie, &addr);
	uint32_t pids[2] = {(uint32_t)getpid(), (uint32_t)pid};
	static char a[2][1 << 16], b[2][1 << 16];
	int nq[2], nt[2];
	for (int i = 0; i < 2; i++) { /* read both before any assert: the child must be stopped */
		nq[i] = pf_exec_maps_render(pids[i], false, a[i], sizeof(a[i]));
		nt[i] = pf_exec_maps_render(pids[i], true, b[i], sizeof(b[i]));
	}
	stop(pid);
	for (int i = 0; i < 2; i++) {
		assert_true(nt[i] > 0);
		if (nq[i] == -ENOTTY) {
			print_message("no PROCMAP_QUERY on this kernel (< 6.11): text only\n");
			return;
		}
		assert_true(nq[i] > 0);
		/* [vsyscall] is no VMA: only the text lists it (and no sample lands in it) */
		char *vs = strstr(b[i], "[vsyscall]");
		if (vs) {
			char *bol = vs;
			while (bol > b[i] && bol[-1] != '\n')
				bol--;
			char *eol = strchr(vs, '\n');
			const char *rest = eol ? eol + 1 : "";
			memmove(bol, rest, strlen(rest) + 1);
		}
		assert_string_equal(a[i], b[i]);
		assert_non_null(strstr(a[i], i ? pie : "test_agent_symbolize"));
		assert_non_null(strstr(a[i], "[vdso]"));
	}
	assert_int_equal(pf_exec_maps_render((uint32_t)pid, false, a[0], sizeof(a[0])), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_build_id),
		cmocka_unit_test(test_static_lookup),
		cmocka_unit_test(test_process_resolve),
		cmocka_unit_test(test_cache_bound),
		cmocka_unit_test(test_kernel),
		cmocka_unit_test(test_compressed_dwarf_bound),
		cmocka_unit_test(test_debug_file),
		cmocka_unit_test(test_kernel_resolver),
		cmocka_unit_test(test_maps_query_equals_text),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
