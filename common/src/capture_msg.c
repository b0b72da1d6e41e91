/* capture_msg.c — JSON payloads of io.profleet.capture.v1 (pf/capture_msg.h). */
#include "pf/capture_msg.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pf/compiler.h"

static const char *const state_names[] = {"accepted", "running", "done", "failed", "cancelled"};

const char *pf_capture_state_name(enum pf_capture_state s)
{
	return (unsigned)s < PF_ARRAY_SIZE(state_names) ? state_names[s] : "unknown";
}

int pf_capture_state_parse(const char *name, enum pf_capture_state *out)
{
	for (size_t i = 0; name && i < PF_ARRAY_SIZE(state_names); i++) {
		if (strcmp(name, state_names[i]) == 0) {
			*out = (enum pf_capture_state)i;
			return 0;
		}
	}
	return -EINVAL;
}

bool pf_capture_state_final(enum pf_capture_state s)
{
	return s == PF_CAPTURE_DONE || s == PF_CAPTURE_FAILED || s == PF_CAPTURE_CANCELLED;
}

bool pf_capture_id_valid(const char *id)
{
	size_t n = 0;
	if (!id)
		return false;
	for (; id[n]; n++) {
		char c = id[n];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			  c == '.' || c == '_' || c == '-';
		if (!ok || n >= PF_CAPTURE_ID_MAX)
			return false;
	}
	return n > 0;
}

void pf_capture_hex16(const uint8_t in[16], char out[33])
{
	static const char hex[] = "0123456789abcdef";
	for (int i = 0; i < 16; i++) {
		out[2 * i] = hex[in[i] >> 4];
		out[2 * i + 1] = hex[in[i] & 15];
	}
	out[32] = 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int pf_capture_parse_hex16(const char *s, uint8_t out[16])
{
	if (!s || strlen(s) != 32)
		return -EINVAL;
	for (int i = 0; i < 16; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

bool pf_capture_type_supported(enum pf_prof_type t)
{
	return t == PF_PROF_CPU || t == PF_PROF_OFF_CPU || t == PF_PROF_WALL || t == PF_PROF_ALLOC;
}

int pf_capture_request_check(const struct pf_capture_request *r, struct pf_error *err)
{
	if (!pf_capture_id_valid(r->id))
		return pf_error_set(err, -EINVAL, "id", "must be 1..%d characters of [A-Za-z0-9._-]",
				    PF_CAPTURE_ID_MAX);
	enum pf_prof_type type;
	if (pf_prof_type_parse(r->profile_type, &type) < 0)
		return pf_error_set(err, -EINVAL, "profile_type",
				    "must be cpu, off_cpu, wall or alloc, got \"%.15s\"",
				    r->profile_type);
	if (!pf_capture_type_supported(type))
		return pf_error_set(err, -EINVAL, "profile_type",
				    "unsupported profile_type %s: this version captures cpu, off_cpu, "
				    "wall and alloc",
				    r->profile_type);
	if (r->duration_seconds < 1 || r->duration_seconds > PF_CAPTURE_MAX_DURATION)
		return pf_error_set(err, -EINVAL, "duration_seconds", "must be 1..%d, got %u",
				    PF_CAPTURE_MAX_DURATION, r->duration_seconds);
	if (r->frequency_hz < 1 || r->frequency_hz > 1000)
		return pf_error_set(err, -EINVAL, "frequency_hz", "must be 1..1000, got %u",
				    r->frequency_hz);
	if (r->n_processes > PF_CAPTURE_MAX_PROCESSES)
		return pf_error_set(err, -EINVAL, "processes", "at most %d rules",
				    PF_CAPTURE_MAX_PROCESSES);
	for (size_t i = 0; i < r->n_processes; i++) {
		char path[32];
		snprintf(path, sizeof(path), "processes[%zu]", i);
		int rc = pf_profcfg_filter_check(&r->processes[i], path, err);
		if (rc < 0)
			return rc;
	}
	if (r->note && strlen(r->note) > PF_CAPTURE_MAX_NOTE)
		return pf_error_set(err, -EINVAL, "note", "at most %d bytes", PF_CAPTURE_MAX_NOTE);
	if (r->receiver) {
		size_t n = strlen(r->receiver);
		if (n > PF_CAPTURE_MAX_URL ||
		    (strncmp(r->receiver, "http://", 7) != 0 &&
		     strncmp(r->receiver, "https://", 8) != 0))
			return pf_error_set(err, -EINVAL, "receiver",
					    "must be an http:// or https:// URL of at most %d bytes",
					    PF_CAPTURE_MAX_URL);
	}
	return 0;
}

/* json_dumpb into out with the payload cap. */
static int dump(json_t *o, struct pf_buf *out)
{
	if (!o)
		return -ENOMEM;
	size_t n = json_dumpb(o, NULL, 0, JSON_COMPACT);
	if (n == 0 || n > PF_CAPTURE_MAX_MSG) {
		json_decref(o);
		return n == 0 ? -ENOMEM : -E2BIG;
	}
	int rc = pf_buf_reserve(out, n);
	if (rc == 0) {
		json_dumpb(o, (char *)out->data + out->len, n, JSON_COMPACT);
		out->len += n;
		out->data[out->len] = 0;
	}
	json_decref(o);
	return rc;
}

int pf_capture_request_encode(const struct pf_capture_request *r, struct pf_buf *out)
{
	if (pf_capture_request_check(r, NULL) < 0)
		return -EINVAL;
	json_t *o = json_object();
	json_t *procs = json_array();
	if (!o || !procs) {
		json_decref(o);
		json_decref(procs);
		return -ENOMEM;
	}
	json_object_set_new(o, "id", json_string(r->id));
	json_object_set_new(o, "profile_type", json_string(r->profile_type));
	json_object_set_new(o, "duration_seconds", json_integer(r->duration_seconds));
	json_object_set_new(o, "frequency_hz", json_integer(r->frequency_hz));
	for (size_t i = 0; i < r->n_processes; i++) {
		const struct pf_filter *f = &r->processes[i];
		json_array_append_new(procs, json_pack("{s:s,s:s,s:s}", "key", f->key, "match",
						       pf_match_name(f->match), "value", f->value));
	}
	json_object_set_new(o, "processes", procs);
	if (r->has_trace_id) {
		char hex[33];
		pf_capture_hex16(r->trace_id, hex);
		json_object_set_new(o, "trace_id", json_string(hex));
	}
	if (r->note)
		json_object_set_new(o, "note", json_string(r->note));
	if (r->receiver)
		json_object_set_new(o, "receiver", json_string(r->receiver));
	return dump(o, out);
}

static json_t *parse(const uint8_t *data, size_t len, struct pf_error *err)
{
	json_error_t jerr;
	if (len > PF_CAPTURE_MAX_MSG) {
		pf_error_set(err, -E2BIG, "", "payload of %zu bytes is over %d", len,
			     PF_CAPTURE_MAX_MSG);
		return NULL;
	}
	json_t *o = json_loadb((const char *)data, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!o) {
		pf_error_set(err, -EBADMSG, "", "not JSON: %s (at byte %d)", jerr.text,
			     jerr.position);
		return NULL;
	}
	if (!json_is_object(o)) {
		json_decref(o);
		pf_error_set(err, -EBADMSG, "", "must be a JSON object");
		return NULL;
	}
	return o;
}

/* Optional string member: 0 and *out (NULL when absent), or -EBADMSG. */
static int get_str(json_t *o, const char *key, const char **out, struct pf_error *err)
{
	json_t *v = json_object_get(o, key);
	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return pf_error_set(err, -EBADMSG, key, "must be a string");
	if (strlen(json_string_value(v)) != json_string_length(v))
		return pf_error_set(err, -EBADMSG, key, "must not contain NUL");
	*out = json_string_value(v);
	return 0;
}

/* An integer min..max (the range the message names is the one accepted). */
static int get_uint(json_t *o, const char *key, uint64_t min, uint64_t max, uint64_t *out,
		    bool required, struct pf_error *err)
{
	json_t *v = json_object_get(o, key);
	if (!v) {
		if (required)
			return pf_error_set(err, -EBADMSG, key, "is required");
		*out = 0;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) < min || (uint64_t)json_integer_value(v) > max)
		return pf_error_set(err, -EBADMSG, key, "must be an integer %llu..%llu",
				    (unsigned long long)min, (unsigned long long)max);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int get_id(json_t *o, char id[PF_CAPTURE_ID_MAX + 1], struct pf_error *err)
{
	const char *s;
	int rc = get_str(o, "id", &s, err);
	if (rc < 0)
		return rc;
	if (!pf_capture_id_valid(s))
		return pf_error_set(err, -EBADMSG, "id",
				    "is required: 1..%d characters of [A-Za-z0-9._-]",
				    PF_CAPTURE_ID_MAX);
	snprintf(id, PF_CAPTURE_ID_MAX + 1, "%s", s);
	return 0;
}

void pf_capture_request_release(struct pf_capture_request *r)
{
	for (size_t i = 0; i < PF_CAPTURE_MAX_PROCESSES; i++) {
		free(r->processes[i].key);
		free(r->processes[i].value);
		r->processes[i].key = r->processes[i].value = NULL;
	}
	free(r->note);
	free(r->receiver);
	r->note = r->receiver = NULL;
	r->n_processes = 0;
}

static int decode_processes(json_t *arr, struct pf_capture_request *r, struct pf_error *err)
{
	if (!arr || json_is_null(arr))
		return 0;
	if (!json_is_array(arr))
		return pf_error_set(err, -EBADMSG, "processes", "must be an array");
	if (json_array_size(arr) > PF_CAPTURE_MAX_PROCESSES)
		return pf_error_set(err, -EBADMSG, "processes", "at most %d rules",
				    PF_CAPTURE_MAX_PROCESSES);
	for (size_t i = 0; i < json_array_size(arr); i++) {
		json_t *p = json_array_get(arr, i);
		char path[48];
		const char *key, *match, *value;
		snprintf(path, sizeof(path), "processes[%zu]", i);
		if (!json_is_object(p))
			return pf_error_set(err, -EBADMSG, path, "must be an object");
		static const char *const names[] = {"key", "match", "value"};
		const char **dst[] = {&key, &match, &value};
		for (size_t k = 0; k < 3; k++) {
			json_t *v = json_object_get(p, names[k]);
			*dst[k] = NULL;
			if (!v || json_is_null(v))
				continue;
			if (!json_is_string(v) ||
			    strlen(json_string_value(v)) != json_string_length(v)) {
				char fp[64];
				snprintf(fp, sizeof(fp), "%s.%s", path, names[k]);
				return pf_error_set(err, -EBADMSG, fp, "must be a string");
			}
			*dst[k] = json_string_value(v);
		}
		struct pf_filter *f = &r->processes[i];
		if (!match || strcmp(match, "strict") == 0)
			f->match = PF_MATCH_STRICT;
		else if (strcmp(match, "regexp") == 0)
			f->match = PF_MATCH_REGEXP;
		else
			return pf_error_set(err, -EBADMSG, path, "match must be strict or regexp");
		f->key = key ? strdup(key) : NULL;
		f->value = value ? strdup(value) : NULL;
		r->n_processes = i + 1;
		if ((key && !f->key) || (value && !f->value))
			return -ENOMEM;
	}
	return 0;
}

int pf_capture_request_decode(const uint8_t *data, size_t len, struct pf_capture_request *out,
			      struct pf_error *err)
{
	memset(out, 0, sizeof(*out));
	json_t *o = parse(data, len, err);
	if (!o)
		return err && err->code ? err->code : -EBADMSG;
	const char *type, *trace, *note, *receiver;
	uint64_t dur = 0, freq = 0;
	int rc = get_id(o, out->id, err);
	if (rc == 0)
		rc = get_str(o, "profile_type", &type, err);
	if (rc == 0)
		rc = get_uint(o, "duration_seconds", 1, PF_CAPTURE_MAX_DURATION, &dur, true, err);
	if (rc == 0)
		rc = get_uint(o, "frequency_hz", 1, 1000, &freq, true, err);
	if (rc == 0)
		rc = get_str(o, "trace_id", &trace, err);
	if (rc == 0)
		rc = get_str(o, "note", &note, err);
	if (rc == 0)
		rc = get_str(o, "receiver", &receiver, err);
	if (rc == 0)
		rc = decode_processes(json_object_get(o, "processes"), out, err);
	if (rc == 0) {
		snprintf(out->profile_type, sizeof(out->profile_type), "%s", type ? type : "cpu");
		out->duration_seconds = (uint32_t)dur;
		out->frequency_hz = (uint32_t)freq;
		if (trace) {
			if (pf_capture_parse_hex16(trace, out->trace_id) < 0)
				rc = pf_error_set(err, -EBADMSG, "trace_id", "must be 32 hex digits");
			out->has_trace_id = true;
		}
	}
	if (rc == 0 && note && !(out->note = strdup(note)))
		rc = -ENOMEM;
	if (rc == 0 && receiver && !(out->receiver = strdup(receiver)))
		rc = -ENOMEM;
	if (rc == 0)
		rc = pf_capture_request_check(out, err);
	json_decref(o);
	return rc == -EINVAL ? -EBADMSG : rc;
}

int pf_capture_cancel_encode(const char *id, struct pf_buf *out)
{
	if (!pf_capture_id_valid(id))
		return -EINVAL;
	return dump(json_pack("{s:s}", "id", id), out);
}

int pf_capture_cancel_decode(const uint8_t *data, size_t len, char id[PF_CAPTURE_ID_MAX + 1],
			     struct pf_error *err)
{
	json_t *o = parse(data, len, err);
	if (!o)
		return err && err->code ? err->code : -EBADMSG;
	int rc = get_id(o, id, err);
	json_decref(o);
	return rc;
}

int pf_capture_status_encode(const struct pf_capture_status *st, struct pf_buf *out)
{
	if (!pf_capture_id_valid(st->id) || (unsigned)st->state > PF_CAPTURE_CANCELLED ||
	    st->n_profile_ids > PF_CAPTURE_MAX_PROFILE_IDS)
		return -EINVAL;
	json_t *o = json_pack("{s:s,s:s,s:I,s:I}", "id", st->id, "state",
			      pf_capture_state_name(st->state), "samples", (json_int_t)st->samples,
			      "bytes", (json_int_t)st->bytes);
	json_t *ids = json_array();
	if (!o || !ids) {
		json_decref(o);
		json_decref(ids);
		return -ENOMEM;
	}
	for (size_t i = 0; i < st->n_profile_ids; i++) {
		char hex[33];
		pf_capture_hex16(st->profile_ids[i], hex);
		json_array_append_new(ids, json_string(hex));
	}
	json_object_set_new(o, "profile_ids", ids);
	if (st->error_code[0])
		json_object_set_new(o, "error_code", json_string(st->error_code));
	if (st->error[0])
		json_object_set_new(o, "error", json_string(st->error));
	return dump(o, out);
}

int pf_capture_status_decode(const uint8_t *data, size_t len, struct pf_capture_status *out,
			     struct pf_error *err)
{
	memset(out, 0, sizeof(*out));
	json_t *o = parse(data, len, err);
	if (!o)
		return err && err->code ? err->code : -EBADMSG;
	const char *state, *code, *msg;
	int rc = get_id(o, out->id, err);
	if (rc == 0)
		rc = get_str(o, "state", &state, err);
	if (rc == 0 && pf_capture_state_parse(state, &out->state) < 0)
		rc = pf_error_set(err, -EBADMSG, "state",
				  "must be accepted, running, done, failed or cancelled");
	if (rc == 0)
		rc = get_uint(o, "samples", 0, UINT64_MAX >> 1, &out->samples, false, err);
	if (rc == 0)
		rc = get_uint(o, "bytes", 0, UINT64_MAX >> 1, &out->bytes, false, err);
	if (rc == 0)
		rc = get_str(o, "error_code", &code, err);
	if (rc == 0)
		rc = get_str(o, "error", &msg, err);
	if (rc == 0) {
		snprintf(out->error_code, sizeof(out->error_code), "%s", code ? code : "");
		snprintf(out->error, sizeof(out->error), "%s", msg ? msg : "");
		json_t *ids = json_object_get(o, "profile_ids");
		if (ids && !json_is_array(ids))
			rc = pf_error_set(err, -EBADMSG, "profile_ids", "must be an array");
		else if (ids && json_array_size(ids) > PF_CAPTURE_MAX_PROFILE_IDS)
			rc = pf_error_set(err, -EBADMSG, "profile_ids", "at most %d ids",
					  PF_CAPTURE_MAX_PROFILE_IDS);
		for (size_t i = 0; rc == 0 && ids && i < json_array_size(ids); i++) {
			json_t *v = json_array_get(ids, i);
			if (!json_is_string(v) ||
			    pf_capture_parse_hex16(json_string_value(v), out->profile_ids[i]) < 0)
				rc = pf_error_set(err, -EBADMSG, "profile_ids",
						  "item %zu must be 32 hex digits", i);
			else
				out->n_profile_ids = i + 1;
		}
	}
	json_decref(o);
	return rc;
}
