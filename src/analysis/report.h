/*
 * report.h — the run report: computed once as a JSON document (schema in
 * docs/report-json.md), from which the text form is rendered, so the two never disagree.
 */
#ifndef TPROF_REPORT_H
#define TPROF_REPORT_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "analysis/model.h"

#define TP_REPORT_SCHEMA_VERSION 1

typedef struct tp_report_opts {
    const char *step_name;          /* --step-name; NULL = docs/design.md §4 default rule */
    int warmup;                     /* warm-up steps, default 1 */
    const char *const *data_names;  /* range names that mark data loading */
    size_t ndata_names;
    int top_n;                      /* rows in the top-range tables, default 15 */
    double comm_warn_share;         /* exposed communication over this share of the step is a
                                     * warning finding: default 0.10 (docs/design.md §5.2) */
    double comm_crit_share;         /* ... and over this, critical: default 0.30 */

    /* Throughput and MFU (mfu.h): per rank and step (a rank's share of the global
     * batch); 0 / NULL = from the rank files' metadata (tokens_per_step, samples_per_step,
     * flops_per_step, model, dtype), else unknown. */
    double tokens_per_step, samples_per_step, flops_per_step;
    const char *model;              /* transformer description for tp_model_parse */
    const char *dtype;              /* peak-table dtype: bf16 (default), fp16, fp8, tf32, fp32 */

    /* Diagnosis thresholds (diagnose.c; docs/report-json.md "diagnosis"; starting figures in
     * docs/design.md §5.2). */
    double data_share;              /* data-loading range over this share of the step: 0.20 */
    double data_ms_per_sample;      /* ... or over this many ms per sample: 5 */
    double data_start_idle_share;   /* ... or GPU idle at step start while it runs: 0.05 */
    double launch_idle_share;       /* launch-bound: unattributed GPU idle over this: 0.20 */
    double launch_kernel_us;        /* ... with a median kernel shorter than this: 50 us */
    double host_sync_share;         /* GPU idle behind host synchronisation over this: 0.05 */
    double memory_share;            /* memory peak over this share of capacity: 0.90 */
    double straggler_share;         /* straggler floor: this share of the median step: 0.05 */
    double throttle_share;          /* throttle reasons set in over this share of samples: 0.05 */
    double clock_drop_share;        /* ... with the SM clock this far below its max: 0.05 */
    double power_limit_share;       /* power at this share of the enforced limit: 0.97 */
    double busy_share;              /* GPU busy below this share of the step: 0.80 */
    int diag_min_steps;             /* rules over steps need this many measured steps: 3 */
} tp_report_opts;

/* Defaults: warm-up 1, top 15, data names data, batch, loader, get_batch,
 * batch-generator (matched case-insensitively), exposed-communication thresholds 10 % and
 * 30 % of the step. */
void tp_report_opts_init(tp_report_opts *o);

/* Builds the report of a loaded run; NULL only when out of memory. Free with cJSON_Delete. */
cJSON *tp_report_build(const tp_run *run, const tp_report_opts *o);

/* Render. Return 0 or TPROF_ERR_IO. `color` adds ANSI colour (only for terminals). */
int tp_report_write_text(const cJSON *rep, FILE *f, int color);
int tp_report_write_json(const cJSON *rep, FILE *f);

#endif /* TPROF_REPORT_H */
