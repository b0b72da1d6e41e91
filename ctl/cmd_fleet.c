/* cmd_fleet.c — agents, config get|set|versions|validate, assign (see cmds.h and
 * docs/cli.md). */
#include "cmds.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pf/compiler.h"
#include "pf/profcfg.h"

int ctl_cmd_agents(struct ctl_ctx *c)
{
	_cleanup_buf_ struct pf_buf p;
	pf_buf_init(&p, 8192);
	pf_buf_append_str(&p, "/api/v1/agents");
	if (ctl_query_opt(c, &p, "selector", "selector") < 0 || ctl_query_limit(c, &p, 10000) < 0)
		return CTL_EXIT_USAGE;
	_cleanup_json_ json_t *r = NULL;
	int st = ctl_fetch(c, &p, &r);
	if (st != CTL_EXIT_OK || !r)
		return st;
	_cleanup_(ctl_table_freep) struct ctl_table *t = ctl_table_new((const char *const[]){
	    "INSTANCE_UID", "STATE", "HEALTHY", "HOST", "CONFIG", "STATUS", "LAST_SEEN", NULL});
	json_t *agents = json_object_get(r, "agents"), *ag;
	size_t i;
	json_array_foreach(agents, i, ag)
	{
		if (!t || ctl_table_row(t) < 0)
			break;
		json_t *cfg = json_object_get(ag, "config");
		bool conn = json_is_true(json_object_get(ag, "connected"));
		bool stale = json_is_true(json_object_get(ag, "stale"));
		char seen[32], cfgname[128];
		ctl_fmt_time_ms(ctl_jint(ag, "last_seen"), seen, sizeof(seen));
		if (*ctl_jstr(cfg, "name"))
			snprintf(cfgname, sizeof(cfgname), "%s v%" PRId64, ctl_jstr(cfg, "name"),
				 ctl_jint(cfg, "version"));
		else
			snprintf(cfgname, sizeof(cfgname), "-");
		ctl_table_cell(t, "%s", ctl_jstr(ag, "instance_uid"));
		ctl_table_cell(t, "%s", !conn ? "disconnected" : stale ? "stale" : "connected");
		ctl_table_cell(t, "%s",
			       json_is_true(json_object_get(ag, "healthy")) ? "yes" : "no");
		ctl_table_cell(t, "%s", ctl_jstr(json_object_get(ag, "attributes"), "host.name"));
		ctl_table_cell(t, "%s", cfgname);
		ctl_table_cell(t, "%s", ctl_jstr(cfg, "status"));
		ctl_table_cell(t, "%s", seen);
	}
	st = ctl_table_done(c, t);
	if (st == CTL_EXIT_OK && json_is_string(json_object_get(r, "next_cursor")))
		fprintf(c->err,
			"(%" PRId64 " agents match; showing the first %zu: raise --limit or "
			"narrow --selector)\n",
			ctl_jint(r, "matched"), json_array_size(agents));
	return st;
}

static int config_path(struct ctl_ctx *c, struct pf_buf *p, const char *name, const char *suffix)
{
	pf_buf_init(p, 4096);
	if (pf_buf_append_str(p, "/api/v1/configs") < 0 || ctl_path_add(p, name) < 0 ||
	    (suffix && pf_buf_append_str(p, suffix) < 0)) {
		pf_error_set(c->error, -E2BIG, "", "config name too long");
		return CTL_EXIT_USAGE;
	}
	return CTL_EXIT_OK;
}

int ctl_cmd_config_get(struct ctl_ctx *c)
{
	_cleanup_buf_ struct pf_buf p = {0};
	int st = config_path(c, &p, c->args->pos[0], NULL);
	if (st != CTL_EXIT_OK)
		return st;
	const char *ver = ctl_args_str(c->args, "version");
	int64_t v;
	if (ver && ctl_parse_int("--version", ver, 1, INT32_MAX, &v, c->error) < 0)
		return CTL_EXIT_USAGE;
	ctl_query_add(&p, "version", ver);
	_cleanup_json_ json_t *r = NULL;
	if ((st = ctl_fetch(c, &p, &r)) != CTL_EXIT_OK || !r)
		return st;
	/* the body as stored, so `config get X > x.yaml` gives a file to edit and `config set` */
	fputs(ctl_jstr(r, "body"), c->out);
	return CTL_EXIT_OK;
}

/* Reads FILE ("-" = stdin), at most PF_PROFCFG_MAX_DOC bytes. */
static int read_doc(struct ctl_ctx *c, const char *file, struct pf_buf *out)
{
	pf_buf_init(out, PF_PROFCFG_MAX_DOC);
	int fd = strcmp(file, "-") == 0 ? STDIN_FILENO : open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return pf_error_set(c->error, -errno, "", "%s: %s", file, strerror(errno));
	int rc = 0;
	char chunk[8192];
	/* each read makes progress or ends the loop; the cap bounds the total */
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR && !*c->interrupted)
			continue;
		if (n < 0) {
			rc = pf_error_set(c->error, -errno, "", "%s: %s", file, strerror(errno));
			break;
		}
		if (n == 0)
			break;
		if (pf_buf_append(out, chunk, (size_t)n) < 0) {
			rc = pf_error_set(c->error, -E2BIG, "", "%s: over %zu bytes", file,
					  PF_PROFCFG_MAX_DOC);
			break;
		}
	}
	if (fd != STDIN_FILENO)
		close(fd);
	return rc;
}

int ctl_cmd_config_set(struct ctl_ctx *c)
{
	_cleanup_buf_ struct pf_buf p = {0}, doc = {0};
	int st = config_path(c, &p, c->args->pos[0], NULL);
	if (st != CTL_EXIT_OK)
		return st;
	if (read_doc(c, c->args->pos[1], &doc) < 0)
		return CTL_EXIT_USAGE;
	_cleanup_json_ json_t *r = NULL;
	int rc = ctl_http_json_raw(c->http, "PUT", pf_buf_str(&p), "text/yaml", doc.data, doc.len,
				   &r, c->error);
	if (rc < 0)
		return ctl_fail(c, rc);
	if (c->format == CTL_OUT_JSON)
		return ctl_emit_json(c, r);
	fprintf(c->out, "config %s: version %" PRId64 " %s, pushed to %" PRId64 " agents\n",
		ctl_jstr(r, "name"), ctl_jint(r, "version"),
		json_is_true(json_object_get(r, "created")) ? "created" : "unchanged (same body)",
		ctl_jint(r, "pushed"));
	return CTL_EXIT_OK;
}

int ctl_cmd_config_versions(struct ctl_ctx *c)
{
	_cleanup_buf_ struct pf_buf p = {0};
	int st = config_path(c, &p, c->args->pos[0], "/versions");
	if (st != CTL_EXIT_OK)
		return st;
	_cleanup_json_ json_t *r = NULL;
	if ((st = ctl_fetch(c, &p, &r)) != CTL_EXIT_OK || !r)
		return st;
	_cleanup_(ctl_table_freep) struct ctl_table *t =
	    ctl_table_new((const char *const[]){"VERSION", "CREATED", "HASH", NULL});
	json_t *v;
	size_t i;
	json_array_foreach(json_object_get(r, "versions"), i, v)
	{
		if (!t || ctl_table_row(t) < 0)
			break;
		char when[32];
		ctl_fmt_time_ms(ctl_jint(v, "created"), when, sizeof(when));
		ctl_table_cell(t, "%" PRId64, ctl_jint(v, "version"));
		ctl_table_cell(t, "%s", when);
		ctl_table_cell(t, "%.16s", ctl_jstr(v, "hash"));
	}
	return ctl_table_done(c, t);
}

int ctl_cmd_config_validate(struct ctl_ctx *c)
{
	const char *file = c->args->pos[0];
	_cleanup_buf_ struct pf_buf doc = {0};
	if (read_doc(c, file, &doc) < 0)
		return CTL_EXIT_USAGE;
	struct pf_profcfg *cfg = NULL;
	struct pf_error verr = {0};
	int rc = pf_profcfg_parse(pf_buf_str(&doc), doc.len, &cfg, &verr);
	pf_profcfg_free(cfg);
	if (c->format == CTL_OUT_JSON) {
		_cleanup_json_ json_t *o =
		    rc < 0 ? json_pack("{s:b, s:s, s:s, s:s}", "valid", 0, "file", file, "path",
				       verr.path, "message", verr.msg)
			   : json_pack("{s:b, s:s}", "valid", 1, "file", file);
		int st = o ? ctl_emit_json(c, o) : CTL_EXIT_ERROR;
		return rc < 0 ? CTL_EXIT_USAGE : st;
	}
	if (rc < 0) {
		pf_error_set(c->error, rc, "", "%s: %s", file, verr.msg);
		return CTL_EXIT_USAGE;
	}
	fprintf(c->out, "%s: valid\n", file);
	return CTL_EXIT_OK;
}

int ctl_cmd_assign(struct ctl_ctx *c)
{
	const char *sel = ctl_args_str(c->args, "selector"), *cfg = ctl_args_str(c->args, "config"),
		   *prio = ctl_args_str(c->args, "priority");
	if (!sel || !cfg) {
		pf_error_set(c->error, -EINVAL, "", "assign: --selector and --config are required");
		return CTL_EXIT_USAGE;
	}
	int64_t pv = 0;
	if (prio && ctl_parse_int("--priority", prio, -1000000, 1000000, &pv, c->error) < 0)
		return CTL_EXIT_USAGE;
	_cleanup_buf_ struct pf_buf p;
	pf_buf_init(&p, 4096);
	if (pf_buf_append_str(&p, "/api/v1/assignments") < 0 ||
	    ctl_path_add(&p, c->args->pos[0]) < 0) {
		pf_error_set(c->error, -E2BIG, "", "assignment name too long");
		return CTL_EXIT_USAGE;
	}
	_cleanup_json_ json_t *body = json_pack("{s:s, s:s, s:I}", "selector", sel, "config", cfg,
						"priority", (json_int_t)pv);
	_cleanup_json_ json_t *r = NULL;
	int st = ctl_call(c, "PUT", &p, body, &r);
	if (st != CTL_EXIT_OK)
		return st;
	if (c->format == CTL_OUT_JSON)
		return ctl_emit_json(c, r);
	fprintf(c->out,
		"assignment %s: config %s to agents matching \"%s\" (priority %" PRId64
		"), pushed to %" PRId64 " agents\n",
		c->args->pos[0], ctl_jstr(r, "config"), ctl_jstr(r, "selector"),
		ctl_jint(r, "priority"), ctl_jint(r, "pushed"));
	return CTL_EXIT_OK;
}
