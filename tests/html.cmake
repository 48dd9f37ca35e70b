# HTML report (src/export/html.c) and trainprof diff (src/analysis/diff.c), on synthetic
# runs with known values (tests/synth.c).
tprof_add_unit(test_html ${CMAKE_CURRENT_LIST_DIR}/test_html.c ${CMAKE_CURRENT_LIST_DIR}/synth.c
  LIBS tprof_analysis LABELS export)
tprof_add_unit(test_diff ${CMAKE_CURRENT_LIST_DIR}/test_diff.c ${CMAKE_CURRENT_LIST_DIR}/synth.c
  LIBS tprof_analysis LABELS analysis)
# Structure with python3's html.parser (runs everywhere), then headless Chromium (skipped when
# no chromium is installed: it is not one of the build's Debian packages).
add_test(NAME html_structure COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/html_browser.sh
  $<TARGET_FILE:trainprof_cli> $<TARGET_FILE:test_html> structure)
add_test(NAME html_browser COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/html_browser.sh
  $<TARGET_FILE:trainprof_cli> $<TARGET_FILE:test_html> browser)
set_tests_properties(html_structure html_browser PROPERTIES LABELS "integration;export"
  TIMEOUT 300 SKIP_RETURN_CODE 77 ENVIRONMENT "${TPROF_TEST_ENV}")
# the browser is not built with ASan; nothing of ours runs in it
set_tests_properties(html_browser PROPERTIES LABELS "integration;export;no-asan")
# A 30,000-step run's report: no dead link, and its heatmap, as Chromium paints it, shows the
# run's slow stretch (skipped without chromium, as html_browser)
add_test(NAME html_shot COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/html_shot.sh
  $<TARGET_FILE:trainprof_cli> $<TARGET_FILE:test_html>)
set_tests_properties(html_shot PROPERTIES LABELS "integration;export;no-asan" TIMEOUT 120
  SKIP_RETURN_CODE 77 ENVIRONMENT "${TPROF_TEST_ENV}")
add_test(NAME diff_cli COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/diff_cli.sh
  $<TARGET_FILE:trainprof_cli> $<TARGET_FILE:test_diff>)
set_tests_properties(diff_cli PROPERTIES LABELS "integration;analysis" TIMEOUT 120
  ENVIRONMENT "${TPROF_TEST_ENV}")
