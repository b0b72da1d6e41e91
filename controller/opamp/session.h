/* session.h — the server side of one OpAMP conversation, as plain functions over decoded
 * messages (no lws here, so every rule is unit-testable). Both transports use it: the
 * WebSocket transport keeps one struct pf_opamp_session per connection, the plain-HTTP
 * transport one per request (the agent record carries what must outlive a request).
 *
 * OpAMP rules implemented:
 *  - a message that does not decode gets an error_response BAD_REQUEST; the connection stays;
 *  - every AgentToServer gets a ServerToAgent (an ack carries only instance_uid + caps);
 *  - server capabilities are set in every reply (the first reply must, later ones may);
 *  - instance_uid echoed; nothing else set beside error_response;
 *  - a sequence_num gap, or a first message on a connection that leaves out state we
 *    don't have, sets ReportFullState;
 *  - a uid already connected elsewhere is given a new_instance_uid;
 *  - heartbeat_interval_seconds offered (connection settings) to agents that accept it;
 *  - per-agent credentials (credential.h, with ctx->store): a connection authenticated with a
 *    shared token from an agent that accepts OpAMP connection settings is offered one
 *    (connection_settings.opamp.headers, Authorization), a uid whose credential is in use is
 *    given a new uid when it comes with a shared token, a credential speaks only for its
 *    agent (another instance_uid is BAD_REQUEST) and a second live connection of one
 *    credential is UNAVAILABLE;
 *  - remote_config only to agents with AcceptsRemoteConfig;
 *  - remote_config included whenever last_remote_config_hash differs, config_hash always set.
 * Custom capabilities: the agent's custom_capabilities set its capture bit; the first reply on
 * a connection lists the server's (io.profleet.capture.v1) when captures are on.
 */
#ifndef PF_OPAMP_SESSION_H
#define PF_OPAMP_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/buf.h"

struct pf_fleet;
struct pf_agent;
struct pf_metrics;
struct pf_captures;
struct pf_store;

struct pf_opamp_ctx {
	struct pf_fleet *fleet;
	struct pf_metrics *metrics;
	/* Incident captures (fleet/capture.h), NULL when none: capture.status messages go
	 * there, and what an agent is owed goes out with (or, plain HTTP: in) the reply. */
	struct pf_captures *captures;
	/* The wire-size cap of one AgentToServer (the transports enforce it on the frame or
	 * body); its decoded form may take PF_OPAMP_DECODED_FACTOR times that (protobuf-c's
	 * structs are larger than the wire bytes: docs/limits.md). */
	size_t max_message_bytes;
	/* The loop's store connection for per-agent credentials, NULL: none are offered. */
	struct pf_store *store;
};

#define PF_OPAMP_DECODED_FACTOR 4
/* Attributes (identifying + non-identifying) one AgentDescription may carry; more is a
 * BAD_REQUEST error reply and the description is not recorded. */
#define PF_OPAMP_MAX_ATTRS 256
/* Bytes of one attribute's key and of its value (a string, or another kind as the API renders
 * it), and of every key and value of one description together; more is refused the same way.
 * They are kept per agent, listed by the API and matched by selectors. */
#define PF_OPAMP_MAX_ATTR_KEY 256
#define PF_OPAMP_MAX_ATTR_VALUE 4096
#define PF_OPAMP_MAX_DESCRIPTION_BYTES (64 * 1024)

struct pf_opamp_session {
	/* What every message reads comes first, the uids and hashes after. */
	struct pf_agent *agent;    /* bound by the first valid message */
	void *conn;                /* transport handle, NULL for plain HTTP */
	bool claimed;              /* claimed_uid is set */
	bool replied;              /* a reply was already sent on this connection */
	bool http;                 /* plain-HTTP transport */
	bool config_sent;          /* config_sent_hash is set */
	/* Set by the transport: the connection (or request) authenticated with the per-agent
	 * credential of cred_uid, whose SHA-256 is cred_hash. */
	bool cred_bound;
	uint8_t claimed_uid[16];   /* the uid the peer used before we assigned a new one */
	/* WebSocket only: the hash of the last remote config sent on this connection. A
	 * WebSocket delivers in order or not at all, so the same config is not sent twice on
	 * one connection however many messages the agent sends before it reports it. */
	uint8_t config_sent_hash[32];
	uint8_t cred_uid[16];
	uint8_t cred_hash[32];
};

/* Outcome of one message, for the transport. */
struct pf_opamp_result {
	bool bad_request;  /* answered with BAD_REQUEST */
	bool disconnect;   /* the agent said agent_disconnect */
};

/* Handles one AgentToServer (protobuf bytes, without WS framing). Appends the encoded
 * ServerToAgent to out (always: even undecodable input gets a reply). Returns 0, or -ENOMEM
 * / -E2BIG when no reply could be encoded. */
int pf_opamp_session_handle(struct pf_opamp_ctx *ctx, struct pf_opamp_session *s,
			    const uint8_t *data, size_t len, int64_t now_ms, struct pf_buf *out,
			    struct pf_opamp_result *res);
/* The server-initiated message for a config change: instance_uid + capabilities +
 * remote_config. Appends to out. -EALREADY when the agent needs no config, or (sess given,
 * a WebSocket session) this config was already sent on the connection. */
int pf_opamp_build_push(struct pf_opamp_ctx *ctx, struct pf_opamp_session *sess,
			struct pf_agent *a, struct pf_buf *out);
/* A server-initiated offer of a new credential to a (credential rotation): instance_uid,
 * capabilities and connection_settings. Appends to out. -EOPNOTSUPP when the agent does not
 * accept OpAMP connection settings; a store error. */
int pf_opamp_build_offer(struct pf_opamp_ctx *ctx, struct pf_agent *a, int64_t now_ms,
			 struct pf_buf *out);
/* The capabilities the server sets in every ServerToAgent. */
uint64_t pf_opamp_server_caps(void);
/* The transport closed: unbinds and marks the agent disconnected. */
void pf_opamp_session_closed(struct pf_opamp_ctx *ctx, struct pf_opamp_session *s);

#endif
