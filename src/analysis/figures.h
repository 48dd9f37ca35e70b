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
 * Not thread safe on one document; no allocation beyond the cJSON nodes added.
 */
#ifndef TPROF_FIGURES_H
#define TPROF_FIGURES_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "analysis/model.h"
#include "analysis/results.h"

/* Moves the number sec[key] into sec.invalid[key] = { value, limit, reason }. Nothing when
 * sec has no number at key. */
void tp_figure_flag(cJSON *sec, const char *key, double limit, const char *reason);

/* Checks the figures of a rank's section (built for process p) that have a hard bound, and
 * flags those past it: process CPU % against 100 % x the host's CPUs (metadata
 * process.host_cpus), NVML utilisation against 100 %, NVML memory used and GPU busy time
 * against their whole. */
void tp_figures_check_rank(cJSON *rank, const tp_process *p);

/* The bound of a process's CPU %: 100 x the CPUs its host had online (metadata
 * process.host_cpus, written by the process sampler); INFINITY when the file does not say.
 * CPU time cannot exceed wall time times the CPUs online (proc(5): utime + stime). */
double tp_figures_cpu_limit(const tp_process *p);

/* 1 when x is finite and inside [lo, hi] (up to rounding): the one bound test of the
 * document's checks and of tp_figures_check_results. */
int tp_figure_in_bounds(double x, double lo, double hi);

/* The same checks on the typed results of a rank, so that the rules and the renderers that
 * read them see what the document keeps: an NVML memory-used share outside [0, 1], an NVML
 * utilisation outside 0-100 % and a device's busy share outside [0, 1] are cleared (their
 * has_* flag 0). */
void tp_figures_check_results(tp_rank_result *rr);

/* Writes one line per flagged figure anywhere under `root` ("invalid" objects), indented by
 * two spaces and prefixed "flagged, not a result:". Y/N: highlight on/off sequences. */
void tp_figures_text(FILE *f, const cJSON *root, const char *Y, const char *N);

#endif /* TPROF_FIGURES_H */
