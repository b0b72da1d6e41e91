/* regex.c — see pf/regex.h.
 *
 * One left-to-right scan that tokenizes the pattern as glibc's ERE parser (posix/regcomp.c,
 * peek_token / parse_bracket_exp / parse_dup_op, RE_SYNTAX_POSIX_EXTENDED) does, with one
 * frame per open group. Each frame keeps an upper estimate of the nodes its items will build
 * and the largest product of repetition copies inside it; a quantifier multiplies the last
 * item of its frame. Everything is checked as soon as it grows, so the offset reported is the
 * byte where a limit is first passed.
 *
 * Where the scan cannot read a construct the way glibc accepts it (an unterminated bracket, a
 * malformed interval, a quantifier with nothing before it) glibc refuses the pattern at that
 * point. The scan then reads the byte as a literal and goes on, so the rest of the pattern is
 * still held to the limits and regcomp gives its own error message. */
#include "pf/regex.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "pf/compiler.h"

/* Node weights: a bracket or a class escape may build an alternation of a byte set and a
 * multibyte set (3 nodes in a UTF-8 locale), a group its open and close markers and the
 * subexpression node, a repetition one node per copy, `\b`/`\B` an alternation of two anchor
 * nodes (5 measured). Literal bytes count one each. */
#define W_BRACKET 3
#define W_WORD_ANCHOR 5
#define W_GROUP 3

enum prev_kind {
	PREV_NONE,  /* start of a group or branch, or an anchor: nothing to repeat */
	PREV_ITEM,  /* an atom or a closed group */
	PREV_QUANT, /* a quantifier: another one would stack */
};

struct frame {
	size_t nodes; /* estimated nodes of the items of this group so far */
	size_t prod;  /* largest product of repetition copies inside this group */
	enum prev_kind prev;
	size_t prev_nodes; /* nodes of the last item, already in nodes */
	size_t prev_prod;  /* copy product inside the last item */
	size_t anchors;	   /* anchors of the items so far, counting copies */
	size_t prev_anchors;
	/* Whether the group can match the empty string: some branch has only items that can. */
	bool any_null;	  /* an earlier branch can */
	bool null_before; /* the items of this branch before the last one can */
	bool prev_null;	  /* the last item (or anchor) can; true at the start of a branch */
};

#define FRAME_INIT                                                                                 \
	(struct frame)                                                                             \
	{                                                                                          \
		.prod = 1, .prev = PREV_NONE, .null_before = true, .prev_null = true               \
	}

struct scan {
	const char *s;
	size_t len;
	struct frame f[PF_REGEX_MAX_DEPTH + 1]; /* f[0] is the whole pattern */
	size_t depth;
	size_t nquant;
	size_t ngroups;
	struct pf_error *err;
};

static int check_nodes(struct scan *sc, size_t at)
{
	size_t total = 0, anchors = 0;

	for (size_t i = 0; i <= sc->depth; i++) {
		total += sc->f[i].nodes;
		anchors += sc->f[i].anchors;
	}
	if (anchors > PF_REGEX_MAX_ANCHORS)
		return pf_error_set(sc->err, -EINVAL, NULL, "more than %d anchors at byte %zu",
				    PF_REGEX_MAX_ANCHORS, at);
	/* glibc copies what an anchor reaches for each anchor condition: count that too */
	if (total * (1 + anchors) > PF_REGEX_MAX_NODES)
		return pf_error_set(
		    sc->err, -EINVAL, NULL,
		    anchors ? "pattern expands to over %d nodes with its anchors at byte %zu"
			    : "pattern expands to over %d nodes at byte %zu",
		    PF_REGEX_MAX_NODES, at);
	return 0;
}

static void push_null(struct frame *f, bool null)
{
	f->null_before = f->null_before && f->prev_null;
	f->prev_null = null;
}

static int add_item(struct scan *sc, size_t nodes, size_t prod, size_t anchors, bool null,
		    size_t at)
{
	struct frame *f = &sc->f[sc->depth];

	f->nodes += nodes;
	f->anchors += anchors;
	f->prev = PREV_ITEM;
	f->prev_nodes = nodes;
	f->prev_prod = prod;
	f->prev_anchors = anchors;
	push_null(f, null);
	return check_nodes(sc, at);
}

/* An anchor: a node that matches the empty string and that nothing may repeat. */
static int add_anchor(struct scan *sc, size_t nodes, size_t weight, size_t at)
{
	struct frame *f = &sc->f[sc->depth];

	f->nodes += nodes;
	f->anchors += weight;
	f->prev = PREV_NONE;
	push_null(f, true);
	return check_nodes(sc, at);
}

static int add_branch(struct scan *sc, size_t at)
{
	struct frame *f = &sc->f[sc->depth];

	f->nodes += 1;
	f->prev = PREV_NONE;
	f->any_null = f->any_null || (f->null_before && f->prev_null);
	f->null_before = true;
	f->prev_null = true;
	return check_nodes(sc, at);
}

/* glibc's fetch_number(): reads tokens from s[*j] up to ',' (also "\\,", which glibc reads
 * as the character ',') or an unescaped '}', which is consumed and stored in *term (0 at the
 * end of the pattern). Returns the number (saturated at 99999), -1 when there were no digits,
 * -2 when anything else came before the terminator ("\\0" counts as the digit 0: `\1`..`\9`
 * are back-references to glibc, not digits). */
static long fetch_number(const struct scan *sc, size_t *j, char *term)
{
	long num = -1;

	*term = 0;
	while (*j < sc->len) {
		bool esc = sc->s[*j] == '\\' && *j + 1 < sc->len;
		char c = sc->s[*j + esc];

		*j += 1 + esc;
		if ((c == '}' && !esc) || c == ',') {
			*term = c;
			return num;
		}
		bool digit = c >= '0' && c <= '9' && (!esc || c == '0');
		if (!digit || num == -2)
			num = -2;
		else
			num = num < 0 ? c - '0' : pf_min(num * 10 + (c - '0'), 99999L);
	}
	return -2;
}

/* Reads an interval at s[i] == '{' as glibc's parse_dup_op() does: {m} {m,} {m,n} {,n} {,}.
 * Returns its length, or 0 when glibc refuses it (REG_BADBR, REG_EBRACE). *n is -1 for no
 * upper bound. */
static size_t parse_interval(const struct scan *sc, size_t i, long *m, long *n)
{
	size_t j = i + 1;
	char term;

	*m = fetch_number(sc, &j, &term);
	if (*m == -1) {
		if (term != ',')
			return 0; /* "{}" */
		*m = 0;
	}
	if (*m == -2)
		return 0;
	if (term == '}') {
		*n = *m;
	} else {
		*n = fetch_number(sc, &j, &term);
		if (*n == -2 || term != '}' || (*n != -1 && *m > *n))
			return 0;
	}
	return j - i;
}

/* Length of the bracket expression at s[i] == '[', or 0 when it is unterminated (REG_EBRACK).
 * Mirrors glibc: '^' first negates; then a ']' is literal; "[:", "[.", "[=" open a name that
 * ends at the first ":]", ".]", "=]" within 32 bytes; '\' is literal; the next ']' closes. */
static size_t bracket_len(const struct scan *sc, size_t i)
{
	const char *s = sc->s;
	size_t j = i + 1;

	if (j < sc->len && s[j] == '^')
		j++;
	if (j < sc->len && s[j] == ']')
		j++;
	while (j < sc->len) {
		if (s[j] == ']')
			return j + 1 - i;
		if (s[j] == '[' && j + 1 < sc->len &&
		    (s[j + 1] == ':' || s[j + 1] == '.' || s[j + 1] == '=')) {
			char delim = s[j + 1];
			size_t k = j + 2;
			for (;; k++) {
				if (k - (j + 2) >= 32 || k + 1 >= sc->len)
					return 0; /* glibc: REG_EBRACK */
				if (s[k] == delim && s[k + 1] == ']')
					break;
			}
			j = k + 2;
			continue;
		}
		j++;
	}
	return 0;
}

/* Bytes of the character starting at s[i]: a byte >= 0x80 takes the continuation bytes after
 * it (a UTF-8 locale reads them as one character, which a quantifier repeats whole). */
static size_t char_len(const struct scan *sc, size_t i)
{
	size_t j = i + 1;

	if ((unsigned char)sc->s[i] >= 0x80)
		while (j < sc->len && j - i < 4 && ((unsigned char)sc->s[j] & 0xc0) == 0x80)
			j++;
	return j - i;
}

/* A quantifier at s[at] building `copies` copies of the last item; min0 when it matches zero
 * of them, loop when it has no upper bound. */
static int quantifier(struct scan *sc, size_t at, size_t copies, bool min0, bool loop, size_t m,
		      size_t n, bool interval)
{
	struct frame *f = &sc->f[sc->depth];

	if (f->prev == PREV_QUANT)
		return pf_error_set(sc->err, -EINVAL, NULL, "stacked quantifier at byte %zu", at);
	if (++sc->nquant > PF_REGEX_MAX_QUANTIFIERS)
		return pf_error_set(sc->err, -EINVAL, NULL, "more than %d quantifiers at byte %zu",
				    PF_REGEX_MAX_QUANTIFIERS, at);
	if (interval && pf_max(m, n) > PF_REGEX_MAX_REPEAT)
		return pf_error_set(sc->err, -EINVAL, NULL, "repetition count over %d at byte %zu",
				    PF_REGEX_MAX_REPEAT, at);
	if (f->prev == PREV_NONE) {
		/* Nothing to repeat: glibc refuses it (REG_BADRPT). */
		f->prev = PREV_QUANT;
		return 0;
	}
	if (copies > 1 && f->prev_null)
		return pf_error_set(sc->err, -EINVAL, NULL,
				    "repeated group at byte %zu can match the empty string", at);
	if ((copies > 1 || loop) && f->prev_anchors)
		return pf_error_set(sc->err, -EINVAL, NULL,
				    "repeated group at byte %zu contains an anchor", at);
	size_t prod = copies * f->prev_prod;
	if (prod > PF_REGEX_MAX_PRODUCT)
		return pf_error_set(sc->err, -EINVAL, NULL,
				    "nested repetitions make %zu copies at byte %zu (limit %d)",
				    prod, at, PF_REGEX_MAX_PRODUCT);
	/* copies of the item plus one node per copy (star, alternative or concatenation) */
	f->nodes += (copies - 1) * f->prev_nodes + copies;
	f->anchors += (copies - 1) * f->prev_anchors;
	f->prod = pf_max(f->prod, prod);
	f->prev = PREV_QUANT;
	f->prev_null = f->prev_null || min0;
	return check_nodes(sc, at);
}

static int open_group(struct scan *sc, size_t at)
{
	if (++sc->ngroups > PF_REGEX_MAX_GROUPS)
		return pf_error_set(sc->err, -EINVAL, NULL, "more than %d groups at byte %zu",
				    PF_REGEX_MAX_GROUPS, at);
	if (sc->depth + 1 > PF_REGEX_MAX_DEPTH)
		return pf_error_set(sc->err, -EINVAL, NULL,
				    "groups nested deeper than %d at byte %zu", PF_REGEX_MAX_DEPTH,
				    at);
	sc->depth++;
	sc->f[sc->depth] = FRAME_INIT;
	return 0;
}

static int close_group(struct scan *sc, size_t at)
{
	struct frame g = sc->f[sc->depth--];
	struct frame *f = &sc->f[sc->depth];

	f->prod = pf_max(f->prod, g.prod);
	return add_item(sc, g.nodes + W_GROUP, g.prod, g.anchors,
			g.any_null || (g.null_before && g.prev_null), at);
}

/* Escape at s[i] == '\\', i + 1 < len. Sets *adv to the bytes it takes. */
static int escape(struct scan *sc, size_t i, size_t *adv)
{
	char c = sc->s[i + 1];

	*adv = 2;
	switch (c) {
	case '1' ... '9':
		return pf_error_set(sc->err, -EINVAL, NULL, "back-reference at byte %zu", i);
	case 'w':
	case 'W':
	case 's':
	case 'S':
		return add_item(sc, W_BRACKET, 1, 0, false, i);
	case 'b':
	case 'B':
		/* a word boundary is two anchor conditions (word start or end) */
		return add_anchor(sc, W_WORD_ANCHOR, 2, i);
	case '<':
	case '>':
	case '`':
	case '\'':
		return add_anchor(sc, 1, 1, i);
	default:
		*adv = 1 + char_len(sc, i + 1);
		return add_item(sc, *adv - 1, 1, 0, false, i);
	}
}

static int scan_pattern(struct scan *sc)
{
	size_t i = 0;
	int r = 0;

	sc->f[0] = FRAME_INIT;
	while (r == 0 && i < sc->len) {
		char c = sc->s[i];
		size_t adv = 1;
		size_t ilen;
		long m, n;

		switch (c) {
		case '\\':
			if (i + 1 >= sc->len)
				return 0; /* trailing backslash: REG_EESCAPE */
			r = escape(sc, i, &adv);
			break;
		case '[':
			ilen = bracket_len(sc, i);
			if (ilen)
				adv = ilen;
			r = add_item(sc, ilen ? W_BRACKET : 1, 1, 0, false, i);
			break;
		case '(':
			r = open_group(sc, i);
			break;
		case ')':
			if (sc->depth > 0)
				r = close_group(sc, i);
			else
				r = add_item(sc, 1, 1, 0, false, i); /* unmatched ')' is literal */
			break;
		case '|':
			r = add_branch(sc, i);
			break;
		case '^':
		case '$':
			r = add_anchor(sc, 1, 1, i);
			break;
		case '*':
		case '?':
			r = quantifier(sc, i, 1, true, c == '*', 0, 0, false);
			break;
		case '+':
			r = quantifier(sc, i, 2, false, true, 0, 0, false);
			break;
		case '{':
			ilen = parse_interval(sc, i, &m, &n);
			if (!ilen) {
				/* Not an interval: glibc refuses the pattern here; a
				 * quantifier before it still counts as stacked. */
				if (sc->f[sc->depth].prev == PREV_QUANT)
					r = quantifier(sc, i, 1, true, false, 0, 0, false);
				else
					r = add_item(sc, 1, 1, 0, false, i);
				break;
			}
			adv = ilen;
			if (n < 0)
				r = quantifier(sc, i, (size_t)m + 1, m == 0, true, (size_t)m, 0,
					       true);
			else
				r = quantifier(sc, i, pf_max((size_t)n, (size_t)1), m == 0, false,
					       (size_t)m, (size_t)n, true);
			break;
		default:
			adv = char_len(sc, i);
			r = add_item(sc, adv, 1, 0, false, i);
			break;
		}
		i += adv;
	}
	return r;
}

int pf_regex_check(const char *pattern, struct pf_error *err)
{
	struct scan sc = {.s = pattern, .err = err};

	if (!pattern)
		return pf_error_set(err, -EINVAL, NULL, "pattern missing");
	sc.len = strnlen(pattern, PF_REGEX_MAX_LEN + 1);
	if (sc.len > PF_REGEX_MAX_LEN)
		return pf_error_set(err, -EINVAL, NULL, "pattern longer than %d bytes",
				    PF_REGEX_MAX_LEN);
	return scan_pattern(&sc);
}

int pf_regex_compile(regex_t *re, const char *pattern, int cflags, struct pf_error *err)
{
	char msg[128];
	int r, rc;

	if (!(cflags & REG_EXTENDED))
		return pf_error_set(err, -EINVAL, NULL,
				    "only POSIX extended regexes (REG_EXTENDED) are supported");
	r = pf_regex_check(pattern, err);
	if (r < 0)
		return r;
	rc = regcomp(re, pattern, cflags);
	if (rc == 0)
		return 0;
	if (rc == REG_ESPACE)
		return pf_error_set(err, -ENOMEM, NULL, "out of memory");
	regerror(rc, re, msg, sizeof(msg));
	return pf_error_set(err, -EINVAL, NULL, "%s", msg);
}
