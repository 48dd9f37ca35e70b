# Live metrics (docs/metrics.md): the registry's text formats and a session's
# endpoint on an ephemeral loopback port (steps, OpenMetrics, token, capture toggle, malformed
# and oversized requests, label values that are not UTF-8, a GPU busy-time counter from known
# busy intervals, 160 slow clients (slowloris) beside 8 scrapes), then a job stepping under
# 200 concurrent connections and slow clients ("storm"). `promtool check metrics` runs on a
# scrape when promtool is installed; the test's own check of the text format always runs.
if(TPROF_HAVE_MHD)
  # the registry (core/metrics.c compiled in) and a session's endpoint, each its executable
  tprof_add_unit(test_metrics_registry test_metrics_registry.c metrics_check.c
                 ${CMAKE_SOURCE_DIR}/src/core/metrics.c
                 LIBS trainprof Threads::Threads m LABELS tsan)
  tprof_add_unit(test_metrics_endpoint test_metrics_endpoint.c metrics_check.c
                 LIBS trainprof tprof_analysis Threads::Threads m LABELS tsan)
  add_test(NAME metrics_storm COMMAND test_metrics_endpoint storm)
  set_tests_properties(metrics_storm PROPERTIES TIMEOUT 180 LABELS "unit;tsan"
    ENVIRONMENT "${TPROF_TEST_ENV}")
  # The endpoint's descriptors stay out of the job's way: a job that closes every
  # descriptor from 3 to 1023 and reuses the numbers while requests are in flight exits 0 with
  # its files intact and the requests answered; a job at RLIMIT_NOFILE with a client waiting
  # does not spin. Plain builds only: a sanitizer's runtime interposes accept4 and pipe ahead
  # of libtrainprof, so libtrainprof sees the runtime, not libmicrohttpd, as the caller.
  if(NOT TPROF_SANITIZE)
    tprof_add_unit(test_metrics_fds test_metrics_fds.c LIBS trainprof)
  endif()
  # The job's address space: under RLIMIT_AS just above its own threads' needs, the job's
  # pthread_create succeeds beside a session with its metrics endpoint; and every thread the
  # library starts has an explicit stack of which it uses at most half (a preloaded
  # pthread_create measures). Plain builds only: sanitizers need terabytes of address space
  # and interpose pthread_create themselves.
  if(NOT TPROF_SANITIZE)
    tprof_add_unit(test_metrics_rlimit test_metrics_rlimit.c LIBS trainprof Threads::Threads)
    add_library(metrics_stack_depth MODULE metrics_stack_depth.c)
    target_link_libraries(metrics_stack_depth PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
    add_test(NAME metrics_stack
      COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/metrics_stack_test.sh $<TARGET_FILE:trainprof_cli>
              $<TARGET_FILE:metrics_stack_depth> $<TARGET_FILE:fake_nvml> $<TARGET_FILE:char_lm>
              ${CMAKE_CURRENT_BINARY_DIR}/metrics-stack-test)
    set_tests_properties(metrics_stack PROPERTIES LABELS "cli;metrics" TIMEOUT 120
      ENVIRONMENT "${TPROF_TEST_ENV}")
  endif()
else()
  message(STATUS "trainprof: metrics endpoint tests left out (no libmicrohttpd)")
endif()
