/*
 * test_kwindow.c — the kernel-capture window (core/kwindow.c, TRAINPROF_KERNEL_STEPS) without
 * a GPU: the window's opening and closing are recorded as metadata (kernel_steps.on_ns /
 * off_ns) at the moments CUPTI would be switched, so the test checks, against the ranges the
 * child recorded, that they fall exactly at the right step boundaries, for range-marked steps
 * (with an outer "iteration" range that must not count twice), for tprof_step_begin's own
 * numbers, for "A-" and for a malformed value (no window at all).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "analysis/model.h"
#include "core/kwindow.h"
#include "trainprof.h"

#define CHILD_PREFIX "kwin"
#include "child.h"

static const char *g_spec;
static void (*g_body)(void);

static void window_body(void) {
    if (g_spec) setenv("TRAINPROF_KERNEL_STEPS", g_spec, 1);
    else unsetenv("TRAINPROF_KERNEL_STEPS");
    unsetenv("TRAINPROF_STEP_NAME");
    start_session();
    g_body();
}

/* body() recorded in a child whose TRAINPROF_KERNEL_STEPS is `spec` (NULL: unset) */
static void run_child(const char *spec, void (*body)(void)) {
    fresh_dir("w");
    g_spec = spec;
    g_body = body;
    in_child(window_body);
}

/* ten iterations, each an "iteration" range around a "step" range around "forward" */
static void body_ranges(void) {
    for (int i = 0; i < 10; i++) {
        tprof_range_push("iteration");
        tprof_range_push("step");
        tprof_range_push("forward");
        usleep(1000);
        tprof_range_pop();
        tprof_range_pop();
        tprof_range_pop();
    }
}

static void body_api(void) {
    for (uint64_t n = 100; n < 110; n++) {
        tprof_step_begin(n);
        usleep(1000);
        tprof_step_end(n);
        tprof_range_push("step"); /* named ranges no longer count once API steps are seen */
        tprof_range_pop();
    }
}

/* the i-th range called `name` on any thread, or NULL */
static const tp_range *nth(const tp_process *p, const char *name, int i) {
    for (size_t t = 0; t < p->nthreads; t++)
        for (size_t k = 0; k < p->threads[t].nranges; k++)
            if (!strcmp(p->threads[t].ranges[k].name, name) && i-- == 0)
                return &p->threads[t].ranges[k];
    return NULL;
}

static uint64_t meta_u64(const tp_process *p, const char *key) {
    const char *v = tp_meta(p, key);
    return v ? strtoull(v, NULL, 10) : 0;
}


static void test_range_steps(void **state) {
    (void)state;
    run_child("3-5", body_ranges);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_string_equal(tp_meta(p, "kernel_steps"), "3-5");
    uint64_t on = meta_u64(p, "kernel_steps.on_ns"), off = meta_u64(p, "kernel_steps.off_ns");
    /* "iteration" is the first step name seen, so iterations are the steps: capture opens
     * as iteration 3 begins and closes as iteration 6 begins */
    const tp_range *i2 = nth(p, "iteration", 2), *i3 = nth(p, "iteration", 3);
    const tp_range *i5 = nth(p, "iteration", 5), *i6 = nth(p, "iteration", 6);
    assert_non_null(i6);
    assert_true(on >= i2->end && on <= i3->start);
    assert_true(off >= i5->end && off <= i6->start);
    tp_run_free(&run);
}

static void test_api_steps(void **state) {
    (void)state;
    run_child("104-105", body_api);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    uint64_t on = meta_u64(p, "kernel_steps.on_ns"), off = meta_u64(p, "kernel_steps.off_ns");
    /* the "step" range after API step 103 and the one after 105 bracket the switches */
    const tp_range *s3 = nth(p, "step", 3), *s4 = nth(p, "step", 4), *s5 = nth(p, "step", 5);
    assert_non_null(s5);
    assert_true(on > s3->end && on < s4->start);
    assert_true(off > s5->end);
    const tp_range *s6 = nth(p, "step", 6);
    assert_true(off < s6->start);
    tp_run_free(&run);
}

static void test_open_ended_and_malformed(void **state) {
    (void)state;
    run_child("7-", body_ranges);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    const tp_range *i6 = nth(p, "iteration", 6), *i7 = nth(p, "iteration", 7);
    uint64_t on = meta_u64(p, "kernel_steps.on_ns");
    assert_true(on >= i6->end && on <= i7->start);
    assert_null(tp_meta(p, "kernel_steps.off_ns")); /* open to the end */
    tp_run_free(&run);

    run_child("5-2", body_ranges); /* B < A: no window, everything captured */
    load(&run);
    assert_null(tp_meta(&run.procs[0], "kernel_steps"));
    assert_null(tp_meta(&run.procs[0], "kernel_steps.on_ns"));
    tp_run_free(&run);
}

static void test_parse(void **state) {
    (void)state;
    uint64_t lo, hi;
    assert_int_equal(tprof__kwin_parse("10-12", &lo, &hi), 0);
    assert_int_equal(lo, 10);
    assert_int_equal(hi, 12);
    assert_int_equal(tprof__kwin_parse("4", &lo, &hi), 0);
    assert_int_equal(lo, 4);
    assert_int_equal(hi, 4);
    assert_int_equal(tprof__kwin_parse("4-", &lo, &hi), 0);
    assert_true(hi == UINT64_MAX);
    static const char *const bad[] = {"", "-3", "a-b", "3-x", "3-2", "3--4", "3 - 4", "3,4",
                                      "99999999999999999999", "1-99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(tprof__kwin_parse(bad[i], &lo, &hi), -1);
    assert_int_equal(tprof__kwin_parse(NULL, &lo, &hi), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_range_steps),
        cmocka_unit_test(test_api_steps),
        cmocka_unit_test(test_open_ended_and_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
