/* test_hotspot_proc.c — unit tests of agent/interp/hotspot_proc.h: the file test on names; the
 * .dynsym of the machine's libjvm.so, of an ELF file that is no JVM and of a file that is no
 * ELF; the tables of a live JVM (Debian's OpenJDK 17 running a program written here, read with
 * process_vm_readv): JDK 17's entry layout and the offsets the walk reads; a JVM whose
 * variables are not set yet (-EAGAIN) and a layout past the bound, through a reader of one
 * value; hotspot_code.h on a live JVM whose hot method C2 compiled: the blob that jcmd's
 * Compiler.codelist lists found from an address in its code, its Method* named and its
 * bytecode indexes given their lines; hotspot_unwind.h on the same JVM: found in its maps, an
 * address in that code turned into the method's frame word and named Hot.javaHotMethod with
 * its file and descriptor, an address outside the code cache left alone, nothing of a process
 * without a JVM, nothing once switched off. The live tests are skipped where the machine has no
 * JDK (the project installs one). */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <glob.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "hotspot_code.h"
#include "hotspot_proc.h"
#include "interp/hotspot_unwind.h"
#include "pychild.h"
#include "python_proc.h" /* pf_py_read_mem */

static const char *java_bin(void)
{
	static char path[256];
	glob_t g;
	if (access("/usr/lib/jvm/java-17-openjdk-amd64/bin/java", X_OK) == 0)
		return "/usr/lib/jvm/java-17-openjdk-amd64/bin/java";
	if (glob("/usr/lib/jvm/*/bin/java", 0, NULL, &g) != 0)
		return NULL;
	snprintf(path, sizeof(path), "%s", g.gl_pathv[0]);
	globfree(&g);
	return path;
}

static void test_name(void **state)
{
	(void)state;
	assert_true(pf_hs_file_name_ok("/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"));
	assert_true(pf_hs_file_name_ok("libjvm.so"));
	assert_false(pf_hs_file_name_ok("/usr/lib/libjvm.so.1"));
	assert_false(pf_hs_file_name_ok("/usr/bin/java"));
	assert_false(pf_hs_file_name_ok("/opt/x/libjvm.so/other"));
}

static void test_not_a_jvm(void **state)
{
	(void)state;
	struct pf_hs_file f;
	char why[128];
	int fd = open("/proc/self/exe", O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pf_hs_file_read(fd, &f, why, sizeof(why)), -ENOTSUP);
	assert_string_equal(why, "libjvm.so exports no gHotSpotVMStructs");
	assert_int_equal(f.structs, 0);
	close(fd);
	char tmp[] = "/tmp/pf-hs-XXXXXX";
	fd = mkstemp(tmp);
	assert_true(fd >= 0);
	unlink(tmp);
	assert_int_equal(write(fd, "not an ELF file\n", 16), 16);
	assert_int_equal(pf_hs_file_read(fd, &f, why, sizeof(why)), -EINVAL);
	close(fd);
}

/* A reader whose every word is `value`. */
static int rd_value(void *ctx, uint64_t addr, void *buf, size_t len)
{
	(void)addr;
	uint64_t v = *(const uint64_t *)ctx;
	for (size_t i = 0; i + 8 <= len; i += 8)
		memcpy((char *)buf + i, &v, 8);
	return 0;
}

static int rd_fail(void *ctx, uint64_t addr, void *buf, size_t len)
{
	(void)ctx, (void)addr, (void)buf, (void)len;
	return -ESRCH;
}

static void test_unset_and_bounds(void **state)
{
	(void)state;
	struct pf_hs_file f = {.structs = 0x1000,
			       .types = 0x1008,
			       .s_stride = 0x1010,
			       .s_type_name = 0x1018,
			       .s_field_name = 0x1020,
			       .s_is_static = 0x1028,
			       .s_offset = 0x1030,
			       .s_address = 0x1038,
			       .t_stride = 0x1040,
			       .t_type_name = 0x1048,
			       .t_size = 0x1050,
			       .consts = 0x1058,
			       .c_stride = 0x1060,
			       .c_name = 0x1068,
			       .c_value = 0x1070};
	struct pf_hs_vm vm;
	char why[128];
	uint64_t v = 0;
	assert_int_equal(pf_hs_proc_read(&f, 0x7f0000000000, rd_value, &v, &vm, why, sizeof(why)),
			 -EAGAIN);
	v = PF_HS_LAYOUT_MAX + 1;
	assert_int_equal(pf_hs_proc_read(&f, 0x7f0000000000, rd_value, &v, &vm, why, sizeof(why)),
			 -ENOTSUP);
	assert_string_equal(why, "gHotSpotVMStructEntryArrayStride is 4097, past 4096");
	assert_int_equal(pf_hs_proc_read(&f, 0, rd_fail, NULL, &vm, why, sizeof(why)), -ESRCH);
	assert_int_equal(vm.present, 0);
}

struct jvm {
	struct pychild c;
	char dir[64], src[128];
	char lib[512];
	uint64_t bias, lo, hi; /* libjvm.so's load bias and the span of its mappings */
};

/* Where libjvm.so is mapped in pid: its path, the span of its mappings (with the anonymous
 * one right after them: its .bss), the load bias (the mapping of file offset 0 less its first
 * PT_LOAD's page-aligned address). */
static int find_libjvm(pid_t pid, struct jvm *j)
{
	char path[64], line[1024];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *m = fopen(path, "r");
	if (!m)
		return -errno;
	uint64_t first = 0;
	while (fgets(line, sizeof(line), m)) {
		unsigned long long lo, hi, off;
		char file[512] = "";
		int got = sscanf(line, "%llx-%llx %*s %llx %*s %*s %511s", &lo, &hi, &off, file);
		if (got == 3 && j->hi && lo == j->hi) { /* its .bss, right after the file */
			j->hi = hi;
			continue;
		}
		if (got < 4 || !pf_hs_file_name_ok(file))
			continue;
		snprintf(j->lib, sizeof(j->lib), "%s", file);
		if (!j->lo || lo < j->lo)
			j->lo = lo;
		if (hi > j->hi)
			j->hi = hi;
		if (off == 0 && !first)
			first = lo;
	}
	fclose(m);
	if (!first)
		return -ENOENT;
	int fd = open(j->lib, O_RDONLY);
	if (fd < 0)
		return -errno;
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	size_t n = 0;
	uint64_t vaddr = 0;
	bool got = false;
	if (e && elf_getphdrnum(e, &n) == 0)
		for (size_t i = 0; i < n && !got; i++) {
			GElf_Phdr ph;
			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD) {
				vaddr = ph.p_vaddr & ~(uint64_t)4095;
				got = true;
			}
		}
	if (e)
		elf_end(e);
	close(fd);
	if (!got)
		return -EINVAL;
	j->bias = first - vaddr;
	return 0;
}

static int rd_pid(void *ctx, uint64_t addr, void *buf, size_t len)
{
	return pf_py_read_mem(*(const int *)ctx, addr, buf, len);
}

static const char wait_src[] = "public class Wait {\n"
			       "  public static void main(String[] a) throws Exception {\n"
			       "    System.out.println(\"ready\");\n"
			       "    System.out.flush();\n"
			       "    System.in.read();\n"
			       "  }\n"
			       "}\n";

/* javaHotMethod runs until it is compiled, and then on. */
static const char hot_src[] =
    "public class Hot {\n"
    "  static long javaHotMethod(long x) {\n"
    "    long s = 0;\n"
    "    for (int i = 0; i < 1000; i++) s += (x ^ i) * 31;\n"
    "    return s;\n"
    "  }\n"
    "  public static void main(String[] a) throws Exception {\n"
    "    System.out.println(\"ready\");\n"
    "    System.out.flush();\n"
    "    long t = 0;\n"
    "    while (true) { t += javaHotMethod(t); if (t == 42) System.out.println(t); }\n"
    "  }\n"
    "}\n";

/* A JVM running class cls of source src (java's source-file mode), once it printed "ready";
 * *state NULL when the machine has no JDK. */
static int jvm_start(void **state, const char *cls, const char *src, const char *mode)
{
	const char *java = java_bin();
	if (!java) {
		*state = NULL;
		return 0;
	}
	struct jvm *j = calloc(1, sizeof(*j));
	snprintf(j->dir, sizeof(j->dir), "/tmp/pf-hs-XXXXXX");
	if (!mkdtemp(j->dir))
		return -1;
	snprintf(j->src, sizeof(j->src), "%s/%s.java", j->dir, cls);
	FILE *f = fopen(j->src, "w");
	if (!f)
		return -1;
	fputs(src, f);
	fclose(f);
	char *const argv[] = {(char *)java, (char *)mode, "-XX:-UsePerfData", j->src, NULL};
	char line[256] = "";
	if (pychild_exec(&j->c, argv) < 0 || pychild_line(&j->c, line, sizeof(line), 90000) < 0 ||
	    strcmp(line, "ready")) {
		print_error("java did not start: %s\n", line);
		return -1;
	}
	*state = j;
	return 0;
}

static int jvm_setup(void **state)
{
	return jvm_start(state, "Wait", wait_src, "-Xint");
}

static int hot_setup(void **state)
{
	return jvm_start(state, "Hot", hot_src, "-Xshare:auto");
}

static int jvm_teardown(void **state)
{
	struct jvm *j = *state;
	if (!j)
		return 0;
	pychild_stop(&j->c);
	unlink(j->src);
	rmdir(j->dir);
	free(j);
	return 0;
}

/* The JVM's tables, as the agent reads them: libjvm.so found in its maps, its exports, their
 * values in the process. */
static void read_vm(struct jvm *j, struct pf_hs_vm *vm)
{
	if (!j) {
		print_message("no JDK under /usr/lib/jvm: install openjdk-17-jdk-headless "
			      "(scripts/install-deps.sh does)\n");
		skip();
	}
	assert_int_equal(find_libjvm(j->c.pid, j), 0);
	int fd = open(j->lib, O_RDONLY);
	assert_true(fd >= 0);
	struct pf_hs_file f;
	char why[128];
	assert_int_equal(pf_hs_file_read(fd, &f, why, sizeof(why)), 0);
	close(fd);
	/* the variables are in the library's data and .bss */
	assert_true(j->bias + f.structs >= j->lo && j->bias + f.structs < j->hi);
	assert_true(j->bias + f.t_size >= j->lo && j->bias + f.t_size < j->hi);
	int pid = j->c.pid;
	int rc = pf_hs_proc_read(&f, j->bias, rd_pid, &pid, vm, why, sizeof(why));
	if (rc != 0)
		print_error("pf_hs_proc_read: %d (%s)\n", rc, why);
	assert_int_equal(rc, 0);
	assert_string_equal(why, "");
}

static void test_live_jvm(void **state)
{
	struct jvm *j = *state;
	struct pf_hs_vm vm;
	read_vm(j, &vm);
	/* CodeCache::_heaps is a static of libjvm.so */
	assert_true(vm.codecache_heaps >= j->lo && vm.codecache_heaps < j->hi);
	/* OpenJDK 17's x86_64 offsets of the fields the naming reads */
	assert_int_equal(vm.method_const, 0x8);
	assert_int_equal(vm.symbol_length, 0x4);
	assert_int_equal(vm.symbol_body, 0x6);
	assert_int_equal(vm.klass_name, 0x18);
	assert_int_equal(vm.cp_holder, 0x18);
	assert_true(vm.blob_frame_size > 0 && vm.blob_frame_size < 0x100);
	assert_true(vm.nm_method > 0 && vm.nm_method < 0x200);
	assert_true(vm.size_constmethod >= 0x30 && vm.size_constmethod < 0x100);
	assert_true(vm.size_constantpool >= 0x40 && vm.size_constantpool < 0x100);
	assert_int_equal(vm.size_heapblock, 16);
	assert_true(vm.codecache_low >= j->lo && vm.codecache_low < j->hi);
	/* the integer constants read */
	assert_int_equal(vm.c_has_linenumbers, 1);
	assert_int_equal(vm.c_fr_sender_sp, -1);
	assert_int_equal(vm.c_fr_last_sp, -2);
}

/* jcmd's list of compiled methods: the first of `method` ("Hot.javaHotMethod(J)J"), its
 * blob, code range and tier. 0, or -ENOENT while it is not compiled. */
static int codelist(pid_t pid, const char *method, uint64_t *blob, uint64_t *lo, uint64_t *hi,
		    int *level)
{
	char cmd[512], line[1024];
	const char *java = java_bin();
	snprintf(cmd, sizeof(cmd), "%.*s/jcmd %d Compiler.codelist 2>&1",
		 (int)(strrchr(java, '/') - java), java, (int)pid);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -errno;
	int rc = -ENOENT;
	while (fgets(line, sizeof(line), p)) {
		int id, st;
		char name[512];
		unsigned long long b, l, h;
		if (rc &&
		    sscanf(line, "%d %d %d %511s [%llx, %llx - %llx]", &id, level, &st, name, &b,
			   &l, &h) == 7 &&
		    !strcmp(name, method)) {
			*blob = b, *lo = l, *hi = h;
			rc = 0;
		}
	}
	pclose(p);
	return rc;
}

/* A compiled method found from an address in its code: the blob jcmd lists, its Method*
 * named; an address outside the code cache is in no blob. */
static void test_live_code(void **state)
{
	struct jvm *j = *state;
	struct pf_hs_vm vm;
	read_vm(j, &vm);
	uint64_t blob = 0, lo = 0, hi = 0;
	int level = 0, rc = -ENOENT;
	for (int i = 0; i < 60 && rc == -ENOENT; i++) {
		rc = codelist(j->c.pid, "Hot.javaHotMethod(J)J", &blob, &lo, &hi, &level);
		if (rc == -ENOENT)
			usleep(500 * 1000);
	}
	assert_int_equal(rc, 0);
	int pid = j->c.pid;
	struct pf_hs_blob b;
	rc = pf_hs_blob_find(&vm, rd_pid, &pid, lo + (hi - lo) / 2, &b);
	if (rc)
		print_error("pf_hs_blob_find(%#llx): %d\n",
			    (unsigned long long)(lo + (hi - lo) / 2), rc);
	assert_int_equal(rc, 0);
	assert_int_equal(b.start, blob);
	assert_int_equal(b.code_begin, lo);
	assert_string_equal(b.name, "nmethod");
	assert_int_equal(b.comp_level, level);
	assert_true(b.frame_size > 0);
	assert_true(b.method != 0);
	struct pf_hs_method m;
	assert_int_equal(pf_hs_method_name(&vm, rd_pid, &pid, b.method, &m), 0);
	assert_string_equal(m.klass, "Hot");
	assert_string_equal(m.name, "javaHotMethod");
	assert_string_equal(m.sig, "(J)J");
	assert_string_equal(m.file, "Hot.java");
	/* bci 0 is `long s = 0;`, line 3 of hot_src; the loop's test is on line 4 */
	uint32_t line = 0;
	assert_int_equal(pf_hs_method_line(&vm, rd_pid, &pid, b.method, 0, &line), 0);
	assert_int_equal(line, 3);
	assert_int_equal(pf_hs_method_line(&vm, rd_pid, &pid, b.method, 5, &line), 0);
	assert_int_equal(line, 4);
	assert_int_equal(pf_hs_method_line(&vm, rd_pid, &pid, b.method, 60000, &line), -ENOENT);
	assert_int_equal(pf_hs_blob_find(&vm, rd_pid, &pid, 0x1000, &b), -ENOENT);
	assert_int_equal(pf_hs_method_name(&vm, rd_pid, &pid, 0, &m), -EINVAL);
	/* its scope descriptors: javaHotMethod calls nothing, so every point of its code is in
	 * javaHotMethod itself, at a bci of its bytecodes */
	assert_int_not_equal(pf_hs_vm_scopes(&vm), 0);
	assert_int_equal(pf_hs_blob_find(&vm, rd_pid, &pid, lo + (hi - lo) / 2, &b), 0);
	uint64_t pcdesc = 0;
	assert_int_equal(pf_hs_pcdesc_find(&vm, rd_pid, &pid, &b, lo + (hi - lo) / 2, &pcdesc), 0);
	assert_true(pcdesc > b.start && pcdesc < b.start + (uint64_t)b.size);
	struct pf_hs_scope sc[PF_HS_SCOPES_MAX];
	int n = pf_hs_scopes_at(&vm, rd_pid, &pid, &b, pcdesc, sc, PF_HS_SCOPES_MAX);
	print_message("  pc %#llx: %d scopes, bci %d\n", (unsigned long long)(lo + (hi - lo) / 2),
		      n, n > 0 ? sc[0].bci : -2);
	assert_int_equal(n, 1);
	assert_int_equal(sc[0].method, b.method);
	assert_true(sc[0].bci >= -1 && sc[0].bci < 64);
	assert_int_equal(pf_hs_scopes_at(&vm, rd_pid, &pid, &b, pcdesc + 1, sc, 4), -EINVAL);
}

/* Waits (at most 30 s) for jcmd to list javaHotMethod's compiled code: [*lo, *hi). */
static void hot_code(struct jvm *j, uint64_t *lo, uint64_t *hi)
{
	uint64_t blob = 0;
	int level = 0, rc = -ENOENT;
	for (int i = 0; i < 60 && rc == -ENOENT; i++) {
		rc = codelist(j->c.pid, "Hot.javaHotMethod(J)J", &blob, lo, hi, &level);
		if (rc == -ENOENT)
			usleep(500 * 1000);
	}
	assert_int_equal(rc, 0);
}

static void test_live_unwind(void **state)
{
	struct jvm *j = *state;
	if (!j) {
		print_message("no JDK: skipped\n");
		skip();
	}
	uint64_t lo = 0, hi = 0;
	hot_code(j, &lo, &hi);
	struct pf_symbolizer_options so = {0};
	struct pf_symbolizer *sym = pf_symbolizer_new(&so);
	struct pf_hs_unwind *u = pf_hs_unwind_new();
	assert_non_null(sym);
	assert_non_null(u);
	uint32_t pid = (uint32_t)j->c.pid, self = (uint32_t)getpid();
	assert_int_equal(pf_symbolizer_capture(sym, pid), 0);
	assert_int_equal(pf_symbolizer_capture(sym, self), 0);
	assert_int_equal(pf_hs_unwind_seen(u, sym, self), 0);
	assert_false(pf_hs_unwind_has(u, self));
	assert_int_equal(pf_hs_unwind_seen(u, sym, pid), 1);
	assert_true(pf_hs_unwind_has(u, pid));

	uint64_t ips[2] = {lo + (hi - lo) / 2, 0x1000};
	pf_hs_unwind_note(u, pid, ips, 2);
	assert_true(PF_JVM_IS_FRAME(ips[0]));
	assert_int_equal(PF_JVM_FRAME_KIND(ips[0]), PF_JVM_PCDESC);
	assert_int_equal(ips[1], 0x1000);

	struct pf_prof_window *w = pf_prof_window_new();
	assert_non_null(w);
	struct pf_prof_frame f = {.address = ips[0], .mapping = 3, .kind = PF_FRAME_JVM};
	assert_int_equal(pf_hs_walker.name(u, pid, w, &f, 1), 0);
	assert_int_equal(f.mapping, -1);
	assert_non_null(f.function);
	assert_string_equal(f.function, "Hot.javaHotMethod");
	assert_string_equal(f.file, "Hot.java");
	assert_string_equal(f.system_name, "Hot.javaHotMethod(J)J");
	struct pf_hs_unwind_stats st;
	pf_hs_unwind_stats(u, &st);
	assert_int_equal(st.processes, 1);
	assert_int_equal(st.frames, 1);
	assert_int_equal(st.named, 1);
	assert_int_equal(st.names, 1);

	/* an interpreted frame's word (the kernel's): its method at the line of its bytecode
	 * index (bci 5 is on line 4, test_live_code) */
	struct pf_hs_vm vm;
	read_vm(j, &vm);
	int ipid = j->c.pid;
	struct pf_hs_blob b;
	assert_int_equal(pf_hs_blob_find(&vm, rd_pid, &ipid, lo + (hi - lo) / 2, &b), 0);
	struct pf_prof_frame fi = {.address = PF_JVM_INTERP_FRAME(b.method, 5),
				   .kind = PF_FRAME_JVM};
	assert_int_equal(PF_JVM_INTERP_METHOD(fi.address), b.method);
	assert_int_equal(PF_JVM_INTERP_BCI(fi.address), 5);
	assert_int_equal(pf_hs_walker.name(u, pid, w, &fi, 1), 0);
	assert_non_null(fi.function);
	assert_string_equal(fi.function, "Hot.javaHotMethod");
	assert_int_equal(fi.line, 4);

	/* the kernel's entry, made once: the code heaps sorted and disjoint, the compiled code
	 * and the interpreter inside them, the x86_64 interpreter frame's slots */
	struct pf_bpf_jvm_proc e;
	assert_int_equal(pf_hs_unwind_kernel_entry(u, pid, &e), 1);
	assert_int_equal(pf_hs_unwind_kernel_entry(u, pid, &e), 0);
	assert_true(e.n_heaps >= 1 && e.n_heaps <= PF_JVM_HEAPS);
	bool code_in = false, interp_in = false;
	for (unsigned i = 0; i < e.n_heaps; i++) {
		assert_true(e.heaps[i].lo < e.heaps[i].hi);
		assert_true(e.heaps[i].log2_seg >= 4 && e.heaps[i].log2_seg <= 16);
		assert_true(i == 0 || e.heaps[i].lo >= e.heaps[i - 1].hi);
		code_in |= lo >= e.heaps[i].lo && hi <= e.heaps[i].hi;
		interp_in |= e.interp_lo >= e.heaps[i].lo && e.interp_hi <= e.heaps[i].hi;
	}
	assert_true(code_in);
	assert_true(interp_in);
	assert_true(e.interp_lo < e.interp_hi);
	assert_int_equal(e.fp_method, -24);
	assert_int_equal(e.fp_bcp, -64);
	assert_int_equal(e.fp_sender_sp, -8);
	assert_int_equal(e.heapblock_size, 16);
	assert_int_equal(e.blob_frame_size, vm.blob_frame_size);
	assert_int_equal(e.code_offset, 0); /* JDK 17: CodeBlob::_code_begin, a pointer */
	pf_hs_unwind_stats(u, &st);
	assert_int_equal(st.walked, 1);

	/* off: the JVM is forgotten, its addresses stay what they were */
	assert_true(pf_interp_walker_enable(&pf_hs_walker, u, false));
	assert_false(pf_hs_unwind_has(u, pid));
	uint64_t again = lo + (hi - lo) / 2;
	pf_hs_unwind_note(u, pid, &again, 1);
	assert_int_equal(again, lo + (hi - lo) / 2);
	pf_prof_window_free(w);
	pf_hs_unwind_free(u);
	pf_symbolizer_free(sym);
}

int main(void)
{
	elf_version(EV_CURRENT);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_name),
	    cmocka_unit_test(test_not_a_jvm),
	    cmocka_unit_test(test_unset_and_bounds),
	    cmocka_unit_test_setup_teardown(test_live_jvm, jvm_setup, jvm_teardown),
	    cmocka_unit_test_setup_teardown(test_live_code, hot_setup, jvm_teardown),
	    cmocka_unit_test_setup_teardown(test_live_unwind, hot_setup, jvm_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
