/* opamp_codec_encode.c — the encoding half of opamp_codec.h (decoding and framing are in
 * opamp_codec.c).
 *
 * Encoding builds protobuf-c structs in a throw-away pool (strings are borrowed from the
 * caller), packs them straight into the caller's pf_buf and frees the pool.
 *
 * Hot-path shortcut (same bytes; bench/tests/test_codec_fastpath.c checks it): a plain ack
 * (instance_uid, flags, capabilities) is encoded by hand (s2a_encode_fast). */
#include "opamp_codec.h"
#include "opamp_codec_int.h"
#include "pb_util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

/* Throw-away allocations for one encode call, freed together. */
struct pool_blk {
	struct pool_blk *next;
	max_align_t data[];
};

struct pool {
	struct pool_blk *head;
};

static void *pool_alloc(struct pool *p, size_t n)
{
	struct pool_blk *b = calloc(1, sizeof(*b) + (n ? n : 1));
	if (!b)
		return NULL;
	b->next = p->head;
	p->head = b;
	return b->data;
}

static void pool_release(struct pool *p)
{
	while (p->head) {
		struct pool_blk *n = p->head->next;
		free(p->head);
		p->head = n;
	}
}

/* protobuf-c's fields are non-const; the encoder never writes through them. */
static char *s0(const char *s)
{
	return (char *)(s ? s : "");
}

static ProtobufCBinaryData bin(const uint8_t *p, size_t n)
{
	return (ProtobufCBinaryData){.len = p ? n : 0, .data = (uint8_t *)p};
}

static int enc_kvs(struct pool *pl, size_t n, const struct pf_kv *kvs, size_t *n_out, pb_kv ***out)
{
	*n_out = 0;
	*out = NULL;
	if (!n)
		return 0;
	pb_kv **v = pool_alloc(pl, n * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		pb_kv *kv = pool_alloc(pl, sizeof(*kv));
		pb_anyvalue *av = pool_alloc(pl, sizeof(*av));
		if (!kv || !av)
			return -ENOMEM;
		opamp__proto__v1__key_value__init(kv);
		opamp__proto__v1__any_value__init(av);
		av->value_case = OPAMP__PROTO__V1__ANY_VALUE__VALUE_STRING_VALUE;
		av->string_value = s0(kvs[i].value);
		kv->key = s0(kvs[i].key);
		kv->value = av;
		v[i] = kv;
	}
	*n_out = n;
	*out = v;
	return 0;
}

static int enc_health(struct pool *pl, const struct pf_health *h, unsigned level, pb_health **out)
{
	if (level > PF_OPAMP_MAX_HEALTH_DEPTH)
		return -EINVAL;
	pb_health *p = pool_alloc(pl, sizeof(*p));
	if (!p)
		return -ENOMEM;
	opamp__proto__v1__component_health__init(p);
	p->healthy = h->healthy;
	p->start_time_unix_nano = h->start_time_unix_nano;
	p->last_error = s0(h->last_error);
	p->status = s0(h->status);
	p->status_time_unix_nano = h->status_time_unix_nano;
	if (h->n_children) {
		p->component_health_map = pool_alloc(pl, h->n_children * sizeof(pb_health_entry *));
		if (!p->component_health_map)
			return -ENOMEM;
		p->n_component_health_map = h->n_children;
		for (size_t i = 0; i < h->n_children; i++) {
			pb_health_entry *e = pool_alloc(pl, sizeof(*e));
			if (!e)
				return -ENOMEM;
			opamp__proto__v1__component_health__component_health_map_entry__init(e);
			e->key = s0(h->children[i].name);
			int r = enc_health(pl, &h->children[i].health, level + 1, &e->value);
			if (r < 0)
				return r;
			p->component_health_map[i] = e;
		}
	}
	*out = p;
	return 0;
}

static int enc_config_map(struct pool *pl, const struct pf_config_map *cm, pb_config_map **out)
{
	pb_config_map *p = pool_alloc(pl, sizeof(*p));
	if (!p)
		return -ENOMEM;
	opamp__proto__v1__agent_config_map__init(p);
	if (cm->n_files) {
		p->config_map = pool_alloc(pl, cm->n_files * sizeof(pb_config_entry *));
		if (!p->config_map)
			return -ENOMEM;
		p->n_config_map = cm->n_files;
	}
	for (size_t i = 0; i < cm->n_files; i++) {
		pb_config_entry *e = pool_alloc(pl, sizeof(*e));
		pb_config_file *f = pool_alloc(pl, sizeof(*f));
		if (!e || !f)
			return -ENOMEM;
		opamp__proto__v1__agent_config_map__config_map_entry__init(e);
		opamp__proto__v1__agent_config_file__init(f);
		f->body = bin(cm->files[i].body, cm->files[i].body_len);
		f->content_type = s0(cm->files[i].content_type);
		e->key = s0(cm->files[i].name);
		e->value = f;
		p->config_map[i] = e;
	}
	*out = p;
	return 0;
}

/* custom_capabilities, when has. */
static int enc_custom_caps(struct pool *pl, bool has, size_t n, char *const *caps,
			   pb_custom_caps **out)
{
	if (!has)
		return 0;
	pb_custom_caps *p = pool_alloc(pl, sizeof(*p));
	if (!p)
		return -ENOMEM;
	opamp__proto__v1__custom_capabilities__init(p);
	if (n) {
		p->capabilities = pool_alloc(pl, n * sizeof(char *));
		if (!p->capabilities)
			return -ENOMEM;
		for (size_t i = 0; i < n; i++)
			p->capabilities[i] = s0(caps[i]);
		p->n_capabilities = n;
	}
	*out = p;
	return 0;
}

/* custom_message, when c is not NULL. */
static int enc_custom_message(struct pool *pl, const struct pf_custom_message *c,
			      pb_custom_message **out)
{
	if (!c)
		return 0;
	pb_custom_message *p = pool_alloc(pl, sizeof(*p));
	if (!p)
		return -ENOMEM;
	opamp__proto__v1__custom_message__init(p);
	p->capability = s0(c->capability);
	p->type = s0(c->type);
	p->data = bin(c->data, c->data_len);
	*out = p;
	return 0;
}

/* Packs straight into out; out is unchanged on failure. */

static int a2s_build(struct pool *pl, const struct pf_a2s *m, pb_a2s *p)
{
	int r = 0;
	if (m->instance_uid_len > PF_OPAMP_UID_LEN)
		return -EINVAL;
	p->instance_uid = bin(m->instance_uid, m->instance_uid_len);
	p->sequence_num = m->sequence_num;
	p->capabilities = m->capabilities;
	p->flags = m->flags;
	if (m->has_description) {
		Opamp__Proto__V1__AgentDescription *d = pool_alloc(pl, sizeof(*d));
		if (!d)
			return -ENOMEM;
		opamp__proto__v1__agent_description__init(d);
		if ((r = enc_kvs(pl, m->n_identifying, m->identifying, &d->n_identifying_attributes,
				 &d->identifying_attributes)) < 0 ||
		    (r = enc_kvs(pl, m->n_non_identifying, m->non_identifying,
				 &d->n_non_identifying_attributes,
				 &d->non_identifying_attributes)) < 0)
			return r;
		p->agent_description = d;
	}
	if (m->has_health && (r = enc_health(pl, &m->health, 1, &p->health)) < 0)
		return r;
	if (m->has_effective_config) {
		Opamp__Proto__V1__EffectiveConfig *ec = pool_alloc(pl, sizeof(*ec));
		if (!ec)
			return -ENOMEM;
		opamp__proto__v1__effective_config__init(ec);
		if ((r = enc_config_map(pl, &m->effective_config, &ec->config_map)) < 0)
			return r;
		p->effective_config = ec;
	}
	if (m->has_remote_config_status) {
		Opamp__Proto__V1__RemoteConfigStatus *rcs = pool_alloc(pl, sizeof(*rcs));
		if (!rcs)
			return -ENOMEM;
		opamp__proto__v1__remote_config_status__init(rcs);
		rcs->last_remote_config_hash = bin(m->rcs_last_hash, m->rcs_last_hash_len);
		rcs->status = (Opamp__Proto__V1__RemoteConfigStatuses)m->rcs_status;
		rcs->error_message = s0(m->rcs_error_message);
		p->remote_config_status = rcs;
	}
	if (m->has_disconnect) {
		Opamp__Proto__V1__AgentDisconnect *dc = pool_alloc(pl, sizeof(*dc));
		if (!dc)
			return -ENOMEM;
		opamp__proto__v1__agent_disconnect__init(dc);
		p->agent_disconnect = dc;
	}
	r = enc_custom_caps(pl, m->has_custom_capabilities, m->n_custom_capabilities,
			    m->custom_capabilities, &p->custom_capabilities);
	return r < 0 ? r
		     : enc_custom_message(pl, m->has_custom_message ? &m->custom_message : NULL,
					  &p->custom_message);
}

int pf_a2s_encode(const struct pf_a2s *m, struct pf_buf *out)
{
	struct pool pl = {0};
	pb_a2s p;
	opamp__proto__v1__agent_to_server__init(&p);
	int r = a2s_build(&pl, m, &p);
	if (r == 0)
		r = pb_pack_append(&p.base, out);
	pool_release(&pl);
	return r;
}

/* connection_settings.hash: SHA-256 of the interval as 8 little-endian bytes, stable for a
 * given interval so agents can tell an unchanged offer. */
static int heartbeat_hash(uint64_t secs, uint8_t out[32])
{
	/* Every first reply on a connection carries it, with the same interval: keep the last. */
	static _Thread_local struct {
		bool valid;
		uint64_t secs;
		uint8_t hash[32];
	} last;
	if (last.valid && last.secs == secs) {
		memcpy(out, last.hash, 32);
		return 0;
	}
	uint8_t le[8];
	unsigned int n = 0;
	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(secs >> (8 * i));
	if (!EVP_Digest(le, sizeof(le), out, &n, EVP_sha256(), NULL) || n != 32)
		return -EIO;
	memcpy(last.hash, out, 32);
	last.secs = secs;
	last.valid = true;
	return 0;
}

/* connection_settings.opamp.headers from m's opamp_headers. */
static int enc_headers(struct pool *pl, const struct pf_s2a *m, Opamp__Proto__V1__Headers **out)
{
	Opamp__Proto__V1__Headers *h = pool_alloc(pl, sizeof(*h));
	Opamp__Proto__V1__Header **v = pool_alloc(pl, m->n_opamp_headers * sizeof(*v));
	if (!h || !v)
		return -ENOMEM;
	opamp__proto__v1__headers__init(h);
	for (size_t i = 0; i < m->n_opamp_headers; i++) {
		if (!(v[i] = pool_alloc(pl, sizeof(*v[i]))))
			return -ENOMEM;
		opamp__proto__v1__header__init(v[i]);
		v[i]->key = s0(m->opamp_headers[i].key);
		v[i]->value = s0(m->opamp_headers[i].value);
	}
	h->headers = v;
	h->n_headers = m->n_opamp_headers;
	*out = h;
	return 0;
}

static int s2a_build(struct pool *pl, const struct pf_s2a *m, pb_s2a *p)
{
	int r = 0;
	if (m->instance_uid_len > PF_OPAMP_UID_LEN)
		return -EINVAL;
	p->instance_uid = bin(m->instance_uid, m->instance_uid_len);
	p->flags = m->flags;
	p->capabilities = m->capabilities;
	if (m->has_error || m->has_retry_after) {
		Opamp__Proto__V1__ServerErrorResponse *e = pool_alloc(pl, sizeof(*e));
		if (!e)
			return -ENOMEM;
		opamp__proto__v1__server_error_response__init(e);
		e->type =
		    m->has_error
			? (Opamp__Proto__V1__ServerErrorResponseType)m->error_type
			: OPAMP__PROTO__V1__SERVER_ERROR_RESPONSE_TYPE__ServerErrorResponseType_Unknown;
		e->error_message = s0(m->has_error ? m->error_message : NULL);
		if (m->has_retry_after) {
			Opamp__Proto__V1__RetryInfo *ri = pool_alloc(pl, sizeof(*ri));
			if (!ri)
				return -ENOMEM;
			opamp__proto__v1__retry_info__init(ri);
			ri->retry_after_nanoseconds = m->retry_after_nanoseconds;
			e->details_case =
			    OPAMP__PROTO__V1__SERVER_ERROR_RESPONSE__DETAILS_RETRY_INFO;
			e->retry_info = ri;
		}
		p->error_response = e;
	}
	if (m->has_remote_config) {
		Opamp__Proto__V1__AgentRemoteConfig *rc = pool_alloc(pl, sizeof(*rc));
		if (!rc)
			return -ENOMEM;
		opamp__proto__v1__agent_remote_config__init(rc);
		if ((r = enc_config_map(pl, &m->remote_config, &rc->config)) < 0)
			return r;
		rc->config_hash = bin(m->remote_config_hash, m->remote_config_hash_len);
		p->remote_config = rc;
	}
	if (m->has_heartbeat_interval) {
		Opamp__Proto__V1__ConnectionSettingsOffers *cs = pool_alloc(pl, sizeof(*cs));
		Opamp__Proto__V1__OpAMPConnectionSettings *oc = pool_alloc(pl, sizeof(*oc));
		uint8_t *hash = pool_alloc(pl, 32);
		if (!cs || !oc || !hash)
			return -ENOMEM;
		opamp__proto__v1__connection_settings_offers__init(cs);
		opamp__proto__v1__op_ampconnection_settings__init(oc);
		oc->heartbeat_interval_seconds = m->heartbeat_interval_seconds;
		if (m->n_opamp_headers && (r = enc_headers(pl, m, &oc->headers)) < 0)
			return r;
		if (m->connection_settings_hash_len) {
			cs->hash = bin(m->connection_settings_hash, m->connection_settings_hash_len);
		} else {
			if ((r = heartbeat_hash(m->heartbeat_interval_seconds, hash)) < 0)
				return r;
			cs->hash = bin(hash, 32);
		}
		cs->opamp = oc;
		p->connection_settings = cs;
	}
	if (m->has_new_instance_uid) {
		Opamp__Proto__V1__AgentIdentification *ai = pool_alloc(pl, sizeof(*ai));
		if (!ai)
			return -ENOMEM;
		opamp__proto__v1__agent_identification__init(ai);
		ai->new_instance_uid = bin(m->new_instance_uid, PF_OPAMP_UID_LEN);
		p->agent_identification = ai;
	}
	r = enc_custom_caps(pl, m->has_custom_capabilities, m->n_custom_capabilities,
			    m->custom_capabilities, &p->custom_capabilities);
	return r < 0 ? r
		     : enc_custom_message(pl, m->has_custom_message ? &m->custom_message : NULL,
					  &p->custom_message);
}

static size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* Fast path for the reply the controller sends most: the ack to a heartbeat, which sets only
 * instance_uid, flags and capabilities. Written by hand in the canonical form protobuf-c
 * produces (fields in number order, proto3 zero values omitted, minimal varints), so the
 * bytes are identical; saves the pool, the size pass and the pack of the general path.
 * Returns 1 when encoded, 0 when the message needs the general path, or a negative errno. */
static int s2a_encode_fast(const struct pf_s2a *m, struct pf_buf *out)
{
	if (m->has_error || m->has_retry_after || m->has_remote_config ||
	    m->has_heartbeat_interval || m->has_new_instance_uid || m->has_custom_capabilities ||
	    m->has_custom_message || m->instance_uid_len > PF_OPAMP_UID_LEN)
		return 0;
	uint8_t b[2 + PF_OPAMP_UID_LEN + 2 * 11];
	size_t n = 0;
	if (m->instance_uid_len) {
		b[n++] = 1 << 3 | WT_LEN;
		b[n++] = (uint8_t)m->instance_uid_len;
		memcpy(b + n, m->instance_uid, m->instance_uid_len);
		n += m->instance_uid_len;
	}
	if (m->flags) {
		b[n++] = 6 << 3 | WT_VARINT;
		n += put_varint(b + n, m->flags);
	}
	if (m->capabilities) {
		b[n++] = 7 << 3 | WT_VARINT;
		n += put_varint(b + n, m->capabilities);
	}
	int r = pf_buf_append(out, b, n);
	return r < 0 ? r : 1;
}

int pf_s2a_encode(const struct pf_s2a *m, struct pf_buf *out)
{
	int fr = s2a_encode_fast(m, out);
	if (fr != 0)
		return fr > 0 ? 0 : fr;
	struct pool pl = {0};
	pb_s2a p;
	opamp__proto__v1__server_to_agent__init(&p);
	int r = s2a_build(&pl, m, &p);
	if (r == 0)
		r = pb_pack_append(&p.base, out);
	pool_release(&pl);
	return r;
}
