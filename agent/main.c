/* main.c — profleet-agent: parses the command line and wires the agent_core modules
 * together (state, config engine, health, data plane, OpAMP session and client). See
 * docs/agent.md.
 *
 * Signals: SIGTERM/SIGINT stop the agent (the data plane exports its last window, then the
 * OpAMP goodbye, exit 0); SIGUSR1 starts or ends a triggered capture (mode: triggered), and
 * the start also scrapes the pprof targets with interval_seconds 0 (dataplane.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "config.h"
#include "dataplane.h"
#include "description.h"
#include "endpoints/metrics.h"
#include "health.h"
#include "k8s/podcache.h"
#include "opamp/opamp_client.h"
#include "opamp/opamp_session.h"
#include "pf/heap.h"
#include "pf/log.h"
#include "pf/uuid.h"
#include "relabel/relabel.h"
#include "state.h"
#include "triggers/capture.h"

static volatile sig_atomic_t stop_requested;
static struct agent_client *the_client;
static struct agent_dataplane *the_dataplane;

static void on_signal(int sig)
{
	if (sig == SIGUSR1) {
		agent_dataplane_toggle_trigger(the_dataplane);
		return;
	}
	stop_requested = 1;
	agent_client_wake(the_client);
}

static void wake_loop(void *ctx)
{
	(void)ctx;
	agent_client_wake(the_client);
}

/* Pod cache connection state -> the "k8s" health component (from the cache's thread). */
static void k8s_status(void *ctx, bool healthy, const char *status, const char *last_error)
{
	agent_health_set(ctx, "k8s", healthy, status, last_error);
}

static int load_local_config(struct agent_config *cfg, const char *path)
{
	char *text = NULL;
	size_t len;
	struct pf_error err = {0};
	int r = agent_read_file(path, PF_PROFCFG_MAX_DOC, &text, &len);
	if (r < 0) {
		pf_log_error("cannot read --config '%s': %s", path, strerror(-r));
		return r;
	}
	r = agent_config_set_local(cfg, text, len, &err);
	free(text);
	if (r < 0)
		pf_log_error("--config '%s': %s", path, err.msg);
	return r;
}

/* The credential the controller gave this agent (state.h "credential") replaces the
 * enrollment token of --token-file. -ENOMEM. */
static int use_own_credential(struct agent_state *state, char **token)
{
	const char *own;
	const uint8_t *hash;
	size_t hash_len;
	if (!agent_state_credential(state, &own, &hash, &hash_len))
		return 0;
	char *copy = strdup(own);
	if (!copy) {
		pf_log_error("out of memory");
		return -ENOMEM;
	}
	if (*token) {
		explicit_bzero(*token, strlen(*token));
		free(*token);
	}
	*token = copy;
	pf_log_info("opamp: using the agent's own credential from the state directory");
	return 0;
}

/* The OpAMP client verified a new credential: uploads to the controller use it, under the uid
 * the agent has now. */
static void credential_hook(void *ctx, const char *token)
{
	char uid[PF_UUID_STR_LEN + 1];
	pf_uuid_format(agent_state_uid(ctx), uid);
	if (the_dataplane && agent_dataplane_set_identity(the_dataplane, token, uid) < 0)
		pf_log_error("dataplane: keeps the previous token: out of memory");
}

int main(int argc, char **argv)
{
	struct agent_opts o;
	struct pf_error err = {0};
	struct agent_state *state = NULL;
	struct agent_config *cfg = NULL;
	struct agent_health *health = NULL;
	struct agent_session *session = NULL;
	struct agent_metrics *metrics = NULL;
	struct agent_captures *captures = NULL;
	struct pf_podcache *pods = NULL;
	struct pf_procinfo_source pod_source;
	char *token = NULL;
	char uid[PF_UUID_STR_LEN + 1];
	int rc = 1;

	pf_log_set_ident("agent");
	/* large freed blocks (DWARF line tables, export buffers) go back at once (pf/heap.h) */
	if (pf_heap_map_large(PF_HEAP_MAP_LARGE) < 0)
		pf_log_warn("malloc refused a fixed mmap threshold: large freed blocks stay resident");
	if (agent_opts_parse(argc, argv, &o, &err) < 0) {
		fprintf(stderr, "profleet-agent: %s\n", err.msg);
		agent_opts_usage(stderr);
		return 2;
	}
	if (o.help) {
		agent_opts_usage(stdout);
		return 0;
	}
	if (o.version) {
		printf("profleet-agent %s\n", agent_version());
		return 0;
	}
	pf_log_set_level(o.log_level);
	agent_lws_logging(o.log_level);

	if (agent_state_open(o.state_dir, &state, &err) < 0) {
		pf_log_error("%s", err.msg);
		goto out;
	}
	pf_uuid_format(agent_state_uid(state), uid);
	pf_log_info("profleet-agent %s, instance_uid %s, state %s", agent_version(), uid,
		    o.state_dir);

	health = agent_health_new(agent_now_unix_nano());
	cfg = agent_config_new(state);
	if (!health || !cfg) {
		pf_log_error("out of memory");
		goto out;
	}
	/* a component's change wakes the OpAMP loop, which reports it */
	agent_health_set_notify(health, wake_loop, NULL);
	if (o.config_file && load_local_config(cfg, o.config_file) < 0)
		goto out;
	for (size_t i = 0; i < o.n_labels; i++)
		if (agent_config_add_label(cfg, o.labels[i]) < 0) {
			pf_log_error("--label '%s': too many labels", o.labels[i]);
			goto out;
		}
	if (o.token_file && agent_token_load(o.token_file, &token, &err) < 0) {
		pf_log_error("%s", err.msg);
		goto out;
	}
	if (o.server_url && use_own_credential(state, &token) < 0)
		goto out;
	/* The metrics endpoint binds before anything starts: a taken port stops the agent here. */
	if (o.metrics_listen) {
		struct agent_listen_addr ml;
		err = (struct pf_error){0};
		if (agent_listen_addr_parse(o.metrics_listen, &ml, &err) < 0 ||
		    !(metrics = agent_metrics_new(&ml, health, &err))) {
			pf_log_error("%s", err.msg);
			goto out;
		}
	}
	/* Components register here (agent_config_add_hook + agent_health_register). */
	agent_health_register(health, "config");
	/* Pod attribution: the node's pods from the API server, on the cache's own thread; the
	 * sampler only reads the cache. */
	if (o.k8s) {
		struct pf_podcache_options po = {
		    .api_url = o.k8s_api,
		    .token_file = o.k8s_token_file,
		    .ca_file = o.k8s_ca_file,
		    .node_name = o.k8s_node ? o.k8s_node : getenv("K8S_NODE_NAME"),
		    .on_status = k8s_status,
		    .status_ctx = health,
		};
		agent_health_register(health, "k8s");
		err = (struct pf_error){0};
		pods = pf_podcache_new(&po, &err);
		if (!pods || pf_podcache_start(pods, &err) < 0) {
			pf_log_error("--k8s: %s", err.msg);
			goto out;
		}
		pf_podcache_source(pods, &pod_source);
	}
	/* Exporters keep what they could not deliver yet under the state dir, so an agent restart
	 * loses nothing (bounded by limits.queue_bytes per exporter). */
	char spill[4096];
	snprintf(spill, sizeof(spill), "%s/spill", o.state_dir);
	/* The sampler's unwind tables, by build id (agent/unwind/unwinder.h). */
	char unwind[4096];
	snprintf(unwind, sizeof(unwind), "%s/unwind", o.state_dir);
	/* ... and its source-line tables, by build id (agent/symbolize/line_table.h). */
	char lines[4096];
	snprintf(lines, sizeof(lines), "%s/lines", o.state_dir);
	/* Captures (io.profleet.capture.v1): statuses wake the loop; profiles go to the
	 * controller's receiver, derived from the OpAMP URL unless a request names one. */
	struct agent_captures_opts cao = {.notify = wake_loop};
	captures = agent_captures_new(&cao);
	if (!captures) {
		pf_log_error("out of memory");
		goto out;
	}
	char receiver[PF_CAPTURE_MAX_URL + 1];
	bool has_receiver =
	    o.server_url && agent_capture_receiver_url(o.server_url, receiver, sizeof(receiver)) == 0;
	struct agent_dataplane_opts dpo = {.health = health,
					   .captures = captures,
					   .capture_receiver = has_receiver ? receiver : NULL,
					   .capture_ca_file = o.ca_file,
					   .capture_cert_file = o.client_cert,
					   .capture_key_file = o.client_key,
					   .wake = wake_loop,
					   .spill_dir = spill,
					   .unwind_dir = unwind,
					   .lines_dir = lines,
					   .agent_token = token,
					   .agent_uid = uid,
					   .no_sampler = o.no_sampler,
					   .frame_pointers_only = o.frame_pointers_only,
					   .metrics = metrics != NULL,
					   .attr_source = pods ? &pod_source : NULL};
	err = (struct pf_error){0};
	the_dataplane = agent_dataplane_new(&dpo, &err);
	if (!the_dataplane) {
		pf_log_error("%s", err.msg);
		goto out;
	}
	err = (struct pf_error){0};
	if (metrics && agent_metrics_start(metrics, the_dataplane, &err) < 0) {
		pf_log_error("%s", err.msg);
		goto out;
	}
	struct agent_config_hook hook;
	/* the rules first: the data plane exports with the new config once it commits */
	agent_relabel_hook(&hook);
	agent_config_add_hook(cfg, &hook);
	agent_dataplane_hook(the_dataplane, &hook);
	agent_config_set_note_source(cfg, agent_dataplane_effective_note, the_dataplane);
	agent_config_add_hook(cfg, &hook);
	err = (struct pf_error){0};
	if (agent_config_start(cfg, &err) < 0) {
		pf_log_error("config: %s", err.msg);
		goto out;
	}
	agent_health_set(health, "config", true,
			 agent_config_active_is_remote(cfg) ? "remote config applied"
							    : "local config applied",
			 NULL);

	session = agent_session_new(state, cfg, health, o.heartbeat_s);
	if (!session) {
		pf_log_error("out of memory");
		goto out;
	}
	agent_session_set_captures(session, captures);
	agent_session_set_figures_interval(session, o.health_figures_s * 1000);
	struct agent_client_opts co = {
	    .server_url = o.server_url,
	    .token = token,
	    .ca_file = o.ca_file,
	    .client_cert = o.client_cert,
	    .client_key = o.client_key,
	    .max_message_bytes = o.max_message_bytes,
	};
	err = (struct pf_error){0};
	the_client = agent_client_new(&co, session, health, &err);
	if (!the_client) {
		pf_log_error("%s", err.msg);
		goto out;
	}
	if (!o.server_url)
		pf_log_info("no --server: running standalone on the %s config",
			    o.config_file ? "local" : "default");

	agent_client_set_credential_hook(the_client, credential_hook, state);
	/* the last window is exported before the OpAMP goodbye */
	agent_client_set_stop_hook(the_client, agent_dataplane_flushed, the_dataplane,
				   AGENT_DATAPLANE_FLUSH_MS + 500);

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	agent_client_run(the_client, &stop_requested);
	pf_log_info("stopped");
	rc = 0;
out:
	/* the metrics server reads the data plane: it stops first */
	agent_metrics_free(metrics);
	/* the data plane first: its worker may still wake the loop */
	if (cfg)
		agent_config_set_note_source(cfg, NULL, NULL);
	agent_dataplane_free(the_dataplane);
	the_dataplane = NULL;
	agent_relabel_reset(); /* after the data plane: none of its windows is exported now */
	/* after the data plane: its sampler reads the pod cache */
	pf_podcache_free(pods);
	if (health) /* the threads that report into it are gone */
		agent_health_set_notify(health, NULL, NULL);
	agent_client_free(the_client);
	the_client = NULL;
	agent_session_free(session);
	/* after the data plane: its runner's exports report into it until freed */
	agent_captures_free(captures);
	agent_config_free(cfg);
	agent_health_free(health);
	agent_state_free(state);
	if (token) {
		explicit_bzero(token, strlen(token));
		free(token);
	}
	return rc;
}
