# MPI capture (src/capture/mpi_pmpi.c and mpi_track.c, libtrainprof_mpi.so; docs/mpi.md).
# Built only with Open MPI (top-level CMakeLists.txt sets TPROF_HAVE_MPI).
#   test_mpi        unit: the wrappers' ids, bytes, tables, nonblocking tracking, the timers
#                   hook, error codes and threads, in singleton MPI processes (no mpirun)
#   test_mpi_inert  the library in a process without any MPI: loads, and its MPI_* entry
#                   points return MPI_ERR_OTHER instead of crashing
#   test_mpi_stub   a program on an MPI stub library (MPI_* but no PMPI_*), the wrappers
#                   preloaded: its calls still reach the stub
#   mpi_prog_2ranks / char_lm_mpi_2ranks   2 ranks with mpirun under `trainprof run`
#                   (tests/mpi_test.sh; skipped with 77 when mpirun is missing)
#
# Sanitizers. Open MPI is not instrumented and keeps allocations to the end of the process.
# test_mpi (ASan) runs with tests/lsan_mpi.supp, which matches Open MPI's own libraries
# only, so a leak in our code still fails it. In the 2-rank runs the leaks come from Open
# MPI's components, which it dlcloses at MPI_Finalize, so LeakSanitizer sees "<unknown
# module>" frames that no suppression can name: there leak checking is off (as for CPython
# in pytorch.cmake) and ASan still checks every memory access of the instrumented
# libtrainprof*.so in mpirun, orted and both ranks. TSan cannot run them (its runtime must
# be loaded first, and mpirun is not built with it). test_mpi runs under TSan (label tsan) for the lock-free tables, with tests/tsan_mpi.supp
# silencing reports inside Open MPI's own libraries (a lock-order inversion between its
# mutexes in ompi_sync_wait_mt).
if(NOT TPROF_HAVE_MPI)
  return()
endif()

set(mpi_test_env "${TPROF_TEST_ENV}")
set(mpi_run_env "${TPROF_TEST_ENV}")
if(TPROF_SANITIZE STREQUAL "address")
  list(FILTER mpi_test_env EXCLUDE REGEX "^(ASAN|LSAN)_OPTIONS=")
  list(APPEND mpi_test_env "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=1"
    "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_SOURCE_DIR}/lsan_mpi.supp:print_suppressions=0")
  list(FILTER mpi_run_env EXCLUDE REGEX "^ASAN_OPTIONS=")
  list(APPEND mpi_run_env "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0")
elseif(TPROF_SANITIZE STREQUAL "thread")
  list(FILTER mpi_test_env EXCLUDE REGEX "^TSAN_OPTIONS=")
  list(APPEND mpi_test_env "TSAN_OPTIONS=halt_on_error=1:die_after_fork=0:suppressions=${CMAKE_CURRENT_SOURCE_DIR}/tsan_mpi.supp")
endif()
# Open MPI refuses to start as root without the first two (CI runs as root; ignored
# otherwise). The third: in a container without ptrace rights the shared-memory BTL's
# single-copy (CMA) transfers of large messages fail; plain copies work everywhere.
foreach(v "OMPI_ALLOW_RUN_AS_ROOT=1" "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
          "OMPI_MCA_btl_vader_single_copy_mechanism=none")
  list(APPEND mpi_test_env "${v}")
  list(APPEND mpi_run_env "${v}")
endforeach()

# the PMPI link order: the wrappers before libmpi, so the test's MPI calls reach them
tprof_add_unit(test_mpi ${CMAKE_CURRENT_LIST_DIR}/test_mpi.c
  LIBS trainprof_mpi MPI::MPI_C trainprof tprof_analysis Threads::Threads LABELS "tsan;mpi")
set_tests_properties(test_mpi PROPERTIES ENVIRONMENT "${mpi_test_env}")

add_executable(mpi_inert_prog ${CMAKE_CURRENT_LIST_DIR}/mpi_inert_prog.c)
target_link_libraries(mpi_inert_prog PRIVATE ${CMAKE_DL_LIBS})
add_test(NAME test_mpi_inert COMMAND mpi_inert_prog $<TARGET_FILE:trainprof_mpi>)
set_tests_properties(test_mpi_inert PROPERTIES TIMEOUT 60 LABELS "mpi;tsan"
  ENVIRONMENT "${mpi_test_env}")

# an MPI stub library (MPI_* without PMPI_*) under the preloaded wrappers; not under TSan,
# whose runtime must be loaded before any preloaded instrumented library
add_library(mpi_stub_test SHARED ${CMAKE_CURRENT_LIST_DIR}/mpi_stub.c)
add_executable(mpi_stub_user ${CMAKE_CURRENT_LIST_DIR}/mpi_stub.c)
target_compile_definitions(mpi_stub_user PRIVATE STUB_MAIN)
target_link_libraries(mpi_stub_user PRIVATE mpi_stub_test ${CMAKE_DL_LIBS})
if(NOT TPROF_SANITIZE STREQUAL "thread")
  add_test(NAME test_mpi_stub COMMAND mpi_stub_user)
  set_tests_properties(test_mpi_stub PROPERTIES TIMEOUT 60 LABELS "mpi"
    ENVIRONMENT "${mpi_test_env};LD_PRELOAD=$<TARGET_FILE:trainprof_mpi>")
endif()

add_executable(mpi_comm_dump ${CMAKE_CURRENT_LIST_DIR}/mpi_comm_dump.c)
target_link_libraries(mpi_comm_dump PRIVATE tprof_analysis)
add_executable(mpi_prog ${CMAKE_CURRENT_LIST_DIR}/mpi_prog.c)
target_link_libraries(mpi_prog PRIVATE trainprof MPI::MPI_C ${CMAKE_DL_LIBS})

if(NOT TPROF_SANITIZE STREQUAL "thread")
  add_test(NAME mpi_prog_2ranks
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/mpi_test.sh prog $<TARGET_FILE:trainprof_cli>
            $<TARGET_FILE:mpi_comm_dump> $<TARGET_FILE:trainprof_mpi> $<TARGET_FILE:mpi_prog>
            ${CMAKE_BINARY_DIR}/testtmp/mpi_prog)
  add_test(NAME char_lm_mpi_2ranks
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/mpi_test.sh char_lm $<TARGET_FILE:trainprof_cli>
            $<TARGET_FILE:mpi_comm_dump> $<TARGET_FILE:trainprof_mpi> $<TARGET_FILE:char_lm_mpi>
            ${CMAKE_BINARY_DIR}/testtmp/char_lm_mpi)
  set_tests_properties(mpi_prog_2ranks char_lm_mpi_2ranks PROPERTIES TIMEOUT 240
    LABELS "integration;mpi" SKIP_RETURN_CODE 77 ENVIRONMENT "${mpi_run_env}" RUN_SERIAL TRUE)
endif()
