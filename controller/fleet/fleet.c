/* fleet.c — see fleet.h. */
#include "fleet.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "opamp_codec.h"
#include "pf/capture_msg.h"
#include "pf/compiler.h"
#include "pf/hash.h"
#include "pf/selector.h"
#include "pf/uuid.h"

#define AGENTS_PER_BLOCK 1024

struct assignment {
	char name[128];
	char config[128];
	int64_t priority;
	struct pf_selector *sel;
};

struct pf_fleet {
	struct pf_fleet_options opt;

	/* Agents live in fixed blocks so their addresses never change. */
	struct pf_agent **blocks;
	size_t n_blocks;
	size_t n_agents;

	/* uid -> index + 1, open addressing, linear probing, power-of-two size. */
	uint32_t *table;
	size_t table_size;

	/* Interned effective configs. */
	struct pf_eff_config **eff;
	size_t n_eff, cap_eff;

	struct pf_cfg_slot **cfgs;
	size_t n_cfgs;

	struct assignment *asg; /* sorted: priority desc, then name */
	size_t n_asg;

	uint32_t dirty_head; /* index + 1 */
	size_t n_dirty;      /* agents on the dirty list */
	size_t n_seen;       /* agents with dirty_seen set (a subset may be dirty too) */
	bool shared;         /* pf_fleet_set_shared() */

	pf_fleet_push_fn push;
	void *push_ud;
};

static inline struct pf_agent *agent_at(const struct pf_fleet *f, size_t i)
{
	return &f->blocks[i / AGENTS_PER_BLOCK][i % AGENTS_PER_BLOCK];
}

static inline size_t agent_index(const struct pf_fleet *f, const struct pf_agent *a)
{
	for (size_t b = 0; b < f->n_blocks; b++) {
		const struct pf_agent *base = f->blocks[b];
		if (a >= base && a < base + AGENTS_PER_BLOCK)
			return b * AGENTS_PER_BLOCK + (size_t)(a - base);
	}
	return SIZE_MAX;
}

static uint64_t uid_hash(const uint8_t uid[16])
{
	uint64_t a, b;
	memcpy(&a, uid, 8);
	memcpy(&b, uid + 8, 8);
	uint64_t h = a * 0x9e3779b97f4a7c15ULL ^ b;
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 32;
	return h;
}

struct pf_fleet *pf_fleet_new(const struct pf_fleet_options *opt)
{
	struct pf_fleet *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->opt = *opt;
	if (f->opt.heartbeat_interval_s == 0)
		f->opt.heartbeat_interval_s = 30;
	f->table_size = 1024;
	f->table = calloc(f->table_size, sizeof(*f->table));
	if (!f->table) {
		free(f);
		return NULL;
	}
	return f;
}

static void eff_unref(struct pf_fleet *f, struct pf_eff_config *e)
{
	if (!e || --e->refs > 0)
		return;
	for (size_t i = 0; i < f->n_eff; i++) {
		if (f->eff[i] == e) {
			f->eff[i] = f->eff[--f->n_eff];
			break;
		}
	}
	free(e);
}

void pf_fleet_free(struct pf_fleet *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n_agents; i++) {
		struct pf_agent *a = agent_at(f, i);
		free(a->attrs);
		free(a->health_json);
		free(a->remote_error);
	}
	for (size_t b = 0; b < f->n_blocks; b++)
		free(f->blocks[b]);
	free(f->blocks);
	for (size_t i = 0; i < f->n_eff; i++)
		free(f->eff[i]);
	free(f->eff);
	for (size_t i = 0; i < f->n_cfgs; i++) {
		free(f->cfgs[i]->body);
		free(f->cfgs[i]);
	}
	free(f->cfgs);
	for (size_t i = 0; i < f->n_asg; i++)
		pf_selector_free(f->asg[i].sel);
	free(f->asg);
	free(f->table);
	free(f);
}

void pf_fleet_set_push_hook(struct pf_fleet *f, pf_fleet_push_fn fn, void *ud)
{
	f->push = fn;
	f->push_ud = ud;
}

void pf_fleet_set_shared(struct pf_fleet *f, bool shared)
{
	f->shared = shared;
}

uint32_t pf_fleet_heartbeat_s(const struct pf_fleet *f)
{
	return f->opt.heartbeat_interval_s;
}

struct pf_agent *pf_fleet_find(struct pf_fleet *f, const uint8_t uid[16])
{
	size_t mask = f->table_size - 1;
	for (size_t i = uid_hash(uid) & mask;; i = (i + 1) & mask) {
		uint32_t v = f->table[i];
		if (!v)
			return NULL;
		struct pf_agent *a = agent_at(f, v - 1);
		if (memcmp(a->uid, uid, 16) == 0)
			return a;
	}
}

static void table_insert(struct pf_fleet *f, const uint8_t uid[16], uint32_t idx1)
{
	size_t mask = f->table_size - 1;
	size_t i = uid_hash(uid) & mask;
	while (f->table[i])
		i = (i + 1) & mask;
	f->table[i] = idx1;
}

static int table_grow(struct pf_fleet *f)
{
	size_t nsize = f->table_size * 2;
	uint32_t *nt = calloc(nsize, sizeof(*nt));
	if (!nt)
		return -ENOMEM;
	free(f->table);
	f->table = nt;
	f->table_size = nsize;
	for (size_t i = 0; i < f->n_agents; i++)
		table_insert(f, agent_at(f, i)->uid, (uint32_t)(i + 1));
	return 0;
}

struct pf_agent *pf_fleet_get_or_add(struct pf_fleet *f, const uint8_t uid[16], int64_t now_ms)
{
	struct pf_agent *a = pf_fleet_find(f, uid);
	if (a)
		return a;
	if ((f->n_agents + 1) * 2 > f->table_size && table_grow(f) < 0)
		return NULL;
	if (f->n_agents == f->n_blocks * AGENTS_PER_BLOCK) {
		struct pf_agent **nb = realloc(f->blocks, (f->n_blocks + 1) * sizeof(*nb));
		if (!nb)
			return NULL;
		f->blocks = nb;
		f->blocks[f->n_blocks] = calloc(AGENTS_PER_BLOCK, sizeof(struct pf_agent));
		if (!f->blocks[f->n_blocks])
			return NULL;
		f->n_blocks++;
	}
	size_t idx = f->n_agents++;
	a = agent_at(f, idx);
	memset(a, 0, sizeof(*a));
	memcpy(a->uid, uid, 16);
	a->first_seen_ms = now_ms;
	a->last_seen_ms = now_ms;
	table_insert(f, uid, (uint32_t)(idx + 1));
	pf_fleet_resolve_agent(f, a);
	pf_agent_mark_dirty(f, a);
	return a;
}

size_t pf_fleet_count(const struct pf_fleet *f)
{
	return f->n_agents;
}

struct pf_agent *pf_fleet_next(struct pf_fleet *f, size_t *iter)
{
	if (*iter >= f->n_agents)
		return NULL;
	return agent_at(f, (*iter)++);
}

/* ---- dirty tracking */

static void dirty_link(struct pf_fleet *f, struct pf_agent *a)
{
	if (a->dirty)
		return;
	size_t idx = agent_index(f, a);
	if (idx == SIZE_MAX)
		return;
	a->dirty_next = f->dirty_head;
	f->dirty_head = (uint32_t)(idx + 1);
	f->n_dirty++;
}

void pf_agent_mark_dirty(struct pf_fleet *f, struct pf_agent *a)
{
	dirty_link(f, a);
	a->dirty = true;
}

/* Liveness alone is not worth a row write per heartbeat: it is flagged here and written
 * by the slower pf_fleet_drain_seen() sweep. */
static void mark_seen(struct pf_fleet *f, struct pf_agent *a)
{
	if (a->dirty_seen)
		return;
	a->dirty_seen = true;
	f->n_seen++;
}

size_t pf_fleet_mark_connected_dirty(struct pf_fleet *f)
{
	size_t n = 0;
	for (size_t i = 0; i < f->n_agents; i++) {
		struct pf_agent *a = agent_at(f, i);
		if (!a->connected)
			continue;
		pf_agent_mark_dirty(f, a);
		n++;
	}
	return n;
}

size_t pf_fleet_pending(const struct pf_fleet *f, bool seen)
{
	return seen ? f->n_seen : f->n_dirty;
}

size_t pf_fleet_drain_dirty(struct pf_fleet *f, size_t max,
			    void (*cb)(struct pf_agent *a, bool full, void *ud), void *ud)
{
	size_t n = 0;
	while (f->dirty_head && n < max) {
		struct pf_agent *a = agent_at(f, f->dirty_head - 1);
		f->dirty_head = a->dirty_next;
		a->dirty_next = 0;
		f->n_dirty--;
		if (a->dirty_seen)
			f->n_seen--;
		a->dirty = a->dirty_seen = false;
		if (f->shared && !a->local)
			continue; /* another replica's agent: its row is written there */
		cb(a, true, ud);
		if (!a->connected)
			a->local = false; /* the disconnect is written: the row is free */
		n++;
	}
	return n;
}

size_t pf_fleet_drain_seen(struct pf_fleet *f, size_t max,
			   void (*cb)(struct pf_agent *a, bool full, void *ud), void *ud)
{
	size_t n = 0, left = f->n_seen;
	/* A fleet with nothing flagged is not walked; the walk ends at the last flagged agent. */
	for (size_t i = 0; left && i < f->n_agents && n < max; i++) {
		struct pf_agent *a = agent_at(f, i);
		if (!a->dirty_seen)
			continue;
		left--;
		if (a->dirty)
			continue; /* its full write covers last_seen */
		a->dirty_seen = false;
		f->n_seen--;
		if (f->shared && !a->local)
			continue;
		cb(a, false, ud);
		n++;
	}
	return n;
}

/* ---- attributes */

int pf_agent_set_attributes(struct pf_fleet *f, struct pf_agent *a, const char *const *keys,
			    const char *const *values, size_t n)
{
	size_t len = 0;
	size_t kept = 0;
	for (size_t i = 0; i < n && kept < UINT16_MAX; i++, kept++)
		len += strlen(keys[i]) + 1 + strlen(values[i]) + 1;
	if (len > UINT32_MAX)
		return -E2BIG;
	char *p = malloc(len ? len : 1);
	if (!p)
		return -ENOMEM;
	size_t off = 0;
	for (size_t i = 0; i < kept; i++) {
		size_t kl = strlen(keys[i]) + 1, vl = strlen(values[i]) + 1;
		memcpy(p + off, keys[i], kl);
		off += kl;
		memcpy(p + off, values[i], vl);
		off += vl;
	}
	bool same = a->attrs && a->attrs_len == len && memcmp(a->attrs, p, len) == 0;
	if (same) {
		free(p);
	} else {
		free(a->attrs);
		a->attrs = p;
		a->attrs_len = (uint32_t)len;
		a->n_attrs = (uint16_t)kept;
		pf_agent_mark_dirty(f, a);
	}
	a->has_description = true;
	if (!same)
		pf_fleet_resolve_agent(f, a);
	return 0;
}

const char *pf_agent_attr(const struct pf_agent *a, const char *key)
{
	const char *p = a->attrs;
	for (uint16_t i = 0; p && i < a->n_attrs; i++) {
		const char *v = p + strlen(p) + 1;
		if (strcmp(p, key) == 0)
			return v;
		p = v + strlen(v) + 1;
	}
	return NULL;
}

static const char *attr_lookup(const char *key, void *ud)
{
	return pf_agent_attr(ud, key);
}

int pf_agent_set_health(struct pf_fleet *f, struct pf_agent *a, bool healthy, const char *json)
{
	if (a->has_health && a->healthy == healthy && a->health_json && json &&
	    strcmp(a->health_json, json) == 0)
		return 0;
	char *copy = json ? strdup(json) : NULL;
	if (json && !copy)
		return -ENOMEM;
	free(a->health_json);
	a->health_json = copy;
	a->has_health = true;
	a->healthy = healthy;
	pf_agent_mark_dirty(f, a);
	return 0;
}

int pf_agent_set_effective(struct pf_fleet *f, struct pf_agent *a, const char *body, size_t len)
{
	uint8_t h[32];
	pf_sha256(body, len, h);
	if (a->effective && memcmp(a->effective->hash, h, 32) == 0)
		return 0;
	struct pf_eff_config *e = NULL;
	for (size_t i = 0; i < f->n_eff; i++) {
		if (memcmp(f->eff[i]->hash, h, 32) == 0) {
			e = f->eff[i];
			break;
		}
	}
	if (!e) {
		struct pf_eff_config **ne = pf_fleet_grow(f->eff, &f->cap_eff, f->n_eff, sizeof(*ne));
		if (!ne)
			return -ENOMEM;
		f->eff = ne;
		e = malloc(sizeof(*e) + len + 1);
		if (!e)
			return -ENOMEM;
		memcpy(e->hash, h, 32);
		e->refs = 0;
		e->len = len;
		memcpy(e->body, body, len);
		e->body[len] = 0;
		f->eff[f->n_eff++] = e;
	}
	e->refs++;
	eff_unref(f, a->effective);
	a->effective = e;
	pf_agent_mark_dirty(f, a);
	return 0;
}

int pf_agent_set_remote_status(struct pf_fleet *f, struct pf_agent *a, const uint8_t *hash,
			       size_t hash_len, int status, const char *error)
{
	bool has = hash_len == 32;
	bool same = a->has_reported_hash == has && (!has || memcmp(a->reported_hash, hash, 32) == 0) &&
		    a->remote_status == status &&
		    ((!a->remote_error && (!error || !*error)) ||
		     (a->remote_error && error && strcmp(a->remote_error, error) == 0));
	if (same)
		return 0;
	char *e = error && *error ? strdup(error) : NULL;
	if (error && *error && !e)
		return -ENOMEM;
	free(a->remote_error);
	a->remote_error = e;
	a->has_reported_hash = has;
	if (has)
		memcpy(a->reported_hash, hash, 32);
	a->remote_status = (uint8_t)status;
	pf_agent_mark_dirty(f, a);
	return 0;
}

void pf_agent_set_connected(struct pf_fleet *f, struct pf_agent *a, enum pf_agent_transport t,
			    void *conn, int64_t now_ms)
{
	if (!a->connected || a->transport != t || a->conn != conn)
		pf_agent_mark_dirty(f, a);
	a->connected = true;
	a->local = true;
	a->elsewhere = false;
	a->transport = (uint8_t)t;
	a->conn = conn;
	a->last_seen_ms = now_ms;
}

void pf_agent_set_disconnected(struct pf_fleet *f, struct pf_agent *a)
{
	if (a->connected)
		pf_agent_mark_dirty(f, a);
	a->connected = false;
	a->transport = PF_TRANSPORT_NONE;
	a->conn = NULL;
	a->seq_valid = false;
}

void pf_agent_touch(struct pf_fleet *f, struct pf_agent *a, int64_t now_ms)
{
	a->last_seen_ms = now_ms;
	mark_seen(f, a);
}

bool pf_agent_needs_config(const struct pf_agent *a)
{
	if (!(a->capabilities & PF_AGENT_CAP_ACCEPTS_REMOTE_CONFIG) || !a->desired)
		return false;
	return !a->has_reported_hash || memcmp(a->reported_hash, a->desired->hash, 32) != 0;
}

enum pf_config_state pf_agent_config_state(const struct pf_agent *a)
{
	if (!a->desired)
		return PF_CFG_UNSET;
	if (!a->has_reported_hash || memcmp(a->reported_hash, a->desired->hash, 32) != 0)
		return PF_CFG_APPLYING;
	switch (a->remote_status) {
	case PF_RCS_APPLIED:
		return PF_CFG_APPLIED;
	case PF_RCS_FAILED:
		return PF_CFG_FAILED;
	default:
		return PF_CFG_APPLYING;
	}
}

const char *pf_config_state_name(enum pf_config_state s)
{
	static const char *const names[] = {"UNSET", "APPLYING", "APPLIED", "FAILED"};
	return (unsigned)s < 4 ? names[s] : "UNSET";
}

bool pf_agent_is_stale(const struct pf_fleet *f, const struct pf_agent *a, int64_t now_ms)
{
	if (!pf_agent_online(a))
		return false;
	/* Only agents that promise heartbeats (or poll over HTTP) are judged by them
	 * (OpAMP spec: a server MUST NOT rely on heartbeats without ReportsHeartbeat). */
	if (a->transport == PF_TRANSPORT_WS &&
	    !(a->capabilities & PF_AGENT_CAP_REPORTS_HEARTBEAT))
		return false;
	int64_t limit = (int64_t)f->opt.heartbeat_interval_s * 3 * 1000;
	return now_ms - a->last_seen_ms > limit;
}

bool pf_agent_is_healthy(const struct pf_fleet *f, const struct pf_agent *a, int64_t now_ms)
{
	return pf_agent_online(a) && !pf_agent_is_stale(f, a, now_ms) &&
	       (!a->has_health || a->healthy);
}

void pf_fleet_summary(struct pf_fleet *f, int64_t now_ms, struct pf_fleet_summary *out)
{
	memset(out, 0, sizeof(*out));
	out->agents = f->n_agents;
	for (size_t i = 0; i < f->n_agents; i++) {
		const struct pf_agent *a = agent_at(f, i);
		bool stale = pf_agent_is_stale(f, a, now_ms);
		out->connected += pf_agent_online(a);
		out->connected_here += a->connected;
		out->stale += stale;
		out->healthy += pf_agent_online(a) && !stale && (!a->has_health || a->healthy);
		out->by_state[pf_agent_config_state(a)]++;
	}
}

/* ---- configs and assignments */

struct pf_cfg_slot *pf_fleet_config_find(struct pf_fleet *f, const char *name)
{
	for (size_t i = 0; i < f->n_cfgs; i++)
		if (f->cfgs[i]->serving && strcmp(f->cfgs[i]->name, name) == 0)
			return f->cfgs[i];
	return NULL;
}

struct pf_cfg_slot *pf_fleet_config_version(struct pf_fleet *f, const char *name,
					    int64_t version)
{
	for (size_t i = 0; i < f->n_cfgs; i++)
		if (f->cfgs[i]->version == version && strcmp(f->cfgs[i]->name, name) == 0)
			return f->cfgs[i];
	return NULL;
}

struct pf_cfg_slot *pf_fleet_config_add(struct pf_fleet *f, const char *name, int64_t version,
					const uint8_t hash[32], const char *body, size_t len,
					int64_t created_ms, bool serve)
{
	if (strlen(name) >= sizeof(((struct pf_cfg_slot *)0)->name)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	struct pf_cfg_slot *s = pf_fleet_config_version(f, name, version);
	if (!s) {
		struct pf_cfg_slot **n = realloc(f->cfgs, (f->n_cfgs + 1) * sizeof(*n));
		if (!n)
			return NULL;
		f->cfgs = n;
		s = calloc(1, sizeof(*s));
		char *copy = malloc(len + 1);
		if (!s || !copy) {
			free(s);
			free(copy);
			errno = ENOMEM;
			return NULL;
		}
		memcpy(copy, body, len);
		copy[len] = 0;
		snprintf(s->name, sizeof(s->name), "%s", name);
		s->body = copy;
		s->body_len = len;
		s->version = version;
		memcpy(s->hash, hash, 32);
		s->created_ms = created_ms;
		f->cfgs[f->n_cfgs++] = s;
	}
	if (serve) {
		struct pf_cfg_slot *old = pf_fleet_config_find(f, name);
		if (old)
			old->serving = false;
		s->serving = true;
	}
	return s;
}

int pf_fleet_config_set(struct pf_fleet *f, const char *name, int64_t version,
			const uint8_t hash[32], const char *body, size_t len, int64_t created_ms)
{
	return pf_fleet_config_add(f, name, version, hash, body, len, created_ms, true) ? 0
											: -errno;
}

bool pf_agent_set_pin(struct pf_fleet *f, struct pf_agent *a, struct pf_cfg_slot *v)
{
	a->pin = v;
	return pf_fleet_resolve_agent(f, a);
}

size_t pf_fleet_unpin_config(struct pf_fleet *f, const char *name, int64_t version)
{
	size_t n = 0;
	for (size_t i = 0; i < f->n_agents; i++) {
		struct pf_agent *a = agent_at(f, i);
		if (!a->pin || strcmp(a->pin->name, name) != 0 ||
		    (version && a->pin->version != version))
			continue;
		a->pin = NULL;
		pf_fleet_resolve_agent(f, a);
		n++;
	}
	return n;
}

bool pf_fleet_push_if_needed(struct pf_fleet *f, struct pf_agent *a)
{
	if (!a->connected || !pf_agent_needs_config(a) || !f->push)
		return false;
	f->push(a, f->push_ud);
	return true;
}

size_t pf_fleet_count_matching(struct pf_fleet *f, const struct pf_selector *sel,
			       const char *config, size_t *resolving)
{
	size_t n = 0, r = 0;
	for (size_t i = 0; i < f->n_agents; i++) {
		struct pf_agent *a = agent_at(f, i);
		if (sel && !pf_selector_match(sel, attr_lookup, a))
			continue;
		n++;
		if (config && a->desired && strcmp(a->desired->name, config) == 0)
			r++;
	}
	if (resolving)
		*resolving = r;
	return n;
}

static int asg_cmp(const void *pa, const void *pb)
{
	const struct assignment *a = pa, *b = pb;
	if (a->priority != b->priority)
		return a->priority > b->priority ? -1 : 1;
	return strcmp(a->name, b->name);
}

int pf_fleet_assignment_set(struct pf_fleet *f, const char *name, const char *selector,
			    const char *config, int64_t priority, struct pf_error *err)
{
	if (strlen(name) >= 128 || strlen(config) >= 128)
		return pf_error_set(err, -EINVAL, "name", "longer than 127 bytes");
	struct pf_selector *sel = pf_selector_compile(selector, err);
	if (!sel)
		return -EINVAL;
	struct assignment *slot = NULL;
	for (size_t i = 0; i < f->n_asg; i++)
		if (strcmp(f->asg[i].name, name) == 0)
			slot = &f->asg[i];
	if (!slot) {
		struct assignment *n = realloc(f->asg, (f->n_asg + 1) * sizeof(*n));
		if (!n) {
			pf_selector_free(sel);
			return -ENOMEM;
		}
		f->asg = n;
		slot = &f->asg[f->n_asg++];
		memset(slot, 0, sizeof(*slot));
		snprintf(slot->name, sizeof(slot->name), "%s", name);
	}
	pf_selector_free(slot->sel);
	slot->sel = sel;
	snprintf(slot->config, sizeof(slot->config), "%s", config);
	slot->priority = priority;
	qsort(f->asg, f->n_asg, sizeof(*f->asg), asg_cmp);
	return 0;
}

int pf_fleet_assignment_remove(struct pf_fleet *f, const char *name)
{
	for (size_t i = 0; i < f->n_asg; i++) {
		if (strcmp(f->asg[i].name, name) == 0) {
			pf_selector_free(f->asg[i].sel);
			memmove(&f->asg[i], &f->asg[i + 1], (f->n_asg - i - 1) * sizeof(*f->asg));
			f->n_asg--;
			return 0;
		}
	}
	return -ENOENT;
}

size_t pf_fleet_assignments_retain(struct pf_fleet *f, bool (*keep)(const char *name, void *ud),
				   void *ud)
{
	size_t removed = 0;
	for (size_t i = f->n_asg; i-- > 0;) {
		char name[sizeof(f->asg[i].name)];
		if (keep(f->asg[i].name, ud))
			continue;
		memcpy(name, f->asg[i].name, sizeof(name));
		pf_fleet_assignment_remove(f, name);
		removed++;
	}
	return removed;
}

static struct pf_cfg_slot *resolve(struct pf_fleet *f, struct pf_agent *a)
{
	for (size_t i = 0; i < f->n_asg; i++) {
		if (!pf_selector_match(f->asg[i].sel, attr_lookup, a))
			continue;
		struct pf_cfg_slot *s = pf_fleet_config_find(f, f->asg[i].config);
		if (s)
			return s;
	}
	return pf_fleet_config_find(f, "default");
}

bool pf_fleet_resolve_agent(struct pf_fleet *f, struct pf_agent *a)
{
	struct pf_cfg_slot *s = resolve(f, a);
	if (s && a->pin && strcmp(a->pin->name, s->name) == 0)
		s = a->pin;
	if (s == a->desired)
		return false;
	a->desired = s;
	pf_agent_mark_dirty(f, a);
	return true;
}

size_t pf_fleet_reconcile(struct pf_fleet *f)
{
	size_t pushed = 0;
	for (size_t i = 0; i < f->n_agents; i++) {
		struct pf_agent *a = agent_at(f, i);
		pf_fleet_resolve_agent(f, a);
		/* Push whenever the agent's reported hash no longer matches its desired one. */
		pushed += pf_fleet_push_if_needed(f, a);
	}
	return pushed;
}

/* ---- JSON views */

int pf_agent_attrs_json(const struct pf_agent *a, struct pf_buf *out)
{
	json_t *o = json_object();
	if (!o)
		return -ENOMEM;
	const char *p = a->attrs;
	for (uint16_t i = 0; p && i < a->n_attrs; i++) {
		const char *v = p + strlen(p) + 1;
		json_object_set_new(o, p, json_string(v));
		p = v + strlen(v) + 1;
	}
	char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	if (!s)
		return -ENOMEM;
	int r = pf_buf_append_str(out, s);
	free(s);
	return r;
}

static json_t *hash_json(const uint8_t h[32])
{
	char hex[65];
	pf_hex_encode(h, 32, hex);
	return json_string(hex);
}

json_t *pf_agent_to_json(const struct pf_fleet *f, const struct pf_agent *a, int64_t now_ms,
			 bool with_effective_config)
{
	char uid[PF_UUID_STR_LEN + 1];
	pf_uuid_format(a->uid, uid);
	json_t *o = json_object();
	json_t *attrs = json_object();
	json_t *cfg = json_object();
	if (!o || !attrs || !cfg) {
		json_decref(o);
		json_decref(attrs);
		json_decref(cfg);
		return NULL;
	}
	const char *p = a->attrs;
	for (uint16_t i = 0; p && i < a->n_attrs; i++) {
		const char *v = p + strlen(p) + 1;
		json_object_set_new(attrs, p, json_string(v));
		p = v + strlen(v) + 1;
	}
	bool stale = pf_agent_is_stale(f, a, now_ms);
	json_object_set_new(o, "instance_uid", json_string(uid));
	json_object_set_new(o, "connected", json_boolean(pf_agent_online(a)));
	json_object_set_new(o, "healthy", json_boolean(pf_agent_is_healthy(f, a, now_ms)));
	json_object_set_new(o, "stale", json_boolean(stale));
	json_object_set_new(o, "transport",
			    json_string(a->transport == PF_TRANSPORT_WS     ? "websocket"
					: a->transport == PF_TRANSPORT_HTTP ? "http"
									    : "none"));
	static const char *const creds[] = {NULL, "enrollment", "offered", "own"};
	const char *cred = a->credential < PF_ARRAY_SIZE(creds) ? creds[a->credential] : NULL;
	json_object_set_new(o, "credential", cred ? json_string(cred) : json_null());
	json_object_set_new(o, "capabilities", json_integer((json_int_t)a->capabilities));
	json_object_set_new(o, "custom_capabilities",
			    a->capture_capable ? json_pack("[s]", PF_CAPTURE_CAPABILITY)
					       : json_array());
	json_object_set_new(o, "attributes", attrs);

	enum pf_config_state st = pf_agent_config_state(a);
	if (a->desired) {
		json_object_set_new(cfg, "name", json_string(a->desired->name));
		json_object_set_new(cfg, "version", json_integer(a->desired->version));
		json_object_set_new(cfg, "hash", hash_json(a->desired->hash));
	} else {
		json_object_set_new(cfg, "name", json_null());
		json_object_set_new(cfg, "version", json_null());
		json_object_set_new(cfg, "hash", json_null());
	}
	json_object_set_new(cfg, "pinned", json_boolean(a->pin && a->desired == a->pin));
	json_object_set_new(cfg, "status", json_string(pf_config_state_name(st)));
	json_object_set_new(cfg, "error", a->remote_error && st == PF_CFG_FAILED
						  ? json_string(a->remote_error)
						  : json_null());
	json_object_set_new(cfg, "reported_hash",
			    a->has_reported_hash ? hash_json(a->reported_hash) : json_null());
	json_object_set_new(cfg, "effective_hash",
			    a->effective ? hash_json(a->effective->hash) : json_null());
	if (with_effective_config)
		json_object_set_new(cfg, "effective",
				    a->effective ? json_stringn(a->effective->body, a->effective->len)
						 : json_null());
	json_object_set_new(o, "config", cfg);

	json_t *health = NULL;
	if (a->health_json)
		health = json_loads(a->health_json, 0, NULL);
	json_object_set_new(o, "health", health ? health : json_object());
	json_object_set_new(o, "first_seen", json_integer(a->first_seen_ms));
	json_object_set_new(o, "last_seen", json_integer(a->last_seen_ms));
	return o;
}

void *pf_fleet_grow(void *v, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return v;
	size_t nc = *cap ? *cap * 2 : 16;
	void *nv = realloc(v, nc * size);
	if (nv)
		*cap = nc;
	return nv;
}
