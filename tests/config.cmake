# The session's configuration and its capture sources (src/core/config.h, config.c,
# source.h, sources_run.c, src/capture/sources.c): the one table of TRAINPROF_* variables
# against docs/cli.md and tprof_config_from_env, and the loops over the sources' table.
tprof_add_unit(test_config test_config.c LIBS trainprof)
target_compile_definitions(test_config PRIVATE TPROF_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
target_include_directories(test_config PRIVATE ${CMAKE_SOURCE_DIR}/include)

tprof_add_unit(test_sources test_sources.c sources_table.c
  ${CMAKE_SOURCE_DIR}/src/core/sources_run.c)
target_include_directories(test_sources PRIVATE ${CMAKE_SOURCE_DIR}/include)
