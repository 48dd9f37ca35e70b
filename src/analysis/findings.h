/*
 * findings.h — the typed findings of the report (results.h: tp_findings_result): the
 * analyses that name a problem (comm_run.c, diagnose.c, ended.c) append a tp_finding with
 * its evidence here; the writer turns them into the document's "findings" and
 * "diagnosis.near" (docs/report-json.md), and the text and HTML renderers read them.
 *
 * Ownership: the findings own their messages and evidence arrays (tp_findings_free).
 * Appending may move the items: hold an index, not a pointer, across appends. Out of
 * memory, a finding or a figure is left out (never a crash). Not thread safe.
 */
#ifndef TPROF_FINDINGS_H
#define TPROF_FINDINGS_H

#include <cjson/cJSON.h>

#include "analysis/results.h"

/* Appends a finding: rank < 0 for none; msg is copied; rec static or NULL. Returns it (valid
 * until the next append), or NULL when out of memory. */
tp_finding *tp_finding_add(tp_findings_result *fs, const char *id, const char *severity,
                           int rank, const char *msg, const char *rec);

/* Appends one figure to f's evidence (a NULL f is ignored). Keys and strings are not copied:
 * static, or living as long as the run and the results. */
void tp_ev_number(tp_finding *f, const char *key, double v);
void tp_ev_bool(tp_finding *f, const char *key, int v);
void tp_ev_string(tp_finding *f, const char *key, const char *s);
void tp_ev_ints(tp_finding *f, const char *key, const int *v, size_t n); /* copied */
void tp_ev_strings(tp_finding *f, const char *key, const char *const *v, size_t n); /* copied */
void tp_ev_straggler(tp_finding *f, const char *key, const tp_straggler *s);

/* Appends {id, unit, rank, value, threshold, finding_from} to the near list. */
void tp_near_add(tp_findings_result *fs, const char *id, const char *unit, int rank, double v,
                 double thr, double from);

/* The writers: each finding as an object appended to `arr` ("findings"), the near list as an
 * array (NULL when it is empty), and a named straggler's object ("stragglers.named[]"). */
void tp_findings_json(cJSON *arr, const tp_findings_result *fs);
cJSON *tp_near_json(const tp_findings_result *fs);
cJSON *tp_straggler_json(const tp_straggler *e);

void tp_findings_free(tp_findings_result *fs);

/* The share of the step the finding explains, from its evidence: data loading, exposed
 * communication, launch-bound or host-sync idle, GPU idle no other rule explains (gpu_busy's
 * "other" idle), a straggler's excess
 * over the median step; 0 for a finding that is not a part of the step (memory, throttling,
 * ranks that ended early). O(evidence). */
double tp_finding_step_share(const tp_finding *f);

/* Builds res->headline (results.h) from the findings and the ranks' results: call after every
 * finding was appended. No allocation; never fails. */
void tp_headline_build(tp_run_results *res);

/* The document's "headline" object from it (NULL when out of memory). */
cJSON *tp_headline_json(const tp_run_results *res);

#endif
