/* config.c — see config.h. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "pf/compiler.h"
#include "pf/log.h"

#ifndef PF_VERSION
#define PF_VERSION "0.0.0"
#endif

static int set_str(char **dst, const char *v)
{
	char *c = strdup(v);
	if (!c)
		return -ENOMEM;
	free(*dst);
	*dst = c;
	return 0;
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

/* How a key's value is read: K_STR any string (a file or directory path); K_U32, K_SIZE,
 * K_U64 a decimal in [min, max] into a uint32_t, size_t, uint64_t; K_LISTEN "host:port",
 * "[v6]:port" or ":port" into a char * and the int at off2; K_LOG_LEVEL error, warn, info or
 * debug into an int; K_URL an http:// or https:// base URL without query, a trailing '/'
 * dropped; K_STORE a postgres:// URL ("" keeps the default SQLite file); K_DIR a directory
 * path, not empty. */
enum key_type { K_STR, K_U32, K_SIZE, K_U64, K_LISTEN, K_LOG_LEVEL, K_URL, K_STORE, K_DIR };

/* One setting: its key in the file (a section's keys are "section.key"), its command-line
 * flag (NULL: file only), how it is read, where it goes, its default and range, what it is. */
struct key {
	const char *key;
	const char *flag;
	enum key_type type;
	size_t off, off2;
	uint64_t def, min, max; /* numbers; K_STR-like types: def_str */
	const char *def_str;
	const char *doc;
};

#define F(field) offsetof(struct pf_controller_config, field)

/* Every setting: pf_controller_config_defaults() applies the defaults, the file and the flags
 * go through the same row, and an unknown key is an error that names it. */
static const struct key keys[] = {
    {"listen", "listen", K_LISTEN, F(listen_host), F(port), 0, 0, 0, "127.0.0.1:4320",
     "the address of OpAMP, the API, /metrics and the console"},
    {"data_dir", "data-dir", K_STR, F(data_dir), 0, 0, 0, 0, "./profleet-data",
     "the SQLite store, the profile store and the first-start token files"},
    {"log_level", "log-level", K_LOG_LEVEL, F(log_level), 0, PF_LOG_INFO, 0, 0, NULL,
     "error, warn, info or debug"},
    {"public_url", "public-url", K_URL, F(public_url), 0, 0, 0, 0, NULL,
     "how agents reach this controller (capture requests name its OTLP receiver)"},
    {"store", "store", K_STORE, F(store_url), 0, 0, 0, 0, NULL,
     "the fleet tables in PostgreSQL, shared by replicas (default: SQLite in data_dir)"},
    {"store.url", NULL, K_STORE, F(store_url), 0, 0, 0, 0, NULL, "the same as store"},
    {"store.replica_timeout_seconds", "replica-timeout-seconds", K_U32, F(replica_timeout_s), 0,
     PF_REPLICA_TIMEOUT_DEFAULT_S, 3, 3600, NULL, "a replica silent this long is taken for dead"},
    {"ui.dir", "ui-dir", K_DIR, F(ui_dir), 0, 0, 0, 0, NULL,
     "the built console (default: ui next to the binary, else ../share/profleet/ui)"},
    {"captures.grace_seconds", "capture-grace-seconds", K_U32, F(capture_grace_s), 0, 30, 1,
     3600, NULL, "a capture's deadline is its duration plus this"},
    {"default_config", "default-config", K_STR, F(default_config), 0, 0, 0, 0, NULL,
     "a profiling config stored as config 'default' when the store has none"},
    {"tokens.admin_file", "admin-token-file", K_STR, F(admin_token_file), 0, 0, 0, 0, NULL,
     "an admin token made elsewhere, imported on start"},
    {"tokens.agent_file", "agent-token-file", K_STR, F(agent_token_file), 0, 0, 0, 0, NULL,
     "an agent token made elsewhere, imported on start"},
    {"tokens.file_dir", "token-file-dir", K_STR, F(token_file_dir), 0, 0, 0, 0, NULL,
     "one 'role:secret' file per token, kept in step on start"},
    {"tls.cert", "tls-cert", K_STR, F(tls_cert), 0, 0, 0, 0, NULL, "PEM certificate: TLS on"},
    {"tls.key", "tls-key", K_STR, F(tls_key), 0, 0, 0, 0, NULL, "PEM key of tls.cert"},
    {"tls.client_ca", "client-ca", K_STR, F(client_ca), 0, 0, 0, 0, NULL,
     "agents on tls.agent_listen present a certificate signed by it"},
    {"tls.agent_listen", "agent-listen", K_LISTEN, F(agent_listen_host), F(agent_port), 0, 0, 0,
     NULL, "a second listener, same routes, that requires a client certificate"},
    {"otlp_grpc.listen", "otlp-grpc-listen", K_LISTEN, F(otlp_grpc_host), F(otlp_grpc_port), 0,
     0, 0, NULL, "an OTLP/gRPC profiles receiver (ProfilesService/Export); off when unset"},
    {"opamp.max_message_bytes", "max-message-bytes", K_SIZE, F(max_message_bytes), 0,
     (uint64_t)16 << 20, 4096, (uint64_t)256 << 20, NULL,
     "inbound OpAMP and OTLP profiles limit, after decompression too"},
    {"opamp.heartbeat_interval_seconds", "heartbeat-seconds", K_U32, F(heartbeat_interval_s), 0,
     30, 1, 3600, NULL, "the heartbeat interval agents are told"},
    {"opamp.max_connections_per_source", "max-connections-per-source", K_U32,
     F(max_conns_per_source), 0, 4096, 0, 1000000, NULL,
     "OpAMP WebSockets from one address before 429; 0: no cap"},
    {"opamp.max_send_queue_bytes", "max-send-queue-bytes", K_SIZE, F(max_send_queue_bytes), 0,
     4u << 20, 65536, (uint64_t)1 << 30, NULL,
     "bytes queued for one agent beyond which its connection closes"},
    {"http.max_pending_per_source", "max-pending-per-source", K_U32, F(max_pending_per_source),
     0, 64, 0, 1000000, NULL,
     "connections from one address still sending headers before new ones close; 0: no cap"},
    {"http.header_timeout_seconds", "header-timeout-seconds", K_U32, F(header_timeout_s), 0, 5,
     1, 300, NULL, "the deadline for a request's headers"},
    {"opamp.max_agents", "max-agents", K_U32, F(max_agents), 0, 50000, 1, 1000000, NULL,
     "connected WebSocket agents before 503"},
    {"profiles.retention_hours", "profile-retention-hours", K_U32, F(profile_retention_hours),
     0, 72, 1, 24 * 366 * 10, NULL, "age limit of stored profiles"},
    {"profiles.max_bytes", "profile-max-bytes", K_U64, F(profile_max_bytes), 0,
     (uint64_t)1 << 30, 4096, (uint64_t)1 << 42, NULL, "cap on stored compressed profiles"},
};

#undef F

static const struct key *key_find(const char *path)
{
	for (size_t i = 0; i < PF_ARRAY_SIZE(keys); i++)
		if (!strcmp(keys[i].key, path))
			return &keys[i];
	return NULL;
}

/* x into the number field of k (K_U32, K_SIZE, K_U64, K_LOG_LEVEL). */
static void set_num(struct pf_controller_config *c, const struct key *k, uint64_t x)
{
	char *base = (char *)c;
	if (k->type == K_U32)
		*(uint32_t *)(base + k->off) = (uint32_t)x;
	else if (k->type == K_SIZE)
		*(size_t *)(base + k->off) = (size_t)x;
	else if (k->type == K_U64)
		*(uint64_t *)(base + k->off) = x;
	else
		*(int *)(base + k->off) = (int)x;
}

/* Reads v into the field of k; errors name path (the key, or the key the flag stands for). */
static int key_apply(struct pf_controller_config *c, const struct key *k, const char *path,
		     const char *v, struct pf_error *err)
{
	char *base = (char *)c;
	char **str = (char **)(base + k->off);
	uint64_t x = 0;
	int r;
	switch (k->type) {
	case K_STR:
		return set_str(str, v);
	case K_U32:
	case K_SIZE:
	case K_U64:
		r = parse_u64(path, v, k->min, k->max, &x, err);
		if (r == 0)
			set_num(c, k, x);
		return r;
	case K_LISTEN: {
		struct pf_error e = {0};
		r = pf_parse_listen(v, str, (int *)(base + k->off2), &e);
		if (r < 0 && e.code) /* the message without pf_parse_listen's "listen: " */
			return pf_error_set(err, r, path, "%s",
					    e.msg + (e.path[0] ? strlen(e.path) + 2 : 0));
		return r;
	}
	case K_LOG_LEVEL:
		r = pf_log_parse_level(v);
		if (r < 0)
			return pf_error_set(err, -EINVAL, path,
					    "must be one of error, warn, info, debug, got '%s'", v);
		set_num(c, k, (uint64_t)r);
		return 0;
	case K_URL: {
		size_t n = strlen(v);
		if ((strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0) || n > 1024 ||
		    strchr(v, '?') || strchr(v, '#') || strchr(v, ' '))
			return pf_error_set(err, -EINVAL, path,
					    "must be an http:// or https:// URL without query, got "
					    "'%.200s'",
					    v);
		r = set_str(str, v);
		/* "https://host:4320/" and "https://host:4320" name the same base */
		if (r == 0 && n > 0 && (*str)[n - 1] == '/')
			(*str)[n - 1] = 0;
		return r;
	}
	case K_STORE:
		if (!*v)
			return 0; /* empty: the default SQLite file */
		if (strncmp(v, "postgres://", 11) != 0 && strncmp(v, "postgresql://", 13) != 0)
			return pf_error_set(err, -EINVAL, path,
					    "must be a postgres:// or postgresql:// URL (the default "
					    "is the SQLite file in data_dir), got '%.40s'",
					    v);
		return set_str(str, v);
	case K_DIR:
		if (!*v || strlen(v) > 4000)
			return pf_error_set(err, -EINVAL, path, "must be a directory path");
		return set_str(str, v);
	}
	return -EINVAL;
}

static int apply_key(struct pf_controller_config *c, const char *path, const char *v,
		     struct pf_error *err)
{
	const struct key *k = key_find(path);
	if (!k)
		return pf_error_set(err, -EINVAL, path, "unknown key");
	return key_apply(c, k, path, v, err);
}

void pf_controller_config_defaults(struct pf_controller_config *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < PF_ARRAY_SIZE(keys); i++) {
		const struct key *k = &keys[i];
		if (k->def_str)
			key_apply(c, k, k->key, k->def_str, NULL);
		else if (k->def)
			set_num(c, k, k->def);
	}
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

void pf_controller_config_release(struct pf_controller_config *c)
{
	for (size_t i = 0; i < PF_ARRAY_SIZE(keys); i++) {
		const struct key *k = &keys[i];
		if (k->type == K_U32 || k->type == K_SIZE || k->type == K_U64 ||
		    k->type == K_LOG_LEVEL)
			continue;
		char **str = (char **)((char *)c + k->off);
		free(*str); /* two keys may share a field (store, store.url) */
		*str = NULL;
	}
	memset(c, 0, sizeof(*c));
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
		"                           [--otlp-grpc-listen HOST:PORT]\n"
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
		"Pyroscope SDKs push to /ingest (agent token). --otlp-grpc-listen HOST:PORT (off by\n"
		"default; 4317 is the Collector's) adds an OTLP/gRPC receiver of\n"
		"ProfilesService/Export (the token in the authorization metadata).\n"
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
		"--replica-timeout-seconds (default 6): a replica silent that long is taken for\n"
		"dead and the rows of its agents are marked disconnected by the others.\n");
}

int pf_controller_config_args(struct pf_controller_config *c, int argc, char **argv,
			      struct pf_error *err)
{
	enum { O_CONFIG = 1, O_VERSION, O_HELP, O_KEY = 256 }; /* O_KEY + i: keys[i]'s flag */
	struct option opts[PF_ARRAY_SIZE(keys) + 4] = {
	    {"config", required_argument, 0, O_CONFIG},
	    {"version", no_argument, 0, O_VERSION},
	    {"help", no_argument, 0, O_HELP},
	};
	size_t n_opts = 3;
	for (size_t i = 0; i < PF_ARRAY_SIZE(keys); i++)
		if (keys[i].flag)
			opts[n_opts++] = (struct option){keys[i].flag, required_argument, 0,
							 O_KEY + (int)i};
	opts[n_opts] = (struct option){0, 0, 0, 0};
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
		if (o >= O_KEY && o < O_KEY + (int)PF_ARRAY_SIZE(keys)) {
			const struct key *k = &keys[o - O_KEY];
			r = key_apply(c, k, k->key, optarg, err);
		} else if (o == O_VERSION) {
			printf("profleet-controller %s\n", PF_VERSION);
			return 1;
		} else if (o == O_HELP) {
			usage(stdout);
			return 1;
		} else if (o != O_CONFIG) {
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
