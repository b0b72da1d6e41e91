# Tests of agent/k8s/podcache.c (agent_k8s): a PodList and watch events from tests/data/k8s,
# lookups, the join with procinfo on cgroup files of containerd, CRI-O and Docker (v1, v2),
# filters on pod attributes, bounds. No network (the fake API server is in
# tests/integration/test_k8s_pods.py). Included from tests/unit/agent/CMakeLists.txt.
pf_unit_test(NAME test_agent_podcache SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_podcache.c
	LIBS agent_k8s agent_sampler pf_common LABEL unit TIMEOUT 60)
