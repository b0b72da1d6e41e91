/* config.c — see config.h. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pf/compiler.h"
#include "pf/log.h"
#include "state.h"

struct agent_config {
	struct agent_state *state;
	struct agent_config_hook hooks[AGENT_MAX_HOOKS];
	size_t n_hooks;

	char *local_text; /* NULL: no --config */
	size_t local_len;
	struct pf_kv_str labels[AGENT_MAX_LABELS];
	size_t n_labels;

	struct pf_profcfg *active;
	bool active_remote;
	struct agent_remote_status rs;
	uint64_t generation;
	uint64_t status_generation;
	agent_config_note_fn note_fn; /* NULL: no runtime note */
	void *note_ctx;
};

static void copy_error(struct pf_error *dst, const struct pf_error *src)
{
	if (dst && dst->code == 0)
		*dst = *src;
}

int agent_config_check_exporters(const struct pf_profcfg *cfg, struct pf_error *err)
{
	for (size_t i = 0; i < cfg->n_exporters; i++) {
		const struct pf_exporter *e = &cfg->exporters[i];
		char key[64];

		if (e->type != PF_EXPORTER_FILE)
			continue;
		snprintf(key, sizeof(key), "profiling.exporters[%zu].path", i);
		if (!e->path || !*e->path)
			return pf_error_set(err, -EINVAL, key, "a file exporter needs a path");
		int r = agent_mkdir_p(e->path, 0755);
		if (r < 0)
			return pf_error_set(err, r, key, "cannot create directory '%s': %s",
					    e->path, strerror(-r));
		if (access(e->path, W_OK | X_OK) < 0) {
			r = -errno;
			return pf_error_set(err, r, key, "directory '%s' is not writable: %s",
					    e->path, strerror(-r));
		}
	}
	return 0;
}

static int exporters_check_hook(void *ctx, const struct pf_profcfg *cfg, struct pf_error *err)
{
	return agent_config_check_exporters(cfg, err);
}

struct agent_config *agent_config_new(struct agent_state *state)
{
	struct agent_config *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->state = state;
	struct agent_config_hook h = {.name = "exporters", .check = exporters_check_hook};
	agent_config_add_hook(c, &h);
	return c;
}

static void free_labels(struct agent_config *c)
{
	for (size_t i = 0; i < c->n_labels; i++) {
		free(c->labels[i].key);
		free(c->labels[i].value);
	}
	c->n_labels = 0;
}

void agent_config_free(struct agent_config *c)
{
	if (!c)
		return;
	pf_profcfg_free(c->active);
	free(c->local_text);
	free_labels(c);
	free(c);
}

int agent_config_add_hook(struct agent_config *c, const struct agent_config_hook *hook)
{
	if (c->n_hooks >= AGENT_MAX_HOOKS)
		return -ENOSPC;
	c->hooks[c->n_hooks++] = *hook;
	return 0;
}

static int put_label(struct agent_config *c, const char *key, size_t klen, const char *value)
{
	char *v = strdup(value);
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < c->n_labels; i++) {
		if (strlen(c->labels[i].key) == klen && memcmp(c->labels[i].key, key, klen) == 0) {
			free(c->labels[i].value);
			c->labels[i].value = v;
			return 0;
		}
	}
	if (c->n_labels >= AGENT_MAX_LABELS) {
		free(v);
		return -ENOSPC;
	}
	char *k = strndup(key, klen);
	if (!k) {
		free(v);
		return -ENOMEM;
	}
	c->labels[c->n_labels].key = k;
	c->labels[c->n_labels].value = v;
	c->n_labels++;
	return 0;
}

int agent_config_set_local(struct agent_config *c, const char *text, size_t len,
			   struct pf_error *err)
{
	struct pf_profcfg *cfg = NULL;
	int r = pf_profcfg_parse(text, len, &cfg, err);
	if (r < 0)
		return r;
	char *copy = malloc(len + 1);
	if (!copy) {
		pf_profcfg_free(cfg);
		return pf_error_set(err, -ENOMEM, "", "out of memory");
	}
	memcpy(copy, text, len);
	copy[len] = '\0';
	free(c->local_text);
	c->local_text = copy;
	c->local_len = len;
	/* Local labels first; --label flags added later override them. */
	for (size_t i = 0; i < cfg->n_labels && r == 0; i++)
		r = put_label(c, cfg->labels[i].key, strlen(cfg->labels[i].key),
			      cfg->labels[i].value);
	pf_profcfg_free(cfg);
	if (r < 0)
		return pf_error_set(err, r, "labels", "too many labels");
	return 0;
}

int agent_config_add_label(struct agent_config *c, const char *kv)
{
	const char *eq = strchr(kv, '=');
	if (!eq || eq == kv)
		return -EINVAL;
	return put_label(c, kv, (size_t)(eq - kv), eq + 1);
}

/* Parses, checks with every hook, commits, swaps. Old config kept on any failure. */
static int apply_doc(struct agent_config *c, const char *text, size_t len, bool remote,
		     struct pf_error *err)
{
	struct pf_profcfg *cfg = NULL;
	struct pf_error e = {0};
	int r;

	if (text)
		r = pf_profcfg_parse(text, len, &cfg, &e);
	else
		r = (cfg = pf_profcfg_new_default()) ? 0 : -ENOMEM;
	if (r < 0) {
		if (e.code == 0)
			pf_error_set(&e, r, "", "%s", strerror(-r));
		copy_error(err, &e);
		return r;
	}
	for (size_t i = 0; i < c->n_hooks; i++) {
		if (!c->hooks[i].check)
			continue;
		r = c->hooks[i].check(c->hooks[i].ctx, cfg, &e);
		if (r < 0) {
			if (e.code == 0)
				pf_error_set(&e, r, "", "%s refused the config: %s",
					     c->hooks[i].name, strerror(-r));
			copy_error(err, &e);
			pf_profcfg_free(cfg);
			return r;
		}
	}
	for (size_t i = 0; i < c->n_hooks; i++)
		if (c->hooks[i].commit)
			c->hooks[i].commit(c->hooks[i].ctx, cfg, c->active);
	struct pf_profcfg *old = c->active;
	c->active = cfg;
	c->active_remote = remote;
	if (!old || !pf_profcfg_equal(old, cfg))
		c->generation++;
	pf_profcfg_free(old);
	return 0;
}

static int apply_local(struct agent_config *c, struct pf_error *err)
{
	return apply_doc(c, c->local_text, c->local_len, false, err);
}

int agent_config_start(struct agent_config *c, struct pf_error *err)
{
	const uint8_t *body, *hash;
	size_t len, hash_len;

	if (c->state && agent_state_remote_config(c->state, &body, &len, &hash, &hash_len)) {
		struct pf_error e = {0};
		if (apply_doc(c, (const char *)body, len, true, &e) == 0) {
			c->rs.status = PF_RCS_APPLIED;
			memcpy(c->rs.hash, hash, pf_min(hash_len, sizeof(c->rs.hash)));
			c->rs.hash_len = pf_min(hash_len, sizeof(c->rs.hash));
			c->rs.message[0] = '\0';
			c->status_generation++;
			pf_log_info("config: applied the persisted remote config");
			return 0;
		}
		/* Leave the status unset so the server's next offer is applied afresh. */
		pf_log_warn("config: persisted remote config no longer applies (%s); using the "
			    "local config",
			    e.msg);
	}
	return apply_local(c, err);
}

static const struct pf_config_file *find_profiling_file(const struct pf_config_map *map)
{
	for (size_t i = 0; i < map->n_files; i++)
		if (map->files[i].name && strcmp(map->files[i].name, AGENT_REMOTE_CONFIG_KEY) == 0)
			return &map->files[i];
	/* A single unnamed file (the opamp convention for "the" config) is taken as well. */
	if (map->n_files == 1 && (!map->files[0].name || !*map->files[0].name))
		return &map->files[0];
	return NULL;
}

int agent_config_offer_remote(struct agent_config *c, const struct pf_config_map *map,
			      const uint8_t *hash, size_t hash_len, struct pf_error *err)
{
	struct pf_error e = {0};
	int r;

	if (hash_len > AGENT_MAX_CONFIG_HASH)
		hash_len = AGENT_MAX_CONFIG_HASH;
	/* The same config again changes nothing and sends no status report, whatever its
	 * outcome was (a FAILED config is not retried in a loop). */
	if (c->rs.status != PF_RCS_UNSET && hash_len == c->rs.hash_len &&
	    memcmp(hash, c->rs.hash, hash_len) == 0)
		return 1;

	c->rs.status = PF_RCS_APPLYING;
	memcpy(c->rs.hash, hash, hash_len);
	c->rs.hash_len = hash_len;
	c->rs.message[0] = '\0';

	if (map->n_files == 0) {
		/* Withdrawn: back to the local config. */
		r = apply_local(c, &e);
		if (r == 0 && c->state) {
			struct pf_error pe = {0};
			if (agent_state_clear_remote_config(c->state, &pe) < 0)
				pf_log_warn("config: %s", pe.msg);
		}
	} else {
		const struct pf_config_file *f = find_profiling_file(map);
		if (!f) {
			r = pf_error_set(&e, -EINVAL, "",
					 "remote config has no '" AGENT_REMOTE_CONFIG_KEY
					 "' entry");
		} else {
			r = apply_doc(c, (const char *)f->body, f->body_len, true, &e);
			if (r == 0 && c->state) {
				struct pf_error pe = {0};
				if (agent_state_save_remote_config(c->state, f->body, f->body_len,
								   hash, hash_len, &pe) < 0)
					pf_log_warn("config: applied but not persisted: %s",
						    pe.msg);
			}
		}
	}
	if (r < 0) {
		c->rs.status = PF_RCS_FAILED;
		snprintf(c->rs.message, sizeof(c->rs.message), "%s", e.msg);
		copy_error(err, &e);
		pf_log_warn("config: remote config FAILED: %s", e.msg);
	} else {
		c->rs.status = PF_RCS_APPLIED;
		pf_log_info("config: remote config APPLIED");
	}
	c->status_generation++;
	return r < 0 ? r : 0;
}

const struct pf_profcfg *agent_config_active(const struct agent_config *c)
{
	return c->active;
}

bool agent_config_active_is_remote(const struct agent_config *c)
{
	return c->active_remote;
}

const struct agent_remote_status *agent_config_remote_status(const struct agent_config *c)
{
	return &c->rs;
}

int agent_config_effective_yaml(const struct agent_config *c, struct pf_buf *out)
{
	if (!c->active)
		return -ENOENT;
	int rc = pf_profcfg_emit_yaml_redacted(c->active, out);
	char note[512] = "";
	if (rc == 0 && c->note_fn)
		c->note_fn(c->note_ctx, note, sizeof(note));
	if (rc == 0 && note[0]) {
		note[strcspn(note, "\r\n")] = '\0'; /* one comment line, whatever fn wrote */
		rc = pf_buf_printf(out, "# %s\n", note);
	}
	return rc;
}

void agent_config_set_note_source(struct agent_config *c, agent_config_note_fn fn, void *ctx)
{
	c->note_fn = fn;
	c->note_ctx = ctx;
}

uint64_t agent_config_generation(const struct agent_config *c)
{
	return c->generation + (c->note_fn ? c->note_fn(c->note_ctx, NULL, 0) : 0);
}

uint64_t agent_config_status_generation(const struct agent_config *c)
{
	return c->status_generation;
}

const struct pf_kv_str *agent_config_labels(const struct agent_config *c, size_t *n)
{
	*n = c->n_labels;
	return c->labels;
}
