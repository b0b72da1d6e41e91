/* test_profcfg.c — pf/profcfg.h: defaults, a full example document, every validation
 * error (exact key path + message), emit → parse round trips, the Markdown reference, and
 * robustness over truncated and mutated documents. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pf/buf.h"
#include "pf/profcfg.h"

/* A full example document with every section, as a user would write it. */
static const char arch_example[] =
    "profiling:\n"
    "  enabled: true\n"
    "  mode: continuous            # continuous | triggered (sample only when a trigger "
    "fires)\n"
    "  sampling: {frequency_hz: 99, duration_seconds: 10}\n"
    "  filters:                    # on process attributes: service.name, "
    "process.executable.name,\n"
    "    include: [{key: service.name, match: strict, value: checkout}]   # process.pid, "
    "container.id,\n"
    "    exclude: [{key: service.name, match: regexp, value: \".*-test\"}]  # "
    "k8s.namespace.name, k8s.pod.name\n"
    "  triggers:\n"
    "    slow_span: {enabled: true, threshold_ms: 500, max_per_minute: 6}\n"
    "    high_cpu:  {enabled: true, threshold_percent: 80, sustain_seconds: 10,\n"
    "                duration_seconds: 30, frequency_hz: 199, cooldown_seconds: 300}\n"
    "    on_demand: {enabled: true, max_duration_seconds: 300}\n"
    "  pprof:\n"
    "    targets: [{url: \"http://127.0.0.1:6060/debug/pprof/profile?seconds=10\", type: cpu,\n"
    "               interval_seconds: 60, attributes: {service.name: billing}}]\n"
    "  exporters:\n"
    "    - {type: otlp_http, endpoint: \"http://collector:4318/v1development/profiles\",\n"
    "       headers: {}, compression: gzip, timeout_seconds: 10}\n"
    "    - {type: pyroscope, endpoint: \"http://pyroscope:4040\"}\n"
    "    - {type: file, path: /var/lib/profleet/out}\n"
    "  limits: {max_cpu_percent: 1.0, max_memory_mb: 64, max_profiles_per_minute: 60,\n"
    "           queue_bytes: 67108864}\n";

static struct pf_profcfg *parse_ok(const char *doc)
{
	struct pf_profcfg *cfg = NULL;
	struct pf_error err = {0};
	int r = pf_profcfg_parse(doc, strlen(doc), &cfg, &err);
	if (r != 0)
		print_error("unexpected failure %d for:\n%s\n-> %s\n", r, doc, err.msg);
	assert_int_equal(r, 0);
	assert_non_null(cfg);
	assert_int_equal(err.code, 0);
	return cfg;
}

static void check_defaults(const struct pf_profcfg *c)
{
	assert_true(c->enabled);
	assert_int_equal(c->mode, PF_MODE_CONTINUOUS);
	assert_int_equal(c->frequency_hz, 99);
	assert_int_equal(c->duration_seconds, 10);
	assert_int_equal(c->n_include, 0);
	assert_int_equal(c->n_exclude, 0);
	assert_false(c->off_cpu.enabled);
	assert_int_equal(c->off_cpu.min_block_us, 1000);
	assert_true(c->off_cpu.probability == 1.0);
	assert_false(c->slow_span.enabled);
	assert_int_equal(c->slow_span.threshold_ms, 500);
	assert_int_equal(c->slow_span.max_per_minute, 6);
	assert_string_equal(c->slow_span.listen, "127.0.0.1:4328");
	assert_int_equal(c->slow_span.lookback_seconds, 60);
	assert_int_equal(c->slow_span.profile_type, PF_PROF_WALL);
	assert_false(c->error_span.enabled);
	assert_int_equal(c->error_span.max_per_minute, 6);
	assert_false(c->high_cpu.enabled);
	assert_int_equal(c->high_cpu.threshold_percent, 80);
	assert_int_equal(c->high_cpu.sustain_seconds, 10);
	assert_int_equal(c->high_cpu.duration_seconds, 30);
	assert_int_equal(c->high_cpu.frequency_hz, 199);
	assert_int_equal(c->high_cpu.cooldown_seconds, 300);
	assert_true(c->on_demand.enabled);
	assert_int_equal(c->on_demand.max_duration_seconds, 300);
	assert_int_equal(c->n_targets, 0);
	assert_int_equal(c->n_exporters, 0);
	assert_true(c->limits.max_cpu_percent == 1.0);
	assert_int_equal(c->limits.max_memory_mb, 64);
	assert_int_equal(c->limits.max_profiles_per_minute, 60);
	assert_int_equal(c->limits.queue_bytes, (uint64_t)64 << 20);
	assert_int_equal(c->n_labels, 0);
}

static void test_defaults(void **state)
{
	struct pf_profcfg *def = pf_profcfg_new_default();
	assert_non_null(def);
	check_defaults(def);
	static const char *const empties[] = {
	    "",
	    "\n",
	    "# only a comment\n",
	    "---\n",
	    "---\n...\n",
	    "~\n",
	    "profiling:\n",
	    "profiling: {}\n",
	    "profiling: ~\n",
	    "profiling: null\n",
	    "{}",
	    "labels: {}\n",
	    "profiling:\n  sampling:\n  filters: {include: [], exclude: ~}\n  exporters:\n",
	};
	for (size_t i = 0; i < sizeof(empties) / sizeof(empties[0]); i++) {
		struct pf_profcfg *c = parse_ok(empties[i]);
		check_defaults(c);
		assert_true(pf_profcfg_equal(c, def));
		pf_profcfg_free(c);
	}
	/* NULL text with len 0 is the empty document. */
	struct pf_profcfg *c = NULL;
	assert_int_equal(pf_profcfg_parse(NULL, 0, &c, NULL), 0);
	assert_true(pf_profcfg_equal(c, def));
	pf_profcfg_free(c);
	pf_profcfg_free(def);
	pf_profcfg_free(NULL);
}

static void test_arch_example(void **state)
{
	struct pf_profcfg *c = parse_ok(arch_example);
	assert_true(c->enabled);
	assert_int_equal(c->mode, PF_MODE_CONTINUOUS);
	assert_int_equal(c->frequency_hz, 99);
	assert_int_equal(c->duration_seconds, 10);
	assert_int_equal(c->n_include, 1);
	assert_string_equal(c->include[0].key, "service.name");
	assert_int_equal(c->include[0].match, PF_MATCH_STRICT);
	assert_string_equal(c->include[0].value, "checkout");
	assert_int_equal(c->n_exclude, 1);
	assert_int_equal(c->exclude[0].match, PF_MATCH_REGEXP);
	assert_string_equal(c->exclude[0].value, ".*-test");
	assert_true(c->slow_span.enabled);
	assert_int_equal(c->slow_span.threshold_ms, 500);
	assert_true(c->high_cpu.enabled);
	assert_int_equal(c->high_cpu.frequency_hz, 199);
	assert_int_equal(c->high_cpu.cooldown_seconds, 300);
	assert_true(c->on_demand.enabled);
	assert_int_equal(c->n_targets, 1);
	assert_string_equal(c->targets[0].url,
			    "http://127.0.0.1:6060/debug/pprof/profile?seconds=10");
	assert_int_equal(c->targets[0].type, PF_PPROF_CPU);
	assert_int_equal(c->targets[0].interval_seconds, 60);
	assert_int_equal(c->targets[0].n_attributes, 1);
	assert_string_equal(c->targets[0].attributes[0].key, "service.name");
	assert_string_equal(c->targets[0].attributes[0].value, "billing");
	assert_int_equal(c->n_exporters, 3);
	assert_int_equal(c->exporters[0].type, PF_EXPORTER_OTLP_HTTP);
	assert_string_equal(c->exporters[0].endpoint,
			    "http://collector:4318/v1development/profiles");
	assert_int_equal(c->exporters[0].n_headers, 0);
	assert_int_equal(c->exporters[0].compression, PF_COMPRESSION_GZIP);
	assert_int_equal(c->exporters[0].timeout_seconds, 10);
	assert_int_equal(c->exporters[1].type, PF_EXPORTER_PYROSCOPE);
	assert_string_equal(c->exporters[1].endpoint, "http://pyroscope:4040");
	assert_int_equal(c->exporters[1].timeout_seconds, 10); /* default filled in */
	assert_int_equal(c->exporters[2].type, PF_EXPORTER_FILE);
	assert_string_equal(c->exporters[2].path, "/var/lib/profleet/out");
	assert_null(c->exporters[2].endpoint);
	assert_int_equal(c->exporters[2].max_bytes, (uint64_t)256 << 20);
	assert_true(c->limits.max_cpu_percent == 1.0);
	assert_int_equal(c->limits.max_memory_mb, 64);
	assert_int_equal(c->limits.max_profiles_per_minute, 60);
	assert_int_equal(c->limits.queue_bytes, 67108864);
	assert_string_equal(pf_prof_mode_name(c->mode), "continuous");
	assert_string_equal(pf_exporter_type_name(c->exporters[2].type), "file");
	assert_string_equal(pf_pprof_type_name(c->targets[0].type), "cpu");
	assert_string_equal(pf_match_name(PF_MATCH_REGEXP), "regexp");
	assert_string_equal(pf_compression_name(PF_COMPRESSION_NONE), "none");
	assert_string_equal(pf_pprof_type_name(PF_PPROF_THREADCREATE), "threadcreate");
	pf_profcfg_free(c);
}

static void test_span_triggers(void **state)
{
	(void)state;
	struct pf_profcfg *c =
	    parse_ok("profiling:\n"
		     "  mode: triggered\n"
		     "  triggers:\n"
		     "    on_demand: {enabled: false}\n"
		     "    slow_span: {enabled: true, listen: '[::1]:14328', lookback_seconds: 5}\n"
		     "    error_span: {enabled: true, max_per_minute: 600}\n");
	assert_true(c->slow_span.enabled);
	assert_string_equal(c->slow_span.listen, "[::1]:14328");
	assert_int_equal(c->slow_span.lookback_seconds, 5);
	assert_true(c->error_span.enabled);
	assert_int_equal(c->error_span.max_per_minute, 600);
	pf_profcfg_free(c);
	/* error_span alone is enough for triggered mode */
	c = parse_ok("profiling: {mode: triggered, triggers: {on_demand: {enabled: false}, "
		     "error_span: {enabled: true}}}");
	assert_string_equal(c->slow_span.listen, "127.0.0.1:4328");
	pf_profcfg_free(c);
	c = parse_ok("profiling: {triggers: {slow_span: {listen: 'localhost:9'}}}");
	assert_string_equal(c->slow_span.listen, "localhost:9");
	pf_profcfg_free(c);
}

static void test_values(void **state)
{
	struct pf_profcfg *c =
	    parse_ok("profiling:\n"
		     "  enabled: off\n"
		     "  mode: triggered\n"
		     "  sampling: {frequency_hz: 1000, duration_seconds: +1}\n"
		     "  triggers: {high_cpu: {enabled: YES, cooldown_seconds: 0}}\n"
		     "  limits: {max_cpu_percent: 0.01, queue_bytes: 4294967296}\n"
		     "  pprof: {targets: [{url: 'https://h/x', type: threadcreate,"
		     " interval_seconds: 0}]}\n"
		     "  filters: {include: [{key: process.pid, value: 4242}],\n"
		     "            exclude: [{key: k8s.pod.label.team, value: ops},\n"
		     "                      {key: k8s.deployment.name, value: db}]}\n"
		     "  exporters: [{type: file, path: /tmp/p, max_bytes: 1048576}]\n"
		     "labels: {env: prod, team: 'a b', n: 7, t: true}\n");
	assert_false(c->enabled);
	assert_int_equal(c->mode, PF_MODE_TRIGGERED);
	assert_int_equal(c->frequency_hz, 1000);
	assert_int_equal(c->duration_seconds, 1);
	assert_true(c->high_cpu.enabled);
	assert_int_equal(c->high_cpu.cooldown_seconds, 0);
	assert_true(c->limits.max_cpu_percent == 0.01);
	assert_int_equal(c->limits.queue_bytes, (uint64_t)4 << 30);
	assert_int_equal(c->targets[0].type, PF_PPROF_THREADCREATE);
	assert_int_equal(c->targets[0].interval_seconds, 0);
	assert_string_equal(c->include[0].value, "4242");
	assert_int_equal(c->include[0].match, PF_MATCH_STRICT);
	assert_string_equal(c->exclude[0].key, "k8s.pod.label.team");
	assert_string_equal(c->exclude[1].key, "k8s.deployment.name");
	assert_int_equal(c->exporters[0].max_bytes, 1048576);
	assert_int_equal(c->n_labels, 4);
	assert_string_equal(c->labels[1].value, "a b");
	assert_string_equal(c->labels[2].value, "7");
	assert_string_equal(c->labels[3].value, "true");
	pf_profcfg_free(c);
}

struct bad {
	const char *doc;
	const char *path; /* exact err.path */
	const char *msg;  /* substring of err.msg */
};

static const struct bad bads[] = {
    /* the message format of the contract, exactly */
    {"profiling: {sampling: {frequency_hz: 5000}}", "profiling.sampling.frequency_hz",
     "profiling.sampling.frequency_hz: must be 1..1000, got 5000"},
    {"profiling: {mode: sometimes}", "profiling.mode",
     "profiling.mode: must be one of continuous, triggered, got 'sometimes'"},
    {"profiling: {off_cpu: {probability: 0}}", "profiling.off_cpu.probability",
     "profiling.off_cpu.probability: must be 0.0001..1, got 0"},
    {"profiling: {off_cpu: {min_block_us: 0}}", "profiling.off_cpu.min_block_us",
     "must be 1..60000000"},
    {"profiling: {off_cpu: {enabled: maybe}}", "profiling.off_cpu.enabled", ""},
    {"profiling: {off_cpu: {min_block: 5}}", "profiling.off_cpu.min_block", "unknown key"},
    {"profiling: {triggers: {slow_span: {profile_type: alloc}}}",
     "profiling.triggers.slow_span.profile_type", "cpu, off_cpu, wall"},
    /* unknown keys at every level */
    {"profilling: {}", "profilling", "unknown key (allowed here: profiling, labels)"},
    {"profiling: {enable: true}", "profiling.enable", "unknown key"},
    {"profiling: {sampling: {hz: 1}}", "profiling.sampling.hz", "unknown key"},
    {"profiling: {triggers: {slow_span: {thresh: 1}}}", "profiling.triggers.slow_span.thresh",
     "allowed here: enabled, threshold_ms, max_per_minute"},
    {"profiling: {exporters: [{type: file, path: /x, colour: red}]}",
     "profiling.exporters[0].colour", "unknown key"},
    {"profiling: {filters: {include: [{key: service.name, value: a, foo: 1}]}}",
     "profiling.filters.include[0].foo", "unknown key"},
    {"profiling: {pprof: {targets: [{url: 'http://h', extra: 1}]}}",
     "profiling.pprof.targets[0].extra", "unknown key"},
    /* wrong types */
    {"profiling: {enabled: {a: 1}}", "profiling.enabled", "must be a boolean, got a mapping"},
    {"profiling: {sampling: {frequency_hz: [1]}}", "profiling.sampling.frequency_hz",
     "must be an integer, got a list"},
    {"profiling: {sampling: {frequency_hz: abc}}", "profiling.sampling.frequency_hz",
     "must be an integer, got 'abc'"},
    {"profiling: {sampling: {frequency_hz: 9.5}}", "profiling.sampling.frequency_hz",
     "must be an integer, got '9.5'"},
    {"profiling: {sampling: {frequency_hz: \"99\"}}", "profiling.sampling.frequency_hz",
     "must be an integer, got the string \"99\""},
    {"profiling: {sampling: {frequency_hz: }}", "profiling.sampling.frequency_hz",
     "must be an integer, got null"},
    {"profiling: {sampling: {frequency_hz: -5}}", "profiling.sampling.frequency_hz",
     "must be 1..1000, got -5"},
    {"profiling: {limits: {queue_bytes: -1}}", "profiling.limits.queue_bytes",
     "must be 65536..4294967296, got -1"},
    {"profiling: {limits: {queue_bytes: 99999999999999999999999}}", "profiling.limits.queue_bytes",
     "must be 65536..4294967296, got 99999999999999999999999"},
    {"profiling: {enabled: maybe}", "profiling.enabled",
     "must be a boolean (true/false, yes/no, on/off), got 'maybe'"},
    {"profiling: {enabled: 'true'}", "profiling.enabled", "must be a boolean"},
    {"profiling: {enabled: 1}", "profiling.enabled", "must be a boolean"},
    {"profiling: {limits: {max_cpu_percent: lots}}", "profiling.limits.max_cpu_percent",
     "must be a number, got 'lots'"},
    {"profiling: {limits: {max_cpu_percent: .nan}}", "profiling.limits.max_cpu_percent",
     "must be a number"},
    {"profiling: {limits: {max_cpu_percent: 0x10}}", "profiling.limits.max_cpu_percent",
     "must be a number"},
    {"profiling: [1, 2]", "profiling", "must be a mapping, got a list"},
    {"profiling: 3", "profiling", "must be a mapping, got a scalar"},
    {"profiling: {sampling: 3}", "profiling.sampling", "must be a mapping, got a scalar"},
    {"profiling: {exporters: {type: file}}", "profiling.exporters", "must be a list"},
    {"profiling: {exporters: [file]}", "profiling.exporters[0]", "must be a mapping"},
    {"labels: [a]", "labels", "must be a mapping of strings to strings, got a list"},
    {"labels: {env: [a]}", "labels.env", "value must be a string, got a list"},
    {"labels: {env: }", "labels.env", "value must be a string, got null"},
    {"labels: {'': x}", "labels", "keys must not be empty"},
    {"labels: {[a]: x}", "labels", "keys must be a string, got a list"},
    {"profiling: {[a]: x}", "profiling", "keys must be scalars"},
    {"- a\n- b\n", "", "the document must be a mapping"},
    {"just text\n", "", "the document must be a mapping"},
    /* out of range, every bounded key family */
    {"profiling: {sampling: {frequency_hz: 0}}", "profiling.sampling.frequency_hz",
     "must be 1..1000, got 0"},
    {"profiling: {sampling: {duration_seconds: 3601}}", "profiling.sampling.duration_seconds",
     "must be 1..3600, got 3601"},
    {"profiling: {triggers: {slow_span: {threshold_ms: 3600001}}}",
     "profiling.triggers.slow_span.threshold_ms", "must be 1..3600000"},
    {"profiling: {triggers: {slow_span: {max_per_minute: 601}}}",
     "profiling.triggers.slow_span.max_per_minute", "must be 1..600"},
    {"profiling: {triggers: {slow_span: {listen: \"127.0.0.1:4318\"}}}",
     "profiling.triggers.slow_span.listen", "must not use port 4318: 4317/4318 are the OTLP"},
    {"profiling: {triggers: {slow_span: {listen: \"[::1]:4317\"}}}",
     "profiling.triggers.slow_span.listen", "must not use port 4317"},
    {"profiling: {triggers: {slow_span: {listen: \"collector:4328\"}}}",
     "profiling.triggers.slow_span.listen", "must be HOST:PORT with an IPv4 address"},
    {"profiling: {triggers: {slow_span: {listen: \"127.0.0.1:0\"}}}",
     "profiling.triggers.slow_span.listen", "a port 1..65535, got '127.0.0.1:0'"},
    {"profiling: {triggers: {slow_span: {lookback_seconds: 601}}}",
     "profiling.triggers.slow_span.lookback_seconds", "must be 5..600, got 601"},
    {"profiling: {triggers: {error_span: {max_per_minute: 0}}}",
     "profiling.triggers.error_span.max_per_minute", "must be 1..600"},
    {"profiling: {triggers: {high_cpu: {threshold_percent: 101}}}",
     "profiling.triggers.high_cpu.threshold_percent", "must be 1..100, got 101"},
    {"profiling: {triggers: {high_cpu: {sustain_seconds: 0}}}",
     "profiling.triggers.high_cpu.sustain_seconds", "must be 1..3600"},
    {"profiling: {triggers: {high_cpu: {duration_seconds: 0}}}",
     "profiling.triggers.high_cpu.duration_seconds", "must be 1..3600"},
    {"profiling: {triggers: {high_cpu: {frequency_hz: 1001}}}",
     "profiling.triggers.high_cpu.frequency_hz", "must be 1..1000"},
    {"profiling: {triggers: {high_cpu: {cooldown_seconds: 86401}}}",
     "profiling.triggers.high_cpu.cooldown_seconds", "must be 0..86400"},
    {"profiling: {triggers: {on_demand: {max_duration_seconds: 0}}}",
     "profiling.triggers.on_demand.max_duration_seconds", "must be 1..3600"},
    {"profiling: {limits: {max_cpu_percent: 0.001}}", "profiling.limits.max_cpu_percent",
     "must be 0.01..100, got 0.001"},
    {"profiling: {limits: {max_cpu_percent: 100.5}}", "profiling.limits.max_cpu_percent",
     "must be 0.01..100, got 100.5"},
    {"profiling: {limits: {max_memory_mb: 7}}", "profiling.limits.max_memory_mb",
     "must be 8..65536"},
    {"profiling: {limits: {max_profiles_per_minute: 10001}}",
     "profiling.limits.max_profiles_per_minute", "must be 1..10000"},
    {"profiling: {limits: {queue_bytes: 4294967297}}", "profiling.limits.queue_bytes",
     "must be 65536..4294967296, got 4294967297"},
    {"profiling: {exporters: [{type: otlp_http, endpoint: 'http://h', timeout_seconds: 0}]}",
     "profiling.exporters[0].timeout_seconds", "must be 1..300, got 0"},
    {"profiling: {exporters: [{type: file, path: /x, max_bytes: 1024}]}",
     "profiling.exporters[0].max_bytes", "must be 1048576..1099511627776, got 1024"},
    {"profiling: {pprof: {targets: [{url: 'http://h', interval_seconds: 86401}]}}",
     "profiling.pprof.targets[0].interval_seconds", "must be 0..86400"},
    /* enums */
    {"profiling: {exporters: [{type: kafka}]}", "profiling.exporters[0].type",
     "must be one of otlp_http, pyroscope, file, otlp_grpc, got 'kafka'"},
    {"profiling: {exporters: [{type: otlp_http, endpoint: 'http://h', compression: zstd}]}",
     "profiling.exporters[0].compression", "must be one of gzip, none, got 'zstd'"},
    {"profiling: {pprof: {targets: [{url: 'http://h', type: wall}]}}",
     "profiling.pprof.targets[0].type", "must be one of cpu, heap, allocs"},
    {"profiling: {filters: {exclude: [{key: service.name, match: glob, value: a}]}}",
     "profiling.filters.exclude[0].match", "must be one of strict, regexp, got 'glob'"},
    {"profiling: {mode: Continuous}", "profiling.mode", "got 'Continuous'"},
    {"profiling: {mode: }", "profiling.mode", "got 'null'"},
    /* duplicate keys */
    {"profiling: {}\nprofiling: {}\n", "profiling", "duplicate key"},
    {"profiling:\n  sampling:\n    frequency_hz: 1\n    frequency_hz: 2\n",
     "profiling.sampling.frequency_hz", "duplicate key"},
    {"profiling: {exporters: [{type: file, type: file, path: /x}]}", "profiling.exporters[0].type",
     "duplicate key"},
    {"labels: {env: a, env: b}", "labels.env", "duplicate key"},
    {"profiling: {pprof: {targets: [{url: 'http://h', attributes: {a.b: 1, a.b: 2}}]}}",
     "profiling.pprof.targets[0].attributes[\"a.b\"]", "duplicate key"},
    /* syntax errors, with line and column */
    {"profiling:\n  enabled: true\n mode: x\n", "",
     "YAML syntax error at line 3, column 2: did not find expected key"},
    {"profiling: {enabled: true\n", "", "YAML syntax error at line 2"},
    {"profiling:\n  enabled: true\n  - x\n", "", "YAML syntax error at line 3, column 3"},
    {"profiling: \"unterminated\n", "", "YAML syntax error"},
    {"\tprofiling: {}\n", "", "YAML syntax error at line 1, column 1"},
    {"profiling: {}\n\x01\n", "", "YAML syntax error"},
    /* an unclosed quote or flow collection: the parser's own error, naming where the construct
     * starts, not the type error of a key the walk read before the parser got there */
    {"profiling:\n  sampling: {frequency_hz: \"99, duration_seconds: 10}\n  enabled: true\n", "",
     "YAML syntax error at line 4, column 1: found unexpected end of stream (while scanning a "
     "quoted scalar that starts at line 2, column 28)"},
    {"profiling:\n  sampling: {frequency_hz: 99, duration_seconds: 10\n  enabled: true\n", "",
     "YAML syntax error at line 3, column 10: did not find expected ',' or '}' (while parsing a "
     "flow mapping that starts at line 2, column 13)"},
    {"profiling:\n  mode: 'abc\n  enabled: true\n", "",
     "quoted scalar that starts at line 2, column 9)"},
    /* bytes that are not UTF-8: the line and column of the byte */
    {"profiling:\n  mode: \"contin\xffuous\"\n", "",
     "YAML syntax error at line 2, column 16: invalid leading UTF-8 octet (byte 0xff at offset 26)"},
    {"labels: {k: \"\xc3\xa9t\xc3\xa9\xff\"}\n", "",
     "YAML syntax error at line 1, column 17: invalid leading UTF-8 octet (byte 0xff at offset "
     "18)"},
    /* multiple documents */
    {"profiling: {}\n---\nprofiling: {}\n", "", "only one YAML document is allowed"},
    {"---\n---\n", "", "only one YAML document is allowed (another starts at line 2)"},
    /* anchors, aliases, tags */
    {"labels: &a {x: y}\n", "labels", "anchors and aliases are not allowed (line 1, column 9)"},
    {"profiling:\n  filters:\n    include: &a [{key: service.name, value: a}]\n    exclude: *a\n",
     "profiling.filters.include", "anchors and aliases are not allowed (line 3, column 14)"},
    {"profiling: &p {}\n", "profiling", "anchors and aliases are not allowed"},
    {"profiling:\n  sampling: &s {frequency_hz: 5}\n  triggers: *s\n", "profiling.sampling",
     "anchors and aliases are not allowed (line 2, column 13)"},
    {"labels: {a: *x}\n", "labels.a", "anchors and aliases are not allowed (line 1, column 13)"},
    {"labels: {a: &x v, b: *x}\n", "labels.a", "anchors and aliases are not allowed"},
    {"profiling: {enabled: !!bool true}\n", "profiling.enabled", "tags are not allowed"},
    {"profiling: !!map {}\n", "profiling", "tags are not allowed"},
    {"profiling: &a [\"lol\",\"lol\"]\ny: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nz: [*b,*b]\n",
     "profiling", "anchors and aliases are not allowed"},
    /* filters */
    {"profiling: {filters: {include: [{key: user.name, value: a}]}}",
     "profiling.filters.include[0].key",
     "must be one of service.name, process.executable.name, process.pid, container.id, "
     "k8s.namespace.name, k8s.pod.name, k8s.pod.uid, k8s.container.name, k8s.node.name, "
     "k8s.deployment.name, k8s.replicaset.name, k8s.statefulset.name, k8s.daemonset.name, "
     "k8s.job.name, k8s.pod.label.*, got 'user.name'"},
    {"profiling: {filters: {include: [{key: k8s.pod.label., value: a}]}}",
     "profiling.filters.include[0].key", "must be one of"},
    {"profiling: {filters: {include: [{key: service.name, match: regexp, value: 'a(b'}]}}",
     "profiling.filters.include[0].value", "regexp does not compile"},
    {"profiling: {filters: {exclude: [{key: service.name, match: regexp, value: '[z-a]'}]}}",
     "profiling.filters.exclude[0].value", "regexp does not compile"},
    {"profiling: {filters: {include: [{key: service.name, match: regexp, value: 'a{2}{3}'}]}}",
     "profiling.filters.include[0].value", "regexp does not compile: stacked quantifier at byte 4"},
    {"profiling: {filters: {include: [{key: process.pid, value: abc}]}}",
     "profiling.filters.include[0].value", "must be a process id"},
    {"profiling: {filters: {include: [{value: a}]}}", "profiling.filters.include[0].key",
     "required"},
    {"profiling: {filters: {include: [{key: container.id}]}}", "profiling.filters.include[0].value",
     "required"},
    {"profiling: {filters: {include: [{key: service.name, value: a}, {key: x, value: b}]}}",
     "profiling.filters.include[1].key", "got 'x'"},
    /* exporters */
    {"profiling: {exporters: [{endpoint: 'http://h'}]}", "profiling.exporters[0].type",
     "required (one of otlp_http, pyroscope, file, otlp_grpc)"},
    {"profiling: {exporters: [{type: file, path: /x}, {type: otlp_http}]}",
     "profiling.exporters[1].endpoint",
     "profiling.exporters[1].endpoint: required for type otlp_http (an http:// or https:// "
     "URL)"},
    {"profiling: {exporters: [{type: pyroscope}]}", "profiling.exporters[0].endpoint",
     "required for type pyroscope"},
    {"profiling: {exporters: [{type: pyroscope, endpoint: 'ftp://h'}]}",
     "profiling.exporters[0].endpoint",
     "must be an http:// or https:// URL with a host, got "
     "'ftp://h'"},
    {"profiling: {exporters: [{type: otlp_http, endpoint: 'http://'}]}",
     "profiling.exporters[0].endpoint", "must be an http:// or https:// URL"},
    {"profiling: {exporters: [{type: otlp_http, endpoint: 'http://a b'}]}",
     "profiling.exporters[0].endpoint", "without spaces"},
    {"profiling: {exporters: [{type: file}]}", "profiling.exporters[0].path",
     "required for type file (an absolute directory path)"},
    {"profiling: {exporters: [{type: file, path: relative/dir}]}", "profiling.exporters[0].path",
     "must be an absolute path"},
    {"profiling: {exporters: [{type: file, path: /x, endpoint: 'http://h'}]}",
     "profiling.exporters[0].endpoint", "not used by type file"},
    {"profiling: {exporters: [{type: otlp_http, endpoint: 'http://h', path: /x}]}",
     "profiling.exporters[0].path", "not used by type otlp_http"},
    {"profiling: {exporters: [{type: otlp_http, endpoint: 'http://h', headers: {a: [1]}}]}",
     "profiling.exporters[0].headers.a", "value must be a string"},
    /* secrets: headers_from_file shape, a redacted view is not a document */
    {"profiling: {exporters: [{type: otlp_http, endpoint: 'http://h', headers_from_file: "
     "{X-Key: key.txt}}]}",
     "profiling.exporters[0].headers_from_file.X-Key", "must be an absolute file path"},
    {"profiling: {exporters: [{type: otlp_http, endpoint: 'http://h', headers: {x-key: v}, "
     "headers_from_file: {X-Key: /k}}]}",
     "profiling.exporters[0].headers_from_file.X-Key", "also set in headers"},
    {"profiling: {exporters: [{type: otlp_http, endpoint: 'http://h', auth: agent_token, "
     "headers_from_file: {authorization: /k}}]}",
     "profiling.exporters[0].headers_from_file.authorization", "auth: agent_token sends"},
    {"profiling: {exporters: [{type: file, path: /x, headers_from_file: {A: /k}}]}",
     "profiling.exporters[0].headers_from_file", "not used by type file"},
    {"profiling: {exporters: [{type: file, path: /x}, {type: pyroscope, endpoint: 'http://h', "
     "headers: {Authorization: '[REDACTED]'}}]}",
     "profiling.exporters[1].headers.Authorization", "placeholder of a redacted secret"},
    /* exporters[].tls: shape only (the files are checked at apply time) */
#define TLS_OTLP(rest) "profiling: {exporters: [{type: otlp_http, endpoint: 'https://h', " rest "}]}"
    {"profiling: {exporters: [{type: otlp_http, endpoint: 'http://h', tls: {ca_file: /ca.pem}}]}",
     "profiling.exporters[0].tls", "needs an https:// endpoint"},
    {"profiling: {exporters: [{type: file, path: /x}, {type: pyroscope, endpoint: 'http://h', "
     "tls: {}}]}",
     "profiling.exporters[1].tls", "needs an https:// endpoint"},
    {"profiling: {exporters: [{type: otlp_http, endpoint: 'http://h', tls: }]}",
     "profiling.exporters[0].tls", "needs an https:// endpoint"},
    {"profiling: {exporters: [{type: file, path: /x, tls: {ca_file: /ca.pem}}]}",
     "profiling.exporters[0].tls", "not used by type file"},
    {TLS_OTLP("tls: {cert_file: /c.pem}"), "profiling.exporters[0].tls.key_file",
     "required when cert_file is set"},
    {TLS_OTLP("tls: {key_file: /k.pem}"), "profiling.exporters[0].tls.cert_file",
     "required when key_file is set"},
    {TLS_OTLP("tls: {ca_file: ''}"), "profiling.exporters[0].tls.ca_file",
     "must not be empty, got ''"},
    {TLS_OTLP("tls: {cert_file: '', key_file: /k}"), "profiling.exporters[0].tls.cert_file",
     "must not be empty"},
    {TLS_OTLP("tls: {cert_file: /c, key_file: ''}"), "profiling.exporters[0].tls.key_file",
     "must not be empty"},
    {TLS_OTLP("tls: {server_name: \"\"}"), "profiling.exporters[0].tls.server_name",
     "must not be empty"},
    {TLS_OTLP("tls: {ca_file: ~}"), "profiling.exporters[0].tls.ca_file",
     "must be a string, got null"},
    {TLS_OTLP("tls: {insecure_skip_verify: maybe}"),
     "profiling.exporters[0].tls.insecure_skip_verify", "must be a boolean"},
    {TLS_OTLP("tls: {ca_path: /etc/ssl}"), "profiling.exporters[0].tls.ca_path",
     "unknown key (allowed here: ca_file, cert_file, key_file, insecure_skip_verify, "
     "server_name)"},
    {TLS_OTLP("tls: [/ca.pem]"), "profiling.exporters[0].tls", "must be a mapping, got a list"},
    {TLS_OTLP("tls: {}, tls: {}"), "profiling.exporters[0].tls", "duplicate key"},
    {TLS_OTLP("tls: {server_name: a, server_name: b}"), "profiling.exporters[0].tls.server_name",
     "duplicate key"},
#undef TLS_OTLP
    /* pprof targets */
    {"profiling: {pprof: {targets: [{type: heap}]}}", "profiling.pprof.targets[0].url",
     "required (an http:// or https:// URL)"},
    {"profiling: {pprof: {targets: [{url: 'file:///etc/passwd'}]}}",
     "profiling.pprof.targets[0].url", "must be an http:// or https:// URL"},
    {"profiling: {pprof: {targets: {url: 'http://h'}}}", "profiling.pprof.targets",
     "must be a list"},
    /* strings */
    {"labels: {a: \"x\\0y\"}", "labels.a", "must not contain NUL"},
    {"profiling: {filters: {include: [{key: service.name, value: \"a\\0b\"}]}}",
     "profiling.filters.include[0].value", "must not contain NUL"},
    {"profiling: {filters: {include: [{key: service.name, value: ~}]}}",
     "profiling.filters.include[0].value", "must be a string, got null"},
    /* cross-key */
    {"profiling: {mode: triggered, triggers: {on_demand: {enabled: false}}}", "profiling.mode",
     "triggered needs at least one enabled trigger"},
};

static void test_errors(void **state)
{
	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		const struct bad *b = &bads[i];
		struct pf_profcfg *cfg = (struct pf_profcfg *)(uintptr_t)1;
		struct pf_error err = {0};
		int r = pf_profcfg_parse(b->doc, strlen(b->doc), &cfg, &err);
		if (r != -EINVAL || strcmp(err.path, b->path) != 0 || !strstr(err.msg, b->msg))
			print_error("case %zu: %s\n  got r=%d path='%s' msg='%s'\n  want path='%s' "
				    "msg containing '%s'\n",
				    i, b->doc, r, err.path, err.msg, b->path, b->msg);
		assert_int_equal(r, -EINVAL);
		assert_null(cfg);
		assert_int_equal(err.code, -EINVAL);
		assert_string_equal(err.path, b->path);
		assert_non_null(strstr(err.msg, b->msg));
		/* "path: detail" when there is a path */
		if (b->path[0]) {
			assert_memory_equal(err.msg, b->path, strlen(b->path));
			assert_memory_equal(err.msg + strlen(b->path), ": ", 2);
		}
		/* the error struct is optional */
		cfg = NULL;
		assert_int_equal(pf_profcfg_parse(b->doc, strlen(b->doc), &cfg, NULL), -EINVAL);
		assert_null(cfg);
	}
}

static void expect_fail(const char *doc, size_t len, int code, const char *path, const char *msg)
{
	struct pf_profcfg *cfg = NULL;
	struct pf_error err = {0};
	int r = pf_profcfg_parse(doc, len, &cfg, &err);
	if (r != code || strcmp(err.path, path) || !strstr(err.msg, msg))
		print_error("%.300s\n  got r=%d path='%s' msg='%s'\n", doc, r, err.path, err.msg);
	assert_int_equal(r, code);
	assert_null(cfg);
	assert_string_equal(err.path, path);
	assert_non_null(strstr(err.msg, msg));
}

/* head, then n items "<pre><index><post>" separated by ", ", then tail. */
static void list_doc(struct pf_buf *b, const char *head, const char *pre, const char *post,
		     size_t n, const char *tail)
{
	pf_buf_reset(b);
	assert_int_equal(pf_buf_append_str(b, head), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(pf_buf_printf(b, "%s%s%zu%s", i ? ", " : "", pre, i, post), 0);
	assert_int_equal(pf_buf_append_str(b, tail), 0);
}

static void test_caps(void **state)
{
	struct pf_buf b;
	pf_buf_init(&b, 0);
	struct pf_profcfg *cfg;

	/* lists: at the cap is fine, one more is refused at the list's path */
	list_doc(&b, "profiling: {exporters: [", "{type: file, path: /x", "}",
		 PF_PROFCFG_MAX_EXPORTERS, "]}");
	cfg = parse_ok(pf_buf_str(&b));
	assert_int_equal(cfg->n_exporters, PF_PROFCFG_MAX_EXPORTERS);
	pf_profcfg_free(cfg);
	list_doc(&b, "profiling: {exporters: [", "{type: file, path: /x", "}",
		 PF_PROFCFG_MAX_EXPORTERS + 1, "]}");
	expect_fail(pf_buf_str(&b), b.len, -EINVAL, "profiling.exporters",
		    "must have at most 16 entries");
	list_doc(&b, "profiling: {filters: {include: [", "{key: process.pid, value: '", "'}",
		 PF_PROFCFG_MAX_FILTERS + 1, "]}}");
	expect_fail(pf_buf_str(&b), b.len, -EINVAL, "profiling.filters.include",
		    "must have at most 64 entries");
	list_doc(&b, "profiling: {filters: {exclude: [", "{key: process.pid, value: '", "'}",
		 PF_PROFCFG_MAX_FILTERS + 1, "]}}");
	expect_fail(pf_buf_str(&b), b.len, -EINVAL, "profiling.filters.exclude",
		    "must have at most 64 entries");
	list_doc(&b, "profiling: {pprof: {targets: [", "{url: 'http://h/", "'}",
		 PF_PROFCFG_MAX_TARGETS + 1, "]}}");
	expect_fail(pf_buf_str(&b), b.len, -EINVAL, "profiling.pprof.targets",
		    "must have at most 64 entries");

	/* maps */
	list_doc(&b, "labels: {", "k", ": v", PF_PROFCFG_MAX_LABELS, "}");
	cfg = parse_ok(pf_buf_str(&b));
	assert_int_equal(cfg->n_labels, PF_PROFCFG_MAX_LABELS);
	pf_profcfg_free(cfg);
	list_doc(&b, "labels: {", "k", ": v", PF_PROFCFG_MAX_LABELS + 1, "}");
	expect_fail(pf_buf_str(&b), b.len, -EINVAL, "labels", "must have at most 64 entries");
	list_doc(&b, "profiling: {exporters: [{type: otlp_http, endpoint: 'http://h', headers: {",
		 "h", ": v", PF_PROFCFG_MAX_HEADERS + 1, "}}]}");
	expect_fail(pf_buf_str(&b), b.len, -EINVAL, "profiling.exporters[0].headers",
		    "must have at most 32 entries");
	list_doc(&b, "profiling: {pprof: {targets: [{url: 'http://h', attributes: {", "a", ": v",
		 PF_PROFCFG_MAX_ATTRS + 1, "}}]}}");
	expect_fail(pf_buf_str(&b), b.len, -EINVAL, "profiling.pprof.targets[0].attributes",
		    "must have at most 32 entries");

	/* string length: 4096 bytes is fine, 4097 is not (values and map keys) */
	char *s = malloc(4098);
	assert_non_null(s);
	memset(s, 'a', 4097);
	s[4096] = 0;
	pf_buf_reset(&b);
	pf_buf_printf(&b, "labels: {k: %s}", s);
	cfg = parse_ok(pf_buf_str(&b));
	assert_int_equal(strlen(cfg->labels[0].value), 4096);
	pf_profcfg_free(cfg);
	s[4096] = 'a';
	s[4097] = 0;
	pf_buf_reset(&b);
	pf_buf_printf(&b, "labels: {k: %s}", s);
	expect_fail(pf_buf_str(&b), b.len, -EINVAL, "labels.k",
		    "value must be at most 4096 bytes, got 4097");
	pf_buf_reset(&b);
	/* an explicit key: YAML allows implicit keys of at most 1024 characters */
	pf_buf_printf(&b, "labels:\n  ? %s\n  : v\n", s);
	expect_fail(pf_buf_str(&b), b.len, -EINVAL, "labels", "keys must be at most 4096 bytes");
	pf_buf_reset(&b);
	pf_buf_printf(&b, "labels: {%s: v}", s);
	expect_fail(pf_buf_str(&b), b.len, -EINVAL, "",
		    "did not find expected ',' or '}' (while parsing a flow mapping that starts "
		    "at line 1, column 9)");
	pf_buf_reset(&b);
	pf_buf_printf(&b, "profiling: {exporters: [{type: file, path: /%s}]}", s);
	expect_fail(pf_buf_str(&b), b.len, -EINVAL, "profiling.exporters[0].path",
		    "value must be at most 4096 bytes");
	free(s);

	/* document size: over 1 MiB is refused before parsing, exactly 1 MiB is parsed */
	size_t big = PF_PROFCFG_MAX_DOC + 1;
	char *doc = malloc(big);
	assert_non_null(doc);
	memset(doc, ' ', big);
	doc[0] = '#';
	expect_fail(doc, big, -E2BIG, "", "over the limit of 1048576");
	cfg = parse_ok(""); /* and the same bytes one shorter are a valid comment document */
	pf_profcfg_free(cfg);
	struct pf_error err = {0};
	assert_int_equal(pf_profcfg_parse(doc, big - 1, &cfg, &err), 0);
	pf_profcfg_free(cfg);
	free(doc);
	pf_buf_release(&b);
}

static struct pf_profcfg *roundtrip(const struct pf_profcfg *c, struct pf_buf *out)
{
	pf_buf_reset(out);
	assert_int_equal(pf_profcfg_emit_yaml(c, out), 0);
	struct pf_profcfg *back = parse_ok(pf_buf_str(out));
	if (!pf_profcfg_equal(c, back))
		print_error("round trip differs:\n%s\n", pf_buf_str(out));
	assert_true(pf_profcfg_equal(c, back));
	/* stable: emitting the parsed copy gives the same bytes */
	struct pf_buf again;
	pf_buf_init(&again, 0);
	assert_int_equal(pf_profcfg_emit_yaml(back, &again), 0);
	assert_int_equal(again.len, out->len);
	assert_memory_equal(again.data, out->data, out->len);
	pf_buf_release(&again);
	return back;
}

static char *xstrdup(const char *s)
{
	char *p = strdup(s);
	assert_non_null(p);
	return p;
}

static void test_roundtrip(void **state)
{
	struct pf_buf out;
	pf_buf_init(&out, 0);

	struct pf_profcfg *def = pf_profcfg_new_default();
	struct pf_profcfg *back = roundtrip(def, &out);
	/* every key is in the output, defaults filled in */
	static const char head[] = "profiling:\n  enabled: true\n  mode: continuous\n  sampling:\n"
				   "    frequency_hz: 99\n    duration_seconds: 10\n";
	static const char *const must[] = {
	    head,
	    "    include: []\n",
	    "    exclude: []\n",
	    "      threshold_ms: 500\n",
	    "      cooldown_seconds: 300\n",
	    "      max_duration_seconds: 300\n",
	    "    targets: []\n",
	    "  exporters: []\n",
	    "    max_cpu_percent: 1.0\n",
	    "    queue_bytes: 67108864\n",
	    "labels: {}\n",
	};
	for (size_t i = 0; i < sizeof(must) / sizeof(must[0]); i++) {
		if (!strstr(pf_buf_str(&out), must[i]))
			print_error("missing '%s' in:\n%s\n", must[i], pf_buf_str(&out));
		assert_non_null(strstr(pf_buf_str(&out), must[i]));
	}
	pf_profcfg_free(back);

	struct pf_profcfg *ex = parse_ok(arch_example);
	back = roundtrip(ex, &out);
	assert_non_null(strstr(pf_buf_str(&out), "  exporters:\n    - type: otlp_http\n"
						 "      endpoint: \"http://collector:4318/"));
	assert_non_null(strstr(pf_buf_str(&out), "    - type: file\n      path: "
						 "\"/var/lib/profleet/out\"\n      max_bytes: "
						 "268435456\n"));
	assert_null(strstr(pf_buf_str(&out), "type: file\n      endpoint")); /* N/A keys omitted */
	pf_profcfg_free(back);

	/* exporters[].tls: set keys come back; unset strings and an absent block are left out */
	struct pf_profcfg *tc = parse_ok(
	    "profiling:\n  exporters:\n"
	    "    - {type: otlp_http, endpoint: 'https://c:4318', tls: {ca_file: /etc/ca.pem,\n"
	    "       cert_file: /etc/c.pem, key_file: /etc/k.pem, server_name: profleet.test}}\n"
	    "    - {type: pyroscope, endpoint: 'https://p', tls: {insecure_skip_verify: true}}\n"
	    "    - {type: otlp_http, endpoint: 'https://q', tls: {}}\n"
	    "    - {type: otlp_http, endpoint: 'https://r'}\n");
	assert_true(tc->exporters[0].tls.present);
	assert_string_equal(tc->exporters[0].tls.ca_file, "/etc/ca.pem");
	assert_string_equal(tc->exporters[0].tls.cert_file, "/etc/c.pem");
	assert_string_equal(tc->exporters[0].tls.key_file, "/etc/k.pem");
	assert_string_equal(tc->exporters[0].tls.server_name, "profleet.test");
	assert_false(tc->exporters[0].tls.insecure_skip_verify);
	assert_true(tc->exporters[1].tls.insecure_skip_verify);
	assert_null(tc->exporters[1].tls.ca_file);
	assert_true(tc->exporters[2].tls.present);
	assert_false(tc->exporters[3].tls.present);
	back = roundtrip(tc, &out);
	static const char *const tls_must[] = {
	    "      tls:\n        ca_file: \"/etc/ca.pem\"\n        cert_file: \"/etc/c.pem\"\n"
	    "        key_file: \"/etc/k.pem\"\n        insecure_skip_verify: false\n"
	    "        server_name: \"profleet.test\"\n",
	    "      tls:\n        insecure_skip_verify: true\n",
	    "      endpoint: \"https://q\"\n",
	};
	for (size_t i = 0; i < sizeof(tls_must) / sizeof(tls_must[0]); i++) {
		if (!strstr(pf_buf_str(&out), tls_must[i]))
			print_error("missing '%s' in:\n%s\n", tls_must[i], pf_buf_str(&out));
		assert_non_null(strstr(pf_buf_str(&out), tls_must[i]));
	}
	/* 3 tls blocks for 4 exporters: the absent one stays absent, the empty one is kept */
	size_t n_tls = 0;
	for (const char *p = pf_buf_str(&out); (p = strstr(p, "tls:")); p++)
		n_tls++;
	assert_int_equal(n_tls, 3);
	assert_null(strstr(pf_buf_str(&out), "null"));
	assert_true(back->exporters[2].tls.present);
	assert_false(back->exporters[3].tls.present);
	/* equality sees every tls key and the block's presence */
	back->exporters[3].tls.present = true;
	assert_false(pf_profcfg_equal(tc, back));
	back->exporters[3].tls.present = false;
	back->exporters[1].tls.insecure_skip_verify = false;
	assert_false(pf_profcfg_equal(tc, back));
	back->exporters[1].tls.insecure_skip_verify = true;
	back->exporters[0].tls.server_name[0] ^= 1;
	assert_false(pf_profcfg_equal(tc, back));
	back->exporters[0].tls.server_name[0] ^= 1;
	free(back->exporters[0].tls.key_file);
	back->exporters[0].tls.key_file = xstrdup("/etc/k2.pem");
	assert_false(pf_profcfg_equal(tc, back));
	free(back->exporters[0].tls.ca_file);
	back->exporters[0].tls.ca_file = NULL;
	assert_false(pf_profcfg_equal(tc, back));
	pf_profcfg_free(back);
	pf_profcfg_free(tc);

	/* strings that need escaping survive: quotes, backslashes, controls, YAML line breaks
	 * (NEL, LS, PS), BOM, non-ASCII, YAML-significant text, leading/trailing spaces */
	static const char *const nasty[] = {
	    "",
	    "plain",
	    "with \"quotes\" and \\back\\slashes",
	    "tab\there",
	    "new\nline\r\n",
	    "\x01\x1f\x7f ctl",
	    "\xc2\x85 NEL \xe2\x80\xa8 LS \xe2\x80\xa9 PS \xef\xbb\xbf BOM",
	    "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x94\xa5",
	    "- not a list",
	    "key: value",
	    "# not a comment",
	    "&anchor *alias !tag",
	    "true",
	    "null",
	    "~",
	    "123",
	    "  spaces  ",
	    "'single'",
	};
	struct pf_profcfg *c = pf_profcfg_new_default();
	c->n_labels = sizeof(nasty) / sizeof(nasty[0]);
	c->labels = calloc(c->n_labels, sizeof(*c->labels));
	assert_non_null(c->labels);
	for (size_t i = 0; i < c->n_labels; i++) {
		char k[32];
		snprintf(k, sizeof(k), "%s%zu", i % 2 ? "k." : "k", i);
		c->labels[i].key = xstrdup(k);
		c->labels[i].value = xstrdup(nasty[i]);
	}
	c->n_include = 1;
	c->include = calloc(1, sizeof(*c->include));
	c->include[0].key = xstrdup("service.name");
	c->include[0].match = PF_MATCH_REGEXP;
	c->include[0].value = xstrdup("^a\\.b\"c$");
	c->n_exporters = 2;
	c->exporters = calloc(2, sizeof(*c->exporters));
	c->exporters[0].type = PF_EXPORTER_PYROSCOPE;
	c->exporters[0].endpoint = xstrdup("https://p:4040/a?b=\"c\"");
	c->exporters[0].compression = PF_COMPRESSION_NONE;
	c->exporters[0].timeout_seconds = 300;
	c->exporters[0].n_headers = 1;
	c->exporters[0].headers = calloc(1, sizeof(struct pf_kv_str));
	c->exporters[0].headers[0].key = xstrdup("X-Scope-OrgID");
	c->exporters[0].headers[0].value = xstrdup("tenant \xe2\x80\xa8 1");
	c->exporters[0].max_bytes = (uint64_t)256 << 20; /* unused by pyroscope: default */
	c->exporters[1].type = PF_EXPORTER_FILE;
	c->exporters[1].path = xstrdup("/tmp/prof iles");
	c->exporters[1].max_bytes = (uint64_t)1 << 40;
	c->exporters[1].compression = PF_COMPRESSION_GZIP;
	c->exporters[1].timeout_seconds = 10;
	c->mode = PF_MODE_TRIGGERED;
	c->limits.max_cpu_percent = 0.1 + 0.2; /* needs 17 digits */
	c->limits.queue_bytes = (uint64_t)4 << 30;
	back = roundtrip(c, &out);
	assert_string_equal(back->labels[6].value, nasty[6]);
	assert_true(back->limits.max_cpu_percent == 0.1 + 0.2);
	pf_profcfg_free(back);

	/* equality notices each kind of difference */
	struct pf_profcfg *d = roundtrip(c, &out);
	assert_true(pf_profcfg_equal(c, d));
	d->labels[3].value[0] ^= 1;
	assert_false(pf_profcfg_equal(c, d));
	d->labels[3].value[0] ^= 1;
	d->limits.max_cpu_percent = 1.0;
	assert_false(pf_profcfg_equal(c, d));
	d->limits.max_cpu_percent = c->limits.max_cpu_percent;
	d->exporters[1].max_bytes--;
	assert_false(pf_profcfg_equal(c, d));
	d->exporters[1].max_bytes++;
	d->n_labels--;
	assert_false(pf_profcfg_equal(c, d));
	d->n_labels++;
	/* maps compare as sets: order does not matter */
	struct pf_kv_str t = d->labels[0];
	d->labels[0] = d->labels[1];
	d->labels[1] = t;
	assert_true(pf_profcfg_equal(c, d));
	assert_false(pf_profcfg_equal(c, NULL));
	assert_true(pf_profcfg_equal(NULL, NULL));
	pf_profcfg_free(d);

	/* a string that is not UTF-8 cannot be emitted; the buffer is left as it was */
	free(c->labels[0].value);
	c->labels[0].value = xstrdup("bad \xff byte");
	pf_buf_reset(&out);
	pf_buf_append_str(&out, "keep");
	assert_int_equal(pf_profcfg_emit_yaml(c, &out), -EINVAL);
	assert_string_equal(pf_buf_str(&out), "keep");
	/* a capped buffer gives -E2BIG */
	struct pf_buf small;
	pf_buf_init(&small, 64);
	assert_int_equal(pf_profcfg_emit_yaml(ex, &small), -E2BIG);
	pf_buf_release(&small);

	pf_profcfg_free(c);
	pf_profcfg_free(ex);
	pf_profcfg_free(def);
	pf_buf_release(&out);
}

/* Every prefix of valid documents, and every single-byte mutation of one, either parses or
 * fails with -EINVAL and a message; nothing leaks (ASan) and nothing crashes. */
static void test_truncations(void **state)
{
	struct pf_buf emitted;
	pf_buf_init(&emitted, 0);
	struct pf_profcfg *ex = parse_ok(arch_example);
	assert_int_equal(pf_profcfg_emit_yaml(ex, &emitted), 0);
	pf_profcfg_free(ex);
	const char *docs[] = {arch_example, pf_buf_str(&emitted)};
	size_t ok = 0, bad = 0;
	for (size_t d = 0; d < 2; d++) {
		size_t n = strlen(docs[d]);
		for (size_t len = 0; len <= n; len++) {
			char *copy = malloc(len + 1); /* exact size: ASan sees over-reads */
			assert_non_null(copy);
			memcpy(copy, docs[d], len);
			struct pf_profcfg *cfg = NULL;
			struct pf_error err = {0};
			int r = pf_profcfg_parse(copy, len, &cfg, &err);
			if (r == 0) {
				assert_non_null(cfg);
				ok++;
			} else {
				assert_int_equal(r, -EINVAL);
				assert_null(cfg);
				assert_true(err.msg[0] != 0);
				bad++;
			}
			pf_profcfg_free(cfg);
			free(copy);
		}
	}
	/* mutations: a handful of YAML-significant bytes at every position of the example */
	static const char subst[] = {'{', '}', '[',  ']',  ':',	   '-',	 '&', '*',
				     '!', '"', '\'', '\n', ' ',	   '\t', '#', '|',
				     '>', '%', '@',  '\0', '\xff', 'x',	 '9'};
	size_t n = strlen(arch_example);
	char *copy = malloc(n);
	assert_non_null(copy);
	for (size_t pos = 0; pos < n; pos++) {
		for (size_t s = 0; s < sizeof(subst); s++) {
			memcpy(copy, arch_example, n);
			copy[pos] = subst[s];
			struct pf_profcfg *cfg = NULL;
			struct pf_error err = {0};
			int r = pf_profcfg_parse(copy, n, &cfg, &err);
			assert_true(r == 0 || r == -EINVAL);
			assert_true(r == 0 ? cfg != NULL : (cfg == NULL && err.msg[0]));
			if (r == 0) {
				/* anything accepted must round trip too */
				struct pf_buf out;
				pf_buf_init(&out, 0);
				assert_int_equal(pf_profcfg_emit_yaml(cfg, &out), 0);
				struct pf_profcfg *back = parse_ok(pf_buf_str(&out));
				assert_true(pf_profcfg_equal(cfg, back));
				pf_profcfg_free(back);
				pf_buf_release(&out);
			}
			pf_profcfg_free(cfg);
		}
	}
	free(copy);
	assert_true(ok > 0 && bad > 0);
	pf_buf_release(&emitted);
}

static void test_deep_nesting(void **state)
{
	/* deep nesting is refused at the first unexpected level, before libyaml's stacks grow */
	size_t depth = 100000;
	char *doc = malloc(depth + 32);
	assert_non_null(doc);
	size_t o = (size_t)snprintf(doc, 32, "profiling: {sampling: ");
	memset(doc + o, '[', depth);
	doc[o + depth] = 0;
	expect_fail(doc, strlen(doc), -EINVAL, "profiling.sampling",
		    "must be a mapping, got a list");
	free(doc);
}

static void test_doc_markdown(void **state)
{
	struct pf_buf md;
	pf_buf_init(&md, 0);
	assert_int_equal(pf_profcfg_doc_markdown(&md), 0);
	const char *s = pf_buf_str(&md);
	static const char *const rows[] = {
	    "| `profiling.sampling.frequency_hz` | integer | `99` | 1..1000 |",
	    "| `profiling.mode` | enum | `continuous` | `continuous`, `triggered` |",
	    "| `profiling.exporters[].endpoint` | string | *required* |",
	    "| `profiling.limits.max_cpu_percent` | number | `1.0` | 0.01..100 |",
	    "| `profiling.limits.queue_bytes` | integer | `67108864` | 65536..4294967296 |",
	    "| `labels` | map string → string (at most 64) | `{}` |",
	    "| `profiling.filters.exclude[].key` |",
	    "| `profiling.pprof.targets[].attributes` |",
	    "| `profiling.triggers.on_demand.max_duration_seconds` |",
	    "| `profiling.exporters[].tls` | mapping |  |  | TLS settings",
	    "| `profiling.exporters[].tls.ca_file` | string | *unset* | a file path, at most 4096 "
	    "bytes |",
	    "| `profiling.exporters[].tls.insecure_skip_verify` | bool | `false` |",
	    "| `profiling.exporters[].headers_from_file` | map string → string (at most 32) | `{}` |",
	    "| `profiling.triggers.slow_span.listen` | string | `127.0.0.1:4328` |",
	    "| `profiling.triggers.slow_span.profile_type` | enum | `wall` | `cpu`, `off_cpu`, "
	    "`wall` |",
	    "| `profiling.triggers.error_span.max_per_minute` | integer | `6` | 1..600 |",
	    "| `profiling.relabel[].action` | enum | `replace` | `replace`, `drop`, `keep`, "
	    "`labeldrop` |",
	    "| `profiling.redact_secrets` | bool | `true` |",
	    "| `profiling.alloc.sample_bytes` | integer | `524288` | 1024..1073741824 |",
	    "| `profiling.alloc.max_calls_per_second` | integer | `1000000` | 1000..100000000 |",
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		if (!strstr(s, rows[i]))
			print_error("missing row '%s'\n", rows[i]);
		assert_non_null(strstr(s, rows[i]));
	}
	/* every key of the emitted default config has a row: count leaf lines vs rows */
	size_t n_rows = 0;
	for (const char *p = s; (p = strstr(p, "\n| `")); p++)
		n_rows++;
	assert_int_equal(n_rows, 83);
	pf_buf_release(&md);
}

/* Header values are secrets: the redacted emit shows the placeholder and nothing of the
 * value; headers_from_file (paths) is shown and round-trips through the full emit. */
static void test_secrets(void **state)
{
	(void)state;
	static const char doc[] =
	    "profiling:\n  exporters:\n"
	    "    - type: otlp_http\n      endpoint: 'https://h/v1development/profiles'\n"
	    "      headers: {Authorization: 'Bearer s3cr3t-A', X-Scope: tenant-s3cr3t-B}\n"
	    "      headers_from_file: {X-Api-Key: /run/secrets/key}\n"
	    "    - type: file\n      path: /var/x\n";
	struct pf_profcfg *c = parse_ok(doc);
	assert_int_equal(c->exporters[0].n_headers_from_file, 1);
	assert_string_equal(c->exporters[0].headers_from_file[0].key, "X-Api-Key");
	assert_string_equal(c->exporters[0].headers_from_file[0].value, "/run/secrets/key");

	struct pf_buf full, red, again;
	pf_buf_init(&full, 0);
	pf_buf_init(&red, 0);
	pf_buf_init(&again, 0);
	assert_int_equal(pf_profcfg_emit_yaml(c, &full), 0);
	assert_non_null(strstr(pf_buf_str(&full), "s3cr3t-A"));
	struct pf_profcfg *back = parse_ok(pf_buf_str(&full));
	assert_true(pf_profcfg_equal(c, back));
	pf_profcfg_free(back);

	assert_int_equal(pf_profcfg_emit_yaml_redacted(c, &red), 0);
	const char *r = pf_buf_str(&red);
	assert_null(strstr(r, "s3cr3t"));
	assert_non_null(strstr(r, "\"Authorization\": \"[REDACTED]\""));
	assert_non_null(strstr(r, "\"X-Scope\": \"[REDACTED]\""));
	assert_non_null(strstr(r, "\"X-Api-Key\": \"/run/secrets/key\""));
	/* The redacted view is no document to store ... */
	struct pf_profcfg *bad = NULL;
	struct pf_error err = {0};
	assert_int_equal(pf_profcfg_parse(r, red.len, &bad, &err), -EINVAL);
	assert_null(bad);
	assert_string_equal(err.path, "profiling.exporters[0].headers.Authorization");
	/* ... but redacting it again gives the same view, and so does redacting the source. */
	assert_int_equal(pf_profcfg_redact_yaml(r, red.len, &again), 0);
	assert_string_equal(pf_buf_str(&again), r);
	pf_buf_reset(&again);
	assert_int_equal(pf_profcfg_redact_yaml(doc, strlen(doc), &again), 0);
	assert_string_equal(pf_buf_str(&again), r);
	/* No secret: the text as it is. */
	pf_buf_reset(&again);
	static const char plain[] = "# a comment\nprofiling: {exporters: [{type: otlp_http, "
				    "endpoint: 'http://h', headers_from_file: {A: /a}}]}\n";
	assert_int_equal(pf_profcfg_redact_yaml(plain, strlen(plain), &again), 0);
	assert_string_equal(pf_buf_str(&again), plain);
	/* Not a config: an error, nothing appended. */
	pf_buf_reset(&again);
	assert_int_equal(pf_profcfg_redact_yaml("profiling: [", 12, &again), -EINVAL);
	assert_int_equal(again.len, 0);
	pf_buf_release(&full);
	pf_buf_release(&red);
	pf_buf_release(&again);
	pf_profcfg_free(c);
}

/* The example in docs/config.md is a valid document (the generator checks it too). */
static void test_docs_example(void **state)
{
	const char *src = getenv("PF_SOURCE_DIR");
	if (!src)
		skip();
	char path[4096];
	snprintf(path, sizeof(path), "%s/docs/config.md", src);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	struct pf_buf b;
	pf_buf_init(&b, 0);
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		assert_int_equal(pf_buf_append(&b, chunk, n), 0);
	fclose(f);
	const char *start = strstr(pf_buf_str(&b), "```yaml\n");
	assert_non_null(start);
	start += 8;
	const char *end = strstr(start, "```");
	assert_non_null(end);
	struct pf_profcfg *cfg = NULL;
	struct pf_error err = {0};
	int r = pf_profcfg_parse(start, (size_t)(end - start), &cfg, &err);
	if (r)
		print_error("%s\n", err.msg);
	assert_int_equal(r, 0);
	assert_int_equal(cfg->n_exporters, 3);
	assert_int_equal(cfg->n_labels, 2);
	pf_profcfg_free(cfg);
	pf_buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),	 cmocka_unit_test(test_arch_example),
	    cmocka_unit_test(test_values),	 cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_span_triggers),
	    cmocka_unit_test(test_caps),	 cmocka_unit_test(test_roundtrip),
	    cmocka_unit_test(test_truncations),	 cmocka_unit_test(test_deep_nesting),
	    cmocka_unit_test(test_doc_markdown), cmocka_unit_test(test_docs_example),
	    cmocka_unit_test(test_secrets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
