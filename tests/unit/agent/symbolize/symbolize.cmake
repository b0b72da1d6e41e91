# Unit tests of agent/symbolize (in agent_sampler): ELF symbols, source lines and inlined
# frames, C++/Rust names, JIT perf maps, the vDSO, Go function tables. test_symbolize compiles its test ELFs with
# the system cc (and rustc where it exists). Included from tests/unit/agent/CMakeLists.txt.
foreach(mod symbolize demangle line_table perf_map gopclntab)
	pf_unit_test(NAME test_agent_${mod} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_${mod}.c
		LIBS agent_sampler pf_common LABEL unit TIMEOUT 60)
endforeach()
