/* config.h — the controller's own settings: defaults, an optional YAML file (--config) and
 * command-line flags, in that order of precedence (flags win). Owns no state beyond the
 * struct; strings are heap copies freed by pf_controller_config_release().
 *
 * File keys (all optional):
 *   listen: "127.0.0.1:4320"        data_dir: ./profleet-data     log_level: info
 *   tls: {cert: F, key: F, client_ca: F, agent_listen: "0.0.0.0:4321"}   (client_ca and
 *     agent_listen go together: a second listener for agents that requires a client
 *     certificate signed by client_ca; the main listener never asks browsers for one)
 *   otlp_grpc: {listen: "0.0.0.0:4317"}   (an OTLP/gRPC profiles receiver, off by default;
 *     TLS with tls.cert/tls.key when they are set)
 *   opamp: {max_message_bytes: 16777216, heartbeat_interval_seconds: 30, max_agents: 50000,
 *           max_connections_per_source: 4096, max_send_queue_bytes: 4194304}
 *   http: {max_pending_per_source: 64, header_timeout_seconds: 5}   (connections from one
 *     address still sending their request headers; the deadline for a request's headers)
 *   profiles: {retention_hours: 72, max_bytes: 1073741824}   (embedded profile store;
 *     opamp.max_message_bytes also bounds an OTLP profiles request, after decompression too)
 *   public_url: "https://profleet.example:4320"  (how agents reach this controller; capture
 *     requests then name its OTLP receiver, else agents derive it from their OpAMP URL)
 *   captures: {grace_seconds: 30}   (a capture's deadline is its duration plus this)
 *   tokens: {admin_file: F, agent_file: F}   (--admin-token-file, --agent-token-file: tokens
 *     kept outside the data dir, e.g. Kubernetes Secrets; see pf_bootstrap_import_token)
 *   tokens: {file_dir: DIR}   (--token-file-dir: one file per token, "role:secret"; see
 *     pf_bootstrap_import_token_dir)
 *   default_config: FILE   (--default-config: a profiling config stored as config `default`
 *     on start when the store has none; see pf_bootstrap_default_config)
 *   store: "postgres://user@db:5432/profleet"   (--store; also store: {url: ...}: the fleet
 *     tables in PostgreSQL, shared by several replicas; default: SQLite in data_dir. The
 *     embedded profile store stays in data_dir either way)
 *   ui: {dir: DIR}   (the built console served at /ui/; default: "ui" next to the binary,
 *     else "../share/profleet/ui" beside it; a missing default only disables the console)
 * Unknown keys and bad values are errors that name the key. One table in config.c (keys[])
 * gives each key its flag, type, field, default, range and a line of doc. */
#ifndef PF_CONTROLLER_CONFIG_H
#define PF_CONTROLLER_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "pf/error.h"

/* Replicas sharing PostgreSQL: a replica silent this long is taken for dead (its agents'
 * rows marked disconnected by the others); with a beat every third of it, a replica killed
 * with -9 has its agents shown disconnected within about 8 s. */
#define PF_REPLICA_TIMEOUT_DEFAULT_S 6

struct pf_controller_config {
	char *listen_host;
	int port;
	char *data_dir;
	char *tls_cert, *tls_key, *client_ca;
	char *agent_listen_host; /* tls.agent_listen, NULL when unset */
	int agent_port;
	char *otlp_grpc_host; /* otlp_grpc.listen, NULL when unset */
	int otlp_grpc_port;
	size_t max_message_bytes;
	uint32_t heartbeat_interval_s;
	uint32_t max_agents;
	uint32_t max_conns_per_source; /* opamp.max_connections_per_source, 0: no cap */
	size_t max_send_queue_bytes;   /* opamp.max_send_queue_bytes: per connection */
	uint32_t max_pending_per_source; /* http.max_pending_per_source, 0: no cap */
	uint32_t header_timeout_s;       /* http.header_timeout_seconds */
	int log_level;
	uint32_t profile_retention_hours; /* profiles.retention_hours: age limit of stored profiles */
	uint64_t profile_max_bytes;       /* profiles.max_bytes: cap on stored profile bodies */
	char *public_url;                 /* public_url, NULL when unset */
	uint32_t capture_grace_s;         /* captures.grace_seconds */
	uint32_t replica_timeout_s;       /* store.replica_timeout_seconds */
	char *default_config;             /* default_config: profiling config file, or NULL */
	char *admin_token_file;           /* tokens.admin_file, or NULL */
	char *agent_token_file;           /* tokens.agent_file, or NULL */
	char *token_file_dir;             /* tokens.file_dir, or NULL */
	char *ui_dir;                     /* ui.dir: the built console, NULL = next to the binary */
	char *store_url;                  /* store / store.url: postgres:// URL, NULL = SQLite */
};

void pf_controller_config_defaults(struct pf_controller_config *c);
void pf_controller_config_release(struct pf_controller_config *c);
/* Parses "host:port", "[v6]:port" or ":port". */
int pf_parse_listen(const char *s, char **host, int *port, struct pf_error *err);
int pf_controller_config_load(struct pf_controller_config *c, const char *path,
			      struct pf_error *err);
/* Parses argv; returns 0, 1 when --help/--version was printed, or -EINVAL (err says why). */
int pf_controller_config_args(struct pf_controller_config *c, int argc, char **argv,
			      struct pf_error *err);

#endif
