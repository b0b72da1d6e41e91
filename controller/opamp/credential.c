/* credential.c — see credential.h. */
#include "credential.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "pf/hash.h"
#include "pf/uuid.h"

void pf_credential_settings_hash(uint64_t heartbeat_s, const uint8_t *token_hash,
				 uint8_t out[32])
{
	uint8_t b[8 + 32];
	size_t n = 8;
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(heartbeat_s >> (8 * i));
	if (token_hash) {
		memcpy(b + 8, token_hash, 32);
		n += 32;
	}
	pf_sha256(b, n, out);
}

int pf_credential_issue(struct pf_store *st, const uint8_t uid[16], uint64_t heartbeat_s,
			int64_t now_ms, struct pf_credential_offer *o)
{
	char secret[64];
	uint8_t h[32];
	struct pf_token_info t;
	int rc = pf_token_generate(secret, sizeof(secret));
	if (rc < 0)
		return rc;
	pf_sha256(secret, strlen(secret), h);
	rc = pf_store_agent_credential_issue(st, uid, h, now_ms, &t);
	if (rc == 0) {
		snprintf(o->authorization, sizeof(o->authorization), "Bearer %s", secret);
		pf_credential_settings_hash(heartbeat_s, h, o->hash);
		snprintf(o->token_id, sizeof(o->token_id), "%s", t.id);
	}
	explicit_bzero(secret, sizeof(secret));
	return rc;
}

int pf_credential_in_use(struct pf_store *st, const uint8_t uid[16])
{
	struct pf_token_info t;
	int rc = pf_store_agent_credential_get(st, uid, &t);
	if (rc == -ENOENT)
		return 0;
	return rc < 0 ? rc : t.last_used_ms != 0;
}

int pf_credential_confirm(struct pf_store *st, const struct pf_api_caller *caller, bool always,
			  void (*gone)(const char *token_id, void *ud), void *ud)
{
	char ids[PF_AGENT_CREDENTIAL_MAX_IDS][PF_TOKEN_ID_LEN + 1];
	if (!caller->agent_bound || !(always || caller->first_use))
		return 0;
	int n = pf_store_agent_credential_confirm(st, caller->agent_uid, caller->token_id, ids);
	for (int i = 0; gone && i < n; i++)
		gone(ids[i], ud);
	return n < 0 ? n : 0;
}

struct capture_probe {
	const uint8_t *uid;
	bool found;
};

static int capture_cb(const struct pf_capture_row *c, void *ud)
{
	(void)c;
	(void)ud;
	return 0;
}

static int capture_agent_cb(const struct pf_capture_agent_row *a, void *ud)
{
	struct capture_probe *p = ud;
	p->found |= memcmp(a->uid, p->uid, 16) == 0;
	return 0;
}

int pf_credential_check_upload(void *bound_uid, struct pf_store *st, const char *agent_attr,
			       const char *capture_attr, char *why, size_t why_len)
{
	const uint8_t *bound = bound_uid;
	uint8_t claimed[16];
	char text[PF_UUID_STR_LEN + 1];
	bool has_claim = agent_attr && *agent_attr;

	if (has_claim && pf_uuid_parse(agent_attr, claimed) < 0) {
		if (bound) {
			snprintf(why, why_len, "profleet.agent.uid '%.40s' is not this credential's "
					       "agent", agent_attr);
			return -EACCES;
		}
		has_claim = false; /* not a profleet agent's uid: nobody's identity */
	}
	if (bound && has_claim && memcmp(claimed, bound, 16) != 0) {
		pf_uuid_format(bound, text);
		snprintf(why, why_len,
			 "profleet.agent.uid %.40s: this credential belongs to agent %s", agent_attr,
			 text);
		return -EACCES;
	}
	int used = !bound && has_claim ? pf_credential_in_use(st, claimed) : 0;
	if (used < 0)
		return used;
	if (used) {
		snprintf(why, why_len,
			 "profleet.agent.uid %.40s has a credential of its own: upload with it",
			 agent_attr);
		return -EACCES;
	}
	if (!capture_attr || !*capture_attr)
		return 0;
	const uint8_t *who = bound ? bound : has_claim ? claimed : NULL;
	struct capture_probe p = {.uid = who};
	int rc = who ? pf_store_capture_get(st, capture_attr, capture_cb, capture_agent_cb, &p)
		     : -ENOENT;
	if (rc < 0 && rc != -ENOENT)
		return rc;
	if (!p.found) {
		snprintf(why, why_len, "profleet.capture.id %.40s: not a capture of %s",
			 capture_attr, who ? "this agent" : "an identified agent");
		return -EACCES;
	}
	return 0;
}
