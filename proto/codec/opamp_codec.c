/* opamp_codec.c — see opamp_codec.h. Decoding and the WebSocket framing; encoding is in
 * opamp_codec_encode.c.
 *
 * Decoding runs in four steps:
 *   1. pb_wire_scan() (pb_util.h): walk the bytes with the message descriptors and refuse
 *      nesting deeper than PF_OPAMP_MAX_WIRE_DEPTH (protobuf-c's unpacker recurses without a
 *      limit);
 *   2. protobuf-c unpacks through pb_capped_alloc (pb_util.h), capped at max_bytes;
 *   3. a sizing pass computes the exact arena size of the plain structs (and checks the health
 *      depth);
 *   4. a fill pass copies everything into one calloc'ed block that starts with the struct, so
 *      pf_a2s_free()/pf_s2a_free() are a single free().
 * The two passes share ar_round(), so the fill pass always fits what the sizing pass counted.
 *
 * Hot-path shortcut (same results, byte for byte; bench/tests/test_codec_fastpath.c checks
 * it): a heartbeat-shaped AgentToServer is decoded without protobuf-c (a2s_decode_fast),
 * with pf_a2s_decode_small() into the caller's struct. With the hand-written ack encoder of
 * opamp_codec_encode.c, the pair takes about 400 instructions under callgrind, where
 * protobuf-c's general path takes about 3,800. */
#include "opamp_codec.h"
#include "opamp_codec_int.h"
#include "pb_util.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------- */
/* AnyValue -> string (header: string as is, bool true/false, int/double decimal, bytes hex,  */
/* arrays and kvlists compact JSON).                                                         */

static int render_hex(struct pf_buf *b, const uint8_t *p, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	int r = pf_buf_reserve(b, n * 2);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		b->data[b->len++] = (uint8_t)hex[p[i] >> 4];
		b->data[b->len++] = (uint8_t)hex[p[i] & 15];
	}
	b->data[b->len] = 0;
	return 0;
}

/* Shortest of %.15g/%.17g that reads back as the same double. */
static int render_double(struct pf_buf *b, double d, bool json)
{
	if (isnan(d))
		return pf_buf_append_str(b, json ? "null" : "nan");
	if (isinf(d))
		return pf_buf_append_str(b, json ? "null" : (d < 0 ? "-inf" : "inf"));
	char tmp[40];
	snprintf(tmp, sizeof(tmp), "%.15g", d);
	if (strtod(tmp, NULL) != d)
		snprintf(tmp, sizeof(tmp), "%.17g", d);
	return pf_buf_append_str(b, tmp);
}

/* JSON string literal (RFC 8259 section 7); bytes >= 0x80 are copied as they are. */
static int render_json_string(struct pf_buf *b, const char *s)
{
	int r = pf_buf_putc(b, '"');
	for (; r == 0 && *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			uint8_t esc[2] = {'\\', c};
			r = pf_buf_append(b, esc, 2);
		} else if (c == '\n') {
			r = pf_buf_append_str(b, "\\n");
		} else if (c == '\t') {
			r = pf_buf_append_str(b, "\\t");
		} else if (c == '\r') {
			r = pf_buf_append_str(b, "\\r");
		} else if (c < 0x20) {
			r = pf_buf_printf(b, "\\u%04x", c);
		} else {
			r = pf_buf_putc(b, c);
		}
	}
	return r < 0 ? r : pf_buf_putc(b, '"');
}

static int render_value(struct pf_buf *b, const pb_anyvalue *v, bool json);

static int render_kvlist_json(struct pf_buf *b, size_t n, pb_kv *const *kvs)
{
	int r = pf_buf_putc(b, '{');
	for (size_t i = 0; r == 0 && i < n; i++) {
		if (i)
			r = pf_buf_putc(b, ',');
		if (r == 0)
			r = render_json_string(b, kvs[i]->key ? kvs[i]->key : "");
		if (r == 0)
			r = pf_buf_putc(b, ':');
		if (r == 0)
			r = render_value(b, kvs[i]->value, true);
	}
	return r < 0 ? r : pf_buf_putc(b, '}');
}

/* Renders v; json selects the nested (JSON) form. Recursion depth is bounded by wire_scan. */
static int render_value(struct pf_buf *b, const pb_anyvalue *v, bool json)
{
	int r;
	if (!v)
		return json ? pf_buf_append_str(b, "null") : 0;
	switch (v->value_case) {
	case OPAMP__PROTO__V1__ANY_VALUE__VALUE_STRING_VALUE:
		return json ? render_json_string(b, v->string_value)
			    : pf_buf_append_str(b, v->string_value);
	case OPAMP__PROTO__V1__ANY_VALUE__VALUE_BOOL_VALUE:
		return pf_buf_append_str(b, v->bool_value ? "true" : "false");
	case OPAMP__PROTO__V1__ANY_VALUE__VALUE_INT_VALUE:
		return pf_buf_printf(b, "%" PRId64, v->int_value);
	case OPAMP__PROTO__V1__ANY_VALUE__VALUE_DOUBLE_VALUE:
		return render_double(b, v->double_value, json);
	case OPAMP__PROTO__V1__ANY_VALUE__VALUE_BYTES_VALUE:
		if (json && (r = pf_buf_putc(b, '"')) < 0)
			return r;
		r = render_hex(b, v->bytes_value.data, v->bytes_value.len);
		return (r < 0 || !json) ? r : pf_buf_putc(b, '"');
	case OPAMP__PROTO__V1__ANY_VALUE__VALUE_ARRAY_VALUE: {
		const Opamp__Proto__V1__ArrayValue *a = v->array_value;
		r = pf_buf_putc(b, '[');
		for (size_t i = 0; r == 0 && a && i < a->n_values; i++) {
			if (i)
				r = pf_buf_putc(b, ',');
			if (r == 0)
				r = render_value(b, a->values[i], true);
		}
		return r < 0 ? r : pf_buf_putc(b, ']');
	}
	case OPAMP__PROTO__V1__ANY_VALUE__VALUE_KVLIST_VALUE:
		if (!v->kvlist_value)
			return pf_buf_append_str(b, "{}");
		return render_kvlist_json(b, v->kvlist_value->n_values, v->kvlist_value->values);
	default:
		return json ? pf_buf_append_str(b, "null") : 0;
	}
}

/* ---------------------------------------------------------------------------------------- */
/* Steps 3 and 4: sizing and filling the arena.                                              */

#define AR_ALIGN alignof(max_align_t)

static size_t ar_round(size_t n)
{
	return (n + AR_ALIGN - 1) & ~(AR_ALIGN - 1);
}

struct arena {
	uint8_t *base;
	size_t used;
	size_t cap;
};

/* Sizing context: accumulated bytes, scratch buffer for AnyValue rendering, max_bytes. */
struct sizer {
	size_t total;
	size_t max;
	struct pf_buf scratch;
	struct pf_error *err;
};

static void sz_add(struct sizer *s, size_t n)
{
	size_t r = ar_round(n);
	s->total = (r > SIZE_MAX - s->total) ? SIZE_MAX : s->total + r;
}

static void *ar_alloc(struct arena *a, size_t n)
{
	if (n == 0)
		return NULL;
	n = ar_round(n);
	if (n > a->cap - a->used)
		return NULL; /* cannot happen: the sizing pass counted this */
	void *p = a->base + a->used;
	a->used += n;
	return p;
}

static void sz_str(struct sizer *s, const char *str)
{
	sz_add(s, (str ? strlen(str) : 0) + 1);
}

static int ar_str(struct arena *a, const char *str, char **out)
{
	size_t n = str ? strlen(str) : 0;
	char *p = ar_alloc(a, n + 1);
	if (!p)
		return -ENOMEM;
	if (n)
		memcpy(p, str, n);
	p[n] = 0;
	*out = p;
	return 0;
}

static int ar_bytes(struct arena *a, const ProtobufCBinaryData *bd, uint8_t **out, size_t *len)
{
	uint8_t *p = ar_alloc(a, bd->len + 1);
	if (!p)
		return -ENOMEM;
	if (bd->len)
		memcpy(p, bd->data, bd->len);
	p[bd->len] = 0;
	*out = p;
	*len = bd->len;
	return 0;
}

static int sz_kvs(struct sizer *s, size_t n, pb_kv *const *kvs)
{
	if (!n)
		return 0;
	sz_add(s, n * sizeof(struct pf_kv));
	for (size_t i = 0; i < n; i++) {
		sz_str(s, kvs[i]->key);
		pf_buf_reset(&s->scratch);
		int r = render_value(&s->scratch, kvs[i]->value, false);
		if (r < 0)
			return r;
		sz_add(s, s->scratch.len + 1);
	}
	return 0;
}

static int ar_kvs(struct arena *a, struct pf_buf *scratch, size_t n, pb_kv *const *kvs,
		  size_t *n_out, struct pf_kv **out)
{
	*n_out = n;
	*out = NULL;
	if (!n)
		return 0;
	struct pf_kv *v = ar_alloc(a, n * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		int r = ar_str(a, kvs[i]->key, &v[i].key);
		if (r < 0)
			return r;
		pf_buf_reset(scratch);
		r = render_value(scratch, kvs[i]->value, false);
		if (r < 0)
			return r;
		r = ar_str(a, pf_buf_str(scratch), &v[i].value);
		if (r < 0)
			return r;
	}
	*out = v;
	return 0;
}

static int sz_health(struct sizer *s, const pb_health *h, unsigned level)
{
	if (level > PF_OPAMP_MAX_HEALTH_DEPTH)
		return pf_error_set(s->err, -EBADMSG, "health",
				    "component health tree deeper than %d levels",
				    PF_OPAMP_MAX_HEALTH_DEPTH);
	if (!h) { /* ar_health() fills an absent value as the empty health: "" and "" */
		sz_str(s, NULL);
		sz_str(s, NULL);
		return 0;
	}
	sz_str(s, h->last_error);
	sz_str(s, h->status);
	if (h->n_component_health_map)
		sz_add(s, h->n_component_health_map * sizeof(struct pf_health_entry));
	for (size_t i = 0; i < h->n_component_health_map; i++) {
		sz_str(s, h->component_health_map[i]->key);
		int r = sz_health(s, h->component_health_map[i]->value, level + 1);
		if (r < 0)
			return r;
	}
	return 0;
}

static int ar_health(struct arena *a, const pb_health *h, struct pf_health *out)
{
	static const pb_health empty = OPAMP__PROTO__V1__COMPONENT_HEALTH__INIT;
	if (!h)
		h = &empty;
	out->healthy = h->healthy;
	out->start_time_unix_nano = h->start_time_unix_nano;
	out->status_time_unix_nano = h->status_time_unix_nano;
	int r = ar_str(a, h->last_error, &out->last_error);
	if (r == 0)
		r = ar_str(a, h->status, &out->status);
	if (r < 0)
		return r;
	out->n_children = h->n_component_health_map;
	out->children = NULL;
	if (!out->n_children)
		return 0;
	out->children = ar_alloc(a, out->n_children * sizeof(*out->children));
	if (!out->children)
		return -ENOMEM;
	for (size_t i = 0; i < out->n_children; i++) {
		r = ar_str(a, h->component_health_map[i]->key, &out->children[i].name);
		if (r == 0)
			r = ar_health(a, h->component_health_map[i]->value,
				      &out->children[i].health);
		if (r < 0)
			return r;
	}
	return 0;
}

static void sz_config_map(struct sizer *s, const pb_config_map *cm)
{
	if (!cm || !cm->n_config_map)
		return;
	sz_add(s, cm->n_config_map * sizeof(struct pf_config_file));
	for (size_t i = 0; i < cm->n_config_map; i++) {
		const pb_config_file *f = cm->config_map[i]->value;
		sz_str(s, cm->config_map[i]->key);
		sz_add(s, (f ? f->body.len : 0) + 1);
		sz_str(s, f ? f->content_type : NULL);
	}
}

static int ar_config_map(struct arena *a, const pb_config_map *cm, struct pf_config_map *out)
{
	static const pb_config_file empty = OPAMP__PROTO__V1__AGENT_CONFIG_FILE__INIT;
	out->n_files = 0;
	out->files = NULL;
	if (!cm || !cm->n_config_map)
		return 0;
	out->files = ar_alloc(a, cm->n_config_map * sizeof(*out->files));
	if (!out->files)
		return -ENOMEM;
	out->n_files = cm->n_config_map;
	for (size_t i = 0; i < cm->n_config_map; i++) {
		const pb_config_file *f =
		    cm->config_map[i]->value ? cm->config_map[i]->value : &empty;
		struct pf_config_file *o = &out->files[i];
		int r = ar_str(a, cm->config_map[i]->key, &o->name);
		if (r == 0)
			r = ar_bytes(a, &f->body, &o->body, &o->body_len);
		if (r == 0)
			r = ar_str(a, f->content_type, &o->content_type);
		if (r < 0)
			return r;
	}
	return 0;
}

static void sz_custom_caps(struct sizer *s, const pb_custom_caps *c)
{
	if (!c || !c->n_capabilities)
		return;
	sz_add(s, c->n_capabilities * sizeof(char *));
	for (size_t i = 0; i < c->n_capabilities; i++)
		sz_str(s, c->capabilities[i]);
}

/* custom_capabilities, when present (*has then set). */
static int ar_custom_caps(struct arena *a, const pb_custom_caps *c, bool *has, size_t *n_out,
			  char ***out)
{
	*n_out = 0;
	*out = NULL;
	if (!c)
		return 0;
	*has = true;
	if (!c->n_capabilities)
		return 0;
	char **v = ar_alloc(a, c->n_capabilities * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < c->n_capabilities; i++) {
		int r = ar_str(a, c->capabilities[i], &v[i]);
		if (r < 0)
			return r;
	}
	*n_out = c->n_capabilities;
	*out = v;
	return 0;
}

static void sz_custom_message(struct sizer *s, const pb_custom_message *c)
{
	if (!c)
		return;
	sz_str(s, c->capability);
	sz_str(s, c->type);
	sz_add(s, c->data.len + 1);
}

/* custom_message, when present (*has then set). */
static int ar_custom_message(struct arena *a, const pb_custom_message *c, bool *has,
			     struct pf_custom_message *out)
{
	if (!c)
		return 0;
	*has = true;
	int r = ar_str(a, c->capability, &out->capability);
	if (r == 0)
		r = ar_str(a, c->type, &out->type);
	if (r == 0)
		r = ar_bytes(a, &c->data, &out->data, &out->data_len);
	return r;
}

static void copy_uid(const ProtobufCBinaryData *bd, uint8_t dst[PF_OPAMP_UID_LEN], size_t *len)
{
	if (bd->len)
		memcpy(dst, bd->data, pf_min(bd->len, (size_t)PF_OPAMP_UID_LEN));
	*len = bd->len;
}

/* AgentToServer: sizing pass. */
static int a2s_size(struct sizer *s, const ProtobufCMessage *msg)
{
	const pb_a2s *p = (const pb_a2s *)msg;
	int r;
	sz_add(s, sizeof(struct pf_a2s));
	if (p->agent_description) {
		const Opamp__Proto__V1__AgentDescription *d = p->agent_description;
		if ((r = sz_kvs(s, d->n_identifying_attributes, d->identifying_attributes)) < 0 ||
		    (r = sz_kvs(s, d->n_non_identifying_attributes,
				d->non_identifying_attributes)) < 0)
			return r;
	}
	if (p->health && (r = sz_health(s, p->health, 1)) < 0)
		return r;
	if (p->effective_config)
		sz_config_map(s, p->effective_config->config_map);
	if (p->remote_config_status) {
		sz_add(s, p->remote_config_status->last_remote_config_hash.len + 1);
		sz_str(s, p->remote_config_status->error_message);
	}
	sz_custom_caps(s, p->custom_capabilities);
	sz_custom_message(s, p->custom_message);
	return 0;
}

/* AgentToServer: fill pass. */
static int a2s_fill(struct arena *a, struct pf_buf *scratch, const ProtobufCMessage *msg,
		    void *out)
{
	const pb_a2s *p = (const pb_a2s *)msg;
	struct pf_a2s *m = out;
	int r = 0;
	copy_uid(&p->instance_uid, m->instance_uid, &m->instance_uid_len);
	m->sequence_num = p->sequence_num;
	m->capabilities = p->capabilities;
	m->flags = p->flags;
	if (p->agent_description) {
		const Opamp__Proto__V1__AgentDescription *d = p->agent_description;
		m->has_description = true;
		if ((r = ar_kvs(a, scratch, d->n_identifying_attributes, d->identifying_attributes,
				&m->n_identifying, &m->identifying)) < 0 ||
		    (r = ar_kvs(a, scratch, d->n_non_identifying_attributes,
				d->non_identifying_attributes, &m->n_non_identifying,
				&m->non_identifying)) < 0)
			return r;
	}
	if (p->health) {
		m->has_health = true;
		if ((r = ar_health(a, p->health, &m->health)) < 0)
			return r;
	}
	if (p->effective_config) {
		m->has_effective_config = true;
		r = ar_config_map(a, p->effective_config->config_map, &m->effective_config);
		if (r < 0)
			return r;
	}
	if (p->remote_config_status) {
		const Opamp__Proto__V1__RemoteConfigStatus *rcs = p->remote_config_status;
		m->has_remote_config_status = true;
		m->rcs_status = (enum pf_remote_config_status)rcs->status;
		if ((r = ar_bytes(a, &rcs->last_remote_config_hash, &m->rcs_last_hash,
				  &m->rcs_last_hash_len)) < 0 ||
		    (r = ar_str(a, rcs->error_message, &m->rcs_error_message)) < 0)
			return r;
	}
	m->has_disconnect = p->agent_disconnect != NULL;
	r = ar_custom_caps(a, p->custom_capabilities, &m->has_custom_capabilities,
			   &m->n_custom_capabilities, &m->custom_capabilities);
	if (r == 0)
		r = ar_custom_message(a, p->custom_message, &m->has_custom_message,
				      &m->custom_message);
	return r;
}

static int s2a_size(struct sizer *s, const ProtobufCMessage *msg)
{
	const pb_s2a *p = (const pb_s2a *)msg;
	sz_add(s, sizeof(struct pf_s2a));
	if (p->error_response)
		sz_str(s, p->error_response->error_message);
	if (p->remote_config) {
		sz_config_map(s, p->remote_config->config);
		sz_add(s, p->remote_config->config_hash.len + 1);
	}
	if (p->agent_identification &&
	    p->agent_identification->new_instance_uid.len != PF_OPAMP_UID_LEN)
		return pf_error_set(s->err, -EBADMSG, "agent_identification.new_instance_uid",
				    "must be %d bytes, got %zu", PF_OPAMP_UID_LEN,
				    p->agent_identification->new_instance_uid.len);
	if (p->connection_settings) {
		const Opamp__Proto__V1__ConnectionSettingsOffers *cs = p->connection_settings;
		sz_add(s, cs->hash.len + 1);
		if (cs->opamp && cs->opamp->headers && cs->opamp->headers->n_headers) {
			const Opamp__Proto__V1__Headers *h = cs->opamp->headers;
			sz_add(s, h->n_headers * sizeof(struct pf_kv));
			for (size_t i = 0; i < h->n_headers; i++) {
				sz_str(s, h->headers[i]->key);
				sz_str(s, h->headers[i]->value);
			}
		}
	}
	sz_custom_caps(s, p->custom_capabilities);
	sz_custom_message(s, p->custom_message);
	return 0;
}

/* connection_settings: the hash, and opamp's interval and headers. */
static int ar_conn_settings(struct arena *a, const Opamp__Proto__V1__ConnectionSettingsOffers *cs,
			    struct pf_s2a *m)
{
	int r = ar_bytes(a, &cs->hash, &m->connection_settings_hash,
			 &m->connection_settings_hash_len);
	if (r < 0 || !cs->opamp)
		return r;
	m->has_heartbeat_interval = true;
	m->heartbeat_interval_seconds = cs->opamp->heartbeat_interval_seconds;
	const Opamp__Proto__V1__Headers *h = cs->opamp->headers;
	if (!h || !h->n_headers)
		return 0;
	m->opamp_headers = ar_alloc(a, h->n_headers * sizeof(struct pf_kv));
	if (!m->opamp_headers)
		return -ENOMEM;
	m->n_opamp_headers = h->n_headers;
	for (size_t i = 0; i < h->n_headers; i++)
		if ((r = ar_str(a, h->headers[i]->key, &m->opamp_headers[i].key)) < 0 ||
		    (r = ar_str(a, h->headers[i]->value, &m->opamp_headers[i].value)) < 0)
			return r;
	return 0;
}

static int s2a_fill(struct arena *a, struct pf_buf *scratch, const ProtobufCMessage *msg,
		    void *out)
{
	const pb_s2a *p = (const pb_s2a *)msg;
	struct pf_s2a *m = out;
	(void)scratch; /* nothing in a ServerToAgent is rendered */
	int r = 0;
	copy_uid(&p->instance_uid, m->instance_uid, &m->instance_uid_len);
	m->flags = p->flags;
	m->capabilities = p->capabilities;
	if (p->error_response) {
		const Opamp__Proto__V1__ServerErrorResponse *e = p->error_response;
		m->has_error = true;
		m->error_type = (enum pf_server_error_type)e->type;
		if ((r = ar_str(a, e->error_message, &m->error_message)) < 0)
			return r;
		if (e->details_case ==
			OPAMP__PROTO__V1__SERVER_ERROR_RESPONSE__DETAILS_RETRY_INFO &&
		    e->retry_info) {
			m->has_retry_after = true;
			m->retry_after_nanoseconds = e->retry_info->retry_after_nanoseconds;
		}
	}
	if (p->remote_config) {
		m->has_remote_config = true;
		if ((r = ar_config_map(a, p->remote_config->config, &m->remote_config)) < 0 ||
		    (r = ar_bytes(a, &p->remote_config->config_hash, &m->remote_config_hash,
				  &m->remote_config_hash_len)) < 0)
			return r;
	}
	if (p->connection_settings && (r = ar_conn_settings(a, p->connection_settings, m)) < 0)
		return r;
	if (p->agent_identification) {
		m->has_new_instance_uid = true;
		memcpy(m->new_instance_uid, p->agent_identification->new_instance_uid.data,
		       PF_OPAMP_UID_LEN);
	}
	r = ar_custom_caps(a, p->custom_capabilities, &m->has_custom_capabilities,
			   &m->n_custom_capabilities, &m->custom_capabilities);
	if (r == 0)
		r = ar_custom_message(a, p->custom_message, &m->has_custom_message,
				      &m->custom_message);
	return r;
}

/* Steps 1-2 shared by both decoders: returns the unpacked message or NULL with *rc set. */
static ProtobufCMessage *unpack_capped(const ProtobufCMessageDescriptor *d, const uint8_t *data,
				       size_t len, struct pb_capped_alloc *ca, int *rc,
				       struct pf_error *err)
{
	/* the top message is depth 1 here, depth 0 in pb_wire_scan */
	int r = pb_wire_scan(d, data, len, PF_OPAMP_MAX_WIRE_DEPTH - 1);
	if (r == -ELOOP) {
		*rc =
		    pf_error_set(err, -EBADMSG, d->short_name,
				 "messages nested deeper than %d levels", PF_OPAMP_MAX_WIRE_DEPTH);
		return NULL;
	}
	if (r < 0) {
		*rc = pf_error_set(err, -EBADMSG, d->short_name, "malformed protobuf encoding");
		return NULL;
	}
	ProtobufCMessage *msg = protobuf_c_message_unpack(d, &ca->a, len, data);
	if (!msg) {
		if (ca->exceeded)
			*rc = pf_error_set(err, -E2BIG, d->short_name,
					   "decoded message exceeds %zu bytes", ca->max);
		else
			*rc = pf_error_set(err, -EBADMSG, d->short_name, "not a valid %s message",
					   d->short_name);
	}
	return msg;
}

/* Allocates the arena of `size` bytes after checking it against max_bytes. */
static int arena_new(struct arena *a, size_t size, size_t max, const char *what,
		     struct pf_error *err)
{
	if (size > max)
		return pf_error_set(err, -E2BIG, what, "decoded message exceeds %zu bytes", max);
	a->base = calloc(1, size);
	if (!a->base)
		return pf_error_set(err, -ENOMEM, what, "out of memory");
	a->used = 0;
	a->cap = size;
	return 0;
}

/* Fast path for the message a connected agent sends most: a heartbeat or a status-compressed
 * report that carries only instance_uid, sequence_num, capabilities, flags and, possibly, an
 * empty agent_disconnect. It is decoded straight into the plain struct (one allocation, no
 * protobuf-c), with exactly the result the general path gives for the same bytes. Anything
 * else (another field, a repeated field, a tag or length that is not the canonical single-byte
 * form, a uid longer than 16 bytes, an unusually small byte cap) is left to the general path,
 * which also produces every error. Returns 1 when decoded into *m (all of it written), 0 to
 * fall back (*m may have been written). */
#define A2S_FAST_MIN_CAP 1024 /* the general path needs well under this for such a message */
_Static_assert(sizeof(pb_a2s) + sizeof(Opamp__Proto__V1__AgentDisconnect) + PF_OPAMP_UID_LEN +
			   64 <= A2S_FAST_MIN_CAP &&
		       sizeof(struct pf_a2s) + AR_ALIGN <= A2S_FAST_MIN_CAP,
	       "A2S_FAST_MIN_CAP must cover what the general path allocates");

static int a2s_decode_fast(const uint8_t *p, size_t len, size_t max_bytes, struct pf_a2s *m)
{
	enum { SEEN_UID = 1, SEEN_SEQ = 2, SEEN_CAPS = 4, SEEN_FLAGS = 8, SEEN_DISC = 16 };
	uint8_t uid[PF_OPAMP_UID_LEN] = {0};
	size_t uid_len = 0;
	uint64_t seq = 0, caps = 0, flags = 0;
	unsigned seen = 0;
	size_t i = 0;

	if (max_bytes < A2S_FAST_MIN_CAP)
		return 0;
	while (i < len) {
		uint8_t tag = p[i++];
		uint64_t v;
		unsigned bit;
		switch (tag) {
		case 1 << 3 | WT_LEN: /* instance_uid */
			if (i >= len || p[i] > PF_OPAMP_UID_LEN || p[i] > len - i - 1 ||
			    (seen & SEEN_UID))
				return 0;
			uid_len = p[i++];
			if (uid_len == PF_OPAMP_UID_LEN) /* the usual length: a fixed-size copy */
				memcpy(uid, p + i, PF_OPAMP_UID_LEN);
			else
				memcpy(uid, p + i, uid_len);
			i += uid_len;
			seen |= SEEN_UID;
			continue;
		case 9 << 3 | WT_LEN: /* agent_disconnect, an empty message */
			if (i >= len || p[i] != 0 || (seen & SEEN_DISC))
				return 0;
			i++;
			seen |= SEEN_DISC;
			continue;
		case 2 << 3 | WT_VARINT:
			bit = SEEN_SEQ;
			break;
		case 4 << 3 | WT_VARINT:
			bit = SEEN_CAPS;
			break;
		case 10 << 3 | WT_VARINT:
			bit = SEEN_FLAGS;
			break;
		default:
			return 0;
		}
		const uint8_t *q = p + i;
		if ((seen & bit) || pb_varint_read(&q, p + len, &v) < 0)
			return 0;
		i = (size_t)(q - p);
		seen |= bit;
		if (bit == SEEN_SEQ)
			seq = v;
		else if (bit == SEEN_CAPS)
			caps = v;
		else
			flags = v;
	}
	memset(m, 0, sizeof(*m));
	memcpy(m->instance_uid, uid, PF_OPAMP_UID_LEN); /* zero past uid_len */
	m->instance_uid_len = uid_len;
	m->sequence_num = seq;
	m->capabilities = caps;
	m->flags = flags;
	m->has_disconnect = seen & SEEN_DISC;
	return 1;
}

/* Steps 1-4 shared by both decoders: unpack under the byte cap, the sizing pass, one arena
 * for the whole result, the fill pass. *out receives the arena's first struct (out_size bytes),
 * which is also the pointer to free. */
static int decode_general(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t len,
			  size_t max_bytes, size_t out_size,
			  int (*size)(struct sizer *s, const ProtobufCMessage *msg),
			  int (*fill)(struct arena *a, struct pf_buf *scratch,
				      const ProtobufCMessage *msg, void *out),
			  void **out, struct pf_error *err)
{
	struct pb_capped_alloc ca;
	struct sizer s = {.max = max_bytes, .err = err};
	struct arena a = {0};
	int r = 0;

	pb_capped_alloc_init(&ca, max_bytes);
	ProtobufCMessage *msg =
	    unpack_capped(d, data ? data : (const uint8_t *)"", len, &ca, &r, err);
	if (!msg) {
		pb_capped_alloc_release(&ca);
		return r;
	}

	pf_buf_init(&s.scratch, max_bytes);
	r = size(&s, msg);
	if (r == -E2BIG || r == -ENOMEM) /* only attribute rendering fails this way */
		pf_error_set(err, r, d->short_name, "attribute rendering: %s", strerror(-r));
	if (r == 0)
		r = arena_new(&a, s.total, max_bytes, d->short_name, err);
	if (r == 0) {
		void *m = ar_alloc(&a, out_size);
		r = m ? fill(&a, &s.scratch, msg, m) : -ENOMEM;
		if (r == 0)
			*out = m;
		else
			free(a.base);
	}
	pf_buf_release(&s.scratch);
	pb_capped_alloc_release(&ca);
	return r;
}

int pf_a2s_decode(const uint8_t *data, size_t len, size_t max_bytes, struct pf_a2s **out,
		  struct pf_error *err)
{
	const ProtobufCMessageDescriptor *d = &opamp__proto__v1__agent_to_server__descriptor;

	if (!out || (!data && len))
		return -EINVAL;
	struct pf_a2s small;
	if (a2s_decode_fast(data ? data : (const uint8_t *)"", len, max_bytes, &small)) {
		/* malloc + copy rather than calloc: glibc's calloc skips the thread cache. */
		struct pf_a2s *m = malloc(ar_round(sizeof(*m)));
		if (!m)
			return pf_error_set(err, -ENOMEM, d->short_name, "out of memory");
		memcpy(m, &small, sizeof(*m)); /* padding too: both are zeroed the same way */
		*out = m;
		return 0;
	}
	void *m = NULL;
	int r = decode_general(d, data, len, max_bytes, sizeof(**out), a2s_size, a2s_fill, &m,
			       err);
	if (r == 0)
		*out = m;
	return r;
}

int pf_a2s_decode_small(const uint8_t *data, size_t len, size_t max_bytes, struct pf_a2s *small,
			struct pf_a2s **out, struct pf_error *err)
{
	if (!small || !out || (!data && len))
		return -EINVAL;
	if (a2s_decode_fast(data ? data : (const uint8_t *)"", len, max_bytes, small)) {
		*out = small;
		return 0;
	}
	return pf_a2s_decode(data, len, max_bytes, out, err);
}

void pf_a2s_release(struct pf_a2s *small, struct pf_a2s *m)
{
	if (m != small)
		pf_a2s_free(m);
}

int pf_s2a_decode(const uint8_t *data, size_t len, size_t max_bytes, struct pf_s2a **out,
		  struct pf_error *err)
{
	if (!out || (!data && len))
		return -EINVAL;
	void *m = NULL;
	int r = decode_general(&opamp__proto__v1__server_to_agent__descriptor, data, len,
			       max_bytes, sizeof(**out), s2a_size, s2a_fill, &m, err);
	if (r == 0)
		*out = m;
	return r;
}

void pf_a2s_free(struct pf_a2s *m)
{
	free(m); /* the struct is the start of its arena */
}

void pf_s2a_free(struct pf_s2a *m)
{
	free(m);
}

/* ---------------------------------------------------------------------------------------- */
/* WebSocket framing (opamp spec, "WebSocket Message Format": a varint header, currently     */
/* always 0, then the AgentToServer/ServerToAgent bytes).                                    */

int pf_opamp_ws_unframe(const uint8_t *msg, size_t msg_len, const uint8_t **data, size_t *len)
{
	uint64_t header;
	if (!msg && msg_len)
		return -EINVAL;
	if (!msg_len)
		return -EBADMSG; /* no header */
	const uint8_t *p = msg, *end = msg + msg_len;
	if (pb_varint_read(&p, end, &header) < 0 || header != 0)
		return -EBADMSG;
	*data = p;
	*len = (size_t)(end - p);
	return 0;
}

int pf_opamp_ws_frame_header(struct pf_buf *out)
{
	return pf_buf_putc(out, 0);
}

const struct pf_health *pf_health_child(const struct pf_health *h, const char *name)
{
	if (!h || !name)
		return NULL;
	for (size_t i = 0; i < h->n_children; i++)
		if (h->children[i].name && strcmp(h->children[i].name, name) == 0)
			return &h->children[i].health;
	return NULL;
}