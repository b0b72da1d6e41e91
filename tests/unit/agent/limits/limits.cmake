# Unit tests of agent/limits (in agent_core): the resource guard and the shared profile rate
# limit. Included from tests/unit/agent/CMakeLists.txt.
foreach(mod guard ratelimit)
	pf_unit_test(NAME test_agent_${mod} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_${mod}.c
		LIBS agent_core LABEL unit TIMEOUT 60)
endforeach()
