/* test_hotspot_vm.c — unit tests of agent/interp/hotspot_vm.h on a process image built here:
 * VMStructs and VMTypes tables with JDK 17's entry layout and OpenJDK 17.0.15's x86_64 offsets
 * of the fields read (an nmethod's Method* is CompiledMethod::_method there), at a fake
 * address, read through a reader of that image; a table missing a required field, a name on
 * the image's last bytes, a layout that does not fit its stride, a table without its end and a
 * reader that fails. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hotspot_vm.h"

#define BASE 0x7f0000100000ull
#define IMG 65536

struct image {
	uint8_t b[IMG];
	size_t strs;  /* next free string byte */
	bool endless; /* every entry past the image reads as an unrelated one */
};

static int rd(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct image *im = ctx;
	if (addr < BASE || addr - BASE > IMG || len > IMG - (addr - BASE)) {
		if (!im->endless)
			return -EFAULT;
		memset(buf, 0, len);
		if (len == 8)
			memcpy(buf, &(uint64_t){BASE + 0x8000}, 8); /* "Other" */
		return 0;
	}
	memcpy(buf, im->b + (addr - BASE), len);
	return 0;
}

static uint64_t str(struct image *im, const char *s)
{
	size_t n = strlen(s) + 1, at = im->strs;
	memcpy(im->b + at, s, n);
	im->strs += n;
	return BASE + at;
}

static void put64(struct image *im, uint64_t addr, uint64_t v)
{
	memcpy(im->b + (addr - BASE), &v, 8);
}

static const struct pf_hs_layout jdk17 = PF_HS_LAYOUT_JDK17(BASE, BASE + 0x4000);

static const struct {
	const char *type, *field;
	int is_static;
	uint64_t v;
} rows[] = {
    {"CodeCache", "_heaps", 1, 0x7f00aa000010},
    {"CodeHeap", "_memory", 0, 0x8},
    {"CodeHeap", "_segmap", 0, 0x78},
    {"CodeHeap", "_log2_segment_size", 0, 0x100},
    {"VirtualSpace", "_low", 0, 0x10},
    {"VirtualSpace", "_high", 0, 0x18},
    {"Unrelated", "_x", 0, 0x99},
    {"CodeBlob", "_name", 0, 0x60},
    {"CodeBlob", "_size", 0, 0xc},
    {"CodeBlob", "_frame_size", 0, 0x1c},
    {"CodeBlob", "_code_begin", 0, 0x20},
    {"CompiledMethod", "_method", 0, 0x70},
    {"nmethod", "_entry_bci", 0, 0xc0},
    {"Method", "_constMethod", 0, 0x8},
    {"ConstMethod", "_constants", 0, 0x8},
    {"ConstMethod", "_name_index", 0, 0x22},
    {"ConstMethod", "_signature_index", 0, 0x24},
    {"ConstMethod", "_flags", 0, 0x1c},
    {"ConstMethod", "_code_size", 0, 0x20},
    {"ConstantPool", "_pool_holder", 0, 0x18},
    {"Klass", "_name", 0, 0x18},
    {"Symbol", "_length", 0, 0x4},
    {"Symbol", "_body", 0, 0x6},
    {"CodeCache", "_low_bound", 1, 0x7f00aa000020},
    {"CodeCache", "_high_bound", 1, 0x7f00aa000018},
    {"GrowableArrayBase", "_len", 0, 0x0},
    {"GrowableArray<int>", "_data", 0, 0x8},
    {"HeapBlock::Header", "_used", 0, 0x8},
};

/* Builds both tables; the row `skip` (or none when -1) is left out. */
static struct image *build(int skip)
{
	struct image *im = calloc(1, sizeof(*im));
	im->strs = 0x8000;
	str(im, "Other");
	uint64_t e = jdk17.structs;
	for (int i = 0; i < (int)(sizeof(rows) / sizeof(rows[0])); i++) {
		if (i == skip)
			continue;
		put64(im, e, str(im, rows[i].type));
		put64(im, e + 8, str(im, rows[i].field));
		int32_t st = rows[i].is_static;
		memcpy(im->b + (e + 24 - BASE), &st, 4);
		put64(im, e + (st ? 40 : 32), rows[i].v);
		e += jdk17.s_stride;
	}
	uint64_t t = jdk17.types;
	put64(im, t, str(im, "ConstMethod"));
	put64(im, t + 32, 0x30);
	t += jdk17.t_stride;
	put64(im, t, str(im, "ConstantPool"));
	put64(im, t + 32, 0x48);
	t += jdk17.t_stride;
	put64(im, t, str(im, "HeapBlock"));
	put64(im, t + 32, 0x10);
	return im;
}

static void test_full(void **state)
{
	(void)state;
	struct image *im = build(-1);
	struct pf_hs_vm vm;
	char missing[PF_HS_MISSING_LEN];
	assert_int_equal(pf_hs_vm_parse(&jdk17, rd, im, &vm, missing, sizeof(missing)), 0);
	assert_int_equal(vm.codecache_heaps, 0x7f00aa000010);
	assert_int_equal(vm.codeheap_log2_seg, 0x100);
	assert_int_equal(vm.blob_frame_size, 0x1c);
	assert_int_equal(vm.blob_code_begin, 0x20);
	assert_int_equal(vm.blob_code_offset, 0);
	assert_int_equal(vm.nm_method, 0x70);
	assert_int_equal(vm.cm_sig_index, 0x24);
	assert_int_equal(vm.symbol_body, 0x6);
	assert_int_equal(vm.size_constmethod, 0x30);
	assert_int_equal(vm.size_constantpool, 0x48);
	assert_int_equal(vm.size_heapblock, 0x10);
	assert_int_equal(vm.codecache_high, 0x7f00aa000018);
	assert_int_equal(vm.garray_data, 0x8);
	assert_int_equal(vm.cp_source_file, 0);
	assert_string_equal(missing, "");
	free(im);
}

static void test_missing(void **state)
{
	(void)state;
	struct image *im = build(11); /* CompiledMethod::_method, and no nmethod::_method */
	struct pf_hs_vm vm;
	char missing[PF_HS_MISSING_LEN];
	assert_int_equal(pf_hs_vm_parse(&jdk17, rd, im, &vm, missing, sizeof(missing)), -ENOTSUP);
	assert_string_equal(missing, "nmethod::_method");
	assert_int_equal(vm.present, 0);
	free(im);
	im = build(10); /* CodeBlob::_code_begin, and no _code_offset either */
	assert_int_equal(pf_hs_vm_parse(&jdk17, rd, im, &vm, missing, sizeof(missing)), -ENOTSUP);
	assert_string_equal(missing, "CodeBlob::_code_begin");
	free(im);
}

/* A name that ends on the image's last byte is read although the bytes after it are not. */
static void test_name_at_end(void **state)
{
	(void)state;
	struct image *im = build(-1);
	im->strs = IMG - sizeof("Symbol");
	put64(im, jdk17.structs + 22 * jdk17.s_stride, str(im, "Symbol"));
	struct pf_hs_vm vm;
	assert_int_equal(pf_hs_vm_parse(&jdk17, rd, im, &vm, NULL, 0), 0);
	assert_int_equal(vm.symbol_body, 0x6);
	free(im);
}

static void test_bad_layout(void **state)
{
	(void)state;
	struct image *im = build(-1);
	struct pf_hs_vm vm;
	struct pf_hs_layout l = jdk17;
	l.s_address = 44;
	assert_int_equal(pf_hs_vm_parse(&l, rd, im, &vm, NULL, 0), -EINVAL);
	l = jdk17;
	l.t_stride = 0;
	assert_int_equal(pf_hs_vm_parse(&l, rd, im, &vm, NULL, 0), -EINVAL);
	free(im);
}

static void test_endless_and_fault(void **state)
{
	(void)state;
	struct image *im = calloc(1, sizeof(*im));
	im->strs = 0x8000;
	str(im, "Other");
	im->endless = true;
	struct pf_hs_layout l = jdk17;
	l.structs = BASE + 2 * IMG; /* every entry is "Other" and none ends the table */
	struct pf_hs_vm vm;
	assert_int_equal(pf_hs_vm_parse(&l, rd, im, &vm, NULL, 0), -E2BIG);
	im->endless = false;
	assert_int_equal(pf_hs_vm_parse(&l, rd, im, &vm, NULL, 0), -EFAULT);
	free(im);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_full),
	    cmocka_unit_test(test_missing),
	    cmocka_unit_test(test_name_at_end),
	    cmocka_unit_test(test_bad_layout),
	    cmocka_unit_test(test_endless_and_fault),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
