/* cli.h — profleet-agent's command line and the agent token file.
 *
 *   profleet-agent [--config FILE] [--server URL] [--token-file F] [--ca-file F]
 *                  [--state-dir DIR] [--label k=v]... [--log-level L]
 *                  [--heartbeat-seconds N] [--health-figures-seconds N]
 *                  [--max-message-bytes N]
 *                  [--metrics-listen ADDR:PORT] [--no-sampler] [--frame-pointers-only]
 *                  [--k8s] [--k8s-api URL] [--k8s-token-file F] [--k8s-ca-file F]
 *                  [--k8s-node NAME] [--help] [--version]
 *
 * Owns struct agent_opts (a value: its strings point into argv). */
#ifndef AGENT_CLI_H
#define AGENT_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pf/error.h"

#define AGENT_DEFAULT_STATE_DIR "./profleet-agent-state"
#define AGENT_CLI_MAX_LABELS 64
#define AGENT_TOKEN_MAX 4096

struct agent_opts {
	const char *config_file; /* NULL: defaults */
	const char *server_url;	 /* NULL: standalone */
	const char *token_file;
	const char *ca_file;
	const char *client_cert, *client_key; /* PEM; presented when the server asks (mTLS) */
	bool allow_insecure;   /* send the token over ws:// to a non-loopback host anyway */
	const char *state_dir; /* AGENT_DEFAULT_STATE_DIR unless given */
	const char *labels[AGENT_CLI_MAX_LABELS];
	size_t n_labels;
	int log_level;		  /* enum pf_log_level, default info */
	uint64_t heartbeat_s;	  /* default 30; 0 disables */
	uint64_t health_figures_s; /* default 30: figures-only health changes at most this often */
	size_t max_message_bytes; /* default 64 MiB */
	const char *metrics_listen; /* NULL: no metrics endpoint; else validated ADDR:PORT
				     * (agent_listen_addr_parse) */
	bool no_sampler;	    /* never load the eBPF sampler (pprof targets only) */
	bool frame_pointers_only;   /* no .eh_frame unwind tables: user stacks by frame pointers */
	/* pod attribution (agent/k8s/podcache.h): on with --k8s or any --k8s-* option;
	 * NULLs mean the in-cluster defaults, k8s_node defaults to $K8S_NODE_NAME */
	bool k8s;
	const char *k8s_api, *k8s_token_file, *k8s_ca_file, *k8s_node;
	bool help, version;
};

/* Parses argv (getopt_long; resets getopt itself so it may be called repeatedly). 0, or
 * -EINVAL with err naming the option. */
int agent_opts_parse(int argc, char **argv, struct agent_opts *o, struct pf_error *err);
void agent_opts_usage(FILE *f);

/* Reads the agent token: the file's content with surrounding whitespace removed. Empty files,
 * tokens over AGENT_TOKEN_MAX or with inner whitespace/control characters are refused. */
int agent_token_load(const char *path, char **out, struct pf_error *err);

#endif
