# Unit tests of agent/sampler's user-side modules (agent_sampler): process attributes and
# verdicts, raw samples to windows, the span triggers' sample ring, allocation sampling
# arithmetic and entry points (alloc_track, alloc_syms), the status lines made from its
# counters (sampler_stats). No BPF needed (the eBPF tests are in tests/ebpf). Included from tests/unit/agent/CMakeLists.txt.
foreach(mod procinfo aggregate sample_ring alloc_track sampler_stats)
	pf_unit_test(NAME test_agent_${mod} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_${mod}.c
		LIBS agent_sampler pf_proto pf_common LABEL unit TIMEOUT 60)
endforeach()
# The sampler's side of the kernel's Python walk: kernel entries from each version's offsets,
# frame words, names from a live python3.11 child (pf_pytest: tests/unit/agent/interp).
pf_unit_test(NAME test_agent_python_unwind SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_python_unwind.c
	LIBS agent_sampler pf_pytest pf_common LABEL unit TIMEOUT 60)
