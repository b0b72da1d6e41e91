/* otlp_traces.c — see otlp_traces.h. */
#include "otlp_traces.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "pf/gzip.h"
#include "pf/uuid.h"
#include "pb_util.h"

typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest pb_request;
typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceResponse pb_response;
typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTracePartialSuccess pb_partial;
typedef Opentelemetry__Proto__Trace__V1__Span pb_span;
typedef Opentelemetry__Proto__Common__V1__KeyValue pb_kv;
typedef Opentelemetry__Proto__Common__V1__AnyValue pb_any;

#define PID_MAX 0x7fffffffLL
#define PATH_LEN 128
/* protobuf-c's unpacked structs are larger than the wire bytes (a span's 40-odd wire bytes
 * become a ~200-byte struct): the allocator's cap is a multiple of the byte cap. */
#define UNPACK_FACTOR 8
#define UNPACK_SLACK 4096 /* the top-level structs of an empty request */

/* The resource-level values every span of a ResourceSpans inherits. */
struct res_info {
	uint32_t pid, tid;
	char service[PF_SPAN_SERVICE_LEN];
	bool service_long;
};

struct out_spans {
	struct pf_span *v;
	size_t n, cap, max;
};

static int spans_push(struct out_spans *o, struct pf_span **s, struct pf_error *err)
{
	if (o->n >= o->max)
		return pf_error_set(err, -E2BIG, "", "more than %zu spans in one request", o->max);
	if (o->n == o->cap) {
		size_t nc = o->cap ? o->cap * 2 : 64;
		if (nc > o->max)
			nc = o->max;
		struct pf_span *nv = realloc(o->v, nc * sizeof(*nv));
		if (!nv)
			return pf_error_set(err, -ENOMEM, "", "out of memory");
		o->v = nv;
		o->cap = nc;
	}
	*s = &o->v[o->n++];
	memset(*s, 0, sizeof(**s));
	return 0;
}

static void copy_trunc(char *dst, size_t cap, const char *src, size_t len, bool *too_long)
{
	size_t n = len < cap - 1 ? len : cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
	if (too_long)
		*too_long = len >= cap;
}

static uint32_t id_in_range(int64_t v)
{
	return v >= 1 && v <= PID_MAX ? (uint32_t)v : 0;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* Checks common to both encodings, once ids and times are filled in. */
static int span_check(const struct pf_span *s, const char *path, const char *tid_key,
		      const char *sid_key, const char *end_key, const char *start_key,
		      struct pf_error *err)
{
	char p[PATH_LEN + 32];
	if (all_zero(s->trace_id, 16)) {
		snprintf(p, sizeof(p), "%s.%s", path, tid_key);
		return pf_error_set(err, -EBADMSG, p, "must not be all zero");
	}
	if (all_zero(s->span_id, 8)) {
		snprintf(p, sizeof(p), "%s.%s", path, sid_key);
		return pf_error_set(err, -EBADMSG, p, "must not be all zero");
	}
	if (!s->start_unix_ns) {
		snprintf(p, sizeof(p), "%s.%s", path, start_key);
		return pf_error_set(err, -EBADMSG, p, "required (unix nanoseconds, not 0)");
	}
	if (s->end_unix_ns < s->start_unix_ns) {
		snprintf(p, sizeof(p), "%s.%s", path, end_key);
		return pf_error_set(err, -EBADMSG, p, "before %s (%" PRIu64 " < %" PRIu64 ")",
				    start_key, s->end_unix_ns, s->start_unix_ns);
	}
	return 0;
}

/* ---- protobuf ------------------------------------------------------------------------------ */

static bool pb_int(const pb_any *v, int64_t *out)
{
	if (!v)
		return false;
	if (v->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE) {
		*out = v->int_value;
		return true;
	}
	if (v->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE &&
	    v->string_value) {
		char *end;
		errno = 0;
		long long x = strtoll(v->string_value, &end, 10);
		if (errno || end == v->string_value || *end)
			return false;
		*out = x;
		return true;
	}
	return false;
}

static void pb_attrs(pb_kv **kv, size_t n, struct res_info *r, bool resource)
{
	for (size_t i = 0; i < n; i++) {
		if (!kv[i] || !kv[i]->key)
			continue;
		const char *k = kv[i]->key;
		const pb_any *v = kv[i]->value;
		int64_t x;
		if (!strcmp(k, "thread.id") && pb_int(v, &x)) {
			r->tid = id_in_range(x);
		} else if (resource && !strcmp(k, "process.pid") && pb_int(v, &x)) {
			r->pid = id_in_range(x);
		} else if (resource && !strcmp(k, "service.name") && v &&
			   v->value_case ==
			       OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE &&
			   v->string_value) {
			copy_trunc(r->service, sizeof(r->service), v->string_value,
				   strlen(v->string_value), &r->service_long);
		}
	}
}

static int pb_span_read(const pb_span *ps, const struct res_info *res, const char *path,
			struct out_spans *o, struct pf_error *err)
{
	char p[PATH_LEN + 32];
	if (ps->trace_id.len != 16) {
		snprintf(p, sizeof(p), "%s.traceId", path);
		return pf_error_set(err, -EBADMSG, p, "must be 16 bytes, got %zu",
				    ps->trace_id.len);
	}
	if (ps->span_id.len != 8) {
		snprintf(p, sizeof(p), "%s.spanId", path);
		return pf_error_set(err, -EBADMSG, p, "must be 8 bytes, got %zu", ps->span_id.len);
	}
	struct pf_span *s;
	int rc = spans_push(o, &s, err);
	if (rc < 0)
		return rc;
	memcpy(s->trace_id, ps->trace_id.data, 16);
	memcpy(s->span_id, ps->span_id.data, 8);
	s->start_unix_ns = ps->start_time_unix_nano;
	s->end_unix_ns = ps->end_time_unix_nano;
	s->status = ps->status ? (int)ps->status->code : PF_SPAN_STATUS_UNSET;
	if (ps->name)
		copy_trunc(s->name, sizeof(s->name), ps->name, strlen(ps->name), NULL);
	struct res_info r = *res;
	pb_attrs(ps->attributes, ps->n_attributes, &r, false);
	s->pid = r.pid;
	s->tid = r.tid;
	memcpy(s->service_name, r.service, sizeof(s->service_name));
	s->service_name_long = r.service_long;
	return span_check(s, path, "traceId", "spanId", "endTimeUnixNano", "startTimeUnixNano",
			  err);
}

static int decode_pb(const uint8_t *data, size_t len, size_t max_bytes, struct out_spans *o,
		     struct pf_error *err)
{
	const ProtobufCMessageDescriptor *desc =
	    &opentelemetry__proto__collector__trace__v1__export_trace_service_request__descriptor;
	int r = pb_wire_scan(desc, data, len, 32);
	if (r == -ELOOP)
		return pf_error_set(err, -EBADMSG, "", "messages nested deeper than 32");
	if (r < 0)
		return pf_error_set(err, -EBADMSG, "",
				    "malformed ExportTraceServiceRequest (protobuf)");
	struct pb_capped_alloc ca;
	size_t cap = max_bytes * UNPACK_FACTOR + UNPACK_SLACK;
	pb_capped_alloc_init(&ca, cap);
	pb_request *req = (pb_request *)protobuf_c_message_unpack(desc, &ca.a, len, data);
	if (!req) {
		pb_capped_alloc_release(&ca);
		if (ca.exceeded)
			return pf_error_set(err, -E2BIG, "", "decoded request over %zu bytes", cap);
		return pf_error_set(err, -EBADMSG, "",
				    "malformed ExportTraceServiceRequest (protobuf)");
	}
	r = 0;
	for (size_t i = 0; i < req->n_resource_spans && r == 0; i++) {
		const Opentelemetry__Proto__Trace__V1__ResourceSpans *rs = req->resource_spans[i];
		struct res_info res = {0};
		if (rs->resource)
			pb_attrs(rs->resource->attributes, rs->resource->n_attributes, &res, true);
		for (size_t j = 0; j < rs->n_scope_spans && r == 0; j++) {
			const Opentelemetry__Proto__Trace__V1__ScopeSpans *ss = rs->scope_spans[j];
			for (size_t k = 0; k < ss->n_spans && r == 0; k++) {
				char path[PATH_LEN];
				snprintf(path, sizeof(path),
					 "resourceSpans[%zu].scopeSpans[%zu].spans[%zu]", i, j, k);
				r = pb_span_read(ss->spans[k], &res, path, o, err);
			}
		}
	}
	pb_capped_alloc_release(&ca);
	return r;
}

/* ---- OTLP/JSON ----------------------------------------------------------------------------- */

/* A 64-bit unsigned integer given as a decimal string or a JSON integer. */
static int json_u64(const json_t *v, uint64_t *out)
{
	if (json_is_integer(v)) {
		json_int_t x = json_integer_value(v);
		if (x < 0)
			return -1;
		*out = (uint64_t)x;
		return 0;
	}
	if (!json_is_string(v))
		return -1;
	const char *s = json_string_value(v);
	size_t n = json_string_length(v);
	if (!n || n > 20 || strspn(s, "0123456789") != n)
		return -1;
	char *end;
	errno = 0;
	unsigned long long x = strtoull(s, &end, 10);
	if (errno)
		return -1;
	*out = x;
	return 0;
}

/* An int64 attribute value: {"intValue": "123" | 123}, or a decimal {"stringValue"}. */
static bool json_attr_int(const json_t *v, int64_t *out)
{
	const json_t *iv = json_object_get(v, "intValue");
	if (json_is_integer(iv)) {
		*out = json_integer_value(iv);
		return true;
	}
	const json_t *sv = iv && json_is_string(iv) ? iv : json_object_get(v, "stringValue");
	if (!json_is_string(sv))
		return false;
	const char *s = json_string_value(sv);
	char *end;
	errno = 0;
	long long x = strtoll(s, &end, 10);
	if (errno || end == s || *end)
		return false;
	*out = x;
	return true;
}

static void json_attrs(const json_t *arr, struct res_info *r, bool resource)
{
	size_t i;
	const json_t *kv;
	if (!json_is_array(arr))
		return;
	json_array_foreach(arr, i, kv)
	{
		const char *k = json_string_value(json_object_get(kv, "key"));
		const json_t *v = json_object_get(kv, "value");
		int64_t x;
		if (!k || !json_is_object(v))
			continue;
		if (!strcmp(k, "thread.id") && json_attr_int(v, &x)) {
			r->tid = id_in_range(x);
		} else if (resource && !strcmp(k, "process.pid") && json_attr_int(v, &x)) {
			r->pid = id_in_range(x);
		} else if (resource && !strcmp(k, "service.name")) {
			const json_t *sv = json_object_get(v, "stringValue");
			if (json_is_string(sv))
				copy_trunc(r->service, sizeof(r->service), json_string_value(sv),
					   json_string_length(sv), &r->service_long);
		}
	}
}

static int json_hex_id(const json_t *v, uint8_t *out, size_t n, const char *path, const char *key,
		       struct pf_error *err)
{
	char p[PATH_LEN + 32];
	snprintf(p, sizeof(p), "%s.%s", path, key);
	const char *s = json_string_value(v);
	if (!s || json_string_length(v) != 2 * n || pf_hex_decode(s, out, n) < 0)
		return pf_error_set(err, -EBADMSG, p, "must be %zu hex digits%s%.40s%s", 2 * n,
				    s ? ", got \"" : "", s ? s : "", s ? "\"" : "");
	return 0;
}

static int json_status(const json_t *st, int *code, const char *path, struct pf_error *err)
{
	static const char *const names[] = {"STATUS_CODE_UNSET", "STATUS_CODE_OK",
					    "STATUS_CODE_ERROR"};
	*code = PF_SPAN_STATUS_UNSET;
	if (!st || json_is_null(st))
		return 0;
	const json_t *c = json_object_get(st, "code");
	if (!c || json_is_null(c))
		return 0;
	if (json_is_integer(c)) {
		json_int_t x = json_integer_value(c);
		if (x >= 0 && x <= INT32_MAX) {
			*code = (int)x;
			return 0;
		}
	} else if (json_is_string(c)) {
		for (int i = 0; i < 3; i++) {
			if (!strcmp(json_string_value(c), names[i])) {
				*code = i;
				return 0;
			}
		}
	}
	char p[PATH_LEN + 32];
	snprintf(p, sizeof(p), "%s.status.code", path);
	return pf_error_set(err, -EBADMSG, p, "must be 0, 1, 2 or a STATUS_CODE_* name");
}

static int json_span_read(const json_t *js, const struct res_info *res, const char *path,
			  struct out_spans *o, struct pf_error *err)
{
	char p[PATH_LEN + 32];
	if (!json_is_object(js))
		return pf_error_set(err, -EBADMSG, path, "must be an object");
	struct pf_span tmp = {0};
	int rc;
	if ((rc = json_hex_id(json_object_get(js, "traceId"), tmp.trace_id, 16, path, "traceId",
			      err)) < 0 ||
	    (rc = json_hex_id(json_object_get(js, "spanId"), tmp.span_id, 8, path, "spanId", err)) <
		0)
		return rc;
	static const char *const tkeys[2] = {"startTimeUnixNano", "endTimeUnixNano"};
	uint64_t *tv[2] = {&tmp.start_unix_ns, &tmp.end_unix_ns};
	for (int i = 0; i < 2; i++) {
		const json_t *t = json_object_get(js, tkeys[i]);
		if (t && json_u64(t, tv[i]) < 0) {
			snprintf(p, sizeof(p), "%s.%s", path, tkeys[i]);
			return pf_error_set(err, -EBADMSG, p,
					    "must be unix nanoseconds (a decimal string or an "
					    "unsigned integer)");
		}
	}
	if ((rc = json_status(json_object_get(js, "status"), &tmp.status, path, err)) < 0)
		return rc;
	const json_t *name = json_object_get(js, "name");
	if (json_is_string(name))
		copy_trunc(tmp.name, sizeof(tmp.name), json_string_value(name),
			   json_string_length(name), NULL);
	struct res_info r = *res;
	json_attrs(json_object_get(js, "attributes"), &r, false);
	tmp.pid = r.pid;
	tmp.tid = r.tid;
	memcpy(tmp.service_name, r.service, sizeof(tmp.service_name));
	tmp.service_name_long = r.service_long;
	if ((rc = span_check(&tmp, path, "traceId", "spanId", "endTimeUnixNano",
			     "startTimeUnixNano", err)) < 0)
		return rc;
	struct pf_span *s;
	if ((rc = spans_push(o, &s, err)) < 0)
		return rc;
	*s = tmp;
	return 0;
}

/* An optional array member: NULL (absent or null) is an empty list, another type an error. */
static int json_list(const json_t *obj, const char *key, const char *path, const json_t **out,
		     struct pf_error *err)
{
	const json_t *v = json_object_get(obj, key);
	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v)) {
		char p[PATH_LEN + 32];
		snprintf(p, sizeof(p), "%s%s%s", path, path[0] ? "." : "", key);
		return pf_error_set(err, -EBADMSG, p, "must be an array");
	}
	*out = v;
	return 0;
}

static int decode_json(const uint8_t *data, size_t len, struct out_spans *o, struct pf_error *err)
{
	json_error_t je;
	json_t *root = json_loadb((const char *)data, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return pf_error_set(err, -EBADMSG, "", "not valid JSON: %s (line %d, column %d)",
				    je.text, je.line, je.column);
	int rc = 0;
	const json_t *rss;
	if (!json_is_object(root)) {
		rc = pf_error_set(err, -EBADMSG, "",
				  "must be a JSON object (ExportTraceServiceRequest)");
		goto out;
	}
	if ((rc = json_list(root, "resourceSpans", "", &rss, err)) < 0 || !rss)
		goto out;
	size_t i;
	const json_t *rs;
	json_array_foreach(rss, i, rs)
	{
		char rpath[PATH_LEN];
		snprintf(rpath, sizeof(rpath), "resourceSpans[%zu]", i);
		if (!json_is_object(rs)) {
			rc = pf_error_set(err, -EBADMSG, rpath, "must be an object");
			goto out;
		}
		struct res_info res = {0};
		const json_t *resource = json_object_get(rs, "resource");
		if (json_is_object(resource))
			json_attrs(json_object_get(resource, "attributes"), &res, true);
		const json_t *sss;
		if ((rc = json_list(rs, "scopeSpans", rpath, &sss, err)) < 0)
			goto out;
		size_t j;
		const json_t *ss;
		json_array_foreach(sss, j, ss)
		{
			char spath[PATH_LEN];
			snprintf(spath, sizeof(spath), "resourceSpans[%zu].scopeSpans[%zu]", i, j);
			const json_t *spans;
			if (!json_is_object(ss)) {
				rc = pf_error_set(err, -EBADMSG, spath, "must be an object");
				goto out;
			}
			if ((rc = json_list(ss, "spans", spath, &spans, err)) < 0)
				goto out;
			size_t k;
			const json_t *js;
			json_array_foreach(spans, k, js)
			{
				char path[PATH_LEN];
				snprintf(path, sizeof(path),
					 "resourceSpans[%zu].scopeSpans[%zu].spans[%zu]", i, j, k);
				if ((rc = json_span_read(js, &res, path, o, err)) < 0)
					goto out;
			}
		}
	}
out:
	json_decref(root);
	return rc;
}

/* ---- entry points -------------------------------------------------------------------------- */

int pf_otlp_traces_decode(const uint8_t *body, size_t len, const struct pf_otlp_traces_opts *o,
			  struct pf_span **spans, size_t *n, struct pf_error *err)
{
	size_t max = o && o->max_bytes ? o->max_bytes : PF_OTLP_TRACES_MAX_BYTES_DEFAULT;
	struct out_spans out = {.max = o && o->max_spans ? o->max_spans
							 : PF_OTLP_TRACES_MAX_SPANS_DEFAULT};
	struct pf_buf plain;
	int rc;
	*spans = NULL;
	*n = 0;
	if (len > max)
		return pf_error_set(err, -E2BIG, "", "body of %zu bytes over the %zu byte limit",
				    len, max);
	pf_buf_init(&plain, max + 1);
	if (o && o->gzip) {
		rc = pf_gzip_decompress(body, len, max, &plain);
		if (rc == -E2BIG) {
			rc = pf_error_set(err, -E2BIG, "",
					  "gzip body inflates past the %zu byte limit", max);
			goto out;
		}
		if (rc < 0) {
			rc = pf_error_set(err, rc == -ENOMEM ? -ENOMEM : -EBADMSG, "",
					  "Content-Encoding gzip, but the body is not valid gzip");
			goto out;
		}
		body = plain.data;
		len = plain.len;
	}
	if (o && o->json)
		rc = decode_json(body ? body : (const uint8_t *)"", len, &out, err);
	else
		rc = decode_pb(body, len, max, &out, err);
out:
	pf_buf_release(&plain);
	if (rc < 0) {
		free(out.v);
		return rc;
	}
	if (out.n == 0) {
		free(out.v);
		out.v = NULL;
	}
	*spans = out.v;
	*n = out.n;
	return 0;
}

/* Appends root (consumed; NULL means out of memory) as compact JSON. */
static int append_json(struct pf_buf *out, json_t *root)
{
	char *text = root ? json_dumps(root, JSON_COMPACT) : NULL;
	json_decref(root);
	if (!text)
		return -ENOMEM;
	int rc = pf_buf_append_str(out, text);
	free(text);
	return rc;
}

int pf_otlp_traces_response(int64_t rejected, const char *message, bool json, struct pf_buf *out)
{
	bool partial = rejected > 0 || (message && message[0]);
	if (json) {
		if (!partial)
			return pf_buf_append_str(out, "{}");
		json_t *ps = json_pack("{s:s,s:s}", "rejectedSpans", "0", "errorMessage",
				       message ? message : "");
		json_t *root = ps ? json_pack("{s:o}", "partialSuccess", ps) : NULL;
		if (!root)
			return -ENOMEM;
		char num[24];
		snprintf(num, sizeof(num), "%" PRId64, rejected > 0 ? rejected : 0);
		json_object_set_new(ps, "rejectedSpans", json_string(num));
		return append_json(out, root);
	}
	pb_response resp =
	    OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_RESPONSE__INIT;
	pb_partial ps =
	    OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_PARTIAL_SUCCESS__INIT;
	if (partial) {
		ps.rejected_spans = rejected > 0 ? rejected : 0;
		ps.error_message = (char *)(message ? message : "");
		resp.partial_success = &ps;
	}
	return pb_pack_append(&resp.base, out);
}

int pf_otlp_status_encode(int32_t code, const char *message, bool json, struct pf_buf *out)
{
	const char *m = message ? message : "";
	if (json) {
		return append_json(out, json_pack("{s:i,s:s}", "code", (int)code, "message", m));
	}
	/* google.rpc.Status: 1 code (int32 varint), 2 message (string) */
	size_t start = out->len, mlen = strlen(m);
	int rc = 0;
	if (code)
		rc = pf_buf_putc(out, 0x08) ?: pf_buf_append_uvarint(out, (uint64_t)(int64_t)code);
	if (rc == 0 && mlen)
		rc = pf_buf_putc(out, 0x12) ?: pf_buf_append_uvarint(out, mlen)
					     ?: pf_buf_append(out, m, mlen);
	if (rc < 0) {
		out->len = start;
		if (out->data)
			out->data[start] = 0;
	}
	return rc;
}

/* A length-delimited field (wire type 2) of tag `field` around len bytes. */
static int put_bytes_field(struct pf_buf *b, unsigned field, const void *p, size_t len)
{
	return pf_buf_putc(b, (uint8_t)((field << 3) | 2)) ?: pf_buf_append_uvarint(b, len)
							  ?: pf_buf_append(b, p, len);
}

int pf_otlp_status_append_retry(struct pf_buf *out, int64_t delay_ms)
{
	if (delay_ms < 0 || delay_ms > 86400000)
		return -EINVAL;
	/* Status.details (3) = Any { type_url = 1, value = 2 }; RetryInfo { retry_delay = 1 };
	 * Duration { int64 seconds = 1, int32 nanos = 2 }. */
	struct pf_buf d, r, a;
	pf_buf_init(&d, 64);
	pf_buf_init(&r, 64);
	pf_buf_init(&a, 128);
	size_t start = out->len;
	int64_t s = delay_ms / 1000, ns = (delay_ms % 1000) * 1000000;
	int rc = 0;
	if (s)
		rc = pf_buf_putc(&d, 0x08) ?: pf_buf_append_uvarint(&d, (uint64_t)s);
	if (rc == 0 && ns)
		rc = pf_buf_putc(&d, 0x10) ?: pf_buf_append_uvarint(&d, (uint64_t)ns);
	rc = rc ?: put_bytes_field(&r, 1, pf_buf_str(&d), d.len);
	rc = rc ?: put_bytes_field(&a, 1, PF_OTLP_RETRY_INFO_TYPE, strlen(PF_OTLP_RETRY_INFO_TYPE))
		?: put_bytes_field(&a, 2, pf_buf_str(&r), r.len);
	rc = rc ?: put_bytes_field(out, 3, pf_buf_str(&a), a.len);
	pf_buf_release(&d);
	pf_buf_release(&r);
	pf_buf_release(&a);
	if (rc < 0) {
		out->len = start;
		if (out->data)
			out->data[start] = 0;
	}
	return rc;
}

/* ---- encoder (tests, seeds, benchmarks) ---------------------------------------------------- */

static json_t *json_kv_str(const char *k, const char *v)
{
	return json_pack("{s:s,s:{s:s}}", "key", k, "value", "stringValue", v);
}

static json_t *json_kv_int(const char *k, uint64_t v)
{
	char num[24];
	snprintf(num, sizeof(num), "%" PRIu64, v);
	return json_pack("{s:s,s:{s:s}}", "key", k, "value", "intValue", num);
}

static int encode_json(const struct pf_span *spans, size_t n, struct pf_buf *out)
{
	json_t *rss = json_array();
	json_t *root = json_pack("{s:o}", "resourceSpans", rss);
	if (!root)
		return -ENOMEM;
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		const struct pf_span *s = &spans[i];
		char tid[33], sid[17], t0[24], t1[24];
		pf_hex_encode(s->trace_id, 16, tid);
		pf_hex_encode(s->span_id, 8, sid);
		snprintf(t0, sizeof(t0), "%" PRIu64, s->start_unix_ns);
		snprintf(t1, sizeof(t1), "%" PRIu64, s->end_unix_ns);
		json_t *rattrs = json_array(), *sattrs = json_array();
		if (s->service_name[0])
			json_array_append_new(rattrs, json_kv_str("service.name", s->service_name));
		if (s->pid)
			json_array_append_new(rattrs, json_kv_int("process.pid", s->pid));
		if (s->tid)
			json_array_append_new(sattrs, json_kv_int("thread.id", s->tid));
		json_t *span =
		    json_pack("{s:s,s:s,s:s,s:s,s:s,s:o,s:{s:i}}", "traceId", tid, "spanId", sid,
			      "name", s->name, "startTimeUnixNano", t0, "endTimeUnixNano", t1,
			      "attributes", sattrs, "status", "code", s->status);
		json_t *rs = span ? json_pack("{s:{s:o},s:[{s:[o]}]}", "resource", "attributes",
					      rattrs, "scopeSpans", "spans", span)
				  : NULL;
		if (!rs || json_array_append_new(rss, rs) < 0)
			rc = -ENOMEM;
	}
	if (rc < 0) {
		json_decref(root);
		return rc;
	}
	return append_json(out, root);
}

typedef Opentelemetry__Proto__Trace__V1__ResourceSpans pb_rs;
typedef Opentelemetry__Proto__Trace__V1__ScopeSpans pb_ss;
typedef Opentelemetry__Proto__Resource__V1__Resource pb_res;
typedef Opentelemetry__Proto__Trace__V1__Status pb_status;

/* Per span: its ResourceSpans, Resource, ScopeSpans, Span, Status and up to three attributes. */
struct pb_enc_span {
	pb_rs rs;
	pb_rs *rs_p;
	pb_res res;
	pb_ss ss;
	pb_ss *ss_p;
	pb_span span;
	pb_span *span_p;
	pb_status st;
	pb_kv kv[3];
	pb_kv *rkv[2], *skv[1];
	pb_any av[3];
};

static void pb_kv_set(pb_kv *kv, pb_any *av, const char *k, const char *str, int64_t num)
{
	pb_kv kinit = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;
	pb_any ainit = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
	*kv = kinit;
	*av = ainit;
	kv->key = (char *)k;
	kv->value = av;
	if (str) {
		av->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
		av->string_value = (char *)str;
	} else {
		av->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
		av->int_value = num;
	}
}

static int encode_pb(const struct pf_span *spans, size_t n, struct pf_buf *out)
{
	pb_request req =
	    OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
	struct pb_enc_span *e = calloc(n ? n : 1, sizeof(*e));
	pb_rs **rsv = calloc(n ? n : 1, sizeof(*rsv));
	int rc = 0;
	if (!e || !rsv) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const struct pf_span *s = &spans[i];
		struct pb_enc_span *x = &e[i];
		pb_rs rsi = OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT;
		pb_res resi = OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
		pb_ss ssi = OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT;
		pb_span spi = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT;
		pb_status sti = OPENTELEMETRY__PROTO__TRACE__V1__STATUS__INIT;
		x->rs = rsi;
		x->res = resi;
		x->ss = ssi;
		x->span = spi;
		x->st = sti;
		size_t nr = 0;
		if (s->service_name[0]) {
			pb_kv_set(&x->kv[0], &x->av[0], "service.name", s->service_name, 0);
			x->rkv[nr++] = &x->kv[0];
		}
		if (s->pid) {
			pb_kv_set(&x->kv[1], &x->av[1], "process.pid", NULL, s->pid);
			x->rkv[nr++] = &x->kv[1];
		}
		x->res.n_attributes = nr;
		x->res.attributes = x->rkv;
		if (s->tid) {
			pb_kv_set(&x->kv[2], &x->av[2], "thread.id", NULL, s->tid);
			x->skv[0] = &x->kv[2];
			x->span.n_attributes = 1;
			x->span.attributes = x->skv;
		}
		x->span.trace_id.data = (uint8_t *)s->trace_id;
		x->span.trace_id.len = 16;
		x->span.span_id.data = (uint8_t *)s->span_id;
		x->span.span_id.len = 8;
		x->span.name = (char *)s->name;
		x->span.start_time_unix_nano = s->start_unix_ns;
		x->span.end_time_unix_nano = s->end_unix_ns;
		x->st.code = (Opentelemetry__Proto__Trace__V1__Status__StatusCode)s->status;
		x->span.status = &x->st;
		x->span_p = &x->span;
		x->ss.n_spans = 1;
		x->ss.spans = &x->span_p;
		x->ss_p = &x->ss;
		x->rs.resource = &x->res;
		x->rs.n_scope_spans = 1;
		x->rs.scope_spans = &x->ss_p;
		rsv[i] = &x->rs;
	}
	req.n_resource_spans = n;
	req.resource_spans = rsv;
	rc = pb_pack_append(&req.base, out);
out:
	free(e);
	free(rsv);
	return rc;
}

int pf_otlp_traces_encode(const struct pf_span *spans, size_t n, bool json, struct pf_buf *out)
{
	return json ? encode_json(spans, n, out) : encode_pb(spans, n, out);
}
