/* hotspot_code.c — a JVM's code cache and methods from the process (see hotspot_code.h). */
#include "hotspot_code.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#define FREE_SEGMENT 0xff /* a segment-map byte of a segment in no block */
#define SEGMAP_CHUNK 256  /* segment-map bytes read at once */

static int rd64(pf_hs_read_fn rd, void *ctx, uint64_t addr, uint64_t *v)
{
	return rd(ctx, addr, v, sizeof(*v));
}

static int rd32(pf_hs_read_fn rd, void *ctx, uint64_t addr, int32_t *v)
{
	return rd(ctx, addr, v, sizeof(*v));
}

static int rd16(pf_hs_read_fn rd, void *ctx, uint64_t addr, uint16_t *v)
{
	return rd(ctx, addr, v, sizeof(*v));
}

/* The start of the block holding segment idx of a heap whose segment map starts at segmap:
 * each map byte is how many segments back to go (0 at a block's start). */
static int block_start(pf_hs_read_fn rd, void *ctx, uint64_t segmap, uint64_t idx,
		       uint64_t *start_idx)
{
	uint8_t chunk[SEGMAP_CHUNK];
	uint64_t lo = 0, hi = 0; /* chunk holds map bytes [lo, hi) */
	for (unsigned hop = 0; hop < PF_HS_SEGMAP_HOPS_MAX; hop++) {
		if (idx < lo || idx >= hi) {
			lo = idx >= SEGMAP_CHUNK - 1 ? idx - (SEGMAP_CHUNK - 1) : 0;
			hi = idx + 1;
			int rc = rd(ctx, segmap + lo, chunk, (size_t)(hi - lo));
			if (rc < 0)
				return rc;
		}
		uint8_t b = chunk[idx - lo];
		if (b == FREE_SEGMENT)
			return -ENOENT;
		if (b == 0) {
			*start_idx = idx;
			return 0;
		}
		if (b > idx)
			return -EINVAL;
		idx -= b;
	}
	return -EINVAL;
}

static bool in(uint64_t a, uint64_t lo, uint64_t hi)
{
	return a >= lo && a < hi;
}

/* The blob at start, in a heap whose memory ends at end. */
static int blob_at(const struct pf_hs_vm *vm, pf_hs_read_fn rd, void *ctx, uint64_t start,
		   uint64_t end, uint64_t pc, struct pf_hs_blob *out)
{
	uint64_t name, code_begin = 0;
	int32_t size, frame;
	int rc;
	if ((rc = rd32(rd, ctx, start + vm->blob_size, &size)) < 0 ||
	    (rc = rd32(rd, ctx, start + vm->blob_frame_size, &frame)) < 0 ||
	    (rc = rd64(rd, ctx, start + vm->blob_name, &name)) < 0)
		return rc;
	if (vm->blob_code_begin) /* JDK 17: a pointer (offset 0 is the vtable's) */
		rc = rd64(rd, ctx, start + vm->blob_code_begin, &code_begin);
	else {
		int32_t off;
		rc = rd32(rd, ctx, start + vm->blob_code_offset, &off);
		code_begin = start + (uint64_t)(int64_t)off;
	}
	if (rc < 0)
		return rc;
	if (size <= 0 || (uint64_t)size > end - start || !in(pc, start, start + (uint64_t)size) ||
	    !in(code_begin, start, start + (uint64_t)size) || frame < 0 || frame > 65536)
		return -EINVAL;
	out->start = start;
	out->code_begin = code_begin;
	out->size = size;
	out->frame_size = frame;
	out->comp_level = -1;
	if (name && (rc = pf_hs_read_str(rd, ctx, name, out->name)) < 0)
		return rc;
	/* a compiled method, or the wrapper of a native one (its JNI call) */
	if (strcmp(out->name, "nmethod") && strcmp(out->name, "native nmethod"))
		return 0;
	if ((rc = rd64(rd, ctx, start + vm->nm_method, &out->method)) < 0)
		return rc;
	if (vm->nm_comp_level &&
	    (rc = rd32(rd, ctx, start + vm->nm_comp_level, &out->comp_level)) < 0)
		return rc;
	return 0;
}

/* The code cache's bounds [*lo, *hi) and its heaps (CodeCache::_heaps: *n CodeHeap* at
 * *data; none while the JVM has made none). 0; -EINVAL for more than PF_HS_HEAPS_MAX; or the
 * reader's error. */
static int heap_array(const struct pf_hs_vm *vm, pf_hs_read_fn rd, void *ctx, uint64_t *lo,
		      uint64_t *hi, uint64_t *data, int32_t *n)
{
	uint64_t heaps;
	int rc;
	*n = 0;
	if ((rc = rd64(rd, ctx, vm->codecache_low, lo)) < 0 ||
	    (rc = rd64(rd, ctx, vm->codecache_high, hi)) < 0 ||
	    (rc = rd64(rd, ctx, vm->codecache_heaps, &heaps)) < 0)
		return rc;
	if (!heaps)
		return 0;
	if ((rc = rd32(rd, ctx, heaps + vm->garray_len, n)) < 0 ||
	    (rc = rd64(rd, ctx, heaps + vm->garray_data, data)) < 0)
		return rc;
	return *n < 0 || *n > PF_HS_HEAPS_MAX ? -EINVAL : 0;
}

int pf_hs_blob_find(const struct pf_hs_vm *vm, pf_hs_read_fn rd, void *ctx, uint64_t pc,
		    struct pf_hs_blob *out)
{
	memset(out, 0, sizeof(*out));
	uint64_t lo, hi, data;
	int32_t n;
	int rc = heap_array(vm, rd, ctx, &lo, &hi, &data, &n);
	if (rc < 0)
		return rc;
	if (!in(pc, lo, hi) || !n)
		return -ENOENT;
	for (int32_t i = 0; i < n; i++) {
		uint64_t heap, mlo, mhi, segmap;
		int32_t log2;
		if ((rc = rd64(rd, ctx, data + 8 * (uint64_t)i, &heap)) < 0 ||
		    (rc = rd64(rd, ctx, heap + vm->codeheap_memory + vm->vspace_low, &mlo)) < 0 ||
		    (rc = rd64(rd, ctx, heap + vm->codeheap_memory + vm->vspace_high, &mhi)) < 0)
			return rc;
		if (!in(pc, mlo, mhi))
			continue;
		if ((rc = rd64(rd, ctx, heap + vm->codeheap_segmap + vm->vspace_low, &segmap)) <
			0 ||
		    (rc = rd32(rd, ctx, heap + vm->codeheap_log2_seg, &log2)) < 0)
			return rc;
		if (log2 < 4 || log2 > 16)
			return -EINVAL;
		uint64_t idx;
		if ((rc = block_start(rd, ctx, segmap, (pc - mlo) >> log2, &idx)) < 0)
			return rc;
		uint64_t block = mlo + (idx << log2);
		uint8_t used;
		if ((rc = rd(ctx, block + vm->heapblock_used, &used, 1)) < 0)
			return rc;
		if (!used)
			return -ENOENT;
		return blob_at(vm, rd, ctx, block + vm->size_heapblock, mhi, pc, out);
	}
	return -ENOENT;
}

int pf_hs_heaps(const struct pf_hs_vm *vm, pf_hs_read_fn rd, void *ctx, struct pf_hs_heap *out,
		unsigned max)
{
	uint64_t lo, hi, data;
	int32_t n;
	if (!pf_hs_vm_walkable(vm))
		return -ENOTSUP;
	int rc = heap_array(vm, rd, ctx, &lo, &hi, &data, &n);
	if (rc < 0)
		return rc;
	if ((unsigned)n > max)
		return -EINVAL;
	for (int32_t i = 0; i < n; i++) {
		uint64_t heap, mem;
		struct pf_hs_heap h;
		int32_t log2;
		if ((rc = rd64(rd, ctx, data + 8 * (uint64_t)i, &heap)) < 0)
			return rc;
		mem = heap + vm->codeheap_memory;
		if ((rc = rd64(rd, ctx, mem + vm->vspace_low_bound, &h.lo)) < 0 ||
		    (rc = rd64(rd, ctx, mem + vm->vspace_high_bound, &h.hi)) < 0 ||
		    (rc = rd64(rd, ctx, heap + vm->codeheap_segmap + vm->vspace_low, &h.segmap)) <
			0 ||
		    (rc = rd32(rd, ctx, heap + vm->codeheap_log2_seg, &log2)) < 0)
			return rc;
		if (log2 < 4 || log2 > 16 || h.lo >= h.hi || h.lo < lo || h.hi > hi || !h.segmap)
			return -EINVAL;
		h.log2_seg = (uint32_t)log2;
		int32_t at = i; /* insertion by address */
		while (at > 0 && out[at - 1].lo > h.lo) {
			out[at] = out[at - 1];
			at--;
		}
		out[at] = h;
	}
	for (int32_t i = 1; i < n; i++)
		if (out[i].lo < out[i - 1].hi)
			return -EINVAL;
	return n;
}

int pf_hs_interp_range(const struct pf_hs_vm *vm, pf_hs_read_fn rd, void *ctx, uint64_t *lo,
		       uint64_t *hi)
{
	uint64_t q, buf;
	int32_t limit;
	int rc;
	if (!pf_hs_vm_walkable(vm))
		return -ENOTSUP;
	if ((rc = rd64(rd, ctx, vm->interp_code, &q)) < 0)
		return rc;
	if (!q)
		return -EAGAIN;
	if ((rc = rd64(rd, ctx, q + vm->stubq_buffer, &buf)) < 0 ||
	    (rc = rd32(rd, ctx, q + vm->stubq_limit, &limit)) < 0)
		return rc;
	if (!buf || limit <= 0)
		return -EAGAIN;
	if (limit > (1 << 30))
		return -EINVAL;
	*lo = buf;
	*hi = buf + (uint64_t)limit;
	return 0;
}

/* Symbol sym's text into buf[0, cap): cut, NUL-terminated. */
static int symbol(const struct pf_hs_vm *vm, pf_hs_read_fn rd, void *ctx, uint64_t sym, char *buf,
		  size_t cap)
{
	uint16_t len;
	buf[0] = 0;
	int rc = rd16(rd, ctx, sym + vm->symbol_length, &len);
	if (rc < 0)
		return rc;
	size_t n = len < cap - 1 ? len : cap - 1;
	if (n && (rc = rd(ctx, sym + vm->symbol_body, buf, n)) < 0)
		return rc;
	buf[n] = 0;
	if (memchr(buf, 0, n))
		return -EINVAL; /* a Symbol's text has no NUL */
	return 0;
}

/* The Symbol* in slot idx of the constant pool cp (its slots follow the ConstantPool). */
static int pool_symbol(const struct pf_hs_vm *vm, pf_hs_read_fn rd, void *ctx, uint64_t cp,
		       uint16_t idx, int32_t pool_len, char *buf, size_t cap)
{
	uint64_t sym;
	if (!idx || (pool_len > 0 && idx >= pool_len))
		return -EINVAL;
	int rc = rd64(rd, ctx, cp + vm->size_constantpool + 8 * (uint64_t)idx, &sym);
	if (rc < 0)
		return rc;
	return sym ? symbol(vm, rd, ctx, sym, buf, cap) : -EINVAL;
}

int pf_hs_method_name(const struct pf_hs_vm *vm, pf_hs_read_fn rd, void *ctx, uint64_t method,
		      struct pf_hs_method *out)
{
	memset(out, 0, sizeof(*out));
	uint64_t cm, cp, holder, kname;
	uint16_t name_idx, sig_idx, file_idx = 0;
	int32_t pool_len = 0;
	int rc;
	if (!method)
		return -EINVAL;
	if ((rc = rd64(rd, ctx, method + vm->method_const, &cm)) < 0 ||
	    (rc = rd64(rd, ctx, cm + vm->cm_constants, &cp)) < 0 ||
	    (rc = rd16(rd, ctx, cm + vm->cm_name_index, &name_idx)) < 0 ||
	    (rc = rd16(rd, ctx, cm + vm->cm_sig_index, &sig_idx)) < 0 ||
	    (rc = rd64(rd, ctx, cp + vm->cp_holder, &holder)) < 0)
		goto fail;
	/* a pool of fewer slots than an index names is no pool of this method */
	if ((vm->cp_length && (rc = rd32(rd, ctx, cp + vm->cp_length, &pool_len)) < 0) ||
	    (vm->cp_source_file && (rc = rd16(rd, ctx, cp + vm->cp_source_file, &file_idx)) < 0))
		goto fail;
	if (pool_len < 0 || pool_len > 65536) {
		rc = -EINVAL;
		goto fail;
	}
	if ((rc = pool_symbol(vm, rd, ctx, cp, name_idx, pool_len, out->name, sizeof(out->name))) <
		0 ||
	    (rc = pool_symbol(vm, rd, ctx, cp, sig_idx, pool_len, out->sig, sizeof(out->sig))) < 0)
		goto fail;
	if (!holder || (rc = rd64(rd, ctx, holder + vm->klass_name, &kname)) < 0 || !kname) {
		rc = rc < 0 ? rc : -EINVAL;
		goto fail;
	}
	if ((rc = symbol(vm, rd, ctx, kname, out->klass, sizeof(out->klass))) < 0)
		goto fail;
	for (char *c = out->klass; *c; c++)
		if (*c == '/')
			*c = '.';
	if (file_idx &&
	    pool_symbol(vm, rd, ctx, cp, file_idx, pool_len, out->file, sizeof(out->file)) < 0)
		out->file[0] = 0; /* a name without its file is still a name */
	return 0;
fail:
	memset(out, 0, sizeof(*out));
	return rc;
}

/* ---- Line numbers: CompressedLineNumberReadStream's encoding. A pair is one byte (bci delta
 * in its high 5 bits, line delta in its low 3) or 0xff and two signed UNSIGNED5 ints; 0 ends
 * the table. */

struct stream {
	pf_hs_read_fn rd;
	void *ctx;
	uint64_t at; /* address of buf[0] */
	uint8_t buf[64];
	unsigned len, pos;
};

static int next_byte(struct stream *s, uint8_t *b)
{
	if (s->pos == s->len) {
		s->at += s->len;
		/* up to the end of the page first: the table may end just before unreadable memory
		 */
		size_t want = 4096 - (s->at & 4095);
		want = want < sizeof(s->buf) ? want : sizeof(s->buf);
		int rc = s->rd(s->ctx, s->at, s->buf, want);
		if (rc < 0)
			return rc;
		s->len = (unsigned)want;
		s->pos = 0;
	}
	*b = s->buf[s->pos++];
	return 0;
}

/* UNSIGNED5 (CompressedReadStream::read_int): bytes below 192 end it, each adds 6 bits more. */
static int read_u5(struct stream *s, uint32_t *v)
{
	uint32_t sum = 0;
	unsigned shift = 0;
	for (int i = 0; i < 5; i++) {
		uint8_t b;
		int rc = next_byte(s, &b);
		if (rc < 0)
			return rc;
		sum += (uint32_t)b << shift;
		if (b < 192 || i == 4)
			break;
		shift += 6;
	}
	*v = sum;
	return 0;
}

/* The signed form (CompressedReadStream::read_signed_int): zigzag over UNSIGNED5. */
static int read_signed(struct stream *s, int32_t *v)
{
	uint32_t sum = 0;
	int rc = read_u5(s, &sum);
	if (rc == 0)
		*v = (int32_t)((sum >> 1) ^ -(sum & 1));
	return rc;
}

int pf_hs_method_line(const struct pf_hs_vm *vm, pf_hs_read_fn rd, void *ctx, uint64_t method,
		      int32_t bci, uint32_t *line)
{
	uint64_t cm;
	uint16_t flags = 0, code_size = 0;
	int rc;
	if (!method || !vm->cm_flags || !vm->cm_code_size || !vm->c_has_linenumbers)
		return -ENOENT;
	if ((rc = rd64(rd, ctx, method + vm->method_const, &cm)) < 0 ||
	    (rc = rd16(rd, ctx, cm + vm->cm_flags, &flags)) < 0 ||
	    (rc = rd16(rd, ctx, cm + vm->cm_code_size, &code_size)) < 0)
		return rc;
	if (!(flags & (uint32_t)vm->c_has_linenumbers) || bci < 0 || bci >= code_size)
		return -ENOENT;
	struct stream s = {.rd = rd, .ctx = ctx, .at = cm + vm->size_constmethod + code_size};
	int64_t at_bci = 0, at_line = 0, best = -1, best_bci = -1;
	for (unsigned n = 0; n < PF_HS_LINE_PAIRS_MAX; n++) {
		uint8_t b;
		if ((rc = next_byte(&s, &b)) < 0)
			return rc;
		if (b == 0) {
			if (best < 0 || best > UINT32_MAX)
				return -ENOENT;
			*line = (uint32_t)best;
			return 0;
		}
		if (b == 0xff) {
			int32_t db = 0, dl = 0;
			if ((rc = read_signed(&s, &db)) < 0 || (rc = read_signed(&s, &dl)) < 0)
				return rc;
			at_bci += db;
			at_line += dl;
		} else {
			at_bci += b >> 3;
			at_line += b & 7;
		}
		if (at_bci == bci && at_line >= 0 && at_line <= UINT32_MAX) {
			*line = (uint32_t)at_line; /* the first exact entry is the answer */
			return 0;
		}
		if (at_bci < bci && at_bci >= best_bci) {
			best = at_line;
			best_bci = at_bci;
		}
	}
	return -EINVAL;
}

/* ---- Scope descriptors: which methods compiled code at a pc runs, inlined ones included. */

/* The regions of nmethod b the scopes are read from, checked to lie inside it. */
struct scopes {
	uint64_t pcs, pcs_end; /* the PcDesc table */
	uint64_t data;	       /* the scopes data (DebugInfoReadStream), up to pcs */
	uint64_t meta;	       /* the metadata array (Method*...), up to data */
};

static int scopes_of(const struct pf_hs_vm *vm, pf_hs_read_fn rd, void *ctx,
		     const struct pf_hs_blob *b, struct scopes *out)
{
	uint64_t so = pf_hs_vm_scopes(vm);
	if (!so || strcmp(b->name, "nmethod"))
		return -ENOTSUP;
	int32_t pcs_off, deps_off, meta_off;
	uint64_t data;
	int rc;
	if ((rc = rd32(rd, ctx, b->start + vm->nm_scopes_pcs, &pcs_off)) < 0 ||
	    (rc = rd32(rd, ctx, b->start + vm->nm_dependencies, &deps_off)) < 0 ||
	    (rc = rd32(rd, ctx, b->start + vm->nm_metadata, &meta_off)) < 0 ||
	    (rc = rd64(rd, ctx, b->start + so, &data)) < 0)
		return rc;
	out->pcs = b->start + (uint64_t)(int64_t)pcs_off;
	out->pcs_end = b->start + (uint64_t)(int64_t)deps_off;
	out->meta = b->start + (uint64_t)(int64_t)meta_off;
	out->data = data;
	uint64_t end = b->start + (uint64_t)b->size;
	if (pcs_off <= 0 || meta_off <= 0 || deps_off < pcs_off || out->pcs_end > end ||
	    (out->pcs_end - out->pcs) / vm->size_pcdesc > PF_HS_PCDESCS_MAX ||
	    !(out->meta <= out->data && out->data <= out->pcs))
		return -EINVAL;
	return 0;
}

int pf_hs_pcdesc_find(const struct pf_hs_vm *vm, pf_hs_read_fn rd, void *ctx,
		      const struct pf_hs_blob *b, uint64_t pc, uint64_t *pcdesc)
{
	struct scopes sc;
	int rc = scopes_of(vm, rd, ctx, b, &sc);
	if (rc < 0)
		return rc;
	if (pc < b->code_begin)
		return -ENOENT;
	uint64_t off = pc - b->code_begin, step = vm->size_pcdesc;
	uint8_t chunk[4096];
	for (uint64_t at = sc.pcs; at + step <= sc.pcs_end;) {
		uint64_t n = (sc.pcs_end - at) / step, max = sizeof(chunk) / step;
		n = n < max ? n : max;
		if ((rc = rd(ctx, at, chunk, (size_t)(n * step))) < 0)
			return rc;
		for (uint64_t i = 0; i < n; i++) {
			int32_t pco, scope;
			memcpy(&pco, chunk + i * step + vm->pcdesc_pc, sizeof(pco));
			memcpy(&scope, chunk + i * step + vm->pcdesc_scope, sizeof(scope));
			/* the first recorded point past pc, with a scope (0: serialized_null) */
			if (pco >= 0 && (uint64_t)pco > off && scope > 0) {
				*pcdesc = at + i * step;
				return 0;
			}
		}
		at += n * step;
	}
	return -ENOENT;
}

int pf_hs_scopes_at(const struct pf_hs_vm *vm, pf_hs_read_fn rd, void *ctx,
		    const struct pf_hs_blob *b, uint64_t pcdesc, struct pf_hs_scope *out,
		    unsigned max)
{
	struct scopes sc;
	int rc = scopes_of(vm, rd, ctx, b, &sc);
	if (rc < 0)
		return rc;
	if (pcdesc < sc.pcs || pcdesc + vm->size_pcdesc > sc.pcs_end ||
	    (pcdesc - sc.pcs) % vm->size_pcdesc)
		return -EINVAL;
	int32_t scope;
	if ((rc = rd32(rd, ctx, pcdesc + vm->pcdesc_scope, &scope)) < 0)
		return rc;
	unsigned n = 0;
	while (scope > 0 && n < max) {
		if ((uint64_t)scope >= sc.pcs - sc.data)
			return -EINVAL;
		struct stream s = {.rd = rd, .ctx = ctx, .at = sc.data + (uint64_t)scope};
		uint32_t sender = 0, midx = 0, bci = 0;
		if ((rc = read_u5(&s, &sender)) < 0 || (rc = read_u5(&s, &midx)) < 0 ||
		    (rc = read_u5(&s, &bci)) < 0)
			return rc;
		/* metadata indexes are 1-based (0: none); the bci is stored plus one */
		if (!midx || sc.meta + (uint64_t)midx * 8 > sc.data)
			return -EINVAL;
		if ((rc = rd64(rd, ctx, sc.meta + (uint64_t)(midx - 1) * 8, &out[n].method)) < 0)
			return rc;
		out[n].bci = (int32_t)bci - 1;
		n++;
		if ((int32_t)sender == scope)
			return -EINVAL;
		scope = (int32_t)sender;
	}
	return n ? (int)n : -ENOENT;
}
