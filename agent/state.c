/* state.c — see state.h. */
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pf/buf.h"
#include "pf/compiler.h"
#include "pf/fdio.h"
#include "pf/log.h"
#include "pf/uuid.h"

#define RC_MAGIC "# profleet-remote-config hash="
#define CRED_MAGIC "# profleet-credential hash="

struct agent_state {
	char *dir;
	uint8_t uid[16];
	bool has_rc;
	uint8_t *rc_body;
	size_t rc_len;
	uint8_t rc_hash[AGENT_STATE_MAX_HASH];
	size_t rc_hash_len;
	char *cred; /* NULL: none */
	uint8_t cred_hash[AGENT_STATE_MAX_HASH];
	size_t cred_hash_len;
};

int agent_mkdir_p(const char *path, unsigned mode)
{
	char tmp[PATH_MAX];
	size_t n = strlen(path);

	if (n == 0)
		return -EINVAL;
	if (n >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(tmp, path, n + 1);
	while (n > 1 && tmp[n - 1] == '/')
		tmp[--n] = '\0';
	for (char *p = tmp + 1;; p++) {
		bool end = *p == '\0';
		if (*p != '/' && !end)
			continue;
		*p = '\0';
		if (mkdir(tmp, mode) < 0 && errno != EEXIST)
			return -errno;
		if (end)
			break;
		*p = '/';
	}
	struct stat sb;
	if (stat(tmp, &sb) < 0)
		return -errno;
	if (!S_ISDIR(sb.st_mode))
		return -ENOTDIR;
	return 0;
}

static void fsync_parent(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;

	if (n == 0) {
		dir[0] = slash ? '/' : '.';
		dir[1] = '\0';
	} else {
		if (n >= sizeof(dir))
			return;
		memcpy(dir, path, n);
		dir[n] = '\0';
	}
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

int agent_write_file_atomic(const char *path, const void *data, size_t len, unsigned mode)
{
	char tmp[PATH_MAX];
	int n = snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -ENAMETOOLONG;

	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	int r = pf_write_all(fd, data, len);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		unlink(tmp);
		return r;
	}
	fsync_parent(path);
	return 0;
}

int agent_read_file(const char *path, size_t max, char **out, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t cap = 4096, n = 0;
	_cleanup_free_ char *buf = malloc(cap);
	int r = 0;

	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	for (;;) {
		if (n + 1 >= cap) {
			if (cap > max + 1) {
				r = -EFBIG;
				break;
			}
			size_t ncap = cap * 2;
			char *nb = realloc(buf, ncap);
			if (!nb) {
				r = -ENOMEM;
				break;
			}
			buf = nb;
			cap = ncap;
		}
		ssize_t got = read(fd, buf + n, cap - n - 1);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		if (got == 0)
			break;
		n += (size_t)got;
		if (n > max) {
			r = -EFBIG;
			break;
		}
	}
	close(fd);
	if (r < 0)
		return r;
	buf[n] = '\0';
	*out = TAKE_PTR(buf);
	if (len)
		*len = n;
	return 0;
}

static int path_in(const struct agent_state *st, const char *name, char *dst, size_t dst_len)
{
	int n = snprintf(dst, dst_len, "%s/%s", st->dir, name);
	if (n < 0 || (size_t)n >= dst_len)
		return -ENAMETOOLONG;
	return 0;
}

static int save_uid(struct agent_state *st, struct pf_error *err)
{
	char path[PATH_MAX], text[PF_UUID_STR_LEN + 2];
	int r = path_in(st, "instance_uid", path, sizeof(path));
	if (r < 0)
		return pf_error_set(err, r, "", "state dir path too long");
	pf_uuid_format(st->uid, text);
	text[PF_UUID_STR_LEN] = '\n';
	text[PF_UUID_STR_LEN + 1] = '\0';
	r = agent_write_file_atomic(path, text, PF_UUID_STR_LEN + 1, 0600);
	if (r < 0)
		return pf_error_set(err, r, "", "cannot write '%s': %s", path, strerror(-r));
	return 0;
}

static int load_uid(struct agent_state *st, struct pf_error *err)
{
	char path[PATH_MAX];
	_cleanup_free_ char *text = NULL;
	size_t len;
	int r = path_in(st, "instance_uid", path, sizeof(path));
	if (r < 0)
		return pf_error_set(err, r, "", "state dir path too long");

	r = agent_read_file(path, 256, &text, &len);
	if (r == 0) {
		/* Trim whitespace around the canonical text. */
		char *s = text;
		while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
			s++;
		size_t n = strlen(s);
		while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' ||
				 s[n - 1] == '\r'))
			s[--n] = '\0';
		if (pf_uuid_parse(s, st->uid) == 0)
			return 0;
		pf_log_warn("state: '%s' does not hold a UUID; making a new instance_uid", path);
	} else if (r != -ENOENT) {
		return pf_error_set(err, r, "", "cannot read '%s': %s", path, strerror(-r));
	}
	r = pf_uuid_v7(st->uid);
	if (r < 0)
		return pf_error_set(err, r, "", "cannot make an instance_uid: %s", strerror(-r));
	return save_uid(st, err);
}

/* The state file `name` (its path to path, at most max bytes), or NULL when it is absent or
 * cannot be read (logged, saying what happens `without` it). */
static char *read_named(const struct agent_state *st, const char *name, size_t max,
			char path[PATH_MAX], size_t *len, const char *without)
{
	char *text = NULL;
	if (path_in(st, name, path, PATH_MAX) < 0)
		return NULL;
	int r = agent_read_file(path, max, &text, len);
	if (r < 0 && r != -ENOENT)
		pf_log_warn("state: cannot read '%s': %s; %s", path, strerror(-r), without);
	return r < 0 ? NULL : text;
}

static void drop_rc(struct agent_state *st)
{
	free(st->rc_body);
	st->rc_body = NULL;
	st->rc_len = 0;
	st->rc_hash_len = 0;
	st->has_rc = false;
}

static void load_rc(struct agent_state *st)
{
	char path[PATH_MAX];
	size_t len;
	_cleanup_free_ char *text = read_named(st, "remote_config", AGENT_STATE_MAX_CONFIG + 256,
					       path, &len, "starting without it");
	if (!text)
		return;
	size_t ml = strlen(RC_MAGIC);
	char *nl = memchr(text, '\n', len);
	size_t hex_len = nl ? (size_t)(nl - text) - ml : 0;
	if (len < ml || memcmp(text, RC_MAGIC, ml) != 0 || !nl || (size_t)(nl - text) < ml ||
	    hex_len % 2 || hex_len / 2 > AGENT_STATE_MAX_HASH) {
		pf_log_warn("state: '%s' is damaged; ignoring it", path);
		return;
	}
	*nl = '\0';
	if (pf_hex_decode(text + ml, st->rc_hash, hex_len / 2) < 0) {
		pf_log_warn("state: '%s' has a bad hash line; ignoring it", path);
		return;
	}
	size_t off = (size_t)(nl - text) + 1;
	st->rc_len = len - off;
	st->rc_body = malloc(st->rc_len + 1);
	if (!st->rc_body) {
		st->rc_len = 0;
		return;
	}
	memcpy(st->rc_body, text + off, st->rc_len);
	st->rc_body[st->rc_len] = '\0';
	st->rc_hash_len = hex_len / 2;
	st->has_rc = true;
}

static bool token_ok(const char *t, size_t n)
{
	if (n == 0 || n > AGENT_STATE_MAX_TOKEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (t[i] <= ' ' || t[i] > '~')
			return false;
	return true;
}

static void drop_cred(struct agent_state *st)
{
	if (st->cred) {
		explicit_bzero(st->cred, strlen(st->cred));
		free(st->cred);
	}
	st->cred = NULL;
	st->cred_hash_len = 0;
}

static void load_cred(struct agent_state *st)
{
	char path[PATH_MAX];
	size_t len, ml = strlen(CRED_MAGIC);
	_cleanup_free_ char *text = read_named(st, "credential", AGENT_STATE_MAX_TOKEN + 256, path,
					       &len, "using --token-file");
	if (!text)
		return;
	char *nl = memchr(text, '\n', len);
	size_t hex_len = nl && (size_t)(nl - text) >= ml ? (size_t)(nl - text) - ml : 0;
	char *tok = nl ? nl + 1 : NULL;
	size_t tl = tok ? len - (size_t)(tok - text) : 0;
	while (tl && (tok[tl - 1] == '\n' || tok[tl - 1] == '\r'))
		tl--;
	if (!nl || memcmp(text, CRED_MAGIC, ml) != 0 || hex_len % 2 ||
	    hex_len / 2 > AGENT_STATE_MAX_HASH || !token_ok(tok, tl)) {
		pf_log_warn("state: '%s' is damaged; ignoring it (using --token-file)", path);
		explicit_bzero(text, len);
		return;
	}
	*nl = '\0';
	if (pf_hex_decode(text + ml, st->cred_hash, hex_len / 2) == 0 &&
	    (st->cred = strndup(tok, tl)))
		st->cred_hash_len = hex_len / 2;
	explicit_bzero(text, len);
}

bool agent_state_credential(const struct agent_state *st, const char **token,
			    const uint8_t **hash, size_t *hash_len)
{
	if (!st->cred)
		return false;
	*token = st->cred;
	*hash = st->cred_hash;
	*hash_len = st->cred_hash_len;
	return true;
}

int agent_state_save_credential(struct agent_state *st, const char *token, const uint8_t *hash,
				size_t hash_len, struct pf_error *err)
{
	char path[PATH_MAX];
	char hex[AGENT_STATE_MAX_HASH * 2 + 1];
	struct pf_buf b;
	size_t tl = token ? strlen(token) : 0;
	int r;

	if (!token_ok(token, tl) || hash_len > AGENT_STATE_MAX_HASH)
		return pf_error_set(err, -EINVAL, "", "credential or its hash not storable");
	r = path_in(st, "credential", path, sizeof(path));
	if (r < 0)
		return pf_error_set(err, r, "", "state dir path too long");
	char *copy = strdup(token);
	if (!copy)
		return pf_error_set(err, -ENOMEM, "", "out of memory");
	pf_hex_encode(hash, hash_len, hex);
	pf_buf_init(&b, AGENT_STATE_MAX_TOKEN + 256);
	r = pf_buf_printf(&b, CRED_MAGIC "%s\n%s\n", hex, token);
	if (r == 0)
		r = agent_write_file_atomic(path, b.data, b.len, 0600);
	if (b.data)
		explicit_bzero(b.data, b.len);
	pf_buf_release(&b);
	if (r < 0) {
		explicit_bzero(copy, tl);
		free(copy);
		return pf_error_set(err, r, "", "cannot write '%s': %s", path, strerror(-r));
	}
	drop_cred(st);
	st->cred = copy;
	if (hash_len)
		memcpy(st->cred_hash, hash, hash_len);
	st->cred_hash_len = hash_len;
	return 0;
}

int agent_state_open(const char *dir, struct agent_state **out, struct pf_error *err)
{
	struct agent_state *st = calloc(1, sizeof(*st));
	int r;

	if (!st)
		return pf_error_set(err, -ENOMEM, "", "out of memory");
	st->dir = strdup(dir);
	if (!st->dir) {
		agent_state_free(st);
		return pf_error_set(err, -ENOMEM, "", "out of memory");
	}
	r = agent_mkdir_p(dir, 0700);
	if (r < 0) {
		pf_error_set(err, r, "", "cannot create state directory '%s': %s", dir,
			     strerror(-r));
		agent_state_free(st);
		return r;
	}
	r = load_uid(st, err);
	if (r < 0) {
		agent_state_free(st);
		return r;
	}
	load_rc(st);
	load_cred(st);
	*out = st;
	return 0;
}

void agent_state_free(struct agent_state *st)
{
	if (!st)
		return;
	drop_rc(st);
	drop_cred(st);
	free(st->dir);
	free(st);
}

const char *agent_state_dir(const struct agent_state *st)
{
	return st->dir;
}

const uint8_t *agent_state_uid(const struct agent_state *st)
{
	return st->uid;
}

int agent_state_set_uid(struct agent_state *st, const uint8_t uid[16], struct pf_error *err)
{
	uint8_t old[16];
	memcpy(old, st->uid, 16);
	memcpy(st->uid, uid, 16);
	int r = save_uid(st, err);
	if (r < 0)
		memcpy(st->uid, old, 16);
	return r;
}

bool agent_state_remote_config(const struct agent_state *st, const uint8_t **body, size_t *len,
			       const uint8_t **hash, size_t *hash_len)
{
	if (!st->has_rc)
		return false;
	*body = st->rc_body;
	*len = st->rc_len;
	*hash = st->rc_hash;
	*hash_len = st->rc_hash_len;
	return true;
}

int agent_state_save_remote_config(struct agent_state *st, const uint8_t *body, size_t len,
				   const uint8_t *hash, size_t hash_len, struct pf_error *err)
{
	char path[PATH_MAX];
	char hex[AGENT_STATE_MAX_HASH * 2 + 1];
	struct pf_buf b;
	int r;

	if (hash_len > AGENT_STATE_MAX_HASH || len > AGENT_STATE_MAX_CONFIG)
		return pf_error_set(err, -E2BIG, "", "remote config or hash too large to persist");
	r = path_in(st, "remote_config", path, sizeof(path));
	if (r < 0)
		return pf_error_set(err, r, "", "state dir path too long");
	uint8_t *copy = malloc(len + 1);
	if (!copy)
		return pf_error_set(err, -ENOMEM, "", "out of memory");
	if (len)
		memcpy(copy, body, len);
	copy[len] = '\0';

	pf_hex_encode(hash, hash_len, hex);
	pf_buf_init(&b, AGENT_STATE_MAX_CONFIG + 256);
	r = pf_buf_printf(&b, RC_MAGIC "%s\n", hex);
	if (r == 0)
		r = pf_buf_append(&b, body, len);
	if (r == 0)
		r = agent_write_file_atomic(path, b.data, b.len, 0600);
	pf_buf_release(&b);
	if (r < 0) {
		free(copy);
		return pf_error_set(err, r, "", "cannot write '%s': %s", path, strerror(-r));
	}
	drop_rc(st);
	st->rc_body = copy;
	st->rc_len = len;
	if (hash_len)
		memcpy(st->rc_hash, hash, hash_len);
	st->rc_hash_len = hash_len;
	st->has_rc = true;
	return 0;
}

int agent_state_clear_remote_config(struct agent_state *st, struct pf_error *err)
{
	char path[PATH_MAX];
	int r = path_in(st, "remote_config", path, sizeof(path));
	if (r < 0)
		return pf_error_set(err, r, "", "state dir path too long");
	if (unlink(path) < 0 && errno != ENOENT) {
		r = -errno;
		return pf_error_set(err, r, "", "cannot remove '%s': %s", path, strerror(-r));
	}
	drop_rc(st);
	return 0;
}
