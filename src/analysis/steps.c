/*
 * steps.c — finds a process's training steps by the rule in steps.h (docs/design.md §4).
 */
#define _GNU_SOURCE
#include "analysis/steps.h"
#include "analysis/alloc.h"

#include <stdlib.h>
#include <string.h>

#include "analysis/counter_pack.h"
#include "analysis/step_pack.h"
#include "core/step_names.h"
#include "trainprof.h"

static const char *const default_names[] = {TPROF_DEFAULT_STEP_NAMES};

const char *tp_step_source_name(tp_step_source s) {
    switch (s) {
    case TP_STEPS_API: return "tprof_step_begin/end calls";
    case TP_STEPS_NAMED: return "ranges named by --step-name";
    case TP_STEPS_PROFILER: return "PyTorch ProfilerStep#N ranges";
    case TP_STEPS_DEFAULT_NAME: return "ranges with a common step name";
    case TP_STEPS_ITERATION:
        return "training iterations of trainprof.torch, from one iteration's first data fetch, "
               "forward or backward to the next";
    default: return "none found";
    }
}


static int cmp_step(const void *a, const void *b) {
    const tp_step *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Steps from ranges matching `pat` on the first thread (earliest range) that has one. */
static int from_ranges(const tp_process *p, const char *pat, tp_steps *out) {
    int best = -1;
    uint64_t best_ts = 0;
    for (size_t i = 0; i < p->nthreads; i++) {
        const tp_thread *t = &p->threads[i];
        for (size_t k = 0; k < t->nranges; k++) {
            if (!tprof__step_name_matches(t->ranges[k].name, pat)) continue;
            if (best < 0 || t->ranges[k].start < best_ts) {
                best = (int)i;
                best_ts = t->ranges[k].start;
            }
            break; /* ranges are in start order per thread for pushes; good enough */
        }
    }
    if (best < 0) return 0;
    const tp_thread *t = &p->threads[best];
    /* per range: 1 its name matches, 2 a range around it does (its own or an ancestor's
     * match, carried down from the parent: one pass, where walking every ancestor of every
     * range took time in the square of the depth) */
    uint8_t *m = tp_malloc(t->nranges ? t->nranges : 1);
    if (!m) return TPROF_ERR_NO_MEMORY;
    size_t n = 0;
    for (size_t k = 0; k < t->nranges; k++) {
        m[k] = (uint8_t)tprof__step_name_matches(t->ranges[k].name, pat);
        n += m[k];
    }
    for (size_t k = 0; k < t->nranges; k++) {
        int32_t q = t->ranges[k].parent;
        if (q < 0) continue;
        if ((size_t)q < k) { /* parents come first: its mark is final */
            if (m[q]) m[k] |= 2;
            continue;
        }
        for (; q >= 0; q = t->ranges[q].parent) /* out of order (damaged): the walk */
            if (tprof__step_name_matches(t->ranges[q].name, pat)) m[k] |= 2;
    }
    out->steps = tp_calloc(n ? n : 1, sizeof *out->steps);
    if (!out->steps) {
        free(m);
        return TPROF_ERR_NO_MEMORY;
    }
    for (size_t k = 0; k < t->nranges; k++) {
        const tp_range *r = &t->ranges[k];
        if (!(m[k] & 1)) continue;
        /* a step range nested inside another step range is not a separate step */
        if (m[k] & 2) continue;
        /* cut short by the end of the file (killed, torn): not a whole step, and its length
         * would only say when recording stopped */
        if (r->flags & TP_R_UNCLOSED) continue;
        out->steps[out->nsteps++] = (tp_step){r->start, r->end, 0, 0};
    }
    free(m);
    out->thread = (uint32_t)best;
    return 1;
}

/* Whether thread tid's ring dropped events in a window meeting [a, b] (model.h). */
static int dropped_in(const tp_process *p, uint32_t tid, uint64_t a, uint64_t b) {
    for (size_t i = 0; i < p->ndrops; i++)
        if (p->drops[i].os_tid == tid && p->drops[i].from <= b && p->drops[i].to >= a) return 1;
    return 0;
}

static int add_missing(tp_steps *out, size_t *cap, uint64_t lo, uint64_t hi) {
    if (lo > hi) return 0;
    if (out->nmissing == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        tp_span *nv = tp_realloc(out->missing, nc * sizeof *nv);
        if (!nv) return TPROF_ERR_NO_MEMORY;
        out->missing = nv;
        *cap = nc;
    }
    out->missing[out->nmissing++] = (tp_span){lo, hi};
    return 0;
}

/* Sorts the missing ranges and merges those that meet, then counts their numbers. */
static void merge_missing(tp_steps *out) {
    tp_spans_sort(out->missing, out->nmissing);
    size_t kept = 0;
    for (size_t i = 0; i < out->nmissing; i++) {
        tp_span m = out->missing[i];
        if (kept && (m.s <= out->missing[kept - 1].e || m.s - 1 == out->missing[kept - 1].e)) {
            if (m.e > out->missing[kept - 1].e) out->missing[kept - 1].e = m.e;
        } else {
            out->missing[kept++] = m;
        }
    }
    out->nmissing = kept;
    out->nmissing_steps = 0;
    for (size_t i = 0; i < kept; i++) { /* saturates: only forged numbers come near */
        uint64_t n = out->missing[i].e - out->missing[i].s;
        n = n == UINT64_MAX ? n : n + 1;
        out->nmissing_steps = UINT64_MAX - out->nmissing_steps < n ? UINT64_MAX
                                                                   : out->nmissing_steps + n;
    }
}

/* from_api's steps of thread t, whose step events are ev (t->nsteps of them), into out
 * (whose steps array holds room for them). 1, or TPROF_ERR_NO_MEMORY. */
static int api_steps(const tp_process *p, const tp_thread *t, const tp_stepev *ev,
                     tp_steps *out) {
    size_t cap = 0;
    /* a begin is closed by the event after it: its end (same number), or the next begin
     * (programs that only call step_begin). An end of
     * another number first means this step's end, and the next step's begin, were lost (a
     * damaged chunk skipped by the reader): the step's length is unknown, and closing it at
     * a later begin would merge two steps into one, so it is left out. So is a begin closed
     * by a begin other than the next number while the ring dropped events between them: its
     * end, and the steps between, were likely dropped. Where the ring dropped events between
     * two step events, the numbers between them that got no whole step are the missing
     * steps: the ring fills when the program records most, so they are likely the slowest,
     * and the statistics of the others do not cover them. */
    for (size_t k = 0; k + 1 < t->nsteps; k++) { /* the last event closes nothing */
        const tp_stepev *e = &ev[k], *next = &ev[k + 1];
        int lost = dropped_in(p, t->os_tid, e->ts, next->ts);
        int closed = e->begin && (next->begin ? !lost || next->step == e->step + 1
                                              : next->step == e->step);
        /* ends of the same number one after another: the last one ends the step
         * (trainprof.torch ends an iteration again at each optimizer step that follows) */
        size_t last = k + 1;
        while (closed && !next->begin && last + 1 < t->nsteps && !ev[last + 1].begin &&
               ev[last + 1].step == e->step)
            last++;
        if (closed) out->steps[out->nsteps++] = (tp_step){e->ts, ev[last].ts, e->step, 0};
        if (!lost) continue;
        uint64_t lo = e->begin && !closed ? e->step : e->step + 1;
        if (next->begin && next->step == 0) continue;
        uint64_t hi = next->begin ? next->step - 1 : next->step;
        if (lo <= hi && add_missing(out, &cap, lo, hi))
            return TPROF_ERR_NO_MEMORY;
    }
    /* the first event an end, the last a begin, with drops before or after: those steps too */
    const tp_stepev *first = &ev[0], *last = &ev[t->nsteps - 1];
    if (!first->begin && dropped_in(p, t->os_tid, 0, first->ts) &&
        add_missing(out, &cap, first->step, first->step))
        return TPROF_ERR_NO_MEMORY;
    if (last->begin && dropped_in(p, t->os_tid, last->ts, UINT64_MAX) &&
        add_missing(out, &cap, last->step, last->step))
        return TPROF_ERR_NO_MEMORY;
    merge_missing(out);
    return 1;
}

static int from_api(const tp_process *p, tp_steps *out) {
    int best = -1;
    uint64_t best_ts = 0;
    for (size_t i = 0; i < p->nthreads; i++) {
        const tp_thread *t = &p->threads[i];
        uint64_t ts = t->nsteps ? tp_thread_first_step_ts(t) : 0;
        if (t->nsteps && (best < 0 || ts < best_ts)) {
            best = (int)i;
            best_ts = ts;
        }
    }
    if (best < 0) return 0;
    const tp_thread *t = &p->threads[best];
    int owned;
    const tp_stepev *ev = tp_thread_stepevs(t, &owned); /* a slim process's are packed */
    out->steps = ev ? tp_calloc(t->nsteps, sizeof *out->steps) : NULL;
    if (!out->steps) {
        if (owned) free((void *)ev);
        return TPROF_ERR_NO_MEMORY;
    }
    int rc = api_steps(p, t, ev, out);
    if (owned) free((void *)ev);
    if (rc > 0) out->thread = (uint32_t)best;
    return rc;
}

/* A copy of the steps a slim process keeps (model.h, steps_memo), when they were found with
 * this step name and warm-up; 1 if copied, 0 if not theirs, -1 out of memory. */
static int from_memo(const tp_process *p, const char *step_name, int warmup, tp_steps *out) {
    const tp_steps *m = p->steps_memo;
    const char *a = step_name && *step_name ? step_name : NULL, *b = p->steps_memo_name;
    if (!m || warmup != p->steps_memo_warmup || (!a != !b) || (a && strcmp(a, b))) return 0;
    *out = *m;
    /* the copy owns none of the memo's (a failure below frees the copy) */
    out->packed = NULL;
    out->packed_len = 0;
    out->spilled = NULL;
    out->steps = m->nsteps ? tp_malloc(m->nsteps * sizeof *out->steps) : NULL;
    out->missing = m->nmissing ? tp_malloc(m->nmissing * sizeof *out->missing) : NULL;
    if ((m->nsteps && !out->steps) || (m->nmissing && !out->missing)) {
        tp_steps_free(out);
        return -1;
    }
    if (m->nsteps && (m->packed || m->spilled)) {
        if (tp_steps_packed(m, out->steps) != 0) {
            tp_steps_free(out);
            return -1;
        }
    } else if (m->nsteps) {
        memcpy(out->steps, m->steps, m->nsteps * sizeof *out->steps);
    }
    if (m->nmissing) memcpy(out->missing, m->missing, m->nmissing * sizeof *out->missing);
    return 1;
}

void tp_process_keep_steps(tp_process *p, tp_steps *found, const char *step_name,
                           int warmup) {
    if (p->steps_memo) {
        tp_steps_free(p->steps_memo);
        free(p->steps_memo);
    }
    if (found) tp_steps_pack_in(found);
    p->steps_memo = found;
    p->steps_memo_name = step_name && *step_name ? step_name : NULL;
    p->steps_memo_warmup = warmup;
}

int tp_find_steps(const tp_process *p, const char *step_name, int warmup, tp_steps *out) {
    memset(out, 0, sizeof *out);
    int m = from_memo(p, step_name, warmup, out);
    if (m) return m > 0 ? TPROF_OK : TPROF_ERR_NO_MEMORY;
    int r = 0;
    if (step_name && *step_name && (r = from_ranges(p, step_name, out)) > 0) {
        out->source = TP_STEPS_NAMED;
        out->name = step_name;
    }
    if (r == 0 && (r = from_api(p, out)) > 0) {
        const char *rule = tp_meta(p, "trainprof.torch.steps");
        out->source = rule && !strcmp(rule, "iteration") ? TP_STEPS_ITERATION : TP_STEPS_API;
        out->name = "tprof_step_begin/end";
    }
    if (r == 0 && (!step_name || !*step_name)) {
        if ((r = from_ranges(p, TPROF_PROFILER_STEP_GLOB, out)) > 0) {
            out->source = TP_STEPS_PROFILER;
            out->name = TPROF_PROFILER_STEP_GLOB;
        }
        for (size_t i = 0; r == 0 && i < sizeof default_names / sizeof *default_names; i++) {
            if ((r = from_ranges(p, default_names[i], out)) > 0) {
                out->source = TP_STEPS_DEFAULT_NAME;
                out->name = default_names[i];
            }
        }
    }
    if (r < 0) {
        tp_steps_free(out);
        return r;
    }
    if (out->source == TP_STEPS_NONE) return TPROF_OK;
    if (out->nsteps > 1) qsort(out->steps, out->nsteps, sizeof *out->steps, cmp_step);
    /* One thread's clock never runs backwards, so its steps are ordered and disjoint; every
     * consumer relies on that (steps.h). A file whose times say otherwise (damaged or forged)
     * loses the steps that end before they start or begin inside the previous one. */
    size_t kept = 0;
    for (size_t i = 0; i < out->nsteps; i++) {
        const tp_step s = out->steps[i];
        if (s.end < s.start || (kept && s.start < out->steps[kept - 1].end)) continue;
        out->steps[kept++] = s;
    }
    out->nsteps = kept;
    if (out->source == TP_STEPS_ITERATION) /* each to the next one's begin (steps.h) */
        for (size_t i = 0; i + 1 < out->nsteps; i++)
            if (out->steps[i + 1].app_step == out->steps[i].app_step + 1)
                out->steps[i].end = out->steps[i + 1].start;
    for (size_t i = 0; i < out->nsteps; i++) {
        if (out->source != TP_STEPS_API && out->source != TP_STEPS_ITERATION)
            out->steps[i].app_step = i;
        out->steps[i].warmup = (int)i < warmup;
    }
    out->nwarmup = out->nsteps < (size_t)(warmup < 0 ? 0 : warmup) ? out->nsteps : (size_t)warmup;
    return TPROF_OK;
}

int tp_step_name_candidate(const char *name, const char *step_name) {
    if (step_name && *step_name && tprof__step_name_matches(name, step_name)) return 1;
    if (tprof__step_name_matches(name, TPROF_PROFILER_STEP_GLOB)) return 1;
    for (size_t i = 0; i < sizeof default_names / sizeof *default_names; i++)
        if (!strcmp(name, default_names[i])) return 1;
    return 0;
}

void tp_steps_free(tp_steps *s) {
    free(s->steps);
    free(s->missing);
    free(s->packed);
    tp_spill_block_free(s->spilled);
    memset(s, 0, sizeof *s);
}

void tp_steps_pack_in(tp_steps *s) {
    uint8_t *b;
    size_t len;
    if (!s->nsteps || !s->steps || tp_steps_pack(s->steps, s->nsteps, &b, &len) != 0) return;
    free(s->steps);
    s->steps = NULL;
    s->packed = b;
    s->packed_len = len;
    tp_steps_spill(s);
}

uint64_t tp_steps_overlap(const tp_step *st, size_t n, uint64_t s, uint64_t e) {
    size_t lo = 0, hi = n;
    while (lo < hi) { /* the first step that ends after s */
        size_t mid = (lo + hi) / 2;
        if (st[mid].end <= s) lo = mid + 1;
        else hi = mid;
    }
    uint64_t tot = 0;
    for (size_t i = lo; i < n && st[i].start < e; i++) {
        uint64_t a = s > st[i].start ? s : st[i].start, b = e < st[i].end ? e : st[i].end;
        if (b > a) tot += b - a;
    }
    return tot;
}

static int by_span_start(const void *a, const void *b) {
    const tp_span *x = a, *y = b;
    return x->s < y->s ? -1 : x->s > y->s;
}

/* Input made of a few sorted runs (the span sets of an analysis: kernels, then copies, then
 * communication, each in start order) is merged run by run, in O(n) per pass and
 * log2(runs) passes; more runs than this go to qsort. */
#define MERGE_RUNS_MAX 32

/* Merges the sorted runs a[b[0]..b[1]), a[b[1]..b[2]), ... (nb + 1 bounds) into t, pairwise,
 * stably (the earlier run first on equal starts, as a stable sort keeps them); the bounds
 * become those of the merged runs. */
static void merge_pass(const tp_span *a, tp_span *t, size_t *b, size_t *nb) {
    size_t k = 0;
    for (size_t r = 0; r < *nb; r += 2) {
        size_t lo = b[r], mid = b[r + 1], hi = r + 2 <= *nb ? b[r + 2] : mid;
        size_t i = lo, j = mid, o = lo;
        while (i < mid && j < hi) t[o++] = a[j].s < a[i].s ? a[j++] : a[i++];
        while (i < mid) t[o++] = a[i++];
        while (j < hi) t[o++] = a[j++];
        b[k++] = lo;
    }
    b[k] = b[*nb];
    *nb = k;
}

/* Merges the sorted runs v[0..b) and v[b..nv) in place, stably as merge_pass does, through
 * a copy of the shorter run alone (a few kept spans before millions of a file's: the copy
 * of the whole would double the peak). -1 without memory (v unchanged). */
static int merge_two(tp_span *v, size_t b, size_t nv) {
    size_t na = b, nb = nv - b;
    tp_span *t = tp_malloc((na < nb ? na : nb) * sizeof *t);
    if (!t) return -1;
    if (na <= nb) { /* forward: the output never passes the second run's next */
        memcpy(t, v, na * sizeof *t);
        size_t i = 0, j = b, o = 0;
        while (i < na && j < nv) v[o++] = v[j].s < t[i].s ? v[j++] : t[i++];
        while (i < na) v[o++] = t[i++];
    } else { /* backward from the end; on equal starts the later run's goes last */
        memcpy(t, v + b, nb * sizeof *t);
        size_t i = na, j = nb, o = nv;
        while (i > 0 && j > 0) v[--o] = t[j - 1].s < v[i - 1].s ? v[--i] : t[--j];
        while (j > 0) v[--o] = t[--j];
    }
    free(t);
    return 0;
}

void tp_spans_sort(tp_span *v, size_t nv) {
    size_t bounds[MERGE_RUNS_MAX + 1], nb = 0;
    bounds[0] = 0;
    for (size_t i = 1; i < nv; i++)
        if (v[i].s < v[i - 1].s) {
            if (++nb == MERGE_RUNS_MAX) break;
            bounds[nb] = i;
        }
    if (nb == 0) return; /* sorted */
    if (nb == 1 && merge_two(v, bounds[1], nv) == 0) return;
    tp_span *t = nb < MERGE_RUNS_MAX ? tp_malloc(nv * sizeof *t) : NULL;
    if (!t) {
        qsort(v, nv, sizeof *v, by_span_start);
        return;
    }
    bounds[++nb] = nv; /* nb runs, nb + 1 bounds */
    tp_span *from = v, *to = t;
    while (nb > 1) {
        merge_pass(from, to, bounds, &nb);
        tp_span *x = from;
        from = to;
        to = x;
    }
    if (from != v) memcpy(v, from, nv * sizeof *v);
    free(t);
}

uint64_t tp_steps_union(tp_span *v, size_t nv, const tp_step *st, size_t n) {
    tp_spans_sort(v, nv);
    uint64_t tot = 0;
    for (size_t i = 0; i < nv;) {
        uint64_t s = v[i].s, e = v[i].e;
        for (i++; i < nv && v[i].s <= e; i++)
            if (v[i].e > e) e = v[i].e;
        tot += st ? tp_steps_overlap(st, n, s, e) : e - s;
    }
    return tot;
}

void tp_steps_union_each(tp_span *v, size_t nv, const tp_step *st, size_t n, uint64_t *out) {
    for (size_t i = 0; i < n; i++) out[i] = 0;
    tp_spans_sort(v, nv);
    for (size_t i = 0; i < nv;) {
        uint64_t s = v[i].s, e = v[i].e;
        for (i++; i < nv && v[i].s <= e; i++)
            if (v[i].e > e) e = v[i].e;
        size_t lo = 0, hi = n;
        while (lo < hi) { /* the first step that ends after s */
            size_t mid = (lo + hi) / 2;
            if (st[mid].end <= s) lo = mid + 1;
            else hi = mid;
        }
        for (size_t k = lo; k < n && st[k].start < e; k++) {
            uint64_t a = s > st[k].start ? s : st[k].start, b = e < st[k].end ? e : st[k].end;
            if (b > a) out[k] += b - a;
        }
    }
}
