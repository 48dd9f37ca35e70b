/*
 * diagnose.c — clock alignment, throughput/MFU and stragglers across ranks, and the
 * diagnosis rule engine (diagnose.h; fields in docs/report-json.md).
 *
 * The rules are functions of the report document (the ranks' breakdown, gpu, nvml and
 * data_loading sections, and the run-level stragglers and throughput), so a rule reads the
 * same figures the user sees. Each rule appends at most one finding: the worst rank, with
 * every rank that crossed the threshold in its evidence.
 */
#define _GNU_SOURCE
#include "analysis/diagnose.h"
#include "analysis/stats.h"
#include "analysis/jsonget.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/clocks.h"
#include "analysis/mfu.h"
#include "analysis/steps.h"
#include "analysis/text.h"

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
    o->straggler_share = 0.05;
    o->throttle_share = 0.05;
    o->clock_drop_share = 0.05;
    o->power_limit_share = 0.97;
    o->busy_share = 0.80;
    o->diag_min_steps = 3;
}

/* ------------------------------------------------------------------ JSON helpers */

/* s as shown in the report (text.h): valid UTF-8, control characters as '?', so a host, GPU
 * or range name cannot disturb a terminal; at most 255 bytes, cut between characters with a
 * mark. One of four static buffers. */
static const char *safe(const char *s) {
    static char bufs[4][256];
    static int which;
    return tp_text_fit(bufs[which = (which + 1) & 3], sizeof bufs[0], s, -1);
}

/* median of v[0..n) (a sorted copy; mean of the two middles for even n) */
static double median(const double *v, size_t n) {
    if (!n) return 0;
    double *c = malloc(n * sizeof *c);
    if (!c) return v[0];
    memcpy(c, v, n * sizeof *c);
    qsort(c, n, sizeof *c, tp_cmp_double);
    double m = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    free(c);
    return m;
}

static const cJSON *rank_json(const cJSON *ranks, int rank) {
    const cJSON *r;
    cJSON_ArrayForEach(r, ranks) if ((int)tp_jnum(r, "rank") == rank) return r;
    return NULL;
}

/* the first NVML GPU of a rank section, or NULL */
static const cJSON *first_gpu(const cJSON *r) {
    const cJSON *g = tp_jobj(tp_jobj(r, "nvml"), "gpus");
    return cJSON_GetArraySize(g) > 0 ? cJSON_GetArrayItem(g, 0) : NULL;
}

/* ------------------------------------------------------------------ stragglers */

#define MAD_K (3 * 1.4826) /* 3 sigma of a normal sample, from the MAD */

/* lag_ms[r]: the median over rank r's measured steps of the step's largest collective start
 * lag (ms after the earliest rank at the same collective), for collectives r starts inside
 * the step; 0 when none. */
static void step_lags(const tp_clocks *c, const tp_steps *steps, double *lag_ms) {
    size_t n = c->nranks;
    for (size_t r = 0; r < n; r++) {
        lag_ms[r] = 0;
        const tp_steps *s = &steps[r];
        if (s->nsteps <= s->nwarmup) continue;
        size_t m = s->nsteps - s->nwarmup;
        double *mx = malloc(m * sizeof *mx);
        if (!mx) continue;
        for (size_t i = 0; i < m; i++) mx[i] = -1;
        for (size_t k = 0; k < c->ncoll; k++) {
            const tp_coll *g = &c->coll[k];
            int64_t mn = INT64_MAX, mine = INT64_MIN;
            for (size_t j = 0; j < g->n; j++) {
                const tp_arrival *x = &c->arr[g->first + j];
                if (x->start < mn) mn = x->start;
                if (x->rank == r) mine = x->start;
            }
            if (mine == INT64_MIN) continue;
            int64_t t = tp_sub_sat(mine, c->map_ns[r]); /* back on the rank's monotonic clock */
            size_t lo = s->nwarmup, hi = s->nsteps; /* the step holding t */
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if ((int64_t)s->steps[mid].end <= t) lo = mid + 1;
                else hi = mid;
            }
            if (lo == s->nsteps || (int64_t)s->steps[lo].start > t) continue;
            double l = (double)tp_sub_sat(mine, mn) / 1e6;
            if (l > mx[lo - s->nwarmup]) mx[lo - s->nwarmup] = l;
        }
        size_t q = 0;
        for (size_t i = 0; i < m; i++)
            if (mx[i] >= 0) mx[q++] = mx[i];
        lag_ms[r] = median(mx, q);
        free(mx);
    }
}

static void stragglers_section(cJSON *rep, const tp_run *run, const tp_clocks *c,
                               const cJSON *ranks, const tp_report_opts *o) {
    size_t n = c->nranks;
    if (n < 2) return;
    int64_t *w0 = calloc(n, sizeof *w0), *w1 = calloc(n, sizeof *w1);
    size_t *cnt = calloc(n, sizeof *cnt);
    double *lmed = calloc(n, sizeof *lmed), *lmean = calloc(n, sizeof *lmean);
    double *lp90 = calloc(n, sizeof *lp90), *step = calloc(n, sizeof *step);
    double *tmp = calloc(n, sizeof *tmp), *lps = calloc(n, sizeof *lps);
    int *has_step = calloc(n, sizeof *has_step);
    tp_steps *steps = calloc(n, sizeof *steps);
    if (!w0 || !w1 || !cnt || !lmed || !lmean || !lp90 || !step || !tmp || !has_step || !lps ||
        !steps)
        goto out;
    (void)run;
    for (size_t r = 0; r < n; r++) {
        tp_steps *s = &steps[r];
        if (tp_find_steps(c->rank[r], o->step_name, o->warmup, s) != 0) memset(s, 0, sizeof *s);
        else if (s->nsteps > s->nwarmup) {
            w0[r] = tp_add_sat((int64_t)s->steps[s->nwarmup].start, c->map_ns[r]);
            w1[r] = tp_add_sat((int64_t)s->steps[s->nsteps - 1].end, c->map_ns[r]);
        }
        const cJSON *rj = rank_json(ranks, c->rank[r]->rank);
        const cJSON *st = tp_jobj(rj, "steps");
        has_step[r] = tp_jnum(st, "measured") > 0;
        step[r] = tp_jnum(st, "mean_ms");
    }
    tp_clocks_lags(c, w0, w1, cnt, lmed, lmean, lp90);
    /* The criterion: lag per step, each measured step's largest start lag of the rank (a
     * collective it starts inside that step, after the earliest rank), the median over
     * steps. The median over all collectives misses a straggler whenever one collective per
     * step absorbs its delay: under DDP the first gradient all-reduce of a step waits for
     * the late rank, and the later buckets, queued behind it on the same NCCL stream, start
     * nearly together (on 2 x H200 a rank sleeping 15 ms per step had a median lag of
     * 0.94 ms). Without steps, the median lag stands in. */
    step_lags(c, steps, lps);
    for (size_t r = 0; r < n; r++)
        if (!steps[r].nsteps || steps[r].nsteps <= steps[r].nwarmup) lps[r] = lmed[r];
    size_t ns = 0, nl = 0;
    for (size_t r = 0; r < n; r++)
        if (has_step[r]) tmp[ns++] = step[r];
    double med_step = median(tmp, ns);
    for (size_t r = 0; r < n; r++)
        if (cnt[r]) nl++;
    cJSON *sj = cJSON_AddObjectToObject(rep, "stragglers");
    cJSON_AddNumberToObject(sj, "median_step_ms", med_step);
    double floor_ms = o->straggler_share * med_step;
    cJSON_AddNumberToObject(sj, "floor_ms", floor_ms);
    cJSON_AddStringToObject(sj, "rule",
                            n > 2 ? "a rank whose collective start lag per step (or mean step "
                                    "time) exceeds the median over ranks by more than max(3 x "
                                    "1.4826 x MAD, 5 % of the median step time)"
                                  : "with two ranks: the one that arrives last at matched "
                                    "collectives (lag per step) by more than 5 % of the median "
                                    "step time, or whose step time exceeds the other's by as much");
    cJSON *ra = cJSON_AddArrayToObject(sj, "ranks");
    for (size_t r = 0; r < n; r++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "rank", c->rank[r]->rank);
        cJSON_AddStringToObject(e, "host", c->rank[r]->hdr.host);
        if (has_step[r]) cJSON_AddNumberToObject(e, "step_ms", step[r]);
        cJSON_AddNumberToObject(e, "collectives", (double)cnt[r]);
        if (cnt[r]) {
            cJSON_AddNumberToObject(e, "lag_ms_median", lmed[r]);
            cJSON_AddNumberToObject(e, "lag_ms_mean", lmean[r]);
            cJSON_AddNumberToObject(e, "lag_ms_p90", lp90[r]);
            cJSON_AddNumberToObject(e, "lag_ms_per_step", lps[r]);
        }
        cJSON_AddItemToArray(ra, e);
    }
    if (!nl) cJSON_AddStringToObject(sj, "note", "no collective matched across ranks inside the "
                                                 "measured steps: step times only");
    /* threshold per criterion: >2 ranks, the MAD rule about the median; 2 ranks, the gap */
    double lag_mid = 0, lag_thr = floor_ms, step_mid = med_step, step_thr = floor_ms;
    size_t k = 0;
    for (size_t r = 0; r < n; r++)
        if (cnt[r]) tmp[k++] = lps[r];
    if (nl > 2) {
        lag_mid = median(tmp, k);
        for (size_t i = 0; i < k; i++) tmp[i] = fabs(tmp[i] - lag_mid);
        double mad = median(tmp, k);
        cJSON_AddNumberToObject(sj, "lag_mad_ms", mad);
        if (MAD_K * mad > lag_thr) lag_thr = MAD_K * mad;
    } else if (nl == 2) {
        lag_mid = tmp[0] < tmp[1] ? tmp[0] : tmp[1]; /* the earlier rank */
    }
    if (ns > 2) {
        k = 0;
        for (size_t r = 0; r < n; r++)
            if (has_step[r]) tmp[k++] = fabs(step[r] - med_step);
        double mad = median(tmp, k);
        cJSON_AddNumberToObject(sj, "step_mad_ms", mad);
        if (MAD_K * mad > step_thr) step_thr = MAD_K * mad;
    } else if (ns == 2) {
        step_mid = INFINITY;
        for (size_t r = 0; r < n; r++)
            if (has_step[r] && step[r] < step_mid) step_mid = step[r];
    }
    cJSON_AddNumberToObject(sj, "lag_threshold_ms", lag_thr);
    cJSON_AddNumberToObject(sj, "step_threshold_ms", step_thr);
    cJSON *named = cJSON_AddArrayToObject(sj, "named");
    if (!ns) {
        /* without steps there is no scale for "late": lags are shown, nobody is named */
        cJSON_DeleteItemFromObjectCaseSensitive(sj, "note");
        cJSON_AddStringToObject(sj, "note", "no measured steps: collective lags shown, no "
                                            "straggler named (the threshold is a share of the step)");
        goto out;
    }
    for (size_t r = 0; r < n; r++) {
        int by_lag = nl >= 2 && cnt[r] && lps[r] - lag_mid > lag_thr;
        int by_step = ns >= 2 && has_step[r] && step[r] - step_mid > step_thr;
        if (!by_lag && !by_step) continue;
        cJSON *e = cJSON_CreateObject();
        int rank = c->rank[r]->rank;
        cJSON_AddNumberToObject(e, "rank", rank);
        cJSON_AddStringToObject(e, "host", c->rank[r]->hdr.host);
        cJSON_AddStringToObject(e, "by", by_lag && by_step ? "collective lag and step time"
                                         : by_lag          ? "collective lag"
                                                           : "step time");
        if (cnt[r]) {
            cJSON_AddNumberToObject(e, "lag_ms", lmed[r]);
            cJSON_AddNumberToObject(e, "lag_ms_per_step", lps[r]);
            cJSON_AddNumberToObject(e, "lag_excess_ms", lps[r] - lag_mid);
        }
        if (has_step[r]) {
            cJSON_AddNumberToObject(e, "step_ms", step[r]);
            cJSON_AddNumberToObject(e, "step_excess_ms", step[r] - (ns == 2 ? step_mid : med_step));
        }
        /* its GPU, and how its clocks, power and temperature compare with the others' */
        const cJSON *rj = rank_json(ranks, rank), *g = first_gpu(rj);
        if (g) {
            cJSON *gj = cJSON_AddObjectToObject(e, "gpu");
            cJSON_AddNumberToObject(gj, "index", tp_jnum(g, "index"));
            if (tp_jobj(g, "name")) cJSON_AddStringToObject(gj, "name", tp_jstr(g, "name"));
            if (tp_jobj(g, "uuid")) cJSON_AddStringToObject(gj, "uuid", tp_jstr(g, "uuid"));
        } else {
            const cJSON *d = cJSON_GetArrayItem(tp_jobj(tp_jobj(rj, "gpu"), "devices"), 0);
            if (d) cJSON_AddNumberToObject(e, "cuda_device", tp_jnum(d, "device"));
        }
        if (g && cJSON_IsTrue(tp_jobj(tp_jobj(rj, "nvml"), "shared_with_other_ranks"))) {
            cJSON_AddStringToObject(e, "gpu_note", "the rank's GPU is not known (NVML shows every "
                                                   "GPU of the host): no comparison");
        } else if (g) {
            static const struct { const char *k; double rel, abs; } cmp[] = {
                {"sm_clock_mhz_mean", 0.03, 0}, {"power_mean_w", 0.10, 0}, {"temp_c_max", 0, 5}};
            cJSON *dj = cJSON_AddObjectToObject(e, "vs_others");
            int any = 0, compared = 0;
            for (size_t q = 0; q < sizeof cmp / sizeof *cmp; q++) {
                if (!tp_jhas(g, cmp[q].k)) continue;
                size_t m = 0;
                for (size_t x = 0; x < n; x++) {
                    if (x == r) continue;
                    const cJSON *og = first_gpu(rank_json(ranks, c->rank[x]->rank));
                    if (og && tp_jhas(og, cmp[q].k)) tmp[m++] = tp_jnum(og, cmp[q].k);
                }
                if (!m) continue;
                double mine = tp_jnum(g, cmp[q].k), others = median(tmp, m);
                int differs = cmp[q].rel > 0 ? fabs(mine - others) > cmp[q].rel * fabs(others)
                                             : fabs(mine - others) > cmp[q].abs;
                cJSON *v = cJSON_AddObjectToObject(dj, cmp[q].k);
                cJSON_AddNumberToObject(v, "rank", mine);
                cJSON_AddNumberToObject(v, "others_median", others);
                cJSON_AddBoolToObject(v, "differs", differs);
                any |= differs;
                compared = 1;
            }
            if (compared) cJSON_AddBoolToObject(e, "gpu_differs", any);
        }
        cJSON_AddItemToArray(named, e);
    }
out:
    free(w0);
    free(w1);
    free(cnt);
    free(lmed);
    free(lmean);
    free(lp90);
    free(step);
    free(tmp);
    free(has_step);
    free(lps);
    for (size_t r = 0; steps && r < n; r++) tp_steps_free(&steps[r]);
    free(steps);
}

/* ------------------------------------------------------------------ rules */

typedef struct ctx {
    const cJSON *rep, *ranks;
    cJSON *findings;
    const tp_report_opts *o;
} ctx;

typedef struct rule rule;
struct rule {
    const char *id;
    const char *test;           /* the documented function, with its thresholds named */
    const char *recommendation;
    int (*eval)(const ctx *, const rule *); /* number of findings appended; NULL: comm.c */
};

static cJSON *finding(const ctx *c, const rule *ru, const char *sev, int rank, const char *msg) {
    cJSON *fd = cJSON_CreateObject();
    cJSON_AddStringToObject(fd, "id", ru->id);
    cJSON_AddStringToObject(fd, "severity", sev);
    if (rank >= 0) cJSON_AddNumberToObject(fd, "rank", rank);
    cJSON_AddStringToObject(fd, "message", msg);
    cJSON_AddStringToObject(fd, "recommendation", ru->recommendation);
    cJSON_AddItemToArray(c->findings, fd);
    return cJSON_AddObjectToObject(fd, "evidence");
}

static void add_ranks(cJSON *ev, const int *rk, size_t n) {
    cJSON *a = cJSON_AddArrayToObject(ev, "ranks");
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(rk[i]));
}

#define MAXR 4096

static int rule_data(const ctx *c, const rule *ru) {
    const cJSON *tp = tp_jobj(c->rep, "throughput");
    double samples = tp_jnum(tp, "samples_per_step");
    int rk[MAXR];
    size_t n = 0;
    const cJSON *r, *worst = NULL;
    double wv = -1;
    cJSON_ArrayForEach(r, c->ranks) {
        const cJSON *dl = tp_jobj(r, "data_loading"), *b = tp_jobj(r, "breakdown");
        if (tp_jnum(tp_jobj(r, "steps"), "measured") < c->o->diag_min_steps) continue;
        double share = cJSON_IsTrue(tp_jobj(dl, "found")) ? tp_jnum(dl, "share") : 0;
        double per_sample = samples > 0 && tp_jhas(dl, "ms_per_step") ? tp_jnum(dl, "ms_per_step") / samples : 0;
        double start = !strcmp(tp_jstr(b, "basis"), "gpu") && !strcmp(tp_jstr(b, "per"), "step")
                           ? tp_jnum(tp_jobj(b, "share"), "start_idle_data") : 0;
        int hit = share > c->o->data_share || per_sample > c->o->data_ms_per_sample ||
                  start > c->o->data_start_idle_share;
        if (!hit) continue;
        if (n < MAXR) rk[n++] = (int)tp_jnum(r, "rank");
        double v = share + start;
        if (v > wv) { wv = v; worst = r; }
    }
    if (!n) return 0;
    const cJSON *dl = tp_jobj(worst, "data_loading"), *b = tp_jobj(worst, "breakdown");
    double share = tp_jnum(dl, "share"), ms = tp_jnum(dl, "ms_per_step");
    double start = tp_jnum(tp_jobj(b, "share"), "start_idle_data");
    char msg[512];
    int len = snprintf(msg, sizeof msg, "data loading holds back rank %.0f: the data range takes "
                                        "%.1f %% of the step (%.2f ms)",
                       tp_jnum(worst, "rank"), 100 * share, ms);
    if (samples > 0)
        len += snprintf(msg + len, sizeof msg - (size_t)len, ", %.2f ms per sample", ms / samples);
    if (start > 0)
        snprintf(msg + len, sizeof msg - (size_t)len, "; the GPU waits idle for it at step start "
                                                       "for %.1f %% of the step", 100 * start);
    cJSON *ev = finding(c, ru, "warning", (int)tp_jnum(worst, "rank"), msg);
    cJSON_AddNumberToObject(ev, "data_share", share);
    cJSON_AddNumberToObject(ev, "data_ms_per_step", ms);
    if (samples > 0) cJSON_AddNumberToObject(ev, "data_ms_per_sample", ms / samples);
    cJSON_AddNumberToObject(ev, "start_idle_data_share", start);
    if (tp_jobj(tp_jobj(b, "ms"), "start_idle_data"))
        cJSON_AddNumberToObject(ev, "start_idle_data_ms_p90", tp_jnum(tp_jobj(tp_jobj(b, "ms"), "start_idle_data"), "p90"));
    cJSON_AddNumberToObject(ev, "threshold_share", c->o->data_share);
    cJSON_AddNumberToObject(ev, "threshold_ms_per_sample", c->o->data_ms_per_sample);
    cJSON_AddNumberToObject(ev, "threshold_start_idle_share", c->o->data_start_idle_share);
    add_ranks(ev, rk, n);
    return 1;
}

/* A rule over each rank's GPU breakdown: value(b) > threshold. */
typedef double (*bval)(const cJSON *b, const cJSON *rank, const tp_report_opts *o, int *hit);

static const cJSON *worst_gpu_rank(const ctx *c, bval f, int *rk, size_t *n, double *wv) {
    const cJSON *r, *worst = NULL;
    *n = 0;
    *wv = -INFINITY;
    cJSON_ArrayForEach(r, c->ranks) {
        const cJSON *b = tp_jobj(r, "breakdown");
        if (strcmp(tp_jstr(b, "basis"), "gpu") || strcmp(tp_jstr(b, "per"), "step") ||
            tp_jnum(b, "windows") < c->o->diag_min_steps)
            continue;
        int hit = 0;
        double v = f(b, r, c->o, &hit);
        if (!hit) continue;
        if (*n < MAXR) rk[(*n)++] = (int)tp_jnum(r, "rank");
        if (v > *wv) { *wv = v; worst = r; }
    }
    return worst;
}

static double v_launch(const cJSON *b, const cJSON *r, const tp_report_opts *o, int *hit) {
    (void)r;
    double other = tp_jnum(tp_jobj(b, "share"), "idle_other_short_gaps");
    *hit = other > o->launch_idle_share && tp_jnum(b, "kernel_median_us") < o->launch_kernel_us &&
           tp_jnum(b, "kernels_per_step") >= 20 && tp_jnum(b, "idle_gaps_per_step") >= 10;
    return other;
}

static int rule_launch(const ctx *c, const rule *ru) {
    int rk[MAXR];
    size_t n;
    double wv;
    const cJSON *w = worst_gpu_rank(c, v_launch, rk, &n, &wv);
    if (!w) return 0;
    const cJSON *b = tp_jobj(w, "breakdown");
    char msg[512];
    snprintf(msg, sizeof msg, "rank %.0f looks launch-bound: %.0f kernels per step with a median "
                              "of %.1f us, and the GPU idles in %.0f gaps per step (median %.1f us); "
                              "gaps under 100 us with no data loading or synchronisation to "
                              "blame add up to %.1f %% of the step",
             tp_jnum(w, "rank"), tp_jnum(b, "kernels_per_step"), tp_jnum(b, "kernel_median_us"),
             tp_jnum(b, "idle_gaps_per_step"), tp_jnum(b, "idle_gap_median_us"), 100 * wv);
    cJSON *ev = finding(c, ru, "warning", (int)tp_jnum(w, "rank"), msg);
    cJSON_AddNumberToObject(ev, "idle_other_short_gaps_share", wv);
    cJSON_AddNumberToObject(ev, "idle_other_share", tp_jnum(tp_jobj(b, "share"), "idle_other"));
    cJSON_AddNumberToObject(ev, "kernels_per_step", tp_jnum(b, "kernels_per_step"));
    cJSON_AddNumberToObject(ev, "kernel_median_us", tp_jnum(b, "kernel_median_us"));
    cJSON_AddNumberToObject(ev, "idle_gaps_per_step", tp_jnum(b, "idle_gaps_per_step"));
    cJSON_AddNumberToObject(ev, "idle_gap_median_us", tp_jnum(b, "idle_gap_median_us"));
    cJSON_AddNumberToObject(ev, "threshold_idle_share", c->o->launch_idle_share);
    cJSON_AddNumberToObject(ev, "threshold_kernel_us", c->o->launch_kernel_us);
    if (tp_jhas(b, "most_idle_step")) cJSON_AddNumberToObject(ev, "most_idle_step", tp_jnum(b, "most_idle_step"));
    add_ranks(ev, rk, n);
    return 1;
}

static double v_sync(const cJSON *b, const cJSON *r, const tp_report_opts *o, int *hit) {
    (void)r;
    double s = tp_jnum(tp_jobj(b, "share"), "idle_host_sync");
    *hit = s > o->host_sync_share;
    return s;
}

static int rule_sync(const ctx *c, const rule *ru) {
    int rk[MAXR];
    size_t n;
    double wv;
    const cJSON *w = worst_gpu_rank(c, v_sync, rk, &n, &wv);
    if (!w) return 0;
    const cJSON *b = tp_jobj(w, "breakdown"), *g = tp_jobj(w, "gpu");
    char msg[512];
    snprintf(msg, sizeof msg, "host synchronisation inside the steps of rank %.0f: the GPU sits "
                              "idle behind blocking CUDA calls for %.1f %% of the step (%.2f ms); "
                              "%.1f synchronising calls per step block the host %.2f ms",
             tp_jnum(w, "rank"), 100 * wv, tp_jnum(tp_jobj(tp_jobj(b, "ms"), "idle_host_sync"), "mean"),
             tp_jnum(g, "host_syncs"), tp_jnum(g, "host_sync_blocked_ms"));
    cJSON *ev = finding(c, ru, "warning", (int)tp_jnum(w, "rank"), msg);
    cJSON_AddNumberToObject(ev, "idle_host_sync_share", wv);
    cJSON_AddNumberToObject(ev, "idle_host_sync_ms", tp_jnum(tp_jobj(tp_jobj(b, "ms"), "idle_host_sync"), "mean"));
    cJSON_AddNumberToObject(ev, "host_syncs_per_step", tp_jnum(g, "host_syncs"));
    cJSON_AddNumberToObject(ev, "host_sync_blocked_ms", tp_jnum(g, "host_sync_blocked_ms"));
    cJSON_AddNumberToObject(ev, "threshold", c->o->host_sync_share);
    add_ranks(ev, rk, n);
    return 1;
}

static double v_busy(const cJSON *b, const cJSON *r, const tp_report_opts *o, int *hit) {
    (void)r;
    double busy = tp_jnum(tp_jobj(b, "share"), "busy");
    *hit = busy < o->busy_share;
    return -busy; /* the least busy is the worst */
}

static int rule_busy(const ctx *c, const rule *ru) {
    int rk[MAXR];
    size_t n;
    double wv;
    const cJSON *w = worst_gpu_rank(c, v_busy, rk, &n, &wv);
    if (!w) return 0;
    const cJSON *sh = tp_jobj(tp_jobj(w, "breakdown"), "share");
    /* the largest idle part names where to look */
    static const char *const parts[3][2] = {{"idle_data", "data loading"},
                                            {"idle_host_sync", "host synchronisation"},
                                            {"idle_other", "other (launch overhead, CPU work, "
                                                           "waiting on another rank)"}};
    size_t big = 0;
    for (size_t i = 1; i < 3; i++)
        if (tp_jnum(sh, parts[i][0]) > tp_jnum(sh, parts[big][0])) big = i;
    char msg[512];
    snprintf(msg, sizeof msg, "GPU busy only %.1f %% of the step on rank %.0f (below %.0f %%): "
                              "idle %.1f %%, mostly %s (%.1f %%)",
             -100 * wv, tp_jnum(w, "rank"), 100 * c->o->busy_share, 100 * tp_jnum(sh, "idle"),
             parts[big][1], 100 * tp_jnum(sh, parts[big][0]));
    cJSON *ev = finding(c, ru, "warning", (int)tp_jnum(w, "rank"), msg);
    cJSON_AddNumberToObject(ev, "busy_share", -wv);
    cJSON_AddNumberToObject(ev, "idle_data_share", tp_jnum(sh, "idle_data"));
    cJSON_AddNumberToObject(ev, "idle_host_sync_share", tp_jnum(sh, "idle_host_sync"));
    cJSON_AddNumberToObject(ev, "idle_other_share", tp_jnum(sh, "idle_other"));
    cJSON_AddNumberToObject(ev, "threshold", c->o->busy_share);
    if (tp_jhas(tp_jobj(w, "breakdown"), "most_idle_step"))
        cJSON_AddNumberToObject(ev, "most_idle_step", tp_jnum(tp_jobj(w, "breakdown"), "most_idle_step"));
    add_ranks(ev, rk, n);
    return 1;
}

/* memory: NVML's used/total of the rank's GPUs, else CUPTI's allocator peak against the
 * NVML total */
static int rule_memory(const ctx *c, const rule *ru) {
    int rk[MAXR];
    size_t n = 0;
    const cJSON *r, *worst = NULL;
    double wv = 0, wpeak = 0, wtot = 0;
    const char *wsrc = "";
    cJSON_ArrayForEach(r, c->ranks) {
        const cJSON *g;
        double best = 0, peak = 0, tot = 0;
        const char *src = "";
        cJSON_ArrayForEach(g, tp_jobj(tp_jobj(r, "nvml"), "gpus")) {
            if (tp_jnum(g, "mem_used_peak_share") > best) {
                best = tp_jnum(g, "mem_used_peak_share");
                peak = tp_jnum(g, "mem_used_peak_bytes");
                tot = tp_jnum(g, "mem_total_bytes");
                src = "nvml";
            }
        }
        const cJSON *g0 = first_gpu(r), *d;
        double total = tp_jnum(g0, "mem_total_bytes");
        cJSON_ArrayForEach(d, tp_jobj(tp_jobj(r, "gpu"), "devices")) {
            double s = total > 0 ? tp_jnum(d, "memory_peak_bytes") / total : 0;
            if (s > best) {
                best = s;
                peak = tp_jnum(d, "memory_peak_bytes");
                tot = total;
                src = "cupti";
            }
        }
        if (best <= c->o->memory_share) continue;
        if (n < MAXR) rk[n++] = (int)tp_jnum(r, "rank");
        if (best > wv) { wv = best; worst = r; wpeak = peak; wtot = tot; wsrc = src; }
    }
    if (!worst) return 0;
    char msg[400];
    snprintf(msg, sizeof msg, "GPU memory peak on rank %.0f is %.1f %% of capacity (%.2f of %.2f "
                              "GiB): little headroom; fragmentation or a longer sequence can "
                              "run out of memory",
             tp_jnum(worst, "rank"), 100 * wv, wpeak / 1073741824.0, wtot / 1073741824.0);
    cJSON *ev = finding(c, ru, "warning", (int)tp_jnum(worst, "rank"), msg);
    cJSON_AddNumberToObject(ev, "peak_share", wv);
    cJSON_AddNumberToObject(ev, "peak_bytes", wpeak);
    cJSON_AddNumberToObject(ev, "capacity_bytes", wtot);
    cJSON_AddStringToObject(ev, "source", wsrc);
    cJSON_AddNumberToObject(ev, "threshold", c->o->memory_share);
    add_ranks(ev, rk, n);
    return 1;
}

static int rule_straggler(const ctx *c, const rule *ru) {
    const cJSON *sj = tp_jobj(c->rep, "stragglers"), *e;
    int fired = 0;
    cJSON_ArrayForEach(e, tp_jobj(sj, "named")) {
        char msg[1024], gpu[200] = "";
        const cJSON *g = tp_jobj(e, "gpu");
        if (g)
            snprintf(gpu, sizeof gpu, ", GPU %.0f%s%s", tp_jnum(g, "index"), tp_jobj(g, "name") ? " " : "",
                     safe(tp_jstr(g, "name")));
        char diff[200] = "";
        const cJSON *vs = tp_jobj(e, "vs_others"), *v;
        if (vs) {
            int l = snprintf(diff, sizeof diff, "; its GPU %s the others",
                             cJSON_IsTrue(tp_jobj(e, "gpu_differs")) ? "differs from" : "matches");
            cJSON_ArrayForEach(v, vs) if (cJSON_IsTrue(tp_jobj(v, "differs")) && l < (int)sizeof diff)
                l += snprintf(diff + l, sizeof diff - (size_t)l, " (%s %.0f vs %.0f)", v->string,
                              tp_jnum(v, "rank"), tp_jnum(v, "others_median"));
        }
        if (tp_jhas(e, "lag_ms"))
            snprintf(msg, sizeof msg, "rank %.0f (host %s%s) is a straggler (%s): in a typical "
                                      "step it starts a collective %.2f ms after the earliest rank "
                                      "(median over steps of the step's largest lag; %.2f ms beyond "
                                      "the others, threshold %.2f ms; median lag over all "
                                      "collectives %.2f ms), step %.2f ms%s",
                     tp_jnum(e, "rank"), safe(tp_jstr(e, "host")), gpu, tp_jstr(e, "by"),
                     tp_jnum(e, "lag_ms_per_step"), tp_jnum(e, "lag_excess_ms"),
                     tp_jnum(sj, "lag_threshold_ms"), tp_jnum(e, "lag_ms"), tp_jnum(e, "step_ms"), diff);
        else
            snprintf(msg, sizeof msg, "rank %.0f (host %s%s) is a straggler (%s): step %.2f ms, "
                                      "%.2f ms beyond the others (threshold %.2f ms)%s",
                     tp_jnum(e, "rank"), safe(tp_jstr(e, "host")), gpu, tp_jstr(e, "by"), tp_jnum(e, "step_ms"),
                     tp_jnum(e, "step_excess_ms"), tp_jnum(sj, "step_threshold_ms"), diff);
        cJSON *ev = finding(c, ru, "warning", (int)tp_jnum(e, "rank"), msg);
        cJSON_AddItemToObject(ev, "straggler", cJSON_Duplicate(e, 1));
        cJSON_AddNumberToObject(ev, "median_step_ms", tp_jnum(sj, "median_step_ms"));
        cJSON_AddNumberToObject(ev, "lag_threshold_ms", tp_jnum(sj, "lag_threshold_ms"));
        cJSON_AddNumberToObject(ev, "step_threshold_ms", tp_jnum(sj, "step_threshold_ms"));
        int rk = (int)tp_jnum(e, "rank");
        add_ranks(ev, &rk, 1);
        fired++;
    }
    return fired;
}

static int rule_throttle(const ctx *c, const rule *ru) {
    int rk[MAXR];
    size_t n = 0;
    const cJSON *r, *worst = NULL, *wg = NULL;
    double wv = -1;
    int wthermal = 0, wpower = 0;
    cJSON_ArrayForEach(r, c->ranks) {
        const cJSON *g;
        int hit = 0;
        cJSON_ArrayForEach(g, tp_jobj(tp_jobj(r, "nvml"), "gpus")) {
            const cJSON *ce = tp_jobj(g, "clock_events");
            double mx = tp_jnum(g, "sm_clock_mhz_max"), mn = tp_jnum(g, "sm_clock_mhz_min");
            int clocks = cJSON_IsTrue(tp_jobj(ce, "throttled")) &&
                         tp_jnum(ce, "throttled_share") > c->o->throttle_share && mx > 0 &&
                         mn < (1 - c->o->clock_drop_share) * mx;
            double lim = tp_jnum(g, "power_limit_w");
            int power = lim > 0 && tp_jnum(g, "power_max_w") >= c->o->power_limit_share * lim;
            if (!clocks && !power) continue;
            hit = 1;
            double v = (clocks ? tp_jnum(ce, "throttled_share") : 0) + (power ? 1 : 0);
            if (v > wv) { wv = v; worst = r; wg = g; wthermal = clocks; wpower = power; }
        }
        if (hit && n < MAXR) rk[n++] = (int)tp_jnum(r, "rank");
    }
    if (!worst) return 0;
    const cJSON *ce = tp_jobj(wg, "clock_events"), *x;
    char reasons[200] = "";
    int l = 0;
    cJSON_ArrayForEach(x, tp_jobj(ce, "reasons")) if (cJSON_IsString(x) && l < (int)sizeof reasons)
        l += snprintf(reasons + l, sizeof reasons - (size_t)l, "%s%s", l ? ", " : "", x->valuestring);
    char msg[600];
    snprintf(msg, sizeof msg, "GPU %.0f of rank %.0f is held back:%s%s%s",
             tp_jnum(wg, "index"), tp_jnum(worst, "rank"),
             wthermal ? " the SM clock falls" : "",
             wthermal && wpower ? " and" : "",
             wpower ? " power reaches its enforced limit" : "");
    size_t ml = strlen(msg);
    if (wthermal)
        snprintf(msg + ml, sizeof msg - ml, " (SM clock %.0f-%.0f MHz, throttle reasons in %.0f %% of "
                                            "samples: %s)",
                 tp_jnum(wg, "sm_clock_mhz_min"), tp_jnum(wg, "sm_clock_mhz_max"),
                 100 * tp_jnum(ce, "throttled_share"), reasons);
    ml = strlen(msg);
    if (wpower)
        snprintf(msg + ml, sizeof msg - ml, " (power up to %.0f W of a %.0f W limit)",
                 tp_jnum(wg, "power_max_w"), tp_jnum(wg, "power_limit_w"));
    cJSON *ev = finding(c, ru, "warning", (int)tp_jnum(worst, "rank"), msg);
    cJSON_AddNumberToObject(ev, "gpu", tp_jnum(wg, "index"));
    cJSON_AddBoolToObject(ev, "clock_throttled", wthermal);
    cJSON_AddBoolToObject(ev, "power_at_limit", wpower);
    static const char *const keys[] = {"sm_clock_mhz_min", "sm_clock_mhz_max", "power_max_w",
                                       "power_limit_w", "temp_c_max"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (tp_jhas(wg, keys[i])) cJSON_AddNumberToObject(ev, keys[i], tp_jnum(wg, keys[i]));
    if (ce) {
        cJSON_AddNumberToObject(ev, "throttled_share", tp_jnum(ce, "throttled_share"));
        cJSON_AddItemToObject(ev, "reasons", cJSON_Duplicate(tp_jobj(ce, "reasons"), 1));
    }
    cJSON_AddNumberToObject(ev, "threshold_throttle_share", c->o->throttle_share);
    cJSON_AddNumberToObject(ev, "threshold_clock_drop_share", c->o->clock_drop_share);
    cJSON_AddNumberToObject(ev, "threshold_power_limit_share", c->o->power_limit_share);
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
     "launch_idle_share (20 %) of the step, with a median kernel shorter than launch_kernel_us (50 us), at least 20 "
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
    {"memory_peak",
     "a rank's GPU memory peak (NVML used, or the CUDA allocator's peak from CUPTI) above "
     "memory_share (90 %) of the GPU's capacity",
     "make headroom: activation checkpointing, a smaller micro-batch with gradient "
     "accumulation, sharding (FSDP / ZeRO), PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
     "against fragmentation",
     rule_memory},
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

static void diagnosis(cJSON *rep, const cJSON *ranks, cJSON *findings, const tp_report_opts *o) {
    ctx c = {rep, ranks, findings, o};
    cJSON *d = cJSON_AddObjectToObject(rep, "diagnosis");
    cJSON *ra = cJSON_AddArrayToObject(d, "rules");
    for (size_t i = 0; i < sizeof rules / sizeof *rules; i++) {
        const rule *ru = &rules[i];
        int fired = 0;
        if (ru->eval) {
            fired = ru->eval(&c, ru);
        } else {
            /* implemented in comm.c: give its finding the recommendation */
            cJSON *fd;
            cJSON_ArrayForEach(fd, findings) {
                if (strcmp(tp_jstr(fd, "id"), ru->id)) continue;
                fired++;
                if (!tp_jobj(fd, "recommendation"))
                    cJSON_AddStringToObject(fd, "recommendation", ru->recommendation);
            }
        }
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "id", ru->id);
        cJSON_AddStringToObject(e, "test", ru->test);
        cJSON_AddNumberToObject(e, "findings", fired);
        cJSON_AddItemToArray(ra, e);
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
        {"busy_share", o->busy_share}, {"diag_min_steps", o->diag_min_steps}};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) cJSON_AddNumberToObject(th, t[i].k, t[i].v);
}

void tp_diagnose_run(cJSON *rep, const tp_run *run, const cJSON *ranks, cJSON *findings,
                     const tp_report_opts *o) {
    tp_clocks c;
    if (tp_clocks_build(run, &c) == 0) {
        tp_clocks_json(rep, &c);
        stragglers_section(rep, run, &c, ranks, o);
        tp_clocks_free(&c);
    }
    tp_throughput_section(rep, run, ranks, o->tokens_per_step, o->samples_per_step,
                          o->flops_per_step, o->model, o->dtype);
    diagnosis(rep, ranks, findings, o);
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
