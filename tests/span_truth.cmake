# A rank without measured steps bounded in GPU records (--gpu-records): each "per": "span"
# figure of the report against a whole load's records of the span, on generated runs of many
# record kinds (tests/span_truth: gens.c writes them, truth.c counts what began in the span,
# check.py compares, cases.sh lists the cases).
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  foreach(tool gens truth)
    add_executable(span_truth_${tool} ${CMAKE_CURRENT_LIST_DIR}/span_truth/${tool}.c
                   ${CMAKE_CURRENT_LIST_DIR}/synth.c)
    target_include_directories(span_truth_${tool} PRIVATE ${CMAKE_SOURCE_DIR}/src
                               ${CMAKE_SOURCE_DIR}/tests)
    target_link_libraries(span_truth_${tool} PRIVATE tprof_analysis)
  endforeach()
  add_test(NAME span_truth
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/span_truth/cases.sh
                   $<TARGET_FILE:span_truth_gens> $<TARGET_FILE:span_truth_truth>
                   $<TARGET_FILE:trainprof_cli> ${CMAKE_BINARY_DIR}/testtmp/span_truth)
  set_tests_properties(span_truth PROPERTIES TIMEOUT 300 LABELS "report"
    ENVIRONMENT "${TPROF_TEST_ENV};PYTHON=${Python3_EXECUTABLE}")
else()
  message(WARNING "trainprof: no Python 3 interpreter: the span_truth test left out")
endif()
