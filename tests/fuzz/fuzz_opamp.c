/* fuzz_opamp.c — OpAMP messages as both ends receive them (proto/codec/opamp_codec.h): the
 * WebSocket frame header (pf_opamp_ws_unframe), then the same bytes decoded as an
 * AgentToServer (the controller's side) and as a ServerToAgent (the agent's side), with and
 * without the frame header.
 *
 * Invariants checked:
 *  - unframe points inside the message, and only accepts a header of 0;
 *  - a rejection is -EBADMSG or -E2BIG with a message;
 *  - decoded strings are non-NULL, bytes fields NUL-terminated past their length, arrays
 *    present when counted, the health tree within PF_OPAMP_MAX_HEALTH_DEPTH;
 *  - a decoded message encodes (or, for an instance uid longer than 16 bytes, is refused with
 *    -EINVAL as documented), that decodes again, and the second encoding is byte-identical
 *    to the first (decode∘encode is a fixed point after one round). */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "opamp_codec.h"

#define MAX_MSG ((size_t)4 << 20)

static void check_str(const char *s, const char *what)
{
	FUZZ_CHECK(s != NULL, "%s is NULL", what);
	(void)strlen(s);
}

static void check_bytes(const uint8_t *p, size_t n, const char *what)
{
	FUZZ_CHECK(p != NULL || n == 0, "%s: NULL with length %zu", what, n);
	if (p)
		FUZZ_CHECK(p[n] == 0, "%s not NUL-terminated", what);
}

static void check_kvs(const struct pf_kv *kv, size_t n, const char *what)
{
	FUZZ_CHECK(!n || kv, "%s: NULL array of %zu", what, n);
	for (size_t i = 0; i < n; i++) {
		check_str(kv[i].key, what);
		check_str(kv[i].value, what);
	}
}

static void check_health(const struct pf_health *h, int depth)
{
	FUZZ_CHECK(depth <= PF_OPAMP_MAX_HEALTH_DEPTH, "health tree %d deep", depth);
	check_str(h->status, "health.status");
	if (h->last_error)
		(void)strlen(h->last_error);
	FUZZ_CHECK(!h->n_children || h->children, "health children NULL");
	for (size_t i = 0; i < h->n_children; i++) {
		check_str(h->children[i].name, "health child name");
		check_health(&h->children[i].health, depth + 1);
	}
}

static void check_config_map(const struct pf_config_map *m)
{
	FUZZ_CHECK(!m->n_files || m->files, "config map: NULL files");
	for (size_t i = 0; i < m->n_files; i++) {
		check_str(m->files[i].name, "config file name");
		check_str(m->files[i].content_type, "config content_type");
		check_bytes(m->files[i].body, m->files[i].body_len, "config body");
	}
}

static void check_custom(bool has_caps, size_t n, char **caps, bool has_msg,
			 const struct pf_custom_message *cm)
{
	FUZZ_CHECK(!n || caps, "custom capabilities NULL");
	for (size_t i = 0; i < n; i++)
		check_str(caps[i], "custom capability");
	if (has_msg) {
		check_str(cm->capability, "custom capability");
		check_str(cm->type, "custom type");
		check_bytes(cm->data, cm->data_len, "custom data");
	}
	(void)has_caps;
}

static void check_a2s(const struct pf_a2s *m)
{
	check_kvs(m->identifying, m->n_identifying, "identifying");
	check_kvs(m->non_identifying, m->n_non_identifying, "non_identifying");
	if (m->has_health)
		check_health(&m->health, 1);
	if (m->has_effective_config)
		check_config_map(&m->effective_config);
	if (m->has_remote_config_status) {
		check_bytes(m->rcs_last_hash, m->rcs_last_hash_len, "rcs hash");
		check_str(m->rcs_error_message, "rcs error");
	}
	check_custom(m->has_custom_capabilities, m->n_custom_capabilities, m->custom_capabilities,
		     m->has_custom_message, &m->custom_message);
}

static void check_s2a(const struct pf_s2a *m)
{
	if (m->has_error)
		check_str(m->error_message, "error message");
	if (m->has_remote_config) {
		check_config_map(&m->remote_config);
		check_bytes(m->remote_config_hash, m->remote_config_hash_len, "config hash");
	}
	check_custom(m->has_custom_capabilities, m->n_custom_capabilities, m->custom_capabilities,
		     m->has_custom_message, &m->custom_message);
}

static void rejected(int rc, const struct pf_error *err, const char *what)
{
	FUZZ_CHECK(rc == -EBADMSG || rc == -E2BIG, "%s: rc %d", what, rc);
	FUZZ_CHECK(err->msg[0], "%s: rc %d without a message", what, rc);
}

static void same_bytes(const struct pf_buf *a, const struct pf_buf *b, const char *what)
{
	FUZZ_CHECK(a->len == b->len && (!a->len || memcmp(a->data, b->data, a->len) == 0),
		   "%s: encoding not a fixed point (%zu then %zu bytes)", what, a->len, b->len);
}

static void fuzz_a2s(const uint8_t *data, size_t size)
{
	struct pf_error err = {0};
	struct pf_a2s *m = NULL, *m2 = NULL;
	struct pf_buf b1, b2;

	int rc = pf_a2s_decode(data, size, MAX_MSG, &m, &err);
	/* The allocation-free variant decides and decodes exactly as pf_a2s_decode(). */
	struct pf_a2s small, *s = NULL;
	int rc_small = pf_a2s_decode_small(data, size, MAX_MSG, &small, &s, NULL);
	FUZZ_CHECK(rc_small == rc, "a2s: pf_a2s_decode_small gives %d, pf_a2s_decode %d", rc_small,
		   rc);
	if (rc_small == 0) {
		FUZZ_CHECK(s != &small || memcmp(s, m, sizeof(*m)) == 0,
			   "a2s: pf_a2s_decode_small differs from pf_a2s_decode");
		pf_a2s_release(&small, s);
	}
	if (rc < 0) {
		rejected(rc, &err, "a2s");
		return;
	}
	check_a2s(m);
	pf_buf_init(&b1, MAX_MSG);
	pf_buf_init(&b2, MAX_MSG);
	rc = pf_a2s_encode(m, &b1);
	if (m->instance_uid_len > PF_OPAMP_UID_LEN) {
		FUZZ_CHECK(rc == -EINVAL, "a2s with a %zu-byte uid encoded: %d", m->instance_uid_len,
			   rc);
		goto out;
	}
	FUZZ_CHECK(rc == 0, "a2s encode of a decoded message: %d", rc);
	rc = pf_a2s_decode(b1.data, b1.len, MAX_MSG, &m2, &err);
	FUZZ_CHECK(rc == 0, "our a2s does not decode: %d %s", rc, err.msg);
	check_a2s(m2);
	FUZZ_CHECK(pf_a2s_encode(m2, &b2) == 0, "a2s second encode");
	same_bytes(&b1, &b2, "a2s");
out:
	pf_a2s_free(m);
	pf_a2s_free(m2);
	pf_buf_release(&b1);
	pf_buf_release(&b2);
}

static void fuzz_s2a(const uint8_t *data, size_t size)
{
	struct pf_error err = {0};
	struct pf_s2a *m = NULL, *m2 = NULL;
	struct pf_buf b1, b2;

	int rc = pf_s2a_decode(data, size, MAX_MSG, &m, &err);
	if (rc < 0) {
		rejected(rc, &err, "s2a");
		return;
	}
	check_s2a(m);
	pf_buf_init(&b1, MAX_MSG);
	pf_buf_init(&b2, MAX_MSG);
	rc = pf_s2a_encode(m, &b1);
	if (m->instance_uid_len > PF_OPAMP_UID_LEN) {
		FUZZ_CHECK(rc == -EINVAL, "s2a with a %zu-byte uid encoded: %d", m->instance_uid_len,
			   rc);
		goto out;
	}
	FUZZ_CHECK(rc == 0, "s2a encode of a decoded message: %d", rc);
	rc = pf_s2a_decode(b1.data, b1.len, MAX_MSG, &m2, &err);
	FUZZ_CHECK(rc == 0, "our s2a does not decode: %d %s", rc, err.msg);
	check_s2a(m2);
	FUZZ_CHECK(pf_s2a_encode(m2, &b2) == 0, "s2a second encode");
	same_bytes(&b1, &b2, "s2a");
out:
	pf_s2a_free(m);
	pf_s2a_free(m2);
	pf_buf_release(&b1);
	pf_buf_release(&b2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *body = NULL;
	size_t body_len = 0;

	fuzz_a2s(data, size);
	fuzz_s2a(data, size);
	int rc = pf_opamp_ws_unframe(data, size, &body, &body_len);
	if (rc == 0) {
		FUZZ_CHECK(size > 0 && body > data && body + body_len == data + size,
			   "unframe outside the message");
		FUZZ_CHECK(data[0] == 0 || (data[0] & 0x80), "header %#x accepted", data[0]);
		fuzz_a2s(body, body_len);
		fuzz_s2a(body, body_len);
	} else {
		FUZZ_CHECK(rc == -EBADMSG, "unframe rc %d", rc);
	}
	return 0;
}
