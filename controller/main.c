/* main.c — profleet-controller: wires the store, fleet, persistence writer, API and server
 * together. Everything of substance lives in controller_core. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "bootstrap.h"
#include "config.h"
#include "fleet/capture.h"
#include "fleet/fleet.h"
#include "fleet/persist.h"
#include "fleet/rollout.h"
#include "metrics.h"
#include "pf/log.h"
#include "profstore/profstore.h"
#include "profstore/query_pool.h"
#include "profstore/retention.h"
#include "receivers/otlp_grpc.h"
#include "server.h"
#include "store.h"
#include "ui/static.h"

static struct pf_server *g_server;

/* The OTLP/gRPC receiver on cfg's otlp_grpc.listen (TLS with the controller's certificate),
 * or NULL after logging why not. */
static struct pf_otlp_grpc *start_grpc(const struct pf_controller_config *cfg,
				       const char *dbpath, const struct pf_profile_retention *ret)
{
	struct pf_otlp_grpc_options go = {.host = cfg->otlp_grpc_host,
					  .port = cfg->otlp_grpc_port,
					  .db_path = dbpath,
					  .fleet_url = cfg->store_url,
					  .retention = ret,
					  .max_message_bytes = cfg->max_message_bytes,
					  .tls_cert = cfg->tls_cert,
					  .tls_key = cfg->tls_key};
	struct pf_error err = {0};
	struct pf_otlp_grpc *g = pf_otlp_grpc_start(&go, &err);
	if (!g) {
		pf_log_error("cannot start the OTLP/gRPC receiver: %s", err.msg);
		return NULL;
	}
	pf_log_info("OTLP/gRPC profiles receiver on port %d of %s%s", pf_otlp_grpc_port(g),
		    cfg->otlp_grpc_host, cfg->tls_cert ? " (TLS)" : "");
	return g;
}

int main(int argc, char **argv)
{
	struct pf_controller_config cfg;
	struct pf_error err = {0};
	int rc = 1;

	pf_log_set_ident("controller");
	pf_controller_config_defaults(&cfg);
	int r = pf_controller_config_args(&cfg, argc, argv, &err);
	if (r == 1) {
		pf_controller_config_release(&cfg);
		return 0;
	}
	if (r < 0) {
		fprintf(stderr, "profleet-controller: %s\n", err.msg);
		pf_controller_config_release(&cfg);
		return 2;
	}
	pf_log_set_level((enum pf_log_level)cfg.log_level);

	struct pf_store *store = NULL;
	struct pf_fleet *fleet = NULL;
	struct pf_persist *persist = NULL;
	struct pf_retention *retention = NULL;
	struct pf_ui *ui = NULL;
	struct pf_qpool *qpool = NULL, *ingest = NULL;
	struct pf_otlp_grpc *grpc = NULL;
	struct pf_captures *captures = NULL;
	struct pf_rollouts *rollouts = NULL;
	struct pf_metrics metrics;
	struct pf_api api;
	memset(&metrics, 0, sizeof(metrics));
	memset(&api, 0, sizeof(api));

	umask(077); /* the data dir holds secrets and the fleet database */
	/* One descriptor per connected agent, plus the listener, SQLite, the pools and the loop. */
	long nofile = pf_raise_nofile_limit();
	if (nofile > 0 && (long long)cfg.max_agents + 64 > nofile)
		pf_log_warn("the open-files limit (%ld) holds about %ld agents, fewer than "
			    "--max-agents %u: raise the hard limit (ulimit -Hn, systemd LimitNOFILE=) "
			    "or lower --max-agents",
			    nofile, nofile - 64, cfg.max_agents);

	char dbpath[4096];
	if (pf_bootstrap_data_dir(cfg.data_dir, dbpath, sizeof(dbpath), &err) < 0) {
		pf_log_error("%s", err.msg);
		goto out;
	}
	store = pf_store_open_url(dbpath, cfg.store_url, PF_STORE_SYNC_FULL, &err);
	if (!store) {
		pf_log_error("cannot open the fleet store %s: %s",
			     cfg.store_url ? "(PostgreSQL)" : dbpath, err.msg);
		goto out;
	}
	if (cfg.store_url)
		pf_log_info("fleet tables in PostgreSQL (shared by replicas; replica %s), profiles "
			    "in %s",
			    pf_store_replica_id(), dbpath);
	if ((cfg.admin_token_file &&
	     pf_bootstrap_import_token(store, cfg.admin_token_file, "admin", &err) < 0) ||
	    (cfg.agent_token_file &&
	     pf_bootstrap_import_token(store, cfg.agent_token_file, "agent", &err) < 0) ||
	    (cfg.token_file_dir &&
	     pf_bootstrap_import_token_dir(store, cfg.token_file_dir, &err) < 0)) {
		pf_log_error("%s", err.msg);
		goto out;
	}
	if (pf_bootstrap_tokens(store, cfg.data_dir, &err) < 0) {
		pf_log_error("%s", err.msg);
		goto out;
	}
	if (cfg.default_config && pf_bootstrap_default_config(store, cfg.default_config, &err) < 0) {
		pf_log_error("%s", err.msg);
		goto out;
	}
	struct pf_fleet_options fo = {.heartbeat_interval_s = cfg.heartbeat_interval_s};
	fleet = pf_fleet_new(&fo);
	if (!fleet) {
		pf_log_error("out of memory");
		goto out;
	}
	pf_fleet_set_shared(fleet, pf_store_is_shared(store));
	if (pf_bootstrap_load_fleet(store, fleet, &err) < 0) {
		pf_log_error("loading the fleet store: %s", err.msg);
		goto out;
	}
	/* Staged rollouts: pinned versions first, then the active rollouts resume. */
	if (pf_rollouts_load_pins(store, fleet, &err) < 0) {
		pf_log_error("%s", err.msg);
		goto out;
	}
	rollouts = pf_rollouts_new(fleet, store);
	if (!rollouts || pf_rollouts_load(rollouts, (int64_t)time(NULL) * 1000, &err) < 0) {
		pf_log_error("%s", rollouts ? err.msg : "out of memory");
		goto out;
	}
	persist = pf_persist_start(dbpath, cfg.store_url, &err);
	if (!persist) {
		pf_log_error("cannot start the store writer: %s", err.msg);
		goto out;
	}
	/* The embedded profile store: the receiver enforces the byte cap at every insert on the
	 * main connection; the retention thread (own connection) removes old profiles. */
	struct pf_profile_retention pret = {
		.max_age_ms = (int64_t)cfg.profile_retention_hours * 3600 * 1000,
		.max_bytes = (int64_t)cfg.profile_max_bytes,
	};
	pf_store_profiles_set_retention(store, &pret);
	retention = pf_retention_start(dbpath, &pret, 0, &err);
	if (!retention) {
		pf_log_error("cannot start profile retention: %s", err.msg);
		goto out;
	}
	/* Heavy profile queries (merged flame graphs, top, diff, ...) run on worker threads
	 * with their own read-only connections, not on the event loop. */
	struct pf_qpool_options qo = {.db_path = dbpath, .fleet_url = cfg.store_url};
	qpool = pf_qpool_start(&qo, &err);
	if (!qpool) {
		pf_log_error("cannot start the profile query threads: %s", err.msg);
		goto out;
	}
	/* The OTLP receiver: decode and prepare on two writer threads (in parallel); each
	 * writer takes the requests queued together and stores them in one transaction (group
	 * commit: one fsync for the lot; SQLite serializes the commits).
	 * Bounded by count and by the bytes of the waiting request bodies, so that a burst of
	 * agents ending a capture together waits instead of being refused. */
	struct pf_qpool_options io = {.db_path = dbpath, .writer = true,
				      .threads = PF_INGEST_THREADS,
				      .max_queued = PF_INGEST_MAX_QUEUED,
				      .max_queued_bytes = PF_INGEST_MAX_QUEUED_BYTES,
				      .batch_max = PF_INGEST_BATCH,
				      .retention = &pret,
				      /* the sender checks read tokens and captures */
				      .fleet_url = cfg.store_url};
	ingest = pf_qpool_start(&io, &err);
	if (!ingest) {
		pf_log_error("cannot start the profile receiver's writer: %s", err.msg);
		goto out;
	}
	/* The OTLP/gRPC receiver, when asked for: threads and store connections of its own. */
	if (cfg.otlp_grpc_host && !(grpc = start_grpc(&cfg, dbpath, &pret)))
		goto out;
	/* Incident captures: unfinished ones resume and wait for their agents' statuses. */
	char receiver[1200];
	if (cfg.public_url)
		snprintf(receiver, sizeof(receiver), "%s/v1development/profiles", cfg.public_url);
	struct pf_captures_options co = {.grace_s = cfg.capture_grace_s,
					 .receiver_url = cfg.public_url ? receiver : NULL};
	captures = pf_captures_new(&co, fleet, store, NULL, NULL);
	if (!captures || pf_captures_load(captures, (int64_t)time(NULL) * 1000, &err) < 0) {
		pf_log_error("%s", captures ? err.msg : "out of memory");
		goto out;
	}
	api.fleet = fleet;
	api.store = store;
	api.metrics = &metrics;
	api.captures = captures;
	api.rollouts = rollouts;
	metrics.query_pool = qpool;
	metrics.ingest_pool = ingest;
	metrics.captures = captures;

	/* The console's files, read once; without them /ui/ says how to build it. */
	char ui_used[4200] = "";
	ui = pf_ui_open(cfg.ui_dir, ui_used, sizeof(ui_used), &err);
	if (ui) {
		pf_log_info("console: %zu files from %s, at /ui/", pf_ui_file_count(ui), ui_used);
	} else if (!cfg.ui_dir && errno == ENOENT && !err.code) {
		pf_log_info("console: not installed (no %s); /ui/ answers 404", ui_used);
	} else {
		pf_log_error("%s", err.msg);
		goto out;
	}

	struct pf_server_options so = {
		.port = cfg.port,
		.tls_cert = cfg.tls_cert,
		.tls_key = cfg.tls_key,
		.client_ca = cfg.client_ca,
		.max_message_bytes = cfg.max_message_bytes,
		.max_agents = cfg.max_agents,
		.max_conns_per_source = cfg.max_conns_per_source,
		.max_send_queue_bytes = cfg.max_send_queue_bytes,
		.max_pending_per_source = cfg.max_pending_per_source,
		.header_timeout_s = cfg.header_timeout_s,
		.query_pool = qpool,
		.ingest_pool = ingest,
		.captures = captures,
		.rollouts = rollouts,
		.ui = ui,
		.store_url = cfg.store_url,
		.replica_timeout_s = cfg.replica_timeout_s,
		.handle_signals = true, /* SIGINT/SIGTERM/SIGHUP: watchers on the server's loop */
	};
	snprintf(so.listen_host, sizeof(so.listen_host), "%s", cfg.listen_host);
	if (cfg.agent_listen_host) {
		snprintf(so.agent_listen_host, sizeof(so.agent_listen_host), "%s",
			 cfg.agent_listen_host);
		so.agent_port = cfg.agent_port;
	}
	g_server = pf_server_new(&so, fleet, store, persist, &metrics, &api, &err);
	if (!g_server) {
		pf_log_error("%s", err.msg);
		goto out;
	}
	signal(SIGPIPE, SIG_IGN);

	const char *scheme = cfg.tls_cert ? "https" : "http";
	bool v6 = strchr(cfg.listen_host, ':') != NULL;
	pf_log_info("listening on %s://%s%s%s:%d (OpAMP at /v1/opamp, API at /api/v1)", scheme,
		    v6 ? "[" : "", cfg.listen_host, v6 ? "]" : "", pf_server_port(g_server));
	if (pf_server_agent_port(g_server) >= 0) {
		bool av6 = strchr(cfg.agent_listen_host, ':') != NULL;
		pf_log_info("agent listener on https://%s%s%s:%d (client certificate required)",
			    av6 ? "[" : "", cfg.agent_listen_host, av6 ? "]" : "",
			    pf_server_agent_port(g_server));
	}
	pf_server_run(g_server);
	pf_log_info("shutting down");
	rc = 0;
out:
	if (g_server) {
		pf_server_free(g_server);
		g_server = NULL;
	}
	pf_otlp_grpc_stop(grpc);
	/* After the server: no connection waits on them any more. */
	pf_qpool_stop(qpool);
	pf_qpool_stop(ingest);
	if (persist) {
		/* Write every agent row still dirty before leaving. */
		while (pf_persist_flush(persist, fleet, 50000) > 0)
			;
		while (pf_persist_flush_seen(persist, fleet, 50000) > 0)
			;
		pf_persist_sync(persist);
		pf_persist_stop(persist);
	}
	pf_retention_stop(retention);
	if (captures && pf_captures_flush(captures) < 0)
		pf_log_warn("captures: last states not written: %s", pf_store_last_error(store));
	pf_captures_free(captures);
	if (rollouts && pf_rollouts_flush(rollouts) < 0)
		pf_log_warn("rollouts: last results not written: %s", pf_store_last_error(store));
	pf_rollouts_free(rollouts);
	pf_fleet_free(fleet);
	pf_store_close(store);
	pf_ui_free(ui);
	pf_controller_config_release(&cfg);
	return rc;
}
