/* store_stacks.c — the profile store's content tables (schema 12, migration in store.c): frames,
 * stacks and resource attribute sets stored once, keyed by a SHA-256 of their content; each
 * profile's (stack id, weight) pairs; per-minute and per-hour rollups of them per (type,
 * attribute set), kept at ingest in the insert's transaction; and the selection that reads
 * rollups where a range covers their slots and single profiles elsewhere (store.h).
 *
 * Packed pairs (profile_samples.data, profile_rollups.data): varint count, then per pair,
 * stack ids ascending, the id's difference to the previous one (the first: the id) and the
 * weight, LEB128 varints. A stack (prof_stacks.frames) is its frame ids root first, varints.
 * An attribute set (prof_attrsets.attrs) is varint count, then per attribute, sorted by key,
 * varint length and bytes of key and of value.
 *
 * Per connection, in struct store_stacks: the ids of content already looked up (a hash table
 * over the content bytes, so a repeated stack costs no SHA-256 and no query), and the frames,
 * stacks and attribute sets already read. Both are dropped whole when they pass their cap;
 * ids never change, so a cache is never stale (an id not found is looked up again: it may
 * have been stored since). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pf/compiler.h"
#include "pf/hash.h"
#include "store_int.h"
#include "store_stacks_int.h"

#define HASH_LEN 16
#define SEEN_MAX_BYTES ((size_t)64 << 20)
#define CACHE_MAX_BYTES ((size_t)256 << 20)
#define STACK_LOAD_CHUNK 65536
#define STACK_MISSING (UINT32_MAX - 1) /* a stack entry read and not found (n = 0: empty) */



#define SEL_PROFILE_COLS "p.id, p.start_ns, p.attrset, p.samples, p.unit"
#define SEL_SERIES_COLS "p.id, p.start_ns, p.attrset, p.total, p.unit"
#define SEL_RANGE "p.type = ?1 AND p.start_ns >= ?2 AND p.start_ns < ?3"

const char *const stk_sql[K__COUNT] = {
    [K_FIND_FRAME] = "SELECT id FROM prof_frames WHERE hash = ?1",
    [K_ADD_FRAME] = "INSERT INTO prof_frames (hash, kind, name) VALUES (?1, ?2, ?3)",
    [K_FIND_STACK] = "SELECT id FROM prof_stacks WHERE hash = ?1",
    [K_ADD_STACK] = "INSERT INTO prof_stacks (hash, frames) VALUES (?1, ?2)",
    [K_FIND_ATTRS] = "SELECT id FROM prof_attrsets WHERE hash = ?1",
    [K_ADD_ATTRS] = "INSERT INTO prof_attrsets (hash, attrs) VALUES (?1, ?2)",
    [K_ADD_SAMPLES] = "INSERT INTO profile_samples (id, data) VALUES (?1, ?2)",
    [K_ADD_SERIES] = "INSERT INTO profile_series (id, type, unit, start_ns, attrset, total, "
		     "data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [K_ROLLUP_GET] = "SELECT id, data FROM profile_rollups WHERE res = ?1 AND type = ?2 AND "
		     "slot = ?3 AND attrset = ?4",
    [K_ROLLUP_ADD] = "INSERT INTO profile_rollups (res, slot, type, attrset, profiles, total, "
		     "data) VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6)",
    /* totals saturate (a client may send counts near 2^63) */
    [K_ROLLUP_SET] = "UPDATE profile_rollups SET profiles = profiles + 1, total = CASE WHEN "
		     "total > 9223372036854775807 - ?2 THEN 9223372036854775807 ELSE total + ?2 "
		     "END, data = ?3 WHERE id = ?1",
    [K_TYPE_ADD] = "INSERT OR IGNORE INTO profile_types (type, unit) VALUES (?1, ?2)",
    [K_TYPE_UNIT] = "UPDATE profile_types SET unit = ?2 WHERE type = ?1 AND unit = ''",
    [K_COUNT_BYTES] = "UPDATE profile_totals SET bytes = bytes + ?1 WHERE k = 0",
    [K_LOAD_FRAMES] = "SELECT id, kind, name FROM prof_frames WHERE id >= ?1 AND id < ?2",
    [K_LOAD_STACKS] = "SELECT id, frames FROM prof_stacks WHERE id >= ?1 AND id < ?2",
    [K_LOAD_ATTRS] = "SELECT id, attrs FROM prof_attrsets WHERE id > ?1 ORDER BY id",
    [K_TYPES] = "SELECT type, unit FROM profile_types ORDER BY type",
    [K_SEL_ROLLUPS] = "SELECT slot, attrset, profiles, total, data FROM profile_rollups WHERE "
		      "res = ?4 AND type = ?1 AND slot >= ?2 AND slot < ?3",
    [K_SEL_ROLLUP_TOTALS] = "SELECT slot, attrset, profiles, total FROM profile_rollups WHERE "
			    "res = ?4 AND type = ?1 AND slot >= ?2 AND slot < ?3",
    [K_SEL_PROFILES] = "SELECT " SEL_PROFILE_COLS ", s.data FROM profiles p LEFT JOIN "
		       "profile_samples s ON s.id = p.id WHERE " SEL_RANGE " AND p.attrset > 0",
    [K_SEL_PROFILE_TOTALS] =
	"SELECT " SEL_PROFILE_COLS " FROM profiles p WHERE " SEL_RANGE " AND p.attrset > 0",
    /* the series of that type, in the columns of the three above */
    [K_SEL_SERIES] = "SELECT " SEL_SERIES_COLS ", p.data FROM profile_series p WHERE " SEL_RANGE,
    [K_SEL_SERIES_TOTALS] = "SELECT " SEL_SERIES_COLS " FROM profile_series p WHERE " SEL_RANGE,
    [K_SEL_SERIES_TRACE] =
	"SELECT " SEL_SERIES_COLS ", p.data FROM profile_series p WHERE " SEL_RANGE
	" AND p.id IN (SELECT profile FROM profile_links WHERE "
	"trace_id = ?4)",
    [K_SEL_PROFILES_TRACE] =
	"SELECT " SEL_PROFILE_COLS ", s.data FROM profiles p LEFT JOIN "
	"profile_samples s ON s.id = p.id WHERE " SEL_RANGE " AND p.attrset > "
	"0 AND p.id IN (SELECT profile FROM profile_links WHERE trace_id = ?4)",
    [K_SEL_LEGACY] = "SELECT " SEL_PROFILE_COLS ", p.service, p.agent, p.k8s_namespace, "
		     "p.k8s_pod, p.k8s_container, p.capture_id, p.trigger_name FROM profiles p "
		     "WHERE p.attrset = 0 AND p.start_ns >= ?2 AND p.start_ns < ?3 AND p.type = ?1",
    [K_SEL_LEGACY_TRACE] = "SELECT " SEL_PROFILE_COLS ", p.service, p.agent, p.k8s_namespace, "
			   "p.k8s_pod, p.k8s_container, p.capture_id, p.trigger_name FROM "
			   "profiles p WHERE p.attrset = 0 AND p.start_ns >= ?2 AND p.start_ns < "
			   "?3 AND p.type = ?1 AND p.id IN (SELECT profile FROM profile_links "
			   "WHERE trace_id = ?4)",
    [K_LEGACY_NEXT] = "SELECT id FROM profiles WHERE attrset = 0 ORDER BY start_ns LIMIT 1",
    /* a converted profile takes the type and weight its content was stored with */
    [K_SET_CONTENT] = "UPDATE profiles SET attrset = ?2, unit = ?3, type = coalesce(?4, type), "
		      "samples = CASE WHEN ?5 >= 0 THEN ?5 ELSE samples END WHERE id = ?1",
    [K_FIND_LOC] = "SELECT id FROM prof_locations WHERE hash = ?1",
    [K_ADD_LOC] = "INSERT INTO prof_locations (hash, data) VALUES (?1, ?2)",
    [K_FIND_LSTACK] = "SELECT id FROM prof_lstacks WHERE hash = ?1",
    [K_ADD_LSTACK] = "INSERT INTO prof_lstacks (hash, locs) VALUES (?1, ?2)",
    [K_ADD_DETAIL] = "INSERT INTO profile_details (id, data) VALUES (?1, ?2)",
    [K_GET_DETAIL] = "SELECT data FROM profile_details WHERE id = ?1",
    [K_GET_LSTACK] = "SELECT locs FROM prof_lstacks WHERE id = ?1",
    [K_GET_LOC] = "SELECT data FROM prof_locations WHERE id = ?1",
    [K_BEGIN_READ] = "BEGIN",
    [K_COMMIT] = "COMMIT",
};

static void seen_release(struct seen *s)
{
	free(s->keys);
	free(s->slots);
	memset(s, 0, sizeof(*s));
}

static void cache_drop(struct store_stacks *k)
{
	for (size_t i = 0; i < k->n_frame_cache; i++)
		free(k->frame_name[i]);
	free(k->frame_name);
	free(k->frame_kind);
	free(k->stack);
	free(k->pool);
	for (size_t i = 0; i < k->n_attr; i++)
		free(k->attr[i].kv);
	free(k->attr);
	k->frame_name = NULL;
	k->frame_kind = NULL;
	k->stack = NULL;
	k->pool = NULL;
	k->attr = NULL;
	k->n_frame_cache = k->n_stack_cache = k->n_attr = 0;
	k->pool_len = k->pool_cap = 0;
	k->attr_loaded = 0;
	k->cache_bytes = 0;
}

/* The content ids this connection has seen (frames, stacks, attribute sets, locations and
 * location stacks) and the details cache: let go. */
static void seen_forget_all(struct store_stacks *k)
{
	seen_release(&k->frames);
	seen_release(&k->stacks);
	seen_release(&k->attrsets);
	seen_release(&k->locs);
	seen_release(&k->lstacks);
	store_details_cache_drop(k);
}

void store_stacks_release(struct store_stacks *k)
{
	if (!k)
		return;
	for (size_t i = 0; i < K__COUNT; i++)
		sqlite3_finalize(k->stmt[i]);
	seen_forget_all(k);
	cache_drop(k);
	free(k);
}

static struct seen_slot *seen_find(struct seen *s, const void *key, size_t n, uint64_t h)
{
	if (!s->n_slots)
		return NULL;
	for (size_t j = h & (s->n_slots - 1);; j = (j + 1) & (s->n_slots - 1)) {
		struct seen_slot *sl = &s->slots[j];
		if (!sl->id)
			return sl;
		if (sl->h == h && sl->n == n && (n == 0 || memcmp(s->keys + sl->off, key, n) == 0))
			return sl;
	}
}

static int seen_grow(struct seen *s)
{
	size_t cap = s->n_slots ? s->n_slots * 2 : 4096;
	struct seen_slot *t = calloc(cap, sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < s->n_slots; i++) {
		if (!s->slots[i].id)
			continue;
		size_t j = s->slots[i].h & (cap - 1);
		while (t[j].id)
			j = (j + 1) & (cap - 1);
		t[j] = s->slots[i];
	}
	free(s->slots);
	s->slots = t;
	s->n_slots = cap;
	return 0;
}

/* Remembers key -> id (dropping everything first when the table passed its cap). */
static int seen_put(struct seen *s, const void *key, size_t n, uint64_t h, int64_t id)
{
	if (s->len + n > SEEN_MAX_BYTES)
		seen_release(s);
	if ((s->n + 1) * 10 >= s->n_slots * 7 && seen_grow(s) < 0)
		return -ENOMEM;
	if (s->len + n > s->cap) {
		size_t cap = pf_max(s->cap * 2, s->len + n + 4096);
		uint8_t *nk = realloc(s->keys, cap);
		if (!nk)
			return -ENOMEM;
		s->keys = nk;
		s->cap = cap;
	}
	struct seen_slot *sl = seen_find(s, key, n, h);
	memcpy(s->keys + s->len, key, n);
	*sl = (struct seen_slot){h, s->len, (uint32_t)n, id};
	s->len += n;
	s->n++;
	return 0;
}

void store_stacks_forget(struct pf_store *st)
{
	struct store_stacks **pp = store_prof_stacks(st);
	struct store_stacks *k = pp ? *pp : NULL;
	if (!k)
		return;
	seen_forget_all(k);
	k->n_types_known = 0;
}

struct store_stacks *stk_of(struct pf_store *st)
{
	struct store_stacks **pp = store_prof_stacks(st);
	if (pp && !*pp)
		*pp = calloc(1, sizeof(**pp));
	return pp ? *pp : NULL;
}

sqlite3_stmt *kstmt(struct pf_store *st, enum stk_stmt id, int *rc)
{
	struct store_stacks *k = stk_of(st);

	*rc = 0;
	if (!k) {
		*rc = store_fail_other(st, NULL, -ENOMEM, "profiles: out of memory");
		return NULL;
	}
	if (!k->stmt[id] && sqlite3_prepare_v3(st->db, stk_sql[id], -1, SQLITE_PREPARE_PERSISTENT,
					       &k->stmt[id], NULL) != SQLITE_OK) {
		*rc = store_fail_sqlite(st, NULL, "profiles: prepare");
		return NULL;
	}
	return k->stmt[id];
}

void kreset(sqlite3_stmt **s)
{
	if (*s) {
		sqlite3_reset(*s);
		sqlite3_clear_bindings(*s);
	}
}


static int put_varint(struct pf_buf *b, uint64_t v)
{
	return pf_buf_append_uvarint(b, v);
}

int get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t r = 0;
	for (int shift = 0; shift < 64 && *p < end; shift += 7) {
		uint8_t c = *(*p)++;
		r |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*v = r;
			return 0;
		}
	}
	return -EBADMSG;
}

/* The id of content `key` in table (find, add): looked up in seen, else by its hash in the
 * table, else inserted with bind_rest binding the columns after the hash. */
int intern_content(struct pf_store *st, struct seen *seen, enum stk_stmt find,
		   enum stk_stmt add, const void *key, size_t n,
		   int (*bind_rest)(sqlite3_stmt *s, const void *ctx), const void *ctx,
		   int64_t *id)
{
	uint64_t h = pf_hash64(key, n);
	struct seen_slot *sl = seen_find(seen, key, n, h);
	uint8_t digest[PF_SHA256_LEN];
	int rc;

	if (sl && sl->id) {
		*id = sl->id;
		return 0;
	}
	pf_sha256(key, n, digest);
	{
		KSTMT(s, st, find, &rc);
		if (!s)
			return rc;
		if (sqlite3_bind_blob(s, 1, digest, HASH_LEN, SQLITE_STATIC))
			return store_fail_sqlite(st, NULL, "profiles: content: bind");
		rc = store_step_row(st, s, 0, "profiles: content: find");
		if (rc < 0)
			return rc;
		if (rc == 1)
			*id = sqlite3_column_int64(s, 0);
	}
	if (rc == 0) {
		KSTMT(s, st, add, &rc);
		if (!s)
			return rc;
		if (sqlite3_bind_blob(s, 1, digest, HASH_LEN, SQLITE_STATIC) || bind_rest(s, ctx))
			return store_fail_sqlite(st, NULL, "profiles: content: bind");
		rc = store_step_done(st, s, "profiles: content: add");
		if (rc < 0)
			return rc;
		*id = sqlite3_last_insert_rowid(st->db);
	}
	return seen_put(seen, key, n, h, *id);
}

int bind_blob2(sqlite3_stmt *s, const void *ctx)
{
	const struct blob_ctx *b = ctx;
	return sqlite3_bind_blob64(s, 2, b->p ? b->p : "", b->n, SQLITE_STATIC);
}

/* A frame's key: kind byte, then the name. */
static int bind_frame(sqlite3_stmt *s, const void *ctx)
{
	const struct blob_ctx *b = ctx;
	const uint8_t *k = b->p;
	return sqlite3_bind_int(s, 2, k[0]) ||
	       sqlite3_bind_text(s, 3, (const char *)k + 1, (int)b->n - 1, SQLITE_STATIC);
}

static int cmp_kv(const void *a, const void *b)
{
	const struct pf_profile_kv *x = a, *y = b;
	int c = strcmp(x->key, y->key);
	return c ? c : strcmp(x->value, y->value);
}

/* The attribute set of r (sorted by key, one value per key, lengths cut), stored once. */
static int attrset_id(struct pf_store *st, struct store_stacks *k,
		      const struct pf_profile_row *r, int64_t *id)
{
	size_t n = pf_min(r->n_attrs, (size_t)PF_PROFILE_MAX_ATTRS), m = 0;
	struct pf_profile_kv kv[PF_PROFILE_MAX_ATTRS];
	struct pf_buf b;
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		if (r->attrs[i].key && r->attrs[i].value)
			kv[m++] = r->attrs[i];
	if (m > 1)
		qsort(kv, m, sizeof(kv[0]), cmp_kv);
	size_t u = 0;
	for (size_t i = 0; i < m; i++)
		if (!u || strcmp(kv[u - 1].key, kv[i].key) != 0)
			kv[u++] = kv[i];
	pf_buf_init(&b, (size_t)PF_PROFILE_MAX_ATTRS * 2 * (PF_PROFILE_ATTR_MAX_BYTES + 10) + 16);
	rc = put_varint(&b, u);
	for (size_t i = 0; rc == 0 && i < u; i++) {
		size_t kl = strnlen(kv[i].key, PF_PROFILE_ATTR_MAX_BYTES);
		size_t vl = strnlen(kv[i].value, PF_PROFILE_ATTR_MAX_BYTES);
		rc = put_varint(&b, kl);
		if (rc == 0)
			rc = pf_buf_append(&b, kv[i].key, kl);
		if (rc == 0)
			rc = put_varint(&b, vl);
		if (rc == 0)
			rc = pf_buf_append(&b, kv[i].value, vl);
	}
	if (rc == 0) {
		struct blob_ctx c = {b.data, b.len};
		rc = intern_content(st, &k->attrsets, K_FIND_ATTRS, K_ADD_ATTRS, b.data, b.len,
				    bind_blob2, &c, id);
	}
	pf_buf_release(&b);
	return rc;
}

struct pair {
	int64_t stack;
	uint64_t weight;
};

static int cmp_pair(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;
	return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/* The ids of r's frames and stacks (stored when new): sid[i] is the id of r->stacks[i]. */
static int stack_ids(struct pf_store *st, struct store_stacks *k, const struct pf_profile_row *r,
		     int64_t *sid)
{
	_cleanup_free_ int64_t *fid = malloc((r->n_frames ? r->n_frames : 1) * sizeof(*fid));
	struct pf_buf key;
	int rc = 0;

	if (!fid)
		return -ENOMEM;
	pf_buf_init(&key, 0);
	for (size_t i = 0; rc == 0 && i < r->n_frames; i++) {
		const char *nm = r->frames[i].name ? r->frames[i].name : "";
		pf_buf_reset(&key);
		rc = pf_buf_putc(&key, r->frames[i].kind);
		if (rc == 0)
			rc = pf_buf_append(&key, nm, strlen(nm));
		struct blob_ctx c = {key.data, key.len};
		if (rc == 0)
			rc = intern_content(st, &k->frames, K_FIND_FRAME, K_ADD_FRAME, key.data,
					    key.len, bind_frame, &c, &fid[i]);
	}
	for (size_t i = 0; rc == 0 && i < r->n_stacks; i++) {
		const struct pf_profile_stack *s = &r->stacks[i];
		pf_buf_reset(&key);
		for (uint32_t j = 0; rc == 0 && j < s->n_frames; j++)
			rc = s->frames[j] < r->n_frames
				 ? put_varint(&key, (uint64_t)fid[s->frames[j]])
				 : store_fail_other(st, NULL, -EINVAL, "profiles: frame index");
		struct blob_ctx c = {key.data, key.len};
		if (rc == 0)
			rc = intern_content(st, &k->stacks, K_FIND_STACK, K_ADD_STACK, key.data,
					    key.len, bind_blob2, &c, &sid[i]);
	}
	pf_buf_release(&key);
	return rc;
}

/* The pairs (sid[i], weight[i]) of the n stacks with a weight, sorted by id, equal ids
 * merged; *total their saturating sum. pairs has room for n. */
static size_t make_pairs(const int64_t *sid, const uint64_t *weight, size_t n, struct pair *pairs,
			 int64_t *total)
{
	size_t m = 0, u = 0;
	for (size_t i = 0; i < n; i++)
		if (weight[i])
			pairs[m++] = (struct pair){sid[i], weight[i]};
	if (m > 1)
		qsort(pairs, m, sizeof(*pairs), cmp_pair);
	*total = 0;
	for (size_t i = 0; i < m; i++) {
		if (u && pairs[u - 1].stack == pairs[i].stack)
			pairs[u - 1].weight += pairs[i].weight;
		else
			pairs[u++] = pairs[i];
		*total = pairs[i].weight > (uint64_t)(INT64_MAX - *total)
			     ? INT64_MAX
			     : *total + (int64_t)pairs[i].weight;
	}
	return u;
}

static int pack_pairs(const struct pair *p, size_t n, struct pf_buf *out)
{
	int64_t prev = 0;
	int rc = put_varint(out, n);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		rc = put_varint(out, (uint64_t)(p[i].stack - prev));
		if (rc == 0)
			rc = put_varint(out, p[i].weight);
		prev = p[i].stack;
	}
	return rc;
}

/* Calls cb for each pair of a packed array. -EBADMSG when it does not check out. */
int unpack_pairs(const void *blob, size_t len, int (*cb)(int64_t, uint64_t, void *),
			void *ud)
{
	const uint8_t *p = blob, *end = p + len;
	uint64_t n, id = 0;

	if (!blob || get_varint(&p, end, &n) < 0 || n > len)
		return -EBADMSG;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t d, w;
		if (get_varint(&p, end, &d) < 0 || get_varint(&p, end, &w) < 0 ||
		    (i && !d) || d > INT64_MAX - id)
			return -EBADMSG;
		id += d;
		int rc = cb((int64_t)id, w, ud);
		if (rc)
			return rc;
	}
	return p == end ? 0 : -EBADMSG;
}

/* Merges a packed array with sorted pairs into out. */
struct merge_ctx {
	const struct pair *p;
	size_t n, i;
	int64_t prev;
	size_t count;
	struct pf_buf *out;
};

static int merge_emit(struct merge_ctx *m, int64_t id, uint64_t w)
{
	int rc = put_varint(m->out, (uint64_t)(id - m->prev));
	if (rc == 0)
		rc = put_varint(m->out, w);
	m->prev = id;
	m->count++;
	return rc;
}

static int merge_cb(int64_t id, uint64_t w, void *ud)
{
	struct merge_ctx *m = ud;
	int rc = 0;
	while (rc == 0 && m->i < m->n && m->p[m->i].stack < id) {
		rc = merge_emit(m, m->p[m->i].stack, m->p[m->i].weight);
		m->i++;
	}
	if (rc == 0 && m->i < m->n && m->p[m->i].stack == id)
		w += m->p[m->i++].weight;
	return rc ? rc : merge_emit(m, id, w);
}

static int merge_pairs(const void *blob, size_t len, const struct pair *p, size_t n,
		       struct pf_buf *out)
{
	struct pf_buf body;
	struct merge_ctx m = {.p = p, .n = n, .out = &body};
	int rc;

	pf_buf_init(&body, 0);
	rc = unpack_pairs(blob, len, merge_cb, &m);
	while (rc == 0 && m.i < m.n) {
		rc = merge_emit(&m, m.p[m.i].stack, m.p[m.i].weight);
		m.i++;
	}
	if (rc == 0)
		rc = put_varint(out, m.count);
	if (rc == 0)
		rc = pf_buf_append(out, body.data ? body.data : (const uint8_t *)"", body.len);
	pf_buf_release(&body);
	return rc;
}

static int add_rollup(struct pf_store *st, const struct pf_profile_row *r, const char *type,
		      int64_t res, const struct pair *p, size_t n, int64_t total,
		      const struct pf_buf *packed)
{
	int64_t start_ms = r->start_ns / NS_PER_MS, slot = start_ms - start_ms % res, id = 0;
	struct pf_buf merged;
	int rc;

	pf_buf_init(&merged, 0);
	{
		KSTMT(s, st, K_ROLLUP_GET, &rc);
		if (!s)
			return rc;
		if (sqlite3_bind_int64(s, 1, res) ||
		    sqlite3_bind_text(s, 2, type, -1, SQLITE_STATIC) ||
		    sqlite3_bind_int64(s, 3, slot) || sqlite3_bind_int64(s, 4, r->attrset))
			return store_fail_sqlite(st, NULL, "profiles: rollup: bind");
		rc = store_step_row(st, s, 0, "profiles: rollup: get");
		if (rc == 1) {
			id = sqlite3_column_int64(s, 0);
			rc = merge_pairs(sqlite3_column_blob(s, 1),
					 (size_t)sqlite3_column_bytes(s, 1), p, n, &merged);
			if (rc == -EBADMSG) /* a damaged rollup starts again from this profile */
				rc = pf_buf_append(&merged, packed->data, packed->len);
		}
	}
	if (rc < 0) {
		pf_buf_release(&merged);
		return rc;
	}
	if (id) {
		KSTMT(s, st, K_ROLLUP_SET, &rc);
		if (s && (sqlite3_bind_int64(s, 1, id) || sqlite3_bind_int64(s, 2, total) ||
			  sqlite3_bind_blob64(s, 3, merged.data ? merged.data : (const uint8_t *)"",
					      merged.len, SQLITE_STATIC)))
			rc = store_fail_sqlite(st, NULL, "profiles: rollup: bind");
		else if (s)
			rc = store_step_done(st, s, "profiles: rollup: set");
	} else {
		KSTMT(s, st, K_ROLLUP_ADD, &rc);
		if (s && (sqlite3_bind_int64(s, 1, res) || sqlite3_bind_int64(s, 2, slot) ||
			  sqlite3_bind_text(s, 3, type, -1, SQLITE_STATIC) ||
			  sqlite3_bind_int64(s, 4, r->attrset) || sqlite3_bind_int64(s, 5, total) ||
			  sqlite3_bind_blob64(s, 6, packed->data, packed->len, SQLITE_STATIC)))
			rc = store_fail_sqlite(st, NULL, "profiles: rollup: bind");
		else if (s)
			rc = store_step_done(st, s, "profiles: rollup: add");
	}
	pf_buf_release(&merged);
	return rc;
}

static int note_type(struct pf_store *st, struct store_stacks *k, const char *type,
		     const char *unit)
{
	for (size_t i = 0; i < k->n_types_known; i++)
		if (strcmp(k->types_known[i], type) == 0)
			return 0;
	int rc;
	{
		KSTMT(s, st, K_TYPE_ADD, &rc);
		if (!s)
			return rc;
		if (sqlite3_bind_text(s, 1, type, -1, SQLITE_STATIC) ||
		    sqlite3_bind_text(s, 2, unit, -1, SQLITE_STATIC))
			return store_fail_sqlite(st, NULL, "profiles: type: bind");
		rc = store_step_done(st, s, "profiles: type");
	}
	if (rc == 0 && *unit) {
		KSTMT(s, st, K_TYPE_UNIT, &rc);
		if (!s)
			return rc;
		if (sqlite3_bind_text(s, 1, type, -1, SQLITE_STATIC) ||
		    sqlite3_bind_text(s, 2, unit, -1, SQLITE_STATIC))
			return store_fail_sqlite(st, NULL, "profiles: type: bind");
		rc = store_step_done(st, s, "profiles: type unit");
		if (rc == 0 && strlen(type) < sizeof(k->types_known[0]) &&
		    k->n_types_known < PF_ARRAY_SIZE(k->types_known))
			snprintf(k->types_known[k->n_types_known++], sizeof(k->types_known[0]), "%s",
				 type);
	}
	return rc;
}

int store_stacks_prepare(struct pf_store *st, struct pf_profile_row *r)
{
	struct store_stacks *k = stk_of(st);

	r->attrset = 0;
	if (!r->n_stacks)
		return 0;
	if (!k)
		return store_fail_other(st, NULL, -ENOMEM, "profiles: out of memory");
	if ((!r->attrs && r->n_attrs) || (!r->frames && r->n_frames) || !r->stacks)
		return store_fail_other(st, NULL, -EINVAL, "profiles: insert: bad content");
	return attrset_id(st, k, r, &r->attrset);
}

/* Stores one type of r (type NULL: r's own, in profile_samples; else a series): its packed
 * pairs, their bytes in the totals, the minute and hour rollups and the type. */
static int insert_type(struct pf_store *st, struct store_stacks *k, const struct pf_profile_row *r,
		       const char *type, const char *unit, const struct pair *pairs, size_t n,
		       int64_t total)
{
	struct pf_buf packed;
	int rc;

	pf_buf_init(&packed, 0);
	rc = pack_pairs(pairs, n, &packed);
	if (rc == 0 && !type) {
		KSTMT(s, st, K_ADD_SAMPLES, &rc);
		if (s && (sqlite3_bind_int64(s, 1, r->id) ||
			  sqlite3_bind_blob64(s, 2, packed.data, packed.len, SQLITE_STATIC)))
			rc = store_fail_sqlite(st, NULL, "profiles: samples: bind");
		else if (s)
			rc = store_step_done(st, s, "profiles: samples");
	} else if (rc == 0) {
		KSTMT(s, st, K_ADD_SERIES, &rc);
		if (s && (sqlite3_bind_int64(s, 1, r->id) ||
			  sqlite3_bind_text(s, 2, type, -1, SQLITE_STATIC) ||
			  sqlite3_bind_text(s, 3, unit, -1, SQLITE_STATIC) ||
			  sqlite3_bind_int64(s, 4, r->start_ns) ||
			  sqlite3_bind_int64(s, 5, r->attrset) || sqlite3_bind_int64(s, 6, total) ||
			  sqlite3_bind_blob64(s, 7, packed.data, packed.len, SQLITE_STATIC)))
			rc = store_fail_sqlite(st, NULL, "profiles: series: bind");
		else if (s)
			rc = store_step_done(st, s, "profiles: series");
	}
	if (rc == 0) {
		KSTMT(s, st, K_COUNT_BYTES, &rc);
		if (s && sqlite3_bind_int64(s, 1, (int64_t)packed.len))
			rc = store_fail_sqlite(st, NULL, "profiles: samples: bind");
		else if (s)
			rc = store_step_done(st, s, "profiles: samples: count");
	}
	if (!type)
		type = r->type;
	if (rc == 0)
		rc = add_rollup(st, r, type, RES_MINUTE, pairs, n, total, &packed);
	if (rc == 0)
		rc = add_rollup(st, r, type, RES_HOUR, pairs, n, total, &packed);
	if (rc == 0)
		rc = note_type(st, k, type, unit);
	pf_buf_release(&packed);
	return rc;
}

int store_stacks_insert(struct pf_store *st, const struct pf_profile_row *r)
{
	struct store_stacks *k = stk_of(st);
	size_t ns = r->n_stacks ? r->n_stacks : 1, n;
	int64_t total;
	int rc;

	if (!r->n_stacks || r->attrset <= 0)
		return 0;
	if (!k)
		return store_fail_other(st, NULL, -ENOMEM, "profiles: out of memory");
	if (r->n_series && !r->series)
		return store_fail_other(st, NULL, -EINVAL, "profiles: insert: bad series");
	_cleanup_free_ int64_t *sid = malloc(ns * sizeof(*sid));
	_cleanup_free_ uint64_t *wt = malloc(ns * sizeof(*wt));
	_cleanup_free_ struct pair *pairs = malloc(ns * sizeof(*pairs));
	if (!sid || !wt || !pairs)
		return -ENOMEM;
	rc = stack_ids(st, k, r, sid);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < r->n_stacks; i++)
		wt[i] = r->stacks[i].weight;
	n = make_pairs(sid, wt, r->n_stacks, pairs, &total);
	rc = insert_type(st, k, r, NULL, r->unit ? r->unit : "", pairs, n, total);
	for (size_t j = 0; rc == 0 && j < r->n_series; j++) {
		const struct pf_profile_series *se = &r->series[j];
		if (!se->type || !*se->type || !se->weights || strcmp(se->type, r->type) == 0)
			return store_fail_other(st, NULL, -EINVAL, "profiles: insert: bad series");
		n = make_pairs(sid, se->weights, r->n_stacks, pairs, &total);
		if (n)
			rc = insert_type(st, k, r, se->type, se->unit ? se->unit : "", pairs, n,
					 total);
	}
	return rc;
}

/* ---- Reading content back. */

static void cache_check(struct store_stacks *k)
{
	if (k->cache_bytes > CACHE_MAX_BYTES)
		cache_drop(k);
}

/* Reads the frames [lo, lo + STACK_LOAD_CHUNK) into the cache. */
static int load_frames(struct pf_store *st, struct store_stacks *k, int64_t lo)
{
	size_t n = k->n_frame_cache, n2 = k->n_frame_cache;
	int rc;

	if (pf_array_grow_fill(&k->frame_name, &n, (size_t)lo + STACK_LOAD_CHUNK, sizeof(char *),
			       0) < 0 ||
	    pf_array_grow_fill(&k->frame_kind, &n2, n, 1, 0) < 0)
		return -ENOMEM;
	k->n_frame_cache = n;
	KSTMT(s, st, K_LOAD_FRAMES, &rc);
	if (!s)
		return rc;
	if (sqlite3_bind_int64(s, 1, lo) || sqlite3_bind_int64(s, 2, lo + STACK_LOAD_CHUNK))
		return store_fail_sqlite(st, NULL, "profiles: frames: bind");
	while ((rc = store_step_row(st, s, 0, "profiles: frames")) == 1) {
		int64_t id = sqlite3_column_int64(s, 0);
		const char *t = (const char *)sqlite3_column_text(s, 2);
		if (id < lo || id >= lo + STACK_LOAD_CHUNK || k->frame_name[id])
			continue;
		if (!(k->frame_name[id] = strdup(t ? t : "")))
			return -ENOMEM;
		k->frame_kind[id] = (uint8_t)sqlite3_column_int(s, 1);
		k->cache_bytes += strlen(k->frame_name[id]) + 32;
	}
	return rc;
}

int pf_store_frame_get(struct pf_store *st, uint32_t id, const char **name, uint8_t *kind)
{
	struct store_stacks *k = stk_of(st);

	if (!k)
		return -ENOMEM;
	if (id >= k->n_frame_cache || !k->frame_name[id]) {
		cache_check(k);
		int rc = load_frames(st, k, id - id % STACK_LOAD_CHUNK);
		if (rc < 0)
			return rc;
		if (!k->frame_name[id])
			return -ENOENT;
	}
	*name = k->frame_name[id];
	*kind = k->frame_kind[id];
	return 0;
}

/* Reads the stacks [lo, lo + STACK_LOAD_CHUNK) into the cache. */
static int load_stacks(struct pf_store *st, struct store_stacks *k, int64_t lo)
{
	int rc;
	size_t n = k->n_stack_cache;

	if (pf_array_grow_fill(&k->stack, &n, (size_t)lo + STACK_LOAD_CHUNK, sizeof(*k->stack), 0) <
	    0)
		return -ENOMEM;
	for (size_t i = k->n_stack_cache; i < n; i++)
		k->stack[i].n = UINT32_MAX;
	k->n_stack_cache = n;
	KSTMT(s, st, K_LOAD_STACKS, &rc);
	if (!s)
		return rc;
	if (sqlite3_bind_int64(s, 1, lo) || sqlite3_bind_int64(s, 2, lo + STACK_LOAD_CHUNK))
		return store_fail_sqlite(st, NULL, "profiles: stacks: bind");
	for (size_t i = (size_t)lo; i < (size_t)lo + STACK_LOAD_CHUNK; i++)
		if (k->stack[i].n == UINT32_MAX)
			k->stack[i].n = STACK_MISSING; /* read: no such stack (yet) */
	while ((rc = store_step_row(st, s, 0, "profiles: stacks")) == 1) {
		int64_t id = sqlite3_column_int64(s, 0);
		const uint8_t *p = sqlite3_column_blob(s, 1), *end;
		size_t len = (size_t)sqlite3_column_bytes(s, 1);
		if (id < lo || id >= lo + STACK_LOAD_CHUNK)
			continue;
		if (k->stack[id].n != STACK_MISSING)
			continue; /* read before: ids never change */
		end = p ? p + len : p;
		if (k->pool_len + len > k->pool_cap) {
			size_t cap = pf_max(k->pool_cap * 2, k->pool_len + len + 4096);
			uint32_t *np = realloc(k->pool, cap * sizeof(*np));
			if (!np)
				return -ENOMEM;
			k->pool = np;
			k->pool_cap = cap;
		}
		uint32_t off = (uint32_t)k->pool_len, m = 0;
		while (p && p < end) {
			uint64_t v;
			if (get_varint(&p, end, &v) < 0 || v > UINT32_MAX)
				break;
			k->pool[k->pool_len++] = (uint32_t)v;
			m++;
		}
		k->stack[id] = (struct stack_entry){off, m};
		k->cache_bytes += (size_t)m * 4 + sizeof(struct stack_entry);
	}
	return rc;
}

int pf_store_stack_get(struct pf_store *st, int64_t id, const uint32_t **frames, size_t *n)
{
	struct store_stacks *k = stk_of(st);

	if (!k)
		return -ENOMEM;
	if (id <= 0 || id > INT32_MAX)
		return -ENOENT;
	/* a stack not found when its chunk was read may have been stored since: read again */
	if ((size_t)id >= k->n_stack_cache || k->stack[id].n == UINT32_MAX ||
	    k->stack[id].n == STACK_MISSING) {
		cache_check(k);
		int rc = load_stacks(st, k, id - id % STACK_LOAD_CHUNK);
		if (rc < 0)
			return rc;
	}
	if (k->stack[id].n == STACK_MISSING)
		return -ENOENT;
	*frames = k->pool + k->stack[id].off;
	*n = k->stack[id].n;
	return 0;
}

/* Parses an attribute set blob into one allocation. */
static int attr_parse(const uint8_t *p, size_t len, struct attrset *a)
{
	const uint8_t *end = p + len;
	uint64_t n;

	memset(a, 0, sizeof(*a));
	if (!p || get_varint(&p, end, &n) < 0 || n > PF_PROFILE_MAX_ATTRS)
		return -EBADMSG;
	uint8_t *mem = malloc(n * sizeof(struct pf_profile_kv) + len + 2 * n + 1);
	if (!mem)
		return -ENOMEM;
	struct pf_profile_kv *kv = (struct pf_profile_kv *)mem;
	char *str = (char *)(mem + n * sizeof(*kv));
	for (uint64_t i = 0; i < n; i++) {
		for (int j = 0; j < 2; j++) {
			uint64_t l;
			if (get_varint(&p, end, &l) < 0 || l > (size_t)(end - p)) {
				free(mem);
				return -EBADMSG;
			}
			memcpy(str, p, l);
			str[l] = 0;
			if (j)
				kv[i].value = str;
			else
				kv[i].key = str;
			str += l + 1;
			p += l;
		}
	}
	a->n = n;
	a->kv = kv;
	return 0;
}

/* Reads the attribute sets stored since the last call into the cache. */
static int load_attrs(struct pf_store *st, struct store_stacks *k)
{
	int rc;
	KSTMT(s, st, K_LOAD_ATTRS, &rc);

	if (!s)
		return rc;
	if (sqlite3_bind_int64(s, 1, k->attr_loaded))
		return store_fail_sqlite(st, NULL, "profiles: attributes: bind");
	while ((rc = store_step_row(st, s, 0, "profiles: attributes")) == 1) {
		int64_t id = sqlite3_column_int64(s, 0);
		size_t n = k->n_attr;
		if (id <= 0 || id > INT32_MAX)
			continue;
		if (pf_array_grow_fill(&k->attr, &n, (size_t)id + 1, sizeof(*k->attr), 0) < 0)
			return -ENOMEM;
		k->n_attr = n;
		free(k->attr[id].kv);
		if (attr_parse(sqlite3_column_blob(s, 1), (size_t)sqlite3_column_bytes(s, 1),
			       &k->attr[id]) == -ENOMEM)
			return -ENOMEM;
		k->cache_bytes += (size_t)sqlite3_column_bytes(s, 1) + 64;
		k->attr_loaded = id;
	}
	return rc;
}

const struct attrset *attr_get(struct pf_store *st, struct store_stacks *k, int64_t id)
{
	if (id <= 0)
		return NULL;
	if ((size_t)id >= k->n_attr || !k->attr[id].kv) {
		if (load_attrs(st, k) < 0)
			return NULL;
	}
	return (size_t)id < k->n_attr && k->attr[id].kv ? &k->attr[id] : NULL;
}

int pf_store_attrset_foreach(struct pf_store *st, int64_t id,
			     int (*cb)(const char *key, const char *value, void *ud), void *ud)
{
	struct store_stacks *k = stk_of(st);
	if (!k)
		return -ENOMEM;
	const struct attrset *a = attr_get(st, k, id);
	if (!a)
		return -ENOENT;
	for (size_t i = 0; i < a->n; i++) {
		int rc = cb(a->kv[i].key, a->kv[i].value, ud);
		if (rc)
			return rc;
	}
	return 0;
}

int pf_store_profile_types(struct pf_store *st,
			   int (*cb)(const char *type, const char *unit, void *ud), void *ud)
{
	int rc;
	KSTMT(s, st, K_TYPES, &rc);

	if (!s)
		return rc;
	while ((rc = store_step_row(st, s, 0, "profiles: types")) == 1) {
		const char *t = (const char *)sqlite3_column_text(s, 0);
		const char *u = (const char *)sqlite3_column_text(s, 1);
		rc = cb(t ? t : "", u ? u : "", ud);
		if (rc)
			return rc;
	}
	return rc;
}

