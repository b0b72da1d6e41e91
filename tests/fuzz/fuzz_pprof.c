/* fuzz_pprof.c — a scraped pprof body, as the agent's pprof source handles it
 * (agent/pprof/sampler_pprof.h "Conversion"): pf_pprof_convert() (pf_pprof_decode(), gzip'd or
 * plain, through common gzip) and then the OTLP encoding every exporter does.
 *
 * Invariants checked:
 *  - a rejection is -EBADMSG, -E2BIG or -ELOOP with a message;
 *  - the input gzip'd decodes exactly as the plain input (same result, same window sums),
 *    and pf_gzip_decompress() of a gzip input respects its bound;
 *  - a decoded window is structurally valid (fuzz_window.h);
 *  - it re-encodes as pprof (or -ENODATA when no sample carries weight), that decodes again
 *    with the same sample types and per-type value sums, and a second encoding is identical
 *    to the first (the encoder's output is a fixed point);
 *  - the converted window (attributes, original payload) encodes as OTLP that the conformance
 *    checker (tests/lib/profcheck.h) finds no fault in and that pf_otlp_profiles_decode()
 *    reads back. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "fuzz_window.h"
#include "otlp_profiles.h"
#include "pf/gzip.h"
#include "pprof/sampler_pprof.h"
#include "pprof_codec.h"
#include "profcheck.h"

#define DECODE_MAX ((size_t)32 << 20)

static void check_rejection(int rc, const struct pf_error *err, const char *what)
{
	FUZZ_CHECK(rc == -EBADMSG || rc == -E2BIG || rc == -ELOOP, "%s: rc %d", what, rc);
	FUZZ_CHECK(err->msg[0] != 0, "%s: rc %d without a message", what, rc);
}

static int decode(const uint8_t *data, size_t size, struct pf_prof_window **w)
{
	struct pf_error err = {0};
	int rc = pf_pprof_decode(data, size, DECODE_MAX, w, &err);
	if (rc < 0)
		check_rejection(rc, &err, "pf_pprof_decode");
	return rc;
}

static void check_sums_equal(const struct pf_prof_window *a, const struct pf_prof_window *b,
			     const char *what)
{
	uint64_t sa[FUZZ_MAX_TYPES], sb[FUZZ_MAX_TYPES];
	size_t na = fuzz_window_sums(a, sa), nb = fuzz_window_sums(b, sb);
	FUZZ_CHECK(na == nb, "%s: %zu sample types, then %zu", what, na, nb);
	for (size_t k = 0; k < na && k < FUZZ_MAX_TYPES; k++)
		FUZZ_CHECK(sa[k] == sb[k], "%s: type %zu sums to %llu, then %llu", what, k,
			   (unsigned long long)sa[k], (unsigned long long)sb[k]);
}

static bool str_eq(const char *a, const char *b)
{
	return (!a || !*a) ? (!b || !*b) : (b && strcmp(a, b) == 0);
}

/* pprof re-encoding: decode(encode(w)) keeps types and sums; encode is then a fixed point. */
static void check_reencode(const struct pf_prof_window *w)
{
	struct pf_buf b1, b2;
	struct pf_error err = {0};
	struct pf_prof_window *w2 = NULL;

	pf_buf_init(&b1, DECODE_MAX);
	pf_buf_init(&b2, DECODE_MAX);
	int rc = pf_pprof_encode(w, PF_PPROF_ALL_PROCESSES, &b1, &err);
	if (rc == -ENODATA) {
		FUZZ_CHECK(w->n_processes == 0, "-ENODATA for %zu processes", w->n_processes);
		goto out;
	}
	FUZZ_CHECK(rc == 0, "pf_pprof_encode of a decoded window: %d %s", rc, err.msg);
	rc = pf_pprof_decode(b1.data, b1.len, DECODE_MAX, &w2, &err);
	FUZZ_CHECK(rc == 0, "our pprof does not decode: %d %s", rc, err.msg);
	fuzz_window_check(w2);
	FUZZ_CHECK(w2->n_sample_types == w->n_sample_types, "sample types %zu, then %zu",
		   w->n_sample_types, w2->n_sample_types);
	for (size_t k = 0; k < w->n_sample_types; k++)
		FUZZ_CHECK(str_eq(w->sample_types[k].type, w2->sample_types[k].type) &&
			       str_eq(w->sample_types[k].unit, w2->sample_types[k].unit),
			   "sample type %zu changed", k);
	FUZZ_CHECK(w2->period == w->period, "period %lld, then %lld", (long long)w->period,
		   (long long)w2->period);
	check_sums_equal(w, w2, "pprof round trip");
	rc = pf_pprof_encode(w2, PF_PPROF_ALL_PROCESSES, &b2, &err);
	FUZZ_CHECK(rc == 0, "second encoding: %d %s", rc, err.msg);
	FUZZ_CHECK(b1.len == b2.len && memcmp(b1.data, b2.data, b1.len) == 0,
		   "encoding is not a fixed point (%zu then %zu bytes)", b1.len, b2.len);
out:
	pf_prof_window_free(w2);
	pf_buf_release(&b1);
	pf_buf_release(&b2);
}

/* What the exporters do with a converted window: OTLP bytes that conform and decode. */
static void check_otlp(const struct pf_prof_window *w)
{
	struct pf_buf out;
	struct pf_error err = {0};
	struct profcheck_result res = {0};
	struct pf_prof_window *back = NULL;

	pf_buf_init(&out, DECODE_MAX);
	int rc = pf_otlp_profiles_encode(w, &out, NULL, &err);
	if (rc == -ENODATA)
		goto out;
	FUZZ_CHECK(rc == 0, "pf_otlp_profiles_encode of a converted window: %d %s", rc, err.msg);
	rc = profcheck_run(out.data, out.len, &res);
	if (rc > 0)
		profcheck_print(&res);
	FUZZ_CHECK(rc == 0, "profcheck: %d violations in our OTLP", rc);
	rc = pf_otlp_profiles_decode(out.data, out.len, DECODE_MAX * 4, &back, &err);
	FUZZ_CHECK(rc == 0, "our OTLP does not decode: %d %s", rc, err.msg);
	fuzz_window_check(back);
out:
	profcheck_release(&res);
	pf_prof_window_free(back);
	pf_buf_release(&out);
}

static void check_gzip_paths(const uint8_t *data, size_t size, int plain_rc,
			     const struct pf_prof_window *plain)
{
	struct pf_buf gz;

	if (pf_gzip_is_gzip(data, size)) {
		/* The bounded decompressor never gives more than it was allowed. */
		pf_buf_init(&gz, DECODE_MAX);
		int rc = pf_gzip_decompress(data, size, 4096, &gz);
		FUZZ_CHECK(rc == 0 || rc == -EBADMSG || rc == -E2BIG, "gzip: rc %d", rc);
		FUZZ_CHECK(gz.len <= 4096, "gzip: %zu bytes past a 4096 cap", gz.len);
		FUZZ_CHECK(rc == 0 || gz.len == 0, "gzip: output left after failure");
		pf_buf_release(&gz);
		return;
	}
	/* The same bytes gzip'd decode to the same thing (the HTTP Content-Encoding path and a
	 * .pb.gz body both go through common gzip). */
	pf_buf_init(&gz, DECODE_MAX);
	FUZZ_CHECK(pf_gzip_compress(data, size, 1, &gz) == 0, "gzip compress failed");
	struct pf_prof_window *w = NULL;
	int rc = decode(gz.data, gz.len, &w);
	FUZZ_CHECK(rc == plain_rc, "plain rc %d, gzip'd rc %d", plain_rc, rc);
	if (rc == 0)
		check_sums_equal(plain, w, "gzip'd vs plain");
	pf_prof_window_free(w);
	pf_buf_release(&gz);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pf_prof_window *w = NULL;
	int rc = decode(data, size, &w);

	check_gzip_paths(data, size, rc, w);
	if (rc < 0)
		return 0;
	fuzz_window_check(w);
	check_reencode(w);
	pf_prof_window_free(w);

	/* The agent's conversion of a scraped body, with a target that keeps the original. */
	struct pf_kv_str attrs[] = {{"service.name", "fuzz"}, {"deployment.environment", "ci"}};
	struct pf_pprof_target t = {
		.url = "http://127.0.0.1:1/debug/pprof/heap",
		.type = PF_PPROF_HEAP,
		.n_attributes = 2,
		.attributes = attrs,
		.keep_original = true,
	};
	struct pf_pprof_options opts = {.max_decoded_bytes = DECODE_MAX, .host_name = "fuzz-host"};
	struct pf_error err = {0};
	w = NULL;
	rc = pf_pprof_convert(data, size, &t, &opts, 1700000000000000000ull, &w, &err);
	FUZZ_CHECK(rc == 0, "decode succeeded but convert failed: %d %s", rc, err.msg);
	fuzz_window_check(w);
	for (size_t i = 0; i < w->n_processes; i++)
		FUZZ_CHECK(w->processes[i].original_payload_len == size,
			   "original payload of %zu bytes, input %zu",
			   w->processes[i].original_payload_len, size);
	check_otlp(w);
	pf_prof_window_free(w);
	return 0;
}
