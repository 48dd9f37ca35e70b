# The conventions and the layers (scripts/lint.py; docs/design.md §2.3, §6): line length,
# tracker references, the public prefix, includes across layers, file and function sizes,
# bare -1 beside the error codes. Reads the source tree only, in well under a second;
# `ctest -L lint` runs it alone.
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  add_test(NAME lint COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/scripts/lint.py
           --root ${CMAKE_SOURCE_DIR})
  set_tests_properties(lint PROPERTIES TIMEOUT 60 LABELS "lint")
  # the size and minus-one checks each fail on a violation planted in a scratch tree
  add_test(NAME lint_rules COMMAND ${Python3_EXECUTABLE}
           ${CMAKE_CURRENT_SOURCE_DIR}/lint_rules_test.py ${CMAKE_SOURCE_DIR}/scripts/lint.py
           ${CMAKE_BINARY_DIR}/testtmp)
  set_tests_properties(lint_rules PROPERTIES TIMEOUT 60 LABELS "lint")
else()
  message(WARNING "trainprof: no Python 3 interpreter: the lint test (scripts/lint.py) left out")
endif()
