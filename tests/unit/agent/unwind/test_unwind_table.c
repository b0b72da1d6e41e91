/* test_unwind_table.c — unit tests of agent/unwind/unwind_table.h: tables built from a binary
 * compiled here (cc -O2 -fomit-frame-pointer; the same code with its CFI only in
 * .debug_frame) and from the system's libc give the CFA rules the code has at known
 * functions, and libc's sigreturn trampoline a signal frame row; a Go program stripped of
 * its symbols and DWARF gets rows from its pclntab (a frameless leaf, a framed caller with rbp
 * saved below the return address, goexit the outermost frame); the disk cache round-trips
 * and refuses damaged files. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gobuild.h"
#include "unwind/unwind_table.h"

static char g_dir[64], g_bin[128], g_dbg[128];

static const char g_src[] =
	"#include <stdio.h>\n"
	"__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }\n"
	"__attribute__((noinline)) int big(int n) {\n"
	"	volatile char buf[8192];\n"
	"	for (int i = 0; i < n && i < 8192; i++) buf[i] = (char)i;\n"
	"	return buf[n & 8191] + leaf(n);\n"
	"}\n"
	"__attribute__((noinline, optimize(\"no-omit-frame-pointer\"))) int framed(int n) {\n"
	"	volatile int a[64];\n"
	"	for (int i = 0; i < 64; i++) a[i] = leaf(i + n);\n"
	"	return a[n & 63];\n"
	"}\n"
	"int main(int argc, char **argv) {\n"
	"	(void)argv;\n"
	"	printf(\"%d\\n\", big(argc) + framed(argc));\n"
	"	return 0;\n"
	"}\n";

static int run(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd) == 0 ? 0 : -1;
}

/* Address and size of a function symbol of path (nm), 0 when absent. */
static uint64_t sym_addr(const char *path, const char *name, uint64_t *size)
{
	char cmd[512], line[512];
	snprintf(cmd, sizeof(cmd), "nm -S %s", path);
	FILE *p = popen(cmd, "r");
	uint64_t addr = 0;
	while (p && fgets(line, sizeof(line), p)) {
		unsigned long long a, s;
		char type, n[256];
		if (sscanf(line, "%llx %llx %c %255s", &a, &s, &type, n) == 4 && !strcmp(n, name)) {
			addr = a;
			*size = s;
		}
	}
	if (p)
		pclose(p);
	return addr;
}

static struct pf_unwind_table *build(const char *path)
{
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	struct pf_unwind_table *t = NULL;
	assert_int_equal(pf_unwind_table_build(fd, 0, &t), 0);
	close(fd);
	assert_non_null(t);
	return t;
}

/* A row of kind in [lo, lo + size) matching the predicate values (-1: any). */
static bool has_row(const struct pf_unwind_table *t, uint64_t lo, uint64_t size, int kind,
		    int cfa_min, int rbp8)
{
	for (size_t i = 0; i < t->n_rows; i++) {
		const struct pf_unwind_row *r = &t->rows[i];
		if (r->pc < lo || r->pc >= lo + size || r->kind != kind)
			continue;
		if (r->cfa_off >= cfa_min && (rbp8 == -100 || r->rbp_off8 == rbp8))
			return true;
	}
	return false;
}

static void check_binary(const char *path, uint8_t source)
{
	struct pf_unwind_table *t = build(path);
	assert_int_equal(t->source, source);
	assert_true(t->n_rows > 10);
	for (size_t i = 1; i < t->n_rows; i++)
		assert_true(t->rows[i].pc > t->rows[i - 1].pc);
	uint64_t size = 0, a;

	/* a leaf that never touches the stack: CFA = rsp + 8 at its entry, rbp unchanged */
	assert_true((a = sym_addr(path, "leaf", &size)) != 0);
	const struct pf_unwind_row *r = pf_unwind_table_find(t, a);
	assert_non_null(r);
	assert_int_equal(r->kind, PF_UNWIND_CFA_RSP);
	assert_int_equal(r->cfa_off, 8);
	assert_int_equal(r->rbp_off8, 0);

	/* 8 KiB of locals: CFA = rsp + more than 8192 once they are allocated */
	assert_true((a = sym_addr(path, "big", &size)) != 0);
	r = pf_unwind_table_find(t, a);
	assert_int_equal(r->kind, PF_UNWIND_CFA_RSP);
	assert_int_equal(r->cfa_off, 8);
	assert_true(has_row(t, a, size, PF_UNWIND_CFA_RSP, 8192, -100));

	/* with a frame pointer: CFA = rbp + 16, rbp saved at CFA - 16 */
	assert_true((a = sym_addr(path, "framed", &size)) != 0);
	assert_true(has_row(t, a, size, PF_UNWIND_CFA_RBP, 16, -2));

	/* _start's return address is undefined: the outermost frame (crt1.o's CFI is in
	 * .eh_frame, which the .debug_frame variant lost: there it has no rule at all) */
	assert_true((a = sym_addr(path, "_start", &size)) != 0);
	r = pf_unwind_table_find(t, a + 1);
	assert_non_null(r);
	assert_int_equal(r->kind, source == 1 ? PF_UNWIND_END : PF_UNWIND_STOP);
	print_message("%s: %zu rows for %lu bytes of code, %u stop rows\n", path, t->n_rows,
		      (unsigned long)t->text_bytes, t->n_stop);
	pf_unwind_table_free(t);
}

static void test_binary_eh_frame(void **state)
{
	check_binary(g_bin, 1);
}

/* The same code with its CFI in .debug_frame only (-fno-asynchronous-unwind-tables -g, and
 * the crt files' .eh_frame removed). */
static void test_binary_debug_frame(void **state)
{
	check_binary(g_dbg, 2);
}

/* tests/ebpf/nofp_workload.go built here, then stripped (strip keeps .gopclntab): its
 * functions' addresses read from the unstripped build. */
static void test_go_pclntab(void **state)
{
	if (!pf_go_available()) {
		print_message("go not on PATH (Debian golang-go): Go tables not tested\n");
		skip();
	}
	const char *src = getenv("PF_SOURCE_DIR");
	char bin[160], stripped[160], go_src[256], after[600];
	snprintf(bin, sizeof(bin), "%s/gowl", g_dir);
	snprintf(stripped, sizeof(stripped), "%s/gowl-stripped", g_dir);
	snprintf(go_src, sizeof(go_src), "%s/tests/ebpf/nofp_workload.go", src ? src : ".");
	snprintf(after, sizeof(after), "cp %s %s && strip --strip-all %s", bin, stripped, stripped);
	assert_int_equal(pf_go_build(g_dir, "", bin, go_src, after), 0);
	uint64_t leaf_size = 0, caller_size = 0, exit_size = 0;
	uint64_t leaf = sym_addr(bin, "main.hotLeaf", &leaf_size),
		 caller = sym_addr(bin, "main.chainB", &caller_size),
		 goexit = sym_addr(bin, "runtime.goexit.abi0", &exit_size);
	assert_true(leaf && caller && goexit);
	struct pf_unwind_table *t = build(stripped);
	assert_int_equal(t->source, 3);
	for (size_t i = 1; i < t->n_rows; i++)
		assert_true(t->rows[i].pc > t->rows[i - 1].pc);
	/* the leaf keeps no frame: CFA = rsp + 8 all through, rbp unchanged */
	const struct pf_unwind_row *r = pf_unwind_table_find(t, leaf + leaf_size / 2);
	assert_non_null(r);
	assert_int_equal(r->kind, PF_UNWIND_CFA_RSP);
	assert_int_equal(r->cfa_off, 8);
	assert_int_equal(r->rbp_off8, 0);
	/* the caller: rsp + 8 at its entry, then its frame with rbp saved at CFA - 16 */
	r = pf_unwind_table_find(t, caller);
	assert_int_equal(r->kind, PF_UNWIND_CFA_RSP);
	assert_int_equal(r->cfa_off, 8);
	assert_true(has_row(t, caller, caller_size, PF_UNWIND_CFA_RSP, 16, -2));
	/* a goroutine's outermost frame */
	r = pf_unwind_table_find(t, goexit + 1);
	assert_int_equal(r->kind, PF_UNWIND_END);
	print_message("%s: %zu rows for %lu bytes of code, %u stop rows\n", stripped, t->n_rows,
		      (unsigned long)t->text_bytes, t->n_stop);
	pf_unwind_table_free(t);
}

static void test_libc(void **state)
{
	Dl_info info;
	void *fn = dlsym(RTLD_DEFAULT, "qsort");
	assert_non_null(fn);
	assert_true(dladdr(fn, &info) != 0);
	struct pf_unwind_table *t = build(info.dli_fname);
	print_message("%s: %zu rows for %lu bytes of code\n", info.dli_fname, t->n_rows,
		      (unsigned long)t->text_bytes);
	assert_true(t->n_rows > 1000);
	/* at the entry of an exported function: CFA = rsp + 8 */
	const char *names[] = {"qsort", "bsearch", "memcpy", "malloc", "strlen"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		void *f = dlsym(RTLD_DEFAULT, names[i]);
		assert_non_null(f);
		Dl_info fi;
		assert_true(dladdr(f, &fi) != 0);
		if (strcmp(fi.dli_fname, info.dli_fname))
			continue; /* an IFUNC resolved elsewhere */
		uint64_t vaddr = (uint64_t)((char *)f - (char *)fi.dli_fbase);
		const struct pf_unwind_row *r = pf_unwind_table_find(t, vaddr);
		assert_non_null(r);
		print_message("  %s at %#lx: kind %u cfa %d rbp8 %d\n", names[i],
			      (unsigned long)vaddr, r->kind, r->cfa_off, r->rbp_off8);
		assert_int_equal(r->kind, PF_UNWIND_CFA_RSP);
		assert_int_equal(r->cfa_off, 8);
	}
	/* a bound on the rows stops the build early */
	int fd = open(info.dli_fname, O_RDONLY);
	assert_true(fd >= 0);
	struct pf_unwind_table *small = NULL;
	assert_int_equal(pf_unwind_table_build(fd, 100, &small), -E2BIG);
	assert_null(small);
	assert_int_equal(pf_unwind_table_build(fd, t->n_rows, &small), 0);
	assert_int_equal(small->n_rows, t->n_rows);
	pf_unwind_table_free(small);
	close(fd);
	pf_unwind_table_free(t);
}

static void on_usr2(int sig)
{
	(void)sig;
}

/* libc's sigreturn trampoline (__restore_rt, a local symbol: found as the sa_restorer glibc's
 * sigaction installs) gets a SIGNAL row, at its address and at the byte before it (the walk
 * looks a return address up at address - 1; glibc's FDE starts there for that reason). */
static void test_libc_signal_frame(void **state)
{
	struct sigaction sa = {.sa_handler = on_usr2}, old, cur;
	assert_int_equal(sigaction(SIGUSR2, &sa, &old), 0);
	assert_int_equal(sigaction(SIGUSR2, NULL, &cur), 0);
	assert_int_equal(sigaction(SIGUSR2, &old, NULL), 0);
	assert_non_null(cur.sa_restorer);
	Dl_info info;
	assert_true(dladdr((void *)cur.sa_restorer, &info) != 0);
	struct pf_unwind_table *t = build(info.dli_fname);
	uint64_t vaddr = (uint64_t)((char *)(void *)cur.sa_restorer - (char *)info.dli_fbase);
	const struct pf_unwind_row *r = pf_unwind_table_find(t, vaddr);
	assert_non_null(r);
	print_message("%s: the restorer at %#lx: kind %u\n", info.dli_fname, (unsigned long)vaddr,
		      r->kind);
	assert_int_equal(r->kind, PF_UNWIND_SIGNAL);
	r = pf_unwind_table_find(t, vaddr - 1);
	assert_non_null(r);
	assert_int_equal(r->kind, PF_UNWIND_SIGNAL);
	/* its own rows only: the functions around it keep their rules */
	size_t n_signal = 0;
	for (size_t i = 0; i < t->n_rows; i++)
		n_signal += t->rows[i].kind == PF_UNWIND_SIGNAL;
	assert_true(n_signal >= 1 && n_signal <= 4);
	pf_unwind_table_free(t);
}

static void test_cache_round_trip_and_damage(void **state)
{
	struct pf_unwind_table *t = build(g_bin);
	char cache[96], file[160];
	const char *bid = "0123456789abcdef0123456789abcdef01234567";
	snprintf(cache, sizeof(cache), "%s/cache", g_dir);
	snprintf(file, sizeof(file), "%s/%s.unw", cache, bid);
	assert_int_equal(pf_unwind_cache_store(cache, bid, t), 0);
	struct pf_unwind_table *c = NULL;
	assert_int_equal(pf_unwind_cache_load(cache, bid, &c), 0);
	assert_int_equal(c->n_rows, t->n_rows);
	assert_int_equal(c->text_bytes, t->text_bytes);
	assert_memory_equal(c->rows, t->rows, t->n_rows * sizeof(*t->rows));
	pf_unwind_table_free(c);

	/* not a build id: refused before any file is touched */
	assert_int_equal(pf_unwind_cache_load(cache, "../etc/passwd", &c), -EINVAL);
	assert_int_equal(pf_unwind_cache_load(cache, "abcdef", &c), -ENOENT);

	/* a flipped bit in the rows: the checksum */
	int fd = open(file, O_RDWR);
	assert_true(fd >= 0);
	unsigned char b;
	off_t at = 112 + 5;
	assert_int_equal(pread(fd, &b, 1, at), 1);
	b ^= 0x10;
	assert_int_equal(pwrite(fd, &b, 1, at), 1);
	assert_int_equal(pf_unwind_cache_load(cache, bid, &c), -EBADMSG);
	assert_null(c);
	/* repaired, then cut short */
	b ^= 0x10;
	assert_int_equal(pwrite(fd, &b, 1, at), 1);
	assert_int_equal(pf_unwind_cache_load(cache, bid, &c), 0);
	pf_unwind_table_free(c);
	assert_int_equal(ftruncate(fd, 112 + 8 * 3), 0);
	assert_int_equal(pf_unwind_cache_load(cache, bid, &c), -EBADMSG);
	/* a header only */
	assert_int_equal(ftruncate(fd, 20), 0);
	assert_int_equal(pf_unwind_cache_load(cache, bid, &c), -EBADMSG);
	close(fd);

	/* a file stored under another build id */
	assert_int_equal(pf_unwind_cache_store(cache, bid, t), 0);
	char other[160];
	snprintf(other, sizeof(other), "%s/%s.unw", cache, "ffff");
	assert_int_equal(rename(file, other), 0);
	assert_int_equal(pf_unwind_cache_load(cache, "ffff", &c), -EBADMSG);
	pf_unwind_table_free(t);
}

int main(void)
{
	snprintf(g_dir, sizeof(g_dir), "/tmp/pf-unwtab-XXXXXX");
	if (!mkdtemp(g_dir))
		return 1;
	char src[128];
	snprintf(src, sizeof(src), "%s/prog.c", g_dir);
	snprintf(g_bin, sizeof(g_bin), "%s/prog", g_dir);
	snprintf(g_dbg, sizeof(g_dbg), "%s/prog_dbg", g_dir);
	FILE *f = fopen(src, "w");
	if (!f || fputs(g_src, f) < 0 || fclose(f) != 0)
		return 1;
	if (run("cc -O2 -fomit-frame-pointer -o %s %s", g_bin, src) ||
	    run("cc -O2 -fomit-frame-pointer -fno-asynchronous-unwind-tables -g -o %s %s && "
		"objcopy --remove-section .eh_frame --remove-section .eh_frame_hdr %s",
		g_dbg, src, g_dbg)) {
		fprintf(stderr, "cannot build the test programs with cc\n");
		return 1;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_binary_eh_frame),
		cmocka_unit_test(test_binary_debug_frame),
		cmocka_unit_test(test_go_pclntab),
		cmocka_unit_test(test_libc),
		cmocka_unit_test(test_libc_signal_frame),
		cmocka_unit_test(test_cache_round_trip_and_damage),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	if (run("rm -rf %s", g_dir) != 0)
		rc = rc ? rc : 1;
	return rc;
}
