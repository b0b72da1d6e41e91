/* cmd_profiles.c — profiles, pprof, top (see cmds.h and docs/cli.md). */
#include "cmds.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pf/fdio.h"

int ctl_cmd_profiles(struct ctl_ctx *c)
{
	_cleanup_buf_ struct pf_buf p;
	pf_buf_init(&p, 8192);
	pf_buf_append_str(&p, "/api/v1/profiles");
	const char *trace = ctl_args_str(c->args, "trace-id");
	if (trace && ctl_check_trace_id("--trace-id", trace, c->error) < 0)
		return CTL_EXIT_USAGE;
	char from[32];
	if (ctl_since_from_ms(c, from, sizeof(from)) < 0 ||
	    ctl_query_opt(c, &p, "service", "service") < 0 ||
	    ctl_query_opt(c, &p, "type", "type") < 0 ||
	    ctl_query_opt(c, &p, "trace_id", "trace-id") < 0 ||
	    ctl_query_opt(c, &p, "trigger", "trigger") < 0 ||
	    ctl_query_opt(c, &p, "capture_id", "capture") < 0 ||
	    ctl_query_opt(c, &p, "agent", "agent") < 0 ||
	    ctl_query_opt(c, &p, "namespace", "namespace") < 0 ||
	    ctl_query_opt(c, &p, "pod", "pod") < 0 ||
	    ctl_query_opt(c, &p, "container", "container") < 0 ||
	    ctl_query_add(&p, "from", from[0] ? from : NULL) < 0 ||
	    ctl_query_limit(c, &p, 1000) < 0)
		return CTL_EXIT_USAGE;
	_cleanup_json_ json_t *r = NULL;
	int st = ctl_fetch(c, &p, &r);
	if (st != CTL_EXIT_OK || !r)
		return st;
	_cleanup_(ctl_table_freep) struct ctl_table *t = ctl_table_new((const char *const[]){
	    "ID", "START", "DURATION", "SERVICE", "HOST", "PID", "TYPE", "SAMPLES", "LINKS", NULL});
	json_t *pr;
	size_t i;
	json_array_foreach(json_object_get(r, "profiles"), i, pr)
	{
		if (!t || ctl_table_row(t) < 0)
			break;
		char start[32], dur[32];
		ctl_fmt_time_ms(ctl_jint(pr, "start_ms"), start, sizeof(start));
		ctl_fmt_duration_ms(ctl_jint(pr, "duration_ms"), dur, sizeof(dur));
		ctl_table_cell(t, "%" PRId64, ctl_jint(pr, "id"));
		ctl_table_cell(t, "%s", start);
		ctl_table_cell(t, "%s", dur);
		ctl_table_cell(t, "%s", ctl_jstr(pr, "service"));
		ctl_table_cell(t, "%s", ctl_jstr(pr, "host"));
		ctl_table_cell(t, "%" PRId64, ctl_jint(pr, "pid"));
		ctl_table_cell(t, "%s", ctl_jstr(pr, "type"));
		ctl_table_cell(t, "%" PRId64, ctl_jint(pr, "samples"));
		ctl_table_cell(t, "%" PRId64, ctl_jint(pr, "links"));
	}
	st = ctl_table_done(c, t);
	if (st == CTL_EXIT_OK && json_is_true(json_object_get(r, "more")))
		fprintf(c->err, "(more profiles match: raise --limit or narrow --since)\n");
	return st;
}

int ctl_cmd_pprof(struct ctl_ctx *c)
{
	const char *id = c->args->pos[0];
	int64_t idv;
	if (ctl_parse_int("ID", id, 1, INT64_MAX, &idv, c->error) < 0)
		return CTL_EXIT_USAGE;
	char path[96], def_out[64];
	snprintf(path, sizeof(path), "/api/v1/profiles/%" PRId64 "/pprof", idv);
	snprintf(def_out, sizeof(def_out), "profile-%" PRId64 ".pb.gz", idv);
	const char *out = ctl_args_str(c->args, "out");
	if (!out)
		out = def_out;
	struct ctl_http_resp resp;
	int rc = ctl_http_request(c->http, "GET", path, NULL, NULL, 0, &resp, c->error);
	if (rc < 0)
		return ctl_fail(c, rc);
	if (resp.status != 200) {
		ctl_http_error_from_resp(&resp, path, c->error);
		ctl_http_resp_release(&resp);
		return CTL_EXIT_ERROR;
	}
	bool to_stdout = strcmp(out, "-") == 0;
	int st = CTL_EXIT_OK;
	if (to_stdout) {
		fflush(c->out);
		rc = pf_write_all(STDOUT_FILENO, resp.body.data, resp.body.len);
	} else {
		/* written beside the target and renamed, so FILE is never left half-written */
		char tmp[4096];
		if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%d", out, (int)getpid()) >=
		    sizeof(tmp)) {
			rc = -ENAMETOOLONG;
		} else {
			int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
			rc = fd < 0 ? -errno : pf_write_all(fd, resp.body.data, resp.body.len);
			if (fd >= 0 && close(fd) < 0 && rc == 0)
				rc = -errno;
			if (rc == 0 && rename(tmp, out) < 0)
				rc = -errno;
			if (rc < 0 && fd >= 0)
				unlink(tmp);
		}
	}
	if (rc < 0) {
		pf_error_set(c->error, rc, "", "%s: %s", to_stdout ? "stdout" : out, strerror(-rc));
		st = CTL_EXIT_ERROR;
	} else if (c->format == CTL_OUT_JSON && !to_stdout) {
		_cleanup_json_ json_t *o =
		    json_pack("{s:I, s:s, s:I}", "id", (json_int_t)idv, "file", out, "bytes",
			      (json_int_t)resp.body.len);
		st = o ? ctl_emit_json(c, o) : CTL_EXIT_ERROR;
	} else {
		fprintf(to_stdout ? c->err : c->out,
			"profile %" PRId64 ": %zu bytes of gzip'd pprof "
			"written to %s\n",
			idv, resp.body.len, to_stdout ? "stdout" : out);
	}
	ctl_http_resp_release(&resp);
	return st;
}

int ctl_cmd_top(struct ctl_ctx *c)
{
	_cleanup_buf_ struct pf_buf p;
	pf_buf_init(&p, 8192);
	pf_buf_append_str(&p, "/api/v1/top");
	char from[32];
	if (ctl_since_from_ms(c, from, sizeof(from)) < 0)
		return CTL_EXIT_USAGE;
	/* a capture is looked at whole: the server's default range is the last hour only */
	if (!from[0] && ctl_args_str(c->args, "capture"))
		snprintf(from, sizeof(from), "0");
	if (ctl_query_opt(c, &p, "service", "service") < 0 ||
	    ctl_query_opt(c, &p, "type", "type") < 0 ||
	    ctl_query_opt(c, &p, "capture_id", "capture") < 0 ||
	    ctl_query_opt(c, &p, "namespace", "namespace") < 0 ||
	    ctl_query_opt(c, &p, "pod", "pod") < 0 ||
	    ctl_query_opt(c, &p, "container", "container") < 0 ||
	    ctl_query_add(&p, "from", from[0] ? from : NULL) < 0 ||
	    ctl_query_add(&p, "limit", ctl_args_str(c->args, "limit") ? NULL : "20") < 0 ||
	    ctl_query_limit(c, &p, 1000) < 0)
		return CTL_EXIT_USAGE;
	_cleanup_json_ json_t *r = NULL;
	int st = ctl_fetch(c, &p, &r);
	if (st != CTL_EXIT_OK || !r)
		return st;
	_cleanup_(ctl_table_freep) struct ctl_table *t = ctl_table_new(
	    (const char *const[]){"SELF%", "SELF", "TOTAL%", "TOTAL", "FUNCTION", NULL});
	json_t *fn;
	size_t i;
	json_array_foreach(json_object_get(r, "functions"), i, fn)
	{
		if (!t || ctl_table_row(t) < 0)
			break;
		ctl_table_cell(t, "%.1f", json_number_value(json_object_get(fn, "self_pct")));
		ctl_table_cell(t, "%" PRId64, ctl_jint(fn, "self"));
		ctl_table_cell(t, "%.1f", json_number_value(json_object_get(fn, "total_pct")));
		ctl_table_cell(t, "%" PRId64, ctl_jint(fn, "total"));
		ctl_table_cell(t, "%s", ctl_jstr(fn, "name"));
	}
	st = ctl_table_done(c, t);
	/* the weights are in the type's unit: samples for CPU, nanoseconds off the CPU, bytes */
	const char *unit = ctl_jstr(r, "unit");
	if (!*unit || strcmp(unit, "count") == 0)
		unit = "samples";
	if (st == CTL_EXIT_OK)
		fprintf(c->out,
			"(%" PRId64 " %s in %" PRId64 " of %" PRId64 " matching profiles%s)\n",
			ctl_jint(r, "total"), unit, ctl_jint(r, "profiles_merged"),
			ctl_jint(r, "profiles_matched"),
			json_is_true(json_object_get(r, "capped")) ? ", sampled evenly" : "");
	return st;
}
