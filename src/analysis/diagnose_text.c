/*
 * diagnose_text.c — the text of the run-level sections (clocks, throughput, stragglers),
 * rendered from the report document, and of a rank's step breakdown (diagnose.h), rendered
 * from its typed result (results.h).
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

static void st3(FILE *f, const tp_stat5 *s) {
    fprintf(f, "%8.2f %8.2f %8.2f", s->mean, s->p50, s->p90);
}

/* The GPU basis: the parts of the step, the idle figures, the first warm-up steps. */
static void breakdown_gpu_text(FILE *f, const tp_breakdown_result *b) {
    fprintf(f, "  step breakdown (GPU %.0f, %s, %.0f %s; ms: mean, p50, p90; share of the step)\n",
            (double)b->device, "where work ran", (double)b->windows,
            b->per_step ? "measured steps" : "window (no steps)");
    static const struct { tp_bd_part part; const char *label; } rows[] = {
        {TP_BD_COMPUTE, "compute kernels"}, {TP_BD_EXPOSED_COMM, "exposed communication"},
        {TP_BD_MEMCPY, "memcpy/memset"}, {TP_BD_IDLE_DATA, "idle: data loading"},
        {TP_BD_IDLE_HOST_SYNC, "idle: host synchronisation"}, {TP_BD_IDLE_OTHER, "idle: other"},
        {TP_BD_OVERLAPPED_COMM, "(overlapped communication)"}};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        fprintf(f, "    %-28s", rows[i].label);
        st3(f, &b->ms[rows[i].part]);
        fprintf(f, "  %5.1f %%\n", 100 * b->share[rows[i].part]);
    }
    fprintf(f, "    busy %.1f %%; %.0f kernels per step (median %.1f us); %.0f idle gaps per "
               "step (median %.1f us)",
            100 * b->busy_share, b->kernels_per_step, b->kernel_median_us, b->idle_gaps_per_step,
            b->idle_gap_median_us);
    if (b->ms[TP_BD_START_IDLE].mean > 0)
        fprintf(f, "; idle at step start %.2f ms (%.2f ms of it in data loading)",
                b->ms[TP_BD_START_IDLE].mean, b->ms[TP_BD_START_IDLE_DATA].mean);
    fputc('\n', f);
    for (size_t i = 0; i < b->nwarmup && i < 3; i++) { /* the first ones; the JSON has them all */
        const double *w = b->warmup[i].ms;
        fprintf(f, "    warm-up step %.0f: %.2f ms = compute %.2f, exposed communication %.2f, "
                   "memcpy/memset %.2f, idle %.2f (data %.2f, sync %.2f, other %.2f)\n",
                b->warmup[i].step, w[TP_BD_STEP], w[TP_BD_COMPUTE], w[TP_BD_EXPOSED_COMM],
                w[TP_BD_MEMCPY], w[TP_BD_IDLE], w[TP_BD_IDLE_DATA], w[TP_BD_IDLE_HOST_SYNC],
                w[TP_BD_IDLE_OTHER]);
    }
    if (b->nwarmup > 3)
        fprintf(f, "    ... %d more warm-up steps (report.json lists them)\n", (int)b->nwarmup - 3);
}

/* A range row's name in the 28-column name field, with its domain when it has one: one name
 * may be a row in two domains (a Megatron timer, domain trainprof, beside the program's
 * range of the same name), which the domain tells apart. */
static void range_name(FILE *f, const tp_bd_range *r) {
    if (!r->domain) {
        tp_text_put(f, r->name, 28, 28);
        return;
    }
    char db[64];
    tp_text_fit(db, sizeof db, r->domain, 12);
    int dc = 0;
    for (size_t i = 0, n = strlen(db); i < n;) {
        uint32_t cp;
        int bad;
        i += tp_utf8_next(db + i, n - i, &cp, &bad);
        dc += tp_text_width(cp);
    }
    int nc = tp_text_put(f, r->name, 28 - 3 - dc, 0);
    fprintf(f, " [%s]", db);
    for (int c = nc + 3 + dc; c < 28; c++) fputc(' ', f);
}

/* The CPU basis's rows and the rest, named `rest`. */
static void cpu_rows_text(FILE *f, const tp_breakdown_result *b, const char *rest) {
    for (size_t i = 0; i < b->nranges; i++) {
        fputs("    ", f);
        range_name(f, &b->ranges[i]);
        st3(f, &b->ranges[i].ms);
        fprintf(f, "  %5.1f %%\n", 100 * b->ranges[i].share);
    }
    fprintf(f, "    %-28s", rest);
    st3(f, &b->untracked_ms);
    fprintf(f, "  %5.1f %%\n", 100 * b->untracked_share);
}

void tp_phases_text(FILE *f, const tp_breakdown_result *b) {
    if (!b->present || !b->has_cpu) return;
    fprintf(f, "  phases (host: top-level ranges of the step thread, %.0f measured steps; ms: "
               "mean, p50, p90; share of the step)\n",
            (double)b->windows);
    cpu_rows_text(f, b, "(outside any phase)");
}

void tp_breakdown_text(FILE *f, const tp_breakdown_result *b) {
    if (!b->present) return;
    if (b->gpu_basis) {
        breakdown_gpu_text(f, b);
        return;
    }
    fprintf(f, "  step breakdown (CPU: top-level ranges under the step, %.0f %s; ms: mean, p50, "
               "p90; share)\n",
            (double)b->windows, b->per_step ? "measured steps" : "window (no steps)");
    cpu_rows_text(f, b, "(outside any range)");
    for (size_t i = 0; i < b->nwarmup && i < 3; i++)
        fprintf(f, "    warm-up step %.0f: %.2f ms, %.2f ms outside any range\n", b->warmup[i].step,
                b->warmup[i].step_ms, b->warmup[i].untracked_ms);
    if (b->nwarmup > 3)
        fprintf(f, "    ... %d more warm-up steps (report.json lists them)\n", (int)b->nwarmup - 3);
}

void tp_diagnose_text(FILE *f, const cJSON *rep, const char *B, const char *N, const char *Y) {
    const cJSON *c = tp_jobj(rep, "clocks");
    if (c) {
        fprintf(f, "\n%sclocks%s: %.0f host%s, %.0f collectives matched across ranks", B, N,
                tp_jnum(c, "hosts"), tp_jnum(c, "hosts") == 1 ? "" : "s", tp_jnum(c, "collectives_matched"));
        if (tp_jnum(c, "hosts") <= 1) {
            fprintf(f, "; %s\n", tp_jstr(c, "note"));
        } else {
            fprintf(f, " (%.0f with GPU-timed ends); %s\n", tp_jnum(c, "collectives_with_ends"),
                    tp_jstr(c, "status"));
            const cJSON *h;
            cJSON_ArrayForEach(h, tp_jobj(c, "per_host")) {
                fprintf(f, "  %s%-20s offset %+.1f us", cJSON_IsTrue(tp_jobj(h, "aligned")) ? "" : Y,
                        safe(tp_jstr(h, "host")), tp_jnum(h, "offset_us"));
                if (cJSON_IsTrue(tp_jobj(h, "reference"))) fputs(" (reference)", f);
                else if (cJSON_IsTrue(tp_jobj(h, "aligned")))
                    fprintf(f, " from %.0f collectives", tp_jnum(h, "collectives_used"));
                if (tp_jhas(h, "residual_median_us"))
                    fprintf(f, "; collective ends disagree by %.1f us median, %.1f us max",
                            tp_jnum(h, "residual_median_us"), tp_jnum(h, "residual_max_us"));
                if (tp_jobj(h, "note")) fprintf(f, "; %s", tp_jstr(h, "note"));
                fprintf(f, "%s\n", cJSON_IsTrue(tp_jobj(h, "aligned")) ? "" : N);
            }
        }
    }
    const cJSON *t = tp_jobj(rep, "throughput");
    if (t) {
        fprintf(f, "\n%sthroughput%s: step %.2f ms (mean over %.0f rank%s)", B, N, tp_jnum(t, "step_ms"),
                tp_jnum(t, "ranks"), tp_jnum(t, "ranks") == 1 ? "" : "s");
        if (tp_jhas(t, "samples_per_s"))
            fprintf(f, "; %.1f samples/s (%.0f per step per rank)", tp_jnum(t, "samples_per_s"),
                    tp_jnum(t, "samples_per_step"));
        if (tp_jhas(t, "tokens_per_s"))
            fprintf(f, "; %.0f tokens/s, %.0f per GPU (%.0f per step per rank)", tp_jnum(t, "tokens_per_s"),
                    tp_jnum(t, "tokens_per_s_per_gpu"), tp_jnum(t, "tokens_per_step"));
        fputc('\n', f);
        const cJSON *m = tp_jobj(t, "model");
        if (m)
            fprintf(f, "  model: %s -> %.3f GFLOP per token (%s)\n", safe(tp_jstr(m, "spec")),
                    tp_jnum(m, "flops_per_token") / 1e9, tp_jstr(m, "formula"));
        if (tp_jobj(t, "model_error")) fprintf(f, "%s  model: %s%s\n", Y, safe(tp_jstr(t, "model_error")), N);
        if (tp_jobj(t, "note")) fprintf(f, "  note: %s\n", tp_jstr(t, "note"));
        if (tp_jhas(t, "tflops_per_gpu")) {
            fprintf(f, "  model FLOPs %.3g per step per rank (%s): %.1f TFLOP/s per GPU",
                    tp_jnum(t, "flops_per_step"), tp_jstr(t, "flops_source"), tp_jnum(t, "tflops_per_gpu"));
            if (tp_jhas(t, "mfu"))
                fprintf(f, "; %sMFU %.1f %%%s of %.1f TFLOP/s dense %s peak (%s; %s)", B,
                        100 * tp_jnum(t, "mfu"), N, tp_jnum(t, "peak_tflops"), safe(tp_jstr(t, "dtype")), safe(tp_jstr(t, "gpu")),
                        tp_jstr(t, "peak_source"));
            else if (tp_jobj(t, "mfu_note"))
                fprintf(f, "; no MFU: %s", tp_jstr(t, "mfu_note"));
            fputc('\n', f);
        } else if (tp_jobj(tp_jobj(t, "invalid"), "tflops_per_gpu")) {
            /* never printed as a result: flagged, with what to check */
            const cJSON *inv = tp_jobj(t, "invalid"), *x = tp_jobj(inv, "tflops_per_gpu");
            fprintf(f, "%s  flagged, not a result: model FLOPs %.3g per step per rank (%s) give "
                       "%.1f TFLOP/s per GPU",
                    Y, tp_jnum(t, "flops_per_step"), tp_jstr(t, "flops_source"), tp_jnum(x, "value"));
            if (tp_jobj(inv, "mfu"))
                fprintf(f, ", MFU %.1f %%", 100 * tp_jnum(tp_jobj(inv, "mfu"), "value"));
            fprintf(f, ": %s%s\n", tp_jstr(x, "reason"), N);
        }
    }
    const cJSON *s = tp_jobj(rep, "stragglers");
    if (s) {
        fprintf(f, "\n%sstragglers%s (median step %.2f ms; lag = collective start after the "
                   "earliest rank, ms)\n",
                B, N, tp_jnum(s, "median_step_ms"));
        fprintf(f, "  %-8s %-20s %10s %12s %10s %10s %10s %6s\n", "rank", "host", "step ms",
                "collectives", "lag p50", "lag p90", "lag/step", "");
        const cJSON *r;
        cJSON_ArrayForEach(r, tp_jobj(s, "ranks")) {
            int named = 0;
            const cJSON *e;
            cJSON_ArrayForEach(e, tp_jobj(s, "named")) named |= tp_jnum(e, "rank") == tp_jnum(r, "rank");
            fprintf(f, "  %s%-8.0f ", named ? Y : "", tp_jnum(r, "rank"));
            tp_text_put(f, tp_jstr(r, "host"), 20, 20);
            fprintf(f, " %10.2f %12.0f %10.3f %10.3f %10.3f %6s%s\n", tp_jnum(r, "step_ms"), tp_jnum(r, "collectives"),
                    tp_jnum(r, "lag_ms_median"), tp_jnum(r, "lag_ms_p90"), tp_jnum(r, "lag_ms_per_step"),
                    named ? "<-" : "", named ? N : "");
        }
        fprintf(f, "  thresholds: lag %.3f ms, step %.3f ms", tp_jnum(s, "lag_threshold_ms"),
                tp_jnum(s, "step_threshold_ms"));
        if (!cJSON_GetArraySize(tp_jobj(s, "named"))) fputs("; no straggler", f);
        fputc('\n', f);
        if (tp_jobj(s, "note")) fprintf(f, "  note: %s\n", tp_jstr(s, "note"));
    }
}
