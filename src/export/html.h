/*
 * html.h — the self-contained HTML report (html.c): one file with inline CSS and plots drawn
 * as inline SVG, no script and no network access, rendered from the report (report.h: its
 * typed results and its JSON document) plus the per-step and per-sample series that only the
 * loaded run holds.
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

/* Writes the HTML report of `rep` (tp_report_make's report) to f. The curated sections read
 * the typed results (rep->res) where they have them, the rest the document (rep->doc);
 * rep->run, the run the report was built from, gives the per-step step times (line chart,
 * rank x step heatmap) and the NVML curves: NULL leaves those plots out (a note says so;
 * the results' strings still point into the run, which must be loaded). `o` gives the step
 * rule the report used (NULL: the defaults). Sections the renderer does not know (added to
 * the JSON later) are shown generically. Every string from the run is escaped. Returns 0,
 * or TPROF_ERR_IO when writing failed. */
int tp_html_write(const tp_report *rep, const tp_report_opts *o, FILE *f);

/* Writes `s` with &, <, >, " and ' escaped: safe in element text and quoted attributes. */
void tp_html_escape(FILE *f, const char *s);

#endif /* TPROF_HTML_H */
