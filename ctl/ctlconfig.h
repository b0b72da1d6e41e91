/* ctl/ctlconfig.h — where profleetctl gets its server, token and TLS settings: flags first,
 * then the environment (PROFLEET_SERVER, PROFLEET_TOKEN), then a config file, then the default
 * server http://127.0.0.1:4320.
 *
 * The config file is --config FILE, else $XDG_CONFIG_HOME/profleet/ctl.yaml, else
 * $HOME/.config/profleet/ctl.yaml (used only when it exists). It is one YAML mapping of scalars
 * with the keys server, token, ca_file, insecure_skip_verify; any other key is an error naming
 * it. A file that holds a token must not be readable or writable by group or others (mode
 * 0600 or stricter), else it is refused with a message that says how to fix it. Files over
 * 64 KiB are refused; so are token files over 4 KiB.
 *
 * The inputs are passed in (struct ctl_config_sources), not read from the process, so the
 * precedence is testable without touching the environment. */
#ifndef CTL_CTLCONFIG_H
#define CTL_CTLCONFIG_H

#include <stdbool.h>

#include "pf/error.h"

#define CTL_DEFAULT_SERVER "http://127.0.0.1:4320"
#define CTL_CONFIG_MAX_FILE 65536
#define CTL_TOKEN_MAX_FILE 4096

struct ctl_config {
	char *server;
	char *token;   /* NULL when none */
	char *ca_file; /* NULL when none */
	bool insecure_skip_verify;
	char *file; /* the config file that was read, NULL when none */
};

struct ctl_config_sources {
	/* flags; NULL when not given */
	const char *server, *token, *token_file, *config_file, *ca_file;
	bool insecure; /* --insecure-skip-verify given */
	/* environment; NULL when unset */
	const char *env_server, *env_token, *env_xdg_config_home, *env_home;
};

/* Fills out from the sources in precedence order. Errors (with err): a --config file that does
 * not exist, an unreadable or malformed config or token file, a token in a file with a mode
 * other than 0600/0400. out is released on failure. */
int ctl_config_resolve(const struct ctl_config_sources *src, struct ctl_config *out,
		       struct pf_error *err);
/* Reads one config file into out (fields it does not set stay NULL/false). */
int ctl_config_read_file(const char *path, struct ctl_config *out, struct pf_error *err);
/* The first line of a token file, without surrounding whitespace. */
int ctl_config_read_token_file(const char *path, char **out, struct pf_error *err);
void ctl_config_release(struct ctl_config *c);

#endif
