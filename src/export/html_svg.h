/*
 * html_svg.h — private to the HTML report (html.c): the SVG plots of html_svg.c and the
 * chart geometry and colours the report's own charts share with them. Not thread safe (they
 * write to the caller's FILE); no function here allocates beyond the call.
 */
#ifndef TPROF_HTML_SVG_H
#define TPROF_HTML_SVG_H

#include <math.h>
#include <stddef.h>
#include <stdio.h>

#include "export/html.h"

/* A chart's size and margins, in SVG user units (pixels at 100 % zoom). */
enum { CW = 760, CH = 230, ML = 64, MR = 16, MT = 12, MB = 40 };

/* The series colours, used in turn. */
#define TP_SVG_NPAL 10
extern const char *const tp_svg_palette[TP_SVG_NPAL];

/* One series of a line chart: n points (x[i], y[i]); x NULL: x is x0 + i. Not owned. */
/* The most ticks an axis draws: a nice step gives about ten; the bound ends the loops where
 * a step cannot move the value (samples 1 us apart far from the run's start, a sample near
 * DBL_MAX), which never ended. */
#define TP_SVG_MAX_TICKS 64

/* Whether an axis loop draws tick number nt at value v, up to `last`, the tick before it at
 * prev (NAN before the first): v finite, not past last, fewer than TP_SVG_MAX_TICKS drawn, and
 * moved by its step. */
static inline int tp_svg_tick_ok(double v, double prev, double last, int nt) {
    return isfinite(v) && v <= last && nt < TP_SVG_MAX_TICKS && v != prev;
}

typedef struct hseries {
    const char *label;
    const double *x, *y;
    double x0;
    size_t n;
} hseries;

/* One rank's measured step times as the step plots draw them: its line's points averaged
 * into at most TP_HTML_MAX_POINTS, its heatmap row's cells as means of `bucket` consecutive
 * steps, at most TP_HTML_MAX_COLS: what the HTML holds of a rank is bounded whatever the
 * run's length, so that the report does not hold every rank's steps at once (8 bytes a step
 * a rank: 800 MB at 1024 ranks x 100,000 steps). Made by tp_svg_rank_series. */
typedef struct rank_series {
    int rank;
    size_t n;        /* measured steps */
    size_t first;    /* number of the first measured step */
    double *px, *py; /* the line's np points (step number, ms), owned */
    size_t np;
    double *cells;   /* the heatmap row's ncells means (ms), owned */
    size_t ncells, bucket;
} rank_series;

/* The heatmap's steps a cell (its columns at most TP_HTML_MAX_COLS) for ranks of at most
 * maxn measured steps (maxn > 0). */
size_t tp_svg_heat_bucket(size_t maxn);
/* Rank series *r (rank and first set by the caller) from the rank's n measured steps'
 * lengths ms (ms; read only here), the heatmap's cells `bucket` steps each (every rank's
 * with the same bucket, tp_svg_heat_bucket of the largest n). TPROF_OK (0), or
 * TPROF_ERR_NO_MEMORY (*r then holds no steps). */
int tp_svg_rank_series(rank_series *r, const double *ms, size_t n, size_t bucket);
void tp_svg_rank_series_free(rank_series *r);

/* The fill of a phase (a segment of the step breakdown) named `name`: a static string
 * ("#rrggbb") that depends on the name alone, so a phase has the same colour in every report.
 * The common names have fixed, distinct colours; any other one a colour of Tableau 20 picked
 * by a hash of the name (two such names can share one; the legend and titles name them). */
const char *tp_svg_phase_colour(const char *name);

/* v with prec decimals, "-" when not finite. */
void tp_html_num(FILE *f, double v, int prec);

/* A round step (1, 2 or 5 times a power of ten) giving about n ticks over range. */
double tp_svg_nice_step(double range, int n);

/* A tick's value v, with as many decimals as the tick step needs (6 at most). */
void tp_svg_tick_label(FILE *f, double v, double step);

/* A legend: n labels with the colours color0, color0 + 1, ... */
void tp_svg_legend(FILE *f, const char *const *labels, size_t n, size_t color0);

/* A legend: n labels, label i with the fill fills[i]. */
void tp_svg_legend_fills(FILE *f, const char *const *labels, const char *const *fills,
                         size_t n);

/* A line chart of ns series, y from 0, with the SVG element id `id`. Each series is one
 * polyline (class "series", data-points = its points after averaging into at most
 * TP_HTML_MAX_POINTS). Draws nothing when out of memory. */
void tp_svg_lines(FILE *f, const char *id, const char *xlabel, const char *ylabel,
                  const hseries *s, size_t ns);

/* The step-time line chart of nr ranks (a note when none has measured steps). */
void tp_svg_step_chart(FILE *f, const rank_series *rs, size_t nr);

/* The rank x step heatmap of step time: steps averaged into at most TP_HTML_MAX_COLS
 * columns; one rect (class "cell") per rank and column, its colour scaled from the 2nd to the
 * 98th percentile of the cells' values (not of single steps), so long runs show their
 * phases. Nothing without measured steps. Allocates one double per cell for the call. */
void tp_svg_heatmap(FILE *f, const rank_series *rs, size_t nr);

#endif /* TPROF_HTML_SVG_H */
