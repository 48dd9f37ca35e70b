/*
 * test_cuda.c — trainprof and the CUDA driver the program itself loaded, without a GPU: a
 * scripted driver (fake_cuda.c, built as libcuda.so.1) mapped by the test as a CUDA program
 * would map the real one. Each scenario runs in a child process of its own.
 *
 *   describe      no CUPTI: while the program has not initialised CUDA the flusher only asks
 *                 whether it has (no name is read, cuInit is never called by us); once it has,
 *                 both devices are written as cuda.<ordinal>.* (UUID in NVML's spelling), and
 *                 the one whose primary context is active as cuda.<ordinal>.in_use
 *   uninitialised the driver mapped but never initialised: no cuda.* key, no cuInit from us
 *   not loaded    no driver mapped: trainprof does not load one
 *   stream        CUDA-event Timers record on the stream the source names at each edge (the
 *                 program's current stream): an interval measures the work of the stream
 *                 current at its start and stop, where set_timing's fixed stream saw none
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analysis/model.h"
#include "trainprof.h"

#define CHILD_PREFIX "cuda"
#include "child.h"

#ifndef FAKE_CUDA_PATH
#error "FAKE_CUDA_PATH must name the fake libcuda.so.1 (tests/cuda.cmake)"
#endif

static void *g_h; /* the fake, mapped by the child */

static void *sym(const char *name) {
    void *f = dlsym(g_h, name);
    CHECK(f != NULL, 10);
    return f;
}

static void map_driver(void) {
    g_h = dlopen(FAKE_CUDA_PATH, RTLD_NOW | RTLD_GLOBAL);
    CHECK(g_h != NULL, 11);
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- the devices, from the driver */
static void describe_body(void) {
    setenv("TRAINPROF_CUPTI", "0", 1);
    map_driver();
    int (*count)(char) = (int (*)(char))sym("fake_cuda_count");
    int (*init)(unsigned) = (int (*)(unsigned))sym("cuInit");
    start_session();
    sleep_ms(150); /* flusher passes while CUDA is not initialised */
    CHECK(count('q') >= 1, 12); /* it asked */
    CHECK(count('n') == 0 && count('i') == 0, 13); /* and went no further */
    CHECK(init(0) == 0, 14); /* the program starts CUDA */
    ((void (*)(int))sym("fake_cuda_set_active"))(2); /* and works on device 1 */
    sleep_ms(150); /* the next try (at most a second later) or the last pass writes it */
}

static void test_describe(void **state) {
    (void)state;
    fresh_dir("describe");
    in_child(describe_body);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    const char *want[][2] = {
        {"cuda.0.name", "Fake H100"},
        {"cuda.0.uuid", "GPU-20212223-2425-2627-2829-2a2b2c2d2e2f"},
        {"cuda.0.sm_count", "132"},
        {"cuda.0.memory_total_bytes", "85029158912"},
        {"cuda.0.sm_clock_max_mhz", "1755"},
        {"cuda.0.compute_capability", "9.0"},
        {"cuda.1.name", "Fake H200"},
        {"cuda.1.uuid", "GPU-40414243-4445-4647-4849-4a4b4c4d4e4f"},
        {"cuda.1.sm_clock_max_mhz", "1980"},
        {"cuda.1.in_use", "1"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const char *v = tp_meta(p, want[i][0]);
        if (!v || strcmp(v, want[i][1]))
            fail_msg("%s = %s, want %s", want[i][0], v ? v : "(none)", want[i][1]);
    }
    assert_null(tp_meta(p, "cuda.0.in_use")); /* its primary context never became active */
    tp_run_free(&run);
}

static void uninitialised_body(void) {
    setenv("TRAINPROF_CUPTI", "0", 1);
    map_driver();
    int (*count)(char) = (int (*)(char))sym("fake_cuda_count");
    start_session();
    sleep_ms(100);
    CHECK(tprof_shutdown() == TPROF_OK, 15); /* the last pass asks once more */
    CHECK(count('q') >= 2 && count('i') == 0 && count('n') == 0, 16);
}

static void not_loaded_body(void) {
    setenv("TRAINPROF_CUPTI", "0", 1);
    start_session();
    sleep_ms(100);
    CHECK(tprof_shutdown() == TPROF_OK, 17);
    CHECK(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) == NULL, 18);
}

static void assert_no_cuda_keys(void) {
    tp_run run;
    load(&run);
    for (size_t i = 0; i < run.procs[0].nmeta; i++)
        if (!strncmp(run.procs[0].meta[i].key, "cuda.", 5))
            fail_msg("unexpected %s", run.procs[0].meta[i].key);
    tp_run_free(&run);
}

/* A MIG device (device 1 under FAKE_CUDA_MIG=1): the driver's _v2 UUID is the MIG device's
 * own, the first version's its GPU's; the file names both, as NVML spells them. */
static void mig_body(void) {
    setenv("FAKE_CUDA_MIG", "1", 1);
    describe_body();
}

static void test_describe_mig(void **state) {
    (void)state;
    fresh_dir("describe-mig");
    in_child(mig_body);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_string_equal(tp_meta(p, "cuda.0.uuid"), "GPU-20212223-2425-2627-2829-2a2b2c2d2e2f");
    assert_null(tp_meta(p, "cuda.0.gpu_uuid"));
    assert_string_equal(tp_meta(p, "cuda.1.uuid"), "MIG-60616263-6465-6667-6869-6a6b6c6d6e6f");
    assert_string_equal(tp_meta(p, "cuda.1.gpu_uuid"), "GPU-40414243-4445-4647-4849-4a4b4c4d4e4f");
    tp_run_free(&run);
}

static void test_uninitialised(void **state) {
    (void)state;
    fresh_dir("uninit");
    in_child(uninitialised_body);
    assert_no_cuda_keys();
    fresh_dir("noload");
    in_child(not_loaded_body);
    assert_no_cuda_keys();
}

/* ---- Timers on the current stream */
static char g_s1, g_s2; /* two streams (their addresses) */
static void *g_current;

static void *current_stream(void *ctx) {
    (void)ctx;
    return g_current;
}

static void stream_body(void) {
    map_driver();
    int (*count)(char) = (int (*)(char))sym("fake_cuda_count");
    ((int (*)(unsigned))sym("cuInit"))(0);
    ((void (*)(int))sym("fake_cuda_set_context"))(1);
    void (*work)(void *, double) = (void (*)(void *, double))sym("fake_cuda_work");
    int (*events_on)(void *) = (int (*)(void *))sym("fake_cuda_events_on");
    double got[2][2];
    for (int source = 0; source < 2; source++) {
        tprof_timers *t;
        CHECK(tprof_timers_create(2, TPROF_TIMERS_MAX, &t) == TPROF_OK, 20);
        CHECK(tprof_timers_set_timing(t, TPROF_TIMING_CUDA_EVENTS, &g_s1) == TPROF_OK, 21);
        if (source) CHECK(tprof_timers_set_stream_source(t, current_stream, NULL) == TPROF_OK, 22);
        tprof_timer *tm = tprof_timer_get(t, "fwd", 2);
        g_current = &g_s1; /* 20 ms of work on the current stream, s1 */
        tprof_timer_start(tm, 0);
        work(&g_s1, 20);
        tprof_timer_stop(tm, 0);
        got[source][0] = tprof_timer_elapsed(tm, 1, 0);
        g_current = &g_s2; /* the program switches streams: 5 ms on s2 */
        tprof_timer_start(tm, 0);
        work(&g_s2, 5);
        tprof_timer_stop(tm, 0);
        got[source][1] = tprof_timer_elapsed(tm, 1, 0);
        CHECK(count('s') == 0, 23); /* no synchronize anywhere */
        tprof_timers_destroy(t);
    }
    CHECK(count('e') == 0, 24); /* every event destroyed */
    CHECK(events_on(&g_s1) == 6 && events_on(&g_s2) == 2, 25);
    /* the fixed stream s1 saw 20 ms, then nothing; the current stream 20 ms, then 5 ms */
    CHECK(fabs(got[0][0] - 0.020) < 1e-6 && fabs(got[0][1]) < 1e-6, 26);
    CHECK(fabs(got[1][0] - 0.020) < 1e-6 && fabs(got[1][1] - 0.005) < 1e-6, 27);
    CHECK(tprof_timers_set_stream_source(NULL, current_stream, NULL) == TPROF_ERR_INVALID_ARG, 28);
}

static void test_stream(void **state) {
    (void)state;
    fresh_dir("stream");
    in_child(stream_body);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_describe),
        cmocka_unit_test(test_describe_mig),
        cmocka_unit_test(test_uninitialised),
        cmocka_unit_test(test_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
