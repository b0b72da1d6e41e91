/* views.c — see views.h. */
#include "views.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flame.h"
#include "pf/array.h"
#include "pf/compiler.h"
#include "profstore.h"

#define RES_MINUTE 60000
#define RES_HOUR 3600000
#define STOP 1 /* a callback's "enough" */

static void type_unit(struct pf_store *st, const char *type, char unit[32]);

/* ---- Merging */

struct acc {
	struct pf_store *st;
	struct pf_flame *fl;
	int slot;
	bool keep_legacy; /* legacy profiles' ids kept in legacy (for a second tree) */
	int64_t *legacy;
	size_t n_legacy, cap_legacy;
	struct pf_merge_stats *ms;
	uint64_t *val; /* stack id -> summed weight */
	size_t cap;
	int64_t *touched;
	size_t n_touched, cap_touched;
	int err;
};

static int acc_part(const struct pf_profile_part *p, void *ud)
{
	struct acc *a = ud;

	a->ms->parts++;
	a->ms->matched += (size_t)p->profiles;
	if (!p->legacy) {
		a->ms->merged += (size_t)p->profiles;
		return 0;
	}
	if (a->keep_legacy &&
	    pf_array_grow_fill(&a->legacy, &a->cap_legacy, a->n_legacy + 1, sizeof(*a->legacy),
			       0) < 0)
		return -ENOMEM;
	if (a->keep_legacy)
		a->legacy[a->n_legacy++] = p->profile;
	int rc = pf_profstore_merge(a->st, p->profile, a->fl, a->slot);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0)
		a->ms->failed++;
	else
		a->ms->merged++;
	return 0;
}

static int acc_pair(int64_t stack, uint64_t w, void *ud)
{
	struct acc *a = ud;

	if (stack <= 0 || stack > INT32_MAX || !w)
		return 0;
	if (pf_array_grow_fill(&a->val, &a->cap, (size_t)stack + 1, sizeof(*a->val), 0) < 0)
		return -ENOMEM;
	if (!a->val[stack]) {
		if (pf_array_grow_fill(&a->touched, &a->cap_touched, a->n_touched + 1,
				       sizeof(*a->touched), 0) < 0)
			return -ENOMEM;
		a->touched[a->n_touched++] = stack;
	}
	a->val[stack] += w;
	return 0;
}

static int cmp_i64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
	return a < b ? -1 : a > b;
}

/* Frame id -> the tree's name id and kind, resolved once per merge. */
struct fmap {
	uint32_t *name;
	uint8_t *kind;
	size_t cap, cap_k;
};

static int fmap_get(struct pf_store *st, struct pf_flame *fl, struct fmap *m, uint32_t fid,
		    uint32_t *name, uint8_t *kind)
{
	if (pf_array_grow_fill(&m->name, &m->cap, (size_t)fid + 1, sizeof(*m->name), 0xff) < 0 ||
	    pf_array_grow_fill(&m->kind, &m->cap_k, (size_t)fid + 1, 1, 0) < 0)
		return -ENOMEM;
	if (m->name[fid] == UINT32_MAX) {
		const char *s;
		uint8_t k;
		int rc = pf_store_frame_get(st, fid, &s, &k);
		if (rc < 0)
			return rc;
		rc = pf_flame_name(fl, s, strlen(s), &m->name[fid]);
		if (rc < 0)
			return rc;
		m->kind[fid] = k;
	}
	*name = m->name[fid];
	*kind = m->kind[fid];
	return 0;
}

/* Adds the summed stacks to fl, in stack id order. */
static int acc_tree(struct acc *a, struct pf_flame *fl)
{
	struct fmap m = {0};
	_cleanup_free_ uint32_t *ids = NULL, *names = NULL;
	_cleanup_free_ uint8_t *kinds = NULL;
	size_t cap = 0, cap_n = 0, cap_k = 0;
	int rc = 0;

	if (a->n_touched > 1)
		qsort(a->touched, a->n_touched, sizeof(*a->touched), cmp_i64);
	for (size_t i = 0; rc == 0 && i < a->n_touched; i++) {
		const uint32_t *fr;
		size_t n;
		rc = pf_store_stack_get(a->st, a->touched[i], &fr, &n);
		if (rc == -ENOENT) { /* a stack that is gone adds nothing */
			rc = 0;
			continue;
		}
		if (rc < 0)
			break;
		/* copied: resolving frames may drop the store's caches */
		if ((rc = pf_array_grow_fill(&ids, &cap, n, sizeof(*ids), 0)) < 0 ||
		    (rc = pf_array_grow_fill(&names, &cap_n, n, sizeof(*names), 0)) < 0 ||
		    (rc = pf_array_grow_fill(&kinds, &cap_k, n, 1, 0)) < 0)
			break;
		if (n)
			memcpy(ids, fr, n * sizeof(*ids));
		for (size_t j = 0; rc == 0 && j < n; j++)
			rc = fmap_get(a->st, fl, &m, ids[j], &names[j], &kinds[j]);
		if (rc == 0)
			rc = pf_flame_add_path(fl, names, kinds, n, a->val[a->touched[i]], a->slot);
	}
	free(m.name);
	free(m.kind);
	return rc;
}

int pf_views_merge_both(struct pf_store *st, const struct pf_profile_filter *f,
			struct pf_flame *fl, struct pf_flame *full, int slot,
			struct pf_merge_stats *ms)
{
	struct acc a = {.st = st, .fl = fl, .slot = slot, .ms = ms, .keep_legacy = full != NULL};
	struct pf_profile_select sel = {.flags = PF_PROFSEL_PAIRS, .max_res_ms = RES_HOUR,
					.part_cb = acc_part, .pair_cb = acc_pair, .ud = &a};

	memset(ms, 0, sizeof(*ms));
	int rc = pf_store_profiles_select(st, f, &sel);
	if (rc == 0)
		rc = acc_tree(&a, fl);
	/* full as pf_views_merge() would fill it: the legacy profiles, then the stacks */
	if (rc == 0 && full && pf_flame_truncated(fl)) {
		for (size_t i = 0; rc == 0 && i < a.n_legacy; i++)
			if ((rc = pf_profstore_merge(st, a.legacy[i], full, slot)) != -ENOMEM)
				rc = 0; /* counted failed already */
		if (rc == 0)
			rc = acc_tree(&a, full);
	}
	free(a.val);
	free(a.touched);
	free(a.legacy);
	if (f->type && *f->type)
		type_unit(st, f->type, ms->unit);
	return rc;
}

int pf_views_merge(struct pf_store *st, const struct pf_profile_filter *f, struct pf_flame *fl,
		   int slot, struct pf_merge_stats *ms)
{
	return pf_views_merge_both(st, f, fl, NULL, slot, ms);
}

struct idlist {
	int64_t *ids;
	size_t n, cap;
};

static int ids_cb(const struct pf_profile_row *r, void *ud)
{
	struct idlist *l = ud;
	if (pf_array_grow_fill(&l->ids, &l->cap, l->n + 1, sizeof(*l->ids), 0) < 0)
		return -ENOMEM;
	l->ids[l->n++] = r->id;
	return 0;
}

int pf_views_merge_profiles(struct pf_store *st, const struct pf_profile_filter *f,
			    struct pf_flame *fl, int slot, struct pf_merge_stats *ms)
{
	struct idlist l = {0};
	struct pf_profile_filter g = *f;

	memset(ms, 0, sizeof(*ms));
	g.limit = 0;
	int rc = pf_store_profiles_foreach(st, &g, ids_cb, &l);
	ms->matched = l.n;
	for (size_t i = 0; rc == 0 && i < l.n; i++) {
		rc = pf_profstore_merge(st, l.ids[i], fl, slot);
		if (rc == -ENOMEM)
			break;
		if (rc < 0) {
			ms->failed++;
			rc = 0;
			continue;
		}
		ms->merged++;
	}
	ms->parts = l.n;
	free(l.ids);
	return rc;
}

/* ---- Timeline */

struct tl {
	int64_t from, step;
	size_t n;
	int64_t *points;
};

static int tl_part(const struct pf_profile_part *p, void *ud)
{
	struct tl *t = ud;
	if (p->start_ms < t->from)
		return 0;
	uint64_t i = (uint64_t)(p->start_ms - t->from) / (uint64_t)t->step;
	if (i < t->n)
		t->points[i] += p->total;
	return 0;
}

int pf_views_timeline(struct pf_store *st, const struct pf_profile_filter *f, int64_t from_ms,
		      int64_t step_ms, size_t n, int64_t *points, char unit[32])
{
	struct tl t = {from_ms, step_ms, n, points};
	/* a rollup must fall into one step: its slots aligned with the steps */
	int64_t res = from_ms % RES_HOUR == 0 && step_ms % RES_HOUR == 0	   ? RES_HOUR
		      : from_ms % RES_MINUTE == 0 && step_ms % RES_MINUTE == 0 ? RES_MINUTE
									     : 0;
	struct pf_profile_select sel = {.max_res_ms = res, .part_cb = tl_part, .ud = &t};

	if (step_ms <= 0)
		return -EINVAL;
	memset(points, 0, n * sizeof(*points));
	unit[0] = 0;
	if (f->type && *f->type)
		type_unit(st, f->type, unit);
	return pf_store_profiles_select(st, f, &sel);
}

/* ---- Labels */

/* A set of strings: open addressing over malloc'd copies. */
struct strset {
	char **s;
	size_t n, cap;
};

static uint64_t str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	while (*s)
		h = (h ^ (uint8_t)*s++) * 1099511628211ull;
	return h;
}

static int strset_add(struct strset *ss, const char *s)
{
	if ((ss->n + 1) * 2 >= ss->cap) {
		size_t cap = ss->cap ? ss->cap * 2 : 64;
		char **t = calloc(cap, sizeof(*t));
		if (!t)
			return -ENOMEM;
		for (size_t i = 0; i < ss->cap; i++) {
			if (!ss->s[i])
				continue;
			size_t j = str_hash(ss->s[i]) & (cap - 1);
			while (t[j])
				j = (j + 1) & (cap - 1);
			t[j] = ss->s[i];
		}
		free(ss->s);
		ss->s = t;
		ss->cap = cap;
	}
	size_t j = str_hash(s) & (ss->cap - 1);
	for (; ss->s[j]; j = (j + 1) & (ss->cap - 1))
		if (strcmp(ss->s[j], s) == 0)
			return 0;
	if (!(ss->s[j] = strdup(s)))
		return -ENOMEM;
	ss->n++;
	return 0;
}

struct lab {
	uint8_t *seen; /* attribute set ids */
	size_t cap;
	int64_t *sets;
	size_t n_sets, cap_sets;
};

static int lab_part(const struct pf_profile_part *p, void *ud)
{
	struct lab *l = ud;
	if (p->attrset <= 0 || p->attrset > INT32_MAX)
		return 0;
	if (pf_array_grow_fill(&l->seen, &l->cap, (size_t)p->attrset + 1, 1, 0) < 0)
		return -ENOMEM;
	if (l->seen[p->attrset])
		return 0;
	l->seen[p->attrset] = 1;
	if (pf_array_grow_fill(&l->sets, &l->cap_sets, l->n_sets + 1, sizeof(*l->sets), 0) < 0)
		return -ENOMEM;
	l->sets[l->n_sets++] = p->attrset;
	return 0;
}

struct lab_collect {
	struct strset *ss;
	const char *name;
};

static int lab_kv(const char *key, const char *value, void *ud)
{
	struct lab_collect *c = ud;
	if (!c->name)
		return strset_add(c->ss, key);
	return strcmp(key, c->name) == 0 ? strset_add(c->ss, value) : 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void pf_views_strings_free(char **s, size_t n)
{
	for (size_t i = 0; s && i < n; i++)
		free(s[i]);
	free(s);
}

int pf_views_labels(struct pf_store *st, const struct pf_profile_filter *f, const char *name,
		    size_t max, char ***out, size_t *n, bool *more)
{
	struct lab l = {0};
	struct strset ss = {0};
	struct pf_profile_select sel = {.max_res_ms = RES_HOUR, .part_cb = lab_part, .ud = &l};
	struct lab_collect c = {&ss, name};

	*out = NULL;
	*n = 0;
	*more = false;
	int rc = pf_store_profiles_select(st, f, &sel);
	for (size_t i = 0; rc == 0 && i < l.n_sets; i++) {
		rc = pf_store_attrset_foreach(st, l.sets[i], lab_kv, &c);
		if (rc == -ENOENT)
			rc = 0;
	}
	free(l.seen);
	free(l.sets);
	char **arr = NULL;
	size_t m = 0;
	if (rc == 0 && !(arr = malloc((ss.n ? ss.n : 1) * sizeof(*arr))))
		rc = -ENOMEM;
	for (size_t i = 0; i < ss.cap; i++) {
		if (!ss.s[i])
			continue;
		if (arr)
			arr[m++] = ss.s[i];
		else
			free(ss.s[i]);
	}
	free(ss.s);
	if (rc < 0) {
		pf_views_strings_free(arr, m);
		return rc;
	}
	if (m > 1)
		qsort(arr, m, sizeof(*arr), cmp_str);
	if (m > max) {
		for (size_t i = max; i < m; i++)
			free(arr[i]);
		m = max;
		*more = true;
	}
	*out = arr;
	*n = m;
	return 0;
}

/* ---- Types */

struct types {
	char **t, **u;
	size_t n, cap, cap_u;
	int err;
};

static int types_cb(const char *type, const char *unit, void *ud)
{
	struct types *t = ud;
	if (pf_array_grow_fill(&t->t, &t->cap, t->n + 1, sizeof(char *), 0) < 0 ||
	    pf_array_grow_fill(&t->u, &t->cap_u, t->n + 1, sizeof(char *), 0) < 0)
		return -ENOMEM;
	t->t[t->n] = strdup(type);
	t->u[t->n] = strdup(pf_profstore_unit_guess(type, unit));
	t->n++;
	return t->t[t->n - 1] && t->u[t->n - 1] ? 0 : -ENOMEM;
}

static int any_part(const struct pf_profile_part *p, void *ud)
{
	(void)p;
	*(bool *)ud = true;
	return STOP;
}

struct unit_find {
	const char *type;
	char *unit;
};

static int unit_cb(const char *type, const char *unit, void *ud)
{
	struct unit_find *u = ud;
	if (strcmp(type, u->type) != 0)
		return 0;
	snprintf(u->unit, 32, "%s", unit);
	return STOP;
}

static void type_unit(struct pf_store *st, const char *type, char unit[32])
{
	char stored[32] = "";
	struct unit_find u = {type, stored};
	pf_store_profile_types(st, unit_cb, &u);
	snprintf(unit, 32, "%s", pf_profstore_unit_guess(type, stored));
}

int pf_views_types(struct pf_store *st, const struct pf_profile_filter *f, char ***types,
		   char ***units, size_t *n)
{
	struct types t = {0};
	int rc = pf_store_profile_types(st, types_cb, &t);
	size_t m = 0;

	for (size_t i = 0; rc == 0 && i < t.n; i++) {
		struct pf_profile_filter g = *f;
		bool any = false;
		struct pf_profile_select sel = {.max_res_ms = RES_HOUR, .part_cb = any_part,
						.ud = &any};
		g.type = t.t[i];
		rc = pf_store_profiles_select(st, &g, &sel);
		if (rc == STOP)
			rc = 0;
		if (any) {
			char *a = t.t[m], *b = t.u[m];
			t.t[m] = t.t[i];
			t.u[m] = t.u[i];
			t.t[i] = a;
			t.u[i] = b;
			m++;
		}
	}
	for (size_t i = m; i < t.n; i++) {
		free(t.t[i]);
		free(t.u[i]);
	}
	if (rc < 0) {
		pf_views_strings_free(t.t, m);
		pf_views_strings_free(t.u, m);
		return rc;
	}
	*types = t.t;
	*units = t.u;
	*n = m;
	return 0;
}
