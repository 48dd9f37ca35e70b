/*
 * breakdown_cpu.c — the CPU basis of the step breakdown and the host's phases (breakdown.h):
 * each instant of a window given to one range of the view's thread, from the whole model of
 * a rank file or while its thread ranges are streamed (tp_cpu_stream), for a file whose ranges
 * are too many to hold (report.c, STREAM_SECTION_RANGES).
 *
 * Both read the candidates (cpu_candidates: the view thread's top-level ranges under the step
 * and the process ranges it started or ended) through one sweep (csweep) that takes them in
 * start order and keeps a heap of the open ones: at each change, the open candidate first in
 * precedence (cand_before) owns the time up to the next change. Which candidate owns an
 * instant depends on the set of candidates alone, not on the order candidates of one start
 * come in, so the two ways give the same figures to the nanosecond.
 *
 * Why a streamed read can hand the thread's ranges over in bounded memory: whether a range is
 * a candidate depends on its parent (a window, or for the phases a range holding a phase) and
 * on its own end, which are known once every range around it has ended. The stream therefore
 * holds the thread's ranges from the moment no range is open on the thread until that moment
 * comes again (one top-level range with what it holds: a step and its children), then hands
 * the candidates among them to the sweep. Ranges of one thread that a take-mode read can
 * sweep nest (model_stream.c), so the top-level ranges come one after the other and their
 * candidates start after those handed before. A top-level range that is a candidate however
 * it ends (no window starts with it) owns every instant of what opens inside it, before the
 * thread's process ranges and after nothing: what opens inside it is dropped as it comes (a
 * range around the whole run holds nothing). Where that does not hold, or one top-level range
 * holds more than the stream may keep, the stream fails and the caller reads the ranges
 * another way.
 */
#define _GNU_SOURCE
#include "analysis/breakdown_cpu.h"
#include "analysis/alloc.h"

#include <stdlib.h>
#include <string.h>

#include "format/format.h"
#include "trainprof.h"

typedef struct nrow {
    const char *name;
    uint32_t domain;
    double total;
    uint64_t *per; /* ns per window */
} nrow;

/* Most time first; rows of equal time by name, then domain: a total order, so that the table
 * does not depend on the order its rows were made in (a streamed read makes them in another). */
static int by_total(const void *a, const void *b) {
    const nrow *x = a, *y = b;
    if (x->total != y->total) return x->total < y->total ? 1 : -1;
    int c = strcmp(x->name, y->name);
    return c ? c : x->domain < y->domain ? -1 : x->domain > y->domain;
}
#define CPU_ROWS 8

/* first window ending after t (windows are in time order and disjoint) */
static size_t first_window(const tp_step *win, size_t nw, uint64_t t) {
    size_t lo = 0, hi = nw;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (win[mid].end <= t) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* the range is exactly one of the windows (a step range) */
static int is_window(const tp_step *win, size_t nw, const tp_range *r) {
    size_t w = first_window(win, nw, r->start);
    return w < nw && win[w].start == r->start && win[w].end == r->end;
}

/* The phase names trainprof.torch writes (docs/python.md). A top-level range of the step
 * thread with one of them directly inside it is the program's own step range (a loop that
 * marks "step" itself under trainprof.torch's iterations): the phases look inside it. Marks
 * such ranges of thread t in holds[] (t->nranges entries). */
static void phase_holders(const tp_thread *t, uint8_t *holds) {
    static const char *const phases[] = {"data", "forward", "backward", "optimizer"};
    for (size_t k = 0; k < t->nranges; k++) {
        const tp_range *r = &t->ranges[k];
        if (r->parent < 0 || (size_t)r->parent >= t->nranges) continue;
        if (t->ranges[r->parent].parent >= 0) continue;
        for (size_t i = 0; i < sizeof phases / sizeof *phases; i++)
            if (r->name && !strcmp(r->name, phases[i])) holds[r->parent] = 1;
    }
}


/* A range that takes part in the CPU breakdown, with the row it adds to. */
typedef struct cand {
    uint64_t s, e;
    uint32_t row;
    uint32_t key;    /* CAND_PROCESS for a process range (start/end), after the thread's own;
                      * below it the order among the candidates of its kind (less than
                      * CAND_PROCESS of them): the thread's own in the thread's order, process
                      * ranges by thread, then in each thread's order. 24 bytes a candidate. */
} cand;

#define CAND_PROCESS 0x80000000u

/* The sweep's order of precedence: the step thread's own (push/pop) ranges before process
 * ranges; then the earlier start (the enclosing one); then the first recorded. */
static int cand_before(const cand *a, const cand *b) {
    uint32_t pa = a->key & CAND_PROCESS, pb = b->key & CAND_PROCESS;
    if (pa != pb) return pa < pb;
    if (a->s != b->s) return a->s < b->s;
    return a->key < b->key;
}

static void heap_push(cand *h, size_t *n, const cand *x) {
    size_t i = (*n)++;
    h[i] = *x;
    while (i && cand_before(&h[i], &h[(i - 1) / 2])) {
        cand t = h[i];
        h[i] = h[(i - 1) / 2];
        h[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static void heap_pop(cand *h, size_t *n) {
    h[0] = h[--*n];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && cand_before(&h[l], &h[m])) m = l;
        if (r < *n && cand_before(&h[r], &h[m])) m = r;
        if (m == i) break;
        cand t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static int by_start_seq(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->s != y->s) return x->s < y->s ? -1 : 1;
    return x->key < y->key ? -1 : x->key > y->key;
}

/* Indices into the candidates (ctx) by start, then in their order. */
static int by_start_index(const void *a, const void *b, void *ctx) {
    const cand *v = ctx;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (v[x].s != v[y].s) return v[x].s < v[y].s ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Gives [a, b) to row `row` across the windows it overlaps. */
static void attribute(nrow *rows, uint32_t row, uint64_t *cov, const tp_step *win, size_t nw,
                      size_t nwarm, uint64_t a, uint64_t b) {
    for (size_t w = first_window(win, nw, a); w < nw && win[w].start < b; w++) {
        uint64_t x = a > win[w].start ? a : win[w].start, y = b < win[w].end ? b : win[w].end;
        if (y <= x) continue;
        rows[row].per[w] += y - x;
        if (w >= nwarm) rows[row].total += (double)(y - x);
        cov[w] += y - x;
    }
}

/* The thread whose view the CPU breakdown takes: the step thread, or without steps the
 * thread with the most top-level range time. top: per thread, the time of its closed thread
 * ranges at depth 0 when a streamed read counted them (the model then holds only some of
 * them: its process ranges and those never closed are counted from it), else NULL. Its
 * index, or p->nthreads for none. */
static size_t cpu_thread(const tp_process *p, const tp_steps *st, const tp_cpu_top *top) {
    if (st->source != TP_STEPS_NONE) return st->thread;
    size_t best = p->nthreads;
    double bestns = -1;
    for (size_t ti = 0; ti < p->nthreads; ti++) {
        const tp_thread *th = &p->threads[ti];
        double ns = top && ti < top->n ? (double)top->ns[ti] : 0;
        for (size_t k = 0; k < th->nranges; k++)
            if (th->ranges[k].depth == 0 &&
                (!top || (th->ranges[k].flags & (TP_R_ASYNC | TP_R_UNCLOSED))))
                ns += (double)(th->ranges[k].end - th->ranges[k].start);
        if (ns > bestns) {
            bestns = ns;
            best = ti;
        }
    }
    return best;
}

/* Rows by (name, domain): names are interned in the run's pool, so the pointer is the key.
 * An open-addressing index of row numbers + 1 (0: empty), kept at most half full, so a run
 * with millions of distinct names costs a probe per range, not a scan of the rows. */
typedef struct row_index {
    uint32_t *slot;
    size_t cap;
} row_index;

static size_t row_hash(const char *name, uint32_t domain, size_t mask) {
    uint64_t h = ((uint64_t)(uintptr_t)name ^ ((uint64_t)domain << 32)) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20) & mask;
}

/* The row of (name, domain), or nr when there is none yet; *at gets its slot. */
static size_t row_find(const row_index *x, const nrow *rows, size_t nr, const char *name,
                       uint32_t domain, size_t *at) {
    size_t mask = x->cap - 1, j = row_hash(name, domain, mask);
    for (; x->slot[j]; j = (j + 1) & mask) {
        const nrow *r = &rows[x->slot[j] - 1];
        if (r->name == name && r->domain == domain) break;
    }
    *at = j;
    return x->slot[j] ? x->slot[j] - 1 : nr;
}

/* Room for one more row (doubling); -1 when out of memory. */
static int row_index_room(row_index *x, const nrow *rows, size_t nr) {
    if ((nr + 1) * 2 <= x->cap) return 0;
    size_t cap = x->cap ? x->cap * 2 : 64;
    uint32_t *s = tp_calloc(cap, sizeof *s);
    if (!s) return -1;
    free(x->slot);
    x->slot = s;
    x->cap = cap;
    for (size_t i = 0; i < nr; i++) {
        size_t j;
        row_find(x, rows, i, rows[i].name, rows[i].domain, &j);
        s[j] = (uint32_t)i + 1;
    }
    return 0;
}

/* ------------------------------------------------------------------ the sweep */

/* The sweep over the candidates of one view (file comment): rows by (name, domain), each
 * window's time covered by any candidate, and the open candidates. */
typedef struct csweep {
    const tp_step *win;
    size_t nw, nwarm;
    nrow *rows;
    size_t nr, capr;
    row_index x;
    uint64_t *cov; /* ns per window */
    cand *heap;    /* the open candidates (and some that ended: dropped when on top) */
    size_t nh, caph;
    uint64_t now;  /* time given out up to here */
    int oom;
} csweep;

static int sweep_init(csweep *w, const tp_step *win, size_t nw, size_t nwarm) {
    memset(w, 0, sizeof *w);
    w->win = win;
    w->nw = nw;
    w->nwarm = nwarm;
    w->cov = tp_calloc(nw ? nw : 1, sizeof *w->cov);
    return w->cov ? 0 : -1;
}

static void sweep_free(csweep *w) {
    for (size_t i = 0; i < w->nr; i++) free(w->rows[i].per);
    free(w->rows);
    free(w->x.slot);
    free(w->cov);
    free(w->heap);
    memset(w, 0, sizeof *w);
}

/* The row of (name, domain), made when missing; w->nr (and w->oom set) when out of memory. */
static size_t sweep_row(csweep *w, const char *name, uint32_t domain) {
    if (row_index_room(&w->x, w->rows, w->nr) != 0) {
        w->oom = 1;
        return w->nr;
    }
    size_t at, i = row_find(&w->x, w->rows, w->nr, name, domain, &at);
    if (i < w->nr) return i;
    if (w->nr == w->capr) {
        size_t c2 = w->capr ? w->capr * 2 : 64;
        nrow *n2 = tp_realloc(w->rows, c2 * sizeof *n2);
        if (!n2) {
            w->oom = 1;
            return w->nr;
        }
        w->rows = n2;
        w->capr = c2;
    }
    uint64_t *per = tp_calloc(w->nw ? w->nw : 1, sizeof *per);
    if (!per) {
        w->oom = 1;
        return w->nr;
    }
    w->rows[w->nr] = (nrow){name, domain, 0, per};
    w->x.slot[at] = (uint32_t)w->nr + 1;
    return w->nr++;
}

/* Gives out the time up to c's start, then takes c in: candidates come in start order. At each
 * change the open candidate first in precedence owns the time up to the next change (a
 * candidate's start or the owner's end); candidates that ended leave the heap when on top. */
static void sweep_feed(csweep *w, const cand *c) {
    for (;;) {
        if (c->s <= w->now) {
            /* the owner is open over all of c and goes first: c would never own an instant
             * (leaving it out keeps the heap to the candidates that may) */
            if (w->nh && cand_before(&w->heap[0], c) && w->heap[0].e >= c->e) return;
            if (w->nh == w->caph) {
                size_t c2 = w->caph ? w->caph * 2 : 64;
                cand *n2 = tp_realloc(w->heap, c2 * sizeof *n2);
                if (!n2) {
                    w->oom = 1;
                    return;
                }
                w->heap = n2;
                w->caph = c2;
            }
            heap_push(w->heap, &w->nh, c);
            return;
        }
        while (w->nh && w->heap[0].e <= w->now) heap_pop(w->heap, &w->nh);
        if (!w->nh) {
            w->now = c->s;
            continue;
        }
        /* the owner keeps the time until it ends or another candidate starts */
        uint64_t until = w->heap[0].e < c->s ? w->heap[0].e : c->s;
        attribute(w->rows, w->heap[0].row, w->cov, w->win, w->nw, w->nwarm, w->now, until);
        w->now = until;
    }
}

/* Gives out the time left once every candidate is in. */
static void sweep_finish(csweep *w) {
    for (;;) {
        while (w->nh && w->heap[0].e <= w->now) heap_pop(w->heap, &w->nh);
        if (!w->nh) return;
        uint64_t until = w->heap[0].e;
        attribute(w->rows, w->heap[0].row, w->cov, w->win, w->nw, w->nwarm, w->now, until);
        w->now = until;
    }
}

/* ------------------------------------------------------------------ candidates */

/* Whether range r can own time of the windows: ended, of some length, and meeting them. */
static int meets_windows(const tp_range *r, const tp_step *win, size_t nw) {
    if (r->flags & TP_R_UNCLOSED) return 0;
    return r->end > r->start && nw && r->end > win[0].start && r->start < win[nw - 1].end;
}

/* Whether thread range k of t (the view's thread) is at the top level under the step: a child
 * of a range that is exactly a window (ranges as steps), or a range at depth 0 (API steps, or
 * no steps) that is not a window itself; with holds (the phases, phase_holders), a range
 * holding the phases gives way to the ranges inside it. */
static int own_top(const tp_thread *t, size_t k, const uint8_t *holds, const tp_step *win,
                   size_t nw) {
    const tp_range *r = &t->ranges[k];
    int top = r->parent >= 0 ? is_window(win, nw, &t->ranges[r->parent]) : !is_window(win, nw, r);
    if (holds && r->parent >= 0 && holds[r->parent]) top = 1;
    if (holds && holds[k]) top = 0;
    return top;
}

/* Whether process range r of thread th belongs to the view of thread t: t started or ended
 * it, and it is not a window itself. */
static int process_top(const tp_thread *t, const tp_thread *th, const tp_range *r,
                       const tp_step *win, size_t nw) {
    return (th == t || r->end_tid == t->os_tid) && !is_window(win, nw, r);
}

/* The candidates of the whole model into the sweep (cpu_basis): the view thread t's own
 * ranges at the top level and the process ranges of its view. */
static void whole_candidates(csweep *w, const tp_process *p, const tp_thread *t, int descend) {
    cand *cv = NULL;
    size_t ncand = 0, capc = 0;
    uint8_t *holds = descend && t ? tp_calloc(t->nranges ? t->nranges : 1, 1) : NULL;
    if (descend && t && !holds) w->oom = 1;
    if (holds) phase_holders(t, holds);
    for (size_t ti = 0; t && !w->oom && ti < p->nthreads; ti++) {
        const tp_thread *th = &p->threads[ti];
        for (size_t k = 0; !w->oom && k < th->nranges; k++) {
            const tp_range *r = &th->ranges[k];
            int process = (r->flags & TP_R_ASYNC) != 0;
            if (r->flags & TP_R_UNCLOSED) continue;
            if (process ? !process_top(t, th, r, w->win, w->nw)
                        : th != t || !own_top(t, k, holds, w->win, w->nw))
                continue;
            if (!meets_windows(r, w->win, w->nw)) continue;
            size_t row = sweep_row(w, r->name, r->domain);
            if (row == w->nr) break;
            if (ncand == capc) {
                size_t c2 = capc ? capc * 2 : 256;
                cand *n2 = tp_realloc(cv, c2 * sizeof *n2);
                if (!n2) {
                    w->oom = 1;
                    break;
                }
                cv = n2;
                capc = c2;
            }
            if (ncand == CAND_PROCESS) { /* the order no longer fits its key */
                w->oom = 1;
                break;
            }
            cv[ncand] = (cand){r->start, r->end, (uint32_t)row,
                               (uint32_t)ncand | (process ? CAND_PROCESS : 0)};
            ncand++;
        }
    }
    free(holds);
    /* the candidates fed in start order through indices: 4 bytes each to sort (a sort of the
     * candidates themselves would take a copy of them all) */
    uint32_t *order = w->oom ? NULL : tp_malloc((ncand ? ncand : 1) * sizeof *order);
    if (!order) w->oom = 1;
    if (!w->oom) {
        for (size_t i = 0; i < ncand; i++) order[i] = (uint32_t)i;
        qsort_r(order, ncand, sizeof *order, by_start_index, cv);
        for (size_t i = 0; i < ncand && !w->oom; i++) sweep_feed(w, &cv[order[i]]);
        sweep_finish(w);
    }
    free(order);
    free(cv);
}

/* ------------------------------------------------------------------ the view's windows */

/* Which CPU basis a rank has, and over which windows (tp_breakdown_compute: the breakdown's
 * rows, without GPU kernels; tp_phases_compute: the phases, with them and measured steps):
 * 0 none, else 1 with *win (into s, or *whole), *nw, *nwarm and *descend set. */
static int cpu_plan(const tp_process *p, const tp_steps *s, tp_step *whole, const tp_step **win,
                    size_t *nw, size_t *nwarm, int *descend) {
    int kernels = 0;
    for (size_t i = 0; i < p->ngpu && !kernels; i++)
        kernels = p->gpu[i].type == TPROF_REC_GPU_KERNEL;
    *whole = (tp_step){p->first_ts, p->end_mono, 0, 0};
    if (kernels) {
        *win = s->steps;
        *nw = s->nsteps;
        *nwarm = s->nwarmup;
        *descend = 1;
        return s->nsteps > s->nwarmup;
    }
    *win = s->nsteps ? s->steps : whole;
    *nw = s->nsteps ? s->nsteps : (p->end_mono > p->first_ts ? 1 : 0);
    *nwarm = s->nsteps ? s->nwarmup : 0;
    *descend = 0;
    return *nw && *nw != *nwarm;
}

/* ------------------------------------------------------------------ streamed */

/* A thread's stack of one domain in the stream: indices into the held ranges, -1 for a range
 * dropped (inside a covering one). */
typedef struct cstack {
    uint32_t domain;
    int32_t *v;
    size_t n, cap;
} cstack;

struct tp_cpu_stream {
    csweep sw;
    tp_step *win;        /* owned copy of the windows */
    size_t thread;       /* the view's thread */
    int descend;
    cand *pc;            /* the view's process ranges, by start */
    size_t npc, ipc;     /* how many, how many fed */
    tp_range *held;      /* the thread's ranges since it last had none open, in its order */
    uint32_t *seq;       /* their order among the thread's ranges (c->pushes when opened) */
    size_t nheld, capheld, maxheld;
    cand *fc;            /* room for capheld candidates, and holds for capheld marks: the */
    uint8_t *holds;      /* hand-over's (stream_flush), kept from one to the next */
    cstack *stk;         /* per domain */
    size_t nstk;
    size_t open;         /* thread ranges open on the thread */
    uint64_t pushes;     /* thread ranges seen on the thread */
    long cover;          /* held index of the open range that covers what opens inside it, -1 */
    int dropped;         /* ranges were dropped inside it */
    uint64_t last_s;     /* the last start fed to the sweep */
    int failed;
};

/* The held ranges of up to this many (56 bytes each and 8 of order) when the caller gives no
 * bound: one top-level range and what it holds, a step and its children. */
#define CPU_STREAM_HELD (1u << 20)

int tp_cpu_stream_new(tp_cpu_stream **out, const tp_process *kept, const tp_steps *s,
                      const tp_cpu_top *top, size_t max_held) {
    *out = NULL;
    tp_step whole;
    const tp_step *win;
    size_t nw, nwarm;
    int descend;
    if (!cpu_plan(kept, s, &whole, &win, &nw, &nwarm, &descend)) return TPROF_OK;
    size_t ti = cpu_thread(kept, s, top);
    if (ti >= kept->nthreads) return TPROF_OK; /* no view: the model's answer is the whole's */
    tp_cpu_stream *c = tp_calloc(1, sizeof *c);
    if (!c) return TPROF_ERR_NO_MEMORY;
    c->win = tp_malloc(nw * sizeof *c->win);
    if (!c->win || sweep_init(&c->sw, c->win, nw, nwarm) != 0) {
        tp_cpu_stream_free(c);
        return TPROF_ERR_NO_MEMORY;
    }
    memcpy(c->win, win, nw * sizeof *c->win);
    c->thread = ti;
    c->descend = descend;
    c->cover = -1;
    c->maxheld = max_held ? max_held : CPU_STREAM_HELD;
    /* the process ranges are all in the kept model (keep mode keeps every start/end range),
     * in their threads' order */
    const tp_thread *t = &kept->threads[ti];
    size_t cap = 0;
    for (size_t i = 0; i < kept->nthreads && !c->sw.oom; i++) {
        const tp_thread *th = &kept->threads[i];
        for (size_t k = 0; k < th->nranges && !c->sw.oom; k++) {
            const tp_range *r = &th->ranges[k];
            if (!(r->flags & TP_R_ASYNC) || !process_top(t, th, r, c->win, nw) ||
                !meets_windows(r, c->win, nw))
                continue;
            size_t row = sweep_row(&c->sw, r->name, r->domain);
            if (row == c->sw.nr) break;
            if (c->npc == cap) {
                cap = cap ? 2 * cap : 64;
                cand *n2 = tp_realloc(c->pc, cap * sizeof *n2);
                if (!n2) {
                    c->sw.oom = 1;
                    break;
                }
                c->pc = n2;
            }
            if (c->npc == CAND_PROCESS) { /* the order no longer fits its key */
                c->sw.oom = 1;
                break;
            }
            c->pc[c->npc] = (cand){r->start, r->end, (uint32_t)row,
                                   (uint32_t)c->npc | CAND_PROCESS};
            c->npc++;
        }
    }
    if (c->sw.oom) {
        tp_cpu_stream_free(c);
        return TPROF_ERR_NO_MEMORY;
    }
    if (c->npc > 1) qsort(c->pc, c->npc, sizeof *c->pc, by_start_seq);
    *out = c;
    return TPROF_OK;
}

void tp_cpu_stream_free(tp_cpu_stream *c) {
    if (!c) return;
    sweep_free(&c->sw);
    for (size_t i = 0; i < c->nstk; i++) free(c->stk[i].v);
    free(c->stk);
    free(c->win);
    free(c->pc);
    free(c->held);
    free(c->seq);
    free(c->fc);
    free(c->holds);
    free(c);
}

int tp_cpu_stream_failed(const tp_cpu_stream *c) { return c && (c->failed || c->sw.oom); }

/* Feeds candidate x, after the process ranges that start before it or with it. */
static void stream_feed(tp_cpu_stream *c, const cand *x) {
    while (c->ipc < c->npc && (!x || c->pc[c->ipc].s <= x->s)) {
        c->last_s = c->pc[c->ipc].s;
        sweep_feed(&c->sw, &c->pc[c->ipc++]);
    }
    if (!x) return;
    if (x->s < c->last_s) { /* out of order (a damaged file): the sweep would differ */
        c->failed = 1;
        return;
    }
    c->last_s = x->s;
    sweep_feed(&c->sw, x);
}

/* Hands the held ranges' candidates to the sweep, in start order, and drops them: no range
 * of the thread is open (or the file ended), so every parent and end among them is known. */
static void stream_flush(tp_cpu_stream *c) {
    if (!c->nheld) return;
    tp_thread t = {0};
    t.ranges = c->held;
    t.nranges = c->nheld;
    uint8_t *holds = c->descend ? c->holds : NULL;
    if (holds) {
        memset(holds, 0, c->nheld);
        phase_holders(&t, holds);
    }
    size_t n = 0;
    for (size_t k = 0; k < c->nheld && !c->sw.oom; k++) {
        const tp_range *r = &c->held[k];
        if (!own_top(&t, k, holds, c->win, c->sw.nw) || !meets_windows(r, c->win, c->sw.nw))
            continue;
        size_t row = sweep_row(&c->sw, r->name, r->domain);
        c->fc[n++] = (cand){r->start, r->end, (uint32_t)row, c->seq[k]};
    }
    if (n > 1) qsort(c->fc, n, sizeof *c->fc, by_start_seq);
    for (size_t i = 0; i < n && !c->sw.oom && !c->failed; i++) stream_feed(c, &c->fc[i]);
    c->nheld = 0;
}

static cstack *stack_of(tp_cpu_stream *c, uint32_t domain) {
    for (size_t i = 0; i < c->nstk; i++)
        if (c->stk[i].domain == domain) return &c->stk[i];
    cstack *n2 = tp_realloc(c->stk, (c->nstk + 1) * sizeof *n2);
    if (!n2) return NULL;
    c->stk = n2;
    c->stk[c->nstk] = (cstack){domain, NULL, 0, 0};
    return &c->stk[c->nstk++];
}

/* Whether no window starts where r starts: then r is no window, however it ends. */
static int no_window_at(const tp_cpu_stream *c, const tp_range *r) {
    size_t w = first_window(c->win, c->sw.nw, r->start);
    return w == c->sw.nw || c->win[w].start != r->start;
}

void tp_cpu_stream_opened(tp_cpu_stream *c, size_t thread, const tp_range *r) {
    if (!c || thread != c->thread || c->failed || c->sw.oom) return;
    cstack *st = stack_of(c, r->domain);
    if (st && st->n == st->cap) {
        size_t cap = st->cap ? 2 * st->cap : 16;
        int32_t *nv = tp_realloc(st->v, cap * sizeof *nv);
        if (nv) {
            st->v = nv;
            st->cap = cap;
        }
        if (!nv) st = NULL;
    }
    if (!st) {
        c->sw.oom = 1;
        return;
    }
    if (c->pushes == CAND_PROCESS) { /* the thread's order no longer fits a candidate's key */
        c->failed = 1;
        return;
    }
    uint32_t seq = (uint32_t)c->pushes++;
    c->open++;
    if (c->cover >= 0) { /* inside a range that owns all of it (file comment) */
        st->v[st->n++] = -1;
        c->dropped = 1;
        return;
    }
    if (c->nheld == c->maxheld) {
        c->failed = 1;
        return;
    }
    if (c->nheld == c->capheld) {
        size_t cap = c->capheld ? 2 * c->capheld : 256;
        tp_range *nh = tp_realloc(c->held, cap * sizeof *nh);
        if (nh) c->held = nh;
        uint32_t *ns = nh ? tp_realloc(c->seq, cap * sizeof *ns) : NULL;
        if (ns) c->seq = ns;
        cand *nf = ns ? tp_realloc(c->fc, cap * sizeof *nf) : NULL;
        if (nf) c->fc = nf;
        uint8_t *nb = nf ? tp_realloc(c->holds, cap) : NULL;
        if (nb) c->holds = nb;
        if (!nb) {
            c->sw.oom = 1;
            return;
        }
        c->capheld = cap;
    }
    tp_range h = *r;
    h.parent = st->n ? st->v[st->n - 1] : -1;
    h.flags |= TP_R_UNCLOSED;
    c->held[c->nheld] = h;
    c->seq[c->nheld] = seq;
    st->v[st->n++] = (int32_t)c->nheld;
    /* a top-level range that no window starts with is a candidate of the breakdown when it
     * ends inside the windows, and then owns every instant of what opens inside it */
    if (!c->descend && h.parent < 0 && no_window_at(c, &h) && h.start < c->win[c->sw.nw - 1].end)
        c->cover = (long)c->nheld;
    c->nheld++;
}

void tp_cpu_stream_closed(tp_cpu_stream *c, size_t thread, const tp_range *r) {
    if (!c || thread != c->thread || c->failed || c->sw.oom) return;
    cstack *st = stack_of(c, r->domain);
    if (!st || !st->n) { /* not the loader's pop: the stream cannot follow the file */
        c->failed = 1;
        return;
    }
    int32_t k = st->v[--st->n];
    c->open--;
    if (k >= 0) {
        tp_range *h = &c->held[k];
        if (h->start != r->start || h->name != r->name) {
            c->failed = 1;
            return;
        }
        h->end = r->end;
        h->flags = r->flags;
    }
    if (k >= 0 && k == c->cover) {
        /* what was dropped inside it owned nothing only if it is a candidate */
        if (c->dropped && !meets_windows(&c->held[k], c->win, c->sw.nw)) c->failed = 1;
        c->cover = -1;
        c->dropped = 0;
    }
    if (!c->open && c->cover < 0) stream_flush(c);
}

int tp_cpu_stream_finish(tp_cpu_stream *c, const tp_process *p) {
    if (!c) return TPROF_OK;
    /* a covering range never closed is no candidate: what it dropped may have owned time */
    if (c->cover >= 0 && c->dropped) c->failed = 1;
    c->cover = -1;
    /* the ranges never closed end at their thread's last event (model.c), as parents */
    uint64_t last = c->thread < p->nthreads ? p->threads[c->thread].last_ts : 0;
    for (size_t k = 0; k < c->nheld; k++)
        if (c->held[k].flags & TP_R_UNCLOSED)
            c->held[k].end = last > c->held[k].start ? last : c->held[k].start;
    if (!c->failed && !c->sw.oom) stream_flush(c);
    if (!c->failed && !c->sw.oom) stream_feed(c, NULL);
    if (!c->failed && !c->sw.oom) sweep_finish(&c->sw);
    if (c->sw.oom) return TPROF_ERR_NO_MEMORY;
    return c->failed ? 1 : TPROF_OK;
}
/* The CPU breakdown's rows (rows[0..nr), most time first), the untracked rest and the
 * warm-up steps into *out. val: room for nw values. */
static void cpu_results(tp_breakdown_result *out, const tp_process *p, const nrow *rows,
                        size_t nr, const uint64_t *cov, double *val, const tp_step *win,
                        size_t nw, size_t nwarm) {
    size_t nm = nw - nwarm;
    double T = 0;
    for (size_t w = nwarm; w < nw; w++) T += (double)(win[w].end - win[w].start);
    size_t shown = nr < CPU_ROWS ? nr : CPU_ROWS;
    size_t nrows = shown < nr ? shown + 1 : shown;
    out->ranges = tp_calloc(nrows ? nrows : 1, sizeof *out->ranges);
    out->warmup = tp_calloc(nwarm ? nwarm : 1, sizeof *out->warmup);
    if (!out->ranges || !out->warmup) return;
    for (size_t i = 0; i < nrows; i++) {
        int rest = i == CPU_ROWS; /* the remaining names together */
        tp_bd_range *o = &out->ranges[out->nranges++];
        o->name = rest ? "(other ranges)" : rows[i].name;
        const char *dom = rest ? "" : tp_domain_name(p, rows[i].domain);
        if (*dom) o->domain = dom;
        double tot = 0;
        for (size_t w = 0; w < nm; w++) {
            double v = 0;
            for (size_t j = i; j < (rest ? nr : i + 1); j++) v += (double)rows[j].per[nwarm + w];
            val[w] = v / 1e6;
            tot += v;
        }
        o->ms = tp_stat5_of(val, nm);
        o->share = T > 0 ? tot / T : 0;
    }
    for (size_t w = 0; w < nm; w++)
        val[w] = (double)(win[nwarm + w].end - win[nwarm + w].start) / 1e6;
    out->step_ms = tp_stat5_of(val, nm);
    double un = 0;
    for (size_t w = 0; w < nm; w++) {
        uint64_t l = win[nwarm + w].end - win[nwarm + w].start, c = cov[nwarm + w];
        val[w] = (double)(l > c ? l - c : 0) / 1e6;
        un += val[w];
    }
    out->untracked_ms = tp_stat5_of(val, nm);
    out->untracked_share = T > 0 ? un * 1e6 / T : 0;
    for (size_t w = 0; w < nwarm; w++) {
        tp_bd_warmup *x = &out->warmup[out->nwarmup++];
        uint64_t l = win[w].end - win[w].start;
        x->step = (double)win[w].app_step;
        x->step_ms = (double)l / 1e6;
        for (size_t i = 0; i < nr && i < CPU_ROWS; i++)
            if (rows[i].per[w]) {
                x->ranges[x->nranges].name = rows[i].name;
                x->ranges[x->nranges++].ms = (double)rows[i].per[w] / 1e6;
            }
        x->untracked_ms = (double)(l > cov[w] ? l - cov[w] : 0) / 1e6;
    }
    out->has_cpu = 1;
}

_Static_assert(CPU_ROWS == TP_BD_CPU_ROWS, "results.h holds the rows shown");
/* ------------------------------------------------------------------ the basis */

void tp_cpu_basis(tp_breakdown_result *out, const tp_process *p, const tp_steps *st,
                  const tp_step *win, size_t nw, size_t nwarm, int descend,
                  tp_cpu_stream *streamed) {
    csweep own, *w = &own;
    if (streamed && !streamed->failed && !streamed->sw.oom && streamed->descend == descend &&
        streamed->sw.nw == nw) {
        w = &streamed->sw; /* its rows are taken below: it gives them once */
    } else {
        if (sweep_init(&own, win, nw, nwarm) != 0) return;
        size_t ti = cpu_thread(p, st, NULL);
        whole_candidates(&own, p, ti < p->nthreads ? &p->threads[ti] : NULL, descend);
    }
    double *val = tp_malloc((nw ? nw : 1) * sizeof *val);
    if (val && !w->oom) {
        /* rows that never owned any time (wholly inside another range) are not shown */
        size_t k = 0;
        for (size_t i = 0; i < w->nr; i++) {
            uint64_t any = 0;
            for (size_t j = 0; j < nw && !any; j++) any = w->rows[i].per[j];
            if (any) w->rows[k++] = w->rows[i];
            else free(w->rows[i].per);
        }
        w->nr = k;
        if (w->nr > 1) qsort(w->rows, w->nr, sizeof *w->rows, by_total);
        cpu_results(out, p, w->rows, w->nr, w->cov, val, win, nw, nwarm);
    }
    free(val);
    sweep_free(w);
    if (w != &own) streamed->failed = 1; /* given once */
}

/* ------------------------------------------------------------------ top-level time */

void tp_cpu_top_closed(tp_cpu_top *t, size_t thread, const tp_range *r) {
    if (r->depth != 0 || (r->flags & (TP_R_ASYNC | TP_R_UNCLOSED)) || t->oom) return;
    if (thread >= t->n) {
        size_t n = thread + 8;
        uint64_t *nv = tp_realloc(t->ns, n * sizeof *nv);
        if (!nv) {
            t->oom = 1;
            return;
        }
        memset(nv + t->n, 0, (n - t->n) * sizeof *nv);
        t->ns = nv;
        t->n = n;
    }
    t->ns[thread] += r->end - r->start;
}

void tp_cpu_top_free(tp_cpu_top *t) {
    free(t->ns);
    memset(t, 0, sizeof *t);
}
