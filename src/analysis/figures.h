/*
 * figures.h — figures that cannot be true are not results (figures.c).
 *
 * Some figures have a hard bound: a share of a whole is at most 1, NVML's utilisation at most
 * 100 %, a process's CPU at most 100 % per core of its host, model FLOP/s at most the GPU's
 * peak (MFU at most 100 %). A value past its bound means an input is wrong (a FLOPs figure
 * given per step of the global batch, a peak for another GPU or dtype, a sampler's clock):
 * printing it as a result would mislead. Such a value is moved out of its key into the
 * section's "invalid" object, { "<key>": { "value", "limit", "reason" } }, so that the
 * renderers show it flagged with its likely reason; its `has_*` flag in the typed results
 * (results.h) is cleared the same way, so the diagnosis rules never act on it
 * (docs/report-json.md, "Impossible figures").
 *
 * Not thread safe on one result; no allocation beyond the cJSON nodes a writer adds.
 */
#ifndef TPROF_FIGURES_H
#define TPROF_FIGURES_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "analysis/model.h"
#include "analysis/results.h"

/* The bound of a process's CPU %: 100 x the CPUs its host had online (metadata
 * process.host_cpus, written by the process sampler); INFINITY when the file does not say.
 * CPU time cannot exceed wall time times the CPUs online (proc(5): utime + stime). */
double tp_figures_cpu_limit(const tp_process *p);

/* 1 when x is finite and inside [lo, hi] (up to rounding): the one bound test. */
int tp_figure_in_bounds(double x, double lo, double hi);

/* The checks, each on a section's typed results right after it is computed and before it is
 * written: a figure past its bound has its has_* flag cleared and its *_flagged set (value,
 * bound), and the section's writer puts it in the section's "invalid" object.
 *   process: CPU % mean and max against 100 % x the host's CPUs (p's metadata);
 *   NVML GPUs: utilisation against 0-100 %, memory used against the GPU's memory;
 *   GPU devices: busy share against the steps' time. */
void tp_figures_check_process(tp_process_sampler_result *pr, const tp_process *p);
void tp_figures_check_nvml(tp_nvml_result *nv);
void tp_figures_check_gpu(tp_gpu_result *g);

/* The reasons given for the flagged NVML and GPU figures (the process's is in its result). */
extern const char tp_flag_reason_util[], tp_flag_reason_mem_share[], tp_flag_reason_busy[],
    tp_flag_reason_mem_peak[];

/* Adds { "value", "limit", "reason" } under `key` to the section's "invalid" object, when f
 * is flagged: *inv, created in sec on first use (the caller starts with NULL). For the section
 * writers. */
void tp_figure_invalid_json(cJSON **inv, cJSON *sec, const char *key, const tp_flagged_figure *f,
                            const char *reason);

/* Writes one line per flagged figure of a rank, in the document's order (its GPU devices, its
 * process, its NVML GPUs), indented by two spaces and prefixed "flagged, not a result:".
 * Y/N: highlight on/off sequences. */
void tp_figures_text(FILE *f, const tp_rank_result *rr, const char *Y, const char *N);

#endif /* TPROF_FIGURES_H */
