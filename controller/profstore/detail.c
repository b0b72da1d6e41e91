/* detail.c — see detail.h.
 *
 * Formats (LEB128 varints; "str" = varint 0 for NULL, else length + 1 and the bytes; "sv" =
 * zigzag varint of a signed value):
 *  location: kind, address, str function, str system_name, str file, line, has_mapping
 *    [start, limit, offset, str path, str build_id], n_inlined, per inline: str function,
 *    str system_name, str file, line.
 *  samples part: version 1, start, end, frequency_hz, lost_samples, str host, n_sample_types
 *    [str type, str unit]..., str period type, str period unit, sv period, str default type,
 *    pid, 16 bytes profile_id, n_attrs [str key, str value]..., str payload format, payload
 *    length + 1 (0: none) and bytes, n_stacks, n_strings [str]..., n_samples, then per
 *    sample: sv of its stack minus (the previous sample's + 1), sv of its tid minus the
 *    pid, thread name (string index + 1, 0 none), count, n_timestamps and
 *    each as sv of its difference to the one before (the first: to the window start), a
 *    flags varint (1 trace link, 2 values, 4 event values) with then 24 link bytes, the
 *    values (sv each, n_sample_types of them) and the event values (sv, n_timestamps),
 *    n_labels and per label: key, str (string indices + 1), sv num, unit (index + 1). */
#include "detail.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "pf/array.h"
#include "pf/compiler.h"

#define DETAIL_VERSION 1
#define F_LINK 1u
#define F_VALUES 2u
#define F_EVENTS 4u

/* ---- Writing. */

static int put_u(struct pf_buf *b, uint64_t v)
{
	if (b->cap - b->len < 10) /* the common case writes in place */
		return pf_buf_append_uvarint(b, v);
	uint8_t *d = b->data + b->len;
	while (v > 0x7f) {
		*d++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*d++ = (uint8_t)v;
	b->len = (size_t)(d - b->data);
	return 0;
}

static int put_s(struct pf_buf *b, int64_t v)
{
	return put_u(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

static int put_str(struct pf_buf *b, const char *s)
{
	if (!s)
		return put_u(b, 0);
	size_t n = strlen(s);
	int rc = put_u(b, (uint64_t)n + 1);
	return rc ? rc : pf_buf_append(b, s, n);
}

static int put_location(struct pf_buf *b, const struct pf_prof_process *p,
			const struct pf_prof_frame *f)
{
	int rc = put_u(b, f->kind);
	rc = rc ? rc : put_u(b, f->address);
	rc = rc ? rc : put_str(b, f->function);
	rc = rc ? rc : put_str(b, f->system_name);
	rc = rc ? rc : put_str(b, f->file);
	rc = rc ? rc : put_u(b, f->line);
	bool mapped = f->mapping >= 0 && (size_t)f->mapping < p->n_mappings;
	rc = rc ? rc : put_u(b, mapped);
	if (mapped) {
		const struct pf_prof_mapping *m = &p->mappings[f->mapping];
		rc = rc ? rc : put_u(b, m->start);
		rc = rc ? rc : put_u(b, m->limit);
		rc = rc ? rc : put_u(b, m->offset);
		rc = rc ? rc : put_str(b, m->path);
		rc = rc ? rc : put_str(b, m->build_id);
	}
	rc = rc ? rc : put_u(b, f->n_inlined);
	for (uint32_t i = 0; rc == 0 && i < f->n_inlined; i++) {
		const struct pf_prof_inline *in = &f->inlined[i];
		rc = put_str(b, in->function);
		rc = rc ? rc : put_str(b, in->system_name);
		rc = rc ? rc : put_str(b, in->file);
		rc = rc ? rc : put_u(b, in->line);
	}
	return rc;
}

/* The samples' strings (thread names, label keys, strings and units), each once. */
struct strtab {
	const char **s;
	size_t n, cap;
	size_t *slot; /* open addressing over s, n_slot a power of two; index + 1 */
	size_t n_slot;
};

static uint64_t str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

static size_t strtab_hash(const void *ctx, size_t i)
{
	return str_hash(((const struct strtab *)ctx)->s[i]);
}

/* *ref = index + 1 of s (0 for NULL). */
static int strtab_ref(struct strtab *t, const char *s, uint64_t *ref)
{
	if (!s) {
		*ref = 0;
		return 0;
	}
	if (pf_array_index_reserve(&t->slot, &t->n_slot, t->n, 64, strtab_hash, t) < 0)
		return -ENOMEM;
	size_t j = str_hash(s) & (t->n_slot - 1);
	while (t->slot[j]) {
		if (strcmp(t->s[t->slot[j] - 1], s) == 0) {
			*ref = t->slot[j];
			return 0;
		}
		j = (j + 1) & (t->n_slot - 1);
	}
	if (PF_ARRAY_GROW(t->s, t->cap, t->n + 1, 32) < 0)
		return -ENOMEM;
	t->s[t->n++] = s;
	t->slot[j] = t->n;
	*ref = t->n;
	return 0;
}

static int put_samples(struct pf_buf *b, const struct pf_prof_window *w,
		       const struct pf_prof_process *p, struct pf_error *err)
{
	struct strtab t = {0};
	struct pf_buf body;
	size_t nt = w->n_sample_types;
	int64_t prev_stack = -1;
	uint64_t ref;
	int rc = 0;

	/* the samples first (their strings go to the table), then the table before them */
	pf_buf_init(&body, 0);
	for (size_t i = 0; rc == 0 && i < p->n_samples; i++) {
		const struct pf_prof_sample *s = &p->samples[i];
		if (s->stack >= p->n_stacks || (s->n_timestamps && !s->timestamps) ||
		    (s->n_labels && !s->labels)) {
			rc = pf_error_set(err, -EINVAL, NULL, "sample %zu: bad stack or arrays", i);
			break;
		}
		unsigned flags = 0;
		for (int k = 0; k < 16; k++)
			if (s->trace_id[k])
				flags |= F_LINK;
		for (int k = 0; k < 8; k++)
			if (s->span_id[k])
				flags |= F_LINK;
		if (s->values && nt)
			flags |= F_VALUES;
		if (s->event_values && s->n_timestamps)
			flags |= F_EVENTS;
		/* usually the next stack and the process's own tid: one byte each */
		rc = put_s(&body, (int64_t)s->stack - prev_stack - 1);
		prev_stack = s->stack;
		rc = rc ? rc : put_s(&body, (int64_t)s->tid - (int64_t)p->pid);
		rc = rc ? rc : strtab_ref(&t, s->thread_name, &ref);
		rc = rc ? rc : put_u(&body, ref);
		rc = rc ? rc : put_u(&body, s->count);
		rc = rc ? rc : put_u(&body, s->n_timestamps);
		uint64_t prev = w->start_unix_ns;
		for (uint32_t k = 0; rc == 0 && k < s->n_timestamps; k++) {
			rc = put_s(&body, (int64_t)(s->timestamps[k] - prev));
			prev = s->timestamps[k];
		}
		rc = rc ? rc : put_u(&body, flags);
		if (rc == 0 && (flags & F_LINK)) {
			rc = pf_buf_append(&body, s->trace_id, 16);
			rc = rc ? rc : pf_buf_append(&body, s->span_id, 8);
		}
		for (size_t k = 0; rc == 0 && (flags & F_VALUES) && k < nt; k++)
			rc = put_s(&body, s->values[k]);
		for (uint32_t k = 0; rc == 0 && (flags & F_EVENTS) && k < s->n_timestamps; k++)
			rc = put_s(&body, s->event_values[k]);
		rc = rc ? rc : put_u(&body, s->n_labels);
		for (uint32_t k = 0; rc == 0 && k < s->n_labels; k++) {
			const struct pf_prof_label *l = &s->labels[k];
			rc = strtab_ref(&t, l->key ? l->key : "", &ref);
			rc = rc ? rc : put_u(&body, ref);
			rc = rc ? rc : strtab_ref(&t, l->str, &ref);
			rc = rc ? rc : put_u(&body, ref);
			rc = rc ? rc : put_s(&body, l->num);
			rc = rc ? rc : strtab_ref(&t, l->unit, &ref);
			rc = rc ? rc : put_u(&body, ref);
		}
	}
	rc = rc ? rc : put_u(b, t.n);
	for (size_t i = 0; rc == 0 && i < t.n; i++)
		rc = put_str(b, t.s[i]);
	rc = rc ? rc : put_u(b, p->n_samples);
	rc = rc ? rc : pf_buf_append(b, body.data ? body.data : (const uint8_t *)"", body.len);
	pf_buf_release(&body);
	free(t.s);
	free(t.slot);
	return rc;
}

void pf_detail_split_release(struct pf_detail_split *s)
{
	pf_buf_release(&s->locs);
	pf_buf_release(&s->samples);
	free(s->loc);
	free(s->stack_locs);
	free(s->stack);
	memset(s, 0, sizeof(*s));
}

int pf_detail_split(const struct pf_prof_window *w, size_t proc, struct pf_detail_split *out,
		    struct pf_error *err)
{
	const struct pf_prof_process *p = &w->processes[proc];
	struct pf_buf *b = &out->samples;
	size_t total = 0;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	pf_buf_init(&out->locs, 0);
	pf_buf_init(&out->samples, 0);
	for (size_t i = 0; i < p->n_stacks; i++) {
		if (p->stacks[i].n_frames && !p->stacks[i].frames)
			return pf_error_set(err, -EINVAL, NULL, "stack %zu: no frames", i);
		total += p->stacks[i].n_frames;
	}
	if (total > UINT32_MAX || p->n_frames > UINT32_MAX)
		return pf_error_set(err, -EINVAL, NULL, "too many frames");
	out->loc = malloc((p->n_frames ? p->n_frames : 1) * sizeof(*out->loc));
	out->stack = malloc((p->n_stacks ? p->n_stacks : 1) * sizeof(*out->stack));
	out->stack_locs = malloc((total ? total : 1) * sizeof(*out->stack_locs));
	if (!out->loc || !out->stack || !out->stack_locs)
		return -ENOMEM;
	for (size_t i = 0; rc == 0 && i < p->n_frames; i++) {
		size_t off = out->locs.len;
		rc = put_location(&out->locs, p, &p->frames[i]);
		if (out->locs.len > UINT32_MAX)
			rc = pf_error_set(err, -EINVAL, NULL, "locations too large");
		out->loc[i] =
		    (struct pf_profile_span){(uint32_t)off, (uint32_t)(out->locs.len - off)};
	}
	out->n_locs = p->n_frames;
	size_t k = 0;
	for (size_t i = 0; rc == 0 && i < p->n_stacks; i++) {
		const struct pf_prof_stack *s = &p->stacks[i];
		out->stack[i] = (struct pf_profile_span){(uint32_t)k, s->n_frames};
		for (uint32_t j = 0; j < s->n_frames; j++) {
			if (s->frames[j] >= p->n_frames)
				return pf_error_set(err, -EINVAL, NULL, "stack %zu: frame index",
						    i);
			out->stack_locs[k++] = s->frames[j];
		}
	}
	out->n_stacks = p->n_stacks;
	if (rc)
		return rc;

	uint32_t freq = w->frequency_hz;
	if (!w->n_sample_types && !freq)
		freq = 100; /* period unknown on the wire: as the stored body would say */
	rc = put_u(b, DETAIL_VERSION);
	rc = rc ? rc : put_u(b, w->start_unix_ns);
	rc = rc ? rc : put_u(b, w->end_unix_ns);
	rc = rc ? rc : put_u(b, freq);
	rc = rc ? rc : put_u(b, w->lost_samples);
	rc = rc ? rc : put_str(b, w->host_name);
	rc = rc ? rc : put_u(b, w->n_sample_types);
	for (size_t i = 0; rc == 0 && i < w->n_sample_types; i++) {
		rc = put_str(b, w->sample_types[i].type);
		rc = rc ? rc : put_str(b, w->sample_types[i].unit);
	}
	rc = rc ? rc : put_str(b, w->period_type.type);
	rc = rc ? rc : put_str(b, w->period_type.unit);
	rc = rc ? rc : put_s(b, w->period);
	rc = rc ? rc : put_str(b, w->default_sample_type);
	rc = rc ? rc : put_u(b, p->pid);
	rc = rc ? rc : pf_buf_append(b, p->profile_id, 16);
	rc = rc ? rc : put_u(b, p->n_attrs);
	for (size_t i = 0; rc == 0 && i < p->n_attrs; i++) {
		rc = put_str(b, p->attrs[i].key);
		rc = rc ? rc : put_str(b, p->attrs[i].value);
	}
	bool payload = p->original_payload && p->original_payload_format;
	rc = rc ? rc : put_str(b, payload ? p->original_payload_format : NULL);
	rc = rc ? rc : put_u(b, payload ? (uint64_t)p->original_payload_len + 1 : 0);
	if (rc == 0 && payload)
		rc = pf_buf_append(b, p->original_payload, p->original_payload_len);
	rc = rc ? rc : put_u(b, p->n_stacks);
	return rc ? rc : put_samples(b, w, p, err);
}

/* ---- Reading. */

struct rd {
	const uint8_t *p, *end;
	struct pf_prof_window *w;
	size_t budget; /* arena bytes left */
	int rc;
};

static uint64_t get_u(struct rd *r)
{
	uint64_t v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (r->p >= r->end)
			break;
		uint8_t c = *r->p++;
		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return v;
	}
	if (!r->rc)
		r->rc = -EBADMSG;
	r->p = r->end;
	return 0;
}

static int64_t get_s(struct rd *r)
{
	uint64_t v = get_u(r);
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* n elements of size from the arena, zeroed; NULL (rc set) past the budget. */
static void *rd_alloc(struct rd *r, uint64_t n, size_t size)
{
	if (r->rc)
		return NULL;
	if (n > r->budget / (size ? size : 1) || n * size > r->budget) {
		r->rc = -E2BIG;
		return NULL;
	}
	r->budget -= n * size;
	void *m = pf_prof_alloc(r->w, n ? n * size : 1);
	if (!m)
		r->rc = -ENOMEM;
	return m;
}

/* A count that must fit in the bytes left (each element takes at least `min` bytes). */
static uint64_t get_count(struct rd *r, size_t min)
{
	uint64_t n = get_u(r);
	if (!r->rc && n > (uint64_t)(r->end - r->p) / (min ? min : 1) && min) {
		r->rc = -EBADMSG;
		return 0;
	}
	return r->rc ? 0 : n;
}

static const char *get_str(struct rd *r)
{
	uint64_t n = get_u(r);
	if (r->rc || n == 0)
		return NULL;
	n--;
	if (n > (uint64_t)(r->end - r->p)) {
		r->rc = -EBADMSG;
		return NULL;
	}
	char *s = rd_alloc(r, n + 1, 1);
	if (!s)
		return NULL;
	memcpy(s, r->p, n);
	s[n] = 0;
	r->p += n;
	return s;
}

/* A counted list of string pairs: n elements of elem bytes with the two strings at offsets
 * first and second, allocated from the window; *n_out = n (0 with NULL). */
static void *get_pairs(struct rd *r, size_t elem, size_t first, size_t second, size_t *n_out)
{
	uint64_t n = get_count(r, 2);
	uint8_t *v = n ? rd_alloc(r, n, elem) : NULL;
	for (uint64_t i = 0; v && i < n && !r->rc; i++) {
		*(const char **)(void *)(v + i * elem + first) = get_str(r);
		*(const char **)(void *)(v + i * elem + second) = get_str(r);
	}
	*n_out = v ? n : 0;
	return v;
}

static void get_bytes(struct rd *r, void *dst, size_t n)
{
	if (r->rc)
		return;
	if (n > (size_t)(r->end - r->p)) {
		r->rc = -EBADMSG;
		return;
	}
	memcpy(dst, r->p, n);
	r->p += n;
}

/* The window's frames and mappings as the stacks first use them. */
struct locmap {
	const uint8_t **key;
	size_t *len;
	uint32_t *idx;
	size_t n_slot;
};

static uint64_t bytes_hash(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h ^ (h >> 31);
}

static bool same_mapping(const struct pf_prof_mapping *a, const struct pf_prof_mapping *b)
{
	return a->start == b->start && a->limit == b->limit && a->offset == b->offset &&
	       !strcmp(a->path ? a->path : "\x01", b->path ? b->path : "\x01") &&
	       !strcmp(a->build_id ? a->build_id : "\x01", b->build_id ? b->build_id : "\x01");
}

/* Decodes one location into frame f, its mapping into maps (deduplicated). */
static void get_location(struct rd *r, struct pf_prof_frame *f, struct pf_prof_mapping *maps,
			 size_t *n_maps, size_t max_maps)
{
	uint64_t kind = get_u(r);
	f->kind = kind > 255 ? 0 : (uint8_t)kind;
	f->address = get_u(r);
	f->function = get_str(r);
	f->system_name = get_str(r);
	f->file = get_str(r);
	f->line = (uint32_t)get_u(r);
	f->mapping = -1;
	if (get_u(r)) {
		struct pf_prof_mapping m = {0};
		m.start = get_u(r);
		m.limit = get_u(r);
		m.offset = get_u(r);
		m.path = get_str(r);
		m.build_id = get_str(r);
		size_t i = 0;
		while (i < *n_maps && !same_mapping(&maps[i], &m))
			i++;
		if (i == *n_maps && *n_maps < max_maps)
			maps[(*n_maps)++] = m;
		if (i < *n_maps)
			f->mapping = (int32_t)i;
	}
	uint64_t ni = get_count(r, 4);
	if (ni > UINT32_MAX)
		r->rc = r->rc ? r->rc : -EBADMSG;
	struct pf_prof_inline *in = ni ? rd_alloc(r, ni, sizeof(*in)) : NULL;
	for (uint64_t i = 0; in && i < ni && !r->rc; i++) {
		in[i].function = get_str(r);
		in[i].system_name = get_str(r);
		in[i].file = get_str(r);
		in[i].line = (uint32_t)get_u(r);
	}
	f->n_inlined = in ? (uint32_t)ni : 0;
	f->inlined = in;
	if (!r->rc && r->p != r->end)
		r->rc = -EBADMSG;
}

static int build_frames(struct rd *r, struct pf_prof_process *p,
			const struct pf_profile_dstack *stacks, size_t n_stacks)
{
	size_t total = 0;
	for (size_t i = 0; i < n_stacks; i++) {
		if (stacks[i].n > r->budget / sizeof(uint32_t) - total)
			return -E2BIG;
		total += stacks[i].n;
	}
	struct pf_prof_stack *st = rd_alloc(r, n_stacks, sizeof(*st));
	uint32_t *ids = rd_alloc(r, total, sizeof(*ids));
	size_t n_slot = 64;
	while (n_slot < total * 2)
		n_slot *= 2;
	struct locmap m = {calloc(n_slot, sizeof(*m.key)), calloc(n_slot, sizeof(*m.len)),
			   calloc(n_slot, sizeof(*m.idx)), n_slot};
	const uint8_t **uniq = calloc(total ? total : 1, sizeof(*uniq));
	size_t *uniq_len = calloc(total ? total : 1, sizeof(*uniq_len));
	size_t n_uniq = 0, k = 0;
	int rc = 0;

	if (r->rc || !st || !ids)
		rc = r->rc ? r->rc : -ENOMEM;
	else if (!m.key || !m.len || !m.idx || !uniq || !uniq_len)
		rc = -ENOMEM;
	for (size_t i = 0; rc == 0 && i < n_stacks; i++) {
		st[i].n_frames = (uint32_t)stacks[i].n;
		st[i].frames = ids + k;
		for (size_t j = 0; j < stacks[i].n; j++) {
			const uint8_t *key = stacks[i].key[j];
			size_t len = stacks[i].key_len[j];
			size_t h = bytes_hash(key, len) & (n_slot - 1);
			while (m.key[h] && (m.len[h] != len || memcmp(m.key[h], key, len) != 0))
				h = (h + 1) & (n_slot - 1);
			if (!m.key[h]) {
				m.key[h] = key;
				m.len[h] = len;
				m.idx[h] = (uint32_t)n_uniq;
				uniq[n_uniq] = key;
				uniq_len[n_uniq++] = len;
			}
			ids[k++] = m.idx[h];
		}
	}
	struct pf_prof_frame *fr = rc ? NULL : rd_alloc(r, n_uniq, sizeof(*fr));
	struct pf_prof_mapping *maps = fr ? rd_alloc(r, n_uniq, sizeof(*maps)) : NULL;
	size_t n_maps = 0;
	if (rc == 0 && !maps)
		rc = r->rc ? r->rc : -ENOMEM;
	for (size_t i = 0; rc == 0 && i < n_uniq; i++) {
		struct rd lr = {uniq[i], uniq[i] + uniq_len[i], r->w, r->budget, 0};
		get_location(&lr, &fr[i], maps, &n_maps, n_uniq);
		r->budget = lr.budget;
		rc = lr.rc;
	}
	if (rc == 0) {
		p->stacks = st;
		p->n_stacks = n_stacks;
		p->frames = fr;
		p->n_frames = n_uniq;
		p->mappings = maps;
		p->n_mappings = n_maps;
	}
	free(m.key);
	free(m.len);
	free(m.idx);
	free(uniq);
	free(uniq_len);
	return rc;
}

static void get_samples(struct rd *r, struct pf_prof_process *p, size_t nt)
{
	uint64_t n_str = get_count(r, 1);
	const char **strs = n_str ? rd_alloc(r, n_str, sizeof(*strs)) : NULL;
	for (uint64_t i = 0; strs && i < n_str && !r->rc; i++)
		strs[i] = get_str(r);
	uint64_t ns = get_count(r, 6);
	struct pf_prof_sample *sa = rd_alloc(r, ns, sizeof(*sa));
	int64_t prev_stack = -1;
	for (uint64_t i = 0; sa && i < ns && !r->rc; i++) {
		struct pf_prof_sample *s = &sa[i];
		int64_t stack = prev_stack + 1 + get_s(r);
		int64_t tid = (int64_t)p->pid + get_s(r);
		uint64_t tn = get_u(r);
		prev_stack = stack;
		if (stack < 0 || (uint64_t)stack >= p->n_stacks || tid < 0 || tid > UINT32_MAX ||
		    tn > n_str) {
			r->rc = r->rc ? r->rc : -EBADMSG;
			break;
		}
		s->stack = (uint32_t)stack;
		s->tid = (uint32_t)tid;
		s->thread_name = tn ? strs[tn - 1] : NULL;
		s->count = get_u(r);
		uint64_t nts = get_count(r, 1);
		if (nts > UINT32_MAX) {
			r->rc = r->rc ? r->rc : -EBADMSG;
			break;
		}
		uint64_t *ts = nts ? rd_alloc(r, nts, sizeof(*ts)) : NULL;
		uint64_t prev = r->w->start_unix_ns;
		for (uint64_t k = 0; ts && k < nts; k++)
			prev = ts[k] = prev + (uint64_t)get_s(r);
		s->n_timestamps = ts ? (uint32_t)nts : 0;
		s->timestamps = ts;
		uint64_t flags = get_u(r);
		if (flags & F_LINK) {
			get_bytes(r, s->trace_id, 16);
			get_bytes(r, s->span_id, 8);
		}
		if ((flags & F_VALUES) && nt) {
			int64_t *v = rd_alloc(r, nt, sizeof(*v));
			for (size_t k = 0; v && k < nt; k++)
				v[k] = get_s(r);
			s->values = v;
		}
		if ((flags & F_EVENTS) && s->n_timestamps) {
			int64_t *v = rd_alloc(r, s->n_timestamps, sizeof(*v));
			for (size_t k = 0; v && k < s->n_timestamps; k++)
				v[k] = get_s(r);
			s->event_values = v;
		}
		uint64_t nl = get_count(r, 4);
		struct pf_prof_label *l = nl ? rd_alloc(r, nl, sizeof(*l)) : NULL;
		for (uint64_t k = 0; l && k < nl && !r->rc; k++) {
			uint64_t key = get_u(r), str = get_u(r);
			int64_t num = get_s(r);
			uint64_t unit = get_u(r);
			if (key == 0 || key > n_str || str > n_str || unit > n_str) {
				r->rc = r->rc ? r->rc : -EBADMSG;
				break;
			}
			l[k] = (struct pf_prof_label){strs[key - 1], str ? strs[str - 1] : NULL,
						      num, unit ? strs[unit - 1] : NULL};
		}
		s->n_labels = l ? (uint32_t)nl : 0;
		s->labels = l;
	}
	p->samples = sa;
	p->n_samples = sa && !r->rc ? ns : 0;
}

int pf_detail_build(const uint8_t *samples, size_t len, const struct pf_profile_dstack *stacks,
		    size_t n_stacks, struct pf_prof_window **out, struct pf_error *err)
{
	struct pf_prof_window *w = pf_prof_window_new();
	struct rd r = {samples, samples ? samples + len : samples, w, PF_DETAIL_MAX_BYTES, 0};
	int rc;

	*out = NULL;
	if (!w)
		return -ENOMEM;
	if (!samples || get_u(&r) != DETAIL_VERSION) {
		pf_prof_window_free(w);
		return pf_error_set(err, -EBADMSG, NULL, "stored profile: unknown detail version");
	}
	struct pf_prof_process *p = rd_alloc(&r, 1, sizeof(*p));
	w->start_unix_ns = get_u(&r);
	w->end_unix_ns = get_u(&r);
	w->frequency_hz = (uint32_t)get_u(&r);
	w->lost_samples = get_u(&r);
	w->host_name = get_str(&r);
	w->sample_types =
	    get_pairs(&r, sizeof(*w->sample_types), offsetof(struct pf_prof_value_type, type),
		      offsetof(struct pf_prof_value_type, unit), &w->n_sample_types);
	w->period_type.type = get_str(&r);
	w->period_type.unit = get_str(&r);
	w->period = get_s(&r);
	w->default_sample_type = get_str(&r);
	if (p) {
		uint64_t pid = get_u(&r);
		p->pid = pid > UINT32_MAX ? 0 : (uint32_t)pid;
		get_bytes(&r, p->profile_id, 16);
		p->attrs = get_pairs(&r, sizeof(*p->attrs), offsetof(struct pf_prof_attr, key),
				     offsetof(struct pf_prof_attr, value), &p->n_attrs);
		p->original_payload_format = get_str(&r);
		uint64_t pl = get_u(&r);
		if (pl) {
			uint8_t *b = rd_alloc(&r, pl - 1, 1);
			if (b)
				get_bytes(&r, b, pl - 1);
			p->original_payload = b;
			p->original_payload_len = b ? pl - 1 : 0;
		}
		if (!p->original_payload)
			p->original_payload_format = NULL;
		if (get_u(&r) != n_stacks && !r.rc)
			r.rc = -EBADMSG;
	}
	rc = r.rc ? r.rc : build_frames(&r, p, stacks, n_stacks);
	if (rc == 0) {
		get_samples(&r, p, w->n_sample_types);
		rc = r.rc ? r.rc : r.p != r.end ? -EBADMSG : 0;
	}
	if (rc < 0) {
		pf_prof_window_free(w);
		return pf_error_set(err, rc, NULL, "stored profile: %s",
				    rc == -E2BIG    ? "too large"
				    : rc == -ENOMEM ? "out of memory"
						    : "detail does not decode");
	}
	w->processes = p;
	w->n_processes = 1;
	*out = w;
	return 0;
}
