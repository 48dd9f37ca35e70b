/*
 * test_spans.c — span unions walked in start order (spans.h) give what sorting and merging
 * every span gives (tp_steps_union_each, tp_steps_union), whatever the sources, empty and
 * touching spans; the k-th value selected in passes is the one a sort puts there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "analysis/spans.h"
#include "analysis/stats.h"

static unsigned seed = 12345;
static unsigned rnd(unsigned n) {
    seed = seed * 1103515245u + 12345u;
    return (seed >> 16) % n;
}

static int by_s(const void *a, const void *b) {
    const tp_span *x = a, *y = b;
    return x->s < y->s ? -1 : x->s > y->s;
}

/* A known case: [0,10) [10,20) touch and join, [5,5) and [30,30) are empty, [25,40) and
 * [35,45) overlap: components [0,20) and [25,45). */
static void known_components(void **state) {
    (void)state;
    tp_span a[] = {{0, 10}, {25, 40}, {30, 30}}, b[] = {{5, 5}, {10, 20}, {35, 45}};
    tp_span_array sa = {a, 3, 0}, sb = {b, 3, 0};
    tp_union u;
    tp_union_init(&u);
    tp_union_add(&u, tp_span_array_next, &sa);
    tp_union_add(&u, tp_span_array_next, &sb);
    const tp_span *c = tp_union_peek(&u);
    assert_non_null(c);
    assert_int_equal(c->s, 0);
    assert_int_equal(c->e, 20);
    assert_ptr_equal(tp_union_peek(&u), c); /* peeking again does not move on */
    tp_union_pop(&u);
    c = tp_union_peek(&u);
    assert_non_null(c);
    assert_int_equal(c->s, 25);
    assert_int_equal(c->e, 45);
    tp_union_pop(&u);
    assert_null(tp_union_peek(&u));
    /* per step: [0,15) [15,30) [40,100) */
    tp_step st[] = {{0, 15, 0, 0}, {15, 30, 1, 0}, {40, 100, 2, 0}};
    uint64_t out[3];
    sa.i = sb.i = 0;
    tp_union_init(&u);
    tp_union_add(&u, tp_span_array_next, &sa);
    tp_union_add(&u, tp_span_array_next, &sb);
    tp_union_steps_each(&u, st, 3, out);
    assert_int_equal(out[0], 15);
    assert_int_equal(out[1], 5 + 5);
    assert_int_equal(out[2], 5);
}

/* Random sets on one to three sources against the sort-and-merge of all their spans. */
static void matches_sort(void **state) {
    (void)state;
    enum { N = 2000, NST = 40 };
    static tp_span src[3][N], all[3 * N];
    for (int round = 0; round < 200; round++) {
        size_t ns = 1 + rnd(3), n[3] = {0}, na = 0;
        for (size_t k = 0; k < ns; k++) {
            n[k] = rnd(N);
            for (size_t i = 0; i < n[k]; i++) {
                uint64_t s = rnd(100000), len = rnd(4) ? rnd(200) : rnd(5000);
                src[k][i] = (tp_span){s, s + len}; /* some empty */
                all[na++] = src[k][i];
            }
            qsort(src[k], n[k], sizeof **src, by_s);
        }
        tp_step st[NST];
        uint64_t t = rnd(1000);
        for (size_t i = 0; i < NST; i++) { /* disjoint, some touching */
            uint64_t len = 1 + rnd(5000);
            st[i] = (tp_step){t, t + len, i, 0};
            t += len + (rnd(2) ? 0 : rnd(3000));
        }
        uint64_t want[NST], got[NST];
        static tp_span copy[3 * N];
        memcpy(copy, all, na * sizeof *all);
        tp_steps_union_each(copy, na, st, NST, want);
        tp_span_array arr[3];
        tp_union u;
        tp_union_init(&u);
        for (size_t k = 0; k < ns; k++) {
            arr[k] = (tp_span_array){src[k], n[k], 0};
            tp_union_add(&u, tp_span_array_next, &arr[k]);
        }
        tp_union_steps_each(&u, st, NST, got);
        for (size_t i = 0; i < NST; i++) assert_int_equal(got[i], want[i]);
        for (int steps = 0; steps < 2; steps++) {
            memcpy(copy, all, na * sizeof *all);
            uint64_t w = tp_steps_union(copy, na, steps ? st : NULL, NST);
            tp_union_init(&u);
            for (size_t k = 0; k < ns; k++) {
                arr[k].i = 0;
                tp_union_add(&u, tp_span_array_next, &arr[k]);
            }
            assert_int_equal(tp_union_steps(&u, steps ? st : NULL, NST), w);
        }
    }
}

static int keep_kernel(const tp_gpu_op *o, const void *arg) {
    (void)arg;
    return o->type == TPROF_REC_GPU_KERNEL;
}

/* A walk over a process's GPU records gives the records its filter keeps, in order. */
static void gpu_walk(void **state) {
    (void)state;
    tp_gpu_op g[4] = {{.start = 1, .end = 3, .type = TPROF_REC_GPU_KERNEL},
                      {.start = 2, .end = 9, .type = TPROF_REC_GPU_SYNC},
                      {.start = 3, .end = 4, .type = TPROF_REC_GPU_KERNEL},
                      {.start = 7, .end = 8, .type = TPROF_REC_GPU_KERNEL}};
    tp_process p = {.gpu = g, .ngpu = 4};
    tp_gpu_walk w = {&p, keep_kernel, NULL, 0};
    tp_union u;
    tp_union_init(&u);
    tp_union_add(&u, tp_gpu_walk_next, &w);
    assert_int_equal(tp_union_steps(&u, NULL, 0), 3 + 1); /* [1,4) and [7,8); not the sync */
}

static uint64_t kth_of(const uint64_t *v, size_t n, uint64_t k) {
    tp_kth q;
    tp_kth_init(&q, k);
    int passes = 0;
    while (tp_kth_pass(&q)) {
        passes++;
        for (size_t i = 0; i < n; i++) tp_kth_see(&q, v[i]);
    }
    assert_false(q.oom);
    assert_true(passes <= 5);
    return q.value;
}

static int by_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void kth_matches_sort(void **state) {
    (void)state;
    uint64_t three[] = {5, 1, 3};
    assert_int_equal(kth_of(three, 3, 0), 1);
    assert_int_equal(kth_of(three, 3, 1), 3);
    assert_int_equal(kth_of(three, 3, 2), 5);
    assert_int_equal(kth_of(three, 3, 3), 0); /* fewer values than asked: 0 */
    assert_int_equal(kth_of(NULL, 0, 0), 0);
    enum { N = 3000 };
    static uint64_t v[N], sorted[N];
    for (int round = 0; round < 60; round++) {
        size_t n = 1 + rnd(N);
        int wide = round % 4;
        for (size_t i = 0; i < n; i++) {
            uint64_t x = rnd(1000); /* many repeats */
            if (wide == 1) x = ((uint64_t)rnd(65536) << 32) | rnd(65536);
            if (wide == 2) x = UINT64_MAX - rnd(70000);
            if (wide == 3) x = ((uint64_t)rnd(65536) << 48) ^ ((uint64_t)rnd(65536) << 20) ^ rnd(7);
            v[i] = sorted[i] = x;
        }
        qsort(sorted, n, sizeof *sorted, by_u64);
        for (int t = 0; t < 5; t++) {
            size_t k = t == 0 ? 0 : t == 1 ? n - 1 : tp_pct_index(n, 0.25 * t);
            assert_true(kth_of(v, n, k) == sorted[k]);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(known_components),
        cmocka_unit_test(matches_sort),
        cmocka_unit_test(gpu_walk),
        cmocka_unit_test(kth_matches_sort),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
