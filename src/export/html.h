/*
 * html.h — the self-contained HTML report (html.c): one file with inline CSS and plots drawn
 * as inline SVG, no script and no network access, rendered from the report's JSON document
 * (report.h) plus the per-step and per-sample series that only the loaded run holds.
 */
#ifndef TPROF_HTML_H
#define TPROF_HTML_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "analysis/model.h"
#include "analysis/report.h"

/* Plots never hold more points than this per series (longer series are averaged in equal
 * buckets of consecutive samples), nor a heatmap more columns than TP_HTML_MAX_COLS. */
#define TP_HTML_MAX_POINTS 400
#define TP_HTML_MAX_COLS 120

/* Writes the HTML report of `rep` (tp_report_make's report: its typed results and, for the
 * generic views, its document) to f. `run` is the run the report was built from, for the
 * per-step step times (line chart, rank x step heatmap) and the NVML curves; NULL leaves those
 * plots out (a note says so). `o` gives the step rule the report used (NULL: the defaults).
 * Sections the renderer does not know (added to the JSON later) are shown generically. Every
 * string from the run is escaped. Returns 0, or TPROF_ERR_IO when writing failed. */
int tp_html_write(const tp_report *rep, const tp_run *run, const tp_report_opts *o, FILE *f);

/* Writes `s` with &, <, >, " and ' escaped: safe in element text and quoted attributes. */
void tp_html_escape(FILE *f, const char *s);

#endif /* TPROF_HTML_H */
