# The communication analysis (src/analysis/comm.c) and its Chrome tracks, on synthetic runs
# with known answers.
tprof_add_unit(test_comm
  ${CMAKE_CURRENT_LIST_DIR}/test_comm.c
  ${CMAKE_CURRENT_LIST_DIR}/synth.c
  LIBS tprof_analysis LABELS comm)
