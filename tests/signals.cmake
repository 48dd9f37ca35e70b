# Signals (included by tests/CMakeLists.txt): the job's dispositions and flags kept exactly,
# the rank file finished on every signal that ends the process, the job ended with a killed
# `trainprof run`, and the report's ranks that ended early (test_signals, driving
# tests/sig_victim.c with and without libtrainprof preloaded).

# Not linked with libtrainprof: its reference run must have no trainprof at all. Built
# without UBSan's checks, so that its faults are the hardware's, as in a plain build.
add_executable(sig_victim ${CMAKE_CURRENT_SOURCE_DIR}/sig_victim.c)
target_link_libraries(sig_victim PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
target_compile_options(sig_victim PRIVATE -fno-sanitize=undefined)

tprof_add_unit(test_signals ${CMAKE_CURRENT_SOURCE_DIR}/test_signals.c
  ${CMAKE_CURRENT_SOURCE_DIR}/synth.c
  LIBS tprof_analysis trainprof
  LABELS reliability)
# what `trainprof run` preloads; an uninstrumented program (python3) in a sanitizer build
# needs the sanitizer's runtime ahead of the instrumented library
set(sig_preload "$<TARGET_FILE:trainprof>")
set(sig_san 0)
if(TPROF_SANITIZE STREQUAL "address")
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
    OUTPUT_VARIABLE sig_libasan OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(sig_preload "${sig_libasan}:${sig_preload}")
  set(sig_san 1)
endif()
set(sig_python "")
if(Python3_Interpreter_FOUND)
  set(sig_python "${Python3_EXECUTABLE}") # the CPython cases are skipped without one
endif()
target_compile_definitions(test_signals PRIVATE
  SIG_VICTIM="$<TARGET_FILE:sig_victim>"
  TPROF_PRELOAD="${sig_preload}"
  TPROF_PYTHON="${sig_python}"
  SIG_SANITIZER_PRELOADED=${sig_san}
  TPROF_CLI="$<TARGET_FILE:trainprof_cli>")
add_dependencies(test_signals sig_victim trainprof_cli)
set_tests_properties(test_signals PROPERTIES TIMEOUT 300)
