/* test_symbolize.c — agent/symbolize/symbolize.h against test ELFs compiled here with -g: symbol and
 * file:line lookup (static and through a live PIE process's maps), GNU build id (checked
 * against binutils' readelf), unresolvable frames keeping address/mapping, a process that
 * exited after capture, kernel frames from /proc/kallsyms and through a kernel resolver
 * (batching, caching, unresolved results, fallback), compressed DWARF, a stripped file's
 * symbols and lines from its separate debug file (by build id).
 * Names people can read, on live processes built here: a C++ program (g++) and a Rust program in
 * both manglings (rustc, legacy and v0; skipped with a message when rustc is not on PATH)
 * resolve to demangled functions with the mangled symbol as system_name; an inline-heavy C
 * program built with -O2 -g shows its inlined functions as the frame's inlined list, innermost
 * first with their own lines (checked against binutils' addr2line -i), also when the binary is
 * stripped and its DWARF is only in a separate .build-id/xx/yyyy.debug file. Lines and inlined
 * frames match binutils' addr2line on every byte of a C++ program and on this test's own -O2
 * code; before a file's line table is built, its new addresses get names only, uncached.
 * Of several names at one address (aliases, symbol versions), the one people call: global over
 * weak over local, fewer leading underscores, no "@@VER" suffix; vDSO frames of another process
 * are named from the agent's own vDSO image when the process maps the same bytes. Go programs
 * built without a symbol table (-ldflags="-s -w", PIE too) are named from their .gopclntab
 * (skipped with a message where `go` is not on PATH); a symbol name that is not UTF-8 reaches
 * the profile cleaned. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "gobuild.h"
#include "symbolize/elf_file.h"
#include "symbolize/proc_maps.h"
#include "symbolize/symbolize.h"
#include "symbolize/vdso.h"

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

static const char cxx_src[] =
	"#include <cstdio>\n"
	"#include <unistd.h>\n"
	"namespace checkout {\n"
	"struct Order {\n"
	"\tunsigned n;\n"
	"\t__attribute__((noinline)) unsigned price() const;\n"
	"};\n"
	"unsigned Order::price() const { unsigned s = 0; for (unsigned i = 0; i < n; i++) s += i * 7; "
	"return s; }\n"
	"template <typename T> __attribute__((noipa)) T total(const T &a, const T &b) { return a + b; "
	"}\n"
	"}\n"
	"extern \"C\" __attribute__((noinline)) unsigned pf_ready(unsigned x) { return x + 1; }\n"
	"int main(int argc, char **)\n"
	"{\n"
	"\tstd::printf(\"%p\\n\", (void *)pf_ready);\n"
	"\tstd::fflush(stdout);\n"
	"\tcheckout::Order o{(unsigned)argc * 100u};\n"
	"\tif (checkout::total<unsigned>(o.price(), pf_ready(1)) == 42)\n"
	"\t\treturn 1;\n"
	"\tpause();\n"
	"\treturn 0;\n"
	"}\n";

/* Lines matter: mix_leaf is on line 4, mix_mid calls it on line 5, pf_outer calls mix_mid on
 * line 8. */
static const char inl_src[] =
	"#include <stdio.h>\n"
	"#include <unistd.h>\n"
	"static inline __attribute__((always_inline)) unsigned\n"
	"mix_leaf(unsigned x) { x ^= x << 13; x ^= x >> 17; return x ^ (x << 5); }\n"
	"static inline __attribute__((always_inline)) unsigned mix_mid(unsigned x) { return "
	"mix_leaf(x + 7) * 3; }\n"
	"__attribute__((noinline)) unsigned pf_outer(unsigned n)\n"
	"{\n"
	"\tunsigned s = 1; for (unsigned i = 0; i < n; i++) s += mix_mid(s + i);\n"
	"\treturn s;\n"
	"}\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"\tprintf(\"%p\\n\", (void *)pf_outer);\n"
	"\tfflush(stdout);\n"
	"\tif (pf_outer((unsigned)argc * 1000u) == 42)\n"
	"\t\treturn 1;\n"
	"\tpause();\n"
	"\treturn 0;\n"
	"}\n";

static const char rust_src[] =
	"mod work {\n"
	"    #[inline(never)]\n"
	"    pub fn burn(n: u64) -> u64 {\n"
	"        let mut s = 0u64;\n"
	"        for i in 0..n { s = s.wrapping_add(i.wrapping_mul(7)); }\n"
	"        s\n"
	"    }\n"
	"}\n"
	"fn main() {\n"
	"    println!(\"{:p}\", work::burn as fn(u64) -> u64);\n"
	"    if work::burn(std::env::args().count() as u64 * 1000) == 42 { return; }\n"
	"    loop { std::thread::sleep(std::time::Duration::from_secs(1)); }\n"
	"}\n";

#define MAX_A2L 18 /* entries addr2line gives per address that are compared */

static char dir[64], src[128], pie[128], nopie[128], noid[128], gz[128], stripped[128],
	dbgdir[128];

static int vsh(const char *fmt, va_list ap)
{
	char cmd[2048];
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	return system(cmd);
}

static void sh(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = vsh(fmt, ap);
	va_end(ap);
	assert_int_equal(rc, 0);
}

/* sh() without the assertion: the command's status. */
static int sh_rc(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = vsh(fmt, ap);
	va_end(ap);
	return rc;
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

/* Starts path, reads the address it prints. It dies with this process (a failed test leaves
 * no target behind holding the test runner's output open). */
static pid_t run_target(const char *path, uint64_t *addr)
{
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
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

/* Captures pid and waits (up to 60 s) for the line tables its files asked for. */
static void capture_ready(struct pf_symbolizer *sym, pid_t pid)
{
	assert_int_equal(pf_symbolizer_capture(sym, (uint32_t)pid), 0);
	for (int i = 0; i < 6000 && pf_symbolizer_lines_pending(sym); i++)
		usleep(10000);
	assert_false(pf_symbolizer_lines_pending(sym));
}

/* Runs bin (it prints an address into *addr and waits), captures its maps (its line tables
 * built) and lets it go: the symbolizer; the exited process's pid in *pid. */
static struct pf_symbolizer *captured(const char *bin, uint64_t *addr, pid_t *pid)
{
	*pid = run_target(bin, addr);
	struct pf_symbolizer *sym = pf_symbolizer_new(NULL);
	assert_non_null(sym);
	capture_ready(sym, *pid);
	stop(*pid);
	return sym;
}

/* captured(), then the frame at the printed address + 1 resolved into *fr (strings in w): the
 * symbolizer, for its statistics. */
static struct pf_symbolizer *resolve_printed(const char *bin, struct pf_prof_window *w,
					     struct pf_prof_frame *fr)
{
	uint64_t addr;
	pid_t pid;
	struct pf_symbolizer *sym = captured(bin, &addr, &pid);
	struct pf_prof_process p = {0};
	*fr = (struct pf_prof_frame){.address = addr + 1};
	assert_int_equal(pf_symbolizer_resolve(sym, (uint32_t)pid, w, &p, fr, 1), 0);
	assert_non_null(fr->function);
	return sym;
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
	/* inside the function still resolves to it */
	assert_int_equal(pf_elf_lookup(nopie, addr + 4, &si), 0);
	assert_string_equal(si.function, "pf_target_fn");
	assert_int_equal(pf_elf_lookup(nopie, 0x10, &si), -ENOENT);
	assert_int_equal(pf_elf_lookup("/nonexistent", 0x10, &si), -ENOENT);
	/* no build id: the same */
	pid = run_target(noid, &addr);
	stop(pid);
	assert_int_equal(pf_elf_lookup(noid, addr, &si), 0);
	assert_string_equal(si.function, "pf_target_fn");
}

static void test_process_resolve(void **state)
{
	uint64_t addr;
	char want[128];
	readelf_build_id(pie, want, sizeof(want));
	pid_t pid = run_target(pie, &addr);
	struct pf_symbolizer *sym = pf_symbolizer_new(NULL);
	assert_non_null(sym);
	capture_ready(sym, pid);
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

	/* next window: the same address comes from the result cache with the same function,
	 * file and line (strings copied into the new window) */
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

/* Opening a process's ELF files is set-up work the symbolizer times itself (thread CPU);
 * maps read again with every file cached open nothing and add nothing; the kernel's symbols
 * add their load. */
static void test_load_counted_as_setup(void **state)
{
	(void)state;
	uint64_t addr;
	pid_t pid = run_target(pie, &addr);
	struct pf_symbolizer *sym = pf_symbolizer_new(NULL);
	assert_non_null(sym);
	assert_int_equal(pf_symbolizer_load_cpu_ns(sym), 0);
	assert_int_equal(pf_symbolizer_capture(sym, (uint32_t)pid), 0);
	struct pf_symbolizer_stats st;
	pf_symbolizer_stats(sym, &st);
	assert_true(st.elf_opened >= 1);
	assert_true(st.elf_load_cpu_ns > 0);
	uint64_t first = pf_symbolizer_load_cpu_ns(sym);
	assert_int_equal(first, st.elf_load_cpu_ns + st.kernel_load_cpu_ns);
	uint64_t opened = st.elf_opened;
	assert_int_equal(pf_symbolizer_capture(sym, (uint32_t)pid), 0);
	pf_symbolizer_stats(sym, &st);
	assert_int_equal(st.elf_opened, opened);
	assert_int_equal(pf_symbolizer_load_cpu_ns(sym), first);
	stop(pid);
	if (pf_symbolizer_load_kernel(sym) == 0) {
		pf_symbolizer_stats(sym, &st);
		assert_true(st.kernel_load_cpu_ns > 0);
		assert_int_equal(pf_symbolizer_load_cpu_ns(sym),
				 first + st.kernel_load_cpu_ns);
	}
	pf_symbolizer_free(sym);
}

static void test_cache_bound(void **state)
{
	struct pf_symbolizer_options o = {.max_elf_files = 1, .no_kernel = true};
	struct pf_symbolizer *sym = pf_symbolizer_new(&o);
	capture_ready(sym, getpid());
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
	/* A stack through two files with room for one: each lookup evicts the file the other
	 * mapping remembers, which must then be found again, not used after its free (ASan). */
	for (int round = 0; round < 3; round++) {
		struct pf_prof_frame two[4];
		for (int i = 0; i < 4; i++)
			two[i] = (struct pf_prof_frame){
			    .address = i % 2 ? (uint64_t)(uintptr_t)&qsort
					     : (uint64_t)(uintptr_t)&test_cache_bound,
			    .kind = PF_FRAME_NATIVE};
		assert_int_equal(pf_symbolizer_resolve(sym, (uint32_t)getpid(), w, &p, two, 4), 0);
		for (int i = 0; i < 4; i++) {
			assert_non_null(two[i].function);
			if (i % 2)
				assert_non_null(strstr(two[i].function, "qsort"));
			else
				assert_string_equal(two[i].function, "test_cache_bound");
		}
	}
	struct pf_symbolizer_stats st2;
	pf_symbolizer_stats(sym, &st2);
	assert_int_equal(st2.elf_cached, 1);
	assert_true(st2.elf_evicted > st.elf_evicted);
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
	capture_ready(sym, pid);
	stop(pid);
	struct pf_prof_process p = {0};
	*fr = (struct pf_prof_frame){.address = addr + 1, .kind = PF_FRAME_NATIVE};
	assert_int_equal(pf_symbolizer_resolve(sym, (uint32_t)pid, w, &p, fr, 1), 0);
	pf_symbolizer_forget(sym, (uint32_t)pid);
}

/* Compressed DWARF (-gz) gives its lines like plain DWARF: the child inflates it once for
 * the table. */
static void test_compressed_dwarf(void **state)
{
	struct pf_prof_window *w = pf_prof_window_new();
	struct pf_prof_frame fr;
	struct pf_symbolizer *sym = pf_symbolizer_new(NULL);
	resolve_nopie(sym, gz, w, &fr);
	assert_string_equal(fr.function, "pf_target_fn");
	assert_int_equal(fr.line, TARGET_LINE);
	assert_non_null(strstr(fr.file, "target.c"));
	struct pf_symbolizer_stats st;
	pf_symbolizer_stats(sym, &st);
	assert_true(st.line_builds >= 1); /* and libc's, with its debug file installed */
	assert_int_equal(st.line_build_failed, 0);
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

/* ---- names people can read -------------------------------------------------------------- */

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* ELF address of a symbol of a non-PIE binary (nm), 0 when absent. */
static uint64_t nm_addr(const char *bin, const char *symbol)
{
	char cmd[512], line[512];
	snprintf(cmd, sizeof(cmd), "nm --defined-only %s", bin);
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	uint64_t a = 0;
	while (fgets(line, sizeof(line), f)) {
		char name[400];
		unsigned long long v;
		char t;
		if (sscanf(line, "%llx %c %399s", &v, &t, name) == 3 && !strcmp(name, symbol))
			a = v;
	}
	pclose(f);
	return a;
}

/* Builds cxx_src into <dir>/<name> (non-PIE, -O2 -g). */
static void build_orders(const char *name, char *bin, size_t n)
{
	char cc[128];
	snprintf(cc, sizeof(cc), "%s/%s.cc", dir, name);
	snprintf(bin, n, "%s/%s", dir, name);
	write_file(cc, cxx_src);
	sh("g++ -g -O2 -no-pie -o %s %s", bin, cc);
}

static void test_cxx(void **state)
{
	char bin[128];
	build_orders("orders", bin, sizeof(bin));
	uint64_t ready, a_price = nm_addr(bin, "_ZNK8checkout5Order5priceEv"),
			a_total = nm_addr(bin, "_ZN8checkout5totalIjEET_RKS1_S3_");
	assert_true(a_price && a_total);
	pid_t pid;
	struct pf_symbolizer *sym = captured(bin, &ready, &pid);
	struct pf_prof_window *w = pf_prof_window_new();
	struct pf_prof_process p = {0};
	struct pf_prof_frame fr[4] = {{.address = a_price + 1}, {.address = a_total + 1},
				      {.address = ready + 1}, {.address = a_price + 2}};
	assert_int_equal(pf_symbolizer_resolve(sym, (uint32_t)pid, w, &p, fr, 4), 0);
	assert_string_equal(fr[0].function, "checkout::Order::price() const");
	assert_string_equal(fr[0].system_name, "_ZNK8checkout5Order5priceEv");
	assert_non_null(strstr(fr[0].file, "orders.cc"));
	assert_non_null(strstr(fr[1].function, "checkout::total<unsigned int>(unsigned int const&"));
	assert_string_equal(fr[1].system_name, "_ZN8checkout5totalIjEET_RKS1_S3_");
	/* a C name reads the same: no separate system name */
	assert_string_equal(fr[2].function, "pf_ready");
	assert_null(fr[2].system_name);
	struct pf_symbolizer_stats st;
	pf_symbolizer_stats(sym, &st);
	assert_int_equal(st.demangle_lookups, 3);
	assert_true(st.demangle_hits >= 1); /* price() twice */
	assert_int_equal(st.demangle_failed, 0);
	pf_prof_window_free(w);
	pf_symbolizer_free(sym);
}

/* .text of bin: its ELF address and size. */
static void text_range(const char *bin, unsigned long long *lo, unsigned long long *size)
{
	char cmd[400], line[256];
	snprintf(cmd, sizeof(cmd),
		 "readelf -SW %s | sed -n 's/.* \\.text *PROGBITS *\\([0-9a-f]*\\) [0-9a-f]* "
		 "\\([0-9a-f]*\\).*/\\1 \\2/p'",
		 bin);
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	assert_non_null(fgets(line, sizeof(line), f));
	pclose(f);
	assert_int_equal(sscanf(line, "%llx %llx", lo, size), 2);
	assert_true(*size > 0 && *size < (1u << 22));
}

/* kB resident in this process's mappings of path (/proc/self/smaps). */
static long rss_kb_of(const char *path)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	assert_non_null(f);
	char line[1024];
	bool in = false;
	long kb = 0, v;
	size_t n = strlen(path);
	while (fgets(line, sizeof(line), f)) {
		size_t l = strcspn(line, "\n");
		line[l] = 0;
		size_t h = strspn(line, "0123456789abcdef");
		if (h && line[h] == '-') /* a mapping's first line: "start-end perms ... path" */
			in = l >= n && !strcmp(line + l - n, path);
		else if (in && sscanf(line, "Rss: %ld kB", &v) == 1)
			kb += v;
	}
	fclose(f);
	return kb;
}

/* A trim gives back the pages of a file's mapped image (symbol and string tables), and what
 * was resolved before still reads the same after (names come back from the page cache). */
/* Builds dir/many (once): 1500 small functions in one CU, with DWARF (a line table of tens
 * of thousands of rows); runs it and gives its path and its .text range. */
static pid_t start_many(char *bin, size_t cap, unsigned long long *lo, unsigned long long *size)
{
	char c[128];
	snprintf(c, sizeof(c), "%s/many.c", dir);
	snprintf(bin, cap, "%s/many", dir);
	if (access(bin, X_OK) == 0)
		goto run;
	FILE *f = fopen(c, "w");
	assert_non_null(f);
	fputs("#include <stdio.h>\n#include <unistd.h>\n", f);
	for (int i = 0; i < 1500; i++)
		fprintf(f,
			"struct s%d { int a%d; long b%d; };\n"
			"__attribute__((noinline)) long many_fn_%d(long x) { struct s%d v = {(int)x, "
			"x * %d}; for (int i = 0; i < %d; i++) v.b%d += v.a%d ^ i; return v.b%d; }\n",
			i, i, i, i, i, i, i % 7 + 1, i, i, i);
	fputs("int main(void) { printf(\"%p\\n\", (void *)many_fn_0); fflush(stdout); pause(); "
	      "return (int)many_fn_1(2); }\n",
	      f);
	fclose(f);
	sh("cc -g -O1 -no-pie -o %s %s", bin, c);
run:
	text_range(bin, lo, size);
	uint64_t ready;
	return run_target(bin, &ready);
}

static void test_trim_releases_pages(void **state)
{
	(void)state;
	char bin[128];
	unsigned long long lo, size;
	pid_t pid = start_many(bin, sizeof(bin), &lo, &size);
	struct pf_symbolizer *sym = pf_symbolizer_new(NULL);
	capture_ready(sym, pid);
	stop(pid);
	size_t n = size / 16;
	struct pf_prof_frame *fr = calloc(n, sizeof(*fr));
	char **names = calloc(n, sizeof(*names));
	assert_true(fr && names);
	struct pf_prof_window *w = pf_prof_window_new();
	struct pf_prof_process p = {0};
	for (size_t i = 0; i < n; i++)
		fr[i] = (struct pf_prof_frame){.address = lo + i * 16};
	assert_int_equal(pf_symbolizer_resolve(sym, (uint32_t)pid, w, &p, fr, n), 0);
	size_t named = 0, with_line = n;
	for (size_t i = 0; i < n; i++) {
		if (fr[i].function && (names[i] = strdup(fr[i].function)))
			named++;
		if (fr[i].line && with_line == n)
			with_line = i;
	}
	assert_true(with_line < n);
	assert_true(named > n / 2);
	long before = rss_kb_of(bin);
	pf_symbolizer_trim(sym);
	long after = rss_kb_of(bin);
	print_message("resident pages of the mapped file: %ld kB -> %ld kB\n", before, after);
	assert_true(before >= 64);
	assert_true(after <= 8);
	/* a new address still resolves (the symbol tables fault back in) */
	struct pf_prof_frame nf = {.address = lo + with_line * 16 + 1};
	struct pf_prof_process np = {0};
	assert_int_equal(pf_symbolizer_resolve(sym, (uint32_t)pid, w, &np, &nf, 1), 0);
	assert_non_null(nf.function);
	assert_true(nf.line > 0);
	pf_symbolizer_trim(sym);
	assert_true(rss_kb_of(bin) <= 8);
	/* the same addresses: from the result cache, names read again from the file's pages */
	struct pf_prof_window *w2 = pf_prof_window_new();
	struct pf_prof_process p2 = {0};
	for (size_t i = 0; i < n; i++)
		fr[i] = (struct pf_prof_frame){.address = lo + i * 16};
	assert_int_equal(pf_symbolizer_resolve(sym, (uint32_t)pid, w2, &p2, fr, n), 0);
	for (size_t i = 0; i < n; i++) {
		assert_true(!names[i] == !fr[i].function);
		if (names[i])
			assert_string_equal(names[i], fr[i].function);
		free(names[i]);
	}
	free(names);
	free(fr);
	pf_prof_window_free(w);
	pf_prof_window_free(w2);
	pf_symbolizer_free(sym);
}

static void rust_case(const char *flags, const char *prefix)
{
	char rs[128], bin[128];
	snprintf(rs, sizeof(rs), "%s/rsnames.rs", dir);
	snprintf(bin, sizeof(bin), "%s/rsnames%s", dir, prefix);
	write_file(rs, rust_src);
	sh("rustc -g -C opt-level=0 %s -o %s %s", flags, bin, rs);
	struct pf_prof_window *w = pf_prof_window_new();
	struct pf_prof_frame fr; /* PIE: the runtime address, through the maps */
	struct pf_symbolizer *sym = resolve_printed(bin, w, &fr);
	assert_string_equal(fr.function, "rsnames::work::burn");
	assert_non_null(fr.system_name);
	assert_memory_equal(fr.system_name, prefix, strlen(prefix));
	assert_non_null(strstr(fr.system_name, "4burn"));
	pf_prof_window_free(w);
	pf_symbolizer_free(sym);
}

static void test_rust(void **state)
{
	if (sh_rc("command -v rustc >/dev/null 2>&1") != 0) {
		print_message("rustc not on PATH: the Rust part is skipped\n");
		skip();
	}
	rust_case("", "_ZN");                             /* legacy, the default */
	rust_case("-C symbol-mangling-version=v0", "_R"); /* v0 */
}

/* Resolves every address of pf_outer's first n bytes; the index of the first frame whose
 * inlined list starts with mix_leaf, or -1. */
static int find_inlined(const char *bin, struct pf_symbolizer_options *opt,
			struct pf_prof_window *w, struct pf_prof_frame *fr, size_t n)
{
	uint64_t addr;
	pid_t pid = run_target(bin, &addr);
	struct pf_symbolizer *sym = pf_symbolizer_new(opt);
	capture_ready(sym, pid);
	stop(pid);
	for (size_t i = 0; i < n; i++)
		fr[i] = (struct pf_prof_frame){.address = addr + i};
	struct pf_prof_process p = {0};
	assert_int_equal(pf_symbolizer_resolve(sym, (uint32_t)pid, w, &p, fr, n), 0);
	int found = -1;
	for (size_t i = 0; i < n && found < 0; i++)
		if (fr[i].function && !strcmp(fr[i].function, "pf_outer") && fr[i].n_inlined == 2 &&
		    fr[i].inlined[0].function && !strcmp(fr[i].inlined[0].function, "mix_leaf"))
			found = (int)i;
	struct pf_symbolizer_stats st;
	pf_symbolizer_stats(sym, &st);
	assert_true(found < 0 || st.inlined_frames >= 2);
	pf_symbolizer_free(sym);
	return found;
}

static void check_inlined(const char *bin, const struct pf_prof_frame *fr)
{
	assert_string_equal(fr->inlined[1].function, "mix_mid");
	assert_null(fr->inlined[0].system_name);
	assert_int_equal(fr->inlined[0].line, 4); /* where the CPU is in mix_leaf */
	assert_int_equal(fr->inlined[1].line, 5); /* mix_mid's call of mix_leaf */
	assert_int_equal(fr->line, 8);            /* pf_outer's call of mix_mid */
	assert_non_null(strstr(fr->inlined[0].file, "inl.c"));
	assert_non_null(strstr(fr->file, "inl.c"));
	/* binutils agrees (non-PIE: the runtime address is the ELF address) */
	char cmd[512], out[1024] = {0};
	snprintf(cmd, sizeof(cmd),
		 "addr2line -i -f -s -e %s 0x%llx | sed 's/ (discriminator [0-9]*)//' | tr '\\n' ' '",
		 bin, (unsigned long long)fr->address);
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	assert_non_null(fgets(out, sizeof(out), f));
	pclose(f);
	assert_string_equal(out, "mix_leaf inl.c:4 mix_mid inl.c:5 pf_outer inl.c:8 ");
}

/* What binutils' addr2line (its own DWARF reader) says of an address: the functions inlined
 * there, innermost first, then the real one, each with "file:line" (basename). */
struct a2l_rec {
	uint64_t addr;
	int n;
	char *fn[MAX_A2L]; /* malloc'd */
	char *pos[MAX_A2L];
};

static const char *base_of(const char *p)
{
	const char *b = p ? strrchr(p, '/') : NULL;
	return b ? b + 1 : p;
}

/* Runs addr2line -a -i -f -s on the n ELF addresses of bin into recs. */
static void addr2line_all(const char *bin, const uint64_t *addrs, size_t n, struct a2l_rec *recs)
{
	char in[160], cmd[512];
	snprintf(in, sizeof(in), "%s/a2l.in", dir);
	FILE *f = fopen(in, "w");
	assert_non_null(f);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "0x%" PRIx64 "\n", addrs[i]);
	fclose(f);
	snprintf(cmd, sizeof(cmd),
		 "addr2line -a -i -f -s -e %s < %s | sed 's/ (discriminator [0-9]*)//'", bin, in);
	f = popen(cmd, "r");
	assert_non_null(f);
	char line[4096];
	struct a2l_rec *r = NULL;
	bool want_pos = false;
	size_t k = 0;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (!want_pos && !strncmp(line, "0x", 2)) {
			assert_true(k < n);
			r = &recs[k++];
			r->addr = strtoull(line, NULL, 16);
			r->n = 0;
			continue;
		}
		assert_non_null(r);
		if (!want_pos) {
			if (r->n < MAX_A2L)
				assert_non_null(r->fn[r->n] = strdup(line));
		} else if (r->n < MAX_A2L) {
			assert_non_null(r->pos[r->n++] = strdup(line));
		}
		want_pos = !want_pos;
	}
	pclose(f);
	assert_int_equal(k, n);
}

/* "file:line" of a frame or inlined function as addr2line prints it; "??" without (it
 * prints "??:0" or "??:?"). */
static void pos_of(const char *file, uint32_t line, char *out, size_t cap)
{
	if (file && line)
		snprintf(out, cap, "%s:%u", base_of(file), line);
	else
		snprintf(out, cap, "??");
}

static const char *a2l_pos(const char *p)
{
	const char *c = strrchr(p, ':'); /* "crtstuff.c:?": a file without a line */
	return !strncmp(p, "??", 2) || !c || !strcmp(c, ":?") || !strcmp(c, ":0") ? "??" : p;
}

/* Resolves the n ELF addresses of bin (mapped in pid at bias) and compares every frame the
 * symbolizer names with addr2line: the same inlined functions in the same order, each at the
 * same file and line, and the frame at the same file and line. */
static void compare_addr2line(struct pf_symbolizer *sym, pid_t pid, const char *bin,
			      uint64_t bias, const uint64_t *addrs, size_t n, size_t *named,
			      size_t *inl)
{
	struct a2l_rec *recs = calloc(n, sizeof(*recs));
	assert_non_null(recs);
	addr2line_all(bin, addrs, n, recs);
	struct pf_prof_window *w = pf_prof_window_new();
	struct pf_prof_frame fr[64];
	for (size_t i = 0; i < n; i += 64) {
		size_t k = n - i < 64 ? n - i : 64;
		for (size_t j = 0; j < k; j++)
			fr[j] = (struct pf_prof_frame){.address = addrs[i + j] + bias};
		struct pf_prof_process p = {0};
		assert_int_equal(pf_symbolizer_resolve(sym, (uint32_t)pid, w, &p, fr, k), 0);
		for (size_t j = 0; j < k; j++) {
			const struct pf_prof_frame *a = &fr[j];
			const struct a2l_rec *r = &recs[i + j];
			if (!a->function)
				continue; /* no symbol: no line looked up */
			char got[160], want[160];
			assert_true(r->n >= 1);
			bool same = (int)a->n_inlined == r->n - 1;
			for (uint32_t m = 0; same && m < a->n_inlined; m++) {
				const struct pf_prof_inline *in = &a->inlined[m];
				const char *nm = in->system_name ? in->system_name : in->function;
				pos_of(in->file, in->line, got, sizeof(got));
				same = nm && !strcmp(nm, r->fn[m]) && !strcmp(got, a2l_pos(r->pos[m]));
			}
			pos_of(a->file, a->line, got, sizeof(got));
			snprintf(want, sizeof(want), "%s", a2l_pos(r->pos[r->n - 1]));
			if (!same || strcmp(got, want))
				fail_msg("0x%" PRIx64 ": %s at %s with %u inlined (first %s at %s:%u); "
					 "addr2line: %s at %s with %d (first %s at %s)",
					 addrs[i + j], a->function, got, a->n_inlined,
					 a->n_inlined ? a->inlined[0].function : "-",
					 a->n_inlined ? base_of(a->inlined[0].file) : "-",
					 a->n_inlined ? a->inlined[0].line : 0, r->fn[r->n - 1], want,
					 r->n - 1, r->fn[0], r->pos[0]);
			*named += 1;
			*inl += a->n_inlined > 0;
		}
	}
	pf_prof_window_free(w);
	for (size_t i = 0; i < n; i++)
		for (int m = 0; m < recs[i].n; m++) {
			free(recs[i].fn[m]);
			free(recs[i].pos[m]);
		}
	free(recs);
}

/* Lines and inlined frames read as binutils' addr2line reads the DWARF, on every byte of a
 * C++ program's .text and on this test's own -O2 symbolizer code (with its inlined static
 * functions); a second symbolizer finds the tables on disk; before a table is built, frames
 * get their names only and are not cached, and get their lines once it is. */
static void test_lines_match_addr2line(void **state)
{
	(void)state;
	char bin[128], ldir[160], self[PATH_MAX];
	build_orders("orders_lt", bin, sizeof(bin));
	snprintf(ldir, sizeof(ldir), "%s/lines", dir);
	unsigned long long lo = 0, size = 0;
	text_range(bin, &lo, &size);
	uint64_t *addrs = calloc(size > 3 * 2048 ? size : 3 * 2048, sizeof(*addrs));
	assert_non_null(addrs);
	for (size_t i = 0; i < size; i++)
		addrs[i] = lo + i; /* non-PIE: runtime address == ELF address */
	struct pf_symbolizer_options o = {.no_kernel = true, .line_dir = ldir};
	struct pf_symbolizer *sym = pf_symbolizer_new(&o);
	assert_non_null(sym);
	uint64_t ready;
	pid_t pid = run_target(bin, &ready);
	capture_ready(sym, pid);
	size_t named = 0, inl = 0;
	compare_addr2line(sym, pid, bin, 0, addrs, size, &named, &inl);
	assert_true(named > size / 4);
	/* a C program built with -O2 here: functions inlined into one another */
	char c[128], ibin[128];
	snprintf(c, sizeof(c), "%s/inl_a2l.c", dir);
	snprintf(ibin, sizeof(ibin), "%s/inl_a2l", dir);
	write_file(c, inl_src);
	sh("cc -g -O2 -no-pie -o %s %s", ibin, c);
	unsigned long long ilo = 0, isize = 0;
	text_range(ibin, &ilo, &isize);
	uint64_t *iaddrs = calloc(isize, sizeof(*iaddrs));
	assert_non_null(iaddrs);
	for (size_t i = 0; i < isize; i++)
		iaddrs[i] = ilo + i;
	pid_t ipid = run_target(ibin, &ready);
	capture_ready(sym, ipid);
	size_t inamed = 0, iinl = 0;
	compare_addr2line(sym, ipid, ibin, 0, iaddrs, isize, &inamed, &iinl);
	stop(ipid);
	free(iaddrs);
	assert_true(iinl > 0);

	/* this process: PIE, its ELF addresses are the runtime ones minus the load base */
	Dl_info di;
	assert_true(dladdr((void *)pf_symbolizer_resolve, &di) != 0);
	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	assert_true(sl > 0);
	self[sl] = 0;
	uint64_t bias = (uint64_t)(uintptr_t)di.dli_fbase;
	const uint64_t fns[] = {(uint64_t)(uintptr_t)pf_symbolizer_resolve,
				(uint64_t)(uintptr_t)pf_symbolizer_capture,
				(uint64_t)(uintptr_t)pf_symbolizer_trim};
	size_t n = 0;
	for (size_t k = 0; k < 3; k++)
		for (size_t i = 0; i < 2048; i++)
			addrs[n++] = fns[k] + i - bias;
	capture_ready(sym, getpid());
	size_t named2 = 0, inl2 = 0;
	compare_addr2line(sym, getpid(), self, bias, addrs, n, &named2, &inl2);
	assert_true(named2 > n / 2);
	/* (this code's own inlined functions: none in a build without optimization) */
	print_message("tables = addr2line on %llu + %llu + %zu addresses (%zu + %zu + %zu with "
		      "inlined functions)\n",
		      size, isize, n, inl, iinl, inl2);
	pf_symbolizer_free(sym);

	/* a new symbolizer: the tables come from the directory, no child */
	sym = pf_symbolizer_new(&o);
	assert_non_null(sym);
	capture_ready(sym, pid);
	struct pf_symbolizer_stats st;
	pf_symbolizer_stats(sym, &st);
	assert_int_equal(st.line_builds, 0);
	assert_true(st.line_cache_hits >= 1);
	assert_true(st.line_tables >= 1 && st.line_tables_bytes > 0);
	pf_symbolizer_free(sym);

	/* an empty directory: the first resolve comes before the build */
	sh("rm -rf %s", ldir);
	sym = pf_symbolizer_new(&o);
	assert_non_null(sym);
	capture_ready(sym, pid);
	struct pf_prof_window *w = pf_prof_window_new();
	struct pf_prof_frame fr = {.address = (uint64_t)(uintptr_t)pf_symbolizer_resolve};
	struct pf_prof_process p = {0};
	assert_int_equal(pf_symbolizer_resolve(sym, (uint32_t)getpid(), w, &p, &fr, 1), 0);
	/* (pid's capture asked for the C++ program's table, this process's is asked now) */
	assert_non_null(fr.function);
	assert_null(fr.file);
	pf_symbolizer_stats(sym, &st);
	assert_true(st.line_deferred >= 1);
	for (int i = 0; i < 6000 && pf_symbolizer_lines_pending(sym); i++)
		usleep(10000);
	fr = (struct pf_prof_frame){.address = (uint64_t)(uintptr_t)pf_symbolizer_resolve};
	p = (struct pf_prof_process){0};
	assert_int_equal(pf_symbolizer_resolve(sym, (uint32_t)getpid(), w, &p, &fr, 1), 0);
	assert_non_null(fr.file);
	assert_non_null(strstr(fr.file, "symbolize.c"));
	assert_true(fr.line > 0);
	pf_symbolizer_stats(sym, &st);
	assert_true(st.line_builds >= 2);
	assert_true(st.line_build_cpu_ns > 0);
	pf_prof_window_free(w);
	pf_symbolizer_free(sym);
	stop(pid);
	free(addrs);
}

static void test_inlined(void **state)
{
	char c[128], bin[128], strip[160], dbg[128], id[128] = {0};
	snprintf(c, sizeof(c), "%s/inl.c", dir);
	snprintf(bin, sizeof(bin), "%s/inl", dir);
	write_file(c, inl_src);
	sh("cc -g -O2 -no-pie -Wl,--build-id=sha1 -o %s %s", bin, c);
	struct pf_prof_window *w = pf_prof_window_new();
	struct pf_prof_frame fr[160];
	int i = find_inlined(bin, NULL, w, fr, 160);
	assert_true(i >= 0);
	check_inlined(bin, &fr[i]);

	/* stripped, DWARF only in <debug_dir>/.build-id/xx/yyyy.debug */
	snprintf(strip, sizeof(strip), "%s/inl-stripped", dir);
	snprintf(dbg, sizeof(dbg), "%s/inl-debug", dir);
	readelf_build_id(bin, id, sizeof(id));
	assert_int_equal(strlen(id), 40);
	sh("cp %s %s && mkdir -p %s/.build-id/%.2s && objcopy --only-keep-debug %s "
	   "%s/.build-id/%.2s/%s.debug && strip --strip-all %s",
	   bin, strip, dbg, id, strip, dbg, id, id + 2, strip);
	struct pf_symbolizer_options o = {.debug_dir = dbg};
	i = find_inlined(strip, &o, w, fr, 160);
	assert_true(i >= 0);
	check_inlined(bin, &fr[i]);
	/* without the debug file: no inlined list, and never a wrong one */
	struct pf_symbolizer_options none = {.debug_dir = "/nonexistent"};
	assert_int_equal(find_inlined(strip, &none, w, fr, 160), -1);
	pf_prof_window_free(w);
}

/* A library whose functions have several names: aliases of every binding, and two versions of
 * one symbol (.symver), as glibc has them (clock_gettime@@GLIBC_2.17, __clock_gettime,
 * __clock_gettime_2 at one address). */
static const char alias_src[] =
	"__attribute__((noinline)) int pf_impl(int x) { return x * 3 + 1; }\n"
	"static int pf_local_alias(int) __attribute__((alias(\"pf_impl\"), used));\n"
	"int __pf_impl(int) __attribute__((alias(\"pf_impl\")));\n"
	"int pf_weak(int) __attribute__((weak, alias(\"pf_impl\")));\n"
	"__attribute__((noinline)) int pf_v1(int x) { return x + 7; }\n"
	"__attribute__((noinline)) int pf_v2(int x) { return x + 9; }\n"
	"__asm__(\".symver pf_v1, pf_ver@VER_1\");\n"
	"__asm__(\".symver pf_v2, pf_ver@@VER_2\");\n";
static const char alias_map[] = "VER_1 { global: pf_ver; local: *; };\n"
				"VER_2 { global: pf_ver; pf_impl; __pf_impl; pf_weak; } VER_1;\n";
static const char alias_main[] = "#include <dlfcn.h>\n"
				 "#include <stdio.h>\n"
				 "#include <unistd.h>\n"
				 "int pf_ver(int);\n"
				 "int main(void)\n"
				 "{\n"
				 "\tprintf(\"%p\\n\", dlsym(RTLD_DEFAULT, \"pf_ver\"));\n"
				 "\tfflush(stdout);\n"
				 "\tif (pf_ver(1) == 10)\n"
				 "\t\tpause();\n"
				 "\treturn 0;\n"
				 "}\n";

static void test_alias_names(void **state)
{
	char c[128], map[128], lib[128], mc[128], bin[128];
	snprintf(c, sizeof(c), "%s/alias.c", dir);
	snprintf(map, sizeof(map), "%s/alias.map", dir);
	snprintf(lib, sizeof(lib), "%s/libalias.so", dir);
	snprintf(mc, sizeof(mc), "%s/aliasmain.c", dir);
	snprintf(bin, sizeof(bin), "%s/aliasmain", dir);
	write_file(c, alias_src);
	write_file(map, alias_map);
	write_file(mc, alias_main);
	sh("cc -O1 -g -shared -fPIC -Wl,--version-script=%s -Wl,--build-id=sha1 -o %s %s", map, lib, c);
	sh("cc -O1 -o %s %s -L%s -lalias -Wl,-rpath,%s", bin, mc, dir, dir);
	uint64_t impl = nm_addr(lib, "pf_impl"), v1 = nm_addr(lib, "pf_ver@VER_1"),
		 v2 = nm_addr(lib, "pf_ver@@VER_2");
	assert_true(impl && v1 && v2);
	assert_int_equal(nm_addr(lib, "pf_local_alias"), impl); /* the aliases are there */
	assert_int_equal(nm_addr(lib, "__pf_impl"), impl);
	assert_int_equal(nm_addr(lib, "pf_weak"), impl);

	/* global over weak and local, fewer underscores over more (bytes alone would pick
	 * "__pf_impl"); the default version's name without its suffix; an old version's name
	 * over the local function it was made from */
	struct pf_sym_info si;
	assert_int_equal(pf_elf_lookup(lib, impl + 1, &si), 0);
	assert_string_equal(si.function, "pf_impl");
	assert_int_equal(si.sym_addr, impl);
	assert_int_equal(pf_elf_lookup(lib, v2 + 1, &si), 0);
	assert_string_equal(si.function, "pf_ver");
	assert_int_equal(pf_elf_lookup(lib, v1 + 1, &si), 0);
	assert_string_equal(si.function, "pf_ver");

	/* the same through a process that loaded the library (versioned names interned) */
	uint64_t rt_v2;
	pid_t pid;
	struct pf_symbolizer *sym = captured(bin, &rt_v2, &pid);
	uint64_t bias = rt_v2 - v2;
	struct pf_prof_window *w = pf_prof_window_new();
	struct pf_prof_process p = {0};
	struct pf_prof_frame fr[3] = {{.address = bias + impl + 1}, {.address = rt_v2 + 1},
				      {.address = bias + v1 + 1}};
	assert_int_equal(pf_symbolizer_resolve(sym, (uint32_t)pid, w, &p, fr, 3), 0);
	for (int i = 0; i < 3; i++)
		assert_non_null(fr[i].function);
	assert_string_equal(fr[0].function, "pf_impl");
	assert_string_equal(fr[1].function, "pf_ver");
	assert_null(fr[1].system_name);
	assert_string_equal(fr[2].function, "pf_ver");
	assert_non_null(strstr(p.mappings[fr[1].mapping].path, "libalias.so"));
	pf_prof_window_free(w);
	pf_symbolizer_free(sym);
}

/* [start, end) of pid's [vdso] mapping (/proc/PID/maps). */
static void vdso_range(pid_t pid, uint64_t *start, uint64_t *end)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	*start = *end = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a, b;
		if (strstr(line, "[vdso]") && sscanf(line, "%llx-%llx", &a, &b) == 2) {
			*start = a;
			*end = b;
		}
	}
	fclose(f);
	assert_true(*start && *end > *start);
}

/* Another process's vDSO frames get the names of the agent's own vDSO image (the same bytes
 * in every 64-bit process of one kernel), the mapping its build id; also after the process
 * exited (the image was compared when its maps were read). */
static void test_vdso(void **state)
{
	void *h = dlopen("linux-vdso.so.1", RTLD_NOW | RTLD_NOLOAD);
	assert_non_null(h);
	void *fn = dlsym(h, "__vdso_clock_gettime");
	assert_non_null(fn);
	uint64_t off = (uintptr_t)fn - getauxval(AT_SYSINFO_EHDR);
	const void *image;
	size_t len;
	uint64_t vaddr0;
	assert_true(pf_vdso_image(&image, &len, &vaddr0));
	assert_true(off < len);

	uint64_t ready, start, end;
	pid_t pid = run_target(nopie, &ready);
	vdso_range(pid, &start, &end);
	assert_true(pf_vdso_same((uint32_t)pid, start, end));
	assert_false(pf_vdso_same((uint32_t)pid, start, end + 4096)); /* not its size */
	assert_false(pf_vdso_same((uint32_t)pid, ready & ~4095ull, (ready & ~4095ull) + (end - start)));
	struct pf_symbolizer *sym = pf_symbolizer_new(NULL);
	capture_ready(sym, pid);
	stop(pid);
	assert_false(pf_vdso_same((uint32_t)pid, start, end)); /* gone: cannot be read */

	struct pf_prof_window *w = pf_prof_window_new();
	struct pf_prof_process p = {0};
	struct pf_prof_frame fr[2] = {{.address = start + off + 1}, {.address = ready + 1}};
	assert_int_equal(pf_symbolizer_resolve(sym, (uint32_t)pid, w, &p, fr, 2), 0);
	assert_non_null(fr[0].function);
	assert_string_equal(fr[0].function, "__vdso_clock_gettime");
	assert_true(fr[0].mapping >= 0);
	const struct pf_prof_mapping *m = &p.mappings[fr[0].mapping];
	assert_string_equal(m->path, "[vdso]");
	assert_int_equal(m->start, start);
	assert_non_null(m->build_id);
	assert_int_equal(strlen(m->build_id), 40);
	assert_string_equal(fr[1].function, "pf_target_fn");
	pf_prof_window_free(w);
	pf_symbolizer_free(sym);
	dlclose(h);
}

static const char go_src[] = "package main\n"
			     "\n"
			     "import (\n"
			     "\t\"fmt\"\n"
			     "\t\"os\"\n"
			     "\t\"reflect\"\n"
			     "\t\"time\"\n"
			     ")\n"
			     "\n"
			     "//go:noinline\n"
			     "func hotLeaf(n int) int {\n"
			     "\ts := 0\n"
			     "\tfor i := 0; i < n; i++ {\n"
			     "\t\ts += i * 7\n"
			     "\t}\n"
			     "\treturn s\n"
			     "}\n"
			     "\n"
			     "func main() {\n"
			     "\tfmt.Printf(\"%#x\\n\", reflect.ValueOf(hotLeaf).Pointer())\n"
			     "\tif hotLeaf(len(os.Args)) == 42 {\n"
			     "\t\treturn\n"
			     "\t}\n"
			     "\tfor {\n"
			     "\t\ttime.Sleep(time.Second)\n"
			     "\t}\n"
			     "}\n";

/* A Go program stripped of its symbol table (the usual way Go services ship): named from the
 * runtime's own function table, as a PIE too, and linked by the system linker (cgo's way:
 * C code comes before Go's in .text, so Go 1.18+ entries are relative to runtime.text). */
static void test_go_stripped(void **state)
{
	if (!pf_go_available()) {
		print_message("go not on PATH (Debian golang-go): Go binaries not tested\n");
		skip();
	}
	char src_go[128], bins[3][128];
	snprintf(src_go, sizeof(src_go), "%s/gomain.go", dir);
	snprintf(bins[0], sizeof(bins[0]), "%s/go-stripped", dir);
	snprintf(bins[1], sizeof(bins[1]), "%s/go-stripped-pie", dir);
	snprintf(bins[2], sizeof(bins[2]), "%s/go-stripped-external", dir);
	write_file(src_go, go_src);
	static const char *modes[] = {"-buildmode=exe", "-buildmode=pie",
				      "-ldflags='-linkmode=external'"};
	for (int i = 0; i < 3; i++) {
		char strip[400];
		snprintf(strip, sizeof(strip), "strip %s", bins[i]);
		assert_int_equal(pf_go_build(dir, modes[i], bins[i], src_go, strip), 0);
		assert_int_not_equal(sh_rc("readelf -S %s | grep -q ' .symtab'", bins[i]), 0);
		uint64_t addr;
		pid_t pid;
		struct pf_symbolizer *sym = captured(bins[i], &addr, &pid);
		struct pf_prof_window *w = pf_prof_window_new();
		struct pf_prof_process p = {0};
		struct pf_prof_frame fr[2] = {{.address = addr + 1}, {.address = addr}};
		assert_int_equal(pf_symbolizer_resolve(sym, (uint32_t)pid, w, &p, fr, 2), 0);
		assert_non_null(fr[0].function);
		assert_string_equal(fr[0].function, "main.hotLeaf");
		assert_string_equal(fr[1].function, "main.hotLeaf");
		assert_null(fr[0].system_name);
		struct pf_symbolizer_stats st;
		pf_symbolizer_stats(sym, &st);
		assert_int_equal(st.go_files, 1);
		pf_prof_window_free(w);
		pf_symbolizer_free(sym);
	}
}

/* A symbol whose name is not UTF-8 (bytes a binary's builder chose) is cleaned before it goes
 * into a profile's strings. */
static void test_name_not_utf8(void **state)
{
	char bin[160];
	snprintf(bin, sizeof(bin), "%s/target-badname", dir);
	sh("objcopy --redefine-sym \"pf_target_fn=$(printf 'pf\\377bad\\001')\" %s %s", nopie, bin);
	struct pf_prof_window *w = pf_prof_window_new();
	struct pf_prof_frame fr;
	struct pf_symbolizer *sym = resolve_printed(bin, w, &fr);
	assert_string_equal(fr.function, "pf?bad?");
	struct pf_symbolizer_stats st;
	pf_symbolizer_stats(sym, &st);
	assert_int_equal(st.names_cleaned, 1);
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
		cmocka_unit_test(test_load_counted_as_setup),
		cmocka_unit_test(test_kernel),
	    cmocka_unit_test(test_compressed_dwarf),
		cmocka_unit_test(test_debug_file),
		cmocka_unit_test(test_kernel_resolver),
		cmocka_unit_test(test_maps_query_equals_text),
		cmocka_unit_test(test_cxx),
		cmocka_unit_test(test_rust),
		cmocka_unit_test(test_inlined),
		cmocka_unit_test(test_lines_match_addr2line),
		cmocka_unit_test(test_trim_releases_pages),
		cmocka_unit_test(test_alias_names),
		cmocka_unit_test(test_vdso),
		cmocka_unit_test(test_go_stripped),
		cmocka_unit_test(test_name_not_utf8),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
