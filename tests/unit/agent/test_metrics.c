/* test_metrics.c — agent/endpoints/metrics.c: --metrics-listen syntax, the Prometheus text rendering
 * (checked line by line by a strict parser of the 0.0.4 text format), and the HTTP server on
 * loopback with a real data plane (no sampler) and health registry; plus the data plane's
 * metrics snapshot (agent_dataplane_metrics). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strcasestr */
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dataplane.h"
#include "endpoints/metrics.h"
#include "health.h"
#include "pf/buf.h"
#include "pf/profcfg.h"

/* ---- a strict exposition-format checker ------------------------------------------------ */

#define MAX_FAMILIES 256

struct fam {
	char name[128];
	char type[16];
	bool help, samples_done;
};

struct checked {
	struct fam f[MAX_FAMILIES];
	size_t n;
	size_t samples;
	char err[512];
};

static bool name_char(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
	       (!first && c >= '0' && c <= '9');
}

/* Reads a metric or label name; returns its length (0 when none). */
static size_t read_name(const char *p)
{
	size_t n = 0;
	while (p[n] && name_char(p[n], n == 0))
		n++;
	return n;
}

static struct fam *find_fam(struct checked *c, const char *name, size_t len)
{
	for (size_t i = 0; i < c->n; i++)
		if (strlen(c->f[i].name) == len && !memcmp(c->f[i].name, name, len))
			return &c->f[i];
	return NULL;
}

static bool ends_with(const char *s, size_t len, const char *suffix)
{
	size_t l = strlen(suffix);
	return len >= l && !memcmp(s + len - l, suffix, l);
}

static int bad_line(struct checked *c, int line, const char *fmt, ...) PF_PRINTF(3, 4);
static int bad_line(struct checked *c, int line, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(c->err, sizeof(c->err), "line %d: ", line);
	va_start(ap, fmt);
	vsnprintf(c->err + n, sizeof(c->err) - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

/* Checks one sample line "name{l="v",...} value". */
static int check_sample(struct checked *c, int ln, const char *s, struct fam **cur)
{
	size_t nl = read_name(s);
	if (!nl)
		return bad_line(c, ln, "no metric name");
	if (strncmp(s, "profleet_agent_", 15))
		return bad_line(c, ln, "name without the profleet_agent_ prefix");
	/* the family: the name itself, or a histogram's base */
	struct fam *f = find_fam(c, s, nl);
	if (!f) {
		static const char *suf[] = {"_bucket", "_sum", "_count"};
		for (size_t i = 0; i < 3 && !f; i++)
			if (ends_with(s, nl, suf[i])) {
				f = find_fam(c, s, nl - strlen(suf[i]));
				if (f && strcmp(f->type, "histogram"))
					f = NULL;
			}
	}
	if (!f)
		return bad_line(c, ln, "sample of a family without TYPE");
	if (f->samples_done)
		return bad_line(c, ln, "family %s is not contiguous", f->name);
	if (*cur && *cur != f)
		(*cur)->samples_done = true;
	*cur = f;
	const char *p = s + nl;
	if (*p == '{') {
		p++;
		for (;;) {
			size_t ll = read_name(p);
			if (!ll)
				return bad_line(c, ln, "bad label name");
			p += ll;
			if (*p++ != '=' || *p++ != '"')
				return bad_line(c, ln, "expected =\" after a label name");
			while (*p && *p != '"') {
				if (*p == '\\') {
					p++;
					if (*p != '\\' && *p != '"' && *p != 'n')
						return bad_line(c, ln,
								"bad escape in a label value");
				} else if (*p == '\n') {
					return bad_line(c, ln, "raw newline in a label value");
				}
				p++;
			}
			if (*p++ != '"')
				return bad_line(c, ln, "unterminated label value");
			if (*p == ',') {
				p++;
				continue;
			}
			if (*p++ != '}')
				return bad_line(c, ln, "expected , or } after a label");
			break;
		}
	}
	if (*p++ != ' ')
		return bad_line(c, ln, "expected one space before the value");
	if (!strcmp(p, "+Inf") || !strcmp(p, "-Inf") || !strcmp(p, "NaN"))
		return 0;
	char *end;
	errno = 0;
	strtod(p, &end);
	if (end == p || *end || errno)
		return bad_line(c, ln, "bad value '%s'", p);
	c->samples++;
	return 0;
}

/* Parses text line by line; 0 or -1 with c->err. */
static int check_exposition(const char *text, struct checked *c)
{
	memset(c, 0, sizeof(*c));
	struct fam *cur = NULL;
	int ln = 0;
	const char *p = text;
	if (!*p)
		return bad_line(c, 0, "empty");
	while (*p) {
		const char *nlp = strchr(p, '\n');
		if (!nlp)
			return bad_line(c, ln + 1, "last line without a newline");
		char line[2048];
		size_t len = (size_t)(nlp - p);
		ln++;
		if (len >= sizeof(line))
			return bad_line(c, ln, "line too long");
		memcpy(line, p, len);
		line[len] = '\0';
		p = nlp + 1;
		if (!len)
			return bad_line(c, ln, "empty line");
		if (!strncmp(line, "# HELP ", 7) || !strncmp(line, "# TYPE ", 7)) {
			bool help = line[2] == 'H';
			const char *n = line + 7;
			size_t nl = read_name(n);
			if (!nl || n[nl] != ' ' || !n[nl + 1])
				return bad_line(c, ln, "bad HELP/TYPE line");
			struct fam *f = find_fam(c, n, nl);
			if (help) {
				if (f)
					return bad_line(c, ln, "second HELP for %.*s", (int)nl, n);
				if (c->n == MAX_FAMILIES)
					return bad_line(c, ln, "too many families");
				f = &c->f[c->n++];
				memcpy(f->name, n, nl);
				f->help = true;
				if (cur)
					cur->samples_done = true;
				cur = NULL;
				continue;
			}
			if (!f || f->type[0])
				return bad_line(c, ln, "TYPE without HELP before it, or twice");
			const char *t = n + nl + 1;
			if (strcmp(t, "counter") && strcmp(t, "gauge") && strcmp(t, "histogram"))
				return bad_line(c, ln, "unknown type '%s'", t);
			if (!strcmp(t, "counter") && !ends_with(n, nl, "_total"))
				return bad_line(c, ln, "counter %.*s does not end in _total",
						(int)nl, n);
			if (strcmp(t, "counter") && ends_with(n, nl, "_total"))
				return bad_line(c, ln, "%s %.*s ends in _total", t, (int)nl, n);
			snprintf(f->type, sizeof(f->type), "%s", t);
			continue;
		}
		if (line[0] == '#')
			return bad_line(c, ln, "unexpected comment");
		if (check_sample(c, ln, line, &cur) < 0)
			return -1;
	}
	for (size_t i = 0; i < c->n; i++)
		if (!c->f[i].type[0])
			return bad_line(c, 0, "family %s has no TYPE", c->f[i].name);
	return 0;
}

/* The value of the sample whose line starts with `series ` (name and labels exactly). */
static bool value_of(const char *text, const char *series, double *out)
{
	size_t l = strlen(series);
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (!strncmp(p, series, l) && p[l] == ' ') {
			*out = strtod(p + l + 1, NULL);
			return true;
		}
	}
	return false;
}

static double must_value(const char *text, const char *series)
{
	double v = -1;
	if (!value_of(text, series, &v))
		fail_msg("series %s missing in:\n%s", series, text);
	return v;
}

/* ---- --metrics-listen ---------------------------------------------------------------------- */

static void test_listen_parse(void **unused)
{
	(void)unused;
	struct agent_listen_addr l;
	struct pf_error err = {0};

	assert_int_equal(agent_listen_addr_parse("127.0.0.1:9464", &l, &err), 0);
	assert_string_equal(l.host, "127.0.0.1");
	assert_int_equal(l.port, 9464);
	assert_false(l.v6);
	assert_int_equal(agent_listen_addr_parse("[::1]:9464", &l, &err), 0);
	assert_string_equal(l.host, "::1");
	assert_true(l.v6);
	assert_int_equal(agent_listen_addr_parse("localhost:0", &l, &err), 0);
	assert_string_equal(l.host, "127.0.0.1");
	assert_int_equal(l.port, 0);
	assert_int_equal(agent_listen_addr_parse(":9464", &l, &err), 0);
	assert_string_equal(l.host, "");
	assert_int_equal(agent_listen_addr_parse("*:9464", &l, &err), 0);
	assert_string_equal(l.host, "");
	assert_int_equal(agent_listen_addr_parse("[::]:65535", &l, &err), 0);
	assert_string_equal(l.host, "");
	assert_true(l.v6);

	static const char *bad[] = {"",
				    "9464",
				    "127.0.0.1",
				    "127.0.0.1:",
				    "127.0.0.1:65536",
				    "127.0.0.1:-1",
				    "127.0.0.1:9x",
				    "::1:9464",
				    "[::1]9464",
				    "[::1:9464",
				    "example.com:9464",
				    "300.1.1.1:80",
				    "[127.0.0.1]:80",
				    "127.0.0.1:+80"};
	for (size_t i = 0; i < PF_ARRAY_SIZE(bad); i++) {
		err = (struct pf_error){0};
		if (agent_listen_addr_parse(bad[i], &l, &err) != -EINVAL)
			fail_msg("'%s' accepted", bad[i]);
		assert_non_null(strstr(err.msg, "--metrics-listen"));
	}
}

static void test_escape(void **unused)
{
	(void)unused;
	char out[64];
	assert_int_equal(agent_metrics_escape_label(out, sizeof(out), "a\"b\\c\nd"), 10);
	assert_string_equal(out, "a\\\"b\\\\c\\nd");
	/* truncation never splits an escape and always terminates */
	assert_int_equal(agent_metrics_escape_label(out, 3, "\\\\"), 2);
	assert_string_equal(out, "\\\\");
	assert_int_equal(agent_metrics_escape_label(out, 2, "\\"), 0);
	assert_string_equal(out, "");
}

/* ---- rendering ----------------------------------------------------------------------------- */

static struct agent_dataplane_metrics *synthetic(void)
{
	struct agent_dataplane_metrics *m = calloc(1, sizeof(*m));
	assert_non_null(m);
	m->refreshed_unix_ns = 1;
	m->counters = (struct agent_dataplane_counters){.windows = 7,
							.pprof_windows = 3,
							.exports = 20,
							.dropped = 1,
							.encode_errors = 2,
							.profile_bytes = 123456,
							.last_profile_bytes = 4096};
	m->overhead_pct = 0.25;
	m->has_sampler = true;
	m->sampler.running = true;
	m->sampler.frequency_hz = 99;
	m->sampler.n_cpus = 2;
	m->sampler.samples = 1000;
	m->sampler.lost_kernel = 5;
	m->sampler.lost_user = 6;
	m->sampler.bpf_stats_enabled = true;
	static const char *progs[] = {"do_sample", "handle_exec", "handle_fork", "handle_exit"};
	for (int i = 0; i < PF_SAMPLER_N_PROGS; i++) {
		snprintf(m->progs[i].name, sizeof(m->progs[i].name), "%s", progs[i % 4]);
		m->progs[i].run_time_ns = 1500000000ull * (uint64_t)(i + 1);
		m->progs[i].run_cnt = 10u * (uint64_t)(i + 1);
	}
	m->n_exporters = 2;
	m->ex[0] =
	    (struct agent_dataplane_exporter_metrics){.index = 0, .type = "file", .running = true};
	m->ex[0].st.confirmed = 4;
	m->ex[0].st.sent = 4;
	m->ex[0].st.latency_buckets[0] = 3;
	m->ex[0].st.latency_buckets[AGENT_EXPORTER_LATENCY_BUCKETS] = 1; /* over 30 s */
	m->ex[0].st.latency_count = 4;
	m->ex[0].st.latency_sum_us = 31000500;
	m->ex[0].st.last_latency_ms = 1500;
	m->ex[1] = (struct agent_dataplane_exporter_metrics){
	    .index = 1, .type = "otlp_http", .running = false};
	m->ex[1].st.last_http_status = 503;
	m->n_targets = 1;
	m->pt[0] = (struct agent_dataplane_target_metrics){.index = 0,
							   .type = "cpu",
							   .active = true,
							   .scrapes_ok = 9,
							   .scrapes_failed = 2,
							   .last_duration_ms = 1200};
	m->guard = (struct agent_guard_state){.configured_hz = 99,
					      .hz = 49,
					      .level = 1,
					      .throttled = true,
					      .measured = true,
					      .cpu_percent = 1.4,
					      .max_cpu_percent = 1.0,
					      .max_memory_mb = 64,
					      .steps_down = 3,
					      .steps_up = 2};
	m->rate.limit = 60;
	m->rate.used = 12;
	m->rate.refused[AGENT_SRC_PPROF] = 5;
	m->has_high_cpu = true;
	m->high_cpu = (struct agent_high_cpu_stats){.tracked = 17,
						    .over = 1,
						    .host_percent = 35.5,
						    .fired = 4,
						    .host_fired = 1,
						    .held = 9,
						    .last_update_ns = 250000};
	m->counters.high_cpu_captures = 3;
	return m;
}

static void test_render(void **unused)
{
	(void)unused;
	struct agent_dataplane_metrics *m = synthetic();
	struct agent_health *h = agent_health_new(1700000000ull * 1000000000ull);
	assert_non_null(h);
	assert_int_equal(agent_health_register(h, "config"), 0);
	assert_int_equal(agent_health_register(h, "we\"ird\\comp"), 0);
	assert_int_equal(agent_health_set(h, "we\"ird\\comp", false, "x", "y"), 0);
	struct pf_health tree;
	assert_int_equal(agent_health_build(h, &tree), 0);
	struct agent_self_usage proc = {.cpu_seconds = 1.25, .rss_bytes = 1 << 20};
	struct agent_metrics_input in = {
	    .version = "1.2.3", .proc = &proc, .dp = m, .health = &tree};
	struct pf_buf b;
	pf_buf_init(&b, AGENT_METRICS_MAX_BYTES);
	assert_int_equal(agent_metrics_render(&in, &b), 0);
	assert_int_equal(pf_buf_putc(&b, 0), 0);
	const char *t = (const char *)b.data;

	struct checked c;
	if (check_exposition(t, &c) < 0)
		fail_msg("%s\n%s", c.err, t);
	assert_true(c.samples > 100);

	assert_true(must_value(t, "profleet_agent_info{version=\"1.2.3\"}") == 1);
	assert_true(must_value(t, "profleet_agent_start_time_seconds") == 1700000000.0);
	assert_true(must_value(t, "profleet_agent_cpu_seconds_total") == 1.25);
	assert_true(must_value(t, "profleet_agent_resident_memory_bytes") == 1048576);
	assert_true(must_value(t, "profleet_agent_overhead_cpu_percent") == 0.25);
	assert_true(must_value(t, "profleet_agent_profiles_collected_total{source=\"ebpf\"}") == 7);
	assert_true(must_value(t, "profleet_agent_profiles_collected_total{source=\"pprof\"}") ==
		    3);
	assert_true(must_value(t, "profleet_agent_profile_bytes_total") == 123456);
	assert_true(must_value(t, "profleet_agent_profile_last_size_bytes") == 4096);
	assert_true(must_value(t, "profleet_agent_profiles_dropped_total") == 1);
	assert_true(must_value(t, "profleet_agent_encode_errors_total") == 2);
	assert_true(must_value(t, "profleet_agent_sampler_samples_total") == 1000);
	assert_true(
	    must_value(t, "profleet_agent_sampler_lost_samples_total{reason=\"ring_buffer\"}") ==
	    5);
	assert_true(
	    must_value(t, "profleet_agent_sampler_lost_samples_total{reason=\"window_full\"}") ==
	    6);
	assert_true(
	    must_value(t, "profleet_agent_bpf_run_time_seconds_total{prog=\"do_sample\"}") == 1.5);
	assert_true(must_value(t, "profleet_agent_bpf_run_count_total{prog=\"handle_exit\"}") ==
		    40);
	assert_true(must_value(t, "profleet_agent_exporter_confirmed_total{exporter=\"0\","
				  "type=\"file\"}") == 4);
	assert_true(
	    must_value(t, "profleet_agent_exporter_up{exporter=\"1\",type=\"otlp_http\"}") == 0);
	assert_true(must_value(t, "profleet_agent_exporter_last_http_status{exporter=\"1\","
				  "type=\"otlp_http\"}") == 503);
	assert_true(must_value(t, "profleet_agent_exporter_last_latency_seconds{exporter=\"0\","
				  "type=\"file\"}") == 1.5);
	/* histogram: cumulative buckets, +Inf == count, sum in seconds */
	const char *hb = "profleet_agent_exporter_export_duration_seconds_bucket{exporter=\"0\","
			 "type=\"file\",le=";
	char series[256];
	snprintf(series, sizeof(series), "%s\"0.001\"}", hb);
	assert_true(must_value(t, series) == 3);
	snprintf(series, sizeof(series), "%s\"30\"}", hb);
	assert_true(must_value(t, series) == 3);
	snprintf(series, sizeof(series), "%s\"+Inf\"}", hb);
	assert_true(must_value(t, series) == 4);
	assert_true(must_value(t, "profleet_agent_exporter_export_duration_seconds_count{exporter="
				  "\"0\",type=\"file\"}") == 4);
	assert_true(must_value(t, "profleet_agent_exporter_export_duration_seconds_sum{exporter="
				  "\"0\",type=\"file\"}") == 31.0005);
	assert_true(must_value(t, "profleet_agent_pprof_scrapes_total{target=\"0\",type=\"cpu\","
				  "result=\"ok\"}") == 9);
	assert_true(must_value(t, "profleet_agent_pprof_scrapes_total{target=\"0\",type=\"cpu\","
				  "result=\"failed\"}") == 2);
	assert_true(must_value(t, "profleet_agent_pprof_last_scrape_duration_seconds{target=\"0\","
				  "type=\"cpu\"}") == 1.2);
	assert_true(must_value(t, "profleet_agent_component_healthy{component=\"config\"}") == 1);
	assert_true(
	    must_value(t, "profleet_agent_component_healthy{component=\"we\\\"ird\\\\comp\"}") ==
	    0);
	assert_true(must_value(t, "profleet_agent_healthy") == 0);
	/* overhead guard, rate limit, high_cpu trigger */
	assert_true(must_value(t, "profleet_agent_guard_frequency_hz") == 49);
	assert_true(must_value(t, "profleet_agent_guard_configured_frequency_hz") == 99);
	assert_true(must_value(t, "profleet_agent_guard_throttled") == 1);
	assert_true(must_value(t, "profleet_agent_guard_steps_total{direction=\"down\"}") == 3);
	assert_true(must_value(t, "profleet_agent_guard_steps_total{direction=\"up\"}") == 2);
	assert_true(must_value(t, "profleet_agent_guard_cpu_budget_percent") == 1.0);
	assert_true(must_value(t, "profleet_agent_guard_memory_budget_bytes") == 64 << 20);
	assert_true(must_value(t, "profleet_agent_profiles_rate_limit") == 60);
	assert_true(must_value(t, "profleet_agent_profiles_rate_used") == 12);
	assert_true(must_value(t, "profleet_agent_profiles_rate_limited_total{source=\"pprof\"}") ==
		    5);
	assert_true(
	    must_value(t, "profleet_agent_profiles_rate_limited_total{source=\"slow_span\"}") == 0);
	assert_true(must_value(t, "profleet_agent_high_cpu_watched_processes") == 17);
	assert_true(must_value(t, "profleet_agent_high_cpu_over_threshold_processes") == 1);
	assert_true(must_value(t, "profleet_agent_high_cpu_host_cpu_percent") == 35.5);
	assert_true(must_value(t, "profleet_agent_high_cpu_fired_total{rule=\"process\"}") == 4);
	assert_true(must_value(t, "profleet_agent_high_cpu_fired_total{rule=\"host\"}") == 1);
	assert_true(must_value(t, "profleet_agent_high_cpu_held_total{rule=\"process\"}") == 9);
	assert_true(must_value(t, "profleet_agent_high_cpu_captures_total") == 3);
	assert_true(must_value(t, "profleet_agent_high_cpu_evaluation_seconds") == 0.00025);

	/* every bucket series is non-decreasing */
	double prev = -1, v;
	for (size_t i = 0; i < AGENT_EXPORTER_LATENCY_BUCKETS; i++) {
		snprintf(series, sizeof(series), "%s\"%.15g\"}", hb,
			 (double)agent_exporter_latency_bounds_us[i] / 1e6);
		assert_true(value_of(t, series, &v));
		assert_true(v >= prev);
		prev = v;
	}

	/* without a sampler, data plane or health: only what is there, still well-formed */
	m->has_sampler = false;
	m->n_exporters = 0;
	m->n_targets = 0;
	m->overhead_pct = -1;
	m->has_high_cpu = false;
	m->guard.configured_hz = 0;
	m->rate.limit = 0;
	pf_buf_reset(&b);
	assert_int_equal(agent_metrics_render(&in, &b), 0);
	assert_int_equal(pf_buf_putc(&b, 0), 0);
	t = (const char *)b.data;
	if (check_exposition(t, &c) < 0)
		fail_msg("%s\n%s", c.err, t);
	assert_null(strstr(t, "bpf_run"));
	assert_null(strstr(t, "profleet_agent_exporter_up"));
	assert_null(strstr(t, "export_duration"));
	assert_null(strstr(t, "pprof_"));
	assert_null(strstr(t, "overhead_cpu_percent"));
	assert_null(strstr(t, "guard_"));
	assert_null(strstr(t, "profiles_rate"));
	assert_null(strstr(t, "high_cpu_"));
	assert_true(must_value(t, "profleet_agent_sampler_running") == 0);

	struct agent_metrics_input bare = {.version = NULL};
	pf_buf_reset(&b);
	assert_int_equal(agent_metrics_render(&bare, &b), 0);
	assert_int_equal(pf_buf_putc(&b, 0), 0);
	if (check_exposition((const char *)b.data, &c) < 0)
		fail_msg("%s", c.err);
	pf_buf_release(&b);

	/* a capped buffer: the error comes back, nothing crashes */
	pf_buf_init(&b, 512);
	m->has_sampler = true;
	assert_true(agent_metrics_render(&in, &b) < 0);
	pf_buf_release(&b);

	agent_health_tree_release(&tree);
	agent_health_free(h);
	free(m);
}

/* The checker itself must refuse what the format forbids. */
static void test_checker_refuses(void **unused)
{
	(void)unused;
	static const char *bad[] = {
	    "profleet_agent_x 1\n", /* no TYPE */
	    "# HELP profleet_agent_x h\n# TYPE profleet_agent_x counter\nprofleet_agent_x 1\n",
	    "# HELP profleet_agent_x_total h\n# TYPE profleet_agent_x_total counter\n"
	    "profleet_agent_x_total{a=\"b} 1\n",
	    "# HELP profleet_agent_x_total h\n# TYPE profleet_agent_x_total counter\n"
	    "profleet_agent_x_total{a=\"b\"} one\n",
	    "# HELP profleet_agent_x h\n# TYPE profleet_agent_x gauge\nprofleet_agent_x 1\n"
	    "# HELP profleet_agent_y h\n# TYPE profleet_agent_y gauge\nprofleet_agent_y 1\n"
	    "profleet_agent_x 2\n",
	    "# HELP profleet_agent_x h\n# TYPE profleet_agent_x gauge\nprofleet_agent_x 1",
	    "# HELP other_x h\n# TYPE other_x gauge\nother_x 1\n",
	};
	struct checked c;
	for (size_t i = 0; i < PF_ARRAY_SIZE(bad); i++)
		if (check_exposition(bad[i], &c) == 0)
			fail_msg("checker accepted case %zu", i);
	assert_int_equal(check_exposition("# HELP profleet_agent_x h\n# TYPE profleet_agent_x "
					  "gauge\nprofleet_agent_x{a=\"\\\"\"} 1.5e-06\n",
					  &c),
			 0);
}

/* ---- HTTP ---------------------------------------------------------------------------------- */

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int connect_to(int family, int port)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	memset(&ss, 0, sizeof(ss));
	if (family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		a->sin6_addr = in6addr_loopback;
		sl = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sl = sizeof(*a);
	}
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&ss, sl), 0);
	return fd;
}

struct resp {
	int status;
	char head[2048];
	char *body;
	size_t body_len;
};

/* Sends req on fd and reads one response (Content-Length framed), within 5 s. */
static void http_do(int fd, const char *req, struct resp *r)
{
	memset(r, 0, sizeof(*r));
	size_t rl = strlen(req);
	assert_int_equal(send(fd, req, rl, MSG_NOSIGNAL), (ssize_t)rl);
	size_t cap = 1 << 20, len = 0;
	char *buf = malloc(cap + 1);
	assert_non_null(buf);
	uint64_t deadline = now_ms() + 5000;
	size_t head_len = 0, want = SIZE_MAX;
	while (len < want) {
		uint64_t now = now_ms();
		assert_true(now < deadline);
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		if (poll(&pfd, 1, (int)(deadline - now)) <= 0)
			continue;
		ssize_t n = recv(fd, buf + len, cap - len, 0);
		assert_true(n > 0);
		len += (size_t)n;
		buf[len] = '\0';
		if (!head_len) {
			char *e = strstr(buf, "\r\n\r\n");
			if (!e)
				continue;
			head_len = (size_t)(e - buf) + 4;
			assert_true(head_len < sizeof(r->head));
			memcpy(r->head, buf, head_len);
			r->head[head_len] = '\0';
			char *cl = strcasestr(r->head, "content-length:");
			assert_non_null(cl);
			want = head_len + strtoul(cl + 15, NULL, 10);
			assert_true(want <= cap);
		}
	}
	assert_int_equal(len, want);
	assert_int_equal(sscanf(buf, "HTTP/1.1 %d", &r->status), 1);
	r->body_len = len - head_len;
	r->body = malloc(r->body_len + 1);
	assert_non_null(r->body);
	memcpy(r->body, buf + head_len, r->body_len);
	r->body[r->body_len] = '\0';
	free(buf);
}

static void get(int family, int port, const char *req, struct resp *r)
{
	int fd = connect_to(family, port);
	http_do(fd, req, r);
	close(fd);
}

static struct agent_metrics *server(const char *addr, struct agent_health *h,
				    struct agent_dataplane *d)
{
	struct agent_listen_addr l;
	struct pf_error err = {0};
	assert_int_equal(agent_listen_addr_parse(addr, &l, &err), 0);
	struct agent_metrics *m = agent_metrics_new(&l, h, &err);
	if (!m)
		fail_msg("%s", err.msg);
	assert_int_equal(agent_metrics_start(m, d, &err), 0);
	assert_true(agent_metrics_port(m) > 0);
	return m;
}

static bool ipv6_loopback(void)
{
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	bool ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
}

static void test_server(void **unused)
{
	(void)unused;
	struct agent_health *h = agent_health_new(agent_now_unix_nano());
	assert_non_null(h);
	struct pf_error err = {0};
	struct agent_dataplane_opts o = {.health = h, .no_sampler = true, .metrics = true};
	struct agent_dataplane *d = agent_dataplane_new(&o, &err);
	assert_non_null(d);
	struct agent_metrics *m = server("127.0.0.1:0", h, d);
	int port = agent_metrics_port(m);
	struct resp r;

	/* the worker's first snapshot comes within a poll interval */
	uint64_t deadline = now_ms() + 5000;
	for (;;) {
		get(AF_INET, port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &r);
		assert_int_equal(r.status, 200);
		if (strstr(r.body, "profiles_collected_total"))
			break;
		free(r.body);
		assert_true(now_ms() < deadline);
		usleep(50000);
	}
	assert_non_null(strcasestr(r.head, "content-type: " AGENT_METRICS_CONTENT_TYPE));
	struct checked c;
	if (check_exposition(r.body, &c) < 0)
		fail_msg("%s\n%s", c.err, r.body);
	assert_true(must_value(r.body, "profleet_agent_component_healthy{component=\"sampler\"}") ==
		    1);
	assert_true(must_value(r.body, "profleet_agent_cpu_seconds_total") >= 0);
	assert_true(must_value(r.body, "profleet_agent_resident_memory_bytes") > 0);
	free(r.body);

	/* keep-alive: three requests on one connection, query strings ignored */
	int fd = connect_to(AF_INET, port);
	http_do(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "ok\n");
	free(r.body);
	http_do(fd, "GET /metrics?name[]=x HTTP/1.1\r\nHost: x\r\n\r\n", &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "# TYPE profleet_agent_info gauge\n"));
	free(r.body);
	http_do(fd, "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", &r);
	assert_int_equal(r.status, 404);
	free(r.body);
	close(fd);

	get(AF_INET, port, "GET /metricsx HTTP/1.1\r\nHost: x\r\n\r\n", &r);
	assert_int_equal(r.status, 404);
	free(r.body);
	get(AF_INET, port, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
	    &r);
	assert_int_equal(r.status, 405);
	assert_non_null(strcasestr(r.head, "allow: GET"));
	free(r.body);
	get(AF_INET, port, "DELETE /healthz HTTP/1.1\r\nHost: x\r\n\r\n", &r);
	assert_int_equal(r.status, 405);
	free(r.body);

	/* the port is taken: a clear error, no server */
	char addr[64];
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	struct agent_listen_addr l;
	assert_int_equal(agent_listen_addr_parse(addr, &l, &err), 0);
	err = (struct pf_error){0};
	assert_null(agent_metrics_new(&l, h, &err));
	assert_int_equal(errno, EADDRINUSE);
	assert_int_equal(err.code, -EADDRINUSE);
	assert_non_null(strstr(err.msg, "--metrics-listen: cannot listen on 127.0.0.1:"));
	assert_non_null(strstr(err.msg, "Address already in use"));

	/* an address this host does not have */
	assert_int_equal(agent_listen_addr_parse("192.0.2.1:0", &l, &err), 0);
	err = (struct pf_error){0};
	assert_null(agent_metrics_new(&l, h, &err));
	assert_non_null(strstr(err.msg, "Cannot assign requested address"));

	if (ipv6_loopback()) {
		struct agent_metrics *m6 = server("[::1]:0", h, d);
		get(AF_INET6, agent_metrics_port(m6), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
		    &r);
		assert_int_equal(r.status, 200);
		free(r.body);
		agent_metrics_free(m6);
	}

	agent_metrics_free(m);
	agent_dataplane_free(d);
	agent_health_free(h);
	agent_metrics_free(NULL);
}

/* ---- the data plane's snapshot ------------------------------------------------------------- */

/* The process's own figures, read again and again (statm is opened once, read with pread):
 * the resident set follows a fresh allocation's pages, CPU time only grows. */
static void test_process_read(void **unused)
{
	(void)unused;
	struct agent_self_usage a, b;
	assert_int_equal(agent_self_usage_read(&a), 0);
	assert_true(a.rss_bytes > 0);
	size_t n = 32u << 20;
	char *p = malloc(n);
	assert_non_null(p);
	memset(p, 1, n); /* 32 MiB resident, a few ms of CPU */
	assert_int_equal(agent_self_usage_read(&b), 0);
	assert_true(b.rss_bytes >= a.rss_bytes + (n / 2));
	assert_true(b.cpu_seconds >= a.cpu_seconds);
	free(p);
}

static void test_dataplane_snapshot(void **unused)
{
	(void)unused;
	struct agent_health *h = agent_health_new(agent_now_unix_nano());
	struct pf_error err = {0};
	struct agent_dataplane_metrics *snap = calloc(1, sizeof(*snap));
	assert_non_null(snap);

	/* without opts.metrics there is nothing to copy */
	struct agent_dataplane_opts o = {.health = h, .no_sampler = true};
	struct agent_dataplane *d = agent_dataplane_new(&o, &err);
	assert_non_null(d);
	assert_int_equal(agent_dataplane_metrics(d, snap), -ENOTSUP);
	agent_dataplane_free(d);

	/* with it: a config with a file exporter and a pprof target shows up in the snapshot */
	char dir[] = "/tmp/pf-test-metrics-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char yaml[1024];
	snprintf(yaml, sizeof(yaml),
		 "profiling:\n"
		 "  pprof:\n"
		 "    targets:\n"
		 "      - {url: \"http://127.0.0.1:1/debug/pprof/heap\", type: heap, "
		 "interval_seconds: 60}\n"
		 "  exporters:\n"
		 "    - {type: file, path: \"%s\"}\n",
		 dir);
	struct pf_profcfg *cfg = NULL;
	assert_int_equal(pf_profcfg_parse(yaml, strlen(yaml), &cfg, &err), 0);
	o.metrics = true;
	d = agent_dataplane_new(&o, &err);
	assert_non_null(d);
	struct agent_config_hook hook;
	agent_dataplane_hook(d, &hook);
	assert_int_equal(hook.check(hook.ctx, cfg, &err), 0);
	hook.commit(hook.ctx, cfg, NULL);
	uint64_t deadline = now_ms() + 5000;
	for (;;) {
		assert_int_equal(agent_dataplane_metrics(d, snap), 0);
		/* the dead target fails its first scrape at once */
		if (snap->n_exporters == 1 && snap->n_targets == 1 && snap->pt[0].scrapes_failed)
			break;
		assert_true(now_ms() < deadline);
		usleep(20000);
	}
	assert_true(snap->refreshed_unix_ns > 0);
	assert_false(snap->has_sampler);
	assert_string_equal(snap->ex[0].type, "file");
	assert_true(snap->ex[0].running);
	assert_int_equal(snap->ex[0].st.queue_limit_bytes, AGENT_EXPORTER_DEFAULT_QUEUE_BYTES);
	assert_string_equal(snap->pt[0].type, "heap");
	assert_true(snap->pt[0].active);
	assert_false(snap->pt[0].healthy);
	assert_int_equal(snap->pt[0].scrapes_ok, 0);
	agent_dataplane_free(d);
	pf_profcfg_free(cfg);
	rmdir(dir);
	free(snap);
	agent_health_free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_listen_parse), cmocka_unit_test(test_escape),
	    cmocka_unit_test(test_render),	 cmocka_unit_test(test_checker_refuses),
	    cmocka_unit_test(test_server),	 cmocka_unit_test(test_dataplane_snapshot),
	    cmocka_unit_test(test_process_read),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
