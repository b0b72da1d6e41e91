/* dataplane_exporters.c — see dataplane_exporters.h. */
#include "dataplane_exporters.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane_int.h"
#include "health.h"
#include "pf/log.h"

static bool str_eq(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

static bool exporter_eq(const struct pf_exporter *a, const struct pf_exporter *b)
{
	if (a->type != b->type || a->auth != b->auth || !str_eq(a->endpoint, b->endpoint) ||
	    a->compression != b->compression || a->timeout_seconds != b->timeout_seconds ||
	    !str_eq(a->path, b->path) || a->max_bytes != b->max_bytes ||
	    a->n_headers != b->n_headers)
		return false;
	for (size_t i = 0; i < a->n_headers; i++)
		if (!str_eq(a->headers[i].key, b->headers[i].key) ||
		    !str_eq(a->headers[i].value, b->headers[i].value))
			return false;
	/* headers_from_file: the files are read at creation, like tls's. */
	if (a->n_headers_from_file != b->n_headers_from_file)
		return false;
	for (size_t i = 0; i < a->n_headers_from_file; i++)
		if (!str_eq(a->headers_from_file[i].key, b->headers_from_file[i].key) ||
		    !str_eq(a->headers_from_file[i].value, b->headers_from_file[i].value))
			return false;
	/* tls: any change re-creates the exporter (a rotated file under the same name needs a
	 * config change too; the files are read once, at creation). Not part of the spill
	 * directory's name, which is the back end only (exporter.h). */
	const struct pf_exporter_tls *ta = &a->tls, *tb = &b->tls;
	return ta->present == tb->present && str_eq(ta->ca_file, tb->ca_file) &&
	       str_eq(ta->cert_file, tb->cert_file) && str_eq(ta->key_file, tb->key_file) &&
	       ta->insecure_skip_verify == tb->insecure_skip_verify &&
	       str_eq(ta->server_name, tb->server_name);
}
/* ---- exporters (worker thread) ------------------------------------------------------------- */

static void export_done(void *user, int rc)
{
	struct agent_dataplane *d = user;
	pthread_mutex_lock(&d->lock);
	if (d->in_flight)
		d->in_flight--;
	/* a failure, or the first success after one, refreshes the exporters' health now;
	 * other successes wait for the tick (no wake-up per export) */
	bool news = rc != 0 || d->export_failing;
	d->export_failing = rc != 0;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	if (news)
		dp_kick(d);
}

struct reaper {
	struct agent_dataplane *d;
	struct agent_exporter *x;
};

static void *reaper_main(void *arg)
{
	struct reaper *r = arg;
	struct agent_dataplane *d = r->d;
	agent_exporter_free(r->x); /* waits for its export in flight (bounded by its timeout) */
	free(r);
	pthread_mutex_lock(&d->lock);
	d->n_reapers--;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

/* A replaced exporter finishes its export in flight on a thread of its own, so that a slow
 * endpoint does not stall the sampler's ring buffers. */
void dp_retire_exporter(struct agent_dataplane *d, struct agent_exporter *x)
{
	struct reaper *r = malloc(sizeof(*r));
	pthread_t t;
	pthread_attr_t attr;
	if (r) {
		*r = (struct reaper){.d = d, .x = x};
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_mutex_lock(&d->lock);
		d->n_reapers++;
		pthread_mutex_unlock(&d->lock);
		int rc = pthread_create(&t, &attr, reaper_main, r);
		pthread_attr_destroy(&attr);
		if (rc == 0)
			return;
		pthread_mutex_lock(&d->lock);
		d->n_reapers--;
		pthread_mutex_unlock(&d->lock);
		free(r);
	}
	agent_exporter_free(x);
}

static void exporter_health(struct agent_dataplane *d, struct dp_exporter *e)
{
	struct agent_exporter_status st;
	char status[160];
	agent_exporter_status(e->x, &st);
	if (st.dropped)
		snprintf(status, sizeof(status), "%s; %" PRIu64 " dropped", st.status, st.dropped);
	else
		snprintf(status, sizeof(status), "%s", st.status);
	agent_health_set(d->health, e->name, st.healthy, status, st.last_error);
}

void dp_exporters_health(struct agent_dataplane *d)
{
	for (size_t i = 0; i < d->n_ex; i++)
		if (d->ex[i].x)
			exporter_health(d, &d->ex[i]);
}

static struct agent_exporter *exporter_create(struct agent_dataplane *d,
					      const struct pf_profcfg *cfg, size_t i,
					      struct pf_error *err)
{
	struct agent_exporter_opts xo = {.queue_bytes = cfg->limits.queue_bytes,
					 .spill_dir = d->spill_dir,
					 .agent_token = d->agent_token};
	return agent_exporter_new_opts(&cfg->exporters[i], &xo, err);
}

static void exporter_name(char name[NAME_LEN], size_t i, enum pf_exporter_type t)
{
	snprintf(name, NAME_LEN, "exporter/%zu:%s", i, pf_exporter_type_name(t));
}

/* Keeps exporters whose settings did not change, re-creates the others. */
void dp_exporters_apply(struct agent_dataplane *d, const struct pf_profcfg *old,
			const struct pf_profcfg *cfg)
{
	struct dp_exporter next[PF_PROFCFG_MAX_EXPORTERS];
	size_t n = pf_min(cfg->n_exporters, (size_t)PF_PROFCFG_MAX_EXPORTERS);
	memset(next, 0, sizeof(next));
	for (size_t i = 0; i < n; i++) {
		const struct pf_exporter *e = &cfg->exporters[i];
		exporter_name(next[i].name, i, e->type);
		if (old && i < d->n_ex && i < old->n_exporters && d->ex[i].x &&
		    exporter_eq(&old->exporters[i], e)) {
			next[i].x = d->ex[i].x; /* unchanged: keep it */
			d->ex[i].x = NULL;
		}
	}
	/* retire what is left of the old set, drop its health components */
	for (size_t i = 0; i < d->n_ex; i++) {
		bool kept_name = false;
		for (size_t j = 0; j < n; j++)
			kept_name |= strcmp(next[j].name, d->ex[i].name) == 0;
		if (d->ex[i].x) {
			pf_log_info("dataplane: %s replaced", d->ex[i].name);
			dp_retire_exporter(d, d->ex[i].x);
		}
		if (!kept_name)
			agent_health_unregister(d->health, d->ex[i].name);
	}
	for (size_t i = 0; i < n; i++) {
		agent_health_register(d->health, next[i].name);
		if (next[i].x)
			continue;
		struct pf_error err = {0};
		next[i].x = exporter_create(d, cfg, i, &err);
		if (!next[i].x) {
			pf_log_error("dataplane: %s: %s", next[i].name, err.msg);
			agent_health_set(d->health, next[i].name, false, "cannot start", err.msg);
		} else {
			pf_log_info("dataplane: %s ready", next[i].name);
		}
	}
	memcpy(d->ex, next, sizeof(next));
	d->n_ex = n;
	dp_exporters_health(d);
}

void dp_exporters_free(struct agent_dataplane *d, bool wait)
{
	for (size_t i = 0; i < d->n_ex; i++) {
		if (d->ex[i].x) {
			if (wait)
				agent_exporter_free(d->ex[i].x);
			d->ex[i].x = NULL;
		}
	}
	d->n_ex = 0;
}

/* ---- submits (worker thread) --------------------------------------------------------------- */

static bool wants_window(struct agent_exporter *x)
{
	return agent_exporter_wants_window(x);
}

size_t dp_bytes_exporters(const struct agent_dataplane *d)
{
	size_t n = 0;
	for (size_t i = 0; i < d->n_ex; i++)
		n += d->ex[i].x && !wants_window(d->ex[i].x);
	return n;
}

void dp_submit_window_all(struct agent_dataplane *d, const struct pf_prof_window *w)
{
	for (size_t i = 0; i < d->n_ex; i++) {
		if (!d->ex[i].x || !wants_window(d->ex[i].x))
			continue;
		size_t n = 0;
		int rc = agent_exporter_submit_window(d->ex[i].x, w, NULL, NULL, &n);
		pthread_mutex_lock(&d->lock);
		d->counters.exports += n;
		if (rc < 0)
			d->counters.dropped++;
		pthread_mutex_unlock(&d->lock);
		if (rc < 0)
			pf_log_warn("dataplane: %s refused the window: %s", d->ex[i].name,
				    strerror(-rc));
	}
}

void dp_submit_all(struct agent_dataplane *d, const uint8_t *data, size_t len, const uint8_t id[16])
{
	for (size_t i = 0; i < d->n_ex; i++) {
		if (!d->ex[i].x || wants_window(d->ex[i].x))
			continue;
		pthread_mutex_lock(&d->lock);
		d->in_flight++;
		pthread_mutex_unlock(&d->lock);
		int rc = agent_exporter_submit(d->ex[i].x, data, len, id, export_done, d);
		pthread_mutex_lock(&d->lock);
		if (rc < 0) {
			d->in_flight--;
			d->counters.dropped++;
		} else {
			d->counters.exports++;
		}
		pthread_mutex_unlock(&d->lock);
		if (rc < 0)
			pf_log_warn("dataplane: %s refused the export: %s", d->ex[i].name,
				    strerror(-rc));
	}
}

int dp_exporters_check(struct agent_dataplane *d, const struct pf_profcfg *cfg,
		       struct pf_error *err)
{
	for (size_t i = 0; i < cfg->n_exporters; i++) {
		const struct pf_exporter *e = &cfg->exporters[i];
		if (e->type == PF_EXPORTER_FILE)
			continue;
		struct pf_error xe = {0};
		/* No spill dir: a check must not reload and resend spilled items. The token is
		 * the worker's (agent_dataplane_set_identity swaps it under the lock). */
		pthread_mutex_lock(&d->lock);
		char *token = d->agent_token ? strdup(d->agent_token) : NULL;
		bool oom = d->agent_token && !token;
		pthread_mutex_unlock(&d->lock);
		if (oom)
			return pf_error_set(err, -ENOMEM, "", "out of memory");
		struct agent_exporter_opts xo = {.agent_token = token};
		struct agent_exporter *x = agent_exporter_new_opts(e, &xo, &xe);
		if (token) {
			explicit_bzero(token, strlen(token));
			free(token);
		}
		if (!x) {
			char key[320];
			snprintf(key, sizeof(key), "profiling.exporters[%zu]%s%s", i,
				 xe.path[0] ? "." : "", xe.path);
			const char *detail = xe.msg;
			size_t plen = strlen(xe.path);
			/* the exporter's message may start with its own short path */
			if (plen && strncmp(detail, xe.path, plen) == 0 && detail[plen] == ':')
				detail += plen + 2;
			/* pf_error_set puts "key: " in front itself. */
			return pf_error_set(err, xe.code ? xe.code : -EINVAL, key, "%s",
					    detail[0] ? detail : "cannot create the exporter");
		}
		agent_exporter_free(x);
	}
	return 0;
}
