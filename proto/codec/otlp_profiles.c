/* otlp_profiles.c — see otlp_profiles.h. The encoder; the decoder is otlp_profiles_decode.c.
 *
 * Every dictionary entry is built as a protobuf-c message in a throw-away pool, packed into a
 * scratch buffer and interned by those bytes (protobuf-c packs fields in a fixed order, so
 * equal messages give equal bytes). Each intern table is seeded with the empty key, so the
 * zero message is index 0 of every table (ProfilesDictionary comments in profiles.proto
 * v1.11.0: "index 0 ... must be a zero value"). Per process, the window's mapping/frame/stack
 * indices are translated once through caches. */
#include "otlp_profiles.h"
#include "otlp_profiles_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pf/compiler.h"
#include "pf/hash.h"
#include "pb_util.h"

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
	if (w->n_sample_types && w->default_sample_type && *w->default_sample_type) {
		prof->attribute_indices = pb_pool_alloc(&e->pool, sizeof(int32_t));
		if (!prof->attribute_indices)
			return -ENOMEM;
		prof->n_attribute_indices = 1;
		r = enc_attr(e, PF_OTLP_DEFAULT_TYPE_ATTR, w->default_sample_type, 0,
			     &prof->attribute_indices[0]);
		if (r < 0)
			return r;
	}
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

	/* One shape for every sample of the profile: timestamps only (the implicit CPU profile),
	 * a value per timestamp (one explicit type whose samples all have event_values), else
	 * values only. */
	bool ts_shape = !w->n_sample_types, ev_shape = w->n_sample_types == 1;
	for (size_t i = 0; i < p->n_samples && (ts_shape || ev_shape); i++) {
		const struct pf_prof_sample *s = &p->samples[i];
		if (s->count && s->n_timestamps != s->count)
			ts_shape = ev_shape = false;
		if (!s->event_values || !s->n_timestamps)
			ev_shape = false;
	}

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
		if (ts_shape || ev_shape) {
			ps->timestamps_unix_nano = (uint64_t *)s->timestamps;
			ps->n_timestamps_unix_nano = s->n_timestamps;
		}
		if (ev_shape) {
			ps->values = (int64_t *)s->event_values;
			ps->n_values = s->n_timestamps;
		} else if (!ts_shape) {
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
