/*
 * spans.h — the union of span sets walked in start order, one merged component at a time,
 * for the analyses whose sets are a rank's GPU records (millions of kernels): the sets are
 * read from where they already lie (the process's GPU records, a small array) instead of being
 * copied into span arrays and sorted, so a union costs no memory that grows with the records.
 *
 * A source yields spans in start order (p->gpu is kept so, model.h; an array is sorted first
 * with tp_spans_sort). Empty spans (end <= start) are skipped. The components are what
 * sorting every span and merging them gives: disjoint, in start order, spans that overlap or
 * touch joined. Not thread safe per tp_union; separate ones may run on separate threads.
 */
#ifndef TPROF_SPANS_H
#define TPROF_SPANS_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/model.h"
#include "analysis/steps.h"

/* Fills *out with the source's next span and returns 1, or returns 0 at its end. */
typedef int (*tp_span_next_fn)(void *ctx, tp_span *out);

#define TP_UNION_SOURCES 4

typedef struct tp_union {
    struct tp_union_src {
        tp_span_next_fn next;
        void *ctx;
        tp_span head; /* its next span, when live */
        int live;
    } src[TP_UNION_SOURCES];
    size_t nsrc;
    tp_span cur; /* the component peeked, when has_cur */
    int has_cur;
} tp_union;

/* An empty union; sources are added with tp_union_add before the first component is read. */
void tp_union_init(tp_union *u);
/* Adds a source (at most TP_UNION_SOURCES; more are ignored). ctx must outlive the walk. */
void tp_union_add(tp_union *u, tp_span_next_fn next, void *ctx);
/* The next component without taking it, or NULL after the last. Valid until the next call. */
const tp_span *tp_union_peek(tp_union *u);
/* Takes the component tp_union_peek returned. */
void tp_union_pop(tp_union *u);
/* Per step: out[i] (set, not added to) = ns of step i covered by the union, read to its end;
 * st sorted by start and disjoint (steps.h). As tp_steps_union_each over the same spans. */
void tp_union_steps_each(tp_union *u, const tp_step *st, size_t n, uint64_t *out);
/* ns covered by the union inside the steps st[0..n) (or in total when st is NULL), read to its
 * end. As tp_steps_union over the same spans. */
uint64_t tp_union_steps(tp_union *u, const tp_step *st, size_t n);

/* A source over an array of spans in start order. */
typedef struct tp_span_array {
    const tp_span *v;
    size_t n, i;
} tp_span_array;
int tp_span_array_next(void *ctx, tp_span *out);

/* A source over p->gpu: the records `keep` accepts (arg passed through), [start, end). */
typedef struct tp_gpu_walk {
    const tp_process *p;
    int (*keep)(const tp_gpu_op *o, const void *arg);
    const void *arg;
    size_t i;
} tp_gpu_walk;
int tp_gpu_walk_next(void *ctx, tp_span *out);

/* The k-th smallest (from 0) of a multiset of uint64 values that a caller can produce again
 * as often as asked, in memory that does not grow with their number: a radix selection over
 * 16-bit digits (512 kB of counts while it runs), one pass over the values per digit after a
 * first pass for their range (at most 5 passes); tp_kth_init_bits takes narrower digits,
 * for many selections side by side (8 bits: 2 kB each, at most 9 passes). Use:
 *     tp_kth q; tp_kth_init(&q, k);
 *     while (tp_kth_pass(&q)) { for each value v: tp_kth_see(&q, v); }
 *     value = q.value;   (0 when fewer than k + 1 values were seen, or out of memory: q.oom)
 * The values must be the same multiset on every pass. */
typedef struct tp_kth {
    uint64_t k;      /* rank still sought among the candidates */
    uint64_t lo, hi; /* the candidates: values in [lo, hi] */
    uint64_t seen;   /* values seen in the range pass */
    int shift;       /* a candidate's digit: (v - lo) >> shift, below 2^bits */
    int bits;        /* a digit's width, 1 to 16 */
    int state;       /* 0 before the first pass, 1 range pass, 2 digit passes, 3 done */
    int oom;
    uint64_t *hist;  /* 65536 counts of the current digit */
    uint64_t value;  /* the answer, once done */
} tp_kth;
void tp_kth_init(tp_kth *q, uint64_t k);
void tp_kth_init_bits(tp_kth *q, uint64_t k, int bits); /* digits of `bits` bits, 1 to 16 */
/* Ends the pass before (if any) and says whether another pass over the values is wanted;
 * frees what it held once it says no. */
int tp_kth_pass(tp_kth *q);
static inline void tp_kth_see(tp_kth *q, uint64_t v) {
    if (q->state == 1) {
        q->seen++;
        if (v > q->hi) q->hi = v;
    } else if (v >= q->lo && v <= q->hi) {
        q->hist[(v - q->lo) >> q->shift]++;
    }
}

#endif /* TPROF_SPANS_H */
