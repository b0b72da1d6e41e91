/* fuzz_traces.c — an OTLP/HTTP trace export body as the agent's span receiver takes it
 * (agent/triggers/span_receiver.h): pf_otlp_traces_decode(). The first input byte picks the
 * encoding (bit 0: OTLP/JSON, else protobuf; bit 1: Content-Encoding gzip); the rest is the
 * body. A small byte cap (64 KiB) keeps the inflation and span caps within reach.
 *
 * Invariants checked:
 *  - a rejection is -EBADMSG or -E2BIG with a message, and leaves no spans;
 *  - every decoded span has non-zero ids, a non-zero start not after its end, NUL-terminated
 *    name and service name, and there are at most max_spans of them;
 *  - the spans re-encode (same encoding) and decode back to the same spans;
 *  - the response for them encodes in both encodings. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "otlp_traces.h"

#define MAX_BYTES ((size_t)64 << 10)
#define MAX_SPANS 512

static bool zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	struct pf_otlp_traces_opts o = {.json = data[0] & 1,
					.gzip = (data[0] & 2) != 0,
					.max_bytes = MAX_BYTES,
					.max_spans = MAX_SPANS};
	struct pf_span *s = NULL;
	size_t n = 99;
	struct pf_error err = {0};
	int rc = pf_otlp_traces_decode(data + 1, size - 1, &o, &s, &n, &err);
	if (rc < 0) {
		FUZZ_CHECK(rc == -EBADMSG || rc == -E2BIG, "rc %d (%s)", rc, err.msg);
		FUZZ_CHECK(err.msg[0], "rejection %d without a message", rc);
		FUZZ_CHECK(!s && n == 0, "rejection left %zu spans", n);
		return 0;
	}
	FUZZ_CHECK(n <= MAX_SPANS, "%zu spans", n);
	FUZZ_CHECK((n == 0) == (s == NULL), "n %zu, spans %p", n, (void *)s);
	for (size_t i = 0; i < n; i++) {
		FUZZ_CHECK(!zero(s[i].trace_id, 16) && !zero(s[i].span_id, 8), "zero id, span %zu",
			   i);
		FUZZ_CHECK(s[i].start_unix_ns && s[i].start_unix_ns <= s[i].end_unix_ns,
			   "span %zu: %llu..%llu", i, (unsigned long long)s[i].start_unix_ns,
			   (unsigned long long)s[i].end_unix_ns);
		FUZZ_CHECK(memchr(s[i].name, 0, sizeof(s[i].name)) &&
			       memchr(s[i].service_name, 0, sizeof(s[i].service_name)),
			   "span %zu: unterminated string", i);
	}
	struct pf_buf b;
	pf_buf_init(&b, (size_t)16 << 20);
	FUZZ_CHECK(pf_otlp_traces_encode(s, n, o.json, &b) == 0, "re-encode of %zu spans", n);
	struct pf_otlp_traces_opts o2 = {
	    .json = o.json, .max_bytes = b.len + 1, .max_spans = MAX_SPANS};
	struct pf_span *back = NULL;
	size_t n2 = 0;
	struct pf_error err2 = {0};
	rc = pf_otlp_traces_decode(b.data, b.len, &o2, &back, &n2, &err2);
	FUZZ_CHECK(rc == 0 && n2 == n, "re-decode: %d %s (%zu vs %zu spans)", rc, err2.msg, n2, n);
	for (size_t i = 0; i < n; i++) {
		struct pf_span a = s[i], c = back[i];
		a.service_name_long = c.service_name_long = false;
		FUZZ_CHECK(
		    !memcmp(a.trace_id, c.trace_id, 16) && !memcmp(a.span_id, c.span_id, 8) &&
			a.start_unix_ns == c.start_unix_ns && a.end_unix_ns == c.end_unix_ns &&
			a.status == c.status && a.pid == c.pid && a.tid == c.tid &&
			!strcmp(a.name, c.name) && !strcmp(a.service_name, c.service_name),
		    "span %zu differs after a round trip", i);
	}
	pf_buf_reset(&b);
	FUZZ_CHECK(pf_otlp_traces_response((int64_t)n, "x", true, &b) == 0, "json response");
	FUZZ_CHECK(pf_otlp_traces_response((int64_t)n, "x", false, &b) == 0, "pb response");
	pf_buf_release(&b);
	free(s);
	free(back);
	return 0;
}
