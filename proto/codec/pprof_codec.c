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
#include "prof_util.h"

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

struct ptrs {
	void **v;
	size_t n, cap;
};

static int ptrs_push(struct ptrs *t, void *p)
{
	if (t->n == t->cap) {
		size_t c = t->cap ? t->cap * 2 : 64;
		void **v = realloc(t->v, c * sizeof(*v));
		if (!v)
			return -ENOMEM;
		t->v = v;
		t->cap = c;
	}
	t->v[t->n++] = p;
	return 0;
}

enum { T_STR, T_MAP, T_FN, T_LOC, T_COUNT };

struct penc {
	struct prof_pool pool;
	struct pf_buf scratch;
	struct prof_intern it[T_COUNT];
	struct ptrs tab[T_COUNT];
	struct ptrs samples;
};

static void penc_release(struct penc *e)
{
	for (int i = 0; i < T_COUNT; i++) {
		prof_intern_release(&e->it[i]);
		free(e->tab[i].v);
	}
	free(e->samples.v);
	pf_buf_release(&e->scratch);
	prof_pool_release(&e->pool);
}

static int pstr(struct penc *e, const char *s, int64_t *idx)
{
	if (!s || !*s) {
		*idx = 0;
		return 0;
	}
	int32_t i;
	bool added;
	int r = prof_intern(&e->it[T_STR], s, strlen(s), &i, &added);
	if (r < 0)
		return r;
	*idx = i;
	if (!added)
		return 0;
	char *d = prof_pool_strdup(&e->pool, s);
	return d ? ptrs_push(&e->tab[T_STR], d) : -ENOMEM;
}

/* Interns msg (id field zero while packing) and returns its id; new messages get it set. */
static int pmsg(struct penc *e, int t, ProtobufCMessage *msg, uint64_t *id_field, uint64_t *id)
{
	size_t n = protobuf_c_message_get_packed_size(msg);
	pf_buf_reset(&e->scratch);
	int r = pf_buf_reserve(&e->scratch, n);
	if (r < 0)
		return r;
	protobuf_c_message_pack(msg, e->scratch.data);
	int32_t idx;
	bool added;
	r = prof_intern(&e->it[t], e->scratch.data, n, &idx, &added);
	if (r < 0)
		return r;
	*id = (uint64_t)idx;
	if (!added)
		return 0;
	*id_field = (uint64_t)idx;
	return ptrs_push(&e->tab[t], msg);
}

static int penc_location(struct penc *e, const struct pf_prof_process *p, uint32_t fi,
			 uint64_t *map_ids, uint64_t *id)
{
	const struct pf_prof_frame *f = &p->frames[fi];
	pb_location *l = prof_pool_alloc(&e->pool, sizeof(*l));
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
			pb_mapping *pm = prof_pool_alloc(&e->pool, sizeof(*pm));
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
		pb_function *fn = prof_pool_alloc(&e->pool, sizeof(*fn));
		pb_line *ln = prof_pool_alloc(&e->pool, sizeof(*ln));
		pb_line **lines = prof_pool_alloc(&e->pool, sizeof(*lines));
		if (!fn || !ln || !lines)
			return -ENOMEM;
		*fn = (pb_function)PERFTOOLS__PROFILES__FUNCTION__INIT;
		*ln = (pb_line)PERFTOOLS__PROFILES__LINE__INIT;
		r = pstr(e, f->function, &fn->name);
		if (r == 0)
			r = pstr(e, f->function, &fn->system_name);
		if (r == 0)
			r = pstr(e, f->file, &fn->filename);
		if (r == 0)
			r = pmsg(e, T_FN, &fn->base, &fn->id, &ln->function_id);
		if (r < 0)
			return r;
		ln->line = f->line;
		lines[0] = ln;
		l->line = lines;
		l->n_line = 1;
	}
	return pmsg(e, T_LOC, &l->base, &l->id, id);
}

static int penc_label(struct penc *e, const char *key, const char *s, int64_t num,
		      pb_label **out)
{
	pb_label *l = prof_pool_alloc(&e->pool, sizeof(*l));
	if (!l)
		return -ENOMEM;
	*l = (pb_label)PERFTOOLS__PROFILES__LABEL__INIT;
	int r = pstr(e, key, &l->key);
	if (r == 0 && s)
		r = pstr(e, s, &l->str);
	l->num = s ? 0 : num;
	*out = l;
	return r;
}

static int penc_process(struct penc *e, const struct pf_prof_process *p, int64_t period)
{
	int r = -ENOMEM;
	uint64_t *map_ids = calloc(p->n_mappings + 1, sizeof(*map_ids));
	uint64_t *loc_ids = calloc(p->n_frames + 1, sizeof(*loc_ids));
	if (!map_ids || !loc_ids)
		goto out;
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct pf_prof_sample *s = &p->samples[i];
		if (!s->count)
			continue;
		r = -EINVAL;
		if (s->stack >= p->n_stacks)
			goto out;
		const struct pf_prof_stack *st = &p->stacks[s->stack];
		r = -ENOMEM;
		pb_sample *ps = prof_pool_alloc(&e->pool, sizeof(*ps));
		uint64_t *ids = prof_pool_array(&e->pool, st->n_frames, sizeof(*ids));
		int64_t *vals = prof_pool_array(&e->pool, 2, sizeof(*vals));
		pb_label **labels = prof_pool_array(&e->pool, 3, sizeof(*labels));
		if (!ps || !ids || !vals || !labels)
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
		int64_t count = s->count > INT64_MAX ? INT64_MAX : (int64_t)s->count;
		vals[0] = count;
		vals[1] = count > INT64_MAX / period ? INT64_MAX : count * period;
		ps->value = vals;
		ps->n_value = 2;
		r = penc_label(e, "pid", NULL, p->pid, &labels[0]);
		if (r == 0)
			r = penc_label(e, "tid", NULL, s->tid, &labels[1]);
		ps->n_label = 2;
		if (r == 0 && s->thread_name && *s->thread_name) {
			r = penc_label(e, "thread", s->thread_name, 0, &labels[2]);
			ps->n_label = 3;
		}
		if (r == 0)
			r = ptrs_push(&e->samples, ps);
		if (r < 0)
			goto out;
		ps->label = labels;
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
	if (!w->frequency_hz || w->frequency_hz > 1000000000u)
		return pf_error_set(err, -EINVAL, "", "frequency_hz must be 1..1e9, got %" PRIu32,
				    w->frequency_hz);
	struct penc e;
	memset(&e, 0, sizeof(e));
	pf_buf_init(&e.scratch, SIZE_MAX / 4);
	for (int i = 0; i < T_COUNT; i++)
		prof_intern_init(&e.it[i], i == T_STR ? 0 : 1);
	int32_t zero;
	int r = prof_intern(&e.it[T_STR], "", 0, &zero, NULL);
	char *empty = prof_pool_strdup(&e.pool, "");
	if (r == 0)
		r = empty ? ptrs_push(&e.tab[T_STR], empty) : -ENOMEM;
	int64_t period = (int64_t)(1000000000ull / w->frequency_hz);
	int64_t st[4];
	const char *names[4] = {"samples", "count", "cpu", "nanoseconds"};
	for (int i = 0; i < 4 && r == 0; i++)
		r = pstr(&e, names[i], &st[i]);
	bool matched = false;
	for (size_t i = 0; i < w->n_processes && r == 0; i++) {
		if (pid >= 0 && w->processes[i].pid != (uint64_t)pid)
			continue;
		matched = true;
		r = penc_process(&e, &w->processes[i], period);
		if (r == -EINVAL)
			pf_error_set(err, r, "", "processes[%zu]: index out of range", i);
	}
	if (r == 0 && !matched)
		r = -ENODATA;
	if (r < 0)
		goto out;

	pb_value_type vt[3] = {PERFTOOLS__PROFILES__VALUE_TYPE__INIT,
			       PERFTOOLS__PROFILES__VALUE_TYPE__INIT,
			       PERFTOOLS__PROFILES__VALUE_TYPE__INIT};
	vt[0].type = st[0];
	vt[0].unit = st[1];
	vt[1].type = st[2];
	vt[1].unit = st[3];
	vt[2] = vt[1];
	pb_value_type *types[2] = {&vt[0], &vt[1]};
	pb_profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	prof.sample_type = types;
	prof.n_sample_type = 2;
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
	prof.period_type = &vt[2];
	prof.period = period;
	prof.default_sample_type = st[2];

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
	if (size && n > SIZE_MAX / size) {
		*rc = -E2BIG;
		return NULL;
	}
	size_t bytes = n * size;
	if (bytes > d->max || d->used > d->max - bytes) {
		*rc = pf_error_set(d->err, -E2BIG, "", "decoded profile larger than %zu bytes",
				   d->max);
		return NULL;
	}
	d->used += bytes + 16;
	void *p = pf_prof_alloc(d->w, bytes);
	if (!p)
		*rc = -ENOMEM;
	return p;
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
static int id_index(struct prof_intern *t, uint64_t id, size_t n_known, int32_t *pos)
{
	bool added;
	int r = prof_intern(t, &id, sizeof(id), pos, &added);
	if (r < 0)
		return r;
	return added && (size_t)*pos >= n_known ? -ENOENT : 0;
}

static int pdec_run(struct pdec *d)
{
	const pb_profile *p = d->p;
	int rc = 0;
	struct prof_intern mids, lids, fids, pids;
	prof_intern_init(&mids, 0);
	prof_intern_init(&lids, 0);
	prof_intern_init(&fids, 0);
	prof_intern_init(&pids, 0);
	struct pf_prof_mapping *maps = pdalloc(d, p->n_mapping, sizeof(*maps), &rc);
	struct pf_prof_frame *frames = pdalloc(d, p->n_location, sizeof(*frames), &rc);
	int32_t pos;
	if (rc < 0)
		goto out;
	/* Register ids in table order: position == table index; a repeated id is an error. */
	for (size_t i = 0; i < p->n_mapping && rc == 0; i++) {
		const pb_mapping *m = p->mapping[i];
		bool added;
		if ((rc = prof_intern(&mids, &m->id, 8, &pos, &added)) == 0 && (!added || !m->id))
			rc = pf_error_set(d->err, -EBADMSG, "", "mapping id %" PRIu64
					  " zero or repeated", m->id);
		maps[i].start = m->memory_start;
		maps[i].limit = m->memory_limit;
		maps[i].offset = m->file_offset;
		if (rc == 0)
			pd_str(d, m->filename, &maps[i].path, &rc);
		if (rc == 0)
			pd_str(d, m->build_id, &maps[i].build_id, &rc);
	}
	for (size_t i = 0; i < p->n_function && rc == 0; i++) {
		bool added;
		if ((rc = prof_intern(&fids, &p->function[i]->id, 8, &pos, &added)) == 0 &&
		    (!added || !p->function[i]->id))
			rc = pf_error_set(d->err, -EBADMSG, "", "function id zero or repeated");
	}
	for (size_t i = 0; i < p->n_location && rc == 0; i++) {
		const pb_location *l = p->location[i];
		bool added;
		if ((rc = prof_intern(&lids, &l->id, 8, &pos, &added)) == 0 && (!added || !l->id))
			rc = pf_error_set(d->err, -EBADMSG, "", "location id zero or repeated");
		if (rc < 0)
			break;
		frames[i].address = l->address;
		frames[i].mapping = -1;
		if (l->mapping_id) {
			if ((rc = id_index(&mids, l->mapping_id, p->n_mapping, &pos)) < 0)
				break;
			frames[i].mapping = pos;
			const char *path = maps[pos].path;
			if (path && strcmp(path, "[kernel.kallsyms]") == 0)
				frames[i].kind = PF_FRAME_KERNEL;
		}
		if (l->n_line && l->line[0]->function_id) {
			if ((rc = id_index(&fids, l->line[0]->function_id, p->n_function, &pos)) < 0)
				break;
			const pb_function *fn = p->function[pos];
			if (pd_str(d, fn->name, &frames[i].function, &rc) == 0 &&
			    !frames[i].function)
				pd_str(d, fn->system_name, &frames[i].function, &rc);
			if (rc == 0)
				pd_str(d, fn->filename, &frames[i].file, &rc);
			frames[i].line = l->line[0]->line > 0 && l->line[0]->line <= UINT32_MAX
						 ? (uint32_t)l->line[0]->line
						 : 0;
		}
	}
	if (rc == -ENOENT)
		rc = pf_error_set(d->err, -EBADMSG, "", "reference to an unknown id");
	if (rc < 0)
		goto out;

	/* Processes by pid label. */
	int64_t pid_key = -1, tid_key = -1, thread_key = -1;
	for (size_t i = 1; i < p->n_string_table; i++) {
		if (strcmp(p->string_table[i], "pid") == 0)
			pid_key = (int64_t)i;
		else if (strcmp(p->string_table[i], "tid") == 0)
			tid_key = (int64_t)i;
		else if (strcmp(p->string_table[i], "thread") == 0)
			thread_key = (int64_t)i;
	}
	uint32_t *spid = calloc(p->n_sample + 1, sizeof(*spid));
	int32_t *sproc = calloc(p->n_sample + 1, sizeof(*sproc));
	size_t *counts = NULL;
	if (!spid || !sproc) {
		rc = -ENOMEM;
		goto out2;
	}
	for (size_t i = 0; i < p->n_sample; i++) {
		const pb_sample *s = p->sample[i];
		for (size_t k = 0; k < s->n_label; k++)
			if (s->label[k]->key == pid_key && s->label[k]->num > 0 &&
			    s->label[k]->num <= UINT32_MAX)
				spid[i] = (uint32_t)s->label[k]->num;
		if ((rc = prof_intern(&pids, &spid[i], sizeof(spid[i]), &sproc[i], NULL)) < 0)
			goto out2;
	}
	size_t n_procs = pids.n;
	counts = calloc(n_procs + 1, sizeof(*counts));
	struct pf_prof_process *procs = pdalloc(d, n_procs, sizeof(*procs), &rc);
	if (!counts) {
		rc = -ENOMEM;
		goto out2;
	}
	if (rc < 0)
		goto out2;
	for (size_t i = 0; i < p->n_sample; i++)
		counts[sproc[i]]++;
	for (size_t k = 0; k < n_procs; k++) {
		struct pf_prof_process *pr = &procs[k];
		pr->mappings = maps;
		pr->n_mappings = p->n_mapping;
		pr->frames = frames;
		pr->n_frames = p->n_location;
		pr->stacks = pdalloc(d, counts[k], sizeof(struct pf_prof_stack), &rc);
		pr->samples = pdalloc(d, counts[k], sizeof(struct pf_prof_sample), &rc);
		if (rc < 0)
			goto out2;
	}
	for (size_t i = 0; i < p->n_sample; i++) {
		const pb_sample *s = p->sample[i];
		struct pf_prof_process *pr = &procs[sproc[i]];
		pr->pid = spid[i];
		struct pf_prof_stack *st = (struct pf_prof_stack *)&pr->stacks[pr->n_stacks];
		struct pf_prof_sample *o = (struct pf_prof_sample *)&pr->samples[pr->n_samples];
		uint32_t *fr = pdalloc(d, s->n_location_id, sizeof(*fr), &rc);
		if (rc < 0 || s->n_location_id > UINT32_MAX)
			goto out2;
		for (size_t k = 0; k < s->n_location_id; k++) {
			if ((rc = id_index(&lids, s->location_id[k], p->n_location, &pos)) < 0) {
				rc = pf_error_set(d->err, -EBADMSG, "", "unknown location id %" PRIu64,
						  s->location_id[k]);
				goto out2;
			}
			fr[k] = (uint32_t)pos;
		}
		st->frames = fr;
		st->n_frames = (uint32_t)s->n_location_id;
		o->stack = (uint32_t)pr->n_stacks++;
		if (s->n_value && s->value[0] < 0) {
			rc = pf_error_set(d->err, -EBADMSG, "", "negative sample value");
			goto out2;
		}
		o->count = s->n_value ? (uint64_t)s->value[0] : 0;
		for (size_t k = 0; k < s->n_label; k++) {
			const pb_label *l = s->label[k];
			if (l->key == tid_key && l->num > 0 && l->num <= UINT32_MAX)
				o->tid = (uint32_t)l->num;
			else if (l->key == thread_key && pd_str(d, l->str, &o->thread_name, &rc))
				goto out2;
		}
		pr->n_samples++;
	}
	d->w->processes = procs;
	d->w->n_processes = n_procs;
	d->w->start_unix_ns = p->time_nanos > 0 ? (uint64_t)p->time_nanos : 0;
	d->w->end_unix_ns =
		d->w->start_unix_ns + (p->duration_nanos > 0 ? (uint64_t)p->duration_nanos : 0);
	if (p->period > 0) {
		int64_t hz = (1000000000 + p->period / 2) / p->period;
		d->w->frequency_hz = hz > 0 ? (uint32_t)hz : 1;
	}
out2:
	free(spid);
	free(sproc);
	free(counts);
out:
	prof_intern_release(&mids);
	prof_intern_release(&lids);
	prof_intern_release(&fids);
	prof_intern_release(&pids);
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
	r = prof_wire_scan(&perftools__profiles__profile__descriptor, data, len,
			   PPROF_MAX_WIRE_DEPTH);
	if (r < 0) {
		pf_buf_release(&raw);
		return pf_error_set(err, -EBADMSG, "", "malformed pprof profile");
	}
	struct prof_capped_alloc ca;
	prof_capped_alloc_init(&ca, max_bytes);
	pb_profile *p = (pb_profile *)protobuf_c_message_unpack(
		&perftools__profiles__profile__descriptor, &ca.a, len, data);
	pf_buf_release(&raw);
	if (!p)
		return pf_error_set(err, ca.exceeded ? -E2BIG : -EBADMSG, "",
				    ca.exceeded ? "pprof over the byte limit" : "malformed pprof");
	struct pdec d = {.p = p, .max = max_bytes, .used = ca.used, .err = err};
	d.w = pf_prof_window_new();
	r = d.w ? pdec_run(&d) : -ENOMEM;
	protobuf_c_message_free_unpacked(&p->base, &ca.a);
	if (r < 0) {
		pf_prof_window_free(d.w);
		return r;
	}
	*out = d.w;
	return 0;
}
