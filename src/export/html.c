/*
 * html.c — the self-contained HTML report: inline CSS, plots drawn here as inline SVG, no
 * script and no network access, so that the file can be mailed, attached to a bug report
 * or opened on an air-gapped cluster and look the same everywhere.
 *
 * Everything shown comes from the report's JSON document, so that the HTML, the text and
 * report.json never disagree; the only exception is what the document summarises rather
 * than lists (step times per step, the NVML sample series), which is read from the loaded
 * run with the same step rule (steps.c) the report used. Sections this file does not know
 * (added to the document later: throughput, stragglers, ...) are rendered generically as
 * nested tables, so a new section shows up in the HTML the day it appears in the JSON.
 *
 * Names in a run come from user programs (range names, kernel names, hosts): every string
 * goes through tp_html_escape, in text and in attributes alike. Long series are averaged
 * into at most TP_HTML_MAX_POINTS buckets, so a million-step run gives a small file.
 */
#define _GNU_SOURCE
#include "export/html.h"
#include "analysis/jsonget.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/gpu.h"
#include "analysis/steps.h"
#include "trainprof.h"

/* ------------------------------------------------------------------ JSON access */


/* ------------------------------------------------------------------ text */

void tp_html_escape(FILE *f, const char *s) {
    if (!s) return;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default:
            /* control characters are not allowed in HTML text: show them as U+FFFD */
            if ((*p < 0x20 && *p != '\n' && *p != '\t') || *p == 0x7f) fputs("&#xfffd;", f);
            else fputc(*p, f);
        }
    }
}

#define E(s) tp_html_escape(f, (s))

static void fnum(FILE *f, double v, int prec) {
    if (!isfinite(v)) fputs("-", f);
    else fprintf(f, "%.*f", prec, v);
}

/* A table cell holding a number, or "-" when the member is absent. */
static void td_num(FILE *f, const cJSON *o, const char *k, int prec, double scale) {
    fputs("<td class=\"n\">", f);
    if (tp_jhas(o, k)) fnum(f, tp_jnum(o, k) * scale, prec);
    else fputs("-", f);
    fputs("</td>", f);
}

static void bytes_text(FILE *f, double b) {
    static const char *const u[] = {"B", "kB", "MB", "GB", "TB"};
    int i = 0;
    while (fabs(b) >= 1000 && i < 4) b /= 1000, i++;
    fprintf(f, i ? "%.2f %s" : "%.0f %s", b, u[i]);
}

static const char *const palette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                      "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
#define NPAL (sizeof palette / sizeof *palette)

/* ------------------------------------------------------------------ generic JSON view */

static void gen_value(FILE *f, const cJSON *v, int depth);

static void gen_scalar(FILE *f, const cJSON *v) {
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (d == floor(d) && fabs(d) < 1e15) fprintf(f, "%.0f", d);
        else fprintf(f, "%.6g", d);
    } else if (cJSON_IsString(v)) {
        E(v->valuestring);
    } else if (cJSON_IsBool(v)) {
        fputs(cJSON_IsTrue(v) ? "true" : "false", f);
    } else {
        fputs("null", f);
    }
}

/* Objects become key/value tables, arrays of objects tables with a column per key (of the
 * first rows), arrays of scalars comma lists; depth and length are bounded. */
static void gen_value(FILE *f, const cJSON *v, int depth) {
    if (depth > 5) {
        fputs("&hellip;", f);
        return;
    }
    if (cJSON_IsObject(v)) {
        if (!v->child) {
            fputs("{}", f);
            return;
        }
        fputs("<table class=\"kv\">", f);
        const cJSON *c;
        cJSON_ArrayForEach(c, v) {
            fputs("<tr><th>", f);
            E(c->string);
            fputs("</th><td>", f);
            gen_value(f, c, depth + 1);
            fputs("</td></tr>", f);
        }
        fputs("</table>", f);
    } else if (cJSON_IsArray(v)) {
        int n = cJSON_GetArraySize(v), all_obj = n > 0;
        const cJSON *c;
        cJSON_ArrayForEach(c, v) all_obj &= cJSON_IsObject(c);
        if (!n) {
            fputs("[]", f);
        } else if (all_obj) {
            const char *cols[16];
            int nc = 0, row = 0;
            cJSON_ArrayForEach(c, v) {
                if (row++ >= 20) break;
                const cJSON *k;
                cJSON_ArrayForEach(k, c) {
                    int seen = 0;
                    for (int i = 0; i < nc; i++) seen |= !strcmp(cols[i], k->string);
                    if (!seen && nc < 16) cols[nc++] = k->string;
                }
            }
            fputs("<table class=\"grid\"><tr>", f);
            for (int i = 0; i < nc; i++) {
                fputs("<th>", f);
                E(cols[i]);
                fputs("</th>", f);
            }
            fputs("</tr>", f);
            row = 0;
            cJSON_ArrayForEach(c, v) {
                if (row++ >= 50) break;
                fputs("<tr>", f);
                for (int i = 0; i < nc; i++) {
                    fputs("<td>", f);
                    const cJSON *cell = tp_jobj(c, cols[i]);
                    if (cell) gen_value(f, cell, depth + 1);
                    fputs("</td>", f);
                }
                fputs("</tr>", f);
            }
            fputs("</table>", f);
            if (n > 50) fprintf(f, "<p class=\"note\">%d more rows not shown</p>", n - 50);
        } else {
            int i = 0;
            cJSON_ArrayForEach(c, v) {
                if (i == 50) {
                    fprintf(f, ", &hellip; (%d in all)", n);
                    break;
                }
                if (i++) fputs(", ", f);
                if (cJSON_IsObject(c) || cJSON_IsArray(c)) gen_value(f, c, depth + 1);
                else gen_scalar(f, c);
            }
        }
    } else {
        gen_scalar(f, v);
    }
}

/* ------------------------------------------------------------------ SVG plots */

enum { CW = 760, CH = 230, ML = 64, MR = 16, MT = 12, MB = 40 };

typedef struct hseries {
    const char *label;
    const double *x, *y; /* x NULL: the index plus x0 */
    double x0;
    size_t n;
} hseries;

static double nice_step(double range, int n) {
    if (!(range > 0)) return 1;
    double raw = range / n, mag = pow(10, floor(log10(raw))), r = raw / mag;
    return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * mag;
}

static void tick_label(FILE *f, double v, double step) {
    int prec = step >= 1 ? 0 : (int)ceil(-log10(step));
    if (prec > 6) prec = 6;
    fnum(f, v, prec);
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

static void legend(FILE *f, const char *const *labels, size_t n, size_t color0) {
    fputs("<div class=\"legend\">", f);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "<span><i style=\"background:%s\"></i>", palette[(color0 + i) % NPAL]);
        E(labels[i]);
        fputs("</span>", f);
    }
    fputs("</div>", f);
}

/* A line chart of one or more series, y from 0. Each series is one polyline (class
 * "series", data-points = its points after downsampling). */
static void svg_lines(FILE *f, const char *id, const char *xlabel, const char *ylabel,
                      const hseries *s, size_t ns) {
    double x0 = INFINITY, x1 = -INFINITY, y1 = 0;
    double *bx = malloc(TP_HTML_MAX_POINTS * sizeof *bx), *by = malloc(TP_HTML_MAX_POINTS * sizeof *by);
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
    double ys = nice_step(y1, 5);
    y1 = ceil(y1 * 1.02 / ys) * ys;
    double pw = CW - ML - MR, ph = CH - MT - MB;
    fprintf(f, "<svg class=\"chart\" id=\"");
    E(id);
    fprintf(f, "\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">\n",
            CW, CH, CW, CH);
    fputs("<g class=\"axes\">", f);
    for (double y = 0; y <= y1 + ys / 2; y += ys) {
        double py = MT + ph - y / y1 * ph;
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>", ML,
                CW - MR, py, py);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">", ML - 4, py + 4);
        tick_label(f, y, ys);
        fputs("</text>", f);
    }
    double xs = nice_step(x1 - x0, 8);
    for (double x = ceil(x0 / xs) * xs; x <= x1 + 1e-9 * xs; x += xs) {
        double px = ML + (x - x0) / (x1 - x0) * pw;
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" class=\"tick\"/>", px, px,
                MT + (int)ph, MT + (int)ph + 4);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", px, MT + (int)ph + 16);
        tick_label(f, x, xs);
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
        const char *col = palette[k % NPAL];
        fprintf(f, "<polyline class=\"series\" data-label=\"");
        E(s[k].label);
        fprintf(f, "\" data-points=\"%zu\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
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
    if (ns > 1) legend(f, labels, nl, 0);
    free(bx);
    free(by);
}

/* ------------------------------------------------------------------ per-step series */

typedef struct rank_series {
    const cJSON *json; /* the rank's entry in the document */
    int rank;
    double *ms; /* measured steps' lengths */
    size_t n;
    size_t first; /* number of the first measured step */
} rank_series;

static size_t collect_steps(const cJSON *rep, const tp_run *run, const tp_report_opts *o,
                            rank_series **out) {
    int nr = cJSON_GetArraySize(tp_jobj(rep, "ranks"));
    rank_series *v = calloc(nr > 0 ? (size_t)nr : 1, sizeof *v);
    size_t n = 0;
    const cJSON *r;
    if (!v) return 0;
    cJSON_ArrayForEach(r, tp_jobj(rep, "ranks")) {
        rank_series *rs = &v[n++];
        rs->json = r;
        rs->rank = (int)tp_jnum(r, "rank");
        const tp_process *p = tp_rank_process(run, tp_jstr(r, "host"), tp_jnum(r, "pid"));
        tp_steps s;
        if (!p || tp_find_steps(p, o->step_name, o->warmup, &s) != TPROF_OK) continue;
        size_t nm = s.nsteps - s.nwarmup;
        if (nm && (rs->ms = malloc(nm * sizeof *rs->ms))) {
            for (size_t i = 0; i < nm; i++)
                rs->ms[i] = (double)(s.steps[s.nwarmup + i].end - s.steps[s.nwarmup + i].start) / 1e6;
            rs->n = nm;
            rs->first = s.nwarmup;
        }
        tp_steps_free(&s);
    }
    *out = v;
    return n;
}

static void step_chart(FILE *f, const rank_series *rs, size_t nr) {
    hseries *s = calloc(nr ? nr : 1, sizeof *s);
    char (*labels)[32] = calloc(nr ? nr : 1, sizeof *labels);
    size_t ns = 0;
    if (!s || !labels) goto out;
    for (size_t i = 0; i < nr; i++) {
        if (!rs[i].n) continue;
        snprintf(labels[ns], sizeof labels[ns], "rank %d", rs[i].rank);
        s[ns] = (hseries){labels[ns], NULL, rs[i].ms, (double)rs[i].first, rs[i].n};
        ns++;
    }
    if (ns) svg_lines(f, "step-time", "step", "step time (ms)", s, ns);
    else fputs("<p class=\"note\">No measured steps: no step-time plot.</p>\n", f);
out:
    free(s);
    free(labels);
}

/* Rank x step heatmap of step time: steps averaged into at most TP_HTML_MAX_COLS columns;
 * one rect (class "cell") per rank and column, colour from the smallest to the largest. */
static void heatmap(FILE *f, const rank_series *rs, size_t nr) {
    size_t maxn = 0, first = SIZE_MAX;
    for (size_t i = 0; i < nr; i++) {
        if (rs[i].n > maxn) maxn = rs[i].n;
        if (rs[i].n && rs[i].first < first) first = rs[i].first;
    }
    if (!maxn) return;
    size_t bucket = (maxn + TP_HTML_MAX_COLS - 1) / TP_HTML_MAX_COLS, ncols = (maxn + bucket - 1) / bucket;
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < nr; i++)
        for (size_t j = 0; j < rs[i].n; j++) {
            if (rs[i].ms[j] < lo) lo = rs[i].ms[j];
            if (rs[i].ms[j] > hi) hi = rs[i].ms[j];
        }
    int rowh = nr > 32 ? 8 : 18, left = 70;
    double cellw = (double)(CW - left - MR) / (double)ncols;
    int h = MT + (int)nr * rowh + 40;
    fprintf(f, "<svg class=\"chart\" id=\"heatmap\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" data-columns=\"%zu\" "
               "data-steps-per-column=\"%zu\">\n",
            CW, h, CW, h, ncols, bucket);
    for (size_t i = 0; i < nr; i++) {
        int y = MT + (int)i * rowh;
        if (rowh >= 12) fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">rank %d</text>",
                                left - 4, y + rowh - 5, rs[i].rank);
        for (size_t c = 0; c < ncols; c++) {
            size_t j0 = c * bucket, j1 = j0 + bucket;
            if (j0 >= rs[i].n) break;
            if (j1 > rs[i].n) j1 = rs[i].n;
            double sum = 0;
            for (size_t j = j0; j < j1; j++) sum += rs[i].ms[j];
            double v = sum / (double)(j1 - j0), t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
            /* pale yellow (fast) to dark red (slow) */
            int cr = (int)(255 - 75 * t), cg = (int)(245 - 225 * t), cb = (int)(200 - 180 * t);
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
    fprintf(f, "<text x=\"%d\" y=\"%d\">colour: %.3f ms (pale) to %.3f ms (dark)%s</text>", left,
            y + 16, lo, hi, bucket > 1 ? "; a column is the mean of consecutive steps" : "");
    fputs("</svg>\n", f);
}

/* ------------------------------------------------------------------ breakdown */

#define MAX_SEG 16
typedef struct bd_row {
    int rank;
    double step_ms;
    int nseg;
    const char *seg[MAX_SEG];
    double ms[MAX_SEG];
} bd_row;

static void bd_add(bd_row *b, const char *label, double v) {
    if (b->nseg < MAX_SEG && isfinite(v) && v > 0) {
        b->seg[b->nseg] = label;
        b->ms[b->nseg++] = v;
    }
}

/* The rank's step breakdown (breakdown.h), in ms per measured step: for a CPU job each range's
 * mean and the untracked rest; for a GPU job the parts that partition the step: compute,
 * exposed communication, copies and idle by its parts (the step itself, overlapped
 * communication, hidden under compute, and start-of-step idle, a part of idle, are left
 * out). Returns the segments. */
static int bd_from_result(bd_row *b, const tp_breakdown_result *bd) {
    if (!bd->gpu_basis) {
        for (size_t i = 0; i < bd->nranges; i++) bd_add(b, bd->ranges[i].name, bd->ranges[i].ms.mean);
        if (bd->has_cpu) bd_add(b, "untracked", bd->untracked_ms.mean);
        return b->nseg;
    }
    if (!bd->has_parts) return b->nseg;
    static const tp_bd_part parts[] = {TP_BD_COMPUTE,   TP_BD_EXPOSED_COMM,   TP_BD_MEMCPY,
                                       TP_BD_IDLE_DATA, TP_BD_IDLE_HOST_SYNC, TP_BD_IDLE_OTHER};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        bd_add(b, tp_bd_part_name(parts[i]), bd->ms[parts[i]].mean);
    return b->nseg;
}

/* Without one: the GPU's kernel classes (compute), exposed communication, copies and idle
 * time of the busiest device, from the rank's GPU and communication results; for a rank
 * without GPU records, data loading and the rest of the step. */
static void bd_fallback(bd_row *b, const tp_rank_result *rr) {
    const tp_gpu_device_result *dev = NULL;
    for (size_t i = 0; i < rr->gpu.ndevices; i++)
        if (!dev || rr->gpu.devices[i].kernel_ms > dev->kernel_ms) dev = &rr->gpu.devices[i];
    double data = rr->data.found && rr->data.per_step ? rr->data.ms : 0;
    if (!dev) {
        bd_add(b, "data loading", data);
        bd_add(b, "other (host)", b->step_ms - data);
        return;
    }
    for (int c = 0; c < TP_GPU_NCLASSES; c++)
        if (c != TP_KC_COMM) bd_add(b, tp_kernel_class_name(c), dev->kernel_ms_by_class[c]);
    const tp_comm_result *cm = &rr->comm;
    if (!cm->nothing && cm->resolved && cm->exposure.has_figures)
        bd_add(b, "communication (exposed)", cm->exposure.exposed_ms.mean);
    else
        bd_add(b, "communication kernels", dev->kernel_ms_by_class[TP_KC_COMM]);
    bd_add(b, "memcpy/memset", dev->memcpy_memset_ms);
    if (dev->has_busy_share) bd_add(b, "GPU idle", b->step_ms * (1 - dev->busy_share));
}

static void breakdown_chart(FILE *f, const tp_run_results *res) {
    int nr = (int)res->nranks;
    if (nr <= 0) return;
    bd_row *rows = calloc((size_t)nr, sizeof *rows);
    if (!rows) return;
    int n = 0, generic = 0;
    for (size_t i = 0; i < res->nranks; i++) {
        const tp_rank_result *rr = &res->ranks[i];
        bd_row *b = &rows[n++];
        b->rank = rr->rank;
        b->step_ms = rr->steps.mean_ms;
        if (rr->breakdown.present && bd_from_result(b, &rr->breakdown) >= 2) {
            generic = 1;
        } else {
            b->nseg = 0;
            bd_fallback(b, rr);
        }
    }
    /* one colour per label across ranks */
    const char *labels[64];
    size_t nl = 0;
    double xmax = 0;
    for (int i = 0; i < n; i++) {
        double t = 0;
        for (int k = 0; k < rows[i].nseg; k++) {
            size_t j = 0;
            while (j < nl && strcmp(labels[j], rows[i].seg[k])) j++;
            if (j == nl && nl < 64) labels[nl++] = rows[i].seg[k];
            t += rows[i].ms[k];
        }
        if (t > xmax) xmax = t;
        if (rows[i].step_ms > xmax) xmax = rows[i].step_ms;
    }
    if (!nl || xmax <= 0) {
        fputs("<p class=\"note\">No breakdown: the report has no GPU records or steps.</p>\n", f);
        free(rows);
        return;
    }
    fprintf(f, "<p class=\"note\">%s</p>\n",
            generic ? "ms per measured step, from the report's breakdown (the parts that add up to "
                      "the step; overlapped communication runs under compute). The black tick "
                      "is the mean step time."
                    : "ms per measured step: kernel time by class on the busiest GPU, exposed "
                      "communication, copies and GPU idle time (kernels on concurrent streams "
                      "can make a bar longer than the step). The black tick is the mean step "
                      "time.");
    int rowh = 24, left = 70, h = MT + n * rowh + 30;
    double pw = CW - left - MR, xs = nice_step(xmax, 6);
    xmax = ceil(xmax / xs) * xs;
    fprintf(f, "<svg class=\"chart\" id=\"breakdown\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">\n",
            CW, h, CW, h);
    for (double x = 0; x <= xmax + xs / 2; x += xs) {
        double px = left + x / xmax * pw;
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" class=\"grid\"/>", px, px, MT,
                MT + n * rowh);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", px, MT + n * rowh + 14);
        tick_label(f, x, xs);
        fputs("</text>", f);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" class=\"label\">ms per step</text>\n",
            left + pw / 2, h - 2);
    for (int i = 0; i < n; i++) {
        int y = MT + i * rowh;
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">rank %d</text>", left - 4,
                y + rowh - 8, rows[i].rank);
        double x = 0;
        for (int k = 0; k < rows[i].nseg; k++) {
            size_t j = 0;
            while (j < nl && strcmp(labels[j], rows[i].seg[k])) j++;
            fprintf(f, "<rect class=\"seg\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
                       "fill=\"%s\"><title>rank %d, ",
                    left + x / xmax * pw, y + 2, rows[i].ms[k] / xmax * pw, rowh - 4,
                    palette[j % NPAL], rows[i].rank);
            E(rows[i].seg[k]);
            fprintf(f, ": %.3f ms</title></rect>\n", rows[i].ms[k]);
            x += rows[i].ms[k];
        }
        if (rows[i].step_ms > 0) {
            double px = left + rows[i].step_ms / xmax * pw;
            fprintf(f, "<line class=\"steptick\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/>\n",
                    px, px, y, y + rowh);
        }
    }
    fputs("</svg>\n", f);
    legend(f, labels, nl, 0);
    free(rows);
}

/* ------------------------------------------------------------------ NVML curves */

enum { NVM_POWER, NVM_UTIL, NVM_MEM, NVM_SM, NVM_TEMP, NVM_N };
static const char *const nvm_suffix[NVM_N] = {"power_w", "util_percent", "mem_used_bytes",
                                              "sm_clock_mhz", "temp_c"};
static const char *const nvm_title[NVM_N] = {"power (W)", "utilisation (%)", "memory used (GiB)",
                                             "SM clock (MHz)", "temperature (C)"};
static const double nvm_scale[NVM_N] = {1, 1, 1.0 / 1073741824.0, 1, 1};

typedef struct nvm_series {
    unsigned idx;
    int metric;
    double *x, *y;
    size_t n, cap;
    char label[32];
} nvm_series;

static int gpu_counter(const char *name, unsigned *idx, int *metric) {
    if (strncmp(name, "gpu", 3) || !isdigit((unsigned char)name[3])) return 0;
    char *end;
    unsigned long i = strtoul(name + 3, &end, 10);
    if (*end != '.' || i > 1u << 16) return 0;
    for (int m = 0; m < NVM_N; m++)
        if (!strcmp(end + 1, nvm_suffix[m])) {
            *idx = (unsigned)i;
            *metric = m;
            return 1;
        }
    return 0;
}

/* The GPU sampler's series of one process (a rank sampling itself, or the node sampler). */
static void nvml_process(FILE *f, const tp_process *p, double t0_ns, int *chart_no) {
    nvm_series *v = NULL;
    size_t n = 0;
    int oom = 0;
    for (size_t ti = 0; ti < p->nthreads && !oom; ti++) {
        const tp_thread *t = &p->threads[ti];
        for (size_t k = 0; k < t->ncounters && !oom; k++) {
            unsigned idx;
            int m;
            if (!gpu_counter(t->counters[k].name, &idx, &m)) continue;
            size_t j = 0;
            while (j < n && (v[j].idx != idx || v[j].metric != m)) j++;
            if (j == n) {
                nvm_series *nv = realloc(v, (n + 1) * sizeof *nv);
                if (!nv) { oom = 1; break; }
                v = nv;
                memset(&v[n], 0, sizeof v[n]);
                v[n].idx = idx;
                v[n].metric = m;
                snprintf(v[n].label, sizeof v[n].label, "GPU %u", idx);
                n++;
            }
            nvm_series *s = &v[j];
            if (s->n == s->cap) {
                size_t cap = s->cap ? s->cap * 2 : 256;
                double *nx = realloc(s->x, cap * sizeof *nx);
                if (!nx) { oom = 1; break; }
                s->x = nx;
                double *ny = realloc(s->y, cap * sizeof *ny);
                if (!ny) { oom = 1; break; }
                s->y = ny;
                s->cap = cap;
            }
            s->x[s->n] = ((double)tp_to_realtime(p, t->counters[k].ts) - t0_ns) / 1e9;
            s->y[s->n++] = t->counters[k].value * nvm_scale[m];
        }
    }
    if (n && !oom) {
        char who[96];
        tp_process_label(p, who, sizeof who);
        fputs("<h3>", f);
        E(p->hdr.host);
        fputs(" &mdash; ", f);
        E(who);
        fputs("</h3>\n<div class=\"charts\">", f);
        for (int m = 0; m < NVM_N; m++) {
            hseries hs[64];
            size_t nh = 0;
            for (size_t j = 0; j < n && nh < 64; j++)
                if (v[j].metric == m && v[j].n)
                    hs[nh++] = (hseries){v[j].label, v[j].x, v[j].y, 0, v[j].n};
            if (!nh) continue;
            char id[48];
            snprintf(id, sizeof id, "nvml-%d-%s", (*chart_no)++, nvm_suffix[m]);
            fputs("<figure><figcaption>", f);
            E(nvm_title[m]);
            fputs("</figcaption>", f);
            svg_lines(f, id, "seconds since the run started", nvm_title[m], hs, nh);
            fputs("</figure>", f);
        }
        fputs("</div>\n", f);
    }
    for (size_t j = 0; j < n; j++) {
        free(v[j].x);
        free(v[j].y);
    }
    free(v);
}

/* The NVML series of every process that sampled, against seconds since the first process
 * began. */
static void nvml_curves(FILE *f, const tp_run *run) {
    double t0 = 0;
    for (size_t i = 0; i < run->nprocs; i++) {
        double s = (double)tp_to_realtime(&run->procs[i], run->procs[i].first_ts);
        if (t0 <= 0 || s < t0) t0 = s;
    }
    int chart_no = 0;
    for (size_t i = 0; i < run->nprocs; i++) nvml_process(f, &run->procs[i], t0, &chart_no);
    if (!chart_no) fputs("<p class=\"note\">No NVML samples in this run.</p>\n", f);
}

/* ------------------------------------------------------------------ tables */

static void findings_section(FILE *f, const cJSON *rep) {
    const cJSON *fs = tp_jobj(rep, "findings"), *fd;
    fputs("<h2 id=\"findings\">Findings</h2>\n", f);
    if (!cJSON_GetArraySize(fs)) {
        fputs("<p class=\"ok\">No rule found a problem.</p>\n", f);
        return;
    }
    fputs("<ul class=\"findings\">\n", f);
    cJSON_ArrayForEach(fd, fs) {
        const char *sev = tp_jstr(fd, "severity");
        fputs("<li class=\"finding sev-", f);
        for (const char *c = sev; *c; c++) fputc(isalnum((unsigned char)*c) ? *c : '_', f);
        fputs("\"><span class=\"sev\">", f);
        E(*sev ? sev : "note");
        fputs("</span> ", f);
        if (tp_jobj(fd, "id")) {
            fputs("<code>", f);
            E(tp_jstr(fd, "id"));
            fputs("</code> ", f);
        }
        if (tp_jhas(fd, "rank")) fprintf(f, "(rank %.0f) ", tp_jnum(fd, "rank"));
        fputs("<span class=\"msg\">", f);
        E(tp_jstr(fd, "message"));
        fputs("</span>", f);
        const cJSON *c;
        cJSON_ArrayForEach(c, fd) {
            const char *k = c->string;
            if (!strcmp(k, "id") || !strcmp(k, "severity") || !strcmp(k, "message") ||
                !strcmp(k, "rank"))
                continue;
            fputs("<div class=\"evidence\"><b>", f);
            E(k);
            fputs("</b> ", f);
            gen_value(f, c, 1);
            fputs("</div>", f);
        }
        fputs("</li>\n", f);
    }
    fputs("</ul>\n", f);
}

static void steps_table(FILE *f, const cJSON *rep) {
    fputs("<table class=\"grid\" id=\"steps-table\"><tr><th>rank</th><th>host:pid</th><th>step "
          "source</th><th>steps</th><th>warm-up</th><th>mean ms</th><th>p50 ms</th><th>p90 "
          "ms</th><th>min ms</th><th>max ms</th></tr>\n",
          f);
    const cJSON *r;
    cJSON_ArrayForEach(r, tp_jobj(rep, "ranks")) {
        const cJSON *s = tp_jobj(r, "steps");
        fprintf(f, "<tr><td>%.0f</td><td>", tp_jnum(r, "rank"));
        E(tp_jstr(r, "host"));
        fprintf(f, ":%.0f</td><td>", tp_jnum(r, "pid"));
        E(tp_jstr(s, "source"));
        if (tp_jobj(s, "name")) {
            fputs(" &ldquo;", f);
            E(tp_jstr(s, "name"));
            fputs("&rdquo;", f);
        }
        fputs("</td>", f);
        td_num(f, s, "count", 0, 1);
        td_num(f, s, "warmup", 0, 1);
        td_num(f, s, "mean_ms", 3, 1);
        td_num(f, s, "p50_ms", 3, 1);
        td_num(f, s, "p90_ms", 3, 1);
        td_num(f, s, "min_ms", 3, 1);
        td_num(f, s, "max_ms", 3, 1);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void comm_table(FILE *f, const cJSON *rep) {
    const cJSON *comm = tp_jobj(rep, "communication"), *c, *op;
    fputs("<h2 id=\"communication\">Communication</h2>\n", f);
    if (!cJSON_GetArraySize(tp_jobj(comm, "communicators"))) {
        fputs("<p class=\"note\">No communication recorded.</p>\n", f);
        return;
    }
    fputs("<table class=\"grid\" id=\"comm-table\"><tr><th>communicator</th><th>size</th><th>role "
          "(guess)</th><th>op</th><th>ranks</th><th>count per rank</th><th>bytes per "
          "rank</th><th>mean ms</th><th>time ms per rank</th><th>algbw GB/s</th><th>busbw "
          "GB/s</th><th>timing</th></tr>\n",
          f);
    cJSON_ArrayForEach(c, tp_jobj(comm, "communicators")) {
        cJSON_ArrayForEach(op, tp_jobj(c, "ops")) {
            fputs("<tr><td><code>", f);
            E(tp_jstr(c, "id"));
            fprintf(f, "</code></td><td class=\"n\">%.0f</td><td>", tp_jnum(c, "size"));
            E(tp_jstr(c, "role_guess"));
            fputs("</td><td>", f);
            E(tp_jstr(op, "op"));
            fputs("</td>", f);
            td_num(f, op, "ranks", 0, 1);
            td_num(f, op, "count_per_rank", 0, 1);
            fputs("<td class=\"n\">", f);
            bytes_text(f, tp_jnum(op, "bytes_per_rank"));
            fputs("</td>", f);
            td_num(f, op, "mean_ms", 3, 1);
            fputs("<td class=\"n\">", f);
            if (tp_jhas(op, "mean_ms")) fnum(f, tp_jnum(op, "mean_ms") * tp_jnum(op, "count_per_rank"), 2);
            else fputs("-", f);
            fputs("</td>", f);
            td_num(f, op, "algbw_gbs", 2, 1);
            td_num(f, op, "busbw_gbs", 2, 1);
            fputs("<td>", f);
            E(tp_jstr(op, "time_source"));
            fputs("</td></tr>\n", f);
        }
    }
    fputs("</table>\n", f);
    const cJSON *ex = tp_jobj(comm, "exposure");
    if (cJSON_GetArraySize(tp_jobj(ex, "ranks"))) {
        fputs("<h3>Exposed communication per rank</h3>\n<table class=\"grid\"><tr><th>rank</th>"
              "<th>basis</th><th>exposed ms</th><th>overlapped ms</th><th>window ms</th>"
              "<th>exposed share</th></tr>\n",
              f);
        const cJSON *r;
        cJSON_ArrayForEach(r, tp_jobj(ex, "ranks")) {
            fprintf(f, "<tr><td>%.0f</td><td>", tp_jnum(r, "rank"));
            E(tp_jstr(r, "basis"));
            fputs("</td>", f);
            td_num(f, r, "exposed_ms_mean", 3, 1);
            td_num(f, r, "overlapped_ms_mean", 3, 1);
            td_num(f, r, "window_ms", 3, 1);
            fputs("<td class=\"n\">", f);
            fnum(f, 100 * tp_jnum(r, "exposed_share"), 1);
            fputs(" %</td></tr>\n", f);
        }
        fputs("</table>\n", f);
    }
}

/* A table cell holding a number. */
static void td_val(FILE *f, double v, int prec) {
    fputs("<td class=\"n\">", f);
    fnum(f, v, prec);
    fputs("</td>", f);
}

static void kernels_tables(FILE *f, const tp_run_results *res) {
    int any = 0;
    for (size_t i = 0; i < res->nranks; i++) {
        const tp_rank_result *rr = &res->ranks[i];
        const tp_gpu_result *g = &rr->gpu;
        if (!g->nkernels) continue;
        if (!any++) fputs("<h2 id=\"kernels\">Top kernels</h2>\n", f);
        const char *unit = g->per_step ? "step" : "run";
        fprintf(f, "<h3>rank %d</h3>\n<table class=\"grid kernels\"><tr><th>kernel</th><th>class</th>"
                   "<th>count per %s</th><th>ms per %s</th><th>mean us</th><th>share</th></tr>\n",
                rr->rank, unit, unit);
        for (size_t k = 0; k < g->nkernels; k++) {
            const tp_gpu_kernel *x = &g->kernels[k];
            fputs("<tr><td class=\"name\">", f);
            E(x->name);
            fputs("</td><td>", f);
            E(x->cls);
            fputs("</td>", f);
            td_val(f, x->count_per_unit, 1);
            td_val(f, x->total_ms, 3);
            td_val(f, x->mean_us, 1);
            fputs("<td class=\"n\">", f);
            fnum(f, 100 * x->share, 1);
            fputs(" %</td></tr>\n", f);
        }
        fputs("</table>\n", f);
    }
}

/* Megatron-style timers: one row per timer, min and max over ranks, then each rank. */
static void timers_table(FILE *f, const cJSON *rep) {
    const cJSON *tm = tp_jobj(rep, "timers");
    if (!tm) return;
    fprintf(f, "<h2 id=\"timers\">Timers</h2>\n<p class=\"note\">Megatron-LM style timers, ms per %s.</p>\n",
            !strcmp(tp_jstr(tm, "per"), "step") ? "measured step" : "run (in total)");
    fputs("<table class=\"grid\" id=\"timers-table\"><tr><th>timer</th><th>min ms</th><th>max ms</th>", f);
    const cJSON *r, *e;
    cJSON_ArrayForEach(r, tp_jobj(rep, "ranks")) if (tp_jobj(r, "timers"))
        fprintf(f, "<th>rank %.0f</th>", tp_jnum(r, "rank"));
    fputs("</tr>\n", f);
    cJSON_ArrayForEach(e, tp_jobj(tm, "min_max")) {
        fputs("<tr><td class=\"name\">", f);
        E(tp_jstr(e, "name"));
        fputs("</td>", f);
        td_num(f, e, "min_ms", 3, 1);
        td_num(f, e, "max_ms", 3, 1);
        cJSON_ArrayForEach(r, tp_jobj(rep, "ranks")) {
            const cJSON *rt = tp_jobj(r, "timers"), *row, *hit = NULL;
            if (!rt) continue;
            cJSON_ArrayForEach(row, tp_jobj(rt, "rows")) if (!strcmp(tp_jstr(row, "name"), tp_jstr(e, "name"))) hit = row;
            td_num(f, hit, "ms", 3, 1);
        }
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
    if (tp_jobj(tm, "megatron_minmax")) {
        fputs("<pre>", f);
        E(tp_jstr(tm, "megatron_minmax"));
        fputs("</pre>\n", f);
    }
}

static int known(const char *k, const char *const *list) {
    for (; *list; list++)
        if (!strcmp(k, *list)) return 1;
    return 0;
}

static const char *const top_known[] = {"schema", "schema_version", "trainprof_version", "run",
                                        "capabilities", "processes", "unreadable_files", "ranks",
                                        "timers", "communication", "findings", NULL};
static const char *const rank_shown[] = {"rank", "label", "host", "pid", NULL};

/* Everything about each rank, in collapsible blocks (no script: <details>). */
static void rank_details(FILE *f, const cJSON *rep) {
    const cJSON *r;
    fputs("<h2 id=\"ranks\">Ranks in detail</h2>\n", f);
    cJSON_ArrayForEach(r, tp_jobj(rep, "ranks")) {
        fputs("<details><summary>", f);
        E(tp_jstr(r, "label"));
        fputs(" (", f);
        E(tp_jstr(r, "host"));
        fprintf(f, ":%.0f)</summary>\n", tp_jnum(r, "pid"));
        const cJSON *c;
        cJSON_ArrayForEach(c, r) {
            if (known(c->string, rank_shown)) continue;
            fputs("<h4>", f);
            E(c->string);
            fputs("</h4>", f);
            gen_value(f, c, 1);
            fputc('\n', f);
        }
        fputs("</details>\n", f);
    }
}

static const char css[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 16px}"
    "h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}"
    "h3{font-size:15px}h4{font-size:13px;margin:12px 0 4px}"
    "table{border-collapse:collapse;margin:6px 0}th,td{padding:2px 8px;border:1px solid #ddd;"
    "vertical-align:top;text-align:left}th{background:#f4f4f4;font-weight:600}td.n{text-align:right;"
    "font-variant-numeric:tabular-nums}td.name{max-width:520px;word-break:break-all;font-family:monospace;"
    "font-size:12px}table.kv{font-size:12px}table.kv th{background:#fafafa}"
    ".note{color:#666;font-size:12px}.ok{color:#2a7a2a}"
    "svg.chart{display:block;background:#fff;border:1px solid #eee;margin:6px 0}"
    "svg text{font:11px sans-serif;fill:#444}svg text.label{fill:#222;font-size:12px}"
    "svg line.grid{stroke:#eee}svg line.tick{stroke:#999}svg line.steptick{stroke:#000;stroke-width:2}"
    ".legend span{margin-right:14px;font-size:12px;white-space:nowrap}.legend i{display:inline-block;"
    "width:10px;height:10px;margin-right:4px}"
    ".charts{display:flex;flex-wrap:wrap;gap:8px}figure{margin:0}figcaption{font-size:12px;color:#444}"
    "ul.findings{list-style:none;padding:0}li.finding{border-left:4px solid #999;padding:6px 10px;"
    "margin:8px 0;background:#fafafa}li.sev-warning{border-color:#e0a000}li.sev-critical{border-color:#d00}"
    ".sev{font-weight:700;text-transform:uppercase;font-size:12px}.evidence{font-size:12px;margin-top:4px}"
    "details{margin:6px 0;border:1px solid #eee;padding:4px 8px}summary{cursor:pointer;font-weight:600}"
    "pre{background:#f7f7f7;padding:8px;overflow-x:auto;font-size:12px}nav a{margin-right:12px}";

int tp_html_write(const tp_report *report, const tp_report_opts *o, FILE *f) {
    const cJSON *rep = report->doc;
    const tp_run *run = report->run;
    tp_report_opts def;
    if (!o) {
        tp_report_opts_init(&def);
        o = &def;
    }
    const cJSON *rj = tp_jobj(rep, "run");
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "<meta name=\"generator\" content=\"trainprof\">\n<title>trainprof report: ",
          f);
    E(tp_jstr(rj, "run_id"));
    fprintf(f, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>trainprof report: ", css);
    E(tp_jstr(rj, "run_id"));
    fputs("</h1>\n<p>", f);
    E(tp_jstr(rj, "dir"));
    fprintf(f, " &mdash; %.0f rank%s, %.0f process%s, %.2f s, %.0f events, %.0f dropped; "
               "trainprof ",
            tp_jnum(rj, "ranks"), tp_jnum(rj, "ranks") == 1 ? "" : "s", tp_jnum(rj, "processes"),
            tp_jnum(rj, "processes") == 1 ? "" : "es", tp_jnum(rj, "duration_s"), tp_jnum(rj, "events"),
            tp_jnum(rj, "events_dropped"));
    E(tp_jstr(rep, "trainprof_version"));
    fputs("</p>\n<nav><a href=\"#findings\">findings</a><a href=\"#steps\">steps</a>"
          "<a href=\"#breakdown-h\">breakdown</a><a href=\"#communication\">communication</a>"
          "<a href=\"#kernels\">kernels</a><a href=\"#nvml\">GPU samples</a>"
          "<a href=\"#timers\">timers</a><a href=\"#ranks\">ranks</a></nav>\n",
          f);
    if (tp_jnum(rj, "events_dropped") > 0)
        fprintf(f, "<p class=\"note\">warning: %.0f events were dropped.</p>\n",
                tp_jnum(rj, "events_dropped"));
    if (tp_jnum(rj, "distinct_run_ids") > 1)
        fprintf(f, "<p class=\"note\">warning: these rank files come from %.0f different runs.</p>\n",
                tp_jnum(rj, "distinct_run_ids"));

    findings_section(f, rep);

    fputs("<h2 id=\"steps\">Step time</h2>\n", f);
    steps_table(f, rep);
    rank_series *rs = NULL;
    size_t nr = run ? collect_steps(rep, run, o, &rs) : 0;
    if (run) {
        step_chart(f, rs, nr);
        fputs("<h3>Step time per rank and step</h3>\n", f);
        heatmap(f, rs, nr);
    } else {
        fputs("<p class=\"note\">Per-step plots need the rank files.</p>\n", f);
    }
    for (size_t i = 0; i < nr; i++) free(rs[i].ms);
    free(rs);

    fputs("<h2 id=\"breakdown-h\">Step breakdown</h2>\n", f);
    breakdown_chart(f, &report->res);

    comm_table(f, rep);
    kernels_tables(f, &report->res);

    fputs("<h2 id=\"nvml\">GPU power, utilisation and memory (NVML)</h2>\n", f);
    if (run) nvml_curves(f, run);
    else fputs("<p class=\"note\">The sample series need the rank files.</p>\n", f);

    timers_table(f, rep);

    /* sections added to the document after this renderer was written */
    const cJSON *c;
    cJSON_ArrayForEach(c, rep) {
        if (known(c->string, top_known)) continue;
        fputs("<h2 class=\"generic\">", f);
        E(c->string);
        fputs("</h2>\n", f);
        gen_value(f, c, 0);
        fputc('\n', f);
    }

    rank_details(f, rep);

    fputs("<h2>Run</h2>\n<h3>Capabilities</h3>\n", f);
    gen_value(f, tp_jobj(rep, "capabilities"), 1);
    fputs("\n<h3>Processes</h3>\n", f);
    gen_value(f, tp_jobj(rep, "processes"), 0);
    if (cJSON_GetArraySize(tp_jobj(rep, "unreadable_files"))) {
        fputs("\n<h3>Unreadable files</h3>\n", f);
        gen_value(f, tp_jobj(rep, "unreadable_files"), 0);
    }
    fputs("\n</body>\n</html>\n", f);
    fflush(f);
    return ferror(f) ? TPROF_ERR_IO : TPROF_OK;
}
