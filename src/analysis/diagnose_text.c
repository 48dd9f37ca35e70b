/*
 * diagnose_text.c — the text of the run-level sections (clocks, throughput, stragglers),
 * rendered from the typed results (results.h), and of a rank's step breakdown (diagnose.h),
 * rendered from its section of the report document.
 */
#define _GNU_SOURCE
#include "analysis/diagnose.h"
#include "analysis/jsonget.h"

#include <string.h>

#include "analysis/text.h"

/* s as shown in the report (text.h): valid UTF-8, control characters as '?', so a host, GPU
 * or range name cannot disturb a terminal; at most 255 bytes, cut between characters with a
 * mark. One of four static buffers. */
static const char *safe(const char *s) {
    static char bufs[4][256];
    static int which;
    return tp_text_fit(bufs[which = (which + 1) & 3], sizeof bufs[0], s, -1);
}

/* ------------------------------------------------------------------ text */

static void st3(FILE *f, const cJSON *s) {
    fprintf(f, "%8.2f %8.2f %8.2f", tp_jnum(s, "mean"), tp_jnum(s, "p50"), tp_jnum(s, "p90"));
}

void tp_breakdown_text(FILE *f, const cJSON *b) {
    if (!b) return;
    int step = !strcmp(tp_jstr(b, "per"), "step");
    const cJSON *ms = tp_jobj(b, "ms"), *sh = tp_jobj(b, "share");
    if (!strcmp(tp_jstr(b, "basis"), "gpu")) {
        fprintf(f, "  step breakdown (GPU %.0f, %s, %.0f %s; ms: mean, p50, p90; share of the step)\n",
                tp_jnum(b, "device"), "where work ran", tp_jnum(b, "windows"),
                step ? "measured steps" : "window (no steps)");
        static const char *const rows[][2] = {
            {"compute", "compute kernels"}, {"exposed_comm", "exposed communication"},
            {"memcpy_memset", "memcpy/memset"}, {"idle_data", "idle: data loading"},
            {"idle_host_sync", "idle: host synchronisation"}, {"idle_other", "idle: other"},
            {"overlapped_comm", "(overlapped communication)"}};
        for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
            fprintf(f, "    %-28s", rows[i][1]);
            st3(f, tp_jobj(ms, rows[i][0]));
            fprintf(f, "  %5.1f %%\n", 100 * tp_jnum(sh, rows[i][0]));
        }
        fprintf(f, "    busy %.1f %%; %.0f kernels per step (median %.1f us); %.0f idle gaps per "
                   "step (median %.1f us)",
                100 * tp_jnum(sh, "busy"), tp_jnum(b, "kernels_per_step"), tp_jnum(b, "kernel_median_us"),
                tp_jnum(b, "idle_gaps_per_step"), tp_jnum(b, "idle_gap_median_us"));
        if (tp_jnum(tp_jobj(ms, "start_idle"), "mean") > 0)
            fprintf(f, "; idle at step start %.2f ms (%.2f ms of it in data loading)",
                    tp_jnum(tp_jobj(ms, "start_idle"), "mean"), tp_jnum(tp_jobj(ms, "start_idle_data"), "mean"));
        fputc('\n', f);
        const cJSON *w;
        int shown = 0;
        cJSON_ArrayForEach(w, tp_jobj(b, "warmup"))
            if (shown++ < 3) /* the first warm-up steps; the JSON has them all */
            fprintf(f, "    warm-up step %.0f: %.2f ms = compute %.2f, exposed communication %.2f, "
                       "memcpy/memset %.2f, idle %.2f (data %.2f, sync %.2f, other %.2f)\n",
                    tp_jnum(w, "step"), tp_jnum(w, "step_ms"), tp_jnum(w, "compute_ms"), tp_jnum(w, "exposed_comm_ms"),
                    tp_jnum(w, "memcpy_memset_ms"), tp_jnum(w, "idle_ms"), tp_jnum(w, "idle_data_ms"),
                    tp_jnum(w, "idle_host_sync_ms"), tp_jnum(w, "idle_other_ms"));
        if (shown > 3) fprintf(f, "    ... %d more warm-up steps (report.json lists them)\n", shown - 3);
        return;
    }
    fprintf(f, "  step breakdown (CPU: top-level ranges under the step, %.0f %s; ms: mean, p50, "
               "p90; share)\n",
            tp_jnum(b, "windows"), step ? "measured steps" : "window (no steps)");
    const cJSON *r;
    cJSON_ArrayForEach(r, tp_jobj(b, "ranges")) {
        fputs("    ", f);
        /* one name may be a row in two domains (a Megatron timer, domain trainprof, beside
         * the program's range of the same name): the domain tells them apart */
        const char *dom = tp_jobj(r, "domain") ? tp_jstr(r, "domain") : NULL;
        if (dom && *dom) {
            char db[64];
            tp_text_fit(db, sizeof db, dom, 12);
            int dc = 0;
            for (size_t i = 0, n = strlen(db); i < n;) {
                uint32_t cp;
                int bad;
                i += tp_utf8_next(db + i, n - i, &cp, &bad);
                dc += tp_text_width(cp);
            }
            int nc = tp_text_put(f, tp_jstr(r, "name"), 28 - 3 - dc, 0);
            fprintf(f, " [%s]", db);
            for (int c = nc + 3 + dc; c < 28; c++) fputc(' ', f);
        } else {
            tp_text_put(f, tp_jstr(r, "name"), 28, 28);
        }
        st3(f, tp_jobj(r, "ms"));
        fprintf(f, "  %5.1f %%\n", 100 * tp_jnum(r, "share"));
    }
    fprintf(f, "    %-28s", "(outside any range)");
    st3(f, tp_jobj(ms, "untracked"));
    fprintf(f, "  %5.1f %%\n", 100 * tp_jnum(sh, "untracked"));
    const cJSON *w;
    int shown = 0;
    cJSON_ArrayForEach(w, tp_jobj(b, "warmup"))
        if (shown++ < 3)
            fprintf(f, "    warm-up step %.0f: %.2f ms, %.2f ms outside any range\n",
                    tp_jnum(w, "step"), tp_jnum(w, "step_ms"), tp_jnum(w, "untracked_ms"));
    if (shown > 3) fprintf(f, "    ... %d more warm-up steps (report.json lists them)\n", shown - 3);
}

/* Clock alignment across hosts: each host's offset and how well the collectives agree. */
static void clocks_text(FILE *f, const tp_clocks_result *c, const char *B, const char *N,
                        const char *Y) {
    if (!c->present) return;
    fprintf(f, "\n%sclocks%s: %.0f host%s, %.0f collectives matched across ranks", B, N,
            c->hosts, c->hosts == 1 ? "" : "s", c->collectives_matched);
    if (c->hosts <= 1) {
        fprintf(f, "; %s\n", c->note ? c->note : "");
        return;
    }
    fprintf(f, " (%.0f with GPU-timed ends); %s\n", c->collectives_with_ends, c->status);
    for (size_t i = 0; i < c->nper_host; i++) {
        const tp_host_clock_result *h = &c->per_host[i];
        fprintf(f, "  %s%-20s offset %+.1f us", h->aligned ? "" : Y, safe(h->host), h->offset_us);
        if (h->reference) fputs(" (reference)", f);
        else if (h->aligned) fprintf(f, " from %.0f collectives", h->collectives_used);
        if (h->has_residual)
            fprintf(f, "; collective ends disagree by %.1f us median, %.1f us max",
                    h->residual_median_us, h->residual_max_us);
        if (h->note) fprintf(f, "; %s", h->note);
        fprintf(f, "%s\n", h->aligned ? "" : N);
    }
}

/* The stragglers' table: each rank's step and collective start lags, the named ones marked. */
static void stragglers_text(FILE *f, const tp_stragglers_result *s, const char *B,
                            const char *N, const char *Y) {
    if (!s->present) return;
    fprintf(f, "\n%sstragglers%s (median step %.2f ms; lag = collective start after the "
               "earliest rank, ms)\n",
            B, N, s->median_step_ms);
    fprintf(f, "  %-8s %-20s %10s %12s %10s %10s %10s %6s\n", "rank", "host", "step ms",
            "collectives", "lag p50", "lag p90", "lag/step", "");
    for (size_t i = 0; i < s->nranks; i++) {
        const tp_straggler_rank *r = &s->ranks[i];
        int named = 0, lag = r->collectives > 0;
        for (size_t k = 0; k < s->nnamed; k++) named |= s->named[k].rank == r->rank;
        fprintf(f, "  %s%-8d ", named ? Y : "", r->rank);
        tp_text_put(f, r->host, 20, 20);
        fprintf(f, " %10.2f %12.0f %10.3f %10.3f %10.3f %6s%s\n", r->has_step ? r->step_ms : 0,
                r->collectives, lag ? r->lag_ms_median : 0, lag ? r->lag_ms_p90 : 0,
                lag ? r->lag_ms_per_step : 0, named ? "<-" : "", named ? N : "");
    }
    fprintf(f, "  thresholds: lag %.3f ms, step %.3f ms", s->lag_threshold_ms,
            s->step_threshold_ms);
    if (!s->nnamed) fputs("; no straggler", f);
    fputc('\n', f);
    if (s->note) fprintf(f, "  note: %s\n", s->note);
}

/* Throughput, model FLOPs and MFU; a figure past its peak is flagged, never a result. */
static void throughput_text(FILE *f, const tp_throughput_result *t, const char *B,
                            const char *N, const char *Y) {
    if (!t->present) return;
    fprintf(f, "\n%sthroughput%s: step %.2f ms (mean over %zu rank%s)", B, N, t->step_ms,
            t->ranks, t->ranks == 1 ? "" : "s");
    if (t->samples_source)
        fprintf(f, "; %.1f samples/s (%.0f per step per rank)", t->samples_per_s,
                t->samples_per_step);
    if (t->tokens_source)
        fprintf(f, "; %.0f tokens/s, %.0f per GPU (%.0f per step per rank)", t->tokens_per_s,
                t->tokens_per_s_per_gpu, t->tokens_per_step);
    fputc('\n', f);
    if (t->has_model)
        fprintf(f, "  model: %s -> %.3f GFLOP per token (%s)\n", safe(t->model_spec),
                t->flops_per_token / 1e9, t->model_formula);
    if (t->has_model_error) fprintf(f, "%s  model: %s%s\n", Y, safe(t->model_error), N);
    if (t->note) fprintf(f, "  note: %s\n", t->note);
    if (t->flops_source && !t->tflops_flagged.flagged) {
        fprintf(f, "  model FLOPs %.3g per step per rank (%s): %.1f TFLOP/s per GPU",
                t->flops_per_step, t->flops_source, t->tflops_per_gpu);
        if (t->has_peak && !t->mfu_flagged.flagged)
            fprintf(f, "; %sMFU %.1f %%%s of %.1f TFLOP/s dense %s peak (%s; %s)", B,
                    100 * t->mfu, N, t->peak_tflops, safe(t->dtype), safe(t->gpu),
                    t->peak_source);
        else if (t->mfu_note)
            fprintf(f, "; no MFU: %s", t->mfu_note);
        fputc('\n', f);
    } else if (t->flops_source) {
        /* never printed as a result: flagged, with what to check */
        fprintf(f, "%s  flagged, not a result: model FLOPs %.3g per step per rank (%s) give "
                   "%.1f TFLOP/s per GPU",
                Y, t->flops_per_step, t->flops_source, t->tflops_flagged.value);
        if (t->mfu_flagged.flagged) fprintf(f, ", MFU %.1f %%", 100 * t->mfu_flagged.value);
        fprintf(f, ": %s%s\n", t->flag_reason, N);
    }
}

void tp_diagnose_text(FILE *f, const tp_run_results *res, const char *B, const char *N,
                      const char *Y) {
    clocks_text(f, &res->clocks, B, N, Y);
    throughput_text(f, &res->throughput, B, N, Y);
    stragglers_text(f, &res->stragglers, B, N, Y);
}
