# The communication analysis (src/analysis/comm.c) and its Chrome tracks, on synthetic runs
# with known answers.
# test_comm_times: each collective's times, bandwidth, duration sources, kernel channels;
# test_comm_groups: communicators across ranks, findings, runs without communication, Chrome.
foreach(t test_comm_times test_comm_groups)
  tprof_add_unit(${t}
    ${CMAKE_CURRENT_LIST_DIR}/${t}.c
    ${CMAKE_CURRENT_LIST_DIR}/comm_synth.c
    ${CMAKE_CURRENT_LIST_DIR}/synth.c
    LIBS tprof_analysis LABELS comm)
endforeach()
# test_idmap: the communicators' numbering (src/analysis/idmap.h) under crafted ids.
tprof_add_unit(test_idmap ${CMAKE_CURRENT_LIST_DIR}/test_idmap.c LIBS tprof_analysis LABELS comm)
