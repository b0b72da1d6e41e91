# Unit tests of agent/interp (agent_interp): CPython detection and offsets on the interpreters
# the machine has, code objects to names, line tables. pychild.c runs a Python child, pywalk.c
# the kernel's walk from user space. Included from tests/unit/agent/CMakeLists.txt.
add_library(pf_pytest STATIC ${CMAKE_CURRENT_LIST_DIR}/pychild.c ${CMAKE_CURRENT_LIST_DIR}/pywalk.c)
target_include_directories(pf_pytest PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(pf_pytest PUBLIC agent_interp PRIVATE pf_warnings)
foreach(mod python_proc python_code python_linetable)
	pf_unit_test(NAME test_agent_${mod} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_${mod}.c
		LIBS pf_pytest agent_interp pf_common LABEL unit TIMEOUT 180)
endforeach()
