# agent_export: the agent's exporters (STYLE.md rule 1: a static library the agent and the
# tests link). Included from agent/CMakeLists.txt; paths relative to this file.
#   exporter.c   the interface (create from struct pf_exporter, submit, status), the bounded
#                delivery queue, retries with backoff, and the worker thread exports run on
#   file.c       `file`: atomic <UTC time>-<profile id>.otlp.pb files, bounded directory
#   otlp_http.c  `otlp_http`: blocking HTTP/1.1 POST (OpenSSL for https), with a deadline;
#                also the transport of `pyroscope`, and the partial-success reader
#   pyroscope.c  `pyroscope`: per-process pprof push targets (/ingest?format=pprof&name=...)
#   spill.c      the queue mirrored in the state dir (a file per queued item)
# lws is not used: the HTTP client is a small blocking one on the exporter's worker thread.
if(NOT TARGET agent_export)
	add_library(agent_export STATIC
		${CMAKE_CURRENT_LIST_DIR}/exporter.c
		${CMAKE_CURRENT_LIST_DIR}/file.c
		${CMAKE_CURRENT_LIST_DIR}/otlp_http.c
		${CMAKE_CURRENT_LIST_DIR}/pyroscope.c
		${CMAKE_CURRENT_LIST_DIR}/spill.c)
	target_include_directories(agent_export PUBLIC ${CMAKE_CURRENT_LIST_DIR})
	target_link_libraries(agent_export
		PUBLIC pf_proto pf_common PkgConfig::OPENSSL PkgConfig::ZLIB Threads::Threads
		PRIVATE pf_warnings)
endif()
