/* interp_unwind.c — see interp_unwind.h. */
#include "interp/interp_unwind.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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
