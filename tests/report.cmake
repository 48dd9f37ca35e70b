# Report figures on synthetic runs with known answers.
tprof_add_unit(test_report test_report.c synth.c LIBS tprof_analysis)
# report.json byte for byte on rank files of the fuzz corpus (tests/report_pin/)
add_test(NAME report_pin COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/report_pin.sh
         $<TARGET_FILE:trainprof_cli> ${CMAKE_SOURCE_DIR})
set_tests_properties(report_pin PROPERTIES TIMEOUT 60 LABELS "report;unit")
# torch.profiler / Kineto traces read as runs: known answers, the round trip through our own
# per-rank export, and one line for a damaged trace.
tprof_add_unit(test_kineto test_kineto.c synth.c LIBS tprof_analysis LABELS report)
target_compile_definitions(test_kineto PRIVATE TPROF_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
# The memory timeline, fragmentation, the memory rules and the OOM post-mortem (memory.c,
# memory_rules.c) on synthetic samples of the caching allocator with known peaks.
tprof_add_unit(test_memory test_memory.c synth.c LIBS tprof_analysis LABELS report)
# Span unions walked in start order and the k-th value selected in passes (spans.c) against
# sorting every span or value.
tprof_add_unit(test_spans test_spans.c LIBS tprof_analysis LABELS report)
# Spans held to a bound, then written in sorted runs (span_store.c), walk back in start order:
# every bound, no file to write, a file cut short, each allocation refused.
tprof_add_unit(test_span_store test_span_store.c LIBS tprof_analysis LABELS report)
tprof_add_unit(test_jobs test_jobs.c LIBS tprof_analysis LABELS report)
# The report of a slim run (tp_run_load_slim, rank files read again for their sections, on
# several threads) is the report of the whole run, byte for byte.
tprof_add_unit(test_report_slim test_report_slim.c synth.c diag_scen.c LIBS tprof_analysis LABELS "report;tsan")
target_compile_definitions(test_report_slim PRIVATE TPROF_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
# It renders the fuzz corpus and the synthetic runs slim and whole: 34 s under TSan alone, and
# past the units' 120 s under TSan with every core busy (suite_under_load) and more load.
set_tests_properties(test_report_slim PROPERTIES TIMEOUT 600)
# A report whose making runs out of memory says where (analysis/alloc.h): every allocation
# refused in turn, on a straggler scenario and the slim tests' four ranks, from the rank files
# and from their summaries.
tprof_add_unit(test_report_nomem test_report_nomem.c synth.c diag_scen.c LIBS tprof_analysis LABELS report)
set_tests_properties(test_report_nomem PROPERTIES TIMEOUT 600)
# A rank section whose ranges are streamed from its file (model_stream.c, report_ranges.c)
# reads the same report, byte for byte, as one read whole; the sweep's nesting range by range.
tprof_add_unit(test_report_stream test_report_stream.c synth.c diag_scen.c LIBS tprof_analysis LABELS "report;tsan")
target_compile_definitions(test_report_stream PRIVATE TPROF_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
# It renders the fuzz corpus and the synthetic runs four ways each and sweeps 40,000-deep
# stacks: under TSan with every core busy (suite_under_load) that took past the units' 120 s.
set_tests_properties(test_report_stream PROPERTIES TIMEOUT 600)
# A section's communication ops read apart in passes over its file (comm_stream.c): the
# report the same byte for byte, and files whose ops need each other read whole.
tprof_add_unit(test_comm_apart test_comm_apart.c synth.c diag_scen.c LIBS tprof_analysis LABELS "report;tsan")
set_tests_properties(test_comm_apart PROPERTIES TIMEOUT 600) # 17 runs rendered 4 ways each
# Rank summaries (summary.h, `trainprof summarize`): the report read from them is the report
# read from the rank files, byte for byte; stale or damaged ones are recomputed, never used.
tprof_add_unit(test_summary test_summary.c synth.c diag_scen.c LIBS tprof_analysis LABELS "report;tsan")
target_compile_definitions(test_summary PRIVATE TPROF_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
# the corpus rendered twice and more per file, under TSan on a loaded machine
set_tests_properties(test_summary PROPERTIES TIMEOUT 600)
# A summary's slim block streamed to and from its file through windows of every size: the
# bytes and the process are those of the block coded in memory.
tprof_add_unit(test_summary_stream test_summary_stream.c synth.c diag_scen.c LIBS tprof_analysis LABELS "report")
# A slim thread's packed counters written out to a temporary file past the spill threshold:
# the same bytes, counters, report and summaries as held in memory; the file's faults.
tprof_add_unit(test_counter_spill test_counter_spill.c synth.c diag_scen.c LIBS tprof_analysis LABELS "report;tsan")
# `trainprof summarize` end to end on 16 ranks written by bench_report_scale: the launchers'
# splits, then `mpirun -np 4 trainprof summarize` and the same report byte for byte (the
# mpirun part skipped with 77 when mpirun is missing).
if(TPROF_BUILD_BENCH)
  add_test(NAME summarize_mpirun COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/summarize_test.sh
           $<TARGET_FILE:trainprof_cli> $<TARGET_FILE:bench_report_scale>)
  set_tests_properties(summarize_mpirun PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77
    LABELS "integration;report" ENVIRONMENT "${TPROF_TEST_ENV}")
endif()
# `trainprof run`'s first stage on the job's nodes (--summarize-with): srun in an allocation
# (a stand-in srun), off, a failing and a hung launcher, then Open MPI's mpirun (skipped with
# 77 when mpirun is missing); every report the one without summaries.
add_test(NAME run_first_stage COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/run_first_stage_test.sh
         $<TARGET_FILE:trainprof_cli> $<TARGET_FILE:char_lm>)
set_tests_properties(run_first_stage PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77
  LABELS "integration;report;cli" ENVIRONMENT "${TPROF_TEST_ENV}")
# `trainprof run` on every node of a job (torchrun --nnodes, --nodes), nodes made with UTS
# namespaces (skipped with 77 where unshare -u fails): one shared directory, each node's own
# summaries, the report on rank 0's node after the others', the one without summaries.
add_test(NAME run_nodes COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/run_nodes_test.sh
         $<TARGET_FILE:trainprof_cli> $<TARGET_FILE:char_lm>)
set_tests_properties(run_nodes PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77
  LABELS "integration;report;cli" ENVIRONMENT "${TPROF_TEST_ENV}")
# The command's report keeps its rank sections in a temporary file (report_spill.c): the same
# JSON and HTML as the report that holds them, with strings that are not UTF-8, without a
# temporary directory, without ranks; the store read back as written.
tprof_add_unit(test_report_spill test_report_spill.c synth.c diag_scen.c LIBS tprof_analysis LABELS report)
