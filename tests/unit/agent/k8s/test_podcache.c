/* test_podcache.c — agent/k8s/podcache.h without a network: a PodList and watch events
 * (tests/data/k8s) into the cache, attributes by container id and pod uid, and the join with
 * procinfo on cgroup files in the formats of containerd, CRI-O and Docker (cgroup v1 and v2):
 * attributes, service.name precedence, filters on k8s.* keys, bounds. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "k8s/podcache.h"
#include "pf/profile.h"
#include "sampler/procinfo.h"

#define CID_APP "123beec1446e73544a838df719244e188ea8f7bd60b4531a75f9844d954ae3c3"
#define CID_ENVOY "a45d63e532a77e77f8dbdd5f1851393e98548a3a64711b270185eaa674768d94"
#define CID_DB "c6a4dde64d76f8df3f7152a377f545e71c21dbd7705219531d069dd825af2276"
#define CID_WEB "730ddb7339bd51196237bf431ef718de4918d64ec963bc1a5fc8b72a5045fc34"
#define CID_APP2 "3e81a2d5265cad0c049c10de1e5d67de7835d3d4e7999d77d909933f7e6276c0"
#define CID_EXPORTER "00738473d230842cfbe2f28fd3783617b010cb283eb423cfe53b148e5dffd760"
#define CID_LOG "e05ba2659885526ee01c4d7124a4e78f658c538f422f09ea041ce67b95ee17c4"
#define CID_JOB "f84ae4a848e54bba69ee7ad653a92d8d6b080270557abce5a4f8f57d3fcd9f20"
#define UID_CHECKOUT "5f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f"
#define UID_LEGACY "7b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d6e"

static char *slurp(const char *rel, size_t *len)
{
	const char *src = getenv("PF_SOURCE_DIR");
	char path[1024];
	snprintf(path, sizeof(path), "%s/tests/data/k8s/%s", src ? src : ".", rel);
	FILE *f = fopen(path, "rb");
	if (!f)
		fail_msg("cannot open %s (PF_SOURCE_DIR set by ctest)", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = 0;
	fclose(f);
	if (len)
		*len = (size_t)n;
	return buf;
}

/* ---- collecting attributes ------------------------------------------------------------- */

struct kv {
	char key[256], value[1100];
};

struct attrs {
	struct kv a[128];
	size_t n;
};

static int collect(void *ctx, const char *key, const char *value)
{
	struct attrs *s = ctx;
	assert_true(s->n < 128);
	snprintf(s->a[s->n].key, sizeof(s->a[s->n].key), "%s", key);
	snprintf(s->a[s->n].value, sizeof(s->a[s->n].value), "%s", value);
	s->n++;
	return 0;
}

static const char *get(const struct attrs *s, const char *key)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->a[i].key, key))
			return s->a[i].value;
	return NULL;
}

static int lookup(struct pf_podcache *pc, const char *cid, const char *uid, struct attrs *out)
{
	memset(out, 0, sizeof(*out));
	int n = pf_podcache_container_attrs(pc, cid, uid, collect, out);
	assert_int_equal(n, (int)out->n);
	return n;
}

static struct pf_podcache *new_cache(uint32_t max_pods)
{
	struct pf_podcache_options o = {
	    .api_url = "http://127.0.0.1:1", .node_name = "node-1", .max_pods = max_pods};
	struct pf_podcache *pc = pf_podcache_new(&o, NULL);
	assert_non_null(pc);
	return pc;
}

static struct pf_podcache *listed_cache(void)
{
	struct pf_podcache *pc = new_cache(0);
	size_t len;
	char *body = slurp("pods-list.json", &len);
	char rv[64];
	struct pf_error err = {0};
	assert_int_equal(pf_podcache_apply_list(pc, body, len, rv, sizeof(rv), &err), 0);
	assert_string_equal(rv, "1010");
	free(body);
	return pc;
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_runtime_id(void **state)
{
	char id[PF_CONTAINER_ID_LEN];
	assert_int_equal(pf_podcache_runtime_id("containerd://" CID_APP, id), 0);
	assert_string_equal(id, CID_APP);
	assert_int_equal(pf_podcache_runtime_id("cri-o://" CID_DB, id), 0);
	assert_string_equal(id, CID_DB);
	assert_int_equal(pf_podcache_runtime_id("docker://" CID_WEB, id), 0);
	assert_string_equal(id, CID_WEB);
	assert_int_equal(pf_podcache_runtime_id("containerd://0123", id), -EINVAL);
	assert_int_equal(pf_podcache_runtime_id("rkt://" CID_APP, id), -EINVAL);
	assert_int_equal(pf_podcache_runtime_id(CID_APP, id), -EINVAL);
	assert_int_equal(pf_podcache_runtime_id("containerd://" CID_APP "0", id), -EINVAL);
	assert_int_equal(
	    pf_podcache_runtime_id(
		"containerd://123BEEC1446E73544A838DF719244E188EA8F7BD60B4531A75F9844D954AE3C3",
		id),
	    -EINVAL);
	assert_int_equal(pf_podcache_runtime_id(NULL, id), -EINVAL);
	assert_string_equal(id, "");
}

static void test_list_and_lookup(void **state)
{
	struct pf_podcache *pc = listed_cache();
	struct pf_podcache_stats st;
	pf_podcache_stats(pc, &st);
	assert_int_equal(st.pods, 4);
	assert_int_equal(st.containers, 7); /* 2 + init + 2 + 2; the pending one has no id */
	assert_true(st.synced);
	assert_string_equal(st.resource_version, "1010");

	struct attrs a;
	assert_true(lookup(pc, CID_APP, "", &a) > 0);
	assert_string_equal(get(&a, "k8s.pod.uid"), UID_CHECKOUT);
	assert_string_equal(get(&a, "k8s.pod.name"), "checkout-7d9f8b6c5d-x2x7k");
	assert_string_equal(get(&a, "k8s.namespace.name"), "shop");
	assert_string_equal(get(&a, "k8s.node.name"), "node-1");
	assert_string_equal(get(&a, "k8s.container.name"), "app");
	assert_string_equal(get(&a, "k8s.replicaset.name"), "checkout-7d9f8b6c5d");
	assert_string_equal(get(&a, "k8s.deployment.name"), "checkout");
	assert_string_equal(get(&a, "k8s.pod.label.team"), "payments");
	assert_string_equal(get(&a, "k8s.pod.label.app.kubernetes.io/name"), "checkout");
	/* the container's literal OTEL_SERVICE_NAME wins over the label */
	assert_string_equal(get(&a, "service.name"), "checkout-api");

	/* envoy: OTEL_SERVICE_NAME from valueFrom is not known here: the label names it */
	assert_true(lookup(pc, CID_ENVOY, UID_CHECKOUT, &a) > 0);
	assert_string_equal(get(&a, "k8s.container.name"), "envoy");
	assert_string_equal(get(&a, "service.name"), "checkout");

	/* an init container's id is known too */
	assert_true(lookup(pc, "772efdec21aae275635930c8f20c4348a3d2f56362f0d05fd879c01c5ab6bec8",
			   "", &a) > 0);
	assert_string_equal(get(&a, "k8s.container.name"), "migrate");

	assert_true(lookup(pc, CID_DB, "", &a) > 0);
	assert_string_equal(get(&a, "k8s.statefulset.name"), "db");
	assert_null(get(&a, "k8s.deployment.name"));
	assert_null(get(&a, "service.name"));
	assert_string_equal(get(&a, "k8s.pod.label.app"), "db");

	assert_true(lookup(pc, CID_WEB, "", &a) > 0);
	assert_string_equal(get(&a, "k8s.pod.name"), "legacy");
	assert_string_equal(get(&a, "k8s.namespace.name"), "default");
	assert_null(get(&a, "k8s.replicaset.name"));
	assert_string_equal(get(&a, "service.name"), "legacy-web");

	/* unknown container, known pod uid: the pod without the container */
	assert_true(lookup(pc, CID_JOB, UID_CHECKOUT, &a) > 0);
	assert_string_equal(get(&a, "k8s.pod.name"), "checkout-7d9f8b6c5d-x2x7k");
	assert_null(get(&a, "k8s.container.name"));
	assert_int_equal(lookup(pc, CID_JOB, "", &a), 0);
	assert_int_equal(lookup(pc, "", "", &a), 0);
	assert_int_equal(lookup(pc, NULL, NULL, &a), 0);
	pf_podcache_free(pc);
}

/* Cuts the line at its newline; returns the next one. */
static char *cut_line(char *line)
{
	char *nl = strchr(line, '\n');
	assert_non_null(nl);
	*nl = 0;
	return nl + 1;
}

static char *next_line(char *line)
{
	return line + strlen(line) + 1;
}

static void test_watch_events(void **state)
{
	struct pf_podcache *pc = listed_cache();
	size_t len;
	char *lines = slurp("pods-watch.jsonl", &len);
	char rv[64] = "1010";
	struct attrs a;
	struct pf_error err = {0};
	for (char *l = lines; *l;)
		l = cut_line(l);
	char *line = lines;
	/* MODIFIED: the app container restarted with a new id */
	assert_int_equal(pf_podcache_apply_event(pc, line, strlen(line), rv, sizeof(rv), &err), 0);
	assert_string_equal(rv, "1011");
	assert_int_equal(lookup(pc, CID_APP, "", &a), 0);
	assert_true(lookup(pc, CID_APP2, "", &a) > 0);
	assert_string_equal(get(&a, "k8s.container.name"), "app");
	/* ADDED: a Job's pod */
	line = next_line(line);
	assert_int_equal(pf_podcache_apply_event(pc, line, strlen(line), rv, sizeof(rv), &err), 0);
	assert_true(lookup(pc, CID_JOB, "", &a) > 0);
	assert_string_equal(get(&a, "k8s.job.name"), "report-28391");
	assert_string_equal(get(&a, "k8s.namespace.name"), "batch");
	assert_string_equal(get(&a, "service.name"), "nightly-report");
	/* DELETED */
	line = next_line(line);
	assert_int_equal(pf_podcache_apply_event(pc, line, strlen(line), rv, sizeof(rv), &err), 0);
	assert_int_equal(lookup(pc, CID_WEB, UID_LEGACY, &a), 0);
	/* BOOKMARK: only the resourceVersion moves */
	line = next_line(line);
	struct pf_podcache_stats st;
	pf_podcache_stats(pc, &st);
	uint64_t gen = st.generation;
	assert_int_equal(pf_podcache_apply_event(pc, line, strlen(line), rv, sizeof(rv), &err), 0);
	assert_string_equal(rv, "1020");
	pf_podcache_stats(pc, &st);
	assert_int_equal(st.generation, gen);
	assert_string_equal(st.resource_version, "1020");
	assert_int_equal(st.pods, 4);
	assert_int_equal(st.events, 3);
	free(lines);

	/* errors */
	static const char gone[] =
	    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,"
	    "\"reason\":\"Expired\",\"message\":\"too old resource version\"}}";
	assert_int_equal(pf_podcache_apply_event(pc, gone, strlen(gone), rv, sizeof(rv), &err),
			 -ESTALE);
	assert_non_null(strstr(err.msg, "410 too old resource version"));
	pf_error_clear(&err);
	static const char e500[] =
	    "{\"type\":\"ERROR\",\"object\":{\"code\":500,\"message\":\"x\"}}";
	assert_int_equal(pf_podcache_apply_event(pc, e500, strlen(e500), rv, sizeof(rv), &err),
			 -EPROTO);
	static const char *bad[] = {
	    "not json", "{}", "{\"type\":\"ADDED\"}", "{\"type\":\"WHATEVER\",\"object\":{}}",
	    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"uid\":\"x\"}}}"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		pf_error_clear(&err);
		assert_int_equal(
		    pf_podcache_apply_event(pc, bad[i], strlen(bad[i]), rv, sizeof(rv), &err),
		    -EBADMSG);
	}
	assert_string_equal(rv, "1020");
	/* a list that is not a PodList leaves the cache alone */
	assert_int_equal(pf_podcache_apply_list(pc, "{\"items\":3}", 11, rv, sizeof(rv), &err),
			 -EBADMSG);
	pf_podcache_stats(pc, &st);
	assert_int_equal(st.pods, 4);
	pf_podcache_free(pc);
}

/* ---- the join with procinfo on cgroup fixtures ---------------------------------------------- */

static char root[64];

static void put(const char *pid, const char *name, const char *data, size_t len)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", root, pid);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/%s/%s", root, pid, name);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	fclose(f);
}

static void proc_from_fixture(const char *pid, const char *fixture, const char *env, size_t envlen)
{
	char rel[128], p[256];
	snprintf(rel, sizeof(rel), "cgroup/%s", fixture);
	size_t len;
	char *cg = slurp(rel, &len);
	put(pid, "cgroup", cg, len);
	put(pid, "comm", "app", 3);
	put(pid, "environ", env, envlen);
	snprintf(p, sizeof(p), "%s/%s/exe", root, pid);
	assert_int_equal(symlink("/usr/bin/app-server", p), 0);
	free(cg);
}

static void rm_root(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	assert_int_equal(system(cmd), 0);
}

static const char *pattr(const struct pf_prof_process *p, const char *key)
{
	for (size_t i = 0; i < p->n_attrs; i++)
		if (!strcmp(p->attrs[i].key, key))
			return p->attrs[i].value;
	return NULL;
}

static void test_cgroup_fixtures_join(void **state)
{
	snprintf(root, sizeof(root), "/tmp/pf-podcache-XXXXXX");
	assert_non_null(mkdtemp(root));
	static const char own_name[] = "OTEL_SERVICE_NAME=checkout-worker";
	proc_from_fixture("101", "containerd-v1.txt", "", 0);
	proc_from_fixture("102", "containerd-v2.txt", own_name, sizeof(own_name));
	proc_from_fixture("103", "crio-v1.txt", "", 0);
	proc_from_fixture("104", "crio-v2.txt", "", 0);
	proc_from_fixture("105", "docker-v1.txt", "", 0);
	proc_from_fixture("106", "docker-v2.txt", "", 0);

	struct pf_podcache *pc = listed_cache();
	struct pf_procinfo_source src;
	pf_podcache_source(pc, &src);
	struct pf_procinfo_options o = {.proc_root = root, .host_name = "node-1", .source = &src};
	struct pf_procinfo *pi = pf_procinfo_new(&o);
	assert_non_null(pi);
	static const struct {
		uint32_t pid;
		const char *cid, *pod, *ns, *container, *service;
	} want[] = {
	    {101, CID_APP, "checkout-7d9f8b6c5d-x2x7k", "shop", "app", "checkout-api"},
	    {102, CID_ENVOY, "checkout-7d9f8b6c5d-x2x7k", "shop", "envoy", "checkout-worker"},
	    {103, CID_DB, "db-0", "shop", "db", "app-server"},
	    {104, CID_EXPORTER, "db-0", "shop", "exporter", "app-server"},
	    {105, CID_WEB, "legacy", "default", "web", "legacy-web"},
	    {106, CID_LOG, "legacy", "default", "log", "legacy-web"},
	};
	struct pf_prof_window *w = pf_prof_window_new();
	assert_non_null(w);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct pf_proc *p = pf_procinfo_update(pi, want[i].pid);
		assert_non_null(p);
		assert_string_equal(p->container_id, want[i].cid);
		struct pf_prof_process pp;
		memset(&pp, 0, sizeof(pp));
		assert_int_equal(pf_procinfo_attrs(pi, want[i].pid, w, &pp), 0);
		assert_string_equal(pattr(&pp, "container.id"), want[i].cid);
		assert_string_equal(pattr(&pp, "k8s.pod.name"), want[i].pod);
		assert_string_equal(pattr(&pp, "k8s.namespace.name"), want[i].ns);
		assert_string_equal(pattr(&pp, "k8s.container.name"), want[i].container);
		assert_string_equal(pattr(&pp, "k8s.node.name"), "node-1");
		/* the process's own service name first, then the pod's, then the executable */
		assert_string_equal(pattr(&pp, "service.name"), want[i].service);
		size_t uids = 0;
		for (size_t k = 0; k < pp.n_attrs; k++)
			uids += !strcmp(pp.attrs[k].key, "k8s.pod.uid");
		assert_int_equal(uids, 1);
	}
	pf_prof_window_free(w);

	/* filters on pod attributes */
	struct pf_filter inc = {
	    .key = "k8s.namespace.name", .match = PF_MATCH_STRICT, .value = "shop"};
	struct pf_filter exc = {
	    .key = "k8s.pod.label.team", .match = PF_MATCH_REGEXP, .value = "^pay"};
	assert_int_equal(pf_procinfo_set_filters(pi, &inc, 1, &exc, 1, NULL), 0);
	assert_false(pf_procinfo_get(pi, 101)->allowed); /* shop, but team=payments */
	assert_false(pf_procinfo_get(pi, 102)->allowed);
	assert_true(pf_procinfo_get(pi, 103)->allowed);
	assert_true(pf_procinfo_get(pi, 104)->allowed);
	assert_false(pf_procinfo_get(pi, 105)->allowed); /* namespace default */
	struct pf_filter svc = {
	    .key = "service.name", .match = PF_MATCH_STRICT, .value = "legacy-web"};
	assert_int_equal(pf_procinfo_set_filters(pi, &svc, 1, NULL, 0, NULL), 0);
	assert_true(pf_procinfo_get(pi, 105)->allowed);
	assert_true(pf_procinfo_get(pi, 106)->allowed);
	assert_false(pf_procinfo_get(pi, 103)->allowed);

	pf_procinfo_free(pi);
	pf_podcache_free(pc);
	rm_root();
}

static int count_flip(void *ctx, const struct pf_proc *p)
{
	uint32_t *last = ctx;
	*last = p->pid;
	return 0;
}

/* A pod that reaches the cache after its process started: the verdict is taken again. */
static void test_verdict_refresh(void **state)
{
	snprintf(root, sizeof(root), "/tmp/pf-podcache-XXXXXX");
	assert_non_null(mkdtemp(root));
	static const char cg[] =
	    "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-"
	    "pod8c4d5e6f_7a8b_4c9d_8e1f_2a3b4c5d6e7f.slice/cri-containerd-" CID_JOB ".scope\n";
	put("201", "cgroup", cg, sizeof(cg) - 1);
	put("201", "comm", "report", 6);
	put("201", "environ", "", 0);
	put("202", "cgroup", "0::/user.slice\n", 15);
	put("202", "comm", "bash", 4);
	put("202", "environ", "", 0);

	struct pf_podcache *pc = listed_cache();
	struct pf_procinfo_source src;
	pf_podcache_source(pc, &src);
	struct pf_procinfo_options o = {.proc_root = root, .source = &src};
	struct pf_procinfo *pi = pf_procinfo_new(&o);
	struct pf_filter inc = {
	    .key = "k8s.namespace.name", .match = PF_MATCH_STRICT, .value = "batch"};
	assert_int_equal(pf_procinfo_set_filters(pi, &inc, 1, NULL, 0, NULL), 0);
	assert_false(pf_procinfo_update(pi, 201)->allowed); /* its pod is not cached yet */
	assert_false(pf_procinfo_update(pi, 202)->allowed);
	uint32_t last = 0;
	assert_int_equal(pf_procinfo_refresh_source(pi, count_flip, &last), 0);

	size_t len;
	char *lines = slurp("pods-watch.jsonl", &len);
	char *added = strchr(lines, '\n') + 1; /* the second event: the Job's pod */
	*strchr(added, '\n') = 0;
	char rv[64];
	assert_int_equal(pf_podcache_apply_event(pc, added, strlen(added), rv, sizeof(rv), NULL),
			 0);
	free(lines);
	assert_int_equal(pf_procinfo_refresh_source(pi, count_flip, &last), 1);
	assert_int_equal(last, 201);
	assert_true(pf_procinfo_get(pi, 201)->allowed);
	assert_false(pf_procinfo_get(pi, 202)->allowed);
	/* nothing moved since: no work */
	last = 0;
	assert_int_equal(pf_procinfo_refresh_source(pi, count_flip, &last), 0);
	assert_int_equal(last, 0);
	pf_procinfo_free(pi);
	pf_podcache_free(pc);
	rm_root();
}

static void test_bounds(void **state)
{
	/* max_pods: the rest is dropped and counted */
	struct pf_podcache *pc = new_cache(2);
	size_t len;
	char *body = slurp("pods-list.json", &len);
	char rv[64];
	assert_int_equal(pf_podcache_apply_list(pc, body, len, rv, sizeof(rv), NULL), 0);
	free(body);
	struct pf_podcache_stats st;
	pf_podcache_stats(pc, &st);
	assert_int_equal(st.pods, 2);
	assert_int_equal(st.dropped, 2);
	pf_podcache_free(pc);

	/* labels per pod and value length */
	pc = new_cache(0);
	char *big = malloc(200000);
	assert_non_null(big);
	int n = snprintf(big, 200000,
			 "{\"metadata\":{\"resourceVersion\":\"7\"},\"items\":[{\"metadata\":{"
			 "\"uid\":\"%s\",\"name\":\"",
			 UID_CHECKOUT);
	for (int i = 0; i < 3000; i++)
		big[n++] = 'p';
	n += snprintf(big + n, 200000 - (size_t)n, "\",\"namespace\":\"ns\",\"labels\":{");
	for (int i = 0; i < 100; i++)
		n += snprintf(big + n, 200000 - (size_t)n, "%s\"l%03d\":\"v\"", i ? "," : "", i);
	n += snprintf(big + n, 200000 - (size_t)n,
		      "}},\"status\":{\"containerStatuses\":[{\"name\":\"c\",\"containerID\":"
		      "\"containerd://%s\"}]}}]}",
		      CID_APP);
	assert_int_equal(pf_podcache_apply_list(pc, big, (size_t)n, rv, sizeof(rv), NULL), 0);
	free(big);
	struct attrs a;
	assert_true(lookup(pc, CID_APP, "", &a) > 0);
	assert_int_equal(strlen(get(&a, "k8s.pod.name")), PF_PODCACHE_MAX_VALUE);
	size_t labels = 0;
	for (size_t i = 0; i < a.n; i++)
		labels += !strncmp(a.a[i].key, "k8s.pod.label.", 14);
	assert_int_equal(labels, PF_PODCACHE_MAX_LABELS);
	assert_string_equal(get(&a, "k8s.container.name"), "c");
	pf_podcache_free(pc);
}

static void test_options(void **state)
{
	struct pf_error err = {0};
	struct pf_podcache_options o = {.api_url = "http://127.0.0.1:1"};
	assert_null(pf_podcache_new(&o, &err));
	assert_string_equal(err.path, "k8s.node");
	o.node_name = "n";
	o.api_url = "ftp://x";
	pf_error_clear(&err);
	assert_null(pf_podcache_new(&o, &err));
	assert_string_equal(err.path, "k8s.api");
	o.api_url = NULL;
	unsetenv("KUBERNETES_SERVICE_HOST");
	pf_error_clear(&err);
	assert_null(pf_podcache_new(&o, &err));
	assert_non_null(strstr(err.msg, "not in a cluster"));
	/* in-cluster: the service environment names the API server */
	setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
	struct pf_podcache *pc = pf_podcache_new(&o, &err);
	assert_non_null(pc);
	pf_podcache_free(pc);
	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_runtime_id),	    cmocka_unit_test(test_list_and_lookup),
	    cmocka_unit_test(test_watch_events),    cmocka_unit_test(test_cgroup_fixtures_join),
	    cmocka_unit_test(test_verdict_refresh), cmocka_unit_test(test_bounds),
	    cmocka_unit_test(test_options),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
