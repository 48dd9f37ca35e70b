# Leaving without exit(): _exit, exec, and a vfork child's exec.
add_executable(exit_prog exit_prog.c)
target_link_libraries(exit_prog PRIVATE trainprof)
tprof_add_unit(test_exit test_exit.c LIBS tprof_analysis)
target_compile_definitions(test_exit PRIVATE EXIT_PROG="$<TARGET_FILE:exit_prog>")
add_dependencies(test_exit exit_prog)
