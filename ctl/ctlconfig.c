/* ctlconfig.c — see ctlconfig.h. */
#include "ctlconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "pf/buf.h"
#include "pf/compiler.h"

void ctl_config_release(struct ctl_config *c)
{
	free(c->server);
	if (c->token) {
		explicit_bzero(c->token, strlen(c->token));
		free(c->token);
	}
	free(c->ca_file);
	free(c->file);
	*c = (struct ctl_config){0};
}

static void closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}

/* Reads a whole small file; *mode receives its permission bits. */
static int read_small(const char *path, size_t max, struct pf_buf *out, mode_t *mode,
		      struct pf_error *err)
{
	_cleanup_(closep) int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return pf_error_set(err, -errno, "", "%s: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) < 0)
		return pf_error_set(err, -errno, "", "%s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return pf_error_set(err, -EINVAL, "", "%s: not a regular file", path);
	if ((size_t)st.st_size > max)
		return pf_error_set(err, -E2BIG, "", "%s: over %zu bytes", path, max);
	*mode = st.st_mode & 07777;
	pf_buf_init(out, max);
	char chunk[4096];
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = -errno;
			pf_buf_release(out);
			return pf_error_set(err, e, "", "%s: %s", path, strerror(-e));
		}
		if (n == 0)
			break;
		if (pf_buf_append(out, chunk, (size_t)n) < 0) {
			pf_buf_release(out);
			return pf_error_set(err, -E2BIG, "", "%s: over %zu bytes", path, max);
		}
	}
	return 0;
}

static int parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"true", "yes", "on"}, *const no[] = {"false", "no",
									       "off"};
	for (size_t i = 0; i < PF_ARRAY_SIZE(yes); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

static int set_key(struct ctl_config *c, const char *path, const char *key, const char *val,
		   const yaml_mark_t *mark, struct pf_error *err)
{
	char **slot = NULL;
	if (strcmp(key, "server") == 0)
		slot = &c->server;
	else if (strcmp(key, "token") == 0)
		slot = &c->token;
	else if (strcmp(key, "ca_file") == 0)
		slot = &c->ca_file;
	else if (strcmp(key, "insecure_skip_verify") == 0) {
		if (parse_bool(val, &c->insecure_skip_verify) < 0)
			return pf_error_set(err, -EINVAL, "",
					    "%s: %s: must be true or false, got \"%s\"", path, key,
					    val);
		return 0;
	} else {
		return pf_error_set(
		    err, -EINVAL, "",
		    "%s: line %zu: unknown key \"%s\" (known: server, token, ca_file, "
		    "insecure_skip_verify)",
		    path, (size_t)mark->line + 1, key);
	}
	if (*slot)
		return pf_error_set(err, -EINVAL, "", "%s: %s: duplicate key", path, key);
	if (!*val)
		return pf_error_set(err, -EINVAL, "", "%s: %s: must not be empty", path, key);
	*slot = strdup(val);
	return *slot ? 0 : pf_error_set(err, -ENOMEM, "", "out of memory");
}

/* One mapping of scalar keys to scalar values; an empty document is an empty config. */
static int parse_yaml(const char *path, const struct pf_buf *text, struct ctl_config *c,
		      struct pf_error *err)
{
	yaml_parser_t p;
	if (!yaml_parser_initialize(&p))
		return pf_error_set(err, -ENOMEM, "", "out of memory");
	yaml_parser_set_input_string(&p, text->data ? text->data : (const unsigned char *)"",
				     text->len);
	int rc = 0, depth = 0;
	_cleanup_free_ char *key = NULL;
	/* Each event consumes input, so the loop ends with the text; the bound is a backstop. */
	for (size_t guard = 0; guard < 100000 && rc == 0; guard++) {
		yaml_event_t ev;
		if (!yaml_parser_parse(&p, &ev)) {
			rc = pf_error_set(err, -EINVAL, "", "%s: line %zu, column %zu: %s", path,
					  (size_t)p.problem_mark.line + 1,
					  (size_t)p.problem_mark.column + 1,
					  p.problem ? p.problem : "YAML syntax error");
			break;
		}
		yaml_event_type_t t = ev.type;
		if (t == YAML_STREAM_END_EVENT) {
			yaml_event_delete(&ev);
			break;
		}
		switch (t) {
		case YAML_MAPPING_START_EVENT:
			if (++depth > 1 || key)
				rc = pf_error_set(
				    err, -EINVAL, "",
				    "%s: line %zu: %s%smust be a plain value, not a map", path,
				    (size_t)ev.start_mark.line + 1, key ? key : "",
				    key ? ": " : "");
			break;
		case YAML_MAPPING_END_EVENT:
			depth--;
			break;
		case YAML_SEQUENCE_START_EVENT:
			if (!key) {
				rc = pf_error_set(err, -EINVAL, "",
						  "%s: must be a map of keys "
						  "(server, token, ca_file, insecure_skip_verify)",
						  path);
				break;
			}
			rc = pf_error_set(
			    err, -EINVAL, "", "%s: line %zu: %s%smust be a plain value, not a list",
			    path, (size_t)ev.start_mark.line + 1, key ? key : "", key ? ": " : "");
			break;
		case YAML_ALIAS_EVENT:
			rc = pf_error_set(err, -EINVAL, "", "%s: line %zu: aliases are not allowed",
					  path, (size_t)ev.start_mark.line + 1);
			break;
		case YAML_SCALAR_EVENT: {
			const char *v = (const char *)ev.data.scalar.value;
			if (depth != 1) {
				rc = pf_error_set(err, -EINVAL, "",
						  "%s: must be a map of keys "
						  "(server, token, ca_file, insecure_skip_verify)",
						  path);
			} else if (!key) {
				key = strdup(v);
				if (!key)
					rc = pf_error_set(err, -ENOMEM, "", "out of memory");
			} else {
				rc = set_key(c, path, key, v, &ev.start_mark, err);
				free(key);
				key = NULL;
			}
			break;
		}
		default:
			break;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&p);
	return rc;
}

int ctl_config_read_file(const char *path, struct ctl_config *out, struct pf_error *err)
{
	struct pf_buf text;
	mode_t mode;
	int rc = read_small(path, CTL_CONFIG_MAX_FILE, &text, &mode, err);
	if (rc < 0)
		return rc;
	rc = parse_yaml(path, &text, out, err);
	if (text.data)
		explicit_bzero(text.data, text.len);
	pf_buf_release(&text);
	if (rc < 0)
		return rc;
	if (out->token && (mode & 077))
		return pf_error_set(err, -EPERM, "",
				    "%s holds a token but its mode is %04o (readable by others); "
				    "run: chmod 600 %s",
				    path, (unsigned)mode, path);
	out->file = strdup(path);
	return out->file ? 0 : pf_error_set(err, -ENOMEM, "", "out of memory");
}

int ctl_config_read_token_file(const char *path, char **out, struct pf_error *err)
{
	struct pf_buf text;
	mode_t mode;
	int rc = read_small(path, CTL_TOKEN_MAX_FILE, &text, &mode, err);
	if (rc < 0)
		return rc;
	const char *s = pf_buf_str(&text);
	size_t b = strspn(s, " \t\r\n");
	size_t e = b + strcspn(s + b, "\r\n");
	while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t'))
		e--;
	if (e == b)
		rc = pf_error_set(err, -EINVAL, "", "%s: no token in the file", path);
	else if (!(*out = strndup(s + b, e - b)))
		rc = pf_error_set(err, -ENOMEM, "", "out of memory");
	if (text.data)
		explicit_bzero(text.data, text.len);
	pf_buf_release(&text);
	return rc;
}

static int dup_into(char **slot, const char *v, struct pf_error *err)
{
	free(*slot);
	*slot = strdup(v);
	return *slot ? 0 : pf_error_set(err, -ENOMEM, "", "out of memory");
}

static char *path_join(const char *dir, const char *rest)
{
	char *p;
	return asprintf(&p, "%s%s", dir, rest) < 0 ? NULL : p;
}

int ctl_config_resolve(const struct ctl_config_sources *src, struct ctl_config *out,
		       struct pf_error *err)
{
	*out = (struct ctl_config){0};
	_cleanup_free_ char *def_path = NULL;
	const char *file = src->config_file;
	if (!file) {
		if (src->env_xdg_config_home && *src->env_xdg_config_home)
			def_path = path_join(src->env_xdg_config_home, "/profleet/ctl.yaml");
		else if (src->env_home && *src->env_home)
			def_path = path_join(src->env_home, "/.config/profleet/ctl.yaml");
		if (def_path && access(def_path, F_OK) == 0)
			file = def_path;
	}
	int rc = 0;
	if (file && (rc = ctl_config_read_file(file, out, err)) < 0)
		goto fail;

	/* environment over the file, flags over both */
	if (src->env_server && *src->env_server &&
	    (rc = dup_into(&out->server, src->env_server, err)) < 0)
		goto fail;
	if (src->env_token && *src->env_token &&
	    (rc = dup_into(&out->token, src->env_token, err)) < 0)
		goto fail;
	if (src->server && (rc = dup_into(&out->server, src->server, err)) < 0)
		goto fail;
	if (src->ca_file && (rc = dup_into(&out->ca_file, src->ca_file, err)) < 0)
		goto fail;
	if (src->insecure)
		out->insecure_skip_verify = true;
	if (src->token) {
		if ((rc = dup_into(&out->token, src->token, err)) < 0)
			goto fail;
	} else if (src->token_file) {
		char *t = NULL;
		if ((rc = ctl_config_read_token_file(src->token_file, &t, err)) < 0)
			goto fail;
		free(out->token);
		out->token = t;
	}
	if (!out->server && (rc = dup_into(&out->server, CTL_DEFAULT_SERVER, err)) < 0)
		goto fail;
	if (strncmp(out->server, "http://", 7) != 0 && strncmp(out->server, "https://", 8) != 0) {
		rc = pf_error_set(err, -EINVAL, "",
				  "server \"%s\" must start with http:// or https://", out->server);
		goto fail;
	}
	return 0;
fail:
	ctl_config_release(out);
	return rc;
}
