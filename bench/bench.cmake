# Overhead and throughput benchmarks (bench/README.md): each bench_* prints absolute figures,
# their ratio to a floor measured in the same run, and "target: ... PASS|MISS" lines.
# `make bench` runs every build/bench/bench_* in turn.

# An empty function in a shared library: the cost of any out-of-line call into a .so, the
# reference for the disabled API (a library, not a bench_* executable: `make bench` skips it).
add_library(tprof_bench_stub SHARED ${CMAKE_CURRENT_SOURCE_DIR}/bench_stub.c)

# Range push+pop through the public API, enabled (1 and 8 threads) and disabled at run time.
add_executable(bench_ranges ${CMAKE_CURRENT_SOURCE_DIR}/bench_ranges.c)
target_link_libraries(bench_ranges PRIVATE trainprof tprof_analysis tprof_bench_stub
  Threads::Threads)

# The same through NVTX injection: the program knows only the NVTX3 headers and libdl;
# libtrainprof.so comes in through NVTX_INJECTION64_PATH. The rank file is checked with the
# project's reader, compiled in (linking tprof_analysis would make libtrainprof.so a
# startup dependency, which an NVTX-only program does not have).
if(TPROF_HAVE_NVTX3)
  add_executable(bench_nvtx ${CMAKE_CURRENT_SOURCE_DIR}/bench_nvtx.c
    ${CMAKE_SOURCE_DIR}/src/format/reader.c ${CMAKE_SOURCE_DIR}/src/format/crc.c)
  target_compile_definitions(bench_nvtx PRIVATE
    TPROF_LIB_PATH="$<TARGET_FILE:trainprof>")
  target_include_directories(bench_nvtx PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src)
  target_include_directories(bench_nvtx SYSTEM PRIVATE ${TPROF_CUDA_ROOT}/include)
  target_link_libraries(bench_nvtx PRIVATE ZLIB::ZLIB Threads::Threads ${CMAKE_DL_LIBS})
  if(TPROF_HAVE_ZSTD) # the rank file's compressed chunks
    target_compile_definitions(bench_nvtx PRIVATE TPROF_HAVE_ZSTD=1)
    target_include_directories(bench_nvtx PRIVATE ${ZSTD_INCLUDE_DIR})
    target_link_libraries(bench_nvtx PRIVATE ${ZSTD_LIBRARY})
  endif()
  # the injected library must exist before the benchmark runs
  add_dependencies(bench_nvtx trainprof)

  # 2 M unique names through nvtxDomainRegisterStringA, injected and with no tool; target 2 s.
  add_executable(bench_nvtx_strings ${CMAKE_CURRENT_SOURCE_DIR}/bench_nvtx_strings.c)
  target_compile_definitions(bench_nvtx_strings PRIVATE
    TPROF_LIB_PATH="$<TARGET_FILE:trainprof>")
  target_include_directories(bench_nvtx_strings PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_include_directories(bench_nvtx_strings SYSTEM PRIVATE ${TPROF_CUDA_ROOT}/include)
  target_link_libraries(bench_nvtx_strings PRIVATE ${CMAKE_DL_LIBS})
  add_dependencies(bench_nvtx_strings trainprof)
endif()

# Writer throughput into a rank file on one core, and reader / model-load throughput.
# The writer's chunk packer (src/format/zchunk.c, hidden in the library) is compiled in for
# the GPU-like size figure.
add_executable(bench_writer ${CMAKE_CURRENT_SOURCE_DIR}/bench_writer.c
  ${CMAKE_SOURCE_DIR}/src/format/zchunk.c)
target_link_libraries(bench_writer PRIVATE trainprof tprof_analysis Threads::Threads ${CMAKE_DL_LIBS})
if(TPROF_HAVE_ZSTD)
  target_compile_definitions(bench_writer PRIVATE TPROF_HAVE_ZSTD=1)
endif()

# Megatron-compatible Timers: the dummy above the log level, and enabled start+stop.
add_executable(bench_timers ${CMAKE_CURRENT_SOURCE_DIR}/bench_timers.c)
target_link_libraries(bench_timers PRIVATE trainprof)

# The report at scale: 8 ranks x 1000 steps x 1000 kernels written with the tests'
# rank-file writer, then load + report + text + HTML timed; targets 10 s and 2 GB.
add_executable(bench_report_scale ${CMAKE_CURRENT_SOURCE_DIR}/bench_report_scale.c
  ${CMAKE_SOURCE_DIR}/tests/synth.c)
target_include_directories(bench_report_scale PRIVATE ${CMAKE_SOURCE_DIR}/tests ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(bench_report_scale PRIVATE tprof_analysis)

# The live metrics endpoint: scrape latency of 1000 series (p50/p99) and the job's
# step time with and without 10 scrapes/s. The registry and endpoint code are compiled in.
if(TPROF_HAVE_MHD)
  add_executable(bench_metrics_scrape ${CMAKE_CURRENT_SOURCE_DIR}/bench_metrics_scrape.c
    ${CMAKE_SOURCE_DIR}/src/core/metrics.c ${CMAKE_SOURCE_DIR}/src/core/metrics_http.c
    ${CMAKE_SOURCE_DIR}/src/core/threads.c ${CMAKE_SOURCE_DIR}/src/core/interpose.c)
  target_include_directories(bench_metrics_scrape PRIVATE ${CMAKE_SOURCE_DIR}/src ${MHD_INCLUDE_DIRS})
  target_compile_definitions(bench_metrics_scrape PRIVATE TPROF_HAVE_MHD=1)
  target_link_libraries(bench_metrics_scrape PRIVATE trainprof Threads::Threads m ${CMAKE_DL_LIBS})
endif()

# Trace export at scale: Chrome JSON against the Perfetto protobuf of the same synthetic run
# (events/s, bytes, peak RSS above the loaded model), each in a child process of its own.
add_executable(bench_export ${CMAKE_CURRENT_SOURCE_DIR}/bench_export.c
  ${CMAKE_SOURCE_DIR}/tests/synth.c)
target_include_directories(bench_export PRIVATE ${CMAKE_SOURCE_DIR}/tests ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(bench_export PRIVATE tprof_analysis)
# A job recording ranges as fast as it can, for `trainprof run`'s end-of-run report of a huge
# single rank file (bench/README.md).
add_executable(range_job ${CMAKE_CURRENT_SOURCE_DIR}/range_job.c)
target_link_libraries(range_job PRIVATE trainprof)

# Not a benchmark (make bench skips it: no bench_ prefix): random runs that stress the report's
# cross-rank merge, for bench/merge_diff.sh's comparison of two builds' reports.
add_executable(gen_merge_run ${CMAKE_CURRENT_SOURCE_DIR}/gen_merge_run.c
  ${CMAKE_SOURCE_DIR}/tests/synth.c)
target_include_directories(gen_merge_run PRIVATE ${CMAKE_SOURCE_DIR}/tests ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(gen_merge_run PRIVATE tprof_analysis)
