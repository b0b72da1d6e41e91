/* static.c — see static.h. */
#include "ui/static.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pf/array.h"
#include "pf/buf.h"
#include "pf/gzip.h"
#include "pf/hash.h"

#define MAX_DEPTH 4
#define MAX_NAME 256

struct ui_file {
	char name[MAX_NAME]; /* relative to the root: "index.html", "assets/app-1a2b.js" */
	const char *ctype;
	uint8_t *data;
	size_t len;
	uint8_t *gz; /* NULL when gzip would not help */
	size_t gz_len;
	char etag[24]; /* "\"" + 16 hex + "\"" */
};

struct pf_ui {
	struct ui_file *files;
	size_t n, cap;
	size_t bytes;
};

static const struct {
	const char *ext, *ctype;
	bool text;
} types[] = {
    {".html", "text/html; charset=utf-8", true},
    {".js", "text/javascript; charset=utf-8", true},
    {".mjs", "text/javascript; charset=utf-8", true},
    {".css", "text/css; charset=utf-8", true},
    {".json", "application/json", true},
    {".map", "application/json", true},
    {".svg", "image/svg+xml", true},
    {".txt", "text/plain; charset=utf-8", true},
    {".png", "image/png", false},
    {".ico", "image/x-icon", false},
    {".woff2", "font/woff2", false},
};

static int type_index(const char *name)
{
	size_t nl = strlen(name);
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		size_t el = strlen(types[i].ext);
		if (nl > el && strcmp(name + nl - el, types[i].ext) == 0)
			return (int)i;
	}
	return -1;
}

const char *pf_ui_content_type(const char *name)
{
	int t = type_index(name);
	return t < 0 ? "application/octet-stream" : types[t].ctype;
}

void pf_ui_free(struct pf_ui *ui)
{
	if (!ui)
		return;
	for (size_t i = 0; i < ui->n; i++) {
		free(ui->files[i].data);
		free(ui->files[i].gz);
	}
	free(ui->files);
	free(ui);
}

size_t pf_ui_file_count(const struct pf_ui *ui)
{
	return ui ? ui->n : 0;
}

static int read_all(const char *path, size_t max, uint8_t **out, size_t *out_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_size < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	if ((uint64_t)st.st_size > max) {
		close(fd);
		return -E2BIG;
	}
	size_t len = (size_t)st.st_size;
	uint8_t *d = malloc(len + 1);
	if (!d) {
		close(fd);
		return -ENOMEM;
	}
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, d + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? -errno : -EIO; /* shrank while we read it */
			free(d);
			close(fd);
			return e;
		}
		got += (size_t)n;
	}
	close(fd);
	*out = d;
	*out_len = len;
	return 0;
}

static int add_file(struct pf_ui *ui, const char *rel, const char *path, struct pf_error *err)
{
	if (ui->n >= PF_UI_MAX_FILES)
		return pf_error_set(err, -E2BIG, NULL, "ui: more than %d files", PF_UI_MAX_FILES);
	if (PF_ARRAY_GROW(ui->files, ui->cap, ui->n + 1, 32) < 0)
		return pf_error_set(err, -ENOMEM, NULL, "ui: out of memory");
	struct ui_file *f = &ui->files[ui->n];
	memset(f, 0, sizeof(*f));
	snprintf(f->name, sizeof(f->name), "%s", rel);
	int r = read_all(path, PF_UI_MAX_BYTES - ui->bytes, &f->data, &f->len);
	if (r == -E2BIG)
		return pf_error_set(err, r, NULL, "ui: the files add up to more than %zu bytes",
				    PF_UI_MAX_BYTES);
	if (r < 0)
		return pf_error_set(err, r, NULL, "ui: cannot read %s: %s", path, strerror(-r));
	ui->n++;
	ui->bytes += f->len;
	f->ctype = pf_ui_content_type(f->name);

	uint8_t h[PF_SHA256_LEN];
	pf_sha256(f->data, f->len, h);
	static const char hex[] = "0123456789abcdef";
	char *e = f->etag;
	*e++ = '"';
	for (int i = 0; i < 8; i++) {
		*e++ = hex[h[i] >> 4];
		*e++ = hex[h[i] & 15];
	}
	*e++ = '"';
	*e = 0;

	int t = type_index(f->name);
	if (t >= 0 && types[t].text && f->len >= 256) {
		struct pf_buf gz;
		pf_buf_init(&gz, f->len);
		if (pf_gzip_compress(f->data, f->len, 9, &gz) == 0 && gz.len < f->len) {
			f->gz = pf_buf_detach(&gz, &f->gz_len);
		}
		pf_buf_release(&gz);
	}
	return 0;
}

static int walk(struct pf_ui *ui, const char *dir, const char *rel, int depth, struct pf_error *err)
{
	DIR *d = opendir(dir);
	if (!d)
		return pf_error_set(err, -errno, NULL, "ui: cannot open %s: %s", dir,
				    strerror(errno));
	int r = 0;
	struct dirent *de;
	while (r == 0 && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue; /* ".", "..", and hidden files are never served */
		char path[4096], sub[MAX_NAME];
		int n1 = snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		int n2 = snprintf(sub, sizeof(sub), "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
		if (n1 < 0 || (size_t)n1 >= sizeof(path) || n2 < 0 || (size_t)n2 >= sizeof(sub)) {
			r = pf_error_set(err, -ENAMETOOLONG, NULL, "ui: name too long: %s", sub);
			break;
		}
		struct stat st;
		if (stat(path, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			if (depth >= MAX_DEPTH)
				r = pf_error_set(err, -E2BIG, NULL, "ui: %s is nested too deep",
						 sub);
			else
				r = walk(ui, path, sub, depth + 1, err);
		} else if (S_ISREG(st.st_mode)) {
			r = add_file(ui, sub, path, err);
		}
	}
	closedir(d);
	return r;
}

static const struct ui_file *find(const struct pf_ui *ui, const char *name)
{
	for (size_t i = 0; ui && i < ui->n; i++)
		if (strcmp(ui->files[i].name, name) == 0)
			return &ui->files[i];
	return NULL;
}

struct pf_ui *pf_ui_load(const char *dir, struct pf_error *err)
{
	struct pf_ui *ui = calloc(1, sizeof(*ui));
	if (!ui) {
		pf_error_set(err, -ENOMEM, NULL, "ui: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	int r = walk(ui, dir, "", 0, err);
	if (r == 0 && !find(ui, "index.html"))
		r = pf_error_set(err, -ENOENT, NULL, "ui: %s has no index.html", dir);
	if (r < 0) {
		pf_ui_free(ui);
		errno = -r;
		return NULL;
	}
	return ui;
}

struct pf_ui *pf_ui_open(const char *dir, char *used, size_t used_len, struct pf_error *err)
{
	if (dir) {
		if (used)
			snprintf(used, used_len, "%s", dir);
		return pf_ui_load(dir, err);
	}
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		errno = ENOENT;
		return NULL;
	}
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = 0;
	static const char *const rel[] = {"ui", "../share/profleet/ui"};
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		char d[4200];
		snprintf(d, sizeof(d), "%s/%s", exe, rel[i]);
		if (used)
			snprintf(used, used_len, "%s", d);
		struct stat st;
		if (stat(d, &st) == 0 && S_ISDIR(st.st_mode))
			return pf_ui_load(d, err);
	}
	errno = ENOENT;
	return NULL;
}

bool pf_ui_match(const char *path)
{
	return strcmp(path, "/") == 0 || strcmp(path, "/ui") == 0 || strncmp(path, "/ui/", 4) == 0;
}

static void add_header(struct pf_ui_response *out, const char *name, const char *value)
{
	if (out->n_headers >= PF_UI_MAX_HEADERS)
		return;
	struct pf_ui_header *h = &out->headers[out->n_headers++];
	h->name = name;
	snprintf(h->value, sizeof(h->value), "%s", value);
}

static void answer_text(struct pf_ui_response *out, int status, const char *msg)
{
	out->status = status;
	out->content_type = "text/plain; charset=utf-8";
	out->body = (const uint8_t *)msg;
	out->body_len = strlen(msg);
	add_header(out, "cache-control:", "no-store");
}

/* Whether an If-None-Match list names etag (or is "*"). */
static bool etag_matches(const char *inm, const char *etag)
{
	if (!inm)
		return false;
	size_t el = strlen(etag);
	for (const char *p = inm; *p;) {
		while (*p == ' ' || *p == ',')
			p++;
		if (*p == '*')
			return true;
		if (strncmp(p, "W/", 2) == 0)
			p += 2;
		if (strncmp(p, etag, el) == 0 && (p[el] == 0 || p[el] == ',' || p[el] == ' '))
			return true;
		while (*p && *p != ',')
			p++;
	}
	return false;
}

void pf_ui_handle(const struct pf_ui *ui, const char *method, const char *path,
		  const char *if_none_match, bool accept_gzip, struct pf_ui_response *out)
{
	memset(out, 0, sizeof(*out));
	add_header(out, "content-security-policy:", PF_UI_CSP);
	add_header(out, "x-content-type-options:", "nosniff");
	add_header(out, "referrer-policy:", "no-referrer");
	add_header(out, "x-frame-options:", "DENY");

	if (strcmp(path, "/") == 0 || strcmp(path, "/ui") == 0) {
		answer_text(out, 302, "the console is at /ui/\n");
		add_header(out, "location:", "/ui/");
		return;
	}
	if (strcmp(method, "GET") != 0) {
		answer_text(out, 405, "the console's files take GET\n");
		add_header(out, "allow:", "GET");
		return;
	}
	if (!ui) {
		answer_text(
		    out, 404,
		    "the console is not installed: build it (npm ci and npm run build in ui/, "
		    "see docs/console.md) or pass --ui-dir\n");
		return;
	}
	const char *name = path + 4; /* after "/ui/" */
	if (!*name)
		name = "index.html";
	const struct ui_file *f = find(ui, name);
	if (!f) {
		answer_text(out, 404, "no such file in the console\n");
		return;
	}
	bool immutable = strncmp(f->name, "assets/", 7) == 0;
	add_header(
	    out, "cache-control:", immutable ? "public, max-age=31536000, immutable" : "no-cache");
	add_header(out, "etag:", f->etag);
	if (f->gz)
		add_header(out, "vary:", "Accept-Encoding");
	out->content_type = f->ctype;
	if (etag_matches(if_none_match, f->etag)) {
		out->status = 304;
		return;
	}
	out->status = 200;
	if (f->gz && accept_gzip) {
		add_header(out, "content-encoding:", "gzip");
		out->body = f->gz;
		out->body_len = f->gz_len;
	} else {
		out->body = f->data;
		out->body_len = f->len;
	}
}
