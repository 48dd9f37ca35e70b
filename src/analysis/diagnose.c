/*
 * diagnose.c — clock alignment, throughput/MFU and stragglers across ranks (stragglers.c), and
 * the diagnosis rule engine (diagnose.h; fields in docs/report-json.md).
 *
 * The rules are functions of the typed results (results.h: the ranks' breakdown, gpu, nvml
 * and data loading, and the run-level stragglers and throughput), the same values the
 * section writers put in the document, so a rule reads the figures the user sees. Each rule
 * appends at most one finding: the worst rank, with every rank that crossed the threshold in
 * its evidence.
 */
#define _GNU_SOURCE
#include "analysis/diagnose.h"
#include "analysis/alloc.h"
#include "analysis/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/capture.h"
#include "analysis/clocks.h"
#include "analysis/energy.h"
#include "analysis/findings.h"
#include "analysis/megatron.h"
#include "analysis/mfu.h"
#include "analysis/memory.h"
#include "analysis/steps.h"
#include "analysis/stragglers.h"
#include "analysis/text.h"
#include "trainprof.h"

void tp_diagnose_opts_init(tp_report_opts *o) {
    o->tokens_per_step = o->samples_per_step = o->flops_per_step = 0;
    o->model = o->dtype = NULL;
    o->data_share = 0.20;
    o->data_ms_per_sample = 5.0;
    o->data_start_idle_share = 0.05;
    o->launch_idle_share = 0.20;
    o->launch_kernel_us = 50.0;
    o->host_sync_share = 0.05;
    o->memory_share = 0.90;
    o->fragmentation_share = 0.30;
    o->fragmentation_min_bytes = 1073741824.0;
    o->leak_min_steps = 5;
    o->leak_min_bytes = 1048576.0;
    o->straggler_share = 0.05;
    o->throttle_share = 0.05;
    o->clock_drop_share = 0.05;
    o->power_limit_share = 0.97;
    o->busy_share = 0.80;
    o->diag_min_steps = 3;
    o->diag_band = 0.25;
}

/* ------------------------------------------------------------------ helpers */

/* s as shown in the report (text.h): valid UTF-8, control characters as '?', so a host, GPU
 * or range name cannot disturb a terminal; at most 255 bytes, cut between characters with a
 * mark. One of four static buffers. */
static const char *safe(const char *s) {
    static char bufs[4][256];
    static int which;
    return tp_text_fit(bufs[which = (which + 1) & 3], sizeof bufs[0], s ? s : "", -1);
}

/* ------------------------------------------------------------------ rules */

/* The rules read the typed results (results.h), never the document: a rule names the fields
 * it tests, so a figure renamed in the document cannot switch it off. */
typedef struct ctx {
    const tp_run_results *res;
    tp_findings_result *fs;  /* the findings, and diagnosis.near: values past a threshold but
                              * inside its band */
    const tp_report_opts *o;
} ctx;

typedef struct rule rule;
struct rule {
    const char *id;
    const char *test;           /* the documented function, with its thresholds named */
    const char *recommendation;
    int (*eval)(const ctx *, const rule *); /* number of findings appended; NULL: comm.c */
};

static tp_finding *finding(const ctx *c, const rule *ru, const char *sev, int rank,
                           const char *msg) {
    return tp_finding_add(c->fs, ru->id, sev, rank, msg, ru->recommendation);
}

static void add_ranks(tp_finding *ev, const int *rk, size_t n) {
    tp_ev_ints(ev, "ranks", rk, n);
}

#define MAXR 4096

/* Where a share of the step sits against its threshold. The shares of identical runs of one
 * job differ by a few points of the step (launch gaps, synchronisation waits and idle time
 * move with the host's scheduling), so a value just past a threshold is as likely to fall
 * short of it in the next run: a finding needs a margin of diag_band (a quarter) of the
 * threshold beyond it, and a value past the threshold but inside the margin is listed as
 * near it, never as a finding. Four identical runs then give the same findings unless a share
 * moves by a quarter of its threshold. */
enum { LV_BELOW = 0, LV_NEAR = 1, LV_OVER = 2 };

static int level_above(double v, double thr, const tp_report_opts *o) {
    return v > thr * (1 + o->diag_band) ? LV_OVER : v > thr ? LV_NEAR : LV_BELOW;
}

/* Adds {id, unit, rank, value, threshold, finding_from} to diagnosis.near; unit is "share"
 * (of the step) or "ms per sample" (static). */
static void add_near(const ctx *c, const rule *ru, const char *unit, int rank, double v,
                     double thr, double from) {
    tp_near_add(c->fs, ru->id, unit, rank, v, thr, from);
}

/* A rule over the GPU figures of rank r names the steps they are over when GPU activity was
 * not recorded in every measured step: in its message (appended to msg, n bytes) and its
 * evidence (capture_ev). */
static void capture_note(char *msg, size_t n, const tp_rank_result *r) {
    const tp_capture_result *c = &r->capture;
    if (!c->limited) return;
    char w[200];
    size_t l = strlen(msg);
    if (l < n) snprintf(msg + l, n - l, "; %s", tp_capture_words(c, w, sizeof w));
}

static void capture_ev(tp_finding *ev, const tp_rank_result *r) {
    if (!r->capture.limited) return;
    tp_ev_number(ev, "captured_steps", (double)r->capture.captured);
    tp_ev_number(ev, "measured_steps", (double)r->capture.measured);
}

/* the GPU breakdown per measured step, over enough steps to be a pattern */
static int gpu_steps(const tp_breakdown_result *b, const tp_report_opts *o) {
    return b->present && b->gpu_basis && b->per_step && (double)b->windows >= o->diag_min_steps;
}

static int rule_data(const ctx *c, const rule *ru) {
    double samples = c->res->throughput.samples_per_step;
    int rk[MAXR];
    size_t n = 0;
    const tp_rank_result *worst = NULL;
    double wv = -1;
    for (size_t i = 0; i < c->res->nranks; i++) {
        const tp_rank_result *r = &c->res->ranks[i];
        const tp_data_result *dl = &r->data;
        const tp_breakdown_result *b = &r->breakdown;
        if ((double)r->steps.measured < c->o->diag_min_steps) continue;
        double share = dl->found ? dl->share : 0;
        double per_sample = samples > 0 && dl->found && dl->per_step ? dl->ms / samples : 0;
        double start = b->present && b->gpu_basis && b->per_step ? b->share[TP_BD_START_IDLE_DATA]
                                                                 : 0;
        int ls = level_above(share, c->o->data_share, c->o);
        int lp = level_above(per_sample, c->o->data_ms_per_sample, c->o);
        int lt = level_above(start, c->o->data_start_idle_share, c->o);
        int lv = ls > lp ? ls : lp;
        lv = lt > lv ? lt : lv;
        if (lv == LV_NEAR) {
            double v = ls == LV_NEAR ? share : lt == LV_NEAR ? start : per_sample;
            double thr = ls == LV_NEAR ? c->o->data_share
                         : lt == LV_NEAR ? c->o->data_start_idle_share : c->o->data_ms_per_sample;
            const char *unit = ls == LV_NEAR || lt == LV_NEAR ? "share" : "ms per sample";
            add_near(c, ru, unit, r->rank, v, thr, thr * (1 + c->o->diag_band));
        }
        if (lv != LV_OVER) continue;
        if (n < MAXR) rk[n++] = r->rank;
        double v = share + start;
        if (v > wv) { wv = v; worst = r; }
    }
    if (!n) return 0;
    const tp_data_result *dl = &worst->data;
    const tp_breakdown_result *b = &worst->breakdown;
    double share = dl->found ? dl->share : 0, ms = dl->found && dl->per_step ? dl->ms : 0;
    double start = b->has_parts ? b->share[TP_BD_START_IDLE_DATA] : 0;
    char msg[512];
    int len = snprintf(msg, sizeof msg, "data loading holds back rank %d: the data range takes "
                                        "%.1f %% of the step (%.2f ms)",
                       worst->rank, 100 * share, ms);
    if (samples > 0)
        len += snprintf(msg + len, sizeof msg - (size_t)len, ", %.2f ms per sample", ms / samples);
    if (start > 0)
        snprintf(msg + len, sizeof msg - (size_t)len, "; the GPU waits idle for it at step start "
                                                       "for %.1f %% of the step", 100 * start);
    tp_finding *ev = finding(c, ru, "warning", worst->rank, msg);
    tp_ev_number(ev, "data_share", share);
    tp_ev_number(ev, "data_ms_per_step", ms);
    if (samples > 0) tp_ev_number(ev, "data_ms_per_sample", ms / samples);
    tp_ev_number(ev, "start_idle_data_share", start);
    if (b->has_parts)
        tp_ev_number(ev, "start_idle_data_ms_p90", b->ms[TP_BD_START_IDLE_DATA].p90);
    tp_ev_number(ev, "threshold_share", c->o->data_share);
    tp_ev_number(ev, "threshold_ms_per_sample", c->o->data_ms_per_sample);
    tp_ev_number(ev, "threshold_start_idle_share", c->o->data_start_idle_share);
    add_ranks(ev, rk, n);
    return 1;
}

/* A rule over each rank's GPU breakdown: its level (LV_*), the value shown and, for a value
 * near the threshold, the threshold and where a finding begins. */
typedef double (*bval)(const tp_breakdown_result *b, const tp_report_opts *o, int *level,
                       double *thr, double *from);

static const tp_rank_result *worst_gpu_rank(const ctx *c, const rule *ru, bval f, int *rk,
                                            size_t *n, double *wv) {
    const tp_rank_result *worst = NULL;
    *n = 0;
    *wv = -INFINITY;
    for (size_t i = 0; i < c->res->nranks; i++) {
        const tp_rank_result *r = &c->res->ranks[i];
        if (!gpu_steps(&r->breakdown, c->o)) continue;
        int lv = LV_BELOW;
        double thr = 0, from = 0;
        double v = f(&r->breakdown, c->o, &lv, &thr, &from);
        if (lv == LV_NEAR) add_near(c, ru, "share", r->rank, v < 0 ? -v : v, thr, from);
        if (lv != LV_OVER) continue;
        if (*n < MAXR) rk[(*n)++] = r->rank;
        if (v > *wv) { *wv = v; worst = r; }
    }
    return worst;
}

static double v_launch(const tp_breakdown_result *b, const tp_report_opts *o, int *level,
                       double *thr, double *from) {
    double other = b->share[TP_BD_IDLE_OTHER_SHORT_GAPS];
    int shape = b->kernel_median_us < o->launch_kernel_us && b->kernels_per_step >= 20 &&
                b->idle_gaps_per_step >= 10;
    *level = shape ? level_above(other, o->launch_idle_share, o) : LV_BELOW;
    *thr = o->launch_idle_share;
    *from = *thr * (1 + o->diag_band);
    return other;
}

static int rule_launch(const ctx *c, const rule *ru) {
    int rk[MAXR];
    size_t n;
    double wv;
    const tp_rank_result *w = worst_gpu_rank(c, ru, v_launch, rk, &n, &wv);
    if (!w) return 0;
    const tp_breakdown_result *b = &w->breakdown;
    char msg[512];
    snprintf(msg, sizeof msg, "rank %d looks launch-bound: %.0f kernels per step with a median "
                              "of %.1f us, and the GPU idles in %.0f gaps per step "
                              "(median %.1f us); "
                              "gaps under 100 us with no data loading or synchronisation to "
                              "blame add up to %.1f %% of the step",
             w->rank, b->kernels_per_step, b->kernel_median_us, b->idle_gaps_per_step,
             b->idle_gap_median_us, 100 * wv);
    capture_note(msg, sizeof msg, w);
    tp_finding *ev = finding(c, ru, "warning", w->rank, msg);
    tp_ev_number(ev, "idle_other_short_gaps_share", wv);
    tp_ev_number(ev, "idle_other_share", b->share[TP_BD_IDLE_OTHER]);
    tp_ev_number(ev, "kernels_per_step", b->kernels_per_step);
    tp_ev_number(ev, "kernel_median_us", b->kernel_median_us);
    tp_ev_number(ev, "idle_gaps_per_step", b->idle_gaps_per_step);
    tp_ev_number(ev, "idle_gap_median_us", b->idle_gap_median_us);
    tp_ev_number(ev, "threshold_idle_share", c->o->launch_idle_share);
    tp_ev_number(ev, "threshold_kernel_us", c->o->launch_kernel_us);
    if (b->has_most_idle_step) tp_ev_number(ev, "most_idle_step", b->most_idle_step);
    capture_ev(ev, w);
    add_ranks(ev, rk, n);
    return 1;
}

static double v_sync(const tp_breakdown_result *b, const tp_report_opts *o, int *level,
                     double *thr, double *from) {
    double s = b->share[TP_BD_IDLE_HOST_SYNC];
    *level = level_above(s, o->host_sync_share, o);
    *thr = o->host_sync_share;
    *from = *thr * (1 + o->diag_band);
    return s;
}

static int rule_sync(const ctx *c, const rule *ru) {
    int rk[MAXR];
    size_t n;
    double wv;
    const tp_rank_result *w = worst_gpu_rank(c, ru, v_sync, rk, &n, &wv);
    if (!w) return 0;
    const tp_breakdown_result *b = &w->breakdown;
    const tp_gpu_result *g = &w->gpu;
    char msg[512];
    snprintf(msg, sizeof msg, "host synchronisation inside the steps of rank %d: the GPU sits "
                              "idle behind blocking CUDA calls for %.1f %% of the step (%.2f ms); "
                              "%.1f synchronising calls per step block the host %.2f ms",
             w->rank, 100 * wv, b->ms[TP_BD_IDLE_HOST_SYNC].mean, g->host_syncs,
             g->host_sync_blocked_ms);
    capture_note(msg, sizeof msg, w);
    tp_finding *ev = finding(c, ru, "warning", w->rank, msg);
    tp_ev_number(ev, "idle_host_sync_share", wv);
    tp_ev_number(ev, "idle_host_sync_ms", b->ms[TP_BD_IDLE_HOST_SYNC].mean);
    tp_ev_number(ev, "host_syncs_per_step", g->host_syncs);
    tp_ev_number(ev, "host_sync_blocked_ms", g->host_sync_blocked_ms);
    tp_ev_number(ev, "threshold", c->o->host_sync_share);
    capture_ev(ev, w);
    add_ranks(ev, rk, n);
    return 1;
}

static double v_busy(const tp_breakdown_result *b, const tp_report_opts *o, int *level,
                     double *thr, double *from) {
    double busy = b->has_parts ? b->busy_share : 0;
    /* the band on the idle side: idle past (1 - busy_share) by a quarter of it */
    *level = level_above(1 - busy, 1 - o->busy_share, o);
    *thr = o->busy_share;
    *from = 1 - (1 - o->busy_share) * (1 + o->diag_band);
    return -busy; /* the least busy is the worst */
}

static int rule_busy(const ctx *c, const rule *ru) {
    int rk[MAXR];
    size_t n;
    double wv;
    const tp_rank_result *w = worst_gpu_rank(c, ru, v_busy, rk, &n, &wv);
    if (!w) return 0;
    const tp_breakdown_result *b = &w->breakdown;
    /* the largest idle part names where to look */
    static const struct { tp_bd_part part; const char *what; } parts[3] = {
        {TP_BD_IDLE_DATA, "data loading"},
        {TP_BD_IDLE_HOST_SYNC, "host synchronisation"},
        {TP_BD_IDLE_OTHER, "other (launch overhead, CPU work, waiting on another rank)"}};
    size_t big = 0;
    for (size_t i = 1; i < 3; i++)
        if (b->share[parts[i].part] > b->share[parts[big].part]) big = i;
    char msg[512];
    snprintf(msg, sizeof msg, "GPU busy only %.1f %% of the step on rank %d (below %.0f %%): "
                              "idle %.1f %%, mostly %s: %.1f %%",
             -100 * wv, w->rank, 100 * c->o->busy_share, 100 * b->share[TP_BD_IDLE],
             parts[big].what, 100 * b->share[parts[big].part]);
    capture_note(msg, sizeof msg, w);
    tp_finding *ev = finding(c, ru, "warning", w->rank, msg);
    tp_ev_number(ev, "busy_share", -wv);
    tp_ev_number(ev, "idle_data_share", b->share[TP_BD_IDLE_DATA]);
    tp_ev_number(ev, "idle_host_sync_share", b->share[TP_BD_IDLE_HOST_SYNC]);
    tp_ev_number(ev, "idle_other_share", b->share[TP_BD_IDLE_OTHER]);
    tp_ev_number(ev, "threshold", c->o->busy_share);
    if (b->has_most_idle_step) tp_ev_number(ev, "most_idle_step", b->most_idle_step);
    capture_ev(ev, w);
    add_ranks(ev, rk, n);
    return 1;
}

/* the memory rules (memory_rules.c: their tests and thresholds) */
static int rule_mem(const ctx *c, const rule *ru) {
    return tp_memory_rule(ru->id, c->res, c->fs, c->o, ru->recommendation);
}

static int rule_straggler(const ctx *c, const rule *ru) {
    const tp_stragglers_result *sj = &c->res->stragglers;
    int fired = 0;
    for (size_t i = 0; i < sj->nnamed; i++) {
        const tp_straggler *e = &sj->named[i];
        char msg[1024], gpu[200] = "";
        if (e->gpu)
            snprintf(gpu, sizeof gpu, ", GPU %u%s%s", e->gpu->index, e->gpu->name ? " " : "",
                     safe(e->gpu->name));
        char diff[200] = "";
        if (e->vs_present) {
            int l = snprintf(diff, sizeof diff, "; its GPU %s the others",
                             e->gpu_differs ? "differs from" : "matches");
            for (size_t q = 0; q < e->nvs; q++)
                if (e->vs[q].differs && l < (int)sizeof diff)
                    l += snprintf(diff + l, sizeof diff - (size_t)l, " (%s %.0f vs %.0f)",
                                  e->vs[q].key, e->vs[q].rank, e->vs[q].others_median);
        }
        if (e->has_lag)
            snprintf(msg, sizeof msg, "rank %d (host %s%s) is a straggler (%s): in a typical "
                                      "step it starts a collective %.2f ms after the earliest rank "
                                      "(median over steps of the step's largest lag; "
                                      "%.2f ms beyond "
                                      "the others, threshold %.2f ms; median lag over %s "
                                      "%.2f ms), step %.2f ms%s",
                     e->rank, safe(e->host), gpu, e->by, e->lag_ms_per_step, e->lag_excess_ms,
                     sj->lag_threshold_ms,
                     sj->sample_period > 0 ? "its collectives in the clocks' sample"
                                            : "all collectives",
                     e->lag_ms, e->step_ms, diff);
        else
            snprintf(msg, sizeof msg, "rank %d (host %s%s) is a straggler (%s): step %.2f ms, "
                                      "%.2f ms beyond the others (threshold %.2f ms)%s",
                     e->rank, safe(e->host), gpu, e->by, e->step_ms, e->step_excess_ms,
                     sj->step_threshold_ms, diff);
        tp_finding *ev = finding(c, ru, "warning", e->rank, msg);
        tp_ev_straggler(ev, "straggler", e);
        tp_ev_number(ev, "median_step_ms", sj->median_step_ms);
        tp_ev_number(ev, "lag_threshold_ms", sj->lag_threshold_ms);
        tp_ev_number(ev, "step_threshold_ms", sj->step_threshold_ms);
        add_ranks(ev, &e->rank, 1);
        fired++;
    }
    return fired;
}

static int rule_throttle(const ctx *c, const rule *ru) {
    int rk[MAXR];
    size_t n = 0;
    const tp_rank_result *worst = NULL;
    const tp_nvml_gpu_result *wg = NULL;
    double wv = -1;
    int wthermal = 0, wpower = 0;
    for (size_t i = 0; i < c->res->nranks; i++) {
        const tp_rank_result *r = &c->res->ranks[i];
        int hit = 0;
        for (size_t k = 0; k < r->nvml.ngpus; k++) {
            const tp_nvml_gpu_result *g = &r->nvml.gpus[k];
            double mx = g->sm_clock_mhz_max, mn = g->sm_clock_mhz_min;
            int clocks = g->has_clock_events && g->throttled &&
                         g->throttled_share > c->o->throttle_share && mx > 0 &&
                         mn < (1 - c->o->clock_drop_share) * mx;
            double lim = g->power_limit_w;
            int power = lim > 0 && g->power_max_w >= c->o->power_limit_share * lim;
            if (!clocks && !power) continue;
            hit = 1;
            double v = (clocks ? g->throttled_share : 0) + (power ? 1 : 0);
            if (v > wv) { wv = v; worst = r; wg = g; wthermal = clocks; wpower = power; }
        }
        if (hit && n < MAXR) rk[n++] = r->rank;
    }
    if (!worst) return 0;
    const char *names[TP_NVML_NREASONS];
    size_t nr = wg->has_clock_events
                    ? tp_nvml_reasons(wg->clock_event_mask, names, TP_NVML_NREASONS)
                    : 0;
    char reasons[200] = "";
    int l = 0;
    for (size_t i = 0; i < nr; i++)
        if (l < (int)sizeof reasons)
            l += snprintf(reasons + l, sizeof reasons - (size_t)l, "%s%s", l ? ", " : "", names[i]);
    char msg[600];
    snprintf(msg, sizeof msg, "GPU %u of rank %d is held back:%s%s%s", wg->index, worst->rank,
             wthermal ? " the SM clock falls" : "",
             wthermal && wpower ? " and" : "",
             wpower ? " power reaches its enforced limit" : "");
    size_t ml = strlen(msg);
    if (wthermal)
        snprintf(msg + ml, sizeof msg - ml, " (SM clock %.0f-%.0f MHz, throttle reasons in "
                                            "%.0f %% of "
                                            "samples: %s)",
                 wg->sm_clock_mhz_min, wg->sm_clock_mhz_max, 100 * wg->throttled_share, reasons);
    ml = strlen(msg);
    if (wpower)
        snprintf(msg + ml, sizeof msg - ml, " (power up to %.0f W of a %.0f W limit)",
                 wg->power_max_w, wg->power_limit_w);
    tp_finding *ev = finding(c, ru, "warning", worst->rank, msg);
    tp_ev_number(ev, "gpu", wg->index);
    tp_ev_bool(ev, "clock_throttled", wthermal);
    tp_ev_bool(ev, "power_at_limit", wpower);
    const struct { const char *k; int has; double v; } figs[] = {
        {"sm_clock_mhz_min", wg->has_sm_clock, wg->sm_clock_mhz_min},
        {"sm_clock_mhz_max", wg->has_sm_clock, wg->sm_clock_mhz_max},
        {"power_max_w", wg->has_power, wg->power_max_w},
        {"power_limit_w", wg->has_power_limit, wg->power_limit_w},
        {"temp_c_max", wg->has_temp, wg->temp_c_max}};
    for (size_t i = 0; i < sizeof figs / sizeof *figs; i++)
        if (figs[i].has) tp_ev_number(ev, figs[i].k, figs[i].v);
    if (wg->has_clock_events) {
        tp_ev_number(ev, "throttled_share", wg->throttled_share);
        tp_ev_strings(ev, "reasons", names, nr);
    }
    tp_ev_number(ev, "threshold_throttle_share", c->o->throttle_share);
    tp_ev_number(ev, "threshold_clock_drop_share", c->o->clock_drop_share);
    tp_ev_number(ev, "threshold_power_limit_share", c->o->power_limit_share);
    add_ranks(ev, rk, n);
    return 1;
}

static const rule rules[] = {
    {"data_loading",
     "a rank's data-loading range takes more than data_share (20 %) of the step, or more than "
     "data_ms_per_sample (5 ms) per sample when samples per step are known, or the GPU is idle at "
     "step start while it runs for more than data_start_idle_share (5 %) of the step",
     "load data ahead of the step: more DataLoader workers (num_workers), pin_memory=True with "
     "non_blocking copies, a larger prefetch_factor; move decoding and augmentation out of the "
     "training loop; check the storage the data comes from",
     rule_data},
    {"exposed_communication",
     "the worst rank's exposed communication exceeds comm_warn_share (10 %) of the step; "
     "critical above comm_crit_share (30 %) (comm.c)",
     "overlap communication with compute: tune DDP's bucket_cap_mb or FSDP's prefetching, "
     "accumulate gradients with no_sync() over micro-batches, check the interconnect "
     "(NCCL_DEBUG=INFO shows the transport) and that no rank arrives late",
     NULL},
    {"launch_bound",
     "GPU idle in gaps under 100 us not due to data loading or host synchronisation above "
     "launch_idle_share (20 %) of the step, with a median kernel shorter than launch_kernel_us "
     "(50 us), at least 20 "
     "kernels and 10 idle gaps per step: the host cannot launch kernels fast enough",
     "cut launch overhead: CUDA graphs (torch.compile(mode=\"reduce-overhead\"), "
     "torch.cuda.graphs), fuse small kernels (torch.compile, fused optimizers with "
     "foreach/fused=True), or raise the work per kernel (a larger micro-batch)",
     rule_launch},
    {"host_sync",
     "GPU idle while the host sits in a blocking CUDA call (*Synchronize, synchronous "
     "cudaMemcpy) above host_sync_share (5 %) of the step",
     "remove synchronisations from the step: .item(), .cpu(), printing or logging tensors, "
     "torch.cuda.synchronize(), nonzero()/boolean indexing; log every N steps and keep metrics "
     "on the GPU; copy with non_blocking=True from pinned memory",
     rule_sync},
    {"out_of_memory",
     "the rank files hold an out-of-memory post-mortem (memory.oom.*: PyTorch's "
     "OutOfMemoryError, or a failed device allocation CUPTI saw); the first OOM, critical",
     "open the memory snapshot (python -m torch.cuda._memory_viz trace_plot SNAPSHOT -o "
     "out.html, or https://pytorch.org/memory_viz) to see what filled the GPU; then make "
     "headroom: a smaller micro-batch with gradient accumulation, activation recomputation "
     "(torch.utils.checkpoint; Megatron-LM --recompute-activations), optimizer-state sharding "
     "(ZeRO, arXiv:1910.02054; FSDP), PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True when "
     "the largest free block is below the request (PyTorch CUDA semantics, Memory management)",
     rule_mem},
    {"memory_peak",
     "a rank's GPU memory peak (NVML used, the CUDA allocator's peak from CUPTI, or the "
     "caching allocator's reserved peak from trainprof.torch's samples) above memory_share "
     "(90 %, a convention) of the GPU's capacity",
     "make headroom: activation recomputation (torch.utils.checkpoint; Megatron-LM "
     "--recompute-activations), a smaller micro-batch with gradient accumulation, "
     "optimizer-state sharding (ZeRO, arXiv:1910.02054; FSDP), "
     "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation (PyTorch CUDA "
     "semantics, Optimizing memory usage with PYTORCH_CUDA_ALLOC_CONF)",
     rule_mem},
    {"memory_fragmentation",
     "at the sampled allocator peak, 1 - allocated/reserved above fragmentation_share (0.30) "
     "with at least fragmentation_min_bytes (1 GiB) reserved but unallocated",
     "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets segments grow instead of leaving "
     "unusable split blocks (PyTorch CUDA semantics, Optimizing memory usage with "
     "PYTORCH_CUDA_ALLOC_CONF); keep tensor shapes steady across steps (pad variable "
     "sequence lengths to a few buckets)",
     rule_mem},
    {"memory_leak",
     "allocated at the first sample of each measured step: at least leak_min_steps (5) steps, "
     "never below the step before, rising in at least half of the transitions, and growing by "
     "at least leak_min_bytes (1 MiB) from the first to the last",
     "find what keeps tensors across steps: a loss or output appended to a list without "
     ".item() or .detach() keeps its graph; record the history "
     "(torch.cuda.memory._record_memory_history) and compare snapshots of two steps "
     "(PyTorch CUDA semantics, Memory management)",
     rule_mem},
    {"memory_alloc_retries",
     "the caching allocator's num_alloc_retries above 0: cudaMalloc failed, the cache was "
     "freed and the allocation retried, which synchronises the device",
     "make headroom as for memory_peak, or PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
     "when fragmentation is high (PyTorch CUDA semantics, Memory management)",
     rule_mem},
    {"straggler",
     "a rank whose median collective start lag (or mean step time) exceeds the median over "
     "ranks by more than max(3 x 1.4826 x MAD, straggler_share (5 %) of the median step); with "
     "two ranks, the later one by more than straggler_share of the step",
     "look at the named rank: its GPU's clocks, power and temperature, other processes on its "
     "GPU or host, its data shard and loader, CPU affinity and NUMA placement",
     rule_straggler},
    {"throttling",
     "a GPU whose SM clock falls below (1 - clock_drop_share) of its max (5 %) while throttle "
     "reasons are set in more than throttle_share (5 %) of samples, or whose power reaches "
     "power_limit_share (97 %) of its enforced limit",
     "check cooling and airflow, the enforced power limit (nvidia-smi -q -d POWER,PERFORMANCE), "
     "and other work on the GPU; a throttled GPU makes its rank a straggler",
     rule_throttle},
    {"gpu_busy",
     "a rank's GPU busy (compute, communication, copies) below busy_share (80 %) of the step",
     "see the idle split of the step breakdown: data loading, host synchronisation, or other "
     "(launch overhead, CPU work between kernels, waiting for another rank)",
     rule_busy},
};

static void diagnosis(cJSON *rep, tp_run_results *res, size_t comm_finding,
                      const tp_report_opts *o) {
    cJSON *d = cJSON_AddObjectToObject(rep, "diagnosis");
    ctx c = {res, &res->findings, o};
    res->findings.diag_band = o->diag_band;
    cJSON *ra = cJSON_AddArrayToObject(d, "rules");
    for (size_t i = 0; i < sizeof rules / sizeof *rules; i++) {
        const rule *ru = &rules[i];
        int fired = 0;
        if (ru->eval) {
            fired = ru->eval(&c, ru);
        } else {
            /* implemented in comm.c, which has no recommendation: give its finding this one */
            if (comm_finding < res->findings.n) {
                fired = 1;
                res->findings.items[comm_finding].recommendation = ru->recommendation;
                res->findings.items[comm_finding].recommendation_last = 1;
            }
        }
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "id", ru->id);
        cJSON_AddStringToObject(e, "test", ru->test);
        cJSON_AddNumberToObject(e, "findings", fired);
        tp_json_item_to_array(ra, e);
    }
    cJSON_AddStringToObject(d, "note", "the rules over steps (data_loading, launch_bound, "
                                       "host_sync, gpu_busy) need diag_min_steps measured steps "
                                       "on a rank: fewer are not a pattern");
    cJSON *th = cJSON_AddObjectToObject(d, "thresholds");
    const struct { const char *k; double v; } t[] = {
        {"data_share", o->data_share}, {"data_ms_per_sample", o->data_ms_per_sample},
        {"data_start_idle_share", o->data_start_idle_share},
        {"comm_warn_share", o->comm_warn_share}, {"comm_crit_share", o->comm_crit_share},
        {"launch_idle_share", o->launch_idle_share}, {"launch_kernel_us", o->launch_kernel_us},
        {"host_sync_share", o->host_sync_share}, {"memory_share", o->memory_share},
        {"straggler_share", o->straggler_share}, {"throttle_share", o->throttle_share},
        {"clock_drop_share", o->clock_drop_share}, {"power_limit_share", o->power_limit_share},
        {"busy_share", o->busy_share}, {"diag_min_steps", o->diag_min_steps},
        {"fragmentation_share", o->fragmentation_share},
        {"fragmentation_min_bytes", o->fragmentation_min_bytes},
        {"leak_min_steps", o->leak_min_steps}, {"leak_min_bytes", o->leak_min_bytes},
        {"diag_band", o->diag_band}};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) cJSON_AddNumberToObject(th, t[i].k, t[i].v);
    cJSON *near = tp_near_json(&res->findings);
    if (near) tp_json_item_to_object(d, "near", near);
}

/* For a Megatron-LM job (its arguments on a rank's command line), each finding's advice in
 * its arguments: only what the job did not do already (megatron.h). */
static void megatron_advice(tp_run_results *res, const tp_run *run) {
    tp_megatron_args a;
    tp_megatron_args_of(run, &a);
    if (!a.found) return;
    for (size_t i = 0; i < res->findings.n; i++) {
        char buf[1024];
        if (tp_megatron_advice(&a, res->findings.items[i].id, buf, sizeof buf))
            res->findings.items[i].megatron = tp_strdup(buf); /* NULL without memory: no advice */
    }
}

void tp_diagnose_run(cJSON *rep, const tp_run *run, tp_run_results *res, size_t comm_finding,
                     const tp_report_opts *o) {
    tp_clocks c;
    int built = tp_clocks_build(run, &c) == TPROF_OK, filled = 0;
    if (built) {
        filled = tp_clocks_result_fill(&res->clocks, &c) == TPROF_OK;
        if (!filled) tp_clocks_result_free(&res->clocks);
        tp_clocks_json(rep, &res->clocks);
        tp_stragglers_compute(res, &c, o);
        tp_stragglers_json(rep, &res->stragglers);
        tp_clocks_free(&c);
    }
    if (!filled) { /* memory ran out (the clocks' only error): said, never left out silently */
        res->clocks.no_memory = 1;
        cJSON *j = cJSON_AddObjectToObject(rep, "clocks");
        cJSON_AddStringToObject(j, "status", "not computed");
        cJSON_AddStringToObject(j, "note", TP_CLOCKS_NO_MEMORY);
    }
    tp_throughput_compute(&res->throughput, run, res, o->tokens_per_step, o->samples_per_step,
                          o->flops_per_step, o->model, o->dtype);
    tp_throughput_json(rep, &res->throughput);
    diagnosis(rep, res, comm_finding, o);
    megatron_advice(res, run);
}
