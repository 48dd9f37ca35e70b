# The conventions and the layers (scripts/lint.py; docs/design.md §2.3, §6): line length,
# tracker references, the public prefix, includes across layers. Reads the source tree only,
# in well under a second; `ctest -L lint` runs it alone.
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  add_test(NAME lint COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/scripts/lint.py
           --root ${CMAKE_SOURCE_DIR})
  set_tests_properties(lint PROPERTIES TIMEOUT 60 LABELS "lint")
else()
  message(WARNING "trainprof: no Python 3 interpreter: the lint test (scripts/lint.py) left out")
endif()
