/*
 * report_ranges.c — a rank's range tables and data loading (report_ranges.h): from the
 * whole model, or streamed from its file (model.h, tp_range_stream) for a file whose ranges
 * are too many to hold (report.c, STREAM_SECTION_RANGES).
 */
#define _GNU_SOURCE
#include "analysis/report_ranges.h"
#include "analysis/alloc.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "trainprof.h"

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
typedef struct tp_aggtab {
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
        size_t mask = t->icap - 1;
        for (size_t h = agg_hash(name, domain, mask); t->index[h]; h = (h + 1) & mask) {
            agg *a = &t->v[t->index[h] - 1];
            if (a->name == name && a->domain == domain) return a;
        }
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        agg *nv = tp_realloc(t->v, cap * sizeof *nv);
        if (!nv) return NULL;
        t->v = nv;
        t->cap = cap;
    }
    if ((t->n + 1) * 2 > t->icap) { /* rebuild the index at twice the size */
        size_t icap = t->icap ? t->icap * 2 : 128;
        uint32_t *ni = tp_calloc(icap, sizeof *ni);
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

/* Rows of equal time by name, then domain: a total order, so the tables do not depend on the
 * order in which the rows were made (a streamed read makes them in another). */
static int by_name(const agg *x, const agg *y) {
    int c = strcmp(x->name, y->name);
    return c ? c : x->domain < y->domain ? -1 : x->domain > y->domain;
}

static int by_incl(const void *a, const void *b) {
    const agg *x = a, *y = b;
    if (x->incl_ns != y->incl_ns) return x->incl_ns < y->incl_ns ? 1 : -1;
    return by_name(x, y);
}
static int by_excl(const void *a, const void *b) {
    const agg *x = a, *y = b;
    if (x->excl_ns != y->excl_ns) return x->excl_ns < y->excl_ns ? 1 : -1;
    return by_name(x, y);
}

/* The first `top` rows of v (sorted) as range rows: times per `per` windows, shares of
 * denom_ns. Returns the rows (owned by the caller) and their number in *nout; NULL when
 * there are none or out of memory. */
static tp_range_row *range_rows(const agg *v, size_t n, int top, double denom_ns, double per,
                                const tp_process *p, size_t *nout) {
    size_t k = top > 0 && (size_t)top < n ? (size_t)top : top > 0 ? n : 0;
    tp_range_row *rows = k ? tp_malloc(k * sizeof *rows) : NULL;
    *nout = rows ? k : 0;
    for (size_t i = 0; i < *nout; i++)
        rows[i] = (tp_range_row){v[i].name, tp_domain_name(p, v[i].domain), (double)v[i].count,
                                 (double)v[i].count / per, v[i].incl_ns / 1e6 / per,
                                 v[i].excl_ns / 1e6 / per,
                                 denom_ns > 0 ? v[i].incl_ns / denom_ns : 0,
                                 denom_ns > 0 ? v[i].excl_ns / denom_ns : 0};
    return rows;
}

static cJSON *range_rows_json(const tp_range_row *v, size_t n) {
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "name", v[i].name);
        if (*v[i].domain) cJSON_AddStringToObject(r, "domain", v[i].domain);
        cJSON_AddNumberToObject(r, "count", v[i].count);
        cJSON_AddNumberToObject(r, "count_per_unit", v[i].count_per_unit);
        cJSON_AddNumberToObject(r, "inclusive_ms", v[i].inclusive_ms);
        cJSON_AddNumberToObject(r, "exclusive_ms", v[i].exclusive_ms);
        cJSON_AddNumberToObject(r, "inclusive_share", v[i].inclusive_share);
        cJSON_AddNumberToObject(r, "exclusive_share", v[i].exclusive_share);
        tp_json_item_to_array(arr, r);
    }
    return arr;
}

/* One range's time into its row of tab (a thread's), or a range never closed into
 * unclosed. */
static void table_term(aggtab *tab, aggtab *unclosed, const tp_range *r, const tp_step *meas,
                       size_t nm) {
    uint64_t dur = r->end - r->start;
    if (r->flags & TP_R_UNCLOSED) {
        /* never closed: its end is only where the file ends, so its time would be invented;
         * listed apart instead */
        agg *u = agg_get(unclosed, r->name, r->domain);
        if (u) u->count++;
        return;
    }
    uint64_t in = meas ? tp_steps_overlap(meas, nm, r->start, r->end) : dur;
    if (!in || tp_module_range(r->name)) return;
    agg *a = agg_get(tab, r->name, r->domain);
    if (!a) return;
    /* exclusive time is the synchronous nesting's: a start/end range (a timer, NCCL's async
     * ranges) overlaps others without nesting, and counting all of it would make the shares
     * add up past 100 % */
    uint64_t child = r->child_ns > dur ? dur : r->child_ns;
    double excl = (r->flags & TP_R_ASYNC) ? 0.0
                  : dur == 0 ? (double)in
                             : (double)in * (double)(dur - child) / (double)dur;
    a->count++;
    /* recursion: the enclosing range of the same name holds this time */
    if (!(r->flags & TP_R_NESTED_SAME)) a->incl_ns += (double)in;
    a->excl_ns += excl;
}

/* A thread's rows into the rank's, after the threads before it. */
static void table_merge(aggtab *into, const aggtab *th) {
    for (size_t i = 0; i < th->n; i++) {
        agg *a = agg_get(into, th->v[i].name, th->v[i].domain);
        if (!a) continue;
        a->count += th->v[i].count;
        a->incl_ns += th->v[i].incl_ns;
        a->excl_ns += th->v[i].excl_ns;
    }
}

/* One range into the data-loading spans; pass 0 takes the step thread's (or, without steps,
 * every thread's), pass 1 every thread's. -1 when out of memory. */
static int data_term(tp_rscan *sc, const tp_range *r, const tp_report_opts *o, int pass,
                     int step_thread, int no_steps, const tp_step *meas, size_t nm) {
    if (r->flags & TP_R_UNCLOSED) return 0;
    uint64_t in = meas ? tp_steps_overlap(meas, nm, r->start, r->end) : r->end - r->start;
    if (in && is_data_name(o, r->name) && (pass == 1 || step_thread || no_steps)) {
        if (sc->ndv == sc->capdv) {
            size_t cap = sc->capdv ? sc->capdv * 2 : 64;
            tp_span *n2 = tp_realloc(sc->dv, cap * sizeof *n2);
            if (!n2) return -1;
            sc->dv = n2;
            sc->capdv = cap;
        }
        sc->dv[sc->ndv++] = (tp_span){r->start, r->end};
        if (pass == 0) sc->data_on_step_thread = 1;
    }
    return 0;
}

/* The data-loading spans of p into sc: the step thread's when it has any, else every
 * thread's. */
static int scan_data(tp_rscan *sc, const tp_process *p, const tp_report_opts *o,
                     const tp_steps *s, const tp_step *meas, size_t nm) {
    for (int pass = 0; pass < 2 && !sc->ndv; pass++) {
        for (size_t ti = 0; ti < p->nthreads; ti++) {
            const tp_thread *t = &p->threads[ti];
            int step_thread = s->source != TP_STEPS_NONE && ti == s->thread;
            for (size_t k = 0; k < t->nranges; k++)
                if (data_term(sc, &t->ranges[k], o, pass, step_thread,
                              s->source == TP_STEPS_NONE, meas, nm))
                    return TPROF_ERR_NO_MEMORY;
        }
    }
    return 0;
}

static int scan_new(tp_rscan *sc) {
    memset(sc, 0, sizeof *sc);
    sc->tab = tp_calloc(1, sizeof *sc->tab);
    sc->unclosed = tp_calloc(1, sizeof *sc->unclosed);
    return sc->tab && sc->unclosed ? 0 : TPROF_ERR_NO_MEMORY;
}

void tp_rscan_free(tp_rscan *sc) {
    if (sc->tab) agg_free(sc->tab);
    if (sc->unclosed) agg_free(sc->unclosed);
    free(sc->tab);
    free(sc->unclosed);
    free(sc->dv);
    tp_cpu_stream_free(sc->cpu);
    memset(sc, 0, sizeof *sc);
}

int tp_rscan_whole(tp_rscan *sc, const tp_process *p, const tp_report_opts *o,
                   const tp_steps *s, const tp_step *meas, size_t nm) {
    if (scan_new(sc)) return TPROF_ERR_NO_MEMORY;
    for (size_t ti = 0; ti < p->nthreads; ti++) {
        const tp_thread *t = &p->threads[ti];
        aggtab th = {0};
        for (size_t k = 0; k < t->nranges; k++)
            table_term(&th, sc->unclosed, &t->ranges[k], meas, nm);
        table_merge(sc->tab, &th);
        agg_free(&th);
    }
    return scan_data(sc, p, o, s, meas, nm);
}

/* What a streamed read's take() adds to: a table per thread, merged in thread order after. */
typedef struct take_ctx {
    aggtab *th;
    size_t nth;
    aggtab *unclosed;
    const tp_step *meas;
    size_t nm;
    int oom;
    tp_cpu_stream *cpu; /* the CPU basis streamed beside, or NULL */
} take_ctx;

static void take_opened(void *ctx, size_t thread, const tp_range *r) {
    tp_cpu_stream_opened(((take_ctx *)ctx)->cpu, thread, r);
}

static void take_closed(void *ctx, size_t thread, const tp_range *r) {
    tp_cpu_stream_closed(((take_ctx *)ctx)->cpu, thread, r);
}

static void take_range(void *ctx, size_t thread, const tp_range *r) {
    take_ctx *c = ctx;
    if (thread >= c->nth) {
        size_t n = thread + 8;
        aggtab *nv = tp_realloc(c->th, n * sizeof *nv);
        if (!nv) {
            c->oom = 1;
            return;
        }
        memset(nv + c->nth, 0, (n - c->nth) * sizeof *nv);
        c->th = nv;
        c->nth = n;
    }
    table_term(&c->th[thread], c->unclosed, r, c->meas, c->nm);
}

int tp_rscan_streamed(tp_rscan *sc, tp_run *run, const tp_process *slim,
                      const tp_process *kept, const tp_rkeep *k, const tp_report_opts *o,
                      const tp_steps *s, const tp_step *meas, size_t nm) {
    if (scan_new(sc)) return TPROF_ERR_NO_MEMORY;
    /* for tests (stream_sections 3): a CPU basis holding few ranges, so that it fails */
    if (!k->wide && !k->top.oom &&
        tp_cpu_stream_new(&sc->cpu, kept, s, &k->top, o->stream_sections == 3 ? 8 : 0) != 0)
        return TPROF_ERR_NO_MEMORY;
    int cpu_failed = !k->wide && k->top.oom;
    take_ctx c = {NULL, 0, sc->unclosed, meas, nm, 0, sc->cpu};
    tp_range_stream st = {NULL, take_range, &c, 0, o->stream_sections > 1 ? 16 : 0,
                          take_opened, take_closed};
    tp_process tmp;
    int rc = tp_process_load_streamed(run, slim, &tmp, &st);
    if (rc == TPROF_OK) {
        int fc = st.failed ? 0 : tp_cpu_stream_finish(sc->cpu, &tmp);
        if (fc == TPROF_ERR_NO_MEMORY) c.oom = 1;
        cpu_failed |= fc != 0;
        tp_process_free(&tmp);
    }
    for (size_t i = 0; i < c.nth; i++) {
        if (rc == TPROF_OK && !st.failed) table_merge(sc->tab, &c.th[i]);
        agg_free(&c.th[i]);
    }
    free(c.th);
    if (rc == TPROF_ERR_NO_MEMORY || c.oom) return TPROF_ERR_NO_MEMORY;
    if (rc != TPROF_OK || st.failed) return 1;
    if (scan_data(sc, kept, o, s, meas, nm) != 0) return TPROF_ERR_NO_MEMORY;
    return cpu_failed ? 2 : 0;
}

/* ------------------------------------------------------------------ keep mode */

/* What keep mode keeps by a range's name alone: K_NAME, a name an analysis reads (data
 * loading, trainprof.torch's phases, module ranges); K_STEP, a name a step may have (its
 * children are the breakdown's top level under the step). */
enum { K_NAME = 1, K_STEP = 2 };

static int name_kind(const tp_report_opts *o, const char *name) {
    static const char *const phases[] = {"data", "forward", "backward", "optimizer"};
    int k = tp_step_name_candidate(name, o->step_name) ? K_STEP : 0;
    if (is_data_name(o, name) || tp_module_range(name)) k |= K_NAME;
    for (size_t i = 0; i < sizeof phases / sizeof *phases; i++)
        if (!strcmp(name, phases[i])) k |= K_NAME;
    return k;
}

/* What keep mode keeps by a range's name alone (K_*), memoised by the interned name. */
static int name_kind_memo(tp_rkeep *k, const char *name) {
    size_t h = ((uintptr_t)name >> 3) % (sizeof k->memo / sizeof *k->memo);
    if (k->memo[h].name != name) {
        k->memo[h].name = name;
        k->memo[h].kind = name_kind(k->o, name);
    }
    return k->memo[h].kind;
}

static int keep_range(void *ctx, const tp_process *p, const tp_range *r, const tp_range *parent) {
    tp_rkeep *k = ctx;
    if ((k->wide && r->depth <= 1) || (r->flags & TP_R_ASYNC)) return 1;
    if (name_kind_memo(k, r->name)) return 1;
    /* a window's children: the breakdown's top level under a step range (the CPU basis reads
     * them from the model only when its stream failed) */
    if (k->wide && parent && (name_kind_memo(k, parent->name) & K_STEP)) return 1;
    /* Megatron's timers (report_timers.c): the trainprof domain's ranges */
    return r->domain >= p->ndomains || !p->domains[r->domain] ||
           !strcmp(p->domains[r->domain], "trainprof");
}

static void keep_closed(void *ctx, size_t thread, const tp_range *r) {
    tp_cpu_top_closed(&((tp_rkeep *)ctx)->top, thread, r);
}

void tp_rscan_keep(tp_range_stream *st, tp_rkeep *k, const tp_report_opts *o, int wide) {
    memset(k, 0, sizeof *k);
    k->o = o;
    k->wide = wide;
    *st = (tp_range_stream){keep_range, NULL, k, 0, o->stream_sections > 1 ? 16 : 0, NULL,
                            wide ? NULL : keep_closed};
}

void tp_rkeep_free(tp_rkeep *k) { tp_cpu_top_free(&k->top); }

void tp_rscan_ranges(tp_ranges_result *out, tp_rscan *sc, const tp_process *p, int top,
                     int per_step, double per, double denom) {
    out->present = 1;
    out->per_step = per_step;
    aggtab *tab = sc->tab;
    if (tab && tab->n > 1) qsort(tab->v, tab->n, sizeof *tab->v, by_incl);
    /* a scan whose tables could not be made (out of memory): no rows */
    if (tab) out->top_inclusive = range_rows(tab->v, tab->n, top, denom, per, p, &out->ninclusive);
    if (tab && tab->n > 1) qsort(tab->v, tab->n, sizeof *tab->v, by_excl);
    if (tab) out->top_exclusive = range_rows(tab->v, tab->n, top, denom, per, p, &out->nexclusive);
    out->distinct_names = tab ? tab->n : 0;
    size_t nu = sc->unclosed ? sc->unclosed->n : 0;
    out->unclosed = nu ? tp_calloc(nu, sizeof *out->unclosed) : NULL;
    out->nunclosed = out->unclosed ? nu : 0;
    for (size_t i = 0; i < out->nunclosed; i++) {
        const agg *u = &sc->unclosed->v[i];
        out->unclosed[i].name = u->name;
        out->unclosed[i].domain = tp_domain_name(p, u->domain);
        out->unclosed[i].count = (double)u->count;
    }
}

/* The rank's "ranges" from its results. */
void tp_rscan_ranges_json(cJSON *rs, const tp_ranges_result *rg) {
    cJSON *jr = cJSON_AddObjectToObject(rs, "ranges");
    cJSON_AddStringToObject(jr, "per", rg->per_step ? "step" : "run");
    tp_json_item_to_object(jr, "top_inclusive", range_rows_json(rg->top_inclusive, rg->ninclusive));
    tp_json_item_to_object(jr, "top_exclusive", range_rows_json(rg->top_exclusive, rg->nexclusive));
    cJSON_AddNumberToObject(jr, "distinct_names", (double)rg->distinct_names);
    cJSON *uc = cJSON_AddArrayToObject(jr, "unclosed");
    for (size_t i = 0; i < rg->nunclosed; i++) {
        cJSON *u = cJSON_CreateObject();
        cJSON_AddStringToObject(u, "name", rg->unclosed[i].name);
        if (*rg->unclosed[i].domain) cJSON_AddStringToObject(u, "domain", rg->unclosed[i].domain);
        cJSON_AddNumberToObject(u, "count", rg->unclosed[i].count);
        tp_json_item_to_array(uc, u);
    }
}

/* The rank's data loading into *out: the union of the data-named spans of the scan. */
void tp_rscan_data(tp_data_result *out, tp_rscan *sc, const tp_steps *s, const tp_step *meas,
                   size_t nm, double per, double denom) {
    out->found = sc->ndv > 0;
    out->per_step = meas != NULL;
    if (!sc->ndv) return;
    uint64_t u = tp_steps_union(sc->dv, sc->ndv, meas, nm);
    out->ms = ms(u) / per;
    out->share = denom > 0 ? (double)u / denom : 0;
    out->where = s->source == TP_STEPS_NONE ? "all threads"
                 : sc->data_on_step_thread  ? "step thread"
                                            : "other threads";
}

/* The rank's "data_loading" from its results. */
void tp_rscan_data_json(cJSON *rs, const tp_data_result *d, const tp_report_opts *o) {
    cJSON *dl = cJSON_AddObjectToObject(rs, "data_loading");
    cJSON *names = cJSON_AddArrayToObject(dl, "names");
    for (size_t i = 0; i < o->ndata_names; i++)
        tp_json_item_to_array(names, cJSON_CreateString(o->data_names[i]));
    cJSON_AddBoolToObject(dl, "found", d->found);
    if (!d->found) return;
    cJSON_AddStringToObject(dl, "where", d->where);
    cJSON_AddNumberToObject(dl, d->per_step ? "ms_per_step" : "ms_total", d->ms);
    cJSON_AddNumberToObject(dl, "share", d->share);
}

/* ------------------------------------------------------------------ a section's reads */

/* A slim rank whose file holds more thread ranges than this has its section's ranges
 * streamed (model.h, tp_range_stream; report_ranges.h): the file is read twice, once keeping
 * every record but of its thread ranges only those the analyses other than the range tables
 * and the CPU basis read (keep mode), once for those two alone, each range's figures added as
 * it goes and the range dropped (take mode), so that its section does not hold every range:
 * 56 bytes each in the model, from about 5 bytes each in a compressed file, so that a 120 s run
 * recording two million ranges a second would take 14 GB read whole. Below it, one whole
 * read (at most about 250 MB of ranges) is faster. The figures are the same either way, to
 * the bit (test_report_stream); a file whose ranges cannot be streamed (model.h) is read
 * whole. Counted in ranges, not bytes: the file's size says little of them (compressed). */
#define STREAM_SECTION_RANGES (4u << 20)

/* Slim rank p's file read again for its section (tp_process_load_bounded), its GPU records
 * bounded by o (tp_report_gpu_records): first in a span at the middle of them; when that span
 * holds fewer than three whole measured steps (or every one, with fewer: steps only at the
 * start, GPU work between them or after them, one step heavier than the bound), read again
 * with the span from the first measured step on, as many records as fit. A rank without
 * measured steps keeps the span at the middle: its GPU figures are totals over that span
 * (tp_gpu_result.in_span), said in its section.
 * ks, k: a keep-mode stream (stream_section) set up again (its `wide` as it was) for a second
 * read, or NULL. */
int tp_section_load(const tp_run *run, const tp_process *p, const tp_report_opts *o,
                        tp_process *whole, tp_range_stream *ks, tp_rkeep *k, int wide,
                        int no_ops) {
    size_t max = tp_report_gpu_records(o);
    tp_gpu_bound b = {max == SIZE_MAX ? 0 : max, 0, no_ops ? &tp_comm_read_none : NULL};
    int rc = tp_process_load_bounded((tp_run *)run, p, whole, ks, &b);
    tp_steps s;
    if (rc != TPROF_OK || !whole->gpu_window_to ||
        tp_find_steps(whole, o->step_name, o->warmup, &s) != TPROF_OK)
        return rc;
    size_t nm = s.nsteps - s.nwarmup, held = 0;
    const tp_step *meas = tp_steps_measured(&s);
    for (size_t i = 0; i < nm; i++)
        held += meas[i].start >= whole->gpu_window_from && meas[i].end <= whole->gpu_window_to;
    uint64_t lo = nm ? meas[0].start : 0;
    tp_steps_free(&s);
    /* no measured step: the span at the middle stands (its figures are totals over it) */
    if (!nm || held >= (nm < 3 ? nm : 3)) return rc;
    tp_process_free(whole);
    if (ks) {
        tp_rkeep_free(k);
        tp_rscan_keep(ks, k, o, wide);
    }
    b.from = lo;
    return tp_process_load_bounded((tp_run *)run, p, whole, ks, &b);
}

/* Whether slim rank p's section streams its ranges (STREAM_SECTION_RANGES, o->stream_sections)
 * and could: then 1, with *whole its file in keep mode and *pre the range tables and data
 * loading of its section (not made for memos_only). 0: read it whole (nothing held). */
int tp_section_stream(const tp_run *run, const tp_process *p, const tp_report_opts *o,
                          tp_process *whole, tp_rscan *pre, int memos_only, int no_ops) {
    if (o->stream_sections < 0 || (!o->stream_sections && p->nrec_ranges <= STREAM_SECTION_RANGES))
        return 0;
    tp_rkeep *k = tp_malloc(sizeof *k);
    tp_range_stream ks;
    if (!k) return 0;
    tp_rscan_keep(&ks, k, o, 0);
    int rc = tp_section_load(run, p, o, whole, &ks, k, 0, no_ops);
    tp_steps s;
    if (rc == TPROF_OK && !memos_only && tp_find_steps(whole, o->step_name, o->warmup, &s) != 0) {
        tp_process_free(whole);
        rc = TPROF_ERR_NO_MEMORY;
    }
    if (rc != TPROF_OK || memos_only) { /* the memos read no range table */
        tp_rkeep_free(k);
        free(k);
        return rc == TPROF_OK;
    }
    /* as rank_section counts the ranges: inside the measured steps, else over the run */
    size_t nm = s.nsteps - s.nwarmup;
    rc = tp_rscan_streamed(pre, (tp_run *)run, p, whole, k, o, &s,
                           nm ? tp_steps_measured(&s) : NULL, nm);
    tp_steps_free(&s);
    tp_rkeep_free(k);
    if (rc == 2) { /* the CPU basis from a model that keeps depth 0 and 1 (report_ranges.h) */
        tp_process_free(whole);
        tp_rscan_keep(&ks, k, o, 1);
        rc = tp_section_load(run, p, o, whole, &ks, k, 1, no_ops) == TPROF_OK ? 0 : 1;
        tp_rkeep_free(k);
        if (rc) {
            free(k);
            tp_rscan_free(pre);
            return 0;
        }
    }
    free(k);
    if (rc == 0) return 1;
    tp_rscan_free(pre);
    tp_process_free(whole);
    return 0;
}
