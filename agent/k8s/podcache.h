/* podcache.h — the pods of this node, read from the Kubernetes API server, for pod attribution.
 *
 * Owns: the cache (pods of one node: uid, name, namespace, node, owners, labels, containers
 * with their runtime ids) behind a mutex, and a thread of its own that fills it: a list of
 * `GET /api/v1/pods?fieldSelector=spec.nodeName=NODE`, then a watch from the list's
 * resourceVersion; a watch that ends or breaks resumes from the last resourceVersion seen
 * (events and BOOKMARKs); "410 Gone" (ERROR event or HTTP status) relists. While the API
 * server cannot be reached the thread retries with exponential backoff and full jitter
 * (pf/backoff.h), the cache keeps what it had, and the status callback says so (the agent's
 * health component "k8s"). HTTP through the agent's client (http_client/http_client.h: one
 * connection kept between requests; the watch's body streamed event by event; bearer token
 * re-read from its file at every request, as projected service-account tokens rotate), JSON
 * with jansson.
 *
 * Lookups (pf_podcache_container_attrs, the struct pf_procinfo_source of procinfo.h) copy out
 * under the mutex: an in-memory read that never waits on the network.
 *
 * Attributes of a process in container C of pod P (OpenTelemetry semantic conventions):
 *   k8s.pod.uid, k8s.pod.name, k8s.namespace.name, k8s.node.name, k8s.container.name,
 *   k8s.deployment.name (owner ReplicaSet named <deployment>-<pod-template-hash>),
 *   k8s.replicaset.name, k8s.statefulset.name, k8s.daemonset.name, k8s.job.name (owners),
 *   k8s.pod.label.<key> for each pod label, and service.name: C's literal OTEL_SERVICE_NAME
 *   env value, else P's label app.kubernetes.io/name (procinfo uses it only for processes
 *   that set no service name themselves).
 * A process whose container id is not (yet) in any pod status but whose cgroup names a known
 * pod uid gets the pod's attributes without the container's.
 *
 * Bounds: PF_PODCACHE_MAX_PODS pods (more are dropped and counted), PF_PODCACHE_MAX_LABELS
 * labels and PF_PODCACHE_MAX_CONTAINERS containers per pod, strings cut at
 * PF_PODCACHE_MAX_VALUE bytes, list bodies at PF_PODCACHE_MAX_LIST_BYTES, one watch event at
 * PF_PODCACHE_MAX_EVENT_BYTES (a longer one breaks the watch, which then resumes). */
#ifndef PF_AGENT_PODCACHE_H
#define PF_AGENT_PODCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/error.h"
#include "sampler/procinfo.h"

#define PF_PODCACHE_MAX_PODS 2048
#define PF_PODCACHE_MAX_LABELS 64
#define PF_PODCACHE_MAX_CONTAINERS 64
#define PF_PODCACHE_MAX_VALUE 1024
#define PF_PODCACHE_MAX_LIST_BYTES ((size_t)64 << 20)
#define PF_PODCACHE_MAX_EVENT_BYTES ((size_t)4 << 20)
#define PF_PODCACHE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

struct pf_podcache_options {
	/* API server base URL ("https://10.0.0.1:443"); NULL: in-cluster, from
	 * KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT. */
	const char *api_url;
	/* Bearer token file; NULL: PF_PODCACHE_SA_DIR/token when it exists (none otherwise). */
	const char *token_file;
	/* CA bundle for https; NULL: PF_PODCACHE_SA_DIR/ca.crt when it exists, else system CAs. */
	const char *ca_file;
	/* This node's name (spec.nodeName field selector); required. */
	const char *node_name;
	uint32_t watch_timeout_s; /* timeoutSeconds of one watch, default 300 */
	uint32_t backoff_base_ms; /* default 500 */
	uint32_t backoff_cap_ms;  /* default 30000 */
	uint32_t max_pods;	  /* default PF_PODCACHE_MAX_PODS (at most that) */
	/* Called from the cache's thread whenever the connection state changes; healthy is
	 * false while the API server is unreachable or refuses us. May be NULL. */
	void (*on_status)(void *ctx, bool healthy, const char *status, const char *last_error);
	void *status_ctx;
};

struct pf_podcache_stats {
	bool synced;	     /* a list succeeded since start */
	bool reachable;	     /* the last request reached the API server and was accepted */
	uint64_t pods;	     /* pods in the cache */
	uint64_t containers; /* containers with a runtime id */
	uint64_t lists, watches, events, relists, errors;
	uint64_t dropped;    /* pods not cached: over max_pods */
	uint64_t generation; /* grows on every change of the cache */
	char resource_version[64];
	char last_error[256];
};

struct pf_podcache;

/* Checks and copies the options (no network yet). NULL and errno, err says why: no node
 * name, no API server URL and not in a cluster. */
struct pf_podcache *pf_podcache_new(const struct pf_podcache_options *opt, struct pf_error *err);
/* Starts the list/watch thread. 0 or -errno. */
int pf_podcache_start(struct pf_podcache *pc, struct pf_error *err);
/* Stops the thread (interrupting a transfer within about a second) and frees everything. */
void pf_podcache_free(struct pf_podcache *pc);

/* Calls add(actx, key, value) for every attribute of the process in container container_id
 * (64 hex, may be "" or NULL) of pod pod_uid (may be "" or NULL); see the list above. 0 when
 * nothing is known, the count of attributes added, or the negative errno add returned.
 * Strings are valid only during the add call. Thread-safe, never blocks on I/O. */
int pf_podcache_container_attrs(struct pf_podcache *pc, const char *container_id,
				const char *pod_uid,
				int (*add)(void *actx, const char *key, const char *value),
				void *actx);
/* The cache as procinfo's attribute source (pf_procinfo_options.source). */
void pf_podcache_source(struct pf_podcache *pc, struct pf_procinfo_source *out);
void pf_podcache_stats(struct pf_podcache *pc, struct pf_podcache_stats *out);

/* ---- The parsing and cache updates the thread runs, exported for tests. */

/* Replaces the cache with the items of a PodList JSON body. The list's resourceVersion goes
 * to rv (NUL-terminated, cut to rvlen). 0, -EBADMSG (not a PodList; err names the field),
 * -ENOMEM. */
int pf_podcache_apply_list(struct pf_podcache *pc, const char *body, size_t len, char *rv,
			   size_t rvlen, struct pf_error *err);
/* Applies one watch event line ({"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, "object": …}).
 * The object's resourceVersion goes to rv. 0, -ESTALE for 410 Gone (relist), -EPROTO for
 * another ERROR event (err has its message), -EBADMSG for a malformed line, -ENOMEM. */
int pf_podcache_apply_event(struct pf_podcache *pc, const char *line, size_t len, char *rv,
			    size_t rvlen, struct pf_error *err);
/* "containerd://<64 hex>", "cri-o://…", "docker://…" -> the 64-hex id; -EINVAL otherwise. */
int pf_podcache_runtime_id(const char *container_id, char out[PF_CONTAINER_ID_LEN]);

#endif
