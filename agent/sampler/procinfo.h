/* procinfo.h — the processes the sampler sees: their resource attributes and the verdict of the
 * profiling config's filters on them.
 *
 * Owns: a table pid -> struct pf_proc (attributes read from /proc when a process is first seen
 * or execs), the compiled include/exclude filters (pf/profcfg.h struct pf_filter; strict =
 * whole-value equality, regexp = POSIX ERE search, as docs/config.md says) and each process's
 * verdict. The sampler mirrors the verdicts into the kernel's pid allow-map, so an excluded
 * process costs one map lookup per tick.
 *
 * Attributes (OpenTelemetry semantic conventions): process.pid, process.executable.name,
 * process.executable.path, process.command_line (only with opts.command_line), container.id
 * and k8s.pod.uid (from the cgroup path), service.name (OTEL_SERVICE_NAME, else service.name in
 * OTEL_RESOURCE_ATTRIBUTES, from /proc/PID/environ; else the executable name), host.name.
 * With an attribute source (opts.source: the pod cache of agent/k8s/podcache.h) a process in a
 * container also gets the source's attributes for its container id and pod uid (k8s.pod.name,
 * k8s.namespace.name, ...), and the source's service.name when the process sets none; filters
 * match on them too. Verdicts are taken when a process is first seen (or execs), when the
 * filters change, and again for containerized processes when the source changed
 * (pf_procinfo_refresh_source: a pod that reaches the cache after its processes started).
 * Without a source, filters on keys the host
 * does not know (k8s.namespace.name, k8s.pod.name...): an include matches nothing, an exclude
 * excludes nothing.
 *
 * Exited processes stay in the table (flag `exited`) until pf_procinfo_reap(), so the window in
 * which they ran still gets their attributes. Not thread-safe. */
#ifndef PF_AGENT_PROCINFO_H
#define PF_AGENT_PROCINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pf/error.h"
#include "pf/profcfg.h"
#include "pf/profile.h"

#define PF_CONTAINER_ID_LEN 65 /* 64 hex + NUL */
#define PF_POD_UID_LEN 37      /* canonical UUID + NUL */

struct pf_proc {
	uint32_t pid;
	bool exited;
	bool stale;   /* exec'd since the attributes were read (pf_procinfo_invalidate) */
	bool allowed; /* verdict of the current filters */
	bool env_read; /* service_name came from /proc/PID/environ (or the attempt was made) */
	char *exe_path;     /* /proc/PID/exe target, NULL for kernel threads */
	char *exe_name;     /* basename of exe_path, else comm */
	char *command_line; /* only with opts.command_line; args joined by spaces */
	char *service_name; /* NULL until environ was read: then exe_name stands in */
	char container_id[PF_CONTAINER_ID_LEN]; /* "" when not in a container */
	char pod_uid[PF_POD_UID_LEN];           /* "" when not in a Kubernetes pod */
};

/* Attributes of containers from elsewhere (pod attribution). container_attrs() calls
 * add(actx, key, value) for each attribute of the process in container container_id (may be
 * "") of pod pod_uid (may be ""), and returns how many, or add's negative errno. It must not
 * block: it runs on the sampling thread. Strings are valid during the add call only. */
struct pf_procinfo_source {
	int (*container_attrs)(void *ctx, const char *container_id, const char *pod_uid,
			       int (*add)(void *actx, const char *key, const char *value),
			       void *actx);
	/* grows whenever container_attrs() may answer differently; NULL: never */
	uint64_t (*generation)(void *ctx);
	void *ctx;
};
#define PF_PROCINFO_MAX_SOURCE_ATTRS 96 /* more attributes of one process are ignored */

struct pf_procinfo_options {
	const char *proc_root; /* default "/proc" (tests point it elsewhere) */
	const char *host_name; /* default gethostname() */
	bool command_line;     /* record process.command_line */
	size_t max_processes;  /* default 65536 */
	const struct pf_procinfo_source *source; /* copied; NULL: none */
};

struct pf_procinfo;

/* NULL and errno on failure. */
struct pf_procinfo *pf_procinfo_new(const struct pf_procinfo_options *opt);
void pf_procinfo_free(struct pf_procinfo *pi);

/* Compiles and installs filters (arrays may be NULL when their count is 0), then recomputes
 * every known process's verdict. On error the old filters stay. */
int pf_procinfo_set_filters(struct pf_procinfo *pi, const struct pf_filter *include,
			    size_t n_include, const struct pf_filter *exclude, size_t n_exclude,
			    struct pf_error *err);
/* When filters are installed and the source's generation moved since the last call: takes the
 * verdict of every live process in a container again and calls changed(ctx, p) for each whose
 * verdict flipped (a non-zero return stops). Returns how many flipped. Cheap otherwise (one
 * generation() call): the sampler calls it from its poll loop. */
size_t pf_procinfo_refresh_source(struct pf_procinfo *pi,
				  int (*changed)(void *ctx, const struct pf_proc *p), void *ctx);
/* True when some include or exclude filter is installed. */
bool pf_procinfo_filtering(const struct pf_procinfo *pi);
/* True when p matches an exclude filter: never profiled, not even by a capture (captures pick
 * their processes by their own rules, so the include filters do not limit them). */
bool pf_procinfo_excluded(const struct pf_procinfo *pi, const struct pf_proc *p);

/* (Re)reads pid's attributes from /proc and computes its verdict: at first sight and after an
 * exec. NULL and errno (ENOENT: gone) on failure. Same as pf_procinfo_read(pi, pid, NULL,
 * false). */
const struct pf_proc *pf_procinfo_update(struct pf_procinfo *pi, uint32_t pid);
/* pf_procinfo_update() with fewer /proc reads: comm (may be NULL), the name the kernel
 * reported with the event or sample, replaces reading /proc/PID/comm (it is only used as the
 * executable name of processes without one, i.e. kernel threads). /proc/PID/environ (for
 * service.name) is read when `sampled` (the process will be in a window, and may be gone by
 * the time it closes) or when a filter tests service.name; otherwise later, by
 * pf_procinfo_attrs(), if the process still lives then. */
const struct pf_proc *pf_procinfo_read(struct pf_procinfo *pi, uint32_t pid, const char *comm,
				       bool sampled);
/* A fork: the child gets a copy of the parent's attributes (same executable and cgroup) and
 * pid; falls back to reading /proc when the parent is unknown. */
const struct pf_proc *pf_procinfo_fork(struct pf_procinfo *pi, uint32_t parent, uint32_t child);
const struct pf_proc *pf_procinfo_get(const struct pf_procinfo *pi, uint32_t pid);
void pf_procinfo_exited(struct pf_procinfo *pi, uint32_t pid);
/* Marks pid's attributes out of date (an exec while no filter needs them at once); the owner
 * re-reads them with pf_procinfo_update() when the process is first sampled, so processes
 * that exec and die unsampled cost nothing. Unknown pids are ignored. */
void pf_procinfo_invalidate(struct pf_procinfo *pi, uint32_t pid);
/* Drops exited processes; calls forget(ctx, pid) for each (may be NULL). */
void pf_procinfo_reap(struct pf_procinfo *pi, void (*forget)(void *ctx, uint32_t pid), void *ctx);
/* The same, but keeps the exited processes for which keep(keep_ctx, pid) is true (samples of them
 * are still held elsewhere, e.g. the span triggers' ring). keep NULL: pf_procinfo_reap. */
void pf_procinfo_reap_if(struct pf_procinfo *pi, bool (*keep)(void *ctx, uint32_t pid),
			 void *keep_ctx, void (*forget)(void *ctx, uint32_t pid), void *ctx);
/* Reads every process under proc_root (startup). Returns how many were added, or -errno. */
int pf_procinfo_scan(struct pf_procinfo *pi);
/* Calls fn for every known process (stop early by returning non-zero, which is returned). */
int pf_procinfo_foreach(const struct pf_procinfo *pi,
			int (*fn)(void *ctx, const struct pf_proc *p), void *ctx);
size_t pf_procinfo_count(const struct pf_procinfo *pi);
const char *pf_procinfo_host_name(const struct pf_procinfo *pi);

/* The resource attributes of pid into p->attrs (strings in w's arena). pid unknown: only
 * process.pid and host.name. Reads /proc/PID/environ when it was not read yet and the process
 * lives. 0 or -ENOMEM. */
int pf_procinfo_attrs(struct pf_procinfo *pi, uint32_t pid, struct pf_prof_window *w,
		      struct pf_prof_process *p);

/* Process rules outside the config's filters (capture requests): the same rule format and
 * matching (strict = whole-value equality, regexp = POSIX ERE search), OR-ed. */
struct pf_proc_match;
/* Compiles n rules (n may be 0: every process matches). NULL + errno, err names
 * processes[i].value for a regexp that does not compile. */
struct pf_proc_match *pf_proc_match_new(const struct pf_filter *rules, size_t n,
					struct pf_error *err);
void pf_proc_match_free(struct pf_proc_match *m);
bool pf_proc_match_test(const struct pf_procinfo *pi, const struct pf_proc_match *m,
			const struct pf_proc *p);
/* A rule tests service.name: read the processes with `sampled` (environ) first. */
bool pf_proc_match_needs_env(const struct pf_proc_match *m);

/* Pure helpers, exported for tests. */

/* container.id and the pod uid from the text of /proc/PID/cgroup (v1 or v2): docker
 * (cgroupfs "/docker/<id>" and systemd "docker-<id>.scope"), containerd ("cri-containerd-<id>"),
 * cri-o ("crio-<id>"), podman ("libpod-<id>"), Kubernetes cgroupfs "/kubepods/<qos>/pod<uid>/<id>"
 * and systemd "kubepods-<qos>-pod<uid_with_underscores>.slice". Outputs are "" when absent. */
void pf_cgroup_parse(const char *text, char container_id[PF_CONTAINER_ID_LEN],
		     char pod_uid[PF_POD_UID_LEN]);
/* service.name from a NUL-separated environment block: OTEL_SERVICE_NAME wins over
 * service.name in OTEL_RESOURCE_ATTRIBUTES (percent-decoded, W3C baggage-like list).
 * 0 and out, or -ENOENT. */
int pf_environ_service_name(const char *env, size_t len, char *out, size_t outlen);

#endif
