/*
 * ended.h — the ranks that ended early: killed by a signal (their end record names it) or
 * gone without an end record (SIGKILL, the node failed, the file was cut), each with the
 * range and the collective it was last in, which is where a hang or a crash of one rank
 * usually shows.
 */
#ifndef TPROF_ENDED_H
#define TPROF_ENDED_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "analysis/model.h"
#include "analysis/results.h"

/* Fills *out with the ranks that ended early (its array owned by it, freed by
 * tp_run_results_free; pointers into `run`) and, when there are some, adds "ended_early"
 * (an array, one entry per such rank) to `rep` and appends a finding "ended_early"
 * (critical) and one "helper_crashed" (warning) to fs (findings.h; NULL: none) from it
 * (docs/report-json.md). Not thread safe with writers of `rep`. */
void tp_ended_section(cJSON *rep, tp_findings_result *fs, const tp_run *run,
                      tp_ended_result *out);

/* The text form of the ranks that ended early (nothing without them), from the results
 * tp_ended_section filled. B/N/Y: bold, normal and warning colour sequences ("" without
 * colour). */
void tp_ended_text(FILE *f, const tp_ended_result *e, const char *B, const char *N,
                   const char *Y);

/* "SIGABRT" for 6 ..., "SIGRTMIN+3", else "signal N"; buf holds at least 24 bytes. */
const char *tp_signal_name(int sig, char *buf, size_t n);

#endif /* TPROF_ENDED_H */
