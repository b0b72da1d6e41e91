/* args.c — see args.h. */
#include "args.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static int find(const struct ctl_args *a, const char *name, size_t nlen, char short_name)
{
	for (size_t i = 0; i < a->n_opts; i++) {
		const struct ctl_opt *o = a->opts[i];
		if (short_name ? o->short_name == short_name
			       : (strlen(o->name) == nlen && strncmp(o->name, name, nlen) == 0))
			return (int)i;
	}
	return -1;
}

int ctl_args_parse(struct ctl_args *a, const struct ctl_opt *const *tables, int argc,
		   char *const *argv, struct pf_error *err)
{
	*a = (struct ctl_args){0};
	for (size_t t = 0; tables[t]; t++)
		for (const struct ctl_opt *o = tables[t]; o->name; o++) {
			if (a->n_opts == CTL_ARGS_MAX_OPTS)
				return pf_error_set(err, -E2BIG, "", "too many options (internal)");
			a->opts[a->n_opts++] = o;
		}
	bool opts_done = false;
	for (int i = 0; i < argc; i++) {
		const char *s = argv[i];
		if (opts_done || s[0] != '-' || s[1] == '\0') {
			if (a->n_pos == CTL_ARGS_MAX_POS)
				return pf_error_set(err, -EINVAL, "", "unexpected argument \"%s\"",
						    s);
			a->pos[a->n_pos++] = s;
			continue;
		}
		if (strcmp(s, "--") == 0) {
			opts_done = true;
			continue;
		}
		int idx;
		const char *inline_val = NULL;
		if (s[1] == '-') {
			const char *name = s + 2, *eq = strchr(name, '=');
			size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
			idx = find(a, name, nlen, 0);
			if (eq)
				inline_val = eq + 1;
		} else {
			idx = s[2] == '\0' ? find(a, NULL, 0, s[1]) : -1;
		}
		if (idx < 0)
			return pf_error_set(err, -EINVAL, "", "unknown option %s", s);
		const struct ctl_opt *o = a->opts[idx];
		struct ctl_optval *v = &a->val[idx];
		if (o->kind == CTL_OPT_FLAG) {
			if (inline_val)
				return pf_error_set(err, -EINVAL, "", "--%s takes no value",
						    o->name);
			v->set = true;
			continue;
		}
		const char *val = inline_val;
		if (!val) {
			if (i + 1 >= argc)
				return pf_error_set(err, -EINVAL, "", "--%s needs a value (%s)",
						    o->name, o->metavar ? o->metavar : "VALUE");
			val = argv[++i];
		}
		v->set = true;
		v->str = val;
		if (o->kind == CTL_OPT_LIST) {
			if (v->n_list == CTL_ARGS_MAX_LIST)
				return pf_error_set(err, -EINVAL, "", "--%s: at most %d values",
						    o->name, CTL_ARGS_MAX_LIST);
			v->list[v->n_list++] = val;
		}
	}
	return 0;
}

const struct ctl_optval *ctl_args_get(const struct ctl_args *a, const char *name)
{
	int i = find(a, name, strlen(name), 0);
	return i >= 0 && a->val[i].set ? &a->val[i] : NULL;
}

const char *ctl_args_str(const struct ctl_args *a, const char *name)
{
	const struct ctl_optval *v = ctl_args_get(a, name);
	return v ? v->str : NULL;
}

bool ctl_args_flag(const struct ctl_args *a, const char *name)
{
	return ctl_args_get(a, name) != NULL;
}

#define MAX_DURATION_S (10ULL * 366 * 86400)

int ctl_parse_duration(const char *what, const char *s, uint64_t *seconds, struct pf_error *err)
{
	uint64_t total = 0;
	const char *p = s;
	if (!*p)
		goto bad;
	/* at most one term per unit, so at most 4 rounds (s itself ends the loop sooner) */
	for (int terms = 0; *p && terms < 4; terms++) {
		if (!isdigit((unsigned char)*p))
			goto bad;
		uint64_t n = 0;
		while (isdigit((unsigned char)*p)) {
			n = n * 10 + (uint64_t)(*p++ - '0');
			if (n > MAX_DURATION_S)
				goto range;
		}
		uint64_t mul;
		switch (*p) {
		case '\0':
			if (terms > 0) /* "1h30" is ambiguous */
				goto bad;
			mul = 1;
			break;
		case 's':
			mul = 1;
			break;
		case 'm':
			mul = 60;
			break;
		case 'h':
			mul = 3600;
			break;
		case 'd':
			mul = 86400;
			break;
		default:
			goto bad;
		}
		if (*p)
			p++;
		total += n * mul;
		if (total > MAX_DURATION_S)
			goto range;
	}
	if (*p)
		goto bad;
	if (total == 0)
		goto range;
	*seconds = total;
	return 0;
bad:
	return pf_error_set(err, -EINVAL, what,
			    "expected a duration such as 30s, 5m, 1h or 1h30m, got \"%s\"", s);
range:
	return pf_error_set(err, -ERANGE, what, "must be 1s..3660d, got \"%s\"", s);
}

int ctl_parse_int(const char *what, const char *s, int64_t min, int64_t max, int64_t *out,
		  struct pf_error *err)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (!*s || *end || errno == ERANGE || isspace((unsigned char)*s))
		return pf_error_set(err, -EINVAL, what, "expected an integer, got \"%s\"", s);
	if (v < min || v > max)
		return pf_error_set(err, -ERANGE, what,
				    "must be %" PRId64 "..%" PRId64 ", got %lld", min, max, v);
	*out = v;
	return 0;
}

void ctl_rule_release(struct pf_filter *f)
{
	free(f->key);
	free(f->value);
	f->key = f->value = NULL;
}

int ctl_parse_process_rule(const char *what, const char *s, struct pf_filter *out,
			   struct pf_error *err)
{
	*out = (struct pf_filter){0};
	const char *eq = strchr(s, '=');
	if (!eq || eq == s)
		return pf_error_set(err, -EINVAL, what,
				    "expected key=value or key=~regexp, got \"%s\"", s);
	out->match = PF_MATCH_STRICT;
	const char *val = eq + 1;
	if (*val == '~') {
		out->match = PF_MATCH_REGEXP;
		val++;
	}
	out->key = strndup(s, (size_t)(eq - s));
	out->value = strdup(val);
	if (!out->key || !out->value) {
		ctl_rule_release(out);
		return pf_error_set(err, -ENOMEM, "", "out of memory");
	}
	int rc = pf_profcfg_filter_check(out, what, err);
	if (rc < 0)
		ctl_rule_release(out);
	return rc;
}

int ctl_check_trace_id(const char *what, const char *s, struct pf_error *err)
{
	size_t n = strlen(s);
	bool nonzero = false;
	for (size_t i = 0; i < n; i++) {
		if (!isxdigit((unsigned char)s[i]))
			goto bad;
		nonzero |= s[i] != '0';
	}
	if (n == 32 && nonzero)
		return 0;
bad:
	return pf_error_set(err, -EINVAL, what,
			    "expected a trace id of 32 hex digits (not all zero), got \"%s\"", s);
}
