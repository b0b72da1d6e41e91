# Unit tests of agent/unwind (in agent_sampler): .eh_frame/.debug_frame to compact rows and
# their disk cache (test ELFs compiled with the system cc), the table builder child. The walk
# in the kernel is tested by tests/ebpf/test_unwind.c. Included from
# tests/unit/agent/CMakeLists.txt.
foreach(mod unwind_table table_builder)
	pf_unit_test(NAME test_agent_${mod} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_${mod}.c
		LIBS agent_sampler pf_common LABEL unit TIMEOUT 60)
endforeach()
