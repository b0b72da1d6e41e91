/* Unit tests of the conformance checker (tests/lib/profcheck.c): a valid encoding passes, and
 * one deliberately broken input per rule is caught with that rule's id. Each case decodes a
 * valid encoding of the fixture window, breaks one thing, packs it again, checks, and restores
 * what it changed before freeing. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "otlp_profiles.h"
#include "prof_fixture.h"
#include "profcheck.h"

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
	pb_request;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary pb_dict;
typedef Opentelemetry__Proto__Profiles__V1development__Profile pb_profile;
typedef Opentelemetry__Proto__Profiles__V1development__Sample pb_sample;

struct fx {
	struct pf_buf b;
	pb_request *q;
	pb_dict *d;
	pb_profile *p; /* first profile (pid 100) */
};

static void fx_init(struct fx *f, unsigned flags)
{
	struct pf_prof_window *w = prof_fixture_window(flags);
	pf_buf_init(&f->b, 1 << 20);
	assert_int_equal(pf_otlp_profiles_encode(w, &f->b, NULL, NULL), 0);
	pf_prof_window_free(w);
	f->q = (pb_request *)protobuf_c_message_unpack(
		&opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor,
		NULL, f->b.len, f->b.data);
	assert_non_null(f->q);
	f->d = f->q->dictionary;
	f->p = f->q->resource_profiles[0]->scope_profiles[0]->profiles[0];
}

static void fx_release(struct fx *f)
{
	protobuf_c_message_free_unpacked(&f->q->base, NULL);
	pf_buf_release(&f->b);
}

/* Packs the (broken) request and asserts the checker reports `rule`. */
static void expect(struct fx *f, const char *rule)
{
	size_t n = protobuf_c_message_get_packed_size(&f->q->base);
	uint8_t *buf = malloc(n + 1);
	assert_non_null(buf);
	protobuf_c_message_pack(&f->q->base, buf);
	struct profcheck_result res;
	int r = profcheck_run(buf, n, &res);
	free(buf);
	if (!profcheck_has(&res, rule)) {
		fprintf(stderr, "expected rule %s, got %d violations:\n", rule, r);
		profcheck_print(&res);
	}
	assert_true(r > 0);
	assert_true(profcheck_has(&res, rule));
	profcheck_release(&res);
}

static void test_valid_passes(void **state)
{
	unsigned flags[] = {0, PROF_FIX_TIMESTAMPS, PROF_FIX_LINK, PROF_FIX_MIXED};
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		struct fx f;
		fx_init(&f, flags[i]);
		struct profcheck_result res;
		int r = profcheck_run(f.b.data, f.b.len, &res);
		profcheck_print(&res);
		assert_int_equal(r, 0);
		profcheck_release(&res);
		fx_release(&f);
	}
}

static void test_garbage(void **state)
{
	struct profcheck_result res;
	uint8_t junk[] = {0xff, 0xff, 0xff};
	assert_int_equal(profcheck_run(junk, sizeof(junk), &res), -EBADMSG);
}

static void test_structure(void **state)
{
	struct fx f;
	fx_init(&f, 0);
	size_t n = f.q->n_resource_profiles;
	f.q->n_resource_profiles = 0;
	expect(&f, "structure");
	f.q->n_resource_profiles = n;
	n = f.q->resource_profiles[0]->n_scope_profiles;
	f.q->resource_profiles[0]->n_scope_profiles = 0;
	expect(&f, "structure");
	f.q->resource_profiles[0]->n_scope_profiles = n;
	n = f.q->resource_profiles[0]->scope_profiles[0]->n_profiles;
	f.q->resource_profiles[0]->scope_profiles[0]->n_profiles = 0;
	expect(&f, "structure");
	f.q->resource_profiles[0]->scope_profiles[0]->n_profiles = n;
	fx_release(&f);
}

static void test_dictionary_missing_and_empty(void **state)
{
	struct fx f;
	fx_init(&f, 0);
	f.q->dictionary = NULL;
	expect(&f, "dictionary");
	f.q->dictionary = f.d;
	size_t n = f.d->n_link_table;
	f.d->n_link_table = 0;
	expect(&f, "table_empty");
	f.d->n_link_table = n;
	fx_release(&f);
}

static void test_zero_entries(void **state)
{
	struct fx f;
	fx_init(&f, 0);
	/* mapping/location/function/stack [0] not the empty message */
	void *t = f.d->mapping_table[0];
	f.d->mapping_table[0] = f.d->mapping_table[1];
	expect(&f, "zero_entry");
	f.d->mapping_table[0] = t;
	t = f.d->stack_table[0];
	f.d->stack_table[0] = f.d->stack_table[1];
	expect(&f, "zero_entry");
	f.d->stack_table[0] = t;
	t = f.d->function_table[0];
	f.d->function_table[0] = f.d->function_table[1];
	expect(&f, "zero_entry");
	f.d->function_table[0] = t;
	/* link[0] zero-filled ids instead of an empty Link{} */
	uint8_t zeros[16] = {0};
	f.d->link_table[0]->trace_id.data = zeros;
	f.d->link_table[0]->trace_id.len = 16;
	expect(&f, "zero_entry");
	f.d->link_table[0]->trace_id.data = NULL;
	f.d->link_table[0]->trace_id.len = 0;

	char *s = f.d->string_table[0];
	char x[] = "x";
	f.d->string_table[0] = x;
	expect(&f, "string0");
	f.d->string_table[0] = s;

	f.d->attribute_table[0]->key_strindex = 1;
	expect(&f, "attribute0");
	f.d->attribute_table[0]->key_strindex = 0;
	fx_release(&f);
}

static void test_index_ranges(void **state)
{
	struct fx f;
	fx_init(&f, 0);
	pb_sample *s = f.p->samples[0];
	s->stack_index = 1000;
	expect(&f, "index");
	s->stack_index = 1;
	s->link_index = 5;
	expect(&f, "index");
	s->link_index = 0;
	s->attribute_indices[0] = 999;
	expect(&f, "index");
	s->attribute_indices[0] = 1;
	/* restore the real index: re-run from a fresh decode for the rest */
	fx_release(&f);

	fx_init(&f, 0);
	f.d->location_table[1]->mapping_index = 77;
	expect(&f, "index");
	fx_release(&f);
	fx_init(&f, 0);
	f.d->function_table[1]->name_strindex = 12345;
	expect(&f, "index");
	fx_release(&f);
	fx_init(&f, 0);
	f.d->stack_table[1]->location_indices[0] = -1;
	expect(&f, "index");
	fx_release(&f);
	fx_init(&f, 0);
	f.d->location_table[1]->lines[0]->function_index = 50;
	expect(&f, "index");
	fx_release(&f);
	fx_init(&f, 0);
	f.p->sample_type->type_strindex = 4000;
	expect(&f, "index");
	fx_release(&f);
}

static void test_negative_lines(void **state)
{
	struct fx f;
	fx_init(&f, 0);
	f.d->function_table[1]->start_line = -1;
	expect(&f, "negative");
	f.d->function_table[1]->start_line = 0;
	f.d->location_table[1]->lines[0]->line = -3;
	expect(&f, "negative");
	fx_release(&f);
}

static void test_mapping_range(void **state)
{
	struct fx f;
	fx_init(&f, 0);
	f.d->mapping_table[1]->memory_start = f.d->mapping_table[1]->memory_limit;
	expect(&f, "mapping_range");
	fx_release(&f);
}

static void test_link_ids(void **state)
{
	struct fx f;
	fx_init(&f, PROF_FIX_LINK);
	assert_int_equal(f.d->n_link_table, 2);
	f.d->link_table[1]->span_id.len = 4;
	expect(&f, "link_ids");
	f.d->link_table[1]->span_id.len = 8;
	f.d->link_table[1]->trace_id.len = 15;
	expect(&f, "link_ids");
	f.d->link_table[1]->trace_id.len = 16;
	fx_release(&f);
}

static void test_duplicate_keys(void **state)
{
	struct fx f;
	fx_init(&f, 0);
	pb_sample *s = f.p->samples[0];
	assert_int_equal(s->n_attribute_indices, 2);
	int32_t old = s->attribute_indices[1];
	s->attribute_indices[1] = s->attribute_indices[0];
	expect(&f, "dup_key");
	s->attribute_indices[1] = old;
	/* a location with two profile.frame.type entries */
	Opentelemetry__Proto__Profiles__V1development__Location *l = f.d->location_table[1];
	int32_t two[2] = {l->attribute_indices[0], l->attribute_indices[0]};
	int32_t *ai = l->attribute_indices;
	l->attribute_indices = two;
	l->n_attribute_indices = 2;
	expect(&f, "dup_key");
	l->attribute_indices = ai;
	l->n_attribute_indices = 1;
	fx_release(&f);
}

static void test_timestamp_range(void **state)
{
	struct fx f;
	fx_init(&f, PROF_FIX_TIMESTAMPS);
	f.p->time_unix_nano += 2000;
	expect(&f, "timestamp_range");
	f.p->time_unix_nano -= 2000;
	/* end is exclusive */
	uint64_t last = f.p->samples[0]->timestamps_unix_nano[0];
	uint64_t d = f.p->duration_nano;
	f.p->duration_nano = last - f.p->time_unix_nano;
	expect(&f, "timestamp_range");
	f.p->duration_nano = d;
	fx_release(&f);
}

static void test_shapes(void **state)
{
	struct fx f;
	fx_init(&f, 0);
	pb_sample *s = f.p->samples[0];
	int64_t *vals = s->values;
	int64_t two[2] = {1, 2};
	s->values = two;
	s->n_values = 2;
	expect(&f, "shape"); /* values-only with two values */
	s->n_values = 0;
	expect(&f, "shape"); /* neither */
	uint64_t ts[1] = {f.p->time_unix_nano};
	s->timestamps_unix_nano = ts;
	s->n_timestamps_unix_nano = 1;
	expect(&f, "shape"); /* timestamps-only among values-only samples */
	s->values = two;
	s->n_values = 2;
	expect(&f, "shape"); /* values and timestamps of different length */
	s->timestamps_unix_nano = NULL;
	s->n_timestamps_unix_nano = 0;
	s->values = vals;
	s->n_values = 1;
	fx_release(&f);
}

static void test_dupes(void **state)
{
	struct fx f;
	fx_init(&f, 0);
	char *s = f.d->string_table[2];
	f.d->string_table[2] = f.d->string_table[1];
	expect(&f, "dup_string");
	f.d->string_table[2] = s;
	void *m = f.d->mapping_table[2];
	f.d->mapping_table[2] = f.d->mapping_table[1];
	expect(&f, "dup_mapping");
	f.d->mapping_table[2] = m;
	fx_release(&f);
}

static void test_orphans(void **state)
{
	struct fx f;
	fx_init(&f, 0);
	/* the only sample on the kernel stack now points elsewhere: that stack is an orphan */
	pb_sample *s = f.p->samples[2];
	int32_t old = s->stack_index;
	s->stack_index = f.p->samples[0]->stack_index;
	expect(&f, "orphan");
	s->stack_index = old;
	fx_release(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_passes),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_structure),
		cmocka_unit_test(test_dictionary_missing_and_empty),
		cmocka_unit_test(test_zero_entries),
		cmocka_unit_test(test_index_ranges),
		cmocka_unit_test(test_negative_lines),
		cmocka_unit_test(test_mapping_range),
		cmocka_unit_test(test_link_ids),
		cmocka_unit_test(test_duplicate_keys),
		cmocka_unit_test(test_timestamp_range),
		cmocka_unit_test(test_shapes),
		cmocka_unit_test(test_dupes),
		cmocka_unit_test(test_orphans),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
