# Core: the recording API through rank files, NVTX injection end to end, and the demo.
tprof_add_unit(test_api test_api.c LIBS trainprof tprof_analysis Threads::Threads LABELS tsan)

if(TPROF_HAVE_NVTX3)
  add_executable(nvtx_prog nvtx_prog.c)
  target_include_directories(nvtx_prog PRIVATE ${TPROF_CUDA_ROOT}/include)
  target_link_libraries(nvtx_prog PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
  tprof_add_unit(test_nvtx test_nvtx.c LIBS ${CJSON_LIBRARY})
  target_compile_definitions(test_nvtx PRIVATE
    TPROF_CLI="$<TARGET_FILE:trainprof_cli>" NVTX_PROG="$<TARGET_FILE:nvtx_prog>")
  add_dependencies(test_nvtx nvtx_prog trainprof_cli trainprof)
  # many registered strings, and past TRAINPROF_NVTX_STRINGS_KB
  add_executable(nvtx_strings_prog nvtx_strings_prog.c)
  target_include_directories(nvtx_strings_prog PRIVATE ${TPROF_CUDA_ROOT}/include)
  target_link_libraries(nvtx_strings_prog PRIVATE ${CMAKE_DL_LIBS} Threads::Threads)
  tprof_add_unit(test_nvtx_strings_run test_nvtx_strings_run.c LIBS ${CJSON_LIBRARY})
  target_compile_definitions(test_nvtx_strings_run PRIVATE
    TPROF_CLI="$<TARGET_FILE:trainprof_cli>" NVTX_STRINGS_PROG="$<TARGET_FILE:nvtx_strings_prog>")
  add_dependencies(test_nvtx_strings_run nvtx_strings_prog trainprof_cli trainprof)
endif()

add_test(NAME demo_char_lm
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/demo_test.sh $<TARGET_FILE:trainprof_cli>
          $<TARGET_FILE:char_lm> ${CMAKE_BINARY_DIR}/testtmp/demo)
set_tests_properties(demo_char_lm PROPERTIES TIMEOUT 300 LABELS "integration"
  ENVIRONMENT "${TPROF_TEST_ENV}")

# the kernel-capture window's step counting (core/kwindow.c)
tprof_add_unit(test_kwindow test_kwindow.c LIBS trainprof tprof_analysis Threads::Threads)

# trainprof run waits for rank-file writers that outlive the command it started
add_test(NAME orphan_writer
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/orphan_writer_test.sh $<TARGET_FILE:trainprof_cli>
          $<TARGET_FILE:char_lm> ${CMAKE_BINARY_DIR}/testtmp/orphan)
set_tests_properties(orphan_writer PROPERTIES TIMEOUT 120 LABELS "cli;no-asan"
  ENVIRONMENT "${TPROF_TEST_ENV}")

# CUPTI's activity buffers, reused and zeroed (capture/bufpool.c); no GPU needed
tprof_add_unit(test_bufpool test_bufpool.c ${CMAKE_SOURCE_DIR}/src/capture/bufpool.c
  LIBS Threads::Threads LABELS tsan)

# NVTX's registered strings: the table compiled in (capture/nvtx_strings.c); two threads at
# once under TSan
tprof_add_unit(test_nvtx_strings test_nvtx_strings.c ${CMAKE_SOURCE_DIR}/src/capture/nvtx_strings.c
  LIBS Threads::Threads LABELS tsan)

# GPU capture windows asked for while the job runs (tprof_gpu_capture_steps, trainprof
# capture; core/kwindow.c, core/capture_ctl.c)
tprof_add_unit(test_capture_trigger test_capture_trigger.c LIBS trainprof tprof_analysis
  Threads::Threads)
target_compile_definitions(test_capture_trigger PRIVATE TPROF_CLI="$<TARGET_FILE:trainprof_cli>")
add_dependencies(test_capture_trigger trainprof_cli)
