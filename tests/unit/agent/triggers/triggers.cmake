# Unit tests of agent/triggers (in agent_core): incident captures' admission and states, the
# slow-span receiver, the high_cpu trigger. Included from tests/unit/agent/CMakeLists.txt.
foreach(mod capture span_receiver high_cpu)
	pf_unit_test(NAME test_agent_${mod} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_${mod}.c
		LIBS agent_core LABEL unit TIMEOUT 60)
endforeach()
