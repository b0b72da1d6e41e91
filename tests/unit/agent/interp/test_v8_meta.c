/* test_v8_meta.c — unit tests of agent/interp/v8_meta.h on the machine's real `node` (the
 * frame and object layout V8 documents for x64 without pointer compression, which Node's
 * builds use), on a library with only part of the constants and a pointer-compression layout
 * (v8meta_fixture.c), on an ELF file with none (the test binary itself) and on a file that is
 * no ELF. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "v8_meta.h"

/* The node executable: $PF_NODE, else the first `node` on PATH. */
static int open_node(void)
{
	const char *env = getenv("PF_NODE");
	if (env && *env)
		return open(env, O_RDONLY | O_CLOEXEC);
	const char *path = getenv("PATH");
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", path ? path : "/usr/bin");
	for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		char p[4200];
		snprintf(p, sizeof(p), "%s/node", d);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			return fd;
	}
	return -1;
}

static void test_node(void **state)
{
	(void)state;
	int fd = open_node();
	assert_true(fd >= 0); /* scripts/install-deps.sh installs nodejs */
	struct pf_v8_meta m;
	char missing[PF_V8_META_MISSING_LEN];
	assert_int_equal(pf_v8_meta_read(fd, &m, missing, sizeof(missing)), 0);
	assert_string_equal(missing, "");
	close(fd);
	/* x64 StandardFrameConstants: [fp-8] the context or the frame-type marker, [fp-16] the
	 * JSFunction; an interpreted frame's bytecode array and offset below them */
	assert_int_equal(m.fp_context, -8);
	assert_int_equal(m.fp_marker, -8);
	assert_int_equal(m.fp_function, -16);
	assert_true(m.fp_bytecode_array < m.fp_function);
	assert_true(m.fp_bytecode_offset < m.fp_function);
	assert_int_equal(m.tagged_size, 8);
	assert_int_equal(m.heap_object_tag, 1);
	assert_int_equal(m.smi_tag_size + m.smi_shift_size, 32); /* 64-bit Smis: the upper half */
	assert_int_equal(m.map, 0); /* every heap object starts with its map */
	/* the frame types are distinct small numbers */
	const int32_t ft[] = {
	    m.ft_entry,	      m.ft_construct_entry, m.ft_exit,	    m.ft_builtin_exit,
	    m.ft_stub,	      m.ft_internal,	    m.ft_construct, m.ft_builtin,
	    m.ft_interpreted, m.ft_baseline,	    m.ft_maglev,    m.ft_turbofan};
	for (unsigned i = 0; i < sizeof(ft) / sizeof(ft[0]); i++) {
		assert_true(ft[i] > 0 && ft[i] < 64);
		for (unsigned j = 0; j < i; j++)
			assert_int_not_equal(ft[i], ft[j]);
	}
	/* distinct instance types, strings below FirstNonstringType */
	assert_true(m.type_js_function > m.first_nonstring_type);
	assert_true(m.type_sfi > m.first_nonstring_type);
	assert_true(m.type_script > m.first_nonstring_type);
	assert_int_not_equal(m.type_js_function, m.type_sfi);
	assert_int_not_equal(m.type_sfi, m.type_script);
	/* fields inside their objects, past the map */
	assert_true(m.fn_shared >= 8 && m.fn_shared % 8 == 0);
	assert_true(m.sfi_name >= 8 && m.sfi_script >= 8 && m.sfi_name != m.sfi_script);
	assert_true(m.script_name >= 8);
	assert_true(m.seq_one_chars >= m.string_length + 4);
	int32_t v;
	assert_true(pf_v8_meta_get(&m, "off_fp_function", &v));
	assert_int_equal(v, -16);
	assert_false(pf_v8_meta_get(&m, "no_such_constant", &v));
}

static void test_pointer_compression(void **state)
{
	(void)state;
	int fd = open(PF_V8_FIXTURE, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	struct pf_v8_meta m;
	char missing[PF_V8_META_MISSING_LEN];
	/* the first required constant it lacks is named */
	assert_int_equal(pf_v8_meta_read(fd, &m, missing, sizeof(missing)), -ENOTSUP);
	assert_string_equal(missing, "v8dbg_off_fp_context");
	int32_t v;
	assert_true(pf_v8_meta_get(&m, "TaggedSize", &v));
	assert_int_equal(v, 4);
	close(fd);
}

static void test_no_metadata(void **state)
{
	(void)state;
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	struct pf_v8_meta m;
	char missing[PF_V8_META_MISSING_LEN];
	assert_int_equal(pf_v8_meta_read(fd, &m, missing, sizeof(missing)), -ENOTSUP);
	assert_string_equal(missing, "no v8dbg_ symbols");
	assert_int_equal(m.present, 0);
	close(fd);
}

static void test_not_elf(void **state)
{
	(void)state;
	char path[] = "/tmp/pf-v8meta-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(write(fd, "#!/bin/sh\n", 10), 10);
	struct pf_v8_meta m;
	assert_int_equal(pf_v8_meta_read(fd, &m, NULL, 0), -EINVAL);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_node),
	    cmocka_unit_test(test_pointer_compression),
	    cmocka_unit_test(test_no_metadata),
	    cmocka_unit_test(test_not_elf),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
