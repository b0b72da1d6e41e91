/* redact.h — what of a profiling config document an API caller may see. The secrets of a
 * document (exporters[].headers values, pf/profcfg.h) are shown as PF_PROFCFG_REDACTED to
 * every role but admin: a document with secrets is parsed and re-emitted (defaults filled
 * in, comments gone), one without is shown as stored, one that does not parse is not shown
 * at all (null). Admin sees documents as stored.
 *
 * Owns nothing: it builds JSON values for the caller's response. */
#ifndef PF_API_REDACT_H
#define PF_API_REDACT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* A config body as a JSON string for the caller (see above); null when hidden. */
json_t *pf_redact_config_body(const char *body, size_t len, bool admin);
/* Replaces agent.config.effective (pf_agent_to_json) by its redacted form in place. */
void pf_redact_agent_json(json_t *agent, bool admin);

#endif
