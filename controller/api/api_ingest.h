/* api_ingest.h — the API's receiving route: Pyroscope's push API, POST /ingest (agent
 * token), over receivers/pyroscope_ingest.h. The server hands such a request to the
 * receiver's writer pool (server_jobs.h), whose job calls pf_api_handle() with the writer's
 * store like a query job does; the loop runs it inline only when no pool is there. Answers:
 * 200 {"stored":N,"rejected":N,"samples":N} (the store's partial success in "message"),
 * else the JSON error of the status the receiver chose (400, 403, 413, 503). docs/api.md
 * "Pyroscope receiver". */
#ifndef PF_API_INGEST_H
#define PF_API_INGEST_H

#include "api.h"

void pf_api_pyroscope_ingest(struct pf_api *api, const struct pf_api_request *req,
			     struct pf_api_response *resp);

#endif
