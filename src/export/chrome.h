/*
 * chrome.h — Chrome Trace Event JSON export, shaped like PyTorch profiler (Kineto) traces
 * so that Perfetto UI, chrome://tracing and HTA read it (the Trace Event Format document;
 * pytorch/kineto libkineto/src/output_json.cpp).
 */
#ifndef TPROF_CHROME_H
#define TPROF_CHROME_H

#include <stdio.h>

#include "analysis/model.h"
#include "analysis/results.h"

typedef struct tp_export_opts {
    const char *step_name; /* as for the report; NULL = the default rule */
    int warmup;            /* warm-up steps (only used to label steps) */
    /* The run's clock alignment as the report computes it (clocks.h: tp_clocks_build, then
     * tp_clocks_result_fill), borrowed; NULL: the exporter computes it the same way. */
    const tp_clocks_result *clocks;
    /* Selection, for runs whose whole trace is too big to open: ranks (borrowed, n_ranks of
     * them; NULL = every rank; a helper goes with the rank it serves, node samplers and
     * other processes only when every rank is taken), and the events that overlap a window
     * of the trace's own time: steps step_lo..step_hi of the lowest selected rank that has
     * steps (numbered as the report numbers them; has_steps), or seconds t_lo..t_hi from the
     * trace's start (has_time); both given: their intersection. Metadata events are kept. */
    const int *ranks;
    size_t n_ranks;
    int has_steps, has_time;
    uint64_t step_lo, step_hi;
    double t_lo, t_hi;
} tp_export_opts;

/* Times: every event goes out on the aligned wall clock of the report (clocks.h): a host's
 * processes through one start pair, each other host moved by the offset that makes matched
 * collectives end together; the offsets, how each was found and any rank file whose start
 * pair was not usable are in the trace's "trainprof.clock_offsets" and
 * "trainprof.clock_alignment" (docs/cli.md).
 *
 * One merged trace of every process of the run: pid = rank for ranks (helpers keep their
 * OS pid), tid = OS thread id. Returns 0 or a negative tprof_err (TPROF_ERR_IO when
 * writing fails, or when a slim process's file can no longer be read; TPROF_ERR_NOT_FOUND
 * when the selection matches nothing: steps no selected rank has, or none within the
 * seconds when both are given, or seconds in which no selected process ran).
 *
 * `run` may be slim (tp_run_load_slim), for runs too large to hold whole: each selected slim
 * process's file is read again whole just before its events are written and freed after
 * them, so that memory is the slim run plus one rank file's model. What the trace takes from
 * other processes than the one being written (the clock alignment, the --steps window, the
 * process groups, a node sampler's GPU counters) comes from what a slim process holds and
 * its memos, which tp_run_fill_memos (report.h) must have filled with opts' step name and
 * warm-up (the clock alignment of opts->clocks computed after it): the trace is then the
 * whole run's, byte for byte. The string pool of the run grows by the strings of the files
 * read (its one lock is why the run is not const there). */
int tp_export_chrome(const tp_run *run, FILE *out, const tp_export_opts *opts);

/* Prepares slim run `run` (tp_run_load_slim) for the exporters: reads again whole, one at a
 * time, each rank file that a trace reads beyond its own events (a rank with communication
 * ops, for the clock alignment; with opts->has_steps, each selected rank, for the window)
 * and keeps in its slim process its steps (opts' step name and warm-up; opts->step_name
 * must outlive the run) and communication times (tp_run_fill_memos, report.h). Call it
 * before computing opts->clocks and before exporting with the same opts. Returns TPROF_OK,
 * TPROF_ERR_INVALID_ARG or TPROF_ERR_NO_MEMORY; a file that can no longer be read keeps no
 * memo (its export then fails). Not thread safe. */
int tp_export_fill_memos(tp_run *run, const tp_export_opts *opts);

/* Whether opts (NULL: every rank) selects `rank` (tp_export_opts.ranks). */
int tp_export_rank_selected(const tp_export_opts *opts, int rank);

/* One Kineto-shaped trace for `rank` (its rank process and its helpers), with
 * schemaVersion, distributedInfo, baseTimeNanoseconds and pid = OS pid, as torch.profiler
 * writes per rank. Returns TPROF_ERR_NOT_FOUND when no process has that rank. */
int tp_export_chrome_rank(const tp_run *run, int rank, FILE *out, const tp_export_opts *opts);

#endif /* TPROF_CHROME_H */
