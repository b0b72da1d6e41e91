/* encode_submit.c — see encode_submit.h. */
#include "export/encode_submit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "otlp_profiles.h"
#include "pf/compiler.h"
#include "pf/log.h"
#include "relabel/relabel.h"

static int by_samples_desc(const void *a, const void *b)
{
	const struct pf_prof_process *x = *(const struct pf_prof_process *const *)a;
	const struct pf_prof_process *y = *(const struct pf_prof_process *const *)b;
	uint64_t nx = 0, ny = 0;
	for (size_t i = 0; i < x->n_samples; i++)
		nx += x->samples[i].count;
	for (size_t i = 0; i < y->n_samples; i++)
		ny += y->samples[i].count;
	return nx < ny ? 1 : nx > ny ? -1 : 0;
}

static int encoded_reserve(struct agent_encoded *e, size_t cap)
{
	if (e->cap >= cap)
		return 0;
	struct pf_buf *b = realloc(e->b, cap * sizeof(*b));
	if (!b)
		return -ENOMEM;
	e->b = b;
	uint8_t(*ids)[16] = realloc(e->ids, cap * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	e->ids = ids;
	for (size_t i = e->cap; i < cap; i++)
		pf_buf_init(&e->b[i], PF_BUF_MAX_DEFAULT);
	e->cap = cap;
	return 0;
}

/* One request of w (or of its process p); a window without samples is no request. */
static int encode_one(const struct pf_prof_window *w, const struct pf_prof_process *p,
		      struct agent_encoded *e, struct pf_error *err)
{
	struct pf_prof_window one = *w;
	if (p) {
		one.processes = p;
		one.n_processes = 1;
	}
	struct pf_buf *b = &e->b[e->n];
	pf_buf_reset(b);
	int rc = pf_otlp_profiles_encode(&one, b, e->ids[e->n], err);
	if (rc == -ENODATA)
		return 0;
	if (rc == 0) {
		e->bytes += b->len;
		e->n++;
	}
	return rc;
}

static int encode(const struct pf_prof_window *w, bool per_process, size_t max,
		  struct agent_encoded *e, struct pf_error *err)
{
	size_t n = w->n_processes;
	if (!per_process)
		return encoded_reserve(e, 1) < 0 ? -ENOMEM : encode_one(w, NULL, e, err);
	if (encoded_reserve(e, pf_max(pf_min(n, max), (size_t)1)) < 0)
		return -ENOMEM;
	const struct pf_prof_process **order = calloc(n ? n : 1, sizeof(*order));
	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		order[i] = &w->processes[i];
	qsort(order, n, sizeof(*order), by_samples_desc);
	int rc = 0;
	for (size_t i = 0; i < n && e->n < max && rc == 0; i++)
		rc = encode_one(w, order[i], e, err);
	if (rc == 0 && n > max)
		pf_log_warn("capture: %zu processes sampled; the %zu busiest are exported", n, max);
	free(order);
	return rc;
}

int agent_encode_submit(struct pf_prof_window *w, bool per_process, size_t max,
			const struct agent_submit_sink *sink, struct agent_encoded *e,
			struct pf_error *err)
{
	e->n = 0;
	e->bytes = 0;
	int rl = agent_relabel_apply(w);
	if (rl < 0)
		return pf_error_set(err, rl, "profiling.relabel", "relabeling the window: %s",
				    strerror(-rl));
	if (sink->bytes) {
		int rc = encode(w, per_process, max, e, err);
		if (rc < 0)
			return rc;
	}
	if (sink->ready) {
		int rc = sink->ready(sink->ctx, e);
		if (rc < 0)
			return rc;
	}
	for (size_t i = 0; sink->bytes && i < e->n; i++)
		sink->bytes(sink->ctx, e->b[i].data, e->b[i].len, e->ids[i]);
	if (sink->window && pf_prof_window_samples(w))
		sink->window(sink->ctx, w);
	return 0;
}

void agent_encoded_release(struct agent_encoded *e)
{
	for (size_t i = 0; i < e->cap; i++)
		pf_buf_release(&e->b[i]);
	free(e->b);
	free(e->ids);
	*e = (struct agent_encoded){0};
}
