/* python_code.c — code objects of another process to names: pure decoding of the bytes, and a
 * per-process LRU cache over process_vm_readv. */
#include "python_code.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "pf/compiler.h"
#include "pf/list.h"
#include "python_linetable.h"

/* ---- Pure decoding ---- */

static uint64_t get_u64(const uint8_t *buf, __u32 off)
{
	uint64_t v;
	memcpy(&v, buf + off, sizeof(v));
	return v;
}

static int32_t get_i32(const uint8_t *buf, __u32 off)
{
	int32_t v;
	memcpy(&v, buf + off, sizeof(v));
	return v;
}

static uint32_t get_u32(const uint8_t *buf, __u32 off)
{
	uint32_t v;
	memcpy(&v, buf + off, sizeof(v));
	return v;
}

/* True when field off (of size bytes) lies in a buffer of len bytes. */
static bool field_in(__u32 off, size_t size, size_t len)
{
	return off != PF_PY_NONE && (size_t)off + size <= len;
}

/* An object pointer as a user-space address can be: non-zero, 8-aligned (every PyObject is),
 * below the 57-bit user address limit. */
static bool object_ptr(uint64_t p)
{
	return p && !(p & 7) && p < (1ull << 56);
}

#define PF_PY_MAX_CODE_UNITS (1 << 24) /* ob_size of a 3.11+ code object: 32 MiB of code */
#define PF_PY_MAX_FIRST_LINE (1 << 26)

int pf_py_code_parse(const struct pf_py_offsets *off, const uint8_t *buf, size_t len,
		     uint64_t code_type, struct pf_py_code_fields *out)
{
	memset(out, 0, sizeof(*out));
	if (!off->code_basicsize || len < off->code_basicsize || off->code_basicsize > 4096)
		return -EINVAL;
	size_t n = off->code_basicsize;
	if (!field_in(off->object_type, 8, n) || !field_in(off->code_filename, 8, n) ||
	    !field_in(off->code_name, 8, n) || !field_in(off->code_linetable, 8, n) ||
	    !field_in(off->code_firstlineno, 4, n))
		return -EINVAL;
	out->type = get_u64(buf, off->object_type);
	if (code_type && out->type != code_type)
		return -EINVAL;
	out->filename = get_u64(buf, off->code_filename);
	out->name = get_u64(buf, off->code_name);
	out->linetable = get_u64(buf, off->code_linetable);
	out->first_line = get_i32(buf, off->code_firstlineno);
	if (!object_ptr(out->filename) || !object_ptr(out->name) || !object_ptr(out->linetable) ||
	    out->first_line < 0 || out->first_line > PF_PY_MAX_FIRST_LINE)
		return -EINVAL;
	if (off->code_qualname != PF_PY_NONE) {
		if (!field_in(off->code_qualname, 8, n))
			return -EINVAL;
		out->qualname = get_u64(buf, off->code_qualname);
		if (!object_ptr(out->qualname))
			return -EINVAL;
	}
	out->n_units = -1;
	if (off->code_code_adaptive != PF_PY_NONE) {
		if (!field_in(off->varobject_size, 8, n))
			return -EINVAL;
		out->n_units = (int64_t)get_u64(buf, off->varobject_size);
		if (out->n_units <= 0 || out->n_units > PF_PY_MAX_CODE_UNITS)
			return -EINVAL;
	} else {
		if (!field_in(off->code_code, 8, n))
			return -EINVAL;
		out->code = get_u64(buf, off->code_code);
		if (!object_ptr(out->code))
			return -EINVAL;
	}
	out->hash = XXH3_64bits(out, offsetof(struct pf_py_code_fields, hash));
	return 0;
}

/* Appends code point c as UTF-8 to out[*o, cap - 1); false when it does not fit. Lone
 * surrogates (surrogateescape'd bytes of a file name) and NUL become U+FFFD, other control
 * characters '?' (as pf_utf8_copy_clean makes them: names go into one-line labels). */
static bool put_utf8(char *out, size_t cap, size_t *o, uint32_t c)
{
	if (c == 0 || (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
		c = 0xfffd;
	else if (c < 0x20 || c == 0x7f)
		c = '?';
	uint8_t b[4];
	size_t n;
	if (c < 0x80) {
		b[0] = (uint8_t)c;
		n = 1;
	} else if (c < 0x800) {
		b[0] = (uint8_t)(0xc0 | (c >> 6));
		b[1] = (uint8_t)(0x80 | (c & 63));
		n = 2;
	} else if (c < 0x10000) {
		b[0] = (uint8_t)(0xe0 | (c >> 12));
		b[1] = (uint8_t)(0x80 | ((c >> 6) & 63));
		b[2] = (uint8_t)(0x80 | (c & 63));
		n = 3;
	} else {
		b[0] = (uint8_t)(0xf0 | (c >> 18));
		b[1] = (uint8_t)(0x80 | ((c >> 12) & 63));
		b[2] = (uint8_t)(0x80 | ((c >> 6) & 63));
		b[3] = (uint8_t)(0x80 | (c & 63));
		n = 4;
	}
	if (*o + n >= cap)
		return false;
	memcpy(out + *o, b, n);
	*o += n;
	return true;
}

#define PF_PY_MAX_STR_LEN (1 << 20) /* code points of a str we believe */

int pf_py_str_decode(const struct pf_py_offsets *off, const uint8_t *buf, size_t len, char *out,
		     size_t cap, size_t *need)
{
	if (cap)
		out[0] = '\0';
	if (!field_in(off->unicode_state, 4, len) || !field_in(off->unicode_length, 8, len))
		return -EINVAL;
	uint32_t state = get_u32(buf, off->unicode_state);
	int64_t length = (int64_t)get_u64(buf, off->unicode_length);
	unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
	if (!compact || length < 0 || length > PF_PY_MAX_STR_LEN ||
	    (kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1))
		return -EINVAL;
	size_t data = ascii ? off->unicode_ascii_size : off->unicode_compact_size;
	/* characters beyond what fits in cap (4 bytes of UTF-8 each at most... at least one) are
	 * never needed: read no more than cap of them */
	size_t chars = pf_min((size_t)length, cap ? cap - 1 : 0);
	size_t want = data + chars * kind;
	if (need)
		*need = want;
	if (len < want)
		return -EAGAIN;
	size_t o = 0;
	const uint8_t *p = buf + data;
	for (size_t i = 0; i < chars; i++) {
		uint32_t c = kind == 1	 ? p[i]
			     : kind == 2 ? (uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8
					 : get_u32(p, (__u32)(4 * i));
		if (ascii && c >= 0x80) {
			out[0] = '\0'; /* nothing of a refused str */
			return -EINVAL;
		}
		if (!put_utf8(out, cap, &o, c))
			break;
	}
	if (cap)
		out[o] = '\0';
	return 0;
}

int pf_py_bytes_header(const struct pf_py_offsets *off, const uint8_t *buf, size_t len, size_t max,
		       size_t *data_off, size_t *data_len)
{
	if (!field_in(off->varobject_size, 8, len) || off->bytes_sval == PF_PY_NONE ||
	    len < off->bytes_sval)
		return -EINVAL;
	int64_t n = (int64_t)get_u64(buf, off->varobject_size);
	if (n < 0)
		return -EINVAL;
	if ((uint64_t)n > max)
		return -E2BIG;
	*data_off = off->bytes_sval;
	*data_len = (size_t)n;
	return 0;
}

/* ---- The cache ---- */

struct entry {
	uint64_t addr;		   /* the code object's address */
	uint64_t hash;		   /* pf_py_code_fields.hash when it was read */
	struct entry *hnext;	   /* hash chain */
	struct entry *prev, *next; /* LRU list, most recent first */
	size_t bytes;		   /* what it holds, with this struct */
	char *name, *filename;	   /* in the same allocation, after the line table */
	uint32_t first_line;
	bool has_table; /* false: the line table was too long to keep */
	uint32_t table_len;
	uint8_t table[];
};

struct pf_py_names {
	struct pf_py_process proc;
	size_t max_bytes, bytes;
	struct entry **buckets;
	size_t nbuckets; /* a power of two */
	struct entry *head, *tail;
	struct pf_py_names_stats st;
};

#define PF_PY_NAMES_DEFAULT_BYTES ((size_t)1 << 20)
#define PF_PY_NAMES_MIN_BUCKETS 64

struct pf_py_names *pf_py_names_new(const struct pf_py_process *p, size_t max_bytes)
{
	struct pf_py_names *n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->proc = *p;
	n->max_bytes = max_bytes ? max_bytes : PF_PY_NAMES_DEFAULT_BYTES;
	n->nbuckets = PF_PY_NAMES_MIN_BUCKETS;
	n->buckets = calloc(n->nbuckets, sizeof(*n->buckets));
	if (!n->buckets) {
		free(n);
		errno = ENOMEM;
		return NULL;
	}
	n->bytes = sizeof(*n) + n->nbuckets * sizeof(*n->buckets);
	return n;
}

void pf_py_names_free(struct pf_py_names *names)
{
	if (!names)
		return;
	for (struct entry *e = names->head, *next; e; e = next) {
		next = e->next;
		free(e);
	}
	free(names->buckets);
	free(names);
}

size_t pf_py_names_bytes(const struct pf_py_names *names)
{
	return names ? names->bytes : 0;
}

void pf_py_names_stats(const struct pf_py_names *names, struct pf_py_names_stats *out)
{
	*out = names->st;
}

static size_t bucket_of(const struct pf_py_names *n, uint64_t addr)
{
	return (size_t)(XXH3_64bits(&addr, sizeof(addr)) & (n->nbuckets - 1));
}

static struct entry *lookup(struct pf_py_names *n, uint64_t addr)
{
	for (struct entry *e = n->buckets[bucket_of(n, addr)]; e; e = e->hnext)
		if (e->addr == addr)
			return e;
	return NULL;
}

static void lru_unlink(struct pf_py_names *n, struct entry *e)
{
	PF_DLIST_UNLINK_T(n->head, n->tail, e, prev, next);
}

static void lru_push(struct pf_py_names *n, struct entry *e)
{
	PF_DLIST_PUSH_FRONT_T(n->head, n->tail, e, prev, next);
}

static void drop(struct pf_py_names *n, struct entry *e)
{
	struct entry **pp = &n->buckets[bucket_of(n, e->addr)];
	while (*pp && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = e->hnext;
	lru_unlink(n, e);
	n->bytes -= e->bytes;
	n->st.entries--;
	free(e);
}

/* Doubles the bucket array when the entries outnumber it (allocation failure keeps the old
 * one: chains get longer, nothing breaks). */
static void maybe_grow(struct pf_py_names *n)
{
	if (n->st.entries < n->nbuckets)
		return;
	size_t nb = n->nbuckets * 2;
	struct entry **b = calloc(nb, sizeof(*b));
	if (!b)
		return;
	struct entry **old = n->buckets;
	size_t old_n = n->nbuckets;
	n->buckets = b;
	n->nbuckets = nb;
	for (size_t i = 0; i < old_n; i++) {
		for (struct entry *e = old[i], *next; e; e = next) {
			next = e->hnext;
			size_t k = bucket_of(n, e->addr);
			e->hnext = b[k];
			b[k] = e;
		}
	}
	free(old);
	n->bytes += (nb - old_n) * sizeof(*b);
}

static int read_mem(struct pf_py_names *n, int pid, uint64_t addr, void *buf, size_t len)
{
	int r = pf_py_read_mem(pid, addr, buf, len);
	if (r < 0)
		n->st.read_failed++;
	return r;
}

/* Reads the str object at addr into out[0, cap). 0; -EINVAL (not a str); a read error. */
static int read_str(struct pf_py_names *n, int pid, uint64_t addr, char *out, size_t cap)
{
	const struct pf_py_offsets *off = &n->proc.off;
	uint8_t hdr[256];
	size_t hlen = pf_min((size_t)off->unicode_compact_size, sizeof(hdr));
	int r = read_mem(n, pid, addr, hdr, hlen);
	if (r < 0)
		return r;
	if (n->proc.unicode_type_addr &&
	    (!field_in(off->object_type, 8, hlen) ||
	     get_u64(hdr, off->object_type) != n->proc.unicode_type_addr))
		return -EINVAL;
	size_t need = 0;
	r = pf_py_str_decode(off, hdr, hlen, out, cap, &need);
	if (r != -EAGAIN)
		return r;
	if (need > PF_PY_STR_READ_MAX + (size_t)off->unicode_compact_size)
		return -EINVAL;
	_cleanup_free_ uint8_t *buf = malloc(need);
	if (!buf)
		return -ENOMEM;
	r = read_mem(n, pid, addr, buf, need);
	if (r < 0)
		return r;
	/* the header was read twice: the object must not have changed in between */
	if (memcmp(buf, hdr, hlen) != 0)
		return -EINVAL;
	return pf_py_str_decode(off, buf, need, out, cap, NULL);
}

/* Reads the line table (a bytes object) at addr into a malloc'd *out (NULL when empty). 0;
 * -E2BIG when it is longer than PF_PY_LINETABLE_MAX (names still work, lines are 0); -EINVAL;
 * a read error. */
static int read_table(struct pf_py_names *n, int pid, uint64_t addr, uint8_t **out, size_t *len)
{
	const struct pf_py_offsets *off = &n->proc.off;
	uint8_t hdr[64];
	size_t hlen = off->bytes_sval;
	*out = NULL;
	*len = 0;
	if (hlen > sizeof(hdr))
		return -EINVAL;
	int r = read_mem(n, pid, addr, hdr, hlen);
	if (r < 0)
		return r;
	if (n->proc.bytes_type_addr && (!field_in(off->object_type, 8, hlen) ||
					get_u64(hdr, off->object_type) != n->proc.bytes_type_addr))
		return -EINVAL;
	size_t data_off, data_len;
	r = pf_py_bytes_header(off, hdr, hlen, PF_PY_LINETABLE_MAX, &data_off, &data_len);
	if (r < 0 || data_len == 0)
		return r;
	uint8_t *t = malloc(data_len);
	if (!t)
		return -ENOMEM;
	r = read_mem(n, pid, addr + data_off, t, data_len);
	if (r < 0) {
		free(t);
		return r;
	}
	*out = t;
	*len = data_len;
	return 0;
}

/* Reads the names and line table of the code object with fields f into a new entry. */
static int load(struct pf_py_names *n, int pid, uint64_t addr, const struct pf_py_code_fields *f,
		struct entry **out)
{
	char name[PF_PY_NAME_MAX + 1], file[PF_PY_FILE_MAX + 1];
	int r = read_str(n, pid, f->qualname ? f->qualname : f->name, name, sizeof(name));
	if (r < 0)
		return r;
	if (!name[0])
		return -EINVAL;
	r = read_str(n, pid, f->filename, file, sizeof(file));
	if (r < 0)
		return r;
	_cleanup_free_ uint8_t *table = NULL;
	size_t tlen = 0;
	r = read_table(n, pid, f->linetable, &table, &tlen);
	if (r < 0 && r != -E2BIG)
		return r;
	bool has_table = r == 0;
	size_t nlen = strlen(name) + 1, flen = strlen(file) + 1;
	size_t bytes = sizeof(struct entry) + tlen + nlen + flen;
	struct entry *e = malloc(bytes);
	if (!e)
		return -ENOMEM;
	memset(e, 0, sizeof(*e));
	e->addr = addr;
	e->hash = f->hash;
	e->bytes = bytes;
	e->first_line = (uint32_t)f->first_line;
	e->has_table = has_table;
	e->table_len = (uint32_t)tlen;
	if (tlen)
		memcpy(e->table, table, tlen);
	e->name = (char *)e->table + tlen;
	memcpy(e->name, name, nlen);
	e->filename = e->name + nlen;
	memcpy(e->filename, file, flen);
	*out = e;
	return 0;
}

static void insert(struct pf_py_names *n, struct entry *e)
{
	size_t k = bucket_of(n, e->addr);
	e->hnext = n->buckets[k];
	n->buckets[k] = e;
	lru_push(n, e);
	n->bytes += e->bytes;
	n->st.entries++;
	/* the newest entry stays even when it alone is over the bound */
	while (n->bytes > n->max_bytes && n->tail && n->tail != e) {
		drop(n, n->tail);
		n->st.evicted++;
	}
	maybe_grow(n);
}

/* The byte offset into the code of instruction value instr (pf_py_names_resolve), or -1 for
 * "before the first instruction" (the line is the first line). */
static int64_t byte_offset(const struct pf_py_offsets *off, int32_t instr)
{
	if (instr < 0)
		return -1;
	if (off->frame_kind == PF_PY_FRAMES_OBJECT && off->lasti_unit == PF_PY_LASTI_UNITS)
		return (int64_t)instr * 2;
	return instr & ~1; /* code units are 2 bytes */
}

static int resolve(struct pf_py_names *names, int pid, uint64_t code_addr, int32_t instr,
		   const uint32_t *key, struct pf_py_frame *out)
{
	const struct pf_py_offsets *off = &names->proc.off;
	memset(out, 0, sizeof(*out));
	uint8_t buf[4096];
	size_t blen = off->code_basicsize;
	if (!blen || blen > sizeof(buf) || !object_ptr(code_addr))
		return -EINVAL;
	int r = read_mem(names, pid, code_addr, buf, blen);
	if (r < 0)
		return r;
	struct pf_py_code_fields f;
	if (pf_py_code_parse(off, buf, blen, names->proc.code_type_addr, &f) < 0) {
		names->st.invalid++;
		struct entry *old = lookup(names, code_addr);
		if (old) {
			drop(names, old); /* freed: whatever is there now is no code object */
			names->st.stale++;
		}
		return -EINVAL;
	}
	if (key && *key != (uint32_t)f.first_line) {
		names->st.stale++;
		return -ESTALE;
	}
	struct entry *e = lookup(names, code_addr);
	if (e && e->hash != f.hash) {
		drop(names, e);
		names->st.stale++;
		e = NULL;
	}
	if (e) {
		names->st.hits++;
		lru_unlink(names, e);
		lru_push(names, e);
	} else {
		names->st.misses++;
		r = load(names, pid, code_addr, &f, &e);
		if (r < 0) {
			if (r == -EINVAL)
				names->st.invalid++;
			return r;
		}
		insert(names, e);
	}
	snprintf(out->name, sizeof(out->name), "%s", e->name);
	snprintf(out->filename, sizeof(out->filename), "%s", e->filename);
	out->first_line = e->first_line;
	int64_t bo = byte_offset(off, instr);
	if (bo < 0) {
		out->line = e->first_line;
	} else if (e->has_table && bo <= UINT32_MAX && (f.n_units < 0 || bo < f.n_units * 2)) {
		uint32_t line = 0;
		if (pf_py_line_for(names->proc.minor, e->table, e->table_len,
				   (int32_t)e->first_line, (uint32_t)bo, &line) == 0)
			out->line = line;
	}
	return 0;
}

int pf_py_names_resolve(struct pf_py_names *names, int pid, uint64_t code_addr, int32_t instr,
			struct pf_py_frame *out)
{
	return resolve(names, pid, code_addr, instr, NULL, out);
}

int pf_py_names_resolve_key(struct pf_py_names *names, int pid, uint64_t code_addr, int32_t instr,
			    uint32_t first_line_key, struct pf_py_frame *out)
{
	return resolve(names, pid, code_addr, instr, &first_line_key, out);
}
