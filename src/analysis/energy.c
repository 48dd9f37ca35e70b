/*
 * energy.c — the rank's NVML section: energy over the measured steps, power, clocks,
 * temperature, memory and clock-event reasons of the rank's GPUs (energy.h), and the GPU
 * devices' capacity from CUPTI's device record or NVML.
 */
#define _GNU_SOURCE
#include "analysis/energy.h"
#include "analysis/alloc.h"
#include "analysis/figures.h"
#include "analysis/stats.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/gpu.h"
#include "analysis/counter_pack.h"
#include "analysis/model.h"
#include "analysis/spans.h"
#include "common/nvml_abi.h"
#include "common/varint.h"
/* ------------------------------------------------------------------ NVML (energy) */

/* The GPU sampler's counters (capture/nvml.c), "gpu<i>.<metric>" with i the NVML index, one
 * series per GPU and metric. */
enum { NV_ENERGY, NV_POWER, NV_POWER_LIMIT, NV_SM, NV_TEMP, NV_MEM, NV_UTIL, NV_EVENTS,
       NV_POWER_INSTANT, NV_N };
static const char *const nv_suffix[NV_N] = {"energy_j",     "power_w", "power_limit_w",
                                            "sm_clock_mhz", "temp_c",  "mem_used_bytes",
                                            "util_percent", "clock_event_reasons",
                                            "power_instant_w"};

/* The NVML energy counter's update period on recent GPUs, and so the resolution of an
 * energy figure over a short span: PETSc's PetscLogGpuEnergyMeter documents energy readings
 * "updated every 20-100ms" on newer GPUs; Zeus (ml-energy, release v0.6.1) found the counter's
 * update period longer than short measurement windows (which then read 0 J); Yang et al.,
 * "Part-time Power Measurements: nvidia-smi's Lack of Attention" (arXiv:2312.02741, 2023)
 * find A100 and H100 power refreshed every 100 ms from a 25 ms window. The upper bound is
 * taken: a step shorter than this is covered by at most one or two counter updates. */
#define NV_COUNTER_PERIOD_MS 100.0

typedef struct nv_series {
    uint64_t *ts;
    double *v;
    size_t n, cap;
} nv_series;

/* The samples of a series around a time t: the last at or before it (lo) and the one after
 * that (hi), as the series is read in time order. */
typedef struct nv_around {
    int has_lo, has_hi;
    uint64_t lo_t, hi_t;
    double lo_v, hi_v;
} nv_around;

/* What the energy figures read of a series (the energy counter, the power readings), taken
 * as its samples come in time order instead of from a copy of it (16 bytes a sample of every
 * GPU in view, a day of an 8-GPU node at 10 Hz 330 MB a section): its count and ends, the
 * samples around the window's ends, the trapezoid integral over the window,
 * and the gaps between samples as varints (common/varint.h, about 4 bytes a sample) for their
 * median, selected in passes over them (tp_kth). Zeroed before the first sample. */
typedef struct nv_acc {
    size_t n;
    uint64_t first, last;
    double v_first, v_last; /* the last sample at `first`; the last sample */
    nv_around at[2];        /* around w0 and w1 */
    double integral;        /* J over [w0, w1] of a series of watts, while covered */
    uint8_t *gaps;          /* n - 1 varints, unless no_gaps or gaps_over */
    size_t ngap_bytes, cap_gaps;
    int no_gaps;            /* its median interval is not wanted: no gaps kept */
    int gaps_over;          /* more gaps than nv_gaps_keep: none kept, its median selected
                             * from them read again (nv_reread_intervals) */
} nv_acc;

/* The most gaps a series keeps for its median interval (about 4 bytes each: 4 MB a series,
 * which a GPU sampled at 10 Hz passes after 29 hours); past it the median is selected in
 * passes over the samples read again. A variable for the tests (tp_nvml_set_gaps_keep). */
static _Atomic size_t nv_gaps_keep = 1u << 20;

size_t tp_nvml_set_gaps_keep(size_t n) { return atomic_exchange(&nv_gaps_keep, n ? n : 1); }

/* The series taken into nv_acc, by index: the energy counter, power, instantaneous power. */
enum { NA_ENERGY, NA_POWER, NA_INSTANT, NA_N };

/* A GPU's samples. The energy counter and the power readings are taken into nv_acc as they
 * are read, and the other metrics' gauges inside the window likewise (nv_take). A metric
 * whose samples are read out of time order (never from one sampler thread) makes the
 * collection start again keeping every series whole (s[], nv_collect's keep_all), sorted
 * before the gauges and the nv_acc are taken from them, so that both are taken in time order
 * either way. */
typedef struct nv_dev {
    unsigned idx;
    nv_series s[NV_N];  /* every series whole, with keep_all only */
    nv_acc acc[NA_N];
    size_t n[NV_N];     /* samples of each metric */
    uint64_t last[NV_N];
    int unordered;      /* a metric's sample earlier than the one read before it */
    int has_interval;   /* the median interval selected again (nv_reread_intervals) */
    double interval_ms;
    /* the gauges inside the window: min, max, sum and count of each metric; of the clock
     * events, the reasons seen and the samples throttled */
    double mn[NV_N], mx[NV_N], sm[NV_N];
    size_t cnt[NV_N];
    unsigned long long mask;
    size_t throttled;
} nv_dev;

/* Clock-event bits (nvml_abi.h) that mean the clocks are held down; GPU idle, application
 * clock settings, sync boost and display clocks are reported but are not throttling. */
#define NV_THROTTLE_MASK                                                                       \
    (NVML_CLOCKS_EVENT_SW_POWER_CAP | NVML_CLOCKS_EVENT_HW_SLOWDOWN |                          \
     NVML_CLOCKS_EVENT_SW_THERMAL_SLOWDOWN | NVML_CLOCKS_EVENT_HW_THERMAL_SLOWDOWN |           \
     NVML_CLOCKS_EVENT_HW_POWER_BRAKE_SLOWDOWN)

static const struct { unsigned long long bit; const char *name; } nv_reasons[] = {
    {NVML_CLOCKS_EVENT_GPU_IDLE, "GPU idle"},
    {NVML_CLOCKS_EVENT_APPLICATIONS_CLOCKS_SETTING, "applications clocks setting"},
    {NVML_CLOCKS_EVENT_SW_POWER_CAP, "SW power cap"},
    {NVML_CLOCKS_EVENT_HW_SLOWDOWN, "HW slowdown"},
    {NVML_CLOCKS_EVENT_SYNC_BOOST, "sync boost"},
    {NVML_CLOCKS_EVENT_SW_THERMAL_SLOWDOWN, "SW thermal slowdown"},
    {NVML_CLOCKS_EVENT_HW_THERMAL_SLOWDOWN, "HW thermal slowdown"},
    {NVML_CLOCKS_EVENT_HW_POWER_BRAKE_SLOWDOWN, "HW power brake slowdown"},
    {NVML_CLOCKS_EVENT_DISPLAY_CLOCK_SETTING, "display clock setting"},
};

_Static_assert(sizeof nv_reasons / sizeof *nv_reasons == TP_NVML_NREASONS,
               "TP_NVML_NREASONS is the size of the reason table");

size_t tp_nvml_reasons(unsigned long long mask, const char **names, size_t max) {
    size_t n = 0;
    for (size_t r = 0; r < TP_NVML_NREASONS && n < max; r++)
        if (mask & nv_reasons[r].bit) names[n++] = nv_reasons[r].name;
    return n;
}

static int nv_push(nv_series *s, uint64_t ts, double v) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        uint64_t *nt = tp_realloc(s->ts, cap * sizeof *nt);
        if (!nt) return -1;
        s->ts = nt;
        double *nv = tp_realloc(s->v, cap * sizeof *nv);
        if (!nv) return -1;
        s->v = nv;
        s->cap = cap;
    }
    s->ts[s->n] = ts;
    s->v[s->n++] = v;
    return 0;
}

/* The gaps a holds freed (no_gaps and gaps_over say why none are kept after). */
static void nv_acc_drop_gaps(nv_acc *a) {
    free(a->gaps);
    a->gaps = NULL;
    a->ngap_bytes = a->cap_gaps = 0;
}

/* Sample (ts, v) of series a, read in time order, against the window [w0, w1]. The integral
 * is summed in the order and with the operations of trapezoids walked from w0 to w1: between
 * each two consecutive samples of different times, over their span's part inside the window,
 * the power interpolated linearly at that part's ends. 0, or -1 without memory (a holds the
 * sample all the same, without its gap). */
static int nv_acc_add(nv_acc *a, uint64_t ts, double v, uint64_t w0, uint64_t w1) {
    int rc = 0;
    if (a->n > atomic_load_explicit(&nv_gaps_keep, memory_order_relaxed) && !a->gaps_over) {
        nv_acc_drop_gaps(a);
        a->gaps_over = 1;
    }
    if (a->n && !a->gaps_over) {
        if (!a->no_gaps && a->cap_gaps - a->ngap_bytes < 10) {
            size_t cap = a->cap_gaps ? a->cap_gaps * 2 : 256;
            uint8_t *g = tp_realloc(a->gaps, cap);
            if (g) a->gaps = g, a->cap_gaps = cap;
            else rc = -1;
        }
        if (!rc && !a->no_gaps)
            a->ngap_bytes += tp_varint_put(a->gaps + a->ngap_bytes, ts - a->last);
    }
    if (a->n) {
        if (ts > a->last) {
            uint64_t t = a->last > w0 ? a->last : w0, e = ts < w1 ? ts : w1;
            if (t < e) {
                double w = (double)(ts - a->last);
                double p0 = a->v_last + (v - a->v_last) * ((double)(t - a->last) / w);
                double p1 = a->v_last + (v - a->v_last) * ((double)(e - a->last) / w);
                a->integral += 0.5 * (p0 + p1) * (double)(e - t) / 1e9;
            }
        }
    } else {
        a->first = ts;
    }
    if (ts == a->first) a->v_first = v;
    for (int j = 0; j < 2; j++) {
        nv_around *r = &a->at[j];
        if (ts <= (j ? w1 : w0)) {
            r->has_lo = 1, r->has_hi = 0;
            r->lo_t = ts, r->lo_v = v;
        } else if (r->has_lo && !r->has_hi) {
            r->has_hi = 1;
            r->hi_t = ts, r->hi_v = v;
        }
    }
    a->last = ts;
    a->v_last = v;
    a->n++;
    return rc;
}

/* Its median interval is not wanted: the gaps are dropped and no more are kept. */
static void nv_acc_no_gaps(nv_acc *a) {
    nv_acc_drop_gaps(a);
    a->no_gaps = 1;
}

/* Sample (ts, v) of GPU g's metric m, in time order, into its nv_acc when it has one. The
 * energy figures read the energy counter when it has two samples, else the instantaneous
 * power, else the power (nv_energy_of), and the median interval of that series only: a
 * series that can no longer be it keeps no gaps. */
static int nv_acc_feed(nv_dev *g, int m, uint64_t ts, double v, uint64_t w0, uint64_t w1) {
    int k = m == NV_ENERGY ? NA_ENERGY : m == NV_POWER ? NA_POWER
            : m == NV_POWER_INSTANT ? NA_INSTANT : -1;
    if (k < 0) return 0;
    int rc = nv_acc_add(&g->acc[k], ts, v, w0, w1);
    if (g->acc[k].n == 2 && k != NA_POWER) {
        nv_acc_no_gaps(&g->acc[NA_POWER]);
        if (k == NA_ENERGY) nv_acc_no_gaps(&g->acc[NA_INSTANT]);
    }
    return rc;
}

/* The series at window end j (0: w0, 1: w1), time t: linear between the samples around it;
 * 0 outside them (the counter is not extrapolated: a step not bracketed by samples gets no
 * energy). */
static int nv_acc_at(const nv_acc *a, int j, uint64_t t, double *out) {
    const nv_around *r = &a->at[j];
    if (!a->n || t < a->first || t > a->last || !r->has_lo) return 0;
    if (!r->has_hi || r->lo_t == t) {
        *out = r->lo_v;
    } else {
        double f = (double)(t - r->lo_t) / (double)(r->hi_t - r->lo_t);
        *out = r->lo_v + f * (r->hi_v - r->lo_v);
    }
    return 1;
}

/* The integral of a series of watts over the window [a, b] it was taken against, in J; 0
 * when the samples do not cover the window (nothing is extrapolated). */
static int nv_acc_integral(const nv_acc *s, uint64_t a, uint64_t b, double *out) {
    if (s->n < 2 || b <= a || a < s->first || b > s->last) return 0;
    *out = s->integral;
    return 1;
}

/* A series this short has its gaps sorted for their median; a longer one has it selected in
 * passes (tp_kth: 512 kB of counts a pass, whatever the count). */
#define NV_SORT_GAPS 65536

/* The median time between consecutive samples, in ms (0 with fewer than two, without its
 * gaps or memory): the ((n - 1) / 2)-th smallest of the n - 1 gaps. */
static double nv_acc_interval_ms(const nv_acc *a) {
    if (a->n < 2 || a->no_gaps || a->gaps_over) return 0;
    if (a->n - 1 <= NV_SORT_GAPS) {
        uint64_t *d = tp_malloc((a->n - 1) * sizeof *d);
        if (!d) return 0;
        const uint8_t *p = a->gaps, *end = p + a->ngap_bytes;
        size_t k = 0;
        while (k < a->n - 1 && p < end && !tp_varint_get(&p, end, &d[k])) k++;
        qsort(d, k, sizeof *d, tp_cmp_u64);
        double ms = k == a->n - 1 ? (double)d[(a->n - 1) / 2] / 1e6 : 0;
        free(d);
        return ms;
    }
    tp_kth q;
    tp_kth_init(&q, (a->n - 1) / 2);
    while (tp_kth_pass(&q)) {
        const uint8_t *p = a->gaps, *end = p + a->ngap_bytes;
        uint64_t d;
        while (p < end && !tp_varint_get(&p, end, &d)) tp_kth_see(&q, d);
    }
    return q.oom ? 0 : (double)q.value / 1e6;
}

/* The series GPU g's energy figures read (nv_energy_of), its metric into *m: the energy
 * counter with two samples (nv_used), else its power series (nv_power): the instantaneous
 * power field where the GPU gives it (nvmlDeviceGetPowerUsage is a 1 s average on Ampere,
 * except GA100, and newer: NVML API reference; it smears short spans), else the power. */
static const nv_acc *nv_power(const nv_dev *g, int *m) {
    if (g->acc[NA_INSTANT].n >= 2) return *m = NV_POWER_INSTANT, &g->acc[NA_INSTANT];
    return *m = NV_POWER, &g->acc[NA_POWER];
}

static const nv_acc *nv_used(const nv_dev *g, int *m) {
    if (g->acc[NA_ENERGY].n >= 2) return *m = NV_ENERGY, &g->acc[NA_ENERGY];
    return nv_power(g, m);
}

/* A GPU's energy over a window: from the energy counter, else from the power samples. */
typedef struct nv_energy {
    int ok;
    double joules;
    uint64_t a, b;         /* the window it covers */
    const char *method;    /* "counter" | "integrated_power" */
    const char *series;    /* the counter series read, or the power series integrated */
    double interval_ms;    /* median sample interval of that series */
    char why[400];         /* !ok: why there is none */
} nv_energy;

/* Energy of GPU g (NVML index idx, samples of process p) over [w0, w1] (per_step), or over
 * all its samples (!per_step; g's nv_acc were then taken against [0, UINT64_MAX]). t0: the
 * rank's start, for the times a reason gives. */
static void nv_energy_of(const tp_process *p, const nv_dev *g, int per_step, uint64_t w0,
                         uint64_t w1, uint64_t t0, nv_energy *E) {
    memset(E, 0, sizeof *E);
    const nv_acc *es = &g->acc[NA_ENERGY];
    int pm;
    const nv_acc *ps = nv_power(g, &pm);
    char k[64];
    snprintf(k, sizeof k, "gpu.%u.energy_counter", g->idx);
    const char *missing = tp_meta(p, k); /* the sampler's reason, when it has one */
    int m;
    const nv_acc *used = nv_used(g, &m);
    E->method = m == NV_ENERGY ? "counter" : "integrated_power";
    E->series = nv_suffix[m];
    E->interval_ms = g->has_interval ? g->interval_ms : nv_acc_interval_ms(used);
    if (used->n < 2) {
        if (missing)
            snprintf(E->why, sizeof E->why,
                     "no energy counter (%s) and fewer than two power samples",
                     missing);
        else if (es->n + ps->n == 0)
            snprintf(E->why, sizeof E->why, "no energy or power sample");
        else if (!es->n)
            snprintf(E->why, sizeof E->why,
                     "no energy counter sampled and fewer than two power samples");
        else
            snprintf(E->why, sizeof E->why,
                     "a single sample: the sampling ended after its first pass");
        return;
    }
    uint64_t a = per_step ? w0 : used->first, b = per_step ? w1 : used->last;
    double ea, eb;
    /* over all the samples: the counter's first and last values (of the last sample at the
     * first time), the power's integral over all (taken against [0, UINT64_MAX]) */
    if (!per_step) ea = es->v_first, eb = es->v_last;
    int at_ends = !per_step || (nv_acc_at(es, 0, a, &ea) && nv_acc_at(es, 1, b, &eb));
    if (b > a && used == es && at_ends) {
        E->joules = eb - ea;
        E->ok = 1;
    } else if (b > a && used == ps && nv_acc_integral(ps, a, b, &ea)) {
        E->joules = ea;
        E->ok = 1;
    } else if (b <= a) {
        snprintf(E->why, sizeof E->why, "the samples span no time");
    } else {
        snprintf(E->why, sizeof E->why, "the %s samples (%.3f s to %.3f s after the rank started) "
                                        "do not cover the measured steps (%.3f s to %.3f s)",
                 used == es ? "energy counter's" : "power",
                 ((double)used->first - (double)t0) / 1e9,
                 ((double)used->last - (double)t0) / 1e9, ((double)a - (double)t0) / 1e9,
                 ((double)b - (double)t0) / 1e9);
    }
    /* a NaN or infinite sample (never NVML's: a damaged or hand-made file) makes no figure */
    if (E->ok && !isfinite(E->joules)) {
        E->ok = 0;
        snprintf(E->why, sizeof E->why, "the %s samples over the span hold a value that is not "
                                        "a finite number",
                 used == es ? "energy counter's" : "power");
    }
    E->a = a;
    E->b = b;
}

static double nv_meta_num(const tp_process *p, unsigned idx, const char *key, int *found) {
    char k[64];
    snprintf(k, sizeof k, "gpu.%u.%s", idx, key);
    const char *v = tp_meta(p, k);
    *found = v != NULL;
    return v ? atof(v) : 0;
}



void tp_memory_capacity(tp_gpu_result *gpu, const tp_nvml_result *nvml, const tp_process *p) {
    for (size_t i = 0; i < gpu->ndevices; i++) {
        tp_gpu_device_result *dev = &gpu->devices[i];
        char k[48];
        unsigned ord = dev->device;
        snprintf(k, sizeof k, "cuda.%u.name", ord);
        dev->name = tp_meta(p, k);
        snprintf(k, sizeof k, "cuda.%u.uuid", ord);
        dev->uuid = tp_meta(p, k);
        snprintf(k, sizeof k, "cuda.%u.sm_count", ord);
        if (tp_meta(p, k)) {
            dev->has_sm_count = 1;
            dev->sm_count = atof(tp_meta(p, k));
        }
        snprintf(k, sizeof k, "cuda.%u.memory_total_bytes", ord);
        double cap = tp_meta(p, k) ? atof(tp_meta(p, k)) : 0;
        for (size_t j = 0; j < nvml->ngpus && !(cap > 0); j++) {
            const tp_nvml_gpu_result *g = &nvml->gpus[j];
            if (g->has_cuda_device && g->cuda_device == (int)ord && g->has_mem_total &&
                g->mem_total_bytes > 0 && !g->shared_by_mig)
                cap = g->mem_total_bytes;
        }
        if (cap > 0) {
            dev->has_capacity = 1;
            dev->memory_capacity_bytes = cap;
            dev->memory_peak_share = dev->memory_peak_bytes / cap;
        }
    }
}

static void nv_free(nv_dev *dv, size_t nd) {
    for (size_t d = 0; d < nd; d++)
        for (int m = 0; m < NV_N; m++) {
            free(dv[d].s[m].ts);
            free(dv[d].s[m].v);
            if (m < NA_N) free(dv[d].acc[m].gaps);
        }
    free(dv);
}

/* Sample (ts, v) of metric m into g's gauges when it lies in [w0, w1]: a gauge's mean and
 * peak are of its finite samples (a NaN or an infinity is a damaged file's, never NVML's). */
static void nv_take(nv_dev *g, int m, uint64_t ts, double v, uint64_t w0, uint64_t w1) {
    if (ts < w0 || ts > w1 || (m != NV_EVENTS && !isfinite(v))) return;
    if (!g->cnt[m]++ || v < g->mn[m]) g->mn[m] = v;
    if (g->cnt[m] == 1 || v > g->mx[m]) g->mx[m] = v;
    g->sm[m] += v;
    if (m == NV_EVENTS) {
        /* a bit mask (nvml_abi.h); a value no mask can be (negative, NaN, 2^64 or more: a
         * damaged file) holds no reason, where converting it was undefined */
        unsigned long long b = v >= 0 && v < 18446744073709551616.0 ? (unsigned long long)v : 0;
        g->mask |= b;
        g->throttled += (b & NV_THROTTLE_MASK) != 0;
    }
}

/* Where the samples of counter `name` go: device d's metric m of *dv (a device added when new)
 * as d * NV_N + m; -1 for a counter not read (another metric, a GPU not in view); -2 without
 * memory. */
static long nv_slot(const char *name, const tp_gpu_link *links, size_t nlinks, int none_sampled,
                    nv_dev **dv, size_t *nd) {
    unsigned long idx;
    const char *metric = tp_gpu_counter(name, &idx);
    if (!metric || idx > 1u << 16) return -1;
    int m = -1;
    for (int j = 0; j < NV_N && m < 0; j++)
        if (!strcmp(metric, nv_suffix[j])) m = j;
    if (m < 0) return -1;
    int ok = !nlinks && !none_sampled;
    for (size_t a = 0; a < nlinks; a++) ok |= links[a].index == idx;
    if (!ok) return -1;
    size_t d = 0;
    while (d < *nd && (*dv)[d].idx != idx) d++;
    if (d == *nd) {
        nv_dev *n2 = tp_realloc(*dv, (*nd + 1) * sizeof *n2);
        if (!n2) return -2;
        *dv = n2;
        memset(&n2[d], 0, sizeof n2[d]);
        n2[d].idx = (unsigned)idx;
        ++*nd;
    }
    return (long)d * NV_N + m;
}

/* The sampler's samples of the GPUs in view into *dv (NVML index order), their gauges over
 * [w0, w1] taken as read: the linked GPUs, or every GPU sampled when the rank's are not known
 * (none when they are known and none was sampled). The energy counter's and the power's
 * samples are taken into the GPU's nv_acc, or with keep_all every series is kept whole (for
 * nv_replay). Returns -1 when out of memory. */
static int nv_collect(const tp_process *p, const tp_gpu_link *links, size_t nlinks,
                      int none_sampled, uint64_t w0, uint64_t w1, int keep_all, nv_dev **dvp,
                      size_t *ndp) {
    nv_dev *dv = NULL;
    size_t nd = 0;
    int oom = 0;
    tp_name_cache cache;
    memset(&cache, 0, sizeof cache);
    for (size_t ti = 0; ti < p->nthreads && !oom; ti++) {
        tp_counter_it it;
        tp_counter c;
        oom = tp_counter_it_init(&it, &p->threads[ti]) != 0;
        while (!oom && tp_counter_next(&it, &c)) {
            long slot;
            if (!tp_name_cache_get(&cache, c.name, &slot)) {
                slot = nv_slot(c.name, links, nlinks, none_sampled, &dv, &nd);
                if (slot == -2) { oom = 1; break; }
                tp_name_cache_put(&cache, c.name, slot);
            }
            if (slot < 0) continue;
            int m = (int)(slot % NV_N);
            nv_dev *g = &dv[slot / NV_N];
            g->unordered |= g->n[m] && c.ts < g->last[m];
            g->n[m]++;
            g->last[m] = c.ts;
            nv_take(g, m, c.ts, c.value, w0, w1);
            if (keep_all ? nv_push(&g->s[m], c.ts, c.value)
                         : nv_acc_feed(g, m, c.ts, c.value, w0, w1))
                oom = 1;
        }
        tp_counter_it_done(&it); /* damage (never in what the load packed) ends the series */
    }
    /* NVML indices in order */
    for (size_t i = 1; i < nd; i++)
        for (size_t j = i; j > 0 && dv[j - 1].idx > dv[j].idx; j--) {
            nv_dev tmp = dv[j];
            dv[j] = dv[j - 1];
            dv[j - 1] = tmp;
        }
    *dvp = dv;
    *ndp = nd;
    return oom ? -1 : 0;
}

/* The gauges of GPU g inside [w0, w1]: power, limit, SM clock, temperature, memory,
 * utilisation and the clock-event reasons. */
static void nv_gauges(tp_nvml_gpu_result *R, const nv_dev *g, const tp_process *p) {
    const double *mn = g->mn, *mx = g->mx, *sm = g->sm;
    const size_t *cnt = g->cnt;
    unsigned long long mask = g->mask;
    size_t throttled = g->throttled;
    if (cnt[NV_POWER]) {
        R->has_power = 1;
        R->power_mean_w = sm[NV_POWER] / (double)cnt[NV_POWER];
        R->power_max_w = mx[NV_POWER];
    }
    int found;
    double lim = nv_meta_num(p, g->idx, "power_limit_w", &found);
    if (cnt[NV_POWER_LIMIT]) lim = mx[NV_POWER_LIMIT], found = 1;
    if (found) {
        R->has_power_limit = 1;
        R->power_limit_w = lim;
    }
    if (cnt[NV_SM]) {
        R->has_sm_clock = 1;
        R->sm_clock_mhz_min = mn[NV_SM];
        R->sm_clock_mhz_mean = sm[NV_SM] / (double)cnt[NV_SM];
        R->sm_clock_mhz_max = mx[NV_SM];
    }
    if (cnt[NV_TEMP]) {
        R->has_temp = 1;
        R->temp_c_max = mx[NV_TEMP];
    }
    double total = nv_meta_num(p, g->idx, "memory_total_bytes", &found);
    if (cnt[NV_MEM]) {
        R->has_mem_used = 1;
        R->mem_used_peak_bytes = mx[NV_MEM];
        if (found && total > 0) {
            R->has_mem_used_share = 1;
            R->mem_used_peak_share = mx[NV_MEM] / total;
        }
    }
    if (found) {
        R->has_mem_total = 1;
        R->mem_total_bytes = total;
    }
    if (cnt[NV_UTIL]) {
        R->has_util = 1;
        R->util_percent_mean = sm[NV_UTIL] / (double)cnt[NV_UTIL];
    }
    if (cnt[NV_EVENTS]) {
        R->has_clock_events = 1;
        R->clock_event_mask = mask;
        R->throttled = throttled > 0;
        R->throttled_share = (double)throttled / (double)cnt[NV_EVENTS];
    }
}

/* The window the figures cover: the measured steps' span, or the whole run. */
typedef struct nv_window {
    int per_step;
    uint64_t w0, w1;
    size_t nm;
    double mean_step_ms;
} nv_window;

/* A sample and its place in the series, for a stable sort. */
typedef struct nv_sample {
    uint64_t ts;
    double v;
    size_t i;
} nv_sample;

static int nv_sample_cmp(const void *a, const void *b) {
    const nv_sample *x = a, *y = b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* Series s sorted by time, samples of one time in the order read: 0, or -1 without memory. */
static int nv_sort(nv_series *s) {
    nv_sample *a = tp_malloc((s->n ? s->n : 1) * sizeof *a);
    if (!a) return -1;
    for (size_t i = 0; i < s->n; i++) a[i] = (nv_sample){s->ts[i], s->v[i], i};
    qsort(a, s->n, sizeof *a, nv_sample_cmp);
    for (size_t i = 0; i < s->n; i++) s->ts[i] = a[i].ts, s->v[i] = a[i].v;
    free(a);
    return 0;
}

/* After a collection that kept every series whole (keep_all): each GPU's series sorted by
 * time where they were read out of order (counters of one thread arrive in time order; a
 * damaged or hand-made file may not), the gauges taken again in time order, and the energy
 * counter's and the power's nv_acc taken from them. -1 without memory. */
static int nv_replay(nv_dev *dv, size_t nd, uint64_t w0, uint64_t w1) {
    for (size_t d = 0; d < nd; d++) {
        nv_dev *g = &dv[d];
        for (int m = 0; m < NV_N; m++) {
            nv_series *s = &g->s[m];
            if (g->unordered) {
                if (nv_sort(s)) return -1;
                g->mn[m] = g->mx[m] = g->sm[m] = 0;
                g->cnt[m] = 0;
                if (m == NV_EVENTS) g->mask = 0, g->throttled = 0;
                for (size_t i = 0; i < s->n; i++) nv_take(g, m, s->ts[i], s->v[i], w0, w1);
            }
            for (size_t i = 0; i < s->n; i++)
                if (nv_acc_feed(g, m, s->ts[i], s->v[i], w0, w1)) return -1;
        }
    }
    return 0;
}

/* One series whose median interval is selected again: its GPU, metric and selection, and
 * the time of its sample before (a walk's). */
typedef struct nv_rr {
    nv_dev *g;
    int m, done, has_prev;
    uint64_t prev;
    tp_kth q;
} nv_rr;

static void nv_rr_see(nv_rr *r, uint64_t ts) {
    if (r->has_prev) tp_kth_see(&r->q, ts - r->prev);
    r->prev = ts;
    r->has_prev = 1;
}

/* One pass of the sampler's samples (p's threads, in the order nv_collect read them, which
 * was each series' time order: no GPU was unordered) over the series of rr[0..n) not done. */
static void nv_rr_walk(const tp_process *p, nv_rr *rr, size_t n) {
    tp_name_cache cache;
    memset(&cache, 0, sizeof cache);
    for (size_t ti = 0; ti < p->nthreads; ti++) {
        tp_counter_it it;
        tp_counter c;
        if (tp_counter_it_init(&it, &p->threads[ti]) == 0)
            while (tp_counter_next(&it, &c)) {
                long r;
                if (!tp_name_cache_get(&cache, c.name, &r)) {
                    unsigned long idx;
                    const char *metric = tp_gpu_counter(c.name, &idx);
                    r = -1;
                    for (size_t i = 0; metric && i < n && r < 0; i++)
                        if (rr[i].g->idx == idx && !strcmp(metric, nv_suffix[rr[i].m]))
                            r = (long)i;
                    tp_name_cache_put(&cache, c.name, r);
                }
                if (r >= 0 && !rr[r].done) nv_rr_see(&rr[r], c.ts);
            }
        tp_counter_it_done(&it); /* damage ends the series, as in nv_collect */
    }
}

/* The median interval of each GPU's series whose gaps were too many to keep (gaps_over),
 * selected (tp_kth, a few passes) over the gaps read again: from the series kept whole and
 * sorted (keep_all) or from the sampler's samples, all GPUs in one walk a pass. The same
 * gaps nv_acc_add would have kept, in the same order: its series' samples as fed. */
static void nv_reread_intervals(const tp_process *p, nv_dev *dv, size_t nd, int keep_all) {
    nv_rr *rr = tp_calloc(nd ? nd : 1, sizeof *rr);
    size_t n = 0;
    if (!rr) return; /* no interval: 0, as without memory for the gaps */
    for (size_t d = 0; d < nd; d++) {
        int m;
        const nv_acc *a = nv_used(&dv[d], &m);
        if (!a->gaps_over || a->no_gaps || a->n < 2) continue;
        rr[n] = (nv_rr){.g = &dv[d], .m = m};
        tp_kth_init(&rr[n++].q, (a->n - 1) / 2);
    }
    for (int more = n > 0; more;) {
        more = 0;
        for (size_t i = 0; i < n; i++) {
            rr[i].has_prev = 0;
            if (!rr[i].done && !tp_kth_pass(&rr[i].q)) rr[i].done = 1;
            more |= !rr[i].done;
        }
        if (!more) break;
        if (!keep_all) {
            nv_rr_walk(p, rr, n);
            continue;
        }
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; !rr[i].done && k < rr[i].g->s[rr[i].m].n; k++)
                nv_rr_see(&rr[i], rr[i].g->s[rr[i].m].ts[k]);
    }
    for (size_t i = 0; i < n; i++) {
        rr[i].g->has_interval = 1;
        rr[i].g->interval_ms = rr[i].q.oom ? 0 : (double)rr[i].q.value / 1e6;
    }
    free(rr);
}

/* GPU g's identity (CUDA ordinal by its link, MIG), samples and energy over the window. */
static void nv_gpu(tp_nvml_gpu_result *R, nv_dev *g, const tp_process *p, const tp_process *rank_p,
                   const tp_gpu_link *links, size_t nlinks, const nv_window *W) {
    R->index = g->idx;
    const tp_gpu_link *lk = NULL;
    for (size_t a = 0; a < nlinks; a++)
        if (links[a].index == g->idx) lk = &links[a];
    int ord = lk ? lk->cuda_ordinal : tp_cuda_ordinal_of(rank_p, p, g->idx);
    if (ord >= 0) {
        R->has_cuda_device = 1;
        R->cuda_device = ord;
    }
    char k[64];
    snprintf(k, sizeof k, "gpu.%u.name", g->idx);
    R->name = tp_meta(p, k);
    snprintf(k, sizeof k, "gpu.%u.uuid", g->idx);
    R->uuid = tp_meta(p, k);
    /* MIG mode: power, energy and clocks are the whole GPU's (NVML reports them per
     * physical GPU), shared by every MIG instance on it */
    snprintf(k, sizeof k, "gpu.%u.mig_uuids", g->idx);
    R->shared_by_mig = (lk && lk->by == TP_GPU_BY_MIG_PARENT) || (tp_meta(p, k) && *tp_meta(p, k));
    if (lk && lk->by == TP_GPU_BY_MIG_PARENT) R->mig_device = lk->uuid;
    for (int m = 0; m < NV_N; m++)
        if (g->n[m] > R->samples) R->samples = g->n[m];
    /* energy: over [start of the first measured step, end of the last] (the time between
     * steps, logging or a checkpoint, belongs to them, as Megatron-LM's energy per
     * iteration counts a whole log interval), or over the run without steps */
    nv_energy E;
    nv_energy_of(p, g, W->per_step, W->w0, W->w1, rank_p->hdr.start_mono_ns, &E);
    R->has_energy = E.ok;
    R->energy_method = E.ok ? E.method : "none";
    snprintf(k, sizeof k, "gpu.%u.energy_counter", g->idx);
    R->energy_counter = tp_meta(p, k);
    if (E.ok) {
        R->energy_series = E.series;
        R->sample_interval_ms = E.interval_ms;
        R->energy_j = E.joules;
        R->avg_power_w = E.joules / ((double)(E.b - E.a) / 1e9);
    } else {
        _Static_assert(sizeof R->energy_unavailable == sizeof E.why, "the reason fits");
        memcpy(R->energy_unavailable, E.why, sizeof E.why);
    }
    R->has_per_step_energy = W->per_step;
    if (W->per_step && E.ok) {
        double e = E.joules, nm = (double)W->nm;
        R->steps_with_energy = W->nm;
        R->energy_per_step_j = e / nm;
        R->energy_per_step_wh = e / nm / 3600.0;
        /* A counter update or a power reading every ~100 ms (at best) resolves little of a
         * shorter step: the per-step figure is an average over the span, not a measurement
         * of one step. */
        R->energy_resolution_ms = E.method[0] == 'c' ? NV_COUNTER_PERIOD_MS
                                  : E.interval_ms > NV_COUNTER_PERIOD_MS ? E.interval_ms
                                                                         : NV_COUNTER_PERIOD_MS;
        R->energy_approximate = W->mean_step_ms < R->energy_resolution_ms;
        /* the power samples' integral beside the counter's, as a cross-check */
        double pj;
        if (E.method[0] == 'c' && nv_acc_integral(&g->acc[NA_POWER], W->w0, W->w1, &pj) &&
            isfinite(pj)) {
            R->has_energy_from_power = 1;
            R->energy_per_step_from_power_j = pj / nm;
        }
    }
    nv_gauges(R, g, p);
}

/* Per GPU of the rank: energy over the measured steps (nv_energy_of: the energy counter, or
 * the power samples integrated), average power (that energy over the steps' span: the
 * energy-weighted mean, not the mean of power samples), the power samples' mean and max, the
 * power limit, SM clock min/mean/max, temperature max, memory used peak against the total,
 * utilisation mean, and the clock-event reasons seen. The gauges are read inside the
 * measured steps' span (first start to last end), or over the whole run without steps.
 * The samples are those of the process tp_gpu_samples_for names; the rank's GPUs among them
 * are found by UUID (tp_rank_gpu_links), never by position once the rank named its devices.
 * A GPU in MIG mode is shared by its MIG instances: its energy is shown, flagged, and not
 * counted as the rank's own. */
void tp_nvml_compute(tp_nvml_result *out, const tp_run *run, const tp_process *rank_p,
                     const tp_step *meas, size_t nm) {
    memset(out, 0, sizeof *out);
    nv_dev *dv = NULL;
    size_t nd = 0;
    const tp_process *p = tp_gpu_samples_for(run, rank_p);
    if (!p) return;
    tp_gpu_link links[64];
    size_t unmatched = 0;
    size_t nlinks = tp_rank_gpu_links(rank_p, p, links, 64, &unmatched);
    /* the rank's GPUs are known and none was sampled: say so, show none */
    int none_sampled = !nlinks && unmatched;
    /* without a link, a rank that sampled itself shows what it sampled; another process's
     * samples are every GPU of the host, which the rank may share */
    int all_of_host = !nlinks && !unmatched && p != rank_p;
    nv_window W = {meas && nm > 0, 0, UINT64_MAX, nm, 0};
    if (W.per_step) {
        W.w0 = meas[0].start;
        W.w1 = meas[nm - 1].end;
        for (size_t i = 0; i < nm; i++)
            W.mean_step_ms += (double)(meas[i].end - meas[i].start) / 1e6;
        W.mean_step_ms /= (double)nm;
    }
    int unordered = 0, rc = nv_collect(p, links, nlinks, none_sampled, W.w0, W.w1, 0, &dv, &nd);
    for (size_t d = 0; !rc && d < nd; d++) unordered |= dv[d].unordered;
    if (unordered) { /* again, every series whole */
        nv_free(dv, nd);
        rc = nv_collect(p, links, nlinks, none_sampled, W.w0, W.w1, 1, &dv, &nd);
        if (!rc) rc = nv_replay(dv, nd, W.w0, W.w1);
    }
    if (!rc) nv_reread_intervals(p, dv, nd, unordered);
    if (rc || (!nd && !none_sampled)) goto out;
    out->gpus = nd ? tp_calloc(nd, sizeof *out->gpus) : NULL;
    if (nd && !out->gpus) goto out;
    out->present = 1;
    out->per_step = W.per_step;
    out->shared_with_other_ranks = all_of_host;
    if (p != rank_p) {
        out->has_sampled_by = 1;
        if (p->role == TP_ROLE_SAMPLER)
            snprintf(out->sampled_by, sizeof out->sampled_by, "node sampler");
        else tp_process_label(p, out->sampled_by, sizeof out->sampled_by);
        out->sampler_pid = p->hdr.pid;
    }
    static const char *const how[] = {"", "uuid", "mig_parent", "position"};
    if (nlinks) out->rank_gpus_by = how[links[0].by];
    out->has_not_sampled = none_sampled;
    /* the rank's own devices, by UUID: none of them is among the sampled GPUs */
    for (size_t a = 0; none_sampled && a < unmatched && a < 64; a++)
        out->not_sampled[out->nnot_sampled++] = links[a].uuid;
    out->device_match = tp_meta(p, "nvml.match");
    out->driver_version = tp_meta(p, "nvml.driver_version");
    const char *hz = tp_meta(p, "nvml.hz");
    out->has_hz = hz != NULL;
    out->hz = hz ? atof(hz) : 0;
    double sum_e = 0, sum_w = 0;
    int all_e = 1, any_mig = 0; /* a GPU shared by MIG instances: no sum is the rank's own */
    for (size_t d = 0; d < nd; d++) {
        tp_nvml_gpu_result *R = &out->gpus[out->ngpus++];
        nv_gpu(R, &dv[d], p, rank_p, links, nlinks, &W);
        any_mig |= R->shared_by_mig;
        if (R->has_energy) {
            /* of the GPUs with energy: one method, or "mixed" */
            if (out->energy_method && strcmp(out->energy_method, R->energy_method))
                out->energy_method = "mixed";
            else out->energy_method = R->energy_method;
            sum_e += W.per_step ? R->energy_j / (double)nm : R->energy_j;
            sum_w += R->avg_power_w;
        } else {
            all_e = 0;
        }
    }
    if (nd > 1 && all_e && !any_mig) {
        out->has_total = 1;
        out->total_energy_j = sum_e;
        out->total_avg_power_w = sum_w;
    }
out:
    nv_free(dv, nd);
}

/* ------------------------------------------------------------------ the document */

static void nv_gpu_json(cJSON *ga, const tp_nvml_gpu_result *R, int per_step) {
    cJSON *gj = cJSON_CreateObject();
    tp_json_item_to_array(ga, gj);
    cJSON_AddNumberToObject(gj, "index", R->index);
    if (R->has_cuda_device) cJSON_AddNumberToObject(gj, "cuda_device", R->cuda_device);
    if (R->name) cJSON_AddStringToObject(gj, "name", R->name);
    if (R->uuid) cJSON_AddStringToObject(gj, "uuid", R->uuid);
    if (R->shared_by_mig) cJSON_AddBoolToObject(gj, "shared_by_mig_instances", 1);
    if (R->mig_device) cJSON_AddStringToObject(gj, "mig_device", R->mig_device);
    cJSON_AddNumberToObject(gj, "samples", (double)R->samples);
    cJSON_AddStringToObject(gj, "energy_method", R->energy_method);
    if (R->energy_counter) cJSON_AddStringToObject(gj, "energy_counter", R->energy_counter);
    if (R->has_energy) {
        cJSON_AddStringToObject(gj, "energy_series", R->energy_series);
        cJSON_AddNumberToObject(gj, "sample_interval_ms", R->sample_interval_ms);
    } else {
        cJSON_AddStringToObject(gj, "energy_unavailable", R->energy_unavailable);
    }
    if (per_step) {
        cJSON_AddNumberToObject(gj, "steps_with_energy", (double)R->steps_with_energy);
        if (R->has_energy) {
            cJSON_AddNumberToObject(gj, "energy_per_step_j", R->energy_per_step_j);
            cJSON_AddNumberToObject(gj, "energy_per_step_wh", R->energy_per_step_wh);
            cJSON_AddNumberToObject(gj, "energy_resolution_ms", R->energy_resolution_ms);
            cJSON_AddBoolToObject(gj, "energy_approximate", R->energy_approximate);
            if (R->has_energy_from_power)
                cJSON_AddNumberToObject(gj, "energy_per_step_from_power_j",
                                        R->energy_per_step_from_power_j);
        }
    }
    if (R->has_energy) {
        cJSON_AddNumberToObject(gj, "energy_j", R->energy_j);
        cJSON_AddNumberToObject(gj, "avg_power_w", R->avg_power_w);
    }
    if (R->has_power) {
        cJSON_AddNumberToObject(gj, "power_mean_w", R->power_mean_w);
        cJSON_AddNumberToObject(gj, "power_max_w", R->power_max_w);
    }
    if (R->has_power_limit) cJSON_AddNumberToObject(gj, "power_limit_w", R->power_limit_w);
    if (R->has_sm_clock) {
        cJSON_AddNumberToObject(gj, "sm_clock_mhz_min", R->sm_clock_mhz_min);
        cJSON_AddNumberToObject(gj, "sm_clock_mhz_mean", R->sm_clock_mhz_mean);
        cJSON_AddNumberToObject(gj, "sm_clock_mhz_max", R->sm_clock_mhz_max);
    }
    if (R->has_temp) cJSON_AddNumberToObject(gj, "temp_c_max", R->temp_c_max);
    if (R->has_mem_used) {
        cJSON_AddNumberToObject(gj, "mem_used_peak_bytes", R->mem_used_peak_bytes);
        if (R->has_mem_used_share)
            cJSON_AddNumberToObject(gj, "mem_used_peak_share", R->mem_used_peak_share);
    }
    if (R->has_mem_total) cJSON_AddNumberToObject(gj, "mem_total_bytes", R->mem_total_bytes);
    if (R->has_util) cJSON_AddNumberToObject(gj, "util_percent_mean", R->util_percent_mean);
    if (R->has_clock_events) {
        cJSON *cj = cJSON_AddObjectToObject(gj, "clock_events");
        cJSON_AddNumberToObject(cj, "mask", (double)R->clock_event_mask);
        cJSON *names = cJSON_AddArrayToObject(cj, "reasons");
        const char *rn[TP_NVML_NREASONS];
        size_t nr = tp_nvml_reasons(R->clock_event_mask, rn, TP_NVML_NREASONS);
        for (size_t r = 0; r < nr; r++) tp_json_item_to_array(names, cJSON_CreateString(rn[r]));
        cJSON_AddBoolToObject(cj, "throttled", R->throttled);
        cJSON_AddNumberToObject(cj, "throttled_share", R->throttled_share);
    }
    cJSON *inv = NULL;
    tp_figure_invalid_json(&inv, gj, "util_percent_mean", &R->util_flagged, tp_flag_reason_util);
    tp_figure_invalid_json(&inv, gj, "mem_used_peak_share", &R->mem_used_share_flagged,
                           tp_flag_reason_mem_share);
}

void tp_nvml_json(cJSON *rank_json, const tp_nvml_result *nv) {
    if (!nv->present) return;
    cJSON *nj = cJSON_AddObjectToObject(rank_json, "nvml");
    cJSON_AddStringToObject(nj, "per", nv->per_step ? "step" : "run");
    if (nv->has_sampled_by) {
        cJSON_AddStringToObject(nj, "sampled_by", nv->sampled_by);
        cJSON_AddNumberToObject(nj, "sampler_pid", nv->sampler_pid);
        if (nv->shared_with_other_ranks) cJSON_AddBoolToObject(nj, "shared_with_other_ranks", 1);
    }
    if (nv->rank_gpus_by) cJSON_AddStringToObject(nj, "rank_gpus_by", nv->rank_gpus_by);
    if (nv->has_not_sampled) {
        cJSON *ns = cJSON_AddArrayToObject(nj, "rank_gpus_not_sampled");
        for (size_t a = 0; a < nv->nnot_sampled; a++)
            tp_json_item_to_array(ns, cJSON_CreateString(nv->not_sampled[a]));
    }
    if (nv->device_match) cJSON_AddStringToObject(nj, "device_match", nv->device_match);
    if (nv->driver_version) cJSON_AddStringToObject(nj, "driver_version", nv->driver_version);
    if (nv->has_hz) cJSON_AddNumberToObject(nj, "hz", nv->hz);
    cJSON *ga = cJSON_AddArrayToObject(nj, "gpus");
    for (size_t d = 0; d < nv->ngpus; d++) nv_gpu_json(ga, &nv->gpus[d], nv->per_step);
    if (nv->has_total) {
        cJSON_AddNumberToObject(nj, nv->per_step ? "energy_per_step_j" : "energy_j",
                                nv->total_energy_j);
        cJSON_AddNumberToObject(nj, "avg_power_w", nv->total_avg_power_w);
    }
    if (nv->energy_method) cJSON_AddStringToObject(nj, "energy_method", nv->energy_method);
}
