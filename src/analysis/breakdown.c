/*
 * breakdown.c — the step breakdown of a rank (breakdown.h has the rule; docs/report-json.md
 * the fields). Work is placed where it ran, clipped to each step's window (HTA's rule for the
 * breakdown: a kernel launched in step i that runs into step i+1 is step i+1's busy time), so
 * the parts of a step add up to its wall time.
 */
#define _GNU_SOURCE
#include "analysis/breakdown.h"
#include "analysis/alloc.h"
#include "analysis/breakdown_cpu.h"
#include "analysis/capture.h"
#include "analysis/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "analysis/comm.h"
#include "analysis/span_store.h"
#include "analysis/spans.h"
#include "format/format.h"

cJSON *tp_stat5_json(const tp_stat5 *s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "mean", s->mean);
    cJSON_AddNumberToObject(o, "p50", s->p50);
    cJSON_AddNumberToObject(o, "p90", s->p90);
    cJSON_AddNumberToObject(o, "min", s->min);
    cJSON_AddNumberToObject(o, "max", s->max);
    return o;
}

int tp_is_blocking_sync(const char *n) {
    if (!n) return 0;
    if (strstr(n, "Synchronize")) return 1;
    /* peer copies return at once (cuda_runtime_api.h: cudaMemcpyPeer "is asynchronous with
     * respect to the host") */
    if (strstr(n, "Async") || strstr(n, "Peer")) return 0;
    return !strncmp(n, "cudaMemcpy", 10) || !strncmp(n, "cuMemcpy", 8);
}

static int is_data(const char *name, const char *const *names, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcasecmp(name, names[i])) return 1;
    return 0;
}

/* ------------------------------------------------------------------ span sets */

typedef struct spans {
    tp_span *v;
    size_t n, cap;
} spans;

static int add(spans *s, uint64_t a, uint64_t b) {
    if (b <= a) return 0;
    if (s->n == s->cap) {
        size_t c = s->cap ? s->cap * 2 : 256;
        tp_span *nv = tp_realloc(s->v, c * sizeof *nv);
        if (!nv) return -1;
        s->v = nv;
        s->cap = c;
    }
    s->v[s->n++] = (tp_span){a, b};
    return 0;
}

/* sorts and merges in place: disjoint, increasing */
static void merge(spans *s) {
    if (s->n < 2) return;
    tp_spans_sort(s->v, s->n);
    size_t k = 0;
    for (size_t i = 1; i < s->n; i++) {
        if (s->v[i].s <= s->v[k].e) {
            if (s->v[i].e > s->v[k].e) s->v[k].e = s->v[i].e;
        } else {
            s->v[++k] = s->v[i];
        }
    }
    s->n = k + 1;
}

/* first merged span ending after t */
static size_t first_after(const spans *s, uint64_t t) {
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->v[mid].e <= t) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* ns of [a, b) covered by the merged set */
static uint64_t covered(const spans *s, uint64_t a, uint64_t b) {
    uint64_t c = 0;
    for (size_t i = first_after(s, a); i < s->n && s->v[i].s < b; i++) {
        uint64_t x = s->v[i].s > a ? s->v[i].s : a, y = s->v[i].e < b ? s->v[i].e : b;
        if (y > x) c += y - x;
    }
    return c;
}

static int touches(const spans *s, uint64_t a, uint64_t b) {
    size_t i = first_after(s, a);
    return i < s->n && s->v[i].s < b;
}

/* The data-loading ranges of p (the step thread's when it has any, else every thread's),
 * as the report's data_loading counts them. */
static int data_spans(const tp_process *p, const tp_steps *st, const char *const *names,
                      size_t nn, spans *d) {
    for (int pass = 0; pass < 2 && !d->n; pass++)
        for (size_t ti = 0; ti < p->nthreads; ti++) {
            if (pass == 0 && st->source != TP_STEPS_NONE && ti != st->thread) continue;
            const tp_thread *t = &p->threads[ti];
            for (size_t k = 0; k < t->nranges; k++) {
                const tp_range *r = &t->ranges[k];
                if (r->flags & TP_R_UNCLOSED) continue;
                if (is_data(r->name, names, nn) && add(d, r->start, r->end)) return -1;
            }
        }
    merge(d);
    return 0;
}

/* ------------------------------------------------------------------ GPU basis */

enum { C_STEP = TP_BD_STEP, C_COMPUTE = TP_BD_COMPUTE, C_EXPOSED = TP_BD_EXPOSED_COMM,
       C_OVERLAP = TP_BD_OVERLAPPED_COMM, C_COPY = TP_BD_MEMCPY, C_IDLE = TP_BD_IDLE,
       C_DATA = TP_BD_IDLE_DATA, C_SYNC = TP_BD_IDLE_HOST_SYNC, C_OTHER = TP_BD_IDLE_OTHER,
       C_START = TP_BD_START_IDLE, C_START_DATA = TP_BD_START_IDLE_DATA,
       C_SHORT = TP_BD_IDLE_OTHER_SHORT_GAPS, C_N = TP_BD_NPARTS };

/* An idle gap shorter than this between two pieces of GPU work is launch latency, not a pause
 * of the host: the launch-bound signature when such gaps add up. */
#define SHORT_GAP_NS 100000ull

/* The document's names of the parts (tp_bd_part order). */
static const char *const cname[TP_BD_NPARTS] = {
    "step", "compute", "exposed_comm", "overlapped_comm", "memcpy_memset", "idle", "idle_data",
    "idle_host_sync", "idle_other", "start_idle", "start_idle_data", "idle_other_short_gaps"};

const char *tp_bd_part_name(tp_bd_part part) {
    return part >= 0 && part < TP_BD_NPARTS ? cname[part] : "";
}

/* The main device: the most kernel time (of at most 64 devices); *ndev: how many ran
 * kernels. */
static uint32_t main_device(const tp_process *p, size_t *ndevp) {
    uint32_t devs[64] = {0};
    double dns[64];
    size_t ndev = 0;
    for (size_t i = 0; i < p->ngpu; i++) {
        if (p->gpu[i].type != TPROF_REC_GPU_KERNEL) continue;
        size_t k = 0;
        while (k < ndev && devs[k] != p->gpu[i].device) k++;
        if (k == ndev) {
            if (ndev == 64) continue;
            devs[ndev] = p->gpu[i].device;
            dns[ndev++] = 0;
        }
        dns[k] += (double)(p->gpu[i].end - p->gpu[i].start);
    }
    size_t best = 0;
    for (size_t k = 1; k < ndev; k++)
        if (dns[k] > dns[best]) best = k;
    *ndevp = ndev;
    return devs[best];
}

/* The span sets of the main device. Compute kernels (K), communication (C), both (KC) and all
 * work (U) are unions walked in start order (spans.h) from the GPU records and C's spans: a
 * rank's kernels are millions of spans, so none of them is copied. Communication (C: its
 * kernels and ops, a few per op), data loading (D) and the host's blocking synchronisations
 * (S) are kept merged. */
typedef struct gpu_sets {
    const tp_process *p;
    uint32_t dev;
    spans C, D, S;
} gpu_sets;

static void gpu_sets_free(gpu_sets *g) {
    free(g->C.v);
    free(g->D.v);
    free(g->S.v);
}

/* A compute kernel of the device *arg (communication kernels are C's). */
static int compute_kernel(const tp_gpu_op *o, const void *arg) {
    return o->device == *(const uint32_t *)arg && o->type == TPROF_REC_GPU_KERNEL &&
           !tp_comm_is_kernel(o);
}

/* Any work of the device *arg: kernels, copies, memsets (not its synchronisations). */
static int device_work(const tp_gpu_op *o, const void *arg) {
    return o->device == *(const uint32_t *)arg && o->type != TPROF_REC_GPU_SYNC;
}

/* A union over g's sets: compute kernels (k), all work (w), C (c), any of them, with the
 * sources' state in src (room for 3). */
typedef struct union_src {
    tp_gpu_walk k, w;
    tp_span_array c;
    tp_span_walk *h; /* C's other part: the blocking calls of the host-timed ops read apart */
} union_src;

/* 0, or -1 when out of memory; src->h is closed by the caller (union_done). */
static int sets_union(tp_union *u, union_src *src, const gpu_sets *g, int k, int w, int c) {
    tp_union_init(u);
    src->k = (tp_gpu_walk){g->p, compute_kernel, &g->dev, 0};
    src->w = (tp_gpu_walk){g->p, device_work, &g->dev, 0};
    src->c = (tp_span_array){g->C.v, g->C.n, 0};
    src->h = c ? tp_span_walk_open(tp_comm_stream_host(g->p, 0)) : NULL;
    if (c && !src->h) return -1;
    if (k) tp_union_add(u, tp_gpu_walk_next, &src->k);
    if (w) tp_union_add(u, tp_gpu_walk_next, &src->w);
    if (c) tp_union_add(u, tp_span_array_next, &src->c);
    if (c) tp_union_add(u, tp_span_walk_next, src->h);
    return 0;
}

static void union_done(union_src *src) { tp_span_walk_close(src->h); }

/* Per window: out[w] = ns of window w that the union of the sets asked covers. 0, or -1 when
 * out of memory. */
static int union_steps(const gpu_sets *g, int k, int w, int c, const tp_step *win, size_t nw,
                       uint64_t *out) {
    tp_union u;
    union_src src;
    if (sets_union(&u, &src, g, k, w, c)) return -1;
    tp_union_steps_each(&u, win, nw, out);
    union_done(&src);
    return 0;
}

/* Fills g's kept sets; returns -1 when out of memory. */
static int gpu_sets_build(gpu_sets *g, const tp_process *p, const tp_steps *st, uint32_t dev,
                          const char *const *names, size_t nn) {
    g->p = p;
    g->dev = dev;
    tp_comm_time *own;
    const tp_comm_time *tm = tp_comm_times(p, &own);
    int oom = !tm;
    if (!oom) oom |= tp_comm_device_spans(p, tm, 1, dev, &g->C.v, &g->C.n, &g->C.cap) != 0;
    if (!oom) merge(&g->C);
    if (!oom) oom |= data_spans(p, st, names, nn, &g->D);
    for (size_t i = 0; !oom && i < p->napi; i++)
        if (tp_is_blocking_sync(p->api[i].name)) oom |= add(&g->S, p->api[i].start, p->api[i].end);
    free(own);
    if (oom) return -1;
    merge(&g->S);
    return 0;
}

/* Idle gap [gs, ge) of window w (starting at a) into its parts L. */
static void gpu_gap(const gpu_sets *g, uint64_t a, uint64_t gs, uint64_t ge, uint64_t *L) {
    uint64_t dd = covered(&g->D, gs, ge), rest = ge - gs - dd;
    L[C_DATA] += dd;
    if (touches(&g->S, gs, ge)) {
        L[C_SYNC] += rest;
    } else {
        L[C_OTHER] += rest;
        if (ge - gs < SHORT_GAP_NS) L[C_SHORT] += rest;
    }
    if (gs == a) {
        L[C_START] = ge - gs;
        L[C_START_DATA] = dd;
    }
}

/* The idle gaps of every window (where no work of the device ran), walking U once in start
 * order: with len (TP_BD_NPARTS per window) and ng, each gap into its window's parts and
 * count, *ngaps the gaps of the measured windows (w >= nwarm); with q instead, the lengths
 * (ns) of the measured windows' gaps into q. L[C_IDLE] is the windows' length less U's
 * cover, which is their gaps' sum. */
static int gpu_gaps(const gpu_sets *g, const tp_step *win, size_t nw, size_t nwarm,
                    uint64_t *len, uint64_t *ng, size_t *ngaps, tp_kth *q) {
    tp_union u;
    union_src src;
    if (sets_union(&u, &src, g, 0, 1, 1)) return -1;
    for (size_t w = 0; w < nw; w++) {
        uint64_t a = win[w].start, e = win[w].end, t = a, idle = 0;
        uint64_t *L = len ? len + w * C_N : NULL;
        const tp_span *c;
        while ((c = tp_union_peek(&u)) && c->e <= a) tp_union_pop(&u);
        for (;;) {
            c = tp_union_peek(&u);
            uint64_t gs = t, ge = c && c->s < e ? c->s : e;
            if (ge > gs) {
                idle += ge - gs;
                if (L) {
                    gpu_gap(g, a, gs, ge, L);
                    ng[w]++;
                    if (w >= nwarm) (*ngaps)++;
                } else if (w >= nwarm) {
                    tp_kth_see(q, ge - gs);
                }
            }
            if (!c || c->s >= e) break;
            if (c->e > t) t = c->e;
            /* a component that reaches past the window is the next window's too (the
             * windows are disjoint and in order: none before it needs one again) */
            if (c->e > e) break;
            tp_union_pop(&u);
            if (t >= e) break;
        }
        if (L) L[C_IDLE] = idle;
    }
    union_done(&src);
    return 0;
}

/* Kernels of the device: counted per window (by start) into nk, with *nkd those of the
 * measured windows; with q instead, the durations (ns) of those into q. */
static void gpu_kernels(const tp_process *p, uint32_t dev, const tp_step *win, size_t nw,
                        size_t nwarm, uint64_t *nk, size_t *nkd, tp_kth *q) {
    size_t lo = 0; /* windows starting at or before the kernel: kernels are in start order */
    for (size_t i = 0; i < p->ngpu; i++) {
        const tp_gpu_op *o = &p->gpu[i];
        if (o->device != dev || o->type != TPROF_REC_GPU_KERNEL) continue;
        while (lo < nw && win[lo].start <= o->start) lo++;
        if (!lo || o->start >= win[lo - 1].end) continue;
        if (nk) nk[lo - 1]++;
        if (lo - 1 < nwarm) continue;
        if (nk) (*nkd)++;
        else tp_kth_see(q, o->end - o->start);
    }
}

/* The breakdown's figures from the windows' parts len[nw * TP_BD_NPARTS]; the medians of the
 * kernels' durations and of the gaps, us. */
static void gpu_figures(tp_breakdown_result *out, const uint64_t *len, const uint64_t *nk,
                        const uint64_t *ng, double kernel_median_us, double gap_median_us,
                        double *val, const tp_steps *st, const tp_step *win, size_t nw,
                        size_t nwarm) {
    size_t nm = nw - nwarm;
    for (int c = 0; c < C_N; c++) {
        for (size_t w = 0; w < nm; w++) val[w] = (double)len[(nwarm + w) * C_N + c] / 1e6;
        out->ms[c] = tp_stat5_of(val, nm);
    }
    uint64_t tot[C_N] = {0};
    for (size_t w = nwarm; w < nw; w++)
        for (int c = 0; c < C_N; c++) tot[c] += len[w * C_N + c];
    double T = tot[C_STEP] ? (double)tot[C_STEP] : 1;
    for (int c = C_COMPUTE; c < C_N; c++) out->share[c] = (double)tot[c] / T;
    out->busy_share = 1.0 - (double)tot[C_IDLE] / T;
    out->has_parts = 1;
    uint64_t kt = 0, gt = 0;
    for (size_t w = nwarm; w < nw; w++) {
        kt += nk[w];
        gt += ng[w];
    }
    out->kernels_per_step = nm ? (double)kt / (double)nm : 0;
    out->kernel_median_us = kernel_median_us;
    out->idle_gaps_per_step = nm ? (double)gt / (double)nm : 0;
    out->idle_gap_median_us = gap_median_us;
    /* the worst step by idle time */
    size_t worst = nwarm;
    for (size_t w = nwarm; w < nw; w++)
        if (len[w * C_N + C_IDLE] > len[worst * C_N + C_IDLE]) worst = w;
    if (nm && st->source != TP_STEPS_NONE) {
        out->has_most_idle_step = 1;
        out->most_idle_step = (double)win[worst].app_step;
    }
    out->warmup = nwarm ? tp_calloc(nwarm, sizeof *out->warmup) : NULL;
    for (size_t w = 0; w < nwarm && out->warmup; w++) {
        tp_bd_warmup *x = &out->warmup[out->nwarmup++];
        x->step = (double)win[w].app_step;
        for (int c = 0; c < C_N; c++) x->ms[c] = (double)len[w * C_N + c] / 1e6;
    }
}

/* The median (one percentile of every kernel, or gap, of the measured windows: the value a
 * sort would put there), us, selected in passes over the records rather than from a copy of
 * millions of durations; n: how many there are. -1 when out of memory. */
static double gpu_median_us(const gpu_sets *g, const tp_step *win, size_t nw, size_t nwarm,
                            size_t n, int gaps) {
    tp_kth q;
    int bad = 0;
    tp_kth_init(&q, tp_pct_index(n, 0.5));
    while (tp_kth_pass(&q)) {
        if (gaps) bad |= gpu_gaps(g, win, nw, nwarm, NULL, NULL, NULL, &q) != 0;
        else gpu_kernels(g->p, g->dev, win, nw, nwarm, NULL, NULL, &q);
    }
    return q.oom || bad ? -1 : n ? (double)q.value / 1e3 : 0;
}

/* fold: the windows are the captured spans of a run without steps, one window cut by the
 * times GPU activity was not recorded: their parts are summed into that one window, but for
 * the idle that opens it, the first span's (the gap after a pause opens no step). */
static void gpu_basis(tp_breakdown_result *out, const tp_process *p, const tp_steps *st,
                      const tp_step *win, size_t nw, size_t nwarm, const char *const *names,
                      size_t nn, int fold) {
    uint32_t dev = main_device(p, &out->ndevices);
    out->has_device = 1;
    out->device = dev;
    gpu_sets g = {0};
    size_t nkd = 0, ngaps = 0;
    int oom = gpu_sets_build(&g, p, st, dev, names, nn) != 0;
    uint64_t *len = tp_calloc(nw * C_N, sizeof *len);
    double *val = tp_malloc(nw * sizeof *val);
    /* per window: compute, compute or communication, communication covered */
    uint64_t *cov = tp_malloc(nw * 3 * sizeof *cov);
    uint64_t *nk = tp_calloc(nw, sizeof *nk), *ng = tp_calloc(nw, sizeof *ng);
    oom |= !len || !val || !cov || !nk || !ng;
    oom = oom || union_steps(&g, 1, 0, 0, win, nw, cov) || union_steps(&g, 1, 0, 1, win, nw,
          cov + nw) || union_steps(&g, 0, 0, 1, win, nw, cov + 2 * nw) ||
          gpu_gaps(&g, win, nw, nwarm, len, ng, &ngaps, NULL);
    if (!oom) {
        for (size_t w = 0; w < nw; w++) {
            uint64_t *L = len + w * C_N, k = cov[w], kc = cov[nw + w], c = cov[2 * nw + w];
            uint64_t step = win[w].end - win[w].start, busy = step - L[C_IDLE];
            L[C_STEP] = step;
            L[C_COMPUTE] = k;
            L[C_EXPOSED] = kc - k;
            L[C_OVERLAP] = c - (kc - k);
            L[C_COPY] = busy - kc;
        }
        gpu_kernels(p, dev, win, nw, nwarm, nk, &nkd, NULL);
        double km = gpu_median_us(&g, win, nw, nwarm, nkd, 0);
        double gm = gpu_median_us(&g, win, nw, nwarm, ngaps, 1);
        for (size_t w = 1; fold && w < nw; w++) {
            for (int c = 0; c < C_N; c++)
                if (c != C_START && c != C_START_DATA) len[c] += len[w * C_N + c];
            nk[0] += nk[w];
            ng[0] += ng[w];
        }
        if (km >= 0 && gm >= 0)
            gpu_figures(out, len, nk, ng, km, gm, val, st, win, fold ? 1 : nw, nwarm);
    }
    gpu_sets_free(&g);
    free(len);
    free(val);
    free(cov);
    free(nk);
    free(ng);
}

void tp_breakdown_compute(tp_breakdown_result *out, const tp_process *p, const tp_steps *s,
                          const tp_steps *cap, const char *not_captured,
                          const char *captured_words, const char *const *names, size_t nn,
                          tp_cpu_stream *cpu) {
    memset(out, 0, sizeof *out);
    tp_step whole = {p->first_ts, p->end_mono, 0, 0};
    const tp_step *win = s->nsteps ? s->steps : &whole;
    size_t nw = s->nsteps ? s->nsteps : (p->end_mono > p->first_ts ? 1 : 0);
    size_t nwarm = s->nsteps ? s->nwarmup : 0;
    if (!nw || nw == nwarm) return; /* nothing measured */
    int kernels = 0;
    for (size_t i = 0; i < p->ngpu && !kernels; i++) kernels = p->gpu[i].type == TPROF_REC_GPU_KERNEL;
    out->present = 1;
    out->gpu_basis = kernels;
    out->per_step = s->nsteps > 0;
    out->windows = nw - nwarm;
    if (!kernels) {
        tp_cpu_basis(out, p, s, win, nw, nwarm, 0, cpu);
        return;
    }
    /* the GPU basis is over the steps in which GPU activity was recorded: a step without
     * records is not an idle GPU */
    if (s->nsteps && cap) {
        out->windows = cap->nsteps - cap->nwarmup;
        if (out->windows < nw - nwarm) {
            out->measured_all = nw - nwarm;
            out->captured_steps = captured_words;
        }
        if (!out->windows) {
            out->not_captured = not_captured ? not_captured : "";
            return;
        }
        gpu_basis(out, p, cap, cap->steps, cap->nsteps, cap->nwarmup, names, nn, 0);
        return;
    }
    if (!s->nsteps) {
        /* no steps: the window is the run, less the times GPU activity was not recorded (a
         * pause for another CUPTI client is no idle GPU either) */
        tp_step *sp;
        size_t ns;
        if (tp_capture_spans(p, whole.start, whole.end, &sp, &ns) != 0) return;
        uint64_t in = 0;
        for (size_t i = 0; i < ns; i++) in += sp[i].end - sp[i].start;
        if (in < whole.end - whole.start) {
            out->has_uncaptured = 1;
            out->captured_s = (double)in / 1e9;
            out->run_s = (double)(whole.end - whole.start) / 1e9;
            out->bounded = p->gpu_window_to != 0;
        }
        if (!ns) out->not_captured = "GPU activity was recorded at no time of the run";
        else gpu_basis(out, p, s, sp, ns, 0, names, nn, 1);
        free(sp);
        return;
    }
    gpu_basis(out, p, s, win, nw, nwarm, names, nn, 0);
}

void tp_phases_compute(tp_breakdown_result *out, const tp_process *p, const tp_steps *s,
                       tp_cpu_stream *cpu) {
    memset(out, 0, sizeof *out);
    if (s->nsteps <= s->nwarmup) return;
    int kernels = 0;
    for (size_t i = 0; i < p->ngpu && !kernels; i++) kernels = p->gpu[i].type == TPROF_REC_GPU_KERNEL;
    if (!kernels) return;
    out->present = 1;
    out->per_step = 1;
    out->windows = s->nsteps - s->nwarmup;
    tp_cpu_basis(out, p, s, s->steps, s->nsteps, s->nwarmup, 1, cpu);
    /* rows with time only in warm-up steps (a CUDA graph's capture) are no phase of the
     * measured steps */
    size_t k = 0;
    for (size_t i = 0; i < out->nranges; i++)
        if (out->ranges[i].ms.max > 0) out->ranges[k++] = out->ranges[i];
    out->nranges = k;
    if (!out->nranges) { /* no range on the step thread: no phases to show */
        free(out->ranges);
        free(out->warmup);
        memset(out, 0, sizeof *out);
    }
}

/* ------------------------------------------------------------------ the document */

static void gpu_json(cJSON *b, const tp_breakdown_result *r) {
    if (r->has_uncaptured) {
        cJSON_AddNumberToObject(b, "captured_s", r->captured_s);
        cJSON_AddNumberToObject(b, "run_s", r->run_s);
    }
    if (r->not_captured) { /* no step was captured: no part is known */
        cJSON_AddStringToObject(b, "not_captured", r->not_captured);
        cJSON_AddNullToObject(b, "ms");
        cJSON_AddNullToObject(b, "share");
        return;
    }
    cJSON_AddNumberToObject(b, "device", r->device);
    if (r->ndevices > 1) cJSON_AddNumberToObject(b, "devices", (double)r->ndevices);
    if (!r->has_parts) return;
    cJSON *jm = cJSON_AddObjectToObject(b, "ms");
    for (int c = 0; c < C_N; c++) tp_json_item_to_object(jm, cname[c], tp_stat5_json(&r->ms[c]));
    cJSON *js = cJSON_AddObjectToObject(b, "share");
    for (int c = C_COMPUTE; c <= C_OTHER; c++) cJSON_AddNumberToObject(js, cname[c], r->share[c]);
    cJSON_AddNumberToObject(js, "start_idle_data", r->share[C_START_DATA]);
    cJSON_AddNumberToObject(js, "idle_other_short_gaps", r->share[C_SHORT]);
    cJSON_AddNumberToObject(js, "busy", r->busy_share);
    cJSON_AddNumberToObject(b, "kernels_per_step", r->kernels_per_step);
    cJSON_AddNumberToObject(b, "kernel_median_us", r->kernel_median_us);
    cJSON_AddNumberToObject(b, "idle_gaps_per_step", r->idle_gaps_per_step);
    cJSON_AddNumberToObject(b, "idle_gap_median_us", r->idle_gap_median_us);
    if (r->has_most_idle_step) cJSON_AddNumberToObject(b, "most_idle_step", r->most_idle_step);
    cJSON *wu = cJSON_AddArrayToObject(b, "warmup");
    for (size_t w = 0; w < r->nwarmup; w++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "step", r->warmup[w].step);
        for (int c = 0; c < C_N; c++) {
            char key[40];
            snprintf(key, sizeof key, "%s_ms", cname[c]);
            cJSON_AddNumberToObject(o, key, r->warmup[w].ms[c]);
        }
        tp_json_item_to_array(wu, o);
    }
}

static void cpu_json(cJSON *b, const tp_breakdown_result *r) {
    if (!r->has_cpu) return;
    cJSON *jr = cJSON_AddArrayToObject(b, "ranges");
    for (size_t i = 0; i < r->nranges; i++) {
        const tp_bd_range *x = &r->ranges[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", x->name);
        if (x->domain) cJSON_AddStringToObject(o, "domain", x->domain);
        tp_json_item_to_object(o, "ms", tp_stat5_json(&x->ms));
        cJSON_AddNumberToObject(o, "share", x->share);
        tp_json_item_to_array(jr, o);
    }
    cJSON *jm = cJSON_AddObjectToObject(b, "ms");
    tp_json_item_to_object(jm, "step", tp_stat5_json(&r->step_ms));
    tp_json_item_to_object(jm, "untracked", tp_stat5_json(&r->untracked_ms));
    cJSON *js = cJSON_AddObjectToObject(b, "share");
    cJSON_AddNumberToObject(js, "untracked", r->untracked_share);
    cJSON *wu = cJSON_AddArrayToObject(b, "warmup");
    for (size_t w = 0; w < r->nwarmup; w++) {
        const tp_bd_warmup *x = &r->warmup[w];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "step", x->step);
        cJSON_AddNumberToObject(o, "step_ms", x->step_ms);
        cJSON *rr = cJSON_AddArrayToObject(o, "ranges");
        for (size_t i = 0; i < x->nranges; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "name", x->ranges[i].name);
            cJSON_AddNumberToObject(e, "ms", x->ranges[i].ms);
            tp_json_item_to_array(rr, e);
        }
        cJSON_AddNumberToObject(o, "untracked_ms", x->untracked_ms);
        tp_json_item_to_array(wu, o);
    }
}

void tp_breakdown_json(cJSON *rank, const tp_breakdown_result *r) {
    if (!r->present) return;
    cJSON *b = cJSON_AddObjectToObject(rank, "breakdown");
    cJSON_AddStringToObject(b, "basis", r->gpu_basis ? "gpu" : "cpu");
    cJSON_AddStringToObject(b, "per", r->per_step ? "step" : "run");
    cJSON_AddNumberToObject(b, "windows", (double)r->windows);
    if (r->gpu_basis) gpu_json(b, r);
    else cpu_json(b, r);
}

void tp_phases_json(cJSON *rank, const tp_breakdown_result *r) {
    if (!r->present || !r->has_cpu) return;
    cJSON *b = cJSON_AddObjectToObject(rank, "phases");
    cJSON_AddStringToObject(b, "per", "step");
    cJSON_AddNumberToObject(b, "windows", (double)r->windows);
    cpu_json(b, r);
}
