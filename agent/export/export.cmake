# agent_export: the agent's exporters (a static library the agent and the
# tests link). Included from agent/CMakeLists.txt; paths relative to this file.
#   exporter.c   the interface (create from struct pf_exporter, submit, status), the bounded
#                delivery queue, retries with backoff, and the worker thread exports run on
#   file.c       `file`: atomic <UTC time>-<profile id>.otlp.pb files, bounded directory
#   otlp_http.c  `otlp_http`: POST through ../http_client/http_client.c (libcurl), with a
#                deadline; also the transport of `pyroscope`, and the partial-success reader
#   pyroscope.c  `pyroscope`: per-process pprof push targets (/ingest?format=pprof&name=...)
#   otlp_grpc.c  `otlp_grpc`: the unary ProfilesService/Export call through gRPC's C core
#   spill.c      the queue mirrored in the state dir (a file per queued item)
#   export_dir.c the directory file.c and spill.c keep their files in: creation, atomic
#                writes (temp file and rename), its entries
#   encode_submit.c  a window as OTLP requests (whole, or per process) handed to a sink:
#                the data plane's windows and the captures
#   ../relabel/relabel.c  the relabel rules (profiling.relabel, redact_secrets) that
#                encode_submit applies to every window first
# lws is not used: HTTP goes through libcurl (agent_http_client) on the exporter's worker thread.
#
# agent_http_client: the agent's outbound HTTP client (../http_client/http_client.c over
# libcurl), shared by the exporters, the pprof scraper and the pod cache.
if(NOT TARGET agent_http_client)
	if(NOT TARGET PkgConfig::CURL)
		pkg_check_modules(CURL REQUIRED IMPORTED_TARGET GLOBAL libcurl)
	endif()
	add_library(agent_http_client STATIC ${CMAKE_CURRENT_LIST_DIR}/../http_client/http_client.c)
	target_include_directories(agent_http_client PUBLIC ${CMAKE_CURRENT_LIST_DIR}/..)
	target_link_libraries(agent_http_client
		PUBLIC pf_common PkgConfig::CURL
		PRIVATE pf_warnings PkgConfig::OPENSSL Threads::Threads)
endif()
if(NOT TARGET agent_export)
	add_library(agent_export STATIC
		${CMAKE_CURRENT_LIST_DIR}/exporter.c
		${CMAKE_CURRENT_LIST_DIR}/file.c
		${CMAKE_CURRENT_LIST_DIR}/otlp_http.c
		${CMAKE_CURRENT_LIST_DIR}/pyroscope.c
		${CMAKE_CURRENT_LIST_DIR}/otlp_grpc.c
		${CMAKE_CURRENT_LIST_DIR}/spill.c
		${CMAKE_CURRENT_LIST_DIR}/export_dir.c
		${CMAKE_CURRENT_LIST_DIR}/encode_submit.c
		${CMAKE_CURRENT_LIST_DIR}/../relabel/relabel.c)
	target_include_directories(agent_export PUBLIC ${CMAKE_CURRENT_LIST_DIR}/..)
	target_link_libraries(agent_export
		PUBLIC pf_proto pf_common agent_http_client PkgConfig::OPENSSL PkgConfig::ZLIB
		PkgConfig::GRPC Threads::Threads
		PRIVATE pf_warnings)
endif()
