/* pb_unpack.c — see pb_unpack.h. */
#include "pb_unpack.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "pb_util.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* A base-128 varint of at most 10 bytes, the bits past 64 dropped, as protobuf-c reads it
 * (pb_varint_read() refuses those bits: here the two unpackers agree on every input). */
static int varint_long(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t r = 0;
	for (unsigned n = 0; n < 10 && *p < end; n++) {
		uint8_t b = *(*p)++;
		r |= (uint64_t)(b & 0x7f) << (7 * n); /* n = 9: its lowest bit alone stays */
		if (!(b & 0x80)) {
			*v = r;
			return 0;
		}
	}
	return -EBADMSG;
}

/* The one-byte case (most tags, lengths and indices) inline. */
static inline int varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	if (*p < end && !(**p & 0x80)) {
		*v = *(*p)++;
		return 0;
	}
	return varint_long(p, end, v);
}

struct upk {
	ProtobufCAllocator *a;
	unsigned max_depth;
};

static void *upk_alloc(struct upk *u, size_t n)
{
	return u->a->alloc(u->a->allocator_data, n ? n : 1);
}

/* The wire type a field of type t is written with (unpacked). */
static unsigned wire_type_of(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_FLOAT:
		return WT_I32;
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return WT_I64;
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_BYTES:
	case PROTOBUF_C_TYPE_MESSAGE:
		return WT_LEN;
	default:
		return WT_VARINT;
	}
}

size_t pb_unpack_value_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_UINT64:
		return 8;
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_STRING:
		return sizeof(char *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(ProtobufCMessage *);
	default:
		return 4;
	}
}

static const ProtobufCFieldDescriptor *field_of(const ProtobufCMessageDescriptor *d,
						uint64_t num)
{
	/* generated descriptors list fields by number: 1..n straight, else a search */
	if (num - 1 < d->n_fields && d->fields[num - 1].id == num)
		return &d->fields[num - 1];
	if (num == 0 || num > 0x1fffffff)
		return NULL;
	return protobuf_c_message_descriptor_get_field(d, (unsigned)num);
}

/* A varint of at most max bytes (the tag's and a length's are at most 5 in protobuf-c). */
static inline int varint_max(const uint8_t **p, const uint8_t *end, uint64_t *v, unsigned max)
{
	uint64_t r = 0;
	for (unsigned n = 0; n < max && *p < end; n++) {
		uint8_t b = *(*p)++;
		r |= (uint64_t)(b & 0x7f) << (7 * n);
		if (!(b & 0x80)) {
			*v = r;
			return 0;
		}
	}
	return -EBADMSG;
}

/* The next field at *p: its number, wire type and value bytes [*val, *val + *n) (for a
 * length-delimited one, its payload). The tag and a length are read as protobuf-c reads them
 * (at most 5 bytes each; a first byte without field number bits is refused, a longer number
 * that comes out 0 or past 2^29 - 1 is an unknown field), so both unpackers take the same
 * bytes. */
static inline int next_field(const uint8_t **p, const uint8_t *end, uint64_t *num,
			     unsigned *wt, const uint8_t **val, size_t *n)
{
	uint64_t len;
	if (*p >= end || !(**p & 0xf8))
		return -EBADMSG;
	*wt = **p & 7;
	if (!(**p & 0x80)) {
		*num = *(*p)++ >> 3;
	} else {
		uint64_t tag;
		if (varint_max(p, end, &tag, 5) < 0)
			return -EBADMSG;
		*num = (tag >> 3) & 0xffffffffu; /* protobuf-c keeps 32 bits */
	}
	*val = *p;
	switch (*wt) {
	case WT_VARINT:
		if (varint(p, end, &len) < 0)
			return -EBADMSG;
		break;
	case WT_I64:
		if (end - *p < 8)
			return -EBADMSG;
		*p += 8;
		break;
	case WT_I32:
		if (end - *p < 4)
			return -EBADMSG;
		*p += 4;
		break;
	case WT_LEN:
		if (varint_max(p, end, &len, 5) < 0 || len > (uint64_t)(end - *p))
			return -EBADMSG;
		*val = *p;
		*n = (size_t)len;
		*p += len;
		return 0;
	default:
		return -EBADMSG; /* groups (3, 4) are not in proto3 messages */
	}
	*n = (size_t)(*p - *val);
	return 0;
}

/* A bool as protobuf-c reads it: true when any byte of its value has a low bit set. */
static bool bool_of(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] & 0x7f)
			return true;
	return false;
}

/* Values of a packed field of type t in len bytes at p. */
static int packed_count(ProtobufCType t, const uint8_t *p, size_t len, size_t *n)
{
	switch (wire_type_of(t)) {
	case WT_I32:
		if (len % 4)
			return -EBADMSG;
		*n = len / 4;
		return 0;
	case WT_I64:
		if (len % 8)
			return -EBADMSG;
		*n = len / 8;
		return 0;
	default: {
		size_t c = 0;
		for (size_t i = 0; i < len; i++)
			c += !(p[i] & 0x80);
		if (len && (p[len - 1] & 0x80))
			return -EBADMSG; /* the last varint does not end */
		*n = c;
		return 0;
	}
	}
}

static bool packable(ProtobufCType t)
{
	return t != PROTOBUF_C_TYPE_STRING && t != PROTOBUF_C_TYPE_BYTES &&
	       t != PROTOBUF_C_TYPE_MESSAGE;
}

static int unpack_into(struct upk *u, const ProtobufCMessageDescriptor *d, ProtobufCMessage *m,
		       const uint8_t *p, size_t len, unsigned depth);

/* One scalar of type t at *p (below end) into v (pb_unpack_value_size(t) bytes). */
static int read_scalar(ProtobufCType t, const uint8_t **p, const uint8_t *end, void *v)
{
	uint64_t x;
	switch (wire_type_of(t)) {
	case WT_I32: {
		if (end - *p < 4)
			return -EBADMSG;
		uint32_t w = (uint32_t)(*p)[0] | (uint32_t)(*p)[1] << 8 | (uint32_t)(*p)[2] << 16 |
			     (uint32_t)(*p)[3] << 24;
		memcpy(v, &w, 4);
		*p += 4;
		return 0;
	}
	case WT_I64: {
		if (end - *p < 8)
			return -EBADMSG;
		uint64_t w = 0;
		for (int i = 7; i >= 0; i--)
			w = w << 8 | (*p)[i];
		memcpy(v, &w, 8);
		*p += 8;
		return 0;
	}
	default:
		break;
	}
	const uint8_t *at = *p;
	if (varint(p, end, &x) < 0)
		return -EBADMSG;
	switch (t) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_ENUM:
	case PROTOBUF_C_TYPE_UINT32: {
		uint32_t w = (uint32_t)x;
		memcpy(v, &w, 4);
		break;
	}
	case PROTOBUF_C_TYPE_SINT32: {
		uint32_t w = (uint32_t)x;
		int32_t s = (int32_t)(w >> 1) ^ -(int32_t)(w & 1);
		memcpy(v, &s, 4);
		break;
	}
	case PROTOBUF_C_TYPE_SINT64: {
		int64_t s = (int64_t)(x >> 1) ^ -(int64_t)(x & 1);
		memcpy(v, &s, 8);
		break;
	}
	case PROTOBUF_C_TYPE_BOOL: {
		protobuf_c_boolean b = bool_of(at, (size_t)(*p - at));
		memcpy(v, &b, sizeof(b));
		break;
	}
	default: /* INT64, UINT64 */
		memcpy(v, &x, 8);
		break;
	}
	return 0;
}

/* The values of a packed field of type t in [q, qe) into arr (room made for them): fixed-size
 * values copied at once on a little-endian host, varints of the common types in a loop of
 * their own. */
static int read_packed(ProtobufCType t, const uint8_t *q, const uint8_t *qe, char *arr,
		       size_t *count)
{
	size_t sz = pb_unpack_value_size(t);
	unsigned wt = wire_type_of(t);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	if (wt == WT_I32 || wt == WT_I64) {
		size_t n = (size_t)(qe - q) / sz; /* a whole number: packed_count() checked */
		if (n)
			memcpy(arr + sz * *count, q, n * sz);
		*count += n;
		return 0;
	}
#endif
	uint64_t x;
	switch (t) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_ENUM: {
		uint32_t *o = (uint32_t *)(void *)arr + *count;
		while (q < qe) {
			if (varint(&q, qe, &x) < 0)
				return -EBADMSG;
			*o++ = (uint32_t)x;
		}
		*count = (size_t)(o - (uint32_t *)(void *)arr);
		return 0;
	}
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_UINT64: {
		uint64_t *o = (uint64_t *)(void *)arr + *count;
		while (q < qe) {
			if (varint(&q, qe, &x) < 0)
				return -EBADMSG;
			*o++ = x;
		}
		*count = (size_t)(o - (uint64_t *)(void *)arr);
		return 0;
	}
	default:
		while (q < qe)
			if (read_scalar(t, &q, qe, arr + sz * (*count)++) < 0)
				return -EBADMSG;
		return 0;
	}
}

/* One length-delimited value (string, bytes, message) of field f from sub[0, n) into v. */
static int read_len(struct upk *u, const ProtobufCFieldDescriptor *f, const uint8_t *sub,
		    size_t n, void *v, unsigned depth)
{
	if (f->type == PROTOBUF_C_TYPE_STRING) {
		char *s = upk_alloc(u, n + 1);
		if (!s)
			return -ENOMEM;
		if (n)
			memcpy(s, sub, n);
		s[n] = 0;
		memcpy(v, &s, sizeof(s));
		return 0;
	}
	if (f->type == PROTOBUF_C_TYPE_BYTES) {
		ProtobufCBinaryData b = {.len = n, .data = NULL};
		if (n) {
			if (!(b.data = upk_alloc(u, n)))
				return -ENOMEM;
			memcpy(b.data, sub, n);
		}
		memcpy(v, &b, sizeof(b));
		return 0;
	}
	const ProtobufCMessageDescriptor *sd = f->descriptor;
	ProtobufCMessage *sm = upk_alloc(u, sd->sizeof_message);
	if (!sm)
		return -ENOMEM;
	protobuf_c_message_init(sd, sm);
	memcpy(v, &sm, sizeof(sm));
	return unpack_into(u, sd, sm, sub, n, depth + 1);
}

/* One value of field f (wire type wt, value bytes sub[0, n)) into v. A bool is taken from any
 * wire type, as protobuf-c does: a length-delimited one is true when not empty. */
static int read_one(struct upk *u, const ProtobufCFieldDescriptor *f, unsigned wt,
		    const uint8_t *sub, size_t n, void *v, unsigned depth)
{
	if (f->type == PROTOBUF_C_TYPE_BOOL) {
		protobuf_c_boolean b = wt == WT_LEN ? n > 0 : bool_of(sub, n);
		memcpy(v, &b, sizeof(b));
		return 0;
	}
	if (wt == WT_LEN)
		return read_len(u, f, sub, n, v, depth);
	return read_scalar(f->type, &sub, sub + n, v);
}

/* Room for k more values in the array of repeated field f of m (holding *count of its
 * *cap): the first values of a field get what its first field on the wire holds, then the
 * array doubles (a copy in the arena, which the allocator's cap counts). */
static int room(struct upk *u, const ProtobufCFieldDescriptor *f, ProtobufCMessage *m,
		size_t count, size_t *cap, size_t k)
{
	if (count + k <= *cap)
		return 0;
	size_t sz = pb_unpack_value_size(f->type), want = count + k;
	if (want < 2 * *cap)
		want = 2 * *cap;
	if (want < k || want > SIZE_MAX / sz)
		return -ENOMEM;
	char *arr = upk_alloc(u, want * sz), *old;
	if (!arr)
		return -ENOMEM;
	memcpy(&old, (char *)m + f->offset, sizeof(old));
	if (count)
		memcpy(arr, old, count * sz);
	memcpy((char *)m + f->offset, &arr, sizeof(arr));
	*cap = want;
	return 0;
}

static int unpack_into(struct upk *u, const ProtobufCMessageDescriptor *d, ProtobufCMessage *m,
		       const uint8_t *p, size_t len, unsigned depth)
{
	if (depth > u->max_depth)
		return -ELOOP;
	if (d->n_fields > PB_UNPACK_FIELDS_MAX)
		return -EAGAIN;
	if (!len)
		return 0;
	/* the capacity of the array of repeated field i, valid where bit i of grown is set */
	size_t cap[PB_UNPACK_FIELDS_MAX];
	uint64_t grown = 0;
	int r;
	const uint8_t *end = p + len;
	while (p < end) {
		uint64_t num;
		unsigned wt;
		const uint8_t *sub = NULL;
		size_t n = 0;
		if (next_field(&p, end, &num, &wt, &sub, &n) < 0)
			return -EBADMSG;
		const ProtobufCFieldDescriptor *f = field_of(d, num);
		if (!f)
			continue; /* unknown: skipped */
		char *member = (char *)m + f->offset;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t i = (size_t)(f - d->fields), k = 1;
			size_t *count = (size_t *)((char *)m + f->quantifier_offset);
			bool packed = wt == WT_LEN && packable(f->type);
			if (packed && packed_count(f->type, sub, n, &k) < 0)
				return -EBADMSG;
			if (!k)
				continue; /* an empty packed field: no values */
			if (!packed && wt != wire_type_of(f->type) && f->type != PROTOBUF_C_TYPE_BOOL)
				return -EBADMSG;
			if (!(grown & (1ull << i))) {
				grown |= 1ull << i;
				cap[i] = 0;
			}
			if ((r = room(u, f, m, *count, &cap[i], k)) < 0)
				return r;
			char *arr;
			memcpy(&arr, member, sizeof(arr));
			size_t sz = pb_unpack_value_size(f->type);
			if (packed) {
				if (read_packed(f->type, sub, sub + n, arr, count) < 0)
					return -EBADMSG;
				continue;
			}
			r = read_one(u, f, wt, sub, n, arr + sz * (*count)++, depth);
			if (r < 0)
				return r;
			continue;
		}
		if (wt != wire_type_of(f->type) && f->type != PROTOBUF_C_TYPE_BOOL)
			return -EBADMSG;
		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			/* the last member given wins, as a whole (no merge) */
			*(uint32_t *)((char *)m + f->quantifier_offset) = f->id;
			memset(member, 0, pb_unpack_value_size(f->type));
		} else if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
			ProtobufCMessage *had;
			memcpy(&had, member, sizeof(had));
			if (had)
				return -EAGAIN; /* merged with the one before */
		} else if (f->label == PROTOBUF_C_LABEL_OPTIONAL &&
			   f->type != PROTOBUF_C_TYPE_STRING) {
			/* (proto2 and proto3 `optional`) scalars and bytes have a has_ flag */
			*(protobuf_c_boolean *)((char *)m + f->quantifier_offset) = 1;
		}
		if ((r = read_one(u, f, wt, sub, n, member, depth)) < 0)
			return r;
	}
	return 0;
}

int pb_unpack(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t len,
	      unsigned max_depth, ProtobufCAllocator *a, ProtobufCMessage **out)
{
	struct upk u = {.a = a, .max_depth = max_depth};
	ProtobufCMessage *m = upk_alloc(&u, d->sizeof_message);
	if (!m)
		return -ENOMEM;
	protobuf_c_message_init(d, m);
	int r = unpack_into(&u, d, m, data, len, 0);
	if (r < 0)
		return r;
	*out = m;
	return 0;
}
