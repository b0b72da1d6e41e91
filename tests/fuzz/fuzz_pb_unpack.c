/* fuzz_pb_unpack.c — pb_unpack() (proto/codec/pb_unpack.h) against protobuf-c's own unpack, on
 * the message types the tree decodes from untrusted peers. The first byte picks the type
 * (OTLP profiles and traces export requests, OpAMP AgentToServer and ServerToAgent, pprof
 * Profile); the rest is the message.
 *
 * Invariants checked:
 *  - pb_unpack() answers 0, -EBADMSG, -ELOOP, -ENOMEM (its arena's cap) or -EAGAIN;
 *  - where protobuf-c takes the bytes, pb_unpack takes them too unless it says -EAGAIN, and
 *    the other way round;
 *  - both give the same value for every known field (unknown fields aside: pb_unpack skips
 *    them), compared field by field through the descriptors. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "opamp/v1/opamp.pb-c.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "pb_unpack.h"
#include "pb_util.h"
#include "perftools/profile.pb-c.h"

#define MAX_DEPTH 32
#define CAP (64u << 20)

static const ProtobufCMessageDescriptor *const types[] = {
    &opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor,
    &opentelemetry__proto__collector__trace__v1__export_trace_service_request__descriptor,
    &opamp__proto__v1__agent_to_server__descriptor,
    &opamp__proto__v1__server_to_agent__descriptor,
    &perftools__profiles__profile__descriptor,
};

static bool same_msg(const ProtobufCMessageDescriptor *d, const void *a, const void *b,
		     unsigned depth);

static bool same_value(const ProtobufCFieldDescriptor *f, const char *a, const char *b,
		       unsigned depth)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_STRING: {
		const char *x, *y;
		memcpy(&x, a, sizeof(x));
		memcpy(&y, b, sizeof(y));
		return (!x && !y) || (x && y && strcmp(x, y) == 0);
	}
	case PROTOBUF_C_TYPE_BYTES: {
		ProtobufCBinaryData x, y;
		memcpy(&x, a, sizeof(x));
		memcpy(&y, b, sizeof(y));
		return x.len == y.len && (!x.len || memcmp(x.data, y.data, x.len) == 0);
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		const void *x, *y;
		memcpy(&x, a, sizeof(x));
		memcpy(&y, b, sizeof(y));
		if (!x || !y)
			return !x && !y;
		return same_msg(f->descriptor, x, y, depth + 1);
	}
	default:
		return memcmp(a, b, pb_unpack_value_size(f->type)) == 0;
	}
}

static bool same_msg(const ProtobufCMessageDescriptor *d, const void *a, const void *b,
		     unsigned depth)
{
	FUZZ_CHECK(depth <= MAX_DEPTH + 1, "compared deeper than the guard allows: %u", depth);
	const char *ma = a, *mb = b;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const char *qa = ma + f->quantifier_offset, *qb = mb + f->quantifier_offset;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t na, nb;
			memcpy(&na, qa, sizeof(na));
			memcpy(&nb, qb, sizeof(nb));
			if (na != nb) {
				fprintf(stderr, "%s.%s: %zu values and %zu\n", d->name, f->name, na,
					nb);
				return false;
			}
			const char *xa, *xb;
			memcpy(&xa, ma + f->offset, sizeof(xa));
			memcpy(&xb, mb + f->offset, sizeof(xb));
			for (size_t k = 0; k < na; k++)
				if (!same_value(f, xa + k * pb_unpack_value_size(f->type), xb + k * pb_unpack_value_size(f->type),
						depth)) {
					fprintf(stderr, "%s.%s[%zu] differs\n", d->name, f->name, k);
					return false;
				}
			continue;
		}
		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			uint32_t ca, cb;
			memcpy(&ca, qa, sizeof(ca));
			memcpy(&cb, qb, sizeof(cb));
			if (ca != cb) {
				fprintf(stderr, "%s.%s: oneof case %u and %u\n", d->name, f->name, ca,
					cb);
				return false;
			}
			if (ca != f->id)
				continue;
		} else if (f->label == PROTOBUF_C_LABEL_OPTIONAL &&
			   f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_MESSAGE) {
			protobuf_c_boolean ha, hb;
			memcpy(&ha, qa, sizeof(ha));
			memcpy(&hb, qb, sizeof(hb));
			if (!ha != !hb)
				return false;
			if (!ha)
				continue;
		}
		if (!same_value(f, ma + f->offset, mb + f->offset, depth)) {
			fprintf(stderr, "%s.%s differs\n", d->name, f->name);
			return false;
		}
	}
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const ProtobufCMessageDescriptor *d = types[data[0] % (sizeof(types) / sizeof(types[0]))];
	const uint8_t *msg = data + 1;
	size_t len = size - 1;

	struct pb_capped_alloc ours, theirs;
	pb_capped_alloc_init(&ours, CAP);
	pb_capped_alloc_init(&theirs, CAP);
	ProtobufCMessage *m = NULL, *ref = NULL;
	int r = pb_unpack(d, msg, len, MAX_DEPTH, &ours.a, &m);
	FUZZ_CHECK(r == 0 || r == -EBADMSG || r == -ELOOP || r == -EAGAIN ||
			   (r == -ENOMEM && ours.exceeded),
		   "%s: pb_unpack answered %d", d->name, r);
	/* protobuf-c recurses without a bound: it runs where the depth guard passed, or where
	 * pb_unpack took the bytes (then every known message field nests within the bound; the
	 * guard itself refuses varints past 64 bits, which both unpackers take) */
	int s = pb_wire_scan(d, msg, len, MAX_DEPTH);
	if (s == 0 || r == 0)
		ref = protobuf_c_message_unpack(d, &theirs.a, len, len ? msg : (const uint8_t *)"");
	if (r != -EAGAIN && !ours.exceeded && !theirs.exceeded) {
		FUZZ_CHECK((r == 0) == (ref != NULL), "%s: pb_unpack %d, protobuf-c %s (scan %d)",
			   d->name, r, ref ? "took it" : "refused it", s);
		if (r == 0)
			FUZZ_CHECK(same_msg(d, m, ref, 0), "%s: pb_unpack and protobuf-c differ",
				   d->name);
	}
	pb_capped_alloc_release(&ours);
	pb_capped_alloc_release(&theirs);
	return 0;
}
