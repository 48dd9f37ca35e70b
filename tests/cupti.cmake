# GPU activity capture (capture/cupti.c) against a scripted libcupti (fake_cupti.c) chosen with
# TRAINPROF_CUPTI_LIB: set-up, back-off lines and record translation without a GPU. Built where
# the library has CUPTI capture, i.e. where the CUDA toolkit's cupti.h exists.
if(EXISTS ${TPROF_CUDA_ROOT}/include/cupti.h)
  add_library(fake_cupti SHARED fake_cupti.c)
  target_include_directories(fake_cupti PRIVATE ${TPROF_CUDA_ROOT}/include)
  set_target_properties(fake_cupti PROPERTIES C_VISIBILITY_PRESET hidden)
  # the same fake under a libcupti name with another version suffix, as a process (torch)
  # may have mapped it before CUDA starts: trainprof must use that copy
  add_library(fake_cupti_mapped SHARED fake_cupti.c)
  target_include_directories(fake_cupti_mapped PRIVATE ${TPROF_CUDA_ROOT}/include)
  set_target_properties(fake_cupti_mapped PROPERTIES C_VISIBILITY_PRESET hidden OUTPUT_NAME cupti
    SUFFIX ".so.99" LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/mapped-cupti)
  tprof_add_unit(test_cupti test_cupti.c LIBS trainprof tprof_analysis Threads::Threads
                 ${CMAKE_DL_LIBS} LABELS tsan)
  target_compile_definitions(test_cupti PRIVATE FAKE_CUPTI_PATH="$<TARGET_FILE:fake_cupti>"
    MAPPED_CUPTI_PATH="$<TARGET_FILE:fake_cupti_mapped>" FAKE_CUDA_PATH="$<TARGET_FILE:fake_cuda>")
  # cupti.h: the callback ids and results the failed-allocation scenario gives the fake
  target_include_directories(test_cupti PRIVATE ${TPROF_CUDA_ROOT}/include)
  add_dependencies(test_cupti fake_cupti fake_cupti_mapped fake_cuda)
  # another CUPTI client of the program (the hand-over through libtrainprof's definitions)
  tprof_add_unit(test_cupti_foreign test_cupti_foreign.c LIBS trainprof tprof_analysis
                 Threads::Threads ${CMAKE_DL_LIBS} LABELS tsan)
  target_compile_definitions(test_cupti_foreign PRIVATE FAKE_CUPTI_PATH="$<TARGET_FILE:fake_cupti>"
    MAPPED_CUPTI_PATH="$<TARGET_FILE:fake_cupti_mapped>" FAKE_CUDA_PATH="$<TARGET_FILE:fake_cuda>")
  target_include_directories(test_cupti_foreign PRIVATE ${TPROF_CUDA_ROOT}/include)
  add_dependencies(test_cupti_foreign fake_cupti fake_cupti_mapped fake_cuda)
  # CUPTI shared with that client: its calls from CUPTI's callbacks, its clock, its windows
  tprof_add_unit(test_cupti_share test_cupti_share.c LIBS trainprof tprof_analysis
                 Threads::Threads ${CMAKE_DL_LIBS} LABELS tsan)
  target_compile_definitions(test_cupti_share PRIVATE FAKE_CUPTI_PATH="$<TARGET_FILE:fake_cupti>"
    MAPPED_CUPTI_PATH="$<TARGET_FILE:fake_cupti_mapped>" FAKE_CUDA_PATH="$<TARGET_FILE:fake_cuda>")
  target_include_directories(test_cupti_share PRIVATE ${TPROF_CUDA_ROOT}/include)
  add_dependencies(test_cupti_share fake_cupti fake_cupti_mapped fake_cuda)
endif()
