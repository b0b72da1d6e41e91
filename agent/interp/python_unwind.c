/* python_unwind.c — see python_unwind.h. */
#include "python_unwind.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pf/array.h"
#include "pf/clock.h"
#include "pf/compiler.h"
#include "python_code.h"

#define NAMES_DEFAULT_BYTES (256u << 10) /* code-object cache of one process */
#define STRINGS_MAX_BYTES (1u << 20)     /* interned names and files of one process */
#define WORD_KEEP_MS 120000 /* a name neither noted nor used this long is dropped */
#define DETECT_TRIES 5        /* detections of a process before it is taken as not Python */
#define DETECT_RETRY_MS 1000

enum proc_state { P_PENDING, P_NONE, P_PYTHON, P_UNSUPPORTED };
enum word_state { W_QUEUED, W_NAMED, W_FAILED };

struct word {
	uint64_t word; /* PF_PY_FRAME(...); 0: empty slot */
	const char *name, *file; /* interned in the process's strings */
	uint32_t line;
	uint8_t state;
	uint64_t last_ms;
};

struct proc {
	uint32_t pid;
	uint8_t state;
	uint8_t tries; /* detections that failed for a reason that may pass */
	unsigned minor;
	uint64_t first_ms; /* its first sample; a retry's time minus the detection delay */
	struct pf_py_process *info;
	struct pf_py_names *names;
	struct word *w; /* open addressing, power of two */
	size_t n_w, cap_w;
	char **str; /* interned strings, open addressing */
	size_t n_str, cap_str, str_bytes;
};

struct queued {
	uint32_t pid;
	uint64_t word;
};

struct pf_py_unwind {
	struct pf_interp_unwind base; /* first (pf_interp_walker): the switch, the
				       * unsupported list */
	size_t names_max;
	struct proc **p; /* sorted by pid */
	size_t n, cap;
	struct queued *q;
	size_t n_q, cap_q;
	unsigned detect_budget;
	uint64_t detected_total, detect_failed, named, name_failed;
	uint64_t detect_cpu_ns; /* thread CPU time of the detections */
};
/* pf_interp_walker_enable() and _enabled() reach the base through the walker */
_Static_assert(offsetof(struct pf_py_unwind, base) == 0, "base first");

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static uint64_t str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

struct pf_py_unwind *pf_py_unwind_new(size_t names_max_bytes)
{
	struct pf_py_unwind *u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	pf_interp_unwind_init(&u->base);
	u->names_max = names_max_bytes ? names_max_bytes : NAMES_DEFAULT_BYTES;
	u->detect_budget = PF_PY_UNWIND_DETECTS_PER_TICK;
	return u;
}

static void proc_free(struct proc *p)
{
	if (!p)
		return;
	pf_py_names_free(p->names);
	free(p->info);
	free(p->w);
	for (size_t i = 0; i < p->cap_str; i++)
		free(p->str[i]);
	free(p->str);
	free(p);
}

static void forget_all(void *w)
{
	struct pf_py_unwind *u = w;
	for (size_t i = 0; i < u->n; i++)
		proc_free(u->p[i]);
	u->n = 0;
	u->n_q = 0;
}

void pf_py_unwind_free(struct pf_py_unwind *u)
{
	if (!u)
		return;
	forget_all(u);
	free(u->p);
	free(u->q);
	free(u);
}

/* The index of pid in u->p, or where it would go (*found false). */
static size_t proc_pos(const struct pf_py_unwind *u, uint32_t pid, bool *found)
{
	size_t lo = 0, hi = u->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (u->p[mid]->pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < u->n && u->p[lo]->pid == pid;
	return lo;
}

static struct proc *proc_get(const struct pf_py_unwind *u, uint32_t pid)
{
	bool found;
	size_t i = proc_pos(u, pid, &found);
	return found ? u->p[i] : NULL;
}

bool pf_py_unwind_has(const struct pf_py_unwind *u, uint32_t pid)
{
	const struct proc *p = u ? proc_get(u, pid) : NULL;
	return p && p->state == P_PYTHON;
}

static struct proc *proc_add(struct pf_py_unwind *u, uint32_t pid, size_t at)
{
	if (PF_ARRAY_GROW(u->p, u->cap, u->n + 1, 64) < 0)
		return NULL;
	struct proc *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	memmove(&u->p[at + 1], &u->p[at], (u->n - at) * sizeof(*u->p));
	u->p[at] = p;
	u->n++;
	return p;
}

static void walker_forget(void *w, uint32_t pid)
{
	struct pf_py_unwind *u = w;
	bool found;
	size_t i = proc_pos(u, pid, &found);
	if (!found)
		return;
	proc_free(u->p[i]);
	memmove(&u->p[i], &u->p[i + 1], (u->n - i - 1) * sizeof(*u->p));
	u->n--;
}

/* ---- the kernel entry ---- */

/* An offset of a field of size bytes inside the frame window read (grown to cover it), aligned
 * to its size; PF_PY_OFF_NONE for a field the version lacks when optional. */
static int frame_field(uint32_t off, uint32_t size, bool optional, unsigned short *out,
		       uint32_t *window)
{
	if (off == PF_PY_NONE) {
		if (!optional)
			return -ENOTSUP;
		*out = PF_PY_OFF_NONE;
		return 0;
	}
	if (off % size || off + size > PF_PY_FRAME_READ_MAX)
		return -ENOTSUP;
	*out = (unsigned short)off;
	if (off + size > *window)
		*window = off + size;
	return 0;
}

/* One frame field of the kernel entry: its offset in the version's layout, read as size bytes
 * (aligned as much), written to *out. */
struct frame_spec {
	uint32_t off;
	uint32_t size;
	bool optional;
	unsigned short *out;
};

/* frame_field() of each spec in turn: 0, or the first failure. */
static int frame_fields(const struct frame_spec *f, size_t n, uint32_t *window)
{
	int rc = 0;
	for (size_t i = 0; !rc && i < n; i++)
		rc = frame_field(f[i].off, f[i].size, f[i].optional, f[i].out, window);
	return rc;
}

static int small_off(uint32_t off, bool optional, unsigned short *out)
{
	if (off == PF_PY_NONE && optional) {
		*out = PF_PY_OFF_NONE;
		return 0;
	}
	if (off == PF_PY_NONE || off >= PF_PY_OFF_NONE || off % 8)
		return -ENOTSUP;
	*out = (unsigned short)off;
	return 0;
}

int pf_py_unwind_layout(const struct pf_py_process *p, struct pf_bpf_py_proc *out)
{
	const struct pf_py_offsets *o = &p->off;
	memset(out, 0, sizeof(*out));
	if (!p->runtime_addr || !p->n_eval || p->n_eval > PF_PY_MAX_EVAL_RANGES)
		return -ENOTSUP;
	out->runtime = p->runtime_addr;
	for (unsigned i = 0; i < p->n_eval && i < PF_PY_EVAL_RANGES; i++) {
		if (p->eval[i].end <= p->eval[i].start)
			return -ENOTSUP;
		out->eval_start[i] = p->eval[i].start;
		out->eval_end[i] = p->eval[i].end;
	}
	uint32_t window = 0;
	int rc = small_off(o->runtime_interpreters_head, false, &out->rt_interp_head);
	if (!rc)
		rc = small_off(o->interp_threads_head, false, &out->interp_threads_head);
	if (!rc)
		rc = small_off(o->tstate_next, false, &out->tstate_next);
	if (!rc)
		rc = small_off(o->tstate_thread_id, false, &out->tstate_thread_id);
	if (!rc)
		rc = small_off(o->tstate_frame, false, &out->tstate_frame);
	if (!rc)
		rc = small_off(o->cframe_current_frame, true, &out->cframe_frame);
	if (rc)
		return rc;
	out->owner_cstack = PF_PY_OFF_NONE;
	if (o->frame_kind == PF_PY_FRAMES_OBJECT) {
		const struct frame_spec f[] = {
		    {o->pyframe_back, 8, false, &out->f_back},
		    {o->pyframe_code, 8, false, &out->f_code},
		    {o->pyframe_lasti, 4, false, &out->f_instr},
		};
		out->frame_kind = PF_BPF_PY_OBJECT;
		rc = frame_fields(f, PF_ARRAY_SIZE(f), &window);
		out->f_owner = out->f_is_entry = PF_PY_OFF_NONE;
	} else if (o->frame_kind == PF_PY_FRAMES_INTERP) {
		const struct frame_spec f[] = {
		    {o->iframe_previous, 8, false, &out->f_back},
		    {o->iframe_code, 8, false, &out->f_code},
		    {o->iframe_instr, 8, false, &out->f_instr},
		    {o->iframe_owner, 1, true, &out->f_owner},
		    {o->iframe_is_entry, 1, true, &out->f_is_entry},
		};
		out->frame_kind = PF_BPF_PY_INTERP;
		rc = frame_fields(f, PF_ARRAY_SIZE(f), &window);
		if (rc)
			return rc;
		/* the walk needs one way to find where an activation's frames end */
		if (o->owner_cstack != PF_PY_NONE) {
			if (o->owner_cstack > 0xff || out->f_owner == PF_PY_OFF_NONE)
				return -ENOTSUP;
			out->owner_cstack = (unsigned short)o->owner_cstack;
		} else if (out->f_is_entry == PF_PY_OFF_NONE) {
			return -ENOTSUP;
		}
		if (o->code_code_adaptive == PF_PY_NONE)
			return -ENOTSUP;
		out->code_adaptive = o->code_code_adaptive;
	} else {
		return -ENOTSUP;
	}
	if (rc)
		return rc;
	out->frame_read = (window + 7) & ~7u;
	return 0;
}

static void note_unsupported(struct pf_py_unwind *u, uint32_t pid, const char *msg)
{
	pf_interp_unwind_unsupported(&u->base, "pid %u: %.120s", pid,
				     msg && *msg ? msg : "python: unsupported");
}

int pf_py_unwind_seen(struct pf_py_unwind *u, uint32_t pid, uint64_t now_ms,
		      struct pf_bpf_py_proc *out)
{
	if (!u->base.on)
		return 0;
	bool found;
	size_t at = proc_pos(u, pid, &found);
	struct proc *p = found ? u->p[at] : proc_add(u, pid, at);
	if (!p)
		return 0;
	if (!found)
		p->first_ms = now_ms;
	if (p->state != P_PENDING || now_ms < p->first_ms + PF_PY_UNWIND_DETECT_AFTER_MS ||
	    !u->detect_budget)
		return 0;
	u->detect_budget--;
	struct pf_py_process *info = malloc(sizeof(*info));
	if (!info)
		return 0;
	struct pf_error err = {0};
	char root[32];
	snprintf(root, sizeof(root), "/proc/%u/root", pid);
	uint64_t t0 = thread_cpu_ns();
	int rc = pf_py_detect((int)pid, root, info, &err);
	u->detect_cpu_ns += thread_cpu_ns() - t0;
	if (rc == 0 && pf_py_unwind_layout(info, out) < 0) {
		snprintf(err.msg, sizeof(err.msg), "python %s: layout not walkable",
			 info->version);
		rc = -ENOTSUP;
	}
	if (rc == 0 && !(p->names = pf_py_names_new(info, u->names_max)))
		rc = -ENOMEM;
	if (rc < 0) {
		free(info);
		p->state = rc == -ENOTSUP ? P_UNSUPPORTED : P_NONE;
		if (rc == -ENOTSUP)
			note_unsupported(u, pid, err.msg);
		if (rc == -ENOTSUP || rc == -ENOENT || rc == -ESRCH)
			return 0;
		/* unreadable now (a file being replaced, memory not yet there): again later */
		u->detect_failed++;
		if (++p->tries < DETECT_TRIES) {
			p->state = P_PENDING;
			p->first_ms = now_ms + DETECT_RETRY_MS;
		}
		return 0;
	}
	p->info = info;
	p->minor = info->minor;
	p->state = P_PYTHON;
	u->detected_total++;
	return 1;
}

/* ---- names ---- */

static struct word *word_slot(struct proc *p, uint64_t word)
{
	size_t mask = p->cap_w - 1, j = mix64(word) & mask;
	while (p->w[j].word && p->w[j].word != word)
		j = (j + 1) & mask;
	return &p->w[j];
}

static int word_grow(struct proc *p)
{
	size_t cap = p->cap_w ? p->cap_w * 2 : 256;
	struct word *old = p->w;
	size_t old_cap = p->cap_w;
	p->w = calloc(cap, sizeof(*p->w));
	if (!p->w) {
		p->w = old;
		return -ENOMEM;
	}
	p->cap_w = cap;
	for (size_t i = 0; i < old_cap; i++)
		if (old[i].word)
			*word_slot(p, old[i].word) = old[i];
	free(old);
	return 0;
}

/* The entry of word, added (queued) when new; NULL on ENOMEM. */
static struct word *word_get(struct proc *p, uint64_t word, bool *added)
{
	*added = false;
	if (p->cap_w) {
		struct word *e = word_slot(p, word);
		if (e->word)
			return e;
	}
	if ((p->n_w + 1) * 2 > p->cap_w && word_grow(p) < 0)
		return NULL;
	struct word *e = word_slot(p, word);
	*e = (struct word){.word = word, .state = W_QUEUED};
	p->n_w++;
	*added = true;
	return e;
}

static const char *intern(struct proc *p, const char *s)
{
	if ((p->n_str + 1) * 2 > p->cap_str) {
		size_t cap = p->cap_str ? p->cap_str * 2 : 256;
		char **n = calloc(cap, sizeof(*n));
		if (!n)
			return NULL;
		for (size_t i = 0; i < p->cap_str; i++) {
			if (!p->str[i])
				continue;
			size_t j = str_hash(p->str[i]) & (cap - 1);
			while (n[j])
				j = (j + 1) & (cap - 1);
			n[j] = p->str[i];
		}
		free(p->str);
		p->str = n;
		p->cap_str = cap;
	}
	size_t mask = p->cap_str - 1, j = str_hash(s) & mask;
	for (; p->str[j]; j = (j + 1) & mask)
		if (!strcmp(p->str[j], s))
			return p->str[j];
	size_t len = strlen(s) + 1;
	if (p->str_bytes + len > STRINGS_MAX_BYTES)
		return NULL;
	if (!(p->str[j] = malloc(len)))
		return NULL;
	memcpy(p->str[j], s, len);
	p->str_bytes += len;
	p->n_str++;
	return p->str[j];
}

/* Reads the name of e's code object from the live process. */
static void word_name(struct pf_py_unwind *u, struct proc *p, struct word *e)
{
	struct pf_py_frame fr;
	int rc = pf_py_names_resolve(p->names, (int)p->pid, PF_PY_FRAME_CODE(e->word),
				     PF_PY_FRAME_INSTR(e->word), &fr);
	if (rc == 0 && fr.name[0]) {
		e->name = intern(p, fr.name);
		e->file = fr.filename[0] ? intern(p, fr.filename) : NULL;
		e->line = fr.line ? fr.line : fr.first_line;
	}
	if (rc == 0 && e->name) {
		e->state = W_NAMED;
		u->named++;
	} else {
		e->state = W_FAILED;
		u->name_failed++;
	}
}

void pf_py_unwind_note(struct pf_py_unwind *u, uint32_t pid, const uint64_t *ips, size_t n)
{
	struct proc *p = NULL;
	uint64_t now = 0;
	for (size_t i = 0; i < n; i++) {
		if (!PF_PY_IS_FRAME(ips[i]))
			continue;
		if (!p) {
			p = proc_get(u, pid);
			if (!p || p->state != P_PYTHON)
				return;
			now = pf_mono_ms();
		}
		bool added;
		struct word *e = word_get(p, ips[i], &added);
		if (!e)
			return;
		e->last_ms = now;
		if (!added)
			continue;
		if (PF_ARRAY_GROW(u->q, u->cap_q, u->n_q + 1, 256) < 0)
			return; /* named when a window needs it */
		u->q[u->n_q++] = (struct queued){pid, ips[i]};
	}
}

static void walker_tick(void *w)
{
	struct pf_py_unwind *u = w;
	u->detect_budget = PF_PY_UNWIND_DETECTS_PER_TICK;
	size_t k = 0;
	for (; k < u->n_q && k < PF_PY_UNWIND_NAMES_PER_TICK; k++) {
		struct proc *p = proc_get(u, u->q[k].pid);
		if (!p || p->state != P_PYTHON || !p->cap_w)
			continue;
		struct word *e = word_slot(p, u->q[k].word);
		if (e->word && e->state == W_QUEUED)
			word_name(u, p, e);
	}
	if (k) /* u->q is NULL until the first frame is queued */
		memmove(u->q, u->q + k, (u->n_q - k) * sizeof(*u->q));
	u->n_q -= k;
}

static int walker_name(void *walker, uint32_t pid, struct pf_prof_window *w,
		       struct pf_prof_frame *frames, size_t n)
{
	struct pf_py_unwind *u = walker;
	struct proc *p = NULL;
	uint64_t now = 0;
	for (size_t i = 0; i < n; i++) {
		struct pf_prof_frame *f = &frames[i];
		if (f->kind != PF_FRAME_PYTHON)
			continue;
		f->mapping = -1;
		if (!p) {
			p = proc_get(u, pid);
			if (!p || p->state != P_PYTHON)
				return 0;
			now = pf_mono_ms();
		}
		bool added;
		struct word *e = word_get(p, f->address, &added);
		if (!e)
			return -ENOMEM;
		if (e->state == W_QUEUED)
			word_name(u, p, e);
		e->last_ms = now;
		if (e->state == W_NAMED &&
		    pf_interp_frame_name(w, f, e->name, e->file, e->line) < 0)
			return -ENOMEM;
	}
	return 0;
}

static void walker_closed(void *w)
{
	struct pf_py_unwind *u = w;
	uint64_t now = pf_mono_ms();
	for (size_t i = 0; i < u->n; i++) {
		struct proc *p = u->p[i];
		size_t stale = 0;
		for (size_t j = 0; j < p->cap_w; j++)
			stale += p->w[j].word && p->w[j].state != W_QUEUED &&
				 now > p->w[j].last_ms + WORD_KEEP_MS;
		if (!stale)
			continue;
		/* rebuilt without them (their strings stay interned until the process goes) */
		struct word *old = p->w;
		size_t old_cap = p->cap_w;
		struct word *nw = calloc(old_cap, sizeof(*nw));
		if (!nw)
			continue;
		p->w = nw;
		p->n_w = 0;
		for (size_t j = 0; j < old_cap; j++) {
			if (!old[j].word || (old[j].state != W_QUEUED &&
					     now > old[j].last_ms + WORD_KEEP_MS))
				continue;
			*word_slot(p, old[j].word) = old[j];
			p->n_w++;
		}
		free(old);
	}
}

void pf_py_unwind_stats(const struct pf_py_unwind *u, struct pf_py_unwind_stats *out)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < u->n; i++) {
		const struct proc *p = u->p[i];
		if (p->state == P_UNSUPPORTED)
			out->unsupported++;
		if (p->state != P_PYTHON)
			continue;
		out->processes++;
		if (p->minor >= 9 && p->minor < 9 + PF_PY_UNWIND_MINORS)
			out->by_minor[p->minor - 9]++;
		out->names_bytes += pf_py_names_bytes(p->names) + p->str_bytes +
				    p->cap_w * sizeof(struct word) + p->cap_str * sizeof(char *);
		out->words += p->n_w;
	}
	out->detected_total = u->detected_total;
	out->detect_failed = u->detect_failed;
	out->named = u->named;
	out->name_failed = u->name_failed;
	out->n_unsupported_msg = pf_interp_unwind_reasons(&u->base, out->unsupported_msg);
}

uint64_t pf_py_unwind_detect_cpu_ns(const struct pf_py_unwind *u)
{
	return u->detect_cpu_ns;
}

const struct pf_interp_walker pf_py_walker = {.tick = walker_tick,
					      .forget = walker_forget,
					      .name = walker_name,
					      .closed = walker_closed,
					      .forget_all = forget_all};
