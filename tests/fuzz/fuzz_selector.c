/* fuzz_selector.c — label selectors (common/include/pf/selector.h), the one piece of the
 * controller API's request validation that parses free text (GET /api/v1/agents?selector=,
 * assignment bodies). The input, cut at its first NUL, is the selector source.
 *
 * Invariants checked:
 *  - a rejection is NULL with errno EINVAL (or ENOMEM) and a message starting "selector:";
 *  - sources over PF_SELECTOR_MAX_SOURCE bytes are rejected;
 *  - the canonical form (pf_selector_source) compiles again to the same canonical form and
 *    matches the same attribute sets as the original. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "pf/selector.h"

struct attrs {
	const char *const *kv; /* key, value, ..., NULL */
};

static const char *lookup(const char *key, void *ud)
{
	const struct attrs *a = ud;
	for (size_t i = 0; a->kv[i]; i += 2)
		if (strcmp(a->kv[i], key) == 0)
			return a->kv[i + 1];
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *src = malloc(size + 1);
	struct pf_error err = {0};

	FUZZ_CHECK(src != NULL, "malloc");
	memcpy(src, data, size);
	src[size] = 0;
	errno = 0;
	struct pf_selector *sel = pf_selector_compile(src, &err);
	if (!sel) {
		FUZZ_CHECK(errno == EINVAL || errno == ENOMEM, "errno %d", errno);
		FUZZ_CHECK(strncmp(err.msg, "selector:", 9) == 0, "message '%s'", err.msg);
		free(src);
		return 0;
	}
	FUZZ_CHECK(strlen(src) <= PF_SELECTOR_MAX_SOURCE, "%zu-byte source accepted",
		   strlen(src));
	const char *canon = pf_selector_source(sel);
	FUZZ_CHECK(canon != NULL, "no source");
	struct pf_error err2 = {0};
	struct pf_selector *sel2 = pf_selector_compile(canon, &err2);
	if (!sel2 && strlen(canon) > PF_SELECTOR_MAX_SOURCE) {
		/* quoting can make the canonical form longer than the source; it is only shown,
		 * never stored or compiled again by the controller (which keeps the source) */
		pf_selector_free(sel);
		free(src);
		return 0;
	}
	FUZZ_CHECK(sel2 != NULL, "canonical form '%s' of '%s' does not compile: %s", canon, src,
		   err2.msg);
	FUZZ_CHECK(strcmp(canon, pf_selector_source(sel2)) == 0,
		   "canonical form not stable: '%s' then '%s'", canon, pf_selector_source(sel2));

	/* Attribute sets: none, some common ones, and values taken from the input itself. */
	static const char *const none[] = {NULL};
	static const char *const fleet[] = {"env", "prod", "team", "a", "host", "web-1",
					   "arch", "amd64", "region", "eu", NULL};
	const char *const mine[] = {"env", src, "host", canon, "k", "", NULL};
	const struct attrs sets[] = {{none}, {fleet}, {mine}};
	for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++)
		FUZZ_CHECK(pf_selector_match(sel, lookup, (void *)&sets[i]) ==
			       pf_selector_match(sel2, lookup, (void *)&sets[i]),
			   "'%s' and its canonical form '%s' disagree on set %zu", src, canon, i);
	pf_selector_free(sel);
	pf_selector_free(sel2);
	free(src);
	return 0;
}
