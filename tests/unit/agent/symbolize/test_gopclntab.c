/* test_gopclntab.c — unit tests of agent/symbolize/gopclntab.h on tables built here in each
 * layout the Go linker has written (1.2–1.15, 1.16–1.17, 1.18–1.19, 1.20+): entries, sizes
 * and names come out; a wrong magic, header or pointer size is refused; a table claiming more
 * functions than the cap, or than its bytes hold, is refused; a name past the buffer or not
 * ending in it is skipped; and every truncation of a valid table parses without reading past
 * it (the ASan pass of the suite checks the reads). The stack-pointer programs (Go 1.16+)
 * decode to their ranges, never past their function, and cut or negative ones are refused.
 * Real Go binaries are in test_symbolize.c, test_unwind_table.c and tests/ebpf. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "symbolize/gopclntab.h"

#define TEXT 0x401000u

static const struct {
	uint32_t off;
	const char *name;
} funcs[] = {{0x00, "runtime.goexit"}, {0x40, "main.hotLeaf"}, {0x80, "main.main"}};
#define NF 3
#define END_OFF 0x100u

static void put(uint8_t *b, size_t at, uint64_t v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		b[at + i] = (uint8_t)(v >> (8 * i));
}

/* A table of funcs in the layout of Go version ver (12, 116, 118, 120) into b; its length. */
static size_t build(uint8_t *b, size_t cap, int ver)
{
	memset(b, 0, cap);
	uint32_t magic = ver == 12 ? 0xfffffffbu : ver == 116 ? 0xfffffffau
				      : ver == 118 ? 0xfffffff0u : 0xfffffff1u;
	put(b, 0, magic, 4);
	b[6] = 1; /* quantum */
	b[7] = 8; /* pointer size */
	size_t nwords = ver == 12 ? 1 : ver == 116 ? 7 : 8;
	size_t at = 8 + nwords * 8;
	size_t names = at, name_off[NF];
	for (int i = 0; i < NF; i++) { /* the names (1.2: anywhere in the table) */
		name_off[i] = at - (ver == 12 ? 0 : names);
		size_t l = strlen(funcs[i].name) + 1;
		memcpy(b + at, funcs[i].name, l);
		at += l;
	}
	at = (at + 7) & ~(size_t)7;
	size_t fs = ver >= 118 ? 4 : 8;
	size_t functab = ver == 12 ? 16 : at; /* 1.2: right after the header */
	if (ver == 12) { /* move the names behind the function table and records */
		size_t tab_end = 16 + (2 * NF + 1) * fs + 4, rec = (tab_end + 7) & ~(size_t)7;
		size_t nm = rec + NF * 16;
		for (int i = 0; i < NF; i++) {
			size_t l = strlen(funcs[i].name) + 1;
			memcpy(b + nm, funcs[i].name, l);
			name_off[i] = nm;
			nm += l;
		}
		memset(b + 16, 0, rec - 16);
		for (int i = 0; i < NF; i++) {
			put(b, functab + 2 * i * fs, TEXT + funcs[i].off, fs);
			put(b, functab + (2 * i + 1) * fs, rec + i * 16, fs);
			put(b, rec + i * 16, TEXT + funcs[i].off, 8);
			put(b, rec + i * 16 + 8, name_off[i], 4);
		}
		put(b, functab + 2 * NF * fs, TEXT + END_OFF, fs);
		put(b, 8, NF, 8);
		return nm;
	}
	size_t rec = (functab + (2 * NF + 1) * fs + 7) & ~(size_t)7;
	/* the pctab after the records: one pcsp program for all (0 at entry, 16 from +4, 0
	 * again from +0x34), at offset 1 (0 means none) */
	size_t pctab = rec + NF * 32;
	static const uint8_t pcsp[] = {0, 2, 4, 32, 0x30, 31, 0x0c, 0};
	memcpy(b + pctab, pcsp, sizeof(pcsp));
	for (int i = 0; i < NF; i++) {
		uint64_t entry = ver >= 118 ? funcs[i].off : TEXT + funcs[i].off;
		put(b, functab + 2 * i * fs, entry, fs);
		put(b, functab + (2 * i + 1) * fs, rec - functab + i * 32, fs);
		put(b, rec + i * 32, entry, fs);
		put(b, rec + i * 32 + fs, name_off[i], 4);
		put(b, rec + i * 32 + fs + 12, 1, 4); /* pcsp */
	}
	put(b, functab + 2 * NF * fs, ver >= 118 ? END_OFF : TEXT + END_OFF, fs);
	put(b, 8, NF, 8); /* nfunc */
	if (ver == 116) {
		put(b, 8 + 2 * 8, names, 8);
		put(b, 8 + 5 * 8, pctab, 8);
		put(b, 8 + 6 * 8, functab, 8);
	} else {
		put(b, 8 + 2 * 8, TEXT, 8); /* textStart (not read: .text's address is) */
		put(b, 8 + 3 * 8, names, 8);
		put(b, 8 + 6 * 8, pctab, 8);
		put(b, 8 + 7 * 8, functab, 8);
	}
	return pctab + sizeof(pcsp);
}

static void check_funcs(const struct pf_go_func *f, size_t n)
{
	assert_int_equal(n, NF);
	for (int i = 0; i < NF; i++) {
		assert_int_equal(f[i].entry, TEXT + funcs[i].off);
		uint32_t next = i + 1 < NF ? funcs[i + 1].off : END_OFF;
		assert_int_equal(f[i].size, next - funcs[i].off);
		assert_string_equal(f[i].name, funcs[i].name);
	}
}

static void test_versions(void **state)
{
	(void)state;
	static const int vers[] = {12, 116, 118, 120};
	uint8_t b[1024];
	for (size_t v = 0; v < 4; v++) {
		size_t len = build(b, sizeof(b), vers[v]);
		assert_true(pf_gopclntab_looks_like(b, len));
		struct pf_go_func *f;
		size_t n;
		assert_int_equal(pf_gopclntab_parse(b, len, TEXT, &f, &n), 0);
		check_funcs(f, n);
		free(f);
	}
}

static int parse(const uint8_t *b, size_t len)
{
	struct pf_go_func *f = (void *)1;
	size_t n = 7;
	int rc = pf_gopclntab_parse(b, len, TEXT, &f, &n);
	if (rc < 0) {
		assert_null(f);
		assert_int_equal(n, 0);
	}
	free(f);
	return rc;
}

static void test_refused(void **state)
{
	(void)state;
	uint8_t b[1024];
	size_t len = build(b, sizeof(b), 120);
	b[3] ^= 0x10; /* magic */
	assert_false(pf_gopclntab_looks_like(b, len));
	assert_int_equal(parse(b, len), -ENOTSUP);
	len = build(b, sizeof(b), 120);
	b[4] = 1; /* the header's zero bytes */
	assert_int_equal(parse(b, len), -EINVAL);
	len = build(b, sizeof(b), 120);
	b[7] = 3; /* pointer size */
	assert_int_equal(parse(b, len), -EINVAL);
	len = build(b, sizeof(b), 120);
	b[6] = 3; /* quantum */
	assert_int_equal(parse(b, len), -EINVAL);
	len = build(b, sizeof(b), 120);
	put(b, 8, PF_GO_MAX_FUNCS + 1, 8);
	assert_int_equal(parse(b, len), -E2BIG);
	put(b, 8, 1000, 8); /* more than the bytes hold */
	assert_int_equal(parse(b, len), -EINVAL);
	put(b, 8, UINT64_MAX / 2, 8);
	assert_int_equal(parse(b, len), -E2BIG);
	len = build(b, sizeof(b), 120);
	put(b, 8 + 7 * 8, len, 8); /* the function table past the end */
	assert_int_equal(parse(b, len), -EINVAL);
	assert_int_equal(parse(b, 15), -EINVAL);
}

static void test_bad_names_skipped(void **state)
{
	(void)state;
	uint8_t b[1024];
	size_t len = build(b, sizeof(b), 118);
	/* the first record's name offset past the names; the last name without its NUL at the
	 * buffer's end */
	size_t functab = (size_t)b[8 + 7 * 8] | (size_t)b[8 + 7 * 8 + 1] << 8;
	size_t rec0 = functab + (size_t)b[functab + 4];
	put(b, rec0 + 4, 5000, 4);
	struct pf_go_func *f;
	size_t n;
	assert_int_equal(pf_gopclntab_parse(b, len, TEXT, &f, &n), 0);
	assert_int_equal(n, NF - 1);
	assert_string_equal(f[0].name, "main.hotLeaf");
	free(f);
	/* a table that ends inside the names: every name found ends inside it */
	len = build(b, sizeof(b), 12);
	size_t cut = len - 3; /* inside "main.main" */
	uint8_t *t = malloc(cut);
	memcpy(t, b, cut);
	assert_int_equal(pf_gopclntab_parse(t, cut, TEXT, &f, &n), 0);
	assert_int_equal(n, NF - 1);
	for (size_t i = 0; i < n; i++)
		assert_non_null(memchr(f[i].name, 0, (size_t)(t + cut - (const uint8_t *)f[i].name)));
	free(f);
	free(t);
}

struct sp_seen {
	uint64_t pc[8];
	int32_t sp[8];
	size_t n;
	const struct pf_go_func *f;
};

static int on_sp(void *ctx, uint64_t pc, int32_t sp)
{
	struct sp_seen *s = ctx;
	assert_true(pc >= s->f->entry && pc < s->f->entry + s->f->size);
	assert_true(s->n == 0 || pc > s->pc[s->n - 1]);
	assert_true(s->n < 8);
	s->pc[s->n] = pc;
	s->sp[s->n++] = sp;
	return 0;
}

/* The stack-pointer programs: decoded from Go 1.16 on, never past their function; cut ones
 * refused; none before 1.16. */
static void test_sp(void **state)
{
	(void)state;
	static const int vers[] = {116, 118, 120};
	uint8_t b[1024];
	for (size_t v = 0; v < 3; v++) {
		size_t len = build(b, sizeof(b), vers[v]);
		struct pf_go_func *f;
		size_t n;
		assert_int_equal(pf_gopclntab_parse(b, len, TEXT, &f, &n), 0);
		assert_int_equal(n, NF);
		for (size_t i = 0; i < n; i++) {
			struct sp_seen s = {.f = &f[i]};
			assert_int_equal(pf_gopclntab_sp(b, len, &f[i], on_sp, &s), 0);
			assert_int_equal(s.n, 3);
			assert_int_equal(s.pc[0], f[i].entry);
			assert_int_equal(s.sp[0], 0);
			assert_int_equal(s.pc[1], f[i].entry + 4);
			assert_int_equal(s.sp[1], 16);
			assert_int_equal(s.pc[2], f[i].entry + 0x34);
			assert_int_equal(s.sp[2], 0);
		}
		/* the program cut inside its varints */
		assert_int_equal(pf_gopclntab_sp(b, len - 3, &f[0], on_sp,
						 &(struct sp_seen){.f = &f[0]}),
				 -EINVAL);
		/* a function without one */
		struct pf_go_func none = f[0];
		none.pcsp = 0;
		assert_int_equal(pf_gopclntab_sp(b, len, &none, on_sp, NULL), -ENOTSUP);
		/* a value that goes below 0 */
		uint8_t neg[1024];
		memcpy(neg, b, len);
		neg[len - 8 + 3] = 33; /* 16 -> -17 + 1 */
		struct sp_seen s = {.f = &f[0]};
		assert_int_equal(pf_gopclntab_sp(neg, len, &f[0], on_sp, &s), -EINVAL);
		free(f);
	}
	size_t len = build(b, sizeof(b), 12);
	struct pf_go_func *f;
	size_t n;
	assert_int_equal(pf_gopclntab_parse(b, len, TEXT, &f, &n), 0);
	assert_int_equal(pf_gopclntab_sp(b, len, &f[0], on_sp, NULL), -ENOTSUP);
	free(f);
}

static void test_every_truncation(void **state)
{
	(void)state;
	static const int vers[] = {12, 116, 118, 120};
	uint8_t b[1024];
	for (size_t v = 0; v < 4; v++) {
		size_t len = build(b, sizeof(b), vers[v]);
		for (size_t cut = 0; cut <= len; cut++) {
			uint8_t *t = malloc(cut ? cut : 1); /* exactly cut bytes: ASan sees overreads */
			memcpy(t, b, cut);
			struct pf_go_func *f = NULL;
			size_t n = 0;
			int rc = pf_gopclntab_parse(t, cut, TEXT, &f, &n);
			assert_true(rc == 0 || rc == -EINVAL);
			assert_true(n <= NF);
			for (size_t i = 0; i < n; i++)
				assert_non_null(memchr(f[i].name, 0,
						       (size_t)(t + cut - (const uint8_t *)f[i].name)));
			free(f);
			free(t);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_versions),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_bad_names_skipped),
		cmocka_unit_test(test_sp),
		cmocka_unit_test(test_every_truncation),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
