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
