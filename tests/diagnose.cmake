# The run-level analyses (src/analysis/breakdown.c, clocks.c, mfu.c, diagnose.c): the step
# breakdown, clock alignment, FLOPs/MFU, stragglers and every diagnosis rule, on synthetic runs.
tprof_add_unit(test_diagnose
  ${CMAKE_CURRENT_LIST_DIR}/test_diagnose.c
  ${CMAKE_CURRENT_LIST_DIR}/synth.c
  LIBS tprof_analysis LABELS diagnose)
