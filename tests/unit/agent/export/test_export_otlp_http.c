/* Unit tests of agent/export/otlp_http.c (and the exporter interface over it) against a tiny
 * HTTP server in this test on 127.0.0.1 (ephemeral port): method, path, Content-Type,
 * Content-Encoding gzip, configured headers, body (gunzipped, passes the OTLP conformance
 * checker), error statuses, timeout, connection refused, endpoint validation, and the
 * asynchronous submit path (busy refusal, done callback, health); the tls settings' files
 * (loaded at creation: key paths and OpenSSL's reason; handshakes are in
 * tests/integration/test_export_tls.py). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "export/exporter.h"
#include "export/otlp_http.h"
#include "loopback.h"
#include "otlp_profiles.h"
#include "pf/gzip.h"
#include "prof_fixture.h"
#include "profcheck.h"

/* ---- the test server: one connection per run, records the request, answers as told ---- */

struct server {
	int lfd;
	int port;
	pthread_t th;
	/* behaviour */
	int status;          /* 0 = never answer (hang until the client goes away) */
	const char *body;
	/* recorded */
	char head[8192];
	struct pf_buf req_body;
	bool got;
};

static void *serve(void *arg)
{
	struct server *s = arg;
	struct pollfd p = {.fd = s->lfd, .events = POLLIN};
	if (poll(&p, 1, 10000) != 1)
		return NULL;
	int c = accept(s->lfd, NULL, NULL);
	if (c < 0)
		return NULL;
	struct pf_buf in;
	pf_buf_init(&in, 16 << 20);
	size_t head_len = 0;
	long long clen = -1;
	for (;;) {
		uint8_t tmp[4096];
		struct pollfd q = {.fd = c, .events = POLLIN};
		if (poll(&q, 1, 10000) != 1)
			break;
		ssize_t n = read(c, tmp, sizeof(tmp));
		if (n <= 0)
			break;
		pf_buf_append(&in, tmp, (size_t)n);
		if (!head_len) {
			char *e = strstr(pf_buf_str(&in), "\r\n\r\n");
			if (e) {
				head_len = (size_t)(e - (char *)in.data) + 4;
				snprintf(s->head, sizeof(s->head), "%.*s", (int)head_len, in.data);
				char *cl = strcasestr(s->head, "\r\nContent-Length:");
				if (cl)
					clen = strtoll(cl + 17, NULL, 10);
			}
		}
		if (head_len && clen >= 0 && in.len - head_len >= (size_t)clen)
			break;
	}
	if (head_len && clen >= 0)
		pf_buf_append(&s->req_body, in.data + head_len, in.len - head_len);
	s->got = head_len > 0;
	pf_buf_release(&in);
	if (s->status) {
		char resp[1024];
		const char *b = s->body ? s->body : "";
		int n = snprintf(resp, sizeof(resp),
				 "HTTP/1.1 %d X\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
				 "\r\n%s",
				 s->status, strlen(b), b);
		if (write(c, resp, (size_t)n) != n)
			fprintf(stderr, "server: short write\n");
	} else {
		/* hang: wait for the client to give up */
		struct pollfd q = {.fd = c, .events = POLLIN};
		poll(&q, 1, 10000);
	}
	close(c);
	return NULL;
}

static void server_start(struct server *s, int status, const char *body)
{
	memset(s, 0, sizeof(*s));
	s->status = status;
	s->body = body;
	pf_buf_init(&s->req_body, 16 << 20);
	s->lfd = test_loopback_listen(4, &s->port);
	assert_true(s->lfd >= 0);
	assert_int_equal(pthread_create(&s->th, NULL, serve, s), 0);
}

static void server_stop(struct server *s)
{
	pthread_join(s->th, NULL);
	close(s->lfd);
}

static void server_done(struct server *s)
{
	pf_buf_release(&s->req_body);
}

static bool has_header(const struct server *s, const char *line)
{
	char want[512];
	snprintf(want, sizeof(want), "\r\n%s\r\n", line);
	return strcasestr(s->head, want) != NULL;
}

/* ---- fixtures ---- */

static struct pf_buf bytes;
static uint8_t pid16[16];

static int setup(void **state)
{
	struct pf_prof_window *w = prof_fixture_window(PROF_FIX_TIMESTAMPS | PROF_FIX_LINK);
	pf_buf_init(&bytes, 1 << 20);
	assert_int_equal(pf_otlp_profiles_encode(w, &bytes, pid16, NULL), 0);
	pf_prof_window_free(w);
	return 0;
}

static int teardown(void **state)
{
	pf_buf_release(&bytes);
	return 0;
}

static struct pf_kv_str headers[] = {{"X-Scope-OrgID", "tenant-1"},
				     {"Authorization", "Bearer abc"}};

static void cfg_for(struct pf_exporter *cfg, char *url, size_t url_len, int port,
		    const char *path, enum pf_compression comp)
{
	snprintf(url, url_len, "http://127.0.0.1:%d%s", port, path);
	*cfg = (struct pf_exporter){.type = PF_EXPORTER_OTLP_HTTP, .endpoint = url,
				    .n_headers = 2, .headers = headers, .compression = comp,
				    .timeout_seconds = 5};
}

static void test_post_gzip(void **state)
{
	struct server s;
	server_start(&s, 200, "");
	char url[128];
	struct pf_exporter cfg;
	cfg_for(&cfg, url, sizeof(url), s.port, "", PF_COMPRESSION_GZIP);
	struct pf_error err = {0};
	struct agent_otlp_http *h = agent_otlp_http_new(&cfg, &err);
	assert_non_null(h);
	int status = -1;
	int r = agent_otlp_http_post(h, bytes.data, bytes.len, &status, &err);
	if (r)
		fprintf(stderr, "post: %s\n", err.msg);
	assert_int_equal(r, 0);
	assert_int_equal(status, 200);
	server_stop(&s);
	assert_true(s.got);
	assert_true(strncmp(s.head, "POST /v1development/profiles HTTP/1.1\r\n", 39) == 0);
	assert_true(has_header(&s, "Content-Type: application/x-protobuf"));
	assert_true(has_header(&s, "Content-Encoding: gzip"));
	assert_true(has_header(&s, "X-Scope-OrgID: tenant-1"));
	assert_true(has_header(&s, "Authorization: Bearer abc"));
	char host[64];
	snprintf(host, sizeof(host), "Host: 127.0.0.1:%d", s.port);
	assert_true(has_header(&s, host));
	struct pf_buf plain;
	pf_buf_init(&plain, 16 << 20);
	assert_int_equal(pf_gzip_decompress(s.req_body.data, s.req_body.len, 16 << 20, &plain), 0);
	assert_int_equal(plain.len, bytes.len);
	assert_memory_equal(plain.data, bytes.data, bytes.len);
	struct profcheck_result res;
	assert_int_equal(profcheck_run(plain.data, plain.len, &res), 0);
	profcheck_release(&res);
	pf_buf_release(&plain);
	server_done(&s);
	agent_otlp_http_free(h);
}

static void test_post_plain_custom_path(void **state)
{
	struct server s;
	server_start(&s, 202, "");
	char url[128];
	struct pf_exporter cfg;
	cfg_for(&cfg, url, sizeof(url), s.port, "/custom/otlp", PF_COMPRESSION_NONE);
	cfg.n_headers = 0;
	struct agent_otlp_http *h = agent_otlp_http_new(&cfg, NULL);
	assert_non_null(h);
	assert_int_equal(agent_otlp_http_post(h, bytes.data, bytes.len, NULL, NULL), 0);
	server_stop(&s);
	assert_true(strncmp(s.head, "POST /custom/otlp HTTP/1.1\r\n", 28) == 0);
	assert_null(strcasestr(s.head, "Content-Encoding"));
	assert_int_equal(s.req_body.len, bytes.len);
	assert_memory_equal(s.req_body.data, bytes.data, bytes.len);
	server_done(&s);
	agent_otlp_http_free(h);
}

/* auth: agent_token sends the agent's own token; it needs one and excludes a configured
 * Authorization header. */
static void test_auth_agent_token(void **state)
{
	struct server s;
	server_start(&s, 200, "");
	char url[128];
	struct pf_exporter cfg;
	cfg_for(&cfg, url, sizeof(url), s.port, "", PF_COMPRESSION_NONE);
	cfg.auth = PF_AUTH_AGENT_TOKEN;
	struct pf_error err = {0};
	/* The fixture's Authorization header conflicts with agent_token. */
	assert_null(agent_exporter_new_opts(&cfg, NULL, &err));
	pf_error_clear(&err);
	cfg.n_headers = 1;
	assert_null(agent_exporter_new_opts(&cfg, NULL, &err));
	assert_string_equal(err.path, "auth");
	assert_non_null(strstr(err.msg, "--token-file"));
	struct agent_exporter_opts o = {.agent_token = "pf_agent_secret"};
	struct agent_exporter *x = agent_exporter_new_opts(&cfg, &o, NULL);
	assert_non_null(x);
	static const uint8_t id[16] = {1};
	assert_int_equal(agent_exporter_export(x, bytes.data, bytes.len, id, NULL), 0);
	server_stop(&s);
	assert_true(has_header(&s, "Authorization: Bearer pf_agent_secret"));
	assert_true(has_header(&s, "X-Scope-OrgID: tenant-1"));
	server_done(&s);
	agent_exporter_free(x);
}

static void test_error_status(void **state)
{
	struct server s;
	server_start(&s, 503, "overloaded, retry later");
	char url[128];
	struct pf_exporter cfg;
	cfg_for(&cfg, url, sizeof(url), s.port, "", PF_COMPRESSION_GZIP);
	struct pf_error err = {0};
	struct agent_exporter *x = agent_exporter_new(&cfg, &err);
	assert_non_null(x);
	assert_string_equal(agent_exporter_type(x), "otlp_http");
	assert_int_equal(agent_exporter_export(x, bytes.data, bytes.len, pid16, &err), -EPROTO);
	server_stop(&s);
	server_done(&s);
	assert_non_null(strstr(err.msg, "HTTP 503: overloaded, retry later"));
	struct agent_exporter_status st;
	agent_exporter_status(x, &st);
	assert_false(st.healthy);
	assert_int_equal(st.last_http_status, 503);
	assert_non_null(strstr(st.last_error, "HTTP 503"));

	/* the next success makes it healthy again */
	server_start(&s, 200, "");
	cfg_for(&cfg, url, sizeof(url), s.port, "", PF_COMPRESSION_GZIP);
	agent_exporter_free(x);
	x = agent_exporter_new(&cfg, &err);
	assert_int_equal(agent_exporter_export(x, bytes.data, bytes.len, pid16, NULL), 0);
	server_stop(&s);
	server_done(&s);
	agent_exporter_status(x, &st);
	assert_true(st.healthy);
	agent_exporter_free(x);

	server_start(&s, 400, "bad request");
	cfg_for(&cfg, url, sizeof(url), s.port, "", PF_COMPRESSION_GZIP);
	struct agent_otlp_http *h = agent_otlp_http_new(&cfg, NULL);
	int status = 0;
	assert_int_equal(agent_otlp_http_post(h, bytes.data, bytes.len, &status, NULL), -EPROTO);
	assert_int_equal(status, 400);
	server_stop(&s);
	server_done(&s);
	agent_otlp_http_free(h);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void test_timeout_and_refused(void **state)
{
	struct server s;
	server_start(&s, 0, NULL); /* never answers */
	char url[128];
	struct pf_exporter cfg;
	cfg_for(&cfg, url, sizeof(url), s.port, "", PF_COMPRESSION_GZIP);
	cfg.timeout_seconds = 1;
	struct agent_otlp_http *h = agent_otlp_http_new(&cfg, NULL);
	uint64_t t0 = mono_ms();
	assert_int_equal(agent_otlp_http_post(h, bytes.data, bytes.len, NULL, NULL), -ETIMEDOUT);
	uint64_t took = mono_ms() - t0;
	assert_true(took >= 900 && took < 3000);
	agent_otlp_http_free(h);
	server_stop(&s);
	server_done(&s);

	/* a port nobody listens on: bind one, note it, close it */
	cfg_for(&cfg, url, sizeof(url), test_dead_port(), "", PF_COMPRESSION_GZIP);
	h = agent_otlp_http_new(&cfg, NULL);
	struct pf_error err = {0};
	assert_int_equal(agent_otlp_http_post(h, bytes.data, bytes.len, NULL, &err),
			 -ECONNREFUSED);
	assert_non_null(strstr(err.msg, "connect 127.0.0.1"));
	agent_otlp_http_free(h);
}

static void test_config_validation(void **state)
{
	struct pf_exporter cfg = {.type = PF_EXPORTER_OTLP_HTTP, .timeout_seconds = 5};
	const char *bad[] = {"ftp://x", "http://", "http://host:0", "http://host:99999",
			     "http://host:80x", "http://[::1", "http://host/pa th"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cfg.endpoint = (char *)bad[i];
		struct pf_error err = {0};
		assert_null(agent_otlp_http_new(&cfg, &err));
		assert_string_equal(err.path, "endpoint");
	}
	struct pf_kv_str evil[] = {{"X-A", "x\r\nInjected: 1"}};
	cfg.endpoint = "http://127.0.0.1:4318";
	cfg.headers = evil;
	cfg.n_headers = 1;
	struct pf_error err = {0};
	assert_null(agent_otlp_http_new(&cfg, &err));
	assert_string_equal(err.path, "headers");
	cfg.n_headers = 0;
	struct agent_otlp_http *h = agent_otlp_http_new(&cfg, NULL);
	assert_string_equal(agent_otlp_http_url(h), "http://127.0.0.1:4318/v1development/profiles");
	agent_otlp_http_free(h);
	cfg.endpoint = "https://[::1]/p";
	h = agent_otlp_http_new(&cfg, NULL);
	assert_non_null(h);
	assert_string_equal(agent_otlp_http_url(h), "https://::1:443/p");
	agent_otlp_http_free(h);
}

/* A self-signed P-256 certificate and its key, written as PEM to dir/<name>.pem, .key. */
static void write_self_signed(const char *dir, const char *name)
{
	EVP_PKEY *key = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	assert_non_null(key);
	assert_non_null(x);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, key);
	X509_NAME *n = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)name, -1, -1, 0);
	X509_set_issuer_name(x, n);
	assert_true(X509_sign(x, key, EVP_sha256()) > 0);
	char path[512];
	snprintf(path, sizeof(path), "%s/%s.pem", dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(PEM_write_X509(f, x), 1);
	fclose(f);
	snprintf(path, sizeof(path), "%s/%s.key", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL), 1);
	fclose(f);
	X509_free(x);
	EVP_PKEY_free(key);
}

/* Creation with cfg fails with err.path == path and a message containing want. */
static void expect_tls_error(const struct pf_exporter *cfg, const char *path, const char *want)
{
	struct pf_error err = {0};
	errno = 0;
	assert_null(agent_otlp_http_new(cfg, &err));
	assert_int_not_equal(errno, 0);
	if (strcmp(err.path, path) || !strstr(err.msg, want))
		print_error("got path '%s' msg '%s', want '%s' and '%s'\n", err.path, err.msg,
			    path, want);
	assert_string_equal(err.path, path);
	assert_non_null(strstr(err.msg, want));
	/* the exporter interface hands the same key path up (the agent's check hook prefixes
	 * profiling.exporters[i].) */
	struct pf_error xe = {0};
	assert_null(agent_exporter_new(cfg, &xe));
	assert_string_equal(xe.path, path);
}

static void test_tls_files(void **state)
{
	(void)state;
	char dir[] = "/tmp/pf-tls-XXXXXX";
	assert_non_null(mkdtemp(dir));
	write_self_signed(dir, "a");
	write_self_signed(dir, "b");
	char a_pem[600], a_key[600], b_key[600], junk[600], missing[600];
	snprintf(a_pem, sizeof(a_pem), "%s/a.pem", dir);
	snprintf(a_key, sizeof(a_key), "%s/a.key", dir);
	snprintf(b_key, sizeof(b_key), "%s/b.key", dir);
	snprintf(junk, sizeof(junk), "%s/junk.pem", dir);
	snprintf(missing, sizeof(missing), "%s/missing.pem", dir);
	FILE *f = fopen(junk, "w");
	assert_non_null(f);
	fputs("not a certificate\n", f);
	fclose(f);

	struct pf_exporter cfg = {.type = PF_EXPORTER_OTLP_HTTP,
				  .endpoint = "https://127.0.0.1:4318",
				  .timeout_seconds = 5};
	cfg.tls.present = true;
	/* every setting that loads */
	cfg.tls.ca_file = a_pem;
	cfg.tls.cert_file = a_pem;
	cfg.tls.key_file = a_key;
	cfg.tls.server_name = "profleet.test";
	cfg.tls.insecure_skip_verify = true;
	struct pf_error err = {0};
	struct agent_otlp_http *h = agent_otlp_http_new(&cfg, &err);
	if (!h)
		print_error("%s\n", err.msg);
	assert_non_null(h);
	agent_otlp_http_free(h);
	struct agent_exporter *x = agent_exporter_new(&cfg, &err);
	assert_non_null(x);
	agent_exporter_free(x);

	/* files that do not load: key path and OpenSSL's reason */
	cfg.tls.ca_file = missing;
	char want[700];
	snprintf(want, sizeof(want), "cannot load %s: No such file or directory", missing);
	expect_tls_error(&cfg, "tls.ca_file", want);
	cfg.tls.ca_file = junk;
	snprintf(want, sizeof(want), "cannot load %s: ", junk);
	expect_tls_error(&cfg, "tls.ca_file", want);
	cfg.tls.ca_file = a_pem;
	cfg.tls.cert_file = missing;
	expect_tls_error(&cfg, "tls.cert_file", "No such file or directory");
	cfg.tls.cert_file = junk;
	expect_tls_error(&cfg, "tls.cert_file", "cannot load");
	cfg.tls.cert_file = a_pem;
	cfg.tls.key_file = missing;
	expect_tls_error(&cfg, "tls.key_file", "cannot load");
	cfg.tls.key_file = b_key; /* a key, but not the certificate's */
	expect_tls_error(&cfg, "tls.key_file", "key values mismatch");
	cfg.tls.key_file = NULL; /* only a hand-built config gets here: the parser refuses it */
	expect_tls_error(&cfg, "tls.key_file", "go together");
	cfg.tls.cert_file = NULL;
	cfg.tls.key_file = a_key;
	expect_tls_error(&cfg, "tls.cert_file", "go together");
	/* a tls block on plain http */
	cfg.tls.key_file = NULL;
	cfg.endpoint = "http://127.0.0.1:4318";
	expect_tls_error(&cfg, "tls", "https://");
	/* without a tls block, plain http still works */
	cfg.tls = (struct pf_exporter_tls){0};
	h = agent_otlp_http_new(&cfg, NULL);
	assert_non_null(h);
	agent_otlp_http_free(h);

	const char *names[] = {"a.pem", "a.key", "b.pem", "b.key", "junk.pem"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char p[600];
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		unlink(p);
	}
	rmdir(dir);
}

/* A TLS 1.3 server that requires a client certificate: the client learns it was refused only
 * after its handshake finished, typically while it is sending. The exporter must name the
 * alert, not report the resulting "Broken pipe". The body is large so that the write fails
 * before it is done. */
struct tls_refuser {
	int lfd, port;
	pthread_t th;
	SSL_CTX *ctx;
};

static void *tls_refuse(void *arg)
{
	struct tls_refuser *t = arg;
	struct pollfd p = {.fd = t->lfd, .events = POLLIN};
	if (poll(&p, 1, 10000) != 1)
		return NULL;
	int c = accept(t->lfd, NULL, NULL);
	if (c < 0)
		return NULL;
	SSL *ssl = SSL_new(t->ctx);
	SSL_set_fd(ssl, c);
	if (SSL_accept(ssl) == 1) /* not expected: the client has no certificate */
		SSL_shutdown(ssl);
	SSL_free(ssl);
	close(c);
	return NULL;
}

static void test_tls_refused_client_cert_named(void **state)
{
	(void)state;
	char dir[] = "/tmp/pf-tls-XXXXXX";
	assert_non_null(mkdtemp(dir));
	write_self_signed(dir, "srv");
	char pem[600], key[600];
	snprintf(pem, sizeof(pem), "%s/srv.pem", dir);
	snprintf(key, sizeof(key), "%s/srv.key", dir);
	struct tls_refuser t = {0};
	t.ctx = SSL_CTX_new(TLS_server_method());
	assert_non_null(t.ctx);
	assert_int_equal(SSL_CTX_set_min_proto_version(t.ctx, TLS1_3_VERSION), 1);
	assert_int_equal(SSL_CTX_use_certificate_file(t.ctx, pem, SSL_FILETYPE_PEM), 1);
	assert_int_equal(SSL_CTX_use_PrivateKey_file(t.ctx, key, SSL_FILETYPE_PEM), 1);
	assert_int_equal(SSL_CTX_load_verify_locations(t.ctx, pem, NULL), 1);
	SSL_CTX_set_verify(t.ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	t.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(bind(t.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(t.lfd, 4), 0);
	socklen_t l = sizeof(a);
	getsockname(t.lfd, (struct sockaddr *)&a, &l);
	t.port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&t.th, NULL, tls_refuse, &t), 0);

	char url[128];
	snprintf(url, sizeof(url), "https://127.0.0.1:%d", t.port);
	struct pf_exporter cfg = {.type = PF_EXPORTER_OTLP_HTTP, .endpoint = url,
				  .compression = PF_COMPRESSION_NONE, .timeout_seconds = 5};
	cfg.tls.present = true;
	cfg.tls.insecure_skip_verify = true; /* the server's identity is not what is tested */
	struct pf_error err = {0};
	struct agent_otlp_http *h = agent_otlp_http_new(&cfg, &err);
	assert_non_null(h);
	size_t big = 8u << 20;
	uint8_t *body = calloc(1, big);
	assert_non_null(body);
	int status = -1;
	int r = agent_otlp_http_post(h, body, big, &status, &err);
	print_message("refused: rc %d, %s\n", r, err.msg);
	assert_true(r < 0);
	assert_non_null(strstr(err.msg, "certificate required"));
	free(body);
	agent_otlp_http_free(h);
	pthread_join(t.th, NULL);
	close(t.lfd);
	SSL_CTX_free(t.ctx);
	unlink(pem);
	unlink(key);
	rmdir(dir);
}

struct done_rec {
	pthread_mutex_t m;
	int calls, rc;
};

static void on_done(void *user, int rc)
{
	struct done_rec *d = user;
	pthread_mutex_lock(&d->m);
	d->calls++;
	d->rc = rc;
	pthread_mutex_unlock(&d->m);
}

static void test_submit_async(void **state)
{
	struct server s;
	server_start(&s, 0, NULL); /* hangs: the first export stays in flight */
	char url[128];
	struct pf_exporter cfg;
	cfg_for(&cfg, url, sizeof(url), s.port, "", PF_COMPRESSION_GZIP);
	cfg.timeout_seconds = 1;
	struct agent_exporter *x = agent_exporter_new(&cfg, NULL);
	struct done_rec d = {.m = PTHREAD_MUTEX_INITIALIZER};
	uint64_t t0 = mono_ms();
	assert_int_equal(agent_exporter_submit(x, bytes.data, bytes.len, pid16, on_done, &d), 0);
	/* submit returns at once and queues a second export while one is in flight */
	assert_int_equal(agent_exporter_submit(x, bytes.data, bytes.len, pid16, on_done, &d), 0);
	assert_true(mono_ms() - t0 < 500);
	/* the first attempt times out; the server is gone, so retries go on in the background */
	agent_exporter_drain(x);
	server_stop(&s);
	server_done(&s);
	struct agent_exporter_status st;
	agent_exporter_status(x, &st);
	assert_int_equal(st.submitted, 2);
	assert_int_equal(st.dropped, 0);
	assert_true(st.retried >= 1);
	assert_int_equal(st.confirmed, 0);
	assert_false(st.healthy);
	assert_non_null(strstr(st.last_error, "reading the response"));
	agent_exporter_free(x); /* the queued ones are cancelled */
	assert_int_equal(d.calls, 2);
	assert_int_equal(d.rc, -ECANCELED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_post_gzip),
		cmocka_unit_test(test_post_plain_custom_path),
		cmocka_unit_test(test_auth_agent_token),
		cmocka_unit_test(test_error_status),
		cmocka_unit_test(test_timeout_and_refused),
		cmocka_unit_test(test_config_validation),
		cmocka_unit_test(test_tls_files),
		cmocka_unit_test(test_tls_refused_client_cert_named),
		cmocka_unit_test(test_submit_async),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
