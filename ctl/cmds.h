/* ctl/cmds.h — profleetctl's commands: the command table (name, arguments, options, help,
 * handler), the global options, finding the command in argv, per-command --help, the exit
 * statuses and the bash completion script generated from the same table. ctl_main() is the
 * whole program (main.c only calls it); the handlers live in cmd_fleet.c (agents, config,
 * assign), cmd_capture.c (capture, captures) and cmd_profiles.c (profiles, pprof, top).
 *
 * A handler returns the process's exit status and, for an error, fills ctx->error; ctl_main
 * prints it once as "profleetctl: <message>". */
#ifndef CTL_CMDS_H
#define CTL_CMDS_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include "args.h"
#include "ctlconfig.h"
#include "http.h"
#include "output.h"
#include "pf/compiler.h"
#include "pf/error.h"

/* Exit statuses (also in `profleetctl --help` and docs/cli.md). */
enum ctl_exit {
	CTL_EXIT_OK = 0,
	CTL_EXIT_ERROR = 1,	    /* the server refused, could not be reached, or I/O failed */
	CTL_EXIT_USAGE = 2,	    /* bad command line or invalid local input */
	CTL_EXIT_PARTIAL = 3,	    /* capture --wait: partial (some agents delivered) */
	CTL_EXIT_FAILED = 4,	    /* capture --wait: failed (no agent delivered) */
	CTL_EXIT_CANCELLED = 5,	    /* capture --wait: cancelled by someone else */
	CTL_EXIT_INTERRUPTED = 130, /* Ctrl-C during capture --wait (the capture is cancelled) */
};

struct ctl_ctx {
	const struct ctl_cmd *cmd;
	const struct ctl_args *args;
	enum ctl_format format;
	struct ctl_config cfg; /* resolved for commands that talk to the server */
	struct ctl_http *http; /* NULL for local commands */
	FILE *out, *err;       /* stdout, stderr */
	struct pf_error *error;
	volatile sig_atomic_t *interrupted; /* set by the SIGINT handler */
	long poll_ms;			    /* capture --wait poll interval */
};

struct ctl_cmd {
	const char *group; /* "config" for "config get", NULL for a top-level command */
	const char *name;
	const char *args_usage; /* positionals and options for the usage line */
	const char *summary;
	const char *details;	    /* printed by --help under the usage, may be NULL */
	const struct ctl_opt *opts; /* terminated by {NULL}; never NULL */
	size_t min_pos, max_pos;
	bool needs_server;
	int (*run)(struct ctl_ctx *c);
};

extern const struct ctl_opt ctl_global_opts[];

/* Finds the command in argv (global options may come before it) and parses the rest against
 * its options and the global ones. argv[0] is the program. *cmd is NULL with 0 returned for
 * `profleetctl`, `profleetctl --help` and `profleetctl help` (show the overview). -EINVAL with
 * err for an unknown command or bad options; a wrong number of positionals is checked too,
 * unless --help was given. */
int ctl_cmd_parse(int argc, char *const *argv, const struct ctl_cmd **cmd, struct ctl_args *a,
		  struct pf_error *err);
void ctl_print_help(FILE *f, const struct ctl_cmd *cmd);
void ctl_print_completion_bash(FILE *f);
int ctl_main(int argc, char **argv);

/* Handlers. */
int ctl_cmd_agents(struct ctl_ctx *c);
int ctl_cmd_config_get(struct ctl_ctx *c);
int ctl_cmd_config_set(struct ctl_ctx *c);
int ctl_cmd_config_versions(struct ctl_ctx *c);
int ctl_cmd_config_validate(struct ctl_ctx *c);
int ctl_cmd_assign(struct ctl_ctx *c);
int ctl_cmd_capture(struct ctl_ctx *c);
int ctl_cmd_captures(struct ctl_ctx *c);
int ctl_cmd_profiles(struct ctl_ctx *c);
int ctl_cmd_pprof(struct ctl_ctx *c);
int ctl_cmd_top(struct ctl_ctx *c);
int ctl_cmd_rollout_start(struct ctl_ctx *c);
int ctl_cmd_rollouts(struct ctl_ctx *c);
int ctl_cmd_rollout_action(struct ctl_ctx *c);

/* Shared by the handlers. ctl_fail: the exit status of a failed request (130 when Ctrl-C
 * aborted it, else 1). ctl_since_from_ms: --since D as the "from" query value (Unix ms of now
 * minus D) in buf, "" without --since; -EINVAL with c->error for a bad duration. */
int ctl_fail(struct ctl_ctx *c, int rc);
int ctl_since_from_ms(struct ctl_ctx *c, char *buf, size_t n);
/* ctl_http_json on a path built in a pf_buf; an exit status (CTL_EXIT_OK or the failure's). */
int ctl_call(struct ctl_ctx *c, const char *method, const struct pf_buf *path, json_t *body,
	     json_t **out);
/* GETs path. With --output json it prints the answer and leaves *r NULL (the caller just
 * returns the status); else *r is the answer to render. */
int ctl_fetch(struct ctl_ctx *c, const struct pf_buf *path, json_t **r);
/* Adds the value of option --opt (when given) as query parameter key. */
int ctl_query_opt(struct ctl_ctx *c, struct pf_buf *p, const char *key, const char *opt);
/* Adds --limit (checked to be 1..max) to the query. */
int ctl_query_limit(struct ctl_ctx *c, struct pf_buf *p, int64_t max);
/* Prints a finished table (NULL = it could not be built); an exit status. */
int ctl_table_done(struct ctl_ctx *c, struct ctl_table *t);

static inline void ctl_json_decrefp(json_t **j)
{
	json_decref(*j);
}
static inline void ctl_buf_releasep(struct pf_buf *b)
{
	pf_buf_release(b);
}
#define _cleanup_json_ _cleanup_(ctl_json_decrefp)
#define _cleanup_buf_ _cleanup_(ctl_buf_releasep)

/* Prints j as JSON (--output json) and returns CTL_EXIT_OK, or CTL_EXIT_ERROR on I/O error. */
int ctl_emit_json(struct ctl_ctx *c, const json_t *j);

#endif
