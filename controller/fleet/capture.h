/* capture.h — incident captures on the controller: the state machine behind
 * /api/v1/captures and the OpAMP custom capability io.profleet.capture.v1
 * (docs/capture-protocol.md is the wire spec, docs/api.md the REST view).
 *
 * A capture is created from a checked request and a label selector: every matching agent
 * gets a per-agent state at once — `unreachable` (not connected), `unsupported` (does not
 * advertise the capability) or `pending`, in which case capture.request is sent over its
 * live OpAMP connection. capture.status messages move an agent to accepted / running / done /
 * failed / cancelled (never backwards). The capture's state follows from its agents:
 *   pending    no agent has answered yet        running   some agent answered, some still open
 *   done       every matched agent delivered    partial   all ended, some but not all delivered
 *   failed     all ended, none delivered        cancelled DELETE was called
 * A capture has a deadline (created + duration + grace): agents still open then fail with
 * "no result before the deadline". An agent that (re)connects while it is still pending is
 * sent the request again if the deadline leaves it time for the whole duration; an agent that
 * reports after a reconnect is accepted. DELETE marks every open agent cancelled and sends
 * capture.cancel to those that had the request; their later statuses are still recorded until
 * the deadline.
 *
 * Durability: creation and cancellation are written to the store before the API answers;
 * status changes are written by pf_captures_tick() (every persist tick, so within ~0.5 s).
 * After a restart pf_captures_load() brings unfinished captures back, and they wait for
 * statuses until their deadline. Memory holds unfinished captures (at most
 * PF_CAPTURES_MAX_OPEN) and cancelled ones until their deadline (at most
 * PF_CAPTURES_KEEP_CANCELLED); finished captures are read from the store.
 *
 * Not thread-safe: the event-loop thread owns it, like the fleet. */
#ifndef PF_FLEET_CAPTURE_H
#define PF_FLEET_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/capture_msg.h"
#include "pf/error.h"

struct pf_fleet;
struct pf_agent;
struct pf_store;
struct pf_capture_row;
struct pf_capture_agent_row;
struct pf_capture_query;

#define PF_CAPTURES_MAX_PER_AGENT 4    /* unfinished captures one agent may be in (409) */
#define PF_CAPTURES_MAX_OPEN 256       /* unfinished captures at once */
#define PF_CAPTURES_MAX_AGENTS 10000   /* agents one capture may match */
#define PF_CAPTURES_DEFAULT_GRACE_S 30 /* deadline = created + duration + grace */
#define PF_CAPTURES_KEEP_CANCELLED 256 /* cancelled captures kept in memory for late statuses */

/* Per-agent states. */
enum pf_capture_agent_state {
	PF_CA_PENDING,
	PF_CA_ACCEPTED,
	PF_CA_RUNNING,
	PF_CA_DONE,
	PF_CA_FAILED,
	PF_CA_CANCELLED,
	PF_CA_UNREACHABLE,
	PF_CA_UNSUPPORTED,
};

/* Capture states. */
enum pf_capture_overall {
	PF_CO_PENDING,
	PF_CO_RUNNING,
	PF_CO_DONE,
	PF_CO_PARTIAL,
	PF_CO_FAILED,
	PF_CO_CANCELLED,
};

const char *pf_capture_agent_state_name(enum pf_capture_agent_state s);
const char *pf_capture_overall_name(enum pf_capture_overall s);
/* -EINVAL for an unknown name. */
int pf_capture_overall_parse(const char *name, enum pf_capture_overall *out);
/* The capture state that n per-agent states give (cancelled wins). */
enum pf_capture_overall pf_capture_overall_of(const uint8_t *agent_states, size_t n,
					      bool cancelled);

/* Sends one custom message (capability io.profleet.capture.v1) to a connected agent now.
 * 0 when queued; -EAGAIN when the transport can only carry it in its next reply (plain HTTP:
 * pf_captures_owed() hands it over then); other negative errno on failure. */
typedef int (*pf_captures_send_fn)(struct pf_agent *a, const char *type, const uint8_t *data,
				   size_t len, void *ud);

struct pf_captures_options {
	uint32_t grace_s;	  /* 0 = PF_CAPTURES_DEFAULT_GRACE_S */
	const char *receiver_url; /* the request's `receiver`, NULL: agents derive it */
};

struct pf_captures;

struct pf_captures *pf_captures_new(const struct pf_captures_options *opt, struct pf_fleet *f,
				    struct pf_store *st, pf_captures_send_fn send, void *ud);
void pf_captures_free(struct pf_captures *c);
/* Sets (or, fn NULL, clears) the send hook; without one every message waits for a reply. */
void pf_captures_set_sender(struct pf_captures *c, pf_captures_send_fn fn, void *ud);
/* At start: loads the unfinished captures from the store. */
int pf_captures_load(struct pf_captures *c, int64_t now_ms, struct pf_error *err);

/* Creates a capture of the agents `selector` matches. req is checked and its id is set here
 * (a UUIDv7, so ids sort by creation); request_json is the normalized request shown by GET.
 * On success id and *matched are set and the capture is stored. Errors (err names the field):
 * -EINVAL bad selector or request, -ENOENT no agent matches, -E2BIG over
 * PF_CAPTURES_MAX_AGENTS agents, -EBUSY some agent is already in PF_CAPTURES_MAX_PER_AGENT
 * unfinished captures, -ENOSPC PF_CAPTURES_MAX_OPEN captures are open, -EIO store. */
int pf_captures_create(struct pf_captures *c, struct pf_capture_request *req, const char *selector,
		       const char *request_json, const char *created_by, int64_t now_ms,
		       char id[PF_CAPTURE_ID_MAX + 1], size_t *matched, struct pf_error *err);
/* Whether this replica created the unfinished capture id (and so cancels it). */
bool pf_captures_drives(struct pf_captures *c, const char *id);
/* Cancels: -ENOENT unknown (or no longer in memory and finished), -EALREADY finished. */
int pf_captures_cancel(struct pf_captures *c, const char *id, int64_t now_ms, struct pf_error *err);

/* ---- OpAMP (session.c), for every AgentToServer of agent a after its status is applied. */
/* A custom message from a (other capabilities and types are ignored). */
void pf_captures_on_custom(struct pf_captures *c, struct pf_agent *a, const char *capability,
			   const char *type, const uint8_t *data, size_t len, int64_t now_ms);
/* The agent was heard from; first_on_conn: on a new connection. Sends what it is owed (a
 * request it did not get, a cancel) through the send hook. */
void pf_captures_agent_seen(struct pf_captures *c, struct pf_agent *a, bool first_on_conn,
			    int64_t now_ms);
/* One message still owed to a that the send hook could not deliver (plain HTTP): true with
 * type/data/len (valid until the next call into this module), which the caller puts in its
 * reply and which is then counted as sent. */
bool pf_captures_owed(struct pf_captures *c, struct pf_agent *a, int64_t now_ms, const char **type,
		      const uint8_t **data, size_t *len);

/* Replicas sharing PostgreSQL (fleet/sync.h, on a "capture" notification): a capture this
 * replica created refreshes the states of the agents other replicas serve; one created
 * elsewhere is loaded, and this replica sends the request to the agents connected to it and
 * writes their rows (never the capture's row: its creator computes the overall state from all
 * rows and ends it; an agent served nowhere fails 10 s after the deadline). 0 or the store's
 * negative errno. */
int pf_captures_adopt(struct pf_captures *c, const char *id, int64_t now_ms);

/* Deadlines, then writes pending changes to the store and drops finished captures whose
 * deadline has passed from memory. Call periodically (the server's persist tick). */
void pf_captures_tick(struct pf_captures *c, int64_t now_ms);
/* Writes pending changes now: 0 or the store's error. */
int pf_captures_flush(struct pf_captures *c);

/* ---- Reading (the API renders them, api/api_captures.h). */
/* One capture: cap_cb once, then agent_cb for each of its agents. An unfinished capture this
 * replica created is read from memory, any other (finished, or created by another replica)
 * from the store. 0, -ENOENT, the store's negative errno, or the first negative value a
 * callback returned. */
int pf_captures_get(struct pf_captures *c, const char *id,
		    int (*cap_cb)(const struct pf_capture_row *r, void *ud),
		    int (*agent_cb)(const struct pf_capture_agent_row *r, void *ud), void *ud);
/* The stored captures q selects, newest first, after writing pending changes (when that
 * fails the list may lag; it is logged). Returns as pf_store_captures_foreach(). */
int pf_captures_list(struct pf_captures *c, const struct pf_capture_query *q,
		     int (*cb)(const struct pf_capture_row *r, void *ud), void *ud);

/* Counts for /metrics and tests. */
size_t pf_captures_open(const struct pf_captures *c);
struct pf_captures_stats {
	uint64_t created;	   /* captures created */
	uint64_t requests_sent;	   /* capture.request handed to a transport (resends count) */
	uint64_t cancels_sent;	   /* capture.cancel handed to a transport */
	uint64_t statuses;	   /* capture.status messages applied */
	uint64_t statuses_ignored; /* undecodable, stranger, backwards or late statuses */
	uint64_t timed_out;	   /* agents failed at a capture's deadline */
	size_t open;		   /* unfinished captures now */
};
void pf_captures_stats(const struct pf_captures *c, struct pf_captures_stats *out);

#endif
