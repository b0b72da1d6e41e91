/* pb_unpack.h — a single-pass unpacker into protobuf-c's generated structs, for the decoders
 * of large untrusted messages (the profile receiver).
 *
 * Fills the same structs protobuf_c_message_unpack() does, so a codec reads them unchanged,
 * from the caller's ProtobufCAllocator (an arena: pb_capped_alloc, whose cap bounds what the
 * wire can make it allocate), with the nesting guard built in, in one pass over the bytes:
 * a repeated field's array is sized by its first field on the wire (a packed one holds all its
 * values) and doubles when more come. protobuf-c instead lists every field it meets, then
 * sizes and copies through that list, which is most of its cost on a profile's
 * thousand small Samples. For proto3 messages: required fields are not checked; unknown
 * fields are skipped, not kept (protobuf-c keeps them in unknown_fields). A singular message
 * field given twice (which protobuf merges) or a message type of more than PB_UNPACK_FIELDS_MAX
 * fields is left to protobuf-c: -EAGAIN. Differential-fuzzed against protobuf-c
 * (tests/fuzz/fuzz_pb_unpack.c). */
#ifndef PF_PB_UNPACK_H
#define PF_PB_UNPACK_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#define PB_UNPACK_FIELDS_MAX 64

/* The size in a generated struct of one value of a field of type t. */
size_t pb_unpack_value_size(ProtobufCType t);

/* The message of type d in data[0, len) into *out, allocated from a (nothing to free apart
 * from the arena). Message fields nest at most max_depth deep below the top message (depth 0).
 * 0; -EBADMSG for malformed wire data or a field of the wrong wire type; -ELOOP past
 * max_depth; -ENOMEM when a refused (a capped arena sets its own flag); -EAGAIN when the
 * input is outside what this unpacker takes (above): unpack it with protobuf-c. */
int pb_unpack(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t len,
	      unsigned max_depth, ProtobufCAllocator *a, ProtobufCMessage **out);

#endif
