# Unit tests of agent/symbolize (in agent_sampler): ELF symbols, source lines and inlined
# frames, C++/Rust names, JIT perf maps, the vDSO, Go function tables. test_symbolize compiles its test ELFs with
# the system cc (and rustc where it exists). Included from tests/unit/agent/CMakeLists.txt.
# test_symbolize builds three Go programs and a dozen ELF files: up to ~2 min on a loaded
# 2-core machine, under ASan more.
foreach(mod symbolize demangle line_table perf_map gopclntab)
	set(timeout 60)
	if(mod STREQUAL "symbolize")
		set(timeout 300)
	endif()
	pf_unit_test(NAME test_agent_${mod} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_${mod}.c
		LIBS agent_sampler pf_common LABEL unit TIMEOUT ${timeout})
endforeach()
