/* hotspot_unwind.c — see hotspot_unwind.h. */
#include "hotspot_unwind.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hotspot_code.h"
#include "hotspot_proc.h"
#include "pf/clock.h"
#include "pf/hash.h"
#include "python_proc.h" /* pf_py_read_mem: process_vm_readv */

#define KEEP_MS 120000 /* a name no window used this long is dropped */

enum { P_NONE, P_PENDING, P_JVM, P_UNSUPPORTED };

struct pcent {
	uint64_t pc;   /* 0: empty slot */
	uint64_t word; /* PF_JVM_FRAME(...); 0: no blob holds pc */
	uint64_t ms;   /* when looked up */
};

struct proc {
	struct pf_interp_proc link; /* first: the walker's table of processes */
	uint32_t pid;
	int state;
	struct pf_hs_file file; /* libjvm.so's variables, for a JVM still starting */
	uint64_t bias, retry_ms;
	struct pf_hs_vm vm;
	uint64_t lo, hi;   /* the code cache */
	struct pcent *pcs; /* open addressing, power of two */
	size_t n_pcs, cap_pcs;
	struct pf_interp_names names; /* by PF_JVM_FRAME word */
	int kernel;		      /* its jvm_procs entry: 0 not yet made, 1 made, -1 cannot */
	uint64_t kernel_retry_ms;     /* an entry not made yet (no interpreter yet) */
};

struct pf_hs_unwind {
	struct pf_interp_unwind base; /* first (pf_interp_walker): the switch, the
				       * unsupported list */
	struct pf_interp_procs procs; /* struct proc */
	unsigned budget;
	uint64_t frames, interp_frames, lookup_failed, named, name_failed;
};
/* pf_interp_walker_enable() and _enabled() reach the base through the walker */
_Static_assert(offsetof(struct pf_hs_unwind, base) == 0, "base first");

static int read_mem(void *ctx, uint64_t addr, void *buf, size_t len)
{
	return pf_py_read_mem(*(const int *)ctx, addr, buf, len);
}

struct pf_hs_unwind *pf_hs_unwind_new(void)
{
	struct pf_hs_unwind *u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	pf_interp_unwind_init(&u->base);
	u->budget = PF_HS_UNWIND_LOOKUPS_PER_TICK;
	return u;
}

static void proc_free(struct pf_interp_proc *l)
{
	struct proc *p = (struct proc *)l;
	pf_interp_names_clear(&p->names);
	free(p->pcs);
	free(p);
}

static void forget_all(void *w)
{
	pf_interp_procs_clear(&((struct pf_hs_unwind *)w)->procs, proc_free);
}

void pf_hs_unwind_free(struct pf_hs_unwind *u)
{
	if (!u)
		return;
	forget_all(u);
	free(u);
}

static struct proc *proc_get(const struct pf_hs_unwind *u, uint32_t pid)
{
	return (struct proc *)pf_interp_procs_get(&u->procs, pid);
}

bool pf_hs_unwind_has(const struct pf_hs_unwind *u, uint32_t pid)
{
	const struct proc *p = proc_get(u, pid);
	return p && (p->state == P_JVM || p->state == P_PENDING);
}

static void walker_forget(void *w, uint32_t pid)
{
	pf_interp_procs_drop(&((struct pf_hs_unwind *)w)->procs, pid, proc_free);
}

/* ---- detection ---- */

struct find {
	struct pf_hs_file f;
	uint64_t bias;
	int rc; /* 1 found, -ENOTSUP a libjvm.so the agent cannot read, 0 none */
	char why[96];
};

static int find_jvm(void *ctx, const struct pf_sym_exec_map *m)
{
	struct find *fd = ctx;
	if (m->fd < 0 || m->anon || !m->path || !pf_hs_file_name_ok(m->path))
		return 0;
	int rc = pf_hs_file_read(m->fd, &fd->f, fd->why, sizeof(fd->why));
	if (rc == 0) {
		fd->bias = m->bias;
		fd->rc = 1;
		return 1;
	}
	if (rc == -ENOTSUP)
		fd->rc = -ENOTSUP;
	return 0;
}

static void note_unsupported(struct pf_hs_unwind *u, uint32_t pid, const char *why)
{
	pf_interp_unwind_unsupported(&u->base, "pid %u: jvm: %.110s", pid,
				     why && *why ? why : "unsupported");
}

/* Reads the JVM's tables and its code cache's bounds: P_JVM, P_PENDING while it starts (its
 * variables or bounds not set yet), P_UNSUPPORTED (the reason kept), P_NONE (gone). */
static void jvm_read(struct pf_hs_unwind *u, struct proc *p, uint64_t now)
{
	char why[96];
	int pid = (int)p->pid;
	int rc = pf_hs_proc_read(&p->file, p->bias, read_mem, &pid, &p->vm, why, sizeof(why));
	if (rc == 0 && (read_mem(&pid, p->vm.codecache_low, &p->lo, sizeof(p->lo)) < 0 ||
			read_mem(&pid, p->vm.codecache_high, &p->hi, sizeof(p->hi)) < 0))
		rc = -ESRCH;
	if (rc == 0 && (!p->lo || p->hi <= p->lo))
		rc = -EAGAIN; /* the code cache is not reserved yet */
	if (rc == 0) {
		p->state = P_JVM;
	} else if (rc == -EAGAIN) {
		p->state = P_PENDING;
		p->retry_ms = now + PF_HS_UNWIND_RETRY_MS;
	} else if (rc == -ENOTSUP) {
		p->state = P_UNSUPPORTED;
		note_unsupported(u, p->pid, why);
	} else {
		p->state = P_NONE;
	}
}

int pf_hs_unwind_seen(struct pf_hs_unwind *u, struct pf_symbolizer *sym, uint32_t pid)
{
	if (!u->base.on)
		return 0;
	struct proc *p = proc_get(u, pid);
	if (p && p->state != P_NONE)
		return p->state == P_JVM;
	if (!p) { /* P_NONE is looked at again: its maps were captured again (a late dlopen) */
		if (!(p = calloc(1, sizeof(*p))))
			return 0;
		p->pid = p->link.pid = pid;
		pf_interp_procs_add(&u->procs, &p->link);
	}
	struct find fd = {0};
	if (pf_symbolizer_exec_maps(sym, pid, find_jvm, &fd) < 0 || fd.rc == 0) {
		p->state = P_NONE;
		return 0;
	}
	if (fd.rc != 1) {
		p->state = P_UNSUPPORTED;
		note_unsupported(u, pid, fd.why);
		return 0;
	}
	p->file = fd.f;
	p->bias = fd.bias;
	jvm_read(u, p, pf_mono_ms());
	return p->state == P_JVM;
}

/* ---- the two caches ---- */

static struct pcent *pc_slot(struct pcent *tab, size_t cap, uint64_t pc)
{
	size_t mask = cap - 1, j = pf_mix64(pc) & mask;
	while (tab[j].pc && tab[j].pc != pc)
		j = (j + 1) & mask;
	return &tab[j];
}

/* pc's entry, added (empty) when new; a full cache starts over. NULL: out of memory. */
static struct pcent *pc_entry(struct proc *p, uint64_t pc)
{
	if (p->cap_pcs) {
		struct pcent *e = pc_slot(p->pcs, p->cap_pcs, pc);
		if (e->pc)
			return e;
	}
	if (p->n_pcs >= PF_HS_UNWIND_PCS_MAX) {
		memset(p->pcs, 0, p->cap_pcs * sizeof(*p->pcs));
		p->n_pcs = 0;
	}
	if ((p->n_pcs + 1) * 2 > p->cap_pcs) {
		size_t cap = p->cap_pcs ? p->cap_pcs * 2 : 256;
		struct pcent *nt = calloc(cap, sizeof(*nt));
		if (!nt)
			return NULL;
		for (size_t i = 0; i < p->cap_pcs; i++)
			if (p->pcs[i].pc)
				*pc_slot(nt, cap, p->pcs[i].pc) = p->pcs[i];
		free(p->pcs);
		p->pcs = nt;
		p->cap_pcs = cap;
	}
	struct pcent *e = pc_slot(p->pcs, p->cap_pcs, pc);
	*e = (struct pcent){.pc = pc};
	p->n_pcs++;
	return e;
}

/* A method's names: "pkg.Class.method" into *function, with its descriptor into *system_name,
 * its source file (NULL: none) into *file, the line of bci into *line (0: unknown). 0;
 * -ENOMEM; or the reader's error (nothing set). */
static int method_names(struct proc *p, uint64_t method, int32_t bci, char **function,
			char **system_name, char **file, uint32_t *line)
{
	int pid = (int)p->pid;
	struct pf_hs_method m;
	int rc = pf_hs_method_name(&p->vm, read_mem, &pid, method, &m);
	if (rc < 0)
		return rc;
	size_t nk = strlen(m.klass), nn = strlen(m.name), ns = strlen(m.sig);
	*function = malloc(nk + nn + 2);
	*system_name = malloc(nk + nn + ns + 2);
	*file = m.file[0] ? strdup(m.file) : NULL;
	if (!*function || !*system_name || (m.file[0] && !*file)) {
		free(*function);
		free(*system_name);
		free(*file);
		*function = *system_name = *file = NULL;
		return -ENOMEM;
	}
	snprintf(*function, nk + nn + 2, "%s.%s", m.klass, m.name);
	snprintf(*system_name, nk + nn + ns + 2, "%s.%s%s", m.klass, m.name, m.sig);
	*line = 0;
	if (bci >= 0)
		pf_hs_method_line(&p->vm, read_mem, &pid, method, bci, line);
	return 0;
}

/* The scopes of PcDesc pcdesc into e: the outermost method (the nmethod's) names the frame,
 * at the line of its call into the next; the inner ones become its inlined functions,
 * innermost first. 0 or the first error. */
static int pcdesc_names(struct proc *p, uint64_t pcdesc, struct pf_interp_name *e)
{
	int pid = (int)p->pid;
	struct pf_hs_blob b;
	struct pf_hs_scope sc[PF_HS_SCOPES_MAX];
	int rc = pf_hs_blob_find(&p->vm, read_mem, &pid, pcdesc, &b);
	int n =
	    rc < 0 ? rc : pf_hs_scopes_at(&p->vm, read_mem, &pid, &b, pcdesc, sc, PF_HS_SCOPES_MAX);
	if (n < 0)
		return n;
	if (n > 1 && !(e->inlined = calloc((size_t)n - 1, sizeof(*e->inlined))))
		return -ENOMEM;
	for (int i = 0; i < n - 1; i++) {
		char *fn, *sys, *file;
		uint32_t line;
		if ((rc = method_names(p, sc[i].method, sc[i].bci, &fn, &sys, &file, &line)) < 0)
			return rc;
		e->inlined[i] = (struct pf_prof_inline){fn, sys, file, line};
		e->n_inlined++;
	}
	return method_names(p, sc[n - 1].method, sc[n - 1].bci, &e->function, &e->system_name,
			    &e->file, &e->line);
}

/* Names e from the process, by its kind (cpu_sampler.h PF_JVM_*). */
static void resolve(struct pf_hs_unwind *u, struct proc *p, struct pf_interp_name *e)
{
	int pid = (int)p->pid, rc = 0;
	e->done = true;
	uint64_t addr = PF_JVM_FRAME_ADDR(e->word);
	switch (PF_JVM_FRAME_KIND(e->word)) {
	case PF_JVM_BLOB: {
		struct pf_hs_blob b;
		rc = pf_hs_blob_find(&p->vm, read_mem, &pid, addr, &b);
		if (rc == 0 && b.start != addr)
			rc = -EINVAL;
		if (rc == 0 && !(e->function = strdup(b.name[0] ? b.name : "(code blob)")))
			rc = -ENOMEM;
		break;
	}
	case PF_JVM_METHOD:
		rc = method_names(p, addr, -1, &e->function, &e->system_name, &e->file, &e->line);
		break;
	case PF_JVM_INTERP: {
		uint32_t bci = PF_JVM_INTERP_BCI(e->word);
		rc = method_names(p, PF_JVM_INTERP_METHOD(e->word),
				  bci == PF_JVM_BCI_NONE ? -1 : (int32_t)bci, &e->function,
				  &e->system_name, &e->file, &e->line);
		break;
	}
	default:
		rc = pcdesc_names(p, addr, e);
	}
	if (rc < 0 || !e->function) {
		pf_interp_name_reset(e); /* what a naming cut short left */
		u->name_failed++;
		return;
	}
	pf_interp_names_named(&p->names, e);
	u->named++;
}

/* The frame word of pc, a code address of p's code cache: from the cache while fresh, else
 * looked up (within the budget). 0: none (no blob, no budget left). */
static uint64_t word_of(struct pf_hs_unwind *u, struct proc *p, uint64_t pc, uint64_t now)
{
	struct pcent *e = pc_entry(p, pc);
	if (!e)
		return 0;
	if (e->ms && now < e->ms + PF_HS_UNWIND_PC_KEEP_MS)
		return e->word;
	if (!u->budget)
		return 0;
	u->budget--;
	int pid = (int)p->pid;
	struct pf_hs_blob b;
	e->ms = now;
	e->word = 0;
	if (pf_hs_blob_find(&p->vm, read_mem, &pid, pc, &b) < 0) {
		u->lookup_failed++;
		return 0;
	}
	uint64_t pcdesc;
	if (b.method && pf_hs_pcdesc_find(&p->vm, read_mem, &pid, &b, pc, &pcdesc) == 0)
		e->word = PF_JVM_FRAME(pcdesc, PF_JVM_PCDESC);
	else
		e->word = b.method ? PF_JVM_FRAME(b.method, PF_JVM_METHOD)
				   : PF_JVM_FRAME(b.start, PF_JVM_BLOB);
	return e->word;
}

void pf_hs_unwind_note(struct pf_hs_unwind *u, uint32_t pid, uint64_t *ips, size_t n)
{
	struct proc *p = proc_get(u, pid);
	if (!p || !u->base.on)
		return;
	uint64_t now = pf_mono_ms();
	if (p->state == P_PENDING && now >= p->retry_ms)
		jvm_read(u, p, now);
	if (p->state != P_JVM)
		return;
	for (size_t i = 0; i < n; i++) {
		uint64_t word = ips[i];
		if (PF_JVM_IS_FRAME(word)) { /* the kernel's: an interpreted frame */
			if (PF_JVM_FRAME_KIND(word) != PF_JVM_INTERP)
				continue;
			u->interp_frames++;
		} else if (word >= p->lo && word < p->hi) {
			/* a caller's frame is at its return address: the call is just before */
			if (!(word = word_of(u, p, i ? ips[i] - 1 : ips[i], now)))
				continue;
			ips[i] = word;
			u->frames++;
		} else {
			continue;
		}
		struct pf_interp_name *e =
		    pf_interp_names_entry(&p->names, word, PF_HS_UNWIND_NAMES_MAX);
		if (!e)
			continue;
		e->used_ms = now;
		if (!e->done && u->budget) {
			u->budget--;
			resolve(u, p, e);
		}
	}
}

/* p's entry for the kernel's walk (cpu_sampler.h), from its code heaps and interpreter and
 * the layout its tables gave, each value checked against what the walk can take. 0; -EAGAIN
 * while the JVM has not made its heaps or interpreter yet; -ENOTSUP with the reason in why. */
static int kernel_layout(struct proc *p, struct pf_bpf_jvm_proc *e, char *why, size_t why_len)
{
	const struct pf_hs_vm *vm = &p->vm;
	int pid = (int)p->pid;
	struct pf_hs_heap h[PF_JVM_HEAPS];
	memset(e, 0, sizeof(*e));
	int n = pf_hs_heaps(vm, read_mem, &pid, h, PF_JVM_HEAPS);
	if (n == 0)
		return -EAGAIN;
	if (n < 0) {
		snprintf(why, why_len, "its code heaps (%s)", strerror(-n));
		return n == -EAGAIN ? -EINVAL : -ENOTSUP;
	}
	uint64_t ilo = 0, ihi = 0;
	int rc = pf_hs_interp_range(vm, read_mem, &pid, &ilo, &ihi);
	e->interp_lo = ilo;
	e->interp_hi = ihi;
	if (rc == -EAGAIN)
		return rc;
	if (rc < 0) {
		snprintf(why, why_len, "its interpreter (%s)", strerror(-rc));
		return -ENOTSUP;
	}
	for (int i = 0; i < n; i++)
		e->heaps[i] = (struct pf_bpf_jvm_heap){
		    .lo = h[i].lo, .hi = h[i].hi, .segmap = h[i].segmap, .log2_seg = h[i].log2_seg};
	e->n_heaps = (unsigned)n;
	/* the interpreter frame's slots below rbp, from the two exported ones: x86_64's layout
	 * (frame_x86.hpp) has the method one slot below last_sp, then mirror, mdp, cache,
	 * locals and the bytecode pointer */
	int32_t last = vm->c_fr_last_sp, sender = vm->c_fr_sender_sp;
	int64_t m_off = ((int64_t)last - 1) * 8, bcp_off = ((int64_t)last - 6) * 8,
		s_off = (int64_t)sender * 8;
	bool code_ptr = vm->blob_code_begin != 0; /* else _code_offset, an int */
	uint64_t cb = code_ptr ? vm->blob_code_begin : vm->blob_code_offset;
	bool ok = vm->size_heapblock <= 64 && vm->blob_frame_size % 4 == 0 &&
		  vm->blob_frame_size + 4 <= PF_JVM_BLOB_HDR && vm->blob_frame_complete % 4 == 0 &&
		  vm->blob_frame_complete + 4 <= PF_JVM_BLOB_HDR && cb % (code_ptr ? 8 : 4) == 0 &&
		  cb + (code_ptr ? 8 : 4) <= PF_JVM_BLOB_HDR && vm->method_const <= 0xffff &&
		  vm->size_constmethod <= 0xffff;
	int64_t slots[3] = {m_off, bcp_off, s_off};
	for (int i = 0; i < 3; i++)
		ok = ok && slots[i] >= -64 && slots[i] <= -8 && slots[i] % 8 == 0;
	if (!ok) {
		snprintf(why, why_len, "a CodeBlob or frame layout past the walk's bounds");
		return -ENOTSUP;
	}
	e->heapblock_size = (unsigned short)vm->size_heapblock;
	e->blob_frame_size = (unsigned short)vm->blob_frame_size;
	e->blob_frame_complete = (unsigned short)vm->blob_frame_complete;
	e->blob_code_begin = (unsigned short)cb;
	e->code_offset = !code_ptr;
	e->method_const = (unsigned short)vm->method_const;
	e->constmethod_size = (unsigned short)vm->size_constmethod;
	e->fp_method = (short)m_off;
	e->fp_bcp = (short)bcp_off;
	e->fp_sender_sp = (short)s_off;
	return 0;
}

int pf_hs_unwind_kernel_entry(struct pf_hs_unwind *u, uint32_t pid, struct pf_bpf_jvm_proc *e)
{
	struct proc *p = proc_get(u, pid);
	uint64_t now = pf_mono_ms();
	if (!p || !u->base.on || p->state != P_JVM || p->kernel || now < p->kernel_retry_ms)
		return 0;
	char why[96] = "";
	int rc = kernel_layout(p, e, why, sizeof(why));
	if (rc == -EAGAIN) {
		p->kernel_retry_ms = now + PF_HS_UNWIND_RETRY_MS;
		return 0;
	}
	if (rc < 0) {
		p->kernel = -1;
		pf_interp_unwind_unsupported(&u->base, "pid %u: jvm: frames not walked: %.80s", pid,
					     why);
		return 0;
	}
	p->kernel = 1;
	return 1;
}

static void walker_tick(void *w)
{
	struct pf_hs_unwind *u = w;
	u->budget = PF_HS_UNWIND_LOOKUPS_PER_TICK;
}

struct naming {
	struct pf_hs_unwind *u;
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
	struct naming nm = {walker, proc_get(walker, pid)};
	if (nm.p && nm.p->state != P_JVM)
		nm.p = NULL;
	return pf_interp_names_fill(nm.p ? &nm.p->names : NULL, PF_HS_UNWIND_NAMES_MAX,
				    PF_FRAME_JVM, pf_mono_ms(), w, frames, n, resolve_cb, &nm);
}

static void walker_closed(void *w)
{
	struct pf_hs_unwind *u = w;
	uint64_t now = pf_mono_ms();
	for (unsigned b = 0; b < PF_INTERP_PROC_BUCKETS; b++)
		for (struct pf_interp_proc *l = u->procs.b[b]; l; l = l->next)
			pf_interp_names_expire(&((struct proc *)l)->names, now, KEEP_MS);
}

void pf_hs_unwind_stats(const struct pf_hs_unwind *u, struct pf_hs_unwind_stats *out)
{
	memset(out, 0, sizeof(*out));
	for (unsigned b = 0; b < PF_INTERP_PROC_BUCKETS; b++) {
		for (const struct pf_interp_proc *l = u->procs.b[b]; l; l = l->next) {
			const struct proc *p = (const struct proc *)l;
			out->unsupported += p->state == P_UNSUPPORTED;
			if (p->state != P_JVM)
				continue;
			out->processes++;
			out->walked += p->kernel == 1;
			out->names += p->names.n;
			out->names_bytes +=
			    pf_interp_names_bytes(&p->names) + p->cap_pcs * sizeof(struct pcent);
		}
	}
	out->frames = u->frames;
	out->interp_frames = u->interp_frames;
	out->lookup_failed = u->lookup_failed;
	out->named = u->named;
	out->name_failed = u->name_failed;
	out->n_unsupported_msg = pf_interp_unwind_reasons(&u->base, out->unsupported_msg);
}

const struct pf_interp_walker pf_hs_walker = {.tick = walker_tick,
					      .forget = walker_forget,
					      .name = walker_name,
					      .closed = walker_closed,
					      .forget_all = forget_all};
