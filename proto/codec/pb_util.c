/* pb_util.c — see pb_util.h. */
#include "pb_util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "pf/hash.h"
#include "pf/profile.h"

uint64_t pb_hash(const void *p, size_t n)
{
	return pf_hash64(p, n);
}

/* ---------------------------------------------------------------------------------------- */
/* Interning: open addressing, linear probing, load factor <= 1/2.                           */

void pb_intern_init(struct pb_intern *t, int32_t base)
{
	memset(t, 0, sizeof(*t));
	t->base = base;
	pf_buf_init(&t->keys, SIZE_MAX / 4);
}

void pb_intern_release(struct pb_intern *t)
{
	free(t->slots);
	free(t->off);
	free(t->len);
	pf_buf_release(&t->keys);
	memset(t, 0, sizeof(*t));
}

static int intern_grow(struct pb_intern *t)
{
	size_t n = t->n_slots ? t->n_slots * 2 : 64;
	struct pb_intern_slot *s = malloc(n * sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		s[i].idx = -1;
	for (size_t i = 0; i < t->n_slots; i++) {
		if (t->slots[i].idx < 0)
			continue;
		size_t j = t->slots[i].hash & (n - 1);
		while (s[j].idx >= 0)
			j = (j + 1) & (n - 1);
		s[j] = t->slots[i];
	}
	free(t->slots);
	t->slots = s;
	t->n_slots = n;
	return 0;
}

int pb_intern(struct pb_intern *t, const void *key, size_t len, int32_t *idx, bool *added)
{
	if ((t->n + 1) * 2 > t->n_slots) {
		int r = intern_grow(t);
		if (r < 0)
			return r;
	}
	uint64_t h = pb_hash(key, len);
	size_t j = h & (t->n_slots - 1);
	for (; t->slots[j].idx >= 0; j = (j + 1) & (t->n_slots - 1)) {
		if (t->slots[j].hash != h)
			continue;
		size_t k = (size_t)(t->slots[j].idx - t->base);
		if (t->len[k] == len && memcmp(t->keys.data + t->off[k], key, len) == 0) {
			*idx = t->slots[j].idx;
			if (added)
				*added = false;
			return 0;
		}
	}
	if (t->n >= (size_t)INT32_MAX - (size_t)t->base)
		return -E2BIG;
	if (t->n == t->cap) {
		size_t c = t->cap ? t->cap * 2 : 64;
		size_t *o = realloc(t->off, c * sizeof(*o));
		if (!o)
			return -ENOMEM;
		t->off = o;
		size_t *l = realloc(t->len, c * sizeof(*l));
		if (!l)
			return -ENOMEM;
		t->len = l;
		t->cap = c;
	}
	size_t off = t->keys.len;
	int r = pf_buf_append(&t->keys, key, len);
	if (r < 0)
		return r;
	t->off[t->n] = off;
	t->len[t->n] = len;
	t->slots[j].hash = h;
	t->slots[j].idx = t->base + (int32_t)t->n;
	t->n++;
	*idx = t->slots[j].idx;
	if (added)
		*added = true;
	return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Bump pool.                                                                                */

struct pb_pool_chunk {
	struct pb_pool_chunk *next;
	size_t used, cap;
	_Alignas(16) unsigned char data[];
};

#define POOL_CHUNK ((size_t)64 << 10)

/* size bytes aligned to align (a power of two, at most 16), not zeroed. A request over a quarter
 * of a chunk gets a chunk of its own behind the head, so the head's free tail stays in use and
 * at most a quarter of each chunk is left unused. */
static void *pool_take(struct pb_pool *p, size_t size, size_t align)
{
	if (size > SIZE_MAX - 64)
		return NULL;
	size = (size + align - 1) & ~(align - 1);
	if (!size)
		size = align;
	struct pb_pool_chunk *c = p->head;
	if (c && c->cap - c->used >= size) {
		void *r = c->data + c->used;
		c->used += size;
		return r;
	}
	bool own = size > POOL_CHUNK / 4;
	size_t cap = own ? size : POOL_CHUNK;
	struct pb_pool_chunk *n = malloc(sizeof(*n) + cap);
	if (!n)
		return NULL;
	n->cap = cap;
	n->used = size;
	if (own && c) {
		n->next = c->next;
		c->next = n;
	} else {
		n->next = c;
		p->head = n;
	}
	p->total += cap;
	return n->data;
}

void *pb_pool_alloc(struct pb_pool *p, size_t size)
{
	void *r = pool_take(p, size, 16);
	if (r)
		memset(r, 0, size);
	return r;
}

void *pb_pool_array(struct pb_pool *p, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		return NULL;
	return pb_pool_alloc(p, n * size);
}

char *pb_pool_strdup(struct pb_pool *p, const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = pb_pool_alloc(p, n);
	if (d)
		memcpy(d, s, n);
	return d;
}

void pb_pool_release(struct pb_pool *p)
{
	struct pb_pool_chunk *c = p->head;
	while (c) {
		struct pb_pool_chunk *n = c->next;
		free(c);
		c = n;
	}
	p->head = NULL;
	p->total = 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Capped allocator.                                                                         */

static void *capped_alloc(void *data, size_t size)
{
	struct pb_capped_alloc *c = data;
	if (size > c->max || c->used > c->max - size) {
		c->exceeded = true;
		return NULL;
	}
	c->used += size;
	/* protobuf-c's structs hold at most 8-byte scalars and pointers */
	return pool_take(&c->pool, size, 8);
}

static void capped_free(void *data, void *ptr)
{
	(void)data;
	(void)ptr; /* everything goes at once in pb_capped_alloc_release() */
}

void pb_capped_alloc_init(struct pb_capped_alloc *c, size_t max)
{
	memset(c, 0, sizeof(*c));
	c->max = max;
	c->a.alloc = capped_alloc;
	c->a.free = capped_free;
	c->a.allocator_data = c;
}

void pb_capped_alloc_release(struct pb_capped_alloc *c)
{
	pb_pool_release(&c->pool);
}

/* ---------------------------------------------------------------------------------------- */
/* Wire scan (protobuf encoding: tag = field_number << 3 | wire_type).                       */

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

int pb_varint_read(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t r = 0;
	for (unsigned n = 0; n < 10; n++) {
		if (*p >= end)
			return -EBADMSG;
		uint8_t b = *(*p)++;
		if (n == 9 && b > 1)
			return -EBADMSG; /* more than 64 bits */
		r |= (uint64_t)(b & 0x7f) << (7 * n);
		if (!(b & 0x80)) {
			*v = r;
			return 0;
		}
	}
	return -EBADMSG;
}

/* pb_varint_read() with the one-byte case (most tags and lengths) done here. */
static inline int varint_read(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	if (*p < end && !(**p & 0x80)) {
		*v = *(*p)++;
		return 0;
	}
	return pb_varint_read(p, end, v);
}

/* Reads the field at *p (below end): its number and, for a length-delimited one, its payload
 * [*sub, *sub_end) (else *sub NULL). -EBADMSG on malformed wire data. */
static int wire_next(const uint8_t **p, const uint8_t *end, uint64_t *num, const uint8_t **sub,
		     const uint8_t **sub_end)
{
	uint64_t tag, v;
	*sub = *sub_end = NULL;
	if (varint_read(p, end, &tag) < 0)
		return -EBADMSG;
	*num = tag >> 3;
	if (*num == 0 || *num > 0x1fffffff)
		return -EBADMSG;
	switch (tag & 7) {
	case WT_VARINT:
		return varint_read(p, end, &v);
	case WT_I64:
	case WT_I32: {
		ptrdiff_t w = (tag & 7) == WT_I64 ? 8 : 4;
		if (end - *p < w)
			return -EBADMSG;
		*p += w;
		return 0;
	}
	case WT_LEN:
		if (varint_read(p, end, &v) < 0 || v > (uint64_t)(end - *p))
			return -EBADMSG;
		*sub = *p;
		*sub_end = *p + v;
		*p += v;
		return 0;
	default:
		return -EBADMSG; /* groups (3, 4) and reserved wire types */
	}
}

/* Message types whose nesting is bounded by their schema need no walk for depth: protobuf-c's
 * unpack checks their bytes. A type's height is the deepest chain of message fields below it
 * (0: no message fields); types deeper than HEIGHT_MAX, or recursive ones (AnyValue), count
 * as unbounded (-1) and are walked. Heights are kept per scan for the types it met. */
#define HEIGHT_MAX 6
#define HEIGHT_KEPT 16

struct scan {
	unsigned max_depth;
	/* the last field looked up (tables repeat one field): its message, number, descriptor
	 * and height */
	const ProtobufCMessageDescriptor *last_d;
	uint64_t last_num;
	const ProtobufCFieldDescriptor *last_f;
	int last_h;
	size_t n_kept;
	const ProtobufCMessageDescriptor *kept_d[HEIGHT_KEPT];
	int kept_h[HEIGHT_KEPT];
};

static int desc_height(const ProtobufCMessageDescriptor *d, int budget)
{
	if (budget < 0)
		return -1;
	int h = 0;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		if (f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		int sub = desc_height(f->descriptor, budget - 1);
		if (sub < 0)
			return -1;
		if (sub + 1 > h)
			h = sub + 1;
	}
	return h;
}

static int scan_height(struct scan *sc, const ProtobufCMessageDescriptor *d)
{
	for (size_t i = 0; i < sc->n_kept; i++)
		if (sc->kept_d[i] == d)
			return sc->kept_h[i];
	int h = desc_height(d, HEIGHT_MAX);
	if (sc->n_kept < HEIGHT_KEPT) {
		sc->kept_d[sc->n_kept] = d;
		sc->kept_h[sc->n_kept++] = h;
	}
	return h;
}

static int wire_scan(struct scan *sc, const ProtobufCMessageDescriptor *d, const uint8_t *p,
		     const uint8_t *end, unsigned depth)
{
	if (depth > sc->max_depth)
		return -ELOOP;
	while (p < end) {
		uint64_t num;
		const uint8_t *sub, *sub_end;
		if (wire_next(&p, end, &num, &sub, &sub_end) < 0)
			return -EBADMSG;
		if (!sub || !d)
			continue;
		if (d != sc->last_d || num != sc->last_num) {
			const ProtobufCFieldDescriptor *f =
			    protobuf_c_message_descriptor_get_field(d, (unsigned)num);
			sc->last_d = d;
			sc->last_num = num;
			sc->last_f = f && f->type == PROTOBUF_C_TYPE_MESSAGE ? f : NULL;
			sc->last_h = sc->last_f ? scan_height(sc, f->descriptor) : 0;
		}
		const ProtobufCFieldDescriptor *f = sc->last_f;
		int h = sc->last_h;
		if (!f || (h >= 0 && depth + 1 + (unsigned)h <= sc->max_depth))
			continue; /* bounded by its schema within the limit */
		int r = wire_scan(sc, f->descriptor, sub, sub_end, depth + 1);
		if (r < 0)
			return r;
	}
	return 0;
}

int pb_wire_scan(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len,
		 unsigned max_depth)
{
	if (!len)
		return 0; /* (and p may be NULL) */
	struct scan sc = {.max_depth = max_depth};
	return wire_scan(&sc, d, p, p + len, 0);
}

int pb_wire_count_fields(const uint8_t *p, size_t len, uint32_t outer, size_t *counts,
			 size_t n_counts)
{
	memset(counts, 0, n_counts * sizeof(*counts));
	if (!len)
		return 0; /* (and p may be NULL) */
	const uint8_t *end = p + len;
	while (p < end) {
		uint64_t num;
		const uint8_t *sub, *sub_end;
		if (wire_next(&p, end, &num, &sub, &sub_end) < 0)
			return -EBADMSG;
		if (num != outer || !sub)
			continue;
		while (sub < sub_end) {
			uint64_t inner;
			const uint8_t *x, *x_end;
			if (wire_next(&sub, sub_end, &inner, &x, &x_end) < 0)
				return -EBADMSG;
			if (inner < n_counts)
				counts[inner]++;
		}
	}
	return 0;
}

int pb_ptrs_push(struct pb_ptrs *t, void *p)
{
	if (t->n == t->cap) {
		size_t c = t->cap ? t->cap * 2 : 64;
		void **v = realloc(t->v, c * sizeof(*v));
		if (!v)
			return -ENOMEM;
		t->v = v;
		t->cap = c;
	}
	t->v[t->n++] = p;
	return 0;
}

void *pb_window_alloc(struct pf_prof_window *w, size_t *used, size_t max, struct pf_error *err,
		      size_t n, size_t size, int *rc)
{
	if (size && n > SIZE_MAX / size) {
		*rc = -E2BIG;
		return NULL;
	}
	size_t bytes = n * size;
	if (bytes > max || *used > max - bytes) {
		*rc = pf_error_set(err, -E2BIG, "", "decoded profile larger than %zu bytes", max);
		return NULL;
	}
	*used += bytes + 16; /* the arena's alignment overhead, roughly */
	void *p = pf_prof_alloc(w, bytes);
	if (!p)
		*rc = -ENOMEM;
	return p;
}

int pb_intern_str(struct pb_intern *t, struct pb_ptrs *tab, struct pb_pool *pool, const char *s,
		  int32_t *idx)
{
	if (!s || !*s) {
		*idx = 0;
		return 0;
	}
	bool added;
	int r = pb_intern(t, s, strlen(s), idx, &added);
	if (r < 0 || !added)
		return r;
	char *d = pb_pool_strdup(pool, s);
	return d ? pb_ptrs_push(tab, d) : -ENOMEM;
}

int pb_intern_packed(struct pb_intern *t, struct pf_buf *scratch, const ProtobufCMessage *msg,
		     int32_t *idx, bool *added)
{
	size_t n = protobuf_c_message_get_packed_size(msg);
	pf_buf_reset(scratch);
	int r = pf_buf_reserve(scratch, n);
	if (r < 0)
		return r;
	protobuf_c_message_pack(msg, scratch->data);
	return pb_intern(t, scratch->data, n, idx, added);
}

bool pb_key_seen(const char *const *keys, size_t n, const char *key)
{
	for (size_t j = 0; j < n; j++)
		if (strcmp(keys[j], key) == 0)
			return true;
	return false;
}

int pb_window_check_types(const struct pf_prof_window *w, struct pf_error *err)
{
	if (!w->n_sample_types && (!w->frequency_hz || w->frequency_hz > 1000000000u))
		return pf_error_set(err, -EINVAL, "", "frequency_hz must be 1..1e9, got %" PRIu32,
				    w->frequency_hz);
	for (size_t k = 0; k < w->n_sample_types; k++)
		if (!w->sample_types[k].type || !*w->sample_types[k].type)
			return pf_error_set(err, -EINVAL, "", "sample_types[%zu]: type missing", k);
	return 0;
}

int pb_pack_append(const ProtobufCMessage *msg, struct pf_buf *out)
{
	size_t n = protobuf_c_message_get_packed_size(msg);
	int r = pf_buf_reserve(out, n);
	if (r < 0)
		return r;
	size_t w = protobuf_c_message_pack(msg, out->data + out->len);
	if (w != n)
		return -EIO; /* protobuf-c disagreeing with itself: never seen */
	out->len += n;
	out->data[out->len] = 0;
	return 0;
}

int pb_field_skip(const uint8_t **p, const uint8_t *end, unsigned wt)
{
	uint64_t v;
	switch (wt) {
	case 0:
		return pb_varint_read(p, end, &v);
	case 1:
		if (end - *p < 8)
			return -EBADMSG;
		*p += 8;
		return 0;
	case 2:
		if (pb_varint_read(p, end, &v) < 0 || v > (uint64_t)(end - *p))
			return -EBADMSG;
		*p += v;
		return 0;
	case 5:
		if (end - *p < 4)
			return -EBADMSG;
		*p += 4;
		return 0;
	default:
		return -EBADMSG; /* groups (3, 4) are not in proto3 messages */
	}
}
