/* fuzz_perfmap.c — JIT symbol maps (agent/symbolize/perf_map.h): text a profiled process
 * writes into /tmp/perf-<pid>.map, which the agent reads. The input is the file's content.
 *
 * Invariants checked:
 *  - parsing returns 0 or -EFBIG (-ENOMEM aside), and a refused map is NULL;
 *  - a parsed map has at most PF_PERF_MAP_MAX_ENTRIES entries;
 *  - every name a lookup returns is non-empty, at most PF_PERF_MAP_MAX_NAME bytes, valid UTF-8
 *    and free of control characters (profiles carry it as a protobuf string). */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "symbolize/perf_map.h"

static void check_name(const char *name)
{
	size_t n = strlen(name);
	FUZZ_CHECK(n > 0 && n <= PF_PERF_MAP_MAX_NAME, "name of %zu bytes", n);
	const unsigned char *s = (const unsigned char *)name;
	for (size_t i = 0; i < n;) {
		unsigned c = s[i];
		size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : 4;
		FUZZ_CHECK(c >= 0x20 && c != 0x7f, "control byte 0x%02x at %zu", c, i);
		FUZZ_CHECK(c < 0x80 || (c >= 0xc2 && c <= 0xf4), "lead byte 0x%02x at %zu", c, i);
		FUZZ_CHECK(i + len <= n, "sequence cut at %zu", i);
		for (size_t k = 1; k < len; k++)
			FUZZ_CHECK((s[i + k] & 0xc0) == 0x80, "continuation 0x%02x at %zu", s[i + k],
				   i + k);
		i += len;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pf_perf_map *m = NULL;
	size_t skipped = 0;
	int rc = pf_perf_map_parse((const char *)data, size, &m, &skipped);
	if (rc < 0) {
		FUZZ_CHECK(rc == -EFBIG || rc == -ENOMEM, "rc %d", rc);
		FUZZ_CHECK(m == NULL, "a refused map was returned");
		return 0;
	}
	FUZZ_CHECK(m != NULL, "no map");
	FUZZ_CHECK(pf_perf_map_entries(m) <= PF_PERF_MAP_MAX_ENTRIES, "%zu entries",
		   pf_perf_map_entries(m));
	/* addresses: the hex numbers the input starts its lines with, and around them */
	const char *p = (const char *)data, *end = p + size;
	for (int k = 0; k < 64 && p < end; k++) {
		uint64_t v = 0;
		const char *q = p;
		while (q < end && q - p < 16 && ((*q >= '0' && *q <= '9') || ((*q | 0x20) >= 'a' &&
										(*q | 0x20) <= 'f'))) {
			unsigned c = (unsigned char)*q;
			v = v << 4 | (c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
			q++;
		}
		for (uint64_t a = v ? v - 1 : 0; a <= v + 1 && a >= (v ? v - 1 : 0); a++) {
			const char *name = pf_perf_map_find(m, a);
			if (name)
				check_name(name);
		}
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		p = nl ? nl + 1 : end;
	}
	pf_perf_map_free(m);
	return 0;
}
