/*
 * span_store.c — spans held to a bound, then sorted runs in a temporary file, walked in start
 * order by a k-way merge over a heap of the runs' heads (span_store.h). FANIN runs of one
 * level are merged into one of the next as soon as they are written (a log-structured merge),
 * so a walk never merges more than FANIN - 1 runs a level, whatever the bound: with runs of
 * a span each, 10^9 spans make 5 levels, at most 315 runs. Where a merge cannot be made, the
 * spans after it stay in memory (as where no file can be written).
 */
#define _GNU_SOURCE
#include "analysis/span_store.h"
#include "analysis/alloc.h"
#include "analysis/report_spill.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "trainprof.h"

/* A walk reads a run this many spans at a time (8 kB), fewer when the run is shorter. */
#define WALK_BLOCK 512
/* Runs of one level merged into one of the next. */
#define FANIN 64

typedef struct run {
    uint64_t off; /* in the file, bytes */
    size_t n;     /* spans */
    unsigned level; /* 0: written from memory; k + 1: a merge of FANIN runs of level k */
} run;

static _Atomic unsigned long g_read_failures;

unsigned long tp_span_store_read_failures(void) { return atomic_load(&g_read_failures); }

struct tp_span_store {
    size_t hold;     /* spans held before a run is written */
    tp_span *v;      /* the spans held, n of cap: the tail, sorted once sealed */
    size_t n, cap;
    int fd;          /* the runs' file; -1 before the first run */
    int nofile;      /* no file could be made or written, or a merge could not be made
                      * (compact): the spans stay in memory, no run is written or merged
                      * again */
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

size_t tp_span_store_count(const tp_span_store *st) { return st ? st->total : 0; }

size_t tp_span_store_runs(const tp_span_store *st) { return st ? st->nruns : 0; }

int tp_span_store_failed(const tp_span_store *st) { return st && atomic_load(&st->failed); }

/* The store's file gave back less than was written, or not what was written. */
static void store_failed(const tp_span_store *st) {
    int was = atomic_exchange(&((tp_span_store *)st)->failed, 1);
    if (!was) atomic_fetch_add(&g_read_failures, 1);
}

void tp_span_store_free(tp_span_store *st) {
    if (!st) return;
    if (st->fd >= 0) close(st->fd);
    free(st->v);
    free(st->runs);
    free(st);
}

/* ------------------------------------------------------------------ walks */

/* A run in a walk: its spans [i, n) still to read, those of [bi, bn) in its block. The held
 * spans are a run whose block is the store's array. */
typedef struct cursor {
    const tp_span *b; /* the block */
    size_t bi, bn;
    uint64_t off;     /* the run's first span in the file */
    size_t i, n;      /* spans of the run read into blocks so far; in all */
    uint64_t last;    /* the start of the span read last: a run is sorted */
    tp_span *own;     /* the block's room, for a run of the file */
} cursor;

struct tp_span_walk {
    const tp_span_store *st;
    cursor *c;
    size_t nc;
    size_t *heap; /* cursors with spans left, a min-heap by their next span's start */
    size_t nheap;
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

/* The next block of a run of the file into its room: 1, or 0 at its end or on a read that
 * failed or gave what was not written, spans that are empty or out of order (w->dead, the
 * store failed). */
static int fill(tp_span_walk *w, cursor *c) {
    if (!c->own || c->i == c->n) return 0;
    size_t k = c->n - c->i < WALK_BLOCK ? c->n - c->i : WALK_BLOCK;
    char *p = (char *)c->own;
    size_t want = k * sizeof *c->own, got = 0;
    uint64_t at = c->off + c->i * sizeof *c->own;
    while (got < want) {
        ssize_t r = pread(w->st->fd, p + got, want - got, (off_t)(at + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    for (size_t j = 0; got == want && j < k; j++) {
        if (c->own[j].e <= c->own[j].s || c->own[j].s < c->last) got = 0;
        c->last = c->own[j].s;
    }
    if (got != want) {
        w->dead = 1;
        store_failed(w->st);
        return 0;
    }
    c->i += k;
    c->bi = 0;
    c->bn = k;
    return 1;
}

/* A walk of runs [a, b) of st, and of the spans held when `held`; NULL without memory. */
static tp_span_walk *walk_of(const tp_span_store *st, size_t a, size_t b, int held) {
    tp_span_walk *w = tp_calloc(1, sizeof *w);
    if (!w) return NULL;
    w->st = st;
    w->nc = b - a + 1;
    w->c = tp_calloc(w->nc, sizeof *w->c);
    w->heap = tp_malloc(w->nc * sizeof *w->heap);
    if (!w->c || !w->heap) {
        tp_span_walk_close(w);
        return NULL;
    }
    for (size_t k = 0; k < b - a; k++) {
        cursor *c = &w->c[k];
        c->off = st->runs[a + k].off;
        c->n = st->runs[a + k].n;
        c->own = tp_malloc((c->n < WALK_BLOCK ? c->n : WALK_BLOCK) * sizeof *c->own);
        if (!c->own) {
            tp_span_walk_close(w);
            return NULL;
        }
        c->b = c->own;
        if (fill(w, c)) w->heap[w->nheap++] = k;
    }
    if (held && st->n) {
        w->c[b - a] = (cursor){.b = st->v, .bn = st->n};
        w->heap[w->nheap++] = b - a;
    }
    for (size_t k = w->nheap / 2; k-- > 0;) sift_down(w, k);
    return w;
}

tp_span_walk *tp_span_walk_open(const tp_span_store *st) {
    static const tp_span_store none = {.fd = -1};
    return walk_of(st ? st : &none, 0, st ? st->nruns : 0, 1);
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
    for (size_t k = 0; w->c && k < w->nc; k++) free(w->c[k].own);
    free(w->c);
    free(w->heap);
    free(w);
}

/* ------------------------------------------------------------------ writing */

/* The last FANIN runs, while they are of one level, merged into one run of the next, written
 * after them; the file's room for them given back where the file system can (a hole
 * punched). A merge that cannot be made leaves the runs as they are: the walks are the same,
 * their blocks more. */
static void compact(tp_span_store *st) {
    while (st->nruns >= FANIN) {
        size_t a = st->nruns - FANIN;
        unsigned lv = st->runs[a].level;
        for (size_t k = a + 1; k < st->nruns; k++)
            if (st->runs[k].level != lv) return;
        tp_span_walk *w = walk_of(st, a, st->nruns, 0);
        tp_span *out = w ? tp_malloc(WALK_BLOCK * sizeof *out) : NULL;
        uint64_t at = st->end;
        size_t n = 0, nb = 0;
        int ok = out != NULL;
        tp_span x;
        while (ok && tp_span_walk_next(w, &x)) {
            out[nb++] = x;
            if (nb < WALK_BLOCK) continue;
            ok = !tp_spill_pwrite_all(st->fd, out, nb * sizeof *out, at + n * sizeof *out);
            n += nb;
            nb = 0;
        }
        if (ok && nb) ok = !tp_spill_pwrite_all(st->fd, out, nb * sizeof *out,
                                                at + n * sizeof *out);
        n += nb;
        ok = ok && !w->dead;
        tp_span_walk_close(w);
        free(out);
        if (!ok) {
            /* a failed read has failed the store (its walks say so); without room in the
             * file or in memory for a merge, runs that could no longer be merged would grow
             * in number without bound (a walk holds a block of each): the spans to come stay
             * in memory instead, 16 bytes each */
            st->nofile = 1;
            return;
        }
        uint64_t from = st->runs[a].off;
        (void)fallocate(st->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)from,
                        (off_t)(at - from));
        st->runs[a] = (run){at, n, lv + 1};
        st->nruns = a + 1;
        st->end = at + n * sizeof *out;
    }
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
    st->runs[st->nruns++] = (run){st->end, st->n, 0};
    st->end += st->n * sizeof *st->v;
    st->n = 0;
    compact(st);
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
