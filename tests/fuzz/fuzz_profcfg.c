/* fuzz_profcfg.c — the profiling config document (common/include/pf/profcfg.h
 * pf_profcfg_parse), as the controller's PUT /api/v1/configs/{name} and the agent's remote
 * config apply both parse it. The input is the YAML text (not NUL-terminated: the parser gets
 * a length and must not read past it).
 *
 * Invariants checked:
 *  - a rejection is -EINVAL (err.msg set; a syntax error has an empty path and says "line",
 *    any other names the key path it starts with) or -E2BIG past PF_PROFCFG_MAX_DOC;
 *  - an accepted document round-trips: pf_profcfg_emit_yaml() output parses again into an
 *    equal config (pf_profcfg_equal) whose emitted YAML is byte-identical. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "pf/profcfg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pf_profcfg *cfg = NULL, *cfg2 = NULL;
	struct pf_error err = {0};
	struct pf_buf y1, y2;

	int rc = pf_profcfg_parse((const char *)data, size, &cfg, &err);
	if (rc < 0) {
		FUZZ_CHECK(rc == -EINVAL || (rc == -E2BIG && size > PF_PROFCFG_MAX_DOC),
			   "parse rc %d (%s)", rc, err.msg);
		FUZZ_CHECK(err.msg[0], "parse rc %d without a message", rc);
		if (err.path[0])
			FUZZ_CHECK(strncmp(err.msg, err.path, strlen(err.path)) == 0,
				   "message '%s' does not start with its path '%s'", err.msg,
				   err.path);
		FUZZ_CHECK(cfg == NULL, "config set on failure");
		return 0;
	}
	FUZZ_CHECK(cfg != NULL, "parse 0 without a config");
	pf_buf_init(&y1, (size_t)8 << 20);
	pf_buf_init(&y2, (size_t)8 << 20);
	rc = pf_profcfg_emit_yaml(cfg, &y1);
	FUZZ_CHECK(rc == 0, "emit of a parsed config: %d", rc);
	rc = pf_profcfg_parse((const char *)y1.data, y1.len, &cfg2, &err);
	FUZZ_CHECK(rc == 0, "emitted YAML does not parse: %d %s\n--- emitted:\n%s", rc, err.msg,
		   pf_buf_str(&y1));
	FUZZ_CHECK(pf_profcfg_equal(cfg, cfg2), "round trip changed the config:\n%s",
		   pf_buf_str(&y1));
	rc = pf_profcfg_emit_yaml(cfg2, &y2);
	FUZZ_CHECK(rc == 0, "second emit: %d", rc);
	FUZZ_CHECK(y1.len == y2.len && memcmp(y1.data, y2.data, y1.len) == 0,
		   "emit is not a fixed point");
	pf_profcfg_free(cfg);
	pf_profcfg_free(cfg2);
	pf_buf_release(&y1);
	pf_buf_release(&y2);
	return 0;
}
