# NVML sampler, the report's GPU energy section and the EnergyMonitor, against a scripted
# fake libnvidia-ml (fake_nvml.c) chosen with TRAINPROF_NVML_LIB: no GPU needed.
add_library(fake_nvml SHARED fake_nvml.c)
target_include_directories(fake_nvml PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(fake_nvml PRIVATE Threads::Threads)
set_target_properties(fake_nvml PROPERTIES C_VISIBILITY_PRESET hidden)

# the shared NVML loader compiled in (as the command does: the library keeps its copy hidden)
tprof_add_unit(test_nvml test_nvml.c synth.c ${CMAKE_SOURCE_DIR}/src/common/nvml_shared.c LIBS trainprof tprof_analysis Threads::Threads
               ${CMAKE_DL_LIBS} m LABELS tsan)
target_compile_definitions(test_nvml PRIVATE FAKE_NVML_PATH="$<TARGET_FILE:fake_nvml>")
add_dependencies(test_nvml fake_nvml)

# trainprof run's node sampler (cli/trainprof.c) with the same fake driver
add_test(NAME node_sampler
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/node_sampler_test.sh $<TARGET_FILE:trainprof_cli>
          $<TARGET_FILE:char_lm> $<TARGET_FILE:fake_nvml> ${CMAKE_CURRENT_BINARY_DIR}/node-sampler-run)
set_tests_properties(node_sampler PROPERTIES LABELS "cli;nvml" TIMEOUT 120
  ENVIRONMENT "${TPROF_TEST_ENV}")
