/* opamp_session.c — see opamp_session.h. The rules are those of the OpAMP specification
 * v0.18.0, written out where they apply. */
#include "opamp/opamp_session.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "config.h"
#include "description.h"
#include "health.h"
#include "pf/clock.h"
#include "pf/log.h"
#include "pf/uuid.h"
#include "state.h"
#include "triggers/capture.h"

struct agent_session {
	struct agent_state *state;
	struct agent_config *config;
	struct agent_health *health;

	uint64_t seq;
	uint64_t heartbeat_s;
	size_t max_msg;

	/* What the current connection has been told. */
	bool full_pending;
	bool desc_dirty;
	uint64_t sent_health_gen;
	uint64_t sent_health_state_gen;
	uint64_t health_sent_ms; /* monotonic: when health was last reported */
	uint64_t figures_ms;	 /* figures alone wait this long after the last health report */
	uint64_t sent_config_gen;
	uint64_t sent_status_gen;

	struct agent_captures *captures; /* NULL: no capture capability */
	uint64_t capture_errors;

	/* A credential offered (connection_settings), not yet verified: owned, zeroed. */
	char *offer_token;
	uint8_t offer_hash[AGENT_STATE_MAX_HASH];
	size_t offer_hash_len;
};

struct agent_session *agent_session_new(struct agent_state *state, struct agent_config *config,
					struct agent_health *health, uint64_t heartbeat_s)
{
	struct agent_session *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->state = state;
	s->config = config;
	s->health = health;
	s->heartbeat_s = heartbeat_s;
	s->max_msg = PF_OPAMP_DEFAULT_MAX_MSG;
	s->figures_ms = AGENT_SESSION_FIGURES_MS;
	s->full_pending = true;
	s->desc_dirty = true;
	return s;
}

void agent_session_free(struct agent_session *s)
{
	if (s)
		agent_session_drop_offer(s);
	free(s);
}

/* ---- connection settings offers ------------------------------------------------------------ */

bool agent_session_offer(const struct agent_session *s, const char **token)
{
	if (!s->offer_token)
		return false;
	*token = s->offer_token;
	return true;
}

void agent_session_drop_offer(struct agent_session *s)
{
	if (s->offer_token) {
		explicit_bzero(s->offer_token, strlen(s->offer_token));
		free(s->offer_token);
	}
	s->offer_token = NULL;
	s->offer_hash_len = 0;
}

int agent_session_accept_offer(struct agent_session *s, struct pf_error *err)
{
	if (!s->offer_token)
		return pf_error_set(err, -ENOENT, "", "no credential offered");
	int r = agent_state_save_credential(s->state, s->offer_token, s->offer_hash,
					    s->offer_hash_len, err);
	agent_session_drop_offer(s);
	return r;
}

/* OpAMP "Offers of Connection Settings": connection_settings.opamp with an Authorization
 * header is a credential for this agent. It is kept aside until the transport has connected
 * with it (the agent MUST verify offered OpAMP settings by connecting before it accepts
 * them); an offer whose hash is the one of the credential held, or without such a header
 * (the settings are unchanged then), changes nothing. */
static void take_offer(struct agent_session *s, const struct pf_s2a *m,
		       struct agent_session_action *act)
{
	const char *tok = NULL, *held;
	const uint8_t *hh;
	size_t hl;
	for (size_t i = 0; i < m->n_opamp_headers; i++)
		if (m->opamp_headers[i].key && !strcasecmp(m->opamp_headers[i].key, "authorization"))
			tok = m->opamp_headers[i].value;
	if (!tok)
		return;
	if (strncasecmp(tok, "Bearer ", 7) != 0 || !tok[7] ||
	    m->connection_settings_hash_len > AGENT_STATE_MAX_HASH) {
		pf_log_warn("opamp: ignoring offered connection settings: the Authorization is not "
			    "a bearer token");
		return;
	}
	if (agent_state_credential(s->state, &held, &hh, &hl) && hl &&
	    hl == m->connection_settings_hash_len && !memcmp(hh, m->connection_settings_hash, hl))
		return;
	agent_session_drop_offer(s);
	s->offer_token = strdup(tok + 7);
	if (!s->offer_token)
		return;
	if (m->connection_settings_hash_len)
		memcpy(s->offer_hash, m->connection_settings_hash, m->connection_settings_hash_len);
	s->offer_hash_len = m->connection_settings_hash_len;
	act->credential_offered = true;
	pf_log_info("opamp: the server offers this agent a credential of its own; verifying it");
}

void agent_session_on_connect(struct agent_session *s)
{
	s->full_pending = true; /* every connection starts with a full status report */
	if (s->captures)
		agent_captures_on_connect(s->captures);
}

void agent_session_set_captures(struct agent_session *s, struct agent_captures *c)
{
	s->captures = c;
}

bool agent_session_has_capture_news(struct agent_session *s)
{
	return s->captures && agent_captures_has_news(s->captures);
}

uint64_t agent_session_capture_errors(const struct agent_session *s)
{
	return s->capture_errors;
}

void agent_session_description_changed(struct agent_session *s)
{
	s->desc_dirty = true;
}

void agent_session_set_figures_interval(struct agent_session *s, uint64_t ms)
{
	s->figures_ms = ms;
}

uint64_t agent_session_figures_interval(const struct agent_session *s)
{
	return s->figures_ms;
}

/* Health is due: a state change (healthy, last_error, a status's words, a component added or
 * gone) at once; figures alone once figures_ms passed since the last report. */
static bool health_due(struct agent_session *s)
{
	if (agent_health_state_generation(s->health) != s->sent_health_state_gen)
		return true;
	return agent_health_generation(s->health) != s->sent_health_gen &&
	       pf_mono_ms() - s->health_sent_ms >= s->figures_ms;
}

static bool status_news(struct agent_session *s)
{
	return agent_config_remote_status(s->config)->status != PF_RCS_UNSET &&
	       agent_config_status_generation(s->config) != s->sent_status_gen;
}

bool agent_session_has_news(struct agent_session *s)
{
	return s->full_pending || s->desc_dirty || health_due(s) ||
	       agent_config_generation(s->config) != s->sent_config_gen || status_news(s) ||
	       (s->captures && agent_captures_has_news(s->captures));
}

int agent_session_build(struct agent_session *s, bool disconnect, struct pf_buf *out)
{
	struct pf_a2s m = {0};
	struct agent_description desc = {0};
	struct pf_buf eff;
	struct pf_config_file eff_file = {0};
	struct pf_buf capture_msg;
	char *capabilities[1] = {(char *)PF_CAPTURE_CAPABILITY};
	bool full = s->full_pending;
	/* the state generation first: a change between the two reads is sent next time */
	uint64_t health_state_gen = agent_health_state_generation(s->health);
	uint64_t health_gen = agent_health_generation(s->health);
	uint64_t config_gen = agent_config_generation(s->config);
	uint64_t status_gen = agent_config_status_generation(s->config);
	const struct agent_remote_status *rs = agent_config_remote_status(s->config);
	int r = 0;

	pf_buf_init(&eff, s->max_msg);
	pf_buf_init(&capture_msg, PF_CAPTURE_MAX_MSG);
	memcpy(m.instance_uid, agent_state_uid(s->state), PF_OPAMP_UID_LEN);
	m.instance_uid_len = PF_OPAMP_UID_LEN;
	m.sequence_num = s->seq;
	m.capabilities = AGENT_CAPABILITIES; /* in every message, undefined bits 0 */

	if (full || s->desc_dirty) {
		size_t n_labels;
		const struct pf_kv_str *labels = agent_config_labels(s->config, &n_labels);
		r = agent_description_build(&desc, agent_state_uid(s->state), labels, n_labels);
		if (r < 0)
			goto out;
		m.has_description = true;
		m.n_identifying = desc.n_identifying;
		m.identifying = desc.identifying;
		m.n_non_identifying = desc.n_non_identifying;
		m.non_identifying = desc.non_identifying;
	}
	if (full || health_due(s)) {
		r = agent_health_build(s->health, &m.health);
		if (r < 0)
			goto out;
		m.has_health = true;
	}
	if ((full || config_gen != s->sent_config_gen) && agent_config_active(s->config)) {
		r = agent_config_effective_yaml(s->config, &eff);
		if (r < 0)
			goto out;
		eff_file.name = (char *)AGENT_REMOTE_CONFIG_KEY;
		eff_file.body = eff.data;
		eff_file.body_len = eff.len;
		eff_file.content_type = (char *)"text/yaml";
		m.has_effective_config = true;
		m.effective_config.n_files = 1;
		m.effective_config.files = &eff_file;
	}
	if ((full || status_gen != s->sent_status_gen) && rs->status != PF_RCS_UNSET) {
		m.has_remote_config_status = true;
		m.rcs_last_hash = (uint8_t *)rs->hash;
		m.rcs_last_hash_len = rs->hash_len;
		m.rcs_status = rs->status;
		m.rcs_error_message = (char *)rs->message;
	}
	m.has_disconnect = disconnect;
	if (s->captures && full) {
		m.has_custom_capabilities = true;
		m.n_custom_capabilities = 1;
		m.custom_capabilities = capabilities;
	}
	/* one capture.status per message; taken from the outbox here (a connection that drops
	 * before it is written gets it again through agent_session_on_connect) */
	struct pf_capture_status cst;
	if (s->captures && !disconnect && agent_captures_next_status(s->captures, &cst)) {
		r = pf_capture_status_encode(&cst, &capture_msg);
		if (r < 0) {
			pf_log_error("opamp: cannot encode the status of capture %s: %s", cst.id,
				     strerror(-r));
		} else {
			m.has_custom_message = true;
			m.custom_message.capability = (char *)PF_CAPTURE_CAPABILITY;
			m.custom_message.type = (char *)PF_CAPTURE_TYPE_STATUS;
			m.custom_message.data = capture_msg.data;
			m.custom_message.data_len = capture_msg.len;
		}
		r = 0;
	}

	size_t before = out->len;
	r = pf_a2s_encode(&m, out);
	if (r == 0 && out->len - before > s->max_msg) {
		out->len = before;
		r = -E2BIG;
	}
	if (r < 0)
		goto out;
	/* Sent (or about to be): mark it reported. */
	s->seq++;
	s->full_pending = false;
	if (m.has_description)
		s->desc_dirty = false;
	if (m.has_health) {
		s->sent_health_gen = health_gen;
		s->sent_health_state_gen = health_state_gen;
		s->health_sent_ms = pf_mono_ms();
	}
	if (m.has_effective_config || !agent_config_active(s->config))
		s->sent_config_gen = config_gen;
	s->sent_status_gen = status_gen;
out:
	agent_description_release(&desc);
	agent_health_tree_release(&m.health);
	pf_buf_release(&eff);
	pf_buf_release(&capture_msg);
	return r;
}

/* A custom message of the capture capability (opamp spec "CustomMessage"; messages of other
 * capabilities are not ours and are ignored). */
static void handle_capture_message(struct agent_session *s, const struct pf_custom_message *cm)
{
	struct pf_error err = {0};
	if (!strcmp(cm->type, PF_CAPTURE_TYPE_REQUEST)) {
		struct pf_capture_request req;
		struct pf_capture_status st;
		int rc = pf_capture_request_decode(cm->data, cm->data_len, &req, &err);
		if (rc < 0) {
			if (req.id[0]) {
				pf_log_warn("capture %s: bad request: %s", req.id, err.msg);
				agent_captures_bad_request(s->captures, req.id, err.msg);
			} else {
				pf_log_warn("capture: a request without a readable id: %s", err.msg);
				s->capture_errors++;
			}
		} else {
			rc = agent_captures_request(s->captures, &req, "on_demand",
						    agent_captures_now_ms(), &st);
			if (rc == 0)
				pf_log_info("capture %s: accepted (%u s at %u Hz)", req.id,
					    req.duration_seconds, req.frequency_hz);
			else if (rc == -EPERM)
				pf_log_warn("capture %s: refused: %s: %s", req.id, st.error_code,
					    st.error);
		}
		pf_capture_request_release(&req);
	} else if (!strcmp(cm->type, PF_CAPTURE_TYPE_CANCEL)) {
		char id[PF_CAPTURE_ID_MAX + 1];
		if (pf_capture_cancel_decode(cm->data, cm->data_len, id, &err) < 0) {
			pf_log_warn("capture: bad cancel: %s", err.msg);
			s->capture_errors++;
		} else if (agent_captures_cancel(s->captures, id) < 0) {
			pf_log_info("capture %s: cancel of an unknown or finished capture", id);
		} else {
			pf_log_info("capture %s: cancel requested", id);
		}
	} else {
		pf_log_warn("capture: unknown message type '%s'", cm->type);
		s->capture_errors++;
	}
}

static void update_config_health(struct agent_session *s)
{
	const struct agent_remote_status *rs = agent_config_remote_status(s->config);
	if (rs->status == PF_RCS_APPLIED)
		agent_health_set(s->health, "config", true, "remote config applied", NULL);
	else if (rs->status == PF_RCS_FAILED)
		agent_health_set(s->health, "config", false,
				 "remote config rejected; running the previous config",
				 rs->message);
}

void agent_session_process(struct agent_session *s, const struct pf_s2a *m,
			   struct agent_session_action *act)
{
	memset(act, 0, sizeof(*act));

	if (m->has_error) {
		/* With error_response set the server leaves every other field unset. */
		if (m->error_type == PF_SERR_UNAVAILABLE) {
			act->reconnect = true;
			if (m->has_retry_after) {
				act->has_retry_after = true;
				act->retry_after_ms = m->retry_after_nanoseconds / 1000000u;
			}
			pf_log_warn("opamp: server unavailable: %s",
				    m->error_message ? m->error_message : "");
		} else {
			/* BAD_REQUEST (and unknown types): do not retry that message. */
			act->bad_request = true;
			pf_log_error("opamp: server rejected our message: %s",
				     m->error_message ? m->error_message : "");
		}
		return;
	}

	if (m->has_new_instance_uid) {
		struct pf_error err = {0};
		char text[PF_UUID_STR_LEN + 1];
		pf_uuid_format(m->new_instance_uid, text);
		if (agent_state_set_uid(s->state, m->new_instance_uid, &err) < 0)
			pf_log_error("opamp: cannot persist the new instance_uid %s: %s", text,
				     err.msg);
		else
			pf_log_info("opamp: server assigned instance_uid %s", text);
		/* Adopted at once either way; state keeps the old on failure,
		 * so the description follows whatever the state holds. */
		s->desc_dirty = true;
	}

	if (m->flags & PF_S2A_FLAG_REPORT_FULL_STATE)
		s->full_pending = true;

	if (m->has_heartbeat_interval && m->heartbeat_interval_seconds != s->heartbeat_s) {
		s->heartbeat_s = m->heartbeat_interval_seconds;
		act->heartbeat_changed = true;
		pf_log_info("opamp: heartbeat interval %llu s", (unsigned long long)s->heartbeat_s);
	}
	if (m->has_heartbeat_interval)
		take_offer(s, m, act);

	if (m->has_remote_config) {
		struct pf_error err = {0};
		int r =
		    agent_config_offer_remote(s->config, &m->remote_config, m->remote_config_hash,
					      m->remote_config_hash_len, &err);
		if (r != 1)
			update_config_health(s);
	}

	if (m->has_custom_message && s->captures &&
	    !strcmp(m->custom_message.capability, PF_CAPTURE_CAPABILITY))
		handle_capture_message(s, &m->custom_message);

	act->send = agent_session_has_news(s);
}

int agent_session_handle(struct agent_session *s, const uint8_t *data, size_t len,
			 struct agent_session_action *act, struct pf_error *err)
{
	struct pf_s2a *m = NULL;
	/* Decoded memory can exceed the wire size (pointers, arena slack): allow twice. */
	int r = pf_s2a_decode(data, len, s->max_msg * 2, &m, err);
	if (r < 0) {
		memset(act, 0, sizeof(*act));
		return r;
	}
	agent_session_process(s, m, act);
	pf_s2a_free(m);
	return 0;
}

uint64_t agent_session_next_seq(const struct agent_session *s)
{
	return s->seq;
}

uint64_t agent_session_heartbeat_s(const struct agent_session *s)
{
	return s->heartbeat_s;
}

void agent_session_set_max_message(struct agent_session *s, size_t bytes)
{
	s->max_msg = bytes ? bytes : PF_OPAMP_DEFAULT_MAX_MSG;
}

size_t agent_session_max_message(const struct agent_session *s)
{
	return s->max_msg;
}
