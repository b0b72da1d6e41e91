/* profcheck_main.c — `profcheck FILE`: the conformance checker (profcheck.h) and a summary of
 * one OTLP profiles file (an ExportProfilesServiceRequest), for the integration tests written
 * in Python. Prints one JSON object on stdout:
 *
 *   {"violations": ["rule: detail", ...], "frequency_hz": 199, "sample_type": "samples",
 *    "sample_unit": "count", "start_unix_ns": ...,
 *    "end_unix_ns": ..., "processes": [{"pid": 42, "attributes": {"process.executable.name":
 *    "w", ...}, "samples": 390, "leaf": {"hot_a": 260, ...},
 *    "stacks": {"hot_a;caller_a;main": 260, ...}, "value": 3900000000 (the first sample
 *    type's values summed), "stack_values": {"hot_a;caller_a;main": 2600000000, ...},
 *    "first_ts": ..., "last_ts": ... (sample
 *    timestamps, 0 without), "tids": {"43": 390}, "links": {"<trace hex>/<span hex>": 390},
 *    "unlinked": 0, "system_names": {"ns::f()": "_ZN2ns1fEv", ...}}]}
 * ("links": samples per trace link, for the samples that carry one; "system_names": the
 * mangled name of each function whose readable name differs.)
 *
 * Stacks are leaf first, ";"-joined function names ("0x<address>" for an unsymbolized frame),
 * the functions inlined at a frame's address before it, innermost first.
 * Exit status: 0 conformant, 1 violations, 2 unreadable or undecodable file. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "otlp_profiles.h"
#include "pf/buf.h"
#include "pf/uuid.h"
#include "pf/profile.h"
#include "profcheck.h"

#define MAX_FILE ((size_t)256 << 20)

static int read_all(const char *path, struct pf_buf *b)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -errno;
	char chunk[65536];
	size_t n;
	int r = 0;
	while (r == 0 && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		r = pf_buf_append(b, chunk, n);
	if (r == 0 && ferror(f))
		r = -EIO;
	fclose(f);
	return r;
}

static void frame_name(const struct pf_prof_process *p, uint32_t fi, char *out, size_t len)
{
	const struct pf_prof_frame *f = &p->frames[fi];
	if (f->function)
		snprintf(out, len, "%s", f->function);
	else
		snprintf(out, len, "0x%" PRIx64, f->address);
}

static void add_count(json_t *obj, const char *key, uint64_t n)
{
	json_t *v = json_object_get(obj, key);
	uint64_t old = v ? (uint64_t)json_integer_value(v) : 0;
	json_object_set_new(obj, key, json_integer((json_int_t)(old + n)));
}

static json_t *process_json(const struct pf_prof_window *w, const struct pf_prof_process *p)
{
	json_t *o = json_object(), *attrs = json_object(), *leaf = json_object(),
	       *stacks = json_object(), *tids = json_object(), *links = json_object(),
	       *svalues = json_object();
	uint64_t total = 0, first = 0, last = 0, unlinked = 0, value = 0;
	json_t *sys = json_object();
	for (size_t i = 0; i < p->n_attrs; i++)
		json_object_set_new(attrs, p->attrs[i].key, json_string(p->attrs[i].value));
	for (size_t i = 0; i < p->n_frames; i++) {
		const struct pf_prof_frame *f = &p->frames[i];
		if (f->function && f->system_name)
			json_object_set_new(sys, f->function, json_string(f->system_name));
		for (uint32_t j = 0; f->inlined && j < f->n_inlined; j++)
			if (f->inlined[j].function && f->inlined[j].system_name)
				json_object_set_new(sys, f->inlined[j].function,
						    json_string(f->inlined[j].system_name));
	}
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct pf_prof_sample *s = &p->samples[i];
		const struct pf_prof_stack *st = &p->stacks[s->stack];
		struct pf_buf b;
		char name[256];
		total += s->count;
		int64_t sv = pf_prof_sample_value(w, s, 0);
		value += sv > 0 ? (uint64_t)sv : 0;
		for (uint32_t k = 0; k < s->n_timestamps; k++) {
			uint64_t t = s->timestamps[k];
			first = !first || t < first ? t : first;
			last = t > last ? t : last;
		}
		char key[64];
		snprintf(key, sizeof(key), "%" PRIu32, s->tid);
		add_count(tids, key, s->count);
		static const uint8_t zero[16];
		if (memcmp(s->trace_id, zero, 16)) {
			pf_hex_encode(s->trace_id, 16, key);
			key[32] = '/';
			pf_hex_encode(s->span_id, 8, key + 33);
			add_count(links, key, s->count);
		} else {
			unlinked += s->count;
		}
		pf_buf_init(&b, 1 << 20);
		for (uint32_t k = 0; k < st->n_frames; k++) {
			const struct pf_prof_frame *f = &p->frames[st->frames[k]];
			/* functions inlined at the address first, innermost first */
			for (uint32_t j = 0; f->inlined && j < f->n_inlined; j++) {
				const char *in = f->inlined[j].function;
				if (!in)
					continue;
				if (!b.len)
					add_count(leaf, in, s->count);
				pf_buf_printf(&b, "%s%s", b.len ? ";" : "", in);
			}
			frame_name(p, st->frames[k], name, sizeof(name));
			if (!b.len)
				add_count(leaf, name, s->count);
			pf_buf_printf(&b, "%s%s", b.len ? ";" : "", name);
		}
		add_count(stacks, b.data ? pf_buf_str(&b) : "", s->count);
		add_count(svalues, b.data ? pf_buf_str(&b) : "", sv > 0 ? (uint64_t)sv : 0);
		pf_buf_release(&b);
	}
	json_object_set_new(o, "pid", json_integer(p->pid));
	json_object_set_new(o, "attributes", attrs);
	json_object_set_new(o, "samples", json_integer((json_int_t)total));
	json_object_set_new(o, "value", json_integer((json_int_t)value));
	json_object_set_new(o, "stack_values", svalues);
	json_object_set_new(o, "leaf", leaf);
	json_object_set_new(o, "stacks", stacks);
	json_object_set_new(o, "first_ts", json_integer((json_int_t)first));
	json_object_set_new(o, "last_ts", json_integer((json_int_t)last));
	json_object_set_new(o, "tids", tids);
	json_object_set_new(o, "links", links);
	json_object_set_new(o, "unlinked", json_integer((json_int_t)unlinked));
	json_object_set_new(o, "system_names", sys);
	return o;
}

int main(int argc, char **argv)
{
	struct pf_buf b;
	struct profcheck_result res = {0};
	struct pf_prof_window *w = NULL;
	struct pf_error err = {0};

	if (argc != 2) {
		fprintf(stderr, "usage: profcheck FILE.otlp.pb\n");
		return 2;
	}
	pf_buf_init(&b, MAX_FILE);
	int r = read_all(argv[1], &b);
	if (r < 0) {
		fprintf(stderr, "profcheck: %s: %s\n", argv[1], strerror(-r));
		return 2;
	}
	int nv = profcheck_run(b.data, b.len, &res);
	if (nv < 0) {
		fprintf(stderr, "profcheck: %s: does not decode (%s)\n", argv[1], strerror(-nv));
		return 2;
	}
	r = pf_otlp_profiles_decode(b.data, b.len, MAX_FILE, &w, &err);
	if (r < 0) {
		fprintf(stderr, "profcheck: %s: %s\n", argv[1], err.msg);
		profcheck_release(&res);
		return 2;
	}
	json_t *root = json_object(), *viol = json_array(), *procs = json_array();
	for (size_t i = 0; i < res.n; i++)
		json_array_append_new(viol, json_string(res.msgs[i]));
	for (size_t i = 0; i < w->n_processes; i++)
		json_array_append_new(procs, process_json(w, &w->processes[i]));
	json_object_set_new(root, "violations", viol);
	json_object_set_new(root, "frequency_hz", json_integer(w->frequency_hz));
	struct pf_prof_value_type st0 = pf_prof_window_type(w, 0);
	json_object_set_new(root, "sample_type", json_string(st0.type ? st0.type : ""));
	json_object_set_new(root, "sample_unit", json_string(st0.unit ? st0.unit : ""));
	json_object_set_new(root, "start_unix_ns", json_integer((json_int_t)w->start_unix_ns));
	json_object_set_new(root, "end_unix_ns", json_integer((json_int_t)w->end_unix_ns));
	json_object_set_new(root, "processes", procs);
	char *text = json_dumps(root, JSON_SORT_KEYS);
	if (text)
		printf("%s\n", text);
	free(text);
	json_decref(root);
	pf_prof_window_free(w);
	profcheck_release(&res);
	pf_buf_release(&b);
	return nv > 0 ? 1 : 0;
}
