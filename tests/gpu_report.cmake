# What the report and the exports believe of GPU records and NVML samples (clipping to the
# streams' order, energy methods, GPU identity by UUID and MIG), on synthetic runs.
tprof_add_unit(test_gpu_report
  ${CMAKE_CURRENT_LIST_DIR}/test_gpu_report.c
  ${CMAKE_CURRENT_LIST_DIR}/synth.c
  LIBS tprof_analysis LABELS report)
