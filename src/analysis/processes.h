/*
 * processes.h — the run's processes as typed results (results.h: tp_process_result) and
 * their writer, the document's "processes" (docs/report-json.md).
 */
#ifndef TPROF_PROCESSES_H
#define TPROF_PROCESSES_H

#include <cjson/cJSON.h>

#include "analysis/model.h"
#include "analysis/results.h"

/* Fills out with one result per process of run (out->procs owned by it, freed by
 * tp_run_results_free; strings into run). Returns TPROF_OK, or TPROF_ERR_NO_MEMORY (then
 * out->nprocs is what was filled). */
int tp_processes_compute(tp_run_results *out, const tp_run *run);

/* The document's "processes[]" entry of one process. NULL when out of memory. */
cJSON *tp_process_json(const tp_process_result *p);

/* The widest label of the processes in columns, at least `min`. */
int tp_processes_label_cols(const tp_run_results *res, int min);

#endif
