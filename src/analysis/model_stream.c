/*
 * model_stream.c — a rank file's thread ranges in bounded memory while it is read (model.h,
 * tp_range_stream): each thread's range array is compacted when it fills, keeping the open
 * ranges and those the mode needs; in take mode the nesting the whole load computes after
 * reading (model.c, nesting) is swept as the records come, and each range handed over once
 * its figures are final.
 *
 * Why the sweep is exact. The whole load sorts a thread's synchronous ranges (module ranges
 * left out) by start, the longer first, and keeps a stack of enclosing ranges: a range pops
 * the ranges on top that end before it ends, becomes the child of the top, and is pushed. On
 * one thread the records come in time order, so when a range is pushed every range on the
 * stack that is already closed ended at or before its start: it pops them all (a range that
 * ends later does; one of no length, which adds nothing to any figure, would have become
 * their child instead). The sweep therefore drops a range from its stack at its pop, and
 * its stack holds the open ranges alone. A range still open when a later one is pushed
 * encloses it unless it ends first while the later one is open: that crossing is seen at its
 * pop (it is not on top), and so is a time that runs backwards; either fails the stream (the
 * caller reads the file whole). A range's time reaches its parent at its pop, so a closed
 * range's child_ns is final. Recursion is a count per (name, domain) on the stack, as the
 * whole load's sort keeps it, so that a push and a pop cost a step each however deep the
 * stack (recursion thousands deep, or pushes never popped).
 *
 * Why the order of the hand-over keeps the sums exact: the range tables add each range's
 * time to its (name, domain) row in the thread's order, the threads in turn; a closed range
 * is handed over when no earlier range of its row on the thread is still held (open, or a
 * start/end range, whose end is known only at the end of the file).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "analysis/model_load.h"
#include "analysis/alloc.h"
#include "trainprof.h"

/* Marks the stream keeps in tp_range.flags while the file is read, cleared before the model
 * is handed over. */
#define R_TAKEN 0x8000 /* handed to take() */
#define R_HOLD 0x4000  /* kept by the compaction under way */

/* A thread's array is compacted when it is full and holds at least this many ranges. */
#define STREAM_MIN_RANGES 4096

/* How many ranges of a (name, domain) the sweep's stack holds: open addressing, NULL name =
 * empty; a row stays once made (at most one per distinct name of the thread). */
typedef struct nestcount {
    const char *name;
    uint32_t domain, count;
} nestcount;

typedef struct sweep {
    uint32_t *v; /* the open ranges, outermost first: indices into the thread's array */
    size_t n, cap;
    uint64_t last_ts; /* the thread's last push or pop the sweep saw */
    nestcount *cnt;   /* the stack's ranges by (name, domain); ccap slots, a power of two */
    size_t ncnt, ccap;
} sweep;

struct tp_rstream {
    tp_range_stream *pub; /* NULL: a slim load */
    sweep *sw;            /* per thread (take mode) */
    size_t nsw;
};

struct tp_rstream *tp_stream_new(tp_range_stream *pub) {
    struct tp_rstream *s = tp_calloc(1, sizeof *s);
    if (s) s->pub = pub;
    if (pub) pub->failed = 0;
    return s;
}

void tp_stream_free(struct tp_rstream *s) {
    if (!s) return;
    for (size_t i = 0; i < s->nsw; i++) {
        free(s->sw[i].v);
        free(s->sw[i].cnt);
    }
    free(s->sw);
    free(s);
}

static int taking(const struct tp_rstream *s) {
    return s->pub && !s->pub->keep && !s->pub->failed;
}

static sweep *sweep_of(struct tp_rstream *s, size_t ti) {
    if (ti >= s->nsw) {
        size_t n = ti + 8;
        sweep *nv = tp_realloc(s->sw, n * sizeof *nv);
        if (!nv) return NULL;
        memset(nv + s->nsw, 0, (n - s->nsw) * sizeof *nv);
        s->sw = nv;
        s->nsw = n;
    }
    return &s->sw[ti];
}

/* The stream gives up (take mode): the sweep is dropped, nothing more is handed over. */
static void give_up(struct tp_rstream *s) {
    s->pub->failed = 1;
    for (size_t i = 0; i < s->nsw; i++) s->sw[i].n = 0;
}

static size_t count_slot(const nestcount *tab, size_t mask, const char *name, uint32_t domain) {
    size_t h = (((uintptr_t)name >> 3) * 0x9E3779B97F4A7C15ull + domain) & mask;
    while (tab[h].name && (tab[h].name != name || tab[h].domain != domain)) h = (h + 1) & mask;
    return h;
}

/* The count of (name, domain) on w's stack, made (at 0) when missing; NULL when out of
 * memory. */
static nestcount *count_of(sweep *w, const char *name, uint32_t domain) {
    if (w->ccap) {
        nestcount *c = &w->cnt[count_slot(w->cnt, w->ccap - 1, name, domain)];
        if (c->name) return c;
    }
    if (2 * (w->ncnt + 1) > w->ccap) { /* at most half full: rebuild at twice the size */
        size_t cap = w->ccap ? 2 * w->ccap : 64;
        nestcount *nt = tp_calloc(cap, sizeof *nt);
        if (!nt) return NULL;
        for (size_t i = 0; i < w->ccap; i++)
            if (w->cnt[i].name)
                nt[count_slot(nt, cap - 1, w->cnt[i].name, w->cnt[i].domain)] = w->cnt[i];
        free(w->cnt);
        w->cnt = nt;
        w->ccap = cap;
    }
    nestcount *c = &w->cnt[count_slot(w->cnt, w->ccap - 1, name, domain)];
    *c = (nestcount){name, domain, 0};
    w->ncnt++;
    return c;
}

int tp_stream_push(loader *L, size_t ti, size_t k) {
    struct tp_rstream *s = L->rs;
    tp_thread *t = &L->p->threads[ti];
    tp_range *r = &t->ranges[k];
    if (s->pub && s->pub->opened) s->pub->opened(s->pub->ctx, ti, r);
    if (!taking(s)) return 0;
    if (tp_module_range(r->name)) return 0; /* transparent to nesting (model.h) */
    sweep *w = sweep_of(s, ti);
    if (!w) return TPROF_ERR_NO_MEMORY;
    if (r->start < w->last_ts) {
        give_up(s);
        return 0;
    }
    w->last_ts = r->start;
    nestcount *c = count_of(w, r->name, r->domain);
    if (!c) return TPROF_ERR_NO_MEMORY;
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        uint32_t *nv = tp_realloc(w->v, cap * sizeof *nv);
        if (!nv) return TPROF_ERR_NO_MEMORY;
        w->v = nv;
        w->cap = cap;
    }
    if (c->count++) r->flags |= TP_R_NESTED_SAME;
    w->v[w->n++] = (uint32_t)k;
    return 0;
}

int tp_stream_pop(loader *L, size_t ti, size_t k, uint64_t ts) {
    struct tp_rstream *s = L->rs;
    tp_thread *t = &L->p->threads[ti];
    const tp_range *r = &t->ranges[k];
    if (s->pub && s->pub->closed) s->pub->closed(s->pub->ctx, ti, r);
    if (!taking(s)) return 0;
    if (tp_module_range(r->name)) return 0;
    sweep *w = sweep_of(s, ti);
    if (!w) return TPROF_ERR_NO_MEMORY;
    if (ts < w->last_ts) {
        give_up(s);
        return 0;
    }
    w->last_ts = ts;
    /* the stack holds open ranges alone: one above k is a crossing */
    if (!w->n || w->v[w->n - 1] != k) {
        give_up(s);
        return 0;
    }
    w->n--;
    count_of(w, r->name, r->domain)->count--; /* made at its push */
    if (w->n) t->ranges[w->v[w->n - 1]].child_ns += r->end - r->start;
    return 0;
}

/* (name, domain) rows held back in a hand-over walk: open addressing, NULL name = empty. */
typedef struct rowkey {
    const char *name;
    uint32_t domain;
} rowkey;

static size_t rowkey_slot(const rowkey *tab, size_t mask, const char *name, uint32_t domain) {
    size_t h = (((uintptr_t)name >> 3) * 0x9E3779B97F4A7C15ull + domain) & mask;
    while (tab[h].name && (tab[h].name != name || tab[h].domain != domain)) h = (h + 1) & mask;
    return h;
}

/* Hands thread ti's ranges over in its order: at the end of the file (final) all of them;
 * before, the closed ones no earlier held range of their row precedes. */
static int hand_over(loader *L, size_t ti, int final) {
    tp_range_stream *pub = L->rs->pub;
    tp_thread *t = &L->p->threads[ti];
    size_t nb = 0;
    for (size_t k = 0; !final && k < t->nranges; k++)
        nb += !(t->ranges[k].flags & R_TAKEN) &&
              (t->ranges[k].flags & (TP_R_UNCLOSED | TP_R_ASYNC));
    size_t cap = 16;
    while (cap < 2 * nb) cap *= 2;
    rowkey *held = nb ? tp_calloc(cap, sizeof *held) : NULL;
    if (nb && !held) return TPROF_ERR_NO_MEMORY;
    for (size_t k = 0; k < t->nranges; k++) {
        tp_range *r = &t->ranges[k];
        if (r->flags & R_TAKEN) continue;
        if (!final && (r->flags & (TP_R_UNCLOSED | TP_R_ASYNC))) {
            size_t h = rowkey_slot(held, cap - 1, r->name, r->domain);
            held[h] = (rowkey){r->name, r->domain};
            continue;
        }
        if (held && held[rowkey_slot(held, cap - 1, r->name, r->domain)].name) continue;
        pub->take(pub->ctx, ti, r);
        r->flags |= R_TAKEN;
    }
    free(held);
    return 0;
}

/* The last range of the slim process (model.c, thread_last_range) among those closed: the
 * one that ended last, the first of them. Index, or t->nranges for none. */
static size_t last_closed(const tp_thread *t) {
    size_t best = t->nranges;
    for (size_t k = 0; k < t->nranges; k++) {
        const tp_range *r = &t->ranges[k];
        if (r->flags & TP_R_UNCLOSED) continue;
        if (best == t->nranges || r->end > t->ranges[best].end) best = k;
    }
    return best;
}

/* Marks in R_HOLD the ranges of t the compaction keeps (the mode's, the open ones and the
 * start/end ones), and in slim and keep modes every range around them. */
static void mark_held(loader *L, tp_thread *t, size_t ti) {
    struct tp_rstream *s = L->rs;
    const tp_range_stream *pub = s->pub;
    for (size_t k = 0; k < t->nranges; k++) {
        tp_range *r = &t->ranges[k];
        int hold = (r->flags & (TP_R_UNCLOSED | TP_R_ASYNC)) != 0;
        if (!hold && pub && pub->keep) {
            const tp_range *par = r->parent >= 0 && (size_t)r->parent < t->nranges
                                      ? &t->ranges[r->parent] : NULL;
            hold = pub->keep(pub->ctx, L->p, r, par) != 0;
        } else if (!hold && pub && !pub->failed) {
            hold = !(r->flags & R_TAKEN);
        }
        if (hold) r->flags |= R_HOLD;
    }
    if (!pub) {
        size_t b = last_closed(t);
        if (b < t->nranges) t->ranges[b].flags |= R_HOLD;
    }
    if (pub && !pub->keep) { /* the sweep's stack is read at the next push */
        sweep *w = ti < s->nsw ? &s->sw[ti] : NULL;
        for (size_t i = 0; w && i < w->n; i++) t->ranges[w->v[i]].flags |= R_HOLD;
        return;
    }
    for (size_t k = t->nranges; k-- > 0;) { /* parents precede their children */
        const tp_range *r = &t->ranges[k];
        if ((r->flags & R_HOLD) && r->parent >= 0 && (size_t)r->parent < k)
            t->ranges[r->parent].flags |= R_HOLD;
    }
}

/* Keeps of thread ti's ranges those marked, in their order, every index into them renumbered
 * (parents, the loader's stacks, the sweep's); a parent not kept reads -1. */
static int compact(loader *L, size_t ti) {
    tp_thread *t = &L->p->threads[ti];
    int32_t *map = tp_malloc(t->nranges * sizeof *map);
    if (!map) return TPROF_ERR_NO_MEMORY;
    mark_held(L, t, ti);
    size_t n = 0;
    for (size_t k = 0; k < t->nranges; k++) {
        tp_range r = t->ranges[k];
        if (!(r.flags & R_HOLD)) {
            map[k] = -1;
            continue;
        }
        r.flags &= (uint16_t)~R_HOLD;
        if (r.parent >= 0) r.parent = (size_t)r.parent < k ? map[r.parent] : -1;
        map[k] = (int32_t)n;
        t->ranges[n++] = r;
    }
    tload *tl = &L->tl[ti];
    for (size_t i = 0; i < tl->nstacks; i++)
        for (size_t j = 0; j < tl->stacks[i].n; j++)
            tl->stacks[i].idx[j] = map[tl->stacks[i].idx[j]];
    struct tp_rstream *s = L->rs;
    if (ti < s->nsw)
        for (size_t i = 0; i < s->sw[ti].n; i++) s->sw[ti].v[i] = (uint32_t)map[s->sw[ti].v[i]];
    t->nranges = n;
    free(map);
    return 0;
}

int tp_stream_room(loader *L, size_t ti) {
    tp_thread *t = &L->p->threads[ti];
    size_t min = L->rs->pub && L->rs->pub->min_ranges ? L->rs->pub->min_ranges
                                                       : STREAM_MIN_RANGES;
    if (t->nranges < t->cap_ranges || t->nranges < min) return 0;
    if (taking(L->rs) && hand_over(L, ti, 0) != 0) return TPROF_ERR_NO_MEMORY;
    if (compact(L, ti) != 0) return TPROF_ERR_NO_MEMORY;
    if (t->nranges * 2 <= t->cap_ranges) return 0;
    /* more than half is kept: grow now, so that compactions stay apart */
    tp_range *nv = tp_realloc(t->ranges, 2 * t->cap_ranges * sizeof *nv);
    if (!nv) return TPROF_ERR_NO_MEMORY;
    t->ranges = nv;
    t->cap_ranges *= 2;
    return 0;
}

int tp_stream_finish(loader *L) {
    struct tp_rstream *s = L->rs;
    tp_process *p = L->p;
    int rc = 0;
    for (size_t i = 0; i < p->nthreads; i++) {
        tp_thread *t = &p->threads[i];
        /* the ranges never closed (the sweep's stack) end now (finish_process): their time
         * reaches their parents as the whole load's nesting counts it */
        sweep *w = taking(s) && i < s->nsw ? &s->sw[i] : NULL;
        for (size_t j = 1; w && j < w->n; j++) {
            const tp_range *r = &t->ranges[w->v[j]];
            t->ranges[w->v[j - 1]].child_ns += r->end - r->start;
        }
        if (taking(s) && rc == 0) rc = hand_over(L, i, 1);
        if (s->pub && !s->pub->keep) { /* take mode: the model keeps no range */
            free(t->ranges);
            t->ranges = NULL;
            t->nranges = t->cap_ranges = 0;
        }
        for (size_t k = 0; k < t->nranges; k++)
            t->ranges[k].flags &= (uint16_t)~(R_TAKEN | R_HOLD);
    }
    return rc;
}
