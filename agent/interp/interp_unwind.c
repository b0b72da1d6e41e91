/* interp_unwind.c — see interp_unwind.h. */
#include "interp/interp_unwind.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pf/hash.h"

void pf_interp_unwind_init(struct pf_interp_unwind *b)
{
	memset(b, 0, sizeof(*b));
	b->on = true;
}

bool pf_interp_unwind_switch(struct pf_interp_unwind *b, bool on)
{
	bool off_now = b->on && !on;
	b->on = on;
	return off_now;
}

bool pf_interp_walker_enabled(const void *w)
{
	return ((const struct pf_interp_unwind *)w)->on;
}

bool pf_interp_walker_enable(const struct pf_interp_walker *ops, void *w, bool on)
{
	bool off_now = pf_interp_unwind_switch(w, on);
	if (off_now)
		ops->forget_all(w);
	return off_now;
}

void pf_interp_unwind_unsupported(struct pf_interp_unwind *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b->unsup[b->next_unsup], sizeof(b->unsup[0]), fmt, ap);
	va_end(ap);
	b->next_unsup = (b->next_unsup + 1) % PF_INTERP_UNSUPPORTED_KEPT;
	if (b->n_unsup < PF_INTERP_UNSUPPORTED_KEPT)
		b->n_unsup++;
}

unsigned pf_interp_unwind_reasons(const struct pf_interp_unwind *b,
				  char out[PF_INTERP_UNSUPPORTED_KEPT][PF_INTERP_MSG_LEN])
{
	for (unsigned k = 0; k < b->n_unsup; k++) {
		unsigned at = (b->next_unsup + PF_INTERP_UNSUPPORTED_KEPT - b->n_unsup + k) %
			      PF_INTERP_UNSUPPORTED_KEPT;
		memcpy(out[k], b->unsup[at], sizeof(out[k]));
	}
	return b->n_unsup;
}

int pf_interp_frame_name(struct pf_prof_window *w, struct pf_prof_frame *f, const char *function,
			 const char *file, uint32_t line)
{
	f->function = pf_prof_strdup(w, function);
	f->file = file ? pf_prof_strdup(w, file) : NULL;
	if (!f->function || (file && !f->file))
		return -ENOMEM;
	f->line = line;
	return 0;
}

struct pf_interp_proc *pf_interp_procs_get(const struct pf_interp_procs *t, uint32_t pid)
{
	struct pf_interp_proc *p = t->b[pid % PF_INTERP_PROC_BUCKETS];
	while (p && p->pid != pid)
		p = p->next;
	return p;
}

void pf_interp_procs_add(struct pf_interp_procs *t, struct pf_interp_proc *p)
{
	struct pf_interp_proc **head = &t->b[p->pid % PF_INTERP_PROC_BUCKETS];
	p->next = *head;
	*head = p;
}

struct pf_interp_proc *pf_interp_procs_take(struct pf_interp_procs *t, uint32_t pid)
{
	struct pf_interp_proc **pp = &t->b[pid % PF_INTERP_PROC_BUCKETS];
	while (*pp && (*pp)->pid != pid)
		pp = &(*pp)->next;
	struct pf_interp_proc *p = *pp;
	if (p)
		*pp = p->next;
	return p;
}

struct pf_interp_proc *pf_interp_procs_pop(struct pf_interp_procs *t)
{
	for (unsigned i = 0; i < PF_INTERP_PROC_BUCKETS; i++) {
		struct pf_interp_proc *p = t->b[i];
		if (p) {
			t->b[i] = p->next;
			return p;
		}
	}
	return NULL;
}

void pf_interp_procs_drop(struct pf_interp_procs *t, uint32_t pid,
			  void (*free_fn)(struct pf_interp_proc *))
{
	struct pf_interp_proc *p = pf_interp_procs_take(t, pid);
	if (p)
		free_fn(p);
}

void pf_interp_procs_clear(struct pf_interp_procs *t, void (*free_fn)(struct pf_interp_proc *))
{
	struct pf_interp_proc *p;
	while ((p = pf_interp_procs_pop(t)))
		free_fn(p);
}

static struct pf_interp_name *name_slot(struct pf_interp_name *tab, size_t cap, uint64_t word)
{
	size_t mask = cap - 1, j = pf_mix64(word) & mask;
	while (tab[j].word && tab[j].word != word)
		j = (j + 1) & mask;
	return &tab[j];
}

static size_t strs_bytes(const char *a, const char *b, const char *c)
{
	const char *s[3] = {a, b, c};
	size_t n = 0;
	for (int i = 0; i < 3; i++)
		n += s[i] ? strlen(s[i]) + 1 : 0;
	return n;
}

static size_t name_bytes(const struct pf_interp_name *e)
{
	size_t b = strs_bytes(e->function, e->file, e->system_name);
	for (uint32_t i = 0; i < e->n_inlined; i++) {
		const struct pf_prof_inline *in = &e->inlined[i];
		b += sizeof(*in) + strs_bytes(in->function, in->file, in->system_name);
	}
	return b;
}

static void name_free(struct pf_interp_name *e)
{
	free(e->function);
	free(e->file);
	free(e->system_name);
	for (uint32_t i = 0; i < e->n_inlined; i++) {
		free((char *)e->inlined[i].function);
		free((char *)e->inlined[i].file);
		free((char *)e->inlined[i].system_name);
	}
	free(e->inlined);
}

void pf_interp_name_reset(struct pf_interp_name *e)
{
	name_free(e);
	*e = (struct pf_interp_name){.word = e->word, .done = e->done, .used_ms = e->used_ms};
}

struct pf_interp_name *pf_interp_names_entry(struct pf_interp_names *t, uint64_t word, size_t max)
{
	if (t->cap) {
		struct pf_interp_name *e = name_slot(t->tab, t->cap, word);
		if (e->word)
			return e;
	}
	if (t->n >= max)
		return NULL;
	if ((t->n + 1) * 2 > t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 256;
		struct pf_interp_name *nt = calloc(cap, sizeof(*nt));
		if (!nt)
			return NULL;
		for (size_t i = 0; i < t->cap; i++)
			if (t->tab[i].word)
				*name_slot(nt, cap, t->tab[i].word) = t->tab[i];
		free(t->tab);
		t->tab = nt;
		t->cap = cap;
	}
	struct pf_interp_name *e = name_slot(t->tab, t->cap, word);
	*e = (struct pf_interp_name){.word = word};
	t->n++;
	return e;
}

void pf_interp_names_named(struct pf_interp_names *t, const struct pf_interp_name *e)
{
	t->bytes += name_bytes(e);
}

void pf_interp_names_expire(struct pf_interp_names *t, uint64_t now, uint64_t keep_ms)
{
	size_t stale = 0;
	for (size_t j = 0; j < t->cap; j++)
		stale += t->tab[j].word && now > t->tab[j].used_ms + keep_ms;
	if (!stale)
		return;
	struct pf_interp_name *nt = calloc(t->cap, sizeof(*nt));
	if (!nt)
		return; /* kept until the next try */
	t->n = 0;
	for (size_t j = 0; j < t->cap; j++) {
		struct pf_interp_name *e = &t->tab[j];
		if (!e->word)
			continue;
		if (now > e->used_ms + keep_ms) {
			t->bytes -= name_bytes(e);
			name_free(e);
			continue;
		}
		*name_slot(nt, t->cap, e->word) = *e;
		t->n++;
	}
	free(t->tab);
	t->tab = nt;
}

void pf_interp_names_clear(struct pf_interp_names *t)
{
	for (size_t i = 0; i < t->cap; i++)
		name_free(&t->tab[i]);
	free(t->tab);
	*t = (struct pf_interp_names){0};
}

size_t pf_interp_names_bytes(const struct pf_interp_names *t)
{
	return t->bytes + t->cap * sizeof(struct pf_interp_name);
}

int pf_interp_names_fill(struct pf_interp_names *t, size_t max, uint8_t kind, uint64_t now,
			 struct pf_prof_window *w, struct pf_prof_frame *frames, size_t n,
			 void (*resolve)(void *ctx, struct pf_interp_name *e), void *ctx)
{
	for (size_t i = 0; i < n; i++) {
		struct pf_prof_frame *f = &frames[i];
		if (f->kind != kind)
			continue;
		f->mapping = -1;
		struct pf_interp_name *e = t ? pf_interp_names_entry(t, f->address, max) : NULL;
		if (!e)
			continue;
		if (!e->done)
			resolve(ctx, e);
		e->used_ms = now;
		if (e->function && pf_interp_name_frame(w, f, e) < 0)
			return -ENOMEM;
	}
	return 0;
}

int pf_interp_name_frame(struct pf_prof_window *w, struct pf_prof_frame *f,
			 const struct pf_interp_name *e)
{
	if (pf_interp_frame_name(w, f, e->function, e->file, e->line) < 0)
		return -ENOMEM;
	if (e->system_name && !(f->system_name = pf_prof_strdup(w, e->system_name)))
		return -ENOMEM;
	if (!e->n_inlined)
		return 0;
	struct pf_prof_inline *in = pf_prof_alloc(w, e->n_inlined * sizeof(*in));
	if (!in)
		return -ENOMEM;
	for (uint32_t i = 0; i < e->n_inlined; i++) {
		const struct pf_prof_inline *s = &e->inlined[i];
		in[i] = (struct pf_prof_inline){.line = s->line};
		if ((s->function && !(in[i].function = pf_prof_strdup(w, s->function))) ||
		    (s->file && !(in[i].file = pf_prof_strdup(w, s->file))) ||
		    (s->system_name && !(in[i].system_name = pf_prof_strdup(w, s->system_name))))
			return -ENOMEM;
	}
	f->inlined = in;
	f->n_inlined = e->n_inlined;
	return 0;
}
