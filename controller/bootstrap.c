/* bootstrap.c — see bootstrap.h. */
#include "bootstrap.h"

#include <errno.h>
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

int pf_bootstrap_import_token(struct pf_store *st, const char *path, const char *role,
			      struct pf_error *err)
{
	char key[32];
	snprintf(key, sizeof(key), "tokens.%s_file", role);
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = read_bounded(path, TOKEN_MAX + 1024, &text, &len);
	if (r < 0)
		return pf_error_set(err, r, key, "cannot read '%s': %s", path,
				    r == -EFBIG ? "too large" : strerror(-r));
	const char *tok = text;
	while (len > 0 && (*tok == ' ' || *tok == '\t' || *tok == '\n' || *tok == '\r')) {
		tok++;
		len--;
	}
	while (len > 0 && (tok[len - 1] == ' ' || tok[len - 1] == '\t' || tok[len - 1] == '\n' ||
			   tok[len - 1] == '\r'))
		len--;
	if (len < TOKEN_MIN || len > TOKEN_MAX)
		return pf_error_set(err, -EINVAL, key, "the token in '%s' must be %d..%d bytes, is %zu",
				    path, TOKEN_MIN, TOKEN_MAX, len);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)tok[i] <= 0x20 || (unsigned char)tok[i] >= 0x7f)
			return pf_error_set(err, -EINVAL, key,
					    "the token in '%s' has a space or control byte", path);
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
	if (r < 0)
		return pf_error_set(err, r, key, "storing the %s token failed: %s", role,
				    strerror(-r));
	pf_log_info("added the %s token from %s", role, path);
	return 1;
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
	struct pf_fleet *f = ud;
	struct pf_agent *a = pf_fleet_get_or_add(f, row->uid, row->first_seen_ms);
	if (!a)
		return -ENOMEM;
	a->first_seen_ms = row->first_seen_ms;
	a->last_seen_ms = row->last_seen_ms;
	a->capabilities = row->capabilities;
	json_t *o = row->attributes_json ? json_loads(row->attributes_json, 0, NULL) : NULL;
	if (json_is_object(o)) {
		size_t n = json_object_size(o), i = 0;
		const char **k = calloc(n + 1, sizeof(*k)), **v = calloc(n + 1, sizeof(*v));
		const char *key;
		json_t *val;
		if (k && v) {
			json_object_foreach(o, key, val)
			{
				if (!json_is_string(val))
					continue;
				k[i] = key;
				v[i] = json_string_value(val);
				i++;
			}
			pf_agent_set_attributes(f, a, k, v, i);
		}
		free(k);
		free(v);
	}
	json_decref(o);
	if (row->health_json) {
		json_t *h = json_loads(row->health_json, 0, NULL);
		bool healthy = json_is_true(json_object_get(h, "healthy"));
		json_decref(h);
		pf_agent_set_health(f, a, healthy, row->health_json);
	}
	if (row->effective_config)
		pf_agent_set_effective(f, a, row->effective_config, strlen(row->effective_config));
	if (row->has_remote_hash)
		pf_agent_set_remote_status(f, a, row->remote_hash, 32, row->remote_status,
					   row->remote_error);
	return 0;
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
