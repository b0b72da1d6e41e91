/* server.h — the controller's one libwebsockets context and listener: OpAMP over WebSocket
 * and plain HTTP at /v1/opamp, the REST API, /healthz, /readyz and /metrics, all on one
 * address; with TLS optionally a second agent listener, same routes, that requires client
 * certificates (tls.h holds the TLS policy). The callbacks here are thin: they collect bytes
 * and hand them to opamp/session.h and api/api.h, and write back what those return
 * (from the WRITEABLE callback, one lws_write() each, with LWS_PRE headroom; one exception: a
 * message for an agent with nothing queued before it is written at once instead of from
 * WRITEABLE, see ws_send() in server.c).
 *
 * Owns: the event loop (libuv, epoll underneath; lws joins it as a foreign loop, see
 * docs/internals/event-loop.md), the lws context, every connection's transport state (receive
 * reassembly with a hard cap, an output queue), the periodic timers (persistence flush),
 * shutdown (and, when asked, SIGINT/SIGTERM), and the requests it has handed to the query pool
 * (it tells the pool to forget a request whose connection closes, so a late answer never
 * touches a freed connection). Its parts: server_http.c (HTTP requests and their routes),
 * server_jobs.c (work on the pools), conn_limits.c (per-address limits), fleet/sync.h (the
 * LISTEN connection of replicas sharing PostgreSQL). */
#ifndef PF_SERVER_H
#define PF_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/error.h"

struct pf_fleet;
struct pf_store;
struct pf_persist;
struct pf_metrics;
struct pf_api;
struct pf_captures;
struct pf_rollouts;
struct pf_ui;

struct pf_server_options {
	char listen_host[256];
	int port;
	const char *tls_cert;  /* PEM; TLS on when set */
	const char *tls_key;
	const char *client_ca; /* PEM; on the agent listener, a client certificate signed by
				* it is required (never on listen_host:port) */
	char agent_listen_host[256]; /* "" = no agent listener; else the same routes, mTLS */
	int agent_port;
	size_t max_message_bytes; /* OpAMP inbound limit (after decompression) */
	uint32_t max_agents;      /* connected WebSocket agents before 503 */
	uint32_t max_conns_per_source; /* OpAMP WebSockets from one address before 429; 0: no cap */
	/* Bytes queued for one OpAMP WebSocket beyond which a further message closes it (a
	 * reader that does not keep up); the first queued message is always taken, so one
	 * connection holds at most this plus one message plus what lws buffers (one message). */
	size_t max_send_queue_bytes;
	/* Connections from one address still sending request headers (accepted, headers not
	 * complete) beyond which new ones are closed at accept, while half the header pool is
	 * pending in all (conn_limits.h PF_PENDING_PRESSURE); 0: no cap. */
	uint32_t max_pending_per_source;
	/* Seconds a connection gets to send a request's headers (from accept, or from the end
	 * of its previous request), then it is closed. */
	uint32_t header_timeout_s;
	/* When set, the heavy profile queries (api_profiles.h pf_api_profiles_offload) run on
	 * this pool (profstore/query_pool.h) and their answers come back through its completion
	 * queue; a full queue answers 503 with Retry-After. NULL: they run on the loop. The
	 * caller starts it before pf_server_new() and stops it after pf_server_free(). */
	struct pf_qpool *query_pool;
	/* When set, OTLP profile requests (POST /v1development/profiles) are decoded and stored
	 * by this pool (writer threads, each with its own synchronous=FULL connection with the
	 * retention set); a full queue answers 503 with Retry-After. NULL: on the loop. */
	struct pf_qpool *ingest_pool;
	/* Incident captures (fleet/capture.h), or NULL: the server sends their OpAMP messages
	 * to WebSocket agents and ticks their deadlines and writes with the persist timer. */
	struct pf_captures *captures;
	/* Staged rollouts (fleet/rollout.h), or NULL: ticked with the persist timer. */
	struct pf_rollouts *rollouts;
	/* The console's files (ui/static.h), or NULL: /ui/ answers 404 saying how to build it. */
	const struct pf_ui *ui;
	/* The postgres:// URL of the shared fleet tables, or NULL: with it the server LISTENs for
	 * other replicas' changes on its loop (fleet/sync.h) and re-connects with backoff. */
	const char *store_url;
	/* With store_url: a replica silent this long is taken for dead, its agents' rows marked
	 * disconnected (pf_store_replica_beat); this one beats every third of it, at most 5 s.
	 * 0: PF_REPLICA_TIMEOUT_DEFAULT_S (config.h). */
	uint32_t replica_timeout_s;
	/* SIGINT and SIGTERM stop the loop, SIGHUP reloads the TLS certificate (watchers on the
	 * loop itself, no sigaction). */
	bool handle_signals;
};

struct pf_server;

struct pf_server *pf_server_new(const struct pf_server_options *opt, struct pf_fleet *fleet,
				struct pf_store *store, struct pf_persist *persist,
				struct pf_metrics *metrics, struct pf_api *api,
				struct pf_error *err);
/* Runs the event loop until pf_server_stop() (or, with handle_signals, SIGINT/SIGTERM). */
int pf_server_run(struct pf_server *s);
/* Asks the loop to stop; safe from another thread and from a signal handler. */
void pf_server_stop(struct pf_server *s);
void pf_server_free(struct pf_server *s);
/* The port actually bound (useful with port 0). */
int pf_server_port(const struct pf_server *s);
/* The agent listener's port, or -1 without one. */
int pf_server_agent_port(const struct pf_server *s);
/* Async-signal-safe: asks the loop to reload the TLS certificate and key from their files
 * (tls.h pf_tls_reload); new handshakes use them, open connections stay. A bad pair is
 * logged and the old one kept. */
void pf_server_reload_tls(struct pf_server *s);

#endif
