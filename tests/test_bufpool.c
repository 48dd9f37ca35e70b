/*
 * test_bufpool.c — the pool of CUPTI activity buffers (capture/bufpool.c): a buffer put back
 * is the one the next get returns, the cap refuses and counts, a buffer the pool never handed
 * out (another CUPTI client's) or one put back twice is left alone, also when two threads put
 * the same buffer at once; the allocate-per-request mode frees; and concurrent get/put never
 * hands one buffer to two threads nor allocates more than `cap` (run under TSan too).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "capture/bufpool.h"

#define SZ (64u << 10)

static void free_all(tprof_bufpool *p) {
    for (size_t i = 0; i < p->allocated; i++) free(p->mine[i]);
}

static void test_reuse(void **state) {
    (void)state;
    tprof_bufpool p;
    tprof__bufpool_init(&p, SZ, 4, 1);
    uint8_t *a = tprof__bufpool_get(&p);
    assert_non_null(a);
    assert_int_equal((uintptr_t)a % 8, 0);
    memset(a, 0xab, SZ); /* the whole buffer is ours to write */
    assert_int_equal(tprof__bufpool_out(&p), 1);
    assert_int_equal(tprof__bufpool_put(&p, a), 1);
    assert_int_equal(tprof__bufpool_out(&p), 0);
    assert_ptr_equal(tprof__bufpool_get(&p), a); /* the same, already resident memory */
    uint8_t *b = tprof__bufpool_get(&p);       /* a is out: a second buffer */
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    assert_int_equal(tprof__bufpool_put(&p, a), 1);
    assert_int_equal(tprof__bufpool_put(&p, b), 1);
    assert_int_equal(p.allocated, 2);
    free_all(&p);
}

static void test_cap_and_strangers(void **state) {
    (void)state;
    tprof_bufpool p;
    tprof__bufpool_init(&p, SZ, 3, 1);
    uint8_t *b[3];
    for (int i = 0; i < 3; i++) assert_non_null(b[i] = tprof__bufpool_get(&p));
    assert_null(tprof__bufpool_get(&p));
    assert_null(tprof__bufpool_get(&p));
    assert_int_equal(p.refused, 2);
    uint8_t *stranger = calloc(1, SZ);
    stranger[0] = 7;
    assert_int_equal(tprof__bufpool_put(&p, stranger), 0);
    assert_int_equal(stranger[0], 7); /* not freed, not pooled */
    assert_int_equal(tprof__bufpool_put(&p, NULL), 0);
    assert_int_equal(tprof__bufpool_out(&p), 3);
    assert_int_equal(tprof__bufpool_put(&p, b[1]), 1);
    assert_int_equal(tprof__bufpool_put(&p, b[1]), 0); /* twice: ignored */
    assert_int_equal(tprof__bufpool_out(&p), 2);
    assert_ptr_equal(tprof__bufpool_get(&p), b[1]);
    assert_null(tprof__bufpool_get(&p)); /* b[1] was not made free twice */
    for (int i = 0; i < 3; i++) assert_int_equal(tprof__bufpool_put(&p, b[i]), 1);
    assert_int_equal(tprof__bufpool_out(&p), 0);
    assert_int_equal(p.allocated, 3);
    free_all(&p);
    free(stranger);
}

static void test_no_reuse(void **state) {
    (void)state;
    tprof_bufpool p;
    tprof__bufpool_init(&p, SZ, 2, 0);
    uint8_t *a = tprof__bufpool_get(&p), *b = tprof__bufpool_get(&p);
    assert_non_null(a);
    assert_non_null(b);
    assert_null(tprof__bufpool_get(&p));
    assert_int_equal(tprof__bufpool_out(&p), 2);
    assert_int_equal(tprof__bufpool_put(&p, a), 1); /* freed (ASan would see a leak) */
    assert_int_equal(tprof__bufpool_out(&p), 1);
    uint8_t *c = tprof__bufpool_get(&p);
    assert_non_null(c);
    assert_int_equal(tprof__bufpool_put(&p, b), 1);
    assert_int_equal(tprof__bufpool_put(&p, c), 1);
    assert_int_equal(tprof__bufpool_out(&p), 0);
    assert_int_equal(p.allocated, 0);
    assert_int_equal(p.refused, 1);
}

/* ---- threads: each stamps the buffer it holds and checks nobody else wrote it meanwhile */
static tprof_bufpool g_shared;
static _Atomic int g_bad;

static void *worker(void *arg) {
    const uint8_t stamp = (uint8_t)(uintptr_t)arg;
    for (int i = 0; i < 3000; i++) {
        uint8_t *b = tprof__bufpool_get(&g_shared);
        if (!b) continue; /* all out: refused, counted */
        memset(b, stamp, 256);
        for (volatile int k = 0; k < 50; k++) {
        }
        for (int k = 0; k < 256; k++)
            if (b[k] != stamp) {
                g_bad++;
                break;
            }
        if (tprof__bufpool_put(&g_shared, b) != 1) g_bad++;
    }
    return NULL;
}

static void test_threads(void **state) {
    (void)state;
    tprof__bufpool_init(&g_shared, SZ, 3, 1);
    pthread_t t[6];
    for (uintptr_t i = 0; i < 6; i++) pthread_create(&t[i], NULL, worker, (void *)(i + 1));
    for (int i = 0; i < 6; i++) pthread_join(t[i], NULL);
    assert_int_equal(g_bad, 0);
    assert_int_equal(tprof__bufpool_out(&g_shared), 0);
    assert_true(g_shared.allocated <= 3);
    free_all(&g_shared);
}

/* ---- two threads put the same buffer at once: exactly one put counts */
static tprof_bufpool g_race;
static uint8_t *g_race_buf;
static pthread_barrier_t g_bar;
static _Atomic int g_accepted;

static void *racer(void *arg) {
    (void)arg;
    for (int i = 0; i < 500; i++) {
        pthread_barrier_wait(&g_bar);
        g_accepted += tprof__bufpool_put(&g_race, g_race_buf);
        pthread_barrier_wait(&g_bar);
        pthread_barrier_wait(&g_bar); /* the main thread checks and gets the buffer again */
    }
    return NULL;
}

static void test_double_put_race(void **state) {
    (void)state;
    tprof__bufpool_init(&g_race, SZ, 4, 1);
    g_race_buf = tprof__bufpool_get(&g_race);
    assert_non_null(g_race_buf);
    pthread_barrier_init(&g_bar, NULL, 3);
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, racer, NULL);
    int bad = 0;
    for (int i = 0; i < 500; i++) {
        g_accepted = 0;
        pthread_barrier_wait(&g_bar);
        pthread_barrier_wait(&g_bar);
        if (g_accepted != 1 || tprof__bufpool_out(&g_race) != 0) bad++;
        /* free once: the next two gets are the same buffer and then a new one */
        uint8_t *a = tprof__bufpool_get(&g_race), *b = tprof__bufpool_get(&g_race);
        if (a != g_race_buf || b == a) bad++;
        tprof__bufpool_put(&g_race, b);
        pthread_barrier_wait(&g_bar);
    }
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&g_bar);
    assert_int_equal(bad, 0);
    assert_int_equal(g_race.allocated, 2);
    free_all(&g_race);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reuse),
        cmocka_unit_test(test_cap_and_strangers),
        cmocka_unit_test(test_no_reuse),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_double_put_race),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
