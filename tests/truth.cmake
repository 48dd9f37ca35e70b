# What the report says is true: process ranges across threads, unterminated ranges, orphan
# pops per thread, valid UTF-8 text with marked cuts, impossible figures flagged, steps
# touched by ring drops flagged, torch.distributed ops of every backend counted (synthetic
# runs with known answers).
tprof_add_unit(test_truth
  ${CMAKE_CURRENT_LIST_DIR}/test_truth.c
  ${CMAKE_CURRENT_LIST_DIR}/synth.c
  LIBS tprof_analysis LABELS report)
