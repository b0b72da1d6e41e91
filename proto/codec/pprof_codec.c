/* pprof_codec.c — see pprof_codec.h. Interning works as in otlp_profiles.c: a message is built
 * with id 0, packed, interned by its bytes (tables numbered from 1, pprof's "id 0 = none"),
 * and gets its id when it is new. */
#include "pprof_codec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "pf/gzip.h"
#include "pb_util.h"

#include "perftools/profile.pb-c.h"

typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__ValueType pb_value_type;
typedef Perftools__Profiles__Sample pb_sample;
typedef Perftools__Profiles__Label pb_label;
typedef Perftools__Profiles__Mapping pb_mapping;
typedef Perftools__Profiles__Location pb_location;
typedef Perftools__Profiles__Line pb_line;
typedef Perftools__Profiles__Function pb_function;

#define PPROF_MAX_WIRE_DEPTH 8 /* Profile > Location > Line is 3 */

enum { T_STR, T_MAP, T_FN, T_LOC, T_COUNT };

struct penc {
	struct pb_pool pool;
	struct pf_buf scratch;
	struct pb_intern it[T_COUNT];
	struct pb_ptrs tab[T_COUNT];
	struct pb_ptrs samples;
};

static void penc_release(struct penc *e)
{
	for (int i = 0; i < T_COUNT; i++) {
		pb_intern_release(&e->it[i]);
		free(e->tab[i].v);
	}
	free(e->samples.v);
	pf_buf_release(&e->scratch);
	pb_pool_release(&e->pool);
}

static int pstr(struct penc *e, const char *s, int64_t *idx)
{
	int32_t i;
	int r = pb_intern_str(&e->it[T_STR], &e->tab[T_STR], &e->pool, s, &i);
	if (r == 0)
		*idx = i;
	return r;
}

/* Interns msg (id field zero while packing) and returns its id; new messages get it set. */
static int pmsg(struct penc *e, int t, ProtobufCMessage *msg, uint64_t *id_field, uint64_t *id)
{
	int32_t idx;
	bool added;
	int r = pb_intern_packed(&e->it[t], &e->scratch, msg, &idx, &added);
	if (r < 0)
		return r;
	*id = (uint64_t)idx;
	if (!added)
		return 0;
	*id_field = (uint64_t)idx;
	return pb_ptrs_push(&e->tab[t], msg);
}

/* One Line of a Location: its Function (name, system name, file) and line number. */
static int penc_line(struct penc *e, const char *name, const char *system_name, const char *file,
		     uint32_t line, pb_line **out)
{
	pb_function *fn = pb_pool_alloc(&e->pool, sizeof(*fn));
	pb_line *ln = pb_pool_alloc(&e->pool, sizeof(*ln));
	if (!fn || !ln)
		return -ENOMEM;
	*fn = (pb_function)PERFTOOLS__PROFILES__FUNCTION__INIT;
	*ln = (pb_line)PERFTOOLS__PROFILES__LINE__INIT;
	int r = pstr(e, name, &fn->name);
	if (r == 0)
		r = pstr(e, system_name && *system_name ? system_name : name, &fn->system_name);
	if (r == 0)
		r = pstr(e, file, &fn->filename);
	if (r == 0)
		r = pmsg(e, T_FN, &fn->base, &fn->id, &ln->function_id);
	if (r < 0)
		return r;
	ln->line = line;
	*out = ln;
	return 0;
}

static int penc_location(struct penc *e, const struct pf_prof_process *p, uint32_t fi,
			 uint64_t *map_ids, uint64_t *id)
{
	const struct pf_prof_frame *f = &p->frames[fi];
	pb_location *l = pb_pool_alloc(&e->pool, sizeof(*l));
	if (!l)
		return -ENOMEM;
	*l = (pb_location)PERFTOOLS__PROFILES__LOCATION__INIT;
	l->address = f->address;
	int r;
	if (f->mapping >= 0) {
		if ((size_t)f->mapping >= p->n_mappings)
			return -EINVAL;
		if (!map_ids[f->mapping]) {
			const struct pf_prof_mapping *m = &p->mappings[f->mapping];
			pb_mapping *pm = pb_pool_alloc(&e->pool, sizeof(*pm));
			if (!pm)
				return -ENOMEM;
			*pm = (pb_mapping)PERFTOOLS__PROFILES__MAPPING__INIT;
			pm->memory_start = m->start;
			pm->memory_limit = m->limit;
			pm->file_offset = m->offset;
			/* Symbols come with the profile: pprof must not try to symbolize. */
			pm->has_functions = 1;
			r = pstr(e, m->path, &pm->filename);
			if (r == 0)
				r = pstr(e, m->build_id, &pm->build_id);
			if (r == 0)
				r = pmsg(e, T_MAP, &pm->base, &pm->id, &map_ids[f->mapping]);
			if (r < 0)
				return r;
		}
		l->mapping_id = map_ids[f->mapping];
	}
	if (f->function && *f->function) {
		/* Inlined functions first, the function they were inlined into last (pprof's
		 * Location.line order). */
		size_t n = 0;
		pb_line **lines = pb_pool_alloc(&e->pool, (f->n_inlined + 1) * sizeof(*lines));
		if (!lines)
			return -ENOMEM;
		for (uint32_t k = 0; k < f->n_inlined && f->inlined; k++) {
			const struct pf_prof_inline *in = &f->inlined[k];
			if (!in->function || !*in->function)
				continue;
			r = penc_line(e, in->function, in->system_name, in->file, in->line,
				      &lines[n]);
			if (r < 0)
				return r;
			n++;
		}
		r = penc_line(e, f->function, f->system_name, f->file, f->line, &lines[n]);
		if (r < 0)
			return r;
		l->line = lines;
		l->n_line = n + 1;
	}
	return pmsg(e, T_LOC, &l->base, &l->id, id);
}

static int penc_label(struct penc *e, const char *key, const char *s, int64_t num,
		      const char *unit, pb_label **out)
{
	pb_label *l = pb_pool_alloc(&e->pool, sizeof(*l));
	if (!l)
		return -ENOMEM;
	*l = (pb_label)PERFTOOLS__PROFILES__LABEL__INIT;
	int r = pstr(e, key, &l->key);
	if (r == 0 && s)
		r = pstr(e, s, &l->str);
	if (r == 0 && !s)
		r = pstr(e, unit, &l->num_unit);
	l->num = s ? 0 : num;
	*out = l;
	return r;
}

/* Labels pid, tid (for the implicit CPU profile always, else when known), thread (when
 * known), then the sample's own labels; the first of a key wins. */
static int penc_labels(struct penc *e, const struct pf_prof_window *w,
		       const struct pf_prof_process *p, const struct pf_prof_sample *s,
		       pb_sample *ps)
{
	size_t cap = 3 + (size_t)s->n_labels;
	pb_label **labels = pb_pool_array(&e->pool, cap, sizeof(*labels));
	const char **keys = pb_pool_array(&e->pool, cap, sizeof(*keys));
	if (!labels || !keys)
		return -ENOMEM;
	size_t n = 0;
	int r = 0;
	if (!w->n_sample_types || p->pid) {
		keys[n] = "pid";
		r = penc_label(e, "pid", NULL, p->pid, NULL, &labels[n++]);
	}
	if (r == 0 && (!w->n_sample_types || s->tid)) {
		keys[n] = "tid";
		r = penc_label(e, "tid", NULL, s->tid, NULL, &labels[n++]);
	}
	if (r == 0 && s->thread_name && *s->thread_name) {
		keys[n] = "thread";
		r = penc_label(e, "thread", s->thread_name, 0, NULL, &labels[n++]);
	}
	for (uint32_t k = 0; r == 0 && k < s->n_labels; k++) {
		const struct pf_prof_label *l = &s->labels[k];
		if (!l->key || !*l->key)
			continue;
		if (pb_key_seen(keys, n, l->key))
			continue;
		keys[n] = l->key;
		r = penc_label(e, l->key, l->str, l->num, l->unit, &labels[n++]);
	}
	ps->label = labels;
	ps->n_label = n;
	return r;
}

static int penc_process(struct penc *e, const struct pf_prof_window *w,
			const struct pf_prof_process *p)
{
	int r = -ENOMEM;
	size_t nt = w->n_sample_types ? w->n_sample_types : 2;
	int64_t period = pf_prof_window_period(w);
	uint64_t *map_ids = calloc(p->n_mappings + 1, sizeof(*map_ids));
	uint64_t *loc_ids = calloc(p->n_frames + 1, sizeof(*loc_ids));
	if (!map_ids || !loc_ids)
		goto out;
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct pf_prof_sample *s = &p->samples[i];
		if (!pf_prof_sample_nonzero(w, s))
			continue;
		r = -EINVAL;
		if (s->stack >= p->n_stacks)
			goto out;
		const struct pf_prof_stack *st = &p->stacks[s->stack];
		r = -ENOMEM;
		pb_sample *ps = pb_pool_alloc(&e->pool, sizeof(*ps));
		uint64_t *ids = pb_pool_array(&e->pool, st->n_frames, sizeof(*ids));
		int64_t *vals = pb_pool_array(&e->pool, nt, sizeof(*vals));
		if (!ps || !ids || !vals)
			goto out;
		*ps = (pb_sample)PERFTOOLS__PROFILES__SAMPLE__INIT;
		for (uint32_t k = 0; k < st->n_frames; k++) {
			uint32_t fi = st->frames[k];
			r = -EINVAL;
			if (fi >= p->n_frames)
				goto out;
			if (!loc_ids[fi] && (r = penc_location(e, p, fi, map_ids, &loc_ids[fi])) < 0)
				goto out;
			ids[k] = loc_ids[fi];
		}
		ps->location_id = ids;
		ps->n_location_id = st->n_frames;
		if (w->n_sample_types) {
			for (size_t k = 0; k < nt; k++)
				vals[k] = pf_prof_sample_value(w, s, k);
		} else {
			int64_t count = s->count > INT64_MAX ? INT64_MAX : (int64_t)s->count;
			vals[0] = count;
			vals[1] = count > INT64_MAX / period ? INT64_MAX : count * period;
		}
		ps->value = vals;
		ps->n_value = nt;
		r = penc_labels(e, w, p, s, ps);
		if (r == 0)
			r = pb_ptrs_push(&e->samples, ps);
		if (r < 0)
			goto out;
	}
	r = 0;
out:
	free(map_ids);
	free(loc_ids);
	return r;
}

int pf_pprof_encode(const struct pf_prof_window *w, int64_t pid, struct pf_buf *out,
		    struct pf_error *err)
{
	int r = pb_window_check_types(w, err);
	if (r < 0)
		return r;
	struct penc e;
	memset(&e, 0, sizeof(e));
	pf_buf_init(&e.scratch, SIZE_MAX / 4);
	for (int i = 0; i < T_COUNT; i++)
		pb_intern_init(&e.it[i], i == T_STR ? 0 : 1);
	int32_t zero;
	r = pb_intern(&e.it[T_STR], "", 0, &zero, NULL);
	char *empty = pb_pool_strdup(&e.pool, "");
	if (r == 0)
		r = empty ? pb_ptrs_push(&e.tab[T_STR], empty) : -ENOMEM;

	/* Sample types: the window's, or samples/count + cpu/nanoseconds (values count and
	 * count * period) for the implicit CPU profile. */
	size_t nt = w->n_sample_types ? w->n_sample_types : 2;
	pb_value_type *vt = pb_pool_array(&e.pool, nt + 1, sizeof(*vt));
	pb_value_type **types = pb_pool_array(&e.pool, nt, sizeof(*types));
	if (r == 0 && (!vt || !types))
		r = -ENOMEM;
	struct pf_prof_value_type per = pf_prof_window_period_type(w);
	int64_t def = 0;
	for (size_t k = 0; k < nt && r == 0; k++) {
		struct pf_prof_value_type t =
			w->n_sample_types ? w->sample_types[k]
			: k == 0	  ? (struct pf_prof_value_type){"samples", "count"}
					  : (struct pf_prof_value_type){"cpu", "nanoseconds"};
		vt[k] = (pb_value_type)PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
		r = pstr(&e, t.type, &vt[k].type);
		if (r == 0)
			r = pstr(&e, t.unit, &vt[k].unit);
		types[k] = &vt[k];
	}
	if (r == 0) {
		vt[nt] = (pb_value_type)PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
		r = pstr(&e, per.type, &vt[nt].type);
	}
	if (r == 0)
		r = pstr(&e, per.unit, &vt[nt].unit);
	if (r == 0)
		r = pstr(&e, w->n_sample_types ? w->default_sample_type : "cpu", &def);
	bool matched = false;
	for (size_t i = 0; i < w->n_processes && r == 0; i++) {
		if (pid >= 0 && w->processes[i].pid != (uint64_t)pid)
			continue;
		matched = true;
		r = penc_process(&e, w, &w->processes[i]);
		if (r == -EINVAL)
			pf_error_set(err, r, "", "processes[%zu]: index out of range", i);
	}
	if (r == 0 && !matched)
		r = -ENODATA;
	if (r < 0)
		goto out;

	pb_profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	prof.sample_type = types;
	prof.n_sample_type = nt;
	prof.sample = (pb_sample **)e.samples.v;
	prof.n_sample = e.samples.n;
	prof.mapping = (pb_mapping **)e.tab[T_MAP].v;
	prof.n_mapping = e.tab[T_MAP].n;
	prof.location = (pb_location **)e.tab[T_LOC].v;
	prof.n_location = e.tab[T_LOC].n;
	prof.function = (pb_function **)e.tab[T_FN].v;
	prof.n_function = e.tab[T_FN].n;
	prof.string_table = (char **)e.tab[T_STR].v;
	prof.n_string_table = e.tab[T_STR].n;
	prof.time_nanos = (int64_t)w->start_unix_ns;
	prof.duration_nanos = (int64_t)(w->end_unix_ns >= w->start_unix_ns
						? w->end_unix_ns - w->start_unix_ns
						: 0);
	if (per.type || per.unit)
		prof.period_type = &vt[nt];
	prof.period = pf_prof_window_period(w);
	prof.default_sample_type = def;

	size_t n = protobuf_c_message_get_packed_size(&prof.base);
	pf_buf_reset(&e.scratch);
	r = pf_buf_reserve(&e.scratch, n);
	if (r < 0)
		goto out;
	protobuf_c_message_pack(&prof.base, e.scratch.data);
	r = pf_gzip_compress(e.scratch.data, n, 6, out);
out:
	penc_release(&e);
	return r;
}

/* ---------------------------------------------------------------------------------------- */
/* Decoder.                                                                                  */

struct pdec {
	struct pf_prof_window *w;
	const pb_profile *p;
	size_t used, max;
	struct pf_error *err;
};

static void *pdalloc(struct pdec *d, size_t n, size_t size, int *rc)
{
	return pb_window_alloc(d->w, &d->used, d->max, d->err, n, size, rc);
}

static int pd_str(struct pdec *d, int64_t idx, const char **out, int *rc)
{
	if (idx < 0 || (uint64_t)idx >= d->p->n_string_table) {
		if (idx == 0) {
			*out = NULL;
			return 0;
		}
		return *rc = pf_error_set(d->err, -EBADMSG, "", "string index %" PRId64
					  " out of range", idx);
	}
	const char *s = d->p->string_table[idx];
	if (!*s) {
		*out = NULL;
		return 0;
	}
	size_t n = strlen(s) + 1;
	char *c = pdalloc(d, n, 1, rc);
	if (c)
		memcpy(c, s, n);
	*out = c;
	return *rc;
}

/* id -> position lookup through an intern table keyed by the 8 id bytes. */
static int id_index(struct pb_intern *t, uint64_t id, size_t n_known, int32_t *pos)
{
	bool added;
	int r = pb_intern(t, &id, sizeof(id), pos, &added);
	if (r < 0)
		return r;
	return added && (size_t)*pos >= n_known ? -ENOENT : 0;
}

/* String at idx copied into the window, "" kept as "" (fallback when NULL). */
static const char *pd_str_or(struct pdec *d, int64_t idx, const char *fallback, int *rc)
{
	const char *s = NULL;
	if (pd_str(d, idx, &s, rc) < 0)
		return NULL;
	if (s)
		return s;
	if (!fallback)
		return NULL;
	size_t n = strlen(fallback) + 1;
	char *c = pdalloc(d, n, 1, rc);
	if (c)
		memcpy(c, fallback, n);
	return c;
}

/* Whether string index k names `key`. */
static bool key_is(const pb_profile *p, int64_t k, const char *key)
{
	return k > 0 && (uint64_t)k < p->n_string_table && strcmp(p->string_table[k], key) == 0;
}

/* Sample types, period type, period, default sample type and frequency (when the period is in
 * nanoseconds) into the window. */
static int pdec_types(struct pdec *d)
{
	const pb_profile *p = d->p;
	struct pf_prof_window *w = d->w;
	int rc = 0;
	if (!p->n_sample_type)
		return pf_error_set(d->err, -EBADMSG, "", "pprof without sample types");
	struct pf_prof_value_type *t = pdalloc(d, p->n_sample_type, sizeof(*t), &rc);
	if (rc < 0)
		return rc;
	for (size_t k = 0; k < p->n_sample_type && rc == 0; k++) {
		t[k].type = pd_str_or(d, p->sample_type[k]->type, "unknown", &rc);
		if (rc == 0)
			pd_str(d, p->sample_type[k]->unit, &t[k].unit, &rc);
	}
	if (p->period_type && rc == 0) {
		pd_str(d, p->period_type->type, &w->period_type.type, &rc);
		if (rc == 0)
			pd_str(d, p->period_type->unit, &w->period_type.unit, &rc);
	}
	if (rc == 0 && p->default_sample_type)
		pd_str(d, p->default_sample_type, &w->default_sample_type, &rc);
	if (rc < 0)
		return rc;
	w->sample_types = t;
	w->n_sample_types = p->n_sample_type;
	w->period = p->period;
	/* Not ours: the period in nanoseconds gives the sampling frequency (Go's CPU profile:
	 * 10 ms = 100 Hz); a profile without a period type is taken as ours (cpu/nanoseconds). */
	bool ns = !p->period_type ||
		  (w->period_type.unit && strcmp(w->period_type.unit, "nanoseconds") == 0);
	if (p->period > 0 && ns) {
		int64_t hz = (1000000000 + p->period / 2) / p->period;
		w->frequency_hz = hz > 0 ? (uint32_t)hz : 1;
	}
	return 0;
}

static int pdec_run(struct pdec *d)
{
	const pb_profile *p = d->p;
	int rc = 0;
	struct pb_intern mids, lids, fids, pids;
	pb_intern_init(&mids, 0);
	pb_intern_init(&lids, 0);
	pb_intern_init(&fids, 0);
	pb_intern_init(&pids, 0);
	uint32_t *spid = NULL, *loc_first = NULL, *loc_nf = NULL;
	int32_t *sproc = NULL;
	size_t *counts = NULL;
	struct pf_prof_mapping *maps = pdalloc(d, p->n_mapping, sizeof(*maps), &rc);
	int32_t pos;
	if (rc < 0 || (rc = pdec_types(d)) < 0)
		goto out;
	/* Register ids in table order: position == table index; a repeated id is an error. */
	for (size_t i = 0; i < p->n_mapping && rc == 0; i++) {
		const pb_mapping *m = p->mapping[i];
		bool added;
		if ((rc = pb_intern(&mids, &m->id, 8, &pos, &added)) == 0 && (!added || !m->id))
			rc = pf_error_set(d->err, -EBADMSG, "", "mapping id %" PRIu64
					  " zero or repeated", m->id);
		maps[i].start = m->memory_start;
		maps[i].limit = m->memory_limit;
		if (maps[i].start >= maps[i].limit) /* not a range: dropped (fuzz regress-mapping-*) */
			maps[i].start = maps[i].limit = 0;
		maps[i].offset = m->file_offset;
		if (rc == 0)
			pd_str(d, m->filename, &maps[i].path, &rc);
		if (rc == 0)
			pd_str(d, m->build_id, &maps[i].build_id, &rc);
	}
	for (size_t i = 0; i < p->n_function && rc == 0; i++) {
		bool added;
		if ((rc = pb_intern(&fids, &p->function[i]->id, 8, &pos, &added)) == 0 &&
		    (!added || !p->function[i]->id))
			rc = pf_error_set(d->err, -EBADMSG, "", "function id zero or repeated");
	}
	/* A location becomes one frame per line (inlined functions, innermost first, as pprof
	 * lists them), or one frame when it has no line. */
	loc_first = calloc(p->n_location + 1, sizeof(*loc_first));
	loc_nf = calloc(p->n_location + 1, sizeof(*loc_nf));
	if (!loc_first || !loc_nf) {
		rc = -ENOMEM;
		goto out;
	}
	size_t n_frames = 0;
	for (size_t i = 0; i < p->n_location && rc == 0; i++) {
		loc_first[i] = (uint32_t)n_frames;
		loc_nf[i] = p->location[i]->n_line ? (uint32_t)p->location[i]->n_line : 1;
		n_frames += loc_nf[i];
		if (n_frames > UINT32_MAX)
			rc = pf_error_set(d->err, -E2BIG, "", "too many frames");
	}
	struct pf_prof_frame *frames = NULL;
	if (rc == 0)
		frames = pdalloc(d, n_frames, sizeof(*frames), &rc);
	for (size_t i = 0; i < p->n_location && rc == 0; i++) {
		const pb_location *l = p->location[i];
		bool added;
		if ((rc = pb_intern(&lids, &l->id, 8, &pos, &added)) == 0 && (!added || !l->id))
			rc = pf_error_set(d->err, -EBADMSG, "", "location id zero or repeated");
		if (rc < 0)
			break;
		int32_t mapping = -1;
		uint8_t kind = PF_FRAME_NATIVE;
		if (l->mapping_id) {
			if ((rc = id_index(&mids, l->mapping_id, p->n_mapping, &pos)) < 0)
				break;
			mapping = pos;
			const char *path = maps[pos].path;
			if (path && strcmp(path, "[kernel.kallsyms]") == 0)
				kind = PF_FRAME_KERNEL;
		}
		for (uint32_t k = 0; k < loc_nf[i] && rc == 0; k++) {
			struct pf_prof_frame *f = &frames[loc_first[i] + k];
			f->address = l->address;
			f->mapping = mapping;
			f->kind = kind;
			if (!l->n_line || !l->line[k]->function_id)
				continue;
			if ((rc = id_index(&fids, l->line[k]->function_id, p->n_function, &pos)) < 0)
				break;
			const pb_function *fn = p->function[pos];
			if (pd_str(d, fn->name, &f->function, &rc) == 0 && !f->function)
				pd_str(d, fn->system_name, &f->function, &rc);
			else if (rc == 0 && f->function && fn->system_name > 0 &&
				 (uint64_t)fn->system_name < d->p->n_string_table &&
				 strcmp(d->p->string_table[fn->system_name], f->function))
				pd_str(d, fn->system_name, &f->system_name, &rc);
			if (rc == 0)
				pd_str(d, fn->filename, &f->file, &rc);
			f->line = l->line[k]->line > 0 && l->line[k]->line <= UINT32_MAX
					  ? (uint32_t)l->line[k]->line
					  : 0;
		}
	}
	if (rc == -ENOENT)
		rc = pf_error_set(d->err, -EBADMSG, "", "reference to an unknown id");
	if (rc < 0)
		goto out;

	/* Processes by pid label. Keys are compared by content: the string table may repeat a
	 * string (fuzz, regress-duplicate-tid-string). */
	spid = calloc(p->n_sample + 1, sizeof(*spid));
	sproc = calloc(p->n_sample + 1, sizeof(*sproc));
	if (!spid || !sproc) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < p->n_sample; i++) {
		const pb_sample *s = p->sample[i];
		for (size_t k = 0; k < s->n_label; k++)
			if (key_is(p, s->label[k]->key, "pid") && s->label[k]->num > 0 &&
			    s->label[k]->num <= UINT32_MAX)
				spid[i] = (uint32_t)s->label[k]->num;
		if ((rc = pb_intern(&pids, &spid[i], sizeof(spid[i]), &sproc[i], NULL)) < 0)
			goto out;
	}
	size_t n_procs = pids.n;
	counts = calloc(n_procs + 1, sizeof(*counts));
	struct pf_prof_process *procs = pdalloc(d, n_procs, sizeof(*procs), &rc);
	if (!counts && rc == 0)
		rc = -ENOMEM;
	if (rc < 0)
		goto out;
	for (size_t i = 0; i < p->n_sample; i++)
		counts[sproc[i]]++;
	for (size_t k = 0; k < n_procs; k++) {
		struct pf_prof_process *pr = &procs[k];
		pr->mappings = maps;
		pr->n_mappings = p->n_mapping;
		pr->frames = frames;
		pr->n_frames = n_frames;
		pr->stacks = pdalloc(d, counts[k], sizeof(struct pf_prof_stack), &rc);
		pr->samples = pdalloc(d, counts[k], sizeof(struct pf_prof_sample), &rc);
		if (rc < 0)
			goto out;
	}
	size_t nt = p->n_sample_type;
	for (size_t i = 0; i < p->n_sample; i++) {
		const pb_sample *s = p->sample[i];
		struct pf_prof_process *pr = &procs[sproc[i]];
		pr->pid = spid[i];
		struct pf_prof_stack *st = (struct pf_prof_stack *)&pr->stacks[pr->n_stacks];
		struct pf_prof_sample *o = (struct pf_prof_sample *)&pr->samples[pr->n_samples];
		if (s->n_value != nt) {
			rc = pf_error_set(d->err, -EBADMSG, "", "sample %zu: %zu values for %zu "
					  "sample types", i, s->n_value, nt);
			goto out;
		}
		size_t depth = 0;
		for (size_t k = 0; k < s->n_location_id; k++) {
			if ((rc = id_index(&lids, s->location_id[k], p->n_location, &pos)) < 0) {
				rc = pf_error_set(d->err, -EBADMSG, "", "unknown location id %" PRIu64,
						  s->location_id[k]);
				goto out;
			}
			depth += loc_nf[pos];
		}
		if (depth > UINT32_MAX) {
			rc = pf_error_set(d->err, -EBADMSG, "", "stack too deep");
			goto out;
		}
		uint32_t *fr = pdalloc(d, depth, sizeof(*fr), &rc);
		int64_t *vals = pdalloc(d, nt, sizeof(*vals), &rc);
		if (rc < 0)
			goto out;
		size_t n = 0;
		for (size_t k = 0; k < s->n_location_id; k++) {
			id_index(&lids, s->location_id[k], p->n_location, &pos);
			for (uint32_t j = 0; j < loc_nf[pos]; j++)
				fr[n++] = loc_first[pos] + j;
		}
		st->frames = fr;
		st->n_frames = (uint32_t)depth;
		o->stack = (uint32_t)pr->n_stacks++;
		memcpy(vals, s->value, nt * sizeof(*vals));
		o->values = vals;
		o->count = vals[0] > 0 ? (uint64_t)vals[0] : 0;
		struct pf_prof_label *labels = s->n_label
						       ? pdalloc(d, s->n_label, sizeof(*labels), &rc)
						       : NULL;
		if (rc < 0)
			goto out;
		for (size_t k = 0; k < s->n_label; k++) {
			const pb_label *l = s->label[k];
			if (key_is(p, l->key, "pid") && !l->str)
				continue;
			if (key_is(p, l->key, "tid") && !l->str) {
				if (l->num > 0 && l->num <= UINT32_MAX)
					o->tid = (uint32_t)l->num;
				continue;
			}
			if (key_is(p, l->key, "thread")) {
				if (pd_str(d, l->str, &o->thread_name, &rc) < 0)
					goto out;
				continue;
			}
			struct pf_prof_label *ol = &labels[o->n_labels];
			if (pd_str(d, l->key, &ol->key, &rc) < 0)
				goto out;
			if (!ol->key)
				continue;
			bool dup = false;
			for (uint32_t j = 0; j < o->n_labels && !dup; j++)
				dup = strcmp(labels[j].key, ol->key) == 0;
			if (dup)
				continue;
			if (l->str) {
				ol->str = pd_str_or(d, l->str, "", &rc);
			} else {
				ol->num = l->num;
				pd_str(d, l->num_unit, &ol->unit, &rc);
			}
			if (rc < 0)
				goto out;
			o->n_labels++;
		}
		o->labels = o->n_labels ? labels : NULL;
		pr->n_samples++;
	}
	d->w->processes = procs;
	d->w->n_processes = n_procs;
	d->w->start_unix_ns = p->time_nanos > 0 ? (uint64_t)p->time_nanos : 0;
	d->w->end_unix_ns =
		d->w->start_unix_ns + (p->duration_nanos > 0 ? (uint64_t)p->duration_nanos : 0);
out:
	free(spid);
	free(sproc);
	free(counts);
	free(loc_first);
	free(loc_nf);
	pb_intern_release(&mids);
	pb_intern_release(&lids);
	pb_intern_release(&fids);
	pb_intern_release(&pids);
	return rc;
}

int pf_pprof_decode(const uint8_t *data, size_t len, size_t max_bytes,
		    struct pf_prof_window **out, struct pf_error *err)
{
	struct pf_buf raw;
	pf_buf_init(&raw, max_bytes);
	int r;
	if (pf_gzip_is_gzip(data, len)) {
		r = pf_gzip_decompress(data, len, max_bytes, &raw);
		if (r < 0) {
			pf_buf_release(&raw);
			return pf_error_set(err, r, "", r == -E2BIG ? "pprof over %zu bytes"
								    : "bad gzip data (limit %zu)",
					    max_bytes);
		}
		data = raw.data;
		len = raw.len;
	} else if (len > max_bytes) {
		return pf_error_set(err, -E2BIG, "", "pprof over %zu bytes", max_bytes);
	}
	r = pb_wire_scan(&perftools__profiles__profile__descriptor, data, len,
			 PPROF_MAX_WIRE_DEPTH);
	if (r < 0) {
		pf_buf_release(&raw);
		return pf_error_set(err, -EBADMSG, "", "malformed pprof profile");
	}
	struct pb_capped_alloc ca;
	pb_capped_alloc_init(&ca, max_bytes);
	pb_profile *p = (pb_profile *)protobuf_c_message_unpack(
		&perftools__profiles__profile__descriptor, &ca.a, len, data);
	pf_buf_release(&raw);
	if (!p) {
		pb_capped_alloc_release(&ca);
		return pf_error_set(err, ca.exceeded ? -E2BIG : -EBADMSG, "",
				    ca.exceeded ? "pprof over the byte limit" : "malformed pprof");
	}
	struct pdec d = {.p = p, .max = max_bytes, .used = ca.used, .err = err};
	d.w = pf_prof_window_new();
	r = d.w ? pdec_run(&d) : -ENOMEM;
	pb_capped_alloc_release(&ca);
	if (r < 0) {
		pf_prof_window_free(d.w);
		return r;
	}
	*out = d.w;
	return 0;
}
