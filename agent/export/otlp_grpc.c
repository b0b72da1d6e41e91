/* otlp_grpc.c — see otlp_grpc.h. gRPC core's C client API (grpc.h, grpc_security.h). */
#include "export/otlp_grpc.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/time.h>

#include "pb_util.h"
#include "pf/compiler.h"

#define METHOD "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
#define MAX_PEM (1 << 20)
#define MAX_RESPONSE (64 * 1024)
#define RETRY_INFO_TYPE "type.googleapis.com/google.rpc.RetryInfo"

struct agent_otlp_grpc {
	grpc_channel *ch;
	grpc_completion_queue *cq;
	grpc_metadata *md;
	size_t n_md;
	uint32_t timeout_s;
	char url[600];
};

static int read_pem(const char *path, const char *key, char **out, struct pf_error *err)
{
	FILE *f = fopen(path, "rb");
	char *b = malloc(MAX_PEM + 1);
	size_t n = f && b ? fread(b, 1, MAX_PEM, f) : 0;
	int e = errno;
	bool ok = f && b && n > 0 && n < MAX_PEM && !ferror(f);
	if (f)
		fclose(f);
	if (!ok) {
		free(b);
		return pf_error_set(err, -EINVAL, key, "cannot load %s: %s", path,
				    !f ? strerror(e) : "empty, unreadable or over 1 MiB");
	}
	b[n] = 0;
	*out = b;
	return 0;
}

/* "http(s)://HOST[:PORT]" into host:port (brackets kept for IPv6) and TLS or not. */
static int parse_endpoint(const char *u, char *target, size_t cap, bool *tls, struct pf_error *err)
{
	*tls = u && strncasecmp(u, "https://", 8) == 0;
	if (!u || (!*tls && strncasecmp(u, "http://", 7) != 0))
		return pf_error_set(err, -EINVAL, "endpoint",
				    "must be http://HOST[:PORT] or https://HOST[:PORT]");
	const char *h = u + (*tls ? 8 : 7);
	size_t n = strcspn(h, "/?#");
	if (h[n] && strcmp(h + n, "/") != 0)
		return pf_error_set(err, -EINVAL, "endpoint",
				    "an otlp_grpc endpoint has no path (the method is fixed)");
	if (!n || n >= cap - 8)
		return pf_error_set(err, -EINVAL, "endpoint", "no host, or a host too long");
	const char *rb = h[0] == '[' ? memchr(h, ']', n) : NULL;
	if (h[0] == '[' && !rb)
		return pf_error_set(err, -EINVAL, "endpoint", "an IPv6 address without ']'");
	const char *colon = memchr(rb ? rb : h, ':', n - (size_t)((rb ? rb : h) - h));
	if (colon)
		snprintf(target, cap, "%.*s", (int)n, h);
	else
		snprintf(target, cap, "%.*s:%d", (int)n, h, AGENT_OTLP_GRPC_DEFAULT_PORT);
	return 0;
}

static grpc_channel_credentials *channel_creds(const struct pf_exporter *cfg, bool tls,
					       struct pf_error *err)
{
	if (!tls)
		return grpc_insecure_credentials_create();
	if (cfg->tls.insecure_skip_verify) {
		pf_error_set(err, -EINVAL, "tls.insecure_skip_verify",
			     "not supported by otlp_grpc (trust the server's CA with tls.ca_file)");
		return NULL;
	}
	char *ca = NULL, *cert = NULL, *key = NULL;
	grpc_channel_credentials *c = NULL;
	if (cfg->tls.ca_file && read_pem(cfg->tls.ca_file, "tls.ca_file", &ca, err) < 0)
		goto out;
	if (cfg->tls.cert_file && read_pem(cfg->tls.cert_file, "tls.cert_file", &cert, err) < 0)
		goto out;
	if (cfg->tls.key_file && read_pem(cfg->tls.key_file, "tls.key_file", &key, err) < 0)
		goto out;
	grpc_ssl_pem_key_cert_pair pair = {.private_key = key, .cert_chain = cert};
	c = grpc_ssl_credentials_create(ca, cert && key ? &pair : NULL, NULL, NULL);
	if (!c)
		pf_error_set(err, -EINVAL, "tls", "the TLS files are not usable");
out:
	free(ca);
	free(cert);
	free(key);
	return c;
}

static void md_free(struct agent_otlp_grpc *g)
{
	for (size_t i = 0; i < g->n_md; i++) {
		grpc_slice_unref(g->md[i].key);
		grpc_slice_unref(g->md[i].value);
	}
	free(g->md);
	g->md = NULL;
	g->n_md = 0;
}

/* The configured headers as metadata: names in lower case, values as they are. */
static int metadata(struct agent_otlp_grpc *g, const struct pf_exporter *cfg, struct pf_error *err)
{
	g->md = calloc(cfg->n_headers ? cfg->n_headers : 1, sizeof(*g->md));
	if (!g->md)
		return -ENOMEM;
	for (size_t i = 0; i < cfg->n_headers; i++) {
		char name[256];
		size_t n = strlen(cfg->headers[i].key);
		if (!n || n >= sizeof(name))
			return pf_error_set(err, -EINVAL, "headers",
					    "a header name of 1..255 bytes");
		for (size_t k = 0; k <= n; k++)
			name[k] = (char)tolower((unsigned char)cfg->headers[i].key[k]);
		grpc_slice key = grpc_slice_from_copied_string(name);
		grpc_slice val = grpc_slice_from_copied_string(cfg->headers[i].value);
		if (!grpc_header_key_is_legal(key) || !grpc_header_nonbin_value_is_legal(val)) {
			grpc_slice_unref(key);
			grpc_slice_unref(val);
			return pf_error_set(err, -EINVAL, "headers",
					    "'%s' is not a valid gRPC metadata entry", name);
		}
		g->md[g->n_md].key = key;
		g->md[g->n_md++].value = val;
	}
	return 0;
}

struct agent_otlp_grpc *agent_otlp_grpc_new(const struct pf_exporter *cfg, struct pf_error *err)
{
	struct agent_otlp_grpc *g = calloc(1, sizeof(*g));
	char target[300];
	bool tls = false;
	if (!g) {
		errno = ENOMEM;
		return NULL;
	}
	grpc_init();
	g->timeout_s = cfg->timeout_seconds ? cfg->timeout_seconds : 10;
	int rc = parse_endpoint(cfg->endpoint, target, sizeof(target), &tls, err);
	if (rc == 0)
		rc = metadata(g, cfg, err);
	grpc_channel_credentials *cr = rc == 0 ? channel_creds(cfg, tls, err) : NULL;
	if (!cr) {
		agent_otlp_grpc_free(g);
		errno = EINVAL;
		return NULL;
	}
	snprintf(g->url, sizeof(g->url), "%s://%s", tls ? "grpcs" : "grpc", target);
	grpc_arg args[4];
	size_t na = 0;
	args[na++] = (grpc_arg){.type = GRPC_ARG_INTEGER,
				.key = GRPC_ARG_ENABLE_RETRIES,
				.value.integer = 0}; /* the exporter retries */
	args[na++] = (grpc_arg){.type = GRPC_ARG_INTEGER,
				.key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
				.value.integer = 1 << 20};
	args[na++] = (grpc_arg){.type = GRPC_ARG_INTEGER,
				.key = GRPC_COMPRESSION_CHANNEL_DEFAULT_ALGORITHM,
				.value.integer = cfg->compression == PF_COMPRESSION_GZIP
						     ? GRPC_COMPRESS_GZIP
						     : GRPC_COMPRESS_NONE};
	if (tls && cfg->tls.server_name)
		args[na++] = (grpc_arg){.type = GRPC_ARG_STRING,
					.key = GRPC_SSL_TARGET_NAME_OVERRIDE_ARG,
					.value.string = cfg->tls.server_name};
	grpc_channel_args ca = {.num_args = na, .args = args};
	g->ch = grpc_channel_create(target, cr, &ca);
	grpc_channel_credentials_release(cr);
	g->cq = grpc_completion_queue_create_for_pluck(NULL);
	return g;
}

void agent_otlp_grpc_free(struct agent_otlp_grpc *g)
{
	if (!g)
		return;
	if (g->ch)
		grpc_channel_destroy(g->ch);
	if (g->cq) {
		grpc_completion_queue_shutdown(g->cq);
		/* a pluck queue with nothing in flight: shut down at once */
		grpc_completion_queue_pluck(g->cq, NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
		grpc_completion_queue_destroy(g->cq);
	}
	md_free(g);
	free(g);
	grpc_shutdown();
}

const char *agent_otlp_grpc_url(const struct agent_otlp_grpc *g)
{
	return g->url;
}

bool agent_otlp_grpc_retryable(int code, bool has_retry_info)
{
	switch (code) {
	case GRPC_STATUS_CANCELLED:
	case GRPC_STATUS_DEADLINE_EXCEEDED:
	case GRPC_STATUS_ABORTED:
	case GRPC_STATUS_OUT_OF_RANGE:
	case GRPC_STATUS_UNAVAILABLE:
	case GRPC_STATUS_DATA_LOSS:
		return true;
	case GRPC_STATUS_RESOURCE_EXHAUSTED:
		return has_retry_info;
	default:
		return false;
	}
}

/* The length-delimited field num of msg[0, len) (the last one), or NULL. */
static const uint8_t *field_bytes(const uint8_t *p, const uint8_t *end, uint32_t num, size_t *n)
{
	const uint8_t *found = NULL;
	while (p < end) {
		uint64_t key, v;
		if (pb_varint_read(&p, end, &key) < 0 || (key >> 3) == 0)
			return NULL;
		if ((key >> 3) == num && (key & 7) == 2) {
			if (pb_varint_read(&p, end, &v) < 0 || v > (uint64_t)(end - p))
				return NULL;
			found = p;
			*n = (size_t)v;
			p += v;
		} else if (pb_field_skip(&p, end, (unsigned)(key & 7)) < 0) {
			return NULL;
		}
	}
	return found;
}

/* The varint field num of msg (the last one), or def. */
static uint64_t field_varint(const uint8_t *p, const uint8_t *end, uint32_t num, uint64_t def)
{
	while (p < end) {
		uint64_t key, v;
		if (pb_varint_read(&p, end, &key) < 0 || (key >> 3) == 0)
			return def;
		if ((key >> 3) == num && (key & 7) == 0) {
			if (pb_varint_read(&p, end, &v) < 0)
				return def;
			def = v;
		} else if (pb_field_skip(&p, end, (unsigned)(key & 7)) < 0) {
			return def;
		}
	}
	return def;
}

int64_t agent_otlp_grpc_retry_delay(const uint8_t *status, size_t len)
{
	/* google.rpc.Status { repeated Any details = 3 }, Any { type_url = 1, value = 2 },
	 * RetryInfo { Duration retry_delay = 1 }, Duration { int64 seconds = 1, int32 nanos = 2 }
	 */
	const uint8_t *p = status, *end = status + len;
	while (p < end) {
		uint64_t key, v;
		if (pb_varint_read(&p, end, &key) < 0 || (key >> 3) == 0)
			return -1;
		if (key != ((3 << 3) | 2)) {
			if (pb_field_skip(&p, end, (unsigned)(key & 7)) < 0)
				return -1;
			continue;
		}
		if (pb_varint_read(&p, end, &v) < 0 || v > (uint64_t)(end - p))
			return -1;
		const uint8_t *any = p, *any_end = p + v;
		p = any_end;
		size_t tn = 0, vn = 0, dn = 0;
		const uint8_t *t = field_bytes(any, any_end, 1, &tn);
		if (!t || tn != strlen(RETRY_INFO_TYPE) || memcmp(t, RETRY_INFO_TYPE, tn) != 0)
			continue;
		const uint8_t *ri = field_bytes(any, any_end, 2, &vn);
		const uint8_t *d = ri ? field_bytes(ri, ri + vn, 1, &dn) : NULL;
		if (!d)
			return 0; /* a RetryInfo without a delay: retry at the backoff's pace */
		uint64_t s = field_varint(d, d + dn, 1, 0), ns = field_varint(d, d + dn, 2, 0);
		if (s > 86400 || ns >= 1000000000u)
			return 86400 * 1000;
		return (int64_t)(s * 1000 + ns / 1000000u);
	}
	return -1;
}

static void read_response(grpc_byte_buffer *bb, struct pf_buf *out)
{
	grpc_byte_buffer_reader rd;
	if (!bb || !grpc_byte_buffer_reader_init(&rd, bb))
		return;
	grpc_slice s = grpc_byte_buffer_reader_readall(&rd);
	grpc_byte_buffer_reader_destroy(&rd);
	if (GRPC_SLICE_LENGTH(s) <= MAX_RESPONSE)
		pf_buf_append(out, GRPC_SLICE_START_PTR(s), GRPC_SLICE_LENGTH(s));
	grpc_slice_unref(s);
}

int agent_otlp_grpc_export(struct agent_otlp_grpc *g, const uint8_t *body, size_t len,
			   struct agent_otlp_grpc_result *res, struct pf_error *err)
{
	res->code = -1;
	res->retry_delay_ms = -1;
	pf_buf_init(&res->response, MAX_RESPONSE);
	gpr_timespec dl = gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
				       gpr_time_from_seconds(g->timeout_s, GPR_TIMESPAN));
	grpc_slice method = grpc_slice_from_static_string(METHOD);
	grpc_call *call = grpc_channel_create_call(g->ch, NULL, GRPC_PROPAGATE_DEFAULTS, g->cq,
						   method, NULL, dl, NULL);
	if (!call)
		return pf_error_set(err, -ENOMEM, NULL, "cannot create a gRPC call");
	grpc_slice req = grpc_slice_from_copied_buffer((const char *)body, len);
	grpc_byte_buffer *out = grpc_raw_byte_buffer_create(&req, 1);
	grpc_slice_unref(req);
	grpc_byte_buffer *in = NULL;
	grpc_metadata_array initial, trailing;
	grpc_metadata_array_init(&initial);
	grpc_metadata_array_init(&trailing);
	grpc_status_code code = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice();
	grpc_op ops[6];
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[0].data.send_initial_metadata.count = g->n_md;
	ops[0].data.send_initial_metadata.metadata = g->md;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = out;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &in;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &trailing;
	ops[5].data.recv_status_on_client.status = &code;
	ops[5].data.recv_status_on_client.status_details = &details;
	int rc = 0;
	if (grpc_call_start_batch(call, ops, 6, (void *)1, NULL) != GRPC_CALL_OK) {
		rc = pf_error_set(err, -EIO, NULL, "cannot start the gRPC call");
	} else {
		grpc_completion_queue_pluck(g->cq, (void *)1, gpr_inf_future(GPR_CLOCK_REALTIME),
					    NULL);
		res->code = (int)code;
		for (size_t i = 0; i < trailing.count; i++)
			if (grpc_slice_str_cmp(trailing.metadata[i].key,
					       "grpc-status-details-bin") == 0)
				res->retry_delay_ms = agent_otlp_grpc_retry_delay(
				    GRPC_SLICE_START_PTR(trailing.metadata[i].value),
				    GRPC_SLICE_LENGTH(trailing.metadata[i].value));
		if (code == GRPC_STATUS_OK) {
			read_response(in, &res->response);
		} else {
			rc = pf_error_set(err, -EPROTO, NULL, "%s: gRPC status %d: %.*s", g->url,
					  (int)code, (int)pf_min(GRPC_SLICE_LENGTH(details), 400u),
					  (const char *)GRPC_SLICE_START_PTR(details));
		}
	}
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&initial);
	grpc_metadata_array_destroy(&trailing);
	if (in)
		grpc_byte_buffer_destroy(in);
	grpc_byte_buffer_destroy(out);
	grpc_call_unref(call);
	return rc;
}
