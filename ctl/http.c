/* http.c — see http.h. */
#include "http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "pf/compiler.h"

struct ctl_http {
	CURL *curl;
	char *server;
	char *auth_header; /* "Authorization: Bearer …" or NULL */
	volatile sig_atomic_t *abort_flag;
	struct ctl_http_resp *cur; /* the answer being received */
	char errbuf[CURL_ERROR_SIZE];
};

const char *ctl_http_server(const struct ctl_http *h)
{
	return h->server;
}

void ctl_http_set_abort(struct ctl_http *h, volatile sig_atomic_t *flag)
{
	h->abort_flag = flag;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct ctl_http *h = ud;
	size_t len = size * n;
	if (pf_buf_append(&h->cur->body, p, len) < 0)
		return 0; /* over the cap or out of memory: curl ends with CURLE_WRITE_ERROR */
	return len;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	struct ctl_http *h = ud;
	size_t len = size * n;
	static const char name[] = "content-type:";
	if (len > sizeof(name) && strncasecmp(p, name, sizeof(name) - 1) == 0) {
		const char *v = p + sizeof(name) - 1;
		size_t vl = len - (sizeof(name) - 1);
		while (vl && (*v == ' ' || *v == '\t'))
			v++, vl--;
		while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
			vl--;
		snprintf(h->cur->content_type, sizeof(h->cur->content_type), "%.*s", (int)vl, v);
	}
	return len;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct ctl_http *h = ud;
	return h->abort_flag && *h->abort_flag ? 1 : 0;
}

struct ctl_http *ctl_http_new(const struct ctl_http_opts *o)
{
	if (!o->server ||
	    (strncmp(o->server, "http://", 7) != 0 && strncmp(o->server, "https://", 8) != 0)) {
		errno = EINVAL;
		return NULL;
	}
	struct ctl_http *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->server = strdup(o->server);
	if (!h->server)
		goto fail;
	size_t sl = strlen(h->server);
	while (sl > 0 && h->server[sl - 1] == '/')
		h->server[--sl] = '\0';
	if (o->token && *o->token) {
		if (asprintf(&h->auth_header, "Authorization: Bearer %s", o->token) < 0) {
			h->auth_header = NULL;
			goto fail;
		}
	}
	h->curl = curl_easy_init();
	if (!h->curl)
		goto fail;
	CURL *c = h->curl;
	long cto = o->connect_timeout_ms > 0 ? o->connect_timeout_ms : CTL_HTTP_CONNECT_TIMEOUT_MS;
	long to = o->timeout_ms > 0 ? o->timeout_ms : CTL_HTTP_TIMEOUT_MS;
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, cto);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, to);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, h->errbuf);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, h);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, h);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, h);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "profleetctl/" CTL_VERSION);
	/* The API never redirects; a redirect would carry the token elsewhere. */
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	if (o->ca_file && *o->ca_file)
		curl_easy_setopt(c, CURLOPT_CAINFO, o->ca_file);
	if (o->insecure) {
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	return h;
fail:
	ctl_http_free(h);
	errno = ENOMEM;
	return NULL;
}

void ctl_http_free(struct ctl_http *h)
{
	if (!h)
		return;
	if (h->curl)
		curl_easy_cleanup(h->curl);
	if (h->auth_header) {
		explicit_bzero(h->auth_header, strlen(h->auth_header));
		free(h->auth_header);
	}
	free(h->server);
	free(h);
}

void ctl_http_resp_release(struct ctl_http_resp *r)
{
	pf_buf_release(&r->body);
	r->status = 0;
	r->content_type[0] = '\0';
}

static int curl_errno(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_CONNECT:
		return -ECONNREFUSED;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_COULDNT_RESOLVE_HOST:
		return -EHOSTUNREACH;
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
		return -EPROTO;
	case CURLE_WRITE_ERROR:
		return -E2BIG;
	case CURLE_ABORTED_BY_CALLBACK:
		return -EINTR;
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
		return -EINVAL;
	default:
		return -EIO;
	}
}

int ctl_http_request(struct ctl_http *h, const char *method, const char *path, const char *ctype,
		     const void *body, size_t len, struct ctl_http_resp *resp, struct pf_error *err)
{
	_cleanup_free_ char *url = NULL;
	if (asprintf(&url, "%s%s", h->server, path) < 0) {
		url = NULL;
		return pf_error_set(err, -ENOMEM, "", "out of memory");
	}
	memset(resp, 0, sizeof(*resp));
	pf_buf_init(&resp->body, CTL_HTTP_MAX_BODY);
	h->cur = resp;
	h->errbuf[0] = '\0';

	CURL *c = h->curl;
	struct curl_slist *hdrs = NULL, *tmp;
	if (h->auth_header && (tmp = curl_slist_append(hdrs, h->auth_header)))
		hdrs = tmp;
	_cleanup_free_ char *ct = NULL;
	if (body && ctype && asprintf(&ct, "Content-Type: %s", ctype) >= 0 &&
	    (tmp = curl_slist_append(hdrs, ct)))
		hdrs = tmp;
	/* No "Expect: 100-continue" round trip for bodies over 1 KiB. */
	if ((tmp = curl_slist_append(hdrs, "Expect:")))
		hdrs = tmp;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_HTTPGET, 1L); /* resets the method and any body */
	/* POST and PUT always carry a Content-Length (the API answers 411 otherwise); DELETE and
	 * GET carry no body unless given one */
	if (body || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? len : 0));
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
	}
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, strcmp(method, "GET") ? method : NULL);
	CURLcode rc = curl_easy_perform(c);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
	curl_slist_free_all(hdrs);
	h->cur = NULL;
	if (rc != CURLE_OK) {
		int e = curl_errno(rc);
		const char *detail = h->errbuf[0] ? h->errbuf : curl_easy_strerror(rc);
		ctl_http_resp_release(resp);
		switch (e) {
		case -ECONNREFUSED:
			return pf_error_set(err, e, "", "cannot connect to %s: %s", url, detail);
		case -ETIMEDOUT:
			return pf_error_set(err, e, "", "%s %s timed out: %s", method, url, detail);
		case -EPROTO:
			return pf_error_set(err, e, "", "TLS with %s failed: %s", url, detail);
		case -E2BIG:
			return pf_error_set(err, e, "", "%s %s: the answer is over %zu bytes",
					    method, url, CTL_HTTP_MAX_BODY);
		case -EINTR:
			return pf_error_set(err, e, "", "%s %s: interrupted", method, url);
		default:
			return pf_error_set(err, e, "", "%s %s failed: %s", method, url, detail);
		}
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
	return 0;
}

int ctl_http_status_errno(long status)
{
	switch (status) {
	case 400:
	case 422:
		return -EINVAL;
	case 401:
		return -EACCES;
	case 403:
		return -EPERM;
	case 404:
		return -ENOENT;
	case 409:
		return -EBUSY;
	case 413:
		return -E2BIG;
	default:
		return -EIO;
	}
}

int ctl_http_error_from_resp(const struct ctl_http_resp *r, const char *what, struct pf_error *err)
{
	int e = ctl_http_status_errno(r->status);
	json_t *j = json_loadb((const char *)r->body.data, r->body.len, 0, NULL);
	json_t *eo = json_object_get(j, "error");
	const char *code = json_string_value(json_object_get(eo, "code"));
	const char *msg = json_string_value(json_object_get(eo, "message"));
	if (msg) {
		pf_error_set(err, e, "", "%s (HTTP %ld %s)", msg, r->status, code ? code : "error");
	} else {
		/* Not the API's error shape (a proxy, another server): show the start of it. */
		size_t n = pf_min(r->body.len, (size_t)200);
		char snippet[201];
		for (size_t i = 0; i < n; i++) {
			unsigned char ch = r->body.data[i];
			snippet[i] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : ' ';
		}
		snippet[n] = '\0';
		pf_error_set(err, e, "", "HTTP %ld from %s%s%s", r->status, what, n ? ": " : "",
			     snippet);
	}
	json_decref(j);
	return e;
}

int ctl_http_json_raw(struct ctl_http *h, const char *method, const char *path, const char *ctype,
		      const void *body, size_t len, json_t **out, struct pf_error *err)
{
	struct ctl_http_resp r;
	*out = NULL;
	int rc = ctl_http_request(h, method, path, ctype, body, len, &r, err);
	if (rc < 0)
		return rc;
	_cleanup_free_ char *what = NULL;
	if (asprintf(&what, "%s %s%s", method, h->server, path) < 0)
		what = NULL;
	if (r.status < 200 || r.status > 299) {
		rc = ctl_http_error_from_resp(&r, what ? what : path, err);
		ctl_http_resp_release(&r);
		return rc;
	}
	json_error_t je;
	*out = json_loadb((const char *)r.body.data, r.body.len, 0, &je);
	if (!*out)
		rc = pf_error_set(err, -EPROTO, "", "%s: the answer is not JSON: %s",
				  what ? what : path, je.text);
	ctl_http_resp_release(&r);
	return rc;
}

int ctl_http_json(struct ctl_http *h, const char *method, const char *path, json_t *body_json,
		  json_t **out, struct pf_error *err)
{
	_cleanup_free_ char *body = NULL;
	if (body_json) {
		body = json_dumps(body_json, JSON_COMPACT);
		if (!body)
			return pf_error_set(err, -ENOMEM, "", "out of memory");
	}
	return ctl_http_json_raw(h, method, path, body ? "application/json" : NULL, body,
				 body ? strlen(body) : 0, out, err);
}

static int append_escaped(struct pf_buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		int rc;
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' || *p == '~') {
			rc = pf_buf_putc(b, *p);
		} else {
			char enc[3] = {'%', hex[*p >> 4], hex[*p & 15]};
			rc = pf_buf_append(b, enc, 3);
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

int ctl_query_add(struct pf_buf *q, const char *key, const char *value)
{
	if (!value)
		return 0;
	int rc = pf_buf_putc(q, q->len && memchr(q->data, '?', q->len) ? '&' : '?');
	if (rc < 0 || (rc = append_escaped(q, key)) < 0 || (rc = pf_buf_putc(q, '=')) < 0)
		return rc;
	return append_escaped(q, value);
}

int ctl_path_add(struct pf_buf *p, const char *s)
{
	int rc = pf_buf_putc(p, '/');
	return rc < 0 ? rc : append_escaped(p, s);
}
