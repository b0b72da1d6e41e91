/* test_pyroscope_ingest.c — receivers/pyroscope_ingest.h: the query (name, labels, times,
 * rate, format), the text formats into windows, multipart bodies, pprof with a
 * sample_type_config, the bounds; and a request stored through the store's entry point. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api_fixture.h"
#include "pf/gzip.h"
#include "pprof_codec.h"
#include "receivers/pyroscope_ingest.h"
#include "store.h"

#define NOW_MS 1700000000000LL

static int decode(const char *const *args, size_t n_args, const char *body, size_t len,
		  const char *ctype, struct pf_prof_window **w, struct pf_error *err)
{
	struct pf_pyroscope_request q = {.n_args = n_args,
					 .args = args,
					 .body = (const uint8_t *)body,
					 .len = len,
					 .content_type = ctype,
					 .now_ms = NOW_MS};
	memset(err, 0, sizeof(*err));
	return pf_pyroscope_decode(&q, w, err);
}

static const char *attr(const struct pf_prof_process *p, const char *key)
{
	for (size_t i = 0; i < p->n_attrs; i++)
		if (!strcmp(p->attrs[i].key, key))
			return p->attrs[i].value;
	return NULL;
}

/* The weight of the stack named root first "a;b;c" in process 0 (the first value). */
static int64_t weight(const struct pf_prof_window *w, const char *folded)
{
	const struct pf_prof_process *p = &w->processes[0];
	int64_t sum = 0;
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct pf_prof_stack *st = &p->stacks[p->samples[i].stack];
		char buf[512] = "";
		size_t o = 0;
		for (uint32_t k = st->n_frames; k-- > 0 && o < sizeof(buf);)
			o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s", o ? ";" : "",
					      p->frames[st->frames[k]].function);
		if (!strcmp(buf, folded))
			sum += pf_prof_sample_value(w, &p->samples[i], 0);
	}
	return sum;
}

static void test_folded_window(void **state)
{
	(void)state;
	const char *args[] = {"name=shop.cpu{ env = prod ,region=eu,env=staging,drop=}",
			      "from=1700000000", "until=1700000010", "sampleRate=250",
			      "spyName=pyspy"};
	const char body[] = "main;foo;bar 10\nmain;foo 5\r\n\nmain;;foo;bar 2\nmain;qux 0\n";
	struct pf_prof_window *w = NULL;
	struct pf_error err;
	assert_int_equal(decode(args, 5, body, sizeof(body) - 1, NULL, &w, &err), 0);
	assert_int_equal(w->n_sample_types, 0); /* the implicit CPU profile */
	assert_int_equal(w->frequency_hz, 250);
	assert_int_equal(w->start_unix_ns, 1700000000ull * 1000000000ull);
	assert_int_equal(w->end_unix_ns, 1700000010ull * 1000000000ull);
	assert_int_equal(w->n_processes, 1);
	const struct pf_prof_process *p = &w->processes[0];
	assert_string_equal(attr(p, "service.name"), "shop");
	assert_string_equal(attr(p, "env"), "staging"); /* trimmed, the last one wins */
	assert_string_equal(attr(p, "region"), "eu");
	assert_null(attr(p, "drop"));
	assert_string_equal(attr(p, PF_PYROSCOPE_SPY_ATTR), "pyspy");
	assert_int_equal(p->n_frames, 3);  /* main, foo, bar: empty names skipped */
	assert_int_equal(p->n_samples, 2); /* equal stacks merged, a zero count dropped */
	assert_int_equal(weight(w, "main;foo;bar"), 12);
	assert_int_equal(weight(w, "main;foo"), 5);
	assert_int_equal(p->frames[0].kind, PF_FRAME_PYTHON);
	/* leaf first */
	const struct pf_prof_stack *st = &p->stacks[p->samples[0].stack];
	assert_string_equal(p->frames[st->frames[0]].function, "bar");
	pf_prof_window_free(w);
}

static void test_lines_wall_alloc(void **state)
{
	(void)state;
	struct pf_prof_window *w = NULL;
	struct pf_error err;
	const char lines[] = "a;b\na;b\na\n";
	const char *l_args[] = {"name=app{service_name=svc}", "format=lines"};
	assert_int_equal(decode(l_args, 2, lines, sizeof(lines) - 1, NULL, &w, &err), 0);
	assert_string_equal(attr(&w->processes[0], "service.name"), "svc");
	assert_null(attr(&w->processes[0], "service_name"));
	assert_int_equal(weight(w, "a;b"), 2);
	assert_int_equal(weight(w, "a"), 1);
	/* absent from/until: now */
	assert_int_equal(w->start_unix_ns, (uint64_t)NOW_MS * 1000000u);
	pf_prof_window_free(w);

	const char *w_args[] = {"name=my.app.wall", "sampleRate=100", "from=1700000000000",
				"until=1700000001000000"};
	assert_int_equal(decode(w_args, 4, "x 3\n", 4, NULL, &w, &err), 0);
	assert_string_equal(attr(&w->processes[0], "service.name"), "my.app");
	assert_int_equal(w->n_sample_types, 1);
	assert_string_equal(w->sample_types[0].type, "wall");
	assert_int_equal(weight(w, "x"), 3 * 10000000);
	/* milliseconds and microseconds by magnitude */
	assert_int_equal(w->start_unix_ns, 1700000000ull * 1000000000ull);
	assert_int_equal(w->end_unix_ns, 1700000001ull * 1000000000ull);
	pf_prof_window_free(w);

	const char *m_args[] = {"name=svc.mutex_duration"};
	assert_int_equal(decode(m_args, 1, "x 7\n", 4, NULL, &w, &err), 0);
	assert_string_equal(w->sample_types[0].type, "delay");
	assert_string_equal(w->sample_types[0].unit, "nanoseconds");
	assert_int_equal(weight(w, "x"), 7);
	pf_prof_window_free(w);
	/* every advertised suffix decodes */
	for (const char *const *t = pf_pyroscope_type_names(); *t; t++) {
		char name[128];
		snprintf(name, sizeof(name), "name=a.%s", *t);
		const char *a[] = {name};
		assert_int_equal(decode(a, 1, "x 1\n", 4, NULL, &w, &err), 0);
		pf_prof_window_free(w);
	}
}

static void expect_bad(const char *arg0, const char *body, int rc, const char *msg)
{
	const char *args[] = {arg0, "from=1700000000", "until=1700000001"};
	struct pf_prof_window *w = NULL;
	struct pf_error err;
	int r = decode(args, 3, body, strlen(body), NULL, &w, &err);
	if (r != rc || !strstr(err.msg, msg))
		fail_msg("%s / %.40s: %d '%s', want %d '%s'", arg0, body, r, err.msg, rc, msg);
	assert_null(w);
}

static void test_bad_input(void **state)
{
	(void)state;
	expect_bad("nam=x", "a 1", -EINVAL, "name: required");
	expect_bad("name=a.cpu{x=1,}", "a", -EBADMSG, "no count");
	expect_bad("name=a.cpu{k=v", "a 1", -EINVAL, "not closed");
	expect_bad("name=a.cpu{k-x=v}", "a 1", -EINVAL, "label key");
	expect_bad("name=a.cpu{=v}", "a 1", -EINVAL, "empty key");
	expect_bad("name={k=v}", "a 1", -EINVAL, "empty");
	expect_bad("name=.cpu", "a 1", -EINVAL, "empty");
	expect_bad("name=a.heap", "a 1", -EINVAL, "unknown profile type 'heap'");
	expect_bad("name=a", "a 1 2 x", -EBADMSG, "not a number");
	expect_bad("name=a", "a 18446744073709551615", -EBADMSG, "not a number");
	expect_bad("name=a", "\x01;a 1", -EBADMSG, "UTF-8");
	char big[PF_PYROSCOPE_MAX_NAME + 16];
	memset(big, 'a', sizeof(big) - 1);
	memcpy(big, "name=", 5);
	big[sizeof(big) - 1] = 0;
	expect_bad(big, "a 1", -EINVAL, "longer than");
	/* depth bound */
	size_t n = (PF_PYROSCOPE_MAX_DEPTH + 1) * 2 + 4;
	char *deep = malloc(n);
	size_t o = 0;
	for (int i = 0; i <= PF_PYROSCOPE_MAX_DEPTH; i++) {
		deep[o++] = 'f';
		deep[o++] = ';';
	}
	memcpy(deep + o - 1, " 1", 3);
	expect_bad("name=a", deep, -E2BIG, "frames");
	free(deep);
	/* distinct frame names bound: PF_PYROSCOPE_MAX_FRAMES + 1 of them */
	size_t cap = (size_t)(PF_PYROSCOPE_MAX_FRAMES + 1) * 12 + 1;
	char *many = malloc(cap);
	o = 0;
	for (unsigned i = 0; i <= PF_PYROSCOPE_MAX_FRAMES; i++)
		o += (size_t)snprintf(many + o, cap - o, "f%x 1\n", i);
	expect_bad("name=a", many, -E2BIG, "distinct frame names");
	free(many);
	/* bad query values */
	const char *bad[][2] = {{"sampleRate=0", "sampleRate"},
				{"sampleRate=1000001", "sampleRate"},
				{"format=trie", "not supported"},
				{"from=12x", "unix time"},
				{"spyName=", "spyName"}};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *args[] = {"name=a", bad[i][0]};
		struct pf_prof_window *w = NULL;
		struct pf_error err;
		assert_int_equal(decode(args, 2, "a 1", 3, NULL, &w, &err), -EINVAL);
		assert_non_null(strstr(err.msg, bad[i][1]));
	}
}

/* A small pprof made by our encoder from a decoded folded body. */
static void make_pprof(struct pf_buf *out)
{
	const char *args[] = {"name=p.alloc_space"};
	struct pf_prof_window *w = NULL;
	struct pf_error err;
	assert_int_equal(decode(args, 1, "m;x 64\nm;y 32\n", 14, NULL, &w, &err), 0);
	pf_buf_init(out, 1 << 20);
	assert_int_equal(pf_pprof_encode(w, PF_PPROF_ALL_PROCESSES, out, NULL), 0);
	pf_prof_window_free(w);
}

static void test_pprof_raw_and_multipart(void **state)
{
	(void)state;
	struct pf_buf pp;
	make_pprof(&pp);
	struct pf_prof_window *w = NULL;
	struct pf_error err;
	const char *args[] = {"name=gosvc{pod=a}", "format=pprof", "from=1700000000",
			      "until=1700000010"};
	assert_int_equal(
	    decode(args, 4, (const char *)pp.data, pp.len, "application/octet-stream", &w, &err),
	    0);
	assert_string_equal(attr(&w->processes[0], "service.name"), "gosvc");
	assert_string_equal(w->sample_types[0].type, "alloc_space");
	assert_int_equal(weight(w, "m;x"), 64);
	pf_prof_window_free(w);

	/* multipart (no format argument needed), with a sample_type_config renaming the type */
	struct pf_buf mp;
	pf_buf_init(&mp, 1 << 20);
	pf_buf_printf(&mp, "preamble\r\n--XyZ\r\nContent-Disposition: form-data; "
			   "filename=\"profile.pprof\"; name=\"profile\"\r\n"
			   "Content-Type: application/octet-stream\r\n\r\n");
	pf_buf_append(&mp, pp.data, pp.len);
	pf_buf_printf(&mp, "\r\n--XyZ\r\nContent-Disposition: form-data; name=sample_type_config"
			   "\r\n\r\n{\"alloc_space\":{\"display-name\":\"alloc_bytes\","
			   "\"units\":\"bytes\"}}\r\n--XyZ--\r\nepilogue");
	const char *margs[] = {"name=gosvc"};
	assert_int_equal(decode(margs, 1, (const char *)mp.data, mp.len,
				"multipart/form-data; boundary=\"XyZ\"", &w, &err),
			 0);
	assert_string_equal(w->sample_types[0].type, "alloc_bytes");
	assert_int_equal(weight(w, "m;y"), 32);
	pf_prof_window_free(w);

	/* a part not closed by the boundary; no boundary; a truncated pprof */
	assert_int_equal(decode(margs, 1, (const char *)mp.data, mp.len - 30,
				"multipart/form-data; boundary=XyZ", &w, &err),
			 -EBADMSG);
	assert_int_equal(
	    decode(margs, 1, (const char *)mp.data, mp.len, "multipart/form-data", &w, &err),
	    -EBADMSG);
	assert_non_null(strstr(err.msg, "boundary"));
	assert_int_equal(decode(args, 4, (const char *)pp.data, pp.len / 2, NULL, &w, &err),
			 -EBADMSG);
	assert_non_null(strstr(err.msg, "pprof"));
	pf_buf_release(&mp);
	pf_buf_release(&pp);
}

static void test_gzip_bounds(void **state)
{
	(void)state;
	size_t n = 4 << 20;
	char *zeros = calloc(1, n);
	struct pf_buf gz;
	pf_buf_init(&gz, n);
	assert_int_equal(pf_gzip_compress(zeros, n, 9, &gz), 0);
	const char *args[] = {"name=a"};
	struct pf_pyroscope_request q = {.n_args = 1,
					 .args = args,
					 .body = gz.data,
					 .len = gz.len,
					 .gzip = true,
					 .max_bytes = 1 << 20,
					 .now_ms = NOW_MS};
	struct pf_prof_window *w = NULL;
	struct pf_error err = {0};
	assert_int_equal(pf_pyroscope_decode(&q, &w, &err), -E2BIG);
	q.gzip = false;
	q.len = 5;
	assert_int_equal(pf_pyroscope_decode(&q, &w, &err), -EBADMSG); /* raw gzip magic */
	pf_buf_release(&gz);
	free(zeros);
}

/* Through the store's entry point: stored once per request, with its type and samples. */
static void test_ingest_stores(void **state)
{
	(void)state;
	char dir[64];
	struct pf_store *st;
	struct pf_fleet *fleet;
	api_fixture_open("pyro", dir, &st, &fleet);
	const char *args[] = {"name=stored.cpu{env=ci}", "from=1700000000", "until=1700000010"};
	const char body[] = "main;a 3\nmain;b 4\n";
	struct pf_pyroscope_request q = {.n_args = 3,
					 .args = args,
					 .body = (const uint8_t *)body,
					 .len = sizeof(body) - 1,
					 .now_ms = NOW_MS};
	struct pf_pyroscope_result res;
	assert_int_equal(pf_pyroscope_ingest(st, &q, &res), 0);
	assert_int_equal(res.status, 200);
	assert_int_equal(res.stored, 1);
	assert_int_equal(res.samples, 7);
	/* a bad request stores nothing and says why */
	const char *bad[] = {"name=stored.nope"};
	q.args = bad;
	q.n_args = 1;
	assert_int_equal(pf_pyroscope_ingest(st, &q, &res), 0);
	assert_int_equal(res.status, 400);
	assert_non_null(strstr(res.message, "nope"));
	api_fixture_close(dir, st, fleet);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_folded_window), cmocka_unit_test(test_lines_wall_alloc),
	    cmocka_unit_test(test_bad_input),	  cmocka_unit_test(test_pprof_raw_and_multipart),
	    cmocka_unit_test(test_gzip_bounds),	  cmocka_unit_test(test_ingest_stores),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
