/* server_jobs.h — the server's work off the loop (profstore/query_pool.h): heavy profile
 * queries of the API on the query pool, OTLP and Pyroscope ingest on the receiver's writer.
 *
 * Owns the jobs while they wait or run: a copy of what the request's handler needs (the
 * connection may close meanwhile; the server then tells the pool to forget the job, so a late
 * answer never touches a freed request) and, filled on the worker, the answer with LWS_PRE
 * headroom, so the loop only moves pointers when it takes it back (pf_server_jobs_drain).
 *
 * Loop thread only, except the jobs' run functions, which run on the pools' workers. */
#ifndef PF_SERVER_JOBS_H
#define PF_SERVER_JOBS_H

#include <stddef.h>
#include <stdint.h>

struct http_req;
struct lws;
struct pf_metrics;
struct pf_qpool;

struct pf_server_jobs {
	uint64_t next_job;	    /* the last handle given */
	struct pf_metrics *metrics; /* the API's request counters; may be NULL */
	size_t max_message_bytes;   /* the OTLP receiver's inbound limit */
};

/* Hands an API request to the query pool. 0 when queued (r waits for
 * pf_server_jobs_drain()); -EAGAIN when the queue is full, -ENOMEM: the caller answers. */
int pf_server_jobs_query(struct pf_server_jobs *j, struct pf_qpool *pool, struct lws *wsi,
			 struct http_req *r);
/* Hands an OTLP request to the receiver's writer; the body moves into the job (no copy) when
 * it is queued. Returns as pf_server_jobs_query(). */
int pf_server_jobs_ingest(struct pf_server_jobs *j, struct pf_qpool *pool, struct lws *wsi,
			  struct http_req *r);
/* Hands a receiving API route (POST /ingest, api/api_ingest.h) to the receiver's writer,
 * which runs pf_api_handle() with its writable connection; the body moves as with
 * pf_server_jobs_ingest(). Returns as pf_server_jobs_query(). */
int pf_server_jobs_ingest_api(struct pf_server_jobs *j, struct pf_qpool *pool, struct lws *wsi,
			      struct http_req *r);
/* Moves every finished answer of pool to its request and asks for WRITEABLE. Jobs whose
 * connection closed were forgotten and never come back here. */
void pf_server_jobs_drain(struct pf_server_jobs *j, struct pf_qpool *pool);

#endif
