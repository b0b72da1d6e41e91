/* opamp_client.h — the agent's event loop and its OpAMP WebSocket transport (libwebsockets
 * 4.1.6, one lws context). Thin lws callbacks over the session (opamp_session.h):
 *
 *  - connects to ws:// or wss:// (TLS through lws + OpenSSL, system CAs or --ca-file);
 *    http(s):// URLs mean the same host with ws(s); the path defaults to /v1/opamp;
 *    `Authorization: Bearer <token>` on the upgrade request;
 *  - a credential offered in connection_settings (opamp_session.h) is verified by closing
 *    the connection and connecting with it: established, it is persisted and replaces the
 *    token (agent_client_set_credential_hook); refused, the previous token stays;
 *  - every message is one binary WS message: varint header 0 + protobuf;
 *    fragments are reassembled into a buffer capped at the inbound limit (default 64 MiB);
 *    over it the connection is closed with 1009; a text message or a header other than 0 is
 *    logged and dropped as malformed;
 *  - writes only from LWS_CALLBACK_CLIENT_WRITEABLE, one lws_write() each, LWS_PRE headroom;
 *  - heartbeat: an AgentToServer every heartbeat interval counted from the last sent message
 *    (default 30 s, the server's heartbeat_interval_seconds when offered, 0 disables);
 *  - reconnect: after an unexpected drop at once, then exponential backoff with full
 *    jitter (base 500 ms, cap 30 s); HTTP 503/429 Retry-After at the upgrade and
 *    ServerErrorResponse UNAVAILABLE retry_after set a floor; HTTP 401 logs "agent token
 *    rejected" and waits at least 60 s;
 *  - shutdown: first the stop hook (agent_client_set_stop_hook: the data plane exports its last
 *    window) while the loop keeps serving OpAMP, bounded by the hook's max_ms; then the last
 *    message carries agent_disconnect, then a normal Close; bounded by 2 s, after which
 *    the loop ends anyway.
 * All timers are lws_sul. Owns the lws context, the connection and its buffers. Runs on one
 * thread; agent_client_wake() is the only call safe from elsewhere (signal handlers). */
#ifndef AGENT_OPAMP_CLIENT_H
#define AGENT_OPAMP_CLIENT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/error.h"

#define AGENT_BACKOFF_BASE_MS 500
#define AGENT_BACKOFF_CAP_MS 30000
#define AGENT_UNAUTHORIZED_DELAY_MS 60000
#define AGENT_SHUTDOWN_MS 2000
#define AGENT_OPAMP_PATH "/v1/opamp"

struct agent_session;
struct agent_health;
struct agent_client;

struct agent_url {
	bool tls;
	char host[256]; /* without brackets */
	int port;
	char path[1024];       /* with query, "/v1/opamp" when the URL had none or "/" */
	char host_header[300]; /* "host[:port]", IPv6 in brackets */
};

/* Parses ws://, wss://, http://, https:// URLs. 0 or -EINVAL with err. */
int agent_url_parse(const char *url, struct agent_url *out, struct pf_error *err);
/* True for "localhost", 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104: plain text stays on the
 * host. */
bool agent_url_is_loopback(const struct agent_url *u);

struct agent_client_opts {
	const char *server_url;	  /* NULL: standalone, the loop runs without OpAMP */
	const char *token;	  /* NULL: no Authorization header */
	const char *ca_file;	  /* NULL: system CAs */
	const char *client_cert;  /* PEM, with client_key: presented when the server asks */
	const char *client_key;
	size_t max_message_bytes; /* 0: 64 MiB */
};

/* Creates the lws context (and routes lws logs into pf_log). session and health are
 * borrowed. NULL with err on failure. */
struct agent_client *agent_client_new(const struct agent_client_opts *o,
				      struct agent_session *session, struct agent_health *health,
				      struct pf_error *err);
void agent_client_free(struct agent_client *c);

/* Called on the loop thread once *stop is set, before the goodbye, until it returns true or
 * max_ms passed; its first call starts the component's flush. The component wakes the loop
 * (agent_client_wake) when it is done. */
void agent_client_set_stop_hook(struct agent_client *c, bool (*done)(void *ctx), void *ctx,
				uint64_t max_ms);

/* Called on the loop thread when the agent's own credential (offered over OpAMP, verified by
 * a connection) replaces the token: token is valid during the call. */
void agent_client_set_credential_hook(struct agent_client *c,
				      void (*hook)(void *ctx, const char *token), void *ctx);

/* Runs the loop until *stop becomes non-zero, then shuts down gracefully (bounded). 0. */
int agent_client_run(struct agent_client *c, volatile sig_atomic_t *stop);
/* Wakes the loop (lws_cancel_service): async-signal-tolerant, any thread. */
void agent_client_wake(struct agent_client *c);

/* Sets lws' log mask for our level and routes its lines into pf_log. */
void agent_lws_logging(int pf_level);

#endif
