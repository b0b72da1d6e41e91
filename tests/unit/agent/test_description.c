/* test_description.c — agent/description.c: AgentDescription attributes. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "description.h"
#include "pf/uuid.h"

static void test_attributes(void **unused)
{
	struct agent_description d;
	uint8_t uid[16];
	char text[PF_UUID_STR_LEN + 1], host[256];
	struct pf_kv_str labels[] = {
	    {(char *)"env", (char *)"prod"},
	    {(char *)"team", (char *)"checkout"},
	    {(char *)"service.name", (char *)"must-not-override"},
	    {(char *)"host.arch", (char *)"must-not-override"},
	};

	unsetenv("K8S_NODE_NAME");
	unsetenv("K8S_POD_NAME");
	assert_int_equal(pf_uuid_v7(uid), 0);
	pf_uuid_format(uid, text);
	assert_int_equal(agent_description_build(&d, uid, labels, 4), 0);

	assert_int_equal(d.n_identifying, 2);
	assert_string_equal(d.identifying[0].key, "service.name");
	assert_string_equal(d.identifying[0].value, "profleet-agent");
	assert_string_equal(agent_description_get(&d, "service.instance.id"), text);

	assert_string_equal(agent_description_get(&d, "os.type"), "linux");
	assert_string_equal(agent_description_get(&d, "service.version"), agent_version());
	assert_true(strlen(agent_version()) > 0);
#if defined(__x86_64__)
	assert_string_equal(agent_description_get(&d, "host.arch"), "amd64");
#elif defined(__aarch64__)
	assert_string_equal(agent_description_get(&d, "host.arch"), "arm64");
#endif
	assert_int_equal(gethostname(host, sizeof(host)), 0);
	assert_string_equal(agent_description_get(&d, "host.name"), host);
	assert_string_equal(agent_description_get(&d, "env"), "prod");
	assert_string_equal(agent_description_get(&d, "team"), "checkout");
	assert_null(agent_description_get(&d, "k8s.node.name"));
	/* Labels never replace reserved attributes. */
	assert_string_equal(agent_description_get(&d, "service.name"), "profleet-agent");
	size_t n_arch = 0;
	for (size_t i = 0; i < d.n_non_identifying; i++)
		if (strcmp(d.non_identifying[i].key, "host.arch") == 0)
			n_arch++;
	assert_int_equal(n_arch, 1);
	agent_description_release(&d);
}

static void test_k8s_env(void **unused)
{
	struct agent_description d;
	uint8_t uid[16] = {1};

	setenv("K8S_NODE_NAME", "node-7", 1);
	setenv("K8S_POD_NAME", "agent-abc", 1);
	setenv("K8S_NAMESPACE", "profleet", 1);
	assert_int_equal(agent_description_build(&d, uid, NULL, 0), 0);
	assert_string_equal(agent_description_get(&d, "k8s.node.name"), "node-7");
	assert_string_equal(agent_description_get(&d, "k8s.pod.name"), "agent-abc");
	assert_string_equal(agent_description_get(&d, "k8s.namespace.name"), "profleet");
	assert_null(agent_description_get(&d, "k8s.pod.uid"));
	agent_description_release(&d);
	unsetenv("K8S_NODE_NAME");
	unsetenv("K8S_POD_NAME");
	unsetenv("K8S_NAMESPACE");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_attributes),
	    cmocka_unit_test(test_k8s_env),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
