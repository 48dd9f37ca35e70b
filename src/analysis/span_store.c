/*
 * span_store.c — spans held to a bound, then sorted runs in a temporary file, walked in start
 * order by a k-way merge over a heap of the runs' heads (span_store.h).
 */
#define _GNU_SOURCE
#include "analysis/span_store.h"
#include "analysis/alloc.h"
#include "analysis/report_spill.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "trainprof.h"

/* A walk reads a run this many spans at a time (8 kB), fewer when the runs are shorter. */
#define WALK_BLOCK 512

typedef struct run {
    uint64_t off; /* in the file, bytes */
    size_t n;     /* spans */
} run;

struct tp_span_store {
    size_t hold;     /* spans held before a run is written */
    tp_span *v;      /* the spans held, n of cap: the tail, sorted once sealed */
    size_t n, cap;
    int fd;          /* the runs' file; -1 before the first run */
    int nofile;      /* no file could be made or written: the spans stay in memory */
    run *runs;
    size_t nruns, cruns;
    uint64_t end;    /* the file's length */
    size_t total;    /* spans kept */
    _Atomic int failed;
};

tp_span_store *tp_span_store_new(size_t hold) {
    tp_span_store *st = tp_calloc(1, sizeof *st);
    if (!st) return NULL;
    st->hold = hold ? hold : 1;
    st->fd = -1;
    return st;
}

/* The spans held, sorted, written as a run: TPROF_OK (held ones gone), TPROF_ERR_NO_MEMORY,
 * or TPROF_OK with st->nofile set when no file takes them (they stay). */
static int write_run(tp_span_store *st) {
    if (st->nruns == st->cruns) {
        size_t nc = st->cruns ? 2 * st->cruns : 16;
        run *r = tp_realloc(st->runs, nc * sizeof *r);
        if (!r) return TPROF_ERR_NO_MEMORY;
        st->runs = r;
        st->cruns = nc;
    }
    if (st->fd < 0) st->fd = tp_spill_tmpfile();
    tp_spans_sort(st->v, st->n);
    if (st->fd < 0 || tp_spill_pwrite_all(st->fd, st->v, st->n * sizeof *st->v, st->end)) {
        st->nofile = 1; /* a part written stays unread in the file */
        return TPROF_OK;
    }
    st->runs[st->nruns++] = (run){st->end, st->n};
    st->end += st->n * sizeof *st->v;
    st->n = 0;
    return TPROF_OK;
}

int tp_span_store_push(tp_span_store *st, uint64_t s, uint64_t e) {
    if (e <= s) return TPROF_OK;
    if (st->n == st->hold && !st->nofile) {
        int rc = write_run(st);
        if (rc != TPROF_OK) return rc;
    }
    if (st->n == st->cap) {
        size_t nc = st->cap ? 2 * st->cap : 256;
        if (!st->nofile && nc > st->hold) nc = st->hold;
        if (nc <= st->cap) nc = st->cap + 1;
        tp_span *v = tp_realloc(st->v, nc * sizeof *v);
        if (!v) return TPROF_ERR_NO_MEMORY;
        st->v = v;
        st->cap = nc;
    }
    st->v[st->n++] = (tp_span){s, e};
    st->total++;
    return TPROF_OK;
}

void tp_span_store_seal(tp_span_store *st) {
    if (!st) return;
    tp_spans_sort(st->v, st->n);
    if (st->n < st->cap) { /* held for the section: their size, not their room */
        tp_span *fit = st->n ? tp_realloc(st->v, st->n * sizeof *fit) : NULL;
        if (fit || !st->n) {
            if (!st->n) free(st->v);
            st->v = fit;
            st->cap = st->n;
        }
    }
}

size_t tp_span_store_count(const tp_span_store *st) { return st ? st->total : 0; }

int tp_span_store_failed(const tp_span_store *st) { return st && atomic_load(&st->failed); }

void tp_span_store_free(tp_span_store *st) {
    if (!st) return;
    if (st->fd >= 0) close(st->fd);
    free(st->v);
    free(st->runs);
    free(st);
}

/* ------------------------------------------------------------------ walks */

/* A run in a walk: its spans [i, n) still to give, those of [bi, bn) in its block. The held
 * spans are a run whose block is the store's array. */
typedef struct cursor {
    const tp_span *b; /* the block */
    size_t bi, bn;
    uint64_t off;     /* the run's first span in the file */
    size_t i, n;      /* spans of the run read into blocks so far; in all */
    tp_span *own;     /* the block's room, for a run of the file */
} cursor;

struct tp_span_walk {
    const tp_span_store *st;
    cursor *c;
    size_t *heap; /* cursors with spans left, a min-heap by their next span's start */
    size_t nheap;
    size_t block;
    int dead;     /* a read failed */
};

static uint64_t head(const tp_span_walk *w, size_t k) {
    const cursor *c = &w->c[w->heap[k]];
    return c->b[c->bi].s;
}

static void sift_down(tp_span_walk *w, size_t k) {
    for (;;) {
        size_t l = 2 * k + 1, m = k;
        if (l < w->nheap && head(w, l) < head(w, m)) m = l;
        if (l + 1 < w->nheap && head(w, l + 1) < head(w, m)) m = l + 1;
        if (m == k) return;
        size_t t = w->heap[k];
        w->heap[k] = w->heap[m];
        w->heap[m] = t;
        k = m;
    }
}

/* The next block of a run of the file into its room: 1, or 0 at its end or on a failed read
 * (w->dead, the store's failed). */
static int fill(tp_span_walk *w, cursor *c) {
    if (!c->own || c->i == c->n) return 0;
    size_t k = c->n - c->i < w->block ? c->n - c->i : w->block;
    char *p = (char *)c->own;
    size_t want = k * sizeof *c->own, got = 0;
    uint64_t at = c->off + c->i * sizeof *c->own;
    while (got < want) {
        ssize_t r = pread(w->st->fd, p + got, want - got, (off_t)(at + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            w->dead = 1;
            atomic_store(&((tp_span_store *)w->st)->failed, 1);
            return 0;
        }
        got += (size_t)r;
    }
    c->i += k;
    c->bi = 0;
    c->bn = k;
    return 1;
}

tp_span_walk *tp_span_walk_open(const tp_span_store *st) {
    tp_span_walk *w = tp_calloc(1, sizeof *w);
    if (!w) return NULL;
    w->st = st;
    size_t nc = st ? st->nruns + 1 : 0;
    w->block = st && st->hold < WALK_BLOCK ? st->hold : WALK_BLOCK;
    w->c = nc ? tp_calloc(nc, sizeof *w->c) : NULL;
    w->heap = nc ? tp_malloc(nc * sizeof *w->heap) : NULL;
    if (nc && (!w->c || !w->heap)) {
        tp_span_walk_close(w);
        return NULL;
    }
    for (size_t k = 0; st && k < st->nruns; k++) {
        cursor *c = &w->c[k];
        c->off = st->runs[k].off;
        c->n = st->runs[k].n;
        c->own = tp_malloc(w->block * sizeof *c->own);
        if (!c->own) {
            tp_span_walk_close(w);
            return NULL;
        }
        c->b = c->own;
        if (fill(w, c)) w->heap[w->nheap++] = k;
    }
    if (st && st->n) {
        w->c[st->nruns] = (cursor){.b = st->v, .bn = st->n};
        w->heap[w->nheap++] = st->nruns;
    }
    for (size_t k = w->nheap / 2; k-- > 0;) sift_down(w, k);
    return w;
}

int tp_span_walk_next(void *walk, tp_span *out) {
    tp_span_walk *w = walk;
    if (w->dead || !w->nheap) return 0;
    cursor *c = &w->c[w->heap[0]];
    *out = c->b[c->bi++];
    if (c->bi == c->bn && !fill(w, c)) {
        if (w->dead) return 0;
        w->heap[0] = w->heap[--w->nheap];
    }
    if (w->nheap) sift_down(w, 0);
    return 1;
}

void tp_span_walk_close(tp_span_walk *w) {
    if (!w) return;
    for (size_t k = 0; w->c && w->st && k < w->st->nruns; k++) free(w->c[k].own);
    free(w->c);
    free(w->heap);
    free(w);
}
