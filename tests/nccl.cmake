# NCCL profiler plugin (src/capture/nccl_plugin.c): the test plays NCCL, calling the
# ncclProfiler_v5/v4 entry points found by dlsym with synthetic descriptors. No GPU, no NCCL.
tprof_add_unit(test_nccl ${CMAKE_CURRENT_LIST_DIR}/test_nccl.c
  LIBS trainprof tprof_analysis Threads::Threads ${CMAKE_DL_LIBS} LABELS "tsan;nccl")
