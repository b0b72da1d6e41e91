/* server_jobs.c — see server_jobs.h. */
#include "server_jobs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <libwebsockets.h>

#include "metrics.h"
#include "pf/log.h"
#include "profstore/profstore.h"
#include "profstore/query_pool.h"
#include "server_int.h"
#include "store.h"

#define QUERY_CONN_TIMEOUT_S 300 /* bound on a connection waiting on a pool (queue + run) */

/* A request handed to a pool (profstore/query_pool.h) and, filled on the worker, its answer
 * with LWS_PRE headroom, so the loop only moves pointers. */
struct srv_job {
	struct pf_qjob base;
	/* Loop side only: valid while the pool has not been told to forget base.handle, which
	 * req_free() does before the request (or its connection) goes away. */
	struct http_req *req;
	struct lws *wsi;
	char path[512]; /* for logs */
	bool api;	/* counted in the API metrics */
	/* answer */
	int status;
	const char *ctype;
	char hname[32];
	char hval[160];
	uint8_t *resp;
	size_t resp_len;
	bool gzipped;	/* resp is gzip'd JSON (pf_http_api_gzip) */
	char note[256]; /* logged by the loop */
};

/* An API request for the query pool: a copy (the connection may go away while it runs). */
struct api_job {
	struct srv_job sj;
	char method[8];
	char args_store[2048];
	size_t n_args;
	size_t arg_off[PF_API_MAX_ARGS];
	char auth[1024];
	bool has_auth;
	bool accept_gzip; /* the client takes a gzip'd answer */
	char peer[64];
	int64_t now_ms;
	/* A receiving route on the writer (pf_server_jobs_ingest_api): its body (moved from
	 * the request), Content-Type and encoding; the writer's connection is writable. */
	bool writer;
	struct pf_buf body;
	char ctype_in[128];
	bool gzip;
	size_t max_bytes;
};

/* An OTLP request for the receiver's writer; the body is moved from the request. */
struct ingest_job {
	struct srv_job sj;
	struct pf_buf body;
	bool gzip;
	char ctype_in[128];
	size_t max_bytes;
	bool cred_bound; /* the request's per-agent credential, of cred_uid */
	uint8_t cred_uid[16];
};

static void api_job_free(struct pf_qjob *b)
{
	struct api_job *j = lws_container_of(b, struct api_job, sj.base);
	pf_buf_release(&j->body);
	free(j->sj.resp);
	free(j);
}

static void ingest_job_free(struct pf_qjob *b)
{
	struct ingest_job *j = lws_container_of(b, struct ingest_job, sj.base);
	pf_buf_release(&j->body);
	free(j->sj.resp);
	free(j);
}

/* On a worker: the answer body with LWS_PRE headroom, so the loop only moves a pointer. */
static void srv_job_answer(struct srv_job *j, int status, const char *ctype, const uint8_t *body,
			   size_t len)
{
	j->status = status;
	j->ctype = ctype; /* string literals */
	j->resp = malloc(LWS_PRE + len + 1);
	if (j->resp) {
		if (len)
			memcpy(j->resp + LWS_PRE, body, len);
		j->resp_len = len;
	} else {
		j->status = 500;
	}
}

/* On a query worker, with its read-only connection: the same pf_api_handle() the loop would
 * call, over a struct pf_api that has only the store (the offloaded routes use no more). */
static void api_job_run(struct pf_qjob *b, struct pf_store *st)
{
	struct api_job *j = lws_container_of(b, struct api_job, sj.base);
	struct pf_api wapi = {.store = st, .ready = true, .read_only = !j->writer};
	struct pf_api_request q = {
	    .method = j->method,
	    .path = j->sj.path,
	    .n_args = j->n_args,
	    .authorization = j->has_auth ? j->auth : NULL,
	    .peer = j->peer,
	    .now_ms = j->now_ms,
	    .body = j->body.data,
	    .body_len = j->body.len,
	    .content_type = j->ctype_in[0] ? j->ctype_in : NULL,
	    .body_gzip = j->gzip,
	    .max_body_bytes = j->max_bytes,
	};
	for (size_t i = 0; i < j->n_args; i++)
		q.args[i] = j->args_store + j->arg_off[i];
	struct pf_api_response resp;
	pf_api_response_init(&resp);
	if (st)
		pf_api_handle(&wapi, &q, &resp);
	else
		pf_api_error(&resp, 503, "unavailable", "no query connection");
	if (resp.extra_header_name[0]) {
		pf_http_header_lower(resp.extra_header_name, j->sj.hname, sizeof(j->sj.hname));
		snprintf(j->sj.hval, sizeof(j->sj.hval), "%s", resp.extra_header_value);
	}
	/* compressed here, like the loop's answers (server_http.c), off the loop */
	struct pf_buf z;
	j->sj.gzipped = pf_http_api_gzip(j->accept_gzip, &resp, &z);
	if (j->sj.gzipped)
		srv_job_answer(&j->sj, resp.status, resp.content_type, z.data, z.len);
	else
		srv_job_answer(&j->sj, resp.status, resp.content_type, resp.body.data,
			       resp.body.len);
	pf_buf_release(&z);
	pf_api_response_release(&resp);
	pf_buf_release(&j->body); /* early: the answer may wait for the loop */
}

/* On the receiver's writer, with its synchronous=FULL connection (retention set): the jobs
 * the writer took together, their profiles in one transaction (group commit), each answered
 * after that commit. */
static void ingest_jobs_run(struct pf_qjob **b, size_t n, struct pf_store *st)
{
	struct pf_profstore_request q[PF_QPOOL_MAX_BATCH];
	struct pf_profstore_result res[PF_QPOOL_MAX_BATCH];
	struct pf_buf out[PF_QPOOL_MAX_BATCH];
	char uid_text[PF_QPOOL_MAX_BATCH][37];
	int64_t now_ms = pf_server_now_ms();

	n = pf_min(n, (size_t)PF_QPOOL_MAX_BATCH);
	for (size_t i = 0; i < n; i++) {
		struct ingest_job *j = lws_container_of(b[i], struct ingest_job, sj.base);
		q[i] = (struct pf_profstore_request){
		    .body = j->body.data,
		    .len = j->body.len,
		    .gzip = j->gzip,
		    .content_type = j->ctype_in[0] ? j->ctype_in : NULL,
		    .max_bytes = j->max_bytes,
		    .now_ms = now_ms,
		};
		pf_server_upload_identity(&q[i], j->cred_bound ? j->cred_uid : NULL, uid_text[i]);
		memset(&res[i], 0, sizeof(res[i]));
		pf_buf_init(&out[i], 1 << 20);
	}
	if (!st) {
		for (size_t i = 0; i < n; i++) {
			res[i].status = 503;
			pf_profstore_encode_status(14 /* UNAVAILABLE */, "no store connection",
						   &out[i]);
		}
	} else {
		pf_profstore_ingest_batch(st, q, n, res, out);
	}
	for (size_t i = 0; i < n; i++) {
		struct ingest_job *j = lws_container_of(b[i], struct ingest_job, sj.base);
		/* on -ENOMEM the requests without an answer say 500 (no body) */
		srv_job_answer(&j->sj, res[i].status ? res[i].status : 500,
			       "application/x-protobuf", out[i].data, out[i].len);
		if (res[i].status != 200)
			snprintf(j->sj.note, sizeof(j->sj.note), "%s", res[i].message);
		pf_buf_release(&out[i]);
		pf_buf_release(&j->body); /* early: the answer may wait for the loop */
	}
}

static void ingest_job_run(struct pf_qjob *b, struct pf_store *st)
{
	ingest_jobs_run(&b, 1, st);
}

/* Submits j for r to pool. 0 when queued (r waits for pf_server_jobs_drain()); -EAGAIN when
 * the queue is full, -ENOMEM: the caller answers and frees j. */
static int submit_job(struct pf_server_jobs *js, struct pf_qpool *pool, struct lws *wsi,
		      struct http_req *r, struct srv_job *j,
		      void (*run)(struct pf_qjob *b, struct pf_store *st),
		      void (*free_job)(struct pf_qjob *b))
{
	j->base.run = run;
	j->base.free = free_job;
	j->base.handle = ++js->next_job;
	j->req = r;
	j->wsi = wsi;
	memcpy(j->path, r->path, sizeof(j->path));
	int rc = pf_qpool_submit(pool, &j->base);
	if (rc < 0)
		return rc;
	r->job = j->base.handle;
	r->job_pool = pool;
	/* The answer may take a while (queue + run): no lws idle timeout meanwhile, but a
	 * bound all the same. */
	lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, QUERY_CONN_TIMEOUT_S);
	return 0;
}

static struct api_job *api_job_new(struct http_req *r)
{
	struct api_job *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->sj.api = true;
	memcpy(j->method, r->method, sizeof(j->method));
	memcpy(j->args_store, r->args_store, sizeof(j->args_store));
	j->n_args = r->n_args;
	for (size_t i = 0; i < r->n_args; i++)
		j->arg_off[i] = (size_t)(r->args[i] - r->args_store);
	memcpy(j->auth, r->auth, sizeof(j->auth));
	j->has_auth = r->has_auth;
	j->accept_gzip = r->accept_gzip;
	memcpy(j->peer, r->peer, sizeof(j->peer));
	j->now_ms = pf_server_now_ms();
	return j;
}

/* An API request for pool; a receiving route's (writer) takes the request's body along. */
static int submit_api(struct pf_server_jobs *js, struct pf_qpool *pool, struct lws *wsi,
		      struct http_req *r, bool writer)
{
	struct api_job *j = api_job_new(r);
	if (!j)
		return -ENOMEM;
	if (writer) {
		j->writer = true;
		j->body = r->body;
		j->sj.base.cost = r->body.len;
		memcpy(j->ctype_in, r->ctype_in, sizeof(j->ctype_in));
		j->gzip = r->body_gzip;
		j->max_bytes = js->max_message_bytes;
	}
	int rc = submit_job(js, pool, wsi, r, &j->sj, api_job_run, api_job_free);
	if (rc < 0) {
		free(j); /* the body still belongs to r */
		return rc;
	}
	if (writer)
		memset(&r->body, 0, sizeof(r->body));
	return 0;
}

int pf_server_jobs_query(struct pf_server_jobs *js, struct pf_qpool *pool, struct lws *wsi,
			 struct http_req *r)
{
	return submit_api(js, pool, wsi, r, false);
}

int pf_server_jobs_ingest_api(struct pf_server_jobs *js, struct pf_qpool *pool, struct lws *wsi,
			      struct http_req *r)
{
	return submit_api(js, pool, wsi, r, true);
}

int pf_server_jobs_ingest(struct pf_server_jobs *js, struct pf_qpool *pool, struct lws *wsi,
			  struct http_req *r)
{
	struct ingest_job *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->body = r->body;
	j->sj.base.cost = r->body.len;
	j->gzip = r->body_gzip;
	memcpy(j->ctype_in, r->ctype_in, sizeof(j->ctype_in));
	j->max_bytes = js->max_message_bytes;
	j->cred_bound = r->cred_bound;
	memcpy(j->cred_uid, r->cred_uid, sizeof(j->cred_uid));
	j->sj.base.run_batch = ingest_jobs_run;
	int rc = submit_job(js, pool, wsi, r, &j->sj, ingest_job_run, ingest_job_free);
	if (rc < 0) {
		free(j); /* the body still belongs to r */
		return rc;
	}
	memset(&r->body, 0, sizeof(r->body));
	return 0;
}

void pf_server_jobs_drain(struct pf_server_jobs *js, struct pf_qpool *pool)
{
	struct pf_qjob *b;

	while (pool && (b = pf_qpool_take(pool))) {
		struct srv_job *j = lws_container_of(b, struct srv_job, base);
		struct http_req *r = j->req;
		if (r->job == b->handle) {
			r->job = 0;
			r->job_pool = NULL;
			r->status = j->status;
			r->ctype = j->ctype;
			free(r->resp);
			r->resp = j->resp;
			r->resp_len = j->resp ? j->resp_len : 0;
			r->resp_off = 0;
			j->resp = NULL;
			if (j->hname[0])
				pf_http_req_set_header(r, j->hname, j->hval);
			if (j->gzipped && j->resp_len)
				pf_http_req_set_gzip_headers(r);
			if (j->api && js->metrics)
				pf_metrics_api_request(js->metrics, r->status);
			if (j->note[0])
				pf_log_info("profiles: %d: %s", r->status, j->note);
			pf_log_debug("%s: answered %d after %.1f ms queued + %.1f ms", j->path,
				     r->status, (double)(b->started_us - b->queued_us) / 1e3,
				     (double)(b->done_us - b->started_us) / 1e3);
			/* An answer that waited for a pool closes its connection after it is sent
			 * ("Connection: close"): lws 4.1.6 on the libuv loop spins in its
			 * buffered-input ("ripe rxflow") pass on the next request of a keep-alive
			 * connection whose previous request was parked this way (seen with an
			 * agent's back-to-back profile uploads and with browsers). The client
			 * opens a new connection for its next request. */
			r->close_after = true;
			lws_set_timeout(j->wsi, NO_PENDING_TIMEOUT, 0);
			lws_callback_on_writable(j->wsi);
		}
		b->free(b);
	}
}
