# Unit tests of agent/interp (agent_interp): CPython detection and offsets on the interpreters
# the machine has, code objects to names, line tables; V8's postmortem metadata of the machine's
# node and of v8meta_fixture.c (a partial table, as a shared library); V8 functions named from a
# live node child (test_v8_names.c); HotSpot's VM tables from an image built in the test and
# from a live JVM (test_hotspot_proc.c). pychild.c runs a child (Python, java), pywalk.c
# the kernel's walk from user space. Included from tests/unit/agent/CMakeLists.txt.
add_library(pf_pytest STATIC ${CMAKE_CURRENT_LIST_DIR}/pychild.c ${CMAKE_CURRENT_LIST_DIR}/pywalk.c)
target_include_directories(pf_pytest PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(pf_pytest PUBLIC agent_interp PRIVATE pf_warnings)
foreach(mod python_proc python_code python_linetable)
	pf_unit_test(NAME test_agent_${mod} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_${mod}.c
		LIBS pf_pytest agent_interp pf_common LABEL unit TIMEOUT 180)
endforeach()
add_library(pf_v8meta_fixture SHARED ${CMAKE_CURRENT_LIST_DIR}/v8meta_fixture.c)
pf_unit_test(NAME test_agent_v8_meta SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_v8_meta.c
	LIBS agent_interp pf_common LABEL unit)
target_compile_definitions(test_agent_v8_meta PRIVATE
	PF_V8_FIXTURE="$<TARGET_FILE:pf_v8meta_fixture>")
add_dependencies(test_agent_v8_meta pf_v8meta_fixture)
pf_unit_test(NAME test_agent_v8_names SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_v8_names.c
	LIBS agent_interp pf_common LABEL unit TIMEOUT 60)
set_tests_properties(test_agent_v8_names PROPERTIES SKIP_RETURN_CODE 77)
pf_unit_test(NAME test_agent_hotspot_vm SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_hotspot_vm.c
	LIBS agent_interp pf_common LABEL unit)
pf_unit_test(NAME test_agent_hotspot_proc SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_hotspot_proc.c
	LIBS pf_pytest agent_sampler agent_interp pf_common PkgConfig::PF_LIBELF LABEL unit
	TIMEOUT 180)
