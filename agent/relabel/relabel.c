/* relabel.c — see relabel.h. */
#include "relabel/relabel.h"

#include <errno.h>
#include <pthread.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "pf/buf.h"
#include "pf/compiler.h"
#include "pf/log.h"
#include "pf/regex.h"

#define REDACTED "[REDACTED]"
#define MAX_VALUE 4096 /* a rewritten value; longer results keep the attribute unchanged */
#define N_GROUPS 10    /* $0..$9 */

/* The built-in redaction: each match becomes its first group (what to keep) + [REDACTED]. */
static const char *const secret_patterns[] = {
    /* key=value and key: value for the usual names of credentials */
    "((token|password|passwd|secret|api[_-]?key|access[_-]?key)[[:space:]]*[=:][[:space:]]*)"
    "[^[:space:]&,;\"']+",
    /* an HTTP bearer credential */
    "(bearer[[:space:]]+)[A-Za-z0-9._~+/=-]+",
    /* an e-mail address */
    "()[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)*\\.[A-Za-z]{2,}",
};

struct rule {
	enum pf_relabel_action action;
	char *source, *target, *replacement;
	regex_t re;
};

struct agent_relabel {
	size_t n_secret, n_rules;
	regex_t secret[PF_ARRAY_SIZE(secret_patterns)];
	struct rule *rules;
	int refs; /* under cur_lock once installed */
};

static pthread_mutex_t cur_lock = PTHREAD_MUTEX_INITIALIZER;
static struct agent_relabel *cur;
static struct agent_relabel_stats totals; /* under cur_lock */

void agent_relabel_free(struct agent_relabel *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_secret; i++)
		regfree(&r->secret[i]);
	for (size_t i = 0; i < r->n_rules; i++) {
		regfree(&r->rules[i].re);
		free(r->rules[i].source);
		free(r->rules[i].target);
		free(r->rules[i].replacement);
	}
	free(r->rules);
	free(r);
}

static void relabel_freep(struct agent_relabel **r)
{
	agent_relabel_free(*r);
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

struct agent_relabel *agent_relabel_new(const struct pf_profcfg *cfg, struct pf_error *err)
{
	_cleanup_(relabel_freep) struct agent_relabel *r = calloc(1, sizeof(*r));
	if (!r || (cfg->n_relabel && !(r->rules = calloc(cfg->n_relabel, sizeof(*r->rules))))) {
		pf_error_set(err, -ENOMEM, "profiling.relabel", "out of memory");
		return NULL;
	}
	for (size_t i = 0; cfg->redact_secrets && i < PF_ARRAY_SIZE(secret_patterns); i++) {
		if (pf_regex_compile(&r->secret[i], secret_patterns[i], REG_EXTENDED | REG_ICASE,
				     err) < 0)
			return NULL;
		r->n_secret++;
	}
	for (size_t i = 0; i < cfg->n_relabel; i++) {
		const struct pf_relabel_rule *c = &cfg->relabel[i];
		struct rule *u = &r->rules[i];
		char path[64];
		snprintf(path, sizeof(path), "profiling.relabel[%zu].regex", i);
		struct pf_error rerr = {0};
		if (pf_regex_compile(&u->re, c->regex ? c->regex : "(.*)", REG_EXTENDED, &rerr) <
		    0) {
			pf_error_set(err, -EINVAL, path, "regexp does not compile: %s", rerr.msg);
			return NULL;
		}
		r->n_rules++;
		u->action = c->action;
		u->source = dup_or_null(c->source);
		u->target = dup_or_null(c->target ? c->target : c->source);
		u->replacement = strdup(c->replacement ? c->replacement : "$1");
		if ((c->source && !u->source) || (u->action == PF_RELABEL_REPLACE && !u->target) ||
		    !u->replacement) {
			pf_error_set(err, -ENOMEM, "profiling.relabel", "out of memory");
			return NULL;
		}
	}
	return TAKE_PTR(r);
}

/* ---- one value ---- */

static bool own_key(const char *key)
{
	return strncmp(key, "profleet.", 9) == 0;
}

/* The whole of s matches re (POSIX leftmost-longest: a whole match starts at 0 and is the
 * longest there); its groups in m. */
static bool whole_match(const regex_t *re, const char *s, regmatch_t *m)
{
	return regexec(re, s, N_GROUPS, m, 0) == 0 && m[0].rm_so == 0 &&
	       (size_t)m[0].rm_eo == strlen(s);
}

/* s with every built-in secret pattern's matches redacted, into out: true when changed. */
static bool redact(const struct agent_relabel *r, const char *s, struct pf_buf *out)
{
	bool changed = false;
	pf_buf_reset(out);
	if (pf_buf_append_str(out, s) < 0)
		return false;
	struct pf_buf next;
	pf_buf_init(&next, MAX_VALUE * 2);
	for (size_t i = 0; i < r->n_secret; i++) {
		const char *p = pf_buf_str(out);
		regmatch_t m[2];
		int flags = 0;
		bool hit = false;
		pf_buf_reset(&next);
		while (*p && regexec(&r->secret[i], p, 2, m, flags) == 0 && m[0].rm_eo > 0) {
			hit = true;
			size_t keep = m[1].rm_so >= 0 ? (size_t)m[1].rm_eo : (size_t)m[0].rm_so;
			if (pf_buf_append(&next, p, keep) < 0 || pf_buf_append_str(&next, REDACTED) < 0)
				goto fail;
			p += m[0].rm_eo;
			flags = REG_NOTBOL;
		}
		if (!hit)
			continue;
		if (pf_buf_append_str(&next, p) < 0)
			goto fail;
		struct pf_buf t = *out;
		*out = next;
		next = t;
		changed = true;
	}
	pf_buf_release(&next);
	return changed;
fail:
	pf_buf_release(&next);
	return false;
}

/* replacement with $0..$9 of the match m of s expanded, into out; -E2BIG past MAX_VALUE. */
static int expand(const char *replacement, const char *s, const regmatch_t *m, struct pf_buf *out)
{
	pf_buf_reset(out);
	for (const char *p = replacement; *p; p++) {
		int rc;
		if (p[0] == '$' && p[1] >= '0' && p[1] <= '9') {
			const regmatch_t *g = &m[p[1] - '0'];
			rc = g->rm_so >= 0 ? pf_buf_append(out, s + g->rm_so,
							   (size_t)(g->rm_eo - g->rm_so))
					   : 0;
			p++;
		} else {
			rc = pf_buf_putc(out, (uint8_t)*p);
		}
		if (rc < 0)
			return rc;
	}
	return pf_buf_append(out, "", 0);
}

/* ---- one process ---- */

struct attrs {
	struct pf_prof_attr *a;
	size_t n, cap;
};

static const char *attr_get(const struct attrs *as, const char *key)
{
	for (size_t i = 0; i < as->n; i++)
		if (!strcmp(as->a[i].key, key))
			return as->a[i].value;
	return NULL;
}

static void attr_remove(struct attrs *as, size_t i)
{
	memmove(&as->a[i], &as->a[i + 1], (as->n - i - 1) * sizeof(as->a[0]));
	as->n--;
}

struct tally {
	uint64_t redacted, replaced, attrs_dropped;
};

/* target = value (from the window's arena), or removed when value is "". */
static int attr_set(struct pf_prof_window *w, struct attrs *as, const char *key,
		    const char *value, struct tally *t)
{
	for (size_t i = 0; i < as->n; i++) {
		if (strcmp(as->a[i].key, key) != 0)
			continue;
		if (!*value) {
			attr_remove(as, i);
			t->attrs_dropped++;
			return 0;
		}
		if (!(as->a[i].value = pf_prof_strdup(w, value)))
			return -ENOMEM;
		t->replaced++;
		return 0;
	}
	if (!*value)
		return 0;
	if (as->n == as->cap)
		return 0; /* room is made for one new key per rule: not reached */
	as->a[as->n].key = pf_prof_strdup(w, key);
	as->a[as->n].value = pf_prof_strdup(w, value);
	if (!as->a[as->n].key || !as->a[as->n].value)
		return -ENOMEM;
	as->n++;
	t->replaced++;
	return 0;
}

/* The user's rules on as: 1 when the process is dropped. */
static int run_rules(const struct agent_relabel *r, struct pf_prof_window *w, struct attrs *as,
		     struct pf_buf *tmp, struct tally *t)
{
	regmatch_t m[N_GROUPS];
	for (size_t k = 0; k < r->n_rules; k++) {
		const struct rule *u = &r->rules[k];
		if (u->action == PF_RELABEL_LABELDROP) {
			for (size_t i = as->n; i-- > 0;)
				if (!own_key(as->a[i].key) && whole_match(&u->re, as->a[i].key, m)) {
					attr_remove(as, i);
					t->attrs_dropped++;
				}
			continue;
		}
		const char *v = own_key(u->source) ? NULL : attr_get(as, u->source);
		bool hit = whole_match(&u->re, v ? v : "", m);
		if (u->action == PF_RELABEL_DROP && hit)
			return 1;
		if (u->action == PF_RELABEL_KEEP && !hit)
			return 1;
		if (u->action != PF_RELABEL_REPLACE || !hit || own_key(u->target))
			continue;
		int rc = expand(u->replacement, v ? v : "", m, tmp);
		if (rc == -E2BIG)
			continue;
		if (rc < 0 || (rc = attr_set(w, as, u->target, pf_buf_str(tmp), t)) < 0)
			return rc;
	}
	return 0;
}

/* Sample labels' strings, redacted (new label arrays from the arena). */
static int redact_samples(const struct agent_relabel *r, struct pf_prof_window *w,
			  struct pf_prof_process *p, struct pf_buf *tmp, struct tally *t)
{
	struct pf_prof_sample *ns = NULL;
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct pf_prof_sample *s = &p->samples[i];
		struct pf_prof_label *nl = NULL;
		for (uint32_t j = 0; j < s->n_labels; j++) {
			const char *v = s->labels[j].str;
			if (!v || !redact(r, v, tmp))
				continue;
			if (!ns) {
				if (!(ns = pf_prof_alloc(w, p->n_samples * sizeof(*ns))))
					return -ENOMEM;
				memcpy(ns, p->samples, p->n_samples * sizeof(*ns));
			}
			if (!nl) {
				if (!(nl = pf_prof_alloc(w, s->n_labels * sizeof(*nl))))
					return -ENOMEM;
				memcpy(nl, s->labels, s->n_labels * sizeof(*nl));
				ns[i].labels = nl;
			}
			if (!(nl[j].str = pf_prof_strdup(w, pf_buf_str(tmp))))
				return -ENOMEM;
			t->redacted++;
		}
	}
	if (ns)
		p->samples = ns;
	return 0;
}

/* p relabeled in place: 1 when it is dropped, 0, or -ENOMEM. */
static int relabel_process(const struct agent_relabel *r, struct pf_prof_window *w,
			   struct pf_prof_process *p, struct pf_buf *tmp, struct tally *t)
{
	struct attrs as = {.cap = p->n_attrs + r->n_rules};
	if (!(as.a = pf_prof_alloc(w, (as.cap ? as.cap : 1) * sizeof(*as.a))))
		return -ENOMEM;
	for (size_t i = 0; i < p->n_attrs; i++) {
		as.a[as.n] = p->attrs[i];
		const char *v = as.a[as.n].value;
		if (v && !own_key(as.a[as.n].key) && redact(r, v, tmp)) {
			if (!(as.a[as.n].value = pf_prof_strdup(w, pf_buf_str(tmp))))
				return -ENOMEM;
			t->redacted++;
		}
		as.n++;
	}
	int rc = run_rules(r, w, &as, tmp, t);
	if (rc != 0)
		return rc;
	p->attrs = as.a;
	p->n_attrs = as.n;
	return r->n_secret ? redact_samples(r, w, p, tmp, t) : 0;
}

int agent_relabel_window(struct agent_relabel *r, struct pf_prof_window *w)
{
	if (!w->n_processes || (!r->n_secret && !r->n_rules))
		return 0;
	struct pf_prof_process *np = pf_prof_alloc(w, w->n_processes * sizeof(*np));
	if (!np)
		return -ENOMEM;
	struct pf_buf tmp;
	pf_buf_init(&tmp, MAX_VALUE * 2);
	struct tally t = {0};
	size_t n = 0, dropped = 0;
	int rc = 0;
	for (size_t i = 0; i < w->n_processes && rc >= 0; i++) {
		np[n] = w->processes[i];
		rc = relabel_process(r, w, &np[n], &tmp, &t);
		if (rc == 1)
			dropped++;
		else if (rc == 0)
			n++;
	}
	pf_buf_release(&tmp);
	if (rc < 0)
		return rc;
	w->processes = np;
	w->n_processes = n;
	pthread_mutex_lock(&cur_lock);
	totals.redacted += t.redacted;
	totals.replaced += t.replaced;
	totals.attrs_dropped += t.attrs_dropped;
	totals.profiles_dropped += dropped;
	pthread_mutex_unlock(&cur_lock);
	return 0;
}

/* ---- the current set ---- */

static void put(struct agent_relabel *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&cur_lock);
	bool last = --r->refs == 0;
	pthread_mutex_unlock(&cur_lock);
	if (last)
		agent_relabel_free(r);
}

static void install(struct agent_relabel *r)
{
	pthread_mutex_lock(&cur_lock);
	struct agent_relabel *old = cur;
	if (r)
		r->refs = 1;
	cur = r;
	pthread_mutex_unlock(&cur_lock);
	put(old);
}

int agent_relabel_apply(struct pf_prof_window *w)
{
	pthread_mutex_lock(&cur_lock);
	struct agent_relabel *r = cur;
	if (r)
		r->refs++;
	pthread_mutex_unlock(&cur_lock);
	if (!r)
		return 0;
	int rc = agent_relabel_window(r, w);
	put(r);
	return rc;
}

void agent_relabel_reset(void)
{
	install(NULL);
}

static int hook_check(void *ctx, const struct pf_profcfg *cfg, struct pf_error *err)
{
	(void)ctx;
	struct agent_relabel *r = agent_relabel_new(cfg, err);
	if (!r)
		return err && err->code ? err->code : -EINVAL;
	agent_relabel_free(r);
	return 0;
}

static void hook_commit(void *ctx, const struct pf_profcfg *cfg, const struct pf_profcfg *old)
{
	(void)ctx;
	(void)old;
	struct pf_error err = {0};
	struct agent_relabel *r = agent_relabel_new(cfg, &err);
	if (!r) {
		pf_log_error("relabel: the previous rules stay: %s", err.msg);
		return;
	}
	install(r);
}

void agent_relabel_hook(struct agent_config_hook *out)
{
	*out = (struct agent_config_hook){
	    .name = "relabel", .check = hook_check, .commit = hook_commit, .ctx = NULL};
}

void agent_relabel_stats(struct agent_relabel_stats *out)
{
	pthread_mutex_lock(&cur_lock);
	*out = totals;
	pthread_mutex_unlock(&cur_lock);
}
