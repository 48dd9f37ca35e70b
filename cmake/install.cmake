# `cmake --install BUILD --prefix P` (docs: README "Install", docs/python.md "Install"). With
# GNUInstallDirs' defaults (<libdir> is lib, lib64 or Debian's lib/<multiarch> under /usr):
#   P/bin/trainprof                          RUNPATH $ORIGIN/../<libdir>
#   P/<libdir>/libtrainprof.so -> .so.0 -> .so.0.1.0
#   P/<libdir>/libtrainprof_mpi.so ...       when Open MPI was found
#   P/include/trainprof.h                    (it includes only standard headers)
#   P/lib/trainprof/python/trainprof/        the package and its extension, RUNPATH to <libdir>
#   P/<libdir>/pkgconfig/trainprof.pc        and trainprof-mpi.pc with the MPI library
#   P/<libdir>/cmake/trainprof/              trainprofConfig.cmake, ...ConfigVersion.cmake and
#                                            the exported targets trainprof::trainprof and
#                                            trainprof::mpi
# Everything found through a RUNPATH or the CMake package is relative to where it lies, so the
# installed tree may be moved; the pkg-config files name the prefix given at install time.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Fixed under lib/ whatever <libdir> is: `trainprof run --python` looks for the package at
# <bin>/../lib/trainprof/python (cli/cmd_run.c, find_python_dir).
set(TPROF_INSTALL_PYTHONDIR lib/trainprof/python)
set(TPROF_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/trainprof)
set(TPROF_INSTALL_PCDIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# A RUNPATH from the installed directory `from` (relative to the prefix) to <libdir>: relative
# to $ORIGIN, so that a moved tree still loads its own library; absolute where the user
# gave absolute directories.
function(tprof_rpath_to_libdir out from)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${from}")
    set(${out} "${CMAKE_INSTALL_FULL_LIBDIR}" PARENT_SCOPE)
  else()
    file(RELATIVE_PATH rel "/p/${from}" "/p/${CMAKE_INSTALL_LIBDIR}")
    string(REGEX REPLACE "/$" "" rel "${rel}")
    set(${out} "$ORIGIN/${rel}" PARENT_SCOPE)
  endif()
endfunction()

# ---------------------------------------------------------------- the command, libraries, header
tprof_rpath_to_libdir(tprof_cli_rpath ${CMAKE_INSTALL_BINDIR})
set_target_properties(trainprof_cli PROPERTIES INSTALL_RPATH "${tprof_cli_rpath}")
install(TARGETS trainprof_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# cJSON, zlib and the threads library are linked PRIVATE into the shared library, so the
# exported target carries none of them: a consumer's compile and link lines name only
# libtrainprof.
install(TARGETS trainprof EXPORT trainprofTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES include/trainprof.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TPROF_HAVE_MPI)
  # trainprof::mpi brings trainprof::trainprof (its wrappers record through it, and a program
  # using them gets the header); link it before the MPI library, as any PMPI tool (docs/mpi.md)
  set_target_properties(trainprof_mpi PROPERTIES EXPORT_NAME mpi)
  set_property(TARGET trainprof_mpi APPEND PROPERTY INTERFACE_LINK_LIBRARIES trainprof)
  install(TARGETS trainprof_mpi EXPORT trainprofTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

# ---------------------------------------------------------------- the Python package
if(TPROF_HAVE_PYTHON)
  tprof_rpath_to_libdir(tprof_py_rpath ${TPROF_INSTALL_PYTHONDIR}/trainprof)
  set_target_properties(tprof_python PROPERTIES INSTALL_RPATH "${tprof_py_rpath}")
  install(TARGETS tprof_python LIBRARY DESTINATION ${TPROF_INSTALL_PYTHONDIR}/trainprof)
  foreach(f ${TPROF_PY_FILES})
    get_filename_component(d ${f} DIRECTORY)
    install(FILES python/trainprof/${f} DESTINATION ${TPROF_INSTALL_PYTHONDIR}/trainprof/${d})
  endforeach()
endif()

# ---------------------------------------------------------------- pkg-config
# Written in two passes: here with everything but the prefix, which is only known when
# `cmake --install --prefix P` runs; the install step then writes P into the file it installs.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(TPROF_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(TPROF_PC_LIBDIR "\${exec_prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(TPROF_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(TPROF_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
set(TPROF_PC_PREFIX "@CMAKE_INSTALL_PREFIX@")
# what static linking would add (pkg-config --static); a shared link needs none of it
set(TPROF_PC_DL "")
foreach(l ${CMAKE_DL_LIBS})
  string(APPEND TPROF_PC_DL " -l${l}")
endforeach()
set(tprof_pc_files trainprof)
if(TPROF_HAVE_MPI)
  list(APPEND tprof_pc_files trainprof-mpi)
endif()
foreach(pc ${tprof_pc_files})
  configure_file(cmake/${pc}.pc.in ${CMAKE_BINARY_DIR}/pkgconfig/${pc}.pc.in @ONLY)
  install(CODE "configure_file(\"${CMAKE_BINARY_DIR}/pkgconfig/${pc}.pc.in\"
                               \"${CMAKE_BINARY_DIR}/pkgconfig/${pc}.pc\" @ONLY)")
  install(FILES ${CMAKE_BINARY_DIR}/pkgconfig/${pc}.pc DESTINATION ${TPROF_INSTALL_PCDIR})
endforeach()

# ---------------------------------------------------------------- CMake package
# find_package(trainprof [COMPONENTS mpi]) -> trainprof::trainprof [, trainprof::mpi];
# trainprof_EXECUTABLE names the installed command.
configure_package_config_file(cmake/trainprofConfig.cmake.in
  ${CMAKE_BINARY_DIR}/cmake/trainprofConfig.cmake
  INSTALL_DESTINATION ${TPROF_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_BINDIR)
# 0.x releases share the library's SONAME (libtrainprof.so.0): same major, compatible
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/trainprofConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(EXPORT trainprofTargets NAMESPACE trainprof:: DESTINATION ${TPROF_INSTALL_CMAKEDIR})
install(FILES ${CMAKE_BINARY_DIR}/cmake/trainprofConfig.cmake
              ${CMAKE_BINARY_DIR}/cmake/trainprofConfigVersion.cmake
        DESTINATION ${TPROF_INSTALL_CMAKEDIR})
