/* cmd_capture.c — capture [--wait] and captures [ID] (see cmds.h and docs/cli.md). */
#include "cmds.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pf/capture_msg.h"

#define CAPTURE_DEFAULT_HZ 99
#define WAIT_GRACE_S 120 /* default --wait-timeout: the duration plus this */

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Times in capture objects: Unix ms, or a string the server formatted. */
static void fmt_when(const json_t *o, const char *key, char *buf, size_t n)
{
	json_t *v = json_object_get(o, key);
	if (json_is_string(v))
		snprintf(buf, n, "%s", json_string_value(v));
	else
		ctl_fmt_time_ms(ctl_jint(o, key), buf, n);
}

static size_t count_profiles(const json_t *cap)
{
	size_t n = 0, i;
	json_t *ag;
	json_array_foreach(json_object_get(cap, "agents"), i, ag) n +=
	    json_array_size(json_object_get(ag, "profile_ids"));
	return n;
}

/* The console's capture page (its flame graph and per-agent table): a browser opens it and
 * signs in, where the API's flame graph route would answer 401 without a bearer token. */
static void print_flamegraph_url(struct ctl_ctx *c, const char *id)
{
	_cleanup_buf_ struct pf_buf q;
	pf_buf_init(&q, 4096);
	if (pf_buf_append_str(&q, "/ui/#/captures") == 0 && ctl_path_add(&q, id) == 0)
		fprintf(c->out, "flame graph: %s%s\n", ctl_http_server(c->http), pf_buf_str(&q));
}

/* Per-agent table and the profile ids of one capture. */
static int print_capture(struct ctl_ctx *c, const json_t *cap)
{
	char created[40], started[40], finished[40];
	fmt_when(cap, "created_at", created, sizeof(created));
	fmt_when(cap, "started_at", started, sizeof(started));
	fmt_when(cap, "finished_at", finished, sizeof(finished));
	const json_t *req = json_object_get(cap, "request");
	fprintf(c->out, "capture %s: %s\n", ctl_jstr(cap, "id"), ctl_jstr(cap, "state"));
	const char *type = *ctl_jstr(req, "profile_type") ? ctl_jstr(req, "profile_type") : "cpu";
	fprintf(c->out, "  %s profile of agents \"%s\", %" PRId64 "s at %" PRId64 " Hz%s%s\n",
		type, ctl_jstr(req, "agents"), ctl_jint(req, "duration_seconds"),
		ctl_jint(req, "frequency_hz"), *ctl_jstr(req, "note") ? ", note: " : "",
		ctl_jstr(req, "note"));
	fprintf(c->out, "  created %s by %s, started %s, finished %s\n", created,
		*ctl_jstr(cap, "created_by") ? ctl_jstr(cap, "created_by") : "-", started,
		finished);
	_cleanup_(ctl_table_freep) struct ctl_table *t = ctl_table_new(
	    (const char *const[]){"INSTANCE_UID", "STATE", "SAMPLES", "ON_CPU", "PROFILES", "ERROR",
				  NULL});
	/* A cpu sample is one tick of the captured processes on a CPU: samples / frequency is
	 * the CPU time they used, what makes a count below duration x frequency readable. The
	 * samples of off_cpu and wall captures are waits and ticks of unequal weight: no such
	 * time (their profiles' values are nanoseconds). */
	int64_t hz = strcmp(type, "cpu") ? 0 : ctl_jint(req, "frequency_hz");
	json_t *ag;
	size_t i;
	json_array_foreach(json_object_get(cap, "agents"), i, ag)
	{
		if (!t || ctl_table_row(t) < 0)
			break;
		ctl_table_cell(t, "%s", ctl_jstr(ag, "instance_uid"));
		ctl_table_cell(t, "%s", ctl_jstr(ag, "state"));
		ctl_table_cell(t, "%" PRId64, ctl_jint(ag, "samples"));
		if (hz > 0)
			ctl_table_cell(t, "%.2fs", (double)ctl_jint(ag, "samples") / (double)hz);
		else
			ctl_table_cell(t, "-");
		ctl_table_cell(t, "%zu", json_array_size(json_object_get(ag, "profile_ids")));
		ctl_table_cell(t, "%s",
			       *ctl_jstr(ag, "error") ? ctl_jstr(ag, "error")
						      : ctl_jstr(ag, "error_code"));
	}
	int st = ctl_table_done(c, t);
	if (st != CTL_EXIT_OK)
		return st;
	size_t n = count_profiles(cap);
	if (n == 0)
		return CTL_EXIT_OK;
	fprintf(c->out, "profiles (%zu):", n);
	json_array_foreach(json_object_get(cap, "agents"), i, ag)
	{
		json_t *pid;
		size_t j;
		json_array_foreach(json_object_get(ag, "profile_ids"), j, pid)
		{
			if (json_is_string(pid))
				fprintf(c->out, " %s", json_string_value(pid));
			else
				fprintf(c->out, " %" PRId64, (int64_t)json_integer_value(pid));
		}
	}
	fputc('\n', c->out);
	print_flamegraph_url(c, ctl_jstr(cap, "id"));
	return CTL_EXIT_OK;
}

static int capture_path(struct ctl_ctx *c, struct pf_buf *p, const char *id)
{
	pf_buf_init(p, 4096);
	if (pf_buf_append_str(p, "/api/v1/captures") < 0 || (id && ctl_path_add(p, id) < 0)) {
		pf_error_set(c->error, -E2BIG, "", "capture id too long");
		return CTL_EXIT_USAGE;
	}
	return CTL_EXIT_OK;
}

/* The request body from the options; NULL with c->error set on bad input. */
static json_t *build_request(struct ctl_ctx *c, uint64_t *duration_s)
{
	const struct ctl_args *a = c->args;
	const char *agents = ctl_args_str(a, "agents"), *dur = ctl_args_str(a, "duration");
	if (!agents || !dur) {
		pf_error_set(c->error, -EINVAL, "",
			     "capture: --agents and --duration are required");
		return NULL;
	}
	if (!strcmp(agents, "all"))
		agents = ""; /* the empty selector: every agent */
	if (ctl_parse_duration("--duration", dur, duration_s, c->error) < 0)
		return NULL;
	if (*duration_s > PF_CAPTURE_MAX_DURATION) {
		pf_error_set(c->error, -ERANGE, "--duration", "at most %ds, got %s",
			     PF_CAPTURE_MAX_DURATION, dur);
		return NULL;
	}
	int64_t hz = CAPTURE_DEFAULT_HZ;
	const char *f = ctl_args_str(a, "frequency");
	if (f && ctl_parse_int("--frequency", f, 1, 1000, &hz, c->error) < 0)
		return NULL;
	const char *type = ctl_args_str(a, "type");
	enum pf_prof_type pt = PF_PROF_CPU;
	if (type && (pf_prof_type_parse(type, &pt) < 0 || !pf_capture_type_supported(pt))) {
		pf_error_set(c->error, -EINVAL, "--type", "must be cpu, off_cpu, wall or alloc, got %s",
			     type);
		return NULL;
	}
	const char *trace = ctl_args_str(a, "trace-id"), *note = ctl_args_str(a, "note");
	if (trace && ctl_check_trace_id("--trace-id", trace, c->error) < 0)
		return NULL;
	if (note && strlen(note) > PF_CAPTURE_MAX_NOTE) {
		pf_error_set(c->error, -E2BIG, "--note", "at most %d bytes", PF_CAPTURE_MAX_NOTE);
		return NULL;
	}
	json_t *procs = json_array();
	const struct ctl_optval *pv = ctl_args_get(a, "process");
	for (size_t i = 0; procs && pv && i < pv->n_list; i++) {
		char what[32];
		snprintf(what, sizeof(what), "--process[%zu]", i);
		struct pf_filter rule;
		if (ctl_parse_process_rule(what, pv->list[i], &rule, c->error) < 0) {
			json_decref(procs);
			return NULL;
		}
		json_array_append_new(procs,
				      json_pack("{s:s, s:s, s:s}", "key", rule.key, "match",
						pf_match_name(rule.match), "value", rule.value));
		ctl_rule_release(&rule);
	}
	json_t *body = json_pack("{s:s, s:o, s:I, s:I, s:s}", "agents", agents, "processes", procs,
				 "duration_seconds", (json_int_t)*duration_s, "frequency_hz",
				 (json_int_t)hz, "profile_type", pf_prof_type_name(pt));
	if (body && trace)
		json_object_set_new(body, "trace_id", json_string(trace));
	if (body && note)
		json_object_set_new(body, "note", json_string(note));
	if (!body)
		pf_error_set(c->error, -ENOMEM, "", "out of memory");
	return body;
}

static bool state_final(const char *s)
{
	return !strcmp(s, "done") || !strcmp(s, "partial") || !strcmp(s, "failed") ||
	       !strcmp(s, "cancelled");
}

/* One stderr line per agent whose state, samples or profiles changed since the last poll
 * (seen: uid → "state/samples/profiles"). */
static void report_progress(struct ctl_ctx *c, const char *id, const json_t *cap, json_t *seen)
{
	json_t *ag;
	size_t i;
	json_array_foreach(json_object_get(cap, "agents"), i, ag)
	{
		const char *uid = ctl_jstr(ag, "instance_uid");
		char sig[96];
		size_t np = json_array_size(json_object_get(ag, "profile_ids"));
		snprintf(sig, sizeof(sig), "%.32s/%" PRId64 "/%zu", ctl_jstr(ag, "state"),
			 ctl_jint(ag, "samples"), np);
		const char *prev = json_string_value(json_object_get(seen, uid));
		if (prev && strcmp(prev, sig) == 0)
			continue;
		json_object_set_new(seen, uid, json_string(sig));
		const char *err = ctl_jstr(ag, "error");
		fprintf(c->err, "capture %s: agent %s %s, %" PRId64 " samples, %zu profiles%s%s\n",
			id, uid, ctl_jstr(ag, "state"), ctl_jint(ag, "samples"), np,
			*err ? ": " : "", err);
	}
}

/* Sleeps ms, in slices, returning early when interrupted. */
static void nap(struct ctl_ctx *c, long ms)
{
	for (long left = ms; left > 0 && !*c->interrupted; left -= 100) {
		long s = left < 100 ? left : 100;
		struct timespec ts = {0, s * 1000000L};
		nanosleep(&ts, NULL);
	}
}

static int cancel_on_interrupt(struct ctl_ctx *c, const char *id)
{
	_cleanup_buf_ struct pf_buf p = {0};
	capture_path(c, &p, id);
	/* the DELETE itself is not aborted by the flag; a second Ctrl-C ends the process */
	ctl_http_set_abort(c->http, NULL);
	signal(SIGINT, SIG_DFL);
	pf_error_clear(c->error);
	_cleanup_json_ json_t *r = NULL;
	struct pf_error derr = {0};
	if (ctl_http_json(c->http, "DELETE", pf_buf_str(&p), NULL, &r, &derr) < 0)
		pf_error_set(c->error, -EINTR, "", "interrupted; cancelling capture %s failed: %s",
			     id, derr.msg);
	else
		pf_error_set(c->error, -EINTR, "", "interrupted: capture %s cancelled", id);
	return CTL_EXIT_INTERRUPTED;
}

static int wait_capture(struct ctl_ctx *c, const char *id, uint64_t duration_s)
{
	uint64_t limit_s = duration_s + WAIT_GRACE_S;
	const char *wt = ctl_args_str(c->args, "wait-timeout");
	if (wt && ctl_parse_duration("--wait-timeout", wt, &limit_s, c->error) < 0)
		return CTL_EXIT_USAGE;
	_cleanup_buf_ struct pf_buf p = {0};
	int st = capture_path(c, &p, id);
	if (st != CTL_EXIT_OK)
		return st;
	_cleanup_json_ json_t *seen = json_object();
	const char *last_state = "";
	char state_buf[32] = "";
	int64_t deadline = now_ms() + (int64_t)limit_s * 1000;
	/* bounded by the deadline; each round sleeps poll_ms */
	for (;;) {
		if (*c->interrupted)
			return cancel_on_interrupt(c, id);
		_cleanup_json_ json_t *cap = NULL;
		int rc = ctl_http_json(c->http, "GET", pf_buf_str(&p), NULL, &cap, c->error);
		if (rc == -EINTR && *c->interrupted)
			return cancel_on_interrupt(c, id);
		if (rc < 0)
			return CTL_EXIT_ERROR;
		const char *state = ctl_jstr(cap, "state");
		if (strcmp(state, last_state) != 0) {
			fprintf(c->err, "capture %s: %s\n", id, state);
			snprintf(state_buf, sizeof(state_buf), "%s", state);
			last_state = state_buf;
		}
		if (seen)
			report_progress(c, id, cap, seen);
		if (state_final(state)) {
			st = c->format == CTL_OUT_JSON ? ctl_emit_json(c, cap)
						       : print_capture(c, cap);
			if (st != CTL_EXIT_OK)
				return st;
			if (!strcmp(state, "done"))
				return CTL_EXIT_OK;
			if (!strcmp(state, "partial"))
				return CTL_EXIT_PARTIAL;
			return !strcmp(state, "failed") ? CTL_EXIT_FAILED : CTL_EXIT_CANCELLED;
		}
		if (now_ms() >= deadline) {
			pf_error_set(c->error, -ETIMEDOUT, "",
				     "capture %s is still %s after %" PRIu64
				     "s; it goes on: follow it with `profleetctl captures %s`",
				     id, state, limit_s, id);
			return CTL_EXIT_ERROR;
		}
		nap(c, c->poll_ms);
	}
}

int ctl_cmd_capture(struct ctl_ctx *c)
{
	uint64_t duration_s = 0;
	_cleanup_json_ json_t *body = build_request(c, &duration_s);
	if (!body)
		return CTL_EXIT_USAGE;
	_cleanup_buf_ struct pf_buf p = {0};
	int st = capture_path(c, &p, NULL);
	if (st != CTL_EXIT_OK)
		return st;
	_cleanup_json_ json_t *r = NULL;
	if ((st = ctl_call(c, "POST", &p, body, &r)) != CTL_EXIT_OK)
		return st;
	const char *id = ctl_jstr(r, "id");
	if (!*id) {
		pf_error_set(c->error, -EPROTO, "", "the server's answer has no capture id");
		return CTL_EXIT_ERROR;
	}
	if (ctl_args_flag(c->args, "wait")) {
		fprintf(c->err, "capture %s: %s, %" PRId64 " agents matched\n", id,
			ctl_jstr(r, "state"), ctl_jint(r, "agents_matched"));
		return wait_capture(c, id, duration_s);
	}
	if (c->format == CTL_OUT_JSON)
		return ctl_emit_json(c, r);
	fprintf(c->out, "capture %s: %s, %" PRId64 " agents matched\n", id, ctl_jstr(r, "state"),
		ctl_jint(r, "agents_matched"));
	fprintf(c->out, "follow it with: profleetctl captures %s\n", id);
	return CTL_EXIT_OK;
}

int ctl_cmd_captures(struct ctl_ctx *c)
{
	const char *id = c->args->n_pos ? c->args->pos[0] : NULL;
	_cleanup_buf_ struct pf_buf p = {0};
	int st = capture_path(c, &p, id);
	if (st != CTL_EXIT_OK)
		return st;
	if (!id &&
	    (ctl_query_opt(c, &p, "state", "state") < 0 || ctl_query_limit(c, &p, 1000) < 0 ||
	     ctl_query_opt(c, &p, "cursor", "cursor") < 0))
		return CTL_EXIT_USAGE;
	_cleanup_json_ json_t *r = NULL;
	if ((st = ctl_fetch(c, &p, &r)) != CTL_EXIT_OK || !r)
		return st;
	if (id)
		return print_capture(c, r);
	_cleanup_(ctl_table_freep) struct ctl_table *t = ctl_table_new(
	    (const char *const[]){"ID", "STATE", "CREATED", "AGENTS", "DURATION", "NOTE", NULL});
	json_t *cap;
	size_t i;
	json_array_foreach(json_object_get(r, "captures"), i, cap)
	{
		if (!t || ctl_table_row(t) < 0)
			break;
		const json_t *req = json_object_get(cap, "request");
		char created[40];
		fmt_when(cap, "created_at", created, sizeof(created));
		ctl_table_cell(t, "%s", ctl_jstr(cap, "id"));
		ctl_table_cell(t, "%s", ctl_jstr(cap, "state"));
		ctl_table_cell(t, "%s", created);
		ctl_table_cell(t, "%" PRId64, ctl_jint(cap, "agents_matched"));
		ctl_table_cell(t, "%" PRId64 "s", ctl_jint(req, "duration_seconds"));
		ctl_table_cell(t, "%s", ctl_jstr(req, "note"));
	}
	st = ctl_table_done(c, t);
	const char *next = json_string_value(json_object_get(r, "next_cursor"));
	if (st == CTL_EXIT_OK && next)
		fprintf(c->err, "(more captures: --cursor %s)\n", next);
	return st;
}
