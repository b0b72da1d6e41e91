# Tests of agent/export (agent_export): the file and otlp_http exporters, the exporter
# interface, delivery (queue, retries, spill, pyroscope: test_export_delivery) and the shared
# encode-and-submit (test_encode_submit). Included from tests/unit/agent/CMakeLists.txt; paths
# relative to this file.
# They use pf_proftest (tests/lib: conformance checker, fixture windows), defined by
# tests/unit/proto/encode.cmake, which is included before this file.
foreach(mod export_file export_otlp_http export_otlp_grpc export_delivery encode_submit)
	pf_unit_test(NAME test_${mod} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_${mod}.c
		LIBS agent_export pf_proftest Threads::Threads LABEL unit TIMEOUT 60)
endforeach()
# agent/relabel (part of agent_export: encode_submit applies it)
pf_unit_test(NAME test_relabel SOURCES ${CMAKE_CURRENT_LIST_DIR}/../relabel/test_relabel.c
	LIBS agent_export LABEL unit TIMEOUT 60)
