/* server_http.c — the server's HTTP side (see server_int.h): a request from its headers to
 * the last byte of its answer, and the routes it is dispatched to (OpAMP over plain HTTP, the
 * OTLP profiles receiver, the REST API, the console's files). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libwebsockets.h>

#include "api/api.h"
#include "api/api_profiles.h"
#include "metrics.h"
#include "opamp/credential.h"
#include "opamp/session.h"
#include "pf/gzip.h"
#include "pf/log.h"
#include "pf/uuid.h"
#include "profstore/profstore.h"
#include "profstore/query_pool.h"
#include "server_int.h"
#include "server_jobs.h"
#include "store.h"
#include "ui/static.h"

#define PROFILES_PATH "/v1development/profiles" /* OTLP/HTTP profiles receiver */
#define PYROSCOPE_PATH "/ingest"		/* Pyroscope's push API (api/api_ingest.h) */
#define HTTP_CHUNK 65536
#define RETRY_AFTER_QUERY_S "1" /* a pool's queue is full; a merged query takes ~0.3 s */
#define API_GZIP_MIN 1024	/* smaller JSON answers go as they are */

void pf_http_req_free(struct pf_server *s, struct http_req *r)
{
	if (!r)
		return;
	if (r->job) {
		/* The client went away while its job waits or runs: it completes and is
		 * dropped, never delivered here. */
		pf_log_debug("%s: connection closed before its answer; dropping it", r->path);
		pf_qpool_forget(r->job_pool, r->job);
	}
	if (r->fwd)
		pf_server_forward_drop(s, r);
	pf_buf_release(&r->body);
	free(r->resp);
	free(r);
}

void pf_http_req_set_response(struct http_req *r, int status, const char *ctype,
			      const uint8_t *body, size_t len)
{
	r->status = status;
	r->ctype = ctype;
	free(r->resp);
	r->resp = malloc(LWS_PRE + len + 1);
	r->resp_len = r->resp ? len : 0;
	r->resp_off = 0;
	if (r->resp && len)
		memcpy(r->resp + LWS_PRE, body, len);
	if (!r->resp)
		r->status = 500;
}

void pf_http_req_set_header(struct http_req *r, const char *name, const char *value)
{
	for (int i = 0; i < REQ_HEADERS; i++) {
		if (!r->hname[i][0]) {
			snprintf(r->hname[i], sizeof(r->hname[i]), "%s", name);
			snprintf(r->hval[i], sizeof(r->hval[i]), "%s", value);
			return;
		}
	}
}

void pf_http_req_error(struct http_req *r, int status, const char *code, const char *msg)
{
	struct pf_api_response resp;
	pf_api_response_init(&resp);
	pf_api_error(&resp, status, code, "%s", msg);
	pf_http_req_set_response(r, status, "application/json", resp.body.data, resp.body.len);
	pf_api_response_release(&resp);
}

/* lws keeps the URI under the token of the request's method. */
static const char *method_of(struct lws *wsi)
{
	static const struct {
		enum lws_token_indexes token;
		const char *name;
	} methods[] = {
	    {WSI_TOKEN_GET_URI, "GET"},		{WSI_TOKEN_POST_URI, "POST"},
	    {WSI_TOKEN_PUT_URI, "PUT"},		{WSI_TOKEN_DELETE_URI, "DELETE"},
	    {WSI_TOKEN_PATCH_URI, "PATCH"},	{WSI_TOKEN_OPTIONS_URI, "OPTIONS"},
	    {WSI_TOKEN_HEAD_URI, "HEAD"},
	};
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (lws_hdr_total_length(wsi, methods[i].token))
			return methods[i].name;
	return "OTHER";
}

static bool header_has(struct lws *wsi, enum lws_token_indexes t, const char *needle)
{
	char v[256];
	if (lws_hdr_copy(wsi, v, sizeof(v), t) <= 0)
		return false;
	return strcasestr(v, needle) != NULL;
}

void pf_server_upload_identity(struct pf_profstore_request *q, const uint8_t *bound,
			       char text[PF_UUID_STR_LEN + 1])
{
	q->check = pf_credential_check_upload;
	q->check_ud = (void *)bound;
	if (bound) {
		pf_uuid_format(bound, text);
		q->agent_uid = text;
	}
}

/* An agent token valid now; *who (may be NULL) receives it. */
bool pf_server_agent_token(struct pf_server *s, const char *auth, struct pf_api_caller *who)
{
	struct pf_api_caller c;
	if (pf_api_authenticate(s->store, auth, pf_server_now_ms(), &c) < 0 ||
	    c.role != PF_ROLE_AGENT)
		return false;
	if (who)
		*who = c;
	return true;
}

static bool agent_token_ok(struct pf_server *s, const char *auth)
{
	return pf_server_agent_token(s, auth, NULL);
}

static void dispatch_opamp_http(struct pf_server *s, struct http_req *r)
{
	if (strcmp(r->method, "POST") != 0) {
		pf_http_req_error(
		    r, 405, "method_not_allowed",
		    "OpAMP over plain HTTP takes POST; WebSocket clients send an Upgrade");
		pf_http_req_set_header(r, "allow:", "POST");
		return;
	}
	struct pf_api_caller who;
	if (!pf_server_agent_token(s, r->has_auth ? r->auth : NULL, &who)) {
		s->metrics->opamp_connections_rejected_auth++;
		pf_http_req_error(r, 401, "unauthenticated", "agent token missing or rejected");
		pf_http_req_set_header(r, "www-authenticate:", "Bearer realm=\"profleet\"");
		return;
	}
	if (r->bad_encoding) {
		pf_http_req_error(r, 415, "unsupported_encoding",
				  "Content-Encoding must be gzip or identity");
		return;
	}
	if (r->too_large) {
		s->metrics->opamp_oversize_rejected++;
		pf_http_req_error(r, 413, "too_large", "OpAMP message over the inbound size limit");
		r->close_after = true;
		return;
	}
	const uint8_t *data = r->body.data;
	size_t len = r->body.len;
	struct pf_buf plain;
	pf_buf_init(&plain, s->opt.max_message_bytes);
	if (r->body_gzip) {
		int z =
		    pf_gzip_decompress(r->body.data, r->body.len, s->opt.max_message_bytes, &plain);
		if (z == -E2BIG) {
			s->metrics->opamp_oversize_rejected++;
			pf_http_req_error(
			    r, 413, "too_large",
			    "OpAMP message over the inbound size limit after decompression");
			pf_buf_release(&plain);
			return;
		}
		if (z < 0) {
			pf_http_req_error(r, 400, "malformed", "body is not valid gzip");
			pf_buf_release(&plain);
			return;
		}
		data = plain.data;
		len = plain.len;
	}
	struct pf_opamp_session sess = {.http = true};
	pf_server_bind_credential(s, &sess, &who, r->auth, false);
	struct pf_opamp_result res;
	struct pf_buf out;
	pf_buf_init(&out, s->opt.max_message_bytes);
	int e = pf_opamp_session_handle(&s->opamp, &sess, data ? data : (const uint8_t *)"", len,
					pf_server_now_ms(), &out, &res);
	pf_buf_release(&plain);
	if (e < 0) {
		pf_http_req_error(r, 500, "internal", "could not encode the reply");
		pf_buf_release(&out);
		return;
	}
	if (r->accept_gzip) {
		struct pf_buf z;
		pf_buf_init(&z, s->opt.max_message_bytes + 1024);
		if (pf_gzip_compress(out.data, out.len, 6, &z) == 0) {
			pf_http_req_set_response(r, 200, "application/x-protobuf", z.data, z.len);
			pf_http_req_set_header(r, "content-encoding:", "gzip");
			pf_buf_release(&z);
			pf_buf_release(&out);
			return;
		}
		pf_buf_release(&z);
	}
	pf_http_req_set_response(r, 200, "application/x-protobuf", out.data, out.len);
	pf_buf_release(&out);
}

/* OTLP error answers carry a google.rpc.Status (OTLP/HTTP "Failures"). */
static void otlp_error(struct http_req *r, int status, int32_t rpc_code, const char *msg)
{
	struct pf_buf b;
	pf_buf_init(&b, 4096);
	pf_profstore_encode_status(rpc_code, msg, &b);
	pf_http_req_set_response(r, status, "application/x-protobuf", b.data, b.len);
	pf_buf_release(&b);
}

/* The API's extra header name in the lower case lws wants ("Allow:" -> "allow:"). */
void pf_http_header_lower(const char *name, char *out, size_t len)
{
	size_t i;
	for (i = 0; name[i] && i < len - 1; i++)
		out[i] = (char)(name[i] | 0x20);
	out[i] = 0;
}

/* A viewer (or higher) token: the request may take a pool slot. Anything else runs on the
 * loop, where pf_api_handle() answers 401 at once. */
static bool api_token_ok(struct pf_server *s, const char *auth)
{
	char role[16];
	const char *r = pf_api_token_role(s->store, auth, role, sizeof(role));
	return r && strcmp(r, "agent") != 0;
}

static void dispatch_profiles(struct pf_server *s, struct lws *wsi, struct http_req *r)
{
	if (strcmp(r->method, "POST") != 0) {
		otlp_error(r, 405, 12 /* UNIMPLEMENTED */, "the OTLP profiles receiver takes POST");
		pf_http_req_set_header(r, "allow:", "POST");
		return;
	}
	struct pf_api_caller who;
	if (!pf_server_agent_token(s, r->has_auth ? r->auth : NULL, &who)) {
		otlp_error(r, 401, 16 /* UNAUTHENTICATED */, "agent token missing or rejected");
		pf_http_req_set_header(r, "www-authenticate:", "Bearer realm=\"profleet\"");
		return;
	}
	r->cred_bound = who.agent_bound;
	memcpy(r->cred_uid, who.agent_uid, sizeof(r->cred_uid));
	if (r->bad_encoding) {
		otlp_error(r, 415, 3 /* INVALID_ARGUMENT */,
			   "Content-Encoding must be gzip or identity");
		return;
	}
	if (r->too_large) {
		char m[96];
		snprintf(m, sizeof(m), "request body over the %zu byte limit", r->limit);
		otlp_error(r, 413, 8 /* RESOURCE_EXHAUSTED */, m);
		r->close_after = true;
		return;
	}
	if (s->ingest) {
		int rc = pf_server_jobs_ingest(&s->jobs, s->ingest, wsi, r);
		if (rc == 0)
			return; /* pf_server_jobs_drain() answers */
		if (rc == -EAGAIN) {
			/* OTLP/HTTP: 503 is retryable; the exporter backs off. */
			otlp_error(r, 503, 14 /* UNAVAILABLE */, "receiver busy; retry later");
			pf_http_req_set_header(r, "retry-after:", RETRY_AFTER_QUERY_S);
			return;
		}
		/* out of memory for the job: store it here */
	}
	struct pf_profstore_request q = {
	    .body = r->body.data,
	    .len = r->body.len,
	    .gzip = r->body_gzip,
	    .content_type = r->ctype_in[0] ? r->ctype_in : NULL,
	    .max_bytes = s->opt.max_message_bytes,
	    .now_ms = pf_server_now_ms(),
	};
	char uid_text[PF_UUID_STR_LEN + 1];
	pf_server_upload_identity(&q, r->cred_bound ? r->cred_uid : NULL, uid_text);
	struct pf_profstore_result res;
	struct pf_buf out;
	pf_buf_init(&out, 1 << 20);
	if (pf_profstore_ingest(s->store, &q, &res, &out) < 0) {
		pf_buf_release(&out);
		pf_http_req_error(r, 500, "internal", "out of memory");
		return;
	}
	if (res.status != 200)
		pf_log_info("profiles: %d from a %zu byte request: %s", res.status, r->body.len,
			    res.message);
	pf_http_req_set_response(r, res.status, "application/x-protobuf", out.data, out.len);
	pf_buf_release(&out);
}

bool pf_http_api_gzip(bool accept_gzip, const struct pf_api_response *resp, struct pf_buf *z)
{
	pf_buf_init(z, resp->body.len + 1024);
	if (!accept_gzip || resp->body.len < API_GZIP_MIN || !resp->content_type ||
	    strcmp(resp->content_type, "application/json") != 0)
		return false;
	return pf_gzip_compress(resp->body.data, resp->body.len, 1, z) == 0;
}

void pf_http_req_set_gzip_headers(struct http_req *r)
{
	pf_http_req_set_header(r, "content-encoding:", "gzip");
	pf_http_req_set_header(r, "vary:", "Accept-Encoding");
}

/* The loop's answer resp, gzip'd when pf_http_api_gzip() says so. Returns whether it set the
 * response. */
static bool api_gzip(struct http_req *r, const struct pf_api_response *resp)
{
	struct pf_buf z;
	bool ok = pf_http_api_gzip(r->accept_gzip, resp, &z);
	if (ok) {
		pf_http_req_set_response(r, resp->status, resp->content_type, z.data, z.len);
		pf_http_req_set_gzip_headers(r);
	}
	pf_buf_release(&z);
	return ok;
}

static void set_api_header(struct http_req *r, const struct pf_api_response *resp)
{
	if (resp->extra_header_name[0]) {
		char lower[32];
		pf_http_header_lower(resp->extra_header_name, lower, sizeof(lower));
		pf_http_req_set_header(r, lower, resp->extra_header_value);
	}
}

void pf_http_req_set_api_response(struct http_req *r, const struct pf_api_response *resp)
{
	pf_http_req_set_response(r, resp->status, resp->content_type, resp->body.data,
				 resp->body.len);
	set_api_header(r, resp);
}

static void dispatch_api(struct pf_server *s, struct lws *wsi, struct http_req *r)
{
	struct pf_api_request q = {
	    .method = r->method,
	    .path = r->path,
	    .n_args = r->n_args,
	    .authorization = r->has_auth ? r->auth : NULL,
	    .peer = r->peer,
	    .body = r->body.data,
	    .body_len = r->body.len,
	    .now_ms = pf_server_now_ms(),
	    .content_type = r->ctype_in[0] ? r->ctype_in : NULL,
	    .body_gzip = r->body_gzip,
	    .max_body_bytes = s->opt.max_message_bytes,
	};
	memcpy(q.args, r->args, sizeof(q.args));
	struct pf_api_response resp;
	pf_api_response_init(&resp);
	if (r->too_large) {
		pf_api_error(&resp, 413, "too_large", "request body over %zu bytes", r->limit);
	} else if (r->bad_encoding) {
		pf_api_error(&resp, 415, "unsupported_encoding",
			     r->is_pyroscope ? "Content-Encoding must be gzip or identity"
					     : "API request bodies take no Content-Encoding");
	} else if (r->is_pyroscope && s->ingest && !strcmp(r->method, "POST")) {
		/* On the receiver's writer, like the OTLP receiver's requests. */
		int rc = pf_server_jobs_ingest_api(&s->jobs, s->ingest, wsi, r);
		if (rc == 0) {
			pf_api_response_release(&resp);
			return; /* pf_server_jobs_drain() answers */
		}
		if (rc == -EAGAIN) {
			pf_api_error(&resp, 503, "unavailable", "receiver busy; retry later");
			snprintf(resp.extra_header_name, sizeof(resp.extra_header_name),
				 "Retry-After:");
			snprintf(resp.extra_header_value, sizeof(resp.extra_header_value), "%s",
				 RETRY_AFTER_QUERY_S);
		} else {
			pf_api_handle(s->api, &q, &resp); /* out of memory: store it here */
		}
	} else if (s->pool && pf_api_profiles_offload(r->method, r->path) &&
		   api_token_ok(s, r->has_auth ? r->auth : NULL)) {
		int rc = pf_server_jobs_query(&s->jobs, s->pool, wsi, r);
		if (rc == 0) {
			pf_api_response_release(&resp);
			return; /* pf_server_jobs_drain() answers */
		}
		if (rc == -EAGAIN) {
			pf_api_error(&resp, 503, "unavailable",
				     "too many profile queries running; retry shortly");
			snprintf(resp.extra_header_name, sizeof(resp.extra_header_name),
				 "Retry-After:");
			snprintf(resp.extra_header_value, sizeof(resp.extra_header_value), "%s",
				 RETRY_AFTER_QUERY_S);
			if (s->metrics)
				pf_metrics_api_request(s->metrics, 503);
		} else {
			pf_api_handle(s->api, &q, &resp); /* out of memory: answer inline */
		}
	} else {
		pf_api_handle(s->api, &q, &resp);
		if (resp.forward_id[0] && pf_server_forward_park(s, wsi, r, resp.forward_id) == 0) {
			pf_api_response_release(&resp);
			return; /* server_forward.c answers */
		}
		if (resp.forward_id[0]) { /* too many parked: answered already */
			pf_api_response_release(&resp);
			return;
		}
	}
	if (!api_gzip(r, &resp))
		pf_http_req_set_api_response(r, &resp);
	else
		set_api_header(r, &resp);
	pf_api_response_release(&resp);
}

/* The console's static files (ui/static.h): answered from memory on the loop. */
static void dispatch_ui(struct pf_server *s, struct http_req *r)
{
	struct pf_ui_response out;
	pf_ui_handle(s->opt.ui, r->method, r->path, r->inm[0] ? r->inm : NULL, r->accept_gzip,
		     &out);
	pf_http_req_set_response(r, out.status, out.content_type, out.body, out.body_len);
	for (size_t i = 0; i < out.n_headers; i++)
		pf_http_req_set_header(r, out.headers[i].name, out.headers[i].value);
}

void pf_http_dispatch(struct pf_server *s, struct lws *wsi, struct http_req *r)
{
	if (r->dispatched)
		return;
	r->dispatched = true;
	if (r->is_opamp)
		dispatch_opamp_http(s, r);
	else if (r->is_profiles)
		dispatch_profiles(s, wsi, r);
	else if (r->is_ui)
		dispatch_ui(s, r);
	else
		dispatch_api(s, wsi, r);
	/* The answer is made (or the ingest job took the body): the body's bytes are not held
	 * for this request any longer. */
	pf_buf_release(&r->body);
	struct pf_conn *k = lws_get_opaque_user_data(wsi);
	if (k)
		pf_conn_body_end(&s->limits, k);
	if (r->job || r->fwd)
		return;
	/* An answer made on the loop is written now, not after a round of the loop; WRITEABLE
	 * then finishes it (the rest of a long body, the end of the transaction). */
	if (pf_http_write(wsi, r) < 0)
		lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
	else
		lws_callback_on_writable(wsi);
}

/* Answers a request at once (before its body) and closes the connection after. */
static void reject_early(struct lws *wsi, struct http_req *r, int status, const char *code,
			 const char *msg)
{
	pf_http_req_error(r, status, code, msg);
	r->dispatched = true;
	r->close_after = true;
	lws_callback_on_writable(wsi);
}

void pf_http_refuse_body(struct pf_server *s, struct lws *wsi, struct http_req *r, int status,
			 const char *msg)
{
	static const struct {
		int status;
		int32_t rpc; /* google.rpc.Code of the OTLP answer */
		const char *code;
	} kinds[] = {
	    {401, 16 /* UNAUTHENTICATED */, "unauthenticated"},
	    {408, 4 /* DEADLINE_EXCEEDED */, "request_timeout"},
	    {429, 8 /* RESOURCE_EXHAUSTED */, "too_many_requests"},
	    {503, 14 /* UNAVAILABLE */, "unavailable"},
	};
	size_t i = 0;
	while (i < sizeof(kinds) / sizeof(kinds[0]) - 1 && kinds[i].status != status)
		i++;
	if (r->is_profiles)
		otlp_error(r, status, kinds[i].rpc, msg);
	else
		pf_http_req_error(r, status, kinds[i].code, msg);
	if (status == 401)
		pf_http_req_set_header(r, "www-authenticate:", "Bearer realm=\"profleet\"");
	if (status == 429 || status == 503)
		pf_http_req_set_header(r, "retry-after:", RETRY_AFTER_QUERY_S);
	r->dispatched = true;
	r->close_after = true;
	pf_buf_release(&r->body);
	struct pf_conn *k = lws_get_opaque_user_data(wsi);
	if (k)
		pf_conn_body_end(&s->limits, k);
	if (pf_http_write(wsi, r) < 0)
		lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
	else
		lws_callback_on_writable(wsi);
}

/* At the end of the headers of a request with a body: may its body be read? The OpAMP and
 * OTLP routes take an agent token, every other body an API token of any role (each API route
 * then checks its role). */
static bool body_caller_ok(struct pf_server *s, const struct http_req *r)
{
	const char *auth = r->has_auth ? r->auth : NULL;
	if (r->is_opamp || r->is_profiles || r->is_pyroscope)
		return agent_token_ok(s, auth);
	/* A store that cannot answer (-EAGAIN) is no verdict on the token: the API answers
	 * 503 store_unavailable with Retry-After once the (budgeted) body is in. */
	struct pf_api_caller who;
	int rc = pf_api_authenticate(s->store, auth, pf_server_now_ms(), &who);
	return rc == 0 || rc == -EAGAIN;
}

/* Pyroscope SDKs configured for basic auth (basicAuthUser / basicAuthPassword) send
 * "Basic base64(user:password)" (RFC 7617): the password is the token, read as "Bearer
 * <password>"; the user name is not used. Anything else is left as it is. */
static void basic_as_bearer(char *auth, size_t cap)
{
	if (strncasecmp(auth, "Basic ", 6) != 0)
		return;
	char plain[768];
	int n = lws_b64_decode_string(auth + 6, plain, (int)sizeof(plain) - 1);
	if (n <= 0)
		return;
	plain[n] = 0;
	const char *colon = memchr(plain, ':', (size_t)n);
	if (colon && strlen(colon + 1) == (size_t)(plain + n - colon - 1))
		snprintf(auth, cap, "Bearer %s", colon + 1);
}

int pf_http_begin(struct pf_server *s, struct lws *wsi, struct pss *pss, const char *uri,
		  size_t uri_len)
{
	struct http_req *r = calloc(1, sizeof(*r));
	if (!r)
		return -1;
	pf_http_req_free(s, pss->req);
	pss->req = r;
	snprintf(r->method, sizeof(r->method), "%s", method_of(wsi));
	snprintf(r->path, sizeof(r->path), "%s", uri ? uri : "/");
	char version[16];
	/* an HTTP/2 stream (TLS with ALPN h2) has pseudo-headers and no request-line version */
	bool h2 = lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_COLON_METHOD) > 0;
	if (!h2 && (lws_hdr_copy(wsi, version, sizeof(version), WSI_TOKEN_HTTP) <= 0 ||
		    (strcmp(version, "HTTP/1.1") != 0 && strcmp(version, "HTTP/1.0") != 0))) {
		/* HTTP/0.9 (a request line without a version) or an unknown version */
		reject_early(wsi, r, 505, "http_version_not_supported",
			     "this server speaks HTTP/1.0, HTTP/1.1 and HTTP/2");
		return 0;
	}
	if (uri && uri_len >= sizeof(r->path)) {
		/* kept whole or not at all: a cut path could name another route */
		reject_early(wsi, r, 414, "uri_too_long", "the path is longer than 511 bytes");
		return 0;
	}
	if (uri && strnlen(uri, uri_len) != uri_len) {
		/* lws decoded a %00: the path would end early and name another route */
		reject_early(wsi, r, 400, "invalid_path", "the path holds a NUL byte (%00)");
		return 0;
	}
	r->is_opamp = strcmp(r->path, OPAMP_PATH) == 0;
	r->is_profiles = strcmp(r->path, PROFILES_PATH) == 0;
	r->is_pyroscope = strcmp(r->path, PYROSCOPE_PATH) == 0;
	r->is_ui = pf_ui_match(r->path);
	if (r->is_ui && lws_hdr_copy(wsi, r->inm, sizeof(r->inm), WSI_TOKEN_HTTP_IF_NONE_MATCH) < 0)
		r->inm[0] = 0;
	r->limit = r->is_opamp || r->is_profiles || r->is_pyroscope ? s->opt.max_message_bytes
								    : PF_API_MAX_BODY;
	if ((r->is_profiles || r->is_pyroscope) &&
	    lws_hdr_copy(wsi, r->ctype_in, sizeof(r->ctype_in), WSI_TOKEN_HTTP_CONTENT_TYPE) < 0)
		r->ctype_in[0] = 0;
	pf_buf_init(&r->body, r->limit);

	if (r->is_pyroscope &&
	    lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_URI_ARGS) + PF_API_MAX_ARGS >=
		(int)sizeof(r->args_store)) {
		/* kept whole or not at all: a query cut short would lose its name */
		reject_early(wsi, r, 414, "uri_too_long", "the query is longer than 2031 bytes");
		return 0;
	}
	size_t off = 0;
	for (int i = 0; i < PF_API_MAX_ARGS; i++) {
		if (off >= sizeof(r->args_store) - 1)
			break;
		int n = lws_hdr_copy_fragment(wsi, r->args_store + off,
					      (int)(sizeof(r->args_store) - off),
					      WSI_TOKEN_HTTP_URI_ARGS, i);
		if (n <= 0)
			break;
		r->args[r->n_args++] = r->args_store + off;
		off += (size_t)n + 1;
	}
	if (lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_AUTHORIZATION) >= (int)sizeof(r->auth)) {
		reject_early(wsi, r, 401, "unauthenticated", PF_SERVER_AUTH_TOO_LONG);
		pf_http_req_set_header(r, "www-authenticate:", "Bearer realm=\"profleet\"");
		return 0;
	}
	r->has_auth = lws_hdr_copy(wsi, r->auth, sizeof(r->auth), WSI_TOKEN_HTTP_AUTHORIZATION) > 0;
	if (r->has_auth && r->is_pyroscope)
		basic_as_bearer(r->auth, sizeof(r->auth));
	char enc[64];
	int el = lws_hdr_copy(wsi, enc, sizeof(enc), WSI_TOKEN_HTTP_CONTENT_ENCODING);
	if (el != 0) {
		bool gz = el > 0 && !strcasecmp(enc, "gzip");
		r->body_gzip = gz && (r->is_opamp || r->is_profiles || r->is_pyroscope);
		r->bad_encoding = !r->body_gzip && !(el > 0 && !strcasecmp(enc, "identity"));
	}
	lws_get_peer_simple(wsi, r->peer, sizeof(r->peer));
	r->accept_gzip = header_has(wsi, WSI_TOKEN_HTTP_ACCEPT_ENCODING, "gzip");

	bool has_body =
	    !strcmp(r->method, "POST") || !strcmp(r->method, "PUT") || !strcmp(r->method, "PATCH");
	if (!has_body) {
		pf_http_dispatch(s, wsi, r);
		return 0;
	}
	if (!body_caller_ok(s, r)) {
		/* Before a byte of the body is read: an unauthenticated body costs nothing. */
		if (r->is_opamp)
			s->metrics->opamp_connections_rejected_auth++;
		pf_http_refuse_body(s, wsi, r, 401,
				    r->is_opamp || r->is_profiles || r->is_pyroscope
					? "agent token missing or rejected"
					: "token missing or rejected");
		return 0;
	}
	char cl[32];
	if (lws_hdr_copy(wsi, cl, sizeof(cl), WSI_TOKEN_HTTP_CONTENT_LENGTH) <= 0) {
		reject_early(wsi, r, 411, "length_required", "a request body needs Content-Length");
		return 0;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(cl, &end, 10);
	if (errno || *end || cl[0] < '0' || cl[0] > '9') {
		reject_early(wsi, r, 400, "malformed", "bad Content-Length");
		return 0;
	}
	if (v > r->limit) {
		/* Answer at once without reading the body, then close (OpAMP: 413). */
		r->too_large = true;
		r->close_after = true;
		pf_http_dispatch(s, wsi, r);
		return 0;
	}
	if (v == 0) {
		pf_http_dispatch(s, wsi, r);
		return 0;
	}
	struct pf_conn *k = lws_get_opaque_user_data(wsi);
	int rc = k ? pf_conn_body_begin(&s->limits, k, (size_t)v, pf_server_now_ms()) : 0;
	if (rc < 0) {
		s->metrics->http_body_rejected++;
		pf_http_refuse_body(s, wsi, r, rc == -EUSERS ? 429 : 503,
				    rc == -EUSERS ? "too many request body bytes in flight from "
						    "this address; retry later"
						  : "too many request body bytes in flight; retry "
						    "later");
		return 0;
	}
	/* The body is its Content-Length, reserved above: one allocation of that size. */
	r->body.max = (size_t)v;
	if (pf_buf_reserve(&r->body, (size_t)v) < 0)
		r->too_large = true;
	return 0;
}

/* Writes what the answer still owes: the headers and, when the socket took them whole, the
 * body (chunks of HTTP_CHUNK; the rest from WRITEABLE). Returns 1 once the answer is written
 * (the transaction is done), 0 to be called again from WRITEABLE, -1 to close. */
int pf_http_write(struct lws *wsi, struct http_req *r)
{
	if (!r || !r->dispatched || !r->resp)
		return 0;
	if (r->body_done)
		return 1;
	if (!r->headers_sent) {
		uint8_t buf[LWS_PRE + 1024];
		uint8_t *start = buf + LWS_PRE, *p = start, *end = buf + sizeof(buf) - 1;
		if (lws_add_http_common_headers(wsi, (unsigned int)r->status, r->ctype,
						(lws_filepos_t)r->resp_len, &p, end))
			return -1;
		for (int i = 0; i < REQ_HEADERS; i++)
			if (r->hname[i][0] &&
			    lws_add_http_header_by_name(wsi, (const unsigned char *)r->hname[i],
							(const unsigned char *)r->hval[i],
							(int)strlen(r->hval[i]), &p, end))
				return -1;
		if (r->close_after &&
		    lws_add_http_header_by_name(wsi, (const unsigned char *)"connection:",
						(const unsigned char *)"close", 5, &p, end))
			return -1;
		if (lws_finalize_write_http_header(wsi, start, &p, end))
			return -1;
		r->headers_sent = true;
		if (lws_partial_buffered(wsi)) {
			lws_callback_on_writable(wsi);
			return 0;
		}
		/* The socket took the headers: the body follows in the same turn (one round of
		 * the loop less: under a fleet's load every round waits behind thousands of
		 * ready agent sockets). */
	}
	size_t left = r->resp_len - r->resp_off;
	size_t n = left > HTTP_CHUNK ? HTTP_CHUNK : left;
	bool last = n == left;
	if (lws_write(wsi, r->resp + LWS_PRE + r->resp_off, n,
		      last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) < 0)
		return -1;
	r->resp_off += n;
	if (!last) {
		lws_callback_on_writable(wsi);
		return 0;
	}
	r->body_done = true;
	return 1; /* transaction done */
}
