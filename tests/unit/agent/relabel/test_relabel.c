/* test_relabel.c — agent/relabel/relabel.c: the built-in secret redaction, replace, drop, keep
 * and labeldrop on hand-built windows, the rules' config keys (parse errors by key path and
 * the bounds), and the current set a config commit installs. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "pf/profcfg.h"
#include "relabel/relabel.h"

/* A window of n processes, each with the attributes kv (key, value, ..., NULL) and one sample
 * with the label "user" = label. */
static struct pf_prof_window *window(size_t n, const char *const *kv, const char *label)
{
	struct pf_prof_window *w = pf_prof_window_new();
	assert_non_null(w);
	struct pf_prof_process *ps = pf_prof_alloc(w, n * sizeof(*ps));
	size_t na = 0;
	while (kv[2 * na])
		na++;
	for (size_t i = 0; i < n; i++) {
		struct pf_prof_attr *a = pf_prof_alloc(w, (na + 1) * sizeof(*a));
		for (size_t j = 0; j < na; j++)
			a[j] = (struct pf_prof_attr){kv[2 * j], kv[2 * j + 1]};
		struct pf_prof_label *l = pf_prof_alloc(w, sizeof(*l));
		*l = (struct pf_prof_label){.key = "user", .str = label};
		struct pf_prof_sample *s = pf_prof_alloc(w, sizeof(*s));
		*s = (struct pf_prof_sample){.count = 1, .n_labels = 1, .labels = l};
		ps[i] = (struct pf_prof_process){.pid = (uint32_t)(100 + i), .n_attrs = na,
						 .attrs = a, .n_samples = 1, .samples = s};
	}
	w->processes = ps;
	w->n_processes = n;
	return w;
}

static const char *attr(const struct pf_prof_process *p, const char *key)
{
	for (size_t i = 0; i < p->n_attrs; i++)
		if (!strcmp(p->attrs[i].key, key))
			return p->attrs[i].value;
	return NULL;
}

static struct pf_profcfg *cfg_of(const char *yaml)
{
	struct pf_profcfg *c = NULL;
	struct pf_error err = {0};
	int rc = pf_profcfg_parse(yaml, strlen(yaml), &c, &err);
	if (rc < 0)
		print_error("%s\n", err.msg);
	assert_int_equal(rc, 0);
	return c;
}

static struct agent_relabel *rules_of(const char *yaml)
{
	struct pf_profcfg *c = cfg_of(yaml);
	struct pf_error err = {0};
	struct agent_relabel *r = agent_relabel_new(c, &err);
	assert_non_null(r);
	pf_profcfg_free(c);
	return r;
}

static void test_default_redaction(void **state)
{
	(void)state;
	static const char *const kv[] = {
	    "process.command_line",
	    "app --token=abc123 --mail bob.smith@example.com --port 80",
	    "http.auth", "Authorization: Bearer eyJhbGciOi.JIUzI1NiJ9",
	    "env", "PASSWORD=hunter2 API_KEY: k-42 secret=s3",
	    "service.name", "checkout",
	    "profleet.agent.uid", "token=keep-me",
	    NULL};
	struct agent_relabel_stats st0, st1;
	agent_relabel_stats(&st0);
	struct agent_relabel *r = rules_of("");
	struct pf_prof_window *w = window(1, kv, "alice@example.org");
	assert_int_equal(agent_relabel_window(r, w), 0);
	const struct pf_prof_process *p = &w->processes[0];
	assert_string_equal(attr(p, "process.command_line"),
			    "app --token=[REDACTED] --mail [REDACTED] --port 80");
	assert_string_equal(attr(p, "http.auth"), "Authorization: Bearer [REDACTED]");
	assert_string_equal(attr(p, "env"),
			    "PASSWORD=[REDACTED] API_KEY: [REDACTED] secret=[REDACTED]");
	assert_string_equal(attr(p, "service.name"), "checkout");
	assert_string_equal(attr(p, "profleet.agent.uid"), "token=keep-me");
	assert_string_equal(p->samples[0].labels[0].str, "[REDACTED]");
	agent_relabel_stats(&st1);
	assert_int_equal(st1.redacted - st0.redacted, 4);
	pf_prof_window_free(w);
	agent_relabel_free(r);

	/* turned off: nothing changes */
	r = rules_of("profiling:\n  redact_secrets: false\n");
	w = window(1, kv, "alice@example.org");
	assert_int_equal(agent_relabel_window(r, w), 0);
	assert_string_equal(attr(&w->processes[0], "env"), "PASSWORD=hunter2 API_KEY: k-42 secret=s3");
	assert_string_equal(w->processes[0].samples[0].labels[0].str, "alice@example.org");
	pf_prof_window_free(w);
	agent_relabel_free(r);
}

static void test_replace_and_labeldrop(void **state)
{
	(void)state;
	static const char *const kv[] = {"k8s.pod.name", "web-7d9f-abcde",
					 "k8s.pod.label.team", "payments",
					 "k8s.pod.label.owner", "ops",
					 "host.name", "node-1",
					 "profleet.capture.id", "c1",
					 NULL};
	struct agent_relabel *r = rules_of(
	    "profiling:\n"
	    "  relabel:\n"
	    "    - {source: k8s.pod.name, regex: '(.*)-[a-z0-9]+-[a-z0-9]+', target: app}\n"
	    "    - {source: host.name, regex: 'node-(.*)', replacement: 'n$1'}\n"
	    "    - {source: host.name, regex: 'zzz', target: never}\n"
	    "    - {source: k8s.pod.label.owner, regex: ops, replacement: ''}\n"
	    "    - {action: labeldrop, regex: 'k8s\\.pod\\.label\\..*|profleet\\..*'}\n");
	struct pf_prof_window *w = window(1, kv, "x");
	assert_int_equal(agent_relabel_window(r, w), 0);
	const struct pf_prof_process *p = &w->processes[0];
	assert_string_equal(attr(p, "app"), "web");
	assert_string_equal(attr(p, "host.name"), "n1");
	assert_null(attr(p, "never")); /* no match: nothing written */
	assert_null(attr(p, "k8s.pod.label.owner"));
	assert_null(attr(p, "k8s.pod.label.team"));
	assert_string_equal(attr(p, "profleet.capture.id"), "c1"); /* the agent's own stays */
	assert_string_equal(attr(p, "k8s.pod.name"), "web-7d9f-abcde");
	pf_prof_window_free(w);
	agent_relabel_free(r);
}

static void test_drop_and_keep(void **state)
{
	(void)state;
	static const char *const a[] = {"service.name", "api", NULL};
	static const char *const b[] = {"service.name", "batch", NULL};
	struct agent_relabel *r = rules_of("profiling:\n  relabel:\n"
					   "    - {source: service.name, regex: batch, action: drop}\n");
	struct pf_prof_window *w = window(2, a, "x");
	struct pf_prof_process *ps = (struct pf_prof_process *)w->processes;
	struct pf_prof_window *wb = window(1, b, "x");
	ps[1].attrs = wb->processes[0].attrs; /* held by wb, freed with it */
	assert_int_equal(agent_relabel_window(r, w), 0);
	assert_int_equal(w->n_processes, 1);
	assert_string_equal(attr(&w->processes[0], "service.name"), "api");
	agent_relabel_free(r);
	r = rules_of("profiling:\n  relabel:\n"
		     "    - {source: service.name, regex: 'b.*', action: keep}\n");
	struct pf_prof_window *w2 = window(1, a, "x");
	assert_int_equal(agent_relabel_window(r, w2), 0);
	assert_int_equal(w2->n_processes, 0);
	pf_prof_window_free(w2);
	pf_prof_window_free(w);
	pf_prof_window_free(wb);
	agent_relabel_free(r);
}

static void expect_error(const char *yaml, const char *path)
{
	struct pf_profcfg *c = NULL;
	struct pf_error err = {0};
	assert_int_equal(pf_profcfg_parse(yaml, strlen(yaml), &c, &err), -EINVAL);
	if (strcmp(err.path, path) != 0)
		print_error("%s\n", err.msg);
	assert_string_equal(err.path, path);
}

static void test_config_errors_and_bounds(void **state)
{
	(void)state;
	expect_error("profiling:\n  relabel:\n    - {source: a, regex: '(a'}\n",
		     "profiling.relabel[0].regex");
	expect_error("profiling:\n  relabel:\n    - {source: a}\n    - {regex: x}\n",
		     "profiling.relabel[1].source");
	expect_error("profiling:\n  relabel:\n    - {source: a, action: rename}\n",
		     "profiling.relabel[0].action");
	expect_error("profiling:\n  relabel:\n    - {source: a, regex: 'a**'}\n",
		     "profiling.relabel[0].regex");
	char big[600];
	snprintf(big, sizeof(big), "profiling:\n  relabel:\n    - {source: a, regex: '%0300d'}\n",
		 0);
	expect_error(big, "profiling.relabel[0].regex"); /* over 256 bytes */
	char many[4096] = "profiling:\n  relabel:\n";
	size_t len = strlen(many);
	for (int i = 0; i <= PF_PROFCFG_MAX_RELABEL; i++)
		len += (size_t)snprintf(many + len, sizeof(many) - len,
					"    - {action: labeldrop, regex: x}\n");
	assert_true(len < sizeof(many));
	expect_error(many, "profiling.relabel");
	/* the rules round-trip through the effective config */
	struct pf_profcfg *c = cfg_of("profiling:\n  relabel:\n    - {action: labeldrop, regex: x}\n");
	struct pf_buf b;
	pf_buf_init(&b, 1 << 20);
	assert_int_equal(pf_profcfg_emit_yaml(c, &b), 0);
	struct pf_profcfg *c2 = cfg_of(pf_buf_str(&b));
	assert_true(pf_profcfg_equal(c, c2));
	assert_int_equal(c2->n_relabel, 1);
	assert_int_equal(c2->relabel[0].action, PF_RELABEL_LABELDROP);
	pf_buf_release(&b);
	pf_profcfg_free(c);
	pf_profcfg_free(c2);
}

static void test_current_set_from_the_hook(void **state)
{
	(void)state;
	static const char *const kv[] = {"note", "token=abc", NULL};
	struct agent_config_hook h;
	agent_relabel_hook(&h);
	struct pf_prof_window *w = window(1, kv, "x");
	assert_int_equal(agent_relabel_apply(w), 0); /* none installed: unchanged */
	assert_string_equal(attr(&w->processes[0], "note"), "token=abc");
	pf_prof_window_free(w);
	struct pf_profcfg *c = cfg_of("");
	struct pf_error err = {0};
	assert_int_equal(h.check(h.ctx, c, &err), 0);
	h.commit(h.ctx, c, c);
	w = window(1, kv, "x");
	assert_int_equal(agent_relabel_apply(w), 0);
	assert_string_equal(attr(&w->processes[0], "note"), "token=[REDACTED]");
	pf_prof_window_free(w);
	pf_profcfg_free(c);
	agent_relabel_reset();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_default_redaction),
	    cmocka_unit_test(test_replace_and_labeldrop),
	    cmocka_unit_test(test_drop_and_keep),
	    cmocka_unit_test(test_config_errors_and_bounds),
	    cmocka_unit_test(test_current_set_from_the_hook),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
