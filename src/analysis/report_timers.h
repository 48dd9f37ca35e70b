/*
 * report_timers.h — Megatron's timers in the report (report_timers.c): a rank's "timers" and the
 * run's "timers" (docs/report-json.md), computed into their results (results.h) and written
 * from them. Not thread safe on one result; distinct ranks may be computed at once.
 */
#ifndef TPROF_REPORT_TIMERS_H
#define TPROF_REPORT_TIMERS_H

#include <cjson/cJSON.h>

#include "analysis/model.h"
#include "analysis/results.h"
#include "analysis/steps.h"

/* Rank p's timers (ranges of category "timers" in the "trainprof" domain) into *out, ms per
 * measured step (meas, nm; meas NULL: in total), in order of first use; and the rank's
 * "timers" into rs. Out of memory: nothing. */
void tp_timers_rank(cJSON *rs, tp_timers_result *out, const tp_process *p, const tp_step *meas,
                    size_t nm);
/* Megatron's timers tables across ranks into *out, from each rank's timers (res): the same
 * text Megatron prints, with ms per measured step as the unit. */
void tp_timers_run(tp_run_timers_result *out, const tp_run_results *res);
/* The run's "timers" from its results. */
void tp_timers_json(cJSON *rep, const tp_run_timers_result *t);

#endif /* TPROF_REPORT_TIMERS_H */
