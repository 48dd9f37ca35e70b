# The wheel: `pip install .` / `pip wheel .` build through scikit-build-core (pyproject.toml
# at the repository root), which configures this project with SKBUILD set; CMakeLists.txt
# then includes this file. Only the install rules here (component `wheel`, the one
# pyproject.toml's install.components names) go into the wheel, so the `cmake --install`
# rules of CMakeLists.txt (bin/, lib/, include/) stay out of site-packages; and only the
# target `tprof_wheel` is built (build.targets): no examples, tests or benchmarks.
#
# The wheel's layout, under site-packages (scikit-build-core copies python/trainprof, the
# pure-Python package, from wheel.packages):
#   trainprof/_trainprof<EXT_SUFFIX>   the extension; RUNPATH $ORIGIN
#   trainprof/libtrainprof.so.0        the library, under its SONAME: a wheel holds no
#                                      symbolic links, and the extension's DT_NEEDED names
#                                      the SONAME
#   trainprof/libtrainprof_mpi.so      the PMPI wrappers, where Open MPI's headers were found
#                                      (`trainprof run` preloads them by this name, beside
#                                      the library)
#   trainprof/_bin/trainprof           the command; RUNPATH $ORIGIN/..; the console script
#                                      `trainprof` (trainprof/_cli.py) execs it
# The command finds the library at ../libtrainprof.so.0 and, for `run --python`, the
# package as the directory that holds the library (cli/cmd_run.c). scripts/build-wheel.sh
# then has auditwheel copy the libraries these link that a manylinux system does not
# guarantee (libcjson, zlib) into trainprof.libs/ and tag the wheel for the glibc it needs.
if(NOT TPROF_HAVE_PYTHON)
  message(FATAL_ERROR "trainprof wheel: the Python module was not configured (Python "
                      "development headers for ${Python3_EXECUTABLE} not found)")
endif()

# the library file is its SONAME, libtrainprof.so.0 (VERSION unset: SOVERSION alone names it)
set_property(TARGET trainprof PROPERTY VERSION)
set_target_properties(tprof_python PROPERTIES INSTALL_RPATH "$ORIGIN")
set_target_properties(trainprof_cli PROPERTIES INSTALL_RPATH "$ORIGIN/..")

add_custom_target(tprof_wheel)
add_dependencies(tprof_wheel trainprof tprof_python trainprof_cli)
install(TARGETS trainprof LIBRARY DESTINATION trainprof NAMELINK_SKIP COMPONENT wheel)
install(TARGETS tprof_python LIBRARY DESTINATION trainprof COMPONENT wheel)
install(TARGETS trainprof_cli RUNTIME DESTINATION trainprof/_bin COMPONENT wheel)
if(TARGET trainprof_mpi)
  # preloaded by path, never linked: one file named as `run` looks for it
  set_property(TARGET trainprof_mpi PROPERTY VERSION)
  set_property(TARGET trainprof_mpi PROPERTY SOVERSION)
  add_dependencies(tprof_wheel trainprof_mpi)
  install(TARGETS trainprof_mpi LIBRARY DESTINATION trainprof COMPONENT wheel)
endif()
