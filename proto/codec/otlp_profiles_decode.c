/* otlp_profiles_decode.c — the decoder of otlp_profiles.h (the encoder is otlp_profiles.c).
 *
 * Capped single-pass unpack with its depth guard (pb_unpack.h; protobuf-c's for what it leaves),
 * then two passes per Profile: the first marks (and
 * range-checks) every dictionary entry the samples reach and numbers them densely, the second
 * copies them into the window's arena. */
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
#include "pb_unpack.h"
#include "pb_util.h"

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
				for (size_t a = 0;
				     !d->w->default_sample_type && a < pp->n_attribute_indices;
				     a++) {
					const char *key, *val;
					const pb_anyvalue *v;
					char tmp[32];
					if (dict_attr(d, pp->attribute_indices[a], &key, &v) < 0 ||
					    any_text(d, v, tmp, sizeof(tmp), &val) < 0)
						return -EBADMSG;
					if (val && *val &&
					    strcmp(key, PF_OTLP_DEFAULT_TYPE_ATTR) == 0)
						d->w->default_sample_type = dstr(d, val, &rc);
				}
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
	pb_request *req = NULL;
	int r = pb_unpack(desc, data, len, PF_OTLP_MAX_WIRE_DEPTH, &ca.a, (ProtobufCMessage **)&req);
	if (r == -EAGAIN) {
		/* outside the single-pass unpacker: protobuf-c's, after its depth guard */
		pb_capped_alloc_release(&ca);
		pb_capped_alloc_init(&ca, max_bytes);
		r = pb_wire_scan(desc, data, len, PF_OTLP_MAX_WIRE_DEPTH);
		if (r == 0) {
			req = (pb_request *)protobuf_c_message_unpack(desc, &ca.a, len, data);
			r = req ? 0 : -EBADMSG;
		}
	}
	if (r < 0) {
		pb_capped_alloc_release(&ca);
		if (r == -ELOOP)
			return pf_error_set(err, r, "", "messages nested deeper than %d",
					    PF_OTLP_MAX_WIRE_DEPTH);
		if (ca.exceeded)
			return pf_error_set(err, -E2BIG, "", "decoded message over %zu bytes",
					    max_bytes);
		if (r == -ENOMEM)
			return pf_error_set(err, r, "", "out of memory");
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
	pb_capped_alloc_release(&ca);
	if (r < 0) {
		pf_prof_window_free(d.w);
		return r;
	}
	*out = d.w;
	return 0;
}
