/*
 * spans.c — span unions walked in start order, and a k-th value selected in passes (spans.h).
 */
#include "analysis/spans.h"
#include "analysis/alloc.h"

#include <stdlib.h>
#include <string.h>

void tp_union_init(tp_union *u) { memset(u, 0, sizeof *u); }

/* The source's next non-empty span into its head. */
static void pull(struct tp_union_src *s) {
    do {
        s->live = s->next(s->ctx, &s->head);
    } while (s->live && s->head.e <= s->head.s);
}

void tp_union_add(tp_union *u, tp_span_next_fn next, void *ctx) {
    if (u->nsrc == TP_UNION_SOURCES) return;
    struct tp_union_src *s = &u->src[u->nsrc++];
    s->next = next;
    s->ctx = ctx;
    pull(s);
}

/* The live source with the earliest head, or NULL. */
static struct tp_union_src *earliest(tp_union *u) {
    struct tp_union_src *best = NULL;
    for (size_t i = 0; i < u->nsrc; i++)
        if (u->src[i].live && (!best || u->src[i].head.s < best->head.s)) best = &u->src[i];
    return best;
}

const tp_span *tp_union_peek(tp_union *u) {
    if (u->has_cur) return &u->cur;
    struct tp_union_src *s = earliest(u);
    if (!s) return NULL;
    u->cur = s->head;
    pull(s);
    /* spans that start at or before the component's end (touching included) join it */
    while ((s = earliest(u)) && s->head.s <= u->cur.e) {
        if (s->head.e > u->cur.e) u->cur.e = s->head.e;
        pull(s);
    }
    u->has_cur = 1;
    return &u->cur;
}

void tp_union_pop(tp_union *u) { u->has_cur = 0; }

void tp_union_steps_each(tp_union *u, const tp_step *st, size_t n, uint64_t *out) {
    for (size_t i = 0; i < n; i++) out[i] = 0;
    size_t k = 0; /* the first step that ends after the component's start: components come
                   * in start order and the steps are disjoint, so it only moves on */
    for (const tp_span *c; (c = tp_union_peek(u)); tp_union_pop(u)) {
        while (k < n && st[k].end <= c->s) k++;
        for (size_t j = k; j < n && st[j].start < c->e; j++) {
            uint64_t a = c->s > st[j].start ? c->s : st[j].start;
            uint64_t b = c->e < st[j].end ? c->e : st[j].end;
            if (b > a) out[j] += b - a;
        }
    }
}

uint64_t tp_union_steps(tp_union *u, const tp_step *st, size_t n) {
    uint64_t tot = 0;
    size_t k = 0;
    for (const tp_span *c; (c = tp_union_peek(u)); tp_union_pop(u)) {
        if (!st) {
            tot += c->e - c->s;
            continue;
        }
        while (k < n && st[k].end <= c->s) k++;
        for (size_t j = k; j < n && st[j].start < c->e; j++) {
            uint64_t a = c->s > st[j].start ? c->s : st[j].start;
            uint64_t b = c->e < st[j].end ? c->e : st[j].end;
            if (b > a) tot += b - a;
        }
    }
    return tot;
}

int tp_span_array_next(void *ctx, tp_span *out) {
    tp_span_array *a = ctx;
    if (a->i >= a->n) return 0;
    *out = a->v[a->i++];
    return 1;
}

int tp_gpu_walk_next(void *ctx, tp_span *out) {
    tp_gpu_walk *w = ctx;
    for (; w->i < w->p->ngpu; w->i++) {
        const tp_gpu_op *o = &w->p->gpu[w->i];
        if (!w->keep(o, w->arg)) continue;
        *out = (tp_span){o->start, o->end};
        w->i++;
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------ k-th value */

void tp_kth_init_bits(tp_kth *q, uint64_t k, int bits) {
    memset(q, 0, sizeof *q);
    q->k = k;
    q->bits = bits < 1 ? 1 : bits > 16 ? 16 : bits;
}

void tp_kth_init(tp_kth *q, uint64_t k) {
    tp_kth_init_bits(q, k, 16);
}

/* The shift that leaves q->bits bits of [0, v]: bits above v's highest set bit. */
static int first_shift(const tp_kth *q, uint64_t v) {
    int bits = 0;
    while (bits < 64 && (v >> bits)) bits++;
    return bits > q->bits ? bits - q->bits : 0;
}

static int kth_finish(tp_kth *q, uint64_t value, int oom) {
    free(q->hist);
    q->hist = NULL;
    q->value = value;
    q->oom = oom;
    q->state = 3;
    return 0;
}

int tp_kth_pass(tp_kth *q) {
    if (q->state == 0) { /* the range pass first */
        q->state = 1;
        return 1;
    }
    if (q->state == 1) {
        if (q->k >= q->seen) return kth_finish(q, 0, 0);
        q->hist = tp_malloc(((size_t)1 << q->bits) * sizeof *q->hist);
        if (!q->hist) return kth_finish(q, 0, 1);
        q->lo = 0;
        q->shift = first_shift(q, q->hi);
        q->state = 2;
        memset(q->hist, 0, ((size_t)1 << q->bits) * sizeof *q->hist);
        return 1;
    }
    if (q->state != 2) return 0;
    /* the digit that holds the k-th candidate narrows the candidates to its values */
    uint64_t d = 0;
    while (d + 1 < ((uint64_t)1 << q->bits) && q->hist[d] <= q->k) q->k -= q->hist[d++];
    q->lo += d << q->shift;
    uint64_t top = q->lo + ((((uint64_t)1) << q->shift) - 1);
    if (top < q->hi) q->hi = top;
    if (q->shift == 0) return kth_finish(q, q->lo, 0);
    q->shift = q->shift > q->bits ? q->shift - q->bits : 0;
    memset(q->hist, 0, ((size_t)1 << q->bits) * sizeof *q->hist);
    return 1;
}
