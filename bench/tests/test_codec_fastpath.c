/* test_codec_fastpath.c — the hot-path shortcuts in proto/codec/opamp_codec.c give exactly
 * what the general (protobuf-c) path gives.
 *
 * Decoding: a heartbeat-shaped AgentToServer takes the fast path; the same message with an
 * unknown field appended (which the struct ignores) takes the general path; both structs must
 * be identical byte for byte. Inputs the fast path must refuse (duplicates, long uids,
 * non-canonical tags, tiny caps, truncation) must still decode, or fail, as before.
 * Encoding: the ack is compared with bytes produced by `protoc --encode` (the canonical form
 * protobuf-c also writes) and round-tripped through the general decoder. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "opamp_codec.h"
#include "pf/buf.h"

static const uint8_t UID[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };

static void put(struct pf_buf *b, const uint8_t *p, size_t n)
{
	assert_int_equal(pf_buf_append(b, p, n), 0);
}

/* Decodes data twice: as is (fast path when eligible) and with an unknown varint field 100
 * appended (general path). Both must succeed and agree. */
static void check_same(const uint8_t *data, size_t len)
{
	struct pf_buf slow;
	pf_buf_init(&slow, 1 << 20);
	put(&slow, data, len);
	static const uint8_t unknown[] = { 0xa0, 0x06, 0x07 }; /* field 100, varint 7 */
	put(&slow, unknown, sizeof(unknown));

	struct pf_a2s *a = NULL, *b = NULL;
	struct pf_error err = { 0 };
	assert_int_equal(pf_a2s_decode(data, len, PF_OPAMP_DEFAULT_MAX_MSG, &a, &err), 0);
	assert_int_equal(pf_a2s_decode(slow.data, slow.len, PF_OPAMP_DEFAULT_MAX_MSG, &b, &err), 0);
	assert_memory_equal(a, b, sizeof(*a));
	/* pf_a2s_decode_small(): the same bytes (in the caller's struct on the fast path). */
	struct pf_a2s small, *c = NULL;
	assert_int_equal(pf_a2s_decode_small(data, len, PF_OPAMP_DEFAULT_MAX_MSG, &small, &c, &err),
			 0);
	assert_memory_equal(c, a, sizeof(*a));
	pf_a2s_release(&small, c);
	/* The general path's message is on the heap, as pf_a2s_decode() gives it. */
	assert_int_equal(pf_a2s_decode_small(slow.data, slow.len, PF_OPAMP_DEFAULT_MAX_MSG, &small,
					     &c, &err),
			 0);
	assert_ptr_not_equal(c, &small);
	assert_memory_equal(c, b, sizeof(*b));
	pf_a2s_release(&small, c);
	pf_a2s_free(a);
	pf_a2s_free(b);
	pf_buf_release(&slow);
}

static void test_decode_heartbeats(void **state)
{
	(void)state;
	static const uint64_t values[] = { 0, 1, 127, 128, 0x3fff, 0x4000, UINT32_MAX, UINT64_MAX };
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		for (int variant = 0; variant < 6; variant++) {
			struct pf_a2s m = { 0 };
			m.instance_uid_len = variant == 1 ? 0 : variant == 2 ? 5 : 16;
			memcpy(m.instance_uid, UID, m.instance_uid_len);
			m.sequence_num = values[i];
			m.capabilities = variant == 3 ? 0 : values[(i + 3) % 8] | 0x2001;
			m.flags = variant == 4 ? values[i] : 0;
			m.has_disconnect = variant == 5;
			struct pf_buf b;
			pf_buf_init(&b, 1 << 20);
			assert_int_equal(pf_a2s_encode(&m, &b), 0);
			check_same(b.data, b.len);

			struct pf_a2s *d = NULL;
			assert_int_equal(pf_a2s_decode(b.data, b.len, 4096, &d, NULL), 0);
			assert_int_equal(d->instance_uid_len, m.instance_uid_len);
			assert_memory_equal(d->instance_uid, m.instance_uid, m.instance_uid_len);
			assert_true(d->sequence_num == m.sequence_num);
			assert_true(d->capabilities == m.capabilities);
			assert_true(d->flags == m.flags);
			assert_int_equal(d->has_disconnect, m.has_disconnect);
			assert_false(d->has_description || d->has_health || d->has_effective_config ||
				     d->has_remote_config_status || d->has_custom_message ||
				     d->has_custom_capabilities);
			pf_a2s_free(d);
			struct pf_a2s small;
			assert_int_equal(pf_a2s_decode_small(b.data, b.len, 4096, &small, &d, NULL), 0);
			assert_ptr_equal(d, &small); /* no allocation */
			pf_a2s_release(&small, d);
			pf_buf_release(&b);
		}
	}
	check_same((const uint8_t *)"", 0); /* the empty message is valid */
}

/* Inputs the fast path leaves to the general one: same result as the general path. */
static void test_decode_fallbacks(void **state)
{
	(void)state;
	/* Duplicate scalar: last one wins (protobuf). */
	static const uint8_t dup[] = { 0x10, 0x05, 0x10, 0x09 };
	struct pf_a2s *m = NULL;
	assert_int_equal(pf_a2s_decode(dup, sizeof(dup), 1 << 20, &m, NULL), 0);
	assert_int_equal(m->sequence_num, 9);
	pf_a2s_free(m);
	check_same(dup, sizeof(dup));

	/* A uid longer than 16 bytes: received length kept, 16 bytes copied. */
	uint8_t lng[2 + 20];
	lng[0] = 0x0a;
	lng[1] = 20;
	for (int i = 0; i < 20; i++)
		lng[2 + i] = (uint8_t)i;
	assert_int_equal(pf_a2s_decode(lng, sizeof(lng), 1 << 20, &m, NULL), 0);
	assert_int_equal(m->instance_uid_len, 20);
	assert_int_equal(m->instance_uid[15], 15);
	pf_a2s_free(m);

	/* A non-minimal tag varint (0x8a 0x00 is tag 0x0a) goes the general way. */
	static const uint8_t nonmin[] = { 0x8a, 0x00, 0x02, 0xaa, 0xbb, 0x20, 0x01 };
	assert_int_equal(pf_a2s_decode(nonmin, sizeof(nonmin), 1 << 20, &m, NULL), 0);
	assert_int_equal(m->instance_uid_len, 2);
	assert_int_equal(m->capabilities, 1);
	pf_a2s_free(m);

	/* Truncated: a varint cut short, a uid longer than the rest. */
	static const uint8_t trunc1[] = { 0x10, 0x85 };
	static const uint8_t trunc2[] = { 0x0a, 0x10, 0x01 };
	static const uint8_t wrongtype[] = { 0x11, 0, 0, 0, 0, 0, 0, 0, 0 }; /* seq as fixed64 */
	struct pf_error err = { 0 };
	assert_int_equal(pf_a2s_decode(trunc1, sizeof(trunc1), 1 << 20, &m, &err), -EBADMSG);
	assert_int_equal(pf_a2s_decode(trunc2, sizeof(trunc2), 1 << 20, &m, NULL), -EBADMSG);
	assert_int_equal(pf_a2s_decode(wrongtype, sizeof(wrongtype), 1 << 20, &m, NULL),
			 -EBADMSG);
	assert_true(err.msg[0] != 0);

	/* A non-empty agent_disconnect (unknown field inside) is still a disconnect. */
	static const uint8_t disc[] = { 0x4a, 0x02, 0x08, 0x01 };
	assert_int_equal(pf_a2s_decode(disc, sizeof(disc), 1 << 20, &m, NULL), 0);
	assert_true(m->has_disconnect);
	pf_a2s_free(m);

	/* A tiny byte cap is enforced exactly as before. */
	static const uint8_t hb[] = { 0x10, 0x01 };
	assert_int_equal(pf_a2s_decode(hb, sizeof(hb), 16, &m, NULL), -E2BIG);
	struct pf_a2s small;
	assert_int_equal(pf_a2s_decode_small(hb, sizeof(hb), 16, &small, &m, NULL), -E2BIG);
	assert_int_equal(pf_a2s_decode_small(trunc1, sizeof(trunc1), 1 << 20, &small, &m, NULL),
			 -EBADMSG);
}

static void test_encode_ack(void **state)
{
	(void)state;
	/* protoc --encode=opamp.proto.v1.ServerToAgent of
	 *   instance_uid: "\001...\020" flags: 1 capabilities: 39 */
	static const uint8_t want1[] = { 0x0a, 0x10, 1,	   2,	 3,    4,    5, 6,  7, 8, 9, 10,
					 11,   12,   13,   14,	 15,   16,   0x30, 0x01, 0x38, 0x27 };
	/* capabilities: 300 flags: 18446744073709551615 */
	static const uint8_t want2[] = { 0x30, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
					 0xff, 0xff, 0x01, 0x38, 0xac, 0x02 };
	struct pf_s2a m = { 0 };
	memcpy(m.instance_uid, UID, 16);
	m.instance_uid_len = 16;
	m.flags = 1;
	m.capabilities = 39;
	struct pf_buf b;
	pf_buf_init(&b, 1 << 20);
	put(&b, (const uint8_t *)"x", 1); /* appends after what is there */
	assert_int_equal(pf_s2a_encode(&m, &b), 0);
	assert_int_equal(b.len, 1 + sizeof(want1));
	assert_memory_equal(b.data + 1, want1, sizeof(want1));

	struct pf_s2a *d = NULL;
	assert_int_equal(pf_s2a_decode(b.data + 1, b.len - 1, 1 << 20, &d, NULL), 0);
	assert_int_equal(d->instance_uid_len, 16);
	assert_memory_equal(d->instance_uid, UID, 16);
	assert_int_equal(d->flags, 1);
	assert_int_equal(d->capabilities, 39);
	assert_false(d->has_error || d->has_remote_config || d->has_heartbeat_interval ||
		     d->has_new_instance_uid);
	pf_s2a_free(d);

	struct pf_s2a m2 = { 0 };
	m2.capabilities = 300;
	m2.flags = UINT64_MAX;
	pf_buf_reset(&b);
	assert_int_equal(pf_s2a_encode(&m2, &b), 0);
	assert_int_equal(b.len, sizeof(want2));
	assert_memory_equal(b.data, want2, sizeof(want2));

	/* Empty message, over-long uid, and out's cap: same contract as the general path. */
	struct pf_s2a empty = { 0 };
	pf_buf_reset(&b);
	assert_int_equal(pf_s2a_encode(&empty, &b), 0);
	assert_int_equal(b.len, 0);
	struct pf_s2a bad = { .instance_uid_len = 17 };
	assert_int_equal(pf_s2a_encode(&bad, &b), -EINVAL);
	struct pf_buf small;
	pf_buf_init(&small, 8);
	assert_int_equal(pf_s2a_encode(&m, &small), -E2BIG);
	assert_int_equal(small.len, 0);
	pf_buf_release(&small);
	pf_buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decode_heartbeats),
		cmocka_unit_test(test_decode_fallbacks),
		cmocka_unit_test(test_encode_ack),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
