/* api_forward.c — see api_forward.h. */
#include "api_forward.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "api_captures.h"
#include "api_int.h"
#include "api_rollouts.h"
#include "fleet/capture.h"
#include "fleet/rollout.h"
#include "pf/log.h"
#include "pf/uuid.h"
#include "store.h"

int pf_api_forward(struct pf_api *api, const struct pf_api_request *req,
		   struct pf_api_response *resp, const char *kind, const char *target,
		   const char *action)
{
	struct pf_api_call *call = req->call;
	if (call && call->command) {
		resp->status = 0; /* not ours to run: the runner leaves it pending */
		return -EAGAIN;
	}
	if (!pf_store_is_shared(api->store))
		return -EOPNOTSUPP;
	uint8_t uid[16];
	char id[PF_UUID_STR_LEN + 1];
	int rc = pf_uuid_v7(uid);
	if (rc < 0) {
		pf_api_error(resp, 500, "internal", "no command id: %s", strerror(-rc));
		return rc;
	}
	pf_uuid_format(uid, id);
	struct pf_command_row c = {
	    .id = id,
	    .kind = kind,
	    .target = target,
	    .action = action,
	    .actor = call && call->caller.name[0] ? call->caller.name
			: call			  ? pf_role_name(call->caller.role)
						  : "anonymous",
	    .actor_id = call ? call->caller.token_id : "",
	    .source = req->peer ? req->peer : "",
	    .created_ms = req->now_ms,
	};
	rc = pf_store_command_add(api->store, &c);
	if (rc < 0) {
		pf_api_error(resp, 500, "store_error", "%s", pf_store_last_error(api->store));
		return rc;
	}
	snprintf(resp->forward_id, sizeof(resp->forward_id), "%s", id);
	resp->status = 202; /* until the driver's answer replaces it */
	pf_log_debug("api: %s %s %s forwarded to the replica that drives it (command %s)", kind,
		     target, action, id);
	return 0;
}

/* ---- Running the commands of others. */

/* Beyond its caller's wait, a pending command is withdrawn by whoever sees it (the margin
 * covers clocks of replicas that differ by a few seconds). */
#define STALE_MARGIN_MS 5000

/* Whether this replica answers a command: it drives the target, or the target is not active
 * anywhere (ended, or never existed), which every replica answers alike. */
static bool answers(struct pf_api *api, const struct pf_command_row *c)
{
	static const char *const active_ro[] = {"running", "paused", "halted", "rolling_back"};
	static const char *const active_cap[] = {"pending", "running"};
	bool ro = strcmp(c->kind, "rollout") == 0;
	int rc = 0;
	json_t *o;
	if (ro && api->rollouts) {
		if (pf_rollouts_drives(api->rollouts, c->target))
			return true;
		o = pf_api_rollout_json(api->rollouts, c->target, &rc);
	} else if (!ro && api->captures) {
		if (pf_captures_drives(api->captures, c->target))
			return true;
		o = pf_api_capture_json(api->captures, api->store, c->target, &rc);
	} else {
		return false;
	}
	if (!o)
		return rc == -ENOENT;
	const char *st = json_string_value(json_object_get(o, "state"));
	const char *const *act = ro ? active_ro : active_cap;
	size_t n = ro ? PF_ARRAY_SIZE(active_ro) : PF_ARRAY_SIZE(active_cap);
	bool active = false;
	for (size_t i = 0; st && i < n; i++)
		active |= strcmp(st, act[i]) == 0;
	json_decref(o);
	return !active;
}

struct pending {
	char id[40], kind[16], target[PF_ROLLOUT_ID_MAX + 48], action[16];
	char actor[65], actor_id[17], source[64];
	int64_t created_ms;
};

struct pending_list {
	struct pending v[PF_API_COMMANDS_PER_RUN];
	size_t n;
};

static int on_pending(const struct pf_command_row *c, void *ud)
{
	struct pending_list *l = ud;
	if (l->n == PF_ARRAY_SIZE(l->v))
		return 1;
	struct pending *p = &l->v[l->n];
	if (strlen(c->id) >= sizeof(p->id) || strlen(c->target) >= sizeof(p->target) ||
	    (strcmp(c->kind, "rollout") != 0 && strcmp(c->kind, "capture") != 0))
		return 0; /* not one this build makes: left alone, pruned with its age */
	snprintf(p->id, sizeof(p->id), "%s", c->id);
	snprintf(p->kind, sizeof(p->kind), "%s", c->kind);
	snprintf(p->target, sizeof(p->target), "%s", c->target);
	snprintf(p->action, sizeof(p->action), "%s", c->action);
	snprintf(p->actor, sizeof(p->actor), "%s", c->actor);
	snprintf(p->actor_id, sizeof(p->actor_id), "%s", c->actor_id);
	snprintf(p->source, sizeof(p->source), "%s", c->source);
	p->created_ms = c->created_ms;
	l->n++;
	return 0;
}

/* Claims and runs one command; true when it ran here. */
static bool run_one(struct pf_api *api, const struct pending *p, int64_t now_ms)
{
	struct pf_command_row c = {.id = p->id, .kind = p->kind, .target = p->target,
				   .action = p->action};
	if (now_ms - p->created_ms > PF_API_FORWARD_WAIT_MS + STALE_MARGIN_MS) {
		/* Its caller was answered already, or went away with the replica that took it:
		 * an action long after it was asked for is not what anybody asked for. */
		if (pf_store_command_move(api->store, p->id, PF_COMMAND_PENDING,
					  PF_COMMAND_WITHDRAWN) == 0)
			pf_log_info("api: command %s (%s %s of %s) withdrawn unrun: nobody drove its "
				    "target while its caller waited",
				    p->id, p->kind, p->action, p->target);
		return false;
	}
	if (!answers(api, &c) ||
	    pf_store_command_move(api->store, p->id, PF_COMMAND_PENDING, PF_COMMAND_RUNNING) < 0)
		return false;
	char path[256];
	bool ro = strcmp(p->kind, "rollout") == 0;
	if (ro)
		snprintf(path, sizeof(path), "/api/v1/rollouts/%s/%s", p->target, p->action);
	else
		snprintf(path, sizeof(path), "/api/v1/captures/%s", p->target);
	struct pf_api_request q = {
	    .method = ro ? "POST" : "DELETE",
	    .path = path,
	    .peer = p->source,
	    .now_ms = now_ms,
	};
	struct pf_api_caller who = {.role = PF_ROLE_OPERATOR};
	snprintf(who.name, sizeof(who.name), "%s", p->actor);
	snprintf(who.token_id, sizeof(who.token_id), "%s", p->actor_id);
	struct pf_api_response resp;
	pf_api_response_init(&resp);
	pf_api_handle_as(api, &q, &who, &resp);
	bool ran = resp.status != 0 && !resp.forward_id[0];
	int rc;
	if (ran) {
		pf_buf_append(&resp.body, "", 1); /* NUL-terminated for the store */
		rc = pf_store_command_finish(api->store, p->id, resp.status,
					     (const char *)resp.body.data);
	} else { /* its driver changed meanwhile: back for the one that drives it now */
		rc = pf_store_command_move(api->store, p->id, PF_COMMAND_RUNNING,
					   PF_COMMAND_PENDING);
	}
	if (rc < 0)
		pf_log_warn("api: command %s (%s %s %s): %s", p->id, p->kind, p->target, p->action,
			    pf_store_last_error(api->store));
	else if (ran)
		pf_log_info("api: ran %s %s of %s for another replica: %d", p->kind, p->action,
			    p->target, resp.status);
	pf_api_response_release(&resp);
	return ran && rc == 0;
}

size_t pf_api_commands_run(struct pf_api *api, int64_t now_ms)
{
	struct pending_list l = {.n = 0};
	if (!api || !pf_store_is_shared(api->store))
		return 0;
	if (pf_store_commands_pending(api->store, PF_API_COMMANDS_PER_RUN, on_pending, &l) < 0) {
		pf_log_debug("api: pending commands: %s", pf_store_last_error(api->store));
		return 0;
	}
	size_t ran = 0;
	for (size_t i = 0; i < l.n; i++)
		ran += run_one(api, &l.v[i], now_ms);
	return ran;
}

/* ---- The answer, on the replica that took the call. */

struct outcome {
	enum pf_command_state state;
	int status;
	struct pf_api_response *resp;
};

static int on_outcome(const struct pf_command_row *c, void *ud)
{
	struct outcome *o = ud;
	o->state = c->state;
	o->status = c->status;
	if (c->state == PF_COMMAND_DONE) {
		pf_buf_reset(&o->resp->body);
		if (pf_buf_append(&o->resp->body, c->body, strlen(c->body)) < 0)
			return -ENOMEM;
	}
	return 0;
}

int pf_api_forward_outcome(struct pf_api *api, const char *id, bool give_up,
			   struct pf_api_response *resp)
{
	struct outcome o = {.resp = resp};
	int rc = pf_store_command_get(api->store, id, on_outcome, &o);
	if (rc == 0 && o.state == PF_COMMAND_PENDING && give_up) {
		rc = pf_store_command_move(api->store, id, PF_COMMAND_PENDING,
					   PF_COMMAND_WITHDRAWN);
		if (rc == -EALREADY) /* run (or claimed) just now */
			rc = pf_store_command_get(api->store, id, on_outcome, &o);
		else if (rc == 0)
			o.state = PF_COMMAND_WITHDRAWN;
	}
	if (rc < 0) {
		pf_api_error(resp, 500, "store_error", "%s", pf_store_last_error(api->store));
		return rc;
	}
	switch (o.state) {
	case PF_COMMAND_DONE:
		resp->status = o.status;
		resp->content_type = "application/json";
		return 1;
	case PF_COMMAND_WITHDRAWN:
		pf_api_error(resp, 503, "driver_unavailable",
			     "no controller replica drives the target of this command now (its "
			     "replica stopped and none took it over within %d s); nothing was "
			     "done: retry",
			     PF_API_FORWARD_WAIT_MS / 1000);
		snprintf(resp->extra_header_name, sizeof(resp->extra_header_name), "Retry-After:");
		snprintf(resp->extra_header_value, sizeof(resp->extra_header_value), "5");
		return 1;
	case PF_COMMAND_RUNNING:
	case PF_COMMAND_PENDING:
		if (!give_up)
			return 0;
		pf_api_error(resp, 504, "command_running",
			     "the replica that drives the target took the command but did not "
			     "answer within %d s; GET the target for its outcome",
			     PF_API_FORWARD_WAIT_MS / 1000);
		return 1;
	}
	return 0;
}
