/* fuzz_py_code.c — the CPython code-object reader (agent/interp/python_code.h,
 * python_linetable.h, python_proc.h's _Py_DebugOffsets parser): its input is another
 * process's memory, read with process_vm_readv. The first byte picks the layout (3.9 + b % 5,
 * the agent's tables; 3.13 those of a crafted _Py_DebugOffsets block), the rest is the bytes
 * of an object, which every decoder is given in turn: as a line table (at offsets across the
 * code), a code object's fixed part, a str, a bytes header, a _Py_DebugOffsets block.
 *
 * Invariants checked:
 *  - every decoder returns only its documented codes;
 *  - a line table gives the same line twice for the same offset, and line 0 on a refusal;
 *  - a parsed code object has non-zero 8-aligned pointers, a first line >= 0, a code size
 *    in range, and the same hash when parsed again;
 *  - a decoded str is NUL-terminated inside its buffer, valid UTF-8, and needed no more bytes
 *    than it was given;
 *  - a bytes header's data length is within the bound asked for;
 *  - offsets from a debug block lie inside the struct sizes it gives (below 1 MiB). */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "pf/utf8.h"
#include "python_code.h"
#include "python_linetable.h"
#include "python_proc.h"

/* 3.13 offsets as a _Py_DebugOffsets block of 3.13.0 gives them */
static const struct pf_py_offsets *offsets_313(void)
{
	static struct pf_py_offsets o;
	static bool done;
	if (!done) {
		o = *pf_py_offsets_table(12);
		o.code_basicsize = 208;
		o.code_code_adaptive = 200;
		o.code_firstlineno = 68;
		done = true;
	}
	return &o;
}

static void check_lines(unsigned minor, const uint8_t *t, size_t len)
{
	for (uint32_t off = 0; off < 2 * len + 8; off += 2) {
		uint32_t a = 7, b = 7;
		int r = pf_py_line_for(minor, t, len, 1 + (int32_t)(len & 0xff), off, &a);
		FUZZ_CHECK(r == 0 || r == -EINVAL, "line rc %d", r);
		FUZZ_CHECK(pf_py_line_for(minor, t, len, 1 + (int32_t)(len & 0xff), off, &b) == r &&
			       a == b,
			   "not deterministic at %u", off);
		FUZZ_CHECK(r == 0 || a == 0, "a refused table gave line %u", a);
		if (r < 0)
			break; /* later offsets lie past the same damage */
	}
}

static void check_code(const struct pf_py_offsets *o, const uint8_t *d, size_t n)
{
	struct pf_py_code_fields f, g;
	int r = pf_py_code_parse(o, d, n, 0, &f);
	FUZZ_CHECK(r == 0 || r == -EINVAL, "code rc %d", r);
	if (r < 0)
		return;
	FUZZ_CHECK(f.name && !(f.name & 7) && f.filename && !(f.filename & 7) && f.linetable &&
		       !(f.linetable & 7),
		   "pointers");
	FUZZ_CHECK(f.first_line >= 0, "first line %d", f.first_line);
	FUZZ_CHECK(f.n_units == -1 || (f.n_units > 0 && f.n_units <= (1 << 24)), "units %lld",
		   (long long)f.n_units);
	FUZZ_CHECK(pf_py_code_parse(o, d, n, f.type, &g) == 0 && g.hash == f.hash, "hash");
	FUZZ_CHECK(pf_py_code_parse(o, d, n, f.type ^ 8, &g) == -EINVAL, "type not checked");
}

static void check_str(const struct pf_py_offsets *o, const uint8_t *d, size_t n)
{
	static const size_t caps[] = {1, 2, 5, PF_PY_NAME_MAX + 1};
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		char out[PF_PY_NAME_MAX + 1];
		size_t need = 0;
		memset(out, 'x', sizeof(out));
		int r = pf_py_str_decode(o, d, n, out, caps[i], &need);
		FUZZ_CHECK(r == 0 || r == -EINVAL || r == -EAGAIN, "str rc %d", r);
		FUZZ_CHECK(out[0] == '\0' || r == 0, "output on a refusal");
		if (r == -EAGAIN)
			FUZZ_CHECK(need > n, "-EAGAIN but needed %zu of %zu", need, n);
		if (r < 0)
			continue;
		FUZZ_CHECK(need <= n, "needed %zu of %zu", need, n);
		size_t len = strnlen(out, caps[i]);
		FUZZ_CHECK(len < caps[i], "not NUL-terminated");
		FUZZ_CHECK(pf_utf8_clean(out, len), "not UTF-8");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned minor = 9 + data[0] % 5;
	const struct pf_py_offsets *o = minor == 13 ? offsets_313() : pf_py_offsets_table(minor);
	const uint8_t *d = data + 1;
	size_t n = size - 1;

	check_lines(minor, d, n);
	check_code(o, d, n);
	check_str(o, d, n);

	size_t off = 0, len = 0;
	int r = pf_py_bytes_header(o, d, n, PF_PY_LINETABLE_MAX, &off, &len);
	FUZZ_CHECK(r == 0 || r == -EINVAL || r == -E2BIG, "bytes rc %d", r);
	FUZZ_CHECK(r < 0 || (len <= PF_PY_LINETABLE_MAX && off == o->bytes_sval), "bytes header");

	struct pf_py_offsets dbg;
	r = pf_py_offsets_from_debug(d, n, 3, minor, &dbg, NULL);
	FUZZ_CHECK(r == 0 || r == -ENOTSUP, "debug rc %d", r);
	if (r == 0) {
		const __u32 *v = (const __u32 *)&dbg;
		for (size_t i = 1; i < sizeof(dbg) / sizeof(*v); i++)
			FUZZ_CHECK(v[i] == PF_PY_NONE || v[i] <= (1u << 20), "offset %zu: %u", i,
				   v[i]);
	}
	return 0;
}
