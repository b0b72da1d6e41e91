/* test_cmd_capture.c — ctl/cmd_capture.c: `capture` builds the request the API documents,
 * `capture --wait` follows a capture to each final state with the documented exit status,
 * prints progress lines on stderr only when an agent's report changes, then the profile ids
 * and the flame-graph URL; Ctrl-C while waiting cancels the capture with DELETE and exits
 * 130; a capture that outlives --wait-timeout exits 1 and is left running. The controller
 * side is scripted (tests/lib/http_stub); the integration test runs the real one. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "cmds.h"
#include "http_stub.h"

static const char CREATED[] = "{\"id\":\"c1\",\"state\":\"pending\",\"agents_matched\":2}";
static const char RUNNING[] =
    "{\"id\":\"c1\",\"state\":\"running\",\"created_at\":1700000000000,\"started_at\":null,"
    "\"finished_at\":null,\"created_by\":\"admin\",\"request\":{\"agents\":\"env=prod\","
    "\"duration_seconds\":30,\"frequency_hz\":99},\"agents\":["
    "{\"instance_uid\":\"u-a\",\"state\":\"running\",\"samples\":10,\"profile_ids\":[]},"
    "{\"instance_uid\":\"u-b\",\"state\":\"unreachable\",\"samples\":0,\"profile_ids\":[],"
    "\"error\":\"agent is disconnected\"}]}";
/* %s: the final state */
static const char FINAL[] =
    "{\"id\":\"c1\",\"state\":\"%s\",\"created_at\":1700000000000,\"started_at\":1700000000100,"
    "\"finished_at\":1700000031000,\"created_by\":\"admin\",\"request\":{\"agents\":\"env=prod\","
    "\"duration_seconds\":30,\"frequency_hz\":99,\"note\":\"n\"},\"agents\":["
    "{\"instance_uid\":\"u-a\",\"state\":\"done\",\"samples\":2970,\"profile_ids\":[7,8]},"
    "{\"instance_uid\":\"u-b\",\"state\":\"unreachable\",\"samples\":0,\"profile_ids\":[],"
    "\"error\":\"agent is disconnected\"}]}";

struct run {
	int status;
	char *out, *err;
	struct pf_error error;
};

static volatile sig_atomic_t interrupted;

/* Runs `profleetctl <args>` against the stub at port, in this process. */
static void run_cmd(struct run *r, int port, const char *const *args, int n)
{
	char server[64];
	snprintf(server, sizeof(server), "http://127.0.0.1:%d", port);
	char *argv[32] = {"profleetctl"};
	for (int i = 0; i < n; i++)
		argv[1 + i] = (char *)args[i];
	const struct ctl_cmd *cmd;
	struct ctl_args a;
	memset(r, 0, sizeof(*r));
	assert_int_equal(ctl_cmd_parse(n + 1, argv, &cmd, &a, &r->error), 0);
	size_t ol = 0, el = 0;
	FILE *out = open_memstream(&r->out, &ol), *err = open_memstream(&r->err, &el);
	struct ctl_http *h = ctl_http_new(&(struct ctl_http_opts){.server = server, .token = "t"});
	assert_non_null(h);
	ctl_http_set_abort(h, &interrupted);
	enum ctl_format fmt = CTL_OUT_TABLE;
	if (ctl_args_str(&a, "output"))
		assert_int_equal(ctl_format_parse(ctl_args_str(&a, "output"), &fmt), 0);
	struct ctl_ctx c = {.cmd = cmd,
			    .args = &a,
			    .format = fmt,
			    .http = h,
			    .out = out,
			    .err = err,
			    .error = &r->error,
			    .interrupted = &interrupted,
			    .poll_ms = 20};
	r->status = cmd->run(&c);
	ctl_http_free(h);
	fclose(out);
	fclose(err);
}

static void run_free(struct run *r)
{
	free(r->out);
	free(r->err);
}

static void test_request_body(void **state)
{
	struct http_stub s = {0};
	char *ans = http_stub_json("202 Accepted", CREATED);
	assert_int_equal(http_stub_start(&s, (const char *const[]){ans}, 1, false), 0);
	struct run r;
	run_cmd(&r, s.port,
		(const char *const[]){
		    "capture", "--agents", "env=prod", "--process", "service.name=checkout",
		    "--process", "k8s.pod.name=~web-.*", "--duration", "1m", "--frequency", "199",
		    "--trace-id", "4bf92f3577b34da6a3ce929d0e0e4736", "--note", "slow checkout"},
		15);
	http_stub_stop(&s);
	assert_int_equal(r.status, CTL_EXIT_OK);
	assert_string_equal(r.out, "capture c1: pending, 2 agents matched\n"
				   "follow it with: profleetctl captures c1\n");
	const char *req = s.requests[0];
	assert_non_null(strstr(req, "POST /api/v1/captures HTTP/1.1\r\n"));
	json_t *body = json_loads(strstr(req, "\r\n\r\n") + 4, 0, NULL);
	assert_non_null(body);
	json_t *want = json_loads(
	    "{\"agents\":\"env=prod\",\"processes\":[{\"key\":\"service.name\",\"match\":"
	    "\"strict\","
	    "\"value\":\"checkout\"},{\"key\":\"k8s.pod.name\",\"match\":\"regexp\",\"value\":"
	    "\"web-.*\"}],\"duration_seconds\":60,\"frequency_hz\":199,\"profile_type\":\"cpu\","
	    "\"trace_id\":\"4bf92f3577b34da6a3ce929d0e0e4736\",\"note\":\"slow checkout\"}",
	    0, NULL);
	assert_true(json_equal(body, want));
	json_decref(body);
	json_decref(want);
	run_free(&r);
	free(ans);
}

/* The body the command posts, given argc arguments (the answer: CREATED). */
static json_t *posted_body(const char *const *argv, int argc)
{
	struct http_stub s = {0};
	char *ans = http_stub_json("202 Accepted", CREATED);
	assert_int_equal(http_stub_start(&s, (const char *const[]){ans}, 1, false), 0);
	struct run r;
	run_cmd(&r, s.port, argv, argc);
	http_stub_stop(&s);
	assert_int_equal(r.status, CTL_EXIT_OK);
	json_t *body = json_loads(strstr(s.requests[0], "\r\n\r\n") + 4, 0, NULL);
	assert_non_null(body);
	run_free(&r);
	free(ans);
	return body;
}

/* --type: the capture's profile_type */
static void test_request_type(void **state)
{
	json_t *body = posted_body(
	    (const char *const[]){"capture", "--agents", "env=prod", "-d", "10s", "--type", "wall"},
	    7);
	assert_string_equal(json_string_value(json_object_get(body, "profile_type")), "wall");
	json_decref(body);
}

/* --agents all: the empty selector, every agent */
static void test_request_all_agents(void **state)
{
	json_t *body =
	    posted_body((const char *const[]){"capture", "--agents", "all", "-d", "10s"}, 5);
	assert_string_equal(json_string_value(json_object_get(body, "agents")), "");
	json_decref(body);
}

static void test_wait_final_states(void **state)
{
	static const struct {
		const char *state;
		int status;
	} cases[] = {{"done", CTL_EXIT_OK},
		     {"partial", CTL_EXIT_PARTIAL},
		     {"failed", CTL_EXIT_FAILED},
		     {"cancelled", CTL_EXIT_CANCELLED}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char fin[2048];
		snprintf(fin, sizeof(fin), FINAL, cases[i].state);
		char *ans[] = {http_stub_json("202 Accepted", CREATED),
			       http_stub_json("200 OK", RUNNING), http_stub_json("200 OK", RUNNING),
			       http_stub_json("200 OK", fin)};
		struct http_stub s = {0};
		assert_int_equal(http_stub_start(&s, (const char *const *)ans, 4, false), 0);
		struct run r;
		run_cmd(
		    &r, s.port,
		    (const char *const[]){"capture", "--agents", "env=prod", "-d", "30s", "--wait"},
		    6);
		http_stub_stop(&s);
		assert_int_equal(r.status, cases[i].status);
		assert_int_equal(s.n_requests, 4);
		assert_non_null(strstr(s.requests[1], "GET /api/v1/captures/c1 HTTP/1.1"));
		/* progress: one line per change, none for the identical second poll */
		char want_err[1024];
		snprintf(want_err, sizeof(want_err),
			 "capture c1: pending, 2 agents matched\n"
			 "capture c1: running\n"
			 "capture c1: agent u-a running, 10 samples, 0 profiles\n"
			 "capture c1: agent u-b unreachable, 0 samples, 0 profiles: agent is "
			 "disconnected\n"
			 "capture c1: %s\n"
			 "capture c1: agent u-a done, 2970 samples, 2 profiles\n",
			 cases[i].state);
		assert_string_equal(r.err, want_err);
		char url[128];
		snprintf(url, sizeof(url),
			 "profiles (2): 7 8\nflame graph: http://127.0.0.1:%d/ui/#/captures/c1\n",
			 s.port);
		assert_non_null(strstr(r.out, url));
		assert_non_null(
		    strstr(r.out, "u-b           unreachable  0        0.00s   0         agent is "
				  "disconnected\n"));
		/* samples / frequency: the CPU time the captured processes used */
		assert_non_null(strstr(r.out, "done         2970     30.00s  2"));
		run_free(&r);
		for (size_t k = 0; k < 4; k++)
			free(ans[k]);
	}
}

static void test_wait_json(void **state)
{
	char fin[2048];
	snprintf(fin, sizeof(fin), FINAL, "partial");
	char *ans[] = {http_stub_json("202 Accepted", CREATED), http_stub_json("200 OK", fin)};
	struct http_stub s = {0};
	assert_int_equal(http_stub_start(&s, (const char *const *)ans, 2, false), 0);
	struct run r;
	run_cmd(
	    &r, s.port,
	    (const char *const[]){"capture", "--agents", "", "-d", "5s", "-w", "--output", "json"},
	    8);
	http_stub_stop(&s);
	assert_int_equal(r.status, CTL_EXIT_PARTIAL);
	/* stdout is the API's capture object, nothing else */
	json_t *got = json_loads(r.out, 0, NULL), *want = json_loads(fin, 0, NULL);
	assert_non_null(got);
	assert_true(json_equal(got, want));
	json_decref(got);
	json_decref(want);
	run_free(&r);
	free(ans[0]);
	free(ans[1]);
}

static void interrupt_at_third(struct http_stub *s, size_t n)
{
	if (n == 2)
		interrupted = 1; /* as the SIGINT handler does */
}

static void test_interrupt_cancels(void **state)
{
	char *ans[] = {http_stub_json("202 Accepted", CREATED), http_stub_json("200 OK", RUNNING),
		       http_stub_json("200 OK", RUNNING),
		       http_stub_json("200 OK", "{\"id\":\"c1\",\"state\":\"cancelled\"}")};
	struct http_stub s = {.on_request = interrupt_at_third};
	assert_int_equal(http_stub_start(&s, (const char *const *)ans, 4, false), 0);
	interrupted = 0;
	struct run r;
	run_cmd(&r, s.port,
		(const char *const[]){"capture", "--agents", "env=prod", "-d", "30s", "--wait"}, 6);
	http_stub_stop(&s);
	interrupted = 0;
	assert_int_equal(r.status, CTL_EXIT_INTERRUPTED);
	assert_int_equal(s.n_requests, 4);
	assert_non_null(strstr(s.requests[3], "DELETE /api/v1/captures/c1 HTTP/1.1\r\n"));
	assert_null(strstr(s.requests[3], "Content-Type")); /* no body */
	assert_string_equal(r.error.msg, "interrupted: capture c1 cancelled");
	run_free(&r);
	for (size_t k = 0; k < 4; k++)
		free(ans[k]);
}

static void test_wait_timeout(void **state)
{
	char *ans[] = {http_stub_json("202 Accepted", CREATED), http_stub_json("200 OK", RUNNING)};
	struct http_stub s = {0};
	assert_int_equal(http_stub_start(&s, (const char *const *)ans, 2, true), 0);
	struct run r;
	run_cmd(&r, s.port,
		(const char *const[]){"capture", "--agents", "env=prod", "-d", "30s", "--wait",
				      "--wait-timeout", "1s"},
		8);
	http_stub_stop(&s);
	assert_int_equal(r.status, CTL_EXIT_ERROR);
	assert_string_equal(r.error.msg, "capture c1 is still running after 1s; it goes on: follow "
					 "it with `profleetctl captures c1`");
	for (size_t i = 1; i < s.n_requests; i++)
		assert_null(strstr(s.requests[i], "DELETE")); /* not cancelled */
	assert_true(s.n_requests >= 3);
	run_free(&r);
	free(ans[0]);
	free(ans[1]);
}

static void test_local_checks(void **state)
{
	/* refused before any request: the stub would fail the request count */
	static const struct {
		const char *args[8];
		int n;
		const char *msg;
	} bad[] = {
	    {{"capture", "--agents", "x=y"}, 3, "capture: --agents and --duration are required"},
	    {{"capture", "--agents", "x=y", "-d", "2h"}, 5, "--duration: at most 3600s, got 2h"},
	    {{"capture", "--agents", "x=y", "-d", "5s", "-f", "0"},
	     7,
	     "--frequency: must be 1..1000, got 0"},
	    {{"capture", "--agents", "x=y", "-d", "5s", "--process", "nope"},
	     7,
	     "--process[0]: expected key=value or key=~regexp, got \"nope\""},
	    {{"capture", "--agents", "x=y", "-d", "5s", "--trace-id", "00"},
	     7,
	     "--trace-id: expected a trace id of 32 hex digits (not all zero), got \"00\""},
	    {{"capture", "--agents", "x=y", "-d", "5s", "--type", "heap"},
	     7,
	     "--type: must be cpu, off_cpu, wall or alloc, got heap"},
	};
	struct http_stub s = {0};
	assert_int_equal(http_stub_start(&s, (const char *const[]){NULL}, 1, false), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct run r;
		run_cmd(&r, s.port, bad[i].args, bad[i].n);
		assert_int_equal(r.status, CTL_EXIT_USAGE);
		assert_string_equal(r.error.msg, bad[i].msg);
		run_free(&r);
	}
	http_stub_stop(&s);
	assert_int_equal(s.n_requests, 0);
}

static void test_captures_list(void **state)
{
	char *ans[] = {http_stub_json(
	    "200 OK",
	    "{\"captures\":[{\"id\":\"c2\",\"state\":\"running\",\"created_at\":"
	    "1700000000000,\"agents_matched\":3,\"request\":{\"duration_seconds\":30,"
	    "\"note\":\"checkout slow\"}},{\"id\":\"c1\",\"state\":\"done\",\"created_at\":"
	    "1690000000000,\"agents_matched\":1,\"request\":{\"duration_seconds\":5}}],"
	    "\"next_cursor\":\"c1\"}")};
	struct http_stub s = {0};
	assert_int_equal(http_stub_start(&s, (const char *const *)ans, 1, false), 0);
	struct run r;
	run_cmd(&r, s.port,
		(const char *const[]){"captures", "--state", "running", "--limit", "2", "--cursor",
				      "c3"},
		7);
	http_stub_stop(&s);
	assert_int_equal(r.status, CTL_EXIT_OK);
	assert_non_null(
	    strstr(s.requests[0], "GET /api/v1/captures?state=running&limit=2&cursor=c3 "));
	assert_string_equal(r.out,
			    "ID  STATE    CREATED              AGENTS  DURATION  NOTE\n"
			    "c2  running  2023-11-14 22:13:20  3       30s       checkout slow\n"
			    "c1  done     2023-07-22 04:26:40  1       5s        \n");
	assert_string_equal(r.err, "(more captures: --cursor c1)\n");
	run_free(&r);
	free(ans[0]);
}

static int setup(void **state)
{
	return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

static int teardown(void **state)
{
	curl_global_cleanup();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_request_body),       cmocka_unit_test(test_wait_final_states),
	    cmocka_unit_test(test_wait_json),	       cmocka_unit_test(test_interrupt_cancels),
	    cmocka_unit_test(test_wait_timeout),       cmocka_unit_test(test_local_checks),
	    cmocka_unit_test(test_captures_list),      cmocka_unit_test(test_request_type),
	    cmocka_unit_test(test_request_all_agents),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
