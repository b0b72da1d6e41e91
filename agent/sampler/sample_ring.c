/* sample_ring.c — see sample_ring.h. */
#include "sampler/sample_ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pf/array.h"
#include "pf/compiler.h"
#include "pf/hash.h"

#define NONE UINT32_MAX
#define ALLOC_OVERHEAD 16 /* what malloc keeps per allocation, counted against max_bytes */
#define MIN_RECS 1024
#define MIN_BUCKETS 256

struct rec {
	uint64_t ts;
	uint32_t pid, tid;
	uint32_t stack;
	uint32_t hz; /* sampling frequency it was taken at; an off-CPU wait: OFF_REC, OFF_PREEMPTED
		      * and the microseconds away (at most OFF_US_MAX) */
};

#define OFF_REC (1u << 31)
#define OFF_PREEMPTED (1u << 30)
#define OFF_US_MAX ((1u << 30) - 1)

/* A stack and the name of the thread it ran in: a thread's name rarely changes, so it costs
 * nothing per sample here. */
struct rstack {
	uint64_t hash;
	uint32_t nk, nu;
	uint32_t refs; /* 0: free slot */
	uint32_t next; /* bucket chain, or free list when refs == 0 */
	uint64_t *ips; /* nk kernel then nu user, leaf first each */
	char comm[16];
};

struct pf_sample_ring {
	uint64_t lookback_ns;
	size_t max_bytes;

	struct rec *recs; /* circular: recs[(head + i) % cap], i < n */
	size_t head, n, cap;

	struct rstack *st;
	size_t n_st, cap_st; /* slots used (live or free), allocated */
	uint32_t free_st;    /* free list head, NONE when empty */
	size_t live_st;
	uint32_t *buckets; /* chain heads, NONE = empty */
	size_t n_buckets;  /* power of two */
	size_t ips_bytes;  /* stacks' ip arrays, with ALLOC_OVERHEAD each */

	/* samples held per pid: open addressing, linear probing, backward-shift deletion */
	struct pidc {
		uint32_t pid; /* 0 = empty (pid 0 is the idle task: counted apart) */
		uint32_t n;
	} * pids;
	size_t n_pid_slots, n_pids; /* slots (power of two), pids present */
	uint32_t idle_n;	    /* samples of pid 0 */

	uint64_t newest;
	uint64_t added, evicted_age, evicted_memory, refused;
};

static size_t ring_bytes(const struct pf_sample_ring *r)
{
	return sizeof(*r) + r->cap * sizeof(struct rec) + r->cap_st * sizeof(struct rstack) +
	       r->n_buckets * sizeof(uint32_t) + r->n_pid_slots * sizeof(struct pidc) +
	       r->ips_bytes + 4 * ALLOC_OVERHEAD;
}

static void comm_copy(char dst[16], const char *comm)
{
	memset(dst, 0, 16);
	if (comm)
		memcpy(dst, comm, strnlen(comm, 15));
}

static uint64_t stack_hash(const struct pf_agg_sample *s, const char comm[16])
{
	uint64_t h = pf_hash_combine(s->n_kstack, s->n_ustack), c[2];
	memcpy(c, comm, 16);
	h = pf_hash_combine(pf_hash_combine(h, c[0]), c[1]);
	for (uint32_t i = 0; i < s->n_kstack; i++)
		h = pf_hash_combine(h, s->kstack[i]);
	for (uint32_t i = 0; i < s->n_ustack; i++)
		h = pf_hash_combine(h, s->ustack[i]);
	return h;
}

static size_t ips_cost(uint32_t nk, uint32_t nu)
{
	return ((size_t)nk + nu) * sizeof(uint64_t) + ALLOC_OVERHEAD;
}

/* ---- stacks -------------------------------------------------------------------------------- */

static void stack_unref(struct pf_sample_ring *r, uint32_t id)
{
	struct rstack *t = &r->st[id];
	if (--t->refs)
		return;
	uint32_t *pp = &r->buckets[t->hash & (r->n_buckets - 1)];
	while (*pp != id)
		pp = &r->st[*pp].next;
	*pp = t->next;
	r->ips_bytes -= ips_cost(t->nk, t->nu);
	free(t->ips);
	t->ips = NULL;
	t->next = r->free_st;
	r->free_st = id;
	r->live_st--;
}

static int rehash(struct pf_sample_ring *r, size_t n_buckets)
{
	uint32_t *b = malloc(n_buckets * sizeof(*b));
	if (!b)
		return -ENOMEM;
	memset(b, 0xff, n_buckets * sizeof(*b));
	for (size_t i = 0; i < r->n_st; i++) {
		struct rstack *t = &r->st[i];
		if (!t->refs)
			continue;
		size_t j = t->hash & (n_buckets - 1);
		t->next = b[j];
		b[j] = (uint32_t)i;
	}
	free(r->buckets);
	r->buckets = b;
	r->n_buckets = n_buckets;
	return 0;
}

static int stack_intern(struct pf_sample_ring *r, const struct pf_agg_sample *s, uint32_t *id)
{
	char comm[16];
	comm_copy(comm, s->comm);
	uint64_t h = stack_hash(s, comm);
	for (uint32_t i = r->buckets[h & (r->n_buckets - 1)]; i != NONE; i = r->st[i].next) {
		struct rstack *t = &r->st[i];
		if (t->hash == h && t->nk == s->n_kstack && t->nu == s->n_ustack &&
		    !memcmp(t->comm, comm, 16) &&
		    (!s->n_kstack || !memcmp(t->ips, s->kstack, s->n_kstack * sizeof(uint64_t))) &&
		    (!s->n_ustack ||
		     !memcmp(t->ips + t->nk, s->ustack, s->n_ustack * sizeof(uint64_t)))) {
			t->refs++;
			*id = i;
			return 0;
		}
	}
	uint32_t slot = r->free_st;
	if (slot == NONE) {
		if (PF_ARRAY_GROW(r->st, r->cap_st, r->n_st + 1, 256) < 0)
			return -ENOMEM;
		slot = (uint32_t)r->n_st++;
	} else {
		r->free_st = r->st[slot].next;
	}
	size_t n = (size_t)s->n_kstack + s->n_ustack;
	uint64_t *ips = malloc((n ? n : 1) * sizeof(*ips));
	if (!ips) {
		r->st[slot] = (struct rstack){.refs = 0, .next = r->free_st};
		r->free_st = slot;
		return -ENOMEM;
	}
	if (s->n_kstack)
		memcpy(ips, s->kstack, s->n_kstack * sizeof(*ips));
	if (s->n_ustack)
		memcpy(ips + s->n_kstack, s->ustack, s->n_ustack * sizeof(*ips));
	size_t j = h & (r->n_buckets - 1);
	r->st[slot] = (struct rstack){h, s->n_kstack, s->n_ustack, 1, r->buckets[j], ips, {0}};
	memcpy(r->st[slot].comm, comm, 16);
	r->buckets[j] = slot;
	r->ips_bytes += ips_cost(s->n_kstack, s->n_ustack);
	r->live_st++;
	*id = slot;
	if (r->live_st > r->n_buckets)
		(void)rehash(r, r->n_buckets * 2); /* on failure the chains only get longer */
	return 0;
}

/* ---- samples per pid ----------------------------------------------------------------------- */

static size_t pid_slot(uint32_t pid, size_t mask)
{
	return (size_t)((pid * 0x9e3779b1u) & mask);
}

static int pids_grow(struct pf_sample_ring *r)
{
	size_t n = r->n_pid_slots ? r->n_pid_slots * 2 : 64;
	struct pidc *t = calloc(n, sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < r->n_pid_slots; i++) {
		if (!r->pids[i].pid)
			continue;
		size_t j = pid_slot(r->pids[i].pid, n - 1);
		while (t[j].pid)
			j = (j + 1) & (n - 1);
		t[j] = r->pids[i];
	}
	free(r->pids);
	r->pids = t;
	r->n_pid_slots = n;
	return 0;
}

static int pid_count(struct pf_sample_ring *r, uint32_t pid)
{
	if (!pid) {
		r->idle_n++;
		return 0;
	}
	if ((r->n_pids + 1) * 2 > r->n_pid_slots && pids_grow(r) < 0)
		return -ENOMEM;
	size_t mask = r->n_pid_slots - 1, j = pid_slot(pid, mask);
	while (r->pids[j].pid && r->pids[j].pid != pid)
		j = (j + 1) & mask;
	if (!r->pids[j].pid) {
		r->pids[j].pid = pid;
		r->n_pids++;
	}
	r->pids[j].n++;
	return 0;
}

static void pid_uncount(struct pf_sample_ring *r, uint32_t pid)
{
	if (!pid) {
		r->idle_n--;
		return;
	}
	size_t mask = r->n_pid_slots - 1, j = pid_slot(pid, mask);
	while (r->pids[j].pid != pid)
		j = (j + 1) & mask;
	if (--r->pids[j].n)
		return;
	/* backward-shift deletion: move later entries of the cluster into the hole */
	r->pids[j].pid = 0;
	r->n_pids--;
	for (size_t k = (j + 1) & mask; r->pids[k].pid; k = (k + 1) & mask) {
		size_t home = pid_slot(r->pids[k].pid, mask);
		/* the entry at k may move to j when its home is not in (j, k] (cyclically) */
		if ((j < k && (home <= j || home > k)) || (j > k && home <= j && home > k)) {
			r->pids[j] = r->pids[k];
			r->pids[k].pid = 0;
			r->pids[k].n = 0;
			j = k;
		}
	}
}

/* ---- records ------------------------------------------------------------------------------- */

static void pop_oldest(struct pf_sample_ring *r)
{
	stack_unref(r, r->recs[r->head].stack);
	pid_uncount(r, r->recs[r->head].pid);
	r->head = (r->head + 1) % r->cap;
	r->n--;
}

static void evict(struct pf_sample_ring *r)
{
	uint64_t cutoff = r->newest > r->lookback_ns ? r->newest - r->lookback_ns : 0;
	while (r->n && r->recs[r->head].ts < cutoff) {
		pop_oldest(r);
		r->evicted_age++;
	}
	while (r->n && ring_bytes(r) > r->max_bytes) {
		pop_oldest(r);
		r->evicted_memory++;
	}
}

/* Grows the record array by half when it is full and the budget allows; else the oldest goes. */
static int make_room(struct pf_sample_ring *r)
{
	if (r->n < r->cap)
		return 0;
	size_t nc = r->cap ? r->cap + r->cap / 2 : MIN_RECS;
	size_t grow = (nc - r->cap) * sizeof(struct rec);
	if (r->cap && ring_bytes(r) + grow > r->max_bytes) {
		pop_oldest(r);
		r->evicted_memory++;
		return 0;
	}
	struct rec *nr = malloc(nc * sizeof(*nr));
	if (!nr) {
		if (!r->n)
			return -ENOMEM;
		pop_oldest(r);
		r->evicted_memory++;
		return 0;
	}
	for (size_t i = 0; i < r->n; i++) /* unwrap */
		nr[i] = r->recs[(r->head + i) % r->cap];
	free(r->recs);
	r->recs = nr;
	r->cap = nc;
	r->head = 0;
	return 0;
}

int pf_sample_ring_add(struct pf_sample_ring *r, const struct pf_agg_sample *s, uint32_t hz)
{
	if (ips_cost(s->n_kstack, s->n_ustack) + sizeof(struct rstack) + sizeof(struct rec) >
	    r->max_bytes / 4) {
		r->refused++;
		return -ENOSPC;
	}
	if (s->ts_unix_ns > r->newest)
		r->newest = s->ts_unix_ns;
	evict(r);
	int rc = make_room(r);
	uint32_t id = 0;
	if (rc == 0)
		rc = pid_count(r, s->pid);
	if (rc == 0) {
		rc = stack_intern(r, s, &id);
		if (rc < 0)
			pid_uncount(r, s->pid);
	}
	if (rc < 0) {
		r->refused++;
		return rc;
	}
	struct rec *x = &r->recs[(r->head + r->n) % r->cap];
	memset(x, 0, sizeof(*x));
	x->ts = s->ts_unix_ns;
	x->pid = s->pid;
	x->tid = s->tid;
	if (hz) {
		x->hz = hz;
	} else {
		uint64_t us = (s->weight + 500) / 1000;
		x->hz = OFF_REC | (s->reason == PF_AGG_OFF_PREEMPTED ? OFF_PREEMPTED : 0) |
			(uint32_t)(us > OFF_US_MAX ? OFF_US_MAX : us);
	}
	x->stack = id;
	r->n++;
	r->added++;
	/* a new stack may have pushed the total over the budget */
	while (r->n > 1 && ring_bytes(r) > r->max_bytes) {
		pop_oldest(r);
		r->evicted_memory++;
	}
	return 0;
}

int pf_sample_ring_cut(const struct pf_sample_ring *r, uint32_t pid, uint32_t tid, uint64_t start,
		       uint64_t end,
		       int (*fn)(void *ctx, const struct pf_agg_sample *s, uint32_t hz), void *ctx)
{
	int count = 0;
	for (size_t i = 0; i < r->n; i++) {
		const struct rec *x = &r->recs[(r->head + i) % r->cap];
		if (x->pid != pid || (tid && x->tid != tid) || x->ts < start || x->ts >= end)
			continue;
		const struct rstack *t = &r->st[x->stack];
		char comm[17];
		memcpy(comm, t->comm, 16);
		comm[16] = 0;
		struct pf_agg_sample s = {.ts_unix_ns = x->ts,
					  .pid = x->pid,
					  .tid = x->tid,
					  .comm = comm,
					  .kstack = t->ips,
					  .n_kstack = t->nk,
					  .ustack = t->ips + t->nk,
					  .n_ustack = t->nu};
		uint32_t hz = x->hz;
		if (hz & OFF_REC) {
			s.weight = (uint64_t)(hz & OFF_US_MAX) * 1000;
			s.reason = hz & OFF_PREEMPTED ? PF_AGG_OFF_PREEMPTED : PF_AGG_OFF_BLOCKED;
			hz = 0;
		}
		int rc = fn(ctx, &s, hz);
		if (rc < 0)
			return rc;
		if (count < INT32_MAX)
			count++;
	}
	return count;
}

static int u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

size_t pf_sample_ring_pids(const struct pf_sample_ring *r, uint32_t *out, size_t cap)
{
	size_t k = 0;
	if (r->idle_n && k < cap)
		out[k++] = 0;
	for (size_t i = 0; i < r->n_pid_slots && k < cap; i++)
		if (r->pids[i].pid)
			out[k++] = r->pids[i].pid;
	qsort(out, k, sizeof(*out), u32_cmp);
	return k;
}

void pf_sample_ring_stats(const struct pf_sample_ring *r, struct pf_sample_ring_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->samples = r->n;
	out->stacks = r->live_st;
	out->bytes = ring_bytes(r);
	out->max_bytes = r->max_bytes;
	out->added = r->added;
	out->evicted_age = r->evicted_age;
	out->evicted_memory = r->evicted_memory;
	out->refused = r->refused;
	if (r->n) {
		out->oldest_unix_ns = r->recs[r->head].ts;
		out->newest_unix_ns = r->newest;
	}
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

void pf_sample_ring_set_limits(struct pf_sample_ring *r, uint32_t lookback_seconds,
			       size_t max_bytes)
{
	r->lookback_ns = (uint64_t)(lookback_seconds ? lookback_seconds : 1) * 1000000000ull;
	r->max_bytes = max_bytes < PF_SAMPLE_RING_MIN_BYTES ? PF_SAMPLE_RING_MIN_BYTES : max_bytes;
	evict(r);
}

struct pf_sample_ring *pf_sample_ring_new(uint32_t lookback_seconds, size_t max_bytes)
{
	struct pf_sample_ring *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->free_st = NONE;
	r->buckets = malloc(MIN_BUCKETS * sizeof(*r->buckets));
	if (!r->buckets) {
		free(r);
		errno = ENOMEM;
		return NULL;
	}
	memset(r->buckets, 0xff, MIN_BUCKETS * sizeof(*r->buckets));
	r->n_buckets = MIN_BUCKETS;
	pf_sample_ring_set_limits(r, lookback_seconds, max_bytes);
	return r;
}

void pf_sample_ring_free(struct pf_sample_ring *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_st; i++)
		if (r->st[i].refs)
			free(r->st[i].ips);
	free(r->st);
	free(r->recs);
	free(r->buckets);
	free(r->pids);
	free(r);
}
