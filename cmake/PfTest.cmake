# pf_unit_test(NAME <name> SOURCES <files...> LIBS <targets...> [LABEL <label>])
# One cmocka binary per module under test. Tests link the production
# static libraries; none compiles a private copy of production sources.
function(pf_unit_test)
	cmake_parse_arguments(T "" "NAME;LABEL;TIMEOUT" "SOURCES;LIBS" ${ARGN})
	if(NOT T_LABEL)
		set(T_LABEL unit)
	endif()
	if(NOT T_TIMEOUT)
		set(T_TIMEOUT 120)
	endif()
	add_executable(${T_NAME} ${T_SOURCES})
	target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} PkgConfig::CMOCKA pf_warnings)
	target_include_directories(${T_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/tests/lib) # gobuild.h
	add_test(NAME ${T_NAME} COMMAND ${T_NAME})
	set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABEL}" TIMEOUT ${T_TIMEOUT}
		ENVIRONMENT "PF_SHARED_DIR=${PF_SHARED_DIR};PF_BUILD_DIR=${CMAKE_BINARY_DIR};PF_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endfunction()
