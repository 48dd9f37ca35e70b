# PyTorch: examples/pytorch/train_gpt.py as two gloo ranks on CPU under `trainprof run`.
# Needs a Python with torch (Debian's python3-torch for /usr/bin/python3, or
# TPROF_TORCH_PYTHON); without one the script exits 77 and ctest reports the test as skipped.
# Sanitizer builds: the interpreter is not instrumented. Under ASan the preloaded runtime
# works but CPython and torch never free what they keep to the end, so leak checking is off
# for this test; TSan cannot start when its runtime is not loaded first, so no test there.
if(NOT TPROF_SANITIZE STREQUAL "thread")
  set(train_gpt_env "${TPROF_TEST_ENV}")
  if(TPROF_SANITIZE STREQUAL "address")
    list(FILTER train_gpt_env EXCLUDE REGEX "^ASAN_OPTIONS=")
    list(APPEND train_gpt_env "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0")
  endif()
  add_test(NAME train_gpt_gloo
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/train_gpt_test.sh $<TARGET_FILE:trainprof_cli>
            ${CMAKE_SOURCE_DIR}/examples/pytorch/train_gpt.py ${CMAKE_BINARY_DIR}/testtmp/train_gpt)
  set_tests_properties(train_gpt_gloo PROPERTIES TIMEOUT 240 LABELS "integration;pytorch"
    SKIP_RETURN_CODE 77 ENVIRONMENT "${train_gpt_env}")
endif()

# `trainprof run --python`: zero-code-change trainprof.torch on two gloo ranks of
# train_gpt.py, the report's steps, breakdown and all-reduce bytes asserted, and the final
# losses compared bit for bit with a run without it. no-asan: torch 1.13's gloo threads under
# a preloaded ASan runtime abort at exit now and then (tests/python.cmake), never in trainprof.
if(NOT TPROF_SANITIZE AND TPROF_HAVE_PYTHON)
  add_test(NAME torch_run_python
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/torch_run_test.sh $<TARGET_FILE:trainprof_cli>
            ${CMAKE_SOURCE_DIR}/examples/pytorch/train_gpt.py
            ${CMAKE_CURRENT_SOURCE_DIR}/torch_launch.sh ${CMAKE_BINARY_DIR}/testtmp/torch_run)
  set_tests_properties(torch_run_python PROPERTIES TIMEOUT 240
    LABELS "integration;pytorch;python;no-asan" SKIP_RETURN_CODE 77
    ENVIRONMENT "${TPROF_TEST_ENV}")
endif()
