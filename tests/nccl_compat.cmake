# NCCL profiler plugin structs v1, v2, v3 and v6 (src/capture/nccl_compat.c): the test plays
# NCCL, calling the ncclProfiler_vN entry points found by dlsym with synthetic descriptors.
# No GPU, no NCCL.
tprof_add_unit(test_nccl_compat ${CMAKE_CURRENT_LIST_DIR}/test_nccl_compat.c
  LIBS trainprof tprof_analysis Threads::Threads ${CMAKE_DL_LIBS} LABELS "tsan;nccl")
