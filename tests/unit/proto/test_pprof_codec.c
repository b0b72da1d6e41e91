/* Unit tests of proto/codec/pprof_codec.c: the gzip'd pprof of the fixture window (sample and
 * period types, values, dedup, labels, build ids), the pid filter, round trips through the
 * decoder and the decoder's refusals. (`go tool pprof` reading it: interop_pprof_go.) */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pf/gzip.h"
#include "pprof_codec.h"
#include "prof_fixture.h"

#include "perftools/profile.pb-c.h"

typedef Perftools__Profiles__Profile pb_profile;

static pb_profile *unpack(const struct pf_buf *gz, struct pf_buf *raw)
{
	assert_true(pf_gzip_is_gzip(gz->data, gz->len));
	pf_buf_init(raw, 64 << 20);
	assert_int_equal(pf_gzip_decompress(gz->data, gz->len, 64 << 20, raw), 0);
	pb_profile *p = (pb_profile *)protobuf_c_message_unpack(
		&perftools__profiles__profile__descriptor, NULL, raw->len, raw->data);
	assert_non_null(p);
	return p;
}

static const char *S(const pb_profile *p, int64_t i)
{
	assert_true(i >= 0 && (size_t)i < p->n_string_table);
	return p->string_table[i];
}

static void test_encode(void **state)
{
	struct pf_prof_window *w = prof_fixture_window(0);
	struct pf_buf gz, raw;
	pf_buf_init(&gz, 1 << 20);
	assert_int_equal(pf_pprof_encode(w, PF_PPROF_ALL_PROCESSES, &gz, NULL), 0);
	pb_profile *p = unpack(&gz, &raw);
	assert_string_equal(S(p, 0), "");
	assert_int_equal(p->n_sample_type, 2);
	assert_string_equal(S(p, p->sample_type[0]->type), "samples");
	assert_string_equal(S(p, p->sample_type[0]->unit), "count");
	assert_string_equal(S(p, p->sample_type[1]->type), "cpu");
	assert_string_equal(S(p, p->sample_type[1]->unit), "nanoseconds");
	assert_string_equal(S(p, p->period_type->type), "cpu");
	assert_string_equal(S(p, p->period_type->unit), "nanoseconds");
	assert_int_equal(p->period, 1000000000 / 99);
	assert_int_equal(p->time_nanos, PROF_FIXTURE_START);
	assert_int_equal(p->duration_nanos, PROF_FIXTURE_NS);
	assert_int_equal(p->n_sample, 5);
	assert_int_equal(p->sample[0]->n_value, 2);
	assert_int_equal(p->sample[0]->value[0], 4);
	assert_int_equal(p->sample[0]->value[1], 4 * (1000000000 / 99));
	/* dedup: 4 functions, 5 locations, 2 mappings, across both processes */
	assert_int_equal(p->n_function, 4);
	assert_int_equal(p->n_location, 5);
	assert_int_equal(p->n_mapping, 2);
	for (size_t i = 0; i < p->n_location; i++)
		assert_int_equal(p->location[i]->id, i + 1);
	int bid = 0;
	for (size_t i = 0; i < p->n_mapping; i++)
		if (p->mapping[i]->build_id &&
		    strcmp(S(p, p->mapping[i]->build_id),
			   "aabbccddeeff00112233445566778899aabbccdd") == 0)
			bid = 1;
	assert_true(bid);
	/* leaf first: sample 0 is work_a <- main */
	const Perftools__Profiles__Location *leaf = p->location[p->sample[0]->location_id[0] - 1];
	assert_string_equal(S(p, p->function[leaf->line[0]->function_id - 1]->name), "work_a");
	/* labels pid, tid, thread */
	int seen = 0;
	for (size_t i = 0; i < p->sample[1]->n_label; i++) {
		const Perftools__Profiles__Label *l = p->sample[1]->label[i];
		if (strcmp(S(p, l->key), "pid") == 0 && l->num == 100)
			seen |= 1;
		if (strcmp(S(p, l->key), "tid") == 0 && l->num == 101)
			seen |= 2;
		if (strcmp(S(p, l->key), "thread") == 0 && strcmp(S(p, l->str), "worker") == 0)
			seen |= 4;
	}
	assert_int_equal(seen, 7);
	protobuf_c_message_free_unpacked(&p->base, NULL);
	pf_buf_release(&raw);

	/* one process only */
	pf_buf_reset(&gz);
	assert_int_equal(pf_pprof_encode(w, 200, &gz, NULL), 0);
	p = unpack(&gz, &raw);
	assert_int_equal(p->n_sample, 1);
	assert_int_equal(p->sample[0]->value[0], 3);
	protobuf_c_message_free_unpacked(&p->base, NULL);
	pf_buf_release(&raw);
	pf_buf_reset(&gz);
	assert_int_equal(pf_pprof_encode(w, 4242, &gz, NULL), -ENODATA);
	w->frequency_hz = 0;
	assert_int_equal(pf_pprof_encode(w, -1, &gz, NULL), -EINVAL);
	pf_buf_release(&gz);
	pf_prof_window_free(w);
}

/* pprof: inlined functions are the Location's first lines, system_name the mangled name; the
 * decoder (as for Go's inlining) gives each line its own frame, innermost first. */
static void test_names_and_inlines(void **state)
{
	struct pf_prof_window *w = prof_fixture_window(PROF_FIX_NAMES), *r = NULL;
	struct pf_buf gz;
	pf_buf_init(&gz, 1 << 20);
	assert_int_equal(pf_pprof_encode(w, 100, &gz, NULL), 0);
	assert_int_equal(pf_pprof_decode(gz.data, gz.len, 1 << 20, &r, NULL), 0);
	const struct pf_prof_process *p = &r->processes[0];
	const struct pf_prof_stack *st = &p->stacks[p->samples[0].stack];
	assert_int_equal(st->n_frames, 4); /* leaf, mid, work_a, main */
	const struct pf_prof_frame *f = &p->frames[st->frames[0]];
	assert_string_equal(f->function, "app::leaf()");
	assert_string_equal(f->system_name, "_ZN3app4leafEv");
	assert_int_equal(f->line, 3);
	f = &p->frames[st->frames[1]];
	assert_string_equal(f->function, "mid");
	assert_null(f->system_name);
	f = &p->frames[st->frames[2]];
	assert_string_equal(f->function, "app::work_a(int)");
	assert_string_equal(f->system_name, "_ZN3app6work_aEi");
	assert_int_equal(f->line, 21);
	assert_int_equal(f->address, 0x401100);
	assert_string_equal(p->frames[st->frames[3]].function, "main");
	pf_prof_window_free(r);
	pf_buf_release(&gz);
	pf_prof_window_free(w);
}

static void test_round_trip(void **state)
{
	struct pf_prof_window *w = prof_fixture_window(0), *r = NULL;
	struct pf_buf gz;
	pf_buf_init(&gz, 1 << 20);
	assert_int_equal(pf_pprof_encode(w, PF_PPROF_ALL_PROCESSES, &gz, NULL), 0);
	struct pf_error err = {0};
	assert_int_equal(pf_pprof_decode(gz.data, gz.len, 1 << 20, &r, &err), 0);
	assert_int_equal(r->n_processes, 2);
	assert_int_equal(r->frequency_hz, 99);
	assert_int_equal(r->start_unix_ns, PROF_FIXTURE_START);
	assert_int_equal(pf_prof_window_samples(r), pf_prof_window_samples(w));
	const struct pf_prof_process *p = &r->processes[0];
	assert_int_equal(p->pid, 100);
	assert_int_equal(p->n_samples, 4);
	assert_int_equal(p->samples[1].tid, 101);
	assert_string_equal(p->samples[1].thread_name, "worker");
	const struct pf_prof_stack *st = &p->stacks[p->samples[2].stack];
	assert_int_equal(st->n_frames, 3);
	assert_int_equal(p->frames[st->frames[0]].kind, PF_FRAME_KERNEL);
	assert_string_equal(p->frames[st->frames[0]].function, "do_syscall_64");
	assert_null(p->frames[st->frames[1]].function);
	assert_int_equal(p->frames[st->frames[1]].address, 0x401300);
	assert_string_equal(p->frames[st->frames[2]].function, "main");
	assert_string_equal(p->mappings[p->frames[st->frames[2]].mapping].build_id,
			    "aabbccddeeff00112233445566778899aabbccdd");
	assert_int_equal(r->processes[1].pid, 200);
	pf_prof_window_free(r);

	/* the plain (not gzip'd) form decodes too */
	struct pf_buf raw;
	pf_buf_init(&raw, 1 << 20);
	assert_int_equal(pf_gzip_decompress(gz.data, gz.len, 1 << 20, &raw), 0);
	assert_int_equal(pf_pprof_decode(raw.data, raw.len, 1 << 20, &r, NULL), 0);
	pf_prof_window_free(r);
	pf_buf_release(&raw);
	pf_buf_release(&gz);
	pf_prof_window_free(w);
}

static void test_decode_refuses(void **state)
{
	struct pf_prof_window *w = prof_fixture_window(0), *r = NULL;
	struct pf_buf gz, raw;
	pf_buf_init(&gz, 1 << 20);
	assert_int_equal(pf_pprof_encode(w, PF_PPROF_ALL_PROCESSES, &gz, NULL), 0);
	/* byte cap on the decompressed size and on the decoded size */
	assert_int_equal(pf_pprof_decode(gz.data, gz.len, 64, &r, NULL), -E2BIG);
	/* corrupt gzip */
	gz.data[gz.len - 5] ^= 0xff;
	assert_int_equal(pf_pprof_decode(gz.data, gz.len, 1 << 20, &r, NULL), -EBADMSG);
	gz.data[gz.len - 5] ^= 0xff;
	/* garbage */
	uint8_t junk[64];
	memset(junk, 0xff, sizeof(junk));
	assert_int_equal(pf_pprof_decode(junk, sizeof(junk), 1 << 20, &r, NULL), -EBADMSG);
	/* a sample referencing an unknown location id */
	pb_profile *p = unpack(&gz, &raw);
	p->sample[0]->location_id[0] = 999;
	size_t n = protobuf_c_message_get_packed_size(&p->base);
	uint8_t *bad = malloc(n);
	protobuf_c_message_pack(&p->base, bad);
	struct pf_error err = {0};
	assert_int_equal(pf_pprof_decode(bad, n, 1 << 20, &r, &err), -EBADMSG);
	/* a string index out of range */
	p->sample[0]->location_id[0] = 1;
	p->function[0]->name = 5000;
	protobuf_c_message_pack(&p->base, bad);
	assert_int_equal(pf_pprof_decode(bad, n, 1 << 20, &r, NULL), -EBADMSG);
	free(bad);
	protobuf_c_message_free_unpacked(&p->base, NULL);
	pf_buf_release(&raw);
	pf_buf_release(&gz);
	pf_prof_window_free(w);
}

/* Explicit sample types: the window's types, period, default type, values and labels; and
 * the decoder's expansion of a location with inlined lines into frames. */
static void test_sample_types(void **state)
{
	struct pf_prof_window *w = prof_fixture_typed_window(), *r = NULL;
	struct pf_buf gz, raw;
	pf_buf_init(&gz, 1 << 20);
	assert_int_equal(pf_pprof_encode(w, PF_PPROF_ALL_PROCESSES, &gz, NULL), 0);
	pb_profile *p = unpack(&gz, &raw);
	assert_int_equal(p->n_sample_type, 2);
	assert_string_equal(S(p, p->sample_type[1]->type), "alloc_space");
	assert_string_equal(S(p, p->period_type->type), "space");
	assert_int_equal(p->period, 524288);
	assert_string_equal(S(p, p->default_sample_type), "alloc_space");
	assert_int_equal(p->n_sample, 2); /* the all-zero sample is left out */
	assert_int_equal(p->sample[0]->n_value, 2);
	assert_int_equal(p->sample[0]->value[1], 3000);
	assert_int_equal(p->sample[0]->n_label, 2); /* no pid/tid: unknown */
	assert_string_equal(S(p, p->sample[0]->label[1]->key), "bytes");
	assert_string_equal(S(p, p->sample[0]->label[1]->num_unit), "bytes");

	/* inline: give location 1 a second line (its caller, inlined) */
	Perftools__Profiles__Location *l = p->location[p->sample[0]->location_id[0] - 1];
	Perftools__Profiles__Line extra = PERFTOOLS__PROFILES__LINE__INIT;
	extra.function_id = p->location[p->sample[0]->location_id[1] - 1]->line[0]->function_id;
	extra.line = 77;
	Perftools__Profiles__Line *lines[2] = {l->line[0], &extra};
	Perftools__Profiles__Line **old = l->line;
	l->line = lines;
	l->n_line = 2;
	size_t n = protobuf_c_message_get_packed_size(&p->base);
	uint8_t *buf = malloc(n);
	protobuf_c_message_pack(&p->base, buf);
	l->line = old;
	l->n_line = 1;
	struct pf_error err = {0};
	assert_int_equal(pf_pprof_decode(buf, n, 1 << 20, &r, &err), 0);
	free(buf);
	assert_int_equal(r->n_sample_types, 2);
	assert_string_equal(r->default_sample_type, "alloc_space");
	assert_int_equal(r->period, 524288);
	assert_int_equal(r->frequency_hz, 0);
	const struct pf_prof_process *pr = &r->processes[0];
	assert_int_equal(pr->pid, 0);
	const struct pf_prof_sample *s = &pr->samples[0];
	assert_int_equal(s->values[0], 3);
	assert_int_equal(s->values[1], 3000);
	assert_int_equal(s->count, 3);
	assert_int_equal(s->n_labels, 2);
	assert_string_equal(s->labels[0].key, "worker");
	assert_string_equal(s->labels[0].str, "a");
	assert_int_equal(s->labels[1].num, 1000);
	const struct pf_prof_stack *st = &pr->stacks[s->stack];
	assert_int_equal(st->n_frames, 3); /* work_a, main (inlined, line 77), main */
	assert_string_equal(pr->frames[st->frames[0]].function, "work_a");
	assert_string_equal(pr->frames[st->frames[1]].function, "main");
	assert_int_equal(pr->frames[st->frames[1]].line, 77);
	assert_int_equal(pr->frames[st->frames[1]].address, pr->frames[st->frames[0]].address);
	assert_string_equal(pr->frames[st->frames[2]].function, "main");
	assert_int_equal(pr->samples[1].values[0], 0);
	assert_int_equal(pr->samples[1].count, 0);
	pf_prof_window_free(r);

	/* a sample with the wrong number of values is refused */
	p->sample[0]->n_value = 1;
	n = protobuf_c_message_get_packed_size(&p->base);
	buf = malloc(n);
	protobuf_c_message_pack(&p->base, buf);
	assert_int_equal(pf_pprof_decode(buf, n, 1 << 20, &r, NULL), -EBADMSG);
	p->sample[0]->n_value = 2;
	free(buf);
	protobuf_c_message_free_unpacked(&p->base, NULL);
	pf_buf_release(&raw);
	pf_buf_release(&gz);
	pf_prof_window_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_names_and_inlines),
		cmocka_unit_test(test_decode_refuses),
		cmocka_unit_test(test_sample_types),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
