/* api_captures.h — the incident-capture routes of the REST API (docs/api.md "Captures"),
 * dispatched from api.c's route() after authentication and the role check (GET viewer, POST
 * and DELETE operator). Plain functions over the parsed request; the state machine is
 * fleet/capture.h.
 *
 *   POST   /api/v1/captures                 202 {"id","state","agents_matched"}
 *   GET    /api/v1/captures[?state=&limit=&cursor=]   newest first, next_cursor
 *   GET    /api/v1/captures/{id}            the capture with its per-agent states
 *   DELETE /api/v1/captures/{id}            cancels; 200 with the capture
 * Bad input answers 400 with the field path in error.path (unknown keys, duration_seconds
 * 0 or over the maximum, frequency_hz out of range, bad selector, process rule or regexp,
 * body over PF_CAPTURE_MAX_MSG bytes); no matching agent 422; an agent already in
 * PF_CAPTURES_MAX_PER_AGENT unfinished captures 409. Every mutation is audited. */
#ifndef PF_API_CAPTURES_H
#define PF_API_CAPTURES_H

#include "api.h"

#define PF_API_CAPTURES_LIST_DEFAULT 100
#define PF_API_CAPTURES_LIST_MAX 1000

/* id: the path segment after /captures/, or NULL for the collection. role: the caller's. */
void pf_api_captures_handle(struct pf_api *api, const struct pf_api_request *req,
			    struct pf_api_response *resp, const char *id, const char *role);

struct json_t;
struct pf_captures;
/* ---- JSON views (docs/api.md "Captures"); caller owns the reference. NULL with *rc:
 * -ENOENT, -ENOMEM, -EIO. st is the store the captures live in (profile ids are looked up). */
struct json_t *pf_api_capture_json(struct pf_captures *c, struct pf_store *st, const char *id,
				   int *rc);
/* {"captures":[...without agents...],"next_cursor":id|null}; state NULL = any. */
struct json_t *pf_api_captures_list_json(struct pf_captures *c, const char *state, size_t limit,
					 const char *cursor, int *rc);

#endif
