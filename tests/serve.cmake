# Live metrics from the command line (docs/metrics.md, docs/cli.md):
# - serve: `trainprof serve` as a node exporter, without NVML and with the fake libnvidia-ml
#   (tests/serve_test.sh);
# - run_metrics: `trainprof run --metrics-port` scraped while char_lm runs
#   (tests/run_metrics_test.sh);
# - prometheus_scrape: a real Prometheus server scraping that job, its query API answering the
#   step-duration series; skipped (77) where the prometheus binary is absent, as in CI;
# - dashboard: dashboards/trainprof.json parses and every panel's expr names a documented metric.
if(TPROF_HAVE_MHD)
  add_test(NAME serve
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/serve_test.sh $<TARGET_FILE:trainprof_cli>
            $<TARGET_FILE:fake_nvml> ${CMAKE_CURRENT_BINARY_DIR}/serve-test)
  set_tests_properties(serve PROPERTIES LABELS "cli;metrics" TIMEOUT 120
    ENVIRONMENT "${TPROF_TEST_ENV}")
  add_test(NAME run_metrics
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/run_metrics_test.sh $<TARGET_FILE:trainprof_cli>
            $<TARGET_FILE:char_lm> ${CMAKE_CURRENT_BINARY_DIR}/run-metrics-test)
  set_tests_properties(run_metrics PROPERTIES LABELS "cli;metrics" TIMEOUT 120
    ENVIRONMENT "${TPROF_TEST_ENV}")
  add_test(NAME prometheus_scrape
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/prometheus_test.sh $<TARGET_FILE:trainprof_cli>
            $<TARGET_FILE:char_lm> ${CMAKE_CURRENT_BINARY_DIR}/prometheus-test)
  set_tests_properties(prometheus_scrape PROPERTIES LABELS "cli;metrics" TIMEOUT 120
    SKIP_RETURN_CODE 77 ENVIRONMENT "${TPROF_TEST_ENV}")
else()
  message(STATUS "trainprof: serve and run --metrics-port tests left out (no libmicrohttpd)")
endif()
add_test(NAME dashboard
  COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/dashboard_check.py
          ${CMAKE_SOURCE_DIR}/dashboards/trainprof.json ${CMAKE_SOURCE_DIR}/docs/metrics.md)
set_tests_properties(dashboard PROPERTIES LABELS "docs;metrics" TIMEOUT 30)
