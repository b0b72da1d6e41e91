/* line_table.c — see line_table.h. */
#include "symbolize/line_table.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <libelf.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "pf/array.h"
#include "pf/compiler.h"
#include "symbolize/sorted_find.h"
#include "unwind/table_builder.h"

#define MAGIC "PFLINTB1"
#define KEY_CHARS "0123456789abcdef-"
#define SCOPE_DEPTH 64     /* nesting of scopes followed */
/* Rows libdw may hold decoded before the handle is renewed: ~100 bytes each in its heap. At
 * 32768, a -g libpython's build peaks at 36 MB instead of 58 (most of it the file's own
 * pages, read once), for the same CPU time. */
#define RESTART_LINES (1u << 15)

struct hdr {
	char magic[8];
	uint32_t version, flags;
	uint64_t base;
	uint32_t n_rows, n_inl, str_bytes, pad;
	uint64_t checksum;
	char key[16];
};
_Static_assert(sizeof(struct hdr) == 64, "the header is 64 bytes");

struct row {
	uint32_t addr, file, line, inl;
};

struct inl_rec {
	uint32_t parent, name, call_file, call_line;
};

/* ---- the DWARF walk ------------------------------------------------------------------------ */

/* DIE tags whose own code range says whether an address is inside (libdw's scopes), and tags
 * with no code of their own that may hold such DIEs (C++ namespaces and classes, Rust
 * modules). */
static bool scope_tag(int tag)
{
	return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
	       tag == DW_TAG_lexical_block || tag == DW_TAG_entry_point ||
	       tag == DW_TAG_with_stmt || tag == DW_TAG_catch_block || tag == DW_TAG_try_block;
}

static bool container_tag(int tag)
{
	return tag == DW_TAG_namespace || tag == DW_TAG_module || tag == DW_TAG_class_type ||
	       tag == DW_TAG_structure_type || tag == DW_TAG_union_type ||
	       tag == DW_TAG_interface_type;
}

/* The name of a subprogram or inlined subroutine: its linkage name through the abstract
 * origin when there is one (so it demangles to the qualified name), else DW_AT_name. */
static const char *function_name(Dwarf_Die *die)
{
	Dwarf_Attribute a;
	const char *nm = NULL;
	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a))
		nm = dwarf_formstring(&a);
	return nm ? nm : dwarf_diename(die);
}

/* ---- building (in the table builder's child) -------------------------------------------- */

/* One row of a CU's line table as libdw decoded it. */
struct raw_line {
	uint64_t addr;
	uint32_t file, line;
	uint32_t seq; /* decode order */
	uint32_t end; /* an end of sequence */
};

/* The code range of one inlined instance. */
struct ival {
	uint64_t lo, hi;
	uint32_t rec, depth;
};

struct builder {
	struct raw_line *lines;
	size_t n_lines, cap_lines;
	struct ival *iv;
	size_t n_iv, cap_iv;
	struct inl_rec *inl;
	size_t n_inl, cap_inl;
	char *str; /* the string blob */
	size_t n_str, cap_str;
	uint32_t *slots; /* open addressing: string offset + 1, 0 empty */
	size_t n_slots, used_slots;
	size_t max_rows;
	int err;
};

static bool grow(void **p, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return true;
	size_t c = *cap ? *cap * 2 : 256;
	void *q = realloc(*p, c * size);
	if (!q)
		return false;
	*p = q;
	*cap = c;
	return true;
}

static uint64_t str_hash(const char *s, size_t n)
{
	return XXH3_64bits(s, n);
}

static bool slots_grow(struct builder *b)
{
	size_t n = b->n_slots ? b->n_slots * 2 : 1024;
	uint32_t *s = calloc(n, sizeof(*s));
	if (!s)
		return false;
	for (size_t i = 0; i < b->n_slots; i++) {
		uint32_t v = b->slots[i];
		if (!v)
			continue;
		const char *t = b->str + v - 1;
		size_t k = str_hash(t, strlen(t)) & (n - 1);
		while (s[k])
			k = (k + 1) & (n - 1);
		s[k] = v;
	}
	free(b->slots);
	b->slots = s;
	b->n_slots = n;
	return true;
}

/* s's offset in the blob (added once), PF_LINE_NONE for NULL or on failure (b->err). */
static uint32_t intern(struct builder *b, const char *s)
{
	if (!s || b->err)
		return PF_LINE_NONE;
	size_t len = strnlen(s, PF_LINE_STR_MAX - 1);
	if ((b->used_slots + 1) * 2 > b->n_slots && !slots_grow(b)) {
		b->err = -ENOMEM;
		return PF_LINE_NONE;
	}
	size_t k = str_hash(s, len) & (b->n_slots - 1);
	for (; b->slots[k]; k = (k + 1) & (b->n_slots - 1)) {
		const char *t = b->str + b->slots[k] - 1;
		if (!strncmp(t, s, len) && !t[len])
			return b->slots[k] - 1;
	}
	if (b->n_str + len + 1 >= UINT32_MAX - 1) {
		b->err = -E2BIG;
		return PF_LINE_NONE;
	}
	if (PF_ARRAY_GROW(b->str, b->cap_str, b->n_str + len + 1, 65536) < 0) {
		b->err = -ENOMEM;
		return PF_LINE_NONE;
	}
	uint32_t off = (uint32_t)b->n_str;
	memcpy(b->str + off, s, len);
	b->str[off + len] = '\0';
	b->n_str += len + 1;
	b->slots[k] = off + 1;
	b->used_slots++;
	return off;
}

static void cu_lines(struct builder *b, Dwarf_Die *cu)
{
	Dwarf_Lines *lines;
	size_t nl;
	if (dwarf_getsrclines(cu, &lines, &nl) != 0)
		return;
	const char *last_src = NULL;
	uint32_t last_off = PF_LINE_NONE;
	for (size_t i = 0; i < nl && !b->err; i++) {
		Dwarf_Line *l = dwarf_onesrcline(lines, i);
		Dwarf_Addr a;
		bool end = false;
		int ln = 0;
		if (!l || dwarf_lineaddr(l, &a) != 0)
			continue;
		dwarf_lineendsequence(l, &end);
		dwarf_lineno(l, &ln);
		const char *src = dwarf_linesrc(l, NULL, NULL);
		if (src != last_src) {
			last_src = src;
			last_off = intern(b, src);
		}
		if (b->n_lines >= 2 * b->max_rows) {
			b->err = -E2BIG;
			return;
		}
		if (!grow((void **)&b->lines, &b->cap_lines, b->n_lines, sizeof(*b->lines))) {
			b->err = -ENOMEM;
			return;
		}
		b->lines[b->n_lines] = (struct raw_line){a, last_off, ln > 0 ? (uint32_t)ln : 0,
							 (uint32_t)b->n_lines, end};
		b->n_lines++;
	}
}

static bool has_code(Dwarf_Die *die)
{
	Dwarf_Addr base, lo, hi;
	return dwarf_ranges(die, 0, &base, &lo, &hi) > 0;
}

/* Records the inlined instances below parent (through scopes with code and containers, as
 * the symbolizer's walk for one address goes), each with its ranges and its parent record. */
static void walk(struct builder *b, Dwarf_Die *parent, Dwarf_Files *files, size_t nfiles,
		 uint32_t parent_rec, uint32_t depth, int level)
{
	Dwarf_Die child;
	if (level > SCOPE_DEPTH || dwarf_child(parent, &child) != 0)
		return;
	do {
		int tag = dwarf_tag(&child);
		if (scope_tag(tag)) {
			if (!has_code(&child))
				continue;
			uint32_t rec = parent_rec, d = depth;
			if (tag == DW_TAG_inlined_subroutine) {
				Dwarf_Attribute a;
				Dwarf_Word cf = 0, cl = 0;
				if (dwarf_attr(&child, DW_AT_call_file, &a))
					dwarf_formudata(&a, &cf);
				if (dwarf_attr(&child, DW_AT_call_line, &a))
					dwarf_formudata(&a, &cl);
				const char *file =
					files && cf < nfiles ? dwarf_filesrc(files, cf, NULL, NULL) : NULL;
				if (!grow((void **)&b->inl, &b->cap_inl, b->n_inl, sizeof(*b->inl))) {
					b->err = -ENOMEM;
					return;
				}
				rec = (uint32_t)b->n_inl;
				b->inl[b->n_inl++] = (struct inl_rec){
					parent_rec, intern(b, function_name(&child)),
					intern(b, file), cl <= UINT32_MAX ? (uint32_t)cl : 0};
				d = depth + 1;
				Dwarf_Addr base, lo, hi;
				ptrdiff_t it = 0;
				while ((it = dwarf_ranges(&child, it, &base, &lo, &hi)) > 0) {
					if (hi <= lo)
						continue;
					if (!grow((void **)&b->iv, &b->cap_iv, b->n_iv, sizeof(*b->iv))) {
						b->err = -ENOMEM;
						return;
					}
					b->iv[b->n_iv++] = (struct ival){lo, hi, rec, d};
				}
			}
			if (dwarf_haschildren(&child) == 1)
				walk(b, &child, files, nfiles, rec, d, level + 1);
		} else if (container_tag(tag) && dwarf_haschildren(&child) == 1) {
			walk(b, &child, files, nfiles, parent_rec, depth, level + 1);
		}
		if (b->err)
			return;
	} while (dwarf_siblingof(&child, &child) == 0);
}

/* Every compile unit's lines and inlined instances. The handle is renewed after
 * RESTART_LINES decoded rows: libdw keeps every CU's table until dwarf_end, and the child's
 * memory stays bounded on a large program. */
static int decode(struct builder *b, Elf *elf)
{
	Dwarf *dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
	if (!dw)
		return -ENOENT;
	Dwarf_Off off = 0, next;
	size_t hsize, since = 0;
	while (!b->err &&
	       dwarf_next_unit(dw, off, &next, &hsize, NULL, NULL, NULL, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu;
		if (dwarf_offdie(dw, off + hsize, &cu) && dwarf_tag(&cu) == DW_TAG_compile_unit) {
			size_t before = b->n_lines;
			cu_lines(b, &cu);
			Dwarf_Files *files;
			size_t nf;
			if (dwarf_getsrcfiles(&cu, &files, &nf) != 0) {
				files = NULL;
				nf = 0;
			}
			walk(b, &cu, files, nf, PF_LINE_NONE, 0, 0);
			since += b->n_lines - before;
			if (since > RESTART_LINES) {
				dwarf_end(dw);
				since = 0;
				if (!(dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL)))
					return -ENOMEM;
			}
		}
		off = next;
	}
	dwarf_end(dw);
	return b->err;
}

static int line_cmp(const void *x, const void *y)
{
	const struct raw_line *a = x, *b = y;
	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	if (a->end != b->end) /* ends first: a row starting there wins */
		return a->end ? -1 : 1;
	return (a->seq > b->seq) - (a->seq < b->seq);
}

static int ival_cmp(const void *x, const void *y)
{
	const struct ival *a = x, *b = y;
	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	return (a->depth > b->depth) - (a->depth < b->depth);
}

static int u64_cmp(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return (a > b) - (a < b);
}

/* The rows: one per address where the line or the innermost inlined instance changes. */
static int make_rows(struct builder *b, struct row **out, size_t *n_out, uint64_t *base)
{
	qsort(b->lines, b->n_lines, sizeof(*b->lines), line_cmp);
	size_t nl = 0; /* the last row at each address */
	for (size_t i = 0; i < b->n_lines; i++) {
		if (nl && b->lines[nl - 1].addr == b->lines[i].addr)
			nl--;
		b->lines[nl++] = b->lines[i];
	}
	if (b->n_iv)
		qsort(b->iv, b->n_iv, sizeof(*b->iv), ival_cmp);
	size_t nx = nl + 2 * b->n_iv;
	_cleanup_free_ uint64_t *x = malloc((nx ? nx : 1) * sizeof(*x));
	if (!x)
		return -ENOMEM;
	size_t k = 0;
	for (size_t i = 0; i < nl; i++)
		x[k++] = b->lines[i].addr;
	for (size_t i = 0; i < b->n_iv; i++) {
		x[k++] = b->iv[i].lo;
		x[k++] = b->iv[i].hi;
	}
	qsort(x, k, sizeof(*x), u64_cmp);
	size_t nu = 0;
	for (size_t i = 0; i < k; i++)
		if (!nu || x[nu - 1] != x[i])
			x[nu++] = x[i];
	if (!nu)
		return -ENOENT;
	if (x[nu - 1] - x[0] > UINT32_MAX)
		return -E2BIG;
	*base = x[0];
	struct row *rows = malloc(nu * sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	struct ival stack[SCOPE_DEPTH];
	size_t sp = 0, li = 0, vi = 0, n = 0;
	for (size_t i = 0; i < nu; i++) {
		uint64_t a = x[i];
		while (li < nl && b->lines[li].addr <= a)
			li++;
		while (sp && stack[sp - 1].hi <= a)
			sp--;
		for (; vi < b->n_iv && b->iv[vi].lo <= a; vi++)
			if (b->iv[vi].hi > a && sp < SCOPE_DEPTH)
				stack[sp++] = b->iv[vi];
		const struct raw_line *l = li && !b->lines[li - 1].end ? &b->lines[li - 1] : NULL;
		struct row r = {(uint32_t)(a - *base), l ? l->file : PF_LINE_NONE, l ? l->line : 0,
				sp ? stack[sp - 1].rec : PF_LINE_NONE};
		if (n && rows[n - 1].file == r.file && rows[n - 1].line == r.line &&
		    rows[n - 1].inl == r.inl)
			continue;
		if (n >= b->max_rows) {
			free(rows);
			return -E2BIG;
		}
		rows[n++] = r;
	}
	*out = rows;
	*n_out = n;
	return 0;
}

static bool key_ok(const char *key)
{
	size_t n = strlen(key);
	return n && n < 64 && strspn(key, KEY_CHARS) == n;
}

static int store(const char *dir, const char *key, uint64_t base, const struct row *rows,
		 size_t n_rows, const struct builder *b)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/%s.lin", dir, key) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	struct hdr h;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, MAGIC, 8);
	h.version = PF_LINE_TABLE_VERSION;
	h.base = base;
	h.n_rows = (uint32_t)n_rows;
	h.n_inl = (uint32_t)b->n_inl;
	h.str_bytes = (uint32_t)b->n_str;
	memcpy(h.key, key, strnlen(key, sizeof(h.key) - 1)); /* h is zeroed: NUL padded */
	XXH3_state_t *xs = XXH3_createState();
	if (!xs)
		return -ENOMEM;
	XXH3_64bits_reset(xs);
	XXH3_64bits_update(xs, rows, n_rows * sizeof(*rows));
	XXH3_64bits_update(xs, b->inl, b->n_inl * sizeof(*b->inl));
	XXH3_64bits_update(xs, b->str, b->n_str);
	h.checksum = XXH3_64bits_digest(xs);
	XXH3_freeState(xs);
	const struct iovec parts[] = {
	    {&h, sizeof(h)},
	    {(void *)rows, n_rows * sizeof(*rows)},
	    {b->inl, b->n_inl * sizeof(*b->inl)},
	    {b->str, b->n_str},
	};
	return pf_tbuilder_write_file(dir, path, parts, PF_ARRAY_SIZE(parts));
}

int pf_line_table_build_store(uint64_t max_rows, int fd, const char *dir, const char *key)
{
	if (!key_ok(key) || fd < 0)
		return -EINVAL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -EINVAL;
	if (elf_kind(elf) != ELF_K_ELF) {
		elf_end(elf);
		return -EINVAL;
	}
	struct builder b = {.max_rows = max_rows && max_rows < PF_LINE_TABLE_MAX_ROWS
						? (size_t)max_rows
						: PF_LINE_TABLE_MAX_ROWS};
	int rc = decode(&b, elf);
	elf_end(elf);
	free(b.slots);
	b.slots = NULL;
	struct row *rows = NULL;
	size_t n_rows = 0;
	uint64_t base = 0;
	if (!rc && !b.n_lines)
		rc = -ENOENT;
	if (!rc)
		rc = make_rows(&b, &rows, &n_rows, &base);
	free(b.lines);
	free(b.iv);
	if (!rc)
		rc = store(dir, key, base, rows, n_rows, &b);
	free(rows);
	free(b.inl);
	free(b.str);
	return rc;
}

/* ---- reading ------------------------------------------------------------------------------ */

struct pf_line_table {
	int fd;
	struct hdr h;
	uint64_t rows_off, inl_off, str_off;
	uint32_t *index; /* first address of each block */
	uint32_t n_blocks;
	uint32_t cached; /* the block in block[], PF_LINE_NONE when none */
	uint32_t cached_n;
	struct row block[PF_LINE_TABLE_BLOCK];
};

static int pread_all(int fd, void *p, size_t n, uint64_t off)
{
	char *c = p;
	while (n) {
		ssize_t r = pread(fd, c, n, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EBADMSG; /* shorter than its header says */
		c += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

static bool ref_ok(uint32_t v, uint32_t limit)
{
	return v == PF_LINE_NONE || v < limit;
}

/* Reads the body once: its checksum, the rows' order and references, the index. */
static int check_body(struct pf_line_table *t)
{
	const struct hdr *h = &t->h;
	XXH3_state_t *xs = XXH3_createState();
	if (!xs)
		return -ENOMEM;
	XXH3_64bits_reset(xs);
	enum { CHUNK = 4096 }; /* rows and records are 16 bytes: a chunk holds whole ones */
	_Alignas(16) char buf[CHUNK * 16];
	uint64_t end = t->str_off + h->str_bytes, prev = 0;
	int rc = 0;
	char last = '\0';
	for (uint64_t off = t->rows_off; off < end && !rc;) {
		size_t n = end - off < sizeof(buf) ? (size_t)(end - off) : sizeof(buf);
		/* a chunk is all rows, all records or all strings */
		if (off < t->inl_off && off + n > t->inl_off)
			n = (size_t)(t->inl_off - off);
		else if (off < t->str_off && off + n > t->str_off)
			n = (size_t)(t->str_off - off);
		if ((rc = pread_all(t->fd, buf, n, off)))
			break;
		XXH3_64bits_update(xs, buf, n);
		if (off < t->inl_off) {
			const struct row *r = (const struct row *)buf;
			uint64_t first = (off - t->rows_off) / sizeof(*r);
			for (size_t i = 0; i < n / sizeof(*r) && !rc; i++) {
				uint64_t k = first + i;
				if ((k && r[i].addr <= prev) || !ref_ok(r[i].file, h->str_bytes) ||
				    !ref_ok(r[i].inl, h->n_inl))
					rc = -EBADMSG;
				prev = r[i].addr;
				if (k % PF_LINE_TABLE_BLOCK == 0)
					t->index[k / PF_LINE_TABLE_BLOCK] = r[i].addr;
			}
		} else if (off < t->str_off) {
			const struct inl_rec *r = (const struct inl_rec *)buf;
			uint64_t first = (off - t->inl_off) / sizeof(*r);
			for (size_t i = 0; i < n / sizeof(*r) && !rc; i++)
				if ((r[i].parent != PF_LINE_NONE && r[i].parent >= first + i) ||
				    !ref_ok(r[i].name, h->str_bytes) ||
				    !ref_ok(r[i].call_file, h->str_bytes))
					rc = -EBADMSG; /* a parent comes first: chains end */
		} else {
			last = buf[n - 1];
		}
		off += n;
	}
	if (!rc && (XXH3_64bits_digest(xs) != h->checksum || (h->str_bytes && last != '\0')))
		rc = -EBADMSG;
	XXH3_freeState(xs);
	return rc;
}

int pf_line_table_open(const char *dir, const char *key, struct pf_line_table **out)
{
	*out = NULL;
	char path[PATH_MAX];
	if (!key_ok(key))
		return -EINVAL;
	if (snprintf(path, sizeof(path), "%s/%s.lin", dir, key) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	struct pf_line_table *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->cached = PF_LINE_NONE;
	t->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (t->fd < 0) {
		int e = errno;
		free(t);
		return -e;
	}
	struct stat sb;
	int rc = fstat(t->fd, &sb) < 0 ? -errno : pread_all(t->fd, &t->h, sizeof(t->h), 0);
	const struct hdr *h = &t->h;
	char want[16] = {0};
	memcpy(want, key, strnlen(key, sizeof(want) - 1));
	t->rows_off = sizeof(*h);
	t->inl_off = t->rows_off + (uint64_t)h->n_rows * sizeof(struct row);
	t->str_off = t->inl_off + (uint64_t)h->n_inl * sizeof(struct inl_rec);
	if (!rc && (memcmp(h->magic, MAGIC, 8) || h->version != PF_LINE_TABLE_VERSION ||
		    !h->n_rows || h->n_rows > PF_LINE_TABLE_MAX_ROWS ||
		    memcmp(h->key, want, sizeof(want)) ||
		    (uint64_t)sb.st_size != t->str_off + h->str_bytes))
		rc = -EBADMSG;
	if (!rc) {
		t->n_blocks = (h->n_rows + PF_LINE_TABLE_BLOCK - 1) / PF_LINE_TABLE_BLOCK;
		t->index = malloc(t->n_blocks * sizeof(*t->index));
		rc = t->index ? check_body(t) : -ENOMEM;
	}
	if (rc) {
		pf_line_table_close(t);
		return rc;
	}
	(void)futimens(t->fd, NULL); /* used now: the last a prune deletes */
	*out = t;
	return 0;
}

void pf_line_table_close(struct pf_line_table *t)
{
	if (!t)
		return;
	close(t->fd);
	free(t->index);
	free(t);
}

uint32_t pf_line_table_rows(const struct pf_line_table *t)
{
	return t->h.n_rows;
}

size_t pf_line_table_memory(const struct pf_line_table *t)
{
	return sizeof(*t) + t->n_blocks * sizeof(*t->index);
}

/* String off of the table into r->buf (cut to what is left there). NULL for PF_LINE_NONE or
 * when r->buf is full; *rc set on a read error. */
static const char *read_str(struct pf_line_table *t, uint32_t off, struct pf_line_result *r,
			    int *rc)
{
	if (off == PF_LINE_NONE || *rc)
		return NULL;
	size_t room = sizeof(r->buf) - r->used;
	if (room < 2)
		return NULL;
	size_t n = t->h.str_bytes - off;
	if (n > room - 1)
		n = room - 1;
	if (n > PF_LINE_STR_MAX - 1)
		n = PF_LINE_STR_MAX - 1;
	char *s = r->buf + r->used;
	/* most strings are short: read a little first, the rest only when no NUL came */
	size_t first = n < 256 ? n : 256;
	if ((*rc = pread_all(t->fd, s, first, t->str_off + off)))
		return NULL;
	size_t len = strnlen(s, first);
	if (len == first && n > first) {
		if ((*rc = pread_all(t->fd, s + first, n - first, t->str_off + off + first)))
			return NULL;
		len = strnlen(s, n);
	}
	s[len] = '\0';
	r->used += len + 1;
	return s;
}

int pf_line_table_lookup(struct pf_line_table *t, uint64_t vaddr, struct pf_line_result *r)
{
	r->file = NULL;
	r->line = 0;
	r->n_inl = 0;
	r->used = 0;
	if (vaddr < t->h.base || vaddr - t->h.base > UINT32_MAX)
		return 0;
	uint32_t a = (uint32_t)(vaddr - t->h.base);
	uint32_t lo = (uint32_t)PF_COUNT_AT_OR_BELOW(t->index, t->n_blocks, , a);
	if (!lo)
		return 0;
	uint32_t blk = lo - 1;
	if (t->cached != blk) {
		uint32_t first = blk * PF_LINE_TABLE_BLOCK;
		uint32_t n = t->h.n_rows - first < PF_LINE_TABLE_BLOCK ? t->h.n_rows - first
									: PF_LINE_TABLE_BLOCK;
		t->cached = PF_LINE_NONE;
		int rc = pread_all(t->fd, t->block, n * sizeof(struct row),
				   t->rows_off + (uint64_t)first * sizeof(struct row));
		if (rc)
			return rc;
		t->cached = blk;
		t->cached_n = n;
	}
	lo = (uint32_t)PF_COUNT_AT_OR_BELOW(t->block, t->cached_n, .addr, a);
	if (!lo)
		return -EBADMSG; /* the index said the block starts at or before a */
	const struct row *row = &t->block[lo - 1];
	int rc = 0;
	const char *file = read_str(t, row->file, r, &rc);
	uint32_t line = row->line;
	for (uint32_t i = row->inl, hops = 0; i != PF_LINE_NONE && r->n_inl < PF_LINE_INLINE_MAX;
	     hops++) {
		struct inl_rec rec;
		if (i >= t->h.n_inl || hops > t->h.n_inl ||
		    (rc = pread_all(t->fd, &rec, sizeof(rec),
				    t->inl_off + (uint64_t)i * sizeof(rec))))
			return rc ? rc : -EBADMSG;
		struct pf_line_inline *in = &r->inl[r->n_inl++];
		in->name = read_str(t, rec.name, r, &rc);
		in->file = file;
		in->line = line;
		file = read_str(t, rec.call_file, r, &rc);
		line = rec.call_line;
		i = rec.parent;
	}
	if (rc)
		return rc;
	r->file = file;
	r->line = line;
	return 0;
}
