/*
 * html_sections.h — private to the HTML report (html.c): its curated run-level sections
 * rendered from the typed results (html_sections.c). Every string from the run is escaped
 * (tp_html_escape). Not thread safe (they write to the caller's FILE); nothing allocates.
 */
#ifndef TPROF_HTML_SECTIONS_H
#define TPROF_HTML_SECTIONS_H

#include <stdio.h>

#include "analysis/results.h"
#include "export/html.h"

/* "Findings": each finding with its severity, rule, rank, message, recommendation and
 * evidence (laid out as the generic view lays out the document's), then the values near a
 * threshold. */
void tp_html_findings(FILE *f, const tp_findings_result *fs);

/* The headline (results.h: tp_headline), before the findings: its lines, the first in bold,
 * in a block of the leading finding's severity ("ok" without one). */
void tp_html_headline(FILE *f, const tp_run_results *res);

/* "Throughput": step time, samples/s and tokens/s (total and per GPU), the model and its
 * FLOPs per token with the formula's source, TFLOP/s per GPU and MFU against the peak with
 * its source; a figure past its bound shown flagged, never as a result. */
void tp_html_throughput(FILE *f, const tp_throughput_result *t);

#endif /* TPROF_HTML_SECTIONS_H */
