/* Unit tests of proto/codec/otlp_traces.c: protobuf and OTLP/JSON trace requests (plain and
 * gzip) decode to the spans that were encoded; OTLP/JSON's variants (ids in upper case, int64
 * as numbers, status as enum name, thread.id on the resource); refusals with the place named
 * (bad hex ids, end before start, zero ids, bad gzip, bodies and inflation over the cap, too
 * many spans, garbage); the ExportTraceServiceResponse in both encodings. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "otlp_traces.h"
#include "pf/gzip.h"

static void fill(struct pf_span *s, unsigned i)
{
	memset(s, 0, sizeof(*s));
	for (int k = 0; k < 16; k++)
		s->trace_id[k] = (uint8_t)(0xa0 + k + i);
	for (int k = 0; k < 8; k++)
		s->span_id[k] = (uint8_t)(0x10 + k + i);
	s->start_unix_ns = 1764000000000000000ull + i * 1000u;
	s->end_unix_ns = s->start_unix_ns + 600000000ull;
	s->status = i == 1 ? PF_SPAN_STATUS_ERROR : PF_SPAN_STATUS_UNSET;
	s->pid = i == 2 ? 0 : 4000 + i;
	s->tid = i == 0 ? 4100 : 0;
	snprintf(s->name, sizeof(s->name), "GET /checkout/%u", i);
	if (i != 1)
		snprintf(s->service_name, sizeof(s->service_name), "checkout");
}

static int decode(const struct pf_buf *b, bool json, bool gz, size_t max, struct pf_span **out,
		  size_t *n, struct pf_error *err)
{
	struct pf_otlp_traces_opts o = {.json = json, .gzip = gz, .max_bytes = max};
	return pf_otlp_traces_decode(b->data, b->len, &o, out, n, err);
}

static void roundtrip(bool json, bool gz)
{
	struct pf_span in[3];
	for (unsigned i = 0; i < 3; i++)
		fill(&in[i], i);
	struct pf_buf b, z;
	pf_buf_init(&b, 1 << 20);
	pf_buf_init(&z, 1 << 20);
	assert_int_equal(pf_otlp_traces_encode(in, 3, json, &b), 0);
	const struct pf_buf *body = &b;
	if (gz) {
		assert_int_equal(pf_gzip_compress(b.data, b.len, -1, &z), 0);
		body = &z;
	}
	struct pf_span *out = NULL;
	size_t n = 0;
	struct pf_error err = {0};
	int rc = decode(body, json, gz, 0, &out, &n, &err);
	if (rc)
		fprintf(stderr, "decode: %s\n", err.msg);
	assert_int_equal(rc, 0);
	assert_int_equal(n, 3);
	for (unsigned i = 0; i < 3; i++) {
		assert_memory_equal(out[i].trace_id, in[i].trace_id, 16);
		assert_memory_equal(out[i].span_id, in[i].span_id, 8);
		assert_true(out[i].start_unix_ns == in[i].start_unix_ns);
		assert_true(out[i].end_unix_ns == in[i].end_unix_ns);
		assert_int_equal(out[i].status, in[i].status);
		assert_int_equal(out[i].pid, in[i].pid);
		assert_int_equal(out[i].tid, in[i].tid);
		assert_string_equal(out[i].name, in[i].name);
		assert_string_equal(out[i].service_name, in[i].service_name);
		assert_false(out[i].service_name_long);
	}
	free(out);
	pf_buf_release(&b);
	pf_buf_release(&z);
}

static void test_roundtrip_protobuf(void **state)
{
	(void)state;
	roundtrip(false, false);
	roundtrip(false, true);
}

static void test_roundtrip_json(void **state)
{
	(void)state;
	roundtrip(true, false);
	roundtrip(true, true);
}

static int decode_text(const char *text, struct pf_span **out, size_t *n, struct pf_error *err)
{
	struct pf_otlp_traces_opts o = {.json = true};
	return pf_otlp_traces_decode((const uint8_t *)text, strlen(text), &o, out, n, err);
}

#define SPAN_OK "\"traceId\":\"5B8EFFF798038103D269B633813FC60C\",\"spanId\":\"EEE19B7EC3C1B174\""

static void test_json_variants(void **state)
{
	(void)state;
	const char *text =
	    "{\"resourceSpans\":[{\"resource\":{\"attributes\":["
	    "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"cart\"}},"
	    "{\"key\":\"process.pid\",\"value\":{\"intValue\":1234}},"
	    "{\"key\":\"thread.id\",\"value\":{\"intValue\":\"77\"}}]},"
	    "\"scopeSpans\":[{\"scope\":{\"name\":\"x\"},\"spans\":["
	    "{" SPAN_OK ",\"name\":\"a\",\"kind\":2,\"startTimeUnixNano\":1000,"
	    "\"endTimeUnixNano\":\"2000\",\"status\":{\"code\":\"STATUS_CODE_ERROR\"},"
	    "\"unknownField\":true},"
	    "{" SPAN_OK ",\"startTimeUnixNano\":\"5\",\"endTimeUnixNano\":\"5\","
	    "\"attributes\":[{\"key\":\"thread.id\",\"value\":{\"intValue\":\"88\"}}],"
	    "\"status\":{}}]}]},"
	    "{\"scopeSpans\":[{\"spans\":[{" SPAN_OK ",\"startTimeUnixNano\":\"1\","
	    "\"endTimeUnixNano\":\"18446744073709551615\",\"status\":{\"code\":1}}]}]},"
	    "{\"scopeSpans\":null}]}";
	struct pf_span *s = NULL;
	size_t n = 0;
	struct pf_error err = {0};
	int rc = decode_text(text, &s, &n, &err);
	if (rc)
		fprintf(stderr, "%s\n", err.msg);
	assert_int_equal(rc, 0);
	assert_int_equal(n, 3);
	assert_int_equal(s[0].trace_id[0], 0x5b);
	assert_int_equal(s[0].span_id[7], 0x74);
	assert_int_equal(s[0].status, PF_SPAN_STATUS_ERROR);
	assert_int_equal(s[0].pid, 1234);
	assert_int_equal(s[0].tid, 77); /* from the resource */
	assert_string_equal(s[0].service_name, "cart");
	assert_true(s[0].start_unix_ns == 1000 && s[0].end_unix_ns == 2000);
	assert_int_equal(s[1].tid, 88); /* the span's own wins */
	assert_int_equal(s[1].status, PF_SPAN_STATUS_UNSET);
	assert_int_equal(s[2].pid, 0);
	assert_string_equal(s[2].service_name, "");
	assert_true(s[2].end_unix_ns == UINT64_MAX);
	assert_int_equal(s[2].status, PF_SPAN_STATUS_OK);
	free(s);

	/* empty requests are fine */
	assert_int_equal(decode_text("{}", &s, &n, &err), 0);
	assert_int_equal(n, 0);
	assert_null(s);
	assert_int_equal(decode_text("{\"resourceSpans\":[]}", &s, &n, &err), 0);
	assert_int_equal(n, 0);
}

static void expect_bad(const char *text, int code, const char *path, const char *msg)
{
	struct pf_span *s = NULL;
	size_t n = 0;
	struct pf_error err = {0};
	int rc = decode_text(text, &s, &n, &err);
	if (rc != code || strcmp(err.path, path) || !strstr(err.msg, msg))
		fprintf(stderr, "input %s\n -> %d path '%s' msg '%s'\n", text, rc, err.path,
			err.msg);
	assert_int_equal(rc, code);
	assert_string_equal(err.path, path);
	assert_non_null(strstr(err.msg, msg));
	assert_null(s);
	assert_int_equal(n, 0);
}

#define ONE(span) "{\"resourceSpans\":[{\"scopeSpans\":[{},{\"spans\":[" span "]}]}]}"
#define P1 "resourceSpans[0].scopeSpans[1].spans[0]"

static void test_json_refusals(void **state)
{
	(void)state;
	expect_bad(
	    ONE("{\"traceId\":\"5b8efff798038103d269b633813fc60\",\"spanId\":"
		"\"eee19b7ec3c1b174\",\"startTimeUnixNano\":\"1\",\"endTimeUnixNano\":\"2\"}"),
	    -EBADMSG, P1 ".traceId", "must be 32 hex digits");
	expect_bad(
	    ONE("{\"traceId\":\"5b8efff798038103d269b633813fc60x\",\"spanId\":"
		"\"eee19b7ec3c1b174\",\"startTimeUnixNano\":\"1\",\"endTimeUnixNano\":\"2\"}"),
	    -EBADMSG, P1 ".traceId", "got \"5b8efff798038103d269b633813fc60x\"");
	expect_bad(
	    ONE("{\"traceId\":\"5b8efff798038103d269b633813fc60c\",\"spanId\":"
		"\"eee19b7ec3c1b17\",\"startTimeUnixNano\":\"1\",\"endTimeUnixNano\":\"2\"}"),
	    -EBADMSG, P1 ".spanId", "must be 16 hex digits");
	expect_bad(
	    ONE("{\"traceId\":\"00000000000000000000000000000000\",\"spanId\":"
		"\"eee19b7ec3c1b174\",\"startTimeUnixNano\":\"1\",\"endTimeUnixNano\":\"2\"}"),
	    -EBADMSG, P1 ".traceId", "must not be all zero");
	expect_bad(ONE("{" SPAN_OK ",\"startTimeUnixNano\":\"3\",\"endTimeUnixNano\":\"2\"}"),
		   -EBADMSG, P1 ".endTimeUnixNano", "before startTimeUnixNano (2 < 3)");
	expect_bad(ONE("{" SPAN_OK ",\"endTimeUnixNano\":\"2\"}"), -EBADMSG,
		   P1 ".startTimeUnixNano", "required");
	expect_bad(ONE("{" SPAN_OK ",\"startTimeUnixNano\":\"-1\",\"endTimeUnixNano\":\"2\"}"),
		   -EBADMSG, P1 ".startTimeUnixNano", "must be unix nanoseconds");
	expect_bad(ONE("{" SPAN_OK ",\"startTimeUnixNano\":1.5,\"endTimeUnixNano\":\"2\"}"),
		   -EBADMSG, P1 ".startTimeUnixNano", "must be unix nanoseconds");
	expect_bad(ONE("{" SPAN_OK ",\"startTimeUnixNano\":\"1\",\"endTimeUnixNano\":"
		       "\"18446744073709551616\"}"),
		   -EBADMSG, P1 ".endTimeUnixNano", "must be unix nanoseconds");
	expect_bad(ONE("{" SPAN_OK ",\"startTimeUnixNano\":\"1\",\"endTimeUnixNano\":\"2\","
		       "\"status\":{\"code\":\"ERROR\"}}"),
		   -EBADMSG, P1 ".status.code", "STATUS_CODE_* name");
	expect_bad(ONE("7"), -EBADMSG, P1, "must be an object");
	expect_bad("{\"resourceSpans\":{}}", -EBADMSG, "resourceSpans", "must be an array");
	expect_bad("{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":3}]}]}", -EBADMSG,
		   "resourceSpans[0].scopeSpans[0].spans", "must be an array");
	expect_bad("[]", -EBADMSG, "", "must be a JSON object");
	expect_bad("{\"resourceSpans\":[", -EBADMSG, "", "not valid JSON");
	expect_bad("{\"a\":1,\"a\":2}", -EBADMSG, "", "not valid JSON");
}

static void test_caps_and_gzip(void **state)
{
	(void)state;
	struct pf_span in[20];
	for (unsigned i = 0; i < 20; i++)
		fill(&in[i], i % 3);
	struct pf_buf b, z;
	pf_buf_init(&b, 1 << 20);
	pf_buf_init(&z, 1 << 20);
	assert_int_equal(pf_otlp_traces_encode(in, 20, false, &b), 0);
	struct pf_span *out = NULL;
	size_t n = 0;
	struct pf_error err = {0};

	/* body over the cap: -E2BIG, before anything is parsed */
	assert_int_equal(decode(&b, false, false, b.len - 1, &out, &n, &err), -E2BIG);
	assert_non_null(strstr(err.msg, "over the"));
	/* a small gzip body that inflates past the cap */
	assert_int_equal(pf_gzip_compress(b.data, b.len, 9, &z), 0);
	assert_true(z.len < b.len - 1);
	pf_error_clear(&err);
	assert_int_equal(decode(&z, false, true, b.len - 1, &out, &n, &err), -E2BIG);
	assert_non_null(strstr(err.msg, "inflates past"));
	/* too many spans */
	struct pf_otlp_traces_opts o = {.max_spans = 19};
	pf_error_clear(&err);
	assert_int_equal(pf_otlp_traces_decode(b.data, b.len, &o, &out, &n, &err), -E2BIG);
	assert_non_null(strstr(err.msg, "more than 19 spans"));
	o.max_spans = 20;
	assert_int_equal(pf_otlp_traces_decode(b.data, b.len, &o, &out, &n, &err), 0);
	assert_int_equal(n, 20);
	free(out);
	/* not gzip, and a corrupt gzip body */
	pf_error_clear(&err);
	assert_int_equal(decode(&b, false, true, 0, &out, &n, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "not valid gzip"));
	z.data[z.len / 2] ^= 0x55;
	assert_int_equal(decode(&z, false, true, 0, &out, &n, &err), -EBADMSG);
	z.len -= 8; /* truncated */
	assert_int_equal(decode(&z, false, true, 0, &out, &n, &err), -EBADMSG);
	/* protobuf garbage and truncation */
	pf_error_clear(&err);
	struct pf_buf t = b;
	t.len = b.len - 3;
	assert_int_equal(decode(&t, false, false, 0, &out, &n, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "malformed ExportTraceServiceRequest"));
	static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	struct pf_otlp_traces_opts po = {0};
	assert_int_equal(pf_otlp_traces_decode(junk, sizeof(junk), &po, &out, &n, &err), -EBADMSG);
	assert_null(out);
	pf_buf_release(&b);
	pf_buf_release(&z);
}

static void test_protobuf_refusals(void **state)
{
	(void)state;
	struct pf_span in[2];
	fill(&in[0], 0);
	fill(&in[1], 1);
	in[1].end_unix_ns = in[1].start_unix_ns - 1;
	struct pf_buf b;
	pf_buf_init(&b, 1 << 20);
	assert_int_equal(pf_otlp_traces_encode(in, 2, false, &b), 0);
	struct pf_span *out = NULL;
	size_t n = 0;
	struct pf_error err = {0};
	assert_int_equal(decode(&b, false, false, 0, &out, &n, &err), -EBADMSG);
	assert_string_equal(err.path, "resourceSpans[1].scopeSpans[0].spans[0].endTimeUnixNano");
	pf_buf_reset(&b);
	fill(&in[1], 1);
	memset(in[1].span_id, 0, 8);
	assert_int_equal(pf_otlp_traces_encode(in, 2, false, &b), 0);
	pf_error_clear(&err);
	/* protobuf-c leaves an all-zero span id out of nothing: it is sent as 8 zero bytes */
	assert_int_equal(decode(&b, false, false, 0, &out, &n, &err), -EBADMSG);
	assert_string_equal(err.path, "resourceSpans[1].scopeSpans[0].spans[0].spanId");
	/* a 15-byte trace id: patch the length byte of the first span's trace_id field */
	pf_buf_reset(&b);
	assert_int_equal(pf_otlp_traces_encode(in, 1, false, &b), 0);
	uint8_t *p = memmem(b.data, b.len, in[0].trace_id, 16);
	assert_non_null(p);
	assert_int_equal(p[-1], 16);
	assert_int_equal(p[-2], 0x0a); /* field 1, length-delimited */
	p[-1] = 15;
	/* the span message is now one byte short inside: the extra byte becomes garbage, or a
	 * valid field; either way the request is refused */
	pf_error_clear(&err);
	assert_int_equal(decode(&b, false, false, 0, &out, &n, &err), -EBADMSG);
	pf_buf_release(&b);
}

static void test_response(void **state)
{
	(void)state;
	struct pf_buf b;
	pf_buf_init(&b, 1 << 16);
	assert_int_equal(pf_otlp_traces_response(0, NULL, true, &b), 0);
	assert_string_equal(pf_buf_str(&b), "{}");
	pf_buf_reset(&b);
	assert_int_equal(pf_otlp_traces_response(2, "pid 9 is not profiled \"x\"", true, &b), 0);
	assert_string_equal(pf_buf_str(&b),
			    "{\"partialSuccess\":{\"rejectedSpans\":\"2\","
			    "\"errorMessage\":\"pid 9 is not profiled \\\"x\\\"\"}}");
	pf_buf_reset(&b);
	assert_int_equal(pf_otlp_traces_response(0, NULL, false, &b), 0);
	assert_int_equal(b.len, 0); /* the empty message */
	assert_int_equal(pf_otlp_traces_response(3, "no", false, &b), 0);
	/* field 1 (partial_success) { field 1 varint 3, field 2 "no" } */
	static const uint8_t want[] = {0x0a, 0x06, 0x08, 0x03, 0x12, 0x02, 'n', 'o'};
	assert_int_equal(b.len, sizeof(want));
	assert_memory_equal(b.data, want, sizeof(want));
	pf_buf_release(&b);
}

static void test_status_retry(void **state)
{
	(void)state;
	struct pf_buf b;
	pf_buf_init(&b, 1 << 16);
	assert_int_equal(pf_otlp_status_encode(14, "x", false, &b), 0);
	assert_int_equal(pf_otlp_status_append_retry(&b, 1500), 0);
	/* Status { code 14, message "x", details [Any { type_url, value: RetryInfo {
	 * retry_delay { seconds 1, nanos 500000000 } } }] }, written out by hand */
	static const char url[] = "type.googleapis.com/google.rpc.RetryInfo";
	uint8_t want[128] = {0x08, 0x0e, 0x12, 0x01, 'x', 0x1a, 0x36, 0x0a, 0x28};
	memcpy(want + 9, url, sizeof(url) - 1);
	static const uint8_t tail[] = {0x12, 0x0a, 0x0a, 0x08, 0x08, 0x01,
				       0x10, 0x80, 0xca, 0xb5, 0xee, 0x01};
	memcpy(want + 9 + sizeof(url) - 1, tail, sizeof(tail));
	assert_int_equal(b.len, 9 + sizeof(url) - 1 + sizeof(tail));
	assert_memory_equal(b.data, want, b.len);
	/* a whole second: no nanos field; out of range: nothing appended */
	pf_buf_reset(&b);
	assert_int_equal(pf_otlp_status_append_retry(&b, 1000), 0);
	assert_int_equal(b.len, 2 + sizeof(url) - 1 + 2 + 6);
	size_t n = b.len;
	assert_int_equal(pf_otlp_status_append_retry(&b, -1), -EINVAL);
	assert_int_equal(pf_otlp_status_append_retry(&b, 86400001), -EINVAL);
	assert_int_equal(b.len, n);
	pf_buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_roundtrip_protobuf), cmocka_unit_test(test_roundtrip_json),
	    cmocka_unit_test(test_json_variants),      cmocka_unit_test(test_json_refusals),
	    cmocka_unit_test(test_caps_and_gzip),      cmocka_unit_test(test_protobuf_refusals),
	    cmocka_unit_test(test_response),	       cmocka_unit_test(test_status_retry),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
