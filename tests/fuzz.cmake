# Fuzz targets (tests/fuzz/README.md): one per reader of input from outside the process —
# rank files through the report, export and diff (fuzz_rankfile), an endpoint's /metrics
# answer through `trainprof top` (fuzz_metrics), a report.json read back by `trainprof diff`
# (fuzz_report_json), a torch.profiler trace through the same (fuzz_kineto), the bodies of a
# rank file's summary through their decoders (fuzz_summary). Each keeps its corpus in
# tests/fuzz/corpus/<target>: seeds made from real files and every input that once found a bug.
#
# Every build: fuzz_replay_<target> runs the plain driver (fuzz_main.c) over the corpus; in
# the ASan+UBSan build a crash, a memory error or undefined behaviour on a kept input fails it.
# The normal build also has fuzz_run_<target>: the libFuzzer binary (built by clang in
# <build>/fuzz, `cmake --build build --target fuzzers`, which `make check` does) replays the
# corpus and then fuzzes for TPROF_FUZZ_SECONDS (15) seconds; skipped (77) without clang and
# its fuzzer runtime, or when the fuzzers were not built.
set(TPROF_FUZZ_TARGETS rankfile metrics report_json kineto summary)
set(fuzz_src_rankfile fuzz/fuzz_rankfile.c)
set(fuzz_libs_rankfile tprof_analysis)
set(fuzz_src_metrics fuzz/fuzz_metrics.c ${CMAKE_SOURCE_DIR}/cli/top_parse.c
  ${CMAKE_SOURCE_DIR}/cli/options.c)
set(fuzz_libs_metrics m)
set(fuzz_src_report_json fuzz/fuzz_report_json.c)
set(fuzz_libs_report_json tprof_analysis)
set(fuzz_src_kineto fuzz/fuzz_kineto.c)
set(fuzz_libs_kineto tprof_analysis)
set(fuzz_src_summary fuzz/fuzz_summary.c)
set(fuzz_libs_summary tprof_analysis)

if(TPROF_SANITIZE STREQUAL "thread")
  return() # nothing here is concurrent: the TSan build leaves them out
endif()
# What the reader and the model make of out-of-range claims (exact outcomes).
if(NOT TPROF_SANITIZE STREQUAL "fuzzer")
  tprof_add_unit(test_reader_bounds test_reader_bounds.c synth.c LIBS tprof_analysis LABELS analysis)
endif()
if(TPROF_SANITIZE STREQUAL "fuzzer")
  add_custom_target(tprof_fuzzers)
endif()
# As in the libFuzzer runs (run_fuzz.sh): one allocation above 128 MiB for an input of a few
# KiB is a reader believing a size or an id it read; ASan makes it an error.
set(fuzz_replay_env "${TPROF_TEST_ENV}")
if(TPROF_SANITIZE STREQUAL "address")
  list(TRANSFORM fuzz_replay_env REPLACE "^ASAN_OPTIONS=(.*)$"
       "ASAN_OPTIONS=\\1:max_allocation_size_mb=128:allocator_may_return_null=0")
endif()
foreach(t ${TPROF_FUZZ_TARGETS})
  if(TPROF_SANITIZE STREQUAL "fuzzer")
    add_executable(fuzz_${t} ${fuzz_src_${t}})
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
    add_dependencies(tprof_fuzzers fuzz_${t})
  else()
    add_executable(fuzz_${t} ${fuzz_src_${t}} fuzz/fuzz_main.c)
    add_test(NAME fuzz_replay_${t}
      COMMAND fuzz_${t} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${t})
    set_tests_properties(fuzz_replay_${t} PROPERTIES TIMEOUT 300 LABELS "fuzz"
      ENVIRONMENT "${fuzz_replay_env}")
  endif()
  target_include_directories(fuzz_${t} PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/cli)
  target_link_libraries(fuzz_${t} PRIVATE ${fuzz_libs_${t}})
endforeach()

# The libFuzzer runs: a clang build of the fuzz targets beside this one (the normal build
# only; the sanitizer builds replay the corpus above).
if(TPROF_SANITIZE STREQUAL "")
  set(fuzz_why "")
  find_program(TPROF_FUZZ_CC NAMES clang clang-16 clang-15 clang-14)
  if(NOT TPROF_FUZZ_CC)
    set(fuzz_why "no clang (apt-get install clang libclang-rt-14-dev)")
  else()
    set(probe_dir ${CMAKE_BINARY_DIR}/fuzz-probe)
    file(WRITE ${probe_dir}/probe.c "#include <stddef.h>\n#include <stdint.h>\n"
      "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return d && n > 1 && d[0] == 1; }\n")
    execute_process(COMMAND ${TPROF_FUZZ_CC} -fsanitize=fuzzer,address,undefined probe.c -o probe
      WORKING_DIRECTORY ${probe_dir} RESULT_VARIABLE probe_rc OUTPUT_QUIET ERROR_QUIET)
    if(NOT probe_rc EQUAL 0)
      set(fuzz_why "${TPROF_FUZZ_CC} cannot link libFuzzer with ASan and UBSan (apt-get install libclang-rt-14-dev)")
    endif()
  endif()
  if(fuzz_why STREQUAL "")
    include(ExternalProject)
    # $(MAKE) keeps the outer make's job server (and -j) for the inner build
    if(CMAKE_GENERATOR MATCHES "Make")
      set(fuzz_build_cmd $(MAKE) tprof_fuzzers)
    else()
      set(fuzz_build_cmd ${CMAKE_COMMAND} --build <BINARY_DIR> --target tprof_fuzzers)
    endif()
    ExternalProject_Add(tprof_fuzz_build
      SOURCE_DIR ${CMAKE_SOURCE_DIR}
      BINARY_DIR ${CMAKE_BINARY_DIR}/fuzz
      CMAKE_ARGS -DCMAKE_C_COMPILER=${TPROF_FUZZ_CC} -DTPROF_SANITIZE=fuzzer
                 -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPROF_BUILD_BENCH=OFF -DTPROF_BUILD_PYTHON=OFF
      BUILD_COMMAND ${fuzz_build_cmd}
      INSTALL_COMMAND ""
      BUILD_ALWAYS ON
      EXCLUDE_FROM_ALL ON)
    add_custom_target(fuzzers DEPENDS tprof_fuzz_build)
    message(STATUS "trainprof: ${TPROF_FUZZ_CC} has libFuzzer: `cmake --build ${CMAKE_BINARY_DIR} --target fuzzers` builds the fuzz targets")
  else()
    add_custom_target(fuzzers COMMAND ${CMAKE_COMMAND} -E echo "trainprof: fuzz targets not built: ${fuzz_why}")
    message(STATUS "trainprof: fuzz runs left out: ${fuzz_why}")
  endif()
  foreach(t ${TPROF_FUZZ_TARGETS})
    add_test(NAME fuzz_run_${t}
      COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run_fuzz.sh ${CMAKE_BINARY_DIR}/fuzz/tests/fuzz_${t}
              ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${t} "${fuzz_why}")
    set_tests_properties(fuzz_run_${t} PROPERTIES TIMEOUT 300 LABELS "fuzz;no-asan"
      SKIP_RETURN_CODE 77 ENVIRONMENT "${TPROF_TEST_ENV}")
  endforeach()
endif()
