# Tests of agent/http_client/ (agent_http_client): the libcurl client against a small server run
# by the test.
# Included from tests/unit/agent/CMakeLists.txt; needs pf_proftest (tests/unit/proto/encode.cmake).
pf_unit_test(NAME test_http_client SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_http_client.c
	LIBS agent_http_client pf_proftest Threads::Threads LABEL unit TIMEOUT 60)
