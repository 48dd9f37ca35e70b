# Chrome/Kineto JSON exporter tests (src/export/chrome.c), on synthetic rank files written
# by tests/synth.c, which other areas' tests may reuse.
tprof_add_unit(test_chrome
  ${CMAKE_CURRENT_LIST_DIR}/test_chrome.c
  ${CMAKE_CURRENT_LIST_DIR}/export_same.c
  ${CMAKE_CURRENT_LIST_DIR}/synth.c
  LIBS tprof_analysis LABELS export)
# The per-rank file as HTA reads it, on tests/hta_run.h's run (HTA itself: hta.cmake).
tprof_add_unit(test_chrome_hta
  ${CMAKE_CURRENT_LIST_DIR}/test_chrome_hta.c
  ${CMAKE_CURRENT_LIST_DIR}/export_same.c
  ${CMAKE_CURRENT_LIST_DIR}/hta_run.c
  ${CMAKE_CURRENT_LIST_DIR}/synth.c
  LIBS tprof_analysis LABELS export)
# The files the command writes: .gz/.zst output decompressed (zlib, libzstd) against the plain
# bytes, and unusable clock pairs named (test_export_cli drives build/trainprof).
tprof_add_unit(test_export_cli
  ${CMAKE_CURRENT_LIST_DIR}/test_export_cli.c
  ${CMAKE_CURRENT_LIST_DIR}/synth.c
  LIBS tprof_analysis LABELS export)
target_compile_definitions(test_export_cli PRIVATE
  TPROF_CLI="$<TARGET_FILE:trainprof_cli>"
  TPROF_HAVE_ZSTD=$<BOOL:${TPROF_HAVE_ZSTD}>)
add_dependencies(test_export_cli trainprof_cli)
# The exports of a run read slim are those of the run read whole, byte for byte
# (tests/export_same.c, also run by the tests above on their runs).
tprof_add_unit(test_export_slim
  ${CMAKE_CURRENT_LIST_DIR}/test_export_slim.c
  ${CMAKE_CURRENT_LIST_DIR}/export_same.c
  ${CMAKE_CURRENT_LIST_DIR}/hta_run.c
  ${CMAKE_CURRENT_LIST_DIR}/diag_scen.c
  ${CMAKE_CURRENT_LIST_DIR}/synth.c
  LIBS tprof_analysis LABELS export)
target_compile_definitions(test_export_slim PRIVATE TPROF_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
# A rank file changed between the slim load and its whole reads (truncated, deleted).
tprof_add_unit(test_export_changed
  ${CMAKE_CURRENT_LIST_DIR}/test_export_changed.c
  ${CMAKE_CURRENT_LIST_DIR}/synth.c
  LIBS tprof_analysis LABELS export)
