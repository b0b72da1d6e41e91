/* store_select.c — the profile store's selection (store.h pf_store_profiles_select): whole
 * rollups where a range covers their slots, single profiles elsewhere, profiles stored before
 * schema 12 from their metadata; and the conversion of those (pf_store_profiles_convert). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pf/compiler.h"
#include "store_int.h"
#include "store_stacks_int.h"

/* ---- Selection. */

struct sel_run {
	struct pf_store *st;
	struct store_stacks *k;
	const struct pf_profile_filter *f;
	const struct pf_profile_select *sel;
	const char *type;
	uint8_t *verdict; /* per attribute set: 0 not decided, 1 in, 2 out */
	size_t n_verdict;
};

/* The filters that test resource attributes: the field of the filter and its key. */
static const struct {
	size_t off;
	const char *key;
} attr_filters[] = {
    {offsetof(struct pf_profile_filter, service), "service.name"},
    {offsetof(struct pf_profile_filter, agent), "profleet.agent.uid"},
    {offsetof(struct pf_profile_filter, capture_id), "profleet.capture.id"},
    {offsetof(struct pf_profile_filter, trigger), "profleet.trigger"},
    {offsetof(struct pf_profile_filter, namespace_name), "k8s.namespace.name"},
    {offsetof(struct pf_profile_filter, pod), "k8s.pod.name"},
    {offsetof(struct pf_profile_filter, container), "k8s.container.name"},
};

static const char *filter_field(const struct pf_profile_filter *f, size_t i)
{
	return *(const char *const *)((const char *)f + attr_filters[i].off);
}

static const char *attr_value(const struct attrset *a, const char *key)
{
	size_t lo = 0, hi = a->n;
	while (lo < hi) { /* sorted by key */
		size_t mid = (lo + hi) / 2;
		int c = strcmp(a->kv[mid].key, key);
		if (!c)
			return a->kv[mid].value;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static bool attrs_match(const struct pf_profile_filter *f, const struct attrset *a)
{
	for (size_t i = 0; i < PF_ARRAY_SIZE(attr_filters); i++) {
		const char *want = filter_field(f, i), *v;
		if (!want || !*want)
			continue;
		v = attr_value(a, attr_filters[i].key);
		if (!v || strcmp(v, want) != 0)
			return false;
	}
	for (size_t i = 0; i < f->n_match; i++) {
		const char *v = attr_value(a, f->match[i].key);
		if (!v || strcmp(v, f->match[i].value) != 0)
			return false;
	}
	return true;
}

static int sel_in(struct sel_run *r, int64_t attrset, bool *in)
{
	if (attrset <= 0 || attrset > INT32_MAX) {
		*in = false;
		return 0;
	}
	if ((size_t)attrset >= r->n_verdict) {
		size_t n = r->n_verdict;
		if (pf_array_grow_fill(&r->verdict, &n, (size_t)attrset + 1, 1, 0) < 0)
			return -ENOMEM;
		r->n_verdict = n;
	}
	if (!r->verdict[attrset]) {
		const struct attrset *a = attr_get(r->st, r->k, attrset);
		r->verdict[attrset] = a && attrs_match(r->f, a) ? 1 : 2;
	}
	*in = r->verdict[attrset] == 1;
	return 0;
}

static int sel_deliver(struct sel_run *r, const struct pf_profile_part *part, const void *data,
		       size_t len)
{
	int rc = r->sel->part_cb ? r->sel->part_cb(part, r->sel->ud) : 0;
	if (rc || !(r->sel->flags & PF_PROFSEL_PAIRS) || !r->sel->pair_cb || part->legacy)
		return rc;
	rc = unpack_pairs(data, len, r->sel->pair_cb, r->sel->ud);
	return rc == -EBADMSG ? 0 : rc; /* a damaged array adds nothing */
}

/* Delivers part when its attrset is selected, with the packed pairs in column col of s (when
 * pairs are asked for). 0, a callback's non-zero return, or a negative errno. */
static int sel_offer(struct sel_run *r, const struct pf_profile_part *part, sqlite3_stmt *s,
		     int col)
{
	bool in;
	int rc = sel_in(r, part->attrset, &in);
	if (rc < 0 || !in)
		return rc;
	bool pairs = r->sel->flags & PF_PROFSEL_PAIRS;
	return sel_deliver(r, part, pairs ? sqlite3_column_blob(s, col) : NULL,
			   pairs ? (size_t)sqlite3_column_bytes(s, col) : 0);
}

static int sel_rollups(struct sel_run *r, int64_t res, int64_t lo_ms, int64_t hi_ms)
{
	bool pairs = r->sel->flags & PF_PROFSEL_PAIRS;
	int rc;
	KSTMT(s, r->st, pairs ? K_SEL_ROLLUPS : K_SEL_ROLLUP_TOTALS, &rc);

	if (!s)
		return rc;
	if (sqlite3_bind_text(s, 1, r->type, -1, SQLITE_STATIC) || sqlite3_bind_int64(s, 2, lo_ms) ||
	    sqlite3_bind_int64(s, 3, hi_ms) || sqlite3_bind_int64(s, 4, res))
		return store_fail_sqlite(r->st, NULL, "profiles: select: bind");
	while ((rc = store_step_row(r->st, s, 0, "profiles: select rollups")) == 1) {
		struct pf_profile_part part = {
		    .start_ms = sqlite3_column_int64(s, 0), .res_ms = res,
		    .attrset = sqlite3_column_int64(s, 1), .profiles = sqlite3_column_int64(s, 2),
		    .total = sqlite3_column_int64(s, 3), .type = r->type, .unit = ""};
		if ((rc = sel_offer(r, &part, s, 4)) != 0)
			return rc;
	}
	return rc;
}

static int bind_range(struct sel_run *r, sqlite3_stmt *s, int64_t a, int64_t b)
{
	if (sqlite3_bind_text(s, 1, r->type, -1, SQLITE_STATIC) || sqlite3_bind_int64(s, 2, a) ||
	    sqlite3_bind_int64(s, 3, b) ||
	    (r->f->has_trace && sqlite3_bind_blob(s, 4, r->f->trace_id, 16, SQLITE_STATIC)))
		return store_fail_sqlite(r->st, NULL, "profiles: select: bind");
	return 0;
}

/* Single parts of [a, b) from statement id (profiles, or series: the same columns). */
static int sel_singles(struct sel_run *r, enum stk_stmt id, int64_t a, int64_t b)
{
	int rc;
	KSTMT(s, r->st, id, &rc);

	if (!s)
		return rc;
	if ((rc = bind_range(r, s, a, b)) < 0)
		return rc;
	while ((rc = store_step_row(r->st, s, 0, "profiles: select profiles")) == 1) {
		const char *u = (const char *)sqlite3_column_text(s, 4);
		struct pf_profile_part part = {
		    .profile = sqlite3_column_int64(s, 0),
		    .start_ms = sqlite3_column_int64(s, 1) / NS_PER_MS,
		    .attrset = sqlite3_column_int64(s, 2), .profiles = 1,
		    .total = sqlite3_column_int64(s, 3), .type = r->type, .unit = u ? u : ""};
		if ((rc = sel_offer(r, &part, s, 5)) != 0)
			return rc;
	}
	return rc;
}

/* The profiles of the type in [a, b), and the series of that type of other profiles. */
static int sel_profiles(struct sel_run *r, int64_t a, int64_t b)
{
	bool pairs = r->sel->flags & PF_PROFSEL_PAIRS, trace = r->f->has_trace;
	int rc = sel_singles(r,
			     trace   ? K_SEL_PROFILES_TRACE
			     : pairs ? K_SEL_PROFILES
				     : K_SEL_PROFILE_TOTALS,
			     a, b);
	if (rc == 0)
		rc = sel_singles(r,
				 trace	 ? K_SEL_SERIES_TRACE
				 : pairs ? K_SEL_SERIES
					 : K_SEL_SERIES_TOTALS,
				 a, b);
	return rc;
}

/* Profiles stored before schema 12 and not converted yet: the column filters. */
static int sel_legacy(struct sel_run *r, int64_t a, int64_t b)
{
	int rc;
	KSTMT(s, r->st, r->f->has_trace ? K_SEL_LEGACY_TRACE : K_SEL_LEGACY, &rc);

	if (!s)
		return rc;
	if (r->f->n_match)
		return 0;
	if ((rc = bind_range(r, s, a, b)) < 0)
		return rc;
	while ((rc = store_step_row(r->st, s, 0, "profiles: select legacy")) == 1) {
		/* columns 5..11 in attr_filters' order */
		static const int col[] = {5, 6, 10, 11, 7, 8, 9};
		bool in = true;
		for (size_t i = 0; in && i < PF_ARRAY_SIZE(attr_filters); i++) {
			const char *want = filter_field(r->f, i);
			const char *v = (const char *)sqlite3_column_text(s, col[i]);
			in = !want || !*want || (v && strcmp(v, want) == 0);
		}
		if (!in)
			continue;
		const char *u = (const char *)sqlite3_column_text(s, 4);
		struct pf_profile_part part = {
		    .profile = sqlite3_column_int64(s, 0),
		    .start_ms = sqlite3_column_int64(s, 1) / NS_PER_MS, .profiles = 1,
		    .total = sqlite3_column_int64(s, 3), .type = r->type, .unit = u ? u : "",
		    .legacy = true};
		rc = sel_deliver(r, &part, NULL, 0);
		if (rc)
			return rc;
	}
	return rc;
}

static const int64_t levels[] = {RES_HOUR, RES_MINUTE};

/* [a, b) in ns: whole slots of levels[li] from rollups, the rest at finer levels. */
static int sel_range(struct sel_run *r, int64_t a, int64_t b, size_t li)
{
	if (a >= b)
		return 0;
	while (li < PF_ARRAY_SIZE(levels) &&
	       (levels[li] > r->sel->max_res_ms || r->f->has_trace))
		li++;
	if (li == PF_ARRAY_SIZE(levels))
		return sel_profiles(r, a, b);
	int64_t R = levels[li] * NS_PER_MS;
	int64_t lo = a / R + (a % R != 0), hi = b / R;
	if (lo >= hi)
		return sel_range(r, a, b, li + 1);
	int rc = sel_range(r, a, lo * R, li + 1);
	if (rc == 0)
		rc = sel_rollups(r, levels[li], lo * levels[li], hi * levels[li]);
	if (rc == 0)
		rc = sel_range(r, hi * R, b, li + 1);
	return rc;
}

struct type_list {
	char (*t)[64];
	size_t n;
};

static int type_cb(const char *type, const char *unit, void *ud)
{
	struct type_list *l = ud;
	(void)unit;
	if (strlen(type) >= 64 || l->n >= 256)
		return 0;
	snprintf(l->t[l->n++], 64, "%s", type);
	return 0;
}

int pf_store_profiles_select(struct pf_store *st, const struct pf_profile_filter *f,
			     const struct pf_profile_select *sel)
{
	struct store_stacks *k = stk_of(st);
	char types[256][64];
	struct type_list tl = {types, 0};
	int64_t a, b;
	int rc;

	if (!f || !sel)
		return -EINVAL;
	if (!k)
		return -ENOMEM;
	if (f->n_match && !f->match)
		return -EINVAL;
	a = f->from_ns > 0 ? f->from_ns : 0;
	b = f->to_ns > 0 ? f->to_ns : INT64_MAX;
	bool tx = sqlite3_get_autocommit(st->db);
	if (tx) {
		KSTMT(s, st, K_BEGIN_READ, &rc);
		if (!s)
			return rc;
		if ((rc = store_step_done(st, s, "profiles: select: begin")) < 0)
			return rc;
	}
	struct sel_run r = {.st = st, .k = k, .f = f, .sel = sel};
	if (f->type && *f->type) {
		snprintf(types[0], sizeof(types[0]), "%s", f->type);
		tl.n = 1;
		rc = 0;
	} else {
		rc = pf_store_profile_types(st, type_cb, &tl);
	}
	for (size_t i = 0; rc == 0 && i < tl.n; i++) {
		r.type = types[i];
		rc = sel_range(&r, a, b, 0);
		if (rc == 0)
			rc = sel_legacy(&r, a, b);
	}
	free(r.verdict);
	if (tx) {
		KSTMT(s, st, K_COMMIT, &rc);
		if (s)
			store_step_done(st, s, "profiles: select: end");
	}
	return rc;
}

/* ---- Conversion of profiles stored before schema 12. */

static int exec(struct pf_store *st, const char *sql)
{
	if (sqlite3_exec(st->db, sql, NULL, NULL, NULL) != SQLITE_OK)
		return store_fail_sqlite(st, NULL, "profiles: convert");
	return 0;
}

/* attrset > 0: the content stored, with row's type and samples; else none (-1). */
static int set_content(struct pf_store *st, const struct pf_profile_row *row, int64_t attrset)
{
	int rc;
	KSTMT(s, st, K_SET_CONTENT, &rc);

	if (!s)
		return rc;
	bool in = attrset > 0 && row->type;
	if (sqlite3_bind_int64(s, 1, row->id) || sqlite3_bind_int64(s, 2, attrset) ||
	    sqlite3_bind_text(s, 3, row->unit ? row->unit : "", -1, SQLITE_STATIC) ||
	    (in ? sqlite3_bind_text(s, 4, row->type, -1, SQLITE_STATIC)
		: sqlite3_bind_null(s, 4)) ||
	    sqlite3_bind_int64(s, 5, in ? row->samples : -1))
		return store_fail_sqlite(st, NULL, "profiles: convert: bind");
	return store_step_done(st, s, "profiles: convert: set");
}

/* One profile, inside the caller's transaction: 1 converted, 0 none left. */
static int convert_one(struct pf_store *st, const struct pf_profile_converter *c)
{
	struct pf_profile_row row = {0};
	char type[256];
	int rc;

	{
		KSTMT(s, st, K_LEGACY_NEXT, &rc);
		if (!s)
			return rc;
		rc = store_step_row(st, s, 0, "profiles: convert: next");
		if (rc <= 0)
			return rc;
		row.id = sqlite3_column_int64(s, 0);
	}
	rc = c->fill(c->ud, st, row.id, &row);
	if (rc < 0 && rc != -EBADMSG) {
		c->done(c->ud, &row);
		return rc;
	}
	if (rc == 0 && row.type) {
		snprintf(type, sizeof(type), "%s", row.type);
		row.type = type;
	}
	if (rc == 0 && row.n_stacks && row.type)
		rc = store_stacks_prepare(st, &row);
	if (rc == 0 && row.attrset > 0)
		rc = store_stacks_insert(st, &row);
	if (rc == 0 || rc == -EBADMSG)
		rc = set_content(st, &row, row.attrset > 0 ? row.attrset : -1);
	c->done(c->ud, &row);
	return rc < 0 ? rc : 1;
}

int pf_store_profiles_convert(struct pf_store *st, size_t max_rows,
			      const struct pf_profile_converter *c, size_t *converted)
{
	size_t n = 0;
	int rc = 0;

	if (converted)
		*converted = 0;
	if (!c || !c->fill || !c->done)
		return -EINVAL;
	while (n < max_rows) {
		if ((rc = exec(st, "BEGIN IMMEDIATE")) < 0)
			return rc;
		rc = convert_one(st, c);
		if (rc < 0) {
			exec(st, "ROLLBACK");
			return rc;
		}
		if (exec(st, "COMMIT") < 0) {
			exec(st, "ROLLBACK");
			return -EIO;
		}
		if (rc == 0)
			return 0;
		n++;
		if (converted)
			*converted = n;
	}
	return 1;
}
