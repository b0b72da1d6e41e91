/* session.c — see session.h. */
#include "session.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <jansson.h>

#include "fleet/capture.h"
#include "fleet/fleet.h"
#include "opamp/credential.h"
#include "metrics.h"
#include "opamp_codec.h"
#include "pf/capture_msg.h"
#include "pf/log.h"
#include "pf/uuid.h"

#define SERVER_CAPS                                                                                \
	(PF_SERVER_CAP_ACCEPTS_STATUS | PF_SERVER_CAP_OFFERS_REMOTE_CONFIG |                       \
	 PF_SERVER_CAP_ACCEPTS_EFFECTIVE_CONFIG | PF_SERVER_CAP_OFFERS_CONNECTION_SETTINGS)

#define PROFILING_CONFIG_KEY "profiling.yaml"
#define PROFILING_CONTENT_TYPE "text/yaml"

static json_t *health_to_json(const struct pf_health *h, int depth)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	json_object_set_new(o, "healthy", json_boolean(h->healthy));
	if (h->status && *h->status)
		json_object_set_new(o, "status", json_string(h->status));
	if (h->last_error && *h->last_error)
		json_object_set_new(o, "last_error", json_string(h->last_error));
	if (h->start_time_unix_nano)
		json_object_set_new(o, "start_time_unix_nano",
				    json_integer((json_int_t)h->start_time_unix_nano));
	if (h->status_time_unix_nano)
		json_object_set_new(o, "status_time_unix_nano",
				    json_integer((json_int_t)h->status_time_unix_nano));
	if (h->n_children && depth < 8) {
		json_t *c = json_object();
		for (size_t i = 0; c && i < h->n_children; i++) {
			json_t *child = health_to_json(&h->children[i].health, depth + 1);
			if (child)
				json_object_set_new(c, h->children[i].name ? h->children[i].name : "",
						    child);
		}
		if (c)
			json_object_set_new(o, "components", c);
	}
	return o;
}

static int encode_reply(struct pf_opamp_ctx *ctx, const struct pf_s2a *m, struct pf_buf *out)
{
	int r = pf_s2a_encode(m, out);
	if (r == 0 && ctx->metrics)
		ctx->metrics->opamp_messages_out++;
	return r;
}

static int reply_error(struct pf_opamp_ctx *ctx, const uint8_t *uid, size_t uid_len,
		       enum pf_server_error_type type, const char *msg, struct pf_buf *out)
{
	struct pf_s2a m = {0};
	if (uid && uid_len == PF_OPAMP_UID_LEN) {
		memcpy(m.instance_uid, uid, PF_OPAMP_UID_LEN);
		m.instance_uid_len = PF_OPAMP_UID_LEN;
	}
	/* With error_response set, every other field stays unset. */
	m.has_error = true;
	m.error_type = type;
	m.error_message = (char *)msg;
	return encode_reply(ctx, &m, out);
}

static void fill_remote_config(struct pf_s2a *m, struct pf_config_file *file,
			       const struct pf_agent *a)
{
	file->name = (char *)PROFILING_CONFIG_KEY;
	file->body = (uint8_t *)a->desired->body;
	file->body_len = a->desired->body_len;
	file->content_type = (char *)PROFILING_CONTENT_TYPE;
	m->has_remote_config = true;
	m->remote_config.n_files = 1;
	m->remote_config.files = file;
	m->remote_config_hash = (uint8_t *)a->desired->hash;
	m->remote_config_hash_len = 32;
}

/* Whether a's desired config goes into a message on this session: the agent does not run it
 * yet and, on a WebSocket, it was not sent on this connection already. */
static bool config_due(const struct pf_opamp_session *s, const struct pf_agent *a)
{
	if (!pf_agent_needs_config(a))
		return false;
	return !s || s->http || !s->config_sent ||
	       memcmp(s->config_sent_hash, a->desired->hash, 32) != 0;
}

static void config_mark_sent(struct pf_opamp_session *s, const struct pf_agent *a)
{
	if (!s || s->http)
		return;
	memcpy(s->config_sent_hash, a->desired->hash, 32);
	s->config_sent = true;
}

int pf_opamp_build_push(struct pf_opamp_ctx *ctx, struct pf_opamp_session *sess,
			struct pf_agent *a, struct pf_buf *out)
{
	struct pf_s2a m = {0};
	struct pf_config_file file;
	memcpy(m.instance_uid, a->uid, 16);
	m.instance_uid_len = 16;
	m.capabilities = SERVER_CAPS;
	if (!config_due(sess, a))
		return -EALREADY;
	fill_remote_config(&m, &file, a);
	int r = encode_reply(ctx, &m, out);
	if (r == 0) {
		config_mark_sent(sess, a);
		if (ctx->metrics)
			ctx->metrics->config_pushes++;
	}
	return r;
}

/* Issues a credential for a and fills the Authorization header that carries it. */
static int offer_credential(struct pf_opamp_ctx *ctx, struct pf_agent *a, uint64_t heartbeat_s,
			    int64_t now_ms, struct pf_credential_offer *o, struct pf_kv *h)
{
	int r = pf_credential_issue(ctx->store, a->uid, heartbeat_s, now_ms, o);
	if (r < 0) {
		pf_log_warn("opamp: cannot issue a credential: %s", strerror(-r));
		return r;
	}
	h->key = (char *)"Authorization";
	h->value = o->authorization;
	a->credential = PF_CRED_OFFERED;
	return 0;
}

int pf_opamp_build_offer(struct pf_opamp_ctx *ctx, struct pf_agent *a, int64_t now_ms,
			 struct pf_buf *out)
{
	struct pf_s2a m = {0};
	struct pf_credential_offer offer;
	struct pf_kv h;
	if (!(a->capabilities & PF_AGENT_CAP_ACCEPTS_OPAMP_CONNECTION_SETTINGS))
		return -EOPNOTSUPP;
	if (!ctx->store)
		return -ENOTSUP;
	memcpy(m.instance_uid, a->uid, 16);
	m.instance_uid_len = 16;
	m.capabilities = SERVER_CAPS;
	m.has_heartbeat_interval = true;
	m.heartbeat_interval_seconds = pf_fleet_heartbeat_s(ctx->fleet);
	int r = offer_credential(ctx, a, m.heartbeat_interval_seconds, now_ms, &offer, &h);
	if (r < 0)
		return r;
	m.n_opamp_headers = 1;
	m.opamp_headers = &h;
	m.connection_settings_hash = offer.hash;
	m.connection_settings_hash_len = 32;
	r = encode_reply(ctx, &m, out);
	explicit_bzero(offer.authorization, sizeof(offer.authorization));
	return r;
}

/* Binds the session to an agent record, handling uids already connected elsewhere. A
 * session on a per-agent credential whose agent is live on another WebSocket is not bound
 * (*dup set), nor one whose claim the store cannot check now (*dup set too: UNAVAILABLE). */
static struct pf_agent *bind_agent(struct pf_opamp_ctx *ctx, struct pf_opamp_session *s,
				   const struct pf_a2s *in, int64_t now_ms, bool *new_uid,
				   bool *dup)
{
	*new_uid = false;
	*dup = false;
	if (s->agent) {
		/* Before the agent adopts an assigned uid it may still use the old one. */
		if (memcmp(in->instance_uid, s->agent->uid, 16) == 0 ||
		    (s->claimed && memcmp(in->instance_uid, s->claimed_uid, 16) == 0))
			return s->agent;
		/* The peer switched uids on its own: treat it as a new binding. */
		pf_agent_set_disconnected(ctx->fleet, s->agent);
		s->agent = NULL;
	}
	struct pf_agent *a = pf_fleet_get_or_add(ctx->fleet, in->instance_uid, now_ms);
	if (!a)
		return NULL;
	bool busy = a->connected && a->transport == PF_TRANSPORT_WS && a->conn &&
		    a->conn != s->conn;
	if (busy && s->cred_bound) {
		*dup = true; /* one credential, two processes: the live one keeps the record */
		return NULL;
	}
	/* A shared token may not wear the identity of an agent that has its own credential. */
	int used = !busy && !s->cred_bound && ctx->store ? pf_credential_in_use(ctx->store, a->uid)
							 : 0;
	if (used < 0) {
		*dup = true;
		return NULL;
	}
	busy |= used > 0;
	if (busy) {
		/* A second live connection (or a plain-HTTP request) claims the uid of an
		 * agent connected over WebSocket. Give the newcomer a fresh identity rather
		 * than letting two processes share (or one overwrite) one record. */
		uint8_t fresh[16];
		if (pf_uuid_v7(fresh) < 0)
			return NULL;
		struct pf_agent *b = pf_fleet_get_or_add(ctx->fleet, fresh, now_ms);
		if (!b)
			return NULL;
		memcpy(s->claimed_uid, in->instance_uid, 16);
		s->claimed = true;
		*new_uid = true;
		if (ctx->metrics)
			ctx->metrics->opamp_duplicate_uids++;
		char u1[37], u2[37];
		pf_uuid_format(in->instance_uid, u1);
		pf_uuid_format(fresh, u2);
		pf_log_warn("opamp: instance_uid %s is already connected; assigning %s", u1, u2);
		a = b;
	}
	s->agent = a;
	return a;
}

static bool first_message_incomplete(const struct pf_a2s *in, const struct pf_agent *a)
{
	/* What we lack and the message does not bring. */
	if (!in->has_description && !a->has_description)
		return true;
	if ((in->capabilities & PF_AGENT_CAP_REPORTS_HEALTH) && !in->has_health && !a->has_health)
		return true;
	if ((in->capabilities & PF_AGENT_CAP_REPORTS_EFFECTIVE_CONFIG) &&
	    !in->has_effective_config && !a->effective)
		return true;
	if ((in->capabilities & PF_AGENT_CAP_REPORTS_REMOTE_CONFIG) &&
	    !in->has_remote_config_status && !a->has_reported_hash)
		return true;
	return false;
}

static int apply_status(struct pf_opamp_ctx *ctx, struct pf_agent *a, const struct pf_a2s *in)
{
	struct pf_fleet *f = ctx->fleet;
	int r = 0;

	if (in->has_description) {
		size_t n = in->n_identifying + in->n_non_identifying;
		const char **k = calloc(n ? n : 1, sizeof(*k));
		const char **v = calloc(n ? n : 1, sizeof(*v));
		if (!k || !v) {
			free(k);
			free(v);
			return -ENOMEM;
		}
		size_t j = 0;
		for (size_t i = 0; i < in->n_identifying; i++, j++) {
			k[j] = in->identifying[i].key ? in->identifying[i].key : "";
			v[j] = in->identifying[i].value ? in->identifying[i].value : "";
		}
		for (size_t i = 0; i < in->n_non_identifying; i++, j++) {
			k[j] = in->non_identifying[i].key ? in->non_identifying[i].key : "";
			v[j] = in->non_identifying[i].value ? in->non_identifying[i].value : "";
		}
		r = pf_agent_set_attributes(f, a, k, v, n);
		free(k);
		free(v);
		if (r < 0)
			return r;
	}
	if (in->has_health) {
		json_t *h = health_to_json(&in->health, 0);
		char *s = h ? json_dumps(h, JSON_COMPACT) : NULL;
		json_decref(h);
		r = pf_agent_set_health(f, a, in->health.healthy, s);
		free(s);
		if (r < 0)
			return r;
	}
	if (in->has_effective_config) {
		const struct pf_config_file *file = NULL;
		for (size_t i = 0; i < in->effective_config.n_files; i++)
			if (in->effective_config.files[i].name &&
			    strcmp(in->effective_config.files[i].name, PROFILING_CONFIG_KEY) == 0)
				file = &in->effective_config.files[i];
		if (!file && in->effective_config.n_files)
			file = &in->effective_config.files[0];
		r = pf_agent_set_effective(f, a, file ? (const char *)file->body : "",
					   file ? file->body_len : 0);
		if (r < 0)
			return r;
	}
	if (in->has_remote_config_status) {
		r = pf_agent_set_remote_status(f, a, in->rcs_last_hash, in->rcs_last_hash_len,
					       (int)in->rcs_status, in->rcs_error_message);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The description's attributes within PF_OPAMP_MAX_ATTRS, PF_OPAMP_MAX_ATTR_KEY,
 * PF_OPAMP_MAX_ATTR_VALUE and PF_OPAMP_MAX_DESCRIPTION_BYTES; else false and msg says which. */
static bool description_ok(const struct pf_a2s *in, char *msg, size_t msg_len)
{
	size_t n = in->n_identifying + in->n_non_identifying;
	if (n > PF_OPAMP_MAX_ATTRS) {
		snprintf(msg, msg_len, "agent_description: %zu attributes; at most %d", n,
			 PF_OPAMP_MAX_ATTRS);
		return false;
	}
	size_t total = 0;
	for (size_t i = 0; i < n; i++) {
		const struct pf_kv *kv = i < in->n_identifying
					     ? &in->identifying[i]
					     : &in->non_identifying[i - in->n_identifying];
		size_t kl = kv->key ? strlen(kv->key) : 0, vl = kv->value ? strlen(kv->value) : 0;
		if (kl > PF_OPAMP_MAX_ATTR_KEY || vl > PF_OPAMP_MAX_ATTR_VALUE) {
			snprintf(msg, msg_len,
				 "agent_description: attribute '%.64s%s' has a %zu-byte %s; at most "
				 "%d",
				 kv->key ? kv->key : "", kl > 64 ? "..." : "",
				 kl > PF_OPAMP_MAX_ATTR_KEY ? kl : vl,
				 kl > PF_OPAMP_MAX_ATTR_KEY ? "key" : "value",
				 kl > PF_OPAMP_MAX_ATTR_KEY ? PF_OPAMP_MAX_ATTR_KEY
							    : PF_OPAMP_MAX_ATTR_VALUE);
			return false;
		}
		total += kl + vl;
	}
	if (total > PF_OPAMP_MAX_DESCRIPTION_BYTES) {
		snprintf(msg, msg_len, "agent_description: %zu bytes of keys and values; at most %d",
			 total, PF_OPAMP_MAX_DESCRIPTION_BYTES);
		return false;
	}
	return true;
}

int pf_opamp_session_handle(struct pf_opamp_ctx *ctx, struct pf_opamp_session *s,
			    const uint8_t *data, size_t len, int64_t now_ms, struct pf_buf *out,
			    struct pf_opamp_result *res)
{
	/* Not "= {0}": that clears a kilobyte per message; pf_error_set() needs code == 0 and
	 * the reply below reads msg only when it was set. */
	struct pf_error err;
	err.code = 0;
	err.path[0] = 0;
	err.msg[0] = 0;
	struct pf_a2s small, *in = NULL; /* a heartbeat decodes into small: no allocation */
	memset(res, 0, sizeof(*res));
	if (ctx->metrics)
		ctx->metrics->opamp_messages_in++;

	size_t dmax = ctx->max_message_bytes <= SIZE_MAX / PF_OPAMP_DECODED_FACTOR
			      ? ctx->max_message_bytes * PF_OPAMP_DECODED_FACTOR
			      : SIZE_MAX;
	int r = pf_a2s_decode_small(data, len, dmax, &small, &in, &err);
	if (r < 0) {
		res->bad_request = true;
		if (ctx->metrics)
			ctx->metrics->opamp_bad_messages++;
		const uint8_t *uid = s->agent ? s->agent->uid : NULL;
		return reply_error(ctx, uid, uid ? 16 : 0, PF_SERR_BAD_REQUEST,
				   err.msg[0] ? err.msg : "undecodable AgentToServer", out);
	}
	if (in->instance_uid_len != PF_OPAMP_UID_LEN) {
		res->bad_request = true;
		if (ctx->metrics)
			ctx->metrics->opamp_bad_messages++;
		char msg[96];
		snprintf(msg, sizeof(msg), "instance_uid must be 16 bytes, got %zu",
			 in->instance_uid_len);
		r = reply_error(ctx, NULL, 0, PF_SERR_BAD_REQUEST, msg, out);
		pf_a2s_release(&small, in);
		return r;
	}
	char msg[160];
	if (in->has_description && !description_ok(in, msg, sizeof(msg))) {
		/* Attributes are kept per agent and matched by every selector: bounded. */
		res->bad_request = true;
		if (ctx->metrics)
			ctx->metrics->opamp_bad_messages++;
		r = reply_error(ctx, in->instance_uid, 16, PF_SERR_BAD_REQUEST, msg, out);
		pf_a2s_release(&small, in);
		return r;
	}
	if (!(in->capabilities & PF_AGENT_CAP_REPORTS_STATUS) && ctx->metrics)
		pf_log_debug("opamp: agent does not set ReportsStatus");

	if (s->cred_bound && memcmp(in->instance_uid, s->cred_uid, 16) != 0) {
		char u[PF_UUID_STR_LEN + 1];
		res->bad_request = true;
		pf_uuid_format(s->cred_uid, u);
		snprintf(msg, sizeof(msg), "this credential belongs to agent %s", u);
		r = reply_error(ctx, in->instance_uid, 16, PF_SERR_BAD_REQUEST, msg, out);
		pf_a2s_release(&small, in);
		return r;
	}
	bool new_uid, dup;
	struct pf_agent *a = bind_agent(ctx, s, in, now_ms, &new_uid, &dup);
	if (!a) {
		r = reply_error(ctx, in->instance_uid, 16, PF_SERR_UNAVAILABLE,
				dup ? "this agent is connected already, or its identity cannot be "
				      "checked now"
				    : "controller out of memory",
				out);
		pf_a2s_release(&small, in);
		return r;
	}

	/* Plain HTTP has no connection: an agent that was not connected starts a new one. */
	bool first_on_conn = s->http ? !a->connected : !s->replied;
	bool full_state = false;
	if (a->seq_valid && in->sequence_num != a->last_seq + 1 && !first_on_conn)
		full_state = true; /* a gap means we may have missed a delta: ask for the full state */
	if (first_on_conn && (!a->seq_valid || in->sequence_num != a->last_seq + 1) &&
	    first_message_incomplete(in, a))
		full_state = true;
	if (new_uid)
		full_state = true;
	a->last_seq = in->sequence_num;
	a->seq_valid = true;
	a->capabilities = in->capabilities;
	if (in->has_custom_capabilities) {
		bool cap = false;
		for (size_t i = 0; i < in->n_custom_capabilities; i++)
			cap |= in->custom_capabilities[i] &&
			       strcmp(in->custom_capabilities[i], PF_CAPTURE_CAPABILITY) == 0;
		a->capture_capable = cap;
	}

	r = apply_status(ctx, a, in);
	if (r < 0)
		pf_log_warn("opamp: could not record agent status: %s", strerror(-r));

	if (in->has_disconnect) {
		res->disconnect = true;
		pf_agent_set_disconnected(ctx->fleet, a);
		pf_agent_touch(ctx->fleet, a, now_ms);
	} else {
		pf_agent_set_connected(ctx->fleet, a, s->http ? PF_TRANSPORT_HTTP : PF_TRANSPORT_WS,
				       s->conn, now_ms);
		pf_agent_touch(ctx->fleet, a, now_ms);
	}

	if (ctx->captures && in->has_custom_message)
		pf_captures_on_custom(ctx->captures, a, in->custom_message.capability,
				      in->custom_message.type, in->custom_message.data,
				      in->custom_message.data_len, now_ms);
	if (ctx->captures && !res->disconnect)
		pf_captures_agent_seen(ctx->captures, a, first_on_conn, now_ms);

	struct pf_s2a m = {0};
	struct pf_config_file file;
	static char *server_custom[] = {(char *)PF_CAPTURE_CAPABILITY};
	memcpy(m.instance_uid, in->instance_uid, 16); /* echo what the agent sent */
	m.instance_uid_len = 16;
	m.capabilities = SERVER_CAPS;
	if (full_state)
		m.flags |= PF_S2A_FLAG_REPORT_FULL_STATE;
	if (new_uid) {
		m.has_new_instance_uid = true;
		memcpy(m.new_instance_uid, a->uid, 16);
	}
	bool with_config = !res->disconnect && config_due(s, a);
	if (with_config) {
		fill_remote_config(&m, &file, a);
		if (ctx->metrics)
			ctx->metrics->config_pushes++;
	}
	struct pf_credential_offer offer;
	struct pf_kv auth_header;
	bool settings = (in->capabilities & PF_AGENT_CAP_ACCEPTS_OPAMP_CONNECTION_SETTINGS) != 0;
	a->credential = s->cred_bound ? PF_CRED_OWN
			: a->credential == PF_CRED_OFFERED && !first_on_conn ? PF_CRED_OFFERED
									     : PF_CRED_ENROLLMENT;
	if (first_on_conn && !res->disconnect && settings) {
		m.has_heartbeat_interval = true;
		m.heartbeat_interval_seconds = pf_fleet_heartbeat_s(ctx->fleet);
		if (s->cred_bound) {
			/* The settings it holds: the same hash, no header to change. */
			pf_credential_settings_hash(m.heartbeat_interval_seconds, s->cred_hash,
						    offer.hash);
			m.connection_settings_hash = offer.hash;
			m.connection_settings_hash_len = 32;
		} else if (ctx->store && offer_credential(ctx, a, m.heartbeat_interval_seconds,
							  now_ms, &offer, &auth_header) == 0) {
			m.n_opamp_headers = 1;
			m.opamp_headers = &auth_header;
			m.connection_settings_hash = offer.hash;
			m.connection_settings_hash_len = 32;
		}
	}
	if (ctx->captures && first_on_conn) {
		m.has_custom_capabilities = true;
		m.n_custom_capabilities = 1;
		m.custom_capabilities = server_custom;
	}
	const char *ctype;
	const uint8_t *cdata;
	size_t clen;
	if (ctx->captures && !res->disconnect &&
	    pf_captures_owed(ctx->captures, a, now_ms, &ctype, &cdata, &clen)) {
		m.has_custom_message = true;
		m.custom_message.capability = (char *)PF_CAPTURE_CAPABILITY;
		m.custom_message.type = (char *)ctype;
		m.custom_message.data = (uint8_t *)cdata;
		m.custom_message.data_len = clen;
	}
	r = encode_reply(ctx, &m, out);
	if (m.n_opamp_headers)
		explicit_bzero(offer.authorization, sizeof(offer.authorization));
	if (r == 0 && with_config)
		config_mark_sent(s, a);
	s->replied = true;
	pf_a2s_release(&small, in);
	return r;
}

uint64_t pf_opamp_server_caps(void)
{
	return SERVER_CAPS;
}

void pf_opamp_session_closed(struct pf_opamp_ctx *ctx, struct pf_opamp_session *s)
{
	if (s->agent && s->agent->conn == s->conn && !s->http)
		pf_agent_set_disconnected(ctx->fleet, s->agent);
	s->agent = NULL;
}
