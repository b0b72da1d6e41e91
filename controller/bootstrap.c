/* bootstrap.c — see bootstrap.h. */
#include "bootstrap.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "fleet/fleet.h"
#include "fleet/sync.h"
#include "pf/compiler.h"
#include "pf/hash.h"
#include "pf/log.h"
#include "pf/profcfg.h"
#include "store.h"

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int pf_bootstrap_data_dir(const char *dir, char *dbpath, size_t len, struct pf_error *err)
{
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return pf_error_set(err, -errno, "data_dir", "cannot create '%s': %s", dir,
				    strerror(errno));
	struct stat st;
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return pf_error_set(err, -ENOTDIR, "data_dir", "'%s' is not a directory", dir);
	int n = snprintf(dbpath, len, "%s/profleet.db", dir);
	if (n < 0 || (size_t)n >= len)
		return pf_error_set(err, -ENAMETOOLONG, "data_dir", "path too long");
	return 0;
}

static int write_secret(const char *dir, const char *name, const char *token,
			struct pf_error *err)
{
	char path[4096], tmp[4200];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return pf_error_set(err, -errno, NULL, "cannot write %s: %s", tmp, strerror(errno));
	size_t n = strlen(token);
	bool ok = write(fd, token, n) == (ssize_t)n && write(fd, "\n", 1) == 1 && fsync(fd) == 0;
	int e = errno;
	close(fd);
	if (!ok || rename(tmp, path) < 0) {
		unlink(tmp);
		return pf_error_set(err, -(ok ? errno : e), NULL, "cannot write %s: %s", path,
				    strerror(ok ? errno : e));
	}
	return 0;
}

int pf_bootstrap_tokens(struct pf_store *st, const char *dir, struct pf_error *err)
{
	int64_t count = 0;
	int r = pf_store_token_count(st, &count);
	if (r < 0)
		return pf_error_set(err, r, NULL, "reading tokens failed");
	if (count > 0)
		return 0;
	static const struct {
		const char *role, *file, *name;
	} mk[] = {{"admin", "admin.token", "bootstrap admin"},
		  {"agent", "agent.token", "bootstrap agent enrollment"}};
	for (size_t i = 0; i < 2; i++) {
		char tok[64];
		uint8_t h[32];
		r = pf_token_generate(tok, sizeof(tok));
		if (r < 0)
			return pf_error_set(err, r, NULL, "cannot generate a token");
		r = write_secret(dir, mk[i].file, tok, err);
		if (r < 0)
			return r;
		pf_sha256(tok, strlen(tok), h);
		r = pf_store_token_add(st, h, mk[i].role, mk[i].name, wall_ms());
		if (r < 0)
			return pf_error_set(err, r, NULL, "storing the %s token failed", mk[i].role);
		pf_log_info("created the %s token: %s/%s (mode 0600)", mk[i].role, dir, mk[i].file);
	}
	return 0;
}

/* The whole file into a heap buffer (NUL-terminated); -EFBIG past max bytes. */
static int read_bounded(const char *path, size_t max, char **out, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return -errno;
	char *buf = malloc(max + 2);
	if (!buf) {
		fclose(fp);
		return -ENOMEM;
	}
	size_t n = fread(buf, 1, max + 1, fp);
	int r = ferror(fp) ? -EIO : n > max ? -EFBIG : 0;
	fclose(fp);
	if (r < 0) {
		free(buf);
		return r;
	}
	buf[n] = 0;
	*out = buf;
	*len = n;
	return 0;
}

int pf_bootstrap_default_config(struct pf_store *st, const char *path, struct pf_error *err)
{
	_cleanup_free_ char *body = NULL;
	size_t len = 0;
	int r = read_bounded(path, PF_PROFCFG_MAX_DOC, &body, &len);
	if (r < 0)
		return pf_error_set(err, r, "default_config", "cannot read '%s': %s", path,
				    r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
	struct pf_error perr = {0};
	struct pf_profcfg *cfg = NULL;
	r = pf_profcfg_parse(body, len, &cfg, &perr);
	pf_profcfg_free(cfg);
	if (r < 0) {
		/* The message names the file; the path stays the key path inside it. */
		bool fresh = err && !err->code;
		pf_error_set(err, r, NULL, "default config %s: %s", path, perr.msg);
		if (fresh)
			snprintf(err->path, sizeof(err->path), "%s", perr.path);
		return r;
	}
	struct pf_config_version cv;
	memset(&cv, 0, sizeof(cv));
	r = pf_store_config_get(st, "default", 0, &cv);
	if (r == 0) {
		pf_log_info("config 'default' is at version %lld in the store; %s not applied",
			    (long long)cv.version, path);
		pf_config_version_release(&cv);
		return 0;
	}
	if (r != -ENOENT)
		return pf_error_set(err, r, NULL, "reading config 'default' failed: %s",
				    strerror(-r));
	uint8_t hash[32];
	int64_t version = 0;
	pf_sha256(body, len, hash);
	r = pf_store_config_put(st, "default", body, len, hash, wall_ms(), &version, NULL);
	if (r < 0)
		return pf_error_set(err, r, NULL, "storing config 'default' failed: %s",
				    strerror(-r));
	pf_log_info("stored %s as config 'default' version %lld", path, (long long)version);
	return 1;
}

#define TOKEN_MIN 16
#define TOKEN_MAX 4096

/* Trims whitespace around the secret in text[0..*len) and checks it: the start of the secret
 * (its length in *len), or NULL with err set (key names the setting). */
static const char *secret_check(const char *text, size_t *len, const char *key, const char *path,
				struct pf_error *err)
{
	const char *tok = text;
	size_t n = *len;
	while (n > 0 && (*tok == ' ' || *tok == '\t' || *tok == '\n' || *tok == '\r')) {
		tok++;
		n--;
	}
	while (n > 0 && (tok[n - 1] == ' ' || tok[n - 1] == '\t' || tok[n - 1] == '\n' ||
			 tok[n - 1] == '\r'))
		n--;
	if (n < TOKEN_MIN || n > TOKEN_MAX) {
		pf_error_set(err, -EINVAL, key, "the token in '%s' must be %d..%d bytes, is %zu", path,
			     TOKEN_MIN, TOKEN_MAX, n);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)tok[i] <= 0x20 || (unsigned char)tok[i] >= 0x7f) {
			pf_error_set(err, -EINVAL, key, "the token in '%s' has a space or control byte",
				     path);
			return NULL;
		}
	*len = n;
	return tok;
}

static int read_token_file(const char *path, const char *key, char **text, size_t *len,
			   struct pf_error *err)
{
	int r = read_bounded(path, TOKEN_MAX + 1024, text, len);
	if (r < 0)
		return pf_error_set(err, r, key, "cannot read '%s': %s", path,
				    r == -EFBIG ? "too large" : strerror(-r));
	return 0;
}

int pf_bootstrap_import_token(struct pf_store *st, const char *path, const char *role,
			      struct pf_error *err)
{
	char key[32];
	snprintf(key, sizeof(key), "tokens.%s_file", role);
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = read_token_file(path, key, &text, &len, err);
	if (r < 0)
		return r;
	const char *tok = secret_check(text, &len, key, path, err);
	if (!tok)
		return err->code;
	uint8_t h[32];
	char have[16];
	pf_sha256(tok, len, h);
	r = pf_store_token_lookup(st, h, have, sizeof(have));
	if (r == 0) {
		if (strcmp(have, role))
			pf_log_warn("the token in %s is stored with role %s, not %s", path, have,
				    role);
		return 0;
	}
	if (r != -ENOENT)
		return pf_error_set(err, r, key, "reading tokens failed: %s", strerror(-r));
	char name[64];
	snprintf(name, sizeof(name), "imported %s token", role);
	r = pf_store_token_add(st, h, role, name, wall_ms());
	if (r == -EEXIST)
		return 0; /* another replica sharing the store added it a moment ago */
	if (r < 0)
		return pf_error_set(err, r, key, "storing the %s token failed: %s", role,
				    strerror(-r));
	pf_log_info("added the %s token from %s", role, path);
	return 1;
}

#define TOKEN_DIR_CREATOR "token-file-dir"
#define TOKEN_DIR_MAX_FILES 1000

struct dir_tokens {
	char (*names)[PF_TOKEN_NAME_MAX + 1];
	size_t n;
	struct pf_token_info stale[64]; /* ours, file gone (revoked after the walk) */
	size_t n_stale;
	const char *name; /* lookup by name */
	struct pf_token_info found;
	bool has;
};

static int find_name_cb(const struct pf_token_info *t, void *ud)
{
	struct dir_tokens *d = ud;
	if (strcmp(t->name, d->name) == 0) {
		d->found = *t;
		d->has = true;
		return 1;
	}
	return 0;
}

static int stale_cb(const struct pf_token_info *t, void *ud)
{
	struct dir_tokens *d = ud;
	if (strcmp(t->created_by, TOKEN_DIR_CREATOR) != 0)
		return 0;
	for (size_t i = 0; i < d->n; i++)
		if (strcmp(d->names[i], t->name) == 0)
			return 0;
	if (d->n_stale < PF_ARRAY_SIZE(d->stale))
		d->stale[d->n_stale++] = *t;
	return 0;
}

static bool file_token_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > PF_TOKEN_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_' || s[i] == '.' ||
		      s[i] == '@'))
			return false;
	return true;
}

/* One file of the directory: "ROLE:SECRET". */
static int import_dir_file(struct pf_store *st, const char *path, const char *name,
			   struct dir_tokens *d, struct pf_error *err)
{
	static const char key[] = "tokens.file_dir";
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = read_token_file(path, key, &text, &len, err);
	if (r < 0)
		return r;
	const char *colon = memchr(text, ':', len);
	char role[16] = "";
	if (colon && (size_t)(colon - text) < sizeof(role))
		memcpy(role, text, (size_t)(colon - text));
	if (!colon || (strcmp(role, "admin") && strcmp(role, "operator") && strcmp(role, "viewer") &&
		       strcmp(role, "agent")))
		return pf_error_set(err, -EINVAL, key,
				    "'%s' must hold ROLE:SECRET with ROLE admin, operator, viewer "
				    "or agent",
				    path);
	size_t slen = len - (size_t)(colon + 1 - text);
	const char *tok = secret_check(colon + 1, &slen, key, path, err);
	if (!tok)
		return err->code;
	uint8_t h[32];
	pf_sha256(tok, slen, h);
	struct pf_token_info t;
	r = pf_store_token_find(st, h, &t);
	if (r == 0) {
		if (strcmp(t.role, role))
			pf_log_warn("the token in %s is stored with role %s, not %s", path, t.role,
				    role);
		return 0;
	}
	if (r != -ENOENT)
		return pf_error_set(err, r, key, "reading tokens failed: %s", strerror(-r));
	d->name = name;
	d->has = false;
	r = pf_store_token_foreach(st, find_name_cb, d);
	if (r < 0)
		return pf_error_set(err, r, key, "reading tokens failed: %s", strerror(-r));
	if (d->has) {
		if (strcmp(d->found.created_by, TOKEN_DIR_CREATOR) != 0)
			return pf_error_set(err, -EEXIST, key,
					    "'%s': a token named '%s' exists that this directory did "
					    "not provide; rename the file or revoke that token",
					    path, name);
		r = pf_store_token_revoke(st, d->found.id, NULL);
		if (r < 0)
			return pf_error_set(err, r, key, "replacing token '%s' failed", name);
		pf_log_info("token '%s' from %s: new secret, the old one is revoked", name, path);
	}
	memset(&t, 0, sizeof(t));
	snprintf(t.name, sizeof(t.name), "%s", name);
	snprintf(t.role, sizeof(t.role), "%s", role);
	snprintf(t.created_by, sizeof(t.created_by), "%s", TOKEN_DIR_CREATOR);
	t.created_ms = wall_ms();
	r = pf_store_token_create(st, h, &t);
	if (r < 0)
		return pf_error_set(err, r, key, "storing token '%s' failed: %s", name, strerror(-r));
	pf_log_info("added the %s token '%s' from %s", role, name, path);
	return 1;
}

int pf_bootstrap_import_token_dir(struct pf_store *st, const char *dir, struct pf_error *err)
{
	static const char key[] = "tokens.file_dir";
	DIR *dp = opendir(dir);
	if (!dp)
		return pf_error_set(err, -errno, key, "cannot open '%s': %s", dir, strerror(errno));
	struct dir_tokens d = {0};
	d.names = calloc(TOKEN_DIR_MAX_FILES, sizeof(*d.names));
	int rc = d.names ? 0 : pf_error_set(err, -ENOMEM, key, "out of memory");
	struct dirent *e;
	while (rc >= 0 && (e = readdir(dp))) {
		if (e->d_name[0] == '.')
			continue; /* ., .., and a Secret volume's ..data links */
		char path[4096];
		int n = snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		struct stat sb;
		if (n < 0 || (size_t)n >= sizeof(path) || stat(path, &sb) < 0 || !S_ISREG(sb.st_mode))
			continue;
		if (!file_token_name_ok(e->d_name)) {
			rc = pf_error_set(err, -EINVAL, key,
					  "'%s': a token name is 1..%d of [A-Za-z0-9._@-]", path,
					  PF_TOKEN_NAME_MAX);
			break;
		}
		if (d.n == TOKEN_DIR_MAX_FILES) {
			rc = pf_error_set(err, -E2BIG, key, "'%s' holds more than %d tokens", dir,
					  TOKEN_DIR_MAX_FILES);
			break;
		}
		/* checked above: at most PF_TOKEN_NAME_MAX characters */
		snprintf(d.names[d.n++], sizeof(d.names[0]), "%.*s", (int)sizeof(d.names[0]) - 1,
			 e->d_name);
		int r = import_dir_file(st, path, e->d_name, &d, err);
		if (r < 0)
			rc = r;
	}
	closedir(dp);
	if (rc >= 0) {
		int r = pf_store_token_foreach(st, stale_cb, &d);
		if (r < 0)
			rc = pf_error_set(err, r, key, "reading tokens failed: %s", strerror(-r));
		for (size_t i = 0; rc >= 0 && i < d.n_stale; i++) {
			r = pf_store_token_revoke(st, d.stale[i].id, NULL);
			if (r < 0 && r != -ENOENT)
				rc = pf_error_set(err, r, key, "revoking token '%s' failed",
						  d.stale[i].name);
			else
				pf_log_info("token '%s' revoked: its file is gone from %s",
					    d.stale[i].name, dir);
		}
	}
	if (rc >= 0)
		rc = (int)d.n;
	free(d.names);
	return rc;
}

static int load_cfg(const struct pf_config_version *cv, void *ud)
{
	return pf_fleet_config_set(ud, cv->name, cv->version, cv->hash, cv->body, cv->body_len,
				   cv->created_ms);
}

struct load_asg {
	struct pf_fleet *f;
	struct pf_error *err;
};

static int load_asg(const struct pf_assignment *a, void *ud)
{
	struct load_asg *l = ud;
	int r = pf_fleet_assignment_set(l->f, a->name, a->selector, a->config, a->priority,
					l->err);
	if (r < 0)
		pf_log_warn("assignment '%s' skipped: %s", a->name, l->err->msg);
	pf_error_clear(l->err);
	return 0;
}

static int load_agent(const struct pf_agent_row *row, void *ud)
{
	return pf_sync_load_agent(ud, row);
}

int pf_bootstrap_load_fleet(struct pf_store *st, struct pf_fleet *f, struct pf_error *err)
{
	int r = pf_store_config_foreach_latest(st, load_cfg, f);
	if (r < 0)
		return pf_error_set(err, r, NULL, "loading configs failed");
	struct load_asg la = {.f = f, .err = err};
	r = pf_store_assignment_foreach(st, load_asg, &la);
	if (r < 0)
		return pf_error_set(err, r, NULL, "loading assignments failed");
	r = pf_store_agents_mark_all_disconnected(st);
	if (r < 0)
		return pf_error_set(err, r, NULL, "resetting agent connection state failed");
	r = pf_store_agents_foreach(st, load_agent, f);
	if (r < 0)
		return pf_error_set(err, r, NULL, "loading agents failed");
	pf_fleet_reconcile(f);
	pf_log_info("loaded %zu agents from the fleet store", pf_fleet_count(f));
	return 0;
}

long pf_raise_nofile_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return -1;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			pf_log_warn("cannot raise the open-files limit: %s", strerror(errno));
	}
	getrlimit(RLIMIT_NOFILE, &rl);
	return (long)rl.rlim_cur;
}
