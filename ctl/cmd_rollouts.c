/* cmd_rollouts.c — rollout start, rollouts [ID], rollout pause|resume|rollback|cancel ID
 * (see cmds.h, docs/cli.md and docs/rollouts.md). */
#include "cmds.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static int rollout_path(struct ctl_ctx *c, struct pf_buf *p, const char *id, const char *verb)
{
	pf_buf_init(p, 4096);
	if (pf_buf_append_str(p, "/api/v1/rollouts") < 0 || (id && ctl_path_add(p, id) < 0) ||
	    (verb && ctl_path_add(p, verb) < 0)) {
		pf_error_set(c->error, -E2BIG, "", "rollout id too long");
		return CTL_EXIT_USAGE;
	}
	return CTL_EXIT_OK;
}

/* A whole number option (when given) into the strategy object: 0, or -EINVAL with c->error. */
static int strategy_num(struct ctl_ctx *c, json_t *strategy, const char *opt, const char *key,
			int64_t min, int64_t max)
{
	const char *v = ctl_args_str(c->args, opt);
	if (!v)
		return 0;
	char *end = NULL;
	errno = 0;
	long long n = strtoll(v, &end, 10);
	if (errno || !end || *end || end == v || n < min || n > max)
		return pf_error_set(c->error, -EINVAL, "", "--%s: must be %" PRId64 "..%" PRId64
				    ", got '%s'", opt, min, max, v);
	json_object_set_new(strategy, key, json_integer(n));
	return 0;
}

/* One rollout, with a line per batch. */
static int print_rollout(struct ctl_ctx *c, const json_t *r)
{
	fprintf(c->out, "rollout %s: %s v%" PRId64 ", %s, %" PRId64 " agents, batch %" PRId64
			" of %" PRId64 "\n",
		ctl_jstr(r, "id"), ctl_jstr(r, "config"), ctl_jint(r, "version"),
		ctl_jstr(r, "state"), ctl_jint(r, "agents"), ctl_jint(r, "current_batch"),
		ctl_jint(r, "n_batches"));
	if (*ctl_jstr(r, "reason"))
		fprintf(c->out, "reason: %s\n", ctl_jstr(r, "reason"));
	_cleanup_(ctl_table_freep) struct ctl_table *t =
	    ctl_table_new((const char *const[]){"BATCH", "STATE", "AGENTS", "APPLIED", "FAILED",
						"PENDING", "OFFLINE", "REVERTED", NULL});
	const json_t *b;
	size_t i;
	json_array_foreach(json_object_get(r, "batches"), i, b)
	{
		if (!t || ctl_table_row(t) < 0)
			break;
		ctl_table_cell(t, "%" PRId64, ctl_jint(b, "number"));
		ctl_table_cell(t, "%s", ctl_jstr(b, "state"));
		ctl_table_cell(t, "%" PRId64, ctl_jint(b, "agents"));
		ctl_table_cell(t, "%" PRId64, ctl_jint(b, "applied"));
		ctl_table_cell(t, "%" PRId64, ctl_jint(b, "failed"));
		ctl_table_cell(t, "%" PRId64, ctl_jint(b, "pending"));
		ctl_table_cell(t, "%" PRId64, ctl_jint(b, "offline"));
		ctl_table_cell(t, "%" PRId64, ctl_jint(b, "reverted"));
	}
	int st = ctl_table_done(c, t);
	json_array_foreach(json_object_get(r, "batches"), i, b)
	{
		const json_t *e;
		size_t k;
		json_array_foreach(json_object_get(b, "errors"), k, e)
			fprintf(c->out, "batch %" PRId64 ": agent %s: %s\n", ctl_jint(b, "number"),
				ctl_jstr(e, "agent"), ctl_jstr(e, "error"));
	}
	return st;
}

int ctl_cmd_rollout_start(struct ctl_ctx *c)
{
	const char *config = ctl_args_str(c->args, "config");
	if (!config) {
		pf_error_set(c->error, -EINVAL, "", "rollout start: --config is required");
		return CTL_EXIT_USAGE;
	}
	_cleanup_json_ json_t *body = json_pack("{s:s}", "config", config);
	json_t *strategy = json_object();
	if (!body || !strategy) {
		json_decref(strategy);
		return CTL_EXIT_ERROR;
	}
	json_object_set_new(body, "strategy", strategy);
	const char *sel = ctl_args_str(c->args, "selector");
	if (sel)
		json_object_set_new(body, "selector", json_string(sel));
	const char *pause = ctl_args_str(c->args, "pause");
	uint64_t pause_s = 0;
	if (pause && ctl_parse_duration("--pause", pause, &pause_s, c->error) < 0)
		return CTL_EXIT_USAGE;
	if (pause)
		json_object_set_new(strategy, "pause_seconds", json_integer((json_int_t)pause_s));
	if (ctl_args_flag(c->args, "rollback"))
		json_object_set_new(strategy, "on_failure", json_string("rollback"));
	const char *ver = ctl_args_str(c->args, "version");
	if (ver) {
		char *end = NULL;
		long long v = strtoll(ver, &end, 10);
		if (!end || *end || v < 1) {
			pf_error_set(c->error, -EINVAL, "", "--version: must be a version number, got '%s'",
				     ver);
			return CTL_EXIT_USAGE;
		}
		json_object_set_new(body, "version", json_integer(v));
	}
	/* the server checks the ranges too; these only catch typos early */
	if (strategy_num(c, strategy, "initial", "initial", 1, 1000000) < 0 ||
	    strategy_num(c, strategy, "multiplier", "multiplier", 1, 1000) < 0 ||
	    strategy_num(c, strategy, "max-batch-percent", "max_batch_percent", 1, 100) < 0 ||
	    strategy_num(c, strategy, "max-failure-percent", "max_failure_percent", 0, 100) < 0)
		return CTL_EXIT_USAGE;
	_cleanup_buf_ struct pf_buf p = {0};
	int st = rollout_path(c, &p, NULL, NULL);
	if (st != CTL_EXIT_OK)
		return st;
	_cleanup_json_ json_t *r = NULL;
	if ((st = ctl_call(c, "POST", &p, body, &r)) != CTL_EXIT_OK)
		return st;
	if (c->format == CTL_OUT_JSON)
		return ctl_emit_json(c, r);
	fprintf(c->out, "rollout %s of %s: %s\n", ctl_jstr(r, "id"), config, ctl_jstr(r, "state"));
	fprintf(c->out, "follow it with: profleetctl rollouts %s\n", ctl_jstr(r, "id"));
	return CTL_EXIT_OK;
}

int ctl_cmd_rollouts(struct ctl_ctx *c)
{
	const char *id = c->args->n_pos ? c->args->pos[0] : NULL;
	_cleanup_buf_ struct pf_buf p = {0};
	int st = rollout_path(c, &p, id, NULL);
	if (st != CTL_EXIT_OK)
		return st;
	if (!id && ((ctl_args_flag(c->args, "active") && pf_buf_append_str(&p, "?active=1") < 0) ||
		    ctl_query_limit(c, &p, 1000) < 0))
		return CTL_EXIT_USAGE;
	_cleanup_json_ json_t *r = NULL;
	if ((st = ctl_fetch(c, &p, &r)) != CTL_EXIT_OK || !r)
		return st;
	if (id)
		return print_rollout(c, r);
	_cleanup_(ctl_table_freep) struct ctl_table *t = ctl_table_new((const char *const[]){
	    "ID", "CONFIG", "VERSION", "STATE", "AGENTS", "BATCH", "REASON", NULL});
	const json_t *ro;
	size_t i;
	json_array_foreach(json_object_get(r, "rollouts"), i, ro)
	{
		if (!t || ctl_table_row(t) < 0)
			break;
		ctl_table_cell(t, "%s", ctl_jstr(ro, "id"));
		ctl_table_cell(t, "%s", ctl_jstr(ro, "config"));
		ctl_table_cell(t, "%" PRId64, ctl_jint(ro, "version"));
		ctl_table_cell(t, "%s", ctl_jstr(ro, "state"));
		ctl_table_cell(t, "%" PRId64, ctl_jint(ro, "agents"));
		ctl_table_cell(t, "%" PRId64 "/%" PRId64, ctl_jint(ro, "current_batch"),
			       ctl_jint(ro, "n_batches"));
		ctl_table_cell(t, "%s", ctl_jstr(ro, "reason"));
	}
	return ctl_table_done(c, t);
}

/* rollout pause|resume|rollback|cancel ID: the verb is the command's name. */
int ctl_cmd_rollout_action(struct ctl_ctx *c)
{
	_cleanup_buf_ struct pf_buf p = {0};
	int st = rollout_path(c, &p, c->args->pos[0], c->cmd->name);
	if (st != CTL_EXIT_OK)
		return st;
	_cleanup_json_ json_t *r = NULL;
	if ((st = ctl_call(c, "POST", &p, NULL, &r)) != CTL_EXIT_OK)
		return st;
	if (c->format == CTL_OUT_JSON)
		return ctl_emit_json(c, r);
	return print_rollout(c, r);
}
