# `trainprof top` (docs/cli.md): the Prometheus text and HTTP response parsers on
# known and hostile input (test_top_parse); then the command itself (top_test.sh): a char_lm
# job under `trainprof run --metrics-port` seen by `top --once` (rank 0, steps > 0, a plausible
# step time), an endpoint that does not answer (exit 1, a clear line), and a fake server
# (python3) serving hostile, malformed, oversized, slow and truncated responses.
tprof_add_unit(test_top_parse test_top_parse.c ${CMAKE_SOURCE_DIR}/cli/top_parse.c LIBS m)
target_include_directories(test_top_parse PRIVATE ${CMAKE_SOURCE_DIR}/cli)
add_test(NAME top_offline
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/top_test.sh offline $<TARGET_FILE:trainprof_cli>
          $<TARGET_FILE:char_lm> ${CMAKE_CURRENT_SOURCE_DIR}/top_fake_server.py)
set_tests_properties(top_offline PROPERTIES TIMEOUT 240 LABELS "cli"
  ENVIRONMENT "${TPROF_TEST_ENV}")
if(TPROF_HAVE_MHD)
  add_test(NAME top_job
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/top_test.sh job $<TARGET_FILE:trainprof_cli>
            $<TARGET_FILE:char_lm> ${CMAKE_CURRENT_SOURCE_DIR}/top_fake_server.py)
  set_tests_properties(top_job PROPERTIES TIMEOUT 240 LABELS "cli"
    ENVIRONMENT "${TPROF_TEST_ENV}")
else()
  message(STATUS "trainprof: the `trainprof top` job test left out (no libmicrohttpd)")
endif()
