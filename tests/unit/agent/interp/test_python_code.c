/* test_python_code.c — unit tests of agent/interp/python_code.h.
 *
 * Live: a child interpreter (Debian's 3.11, and the other 3.9–3.13 builds the machine has)
 * prints the addresses of code objects whose names and line tables it knows (a method, a
 * non-ASCII function, code compiled under a filename outside the BMP and one with a lone
 * surrogate, a name longer than the bound) with co_lines()/findlinestarts(); each is resolved
 * from outside and every range's first and last instruction must get the interpreter's own
 * line. Then the child frees a code object and makes another at the same address: the cache
 * must name the new one.
 *
 * Simulated: code, str and bytes objects laid out in this process's memory (read back through
 * process_vm_readv like another process's): a name pointer rewritten under a cached entry
 * (the hash catches it), a type pointer changed, hostile sizes and kinds, unmapped addresses,
 * and the LRU byte bound. */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "pychild.h"
#include "python_code.h"
#include "python_proc.h"

/* Each "code" line: address, first line, expected name, filename as UTF-8 hex (lone
 * surrogates as U+FFFD), then start:end:line ranges (bytes; line 0: none). */
static const char live_script[] =
    "import sys, dis\n"
    "class Klass:\n"
    "    def method(self):\n"
    "        x = 1\n"
    "        y = x + 1\n"
    "\n"
    "        return y\n"
    "def функция():\n"
    "    return [i for i in range(3)]\n"
    "ns = {}\n"
    "exec(compile('def g():\\n    a = 1\\n\\n    return a\\n', 'файл\\U0001F600.py', 'exec'), ns)\n"
    "exec(compile('def h():\\n  return 3\\n', 'bad\\udcff.py', 'exec'), ns)\n"
    "exec('def ' + 'n' * 300 + '(): pass', ns)\n"
    "codes = [Klass.method.__code__, функция.__code__, ns['g'].__code__, ns['h'].__code__,\n"
    "         ns['n' * 300].__code__]\n"
    "def clean(s):\n"
    "    return ''.join('\\ufffd' if 0xd800 <= ord(c) <= 0xdfff else c for c in s)\n"
    "def ranges(c):\n"
    "    if hasattr(c, 'co_lines'):\n"
    "        return [(s, e, l or 0) for s, e, l in c.co_lines() if e > s]\n"
    "    st = list(dis.findlinestarts(c))\n"
    "    ends = [o for o, _ in st[1:]] + [len(c.co_code)]\n"
    "    return [(o, e, l) for (o, l), e in zip(st, ends) if e > o]\n"
    "for c in codes:\n"
    "    name = getattr(c, 'co_qualname', c.co_name)\n"
    "    print('code', id(c), c.co_firstlineno, clean(name)[:255],\n"
    "          clean(c.co_filename).encode().hex(),\n"
    "          ' '.join('%d:%d:%d' % r for r in ranges(c)))\n"
    "print('done')\n"
    "sys.stdin.readline()\n"
    "def made(n):\n"
    "    src = 'def %s(self):\\n    x = 1\\n    return x\\n' % n\n"
    "    return compile(src, 'r.py', 'exec').co_consts[0]\n"
    "a = made('old_name')\n"
    "print('old', id(a))\n"
    "sys.stdin.readline()\n"
    "addr = id(a)\n"
    "del a\n"
    "keep = []\n"
    "for i in range(10000):\n"
    "    b = made('new_name')\n"
    "    if id(b) == addr: break\n"
    "    keep.append(b)\n"
    "print('new', id(b), int(id(b) == addr))\n"
    "sys.stdin.readline()\n";

/* What pf_py_names_resolve takes for the instruction at byte offset off. */
static int32_t instr_at(unsigned minor, uint32_t off)
{
	return minor == 10 ? (int32_t)(off / 2) : (int32_t)off;
}

static void hex_decode(const char *hex, char *out, size_t cap)
{
	size_t n = 0;
	unsigned b;
	while (hex[0] && hex[1] && n + 1 < cap && sscanf(hex, "%2x", &b) == 1) {
		out[n++] = (char)b;
		hex += 2;
	}
	out[n] = '\0';
}

static void live(const char *python, unsigned minor)
{
	struct pychild c;
	static char line[16384];
	assert_int_equal(pychild_start(&c, python, live_script), 0);
	struct pf_py_process p;
	struct pf_error err = {0};
	assert_int_equal(pychild_line(&c, line, sizeof(line), 10000), 0);
	int r = pf_py_detect(c.pid, NULL, &p, &err);
	if (r < 0)
		fail_msg("%s: %d %s", python, r, err.msg);
	assert_int_equal(p.minor, minor);
	struct pf_py_names *names = pf_py_names_new(&p, 0);
	assert_non_null(names);
	unsigned codes = 0, checked = 0;
	for (; strncmp(line, "code ", 5) == 0;
	     assert_int_equal(pychild_line(&c, line, sizeof(line), 10000), 0)) {
		uint64_t addr;
		unsigned first;
		char name[512], filehex[4096], file[2048];
		int at = 0;
		assert_int_equal(sscanf(line, "code %" SCNu64 " %u %511s %4095s %n", &addr, &first,
					name, filehex, &at),
				 4);
		hex_decode(filehex, file, sizeof(file));
		struct pf_py_frame f;
		r = pf_py_names_resolve(names, c.pid, addr, -1, &f);
		if (r < 0)
			fail_msg("%s: resolve %s: %d", python, name, r);
		assert_string_equal(f.name, name);
		assert_string_equal(f.filename, file);
		assert_int_equal(f.first_line, first);
		assert_int_equal(f.line, first); /* before the first instruction */
		const char *s = line + at;
		unsigned start, end, want;
		int used;
		while (sscanf(s, "%u:%u:%u%n", &start, &end, &want, &used) == 3) {
			uint32_t offs[2] = {start, end - 2};
			for (unsigned k = 0; k < 2; k++) {
				assert_int_equal(pf_py_names_resolve(names, c.pid, addr,
								     instr_at(minor, offs[k]), &f),
						 0);
				if (f.line != want)
					fail_msg("%s %s: offset %u: line %u, python says %u",
						 python, name, offs[k], f.line, want);
				checked++;
			}
			s += used;
		}
		codes++;
	}
	assert_string_equal(line, "done");
	assert_int_equal(codes, 5);
	assert_true(checked >= 10);

	/* a code object freed and another made at its address */
	assert_int_equal(pychild_send(&c, ""), 0);
	assert_int_equal(pychild_line(&c, line, sizeof(line), 10000), 0);
	uint64_t old = 0, now = 0;
	int same = 0;
	assert_int_equal(sscanf(line, "old %" SCNu64, &old), 1);
	struct pf_py_frame f;
	assert_int_equal(pf_py_names_resolve(names, c.pid, old, 0, &f), 0);
	assert_string_equal(f.name, "old_name");
	struct pf_py_names_stats st0, st1;
	pf_py_names_stats(names, &st0);
	assert_int_equal(pychild_send(&c, ""), 0);
	assert_int_equal(pychild_line(&c, line, sizeof(line), 10000), 0);
	assert_int_equal(sscanf(line, "new %" SCNu64 " %d", &now, &same), 2);
	if (!same)
		fail_msg("%s: the allocator gave no code object the freed address", python);
	assert_int_equal(pf_py_names_resolve(names, c.pid, old, 0, &f), 0);
	assert_string_equal(f.name, "new_name");
	pf_py_names_stats(names, &st1);
	assert_int_equal(st1.stale, st0.stale + 1);
	pf_py_names_free(names);
	pychild_stop(&c);
	print_message("python %s: %u code objects, %u offsets, reuse caught\n", p.version, codes,
		      checked);
}

static void test_live_debian_311(void **state)
{
	(void)state;
	if (access(PYCHILD_DEBIAN_311, X_OK) != 0)
		skip();
	live(PYCHILD_DEBIAN_311, 11);
}

static void test_live_other_builds(void **state)
{
	(void)state;
	unsigned ran = 0;
	for (unsigned minor = 9; minor <= 13; minor++) {
		const char *py = pychild_find(minor);
		if (py) {
			live(py, minor);
			ran++;
		}
	}
	if (!ran)
		skip();
}

/* ---- objects laid out in this process ---- */

/* 3.11 layout (python_proc.c's table): code 192 bytes, str header 48, bytes data at 32 */
struct fake {
	uint64_t code_type[8], str_type[8], bytes_type[8];
	uint64_t code[4][32];
	uint64_t str[4][64];
	uint64_t table[16];
};

static void fake_str(const struct pf_py_offsets *o, uint64_t *obj, const uint64_t *type,
		     const char *s)
{
	uint8_t *b = (uint8_t *)obj;
	memset(obj, 0, 64 * 8);
	uint64_t t = (uint64_t)(uintptr_t)type, len = strlen(s);
	memcpy(b + o->object_type, &t, 8);
	memcpy(b + o->unicode_length, &len, 8);
	uint32_t state = (1u << 2) | (1u << 5) | (1u << 6) | (1u << 7); /* kind 1, compact, ascii */
	memcpy(b + o->unicode_state, &state, 4);
	memcpy(b + o->unicode_ascii_size, s, len + 1);
}

static void fake_code(const struct pf_py_offsets *o, struct fake *f, unsigned i,
		      const uint64_t *name, const uint64_t *file, int32_t first)
{
	uint8_t *b = (uint8_t *)f->code[i];
	memset(b, 0, sizeof(f->code[i]));
	uint64_t v = (uint64_t)(uintptr_t)f->code_type;
	memcpy(b + o->object_type, &v, 8);
	v = 4; /* code units */
	memcpy(b + o->varobject_size, &v, 8);
	v = (uint64_t)(uintptr_t)name;
	memcpy(b + o->code_name, &v, 8);
	memcpy(b + o->code_qualname, &v, 8);
	v = (uint64_t)(uintptr_t)file;
	memcpy(b + o->code_filename, &v, 8);
	v = (uint64_t)(uintptr_t)f->table;
	memcpy(b + o->code_linetable, &v, 8);
	memcpy(b + o->code_firstlineno, &first, 4);
}

static void fake_setup(struct fake *f, struct pf_py_process *p)
{
	memset(f, 0, sizeof(*f));
	memset(p, 0, sizeof(*p));
	p->pid = getpid();
	p->major = 3;
	p->minor = 11;
	p->off = *pf_py_offsets_table(11);
	p->code_type_addr = (uint64_t)(uintptr_t)f->code_type;
	p->unicode_type_addr = (uint64_t)(uintptr_t)f->str_type;
	p->bytes_type_addr = (uint64_t)(uintptr_t)f->bytes_type;
	const struct pf_py_offsets *o = &p->off;
	fake_str(o, f->str[0], f->str_type, "first");
	fake_str(o, f->str[1], f->str_type, "second");
	fake_str(o, f->str[2], f->str_type, "app.py");
	/* line table: a bytes object of 2 entries: [0,4) +1, [4,8) +2 */
	uint8_t *t = (uint8_t *)f->table;
	uint64_t v = (uint64_t)(uintptr_t)f->bytes_type;
	memcpy(t + o->object_type, &v, 8);
	v = 4;
	memcpy(t + o->varobject_size, &v, 8);
	static const uint8_t lt[] = {0x80 | (13 << 3) | 1, 0x02, 0x80 | (13 << 3) | 1, 0x02};
	memcpy(t + o->bytes_sval, lt, sizeof(lt));
	fake_code(o, f, 0, f->str[0], f->str[2], 40);
}

static uint64_t addr_of(const void *p)
{
	return (uint64_t)(uintptr_t)p;
}

static void test_reused_address(void **state)
{
	(void)state;
	static struct fake f;
	struct pf_py_process p;
	fake_setup(&f, &p);
	struct pf_py_names *n = pf_py_names_new(&p, 0);
	assert_non_null(n);
	struct pf_py_frame fr;
	assert_int_equal(pf_py_names_resolve(n, p.pid, addr_of(f.code[0]), 0, &fr), 0);
	assert_string_equal(fr.name, "first");
	assert_string_equal(fr.filename, "app.py");
	assert_int_equal(fr.first_line, 40);
	assert_int_equal(fr.line, 41);
	assert_int_equal(pf_py_names_resolve(n, p.pid, addr_of(f.code[0]), 4, &fr), 0);
	assert_int_equal(fr.line, 42);
	assert_int_equal(pf_py_names_resolve(n, p.pid, addr_of(f.code[0]), 8, &fr), 0);
	assert_int_equal(fr.line, 0); /* past the code (4 units) */
	/* the object freed and a new one made at its address: another name */
	fake_code(&p.off, &f, 0, f.str[1], f.str[2], 40);
	assert_int_equal(pf_py_names_resolve(n, p.pid, addr_of(f.code[0]), 0, &fr), 0);
	assert_string_equal(fr.name, "second");
	struct pf_py_names_stats st;
	pf_py_names_stats(n, &st);
	assert_int_equal(st.stale, 1);
	assert_int_equal(st.misses, 2);
	assert_int_equal(st.hits, 2);
	assert_int_equal(st.entries, 1);
	/* a sample's key (the first line the kernel read) tells a replaced object */
	assert_int_equal(pf_py_names_resolve_key(n, p.pid, addr_of(f.code[0]), 0, 40, &fr), 0);
	assert_string_equal(fr.name, "second");
	assert_int_equal(pf_py_names_resolve_key(n, p.pid, addr_of(f.code[0]), 0, 41, &fr),
			 -ESTALE);
	assert_string_equal(fr.name, "");
	pf_py_names_stats(n, &st);
	assert_int_equal(st.stale, 2);
	/* same name, another first line: also a new object */
	fake_code(&p.off, &f, 0, f.str[1], f.str[2], 50);
	assert_int_equal(pf_py_names_resolve(n, p.pid, addr_of(f.code[0]), -1, &fr), 0);
	assert_int_equal(fr.first_line, 50);
	assert_int_equal(fr.line, 50);
	/* no longer a code object (another type): refused, the entry dropped */
	f.code[0][1] = addr_of(f.str_type);
	assert_int_equal(pf_py_names_resolve(n, p.pid, addr_of(f.code[0]), 0, &fr), -EINVAL);
	assert_string_equal(fr.name, "");
	pf_py_names_stats(n, &st);
	assert_int_equal(st.entries, 0);
	pf_py_names_free(n);
}

static void test_hostile_objects(void **state)
{
	(void)state;
	static struct fake f;
	struct pf_py_process p;
	fake_setup(&f, &p);
	const struct pf_py_offsets *o = &p.off;
	struct pf_py_names *n = pf_py_names_new(&p, 0);
	struct pf_py_frame fr;
	uint64_t code = addr_of(f.code[0]);
	uint8_t *s = (uint8_t *)f.str[0];
	uint64_t v;

	/* a str claiming 2^40 characters */
	v = 1ull << 40;
	memcpy(s + o->unicode_length, &v, 8);
	assert_int_equal(pf_py_names_resolve(n, p.pid, code, 0, &fr), -EINVAL);
	/* a str that is not compact, of kind 3, ascii with kind 2 */
	uint32_t bad_states[] = {(1u << 2) | (1u << 6), (3u << 2) | (1u << 5),
				 (2u << 2) | (3u << 5)};
	for (unsigned i = 0; i < 3; i++) {
		fake_str(o, f.str[0], f.str_type, "first");
		memcpy(s + o->unicode_state, &bad_states[i], 4);
		assert_int_equal(pf_py_names_resolve(n, p.pid, code, 0, &fr), -EINVAL);
	}
	/* a str with a byte >= 0x80 in ASCII data */
	fake_str(o, f.str[0], f.str_type, "fi\xffst");
	assert_int_equal(pf_py_names_resolve(n, p.pid, code, 0, &fr), -EINVAL);
	/* a name that is not a str */
	fake_str(o, f.str[0], f.bytes_type, "first");
	assert_int_equal(pf_py_names_resolve(n, p.pid, code, 0, &fr), -EINVAL);
	/* an empty name */
	fake_str(o, f.str[0], f.str_type, "");
	assert_int_equal(pf_py_names_resolve(n, p.pid, code, 0, &fr), -EINVAL);
	fake_str(o, f.str[0], f.str_type, "first");
	/* pointers unaligned, into unmapped memory */
	uint8_t *c = (uint8_t *)f.code[0];
	v = addr_of(f.str[0]) + 1;
	memcpy(c + o->code_name, &v, 8);
	memcpy(c + o->code_qualname, &v, 8);
	assert_int_equal(pf_py_names_resolve(n, p.pid, code, 0, &fr), -EINVAL);
	void *hole = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(hole != MAP_FAILED);
	v = addr_of(hole);
	memcpy(c + o->code_name, &v, 8);
	memcpy(c + o->code_qualname, &v, 8);
	assert_int_equal(pf_py_names_resolve(n, p.pid, code, 0, &fr), -EFAULT);
	assert_int_equal(pf_py_names_resolve(n, p.pid, addr_of(hole), 0, &fr), -EFAULT);
	assert_int_equal(pf_py_names_resolve(n, p.pid, 0, 0, &fr), -EINVAL);
	/* a code object ending where the mapping ends: the read fails, nothing past it is used */
	fake_code(o, &f, 0, f.str[0], f.str[2], 40);
	/* code units insane, first line negative */
	v = 0;
	memcpy(c + o->varobject_size, &v, 8);
	assert_int_equal(pf_py_names_resolve(n, p.pid, code, 0, &fr), -EINVAL);
	fake_code(o, &f, 0, f.str[0], f.str[2], -5);
	assert_int_equal(pf_py_names_resolve(n, p.pid, code, 0, &fr), -EINVAL);
	/* a line table over the bound: the name stays, the line is unknown */
	fake_code(o, &f, 0, f.str[0], f.str[2], 40);
	v = PF_PY_LINETABLE_MAX + 1;
	memcpy((uint8_t *)f.table + o->varobject_size, &v, 8);
	assert_int_equal(pf_py_names_resolve(n, p.pid, code, 2, &fr), 0);
	assert_string_equal(fr.name, "first");
	assert_int_equal(fr.line, 0);
	/* a process that is gone */
	assert_int_equal(pf_py_names_resolve(n, 0x3fffff00, code, 0, &fr), -ESRCH);
	struct pf_py_names_stats st;
	pf_py_names_stats(n, &st);
	assert_true(st.invalid >= 8);
	assert_true(st.read_failed >= 2);
	munmap(hole, 4096);
	pf_py_names_free(n);
}

/* The cache stays under its byte bound, the most recent entries kept. */
static void test_lru_bound(void **state)
{
	(void)state;
	static struct fake f;
	struct pf_py_process p;
	fake_setup(&f, &p);
	/* room for the index and about two entries */
	struct pf_py_names *n = pf_py_names_new(&p, 1);
	size_t base = pf_py_names_bytes(n);
	pf_py_names_free(n);
	size_t bound = base + 2 * (sizeof(uint64_t) * 12 + 32);
	n = pf_py_names_new(&p, bound);
	struct pf_py_frame fr;
	/* the same fake object seen at 4 addresses: its copies in code[0..3] */
	for (unsigned i = 1; i < 4; i++)
		memcpy(f.code[i], f.code[0], sizeof(f.code[0]));
	for (unsigned round = 0; round < 3; round++)
		for (unsigned i = 0; i < 4; i++)
			assert_int_equal(pf_py_names_resolve(n, p.pid, addr_of(f.code[i]), 0, &fr),
					 0);
	struct pf_py_names_stats st;
	pf_py_names_stats(n, &st);
	assert_true(pf_py_names_bytes(n) <= bound);
	assert_true(st.evicted > 0);
	assert_true(st.entries >= 1 && st.entries < 4);
	pf_py_names_free(n);
	pf_py_names_free(NULL);
}

/* The pure decoders on buffers: str kinds 1, 2, 4 to UTF-8, cut at a character. */
static void test_str_decode(void **state)
{
	(void)state;
	const struct pf_py_offsets *o = pf_py_offsets_table(12);
	uint8_t b[256] = {0};
	uint64_t len = 3;
	uint32_t st = (2u << 2) | (1u << 5); /* UCS2, compact */
	memcpy(b + o->unicode_length, &len, 8);
	memcpy(b + o->unicode_state, &st, 4);
	uint16_t u[] = {0x444, 0x430, 0xd800};
	memcpy(b + o->unicode_compact_size, u, sizeof(u));
	char out[16];
	size_t need = 0;
	assert_int_equal(pf_py_str_decode(o, b, sizeof(b), out, sizeof(out), &need), 0);
	assert_int_equal(need, o->unicode_compact_size + 6);
	assert_string_equal(out, "фа\xef\xbf\xbd");
	assert_int_equal(
	    pf_py_str_decode(o, b, o->unicode_compact_size + 4, out, sizeof(out), &need), -EAGAIN);
	assert_int_equal(pf_py_str_decode(o, b, sizeof(b), out, 4, NULL), 0);
	assert_string_equal(out, "ф"); /* "фа" needs 5 bytes with the NUL */
	st = (4u << 2) | (1u << 5);
	memcpy(b + o->unicode_state, &st, 4);
	uint32_t w[] = {0x1f600, 0x41, 0x110000};
	memcpy(b + o->unicode_compact_size, w, sizeof(w));
	assert_int_equal(pf_py_str_decode(o, b, sizeof(b), out, sizeof(out), NULL), 0);
	assert_string_equal(out, "\xf0\x9f\x98\x80"
				 "A\xef\xbf\xbd");
	assert_int_equal(pf_py_str_decode(o, b, 8, out, sizeof(out), NULL), -EINVAL);
	size_t off, dlen;
	uint64_t sz = (uint64_t)-1;
	memcpy(b + o->varobject_size, &sz, 8);
	assert_int_equal(pf_py_bytes_header(o, b, 64, 100, &off, &dlen), -EINVAL);
	sz = 101;
	memcpy(b + o->varobject_size, &sz, 8);
	assert_int_equal(pf_py_bytes_header(o, b, 64, 100, &off, &dlen), -E2BIG);
	sz = 100;
	memcpy(b + o->varobject_size, &sz, 8);
	assert_int_equal(pf_py_bytes_header(o, b, 64, 100, &off, &dlen), 0);
	assert_int_equal(off, 32);
	assert_int_equal(dlen, 100);
	assert_int_equal(pf_py_bytes_header(o, b, 20, 100, &off, &dlen), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_live_debian_311),
		cmocka_unit_test(test_live_other_builds),
		cmocka_unit_test(test_reused_address),
		cmocka_unit_test(test_hostile_objects),
		cmocka_unit_test(test_lru_bound),
		cmocka_unit_test(test_str_decode),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
