/* podcache.c — see podcache.h. */
#include "k8s/podcache.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "http_client/http_client.h"
#include "pf/backoff.h"
#include "pf/compiler.h"
#include "pf/log.h"

#define DEFAULT_WATCH_TIMEOUT_S 300
#define DEFAULT_BACKOFF_BASE_MS 500
#define DEFAULT_BACKOFF_CAP_MS 30000
#define TOKEN_MAX 16384
#define LIST_PAGE 500
#define LIST_MAX_PAGES 64
#define URL_MAX 2048

struct pod_attr {
	char *key, *value;
};

struct pod_container {
	char id[PF_CONTAINER_ID_LEN]; /* "" while the runtime has not reported one */
	char *name;
	char *service_name; /* literal OTEL_SERVICE_NAME of its spec, or NULL */
};

struct pod {
	char uid[PF_POD_UID_LEN];
	char *label_service;	/* app.kubernetes.io/name, or NULL */
	struct pod_attr *attrs; /* pod-level attributes, labels included */
	size_t n_attrs;
	struct pod_container *c;
	size_t n_c;
};

struct slot {
	const char *key; /* NULL: empty; points into the pod */
	uint32_t pod, c;
};

struct pf_podcache {
	/* fixed after new() */
	char *api_url, *token_file, *ca_file, *node;
	uint32_t watch_timeout_s, max_pods;
	uint32_t backoff_base_ms, backoff_cap_ms;
	void (*on_status)(void *ctx, bool healthy, const char *status, const char *last_error);
	void *status_ctx;

	pthread_mutex_t lock; /* the cache, its indexes and stats */
	struct pod **pods;
	size_t n_pods;
	/* open-addressing indexes rebuilt after every change: container id and pod uid ->
	 * position; cap a power of two, at least twice the entries */
	struct slot *by_cid, *by_uid;
	size_t cid_cap, uid_cap;
	struct pf_podcache_stats st;

	int64_t retry_after_ms; /* the thread's: the API server's last Retry-After, 0 none */

	struct agent_http *http; /* the thread's client: one connection kept between requests */

	pthread_mutex_t stop_lock;
	pthread_cond_t stop_cond;
	bool stop, started;
	atomic_bool cancel; /* set with stop: the request in flight ends */
	pthread_t thread;
};

/* ---- pods from JSON ---------------------------------------------------------------------- */

static void pod_free(struct pod *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_attrs; i++) {
		free(p->attrs[i].key);
		free(p->attrs[i].value);
	}
	for (size_t i = 0; i < p->n_c; i++) {
		free(p->c[i].name);
		free(p->c[i].service_name);
	}
	free(p->attrs);
	free(p->c);
	free(p->label_service);
	free(p);
}

static char *dup_cut(const char *s)
{
	return strndup(s, PF_PODCACHE_MAX_VALUE);
}

static const char *jstr(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static int attr_add(struct pod *p, size_t cap, const char *prefix, const char *key,
		    const char *value)
{
	if (!value || !*value || p->n_attrs == cap)
		return 0;
	char *k = NULL;
	if (asprintf(&k, "%s%s", prefix, key) < 0)
		return -ENOMEM;
	char *v = dup_cut(value);
	if (!v) {
		free(k);
		return -ENOMEM;
	}
	p->attrs[p->n_attrs].key = k;
	p->attrs[p->n_attrs].value = v;
	p->n_attrs++;
	return 0;
}

int pf_podcache_runtime_id(const char *container_id, char out[PF_CONTAINER_ID_LEN])
{
	static const char *const schemes[] = {"containerd://", "cri-o://", "docker://"};
	out[0] = 0;
	if (!container_id)
		return -EINVAL;
	for (size_t i = 0; i < PF_ARRAY_SIZE(schemes); i++) {
		size_t n = strlen(schemes[i]);
		if (strncmp(container_id, schemes[i], n))
			continue;
		const char *id = container_id + n;
		if (strlen(id) != PF_CONTAINER_ID_LEN - 1)
			return -EINVAL;
		for (const char *c = id; *c; c++)
			if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
				return -EINVAL;
		memcpy(out, id, PF_CONTAINER_ID_LEN);
		return 0;
	}
	return -EINVAL;
}

static struct pod_container *container_named(struct pod *p, const char *name)
{
	for (size_t i = 0; i < p->n_c; i++)
		if (!strcmp(p->c[i].name, name))
			return &p->c[i];
	return NULL;
}

/* spec.containers / initContainers / ephemeralContainers: names and OTEL_SERVICE_NAME. */
static int add_spec_containers(struct pod *p, const json_t *list)
{
	size_t i;
	const json_t *c;
	json_array_foreach(list, i, c)
	{
		const char *name = jstr(c, "name");
		if (!name || container_named(p, name) || p->n_c == PF_PODCACHE_MAX_CONTAINERS)
			continue;
		struct pod_container *pc = &p->c[p->n_c];
		memset(pc, 0, sizeof(*pc));
		if (!(pc->name = dup_cut(name)))
			return -ENOMEM;
		p->n_c++;
		size_t j;
		const json_t *e;
		json_array_foreach(json_object_get(c, "env"), j, e)
		{
			const char *v = jstr(e, "value");
			if (v && *v && !pc->service_name &&
			    !strcmp(jstr(e, "name") ? jstr(e, "name") : "", "OTEL_SERVICE_NAME") &&
			    !(pc->service_name = dup_cut(v)))
				return -ENOMEM;
		}
	}
	return 0;
}

/* status.*ContainerStatuses: the runtime id of each named container. */
static int add_status_ids(struct pod *p, const json_t *list)
{
	size_t i;
	const json_t *c;
	json_array_foreach(list, i, c)
	{
		const char *name = jstr(c, "name");
		char id[PF_CONTAINER_ID_LEN];
		if (!name || pf_podcache_runtime_id(jstr(c, "containerID"), id) < 0)
			continue;
		struct pod_container *pc = container_named(p, name);
		if (!pc) {
			if (p->n_c == PF_PODCACHE_MAX_CONTAINERS)
				continue;
			pc = &p->c[p->n_c];
			memset(pc, 0, sizeof(*pc));
			if (!(pc->name = dup_cut(name)))
				return -ENOMEM;
			p->n_c++;
		}
		memcpy(pc->id, id, sizeof(id));
	}
	return 0;
}

/* Owner references: the controlling owner names the workload. A ReplicaSet named
 * <deployment>-<pod-template-hash> belongs to that Deployment (what the Deployment
 * controller names it); a Job's pod is also named after the Job. */
static int add_owners(struct pod *p, size_t cap, const json_t *meta, const json_t *labels)
{
	size_t i;
	const json_t *o;
	json_array_foreach(json_object_get(meta, "ownerReferences"), i, o)
	{
		const char *kind = jstr(o, "kind"), *name = jstr(o, "name");
		if (!kind || !name ||
		    (json_object_get(o, "controller") &&
		     !json_is_true(json_object_get(o, "controller"))))
			continue;
		int r = 0;
		if (!strcmp(kind, "ReplicaSet")) {
			r = attr_add(p, cap, "", "k8s.replicaset.name", name);
			const char *hash = jstr(labels, "pod-template-hash");
			size_t nl = strlen(name), hl = hash ? strlen(hash) : 0;
			if (r == 0 && hl && nl > hl + 1 && name[nl - hl - 1] == '-' &&
			    !strcmp(name + nl - hl, hash)) {
				char *dep = strndup(name, nl - hl - 1);
				if (!dep)
					return -ENOMEM;
				r = attr_add(p, cap, "", "k8s.deployment.name", dep);
				free(dep);
			}
		} else if (!strcmp(kind, "StatefulSet")) {
			r = attr_add(p, cap, "", "k8s.statefulset.name", name);
		} else if (!strcmp(kind, "DaemonSet")) {
			r = attr_add(p, cap, "", "k8s.daemonset.name", name);
		} else if (!strcmp(kind, "Job")) {
			r = attr_add(p, cap, "", "k8s.job.name", name);
		}
		if (r < 0)
			return r;
		break;
	}
	return 0;
}

/* A Pod object -> struct pod. -EBADMSG (err names the field) when it is not a pod. */
static int pod_parse(const json_t *obj, struct pod **out, struct pf_error *err)
{
	const json_t *meta = json_object_get(obj, "metadata");
	const json_t *spec = json_object_get(obj, "spec");
	const json_t *status = json_object_get(obj, "status");
	const char *uid = jstr(meta, "uid");
	if (!json_is_object(meta) || !uid || strlen(uid) != PF_POD_UID_LEN - 1)
		return pf_error_set(err, -EBADMSG, "metadata.uid", "missing or not a UUID");
	const json_t *labels = json_object_get(meta, "labels");
	size_t cap = 12 + (json_is_object(labels) ? json_object_size(labels) : 0);
	if (cap > 12 + PF_PODCACHE_MAX_LABELS)
		cap = 12 + PF_PODCACHE_MAX_LABELS;
	struct pod *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->attrs = calloc(cap, sizeof(*p->attrs));
	p->c = calloc(PF_PODCACHE_MAX_CONTAINERS, sizeof(*p->c));
	if (!p->attrs || !p->c)
		goto enomem;
	memcpy(p->uid, uid, PF_POD_UID_LEN);
	if (attr_add(p, cap, "", "k8s.pod.uid", uid) < 0 ||
	    attr_add(p, cap, "", "k8s.pod.name", jstr(meta, "name")) < 0 ||
	    attr_add(p, cap, "", "k8s.namespace.name", jstr(meta, "namespace")) < 0 ||
	    attr_add(p, cap, "", "k8s.node.name", jstr(spec, "nodeName")) < 0 ||
	    add_owners(p, cap, meta, labels) < 0)
		goto enomem;
	const char *key;
	const json_t *v;
	size_t nl = 0;
	json_object_foreach((json_t *)labels, key, v)
	{
		if (!json_is_string(v) || nl == PF_PODCACHE_MAX_LABELS)
			continue;
		nl++;
		if (attr_add(p, cap, "k8s.pod.label.", key, json_string_value(v)) < 0)
			goto enomem;
	}
	const char *app = jstr(labels, "app.kubernetes.io/name");
	if (app && *app && !(p->label_service = dup_cut(app)))
		goto enomem;
	if (add_spec_containers(p, json_object_get(spec, "containers")) < 0 ||
	    add_spec_containers(p, json_object_get(spec, "initContainers")) < 0 ||
	    add_spec_containers(p, json_object_get(spec, "ephemeralContainers")) < 0 ||
	    add_status_ids(p, json_object_get(status, "containerStatuses")) < 0 ||
	    add_status_ids(p, json_object_get(status, "initContainerStatuses")) < 0 ||
	    add_status_ids(p, json_object_get(status, "ephemeralContainerStatuses")) < 0)
		goto enomem;
	*out = p;
	return 0;
enomem:
	pod_free(p);
	return -ENOMEM;
}

/* ---- the cache --------------------------------------------------------------------------- */

static uint64_t str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static struct slot *slot_find(struct slot *t, size_t cap, const char *key)
{
	if (!t)
		return NULL;
	for (size_t i = str_hash(key) & (cap - 1);; i = (i + 1) & (cap - 1)) {
		if (!t[i].key)
			return NULL;
		if (!strcmp(t[i].key, key))
			return &t[i];
	}
}

static void slot_put(struct slot *t, size_t cap, const char *key, uint32_t pod, uint32_t c)
{
	size_t i = str_hash(key) & (cap - 1);
	while (t[i].key && strcmp(t[i].key, key))
		i = (i + 1) & (cap - 1);
	t[i] = (struct slot){key, pod, c};
}

static struct slot *table_new(size_t entries, size_t *cap)
{
	size_t c = 16;
	while (c < 2 * entries)
		c *= 2;
	*cap = c;
	return calloc(c, sizeof(struct slot));
}

/* Caller holds the lock: the counts, the generation and the indexes after a change. Without
 * memory for the indexes lookups fall back to scanning. */
static void count_containers(struct pf_podcache *pc)
{
	uint64_t n = 0;
	for (size_t i = 0; i < pc->n_pods; i++)
		for (size_t j = 0; j < pc->pods[i]->n_c; j++)
			n += pc->pods[i]->c[j].id[0] != 0;
	pc->st.pods = pc->n_pods;
	pc->st.containers = n;
	pc->st.generation++;
	free(pc->by_cid);
	free(pc->by_uid);
	pc->by_cid = table_new(n, &pc->cid_cap);
	pc->by_uid = table_new(pc->n_pods, &pc->uid_cap);
	for (size_t i = 0; i < pc->n_pods; i++) {
		const struct pod *p = pc->pods[i];
		if (pc->by_uid)
			slot_put(pc->by_uid, pc->uid_cap, p->uid, (uint32_t)i, 0);
		for (size_t j = 0; pc->by_cid && j < p->n_c; j++)
			if (p->c[j].id[0])
				slot_put(pc->by_cid, pc->cid_cap, p->c[j].id, (uint32_t)i,
					 (uint32_t)j);
	}
}

static ssize_t find_pod(struct pf_podcache *pc, const char *uid)
{
	for (size_t i = 0; i < pc->n_pods; i++)
		if (!strcmp(pc->pods[i]->uid, uid))
			return (ssize_t)i;
	return -1;
}

static void set_rv(char *rv, size_t rvlen, const char *v)
{
	if (rv && rvlen && v)
		snprintf(rv, rvlen, "%s", v);
}

/* Replaces the cache with these Pod objects (malformed ones skipped). */
static int apply_items(struct pf_podcache *pc, const json_t *items, const char *rv)
{
	size_t cap = json_array_size(items);
	uint64_t dropped = 0;
	if (cap > pc->max_pods) {
		dropped = cap - pc->max_pods;
		cap = pc->max_pods;
	}
	struct pod **pods = calloc(cap ? cap : 1, sizeof(*pods));
	if (!pods)
		return -ENOMEM;
	size_t n = 0, i;
	const json_t *it;
	json_array_foreach(items, i, it)
	{
		if (n == cap)
			break;
		if (pod_parse(it, &pods[n], NULL) == -ENOMEM) {
			for (size_t k = 0; k < n; k++)
				pod_free(pods[k]);
			free(pods);
			return -ENOMEM;
		}
		if (pods[n])
			n++;
	}
	pthread_mutex_lock(&pc->lock);
	struct pod **old = pc->pods;
	size_t n_old = pc->n_pods;
	pc->pods = pods;
	pc->n_pods = n;
	pc->st.dropped = dropped;
	pc->st.lists++;
	pc->st.synced = true;
	set_rv(pc->st.resource_version, sizeof(pc->st.resource_version), rv);
	count_containers(pc);
	pthread_mutex_unlock(&pc->lock);
	for (size_t k = 0; k < n_old; k++)
		pod_free(old[k]);
	free(old);
	return 0;
}

int pf_podcache_apply_list(struct pf_podcache *pc, const char *body, size_t len, char *rv,
			   size_t rvlen, struct pf_error *err)
{
	json_error_t je;
	json_t *root = json_loadb(body, len, 0, &je);
	if (!root)
		return pf_error_set(err, -EBADMSG, "", "pod list: %s (line %d)", je.text, je.line);
	const json_t *items = json_object_get(root, "items");
	const json_t *meta = json_object_get(root, "metadata");
	if (!json_is_array(items) || !json_is_object(meta)) {
		json_decref(root);
		return pf_error_set(err, -EBADMSG, "items", "not a PodList");
	}
	const char *lrv = jstr(meta, "resourceVersion");
	int r = apply_items(pc, items, lrv ? lrv : "");
	if (r == 0)
		set_rv(rv, rvlen, lrv ? lrv : "");
	json_decref(root);
	return r;
}

/* Caller holds the lock. Takes p. */
static int cache_put(struct pf_podcache *pc, struct pod *p)
{
	ssize_t at = find_pod(pc, p->uid);
	if (at >= 0) {
		pod_free(pc->pods[at]);
		pc->pods[at] = p;
		return 0;
	}
	if (pc->n_pods >= pc->max_pods) {
		pc->st.dropped++;
		pod_free(p);
		return 0;
	}
	struct pod **np = realloc(pc->pods, (pc->n_pods + 1) * sizeof(*np));
	if (!np) {
		pod_free(p);
		return -ENOMEM;
	}
	pc->pods = np;
	pc->pods[pc->n_pods++] = p;
	return 0;
}

/* Caller holds the lock. */
static void cache_delete(struct pf_podcache *pc, const char *uid)
{
	ssize_t at = find_pod(pc, uid);
	if (at < 0)
		return;
	pod_free(pc->pods[at]);
	pc->pods[at] = pc->pods[--pc->n_pods];
}

int pf_podcache_apply_event(struct pf_podcache *pc, const char *line, size_t len, char *rv,
			    size_t rvlen, struct pf_error *err)
{
	json_error_t je;
	json_t *root = json_loadb(line, len, 0, &je);
	if (!root)
		return pf_error_set(err, -EBADMSG, "", "watch event: %s", je.text);
	const char *type = jstr(root, "type");
	const json_t *obj = json_object_get(root, "object");
	int r = 0;
	if (!type || !json_is_object(obj)) {
		r = pf_error_set(err, -EBADMSG, "type", "not a watch event");
	} else if (!strcmp(type, "ERROR")) {
		/* a Status object: 410 Gone means our resourceVersion is too old */
		json_int_t code = json_integer_value(json_object_get(obj, "code"));
		const char *msg = jstr(obj, "message");
		r = code == 410 ? -ESTALE : -EPROTO;
		pf_error_set(err, r, "", "watch: %lld %s", (long long)code, msg ? msg : "error");
	} else if (!strcmp(type, "BOOKMARK")) {
		set_rv(rv, rvlen, jstr(json_object_get(obj, "metadata"), "resourceVersion"));
	} else if (!strcmp(type, "ADDED") || !strcmp(type, "MODIFIED") ||
		   !strcmp(type, "DELETED")) {
		struct pod *p = NULL;
		r = pod_parse(obj, &p, err);
		if (r == 0) {
			pthread_mutex_lock(&pc->lock);
			if (!strcmp(type, "DELETED")) {
				cache_delete(pc, p->uid);
				pod_free(p);
			} else {
				r = cache_put(pc, p);
			}
			pc->st.events++;
			count_containers(pc);
			pthread_mutex_unlock(&pc->lock);
			set_rv(rv, rvlen,
			       jstr(json_object_get(obj, "metadata"), "resourceVersion"));
		}
	} else {
		r = pf_error_set(err, -EBADMSG, "type", "unknown watch event type '%s'", type);
	}
	if (r == 0 && rv && rv[0]) {
		pthread_mutex_lock(&pc->lock);
		set_rv(pc->st.resource_version, sizeof(pc->st.resource_version), rv);
		pthread_mutex_unlock(&pc->lock);
	}
	json_decref(root);
	return r;
}

int pf_podcache_container_attrs(struct pf_podcache *pc, const char *container_id,
				const char *pod_uid,
				int (*add)(void *actx, const char *key, const char *value),
				void *actx)
{
	bool by_cid = container_id && container_id[0], by_uid = pod_uid && pod_uid[0];
	if (!by_cid && !by_uid)
		return 0;
	pthread_mutex_lock(&pc->lock);
	const struct pod *pod = NULL;
	const struct pod_container *c = NULL;
	if (pc->by_cid && pc->by_uid) {
		const struct slot *sl =
		    by_cid ? slot_find(pc->by_cid, pc->cid_cap, container_id) : NULL;
		if (sl) {
			pod = pc->pods[sl->pod];
			c = &pod->c[sl->c];
		} else if (by_uid && (sl = slot_find(pc->by_uid, pc->uid_cap, pod_uid))) {
			pod = pc->pods[sl->pod];
		}
	} else {
		for (size_t i = 0; i < pc->n_pods && !c; i++) {
			const struct pod *p = pc->pods[i];
			for (size_t j = 0; by_cid && j < p->n_c && !c; j++)
				if (!strcmp(p->c[j].id, container_id)) {
					c = &p->c[j];
					pod = p;
				}
			if (!pod && by_uid && !strcmp(p->uid, pod_uid))
				pod = p;
		}
	}
	int r = 0, n = 0;
	for (size_t i = 0; pod && i < pod->n_attrs && r >= 0; i++, n++)
		r = add(actx, pod->attrs[i].key, pod->attrs[i].value);
	if (r >= 0 && c) {
		r = add(actx, "k8s.container.name", c->name);
		n++;
	}
	const char *svc = c && c->service_name ? c->service_name : pod ? pod->label_service : NULL;
	if (r >= 0 && svc) {
		r = add(actx, "service.name", svc);
		n++;
	}
	pthread_mutex_unlock(&pc->lock);
	return r < 0 ? r : n;
}

static int source_attrs(void *ctx, const char *container_id, const char *pod_uid,
			int (*add)(void *actx, const char *key, const char *value), void *actx)
{
	return pf_podcache_container_attrs(ctx, container_id, pod_uid, add, actx);
}

static uint64_t source_generation(void *ctx)
{
	struct pf_podcache *pc = ctx;
	pthread_mutex_lock(&pc->lock);
	uint64_t g = pc->st.generation;
	pthread_mutex_unlock(&pc->lock);
	return g;
}

void pf_podcache_source(struct pf_podcache *pc, struct pf_procinfo_source *out)
{
	out->container_attrs = source_attrs;
	out->generation = source_generation;
	out->ctx = pc;
}

void pf_podcache_stats(struct pf_podcache *pc, struct pf_podcache_stats *out)
{
	pthread_mutex_lock(&pc->lock);
	*out = pc->st;
	pthread_mutex_unlock(&pc->lock);
}

/* ---- HTTP to the API server -------------------------------------------------------------- */

struct xfer {
	struct pf_podcache *pc;
	bool watch;
	char *buf; /* list: the body; watch: the current partial line */
	size_t len, cap, max;
	bool too_big;
	/* watch */
	char *rv;
	size_t rvlen;
	int event_rc; /* first error applying an event (stops the transfer) */
	struct pf_error *err;
	uint64_t events;
};

static bool stopping(struct pf_podcache *pc)
{
	pthread_mutex_lock(&pc->stop_lock);
	bool s = pc->stop;
	pthread_mutex_unlock(&pc->stop_lock);
	return s;
}

static int buf_append(struct xfer *x, const char *d, size_t n)
{
	if (x->len + n + 1 > x->max) {
		x->too_big = true;
		return -E2BIG;
	}
	if (x->len + n + 1 > x->cap) {
		size_t nc = x->cap ? x->cap : 16384;
		while (nc < x->len + n + 1)
			nc *= 2;
		char *nb = realloc(x->buf, nc);
		if (!nb)
			return -ENOMEM;
		x->buf = nb;
		x->cap = nc;
	}
	memcpy(x->buf + x->len, d, n);
	x->len += n;
	x->buf[x->len] = 0;
	return 0;
}

static int xfer_write(void *ud, const char *data, size_t n)
{
	struct xfer *x = ud;
	if (!x->watch)
		return buf_append(x, data, n);
	/* a watch: newline-delimited JSON events */
	const char *p = data, *end = data + n;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t take = nl ? (size_t)(nl - p) : (size_t)(end - p);
		if (buf_append(x, p, take) < 0)
			return -1;
		p += take;
		if (!nl)
			break;
		p++;
		if (x->len) {
			int r =
			    pf_podcache_apply_event(x->pc, x->buf, x->len, x->rv, x->rvlen, x->err);
			x->len = 0;
			x->events++;
			if (r < 0 && r != -EBADMSG) {
				x->event_rc = r;
				return -1;
			}
			if (r == -EBADMSG) {
				pf_log_debug("k8s: skipped a watch line: %s", x->err->msg);
				pf_error_clear(x->err);
			}
		}
	}
	return 0;
}

static char *read_token(const char *path)
{
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return NULL;
	char *t = calloc(1, TOKEN_MAX + 1);
	size_t n = t ? fread(t, 1, TOKEN_MAX, fp) : 0;
	fclose(fp);
	if (!t)
		return NULL;
	while (n && (t[n - 1] == '\n' || t[n - 1] == '\r' || t[n - 1] == ' '))
		t[--n] = 0;
	return t;
}

/* Percent-encodes s for a query value (RFC 3986: unreserved characters stay). NULL: ENOMEM. */
static char *url_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *out = malloc(3 * n + 1), *o = out;
	if (!out)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		    *p == '-' || *p == '.' || *p == '_' || *p == '~') {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = 0;
	return out;
}

/* One GET. Returns 0 after a 2xx answer completed, -ESTALE for 410, -EACCES for 401/403,
 * -EHOSTUNREACH when the server was not reached, -EIO for other failures (err says why),
 * -ECANCELED when stopping. The API server's Retry-After (of a 429 from API Priority and
 * Fairness, or a 503; RFC 9110 section 10.2.3) is kept for the next retry. */
static int http_get(struct pf_podcache *pc, const char *url, struct xfer *x, long timeout_s,
		    struct pf_error *err)
{
	_cleanup_free_ char *token = pc->token_file ? read_token(pc->token_file) : NULL;
	_cleanup_free_ char *auth = NULL;
	const char *hdrs[2] = {"Accept: application/json"};
	size_t n_hdrs = 1;
	if (token && *token && asprintf(&auth, "Authorization: Bearer %s", token) >= 0)
		hdrs[n_hdrs++] = auth;
	if (!pc->http && !(pc->http = agent_http_new()))
		return pf_error_set(err, -ENOMEM, "", "cannot start an HTTP client");
	struct agent_http_tls tls = {.ca_file = pc->ca_file};
	struct agent_http_request req = {
	    .method = "GET", .url = url, .headers = hdrs, .n_headers = n_hdrs};
	struct agent_http_options opt = {.timeout_ms = (uint32_t)timeout_s * 1000u,
					 .tls = &tls,
					 .decode_gzip = true,
					 .cancel = &pc->cancel,
					 .connect_timeout_ms = 10000,
					 /* a quiet watch on a dead connection is noticed in about a
					  * minute, not at its end */
					 .keepalive_idle_s = 30,
					 .keepalive_intvl_s = 10,
					 .on_data = xfer_write,
					 .data_ctx = x};
	struct agent_http_result res;
	struct pf_error herr = {0};
	agent_http_result_init(&res, 1);
	int hr = agent_http_do(pc->http, &req, &opt, &res, &herr);
	long status = res.status;
	if (res.retry_after[0]) {
		int64_t ms = pf_retry_after_parse(res.retry_after, (int64_t)time(NULL));
		if (ms >= 0)
			pc->retry_after_ms = ms;
	}
	agent_http_result_release(&res);
	if (x->event_rc)
		return x->event_rc;
	if (stopping(pc))
		return -ECANCELED;
	if (status == 410)
		return pf_error_set(err, -ESTALE, "", "HTTP 410: resourceVersion too old");
	if (status == 401 || status == 403)
		return pf_error_set(err, -EACCES, "", "HTTP %ld from the API server (%s)", status,
				    status == 401 ? "token not accepted"
						  : "RBAC: needs get/list/watch on pods");
	if (status == 429)
		return pf_error_set(err, -EAGAIN, "", "HTTP 429 from the API server (too many "
						       "requests: retrying after its Retry-After)");
	if (status >= 300)
		return pf_error_set(err, -EIO, "", "HTTP %ld from the API server", status);
	if (x->too_big && x->watch) {
		/* resuming would replay the same event: start over with a list, after which
		 * the watch starts past it */
		pf_log_warn("k8s: a watch event over %zu bytes; listing again", x->max);
		return pf_error_set(err, -ESTALE, "", "watch event larger than %zu bytes", x->max);
	}
	if (x->too_big)
		return pf_error_set(err, -E2BIG, "", "answer larger than %zu bytes", x->max);
	if (hr < 0 && x->watch && status >= 200 && status < 300) {
		/* the watch was accepted and then ended early (our time guard, a proxy or
		 * the server closing it): resume it from the last resourceVersion */
		pf_log_debug("k8s: watch ended after %llu events: %s",
			     (unsigned long long)x->events, herr.msg);
		return 0;
	}
	if (hr < 0)
		return pf_error_set(err, status ? -EIO : -EHOSTUNREACH, "",
				    "API server unreachable: %s", herr.msg);
	return 0;
}

static int pods_url(struct pf_podcache *pc, char *out, size_t n, const char *extra)
{
	_cleanup_free_ char *node = url_escape(pc->node);
	if (!node)
		return -ENOMEM;
	int w = snprintf(out, n, "%s/api/v1/pods?fieldSelector=spec.nodeName%%3D%s%s", pc->api_url,
			 node, extra);
	return w < 0 || (size_t)w >= n ? -ENAMETOOLONG : 0;
}

/* A paged list (limit/continue); the pages' items replace the cache at the end. */
static int do_list(struct pf_podcache *pc, char *rv, size_t rvlen, struct pf_error *err)
{
	json_t *all = json_array();
	_cleanup_free_ char *cont = NULL;
	char list_rv[64] = "";
	int r = 0;
	if (!all)
		return -ENOMEM;
	for (int page = 0; page < LIST_MAX_PAGES; page++) {
		char extra[1024], url[URL_MAX];
		_cleanup_free_ char *ec = cont ? url_escape(cont) : NULL;
		snprintf(extra, sizeof(extra), "&limit=%d%s%s", LIST_PAGE, ec ? "&continue=" : "",
			 ec ? ec : "");
		if ((r = pods_url(pc, url, sizeof(url), extra)) < 0)
			break;
		struct xfer x = {.pc = pc, .max = PF_PODCACHE_MAX_LIST_BYTES};
		r = http_get(pc, url, &x, 60, err);
		json_t *root = r == 0 ? json_loadb(x.buf ? x.buf : "", x.len, 0, NULL) : NULL;
		free(x.buf);
		if (r < 0)
			break;
		const json_t *items = json_object_get(root, "items");
		const json_t *meta = json_object_get(root, "metadata");
		if (!json_is_array(items) || !json_is_object(meta)) {
			json_decref(root);
			r = pf_error_set(err, -EBADMSG, "",
					 "the API server's answer is not a PodList");
			break;
		}
		json_array_extend(all, (json_t *)items);
		if (jstr(meta, "resourceVersion"))
			snprintf(list_rv, sizeof(list_rv), "%s", jstr(meta, "resourceVersion"));
		free(cont);
		cont = jstr(meta, "continue") && *jstr(meta, "continue")
			   ? strdup(jstr(meta, "continue"))
			   : NULL;
		json_decref(root);
		if (!cont)
			break;
	}
	if (r == 0) {
		r = apply_items(pc, all, list_rv);
		if (r == 0)
			set_rv(rv, rvlen, list_rv);
	}
	json_decref(all);
	return r;
}

static int do_watch(struct pf_podcache *pc, char *rv, size_t rvlen, uint64_t *events,
		    struct pf_error *err)
{
	char url[URL_MAX], extra[256];
	_cleanup_free_ char *erv = url_escape(rv);
	if (!erv)
		return -ENOMEM;
	snprintf(extra, sizeof(extra),
		 "&watch=1&allowWatchBookmarks=true&timeoutSeconds=%u&resourceVersion=%s",
		 pc->watch_timeout_s, erv);
	int r = pods_url(pc, url, sizeof(url), extra);
	if (r < 0)
		return r;
	pthread_mutex_lock(&pc->lock);
	pc->st.watches++;
	pthread_mutex_unlock(&pc->lock);
	struct xfer x = {.pc = pc,
			 .watch = true,
			 .max = PF_PODCACHE_MAX_EVENT_BYTES,
			 .rv = rv,
			 .rvlen = rvlen,
			 .err = err};
	/* the server ends the watch after timeoutSeconds; our timeout is a guard above it */
	r = http_get(pc, url, &x, (long)pc->watch_timeout_s + 30, err);
	free(x.buf);
	*events = x.events;
	return r;
}

/* ---- the thread -------------------------------------------------------------------------- */

static void report(struct pf_podcache *pc, bool healthy, const char *status, const char *error)
{
	bool changed;
	pthread_mutex_lock(&pc->lock);
	changed = pc->st.reachable != healthy || strcmp(pc->st.last_error, error ? error : "");
	pc->st.reachable = healthy;
	snprintf(pc->st.last_error, sizeof(pc->st.last_error), "%s", error ? error : "");
	if (!healthy)
		pc->st.errors++;
	pthread_mutex_unlock(&pc->lock);
	if (changed) {
		if (healthy)
			pf_log_info("k8s: %s", status);
		else
			pf_log_warn("k8s: %s", error);
	}
	if (pc->on_status)
		pc->on_status(pc->status_ctx, healthy, status, error);
}

static void report_synced(struct pf_podcache *pc)
{
	struct pf_podcache_stats st;
	char status[160];
	pf_podcache_stats(pc, &st);
	snprintf(status, sizeof(status), "watching pods of node %s: %llu pods, %llu containers",
		 pc->node, (unsigned long long)st.pods, (unsigned long long)st.containers);
	report(pc, true, status, NULL);
}

/* Sleeps ms unless stopped first; true when stopping. */
static bool wait_stop(struct pf_podcache *pc, uint64_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&pc->stop_lock);
	while (!pc->stop && pthread_cond_timedwait(&pc->stop_cond, &pc->stop_lock, &ts) == 0)
		;
	bool s = pc->stop;
	pthread_mutex_unlock(&pc->stop_lock);
	return s;
}

static void *run(void *arg)
{
	struct pf_podcache *pc = arg;
	struct pf_backoff b;
	pf_backoff_init(&b, pc->backoff_base_ms, pc->backoff_cap_ms);
	char rv[64] = "";
	while (!stopping(pc)) {
		struct pf_error err = {0};
		int r;
		if (!rv[0]) {
			r = do_list(pc, rv, sizeof(rv), &err);
			if (r == 0) {
				report_synced(pc);
				pf_backoff_reset(&b);
				continue;
			}
		} else {
			uint64_t events = 0;
			r = do_watch(pc, rv, sizeof(rv), &events, &err);
			if (r == 0 || r == -ESTALE) {
				if (r == -ESTALE) {
					/* our resourceVersion expired: start again with a list */
					pthread_mutex_lock(&pc->lock);
					pc->st.relists++;
					pthread_mutex_unlock(&pc->lock);
					rv[0] = 0;
				}
				report_synced(pc);
				/* a watch that ends at once without news is not retried in a
				 * tight loop */
				if (events == 0 && r == 0 && wait_stop(pc, pf_backoff_next(&b)))
					break;
				if (events)
					pf_backoff_reset(&b);
				continue;
			}
		}
		if (r == -ECANCELED)
			break;
		if (r == -ENOMEM)
			pf_error_set(&err, r, "", "out of memory");
		/* keep rv: the next watch resumes where this one broke (a list when it is
		 * empty); the cache keeps serving what it has */
		report(pc, false,
		       r == -EHOSTUNREACH ? "API server unreachable" : "API server request failed",
		       err.msg[0] ? err.msg : strerror(-r));
		if (pc->retry_after_ms > 0)
			pf_backoff_retry_after(&b, (uint64_t)pc->retry_after_ms);
		pc->retry_after_ms = 0;
		if (wait_stop(pc, pf_backoff_next(&b)))
			break;
	}
	return NULL;
}

/* ---- lifecycle --------------------------------------------------------------------------- */

static char *opt_file(const char *given, const char *name)
{
	if (given)
		return strdup(given);
	char path[256];
	snprintf(path, sizeof(path), "%s/%s", PF_PODCACHE_SA_DIR, name);
	return access(path, R_OK) == 0 ? strdup(path) : NULL;
}

struct pf_podcache *pf_podcache_new(const struct pf_podcache_options *opt, struct pf_error *err)
{
	if (!opt || !opt->node_name || !*opt->node_name) {
		pf_error_set(err, -EINVAL, "k8s.node", "the node name is required (K8S_NODE_NAME)");
		errno = EINVAL;
		return NULL;
	}
	char url[512];
	if (opt->api_url) {
		snprintf(url, sizeof(url), "%s", opt->api_url);
	} else {
		const char *host = getenv("KUBERNETES_SERVICE_HOST");
		const char *port = getenv("KUBERNETES_SERVICE_PORT");
		if (!host || !*host) {
			pf_error_set(err, -EINVAL, "k8s.api",
				     "not in a cluster (KUBERNETES_SERVICE_HOST unset) and no API "
				     "server URL given");
			errno = EINVAL;
			return NULL;
		}
		bool v6 = strchr(host, ':') != NULL;
		snprintf(url, sizeof(url), "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "",
			 port && *port ? port : "443");
	}
	size_t ul = strlen(url);
	while (ul && url[ul - 1] == '/')
		url[--ul] = 0;
	if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) {
		pf_error_set(err, -EINVAL, "k8s.api",
			     "must be an http:// or https:// URL, got '%s'", url);
		errno = EINVAL;
		return NULL;
	}
	struct pf_podcache *pc = calloc(1, sizeof(*pc));
	if (!pc)
		goto enomem;
	pthread_mutex_init(&pc->lock, NULL);
	pthread_mutex_init(&pc->stop_lock, NULL);
	atomic_init(&pc->cancel, false);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_cond_init(&pc->stop_cond, &ca);
	pthread_condattr_destroy(&ca);
	pc->api_url = strdup(url);
	pc->node = strdup(opt->node_name);
	pc->token_file = opt_file(opt->token_file, "token");
	pc->ca_file = opt_file(opt->ca_file, "ca.crt");
	if (!pc->api_url || !pc->node || (opt->token_file && !pc->token_file) ||
	    (opt->ca_file && !pc->ca_file)) {
		pf_podcache_free(pc);
		goto enomem;
	}
	pc->watch_timeout_s = opt->watch_timeout_s ? opt->watch_timeout_s : DEFAULT_WATCH_TIMEOUT_S;
	pc->backoff_base_ms = opt->backoff_base_ms ? opt->backoff_base_ms : DEFAULT_BACKOFF_BASE_MS;
	pc->backoff_cap_ms = opt->backoff_cap_ms ? opt->backoff_cap_ms : DEFAULT_BACKOFF_CAP_MS;
	pc->max_pods = opt->max_pods && opt->max_pods < PF_PODCACHE_MAX_PODS ? opt->max_pods
									     : PF_PODCACHE_MAX_PODS;
	pc->on_status = opt->on_status;
	pc->status_ctx = opt->status_ctx;
	return pc;
enomem:
	return pf_error_oom(err);
}

int pf_podcache_start(struct pf_podcache *pc, struct pf_error *err)
{
	if (pc->started)
		return 0;
	int r = pthread_create(&pc->thread, NULL, run, pc);
	if (r)
		return pf_error_set(err, -r, "", "cannot start the pod watch thread: %s",
				    strerror(r));
	pc->started = true;
	return 0;
}

void pf_podcache_free(struct pf_podcache *pc)
{
	if (!pc)
		return;
	if (pc->started) {
		pthread_mutex_lock(&pc->stop_lock);
		pc->stop = true;
		atomic_store(&pc->cancel, true);
		pthread_cond_broadcast(&pc->stop_cond);
		pthread_mutex_unlock(&pc->stop_lock);
		pthread_join(pc->thread, NULL);
	}
	for (size_t i = 0; i < pc->n_pods; i++)
		pod_free(pc->pods[i]);
	free(pc->pods);
	free(pc->by_cid);
	free(pc->by_uid);
	free(pc->api_url);
	free(pc->node);
	free(pc->token_file);
	free(pc->ca_file);
	agent_http_free(pc->http);
	pthread_cond_destroy(&pc->stop_cond);
	pthread_mutex_destroy(&pc->stop_lock);
	pthread_mutex_destroy(&pc->lock);
	free(pc);
}
