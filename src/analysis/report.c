/*
 * report.c — the report document and its text: run summary, steps per rank, the top ranges by
 * inclusive and exclusive time per step, and the share of data loading.
 *
 * Everything is computed into a cJSON document first (report.json), and the text report is
 * rendered from that document (report_text.c). Range times are counted only inside measured (non-warm-up)
 * steps, clipped to each step's window, so a range that straddles a step boundary is
 * split correctly and threads other than the step thread (a loader thread) count too.
 * Exclusive time inside the window is prorated from the range's whole exclusive share.
 */
#define _GNU_SOURCE
#include "analysis/report.h"
#include "analysis/stats.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "analysis/breakdown.h"
#include "analysis/comm.h"
#include "analysis/diagnose.h"
#include "analysis/ended.h"
#include "analysis/energy.h"
#include "analysis/figures.h"
#include "analysis/gpu.h"
#include "analysis/steps.h"
#include "analysis/text.h"
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
    tp_diagnose_opts_init(o); /* throughput inputs and diagnosis thresholds */
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

/* Megatron's timers of the rank (ranges of category "timers" in the "trainprof" domain) into
 * *out, and the rank's "timers" from it. */
static void timers_section(cJSON *rs, tp_timers_result *out, const tp_process *p,
                           const tp_step *meas, size_t nm) {
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
    out->rows = malloc(n * sizeof *out->rows);
    if (!out->rows) {
        free(v);
        return;
    }
    out->present = 1;
    out->per_step = meas != NULL;
    out->nrows = n;
    for (size_t i = 0; i < n; i++)
        out->rows[i] = (tp_timer_row){v[i].name, v[i].ns / 1e6 / (meas && nm ? (double)nm : 1.0),
                                      (double)v[i].count};
    free(v);
    cJSON *jt = cJSON_AddObjectToObject(rs, "timers");
    cJSON_AddStringToObject(jt, "per", out->per_step ? "step" : "run");
    cJSON *rows = cJSON_AddArrayToObject(jt, "rows");
    for (size_t i = 0; i < n; i++) {
        cJSON *row = cJSON_CreateObject();
        cJSON_AddStringToObject(row, "name", out->rows[i].name);
        cJSON_AddNumberToObject(row, "ms", out->rows[i].ms);
        cJSON_AddNumberToObject(row, "count", out->rows[i].count);
        cJSON_AddItemToArray(rows, row);
    }
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

/* The measured steps whose figures miss dropped events: those overlapping a window in which
 * a thread's ring dropped events (model.h, tp_drop_window), and all of them when events were
 * dropped at unknown times. Adds "dropped_events" to the steps section when any is. */
static void drops_on_steps(cJSON *js, const tp_process *p, const tp_step *meas, size_t nm) {
    uint8_t *hit = calloc(nm, 1);
    if (!hit) return;
    uint64_t events = 0, touched = 0;
    for (size_t i = 0; i < p->ndrops; i++) {
        const tp_drop_window *d = &p->drops[i];
        size_t lo = 0, hi = nm; /* the first step ending after the window's start */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (meas[mid].end <= d->from) lo = mid + 1;
            else hi = mid;
        }
        int any = 0;
        for (size_t k = lo; k < nm && meas[k].start < d->to; k++) {
            touched += !hit[k];
            hit[k] = 1;
            any = 1;
        }
        if (any) events += d->count;
    }
    free(hit);
    /* records of chunks the writer could not write (write_errors.*, docs/format.md) are lost
     * at times the file does not hold: like drops at unknown times, any step may miss them */
    const char *wl = tp_meta(p, "write_errors.records");
    uint64_t lost = wl ? strtoull(wl, NULL, 10) : 0;
    uint64_t unplaced = p->drops_unplaced + lost;
    if (!touched && !unplaced) return;
    cJSON *x = cJSON_AddObjectToObject(js, "dropped_events");
    cJSON_AddNumberToObject(x, "steps_touched", (double)(unplaced ? nm : touched));
    cJSON_AddNumberToObject(x, "events_in_steps", (double)events);
    if (unplaced) cJSON_AddNumberToObject(x, "events_unplaced", (double)unplaced);
    if (lost) cJSON_AddNumberToObject(x, "records_lost_to_write_errors", (double)lost);
    cJSON_AddStringToObject(x, "flag", lost ? "records were lost to write errors at times not "
                                              "known: any step's figures may miss them"
                                       : p->drops_unplaced
                                           ? "events were dropped at times not known: any step's "
                                             "figures may miss them"
                                           : "the step statistics, breakdown and ranges of these "
                                             "steps miss the events dropped in them");
}

/* The rank's section of the document; its figures also into *out (results.h), which the
 * run-level analyses and the rules read. */
static cJSON *rank_section(const tp_run *run, const tp_process *p, const tp_report_opts *o,
                           tp_rank_result *out) {
    memset(out, 0, sizeof *out);
    out->rank = p->rank;
    out->host = p->hdr.host;
    cJSON *rs = cJSON_CreateObject();
    char label[64];
    tp_process_label(p, label, sizeof label);
    cJSON_AddNumberToObject(rs, "rank", p->rank);
    cJSON_AddStringToObject(rs, "label", label);
    cJSON_AddStringToObject(rs, "host", p->hdr.host);
    cJSON_AddNumberToObject(rs, "pid", p->hdr.pid);

    tp_steps s;
    if (tp_find_steps(p, o->step_name, o->warmup, &s) != TPROF_OK) return rs;
    out->steps.present = 1;
    out->steps.count = s.nsteps;
    out->steps.warmup = s.nwarmup;
    out->steps.measured = s.nsteps - s.nwarmup;
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
    if (s.nmissing_steps) {
        /* ranges, not numbers: a forged file's gap could name billions */
        cJSON *mx = cJSON_AddObjectToObject(js, "missing");
        cJSON_AddNumberToObject(mx, "count", (double)s.nmissing_steps);
        cJSON *mr = cJSON_AddArrayToObject(mx, "ranges");
        for (size_t i = 0; i < s.nmissing && i < 100; i++) {
            const double v[2] = {(double)s.missing[i].s, (double)s.missing[i].e};
            cJSON_AddItemToArray(mr, cJSON_CreateDoubleArray(v, 2));
        }
        if (s.nmissing > 100)
            cJSON_AddNumberToObject(mx, "ranges_left_out", (double)(s.nmissing - 100));
        cJSON_AddStringToObject(mx, "flag", "the thread's full ring dropped their begin or end: "
                                            "the step statistics do not cover them, and they are "
                                            "likely the slowest (the ring fills when a step "
                                            "records most)");
    }
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
            out->steps.mean_ms = ms(total_step_ns) / (double)nm;
            cJSON_AddNumberToObject(js, "mean_ms", out->steps.mean_ms);
            cJSON_AddNumberToObject(js, "p50_ms", ms(tp_pct_u64(d, nm, 0.5)));
            cJSON_AddNumberToObject(js, "p90_ms", ms(tp_pct_u64(d, nm, 0.9)));
            cJSON_AddNumberToObject(js, "min_ms", ms(d[0]));
            cJSON_AddNumberToObject(js, "max_ms", ms(d[nm - 1]));
            cJSON_AddNumberToObject(js, "first_ms", ms(meas[0].start - p->first_ts));
            free(d);
        }
        drops_on_steps(js, p, meas, nm);
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

    timers_section(rs, &out->timers, p, per_step ? meas : NULL, nm);
    /* the GPU's devices take their capacity from NVML: both computed before either is written */
    tp_gpu_compute(&out->gpu, p, per_step ? meas : NULL, per_step ? nm : 0, total_step_ns, o->top_n);
    tp_nvml_compute(&out->nvml, run, p, meas, nm);
    tp_memory_capacity(&out->gpu, &out->nvml, p);
    tp_gpu_json(rs, &out->gpu);
    tp_comm_rank_section(rs, &out->comm, p, per_step ? meas : NULL, per_step ? nm : 0);
    process_section(rs, p);
    tp_nvml_json(rs, &out->nvml);
    tp_breakdown_compute(&out->breakdown, p, &s, o->data_names, o->ndata_names);
    tp_breakdown_json(rs, &out->breakdown);

    cJSON *dl = cJSON_AddObjectToObject(rs, "data_loading");
    cJSON *names = cJSON_AddArrayToObject(dl, "names");
    for (size_t i = 0; i < o->ndata_names; i++)
        cJSON_AddItemToArray(names, cJSON_CreateString(o->data_names[i]));
    out->data.found = ndv > 0;
    out->data.per_step = per_step;
    cJSON_AddBoolToObject(dl, "found", ndv > 0);
    if (ndv) {
        uint64_t u = tp_steps_union(dv, ndv, per_step ? meas : NULL, nm);
        out->data.ms = ms(u) / per;
        out->data.share = denom > 0 ? (double)u / denom : 0;
        out->data.where = s.source == TP_STEPS_NONE ? "all threads"
                          : data_on_step_thread      ? "step thread"
                                                     : "other threads";
        cJSON_AddStringToObject(dl, "where", out->data.where);
        cJSON_AddNumberToObject(dl, per_step ? "ms_per_step" : "ms_total", out->data.ms);
        cJSON_AddNumberToObject(dl, "share", out->data.share);
    }
    free(dv);
    tp_steps_free(&s);
    /* before any rule reads the figures: the impossible ones leave the section and the results */
    tp_figures_check_rank(rs, p);
    tp_figures_check_results(out);
    return rs;
}

/* Megatron's timers tables across ranks, from each rank's timers (res): the same text
 * Megatron prints, with ms per measured step as the unit (normalizer 1 on per-step values). */
static void cross_rank_timers(cJSON *rep, const tp_run_results *res) {
    const char **names = NULL;
    size_t n = 0;
    int world = 0;
    for (size_t ri = 0; ri < res->nranks; ri++) {
        const tp_rank_result *r = &res->ranks[ri];
        if (!r->timers.present) continue;
        if (r->rank + 1 > world) world = r->rank + 1;
        for (size_t k = 0; k < r->timers.nrows; k++) {
            const char *nm = r->timers.rows[k].name;
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
    int per_step = 1;
    for (size_t ri = 0; ri < res->nranks; ri++) {
        const tp_rank_result *r = &res->ranks[ri];
        if (!r->timers.present) continue;
        per_step = r->timers.per_step;
        for (size_t k = 0; k < r->timers.nrows; k++)
            for (size_t i = 0; i < n; i++)
                if (!strcmp(names[i], r->timers.rows[k].name))
                    m[(size_t)r->rank * n + i] = r->timers.rows[k].ms / 1e3;
    }
    cJSON *jt = cJSON_AddObjectToObject(rep, "timers");
    cJSON_AddStringToObject(jt, "per", per_step ? "step" : "run");
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

/* The document's "run": its span, events and drops over every file; the ranks counted into
 * *nranks. */
static void run_summary(cJSON *rep, const tp_run *run, int *nranks_out) {
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
    *nranks_out = nranks;
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
    /* records the writer could not write (disk full, quota, file size limit, I/O error):
     * counted in the file by the writer (metadata write_errors.*, docs/format.md) */
    double wlost = 0;
    const tp_process *wfirst = NULL;
    for (size_t i = 0; i < run->nprocs; i++) {
        const char *v = tp_meta(&run->procs[i], "write_errors.records");
        if (!v) continue;
        wlost += atof(v);
        if (!wfirst) wfirst = &run->procs[i];
    }
    if (wfirst) {
        cJSON_AddNumberToObject(jr, "records_lost_to_write_errors", wlost);
        const char *en = tp_meta(wfirst, "write_errors.first_errno");
        const char *et = tp_meta(wfirst, "write_errors.first_error");
        cJSON_AddStringToObject(jr, "first_write_error_errno", en ? en : "");
        cJSON_AddStringToObject(jr, "first_write_error", et ? et : "");
    }
}

/* "capabilities": what each source reported in the first file that names it, else why it
 * is absent (known_caps). */
static void capabilities(cJSON *rep, const tp_run *run) {
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
}

/* One process's entry of "processes": identity, counts, write errors, unmatched pops and
 * damage. */
static cJSON *process_json(const tp_process *p) {
    cJSON *jp = cJSON_CreateObject();
    if (!jp) return NULL;
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
    const char *wr = tp_meta(p, "write_errors.records");
    if (wr) {
        cJSON *we = cJSON_AddObjectToObject(jp, "write_errors");
        const char *v;
        cJSON_AddNumberToObject(we, "records_lost", atof(wr));
        cJSON_AddNumberToObject(we, "chunks_lost",
                                (v = tp_meta(p, "write_errors.chunks")) ? atof(v) : 0);
        cJSON_AddNumberToObject(we, "bytes_lost",
                                (v = tp_meta(p, "write_errors.bytes")) ? atof(v) : 0);
        v = tp_meta(p, "write_errors.first_errno");
        cJSON_AddStringToObject(we, "first_errno", v ? v : "");
        v = tp_meta(p, "write_errors.first_error");
        cJSON_AddStringToObject(we, "first_error", v ? v : "");
    }
    const char *ro = tp_meta(p, "rank_file.reopened");
    if (ro) cJSON_AddNumberToObject(jp, "rank_file_reopened", atof(ro));
    if (p->unknown_ends) cJSON_AddNumberToObject(jp, "unmatched_range_ends", (double)p->unknown_ends);
    uint64_t pops = 0, pops_dropped = 0;
    for (size_t k = 0; k < p->nthreads; k++) {
        pops += p->threads[k].unmatched_pops;
        pops_dropped += p->threads[k].unmatched_pops_after_drops;
    }
    if (pops) {
        /* NVTX keeps a stack per thread (and domain), so a pop with nothing open is a
         * mistake of one thread: say which; or, after the thread's full ring dropped
         * events, most likely a push that was dropped: say how many */
        cJSON_AddNumberToObject(jp, "unmatched_pops", (double)pops);
        if (pops_dropped)
            cJSON_AddNumberToObject(jp, "unmatched_pops_after_drops", (double)pops_dropped);
        cJSON *pt = cJSON_AddArrayToObject(jp, "unmatched_pops_by_thread");
        for (size_t k = 0; k < p->nthreads; k++) {
            const tp_thread *t = &p->threads[k];
            if (!t->unmatched_pops) continue;
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "tid", t->os_tid);
            if (t->name) cJSON_AddStringToObject(e, "thread", t->name);
            cJSON_AddNumberToObject(e, "count", (double)t->unmatched_pops);
            if (t->unmatched_pops_after_drops)
                cJSON_AddNumberToObject(e, "after_drops",
                                        (double)t->unmatched_pops_after_drops);
            cJSON_AddNumberToObject(e, "first_s",
                                    t->first_unmatched_pop_ts > p->hdr.start_mono_ns
                                        ? (double)(t->first_unmatched_pop_ts - p->hdr.start_mono_ns) / 1e9
                                        : 0);
            cJSON_AddItemToArray(pt, e);
        }
    }
    cJSON *dmg = cJSON_AddArrayToObject(jp, "damage");
    for (size_t k = 0; k < p->ndamage; k++)
        cJSON_AddItemToArray(dmg, cJSON_CreateString(p->damage[k]));
    return jp;
}

/* "ranks": each rank's section, in rank order, and its results into res->ranks (nranks of
 * them). Returns TPROF_OK, or TPROF_ERR_NO_MEMORY. */
static int rank_sections(cJSON *rep, const tp_run *run, const tp_report_opts *o, int nranks,
                         tp_run_results *res) {
    cJSON *ranks = cJSON_AddArrayToObject(rep, "ranks");
    res->ranks = nranks ? calloc((size_t)nranks, sizeof *res->ranks) : NULL;
    if (nranks && !res->ranks) return TPROF_ERR_NO_MEMORY;
    for (int want = 0, left = nranks; left > 0 && want < 1 << 20; want++) {
        for (size_t i = 0; i < run->nprocs; i++) {
            const tp_process *p = &run->procs[i];
            if (p->role != TP_ROLE_RANK || p->rank != want) continue;
            cJSON_AddItemToArray(ranks, rank_section(run, p, o, &res->ranks[res->nranks++]));
            left--;
        }
    }
    return TPROF_OK;
}

int tp_report_make(const tp_run *run, const tp_report_opts *o, tp_report *out) {
    memset(out, 0, sizeof *out);
    tp_report_opts def;
    if (!o) {
        tp_report_opts_init(&def);
        o = &def;
    }
    cJSON *rep = cJSON_CreateObject();
    if (!rep) return TPROF_ERR_NO_MEMORY;
    cJSON_AddStringToObject(rep, "schema", "trainprof.report");
    cJSON_AddNumberToObject(rep, "schema_version", TP_REPORT_SCHEMA_VERSION);
    cJSON_AddStringToObject(rep, "trainprof_version", tprof_version());
    int nranks = 0;
    run_summary(rep, run, &nranks);
    capabilities(rep, run);
    cJSON *procs = cJSON_AddArrayToObject(rep, "processes");
    for (size_t i = 0; i < run->nprocs; i++)
        cJSON_AddItemToArray(procs, process_json(&run->procs[i]));
    cJSON *errs = cJSON_AddArrayToObject(rep, "unreadable_files");
    for (size_t i = 0; i < run->nerrors; i++)
        cJSON_AddItemToArray(errs, cJSON_CreateString(run->errors[i]));
    tp_run_results res = {0};
    if (rank_sections(rep, run, o, nranks, &res) != TPROF_OK) {
        cJSON_Delete(rep);
        return TPROF_ERR_NO_MEMORY;
    }
    cross_rank_timers(rep, &res);
    /* findings: rules that name a problem, with the figures that show it (severity
     * "warning" or "critical"); each analysis appends its own */
    cJSON *findings = cJSON_AddArrayToObject(rep, "findings");
    cJSON *comm_finding = tp_comm_run_section(rep, run, &res, findings, o->comm_warn_share,
                                              o->comm_crit_share);
    /* clocks, throughput/MFU, stragglers and the diagnosis rules */
    tp_diagnose_run(rep, run, &res, findings, comm_finding, o);
    tp_ended_section(rep, findings, run, &res.ended); /* ranks killed by a signal or cut short */
    /* options and metadata reach the document as given (a --step-name, a model spec, a
     * host name): report.json, and the text rendered from it, stay valid UTF-8 */
    tp_json_clean_utf8(rep);
    out->doc = rep;
    out->res = res;
    out->run = run;
    return TPROF_OK;
}

void tp_report_free(tp_report *r) {
    if (!r) return;
    cJSON_Delete(r->doc);
    tp_run_results_free(&r->res);
    memset(r, 0, sizeof *r);
}

cJSON *tp_report_build(const tp_run *run, const tp_report_opts *o) {
    tp_report r;
    if (tp_report_make(run, o, &r) != TPROF_OK) return NULL;
    cJSON *doc = r.doc;
    r.doc = NULL;
    tp_report_free(&r);
    return doc;
}
