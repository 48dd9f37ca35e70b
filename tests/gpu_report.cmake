# What the report and the exports believe of GPU records and NVML samples (clipping to the
# streams' order, energy methods, GPU identity by UUID and MIG), on synthetic runs.
tprof_add_unit(test_gpu_report
  ${CMAKE_CURRENT_LIST_DIR}/test_gpu_report.c
  ${CMAKE_CURRENT_LIST_DIR}/synth.c
  LIBS tprof_analysis LABELS report)
# The report over the steps in which GPU activity was recorded (a kernel-capture window,
# pauses for another CUPTI client): GPU figures, findings and the capture's cost.
tprof_add_unit(test_capture_window
  ${CMAKE_CURRENT_LIST_DIR}/test_capture_window.c
  ${CMAKE_CURRENT_LIST_DIR}/synth.c
  LIBS tprof_analysis LABELS report)
# A rank section bounded in GPU records: the span held, exactly; the steps counted; the
# figures against the whole section's.
tprof_add_unit(test_gpu_bound
  ${CMAKE_CURRENT_LIST_DIR}/test_gpu_bound.c
  ${CMAKE_CURRENT_LIST_DIR}/synth.c
  LIBS tprof_analysis LABELS report)
