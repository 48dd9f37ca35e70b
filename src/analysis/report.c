/*
 * report.c — the report document and its text: run summary, steps per rank, the top ranges by
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
    tp_gpu_section(rs, &out->gpu, p, per_step ? meas : NULL, per_step ? nm : 0, total_step_ns,
                   o->top_n);
    tp_comm_rank_section(rs, &out->comm, p, per_step ? meas : NULL, per_step ? nm : 0);
    process_section(rs, p);
    tp_energy_section(rs, &out->nvml, run, p, meas, nm);
    tp_memory_capacity(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(rs, "gpu"),
                                                        "devices"),
                       &out->gpu, &out->nvml, p);
    tp_breakdown_section(rs, &out->breakdown, p, &s, o->data_names, o->ndata_names);

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
        cJSON_AddStringToObject(dl, "where", s.source == TP_STEPS_NONE ? "all threads"
                                             : data_on_step_thread      ? "step thread"
                                                                        : "other threads");
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
        cJSON_AddItemToArray(procs, jp);
    }
    cJSON *errs = cJSON_AddArrayToObject(rep, "unreadable_files");
    for (size_t i = 0; i < run->nerrors; i++)
        cJSON_AddItemToArray(errs, cJSON_CreateString(run->errors[i]));

    cJSON *ranks = cJSON_AddArrayToObject(rep, "ranks");
    tp_run_results res = {0};
    res.ranks = nranks ? calloc((size_t)nranks, sizeof *res.ranks) : NULL;
    if (nranks && !res.ranks) {
        cJSON_Delete(rep);
        return NULL;
    }
    /* ranks in rank order */
    for (int want = 0, left = nranks; left > 0 && want < 1 << 20; want++) {
        for (size_t i = 0; i < run->nprocs; i++) {
            const tp_process *p = &run->procs[i];
            if (p->role != TP_ROLE_RANK || p->rank != want) continue;
            cJSON_AddItemToArray(ranks, rank_section(run, p, o, &res.ranks[res.nranks++]));
            left--;
        }
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
    tp_run_results_free(&res);
    return rep;
}

/* ------------------------------------------------------------------ text rendering */


/* s as shown in the report (text.h): valid UTF-8, control characters as '?', so a file or
 * thread name cannot disturb the terminal; at most 255 bytes, cut between characters with a
 * mark. Uses one of two static buffers. */
static const char *printable(const char *s) {
    static char bufs[2][256];
    static int which;
    return tp_text_fit(bufs[which ^= 1], sizeof bufs[0], s, -1);
}

static const char *basename_of(const char *p) {
    const char *s = strrchr(p, '/');
    return printable(s ? s + 1 : p);
}

/* Names are printed in a fixed-width column: long ones are cut between characters and end
 * with TP_TEXT_CUT (text.h). */
static void put_name(FILE *f, const char *s, int width) { tp_text_put(f, s, width, width); }

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
    if (tp_jnum(g, "records_clipped") > 0)
        fprintf(f, "  note: %.0f GPU %s clipped to %s stream's order (%.3f ms of recorded time "
                   "removed): a record cannot end after the next one on its stream begins, nor "
                   "after a synchronisation of its stream returned\n",
                tp_jnum(g, "records_clipped"),
                tp_jnum(g, "records_clipped") == 1 ? "record" : "records",
                tp_jnum(g, "records_clipped") == 1 ? "its" : "their", tp_jnum(g, "records_clipped_ms"));
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
    if (tp_jobj(nv, "sampled_by")) {
        if (!strcmp(tp_jstr(nv, "sampled_by"), "node sampler"))
            fprintf(f, "  NVML sampled by trainprof run's node sampler (pid %.0f)",
                    tp_jnum(nv, "sampler_pid"));
        else
            fprintf(f, "  NVML sampled by %s (pid %.0f)", tp_jstr(nv, "sampled_by"),
                    tp_jnum(nv, "sampler_pid"));
        fprintf(f, "%s\n", cJSON_IsTrue(tp_jobj(nv, "shared_with_other_ranks"))
                               ? ": this rank's GPU is not known, every GPU of the host is shown"
                               : "");
    }
    if (tp_jobj(nv, "rank_gpus_not_sampled")) {
        fputs("  NVML: this rank's GPU", f);
        const cJSON *u;
        int first = 1;
        cJSON_ArrayForEach(u, tp_jobj(nv, "rank_gpus_not_sampled")) {
            fputs(first ? " " : ", ", f);
            tp_fput_printable(f, u->valuestring);
            first = 0;
        }
        fputs(" was not among the GPUs sampled: no energy or power for it\n", f);
    }
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
            if (!strcmp(tp_jstr(g, "energy_method"), "integrated_power"))
                fprintf(f, ", integrated from %s samples every %.0f ms (no energy counter)",
                        tp_jstr(g, "energy_series"), tp_jnum(g, "sample_interval_ms"));
        } else {
            fputs(" no energy (", f);
            tp_fput_printable(f, tp_jstr(g, "energy_unavailable"));
            fputc(')', f);
        }
        if (tp_jobj(g, "power_max_w"))
            fprintf(f, "; power samples %.1f W mean, %.1f W max", tp_jnum(g, "power_mean_w"),
                    tp_jnum(g, "power_max_w"));
        if (tp_jobj(g, "power_limit_w")) fprintf(f, "; limit %.0f W", tp_jnum(g, "power_limit_w"));
        fputc('\n', f);
        if (cJSON_IsTrue(tp_jobj(g, "shared_by_mig_instances"))) {
            fputs("    MIG mode", f);
            if (tp_jobj(g, "mig_device")) {
                fputs(" (this rank's MIG device ", f);
                tp_fput_printable(f, tp_jstr(g, "mig_device"));
                fputc(')', f);
            }
            fputs(": energy and power are the whole GPU's, shared by its MIG instances, not "
                  "this rank's own\n", f);
        }
        if (cJSON_IsTrue(tp_jobj(g, "energy_approximate")))
            fprintf(f, "    energy per step approximate: the steps are shorter than the %s (about "
                       "%.0f ms), so it is the span's energy shared out, not each step's\n",
                    !strcmp(tp_jstr(g, "energy_method"), "counter")
                        ? "energy counter's update period"
                        : "interval of the power readings",
                    tp_jnum(g, "energy_resolution_ms"));
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

static int write_text(const cJSON *rep, FILE *f, int color) {
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
    if (tp_jnum(run, "records_lost_to_write_errors") > 0)
        fprintf(f, "%s  warning: %.0f records lost to write errors (%s: %s): the rank file "
                   "could not take them; the figures below lack them%s\n",
                Y, tp_jnum(run, "records_lost_to_write_errors"),
                printable(tp_jstr(run, "first_write_error_errno")),
                printable(tp_jstr(run, "first_write_error")), N);
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
        /* padded by columns, not bytes: a host name may hold any character */
        fputs("  ", f);
        tp_text_put(f, tp_jstr(p, "label"), -1, 18);
        fputc(' ', f);
        tp_text_put(f, hp, -1, 24);
        fprintf(f, " %7.0f %9.0f %8.0f %7.2f s  %s%s\n", tp_jnum(p, "threads"), tp_jnum(p, "events"), tp_jnum(p, "events_dropped"),
                tp_jnum(p, "duration_s"), basename_of(tp_jstr(p, "file")),
                cJSON_IsTrue(tp_jobj(p, "rank_implied")) ? "  (rank implied: no launcher rank)" : "");
        const cJSON *d;
        cJSON_ArrayForEach(d, tp_jobj(p, "damage"))
            fprintf(f, "%s    damage in %s: %s%s\n", Y, basename_of(tp_jstr(p, "file")),
                    printable(d->valuestring), N);
        const cJSON *we = tp_jobj(p, "write_errors");
        if (we)
            fprintf(f, "%s    %.0f records lost to write errors (%s: %s) in %.0f chunk(s)%s\n", Y,
                    tp_jnum(we, "records_lost"), printable(tp_jstr(we, "first_errno")),
                    printable(tp_jstr(we, "first_error")), tp_jnum(we, "chunks_lost"), N);
        if (tp_jnum(p, "rank_file_reopened") > 0)
            fprintf(f, "    the program closed the rank file's descriptor: reopened %.0f time(s)\n",
                    tp_jnum(p, "rank_file_reopened"));
        if (tp_jnum(p, "unmatched_pops") > 0) {
            fprintf(f, "    %.0f range pop(s) with no open range on their thread (ignored):",
                    tp_jnum(p, "unmatched_pops"));
            const cJSON *t;
            int first = 1;
            cJSON_ArrayForEach(t, tp_jobj(p, "unmatched_pops_by_thread")) {
                fprintf(f, "%s %.0f on ", first ? "" : ",", tp_jnum(t, "count"));
                if (tp_jobj(t, "thread")) {
                    fputs("thread \"", f);
                    tp_fput_printable(f, tp_jstr(t, "thread"));
                    fputs("\" ", f);
                } else {
                    fputs("an unnamed thread ", f);
                }
                fprintf(f, "(tid %.0f, first at %.3f s)", tp_jnum(t, "tid"), tp_jnum(t, "first_s"));
                first = 0;
            }
            if (tp_jnum(p, "unmatched_pops_after_drops") > 0)
                fprintf(f, "; %.0f after dropped events: their push was likely dropped by the "
                           "thread's full ring",
                        tp_jnum(p, "unmatched_pops_after_drops"));
            fputc('\n', f);
        }
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
            const cJSON *mx = tp_jobj(s, "missing");
            if (mx) {
                fprintf(f, "%s  missing: %.0f step(s) (", Y, tp_jnum(mx, "count"));
                const cJSON *m;
                int first = 1;
                cJSON_ArrayForEach(m, tp_jobj(mx, "ranges")) {
                    double a = cJSON_GetArrayItem(m, 0)->valuedouble;
                    double b = cJSON_GetArrayItem(m, 1)->valuedouble;
                    fprintf(f, "%s%.0f", first ? "" : ", ", a);
                    if (b != a) fprintf(f, "-%.0f", b);
                    first = 0;
                }
                if (tp_jnum(mx, "ranges_left_out") > 0) fputs(", ...", f);
                fprintf(f, "): %s%s\n", tp_jstr(mx, "flag"), N);
            }
            const cJSON *dx = tp_jobj(s, "dropped_events");
            if (dx) {
                fprintf(f, "%s  flagged: %.0f of %.0f measured steps built on dropped events (%.0f "
                           "dropped by full rings inside them",
                        Y, tp_jnum(dx, "steps_touched"), tp_jnum(s, "measured"),
                        tp_jnum(dx, "events_in_steps"));
                if (tp_jnum(dx, "events_unplaced") > 0)
                    fprintf(f, ", %.0f at unknown times", tp_jnum(dx, "events_unplaced"));
                fprintf(f, "): %s%s\n", tp_jstr(dx, "flag"), N);
            }
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
        if (pr) {
            /* a CPU figure past its bound is not printed here: the flagged lines say why */
            const cJSON *inv = tp_jobj(pr, "invalid");
            fputs("  process: CPU ", f);
            if (!tp_jhas(pr, "cpu_percent_max") && !tp_jobj(inv, "cpu_percent_max")) {
                fputs("not sampled (a rate needs 100 ms); ", f);
            } else {
                if (tp_jhas(pr, "cpu_percent_mean")) fprintf(f, "%.0f %% mean, ", tp_jnum(pr, "cpu_percent_mean"));
                else fputs("mean flagged, ", f);
                if (tp_jhas(pr, "cpu_percent_max")) fprintf(f, "%.0f %% max; ", tp_jnum(pr, "cpu_percent_max"));
                else fputs("max flagged; ", f);
            }
            fprintf(f, "RSS peak %.1f MiB; %.0f threads; %.0f context switches/s (%.0f samples)\n",
                    tp_jnum(pr, "rss_peak_bytes") / 1048576.0, tp_jnum(pr, "threads_max"),
                    tp_jnum(pr, "ctx_switches_per_s_mean"), tp_jnum(pr, "samples"));
        }
        tp_figures_text(f, r, Y, N);
        nvml_text(f, tp_jobj(r, "nvml"));
        gpu_text(f, tp_jobj(r, "gpu"), B, N);
        tp_comm_rank_text(f, tp_jobj(r, "communication"));
        tp_breakdown_text(f, tp_jobj(r, "breakdown"));
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
                /* "domain::name", whole: the column cut alone shortens it */
                const char *dom = tp_jstr(row, "domain"), *name = tp_jstr(row, "name");
                size_t nl = strlen(dom) + strlen(name) + 3;
                char *nm = malloc(nl);
                if (nm) snprintf(nm, nl, "%s%s%s", dom, *dom ? "::" : "", name);
                fputs("  ", f);
                put_name(f, nm ? nm : name, 40);
                free(nm);
                fprintf(f, " %9.2f %12.3f %6.1f%% %12.3f\n", tp_jnum(row, "count_per_unit"),
                        tp_jnum(row, "inclusive_ms"),
                        100 * tp_jnum(row, ti == 0 ? "inclusive_share" : "exclusive_share"),
                        tp_jnum(row, "exclusive_ms"));
            }
        }
    }
    tp_comm_run_text(f, tp_jobj(rep, "communication"), B, N);
    tp_diagnose_text(f, rep, B, N, Y); /* clocks, throughput, stragglers */
    const cJSON *tm = tp_jobj(rep, "timers");
    if (tm) {
        fprintf(f, "\n%stimers%s (Megatron-LM format; ms per %s)\n", B, N,
                !strcmp(tp_jstr(tm, "per"), "step") ? "measured step" : "run, in total");
        if (tp_jobj(tm, "megatron_minmax")) fprintf(f, "%s\n", tp_jstr(tm, "megatron_minmax"));
        if (tp_jobj(tm, "megatron_all")) fprintf(f, "%s\n", tp_jstr(tm, "megatron_all"));
    }
    tp_ended_text(f, rep, B, N, Y);
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

/* The text is rendered in memory and written through tp_utf8_write, so whatever a section
 * prints (names from the program, text of other tools), the report is valid UTF-8; the
 * sections themselves cut names between characters (text.h). */
int tp_report_write_text(const cJSON *rep, FILE *f, int color) {
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    if (!mf) return write_text(rep, f, color); /* no memory: unguarded, still cut right */
    int rc = write_text(rep, mf, color);
    if (fclose(mf) != 0 && rc == TPROF_OK) rc = TPROF_ERR_NO_MEMORY;
    if (buf && tp_utf8_write(f, buf, len) != 0) rc = TPROF_ERR_IO;
    free(buf);
    fflush(f);
    if (ferror(f)) rc = TPROF_ERR_IO;
    return rc;
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
