/* test_session.c — the server side of OpAMP, message by message, without a network: each
 * test encodes an AgentToServer with the real codec, hands it to the session and decodes the
 * ServerToAgent it answers with. Each check names the OpAMP rule it holds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <errno.h>
#include <stdlib.h>

#include <cmocka.h>
#include <jansson.h>

#include "api/api_captures.h"
#include "fleet/capture.h"
#include "fleet/fleet.h"
#include "metrics.h"
#include "store.h"
#include "opamp/session.h"
#include "opamp_codec.h"
#include "pf/hash.h"

#define CAPS                                                                                       \
	(PF_AGENT_CAP_REPORTS_STATUS | PF_AGENT_CAP_ACCEPTS_REMOTE_CONFIG |                        \
	 PF_AGENT_CAP_REPORTS_EFFECTIVE_CONFIG | PF_AGENT_CAP_REPORTS_HEALTH |                     \
	 PF_AGENT_CAP_REPORTS_REMOTE_CONFIG | PF_AGENT_CAP_REPORTS_HEARTBEAT |                     \
	 PF_AGENT_CAP_ACCEPTS_OPAMP_CONNECTION_SETTINGS)

struct fx {
	struct pf_fleet *fleet;
	struct pf_metrics metrics;
	struct pf_opamp_ctx ctx;
};

static int setup(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));
	struct pf_fleet_options o = {.heartbeat_interval_s = 30};
	x->fleet = pf_fleet_new(&o);
	x->ctx.fleet = x->fleet;
	x->ctx.metrics = &x->metrics;
	x->ctx.max_message_bytes = 1 << 20;
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fx *x = *state;
	pf_fleet_free(x->fleet);
	free(x);
	return 0;
}

static struct pf_kv ident[] = {{"service.name", "profleet-agent"},
			       {"service.instance.id", "abc"}};
static struct pf_kv nonident[] = {{"host.name", "h1"}, {"env", "prod"}};

static void full_status(struct pf_a2s *m, uint8_t uid_byte, uint64_t seq)
{
	memset(m, 0, sizeof(*m));
	memset(m->instance_uid, uid_byte, 16);
	m->instance_uid_len = 16;
	m->sequence_num = seq;
	m->capabilities = CAPS;
	m->has_description = true;
	m->n_identifying = 2;
	m->identifying = ident;
	m->n_non_identifying = 2;
	m->non_identifying = nonident;
	m->has_health = true;
	m->health.healthy = true;
	m->has_effective_config = true;
	m->has_remote_config_status = true;
	m->rcs_status = PF_RCS_UNSET;
}

static struct pf_s2a *roundtrip(struct fx *x, struct pf_opamp_session *s, const struct pf_a2s *m,
				struct pf_opamp_result *res)
{
	struct pf_buf in, out;
	pf_buf_init(&in, 1 << 20);
	pf_buf_init(&out, 1 << 20);
	assert_int_equal(pf_a2s_encode(m, &in), 0);
	assert_int_equal(pf_opamp_session_handle(&x->ctx, s, in.data, in.len, 5000, &out, res), 0);
	struct pf_s2a *r = NULL;
	assert_int_equal(pf_s2a_decode(out.data, out.len, 1 << 20, &r, NULL), 0);
	pf_buf_release(&in);
	pf_buf_release(&out);
	return r;
}

static void test_first_message_and_ack(void **state)
{
	struct fx *x = *state;
	struct pf_opamp_session s = {.conn = (void *)1};
	struct pf_opamp_result res;
	struct pf_a2s m;
	full_status(&m, 0x11, 1);
	struct pf_s2a *r = roundtrip(x, &s, &m, &res);
	/* The reply carries capabilities with AcceptsStatus and echoes the uid. */
	assert_true(r->capabilities & PF_SERVER_CAP_ACCEPTS_STATUS);
	assert_memory_equal(r->instance_uid, m.instance_uid, 16);
	assert_false(r->has_error);
	assert_false(r->flags & PF_S2A_FLAG_REPORT_FULL_STATE);
	/* A heartbeat interval is offered to an agent that accepts connection settings. */
	assert_true(r->has_heartbeat_interval);
	assert_int_equal(r->heartbeat_interval_seconds, 30);
	/* No config exists: nothing offered. */
	assert_false(r->has_remote_config);
	pf_s2a_free(r);

	struct pf_agent *a = pf_fleet_find(x->fleet, m.instance_uid);
	assert_non_null(a);
	assert_true(a->connected);
	assert_string_equal(pf_agent_attr(a, "env"), "prod");
	assert_true(a->has_health && a->healthy);

	/* Every message is answered: a heartbeat (uid + seq only) gets an ack; no heartbeat
	 * offer again. */
	struct pf_a2s hb = {0};
	memcpy(hb.instance_uid, m.instance_uid, 16);
	hb.instance_uid_len = 16;
	hb.sequence_num = 2;
	hb.capabilities = CAPS;
	r = roundtrip(x, &s, &hb, &res);
	assert_false(r->has_heartbeat_interval);
	assert_false(r->has_remote_config);
	assert_false(r->flags & PF_S2A_FLAG_REPORT_FULL_STATE);
	pf_s2a_free(r);
	assert_int_equal(x->metrics.opamp_messages_in, 2);
	assert_int_equal(x->metrics.opamp_messages_out, 2);
}

static void test_sequence_gap_asks_full_state(void **state)
{
	struct fx *x = *state;
	struct pf_opamp_session s = {.conn = (void *)1};
	struct pf_opamp_result res;
	struct pf_a2s m;
	full_status(&m, 0x22, 7);
	pf_s2a_free(roundtrip(x, &s, &m, &res));
	struct pf_a2s hb = {0};
	memcpy(hb.instance_uid, m.instance_uid, 16);
	hb.instance_uid_len = 16;
	hb.capabilities = CAPS;
	hb.sequence_num = 9; /* 8 went missing: ReportFullState */
	struct pf_s2a *r = roundtrip(x, &s, &hb, &res);
	assert_true(r->flags & PF_S2A_FLAG_REPORT_FULL_STATE);
	pf_s2a_free(r);
	hb.sequence_num = 10;
	r = roundtrip(x, &s, &hb, &res);
	assert_false(r->flags & PF_S2A_FLAG_REPORT_FULL_STATE);
	pf_s2a_free(r);
}

static void test_unknown_agent_compressed_first_message(void **state)
{
	struct fx *x = *state;
	struct pf_opamp_session s = {.conn = (void *)1};
	struct pf_opamp_result res;
	/* After a controller restart an agent may send a delta first: ask for everything. */
	struct pf_a2s hb = {0};
	memset(hb.instance_uid, 0x33, 16);
	hb.instance_uid_len = 16;
	hb.capabilities = CAPS;
	hb.sequence_num = 40;
	struct pf_s2a *r = roundtrip(x, &s, &hb, &res);
	assert_true(r->flags & PF_S2A_FLAG_REPORT_FULL_STATE);
	pf_s2a_free(r);
}

static void test_remote_config_offer(void **state)
{
	struct fx *x = *state;
	const char *body = "profiling:\n  sampling: {frequency_hz: 49}\n";
	uint8_t h[32];
	pf_sha256(body, strlen(body), h);
	assert_int_equal(pf_fleet_config_set(x->fleet, "default", 1, h, body, strlen(body), 1), 0);

	struct pf_opamp_session s = {.conn = (void *)1};
	struct pf_opamp_result res;
	struct pf_a2s m;
	full_status(&m, 0x44, 1);
	struct pf_s2a *r = roundtrip(x, &s, &m, &res);
	/* remote_config offered while the hashes differ, config_hash set. */
	assert_true(r->has_remote_config);
	assert_int_equal(r->remote_config_hash_len, 32);
	assert_memory_equal(r->remote_config_hash, h, 32);
	assert_int_equal(r->remote_config.n_files, 1);
	assert_string_equal(r->remote_config.files[0].name, "profiling.yaml");
	assert_string_equal(r->remote_config.files[0].content_type, "text/yaml");
	assert_int_equal(r->remote_config.files[0].body_len, strlen(body));
	pf_s2a_free(r);

	/* The agent reports APPLIED with that hash: no more offers. */
	struct pf_a2s st = {0};
	memcpy(st.instance_uid, m.instance_uid, 16);
	st.instance_uid_len = 16;
	st.capabilities = CAPS;
	st.sequence_num = 2;
	st.has_remote_config_status = true;
	st.rcs_last_hash = h;
	st.rcs_last_hash_len = 32;
	st.rcs_status = PF_RCS_APPLIED;
	r = roundtrip(x, &s, &st, &res);
	assert_false(r->has_remote_config);
	pf_s2a_free(r);
	struct pf_agent *a = pf_fleet_find(x->fleet, m.instance_uid);
	assert_int_equal(pf_agent_config_state(a), PF_CFG_APPLIED);

	/* Server-initiated push after a new version. */
	const char *body2 = "profiling:\n  enabled: false\n";
	uint8_t h2[32];
	pf_sha256(body2, strlen(body2), h2);
	pf_fleet_config_set(x->fleet, "default", 2, h2, body2, strlen(body2), 2);
	assert_true(pf_fleet_resolve_agent(x->fleet, a)); /* a version is a new slot */
	struct pf_buf out;
	pf_buf_init(&out, 1 << 20);
	assert_int_equal(pf_opamp_build_push(&x->ctx, NULL, a, &out), 0);
	assert_int_equal(pf_s2a_decode(out.data, out.len, 1 << 20, &r, NULL), 0);
	assert_true(r->has_remote_config);
	assert_memory_equal(r->remote_config_hash, h2, 32);
	assert_memory_equal(r->instance_uid, m.instance_uid, 16);
	pf_s2a_free(r);
	pf_buf_release(&out);
}

/* On a WebSocket a config goes out once per connection and hash, however many messages the
 * agent sends before it reports it; over plain HTTP every poll carries it until then; a new
 * connection or a new version sends it again. */
static void test_config_once_per_connection(void **state)
{
	struct fx *x = *state;
	const char *body = "profiling:\n  sampling: {frequency_hz: 29}\n";
	uint8_t h[32];
	pf_sha256(body, strlen(body), h);
	assert_int_equal(pf_fleet_config_set(x->fleet, "default", 1, h, body, strlen(body), 1), 0);

	struct pf_opamp_session ws = {.conn = (void *)1};
	struct pf_opamp_result res;
	struct pf_a2s m;
	full_status(&m, 0x55, 1);
	struct pf_s2a *r = roundtrip(x, &ws, &m, &res);
	assert_true(r->has_remote_config);
	pf_s2a_free(r);
	struct pf_agent *a = pf_fleet_find(x->fleet, m.instance_uid);
	for (uint64_t seq = 1; seq < 4; seq++) {
		struct pf_a2s hb = {0};
		memcpy(hb.instance_uid, m.instance_uid, 16);
		hb.instance_uid_len = 16;
		hb.capabilities = CAPS;
		hb.sequence_num = seq;
		r = roundtrip(x, &ws, &hb, &res);
		assert_false(r->has_remote_config);
		pf_s2a_free(r);
	}
	struct pf_buf out;
	pf_buf_init(&out, 1 << 20);
	assert_int_equal(pf_opamp_build_push(&x->ctx, &ws, a, &out), -EALREADY);

	/* A new version goes out once on the same connection. */
	const char *body2 = "profiling:\n  sampling: {frequency_hz: 31}\n";
	uint8_t h2[32];
	pf_sha256(body2, strlen(body2), h2);
	pf_fleet_config_set(x->fleet, "default", 2, h2, body2, strlen(body2), 2);
	assert_true(pf_fleet_resolve_agent(x->fleet, a));
	assert_int_equal(pf_opamp_build_push(&x->ctx, &ws, a, &out), 0);
	pf_buf_reset(&out);
	assert_int_equal(pf_opamp_build_push(&x->ctx, &ws, a, &out), -EALREADY);

	/* A new connection sends it again, and so does every plain-HTTP poll. */
	struct pf_opamp_session ws2 = {.conn = (void *)2};
	assert_int_equal(pf_opamp_build_push(&x->ctx, &ws2, a, &out), 0);
	struct pf_opamp_session http = {.http = true};
	for (int i = 0; i < 2; i++) {
		pf_buf_reset(&out);
		assert_int_equal(pf_opamp_build_push(&x->ctx, &http, a, &out), 0);
	}
	pf_buf_release(&out);
}

static void test_capability_gating(void **state)
{
	struct fx *x = *state;
	const char *body = "profiling: {}\n";
	uint8_t h[32];
	pf_sha256(body, strlen(body), h);
	pf_fleet_config_set(x->fleet, "default", 1, h, body, strlen(body), 1);
	struct pf_opamp_session s = {.conn = (void *)1};
	struct pf_opamp_result res;
	struct pf_a2s m;
	full_status(&m, 0x55, 1);
	/* No remote config, no connection settings without the capability bits. */
	m.capabilities = PF_AGENT_CAP_REPORTS_STATUS;
	struct pf_s2a *r = roundtrip(x, &s, &m, &res);
	assert_false(r->has_remote_config);
	assert_false(r->has_heartbeat_interval);
	pf_s2a_free(r);
}

static void test_bad_input_gets_bad_request(void **state)
{
	struct fx *x = *state;
	struct pf_opamp_session s = {.conn = (void *)1};
	struct pf_opamp_result res;
	struct pf_buf out;
	pf_buf_init(&out, 1 << 20);
	static const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x01, 0x02};
	assert_int_equal(
		pf_opamp_session_handle(&x->ctx, &s, garbage, sizeof(garbage), 1, &out, &res), 0);
	assert_true(res.bad_request);
	struct pf_s2a *r = NULL;
	assert_int_equal(pf_s2a_decode(out.data, out.len, 1 << 20, &r, NULL), 0);
	/* An error reply carries nothing else. */
	assert_true(r->has_error);
	assert_int_equal(r->error_type, PF_SERR_BAD_REQUEST);
	assert_non_null(r->error_message);
	assert_false(r->has_remote_config);
	assert_int_equal(r->capabilities, 0);
	pf_s2a_free(r);
	pf_buf_reset(&out);

	/* A uid that is not 16 bytes. */
	struct pf_a2s m = {0};
	m.instance_uid_len = 4;
	m.capabilities = CAPS;
	struct pf_buf in;
	pf_buf_init(&in, 1 << 20);
	assert_int_equal(pf_a2s_encode(&m, &in), 0);
	assert_int_equal(pf_opamp_session_handle(&x->ctx, &s, in.data, in.len, 1, &out, &res), 0);
	assert_true(res.bad_request);
	assert_int_equal(pf_s2a_decode(out.data, out.len, 1 << 20, &r, NULL), 0);
	assert_true(r->has_error);
	assert_non_null(strstr(r->error_message, "16 bytes"));
	pf_s2a_free(r);
	pf_buf_release(&in);
	pf_buf_release(&out);
	assert_int_equal(x->metrics.opamp_bad_messages, 2);
	assert_int_equal(pf_fleet_count(x->fleet), 0);
}

/* Limits: PF_OPAMP_MAX_ATTRS attributes are recorded, one more is a BAD_REQUEST; a message
 * just under the wire limit decodes (its decoded form is larger than its wire bytes). */
static void test_limits(void **state)
{
	struct fx *x = *state;
	enum { N = PF_OPAMP_MAX_ATTRS + 1, VLEN = 220 };
	static struct pf_kv kv[N];
	static char keys[N][16], vals[N][VLEN + 1];
	for (int i = 0; i < N; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%d", i);
		memset(vals[i], 'a' + i % 26, VLEN);
		kv[i].key = keys[i];
		kv[i].value = vals[i];
	}
	x->ctx.max_message_bytes = 64 << 10;
	for (int extra = 0; extra <= 1; extra++) {
		struct pf_opamp_session s = {.conn = (void *)1};
		struct pf_opamp_result res;
		struct pf_a2s m;
		full_status(&m, (uint8_t)(0x60 + extra), 1);
		m.n_identifying = 0;
		m.non_identifying = kv;
		m.n_non_identifying = PF_OPAMP_MAX_ATTRS + (size_t)extra;
		struct pf_buf in, out;
		pf_buf_init(&in, 1 << 20);
		pf_buf_init(&out, 1 << 20);
		assert_int_equal(pf_a2s_encode(&m, &in), 0);
		/* near the wire limit, under it */
		assert_true(in.len <= x->ctx.max_message_bytes);
		assert_true(in.len > x->ctx.max_message_bytes * 8 / 10);
		assert_int_equal(
		    pf_opamp_session_handle(&x->ctx, &s, in.data, in.len, 5000, &out, &res), 0);
		struct pf_s2a *r = NULL;
		assert_int_equal(pf_s2a_decode(out.data, out.len, 1 << 20, &r, NULL), 0);
		assert_int_equal(r->has_error, extra == 1);
		assert_int_equal(res.bad_request, extra == 1);
		if (extra)
			assert_non_null(strstr(r->error_message, "at most 256"));
		struct pf_agent *a = pf_fleet_find(x->fleet, m.instance_uid);
		if (extra) {
			assert_null(a);
		} else {
			assert_non_null(a);
			assert_int_equal(a->n_attrs, PF_OPAMP_MAX_ATTRS);
		}
		pf_s2a_free(r);
		pf_buf_release(&in);
		pf_buf_release(&out);
	}
}

static void test_duplicate_uid_gets_new_identity(void **state)
{
	struct fx *x = *state;
	struct pf_opamp_session s1 = {.conn = (void *)1}, s2 = {.conn = (void *)2};
	struct pf_opamp_result res;
	struct pf_a2s m;
	full_status(&m, 0x66, 1);
	pf_s2a_free(roundtrip(x, &s1, &m, &res));
	/* A second live connection claims the same uid. */
	struct pf_s2a *r = roundtrip(x, &s2, &m, &res);
	assert_true(r->has_new_instance_uid);
	assert_memory_not_equal(r->new_instance_uid, m.instance_uid, 16);
	assert_memory_equal(r->instance_uid, m.instance_uid, 16);
	assert_true(r->flags & PF_S2A_FLAG_REPORT_FULL_STATE);
	uint8_t fresh[16];
	memcpy(fresh, r->new_instance_uid, 16);
	pf_s2a_free(r);
	assert_int_equal(pf_fleet_count(x->fleet), 2);
	assert_int_equal(x->metrics.opamp_duplicate_uids, 1);

	/* The newcomer adopts the new uid; messages bind to the new record. */
	memcpy(m.instance_uid, fresh, 16);
	m.sequence_num = 2;
	r = roundtrip(x, &s2, &m, &res);
	assert_false(r->has_new_instance_uid);
	pf_s2a_free(r);
	struct pf_agent *b = pf_fleet_find(x->fleet, fresh);
	assert_true(b->connected);
	assert_ptr_equal(b->conn, (void *)2);

	/* Closing the first connection leaves the second alone. */
	pf_opamp_session_closed(&x->ctx, &s1);
	assert_true(b->connected);
	memset(m.instance_uid, 0x66, 16);
	assert_false(pf_fleet_find(x->fleet, m.instance_uid)->connected);
}

static void test_disconnect(void **state)
{
	struct fx *x = *state;
	struct pf_opamp_session s = {.conn = (void *)1};
	struct pf_opamp_result res;
	struct pf_a2s m;
	full_status(&m, 0x77, 1);
	pf_s2a_free(roundtrip(x, &s, &m, &res));
	struct pf_a2s bye = {0};
	memcpy(bye.instance_uid, m.instance_uid, 16);
	bye.instance_uid_len = 16;
	bye.capabilities = CAPS;
	bye.sequence_num = 2;
	bye.has_disconnect = true;
	struct pf_s2a *r = roundtrip(x, &s, &bye, &res);
	assert_true(res.disconnect);
	assert_false(r->has_error);
	pf_s2a_free(r);
	assert_false(pf_fleet_find(x->fleet, m.instance_uid)->connected);
}

static void test_http_transport_first_poll(void **state)
{
	struct fx *x = *state;
	struct pf_opamp_result res;
	struct pf_a2s m;
	full_status(&m, 0x88, 0);
	struct pf_opamp_session s = {.http = true};
	struct pf_s2a *r = roundtrip(x, &s, &m, &res);
	assert_true(r->has_heartbeat_interval);
	pf_s2a_free(r);
	struct pf_agent *a = pf_fleet_find(x->fleet, m.instance_uid);
	assert_int_equal(a->transport, PF_TRANSPORT_HTTP);
	/* The next poll is a new request but not a new connection. */
	struct pf_opamp_session s2 = {.http = true};
	struct pf_a2s hb = {0};
	memcpy(hb.instance_uid, m.instance_uid, 16);
	hb.instance_uid_len = 16;
	hb.capabilities = CAPS;
	hb.sequence_num = 1;
	r = roundtrip(x, &s2, &hb, &res);
	assert_false(r->has_heartbeat_interval);
	assert_false(r->flags & PF_S2A_FLAG_REPORT_FULL_STATE);
	pf_s2a_free(r);
}

/* Captures (fleet/capture.h) through the session: custom_capabilities set the agent's bit,
 * the first reply lists the server's, and over plain HTTP a capture.request rides in the
 * reply to the next poll; the agent's capture.status reaches the capture. */
static void test_capture_messages_over_http(void **state)
{
	struct fx *x = *state;
	struct pf_opamp_result res;
	struct pf_a2s m;
	struct pf_store *st = pf_store_open(":memory:", PF_STORE_SYNC_NORMAL, NULL);
	assert_non_null(st);
	x->ctx.captures = pf_captures_new(NULL, x->fleet, st, NULL, NULL);
	char *caps[] = {(char *)PF_CAPTURE_CAPABILITY, (char *)"com.example.other"};
	full_status(&m, 0x99, 0);
	m.has_custom_capabilities = true;
	m.n_custom_capabilities = 2;
	m.custom_capabilities = caps;
	struct pf_opamp_session s = {.http = true};
	struct pf_s2a *r = roundtrip(x, &s, &m, &res);
	assert_int_equal(r->n_custom_capabilities, 1);
	assert_string_equal(r->custom_capabilities[0], PF_CAPTURE_CAPABILITY);
	assert_false(r->has_custom_message);
	pf_s2a_free(r);
	struct pf_agent *a = pf_fleet_find(x->fleet, m.instance_uid);
	assert_true(a->capture_capable);

	struct pf_capture_request req = {.profile_type = "cpu", .duration_seconds = 5,
					 .frequency_hz = 99};
	char id[PF_CAPTURE_ID_MAX + 1];
	size_t matched;
	assert_int_equal(pf_captures_create(x->ctx.captures, &req, "env=prod",
					    "{\"agents\":\"env=prod\"}", "t", 5000, id, &matched,
					    NULL),
			 0);
	pf_capture_request_release(&req);

	struct pf_a2s poll = {0};
	memcpy(poll.instance_uid, m.instance_uid, 16);
	poll.instance_uid_len = 16;
	poll.capabilities = CAPS;
	poll.sequence_num = 1;
	struct pf_opamp_session s2 = {.http = true};
	r = roundtrip(x, &s2, &poll, &res);
	assert_true(r->has_custom_message);
	assert_string_equal(r->custom_message.capability, PF_CAPTURE_CAPABILITY);
	assert_string_equal(r->custom_message.type, PF_CAPTURE_TYPE_REQUEST);
	assert_non_null(strstr((const char *)r->custom_message.data, id));
	assert_int_equal(r->n_custom_capabilities, 0); /* only on a new connection */
	pf_s2a_free(r);

	char status[160];
	snprintf(status, sizeof(status), "{\"id\":\"%s\",\"state\":\"running\"}", id);
	poll.sequence_num = 2;
	poll.has_custom_message = true;
	poll.custom_message = (struct pf_custom_message){
	    .capability = (char *)PF_CAPTURE_CAPABILITY, .type = (char *)PF_CAPTURE_TYPE_STATUS,
	    .data = (uint8_t *)status, .data_len = strlen(status)};
	struct pf_opamp_session s3 = {.http = true};
	r = roundtrip(x, &s3, &poll, &res);
	assert_false(r->has_custom_message); /* nothing more owed */
	pf_s2a_free(r);
	int rc;
	struct json_t *j = pf_api_capture_json(x->ctx.captures, st, id, &rc);
	assert_non_null(j);
	char *txt = json_dumps(j, 0);
	assert_non_null(strstr(txt, "\"state\": \"running\""));
	free(txt);
	json_decref(j);

	/* custom_capabilities without ours clears the bit */
	poll.has_custom_message = false;
	poll.sequence_num = 3;
	poll.has_custom_capabilities = true;
	poll.n_custom_capabilities = 1;
	poll.custom_capabilities = caps + 1;
	struct pf_opamp_session s4 = {.http = true};
	pf_s2a_free(roundtrip(x, &s4, &poll, &res));
	assert_false(a->capture_capable);
	pf_captures_free(x->ctx.captures);
	x->ctx.captures = NULL;
	pf_store_close(st);
}

/* A store of its own in a temp directory, closed and removed by store_done(). */
static struct pf_store *store_tmp(char dir[32])
{
	char db[64];
	snprintf(dir, 32, "/tmp/pf_sess_XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(db, sizeof(db), "%s/s.db", dir);
	struct pf_store *st = pf_store_open(db, PF_STORE_SYNC_NORMAL, NULL);
	assert_non_null(st);
	return st;
}

static void store_done(struct pf_store *st, const char *dir)
{
	char cmd[96];
	pf_store_close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/* Per-agent credentials (opamp/credential.h): offered to an agent that accepts OpAMP
 * connection settings and comes with a shared token, bound to its uid; a credential speaks for
 * its agent only; a shared token cannot wear the uid of an agent whose credential is in use. */
static void test_credential_offer(void **state)
{
	struct fx *x = *state;
	char dir[32];
	struct pf_store *st = store_tmp(dir);
	x->ctx.store = st;
	struct pf_opamp_session s1 = {.conn = (void *)1};
	struct pf_opamp_result res;
	struct pf_a2s m;
	full_status(&m, 0x21, 1);
	struct pf_s2a *r = roundtrip(x, &s1, &m, &res);
	assert_true(r->has_heartbeat_interval);
	assert_int_equal(r->n_opamp_headers, 1);
	assert_string_equal(r->opamp_headers[0].key, "Authorization");
	assert_memory_equal(r->opamp_headers[0].value, "Bearer ", 7);
	assert_int_equal(r->connection_settings_hash_len, 32);
	const char *secret = r->opamp_headers[0].value + 7;
	uint8_t h[32];
	pf_sha256(secret, strlen(secret), h);
	struct pf_token_info t;
	assert_int_equal(pf_store_token_find(st, h, &t), 0);
	assert_true(t.agent_bound);
	assert_memory_equal(t.agent_uid, m.instance_uid, 16);
	assert_string_equal(t.role, "agent");
	pf_s2a_free(r);
	struct pf_agent *a = pf_fleet_find(x->fleet, m.instance_uid);
	assert_int_equal(a->credential, PF_CRED_OFFERED);

	/* without the capability: nothing offered (OpAMP: connection settings only to agents
	 * that accept them), and it stays on the shared token */
	struct pf_opamp_session s2 = {.conn = (void *)2};
	full_status(&m, 0x22, 1);
	m.capabilities &= ~(uint64_t)PF_AGENT_CAP_ACCEPTS_OPAMP_CONNECTION_SETTINGS;
	r = roundtrip(x, &s2, &m, &res);
	assert_false(r->has_heartbeat_interval);
	assert_int_equal(r->n_opamp_headers, 0);
	pf_s2a_free(r);
	assert_int_equal(pf_fleet_find(x->fleet, m.instance_uid)->credential, PF_CRED_ENROLLMENT);

	/* on its credential: the settings it holds, no header; another uid is refused */
	pf_opamp_session_closed(&x->ctx, &s1);
	struct pf_opamp_session s3 = {.conn = (void *)3, .cred_bound = true};
	memset(s3.cred_uid, 0x21, 16);
	memcpy(s3.cred_hash, h, 32);
	full_status(&m, 0x21, 2);
	r = roundtrip(x, &s3, &m, &res);
	assert_false(r->has_error);
	assert_true(r->has_heartbeat_interval);
	assert_int_equal(r->n_opamp_headers, 0);
	pf_s2a_free(r);
	assert_int_equal(a->credential, PF_CRED_OWN);
	struct pf_opamp_session s4 = {.conn = (void *)4, .cred_bound = true};
	memset(s4.cred_uid, 0x21, 16);
	full_status(&m, 0x23, 1);
	r = roundtrip(x, &s4, &m, &res);
	assert_true(r->has_error && res.bad_request);
	assert_non_null(strstr(r->error_message, "this credential belongs to agent"));
	pf_s2a_free(r);
	assert_null(pf_fleet_find(x->fleet, m.instance_uid));
	/* the same credential on a second live connection: UNAVAILABLE, the first keeps it */
	full_status(&m, 0x21, 3);
	r = roundtrip(x, &s4, &m, &res);
	assert_true(r->has_error);
	assert_int_equal(r->error_type, PF_SERR_UNAVAILABLE);
	pf_s2a_free(r);
	assert_ptr_equal(a->conn, (void *)3);

	/* once used, a shared token claiming that uid gets another one */
	assert_int_equal(pf_store_token_touch(st, t.id, 6000), 0);
	pf_opamp_session_closed(&x->ctx, &s3);
	struct pf_opamp_session s5 = {.conn = (void *)5};
	r = roundtrip(x, &s5, &m, &res);
	assert_true(r->has_new_instance_uid);
	assert_memory_not_equal(r->new_instance_uid, m.instance_uid, 16);
	/* and its credential offer is for the new uid */
	assert_int_equal(r->n_opamp_headers, 1);
	pf_s2a_free(r);
	x->ctx.store = NULL;
	store_done(st, dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_first_message_and_ack, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sequence_gap_asks_full_state, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_agent_compressed_first_message, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_remote_config_offer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_once_per_connection, setup, teardown),
		cmocka_unit_test_setup_teardown(test_capability_gating, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_input_gets_bad_request, setup, teardown),
		cmocka_unit_test_setup_teardown(test_duplicate_uid_gets_new_identity, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_disconnect, setup, teardown),
		cmocka_unit_test_setup_teardown(test_http_transport_first_poll, setup, teardown),
		cmocka_unit_test_setup_teardown(test_capture_messages_over_http, setup, teardown),
		cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_credential_offer, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
