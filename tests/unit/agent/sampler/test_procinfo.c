/* test_procinfo.c — agent/sampler/procinfo.h: cgroup path formats, environ parsing, attributes read
 * from a fake /proc tree, filters (strict/regexp, include/exclude) and fork/exit/reap. */
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

#include "sampler/procinfo.h"

#define CID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define UID "9f0d2a3b-1c4e-4f5a-8b6c-7d8e9f0a1b2c"
#define UID_ "9f0d2a3b_1c4e_4f5a_8b6c_7d8e9f0a1b2c"

static void cg(const char *text, const char *want_cid, const char *want_pod)
{
	char cid[PF_CONTAINER_ID_LEN], pod[PF_POD_UID_LEN];
	pf_cgroup_parse(text, cid, pod);
	assert_string_equal(cid, want_cid);
	assert_string_equal(pod, want_pod);
}

static void test_cgroup_formats(void **state)
{
	/* docker, cgroup v1 cgroupfs driver */
	cg("12:pids:/docker/" CID "\n11:memory:/docker/" CID "\n", CID, "");
	/* docker, systemd driver, cgroup v2 */
	cg("0::/system.slice/docker-" CID ".scope\n", CID, "");
	/* containerd under Kubernetes, systemd driver */
	cg("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
	   ".slice/cri-containerd-" CID ".scope\n",
	   CID, UID);
	/* cri-o */
	cg("0::/kubepods.slice/kubepods-pod" UID_ ".slice/crio-" CID ".scope\n", CID, UID);
	/* Kubernetes, cgroupfs driver */
	cg("0::/kubepods/besteffort/pod" UID "/" CID "\n", CID, UID);
	/* podman */
	cg("0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" CID ".scope\n",
	   CID, "");
	/* not containers */
	cg("0::/user.slice/user-1000.slice/session-3.scope\n", "", "");
	cg("0::/system.slice/crio-conmon-" CID ".scope\n", "", "");
	cg("0::/docker/0123\n", "", "");
	cg("0::/kubepods/podnotauuid/x\n", "", "");
	cg("", "", "");
	cg("garbage without colons", "", "");
	/* upper-case hex is not a container id */
	cg("0::/docker/0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef\n", "", "");
}

static int svc(const char *env, size_t len, char *out, size_t n)
{
	return pf_environ_service_name(env, len, out, n);
}

static void test_environ(void **state)
{
	char out[64];
	static const char e1[] = "PATH=/bin\0OTEL_SERVICE_NAME=checkout\0HOME=/";
	assert_int_equal(svc(e1, sizeof(e1), out, sizeof(out)), 0);
	assert_string_equal(out, "checkout");
	static const char e2[] = "OTEL_RESOURCE_ATTRIBUTES=deployment.environment=prod, "
				 "service.name=billing%20api,team=a";
	assert_int_equal(svc(e2, sizeof(e2), out, sizeof(out)), 0);
	assert_string_equal(out, "billing api");
	/* OTEL_SERVICE_NAME wins, whatever the order */
	static const char e3[] = "OTEL_RESOURCE_ATTRIBUTES=service.name=b\0OTEL_SERVICE_NAME=a";
	assert_int_equal(svc(e3, sizeof(e3), out, sizeof(out)), 0);
	assert_string_equal(out, "a");
	static const char e4[] = "OTEL_RESOURCE_ATTRIBUTES=team=a\0OTEL_SERVICE_NAME=";
	assert_int_equal(svc(e4, sizeof(e4), out, sizeof(out)), -ENOENT);
	/* not NUL-terminated at the end, truncated output */
	static const char e5[4 + 18 + 6] = "X=1\0OTEL_SERVICE_NAME=abcdef";
	assert_int_equal(svc(e5, sizeof(e5), out, 3), 0);
	assert_string_equal(out, "ab");
	assert_int_equal(svc("", 0, out, sizeof(out)), -ENOENT);
}

static char root[64];

static void write_file(const char *pid, const char *name, const char *data, size_t len)
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

static void fake_proc(const char *pid, const char *exe, const char *comm, const char *cgroup,
		      const char *env, size_t envlen)
{
	char p[256];
	write_file(pid, "comm", comm, strlen(comm));
	write_file(pid, "cgroup", cgroup, strlen(cgroup));
	write_file(pid, "environ", env, envlen);
	static const char cmdline[] = "/usr/bin/app\0--port\0" "8080";
	write_file(pid, "cmdline", cmdline, sizeof(cmdline));
	snprintf(p, sizeof(p), "%s/%s/exe", root, pid);
	if (exe)
		assert_int_equal(symlink(exe, p), 0);
}

static const char *attr(const struct pf_prof_process *p, const char *key)
{
	for (size_t i = 0; i < p->n_attrs; i++)
		if (!strcmp(p->attrs[i].key, key))
			return p->attrs[i].value;
	return NULL;
}

static bool keep_101(void *ctx, uint32_t pid)
{
	(void)ctx;
	return pid == 101;
}

static bool keep_none(void *ctx, uint32_t pid)
{
	(void)ctx;
	(void)pid;
	return false;
}

static void note_forget(void *ctx, uint32_t pid)
{
	*(uint32_t *)ctx = pid;
}

static void test_fake_proc_and_filters(void **state)
{
	snprintf(root, sizeof(root), "/tmp/pf-procinfo-XXXXXX");
	assert_non_null(mkdtemp(root));
	static const char env1[] = "OTEL_SERVICE_NAME=checkout";
	fake_proc("100", "/usr/bin/checkout-server", "checkout-serv",
		  "0::/system.slice/docker-" CID ".scope\n", env1, sizeof(env1));
	fake_proc("200", "/opt/app/billing-test (deleted)", "billing-test", "0::/user.slice\n", "",
		  0);
	fake_proc("300", NULL, "kworker/0:1", "0::/\n", "", 0);

	struct pf_procinfo_options o = {.proc_root = root, .host_name = "node-1",
					.command_line = true};
	struct pf_procinfo *pi = pf_procinfo_new(&o);
	assert_non_null(pi);
	assert_int_equal(pf_procinfo_scan(pi), 3);
	const struct pf_proc *a = pf_procinfo_get(pi, 100), *b = pf_procinfo_get(pi, 200),
			     *k = pf_procinfo_get(pi, 300);
	/* environ is only read when service.name is needed: not by a scan without filters */
	assert_false(a->env_read);
	assert_null(a->service_name);
	/* a sampled process reads it at once (it may be gone when its window closes) */
	a = pf_procinfo_read(pi, 100, "checkout-serv", true);
	assert_non_null(a);
	assert_true(a->env_read);
	assert_string_equal(a->service_name, "checkout");
	assert_string_equal(a->exe_name, "checkout-server");
	assert_string_equal(a->exe_path, "/usr/bin/checkout-server");
	assert_string_equal(a->container_id, CID);
	assert_string_equal(a->command_line, "/usr/bin/app --port 8080");
	assert_string_equal(b->exe_path, "/opt/app/billing-test");
	assert_null(k->exe_path);
	assert_string_equal(k->exe_name, "kworker/0:1");
	/* the comm of a sample stands in for /proc/PID/comm; a gone pid is still noticed */
	k = pf_procinfo_read(pi, 300, "kworker/0:9", false);
	assert_non_null(k);
	assert_string_equal(k->exe_name, "kworker/0:9");
	assert_null(pf_procinfo_read(pi, 4243, "gone", true));
	assert_int_equal(errno, ENOENT);
	assert_true(a->allowed && b->allowed && k->allowed);
	assert_false(pf_procinfo_filtering(pi));

	/* include service.name=checkout or exe matching ^billing; exclude .*-test */
	struct pf_filter inc[] = {{"service.name", PF_MATCH_STRICT, "checkout"},
				  {"process.executable.name", PF_MATCH_REGEXP, "^billing"}};
	struct pf_filter exc[] = {{"service.name", PF_MATCH_REGEXP, ".*-test$"}};
	struct pf_error err = {0};
	assert_int_equal(pf_procinfo_set_filters(pi, inc, 2, exc, 1, &err), 0);
	assert_true(pf_procinfo_filtering(pi));
	assert_true(pf_procinfo_get(pi, 100)->allowed);
	assert_false(pf_procinfo_get(pi, 200)->allowed); /* included, then excluded */
	/* a service.name filter made every process's environ read */
	assert_true(pf_procinfo_get(pi, 200)->env_read);
	assert_null(pf_procinfo_get(pi, 200)->service_name); /* none: the exe name stands in */
	assert_false(pf_procinfo_get(pi, 300)->allowed); /* not included */

	/* pid and container.id keys; unknown-on-host keys match nothing */
	struct pf_filter byid[] = {{"process.pid", PF_MATCH_STRICT, "300"},
				   {"container.id", PF_MATCH_STRICT, CID},
				   {"k8s.pod.name", PF_MATCH_REGEXP, ".*"}};
	assert_int_equal(pf_procinfo_set_filters(pi, byid, 3, NULL, 0, &err), 0);
	assert_true(pf_procinfo_get(pi, 100)->allowed);
	assert_false(pf_procinfo_get(pi, 200)->allowed);
	assert_true(pf_procinfo_get(pi, 300)->allowed);

	/* a bad regexp keeps the old filters */
	struct pf_filter bad[] = {{"service.name", PF_MATCH_REGEXP, "("}};
	assert_int_equal(pf_procinfo_set_filters(pi, bad, 1, NULL, 0, &err), -EINVAL);
	assert_string_equal(err.path, "profiling.filters.include[0].value");
	assert_true(pf_procinfo_get(pi, 300)->allowed);

	/* fork: the child copies the parent; its own pid decides a process.pid filter */
	const struct pf_proc *c = pf_procinfo_fork(pi, 100, 101);
	assert_non_null(c);
	assert_string_equal(c->service_name, "checkout");
	assert_string_equal(c->container_id, CID);
	assert_int_equal(c->pid, 101);
	assert_true(c->allowed); /* by container.id */

	/* attributes */
	struct pf_prof_window *w = pf_prof_window_new();
	struct pf_prof_process p = {0};
	assert_int_equal(pf_procinfo_attrs(pi, 100, w, &p), 0);
	assert_string_equal(attr(&p, "service.name"), "checkout");
	assert_string_equal(attr(&p, "process.pid"), "100");
	assert_string_equal(attr(&p, "process.executable.name"), "checkout-server");
	assert_string_equal(attr(&p, "process.executable.path"), "/usr/bin/checkout-server");
	assert_string_equal(attr(&p, "process.command_line"), "/usr/bin/app --port 8080");
	assert_string_equal(attr(&p, "container.id"), CID);
	assert_string_equal(attr(&p, "host.name"), "node-1");
	assert_null(attr(&p, "k8s.pod.uid"));
	struct pf_prof_process pb = {0};
	assert_int_equal(pf_procinfo_attrs(pi, 200, w, &pb), 0);
	assert_string_equal(attr(&pb, "service.name"), "billing-test"); /* the exe name */
	for (size_t i = 0; i < p.n_attrs; i++) /* no duplicate keys */
		for (size_t j = i + 1; j < p.n_attrs; j++)
			assert_string_not_equal(p.attrs[i].key, p.attrs[j].key);
	struct pf_prof_process q = {0};
	assert_int_equal(pf_procinfo_attrs(pi, 999, w, &q), 0); /* unknown pid */
	assert_int_equal(q.n_attrs, 2);
	pf_prof_window_free(w);

	/* exit + reap; reap_if keeps what its predicate holds on to */
	size_t n = pf_procinfo_count(pi);
	pf_procinfo_exited(pi, 101);
	assert_true(pf_procinfo_get(pi, 101)->exited);
	uint32_t forgotten = 0;
	pf_procinfo_reap_if(pi, keep_101, NULL, note_forget, &forgotten);
	assert_non_null(pf_procinfo_get(pi, 101));
	assert_int_equal(forgotten, 0);
	assert_int_equal(pf_procinfo_count(pi), n);
	pf_procinfo_reap_if(pi, keep_none, NULL, note_forget, &forgotten);
	assert_int_equal(forgotten, 101);
	assert_null(pf_procinfo_get(pi, 101));
	assert_int_equal(pf_procinfo_count(pi), n - 1);
	pf_procinfo_reap(pi, NULL, NULL);
	assert_int_equal(pf_procinfo_count(pi), n - 1);
	/* gone from /proc */
	assert_null(pf_procinfo_update(pi, 4242));
	assert_int_equal(errno, ENOENT);
	pf_procinfo_free(pi);

	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	assert_int_equal(system(cmd), 0);
}

static void test_self(void **state)
{
	struct pf_procinfo *pi = pf_procinfo_new(NULL);
	const struct pf_proc *me = pf_procinfo_update(pi, (uint32_t)getpid());
	assert_non_null(me);
	assert_string_equal(me->exe_name, "test_agent_procinfo");
	assert_null(me->command_line); /* off by default */
	assert_true(pf_procinfo_host_name(pi)[0] != 0);
	pf_procinfo_free(pi);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cgroup_formats),
		cmocka_unit_test(test_environ),
		cmocka_unit_test(test_fake_proc_and_filters),
		cmocka_unit_test(test_self),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
