/* sync.c — see sync.h. */
#include "sync.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <uv.h>

#include "capture.h"
#include "fleet.h"
#include "pf/compiler.h"
#include "pf/log.h"
#include "rollout.h"
#include "store.h"

static int sync_assignment(struct pf_sync *s, const char *name)
{
	struct pf_assignment a;
	struct pf_error err = {0};
	int rc = pf_store_assignment_get(s->store, name, &a);

	if (rc == -ENOENT) {
		pf_fleet_assignment_remove(s->fleet, name);
		return 0;
	}
	if (rc < 0)
		return rc;
	rc = pf_fleet_assignment_set(s->fleet, a.name, a.selector, a.config, a.priority, &err);
	if (rc < 0)
		pf_log_warn("sync: assignment %s: %s", name, err.msg);
	return rc;
}

/* The store's assignment names, while reloading them all. */
struct asg_names {
	struct pf_sync *s;
	char (*names)[128];
	size_t n, cap;
	bool oom;
};

static int asg_one(const struct pf_assignment *a, void *ud)
{
	struct asg_names *l = ud;
	struct pf_error err = {0};
	if (pf_fleet_assignment_set(l->s->fleet, a->name, a->selector, a->config, a->priority,
				    &err) < 0)
		pf_log_warn("sync: assignment %s: %s", a->name, err.msg);
	void *nv = pf_fleet_grow(l->names, &l->cap, l->n, sizeof(*l->names));
	if (!nv) {
		l->oom = true;
		return 0;
	}
	l->names = nv;
	memcpy(l->names[l->n++], a->name, sizeof(a->name));
	return 0;
}

static bool asg_stored(const char *name, void *ud)
{
	struct asg_names *l = ud;
	if (l->oom)
		return true; /* unsure: keep */
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->names[i], name) == 0)
			return true;
	return false;
}

int pf_sync_apply(struct pf_sync *s, const char *kind, const char *name, int64_t now_ms)
{
	int rc = 0;

	if (strcmp(kind, "config") == 0) {
		rc = pf_rollouts_reload_config(s->store, s->fleet, name);
	} else if (strcmp(kind, "assignment") == 0) {
		rc = sync_assignment(s, name);
	} else if (strcmp(kind, "token") == 0) {
		/* Tokens are read from the store at every request: a revoked one is already
		 * refused here. What is left is the connections that authenticated with it. */
		if (s->on_token)
			s->on_token(name, s->ud);
		s->applied++;
		return 0;
	} else if (strcmp(kind, "command") == 0 || strcmp(kind, "command_done") == 0) {
		if (s->on_command)
			s->on_command(kind, name, s->ud);
		s->applied++;
		return 0;
	} else if (strcmp(kind, "rollout") == 0) {
		/* Its pins and served version moved; a rollout whose replica died is adopted. */
		rc = pf_rollouts_reload_config(s->store, s->fleet, NULL);
		if (rc == 0 && s->rollouts) {
			struct pf_error err = {0};
			rc = pf_rollouts_load(s->rollouts, now_ms, &err);
		}
	} else if (strcmp(kind, "capture") == 0) {
		/* Its creator drives it; this replica serves the agents connected here. */
		if (s->captures)
			rc = pf_captures_adopt(s->captures, name, now_ms);
		if (rc == 0) {
			s->applied++;
			return 0; /* nothing to reconcile */
		}
	} else {
		return 0;
	}
	if (rc < 0) {
		s->failed++;
		pf_log_warn("sync: %s %s: %s", kind, name, pf_store_last_error(s->store));
		return rc;
	}
	s->applied++;
	s->pushed += pf_fleet_reconcile(s->fleet);
	pf_log_debug("sync: %s %s applied", kind, name);
	return 0;
}

int pf_sync_reload_all(struct pf_sync *s, int64_t now_ms)
{
	if (s->rollouts)
		pf_rollouts_relock(s->rollouts);
	int rc = pf_rollouts_reload_config(s->store, s->fleet, NULL);
	struct asg_names l = {.s = s};
	if (rc == 0)
		rc = pf_store_assignment_foreach(s->store, asg_one, &l);
	if (rc == 0) /* deleted meanwhile through another replica */
		pf_fleet_assignments_retain(s->fleet, asg_stored, &l);
	free(l.names);
	if (rc == 0 && s->rollouts) {
		struct pf_error err = {0};
		rc = pf_rollouts_load(s->rollouts, now_ms, &err);
	}
	if (rc < 0) {
		s->failed++;
		pf_log_warn("sync: reload: %s", pf_store_last_error(s->store));
		return rc;
	}
	s->pushed += pf_fleet_reconcile(s->fleet);
	return 0;
}

int pf_sync_load_agent(struct pf_fleet *f, const struct pf_agent_row *row)
{
	struct pf_agent *a = pf_fleet_get_or_add(f, row->uid, row->first_seen_ms);
	if (!a)
		return -ENOMEM;
	a->first_seen_ms = row->first_seen_ms;
	a->last_seen_ms = row->last_seen_ms;
	a->capabilities = row->capabilities;
	json_t *o = row->attributes_json ? json_loads(row->attributes_json, 0, NULL) : NULL;
	if (json_is_object(o)) {
		size_t n = json_object_size(o), i = 0;
		const char **k = calloc(n + 1, sizeof(*k)), **v = calloc(n + 1, sizeof(*v));
		const char *key;
		json_t *val;
		if (k && v) {
			json_object_foreach(o, key, val)
			{
				if (!json_is_string(val))
					continue;
				k[i] = key;
				v[i] = json_string_value(val);
				i++;
			}
			pf_agent_set_attributes(f, a, k, v, i);
		}
		free(k);
		free(v);
	}
	json_decref(o);
	if (row->health_json) {
		json_t *h = json_loads(row->health_json, 0, NULL);
		bool healthy = json_is_true(json_object_get(h, "healthy"));
		json_decref(h);
		pf_agent_set_health(f, a, healthy, row->health_json);
	}
	if (row->effective_config)
		pf_agent_set_effective(f, a, row->effective_config, strlen(row->effective_config));
	if (row->has_remote_hash)
		pf_agent_set_remote_status(f, a, row->remote_hash, 32, row->remote_status,
					   row->remote_error);
	/* Connected to another replica, per its row (this replica's own agents are never
	 * loaded over: pf_sync_refresh_agents skips them). */
	a->elsewhere = row->connected && !a->connected;
	return 0;
}

static int refresh_one(const struct pf_agent_row *row, void *ud)
{
	struct pf_fleet *f = ud;
	struct pf_agent *a = pf_fleet_find(f, row->uid);
	if (a && a->local)
		return 0; /* this replica's own: memory is newer than the row */
	return pf_sync_load_agent(f, row);
}

int pf_sync_refresh_agents(struct pf_store *st, struct pf_fleet *f, int64_t *cursor_ms)
{
	return pf_store_agents_foreach_since(st, cursor_ms, refresh_one, f);
}

int pf_sync_refresh_agent(struct pf_store *st, struct pf_fleet *f, const uint8_t uid[16])
{
	return pf_store_agent_get(st, uid, refresh_one, f);
}

/* ---------------------------------------------------------------- the LISTEN connection */

#define LISTEN_RETRY_MIN_MS 250
#define LISTEN_RETRY_MAX_MS 5000
#define LISTEN_CONNECT_MS 3000 /* the asynchronous connect's deadline */
#define ADOPT_EVERY_MS 5000    /* rollouts whose replica died are taken over this often */

struct pf_sync_listener {
	struct pf_sync sync;
	uv_loop_t *loop;
	struct pf_store_listener *listener;
	uv_poll_t *poll; /* NULL while not connected */
	int poll_fd;
	uv_timer_t timer;
	bool timer_init;
	uint64_t backoff_ms;
	bool warned;	  /* the outage was logged (once, until the database is back) */
	bool started;	  /* LISTEN was in effect once: later ones follow an outage */
	bool need_reload; /* the listener was re-made: reload what may have been missed */
};

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void listen_timer(uv_timer_t *t);
static void listen_io(uv_poll_t *h, int status, int events);

static void poll_closed(uv_handle_t *h)
{
	free(h);
}

static void stop_poll(struct pf_sync_listener *l)
{
	if (!l->poll)
		return;
	uv_poll_stop(l->poll);
	uv_close((uv_handle_t *)l->poll, poll_closed);
	l->poll = NULL;
	l->poll_fd = -1;
}

static void listen_arm(struct pf_sync_listener *l, uint64_t ms)
{
	uv_timer_stop(&l->timer);
	uv_timer_start(&l->timer, listen_timer, ms, 0);
}

/* Watches the listener's socket for what it wants now (a new socket: a new watcher). */
static int listen_watch(struct pf_sync_listener *l)
{
	int fd = pf_store_listener_fd(l->listener), w = pf_store_listener_wants(l->listener);
	if (fd < 0)
		return -EAGAIN;
	if (l->poll && l->poll_fd != fd)
		stop_poll(l);
	if (!l->poll) {
		uv_poll_t *p = malloc(sizeof(*p));
		if (!p || uv_poll_init(l->loop, p, fd) < 0) {
			free(p);
			return -ENOMEM;
		}
		p->data = l;
		l->poll = p;
		l->poll_fd = fd;
	}
	int ev = (w & PF_STORE_WANT_READ ? UV_READABLE : 0) |
		 (w & PF_STORE_WANT_WRITE ? UV_WRITABLE : 0);
	return uv_poll_start(l->poll, ev ? ev : UV_READABLE, listen_io) < 0 ? -EIO : 0;
}

/* The listener failed or was lost: the store stops reconnecting, the timer retries. */
static void listen_down(struct pf_sync_listener *l)
{
	stop_poll(l);
	pf_store_hold_reconnect(l->sync.store, true);
	l->backoff_ms = l->backoff_ms ? pf_min(l->backoff_ms * 2, (uint64_t)LISTEN_RETRY_MAX_MS)
				      : LISTEN_RETRY_MIN_MS;
	if (!l->warned)
		pf_log_warn("%s; retrying with backoff (writes answer 503 meanwhile)",
			    pf_store_listener_error(l->listener));
	else
		pf_log_debug("%s; next try in %llu ms", pf_store_listener_error(l->listener),
			     (unsigned long long)l->backoff_ms);
	l->warned = true;
	listen_arm(l, l->backoff_ms);
}

static void listen_start(struct pf_sync_listener *l)
{
	if (pf_store_listener_connect(l->listener) < 0 || listen_watch(l) < 0)
		listen_down(l);
	else
		listen_arm(l, LISTEN_CONNECT_MS);
}

static void on_notify(const char *kind, const char *name, void *ud)
{
	struct pf_sync_listener *l = ud;
	pf_sync_apply(&l->sync, kind, name, wall_ms());
}

static void listen_io(uv_poll_t *h, int status, int events)
{
	struct pf_sync_listener *l = h->data;
	bool was_ready = pf_store_listener_ready(l->listener);
	(void)events;
	int n = status < 0 ? -EAGAIN : pf_store_listener_step(l->listener, on_notify, l);
	if (n < 0 || listen_watch(l) < 0) {
		listen_down(l);
		return;
	}
	if (!was_ready && pf_store_listener_ready(l->listener)) {
		if (l->warned)
			pf_log_info("store: the database is reachable again; listening for other "
				    "replicas' changes");
		l->warned = false;
		l->backoff_ms = 0;
		pf_store_hold_reconnect(l->sync.store, false);
		l->need_reload = l->started; /* what was missed meanwhile */
		l->started = true;
		listen_arm(l, l->need_reload ? 0 : ADOPT_EVERY_MS);
	}
}

static void listen_timer(uv_timer_t *t)
{
	struct pf_sync_listener *l = t->data;
	if (!pf_store_listener_ready(l->listener)) {
		if (l->poll) { /* still connecting: the deadline passed */
			pf_store_listener_abort(l->listener, "no answer within 3 s");
			listen_down(l);
			return;
		}
		listen_start(l);
		return;
	}
	if (l->need_reload && pf_sync_reload_all(&l->sync, wall_ms()) == 0) {
		l->need_reload = false;
		pf_log_info("store: reloaded configs, assignments and pins after the outage");
	} else if (!l->need_reload && l->sync.rollouts) {
		struct pf_error err = {0};
		if (pf_rollouts_load(l->sync.rollouts, wall_ms(), &err) < 0)
			pf_log_debug("rollouts: adopting: %s", err.msg);
	}
	if (!l->need_reload && l->sync.on_command) /* commands for what was just adopted */
		l->sync.on_command(NULL, NULL, l->sync.ud);
	listen_arm(l, l->need_reload ? LISTEN_RETRY_MIN_MS * 2 : ADOPT_EVERY_MS);
}

struct pf_sync_listener *pf_sync_listener_new(struct uv_loop_s *loop, const char *store_url,
					      const struct pf_sync *sync, struct pf_error *err)
{
	struct pf_sync_listener *l = calloc(1, sizeof(*l));
	if (l)
		l->listener = pf_store_listener_new(store_url);
	if (!l || !l->listener) {
		free(l);
		pf_error_set(err, -ENOMEM, NULL, "out of memory");
		return NULL;
	}
	l->sync = *sync;
	l->loop = loop;
	l->poll_fd = -1;
	pf_store_gate_reconnect(l->sync.store, true);
	uv_timer_init(loop, &l->timer);
	l->timer.data = l;
	l->timer_init = true;
	listen_start(l);
	return l;
}

bool pf_sync_listener_ready(const struct pf_sync_listener *l)
{
	return pf_store_listener_ready(l->listener);
}

const struct pf_sync *pf_sync_listener_sync(const struct pf_sync_listener *l)
{
	return &l->sync;
}

void pf_sync_listener_probe(struct pf_sync_listener *l)
{
	if (!pf_store_unavailable(l->sync.store) || !pf_store_listener_ready(l->listener))
		return;
	stop_poll(l);
	listen_start(l);
}

void pf_sync_listener_stop(struct pf_sync_listener *l)
{
	if (!l)
		return;
	stop_poll(l);
	if (l->timer_init) {
		uv_timer_stop(&l->timer);
		uv_close((uv_handle_t *)&l->timer, NULL);
		l->timer_init = false;
	}
}

void pf_sync_listener_free(struct pf_sync_listener *l)
{
	if (!l)
		return;
	pf_store_listener_free(l->listener);
	free(l);
}
