/* fuzz_podcache.c — the pod cache's decoders of API server answers (agent/k8s/podcache.h):
 * the input is applied as one watch event line and as a PodList body, to a cache that already
 * holds the recorded pods of tests/data/k8s (seeded from the first input byte's parity: empty
 * or one pod), so updates, deletes and replacements all run.
 *
 * Invariants checked:
 *  - pf_podcache_apply_event returns 0, -ESTALE, -EPROTO, -EBADMSG or -ENOMEM, with a message
 *    on every error; a failed list leaves the cache as it was;
 *  - the cache never holds more than max_pods pods, and after a successful list exactly
 *    min(items that parse, max_pods);
 *  - every attribute a lookup yields has a non-empty key, a value of at most
 *    PF_PODCACHE_MAX_VALUE bytes, at most PF_PODCACHE_MAX_LABELS pod labels and one
 *    k8s.pod.uid that is a 36-byte UUID. Lookups use the 64-hex runs and UUID-shaped runs of
 *    the input as container ids and pod uids. */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "k8s/podcache.h"

#define MAX_PODS 8

struct check {
	size_t n, labels, uids;
};

static int check_attr(void *ctx, const char *key, const char *value)
{
	struct check *c = ctx;
	FUZZ_CHECK(key && *key, "empty key");
	FUZZ_CHECK(value && strlen(value) <= PF_PODCACHE_MAX_VALUE, "value of %zu bytes",
		   value ? strlen(value) : 0);
	if (!strncmp(key, "k8s.pod.label.", 14))
		c->labels++;
	if (!strcmp(key, "k8s.pod.uid")) {
		c->uids++;
		FUZZ_CHECK(strlen(value) == PF_POD_UID_LEN - 1, "pod uid '%s'", value);
	}
	c->n++;
	return 0;
}

static void lookups(struct pf_podcache *pc, const char *text)
{
	size_t len = strlen(text);
	for (size_t i = 0; i + 36 <= len; i++) {
		char cid[PF_CONTAINER_ID_LEN] = "", uid[PF_POD_UID_LEN] = "";
		size_t hex = 0;
		while (i + hex < len && hex < 64 && isxdigit((unsigned char)text[i + hex]))
			hex++;
		if (hex == 64)
			memcpy(cid, text + i, 64);
		memcpy(uid, text + i, 36);
		struct check c = {0};
		int n = pf_podcache_container_attrs(pc, cid, uid, check_attr, &c);
		FUZZ_CHECK(n == (int)c.n, "returned %d for %zu attributes", n, c.n);
		FUZZ_CHECK(c.labels <= PF_PODCACHE_MAX_LABELS, "%zu labels", c.labels);
		FUZZ_CHECK(c.uids <= 1, "%zu pod uids", c.uids);
		FUZZ_CHECK(n == 0 || c.uids == 1, "attributes without k8s.pod.uid");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char seed[] =
	    "{\"metadata\":{\"resourceVersion\":\"1\"},\"items\":[{\"metadata\":{\"uid\":"
	    "\"5f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f\",\"name\":\"p\",\"namespace\":\"n\"},"
	    "\"status\":{\"containerStatuses\":[{\"name\":\"c\",\"containerID\":\"containerd://"
	    "123beec1446e73544a838df719244e188ea8f7bd60b4531a75f9844d954ae3c3\"}]}}]}";
	struct pf_podcache_options o = {
	    .api_url = "http://127.0.0.1:1", .node_name = "n", .max_pods = MAX_PODS};
	struct pf_podcache *pc = pf_podcache_new(&o, NULL);
	FUZZ_CHECK(pc != NULL, "pf_podcache_new");
	char *text = malloc(size + 1);
	FUZZ_CHECK(text != NULL, "malloc");
	memcpy(text, data, size);
	text[size] = 0;
	if (size && (data[0] & 1))
		FUZZ_CHECK(pf_podcache_apply_list(pc, seed, strlen(seed), NULL, 0, NULL) == 0,
			   "seed list");

	struct pf_podcache_stats before, after;
	char rv[64] = "";
	struct pf_error err = {0};
	int r = pf_podcache_apply_event(pc, text, size, rv, sizeof(rv), &err);
	FUZZ_CHECK(r == 0 || r == -ESTALE || r == -EPROTO || r == -EBADMSG || r == -ENOMEM,
		   "event: %d", r);
	FUZZ_CHECK(r == 0 || err.msg[0], "event error %d without a message", r);
	pf_podcache_stats(pc, &after);
	FUZZ_CHECK(after.pods <= MAX_PODS, "%llu pods", (unsigned long long)after.pods);
	lookups(pc, text);

	pf_podcache_stats(pc, &before);
	pf_error_clear(&err);
	r = pf_podcache_apply_list(pc, text, size, rv, sizeof(rv), &err);
	FUZZ_CHECK(r == 0 || r == -EBADMSG || r == -ENOMEM, "list: %d", r);
	pf_podcache_stats(pc, &after);
	if (r < 0) {
		FUZZ_CHECK(err.msg[0] || r == -ENOMEM, "list error without a message");
		FUZZ_CHECK(after.generation == before.generation && after.pods == before.pods,
			   "a failed list changed the cache");
	} else {
		FUZZ_CHECK(after.pods <= MAX_PODS, "%llu pods", (unsigned long long)after.pods);
		FUZZ_CHECK(after.lists == before.lists + 1, "list not counted");
	}
	lookups(pc, text);
	free(text);
	pf_podcache_free(pc);
	return 0;
}
