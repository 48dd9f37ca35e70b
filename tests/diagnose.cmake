# The run-level analyses (src/analysis/breakdown.c, clocks.c, mfu.c, diagnose.c): the step
# breakdown, clock alignment, FLOPs/MFU, stragglers and every diagnosis rule, on synthetic runs.
tprof_add_unit(test_diagnose
  ${CMAKE_CURRENT_LIST_DIR}/test_diagnose.c
  ${CMAKE_CURRENT_LIST_DIR}/diag_scen.c
  ${CMAKE_CURRENT_LIST_DIR}/synth.c
  LIBS tprof_analysis LABELS diagnose)

# The report's headline (src/analysis/findings.c): each rule's finding leads the text, JSON and
# HTML on the job where it fires; "no bottleneck found" with the figures on a clean one.
tprof_add_unit(test_headline
  ${CMAKE_CURRENT_LIST_DIR}/test_headline.c
  ${CMAKE_CURRENT_LIST_DIR}/diag_scen.c
  ${CMAKE_CURRENT_LIST_DIR}/synth.c
  LIBS tprof_analysis LABELS diagnose)

# The merge's matching rules (src/analysis/clocks.c): a collective is a key seen on two ranks
# or more, each rank arriving once with its first op of the key; send/recv, unknown and
# unfinished ops never match; the start lags per rank drawn from them, in and out of windows.
tprof_add_unit(test_clocks_match
  ${CMAKE_CURRENT_LIST_DIR}/test_clocks_match.c
  ${CMAKE_CURRENT_LIST_DIR}/synth.c
  LIBS tprof_analysis LABELS diagnose)
