/* fuzz_pyroscope.c — a Pyroscope push (POST /ingest) as the controller's receiver decodes it
 * (controller/receivers/pyroscope_ingest.h pf_pyroscope_decode()).
 *
 * Input: byte 0 picks the format (bits 0-1: folded, lines, pprof raw, pprof in a
 * multipart/form-data body with boundary "fzb"), bit 2 Content-Encoding gzip, bit 3 a name
 * from the input: then byte 1 is its length and that many bytes follow (up to a NUL); the
 * rest is the body.
 *
 * Invariants checked:
 *  - a rejection is -EINVAL (the query), -EBADMSG or -E2BIG, always with a message;
 *  - a decoded window is structurally valid (fuzz_window.h) and every process carries
 *    service.name;
 *  - it encodes as OTLP (or -ENODATA when nothing carries weight), which the store's
 *    decoder (pf_otlp_profiles_decode) reads back with the same per-type sums. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "fuzz_window.h"
#include "otlp_profiles.h"
#include "pf/gzip.h"
#include "receivers/pyroscope_ingest.h"

#define MAX_BYTES ((size_t)4 << 20)

static bool has_service(const struct pf_prof_process *p)
{
	for (size_t i = 0; i < p->n_attrs; i++)
		if (!strcmp(p->attrs[i].key, "service.name") && p->attrs[i].value &&
		    *p->attrs[i].value)
			return true;
	return false;
}

static void check_otlp(const struct pf_prof_window *w)
{
	struct pf_buf out;
	struct pf_error err = {0};
	struct pf_prof_window *back = NULL;

	pf_buf_init(&out, MAX_BYTES * 8);
	int rc = pf_otlp_profiles_encode(w, &out, NULL, &err);
	if (rc == -ENODATA)
		goto out;
	FUZZ_CHECK(rc == 0, "OTLP encoding of a decoded push: %d %s", rc, err.msg);
	rc = pf_otlp_profiles_decode(out.data, out.len, MAX_BYTES * 32, &back, &err);
	FUZZ_CHECK(rc == 0, "the store cannot decode our OTLP: %d %s", rc, err.msg);
	fuzz_window_check(back);
	uint64_t a[FUZZ_MAX_TYPES], b[FUZZ_MAX_TYPES];
	size_t na = fuzz_window_sums(w, a), nb = fuzz_window_sums(back, b);
	FUZZ_CHECK(na == nb, "%zu sample types, %zu after OTLP", na, nb);
	for (size_t k = 0; k < na && k < FUZZ_MAX_TYPES; k++)
		FUZZ_CHECK(a[k] == b[k], "type %zu: sum %llu, %llu after OTLP", k,
			   (unsigned long long)a[k], (unsigned long long)b[k]);
out:
	pf_prof_window_free(back);
	pf_buf_release(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const formats[] = {"format=folded", "format=lines", "format=pprof",
					      "format=pprof"};
	char name[300] = "name=fuzz.cpu{env=ci}";
	struct pf_buf body;

	if (!size)
		return 0;
	uint8_t mode = data[0];
	data++, size--;
	if ((mode & 8) && size) {
		size_t n = data[0] < size - 1 ? data[0] : size - 1;
		size_t k = 0;
		memcpy(name, "name=", 5);
		for (; k < n && data[1 + k] && k + 6 < sizeof(name); k++)
			name[5 + k] = (char)data[1 + k];
		name[5 + k] = 0;
		data += 1 + n, size -= 1 + n;
	}
	pf_buf_init(&body, MAX_BYTES * 2);
	const char *ctype = NULL;
	if ((mode & 3) == 3) {
		ctype = "multipart/form-data; boundary=fzb";
		pf_buf_append_str(
		    &body, "--fzb\r\nContent-Disposition: form-data; name=\"profile\"\r\n\r\n");
		pf_buf_append(&body, data, size);
		pf_buf_append_str(&body, "\r\n--fzb--\r\n");
	} else {
		pf_buf_append(&body, data, size);
	}
	struct pf_buf gz;
	pf_buf_init(&gz, MAX_BYTES * 2);
	const uint8_t *b = body.data ? body.data : (const uint8_t *)"";
	size_t len = body.len;
	if (mode & 4) {
		FUZZ_CHECK(pf_gzip_compress(b, len, 1, &gz) == 0, "gzip compress failed");
		b = gz.data;
		len = gz.len;
	}
	const char *args[] = {name,
			      "from=1700000000",
			      "until=1700000010",
			      "sampleRate=97",
			      formats[mode & 3],
			      "spyName=gospy"};
	struct pf_pyroscope_request q = {.n_args = 6,
					 .args = args,
					 .body = b,
					 .len = len,
					 .content_type = ctype,
					 .gzip = (mode & 4) != 0,
					 .max_bytes = MAX_BYTES,
					 .now_ms = 1700000000000};
	struct pf_prof_window *w = NULL;
	struct pf_error err = {0};
	int rc = pf_pyroscope_decode(&q, &w, &err);
	if (rc < 0) {
		FUZZ_CHECK(rc == -EINVAL || rc == -EBADMSG || rc == -E2BIG, "rc %d", rc);
		FUZZ_CHECK(err.msg[0] != 0, "rc %d without a message", rc);
		FUZZ_CHECK(w == NULL, "a window after a rejection");
	} else {
		fuzz_window_check(w);
		for (size_t i = 0; i < w->n_processes; i++)
			FUZZ_CHECK(has_service(&w->processes[i]), "process %zu has no service.name",
				   i);
		check_otlp(w);
		pf_prof_window_free(w);
	}
	pf_buf_release(&gz);
	pf_buf_release(&body);
	return 0;
}
