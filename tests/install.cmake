# `cmake --install` into a temporary prefix, then the installation used through pkg-config,
# find_package(trainprof), the installed `trainprof run --python`, and the installed command
# finding its library through the dynamic linker (install_test.sh). Plain build only: an
# instrumented library cannot be loaded by uninstrumented consumers.
if(NOT TPROF_SANITIZE)
  if(TPROF_HAVE_PYTHON)
    set(tprof_install_py ${Python3_EXECUTABLE})
  else()
    set(tprof_install_py -)
  endif()
  add_test(NAME install_consumers
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/install_test.sh ${CMAKE_COMMAND} ${CMAKE_BINARY_DIR}
            ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/testtmp/install ${CMAKE_C_COMPILER}
            ${CMAKE_INSTALL_LIBDIR} ${tprof_install_py} ${TPROF_HAVE_MPI})
  set_tests_properties(install_consumers PROPERTIES TIMEOUT 120 LABELS "install"
    ENVIRONMENT "${TPROF_TEST_ENV}")
endif()
