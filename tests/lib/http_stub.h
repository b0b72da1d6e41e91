/* tests/lib/http_stub.h — a scripted HTTP/1.1 server on 127.0.0.1 for unit tests of HTTP
 * clients (profleetctl's). A thread accepts one connection per scripted answer, reads the
 * request (head and Content-Length body), records it, sends the answer with
 * "Connection: close" and goes on to the next. An answer of NULL holds the connection open
 * without answering until the client closes it (timeouts). After the last answer the last
 * one is repeated when `repeat_last` is set, up to HTTP_STUB_MAX_REQUESTS. on_request, when
 * set, is called with the request number before the answer is sent.
 *
 * Not a mock of the client library: libcurl runs for real against real sockets. */
#ifndef HTTP_STUB_H
#define HTTP_STUB_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#define HTTP_STUB_MAX_REQUESTS 64
#define HTTP_STUB_MAX_REQUEST 8192

struct http_stub {
	int lfd, port;
	const char *const *answers; /* full HTTP answers, or NULL entries (never answer) */
	size_t n_answers;
	bool repeat_last;
	void (*on_request)(struct http_stub *s, size_t n);
	void *ud;
	char requests[HTTP_STUB_MAX_REQUESTS][HTTP_STUB_MAX_REQUEST];
	size_t n_requests;
	volatile bool stop;
	pthread_t thr;
};

/* Starts the thread; returns 0 or -errno. s starts zeroed, on_request and ud set as wanted. */
int http_stub_start(struct http_stub *s, const char *const *answers, size_t n, bool repeat_last);
/* Stops accepting and joins the thread (a client still connected must have closed). */
void http_stub_stop(struct http_stub *s);
/* An answer with status line "HTTP/1.1 <status>", JSON content type and a correct
 * Content-Length. The caller frees it. */
char *http_stub_json(const char *status, const char *body);

#endif
