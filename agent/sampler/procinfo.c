/* procinfo.c — see procinfo.h. */
#include "sampler/procinfo.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pf/compiler.h"
#include "pf/regex.h"

#define BUCKETS 4096
#define DEFAULT_MAX_PROCS 65536
#define ENVIRON_MAX (256u << 10)
#define CMDLINE_MAX (16u << 10)
#define SOURCE_VALUE_MAX 1024 /* a source value longer than this is cut for filters */

struct cfilter {
	char *key;
	enum pf_match match;
	char *value;
	bool has_re;
	regex_t re;
};

struct entry {
	struct entry *next;
	struct pf_proc p;
};

struct pf_procinfo {
	char *proc_root;
	char host_name[256];
	bool command_line;
	size_t max_processes;
	struct entry *tab[BUCKETS];
	size_t n;
	struct cfilter *inc, *exc;
	size_t n_inc, n_exc;
	bool env_filter; /* some filter tests service.name: verdicts need environ */
	struct pf_procinfo_source source; /* container_attrs NULL: none */
	uint64_t source_gen;              /* source generation the verdicts were taken at */
};

/* ---- pure parsing ------------------------------------------------------------------------- */

static bool is_hex_run(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
			return false;
	return true;
}

/* One path component: a 64-hex container id, bare or inside a runtime's scope name. */
static bool component_container_id(const char *c, size_t len, char out[PF_CONTAINER_ID_LEN])
{
	static const char *const prefixes[] = {"docker-", "cri-containerd-", "crio-", "libpod-",
					       "containerd-", ""};
	const char *end = c + len;
	if (len > 6 && !memcmp(end - 6, ".scope", 6))
		end -= 6;
	if (len >= 12 && !memcmp(c, "crio-conmon-", 12))
		return false; /* cri-o's monitor process, not the container */
	for (size_t i = 0; i < PF_ARRAY_SIZE(prefixes); i++) {
		size_t pl = strlen(prefixes[i]);
		if ((size_t)(end - c) != pl + 64 || memcmp(c, prefixes[i], pl))
			continue;
		if (is_hex_run(c + pl, 64)) {
			memcpy(out, c + pl, 64);
			out[64] = 0;
			return true;
		}
	}
	return false;
}

/* A component naming a pod: "pod<uid>" (cgroupfs) or "kubepods-<qos>-pod<uid_>.slice". */
static bool component_pod_uid(const char *c, size_t len, char out[PF_POD_UID_LEN])
{
	const char *p = NULL;
	for (size_t i = 0; i + 3 + 36 <= len; i++) {
		if (memcmp(c + i, "pod", 3))
			continue;
		if (i == 0 || c[i - 1] == '-') {
			p = c + i + 3;
			break;
		}
	}
	if (!p)
		return false;
	char u[PF_POD_UID_LEN];
	for (size_t i = 0; i < 36; i++) {
		char ch = p[i] == '_' ? '-' : p[i];
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;
		if (dash ? ch != '-' : !isxdigit((unsigned char)ch))
			return false;
		u[i] = (char)tolower((unsigned char)ch);
	}
	size_t rest = len - (size_t)(p + 36 - c);
	if (rest && !(rest == 6 && !memcmp(p + 36, ".slice", 6)))
		return false;
	u[36] = 0;
	memcpy(out, u, sizeof(u));
	return true;
}

void pf_cgroup_parse(const char *text, char container_id[PF_CONTAINER_ID_LEN],
		     char pod_uid[PF_POD_UID_LEN])
{
	container_id[0] = 0;
	pod_uid[0] = 0;
	const char *line = text;
	while (line && *line) {
		const char *eol = strchr(line, '\n');
		size_t ll = eol ? (size_t)(eol - line) : strlen(line);
		/* "hierarchy:controllers:path": the path follows the second ':' */
		const char *c1 = memchr(line, ':', ll);
		const char *c2 = c1 ? memchr(c1 + 1, ':', ll - (size_t)(c1 + 1 - line)) : NULL;
		if (c2) {
			const char *s = c2 + 1, *end = line + ll;
			while (s < end) {
				const char *slash = memchr(s, '/', (size_t)(end - s));
				const char *ce = slash ? slash : end;
				size_t cl = (size_t)(ce - s);
				if (cl && !container_id[0])
					component_container_id(s, cl, container_id);
				if (cl && !pod_uid[0])
					component_pod_uid(s, cl, pod_uid);
				s = ce + 1;
			}
		}
		if (container_id[0] && pod_uid[0])
			return;
		line = eol ? eol + 1 : NULL;
	}
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static void trim_copy(const char *s, size_t n, char *out, size_t outlen, bool pct)
{
	while (n && isspace((unsigned char)*s))
		s++, n--;
	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	size_t j = 0;
	for (size_t i = 0; i < n && j + 1 < outlen; i++) {
		if (pct && s[i] == '%' && i + 2 < n + 0 && hexval(s[i + 1]) >= 0 &&
		    hexval(s[i + 2]) >= 0) {
			out[j++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
			i += 2;
		} else {
			out[j++] = s[i];
		}
	}
	out[j] = 0;
}

int pf_environ_service_name(const char *env, size_t len, char *out, size_t outlen)
{
	static const char svc[] = "OTEL_SERVICE_NAME=", ra[] = "OTEL_RESOURCE_ATTRIBUTES=";
	const char *from_ra = NULL;
	size_t from_ra_len = 0;
	if (!outlen)
		return -EINVAL;
	for (size_t off = 0; off < len;) {
		const char *v = env + off;
		const char *nul = memchr(v, 0, len - off);
		size_t vl = nul ? (size_t)(nul - v) : len - off;
		if (vl > sizeof(svc) - 1 && !memcmp(v, svc, sizeof(svc) - 1)) {
			trim_copy(v + sizeof(svc) - 1, vl - (sizeof(svc) - 1), out, outlen, false);
			if (out[0])
				return 0;
		} else if (vl > sizeof(ra) - 1 && !memcmp(v, ra, sizeof(ra) - 1)) {
			/* k=v,k=v: find service.name */
			const char *s = v + sizeof(ra) - 1, *end = v + vl;
			while (s < end) {
				const char *comma = memchr(s, ',', (size_t)(end - s));
				const char *ie = comma ? comma : end;
				const char *eq = memchr(s, '=', (size_t)(ie - s));
				if (eq) {
					char key[64];
					trim_copy(s, (size_t)(eq - s), key, sizeof(key), true);
					if (!strcmp(key, "service.name")) {
						from_ra = eq + 1;
						from_ra_len = (size_t)(ie - eq - 1);
					}
				}
				s = ie + 1;
			}
		}
		off += vl + 1;
	}
	if (!from_ra)
		return -ENOENT;
	trim_copy(from_ra, from_ra_len, out, outlen, true);
	return out[0] ? 0 : -ENOENT;
}

/* ---- reading /proc ------------------------------------------------------------------------ */

/* Reads up to max bytes of a /proc file; *len excludes the NUL appended. NULL + errno. */
static char *read_small(const char *path, size_t max, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap + 1);
	while (buf) {
		if (n == cap) {
			if (cap >= max)
				break;
			cap = pf_min(cap * 2, max);
			char *nb = realloc(buf, cap + 1);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0) {
			int e = errno;
			free(buf);
			buf = NULL;
			errno = e;
			break;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	if (buf) {
		buf[n] = 0;
		*len = n;
	}
	return buf;
}

static void proc_release(struct pf_proc *p)
{
	free(p->exe_path);
	free(p->exe_name);
	free(p->command_line);
	free(p->service_name);
	memset(p, 0, sizeof(*p));
}

/* service.name from /proc/PID/environ into p (once); -ENOMEM only. */
static int proc_read_env(const struct pf_procinfo *pi, struct pf_proc *p)
{
	char path[PATH_MAX];
	size_t len;
	p->env_read = true;
	snprintf(path, sizeof(path), "%s/%u/environ", pi->proc_root, p->pid);
	_cleanup_free_ char *env = read_small(path, ENVIRON_MAX, &len);
	char svc[512];
	if (!env || pf_environ_service_name(env, len, svc, sizeof(svc)) < 0)
		return 0;
	char *d = strdup(svc);
	if (!d)
		return -ENOMEM;
	free(p->service_name);
	p->service_name = d;
	return 0;
}

static int proc_read(const struct pf_procinfo *pi, uint32_t pid, const char *comm_hint,
		     bool want_env, struct pf_proc *p)
{
	char path[PATH_MAX], target[PATH_MAX];
	size_t len;
	_cleanup_free_ char *cg = NULL, *comm = NULL;
	memset(p, 0, sizeof(*p));
	p->pid = pid;

	snprintf(path, sizeof(path), "%s/%u/exe", pi->proc_root, pid);
	ssize_t tl = readlink(path, target, sizeof(target) - 1);
	if (tl <= 0 && !comm_hint) {
		/* no executable (kernel thread) or gone: comm tells which */
		snprintf(path, sizeof(path), "%s/%u/comm", pi->proc_root, pid);
		comm = read_small(path, 64, &len);
		if (!comm)
			return errno == ESRCH ? -ENOENT : -(errno ? errno : ENOENT);
		comm[strcspn(comm, "\n")] = 0;
		comm_hint = comm;
	}
	if (tl > 0) {
		target[tl] = 0;
		char *del = strstr(target, " (deleted)");
		if (del && del[10] == 0)
			*del = 0;
		p->exe_path = strdup(target);
		const char *slash = strrchr(target, '/');
		p->exe_name = strdup(slash ? slash + 1 : target);
	} else {
		p->exe_name = strdup(comm_hint);
	}
	if ((tl > 0 && !p->exe_path) || !p->exe_name)
		goto enomem;

	if (pi->command_line) {
		snprintf(path, sizeof(path), "%s/%u/cmdline", pi->proc_root, pid);
		char *cl = read_small(path, CMDLINE_MAX, &len);
		if (cl) {
			for (size_t i = 0; i + 1 < len; i++)
				if (!cl[i])
					cl[i] = ' ';
			p->command_line = cl;
		}
	}

	snprintf(path, sizeof(path), "%s/%u/cgroup", pi->proc_root, pid);
	cg = read_small(path, 64u << 10, &len);
	if (cg) {
		pf_cgroup_parse(cg, p->container_id, p->pod_uid);
	} else if (tl <= 0 && (errno == ENOENT || errno == ESRCH)) {
		proc_release(p); /* gone (the comm hint spared us the check above) */
		return -ENOENT;
	}
	if (want_env && proc_read_env(pi, p) < 0)
		goto enomem;
	return 0;
enomem:
	proc_release(p);
	return -ENOMEM;
}

/* ---- filters ------------------------------------------------------------------------------ */

static void cfilters_free(struct cfilter *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(f[i].key);
		free(f[i].value);
		if (f[i].has_re)
			regfree(&f[i].re);
	}
	free(f);
}

static int cfilters_compile(const struct pf_filter *in, size_t n, const char *list,
			    struct cfilter **out, struct pf_error *err)
{
	*out = NULL;
	if (!n)
		return 0;
	struct cfilter *f = calloc(n, sizeof(*f));
	if (!f)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		f[i].key = strdup(in[i].key ? in[i].key : "");
		f[i].value = strdup(in[i].value ? in[i].value : "");
		f[i].match = in[i].match;
		if (!f[i].key || !f[i].value) {
			cfilters_free(f, n);
			return -ENOMEM;
		}
		if (f[i].match == PF_MATCH_REGEXP) {
			/* the limits of pf/regex.h, as pf_profcfg_parse checked them */
			struct pf_error rerr = {0};
			int rc =
			    pf_regex_compile(&f[i].re, f[i].value, REG_EXTENDED | REG_NOSUB, &rerr);
			if (rc) {
				cfilters_free(f, n);
				char path[64];
				if (list)
					snprintf(path, sizeof(path), "profiling.filters.%s[%zu].value",
						 list, i);
				else
					snprintf(path, sizeof(path), "processes[%zu].value", i);
				if (rc == -ENOMEM)
					return pf_error_set(err, -ENOMEM, path, "out of memory");
				return pf_error_set(err, -EINVAL, path,
						    "regexp does not compile: %s", rerr.msg);
			}
			f[i].has_re = true;
		}
	}
	*out = f;
	return 0;
}

/* ---- the attribute source (pod attribution) ------------------------------------------------ */

static bool has_source(const struct pf_procinfo *pi, const struct pf_proc *p)
{
	return pi->source.container_attrs && (p->container_id[0] || p->pod_uid[0]);
}

struct find_attr {
	const char *key;
	char *buf;
	size_t n;
	bool found;
};

static int find_attr_cb(void *ctx, const char *key, const char *value)
{
	struct find_attr *f = ctx;
	if (!f->found && !strcmp(key, f->key)) {
		snprintf(f->buf, f->n, "%s", value);
		f->found = true;
	}
	return 0;
}

/* The source's value of key for p into buf, or NULL. */
static const char *source_value(const struct pf_procinfo *pi, const struct pf_proc *p,
				const char *key, char *buf, size_t n)
{
	if (!has_source(pi, p))
		return NULL;
	struct find_attr f = {.key = key, .buf = buf, .n = n};
	pi->source.container_attrs(pi->source.ctx, p->container_id, p->pod_uid, find_attr_cb, &f);
	return f.found ? buf : NULL;
}

/* The process's own service name, the source's, or the executable name. */
static const char *service_name(const struct pf_procinfo *pi, const struct pf_proc *p,
				char *buf, size_t n)
{
	if (p->service_name)
		return p->service_name;
	const char *v = source_value(pi, p, "service.name", buf, n);
	return v ? v : p->exe_name;
}

static const char *attr_value(const struct pf_procinfo *pi, const struct pf_proc *p,
			      const char *key, char *buf, size_t n)
{
	if (!strcmp(key, "service.name"))
		return service_name(pi, p, buf, n);
	if (!strcmp(key, "process.executable.name"))
		return p->exe_name;
	if (!strcmp(key, "process.executable.path"))
		return p->exe_path;
	if (!strcmp(key, "process.pid")) {
		snprintf(buf, n, "%u", p->pid);
		return buf;
	}
	if (!strcmp(key, "container.id"))
		return p->container_id[0] ? p->container_id : NULL;
	if (!strcmp(key, "k8s.pod.uid") && p->pod_uid[0])
		return p->pod_uid;
	return source_value(pi, p, key, buf, n); /* k8s.*: from the pod cache when there is one */
}

static bool any_match(const struct pf_procinfo *pi, const struct cfilter *f, size_t n,
		      const struct pf_proc *p)
{
	for (size_t i = 0; i < n; i++) {
		char buf[SOURCE_VALUE_MAX];
		const char *v = attr_value(pi, p, f[i].key, buf, sizeof(buf));
		if (!v)
			continue;
		if (f[i].match == PF_MATCH_STRICT ? !strcmp(v, f[i].value)
						  : !regexec(&f[i].re, v, 0, NULL, 0))
			return true;
	}
	return false;
}

static bool verdict(const struct pf_procinfo *pi, const struct pf_proc *p)
{
	if (pi->n_inc && !any_match(pi, pi->inc, pi->n_inc, p))
		return false;
	return !any_match(pi, pi->exc, pi->n_exc, p);
}

struct pf_proc_match {
	struct cfilter *f;
	size_t n;
	bool env;
};

struct pf_proc_match *pf_proc_match_new(const struct pf_filter *rules, size_t n,
					struct pf_error *err)
{
	struct pf_proc_match *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	int rc = cfilters_compile(rules, n, NULL, &m->f, err);
	if (rc < 0) {
		free(m);
		errno = -rc;
		return NULL;
	}
	m->n = n;
	for (size_t i = 0; i < n; i++)
		m->env |= !strcmp(m->f[i].key, "service.name");
	return m;
}

void pf_proc_match_free(struct pf_proc_match *m)
{
	if (!m)
		return;
	cfilters_free(m->f, m->n);
	free(m);
}

bool pf_proc_match_test(const struct pf_procinfo *pi, const struct pf_proc_match *m,
			const struct pf_proc *p)
{
	return !m->n || any_match(pi, m->f, m->n, p);
}

bool pf_proc_match_needs_env(const struct pf_proc_match *m)
{
	return m->env;
}

int pf_procinfo_set_filters(struct pf_procinfo *pi, const struct pf_filter *include,
			    size_t n_include, const struct pf_filter *exclude, size_t n_exclude,
			    struct pf_error *err)
{
	struct cfilter *inc, *exc;
	int rc = cfilters_compile(include, n_include, "include", &inc, err);
	if (rc < 0)
		return rc;
	rc = cfilters_compile(exclude, n_exclude, "exclude", &exc, err);
	if (rc < 0) {
		cfilters_free(inc, n_include);
		return rc;
	}
	cfilters_free(pi->inc, pi->n_inc);
	cfilters_free(pi->exc, pi->n_exc);
	pi->inc = inc;
	pi->n_inc = n_include;
	pi->exc = exc;
	pi->n_exc = n_exclude;
	pi->env_filter = false;
	for (size_t i = 0; i < n_include + n_exclude; i++) {
		const struct cfilter *f = i < n_include ? &inc[i] : &exc[i - n_include];
		pi->env_filter |= !strcmp(f->key, "service.name");
	}
	if (pi->source.generation)
		pi->source_gen = pi->source.generation(pi->source.ctx);
	for (size_t b = 0; b < BUCKETS; b++)
		for (struct entry *e = pi->tab[b]; e; e = e->next) {
			if (pi->env_filter && !e->p.env_read && !e->p.exited)
				proc_read_env(pi, &e->p); /* ENOMEM: exe_name stands in */
			e->p.allowed = verdict(pi, &e->p);
		}
	return 0;
}

size_t pf_procinfo_refresh_source(struct pf_procinfo *pi,
				  int (*changed)(void *ctx, const struct pf_proc *p), void *ctx)
{
	if (!pi->source.generation || !pf_procinfo_filtering(pi))
		return 0;
	uint64_t gen = pi->source.generation(pi->source.ctx);
	if (gen == pi->source_gen)
		return 0;
	pi->source_gen = gen;
	size_t flipped = 0;
	for (size_t b = 0; b < BUCKETS; b++)
		for (struct entry *e = pi->tab[b]; e; e = e->next) {
			if (e->p.exited || !has_source(pi, &e->p))
				continue;
			bool v = verdict(pi, &e->p);
			if (v == e->p.allowed)
				continue;
			e->p.allowed = v;
			flipped++;
			if (changed && changed(ctx, &e->p))
				return flipped;
		}
	return flipped;
}

bool pf_procinfo_filtering(const struct pf_procinfo *pi)
{
	return pi->n_inc || pi->n_exc;
}

bool pf_procinfo_excluded(const struct pf_procinfo *pi, const struct pf_proc *p)
{
	return any_match(pi, pi->exc, pi->n_exc, p);
}

/* ---- the table ---------------------------------------------------------------------------- */

static struct entry **slot(const struct pf_procinfo *pi, uint32_t pid)
{
	struct entry **pp = (struct entry **)&pi->tab[pid % BUCKETS];
	while (*pp && (*pp)->p.pid != pid)
		pp = &(*pp)->next;
	return pp;
}

const struct pf_proc *pf_procinfo_get(const struct pf_procinfo *pi, uint32_t pid)
{
	struct entry *e = *slot(pi, pid);
	return e ? &e->p : NULL;
}

static struct pf_proc *install(struct pf_procinfo *pi, struct pf_proc *fresh)
{
	struct entry **pp = slot(pi, fresh->pid);
	if (*pp) {
		proc_release(&(*pp)->p);
		(*pp)->p = *fresh;
		return &(*pp)->p;
	}
	if (pi->n >= pi->max_processes) {
		proc_release(fresh);
		errno = ENOSPC;
		return NULL;
	}
	struct entry *e = calloc(1, sizeof(*e));
	if (!e) {
		proc_release(fresh);
		errno = ENOMEM;
		return NULL;
	}
	e->p = *fresh;
	*pp = e;
	pi->n++;
	return &e->p;
}

const struct pf_proc *pf_procinfo_update(struct pf_procinfo *pi, uint32_t pid)
{
	return pf_procinfo_read(pi, pid, NULL, false);
}

const struct pf_proc *pf_procinfo_read(struct pf_procinfo *pi, uint32_t pid, const char *comm,
				       bool sampled)
{
	struct pf_proc fresh;
	int rc = proc_read(pi, pid, comm, sampled || pi->env_filter, &fresh);
	if (rc < 0) {
		errno = -rc;
		return NULL;
	}
	fresh.allowed = verdict(pi, &fresh);
	return install(pi, &fresh);
}

static char *dup_or_null(const char *s, bool *fail)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	if (!d)
		*fail = true;
	return d;
}

const struct pf_proc *pf_procinfo_fork(struct pf_procinfo *pi, uint32_t parent, uint32_t child)
{
	const struct pf_proc *pp = pf_procinfo_get(pi, parent);
	if (!pp || pp->exited)
		return pf_procinfo_update(pi, child);
	struct pf_proc c = *pp;
	bool fail = false;
	c.pid = child;
	c.exited = false;
	c.exe_path = dup_or_null(pp->exe_path, &fail);
	c.exe_name = dup_or_null(pp->exe_name, &fail);
	c.command_line = dup_or_null(pp->command_line, &fail);
	c.service_name = dup_or_null(pp->service_name, &fail);
	if (fail) {
		proc_release(&c);
		errno = ENOMEM;
		return NULL;
	}
	c.allowed = verdict(pi, &c); /* process.pid filters differ between parent and child */
	return install(pi, &c);
}

void pf_procinfo_exited(struct pf_procinfo *pi, uint32_t pid)
{
	struct entry *e = *slot(pi, pid);
	if (e)
		e->p.exited = true;
}

void pf_procinfo_invalidate(struct pf_procinfo *pi, uint32_t pid)
{
	struct entry *e = *slot(pi, pid);
	if (e)
		e->p.stale = true;
}

void pf_procinfo_reap(struct pf_procinfo *pi, void (*forget)(void *ctx, uint32_t pid), void *ctx)
{
	pf_procinfo_reap_if(pi, NULL, NULL, forget, ctx);
}

void pf_procinfo_reap_if(struct pf_procinfo *pi, bool (*keep)(void *ctx, uint32_t pid),
			 void *keep_ctx, void (*forget)(void *ctx, uint32_t pid), void *ctx)
{
	for (size_t b = 0; b < BUCKETS; b++) {
		struct entry **pp = &pi->tab[b];
		while (*pp) {
			struct entry *e = *pp;
			if (!e->p.exited || (keep && keep(keep_ctx, e->p.pid))) {
				pp = &e->next;
				continue;
			}
			*pp = e->next;
			if (forget)
				forget(ctx, e->p.pid);
			proc_release(&e->p);
			free(e);
			pi->n--;
		}
	}
}

int pf_procinfo_scan(struct pf_procinfo *pi)
{
	DIR *d = opendir(pi->proc_root);
	if (!d)
		return -errno;
	int added = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end;
		unsigned long pid = strtoul(de->d_name, &end, 10);
		if (*end || !pid || pid > UINT32_MAX)
			continue;
		if (pf_procinfo_update(pi, (uint32_t)pid))
			added++;
		else if (errno == ENOMEM)
			break;
	}
	closedir(d);
	return added;
}

int pf_procinfo_foreach(const struct pf_procinfo *pi,
			int (*fn)(void *ctx, const struct pf_proc *p), void *ctx)
{
	for (size_t b = 0; b < BUCKETS; b++)
		for (struct entry *e = pi->tab[b]; e; e = e->next) {
			int rc = fn(ctx, &e->p);
			if (rc)
				return rc;
		}
	return 0;
}

size_t pf_procinfo_count(const struct pf_procinfo *pi)
{
	return pi->n;
}

const char *pf_procinfo_host_name(const struct pf_procinfo *pi)
{
	return pi->host_name;
}

static int add_attr(struct pf_prof_window *w, struct pf_prof_attr *a, size_t *n, const char *k,
		    const char *v)
{
	if (!v || !*v)
		return 0;
	a[*n].key = k;
	a[*n].value = pf_prof_strdup(w, v);
	if (!a[*n].value)
		return -ENOMEM;
	(*n)++;
	return 0;
}

struct source_attrs {
	struct pf_prof_window *w;
	struct pf_prof_attr a[PF_PROCINFO_MAX_SOURCE_ATTRS];
	size_t n;
	const char *service_name; /* the source's service.name, in w's arena */
};

static int source_attr_cb(void *ctx, const char *key, const char *value)
{
	struct source_attrs *s = ctx;
	if (!value || !*value)
		return 0;
	const char *v = pf_prof_strdup(s->w, value);
	if (!v)
		return -ENOMEM;
	if (!strcmp(key, "service.name")) {
		s->service_name = v;
		return 0;
	}
	if (s->n == PF_ARRAY_SIZE(s->a))
		return 0;
	const char *k = pf_prof_strdup(s->w, key);
	if (!k)
		return -ENOMEM;
	s->a[s->n].key = k;
	s->a[s->n].value = v;
	s->n++;
	return 0;
}

int pf_procinfo_attrs(struct pf_procinfo *pi, uint32_t pid, struct pf_prof_window *w,
		      struct pf_prof_process *p)
{
	char pidbuf[16];
	snprintf(pidbuf, sizeof(pidbuf), "%u", pid);
	struct entry *e = *slot(pi, pid);
	struct pf_proc *pr = e ? &e->p : NULL;
	int rc = 0;
	if (pr && !pr->env_read && !pr->exited && proc_read_env(pi, pr) < 0)
		return -ENOMEM;
	/* The source's attributes (pod cache), copied into the window under its lock. */
	_cleanup_free_ struct source_attrs *src = NULL;
	if (pr && has_source(pi, pr)) {
		src = calloc(1, sizeof(*src));
		if (!src)
			return -ENOMEM;
		src->w = w;
		if (pi->source.container_attrs(pi->source.ctx, pr->container_id, pr->pod_uid,
					       source_attr_cb, src) == -ENOMEM)
			return -ENOMEM;
	}
	size_t n = 0, cap = 8 + (src ? src->n : 0);
	struct pf_prof_attr *a = pf_prof_alloc(w, cap * sizeof(*a));
	if (!a)
		return -ENOMEM;
	if (pr) {
		const char *svc = pr->service_name ? pr->service_name
			: src && src->service_name ? src->service_name : pr->exe_name;
		rc |= add_attr(w, a, &n, "service.name", svc);
		rc |= add_attr(w, a, &n, "process.executable.name", pr->exe_name);
		rc |= add_attr(w, a, &n, "process.executable.path", pr->exe_path);
		rc |= add_attr(w, a, &n, "process.command_line", pr->command_line);
		rc |= add_attr(w, a, &n, "container.id", pr->container_id);
		rc |= add_attr(w, a, &n, "k8s.pod.uid", pr->pod_uid);
	}
	rc |= add_attr(w, a, &n, "process.pid", pidbuf);
	rc |= add_attr(w, a, &n, "host.name", pi->host_name);
	if (rc)
		return -ENOMEM;
	for (size_t i = 0; src && i < src->n; i++) {
		/* k8s.pod.uid comes from the cgroup already when it names the pod */
		bool dup = false;
		for (size_t j = 0; j < n && !dup; j++)
			dup = !strcmp(a[j].key, src->a[i].key);
		if (!dup)
			a[n++] = src->a[i];
	}
	p->attrs = a;
	p->n_attrs = n;
	return 0;
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

struct pf_procinfo *pf_procinfo_new(const struct pf_procinfo_options *opt)
{
	struct pf_procinfo *pi = calloc(1, sizeof(*pi));
	if (!pi)
		return NULL;
	pi->proc_root = strdup(opt && opt->proc_root ? opt->proc_root : "/proc");
	if (!pi->proc_root) {
		free(pi);
		return NULL;
	}
	if (opt && opt->host_name)
		snprintf(pi->host_name, sizeof(pi->host_name), "%s", opt->host_name);
	else if (gethostname(pi->host_name, sizeof(pi->host_name) - 1) < 0)
		pi->host_name[0] = 0;
	pi->command_line = opt && opt->command_line;
	pi->max_processes = opt && opt->max_processes ? opt->max_processes : DEFAULT_MAX_PROCS;
	if (opt && opt->source)
		pi->source = *opt->source;
	return pi;
}

void pf_procinfo_free(struct pf_procinfo *pi)
{
	if (!pi)
		return;
	for (size_t b = 0; b < BUCKETS; b++) {
		struct entry *e = pi->tab[b];
		while (e) {
			struct entry *nx = e->next;
			proc_release(&e->p);
			free(e);
			e = nx;
		}
	}
	cfilters_free(pi->inc, pi->n_inc);
	cfilters_free(pi->exc, pi->n_exc);
	free(pi->proc_root);
	free(pi);
}
