/* v8_unwind.c — see v8_unwind.h. */
#include "v8_unwind.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pf/clock.h"
#include "v8_names.h"
#include "v8_proc.h"

#define KEEP_MS 120000 /* a name neither noted nor used this long is dropped */

enum { P_NONE, P_V8, P_UNSUPPORTED };

struct proc {
	struct pf_interp_proc link; /* first: the walker's table of processes */
	uint32_t pid;
	int state;
	struct pf_v8_names *names;
	struct pf_interp_names tab; /* by PF_V8_FRAME word */
};

struct pf_v8_unwind {
	struct pf_interp_unwind base; /* first (pf_interp_walker): the switch, the
				       * unsupported list */
	struct pf_interp_procs procs; /* struct proc */
	unsigned budget;
	uint64_t named, name_failed;
	char version[32];
};
/* pf_interp_walker_enable() and _enabled() reach the base through the walker */
_Static_assert(offsetof(struct pf_v8_unwind, base) == 0, "base first");

struct pf_v8_unwind *pf_v8_unwind_new(void)
{
	struct pf_v8_unwind *u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	pf_interp_unwind_init(&u->base);
	u->budget = PF_V8_UNWIND_NAMES_PER_TICK;
	return u;
}

static void proc_free(struct pf_interp_proc *l)
{
	struct proc *p = (struct proc *)l;
	pf_interp_names_clear(&p->tab);
	pf_v8_names_free(p->names);
	free(p);
}

static void forget_all(void *w)
{
	pf_interp_procs_clear(&((struct pf_v8_unwind *)w)->procs, proc_free);
}

void pf_v8_unwind_free(struct pf_v8_unwind *u)
{
	if (!u)
		return;
	forget_all(u);
	free(u);
}

static struct proc *v8_proc(const struct pf_v8_unwind *u, uint32_t pid)
{
	struct proc *p = (struct proc *)pf_interp_procs_get(&u->procs, pid);
	return p && p->state == P_V8 ? p : NULL;
}

bool pf_v8_unwind_has(const struct pf_v8_unwind *u, uint32_t pid)
{
	return v8_proc(u, pid) != NULL;
}

static void walker_forget(void *w, uint32_t pid)
{
	pf_interp_procs_drop(&((struct pf_v8_unwind *)w)->procs, pid, proc_free);
}

/* ---- detection ---- */

struct find {
	struct pf_v8_file f;
	uint64_t bias;
	int rc; /* 1 found, -ENOTSUP a node file the walk cannot read, 0 none */
	char why[96];
};

static int find_node(void *ctx, const struct pf_sym_exec_map *m)
{
	struct find *fd = ctx;
	if (m->fd < 0 || m->anon || !m->path || !pf_v8_file_name_ok(m->path))
		return 0;
	int rc = pf_v8_file_read(m->fd, &fd->f, fd->why, sizeof(fd->why));
	if (rc == 0) {
		fd->bias = m->bias;
		fd->rc = 1;
		return 1;
	}
	if (rc == -ENOTSUP)
		fd->rc = -ENOTSUP;
	return 0;
}

static void note_unsupported(struct pf_v8_unwind *u, uint32_t pid, const char *why)
{
	pf_interp_unwind_unsupported(&u->base, "pid %u: v8: %.110s", pid,
				     why && *why ? why : "unsupported");
}

/* The kernel entry of a file's constants: the walk's checks (cpu_sampler.h). */
static int entry_of(const struct pf_v8_meta *m, struct pf_bpf_v8_proc *out)
{
	memset(out, 0, sizeof(*out));
	if (m->fp_context != m->fp_marker || m->fp_marker < -64 || m->fp_marker >= 0 ||
	    m->fp_marker % 8 || m->fp_function < -64 || m->fp_function >= 0 || m->fp_function % 8 ||
	    m->fn_shared <= 0 || m->fn_shared >= 256 || m->fn_shared % 8)
		return -ENOTSUP;
	out->fp_marker = (short)m->fp_marker;
	out->fp_function = (short)m->fp_function;
	out->fn_shared = (unsigned short)m->fn_shared;
	return 0;
}

int pf_v8_unwind_seen(struct pf_v8_unwind *u, struct pf_symbolizer *sym, uint32_t pid,
		      struct pf_bpf_v8_proc *out, uint64_t *start, uint64_t *end)
{
	if (!u->base.on)
		return 0;
	if (pf_interp_procs_get(&u->procs, pid))
		return 0;
	struct proc *p = calloc(1, sizeof(*p));
	if (!p)
		return 0;
	p->pid = p->link.pid = pid;
	pf_interp_procs_add(&u->procs, &p->link);
	struct find fd = {0};
	if (pf_symbolizer_exec_maps(sym, pid, find_node, &fd) < 0 || fd.rc == 0) {
		p->state = P_NONE;
		return 0;
	}
	if (fd.rc == 1 && entry_of(&fd.f.meta, out) < 0) {
		snprintf(fd.why, sizeof(fd.why), "frame slots the walk does not read");
		fd.rc = -ENOTSUP;
	}
	if (fd.rc == 1 && !(p->names = pf_v8_names_new(&fd.f)))
		fd.rc = 0;
	if (fd.rc != 1) {
		p->state = fd.rc == -ENOTSUP ? P_UNSUPPORTED : P_NONE;
		if (fd.rc == -ENOTSUP)
			note_unsupported(u, pid, fd.why);
		return 0;
	}
	p->state = P_V8;
	*start = fd.f.builtins_start ? fd.f.builtins_start + fd.bias : 0;
	*end = fd.f.builtins_start ? fd.f.builtins_end + fd.bias : 0;
	if (fd.f.major >= 0)
		snprintf(u->version, sizeof(u->version), "%d.%d.%d", fd.f.major, fd.f.minor,
			 fd.f.build);
	return 1;
}

/* ---- names ---- */

static void resolve(struct pf_v8_unwind *u, struct proc *p, struct pf_interp_name *e)
{
	struct pf_v8_frame fr;
	e->done = true;
	if (pf_v8_names_resolve(p->names, (int)p->pid, PF_V8_FRAME_SFI(e->word), &fr) < 0) {
		u->name_failed++;
		return;
	}
	e->function = strdup(fr.name[0] ? fr.name : "(anonymous)");
	e->file = fr.file[0] ? strdup(fr.file) : NULL;
	e->line = fr.line;
	if (!e->function) {
		u->name_failed++;
		return;
	}
	pf_interp_names_named(&p->tab, e);
	u->named++;
}

void pf_v8_unwind_note(struct pf_v8_unwind *u, uint32_t pid, const uint64_t *ips, size_t n)
{
	struct proc *p = NULL;
	uint64_t now = 0;
	for (size_t i = 0; i < n; i++) {
		if (!PF_V8_IS_FRAME(ips[i]))
			continue;
		if (!p) {
			if (!(p = v8_proc(u, pid)))
				return;
			now = pf_mono_ms();
		}
		struct pf_interp_name *e =
		    pf_interp_names_entry(&p->tab, ips[i], PF_V8_UNWIND_WORDS_MAX);
		if (!e)
			return;
		e->used_ms = now;
		if (!e->done && u->budget) {
			u->budget--;
			resolve(u, p, e);
		}
	}
}

static void walker_tick(void *w)
{
	struct pf_v8_unwind *u = w;
	u->budget = PF_V8_UNWIND_NAMES_PER_TICK;
}

struct naming {
	struct pf_v8_unwind *u;
	struct proc *p;
};

static void resolve_cb(void *ctx, struct pf_interp_name *e)
{
	struct naming *nm = ctx;
	resolve(nm->u, nm->p, e);
}

static int walker_name(void *walker, uint32_t pid, struct pf_prof_window *w,
		       struct pf_prof_frame *frames, size_t n)
{
	struct naming nm = {walker, v8_proc(walker, pid)};
	return pf_interp_names_fill(nm.p ? &nm.p->tab : NULL, PF_V8_UNWIND_WORDS_MAX, PF_FRAME_V8JS,
				    pf_mono_ms(), w, frames, n, resolve_cb, &nm);
}

static void walker_closed(void *w)
{
	struct pf_v8_unwind *u = w;
	uint64_t now = pf_mono_ms();
	for (unsigned b = 0; b < PF_INTERP_PROC_BUCKETS; b++)
		for (struct pf_interp_proc *l = u->procs.b[b]; l; l = l->next)
			pf_interp_names_expire(&((struct proc *)l)->tab, now, KEEP_MS);
}

void pf_v8_unwind_stats(const struct pf_v8_unwind *u, struct pf_v8_unwind_stats *out)
{
	memset(out, 0, sizeof(*out));
	for (unsigned b = 0; b < PF_INTERP_PROC_BUCKETS; b++) {
		for (const struct pf_interp_proc *l = u->procs.b[b]; l; l = l->next) {
			const struct proc *p = (const struct proc *)l;
			out->unsupported += p->state == P_UNSUPPORTED;
			if (p->state != P_V8)
				continue;
			out->processes++;
			out->words += p->tab.n;
			out->names_bytes +=
			    pf_interp_names_bytes(&p->tab) + pf_v8_names_bytes(p->names);
		}
	}
	out->named = u->named;
	out->name_failed = u->name_failed;
	out->n_unsupported_msg = pf_interp_unwind_reasons(&u->base, out->unsupported_msg);
	memcpy(out->version, u->version, sizeof(out->version));
}

const struct pf_interp_walker pf_v8_walker = {.tick = walker_tick,
					      .forget = walker_forget,
					      .name = walker_name,
					      .closed = walker_closed,
					      .forget_all = forget_all};
