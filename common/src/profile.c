/* profile.c — the window arena; see profile.h. */
#include "pf/profile.h"

#include <stdlib.h>
#include <string.h>

#define CHUNK_MIN ((size_t)64 << 10)

struct chunk {
	struct chunk *next;
	size_t used, cap;
	_Alignas(16) unsigned char data[];
};

struct arena {
	struct chunk *head;
	struct pf_prof_window w;
};

struct pf_prof_window *pf_prof_window_new(void)
{
	struct arena *a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	a->w.arena = a;
	return &a->w;
}

void *pf_prof_alloc(struct pf_prof_window *w, size_t size)
{
	struct arena *a = w->arena;
	size = (size + 15) & ~(size_t)15;
	if (!size)
		size = 16;
	struct chunk *c = a->head;
	if (!c || c->cap - c->used < size) {
		size_t cap = size > CHUNK_MIN ? size : CHUNK_MIN;
		c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->cap = cap;
		c->used = 0;
		c->next = a->head;
		a->head = c;
	}
	void *p = c->data + c->used;
	c->used += size;
	memset(p, 0, size);
	return p;
}

const char *pf_prof_strdup(struct pf_prof_window *w, const char *s)
{
	if (!s)
		return NULL;
	size_t n = strlen(s) + 1;
	char *p = pf_prof_alloc(w, n);
	if (p)
		memcpy(p, s, n);
	return p;
}

void pf_prof_window_free(struct pf_prof_window *w)
{
	if (!w)
		return;
	struct arena *a = w->arena;
	struct chunk *c = a->head;
	while (c) {
		struct chunk *n = c->next;
		free(c);
		c = n;
	}
	free(a);
}

uint64_t pf_prof_window_samples(const struct pf_prof_window *w)
{
	uint64_t n = 0;
	for (size_t i = 0; i < w->n_processes; i++)
		for (size_t j = 0; j < w->processes[i].n_samples; j++)
			n += w->processes[i].samples[j].count;
	return n;
}

size_t pf_prof_window_types(const struct pf_prof_window *w)
{
	return w->n_sample_types ? w->n_sample_types : 1;
}

struct pf_prof_value_type pf_prof_window_type(const struct pf_prof_window *w, size_t k)
{
	if (!w->n_sample_types)
		return (struct pf_prof_value_type){"samples", "count"};
	if (k >= w->n_sample_types)
		return (struct pf_prof_value_type){NULL, NULL};
	return w->sample_types[k];
}

struct pf_prof_value_type pf_prof_window_period_type(const struct pf_prof_window *w)
{
	if (!w->n_sample_types)
		return (struct pf_prof_value_type){"cpu", "nanoseconds"};
	return w->period_type;
}

int64_t pf_prof_window_period(const struct pf_prof_window *w)
{
	if (!w->n_sample_types)
		return w->frequency_hz ? (int64_t)(1000000000ull / w->frequency_hz) : 0;
	return w->period;
}

int64_t pf_prof_sample_value(const struct pf_prof_window *w, const struct pf_prof_sample *s,
			     size_t k)
{
	if (w->n_sample_types && s->values)
		return k < w->n_sample_types ? s->values[k] : 0;
	if (k)
		return 0;
	return s->count > INT64_MAX ? INT64_MAX : (int64_t)s->count;
}

int pf_prof_sample_nonzero(const struct pf_prof_window *w, const struct pf_prof_sample *s)
{
	if (w->n_sample_types && s->values) {
		for (size_t k = 0; k < w->n_sample_types; k++)
			if (s->values[k])
				return 1;
		return 0;
	}
	return s->count != 0;
}

static const char *const frame_kind_names[] = {
	[PF_FRAME_NATIVE] = "native",
	[PF_FRAME_KERNEL] = "kernel",
	[PF_FRAME_PYTHON] = "cpython",
	[PF_FRAME_GO] = "go",
	[PF_FRAME_V8JS] = "v8js",
	[PF_FRAME_JVM] = "jvm",
};

const char *pf_frame_kind_name(uint8_t kind)
{
	return kind < sizeof(frame_kind_names) / sizeof(frame_kind_names[0])
		       ? frame_kind_names[kind]
		       : "native";
}

uint8_t pf_frame_kind_parse(const char *type)
{
	for (uint8_t k = 0; k < sizeof(frame_kind_names) / sizeof(frame_kind_names[0]); k++)
		if (type && !strcmp(type, frame_kind_names[k]))
			return k;
	return PF_FRAME_NATIVE;
}
