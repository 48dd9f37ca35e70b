/*
 * report_timers.c — Megatron's timers in the report: each rank's, rebuilt from their trace
 * ranges (domain "trainprof", category "timers"), and the tables across ranks that Megatron
 * prints (timers/timers_format.c).
 */
#define _GNU_SOURCE
#include "analysis/report_timers.h"
#include "analysis/alloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/steps.h"
#include "timers/timers_format.h"
#include "trainprof.h"

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
void tp_timers_rank(cJSON *rs, tp_timers_result *out, const tp_process *p, const tp_step *meas,
                    size_t nm) {
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
                    trow *nv = tp_realloc(v, cap * sizeof *nv);
                    if (!nv) { free(v); return; }
                    v = nv;
                }
                v[n++] = (trow){r->name, r->start, 0, 0};
            }
            if (r->start < v[i].first) v[i].first = r->start;
            v[i].count++;
            v[i].ns += (double)(meas ? tp_steps_overlap(meas, nm, r->start, r->end)
                                     : r->end - r->start);
        }
    }
    if (!n) return;
    if (n > 1) qsort(v, n, sizeof *v, by_first);
    out->rows = tp_malloc(n * sizeof *out->rows);
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
        tp_json_item_to_array(rows, row);
    }
}

/* Megatron's timers tables across ranks into *out, from each rank's timers (res): the same
 * text Megatron prints, with ms per measured step as the unit (normalizer 1 on per-step
 * values). */
void tp_timers_run(tp_run_timers_result *out, const tp_run_results *res) {
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
            const char **nn = tp_realloc(names, (n + 1) * sizeof *nn);
            if (!nn) { free(names); return; }
            names = nn;
            names[n++] = nm;
        }
    }
    double *m = n && world > 0 ? tp_calloc((size_t)world * n, sizeof *m) : NULL;
    out->rows = m ? tp_calloc(n, sizeof *out->rows) : NULL;
    if (!out->rows) {
        free(m);
        free(names);
        return;
    }
    out->per_step = 1;
    for (size_t ri = 0; ri < res->nranks; ri++) {
        const tp_rank_result *r = &res->ranks[ri];
        if (!r->timers.present) continue;
        out->per_step = r->timers.per_step;
        for (size_t k = 0; k < r->timers.nrows; k++)
            for (size_t i = 0; i < n; i++)
                if (!strcmp(names[i], r->timers.rows[k].name))
                    m[(size_t)r->rank * n + i] = r->timers.rows[k].ms / 1e3;
    }
    out->present = 1;
    out->nrows = n;
    for (size_t i = 0; i < n; i++) {
        double mn = 0, mx = 0;
        out->rows[i].name = names[i];
        out->rows[i].has_minmax = tprof__timers_minmax(m, world, n, i, &mn, &mx) != 0;
        out->rows[i].min_ms = mn * 1e3;
        out->rows[i].max_ms = mx * 1e3;
    }
    /* NULL: nothing to list, or (errno set) the formatter's memory ran out, which it cannot
     * count itself (it is the runtime library's too): counted here */
    errno = 0;
    out->megatron_minmax = tprof__timers_format(TPROF_TIMERS_MINMAX, names, n, m, world, 1.0);
    if (!out->megatron_minmax && errno) tp_nomem_note();
    errno = 0;
    if (world > 1 &&
        !(out->megatron_all = tprof__timers_format(TPROF_TIMERS_ALL, names, n, m, world, 1.0)) &&
        errno)
        tp_nomem_note();
    free(m);
    free(names);
}

/* The run's "timers" from its results. */
void tp_timers_json(cJSON *rep, const tp_run_timers_result *t) {
    if (!t->present) return;
    cJSON *jt = cJSON_AddObjectToObject(rep, "timers");
    cJSON_AddStringToObject(jt, "per", t->per_step ? "step" : "run");
    cJSON *mm = cJSON_AddArrayToObject(jt, "min_max");
    for (size_t i = 0; i < t->nrows; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", t->rows[i].name);
        if (t->rows[i].has_minmax) {
            cJSON_AddNumberToObject(e, "min_ms", t->rows[i].min_ms);
            cJSON_AddNumberToObject(e, "max_ms", t->rows[i].max_ms);
        }
        tp_json_item_to_array(mm, e);
    }
    if (t->megatron_minmax) cJSON_AddStringToObject(jt, "megatron_minmax", t->megatron_minmax);
    if (t->megatron_all) cJSON_AddStringToObject(jt, "megatron_all", t->megatron_all);
}

