/* profcheck.c — see profcheck.h. Test code: links the generated protobuf-c code through
 * pf_proto_gen_headers (allowed for tests of codec internals; production code outside
 * proto/codec/ never sees the generated names). */
#include "profcheck.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
	pb_request;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary pb_dict;
typedef Opentelemetry__Proto__Profiles__V1development__Profile pb_profile;
typedef Opentelemetry__Proto__Profiles__V1development__Sample pb_sample;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping pb_mapping;
typedef Opentelemetry__Proto__Profiles__V1development__Location pb_location;
typedef Opentelemetry__Proto__Profiles__V1development__Function pb_function;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit pb_kvu;
typedef Opentelemetry__Proto__Profiles__V1development__Link pb_link;
typedef Opentelemetry__Proto__Profiles__V1development__Stack pb_stack;

#define ANY_STRINDEX OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX

struct ck {
	struct profcheck_result *res;
	const pb_dict *d;
	int rc;
	/* reference counts for the orphan check */
	size_t *ref[7];
};

enum { R_STR, R_ATTR, R_MAP, R_LOC, R_FN, R_LINK, R_STACK };

static void __attribute__((format(printf, 3, 4))) v(struct ck *c, const char *rule,
						    const char *fmt, ...)
{
	char tmp[512];
	int n = snprintf(tmp, sizeof(tmp), "%s: ", rule);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tmp + n, sizeof(tmp) - (size_t)n, fmt, ap);
	va_end(ap);
	char **m = realloc(c->res->msgs, (c->res->n + 1) * sizeof(*m));
	char *s = strdup(tmp);
	if (!m || !s) {
		free(s);
		if (m)
			c->res->msgs = m;
		c->rc = -ENOMEM;
		return;
	}
	c->res->msgs = m;
	m[c->res->n++] = s;
}

/* Range check of an index into a table of n entries; counts the reference. */
static bool idx(struct ck *c, int table, int64_t i, size_t n, const char *what)
{
	if (i < 0 || (uint64_t)i >= n) {
		v(c, "index", "%s %" PRId64 " out of range (table of %zu)", what, i, n);
		return false;
	}
	c->ref[table][i]++;
	return true;
}

static void str(struct ck *c, int64_t i, const char *what)
{
	idx(c, R_STR, i, c->d->n_string_table, what);
}

static void attr_indices(struct ck *c, size_t n, const int32_t *ai, const char *what)
{
	for (size_t k = 0; k < n; k++) {
		if (!idx(c, R_ATTR, ai[k], c->d->n_attribute_table, what))
			continue;
		int32_t key = c->d->attribute_table[ai[k]]->key_strindex;
		for (size_t j = 0; j < k; j++) {
			if (ai[j] < 0 || (size_t)ai[j] >= c->d->n_attribute_table)
				continue;
			if (c->d->attribute_table[ai[j]]->key_strindex == key) {
				const char *name = key >= 0 && (size_t)key < c->d->n_string_table
							   ? c->d->string_table[key]
							   : "?";
				v(c, "dup_key", "%s: key \"%s\" repeated", what, name);
			}
		}
	}
}

static bool empty_msg(const ProtobufCMessage *m)
{
	return protobuf_c_message_get_packed_size(m) == 0;
}

static void check_dictionary(struct ck *c)
{
	const pb_dict *d = c->d;
	static const char *names[7] = {"string_table",  "attribute_table", "mapping_table",
				       "location_table", "function_table", "link_table",
				       "stack_table"};
	size_t ns[7] = {d->n_string_table,   d->n_attribute_table, d->n_mapping_table,
			d->n_location_table, d->n_function_table,  d->n_link_table,
			d->n_stack_table};
	for (int t = 0; t < 7; t++)
		if (!ns[t])
			v(c, "table_empty", "%s is empty", names[t]);
	if (d->n_string_table && d->string_table[0][0])
		v(c, "string0", "string_table[0] is \"%s\", must be empty", d->string_table[0]);
	if (d->n_attribute_table) {
		const pb_kvu *a = d->attribute_table[0];
		if (a->key_strindex || a->unit_strindex || a->value)
			v(c, "attribute0", "attribute_table[0] must have key 0, unit 0, no value");
	}
	const ProtobufCMessage *zeros[5] = {
		d->n_mapping_table ? &d->mapping_table[0]->base : NULL,
		d->n_location_table ? &d->location_table[0]->base : NULL,
		d->n_function_table ? &d->function_table[0]->base : NULL,
		d->n_link_table ? &d->link_table[0]->base : NULL,
		d->n_stack_table ? &d->stack_table[0]->base : NULL};
	for (int t = 0; t < 5; t++)
		if (zeros[t] && !empty_msg(zeros[t]))
			v(c, "zero_entry", "%s[0] is not the empty message", names[t + 2]);

	for (size_t i = 0; i < d->n_attribute_table; i++) {
		const pb_kvu *a = d->attribute_table[i];
		str(c, a->key_strindex, "attribute key_strindex");
		str(c, a->unit_strindex, "attribute unit_strindex");
		if (a->value && a->value->value_case == ANY_STRINDEX)
			str(c, a->value->string_value_strindex, "attribute string_value_strindex");
	}
	for (size_t i = 0; i < d->n_mapping_table; i++) {
		const pb_mapping *m = d->mapping_table[i];
		str(c, m->filename_strindex, "mapping filename_strindex");
		attr_indices(c, m->n_attribute_indices, m->attribute_indices, "mapping attributes");
		if ((m->memory_start || m->memory_limit) && m->memory_start >= m->memory_limit)
			v(c, "mapping_range", "mapping_table[%zu]: memory_start 0x%" PRIx64
			  " >= memory_limit 0x%" PRIx64, i, m->memory_start, m->memory_limit);
	}
	for (size_t i = 0; i < d->n_location_table; i++) {
		const pb_location *l = d->location_table[i];
		idx(c, R_MAP, l->mapping_index, d->n_mapping_table, "location mapping_index");
		attr_indices(c, l->n_attribute_indices, l->attribute_indices, "location attributes");
		for (size_t k = 0; k < l->n_lines; k++) {
			idx(c, R_FN, l->lines[k]->function_index, d->n_function_table,
			    "line function_index");
			if (l->lines[k]->line < 0 || l->lines[k]->column < 0)
				v(c, "negative", "location_table[%zu]: negative line or column", i);
		}
	}
	for (size_t i = 0; i < d->n_function_table; i++) {
		const pb_function *f = d->function_table[i];
		str(c, f->name_strindex, "function name_strindex");
		str(c, f->system_name_strindex, "function system_name_strindex");
		str(c, f->filename_strindex, "function filename_strindex");
		if (f->start_line < 0)
			v(c, "negative", "function_table[%zu]: negative start_line", i);
	}
	for (size_t i = 1; i < d->n_link_table; i++) {
		const pb_link *l = d->link_table[i];
		if (l->trace_id.len != 16 || l->span_id.len != 8)
			v(c, "link_ids", "link_table[%zu]: trace_id %zu bytes, span_id %zu bytes", i,
			  l->trace_id.len, l->span_id.len);
	}
	for (size_t i = 0; i < d->n_stack_table; i++) {
		const pb_stack *s = d->stack_table[i];
		for (size_t k = 0; k < s->n_location_indices; k++)
			idx(c, R_LOC, s->location_indices[k], d->n_location_table,
			    "stack location_indices");
	}
}

enum shape { SH_NONE, SH_VALUES, SH_TIMESTAMPS, SH_BOTH };

static void check_profile(struct ck *c, const pb_profile *p, const char *where)
{
	const pb_dict *d = c->d;
	char w[160];
	if (p->sample_type) {
		str(c, p->sample_type->type_strindex, "sample_type type_strindex");
		str(c, p->sample_type->unit_strindex, "sample_type unit_strindex");
	}
	if (p->period_type) {
		str(c, p->period_type->type_strindex, "period_type type_strindex");
		str(c, p->period_type->unit_strindex, "period_type unit_strindex");
	}
	attr_indices(c, p->n_attribute_indices, p->attribute_indices, "profile attributes");
	uint64_t t0 = p->time_unix_nano, t1 = t0 + p->duration_nano;
	if (t1 < t0)
		t1 = UINT64_MAX;
	int first = -1;
	for (size_t i = 0; i < p->n_samples; i++) {
		const pb_sample *s = p->samples[i];
		snprintf(w, sizeof(w), "%s.samples[%zu]", where, i);
		idx(c, R_STACK, s->stack_index, d->n_stack_table, "sample stack_index");
		idx(c, R_LINK, s->link_index, d->n_link_table, "sample link_index");
		attr_indices(c, s->n_attribute_indices, s->attribute_indices, "sample attributes");
		for (size_t k = 0; k < s->n_timestamps_unix_nano; k++) {
			uint64_t ts = s->timestamps_unix_nano[k];
			if (ts < t0 || ts >= t1)
				v(c, "timestamp_range", "%s: timestamp %" PRIu64 " outside [%" PRIu64
				  ", %" PRIu64 ")", w, ts, t0, t1);
		}
		int sh;
		if (s->n_values && s->n_timestamps_unix_nano) {
			sh = SH_BOTH;
			if (s->n_values != s->n_timestamps_unix_nano)
				v(c, "shape", "%s: %zu values but %zu timestamps", w, s->n_values,
				  s->n_timestamps_unix_nano);
		} else if (s->n_values) {
			sh = SH_VALUES;
			if (s->n_values != 1)
				v(c, "shape", "%s: values-only sample with %zu values", w,
				  s->n_values);
		} else if (s->n_timestamps_unix_nano) {
			sh = SH_TIMESTAMPS;
		} else {
			sh = SH_NONE;
			v(c, "shape", "%s: neither values nor timestamps", w);
		}
		if (first < 0)
			first = sh;
		else if (sh != first)
			v(c, "shape", "%s: shape differs from the profile's first sample", w);
	}
}

/* Orphans: an entry after index 0 with no reference from any table entry or sample (a
 * reference from an entry that is itself orphaned still counts, so one unreferenced stack is
 * reported as that stack, not also as its locations). */
static void check_dupes_orphans(struct ck *c)
{
	const pb_dict *d = c->d;
	for (size_t i = 0; i < d->n_string_table; i++)
		for (size_t j = 0; j < i; j++)
			if (strcmp(d->string_table[i], d->string_table[j]) == 0) {
				v(c, "dup_string", "string_table[%zu] == string_table[%zu] \"%s\"", i,
				  j, d->string_table[i]);
				break;
			}
	uint8_t *a = NULL, *b = NULL;
	for (size_t i = 1; i < d->n_mapping_table && c->rc == 0; i++) {
		size_t na = protobuf_c_message_get_packed_size(&d->mapping_table[i]->base);
		free(a);
		a = malloc(na + 1);
		if (!a) {
			c->rc = -ENOMEM;
			break;
		}
		protobuf_c_message_pack(&d->mapping_table[i]->base, a);
		for (size_t j = 0; j < i; j++) {
			size_t nb = protobuf_c_message_get_packed_size(&d->mapping_table[j]->base);
			if (nb != na)
				continue;
			free(b);
			b = malloc(nb + 1);
			if (!b) {
				c->rc = -ENOMEM;
				break;
			}
			protobuf_c_message_pack(&d->mapping_table[j]->base, b);
			if (memcmp(a, b, na) == 0) {
				v(c, "dup_mapping", "mapping_table[%zu] equals mapping_table[%zu]", i, j);
				break;
			}
		}
	}
	free(a);
	free(b);

	static const char *names[7] = {"string_table",  "attribute_table", "mapping_table",
				       "location_table", "function_table", "link_table",
				       "stack_table"};
	size_t ns[7] = {d->n_string_table,   d->n_attribute_table, d->n_mapping_table,
			d->n_location_table, d->n_function_table,  d->n_link_table,
			d->n_stack_table};
	for (int t = 0; t < 7; t++)
		for (size_t i = 1; i < ns[t]; i++)
			if (!c->ref[t][i])
				v(c, "orphan", "%s[%zu] is referenced by nothing", names[t], i);
}

int profcheck_run(const uint8_t *data, size_t len, struct profcheck_result *res)
{
	memset(res, 0, sizeof(*res));
	pb_request *req = (pb_request *)protobuf_c_message_unpack(
		&opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor,
		NULL, len, data);
	if (!req)
		return -EBADMSG;
	static const pb_dict empty =
		OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILES_DICTIONARY__INIT;
	struct ck c = {.res = res, .d = req->dictionary ? req->dictionary : &empty};
	const pb_dict *d = c.d;
	size_t ns[7] = {d->n_string_table,   d->n_attribute_table, d->n_mapping_table,
			d->n_location_table, d->n_function_table,  d->n_link_table,
			d->n_stack_table};
	for (int t = 0; t < 7; t++) {
		c.ref[t] = calloc(ns[t] + 1, sizeof(size_t));
		if (!c.ref[t])
			c.rc = -ENOMEM;
	}
	if (c.rc == 0) {
		if (!req->dictionary)
			v(&c, "dictionary", "dictionary missing");
		if (!req->n_resource_profiles)
			v(&c, "structure", "no ResourceProfiles");
		check_dictionary(&c);
		for (size_t i = 0; i < req->n_resource_profiles; i++) {
			const Opentelemetry__Proto__Profiles__V1development__ResourceProfiles *rp =
				req->resource_profiles[i];
			if (!rp->n_scope_profiles)
				v(&c, "structure", "resource_profiles[%zu]: no ScopeProfiles", i);
			for (size_t j = 0; j < rp->n_scope_profiles; j++) {
				const Opentelemetry__Proto__Profiles__V1development__ScopeProfiles *sp =
					rp->scope_profiles[j];
				if (!sp->n_profiles)
					v(&c, "structure",
					  "resource_profiles[%zu].scope_profiles[%zu]: no Profile", i, j);
				for (size_t k = 0; k < sp->n_profiles; k++) {
					char w[96];
					snprintf(w, sizeof(w), "profiles[%zu.%zu.%zu]", i, j, k);
					check_profile(&c, sp->profiles[k], w);
				}
			}
		}
		check_dupes_orphans(&c);
	}
	for (int t = 0; t < 7; t++)
		free(c.ref[t]);
	protobuf_c_message_free_unpacked(&req->base, NULL);
	if (c.rc < 0) {
		profcheck_release(res);
		return c.rc;
	}
	return (int)res->n;
}

bool profcheck_has(const struct profcheck_result *res, const char *rule)
{
	size_t n = strlen(rule);
	for (size_t i = 0; i < res->n; i++)
		if (strncmp(res->msgs[i], rule, n) == 0 && res->msgs[i][n] == ':')
			return true;
	return false;
}

void profcheck_print(const struct profcheck_result *res)
{
	for (size_t i = 0; i < res->n; i++)
		fprintf(stderr, "profcheck: %s\n", res->msgs[i]);
}

void profcheck_release(struct profcheck_result *res)
{
	for (size_t i = 0; i < res->n; i++)
		free(res->msgs[i]);
	free(res->msgs);
	res->msgs = NULL;
	res->n = 0;
}
