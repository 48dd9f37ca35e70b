/*
 * html_sections.c — the HTML report's curated run-level sections rendered from the typed
 * results (results.h): the findings with their evidence, the values near a threshold, and
 * throughput with model FLOPs and MFU (html_sections.h).
 */
#include "export/html_sections.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

#include "export/html_svg.h"

#define E(s) tp_html_escape(f, (s))

/* A number as the generic view writes it: integers whole, else 6 significant digits. */
static void num_text(FILE *f, double d) {
    if (d == floor(d) && fabs(d) < 1e15) fprintf(f, "%.0f", d);
    else fprintf(f, "%.6g", d);
}

/* Key/value rows of a table class="kv", as the generic view lays out an object. */
static void kv_key(FILE *f, const char *k) {
    fputs("<tr><th>", f);
    E(k);
    fputs("</th><td>", f);
}

static void kv_num(FILE *f, const char *k, double v) {
    kv_key(f, k);
    num_text(f, v);
    fputs("</td></tr>", f);
}

static void kv_str(FILE *f, const char *k, const char *v) {
    kv_key(f, k);
    E(v);
    fputs("</td></tr>", f);
}

static void kv_bool(FILE *f, const char *k, int v) {
    kv_key(f, k);
    fputs(v ? "true" : "false", f);
    fputs("</td></tr>", f);
}

/* A named straggler's figures (results.h), the rows of its "stragglers.named[]" object. */
static void straggler_kv(FILE *f, const tp_straggler *e) {
    fputs("<table class=\"kv\">", f);
    kv_num(f, "rank", e->rank);
    kv_str(f, "host", e->host);
    kv_str(f, "by", e->by);
    if (e->has_lag) {
        kv_num(f, "lag_ms", e->lag_ms);
        kv_num(f, "lag_ms_per_step", e->lag_ms_per_step);
        kv_num(f, "lag_excess_ms", e->lag_excess_ms);
    }
    if (e->has_step) {
        kv_num(f, "step_ms", e->step_ms);
        kv_num(f, "step_excess_ms", e->step_excess_ms);
    }
    if (e->gpu) {
        kv_key(f, "gpu");
        fputs("<table class=\"kv\">", f);
        kv_num(f, "index", e->gpu->index);
        if (e->gpu->name) kv_str(f, "name", e->gpu->name);
        if (e->gpu->uuid) kv_str(f, "uuid", e->gpu->uuid);
        fputs("</table></td></tr>", f);
    } else if (e->has_cuda_device) {
        kv_num(f, "cuda_device", e->cuda_device);
    }
    if (e->gpu_unknown)
        kv_str(f, "gpu_note", "the rank's GPU is not known (NVML shows every GPU of the host): "
                              "no comparison");
    if (e->vs_present) {
        kv_key(f, "vs_others");
        if (!e->nvs) fputs("{}", f);
        else fputs("<table class=\"kv\">", f);
        for (size_t q = 0; q < e->nvs; q++) {
            kv_key(f, e->vs[q].key);
            fputs("<table class=\"kv\">", f);
            kv_num(f, "rank", e->vs[q].rank);
            kv_num(f, "others_median", e->vs[q].others_median);
            kv_bool(f, "differs", e->vs[q].differs);
            fputs("</table></td></tr>", f);
        }
        if (e->nvs) fputs("</table>", f);
        fputs("</td></tr>", f);
        if (e->compared) kv_bool(f, "gpu_differs", e->gpu_differs);
    }
    fputs("</table>", f);
}

/* One figure of a finding's evidence: numbers, names, lists (at most 50 shown). */
static void evidence_value(FILE *f, const tp_evidence *e) {
    switch (e->kind) {
    case TP_EV_NUMBER: num_text(f, e->num); break;
    case TP_EV_BOOL: fputs(e->num != 0 ? "true" : "false", f); break;
    case TP_EV_STRING: E(e->str); break;
    case TP_EV_STRAGGLER: straggler_kv(f, e->straggler); break;
    case TP_EV_INTS:
    case TP_EV_STRINGS:
        if (!e->n) fputs("[]", f);
        for (size_t i = 0; i < e->n; i++) {
            if (i == 50) {
                fprintf(f, ", &hellip; (%zu in all)", e->n);
                break;
            }
            if (i) fputs(", ", f);
            if (e->kind == TP_EV_INTS) fprintf(f, "%d", e->ints[i]);
            else E(e->strs[i]);
        }
        break;
    }
}

static void recommendation_html(FILE *f, const tp_finding *fd) {
    fputs("<div class=\"evidence\"><b>recommendation</b> ", f);
    E(fd->recommendation);
    fputs("</div>", f);
}

/* The values near a threshold (not findings), after the findings. */
static void near_list(FILE *f, const tp_findings_result *fs) {
    if (!fs->nnear) return;
    fprintf(f, "<h3>Near a threshold</h3>\n<p class=\"note\">Not findings: the shares of "
               "identical runs move by a few points, so a finding needs a margin of %.0f %% of "
               "its threshold.</p>\n<ul class=\"near\">\n",
            100 * fs->diag_band);
    for (size_t i = 0; i < fs->nnear; i++) {
        const tp_near *nr = &fs->near[i];
        int share = !strcmp(nr->unit, "share");
        double k = share ? 100 : 1;
        const char *u = share ? " %" : " ms per sample";
        fputs("<li><code>", f);
        E(nr->id);
        fprintf(f, "</code> rank %d: %.1f%s (threshold %.1f%s, a finding from %.1f%s)</li>\n",
                nr->rank, k * nr->value, u, k * nr->threshold, u, k * nr->finding_from, u);
    }
    fputs("</ul>\n", f);
}

void tp_html_headline(FILE *f, const tp_run_results *res) {
    const tp_headline *h = &res->headline;
    const char *sev = h->has_finding ? res->findings.items[h->finding].severity : "ok";
    fputs("<div id=\"headline\" class=\"headline sev-", f);
    for (const char *c = sev; *c; c++) fputc(isalnum((unsigned char)*c) ? *c : '_', f);
    fputs("\">", f);
    for (size_t i = 0; i < h->nlines; i++) {
        fputs(i ? "<p>" : "<p><b>", f);
        E(h->lines[i]);
        fputs(i ? "</p>" : "</b></p>", f);
    }
    fputs("</div>\n", f);
}

/* The findings (results.h), each with its evidence in the document's order. */
void tp_html_findings(FILE *f, const tp_findings_result *fs) {
    fputs("<h2 id=\"findings\">Findings</h2>\n", f);
    if (!fs->n) {
        fputs("<p class=\"ok\">No rule found a problem.</p>\n", f);
        near_list(f, fs);
        return;
    }
    fputs("<ul class=\"findings\">\n", f);
    for (size_t i = 0; i < fs->n; i++) {
        const tp_finding *fd = &fs->items[i];
        const char *sev = fd->severity;
        fputs("<li class=\"finding sev-", f);
        for (const char *c = sev; *c; c++) fputc(isalnum((unsigned char)*c) ? *c : '_', f);
        fputs("\"><span class=\"sev\">", f);
        E(*sev ? sev : "note");
        fputs("</span> <code>", f);
        E(fd->id);
        fputs("</code> ", f);
        if (fd->has_rank) fprintf(f, "(rank %d) ", fd->rank);
        fputs("<span class=\"msg\">", f);
        E(fd->message);
        fputs("</span>", f);
        if (fd->recommendation && !fd->recommendation_last) recommendation_html(f, fd);
        fputs("<div class=\"evidence\"><b>evidence</b> ", f);
        if (!fd->nev) fputs("{}", f);
        else fputs("<table class=\"kv\">", f);
        for (size_t k = 0; k < fd->nev; k++) {
            kv_key(f, fd->ev[k].key);
            evidence_value(f, &fd->ev[k]);
            fputs("</td></tr>", f);
        }
        if (fd->nev) fputs("</table>", f);
        fputs("</div>", f);
        if (fd->recommendation && fd->recommendation_last) recommendation_html(f, fd);
        if (fd->megatron) {
            fputs("<div class=\"evidence\"><b>in Megatron-LM's arguments</b> ", f);
            E(fd->megatron);
            fputs("</div>", f);
        }
        fputs("</li>\n", f);
    }
    fputs("</ul>\n", f);
    near_list(f, fs);
}

/* Where an input came from, for a reader: "option", "metadata" or "model" (mfu.h). */
static const char *source_label(const char *src) {
    return !strcmp(src, "option")     ? "command-line option"
           : !strcmp(src, "metadata") ? "rank files' metadata"
           : !strcmp(src, "model")    ? "model's formula"
                                      : src;
}

/* One row of the throughput table: a label and the start of its value cell. */
static void tr_open(FILE *f, const char *label) {
    fputs("<tr><th>", f);
    E(label);
    fputs("</th><td>", f);
}

void tp_html_throughput(FILE *f, const tp_throughput_result *t) {
    fputs("<h2 id=\"throughput\">Throughput</h2>\n", f);
    if (!t->present) {
        fputs("<p class=\"note\">No measured steps: no throughput.</p>\n", f);
        return;
    }
    fputs("<table class=\"kv\" id=\"throughput-table\">", f);
    tr_open(f, "step time");
    fprintf(f, "%.2f ms (mean over %zu rank%s)</td></tr>", t->step_ms, t->ranks,
            t->ranks == 1 ? "" : "s");
    if (t->samples_source) {
        tr_open(f, "samples/s");
        fprintf(f, "%.1f in total, %.1f per GPU (%.0f per step per rank, from the %s)</td></tr>",
                t->samples_per_s, t->samples_per_s_per_gpu, t->samples_per_step,
                source_label(t->samples_source));
    }
    if (t->tokens_source) {
        tr_open(f, "tokens/s");
        fprintf(f, "%.0f in total, %.0f per GPU (%.0f per step per rank, from the %s)</td></tr>",
                t->tokens_per_s, t->tokens_per_s_per_gpu, t->tokens_per_step,
                source_label(t->tokens_source));
    }
    if (t->has_model) {
        tr_open(f, "model");
        E(t->model_spec);
        fprintf(f, " (from the %s)</td></tr>", source_label(t->model_source));
        tr_open(f, "model FLOPs per token");
        fprintf(f, "%.3f GFLOP (", t->flops_per_token / 1e9);
        E(t->model_formula);
        fputs(")</td></tr>", f);
    }
    if (t->has_model_error) {
        tr_open(f, "model");
        fputs("<span class=\"note\">not used: ", f);
        E(t->model_error);
        fputs("</span></td></tr>", f);
    }
    if (t->flops_source) {
        tr_open(f, "model FLOPs per step per rank");
        fprintf(f, "%.3g (from the %s)</td></tr>", t->flops_per_step,
                source_label(t->flops_source));
        tr_open(f, "TFLOP/s per GPU");
        if (t->tflops_flagged.flagged)
            fprintf(f, "<span class=\"flagged\">flagged, not a result: %.1f (limit %.1f)</span>",
                    t->tflops_flagged.value, t->tflops_flagged.limit);
        else
            tp_html_num(f, t->tflops_per_gpu, 1);
        fputs("</td></tr>", f);
        tr_open(f, "MFU");
        if (t->has_peak && t->mfu_flagged.flagged)
            fprintf(f, "<span class=\"flagged\">flagged, not a result: %.1f %%</span>",
                    100 * t->mfu_flagged.value);
        else if (t->has_peak)
            fprintf(f, "<b>%.1f %%</b>", 100 * t->mfu);
        if (t->has_peak) {
            fprintf(f, " of %.1f TFLOP/s dense ", t->peak_tflops);
            E(t->dtype);
            fputs(" peak (", f);
            E(t->gpu);
            fputs("; ", f);
            E(t->peak_source);
            fputs(")", f);
        } else if (t->mfu_note) {
            fputs("none: ", f);
            E(t->mfu_note);
        }
        fputs("</td></tr>", f);
    }
    fputs("</table>\n", f);
    if (t->note) {
        fputs("<p class=\"note\">", f);
        E(t->note);
        fputs("</p>\n", f);
    }
    if (t->tflops_flagged.flagged) {
        fputs("<p class=\"note flagged\">flagged, not a result: ", f);
        E(t->flag_reason);
        fputs("</p>\n", f);
    }
}
