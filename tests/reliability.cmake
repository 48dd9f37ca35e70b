# Reliability tests (included by tests/CMakeLists.txt): signals and fork (test_kill_fork),
# damaged rank files and hostile names (test_damaged_files), both driving the helper program
# rel_victim and the trainprof command, ring stress with exact drop accounting and bounded memory
# (test_stress, also run under ThreadSanitizer by `make check-tsan`), and the command
# line's error paths (cli_errors.sh).

# The program the reliability tests kill, fork and profile; linked with the library so it
# records through the public API whether or not `trainprof run` preloads it.
add_executable(rel_victim ${CMAKE_CURRENT_SOURCE_DIR}/rel_victim.c)
target_link_libraries(rel_victim PRIVATE trainprof Threads::Threads)

# test_kill_fork: signals and fork of a profiled process; test_damaged_files: damaged rank
# files and hostile names. Both drive rel_victim and the command through rel_common.c.
foreach(t test_kill_fork test_damaged_files)
  tprof_add_unit(${t} ${CMAKE_CURRENT_SOURCE_DIR}/${t}.c ${CMAKE_CURRENT_SOURCE_DIR}/rel_common.c
    LIBS tprof_analysis trainprof
    LABELS reliability)
  target_compile_definitions(${t} PRIVATE
    REL_VICTIM="$<TARGET_FILE:rel_victim>"
    TPROF_CLI="$<TARGET_FILE:trainprof_cli>")
  add_dependencies(${t} rel_victim trainprof_cli)
endforeach()

tprof_add_unit(test_stress ${CMAKE_CURRENT_SOURCE_DIR}/test_stress.c
  LIBS tprof_analysis trainprof Threads::Threads
  LABELS stress tsan)

add_test(NAME cli_errors
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli_errors.sh $<TARGET_FILE:trainprof_cli>
          $<TARGET_FILE:rel_victim>)
set_tests_properties(cli_errors PROPERTIES TIMEOUT 120 LABELS "cli"
  ENVIRONMENT "TPROF_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")

# The option spellings getopt_long accepts (-oFILE, --name=VALUE, "--") on every command,
# export's default format, and the "wrote FILE" line of report, export and diff.
add_test(NAME cli_options
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli_options.sh $<TARGET_FILE:trainprof_cli>
          $<TARGET_FILE:rel_victim>)
set_tests_properties(cli_options PROPERTIES TIMEOUT 120 LABELS "cli"
  ENVIRONMENT "TPROF_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")

# The signals a job gets under `trainprof run`, counted by sigcount_prog, against the same
# job bare: a kill of the process group, of the started process alone, a terminal's Ctrl-C
# and Ctrl-Z (cli_signals.sh, driving cli_signals.py on ptys).
add_executable(sigcount_prog ${CMAKE_CURRENT_SOURCE_DIR}/sigcount_prog.c)
add_test(NAME cli_signals
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli_signals.sh $<TARGET_FILE:trainprof_cli>
          $<TARGET_FILE:sigcount_prog>)
set_tests_properties(cli_signals PROPERTIES TIMEOUT 300 LABELS "cli"
  ENVIRONMENT "TPROF_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")

# `trainprof run` preloads libtrainprof into programs that are not built with ASan (sh,
# true) or whose own ASan runtime then loads after the preloaded library; ASan accepts
# that only when told not to insist on being first.
if(TPROF_SANITIZE STREQUAL "address")
  set_property(TEST test_kill_fork test_damaged_files cli_errors cli_options cli_signals APPEND PROPERTY ENVIRONMENT
    "ASAN_OPTIONS=verify_asan_link_order=0")
endif()

# The concurrency tests again with every core kept busy by spinning processes; run alone, so
# that the load is the one it sets. Not under ASan (it only repeats the plain build's tests).
add_test(NAME suite_under_load COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/suite_under_load.sh ${CMAKE_BINARY_DIR})
set_tests_properties(suite_under_load PROPERTIES TIMEOUT 600 RUN_SERIAL TRUE
  LABELS "tsan;load;no-asan")

# The commands that make reports, each allocation refused in turn through an LD_PRELOAD
# library (alloc_fail.c): every outcome the whole output, one that says memory ran out, or an
# error that leaves the previous output. Not under the sanitizers, whose runtime owns malloc.
if(NOT TPROF_SANITIZE)
  add_library(alloc_fail SHARED ${CMAKE_CURRENT_SOURCE_DIR}/alloc_fail.c)
  add_test(NAME cli_nomem
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli_nomem.sh $<TARGET_FILE:trainprof_cli>
            $<TARGET_FILE:rel_victim> $<TARGET_FILE:alloc_fail>)
  set_tests_properties(cli_nomem PROPERTIES TIMEOUT 300 LABELS "cli"
    ENVIRONMENT "TPROF_TEST_TMP=${CMAKE_BINARY_DIR}/testtmp")
endif()
