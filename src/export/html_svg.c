/*
 * html_svg.c — the SVG plots of the HTML report (html.c): line charts, the rank x step
 * heatmap of step times, their axes, ticks and legends. Drawn as inline SVG so the report needs
 * no script and no network access (html.h).
 *
 * Every label goes through tp_html_escape. Series longer than TP_HTML_MAX_POINTS are averaged
 * into that many buckets of consecutive samples, a heatmap into at most TP_HTML_MAX_COLS
 * columns, so the file stays small whatever the run's length.
 */
#include "export/html_svg.h"
#include "analysis/alloc.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trainprof.h"

#define E(s) tp_html_escape(f, (s))

const char *const tp_svg_palette[TP_SVG_NPAL] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                                 "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
                                                 "#9c755f", "#bab0ac"};

/* Tableau 20, the categorical palette of Tableau Software as Vega publishes it (scheme
 * "tableau20", https://vega.github.io/vega/docs/schemes/): ten hues, each dark then light. */
static const char *const phase_palette[20] = {
    "#4e79a7", "#a0cbe8", "#f28e2b", "#ffbe7d", "#59a14f", "#8cd17d", "#b6992d",
    "#f1ce63", "#499894", "#86bcb6", "#e15759", "#ff9d9a", "#79706e", "#bab0ac",
    "#d37295", "#fabfd2", "#b07aa1", "#d4a6c8", "#9d7660", "#d7b5a6"};

/* The names the breakdown chart draws for most runs, with distinct colours among the names
 * that share a chart: a program's phases (trainprof.torch) and the untracked rest; the GPU
 * breakdown's parts (breakdown.c); the kernel classes (gpu.c) and the rest of the fallback
 * bar (html.c). Names meaning the same wait share a hue (data loading is blue in each). */
static const struct {
    const char *name;
    unsigned char colour;
} phase_fixed[] = {
    {"data", 0},           {"forward", 4},          {"backward", 2},
    {"optimizer", 16},     {"untracked", 13},       {"compute", 4},
    {"exposed_comm", 10},  {"memcpy_memset", 6},    {"idle_data", 0},
    {"idle_host_sync", 8}, {"idle_other", 12},      {"gemm", 4},
    {"attention", 5},      {"elementwise/norm", 7}, {"other", 3},
    {"communication (exposed)", 10}, {"communication kernels", 11},
    {"memcpy/memset", 6},  {"GPU idle", 12},        {"data loading", 0},
    {"other (host)", 13},
};

const char *tp_svg_phase_colour(const char *name) {
    if (!name) name = "";
    for (size_t i = 0; i < sizeof phase_fixed / sizeof *phase_fixed; i++)
        if (!strcmp(name, phase_fixed[i].name)) return phase_palette[phase_fixed[i].colour];
    /* any other name: 32-bit FNV-1a of its bytes (Fowler, Noll and Vo,
     * http://www.isthe.com/chongo/tech/comp/fnv/), so it depends on the name alone */
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h ^= *p;
        h *= 16777619u;
    }
    return phase_palette[h % 20];
}

void tp_html_num(FILE *f, double v, int prec) {
    if (!isfinite(v)) fputs("-", f);
    else fprintf(f, "%.*f", prec, v);
}

double tp_svg_nice_step(double range, int n) {
    if (!(range > 0)) return 1;
    double raw = range / n, mag = pow(10, floor(log10(raw))), r = raw / mag;
    return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * mag;
}

void tp_svg_tick_label(FILE *f, double v, double step) {
    int prec = step >= 1 ? 0 : (int)ceil(-log10(step));
    if (prec > 6) prec = 6;
    tp_html_num(f, v, prec);
}

/* Averages series s into at most TP_HTML_MAX_POINTS buckets of consecutive samples;
 * returns how many points went into bx/by (allocated by the caller with that size). */
static size_t downsample(const hseries *s, double *bx, double *by) {
    size_t n = s->n, nb = n <= TP_HTML_MAX_POINTS ? n : TP_HTML_MAX_POINTS;
    for (size_t b = 0; b < nb; b++) {
        size_t i0 = b * n / nb, i1 = (b + 1) * n / nb;
        double sx = 0, sy = 0;
        for (size_t i = i0; i < i1; i++) {
            sx += s->x ? s->x[i] : s->x0 + (double)i;
            sy += s->y[i];
        }
        bx[b] = sx / (double)(i1 - i0);
        by[b] = sy / (double)(i1 - i0);
    }
    return nb;
}

void tp_svg_legend(FILE *f, const char *const *labels, size_t n, size_t color0) {
    fputs("<div class=\"legend\">", f);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "<span><i style=\"background:%s\"></i>",
                tp_svg_palette[(color0 + i) % TP_SVG_NPAL]);
        E(labels[i]);
        fputs("</span>", f);
    }
    fputs("</div>", f);
}

void tp_svg_legend_fills(FILE *f, const char *const *labels, const char *const *fills,
                         size_t n) {
    fputs("<div class=\"legend\">", f);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "<span><i style=\"background:%s\"></i>", fills[i]);
        E(labels[i]);
        fputs("</span>", f);
    }
    fputs("</div>", f);
}

/* A line chart of one or more series, y from 0. Each series is one polyline (class
 * "series", data-points = its points after downsampling). */
void tp_svg_lines(FILE *f, const char *id, const char *xlabel, const char *ylabel,
                      const hseries *s, size_t ns) {
    double x0 = INFINITY, x1 = -INFINITY, y1 = 0;
    double *bx = tp_malloc(TP_HTML_MAX_POINTS * sizeof *bx);
    double *by = tp_malloc(TP_HTML_MAX_POINTS * sizeof *by);
    if (!bx || !by) {
        free(bx);
        free(by);
        return;
    }
    for (size_t k = 0; k < ns; k++) {
        size_t nb = downsample(&s[k], bx, by);
        for (size_t i = 0; i < nb; i++) {
            if (bx[i] < x0) x0 = bx[i];
            if (bx[i] > x1) x1 = bx[i];
            if (by[i] > y1 && isfinite(by[i])) y1 = by[i];
        }
    }
    if (!isfinite(x0)) x0 = 0, x1 = 1;
    if (x1 <= x0) x1 = x0 + 1;
    if (y1 <= 0) y1 = 1;
    double ys = tp_svg_nice_step(y1, 5);
    double top = ceil(y1 * 1.02 / ys) * ys;
    /* else the largest sample is the top: near DBL_MAX, or denormal (a step of 0) */
    if (isfinite(top)) y1 = top;
    double pw = CW - ML - MR, ph = CH - MT - MB;
    fprintf(f, "<svg class=\"chart\" id=\"");
    E(id);
    fprintf(f, "\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">\n",
            CW, CH, CW, CH);
    fputs("<g class=\"axes\">", f);
    /* at most TP_SVG_MAX_TICKS ticks, and none once a step no longer moves the value (a
     * range too far from 0 for its step: the loops never ended) */
    int nt = 0;
    for (double y = 0, prev = NAN; tp_svg_tick_ok(y, prev, y1 + ys / 2, nt);
         prev = y, y += ys, nt++) {
        double py = MT + ph - y / y1 * ph;
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>", ML,
                CW - MR, py, py);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">", ML - 4, py + 4);
        tp_svg_tick_label(f, y, ys);
        fputs("</text>", f);
    }
    double xs = tp_svg_nice_step(x1 - x0, 8);
    nt = 0;
    for (double x = ceil(x0 / xs) * xs, prev = NAN;
         tp_svg_tick_ok(x, prev, x1 + 1e-9 * xs, nt); prev = x, x += xs, nt++) {
        double px = ML + (x - x0) / (x1 - x0) * pw;
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" class=\"tick\"/>", px, px,
                MT + (int)ph, MT + (int)ph + 4);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", px, MT + (int)ph + 16);
        tp_svg_tick_label(f, x, xs);
        fputs("</text>", f);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" class=\"label\">", ML + pw / 2,
            CH - 4);
    E(xlabel);
    fprintf(f, "</text><text x=\"12\" y=\"%.1f\" transform=\"rotate(-90 12 %.1f)\" "
               "text-anchor=\"middle\" class=\"label\">",
            MT + ph / 2, MT + ph / 2);
    E(ylabel);
    fputs("</text></g>\n", f);
    for (size_t k = 0; k < ns; k++) {
        size_t nb = downsample(&s[k], bx, by);
        const char *col = tp_svg_palette[k % TP_SVG_NPAL];
        fprintf(f, "<polyline class=\"series\" data-label=\"");
        E(s[k].label);
        fprintf(f, "\" data-points=\"%zu\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
                   "points=\"",
                nb, col);
        for (size_t i = 0; i < nb; i++)
            fprintf(f, "%s%.1f,%.1f", i ? " " : "", ML + (bx[i] - x0) / (x1 - x0) * pw,
                    MT + ph - (isfinite(by[i]) ? by[i] : 0) / y1 * ph);
        fputs("\"/>\n", f);
        if (nb == 1)
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
                    ML + (bx[0] - x0) / (x1 - x0) * pw, MT + ph - by[0] / y1 * ph, col);
    }
    fputs("</svg>\n", f);
    const char *labels[64];
    size_t nl = ns < 64 ? ns : 64;
    for (size_t k = 0; k < nl; k++) labels[k] = s[k].label;
    if (ns > 1) tp_svg_legend(f, labels, nl, 0);
    free(bx);
    free(by);
}

size_t tp_svg_heat_bucket(size_t maxn) {
    return (maxn + TP_HTML_MAX_COLS - 1) / TP_HTML_MAX_COLS;
}

int tp_svg_rank_series(rank_series *r, const double *ms, size_t n, size_t bucket) {
    size_t np = n <= TP_HTML_MAX_POINTS ? n : TP_HTML_MAX_POINTS;
    size_t nc = bucket && n ? (n + bucket - 1) / bucket : 0;
    r->px = tp_malloc((np ? np : 1) * sizeof *r->px);
    r->py = tp_malloc((np ? np : 1) * sizeof *r->py);
    r->cells = tp_malloc((nc ? nc : 1) * sizeof *r->cells);
    if (!r->px || !r->py || !r->cells) {
        tp_svg_rank_series_free(r);
        return TPROF_ERR_NO_MEMORY;
    }
    /* the line: averaged as tp_svg_lines averages a series (downsample), which then draws
     * these points as they are (a series of at most TP_HTML_MAX_POINTS is its own average) */
    hseries s = {NULL, NULL, ms, (double)r->first, n};
    r->np = downsample(&s, r->px, r->py);
    for (size_t c = 0; c < nc; c++) {
        size_t j0 = c * bucket, j1 = j0 + bucket < n ? j0 + bucket : n;
        double sum = 0;
        for (size_t j = j0; j < j1; j++) sum += ms[j];
        r->cells[c] = sum / (double)(j1 - j0);
    }
    r->ncells = nc;
    r->bucket = bucket;
    r->n = n;
    return TPROF_OK;
}

void tp_svg_rank_series_free(rank_series *r) {
    free(r->px);
    free(r->py);
    free(r->cells);
    r->px = r->py = r->cells = NULL;
    r->np = r->ncells = r->n = 0;
}

void tp_svg_step_chart(FILE *f, const rank_series *rs, size_t nr) {
    hseries *s = tp_calloc(nr ? nr : 1, sizeof *s);
    char (*labels)[32] = tp_calloc(nr ? nr : 1, sizeof *labels);
    size_t ns = 0;
    if (!s || !labels) goto out;
    for (size_t i = 0; i < nr; i++) {
        if (!rs[i].n) continue;
        snprintf(labels[ns], sizeof labels[ns], "rank %d", rs[i].rank);
        s[ns] = (hseries){labels[ns], rs[i].px, rs[i].py, 0, rs[i].np};
        ns++;
    }
    if (ns) tp_svg_lines(f, "step-time", "step", "step time (ms)", s, ns);
    else fputs("<p class=\"note\">No measured steps: no step-time plot.</p>\n", f);
out:
    free(s);
    free(labels);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The colour scale of the heatmap: from the 2nd to the 98th percentile (nearest rank) of the
 * cells' values, the column means, as seaborn.heatmap's robust=True scales its colours
 * (https://seaborn.pydata.org/generated/seaborn.heatmap.html). Scaling on the cells, not on
 * single steps, keeps the range to what the columns can show: a column averages up to
 * hundreds of steps, and one stalled step would otherwise set a top no column reaches. The
 * percentiles keep one stalled column from doing the same. A cell outside is drawn at the
 * end of the scale. Without memory: the cells' smallest and largest. */
static void heat_scale(const rank_series *rs, size_t nr, size_t ncells, double *lo,
                       double *hi) {
    double *v = tp_malloc((ncells ? ncells : 1) * sizeof *v);
    size_t n = 0;
    *lo = INFINITY;
    *hi = -INFINITY;
    for (size_t i = 0; i < nr; i++)
        for (size_t c = 0; c < rs[i].ncells; c++) {
            double m = rs[i].cells[c];
            if (m < *lo) *lo = m;
            if (m > *hi) *hi = m;
            if (v && n < ncells) v[n++] = m;
        }
    if (v && n) {
        qsort(v, n, sizeof *v, cmp_double);
        size_t k_lo = (size_t)ceil(0.02 * (double)n), k_hi = (size_t)ceil(0.98 * (double)n);
        *lo = v[k_lo ? k_lo - 1 : 0];
        *hi = v[k_hi ? k_hi - 1 : 0];
    }
    free(v);
}

/* Rank x step heatmap of step time: steps averaged into at most TP_HTML_MAX_COLS columns;
 * one rect (class "cell") per rank and column, coloured on the cells' values (heat_scale). */
void tp_svg_heatmap(FILE *f, const rank_series *rs, size_t nr) {
    size_t maxn = 0, first = SIZE_MAX;
    for (size_t i = 0; i < nr; i++) {
        if (rs[i].n > maxn) maxn = rs[i].n;
        if (rs[i].n && rs[i].first < first) first = rs[i].first;
    }
    if (!maxn) return;
    size_t bucket = 0; /* the one every series' cells were made with */
    for (size_t i = 0; i < nr && !bucket; i++) bucket = rs[i].n ? rs[i].bucket : 0;
    if (!bucket) return; /* no cells (memory ran out making them: the report says so) */
    size_t ncols = (maxn + bucket - 1) / bucket;
    double lo, hi;
    heat_scale(rs, nr, nr * ncols, &lo, &hi);
    int rowh = nr > 32 ? 8 : 18, left = 70;
    double cellw = (double)(CW - left - MR) / (double)ncols;
    int h = MT + (int)nr * rowh + 40;
    fprintf(f, "<svg class=\"chart\" id=\"heatmap\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" "
               "data-columns=\"%zu\" data-steps-per-column=\"%zu\">\n",
            CW, h, CW, h, ncols, bucket);
    for (size_t i = 0; i < nr; i++) {
        int y = MT + (int)i * rowh;
        if (rowh >= 12) fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">rank %d</text>",
                                left - 4, y + rowh - 5, rs[i].rank);
        for (size_t c = 0; c < ncols; c++) {
            size_t j0 = c * bucket, j1 = j0 + bucket;
            if (c >= rs[i].ncells) break;
            if (j1 > rs[i].n) j1 = rs[i].n;
            double v = rs[i].cells[c], t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
            if (t < 0) t = 0;
            if (t > 1) t = 1;
            /* pale yellow (fast) to dark red (slow) */
            int cr = (int)lround(255 - 75 * t), cg = (int)lround(245 - 225 * t),
                cb = (int)lround(200 - 180 * t);
            fprintf(f, "<rect class=\"cell\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
                       "fill=\"rgb(%d,%d,%d)\"><title>rank %d, step ",
                    left + (double)c * cellw, y, cellw + 0.05, rowh - 1, cr, cg, cb, rs[i].rank);
            if (j1 - j0 == 1) fprintf(f, "%zu", rs[i].first + j0);
            else fprintf(f, "%zu-%zu", rs[i].first + j0, rs[i].first + j1 - 1);
            fprintf(f, ": %.3f ms</title></rect>\n", v);
        }
    }
    int y = MT + (int)nr * rowh + 14;
    fprintf(f, "<text x=\"%d\" y=\"%d\">step %zu</text>", left, y, first);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">step %zu</text>", CW - MR, y,
            first + maxn - 1);
    fprintf(f, "<text x=\"%d\" y=\"%d\">colour: %.3f ms (pale) to %.3f ms (dark), the "
               "2nd to 98th percentile of the cells%s</text>",
            left, y + 16, lo, hi,
            bucket > 1 ? "; a cell is the mean of consecutive steps" : "");
    fputs("</svg>\n", f);
}
