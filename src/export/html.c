/*
 * html.c — the self-contained HTML report: inline CSS, plots drawn here as inline SVG, no
 * script and no network access, so that the file can be mailed, attached to a bug report
 * or opened on an air-gapped cluster and look the same everywhere.
 *
 * Everything shown comes from the report (report.h): its typed results, from which the JSON
 * document is written, so that the HTML, the text and report.json never disagree, and the
 * document itself for the generic views only: every rank's sections in collapsible blocks,
 * the capabilities, processes and unreadable-files tables, and the sections this file does
 * not render by name (clocks, stragglers, diagnosis, ended_early, and any added to the
 * document later), shown as nested tables so that a new section appears in the HTML the day
 * it appears in the JSON. The one exception is what the report summarises rather than lists
 * (step times per step, the NVML sample series), which is read from the loaded run with the
 * same step rule (steps.c) the report used.
 *
 * Names in a run come from user programs (range names, kernel names, hosts): every string
 * goes through tp_html_escape, in text and in attributes alike. Long series are averaged
 * into at most TP_HTML_MAX_POINTS buckets, so a million-step run gives a small file.
 */
#define _GNU_SOURCE
#include "export/html.h"
#include "analysis/alloc.h"
#include "analysis/jsonget.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/capture.h"
#include "analysis/counter_pack.h"
#include "analysis/gpu.h"
#include "analysis/steps.h"
#include "export/html_sections.h"
#include "export/html_svg.h"
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

/* Bytes in binary units (IEC 80000-13: KiB = 1024 B), as the text report writes them
 * (comm_text.c), so a figure reads the same in both. */
static void bytes_text(FILE *f, double b) {
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (fabs(b) >= 1024 && i < 4) b /= 1024, i++;
    fprintf(f, i ? "%.2f %s" : "%.0f %s", b, u[i]);
}


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

/* The measured steps of each rank of res as the step plots draw them (rank_series), found
 * again in the run with the report's step rule (the results summarise them), one rank at a
 * time: the largest count first, which sets the heatmap's cells, then each rank's series.
 * Returns the number of ranks in *out (owned; each freed with tp_svg_rank_series_free). */
static size_t collect_steps(const tp_run_results *res, const tp_run *run, const tp_report_opts *o,
                            rank_series **out) {
    rank_series *v = tp_calloc(res->nranks ? res->nranks : 1, sizeof *v);
    if (!v) return 0;
    size_t maxn = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < res->nranks; i++) {
            const tp_rank_result *r = &res->ranks[i];
            const tp_process *p = tp_rank_process(run, r->host, r->pid);
            v[i].rank = r->rank; /* its heatmap row is drawn, steps or not */
            tp_steps s;
            if (!p || tp_find_steps(p, o->step_name, o->warmup, &s) != TPROF_OK) continue;
            size_t nm = s.nsteps - s.nwarmup;
            double *ms = pass && nm ? tp_malloc(nm * sizeof *ms) : NULL;
            if (!pass && nm > maxn) maxn = nm;
            if (ms) {
                for (size_t k = 0; k < nm; k++)
                    ms[k] = (double)(s.steps[s.nwarmup + k].end - s.steps[s.nwarmup + k].start)
                            / 1e6;
                v[i].first = s.nwarmup;
                tp_svg_rank_series(&v[i], ms, nm, tp_svg_heat_bucket(maxn));
                free(ms);
            }
            tp_steps_free(&s);
        }
    *out = v;
    return res->nranks;
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

/* The ranks whose GPU figures are over fewer steps than measured (capture.h), one note each:
 * the steps in which GPU activity was recorded; a rank without steps whose capture was off or
 * paused part of the run: the time it was recorded, which its breakdown is over. */
/* Why a rank's GPU records are those of a span only (capture.h, TP_CAP_BOUND), in a note. */
static void bound_words(FILE *f, const tp_capture_result *c) {
    if (!(c->limited_by & TP_CAP_BOUND)) return;
    int dec = tp_capture_span_decimals(c);
    fprintf(f, " The report held %zu of its GPU records, those of %.*f-%.*f s into the process, "
               "and left %zu out: it had more than the bound of %zu (--gpu-records).",
            c->bound_kept, dec, c->bound_from_s, dec, c->bound_to_s, c->bound_left_out,
            c->bound_records);
}

static void capture_notes(FILE *f, const tp_run_results *res) {
    for (size_t i = 0; i < res->nranks; i++) {
        const tp_breakdown_result *b = &res->ranks[i].breakdown;
        const tp_capture_result *c = &res->ranks[i].capture;
        if (b->present && b->gpu_basis && !b->per_step && b->has_uncaptured) {
            if (b->bounded)
                fprintf(f, "<p class=\"note capture\">rank %d: no steps; its GPU figures are "
                           "over %.3f s of the %.3f s run.",
                        res->ranks[i].rank, b->captured_s, b->run_s);
            else
                fprintf(f, "<p class=\"note capture\">rank %d: no steps; GPU activity recorded "
                           "%.3f s of the %.3f s run: its GPU breakdown is over that time only.",
                        res->ranks[i].rank, b->captured_s, b->run_s);
            bound_words(f, c);
            fputs("</p>\n", f);
            continue;
        }
        char w[256];
        if (!*tp_capture_words(c, w, sizeof w)) continue;
        fprintf(f, "<p class=\"note capture\">rank %d: ", res->ranks[i].rank);
        E(w);
        fputs(c->captured                      ? ": its GPU figures are over those steps only."
              : c->limited_by & TP_CAP_BOUND ? ": no measured step's GPU records were held whole."
                                             : ": its GPU figures are not captured.",
              f);
        bound_words(f, c);
        fputs("</p>\n", f);
    }
}

static void breakdown_chart(FILE *f, const tp_run_results *res) {
    int nr = (int)res->nranks;
    if (nr <= 0) return;
    bd_row *rows = tp_calloc((size_t)nr, sizeof *rows);
    if (!rows) return;
    int n = 0, generic = 0, per_step = 0;
    for (size_t i = 0; i < res->nranks; i++) {
        const tp_rank_result *rr = &res->ranks[i];
        per_step |= !rr->breakdown.present || rr->breakdown.per_step;
        bd_row *b = &rows[n++];
        b->rank = rr->rank;
        b->step_ms = rr->steps.mean_ms;
        if (rr->breakdown.present && bd_from_result(b, &rr->breakdown) >= 2) {
            generic = 1;
            /* GPU parts over the captured steps add up to their mean, not every step's */
            if (rr->breakdown.gpu_basis && rr->breakdown.captured_steps)
                b->step_ms = rr->breakdown.ms[TP_BD_STEP].mean;
        } else {
            b->nseg = 0;
            bd_fallback(b, rr);
        }
    }
    /* the labels across ranks, for the legend; a label's colour comes from its name
     * (tp_svg_phase_colour), so a phase looks the same in every report */
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
    /* no rank has steps: each bar is the run (one window), not a step */
    const char *per = per_step ? "ms per step" : "ms in the run (no steps: the run is one window)";
    if (!per_step)
        fputs("<p class=\"note\">ms in the run: no rank has steps, so each bar is its whole run, "
              "or the time GPU activity was recorded where capture was off part of it, or the "
              "span whose GPU records the report held.</p>\n", f);
    else
        fprintf(f, "<p class=\"note\">%s</p>\n",
                generic ? "ms per measured step, from the report's breakdown (the parts that add "
                          "up to the step; overlapped communication runs under compute). The "
                          "black tick is the mean step time."
                        : "ms per measured step: kernel time by class on the busiest GPU, exposed "
                          "communication, copies and GPU idle time (kernels on concurrent streams "
                          "can make a bar longer than the step). The black tick is the mean step "
                          "time.");
    capture_notes(f, res);
    int rowh = 24, left = 70, h = MT + n * rowh + 30;
    double pw = CW - left - MR, xs = tp_svg_nice_step(xmax, 6);
    xmax = ceil(xmax / xs) * xs;
    fprintf(f, "<svg class=\"chart\" id=\"breakdown\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">\n",
            CW, h, CW, h);
    int nt = 0;
    for (double x = 0, prev = NAN; tp_svg_tick_ok(x, prev, xmax + xs / 2, nt);
         prev = x, x += xs, nt++) {
        double px = left + x / xmax * pw;
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" class=\"grid\"/>", px, px, MT,
                MT + n * rowh);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", px, MT + n * rowh + 14);
        tp_svg_tick_label(f, x, xs);
        fputs("</text>", f);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" class=\"label\">%s</text>\n",
            left + pw / 2, h - 2, per);
    for (int i = 0; i < n; i++) {
        int y = MT + i * rowh;
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">rank %d</text>", left - 4,
                y + rowh - 8, rows[i].rank);
        double x = 0;
        for (int k = 0; k < rows[i].nseg; k++) {
            fprintf(f, "<rect class=\"seg\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
                       "fill=\"%s\"><title>rank %d, ",
                    left + x / xmax * pw, y + 2, rows[i].ms[k] / xmax * pw, rowh - 4,
                    tp_svg_phase_colour(rows[i].seg[k]), rows[i].rank);
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
    const char *fills[64];
    for (size_t j = 0; j < nl; j++) fills[j] = tp_svg_phase_colour(labels[j]);
    tp_svg_legend_fills(f, labels, fills, nl);
    free(rows);
}

/* ------------------------------------------------------------------ NVML curves */

enum { NVM_POWER, NVM_UTIL, NVM_MEM, NVM_SM, NVM_TEMP, NVM_N };
static const char *const nvm_suffix[NVM_N] = {"power_w", "util_percent", "mem_used_bytes",
                                              "sm_clock_mhz", "temp_c"};
static const char *const nvm_title[NVM_N] = {"power (W)", "utilisation (%)", "memory used (GiB)",
                                             "SM clock (MHz)", "temperature (C)"};
static const double nvm_scale[NVM_N] = {1, 1, 1.0 / 1073741824.0, 1, 1};

/* One GPU metric's curve, drawn as at most TP_HTML_MAX_POINTS points, each the mean of
 * consecutive samples as tp_svg_lines averages them: its samples are counted in a first pass
 * over the counters, then summed into their buckets in a second, in the same order, so the
 * points are those of the whole series averaged, without holding it (16 bytes a sample of a
 * node's GPUs: 1.1 GB a day of 8 GPUs at 10 Hz). */
typedef struct nvm_series {
    unsigned idx;
    int metric;
    size_t total;      /* its samples */
    double *x, *y;     /* the nb points */
    size_t nb, b, i;   /* points, the one being summed, samples summed */
    double sx, sy;
    char label[32];
} nvm_series;

/* Sample (px, py) into s's current point. */
static void nvm_add(nvm_series *s, double px, double py) {
    if (s->b >= s->nb) return; /* no sample past the first pass's count: none comes */
    s->sx += px;
    s->sy += py;
    size_t i0 = s->b * s->total / s->nb, i1 = (s->b + 1) * s->total / s->nb;
    if (++s->i < i1) return;
    s->x[s->b] = s->sx / (double)(i1 - i0);
    s->y[s->b++] = s->sy / (double)(i1 - i0);
    s->sx = s->sy = 0;
}

static int gpu_counter(const char *name, unsigned *idx, int *metric) {
    unsigned long i;
    const char *suffix = tp_gpu_counter(name, &i); /* the samplers' "gpu<N>.<metric>" */
    if (!suffix || i > 1u << 16) return 0;
    for (int m = 0; m < NVM_N; m++)
        if (!strcmp(suffix, nvm_suffix[m])) {
            *idx = (unsigned)i;
            *metric = m;
            return 1;
        }
    return 0;
}

/* The series j of v[0..*n) of GPU idx's metric m; a new one when add (-1 without memory),
 * else n when there is none. */
static size_t nvm_find(nvm_series **v, size_t *n, unsigned idx, int m, int add) {
    size_t j = 0;
    while (j < *n && ((*v)[j].idx != idx || (*v)[j].metric != m)) j++;
    if (j < *n || !add) return j;
    nvm_series *nv = tp_realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv) return (size_t)-1;
    *v = nv;
    memset(&nv[j], 0, sizeof nv[j]);
    nv[j].idx = idx;
    nv[j].metric = m;
    snprintf(nv[j].label, sizeof nv[j].label, "GPU %u", idx);
    ++*n;
    return j;
}

/* Pass 0 counts each series' samples into v (new series added), pass 1 sums them into their
 * points. 0, or -1 without memory. */
static int nvm_pass(const tp_process *p, double t0_ns, nvm_series **v, size_t *n, int pass) {
    int oom = 0;
    tp_name_cache cache; /* each name's series, or -1 */
    memset(&cache, 0, sizeof cache);
    for (size_t ti = 0; ti < p->nthreads && !oom; ti++) {
        tp_counter_it it;
        tp_counter c;
        oom = tp_counter_it_init(&it, &p->threads[ti]) != 0;
        while (!oom && tp_counter_next(&it, &c)) {
            long j;
            if (!tp_name_cache_get(&cache, c.name, &j)) {
                unsigned idx;
                int m;
                size_t k = gpu_counter(c.name, &idx, &m) ? nvm_find(v, n, idx, m, pass == 0) : *n;
                if (k == (size_t)-1) {
                    oom = 1;
                    break;
                }
                j = k < *n ? (long)k : -1;
                tp_name_cache_put(&cache, c.name, j);
            }
            if (j < 0) continue;
            nvm_series *s = &(*v)[j];
            if (pass == 0) s->total++;
            else
                nvm_add(s, ((double)tp_to_realtime(p, c.ts) - t0_ns) / 1e9,
                        c.value * nvm_scale[s->metric]);
        }
        tp_counter_it_done(&it);
    }
    return oom ? -1 : 0;
}

/* The GPU sampler's series of one process (a rank sampling itself, or the node sampler). */
static void nvml_process(FILE *f, const tp_process *p, double t0_ns, int *chart_no) {
    nvm_series *v = NULL;
    size_t n = 0;
    int oom = nvm_pass(p, t0_ns, &v, &n, 0) != 0;
    for (size_t j = 0; j < n && !oom; j++) {
        v[j].nb = v[j].total < TP_HTML_MAX_POINTS ? v[j].total : TP_HTML_MAX_POINTS;
        v[j].x = tp_malloc(v[j].nb * sizeof *v[j].x);
        v[j].y = tp_malloc(v[j].nb * sizeof *v[j].y);
        oom = !v[j].x || !v[j].y;
    }
    if (!oom) oom = nvm_pass(p, t0_ns, &v, &n, 1) != 0;
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
                if (v[j].metric == m && v[j].b) /* its points, averaged already */
                    hs[nh++] = (hseries){v[j].label, v[j].x, v[j].y, 0, v[j].b};
            if (!nh) continue;
            char id[48];
            snprintf(id, sizeof id, "nvml-%d-%s", (*chart_no)++, nvm_suffix[m]);
            fputs("<figure><figcaption>", f);
            E(nvm_title[m]);
            fputs("</figcaption>", f);
            tp_svg_lines(f, id, "seconds since the run started", nvm_title[m], hs, nh);
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

/* A table cell holding v, or "-" when it was not computed (has 0). */
static void td_opt(FILE *f, int has, double v, int prec) {
    fputs("<td class=\"n\">", f);
    if (has) tp_html_num(f, v, prec);
    else fputs("-", f);
    fputs("</td>", f);
}

/* One row per rank: where its steps came from and their statistics (results.h). */
static void steps_table(FILE *f, const tp_run_results *res) {
    fputs("<table class=\"grid\" id=\"steps-table\"><tr><th>rank</th><th>host:pid</th><th>step "
          "source</th><th>steps</th><th>warm-up</th><th>mean ms</th><th>p50 ms</th><th>p90 "
          "ms</th><th>min ms</th><th>max ms</th></tr>\n",
          f);
    for (size_t i = 0; i < res->nranks; i++) {
        const tp_rank_result *r = &res->ranks[i];
        const tp_steps_result *s = &r->steps;
        fprintf(f, "<tr><td>%d</td><td>", r->rank);
        E(r->host);
        fprintf(f, ":%d</td><td>", r->pid);
        E(s->present ? s->source : "");
        if (s->name) {
            fputs(" &ldquo;", f);
            E(s->name);
            fputs("&rdquo;", f);
        }
        fputs("</td>", f);
        td_opt(f, s->present, (double)s->count, 0);
        td_opt(f, s->present, (double)s->warmup, 0);
        td_opt(f, s->has_stats, s->mean_ms, 3);
        td_opt(f, s->has_stats, s->p50_ms, 3);
        td_opt(f, s->has_stats, s->p90_ms, 3);
        td_opt(f, s->has_stats, s->min_ms, 3);
        td_opt(f, s->has_stats, s->max_ms, 3);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
}

/* The communicators across the ranks, one row per op, and the exposure per rank (results.h). */
static void comm_table(FILE *f, const tp_comm_run_result *comm) {
    fputs("<h2 id=\"communication\">Communication</h2>\n", f);
    if (!comm->ncomms) {
        fputs("<p class=\"note\">No communication recorded.</p>\n", f);
        return;
    }
    fputs("<table class=\"grid\" id=\"comm-table\"><tr><th>communicator</th><th>size</th><th>role "
          "(guess)</th><th>op</th><th>ranks</th><th>count per rank</th><th>bytes per "
          "rank</th><th>mean ms</th><th>time ms per rank</th><th>algbw GB/s</th><th>busbw "
          "GB/s</th><th>timing</th></tr>\n",
          f);
    for (size_t k = 0; k < comm->ncomms; k++) {
        const tp_comm_xcomm_result *c = &comm->comms[k];
        for (size_t q = 0; q < c->nops; q++) {
            const tp_comm_xop_result *op = &c->ops[q];
            fputs("<tr><td><code>", f);
            E(c->id);
            fprintf(f, "</code></td><td class=\"n\">%.0f</td><td>", c->size);
            E(c->role_guess);
            fputs("</td><td>", f);
            E(op->op);
            fputs("</td>", f);
            td_opt(f, 1, op->ranks, 0);
            td_opt(f, 1, op->count_per_rank, 0);
            fputs("<td class=\"n\">", f);
            bytes_text(f, op->bytes_per_rank);
            fputs("</td>", f);
            td_opt(f, op->has_mean, op->mean_ms, 3);
            td_opt(f, op->has_mean, op->mean_ms * op->count_per_rank, 2);
            td_opt(f, op->has_bw, op->algbw_gbs, 2);
            td_opt(f, op->has_bw, op->busbw_gbs, 2);
            fputs("<td>", f);
            E(op->time_source);
            fputs("</td></tr>\n", f);
        }
    }
    fputs("</table>\n", f);
    if (!comm->nexposed) return;
    fputs("<h3>Exposed communication per rank</h3>\n<table class=\"grid\"><tr><th>rank</th>"
          "<th>basis</th><th>exposed ms</th><th>overlapped ms</th><th>window ms</th>"
          "<th>exposed share</th></tr>\n",
          f);
    for (size_t i = 0; i < comm->nexposed; i++) {
        const tp_rank_result *r = comm->exposed[i];
        const tp_comm_exposure_result *x = &r->comm.exposure;
        fprintf(f, "<tr><td>%d</td><td>", r->rank);
        E(x->basis);
        fputs("</td>", f);
        td_opt(f, 1, x->exposed_ms.mean, 3);
        td_opt(f, 1, x->overlapped_ms.mean, 3);
        td_opt(f, 1, x->window_ms, 3);
        fputs("<td class=\"n\">", f);
        tp_html_num(f, 100 * x->exposed_share, 1);
        fputs(" %</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

/* A table cell holding a number. */
static void td_val(FILE *f, double v, int prec) {
    fputs("<td class=\"n\">", f);
    tp_html_num(f, v, prec);
    fputs("</td>", f);
}

/* Whether kernels_tables writes anything: some rank has kernels. */
static int has_kernels(const tp_run_results *res) {
    for (size_t i = 0; i < res->nranks; i++)
        if (res->ranks[i].gpu.nkernels) return 1;
    return 0;
}

static void kernels_tables(FILE *f, const tp_run_results *res) {
    int any = 0;
    for (size_t i = 0; i < res->nranks; i++) {
        const tp_rank_result *rr = &res->ranks[i];
        const tp_gpu_result *g = &rr->gpu;
        if (!g->nkernels) continue;
        if (!any++) {
            fputs("<h2 id=\"kernels\">Top kernels</h2>\n", f);
            capture_notes(f, res);
        }
        const char *unit = tp_gpu_per(g);
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
            tp_html_num(f, 100 * x->share, 1);
            fputs(" %</td></tr>\n", f);
        }
        fputs("</table>\n", f);
    }
}

/* Megatron-style timers: one row per timer, min and max over ranks, then each rank. */
static void timers_table(FILE *f, const tp_run_results *res) {
    const tp_run_timers_result *tm = &res->timers;
    if (!tm->present) return;
    fprintf(f, "<h2 id=\"timers\">Timers</h2>\n<p class=\"note\">Megatron-LM style timers, ms "
               "per %s.</p>\n",
            tm->per_step ? "measured step" : "run (in total)");
    fputs("<table class=\"grid\" id=\"timers-table\"><tr><th>timer</th><th>min ms</th>"
          "<th>max ms</th>", f);
    for (size_t i = 0; i < res->nranks; i++)
        if (res->ranks[i].timers.present) fprintf(f, "<th>rank %d</th>", res->ranks[i].rank);
    fputs("</tr>\n", f);
    for (size_t k = 0; k < tm->nrows; k++) {
        const tp_run_timer_row *e = &tm->rows[k];
        fputs("<tr><td class=\"name\">", f);
        E(e->name);
        fputs("</td>", f);
        td_opt(f, e->has_minmax, e->min_ms, 3);
        td_opt(f, e->has_minmax, e->max_ms, 3);
        for (size_t i = 0; i < res->nranks; i++) {
            const tp_timers_result *rt = &res->ranks[i].timers;
            if (!rt->present) continue;
            const tp_timer_row *hit = NULL;
            for (size_t j = 0; j < rt->nrows; j++)
                if (!strcmp(rt->rows[j].name, e->name)) hit = &rt->rows[j];
            td_opt(f, hit != NULL, hit ? hit->ms : 0, 3);
        }
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
    if (tm->megatron_minmax) {
        fputs("<pre>", f);
        E(tm->megatron_minmax);
        fputs("</pre>\n", f);
    }
}

static int known(const char *k, const char *const *list) {
    if (!k) return 1; /* an item without a key (none is made so): nothing to title it with */
    for (; *list; list++)
        if (!strcmp(k, *list)) return 1;
    return 0;
}

static const char *const top_known[] = {"headline", "schema", "schema_version", "trainprof_version", "run",
                                        "capabilities", "processes", "unreadable_files", "ranks",
                                        "timers", "communication", "findings", "throughput",
                                        NULL};
static const char *const rank_shown[] = {"rank", "label", "host", "pid", NULL};

/* One rank's section in a collapsible block. */
static void rank_detail(FILE *f, const cJSON *r) {
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

/* Everything about each rank, in collapsible blocks (no script: <details>), one section at a
 * time as the report gives them back (spilled or in the document: tp_report_section). A
 * section the spill cannot give back fails the page (TPROF_ERR_IO): a page that silently
 * left a rank out would read as a run without it. */
static int rank_details(FILE *f, const tp_report *report) {
    fputs("<h2 id=\"ranks\">Ranks in detail</h2>\n", f);
    for (size_t k = 0, n = tp_report_nsections(report); k < n; k++) {
        const cJSON *r;
        cJSON *owned;
        int rc = tp_report_section(report, k, &r, &owned);
        if (rc != TPROF_OK) return rc;
        if (r) rank_detail(f, r);
        cJSON_Delete(owned);
    }
    return TPROF_OK;
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
    "div.headline{border-left:6px solid #2a7a2a;padding:4px 12px;margin:12px 0;background:#f6f6f6}"
    "div.headline.sev-warning{border-color:#c80}div.headline.sev-critical{border-color:#c00}"
    "div.headline p{margin:4px 0}"
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
    "pre{background:#f7f7f7;padding:8px;overflow-x:auto;font-size:12px}nav a{margin-right:12px}"
    ".flagged{color:#b00}";

int tp_html_write(const tp_report *report, const tp_report_opts *o, FILE *f) {
    const tp_run *run = report->run;
    tp_report_opts def;
    if (!o) {
        tp_report_opts_init(&def);
        o = &def;
    }
    const cJSON *rep = report->doc; /* for the generic views of the document */
    const tp_run_results *res = &report->res;
    const tp_run_summary *rj = &res->run;
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "<meta name=\"generator\" content=\"trainprof\">\n<title>trainprof report: ",
          f);
    E(rj->run_id);
    fprintf(f, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>trainprof report: ", css);
    E(rj->run_id);
    fputs("</h1>\n<p>", f);
    E(rj->dir);
    fprintf(f, " &mdash; %d rank%s, %zu process%s, %.2f s, %.0f events, %.0f dropped; "
               "trainprof ",
            rj->ranks, rj->ranks == 1 ? "" : "s", rj->processes, rj->processes == 1 ? "" : "es",
            rj->duration_s, (double)rj->events, (double)rj->events_dropped);
    E(tprof_version());
    /* a link for each section the page has: the kernels and timers sections are written only
     * when there is something in them (kernels_tables, timers_table) */
    fputs("</p>\n<nav><a href=\"#findings\">findings</a><a href=\"#steps\">steps</a>"
          "<a href=\"#throughput\">throughput</a><a href=\"#breakdown-h\">breakdown</a>"
          "<a href=\"#communication\">communication</a>",
          f);
    if (has_kernels(res)) fputs("<a href=\"#kernels\">kernels</a>", f);
    fputs("<a href=\"#nvml\">GPU samples</a>", f);
    if (res->timers.present) fputs("<a href=\"#timers\">timers</a>", f);
    fputs("<a href=\"#ranks\">ranks</a></nav>\n", f);
    if (rj->events_dropped > 0)
        fprintf(f, "<p class=\"note\">warning: %.0f events were dropped.</p>\n",
                (double)rj->events_dropped);
    if (rj->distinct_run_ids > 1)
        fprintf(f, "<p class=\"note\">warning: these rank files come from %d different "
                   "runs.</p>\n",
                rj->distinct_run_ids);

    tp_html_headline(f, res);
    tp_html_findings(f, &res->findings);

    fputs("<h2 id=\"steps\">Step time</h2>\n", f);
    steps_table(f, res);
    rank_series *rs = NULL;
    size_t nr = run ? collect_steps(res, run, o, &rs) : 0;
    if (run) {
        tp_svg_step_chart(f, rs, nr);
        fputs("<h3>Step time per rank and step</h3>\n", f);
        tp_svg_heatmap(f, rs, nr);
    } else {
        fputs("<p class=\"note\">Per-step plots need the rank files.</p>\n", f);
    }
    for (size_t i = 0; i < nr; i++) tp_svg_rank_series_free(&rs[i]);
    free(rs);

    tp_html_throughput(f, &res->throughput);

    fputs("<h2 id=\"breakdown-h\">Step breakdown</h2>\n", f);
    breakdown_chart(f, &report->res);

    comm_table(f, &res->comm);
    kernels_tables(f, &report->res);

    fputs("<h2 id=\"nvml\">GPU power, utilisation and memory (NVML)</h2>\n", f);
    if (run) nvml_curves(f, run);
    else fputs("<p class=\"note\">The sample series need the rank files.</p>\n", f);

    timers_table(f, res);

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

    if (rank_details(f, report) != TPROF_OK) return TPROF_ERR_IO;

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
