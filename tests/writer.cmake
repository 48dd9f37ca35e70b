# The rank file's writer (core/writer.c) against a program that closes and reuses its
# descriptors, storage that blocks, a file size limit and a full disk (test_writer, whose
# own writev() stands in for failing storage).
tprof_add_unit(test_writer ${CMAKE_CURRENT_SOURCE_DIR}/test_writer.c
  LIBS trainprof tprof_analysis Threads::Threads ${CJSON_LIBRARY} ${CMAKE_DL_LIBS}
  LABELS reliability tsan)

# A job whose descriptor table stays full: `trainprof run` names the process that could not
# create its rank file; a report that cannot be written is named as such.
add_executable(nofile_prog nofile_prog.c)
target_link_libraries(nofile_prog PRIVATE trainprof)
add_test(NAME nofile_run
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/nofile_run_test.sh $<TARGET_FILE:trainprof_cli>
          $<TARGET_FILE:nofile_prog> $<TARGET_FILE:char_lm> ${CMAKE_BINARY_DIR}/testtmp/nofile)
set_tests_properties(nofile_run PROPERTIES TIMEOUT 120 LABELS "cli"
  ENVIRONMENT "${TPROF_TEST_ENV}")
