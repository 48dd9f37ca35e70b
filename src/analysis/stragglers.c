/*
 * stragglers.c — the ranks that hold the others back (stragglers.h): per rank, the step time
 * and the start lags at matched collectives (how long after the earliest rank it started
 * each), with the median-absolute-deviation rule about the median over ranks; a straggler's
 * GPU (clocks, power, temperature) is compared with the others'.
 */
#define _GNU_SOURCE
#include "analysis/stragglers.h"
#include "analysis/alloc.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/comm.h"
#include "analysis/findings.h"
#include "analysis/stats.h"
#include "analysis/steps.h"
#include "trainprof.h"

/* median of v[0..n), sorting v (every caller's is scratch): the mean of the two middles for
 * even n */
static double median(double *v, size_t n) {
    if (!n) return 0;
    qsort(v, n, sizeof *v, tp_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ------------------------------------------------------------------ stragglers */

#define MAD_K (3 * 1.4826) /* 3 sigma of a normal sample, from the MAD */

/* lag_ms[r]: the median over rank r's measured steps of the step's largest collective start
 * lag (ms after the earliest rank at the same collective), for collectives r starts inside
 * the step; 0 when none. Each rank's steps are found (o's step name and warm-up) and freed in
 * turn: a slim rank's from its memo, so that the run's steps are not copied all at once (a
 * rank's 1000 steps are 32 kB). with_steps[r]: rank r has measured steps (else lag_ms[r]
 * stays 0). Returns 0, or -1 when out of memory (the figures then stand for nothing). */
static int step_lags(const tp_clocks *c, const tp_report_opts *o, int *with_steps,
                     double *lag_ms) {
    size_t n = c->nranks;
    for (size_t r = 0; r < n; r++) {
        lag_ms[r] = 0;
        with_steps[r] = 0;
    }
    size_t *off = tp_malloc((n + 1) * sizeof *off);
    uint32_t *idx = NULL;
    if (!off || tp_clocks_by_rank(c, off, &idx) != 0) {
        free(off);
        return -1;
    }
    int rc = 0;
    for (size_t r = 0; r < n && !rc; r++) {
        tp_steps steps, *s = &steps;
        /* fails only without memory: a rank's lag left 0 would read as a measured one */
        if (tp_find_steps(c->rank[r], o->step_name, o->warmup, s) != 0) {
            rc = -1;
            break;
        }
        with_steps[r] = s->nsteps > s->nwarmup;
        size_t m = s->nsteps - s->nwarmup;
        double *mx = with_steps[r] ? tp_malloc(m * sizeof *mx) : NULL;
        if (!mx) {
            rc = with_steps[r] ? -1 : 0;
            tp_steps_free(s);
            continue;
        }
        for (size_t i = 0; i < m; i++) mx[i] = -1;
        for (size_t a = off[r]; a < off[r + 1]; a++) {
            const tp_arrival *x = &c->arr[idx[a]];
            int64_t at = tp_arrival_start(c, x);
            int64_t t = tp_sub_sat(at, c->map_ns[r]); /* on the rank's monotonic clock */
            size_t lo = s->nwarmup, hi = s->nsteps; /* the step holding t */
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if ((int64_t)s->steps[mid].end <= t) lo = mid + 1;
                else hi = mid;
            }
            if (lo == s->nsteps || (int64_t)s->steps[lo].start > t) continue;
            double l = (double)tp_sub_sat(at, c->coll[tp_clocks_coll_of(c, idx[a])].earliest) / 1e6;
            if (l > mx[lo - s->nwarmup]) mx[lo - s->nwarmup] = l;
        }
        size_t q = 0;
        for (size_t i = 0; i < m; i++)
            if (mx[i] >= 0) mx[q++] = mx[i];
        lag_ms[r] = median(mx, q);
        free(mx);
        tp_steps_free(s);
    }
    free(off);
    free(idx);
    return rc;
}

/* Figures of a straggler's GPU compared with the other ranks' first GPU: a relative or an
 * absolute difference counts. */
static const struct {
    const char *k;
    double rel, abs;
} gpu_cmp[3] = {{"sm_clock_mhz_mean", 0.03, 0}, {"power_mean_w", 0.10, 0}, {"temp_c_max", 0, 5}};

/* The figure gpu_cmp[q] of g; 0 when g did not measure it. */
static int gpu_figure(const tp_nvml_gpu_result *g, size_t q, double *v) {
    switch (q) {
    case 0: *v = g->sm_clock_mhz_mean; return g->has_sm_clock;
    case 1: *v = g->power_mean_w; return g->has_power;
    default: *v = g->temp_c_max; return g->has_temp;
    }
}

/* Its GPU, and how its clocks, power and temperature compare with the other ranks'.
 * tmp: scratch for c->nranks values. */
static void straggler_gpu(tp_straggler *e, const tp_run_results *res, const tp_clocks *c,
                          size_t r, double *tmp) {
    const tp_rank_result *rr = tp_results_rank(res, e->rank);
    const tp_nvml_gpu_result *g = tp_results_first_gpu(rr);
    e->gpu = g;
    if (!g && rr && rr->gpu.ndevices) {
        e->has_cuda_device = 1;
        e->cuda_device = rr->gpu.devices[0].device;
    }
    if (g && rr->nvml.shared_with_other_ranks) {
        e->gpu_unknown = 1;
        return;
    }
    if (!g) return;
    e->vs_present = 1;
    for (size_t q = 0; q < sizeof gpu_cmp / sizeof *gpu_cmp; q++) {
        double mine, v;
        if (!gpu_figure(g, q, &mine)) continue;
        size_t m = 0;
        for (size_t x = 0; x < c->nranks; x++) {
            if (x == r) continue;
            const tp_rank_result *orr = tp_results_rank(res, c->rank[x]->rank);
            const tp_nvml_gpu_result *og = tp_results_first_gpu(orr);
            if (og && gpu_figure(og, q, &v)) tmp[m++] = v;
        }
        if (!m) continue;
        double others = median(tmp, m);
        int differs = gpu_cmp[q].rel > 0 ? fabs(mine - others) > gpu_cmp[q].rel * fabs(others)
                                         : fabs(mine - others) > gpu_cmp[q].abs;
        e->vs[e->nvs].key = gpu_cmp[q].k;
        e->vs[e->nvs].rank = mine;
        e->vs[e->nvs].others_median = others;
        e->vs[e->nvs++].differs = differs;
        e->gpu_differs |= differs;
        e->compared = 1;
    }
}

/* Per rank of the clocks (c->rank[r]): its measured steps' window mapped to the reference
 * clock, matched collectives and their start lags, its mean step. Arrays of n, owned. */
typedef struct strag_work {
    size_t n;
    int64_t *w0, *w1;
    size_t *cnt;
    double *lmed, *lmean, *lp90, *step, *tmp, *lps;
    int *has_step;
    int *with_steps; /* measured steps found (the lag per step is over them) */
} strag_work;

static void strag_free(strag_work *w) {
    free(w->w0);
    free(w->w1);
    free(w->cnt);
    free(w->lmed);
    free(w->lmean);
    free(w->lp90);
    free(w->step);
    free(w->tmp);
    free(w->has_step);
    free(w->lps);
    free(w->with_steps);
}

/* Fills w for the n ranks of c. Returns 0, or -1 when out of memory (w still freeable). */
static int strag_measure(strag_work *w, size_t n, const tp_run_results *res,
                         const tp_clocks *c, const tp_report_opts *o) {
    w->n = n;
    w->w0 = tp_calloc(n, sizeof *w->w0);
    w->w1 = tp_calloc(n, sizeof *w->w1);
    w->cnt = tp_calloc(n, sizeof *w->cnt);
    w->lmed = tp_calloc(n, sizeof *w->lmed);
    w->lmean = tp_calloc(n, sizeof *w->lmean);
    w->lp90 = tp_calloc(n, sizeof *w->lp90);
    w->step = tp_calloc(n, sizeof *w->step);
    w->tmp = tp_calloc(n, sizeof *w->tmp);
    w->lps = tp_calloc(n, sizeof *w->lps);
    w->has_step = tp_calloc(n, sizeof *w->has_step);
    w->with_steps = tp_calloc(n, sizeof *w->with_steps);
    if (!w->w0 || !w->w1 || !w->cnt || !w->lmed || !w->lmean || !w->lp90 || !w->step ||
        !w->tmp || !w->has_step || !w->lps || !w->with_steps)
        return -1;
    for (size_t r = 0; r < n; r++) {
        /* only the window is kept: step_lags finds the steps again, rank by rank */
        tp_steps s;
        if (tp_find_steps(c->rank[r], o->step_name, o->warmup, &s) == 0) {
            if (s.nsteps > s.nwarmup) {
                w->w0[r] = tp_add_sat((int64_t)s.steps[s.nwarmup].start, c->map_ns[r]);
                w->w1[r] = tp_add_sat((int64_t)s.steps[s.nsteps - 1].end, c->map_ns[r]);
            }
            tp_steps_free(&s);
        }
        const tp_rank_result *rr = tp_results_rank(res, c->rank[r]->rank);
        w->has_step[r] = rr && rr->steps.measured > 0;
        w->step[r] = rr ? rr->steps.mean_ms : 0;
    }
    if (tp_clocks_lags(c, w->w0, w->w1, w->cnt, w->lmed, w->lmean, w->lp90) != TPROF_OK)
        return -1;
    /* The criterion: lag per step, each measured step's largest start lag of the rank (a
     * collective it starts inside that step, after the earliest rank), the median over
     * steps. The median over all collectives misses a straggler whenever one collective per
     * step absorbs its delay: under DDP the first gradient all-reduce of a step waits for
     * the late rank, and the later buckets, queued behind it on the same NCCL stream, start
     * nearly together (a rank sleeping 15 ms per step can show a median lag under 1 ms).
     * Without steps, the median lag stands in. */
    if (step_lags(c, o, w->with_steps, w->lps) != 0) return -1;
    for (size_t r = 0; r < n; r++)
        if (!w->with_steps[r]) w->lps[r] = w->lmed[r];
    return 0;
}

/* The table of the ranks: step time, matched collectives and their start lags. */
static int strag_ranks(tp_stragglers_result *out, const strag_work *w, const tp_clocks *c) {
    out->ranks = tp_calloc(w->n, sizeof *out->ranks);
    if (!out->ranks) return -1;
    for (size_t r = 0; r < w->n; r++) {
        tp_straggler_rank *e = &out->ranks[out->nranks++];
        e->rank = c->rank[r]->rank;
        e->host = c->rank[r]->hdr.host;
        e->has_step = w->has_step[r];
        e->step_ms = w->step[r];
        e->collectives = (double)w->cnt[r];
        e->lag_ms_median = w->lmed[r];
        e->lag_ms_mean = w->lmean[r];
        e->lag_ms_p90 = w->lp90[r];
        e->lag_ms_per_step = w->lps[r];
    }
    return 0;
}

/* The ranks past a threshold, named with their figures and GPU. */
static void strag_name(tp_stragglers_result *out, const strag_work *w, const tp_run_results *res,
                       const tp_clocks *c, size_t ns, size_t nl, double lag_mid, double step_mid) {
    size_t n = w->n;
    out->named = tp_calloc(n, sizeof *out->named);
    for (size_t r = 0; r < n && out->named; r++) {
        int by_lag = nl >= 2 && w->cnt[r] && w->lps[r] - lag_mid > out->lag_threshold_ms;
        int by_step = ns >= 2 && w->has_step[r] && w->step[r] - step_mid > out->step_threshold_ms;
        if (!by_lag && !by_step) continue;
        tp_straggler *e = &out->named[out->nnamed++];
        e->rank = c->rank[r]->rank;
        e->host = c->rank[r]->hdr.host;
        e->by = by_lag && by_step ? "collective lag and step time"
                : by_lag          ? "collective lag"
                                  : "step time";
        if (w->cnt[r]) {
            e->has_lag = 1;
            e->lag_ms = w->lmed[r];
            e->lag_ms_per_step = w->lps[r];
            e->lag_excess_ms = w->lps[r] - lag_mid;
        }
        if (w->has_step[r]) {
            e->has_step = 1;
            e->step_ms = w->step[r];
            e->step_excess_ms = w->step[r] - (ns == 2 ? step_mid : out->median_step_ms);
        }
        straggler_gpu(e, res, c, r, w->tmp);
    }
}

void tp_stragglers_compute(tp_run_results *res, const tp_clocks *c, const tp_report_opts *o) {
    tp_stragglers_result *out = &res->stragglers;
    memset(out, 0, sizeof *out);
    size_t n = c->nranks;
    if (n < 2) return;
    strag_work w = {0};
    if (strag_measure(&w, n, res, c, o) || strag_ranks(out, &w, c)) goto out;
    double *tmp = w.tmp;
    size_t ns = 0, nl = 0;
    for (size_t r = 0; r < n; r++)
        if (w.has_step[r]) tmp[ns++] = w.step[r];
    double med_step = median(tmp, ns);
    for (size_t r = 0; r < n; r++)
        if (w.cnt[r]) nl++;
    out->present = 1;
    out->sample_period = tp_comm_period(c->level);
    out->median_step_ms = med_step;
    double floor_ms = o->straggler_share * med_step;
    out->floor_ms = floor_ms;
    out->rule = n > 2 ? "a rank whose collective start lag per step (or mean step time) exceeds "
                        "the median over ranks by more than max(3 x 1.4826 x MAD, 5 % of the "
                        "median step time)"
                      : "with two ranks: the one that arrives last at matched collectives (lag "
                        "per step) by more than 5 % of the median step time, or whose step time "
                        "exceeds the other's by as much";
    if (!nl) out->note = "no collective matched across ranks inside the measured steps: step "
                         "times only";
    /* threshold per criterion: >2 ranks, the MAD rule about the median; 2 ranks, the gap */
    double lag_mid = 0, lag_thr = floor_ms, step_mid = med_step, step_thr = floor_ms;
    size_t k = 0;
    for (size_t r = 0; r < n; r++)
        if (w.cnt[r]) tmp[k++] = w.lps[r];
    if (nl > 2) {
        lag_mid = median(tmp, k);
        for (size_t i = 0; i < k; i++) tmp[i] = fabs(tmp[i] - lag_mid);
        double mad = median(tmp, k);
        out->has_lag_mad = 1;
        out->lag_mad_ms = mad;
        if (MAD_K * mad > lag_thr) lag_thr = MAD_K * mad;
    } else if (nl == 2) {
        lag_mid = tmp[0] < tmp[1] ? tmp[0] : tmp[1]; /* the earlier rank */
    }
    if (ns > 2) {
        k = 0;
        for (size_t r = 0; r < n; r++)
            if (w.has_step[r]) tmp[k++] = fabs(w.step[r] - med_step);
        double mad = median(tmp, k);
        out->has_step_mad = 1;
        out->step_mad_ms = mad;
        if (MAD_K * mad > step_thr) step_thr = MAD_K * mad;
    } else if (ns == 2) {
        step_mid = INFINITY;
        for (size_t r = 0; r < n; r++)
            if (w.has_step[r] && w.step[r] < step_mid) step_mid = w.step[r];
    }
    out->lag_threshold_ms = lag_thr;
    out->step_threshold_ms = step_thr;
    if (!ns) {
        /* without steps there is no scale for "late": lags are shown, nobody is named */
        out->note = "no measured steps: collective lags shown, no straggler named (the threshold "
                    "is a share of the step)";
        out->note_last = 1;
        goto out;
    }
    strag_name(out, &w, res, c, ns, nl, lag_mid, step_mid);
out:
    strag_free(&w);
}

void tp_stragglers_json(cJSON *rep, const tp_stragglers_result *s) {
    if (!s->present) return;
    cJSON *sj = cJSON_AddObjectToObject(rep, "stragglers");
    cJSON_AddNumberToObject(sj, "median_step_ms", s->median_step_ms);
    cJSON_AddNumberToObject(sj, "floor_ms", s->floor_ms);
    cJSON_AddStringToObject(sj, "rule", s->rule);
    /* collectives and lags over the clocks' sample ("clocks.sample") */
    if (s->sample_period > 0) cJSON_AddNumberToObject(sj, "sample_period", s->sample_period);
    cJSON *ra = cJSON_AddArrayToObject(sj, "ranks");
    for (size_t r = 0; r < s->nranks; r++) {
        const tp_straggler_rank *x = &s->ranks[r];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "rank", x->rank);
        cJSON_AddStringToObject(e, "host", x->host);
        if (x->has_step) cJSON_AddNumberToObject(e, "step_ms", x->step_ms);
        cJSON_AddNumberToObject(e, "collectives", x->collectives);
        if (x->collectives > 0) {
            cJSON_AddNumberToObject(e, "lag_ms_median", x->lag_ms_median);
            cJSON_AddNumberToObject(e, "lag_ms_mean", x->lag_ms_mean);
            cJSON_AddNumberToObject(e, "lag_ms_p90", x->lag_ms_p90);
            cJSON_AddNumberToObject(e, "lag_ms_per_step", x->lag_ms_per_step);
        }
        tp_json_item_to_array(ra, e);
    }
    if (s->note && !s->note_last) cJSON_AddStringToObject(sj, "note", s->note);
    if (s->has_lag_mad) cJSON_AddNumberToObject(sj, "lag_mad_ms", s->lag_mad_ms);
    if (s->has_step_mad) cJSON_AddNumberToObject(sj, "step_mad_ms", s->step_mad_ms);
    cJSON_AddNumberToObject(sj, "lag_threshold_ms", s->lag_threshold_ms);
    cJSON_AddNumberToObject(sj, "step_threshold_ms", s->step_threshold_ms);
    cJSON *named = cJSON_AddArrayToObject(sj, "named");
    for (size_t i = 0; i < s->nnamed; i++)
        tp_json_item_to_array(named, tp_straggler_json(&s->named[i]));
    if (s->note && s->note_last) cJSON_AddStringToObject(sj, "note", s->note);
}

