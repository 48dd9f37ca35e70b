/*
 * memory.c — the memory timeline of a rank, its fragmentation and the out-of-memory
 * post-mortem (memory.h), computed from the records of docs/report-json.md ("Memory") into
 * tp_memory_result, and written to the document from that struct (the text: memory_text.c).
 *
 * Peaks from samples. Between two consecutive samples i-1 and i lies an interval; the
 * allocator's max_memory_allocated reading r_i is its peak since the job's last reset
 * (PyTorch, torch.cuda.max_memory_allocated). When r_i differs from r_{i-1}, the peak was
 * set inside the interval: a rise is the new peak, a fall means the job reset the peak
 * inside it and r_i is the peak since (taken as exact, as the record contract says). When
 * it did not change, the interval's peak is only known to be at most r_i. Without the
 * reading, the current values at both ends bound it from below. The first sample's
 * interval reaches back to the process's start, so it is at most r_0. A step's peak
 * combines its intervals: exact when its largest exact interval is at least every other
 * interval's bound. The same holds for reserved with max_memory_reserved. Over the whole
 * run the largest reading is exact: every instant lies in the window of the next reading.
 */
#define _GNU_SOURCE
#include "analysis/memory.h"
#include "analysis/alloc.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/counter_pack.h"
#include "analysis/stats.h"
#include "analysis/text.h"
#include "trainprof.h"

/* The counters of one sample (the record contract's names), in this order. */
enum {
    M_ALLOC,
    M_RESV,
    M_MAX_ALLOC,
    M_MAX_RESV,
    M_ACTIVE,
    M_INACTIVE,
    M_RETRIES,
    M_ALLOCS,
    M_FREES,
    M_OOMS,
    M_N
};
static const char *const k_names[M_N] = {"cuda.memory_allocated_bytes",
                                         "cuda.memory_reserved_bytes",
                                         "cuda.max_memory_allocated_bytes",
                                         "cuda.max_memory_reserved_bytes",
                                         "cuda.memory_active_bytes",
                                         "cuda.memory_inactive_split_bytes",
                                         "cuda.memory_alloc_retries",
                                         "cuda.memory_allocations",
                                         "cuda.memory_frees",
                                         "cuda.memory_ooms"};

static const char *const k_phases[TP_MEM_NPHASES] = {"data", "forward", "backward", "optimizer",
                                                     "other"};
enum { PH_OTHER = TP_MEM_NPHASES - 1 };

const char *tp_mem_phase_name(size_t i) { return i < TP_MEM_NPHASES ? k_phases[i] : "other"; }

const char *tp_mem_bound_name(tp_mem_bound b) {
    return b == TP_MEM_EXACT ? "exact" : b == TP_MEM_AT_MOST ? "at_most" : "at_least";
}

typedef struct sample {
    uint64_t ts;
    unsigned has; /* bit k: counter k was written */
    double v[M_N];
} sample;

typedef struct phase_span {
    uint64_t s, e;
    int phase;
} phase_span;

/* A byte figure or a count the allocator can have written: finite, not negative, under
 * 2^60 (an exbibyte: no device holds near it, and a count that high is never reached in a
 * run). Anything else is a corrupt or hostile record, left out rather than printed. */
static int plausible(double v) { return isfinite(v) && v >= 0 && v < 0x1p60; }

static int counter_index(const char *name) {
    if (strncmp(name, "cuda.", 5) != 0) return -1;
    for (int k = 0; k < M_N; k++)
        if (!strcmp(name, k_names[k])) return k;
    return -1;
}

static int by_ts(const void *a, const void *b) {
    const sample *x = a, *y = b;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static int by_span(const void *a, const void *b) {
    const phase_span *x = a, *y = b;
    return x->s < y->s ? -1 : x->s > y->s;
}

/* Every thread's samples, in time order: a sample is a run of the memory counters of one
 * thread in which no name repeats (the hooks write them back to back at one instant). */
static int collect_samples(const tp_process *p, sample **out, size_t *n) {
    size_t cap = 0, len = 0;
    sample *v = NULL;
    for (size_t t = 0; t < p->nthreads; t++) {
        int open = 0;
        tp_counter_it it;
        tp_counter c;
        if (tp_counter_it_init(&it, &p->threads[t])) {
            free(v);
            return TPROF_ERR_NO_MEMORY;
        }
        while (tp_counter_next(&it, &c)) {
            int k = counter_index(c.name);
            if (k < 0 || !plausible(c.value)) continue;
            if (!open || (v[len - 1].has & (1u << k))) {
                if (len == cap) {
                    size_t nc = cap ? cap * 2 : 64;
                    sample *g = tp_realloc(v, nc * sizeof *g);
                    if (!g) {
                        tp_counter_it_done(&it);
                        free(v);
                        return TPROF_ERR_NO_MEMORY;
                    }
                    v = g;
                    cap = nc;
                }
                memset(&v[len], 0, sizeof v[len]);
                v[len++].ts = c.ts;
                open = 1;
            }
            v[len - 1].has |= 1u << k;
            v[len - 1].v[k] = c.value;
        }
        tp_counter_it_done(&it);
    }
    if (len > 1) qsort(v, len, sizeof *v, by_ts);
    *out = v;
    *n = len;
    return TPROF_OK;
}

static int phase_of_name(const char *name) {
    for (int k = 0; k < PH_OTHER; k++)
        if (!strcmp(name, k_phases[k])) return k;
    return -1;
}

/* The phase ranges (trainprof.torch's data, forward, backward, optimizer) of thread t (or
 * every thread when t is out of range), by start. */
static int collect_phases(const tp_process *p, size_t t, phase_span **out, size_t *n) {
    size_t len = 0;
    for (size_t i = 0; i < p->nthreads; i++) {
        if (t < p->nthreads && i != t) continue;
        for (size_t j = 0; j < p->threads[i].nranges; j++)
            len += phase_of_name(p->threads[i].ranges[j].name) >= 0;
    }
    phase_span *v = tp_malloc((len ? len : 1) * sizeof *v);
    if (!v) return TPROF_ERR_NO_MEMORY;
    size_t k = 0;
    for (size_t i = 0; i < p->nthreads; i++) {
        if (t < p->nthreads && i != t) continue;
        for (size_t j = 0; j < p->threads[i].nranges; j++) {
            const tp_range *r = &p->threads[i].ranges[j];
            int ph = phase_of_name(r->name);
            if (ph >= 0) v[k++] = (phase_span){r->start, r->end, ph};
        }
    }
    if (k > 1) qsort(v, k, sizeof *v, by_span);
    *out = v;
    *n = k;
    return TPROF_OK;
}

/* trainprof.torch's module ranges ("nn.Module: NAME", taken around the model's modules in
 * the steps of the GPU capture plan, docs/python.md) of thread t, by start, each with the
 * index of the innermost module range around it (-1: none). */
typedef struct module_span {
    uint64_t s, e;
    const char *name; /* after the prefix, into the run */
    long parent;
} module_span;

static int by_module_span(const void *a, const void *b) {
    const module_span *x = a, *y = b;
    if (x->s != y->s) return x->s < y->s ? -1 : 1;
    return x->e > y->e ? -1 : x->e < y->e; /* the outer one first */
}

/* A module range that can nest: a thread range (an async one need not nest) with an end. */
static int module_candidate(const tp_range *r) {
    return tp_module_range(r->name) && !(r->flags & TP_R_ASYNC) && r->end >= r->start;
}

static int collect_modules(const tp_process *p, size_t t, module_span **out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (t >= p->nthreads) return TPROF_OK;
    const tp_thread *th = &p->threads[t];
    const size_t plen = sizeof TP_MODULE_RANGE_PREFIX - 1;
    size_t len = 0;
    for (size_t j = 0; j < th->nranges; j++)
        len += module_candidate(&th->ranges[j]);
    if (!len) return TPROF_OK;
    module_span *v = tp_malloc(len * sizeof *v);
    long *stack = tp_malloc(len * sizeof *stack);
    if (!v || !stack) {
        free(v);
        free(stack);
        return TPROF_ERR_NO_MEMORY;
    }
    size_t k = 0;
    for (size_t j = 0; j < th->nranges; j++) {
        const tp_range *r = &th->ranges[j];
        if (module_candidate(r))
            v[k++] = (module_span){r->start, r->end, r->name + plen, -1};
    }
    qsort(v, k, sizeof *v, by_module_span);
    size_t depth = 0; /* the spans open around v[i]: ranges of one thread nest */
    for (size_t i = 0; i < k; i++) {
        while (depth && !(v[stack[depth - 1]].e >= v[i].e)) depth--;
        v[i].parent = depth ? stack[depth - 1] : -1;
        stack[depth++] = (long)i;
    }
    free(stack);
    *out = v;
    *n = k;
    return TPROF_OK;
}

/* How many enclosing spans a lookup climbs: trainprof.torch nests module ranges at most
 * _MODULE_DEPTH + 1 deep (more only where a module calls itself), so a longer climb is a
 * hostile file, which gets no module rather than a lookup as long as its nesting. */
#define MODULE_CLIMB 64

/* The innermost module span that holds all of [a, b], or NULL. The last span to start at
 * or before a has every span around a among its own enclosing spans (they nest). */
static const char *module_of(const module_span *v, size_t n, uint64_t a, uint64_t b) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].s <= a) lo = mid + 1;
        else hi = mid;
    }
    long i = (long)lo - 1;
    for (int climb = 0; i >= 0 && climb < MODULE_CLIMB; climb++, i = v[i].parent)
        if (v[i].e >= b) return v[i].name;
    return NULL;
}

/* The phase that covers most of (a, b]; PH_OTHER when none does. Spans are sorted by start;
 * phase ranges do not nest into each other in practice, so the scan starts after the last
 * span that ended before a (a linear pass over the intervals in time order). */
static int interval_phase(const phase_span *v, size_t n, size_t *from, uint64_t a, uint64_t b) {
    while (*from < n && v[*from].e <= a && v[*from].s <= a) (*from)++;
    uint64_t cover[TP_MEM_NPHASES] = {0};
    for (size_t i = *from > 8 ? *from - 8 : 0; i < n && v[i].s <= b; i++) {
        uint64_t s = v[i].s > a ? v[i].s : a, e = v[i].e < b ? v[i].e : b;
        if (e > s) cover[v[i].phase] += e - s;
        else if (a == b && v[i].s <= a && v[i].e >= b) cover[v[i].phase] += 1;
    }
    int best = PH_OTHER;
    for (int k = 0; k < PH_OTHER; k++)
        if (cover[k] > (best == PH_OTHER ? 0 : cover[best])) best = k;
    return best;
}

/* Peaks of a set of intervals, combined (the rule of the file's comment). */
typedef struct peak_acc {
    int any, unbounded;
    double exact, at_most, at_least;
    int has_exact, has_at_most;
} peak_acc;

static void acc_add(peak_acc *a, tp_mem_bound b, double v) {
    a->any = 1;
    if (b == TP_MEM_EXACT) {
        if (!a->has_exact || v > a->exact) a->exact = v;
        a->has_exact = 1;
    } else if (b == TP_MEM_AT_MOST) {
        if (!a->has_at_most || v > a->at_most) a->at_most = v;
        a->has_at_most = 1;
    } else {
        a->unbounded = 1;
        if (v > a->at_least) a->at_least = v;
    }
}

static tp_mem_peak acc_peak(const peak_acc *a) {
    tp_mem_peak r = {0};
    if (!a->any) return r;
    r.has = 1;
    double lo = a->has_exact && a->exact > a->at_least ? a->exact : a->at_least;
    if (a->unbounded) {
        r.bytes = lo;
        r.bound = TP_MEM_AT_LEAST;
    } else if (a->has_exact && (!a->has_at_most || a->exact >= a->at_most)) {
        r.bytes = a->exact;
        r.bound = TP_MEM_EXACT;
    } else {
        r.bytes = a->at_most;
        r.bound = TP_MEM_AT_MOST;
    }
    return r;
}

/* The peak of the interval ending at sample i for the current counter cur and the
 * allocator's peak counter mx. */
static tp_mem_peak interval_peak(const sample *v, size_t i, int cur, int mx) {
    tp_mem_peak r = {1, 0, TP_MEM_AT_LEAST};
    const sample *b = &v[i], *a = i ? &v[i - 1] : NULL;
    if (b->has & (1u << mx)) {
        r.bytes = b->v[mx];
        r.bound =
            a && (a->has & (1u << mx)) && a->v[mx] != b->v[mx] ? TP_MEM_EXACT : TP_MEM_AT_MOST;
        return r;
    }
    if (!(b->has & (1u << cur))) {
        r.has = 0;
        return r;
    }
    r.bytes = b->v[cur];
    if (a && (a->has & (1u << cur)) && a->v[cur] > r.bytes) r.bytes = a->v[cur];
    return r;
}

/* The index of the last step that starts at or before ts, or -1. */
static long step_of(const tp_steps *s, uint64_t ts) {
    size_t lo = 0, hi = s->nsteps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->steps[mid].start <= ts) lo = mid + 1;
        else hi = mid;
    }
    return (long)lo - 1;
}

typedef struct step_acc {
    peak_acc alloc, resv, phase[TP_MEM_NPHASES];
    size_t samples;
    int has_start, phase_of_exact;
    double start_alloc, start_resv, best_exact;
    const char *module_of_exact;  /* the module span around the exact peak's interval */
    int has_top;                  /* the step's largest allocated sample: */
    double top_alloc;
    const char *top_module;       /* the module span it was taken in, or NULL */
    int has_dev;
    double dev_peak;
} step_acc;

/* CUPTI's device allocations: per step, the largest sum live, in the steps whose end the
 * complete records reach; and the run's largest. */
static int device_peaks(tp_memory_result *out, const tp_process *p, const tp_steps *s,
                        step_acc *acc, uint64_t complete_until) {
    if (!p->ngmem || !complete_until) return TPROF_OK;
    tp_gpu_mem *m = tp_malloc(p->ngmem * sizeof *m);
    if (!m) return TPROF_ERR_NO_MEMORY;
    size_t n = 0;
    for (size_t i = 0; i < p->ngmem; i++)
        if (p->gmem[i].memory_kind == 3 && p->gmem[i].ts <= complete_until &&
            (!out->has_device || p->gmem[i].device == out->device))
            m[n++] = p->gmem[i];
    for (size_t i = 1; i < n; i++) /* insertion: the records arrive nearly in order */
        for (size_t j = i; j > 0 && m[j].ts < m[j - 1].ts; j--) {
            tp_gpu_mem t = m[j];
            m[j] = m[j - 1];
            m[j - 1] = t;
        }
    int64_t cur = 0, peak = 0;
    size_t k = 0;
    for (size_t st = 0; st < s->nsteps; st++) {
        const tp_step *sp = &s->steps[st];
        for (; k < n && m[k].ts < sp->start; k++) {
            cur = tp_mem_step(cur, m[k].bytes, m[k].op == 1);
            if (cur > peak) peak = cur;
        }
        if (sp->end > complete_until) continue;
        int64_t hi = cur;
        for (; k < n && m[k].ts <= sp->end; k++) {
            cur = tp_mem_step(cur, m[k].bytes, m[k].op == 1);
            if (cur > hi) hi = cur;
        }
        if (hi > peak) peak = hi;
        acc[st].has_dev = 1;
        acc[st].dev_peak = (double)hi;
    }
    for (; k < n; k++) {
        cur = tp_mem_step(cur, m[k].bytes, m[k].op == 1);
        if (cur > peak) peak = cur;
    }
    free(m);
    if (n) {
        out->has_device_peak = 1;
        out->device_peak_bytes = (double)peak;
    }
    return TPROF_OK;
}

/* The intervals of the samples into their steps' accumulators. */
static void intervals_into_steps(const sample *v, size_t n, const tp_steps *s, const phase_span *ph,
                                 size_t nph, const module_span *md, size_t nmd, step_acc *acc) {
    size_t from = 0;
    int after_last = 0;
    for (size_t i = 0; i < n; i++) {
        long st = step_of(s, v[i].ts);
        int phase = i ? interval_phase(ph, nph, &from, v[i - 1].ts, v[i].ts) : PH_OTHER;
        if (st < 0) continue; /* before the first step */
        /* a step runs to the next one's start; the last one takes, after its end, only the
         * sample of its end (taken as its step-end hook returns) */
        if ((size_t)st + 1 == s->nsteps && v[i].ts > s->steps[st].end && after_last++) continue;
        step_acc *a = &acc[st];
        if (!a->samples++ && (v[i].has & 1u << M_ALLOC)) {
            a->has_start = 1;
            a->start_alloc = v[i].v[M_ALLOC];
            a->start_resv = v[i].v[M_RESV];
        }
        tp_mem_peak pa = interval_peak(v, i, M_ALLOC, M_MAX_ALLOC);
        tp_mem_peak pr = interval_peak(v, i, M_RESV, M_MAX_RESV);
        if (pa.has) {
            acc_add(&a->alloc, pa.bound, pa.bytes);
            acc_add(&a->phase[phase], pa.bound, pa.bytes);
            if (pa.bound == TP_MEM_EXACT && (a->phase_of_exact == 0 || pa.bytes > a->best_exact)) {
                a->best_exact = pa.bytes;
                a->phase_of_exact = phase + 1;
                a->module_of_exact = module_of(md, nmd, v[i - 1].ts, v[i].ts);
            }
        }
        if ((v[i].has & 1u << M_ALLOC) && (!a->has_top || v[i].v[M_ALLOC] > a->top_alloc)) {
            a->has_top = 1;
            a->top_alloc = v[i].v[M_ALLOC];
            /* the module that ran as allocated came to this: the one around the interval
             * that ends at the sample (a sample as a module begins is its caller's) */
            a->top_module = module_of(md, nmd, i ? v[i - 1].ts : v[i].ts, v[i].ts);
        }
        if (pr.has) acc_add(&a->resv, pr.bound, pr.bytes);
    }
}

static int steps_result(tp_memory_result *out, const sample *v, size_t n, const tp_steps *s,
                        const phase_span *ph, size_t nph, const module_span *md, size_t nmd,
                        uint64_t complete_until, const tp_process *p) {
    if (!s->nsteps) return TPROF_OK;
    step_acc *acc = tp_calloc(s->nsteps, sizeof *acc);
    if (!acc) return TPROF_ERR_NO_MEMORY;
    intervals_into_steps(v, n, s, ph, nph, md, nmd, acc);
    if (device_peaks(out, p, s, acc, complete_until) != TPROF_OK) {
        free(acc);
        return TPROF_ERR_NO_MEMORY;
    }
    size_t rows = 0;
    for (size_t i = 0; i < s->nsteps; i++) rows += acc[i].samples || acc[i].has_dev;
    out->steps = rows ? tp_calloc(rows, sizeof *out->steps) : NULL;
    if (rows && !out->steps) {
        free(acc);
        return TPROF_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < s->nsteps; i++) {
        const step_acc *a = &acc[i];
        if (!a->samples && !a->has_dev) continue;
        tp_mem_step_result *r = &out->steps[out->nsteps++];
        r->step = (double)s->steps[i].app_step;
        r->warmup = s->steps[i].warmup;
        r->samples = a->samples;
        r->has_start = a->has_start;
        r->start_allocated_bytes = a->start_alloc;
        r->start_reserved_bytes = a->start_resv;
        r->allocated = acc_peak(&a->alloc);
        r->reserved = acc_peak(&a->resv);
        if (r->allocated.has && r->allocated.bound == TP_MEM_EXACT && a->phase_of_exact &&
            a->best_exact == r->allocated.bytes)
        {
            r->peak_phase = k_phases[a->phase_of_exact - 1];
            r->peak_module = a->module_of_exact;
        }
        if (a->has_top && a->top_module) {
            r->top_sample_module = a->top_module;
            r->top_sample_bytes = a->top_alloc;
        }
        for (size_t k = 0; k < TP_MEM_NPHASES; k++) r->phase_allocated[k] = acc_peak(&a->phase[k]);
        r->has_device_peak = a->has_dev;
        r->device_peak_bytes = a->dev_peak;
    }
    free(acc);
    return TPROF_OK;
}

/* Run figures: peaks over every reading, the sampled peak's fragmentation, the counts. */
static void run_figures(tp_memory_result *out, const sample *v, size_t n, const tp_process *p) {
    peak_acc pa = {0}, pr = {0};
    const sample *at = NULL;
    for (size_t i = 0; i < n; i++) {
        const sample *x = &v[i];
        if (x->has & 1u << M_MAX_ALLOC) acc_add(&pa, TP_MEM_EXACT, x->v[M_MAX_ALLOC]);
        else if (x->has & 1u << M_ALLOC) acc_add(&pa, TP_MEM_AT_LEAST, x->v[M_ALLOC]);
        if (x->has & 1u << M_MAX_RESV) acc_add(&pr, TP_MEM_EXACT, x->v[M_MAX_RESV]);
        else if (x->has & 1u << M_RESV) acc_add(&pr, TP_MEM_AT_LEAST, x->v[M_RESV]);
        /* the allocator allocates inside what it reserved: a sample that says otherwise
         * has no fragmentation to give */
        if ((x->has & 1u << M_ALLOC) && (x->has & 1u << M_RESV) &&
            x->v[M_ALLOC] <= x->v[M_RESV] && (!at || x->v[M_ALLOC] > at->v[M_ALLOC]))
            at = x;
        if (x->has & 1u << M_RETRIES) {
            out->has_alloc_retries = 1;
            out->alloc_retries = x->v[M_RETRIES];
        }
        if (x->has & 1u << M_OOMS) {
            out->has_ooms = 1;
            out->ooms = x->v[M_OOMS];
        }
    }
    out->peak_allocated = acc_peak(&pa);
    out->peak_reserved = acc_peak(&pr);
    if (at && at->v[M_RESV] > 0) {
        out->has_fragmentation = 1;
        out->frag_allocated_bytes = at->v[M_ALLOC];
        out->frag_reserved_bytes = at->v[M_RESV];
        out->fragmentation = 1 - at->v[M_ALLOC] / at->v[M_RESV];
        out->frag_at_s = (double)(at->ts - p->first_ts) / 1e9;
        if (at->has & 1u << M_INACTIVE) {
            out->has_inactive_split = 1;
            out->inactive_split_bytes = at->v[M_INACTIVE];
        }
    }
}

/* The leak rule's series: allocated at the first sample of each measured step. */
static void leak_series(tp_memory_result *out) {
    size_t n = 0, rises = 0;
    int mono = 1;
    double prev = 0;
    for (size_t i = 0; i < out->nsteps; i++) {
        const tp_mem_step_result *r = &out->steps[i];
        if (r->warmup || !r->has_start) continue;
        if (n == 0) {
            out->leak_first_bytes = r->start_allocated_bytes;
            out->leak_first_step = r->step;
        } else {
            if (r->start_allocated_bytes > prev) rises++;
            if (r->start_allocated_bytes < prev) mono = 0;
        }
        prev = r->start_allocated_bytes;
        out->leak_last_bytes = prev;
        out->leak_last_step = r->step;
        n++;
    }
    out->leak_steps = n;
    out->leak_rises = rises;
    out->leak_monotonic = mono && n > 0;
}

static int meta_num(const tp_process *p, const char *key, double *v);

static void capacity(tp_memory_result *out, const tp_process *p, const tp_nvml_result *nvml) {
    unsigned d = out->has_device ? out->device : 0;
    char k[48];
    snprintf(k, sizeof k, "cuda.%u.memory_total_bytes", d);
    double c;
    if (meta_num(p, k, &c) && c > 0) {
        out->has_capacity = 1;
        out->capacity_bytes = c;
        out->capacity_source = "cuda";
        return;
    }
    for (size_t j = 0; nvml && j < nvml->ngpus; j++) {
        const tp_nvml_gpu_result *g = &nvml->gpus[j];
        if (g->has_cuda_device && g->cuda_device == (int)d && g->has_mem_total &&
            g->mem_total_bytes > 0 && !g->shared_by_mig) {
            out->has_capacity = 1;
            out->capacity_bytes = g->mem_total_bytes;
            out->capacity_source = "nvml";
            return;
        }
    }
}

static int meta_num(const tp_process *p, const char *key, double *v) {
    const char *s = tp_meta(p, key);
    if (!s || !*s) return 0;
    char *end;
    double x = strtod(s, &end);
    if (end == s || !plausible(x)) return 0;
    *v = x;
    return 1;
}

/* memory.oom.top: a JSON array of {"bytes","stream","frames"}, largest first. */
static int oom_top(tp_mem_oom *o, const char *json) {
    cJSON *a = cJSON_Parse(json);
    if (!cJSON_IsArray(a)) {
        o->top_unreadable = 1;
        cJSON_Delete(a);
        return TPROF_OK;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
        if (o->ntop == TP_MEM_TOP) break;
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(e, "bytes");
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(e, "stream");
        const cJSON *fr = cJSON_GetObjectItemCaseSensitive(e, "frames");
        if (!cJSON_IsNumber(b) || !plausible(b->valuedouble)) continue;
        tp_mem_alloc *t = &o->top[o->ntop];
        t->bytes = b->valuedouble;
        t->stream = cJSON_IsNumber(st) && plausible(st->valuedouble) ? st->valuedouble : 0;
        t->frames = tp_strdup(cJSON_IsString(fr) && fr->valuestring ? fr->valuestring : "");
        if (!t->frames) {
            cJSON_Delete(a);
            return TPROF_ERR_NO_MEMORY;
        }
        o->ntop++;
    }
    cJSON_Delete(a);
    return TPROF_OK;
}

/* Whether s is a file name that the report may print inside a command to paste into a shell
 * and that names a file in the rank file's directory: what the writer makes of a rank file's
 * name (<host>-<pid>.oom-snapshot.pickle; host names are letters, digits, '-' and '.',
 * RFC 1123 §2.1), with '_' and '+'; no separator, no leading '.' or '-' (no "..", no hidden
 * file, no option), nothing the shell would read. */
static int plain_file_name(const char *s) {
    size_t n = strlen(s);
    if (!n || n > 255 || s[0] == '.' || s[0] == '-') return 0;
    return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._+-") == n;
}

static int oom_result(tp_mem_oom *o, const tp_process *p) {
    static const struct {
        const char *key;
        size_t has, val;
    } nums[] = {
        {"memory.oom.request_bytes", offsetof(tp_mem_oom, has_request),
         offsetof(tp_mem_oom, request_bytes)},
        {"memory.oom.free_bytes", offsetof(tp_mem_oom, has_free), offsetof(tp_mem_oom, free_bytes)},
        {"memory.oom.total_bytes", offsetof(tp_mem_oom, has_total),
         offsetof(tp_mem_oom, total_bytes)},
        {"memory.oom.allocated_bytes", offsetof(tp_mem_oom, has_allocated),
         offsetof(tp_mem_oom, allocated_bytes)},
        {"memory.oom.reserved_bytes", offsetof(tp_mem_oom, has_reserved),
         offsetof(tp_mem_oom, reserved_bytes)},
        {"memory.oom.largest_free_block_bytes", offsetof(tp_mem_oom, has_largest_free),
         offsetof(tp_mem_oom, largest_free_block_bytes)},
        {"memory.oom.device", offsetof(tp_mem_oom, has_device), offsetof(tp_mem_oom, device)},
        {"memory.oom.step", offsetof(tp_mem_oom, has_step), offsetof(tp_mem_oom, step)},
        {"memory.oom.count", offsetof(tp_mem_oom, has_count), offsetof(tp_mem_oom, count)}};
    for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
        double v;
        if (!meta_num(p, nums[i].key, &v)) continue;
        *(int *)((char *)o + nums[i].has) = 1;
        *(double *)((char *)o + nums[i].val) = v;
        o->present = 1;
    }
    o->source = tp_meta(p, "memory.oom.source");
    o->phase = tp_meta(p, "memory.oom.phase");
    o->module = tp_meta(p, "memory.oom.module");
    o->history = tp_meta(p, "memory.history_entries") != NULL;
    if (o->module && !*o->module) o->module = NULL;
    o->snapshot = tp_meta(p, "memory.oom.snapshot");
    if (o->snapshot && !*o->snapshot) o->snapshot = NULL;
    if (o->snapshot && !plain_file_name(o->snapshot)) {
        o->snapshot = NULL;
        o->snapshot_unusable = 1;
    }
    o->present |= o->source != NULL;
    for (size_t t = 0; t < p->nthreads && o->present; t++)
        for (size_t i = 0; i < p->threads[t].nmarks; i++) {
            const tp_mark *mk = &p->threads[t].marks[i];
            if (strcmp(mk->name, "cuda.oom") != 0) continue;
            double s = (double)(mk->ts - p->first_ts) / 1e9;
            if (!o->has_time || s < o->at_s) o->at_s = s;
            o->has_time = 1;
        }
    const char *top = tp_meta(p, "memory.oom.top");
    return o->present && top ? oom_top(o, top) : TPROF_OK;
}

/* A failed device allocation seen through CUPTI (source "cuda") that whole steps followed:
 * the program carried on (a caching allocator retries after freeing its cache), so it is no
 * out-of-memory end. */
static void oom_recovered(tp_mem_oom *o, const tp_process *p, const tp_steps *s) {
    if (!o->present || !o->source || strcmp(o->source, "cuda") != 0 || !o->has_time || !s)
        return;
    uint64_t at = p->first_ts + (uint64_t)(o->at_s * 1e9);
    size_t n = 0;
    for (size_t i = 0; i < s->nsteps; i++)
        n += s->steps[i].start > at && s->steps[i].end > s->steps[i].start;
    if (!n) return;
    o->recovered = 1;
    o->steps_after = n;
}

/* The OOM's growth: allocated at the OOM against the start of the step before its step (or
 * of its own step, the first), from that step's first sample. */
static void oom_growth(tp_memory_result *out) {
    tp_mem_oom *o = &out->oom;
    if (!o->present || !o->has_step || !o->has_allocated) return;
    const tp_mem_step_result *prev = NULL, *same = NULL;
    for (size_t i = 0; i < out->nsteps; i++) {
        const tp_mem_step_result *st = &out->steps[i];
        if (!st->has_start) continue;
        if (st->step + 1 == o->step) prev = st;
        else if (st->step == o->step) same = st;
    }
    const tp_mem_step_result *best = prev ? prev : same;
    if (!best) return;
    o->has_growth = 1;
    o->growth_step = best->step;
    o->growth_from_bytes = best->start_allocated_bytes;
    o->growth_bytes = o->allocated_bytes - best->start_allocated_bytes;
}

int tp_memory_compute(tp_memory_result *out, const tp_process *p, const tp_steps *s,
                      const tp_nvml_result *nvml, uint64_t complete_until_ns) {
    memset(out, 0, sizeof *out);
    double d;
    if (meta_num(p, "torch.cuda.device", &d) && d >= 0 && d < 1 << 20) {
        out->has_device = 1;
        out->device = (unsigned)d;
    }
    sample *v = NULL;
    size_t n = 0;
    phase_span *ph = NULL;
    size_t nph = 0, nmd = 0;
    module_span *md = NULL;
    int rc = collect_samples(p, &v, &n);
    if (rc == TPROF_OK) rc = collect_phases(p, s->nsteps ? s->thread : SIZE_MAX, &ph, &nph);
    if (rc == TPROF_OK && s->nsteps) rc = collect_modules(p, s->thread, &md, &nmd);
    if (rc == TPROF_OK) rc = oom_result(&out->oom, p);
    out->samples = n;
    if (rc == TPROF_OK && (n || out->oom.present))
        rc = steps_result(out, v, n, s, ph, nph, md, nmd, complete_until_ns, p);
    if (rc == TPROF_OK) {
        oom_recovered(&out->oom, p, s);
        oom_growth(out);
        run_figures(out, v, n, p);
        leak_series(out);
        capacity(out, p, nvml);
        const tp_mem_peak *pa = &out->peak_allocated, *pr = &out->peak_reserved;
        if (out->has_capacity && pa->has && pr->has) {
            out->has_shares = 1;
            out->peak_allocated_share = pa->bytes / out->capacity_bytes;
            out->peak_reserved_share = pr->bytes / out->capacity_bytes;
            out->headroom_bytes = out->capacity_bytes - pr->bytes;
        }
    }
    out->present = n > 0 || out->oom.present;
    free(v);
    free(ph);
    free(md);
    return rc;
}

void tp_memory_result_free(tp_memory_result *m) {
    free(m->steps);
    m->steps = NULL;
    m->nsteps = 0;
    for (size_t i = 0; i < m->oom.ntop; i++) free(m->oom.top[i].frames);
    m->oom.ntop = 0;
}

/* ------------------------------------------------------------------ document and text */

static void peak_json(cJSON *o, const char *key, const char *bound_key, const tp_mem_peak *pk) {
    if (!pk->has) {
        cJSON_AddNullToObject(o, key);
        return;
    }
    cJSON_AddNumberToObject(o, key, pk->bytes);
    cJSON_AddStringToObject(o, bound_key, tp_mem_bound_name(pk->bound));
}

static cJSON *step_json(const tp_mem_step_result *r) {
    cJSON *e = cJSON_CreateObject();
    if (!e) return NULL;
    cJSON_AddNumberToObject(e, "step", r->step);
    if (r->warmup) cJSON_AddTrueToObject(e, "warmup");
    cJSON_AddNumberToObject(e, "samples", (double)r->samples);
    if (r->has_start) {
        cJSON_AddNumberToObject(e, "start_allocated_bytes", r->start_allocated_bytes);
        cJSON_AddNumberToObject(e, "start_reserved_bytes", r->start_reserved_bytes);
    }
    if (r->samples) {
        peak_json(e, "peak_allocated_bytes", "peak_allocated_bound", &r->allocated);
        peak_json(e, "peak_reserved_bytes", "peak_reserved_bound", &r->reserved);
        if (r->peak_phase) cJSON_AddStringToObject(e, "peak_phase", r->peak_phase);
        if (r->peak_module) cJSON_AddStringToObject(e, "peak_module", r->peak_module);
        if (r->top_sample_module) {
            cJSON *t = cJSON_AddObjectToObject(e, "largest_sample");
            cJSON_AddNumberToObject(t, "allocated_bytes", r->top_sample_bytes);
            cJSON_AddStringToObject(t, "module", r->top_sample_module);
        }
        cJSON *ph = cJSON_AddObjectToObject(e, "phases");
        for (size_t k = 0; k < TP_MEM_NPHASES; k++) {
            const tp_mem_peak *pk = &r->phase_allocated[k];
            if (!pk->has) continue;
            cJSON *x = cJSON_AddObjectToObject(ph, k_phases[k]);
            peak_json(x, "peak_allocated_bytes", "bound", pk);
        }
    }
    if (r->has_device_peak) cJSON_AddNumberToObject(e, "device_peak_bytes", r->device_peak_bytes);
    return e;
}

static void oom_json(cJSON *m, const tp_mem_oom *o) {
    cJSON *j = cJSON_AddObjectToObject(m, "oom");
    if (!j) return;
    if (o->source) cJSON_AddStringToObject(j, "source", o->source);
    if (o->has_time) cJSON_AddNumberToObject(j, "at_s", o->at_s);
    if (o->has_step) cJSON_AddNumberToObject(j, "step", o->step);
    if (o->phase) cJSON_AddStringToObject(j, "phase", o->phase);
    if (o->module) cJSON_AddStringToObject(j, "module", o->module);
    if (o->has_growth) {
        cJSON *g = cJSON_AddObjectToObject(j, "growth");
        if (g) {
            cJSON_AddNumberToObject(g, "since_step", o->growth_step);
            cJSON_AddNumberToObject(g, "from_bytes", o->growth_from_bytes);
            cJSON_AddNumberToObject(g, "bytes", o->growth_bytes);
        }
    }
    if (o->has_device) cJSON_AddNumberToObject(j, "device", o->device);
    const struct {
        const char *k;
        int has;
        double v;
    } f[] = {{"request_bytes", o->has_request, o->request_bytes},
             {"free_bytes", o->has_free, o->free_bytes},
             {"total_bytes", o->has_total, o->total_bytes},
             {"allocated_bytes", o->has_allocated, o->allocated_bytes},
             {"reserved_bytes", o->has_reserved, o->reserved_bytes},
             {"largest_free_block_bytes", o->has_largest_free, o->largest_free_block_bytes},
             {"count", o->has_count, o->count}};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        if (f[i].has) cJSON_AddNumberToObject(j, f[i].k, f[i].v);
    if (o->snapshot) {
        cJSON_AddStringToObject(j, "snapshot", o->snapshot);
        char cmd[600];
        snprintf(cmd, sizeof cmd, "python -m torch.cuda._memory_viz trace_plot %s -o %s.html",
                 o->snapshot, o->snapshot);
        cJSON_AddStringToObject(j, "snapshot_open", cmd);
    }
    cJSON *top = cJSON_AddArrayToObject(j, "top");
    for (size_t i = 0; top && i < o->ntop; i++) {
        cJSON *e = cJSON_CreateObject();
        if (!e) break;
        cJSON_AddNumberToObject(e, "bytes", o->top[i].bytes);
        cJSON_AddNumberToObject(e, "stream", o->top[i].stream);
        cJSON_AddStringToObject(e, "frames", o->top[i].frames);
        tp_json_item_to_array(top, e);
    }
    if (o->top_unreadable) cJSON_AddTrueToObject(j, "top_unreadable");
    if (o->snapshot_unusable) cJSON_AddTrueToObject(j, "snapshot_unusable");
    if (o->recovered) {
        cJSON_AddTrueToObject(j, "recovered");
        cJSON_AddNumberToObject(j, "steps_after", (double)o->steps_after);
    }
}

void tp_memory_json(cJSON *rank, const tp_memory_result *m) {
    if (!m->present) return;
    cJSON *j = cJSON_AddObjectToObject(rank, "memory");
    if (!j) return;
    if (m->has_device) cJSON_AddNumberToObject(j, "device", m->device);
    cJSON_AddNumberToObject(j, "samples", (double)m->samples);
    if (m->has_capacity) {
        cJSON_AddNumberToObject(j, "capacity_bytes", m->capacity_bytes);
        cJSON_AddStringToObject(j, "capacity_source", m->capacity_source);
    }
    peak_json(j, "peak_allocated_bytes", "peak_allocated_bound", &m->peak_allocated);
    peak_json(j, "peak_reserved_bytes", "peak_reserved_bound", &m->peak_reserved);
    if (m->has_shares) {
        cJSON_AddNumberToObject(j, "peak_allocated_share", m->peak_allocated_share);
        cJSON_AddNumberToObject(j, "peak_reserved_share", m->peak_reserved_share);
        cJSON_AddNumberToObject(j, "headroom_bytes", m->headroom_bytes);
    }
    if (m->has_fragmentation) {
        cJSON *fr = cJSON_AddObjectToObject(j, "fragmentation");
        cJSON_AddNumberToObject(fr, "share", m->fragmentation);
        cJSON_AddNumberToObject(fr, "allocated_bytes", m->frag_allocated_bytes);
        cJSON_AddNumberToObject(fr, "reserved_bytes", m->frag_reserved_bytes);
        cJSON_AddNumberToObject(fr, "at_s", m->frag_at_s);
        if (m->has_inactive_split)
            cJSON_AddNumberToObject(fr, "inactive_split_bytes", m->inactive_split_bytes);
    }
    if (m->has_alloc_retries) cJSON_AddNumberToObject(j, "alloc_retries", m->alloc_retries);
    if (m->has_ooms) cJSON_AddNumberToObject(j, "ooms", m->ooms);
    if (m->has_device_peak) cJSON_AddNumberToObject(j, "device_peak_bytes", m->device_peak_bytes);
    cJSON *lk = cJSON_AddObjectToObject(j, "leak_series");
    cJSON_AddNumberToObject(lk, "steps", (double)m->leak_steps);
    cJSON_AddNumberToObject(lk, "rises", (double)m->leak_rises);
    cJSON_AddBoolToObject(lk, "never_down", m->leak_monotonic);
    if (m->leak_steps) {
        cJSON_AddNumberToObject(lk, "first_step", m->leak_first_step);
        cJSON_AddNumberToObject(lk, "last_step", m->leak_last_step);
        cJSON_AddNumberToObject(lk, "growth_bytes", m->leak_last_bytes - m->leak_first_bytes);
    }
    size_t from = m->nsteps > TP_MEM_JSON_STEPS ? m->nsteps - TP_MEM_JSON_STEPS : 0;
    cJSON *st = cJSON_AddArrayToObject(j, "steps");
    for (size_t i = from; st && i < m->nsteps; i++)
        tp_json_item_to_array(st, step_json(&m->steps[i]));
    if (from) cJSON_AddNumberToObject(j, "steps_left_out", (double)from);
    if (m->oom.present) oom_json(j, &m->oom);
}
