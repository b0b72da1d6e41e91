/* server_int.h — private to the server: its core (server.c: the lws callback, WebSockets,
 * timers, lifecycle), its HTTP side (server_http.c: a request from headers to answer, and the
 * routes it is dispatched to) and its pool-job glue (server_jobs.c). It holds the server's
 * state, one HTTP request as the callbacks collect it and as its answer waits to be written,
 * and the functions the three share. Nothing outside controller/server*.c includes it. */
#ifndef PF_SERVER_INT_H
#define PF_SERVER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <signal.h>

#include <libwebsockets.h>
#include <uv.h>

#include "api/api.h"
#include "conn_limits.h"
#include "opamp/session.h"
#include "pf/buf.h"
#include "server.h"
#include "server_forward.h"
#include "server_jobs.h"
#include "ui/static.h"

#define OPAMP_PATH "/v1/opamp"

#define REQ_HEADERS PF_UI_MAX_HEADERS /* extra response headers: the console's are the most */

struct pf_qpool;
struct pf_sync_listener;
struct ws_conn;

/* An Authorization header longer than http_req.auth holds (1023 bytes): 401 saying so. */
#define PF_SERVER_AUTH_TOO_LONG "the Authorization header is longer than 1023 bytes"

struct http_req {
	char method[8];
	char path[512];
	char args_store[2048];
	size_t n_args;
	const char *args[PF_API_MAX_ARGS];
	char auth[1024];
	bool has_auth;
	char peer[64]; /* the client's address (audit) */
	bool body_gzip, accept_gzip;
	bool bad_encoding; /* a Content-Encoding other than identity (or gzip where taken) */
	bool is_opamp;
	bool is_profiles;
	bool is_pyroscope; /* POST /ingest: an API route with the receivers' body rules */
	bool is_ui;
	char inm[128];	    /* If-None-Match (console files) */
	char ctype_in[128]; /* request Content-Type (profiles receivers) */
	bool cred_bound;    /* profiles: authenticated with a per-agent credential, of cred_uid */
	uint8_t cred_uid[16];
	bool dispatched;
	bool body_done; /* the last byte of the answer went to lws */
	bool too_large;
	size_t limit;
	struct pf_buf body;
	/* response */
	int status;
	const char *ctype;
	char hname[REQ_HEADERS][32];
	char hval[REQ_HEADERS][320];
	uint8_t *resp; /* LWS_PRE headroom + body */
	size_t resp_len, resp_off;
	bool headers_sent;
	bool close_after;
	bool fwd;     /* parked for a forwarded command's answer (server_forward.h) */
	uint64_t job; /* a pool's handle while the answer is computed there, else 0 */
	struct pf_qpool *job_pool;
};

struct pss {
	struct http_req *req;
	struct ws_conn *ws;
};

struct pf_server {
	struct pf_server_options opt;
	/* The one event loop (libuv: epoll underneath, so a wake-up costs O(ready descriptors)).
	 * lws joins it as a foreign loop; the signal watchers live on it too. */
	uv_loop_t loop;
	bool loop_init;
	uv_signal_t sig_int, sig_term, sig_hup;
	bool sig_init;
	struct lws_context *ctx; /* NULL again once lws finished destroying it (pcontext) */
	struct lws_vhost *vh;
	struct lws_vhost *agent_vh; /* the mTLS agent listener, or NULL */
	void *ssl_ctx[2];	    /* the listeners' SSL_CTXs (lws owns them) */
	int n_ssl_ctx;
	volatile sig_atomic_t reload_tls;
	struct pf_fleet *fleet;
	struct pf_store *store;
	struct pf_persist *persist;
	struct pf_metrics *metrics;
	struct pf_api *api;
	struct pf_opamp_ctx opamp;
	lws_sorted_usec_list_t sul_persist;
	lws_sorted_usec_list_t sul_headers; /* the header deadline sweep */
	struct pf_conn_limits limits;	    /* per-address counts, header deadlines */
	struct pf_buf scratch; /* replies are encoded here, then copied into one outmsg */
	volatile sig_atomic_t stop;
	size_t n_ws;
	struct ws_conn *ws_head;
	int64_t next_expiry_ms;	 /* earliest token expiry of an open WebSocket, 0: none */
	int64_t beat_ms;	 /* last replica heartbeat (replica_beat), 0: none yet */
	bool beat_ok;		 /* one heartbeat has succeeded */
	struct pf_qpool *pool;	 /* heavy profile queries, or NULL */
	struct pf_qpool *ingest; /* the OTLP receiver's writer, or NULL */
	struct pf_server_jobs jobs;
	struct pf_server_forwards forwards; /* requests waiting for another replica */
	/* Replicas sharing PostgreSQL: the LISTEN connection (fleet/sync.h), else NULL. */
	struct pf_sync_listener *listener;
};

/* Adds a response header (name in lower case with its colon, as lws wants it). */
void pf_http_req_set_header(struct http_req *r, const char *name, const char *value);
/* The API's extra header name in the lower case lws wants ("Allow:" -> "allow:"). */
void pf_http_header_lower(const char *name, char *out, size_t len);

/* Wall-clock milliseconds (token expiries, audit rows and profiles are stamped with it). */
static inline int64_t pf_server_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The request's answer (status, content type, body copied with LWS_PRE headroom). */
void pf_http_req_set_response(struct http_req *r, int status, const char *ctype,
			      const uint8_t *body, size_t len);
/* The API's answer as the request's (status, content type, body, its extra header). */
void pf_http_req_set_api_response(struct http_req *r, const struct pf_api_response *resp);
/* A JSON answer of the API over 1 KiB, gzip'd (level 1) into z for a client that accepts it
 * (a page of 100 agents is ~88 KB of JSON, ~8 KB gzip'd; a merged flame graph ~1.4 MB, ~60
 * KB): true when z holds it. z is initialised either way (release it). Touches no request:
 * the query pool's workers call it on their answers too. */
bool pf_http_api_gzip(bool accept_gzip, const struct pf_api_response *resp, struct pf_buf *z);
/* The headers of an answer pf_http_api_gzip() compressed. */
void pf_http_req_set_gzip_headers(struct http_req *r);
/* A JSON error answer {"error":{"code","message"}}. */
void pf_http_req_error(struct http_req *r, int status, const char *code, const char *msg);
/* Frees r (NULL: nothing); a job it waits for is forgotten by its pool first. */
void pf_http_req_free(struct pf_server *s, struct http_req *r);
/* Answers r at once with status (401, 408, 429, 503: an OTLP Status on the profiles route,
 * else a JSON error; Retry-After on 429 and 503), gives back its body's reservation and
 * closes the connection after: the body is not read (any more). */
void pf_http_refuse_body(struct pf_server *s, struct lws *wsi, struct http_req *r, int status,
			 const char *msg);
/* LWS_CALLBACK_HTTP: a new request on the connection (its previous one is freed); answers
 * at once what needs no body. 0, or -1 to close. */
int pf_http_begin(struct pf_server *s, struct lws *wsi, struct pss *pss, const char *uri,
		  size_t uri_len);
/* The request is complete: routes it and writes what is ready (once per request). */
void pf_http_dispatch(struct pf_server *s, struct lws *wsi, struct http_req *r);
/* Writes what the answer still owes: 1 once it is written whole, 0 to be called again from
 * WRITEABLE, -1 to close. */
int pf_http_write(struct lws *wsi, struct http_req *r);
/* An agent token valid now; *who (may be NULL) receives it. */
bool pf_server_agent_token(struct pf_server *s, const char *auth, struct pf_api_caller *who);
/* The OpAMP session sess authenticated as who (auth: its header): a per-agent credential binds
 * it to its agent and, at its first use or on a new WebSocket (ws), retires that agent's older
 * credentials (their connections close). */
void pf_server_bind_credential(struct pf_server *s, struct pf_opamp_session *sess,
			       const struct pf_api_caller *who, const char *auth, bool ws);
struct pf_profstore_request;
/* The receiver's identity rule on q (opamp/credential.h): bound is the request's credential's
 * agent (16 bytes, NULL: a shared token), text receives its uid, which q then points at. */
void pf_server_upload_identity(struct pf_profstore_request *q, const uint8_t *bound,
			       char text[37]);

#endif
