/* otlp_grpc.c — see otlp_grpc.h. gRPC core's C API: grpc.h, byte_buffer.h. */
#include "receivers/otlp_grpc.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>

#include "api/api.h"
#include "otlp_traces.h"
#include "opamp/credential.h"
#include "pf/log.h"
#include "pf/uuid.h"
#include "profstore/profstore.h"
#include "store.h"

/* Completion tags: what a thread waits for on its own queue. */
#define TAG_NEW ((void *)1)
#define TAG_RECV ((void *)2)
#define TAG_DONE ((void *)3)
#define TAG_SHUTDOWN ((void *)4)

#define MAX_AUTH 1024
#define MAX_PEM (1 << 20)

struct worker {
	struct pf_otlp_grpc *g;
	grpc_completion_queue *cq;
	struct pf_store *st;
	pthread_t thread;
	bool started;
};

struct pf_otlp_grpc {
	grpc_server *server;
	int port;
	size_t max_bytes;
	bool serving; /* grpc_server_start() was called */
	atomic_bool stopping;
	unsigned n_workers;
	struct worker workers[];
};

/* gRPC's own log lines through ours. */
static void grpc_log(gpr_log_func_args *a)
{
	if (a->severity == GPR_LOG_SEVERITY_ERROR)
		pf_log_warn("grpc: %s", a->message);
	else
		pf_log_debug("grpc: %s", a->message);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for tag on w's queue (the only one in flight there). false when the queue shut down
 * or the deadline passed (then the call is cancelled and its batch still awaited). */
static bool wait_tag(struct worker *w, grpc_call *call, void *tag, int timeout_s, bool *ok)
{
	gpr_timespec dl = timeout_s > 0
			      ? gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
					     gpr_time_from_seconds(timeout_s, GPR_TIMESPAN))
			      : gpr_inf_future(GPR_CLOCK_MONOTONIC);
	for (;;) {
		grpc_event ev = grpc_completion_queue_next(w->cq, dl, NULL);
		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			return false;
		if (ev.type == GRPC_QUEUE_TIMEOUT) {
			grpc_call_cancel_with_status(call, GRPC_STATUS_DEADLINE_EXCEEDED,
						     "the request message did not arrive in time",
						     NULL);
			dl = gpr_inf_future(GPR_CLOCK_MONOTONIC);
			continue;
		}
		if (ev.tag == tag) {
			*ok = ev.success != 0;
			return true;
		}
	}
}

static grpc_status_code rpc_code(int http)
{
	switch (http) {
	case 200:
		return GRPC_STATUS_OK;
	case 400:
	case 415:
		return GRPC_STATUS_INVALID_ARGUMENT;
	case 401:
		return GRPC_STATUS_UNAUTHENTICATED;
	case 403:
		return GRPC_STATUS_PERMISSION_DENIED;
	case 413:
		return GRPC_STATUS_RESOURCE_EXHAUSTED;
	case 503:
		return GRPC_STATUS_UNAVAILABLE;
	default:
		return GRPC_STATUS_INTERNAL;
	}
}

/* The value of metadata key (lower case) into out, "" when absent or too long. */
static void md_get(const grpc_metadata_array *md, const char *key, char *out, size_t cap)
{
	out[0] = 0;
	for (size_t i = 0; i < md->count; i++) {
		if (grpc_slice_str_cmp(md->metadata[i].key, key) != 0)
			continue;
		size_t n = GRPC_SLICE_LENGTH(md->metadata[i].value);
		if (n < cap) {
			memcpy(out, GRPC_SLICE_START_PTR(md->metadata[i].value), n);
			out[n] = 0;
		}
		return;
	}
}

struct answer {
	grpc_status_code code;
	char msg[512];
	int64_t retry_ms; /* > 0: a RetryInfo with this delay in the status details */
	struct pf_buf body; /* the response message (code OK) */
};

/* Authenticates and stores one request message: the HTTP receiver's rules. */
static void handle_export(struct worker *w, const grpc_metadata_array *md, const uint8_t *data,
			  size_t len, struct answer *a)
{
	char auth[MAX_AUTH];
	struct pf_api_caller who;
	md_get(md, "authorization", auth, sizeof(auth));
	int rc =
	    w->st ? pf_api_authenticate(w->st, auth[0] ? auth : NULL, now_ms(), &who) : -EAGAIN;
	if (rc == -EAGAIN) {
		a->code = GRPC_STATUS_UNAVAILABLE;
		a->retry_ms = PF_OTLP_GRPC_RETRY_MS;
		snprintf(a->msg, sizeof(a->msg), "the token store cannot answer; retry later");
		return;
	}
	if (rc < 0 || who.role != PF_ROLE_AGENT) {
		a->code = GRPC_STATUS_UNAUTHENTICATED;
		snprintf(a->msg, sizeof(a->msg), "agent token missing or rejected");
		return;
	}
	char uid[PF_UUID_STR_LEN + 1];
	struct pf_profstore_request q = {
	    .body = data,
	    .len = len,
	    .max_bytes = w->g->max_bytes,
	    .now_ms = now_ms(),
	    .check = pf_credential_check_upload,
	    .check_ud = who.agent_bound ? (void *)who.agent_uid : NULL,
	};
	if (who.agent_bound) {
		pf_uuid_format(who.agent_uid, uid);
		q.agent_uid = uid;
	}
	struct pf_profstore_result res;
	struct pf_buf resp;
	pf_buf_init(&resp, 1 << 20);
	if (pf_profstore_ingest(w->st, &q, &res, &resp) < 0) {
		a->code = GRPC_STATUS_INTERNAL;
		snprintf(a->msg, sizeof(a->msg), "out of memory");
	} else {
		a->code = rpc_code(res.status);
		if (res.status == 503)
			a->retry_ms = PF_OTLP_GRPC_RETRY_MS;
		snprintf(a->msg, sizeof(a->msg), "%s", res.message);
		if (a->code == GRPC_STATUS_OK) {
			a->body = resp;
			pf_buf_init(&resp, 0);
		} else {
			pf_log_info("profiles (grpc): %d: %s", res.status, res.message);
		}
	}
	pf_buf_release(&resp);
}

/* One call, from its arrival to its status. */
static void serve_call(struct worker *w, grpc_call *call, const grpc_call_details *det,
		       const grpc_metadata_array *md)
{
	struct answer a = {.code = GRPC_STATUS_OK};
	grpc_byte_buffer *req = NULL;
	bool ok = false;
	int cancelled = 0;

	pf_buf_init(&a.body, 0);
	grpc_op ops[3];
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	bool export = grpc_slice_str_cmp(det->method, PF_OTLP_GRPC_METHOD) == 0;
	size_t n = 1;
	if (export) {
		ops[1].op = GRPC_OP_RECV_MESSAGE;
		ops[1].data.recv_message.recv_message = &req;
		n = 2;
	}
	if (grpc_call_start_batch(call, ops, n, TAG_RECV, NULL) != GRPC_CALL_OK ||
	    !wait_tag(w, call, TAG_RECV, PF_OTLP_GRPC_RECV_TIMEOUT_S, &ok))
		goto out;
	if (!export) {
		a.code = GRPC_STATUS_UNIMPLEMENTED;
		snprintf(a.msg, sizeof(a.msg), "this listener serves %s only", PF_OTLP_GRPC_METHOD);
	} else if (!ok || !req) {
		a.code = GRPC_STATUS_INVALID_ARGUMENT;
		snprintf(a.msg, sizeof(a.msg), "no request message");
	} else {
		grpc_byte_buffer_reader rd;
		if (!grpc_byte_buffer_reader_init(&rd, req)) {
			a.code = GRPC_STATUS_INVALID_ARGUMENT;
			snprintf(a.msg, sizeof(a.msg), "the request message does not decompress");
		} else {
			grpc_slice s = grpc_byte_buffer_reader_readall(&rd);
			grpc_byte_buffer_reader_destroy(&rd);
			if (GRPC_SLICE_LENGTH(s) > w->g->max_bytes) {
				a.code = GRPC_STATUS_RESOURCE_EXHAUSTED;
				snprintf(a.msg, sizeof(a.msg),
					 "request message over the %zu byte limit",
					 w->g->max_bytes);
			} else {
				handle_export(w, md, GRPC_SLICE_START_PTR(s), GRPC_SLICE_LENGTH(s),
					      &a);
			}
			grpc_slice_unref(s);
		}
	}
	/* The answer: the response message (OK only) and the status. */
	grpc_slice details = grpc_slice_from_copied_string(a.msg);
	grpc_byte_buffer *resp = NULL;
	memset(ops, 0, sizeof(ops));
	n = 0;
	ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	ops[n++].data.recv_close_on_server.cancelled = &cancelled;
	if (a.code == GRPC_STATUS_OK) {
		grpc_slice body = grpc_slice_from_copied_buffer(
		    a.body.data ? (const char *)a.body.data : "", a.body.len);
		resp = grpc_raw_byte_buffer_create(&body, 1);
		grpc_slice_unref(body);
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n++].data.send_message.send_message = resp;
	}
	/* A retryable refusal says when to come back: google.rpc.Status with a RetryInfo in
	 * grpc-status-details-bin, as gRPC's rich error model puts it (core base64s -bin). */
	struct pf_buf rich;
	grpc_metadata trailer;
	pf_buf_init(&rich, 4096);
	bool has_rich = a.retry_ms > 0 &&
			pf_otlp_status_encode((int32_t)a.code, a.msg, false, &rich) == 0 &&
			pf_otlp_status_append_retry(&rich, a.retry_ms) == 0;
	if (has_rich) {
		trailer.key = grpc_slice_from_static_string("grpc-status-details-bin");
		trailer.value = grpc_slice_from_copied_buffer((const char *)rich.data, rich.len);
	}
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.status = a.code;
	ops[n].data.send_status_from_server.trailing_metadata_count = has_rich ? 1 : 0;
	ops[n].data.send_status_from_server.trailing_metadata = has_rich ? &trailer : NULL;
	ops[n++].data.send_status_from_server.status_details = a.msg[0] ? &details : NULL;
	if (grpc_call_start_batch(call, ops, n, TAG_DONE, NULL) == GRPC_CALL_OK)
		wait_tag(w, call, TAG_DONE, 0, &ok);
	grpc_slice_unref(details);
	if (has_rich)
		grpc_slice_unref(trailer.value);
	pf_buf_release(&rich);
	if (resp)
		grpc_byte_buffer_destroy(resp);
out:
	if (req)
		grpc_byte_buffer_destroy(req);
	pf_buf_release(&a.body);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	while (!atomic_load(&w->g->stopping)) {
		grpc_call *call = NULL;
		grpc_call_details det;
		grpc_metadata_array md;
		bool ok = false;
		grpc_call_details_init(&det);
		grpc_metadata_array_init(&md);
		if (grpc_server_request_call(w->g->server, &call, &det, &md, w->cq, w->cq,
					     TAG_NEW) != GRPC_CALL_OK ||
		    !wait_tag(w, NULL, TAG_NEW, 0, &ok)) {
			grpc_call_details_destroy(&det);
			grpc_metadata_array_destroy(&md);
			break;
		}
		if (ok && call)
			serve_call(w, call, &det, &md);
		if (call)
			grpc_call_unref(call);
		grpc_call_details_destroy(&det);
		grpc_metadata_array_destroy(&md);
		if (!ok)
			break; /* the server is shutting down */
	}
	/* Until pf_otlp_grpc_stop() shuts the queue down: nothing else arrives. */
	for (;;) {
		grpc_event ev =
		    grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			break;
	}
	return NULL;
}

static int read_pem(const char *path, char **out, struct pf_error *err)
{
	FILE *f = fopen(path, "rb");
	char *b = malloc(MAX_PEM + 1);
	size_t n = f && b ? fread(b, 1, MAX_PEM, f) : 0;
	bool ok = f && b && n > 0 && n < MAX_PEM && !ferror(f);
	if (f)
		fclose(f);
	if (!ok) {
		free(b);
		return pf_error_set(err, -EINVAL, "otlp_grpc", "cannot read %s (at most 1 MiB)",
				    path);
	}
	b[n] = 0;
	*out = b;
	return 0;
}

static grpc_server_credentials *credentials(const struct pf_otlp_grpc_options *o,
					    struct pf_error *err)
{
	if (!o->tls_cert || !o->tls_key)
		return grpc_insecure_server_credentials_create();
	char *cert = NULL, *key = NULL;
	grpc_server_credentials *c = NULL;
	if (read_pem(o->tls_cert, &cert, err) == 0 && read_pem(o->tls_key, &key, err) == 0) {
		grpc_ssl_pem_key_cert_pair pair = {.private_key = key, .cert_chain = cert};
		c = grpc_ssl_server_credentials_create(NULL, &pair, 1, 0, NULL);
		if (!c)
			pf_error_set(err, -EINVAL, "otlp_grpc",
				     "the TLS certificate or key is not "
				     "usable");
	}
	free(cert);
	free(key);
	return c;
}

static atomic_flag log_routed = ATOMIC_FLAG_INIT;

struct pf_otlp_grpc *pf_otlp_grpc_start(const struct pf_otlp_grpc_options *o, struct pf_error *err)
{
	unsigned n = o->threads ? o->threads : PF_OTLP_GRPC_THREADS;
	struct pf_otlp_grpc *g = calloc(1, sizeof(*g) + n * sizeof(struct worker));
	if (!g) {
		pf_error_set(err, -ENOMEM, NULL, "out of memory");
		return NULL;
	}
	if (!atomic_flag_test_and_set(&log_routed))
		gpr_set_log_function(grpc_log);
	grpc_init();
	g->max_bytes = o->max_message_bytes ? o->max_message_bytes : PF_PROFSTORE_DEFAULT_MAX_BYTES;
	g->n_workers = n;
	/* gRPC refuses larger messages itself (RESOURCE_EXHAUSTED), after decompression too. */
	/* What clients may hold in the server: its memory (connections, streams, messages
	 * being read) within a resource quota, and few streams per connection. */
	grpc_resource_quota *quota = grpc_resource_quota_create("profleet-otlp-grpc");
	grpc_resource_quota_resize(quota, PF_OTLP_GRPC_MEMORY_QUOTA);
	grpc_arg args[] = {
	    {.type = GRPC_ARG_INTEGER,
	     .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
	     .value.integer = (int)pf_min(g->max_bytes, (size_t)INT32_MAX)},
	    {.type = GRPC_ARG_INTEGER,
	     .key = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH,
	     .value.integer = 1 << 20},
	    {.type = GRPC_ARG_INTEGER,
	     .key = GRPC_ARG_MAX_CONCURRENT_STREAMS,
	     .value.integer = PF_OTLP_GRPC_MAX_STREAMS},
	    {.type = GRPC_ARG_INTEGER,
	     .key = GRPC_ARG_MAX_CONNECTION_IDLE_MS,
	     .value.integer = PF_OTLP_GRPC_IDLE_S * 1000},
	    {.type = GRPC_ARG_POINTER,
	     .key = GRPC_ARG_RESOURCE_QUOTA,
	     .value.pointer = {.p = quota, .vtable = grpc_resource_quota_arg_vtable()}},
	};
	grpc_channel_args ca = {.num_args = sizeof(args) / sizeof(args[0]), .args = args};
	g->server = grpc_server_create(&ca, NULL);
	grpc_resource_quota_unref(quota); /* the server holds its own reference */
	for (unsigned i = 0; i < n; i++) {
		struct worker *w = &g->workers[i];
		w->g = g;
		w->cq = grpc_completion_queue_create_for_next(NULL);
		grpc_server_register_completion_queue(g->server, w->cq, NULL);
		w->st = pf_store_open_url(o->db_path, o->fleet_url, PF_STORE_SYNC_FULL, err);
		if (!w->st)
			goto fail;
		if (o->retention)
			pf_store_profiles_set_retention(w->st, o->retention);
	}
	char addr[300];
	bool v6 = strchr(o->host, ':') != NULL;
	snprintf(addr, sizeof(addr), v6 ? "[%s]:%d" : "%s:%d", o->host, o->port);
	grpc_server_credentials *cr = credentials(o, err);
	if (!cr)
		goto fail;
	g->port = grpc_server_add_http2_port(g->server, addr, cr);
	grpc_server_credentials_release(cr);
	if (g->port <= 0) {
		pf_error_set(err, -EADDRINUSE, "otlp_grpc.listen", "cannot listen on %s", addr);
		goto fail;
	}
	grpc_server_start(g->server);
	g->serving = true;
	for (unsigned i = 0; i < n; i++) {
		int rc = pthread_create(&g->workers[i].thread, NULL, worker_main, &g->workers[i]);
		if (rc) {
			pf_error_set(err, -rc, NULL, "cannot start a gRPC thread: %s",
				     strerror(rc));
			goto fail;
		}
		g->workers[i].started = true;
	}
	return g;
fail:
	pf_otlp_grpc_stop(g);
	return NULL;
}

int pf_otlp_grpc_port(const struct pf_otlp_grpc *g)
{
	return g ? g->port : 0;
}

void pf_otlp_grpc_stop(struct pf_otlp_grpc *g)
{
	if (!g)
		return;
	atomic_store(&g->stopping, true);
	if (g->serving) {
		grpc_completion_queue *scq = grpc_completion_queue_create_for_pluck(NULL);
		grpc_server_shutdown_and_notify(g->server, scq, TAG_SHUTDOWN);
		grpc_server_cancel_all_calls(g->server);
		grpc_completion_queue_pluck(scq, TAG_SHUTDOWN, gpr_inf_future(GPR_CLOCK_MONOTONIC),
					    NULL);
		grpc_completion_queue_shutdown(scq);
		grpc_completion_queue_destroy(scq);
	}
	for (unsigned i = 0; i < g->n_workers; i++)
		if (g->workers[i].cq)
			grpc_completion_queue_shutdown(g->workers[i].cq);
	for (unsigned i = 0; i < g->n_workers; i++) {
		struct worker *w = &g->workers[i];
		if (w->started) {
			pthread_join(w->thread, NULL);
		} else if (w->cq) { /* drained here: its thread never ran */
			while (grpc_completion_queue_next(w->cq,
							  gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL)
				   .type != GRPC_QUEUE_SHUTDOWN)
				;
		}
	}
	grpc_server_destroy(g->server);
	for (unsigned i = 0; i < g->n_workers; i++) {
		if (g->workers[i].cq)
			grpc_completion_queue_destroy(g->workers[i].cq);
		pf_store_close(g->workers[i].st);
	}
	grpc_shutdown();
	free(g);
}
