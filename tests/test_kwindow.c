/*
 * test_kwindow.c — the GPU capture plan (core/kwindow.c, TRAINPROF_GPU_CAPTURE and the older
 * TRAINPROF_KERNEL_STEPS) without a GPU: each window's opening and closing are recorded as
 * metadata (gpu_capture.windows; kernel_steps.on_ns / off_ns for the first) at the moments
 * CUPTI would be switched, so the test checks, against the ranges the child recorded, that
 * they fall exactly at the right step boundaries, for range-marked steps (with an outer
 * "iteration" range that must not count twice), for tprof_step_begin's own numbers (also
 * numbers that jump far past windows), for "A-", a list of windows, a repeated window, the
 * bound on the list, "off", and malformed values (every step captured, no window).
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

#include "analysis/capture.h"
#include "analysis/model.h"
#include "core/kwindow.h"
#include "trainprof.h"

#define CHILD_PREFIX "kwin"
#include "child.h"

static const char *g_spec, *g_plan;
static void (*g_body)(void);

static void window_body(void) {
    if (g_spec) setenv("TRAINPROF_KERNEL_STEPS", g_spec, 1);
    else unsetenv("TRAINPROF_KERNEL_STEPS");
    if (g_plan) setenv("TRAINPROF_GPU_CAPTURE", g_plan, 1);
    else unsetenv("TRAINPROF_GPU_CAPTURE");
    unsetenv("TRAINPROF_STEP_NAME");
    start_session();
    g_body();
}

/* body() recorded in a child whose TRAINPROF_KERNEL_STEPS is `spec` (NULL: unset) */
static void run_child(const char *spec, void (*body)(void)) {
    fresh_dir("w");
    g_spec = spec;
    g_plan = NULL;
    g_body = body;
    in_child(window_body);
}

/* the same with TRAINPROF_GPU_CAPTURE=plan (and TRAINPROF_KERNEL_STEPS=spec, NULL: unset) */
static void run_plan(const char *plan, const char *spec, void (*body)(void)) {
    fresh_dir("p");
    g_spec = spec;
    g_plan = plan;
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

/* fifteen iterations of the same shape */
static void body_ranges15(void) {
    for (int i = 0; i < 15; i++) {
        tprof_range_push("iteration");
        tprof_range_push("step");
        usleep(500);
        tprof_range_pop();
        tprof_range_pop();
    }
}

/* API steps 0, 1, 3, then far past thousands of millions of windows: 10^12 + 1, + 2, + 3 */
static void body_jump(void) {
    static const uint64_t n[] = {0, 1, 3, 1000000000001ull, 1000000000002ull, 1000000000003ull};
    for (size_t i = 0; i < sizeof n / sizeof *n; i++) {
        tprof_step_begin(n[i]);
        usleep(500);
        tprof_step_end(n[i]);
    }
}

/* 300 API steps, 0 to 299 */
static void body_api2000(void) {
    for (uint64_t n = 0; n < 2000; n++) {
        tprof_step_begin(n);
        tprof_step_end(n);
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

/* API steps 0 to 9, each writing what tprof_gpu_capture_on said inside it (on.<n> = 0|1) */
static void body_on(void) {
    for (uint64_t n = 0; n < 10; n++) {
        tprof_step_begin(n);
        char k[16];
        snprintf(k, sizeof k, "on.%u", (unsigned)n);
        tprof_set_metadata(k, tprof_gpu_capture_on() ? "1" : "0");
        tprof_step_end(n);
    }
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
    const tp_range *i2 = nth_range(p, "iteration", 2), *i3 = nth_range(p, "iteration", 3);
    const tp_range *i5 = nth_range(p, "iteration", 5), *i6 = nth_range(p, "iteration", 6);
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
    const tp_range *s3 = nth_range(p, "step", 3), *s4 = nth_range(p, "step", 4);
    const tp_range *s5 = nth_range(p, "step", 5);
    assert_non_null(s5);
    assert_true(on > s3->end && on < s4->start);
    assert_true(off > s5->end);
    const tp_range *s6 = nth_range(p, "step", 6);
    assert_true(off < s6->start);
    tp_run_free(&run);
}

static void test_open_ended_and_malformed(void **state) {
    (void)state;
    run_child("7-", body_ranges);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    const tp_range *i6 = nth_range(p, "iteration", 6), *i7 = nth_range(p, "iteration", 7);
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

/* gpu_capture.windows parsed: on[i], off[i] (0: open), the count */
/* The windows of list v ("on-off,...", an open one "on-"), from on[n] and off[n] on: the
 * count after them. */
static size_t windows_of(const char *v, uint64_t *on, uint64_t *off, size_t n, size_t max) {
    while (*v) {
        char *e;
        assert_true(n < max);
        on[n] = strtoull(v, &e, 10);
        assert_int_equal(*e, '-');
        v = e + 1;
        off[n] = *v >= '0' && *v <= '9' ? strtoull(v, &e, 10) : 0;
        if (off[n]) v = e;
        n++;
        if (*v == ',') v++;
        else assert_int_equal(*v, 0);
    }
    return n;
}

static size_t windows(const tp_process *p, uint64_t *on, uint64_t *off, size_t max) {
    const char *v = tp_meta(p, "gpu_capture.windows");
    assert_non_null(v);
    return windows_of(v, on, off, 0, max);
}

/* the switch at step k lies between the end of iteration k-1 and the start of iteration k */
static void at_iteration(const tp_process *p, uint64_t t, int k) {
    const tp_range *a = nth_range(p, "iteration", k - 1), *b = nth_range(p, "iteration", k);
    assert_non_null(b);
    if (!(t >= a->end && t <= b->start))
        fail_msg("switch at %llu not between iterations %d and %d", (unsigned long long)t, k - 1,
                 k);
}

/* "2-3/5" over 15 steps: windows open as steps 2, 7, 12 begin and close as 4, 9, 14 begin */
static void test_plan_repeated(void **state) {
    (void)state;
    run_plan("2-3/5", NULL, body_ranges15);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_string_equal(tp_meta(p, "gpu_capture"), "2-3/5");
    assert_string_equal(tp_meta(p, "kernel_steps"), "2-3"); /* the first window */
    uint64_t on[8], off[8];
    assert_int_equal(windows(p, on, off, 8), 3);
    for (int i = 0; i < 3; i++) {
        at_iteration(p, on[i], 2 + 5 * i);
        at_iteration(p, off[i], 4 + 5 * i);
        assert_true(on[i] < off[i]);
        if (i) assert_true(off[i - 1] < on[i]);
    }
    assert_int_equal(meta_u64(p, "kernel_steps.on_ns"), on[0]);
    assert_int_equal(meta_u64(p, "kernel_steps.off_ns"), off[0]);
    assert_null(tp_meta(p, "gpu_capture.windows_left_out"));
    tp_run_free(&run);
}

/* "1,4-5,9-": one step, two steps, then to the end (written open, "on-") */
static void on_steps(const char *plan, const char *want) {
    run_plan(plan, NULL, body_on);
    tp_run run;
    load(&run);
    char got[11] = {0};
    for (int n = 0; n < 10; n++) {
        char k[16];
        snprintf(k, sizeof k, "on.%d", n);
        const char *v = tp_meta(&run.procs[0], k);
        got[n] = v ? v[0] : '?';
    }
    assert_string_equal(got, want);
    tp_run_free(&run);
}

/* tprof_gpu_capture_on answers for the step begun, by the plan, without CUPTI */
static void test_capture_on(void **state) {
    (void)state;
    on_steps("2-3,7-", "0011000111");
    on_steps("auto", "1111100000");
    on_steps("off", "0000000000");
    on_steps("all", "1111111111");
}

static void test_plan_list(void **state) {
    (void)state;
    run_plan("1,4-5,9-", NULL, body_ranges15);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    uint64_t on[8], off[8];
    assert_int_equal(windows(p, on, off, 8), 3);
    at_iteration(p, on[0], 1);
    at_iteration(p, off[0], 2);
    at_iteration(p, on[1], 4);
    at_iteration(p, off[1], 6);
    at_iteration(p, on[2], 9);
    assert_int_equal(off[2], 0);
    assert_string_equal(tp_meta(p, "kernel_steps"), "1");
    tp_run_free(&run);
}

/* step numbers that jump past windows: 3 opens 2-3/5 (its window 2-3), 10^12 + 1 closes it
 * (past the gap of its window 10^12 + 2 .. + 3), which then opens at 10^12 + 2 */
static void test_plan_jump(void **state) {
    (void)state;
    run_plan("2-3/5", NULL, body_jump);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    uint64_t on[8], off[8];
    assert_int_equal(windows(p, on, off, 8), 2);
    const tp_stepev *ev = NULL;
    size_t nev = 0;
    for (size_t t = 0; t < p->nthreads; t++)
        if (p->threads[t].nsteps) {
            ev = p->threads[t].steps;
            nev = p->threads[t].nsteps;
        }
    assert_int_equal(nev, 12); /* begin and end of 6 steps */
    /* on: before step 3 begins, after step 1 ended; off: before 10^12+1 begins ... */
    assert_true(on[0] >= ev[3].ts && on[0] <= ev[4].ts);
    assert_true(off[0] >= ev[5].ts && off[0] <= ev[6].ts);
    assert_true(on[1] >= ev[7].ts && on[1] <= ev[8].ts);
    assert_int_equal(off[1], 0); /* 10^12 + 3 is the window's own last step */
    tp_run_free(&run);
}

/* "0/2" over 2000 steps: 1000 windows, listed whole in pages of at most 3,967 bytes:
 * gpu_capture.windows, then gpu_capture.windows.2, .3, ... (94 windows of 20-digit times a
 * page, 180 of 10-digit ones: the times are CLOCK_MONOTONIC nanoseconds, as long as the
 * host's uptime makes them, so 6 to 11 pages), none left out; the analysis reads them all
 * (one capture span a window). */
static void test_plan_bound(void **state) {
    (void)state;
    run_plan("0/2", NULL, body_api2000);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    static uint64_t on[1000], off[1000];
    size_t n = 0, pages = 0;
    for (int k = 1;; k++) {
        char key[48];
        if (k == 1) snprintf(key, sizeof key, "gpu_capture.windows");
        else snprintf(key, sizeof key, "gpu_capture.windows.%d", k);
        const char *v = tp_meta(p, key);
        if (!v) break;
        assert_true(strlen(v) < 3968);
        n = windows_of(v, on, off, n, 1000);
        pages++;
    }
    assert_int_equal(n, 1000);
    assert_true(pages >= 6 && pages <= 11);
    assert_null(tp_meta(p, "gpu_capture.windows_left_out"));
    /* each page, rewritten at each of its windows: one entry, its last value (the loader keeps
     * the last value of a key) */
    size_t lists = 0;
    for (size_t i = 0; i < p->nmeta; i++)
        lists += !strncmp(p->meta[i].key, "gpu_capture.windows", 19);
    assert_int_equal(lists, pages);
    for (size_t i = 0; i < n; i++) {
        assert_true(off[i] > on[i]);
        if (i) assert_true(on[i] > off[i - 1]);
    }
    /* as a process whose CUPTI captured (capture.c reads the windows only then) */
    tp_process q = *p;
    tp_kv *m = malloc((p->nmeta + 1) * sizeof *m);
    assert_non_null(m);
    memcpy(m, p->meta, p->nmeta * sizeof *m);
    m[p->nmeta] = (tp_kv){"capability.cupti", "activity capture on: 8 kinds"};
    q.meta = m;
    q.nmeta = p->nmeta + 1;
    tp_step *sp = NULL;
    size_t nsp = 0;
    assert_int_equal(tp_capture_timeline(&q, &sp, &nsp), TPROF_OK);
    free(m);
    assert_int_equal(nsp, 1000);
    for (size_t i = 0; i < nsp; i++) {
        assert_true(sp[i].start == on[i]);
        assert_true(sp[i].end == off[i]);
    }
    free(sp);
    tp_run_free(&run);
}

/* "off": nothing to switch, no list; a malformed plan: every step, no window; with both
 * variables the plan wins */
static void test_plan_off_and_malformed(void **state) {
    (void)state;
    tp_run run;
    run_plan("off", NULL, body_ranges);
    load(&run);
    assert_string_equal(tp_meta(&run.procs[0], "gpu_capture"), "off");
    assert_null(tp_meta(&run.procs[0], "gpu_capture.windows"));
    assert_null(tp_meta(&run.procs[0], "kernel_steps"));
    tp_run_free(&run);
    static const char *const bad[] = {"2-3/2", "3-4,4-5", "1-2,3-4", "5-,7", "2-/4", "1,2/9"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        run_plan(bad[i], NULL, body_ranges);
        load(&run);
        assert_string_equal(tp_meta(&run.procs[0], "gpu_capture"), "all");
        assert_null(tp_meta(&run.procs[0], "gpu_capture.windows"));
        assert_null(tp_meta(&run.procs[0], "kernel_steps.on_ns"));
        tp_run_free(&run);
    }
    run_plan("1-1", "5-6", body_ranges);
    load(&run);
    assert_string_equal(tp_meta(&run.procs[0], "gpu_capture"), "1-1");
    assert_string_equal(tp_meta(&run.procs[0], "kernel_steps"), "1");
    uint64_t on[4], off[4];
    assert_int_equal(windows(&run.procs[0], on, off, 4), 1);
    at_iteration(&run.procs[0], on[0], 1);
    at_iteration(&run.procs[0], off[0], 2);
    tp_run_free(&run);
}

static void test_plan_parse(void **state) {
    (void)state;
    tprof__kplan p;
    assert_null(tprof__kplan_parse("all", &p));
    assert_int_equal(p.mode, TPROF__KPLAN_ALL);
    assert_null(tprof__kplan_parse("off", &p));
    assert_int_equal(p.mode, TPROF__KPLAN_OFF);
    /* the default: on from the start through step 4, then 1000-1004, 2000-2004, ... */
    assert_null(tprof__kplan_parse("auto", &p));
    assert_int_equal(p.mode, TPROF__KPLAN_WINDOWS);
    assert_true(p.from_start);
    uint64_t w0 = 0, w1 = 0;
    assert_int_equal(tprof__kplan_window(&p, 2, &w0, &w1), 0);
    assert_true(w0 == 2000 && w1 == 2004);
    assert_null(tprof__kplan_parse("0-1,5,9-12,20-", &p));
    assert_false(p.from_start);
    assert_int_equal(p.mode, TPROF__KPLAN_WINDOWS);
    assert_int_equal(p.n, 4);
    assert_int_equal(p.every, 0);
    static const uint64_t lo[] = {0, 5, 9, 20}, hi[] = {1, 5, 12, UINT64_MAX};
    for (int i = 0; i < 4; i++) {
        uint64_t a = 0, b = 0;
        assert_int_equal(tprof__kplan_window(&p, (uint64_t)i, &a, &b), 0);
        assert_true(a == lo[i] && b == hi[i]);
    }
    uint64_t a = 0, b = 0;
    assert_int_equal(tprof__kplan_window(&p, 4, &a, &b), -1);
    assert_null(tprof__kplan_parse("2-3/5", &p));
    assert_int_equal(p.n, 1);
    assert_int_equal(p.every, 5);
    assert_int_equal(tprof__kplan_window(&p, 2, &a, &b), 0);
    assert_true(a == 12 && b == 13);
    assert_null(tprof__kplan_parse("7/2", &p)); /* every other step from 7 */
    assert_int_equal(tprof__kplan_window(&p, 3, &a, &b), 0);
    assert_true(a == 13 && b == 13);
    /* the repetition ends before UINT64_MAX */
    assert_null(tprof__kplan_parse("18446744073709551610-18446744073709551612/4", &p));
    assert_int_equal(tprof__kplan_window(&p, 0, &a, &b), 0);
    assert_int_equal(tprof__kplan_window(&p, 1, &a, &b), -1);
    static const char *const bad[] = {"", "ALL", "of", "offx", "2-3/2", "2-3/1", "2-3/",
                                      "2-3/x", "2-3/5/5", "2-/4", "1,2/9", "3-4,4-5", "1-2,3-4",
                                      "5-2", "5-,7", "4,2", "1,,2", ",1", "1,", " 1", "1-2 ",
                                      "1;2", "-1", "2-3/99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (!tprof__kplan_parse(bad[i], &p)) fail_msg("\"%s\" accepted", bad[i]);
        assert_int_equal(p.mode, TPROF__KPLAN_ALL);
    }
    assert_non_null(tprof__kplan_parse(NULL, &p));
    char many[512] = "0";
    for (int i = 1; i <= 32; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), ",%d", 2 * i);
    assert_string_equal(tprof__kplan_parse(many, &p), "more than 32 windows"); /* 33 */
    many[strlen(many) - 3] = 0; /* 32 */
    assert_null(tprof__kplan_parse(many, &p));
    assert_int_equal(p.n, 32);
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
        cmocka_unit_test(test_plan_parse),
        cmocka_unit_test(test_plan_repeated),
        cmocka_unit_test(test_capture_on),
        cmocka_unit_test(test_plan_list),
        cmocka_unit_test(test_plan_jump),
        cmocka_unit_test(test_plan_bound),
        cmocka_unit_test(test_plan_off_and_malformed),
        cmocka_unit_test(test_range_steps),
        cmocka_unit_test(test_api_steps),
        cmocka_unit_test(test_open_ended_and_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
