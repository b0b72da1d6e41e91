# k8s.cmake — pod attribution: the static library `agent_k8s` (podcache.c: the node's pods from
# the API server, on a thread of its own, joined to processes by container id through
# procinfo's attribute source) and the debugging tool `profleet-podcache`. Included from
# agent/CMakeLists.txt; paths are relative to this file.
set(PF_K8S_DIR ${CMAKE_CURRENT_LIST_DIR})
add_library(agent_k8s STATIC ${PF_K8S_DIR}/podcache.c)
target_include_directories(agent_k8s PUBLIC ${PF_K8S_DIR}/..)
target_link_libraries(agent_k8s
	PUBLIC pf_common agent_sampler
	PRIVATE pf_warnings agent_http_client PkgConfig::JANSSON Threads::Threads)

add_executable(profleet-podcache ${PF_K8S_DIR}/podcache_main.c)
target_link_libraries(profleet-podcache PRIVATE agent_k8s agent_sampler pf_common pf_warnings
	PkgConfig::JANSSON)
