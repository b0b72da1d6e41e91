/* static.h — the fleet console's files, served at /ui/. The built console (ui/, see
 * docs/console.md) is read once from a directory at start into memory; every file gets its
 * content type, a strong ETag (SHA-256 prefix of its bytes) and, for text types, a gzip form.
 * Requests never touch the file system, so no request path can name a file outside the set.
 *
 * Answers: "/" and "/ui" redirect to "/ui/"; "/ui/" is index.html; "/ui/assets/..." (names
 * carry a content hash) are cached for a year as immutable, everything else is revalidated
 * (Cache-Control: no-cache + ETag, 304 on If-None-Match). Every answer carries a strict
 * Content-Security-Policy (no inline script or style, frame-ancestors 'none'),
 * X-Content-Type-Options: nosniff and Referrer-Policy: no-referrer.
 *
 * Owns: the loaded files (bounded: PF_UI_MAX_FILES files, PF_UI_MAX_BYTES in all). */
#ifndef PF_UI_STATIC_H
#define PF_UI_STATIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/error.h"

#define PF_UI_MAX_FILES 512
#define PF_UI_MAX_BYTES ((size_t)32 << 20)
#define PF_UI_MAX_HEADERS 10
#define PF_UI_CSP                                                                                  \
	"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "          \
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; "               \
	"frame-ancestors 'none'"

struct pf_ui;

struct pf_ui_header {
	const char *name; /* lower case, with the colon: "etag:" */
	char value[320];
};

struct pf_ui_response {
	int status;
	const char *content_type;
	const uint8_t *body; /* borrowed: valid while the pf_ui lives */
	size_t body_len;
	size_t n_headers;
	struct pf_ui_header headers[PF_UI_MAX_HEADERS];
};

/* Reads every regular file under dir (recursively, 4 levels deep at most). NULL with errno
 * set: ENOENT when dir does not exist or holds no index.html, E2BIG over the bounds; err
 * says which file. */
struct pf_ui *pf_ui_load(const char *dir, struct pf_error *err);
/* dir, or when NULL the default places beside the running binary (/proc/self/exe): "ui",
 * then "../share/profleet/ui". NULL with errno ENOENT when no default place has a console;
 * *used (may be NULL) receives the directory tried last. */
struct pf_ui *pf_ui_open(const char *dir, char *used, size_t used_len, struct pf_error *err);
void pf_ui_free(struct pf_ui *ui);
size_t pf_ui_file_count(const struct pf_ui *ui);

/* Whether the console answers this path ("/", "/ui" or under "/ui/"). */
bool pf_ui_match(const char *path);
/* Answers one request for a path pf_ui_match() accepted. ui may be NULL (not installed: 404
 * that says how to build it). if_none_match: the request header or NULL. */
void pf_ui_handle(const struct pf_ui *ui, const char *method, const char *path,
		  const char *if_none_match, bool accept_gzip, struct pf_ui_response *out);

/* The content type for a file name by its extension ("application/octet-stream" if unknown). */
const char *pf_ui_content_type(const char *name);

#endif
