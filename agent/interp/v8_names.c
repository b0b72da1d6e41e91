/* v8_names.c — V8 functions named from a live process's heap (see v8_names.h). */
#include "v8_names.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "python_proc.h" /* pf_py_read_mem: process_vm_readv */

#define CONS_DEPTH 8
/* A ScopeInfo keeps up to this many local names inline; more go to a hash table (one slot) */
#define SCOPE_INLINE_LOCALS 75
#define SCOPE_FUNCTION 2 /* ScopeType FUNCTION_SCOPE */
#define SCOPE_SLOTS_MAX (1 + 16 + 2 * SCOPE_INLINE_LOCALS + 8)

struct script {
	uint64_t addr;   /* tagged Script; 0: empty */
	int64_t src_len; /* its source's length when read, -1 when from V8's line ends */
	uint32_t *ends;  /* positions of the newlines, ascending */
	uint32_t n;
};

struct pf_v8_names {
	struct pf_v8_file f;
	bool scope_ok;
	int32_t first_vars, ncontextlocals;
	pf_v8_read_fn read;
	void *read_ctx;
	struct script sc[PF_V8_SCRIPTS];
	unsigned next;
	size_t bytes;
};

static int read_process(void *ctx, int pid, uint64_t addr, void *buf, size_t len)
{
	(void)ctx;
	return pf_py_read_mem(pid, addr, buf, len);
}

void pf_v8_names_set_reader(struct pf_v8_names *n, pf_v8_read_fn fn, void *ctx)
{
	n->read = fn ? fn : read_process;
	n->read_ctx = ctx;
}

static int rd(const struct pf_v8_names *n, int pid, uint64_t addr, void *buf, size_t len)
{
	return n->read(n->read_ctx, pid, addr, buf, len);
}

struct pf_v8_names *pf_v8_names_new(const struct pf_v8_file *f)
{
	struct pf_v8_names *n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->f = *f;
	n->read = read_process;
	n->scope_ok = pf_v8_file_scope_info_ok(f) &&
		      pf_v8_meta_get(&f->meta, "scopeinfo_idx_first_vars", &n->first_vars) &&
		      pf_v8_meta_get(&f->meta, "scopeinfo_idx_ncontextlocals", &n->ncontextlocals);
	return n;
}

void pf_v8_names_free(struct pf_v8_names *n)
{
	if (!n)
		return;
	for (unsigned i = 0; i < PF_V8_SCRIPTS; i++)
		free(n->sc[i].ends);
	free(n);
}

size_t pf_v8_names_bytes(const struct pf_v8_names *n)
{
	return sizeof(*n) + n->bytes;
}

static bool is_heap(const struct pf_v8_names *n, uint64_t v)
{
	return (v & (uint64_t)n->f.meta.heap_object_tag_mask) == (uint64_t)n->f.meta.heap_object_tag &&
	       v < (1ull << 47) && v > 4096;
}

static bool is_smi(const struct pf_v8_names *n, uint64_t v)
{
	return (v & (uint64_t)n->f.meta.smi_tag_mask) == (uint64_t)n->f.meta.smi_tag;
}

static int64_t smi(const struct pf_v8_names *n, uint64_t v)
{
	return (int64_t)v >> (n->f.meta.smi_tag_size + n->f.meta.smi_shift_size);
}


/* The tagged word at field off of the object at tagged address obj. */
static int field(const struct pf_v8_names *n, int pid, uint64_t obj, int32_t off, uint64_t *v)
{
	return rd(n, pid, obj - (uint64_t)n->f.meta.heap_object_tag + (uint64_t)off, v, sizeof(*v));
}

/* True for the instance type of a String (below FirstNonstringType, outside IsNotStringMask). */
static bool string_type(const struct pf_v8_names *n, unsigned type)
{
	return type < (unsigned)n->f.meta.first_nonstring_type &&
	       !(type & (unsigned)n->f.meta.is_not_string_mask);
}

static int type_of(const struct pf_v8_names *n, int pid, uint64_t obj, unsigned *type)
{
	uint64_t map;
	uint16_t t;
	int rc = field(n, pid, obj, n->f.meta.map, &map);
	if (rc < 0)
		return rc;
	if (!is_heap(n, map))
		return -ENOENT;
	rc = rd(n, pid, map - 1 + (uint64_t)n->f.meta.map_instance_type, &t, sizeof(t));
	*type = t;
	return rc;
}

/* Appends the code point c as UTF-8 to out[*len, cap - 1): a control character as '?', a lone
 * surrogate (UTF-16 that no UTF-8 can hold) as U+FFFD. */
static void put_utf8(char *out, size_t cap, size_t *len, unsigned c)
{
	char b[3];
	size_t k;
	if (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0))
		c = '?';
	else if (c >= 0xd800 && c < 0xe000)
		c = 0xfffd;
	if (c < 0x80) {
		b[0] = (char)c;
		k = 1;
	} else if (c < 0x800) {
		b[0] = (char)(0xc0 | c >> 6);
		b[1] = (char)(0x80 | (c & 0x3f));
		k = 2;
	} else {
		b[0] = (char)(0xe0 | c >> 12);
		b[1] = (char)(0x80 | (c >> 6 & 0x3f));
		b[2] = (char)(0x80 | (c & 0x3f));
		k = 3;
	}
	if (*len + k >= cap)
		return;
	memcpy(out + *len, b, k);
	*len += k;
}

/* The String at tagged s appended to out (NUL-terminated, cut at cap). -ENOENT for no string or
 * a representation not read (sliced, external). */
static int string_at(const struct pf_v8_names *n, int pid, uint64_t s, char *out, size_t cap,
		     size_t *len, int depth)
{
	const struct pf_v8_meta *m = &n->f.meta;
	unsigned type;
	if (!is_heap(n, s) || depth > CONS_DEPTH)
		return -ENOENT;
	int rc = type_of(n, pid, s, &type);
	if (rc < 0)
		return rc;
	if (!string_type(n, type))
		return -ENOENT;
	unsigned repr = type & (unsigned)m->string_repr_mask;
	if (repr == (unsigned)m->cons_string_tag) {
		uint64_t a, b;
		if ((rc = field(n, pid, s, m->cons_first, &a)) < 0 ||
		    (rc = field(n, pid, s, m->cons_second, &b)) < 0 ||
		    (rc = string_at(n, pid, a, out, cap, len, depth + 1)) < 0)
			return rc;
		return string_at(n, pid, b, out, cap, len, depth + 1);
	}
	if (m->thin_string_tag && repr == (unsigned)m->thin_string_tag && m->thin_actual) {
		uint64_t a;
		if ((rc = field(n, pid, s, m->thin_actual, &a)) < 0)
			return rc;
		return string_at(n, pid, a, out, cap, len, depth + 1);
	}
	if (repr != (unsigned)m->seq_string_tag)
		return -ENOENT;
	int32_t slen;
	if ((rc = rd(n, pid, s - 1 + (uint64_t)m->string_length, &slen, sizeof(slen))) < 0)
		return rc;
	if (slen < 0)
		return -ENOENT;
	bool one = (type & (unsigned)m->string_encoding_mask) == (unsigned)m->one_byte_string_tag;
	size_t want = (size_t)slen < cap ? (size_t)slen : cap; /* characters worth reading */
	uint8_t buf[2 * PF_V8_FILE_MAX];
	if (want > PF_V8_FILE_MAX)
		want = PF_V8_FILE_MAX;
	if (want && (rc = rd(n, pid, s - 1 + (uint64_t)(one ? m->seq_one_chars : m->seq_two_chars),
			     buf, want * (one ? 1 : 2))) < 0)
		return rc;
	for (size_t i = 0; i < want; i++)
		put_utf8(out, cap, len, one ? buf[i] : (unsigned)(buf[2 * i] | buf[2 * i + 1] << 8));
	out[*len] = 0;
	return 0;
}

static int string_into(const struct pf_v8_names *n, int pid, uint64_t s, char *out, size_t cap)
{
	size_t len = 0;
	out[0] = 0;
	int rc = string_at(n, pid, s, out, cap, &len, 0);
	if (rc < 0)
		out[0] = 0;
	return rc;
}

/* A compiled function's ScopeInfo (V8 11): its function name and start position. The slots
 * after the header: the context locals' names (inline, or one hash table) and infos, the saved
 * class variable (flag bit 10), the function variable {name, slot} (bits 12-13 not NONE), the
 * inferred name (bit 14), the position {start, end} of a function scope. */
static int scope_info(const struct pf_v8_names *n, int pid, uint64_t si, char *name, size_t cap,
		      int64_t *start)
{
	uint64_t hdr[16];
	int rc;
	*start = -1;
	if (n->first_vars + 1 > 16)
		return -ENOENT;
	if ((rc = rd(n, pid, si - 1, hdr, (size_t)(n->first_vars + 1) * 8)) < 0)
		return rc;
	uint64_t fl = hdr[1], nl = hdr[1 + n->ncontextlocals];
	if (!is_smi(n, fl) || !is_smi(n, nl) || smi(n, nl) < 0 || smi(n, nl) > 1 << 20)
		return -ENOENT;
	int64_t flags = smi(n, fl), locals = smi(n, nl);
	int64_t at = 1 + n->first_vars + (locals < SCOPE_INLINE_LOCALS ? 2 * locals : 1 + locals) +
		     (flags >> 10 & 1);
	uint64_t tail[5];
	if ((rc = rd(n, pid, si - 1 + (uint64_t)at * 8, tail, sizeof(tail))) < 0)
		return rc;
	unsigned k = 0;
	name[0] = 0;
	if (flags >> 12 & 3) {
		if (!is_smi(n, tail[1]))
			return -ENOENT; /* not the layout read here */
		string_into(n, pid, tail[0], name, cap);
		k = 2;
	}
	if (flags >> 14 & 1) {
		if (!name[0])
			string_into(n, pid, tail[k], name, cap);
		k++;
	}
	if ((flags & 15) == SCOPE_FUNCTION && k + 1 < 5 && is_smi(n, tail[k]) &&
	    is_smi(n, tail[k + 1]) && smi(n, tail[k]) >= 0 && smi(n, tail[k]) <= smi(n, tail[k + 1]))
		*start = smi(n, tail[k]);
	return 0;
}

static struct script *script_slot(struct pf_v8_names *n, uint64_t addr, int64_t src_len)
{
	for (unsigned i = 0; i < PF_V8_SCRIPTS; i++)
		if (n->sc[i].addr == addr && n->sc[i].src_len == src_len)
			return &n->sc[i];
	return NULL;
}

static struct script *script_new(struct pf_v8_names *n, uint64_t addr, int64_t src_len,
				 uint32_t *ends, uint32_t cnt)
{
	struct script *s = &n->sc[n->next];
	n->next = (n->next + 1) % PF_V8_SCRIPTS;
	n->bytes -= (size_t)s->n * sizeof(*s->ends);
	free(s->ends);
	*s = (struct script){addr, src_len, ends, cnt};
	n->bytes += (size_t)cnt * sizeof(*ends);
	return s;
}

/* The newline positions of script sc: V8's line ends (a FixedArray of Smis) when computed,
 * else its one-byte sequential source, read once. NULL when neither can be read. */
static struct script *script_lines(struct pf_v8_names *n, int pid, uint64_t sc)
{
	const struct pf_v8_meta *m = &n->f.meta;
	uint64_t le, src;
	unsigned type;
	int32_t fa_type;
	if (m->script_line_ends && pf_v8_meta_get(m, "type_FixedArray__FIXED_ARRAY_TYPE", &fa_type) &&
	    m->fixed_array_length && field(n, pid, sc, m->script_line_ends, &le) == 0 &&
	    is_heap(n, le) && type_of(n, pid, le, &type) == 0 && type == (unsigned)fa_type) {
		struct script *s = script_slot(n, sc, -1);
		if (s)
			return s;
		uint64_t lw;
		if (field(n, pid, le, m->fixed_array_length, &lw) < 0 || !is_smi(n, lw) ||
		    smi(n, lw) < 0 || smi(n, lw) > PF_V8_LINE_ENDS_MAX)
			return NULL;
		size_t cnt = (size_t)smi(n, lw);
		uint64_t *raw = malloc((cnt ? cnt : 1) * 8);
		uint32_t *ends = malloc((cnt ? cnt : 1) * sizeof(*ends));
		if (!raw || !ends ||
		    (cnt && rd(n, pid, le - 1 + (uint64_t)m->fixed_array_length + 8, raw, cnt * 8) < 0)) {
			free(raw);
			free(ends);
			return NULL;
		}
		for (size_t i = 0; i < cnt; i++)
			ends[i] = is_smi(n, raw[i]) && smi(n, raw[i]) >= 0 ? (uint32_t)smi(n, raw[i]) : 0;
		free(raw);
		return script_new(n, sc, -1, ends, (uint32_t)cnt);
	}
	if (!m->script_source || field(n, pid, sc, m->script_source, &src) < 0 ||
	    !is_heap(n, src) || type_of(n, pid, src, &type) < 0 || !string_type(n, type) ||
	    (type & (unsigned)m->string_repr_mask) != (unsigned)m->seq_string_tag ||
	    (type & (unsigned)m->string_encoding_mask) != (unsigned)m->one_byte_string_tag)
		return NULL;
	int32_t len;
	if (rd(n, pid, src - 1 + (uint64_t)m->string_length, &len, sizeof(len)) < 0 || len < 0 ||
	    (uint32_t)len > PF_V8_SOURCE_MAX)
		return NULL;
	struct script *s = script_slot(n, sc, len);
	if (s)
		return s;
	char *text = malloc(len ? (size_t)len : 1);
	if (!text || (len && rd(n, pid, src - 1 + (uint64_t)m->seq_one_chars, text, (size_t)len) < 0)) {
		free(text);
		return NULL;
	}
	uint32_t cnt = 0;
	for (int32_t i = 0; i < len; i++)
		cnt += text[i] == '\n';
	uint32_t *ends = malloc((cnt ? cnt : 1) * sizeof(*ends));
	if (!ends) {
		free(text);
		return NULL;
	}
	cnt = 0;
	for (int32_t i = 0; i < len; i++)
		if (text[i] == '\n')
			ends[cnt++] = (uint32_t)i;
	free(text);
	return script_new(n, sc, len, ends, cnt);
}

/* The 1-based line of position pos: one more than the newlines before it. */
static uint32_t line_of(const struct script *s, int64_t pos)
{
	uint32_t lo = 0, hi = s->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if ((int64_t)s->ends[mid] < pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo + 1;
}

int pf_v8_names_resolve(struct pf_v8_names *n, int pid, uint64_t sfi, struct pf_v8_frame *out)
{
	const struct pf_v8_meta *m = &n->f.meta;
	memset(out, 0, sizeof(*out));
	unsigned type;
	if (!is_heap(n, sfi))
		return -ENOENT;
	int rc = type_of(n, pid, sfi, &type);
	if (rc < 0)
		return rc;
	if (type != (unsigned)m->type_sfi)
		return -ENOENT;
	uint64_t nsi, sd;
	int64_t start = -1;
	if ((rc = field(n, pid, sfi, m->sfi_name, &nsi)) < 0)
		return rc;
	if (is_heap(n, nsi) && type_of(n, pid, nsi, &type) == 0) {
		if (string_type(n, type))
			string_into(n, pid, nsi, out->name, sizeof(out->name));
		else if (n->scope_ok && type == (unsigned)m->type_scope_info &&
			 scope_info(n, pid, nsi, out->name, sizeof(out->name), &start) < 0)
			return -ENOENT;
	}
	if (field(n, pid, sfi, m->sfi_script, &sd) == 0 && is_heap(n, sd) &&
	    type_of(n, pid, sd, &type) == 0 && type == (unsigned)m->type_script) {
		uint64_t nm;
		if (field(n, pid, sd, m->script_name, &nm) == 0)
			string_into(n, pid, nm, out->file, sizeof(out->file));
		struct script *s = start >= 0 ? script_lines(n, pid, sd) : NULL;
		if (s)
			out->line = line_of(s, start);
	}
	return 0;
}
