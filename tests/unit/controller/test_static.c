/* test_static.c — the console's static files (ui/static.h) from a real directory made in the
 * test: content types, ETag and 304, gzip only when asked and smaller, immutable caching of
 * hashed assets, the security headers on every answer, redirects, 404/405, no way out of the
 * loaded set, and the load bounds and errors. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "pf/buf.h"
#include "pf/gzip.h"
#include "ui/static.h"

struct fx {
	char dir[64];
	struct pf_ui *ui;
};

static void write_file(const char *dir, const char *name, const char *data, size_t len)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static char big_js[4096];

static int setup(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));
	snprintf(x->dir, sizeof(x->dir), "/tmp/pf-test-static-XXXXXX");
	assert_non_null(mkdtemp(x->dir));
	char sub[128];
	snprintf(sub, sizeof(sub), "%s/assets", x->dir);
	assert_int_equal(mkdir(sub, 0755), 0);
	const char *html = "<!doctype html><title>t</title>";
	write_file(x->dir, "index.html", html, strlen(html));
	for (size_t i = 0; i < sizeof(big_js) - 1; i++)
		big_js[i] = "let a = 1;\n"[i % 11];
	write_file(x->dir, "assets/main-ABC123.js", big_js, strlen(big_js));
	write_file(x->dir, "assets/x.png", "\x89PNG\r\n\x1a\n", 8);
	write_file(x->dir, ".hidden", "secret", 6);
	struct pf_error err = {0};
	x->ui = pf_ui_load(x->dir, &err);
	assert_non_null(x->ui);
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fx *x = *state;
	pf_ui_free(x->ui);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", x->dir);
	assert_int_equal(system(cmd), 0);
	free(x);
	return 0;
}

static const char *header(const struct pf_ui_response *r, const char *name)
{
	for (size_t i = 0; i < r->n_headers; i++)
		if (strcmp(r->headers[i].name, name) == 0)
			return r->headers[i].value;
	return NULL;
}

static void assert_security_headers(const struct pf_ui_response *r)
{
	const char *csp = header(r, "content-security-policy:");
	assert_non_null(csp);
	assert_non_null(strstr(csp, "script-src 'self'"));
	assert_non_null(strstr(csp, "style-src 'self'"));
	assert_non_null(strstr(csp, "frame-ancestors 'none'"));
	assert_null(strstr(csp, "unsafe-inline"));
	assert_string_equal(header(r, "x-content-type-options:"), "nosniff");
}

static void test_files_types_and_caching(void **state)
{
	struct fx *x = *state;
	struct pf_ui_response r;
	assert_int_equal(pf_ui_file_count(x->ui), 3); /* the hidden file is not loaded */

	pf_ui_handle(x->ui, "GET", "/ui/", NULL, true, &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.content_type, "text/html; charset=utf-8");
	assert_string_equal(header(&r, "cache-control:"), "no-cache");
	assert_null(header(&r, "content-encoding:")); /* too small to gain from gzip */
	assert_int_equal(r.body_len, strlen("<!doctype html><title>t</title>"));
	assert_security_headers(&r);
	char etag[64];
	snprintf(etag, sizeof(etag), "%s", header(&r, "etag:"));
	assert_int_equal(strlen(etag), 18);
	assert_int_equal(etag[0], '"');

	pf_ui_handle(x->ui, "GET", "/ui/", etag, true, &r);
	assert_int_equal(r.status, 304);
	assert_int_equal(r.body_len, 0);
	assert_security_headers(&r);
	char list[128];
	snprintf(list, sizeof(list), "\"0000000000000000\", W/%s", etag);
	pf_ui_handle(x->ui, "GET", "/ui/", list, true, &r);
	assert_int_equal(r.status, 304);
	pf_ui_handle(x->ui, "GET", "/ui/", "\"0000000000000000\"", true, &r);
	assert_int_equal(r.status, 200);

	pf_ui_handle(x->ui, "GET", "/ui/assets/main-ABC123.js", NULL, false, &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.content_type, "text/javascript; charset=utf-8");
	assert_string_equal(header(&r, "cache-control:"), "public, max-age=31536000, immutable");
	assert_null(header(&r, "content-encoding:"));
	assert_int_equal(r.body_len, strlen(big_js));
	assert_memory_equal(r.body, big_js, r.body_len);
	assert_string_equal(header(&r, "vary:"), "Accept-Encoding");

	pf_ui_handle(x->ui, "GET", "/ui/assets/main-ABC123.js", NULL, true, &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(header(&r, "content-encoding:"), "gzip");
	assert_true(r.body_len < strlen(big_js) / 4);
	struct pf_buf out;
	pf_buf_init(&out, 1 << 20);
	assert_int_equal(pf_gzip_decompress(r.body, r.body_len, 1 << 20, &out), 0);
	assert_int_equal(out.len, strlen(big_js));
	assert_memory_equal(out.data, big_js, out.len);
	pf_buf_release(&out);

	pf_ui_handle(x->ui, "GET", "/ui/assets/x.png", NULL, true, &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.content_type, "image/png");
	assert_null(header(&r, "content-encoding:")); /* not a text type */
}

static void test_redirects_errors_and_no_escape(void **state)
{
	struct fx *x = *state;
	struct pf_ui_response r;
	assert_true(pf_ui_match("/"));
	assert_true(pf_ui_match("/ui"));
	assert_true(pf_ui_match("/ui/a"));
	assert_false(pf_ui_match("/uix"));
	assert_false(pf_ui_match("/api/v1/agents"));

	pf_ui_handle(x->ui, "GET", "/", NULL, true, &r);
	assert_int_equal(r.status, 302);
	assert_string_equal(header(&r, "location:"), "/ui/");
	pf_ui_handle(x->ui, "GET", "/ui", NULL, true, &r);
	assert_int_equal(r.status, 302);
	assert_security_headers(&r);

	const char *missing[] = {"/ui/nope.js", "/ui/../index.html", "/ui/assets/../index.html",
				 "/ui/.hidden", "/ui//index.html",   "/ui/assets/"};
	for (size_t i = 0; i < sizeof(missing) / sizeof(missing[0]); i++) {
		pf_ui_handle(x->ui, "GET", missing[i], NULL, true, &r);
		assert_int_equal(r.status, 404);
		assert_security_headers(&r);
	}
	pf_ui_handle(x->ui, "POST", "/ui/", NULL, true, &r);
	assert_int_equal(r.status, 405);
	assert_string_equal(header(&r, "allow:"), "GET");

	/* not installed: 404 that says how to build it */
	pf_ui_handle(NULL, "GET", "/ui/", NULL, true, &r);
	assert_int_equal(r.status, 404);
	assert_non_null(strstr((const char *)r.body, "npm"));
}

static void test_content_types(void **state)
{
	(void)state;
	assert_string_equal(pf_ui_content_type("a.css"), "text/css; charset=utf-8");
	assert_string_equal(pf_ui_content_type("a.svg"), "image/svg+xml");
	assert_string_equal(pf_ui_content_type("a.json"), "application/json");
	assert_string_equal(pf_ui_content_type("js"), "application/octet-stream");
	assert_string_equal(pf_ui_content_type("a.exe"), "application/octet-stream");
}

static void test_load_errors(void **state)
{
	(void)state;
	struct pf_error err = {0};
	errno = 0;
	assert_null(pf_ui_load("/nonexistent-pf-ui-dir", &err));
	assert_int_equal(errno, ENOENT);
	assert_non_null(strstr(err.msg, "/nonexistent-pf-ui-dir"));

	char dir[64];
	snprintf(dir, sizeof(dir), "/tmp/pf-test-static-XXXXXX");
	assert_non_null(mkdtemp(dir));
	write_file(dir, "app.js", "x", 1);
	memset(&err, 0, sizeof(err));
	assert_null(pf_ui_load(dir, &err)); /* no index.html */
	assert_int_equal(errno, ENOENT);
	assert_non_null(strstr(err.msg, "index.html"));

	/* too many files */
	for (int i = 0; i <= PF_UI_MAX_FILES; i++) {
		char n[32];
		snprintf(n, sizeof(n), "f%d.txt", i);
		write_file(dir, n, "x", 1);
	}
	write_file(dir, "index.html", "<p>", 3);
	memset(&err, 0, sizeof(err));
	assert_null(pf_ui_load(dir, &err));
	assert_int_equal(errno, E2BIG);

	/* an explicit directory that is missing is an error; the default places are optional */
	memset(&err, 0, sizeof(err));
	char used[256];
	assert_null(pf_ui_open("/nonexistent-pf-ui-dir", used, sizeof(used), &err));
	assert_string_equal(used, "/nonexistent-pf-ui-dir");
	assert_int_not_equal(err.code, 0);

	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_files_types_and_caching, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_redirects_errors_and_no_escape, setup, teardown),
	    cmocka_unit_test(test_content_types),
	    cmocka_unit_test(test_load_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
