/* test_capture.c — agent/triggers/capture.c: admission and refusals, the concurrency limit,
 * the lifecycle up to the receiver's confirmation, cancels, the statuses re-sent after a
 * reconnect, the default receiver URL; and capture_run.c's tags and trace links. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "triggers/capture.h"
#include "triggers/capture_run.h"

static int g_notified, g_worker;

static void on_notify(void *ctx)
{
	(void)ctx;
	g_notified++;
}

static void on_worker(void *ctx)
{
	(void)ctx;
	g_worker++;
}

static struct agent_captures *engine(void)
{
	struct agent_captures_opts o = {.notify = on_notify};
	struct agent_captures *c = agent_captures_new(&o);
	assert_non_null(c);
	agent_captures_set_worker(c, on_worker, NULL);
	g_notified = g_worker = 0;
	return c;
}

static struct pf_capture_request request(const char *id, uint32_t duration)
{
	struct pf_capture_request r;
	memset(&r, 0, sizeof(r));
	snprintf(r.id, sizeof(r.id), "%s", id);
	snprintf(r.profile_type, sizeof(r.profile_type), "cpu");
	r.duration_seconds = duration;
	r.frequency_hz = 199;
	r.n_processes = 1;
	r.processes[0].key = (char *)"service.name";
	r.processes[0].match = PF_MATCH_REGEXP;
	r.processes[0].value = (char *)"^check";
	return r;
}

static struct pf_profcfg *config(const char *yaml)
{
	struct pf_profcfg *cfg = NULL;
	struct pf_error err = {0};
	if (pf_profcfg_parse(yaml, strlen(yaml), &cfg, &err) < 0)
		fail_msg("config: %s", err.msg);
	return cfg;
}

/* Pops every status waiting; returns how many and the last one. */
static int drain(struct agent_captures *c, struct pf_capture_status *last)
{
	int n = 0;
	struct pf_capture_status st;
	while (agent_captures_next_status(c, &st)) {
		n++;
		if (last)
			*last = st;
		assert_true(n < 1000);
	}
	return n;
}

static int submit(struct agent_captures *c, const char *id, uint32_t dur, uint64_t now,
		  struct pf_capture_status *st)
{
	struct pf_capture_request r = request(id, dur);
	return agent_captures_request(c, &r, "on_demand", now, st);
}

static void test_admit_and_job(void **unused)
{
	struct agent_captures *c = engine();
	struct pf_capture_status st;
	struct pf_capture_request r = request("cap-1", 30);
	r.has_trace_id = true;
	memset(r.trace_id, 0xab, 16);
	assert_int_equal(agent_captures_request(c, &r, "on_demand", 1000, &st), 0);
	assert_int_equal(st.state, PF_CAPTURE_ACCEPTED);
	assert_string_equal(st.id, "cap-1");
	assert_true(g_notified > 0);
	assert_true(g_worker > 0);
	assert_true(agent_captures_has_news(c));
	struct pf_capture_status out;
	assert_true(agent_captures_next_status(c, &out));
	assert_string_equal(out.id, "cap-1");
	assert_int_equal(out.state, PF_CAPTURE_ACCEPTED);
	assert_false(agent_captures_next_status(c, &out));

	struct agent_capture_job job;
	assert_int_equal(agent_captures_next_job(c, &job), 1);
	assert_string_equal(job.req.id, "cap-1");
	assert_string_equal(job.trigger, "on_demand");
	assert_int_equal(job.req.duration_seconds, 30);
	assert_int_equal(job.req.frequency_hz, 199);
	assert_int_equal(job.req.n_processes, 1);
	assert_string_equal(job.req.processes[0].key, "service.name");
	assert_string_equal(job.req.processes[0].value, "^check");
	assert_int_equal(job.req.processes[0].match, PF_MATCH_REGEXP);
	assert_true(job.req.has_trace_id);
	assert_int_equal(job.req.trace_id[15], 0xab);
	pf_capture_request_release(&job.req);
	assert_int_equal(agent_captures_next_job(c, &job), 0); /* taken once */

	/* the same id again: not run twice, its status is sent again */
	assert_int_equal(submit(c, "cap-1", 30, 1000, &st), 1);
	assert_int_equal(st.state, PF_CAPTURE_ACCEPTED);
	assert_int_equal(drain(c, NULL), 1);
	assert_int_equal(agent_captures_next_job(c, &job), 0);
	agent_captures_free(c);
}

static void expect_refusal(struct agent_captures *c, const char *id, uint32_t dur, const char *code,
			   const char *words)
{
	struct pf_capture_status st, sent;
	assert_int_equal(submit(c, id, dur, 5000, &st), -EPERM);
	assert_int_equal(st.state, PF_CAPTURE_FAILED);
	assert_string_equal(st.error_code, code);
	assert_non_null(strstr(st.error, words));
	assert_int_equal(drain(c, &sent), 1);
	assert_string_equal(sent.id, id);
	assert_string_equal(sent.error_code, code);
}

static void test_refusals(void **unused)
{
	struct agent_captures *c = engine();
	struct pf_profcfg *off = config("profiling: {enabled: false}\n");
	struct pf_profcfg *no_od =
	    config("profiling:\n  triggers: {on_demand: {enabled: false}}\n");
	struct pf_profcfg *short_max = config(
	    "profiling:\n  triggers: {on_demand: {enabled: true, max_duration_seconds: 20}}\n"
	    "  limits: {max_profiles_per_minute: 3}\n");

	agent_captures_set_config(c, off);
	expect_refusal(c, "r1", 10, "disabled", "profiling.enabled");
	agent_captures_set_config(c, no_od);
	expect_refusal(c, "r2", 10, "disabled", "on_demand.enabled");
	agent_captures_set_config(c, short_max);
	expect_refusal(c, "r3", 21, "duration_exceeded", "max_duration_seconds (20)");
	/* local triggers are not held to the on_demand limits, nor reported */
	struct pf_capture_status st;
	struct pf_capture_request r = request("hc-1", 60);
	assert_int_equal(agent_captures_request(c, &r, "high_cpu", 5000, &st), 0);
	assert_int_equal(drain(c, NULL), 0);

	/* rate: hc-1 counted one profile; one continuous window more leaves room for one */
	agent_captures_note_profiles(c, 1, 5500);
	struct pf_capture_status ok;
	assert_int_equal(submit(c, "r4", 20, 5600, &ok), 0);
	assert_int_equal(drain(c, NULL), 1);
	expect_refusal(c, "r5", 10, "rate_limited", "max_profiles_per_minute is 3");
	/* a minute later the old profiles no longer count */
	assert_int_equal(submit(c, "r6", 10, 5000 + 61000, &ok), 0);
	assert_int_equal(drain(c, NULL), 1);

	/* no sampler on this agent */
	agent_captures_set_sampler(c, false);
	expect_refusal(c, "r7", 10, "disabled", "eBPF sampler");
	agent_captures_set_sampler(c, true);

	pf_profcfg_free(off);
	pf_profcfg_free(no_od);
	pf_profcfg_free(short_max);
	agent_captures_free(c);
}

static void test_busy(void **unused)
{
	struct agent_captures *c = engine();
	struct pf_profcfg *cfg = config("profiling:\n  limits: {max_profiles_per_minute: 1000}\n");
	agent_captures_set_config(c, cfg);
	struct pf_capture_status st;
	char id[16];
	for (int i = 0; i < AGENT_CAPTURE_MAX_ACTIVE; i++) {
		snprintf(id, sizeof(id), "b%d", i);
		assert_int_equal(submit(c, id, 5, 100, &st), 0);
	}
	drain(c, NULL);
	expect_refusal(c, "b-over", 5, "busy", "already in progress");
	/* one ends: room again */
	struct agent_capture_job job;
	assert_int_equal(agent_captures_next_job(c, &job), 1);
	agent_captures_fail(c, job.serial, "process_not_found", "no process matches");
	pf_capture_request_release(&job.req);
	assert_int_equal(agent_captures_tick(c, 200), AGENT_CAPTURE_MAX_ACTIVE - 1);
	assert_int_equal(submit(c, "b-next", 5, 300, &st), 0);
	pf_profcfg_free(cfg);
	agent_captures_free(c);
}

static void test_lifecycle_done(void **unused)
{
	struct agent_captures *c = engine();
	struct pf_capture_status st;
	struct agent_capture_job job;
	assert_int_equal(submit(c, "life", 2, 0, &st), 0);
	assert_int_equal(agent_captures_next_job(c, &job), 1);
	pf_capture_request_release(&job.req);
	drain(c, NULL);
	agent_captures_started(c, job.serial, 10);
	assert_int_equal(drain(c, &st), 1);
	assert_int_equal(st.state, PF_CAPTURE_RUNNING);
	/* progress: at most one running status per AGENT_CAPTURE_PROGRESS_MS */
	agent_captures_progress(c, job.serial, 5, 20);
	assert_int_equal(drain(c, NULL), 0);
	agent_captures_progress(c, job.serial, 50, 10 + AGENT_CAPTURE_PROGRESS_MS);
	assert_int_equal(drain(c, &st), 1);
	assert_int_equal(st.samples, 50);

	uint8_t ids[3][16];
	memset(ids, 0, sizeof(ids));
	for (int i = 0; i < 3; i++)
		ids[i][0] = (uint8_t)(i + 1);
	agent_captures_exporting(c, job.serial, 400, 9000, (const uint8_t(*)[16])ids, 3, 2, 3000);
	assert_int_equal(drain(c, NULL), 0); /* still running until confirmed */
	assert_int_equal(agent_captures_status(c, "life", &st), 0);
	assert_int_equal(st.state, PF_CAPTURE_RUNNING);
	agent_captures_export_done(c, job.serial, 0, NULL);
	assert_int_equal(drain(c, NULL), 0);
	agent_captures_export_done(c, job.serial, 0, NULL);
	assert_int_equal(drain(c, &st), 1);
	assert_int_equal(st.state, PF_CAPTURE_DONE);
	assert_int_equal(st.samples, 400);
	assert_int_equal(st.bytes, 9000);
	assert_int_equal(st.n_profile_ids, 3);
	assert_int_equal(st.profile_ids[2][0], 3);
	assert_string_equal(st.error_code, "");
	/* a late callback changes nothing */
	agent_captures_export_done(c, job.serial, -EPROTO, "late");
	assert_int_equal(agent_captures_status(c, "life", &st), 0);
	assert_int_equal(st.state, PF_CAPTURE_DONE);
	agent_captures_free(c);
}

static uint64_t start_one(struct agent_captures *c, const char *id, uint64_t now)
{
	struct pf_capture_status st;
	struct agent_capture_job job;
	assert_int_equal(submit(c, id, 2, now, &st), 0);
	assert_int_equal(agent_captures_next_job(c, &job), 1);
	pf_capture_request_release(&job.req);
	agent_captures_started(c, job.serial, now);
	drain(c, NULL);
	return job.serial;
}

static void test_export_failures(void **unused)
{
	struct agent_captures *c = engine();
	struct pf_capture_status st;
	uint8_t id[1][16] = {{7}};
	/* refused by the receiver */
	uint64_t a = start_one(c, "ex-a", 0);
	agent_captures_exporting(c, a, 10, 100, (const uint8_t(*)[16])id, 1, 1, 100);
	struct agent_captures_summary sum;
	agent_captures_summary(c, &sum);
	assert_true(sum.healthy);
	assert_int_equal(sum.in_progress, 1);
	uint64_t gen = sum.generation;
	agent_captures_export_done(c, a, -EPROTO, "HTTP 401 from the receiver");
	agent_captures_summary(c, &sum);
	assert_false(sum.healthy); /* the agent's own failure */
	assert_int_equal(sum.failed, 1);
	assert_int_equal(sum.in_progress, 0);
	assert_true(sum.generation > gen);
	assert_string_equal(sum.last_error, "ex-a: export_failed: HTTP 401 from the receiver");
	assert_int_equal(drain(c, &st), 1);
	assert_int_equal(st.state, PF_CAPTURE_FAILED);
	assert_string_equal(st.error_code, "export_failed");
	assert_string_equal(st.error, "HTTP 401 from the receiver");
	/* never confirmed: the deadline fails it */
	uint64_t b = start_one(c, "ex-b", 0);
	agent_captures_exporting(c, b, 10, 100, (const uint8_t(*)[16])id, 1, 1, 100);
	assert_int_equal(agent_captures_tick(c, 100 + AGENT_CAPTURE_EXPORT_MS - 1), 1);
	assert_int_equal(drain(c, NULL), 0);
	assert_int_equal(agent_captures_tick(c, 100 + AGENT_CAPTURE_EXPORT_MS), 0);
	assert_int_equal(drain(c, &st), 1);
	assert_string_equal(st.id, "ex-b");
	assert_string_equal(st.error_code, "export_failed");
	assert_non_null(strstr(st.error, "did not confirm"));
	/* nothing sampled: done at once, no profile */
	uint64_t d = start_one(c, "ex-d", 0);
	agent_captures_exporting(c, d, 0, 0, NULL, 0, 0, 100);
	assert_int_equal(drain(c, &st), 1);
	assert_int_equal(st.state, PF_CAPTURE_DONE);
	assert_int_equal(st.n_profile_ids, 0);
	/* a success makes it healthy again; refusals and missing processes never count */
	agent_captures_summary(c, &sum);
	assert_true(sum.healthy);
	assert_int_equal(sum.done, 1);
	assert_int_equal(sum.failed, 2);
	uint64_t e = start_one(c, "ex-e", 0);
	agent_captures_fail(c, e, "process_not_found", "none");
	submit(c, "ex-f", 3000, 0, &st);
	agent_captures_summary(c, &sum);
	assert_true(sum.healthy);
	assert_int_equal(sum.refused, 1);
	assert_int_equal(sum.failed, 3);
	assert_string_equal(sum.last_error,
			    "ex-f: duration_exceeded: duration_seconds 3000 is over "
			    "profiling.triggers.on_demand.max_duration_seconds (300)");
	agent_captures_free(c);
}

static void test_cancel(void **unused)
{
	struct agent_captures *c = engine();
	struct pf_capture_status st;
	/* before the worker took it: cancelled at once, never started */
	assert_int_equal(submit(c, "c-q", 10, 0, &st), 0);
	drain(c, NULL);
	assert_int_equal(agent_captures_cancel(c, "c-q"), 0);
	assert_int_equal(drain(c, &st), 1);
	assert_int_equal(st.state, PF_CAPTURE_CANCELLED);
	struct agent_capture_job job;
	assert_int_equal(agent_captures_next_job(c, &job), 0);
	/* while sampling: the worker is told; partial samples exported, then cancelled */
	uint64_t s = start_one(c, "c-run", 0);
	assert_false(agent_captures_cancel_requested(c, s));
	int woken = g_worker;
	assert_int_equal(agent_captures_cancel(c, "c-run"), 0);
	assert_true(g_worker > woken);
	assert_true(agent_captures_cancel_requested(c, s));
	uint8_t id[1][16] = {{9}};
	agent_captures_exporting(c, s, 33, 500, (const uint8_t(*)[16])id, 1, 1, 50);
	agent_captures_export_done(c, s, 0, NULL);
	assert_int_equal(drain(c, &st), 1);
	assert_int_equal(st.state, PF_CAPTURE_CANCELLED);
	assert_int_equal(st.samples, 33);
	assert_int_equal(st.n_profile_ids, 1);
	/* unknown or final ids */
	assert_int_equal(agent_captures_cancel(c, "nope"), -ENOENT);
	assert_int_equal(agent_captures_cancel(c, "c-run"), -ENOENT);
	agent_captures_free(c);
}

static void test_resend_after_reconnect(void **unused)
{
	struct agent_captures *c = engine();
	struct pf_profcfg *cfg = config("profiling:\n  limits: {max_profiles_per_minute: 1000}\n");
	agent_captures_set_config(c, cfg);
	char id[16];
	/* 40 captures end (refused here: any final status counts) */
	for (int i = 0; i < 40; i++) {
		snprintf(id, sizeof(id), "f%02d", i);
		struct pf_capture_status st;
		struct pf_capture_request r = request(id, 3000);
		assert_int_equal(agent_captures_request(c, &r, "on_demand", 0, &st), -EPERM);
	}
	uint64_t live = start_one(c, "live", 0);
	(void)live;
	/* a local trigger's capture is never reported; its extra attributes reach the job */
	struct pf_capture_status st;
	struct pf_capture_request r = request("hc", 5);
	struct agent_capture_attr extra[AGENT_CAPTURE_MAX_ATTRS + 1] = {
	    {.key = "profleet.cpu.percent", .value = "91"}};
	assert_int_equal(agent_captures_request_attrs(c, &r, "high_cpu", extra,
						      AGENT_CAPTURE_MAX_ATTRS + 1, 0, &st),
			 -EINVAL);
	assert_int_equal(agent_captures_request_attrs(c, &r, "high_cpu", extra, 1, 0, &st), 0);
	struct agent_capture_job job;
	assert_int_equal(agent_captures_next_job(c, &job), 1);
	assert_string_equal(job.trigger, "high_cpu");
	assert_int_equal(job.n_attrs, 1);
	assert_string_equal(job.attrs[0].value, "91");
	pf_capture_request_release(&job.req);
	drain(c, NULL);
	assert_false(agent_captures_has_news(c));

	agent_captures_on_connect(c);
	/* the last 32 finals, oldest first, then the one in progress */
	for (int i = 40 - AGENT_CAPTURE_KEEP_FINAL; i < 40; i++) {
		snprintf(id, sizeof(id), "f%02d", i);
		assert_true(agent_captures_next_status(c, &st));
		assert_string_equal(st.id, id);
		assert_int_equal(st.state, PF_CAPTURE_FAILED);
		assert_string_equal(st.error_code, "duration_exceeded");
	}
	assert_true(agent_captures_next_status(c, &st));
	assert_string_equal(st.id, "live");
	assert_int_equal(st.state, PF_CAPTURE_RUNNING);
	assert_false(agent_captures_next_status(c, &st));
	assert_int_equal(agent_captures_status(c, "f00", &st), -ENOENT); /* evicted */
	pf_profcfg_free(cfg);
	agent_captures_free(c);
}

static void test_bad_request(void **unused)
{
	struct agent_captures *c = engine();
	struct pf_capture_status st;
	agent_captures_bad_request(c, "bad-1", "frequency_hz: must be 1..1000");
	assert_int_equal(drain(c, &st), 1);
	assert_string_equal(st.id, "bad-1");
	assert_int_equal(st.state, PF_CAPTURE_FAILED);
	assert_string_equal(st.error_code, "bad_request");
	assert_string_equal(st.error, "frequency_hz: must be 1..1000");
	agent_captures_bad_request(c, "bad id with spaces", "x"); /* unreadable: nothing */
	assert_int_equal(drain(c, NULL), 0);
	agent_captures_free(c);
}

static void test_receiver_url(void **unused)
{
	char out[256];
	assert_int_equal(
	    agent_capture_receiver_url("ws://127.0.0.1:4320/v1/opamp", out, sizeof(out)), 0);
	assert_string_equal(out, "http://127.0.0.1:4320/v1development/profiles");
	assert_int_equal(
	    agent_capture_receiver_url("wss://ctl.example:443/v1/opamp?x=1", out, sizeof(out)), 0);
	assert_string_equal(out, "https://ctl.example:443/v1development/profiles");
	assert_int_equal(agent_capture_receiver_url("https://[::1]:4320", out, sizeof(out)), 0);
	assert_string_equal(out, "https://[::1]:4320/v1development/profiles");
	assert_int_equal(agent_capture_receiver_url("WS://h/", out, sizeof(out)), 0);
	assert_string_equal(out, "http://h/v1development/profiles");
	assert_int_equal(agent_capture_receiver_url("ftp://h/", out, sizeof(out)), -EINVAL);
	assert_int_equal(agent_capture_receiver_url("ws:///v1/opamp", out, sizeof(out)), -EINVAL);
	assert_int_equal(agent_capture_receiver_url("ws://h:1/", out, 10), -EINVAL); /* too small */
	assert_int_equal(agent_capture_receiver_url(NULL, out, sizeof(out)), -EINVAL);
}

static const char *attr(const struct pf_prof_process *p, const char *key)
{
	for (size_t i = 0; i < p->n_attrs; i++)
		if (!strcmp(p->attrs[i].key, key))
			return p->attrs[i].value;
	return NULL;
}

static void test_tag_window(void **unused)
{
	struct pf_prof_window *w = pf_prof_window_new();
	assert_non_null(w);
	struct pf_prof_process *procs = pf_prof_alloc(w, 2 * sizeof(*procs));
	struct pf_prof_attr *a = pf_prof_alloc(w, sizeof(*a));
	struct pf_prof_sample *sm = pf_prof_alloc(w, 3 * sizeof(*sm));
	assert_true(procs && a && sm);
	a[0] = (struct pf_prof_attr){.key = "service.name", .value = "checkout"};
	procs[0] = (struct pf_prof_process){
	    .pid = 1, .n_attrs = 1, .attrs = a, .n_samples = 2, .samples = sm};
	procs[1] = (struct pf_prof_process){.pid = 2, .n_samples = 1, .samples = sm + 2};
	memset(sm[1].span_id, 0x77, 8);
	w->processes = procs;
	w->n_processes = 2;
	uint8_t trace[16];
	memset(trace, 0xab, sizeof(trace));
	assert_int_equal(agent_capture_tag_window(w, "uid-1", "cap-9", "on_demand", NULL, 0, trace),
			 0);
	for (size_t i = 0; i < 2; i++) {
		const struct pf_prof_process *p = &w->processes[i];
		assert_string_equal(attr(p, "profleet.agent.uid"), "uid-1");
		assert_string_equal(attr(p, "profleet.capture.id"), "cap-9");
		assert_string_equal(attr(p, "profleet.trigger"), "on_demand");
		for (size_t k = 0; k < p->n_samples; k++) {
			assert_memory_equal(p->samples[k].trace_id, trace, 16);
			static const uint8_t zero[8];
			assert_memory_equal(p->samples[k].span_id, zero, 8);
		}
	}
	assert_string_equal(attr(&w->processes[0], "service.name"), "checkout");
	assert_int_equal(w->processes[0].n_attrs, 4);
	/* without a trace id no link; without an agent uid no such attribute */
	memset(sm, 0, 3 * sizeof(*sm));
	struct agent_capture_attr cpu = {.key = "profleet.cpu.percent", .value = "93.5"};
	assert_int_equal(agent_capture_tag_window(w, NULL, "cap-10", "high_cpu", &cpu, 1, NULL), 0);
	assert_int_equal(w->processes[1].n_attrs, 6);
	assert_string_equal(attr(&w->processes[1], "profleet.cpu.percent"), "93.5");
	static const uint8_t none[16];
	assert_memory_equal(w->processes[1].samples[0].trace_id, none, 16);
	pf_prof_window_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_admit_and_job),
	    cmocka_unit_test(test_refusals),
	    cmocka_unit_test(test_busy),
	    cmocka_unit_test(test_lifecycle_done),
	    cmocka_unit_test(test_export_failures),
	    cmocka_unit_test(test_cancel),
	    cmocka_unit_test(test_resend_after_reconnect),
	    cmocka_unit_test(test_bad_request),
	    cmocka_unit_test(test_receiver_url),
	    cmocka_unit_test(test_tag_window),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
