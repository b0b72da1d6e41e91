/* http1.h — the smallest HTTP/1.1 client pieces the benchmark tools need for the REST API:
 * building a request and parsing a whole response held in memory (status line, headers, and a
 * body framed by Content-Length, by the chunked transfer coding, or by the end of the
 * connection; RFC 9112 §6.3, §7.1). No I/O: opamp-load drives the socket from its epoll loop
 * and sends "Connection: close", so one connection carries one exchange.
 *
 *   int st;
 *   int r = http1_response_parse(in, in_len, eof, &st, &body, &err);  // 1: complete
 */
#ifndef PF_BENCH_HTTP1_H
#define PF_BENCH_HTTP1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/buf.h"
#include "pf/error.h"

/* Appends a request with "Connection: close". bearer and body may be NULL; a body gets
 * Content-Length and `content_type` (NULL: application/octet-stream). host is "addr:port". */
int http1_request_append(struct pf_buf *out, const char *method, const char *host,
			 const char *path, const char *bearer, const char *content_type,
			 const void *body, size_t body_len);

/* Parses the response in p[0..n). eof: the peer closed its side (a body without framing ends
 * there). Returns 1 when complete (status in *status, the decoded body replaces body's
 * contents), 0 when more bytes are needed, -EPROTO when malformed (reason in err), -E2BIG when
 * the body exceeds body's cap. A HEAD-less response (1xx, 204, 304) has an empty body. */
int http1_response_parse(const uint8_t *p, size_t n, bool eof, int *status, struct pf_buf *body,
			 struct pf_error *err);

#endif
