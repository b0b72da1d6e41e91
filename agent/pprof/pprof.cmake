# pprof.cmake — pprof sources: the static library `agent_pprof` and the debugging and
# test tool `profleet-pprof-scrape`. Included from agent/CMakeLists.txt; paths are relative to
# this file so it works from any directory scope.
#
#   sampler_pprof.c       scrape schedule, worker threads, GETs through agent_http_client (libcurl),
#                         pprof -> window
#   pprof_scrape_main.c   profleet-pprof-scrape: scrape once, write OTLP bytes, print a summary
if(NOT TARGET agent_pprof)
	add_library(agent_pprof STATIC ${CMAKE_CURRENT_LIST_DIR}/sampler_pprof.c)
	target_include_directories(agent_pprof PUBLIC ${CMAKE_CURRENT_LIST_DIR}/..)
	target_link_libraries(agent_pprof
		PUBLIC pf_proto pf_common agent_http_client Threads::Threads
		PRIVATE pf_warnings)

	add_executable(profleet-pprof-scrape ${CMAKE_CURRENT_LIST_DIR}/pprof_scrape_main.c)
	target_link_libraries(profleet-pprof-scrape PRIVATE agent_pprof pf_proto pf_common
		pf_warnings)
endif()
