/* api_ingest.c — see api_ingest.h. */
#include "api_ingest.h"

#include <jansson.h>

#include "api_int.h"
#include "opamp/credential.h"
#include "pf/uuid.h"
#include "receivers/pyroscope_ingest.h"

void pf_api_pyroscope_ingest(struct pf_api *api, const struct pf_api_request *req,
			     struct pf_api_response *resp)
{
	const struct pf_api_caller *c = &req->call->caller;
	if (c->role != PF_ROLE_AGENT) {
		pf_api_error(resp, 403, "permission_denied",
			     "the Pyroscope receiver takes an agent token; this token is %s",
			     pf_role_name(c->role));
		return;
	}
	char uid[PF_UUID_STR_LEN + 1];
	struct pf_pyroscope_request q = {
	    .n_args = req->n_args,
	    .args = req->args,
	    .body = req->body,
	    .len = req->body_len,
	    .content_type = req->content_type,
	    .gzip = req->body_gzip,
	    .max_bytes = req->max_body_bytes,
	    .now_ms = req->now_ms,
	    .check = pf_credential_check_upload,
	    .check_ud = c->agent_bound ? (void *)c->agent_uid : NULL,
	};
	if (c->agent_bound) {
		pf_uuid_format(c->agent_uid, uid);
		q.agent_uid = uid;
	}
	struct pf_pyroscope_result res;
	if (pf_pyroscope_ingest(api->store, &q, &res) < 0 || res.status >= 300) {
		static const struct {
			int status;
			const char *code;
		} codes[] = {{400, "invalid_argument"},
			     {403, "permission_denied"},
			     {413, "too_large"},
			     {503, "store_unavailable"},
			     {500, "internal"}};
		const char *code = "internal";
		for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
			if (codes[i].status == res.status)
				code = codes[i].code;
		pf_api_error(resp, res.status >= 300 ? res.status : 500, code, "%s", res.message);
		if (res.status == 503) {
			snprintf(resp->extra_header_name, sizeof(resp->extra_header_name),
				 "Retry-After:");
			snprintf(resp->extra_header_value, sizeof(resp->extra_header_value), "1");
		}
		return;
	}
	json_t *o = json_pack("{s:I, s:I, s:I}", "stored", (json_int_t)res.stored, "rejected",
			      (json_int_t)res.rejected, "samples", (json_int_t)res.samples);
	if (o && res.message[0])
		json_object_set_new(o, "message", json_string(res.message));
	pf_api_respond_json(resp, 200, o);
}
