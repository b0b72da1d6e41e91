/* unwinder.c — see unwinder.h. */
#include "unwind/unwinder.h"

#include <bpf/bpf.h>
#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "pf/array.h"
#include "sampler/bpf/cpu_sampler.h"
#include "symbolize/vdso.h"
#include "unwind/table_builder.h"
#include "unwind/unwind_table.h"

_Static_assert(sizeof(struct pf_unwind_row) == sizeof(struct pf_bpf_unwind_row), "row size");
_Static_assert(PF_UNWIND_CFA_RSP == PF_UNWIND_ROW_RSP && PF_UNWIND_CFA_RBP == PF_UNWIND_ROW_RBP &&
		       PF_UNWIND_CFA_PLT == PF_UNWIND_ROW_PLT && PF_UNWIND_END == PF_UNWIND_ROW_END &&
		       PF_UNWIND_STOP == PF_UNWIND_ROW_STOP && PF_UNWIND_SIGNAL == PF_UNWIND_ROW_SIGNAL,
	       "row kinds");
_Static_assert(PF_UNWIND_UC_RBP == PF_UNWIND_UC_RBP_OFF && PF_UNWIND_UC_RSP == PF_UNWIND_UC_RSP_OFF &&
		       PF_UNWIND_UC_RIP == PF_UNWIND_UC_RIP_OFF,
	       "signal frame offsets");

#define PROC_BUCKETS 1024
#define FULL_RETRY_MS 10000 /* a table that found no room is tried again after this */
/* Building (or reading from the cache) tables may take BUDGET_RATE ns of CPU time per ms of
 * wall time on average, 0.5 % of a core, with bursts of up to BUDGET_BURST_NS (a start meets every file at once).
 * Over budget, mappings are walked by frame pointers until the process is loaded again. */
#define BUDGET_RATE 5000ll
#define BUDGET_BURST_NS 1000000000ll

/* One table id (index into tables[]; id 0 is never used). */
struct table {
	bool used;
	bool loaded;    /* rows in the kernel */
	bool no_cfi;    /* the file has no usable table: its mappings walk by frame pointers */
	bool pending;   /* with the builder: frame pointers until it reports */
	char build_id[72];
	uint64_t dev, ino; /* the key of files without a build id */
	uint32_t chunk, n_chunks, n_rows, n_index;
	uint32_t base; /* pc of the first row */
	uint32_t refs;  /* process mappings using it */
	uint64_t full_ms;  /* when its rows last did not fit (0: never); retried 10 s later */
	uint32_t need_chunks; /* the chunks it took or would take (0: not known yet) */
	uint64_t stamp; /* LRU */
};

struct ent {
	uint64_t start, end, bias;
	uint32_t table_id, kind;
};

struct proc {
	struct proc *next;
	uint32_t pid;
	bool v8; /* pf_unwinder_set_v8: its V8 builtins are PF_UNWIND_MAP_JIT */
	uint64_t v8_start, v8_end;
	bool deferred; /* some table waited for the build budget at the last load */
	uint64_t seen_ms;   /* first noted (pf_unwinder_seen_ms) */
	uint32_t retry_ms;  /* reloads after a miss wait this long: 200 ms, doubled (up to
			     * 10 s) by every reload that found nothing new */
	uint64_t loaded_ms; /* 0: noted, never loaded (no kernel entries) */
	struct ent *ents;
	size_t n;
};

struct pf_unwinder {
	struct pf_unwinder_options opt;
	struct pf_tbuilder *tb;
	uint64_t dir_bytes; /* the cache directory's tables, as last counted + built */
	struct pf_bpf_unwind_proc *proc_buf; /* the value proc_publish writes */
	struct pf_bpf_unwind_row *rows; /* the shared mapping of unwind_rows */
	size_t rows_bytes;
	uint8_t *chunk_used;
	uint32_t n_chunks;
	uint32_t n_chunks_limit; /* chunks tables may use (pf_unwinder_set_rows_limit) */
	struct table *tables;
	uint64_t stamp;
	struct pf_tbuilder_budget budget; /* CPU time of table work */
	struct proc *procs[PROC_BUCKETS];
	struct pf_unwinder_stats st;
};

static uint64_t clock_ns(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

/* What table work costs is charged in this thread's CPU time, not wall time: on a busy host
 * a read preempted half-way would otherwise be charged the other processes' time slices. */
static uint64_t cpu_ns(void)
{
	return clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* ---- process arrays ----------------------------------------------------------------------- */

static int ent_cmp(const void *a, const void *b)
{
	const struct ent *x = a, *y = b;
	return (x->start > y->start) - (x->start < y->start);
}

/* Writes pid's array from its n entries (sorted here): one map update for the whole process.
 * More than PF_UNWIND_PROC_MAPS: the lowest mapping (a program's own code sits below the
 * libraries) and the highest others — mmap places libraries top down, so those are libc, the
 * loader, the vDSO and what the program was linked with, ahead of what it opened later — the
 * array marked truncated. */
static int proc_publish(struct pf_unwinder *u, uint32_t pid, struct ent *ents, size_t n)
{
	qsort(ents, n, sizeof(*ents), ent_cmp);
	u->proc_buf->n = (uint32_t)(n < PF_UNWIND_PROC_MAPS ? n : PF_UNWIND_PROC_MAPS);
	u->proc_buf->truncated = n > PF_UNWIND_PROC_MAPS;
	size_t skip = n - u->proc_buf->n; /* entries 1 .. skip are left out */
	for (size_t i = 0; i < u->proc_buf->n; i++) {
		const struct ent *e = &ents[i == 0 ? 0 : i + skip];
		u->proc_buf->maps[i] = (struct pf_bpf_unwind_map){
			.start = e->start, .end = e->end, .bias = e->bias, .table_id = e->table_id,
			.kind = e->kind};
	}
	if (bpf_map_update_elem(u->opt.procs_fd, &pid, u->proc_buf, BPF_ANY) < 0)
		return -errno;
	return 0;
}

static void proc_unpublish(struct pf_unwinder *u, uint32_t pid)
{
	bpf_map_delete_elem(u->opt.procs_fd, &pid);
}

/* ---- tables ------------------------------------------------------------------------------- */

static void table_publish(struct pf_unwinder *u, uint32_t id)
{
	struct table *t = &u->tables[id];
	struct pf_bpf_unwind_table v = {0};
	if (t->loaded) {
		v.index = t->chunk * PF_UNWINDER_CHUNK;
		v.n_index = t->n_index;
		v.first = v.index + t->n_index;
		v.n = t->n_rows;
		v.base = t->base;
	}
	if (bpf_map_update_elem(u->opt.tables_fd, &id, &v, BPF_ANY) < 0)
		u->st.last_error = -errno;
}

static void table_unload(struct pf_unwinder *u, uint32_t id)
{
	struct table *t = &u->tables[id];
	if (!t->loaded)
		return;
	t->loaded = false;
	table_publish(u, id); /* first: the kernel stops reading the rows */
	memset(u->chunk_used + t->chunk, 0, t->n_chunks);
	u->st.tables--;
	u->st.rows -= t->n_rows + t->n_index;
	u->st.evicted++;
}

/* First fit of n contiguous free chunks; UINT32_MAX when none. */
static uint32_t chunks_find(struct pf_unwinder *u, uint32_t n)
{
	uint32_t run = 0;
	for (uint32_t i = 0; i < u->n_chunks_limit; i++) {
		run = u->chunk_used[i] ? 0 : run + 1;
		if (run == n)
			return i + 1 - n;
	}
	return UINT32_MAX;
}

/* The least recently used loaded table without references, 0 when none. */
static uint32_t lru_victim(struct pf_unwinder *u, uint32_t keep)
{
	uint32_t best = 0;
	for (uint32_t i = 1; i < u->opt.tables_cap; i++) {
		struct table *t = &u->tables[i];
		if (i != keep && t->loaded && !t->refs &&
		    (!best || t->stamp < u->tables[best].stamp))
			best = i;
	}
	return best;
}

/* True when n chunks could be had by evicting tables no process maps (contiguity aside): a
 * table that did not fit is read again only then, not every FULL_RETRY_MS while the rows stay
 * full of tables in use. */
static bool room_possible(const struct pf_unwinder *u, uint32_t n)
{
	uint32_t avail = 0;
	for (uint32_t i = 0; i < u->n_chunks_limit; i++)
		avail += !u->chunk_used[i];
	for (uint32_t i = 1; i < u->opt.tables_cap && avail < n; i++) {
		const struct table *t = &u->tables[i];
		if (t->loaded && !t->refs)
			avail += t->n_chunks;
	}
	return avail >= n;
}

/* Makes room in the kernel's array for table id: n_rows rows from pc base to last_pc, after
 * its index (cpu_sampler.h PF_UNWIND_INDEX_SHIFT), evicting the least recently used tables no
 * process maps as needed. Where the rows go (they are not published until table_commit), or
 * NULL when they cannot fit (counted in rows_full). */
static struct pf_bpf_unwind_row *table_reserve(struct pf_unwinder *u, uint32_t id, uint64_t n_rows,
					       uint32_t base, uint32_t last_pc)
{
	struct table *t = &u->tables[id];
	uint64_t n_index = (((uint64_t)last_pc - base) >> PF_UNWIND_INDEX_SHIFT) + 1;
	uint64_t total = n_index + n_rows;
	if (total > (uint64_t)u->n_chunks_limit * PF_UNWINDER_CHUNK) {
		u->st.rows_full++;
		return NULL;
	}
	uint32_t need = (uint32_t)((total + PF_UNWINDER_CHUNK - 1) / PF_UNWINDER_CHUNK);
	t->need_chunks = need;
	uint32_t at;
	while ((at = chunks_find(u, need)) == UINT32_MAX) {
		uint32_t v = lru_victim(u, id);
		if (!v) {
			u->st.rows_full++;
			return NULL;
		}
		table_unload(u, v);
	}
	memset(u->chunk_used + at, 1, need);
	t->chunk = at;
	t->n_chunks = need;
	t->n_rows = (uint32_t)n_rows;
	t->n_index = (uint32_t)n_index;
	t->base = base;
	return u->rows + (size_t)at * PF_UNWINDER_CHUNK + n_index;
}

/* Gives back the room table_reserve made (the rows could not be had after all). */
static void table_unreserve(struct pf_unwinder *u, uint32_t id)
{
	struct table *t = &u->tables[id];
	memset(u->chunk_used + t->chunk, 0, t->n_chunks);
}

/* Writes the index of the rows table_reserve placed (entry i: the last row whose pc <=
 * base + (i << shift)) and publishes the table: the kernel walks with it from now on. */
static void table_commit(struct pf_unwinder *u, uint32_t id)
{
	struct table *t = &u->tables[id];
	struct pf_bpf_unwind_row *idx = u->rows + (size_t)t->chunk * PF_UNWINDER_CHUNK;
	const struct pf_bpf_unwind_row *rows = idx + t->n_index;
	size_t r = 0;
	for (uint64_t i = 0; i < t->n_index; i++) {
		uint64_t at_pc = t->base + (i << PF_UNWIND_INDEX_SHIFT);
		while (r + 1 < t->n_rows && rows[r + 1].pc <= at_pc)
			r++;
		idx[i] = (struct pf_bpf_unwind_row){.pc = (uint32_t)r};
	}
	t->loaded = true;
	u->st.tables++;
	u->st.rows += t->n_index + t->n_rows;
	__atomic_thread_fence(__ATOMIC_SEQ_CST); /* rows before the table entry that names them */
	table_publish(u, id);
}

/* Copies a table built in memory (the vDSO's) into the kernel's array. */
static int table_load_rows(struct pf_unwinder *u, uint32_t id, const struct pf_unwind_table *ut)
{
	struct pf_bpf_unwind_row *dst =
		table_reserve(u, id, ut->n_rows, ut->rows[0].pc, ut->rows[ut->n_rows - 1].pc);
	if (!dst)
		return -ENOSPC;
	memcpy(dst, ut->rows, ut->n_rows * sizeof(*ut->rows));
	table_commit(u, id);
	return 0;
}

/* Reads table id from the disk cache straight into the kernel's array (key: table_key). 0,
 * -ENOSPC (no room), -ENOENT (not cached), -EBADMSG (a bad file: rebuild it). The time it
 * takes comes out of the budget. */
static int table_read_cache(struct pf_unwinder *u, uint32_t id, const char *key)
{
	uint64_t t0 = cpu_ns();
	struct pf_unwind_cache_file f;
	int rc = pf_unwind_cache_open(pf_tbuilder_dir(u->tb), key, &f);
	if (rc == 0) {
		struct pf_bpf_unwind_row *dst =
			table_reserve(u, id, f.n_rows, f.first.pc, f.last_pc);
		if (!dst)
			rc = -ENOSPC;
		else if ((rc = pf_unwind_cache_read(&f, (struct pf_unwind_row *)dst)) < 0)
			table_unreserve(u, id);
		else
			table_commit(u, id);
		pf_unwind_cache_close(&f);
	}
	u->budget.ns -= (int64_t)(cpu_ns() - t0);
	return rc;
}

#define VDSO_KEY "[vdso]" /* the registry's key of the vDSO's table (not a build id) */

/* The builder's and the cache's key of table id: its build id, or "<dev>-<inode>" in hex. */
static void table_key(const struct table *t, char *out, size_t cap)
{
	pf_tbuilder_key(t->build_id, t->dev, t->ino, out, cap);
}

/* The vDSO's table (built from memory, small) into the kernel's array. */
static int table_fill_vdso(struct pf_unwinder *u, uint32_t id)
{
	uint64_t t0 = cpu_ns();
	const void *image;
	size_t len;
	uint64_t vaddr0;
	struct pf_unwind_table *ut = NULL;
	int rc = !pf_vdso_image(&image, &len, &vaddr0)
			 ? -ENOENT
			 : pf_unwind_table_build_image(image, len, u->opt.rows_cap / 2, &ut);
	u->st.built += rc == 0;
	if (rc == 0 && table_load_rows(u, id, ut) < 0)
		rc = -ENOSPC;
	pf_unwind_table_free(ut);
	u->budget.ns -= (int64_t)(cpu_ns() - t0);
	return rc;
}

/* What a table that cannot be loaded becomes: rows_full (walked by frame pointers, tried
 * again when room may be had), or no_cfi for good. */
static void table_failed(struct pf_unwinder *u, uint32_t id, int rc)
{
	struct table *t = &u->tables[id];
	if (rc == -ENOSPC) {
		t->full_ms = mono_ns() / 1000000;
		return;
	}
	t->no_cfi = true; /* no CFI, or too large: frame pointers */
	if (rc == -E2BIG) {
		u->st.rows_full++;
	} else {
		u->st.no_cfi++;
		if (rc != -ENOENT && rc != -EINVAL)
			u->st.last_error = rc;
	}
}

/* Gives table id its rows: at once from the disk cache (or, for the vDSO, from memory), else
 * when the builder has written it (table_built). -EAGAIN when the builder's queue is full
 * (try again later). */
static int table_fill(struct pf_unwinder *u, uint32_t id, int fd)
{
	struct table *t = &u->tables[id];
	int rc;
	if (!strcmp(t->build_id, VDSO_KEY)) {
		rc = table_fill_vdso(u, id);
	} else {
		char key[80];
		table_key(t, key, sizeof(key));
		/* a table of a file without a build id is never read from a cache file the
		 * builder did not just write: its key (device, inode) may name another file
		 * since */
		rc = t->build_id[0] ? table_read_cache(u, id, key) : -ENOENT;
		if (rc == 0)
			u->st.cache_hits++;
		if (rc == -EBADMSG)
			u->st.cache_bad++;
		if (rc < 0 && rc != -ENOSPC) {
			uint64_t t0 = cpu_ns();
			rc = pf_tbuilder_submit(u->tb, key, fd);
			u->budget.ns -= (int64_t)(cpu_ns() - t0);
			if (rc == 0 || rc == -EEXIST) {
				t->pending = true;
				u->st.pending++;
				return 0;
			}
			if (rc == -EAGAIN)
				return rc;
		}
	}
	if (rc < 0)
		table_failed(u, id, rc);
	if (!t->loaded)
		table_publish(u, id);
	return 0;
}

/* The builder's report of one file: every table waiting for it gets its rows. */
static void table_built(void *ctx, const char *key, int rc)
{
	struct pf_unwinder *u = ctx;
	for (uint32_t i = 1; i < u->opt.tables_cap; i++) {
		struct table *t = &u->tables[i];
		char k[80];
		if (!t->used || !t->pending)
			continue;
		table_key(t, k, sizeof(k));
		if (strcmp(k, key))
			continue;
		t->pending = false;
		u->st.pending--;
		int lrc = rc == 0 ? table_read_cache(u, i, key) : rc;
		if (lrc == 0 || lrc == -ENOSPC)
			u->st.built++;
		if (lrc < 0)
			table_failed(u, i, lrc);
	}
	if (rc == 0)
		pf_tbuilder_account(pf_tbuilder_dir(u->tb), key, ".unw", PF_UNWINDER_DIR_MAX_BYTES,
				    &u->dir_bytes);
}

void pf_unwinder_tick(struct pf_unwinder *u)
{
	pf_tbuilder_tick(u->tb, &u->budget, table_built, u, &u->st.build_ns, &u->st.last_error);
}

uint32_t pf_unwinder_helper_pid(const struct pf_unwinder *u)
{
	return (uint32_t)pf_tbuilder_child(u->tb);
}

/* The id of the table of the file m maps (its rows in the kernel now, or once the builder has
 * made them); 0 when the table registry is full, or (*deferred set) when the budget is spent
 * or the builder's queue is full. */
static uint32_t table_get(struct pf_unwinder *u, const struct pf_sym_exec_map *m, bool *deferred)
{
	uint32_t free_id = 0;
	for (uint32_t i = 1; i < u->opt.tables_cap; i++) {
		struct table *t = &u->tables[i];
		if (!t->used) {
			if (!free_id)
				free_id = i;
			continue;
		}
		bool hit = m->build_id[0] ? !strcmp(t->build_id, m->build_id)
					  : !t->build_id[0] && t->dev == m->dev && t->ino == m->ino;
		if (!hit)
			continue;
		t->stamp = ++u->stamp;
		if (!t->loaded && !t->no_cfi && !t->pending &&
		    (!t->full_ms || mono_ns() / 1000000 >= t->full_ms + FULL_RETRY_MS)) {
			/* evicted earlier, or no room some time ago: again, when it can fit */
			if (t->need_chunks && !room_possible(u, t->need_chunks))
				t->full_ms = mono_ns() / 1000000;
			else if (!pf_tbuilder_budget_ok(&u->budget) || table_fill(u, i, m->fd) < 0)
				*deferred = true;
		}
		return i;
	}
	if (!pf_tbuilder_budget_ok(&u->budget)) {
		*deferred = true;
		return 0;
	}
	if (!free_id) {
		/* recycle an unreferenced id */
		for (uint32_t i = 1; i < u->opt.tables_cap && !free_id; i++)
			if (!u->tables[i].refs)
				free_id = i;
		if (!free_id)
			return 0;
		table_unload(u, free_id);
	}
	struct table *t = &u->tables[free_id];
	if (t->pending)
		u->st.pending--; /* recycled: the builder's report will find no table waiting */
	memset(t, 0, sizeof(*t));
	t->used = true;
	t->stamp = ++u->stamp;
	snprintf(t->build_id, sizeof(t->build_id), "%s", m->build_id);
	t->dev = m->dev;
	t->ino = m->ino;
	table_publish(u, free_id); /* empty until its rows load: frame pointers meanwhile */
	if (table_fill(u, free_id, m->fd) < 0)
		*deferred = true;
	return free_id;
}

/* ---- processes ---------------------------------------------------------------------------- */

static struct proc **proc_slot(const struct pf_unwinder *u, uint32_t pid)
{
	struct proc **pp = (struct proc **)&u->procs[pid % PROC_BUCKETS];
	while (*pp && (*pp)->pid != pid)
		pp = &(*pp)->next;
	return pp;
}

bool pf_unwinder_has(const struct pf_unwinder *u, uint32_t pid)
{
	struct proc *p = *proc_slot(u, pid);
	return p && p->loaded_ms;
}

uint64_t pf_unwinder_loaded_ms(const struct pf_unwinder *u, uint32_t pid, bool *deferred,
			       uint32_t *retry_ms)
{
	struct proc *p = *proc_slot(u, pid);
	*deferred = p && p->deferred;
	*retry_ms = p && p->retry_ms ? p->retry_ms : 200;
	return p ? p->loaded_ms : 0;
}

static void ent_release(struct pf_unwinder *u, struct ent *e)
{
	if (e->table_id && u->tables[e->table_id].refs)
		u->tables[e->table_id].refs--;
}

/* Mappings of n entries the kernel's array holds. */
static size_t published(size_t n)
{
	return n < PF_UNWIND_PROC_MAPS ? n : PF_UNWIND_PROC_MAPS;
}

struct load_ctx {
	struct pf_unwinder *u;
	struct ent *ents;
	size_t n, cap;
	int rc;
	bool deferred; /* a table waits for the build budget */
	const struct proc *p; /* the process (NULL before its first load): its V8 code */
};

/* Appends e, grown as needed. */
static int ent_push(struct load_ctx *c, const struct ent *e)
{
	if (PF_ARRAY_GROW(c->ents, c->cap, c->n + 1, 16) < 0)
		return c->rc = -ENOMEM;
	c->ents[c->n++] = *e;
	return 0;
}

static int collect(void *ctx, const struct pf_sym_exec_map *m)
{
	struct load_ctx *c = ctx;
	struct ent e = {.start = m->start, .end = m->end, .bias = m->bias,
			.kind = PF_UNWIND_MAP_FP};
	const void *image;
	size_t len;
	uint64_t vaddr0;
	if (m->anon) {
		e.kind = PF_UNWIND_MAP_JIT;
	} else if (m->vdso && pf_vdso_image(&image, &len, &vaddr0)) {
		/* clock_gettime and friends: the same image as the agent's own vDSO */
		struct pf_sym_exec_map v = *m;
		v.build_id = VDSO_KEY;
		e.bias = m->start - vaddr0;
		e.table_id = table_get(c->u, &v, &c->deferred);
		if (e.table_id) {
			e.kind = PF_UNWIND_MAP_TABLE;
			c->u->tables[e.table_id].refs++;
		}
	} else if (m->fd >= 0) {
		e.table_id = table_get(c->u, m, &c->deferred);
		if (e.table_id) {
			e.kind = PF_UNWIND_MAP_TABLE;
			c->u->tables[e.table_id].refs++;
		}
	}
	const struct proc *p = c->p;
	if (!p || !p->v8 || p->v8_start <= m->start || p->v8_end >= m->end)
		return ent_push(c, &e) ? 1 : 0;
	/* V8's embedded builtins inside the file: their own entry between the file's two */
	struct ent lo = e, mid = e, hi = e;
	lo.end = mid.start = p->v8_start;
	mid.end = hi.start = p->v8_end;
	mid.kind = PF_UNWIND_MAP_JIT;
	mid.table_id = 0;
	if (e.table_id)
		c->u->tables[e.table_id].refs++; /* hi holds one too */
	return ent_push(c, &lo) || ent_push(c, &mid) || ent_push(c, &hi) ? 1 : 0;
}

static bool same_ent(const struct ent *a, const struct ent *b)
{
	return a->start == b->start && a->end == b->end && a->bias == b->bias &&
	       a->table_id == b->table_id && a->kind == b->kind;
}

int pf_unwinder_load(struct pf_unwinder *u, struct pf_symbolizer *sym, uint32_t pid)
{
	struct proc **pp = proc_slot(u, pid), *p = *pp;
	struct load_ctx c = {.u = u, .p = p};
	int rc = pf_symbolizer_exec_maps(sym, pid, collect, &c);
	if (rc == 0)
		rc = c.rc;
	if (rc == 0 && !p) {
		if (!(p = calloc(1, sizeof(*p)))) {
			rc = -ENOMEM;
		} else {
			p->pid = pid;
			*pp = p;
		}
	}
	if (rc < 0) {
		for (size_t i = 0; i < c.n; i++)
			if (c.ents[i].table_id)
				u->tables[c.ents[i].table_id].refs--;
		free(c.ents);
		u->st.last_error = rc;
		return rc;
	}
	/* references: the old entries that are gone give theirs back, a kept mapping drops the
	 * one collect() took again */
	size_t changed = 0;
	for (size_t i = 0; i < p->n; i++) {
		bool kept = false;
		for (size_t j = 0; j < c.n && !kept; j++)
			kept = same_ent(&p->ents[i], &c.ents[j]);
		if (!kept) {
			ent_release(u, &p->ents[i]);
			changed++;
		}
	}
	for (size_t j = 0; j < c.n; j++) {
		bool had = false;
		for (size_t i = 0; i < p->n && !had; i++)
			had = same_ent(&p->ents[i], &c.ents[j]);
		if (had) {
			if (c.ents[j].table_id)
				u->tables[c.ents[j].table_id].refs--;
			continue;
		}
		changed++;
	}
	if (changed || !p->loaded_ms) {
		rc = proc_publish(u, pid, c.ents, c.n);
		u->st.entries += published(c.n);
		u->st.entries -= p->loaded_ms ? published(p->n) : 0;
	}
	p->retry_ms = !p->loaded_ms || changed ? 200
		      : p->retry_ms >= 5000 ? 10000 : (p->retry_ms ? p->retry_ms : 200) * 2;
	if (p->loaded_ms)
		u->st.reloads++;
	else
		u->st.processes++;
	free(p->ents);
	p->ents = c.ents;
	p->n = c.n;
	p->deferred = c.deferred;
	u->st.deferred += c.deferred;
	p->loaded_ms = mono_ns() / 1000000;
	if (!p->loaded_ms)
		p->loaded_ms = 1;
	if (rc < 0)
		u->st.last_error = rc;
	return rc;
}

void pf_unwinder_forget(struct pf_unwinder *u, uint32_t pid)
{
	struct proc **pp = proc_slot(u, pid), *p = *pp;
	if (!p)
		return;
	if (p->loaded_ms) {
		proc_unpublish(u, pid);
		u->st.processes--;
		u->st.entries -= published(p->n);
	}
	for (size_t i = 0; i < p->n; i++)
		ent_release(u, &p->ents[i]);
	*pp = p->next;
	free(p->ents);
	free(p);
}

uint64_t pf_unwinder_seen_ms(struct pf_unwinder *u, uint32_t pid)
{
	struct proc **pp = proc_slot(u, pid), *p = *pp;
	if (!p) {
		if (!(p = calloc(1, sizeof(*p))))
			return 0;
		p->pid = pid;
		p->seen_ms = mono_ns() / 1000000;
		*pp = p;
	}
	return p->seen_ms;
}

int pf_unwinder_set_v8(struct pf_unwinder *u, uint32_t pid, uint64_t start, uint64_t end)
{
	if (!pf_unwinder_seen_ms(u, pid))
		return -ENOMEM;
	struct proc *p = *proc_slot(u, pid);
	p->v8 = true;
	p->v8_start = start < end ? start : 0;
	p->v8_end = start < end ? end : 0;
	return 0;
}

size_t pf_unwinder_kernel_entries(const struct pf_unwinder *u, uint32_t pid)
{
	if (bpf_map_lookup_elem(u->opt.procs_fd, &pid, u->proc_buf) < 0)
		return 0;
	return u->proc_buf->n;
}

uint32_t pf_unwinder_set_rows_limit(struct pf_unwinder *u, uint64_t rows)
{
	uint64_t chunks = rows / PF_UNWINDER_CHUNK;
	if (chunks < 1)
		chunks = 1;
	if (chunks > u->n_chunks)
		chunks = u->n_chunks;
	u->n_chunks_limit = (uint32_t)chunks;
	uint64_t now_ms = mono_ns() / 1000000;
	for (uint32_t i = 1; i < u->opt.tables_cap; i++) {
		struct table *t = &u->tables[i];
		if (t->loaded && t->chunk + t->n_chunks > u->n_chunks_limit) {
			table_unload(u, i);
			t->full_ms = now_ms;
		}
	}
	return u->n_chunks_limit * PF_UNWINDER_CHUNK;
}

void pf_unwinder_stats(const struct pf_unwinder *u, struct pf_unwinder_stats *out)
{
	*out = u->st;
	out->rows_cap = (uint64_t)u->n_chunks_limit * PF_UNWINDER_CHUNK;
	struct pf_tbuilder_stats bs;
	pf_tbuilder_stats(u->tb, &bs);
	out->builder_runs = bs.children;
	out->builder_killed = bs.killed;
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

void pf_unwinder_free(struct pf_unwinder *u)
{
	if (!u)
		return;
	for (size_t b = 0; b < PROC_BUCKETS; b++) {
		for (struct proc *p = u->procs[b], *n; p; p = n) {
			n = p->next;
			free(p->ents);
			free(p);
		}
	}
	pf_tbuilder_free(u->tb);
	free(u->proc_buf);
	if (u->rows && u->rows != MAP_FAILED)
		munmap(u->rows, u->rows_bytes);
	free(u->chunk_used);
	free(u->tables);
	free(u);
}

struct pf_unwinder *pf_unwinder_new(const struct pf_unwinder_options *opt)
{
	if (!opt->rows_cap || opt->rows_cap % PF_UNWINDER_CHUNK || opt->tables_cap < 2) {
		errno = EINVAL;
		return NULL;
	}
	struct pf_unwinder *u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->opt = *opt;
	u->n_chunks = opt->rows_cap / PF_UNWINDER_CHUNK;
	u->n_chunks_limit = u->n_chunks;
	pf_tbuilder_budget_init(&u->budget, BUDGET_RATE * 1000, BUDGET_BURST_NS);
	long page = sysconf(_SC_PAGESIZE);
	u->rows_bytes = ((size_t)opt->rows_cap * sizeof(struct pf_bpf_unwind_row) + (size_t)page - 1) &
			~((size_t)page - 1);
	u->rows = mmap(NULL, u->rows_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, opt->rows_fd, 0);
	u->chunk_used = calloc(u->n_chunks, 1);
	u->tables = calloc(opt->tables_cap, sizeof(*u->tables));
	if (u->rows == MAP_FAILED) {
		int e = errno;
		pf_unwinder_free(u);
		errno = e;
		return NULL;
	}
	const struct pf_tbuilder_kind kind = {"pf-unwind-build", pf_unwind_table_build_store,
					      opt->rows_cap / 2};
	u->tb = pf_tbuilder_new(opt->cache_dir, &kind);
	if (u->tb) {
		int64_t left = pf_tbuilder_prune(pf_tbuilder_dir(u->tb), ".unw",
						 PF_UNWINDER_DIR_MAX_BYTES);
		u->dir_bytes = left > 0 ? (uint64_t)left : 0;
	}
	u->proc_buf = calloc(1, sizeof(*u->proc_buf));
	if (!u->tb || !u->chunk_used || !u->tables || !u->proc_buf) {
		int e = !u->tb ? errno : ENOMEM;
		pf_unwinder_free(u);
		errno = e;
		return NULL;
	}
	return u;
}
