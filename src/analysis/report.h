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
    const char *step_name;          /* --step-name; NULL = DESIGN §4 default rule */
    int warmup;                     /* warm-up steps, default 1 */
    const char *const *data_names;  /* range names that mark data loading */
    size_t ndata_names;
    int top_n;                      /* rows in the top-range tables, default 15 */
    double comm_warn_share;         /* exposed communication over this share of the step is a
                                     * warning finding: default 0.10 (DESIGN §5) */
    double comm_crit_share;         /* ... and over this, critical: default 0.30 (issue 5) */
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
