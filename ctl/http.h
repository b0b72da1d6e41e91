/* ctl/http.h — profleetctl's client of the controller's REST API, over libcurl: the server's
 * base URL, the bearer token, TLS (a CA file, or no verification when asked), connect and
 * transfer timeouts, response bodies capped in size, and error messages that say what failed:
 *
 *   cannot connect to http://127.0.0.1:4320/api/v1/agents: Couldn't connect to server
 *   no route for /api/v1/captures (HTTP 404 not_found)
 *
 * An answer with a non-2xx status becomes the API's {"error":{"code","message"}} message
 * followed by "(HTTP <status> <code>)". One struct ctl_http serves all requests of a command
 * (one curl easy handle, so the connection is reused). Not thread-safe.
 *
 * Aborting: when the flag given to ctl_http_set_abort() becomes non-zero (a SIGINT handler sets
 * it), the request in flight ends with -EINTR within about a second. */
#ifndef CTL_HTTP_H
#define CTL_HTTP_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "pf/buf.h"
#include "pf/error.h"

#define CTL_HTTP_MAX_BODY ((size_t)256 << 20) /* bytes of one answer */
#define CTL_HTTP_CONNECT_TIMEOUT_MS 10000
#define CTL_HTTP_TIMEOUT_MS 120000

struct ctl_http_opts {
	const char *server;  /* base URL such as "http://127.0.0.1:4320"; a trailing / is ignored */
	const char *token;   /* bearer token, NULL or "" for none */
	const char *ca_file; /* PEM bundle to verify the server with, NULL for the system's */
	bool insecure;	     /* do not verify the server's certificate nor its name */
	long connect_timeout_ms; /* 0 = CTL_HTTP_CONNECT_TIMEOUT_MS */
	long timeout_ms;	 /* whole request, 0 = CTL_HTTP_TIMEOUT_MS */
};

struct ctl_http_resp {
	long status; /* HTTP status */
	struct pf_buf body;
	char content_type[128];
};

struct ctl_http;

/* NULL + errno (EINVAL for a server URL that is not http:// or https://, ENOMEM). */
struct ctl_http *ctl_http_new(const struct ctl_http_opts *opts);
void ctl_http_free(struct ctl_http *h);
static inline void ctl_http_freep(struct ctl_http **h)
{
	ctl_http_free(*h);
}
void ctl_http_set_abort(struct ctl_http *h, volatile sig_atomic_t *flag);
/* The server's base URL without a trailing slash. */
const char *ctl_http_server(const struct ctl_http *h);

/* Sends METHOD <server><path> (path starts with "/" and carries its encoded query). body may be
 * NULL. Returns 0 when the server answered (any status, in resp, which the caller releases),
 * else -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH, -EPROTO (TLS), -E2BIG (answer over the cap),
 * -EINTR (aborted), -EIO, with err naming the URL. */
int ctl_http_request(struct ctl_http *h, const char *method, const char *path, const char *ctype,
		     const void *body, size_t len, struct ctl_http_resp *resp,
		     struct pf_error *err);
void ctl_http_resp_release(struct ctl_http_resp *r);

/* A request whose answer must be 2xx JSON; *out receives it (caller json_decref's). A non-2xx
 * answer fails with the errno of its status (see ctl_http_status_errno) and err set by
 * ctl_http_error_from_resp. body_json, when not NULL, is sent as application/json. */
int ctl_http_json(struct ctl_http *h, const char *method, const char *path, json_t *body_json,
		  json_t **out, struct pf_error *err);
/* The same with a raw body (config YAML). */
int ctl_http_json_raw(struct ctl_http *h, const char *method, const char *path, const char *ctype,
		      const void *body, size_t len, json_t **out, struct pf_error *err);

/* 400/422 -EINVAL, 401 -EACCES, 403 -EPERM, 404 -ENOENT, 409 -EBUSY, 413 -E2BIG, else -EIO. */
int ctl_http_status_errno(long status);
/* Fills err from a non-2xx answer: "<message> (HTTP <status> <code>)" for the API's JSON
 * errors, else "HTTP <status> from <what>: <first bytes of the body>". Returns the errno. */
int ctl_http_error_from_resp(const struct ctl_http_resp *r, const char *what, struct pf_error *err);

/* Appends "&key=value" (or "?key=value" when q is empty) with value percent-encoded. Does
 * nothing for a NULL value. */
int ctl_query_add(struct pf_buf *q, const char *key, const char *value);
/* Appends s percent-encoded as one path segment. */
int ctl_path_add(struct pf_buf *p, const char *s);

#endif
