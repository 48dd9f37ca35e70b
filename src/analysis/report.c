/*
 * report.c — the first report (issue 2): run summary, steps per rank, the top ranges by
 * inclusive and exclusive time per step, and the share of data loading.
 *
 * Everything is computed into a cJSON document first (report.json), and the text report is
 * rendered from that document. Range times are counted only inside measured (non-warm-up)
 * steps, clipped to each step's window, so a range that straddles a step boundary is
 * split correctly and threads other than the step thread (a loader thread) count too.
 * Exclusive time inside the window is prorated from the range's whole exclusive share.
 */
#define _GNU_SOURCE
#include "analysis/report.h"
#include "analysis/stats.h"
#include "analysis/jsonget.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "analysis/breakdown.h"
#include "analysis/comm.h"
#include "analysis/diagnose.h"
#include "analysis/gpu.h"
#include "analysis/steps.h"
#include "capture/nvml_abi.h"
#include "timers/timers_format.h"
#include "trainprof.h"

static const char *const default_data_names[] = {"data", "batch", "loader", "get_batch",
                                                 "batch-generator"};

void tp_report_opts_init(tp_report_opts *o) {
    memset(o, 0, sizeof *o);
    o->warmup = 1;
    o->top_n = 15;
    o->data_names = default_data_names;
    o->ndata_names = sizeof default_data_names / sizeof *default_data_names;
    o->comm_warn_share = 0.10;
    o->comm_crit_share = 0.30;
    tp_diagnose_opts_init(o); /* issue 7: throughput inputs and diagnosis thresholds */
}

static double ms(uint64_t ns) { return (double)ns / 1e6; }

static int is_data_name(const tp_report_opts *o, const char *name) {
    for (size_t i = 0; i < o->ndata_names; i++)
        if (!strcasecmp(name, o->data_names[i])) return 1;
    return 0;
}

typedef struct agg {
    const char *name;
    uint32_t domain;
    uint64_t count;
    double incl_ns, excl_ns;
} agg;

/* Rows by (name, domain), with a hash index: PyTorch's per-operator NVTX can give
 * hundreds of thousands of distinct names. Names are interned: pointer equality. */
typedef struct aggtab {
    agg *v;
    size_t n, cap;
    uint32_t *index; /* slot -> row + 1, 0 = empty; size icap, a power of two */
    size_t icap;
} aggtab;

static size_t agg_hash(const char *name, uint32_t domain, size_t mask) {
    return (size_t)((((uintptr_t)name >> 3) * 0x9E3779B97F4A7C15ull) ^ domain) & mask;
}

static agg *agg_get(aggtab *t, const char *name, uint32_t domain) {
    if (t->icap) {
        for (size_t h = agg_hash(name, domain, t->icap - 1); t->index[h]; h = (h + 1) & (t->icap - 1)) {
            agg *a = &t->v[t->index[h] - 1];
            if (a->name == name && a->domain == domain) return a;
        }
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        agg *nv = realloc(t->v, cap * sizeof *nv);
        if (!nv) return NULL;
        t->v = nv;
        t->cap = cap;
    }
    if ((t->n + 1) * 2 > t->icap) { /* rebuild the index at twice the size */
        size_t icap = t->icap ? t->icap * 2 : 128;
        uint32_t *ni = calloc(icap, sizeof *ni);
        if (!ni) return NULL;
        for (size_t i = 0; i < t->n; i++) {
            size_t h = agg_hash(t->v[i].name, t->v[i].domain, icap - 1);
            while (ni[h]) h = (h + 1) & (icap - 1);
            ni[h] = (uint32_t)i + 1;
        }
        free(t->index);
        t->index = ni;
        t->icap = icap;
    }
    size_t h = agg_hash(name, domain, t->icap - 1);
    while (t->index[h]) h = (h + 1) & (t->icap - 1);
    t->index[h] = (uint32_t)t->n + 1;
    t->v[t->n] = (agg){name, domain, 0, 0, 0};
    return &t->v[t->n++];
}

static void agg_free(aggtab *t) {
    free(t->v);
    free(t->index);
}

static int by_incl(const void *a, const void *b) {
    const agg *x = a, *y = b;
    return x->incl_ns < y->incl_ns ? 1 : x->incl_ns > y->incl_ns ? -1 : strcmp(x->name, y->name);
}
static int by_excl(const void *a, const void *b) {
    const agg *x = a, *y = b;
    return x->excl_ns < y->excl_ns ? 1 : x->excl_ns > y->excl_ns ? -1 : strcmp(x->name, y->name);
}

static cJSON *range_rows(agg *v, size_t n, int top, double denom_ns, double per,
                         const tp_process *p) {
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; i < n && (int)i < top; i++) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "name", v[i].name);
        const char *d = tp_domain_name(p, v[i].domain);
        if (*d) cJSON_AddStringToObject(r, "domain", d);
        cJSON_AddNumberToObject(r, "count", (double)v[i].count);
        cJSON_AddNumberToObject(r, "count_per_unit", (double)v[i].count / per);
        cJSON_AddNumberToObject(r, "inclusive_ms", v[i].incl_ns / 1e6 / per);
        cJSON_AddNumberToObject(r, "exclusive_ms", v[i].excl_ns / 1e6 / per);
        cJSON_AddNumberToObject(r, "inclusive_share", denom_ns > 0 ? v[i].incl_ns / denom_ns : 0);
        cJSON_AddNumberToObject(r, "exclusive_share", denom_ns > 0 ? v[i].excl_ns / denom_ns : 0);
        cJSON_AddItemToArray(arr, r);
    }
    return arr;
}

/* The rank's Timers, rebuilt from their trace ranges (domain "trainprof", category
 * "timers"): ms per measured step (or in total without steps), in order of first use. */
typedef struct trow {
    const char *name;
    uint64_t first, count;
    double ns;
} trow;

static int by_first(const void *a, const void *b) {
    const trow *x = a, *y = b;
    return x->first < y->first ? -1 : x->first > y->first;
}

static void timers_section(cJSON *rs, const tp_process *p, const tp_step *meas, size_t nm) {
    uint32_t dom = 0;
    for (uint32_t d = 1; d < p->ndomains; d++)
        if (p->domains[d] && !strcmp(p->domains[d], "trainprof")) dom = d;
    if (!dom) return;
    trow *v = NULL;
    size_t n = 0, cap = 0;
    for (size_t ti = 0; ti < p->nthreads; ti++) {
        const tp_thread *t = &p->threads[ti];
        for (size_t k = 0; k < t->nranges; k++) {
            const tp_range *r = &t->ranges[k];
            /* a timer left running until the process ended counts up to its last event
             * (Megatron's interval-time is read while running and never stopped) */
            if (r->domain != dom) continue;
            const char *cat = tp_category_name(p, r->domain, r->category);
            if (!cat || strcmp(cat, "timers")) continue;
            size_t i = 0;
            while (i < n && v[i].name != r->name) i++; /* names are interned */
            if (i == n) {
                if (n == cap) {
                    cap = cap ? cap * 2 : 16;
                    trow *nv = realloc(v, cap * sizeof *nv);
                    if (!nv) { free(v); return; }
                    v = nv;
                }
                v[n++] = (trow){r->name, r->start, 0, 0};
            }
            if (r->start < v[i].first) v[i].first = r->start;
            v[i].count++;
            v[i].ns += (double)(meas ? tp_steps_overlap(meas, nm, r->start, r->end) : r->end - r->start);
        }
    }
    if (!n) return;
    if (n > 1) qsort(v, n, sizeof *v, by_first);
    cJSON *jt = cJSON_AddObjectToObject(rs, "timers");
    cJSON_AddStringToObject(jt, "per", meas ? "step" : "run");
    cJSON *rows = cJSON_AddArrayToObject(jt, "rows");
    for (size_t i = 0; i < n; i++) {
        cJSON *row = cJSON_CreateObject();
        cJSON_AddStringToObject(row, "name", v[i].name);
        cJSON_AddNumberToObject(row, "ms", v[i].ns / 1e6 / (meas && nm ? (double)nm : 1.0));
        cJSON_AddNumberToObject(row, "count", (double)v[i].count);
        cJSON_AddItemToArray(rows, row);
    }
    free(v);
}

/* The process sampler's counters (capture/procfs.c): CPU %, RSS, threads, switches. */
static void process_section(cJSON *rs, const tp_process *p) {
    static const char *const keys[4] = {"process.cpu_percent", "process.rss_bytes",
                                        "process.threads", "process.ctx_switches_per_s"};
    double sum[4] = {0}, mx[4] = {0};
    uint64_t n[4] = {0};
    for (size_t ti = 0; ti < p->nthreads; ti++) {
        const tp_thread *t = &p->threads[ti];
        for (size_t k = 0; k < t->ncounters; k++)
            for (int j = 0; j < 4; j++)
                if (!strcmp(t->counters[k].name, keys[j])) {
                    double v = t->counters[k].value;
                    sum[j] += v;
                    if (!n[j]++ || v > mx[j]) mx[j] = v;
                }
    }
    if (!n[1]) return;
    cJSON *pj = cJSON_AddObjectToObject(rs, "process");
    cJSON_AddNumberToObject(pj, "samples", (double)n[1]);
    if (n[0]) {
        cJSON_AddNumberToObject(pj, "cpu_percent_mean", sum[0] / (double)n[0]);
        cJSON_AddNumberToObject(pj, "cpu_percent_max", mx[0]);
    }
    cJSON_AddNumberToObject(pj, "rss_peak_bytes", mx[1]);
    if (n[2]) cJSON_AddNumberToObject(pj, "threads_max", mx[2]);
    if (n[3]) cJSON_AddNumberToObject(pj, "ctx_switches_per_s_mean", sum[3] / (double)n[3]);
}

/* ------------------------------------------------------------------ NVML (energy) */

/* The GPU sampler's counters (capture/nvml.c), "gpu<i>.<metric>" with i the NVML index, one
 * series per GPU and metric. */
enum { NV_ENERGY, NV_POWER, NV_POWER_LIMIT, NV_SM, NV_TEMP, NV_MEM, NV_UTIL, NV_EVENTS, NV_N };
static const char *const nv_suffix[NV_N] = {"energy_j",     "power_w", "power_limit_w",
                                            "sm_clock_mhz", "temp_c",  "mem_used_bytes",
                                            "util_percent", "clock_event_reasons"};

typedef struct nv_series {
    uint64_t *ts;
    double *v;
    size_t n, cap;
} nv_series;

typedef struct nv_dev {
    unsigned idx;
    nv_series s[NV_N];
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

static int nv_push(nv_series *s, uint64_t ts, double v) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        uint64_t *nt = realloc(s->ts, cap * sizeof *nt);
        if (!nt) return -1;
        s->ts = nt;
        double *nv = realloc(s->v, cap * sizeof *nv);
        if (!nv) return -1;
        s->v = nv;
        s->cap = cap;
    }
    s->ts[s->n] = ts;
    s->v[s->n++] = v;
    return 0;
}

/* The energy counter at time t, linear between the samples around it; 0 outside them (the
 * counter is not extrapolated: a step not bracketed by samples gets no energy). */
static int nv_energy_at(const nv_series *s, uint64_t t, double *out) {
    if (!s->n || t < s->ts[0] || t > s->ts[s->n - 1]) return 0;
    size_t lo = 0, hi = s->n - 1; /* last sample at or before t */
    while (lo < hi) {
        size_t mid = (lo + hi + 1) / 2;
        if (s->ts[mid] <= t) lo = mid;
        else hi = mid - 1;
    }
    if (lo + 1 >= s->n || s->ts[lo] == t) {
        *out = s->v[lo];
    } else {
        double f = (double)(t - s->ts[lo]) / (double)(s->ts[lo + 1] - s->ts[lo]);
        *out = s->v[lo] + f * (s->v[lo + 1] - s->v[lo]);
    }
    return 1;
}

static double nv_meta_num(const tp_process *p, unsigned idx, const char *key, int *found) {
    char k[64];
    snprintf(k, sizeof k, "gpu.%u.%s", idx, key);
    const char *v = tp_meta(p, k);
    *found = v != NULL;
    return v ? atof(v) : 0;
}



/* Each GPU device of the rank's "gpu" section gets what CUPTI's device record said of it
 * (cuda.<ordinal>.*: name, UUID, SM count) and its capacity, from that record or else NVML's
 * total memory of the GPU with that CUDA ordinal, with the allocator peak's share of it. */
static void memory_capacity(cJSON *rs, const tp_process *p) {
    cJSON *d;
    cJSON_ArrayForEach(d, tp_jobj(tp_jobj(rs, "gpu"), "devices")) {
        char k[48];
        unsigned ord = (unsigned)tp_jnum(d, "device");
        snprintf(k, sizeof k, "cuda.%u.name", ord);
        if (tp_meta(p, k)) cJSON_AddStringToObject(d, "name", tp_meta(p, k));
        snprintf(k, sizeof k, "cuda.%u.uuid", ord);
        if (tp_meta(p, k)) cJSON_AddStringToObject(d, "uuid", tp_meta(p, k));
        snprintf(k, sizeof k, "cuda.%u.sm_count", ord);
        if (tp_meta(p, k)) cJSON_AddNumberToObject(d, "sm_count", atof(tp_meta(p, k)));
        snprintf(k, sizeof k, "cuda.%u.memory_total_bytes", ord);
        double cap = tp_meta(p, k) ? atof(tp_meta(p, k)) : 0;
        const cJSON *g;
        cJSON_ArrayForEach(g, tp_jobj(tp_jobj(rs, "nvml"), "gpus")) {
            if (cap > 0) break;
            if (tp_jobj(g, "cuda_device") && tp_jnum(g, "cuda_device") == tp_jnum(d, "device") &&
                tp_jnum(g, "mem_total_bytes") > 0)
                cap = tp_jnum(g, "mem_total_bytes");
        }
        if (cap > 0) {
            cJSON_AddNumberToObject(d, "memory_capacity_bytes", cap);
            cJSON_AddNumberToObject(d, "memory_peak_share", tp_jnum(d, "memory_peak_bytes") / cap);
        }
    }
}

/* Per GPU the sampler saw: energy per measured step (the energy counter interpolated at each
 * step's start and end; only steps with samples on both sides count), average power (that
 * energy over those steps' time: the energy-weighted mean, not the mean of power samples),
 * the power samples' mean and max, the power limit, SM clock min/mean/max, temperature max,
 * memory used peak against the total, utilisation mean, and the clock-event reasons seen.
 * The gauges are read inside the measured steps' span (first start to last end), or over the
 * whole run without steps. Adds "nvml" to the rank (nothing when there are no samples). */
static void energy_section(cJSON *rank_json, const tp_run *run, const tp_process *rank_p,
                           const tp_step *meas, size_t nm) {
    nv_dev *dv = NULL;
    size_t nd = 0;
    int oom = 0;
    /* the rank's own samples, or those of the node sampler of its host */
    const tp_process *p = rank_p;
    unsigned allow[64];
    size_t nallow = 0;
    int from_node = 0;
    if (!tp_has_gpu_counters(rank_p)) {
        for (size_t i = 0; i < run->nprocs; i++) {
            const tp_process *q = &run->procs[i];
            if (q->role == TP_ROLE_SAMPLER && !strcmp(q->hdr.host, rank_p->hdr.host)) {
                p = q;
                from_node = 1;
                nallow = tp_rank_gpus(rank_p, q, allow, 64);
                break;
            }
        }
    }
    for (size_t ti = 0; ti < p->nthreads && !oom; ti++) {
        const tp_thread *t = &p->threads[ti];
        for (size_t k = 0; k < t->ncounters && !oom; k++) {
            const char *name = t->counters[k].name;
            unsigned long idx;
            const char *metric = tp_gpu_counter(name, &idx);
            if (!metric || idx > 1u << 16) continue;
            int m = -1;
            for (int j = 0; j < NV_N && m < 0; j++)
                if (!strcmp(metric, nv_suffix[j])) m = j;
            if (m < 0) continue;
            int ok = !nallow;
            for (size_t a = 0; a < nallow; a++) ok |= allow[a] == idx;
            if (!ok) continue;
            size_t d = 0;
            while (d < nd && dv[d].idx != idx) d++;
            if (d == nd) {
                nv_dev *n2 = realloc(dv, (nd + 1) * sizeof *n2);
                if (!n2) { oom = 1; break; }
                dv = n2;
                memset(&dv[nd], 0, sizeof dv[nd]);
                dv[nd++].idx = (unsigned)idx;
            }
            if (nv_push(&dv[d].s[m], t->counters[k].ts, t->counters[k].value)) oom = 1;
        }
    }
    if (!nd || oom) goto out;
    /* NVML indices in order */
    for (size_t i = 1; i < nd; i++)
        for (size_t j = i; j > 0 && dv[j - 1].idx > dv[j].idx; j--) {
            nv_dev tmp = dv[j];
            dv[j] = dv[j - 1];
            dv[j - 1] = tmp;
        }
    int per_step = meas && nm > 0;
    uint64_t w0 = per_step ? meas[0].start : 0, w1 = per_step ? meas[nm - 1].end : UINT64_MAX;
    cJSON *nj = cJSON_AddObjectToObject(rank_json, "nvml");
    cJSON_AddStringToObject(nj, "per", per_step ? "step" : "run");
    if (from_node) {
        /* sampled by `trainprof run` for the whole host; without a device list for this
         * rank every GPU of the host is shown and may be shared with other ranks */
        cJSON_AddStringToObject(nj, "sampled_by", "node sampler");
        cJSON_AddNumberToObject(nj, "sampler_pid", p->hdr.pid);
        if (!nallow) cJSON_AddBoolToObject(nj, "shared_with_other_ranks", 1);
    }
    const char *match = tp_meta(p, "nvml.match");
    if (match) cJSON_AddStringToObject(nj, "device_match", match);
    const char *drv = tp_meta(p, "nvml.driver_version");
    if (drv) cJSON_AddStringToObject(nj, "driver_version", drv);
    const char *hz = tp_meta(p, "nvml.hz");
    if (hz) cJSON_AddNumberToObject(nj, "hz", atof(hz));
    cJSON *ga = cJSON_AddArrayToObject(nj, "gpus");
    double sum_e = 0, sum_w = 0;
    int all_e = 1;
    for (size_t d = 0; d < nd; d++) {
        nv_dev *g = &dv[d];
        cJSON *gj = cJSON_CreateObject();
        cJSON_AddItemToArray(ga, gj);
        cJSON_AddNumberToObject(gj, "index", g->idx);
        int ord = tp_cuda_ordinal_of(rank_p, p, g->idx);
        if (ord >= 0) cJSON_AddNumberToObject(gj, "cuda_device", ord);
        char k[64];
        snprintf(k, sizeof k, "gpu.%u.name", g->idx);
        if (tp_meta(p, k)) cJSON_AddStringToObject(gj, "name", tp_meta(p, k));
        snprintf(k, sizeof k, "gpu.%u.uuid", g->idx);
        if (tp_meta(p, k)) cJSON_AddStringToObject(gj, "uuid", tp_meta(p, k));
        size_t ns = 0;
        for (int m = 0; m < NV_N; m++)
            if (g->s[m].n > ns) ns = g->s[m].n;
        cJSON_AddNumberToObject(gj, "samples", (double)ns);
        /* counters of one thread arrive in time order; sort anyway if they do not */
        for (int m = 0; m < NV_N; m++) {
            nv_series *s = &g->s[m];
            for (size_t i = 1; i < s->n; i++)
                for (size_t j = i; j > 0 && s->ts[j - 1] > s->ts[j]; j--) {
                    uint64_t tt = s->ts[j]; s->ts[j] = s->ts[j - 1]; s->ts[j - 1] = tt;
                    double tv = s->v[j]; s->v[j] = s->v[j - 1]; s->v[j - 1] = tv;
                }
        }
        /* energy */
        const nv_series *es = &g->s[NV_ENERGY];
        double e = 0, watts = 0;
        int have_e = 0;
        if (per_step && es->n >= 2) {
            /* Over [start of the first measured step, end of the last]: the time between
             * steps (logging, a checkpoint) belongs to them, as Megatron-LM's energy per
             * iteration counts a whole log interval. */
            uint64_t covered = 0, span = 0;
            double a, b;
            if (nv_energy_at(es, w0, &a) && nv_energy_at(es, w1, &b) && w1 > w0) {
                e = b - a;
                span = w1 - w0;
                covered = nm;
                /* the same from the power samples (trapezoids), as a cross-check */
                const nv_series *ps = &g->s[NV_POWER];
                double pj = 0;
                for (size_t i = 1; i < ps->n; i++) {
                    uint64_t t0 = ps->ts[i - 1] < w0 ? w0 : ps->ts[i - 1];
                    uint64_t t1 = ps->ts[i] > w1 ? w1 : ps->ts[i];
                    if (t1 > t0) pj += 0.5 * (ps->v[i - 1] + ps->v[i]) * (double)(t1 - t0) / 1e9;
                }
                if (ps->n >= 2)
                    cJSON_AddNumberToObject(gj, "energy_per_step_from_power_j", pj / (double)nm);
            }
            cJSON_AddNumberToObject(gj, "steps_with_energy", (double)covered);
            if (covered) {
                have_e = 1;
                watts = span ? e / ((double)span / 1e9) : 0;
                cJSON_AddNumberToObject(gj, "energy_per_step_j", e / (double)covered);
                cJSON_AddNumberToObject(gj, "energy_per_step_wh", e / (double)covered / 3600.0);
                cJSON_AddNumberToObject(gj, "energy_j", e);
                cJSON_AddNumberToObject(gj, "avg_power_w", watts);
                sum_e += e / (double)covered;
            } else {
                all_e = 0;
            }
        } else if (!per_step && es->n >= 2 && es->ts[es->n - 1] > es->ts[0]) {
            have_e = 1;
            e = es->v[es->n - 1] - es->v[0];
            watts = e / ((double)(es->ts[es->n - 1] - es->ts[0]) / 1e9);
            cJSON_AddNumberToObject(gj, "energy_j", e);
            cJSON_AddNumberToObject(gj, "avg_power_w", watts);
            sum_e += e;
        } else {
            all_e = 0;
        }
        if (have_e) sum_w += watts;
        /* gauges inside the window */
        double mn[NV_N], mx[NV_N], sm[NV_N];
        size_t cnt[NV_N];
        unsigned long long mask = 0;
        size_t throttled = 0;
        for (int m = 0; m < NV_N; m++) {
            mn[m] = mx[m] = sm[m] = 0;
            cnt[m] = 0;
            const nv_series *s = &g->s[m];
            for (size_t i = 0; i < s->n; i++) {
                if (s->ts[i] < w0 || s->ts[i] > w1) continue;
                double v = s->v[i];
                if (!cnt[m]++ || v < mn[m]) mn[m] = v;
                if (cnt[m] == 1 || v > mx[m]) mx[m] = v;
                sm[m] += v;
                if (m == NV_EVENTS) {
                    unsigned long long b = (unsigned long long)v;
                    mask |= b;
                    throttled += (b & NV_THROTTLE_MASK) != 0;
                }
            }
        }
        if (cnt[NV_POWER]) {
            cJSON_AddNumberToObject(gj, "power_mean_w", sm[NV_POWER] / (double)cnt[NV_POWER]);
            cJSON_AddNumberToObject(gj, "power_max_w", mx[NV_POWER]);
        }
        int found;
        double lim = nv_meta_num(p, g->idx, "power_limit_w", &found);
        if (cnt[NV_POWER_LIMIT]) lim = mx[NV_POWER_LIMIT], found = 1;
        if (found) cJSON_AddNumberToObject(gj, "power_limit_w", lim);
        if (cnt[NV_SM]) {
            cJSON_AddNumberToObject(gj, "sm_clock_mhz_min", mn[NV_SM]);
            cJSON_AddNumberToObject(gj, "sm_clock_mhz_mean", sm[NV_SM] / (double)cnt[NV_SM]);
            cJSON_AddNumberToObject(gj, "sm_clock_mhz_max", mx[NV_SM]);
        }
        if (cnt[NV_TEMP]) cJSON_AddNumberToObject(gj, "temp_c_max", mx[NV_TEMP]);
        double total = nv_meta_num(p, g->idx, "memory_total_bytes", &found);
        if (cnt[NV_MEM]) {
            cJSON_AddNumberToObject(gj, "mem_used_peak_bytes", mx[NV_MEM]);
            if (found && total > 0) cJSON_AddNumberToObject(gj, "mem_used_peak_share", mx[NV_MEM] / total);
        }
        if (found) cJSON_AddNumberToObject(gj, "mem_total_bytes", total);
        if (cnt[NV_UTIL]) cJSON_AddNumberToObject(gj, "util_percent_mean", sm[NV_UTIL] / (double)cnt[NV_UTIL]);
        if (cnt[NV_EVENTS]) {
            cJSON *cj = cJSON_AddObjectToObject(gj, "clock_events");
            cJSON_AddNumberToObject(cj, "mask", (double)mask);
            cJSON *names = cJSON_AddArrayToObject(cj, "reasons");
            for (size_t r = 0; r < sizeof nv_reasons / sizeof *nv_reasons; r++)
                if (mask & nv_reasons[r].bit)
                    cJSON_AddItemToArray(names, cJSON_CreateString(nv_reasons[r].name));
            cJSON_AddBoolToObject(cj, "throttled", throttled > 0);
            cJSON_AddNumberToObject(cj, "throttled_share", (double)throttled / (double)cnt[NV_EVENTS]);
        }
    }
    if (nd > 1 && all_e) {
        cJSON_AddNumberToObject(nj, per_step ? "energy_per_step_j" : "energy_j", sum_e);
        cJSON_AddNumberToObject(nj, "avg_power_w", sum_w);
    }
out:
    for (size_t d = 0; d < nd; d++)
        for (int m = 0; m < NV_N; m++) {
            free(dv[d].s[m].ts);
            free(dv[d].s[m].v);
        }
    free(dv);
}

static cJSON *rank_section(const tp_run *run, const tp_process *p, const tp_report_opts *o) {
    (void)run;
    cJSON *rs = cJSON_CreateObject();
    char label[64];
    tp_process_label(p, label, sizeof label);
    cJSON_AddNumberToObject(rs, "rank", p->rank);
    cJSON_AddStringToObject(rs, "label", label);
    cJSON_AddStringToObject(rs, "host", p->hdr.host);
    cJSON_AddNumberToObject(rs, "pid", p->hdr.pid);

    tp_steps s;
    if (tp_find_steps(p, o->step_name, o->warmup, &s) != TPROF_OK) return rs;
    cJSON *js = cJSON_AddObjectToObject(rs, "steps");
    cJSON_AddStringToObject(js, "source", tp_step_source_name(s.source));
    if (s.name) cJSON_AddStringToObject(js, "name", s.name);
    if (o->step_name) cJSON_AddStringToObject(js, "requested_name", o->step_name);
    if (o->step_name && s.source == TP_STEPS_API)
        cJSON_AddStringToObject(js, "note", "--step-name ignored: the program marks its steps "
                                            "with tprof_step_begin/end, which take precedence");
    cJSON_AddNumberToObject(js, "count", (double)s.nsteps);
    cJSON_AddNumberToObject(js, "warmup", (double)s.nwarmup);
    size_t nm = s.nsteps - s.nwarmup;
    cJSON_AddNumberToObject(js, "measured", (double)nm);
    const tp_step *meas = tp_steps_measured(&s);
    uint64_t total_step_ns = 0;
    if (s.source != TP_STEPS_NONE) {
        const tp_thread *st = &p->threads[s.thread];
        if (st->name) cJSON_AddStringToObject(js, "thread", st->name);
        cJSON_AddNumberToObject(js, "tid", st->os_tid);
        cJSON *wu = cJSON_AddArrayToObject(js, "warmup_ms");
        for (size_t i = 0; i < s.nwarmup; i++)
            cJSON_AddItemToArray(wu, cJSON_CreateNumber(ms(s.steps[i].end - s.steps[i].start)));
    }
    if (nm) {
        uint64_t *d = malloc(nm * sizeof *d);
        if (d) {
            for (size_t i = 0; i < nm; i++) {
                d[i] = meas[i].end - meas[i].start;
                total_step_ns += d[i];
            }
            qsort(d, nm, sizeof *d, tp_cmp_u64);
            cJSON_AddNumberToObject(js, "mean_ms", ms(total_step_ns) / (double)nm);
            cJSON_AddNumberToObject(js, "p50_ms", ms(tp_pct_u64(d, nm, 0.5)));
            cJSON_AddNumberToObject(js, "p90_ms", ms(tp_pct_u64(d, nm, 0.9)));
            cJSON_AddNumberToObject(js, "min_ms", ms(d[0]));
            cJSON_AddNumberToObject(js, "max_ms", ms(d[nm - 1]));
            cJSON_AddNumberToObject(js, "first_ms", ms(meas[0].start - p->first_ts));
            free(d);
        }
    }

    /* top ranges: inside measured steps when there are some, else over the whole run */
    int per_step = nm > 0;
    double per = per_step ? (double)nm : 1.0;
    double denom = per_step ? (double)total_step_ns
                            : (double)(p->end_mono > p->first_ts ? p->end_mono - p->first_ts : 0);
    aggtab tab = {0}, unclosed = {0};
    tp_span *dv = NULL;
    size_t ndv = 0, capdv = 0;
    int data_on_step_thread = 0;
    for (int pass = 0; pass < 2 && !ndv; pass++) {
        for (size_t ti = 0; ti < p->nthreads; ti++) {
            const tp_thread *t = &p->threads[ti];
            int step_thread = s.source != TP_STEPS_NONE && ti == s.thread;
            for (size_t k = 0; k < t->nranges; k++) {
                const tp_range *r = &t->ranges[k];
                uint64_t dur = r->end - r->start;
                if (r->flags & TP_R_UNCLOSED) {
                    /* never closed: its end is only where the file ends, so its time
                     * would be invented; listed apart instead */
                    if (pass == 0) {
                        agg *u = agg_get(&unclosed, r->name, r->domain);
                        if (u) u->count++;
                    }
                    continue;
                }
                uint64_t in = per_step ? tp_steps_overlap(meas, nm, r->start, r->end) : dur;
                if (pass == 0 && in) {
                    agg *a = agg_get(&tab, r->name, r->domain);
                    if (a) {
                        /* exclusive time is the synchronous nesting's: a start/end range
                         * (a timer, NCCL's async ranges) overlaps others without nesting,
                         * and counting all of it would make the shares add up past 100 % */
                        double excl = (r->flags & TP_R_ASYNC) ? 0.0
                                      : dur == 0 ? (double)in
                                                 : (double)in * (double)(dur - (r->child_ns > dur ? dur : r->child_ns)) / (double)dur;
                        a->count++;
                        /* recursion: the enclosing range of the same name holds this time */
                        if (!(r->flags & TP_R_NESTED_SAME)) a->incl_ns += (double)in;
                        a->excl_ns += excl;
                    }
                }
                /* data loading: prefer the step thread; else any thread (pass 1) */
                if (in && is_data_name(o, r->name) && (pass == 1 || step_thread || s.source == TP_STEPS_NONE)) {
                    if (ndv == capdv) {
                        capdv = capdv ? capdv * 2 : 64;
                        tp_span *n2 = realloc(dv, capdv * sizeof *n2);
                        if (!n2) break;
                        dv = n2;
                    }
                    dv[ndv++] = (tp_span){r->start, r->end};
                    if (pass == 0) data_on_step_thread = 1;
                }
            }
        }
    }
    cJSON *jr = cJSON_AddObjectToObject(rs, "ranges");
    cJSON_AddStringToObject(jr, "per", per_step ? "step" : "run");
    if (tab.n > 1) qsort(tab.v, tab.n, sizeof *tab.v, by_incl);
    cJSON_AddItemToObject(jr, "top_inclusive", range_rows(tab.v, tab.n, o->top_n, denom, per, p));
    if (tab.n > 1) qsort(tab.v, tab.n, sizeof *tab.v, by_excl);
    cJSON_AddItemToObject(jr, "top_exclusive", range_rows(tab.v, tab.n, o->top_n, denom, per, p));
    cJSON_AddNumberToObject(jr, "distinct_names", (double)tab.n);
    cJSON *uc = cJSON_AddArrayToObject(jr, "unclosed");
    for (size_t i = 0; i < unclosed.n; i++) {
        cJSON *u = cJSON_CreateObject();
        cJSON_AddStringToObject(u, "name", unclosed.v[i].name);
        const char *d = tp_domain_name(p, unclosed.v[i].domain);
        if (*d) cJSON_AddStringToObject(u, "domain", d);
        cJSON_AddNumberToObject(u, "count", (double)unclosed.v[i].count);
        cJSON_AddItemToArray(uc, u);
    }
    agg_free(&tab);
    agg_free(&unclosed);

    timers_section(rs, p, per_step ? meas : NULL, nm);
    tp_gpu_section(rs, p, per_step ? meas : NULL, per_step ? nm : 0, total_step_ns, o->top_n);
    tp_comm_rank_section(rs, p, per_step ? meas : NULL, per_step ? nm : 0);
    process_section(rs, p);
    energy_section(rs, run, p, meas, nm);
    memory_capacity(rs, p);
    tp_breakdown_section(rs, p, &s, o->data_names, o->ndata_names); /* issue 7 */

    cJSON *dl = cJSON_AddObjectToObject(rs, "data_loading");
    cJSON *names = cJSON_AddArrayToObject(dl, "names");
    for (size_t i = 0; i < o->ndata_names; i++)
        cJSON_AddItemToArray(names, cJSON_CreateString(o->data_names[i]));
    cJSON_AddBoolToObject(dl, "found", ndv > 0);
    if (ndv) {
        uint64_t u = tp_steps_union(dv, ndv, per_step ? meas : NULL, nm);
        cJSON_AddStringToObject(dl, "where", s.source == TP_STEPS_NONE ? "all threads"
                                             : data_on_step_thread      ? "step thread"
                                                                        : "other threads");
        cJSON_AddNumberToObject(dl, per_step ? "ms_per_step" : "ms_total", ms(u) / per);
        cJSON_AddNumberToObject(dl, "share", denom > 0 ? (double)u / denom : 0);
    }
    free(dv);
    tp_steps_free(&s);
    return rs;
}

/* Megatron's timers tables across ranks, from each rank's timers section: the same text
 * Megatron prints, with ms per measured step as the unit (normalizer 1 on per-step values). */
static void cross_rank_timers(cJSON *rep, const cJSON *ranks) {
    const char **names = NULL;
    size_t n = 0;
    int world = 0;
    const cJSON *r, *row;
    cJSON_ArrayForEach(r, ranks) {
        const cJSON *tm = cJSON_GetObjectItemCaseSensitive(r, "timers");
        if (!tm) continue;
        int rank = (int)cJSON_GetObjectItemCaseSensitive(r, "rank")->valuedouble;
        if (rank + 1 > world) world = rank + 1;
        cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(tm, "rows")) {
            const char *nm = cJSON_GetObjectItemCaseSensitive(row, "name")->valuestring;
            size_t i = 0;
            while (i < n && strcmp(names[i], nm)) i++;
            if (i < n) continue;
            const char **nn = realloc(names, (n + 1) * sizeof *nn);
            if (!nn) { free(names); return; }
            names = nn;
            names[n++] = nm;
        }
    }
    if (!n || world <= 0) { free(names); return; }
    double *m = calloc((size_t)world * n, sizeof *m);
    if (!m) { free(names); return; }
    const char *per = "step";
    cJSON_ArrayForEach(r, ranks) {
        const cJSON *tm = cJSON_GetObjectItemCaseSensitive(r, "timers");
        if (!tm) continue;
        per = cJSON_GetObjectItemCaseSensitive(tm, "per")->valuestring;
        int rank = (int)cJSON_GetObjectItemCaseSensitive(r, "rank")->valuedouble;
        cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(tm, "rows")) {
            const char *nm = cJSON_GetObjectItemCaseSensitive(row, "name")->valuestring;
            for (size_t i = 0; i < n; i++)
                if (!strcmp(names[i], nm))
                    m[(size_t)rank * n + i] = cJSON_GetObjectItemCaseSensitive(row, "ms")->valuedouble / 1e3;
        }
    }
    cJSON *jt = cJSON_AddObjectToObject(rep, "timers");
    cJSON_AddStringToObject(jt, "per", per);
    cJSON *mm = cJSON_AddArrayToObject(jt, "min_max");
    for (size_t i = 0; i < n; i++) {
        double mn = 0, mx = 0;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", names[i]);
        if (tprof__timers_minmax(m, world, n, i, &mn, &mx)) {
            cJSON_AddNumberToObject(e, "min_ms", mn * 1e3);
            cJSON_AddNumberToObject(e, "max_ms", mx * 1e3);
        }
        cJSON_AddItemToArray(mm, e);
    }
    char *t1 = tprof__timers_format(TPROF_TIMERS_MINMAX, names, n, m, world, 1.0);
    char *t2 = world > 1 ? tprof__timers_format(TPROF_TIMERS_ALL, names, n, m, world, 1.0) : NULL;
    if (t1) cJSON_AddStringToObject(jt, "megatron_minmax", t1);
    if (t2) cJSON_AddStringToObject(jt, "megatron_all", t2);
    free(t1);
    free(t2);
    free(m);
    free(names);
}

static const char *const known_caps[][2] = {
    {"nvtx", "no NVTX call reached trainprof (the program uses no NVTX3, or ran outside "
             "trainprof run)"},
    {"cupti", "no process used CUDA under trainprof run (or the build had no CUPTI headers)"},
    {"nccl", "NCCL never loaded the profiler plugin (no NCCL communicator, NCCL older than "
             "2.23, or NCCL_PROFILER_PLUGIN overridden)"},
    {"nvml", "no process sampled NVML (the run ended before the sampler's first pass, "
             "TRAINPROF_NVML_HZ=0, or no recording session)"},
    {"mpi", "no process called MPI_Init under trainprof run (or the build had no MPI)"},
};

cJSON *tp_report_build(const tp_run *run, const tp_report_opts *o) {
    tp_report_opts def;
    if (!o) {
        tp_report_opts_init(&def);
        o = &def;
    }
    cJSON *rep = cJSON_CreateObject();
    if (!rep) return NULL;
    cJSON_AddStringToObject(rep, "schema", "trainprof.report");
    cJSON_AddNumberToObject(rep, "schema_version", TP_REPORT_SCHEMA_VERSION);
    cJSON_AddStringToObject(rep, "trainprof_version", tprof_version());

    uint64_t t0 = UINT64_MAX, t1 = 0, events = 0, dropped = 0;
    int nranks = 0, nhelpers = 0, nsamplers = 0;
    for (size_t i = 0; i < run->nprocs; i++) {
        const tp_process *p = &run->procs[i];
        uint64_t s = tp_to_realtime(p, p->first_ts ? p->first_ts : p->hdr.start_mono_ns);
        uint64_t e = tp_to_realtime(p, p->end_mono);
        if (s < t0) t0 = s;
        if (e > t1) t1 = e;
        events += p->events;
        dropped += p->dropped;
        if (p->role == TP_ROLE_RANK) nranks++;
        else if (p->role == TP_ROLE_SAMPLER) nsamplers++;
        else nhelpers++;
    }
    cJSON *jr = cJSON_AddObjectToObject(rep, "run");
    cJSON_AddStringToObject(jr, "dir", run->dir);
    cJSON_AddStringToObject(jr, "run_id", run->nprocs ? run->procs[0].hdr.run_id : "");
    /* files of different runs in one directory: say so, the figures mix them */
    int nruns = run->nprocs ? 1 : 0;
    for (size_t i = 1; i < run->nprocs; i++) {
        int seen = 0;
        for (size_t k = 0; k < i && !seen; k++)
            seen = !strcmp(run->procs[i].hdr.run_id, run->procs[k].hdr.run_id);
        nruns += !seen;
    }
    if (nruns > 1) cJSON_AddNumberToObject(jr, "distinct_run_ids", nruns);
    cJSON_AddNumberToObject(jr, "processes", (double)run->nprocs);
    cJSON_AddNumberToObject(jr, "ranks", nranks);
    cJSON_AddNumberToObject(jr, "helpers", nhelpers);
    cJSON_AddNumberToObject(jr, "node_samplers", nsamplers);
    char t0s[32]; /* exact: a double would round nanoseconds since 1970 */
    snprintf(t0s, sizeof t0s, "%llu", t0 == UINT64_MAX ? 0ull : (unsigned long long)t0);
    cJSON_AddRawToObject(jr, "start_realtime_ns", t0s);
    cJSON_AddNumberToObject(jr, "duration_s", t1 > t0 && t0 != UINT64_MAX ? (double)(t1 - t0) / 1e9 : 0);
    cJSON_AddNumberToObject(jr, "events", (double)events);
    cJSON_AddNumberToObject(jr, "events_dropped", (double)dropped);
    double over = 0;
    for (size_t i = 0; i < run->nprocs; i++) {
        const char *v = tp_meta(&run->procs[i], "threads_over_limit");
        if (v) over += atof(v);
    }
    if (over > 0) cJSON_AddNumberToObject(jr, "threads_over_limit", over);

    cJSON *caps = cJSON_AddObjectToObject(rep, "capabilities");
    for (size_t c = 0; c < sizeof known_caps / sizeof *known_caps; c++) {
        char key[64];
        snprintf(key, sizeof key, "capability.%s", known_caps[c][0]);
        const char *found = NULL;
        for (size_t i = 0; i < run->nprocs && !found; i++) found = tp_meta(&run->procs[i], key);
        cJSON *cj = cJSON_AddObjectToObject(caps, known_caps[c][0]);
        /* a capability that reported itself unavailable or off was not captured */
        cJSON_AddBoolToObject(cj, "found", found && strncmp(found, "unavailable", 11) &&
                                               strncmp(found, "off", 3));
        cJSON_AddStringToObject(cj, "status", found ? found : known_caps[c][1]);
    }

    cJSON *procs = cJSON_AddArrayToObject(rep, "processes");
    for (size_t i = 0; i < run->nprocs; i++) {
        const tp_process *p = &run->procs[i];
        cJSON *jp = cJSON_CreateObject();
        char label[64];
        tp_process_label(p, label, sizeof label);
        cJSON_AddStringToObject(jp, "label", label);
        cJSON_AddStringToObject(jp, "role", p->role == TP_ROLE_RANK      ? "rank"
                                            : p->role == TP_ROLE_SAMPLER ? "node-sampler"
                                                                         : "helper");
        cJSON_AddNumberToObject(jp, "rank", p->rank);
        if (p->rank_implied) cJSON_AddBoolToObject(jp, "rank_implied", 1);
        cJSON_AddNumberToObject(jp, "world_size", p->world_size);
        cJSON_AddStringToObject(jp, "host", p->hdr.host);
        cJSON_AddNumberToObject(jp, "pid", p->hdr.pid);
        cJSON_AddNumberToObject(jp, "ppid", p->hdr.ppid);
        const char *cmd = tp_meta(p, "cmdline");
        if (cmd) cJSON_AddStringToObject(jp, "cmdline", cmd);
        cJSON_AddStringToObject(jp, "file", p->path);
        cJSON_AddNumberToObject(jp, "threads", (double)p->nthreads);
        cJSON_AddNumberToObject(jp, "events", (double)p->events);
        cJSON_AddNumberToObject(jp, "events_dropped", (double)p->dropped);
        cJSON_AddNumberToObject(jp, "duration_s",
                                p->end_mono > p->hdr.start_mono_ns
                                    ? (double)(p->end_mono - p->hdr.start_mono_ns) / 1e9 : 0);
        cJSON_AddBoolToObject(jp, "complete", p->complete);
        if (p->unknown_ends) cJSON_AddNumberToObject(jp, "unmatched_range_ends", (double)p->unknown_ends);
        uint64_t pops = 0;
        for (size_t k = 0; k < p->nthreads; k++) pops += p->threads[k].unmatched_pops;
        if (pops) cJSON_AddNumberToObject(jp, "unmatched_pops", (double)pops);
        cJSON *dmg = cJSON_AddArrayToObject(jp, "damage");
        for (size_t k = 0; k < p->ndamage; k++)
            cJSON_AddItemToArray(dmg, cJSON_CreateString(p->damage[k]));
        cJSON_AddItemToArray(procs, jp);
    }
    cJSON *errs = cJSON_AddArrayToObject(rep, "unreadable_files");
    for (size_t i = 0; i < run->nerrors; i++)
        cJSON_AddItemToArray(errs, cJSON_CreateString(run->errors[i]));

    cJSON *ranks = cJSON_AddArrayToObject(rep, "ranks");
    /* ranks in rank order */
    for (int want = 0, left = nranks; left > 0 && want < 1 << 20; want++) {
        for (size_t i = 0; i < run->nprocs; i++) {
            const tp_process *p = &run->procs[i];
            if (p->role != TP_ROLE_RANK || p->rank != want) continue;
            cJSON_AddItemToArray(ranks, rank_section(run, p, o));
            left--;
        }
    }
    cross_rank_timers(rep, ranks);
    /* findings: rules that name a problem, with the figures that show it (severity
     * "warning" or "critical"); each analysis appends its own */
    cJSON *findings = cJSON_AddArrayToObject(rep, "findings");
    tp_comm_run_section(rep, run, ranks, findings, o->comm_warn_share, o->comm_crit_share);
    /* issue 7: clocks, throughput/MFU, stragglers and the diagnosis rules */
    tp_diagnose_run(rep, run, ranks, findings, o);
    return rep;
}

/* ------------------------------------------------------------------ text rendering */


/* A string with control bytes shown as '?', so a file name cannot disturb the terminal (the
 * string is already valid UTF-8; at most 255 bytes shown). Uses one of two static buffers. */
static const char *printable(const char *s) {
    static char bufs[2][256];
    static int which;
    char *b = bufs[which ^= 1];
    size_t i = 0;
    for (; s[i] && i + 1 < sizeof bufs[0]; i++)
        b[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    b[i] = 0;
    return b;
}

static const char *basename_of(const char *p) {
    const char *s = strrchr(p, '/');
    return printable(s ? s + 1 : p);
}

/* Names are printed in a fixed-width column: long ones are cut with "..". Control bytes
 * become '?', so a name cannot disturb the terminal. */
static void put_name(FILE *f, const char *s, int width) {
    int n = 0;
    const unsigned char *p = (const unsigned char *)s;
    size_t len = strlen(s);
    int cut = (int)len > width;
    for (size_t i = 0; i < len && n < width - (cut ? 2 : 0); i++, n++) {
        if (p[i] >= 0x80) {
            /* count a UTF-8 sequence as one column */
            size_t k = i + 1;
            while (k < len && (p[k] & 0xC0) == 0x80) k++;
            fwrite(p + i, 1, k - i, f);
            i = k - 1;
        } else {
            fputc(p[i] < 0x20 || p[i] == 0x7f ? '?' : p[i], f);
        }
    }
    if (cut) { fputs("..", f); n += 2; }
    for (; n < width; n++) fputc(' ', f);
}

static void gpu_text(FILE *f, const cJSON *g, const char *B, const char *N) {
    if (!g) return;
    int per_step = !strcmp(tp_jstr(g, "per"), "step");
    const char *unit = per_step ? "per step" : "in total";
    const cJSON *kw = tp_jobj(g, "kernel_steps");
    if (kw) {
        if (cJSON_IsTrue(tp_jobj(kw, "opened")))
            fprintf(f, "  GPU activity captured only in steps %s (--kernel-steps): %.0f of the "
                       "%.0f measured steps; GPU figures are per step of those\n",
                    printable(tp_jstr(kw, "spec")), tp_jnum(kw, "measured_steps_in_window"),
                    tp_jnum(kw, "measured_steps"));
        else
            fprintf(f, "  GPU activity capture was limited to steps %s (--kernel-steps), which "
                       "never began: no GPU activity recorded\n",
                    printable(tp_jstr(kw, "spec")));
    }
    const cJSON *d;
    cJSON_ArrayForEach(d, tp_jobj(g, "capture_paused")) {
        fprintf(f, "  GPU activity paused%s%s%s from %.3f s to %.3f s%s: no GPU records then\n",
                tp_jobj(d, "reason") ? " for " : "", tp_jobj(d, "reason") ? printable(tp_jstr(d, "reason")) : "",
                "", tp_jnum(d, "from_s"), tp_jnum(d, "to_s"),
                cJSON_IsTrue(tp_jobj(d, "never_resumed")) ? " (never resumed)" : "");
    }
    cJSON_ArrayForEach(d, tp_jobj(g, "devices")) {
        fprintf(f, "  %sGPU %.0f%s", B, tp_jnum(d, "device"), N);
        if (tp_jobj(d, "name")) { /* the driver's text */
            fputs(" (", f);
            tp_fput_printable(f, tp_jstr(d, "name"));
            if (tp_jobj(d, "sm_count")) fprintf(f, ", %.0f SMs", tp_jnum(d, "sm_count"));
            fputc(')', f);
        }
        fputc(':', f);
        if (tp_jobj(d, "busy_share")) fprintf(f, " busy %.1f %% of the step,", 100 * tp_jnum(d, "busy_share"));
        fprintf(f, " kernels %.2f ms %s (%.0f launches), memcpy/memset %.2f ms\n",
                tp_jnum(d, "kernel_ms"), unit, tp_jnum(d, "kernels"), tp_jnum(d, "memcpy_memset_ms"));
        const cJSON *c = tp_jobj(d, "kernel_ms_by_class"), *k;
        fprintf(f, "    by class:");
        cJSON_ArrayForEach(k, c) fprintf(f, " %s %.2f ms;", k->string, k->valuedouble);
        fprintf(f, "\n    copies host->device %.1f MB, device->host %.1f MB %s; device memory peak %.1f MiB",
                tp_jnum(d, "h2d_bytes") / 1e6, tp_jnum(d, "d2h_bytes") / 1e6, unit,
                tp_jnum(d, "memory_peak_bytes") / 1048576.0);
        if (tp_jobj(d, "memory_capacity_bytes"))
            fprintf(f, " (%.1f %% of %.1f GiB)", 100 * tp_jnum(d, "memory_peak_share"),
                    tp_jnum(d, "memory_capacity_bytes") / 1073741824.0);
        fputc('\n', f);
    }
    fprintf(f, "  host synchronisations: %.1f %s, blocking the host %.2f ms\n",
            tp_jnum(g, "host_syncs"), unit, tp_jnum(g, "host_sync_blocked_ms"));
    const cJSON *lost = tp_jobj(g, "records_stopped");
    if (lost)
        fprintf(f, "  warning: GPU records stopped %.1f s into the measured steps while %.0f steps "
                   "went on for %.1f s: %s\n",
                tp_jnum(lost, "after_s"), tp_jnum(lost, "steps_without_gpu_records"), tp_jnum(lost, "span_s"),
                tp_jstr(lost, "likely_cause"));
    if (tp_jnum(g, "cupti_records_dropped") > 0)
        fprintf(f, "  warning: CUPTI dropped %.0f records (its buffers were full)\n",
                tp_jnum(g, "cupti_records_dropped"));
    const cJSON *ovh = tp_jobj(g, "cupti_overhead");
    if (ovh) { /* CUPTI's own time, then the driver's that CUPTI reported */
        const double nd = tp_jnum(ovh, "driver_records");
        for (int driver = 0; driver < 2; driver++) {
            const double n = driver ? nd : tp_jnum(ovh, "records") - nd;
            if (n <= 0) continue;
            fprintf(f, driver ? "  driver time reported by CUPTI: %.3f ms %s (%.0f records)"
                              : "  CUPTI's own overhead: %.3f ms %s (%.0f records)",
                    tp_jnum(ovh, driver ? "driver_ms" : "ms"), unit, n);
            const cJSON *k;
            int first = 1, full = 0;
            cJSON_ArrayForEach(k, tp_jobj(ovh, "by_kind")) {
                if ((strcmp(tp_jstr(k, "source"), "driver") == 0) != driver) continue;
                fprintf(f, "%s%s %.3f ms", first ? ": " : "; ", tp_jstr(k, "name"), tp_jnum(k, "ms"));
                full |= !strcmp(tp_jstr(k, "name"), "command buffer full") && tp_jnum(k, "ms") > 0;
                first = 0;
            }
            if (full) fputs(" (a launch waited for room in a GPU command queue: the host ran ahead of "
                            "the GPU)", f);
            fputc('\n', f);
        }
    }
    if (tp_jnum(g, "cupti_records_untimed") > 0)
        fprintf(f, "  note: %.0f CUPTI records had no start or end time (work still running when "
                   "its buffer was flushed, as at exit): left out\n",
                tp_jnum(g, "cupti_records_untimed"));
    const cJSON *rows = tp_jobj(g, "top_kernels"), *row;
    if (!cJSON_GetArraySize(rows)) return;
    fprintf(f, "\n  top kernels (%s)\n  %-60s %9s %11s %10s %7s\n", unit, "kernel", "count",
            "total ms", "mean us", "share");
    cJSON_ArrayForEach(row, rows) {
        fputs("  ", f);
        put_name(f, tp_jstr(row, "name"), 60);
        fprintf(f, " %9.1f %11.3f %10.1f %6.1f%%\n", tp_jnum(row, "count_per_unit"),
                tp_jnum(row, "total_ms"), tp_jnum(row, "mean_us"), 100 * tp_jnum(row, "share"));
    }
}

/* The "nvml" section of a rank: a line per GPU for energy and power, one for clocks,
 * temperature, memory and utilisation, one for the clock-event reasons. */
static void nvml_text(FILE *f, const cJSON *nv) {
    if (!nv) return;
    int per_step = !strcmp(tp_jstr(nv, "per"), "step");
    if (tp_jobj(nv, "sampled_by"))
        fprintf(f, "  NVML sampled by trainprof run's node sampler (pid %.0f)%s\n",
                tp_jnum(nv, "sampler_pid"),
                cJSON_IsTrue(tp_jobj(nv, "shared_with_other_ranks"))
                    ? ": this rank's GPU is not known, every GPU of the host is shown"
                    : "");
    const cJSON *g;
    cJSON_ArrayForEach(g, tp_jobj(nv, "gpus")) {
        fprintf(f, "  NVML GPU %.0f", tp_jnum(g, "index"));
        if (tp_jobj(g, "name")) fprintf(f, " %s", printable(tp_jstr(g, "name")));
        if (tp_jobj(g, "uuid")) fprintf(f, " (%s)", printable(tp_jstr(g, "uuid")));
        fputc(':', f);
        if (tp_jobj(g, "avg_power_w")) {
            if (per_step)
                fprintf(f, " %.1f J per step (%.4f Wh) over %.0f step%s,", tp_jnum(g, "energy_per_step_j"),
                        tp_jnum(g, "energy_per_step_wh"), tp_jnum(g, "steps_with_energy"),
                        tp_jnum(g, "steps_with_energy") == 1 ? "" : "s");
            else
                fprintf(f, " %.1f J in total,", tp_jnum(g, "energy_j"));
            fprintf(f, " %.1f W average", tp_jnum(g, "avg_power_w"));
        } else {
            fprintf(f, " no energy%s", per_step ? " (no measured step lies between two samples)"
                                                : " counter");
        }
        if (tp_jobj(g, "power_max_w"))
            fprintf(f, "; power samples %.1f W mean, %.1f W max", tp_jnum(g, "power_mean_w"),
                    tp_jnum(g, "power_max_w"));
        if (tp_jobj(g, "power_limit_w")) fprintf(f, "; limit %.0f W", tp_jnum(g, "power_limit_w"));
        fputc('\n', f);
        fputs("   ", f);
        if (tp_jobj(g, "sm_clock_mhz_max"))
            fprintf(f, " SM clock %.0f / %.0f / %.0f MHz (min/mean/max);", tp_jnum(g, "sm_clock_mhz_min"),
                    tp_jnum(g, "sm_clock_mhz_mean"), tp_jnum(g, "sm_clock_mhz_max"));
        if (tp_jobj(g, "temp_c_max")) fprintf(f, " %.0f C max;", tp_jnum(g, "temp_c_max"));
        if (tp_jobj(g, "mem_used_peak_bytes")) {
            fprintf(f, " memory used peak %.2f GiB", tp_jnum(g, "mem_used_peak_bytes") / 1073741824.0);
            if (tp_jobj(g, "mem_used_peak_share"))
                fprintf(f, " of %.2f GiB (%.0f %%)", tp_jnum(g, "mem_total_bytes") / 1073741824.0,
                        100 * tp_jnum(g, "mem_used_peak_share"));
            fputc(';', f);
        }
        if (tp_jobj(g, "util_percent_mean")) fprintf(f, " utilisation %.0f %% mean", tp_jnum(g, "util_percent_mean"));
        fputc('\n', f);
        const cJSON *ce = tp_jobj(g, "clock_events");
        if (ce) {
            fputs("    clock events:", f);
            const cJSON *r;
            int first = 1;
            cJSON_ArrayForEach(r, tp_jobj(ce, "reasons")) {
                fprintf(f, "%s%s", first ? " " : ", ", r->valuestring);
                first = 0;
            }
            if (first) fputs(" none", f);
            if (cJSON_IsTrue(tp_jobj(ce, "throttled")))
                fprintf(f, " (throttled in %.0f %% of samples)", 100 * tp_jnum(ce, "throttled_share"));
            fputc('\n', f);
        }
    }
    if (tp_jobj(nv, "avg_power_w"))
        fprintf(f, "  NVML GPUs together: %.1f J %s, %.1f W average\n",
                per_step ? tp_jnum(nv, "energy_per_step_j") : tp_jnum(nv, "energy_j"),
                per_step ? "per step" : "in total", tp_jnum(nv, "avg_power_w"));
    if (!strcmp(tp_jstr(nv, "device_match"), "index"))
        fprintf(f, "  note: CUDA_VISIBLE_DEVICES held indices, read in NVML's PCI order (CUDA's "
                   "order agrees on identical GPUs or with CUDA_DEVICE_ORDER=PCI_BUS_ID)\n");
}

int tp_report_write_text(const cJSON *rep, FILE *f, int color) {
    const char *B = color ? "\033[1m" : "", *N = color ? "\033[0m" : "";
    const char *Y = color ? "\033[33m" : "";
    const cJSON *run = tp_jobj(rep, "run");
    fprintf(f, "%strainprof report%s %s\n", B, N, tp_jstr(run, "dir"));
    fprintf(f, "run: %.0f process%s (%.0f rank%s, %.0f helper%s%s), %.2f s, %.0f events, %.0f dropped\n",
            tp_jnum(run, "processes"), tp_jnum(run, "processes") == 1 ? "" : "es", tp_jnum(run, "ranks"),
            tp_jnum(run, "ranks") == 1 ? "" : "s", tp_jnum(run, "helpers"),
            tp_jnum(run, "helpers") == 1 ? "" : "s",
            tp_jnum(run, "node_samplers") > 0 ? ", GPU sampler of the node" : "",
            tp_jnum(run, "duration_s"), tp_jnum(run, "events"), tp_jnum(run, "events_dropped"));
    if (tp_jnum(run, "events_dropped") > 0)
        fprintf(f, "%s  warning: %.0f events were dropped: %s%s\n", Y, tp_jnum(run, "events_dropped"),
                tp_jnum(run, "threads_over_limit") > 0
                    ? "threads beyond TRAINPROF_MAX_THREADS record nothing (raise it), and "
                      "full rings drop events (raise TRAINPROF_RING_KB)"
                    : "rings were full (raise TRAINPROF_RING_KB)",
                N);
    if (tp_jnum(run, "distinct_run_ids") > 1)
        fprintf(f, "%s  warning: these rank files come from %.0f different runs (run ids differ)%s\n",
                Y, tp_jnum(run, "distinct_run_ids"), N);
    fprintf(f, "capabilities:\n");
    const cJSON *c;
    cJSON_ArrayForEach(c, tp_jobj(rep, "capabilities")) {
        fprintf(f, "  %-6s %s %s\n", c->string, cJSON_IsTrue(tp_jobj(c, "found")) ? "yes" : "no ",
                tp_jstr(c, "status"));
    }

    fprintf(f, "\n%sprocesses%s\n  %-18s %-24s %7s %9s %8s %9s  %s\n", B, N, "role", "host:pid",
            "threads", "events", "dropped", "duration", "file");
    const cJSON *p;
    cJSON_ArrayForEach(p, tp_jobj(rep, "processes")) {
        char hp[96];
        snprintf(hp, sizeof hp, "%s:%.0f", tp_jstr(p, "host"), tp_jnum(p, "pid"));
        fprintf(f, "  %-18s %-24s %7.0f %9.0f %8.0f %7.2f s  %s%s\n", tp_jstr(p, "label"), hp,
                tp_jnum(p, "threads"), tp_jnum(p, "events"), tp_jnum(p, "events_dropped"),
                tp_jnum(p, "duration_s"), basename_of(tp_jstr(p, "file")),
                cJSON_IsTrue(tp_jobj(p, "rank_implied")) ? "  (rank implied: no launcher rank)" : "");
        const cJSON *d;
        cJSON_ArrayForEach(d, tp_jobj(p, "damage"))
            fprintf(f, "%s    damage in %s: %s%s\n", Y, basename_of(tp_jstr(p, "file")),
                    printable(d->valuestring), N);
        if (tp_jnum(p, "unmatched_pops") > 0)
            fprintf(f, "    %.0f range pop(s) with no open range (ignored)\n", tp_jnum(p, "unmatched_pops"));
        if (tp_jnum(p, "unmatched_range_ends") > 0)
            fprintf(f, "    %.0f range end(s) for unknown ids (ignored)\n",
                    tp_jnum(p, "unmatched_range_ends"));
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, tp_jobj(rep, "unreadable_files"))
        fprintf(f, "%s  unreadable: %s%s\n", Y, e->valuestring, N);

    const cJSON *r;
    cJSON_ArrayForEach(r, tp_jobj(rep, "ranks")) {
        const cJSON *s = tp_jobj(r, "steps");
        fprintf(f, "\n%s%s%s (%s:%.0f)\n", B, tp_jstr(r, "label"), N, tp_jstr(r, "host"), tp_jnum(r, "pid"));
        if (!s) continue;
        if (tp_jnum(s, "count") == 0) {
            fprintf(f, "  steps: none found (%s%s%s). Mark steps with tprof_step_begin/end, an "
                       "NVTX range named \"step\", or pass --step-name NAME.\n",
                    tp_jobj(s, "requested_name") ? "no range named \"" : "tried API steps, ProfilerStep#*, train_step, training_step, step, iteration, train_iter",
                    tp_jobj(s, "requested_name") ? tp_jstr(s, "requested_name") : "",
                    tp_jobj(s, "requested_name") ? "\"" : "");
        } else {
            int api = !strcmp(tp_jstr(s, "name"), "tprof_step_begin/end"); /* says it already */
            fprintf(f, "  steps: %.0f from %s%s%s%s%s%s%s, %.0f warm-up\n", tp_jnum(s, "count"),
                    tp_jstr(s, "source"), api ? "" : " \"", api ? "" : printable(tp_jstr(s, "name")),
                    api ? "" : "\"", tp_jobj(s, "thread") ? " (thread " : "",
                    tp_jobj(s, "thread") ? printable(tp_jstr(s, "thread")) : "", tp_jobj(s, "thread") ? ")" : "",
                    tp_jnum(s, "warmup"));
            if (tp_jobj(s, "note")) fprintf(f, "  note: %s\n", tp_jstr(s, "note"));
            if (tp_jnum(s, "measured") > 0)
                fprintf(f, "  step time: mean %.2f ms  p50 %.2f  p90 %.2f  max %.2f  min %.2f ms\n",
                        tp_jnum(s, "mean_ms"), tp_jnum(s, "p50_ms"), tp_jnum(s, "p90_ms"), tp_jnum(s, "max_ms"),
                        tp_jnum(s, "min_ms"));
            const cJSON *w;
            int shown = 0, nw = cJSON_GetArraySize(tp_jobj(s, "warmup_ms"));
            cJSON_ArrayForEach(w, tp_jobj(s, "warmup_ms")) {
                if (shown == 8) { /* the JSON has them all */
                    fprintf(f, ", ... (%d in all)", nw);
                    break;
                }
                fprintf(f, "%s%.2f", shown ? ", " : "  warm-up step(s): ", w->valuedouble);
                shown++;
            }
            if (shown) fprintf(f, " ms (not in the statistics)\n");
        }
        const cJSON *pr = tp_jobj(r, "process");
        if (pr)
            fprintf(f, "  process: CPU %.0f %% mean, %.0f %% max; RSS peak %.1f MiB; %.0f threads; "
                       "%.0f context switches/s (%.0f samples)\n",
                    tp_jnum(pr, "cpu_percent_mean"), tp_jnum(pr, "cpu_percent_max"),
                    tp_jnum(pr, "rss_peak_bytes") / 1048576.0, tp_jnum(pr, "threads_max"),
                    tp_jnum(pr, "ctx_switches_per_s_mean"), tp_jnum(pr, "samples"));
        nvml_text(f, tp_jobj(r, "nvml"));
        gpu_text(f, tp_jobj(r, "gpu"), B, N);
        tp_comm_rank_text(f, tp_jobj(r, "communication"));
        tp_breakdown_text(f, tp_jobj(r, "breakdown")); /* issue 7 */
        const cJSON *dl = tp_jobj(r, "data_loading");
        const cJSON *rg = tp_jobj(r, "ranges");
        int per_step = !strcmp(tp_jstr(rg, "per"), "step");
        if (dl && cJSON_IsTrue(tp_jobj(dl, "found")))
            fprintf(f, "  data loading: %.2f ms %s = %.1f %% of the %s (%s)\n",
                    per_step ? tp_jnum(dl, "ms_per_step") : tp_jnum(dl, "ms_total"),
                    per_step ? "per step" : "in total", 100 * tp_jnum(dl, "share"),
                    per_step ? "step" : "run", tp_jstr(dl, "where"));
        else if (dl)
            fprintf(f, "  data loading: no range named like data loading (data, batch, loader, "
                       "get_batch, batch-generator)\n");
        const cJSON *u;
        int firstu = 1;
        cJSON_ArrayForEach(u, tp_jobj(rg, "unclosed")) {
            const char *dom = tp_jstr(u, "domain");
            fprintf(f, "%s%s%s%s (%.0f)", firstu ? "  never closed (left out of the tables): " : ", ",
                    dom, *dom ? "::" : "", tp_jstr(u, "name"), tp_jnum(u, "count"));
            firstu = 0;
        }
        if (!firstu) fputc('\n', f);
        static const char *const tables[2][2] = {{"top_inclusive", "inclusive"},
                                                 {"top_exclusive", "exclusive"}};
        for (int ti = 0; ti < 2; ti++) {
            const cJSON *rows = tp_jobj(rg, tables[ti][0]);
            if (!cJSON_GetArraySize(rows)) continue;
            fprintf(f, "\n  top ranges by %s time per %s\n  %-40s %9s %12s %7s %12s\n", tables[ti][1],
                    per_step ? "step" : "run", "name", per_step ? "count/st" : "count",
                    "incl ms", "share", "excl ms");
            const cJSON *row;
            cJSON_ArrayForEach(row, rows) {
                char nm[512];
                const char *dom = tp_jstr(row, "domain");
                snprintf(nm, sizeof nm, "%s%s%s", dom, *dom ? "::" : "", tp_jstr(row, "name"));
                fputs("  ", f);
                put_name(f, nm, 40);
                fprintf(f, " %9.2f %12.3f %6.1f%% %12.3f\n", tp_jnum(row, "count_per_unit"),
                        tp_jnum(row, "inclusive_ms"),
                        100 * tp_jnum(row, ti == 0 ? "inclusive_share" : "exclusive_share"),
                        tp_jnum(row, "exclusive_ms"));
            }
        }
    }
    tp_comm_run_text(f, tp_jobj(rep, "communication"), B, N);
    tp_diagnose_text(f, rep, B, N, Y); /* issue 7: clocks, throughput, stragglers */
    const cJSON *tm = tp_jobj(rep, "timers");
    if (tm) {
        fprintf(f, "\n%stimers%s (Megatron-LM format; ms per %s)\n", B, N,
                !strcmp(tp_jstr(tm, "per"), "step") ? "measured step" : "run, in total");
        if (tp_jobj(tm, "megatron_minmax")) fprintf(f, "%s\n", tp_jstr(tm, "megatron_minmax"));
        if (tp_jobj(tm, "megatron_all")) fprintf(f, "%s\n", tp_jstr(tm, "megatron_all"));
    }
    const cJSON *fd;
    int firstf = 1;
    cJSON_ArrayForEach(fd, tp_jobj(rep, "findings")) {
        if (firstf) fprintf(f, "\n%sfindings%s\n", B, N);
        firstf = 0;
        const char *sev = tp_jstr(fd, "severity");
        fprintf(f, "%s  %s: %s%s\n", !strcmp(sev, "critical") || !strcmp(sev, "warning") ? Y : "",
                sev, tp_jstr(fd, "message"), N);
        if (tp_jobj(fd, "recommendation")) fprintf(f, "    try: %s\n", tp_jstr(fd, "recommendation"));
    }
    fflush(f);
    return ferror(f) ? TPROF_ERR_IO : TPROF_OK;
}

int tp_report_write_json(const cJSON *rep, FILE *f) {
    char *s = cJSON_Print(rep);
    if (!s) return TPROF_ERR_NO_MEMORY;
    fputs(s, f);
    fputc('\n', f);
    cJSON_free(s);
    fflush(f);
    return ferror(f) ? TPROF_ERR_IO : TPROF_OK;
}
