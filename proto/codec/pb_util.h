/* pb_util.h — protobuf helpers private to proto/codec/ (every codec includes it), also used
 * by the profile store's compact flame form (controller/profstore/flame.c: pb_intern,
 * pb_varint_read) and the agent's reader of export responses (agent/export/otlp_http.c:
 * pb_varint_read); not a general API.
 *
 * Owns:
 *  - pb_varint_read(): the one reader of a base-128 varint, for every hand-written wire
 *    decode in the tree;
 *  - struct pb_intern: a hash table from byte strings to dense int32 indices (dictionary
 *    interning: the same key always gets the index it got first);
 *  - struct pb_pool: a bump allocator for the throw-away protobuf-c structs of one encode or
 *    unpack (everything is freed at once by pb_pool_release());
 *  - a byte-capped ProtobufCAllocator and a descriptor-driven nesting-depth scan, the two guards
 *    every decoder of untrusted bytes runs before and during protobuf_c_message_unpack()
 *    (protobuf-c's unpacker recurses without a limit and allocates what the
 *    wire asks for);
 *  - the append of a packed message to a buffer, which every encoder of proto/codec/ ends
 *    with;
 *  - the checks and the arena allocation the profile codecs share for a struct pf_prof_window.
 * The file-local aliases of generated message types in the codecs (pb_profile, pb_a2s, ...)
 * share the prefix: pb_ is the protobuf layer below the pf_ codec API. */
#ifndef PF_PB_UTIL_H
#define PF_PB_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "pf/buf.h"
#include "pf/error.h"

struct pb_intern_slot {
	uint64_t hash;
	int32_t idx; /* -1 = empty */
};

struct pb_intern {
	struct pb_intern_slot *slots;
	size_t n_slots;	    /* power of two */
	size_t n;	    /* keys stored */
	struct pf_buf keys; /* all keys back to back */
	size_t *off;	    /* off[i], len[i]: key of index i - base */
	size_t *len;
	size_t cap;
	int32_t base; /* index of the first key added (tables whose slot 0 is pre-filled use 1) */
};

void pb_intern_init(struct pb_intern *t, int32_t base);
void pb_intern_release(struct pb_intern *t);
/* Looks key up; when absent adds it with the next index (base + number of keys).
 * *idx receives the index, *added whether it is new. 0, -ENOMEM, -E2BIG (past INT32_MAX). */
int pb_intern(struct pb_intern *t, const void *key, size_t len, int32_t *idx, bool *added);

struct pb_pool {
	struct pb_pool_chunk *head;
	size_t total;
};
/* Zeroed, 16-byte aligned memory living until pb_pool_release(); NULL on ENOMEM. */
void *pb_pool_alloc(struct pb_pool *p, size_t size);
/* n * size with overflow check. */
void *pb_pool_array(struct pb_pool *p, size_t n, size_t size);
char *pb_pool_strdup(struct pb_pool *p, const char *s);
void pb_pool_release(struct pb_pool *p);

/* Reads the base-128 varint at *p (below end; at most 10 bytes, at most 64 bits) into *v and
 * moves *p past it. 0, or -EBADMSG when it is truncated or too long. */
int pb_varint_read(const uint8_t **p, const uint8_t *end, uint64_t *v);
/* Moves *p past the value of a field of wire type wt (varint, 64-bit, length-delimited,
 * 32-bit). 0, or -EBADMSG when it is truncated or wt is a group or unknown. */
int pb_field_skip(const uint8_t **p, const uint8_t *end, unsigned wt);

/* ProtobufCAllocator that fails (and sets exceeded) once more than max bytes were asked for.
 * It is an arena: protobuf-c's frees do nothing, and pb_capped_alloc_release() frees all that
 * one unpack allocated at once, whether the unpack succeeded or not (call it instead of
 * protobuf_c_message_free_unpacked()). The arena holds at most 4/3 of the bytes asked for
 * (rounded up to 8 each) plus one 64 KiB chunk. */
struct pb_capped_alloc {
	ProtobufCAllocator a;
	size_t used, max;
	bool exceeded;
	struct pb_pool pool;
};
void pb_capped_alloc_init(struct pb_capped_alloc *c, size_t max);
void pb_capped_alloc_release(struct pb_capped_alloc *c);

/* Walks the wire bytes of a message of type d: -EBADMSG on malformed wire data (bad varint,
 * truncated field, field number 0, groups), -ELOOP when message fields nest deeper than
 * max_depth. Unknown fields are skipped. A field whose type's nesting is bounded by the schema
 * within max_depth (no recursive type below it, as a Sample or a Location) is not walked: the
 * unpack that follows checks its bytes, and it cannot nest deeper. */
int pb_wire_scan(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len,
		 unsigned max_depth);
/* Counts, in the wire bytes of a message, the occurrences of each field number below n_counts
 * in the message-typed field outer (every occurrence of it together, as protobuf merges them):
 * counts[k] for field k. 0, or -EBADMSG on malformed wire data. */
int pb_wire_count_fields(const uint8_t *p, size_t len, uint32_t outer, size_t *counts,
			 size_t n_counts);

/* Appends the packed bytes of msg to out (which stays NUL-terminated). 0, -ENOMEM, -E2BIG
 * (past the buffer's cap). */
int pb_pack_append(const ProtobufCMessage *msg, struct pf_buf *out);

/* A growable array of pointers (dictionary tables under construction). Zero-initialise;
 * free t->v when done. 0 or -ENOMEM. */
struct pb_ptrs {
	void **v;
	size_t n, cap;
};
int pb_ptrs_push(struct pb_ptrs *t, void *p);

/* The string table of an encode: NULL and "" are index 0 (the empty string every table is
 * seeded with); a new string is copied into pool and appended to tab. 0, -ENOMEM, -E2BIG. */
int pb_intern_str(struct pb_intern *t, struct pb_ptrs *tab, struct pb_pool *pool, const char *s,
		  int32_t *idx);
/* Packs msg into scratch (reset first) and interns those bytes; *idx and *added as
 * pb_intern(). 0, -ENOMEM, -E2BIG. */
int pb_intern_packed(struct pb_intern *t, struct pf_buf *scratch, const ProtobufCMessage *msg,
		     int32_t *idx, bool *added);
/* Whether key is one of keys[0..n) (labels are written once per key, the first one wins). */
bool pb_key_seen(const char *const *keys, size_t n, const char *key);

/* Allocation from a window's arena under a byte budget shared by one decode: *used grows
 * by every allocation; past max it fails with -E2BIG (message in err), and -ENOMEM when the
 * arena cannot grow. *rc receives the error; NULL is returned then. */
struct pf_prof_window;
void *pb_window_alloc(struct pf_prof_window *w, size_t *used, size_t max, struct pf_error *err,
		      size_t n, size_t size, int *rc);

/* The checks every encoder runs on a window's sample types: without explicit types,
 * frequency_hz must be 1..1e9; every explicit type needs a name. 0 or -EINVAL (message in
 * err). */
int pb_window_check_types(const struct pf_prof_window *w, struct pf_error *err);

/* 64-bit FNV-1a. */
uint64_t pb_hash(const void *p, size_t n);

#endif
