/*
 * diagnose_text.c — the text of the run-level sections (clocks, throughput, stragglers),
 * rendered from the typed results (results.h), and of a rank's step breakdown and phases
 * (diagnose.h), rendered from their typed results too.
 */
#define _GNU_SOURCE
#include "analysis/diagnose.h"

#include <string.h>

#include "analysis/comm.h"
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

/* ", the 12.3 s of 20.0 in which GPU activity was recorded" for a run without steps whose
 * capture was off or paused part of the time; "" otherwise. */
static const char *uncaptured_words(const tp_breakdown_result *b) {
    static _Thread_local char buf[96];
    if (!b->has_uncaptured) return "";
    snprintf(buf, sizeof buf, ", the %.3f s of %.3f s in which GPU activity was recorded",
             b->captured_s, b->run_s);
    return buf;
}

/* The GPU basis: the parts of the step, the idle figures, the first warm-up steps. */
static void breakdown_gpu_text(FILE *f, const tp_breakdown_result *b) {
    if (b->not_captured) {
        fprintf(f, "  step breakdown (GPU): not captured: %s\n", b->not_captured);
        return;
    }
    if (b->captured_steps)
        fprintf(f, "  step breakdown (GPU %.0f, where work ran, %.0f of %.0f measured steps: "
                   "those in which GPU activity was recorded, steps %s; ms: mean, p50, p90; "
                   "share of the step)\n",
                (double)b->device, (double)b->windows, (double)b->measured_all,
                b->captured_steps);
    else if (!b->per_step && b->bounded) /* the span's parts, a whole run's never */
        fprintf(f, "  step breakdown (GPU %.0f, where work ran; no steps: the span whose GPU "
                   "records the report held as one window, %.3f s of the %.3f s run; ms in it; "
                   "share of it)\n", (double)b->device, b->captured_s, b->run_s);
    else if (!b->per_step)
        fprintf(f, "  step breakdown (GPU %.0f, where work ran; no steps: the run as one window%s;"
                   " ms in it; share of it)\n", (double)b->device, uncaptured_words(b));
    else
        fprintf(f, "  step breakdown (GPU %.0f, %s, %.0f %s; ms: mean, p50, p90; share of the "
                   "step)\n",
                (double)b->device, "where work ran", (double)b->windows, "measured steps");
    static const struct { tp_bd_part part; const char *label; } rows[] = {
        {TP_BD_COMPUTE, "compute kernels"}, {TP_BD_EXPOSED_COMM, "exposed communication"},
        {TP_BD_MEMCPY, "memcpy/memset"}, {TP_BD_IDLE_DATA, "idle: data loading"},
        {TP_BD_IDLE_HOST_SYNC, "idle: host synchronisation"}, {TP_BD_IDLE_OTHER, "idle: other"},
        {TP_BD_OVERLAPPED_COMM, "(overlapped communication)"}};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        fprintf(f, "    %-28s", rows[i].label);
        if (b->per_step) st3(f, &b->ms[rows[i].part]);
        else fprintf(f, "%8.2f", b->ms[rows[i].part].mean); /* one window: one value */
        fprintf(f, "  %5.1f %%\n", 100 * b->share[rows[i].part]);
    }
    const char *per = b->per_step ? " per step" : " in all";
    fprintf(f, "    busy %.1f %%; %.0f kernels%s (median %.1f us); %.0f idle gaps%s (median %.1f "
               "us)",
            100 * b->busy_share, b->kernels_per_step, per, b->kernel_median_us,
            b->idle_gaps_per_step, per, b->idle_gap_median_us);
    /* without steps there is no step start: the time before the run's first kernel is its
     * start-up (loading, initialisation), not a step's idle */
    if (b->per_step && b->ms[TP_BD_START_IDLE].mean > 0)
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

/* Which collectives a sampled merge kept, in words: the deepest level keeps only the first
 * window and the last before 2^32, which "the last 64 of every 4294967296" would hide. */
static const char *sample_words(char *w, size_t n, double period) {
    if (period >= tp_comm_period(TP_COMM_LEVEL_MAX))
        snprintf(w, n, "with sequence numbers below %u or in the last %u before 2^32 only",
                 TP_COMM_WINDOW, TP_COMM_WINDOW);
    else
        snprintf(w, n, "with sequence numbers below %u or in the last %u of each period of up "
                       "to %.0f", TP_COMM_WINDOW, TP_COMM_WINDOW, period);
    return w;
}

/* Clock alignment across hosts: each host's offset and how well the collectives agree. */
static void clocks_text(FILE *f, const tp_clocks_result *c, const char *B, const char *N,
                        const char *Y) {
    if (c->no_memory) fprintf(f, "\n%sclocks%s: not computed: %s\n", B, N, TP_CLOCKS_NO_MEMORY);
    if (!c->present) return;
    fprintf(f, "\n%sclocks%s: %.0f host%s, %.0f collectives matched across ranks", B, N,
            c->hosts, c->hosts == 1 ? "" : "s", c->collectives_matched);
    if (c->hosts <= 1) fprintf(f, "; %s\n", c->note ? c->note : "");
    else fprintf(f, " (%.0f with GPU-timed ends); %s\n", c->collectives_with_ends, c->status);
    if (c->sample_period > 0) {
        char w[96], why[96];
        if (c->sample_world > 0) /* the default bound, from the job's size */
            snprintf(why, sizeof why, "the default for %d ranks; TRAINPROF_COMM_KEEP sets another",
                     c->sample_world);
        else
            snprintf(why, sizeof why, "TRAINPROF_COMM_KEEP");
        fprintf(f, "  %smatched on a sample%s: a rank file holds more than %zu collectives (%s); "
                   "each communicator's collectives %s; TRAINPROF_COMM_KEEP=2147483648 matches "
                   "every one\n",
                Y, N, c->sample_keep, why, sample_words(w, sizeof w, c->sample_period));
    }
    /* a file whose start pair could not be used: named, with what placed it instead */
    for (size_t i = 0; i < c->nissues; i++) fprintf(f, "  %s%s%s\n", Y, safe(c->issues[i].line), N);
    if (c->hosts <= 1) return;
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
    double sample_period = s->sample_period;
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
    if (sample_period > 0) {
        char w[96];
        fprintf(f, "  %scollectives and lags: over the clocks' sample%s (each communicator's "
                   "collectives %s)\n", Y, N, sample_words(w, sizeof w, sample_period));
    }
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
