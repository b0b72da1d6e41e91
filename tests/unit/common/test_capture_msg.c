/* test_capture_msg.c — the io.profleet.capture.v1 payloads: round trips of request, cancel
 * and status with every field, and each refusal naming its field. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pf/capture_msg.h"

static int decode_req(const char *json, struct pf_capture_request *r, struct pf_error *err)
{
	return pf_capture_request_decode((const uint8_t *)json, strlen(json), r, err);
}

static void test_request_round_trip(void **state)
{
	(void)state;
	struct pf_capture_request r = {0}, back;
	struct pf_error err = {0};
	struct pf_buf b;

	snprintf(r.id, sizeof(r.id), "0190a000-0000-7000-8000-000000000001");
	snprintf(r.profile_type, sizeof(r.profile_type), "cpu");
	r.duration_seconds = 30;
	r.frequency_hz = 199;
	r.n_processes = 2;
	r.processes[0] = (struct pf_filter){
	    .key = strdup("service.name"), .match = PF_MATCH_STRICT, .value = strdup("checkout")};
	r.processes[1] = (struct pf_filter){.key = strdup("process.executable.name"),
					    .match = PF_MATCH_REGEXP,
					    .value = strdup("^java.*")};
	r.has_trace_id = true;
	for (int i = 0; i < 16; i++)
		r.trace_id[i] = (uint8_t)(0xa0 + i);
	r.note = strdup("incident \"42\"");
	r.receiver = strdup("https://ctl.example:4320/v1development/profiles");
	pf_buf_init(&b, PF_CAPTURE_MAX_MSG + 1);
	assert_int_equal(pf_capture_request_encode(&r, &b), 0);
	assert_int_equal(pf_capture_request_decode(b.data, b.len, &back, &err), 0);
	assert_string_equal(back.id, r.id);
	assert_string_equal(back.profile_type, "cpu");
	assert_int_equal(back.duration_seconds, 30);
	assert_int_equal(back.frequency_hz, 199);
	assert_int_equal(back.n_processes, 2);
	assert_string_equal(back.processes[1].key, "process.executable.name");
	assert_int_equal(back.processes[1].match, PF_MATCH_REGEXP);
	assert_string_equal(back.processes[1].value, "^java.*");
	assert_true(back.has_trace_id);
	assert_memory_equal(back.trace_id, r.trace_id, 16);
	assert_string_equal(back.note, r.note);
	assert_string_equal(back.receiver, r.receiver);
	pf_capture_request_release(&back);

	/* Optional fields absent: none come back; profile_type defaults to cpu. */
	assert_int_equal(decode_req("{\"id\":\"a\",\"duration_seconds\":1,\"frequency_hz\":1,"
				    "\"future_field\":[1]}",
				    &back, &err),
			 0);
	assert_string_equal(back.profile_type, "cpu");
	assert_false(back.has_trace_id);
	assert_null(back.note);
	assert_null(back.receiver);
	assert_int_equal(back.n_processes, 0);
	pf_capture_request_release(&back);

	/* every type this version captures */
	static const char *const types[] = {"cpu", "off_cpu", "wall", "alloc"};
	for (size_t i = 0; i < 4; i++) {
		char j[160];
		snprintf(j, sizeof(j),
			 "{\"id\":\"a\",\"duration_seconds\":1,\"frequency_hz\":1,"
			 "\"profile_type\":\"%s\"}",
			 types[i]);
		assert_int_equal(decode_req(j, &back, &err), 0);
		assert_string_equal(back.profile_type, types[i]);
		pf_capture_request_release(&back);
	}
	enum pf_prof_type t;
	assert_int_equal(pf_prof_type_parse("alloc", &t), 0);
	assert_true(pf_capture_type_supported(t));
	assert_true(pf_capture_type_supported(PF_PROF_WALL));
	pf_capture_request_release(&r);
	pf_buf_release(&b);
}

static void test_request_refusals(void **state)
{
	(void)state;
	char big[PF_CAPTURE_MAX_MSG + 64];
	memset(big, ' ', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	big[0] = '{';
	big[sizeof(big) - 2] = '}';
	char long_note[1200 + 100];
	snprintf(long_note, sizeof(long_note),
		 "{\"id\":\"a\",\"duration_seconds\":1,\"frequency_hz\":1,\"note\":\"%01100d\"}",
		 0);
	static const char *const procs17 =
	    "{\"id\":\"a\",\"duration_seconds\":1,\"frequency_hz\":1,\"processes\":["
	    "{\"key\":\"service.name\",\"value\":\"a\"},{\"key\":\"service.name\",\"value\":\"a\"},"
	    "{\"key\":\"service.name\",\"value\":\"a\"},{\"key\":\"service.name\",\"value\":\"a\"},"
	    "{\"key\":\"service.name\",\"value\":\"a\"},{\"key\":\"service.name\",\"value\":\"a\"},"
	    "{\"key\":\"service.name\",\"value\":\"a\"},{\"key\":\"service.name\",\"value\":\"a\"},"
	    "{\"key\":\"service.name\",\"value\":\"a\"},{\"key\":\"service.name\",\"value\":\"a\"},"
	    "{\"key\":\"service.name\",\"value\":\"a\"},{\"key\":\"service.name\",\"value\":\"a\"},"
	    "{\"key\":\"service.name\",\"value\":\"a\"},{\"key\":\"service.name\",\"value\":\"a\"},"
	    "{\"key\":\"service.name\",\"value\":\"a\"},{\"key\":\"service.name\",\"value\":\"a\"},"
	    "{\"key\":\"service.name\",\"value\":\"a\"}]}";
	const struct {
		const char *json, *path;
	} cases[] = {
	    {"not json", ""},
	    {"[1]", ""},
	    {"{\"duration_seconds\":1,\"frequency_hz\":1}", "id"},
	    {"{\"id\":\"has space\",\"duration_seconds\":1,\"frequency_hz\":1}", "id"},
	    {"{\"id\":\"0123456789012345678901234567890123456789012345678901234567890123456789\","
	     "\"duration_seconds\":1,\"frequency_hz\":1}",
	     "id"},
	    {"{\"id\":7,\"duration_seconds\":1,\"frequency_hz\":1}", "id"},
	    {"{\"id\":\"a\",\"frequency_hz\":1}", "duration_seconds"},
	    {"{\"id\":\"a\",\"duration_seconds\":0,\"frequency_hz\":1}", "duration_seconds"},
	    {"{\"id\":\"a\",\"duration_seconds\":3601,\"frequency_hz\":1}", "duration_seconds"},
	    {"{\"id\":\"a\",\"duration_seconds\":-1,\"frequency_hz\":1}", "duration_seconds"},
	    {"{\"id\":\"a\",\"duration_seconds\":\"30\",\"frequency_hz\":1}", "duration_seconds"},
	    {"{\"id\":\"a\",\"duration_seconds\":1,\"frequency_hz\":0}", "frequency_hz"},
	    {"{\"id\":\"a\",\"duration_seconds\":1,\"frequency_hz\":1001}", "frequency_hz"},
	    {"{\"id\":\"a\",\"duration_seconds\":1,\"frequency_hz\":1,\"profile_type\":\"heap\"}",
	     "profile_type"},
	    {"{\"id\":\"a\",\"duration_seconds\":1,\"frequency_hz\":1,\"profile_type\":7}",
	     "profile_type"},
	    {"{\"id\":\"a\",\"duration_seconds\":1,\"frequency_hz\":1,\"processes\":{}}",
	     "processes"},
	    {"{\"id\":\"a\",\"duration_seconds\":1,\"frequency_hz\":1,\"processes\":[1]}",
	     "processes[0]"},
	    {"{\"id\":\"a\",\"duration_seconds\":1,\"frequency_hz\":1,\"processes\":[{\"key\":"
	     "\"nope\",\"value\":\"x\"}]}",
	     "processes[0].key"},
	    {"{\"id\":\"a\",\"duration_seconds\":1,\"frequency_hz\":1,\"processes\":[{\"key\":"
	     "\"service.name\",\"match\":\"glob\",\"value\":\"x\"}]}",
	     "processes[0]"},
	    {"{\"id\":\"a\",\"duration_seconds\":1,\"frequency_hz\":1,\"processes\":[{\"key\":"
	     "\"service.name\",\"match\":\"regexp\",\"value\":\"(x\"}]}",
	     "processes[0].value"},
	    {"{\"id\":\"a\",\"duration_seconds\":1,\"frequency_hz\":1,\"processes\":[{\"key\":"
	     "\"service.name\"}]}",
	     "processes[0].value"},
	    {"{\"id\":\"a\",\"duration_seconds\":1,\"frequency_hz\":1,\"processes\":[{\"key\":1,"
	     "\"value\":\"x\"}]}",
	     "processes[0].key"},
	    {"{\"id\":\"a\",\"duration_seconds\":1,\"frequency_hz\":1,\"trace_id\":\"abc\"}",
	     "trace_id"},
	    {"{\"id\":\"a\",\"duration_seconds\":1,\"frequency_hz\":1,\"trace_id\":"
	     "\"zz000000000000000000000000000000\"}",
	     "trace_id"},
	    {"{\"id\":\"a\",\"duration_seconds\":1,\"frequency_hz\":1,\"receiver\":\"ftp://x\"}",
	     "receiver"},
	    {"{\"id\":\"a\",\"id\":\"b\",\"duration_seconds\":1,\"frequency_hz\":1}", ""},
	    {"{\"id\":\"a\\u0000b\",\"duration_seconds\":1,\"frequency_hz\":1}", ""},
	    {procs17, "processes"},
	    {long_note, "note"},
	    {big, ""},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pf_capture_request r;
		struct pf_error err = {0};
		int rc = decode_req(cases[i].json, &r, &err);
		if (rc >= 0 || strcmp(err.path, cases[i].path) != 0)
			print_message("case %zu: rc %d path '%s' msg '%s'\n", i, rc, err.path,
				      err.msg);
		assert_true(rc < 0);
		assert_string_equal(err.path, cases[i].path);
		assert_true(err.msg[0] != 0);
		pf_capture_request_release(&r);
	}
	/* the range a message names is the range accepted */
	static const struct {
		const char *json, *msg;
	} ranges[] = {
	    {"{\"id\":\"a\",\"duration_seconds\":3601,\"frequency_hz\":1}", "1..3600"},
	    {"{\"id\":\"a\",\"duration_seconds\":\"30\",\"frequency_hz\":1}", "1..3600"},
	    {"{\"id\":\"a\",\"duration_seconds\":0,\"frequency_hz\":1}", "1..3600"},
	    {"{\"id\":\"a\",\"duration_seconds\":1,\"frequency_hz\":-1}", "1..1000"},
	};
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		struct pf_capture_request q;
		struct pf_error err = {0};
		assert_true(decode_req(ranges[i].json, &q, &err) < 0);
		if (!strstr(err.msg, ranges[i].msg))
			print_message("range %zu: msg '%s'\n", i, err.msg);
		assert_non_null(strstr(err.msg, ranges[i].msg));
		pf_capture_request_release(&q);
	}
	/* The encoder refuses what the check refuses. */
	struct pf_capture_request r = {
	    .id = "a", .profile_type = "cpu", .duration_seconds = 0, .frequency_hz = 1};
	struct pf_buf b;
	pf_buf_init(&b, 1024);
	assert_int_equal(pf_capture_request_encode(&r, &b), -EINVAL);
	assert_int_equal(b.len, 0);
	pf_buf_release(&b);
}

static void test_cancel(void **state)
{
	(void)state;
	char id[PF_CAPTURE_ID_MAX + 1];
	struct pf_error err = {0};
	struct pf_buf b;
	pf_buf_init(&b, 1024);
	assert_int_equal(pf_capture_cancel_encode("cap-1.x_y", &b), 0);
	assert_int_equal(pf_capture_cancel_decode(b.data, b.len, id, &err), 0);
	assert_string_equal(id, "cap-1.x_y");
	assert_int_equal(pf_capture_cancel_encode("bad id", &b), -EINVAL);
	assert_int_equal(pf_capture_cancel_encode("", &b), -EINVAL);
	assert_true(pf_capture_cancel_decode((const uint8_t *)"{}", 2, id, &err) < 0);
	assert_string_equal(err.path, "id");
	pf_error_clear(&err);
	assert_true(pf_capture_cancel_decode((const uint8_t *)"{\"id\":", 6, id, &err) < 0);
	assert_string_equal(err.path, "");
	pf_buf_release(&b);
}

static void test_status_round_trip(void **state)
{
	(void)state;
	struct pf_capture_status s = {.state = PF_CAPTURE_DONE,
				      .samples = 12345,
				      .bytes = (uint64_t)1 << 40,
				      .n_profile_ids = 3};
	struct pf_capture_status back;
	struct pf_error err = {0};
	struct pf_buf b;

	snprintf(s.id, sizeof(s.id), "c1");
	for (int i = 0; i < 3; i++)
		memset(s.profile_ids[i], 0x11 * (i + 1), 16);
	pf_buf_init(&b, PF_CAPTURE_MAX_MSG + 1);
	assert_int_equal(pf_capture_status_encode(&s, &b), 0);
	assert_int_equal(pf_capture_status_decode(b.data, b.len, &back, &err), 0);
	assert_string_equal(back.id, "c1");
	assert_int_equal(back.state, PF_CAPTURE_DONE);
	assert_int_equal(back.samples, 12345);
	assert_int_equal(back.bytes, (uint64_t)1 << 40);
	assert_int_equal(back.n_profile_ids, 3);
	assert_memory_equal(back.profile_ids, s.profile_ids, 3 * 16);
	assert_string_equal(back.error_code, "");

	/* failed with a reason; every state name parses back */
	pf_buf_reset(&b);
	s.state = PF_CAPTURE_FAILED;
	s.n_profile_ids = 0;
	snprintf(s.error_code, sizeof(s.error_code), "process_not_found");
	snprintf(s.error, sizeof(s.error), "no process matches service.name=checkout");
	assert_int_equal(pf_capture_status_encode(&s, &b), 0);
	assert_int_equal(pf_capture_status_decode(b.data, b.len, &back, &err), 0);
	assert_string_equal(back.error_code, "process_not_found");
	assert_string_equal(back.error, s.error);
	for (int st = PF_CAPTURE_ACCEPTED; st <= PF_CAPTURE_CANCELLED; st++) {
		enum pf_capture_state out;
		assert_int_equal(pf_capture_state_parse(pf_capture_state_name(st), &out), 0);
		assert_int_equal(out, st);
		assert_int_equal(pf_capture_state_final(st), st >= PF_CAPTURE_DONE);
	}

	/* The encoder refuses what no decoder would accept. */
	s.n_profile_ids = PF_CAPTURE_MAX_PROFILE_IDS + 1;
	assert_int_equal(pf_capture_status_encode(&s, &b), -EINVAL);
	s.n_profile_ids = 0;
	s.state = (enum pf_capture_state)9;
	assert_int_equal(pf_capture_status_encode(&s, &b), -EINVAL);
	pf_buf_release(&b);
}

static void test_status_refusals(void **state)
{
	(void)state;
	char many[8192];
	size_t off = (size_t)snprintf(many, sizeof(many),
				      "{\"id\":\"a\",\"state\":\"done\","
				      "\"profile_ids\":[");
	for (int i = 0; i <= PF_CAPTURE_MAX_PROFILE_IDS; i++)
		off += (size_t)snprintf(many + off, sizeof(many) - off, "%s\"%032d\"", i ? "," : "",
					i);
	snprintf(many + off, sizeof(many) - off, "]}");
	const struct {
		const char *json, *path;
	} cases[] = {
	    {"{\"state\":\"done\"}", "id"},
	    {"{\"id\":\"a\"}", "state"},
	    {"{\"id\":\"a\",\"state\":\"finished\"}", "state"},
	    {"{\"id\":\"a\",\"state\":\"done\",\"samples\":-1}", "samples"},
	    {"{\"id\":\"a\",\"state\":\"done\",\"bytes\":1.5}", "bytes"},
	    {"{\"id\":\"a\",\"state\":\"done\",\"profile_ids\":\"x\"}", "profile_ids"},
	    {"{\"id\":\"a\",\"state\":\"done\",\"profile_ids\":[\"abc\"]}", "profile_ids"},
	    {"{\"id\":\"a\",\"state\":\"done\",\"profile_ids\":[7]}", "profile_ids"},
	    {"{\"id\":\"a\",\"state\":\"failed\",\"error\":5}", "error"},
	    {many, "profile_ids"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pf_capture_status s;
		struct pf_error err = {0};
		int rc = pf_capture_status_decode((const uint8_t *)cases[i].json,
						  strlen(cases[i].json), &s, &err);
		if (rc >= 0 || strcmp(err.path, cases[i].path) != 0)
			print_message("case %zu: rc %d path '%s' msg '%s'\n", i, rc, err.path,
				      err.msg);
		assert_true(rc < 0);
		assert_string_equal(err.path, cases[i].path);
	}
}

static void test_ids_and_hex(void **state)
{
	(void)state;
	uint8_t b[16], back[16];
	char hex[33];
	for (int i = 0; i < 16; i++)
		b[i] = (uint8_t)(i * 17);
	pf_capture_hex16(b, hex);
	assert_string_equal(hex, "00112233445566778899aabbccddeeff");
	assert_int_equal(pf_capture_parse_hex16("00112233445566778899AABBCCDDEEFF", back), 0);
	assert_memory_equal(back, b, 16);
	assert_int_equal(pf_capture_parse_hex16("00112233445566778899aabbccddeef", back), -EINVAL);
	assert_int_equal(pf_capture_parse_hex16("00112233445566778899aabbccddeefg", back), -EINVAL);
	assert_int_equal(pf_capture_parse_hex16(NULL, back), -EINVAL);
	assert_true(pf_capture_id_valid("a"));
	assert_true(pf_capture_id_valid("0190a000-0000-7000-8000-000000000001"));
	assert_false(pf_capture_id_valid(""));
	assert_false(pf_capture_id_valid(NULL));
	assert_false(pf_capture_id_valid("a/b"));
	char id[PF_CAPTURE_ID_MAX + 2];
	memset(id, 'x', sizeof(id) - 1);
	id[PF_CAPTURE_ID_MAX] = 0;
	assert_true(pf_capture_id_valid(id));
	id[PF_CAPTURE_ID_MAX] = 'x';
	id[PF_CAPTURE_ID_MAX + 1] = 0;
	assert_false(pf_capture_id_valid(id));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_request_round_trip),
	    cmocka_unit_test(test_request_refusals),
	    cmocka_unit_test(test_cancel),
	    cmocka_unit_test(test_status_round_trip),
	    cmocka_unit_test(test_status_refusals),
	    cmocka_unit_test(test_ids_and_hex),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
