# The Python module (python/, docs/python.md): unittest files in tests/python/, each run by
# the interpreter the module was built for (/usr/bin/python3 by default) with
# PYTHONPATH=<build>/python. Registered only when CMake built the module (Python
# development headers found). test_torch_gloo exits 77 (skipped) without torch.
# Under ASan the interpreter is not instrumented, so the sanitizer runtime is preloaded
# (libasan first, as its interceptors require; libstdc++ with it, so that ASan finds the
# real __cxa_throw when torch's C++ threads throw) and leak checking is off: CPython keeps its
# objects to the end by design. TSan cannot run inside an uninstrumented interpreter
# started that way; check-tsan runs only the tsan-labelled tests, so none is labelled.
if(TPROF_HAVE_PYTHON)
  set(py_env "${TPROF_TEST_ENV}")
  list(APPEND py_env "PYTHONPATH=${CMAKE_BINARY_DIR}/python" "PYTHONDONTWRITEBYTECODE=1"
       "TPROF_CLI=$<TARGET_FILE:trainprof_cli>" "FAKE_CUDA=$<TARGET_FILE:fake_cuda>")
  if(TPROF_SANITIZE STREQUAL "address")
    execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
      OUTPUT_VARIABLE tprof_libasan OUTPUT_STRIP_TRAILING_WHITESPACE)
    execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libstdc++.so
      OUTPUT_VARIABLE tprof_libstdcxx OUTPUT_STRIP_TRAILING_WHITESPACE)
    get_filename_component(tprof_libstdcxx "${tprof_libstdcxx}" REALPATH)
    list(FILTER py_env EXCLUDE REGEX "^ASAN_OPTIONS=")
    list(APPEND py_env "LD_PRELOAD=${tprof_libasan}:${tprof_libstdcxx}"
         "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0")
  endif()
  foreach(t ranges timers process megatron torch_gloo torch_instrument memory profiler_handover)
    add_test(NAME python_${t}
      COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/python/test_${t}.py)
    set_tests_properties(python_${t} PROPERTIES TIMEOUT 240 LABELS "python"
      SKIP_RETURN_CODE 77 ENVIRONMENT "${py_env}")
  endforeach()
  # torch 1.13's gloo threads under a preloaded, uninstrumented ASan runtime: about one run
  # in three aborted at exit ("terminate called without an active exception") inside torch,
  # never in trainprof's code; the plain build runs it
  set_tests_properties(python_torch_gloo python_torch_instrument PROPERTIES LABELS "python;no-asan")
  # the wheel (pyproject.toml, scripts/build-wheel.sh) for each Python 3.10-3.13 here, each in
  # a fresh venv, and `run --python` never hiding the program's own module. One wheel build
  # per Python: the timeout leaves room for a loaded machine; pip's downloads, the
  # auditwheel venv and the ccache are kept in testtmp. Skipped (77) without PyPI.
  if(NOT TPROF_SANITIZE)
    add_test(NAME python_wheel
      COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/python/wheel_test.sh ${Python3_EXECUTABLE}
              ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR} ${CMAKE_BINARY_DIR}/testtmp/python-wheel)
    set_tests_properties(python_wheel PROPERTIES TIMEOUT 900 LABELS "python"
      SKIP_RETURN_CODE 77 ENVIRONMENT "${TPROF_TEST_ENV}")
  endif()
endif()
