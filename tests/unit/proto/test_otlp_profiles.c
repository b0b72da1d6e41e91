/* Unit tests of proto/codec/otlp_profiles*.c: encoding of the fixture windows (every output
 * runs through the conformance checker, tests/lib/profcheck.c), dictionary interning and stack
 * dedup, sample shapes and time range, links, round trips through the decoder, and the
 * decoder's refusals (garbage, truncation, byte cap, nesting, bad indices). */
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
typedef Opentelemetry__Proto__Profiles__V1development__Sample pb_sample;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit pb_kvu;
#define REQ_DESC \
	(&opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor)

static void encode(struct pf_prof_window *w, struct pf_buf *b, uint8_t id[16])
{
	struct pf_error err = {0};
	pf_buf_init(b, 64 << 20);
	int r = pf_otlp_profiles_encode(w, b, id, &err);
	if (r)
		fprintf(stderr, "encode: %d %s\n", r, err.msg);
	assert_int_equal(r, 0);
	assert_true(b->len > 0);
}

static void assert_conformant(const struct pf_buf *b)
{
	struct profcheck_result res;
	int n = profcheck_run(b->data, b->len, &res);
	if (n)
		profcheck_print(&res);
	assert_int_equal(n, 0);
	profcheck_release(&res);
}

static pb_request *unpack(const struct pf_buf *b)
{
	pb_request *q = (pb_request *)protobuf_c_message_unpack(REQ_DESC, NULL, b->len, b->data);
	assert_non_null(q);
	return q;
}

static int find_string(const pb_request *q, const char *s)
{
	for (size_t i = 0; i < q->dictionary->n_string_table; i++)
		if (strcmp(q->dictionary->string_table[i], s) == 0)
			return (int)i;
	return -1;
}

static void test_encode_conformant_and_dedup(void **state)
{
	struct pf_prof_window *w = prof_fixture_window(0);
	struct pf_buf b;
	uint8_t id[16] = {0};
	encode(w, &b, id);
	assert_conformant(&b);

	pb_request *q = unpack(&b);
	assert_int_equal(q->n_resource_profiles, 2);
	const pb_request *cq = q;
	const Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary *d = cq->dictionary;
	/* zero entry + (main, work_a, work_b, do_syscall_64) */
	assert_int_equal(d->n_function_table, 5);
	/* zero + app + kernel, shared by both processes */
	assert_int_equal(d->n_mapping_table, 3);
	/* zero + main, work_a, work_b, do_syscall_64, unsymbolized */
	assert_int_equal(d->n_location_table, 6);
	/* zero + work_a<-main (3 uses), work_b<-main, kernel stack */
	assert_int_equal(d->n_stack_table, 4);
	assert_int_equal(d->n_link_table, 1);
	assert_string_equal(d->string_table[0], "");
	assert_true(find_string(q, "work_a") > 0);
	assert_true(find_string(q, "thread.id") > 0);
	assert_true(find_string(q, "profile.frame.type") > 0);
	assert_true(find_string(q, "process.executable.build_id.gnu") > 0);

	const Opentelemetry__Proto__Profiles__V1development__Profile *p =
		q->resource_profiles[0]->scope_profiles[0]->profiles[0];
	assert_int_equal(p->profile_id.len, 16);
	assert_memory_equal(p->profile_id.data, id, 16);
	assert_int_equal(p->period, 1000000000 / 99);
	assert_string_equal(d->string_table[p->sample_type->type_strindex], "samples");
	assert_string_equal(d->string_table[p->sample_type->unit_strindex], "count");
	assert_string_equal(d->string_table[p->period_type->type_strindex], "cpu");
	assert_string_equal(d->string_table[p->period_type->unit_strindex], "nanoseconds");
	assert_int_equal(p->time_unix_nano, PROF_FIXTURE_START);
	assert_int_equal(p->duration_nano, PROF_FIXTURE_NS);
	assert_int_equal(p->n_samples, 4);
	for (size_t i = 0; i < p->n_samples; i++) {
		assert_int_equal(p->samples[i]->n_values, 1);
		assert_int_equal(p->samples[i]->n_timestamps_unix_nano, 0);
	}
	assert_int_equal(p->samples[0]->values[0], 4);
	/* stack 0 and 3 are the same stack */
	assert_int_equal(p->samples[0]->stack_index, p->samples[3]->stack_index);
	/* the other process's only stack is the same too */
	const Opentelemetry__Proto__Profiles__V1development__Profile *p2 =
		q->resource_profiles[1]->scope_profiles[0]->profiles[0];
	assert_int_equal(p2->samples[0]->stack_index, p->samples[0]->stack_index);
	assert_memory_not_equal(p2->profile_id.data, p->profile_id.data, 16);

	/* plain resource attributes: service.name string, process.pid int, host.name added */
	const Opentelemetry__Proto__Resource__V1__Resource *res = q->resource_profiles[0]->resource;
	int seen = 0;
	for (size_t i = 0; i < res->n_attributes; i++) {
		const Opentelemetry__Proto__Common__V1__KeyValue *kv = res->attributes[i];
		if (strcmp(kv->key, "service.name") == 0) {
			assert_string_equal(kv->value->string_value, "app");
			seen |= 1;
		} else if (strcmp(kv->key, "process.pid") == 0) {
			assert_int_equal(kv->value->int_value, 100);
			seen |= 2;
		} else if (strcmp(kv->key, "host.name") == 0) {
			assert_string_equal(kv->value->string_value, "host-a");
			seen |= 4;
		}
	}
	assert_int_equal(seen, 7);
	protobuf_c_message_free_unpacked(&q->base, NULL);
	pf_buf_release(&b);
	pf_prof_window_free(w);
}

static void test_timestamps_shape(void **state)
{
	struct pf_prof_window *w = prof_fixture_window(PROF_FIX_TIMESTAMPS);
	struct pf_buf b;
	encode(w, &b, NULL);
	assert_conformant(&b);
	pb_request *q = unpack(&b);
	const Opentelemetry__Proto__Profiles__V1development__Profile *p =
		q->resource_profiles[0]->scope_profiles[0]->profiles[0];
	for (size_t i = 0; i < p->n_samples; i++) {
		assert_int_equal(p->samples[i]->n_values, 0);
		assert_true(p->samples[i]->n_timestamps_unix_nano > 0);
	}
	protobuf_c_message_free_unpacked(&q->base, NULL);
	pf_buf_release(&b);
	pf_prof_window_free(w);

	/* one sample without timestamps: the whole profile falls back to values */
	w = prof_fixture_window(PROF_FIX_MIXED);
	encode(w, &b, NULL);
	assert_conformant(&b);
	q = unpack(&b);
	p = q->resource_profiles[0]->scope_profiles[0]->profiles[0];
	for (size_t i = 0; i < p->n_samples; i++) {
		assert_int_equal(p->samples[i]->n_values, 1);
		assert_int_equal(p->samples[i]->n_timestamps_unix_nano, 0);
	}
	/* the other process keeps its timestamps */
	p = q->resource_profiles[1]->scope_profiles[0]->profiles[0];
	assert_int_equal(p->samples[0]->n_timestamps_unix_nano, 3);
	protobuf_c_message_free_unpacked(&q->base, NULL);
	pf_buf_release(&b);
	pf_prof_window_free(w);
}

static void test_time_range_widened(void **state)
{
	struct pf_prof_window *w = prof_fixture_window(PROF_FIX_TIMESTAMPS);
	/* timestamps past the end and before the start */
	uint64_t *ts = (uint64_t *)w->processes[0].samples[0].timestamps;
	ts[0] = w->start_unix_ns - 5;
	ts[1] = w->end_unix_ns;
	struct pf_buf b;
	encode(w, &b, NULL);
	assert_conformant(&b);
	pb_request *q = unpack(&b);
	const Opentelemetry__Proto__Profiles__V1development__Profile *p =
		q->resource_profiles[0]->scope_profiles[0]->profiles[0];
	assert_int_equal(p->time_unix_nano, PROF_FIXTURE_START - 5);
	assert_int_equal(p->duration_nano, PROF_FIXTURE_NS + 6);
	protobuf_c_message_free_unpacked(&q->base, NULL);
	pf_buf_release(&b);
	pf_prof_window_free(w);
}

static void test_links(void **state)
{
	struct pf_prof_window *w = prof_fixture_window(PROF_FIX_LINK);
	struct pf_buf b;
	encode(w, &b, NULL);
	assert_conformant(&b);
	pb_request *q = unpack(&b);
	const Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary *d = q->dictionary;
	assert_int_equal(d->n_link_table, 2);
	assert_int_equal(d->link_table[0]->trace_id.len, 0);
	assert_int_equal(d->link_table[1]->trace_id.len, 16);
	assert_int_equal(d->link_table[1]->span_id.len, 8);
	const Opentelemetry__Proto__Profiles__V1development__Profile *p =
		q->resource_profiles[0]->scope_profiles[0]->profiles[0];
	assert_int_equal(p->samples[0]->link_index, 1);
	assert_int_equal(p->samples[1]->link_index, 0);
	protobuf_c_message_free_unpacked(&q->base, NULL);

	struct pf_prof_window *back = NULL;
	assert_int_equal(pf_otlp_profiles_decode(b.data, b.len, 1 << 20, &back, NULL), 0);
	uint8_t tid[16];
	memset(tid, 0xab, 16);
	assert_memory_equal(back->processes[0].samples[0].trace_id, tid, 16);
	pf_prof_window_free(back);
	pf_buf_release(&b);
	pf_prof_window_free(w);
}

static const char *frame_fn(const struct pf_prof_process *p, uint32_t stack, uint32_t k)
{
	return p->frames[p->stacks[stack].frames[k]].function;
}

/* Every frame kind is its profile.frame.type on the wire ("cpython" and "go" beside "native"
 * and "kernel") and comes back as that kind. */
static void test_frame_types(void **state)
{
	struct pf_prof_window *w = prof_fixture_window(0);
	struct pf_prof_frame *f = (struct pf_prof_frame *)w->processes[0].frames;
	f[1].kind = PF_FRAME_PYTHON;
	f[2].kind = PF_FRAME_GO;
	struct pf_buf b;
	encode(w, &b, NULL);
	struct pf_prof_window *r = NULL;
	struct pf_error err = {0};
	assert_int_equal(pf_otlp_profiles_decode(b.data, b.len, 1 << 20, &r, &err), 0);
	const struct pf_prof_process *p = &r->processes[0];
	int seen[4] = {0};
	for (size_t i = 0; i < p->n_frames; i++) {
		const struct pf_prof_frame *d = &p->frames[i];
		assert_true(d->kind < 4);
		seen[d->kind]++;
		if (d->function && !strcmp(d->function, "work_a"))
			assert_int_equal(d->kind, PF_FRAME_PYTHON);
		if (d->function && !strcmp(d->function, "work_b"))
			assert_int_equal(d->kind, PF_FRAME_GO);
		if (d->function && !strcmp(d->function, "main"))
			assert_int_equal(d->kind, PF_FRAME_NATIVE);
	}
	assert_true(seen[PF_FRAME_NATIVE] && seen[PF_FRAME_KERNEL] && seen[PF_FRAME_PYTHON] &&
		    seen[PF_FRAME_GO]);
	assert_string_equal(pf_frame_kind_name(PF_FRAME_PYTHON), "cpython");
	assert_string_equal(pf_frame_kind_name(PF_FRAME_GO), "go");
	assert_string_equal(pf_frame_kind_name(200), "native");
	assert_int_equal(pf_frame_kind_parse("kernel"), PF_FRAME_KERNEL);
	assert_int_equal(pf_frame_kind_parse("jvm"), PF_FRAME_JVM);
	assert_string_equal(pf_frame_kind_name(PF_FRAME_JVM), "jvm");
	assert_int_equal(pf_frame_kind_parse("dotnet"), PF_FRAME_NATIVE);
	assert_int_equal(pf_frame_kind_parse(NULL), PF_FRAME_NATIVE);
	pf_prof_window_free(r);
	pf_buf_release(&b);
	pf_prof_window_free(w);
}

static void test_round_trip(void **state)
{
	struct pf_prof_window *w = prof_fixture_window(PROF_FIX_TIMESTAMPS);
	struct pf_buf b;
	encode(w, &b, NULL);
	struct pf_prof_window *r = NULL;
	struct pf_error err = {0};
	assert_int_equal(pf_otlp_profiles_decode(b.data, b.len, 1 << 20, &r, &err), 0);
	assert_int_equal(r->n_processes, 2);
	assert_int_equal(r->frequency_hz, 99);
	assert_int_equal(r->start_unix_ns, w->start_unix_ns);
	assert_int_equal(r->end_unix_ns, w->end_unix_ns);
	assert_string_equal(r->host_name, "host-a");
	assert_int_equal(pf_prof_window_samples(r), pf_prof_window_samples(w));
	const struct pf_prof_process *p = &r->processes[0];
	assert_int_equal(p->pid, 100);
	assert_int_equal(p->n_samples, 4);
	assert_int_equal(p->n_stacks, 3); /* deduplicated */
	const struct pf_prof_sample *s = &p->samples[1];
	assert_int_equal(s->count, 2);
	assert_int_equal(s->tid, 101);
	assert_string_equal(s->thread_name, "worker");
	assert_int_equal(s->n_timestamps, 2);
	assert_int_equal(s->timestamps[0], w->processes[0].samples[1].timestamps[0]);
	assert_string_equal(frame_fn(p, s->stack, 0), "work_b");
	assert_string_equal(frame_fn(p, s->stack, 1), "main");
	/* kernel stack: kind, the unsymbolized frame keeps address and mapping */
	s = &p->samples[2];
	const struct pf_prof_frame *kf = &p->frames[p->stacks[s->stack].frames[0]];
	assert_int_equal(kf->kind, PF_FRAME_KERNEL);
	assert_string_equal(p->mappings[kf->mapping].path, "[kernel.kallsyms]");
	const struct pf_prof_frame *uf = &p->frames[p->stacks[s->stack].frames[1]];
	assert_null(uf->function);
	assert_int_equal(uf->address, 0x401300);
	assert_int_equal(uf->kind, PF_FRAME_NATIVE);
	assert_string_equal(p->mappings[uf->mapping].build_id,
			    "aabbccddeeff00112233445566778899aabbccdd");
	const struct pf_prof_frame *mf = &p->frames[p->stacks[s->stack].frames[2]];
	assert_string_equal(mf->file, "app.c");
	assert_int_equal(mf->line, 10);
	int found = 0;
	for (size_t i = 0; i < p->n_attrs; i++)
		if (strcmp(p->attrs[i].key, "process.pid") == 0 &&
		    strcmp(p->attrs[i].value, "100") == 0)
			found = 1;
	assert_true(found);
	assert_int_equal(r->processes[1].pid, 200);
	pf_prof_window_free(r);
	pf_buf_release(&b);
	pf_prof_window_free(w);
}

/* Demangled names keep their mangled form as Function.system_name; functions inlined at an
 * address are the Location's first lines (innermost first), the function they were inlined
 * into the last; the output stays conformant and decodes back to the same frames. */
static void test_names_and_inlines(void **state)
{
	struct pf_prof_window *w = prof_fixture_window(PROF_FIX_NAMES);
	struct pf_buf b;
	encode(w, &b, NULL);
	assert_conformant(&b);
	pb_request *q = unpack(&b);
	const Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary *d = q->dictionary;
	int name = find_string(q, "app::work_a(int)"), sys = find_string(q, "_ZN3app6work_aEi");
	assert_true(name > 0 && sys > 0);
	int seen = 0;
	for (size_t i = 0; i < d->n_location_table; i++) {
		const Opentelemetry__Proto__Profiles__V1development__Location *l = d->location_table[i];
		if (l->address != 0x401100)
			continue;
		seen++;
		assert_int_equal(l->n_lines, 3);
		const Opentelemetry__Proto__Profiles__V1development__Function *fn =
			d->function_table[l->lines[2]->function_index];
		assert_int_equal(fn->name_strindex, name);
		assert_int_equal(fn->system_name_strindex, sys);
		assert_int_equal(l->lines[2]->line, 21);
		fn = d->function_table[l->lines[0]->function_index];
		assert_string_equal(d->string_table[fn->name_strindex], "app::leaf()");
		assert_string_equal(d->string_table[fn->system_name_strindex], "_ZN3app4leafEv");
		assert_string_equal(d->string_table[fn->filename_strindex], "app.h");
		assert_int_equal(l->lines[0]->line, 3);
		fn = d->function_table[l->lines[1]->function_index];
		assert_string_equal(d->string_table[fn->name_strindex], "mid");
		assert_string_equal(d->string_table[fn->system_name_strindex], "mid");
		assert_int_equal(l->lines[1]->line, 15);
	}
	assert_int_equal(seen, 1); /* one location, shared by both processes */
	protobuf_c_message_free_unpacked(&q->base, NULL);

	struct pf_prof_window *r = NULL;
	assert_int_equal(pf_otlp_profiles_decode(b.data, b.len, 1 << 20, &r, NULL), 0);
	const struct pf_prof_process *p = &r->processes[0];
	const struct pf_prof_frame *f = &p->frames[p->stacks[p->samples[0].stack].frames[0]];
	assert_string_equal(f->function, "app::work_a(int)");
	assert_string_equal(f->system_name, "_ZN3app6work_aEi");
	assert_int_equal(f->line, 21);
	assert_int_equal(f->n_inlined, 2);
	assert_string_equal(f->inlined[0].function, "app::leaf()");
	assert_string_equal(f->inlined[0].system_name, "_ZN3app4leafEv");
	assert_string_equal(f->inlined[0].file, "app.h");
	assert_int_equal(f->inlined[0].line, 3);
	assert_string_equal(f->inlined[1].function, "mid");
	assert_null(f->inlined[1].system_name); /* same as the name */
	assert_int_equal(f->inlined[1].line, 15);
	/* a plain C name has no separate system name */
	const struct pf_prof_frame *m = &p->frames[p->stacks[p->samples[0].stack].frames[1]];
	assert_string_equal(m->function, "main");
	assert_null(m->system_name);
	assert_int_equal(m->n_inlined, 0);
	pf_prof_window_free(r);
	pf_buf_release(&b);
	pf_prof_window_free(w);
}

/* A profile keeps the OTLP profile_id it came with through decode and re-encode (the embedded
 * store re-encodes each process; agents report the ids of what they sent). */
static void test_profile_id_kept(void **state)
{
	(void)state;
	struct pf_prof_window *w = prof_fixture_window(0);
	struct pf_buf b, b2;
	uint8_t id[16], id2[16];
	encode(w, &b, id);
	struct pf_prof_window *r = NULL;
	assert_int_equal(pf_otlp_profiles_decode(b.data, b.len, 1 << 20, &r, NULL), 0);
	assert_memory_equal(r->processes[0].profile_id, id, 16);
	assert_memory_not_equal(r->processes[1].profile_id, id, 16); /* each has its own */
	/* process 1 alone, as the store encodes it: same id again */
	struct pf_prof_window one = *r;
	one.processes = &r->processes[1];
	one.n_processes = 1;
	encode(&one, &b2, id2);
	assert_memory_equal(id2, r->processes[1].profile_id, 16);
	/* a window built here has none: the encoder picks a random one */
	static const uint8_t zero[16];
	assert_memory_equal(w->processes[0].profile_id, zero, 16);
	assert_memory_not_equal(id, zero, 16);
	pf_prof_window_free(r);
	pf_buf_release(&b);
	pf_buf_release(&b2);
	pf_prof_window_free(w);
}

static void test_encode_errors(void **state)
{
	struct pf_prof_window *w = prof_fixture_window(0);
	struct pf_buf b;
	pf_buf_init(&b, 1 << 20);
	struct pf_error err = {0};
	w->frequency_hz = 0;
	assert_int_equal(pf_otlp_profiles_encode(w, &b, NULL, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "frequency_hz"));
	w->frequency_hz = 99;
	pf_error_clear(&err);
	((struct pf_prof_sample *)w->processes[0].samples)[0].stack = 17;
	assert_int_equal(pf_otlp_profiles_encode(w, &b, NULL, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "stack 17"));
	assert_int_equal(b.len, 0);
	pf_prof_window_free(w);

	/* nothing to export */
	w = pf_prof_window_new();
	w->frequency_hz = 99;
	assert_int_equal(pf_otlp_profiles_encode(w, &b, NULL, NULL), -ENODATA);
	pf_prof_window_free(w);

	/* out's cap */
	w = prof_fixture_window(0);
	struct pf_buf small;
	pf_buf_init(&small, 16);
	assert_int_equal(pf_otlp_profiles_encode(w, &small, NULL, NULL), -E2BIG);
	assert_int_equal(small.len, 0);
	pf_buf_release(&small);
	pf_prof_window_free(w);
	pf_buf_release(&b);
}

static void test_decode_refuses(void **state)
{
	struct pf_prof_window *w = prof_fixture_window(PROF_FIX_TIMESTAMPS), *r = NULL;
	struct pf_buf b;
	encode(w, &b, NULL);
	struct pf_error err = {0};
	/* truncated at every 97th length */
	for (size_t n = 1; n < b.len; n += 97)
		assert_int_equal(pf_otlp_profiles_decode(b.data, n, 1 << 20, &r, NULL), -EBADMSG);
	/* garbage */
	uint8_t junk[256];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 37 + 11);
	assert_int_equal(pf_otlp_profiles_decode(junk, sizeof(junk), 1 << 20, &r, &err), -EBADMSG);
	/* byte cap */
	assert_int_equal(pf_otlp_profiles_decode(b.data, b.len, 512, &r, NULL), -E2BIG);
	assert_int_equal(pf_otlp_profiles_decode(b.data, b.len, b.len, &r, NULL), -E2BIG);
	pf_buf_release(&b);

	/* nesting: resource attribute with AnyValue arrays inside arrays */
	struct pf_buf deep;
	pf_buf_init(&deep, 1 << 20);
	uint8_t inner[1024];
	size_t n = 0;
	/* build from the inside: AnyValue{array_value(5): ArrayValue{values(1): AnyValue{...}}} */
	inner[n++] = 0x0a; /* AnyValue.string_value = "" */
	inner[n++] = 0;
	for (int i = 0; i < 40; i++) {
		uint8_t tmp[1024];
		size_t m = 0;
		tmp[m++] = 0x0a; /* ArrayValue.values */
		tmp[m++] = (uint8_t)n;
		memcpy(tmp + m, inner, n);
		m += n;
		n = 0;
		inner[n++] = 0x2a; /* AnyValue.array_value */
		inner[n++] = (uint8_t)m;
		memcpy(inner + n, tmp, m);
		n += m;
		if (n > 100)
			break;
	}
	/* This builds depth 2 * ~30; lengths stay < 128 (one byte varints). */
	/* KeyValue{key "k", value} inside Resource.attributes inside ResourceProfiles.resource */
	uint8_t kv[256], resource[256], rp[256];
	size_t nkv = 0, nres = 0, nrp = 0;
	kv[nkv++] = 0x0a, kv[nkv++] = 1, kv[nkv++] = 'k';
	kv[nkv++] = 0x12, kv[nkv++] = (uint8_t)n;
	memcpy(kv + nkv, inner, n), nkv += n;
	resource[nres++] = 0x0a, resource[nres++] = (uint8_t)nkv;
	memcpy(resource + nres, kv, nkv), nres += nkv;
	rp[nrp++] = 0x0a, rp[nrp++] = (uint8_t)nres;
	memcpy(rp + nrp, resource, nres), nrp += nres;
	pf_buf_putc(&deep, 0x0a);
	pf_buf_putc(&deep, (uint8_t)nrp);
	pf_buf_append(&deep, rp, nrp);
	assert_true(nrp < 128);
	assert_int_equal(pf_otlp_profiles_decode(deep.data, deep.len, 1 << 20, &r, NULL), -ELOOP);
	pf_buf_release(&deep);

	/* malformed bytes inside a message the depth walk does not enter (a Sample: its nesting
	 * is bounded by the schema) are refused by the unpack: an unterminated varint, a packed
	 * field longer than its Sample */
	static const uint8_t sample_bad[][4] = {{0x08, 0xff, 0xff, 0xff}, {0x22, 0x09, 0x01, 0x02}};
	for (size_t i = 0; i < 2; i++) {
		/* resource_profiles { scope_profiles { profiles { samples { bytes } } } } */
		uint8_t m[12] = {0x0a, 10, 0x12, 8, 0x12, 6, 0x12, 4};
		memcpy(m + 8, sample_bad[i], 4);
		pf_error_clear(&err);
		assert_int_equal(pf_otlp_profiles_decode(m, sizeof(m), 1 << 20, &r, &err), -EBADMSG);
		assert_non_null(strstr(err.msg, "malformed"));
	}
	/* the same Sample well formed is taken (the frame above is right) */
	{
		uint8_t m[12] = {0x0a, 10, 0x12, 8, 0x12, 6, 0x12, 4, 0x20, 0x05, 0x08, 0x00};
		pf_error_clear(&err);
		assert_int_equal(pf_otlp_profiles_decode(m, sizeof(m), 1 << 20, &r, &err), 0);
		if (r)
			pf_prof_window_free(r), r = NULL;
	}

	/* an index out of range */
	encode(w, &b, NULL);
	pb_request *q = unpack(&b);
	q->resource_profiles[0]->scope_profiles[0]->profiles[0]->samples[0]->stack_index = 99;
	size_t len = protobuf_c_message_get_packed_size(&q->base);
	uint8_t *bad = malloc(len);
	protobuf_c_message_pack(&q->base, bad);
	pf_error_clear(&err);
	assert_int_equal(pf_otlp_profiles_decode(bad, len, 1 << 20, &r, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "stack_index 99"));
	free(bad);
	protobuf_c_message_free_unpacked(&q->base, NULL);
	pf_buf_release(&b);
	pf_prof_window_free(w);
}

/* Explicit sample types (pprof sources): one Profile per sample type with a non-zero value,
 * values-only samples, labels as sample attributes (num with unit), no invented
 * process.pid, original_payload on the first Profile; the decoder merges them back. */
static void test_sample_types(void **state)
{
	struct pf_prof_window *w = prof_fixture_typed_window();
	struct pf_buf b;
	encode(w, &b, NULL);
	assert_conformant(&b);
	pb_request *q = unpack(&b);
	assert_int_equal(q->n_resource_profiles, 1);
	const Opentelemetry__Proto__Profiles__V1development__ScopeProfiles *sp =
		q->resource_profiles[0]->scope_profiles[0];
	assert_int_equal(sp->n_profiles, 2);
	const char *const *st = (const char *const *)q->dictionary->string_table;
	assert_string_equal(st[sp->profiles[0]->sample_type->type_strindex], "alloc_objects");
	assert_string_equal(st[sp->profiles[1]->sample_type->type_strindex], "alloc_space");
	assert_string_equal(st[sp->profiles[1]->sample_type->unit_strindex], "bytes");
	assert_string_equal(st[sp->profiles[0]->period_type->type_strindex], "space");
	assert_int_equal(sp->profiles[0]->period, 524288);
	assert_int_equal(sp->profiles[0]->n_samples, 1); /* zero values left out */
	assert_int_equal(sp->profiles[1]->n_samples, 2);
	assert_int_equal(sp->profiles[1]->samples[0]->n_values, 1);
	assert_int_equal(sp->profiles[1]->samples[0]->values[0], 3000);
	assert_int_equal(sp->profiles[0]->original_payload.len, 5);
	assert_string_equal(sp->profiles[0]->original_payload_format, "pprof");
	assert_int_equal(sp->profiles[1]->original_payload.len, 0);
	/* the default sample type, which OTLP has no field for, as a Profile attribute */
	for (size_t k = 0; k < 2; k++) {
		assert_int_equal(sp->profiles[k]->n_attribute_indices, 1);
		const pb_kvu *a =
		    q->dictionary->attribute_table[sp->profiles[k]->attribute_indices[0]];
		assert_string_equal(st[a->key_strindex], PF_OTLP_DEFAULT_TYPE_ATTR);
		assert_string_equal(a->value->string_value, "alloc_space");
	}
	const pb_sample *s0 = sp->profiles[1]->samples[0];
	int seen = 0;
	for (size_t i = 0; i < s0->n_attribute_indices; i++) {
		const pb_kvu *a = q->dictionary->attribute_table[s0->attribute_indices[i]];
		const char *key = st[a->key_strindex];
		assert_string_not_equal(key, "thread.id"); /* tid 0 = unknown: left out */
		if (strcmp(key, "worker") == 0 && strcmp(a->value->string_value, "a") == 0)
			seen |= 1;
		if (strcmp(key, "bytes") == 0 && a->value->int_value == 1000 &&
		    strcmp(st[a->unit_strindex], "bytes") == 0)
			seen |= 2;
	}
	assert_int_equal(seen, 3);
	const Opentelemetry__Proto__Resource__V1__Resource *res = q->resource_profiles[0]->resource;
	for (size_t i = 0; i < res->n_attributes; i++)
		assert_string_not_equal(res->attributes[i]->key, "process.pid");
	protobuf_c_message_free_unpacked(&q->base, NULL);

	struct pf_prof_window *r = NULL;
	struct pf_error err = {0};
	assert_int_equal(pf_otlp_profiles_decode(b.data, b.len, 1 << 20, &r, &err), 0);
	assert_int_equal(r->n_sample_types, 2);
	assert_string_equal(r->sample_types[1].type, "alloc_space");
	assert_string_equal(r->sample_types[1].unit, "bytes");
	assert_string_equal(r->default_sample_type, "alloc_space");
	assert_string_equal(r->period_type.type, "space");
	assert_int_equal(r->period, 524288);
	assert_int_equal(r->frequency_hz, 0);
	assert_int_equal(r->n_processes, 1);
	const struct pf_prof_process *p = &r->processes[0];
	assert_int_equal(p->n_samples, 2); /* merged across the two Profiles */
	assert_int_equal(p->original_payload_len, 5);
	assert_memory_equal(p->original_payload, "PPROF", 5);
	assert_string_equal(p->original_payload_format, "pprof");
	int64_t tot[2] = {0, 0};
	for (size_t i = 0; i < p->n_samples; i++) {
		tot[0] += pf_prof_sample_value(r, &p->samples[i], 0);
		tot[1] += pf_prof_sample_value(r, &p->samples[i], 1);
		if (pf_prof_sample_value(r, &p->samples[i], 1) == 3000) {
			assert_int_equal(pf_prof_sample_value(r, &p->samples[i], 0), 3);
			assert_int_equal(p->samples[i].count, 3);
			assert_int_equal(p->samples[i].n_labels, 2);
			assert_string_equal(p->samples[i].labels[1].key, "bytes");
			assert_int_equal(p->samples[i].labels[1].num, 1000);
			assert_string_equal(p->samples[i].labels[1].unit, "bytes");
			assert_string_equal(p->samples[i].labels[0].str, "a");
		}
	}
	assert_int_equal(tot[0], 3);
	assert_int_equal(tot[1], 3512);
	pf_prof_window_free(r);
	pf_buf_release(&b);

	/* an explicit type without a name is refused */
	((struct pf_prof_value_type *)w->sample_types)[0].type = NULL;
	pf_buf_init(&b, 1 << 20);
	assert_int_equal(pf_otlp_profiles_encode(w, &b, NULL, NULL), -EINVAL);
	pf_buf_release(&b);
	pf_prof_window_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode_conformant_and_dedup),
		cmocka_unit_test(test_timestamps_shape),
		cmocka_unit_test(test_time_range_widened),
		cmocka_unit_test(test_links),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_frame_types),
		cmocka_unit_test(test_names_and_inlines),
		cmocka_unit_test(test_profile_id_kept),
		cmocka_unit_test(test_encode_errors),
		cmocka_unit_test(test_decode_refuses),
		cmocka_unit_test(test_sample_types),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
