# Chrome/Kineto JSON exporter tests (src/export/chrome.c), on synthetic rank files written
# by tests/synth.c, which other areas' tests may reuse.
tprof_add_unit(test_chrome
  ${CMAKE_CURRENT_LIST_DIR}/test_chrome.c
  ${CMAKE_CURRENT_LIST_DIR}/synth.c
  LIBS tprof_analysis LABELS export)
