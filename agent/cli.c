/* cli.c — see cli.h. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "listen_addr.h"
#include "opamp/opamp_client.h"
#include "opamp_codec.h"
#include "opamp_session.h"
#include "pf/log.h"
#include "state.h"

void agent_opts_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: profleet-agent [options]\n"
	    "  --config FILE            local profiling config (YAML); defaults without it\n"
	    "  --server URL             controller OpAMP endpoint: ws://, wss://, http://, "
	    "https://\n"
	    "                           (path defaults to /v1/opamp); none: standalone\n"
	    "  --token-file F           file holding the agent token (Authorization: Bearer)\n"
	    "  --ca-file F              CA bundle for wss:// (default: the system CAs)\n"
	    "  --client-cert F, --client-key F\n"
	    "                           client certificate and key (PEM) presented when the\n"
	    "                           controller asks for one (its --agent-listen)\n"
	    "  --allow-insecure         send --token-file's token over plain ws:// to a host\n"
	    "                           other than loopback (refused without it)\n"
	    "  --state-dir DIR          state directory (default " AGENT_DEFAULT_STATE_DIR ")\n"
	    "  --label k=v              operator label reported to the controller (repeatable)\n"
	    "  --log-level L            error|warn|info|debug (default info)\n"
	    "  --heartbeat-seconds N    heartbeat until the server offers one (default 30, 0 off)\n"
	    "  --health-figures-seconds N\n"
	    "                           report health changes that are only new figures in a\n"
	    "                           status (counters) at most every N s (default 30, 1..3600);\n"
	    "                           other health changes go at once\n"
	    "  --max-message-bytes N    inbound/outbound OpAMP message limit (default 64 MiB)\n"
	    "  --metrics-listen A:P     serve Prometheus /metrics and /healthz on A:P, e.g.\n"
	    "                           127.0.0.1:9464 or [::1]:9464 (default: off)\n"
	    "  --no-sampler             do not load the eBPF sampler (pprof targets only)\n"
	    "  --frame-pointers-only    walk user stacks by frame pointers only, no .eh_frame\n"
	    "                           unwind tables (cheaper; stacks of code built without\n"
	    "                           frame pointers end after a frame or two)\n"
	    "  --k8s                    name the pods of profiled processes from the Kubernetes\n"
	    "                           API server (in-cluster service account; node from\n"
	    "                           $K8S_NODE_NAME)\n"
	    "  --k8s-api URL            API server URL instead of the in-cluster one (implies --k8s)\n"
	    "  --k8s-token-file F       bearer token file (default: the service account's)\n"
	    "  --k8s-ca-file F          CA bundle of the API server (default: the service account's)\n"
	    "  --k8s-node NAME          this node's name (default: $K8S_NODE_NAME)\n"
	    "  --version, --help\n");
}

static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int agent_opts_parse(int argc, char **argv, struct agent_opts *o, struct pf_error *err)
{
	enum {
		OPT_CONFIG = 256,
		OPT_SERVER,
		OPT_TOKEN_FILE,
		OPT_CA_FILE,
		OPT_CLIENT_CERT,
		OPT_CLIENT_KEY,
		OPT_ALLOW_INSECURE,
		OPT_STATE_DIR,
		OPT_LABEL,
		OPT_LOG_LEVEL,
		OPT_HEARTBEAT,
		OPT_HEALTH_FIGURES,
		OPT_MAX_MSG,
		OPT_METRICS_LISTEN,
		OPT_NO_SAMPLER,
		OPT_FP_ONLY,
		OPT_VERSION,
		OPT_K8S,
		OPT_K8S_API,
		OPT_K8S_TOKEN,
		OPT_K8S_CA,
		OPT_K8S_NODE,
	};
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, OPT_CONFIG},
	    {"server", required_argument, NULL, OPT_SERVER},
	    {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
	    {"ca-file", required_argument, NULL, OPT_CA_FILE},
	    {"client-cert", required_argument, NULL, OPT_CLIENT_CERT},
	    {"client-key", required_argument, NULL, OPT_CLIENT_KEY},
	    {"allow-insecure", no_argument, NULL, OPT_ALLOW_INSECURE},
	    {"state-dir", required_argument, NULL, OPT_STATE_DIR},
	    {"label", required_argument, NULL, OPT_LABEL},
	    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
	    {"heartbeat-seconds", required_argument, NULL, OPT_HEARTBEAT},
	    {"health-figures-seconds", required_argument, NULL, OPT_HEALTH_FIGURES},
	    {"max-message-bytes", required_argument, NULL, OPT_MAX_MSG},
	    {"metrics-listen", required_argument, NULL, OPT_METRICS_LISTEN},
	    {"no-sampler", no_argument, NULL, OPT_NO_SAMPLER},
	    {"frame-pointers-only", no_argument, NULL, OPT_FP_ONLY},
	    {"k8s", no_argument, NULL, OPT_K8S},
	    {"k8s-api", required_argument, NULL, OPT_K8S_API},
	    {"k8s-token-file", required_argument, NULL, OPT_K8S_TOKEN},
	    {"k8s-ca-file", required_argument, NULL, OPT_K8S_CA},
	    {"k8s-node", required_argument, NULL, OPT_K8S_NODE},
	    {"version", no_argument, NULL, OPT_VERSION},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	uint64_t v;
	int c;

	memset(o, 0, sizeof(*o));
	o->state_dir = AGENT_DEFAULT_STATE_DIR;
	o->log_level = PF_LOG_INFO;
	o->heartbeat_s = AGENT_DEFAULT_HEARTBEAT_S;
	o->health_figures_s = AGENT_SESSION_FIGURES_MS / 1000;
	o->max_message_bytes = PF_OPAMP_DEFAULT_MAX_MSG;

	optind = 0; /* GNU: full re-initialisation */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_CONFIG:
			o->config_file = optarg;
			break;
		case OPT_SERVER:
			o->server_url = optarg;
			break;
		case OPT_TOKEN_FILE:
			o->token_file = optarg;
			break;
		case OPT_CA_FILE:
			o->ca_file = optarg;
			break;
		case OPT_CLIENT_CERT:
			o->client_cert = optarg;
			break;
		case OPT_CLIENT_KEY:
			o->client_key = optarg;
			break;
		case OPT_ALLOW_INSECURE:
			o->allow_insecure = true;
			break;
		case OPT_STATE_DIR:
			if (!*optarg)
				return pf_error_set(err, -EINVAL, "--state-dir",
						    "must not be empty");
			o->state_dir = optarg;
			break;
		case OPT_LABEL: {
			const char *eq = strchr(optarg, '=');
			if (!eq || eq == optarg)
				return pf_error_set(err, -EINVAL, "--label",
						    "expected key=value, got '%s'", optarg);
			if (o->n_labels >= AGENT_CLI_MAX_LABELS)
				return pf_error_set(err, -EINVAL, "--label", "at most %d labels",
						    AGENT_CLI_MAX_LABELS);
			o->labels[o->n_labels++] = optarg;
			break;
		}
		case OPT_LOG_LEVEL: {
			int l = pf_log_parse_level(optarg);
			if (l < 0)
				return pf_error_set(err, -EINVAL, "--log-level",
						    "must be error, warn, info or debug, got '%s'",
						    optarg);
			o->log_level = l;
			break;
		}
		case OPT_HEARTBEAT:
			if (parse_u64(optarg, 86400, &v) < 0)
				return pf_error_set(err, -EINVAL, "--heartbeat-seconds",
						    "must be 0..86400, got '%s'", optarg);
			o->heartbeat_s = v;
			break;
		case OPT_HEALTH_FIGURES:
			if (parse_u64(optarg, 3600, &v) < 0 || v < 1)
				return pf_error_set(err, -EINVAL, "--health-figures-seconds",
						    "must be 1..3600, got '%s'", optarg);
			o->health_figures_s = v;
			break;
		case OPT_MAX_MSG:
			if (parse_u64(optarg, (uint64_t)1 << 30, &v) < 0 || v < 4096)
				return pf_error_set(err, -EINVAL, "--max-message-bytes",
						    "must be 4096..1073741824, got '%s'", optarg);
			o->max_message_bytes = (size_t)v;
			break;
		case OPT_METRICS_LISTEN: {
			struct agent_listen_addr l;
			int r = agent_listen_addr_parse(optarg, &l, err);
			if (r < 0)
				return r;
			o->metrics_listen = optarg;
			break;
		}
		case OPT_NO_SAMPLER:
			o->no_sampler = true;
			break;
		case OPT_FP_ONLY:
			o->frame_pointers_only = true;
			break;
		case OPT_K8S:
			o->k8s = true;
			break;
		case OPT_K8S_API:
			o->k8s = true;
			o->k8s_api = optarg;
			break;
		case OPT_K8S_TOKEN:
			o->k8s = true;
			o->k8s_token_file = optarg;
			break;
		case OPT_K8S_CA:
			o->k8s = true;
			o->k8s_ca_file = optarg;
			break;
		case OPT_K8S_NODE:
			o->k8s = true;
			o->k8s_node = optarg;
			break;
		case OPT_VERSION:
			o->version = true;
			break;
		case 'h':
			o->help = true;
			break;
		default: {
			const char *bad = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
			return pf_error_set(err, -EINVAL, "", "unknown or incomplete option '%s'",
					    bad);
		}
		}
	}
	if (optind < argc)
		return pf_error_set(err, -EINVAL, "", "unexpected argument '%s'", argv[optind]);
	if (o->token_file && !o->server_url)
		return pf_error_set(err, -EINVAL, "--token-file", "needs --server");
	if (!!o->client_cert != !!o->client_key)
		return pf_error_set(err, -EINVAL, "--client-cert",
				    "--client-cert and --client-key go together");
	if (o->client_cert && !o->server_url)
		return pf_error_set(err, -EINVAL, "--client-cert", "needs --server");
	if (o->token_file && !o->allow_insecure) {
		struct agent_url u;
		if (agent_url_parse(o->server_url, &u, err) < 0)
			return err->code;
		if (!u.tls && !agent_url_is_loopback(&u))
			return pf_error_set(err, -EINVAL, "--server",
					    "refusing to send the agent token in plain text to %s "
					    "(not loopback); use wss:// (or https://), or "
					    "--allow-insecure on a network you trust",
					    u.host);
	}
	return 0;
}

static bool is_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

int agent_token_load(const char *path, char **out, struct pf_error *err)
{
	char *text = NULL;
	size_t len;
	int r = agent_read_file(path, AGENT_TOKEN_MAX + 1024, &text, &len);
	if (r < 0)
		return pf_error_set(err, r, "--token-file", "cannot read '%s': %s", path,
				    strerror(-r));
	size_t a = 0, b = len;
	while (a < b && is_space(text[a]))
		a++;
	while (b > a && is_space(text[b - 1]))
		b--;
	if (a == b) {
		free(text);
		return pf_error_set(err, -EINVAL, "--token-file", "'%s' is empty", path);
	}
	if (b - a > AGENT_TOKEN_MAX) {
		free(text);
		return pf_error_set(err, -EINVAL, "--token-file", "token in '%s' is too long",
				    path);
	}
	for (size_t i = a; i < b; i++) {
		unsigned char ch = (unsigned char)text[i];
		if (ch <= 0x20 || ch == 0x7f) {
			free(text);
			return pf_error_set(
			    err, -EINVAL, "--token-file",
			    "token in '%s' contains whitespace or control characters", path);
		}
	}
	memmove(text, text + a, b - a);
	text[b - a] = '\0';
	*out = text;
	return 0;
}
