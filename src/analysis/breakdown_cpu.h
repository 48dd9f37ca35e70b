/*
 * breakdown_cpu.h — the CPU basis of the breakdown and the phases (breakdown_cpu.c), for
 * breakdown.c. Private to the analysis.
 */
#ifndef TPROF_BREAKDOWN_CPU_H
#define TPROF_BREAKDOWN_CPU_H

#include "analysis/breakdown.h"

/* The CPU basis into *out over windows win[0..nw), the first nwarm warm-up (breakdown.h):
 * each instant of a window to one range of the view's thread (the step thread, or without
 * steps the one with the most top-level time), descend: the phases (a range holding them
 * gives way to the ranges inside it). streamed: the basis a streamed read computed for these
 * windows (tp_cpu_stream; its rows are taken, once), else NULL: from p's ranges. Out of
 * memory: has_cpu stays 0. */
void tp_cpu_basis(tp_breakdown_result *out, const tp_process *p, const tp_steps *st,
                  const tp_step *win, size_t nw, size_t nwarm, int descend,
                  tp_cpu_stream *streamed);

#endif /* TPROF_BREAKDOWN_CPU_H */
