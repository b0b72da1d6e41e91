/* redact.c — see redact.h. */
#include "redact.h"

#include "pf/buf.h"
#include "pf/profcfg.h"

json_t *pf_redact_config_body(const char *body, size_t len, bool admin)
{
	if (!body)
		return json_null();
	if (admin)
		return json_stringn(body, len);
	struct pf_buf b;
	pf_buf_init(&b, PF_PROFCFG_MAX_DOC * 2);
	json_t *out = pf_profcfg_redact_yaml(body, len, &b) == 0
			  ? json_stringn(b.data ? (const char *)b.data : "", b.len)
			  : json_null();
	pf_buf_release(&b);
	return out ? out : json_null();
}

void pf_redact_agent_json(json_t *agent, bool admin)
{
	json_t *cfg = json_object_get(agent, "config");
	json_t *eff = cfg ? json_object_get(cfg, "effective") : NULL;
	if (admin || !json_is_string(eff))
		return;
	json_object_set_new(
	    cfg, "effective",
	    pf_redact_config_body(json_string_value(eff), json_string_length(eff), false));
}
