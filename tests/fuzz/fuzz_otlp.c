/* fuzz_otlp.c — an OTLP ExportProfilesServiceRequest body as the controller's receiver takes it
 * (controller/profstore/profstore.h): pf_otlp_profiles_decode(), each profile re-encoded alone
 * (as profiles stored with their body were), the flame
 * graph views (flame.h) built from the window, and pf_profstore_ingest() itself against a
 * real SQLite store in memory (":memory:", retention-capped). A body starting with the gzip
 * magic is ingested with Content-Encoding: gzip.
 *
 * Invariants checked:
 *  - a rejection is -EBADMSG, -ELOOP or -E2BIG with a message, and ingest answers 400/413;
 *  - a decoded window is structurally valid (fuzz_window.h);
 *  - every process with samples re-encodes alone (as the store does) into OTLP that the
 *    conformance checker passes and that decodes back with the same sample count; a second
 *    encoding of that has the same size (implicit CPU profiles; profile ids are random, so
 *    bytes may differ) or the same per-type value sums (explicit types, where the decoder
 *    merges samples of one identity);
 *  - the flame graph of the window has the window's total weight at its root (or is
 *    truncated) and renders as JSON; the top table renders;
 *  - ingest of a decodable body answers 200 and accounts for every profile
 *    (accepted + rejected == processes), and the newest stored profiles load back from
 *    their details into structurally valid one-process windows. */
#include <errno.h>
#include <string.h>

#include "profstore/flame.h"
#include "fuzz.h"
#include "fuzz_window.h"
#include "otlp_profiles.h"
#include "pf/gzip.h"
#include "profcheck.h"
#include "profstore/profstore.h"
#include "store.h"

#define MAX_BYTES PF_PROFSTORE_DEFAULT_MAX_BYTES
#define DECODE_MAX (MAX_BYTES * 4) /* as pf_profstore_ingest() */

static struct pf_store *store;

static uint64_t process_samples(const struct pf_prof_process *p)
{
	uint64_t n = 0;
	for (size_t i = 0; i < p->n_samples; i++)
		n += p->samples[i].count;
	return n;
}

/* As prepare_one() in profstore.c: process i alone, a period when the wire had none. */
static void check_one(const struct pf_prof_window *w, size_t i)
{
	const struct pf_prof_process *p = &w->processes[i];
	struct pf_prof_window one = *w;
	struct pf_buf b1, b2;
	struct pf_error err = {0};
	struct profcheck_result res = {0};
	struct pf_prof_window *back = NULL;
	uint64_t samples = process_samples(p);

	if (!samples)
		return;
	one.processes = p;
	one.n_processes = 1;
	if (!one.n_sample_types && !one.frequency_hz)
		one.frequency_hz = 100;
	pf_buf_init(&b1, DECODE_MAX);
	pf_buf_init(&b2, DECODE_MAX);
	int rc = pf_otlp_profiles_encode(&one, &b1, NULL, &err);
	if (rc == -ENODATA)
		goto out; /* weight only in zero values: nothing to export */
	FUZZ_CHECK(rc == 0, "process %zu of a decoded window does not re-encode: %d %s", i, rc,
		   err.msg);
	rc = profcheck_run(b1.data, b1.len, &res);
	if (rc > 0)
		profcheck_print(&res);
	FUZZ_CHECK(rc == 0, "profcheck: %d violations in our OTLP", rc);
	rc = pf_otlp_profiles_decode(b1.data, b1.len, DECODE_MAX, &back, &err);
	FUZZ_CHECK(rc == 0, "our OTLP does not decode: %d %s", rc, err.msg);
	fuzz_window_check(back);
	if (!w->n_sample_types)
		FUZZ_CHECK(pf_prof_window_samples(back) == samples,
			   "%llu samples stored, %llu read back", (unsigned long long)samples,
			   (unsigned long long)pf_prof_window_samples(back));
	if (!back->n_sample_types && !back->frequency_hz)
		back->frequency_hz = 100; /* as the store does: no period on the wire */
	rc = pf_otlp_profiles_encode(back, &b2, NULL, &err);
	FUZZ_CHECK(rc == 0, "re-decoded window does not encode: %d %s", rc, err.msg);
	/* Explicit samples/count + cpu/nanoseconds reads back as the implicit CPU profile
	 * (documented), whose encoding differs (thread.id always written): compare like with
	 * like. */
	if (!one.n_sample_types && !back->n_sample_types)
		FUZZ_CHECK(b1.len == b2.len, "encoding not stable: %zu then %zu bytes", b1.len,
			   b2.len);
	/* With explicit types the decoder merges samples of one identity: the sums stay. */
	uint64_t s1[FUZZ_MAX_TYPES], s2[FUZZ_MAX_TYPES];
	if (one.n_sample_types && back->n_sample_types == one.n_sample_types) {
		size_t nt = fuzz_window_sums(&one, s1);
		fuzz_window_sums(back, s2);
		for (size_t k = 0; k < nt && k < FUZZ_MAX_TYPES; k++)
			FUZZ_CHECK(s1[k] == s2[k], "type %zu sums to %llu, read back %llu", k,
				   (unsigned long long)s1[k], (unsigned long long)s2[k]);
	}
out:
	profcheck_release(&res);
	pf_prof_window_free(back);
	pf_buf_release(&b1);
	pf_buf_release(&b2);
}

static void check_flame(const struct pf_prof_window *w)
{
	struct pf_flame *f = pf_flame_new(4096);
	struct pf_buf json;
	struct pf_flame_fn *top = NULL;
	size_t n_top = 0;

	FUZZ_CHECK(f != NULL, "pf_flame_new");
	int rc = pf_flame_add_window(f, w, 0);
	FUZZ_CHECK(rc == 0, "flame of a decoded window: %d", rc);
	rc = pf_flame_add_window(f, w, 1);
	FUZZ_CHECK(rc == 0, "flame slot 1: %d", rc);
	FUZZ_CHECK(pf_flame_total(f, 0) == pf_flame_total(f, 1), "slots differ");
	FUZZ_CHECK(pf_flame_total(f, 0) == pf_prof_window_samples(w),
		   "flame root %llu, window %llu samples", (unsigned long long)pf_flame_total(f, 0),
		   (unsigned long long)pf_prof_window_samples(w));
	pf_buf_init(&json, (size_t)64 << 20);
	rc = pf_flame_json(f, true, 0, &json);
	FUZZ_CHECK(rc == 0, "flame json: %d", rc);
	FUZZ_CHECK(json.len && json.data[0] == '{', "flame json does not start with {");
	rc = pf_flame_top(f, 0, 20, &top, &n_top);
	FUZZ_CHECK(rc == 0 && n_top <= 20, "flame top: %d, %zu", rc, n_top);
	free(top);
	pf_buf_release(&json);
	pf_flame_free(f);
}

static int load_cb(const struct pf_profile_row *r, void *ud)
{
	struct pf_prof_window *w = NULL;
	struct pf_error err = {0};
	(void)ud;
	int rc = pf_profstore_load(store, r->id, &w, &err);
	FUZZ_CHECK(rc == 0, "stored profile %lld does not load: %d %s", (long long)r->id, rc,
		   err.msg);
	fuzz_window_check(w);
	FUZZ_CHECK(w->n_processes == 1, "stored profile: %zu processes", w->n_processes);
	pf_prof_window_free(w);
	return 0;
}

static void check_ingest(const uint8_t *data, size_t size, int decode_rc, size_t n_processes)
{
	struct pf_profstore_request req = {
		.body = data,
		.len = size,
		.gzip = pf_gzip_is_gzip(data, size),
		.now_ms = 1700000000000,
	};
	struct pf_profstore_result res;
	struct pf_buf resp;

	if (!store) {
		struct pf_error err = {0};
		store = pf_store_open(":memory:", PF_STORE_SYNC_NORMAL, &err);
		FUZZ_CHECK(store != NULL, "store: %s", err.msg);
		struct pf_profile_retention ret = {.max_bytes = 1 << 20};
		FUZZ_CHECK(pf_store_profiles_set_retention(store, &ret) == 0, "retention");
	}
	pf_buf_init(&resp, 1 << 20);
	int rc = pf_profstore_ingest(store, &req, &res, &resp);
	FUZZ_CHECK(rc == 0, "ingest: %d", rc);
	FUZZ_CHECK(res.status == 200 || res.status == 400 || res.status == 413,
		   "ingest answered %d: %s", res.status, res.message);
	if (res.status != 200)
		FUZZ_CHECK(res.message[0], "ingest %d without a message", res.status);
	if (res.status == 200 && res.accepted) { /* what was stored reads back (its detail) */
		struct pf_profile_filter f = {.limit = 8};
		FUZZ_CHECK(pf_store_profiles_foreach(store, &f, load_cb, NULL) == 0, "list: %s",
			   pf_store_last_error(store));
	}
	if (!req.gzip) {
		FUZZ_CHECK((decode_rc == 0) == (res.status == 200), "decode %d but ingest %d: %s",
			   decode_rc, res.status, res.message);
		if (decode_rc == 0)
			FUZZ_CHECK(res.accepted + res.rejected == n_processes,
				   "%zu accepted + %zu rejected of %zu profiles", res.accepted,
				   res.rejected, n_processes);
	}
	pf_buf_release(&resp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pf_error err = {0};
	struct pf_prof_window *w = NULL;
	int rc = pf_otlp_profiles_decode(data, size, DECODE_MAX, &w, &err);
	size_t n_processes = 0;

	if (rc < 0) {
		FUZZ_CHECK(rc == -EBADMSG || rc == -ELOOP || rc == -E2BIG, "decode rc %d", rc);
		FUZZ_CHECK(err.msg[0], "decode rc %d without a message", rc);
	} else {
		fuzz_window_check(w);
		FUZZ_CHECK(pf_profstore_type(w) != NULL, "no type");
		n_processes = w->n_processes;
		for (size_t i = 0; i < w->n_processes; i++)
			check_one(w, i);
		check_flame(w);
		pf_prof_window_free(w);
	}
	check_ingest(data, size, rc, n_processes);
	return 0;
}
