/* credential.h — per-agent credentials: the agent token of one agent, given to it over OpAMP
 * (ConnectionSettingsOffers.opamp.headers: `Authorization: Bearer <token>`), and the rule of
 * who may speak for an agent. The tokens themselves are rows of the store's tokens table bound
 * to the agent's instance_uid (store.h "Per-agent credentials"); the secret exists only in the
 * offer and on the agent's disk.
 *
 * Lifecycle: an agent that connects with a shared enrollment token and advertises
 * AcceptsOpAMPConnectionSettings is offered a credential of its own in the first reply on the
 * connection. The agent verifies it by connecting with it (OpAMP "Offers of Connection
 * Settings"); that first use confirms it, and its older credentials are deleted. From then on
 * an enrollment-token connection claiming that uid is given a new uid (it cannot wear the
 * agent's identity), and uploads naming that agent must come with its credential. A rotation
 * offers a new credential on the live connection; the old one works until the new one is used.
 *
 * Plain functions over the store: the caller passes the connection of its thread. */
#ifndef PF_OPAMP_CREDENTIAL_H
#define PF_OPAMP_CREDENTIAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

struct pf_api_caller;

#define PF_CREDENTIAL_AUTH_MAX 96 /* "Bearer " + the secret */

/* What goes into a ServerToAgent's connection_settings. */
struct pf_credential_offer {
	char authorization[PF_CREDENTIAL_AUTH_MAX]; /* the header's value */
	uint8_t hash[32];                           /* connection_settings.hash */
	char token_id[PF_TOKEN_ID_LEN + 1];
};

/* connection_settings.hash for the heartbeat interval and the credential whose SHA-256 is
 * token_hash (NULL: no credential in the settings): SHA-256 of the interval as 8 little-endian
 * bytes followed by token_hash. Stable while both are, so an agent can tell an unchanged
 * offer. */
void pf_credential_settings_hash(uint64_t heartbeat_s, const uint8_t *token_hash,
				 uint8_t out[32]);

/* Makes a new credential for uid, stores its hash in place of uid's unused ones and fills o.
 * 0 or a store error (-ENOMEM, -EIO, -EAGAIN). */
int pf_credential_issue(struct pf_store *st, const uint8_t uid[16], uint64_t heartbeat_s,
			int64_t now_ms, struct pf_credential_offer *o);

/* Whether uid has a credential that was used (the enrollment token may no longer speak for
 * it): 1, 0, or a store error (the caller refuses rather than hand an identity away). */
int pf_credential_in_use(struct pf_store *st, const uint8_t uid[16]);

/* A caller authenticated with a per-agent credential for the first time (or, always, on a new
 * connection): its older credentials are deleted and each one's id goes to gone(id, ud) (the
 * transport closes what they opened). 0 or a store error. */
int pf_credential_confirm(struct pf_store *st, const struct pf_api_caller *caller, bool always,
			  void (*gone)(const char *token_id, void *ud), void *ud);

/* The upload rule of the OTLP receiver, for one profile's resource (profstore.h's check).
 * `bound` is the 16-byte uid the request's credential belongs to (NULL: a shared agent token). agent_attr / capture_attr are
 * its profleet.agent.uid and profleet.capture.id (NULL when absent). 0 when the upload may be
 * stored as it names itself; -EACCES with why filled when it names an agent other than its
 * credential's, an agent that has a credential of its own while it comes with a shared token,
 * or a capture that did not ask that agent; a store error otherwise. */
int pf_credential_check_upload(void *bound, struct pf_store *st, const char *agent_attr,
			       const char *capture_attr, char *why, size_t why_len);

#endif
