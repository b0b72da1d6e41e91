/* profcfg_parse.c — reading a profiling config document (pf_profcfg_parse) and the redacted
 * view of one (pf_profcfg_redact_yaml), walking the key table of profcfg.c.
 *
 * The parser uses libyaml's event API, so it stops at the first bad event without building a
 * tree: an unexpected nesting is refused before its content is read, and anchors, aliases and
 * tags are refused as they appear (no alias expansion, no billion laughs). */
#include "pf/profcfg.h"

#include <errno.h>
#include <inttypes.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "pf/regex.h"
#include "pf/utf8.h"
#include "profcfg_int.h"

struct walk {
	yaml_parser_t yp;
	yaml_event_t ev;
	bool have_ev;
	struct pf_error *err;
	const char *text; /* the document, for the positions of reader errors */
	size_t len;
	char path[MAX_PATH]; /* concrete path of the node being read */
	size_t plen;
};

/* A short, printable rendering of user text for messages. */
static const char *show(char *buf, size_t n, const char *s, size_t len)
{
	size_t max = n > 4 ? n - 4 : 0, o = 0;
	for (size_t i = 0; i < len && o < max; i++)
		buf[o++] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
	if (o < len && n >= 4) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o < n ? o : n - 1] = 0;
	return buf;
}

static size_t path_push(struct walk *w, const char *fmt, ...) PF_PRINTF(2, 3);
static size_t path_push(struct walk *w, const char *fmt, ...)
{
	size_t saved = w->plen;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(w->path + w->plen, sizeof(w->path) - w->plen, fmt, ap);
	va_end(ap);
	if (n > 0)
		w->plen = pf_min(w->plen + (size_t)n, sizeof(w->path) - 1);
	return saved;
}

static void path_push_key(struct walk *w, const char *key, size_t len)
{
	char shown[96];
	show(shown, sizeof(shown), key, len);
	path_push(w, "%s%s", w->plen ? "." : "", shown);
}

/* Map keys like "service.name" are shown as labels["service.name"] so the path stays
 * unambiguous; simple ones as labels.env. */
static void path_push_mapkey(struct walk *w, const char *key, size_t len)
{
	bool simple = len > 0;
	for (size_t i = 0; i < len; i++) {
		char c = key[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-'))
			simple = false;
	}
	if (simple) {
		path_push_key(w, key, len);
	} else {
		char shown[96];
		show(shown, sizeof(shown), key, len);
		path_push(w, "[\"%s\"]", shown);
	}
}

static void path_pop(struct walk *w, size_t saved)
{
	w->plen = saved;
	w->path[saved] = 0;
}

static int werr(struct walk *w, const char *fmt, ...) PF_PRINTF(2, 3);
static int werr(struct walk *w, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return pf_error_set(w->err, -EINVAL, w->path, "%s", msg);
}

static const char *event_kind(const yaml_event_t *ev)
{
	switch (ev->type) {
	case YAML_MAPPING_START_EVENT:
		return "a mapping";
	case YAML_SEQUENCE_START_EVENT:
		return "a list";
	case YAML_SCALAR_EVENT:
		return "a scalar";
	default:
		return "something else";
	}
}

static bool is_null(const yaml_event_t *ev)
{
	if (ev->type != YAML_SCALAR_EVENT || ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	const char *s = (const char *)ev->data.scalar.value;
	size_t n = ev->data.scalar.length;
	return n == 0 || (n == 1 && s[0] == '~') ||
	       (n == 4 && (!strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL")));
}

/* The line and column (1-based, in characters) of byte offset off of text. */
static void text_position(const char *text, size_t len, size_t off, size_t *line, size_t *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < off && i < len; i++) {
		if (text[i] == '\n') {
			(*line)++;
			*col = 1;
		} else if (((unsigned char)text[i] & 0xc0) != 0x80) {
			(*col)++; /* a continuation byte is part of the character before */
		}
	}
}

/* The error of a failed yaml_parser_parse: where and what. A reader error (bytes that are
 * not UTF-8) knows only its byte offset, turned into a line and column here; a scanner or
 * parser error inside a construct (a quoted scalar or a flow collection never closed) also
 * says where that construct starts, the place to look. */
static int yaml_error(const yaml_parser_t *yp, const char *text, size_t len, struct pf_error *err)
{
	if (yp->error == YAML_MEMORY_ERROR)
		return pf_error_set(err, -ENOMEM, "", "out of memory");
	const char *problem = yp->problem ? yp->problem : "malformed YAML";
	if (yp->error == YAML_READER_ERROR) {
		size_t line, col;
		text_position(text, len, yp->problem_offset, &line, &col);
		if (yp->problem_value >= 0)
			return pf_error_set(err, -EINVAL, "",
					    "YAML syntax error at line %zu, column %zu: %s (byte 0x%02x at "
					    "offset %zu)",
					    line, col, problem, (unsigned)yp->problem_value & 0xff,
					    yp->problem_offset);
		return pf_error_set(err, -EINVAL, "", "YAML syntax error at line %zu, column %zu: %s",
				    line, col, problem);
	}
	const yaml_mark_t *m = &yp->problem_mark, *c = &yp->context_mark;
	if (yp->context && (c->line != m->line || c->column != m->column))
		return pf_error_set(err, -EINVAL, "",
				    "YAML syntax error at line %zu, column %zu: %s (%s that starts "
				    "at line %zu, column %zu)",
				    m->line + 1, m->column + 1, problem, yp->context, c->line + 1,
				    c->column + 1);
	if (yp->context)
		return pf_error_set(err, -EINVAL, "",
				    "YAML syntax error at line %zu, column %zu: %s (%s)",
				    m->line + 1, m->column + 1, problem, yp->context);
	return pf_error_set(err, -EINVAL, "", "YAML syntax error at line %zu, column %zu: %s",
			    m->line + 1, m->column + 1, problem);
}

/* Deeper than this, no document of the schema is valid: the syntax check stops there and
 * the walk refuses the first level the schema does not have, before libyaml's stacks grow. */
#define SYNTAX_MAX_DEPTH 32

/* The whole text through libyaml first: a syntax error anywhere (an unclosed quote or flow
 * collection) is reported as itself, not as the type error of a key read before the parser
 * got to it. Events are dropped as they come; the document's size bounds the work. */
static int syntax_check(const char *text, size_t len, struct pf_error *err)
{
	yaml_parser_t yp;
	yaml_event_t ev;
	int r = 0, depth = 0;
	if (!yaml_parser_initialize(&yp))
		return pf_error_set(err, -ENOMEM, "", "out of memory");
	yaml_parser_set_input_string(&yp, (const unsigned char *)text, len);
	for (;;) {
		if (!yaml_parser_parse(&yp, &ev)) {
			r = yaml_error(&yp, text, len, err);
			break;
		}
		bool end = ev.type == YAML_STREAM_END_EVENT;
		if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT)
			depth++;
		else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT)
			depth--;
		yaml_event_delete(&ev);
		if (end || depth > SYNTAX_MAX_DEPTH)
			break;
	}
	yaml_parser_delete(&yp);
	return r;
}

static int walk_next(struct walk *w)
{
	if (w->have_ev) {
		yaml_event_delete(&w->ev);
		w->have_ev = false;
	}
	if (!yaml_parser_parse(&w->yp, &w->ev))
		return yaml_error(&w->yp, w->text, w->len, w->err);
	w->have_ev = true;
	const yaml_event_t *ev = &w->ev;
	const yaml_char_t *anchor = NULL, *tag = NULL;
	switch (ev->type) {
	case YAML_ALIAS_EVENT:
		anchor = ev->data.alias.anchor;
		break;
	case YAML_SCALAR_EVENT:
		anchor = ev->data.scalar.anchor;
		tag = ev->data.scalar.tag;
		break;
	case YAML_SEQUENCE_START_EVENT:
		anchor = ev->data.sequence_start.anchor;
		tag = ev->data.sequence_start.tag;
		break;
	case YAML_MAPPING_START_EVENT:
		anchor = ev->data.mapping_start.anchor;
		tag = ev->data.mapping_start.tag;
		break;
	default:
		break;
	}
	if (anchor || ev->type == YAML_ALIAS_EVENT)
		return werr(w, "anchors and aliases are not allowed (line %zu, column %zu)",
			    ev->start_mark.line + 1, ev->start_mark.column + 1);
	if (tag)
		return werr(w, "tags are not allowed (line %zu, column %zu)",
			    ev->start_mark.line + 1, ev->start_mark.column + 1);
	return 0;
}

/* A scalar usable as a string (map key or value, string key): not null, bounded, no NUL. */
static int scalar_string(struct walk *w, const char *what, const char **s, size_t *n)
{
	if (w->ev.type != YAML_SCALAR_EVENT)
		return werr(w, "%s must be a string, got %s", what, event_kind(&w->ev));
	if (is_null(&w->ev))
		return werr(w, "%s must be a string, got null", what);
	*s = (const char *)w->ev.data.scalar.value;
	*n = w->ev.data.scalar.length;
	if (*n > MAX_STR)
		return werr(w, "%s must be at most %d bytes, got %zu", what, MAX_STR, *n);
	if (memchr(*s, 0, *n))
		return werr(w, "%s must not contain NUL characters", what);
	return 0;
}


static int range_error(struct walk *w, const struct key_desc *k, const char *got)
{
	return werr(w, "must be %" PRIu64 "..%" PRIu64 ", got %s", k->min_u, k->max_u, got);
}

static int parse_uint(struct walk *w, const struct key_desc *k, void *base)
{
	const char *s = (const char *)w->ev.data.scalar.value;
	size_t n = w->ev.data.scalar.length;
	char shown[72];
	show(shown, sizeof(shown), s, n);
	if (w->ev.data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return werr(w, "must be an integer, got the string \"%s\"", shown);
	if (is_null(&w->ev))
		return werr(w, "must be an integer, got null");
	size_t i = 0;
	bool neg = false;
	if (i < n && (s[i] == '-' || s[i] == '+'))
		neg = s[i++] == '-';
	size_t digits = i;
	uint64_t v = 0;
	bool overflow = false;
	for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			overflow = true;
		else
			v = v * 10 + d;
	}
	if (i == digits || i != n)
		return werr(w, "must be an integer, got '%s'", shown);
	if ((neg && v != 0) || overflow || v < k->min_u || v > k->max_u)
		return range_error(w, k, shown);
	set_u(base, k, v);
	return 0;
}

static int parse_double(struct walk *w, const struct key_desc *k, void *base)
{
	const char *s = (const char *)w->ev.data.scalar.value;
	size_t n = w->ev.data.scalar.length;
	char shown[72];
	show(shown, sizeof(shown), s, n);
	if (w->ev.data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return werr(w, "must be a number, got the string \"%s\"", shown);
	if (is_null(&w->ev))
		return werr(w, "must be a number, got null");
	/* Decimal notation only: strtod alone would also take "nan", "inf" and hex. */
	bool digit = false, other = false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] >= '0' && s[i] <= '9')
			digit = true;
		else if (!s[i] || !strchr("+-.eE", s[i]))
			other = true;
	}
	char tmp[72];
	if (!digit || other || n >= sizeof(tmp))
		return werr(w, "must be a number, got '%s'", shown);
	memcpy(tmp, s, n);
	tmp[n] = 0;
	char *end;
	errno = 0;
	double d = strtod(tmp, &end);
	if (*end || end == tmp)
		return werr(w, "must be a number, got '%s'", shown);
	if (!(d >= k->min_d && d <= k->max_d))
		return werr(w, "must be %g..%g, got %s", k->min_d, k->max_d, shown);
	set_d(base, k, d);
	return 0;
}

static int parse_scalar(struct walk *w, const struct key_desc *k, void *base)
{
	char shown[72], allowed[512];
	const char *s;
	size_t n;
	int r;

	if (w->ev.type != YAML_SCALAR_EVENT) {
		static const char *const want[] = {
		    [K_BOOL] = "a boolean",  [K_U32] = "an integer",  [K_U64] = "an integer",
		    [K_DOUBLE] = "a number", [K_STRING] = "a string", [K_ENUM] = "a string",
		};
		return werr(w, "must be %s, got %s", want[k->type], event_kind(&w->ev));
	}
	s = (const char *)w->ev.data.scalar.value;
	n = w->ev.data.scalar.length;
	show(shown, sizeof(shown), s, n);

	switch (k->type) {
	case K_BOOL: {
		static const char *const t[] = {"true", "yes", "on"}, *const f[] = {"false", "no",
										    "off"};
		if (w->ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
			for (size_t i = 0; i < 3; i++) {
				if (n == strlen(t[i]) && !strncasecmp(s, t[i], n)) {
					set_u(base, k, 1);
					return 0;
				}
				if (n == strlen(f[i]) && !strncasecmp(s, f[i], n)) {
					set_u(base, k, 0);
					return 0;
				}
			}
		}
		return werr(w, "must be a boolean (true/false, yes/no, on/off), got '%s'", shown);
	}
	case K_U32:
	case K_U64:
		return parse_uint(w, k, base);
	case K_DOUBLE:
		return parse_double(w, k, base);
	case K_ENUM:
		profcfg_names_list(allowed, sizeof(allowed), k->names, k->n_names);
		if (!is_null(&w->ev)) {
			for (size_t i = 0; i < k->n_names; i++) {
				if (n == strlen(k->names[i]) && !memcmp(s, k->names[i], n)) {
					set_u(base, k, i);
					return 0;
				}
			}
		}
		return werr(w, "must be one of %s, got '%s'", allowed,
			    is_null(&w->ev) ? "null" : shown);
	case K_STRING: {
		if ((r = scalar_string(w, "value", &s, &n)) < 0)
			return r;
		if (k->names) {
			bool ok = false;
			for (size_t i = 0; i < k->n_names && !ok; i++)
				ok = profcfg_name_matches(k->names[i], s, n);
			if (!ok) {
				profcfg_names_list(allowed, sizeof(allowed), k->names, k->n_names);
				return werr(w, "must be one of %s, got '%s'", allowed, shown);
			}
		}
		char *dup = strndup(s, n);
		if (!dup)
			return pf_error_set(w->err, -ENOMEM, w->path, "out of memory");
		char why[128];
		if (k->check && k->check(dup, why, sizeof(why)) < 0) {
			free(dup);
			return werr(w, "%s, got '%s'", why, shown);
		}
		free(get_ptr(base, k->off));
		set_ptr(base, k->off, dup);
		return 0;
	}
	default:
		return werr(w, "internal: not a scalar key");
	}
}

static int parse_section(struct walk *w, const char *pattern, void *base, uint8_t *seen);

static int parse_map(struct walk *w, const struct key_desc *k, void *base)
{
	int r;
	if (is_null(&w->ev))
		return 0;
	if (w->ev.type != YAML_MAPPING_START_EVENT)
		return werr(w, "must be a mapping of strings to strings, got %s",
			    event_kind(&w->ev));
	for (;;) {
		if ((r = walk_next(w)) < 0)
			return r;
		if (w->ev.type == YAML_MAPPING_END_EVENT)
			return 0;
		const char *ks;
		size_t kn;
		if ((r = scalar_string(w, "keys", &ks, &kn)) < 0)
			return r;
		if (kn == 0)
			return werr(w, "keys must not be empty");
		struct pf_kv_str *kv = get_ptr(base, k->off);
		size_t cnt = get_count(base, k);
		if (cnt >= k->max_items)
			return werr(w, "must have at most %zu entries", k->max_items);
		size_t saved = w->plen;
		path_push_mapkey(w, ks, kn);
		for (size_t i = 0; i < cnt; i++)
			if (strlen(kv[i].key) == kn && !memcmp(kv[i].key, ks, kn))
				return werr(w, "duplicate key");
		struct pf_kv_str *nkv = realloc(kv, (cnt + 1) * sizeof(*kv));
		if (!nkv)
			return pf_error_set(w->err, -ENOMEM, w->path, "out of memory");
		set_ptr(base, k->off, nkv);
		nkv[cnt].key = strndup(ks, kn);
		nkv[cnt].value = NULL;
		set_count(base, k, cnt + 1);
		if (!nkv[cnt].key)
			return pf_error_set(w->err, -ENOMEM, w->path, "out of memory");
		if ((r = walk_next(w)) < 0)
			return r;
		const char *vs;
		size_t vn;
		if ((r = scalar_string(w, "value", &vs, &vn)) < 0)
			return r;
		if (!(nkv[cnt].value = strndup(vs, vn)))
			return pf_error_set(w->err, -ENOMEM, w->path, "out of memory");
		path_pop(w, saved);
	}
}

/* After an item's keys: the discriminator and required keys are present, and no key is set
 * that the item's type does not use. */
static int check_item(struct walk *w, const char *ipattern, const void *item, const uint8_t *seen)
{
	int discrim = -1;
	for (size_t i = 0; i < profcfg_n_keys; i++) {
		const struct key_desc *k = &profcfg_keys[i];
		if (!(k->flags & F_DISCRIM) || !profcfg_child_name(k, ipattern))
			continue;
		if (!seen[i]) {
			char allowed[256];
			profcfg_names_list(allowed, sizeof(allowed), k->names, k->n_names);
			size_t saved = path_push(w, ".%s", profcfg_child_name(k, ipattern));
			int r = werr(w, "required (one of %s)", allowed);
			path_pop(w, saved);
			return r;
		}
		discrim = (int)get_u(item, k);
	}
	for (size_t i = 0; i < profcfg_n_keys; i++) {
		const struct key_desc *k = &profcfg_keys[i];
		const char *name = profcfg_child_name(k, ipattern);
		if (!name)
			continue;
		bool used = applies_to(k, discrim);
		const char *tname = discrim >= 0 ? pf_exporter_type_name(discrim) : "";
		int r = 0;
		size_t saved = path_push(w, ".%s", name);
		if (!used && seen[i])
			r = werr(w, "not used by type %s", tname);
		else if (used && (k->flags & F_REQUIRED) && !seen[i]) {
			if (k->applies)
				r = werr(w, "required for type %s%s%s%s", tname,
					 k->check_desc ? " (" : "",
					 k->check_desc ? k->check_desc : "",
					 k->check_desc ? ")" : "");
			else
				r = werr(w, "required%s%s%s", k->check_desc ? " (" : "",
					 k->check_desc ? k->check_desc : "",
					 k->check_desc ? ")" : "");
		}
		path_pop(w, saved);
		if (r < 0)
			return r;
	}
	return 0;
}

static int parse_list(struct walk *w, const struct key_desc *k, void *base)
{
	int r;
	char ipattern[MAX_PATH];
	item_pattern(ipattern, sizeof(ipattern), k);
	if (is_null(&w->ev))
		return 0;
	if (w->ev.type != YAML_SEQUENCE_START_EVENT)
		return werr(w, "must be a list, got %s", event_kind(&w->ev));
	for (;;) {
		if ((r = walk_next(w)) < 0)
			return r;
		if (w->ev.type == YAML_SEQUENCE_END_EVENT)
			return 0;
		size_t cnt = get_count(base, k);
		if (cnt >= k->max_items)
			return werr(w, "must have at most %zu entries", k->max_items);
		size_t saved = path_push(w, "[%zu]", cnt);
		if (w->ev.type != YAML_MAPPING_START_EVENT)
			return werr(w, "must be a mapping, got %s", event_kind(&w->ev));
		char *arr = realloc(get_ptr(base, k->off), (cnt + 1) * k->elem_size);
		if (!arr)
			return pf_error_set(w->err, -ENOMEM, w->path, "out of memory");
		set_ptr(base, k->off, arr);
		char *item = arr + cnt * k->elem_size;
		memset(item, 0, k->elem_size);
		set_count(base, k, cnt + 1);
		if (profcfg_fill_defaults(ipattern, item) < 0)
			return pf_error_set(w->err, -ENOMEM, w->path, "out of memory");
		uint8_t seen[PROFCFG_MAX_KEYS] = {0};
		if ((r = parse_section(w, ipattern, item, seen)) < 0)
			return r;
		if ((r = check_item(w, ipattern, item, seen)) < 0)
			return r;
		if (k->item_check && (r = k->item_check(item, w->path, w->err)) < 0)
			return r;
		path_pop(w, saved);
	}
}

static int parse_value(struct walk *w, size_t idx, void *base)
{
	const struct key_desc *k = &profcfg_keys[idx];
	switch (k->type) {
	case K_SECTION: {
		if (k->flags & F_PRESENT) {
			bool on = true;
			memcpy(fld(base, k), &on, sizeof(on));
		}
		if (is_null(&w->ev))
			return 0;
		if (w->ev.type != YAML_MAPPING_START_EVENT)
			return werr(w, "must be a mapping, got %s", event_kind(&w->ev));
		uint8_t seen[PROFCFG_MAX_KEYS] = {0};
		return parse_section(w, k->path, base, seen);
	}
	case K_LIST:
		return parse_list(w, k, base);
	case K_MAP:
		return parse_map(w, k, base);
	default:
		return parse_scalar(w, k, base);
	}
}

/* The current event is the MAPPING_START of container `pattern`; reads up to its end. */
static int parse_section(struct walk *w, const char *pattern, void *base, uint8_t *seen)
{
	int r;
	for (;;) {
		if ((r = walk_next(w)) < 0)
			return r;
		if (w->ev.type == YAML_MAPPING_END_EVENT)
			return 0;
		if (w->ev.type != YAML_SCALAR_EVENT)
			return werr(w, "keys must be scalars, got %s", event_kind(&w->ev));
		const char *key = (const char *)w->ev.data.scalar.value;
		size_t kn = w->ev.data.scalar.length;
		size_t idx = profcfg_n_keys;
		for (size_t i = 0; i < profcfg_n_keys && idx == profcfg_n_keys; i++) {
			const char *name = profcfg_child_name(&profcfg_keys[i], pattern);
			if (name && strlen(name) == kn && !memcmp(name, key, kn))
				idx = i;
		}
		size_t saved = w->plen;
		path_push_key(w, key, kn);
		if (idx == profcfg_n_keys) {
			char allowed[512];
			size_t o = 0;
			allowed[0] = 0;
			for (size_t i = 0; i < profcfg_n_keys; i++) {
				const char *name = profcfg_child_name(&profcfg_keys[i], pattern);
				if (name && o < sizeof(allowed)) {
					int n = snprintf(allowed + o, sizeof(allowed) - o, "%s%s",
							 o ? ", " : "", name);
					o += n > 0 ? (size_t)n : 0;
				}
			}
			return werr(w, "unknown key (allowed here: %s)", allowed);
		}
		if (seen[idx])
			return werr(w, "duplicate key");
		seen[idx] = 1;
		if ((r = walk_next(w)) < 0)
			return r;
		if ((r = parse_value(w, idx, base)) < 0)
			return r;
		path_pop(w, saved);
	}
}

/* Checks across sections, after the whole document is read. */
static int check_config(const struct pf_profcfg *cfg, struct pf_error *err)
{
	if (cfg->mode == PF_MODE_TRIGGERED && !cfg->slow_span.enabled && !cfg->high_cpu.enabled &&
	    !cfg->on_demand.enabled && !cfg->error_span.enabled)
		return pf_error_set(err, -EINVAL, "profiling.mode",
				    "triggered needs at least one enabled trigger "
				    "(profiling.triggers.slow_span, error_span, high_cpu or "
				    "on_demand)");
	return 0;
}

static int parse_document(struct walk *w, struct pf_profcfg *cfg)
{
	int r;
	if ((r = walk_next(w)) < 0) /* STREAM_START */
		return r;
	if ((r = walk_next(w)) < 0)
		return r;
	if (w->ev.type == YAML_STREAM_END_EVENT)
		return 0;	    /* empty: all defaults */
	if ((r = walk_next(w)) < 0) /* the root node after DOCUMENT_START */
		return r;
	if (w->ev.type == YAML_MAPPING_START_EVENT) {
		uint8_t seen[PROFCFG_MAX_KEYS] = {0};
		if ((r = parse_section(w, "", cfg, seen)) < 0)
			return r;
	} else if (!is_null(&w->ev)) {
		return werr(w, "the document must be a mapping (keys profiling, labels), got %s",
			    event_kind(&w->ev));
	}
	if ((r = walk_next(w)) < 0) /* DOCUMENT_END */
		return r;
	if ((r = walk_next(w)) < 0)
		return r;
	if (w->ev.type != YAML_STREAM_END_EVENT)
		return werr(w, "only one YAML document is allowed (another starts at line %zu)",
			    w->ev.start_mark.line + 1);
	return check_config(cfg, w->err);
}

/* A redacted view sent back as a document would store the placeholder as a secret. */
static int check_no_placeholder(const struct pf_profcfg *cfg, struct pf_error *err)
{
	for (size_t i = 0; i < cfg->n_exporters; i++) {
		const struct pf_exporter *e = &cfg->exporters[i];
		for (size_t j = 0; j < e->n_headers; j++) {
			if (strcmp(e->headers[j].value, PF_PROFCFG_REDACTED) != 0)
				continue;
			char p[MAX_PATH];
			snprintf(p, sizeof(p), "profiling.exporters[%zu].headers.%s", i,
				 e->headers[j].key);
			return pf_error_set(err, -EINVAL, p,
					    "is the placeholder of a redacted secret, not a value; "
					    "set the real value or use headers_from_file");
		}
	}
	return 0;
}

static int parse(const char *text, size_t len, struct pf_profcfg **out, struct pf_error *err,
		 bool allow_placeholder)
{
	struct pf_error local = {0};
	if (!err)
		err = &local;
	*out = NULL;
	if (len > PF_PROFCFG_MAX_DOC)
		return pf_error_set(err, -E2BIG, "", "document is %zu bytes, over the limit of %zu",
				    len, PF_PROFCFG_MAX_DOC);
	if (!text)
		text = "", len = 0;
	int sr = syntax_check(text, len, err);
	if (sr < 0)
		return sr;
	struct pf_profcfg *cfg = pf_profcfg_new_default();
	if (!cfg)
		return pf_error_set(err, -ENOMEM, "", "out of memory");
	struct walk *w = calloc(1, sizeof(*w));
	if (!w) {
		pf_profcfg_free(cfg);
		return pf_error_set(err, -ENOMEM, "", "out of memory");
	}
	w->err = err;
	w->text = text;
	w->len = len;
	if (!yaml_parser_initialize(&w->yp)) {
		free(w);
		pf_profcfg_free(cfg);
		return pf_error_set(err, -ENOMEM, "", "out of memory");
	}
	yaml_parser_set_input_string(&w->yp, (const unsigned char *)text, len);
	int r = parse_document(w, cfg);
	if (r < 0 && !err->code) /* every failure path sets err; keep the contract anyway */
		pf_error_set(err, r, w->path, "invalid document");
	if (r == 0 && !allow_placeholder)
		r = check_no_placeholder(cfg, err);
	if (w->have_ev)
		yaml_event_delete(&w->ev);
	yaml_parser_delete(&w->yp);
	free(w);
	if (r < 0) {
		pf_profcfg_free(cfg);
		return r;
	}
	*out = cfg;
	return 0;
}

int pf_profcfg_parse(const char *text, size_t len, struct pf_profcfg **out, struct pf_error *err)
{
	return parse(text, len, out, err, false);
}

int pf_profcfg_redact_yaml(const char *text, size_t len, struct pf_buf *out)
{
	struct pf_profcfg *cfg = NULL;
	struct pf_error err = {0};
	int r = parse(text, len, &cfg, &err, true); /* a view already redacted stays so */
	if (r < 0)
		return r;
	bool secrets = false;
	for (size_t i = 0; i < cfg->n_exporters && !secrets; i++)
		secrets = cfg->exporters[i].n_headers > 0;
	if (secrets)
		r = pf_profcfg_emit_yaml_redacted(cfg, out);
	else
		r = pf_buf_append(out, text, len) < 0 ? -ENOMEM : 0;
	pf_profcfg_free(cfg);
	return r;
}
