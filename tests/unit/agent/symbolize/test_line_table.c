/* test_line_table.c — unit tests of agent/symbolize/line_table.h: a table built from an -O2 -g
 * program answers every address of its .text as libdw does (the innermost position is the
 * line-table row, the inlined chain ends at the real function's call site); a file without
 * DWARF, a file that is not ELF, a bad key and a table over the row bound are refused with
 * their own errors; a damaged, truncated or misnamed table file is refused on open; a
 * directory over its bound loses its least recently used tables first. */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "symbolize/line_table.h"
#include "unwind/table_builder.h"

static char dir[64];

/* Two functions inlined into one another, in a loop of a real function. */
static const char chain_src[] =
	"static inline __attribute__((always_inline)) unsigned\n"
	"rot_inner(unsigned v) { v ^= v << 7; return v ^ (v >> 9); }\n"
	"static inline __attribute__((always_inline)) unsigned\n"
	"rot_outer(unsigned v) { return rot_inner(v * 5u) + 1u; }\n"
	"__attribute__((noinline)) unsigned walk_all(unsigned n)\n"
	"{\n"
	"\tunsigned acc = 3; for (unsigned i = 0; i < n; i++) acc = rot_outer(acc ^ i);\n"
	"\treturn acc;\n"
	"}\n"
	"int main(int argc, char **argv) { (void)argv; return (int)walk_all((unsigned)argc) & 1; }\n";

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
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/pf-lines-test.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	char src[128];
	snprintf(src, sizeof(src), "%s/chain.c", dir);
	FILE *f = fopen(src, "w");
	if (!f)
		return -1;
	fputs(chain_src, f);
	fclose(f);
	sh("cc -g -O2 -o %s/chain %s", dir, src);
	sh("cc -O2 -o %s/plain %s", dir, src);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	sh("rm -rf %s", dir);
	return 0;
}

static int open_in(const char *name)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

static bool str_same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

static void test_lookup_equals_libdw(void **state)
{
	(void)state;
	int fd = open_in("chain");
	assert_int_equal(pf_line_table_build_store(0, fd, dir, "c0ffee01"), 0);
	struct pf_line_table *t = NULL;
	assert_int_equal(pf_line_table_open(dir, "c0ffee01", &t), 0);
	assert_true(pf_line_table_rows(t) > 4);

	Dwarf *dw = dwarf_begin(fd, DWARF_C_READ);
	assert_non_null(dw);
	Elf *elf = dwarf_getelf(dw);
	size_t shstrndx;
	assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
	uint64_t lo = 0, hi = 0;
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
		GElf_Shdr sh;
		gelf_getshdr(scn, &sh);
		if (!strcmp(elf_strptr(elf, shstrndx, sh.sh_name), ".text")) {
			lo = sh.sh_addr;
			hi = sh.sh_addr + sh.sh_size;
		}
	}
	assert_true(hi > lo);
	struct pf_line_result *r = malloc(sizeof(*r));
	assert_non_null(r);
	size_t with_line = 0, with_chain = 0;
	for (uint64_t a = lo; a < hi; a++) {
		assert_int_equal(pf_line_table_lookup(t, a, r), 0);
		Dwarf_Die cu;
		const char *file = NULL;
		int line = 0;
		Dwarf_Line *l = dwarf_addrdie(dw, a, &cu) ? dwarf_getsrc_die(&cu, a) : NULL;
		if (l) {
			file = dwarf_linesrc(l, NULL, NULL);
			dwarf_lineno(l, &line);
		}
		/* the CPU's own position: the innermost inlined function's, else the frame's */
		const char *tf = r->n_inl ? r->inl[0].file : r->file;
		uint32_t tl = r->n_inl ? r->inl[0].line : r->line;
		if (!str_same(file, tf) || (uint32_t)(line > 0 ? line : 0) != tl)
			fail_msg("0x%llx: libdw %s:%d, table %s:%u", (unsigned long long)a, file,
				 line, tf, tl);
		with_line += file != NULL;
		if (r->n_inl == 2) {
			assert_string_equal(r->inl[0].name, "rot_inner");
			assert_string_equal(r->inl[1].name, "rot_outer");
			assert_int_equal(r->inl[1].line, 4); /* rot_inner called from rot_outer */
			assert_int_equal(r->line, 7);        /* rot_outer called from walk_all */
			assert_non_null(strstr(r->file, "chain.c"));
			with_chain++;
		}
	}
	print_message("%llu addresses, %zu with a line, %zu in rot_inner inlined twice\n",
		      (unsigned long long)(hi - lo), with_line, with_chain);
	assert_true(with_line > 32); /* .text also holds crt code without DWARF */
	assert_true(with_chain > 0);
	/* outside the table's addresses: nothing, not an error */
	assert_int_equal(pf_line_table_lookup(t, 0, r), 0);
	assert_null(r->file);
	assert_int_equal(r->n_inl, 0);
	assert_true(pf_line_table_memory(t) < 8192);
	free(r);
	dwarf_end(dw);
	pf_line_table_close(t);
	close(fd);
}

static void test_refused_builds(void **state)
{
	(void)state;
	int plain = open_in("plain"), src = open_in("chain.c"), fd = open_in("chain");
	assert_int_equal(pf_line_table_build_store(0, plain, dir, "0000aa"), -ENOENT);
	assert_int_equal(pf_line_table_build_store(0, src, dir, "0000ab"), -EINVAL);
	assert_int_equal(pf_line_table_build_store(0, fd, dir, "../evil"), -EINVAL);
	assert_int_equal(pf_line_table_build_store(0, fd, dir, ""), -EINVAL);
	assert_int_equal(pf_line_table_build_store(2, fd, dir, "0000ac"), -E2BIG);
	struct pf_line_table *t = NULL;
	for (const char *k = "0000aa"; k; k = !strcmp(k, "0000aa") ? "0000ac" : NULL) {
		assert_int_equal(pf_line_table_open(dir, k, &t), -ENOENT); /* nothing written */
		assert_null(t);
	}
	assert_int_equal(pf_line_table_open(dir, "../x", &t), -EINVAL);
	close(plain);
	close(src);
	close(fd);
}

/* Writes a good table under key, then lets damage(path) spoil it: the open must refuse it. */
static void refused_after(const char *key, void (*damage)(const char *path))
{
	int fd = open_in("chain");
	assert_int_equal(pf_line_table_build_store(0, fd, dir, key), 0);
	close(fd);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s.lin", dir, key);
	damage(path);
	struct pf_line_table *t = NULL;
	assert_int_equal(pf_line_table_open(dir, key, &t), -EBADMSG);
	assert_null(t);
}

static void flip_row_byte(const char *path)
{
	FILE *f = fopen(path, "r+b");
	assert_non_null(f);
	assert_int_equal(fseek(f, 64 + 20, SEEK_SET), 0); /* the second row's file */
	int c = fgetc(f);
	assert_int_equal(fseek(f, 64 + 20, SEEK_SET), 0);
	fputc(c ^ 0x40, f);
	fclose(f);
}

static void cut_last_byte(const char *path)
{
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(truncate(path, st.st_size - 1), 0);
}

static void test_damaged_files(void **state)
{
	(void)state;
	refused_after("0000bad1", flip_row_byte);
	refused_after("0000bad2", cut_last_byte);
	int fd = open_in("chain");
	assert_int_equal(pf_line_table_build_store(0, fd, dir, "0000bad3"), 0);
	close(fd);
	char from[PATH_MAX], to[PATH_MAX];
	snprintf(from, sizeof(from), "%s/0000bad3.lin", dir);
	snprintf(to, sizeof(to), "%s/0000beef.lin", dir);
	assert_int_equal(rename(from, to), 0);
	struct pf_line_table *t = NULL;
	assert_int_equal(pf_line_table_open(dir, "0000beef", &t), -EBADMSG); /* another key's */
	assert_int_equal(pf_line_table_open(dir, "0000bad3", &t), -ENOENT);
}

static void set_mtime(const char *d, const char *key, time_t t)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s.lin", d, key);
	struct timespec ts[2] = {{t, 0}, {t, 0}};
	assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static bool table_exists(const char *d, const char *key)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s.lin", d, key);
	return access(path, F_OK) == 0;
}

/* The directory's bound: the least recently used tables go first, and opening a table makes
 * it recently used; other files stay. */
static void test_prune(void **state)
{
	(void)state;
	char pdir[128], other[160];
	snprintf(pdir, sizeof(pdir), "%s/prune", dir);
	assert_int_equal(pf_tbuilder_prune(pdir, ".lin", 1), 0); /* no directory yet: nothing */
	int fd = open_in("chain");
	const char *keys[] = {"0000aaa1", "0000aaa2", "0000aaa3"};
	for (int i = 0; i < 3; i++)
		assert_int_equal(pf_line_table_build_store(0, fd, pdir, keys[i]), 0);
	close(fd);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s.lin", pdir, keys[0]);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	uint64_t one = (uint64_t)st.st_size;
	snprintf(other, sizeof(other), "%s/keep.txt", pdir);
	FILE *f = fopen(other, "w");
	assert_non_null(f);
	fputs("not a table\n", f);
	fclose(f);
	for (int i = 0; i < 3; i++)
		set_mtime(pdir, keys[i], 1000 * (i + 1));
	struct pf_line_table *t = NULL;
	assert_int_equal(pf_line_table_open(pdir, keys[0], &t), 0); /* the oldest, used now */
	pf_line_table_close(t);
	assert_int_equal(pf_tbuilder_prune(pdir, ".lin", one * 4), (int64_t)(3 * one)); /* kept */
	assert_int_equal(pf_tbuilder_prune(pdir, ".lin", one * 5 / 2), (int64_t)one);
	assert_true(table_exists(pdir, keys[0]));
	assert_false(table_exists(pdir, keys[1]));
	assert_false(table_exists(pdir, keys[2]));
	assert_int_equal(access(other, F_OK), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lookup_equals_libdw),
		cmocka_unit_test(test_refused_builds),
		cmocka_unit_test(test_damaged_files),
		cmocka_unit_test(test_prune),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
