/* test_opamp_codec.c — proto/codec/opamp_codec: round trips, presence flags, decode limits,
 * WebSocket framing and AnyValue conversions. Messages the encoder cannot produce (typed
 * AnyValues, bad uids, deep nesting) are written by hand with the tiny wire writer below,
 * so the test does not depend on generated names (only proto/codec/ uses them). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "opamp_codec.h"

#define CAP PF_OPAMP_DEFAULT_MAX_MSG

/* ---- protobuf wire writer (protobuf encoding spec) ---- */

static void w_varint(struct pf_buf *b, uint64_t v)
{
	do {
		uint8_t c = v & 0x7f;
		v >>= 7;
		if (v)
			c |= 0x80;
		assert_int_equal(pf_buf_putc(b, c), 0);
	} while (v);
}

static void w_tag(struct pf_buf *b, unsigned field, unsigned wt)
{
	w_varint(b, (uint64_t)field << 3 | wt);
}

static void w_bytes(struct pf_buf *b, unsigned field, const void *p, size_t n)
{
	w_tag(b, field, 2);
	w_varint(b, n);
	assert_int_equal(pf_buf_append(b, p, n), 0);
}

static void w_str(struct pf_buf *b, unsigned field, const char *s)
{
	w_bytes(b, field, s, strlen(s));
}

static void w_uint(struct pf_buf *b, unsigned field, uint64_t v)
{
	w_tag(b, field, 0);
	w_varint(b, v);
}

static void w_double(struct pf_buf *b, unsigned field, double d)
{
	uint64_t u;
	memcpy(&u, &d, 8);
	w_tag(b, field, 1);
	for (int i = 0; i < 8; i++)
		assert_int_equal(pf_buf_putc(b, (uint8_t)(u >> (8 * i))), 0);
}

/* Appends `inner` as a length-delimited field and releases it. */
static void w_msg(struct pf_buf *b, unsigned field, struct pf_buf *inner)
{
	w_bytes(b, field, inner->data, inner->len);
	pf_buf_release(inner);
}

static struct pf_buf nb(void)
{
	struct pf_buf b;
	pf_buf_init(&b, 0);
	return b;
}

/* ---- fixtures ---- */

static struct pf_kv ident[] = {
    {"service.name", "profleet-agent"},
    {"host.name", "web-01"},
};
static struct pf_kv nonident[] = {
    {"os.type", "linux"},
    {"empty", ""},
};

static struct pf_health_entry grandchildren[] = {
    {"sampler.cpu0",
     {.healthy = false, .last_error = "perf_event_open: EACCES", .status = "failed"}},
};
static struct pf_health_entry children[] = {
    {"sampler",
     {.healthy = false,
      .start_time_unix_nano = 11,
      .status = "degraded",
      .last_error = "",
      .n_children = 1,
      .children = grandchildren}},
    {"exporter", {.healthy = true, .status = "ok", .status_time_unix_nano = 42}},
};

static uint8_t yaml1[] = "profiling:\n  enabled: true\n";
static uint8_t bin1[] = {0x00, 0x01, 0xff, 0x00};
static struct pf_config_file files[] = {
    {"profiling.yaml", yaml1, sizeof(yaml1) - 1, "text/yaml"},
    {"", bin1, sizeof(bin1), "application/octet-stream"},
};
static char *caps[] = {"io.profleet.capture", "io.profleet.other"};
static uint8_t hash1[] = {1, 2, 3, 4, 5, 6, 7, 8};
static uint8_t cdata[] = {'x', 0, 'y'};

static void fill_a2s(struct pf_a2s *m)
{
	memset(m, 0, sizeof(*m));
	for (int i = 0; i < PF_OPAMP_UID_LEN; i++)
		m->instance_uid[i] = (uint8_t)(0xa0 + i);
	m->instance_uid_len = PF_OPAMP_UID_LEN;
	m->sequence_num = 1234567890123ULL;
	m->capabilities = PF_AGENT_CAP_REPORTS_STATUS | PF_AGENT_CAP_REPORTS_HEALTH |
			  PF_AGENT_CAP_ACCEPTS_REMOTE_CONFIG | PF_AGENT_CAP_REPORTS_HEARTBEAT;
	m->flags = PF_A2S_FLAG_REQUEST_INSTANCE_UID;
	m->has_description = true;
	m->n_identifying = 2;
	m->identifying = ident;
	m->n_non_identifying = 2;
	m->non_identifying = nonident;
	m->has_health = true;
	m->health = (struct pf_health){.healthy = true,
				       .start_time_unix_nano = UINT64_MAX,
				       .status = "running",
				       .status_time_unix_nano = 7,
				       .n_children = 2,
				       .children = children};
	m->has_effective_config = true;
	m->effective_config = (struct pf_config_map){2, files};
	m->has_remote_config_status = true;
	m->rcs_last_hash = hash1;
	m->rcs_last_hash_len = sizeof(hash1);
	m->rcs_status = PF_RCS_FAILED;
	m->rcs_error_message = "profiling.sampling.frequency_hz: must be 1..1000, got 5000";
	m->has_disconnect = true;
	m->has_custom_capabilities = true;
	m->n_custom_capabilities = 2;
	m->custom_capabilities = caps;
	m->has_custom_message = true;
	m->custom_message =
	    (struct pf_custom_message){"io.profleet.capture", "start", cdata, sizeof(cdata)};
}

static void fill_s2a(struct pf_s2a *m)
{
	memset(m, 0, sizeof(*m));
	for (int i = 0; i < PF_OPAMP_UID_LEN; i++) {
		m->instance_uid[i] = (uint8_t)i;
		m->new_instance_uid[i] = (uint8_t)(0xf0 | i);
	}
	m->instance_uid_len = PF_OPAMP_UID_LEN;
	m->flags = PF_S2A_FLAG_REPORT_FULL_STATE;
	m->capabilities = PF_SERVER_CAP_ACCEPTS_STATUS | PF_SERVER_CAP_OFFERS_REMOTE_CONFIG |
			  PF_SERVER_CAP_OFFERS_CONNECTION_SETTINGS;
	m->has_error = true;
	m->error_type = PF_SERR_UNAVAILABLE;
	m->error_message = "overloaded";
	m->has_retry_after = true;
	m->retry_after_nanoseconds = 30000000000ULL;
	m->has_remote_config = true;
	m->remote_config = (struct pf_config_map){2, files};
	m->remote_config_hash = hash1;
	m->remote_config_hash_len = sizeof(hash1);
	m->has_heartbeat_interval = true;
	m->heartbeat_interval_seconds = 30;
	m->has_new_instance_uid = true;
	m->has_custom_capabilities = true;
	m->n_custom_capabilities = 1;
	m->custom_capabilities = caps;
	m->has_custom_message = true;
	m->custom_message = (struct pf_custom_message){"io.profleet.capture", "done", NULL, 0};
}

static void check_kvs(size_t n, const struct pf_kv *got, const struct pf_kv *want)
{
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(got[i].key, want[i].key);
		assert_string_equal(got[i].value, want[i].value);
	}
}

static void check_health(const struct pf_health *got, const struct pf_health *want)
{
	assert_int_equal(got->healthy, want->healthy);
	assert_true(got->start_time_unix_nano == want->start_time_unix_nano);
	assert_true(got->status_time_unix_nano == want->status_time_unix_nano);
	assert_string_equal(got->last_error, want->last_error ? want->last_error : "");
	assert_string_equal(got->status, want->status ? want->status : "");
	assert_int_equal(got->n_children, want->n_children);
	for (size_t i = 0; i < want->n_children; i++) {
		const struct pf_health *c = pf_health_child(got, want->children[i].name);
		assert_non_null(c);
		check_health(c, &want->children[i].health);
	}
}

static void check_config_map(const struct pf_config_map *got, const struct pf_config_map *want)
{
	assert_int_equal(got->n_files, want->n_files);
	for (size_t i = 0; i < want->n_files; i++) {
		/* map order is the encoding order for protobuf-c */
		assert_string_equal(got->files[i].name, want->files[i].name);
		assert_int_equal(got->files[i].body_len, want->files[i].body_len);
		assert_memory_equal(got->files[i].body, want->files[i].body,
				    want->files[i].body_len);
		assert_int_equal(got->files[i].body[got->files[i].body_len], 0);
		assert_string_equal(got->files[i].content_type, want->files[i].content_type);
	}
}

/* ---- round trips ---- */

static void test_a2s_roundtrip(void **state)
{
	struct pf_a2s in;
	struct pf_a2s *out = NULL;
	struct pf_buf b = nb();
	struct pf_error err = {0};

	fill_a2s(&in);
	assert_int_equal(pf_a2s_encode(&in, &b), 0);
	assert_true(b.len > 100);
	assert_int_equal(pf_a2s_decode(b.data, b.len, CAP, &out, &err), 0);
	assert_non_null(out);

	assert_int_equal(out->instance_uid_len, 16);
	assert_memory_equal(out->instance_uid, in.instance_uid, 16);
	assert_true(out->sequence_num == in.sequence_num);
	assert_true(out->capabilities == in.capabilities);
	assert_true(out->flags == in.flags);
	assert_true(out->has_description);
	assert_int_equal(out->n_identifying, 2);
	check_kvs(2, out->identifying, ident);
	assert_int_equal(out->n_non_identifying, 2);
	check_kvs(2, out->non_identifying, nonident);
	assert_true(out->has_health);
	check_health(&out->health, &in.health);
	assert_null(pf_health_child(&out->health, "nope"));
	assert_true(out->has_effective_config);
	check_config_map(&out->effective_config, &in.effective_config);
	assert_true(out->has_remote_config_status);
	assert_int_equal(out->rcs_status, PF_RCS_FAILED);
	assert_int_equal(out->rcs_last_hash_len, sizeof(hash1));
	assert_memory_equal(out->rcs_last_hash, hash1, sizeof(hash1));
	assert_string_equal(out->rcs_error_message, in.rcs_error_message);
	assert_true(out->has_disconnect);
	assert_true(out->has_custom_capabilities);
	assert_int_equal(out->n_custom_capabilities, 2);
	assert_string_equal(out->custom_capabilities[0], caps[0]);
	assert_string_equal(out->custom_capabilities[1], caps[1]);
	assert_true(out->has_custom_message);
	assert_string_equal(out->custom_message.capability, "io.profleet.capture");
	assert_string_equal(out->custom_message.type, "start");
	assert_int_equal(out->custom_message.data_len, sizeof(cdata));
	assert_memory_equal(out->custom_message.data, cdata, sizeof(cdata));

	/* re-encoding the decoded struct gives the same bytes */
	struct pf_buf b2 = nb();
	assert_int_equal(pf_a2s_encode(out, &b2), 0);
	assert_int_equal(b2.len, b.len);
	assert_memory_equal(b2.data, b.data, b.len);

	pf_a2s_free(out);
	pf_buf_release(&b);
	pf_buf_release(&b2);
}

static void test_s2a_roundtrip(void **state)
{
	struct pf_s2a in;
	struct pf_s2a *out = NULL;
	struct pf_buf b = nb();

	fill_s2a(&in);
	assert_int_equal(pf_s2a_encode(&in, &b), 0);
	assert_int_equal(pf_s2a_decode(b.data, b.len, CAP, &out, NULL), 0);

	assert_int_equal(out->instance_uid_len, 16);
	assert_memory_equal(out->instance_uid, in.instance_uid, 16);
	assert_true(out->flags == in.flags);
	assert_true(out->capabilities == in.capabilities);
	assert_true(out->has_error);
	assert_int_equal(out->error_type, PF_SERR_UNAVAILABLE);
	assert_string_equal(out->error_message, "overloaded");
	assert_true(out->has_retry_after);
	assert_true(out->retry_after_nanoseconds == 30000000000ULL);
	assert_true(out->has_remote_config);
	check_config_map(&out->remote_config, &in.remote_config);
	assert_int_equal(out->remote_config_hash_len, sizeof(hash1));
	assert_memory_equal(out->remote_config_hash, hash1, sizeof(hash1));
	assert_true(out->has_heartbeat_interval);
	assert_true(out->heartbeat_interval_seconds == 30);
	assert_true(out->has_new_instance_uid);
	assert_memory_equal(out->new_instance_uid, in.new_instance_uid, 16);
	assert_true(out->has_custom_capabilities);
	assert_int_equal(out->n_custom_capabilities, 1);
	assert_string_equal(out->custom_capabilities[0], caps[0]);
	assert_true(out->has_custom_message);
	assert_string_equal(out->custom_message.type, "done");
	assert_int_equal(out->custom_message.data_len, 0);
	pf_s2a_free(out);

	/* the connection settings hash is stable for one interval and differs for another */
	struct pf_buf b2 = nb(), b3 = nb();
	assert_int_equal(pf_s2a_encode(&in, &b2), 0);
	assert_int_equal(b2.len, b.len);
	assert_memory_equal(b2.data, b.data, b.len);
	in.heartbeat_interval_seconds = 31;
	assert_int_equal(pf_s2a_encode(&in, &b3), 0);
	assert_true(b3.len != b.len || memcmp(b3.data, b.data, b.len) != 0);

	pf_buf_release(&b);
	pf_buf_release(&b2);
	pf_buf_release(&b3);
}

/* connection_settings.opamp.headers and a caller-given hash survive the trip; without them the
 * decoded offer has no header and the hash of the interval alone. */
static void test_s2a_connection_settings(void **state)
{
	(void)state;
	struct pf_kv hdr[2] = {{(char *)"Authorization", (char *)"Bearer pf_secret"},
			       {(char *)"X-Tenant", (char *)""}};
	uint8_t hash[32];
	memset(hash, 0x5a, sizeof(hash));
	struct pf_s2a in = {.has_heartbeat_interval = true,
			    .heartbeat_interval_seconds = 15,
			    .n_opamp_headers = 2,
			    .opamp_headers = hdr,
			    .connection_settings_hash = hash,
			    .connection_settings_hash_len = 32};
	struct pf_s2a *out = NULL;
	struct pf_buf b = nb();
	assert_int_equal(pf_s2a_encode(&in, &b), 0);
	assert_int_equal(pf_s2a_decode(b.data, b.len, CAP, &out, NULL), 0);
	assert_true(out->has_heartbeat_interval);
	assert_true(out->heartbeat_interval_seconds == 15);
	assert_int_equal(out->n_opamp_headers, 2);
	assert_string_equal(out->opamp_headers[0].key, "Authorization");
	assert_string_equal(out->opamp_headers[0].value, "Bearer pf_secret");
	assert_string_equal(out->opamp_headers[1].key, "X-Tenant");
	assert_string_equal(out->opamp_headers[1].value, "");
	assert_int_equal(out->connection_settings_hash_len, 32);
	assert_memory_equal(out->connection_settings_hash, hash, 32);
	pf_s2a_free(out);

	struct pf_s2a plain = {.has_heartbeat_interval = true, .heartbeat_interval_seconds = 15};
	pf_buf_reset(&b);
	assert_int_equal(pf_s2a_encode(&plain, &b), 0);
	assert_int_equal(pf_s2a_decode(b.data, b.len, CAP, &out, NULL), 0);
	assert_int_equal(out->n_opamp_headers, 0);
	assert_null(out->opamp_headers);
	assert_int_equal(out->connection_settings_hash_len, 32);
	assert_memory_not_equal(out->connection_settings_hash, hash, 32);
	pf_s2a_free(out);
	pf_buf_release(&b);
}

static void test_s2a_retry_without_error(void **state)
{
	struct pf_s2a in = {.has_retry_after = true, .retry_after_nanoseconds = 5};
	struct pf_s2a *out = NULL;
	struct pf_buf b = nb();
	assert_int_equal(pf_s2a_encode(&in, &b), 0);
	assert_int_equal(pf_s2a_decode(b.data, b.len, CAP, &out, NULL), 0);
	assert_true(out->has_error);
	assert_int_equal(out->error_type, PF_SERR_UNKNOWN);
	assert_true(out->has_retry_after);
	assert_true(out->retry_after_nanoseconds == 5);
	assert_false(out->has_heartbeat_interval);
	pf_s2a_free(out);
	pf_buf_release(&b);
}

/* ---- status compression: presence of sub-messages survives the trip ---- */

static void test_presence_flags(void **state)
{
	struct pf_a2s in = {.instance_uid_len = 16, .sequence_num = 3};
	struct pf_a2s *out = NULL;
	struct pf_buf b = nb();

	assert_int_equal(pf_a2s_encode(&in, &b), 0);
	assert_int_equal(pf_a2s_decode(b.data, b.len, CAP, &out, NULL), 0);
	assert_false(out->has_description);
	assert_false(out->has_health);
	assert_false(out->has_effective_config);
	assert_false(out->has_remote_config_status);
	assert_false(out->has_disconnect);
	assert_false(out->has_custom_capabilities);
	assert_false(out->has_custom_message);
	assert_true(out->sequence_num == 3);
	pf_a2s_free(out);

	/* present but empty sub-messages stay present */
	pf_buf_reset(&b);
	in.has_description = true;
	in.has_health = true;
	in.has_effective_config = true;
	in.has_remote_config_status = true;
	in.has_custom_capabilities = true;
	in.has_custom_message = true;
	assert_int_equal(pf_a2s_encode(&in, &b), 0);
	assert_int_equal(pf_a2s_decode(b.data, b.len, CAP, &out, NULL), 0);
	assert_true(out->has_description);
	assert_int_equal(out->n_identifying, 0);
	assert_null(out->identifying);
	assert_true(out->has_health);
	assert_false(out->health.healthy);
	assert_string_equal(out->health.last_error, "");
	assert_true(out->has_effective_config);
	assert_int_equal(out->effective_config.n_files, 0);
	assert_true(out->has_remote_config_status);
	assert_int_equal(out->rcs_status, PF_RCS_UNSET);
	assert_true(out->has_custom_capabilities);
	assert_int_equal(out->n_custom_capabilities, 0);
	assert_true(out->has_custom_message);
	assert_false(out->has_disconnect);
	pf_a2s_free(out);

	/* an empty message is a valid AgentToServer with everything absent */
	assert_int_equal(pf_a2s_decode(NULL, 0, CAP, &out, NULL), 0);
	assert_int_equal(out->instance_uid_len, 0);
	assert_false(out->has_health);
	pf_a2s_free(out);

	struct pf_s2a s = {0};
	struct pf_s2a *so = NULL;
	pf_buf_reset(&b);
	assert_int_equal(pf_s2a_encode(&s, &b), 0);
	assert_int_equal(b.len, 0);
	assert_int_equal(pf_s2a_decode(b.data, b.len, CAP, &so, NULL), 0);
	assert_false(so->has_error || so->has_retry_after || so->has_remote_config ||
		     so->has_heartbeat_interval || so->has_new_instance_uid ||
		     so->has_custom_capabilities || so->has_custom_message);
	pf_s2a_free(so);

	/* heartbeat interval 0 ("disable") is still an offer */
	s.has_heartbeat_interval = true;
	pf_buf_reset(&b);
	assert_int_equal(pf_s2a_encode(&s, &b), 0);
	assert_int_equal(pf_s2a_decode(b.data, b.len, CAP, &so, NULL), 0);
	assert_true(so->has_heartbeat_interval);
	assert_true(so->heartbeat_interval_seconds == 0);
	pf_s2a_free(so);
	pf_buf_release(&b);
}

/* ---- decode limits ---- */

static void test_decode_cap(void **state)
{
	struct pf_a2s in;
	struct pf_a2s *out = (struct pf_a2s *)0x1;
	struct pf_buf b = nb();
	struct pf_error err = {0};

	fill_a2s(&in);
	assert_int_equal(pf_a2s_encode(&in, &b), 0);
	assert_int_equal(pf_a2s_decode(b.data, b.len, 64, &out, &err), -E2BIG);
	assert_int_equal(err.code, -E2BIG);
	assert_non_null(strstr(err.msg, "exceeds"));
	assert_ptr_equal(out, (struct pf_a2s *)0x1); /* untouched on failure */

	/* find the smallest cap that works; one byte less must fail with -E2BIG */
	size_t lo = 64, hi = CAP;
	while (lo + 1 < hi) {
		size_t mid = lo + (hi - lo) / 2;
		struct pf_a2s *o = NULL;
		int r = pf_a2s_decode(b.data, b.len, mid, &o, NULL);
		assert_true(r == 0 || r == -E2BIG);
		if (r == 0) {
			pf_a2s_free(o);
			hi = mid;
		} else {
			lo = mid;
		}
	}
	assert_true(hi < 16384); /* a small message decodes into a small footprint */
	assert_int_equal(pf_a2s_decode(b.data, b.len, hi - 1, &out, NULL), -E2BIG);
	assert_int_equal(pf_a2s_decode(b.data, b.len, hi, &out, NULL), 0);
	pf_a2s_free(out);

	/* a big config body counts against the cap */
	static uint8_t big[100000];
	struct pf_s2a s = {.has_remote_config = true};
	struct pf_config_file f = {"big.yaml", big, sizeof(big), "text/yaml"};
	s.remote_config = (struct pf_config_map){1, &f};
	struct pf_s2a *so = NULL;
	pf_buf_reset(&b);
	assert_int_equal(pf_s2a_encode(&s, &b), 0);
	assert_int_equal(pf_s2a_decode(b.data, b.len, 50000, &so, NULL), -E2BIG);
	assert_int_equal(pf_s2a_decode(b.data, b.len, 1 << 20, &so, NULL), 0);
	assert_int_equal(so->remote_config.files[0].body_len, sizeof(big));
	pf_s2a_free(so);
	pf_buf_release(&b);
}

static void test_decode_garbage(void **state)
{
	static const uint8_t g1[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
				     0xff, 0xff, 0xff, 0xff, 0xff};
	static const uint8_t g2[] = {0x0a, 0x05, 0x01};	      /* uid claims 5 bytes, has 1 */
	static const uint8_t g3[] = {0x1a, 0x02, 0x0a, 0x7f}; /* nested length overruns */
	static const uint8_t g4[] = {0x0b, 0x0c};	      /* group wire types */
	static const uint8_t g5[] = {0x00, 0x01};	      /* field number 0 */
	static const uint8_t g6[] = {0x10};		      /* varint field without value */
	const struct {
		const uint8_t *p;
		size_t n;
	} cases[] = {
	    {g1, sizeof(g1)}, {g2, sizeof(g2)}, {g3, sizeof(g3)},
	    {g4, sizeof(g4)}, {g5, sizeof(g5)}, {g6, sizeof(g6)},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pf_a2s *a = NULL;
		struct pf_s2a *s = NULL;
		struct pf_error err = {0};
		assert_int_equal(pf_a2s_decode(cases[i].p, cases[i].n, CAP, &a, &err), -EBADMSG);
		assert_int_equal(err.code, -EBADMSG);
		assert_true(err.msg[0] != 0);
		assert_null(a);
		assert_int_equal(pf_s2a_decode(cases[i].p, cases[i].n, CAP, &s, NULL), -EBADMSG);
		assert_null(s);
	}

	/* a string field holding a number's wire type is malformed for protobuf-c */
	struct pf_buf b = nb();
	w_uint(&b, 13, 5); /* custom_message as varint */
	struct pf_a2s *a = NULL;
	assert_int_equal(pf_a2s_decode(b.data, b.len, CAP, &a, NULL), -EBADMSG);
	pf_buf_release(&b);
}

static void test_decode_truncated(void **state)
{
	struct pf_a2s in;
	struct pf_buf b = nb();
	fill_a2s(&in);
	assert_int_equal(pf_a2s_encode(&in, &b), 0);

	/* the last byte belongs to custom_message: cutting it is malformed */
	struct pf_a2s *out = NULL;
	assert_int_equal(pf_a2s_decode(b.data, b.len - 1, CAP, &out, NULL), -EBADMSG);

	/* every prefix either decodes (cut at a field boundary) or is -EBADMSG, never worse */
	size_t ok = 0;
	for (size_t n = 0; n < b.len; n++) {
		int r = pf_a2s_decode(b.data, n, CAP, &out, NULL);
		assert_true(r == 0 || r == -EBADMSG);
		if (r == 0) {
			ok++;
			pf_a2s_free(out);
		}
	}
	assert_true(ok >= 2 && ok < b.len / 2);
	pf_buf_release(&b);
}

/* A health chain `levels` deep (root included) as AgentToServer bytes. */
static void build_health_chain(struct pf_buf *out, unsigned levels)
{
	struct pf_buf h = nb();
	w_uint(&h, 1, 1); /* healthy */
	w_str(&h, 4, "leaf");
	for (unsigned i = 1; i < levels; i++) {
		struct pf_buf entry = nb(), parent = nb();
		w_str(&entry, 1, "c");
		w_msg(&entry, 2, &h);
		w_str(&parent, 4, "node");
		w_msg(&parent, 6, &entry);
		h = parent;
	}
	w_msg(out, 5, &h);
}

static void test_decode_deep_health(void **state)
{
	struct pf_buf b = nb();
	struct pf_a2s *out = NULL;
	struct pf_error err = {0};

	build_health_chain(&b, PF_OPAMP_MAX_HEALTH_DEPTH);
	assert_int_equal(pf_a2s_decode(b.data, b.len, CAP, &out, NULL), 0);
	const struct pf_health *h = &out->health;
	for (int i = 1; i < PF_OPAMP_MAX_HEALTH_DEPTH; i++) {
		assert_string_equal(h->status, "node");
		h = pf_health_child(h, "c");
		assert_non_null(h);
	}
	assert_string_equal(h->status, "leaf");
	assert_true(h->healthy);
	assert_int_equal(h->n_children, 0);

	/* and the encoder accepts the same tree */
	struct pf_buf b2 = nb();
	assert_int_equal(pf_a2s_encode(out, &b2), 0);
	assert_int_equal(b2.len, b.len);
	pf_a2s_free(out);

	pf_buf_reset(&b);
	build_health_chain(&b, PF_OPAMP_MAX_HEALTH_DEPTH + 1);
	assert_int_equal(pf_a2s_decode(b.data, b.len, CAP, &out, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "health"));

	/* thousands of levels: refused by the wire scan before protobuf-c recurses */
	pf_buf_reset(&b);
	build_health_chain(&b, 3000);
	pf_error_clear(&err);
	assert_int_equal(pf_a2s_decode(b.data, b.len, CAP, &out, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "nested"));

	pf_buf_release(&b);
	pf_buf_release(&b2);
}

static void test_encode_limits(void **state)
{
	struct pf_a2s in;
	struct pf_buf b;
	fill_a2s(&in);

	/* out's cap */
	pf_buf_init(&b, 16);
	assert_int_equal(pf_buf_append(&b, "ab", 2), 0);
	assert_int_equal(pf_a2s_encode(&in, &b), -E2BIG);
	assert_int_equal(b.len, 2);
	assert_memory_equal(b.data, "ab", 2);
	pf_buf_release(&b);

	/* uid longer than 16 */
	b = nb();
	in.instance_uid_len = 17;
	assert_int_equal(pf_a2s_encode(&in, &b), -EINVAL);
	assert_int_equal(b.len, 0);

	/* health tree too deep: 9 levels */
	struct pf_health_entry chain[PF_OPAMP_MAX_HEALTH_DEPTH];
	memset(chain, 0, sizeof(chain));
	for (int i = 0; i < PF_OPAMP_MAX_HEALTH_DEPTH; i++) {
		chain[i].name = "c";
		if (i + 1 < PF_OPAMP_MAX_HEALTH_DEPTH) {
			chain[i].health.n_children = 1;
			chain[i].health.children = &chain[i + 1];
		}
	}
	in.instance_uid_len = 16;
	in.health = (struct pf_health){.n_children = 1, .children = chain};
	assert_int_equal(pf_a2s_encode(&in, &b), -EINVAL);
	chain[PF_OPAMP_MAX_HEALTH_DEPTH - 2].health.n_children = 0; /* now 8 levels */
	assert_int_equal(pf_a2s_encode(&in, &b), 0);

	/* NULL strings are sent as "" */
	struct pf_kv nullkv = {NULL, NULL};
	struct pf_a2s n = {.has_description = true,
			   .n_identifying = 1,
			   .identifying = &nullkv,
			   .has_remote_config_status = true,
			   .has_custom_message = true};
	struct pf_a2s *out = NULL;
	pf_buf_reset(&b);
	assert_int_equal(pf_a2s_encode(&n, &b), 0);
	assert_int_equal(pf_a2s_decode(b.data, b.len, CAP, &out, NULL), 0);
	assert_string_equal(out->identifying[0].key, "");
	assert_string_equal(out->identifying[0].value, "");
	assert_string_equal(out->rcs_error_message, "");
	assert_string_equal(out->custom_message.type, "");
	pf_a2s_free(out);
	pf_buf_release(&b);
}

static void test_uid_lengths(void **state)
{
	static const uint8_t uid20[20] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
					  11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
	struct pf_buf b = nb();
	struct pf_a2s *a = NULL;

	w_bytes(&b, 1, uid20, 20);
	assert_int_equal(pf_a2s_decode(b.data, b.len, CAP, &a, NULL), 0);
	assert_int_equal(a->instance_uid_len, 20);
	assert_memory_equal(a->instance_uid, uid20, 16);
	pf_a2s_free(a);

	pf_buf_reset(&b);
	w_bytes(&b, 1, uid20, 8);
	assert_int_equal(pf_a2s_decode(b.data, b.len, CAP, &a, NULL), 0);
	assert_int_equal(a->instance_uid_len, 8);
	assert_memory_equal(a->instance_uid, uid20, 8);
	pf_a2s_free(a);

	/* s2a keeps instance_uid as received too, but a new_instance_uid must be 16 bytes */
	struct pf_s2a *s = NULL;
	struct pf_error err = {0};
	pf_buf_reset(&b);
	w_bytes(&b, 1, uid20, 4);
	assert_int_equal(pf_s2a_decode(b.data, b.len, CAP, &s, NULL), 0);
	assert_int_equal(s->instance_uid_len, 4);
	pf_s2a_free(s);

	struct pf_buf ai = nb();
	w_bytes(&ai, 1, uid20, 20);
	w_msg(&b, 8, &ai);
	assert_int_equal(pf_s2a_decode(b.data, b.len, CAP, &s, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "new_instance_uid"));
	pf_buf_release(&b);
}

/* ---- AnyValue -> string ---- */

/* KeyValue{key, value} with the AnyValue body given. */
static void kv(struct pf_buf *desc, unsigned field, const char *key, struct pf_buf *anyvalue)
{
	struct pf_buf k = nb();
	w_str(&k, 1, key);
	if (anyvalue)
		w_msg(&k, 2, anyvalue);
	w_msg(desc, field, &k);
}

static struct pf_buf av_str(const char *s)
{
	struct pf_buf v = nb();
	w_str(&v, 1, s);
	return v;
}

static struct pf_buf av_int(int64_t i)
{
	struct pf_buf v = nb();
	w_uint(&v, 3, (uint64_t)i);
	return v;
}

static struct pf_buf av_bool(bool t)
{
	struct pf_buf v = nb();
	w_uint(&v, 2, t);
	return v;
}

static struct pf_buf av_double(double d)
{
	struct pf_buf v = nb();
	w_double(&v, 4, d);
	return v;
}

static void test_anyvalue_strings(void **state)
{
	struct pf_buf desc = nb(), msg = nb(), v;
	static const uint8_t bytes[] = {0xde, 0xad, 0x00, 0x0f};

	v = av_str("plain \"text\"");
	kv(&desc, 1, "s", &v);
	v = av_bool(true);
	kv(&desc, 1, "bt", &v);
	v = av_bool(false);
	kv(&desc, 1, "bf", &v);
	v = av_int(-42);
	kv(&desc, 1, "i", &v);
	v = av_int(INT64_MAX);
	kv(&desc, 1, "imax", &v);
	v = av_double(1.5);
	kv(&desc, 1, "d", &v);
	v = av_double(0.1);
	kv(&desc, 1, "d01", &v);
	v = nb();
	w_bytes(&v, 7, bytes, sizeof(bytes));
	kv(&desc, 1, "by", &v);

	/* array [1, "a\n", true, 2.25, [], {"k":"v"}, null-AnyValue] */
	struct pf_buf arr = nb(), el;
	el = av_int(1);
	w_msg(&arr, 1, &el);
	el = av_str("a\n\x01");
	w_msg(&arr, 1, &el);
	el = av_bool(true);
	w_msg(&arr, 1, &el);
	el = av_double(2.25);
	w_msg(&arr, 1, &el);
	struct pf_buf empty_arr = nb();
	el = nb();
	w_msg(&el, 5, &empty_arr);
	w_msg(&arr, 1, &el);
	struct pf_buf kvl = nb(), inner = av_str("v");
	kv(&kvl, 1, "k", &inner);
	el = nb();
	w_msg(&el, 6, &kvl);
	w_msg(&arr, 1, &el);
	el = nb();
	w_msg(&arr, 1, &el); /* AnyValue with nothing set */
	v = nb();
	w_msg(&v, 5, &arr);
	kv(&desc, 2, "arr", &v);

	/* kvlist {"n":-1,"b":"00ff","x":null(no value)} */
	struct pf_buf list = nb(), lv;
	lv = av_int(-1);
	kv(&list, 1, "n", &lv);
	lv = nb();
	w_bytes(&lv, 7, "\x00\xff", 2);
	kv(&list, 1, "b", &lv);
	kv(&list, 1, "x", NULL);
	v = nb();
	w_msg(&v, 6, &list);
	kv(&desc, 2, "kvl", &v);
	kv(&desc, 2, "none", NULL);

	w_msg(&msg, 3, &desc);
	struct pf_a2s *a = NULL;
	struct pf_error err = {0};
	assert_int_equal(pf_a2s_decode(msg.data, msg.len, CAP, &a, &err), 0);
	assert_true(a->has_description);
	assert_int_equal(a->n_identifying, 8);
	const char *want[][2] = {
	    {"s", "plain \"text\""},	     {"bt", "true"}, {"bf", "false"}, {"i", "-42"},
	    {"imax", "9223372036854775807"}, {"d", "1.5"},   {"d01", "0.1"},  {"by", "dead000f"},
	};
	for (int i = 0; i < 8; i++) {
		assert_string_equal(a->identifying[i].key, want[i][0]);
		assert_string_equal(a->identifying[i].value, want[i][1]);
	}
	assert_int_equal(a->n_non_identifying, 3);
	assert_string_equal(a->non_identifying[0].key, "arr");
	assert_string_equal(a->non_identifying[0].value,
			    "[1,\"a\\n\\u0001\",true,2.25,[],{\"k\":\"v\"},null]");
	assert_string_equal(a->non_identifying[1].value, "{\"n\":-1,\"b\":\"00ff\",\"x\":null}");
	assert_string_equal(a->non_identifying[2].key, "none");
	assert_string_equal(a->non_identifying[2].value, "");
	pf_a2s_free(a);
	pf_buf_release(&msg);

	/* deeply nested arrays are refused by the wire scan */
	struct pf_buf deep = av_str("x");
	for (int i = 0; i < 200; i++) {
		struct pf_buf wrap_arr = nb(), wrap = nb();
		w_msg(&wrap_arr, 1, &deep);
		w_msg(&wrap, 5, &wrap_arr);
		deep = wrap;
	}
	desc = nb();
	msg = nb();
	kv(&desc, 1, "deep", &deep);
	w_msg(&msg, 3, &desc);
	assert_int_equal(pf_a2s_decode(msg.data, msg.len, CAP, &a, NULL), -EBADMSG);
	pf_buf_release(&msg);
}

/* ---- framing ---- */

static void test_framing(void **state)
{
	const uint8_t *d = NULL;
	size_t n = 99;

	static const uint8_t m1[] = {0x00, 0x0a, 0x01, 0x07};
	assert_int_equal(pf_opamp_ws_unframe(m1, sizeof(m1), &d, &n), 0);
	assert_ptr_equal(d, m1 + 1);
	assert_int_equal(n, 3);

	static const uint8_t m2[] = {0x00}; /* empty data is valid */
	assert_int_equal(pf_opamp_ws_unframe(m2, 1, &d, &n), 0);
	assert_int_equal(n, 0);

	static const uint8_t m3[] = {0x80, 0x00, 0x0a}; /* non-minimal varint 0 */
	assert_int_equal(pf_opamp_ws_unframe(m3, sizeof(m3), &d, &n), 0);
	assert_ptr_equal(d, m3 + 2);
	assert_int_equal(n, 1);

	static const uint8_t bad1[] = {0x01, 0x0a};	  /* non-zero header */
	static const uint8_t bad2[] = {0x80};		  /* truncated varint */
	static const uint8_t bad3[] = {0x80, 0x80, 0x80}; /* truncated varint */
	static const uint8_t bad4[] = {0x80, 0x01};	  /* 128 */
	static const uint8_t bad5[11] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
					 0x80, 0x80, 0x80, 0x80, 0x00}; /* 11-byte varint */
	assert_int_equal(pf_opamp_ws_unframe(bad1, sizeof(bad1), &d, &n), -EBADMSG);
	assert_int_equal(pf_opamp_ws_unframe(bad2, sizeof(bad2), &d, &n), -EBADMSG);
	assert_int_equal(pf_opamp_ws_unframe(bad3, sizeof(bad3), &d, &n), -EBADMSG);
	assert_int_equal(pf_opamp_ws_unframe(bad4, sizeof(bad4), &d, &n), -EBADMSG);
	assert_int_equal(pf_opamp_ws_unframe(bad5, sizeof(bad5), &d, &n), -EBADMSG);
	assert_int_equal(pf_opamp_ws_unframe(m1, 0, &d, &n), -EBADMSG); /* no header at all */

	/* header + encoded message round trip */
	struct pf_buf b = nb();
	struct pf_a2s in;
	fill_a2s(&in);
	assert_int_equal(pf_opamp_ws_frame_header(&b), 0);
	assert_int_equal(b.len, 1);
	assert_int_equal(b.data[0], 0);
	assert_int_equal(pf_a2s_encode(&in, &b), 0);
	assert_int_equal(pf_opamp_ws_unframe(b.data, b.len, &d, &n), 0);
	struct pf_a2s *out = NULL;
	assert_int_equal(pf_a2s_decode(d, n, CAP, &out, NULL), 0);
	assert_true(out->sequence_num == in.sequence_num);
	pf_a2s_free(out);
	pf_buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_a2s_roundtrip),
	    cmocka_unit_test(test_s2a_roundtrip),
	    cmocka_unit_test(test_s2a_connection_settings),
	    cmocka_unit_test(test_s2a_retry_without_error),
	    cmocka_unit_test(test_presence_flags),
	    cmocka_unit_test(test_decode_cap),
	    cmocka_unit_test(test_decode_garbage),
	    cmocka_unit_test(test_decode_truncated),
	    cmocka_unit_test(test_decode_deep_health),
	    cmocka_unit_test(test_encode_limits),
	    cmocka_unit_test(test_uid_lengths),
	    cmocka_unit_test(test_anyvalue_strings),
	    cmocka_unit_test(test_framing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
