/*
 * diagnose.h — the run-level analyses and the diagnosis rule engine (diagnose.c): clock
 * alignment across hosts (clocks.c), throughput and MFU (mfu.c), stragglers, and a
 * table of rules over the typed results (results.h) of the step breakdown (breakdown.c) and
 * the other sections, each with a
 * configurable threshold in tp_report_opts, each finding carrying its evidence and a
 * recommendation, appended to the report's "findings".
 */
#ifndef TPROF_DIAGNOSE_H
#define TPROF_DIAGNOSE_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "analysis/model.h"
#include "analysis/report.h"
#include "analysis/results.h"

/* Sets the throughput inputs and the diagnosis thresholds of o to their defaults
 * (tp_report_opts_init calls it). */
void tp_diagnose_opts_init(tp_report_opts *o);

/* Adds "clocks", "throughput", "stragglers" and "diagnosis" to the report and appends the
 * rules' findings to res->findings (findings.h; the caller writes them). res: the ranks'
 * typed results (results.h), which the stragglers, throughput and the rules read; the
 * run-level results (throughput, stragglers, findings) are filled in it. comm_finding: the
 * index in res->findings of the exposed-communication finding comm_run.c appended (it gets
 * the rule's recommendation), or SIZE_MAX. */
void tp_diagnose_run(cJSON *rep, const tp_run *run, tp_run_results *res, size_t comm_finding,
                     const tp_report_opts *o);

/* Text: a rank's breakdown (indented two spaces; from its section of the document), and the
 * run-level sections clocks, throughput and stragglers (from the typed results). B/N: bold
 * on/off; Y: the warning colour. */
void tp_breakdown_text(FILE *f, const tp_breakdown_result *breakdown);

/* The phases table of a rank (tp_phases_compute): nothing when it has none. */
void tp_phases_text(FILE *f, const tp_breakdown_result *phases);
void tp_diagnose_text(FILE *f, const tp_run_results *res, const char *B, const char *N,
                      const char *Y);

#endif
