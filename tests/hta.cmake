# HTA (Holistic Trace Analysis) reading `trainprof export --format chrome --per-rank` as it
# reads torch.profiler's traces: tests/hta/hta_test.sh makes a venv with the pinned
# tests/hta/requirements.txt (skips, 77, when PyPI is unreachable), exports the synthetic run
# of tests/hta_run.h and runs tests/hta/hta_check.py on the rank files.
add_executable(hta_synth_prog ${CMAKE_CURRENT_LIST_DIR}/hta/hta_synth_prog.c
  ${CMAKE_CURRENT_LIST_DIR}/hta_run.c ${CMAKE_CURRENT_LIST_DIR}/synth.c)
target_include_directories(hta_synth_prog PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(hta_synth_prog PRIVATE tprof_analysis)
add_test(NAME hta_export COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/hta/hta_test.sh
  $<TARGET_FILE:trainprof_cli> $<TARGET_FILE:hta_synth_prog> ${CMAKE_BINARY_DIR}/hta)
set_tests_properties(hta_export PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77 LABELS "export;python"
  ENVIRONMENT "${TPROF_TEST_ENV}")
