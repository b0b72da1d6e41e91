# Tests of the profile codecs (proto/codec/otlp_profiles*.c, pprof_codec.c) and of the OTLP
# conformance checker in tests/lib/. Included from tests/unit/proto/CMakeLists.txt; paths are
# relative to this file so it works from any including directory.
#
#   pf_proftest       tests/lib: profcheck (conformance checker) + prof_fixture (test windows)
#                     + loopback (listening sockets on 127.0.0.1);
#                     reads generated protobuf-c code (pf_proto_gen_headers, test-only use)
#   test_otlp_profiles, test_pprof_codec, test_profcheck   label unit
#   interop_otlp_profiles_protoc   label interop: protoc --decode against the upstream schema
#   interop_pprof_go               label interop: `go tool pprof -top` reads our pprof
# The interop tests exit 77 (skipped) when the reference schema, protoc or go is missing.
set(_enc_dir ${CMAKE_CURRENT_LIST_DIR})
set(_enc_lib ${PROJECT_SOURCE_DIR}/tests/lib)

if(NOT TARGET pf_proftest)
	add_library(pf_proftest STATIC ${_enc_lib}/profcheck.c ${_enc_lib}/prof_fixture.c
		${_enc_lib}/loopback.c)
	target_include_directories(pf_proftest PUBLIC ${_enc_lib})
	target_link_libraries(pf_proftest PUBLIC pf_proto pf_proto_gen_headers pf_common
		PRIVATE pf_warnings)
endif()

foreach(mod otlp_profiles pprof_codec profcheck)
	pf_unit_test(NAME test_${mod} SOURCES ${_enc_dir}/test_${mod}.c
		LIBS pf_proftest pf_proto pf_proto_gen_headers LABEL unit TIMEOUT 60)
endforeach()

# Interop: a small driver writes our encodings to files, a shell step runs the reference tool.
add_executable(prof_interop_dump ${_enc_dir}/prof_interop_dump.c)
target_link_libraries(prof_interop_dump PRIVATE pf_proftest pf_proto pf_warnings)
add_test(NAME interop_otlp_profiles_protoc
	COMMAND sh ${_enc_dir}/interop_prof.sh otlp $<TARGET_FILE:prof_interop_dump>)
add_test(NAME interop_pprof_go
	COMMAND sh ${_enc_dir}/interop_prof.sh pprof $<TARGET_FILE:prof_interop_dump>)
set_tests_properties(interop_otlp_profiles_protoc interop_pprof_go PROPERTIES
	LABELS interop TIMEOUT 180 SKIP_RETURN_CODE 77
	ENVIRONMENT "PF_SHARED_DIR=${PF_SHARED_DIR};PF_BUILD_DIR=${CMAKE_BINARY_DIR};PF_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
