/* test_config.c — agent/config.c: the config engine (apply, FAILED with key path, apply-time
 * refusal, same-hash no-op, persistence, labels, hooks). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "pf/hash.h"
#include "state.h"

static char base[256];

static int setup(void **unused)
{
	snprintf(base, sizeof(base), "/tmp/pf-agent-config-XXXXXX");
	assert_non_null(mkdtemp(base));
	return 0;
}

static int teardown(void **unused)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	assert_int_equal(system(cmd), 0);
	return 0;
}

/* Offers doc as profiling.yaml with hash = SHA-256(doc). */
static int offer(struct agent_config *c, const char *doc, struct pf_error *err)
{
	uint8_t h[PF_SHA256_LEN];
	struct pf_config_file f = {
	    .name = (char *)"profiling.yaml",
	    .body = (uint8_t *)doc,
	    .body_len = strlen(doc),
	    .content_type = (char *)"text/yaml",
	};
	struct pf_config_map map = {.n_files = 1, .files = &f};
	pf_sha256(doc, strlen(doc), h);
	return agent_config_offer_remote(c, &map, h, sizeof(h), err);
}

static void test_defaults_and_local(void **unused)
{
	struct agent_config *c = agent_config_new(NULL);
	struct pf_error err = {0};
	const char local[] = "labels: {env: prod, team: a}\n"
			     "profiling:\n  sampling: {frequency_hz: 49}\n";

	assert_non_null(c);
	assert_int_equal(agent_config_set_local(c, local, strlen(local), &err), 0);
	assert_int_equal(agent_config_add_label(c, "team=b"), 0);
	assert_int_equal(agent_config_add_label(c, "region=eu"), 0);
	assert_int_equal(agent_config_add_label(c, "=x"), -EINVAL);
	assert_int_equal(agent_config_start(c, &err), 0);
	assert_false(agent_config_active_is_remote(c));
	assert_int_equal(agent_config_active(c)->frequency_hz, 49);
	assert_int_equal(agent_config_remote_status(c)->status, PF_RCS_UNSET);

	size_t n;
	const struct pf_kv_str *l = agent_config_labels(c, &n);
	assert_int_equal(n, 3);
	assert_string_equal(l[0].key, "env");
	assert_string_equal(l[0].value, "prod");
	assert_string_equal(l[1].key, "team");
	assert_string_equal(l[1].value, "b"); /* the flag wins */
	assert_string_equal(l[2].key, "region");

	struct pf_buf b;
	pf_buf_init(&b, 1 << 20);
	assert_int_equal(agent_config_effective_yaml(c, &b), 0);
	assert_non_null(strstr(pf_buf_str(&b), "49"));
	pf_buf_release(&b);
	agent_config_free(c);

	/* Invalid local config: error names the key. */
	c = agent_config_new(NULL);
	const char bad[] = "profiling:\n  sampling:\n    frequency_hz: 5000\n";
	pf_error_clear(&err);
	assert_int_equal(agent_config_set_local(c, bad, strlen(bad), &err), -EINVAL);
	assert_string_equal(err.path, "profiling.sampling.frequency_hz");
	/* No local config: defaults. */
	assert_int_equal(agent_config_start(c, NULL), 0);
	assert_int_equal(agent_config_active(c)->frequency_hz, 99);
	agent_config_free(c);
}

static void test_remote_apply_fail_keep(void **unused)
{
	struct agent_config *c = agent_config_new(NULL);
	struct pf_error err = {0};

	assert_int_equal(agent_config_start(c, &err), 0);
	uint64_t g0 = agent_config_generation(c), s0 = agent_config_status_generation(c);

	/* Valid: APPLIED, active and effective config change. */
	const char good[] = "profiling:\n  sampling: {frequency_hz: 19}\n";
	assert_int_equal(offer(c, good, &err), 0);
	const struct agent_remote_status *rs = agent_config_remote_status(c);
	assert_int_equal(rs->status, PF_RCS_APPLIED);
	assert_int_equal(rs->hash_len, 32);
	assert_string_equal(rs->message, "");
	assert_true(agent_config_active_is_remote(c));
	assert_int_equal(agent_config_active(c)->frequency_hz, 19);
	assert_true(agent_config_generation(c) > g0);
	assert_true(agent_config_status_generation(c) > s0);

	/* Invalid: FAILED naming the key, old config kept, effective config unchanged. */
	uint64_t g1 = agent_config_generation(c), s1 = agent_config_status_generation(c);
	const char bad[] = "profiling:\n  sampling:\n    frequency_hz: 5000\n";
	pf_error_clear(&err);
	assert_int_equal(offer(c, bad, &err), -EINVAL);
	assert_int_equal(rs->status, PF_RCS_FAILED);
	assert_non_null(strstr(rs->message, "profiling.sampling.frequency_hz"));
	assert_string_equal(err.path, "profiling.sampling.frequency_hz");
	assert_int_equal(agent_config_active(c)->frequency_hz, 19);
	assert_int_equal(agent_config_generation(c), g1);
	assert_true(agent_config_status_generation(c) > s1);

	/* The same (failed) config again: no-op, no status change. */
	uint64_t s2 = agent_config_status_generation(c);
	assert_int_equal(offer(c, bad, NULL), 1);
	assert_int_equal(agent_config_status_generation(c), s2);

	/* Apply-time refusal: a file exporter whose directory cannot be created. */
	const char unwritable[] = "profiling:\n  sampling: {frequency_hz: 7}\n"
				  "  exporters:\n    - {type: file, path: /proc/x}\n";
	pf_error_clear(&err);
	assert_true(offer(c, unwritable, &err) < 0);
	assert_int_equal(rs->status, PF_RCS_FAILED);
	assert_string_equal(err.path, "profiling.exporters[0].path");
	assert_non_null(
	    strstr(rs->message, "profiling.exporters[0].path: cannot create directory '/proc/x'"));
	assert_int_equal(agent_config_active(c)->frequency_hz, 19);

	/* A file exporter with a creatable directory applies and creates it. */
	char doc[512], dir[400];
	struct stat sb;
	snprintf(dir, sizeof(dir), "%s/out/profiles", base);
	snprintf(doc, sizeof(doc), "profiling:\n  exporters:\n    - {type: file, path: \"%s\"}\n",
		 dir);
	assert_int_equal(offer(c, doc, NULL), 0);
	assert_int_equal(rs->status, PF_RCS_APPLIED);
	assert_int_equal(stat(dir, &sb), 0);
	assert_true(S_ISDIR(sb.st_mode));

	/* The same good config again: no-op. */
	uint64_t s3 = agent_config_status_generation(c), g3 = agent_config_generation(c);
	assert_int_equal(offer(c, doc, NULL), 1);
	assert_int_equal(agent_config_status_generation(c), s3);
	assert_int_equal(agent_config_generation(c), g3);
	agent_config_free(c);
}

static void test_no_profiling_entry_and_withdraw(void **unused)
{
	struct agent_config *c = agent_config_new(NULL);
	const char local[] = "profiling:\n  sampling: {frequency_hz: 33}\n";
	uint8_t h1[2] = {1, 1}, h2[2] = {2, 2};
	struct pf_error err = {0};

	assert_int_equal(agent_config_set_local(c, local, strlen(local), NULL), 0);
	assert_int_equal(agent_config_start(c, NULL), 0);
	struct pf_config_file f = {
	    .name = (char *)"other.yaml", .body = (uint8_t *)"", .body_len = 0};
	struct pf_config_map map = {.n_files = 1, .files = &f};
	assert_int_equal(agent_config_offer_remote(c, &map, h1, 2, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "profiling.yaml"));
	assert_int_equal(agent_config_remote_status(c)->status, PF_RCS_FAILED);

	assert_int_equal(offer(c, "profiling: {enabled: false}\n", NULL), 0);
	assert_false(agent_config_active(c)->enabled);
	/* Empty map: back to the local config. */
	struct pf_config_map empty = {0};
	assert_int_equal(agent_config_offer_remote(c, &empty, h2, 2, NULL), 0);
	assert_false(agent_config_active_is_remote(c));
	assert_int_equal(agent_config_active(c)->frequency_hz, 33);
	assert_int_equal(agent_config_remote_status(c)->status, PF_RCS_APPLIED);
	agent_config_free(c);
}

static void test_persisted_restart(void **unused)
{
	struct agent_state *st = NULL;
	struct pf_error err = {0};
	const char doc[] = "profiling:\n  sampling: {frequency_hz: 11}\n";

	assert_int_equal(agent_state_open(base, &st, &err), 0);
	struct agent_config *c = agent_config_new(st);
	assert_int_equal(agent_config_start(c, NULL), 0);
	assert_int_equal(offer(c, doc, NULL), 0);
	/* A failing one is not persisted. */
	assert_true(offer(c, "profiling: {nope: 1}\n", NULL) < 0);
	agent_config_free(c);
	agent_state_free(st);

	/* Restart while the controller is away: the last good remote config applies. */
	st = NULL;
	assert_int_equal(agent_state_open(base, &st, &err), 0);
	c = agent_config_new(st);
	const char local[] = "profiling:\n  sampling: {frequency_hz: 77}\n";
	assert_int_equal(agent_config_set_local(c, local, strlen(local), NULL), 0);
	assert_int_equal(agent_config_start(c, NULL), 0);
	assert_true(agent_config_active_is_remote(c));
	assert_int_equal(agent_config_active(c)->frequency_hz, 11);
	assert_int_equal(agent_config_remote_status(c)->status, PF_RCS_APPLIED);
	/* The controller re-offering the same config changes nothing. */
	uint64_t s = agent_config_status_generation(c);
	assert_int_equal(offer(c, doc, NULL), 1);
	assert_int_equal(agent_config_status_generation(c), s);
	agent_config_free(c);
	agent_state_free(st);
}

struct hook_log {
	int checks, commits;
	bool refuse;
	uint32_t committed_hz;
};

static int hook_check(void *ctx, const struct pf_profcfg *cfg, struct pf_error *err)
{
	struct hook_log *l = ctx;
	l->checks++;
	if (l->refuse)
		return pf_error_set(err, -EBUSY, "profiling.sampling.frequency_hz",
				    "sampler cannot run at %u Hz", cfg->frequency_hz);
	return 0;
}

static void hook_commit(void *ctx, const struct pf_profcfg *cfg, const struct pf_profcfg *old)
{
	struct hook_log *l = ctx;
	l->commits++;
	l->committed_hz = cfg->frequency_hz;
}

static void test_hooks(void **unused)
{
	struct agent_config *c = agent_config_new(NULL);
	struct hook_log log = {0};
	struct agent_config_hook h = {
	    .name = "sampler", .check = hook_check, .commit = hook_commit, .ctx = &log};
	struct pf_error err = {0};

	assert_int_equal(agent_config_add_hook(c, &h), 0);
	assert_int_equal(agent_config_start(c, NULL), 0);
	assert_int_equal(log.commits, 1);
	assert_int_equal(log.committed_hz, 99);
	log.refuse = true;
	assert_int_equal(offer(c, "profiling: {sampling: {frequency_hz: 500}}\n", &err), -EBUSY);
	assert_non_null(strstr(agent_config_remote_status(c)->message, "sampler cannot run"));
	assert_int_equal(log.commits, 1);
	assert_int_equal(agent_config_active(c)->frequency_hz, 99);
	log.refuse = false;
	assert_int_equal(offer(c, "profiling: {sampling: {frequency_hz: 500}}\n\n", NULL), 0);
	assert_int_equal(log.commits, 2);
	assert_int_equal(log.committed_hz, 500);
	agent_config_free(c);
}

/* A runtime note source like the data plane's overhead guard. */
struct note {
	const char *text;
	uint64_t gen;
};

static uint64_t note_fn(void *ctx, char *buf, size_t cap)
{
	struct note *n = ctx;
	if (buf)
		snprintf(buf, cap, "%s", n->text);
	return n->gen;
}

static void test_effective_note(void **unused)
{
	(void)unused;
	struct agent_config *c = agent_config_new(NULL);
	struct pf_buf b;
	struct note n = {.text = "", .gen = 0};
	assert_non_null(c);
	assert_int_equal(agent_config_start(c, NULL), 0);
	agent_config_set_note_source(c, note_fn, &n);
	uint64_t g0 = agent_config_generation(c);
	pf_buf_init(&b, 1 << 20);
	assert_int_equal(agent_config_effective_yaml(c, &b), 0);
	assert_null(strstr(pf_buf_str(&b), "\n#"));
	size_t plain = b.len;
	/* a note: one comment line after the document; the generation moves */
	n.text = "overhead guard: sampling.frequency_hz in effect: 49\nsecond line dropped";
	n.gen = 1;
	assert_true(agent_config_generation(c) > g0);
	pf_buf_reset(&b);
	assert_int_equal(agent_config_effective_yaml(c, &b), 0);
	assert_string_equal(pf_buf_str(&b) + plain,
			    "# overhead guard: sampling.frequency_hz in effect: 49\n");
	/* still a valid document, equal to the active config */
	struct pf_profcfg *back = NULL;
	assert_int_equal(pf_profcfg_parse((const char *)b.data, b.len, &back, NULL), 0);
	assert_true(pf_profcfg_equal(back, agent_config_active(c)));
	pf_profcfg_free(back);
	agent_config_set_note_source(c, NULL, NULL);
	pf_buf_release(&b);
	agent_config_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults_and_local),
	    cmocka_unit_test_setup_teardown(test_remote_apply_fail_keep, setup, teardown),
	    cmocka_unit_test(test_no_profiling_entry_and_withdraw),
	    cmocka_unit_test_setup_teardown(test_persisted_restart, setup, teardown),
	    cmocka_unit_test(test_hooks),
	    cmocka_unit_test(test_effective_note),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
