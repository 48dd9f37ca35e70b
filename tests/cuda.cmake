# trainprof and the CUDA driver a program loads itself (capture/cuda_devices.c, the Timers'
# CUDA events) against a scripted driver (fake_cuda.c) built as libcuda.so.1 in a directory
# of its own, which the test maps as a CUDA program would map the real one.
add_library(fake_cuda SHARED fake_cuda.c)
set_target_properties(fake_cuda PROPERTIES C_VISIBILITY_PRESET hidden OUTPUT_NAME cuda
  SUFFIX ".so.1" LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fake-cuda)
tprof_add_unit(test_cuda test_cuda.c LIBS trainprof tprof_analysis Threads::Threads
               ${CMAKE_DL_LIBS} m LABELS tsan)
target_compile_definitions(test_cuda PRIVATE FAKE_CUDA_PATH="$<TARGET_FILE:fake_cuda>")
add_dependencies(test_cuda fake_cuda)
# a plain dlopen("libcuda.so.1") would find the fake: the 'not loaded' check can fail
set_property(TEST test_cuda APPEND PROPERTY ENVIRONMENT
  "LD_LIBRARY_PATH=${CMAKE_CURRENT_BINARY_DIR}/fake-cuda")
