/* capture.c — see capture.h. */
#include "capture.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fleet.h"
#include "pf/compiler.h"
#include "pf/log.h"
#include "pf/selector.h"
#include "pf/uuid.h"
#include "store.h"

#define DEADLINE_ERROR_CODE "timeout"
#define DEADLINE_ERROR "no result before the deadline"
/* Replicas sharing PostgreSQL: an agent another replica serves is failed by the capture's
 * creator only this long after the deadline (its own replica fails it at the deadline). */
#define REMOTE_GRACE_MS 10000

struct cap_agent {
	uint8_t uid[16];
	uint8_t state;	      /* enum pf_capture_agent_state */
	bool sent : 1;	      /* capture.request handed to the transport */
	bool cancel_owed : 1; /* capture.cancel still to send */
	bool dirty : 1;	      /* to be written */
	/* Replicas sharing PostgreSQL: served by another replica, which sends the request and
	 * writes the row; here its state is read back from the store (refresh_remote). */
	bool remote : 1;
	uint16_t n_ids;
	uint64_t samples, bytes;
	uint8_t (*ids)[16];
	char *error_code, *error;
	int64_t updated_ms;
};

struct cap {
	char id[PF_CAPTURE_ID_MAX + 1];
	uint8_t state; /* enum pf_capture_overall */
	bool cancelled, dirty;
	/* Replicas sharing PostgreSQL: has_remote, some agents are served by other replicas;
	 * participant, another replica created it and this one only serves its own agents (it
	 * never writes the capture's row and forgets it at the deadline). */
	bool has_remote, participant;
	int64_t created_ms, started_ms, finished_ms, deadline_ms;
	char *created_by, *request_json;
	struct pf_capture_request req;
	size_t n_agents;
	struct cap_agent *agents; /* sorted by uid */
};

struct pf_captures {
	struct pf_fleet *fleet;
	struct pf_store *store;
	pf_captures_send_fn send;
	void *ud;
	uint32_t grace_s;
	char *receiver;
	struct cap **v; /* in memory, creation order */
	size_t n, cap;
	struct pf_buf msg; /* the last encoded message handed out */
	struct pf_captures_stats st;
};

static const char *const agent_state_names[] = {
    "pending", "accepted", "running", "done", "failed", "cancelled", "unreachable", "unsupported"};
static const char *const overall_names[] = {"pending", "running", "done",
					    "partial", "failed",  "cancelled"};

const char *pf_capture_agent_state_name(enum pf_capture_agent_state s)
{
	return (unsigned)s < PF_ARRAY_SIZE(agent_state_names) ? agent_state_names[s] : "unknown";
}

const char *pf_capture_overall_name(enum pf_capture_overall s)
{
	return (unsigned)s < PF_ARRAY_SIZE(overall_names) ? overall_names[s] : "unknown";
}

int pf_capture_overall_parse(const char *name, enum pf_capture_overall *out)
{
	for (size_t i = 0; name && i < PF_ARRAY_SIZE(overall_names); i++) {
		if (strcmp(name, overall_names[i]) == 0) {
			*out = (enum pf_capture_overall)i;
			return 0;
		}
	}
	return -EINVAL;
}

static int agent_state_parse(const char *name)
{
	for (size_t i = 0; name && i < PF_ARRAY_SIZE(agent_state_names); i++)
		if (strcmp(name, agent_state_names[i]) == 0)
			return (int)i;
	return -EINVAL;
}

static bool agent_open(uint8_t s)
{
	return s == PF_CA_PENDING || s == PF_CA_ACCEPTED || s == PF_CA_RUNNING;
}

enum pf_capture_overall pf_capture_overall_of(const uint8_t *st, size_t n, bool cancelled)
{
	size_t open = 0, answered = 0, delivered = 0;

	if (cancelled)
		return PF_CO_CANCELLED;
	for (size_t i = 0; i < n; i++) {
		if (agent_open(st[i]))
			open++;
		if (st[i] != PF_CA_PENDING && st[i] != PF_CA_UNREACHABLE &&
		    st[i] != PF_CA_UNSUPPORTED)
			answered++;
		if (st[i] == PF_CA_DONE)
			delivered++;
	}
	if (open)
		return answered ? PF_CO_RUNNING : PF_CO_PENDING;
	if (delivered == n && n > 0)
		return PF_CO_DONE;
	return delivered ? PF_CO_PARTIAL : PF_CO_FAILED;
}

static bool overall_final(uint8_t s)
{
	return s != PF_CO_PENDING && s != PF_CO_RUNNING;
}

/* ------------------------------------------------------------------ lifecycle */

static void cap_free(struct cap *k)
{
	if (!k)
		return;
	for (size_t i = 0; i < k->n_agents; i++) {
		free(k->agents[i].ids);
		free(k->agents[i].error_code);
		free(k->agents[i].error);
	}
	free(k->agents);
	free(k->created_by);
	free(k->request_json);
	pf_capture_request_release(&k->req);
	free(k);
}

struct pf_captures *pf_captures_new(const struct pf_captures_options *opt, struct pf_fleet *f,
				    struct pf_store *st, pf_captures_send_fn send, void *ud)
{
	struct pf_captures *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->fleet = f;
	c->store = st;
	c->send = send;
	c->ud = ud;
	c->grace_s = opt && opt->grace_s ? opt->grace_s : PF_CAPTURES_DEFAULT_GRACE_S;
	if (opt && opt->receiver_url && !(c->receiver = strdup(opt->receiver_url))) {
		free(c);
		return NULL;
	}
	pf_buf_init(&c->msg, PF_CAPTURE_MAX_MSG + 1);
	return c;
}

void pf_captures_set_sender(struct pf_captures *c, pf_captures_send_fn fn, void *ud)
{
	c->send = fn;
	c->ud = ud;
}

static int send_msg(struct pf_captures *c, struct pf_agent *a, const char *type)
{
	return c->send ? c->send(a, type, c->msg.data, c->msg.len, c->ud) : -EAGAIN;
}

void pf_captures_free(struct pf_captures *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		cap_free(c->v[i]);
	free(c->v);
	free(c->receiver);
	pf_buf_release(&c->msg);
	free(c);
}

void pf_captures_stats(const struct pf_captures *c, struct pf_captures_stats *out)
{
	*out = c->st;
	out->open = pf_captures_open(c);
}

size_t pf_captures_open(const struct pf_captures *c)
{
	size_t n = 0;
	for (size_t i = 0; i < c->n; i++)
		n += !overall_final(c->v[i]->state);
	return n;
}

static int push(struct pf_captures *c, struct cap *k)
{
	struct cap **nv = pf_fleet_grow(c->v, &c->cap, c->n, sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	c->v = nv;
	c->v[c->n++] = k;
	return 0;
}

static struct cap *find(struct pf_captures *c, const char *id)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->v[i]->id, id) == 0)
			return c->v[i];
	return NULL;
}

static int uid_cmp(const void *a, const void *b)
{
	return memcmp(a, b, 16); /* struct cap_agent starts with the uid */
}

static struct cap_agent *find_agent(struct cap *k, const uint8_t uid[16])
{
	return bsearch(uid, k->agents, k->n_agents, sizeof(*k->agents), uid_cmp);
}

static void set_str(char **dst, const char *v)
{
	free(*dst);
	*dst = v && *v ? strdup(v) : NULL;
}

/* Recomputes the capture's state after agent changes. */
static void update_state(struct cap *k, int64_t now_ms)
{
	uint8_t small[64] = {0};
	uint8_t *st = k->n_agents <= PF_ARRAY_SIZE(small) ? small : malloc(k->n_agents);
	if (!st)
		return; /* out of memory: the next change recomputes it */
	for (size_t i = 0; i < k->n_agents; i++)
		st[i] = k->agents[i].state;
	uint8_t s = (uint8_t)pf_capture_overall_of(st, k->n_agents, k->cancelled);
	if (st != small)
		free(st);
	if (s == k->state)
		return;
	if (s != PF_CO_PENDING && !k->started_ms)
		k->started_ms = now_ms;
	if (overall_final(s) && !k->finished_ms)
		k->finished_ms = now_ms;
	k->state = s;
	k->dirty = true;
}

static void agent_set(struct cap_agent *ag, uint8_t state, const char *code, const char *msg,
		      int64_t now_ms)
{
	ag->state = state;
	if (code)
		set_str(&ag->error_code, code);
	if (msg)
		set_str(&ag->error, msg);
	ag->updated_ms = now_ms;
	ag->dirty = true;
}

/* ------------------------------------------------------------------ sending */

static int encode_request(struct pf_captures *c, struct cap *k)
{
	pf_buf_reset(&c->msg);
	return pf_capture_request_encode(&k->req, &c->msg);
}

/* Whether a pending agent may still be sent the request: the deadline leaves it the whole
 * duration (the grace covers export and the report). */
static bool time_left(const struct cap *k, int64_t now_ms)
{
	return now_ms + (int64_t)k->req.duration_seconds * 1000 < k->deadline_ms;
}

/* Sends what agent ag of capture k is owed through the hook: 0 sent or nothing owed,
 * -EAGAIN the transport wants it in a reply. */
static int send_owed(struct pf_captures *c, struct cap *k, struct cap_agent *ag, struct pf_agent *a,
		     bool resend, int64_t now_ms)
{
	int rc = 0;
	if (k->cancelled) {
		if (!ag->cancel_owed)
			return 0;
		pf_buf_reset(&c->msg);
		rc = pf_capture_cancel_encode(k->id, &c->msg);
		if (rc == 0)
			rc = send_msg(c, a, PF_CAPTURE_TYPE_CANCEL);
		if (rc == 0) {
			ag->cancel_owed = false;
			c->st.cancels_sent++;
		}
		return rc;
	}
	if (ag->state != PF_CA_PENDING || (ag->sent && !resend) || !time_left(k, now_ms))
		return 0;
	rc = encode_request(c, k);
	if (rc == 0)
		rc = send_msg(c, a, PF_CAPTURE_TYPE_REQUEST);
	if (rc == 0) {
		ag->sent = true;
		c->st.requests_sent++;
	} else if (rc != -EAGAIN)
		pf_log_warn("captures: %s: could not send the request: %s", k->id, strerror(-rc));
	return rc;
}

/* ------------------------------------------------------------------ create, cancel */

static const char *attr_lookup(const char *key, void *ud)
{
	return pf_agent_attr(ud, key);
}

/* Unfinished captures agent uid is open in. */
static size_t open_count(struct pf_captures *c, const uint8_t uid[16])
{
	size_t n = 0;
	for (size_t i = 0; i < c->n; i++) {
		struct cap *k = c->v[i];
		struct cap_agent *ag;
		if (!overall_final(k->state) && (ag = find_agent(k, uid)) && agent_open(ag->state))
			n++;
	}
	return n;
}

static int flush_cap(struct pf_captures *c, struct cap *k, bool all_agents);

int pf_captures_create(struct pf_captures *c, struct pf_capture_request *req, const char *selector,
		       const char *request_json, const char *created_by, int64_t now_ms,
		       char id[PF_CAPTURE_ID_MAX + 1], size_t *matched, struct pf_error *err)
{
	uint8_t uid[16];
	char ids[PF_UUID_STR_LEN + 1];
	int rc = pf_uuid_v7(uid);
	if (rc < 0)
		return pf_error_set(err, rc, NULL, "cannot make a capture id");
	pf_uuid_format(uid, ids);
	snprintf(req->id, sizeof(req->id), "%s", ids);
	if (c->receiver && !req->receiver && !(req->receiver = strdup(c->receiver)))
		return -ENOMEM;
	rc = pf_capture_request_check(req, err);
	if (rc < 0)
		return rc;
	if (pf_captures_open(c) >= PF_CAPTURES_MAX_OPEN)
		return pf_error_set(err, -ENOSPC, NULL, "%d captures are running already",
				    PF_CAPTURES_MAX_OPEN);
	struct pf_selector *sel = pf_selector_compile(selector ? selector : "", err);
	if (!sel)
		return err && err->code ? err->code : -EINVAL;

	/* The matches, first without touching anything (limits). */
	size_t n = 0, it = 0;
	struct pf_agent *a;
	while ((a = pf_fleet_next(c->fleet, &it)))
		n += pf_selector_match(sel, attr_lookup, a);
	if (n == 0) {
		pf_selector_free(sel);
		return pf_error_set(err, -ENOENT, "agents", "no agent matches '%s'",
				    selector ? selector : "");
	}
	if (n > PF_CAPTURES_MAX_AGENTS) {
		pf_selector_free(sel);
		return pf_error_set(err, -E2BIG, "agents",
				    "matches %zu agents; a capture takes at most %d", n,
				    PF_CAPTURES_MAX_AGENTS);
	}
	struct cap *k = calloc(1, sizeof(*k));
	struct pf_agent **list = calloc(n, sizeof(*list));
	if (!k || !list || !(k->agents = calloc(n, sizeof(*k->agents)))) {
		free(list);
		free(k);
		pf_selector_free(sel);
		return -ENOMEM;
	}
	size_t m = 0;
	it = 0;
	while ((a = pf_fleet_next(c->fleet, &it)) && m < n)
		if (pf_selector_match(sel, attr_lookup, a))
			list[m++] = a;
	pf_selector_free(sel);
	for (size_t i = 0; i < m; i++) {
		a = list[i];
		if (a->connected && a->capture_capable &&
		    open_count(c, a->uid) >= PF_CAPTURES_MAX_PER_AGENT) {
			char u[PF_UUID_STR_LEN + 1];
			pf_uuid_format(a->uid, u);
			free(list);
			free(k->agents);
			free(k);
			return pf_error_set(err, -EBUSY, "agents",
					    "agent %s is already in %d unfinished captures", u,
					    PF_CAPTURES_MAX_PER_AGENT);
		}
	}

	/* Take ownership of the request's strings. */
	memcpy(k->id, req->id, sizeof(k->id));
	k->req = *req;
	memset(req->processes, 0, sizeof(req->processes));
	req->note = req->receiver = NULL;
	req->n_processes = 0;
	k->created_ms = now_ms;
	k->deadline_ms = now_ms + ((int64_t)k->req.duration_seconds + c->grace_s) * 1000;
	k->created_by = strdup(created_by ? created_by : "");
	k->request_json = strdup(request_json ? request_json : "{}");
	k->n_agents = m;
	k->dirty = true;
	for (size_t i = 0; i < m; i++) {
		memcpy(k->agents[i].uid, list[i]->uid, 16);
		k->agents[i].dirty = true;
		k->agents[i].updated_ms = now_ms;
		/* Connected to another replica: it sends the request (notified by the row). */
		k->agents[i].remote = !list[i]->connected && pf_agent_online(list[i]);
		k->has_remote |= k->agents[i].remote;
		k->agents[i].state = k->agents[i].remote	 ? PF_CA_PENDING
				     : !list[i]->connected	 ? PF_CA_UNREACHABLE
				     : !list[i]->capture_capable ? PF_CA_UNSUPPORTED
								 : PF_CA_PENDING;
		if (k->agents[i].state == PF_CA_UNREACHABLE)
			set_str(&k->agents[i].error, "not connected");
		else if (k->agents[i].state == PF_CA_UNSUPPORTED)
			set_str(&k->agents[i].error, "does not advertise " PF_CAPTURE_CAPABILITY);
	}
	qsort(k->agents, m, sizeof(*k->agents), uid_cmp);
	if (!k->created_by || !k->request_json || push(c, k) < 0) {
		free(list);
		cap_free(k);
		return -ENOMEM;
	}
	update_state(k, now_ms);
	/* Durable before anything is sent or answered. */
	rc = flush_cap(c, k, true);
	if (rc < 0) {
		c->n--;
		free(list);
		cap_free(k);
		return pf_error_set(err, rc, NULL, "cannot store the capture: %s",
				    pf_store_last_error(c->store));
	}
	for (size_t i = 0; i < m; i++) {
		struct cap_agent *ag = find_agent(k, list[i]->uid);
		if (ag && ag->state == PF_CA_PENDING && !ag->remote)
			send_owed(c, k, ag, list[i], false, now_ms);
	}
	free(list);
	memcpy(id, k->id, sizeof(k->id));
	*matched = m;
	c->st.created++;
	return 0;
}

bool pf_captures_drives(struct pf_captures *c, const char *id)
{
	struct cap *k = c && id ? find(c, id) : NULL;
	return k && !k->participant && !overall_final(k->state);
}

int pf_captures_cancel(struct pf_captures *c, const char *id, int64_t now_ms, struct pf_error *err)
{
	struct cap *k = find(c, id);
	if (!k)
		return pf_error_set(err, -ENOENT, NULL, "no running capture '%s'", id);
	if (k->participant)
		return pf_error_set(err, -ENOENT, NULL,
				    "capture %s was created through another controller replica: "
				    "cancel it there",
				    id);
	if (overall_final(k->state))
		return pf_error_set(err, -EALREADY, NULL, "capture %s already ended (%s)", id,
				    pf_capture_overall_name(k->state));
	k->cancelled = true;
	for (size_t i = 0; i < k->n_agents; i++) {
		struct cap_agent *ag = &k->agents[i];
		if (!agent_open(ag->state))
			continue;
		ag->cancel_owed = ag->sent || ag->state != PF_CA_PENDING;
		ag->remote = false; /* its row says cancelled from now on; its replica follows */
		agent_set(ag, PF_CA_CANCELLED, NULL, "cancelled by the operator", now_ms);
	}
	update_state(k, now_ms);
	int rc = flush_cap(c, k, false);
	for (size_t i = 0; i < k->n_agents; i++) {
		struct cap_agent *ag = &k->agents[i];
		struct pf_agent *a;
		if (ag->cancel_owed && (a = pf_fleet_find(c->fleet, ag->uid)) && a->connected)
			send_owed(c, k, ag, a, false, now_ms);
	}
	if (rc < 0)
		return pf_error_set(err, rc, NULL, "cancelled, but not stored yet: %s",
				    pf_store_last_error(c->store));
	return 0;
}

/* ------------------------------------------------------------------ OpAMP */

/* true when the status was applied */
static bool apply_status(struct cap *k, struct cap_agent *ag, const struct pf_capture_status *s,
			 int64_t now_ms)
{
	static const uint8_t map[] = {
	    [PF_CAPTURE_ACCEPTED] = PF_CA_ACCEPTED,   [PF_CAPTURE_RUNNING] = PF_CA_RUNNING,
	    [PF_CAPTURE_DONE] = PF_CA_DONE,	      [PF_CAPTURE_FAILED] = PF_CA_FAILED,
	    [PF_CAPTURE_CANCELLED] = PF_CA_CANCELLED,
	};
	uint8_t to = map[s->state];
	uint8_t from = ag->state;
	bool ok;

	if (from == PF_CA_UNREACHABLE || from == PF_CA_UNSUPPORTED)
		ok = false; /* never sent a request: not waited for */
	else if (from == PF_CA_CANCELLED)
		ok = k->cancelled; /* after our cancel: the agent's last word still counts */
	else if (agent_open(from))
		ok = to >= from;
	else
		ok = false; /* done / failed are final */
	if (!ok) {
		pf_log_debug("captures: %s: status %s ignored in state %s", k->id,
			     pf_capture_state_name(s->state), agent_state_names[from]);
		return false;
	}
	if (!(from == PF_CA_CANCELLED && to != PF_CA_DONE))
		ag->state = to;
	ag->sent = true;
	ag->samples = s->samples;
	ag->bytes = s->bytes;
	if (s->n_profile_ids >= ag->n_ids && s->n_profile_ids) {
		void *ids = malloc(s->n_profile_ids * 16);
		if (ids) {
			memcpy(ids, s->profile_ids, s->n_profile_ids * 16);
			free(ag->ids);
			ag->ids = ids;
			ag->n_ids = (uint16_t)s->n_profile_ids;
		}
	}
	if (s->error_code[0] || s->error[0] || !pf_capture_state_final(s->state)) {
		set_str(&ag->error_code, s->error_code);
		set_str(&ag->error, s->error);
	}
	ag->updated_ms = now_ms;
	ag->dirty = true;
	update_state(k, now_ms);
	return true;
}

void pf_captures_on_custom(struct pf_captures *c, struct pf_agent *a, const char *capability,
			   const char *type, const uint8_t *data, size_t len, int64_t now_ms)
{
	if (!capability || strcmp(capability, PF_CAPTURE_CAPABILITY) != 0 || !type)
		return;
	if (strcmp(type, PF_CAPTURE_TYPE_STATUS) != 0) {
		pf_log_debug("captures: ignoring custom message type '%.64s'", type);
		return;
	}
	struct pf_capture_status s;
	struct pf_error err = {0};
	char u[PF_UUID_STR_LEN + 1];
	pf_uuid_format(a->uid, u);
	if (pf_capture_status_decode(data ? data : (const uint8_t *)"", len, &s, &err) < 0) {
		pf_log_warn("captures: agent %s sent a bad capture.status: %s", u, err.msg);
		c->st.statuses_ignored++;
		return;
	}
	struct cap *k = find(c, s.id);
	struct cap_agent *ag = k ? find_agent(k, a->uid) : NULL;
	if (!ag) {
		/* Agents re-send their last final statuses on every new connection: after a
		 * controller restart that is every agent, so this stays at debug. */
		pf_log_debug("captures: agent %s reported on capture %s, which it is not part "
			     "of (or which ended)",
			     u, s.id);
		c->st.statuses_ignored++;
		return;
	}
	if (overall_final(k->state) && !k->cancelled) {
		pf_log_debug("captures: %s ended; status from %s ignored", k->id, u);
		c->st.statuses_ignored++;
		return;
	}
	if (apply_status(k, ag, &s, now_ms))
		c->st.statuses++;
	else
		c->st.statuses_ignored++;
}

void pf_captures_agent_seen(struct pf_captures *c, struct pf_agent *a, bool first_on_conn,
			    int64_t now_ms)
{
	for (size_t i = 0; i < c->n; i++) {
		struct cap *k = c->v[i];
		struct cap_agent *ag;
		if (now_ms >= k->deadline_ms || !(ag = find_agent(k, a->uid)))
			continue;
		ag->remote = false; /* connected here now: this replica serves it */
		if (send_owed(c, k, ag, a, first_on_conn, now_ms) == -EAGAIN)
			return; /* the reply carries one; the next message the rest */
	}
}

bool pf_captures_owed(struct pf_captures *c, struct pf_agent *a, int64_t now_ms, const char **type,
		      const uint8_t **data, size_t *len)
{
	for (size_t i = 0; i < c->n; i++) {
		struct cap *k = c->v[i];
		struct cap_agent *ag;
		if (now_ms >= k->deadline_ms || !(ag = find_agent(k, a->uid)))
			continue;
		int rc = -EAGAIN;
		if (k->cancelled && ag->cancel_owed) {
			pf_buf_reset(&c->msg);
			rc = pf_capture_cancel_encode(k->id, &c->msg);
			*type = PF_CAPTURE_TYPE_CANCEL;
			if (rc == 0) {
				ag->cancel_owed = false;
				c->st.cancels_sent++;
			}
		} else if (!k->cancelled && ag->state == PF_CA_PENDING && !ag->sent &&
			   time_left(k, now_ms)) {
			rc = encode_request(c, k);
			*type = PF_CAPTURE_TYPE_REQUEST;
			if (rc == 0) {
				ag->sent = true;
				c->st.requests_sent++;
			}
		}
		if (rc == 0) {
			*data = c->msg.data;
			*len = c->msg.len;
			return true;
		}
	}
	return false;
}

/* ------------------------------------------------------------------ store */

static void cap_row(const struct cap *k, struct pf_capture_row *r)
{
	r->id = k->id;
	r->state = overall_names[k->state];
	r->created_ms = k->created_ms;
	r->started_ms = k->started_ms;
	r->finished_ms = k->finished_ms;
	r->deadline_ms = k->deadline_ms;
	r->created_by = k->created_by;
	r->request_json = k->request_json;
	r->agents_matched = (int64_t)k->n_agents;
}

static void agent_row(const struct cap *k, const struct cap_agent *ag,
		      struct pf_capture_agent_row *r)
{
	memset(r, 0, sizeof(*r));
	r->capture = k->id;
	memcpy(r->uid, ag->uid, 16);
	r->state = agent_state_names[ag->state];
	r->samples = (int64_t)pf_min(ag->samples, (uint64_t)INT64_MAX);
	r->bytes = (int64_t)pf_min(ag->bytes, (uint64_t)INT64_MAX);
	r->n_profile_ids = ag->n_ids;
	r->profile_ids = ag->n_ids ? ag->ids[0] : NULL;
	r->error_code = ag->error_code ? ag->error_code : "";
	r->error = ag->error ? ag->error : "";
	r->updated_ms = ag->updated_ms;
}

/* Writes capture k (when dirty) and its dirty agents (all of them with all_agents). */
static int flush_cap(struct pf_captures *c, struct cap *k, bool all_agents)
{
	size_t n = 0;
	for (size_t i = 0; i < k->n_agents; i++) {
		if (k->agents[i].remote && !all_agents)
			k->agents[i].dirty = false; /* its replica writes it */
		n += all_agents || k->agents[i].dirty;
	}
	if (!k->dirty && !n)
		return 0;
	struct pf_capture_agent_row *rows = n ? malloc(n * sizeof(*rows)) : NULL;
	if (n && !rows)
		return -ENOMEM;
	size_t m = 0;
	for (size_t i = 0; i < k->n_agents; i++)
		if (all_agents || k->agents[i].dirty)
			agent_row(k, &k->agents[i], &rows[m++]);
	struct pf_capture_row cr;
	cap_row(k, &cr);
	if (k->participant && !m) {
		free(rows);
		k->dirty = false;
		return 0;
	}
	int rc = pf_store_captures_save(c->store, &cr, k->participant ? 0 : 1, rows, m);
	free(rows);
	if (rc < 0)
		return rc;
	k->dirty = false;
	for (size_t i = 0; i < k->n_agents; i++)
		k->agents[i].dirty = false;
	return 0;
}

int pf_captures_flush(struct pf_captures *c)
{
	int first = 0;
	for (size_t i = 0; i < c->n; i++) {
		int rc = flush_cap(c, c->v[i], false);
		if (rc < 0 && !first)
			first = rc;
	}
	return first;
}

/* An agent's counts, profile ids and error from its stored row. */
static void agent_results_from_row(struct cap_agent *ag, const struct pf_capture_agent_row *r)
{
	ag->samples = (uint64_t)r->samples;
	ag->bytes = (uint64_t)r->bytes;
	free(ag->ids);
	ag->ids = NULL;
	ag->n_ids = 0;
	if (r->n_profile_ids && (ag->ids = malloc(r->n_profile_ids * 16))) {
		memcpy(ag->ids, r->profile_ids, r->n_profile_ids * 16);
		ag->n_ids = (uint16_t)pf_min(r->n_profile_ids, (size_t)UINT16_MAX);
	}
	set_str(&ag->error_code, r->error_code);
	set_str(&ag->error, r->error);
	ag->updated_ms = r->updated_ms;
}

/* ---- Replicas sharing PostgreSQL. */

static bool own_done(const struct cap *k)
{
	for (size_t i = 0; i < k->n_agents; i++)
		if (!k->agents[i].remote && agent_open(k->agents[i].state))
			return false;
	return true;
}

struct refresh_ctx {
	struct cap *k;
	bool cancelled; /* the capture's row says so */
};

static int refresh_cap_cb(const struct pf_capture_row *r, void *ud)
{
	struct refresh_ctx *x = ud;
	x->cancelled = strcmp(r->state, overall_names[PF_CO_CANCELLED]) == 0;
	return 0;
}

/* Another replica's row of one of k's remote agents: its state, counts and profile ids. */
static int refresh_agent_cb(const struct pf_capture_agent_row *r, void *ud)
{
	struct refresh_ctx *x = ud;
	struct cap_agent *ag = find_agent(x->k, r->uid);
	int s = agent_state_parse(r->state);
	if (!ag || !ag->remote || s < 0 || (uint8_t)s == ag->state)
		return 0;
	ag->state = (uint8_t)s;
	agent_results_from_row(ag, r);
	return 0;
}

/* Reads the rows of k's remote agents back; a participant also follows a cancellation made
 * at the creator: its own open agents are cancelled and sent capture.cancel. */
static void refresh_remote(struct pf_captures *c, struct cap *k, int64_t now_ms)
{
	struct refresh_ctx x = {.k = k};
	if (pf_store_capture_get(c->store, k->id, refresh_cap_cb, refresh_agent_cb, &x) < 0)
		return;
	if (k->participant && x.cancelled && !k->cancelled) {
		k->cancelled = true;
		for (size_t i = 0; i < k->n_agents; i++) {
			struct cap_agent *ag = &k->agents[i];
			struct pf_agent *a;
			if (ag->remote || !agent_open(ag->state))
				continue;
			ag->cancel_owed = ag->sent || ag->state != PF_CA_PENDING;
			agent_set(ag, PF_CA_CANCELLED, NULL, "cancelled by the operator", now_ms);
			if (ag->cancel_owed && (a = pf_fleet_find(c->fleet, ag->uid)) && a->connected)
				send_owed(c, k, ag, a, false, now_ms);
		}
	}
	update_state(k, now_ms);
}

static int load_one(struct pf_captures *c, const char *id, struct cap **out);

int pf_captures_adopt(struct pf_captures *c, const char *id, int64_t now_ms)
{
	struct cap *k = find(c, id);
	if (k) { /* ours, or one we serve agents of: their rows changed */
		if (k->has_remote && !overall_final(k->state))
			refresh_remote(c, k, now_ms);
		return 0;
	}
	int rc = load_one(c, id, &k);
	if (rc < 0 || !k)
		return rc == -ENOENT ? 0 : rc;
	size_t mine = 0;
	for (size_t i = 0; i < k->n_agents; i++) {
		struct cap_agent *ag = &k->agents[i];
		struct pf_agent *a = pf_fleet_find(c->fleet, ag->uid);
		ag->remote = !a || !a->connected;
		k->has_remote |= ag->remote;
		if (ag->remote || ag->state != PF_CA_PENDING)
			continue;
		mine++;
		if (!a->capture_capable)
			agent_set(ag, PF_CA_UNSUPPORTED, NULL,
				  "does not advertise " PF_CAPTURE_CAPABILITY, now_ms);
	}
	if (!mine || overall_final(k->state) || now_ms >= k->deadline_ms || push(c, k) < 0) {
		cap_free(k);
		return 0;
	}
	k->participant = true;
	k->dirty = false;
	for (size_t i = 0; i < k->n_agents; i++) {
		struct pf_agent *a;
		if (!k->agents[i].remote && (a = pf_fleet_find(c->fleet, k->agents[i].uid)))
			send_owed(c, k, &k->agents[i], a, false, now_ms);
	}
	pf_log_info("captures: %s (created by another replica): serving %zu of its agents", id,
		    mine);
	return flush_cap(c, k, false);
}

void pf_captures_tick(struct pf_captures *c, int64_t now_ms)
{
	for (size_t i = 0; i < c->n; i++) {
		struct cap *k = c->v[i];
		if (k->has_remote && !overall_final(k->state))
			refresh_remote(c, k, now_ms);
		if (overall_final(k->state) || now_ms < k->deadline_ms)
			continue;
		for (size_t j = 0; j < k->n_agents; j++) {
			struct cap_agent *ag = &k->agents[j];
			if (ag->remote && (k->participant || now_ms < k->deadline_ms + REMOTE_GRACE_MS))
				continue; /* its replica fails it at the deadline */
			if (agent_open(ag->state)) {
				ag->remote = false; /* written from here now */
				agent_set(&k->agents[j], PF_CA_FAILED, DEADLINE_ERROR_CODE,
					  DEADLINE_ERROR, now_ms);
				c->st.timed_out++;
			}
		}
		update_state(k, now_ms);
		if (!k->participant && overall_final(k->state))
			pf_log_info("captures: %s ended at its deadline: %s", k->id,
				    overall_names[k->state]);
	}
	int rc = pf_captures_flush(c);
	if (rc < 0) {
		pf_log_warn("captures: could not write capture states (retrying): %s",
			    pf_store_last_error(c->store));
		return;
	}
	/* Finished and written: the store has them. Cancelled ones stay until their deadline
	 * (agents' last statuses still count), within a bound: the oldest go first. */
	size_t finished = 0;
	for (size_t i = 0; i < c->n; i++)
		finished += overall_final(c->v[i]->state);
	size_t w = 0;
	for (size_t i = 0; i < c->n; i++) {
		struct cap *k = c->v[i];
		bool drop = overall_final(k->state) && (!k->cancelled || now_ms >= k->deadline_ms ||
							finished > PF_CAPTURES_KEEP_CANCELLED);
		if (k->participant) /* this replica's agents are done: the creator has the rest */
			drop = now_ms >= k->deadline_ms || own_done(k);
		if (drop) {
			finished--;
			cap_free(k);
		} else {
			c->v[w++] = k;
		}
	}
	c->n = w;
}

/* ---- Restart: rebuild unfinished captures from their rows. */

struct load_ctx {
	struct pf_captures *c;
	struct cap *k;
	int rc;
	size_t n_ids; /* ids of unfinished captures */
	char (*ids)[PF_CAPTURE_ID_MAX + 1];
};

static int load_id_cb(const struct pf_capture_row *r, void *ud)
{
	struct load_ctx *l = ud;
	void *nv = realloc(l->ids, (l->n_ids + 1) * sizeof(*l->ids));
	if (!nv)
		return -ENOMEM;
	l->ids = nv;
	snprintf(l->ids[l->n_ids++], PF_CAPTURE_ID_MAX + 1, "%s", r->id);
	return 0;
}

/* The stored request JSON plus the id → the wire request (the decoder checks it again). */
static int rebuild_request(struct cap *k, const char *request_json, const char *receiver)
{
	json_t *o = json_loads(request_json, 0, NULL);
	if (!o || !json_is_object(o)) {
		json_decref(o);
		return -EBADMSG;
	}
	json_object_set_new(o, "id", json_string(k->id));
	if (receiver)
		json_object_set_new(o, "receiver", json_string(receiver));
	char *s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!s)
		return -ENOMEM;
	int rc = pf_capture_request_decode((const uint8_t *)s, strlen(s), &k->req, NULL);
	free(s);
	return rc;
}

static int load_cap_cb(const struct pf_capture_row *r, void *ud)
{
	struct load_ctx *l = ud;
	struct cap *k = calloc(1, sizeof(*k));
	enum pf_capture_overall st;
	if (!k)
		return -ENOMEM;
	snprintf(k->id, sizeof(k->id), "%s", r->id);
	k->state = pf_capture_overall_parse(r->state, &st) == 0 ? (uint8_t)st : PF_CO_RUNNING;
	k->created_ms = r->created_ms;
	k->started_ms = r->started_ms;
	k->finished_ms = r->finished_ms;
	k->deadline_ms = r->deadline_ms;
	k->created_by = strdup(r->created_by);
	k->request_json = strdup(r->request_json);
	l->k = k;
	if (!k->created_by || !k->request_json)
		return -ENOMEM;
	int rc = rebuild_request(k, r->request_json, l->c->receiver);
	if (rc < 0) {
		pf_log_warn("captures: %s: stored request unusable (%s); it can only time out",
			    r->id, strerror(-rc));
		pf_capture_request_release(&k->req);
		memset(&k->req, 0, sizeof(k->req));
		k->req.duration_seconds = UINT32_MAX / 2000; /* never resent */
	}
	return 0;
}

static int load_agent_cb(const struct pf_capture_agent_row *r, void *ud)
{
	struct load_ctx *l = ud;
	struct cap *k = l->k;
	void *nv = realloc(k->agents, (k->n_agents + 1) * sizeof(*k->agents));
	if (!nv)
		return -ENOMEM;
	k->agents = nv;
	struct cap_agent *ag = &k->agents[k->n_agents++];
	int s = agent_state_parse(r->state);
	memset(ag, 0, sizeof(*ag));
	memcpy(ag->uid, r->uid, 16);
	ag->state = s < 0 ? PF_CA_FAILED : (uint8_t)s;
	/* Whatever was in flight may have been lost with the old process: a pending agent is
	 * sent the request again when it reconnects. */
	ag->sent = false;
	agent_results_from_row(ag, r);
	return 0;
}

/* Capture id from its rows (agents sorted), NULL in *out when it does not exist. */
static int load_one(struct pf_captures *c, const char *id, struct cap **out)
{
	struct load_ctx l = {.c = c};
	int rc = pf_store_capture_get(c->store, id, load_cap_cb, load_agent_cb, &l);
	*out = NULL;
	if (rc < 0) {
		cap_free(l.k);
		return rc;
	}
	if (l.k)
		qsort(l.k->agents, l.k->n_agents, sizeof(*l.k->agents), uid_cmp);
	*out = l.k;
	return 0;
}

int pf_captures_load(struct pf_captures *c, int64_t now_ms, struct pf_error *err)
{
	struct load_ctx l = {.c = c};
	struct pf_capture_query q = {.unfinished = true};
	int rc = pf_store_captures_foreach(c->store, &q, load_id_cb, &l);
	for (size_t i = l.n_ids; rc == 0 && i-- > 0;) { /* oldest first */
		l.k = NULL;
		rc = pf_store_capture_get(c->store, l.ids[i], load_cap_cb, load_agent_cb, &l);
		if (rc == 0 && l.k) {
			qsort(l.k->agents, l.k->n_agents, sizeof(*l.k->agents), uid_cmp);
			/* Replicas sharing PostgreSQL: an agent becomes ours when it connects here
			 * (pf_captures_agent_seen); until then another replica may serve it. */
			for (size_t j = 0; pf_store_is_shared(c->store) && j < l.k->n_agents; j++)
				l.k->agents[j].remote = l.k->has_remote = true;
			rc = push(c, l.k);
			if (rc == 0)
				l.k = NULL;
		}
		cap_free(l.k);
	}
	free(l.ids);
	if (rc < 0)
		return pf_error_set(err, rc, NULL, "loading captures: %s",
				    rc == -ENOMEM ? "out of memory"
						  : pf_store_last_error(c->store));
	if (c->n)
		pf_log_info("captures: %zu unfinished capture(s) resumed", c->n);
	pf_captures_tick(c, now_ms); /* those past their deadline end now */
	return 0;
}

/* ------------------------------------------------------------------ reading */

int pf_captures_get(struct pf_captures *c, const char *id,
		    int (*cap_cb)(const struct pf_capture_row *r, void *ud),
		    int (*agent_cb)(const struct pf_capture_agent_row *r, void *ud), void *ud)
{
	struct cap *k = find(c, id);
	if (k && !k->participant) {
		struct pf_capture_row cr;
		cap_row(k, &cr);
		int rc = cap_cb(&cr, ud);
		for (size_t i = 0; rc == 0 && i < k->n_agents; i++) {
			struct pf_capture_agent_row ar;
			agent_row(k, &k->agents[i], &ar);
			rc = agent_cb(&ar, ud);
		}
		return rc;
	}
	if (!pf_capture_id_valid(id))
		return -ENOENT;
	/* finished, or created by another replica */
	return pf_store_capture_get(c->store, id, cap_cb, agent_cb, ud);
}

int pf_captures_list(struct pf_captures *c, const struct pf_capture_query *q,
		     int (*cb)(const struct pf_capture_row *r, void *ud), void *ud)
{
	int f = pf_captures_flush(c); /* the list reads the store */
	if (f < 0)
		pf_log_warn("captures: list may lag: %s", pf_store_last_error(c->store));
	return pf_store_captures_foreach(c->store, q, cb, ud);
}
