/* fuzz_v8_names.c — the V8 heap reader (agent/interp/v8_names.h): its input is another
 * process's memory. The first 8 bytes are the SharedFunctionInfo's offset in the rest, which
 * is the memory from address BASE on (the reader answers -EFAULT outside it), with the layout
 * of Node 20's V8 11.3 (its v8dbg_ constants), so every branch of the reader — strings of each
 * representation, ScopeInfo, Script, line ends, source — is reached.
 *
 * Invariants checked:
 *  - resolve returns only 0, -ENOENT or -EFAULT;
 *  - name and file are NUL-terminated inside their buffers and clean UTF-8 (no control
 *    characters);
 *  - the line is 0 or at most one more than the bytes of memory (a line per newline);
 *  - resolving again (the script cache now warm) gives the same result. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "pf/utf8.h"
#include "v8_names.h"

static int read_mem(void *ctx, int pid, uint64_t addr, void *buf, size_t len)
{
	(void)pid;
	return fuzz_mem_read(ctx, addr, buf, len);
}

static const struct pf_v8_file *node20(void)
{
	static struct pf_v8_file f;
	struct pf_v8_meta *m = &f.meta;
	if (f.major)
		return &f;
	m->tagged_size = m->pointer_size = 8;
	m->heap_object_tag = 1;
	m->heap_object_tag_mask = 3;
	m->smi_tag_mask = 1;
	m->smi_tag_size = 1;
	m->smi_shift_size = 31;
	m->map_instance_type = 12;
	m->sfi_name = 16;
	m->sfi_script = 32;
	m->script_name = 16;
	m->script_line_ends = 56;
	m->script_source = 8;
	m->fixed_array_length = 8;
	m->type_fixed_array = 175;
	m->string_length = 12;
	m->seq_one_chars = m->seq_two_chars = 16;
	m->cons_first = 16;
	m->cons_second = 24;
	m->thin_actual = 16;
	m->is_not_string_mask = -128;
	m->first_nonstring_type = 128;
	m->string_encoding_mask = 8;
	m->one_byte_string_tag = 8;
	m->string_repr_mask = 7;
	m->seq_string_tag = 0;
	m->cons_string_tag = 1;
	m->thin_string_tag = 5;
	m->type_sfi = 262;
	m->type_scope_info = 261;
	m->type_script = 167;
	m->scope_first_vars = 3;
	m->scope_ncontextlocals = 2;
	m->present = ~0ull;
	f.major = 11;
	f.minor = 3;
	return &f;
}

static bool frame_ok(const struct pf_v8_frame *f, size_t mem)
{
	return memchr(f->name, 0, sizeof(f->name)) && memchr(f->file, 0, sizeof(f->file)) &&
	       pf_utf8_clean(f->name, strlen(f->name)) && pf_utf8_clean(f->file, strlen(f->file)) &&
	       f->line <= mem + 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t off;
	struct fuzz_mem m;
	if (!fuzz_mem_split(data, size, &off, sizeof(off), &m))
		return 0;
	struct pf_v8_names *n = pf_v8_names_new(node20());
	if (!n)
		return 0;
	pf_v8_names_set_reader(n, read_mem, &m);
	struct pf_v8_frame a, b;
	uint64_t sfi = FUZZ_MEM_BASE + (off % (m.n + 16)) + 1;
	int r = pf_v8_names_resolve(n, 1, sfi, &a);
	FUZZ_CHECK(r == 0 || r == -ENOENT || r == -EFAULT, "rc %d", r);
	FUZZ_CHECK(r < 0 || frame_ok(&a, m.n), "frame: name '%.20s' line %u", a.name, a.line);
	int r2 = pf_v8_names_resolve(n, 1, sfi, &b);
	FUZZ_CHECK(r2 == r && (r < 0 || (!strcmp(a.name, b.name) && !strcmp(a.file, b.file) &&
					 a.line == b.line)),
		   "not deterministic: %d then %d", r, r2);
	pf_v8_names_free(n);
	return 0;
}
