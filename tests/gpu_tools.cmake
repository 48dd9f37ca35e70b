# Tools the GPU checks run on the GPU machine (tests/gpu/): built everywhere, run only there.
add_executable(comm_dump gpu/comm_dump.c)
target_link_libraries(comm_dump PRIVATE tprof_analysis)
add_executable(comm_apart_count gpu/comm_apart_count.c)
target_link_libraries(comm_apart_count PRIVATE tprof_analysis)
