/* cli.c — see cli.h. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "endpoints/listen_addr.h"
#include "opamp/opamp_client.h"
#include "opamp/opamp_session.h"
#include "opamp_codec.h"
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

/* One command-line option: a string, a flag, or a number in [min, max] stored at off in
 * struct agent_opts; or a check of its own (fn). k8s: any --k8s-* option turns --k8s on. */
enum opt_kind { OPT_STR, OPT_FLAG, OPT_U64, OPT_SIZE, OPT_FN };

struct opt_spec {
	const char *name;
	enum opt_kind kind;
	size_t off;
	uint64_t min, max;
	int (*fn)(struct agent_opts *o, const char *arg, struct pf_error *err);
	bool k8s;
};

static int opt_state_dir(struct agent_opts *o, const char *arg, struct pf_error *err)
{
	if (!*arg)
		return pf_error_set(err, -EINVAL, "--state-dir", "must not be empty");
	o->state_dir = arg;
	return 0;
}

static int opt_label(struct agent_opts *o, const char *arg, struct pf_error *err)
{
	const char *eq = strchr(arg, '=');
	if (!eq || eq == arg)
		return pf_error_set(err, -EINVAL, "--label", "expected key=value, got '%s'", arg);
	if (o->n_labels >= AGENT_CLI_MAX_LABELS)
		return pf_error_set(err, -EINVAL, "--label", "at most %d labels",
				    AGENT_CLI_MAX_LABELS);
	o->labels[o->n_labels++] = arg;
	return 0;
}

static int opt_log_level(struct agent_opts *o, const char *arg, struct pf_error *err)
{
	int l = pf_log_parse_level(arg);
	if (l < 0)
		return pf_error_set(err, -EINVAL, "--log-level",
				    "must be error, warn, info or debug, got '%s'", arg);
	o->log_level = l;
	return 0;
}

static int opt_metrics_listen(struct agent_opts *o, const char *arg, struct pf_error *err)
{
	struct agent_listen_addr l;
	int r = agent_listen_addr_parse(arg, &l, err);
	if (r < 0)
		return r;
	o->metrics_listen = arg;
	return 0;
}

#define OFF(field) offsetof(struct agent_opts, field)
#define STR(n, f) {.name = n, .kind = OPT_STR, .off = OFF(f)}
#define K8S(n, f) {.name = n, .kind = OPT_STR, .off = OFF(f), .k8s = true}
#define FLAG(n, f) {.name = n, .kind = OPT_FLAG, .off = OFF(f)}
#define NUM(n, k, f, lo, hi) {.name = n, .kind = k, .off = OFF(f), .min = lo, .max = hi}
#define FN(n, f) {.name = n, .kind = OPT_FN, .fn = f}

static const struct opt_spec opt_specs[] = {
    STR("config", config_file),
    STR("server", server_url),
    STR("token-file", token_file),
    STR("ca-file", ca_file),
    STR("client-cert", client_cert),
    STR("client-key", client_key),
    FLAG("allow-insecure", allow_insecure),
    FN("state-dir", opt_state_dir),
    FN("label", opt_label),
    FN("log-level", opt_log_level),
    NUM("heartbeat-seconds", OPT_U64, heartbeat_s, 0, 86400),
    NUM("health-figures-seconds", OPT_U64, health_figures_s, 1, 3600),
    NUM("max-message-bytes", OPT_SIZE, max_message_bytes, 4096, (uint64_t)1 << 30),
    FN("metrics-listen", opt_metrics_listen),
    FLAG("no-sampler", no_sampler),
    FLAG("frame-pointers-only", frame_pointers_only),
    FLAG("k8s", k8s),
    K8S("k8s-api", k8s_api),
    K8S("k8s-token-file", k8s_token_file),
    K8S("k8s-ca-file", k8s_ca_file),
    K8S("k8s-node", k8s_node),
    FLAG("version", version),
    FLAG("help", help),
};

#define N_OPTS (sizeof(opt_specs) / sizeof(opt_specs[0]))

static int opt_apply(const struct opt_spec *sp, struct agent_opts *o, const char *arg,
		     struct pf_error *err)
{
	char *field = (char *)o + sp->off;
	uint64_t v;
	if (sp->k8s)
		o->k8s = true;
	switch (sp->kind) {
	case OPT_STR:
		*(const char **)(void *)field = arg;
		return 0;
	case OPT_FLAG:
		*(bool *)(void *)field = true;
		return 0;
	case OPT_U64:
	case OPT_SIZE:
		if (parse_u64(arg, sp->max, &v) < 0 || v < sp->min) {
			char key[48];
			snprintf(key, sizeof(key), "--%s", sp->name);
			return pf_error_set(err, -EINVAL, key,
					    "must be %" PRIu64 "..%" PRIu64 ", got '%s'", sp->min,
					    sp->max, arg);
		}
		if (sp->kind == OPT_SIZE)
			*(size_t *)(void *)field = (size_t)v;
		else
			*(uint64_t *)(void *)field = v;
		return 0;
	case OPT_FN:
		return sp->fn(o, arg, err);
	}
	return -EINVAL;
}

int agent_opts_parse(int argc, char **argv, struct agent_opts *o, struct pf_error *err)
{
	struct option longopts[N_OPTS + 1];
	int c;

	for (size_t i = 0; i < N_OPTS; i++) {
		const struct opt_spec *sp = &opt_specs[i];
		longopts[i] = (struct option){.name = sp->name,
					      .has_arg = sp->kind == OPT_FLAG ? no_argument
									      : required_argument,
					      .val = (int)i};
	}
	longopts[N_OPTS] = (struct option){0};

	memset(o, 0, sizeof(*o));
	o->state_dir = AGENT_DEFAULT_STATE_DIR;
	o->log_level = PF_LOG_INFO;
	o->heartbeat_s = AGENT_DEFAULT_HEARTBEAT_S;
	o->health_figures_s = AGENT_SESSION_FIGURES_MS / 1000;
	o->max_message_bytes = PF_OPAMP_DEFAULT_MAX_MSG;

	optind = 0; /* GNU: full re-initialisation */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (c == 'h') {
			o->help = true;
			continue;
		}
		if (c < 0 || (size_t)c >= N_OPTS) {
			const char *bad = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
			return pf_error_set(err, -EINVAL, "", "unknown or incomplete option '%s'",
					    bad);
		}
		int rc = opt_apply(&opt_specs[c], o, optarg, err);
		if (rc < 0)
			return rc;
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
