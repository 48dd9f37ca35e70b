/*
 * diff.h — `trainprof diff RUN_A RUN_B` (diff.c): what changed between two runs, beyond
 * the step-to-step noise of each, in step time, GPU kernel classes, top kernels,
 * communication and energy per step. The profiling method's baseline step: measure, change
 * one thing, measure again, and ask whether the difference is real.
 */
#ifndef TPROF_DIFF_H
#define TPROF_DIFF_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "analysis/model.h"
#include "analysis/report.h"

#define TP_DIFF_SCHEMA_VERSION 1

/* One side: its report (tp_report_build's document, or a report.json read back) and, when
 * the rank files could be loaded, the run, from which the per-step values come (without
 * them the step-to-step noise is unknown). `o`: the step rule the report used. */
typedef struct tp_diff_side {
    const char *label; /* shown as the run's name, usually its directory */
    const cJSON *rep;
    const tp_run *run; /* may be NULL */
    const tp_report_opts *o;
} tp_diff_side;

typedef struct tp_diff_opts {
    double noise_k;     /* significant when |delta| > noise_k x noise ... (default 3) */
    double min_rel;     /* ... and |delta| > min_rel x baseline (default 0.01) */
    double unknown_rel; /* without per-step values: |delta| > unknown_rel x baseline (0.05) */
    int top_n;          /* kernels compared: the union of both reports' top lists, at most
                         * this many rows (default 30) */
} tp_diff_opts;

void tp_diff_opts_init(tp_diff_opts *o);

/* The comparison as a JSON document (schema "trainprof.diff", docs/report-json.md); NULL
 * only when out of memory. o may be NULL (defaults). Free with cJSON_Delete. */
cJSON *tp_diff_build(const tp_diff_side *a, const tp_diff_side *b, const tp_diff_opts *o);

/* Text rendering of tp_diff_build's document. 0 or TPROF_ERR_IO. */
int tp_diff_write_text(const cJSON *d, FILE *f);

#endif /* TPROF_DIFF_H */
