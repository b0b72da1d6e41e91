/* store_stacks_int.h — private to store_stacks.c and store_select.c: the per-connection
 * state of the profile store's content tables (looked-up ids, cached frames, stacks and
 * attribute sets), their statements and the packed-pair reader (store_stacks.c explains the
 * formats). */
#ifndef PF_STORE_STACKS_INT_H
#define PF_STORE_STACKS_INT_H

#include "pf/array.h"
#include "store_int.h"

#define RES_MINUTE 60000
#define RES_HOUR 3600000
#define NS_PER_MS 1000000LL

enum stk_stmt {
	K_FIND_FRAME,
	K_ADD_FRAME,
	K_FIND_STACK,
	K_ADD_STACK,
	K_FIND_ATTRS,
	K_ADD_ATTRS,
	K_ADD_SAMPLES,
	K_ADD_SERIES,
	K_ROLLUP_GET,
	K_ROLLUP_ADD,
	K_ROLLUP_SET,
	K_TYPE_ADD,
	K_TYPE_UNIT,
	K_COUNT_BYTES,
	K_LOAD_FRAMES,
	K_LOAD_STACKS,
	K_LOAD_ATTRS,
	K_TYPES,
	K_SEL_ROLLUPS,
	K_SEL_ROLLUP_TOTALS,
	K_SEL_PROFILES,
	K_SEL_PROFILE_TOTALS,
	K_SEL_PROFILES_TRACE,
	K_SEL_SERIES,
	K_SEL_SERIES_TOTALS,
	K_SEL_SERIES_TRACE,
	K_SEL_LEGACY,
	K_SEL_LEGACY_TRACE,
	K_LEGACY_NEXT,
	K_SET_CONTENT,
	K_FIND_LOC,
	K_ADD_LOC,
	K_FIND_LSTACK,
	K_ADD_LSTACK,
	K_ADD_DETAIL,
	K_GET_DETAIL,
	K_GET_LSTACK,
	K_GET_LOC,
	K_BEGIN_READ,
	K_COMMIT,
	K__COUNT
};

/* Content bytes -> id, for what this connection has looked up already. */
struct seen {
	uint8_t *keys;
	size_t len, cap;
	struct seen_slot {
		uint64_t h;
		size_t off;
		uint32_t n;
		int64_t id;
	} *slots;
	size_t n, n_slots;
};

struct stack_entry {
	uint32_t off, n; /* into pool; n UINT32_MAX: not loaded */
};

struct attrset {
	size_t n;
	struct pf_profile_kv *kv; /* strings in the same allocation */
};

struct store_stacks {
	sqlite3_stmt *stmt[K__COUNT];
	struct seen frames, stacks, attrsets;
	struct seen locs, lstacks; /* store_details.c's */
	/* store_details.c's read cache: location and location-stack id -> bytes in dpool */
	struct dentry {
		uint32_t off, len; /* len UINT32_MAX: not read */
	} *dent[2];
	size_t n_dent[2];
	uint8_t *dpool;
	size_t dpool_len, dpool_cap;
	/* frame id -> name, kind */
	char **frame_name;
	uint8_t *frame_kind;
	size_t n_frame_cache;
	/* stack id -> frame ids */
	struct stack_entry *stack;
	size_t n_stack_cache;
	uint32_t *pool;
	size_t pool_len, pool_cap;
	/* attribute set id -> attributes, loaded up to attr_loaded */
	struct attrset *attr;
	size_t n_attr;
	int64_t attr_loaded;
	size_t cache_bytes;
	/* the types whose row has a unit */
	char types_known[16][64];
	size_t n_types_known;
};

extern const char *const stk_sql[K__COUNT];

sqlite3_stmt *kstmt(struct pf_store *st, enum stk_stmt id, int *rc);
void kreset(sqlite3_stmt **s);
#define KSTMT(name, st, id, rc) _cleanup_(kreset) sqlite3_stmt *name = kstmt((st), (id), (rc))
int get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v);
/* Calls cb for each pair of a packed array. -EBADMSG when it does not check out. */
int unpack_pairs(const void *blob, size_t len, int (*cb)(int64_t, uint64_t, void *), void *ud);
/* Attribute set id from the cache (read on a miss), NULL when there is none. */
const struct attrset *attr_get(struct pf_store *st, struct store_stacks *k, int64_t id);
struct store_stacks *stk_of(struct pf_store *st);
/* The id of content `key` in a content table (find, add): from seen, else looked up by its
 * hash, else inserted with bind_rest binding the columns after the hash. */
int intern_content(struct pf_store *st, struct seen *seen, enum stk_stmt find,
		   enum stk_stmt add, const void *key, size_t n,
		   int (*bind_rest)(sqlite3_stmt *s, const void *ctx), const void *ctx,
		   int64_t *id);
struct blob_ctx {
	const void *p;
	size_t n;
};
/* Drops store_details.c's read cache. */
void store_details_cache_drop(struct store_stacks *k);
/* bind_rest for a table whose second column is the key's bytes (ctx: struct blob_ctx). */
int bind_blob2(sqlite3_stmt *s, const void *ctx);

#endif
