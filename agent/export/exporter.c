/* exporter.c — see exporter.h. */
#include "exporter.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "file.h"
#include "otlp_http.h"

struct agent_exporter {
	enum pf_exporter_type type;
	struct agent_export_file *file;
	struct agent_otlp_http *http;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	bool thread_started, stop, busy, has_job;
	/* the job handed to the worker */
	uint8_t *job;
	size_t job_len;
	uint8_t job_id[16];
	agent_exporter_done_fn done;
	void *user;

	struct agent_exporter_status st; /* under lock */
	uint64_t consecutive_failures;
};

static uint64_t now_unix_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct agent_exporter *agent_exporter_new(const struct pf_exporter *cfg, struct pf_error *err)
{
	if (cfg->type != PF_EXPORTER_FILE && cfg->type != PF_EXPORTER_OTLP_HTTP) {
		pf_error_set(err, -ENOTSUP, "type", "exporter type %s is not supported yet",
			     pf_exporter_type_name(cfg->type));
		errno = ENOTSUP;
		return NULL;
	}
	struct agent_exporter *x = calloc(1, sizeof(*x));
	if (!x)
		return NULL;
	x->type = cfg->type;
	if (cfg->type == PF_EXPORTER_FILE)
		x->file = agent_export_file_new(cfg->path, cfg->max_bytes, err);
	else
		x->http = agent_otlp_http_new(cfg, err);
	if (!x->file && !x->http) {
		int e = errno ? errno : EINVAL;
		free(x);
		errno = e;
		return NULL;
	}
	pthread_mutex_init(&x->lock, NULL);
	pthread_cond_init(&x->cond, NULL);
	x->st.healthy = true;
	snprintf(x->st.status, sizeof(x->st.status), "ok: no exports yet");
	return x;
}

const char *agent_exporter_type(const struct agent_exporter *x)
{
	return x->type == PF_EXPORTER_FILE ? "file" : "otlp_http";
}

/* Runs one export on the calling thread and records the outcome. */
static int run_export(struct agent_exporter *x, const uint8_t *data, size_t len,
		      const uint8_t id[16], struct pf_error *err)
{
	struct pf_error local = {0};
	int status = 0, r;
	if (x->file)
		r = agent_export_file_write(x->file, data, len, id, now_unix_ns(), NULL, &local);
	else
		r = agent_otlp_http_post(x->http, data, len, &status, &local);
	pthread_mutex_lock(&x->lock);
	x->st.last_http_status = status;
	if (r == 0) {
		x->st.exports_ok++;
		x->st.bytes_ok += len;
		x->st.last_ok_unix_ns = now_unix_ns();
		x->consecutive_failures = 0;
		x->st.healthy = true;
		snprintf(x->st.status, sizeof(x->st.status), "ok: %" PRIu64 " exports",
			 x->st.exports_ok);
	} else {
		x->st.exports_failed++;
		x->consecutive_failures++;
		x->st.healthy = false;
		snprintf(x->st.status, sizeof(x->st.status), "failing: %" PRIu64
			 " consecutive errors", x->consecutive_failures);
		snprintf(x->st.last_error, sizeof(x->st.last_error), "%s",
			 local.msg[0] ? local.msg : strerror(-r));
	}
	pthread_mutex_unlock(&x->lock);
	if (r < 0 && err)
		pf_error_set(err, r, local.path, "%s", local.msg[0] ? local.msg : strerror(-r));
	return r;
}

int agent_exporter_export(struct agent_exporter *x, const uint8_t *data, size_t len,
			  const uint8_t profile_id[16], struct pf_error *err)
{
	return run_export(x, data, len, profile_id, err);
}

static void *worker(void *arg)
{
	struct agent_exporter *x = arg;
	pthread_mutex_lock(&x->lock);
	for (;;) {
		while (!x->has_job && !x->stop)
			pthread_cond_wait(&x->cond, &x->lock);
		if (!x->has_job && x->stop)
			break;
		uint8_t *job = x->job;
		size_t len = x->job_len;
		uint8_t id[16];
		memcpy(id, x->job_id, 16);
		agent_exporter_done_fn done = x->done;
		void *user = x->user;
		x->job = NULL;
		x->has_job = false;
		pthread_mutex_unlock(&x->lock);

		int r = run_export(x, job, len, id, NULL);
		free(job);
		if (done)
			done(user, r);

		pthread_mutex_lock(&x->lock);
		x->busy = false;
		pthread_cond_broadcast(&x->cond);
	}
	pthread_mutex_unlock(&x->lock);
	return NULL;
}

int agent_exporter_submit(struct agent_exporter *x, const uint8_t *data, size_t len,
			  const uint8_t profile_id[16], agent_exporter_done_fn done, void *user)
{
	pthread_mutex_lock(&x->lock);
	if (x->busy) {
		x->st.dropped++;
		pthread_mutex_unlock(&x->lock);
		return -EBUSY;
	}
	if (!x->thread_started) {
		if (pthread_create(&x->thread, NULL, worker, x) != 0) {
			pthread_mutex_unlock(&x->lock);
			return -EAGAIN;
		}
		x->thread_started = true;
	}
	uint8_t *copy = malloc(len ? len : 1);
	if (!copy) {
		pthread_mutex_unlock(&x->lock);
		return -ENOMEM;
	}
	memcpy(copy, data, len);
	x->job = copy;
	x->job_len = len;
	memcpy(x->job_id, profile_id, 16);
	x->done = done;
	x->user = user;
	x->has_job = true;
	x->busy = true;
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
	return 0;
}

void agent_exporter_drain(struct agent_exporter *x)
{
	pthread_mutex_lock(&x->lock);
	while (x->busy)
		pthread_cond_wait(&x->cond, &x->lock);
	pthread_mutex_unlock(&x->lock);
}

void agent_exporter_status(struct agent_exporter *x, struct agent_exporter_status *out)
{
	pthread_mutex_lock(&x->lock);
	*out = x->st;
	pthread_mutex_unlock(&x->lock);
}

void agent_exporter_free(struct agent_exporter *x)
{
	if (!x)
		return;
	if (x->thread_started) {
		pthread_mutex_lock(&x->lock);
		x->stop = true;
		pthread_cond_broadcast(&x->cond);
		pthread_mutex_unlock(&x->lock);
		pthread_join(x->thread, NULL);
	}
	free(x->job);
	pthread_mutex_destroy(&x->lock);
	pthread_cond_destroy(&x->cond);
	agent_export_file_free(x->file);
	agent_otlp_http_free(x->http);
	free(x);
}
