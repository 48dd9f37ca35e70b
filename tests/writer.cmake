# The rank file's writer (core/writer.c) against a program that closes and reuses its
# descriptors, storage that blocks, a file size limit and a full disk (test_writer, whose
# own writev() stands in for failing storage).
tprof_add_unit(test_writer ${CMAKE_CURRENT_SOURCE_DIR}/test_writer.c
  LIBS trainprof tprof_analysis Threads::Threads ${CJSON_LIBRARY} ${CMAKE_DL_LIBS}
  LABELS reliability tsan)
