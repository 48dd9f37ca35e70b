# Perfetto protobuf export (src/export/perfetto.c) and its encoder (src/export/pb.c): the
# encoder against hand-made bytes, the events equal to the Chrome export's of the same
# synthetic run; protoc's decoding against tests/data/perfetto/trace_subset.proto (skipped,
# 77, without protoc); the perfetto Python package's full trace proto and trace processor
# (skipped without the package; it is no dependency).
tprof_add_unit(test_perfetto
  ${CMAKE_CURRENT_LIST_DIR}/test_perfetto.c
  ${CMAKE_CURRENT_LIST_DIR}/export_same.c
  ${CMAKE_CURRENT_LIST_DIR}/synth.c
  LIBS tprof_analysis LABELS export)
add_test(NAME perfetto_protoc
  COMMAND test_perfetto --protoc ${CMAKE_CURRENT_LIST_DIR}/data/perfetto/trace_subset.proto)
set_tests_properties(perfetto_protoc PROPERTIES TIMEOUT 120 LABELS "unit;export"
  SKIP_RETURN_CODE 77 ENVIRONMENT "${TPROF_TEST_ENV}")
add_test(NAME perfetto_python
  COMMAND test_perfetto --python ${CMAKE_CURRENT_LIST_DIR}/perfetto_python_check.py)
set_tests_properties(perfetto_python PROPERTIES TIMEOUT 300 LABELS "unit;export"
  SKIP_RETURN_CODE 77 ENVIRONMENT "${TPROF_TEST_ENV}")
# The same with the writer's name table capped at a few names (perfetto.c's
# TP_PERFETTO_NAMES_MAX_BYTES): past the cap the interned state is cleared and names interned
# anew; the trace still holds the Chrome trace's events with their names.
tprof_add_unit(test_perfetto_names_cap
  ${CMAKE_CURRENT_LIST_DIR}/test_perfetto.c
  ${CMAKE_CURRENT_LIST_DIR}/export_same.c
  ${CMAKE_SOURCE_DIR}/src/export/perfetto.c
  ${CMAKE_CURRENT_LIST_DIR}/synth.c
  LIBS tprof_analysis LABELS export)
target_compile_definitions(test_perfetto_names_cap PRIVATE TP_PERFETTO_NAMES_MAX_BYTES=64)
