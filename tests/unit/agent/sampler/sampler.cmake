# Unit tests of agent/sampler's user-side modules (agent_sampler): process attributes and
# verdicts, raw samples to windows, the span triggers' sample ring. No BPF needed (the eBPF
# tests are in tests/ebpf). Included from tests/unit/agent/CMakeLists.txt.
foreach(mod procinfo aggregate sample_ring)
	pf_unit_test(NAME test_agent_${mod} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_${mod}.c
		LIBS agent_sampler pf_common LABEL unit TIMEOUT 60)
endforeach()
