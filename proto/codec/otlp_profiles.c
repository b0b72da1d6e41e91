/* otlp_profiles.c — see otlp_profiles.h.
 *
 * Encoding: every dictionary entry is built as a protobuf-c message in a throw-away pool,
 * packed into a scratch buffer and interned by those bytes (protobuf-c packs fields in a fixed
 * order, so equal messages give equal bytes). Each intern table is seeded with the empty key,
 * so the zero message is index 0 of every table (ProfilesDictionary comments in
 * profiles.proto v1.11.0: "index 0 ... must be a zero value"). Per process, the window's
 * mapping/frame/stack indices are translated once through caches.
 *
 * Decoding: wire scan for depth, capped unpack, then two passes per Profile: the first marks
 * (and range-checks) every dictionary entry the samples reach and numbers them densely, the
 * second copies them into the window's arena. */
#include "otlp_profiles.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pf/compiler.h"
#include "pf/hash.h"
#include "pb_util.h"

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "opentelemetry/proto/common/v1/common.pb-c.h"
#include "opentelemetry/proto/profiles/v1development/profiles.pb-c.h"
#include "opentelemetry/proto/resource/v1/resource.pb-c.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
	pb_request;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary pb_dict;
typedef Opentelemetry__Proto__Profiles__V1development__ResourceProfiles pb_resource_profiles;
typedef Opentelemetry__Proto__Profiles__V1development__ScopeProfiles pb_scope_profiles;
typedef Opentelemetry__Proto__Profiles__V1development__Profile pb_profile;
typedef Opentelemetry__Proto__Profiles__V1development__Link pb_link;
typedef Opentelemetry__Proto__Profiles__V1development__ValueType pb_value_type;
typedef Opentelemetry__Proto__Profiles__V1development__Sample pb_sample;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping pb_mapping;
typedef Opentelemetry__Proto__Profiles__V1development__Stack pb_stack;
typedef Opentelemetry__Proto__Profiles__V1development__Location pb_location;
typedef Opentelemetry__Proto__Profiles__V1development__Line pb_line;
typedef Opentelemetry__Proto__Profiles__V1development__Function pb_function;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit pb_kvu;
typedef Opentelemetry__Proto__Resource__V1__Resource pb_resource;
typedef Opentelemetry__Proto__Common__V1__AnyValue pb_anyvalue;
typedef Opentelemetry__Proto__Common__V1__KeyValue pb_kv;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope pb_scope;

#define ANY_STRING OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE
#define ANY_BOOL OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE
#define ANY_INT OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE
#define ANY_DOUBLE OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE
#define ANY_STRINDEX OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX

/* ---------------------------------------------------------------------------------------- */
/* Encoder.                                                                                  */

enum { T_STR, T_ATTR, T_MAP, T_FN, T_LOC, T_LINK, T_STACK, T_COUNT };

/* Per-process translation caches, -1 = not yet interned. */
struct proc_cache {
	int32_t *map, *loc, *stack;
};

struct enc {
	struct proc_cache cache;
	struct pb_pool pool;
	struct pf_buf scratch;
	struct pb_intern it[T_COUNT];
	struct pb_ptrs tab[T_COUNT];
	struct pf_error *err;
};

static void proc_cache_release(struct proc_cache *c);

static void enc_release(struct enc *e)
{
	proc_cache_release(&e->cache);
	for (int i = 0; i < T_COUNT; i++) {
		pb_intern_release(&e->it[i]);
		free(e->tab[i].v);
	}
	pf_buf_release(&e->scratch);
	pb_pool_release(&e->pool);
}

/* Seeds every table with its zero value at index 0. */
static int enc_init(struct enc *e, struct pf_error *err)
{
	static const pb_mapping zmap = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__MAPPING__INIT;
	static const pb_function zfn = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__FUNCTION__INIT;
	static const pb_location zloc = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LOCATION__INIT;
	static const pb_link zlink = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LINK__INIT;
	static const pb_stack zstack = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__STACK__INIT;
	static const pb_kvu zattr =
		OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__KEY_VALUE_AND_UNIT__INIT;
	const void *zero[T_COUNT] = {"", &zattr, &zmap, &zfn, &zloc, &zlink, &zstack};
	const size_t size[T_COUNT] = {1, sizeof(zattr), sizeof(zmap), sizeof(zfn), sizeof(zloc),
				       sizeof(zlink), sizeof(zstack)};

	memset(e, 0, sizeof(*e));
	e->err = err;
	pf_buf_init(&e->scratch, SIZE_MAX / 4);
	for (int i = 0; i < T_COUNT; i++) {
		pb_intern_init(&e->it[i], 0);
		int32_t idx;
		void *z = pb_pool_alloc(&e->pool, size[i]);
		if (!z)
			return -ENOMEM;
		memcpy(z, zero[i], size[i]);
		int r = pb_intern(&e->it[i], "", 0, &idx, NULL);
		if (r == 0)
			r = pb_ptrs_push(&e->tab[i], z);
		if (r < 0)
			return r;
	}
	return 0;
}

static int enc_str(struct enc *e, const char *s, int32_t *idx)
{
	return pb_intern_str(&e->it[T_STR], &e->tab[T_STR], &e->pool, s, idx);
}

/* Interns msg (allocated in the pool) into table t by its packed bytes. */
static int enc_msg(struct enc *e, int t, ProtobufCMessage *msg, int32_t *idx)
{
	bool added;
	int r = pb_intern_packed(&e->it[t], &e->scratch, msg, idx, &added);
	if (r < 0 || !added)
		return r;
	return pb_ptrs_push(&e->tab[t], msg);
}

/* An attribute key = string value (sval != NULL) or int value ival, with an optional unit. */
static int enc_attr_unit(struct enc *e, const char *key, const char *sval, int64_t ival,
			 const char *unit, int32_t *idx)
{
	pb_kvu *a = pb_pool_alloc(&e->pool, sizeof(*a));
	pb_anyvalue *v = pb_pool_alloc(&e->pool, sizeof(*v));
	if (!a || !v)
		return -ENOMEM;
	*a = (pb_kvu)OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__KEY_VALUE_AND_UNIT__INIT;
	*v = (pb_anyvalue)OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
	if (sval) {
		v->value_case = ANY_STRING;
		v->string_value = pb_pool_strdup(&e->pool, sval);
		if (!v->string_value)
			return -ENOMEM;
	} else {
		v->value_case = ANY_INT;
		v->int_value = ival;
	}
	a->value = v;
	int r = enc_str(e, key, &a->key_strindex);
	if (r == 0)
		r = enc_str(e, unit, &a->unit_strindex);
	return r < 0 ? r : enc_msg(e, T_ATTR, &a->base, idx);
}

static int enc_attr(struct enc *e, const char *key, const char *sval, int64_t ival,
		    int32_t *idx)
{
	return enc_attr_unit(e, key, sval, ival, NULL, idx);
}

static int enc_mapping(struct enc *e, const struct pf_prof_mapping *m, int32_t *idx)
{
	pb_mapping *pm = pb_pool_alloc(&e->pool, sizeof(*pm));
	if (!pm)
		return -ENOMEM;
	*pm = (pb_mapping)OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__MAPPING__INIT;
	pm->memory_start = m->start;
	pm->memory_limit = m->limit;
	pm->file_offset = m->offset;
	int r = enc_str(e, m->path, &pm->filename_strindex);
	if (r < 0)
		return r;
	if (m->build_id && *m->build_id) {
		pm->attribute_indices = pb_pool_alloc(&e->pool, sizeof(int32_t));
		if (!pm->attribute_indices)
			return -ENOMEM;
		pm->n_attribute_indices = 1;
		r = enc_attr(e, "process.executable.build_id.gnu", m->build_id, 0,
			     &pm->attribute_indices[0]);
		if (r < 0)
			return r;
	}
	return enc_msg(e, T_MAP, &pm->base, idx);
}

/* One Line of a Location: its Function (name, system name, file) and line number. */
static int enc_line(struct enc *e, const char *name, const char *system_name, const char *file,
		    uint32_t line, pb_line **out)
{
	pb_function *fn = pb_pool_alloc(&e->pool, sizeof(*fn));
	pb_line *ln = pb_pool_alloc(&e->pool, sizeof(*ln));
	if (!fn || !ln)
		return -ENOMEM;
	*fn = (pb_function)OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__FUNCTION__INIT;
	*ln = (pb_line)OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LINE__INIT;
	int r = enc_str(e, name, &fn->name_strindex);
	if (r == 0)
		r = enc_str(e, system_name && *system_name ? system_name : name,
			    &fn->system_name_strindex);
	if (r == 0)
		r = enc_str(e, file, &fn->filename_strindex);
	if (r == 0)
		r = enc_msg(e, T_FN, &fn->base, &ln->function_index);
	if (r < 0)
		return r;
	ln->line = line;
	*out = ln;
	return 0;
}

static int enc_location(struct enc *e, const struct pf_prof_frame *f, int32_t map_idx,
			int32_t *idx)
{
	pb_location *l = pb_pool_alloc(&e->pool, sizeof(*l));
	int32_t *ai = pb_pool_alloc(&e->pool, sizeof(int32_t));
	if (!l || !ai)
		return -ENOMEM;
	*l = (pb_location)OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LOCATION__INIT;
	l->mapping_index = map_idx;
	l->address = f->address;
	int r = enc_attr(e, "profile.frame.type", pf_frame_kind_name(f->kind), 0, ai);
	if (r < 0)
		return r;
	l->attribute_indices = ai;
	l->n_attribute_indices = 1;
	if (f->function && *f->function) {
		/* Inlined functions first, the function they were inlined into last (OTLP's
		 * Location.lines order). Inlined entries without a name are left out. */
		size_t n = 0;
		pb_line **lines = pb_pool_alloc(&e->pool, (f->n_inlined + 1) * sizeof(*lines));
		if (!lines)
			return -ENOMEM;
		for (uint32_t k = 0; k < f->n_inlined && f->inlined; k++) {
			const struct pf_prof_inline *in = &f->inlined[k];
			if (!in->function || !*in->function)
				continue;
			r = enc_line(e, in->function, in->system_name, in->file, in->line, &lines[n]);
			if (r < 0)
				return r;
			n++;
		}
		r = enc_line(e, f->function, f->system_name, f->file, f->line, &lines[n]);
		if (r < 0)
			return r;
		l->lines = lines;
		l->n_lines = n + 1;
	}
	return enc_msg(e, T_LOC, &l->base, idx);
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static int enc_link(struct enc *e, const struct pf_prof_sample *s, int32_t *idx)
{
	if (all_zero(s->trace_id, 16)) {
		*idx = 0;
		return 0;
	}
	pb_link *l = pb_pool_alloc(&e->pool, sizeof(*l));
	uint8_t *ids = pb_pool_alloc(&e->pool, 24);
	if (!l || !ids)
		return -ENOMEM;
	*l = (pb_link)OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LINK__INIT;
	memcpy(ids, s->trace_id, 16);
	memcpy(ids + 16, s->span_id, 8);
	l->trace_id.data = ids;
	l->trace_id.len = 16;
	l->span_id.data = ids + 16;
	l->span_id.len = 8;
	return enc_msg(e, T_LINK, &l->base, idx);
}

static int32_t *cache_new(size_t n)
{
	int32_t *c = malloc((n ? n : 1) * sizeof(*c));
	if (c)
		for (size_t i = 0; i < n; i++)
			c[i] = -1;
	return c;
}

static void proc_cache_release(struct proc_cache *c)
{
	free(c->map);
	free(c->loc);
	free(c->stack);
	memset(c, 0, sizeof(*c));
}

static int proc_cache_init(struct proc_cache *c, const struct pf_prof_process *p)
{
	c->map = cache_new(p->n_mappings);
	c->loc = cache_new(p->n_frames);
	c->stack = cache_new(p->n_stacks);
	if (c->map && c->loc && c->stack)
		return 0;
	proc_cache_release(c);
	return -ENOMEM;
}

static int enc_stack(struct enc *e, const struct pf_prof_process *p, struct proc_cache *c,
		     size_t pi, uint32_t si, int32_t *idx)
{
	if (si >= p->n_stacks)
		return pf_error_set(e->err, -EINVAL, "", "processes[%zu]: stack %" PRIu32
				    " out of range (%zu stacks)", pi, si, p->n_stacks);
	if (c->stack[si] >= 0) {
		*idx = c->stack[si];
		return 0;
	}
	const struct pf_prof_stack *st = &p->stacks[si];
	pb_stack *ps = pb_pool_alloc(&e->pool, sizeof(*ps));
	int32_t *li = pb_pool_array(&e->pool, st->n_frames, sizeof(int32_t));
	if (!ps || !li)
		return -ENOMEM;
	*ps = (pb_stack)OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__STACK__INIT;
	for (uint32_t k = 0; k < st->n_frames; k++) {
		uint32_t fi = st->frames[k];
		if (fi >= p->n_frames)
			return pf_error_set(e->err, -EINVAL, "", "processes[%zu].stacks[%" PRIu32
					    "]: frame %" PRIu32 " out of range", pi, si, fi);
		if (c->loc[fi] < 0) {
			const struct pf_prof_frame *f = &p->frames[fi];
			int32_t mi = 0;
			if (f->mapping >= 0) {
				if ((size_t)f->mapping >= p->n_mappings)
					return pf_error_set(e->err, -EINVAL, "",
							    "processes[%zu].frames[%" PRIu32
							    "]: mapping %" PRId32 " out of range",
							    pi, fi, f->mapping);
				if (c->map[f->mapping] < 0) {
					const struct pf_prof_mapping *m = &p->mappings[f->mapping];
					if ((m->start || m->limit) && m->start >= m->limit)
						return pf_error_set(
							e->err, -EINVAL, "",
							"processes[%zu].mappings[%" PRId32
							"]: start 0x%" PRIx64 " >= limit 0x%" PRIx64,
							pi, f->mapping, m->start, m->limit);
					int r = enc_mapping(e, m, &c->map[f->mapping]);
					if (r < 0)
						return r;
				}
				mi = c->map[f->mapping];
			}
			int r = enc_location(e, f, mi, &c->loc[fi]);
			if (r < 0)
				return r;
		}
		li[k] = c->loc[fi];
	}
	ps->location_indices = li;
	ps->n_location_indices = st->n_frames;
	int r = enc_msg(e, T_STACK, &ps->base, &c->stack[si]);
	if (r == 0)
		*idx = c->stack[si];
	return r;
}

static pb_anyvalue *any_string(struct pb_pool *pool, const char *s)
{
	pb_anyvalue *v = pb_pool_alloc(pool, sizeof(*v));
	if (!v)
		return NULL;
	*v = (pb_anyvalue)OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
	v->value_case = ANY_STRING;
	v->string_value = pb_pool_strdup(pool, s);
	return v->string_value ? v : NULL;
}

/* Resource: plain key/string_value attributes (process.pid as int), first of a key wins,
 * host.name from the window when missing. */
static pb_resource *enc_resource(struct enc *e, const struct pf_prof_window *w,
				 const struct pf_prof_process *p)
{
	pb_resource *res = pb_pool_alloc(&e->pool, sizeof(*res));
	pb_kv **kvs = pb_pool_array(&e->pool, p->n_attrs + 2, sizeof(*kvs));
	if (!res || !kvs)
		return NULL;
	*res = (pb_resource)OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
	size_t n = 0;
	bool have_host = false, have_pid = false;
	for (size_t i = 0; i < p->n_attrs + 2; i++) {
		const char *key, *val;
		if (i < p->n_attrs) {
			key = p->attrs[i].key;
			val = p->attrs[i].value;
		} else if (i == p->n_attrs) {
			if (have_pid || (w->n_sample_types && !p->pid))
				continue;
			key = "process.pid";
			val = NULL;
		} else {
			if (have_host || !w->host_name || !*w->host_name)
				continue;
			key = "host.name";
			val = w->host_name;
		}
		if (!key || !*key || (i < p->n_attrs && !val))
			continue;
		bool dup = false;
		for (size_t j = 0; j < n && !dup; j++)
			dup = strcmp(kvs[j]->key, key) == 0;
		if (dup)
			continue;
		pb_kv *kv = pb_pool_alloc(&e->pool, sizeof(*kv));
		if (!kv)
			return NULL;
		*kv = (pb_kv)OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;
		kv->key = pb_pool_strdup(&e->pool, key);
		if (strcmp(key, "process.pid") == 0) {
			have_pid = true;
			kv->value = pb_pool_alloc(&e->pool, sizeof(pb_anyvalue));
			if (kv->value) {
				*kv->value = (pb_anyvalue)OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
				kv->value->value_case = ANY_INT;
				kv->value->int_value = p->pid;
			}
		} else {
			have_host |= strcmp(key, "host.name") == 0;
			kv->value = any_string(&e->pool, val);
		}
		if (!kv->key || !kv->value)
			return NULL;
		kvs[n++] = kv;
	}
	res->attributes = kvs;
	res->n_attributes = n;
	return res;
}

/* Sample attributes: thread.id (always for the implicit CPU profile, else when known),
 * thread.name when known, then the labels; the first of a key wins (dup_key rule). */
static int enc_sample_attrs(struct enc *e, const struct pf_prof_window *w,
			    const struct pf_prof_sample *s, pb_sample *ps)
{
	int32_t *ai = pb_pool_array(&e->pool, 2 + (size_t)s->n_labels, sizeof(int32_t));
	const char **keys = pb_pool_array(&e->pool, 2 + (size_t)s->n_labels, sizeof(char *));
	if (!ai || !keys)
		return -ENOMEM;
	size_t n = 0;
	int r = 0;
	if (!w->n_sample_types || s->tid) {
		keys[n] = "thread.id";
		r = enc_attr(e, "thread.id", NULL, s->tid, &ai[n++]);
	}
	if (r == 0 && s->thread_name && *s->thread_name) {
		keys[n] = "thread.name";
		r = enc_attr(e, "thread.name", s->thread_name, 0, &ai[n++]);
	}
	for (uint32_t k = 0; r == 0 && k < s->n_labels; k++) {
		const struct pf_prof_label *l = &s->labels[k];
		if (!l->key || !*l->key)
			continue;
		if (pb_key_seen(keys, n, l->key))
			continue;
		keys[n] = l->key;
		r = enc_attr_unit(e, l->key, l->str, l->num, l->str ? NULL : l->unit, &ai[n++]);
	}
	ps->attribute_indices = ai;
	ps->n_attribute_indices = n;
	return r;
}

/* Whether sample type k of process p has a sample with a non-zero value. */
static bool type_has_samples(const struct pf_prof_window *w, const struct pf_prof_process *p,
			     size_t k)
{
	for (size_t i = 0; i < p->n_samples; i++)
		if (pf_prof_sample_value(w, &p->samples[i], k))
			return true;
	return false;
}

static bool nonzero16(const uint8_t *b)
{
	for (int i = 0; i < 16; i++)
		if (b[i])
			return true;
	return false;
}

/* The Profile of sample type k (0 for the implicit CPU profile) of process pi. */
static int enc_profile(struct enc *e, const struct pf_prof_window *w, size_t pi, size_t k,
		       uint64_t t0, uint64_t t1, pb_profile **out)
{
	const struct pf_prof_process *p = &w->processes[pi];
	struct proc_cache *c = &e->cache;
	int r = -ENOMEM;
	pb_profile *prof = pb_pool_alloc(&e->pool, sizeof(*prof));
	pb_value_type *st = pb_pool_alloc(&e->pool, sizeof(*st));
	pb_value_type *pt = pb_pool_alloc(&e->pool, sizeof(*pt));
	pb_sample **samples = pb_pool_array(&e->pool, p->n_samples, sizeof(*samples));
	uint8_t *id = pb_pool_alloc(&e->pool, 16);
	if (!prof || !st || !pt || !samples || !id)
		return r;
	*prof = (pb_profile)OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILE__INIT;
	*st = (pb_value_type)OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__VALUE_TYPE__INIT;
	*pt = *st;
	struct pf_prof_value_type vt = pf_prof_window_type(w, k);
	struct pf_prof_value_type per = pf_prof_window_period_type(w);
	r = enc_str(e, vt.type, &st->type_strindex);
	if (r == 0)
		r = enc_str(e, vt.unit, &st->unit_strindex);
	if (r == 0)
		r = enc_str(e, per.type, &pt->type_strindex);
	if (r == 0)
		r = enc_str(e, per.unit, &pt->unit_strindex);
	if (r < 0)
		return r;
	prof->sample_type = st;
	if (per.type || per.unit)
		prof->period_type = pt;
	prof->period = pf_prof_window_period(w);
	prof->time_unix_nano = t0;
	prof->duration_nano = t1 - t0;
	r = pf_random_bytes(id, 16);
	if (r < 0)
		return r;
	prof->profile_id.data = id;
	prof->profile_id.len = 16;

	/* One shape for every sample of the profile; explicit sample types are values-only. */
	bool ts_shape = !w->n_sample_types;
	for (size_t i = 0; i < p->n_samples && ts_shape; i++)
		if (p->samples[i].count && p->samples[i].n_timestamps != p->samples[i].count)
			ts_shape = false;

	size_t n = 0;
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct pf_prof_sample *s = &p->samples[i];
		int64_t value = pf_prof_sample_value(w, s, k);
		if (!value)
			continue;
		r = -ENOMEM;
		pb_sample *ps = pb_pool_alloc(&e->pool, sizeof(*ps));
		if (!ps)
			return r;
		*ps = (pb_sample)OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__SAMPLE__INIT;
		r = enc_stack(e, p, c, pi, s->stack, &ps->stack_index);
		if (r == 0)
			r = enc_sample_attrs(e, w, s, ps);
		if (r == 0)
			r = enc_link(e, s, &ps->link_index);
		if (r < 0)
			return r;
		if (ts_shape) {
			ps->timestamps_unix_nano = (uint64_t *)s->timestamps;
			ps->n_timestamps_unix_nano = s->n_timestamps;
		} else {
			ps->values = pb_pool_alloc(&e->pool, sizeof(int64_t));
			if (!ps->values)
				return -ENOMEM;
			ps->values[0] = value;
			ps->n_values = 1;
		}
		samples[n++] = ps;
	}
	prof->samples = samples;
	prof->n_samples = n;
	*out = prof;
	return 0;
}

static bool process_has_samples(const struct pf_prof_window *w, const struct pf_prof_process *p)
{
	for (size_t i = 0; i < p->n_samples; i++)
		if (pf_prof_sample_nonzero(w, &p->samples[i]))
			return true;
	return false;
}

static int check_window(const struct pf_prof_window *w, uint64_t *t0, uint64_t *t1,
			struct pf_error *err)
{
	int r = pb_window_check_types(w, err);
	if (r < 0)
		return r;
	if (w->n_sample_types && w->period < 0)
		return pf_error_set(err, -EINVAL, "", "negative period");
	if (w->end_unix_ns < w->start_unix_ns)
		return pf_error_set(err, -EINVAL, "", "window ends before it starts");
	*t0 = w->start_unix_ns;
	*t1 = w->end_unix_ns;
	for (size_t i = 0; i < w->n_processes; i++) {
		const struct pf_prof_process *p = &w->processes[i];
		for (size_t j = 0; j < p->n_samples; j++) {
			const struct pf_prof_sample *s = &p->samples[j];
			if (s->n_timestamps && s->n_timestamps != s->count)
				return pf_error_set(err, -EINVAL, "",
						    "processes[%zu].samples[%zu]: %" PRIu32
						    " timestamps for count %" PRIu64,
						    i, j, s->n_timestamps, s->count);
			for (uint32_t k = 0; k < s->n_timestamps; k++) {
				uint64_t ts = s->timestamps[k];
				if (ts < *t0)
					*t0 = ts;
				if (ts >= *t1)
					*t1 = ts == UINT64_MAX ? ts : ts + 1;
			}
		}
	}
	return 0;
}

int pf_otlp_profiles_encode(const struct pf_prof_window *w, struct pf_buf *out,
			    uint8_t profile_id[16], struct pf_error *err)
{
	uint64_t t0 = 0, t1 = 0;
	int r = check_window(w, &t0, &t1, err);
	if (r < 0)
		return r;
	size_t n_procs = 0;
	for (size_t i = 0; i < w->n_processes; i++)
		n_procs += process_has_samples(w, &w->processes[i]);
	if (!n_procs)
		return -ENODATA;

	struct enc e;
	r = enc_init(&e, err);
	if (r < 0)
		goto out;

	r = -ENOMEM;
	pb_resource_profiles **rps = pb_pool_array(&e.pool, n_procs, sizeof(*rps));
	pb_scope *scope = pb_pool_alloc(&e.pool, sizeof(*scope));
	if (!rps || !scope)
		goto out;
	*scope = (pb_scope)OPENTELEMETRY__PROTO__COMMON__V1__INSTRUMENTATION_SCOPE__INIT;
	scope->name = PF_OTLP_SCOPE_NAME;

	size_t n = 0, n_types = pf_prof_window_types(w);
	for (size_t i = 0; i < w->n_processes; i++) {
		const struct pf_prof_process *proc = &w->processes[i];
		if (!process_has_samples(w, proc))
			continue;
		r = -ENOMEM;
		pb_resource_profiles *rp = pb_pool_alloc(&e.pool, sizeof(*rp));
		pb_scope_profiles *sp = pb_pool_alloc(&e.pool, sizeof(*sp));
		pb_scope_profiles **sps = pb_pool_alloc(&e.pool, sizeof(*sps));
		pb_profile **profs = pb_pool_array(&e.pool, n_types, sizeof(*profs));
		if (!rp || !sp || !sps || !profs)
			goto out;
		*rp = (pb_resource_profiles)
			OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__RESOURCE_PROFILES__INIT;
		*sp = (pb_scope_profiles)
			OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__SCOPE_PROFILES__INIT;
		rp->resource = enc_resource(&e, w, proc);
		if (!rp->resource)
			goto out;
		r = proc_cache_init(&e.cache, proc);
		size_t np = 0;
		for (size_t k = 0; k < n_types && r == 0; k++) {
			if (!type_has_samples(w, proc, k))
				continue;
			r = enc_profile(&e, w, i, k, t0, t1, &profs[np]);
			if (r == 0 && np == 0 && nonzero16(proc->profile_id))
				memcpy(profs[0]->profile_id.data, proc->profile_id, 16);
			if (r == 0)
				np++;
		}
		proc_cache_release(&e.cache);
		if (r < 0)
			goto out;
		/* Profile.original_payload: once per process, on its first profile. */
		if (proc->original_payload && proc->original_payload_len) {
			profs[0]->original_payload.data = (uint8_t *)proc->original_payload;
			profs[0]->original_payload.len = proc->original_payload_len;
			profs[0]->original_payload_format =
				(char *)(proc->original_payload_format ? proc->original_payload_format
								       : "pprof");
		}
		if (n == 0 && profile_id)
			memcpy(profile_id, profs[0]->profile_id.data, 16);
		sp->scope = scope;
		sp->profiles = profs;
		sp->n_profiles = np;
		sps[0] = sp;
		rp->scope_profiles = sps;
		rp->n_scope_profiles = 1;
		rps[n++] = rp;
	}

	pb_dict dict = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILES_DICTIONARY__INIT;
	dict.string_table = (char **)e.tab[T_STR].v;
	dict.n_string_table = e.tab[T_STR].n;
	dict.attribute_table = (pb_kvu **)e.tab[T_ATTR].v;
	dict.n_attribute_table = e.tab[T_ATTR].n;
	dict.mapping_table = (pb_mapping **)e.tab[T_MAP].v;
	dict.n_mapping_table = e.tab[T_MAP].n;
	dict.function_table = (pb_function **)e.tab[T_FN].v;
	dict.n_function_table = e.tab[T_FN].n;
	dict.location_table = (pb_location **)e.tab[T_LOC].v;
	dict.n_location_table = e.tab[T_LOC].n;
	dict.link_table = (pb_link **)e.tab[T_LINK].v;
	dict.n_link_table = e.tab[T_LINK].n;
	dict.stack_table = (pb_stack **)e.tab[T_STACK].v;
	dict.n_stack_table = e.tab[T_STACK].n;

	pb_request req =
		OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_REQUEST__INIT;
	req.resource_profiles = rps;
	req.n_resource_profiles = n;
	req.dictionary = &dict;
	r = pb_pack_append(&req.base, out);
out:
	enc_release(&e);
	return r;
}

/* ---------------------------------------------------------------------------------------- */
/* Decoder.                                                                                  */

struct dec {
	const pb_dict *d;
	struct pf_prof_window *w;
	size_t used, max;
	struct pf_error *err;
	/* dense local numbering of the dictionary entries one profile reaches, -1 = not reached */
	int32_t *map, *loc, *stack;
	bool explicit_types; /* the window has explicit sample types (see pf/profile.h) */
};

static void *dalloc(struct dec *d, size_t n, size_t size, int *rc)
{
	return pb_window_alloc(d->w, &d->used, d->max, d->err, n, size, rc);
}

static const char *dstr(struct dec *d, const char *s, int *rc)
{
	if (!s)
		return NULL;
	size_t n = strlen(s) + 1;
	char *p = dalloc(d, n, 1, rc);
	if (p)
		memcpy(p, s, n);
	return p;
}

static int bad(struct dec *d, const char *what, int64_t idx, size_t n)
{
	return pf_error_set(d->err, -EBADMSG, "", "%s %" PRId64 " out of range (table of %zu)",
			    what, idx, n);
}

static int check_idx(struct dec *d, const char *what, int64_t idx, size_t n)
{
	/* index 0 is the zero value and always allowed, even with an empty (absent) table */
	if (idx < 0 || (idx > 0 && (uint64_t)idx >= n))
		return bad(d, what, idx, n);
	return 0;
}

static int dict_string(struct dec *d, int32_t idx, const char **s)
{
	int r = check_idx(d, "string index", idx, d->d->n_string_table);
	if (r < 0)
		return r;
	*s = idx > 0 ? d->d->string_table[idx] : "";
	return 0;
}

/* The attribute at idx: its key and value ("" and NULL for index 0). */
static int dict_attr(struct dec *d, int32_t idx, const char **key, const pb_anyvalue **val)
{
	int r = check_idx(d, "attribute index", idx, d->d->n_attribute_table);
	if (r < 0)
		return r;
	*key = "";
	*val = NULL;
	if (idx == 0)
		return 0;
	const pb_kvu *a = d->d->attribute_table[idx];
	r = dict_string(d, a->key_strindex, key);
	if (r == 0)
		r = check_idx(d, "unit index", a->unit_strindex, d->d->n_string_table);
	*val = a->value;
	return r;
}

static int any_text(struct dec *d, const pb_anyvalue *v, char *tmp, size_t tmp_len,
		    const char **s)
{
	*s = NULL;
	if (!v)
		return 0;
	switch (v->value_case) {
	case ANY_STRING:
		*s = v->string_value;
		return 0;
	case ANY_STRINDEX:
		return dict_string(d, v->string_value_strindex, s);
	case ANY_INT:
		snprintf(tmp, tmp_len, "%" PRId64, v->int_value);
		*s = tmp;
		return 0;
	case ANY_BOOL:
		*s = v->bool_value ? "true" : "false";
		return 0;
	case ANY_DOUBLE:
		snprintf(tmp, tmp_len, "%.17g", v->double_value);
		*s = tmp;
		return 0;
	default:
		return 0; /* arrays, kvlists, bytes: not kept */
	}
}

/* dict_attr() and the value's any_text(). */
static int dict_attr_text(struct dec *d, int32_t idx, const char **key, const pb_anyvalue **val,
			  char *tmp, size_t tmp_len, const char **txt)
{
	int r = dict_attr(d, idx, key, val);
	return r < 0 ? r : any_text(d, *val, tmp, tmp_len, txt);
}

/* Pass 1: marks and numbers what the profile's samples reach; checks every index. */
static int dec_mark(struct dec *d, const pb_profile *p, size_t *n_map, size_t *n_loc,
		    size_t *n_stack)
{
	const pb_dict *dc = d->d;
	for (size_t i = 0; i < p->n_samples; i++) {
		const pb_sample *s = p->samples[i];
		int r = check_idx(d, "stack_index", s->stack_index, dc->n_stack_table);
		if (r == 0)
			r = check_idx(d, "link_index", s->link_index, dc->n_link_table);
		for (size_t k = 0; r == 0 && k < s->n_attribute_indices; k++)
			r = check_idx(d, "attribute index", s->attribute_indices[k],
				      dc->n_attribute_table);
		if (r < 0)
			return r;
		if (s->stack_index == 0 && dc->n_stack_table == 0) {
			/* the zero stack of an absent table: give it its own slot */
			continue;
		}
		if (d->stack[s->stack_index] >= 0)
			continue;
		d->stack[s->stack_index] = (int32_t)(*n_stack)++;
		const pb_stack *st = dc->stack_table[s->stack_index];
		for (size_t k = 0; k < st->n_location_indices; k++) {
			int32_t li = st->location_indices[k];
			r = check_idx(d, "location index", li, dc->n_location_table);
			if (r < 0)
				return r;
			if (li == 0)
				return bad(d, "location index", 0, dc->n_location_table);
			if (d->loc[li] >= 0)
				continue;
			d->loc[li] = (int32_t)(*n_loc)++;
			const pb_location *l = dc->location_table[li];
			r = check_idx(d, "mapping_index", l->mapping_index, dc->n_mapping_table);
			for (size_t a = 0; r == 0 && a < l->n_attribute_indices; a++)
				r = check_idx(d, "attribute index", l->attribute_indices[a],
					      dc->n_attribute_table);
			for (size_t a = 0; r == 0 && a < l->n_lines; a++)
				r = check_idx(d, "function_index", l->lines[a]->function_index,
					      dc->n_function_table);
			if (r < 0)
				return r;
			if (l->mapping_index > 0 && d->map[l->mapping_index] < 0)
				d->map[l->mapping_index] = (int32_t)(*n_map)++;
		}
	}
	return 0;
}

static int dec_mapping(struct dec *d, const pb_mapping *m, struct pf_prof_mapping *out)
{
	int rc = 0;
	const char *s;
	out->start = m->memory_start;
	out->limit = m->memory_limit;
	if (out->start >= out->limit) /* not a range: dropped, as pprof_codec.c does */
		out->start = out->limit = 0;
	out->offset = m->file_offset;
	int r = dict_string(d, m->filename_strindex, &s);
	if (r < 0)
		return r;
	out->path = *s ? dstr(d, s, &rc) : NULL;
	for (size_t a = 0; rc == 0 && a < m->n_attribute_indices; a++) {
		const char *key, *txt;
		const pb_anyvalue *v;
		char tmp[32];
		r = dict_attr_text(d, m->attribute_indices[a], &key, &v, tmp, sizeof(tmp), &txt);
		if (r < 0)
			return r;
		if (txt && strcmp(key, "process.executable.build_id.gnu") == 0)
			out->build_id = dstr(d, txt, &rc);
	}
	return rc;
}

/* A Line: its function's name (the system name when the name is empty), system name (NULL
 * when it equals the name), file and line number. */
static int dec_line(struct dec *d, const pb_line *ln, const char **function,
		    const char **system_name, const char **filename, uint32_t *lineno)
{
	int rc = 0;
	const pb_function *fn = d->d->function_table[ln->function_index];
	const char *name, *sys, *file;
	int r = dict_string(d, fn->name_strindex, &name);
	if (r == 0)
		r = dict_string(d, fn->system_name_strindex, &sys);
	if (r == 0)
		r = dict_string(d, fn->filename_strindex, &file);
	if (r < 0)
		return r;
	if (!*name)
		name = sys;
	*function = *name ? dstr(d, name, &rc) : NULL;
	*system_name = *sys && strcmp(sys, name) ? dstr(d, sys, &rc) : NULL;
	*filename = *file ? dstr(d, file, &rc) : NULL;
	if (ln->line < 0)
		return pf_error_set(d->err, -EBADMSG, "", "negative line number");
	*lineno = ln->line > UINT32_MAX ? UINT32_MAX : (uint32_t)ln->line;
	return rc;
}

static int dec_frame(struct dec *d, const pb_location *l, struct pf_prof_frame *f)
{
	int rc = 0;
	f->address = l->address;
	f->mapping = l->mapping_index > 0 ? d->map[l->mapping_index] : -1;
	for (size_t a = 0; a < l->n_attribute_indices; a++) {
		const char *key, *txt;
		const pb_anyvalue *v;
		char tmp[32];
		int r =
		    dict_attr_text(d, l->attribute_indices[a], &key, &v, tmp, sizeof(tmp), &txt);
		if (r < 0)
			return r;
		if (txt && strcmp(key, "profile.frame.type") == 0)
			f->kind = pf_frame_kind_parse(txt);
	}
	/* The last line is the function the others were inlined into (innermost first). */
	size_t nl = l->n_lines;
	if (nl && l->lines[nl - 1]->function_index > 0) {
		int r = dec_line(d, l->lines[nl - 1], &f->function, &f->system_name, &f->file,
				 &f->line);
		if (r < 0)
			return r;
		size_t ni = 0;
		for (size_t k = 0; k + 1 < nl; k++)
			ni += l->lines[k]->function_index > 0;
		struct pf_prof_inline *in = ni ? dalloc(d, ni, sizeof(*in), &rc) : NULL;
		if (rc < 0)
			return rc;
		ni = 0;
		for (size_t k = 0; k + 1 < nl; k++) {
			if (l->lines[k]->function_index <= 0)
				continue;
			r = dec_line(d, l->lines[k], &in[ni].function, &in[ni].system_name,
				     &in[ni].file, &in[ni].line);
			if (r < 0)
				return r;
			ni++;
		}
		f->inlined = in;
		f->n_inlined = (uint32_t)ni;
	}
	return rc;
}

/* A sample attribute other than thread.id / thread.name as a label. */
static int dec_label(struct dec *d, int32_t idx, const char *key, const pb_anyvalue *v,
		     const char *txt, struct pf_prof_label *l)
{
	int rc = 0;
	const char *unit;
	int r = dict_string(d, d->d->attribute_table[idx]->unit_strindex, &unit);
	if (r < 0)
		return r;
	l->key = dstr(d, key, &rc);
	if (v->value_case == ANY_INT) {
		l->num = v->int_value;
		l->unit = *unit ? dstr(d, unit, &rc) : NULL;
	} else {
		l->str = dstr(d, txt, &rc);
	}
	return rc;
}

static int dec_sample(struct dec *d, const pb_sample *s, int32_t zero_stack,
		      struct pf_prof_sample *o)
{
	int rc = 0;
	o->stack = s->stack_index == 0 && d->d->n_stack_table == 0 ? (uint32_t)zero_stack
								     : (uint32_t)d->stack[s->stack_index];
	if (d->explicit_types) {
		/* values are summed by the caller */
	} else if (s->n_values) {
		if (s->values[0] < 0)
			return pf_error_set(d->err, -EBADMSG, "", "negative sample value");
		o->count = (uint64_t)s->values[0];
	} else {
		o->count = s->n_timestamps_unix_nano;
	}
	if (!d->explicit_types && s->n_timestamps_unix_nano &&
	    s->n_timestamps_unix_nano == o->count && o->count <= UINT32_MAX) {
		uint64_t *ts = dalloc(d, s->n_timestamps_unix_nano, sizeof(*ts), &rc);
		if (!ts)
			return rc;
		memcpy(ts, s->timestamps_unix_nano, s->n_timestamps_unix_nano * sizeof(*ts));
		o->timestamps = ts;
		o->n_timestamps = (uint32_t)s->n_timestamps_unix_nano;
	}
	struct pf_prof_label *labels = NULL;
	if (s->n_attribute_indices) {
		labels = dalloc(d, s->n_attribute_indices, sizeof(*labels), &rc);
		if (!labels)
			return rc;
	}
	for (size_t a = 0; a < s->n_attribute_indices; a++) {
		const char *key, *txt;
		const pb_anyvalue *v;
		char tmp[32];
		int r =
		    dict_attr_text(d, s->attribute_indices[a], &key, &v, tmp, sizeof(tmp), &txt);
		if (r < 0)
			return r;
		if (!txt || !*key)
			continue;
		if (strcmp(key, "thread.id") == 0) {
			char *end;
			unsigned long long tid = strtoull(txt, &end, 10);
			o->tid = *end || tid > UINT32_MAX ? 0 : (uint32_t)tid;
		} else if (strcmp(key, "thread.name") == 0) {
			o->thread_name = dstr(d, txt, &rc);
			if (rc < 0)
				return rc;
		} else {
			bool dup = false;
			for (uint32_t k = 0; k < o->n_labels && !dup; k++)
				dup = strcmp(labels[k].key, key) == 0;
			if (dup)
				continue;
			r = dec_label(d, s->attribute_indices[a], key, v, txt,
				      &labels[o->n_labels]);
			if (r < 0)
				return r;
			o->n_labels++;
		}
	}
	o->labels = o->n_labels ? labels : NULL;
	if (s->link_index > 0) {
		const pb_link *l = d->d->link_table[s->link_index];
		if (l->trace_id.len != 16 || l->span_id.len != 8)
			return pf_error_set(d->err, -EBADMSG, "",
					    "link %" PRId32 ": trace_id must be 16 bytes and "
					    "span_id 8 (got %zu, %zu)",
					    s->link_index, l->trace_id.len, l->span_id.len);
		memcpy(o->trace_id, l->trace_id.data, 16);
		memcpy(o->span_id, l->span_id.data, 8);
	}
	return 0;
}

static int dec_resource(struct dec *d, const pb_resource *res, struct pf_prof_process *p)
{
	int rc = 0;
	if (!res || !res->n_attributes)
		return 0;
	struct pf_prof_attr *attrs = dalloc(d, res->n_attributes, sizeof(*attrs), &rc);
	if (!attrs)
		return rc;
	size_t n = 0;
	for (size_t i = 0; i < res->n_attributes; i++) {
		const pb_kv *kv = res->attributes[i];
		const char *key = kv->key, *txt;
		char tmp[32];
		if ((!key || !*key) && kv->key_strindex) {
			int r = dict_string(d, kv->key_strindex, &key);
			if (r < 0)
				return r;
		}
		int r = any_text(d, kv->value, tmp, sizeof(tmp), &txt);
		if (r < 0)
			return r;
		if (!key || !*key || !txt)
			continue;
		if (strcmp(key, "process.pid") == 0) {
			char *end;
			long long pid = strtoll(txt, &end, 10);
			if (!*end && pid > 0 && pid <= UINT32_MAX)
				p->pid = (uint32_t)pid;
		}
		if (strcmp(key, "host.name") == 0 && !d->w->host_name)
			d->w->host_name = dstr(d, txt, &rc);
		attrs[n].key = dstr(d, key, &rc);
		attrs[n].value = dstr(d, txt, &rc);
		if (rc < 0)
			return rc;
		n++;
	}
	p->attrs = attrs;
	p->n_attrs = n;
	return 0;
}

/* Identity of a sample across the profiles of one group: stack, link, attributes. */
static int sample_key(struct pf_buf *b, const pb_sample *s)
{
	pf_buf_reset(b);
	int32_t head[2] = {s->stack_index, s->link_index};
	int r = pf_buf_append(b, head, sizeof(head));
	if (r == 0 && s->n_attribute_indices)
		r = pf_buf_append(b, s->attribute_indices,
				  s->n_attribute_indices * sizeof(int32_t));
	return r;
}

static int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;
	if (__builtin_add_overflow(a, b, &r))
		return b > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

/* Explicit sample types: the samples of the group's profiles merged by identity, values[k]
 * of sample type type_of[j] summed from profile j. */
static int dec_merge_samples(struct dec *d, const pb_profile *const *pps, size_t n_pp,
			     const size_t *type_of, int32_t zero_stack, struct pf_prof_process *p)
{
	size_t nt = d->w->n_sample_types;
	struct pb_intern keys;
	struct pf_buf kb;
	pb_intern_init(&keys, 0);
	pf_buf_init(&kb, SIZE_MAX / 4);
	size_t total = 0;
	int r = 0, rc = 0;
	for (size_t j = 0; j < n_pp; j++)
		total += pps[j]->n_samples;
	struct pf_prof_sample *samples = dalloc(d, total, sizeof(*samples), &rc);
	int64_t *values = dalloc(d, total, nt * sizeof(int64_t), &rc);
	if (rc < 0) {
		r = rc;
		goto out;
	}
	size_t n = 0;
	for (size_t j = 0; j < n_pp; j++) {
		for (size_t i = 0; i < pps[j]->n_samples; i++) {
			const pb_sample *s = pps[j]->samples[i];
			int32_t idx;
			bool added;
			r = sample_key(&kb, s);
			if (r == 0)
				r = pb_intern(&keys, kb.data, kb.len, &idx, &added);
			if (r == 0 && added) {
				n++;
				samples[idx].values = &values[(size_t)idx * nt];
				r = dec_sample(d, s, zero_stack, &samples[idx]);
			}
			if (r < 0)
				goto out;
			int64_t *v = (int64_t *)samples[idx].values, w = 0;
			/* values-only (one value), values with timestamps, or timestamps-only */
			for (size_t k = 0; k < s->n_values; k++)
				w = sat_add(w, s->values[k]);
			if (!s->n_values)
				w = s->n_timestamps_unix_nano > INT64_MAX
					    ? INT64_MAX
					    : (int64_t)s->n_timestamps_unix_nano;
			v[type_of[j]] = sat_add(v[type_of[j]], w);
		}
	}
	for (size_t i = 0; i < n; i++)
		samples[i].count = samples[i].values[0] > 0 ? (uint64_t)samples[i].values[0] : 0;
	p->samples = samples;
	p->n_samples = n;
out:
	pb_intern_release(&keys);
	pf_buf_release(&kb);
	return r;
}

/* One process from a group of profiles (one, or with explicit sample types all the profiles
 * of one ScopeProfiles); type_of[j] is the window sample type of profile j (NULL: implicit). */
static int dec_profile(struct dec *d, const pb_resource *res, const pb_profile *const *pps,
		       size_t n_pp, const size_t *type_of, struct pf_prof_process *p)
{
	const pb_dict *dc = d->d;
	int rc = 0;
	size_t n_map = 0, n_loc = 0, n_stack = 0;
	for (size_t i = 0; i < dc->n_mapping_table; i++)
		d->map[i] = -1;
	for (size_t i = 0; i < dc->n_location_table; i++)
		d->loc[i] = -1;
	for (size_t i = 0; i < dc->n_stack_table; i++)
		d->stack[i] = -1;
	int r = dec_resource(d, res, p);
	for (size_t j = 0; j < n_pp && r == 0; j++)
		r = dec_mark(d, pps[j], &n_map, &n_loc, &n_stack);
	for (size_t j = 0; j < n_pp; j++) {
		if (pps[j]->profile_id.len == 16 && nonzero16(pps[j]->profile_id.data)) {
			memcpy(p->profile_id, pps[j]->profile_id.data, 16);
			break;
		}
	}
	if (r < 0)
		return r;
	int32_t zero_stack = -1;
	size_t n_samples = 0;
	for (size_t j = 0; j < n_pp; j++) {
		n_samples += pps[j]->n_samples;
		for (size_t i = 0; i < pps[j]->n_samples; i++)
			if (pps[j]->samples[i]->stack_index == 0 && dc->n_stack_table == 0 &&
			    zero_stack < 0)
				zero_stack = (int32_t)n_stack++;
	}

	struct pf_prof_mapping *maps = dalloc(d, n_map, sizeof(*maps), &rc);
	struct pf_prof_frame *frames = dalloc(d, n_loc, sizeof(*frames), &rc);
	struct pf_prof_stack *stacks = dalloc(d, n_stack, sizeof(*stacks), &rc);
	if (rc < 0)
		return rc;
	for (size_t i = 1; i < dc->n_mapping_table; i++)
		if (d->map[i] >= 0 && (r = dec_mapping(d, dc->mapping_table[i], &maps[d->map[i]])))
			return r;
	for (size_t i = 1; i < dc->n_location_table; i++)
		if (d->loc[i] >= 0 && (r = dec_frame(d, dc->location_table[i], &frames[d->loc[i]])))
			return r;
	for (size_t i = 0; i < dc->n_stack_table; i++) {
		if (d->stack[i] < 0)
			continue;
		const pb_stack *st = dc->stack_table[i];
		uint32_t *fr = dalloc(d, st->n_location_indices, sizeof(*fr), &rc);
		if (!fr)
			return rc;
		for (size_t k = 0; k < st->n_location_indices; k++)
			fr[k] = (uint32_t)d->loc[st->location_indices[k]];
		stacks[d->stack[i]].frames = fr;
		stacks[d->stack[i]].n_frames = (uint32_t)st->n_location_indices;
	}
	if (type_of) {
		r = dec_merge_samples(d, pps, n_pp, type_of, zero_stack, p);
		if (r < 0)
			return r;
	} else {
		struct pf_prof_sample *samples = dalloc(d, n_samples, sizeof(*samples), &rc);
		if (rc < 0)
			return rc;
		size_t n = 0;
		for (size_t j = 0; j < n_pp; j++) {
			for (size_t i = 0; i < pps[j]->n_samples; i++, n++) {
				r = dec_sample(d, pps[j]->samples[i], zero_stack, &samples[n]);
				if (r < 0)
					return r;
				for (uint32_t k = 0; k < samples[n].n_timestamps; k++) {
					uint64_t ts = samples[n].timestamps[k];
					if (ts < d->w->start_unix_ns)
						d->w->start_unix_ns = ts;
					if (ts == UINT64_MAX) /* no [t, t+1) (fuzz regress-timestamp-max) */
						return pf_error_set(d->err, -EBADMSG, "",
								    "timestamp 2^64-1 out of range");
					if (ts >= d->w->end_unix_ns)
						d->w->end_unix_ns = ts + 1;
				}
			}
		}
		p->samples = samples;
		p->n_samples = n;
	}
	for (size_t j = 0; j < n_pp; j++) {
		const pb_profile *pp = pps[j];
		if (!pp->original_payload.len)
			continue;
		uint8_t *b = dalloc(d, pp->original_payload.len, 1, &rc);
		if (!b)
			return rc;
		memcpy(b, pp->original_payload.data, pp->original_payload.len);
		p->original_payload = b;
		p->original_payload_len = pp->original_payload.len;
		p->original_payload_format =
			dstr(d, pp->original_payload_format ? pp->original_payload_format : "",
			     &rc);
		if (rc < 0)
			return rc;
		break;
	}
	p->mappings = maps;
	p->n_mappings = n_map;
	p->frames = frames;
	p->n_frames = n_loc;
	p->stacks = stacks;
	p->n_stacks = n_stack;
	return 0;
}

static bool vt_is(struct dec *d, const pb_value_type *vt, const char *type, const char *unit)
{
	const char *t = "", *u = "";
	if (vt && (dict_string(d, vt->type_strindex, &t) < 0 ||
		   dict_string(d, vt->unit_strindex, &u) < 0))
		return false;
	return strcmp(t, type) == 0 && strcmp(u, unit) == 0;
}

/* The window's sample types: none (implicit CPU profile) when every profile is samples/count
 * with period type cpu/nanoseconds (or unset), else the distinct (type, unit) pairs in order
 * of appearance. type_of[j] receives the type of the j-th profile of the request. */
static int dec_types(struct dec *d, const pb_request *req, size_t n_profiles, size_t *type_of)
{
	int rc = 0;
	bool implicit = true;
	for (size_t i = 0; i < req->n_resource_profiles; i++)
		for (size_t j = 0; j < req->resource_profiles[i]->n_scope_profiles; j++) {
			const pb_scope_profiles *sp = req->resource_profiles[i]->scope_profiles[j];
			for (size_t k = 0; k < sp->n_profiles; k++) {
				const pb_profile *pp = sp->profiles[k];
				const char *t;
				if (pp->sample_type &&
				    (dict_string(d, pp->sample_type->type_strindex, &t) < 0 ||
				     dict_string(d, pp->sample_type->unit_strindex, &t) < 0))
					return -EBADMSG;
				if (pp->period_type &&
				    (dict_string(d, pp->period_type->type_strindex, &t) < 0 ||
				     dict_string(d, pp->period_type->unit_strindex, &t) < 0))
					return -EBADMSG;
				if ((pp->sample_type &&
				     !vt_is(d, pp->sample_type, "samples", "count")) ||
				    (pp->period_type &&
				     !vt_is(d, pp->period_type, "cpu", "nanoseconds")))
					implicit = false;
			}
		}
	if (implicit)
		return 0;
	d->explicit_types = true;
	struct pf_prof_value_type *types = dalloc(d, n_profiles, sizeof(*types), &rc);
	if (rc < 0)
		return rc;
	size_t nt = 0, n = 0;
	for (size_t i = 0; i < req->n_resource_profiles; i++)
		for (size_t j = 0; j < req->resource_profiles[i]->n_scope_profiles; j++) {
			const pb_scope_profiles *sp = req->resource_profiles[i]->scope_profiles[j];
			for (size_t k = 0; k < sp->n_profiles; k++, n++) {
				const pb_profile *pp = sp->profiles[k];
				const char *t = "", *u = "";
				if (pp->sample_type) {
					dict_string(d, pp->sample_type->type_strindex, &t);
					dict_string(d, pp->sample_type->unit_strindex, &u);
				}
				if (!*t)
					t = "samples";
				size_t x = 0;
				while (x < nt && !(strcmp(types[x].type, t) == 0 &&
						   strcmp(types[x].unit ? types[x].unit : "", u) == 0))
					x++;
				if (x == nt) {
					types[nt].type = dstr(d, t, &rc);
					types[nt].unit = *u ? dstr(d, u, &rc) : NULL;
					nt++;
				}
				type_of[n] = x;
				if (pp->period_type && !d->w->period_type.type &&
				    !d->w->period_type.unit) {
					dict_string(d, pp->period_type->type_strindex, &t);
					dict_string(d, pp->period_type->unit_strindex, &u);
					d->w->period_type.type = *t ? dstr(d, t, &rc) : NULL;
					d->w->period_type.unit = *u ? dstr(d, u, &rc) : NULL;
					d->w->period = pp->period;
				}
			}
		}
	d->w->sample_types = types;
	d->w->n_sample_types = nt;
	return rc;
}

static int dec_request(struct dec *d, const pb_request *req)
{
	static const pb_dict empty = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILES_DICTIONARY__INIT;
	d->d = req->dictionary ? req->dictionary : &empty;
	const pb_dict *dc = d->d;
	int rc = 0;
	size_t n_profiles = 0;
	for (size_t i = 0; i < req->n_resource_profiles; i++)
		for (size_t j = 0; j < req->resource_profiles[i]->n_scope_profiles; j++)
			n_profiles += req->resource_profiles[i]->scope_profiles[j]->n_profiles;
	size_t *type_of = dalloc(d, n_profiles, sizeof(*type_of), &rc);
	struct pf_prof_process *procs = dalloc(d, n_profiles, sizeof(*procs), &rc);
	if (rc < 0)
		return rc;
	int r = dec_types(d, req, n_profiles, type_of);
	if (r < 0)
		return r == -EBADMSG ? pf_error_set(d->err, r, "", "bad sample or period type")
				     : r;
	d->map = malloc((dc->n_mapping_table + 1) * sizeof(int32_t));
	d->loc = malloc((dc->n_location_table + 1) * sizeof(int32_t));
	d->stack = malloc((dc->n_stack_table + 1) * sizeof(int32_t));
	if (!d->map || !d->loc || !d->stack)
		return -ENOMEM;
	bool first = true;
	size_t n = 0, np = 0;
	for (size_t i = 0; i < req->n_resource_profiles; i++) {
		const pb_resource_profiles *rp = req->resource_profiles[i];
		for (size_t j = 0; j < rp->n_scope_profiles; j++) {
			const pb_scope_profiles *sp = rp->scope_profiles[j];
			for (size_t k = 0; k < sp->n_profiles; k++) {
				const pb_profile *pp = sp->profiles[k];
				uint64_t end = pp->time_unix_nano + pp->duration_nano;
				if (end < pp->time_unix_nano)
					end = UINT64_MAX;
				if (first || pp->time_unix_nano < d->w->start_unix_ns)
					d->w->start_unix_ns = pp->time_unix_nano;
				if (first || end > d->w->end_unix_ns)
					d->w->end_unix_ns = end;
				if (first && pp->period > 0 &&
				    (!d->explicit_types ||
				     vt_is(d, pp->period_type, "cpu", "nanoseconds"))) {
					int64_t hz = (1000000000 + pp->period / 2) / pp->period;
					d->w->frequency_hz = hz > 0 ? (uint32_t)hz : 1;
				}
				first = false;
				if (d->explicit_types)
					continue;
				r = dec_profile(d, rp->resource, (const pb_profile *const *)&sp->profiles[k], 1, NULL,
						&procs[n++]);
				if (r < 0)
					return r;
			}
			if (d->explicit_types && sp->n_profiles) {
				r = dec_profile(d, rp->resource,
						(const pb_profile *const *)sp->profiles,
						sp->n_profiles, &type_of[np], &procs[n++]);
				if (r < 0)
					return r;
			}
			np += sp->n_profiles;
		}
	}
	d->w->processes = procs;
	d->w->n_processes = n;
	return 0;
}

int pf_otlp_profiles_decode(const uint8_t *data, size_t len, size_t max_bytes,
			    struct pf_prof_window **out, struct pf_error *err)
{
	const ProtobufCMessageDescriptor *desc =
		&opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor;
	if (len > max_bytes)
		return pf_error_set(err, -E2BIG, "", "message of %zu bytes over the %zu byte limit",
				    len, max_bytes);
	int r = pb_wire_scan(desc, data, len, PF_OTLP_MAX_WIRE_DEPTH);
	if (r == -ELOOP)
		return pf_error_set(err, r, "", "messages nested deeper than %d",
				    PF_OTLP_MAX_WIRE_DEPTH);
	if (r < 0)
		return pf_error_set(err, -EBADMSG, "", "malformed ExportProfilesServiceRequest");
	/* ExportProfilesServiceRequest.dictionary (2): ProfilesDictionary's tables 1..7 */
	static const char *const tables[8] = {
	    NULL,	     "mapping_table",	"location_table", "function_table",
	    "link_table",    "string_table",	"attribute_table", "stack_table"};
	size_t counts[8];
	if (pb_wire_count_fields(data, len, 2, counts, 8) < 0)
		return pf_error_set(err, -EBADMSG, "", "malformed ExportProfilesServiceRequest");
	for (size_t t = 1; t < 8; t++)
		if (counts[t] > PF_OTLP_MAX_TABLE_ENTRIES)
			return pf_error_set(err, -E2BIG, "", "dictionary.%s: %zu entries; at most %d",
					    tables[t], counts[t], PF_OTLP_MAX_TABLE_ENTRIES);
	struct pb_capped_alloc ca;
	pb_capped_alloc_init(&ca, max_bytes);
	pb_request *req = (pb_request *)protobuf_c_message_unpack(desc, &ca.a, len, data);
	if (!req) {
		if (ca.exceeded)
			return pf_error_set(err, -E2BIG, "", "decoded message over %zu bytes",
					    max_bytes);
		return pf_error_set(err, -EBADMSG, "", "malformed ExportProfilesServiceRequest");
	}
	struct dec d = {.max = max_bytes, .err = err, .used = ca.used};
	d.w = pf_prof_window_new();
	if (!d.w) {
		r = -ENOMEM;
	} else {
		r = dec_request(&d, req);
	}
	free(d.map);
	free(d.loc);
	free(d.stack);
	protobuf_c_message_free_unpacked(&req->base, &ca.a);
	if (r < 0) {
		pf_prof_window_free(d.w);
		return r;
	}
	*out = d.w;
	return 0;
}
