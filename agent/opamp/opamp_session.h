/* opamp_session.h — the agent's OpAMP logic without a network: which AgentToServer to send
 * next and what a ServerToAgent means. opamp_client.c moves its bytes over WebSocket; the unit
 * tests drive it directly.
 *
 * Owns: the sequence number, the heartbeat interval, and what has been reported on the
 * current connection (status compression, opamp spec "Status Reporting"):
 *  - the first message on every connection is a full status report: agent_description,
 *    capabilities, health, effective_config, remote_config_status;
 *  - afterwards a sub-message is sent, whole, only when something in it changed; a message
 *    with none of them is a heartbeat; health changes that are a status's figures alone (health.h) wait
 *    until AGENT_SESSION_FIGURES_MS passed since health was last reported, any other health
 *    change goes at once;
 *  - ReportFullState from the server makes the next message full again;
 *  - capabilities in every message; sequence_num +1 per message, exactly;
 *  - a ServerToAgent that changes nothing asks for no message (no status report answers a
 *    message that did not change the status), e.g. the same remote config again;
 *  - new_instance_uid is adopted and persisted at once, and the description resent;
 *  - connection_settings.opamp with an `Authorization: Bearer` header is the agent's own
 *    credential: held aside (agent_session_offer) until the transport has connected with it,
 *    then persisted (agent_session_accept_offer);
 *  - ServerErrorResponse: BAD_REQUEST is logged and that message is not retried;
 *    UNAVAILABLE asks the transport to reconnect, after retry_after when given.
 * Remote config goes to the config engine (config.h); its APPLIED/FAILED status and the new
 * effective config are reported because their generations changed.
 *
 * Captures (with agent_session_set_captures): every full report lists the custom capability
 * io.profleet.capture.v1 (custom_capabilities); a ServerToAgent custom_message of that
 * capability is a capture.request (admitted by the capture engine, triggers/capture.h; a
 * payload that does not decode is answered with a failed status, error_code bad_request, when
 * its id can be read, else logged and counted) or a capture.cancel; each AgentToServer carries
 * at most one capture.status (the next from the engine's outbox; the message is news while
 * more wait). A new connection re-sends every status the engine keeps.
 *
 * Not thread-safe: the event-loop thread owns it. */
#ifndef AGENT_OPAMP_SESSION_H
#define AGENT_OPAMP_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "opamp_codec.h"
#include "pf/buf.h"
#include "pf/error.h"

#define AGENT_DEFAULT_HEARTBEAT_S 30

/* The capabilities the agent sets in every AgentToServer. */
#define AGENT_CAPABILITIES                                                                         \
	(PF_AGENT_CAP_REPORTS_STATUS | PF_AGENT_CAP_ACCEPTS_REMOTE_CONFIG |                        \
	 PF_AGENT_CAP_REPORTS_EFFECTIVE_CONFIG | PF_AGENT_CAP_REPORTS_HEALTH |                     \
	 PF_AGENT_CAP_REPORTS_REMOTE_CONFIG | PF_AGENT_CAP_REPORTS_HEARTBEAT |                     \
	 PF_AGENT_CAP_ACCEPTS_OPAMP_CONNECTION_SETTINGS)

struct agent_state;
struct agent_config;
struct agent_health;
struct agent_session;

/* What the transport should do after a ServerToAgent. */
struct agent_session_action {
	bool send;	/* something changed: send a message now */
	bool reconnect; /* UNAVAILABLE: close and reconnect */
	bool has_retry_after;
	uint64_t retry_after_ms; /* with reconnect, when the server said when */
	bool heartbeat_changed;	 /* the server offered a new heartbeat interval */
	bool bad_request;	 /* the server rejected our last message */
	bool credential_offered; /* connection settings with a credential: verify it */
};

/* Health figures wait as long as a heartbeat (AGENT_DEFAULT_HEARTBEAT_S): at rest they ride
 * on the message that would have been the heartbeat. */
#define AGENT_SESSION_FIGURES_MS 30000

/* Borrows state, config, health (all must outlive the session). heartbeat_s: the interval
 * used until the server offers one (0 disables). */
struct agent_session *agent_session_new(struct agent_state *state, struct agent_config *config,
					struct agent_health *health, uint64_t heartbeat_s);
void agent_session_free(struct agent_session *s);

struct agent_captures;
/* Enables the capture capability (c borrowed, outlives the session). */
void agent_session_set_captures(struct agent_session *s, struct agent_captures *c);
/* A capture status waits (the loop sends it at once; other news waits a moment to be sent
 * together). */
bool agent_session_has_capture_news(struct agent_session *s);
/* Custom messages of our capability that could not be used (bad payload without an id,
 * unknown type). */
uint64_t agent_session_capture_errors(const struct agent_session *s);

/* A new connection is up: the next message is a full report. */
void agent_session_on_connect(struct agent_session *s);
/* The labels/description changed (or the uid): resend the description. */
void agent_session_description_changed(struct agent_session *s);
/* How long figures-only health changes wait after the last health report (tests: 0). */
void agent_session_set_figures_interval(struct agent_session *s, uint64_t ms);
uint64_t agent_session_figures_interval(const struct agent_session *s);
/* Whether anything is waiting to be reported (full report pending or a changed sub-message). */
bool agent_session_has_news(struct agent_session *s);

/* Encodes the next AgentToServer (protobuf only, no WS framing) onto out and marks its
 * contents as reported. disconnect: set agent_disconnect (the last message). 0, -ENOMEM,
 * -E2BIG (would exceed the outbound limit: a message over it is never sent). */
int agent_session_build(struct agent_session *s, bool disconnect, struct pf_buf *out);

/* Handles one received ServerToAgent (protobuf bytes, framing already removed). -EBADMSG on
 * a malformed message (err says why); otherwise 0 and *act. */
int agent_session_handle(struct agent_session *s, const uint8_t *data, size_t len,
			 struct agent_session_action *act, struct pf_error *err);
/* The same on a decoded message. */
void agent_session_process(struct agent_session *s, const struct pf_s2a *m,
			   struct agent_session_action *act);

/* Connection settings offers: the credential offered (token without "Bearer ") while it waits
 * to be verified; false when none. agent_session_accept_offer() persists it with its hash in
 * the state directory (state.h "credential") and drops it, 0 or -errno with err;
 * agent_session_drop_offer() forgets it (verification failed). */
bool agent_session_offer(const struct agent_session *s, const char **token);
int agent_session_accept_offer(struct agent_session *s, struct pf_error *err);
void agent_session_drop_offer(struct agent_session *s);

uint64_t agent_session_next_seq(const struct agent_session *s);
uint64_t agent_session_heartbeat_s(const struct agent_session *s);
/* Caps on messages: inbound (decode) limit, default PF_OPAMP_DEFAULT_MAX_MSG. */
void agent_session_set_max_message(struct agent_session *s, size_t bytes);
size_t agent_session_max_message(const struct agent_session *s);

#endif
