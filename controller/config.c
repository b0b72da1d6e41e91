/* config.c — see config.h. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "pf/log.h"

#ifndef PF_VERSION
#define PF_VERSION "0.0.0"
#endif

#define DEFAULT_MAX_MESSAGE ((size_t)16 << 20)
#define DEFAULT_PROFILE_RETENTION_HOURS 72
#define DEFAULT_PROFILE_MAX_BYTES ((uint64_t)1 << 30)

static int set_str(char **dst, const char *v)
{
	char *c = strdup(v);
	if (!c)
		return -ENOMEM;
	free(*dst);
	*dst = c;
	return 0;
}

void pf_controller_config_defaults(struct pf_controller_config *c)
{
	memset(c, 0, sizeof(*c));
	set_str(&c->listen_host, "127.0.0.1");
	c->port = 4320;
	set_str(&c->data_dir, "./profleet-data");
	c->max_message_bytes = DEFAULT_MAX_MESSAGE;
	c->heartbeat_interval_s = 30;
	c->max_agents = 50000;
	c->max_conns_per_source = 4096;
	c->max_send_queue_bytes = 4u << 20;
	c->max_pending_per_source = 64;
	c->header_timeout_s = 5;
	c->log_level = PF_LOG_INFO;
	c->profile_retention_hours = DEFAULT_PROFILE_RETENTION_HOURS;
	c->profile_max_bytes = DEFAULT_PROFILE_MAX_BYTES;
	c->capture_grace_s = 30;
	c->replica_timeout_s = 30;
}

void pf_controller_config_release(struct pf_controller_config *c)
{
	free(c->listen_host);
	free(c->data_dir);
	free(c->tls_cert);
	free(c->tls_key);
	free(c->client_ca);
	free(c->agent_listen_host);
	free(c->public_url);
	free(c->default_config);
	free(c->admin_token_file);
	free(c->agent_token_file);
	free(c->ui_dir);
	free(c->token_file_dir);
	free(c->store_url);
	memset(c, 0, sizeof(*c));
}

int pf_parse_listen(const char *s, char **host, int *port, struct pf_error *err)
{
	const char *colon;
	char h[256];
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');
		if (!rb || rb[1] != ':')
			return pf_error_set(err, -EINVAL, "listen", "expected [v6addr]:port, got '%s'",
					    s);
		size_t n = (size_t)(rb - s - 1);
		if (n >= sizeof(h))
			return pf_error_set(err, -EINVAL, "listen", "address too long");
		memcpy(h, s + 1, n);
		h[n] = 0;
		colon = rb + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return pf_error_set(err, -EINVAL, "listen", "expected HOST:PORT, got '%s'", s);
		size_t n = (size_t)(colon - s);
		if (n >= sizeof(h))
			return pf_error_set(err, -EINVAL, "listen", "address too long");
		memcpy(h, s, n);
		h[n] = 0;
	}
	char *end;
	errno = 0;
	long p = strtol(colon + 1, &end, 10);
	if (errno || *end || colon[1] == 0 || p < 0 || p > 65535)
		return pf_error_set(err, -EINVAL, "listen", "port must be 0..65535, got '%s'",
				    colon + 1);
	if (set_str(host, h[0] ? h : "0.0.0.0") < 0)
		return -ENOMEM;
	*port = (int)p;
	return 0;
}

static int parse_u64(const char *path, const char *v, uint64_t min, uint64_t max, uint64_t *out,
		     struct pf_error *err)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 10);
	if (errno || *end || !*v || v[0] == '-' || x < min || x > max)
		return pf_error_set(err, -EINVAL, path, "must be %llu..%llu, got '%s'",
				    (unsigned long long)min, (unsigned long long)max, v);
	*out = x;
	return 0;
}

static int apply_key(struct pf_controller_config *c, const char *path, const char *v,
		     struct pf_error *err)
{
	uint64_t x = 0;
	int r;
	if (!strcmp(path, "listen"))
		return pf_parse_listen(v, &c->listen_host, &c->port, err);
	if (!strcmp(path, "data_dir"))
		return set_str(&c->data_dir, v);
	if (!strcmp(path, "log_level")) {
		r = pf_log_parse_level(v);
		if (r < 0)
			return pf_error_set(err, -EINVAL, path,
					    "must be one of error, warn, info, debug, got '%s'", v);
		c->log_level = r;
		return 0;
	}
	if (!strcmp(path, "public_url")) {
		size_t n = strlen(v);
		if ((strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0) || n > 1024 ||
		    strchr(v, '?') || strchr(v, '#') || strchr(v, ' '))
			return pf_error_set(err, -EINVAL, path,
					    "must be an http:// or https:// URL without query, got "
					    "'%.200s'",
					    v);
		r = set_str(&c->public_url, v);
		/* "https://host:4320/" and "https://host:4320" name the same base */
		if (r == 0 && n > 0 && c->public_url[n - 1] == '/')
			c->public_url[n - 1] = 0;
		return r;
	}
	if (!strcmp(path, "store") || !strcmp(path, "store.url")) {
		if (!*v)
			return 0; /* empty: the default SQLite file */
		if (strncmp(v, "postgres://", 11) != 0 && strncmp(v, "postgresql://", 13) != 0)
			return pf_error_set(err, -EINVAL, path,
					    "must be a postgres:// or postgresql:// URL (the default "
					    "is the SQLite file in data_dir), got '%.40s'",
					    v);
		return set_str(&c->store_url, v);
	}
	if (!strcmp(path, "store.replica_timeout_seconds")) {
		r = parse_u64(path, v, 3, 3600, &x, err);
		if (r == 0)
			c->replica_timeout_s = (uint32_t)x;
		return r;
	}
	if (!strcmp(path, "ui.dir")) {
		if (!*v || strlen(v) > 4000)
			return pf_error_set(err, -EINVAL, path, "must be a directory path");
		return set_str(&c->ui_dir, v);
	}
	if (!strcmp(path, "captures.grace_seconds")) {
		r = parse_u64(path, v, 1, 3600, &x, err);
		if (r == 0)
			c->capture_grace_s = (uint32_t)x;
		return r;
	}
	if (!strcmp(path, "default_config"))
		return set_str(&c->default_config, v);
	if (!strcmp(path, "tokens.admin_file"))
		return set_str(&c->admin_token_file, v);
	if (!strcmp(path, "tokens.agent_file"))
		return set_str(&c->agent_token_file, v);
	if (!strcmp(path, "tokens.file_dir"))
		return set_str(&c->token_file_dir, v);
	if (!strcmp(path, "tls.cert"))
		return set_str(&c->tls_cert, v);
	if (!strcmp(path, "tls.key"))
		return set_str(&c->tls_key, v);
	if (!strcmp(path, "tls.client_ca"))
		return set_str(&c->client_ca, v);
	if (!strcmp(path, "tls.agent_listen")) {
		struct pf_error e = {0};
		r = pf_parse_listen(v, &c->agent_listen_host, &c->agent_port, &e);
		if (r < 0) /* the message without pf_parse_listen's "listen: " */
			return pf_error_set(err, r, path, "%s",
					    e.msg + (e.path[0] ? strlen(e.path) + 2 : 0));
		return 0;
	}
	if (!strcmp(path, "opamp.max_message_bytes")) {
		r = parse_u64(path, v, 4096, (uint64_t)256 << 20, &x, err);
		if (r == 0)
			c->max_message_bytes = (size_t)x;
		return r;
	}
	if (!strcmp(path, "opamp.heartbeat_interval_seconds")) {
		r = parse_u64(path, v, 1, 3600, &x, err);
		if (r == 0)
			c->heartbeat_interval_s = (uint32_t)x;
		return r;
	}
	if (!strcmp(path, "opamp.max_connections_per_source")) {
		r = parse_u64(path, v, 0, 1000000, &x, err);
		if (r == 0)
			c->max_conns_per_source = (uint32_t)x;
		return r;
	}
	if (!strcmp(path, "opamp.max_send_queue_bytes")) {
		r = parse_u64(path, v, 65536, (uint64_t)1 << 30, &x, err);
		if (r == 0)
			c->max_send_queue_bytes = (size_t)x;
		return r;
	}
	if (!strcmp(path, "http.max_pending_per_source")) {
		r = parse_u64(path, v, 0, 1000000, &x, err);
		if (r == 0)
			c->max_pending_per_source = (uint32_t)x;
		return r;
	}
	if (!strcmp(path, "http.header_timeout_seconds")) {
		r = parse_u64(path, v, 1, 300, &x, err);
		if (r == 0)
			c->header_timeout_s = (uint32_t)x;
		return r;
	}
	if (!strcmp(path, "opamp.max_agents")) {
		r = parse_u64(path, v, 1, 1000000, &x, err);
		if (r == 0)
			c->max_agents = (uint32_t)x;
		return r;
	}
	if (!strcmp(path, "profiles.retention_hours")) {
		r = parse_u64(path, v, 1, 24 * 366 * 10, &x, err);
		if (r == 0)
			c->profile_retention_hours = (uint32_t)x;
		return r;
	}
	if (!strcmp(path, "profiles.max_bytes")) {
		r = parse_u64(path, v, 4096, (uint64_t)1 << 42, &x, err);
		if (r == 0)
			c->profile_max_bytes = x;
		return r;
	}
	return pf_error_set(err, -EINVAL, path, "unknown key");
}

int pf_controller_config_load(struct pf_controller_config *c, const char *path,
			      struct pf_error *err)
{
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return pf_error_set(err, -errno, NULL, "cannot open config '%s': %s", path,
				    strerror(errno));
	yaml_parser_t p;
	yaml_event_t ev;
	yaml_parser_initialize(&p);
	yaml_parser_set_input_file(&p, fp);
	char section[64] = "";
	char key[64] = "";
	int depth = 0; /* mapping depth */
	bool want_value = false;
	int r = 0;
	for (;;) {
		if (!yaml_parser_parse(&p, &ev)) {
			r = pf_error_set(err, -EINVAL, NULL, "%s: YAML error at line %zu: %s", path,
					 p.problem_mark.line + 1, p.problem ? p.problem : "?");
			break;
		}
		yaml_event_type_t t = ev.type;
		if (t == YAML_STREAM_END_EVENT) {
			yaml_event_delete(&ev);
			break;
		}
		if (t == YAML_MAPPING_START_EVENT) {
			if (depth == 1 && want_value) {
				snprintf(section, sizeof(section), "%s", key);
				want_value = false;
			} else if (depth >= 1) {
				r = pf_error_set(err, -EINVAL, key, "unexpected nested mapping");
			}
			depth++;
		} else if (t == YAML_MAPPING_END_EVENT) {
			depth--;
			if (depth == 1)
				section[0] = 0;
		} else if (t == YAML_SEQUENCE_START_EVENT || t == YAML_ALIAS_EVENT) {
			r = pf_error_set(err, -EINVAL, key[0] ? key : NULL,
					 "lists and aliases are not accepted here");
		} else if (t == YAML_SCALAR_EVENT) {
			const char *v = (const char *)ev.data.scalar.value;
			if (!want_value) {
				snprintf(key, sizeof(key), "%s", v);
				want_value = true;
			} else {
				char full[160];
				if (section[0])
					snprintf(full, sizeof(full), "%s.%s", section, key);
				else
					snprintf(full, sizeof(full), "%s", key);
				r = apply_key(c, full, v, err);
				want_value = false;
			}
		}
		yaml_event_delete(&ev);
		if (r < 0)
			break;
		/* After a section's mapping start, the next scalar is a key. */
		if (t == YAML_MAPPING_START_EVENT || t == YAML_MAPPING_END_EVENT)
			want_value = false;
	}
	yaml_parser_delete(&p);
	fclose(fp);
	return r;
}

static void usage(FILE *to)
{
	fprintf(to,
		"usage: profleet-controller [--config FILE] [--listen HOST:PORT] [--data-dir DIR]\n"
		"                           [--tls-cert F --tls-key F\n"
		"                            [--client-ca F --agent-listen HOST:PORT]]\n"
		"                           [--max-message-bytes N] [--heartbeat-seconds N]\n"
		"                           [--max-agents N] [--log-level error|warn|info|debug]\n"
		"                           [--max-connections-per-source N]\n"
		"                           [--max-send-queue-bytes N]\n"
		"                           [--max-pending-per-source N] [--header-timeout-seconds N]\n"
		"                           [--profile-retention-hours N] [--profile-max-bytes N]\n"
		"                           [--public-url URL] [--capture-grace-seconds N]\n"
		"                           [--default-config FILE]\n"
		"                           [--admin-token-file F] [--agent-token-file F]\n"
		"                           [--ui-dir DIR]\n"
		"                           [--token-file-dir DIR] [--store postgres://...]\n"
		"\n"
		"Serves OpAMP (/v1/opamp), the REST API (/api/v1), /metrics, /healthz and /readyz\n"
		"on one address (default 127.0.0.1:4320). On first start in an empty data dir it\n"
		"writes an admin token and an agent enrollment token to DIR/admin.token and\n"
		"DIR/agent.token (mode 0600).\n"
		"\n"
		"TLS: TLS 1.2 minimum (1.3 preferred), forward-secret AEAD ciphers only; SIGHUP\n"
		"reloads --tls-cert/--tls-key for new connections. --agent-listen opens a second\n"
		"listener (same routes) that requires a client certificate signed by --client-ca;\n"
		"the --listen address never asks for one, so browsers reach the console.\n"
		"\n"
		"OTLP profiles are received at /v1development/profiles (agent token) and kept in\n"
		"the embedded profile store for --profile-retention-hours (default 72) within\n"
		"--profile-max-bytes of compressed profiles (default 1 GiB), oldest deleted first.\n"
		"\n"
		"Incident captures (/api/v1/captures) end at their duration plus\n"
		"--capture-grace-seconds (default 30). --public-url is the URL agents reach this\n"
		"controller at; capture requests then name URL/v1development/profiles as the\n"
		"receiver, otherwise agents derive it from their OpAMP server URL.\n"
		"\n"
		"--default-config FILE: a profiling config (YAML) stored as config 'default' on start\n"
		"when the store has no 'default' yet; an existing 'default' is never overwritten. An\n"
		"invalid file stops the start with the key path of the error.\n"
		"\n"
		"--admin-token-file F, --agent-token-file F: tokens made elsewhere (a Kubernetes\n"
		"Secret); each is added to the store (hash only) on start unless already there, and\n"
		"then no token files are written to the data dir.\n"
		"\n"
		"The fleet console is served at /ui/ from --ui-dir (default: the directory 'ui'\n"
		"next to this binary, else ../share/profleet/ui beside it), read once at start.\n"
		"\n"
		"--token-file-dir DIR: one token per file (a Kubernetes Secret mounted as a\n"
		"directory): the file name is the token's name, the content 'ROLE:SECRET' (role\n"
		"admin, operator, viewer or agent). Added on start; a changed secret replaces the\n"
		"token of that name; a token added this way whose file is gone is revoked.\n"
		"\n"
		"--store postgres://USER@HOST:PORT/DB (or postgresql://, any libpq URI): keep the\n"
		"fleet tables (tokens, audit, configs, assignments, agents, captures, rollouts) in\n"
		"PostgreSQL, so that several controller replicas share them; changes made through\n"
		"one replica reach the agents of the others through LISTEN/NOTIFY. Default: the\n"
		"SQLite file in the data dir. Profiles stay in the data dir (per replica).\n"
		"--replica-timeout-seconds (default 30): a replica silent that long is taken for\n"
		"dead and the rows of its agents are marked disconnected by the others.\n");
}

int pf_controller_config_args(struct pf_controller_config *c, int argc, char **argv,
			      struct pf_error *err)
{
	enum { O_LISTEN = 256, O_DATA, O_CERT, O_KEY, O_CA, O_MAXMSG, O_HB, O_MAXAG, O_LOG,
	       O_CONFIG, O_VERSION, O_HELP, O_PRET, O_PMAX, O_PUBURL, O_GRACE, O_REPTO, O_DEFCFG,
	       O_ADMTOK, O_AGTOK, O_UIDIR, O_TOKDIR, O_PERSRC, O_AGLISTEN,
	       O_SENDQ, O_PENDSRC, O_HDRTO, O_STORE };
	static const struct option opts[] = {
		{"config", required_argument, 0, O_CONFIG},
		{"listen", required_argument, 0, O_LISTEN},
		{"data-dir", required_argument, 0, O_DATA},
		{"tls-cert", required_argument, 0, O_CERT},
		{"tls-key", required_argument, 0, O_KEY},
		{"client-ca", required_argument, 0, O_CA},
		{"agent-listen", required_argument, 0, O_AGLISTEN},
		{"max-message-bytes", required_argument, 0, O_MAXMSG},
		{"heartbeat-seconds", required_argument, 0, O_HB},
		{"max-agents", required_argument, 0, O_MAXAG},
		{"max-connections-per-source", required_argument, 0, O_PERSRC},
		{"max-send-queue-bytes", required_argument, 0, O_SENDQ},
		{"max-pending-per-source", required_argument, 0, O_PENDSRC},
		{"header-timeout-seconds", required_argument, 0, O_HDRTO},
		{"log-level", required_argument, 0, O_LOG},
		{"profile-retention-hours", required_argument, 0, O_PRET},
		{"profile-max-bytes", required_argument, 0, O_PMAX},
		{"public-url", required_argument, 0, O_PUBURL},
		{"capture-grace-seconds", required_argument, 0, O_GRACE},
		{"replica-timeout-seconds", required_argument, 0, O_REPTO},
		{"default-config", required_argument, 0, O_DEFCFG},
		{"admin-token-file", required_argument, 0, O_ADMTOK},
		{"agent-token-file", required_argument, 0, O_AGTOK},
		{"ui-dir", required_argument, 0, O_UIDIR},
		{"token-file-dir", required_argument, 0, O_TOKDIR},
		{"store", required_argument, 0, O_STORE},
		{"version", no_argument, 0, O_VERSION},
		{"help", no_argument, 0, O_HELP},
		{0, 0, 0, 0},
	};
	/* The config file first, so flags override it whatever their order. */
	for (int i = 1; i < argc; i++) {
		const char *file = NULL;
		if (!strcmp(argv[i], "--config") && i + 1 < argc)
			file = argv[i + 1];
		else if (!strncmp(argv[i], "--config=", 9))
			file = argv[i] + 9;
		if (file) {
			int r = pf_controller_config_load(c, file, err);
			if (r < 0)
				return r;
		}
	}
	optind = 1;
	int o, r = 0;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case O_CONFIG:
			break;
		case O_LISTEN:
			r = pf_parse_listen(optarg, &c->listen_host, &c->port, err);
			break;
		case O_DATA:
			r = set_str(&c->data_dir, optarg);
			break;
		case O_CERT:
			r = set_str(&c->tls_cert, optarg);
			break;
		case O_KEY:
			r = set_str(&c->tls_key, optarg);
			break;
		case O_CA:
			r = set_str(&c->client_ca, optarg);
			break;
		case O_AGLISTEN:
			r = apply_key(c, "tls.agent_listen", optarg, err);
			break;
		case O_MAXMSG:
			r = apply_key(c, "opamp.max_message_bytes", optarg, err);
			break;
		case O_HB:
			r = apply_key(c, "opamp.heartbeat_interval_seconds", optarg, err);
			break;
		case O_MAXAG:
			r = apply_key(c, "opamp.max_agents", optarg, err);
			break;
		case O_PERSRC:
			r = apply_key(c, "opamp.max_connections_per_source", optarg, err);
			break;
		case O_SENDQ:
			r = apply_key(c, "opamp.max_send_queue_bytes", optarg, err);
			break;
		case O_PENDSRC:
			r = apply_key(c, "http.max_pending_per_source", optarg, err);
			break;
		case O_HDRTO:
			r = apply_key(c, "http.header_timeout_seconds", optarg, err);
			break;
		case O_LOG:
			r = apply_key(c, "log_level", optarg, err);
			break;
		case O_PRET:
			r = apply_key(c, "profiles.retention_hours", optarg, err);
			break;
		case O_PMAX:
			r = apply_key(c, "profiles.max_bytes", optarg, err);
			break;
		case O_PUBURL:
			r = apply_key(c, "public_url", optarg, err);
			break;
		case O_GRACE:
			r = apply_key(c, "captures.grace_seconds", optarg, err);
			break;
		case O_REPTO:
			r = apply_key(c, "store.replica_timeout_seconds", optarg, err);
			break;
		case O_DEFCFG:
			r = set_str(&c->default_config, optarg);
			break;
		case O_ADMTOK:
			r = set_str(&c->admin_token_file, optarg);
			break;
		case O_AGTOK:
			r = set_str(&c->agent_token_file, optarg);
			break;
		case O_UIDIR:
			r = apply_key(c, "ui.dir", optarg, err);
			break;
		case O_TOKDIR:
			r = set_str(&c->token_file_dir, optarg);
			break;
		case O_STORE:
			r = apply_key(c, "store", optarg, err);
			break;
		case O_VERSION:
			printf("profleet-controller %s\n", PF_VERSION);
			return 1;
		case O_HELP:
			usage(stdout);
			return 1;
		default:
			usage(stderr);
			return pf_error_set(err, -EINVAL, NULL, "bad command line");
		}
		if (r < 0)
			return r;
	}
	if (optind < argc)
		return pf_error_set(err, -EINVAL, NULL, "unexpected argument '%s'", argv[optind]);
	if (!!c->tls_cert != !!c->tls_key)
		return pf_error_set(err, -EINVAL, "tls", "--tls-cert and --tls-key go together");
	if (c->client_ca && !c->tls_cert)
		return pf_error_set(err, -EINVAL, "tls.client_ca", "needs --tls-cert/--tls-key");
	if (!!c->client_ca != !!c->agent_listen_host)
		return pf_error_set(err, -EINVAL, "tls.agent_listen",
				    "--client-ca and --agent-listen go together: agents present "
				    "client certificates on their own listener, so browsers are "
				    "never asked for one on --listen");
	return 0;
}
