/*
 * stragglers.h — the ranks that hold the others back (stragglers.c, for diagnose.c): step
 * time and collective start lags over the ranks of a run whose clocks are aligned (clocks.h),
 * each straggler named with the criterion it crossed and its GPU compared with the others'.
 * Fields in docs/report-json.md ("stragglers").
 */
#ifndef TPROF_STRAGGLERS_H
#define TPROF_STRAGGLERS_H

#include <cjson/cJSON.h>

#include "analysis/clocks.h"
#include "analysis/report.h"
#include "analysis/results.h"

/* Fills res->stragglers (zeroed first; left absent under two ranks or when out of memory)
 * from the aligned clocks c of the run and the ranks' typed results in res (step times,
 * GPUs); o: the step name, warm-up and straggler thresholds. Time and memory are linear in
 * the matched arrivals (4 bytes each beside them) and the ranks; one rank's steps are held
 * at a time. */
void tp_stragglers_compute(tp_run_results *res, const tp_clocks *c, const tp_report_opts *o);

/* The document's "stragglers" from the typed result: nothing when it is absent. */
void tp_stragglers_json(cJSON *rep, const tp_stragglers_result *s);

#endif /* TPROF_STRAGGLERS_H */
