/*
 * test_nvtx_strings.c — the table behind NVTX's registered strings (capture/nvtx_strings.c),
 * compiled in: equal contents share one holder, holders keep their address and name while
 * the index doubles, registrations past the memory limit get the holder named
 * "(registered string past the limit)" (never NULL) and are counted exactly, the limit holds,
 * and two threads registering the same and different strings at once agree (run under TSan).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/nvtx_strings.h"

static const char *past(void) { return TPROF_STRTAB_PAST_LIMIT_NAME; }

static void test_dedupe_by_content(void **state) {
    (void)state;
    tprof_strtab t = TPROF_STRTAB_INIT((size_t)1 << 20);
    char a1[] = "forward", a2[] = "forward", b[] = "backward";
    const tprof_regstr *ra = tprof__strtab_register(&t, a1);
    const tprof_regstr *rb = tprof__strtab_register(&t, b);
    const tprof_regstr *ra2 = tprof__strtab_register(&t, a2); /* another buffer, same text */
    assert_ptr_equal(ra, ra2);
    assert_ptr_not_equal(ra, rb);
    assert_string_equal(ra->str, "forward");
    assert_string_equal(rb->str, "backward");
    assert_ptr_not_equal(ra->str, a1); /* a copy: the caller's buffer may go */
    strcpy(a1, "changed");
    assert_string_equal(ra->str, "forward");
    /* the empty name and a prefix are names of their own */
    const tprof_regstr *e = tprof__strtab_register(&t, "");
    const tprof_regstr *p = tprof__strtab_register(&t, "forw");
    assert_string_equal(e->str, "");
    assert_string_equal(p->str, "forw");
    assert_ptr_not_equal(p, ra);
    assert_int_equal(t.count, 4);
    assert_int_equal(tprof__strtab_refused(&t), 0);
    tprof__strtab_free(&t);
}

/* 200 000 names: the index doubles from 1024 slots to 524 288 and the names fill several
 * blocks; every handle given out before still holds its name, and registering the name
 * again returns it. */
#define MANY 200000

static void test_handles_stable_across_growth(void **state) {
    (void)state;
    tprof_strtab t = TPROF_STRTAB_INIT((size_t)256 << 20);
    const tprof_regstr **h = malloc(MANY * sizeof *h);
    assert_non_null(h);
    char name[32];
    size_t cap_after_first = 0;
    for (int i = 0; i < MANY; i++) {
        snprintf(name, sizeof name, "name_%d", i);
        h[i] = tprof__strtab_register(&t, name);
        if (i == 0) cap_after_first = t.cap;
    }
    assert_int_equal(cap_after_first, 1024);
    assert_int_equal(t.cap, 524288);
    assert_int_equal(t.count, MANY);
    for (int i = 0; i < MANY; i++) {
        snprintf(name, sizeof name, "name_%d", i);
        assert_string_equal(h[i]->str, name);
        assert_ptr_equal(tprof__strtab_register(&t, name), h[i]);
    }
    assert_int_equal(t.count, MANY);
    assert_int_equal(tprof__strtab_refused(&t), 0);
    assert_true(t.used <= t.limit);
    free(h);
    tprof__strtab_free(&t);
}

/* A 64 KiB limit: the first names are kept, the rest get the past-limit holder, each such
 * registration is counted (a refused name registered again is counted again), a kept name
 * registered again still finds its holder, and the table never holds more than the limit. */
#define LIMITED 5000

static void test_past_limit_named_and_counted(void **state) {
    (void)state;
    tprof_strtab t = TPROF_STRTAB_INIT((size_t)64 << 10);
    const tprof_regstr **h = malloc(LIMITED * sizeof *h);
    assert_non_null(h);
    char name[32];
    int kept = 0, refused = 0;
    for (int i = 0; i < LIMITED; i++) {
        snprintf(name, sizeof name, "name_%d", i);
        h[i] = tprof__strtab_register(&t, name);
        assert_non_null(h[i]);
        assert_true(t.used <= t.limit);
        if (h[i] == &tprof__strtab_past_limit) {
            refused++;
            assert_string_equal(h[i]->str, past());
        } else {
            assert_int_equal(refused, 0); /* kept names come first, then none */
            kept++;
            assert_string_equal(h[i]->str, name);
        }
    }
    /* 64 KiB hold the 8 KiB index and 56 KiB of 32-byte holders (name_N: 16 bytes of
     * holder, up to 11 of name and its NUL, 8-aligned): over a thousand, well under 5000 */
    print_message("64 KiB limit: %d names kept, %d refused\n", kept, refused);
    assert_true(kept > 1000 && kept < LIMITED);
    assert_int_equal(refused, LIMITED - kept);
    assert_int_equal(t.count, kept);
    assert_int_equal(tprof__strtab_refused(&t), refused);
    assert_ptr_equal(tprof__strtab_register(&t, "name_0"), h[0]);
    assert_ptr_equal(tprof__strtab_register(&t, "name_4999"), &tprof__strtab_past_limit);
    assert_int_equal(tprof__strtab_refused(&t), refused + 1);
    free(h);
    tprof__strtab_free(&t);
    /* limit 0: nothing kept, every registration counted, never NULL */
    tprof_strtab z = TPROF_STRTAB_INIT(0);
    for (int i = 0; i < 3; i++)
        assert_ptr_equal(tprof__strtab_register(&z, "a"), &tprof__strtab_past_limit);
    assert_int_equal(tprof__strtab_refused(&z), 3);
    assert_int_equal(z.used, 0);
    tprof__strtab_free(&z);
}

/* Two threads at once: both register the same SHARED names (in opposite orders) and each its
 * own OWN names. Equal contents get one holder whichever thread made it. */
#define SHARED 20000
#define OWN 20000

static tprof_strtab g_tab = TPROF_STRTAB_INIT((size_t)64 << 20);
static pthread_barrier_t g_go;

typedef struct worker {
    int id;
    const tprof_regstr *shared[SHARED], *own[OWN];
} worker;

static void *work(void *arg) {
    worker *w = arg;
    char name[32];
    pthread_barrier_wait(&g_go);
    for (int i = 0; i < SHARED + OWN; i++) {
        if (i % 2 == 0) {
            int k = w->id ? SHARED - 1 - i / 2 : i / 2;
            snprintf(name, sizeof name, "shared_%d", k);
            w->shared[k] = tprof__strtab_register(&g_tab, name);
        } else {
            snprintf(name, sizeof name, "own_%d_%d", w->id, i / 2);
            w->own[i / 2] = tprof__strtab_register(&g_tab, name);
        }
    }
    return NULL;
}

static void test_two_threads(void **state) {
    (void)state;
    static worker w[2];
    pthread_t th[2];
    pthread_barrier_init(&g_go, NULL, 2);
    for (int i = 0; i < 2; i++) {
        w[i].id = i;
        assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&g_go);
    char name[32];
    for (int k = 0; k < SHARED; k++) {
        snprintf(name, sizeof name, "shared_%d", k);
        assert_ptr_equal(w[0].shared[k], w[1].shared[k]);
        assert_string_equal(w[0].shared[k]->str, name);
    }
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < OWN; k++) {
            snprintf(name, sizeof name, "own_%d_%d", i, k);
            assert_string_equal(w[i].own[k]->str, name);
            assert_ptr_equal(tprof__strtab_register(&g_tab, name), w[i].own[k]);
        }
    assert_int_equal(g_tab.count, SHARED + 2 * OWN);
    assert_int_equal(tprof__strtab_refused(&g_tab), 0);
    tprof__strtab_free(&g_tab);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dedupe_by_content),
        cmocka_unit_test(test_handles_stable_across_growth),
        cmocka_unit_test(test_past_limit_named_and_counted),
        cmocka_unit_test(test_two_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
