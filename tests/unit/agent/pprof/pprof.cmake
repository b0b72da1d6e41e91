# Tests of agent/pprof/sampler_pprof.c (agent_pprof): HTTP client and its refusals against an
# in-process loopback server, conversion, the source schedule, and (when Debian's golang-go is
# installed) a real Go program with net/http/pprof built and scraped in the test. Included
# from tests/unit/agent/CMakeLists.txt; needs pf_proftest (tests/unit/proto/encode.cmake).
pf_unit_test(NAME test_sampler_pprof SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sampler_pprof.c
	LIBS agent_pprof pf_proftest pf_proto Threads::Threads LABEL unit TIMEOUT 240)
# The live Go test spins a CPU for a few seconds: run alone so it cannot starve the eBPF
# sampler test's busy program of CPU time on a small machine.
set_tests_properties(test_sampler_pprof PROPERTIES RUN_SERIAL TRUE)
