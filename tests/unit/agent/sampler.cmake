# Unit tests of the sampler's user-side modules (agent_sampler); no BPF needed. Included from
# tests/unit/agent/CMakeLists.txt. test_symbolize and test_unwind_table compile their test ELFs
# with the system cc.
foreach(mod symbolize demangle procinfo aggregate sample_ring unwind_table
	table_builder line_table perf_map)
	pf_unit_test(NAME test_agent_${mod} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_${mod}.c
		LIBS agent_sampler pf_common LABEL unit TIMEOUT 60)
endforeach()
