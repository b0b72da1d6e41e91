/* store_details.c — profiles stored without their OTLP body (schema 14, migration in
 * store.c; store.h "pf_profile_detail"): the locations of their frames and their stacks as
 * location ids in content tables (prof_locations, prof_lstacks, each row once, keyed by a
 * SHA-256 of its bytes through store_stacks.c's intern_content and its per-connection cache
 * of looked-up ids), and per profile one profile_details row: varint count of stacks, then
 * each stack's id as the zigzag varint of its difference to the previous one, then the
 * samples part. A stack row (prof_lstacks.locs) is its location ids, leaf first, varints.
 * Content rows are never deleted: they grow with distinct locations and stacks, not with
 * profiles. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "pf/array.h"
#include "pf/compiler.h"
#include "store_int.h"
#include "store_stacks_int.h"

int store_details_pack(struct pf_store *st, const struct pf_profile_detail *d, struct pf_buf *out)
{
	struct store_stacks *k = stk_of(st);
	_cleanup_free_ int64_t *loc_id = NULL;
	struct pf_buf key;
	int64_t prev = 0;
	int rc = 0;

	if (!k)
		return store_fail_other(st, NULL, -ENOMEM, "profiles: out of memory");
	if ((d->n_locs && (!d->loc || !d->locs)) || (d->n_stacks && !d->stack) ||
	    (d->samples_len && !d->samples))
		return store_fail_other(st, NULL, -EINVAL, "profiles: insert: bad detail");
	loc_id = calloc(d->n_locs ? d->n_locs : 1, sizeof(*loc_id));
	if (!loc_id)
		return store_fail_other(st, NULL, -ENOMEM, "profiles: out of memory");
	/* Only the locations the stacks use: the others would be rebuilt by nobody. */
	for (size_t i = 0; i < d->n_stacks; i++) {
		const struct pf_profile_span *s = &d->stack[i];
		for (uint32_t j = 0; j < s->len; j++) {
			uint32_t li = d->stack_locs[s->off + j];
			if (li >= d->n_locs)
				return store_fail_other(st, NULL, -EINVAL,
							"profiles: insert: location index");
			if (loc_id[li])
				continue;
			struct blob_ctx c = {d->locs + d->loc[li].off, d->loc[li].len};
			rc = intern_content(st, &k->locs, K_FIND_LOC, K_ADD_LOC, c.p, c.n,
					    bind_blob2, &c, &loc_id[li]);
			if (rc < 0)
				return rc;
		}
	}
	pf_buf_init(&key, 0);
	rc = pf_buf_append_uvarint(out, d->n_stacks);
	for (size_t i = 0; rc == 0 && i < d->n_stacks; i++) {
		const struct pf_profile_span *s = &d->stack[i];
		int64_t id = 0;
		pf_buf_reset(&key);
		rc = pf_buf_reserve(&key, (size_t)s->len * 10);
		for (uint32_t j = 0; rc == 0 && j < s->len; j++) { /* varints, in place */
			uint64_t v = (uint64_t)loc_id[d->stack_locs[s->off + j]];
			while (v > 0x7f) {
				key.data[key.len++] = (uint8_t)(v | 0x80);
				v >>= 7;
			}
			key.data[key.len++] = (uint8_t)v;
		}
		struct blob_ctx c = {key.data, key.len};
		if (rc == 0)
			rc = intern_content(st, &k->lstacks, K_FIND_LSTACK, K_ADD_LSTACK, key.data,
					    key.len, bind_blob2, &c, &id);
		if (rc == 0) {
			int64_t dv = id - prev;
			rc = pf_buf_append_uvarint(out, ((uint64_t)dv << 1) ^ (uint64_t)(dv >> 63));
			prev = id;
		}
	}
	pf_buf_release(&key);
	if (rc == 0 && d->samples_len)
		rc = pf_buf_append(out, d->samples, d->samples_len);
	return rc == -ENOMEM ? store_fail_other(st, NULL, rc, "profiles: out of memory") : rc;
}

int store_details_put(struct pf_store *st, int64_t id, const struct pf_buf *blob)
{
	int rc;
	KSTMT(s, st, K_ADD_DETAIL, &rc);

	if (!s)
		return rc;
	if (sqlite3_bind_int64(s, 1, id) ||
	    sqlite3_bind_blob64(s, 2, blob->data ? blob->data : (const uint8_t *)"", blob->len,
				SQLITE_STATIC))
		return store_fail_sqlite(st, NULL, "profiles: detail: bind");
	return store_step_done(st, s, "profiles: detail");
}

/* Appends the one blob column statement sid selects for id to out; -ENOENT when no row. */
static int blob_by_id(struct pf_store *st, enum stk_stmt sid, int64_t id, struct pf_buf *out,
		      const char *what)
{
	int rc;
	KSTMT(s, st, sid, &rc);

	return s ? store_read_blob(st, s, id, what, out) : rc;
}

#define DCACHE_MAX_BYTES ((size_t)64 << 20)
/* ids past it are read uncached: at most 16 MiB of index per kind */
#define DCACHE_MAX_ID ((int64_t)1 << 21)

void store_details_cache_drop(struct store_stacks *k)
{
	for (int i = 0; i < 2; i++) {
		free(k->dent[i]);
		k->dent[i] = NULL;
		k->n_dent[i] = 0;
	}
	free(k->dpool);
	k->dpool = NULL;
	k->dpool_len = k->dpool_cap = 0;
}

/* Appends the bytes of location (which 0) or location stack (1) id to out, from this
 * connection's cache (ids never change, rows are never deleted), else read and cached. The
 * cache is dropped whole past DCACHE_MAX_BYTES. */
static int dcache_read(struct pf_store *st, int which, int64_t id, struct pf_buf *out)
{
	struct store_stacks *k = stk_of(st);
	enum stk_stmt sid = which ? K_GET_LSTACK : K_GET_LOC;
	const char *what = which ? "profiles: detail stack" : "profiles: detail location";

	if (!k || id <= 0 || id >= DCACHE_MAX_ID)
		return blob_by_id(st, sid, id, out, what);
	struct dentry *e = (size_t)id < k->n_dent[which] ? &k->dent[which][id] : NULL;
	if (e && e->len != UINT32_MAX)
		return pf_buf_append(out, k->dpool + e->off, e->len);
	size_t at = out->len;
	int rc = blob_by_id(st, sid, id, out, what);
	size_t n = out->len - at;
	if (rc < 0 || n >= UINT32_MAX)
		return rc;
	if (k->dpool_len + n > DCACHE_MAX_BYTES)
		store_details_cache_drop(k);
	size_t have = k->n_dent[which];
	/* not cached when memory is short: no harm */
	if (PF_ARRAY_GROW(k->dent[which], k->n_dent[which], (size_t)id + 1, 1024) < 0)
		return 0;
	for (size_t i = have; i < k->n_dent[which]; i++)
		k->dent[which][i].len = UINT32_MAX;
	if (PF_ARRAY_GROW(k->dpool, k->dpool_cap, k->dpool_len + n, 65536) < 0)
		return 0;
	memcpy(k->dpool + k->dpool_len, out->data + at, n);
	k->dent[which][id] = (struct dentry){(uint32_t)k->dpool_len, (uint32_t)n};
	k->dpool_len += n;
	return 0;
}

/* Location id -> its key in the read buffer, for one read: a hash over the ids (slot holds
 * index + 1 into the dense off/len arrays, which a rehash leaves alone). */
struct locs_read {
	struct loc_entry {
		int64_t id;
		uint32_t off, len;
	} * e;
	size_t n, cap;
	size_t *slot;
	size_t n_slot;
};

static size_t id_mix(int64_t id)
{
	return (size_t)((uint64_t)id * 0x9e3779b97f4a7c15ull >> 17);
}

static size_t id_hash(int64_t id, size_t n_slot)
{
	return id_mix(id) & (n_slot - 1);
}

static size_t locs_hash(const void *ctx, size_t i)
{
	return id_mix(((const struct locs_read *)ctx)->e[i].id);
}

/* *idx = the dense index of location id, *fresh when it is new (its key to be read). */
static int locs_find(struct locs_read *m, int64_t id, size_t *idx, bool *fresh)
{
	if (pf_array_index_reserve(&m->slot, &m->n_slot, m->n, 1024, locs_hash, m) < 0)
		return -ENOMEM;
	size_t j = id_hash(id, m->n_slot);
	while (m->slot[j] && m->e[m->slot[j] - 1].id != id)
		j = (j + 1) & (m->n_slot - 1);
	*fresh = !m->slot[j];
	if (*fresh) {
		if (PF_ARRAY_GROW(m->e, m->cap, m->n + 1, 512) < 0)
			return -ENOMEM;
		m->e[m->n] = (struct loc_entry){id, 0, 0};
		m->slot[j] = ++m->n;
	}
	*idx = m->slot[j] - 1;
	return 0;
}

int pf_store_profile_detail(struct pf_store *st, int64_t id, size_t max_bytes,
			    int (*cb)(const void *samples, size_t len,
				      const struct pf_profile_dstack *stacks, size_t n_stacks,
				      void *ud),
			    void *ud)
{
	struct pf_buf blob, keys, stk;
	struct locs_read m = {0};
	struct pf_profile_dstack *ds = NULL;
	const uint8_t **kp = NULL;
	size_t *kl = NULL;
	uint32_t *koff = NULL;
	size_t n_refs = 0, cap_refs = 0;
	uint64_t n_stacks = 0;
	int rc;

	pf_buf_init(&blob, max_bytes);
	pf_buf_init(&keys, max_bytes);
	pf_buf_init(&stk, max_bytes);
	rc = blob_by_id(st, K_GET_DETAIL, id, &blob, "profiles: detail");
	const uint8_t *p = blob.data, *end = p ? p + blob.len : p;
	if (rc == 0 && (!p || get_varint(&p, end, &n_stacks) < 0 || n_stacks > (uint64_t)(end - p)))
		rc = -EBADMSG;
	if (rc == 0) {
		ds = calloc(n_stacks ? n_stacks : 1, sizeof(*ds));
		if (!ds)
			rc = -ENOMEM;
	}
	/* Each stack's location ids, then each distinct location's key. */
	size_t *first = rc == 0 ? calloc(n_stacks + 1, sizeof(*first)) : NULL;
	if (rc == 0 && !first)
		rc = -ENOMEM;
	int64_t sid = 0;
	for (uint64_t i = 0; rc == 0 && i < n_stacks; i++) {
		uint64_t z;
		if (get_varint(&p, end, &z) < 0) {
			rc = -EBADMSG;
			break;
		}
		sid += (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
		pf_buf_reset(&stk);
		rc = dcache_read(st, 1, sid, &stk);
		if (rc == -ENOENT)
			rc = -EBADMSG;
		first[i] = n_refs;
		const uint8_t *q = stk.data, *qe = q ? q + stk.len : q;
		while (rc == 0 && q && q < qe) {
			uint64_t lid;
			size_t slot;
			if (get_varint(&q, qe, &lid) < 0 || lid == 0 || lid > INT64_MAX) {
				rc = -EBADMSG;
				break;
			}
			bool fresh = false;
			rc = locs_find(&m, (int64_t)lid, &slot, &fresh);
			if (rc == 0 && fresh) {
				size_t off = keys.len;
				rc = dcache_read(st, 0, (int64_t)lid, &keys);
				if (rc == -ENOENT)
					rc = -EBADMSG;
				if (rc == 0 && keys.len > UINT32_MAX)
					rc = -E2BIG;
				if (rc == 0) {
					m.e[slot].off = (uint32_t)off;
					m.e[slot].len = (uint32_t)(keys.len - off);
				}
			}
			if (rc == 0 && n_refs >= max_bytes / sizeof(uint32_t))
				rc = -E2BIG;
			if (rc == 0 && PF_ARRAY_GROW(koff, cap_refs, n_refs + 1, 4096) < 0)
				rc = -ENOMEM;
			if (rc == 0)
				koff[n_refs++] = (uint32_t)slot;
		}
	}
	if (rc == 0) {
		first[n_stacks] = n_refs;
		kp = calloc(n_refs ? n_refs : 1, sizeof(*kp));
		kl = calloc(n_refs ? n_refs : 1, sizeof(*kl));
		if (!kp || !kl)
			rc = -ENOMEM;
	}
	for (size_t i = 0; rc == 0 && i < n_refs; i++) {
		/* the keys' buffer is complete now: no pointer into it moves any more */
		kp[i] = keys.data + m.e[koff[i]].off;
		kl[i] = m.e[koff[i]].len;
	}
	for (uint64_t i = 0; rc == 0 && i < n_stacks; i++)
		ds[i] = (struct pf_profile_dstack){first[i + 1] - first[i], kp + first[i],
						   kl + first[i]};
	if (rc == 0)
		rc = cb(p, (size_t)(end - p), ds, (size_t)n_stacks, ud);
	else if (rc == -EBADMSG)
		store_fail_other(st, NULL, rc, "profiles: detail does not check out");
	else if (rc == -E2BIG)
		store_fail_other(st, NULL, rc, "profiles: detail too large");
	free(first);
	free(ds);
	free(kp);
	free(kl);
	free(koff);
	free(m.e);
	free(m.slot);
	pf_buf_release(&blob);
	pf_buf_release(&keys);
	pf_buf_release(&stk);
	return rc;
}
