# NVTX emission to another attached tool (a fake Nsight) when trainprof does not record.
add_library(fake_nvtx_tool SHARED fake_nvtx_tool.c)
target_include_directories(fake_nvtx_tool PRIVATE ${CMAKE_SOURCE_DIR}/src)
add_executable(emit_prog emit_prog.c)
target_link_libraries(emit_prog PRIVATE trainprof)
add_test(NAME nvtx_emit
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/nvtx_emit_test.sh $<TARGET_FILE:emit_prog>
          $<TARGET_FILE:fake_nvtx_tool> ${CMAKE_BINARY_DIR}/testtmp/emit)
set_tests_properties(nvtx_emit PROPERTIES TIMEOUT 60 LABELS "integration"
  ENVIRONMENT "${TPROF_TEST_ENV}")
