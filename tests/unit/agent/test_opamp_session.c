/* test_opamp_session.c — agent/opamp_session.c without a network: first message full, status
 * compression, sequence numbers, ReportFullState, same-hash remote config, new_instance_uid,
 * server errors, heartbeat interval, agent_disconnect, the capture capability's custom
 * messages. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "health.h"
#include "opamp/opamp_session.h"
#include "pf/hash.h"
#include "pf/uuid.h"
#include "state.h"
#include "triggers/capture.h"

struct fx {
	char dir[256];
	struct agent_state *st;
	struct agent_config *cfg;
	struct agent_health *h;
	struct agent_session *s;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/pf-agent-session-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	assert_int_equal(agent_state_open(f->dir, &f->st, NULL), 0);
	f->cfg = agent_config_new(f->st);
	assert_int_equal(agent_config_add_label(f->cfg, "env=prod"), 0);
	assert_int_equal(agent_config_start(f->cfg, NULL), 0);
	f->h = agent_health_new(agent_now_unix_nano());
	assert_int_equal(agent_health_register(f->h, "config"), 0);
	f->s = agent_session_new(f->st, f->cfg, f->h, 30);
	assert_non_null(f->s);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[512];
	agent_session_free(f->s);
	agent_health_free(f->h);
	agent_config_free(f->cfg);
	agent_state_free(f->st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* Builds the next message and decodes it back. */
static struct pf_a2s *next(struct fx *f, bool disconnect)
{
	struct pf_buf b;
	struct pf_a2s *m = NULL;
	pf_buf_init(&b, 1 << 24);
	assert_int_equal(agent_session_build(f->s, disconnect, &b), 0);
	assert_int_equal(pf_a2s_decode(b.data, b.len, 1 << 24, &m, NULL), 0);
	pf_buf_release(&b);
	return m;
}

static void assert_full(const struct pf_a2s *m)
{
	assert_true(m->has_description);
	assert_true(m->has_health);
	assert_true(m->has_effective_config);
}

static void assert_empty(const struct pf_a2s *m)
{
	assert_false(m->has_description);
	assert_false(m->has_health);
	assert_false(m->has_effective_config);
	assert_false(m->has_remote_config_status);
	assert_false(m->has_disconnect);
}

static const char *nonid(const struct pf_a2s *m, const char *key)
{
	for (size_t i = 0; i < m->n_non_identifying; i++)
		if (strcmp(m->non_identifying[i].key, key) == 0)
			return m->non_identifying[i].value;
	return NULL;
}

static void test_first_full_then_compressed(void **state)
{
	struct fx *f = *state;
	char uid[PF_UUID_STR_LEN + 1];

	assert_true(agent_session_has_news(f->s));
	struct pf_a2s *m = next(f, false);
	assert_full(m);
	assert_false(m->has_remote_config_status); /* no remote config seen yet */
	assert_int_equal(m->capabilities, AGENT_CAPABILITIES);
	assert_true(m->capabilities & PF_AGENT_CAP_REPORTS_STATUS);
	assert_int_equal(m->instance_uid_len, 16);
	assert_memory_equal(m->instance_uid, agent_state_uid(f->st), 16);
	pf_uuid_format(agent_state_uid(f->st), uid);
	assert_string_equal(m->identifying[1].value, uid);
	assert_string_equal(nonid(m, "env"), "prod");
	assert_int_equal(m->effective_config.n_files, 1);
	assert_string_equal(m->effective_config.files[0].name, "profiling.yaml");
	assert_string_equal(m->effective_config.files[0].content_type, "text/yaml");
	assert_true(m->effective_config.files[0].body_len > 0);
	assert_int_equal(m->health.n_children, 1);
	uint64_t seq0 = m->sequence_num;
	pf_a2s_free(m);

	/* Nothing changed: nothing pending; a heartbeat carries no sub-message. */
	assert_false(agent_session_has_news(f->s));
	m = next(f, false);
	assert_empty(m);
	assert_int_equal(m->sequence_num, seq0 + 1);
	assert_int_equal(m->capabilities, AGENT_CAPABILITIES);
	pf_a2s_free(m);

	/* A health change: only health. */
	assert_int_equal(agent_health_set(f->h, "config", false, "x 1", "broken"), 0);
	assert_true(agent_session_has_news(f->s));
	m = next(f, false);
	assert_true(m->has_health);
	assert_false(m->has_description);
	assert_false(m->has_effective_config);
	assert_int_equal(m->sequence_num, seq0 + 2);
	assert_false(m->health.healthy);
	pf_a2s_free(m);

	/* Figures alone: not news until the figures interval passed since health was reported
	 * (here never, then at once); a heartbeat meanwhile leaves them out. */
	agent_session_set_figures_interval(f->s, UINT64_MAX / 2);
	assert_int_equal(agent_health_set(f->h, "config", false, "x 3", "broken"), 0);
	assert_false(agent_session_has_news(f->s));
	m = next(f, false);
	assert_empty(m);
	pf_a2s_free(m);
	agent_session_set_figures_interval(f->s, 0);
	assert_true(agent_session_has_news(f->s));
	m = next(f, false);
	assert_true(m->has_health);
	assert_string_equal(m->health.children[0].health.status, "x 3");
	pf_a2s_free(m);
	assert_false(agent_session_has_news(f->s));

	/* A new connection: full again, sequence continues. */
	agent_session_on_connect(f->s);
	assert_true(agent_session_has_news(f->s));
	m = next(f, false);
	assert_full(m);
	assert_int_equal(m->sequence_num, seq0 + 5);
	pf_a2s_free(m);
	assert_int_equal(agent_session_next_seq(f->s), seq0 + 6);
}

static struct pf_s2a s2a_with_config(const char *doc, struct pf_config_file *file,
				     uint8_t hash[PF_SHA256_LEN])
{
	struct pf_s2a m = {0};
	file->name = (char *)"profiling.yaml";
	file->body = (uint8_t *)doc;
	file->body_len = strlen(doc);
	file->content_type = (char *)"text/yaml";
	pf_sha256(doc, strlen(doc), hash);
	m.has_remote_config = true;
	m.remote_config.n_files = 1;
	m.remote_config.files = file;
	m.remote_config_hash = hash;
	m.remote_config_hash_len = PF_SHA256_LEN;
	return m;
}

static void test_remote_config_round(void **state)
{
	struct fx *f = *state;
	struct agent_session_action act;
	struct pf_config_file file;
	uint8_t hash[PF_SHA256_LEN];

	pf_a2s_free(next(f, false)); /* first, full */

	struct pf_s2a in =
	    s2a_with_config("profiling: {sampling: {frequency_hz: 29}}\n", &file, hash);
	agent_session_process(f->s, &in, &act);
	assert_true(act.send);
	assert_false(act.reconnect);
	struct pf_a2s *m = next(f, false);
	assert_true(m->has_remote_config_status);
	assert_int_equal(m->rcs_status, PF_RCS_APPLIED);
	assert_int_equal(m->rcs_last_hash_len, PF_SHA256_LEN);
	assert_memory_equal(m->rcs_last_hash, hash, PF_SHA256_LEN);
	assert_true(m->has_effective_config);
	assert_non_null(strstr((const char *)m->effective_config.files[0].body, "29"));
	assert_false(m->has_description);
	pf_a2s_free(m);

	/* Same config again: no status report. */
	agent_session_process(f->s, &in, &act);
	assert_false(act.send);
	assert_false(agent_session_has_news(f->s));

	/* A bad config: FAILED with the key path; effective config unchanged (not resent). */
	struct pf_config_file file2;
	uint8_t hash2[PF_SHA256_LEN];
	struct pf_s2a bad =
	    s2a_with_config("profiling: {sampling: {frequency_hz: 5000}}\n", &file2, hash2);
	agent_session_process(f->s, &bad, &act);
	assert_true(act.send);
	m = next(f, false);
	assert_true(m->has_remote_config_status);
	assert_int_equal(m->rcs_status, PF_RCS_FAILED);
	assert_non_null(strstr(m->rcs_error_message, "profiling.sampling.frequency_hz"));
	assert_memory_equal(m->rcs_last_hash, hash2, PF_SHA256_LEN);
	assert_false(m->has_effective_config);
	assert_true(m->has_health); /* the "config" component reports the rejection */
	pf_a2s_free(m);
	/* ... and resending it causes no loop. */
	agent_session_process(f->s, &bad, &act);
	assert_false(act.send);
}

static void test_report_full_state(void **state)
{
	struct fx *f = *state;
	struct agent_session_action act;
	struct pf_s2a in = {0};

	pf_a2s_free(next(f, false));
	agent_session_process(f->s, &in, &act); /* a plain ack */
	assert_false(act.send);

	in.flags = PF_S2A_FLAG_REPORT_FULL_STATE;
	agent_session_process(f->s, &in, &act);
	assert_true(act.send);
	struct pf_a2s *m = next(f, false);
	assert_full(m);
	pf_a2s_free(m);
	assert_false(agent_session_has_news(f->s));
}

static void test_new_instance_uid(void **state)
{
	struct fx *f = *state;
	struct agent_session_action act;
	struct pf_s2a in = {0};
	char text[PF_UUID_STR_LEN + 1];

	pf_a2s_free(next(f, false));
	in.has_new_instance_uid = true;
	assert_int_equal(pf_uuid_v7(in.new_instance_uid), 0);
	agent_session_process(f->s, &in, &act);
	assert_true(act.send);
	assert_memory_equal(agent_state_uid(f->st), in.new_instance_uid, 16);
	struct pf_a2s *m = next(f, false);
	assert_memory_equal(m->instance_uid, in.new_instance_uid, 16);
	assert_true(m->has_description);
	pf_uuid_format(in.new_instance_uid, text);
	assert_string_equal(m->identifying[1].value, text);
	pf_a2s_free(m);

	/* Persisted: a restart keeps it. */
	struct agent_state *st2 = NULL;
	assert_int_equal(agent_state_open(f->dir, &st2, NULL), 0);
	assert_memory_equal(agent_state_uid(st2), in.new_instance_uid, 16);
	agent_state_free(st2);
}

static void test_errors_and_heartbeat(void **state)
{
	struct fx *f = *state;
	struct agent_session_action act;
	struct pf_s2a in = {0};

	in.has_error = true;
	in.error_type = PF_SERR_BAD_REQUEST;
	in.error_message = (char *)"bad";
	agent_session_process(f->s, &in, &act);
	assert_true(act.bad_request);
	assert_false(act.reconnect);

	memset(&in, 0, sizeof(in));
	in.has_error = true;
	in.error_type = PF_SERR_UNAVAILABLE;
	in.has_retry_after = true;
	in.retry_after_nanoseconds = 2500000000ull;
	agent_session_process(f->s, &in, &act);
	assert_true(act.reconnect);
	assert_true(act.has_retry_after);
	assert_int_equal(act.retry_after_ms, 2500);

	memset(&in, 0, sizeof(in));
	assert_int_equal(agent_session_heartbeat_s(f->s), 30);
	in.has_heartbeat_interval = true;
	in.heartbeat_interval_seconds = 5;
	agent_session_process(f->s, &in, &act);
	assert_true(act.heartbeat_changed);
	assert_int_equal(agent_session_heartbeat_s(f->s), 5);
	agent_session_process(f->s, &in, &act);
	assert_false(act.heartbeat_changed);
	in.heartbeat_interval_seconds = 0; /* disables */
	agent_session_process(f->s, &in, &act);
	assert_true(act.heartbeat_changed);
	assert_int_equal(agent_session_heartbeat_s(f->s), 0);
}

/* OpAMP "Offers of Connection Settings": a credential in connection_settings.opamp.headers
 * is held until the transport verified it, then persisted with the offer's hash; the same
 * offer again, an offer without an Authorization, or one that is not a bearer token change
 * nothing. */
static void test_credential_offer(void **state)
{
	struct fx *f = *state;
	struct agent_session_action act;
	struct pf_kv hdr = {(char *)"authorization", (char *)"Bearer pf_own_1"};
	uint8_t h1[32], h2[32];
	const char *tok;
	const uint8_t *hh;
	size_t hl;
	struct pf_error err = {0};
	memset(h1, 1, 32);
	memset(h2, 2, 32);
	struct pf_s2a in = {.has_heartbeat_interval = true,
			    .heartbeat_interval_seconds = 30,
			    .n_opamp_headers = 1,
			    .opamp_headers = &hdr,
			    .connection_settings_hash = h1,
			    .connection_settings_hash_len = 32};
	agent_session_process(f->s, &in, &act);
	assert_true(act.credential_offered);
	assert_true(agent_session_offer(f->s, &tok));
	assert_string_equal(tok, "pf_own_1");
	/* not persisted before it is verified; dropped when verification fails */
	assert_false(agent_state_credential(f->st, &tok, &hh, &hl));
	agent_session_drop_offer(f->s);
	assert_false(agent_session_offer(f->s, &tok));
	agent_session_process(f->s, &in, &act);
	assert_true(act.credential_offered);
	assert_int_equal(agent_session_accept_offer(f->s, &err), 0);
	assert_false(agent_session_offer(f->s, &tok));
	assert_true(agent_state_credential(f->st, &tok, &hh, &hl));
	assert_string_equal(tok, "pf_own_1");
	assert_int_equal(hl, 32);
	assert_memory_equal(hh, h1, 32);
	/* the settings it holds (same hash): nothing to do */
	agent_session_process(f->s, &in, &act);
	assert_false(act.credential_offered);
	/* heartbeat-only settings: the credential stays */
	struct pf_s2a hb = {.has_heartbeat_interval = true, .heartbeat_interval_seconds = 30};
	agent_session_process(f->s, &hb, &act);
	assert_false(act.credential_offered);
	/* not a bearer token: ignored */
	hdr.value = (char *)"Basic YWxhZGRpbg==";
	in.connection_settings_hash = h2;
	agent_session_process(f->s, &in, &act);
	assert_false(act.credential_offered);
	/* a rotation: another hash */
	hdr.value = (char *)"Bearer pf_own_2";
	agent_session_process(f->s, &in, &act);
	assert_true(act.credential_offered);
	assert_true(agent_session_offer(f->s, &tok));
	assert_string_equal(tok, "pf_own_2");
}

static void test_wire_and_disconnect(void **state)
{
	struct fx *f = *state;
	struct agent_session_action act;
	struct pf_s2a in = {0};
	struct pf_buf b;
	struct pf_error err = {0};

	pf_a2s_free(next(f, false));
	/* Through the codec: an encoded ServerToAgent with ReportFullState. */
	in.flags = PF_S2A_FLAG_REPORT_FULL_STATE;
	in.capabilities = PF_SERVER_CAP_ACCEPTS_STATUS;
	memcpy(in.instance_uid, agent_state_uid(f->st), 16);
	in.instance_uid_len = 16;
	pf_buf_init(&b, 1 << 20);
	assert_int_equal(pf_s2a_encode(&in, &b), 0);
	assert_int_equal(agent_session_handle(f->s, b.data, b.len, &act, &err), 0);
	assert_true(act.send);
	pf_buf_release(&b);

	static const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0xff};
	assert_int_equal(agent_session_handle(f->s, garbage, sizeof(garbage), &act, &err),
			 -EBADMSG);

	/* The last message carries agent_disconnect. */
	struct pf_a2s *m = next(f, true);
	assert_true(m->has_disconnect);
	assert_full(m);
	pf_a2s_free(m);
}

static void test_outbound_limit(void **state)
{
	struct fx *f = *state;
	struct pf_buf b;
	agent_session_set_max_message(f->s, 16); /* far too small for a full report */
	pf_buf_init(&b, 1 << 20);
	assert_int_equal(agent_session_build(f->s, false, &b), -E2BIG);
	assert_int_equal(b.len, 0);
	assert_int_equal(agent_session_next_seq(f->s), 0); /* not sent: no sequence used */
	pf_buf_release(&b);
}

/* A ServerToAgent carrying one custom message of the capture capability. */
static void server_custom(struct fx *f, const char *type, const char *json)
{
	struct pf_s2a m = {0};
	struct agent_session_action act;
	m.has_custom_message = true;
	m.custom_message.capability = (char *)PF_CAPTURE_CAPABILITY;
	m.custom_message.type = (char *)type;
	m.custom_message.data = (uint8_t *)json;
	m.custom_message.data_len = strlen(json);
	agent_session_process(f->s, &m, &act);
}

/* The status a built message carries (decoded), or false when it has none. */
static bool next_status(struct fx *f, struct pf_capture_status *st)
{
	struct pf_a2s *m = next(f, false);
	bool has = m->has_custom_message;
	if (has) {
		assert_string_equal(m->custom_message.capability, PF_CAPTURE_CAPABILITY);
		assert_string_equal(m->custom_message.type, PF_CAPTURE_TYPE_STATUS);
		assert_int_equal(pf_capture_status_decode(m->custom_message.data,
							  m->custom_message.data_len, st, NULL),
				 0);
	}
	pf_a2s_free(m);
	return has;
}

static void test_capture_messages(void **state)
{
	struct fx *f = *state;
	struct pf_capture_status st;
	struct agent_captures *c = agent_captures_new(NULL);
	assert_non_null(c);
	agent_session_set_captures(f->s, c);

	/* the capability is listed in full reports */
	struct pf_a2s *m = next(f, false);
	assert_true(m->has_custom_capabilities);
	assert_int_equal(m->n_custom_capabilities, 1);
	assert_string_equal(m->custom_capabilities[0], PF_CAPTURE_CAPABILITY);
	assert_false(m->has_custom_message);
	pf_a2s_free(m);
	assert_false(agent_session_has_news(f->s));

	/* a request: admitted, its status in the next message */
	server_custom(f, PF_CAPTURE_TYPE_REQUEST,
		      "{\"id\":\"s1\",\"duration_seconds\":5,\"frequency_hz\":99}");
	assert_true(agent_session_has_news(f->s));
	assert_true(agent_session_has_capture_news(f->s));
	assert_true(next_status(f, &st));
	assert_string_equal(st.id, "s1");
	assert_int_equal(st.state, PF_CAPTURE_ACCEPTED);
	assert_false(agent_session_has_news(f->s));

	/* a bad payload with a readable id: failed/bad_request naming the field */
	server_custom(f, PF_CAPTURE_TYPE_REQUEST,
		      "{\"id\":\"s2\",\"duration_seconds\":5,\"frequency_hz\":5000}");
	assert_true(next_status(f, &st));
	assert_string_equal(st.id, "s2");
	assert_int_equal(st.state, PF_CAPTURE_FAILED);
	assert_string_equal(st.error_code, "bad_request");
	assert_non_null(strstr(st.error, "frequency_hz"));
	/* without a readable id, or of an unknown type: only counted */
	server_custom(f, PF_CAPTURE_TYPE_REQUEST, "not json");
	server_custom(f, "capture.bogus", "{}");
	assert_int_equal(agent_session_capture_errors(f->s), 2);
	assert_false(agent_session_has_news(f->s));

	/* two changes between messages: one status per message, oldest first */
	server_custom(f, PF_CAPTURE_TYPE_CANCEL, "{\"id\":\"s1\"}");
	server_custom(f, PF_CAPTURE_TYPE_REQUEST,
		      "{\"id\":\"s3\",\"duration_seconds\":1,\"frequency_hz\":99}");
	assert_true(next_status(f, &st));
	assert_string_equal(st.id, "s1");
	assert_int_equal(st.state, PF_CAPTURE_CANCELLED);
	assert_true(agent_session_has_news(f->s));
	assert_true(next_status(f, &st));
	assert_string_equal(st.id, "s3");
	assert_false(next_status(f, &st));

	/* a new connection: capability and every kept status again */
	agent_session_on_connect(f->s);
	m = next(f, false);
	assert_true(m->has_custom_capabilities);
	assert_true(m->has_custom_message);
	pf_a2s_free(m);
	int more = 0;
	while (next_status(f, &st) && more < 10)
		more++;
	assert_int_equal(more, 2); /* s1..s3: one rode on the full report */
	agent_session_set_captures(f->s, NULL);
	agent_captures_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_first_full_then_compressed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_remote_config_round, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_report_full_state, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_new_instance_uid, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_errors_and_heartbeat, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_credential_offer, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_wire_and_disconnect, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_outbound_limit, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_capture_messages, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
