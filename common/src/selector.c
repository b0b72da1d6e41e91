/* selector.c — see pf/selector.h. A hand-written recursive-descent parser over the source
 * string; every error names the byte offset and what was expected there. */
#include "pf/selector.h"

#include <errno.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pf/buf.h"
#include "pf/compiler.h"
#include "pf/regex.h"

enum sel_op {
	SEL_EQ,
	SEL_NE,
	SEL_RE,
	SEL_NRE,
	SEL_IN,
	SEL_NOTIN,
};

static const char *const op_text[] = {
    [SEL_EQ] = "=",   [SEL_NE] = "!=", [SEL_RE] = "=~",
    [SEL_NRE] = "!~", [SEL_IN] = "in", [SEL_NOTIN] = "notin",
};

struct sel_term {
	char *key;
	enum sel_op op;
	size_t nvals;
	char **vals;
	bool has_re;
	regex_t re;
};

struct pf_selector {
	char *source; /* canonical text */
	size_t nterms;
	struct sel_term terms[PF_SELECTOR_MAX_TERMS];
};

struct parser {
	const char *s;
	size_t len;
	size_t pos;
	struct pf_error *err;
};

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool is_key_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.' || c == '-' || c == '/';
}

/* A bare value is any printable, non-space character except the ones the grammar uses. */
static bool is_bare_char(char c)
{
	return (unsigned char)c > 0x20 && c != 0x7f && c != ',' && c != '(' && c != ')' && c != '"';
}

static void skip_space(struct parser *p)
{
	while (p->pos < p->len && is_space(p->s[p->pos]))
		p->pos++;
}

/* "'x'" for a printable char, "end of input" at the end, "byte 0x.." otherwise. */
static const char *describe_at(const struct parser *p, char buf[16])
{
	if (p->pos >= p->len)
		return "end of input";
	unsigned char c = (unsigned char)p->s[p->pos];
	if (c > 0x20 && c < 0x7f)
		snprintf(buf, 16, "'%c'", c);
	else
		snprintf(buf, 16, "byte 0x%02x", c);
	return buf;
}

static int parse_error(struct parser *p, const char *expected)
{
	char b[16];
	return pf_error_set(p->err, -EINVAL, NULL, "selector: expected %s at offset %zu, found %s",
			    expected, p->pos, describe_at(p, b));
}

static int parse_key(struct parser *p, char **out)
{
	size_t start = p->pos;
	while (p->pos < p->len && is_key_char(p->s[p->pos]))
		p->pos++;
	if (p->pos == start)
		return parse_error(p, "a key ([A-Za-z0-9_.-/])");
	*out = strndup(p->s + start, p->pos - start);
	return *out ? 0 : -ENOMEM;
}

static int parse_value(struct parser *p, const char *after, char **out)
{
	char what[64];
	struct pf_buf v;

	skip_space(p);
	pf_buf_init(&v, p->len + 1);
	if (p->pos < p->len && p->s[p->pos] == '"') {
		size_t open = p->pos++;
		for (;;) {
			if (p->pos >= p->len) {
				pf_buf_release(&v);
				return pf_error_set(p->err, -EINVAL, NULL, "selector: %s %zu",
						    "unterminated quoted value starting at offset",
						    open);
			}
			char c = p->s[p->pos];
			if (c == '"') {
				p->pos++;
				break;
			}
			if (c == '\\') {
				char n = p->pos + 1 < p->len ? p->s[p->pos + 1] : '\0';
				if (n != '"' && n != '\\') {
					pf_buf_release(&v);
					p->pos++;
					return parse_error(p,
							   "'\"' or '\\\\' after '\\' in a quoted "
							   "value");
				}
				c = n;
				p->pos++;
			}
			if (pf_buf_putc(&v, (uint8_t)c) < 0) {
				pf_buf_release(&v);
				return -ENOMEM;
			}
			p->pos++;
		}
	} else {
		size_t start = p->pos;
		while (p->pos < p->len && is_bare_char(p->s[p->pos]))
			p->pos++;
		if (p->pos == start) {
			snprintf(what, sizeof(what), "a value after '%s'", after);
			return parse_error(p, what);
		}
		if (pf_buf_append(&v, p->s + start, p->pos - start) < 0) {
			pf_buf_release(&v);
			return -ENOMEM;
		}
	}
	if (!v.data) { /* "" still needs its own NUL-terminated allocation */
		if (pf_buf_reserve(&v, 0) < 0)
			return -ENOMEM;
		v.data[0] = 0;
	}
	*out = (char *)pf_buf_detach(&v, NULL);
	return 0;
}

static int add_value(struct parser *p, struct sel_term *t, char *v, size_t at)
{
	if (t->nvals >= PF_SELECTOR_MAX_VALUES) {
		free(v);
		return pf_error_set(p->err, -EINVAL, NULL,
				    "selector: more than %d values for '%s' at offset %zu",
				    PF_SELECTOR_MAX_VALUES, t->key, at);
	}
	if (!t->vals) {
		size_t n = t->op == SEL_IN || t->op == SEL_NOTIN ? PF_SELECTOR_MAX_VALUES : 1;
		t->vals = calloc(n, sizeof(*t->vals));
		if (!t->vals) {
			free(v);
			return -ENOMEM;
		}
	}
	t->vals[t->nvals++] = v;
	return 0;
}

/* Compiles a regex that must match the whole value. Rather than wrapping the pattern as
 * ^(...)$ — which a stray ')' (glibc reads an unmatched one as a literal) would break open:
 * "a)|b" -> "^(a)|b)$" — the pattern is compiled as written and a match counts only when the
 * leftmost-longest match POSIX regexec() reports (glibc asks for the longest whenever
 * nmatch > 0) spans the whole value. That holds exactly when some match spans it. */
static int compile_regex(struct parser *p, struct sel_term *t, size_t at)
{
	/* pf_regex_compile bounds what glibc regcomp builds (pf/regex.h): user text. */
	struct pf_error rerr = {0};
	int rc = pf_regex_compile(&t->re, t->vals[0], REG_EXTENDED, &rerr);
	if (rc == -ENOMEM)
		return -ENOMEM;
	if (rc < 0)
		return pf_error_set(p->err, -EINVAL, NULL,
				    "selector: expected a POSIX extended regex at offset %zu: %s",
				    at, rerr.msg);
	t->has_re = true;
	return 0;
}

static int parse_term(struct parser *p, struct sel_term *t)
{
	char what[300];
	int r;

	skip_space(p);
	r = parse_key(p, &t->key);
	if (r < 0)
		return r;
	skip_space(p);

	const char *s = p->s + p->pos;
	size_t rest = p->len - p->pos;
	size_t oplen = 0;
	if (rest >= 2 && s[0] == '=' && s[1] == '=')
		t->op = SEL_EQ, oplen = 2;
	else if (rest >= 2 && s[0] == '=' && s[1] == '~')
		t->op = SEL_RE, oplen = 2;
	else if (rest >= 1 && s[0] == '=')
		t->op = SEL_EQ, oplen = 1;
	else if (rest >= 2 && s[0] == '!' && s[1] == '=')
		t->op = SEL_NE, oplen = 2;
	else if (rest >= 2 && s[0] == '!' && s[1] == '~')
		t->op = SEL_NRE, oplen = 2;
	else if (rest >= 2 && memcmp(s, "in", 2) == 0 && (rest == 2 || !is_key_char(s[2])))
		t->op = SEL_IN, oplen = 2;
	else if (rest >= 5 && memcmp(s, "notin", 5) == 0 && (rest == 5 || !is_key_char(s[5])))
		t->op = SEL_NOTIN, oplen = 5;
	if (!oplen) {
		snprintf(what, sizeof(what),
			 "an operator (=, ==, !=, =~, !~, in, notin) after '%s'", t->key);
		return parse_error(p, what);
	}
	char optok[8];
	snprintf(optok, sizeof(optok), "%.*s", (int)oplen, s);
	p->pos += oplen;

	if (t->op != SEL_IN && t->op != SEL_NOTIN) {
		skip_space(p);
		size_t at = p->pos;
		char *v;
		r = parse_value(p, optok, &v);
		if (r < 0)
			return r;
		r = add_value(p, t, v, at);
		if (r < 0)
			return r;
		if (t->op == SEL_RE || t->op == SEL_NRE)
			return compile_regex(p, t, at);
		return 0;
	}

	skip_space(p);
	if (p->pos >= p->len || p->s[p->pos] != '(') {
		snprintf(what, sizeof(what), "'(' after '%s'", optok);
		return parse_error(p, what);
	}
	p->pos++;
	for (;;) {
		char *v;
		skip_space(p);
		size_t at = p->pos;
		r = parse_value(p, t->nvals ? "," : "(", &v);
		if (r < 0)
			return r;
		r = add_value(p, t, v, at);
		if (r < 0)
			return r;
		skip_space(p);
		if (p->pos < p->len && p->s[p->pos] == ')') {
			p->pos++;
			return 0;
		}
		if (p->pos >= p->len || p->s[p->pos] != ',')
			return parse_error(p, "',' or ')' in the value list");
		p->pos++;
	}
}

static void term_release(struct sel_term *t)
{
	free(t->key);
	for (size_t i = 0; i < t->nvals; i++)
		free(t->vals[i]);
	free(t->vals);
	if (t->has_re)
		regfree(&t->re);
}

void pf_selector_free(struct pf_selector *sel)
{
	if (!sel)
		return;
	for (size_t i = 0; i < sel->nterms; i++)
		term_release(&sel->terms[i]);
	free(sel->source);
	free(sel);
}

static bool value_needs_quotes(const char *v)
{
	/* A leading '=', '~' or '!' would re-read as part of the operator (`a=` + `~b`). */
	if (!*v || *v == '=' || *v == '~' || *v == '!')
		return true;
	for (; *v; v++)
		if (!is_bare_char(*v))
			return true;
	return false;
}

static int canon_value(struct pf_buf *b, const char *v)
{
	int r = 0;

	if (!value_needs_quotes(v))
		return pf_buf_append_str(b, v);
	r = pf_buf_putc(b, '"');
	for (; r == 0 && *v; v++) {
		if (*v == '"' || *v == '\\')
			r = pf_buf_putc(b, '\\');
		if (r == 0)
			r = pf_buf_putc(b, (uint8_t)*v);
	}
	return r ? r : pf_buf_putc(b, '"');
}

static int build_canonical(struct pf_selector *sel)
{
	struct pf_buf b;
	int r = 0;

	/* Quoting can at most double a value plus its quotes; the cap is generous. */
	pf_buf_init(&b, 4 * PF_SELECTOR_MAX_SOURCE + 64);
	for (size_t i = 0; r == 0 && i < sel->nterms; i++) {
		const struct sel_term *t = &sel->terms[i];
		if (i)
			r = pf_buf_putc(&b, ',');
		if (r == 0)
			r = pf_buf_append_str(&b, t->key);
		if (r)
			break;
		if (t->op == SEL_IN || t->op == SEL_NOTIN) {
			r = pf_buf_printf(&b, " %s (", op_text[t->op]);
			for (size_t j = 0; r == 0 && j < t->nvals; j++) {
				if (j)
					r = pf_buf_putc(&b, ',');
				if (r == 0)
					r = canon_value(&b, t->vals[j]);
			}
			if (r == 0)
				r = pf_buf_putc(&b, ')');
		} else {
			r = pf_buf_append_str(&b, op_text[t->op]);
			if (r == 0)
				r = canon_value(&b, t->vals[0]);
		}
	}
	if (r == 0 && !b.data) {
		r = pf_buf_reserve(&b, 0);
		if (r == 0)
			b.data[0] = 0;
	}
	if (r < 0) {
		pf_buf_release(&b);
		return -ENOMEM;
	}
	sel->source = (char *)pf_buf_detach(&b, NULL);
	return 0;
}

static struct pf_selector *fail(struct pf_selector *sel, int r, struct pf_error *err)
{
	if (r == -ENOMEM)
		pf_error_set(err, -ENOMEM, NULL, "selector: out of memory");
	pf_selector_free(sel);
	errno = r == -ENOMEM ? ENOMEM : EINVAL;
	return NULL;
}

struct pf_selector *pf_selector_compile(const char *src, struct pf_error *err)
{
	struct parser p = {.s = src, .err = err};
	int r;

	if (!src) {
		pf_error_set(err, -EINVAL, NULL, "selector: missing");
		errno = EINVAL;
		return NULL;
	}
	p.len = strnlen(src, PF_SELECTOR_MAX_SOURCE + 1);
	if (p.len > PF_SELECTOR_MAX_SOURCE) {
		pf_error_set(err, -EINVAL, NULL, "selector: longer than %d bytes",
			     PF_SELECTOR_MAX_SOURCE);
		errno = EINVAL;
		return NULL;
	}
	struct pf_selector *sel = calloc(1, sizeof(*sel));
	if (!sel)
		return fail(NULL, -ENOMEM, err);

	skip_space(&p);
	if (p.pos < p.len) {
		for (;;) {
			if (sel->nterms >= PF_SELECTOR_MAX_TERMS) {
				pf_error_set(err, -EINVAL, NULL,
					     "selector: more than %d terms at offset %zu",
					     PF_SELECTOR_MAX_TERMS, p.pos);
				return fail(sel, -EINVAL, err);
			}
			r = parse_term(&p, &sel->terms[sel->nterms++]);
			if (r < 0)
				return fail(sel, r, err);
			skip_space(&p);
			if (p.pos >= p.len)
				break;
			if (p.s[p.pos] != ',') {
				parse_error(&p, "',' or end of input after a term");
				return fail(sel, -EINVAL, err);
			}
			p.pos++;
		}
	}
	r = build_canonical(sel);
	if (r < 0)
		return fail(sel, r, err);
	return sel;
}

static bool regex_full_match(const regex_t *re, const char *v)
{
	regmatch_t m[1];

	if (regexec(re, v, 1, m, 0) != 0)
		return false;
	return m[0].rm_so == 0 && (size_t)m[0].rm_eo == strlen(v);
}

static bool term_match(const struct sel_term *t, const char *v)
{
	switch (t->op) {
	case SEL_EQ:
		return v && strcmp(v, t->vals[0]) == 0;
	case SEL_NE:
		return !v || strcmp(v, t->vals[0]) != 0;
	case SEL_RE:
		return v && regex_full_match(&t->re, v);
	case SEL_NRE:
		return !v || !regex_full_match(&t->re, v);
	case SEL_IN:
	case SEL_NOTIN:
		if (!v)
			return t->op == SEL_NOTIN;
		for (size_t i = 0; i < t->nvals; i++)
			if (strcmp(v, t->vals[i]) == 0)
				return t->op == SEL_IN;
		return t->op == SEL_NOTIN;
	}
	return false;
}

bool pf_selector_match(const struct pf_selector *sel, pf_selector_lookup_fn lookup, void *ud)
{
	if (!sel)
		return false;
	for (size_t i = 0; i < sel->nterms; i++) {
		const struct sel_term *t = &sel->terms[i];
		if (!term_match(t, lookup ? lookup(t->key, ud) : NULL))
			return false;
	}
	return true;
}

const char *pf_selector_source(const struct pf_selector *sel)
{
	return sel ? sel->source : "";
}
