/*
 * test_bufpool.c — the pool of CUPTI activity buffers (capture/bufpool.c): a buffer comes
 * back zeroed and is the same memory next time, the cap refuses and counts, a buffer the pool
 * never handed out (another CUPTI client's) or one put back twice is left alone, the
 * allocate-per-request mode frees, and concurrent get/put from several threads keeps every
 * buffer zero when handed out and never more than `cap` allocated (run under TSan too).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "capture/bufpool.h"

#define SZ (64u << 10)

static int all_zero(const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (b[i]) return 0;
    return 1;
}

static void test_reuse_zeroes(void **state) {
    (void)state;
    tprof_bufpool p;
    tprof__bufpool_init(&p, SZ, 4, 1);
    uint8_t *a = tprof__bufpool_get(&p);
    assert_non_null(a);
    assert_int_equal((uintptr_t)a % 8, 0);
    assert_true(all_zero(a, SZ));
    memset(a, 0xab, 5000); /* what CUPTI wrote: 5000 valid bytes */
    assert_int_equal(tprof__bufpool_out(&p), 1);
    assert_int_equal(tprof__bufpool_put(&p, a, 5000), 1);
    assert_int_equal(tprof__bufpool_out(&p), 0);
    uint8_t *b = tprof__bufpool_get(&p);
    assert_ptr_equal(a, b); /* the same, already resident memory */
    assert_true(all_zero(b, SZ));
    /* a dirty length past the end is clamped */
    memset(b, 0x11, SZ);
    assert_int_equal(tprof__bufpool_put(&p, b, SZ + 4096), 1);
    b = tprof__bufpool_get(&p);
    assert_true(all_zero(b, SZ));
    assert_int_equal(tprof__bufpool_put(&p, b, 0), 1);
    assert_int_equal(p.allocated, 1);
    free(a);
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
    assert_int_equal(tprof__bufpool_put(&p, stranger, SZ), 0);
    assert_int_equal(stranger[0], 7); /* not zeroed, not freed, not pooled */
    assert_int_equal(tprof__bufpool_put(&p, NULL, 0), 0);
    assert_int_equal(tprof__bufpool_out(&p), 3);
    assert_int_equal(tprof__bufpool_put(&p, b[1], 10), 1);
    assert_int_equal(tprof__bufpool_put(&p, b[1], 10), 0); /* twice: ignored */
    assert_int_equal(p.nfree, 1);
    assert_ptr_equal(tprof__bufpool_get(&p), b[1]);
    assert_null(tprof__bufpool_get(&p));
    for (int i = 0; i < 3; i++) tprof__bufpool_put(&p, b[i], 0);
    assert_int_equal(tprof__bufpool_out(&p), 0);
    for (int i = 0; i < 3; i++) free(b[i]);
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
    assert_int_equal(tprof__bufpool_put(&p, a, SZ), 1); /* freed (ASan would see a leak) */
    assert_int_equal(tprof__bufpool_out(&p), 1);
    assert_int_equal(tprof__bufpool_put(&p, a, SZ), 0); /* no longer ours */
    uint8_t *c = tprof__bufpool_get(&p);
    assert_non_null(c);
    assert_int_equal(tprof__bufpool_put(&p, b, 0), 1);
    assert_int_equal(tprof__bufpool_put(&p, c, 0), 1);
    assert_int_equal(tprof__bufpool_out(&p), 0);
    assert_int_equal(p.refused, 1);
}

static tprof_bufpool g_shared;
static _Atomic int g_bad;

static void *worker(void *arg) {
    const uint8_t stamp = (uint8_t)(uintptr_t)arg;
    for (int i = 0; i < 3000; i++) {
        uint8_t *b = tprof__bufpool_get(&g_shared);
        if (!b) continue; /* all out: refused, counted */
        if (!all_zero(b, 256) || b[SZ - 1]) g_bad++;
        size_t dirty = (size_t)(i % 200) + 1;
        memset(b, stamp, dirty);
        if (tprof__bufpool_put(&g_shared, b, dirty) != 1) g_bad++;
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
    assert_int_equal(g_shared.nfree, g_shared.allocated);
    for (size_t i = 0; i < g_shared.allocated; i++) {
        assert_true(all_zero(g_shared.mine[i], SZ));
        free(g_shared.mine[i]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reuse_zeroes),
        cmocka_unit_test(test_cap_and_strangers),
        cmocka_unit_test(test_no_reuse),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
