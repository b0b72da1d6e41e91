/* http1.c — see http1.h. */
#include "http1.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

int http1_request_append(struct pf_buf *out, const char *method, const char *host,
			 const char *path, const char *bearer, const char *content_type,
			 const void *body, size_t body_len)
{
	int r = pf_buf_printf(out, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method,
			      path, host);
	if (r == 0 && bearer)
		r = pf_buf_printf(out, "Authorization: Bearer %s\r\n", bearer);
	if (r == 0 && body)
		r = pf_buf_printf(out, "Content-Type: %s\r\nContent-Length: %zu\r\n",
				  content_type ? content_type : "application/octet-stream",
				  body_len);
	if (r == 0)
		r = pf_buf_append_str(out, "\r\n");
	if (r == 0 && body)
		r = pf_buf_append(out, body, body_len);
	return r;
}

/* Parses an unsigned number in s[0..n) in base 10 or 16; -1 when not a number or too big. */
static long long parse_uint(const char *s, size_t n, int base)
{
	long long v = 0;
	if (n == 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int d;
		char c = s[i];
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (base == 16 && c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (base == 16 && c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return -1;
		if (v > (1LL << 40))
			return -1;
		v = v * base + d;
	}
	return v;
}

/* Offset of the first "\r\n" at or after `from`, or -1. */
static long find_crlf(const uint8_t *p, size_t n, size_t from)
{
	for (size_t i = from; i + 1 < n; i++)
		if (p[i] == '\r' && p[i + 1] == '\n')
			return (long)i;
	return -1;
}

/* RFC 9112 §7.1: chunk-size [; ext] CRLF data CRLF ... 0 CRLF [trailers] CRLF. */
static int parse_chunked(const uint8_t *p, size_t n, struct pf_buf *body, struct pf_error *err)
{
	size_t i = 0;
	pf_buf_reset(body);
	for (;;) {
		long e = find_crlf(p, n, i);
		if (e < 0)
			return 0;
		size_t sl = (size_t)e - i;
		const char *semi = memchr(p + i, ';', sl);
		if (semi)
			sl = (size_t)((const uint8_t *)semi - (p + i));
		while (sl && (p[i + sl - 1] == ' ' || p[i + sl - 1] == '\t'))
			sl--;
		long long size = parse_uint((const char *)p + i, sl, 16);
		if (size < 0)
			return pf_error_set(err, -EPROTO, NULL, "bad chunk size");
		i = (size_t)e + 2;
		if (size == 0) {
			/* Trailer section, then the final CRLF. */
			for (;;) {
				long t = find_crlf(p, n, i);
				if (t < 0)
					return 0;
				if ((size_t)t == i)
					return 1;
				i = (size_t)t + 2;
			}
		}
		if (n - i < (size_t)size + 2)
			return 0;
		if (p[i + size] != '\r' || p[i + size + 1] != '\n')
			return pf_error_set(err, -EPROTO, NULL, "chunk not followed by CRLF");
		int r = pf_buf_append(body, p + i, (size_t)size);
		if (r < 0)
			return r;
		i += (size_t)size + 2;
	}
}

int http1_response_parse(const uint8_t *p, size_t n, bool eof, int *status, struct pf_buf *body,
			 struct pf_error *err)
{
	const char *s = (const char *)p;
	*status = 0;
	long sl_end = find_crlf(p, n, 0);
	if (sl_end < 0)
		goto need_more;
	if (sl_end < 12 || strncmp(s, "HTTP/1.", 7) != 0 || s[8] != ' ')
		return pf_error_set(err, -EPROTO, NULL, "not an HTTP/1.x status line");
	long long st = parse_uint(s + 9, 3, 10);
	if (st < 100 || st > 999)
		return pf_error_set(err, -EPROTO, NULL, "bad status code");

	long long content_length = -1;
	bool chunked = false;
	size_t i = (size_t)sl_end + 2;
	for (;;) {
		long e = find_crlf(p, n, i);
		if (e < 0)
			goto need_more;
		if ((size_t)e == i) {
			i += 2;
			break;
		}
		const char *line = s + i;
		size_t ll = (size_t)e - i;
		const char *colon = memchr(line, ':', ll);
		if (!colon)
			return pf_error_set(err, -EPROTO, NULL, "malformed header line");
		size_t nl = (size_t)(colon - line);
		const char *v = colon + 1;
		size_t vl = (size_t)(line + ll - v);
		while (vl && (*v == ' ' || *v == '\t')) {
			v++;
			vl--;
		}
		while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
			vl--;
		if (nl == 14 && strncasecmp(line, "Content-Length", 14) == 0) {
			content_length = parse_uint(v, vl, 10);
			if (content_length < 0)
				return pf_error_set(err, -EPROTO, NULL, "bad Content-Length");
		} else if (nl == 17 && strncasecmp(line, "Transfer-Encoding", 17) == 0) {
			/* chunked must be the last coding (§6.1); we only accept it alone. */
			if (vl >= 7 && strncasecmp(v + vl - 7, "chunked", 7) == 0)
				chunked = true;
		}
		i = (size_t)e + 2;
	}
	*status = (int)st;
	if (st < 200 || st == 204 || st == 304) {
		pf_buf_reset(body);
		return 1;
	}
	if (chunked) {
		int r = parse_chunked(p + i, n - i, body, err);
		if (r == 0 && eof)
			return pf_error_set(err, -EPROTO, NULL, "connection closed inside chunked body");
		if (r == 0)
			*status = 0;
		return r;
	}
	if (content_length >= 0) {
		if (n - i < (size_t)content_length) {
			if (eof)
				return pf_error_set(err, -EPROTO, NULL,
						    "connection closed before Content-Length bytes");
			*status = 0;
			return 0;
		}
		pf_buf_reset(body);
		return pf_buf_append(body, p + i, (size_t)content_length) < 0 ? -E2BIG : 1;
	}
	/* RFC 9112 §6.3, rule 8: no framing, the body runs to the end of the connection. */
	if (!eof) {
		*status = 0;
		return 0;
	}
	pf_buf_reset(body);
	return pf_buf_append(body, p + i, n - i) < 0 ? -E2BIG : 1;

need_more:
	if (eof)
		return pf_error_set(err, -EPROTO, NULL, "connection closed inside the response head");
	return 0;
}
