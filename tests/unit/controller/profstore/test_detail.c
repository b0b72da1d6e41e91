/* test_detail.c — profstore/detail.h: a process split into locations, stacks and its samples
 * part and built again gives the same flame graph, pprof and samples (timestamps, links,
 * values, event values, labels, thread names, attributes, payload) for every fixture; every
 * cut or altered samples part is refused or decodes to a window within its bounds, never
 * read out of bounds (the sanitizer build runs this too). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pprof_codec.h"
#include "prof_fixture.h"
#include "profstore/detail.h"
#include "profstore/flame.h"

/* The stacks of a split as the store would give them back. */
struct dstacks {
	struct pf_profile_dstack *s;
	const uint8_t **key;
	size_t *len;
};

static void dstacks_of(const struct pf_detail_split *sp, struct dstacks *d)
{
	size_t total = 0;
	for (size_t i = 0; i < sp->n_stacks; i++)
		total += sp->stack[i].len;
	d->s = calloc(sp->n_stacks + 1, sizeof(*d->s));
	d->key = calloc(total + 1, sizeof(*d->key));
	d->len = calloc(total + 1, sizeof(*d->len));
	assert_non_null(d->s);
	size_t k = 0;
	for (size_t i = 0; i < sp->n_stacks; i++) {
		d->s[i] = (struct pf_profile_dstack){sp->stack[i].len, d->key + k, d->len + k};
		for (uint32_t j = 0; j < sp->stack[i].len; j++, k++) {
			const struct pf_profile_span *l =
			    &sp->loc[sp->stack_locs[sp->stack[i].off + j]];
			d->key[k] = sp->locs.data + l->off;
			d->len[k] = l->len;
		}
	}
}

static void dstacks_free(struct dstacks *d)
{
	free(d->s);
	free(d->key);
	free(d->len);
}

/* Process proc of w alone. */
static struct pf_prof_window one_of(const struct pf_prof_window *w, size_t proc)
{
	struct pf_prof_window one = *w;
	one.processes = &w->processes[proc];
	one.n_processes = 1;
	return one;
}

static void flame_json(const struct pf_prof_window *w, struct pf_buf *out)
{
	struct pf_flame *f = pf_flame_new(10000);
	assert_non_null(f);
	assert_int_equal(pf_flame_add_window(f, w, 0), 0);
	pf_buf_init(out, 1 << 24);
	assert_int_equal(pf_flame_json(f, false, 0, out), 0);
	pf_flame_free(f);
}

static void same_buf(const struct pf_buf *a, const struct pf_buf *b)
{
	assert_int_equal(a->len, b->len);
	assert_memory_equal(a->data, b->data, a->len);
}

static void check_same(const struct pf_prof_window *w, size_t proc)
{
	struct pf_prof_window one = one_of(w, proc);
	struct pf_detail_split sp;
	struct dstacks d;
	struct pf_prof_window *back = NULL;
	struct pf_buf a, b;

	assert_int_equal(pf_detail_split(&one, 0, &sp, NULL), 0);
	dstacks_of(&sp, &d);
	assert_int_equal(
	    pf_detail_build(sp.samples.data, sp.samples.len, d.s, sp.n_stacks, &back, NULL), 0);
	/* the views: same flame graph, same pprof */
	flame_json(&one, &a);
	flame_json(back, &b);
	same_buf(&a, &b);
	pf_buf_release(&a);
	pf_buf_release(&b);
	pf_buf_init(&a, 1 << 24);
	pf_buf_init(&b, 1 << 24);
	assert_int_equal(pf_pprof_encode(&one, PF_PPROF_ALL_PROCESSES, &a, NULL), 0);
	assert_int_equal(pf_pprof_encode(back, PF_PPROF_ALL_PROCESSES, &b, NULL), 0);
	same_buf(&a, &b);
	pf_buf_release(&a);
	pf_buf_release(&b);

	/* the fields the views and cuts read */
	const struct pf_prof_process *p = &w->processes[proc], *q = &back->processes[0];
	assert_int_equal(back->start_unix_ns, w->start_unix_ns);
	assert_int_equal(back->end_unix_ns, w->end_unix_ns);
	assert_int_equal(back->n_sample_types, w->n_sample_types);
	assert_int_equal(back->period, w->period);
	assert_int_equal(q->pid, p->pid);
	assert_int_equal(q->n_attrs, p->n_attrs);
	for (size_t i = 0; i < p->n_attrs; i++) {
		assert_string_equal(q->attrs[i].key, p->attrs[i].key);
		assert_string_equal(q->attrs[i].value, p->attrs[i].value);
	}
	assert_int_equal(q->original_payload_len,
			 p->original_payload ? p->original_payload_len : 0);
	assert_int_equal(q->n_samples, p->n_samples);
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct pf_prof_sample *x = &p->samples[i], *y = &q->samples[i];
		assert_int_equal(y->count, x->count);
		assert_int_equal(y->tid, x->tid);
		if (x->thread_name)
			assert_string_equal(y->thread_name, x->thread_name);
		assert_memory_equal(y->trace_id, x->trace_id, 16);
		assert_memory_equal(y->span_id, x->span_id, 8);
		assert_int_equal(y->n_timestamps, x->n_timestamps);
		if (x->n_timestamps)
			assert_memory_equal(y->timestamps, x->timestamps, 8 * x->n_timestamps);
		assert_int_equal(y->n_labels, x->n_labels);
		for (size_t k = 0; x->values && k < w->n_sample_types; k++)
			assert_int_equal(y->values[k], x->values[k]);
		/* same frames, leaf first */
		const struct pf_prof_stack *xs = &p->stacks[x->stack], *ys = &q->stacks[y->stack];
		assert_int_equal(ys->n_frames, xs->n_frames);
		for (uint32_t k = 0; k < xs->n_frames; k++) {
			const struct pf_prof_frame *xf = &p->frames[xs->frames[k]];
			const struct pf_prof_frame *yf = &q->frames[ys->frames[k]];
			assert_int_equal(yf->address, xf->address);
			assert_int_equal(yf->n_inlined, xf->n_inlined);
			assert_int_equal(yf->mapping < 0, xf->mapping < 0);
		}
	}

	/* every cut is refused; every altered byte is refused or stays in bounds */
	for (size_t n = 0; n < sp.samples.len; n++) {
		struct pf_prof_window *cut = NULL;
		assert_int_not_equal(
		    pf_detail_build(sp.samples.data, n, d.s, sp.n_stacks, &cut, NULL), 0);
		assert_null(cut);
	}
	uint8_t *alt = malloc(sp.samples.len);
	for (size_t i = 0; i < sp.samples.len; i++) {
		memcpy(alt, sp.samples.data, sp.samples.len);
		alt[i] ^= 0xa5;
		struct pf_prof_window *x = NULL;
		if (pf_detail_build(alt, sp.samples.len, d.s, sp.n_stacks, &x, NULL) == 0) {
			for (size_t k = 0; k < x->processes[0].n_samples; k++)
				assert_true(x->processes[0].samples[k].stack <
					    x->processes[0].n_stacks);
			pf_prof_window_free(x);
		}
	}
	free(alt);
	/* a stack count that does not match */
	struct pf_prof_window *x = NULL;
	assert_int_equal(
	    pf_detail_build(sp.samples.data, sp.samples.len, d.s, sp.n_stacks + 1, &x, NULL),
	    -EBADMSG);
	pf_prof_window_free(back);
	dstacks_free(&d);
	pf_detail_split_release(&sp);
}

static void test_roundtrip(void **state)
{
	(void)state;
	static const unsigned flags[] = {0,
					 PROF_FIX_TIMESTAMPS,
					 PROF_FIX_LINK,
					 PROF_FIX_MIXED,
					 PROF_FIX_NAMES,
					 PROF_FIX_TIMESTAMPS | PROF_FIX_LINK | PROF_FIX_NAMES};
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		struct pf_prof_window *w = prof_fixture_window(flags[i]);
		for (size_t p = 0; p < w->n_processes; p++)
			check_same(w, p);
		pf_prof_window_free(w);
	}
	struct pf_prof_window *t = prof_fixture_typed_window();
	check_same(t, 0);
	pf_prof_window_free(t);
}

/* A location key that does not decode, and a frame index out of range at split. */
static void test_bad(void **state)
{
	(void)state;
	struct pf_prof_window *w = prof_fixture_window(0);
	struct pf_prof_window one = one_of(w, 0);
	struct pf_detail_split sp;
	struct dstacks d;
	struct pf_prof_window *x = NULL;
	assert_int_equal(pf_detail_split(&one, 0, &sp, NULL), 0);
	dstacks_of(&sp, &d);
	static const uint8_t junk[] = {0x80};
	d.key[0] = junk;
	d.len[0] = 1;
	assert_int_equal(
	    pf_detail_build(sp.samples.data, sp.samples.len, d.s, sp.n_stacks, &x, NULL), -EBADMSG);
	assert_null(x);
	assert_int_equal(pf_detail_build(NULL, 0, d.s, 0, &x, NULL), -EBADMSG);
	dstacks_free(&d);
	pf_detail_split_release(&sp);

	struct pf_prof_process p = w->processes[0];
	struct pf_prof_stack st = {1, (const uint32_t[]){999}};
	p.stacks = &st;
	p.n_stacks = 1;
	one.processes = &p;
	assert_int_equal(pf_detail_split(&one, 0, &sp, NULL), -EINVAL);
	pf_detail_split_release(&sp);
	pf_prof_window_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_roundtrip),
	    cmocka_unit_test(test_bad),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
