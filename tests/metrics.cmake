# Live metrics (issue 8, docs/metrics.md): the registry's text formats and a session's
# endpoint on an ephemeral loopback port (steps, OpenMetrics, token, capture toggle, malformed
# and oversized requests), then a job stepping under 200 concurrent connections and slow
# clients ("storm"). `promtool check metrics` runs on a scrape when promtool is installed.
if(TPROF_HAVE_MHD)
  tprof_add_unit(test_metrics test_metrics.c ${CMAKE_SOURCE_DIR}/src/core/metrics.c
                 LIBS trainprof Threads::Threads m LABELS tsan)
  add_test(NAME metrics_storm COMMAND test_metrics storm)
  set_tests_properties(metrics_storm PROPERTIES TIMEOUT 180 LABELS "unit;tsan"
    ENVIRONMENT "${TPROF_TEST_ENV}")
else()
  message(STATUS "trainprof: metrics endpoint tests left out (no libmicrohttpd)")
endif()
