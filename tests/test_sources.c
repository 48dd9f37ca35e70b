/*
 * test_sources.c — the session's loops over the capture sources (core/sources_run.c) and the
 * table of src/capture/sources.c, with fake sources: every loop calls the sources in table
 * order and skips the members a source leaves NULL; the tick asks for the earliest wake-up;
 * a source not built in is absent from the table, not a stub.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/source.h"

static char g_log[256];
static void note(const char *what) {
    size_t n = strlen(g_log);
    snprintf(g_log + n, sizeof g_log - n, "%s%s", n ? "," : "", what);
}

/* ------------------------------------------------- fake sources for the loops */

static const tprof_config *g_cfg_seen;
static int g_final_seen = -1, g_window_seen = -1;
static void a_start(const tprof_config *c) { note("a.start"); g_cfg_seen = c; }
static uint64_t a_tick(int final) { note("a.tick"); g_final_seen = final; return 5000; }
static void a_flush(void) { note("a.flush"); }
static int a_capability(char *line, size_t n) { snprintf(line, n, "off: test"); return 1; }
static uint64_t b_tick(int final) { (void)final; note("b.tick"); return 0; }
static void b_after_fork(void) { note("b.fork"); }
static int b_active(void) { return 7; }
static void b_window(int on) { note("b.window"); g_window_seen = on; }
static int b_capability(char *line, size_t n) { (void)line; (void)n; return 0; }
static uint64_t c_tick(int final) { (void)final; note("c.tick"); return 3000; }
static void c_flush(void) { note("c.flush"); }

static const tprof__source src_a = {.name = "a", .start = a_start, .tick = a_tick,
                                    .flush = a_flush, .capability = a_capability};
static const tprof__source src_b = {.name = "b", .tick = b_tick, .after_fork = b_after_fork,
                                    .active = b_active, .window = b_window,
                                    .capability = b_capability};
static const tprof__source src_c = {.name = "c", .tick = c_tick, .flush = c_flush};
static const tprof__source src_d = {.name = "d"};

static const tprof__source *const fake_table[] = {&src_a, &src_b, &src_c, &src_d};

/* What core sees as the table: the fakes (sources.c is checked by its own case below). */
const tprof__source *const *tprof__sources(size_t *n) {
    *n = sizeof fake_table / sizeof fake_table[0];
    return fake_table;
}

static char g_caps[256];
void tprof__capability(const char *name, const char *status);
void tprof__capability(const char *name, const char *status) {
    size_t n = strlen(g_caps);
    snprintf(g_caps + n, sizeof g_caps - n, "%s=%s;", name, status);
}
/* internal.h's log, which nothing here calls */
void tprof__log(int level, const char *fmt, ...) { (void)level; (void)fmt; }

static int reset(void **state) {
    (void)state;
    g_log[0] = 0;
    g_caps[0] = 0;
    return 0;
}

static void test_loops_in_table_order(void **state) {
    (void)state;
    tprof_config cfg = {.sample_hz = 3};
    tprof__sources_start(&cfg);
    assert_string_equal(g_log, "a.start");
    assert_ptr_equal(g_cfg_seen, &cfg);
    g_log[0] = 0;
    /* earliest wake-up of those asked for: 3000 before 5000; b asked for none */
    assert_int_equal(tprof__sources_tick(1), 3000);
    assert_string_equal(g_log, "a.tick,b.tick,c.tick");
    assert_int_equal(g_final_seen, 1);
    g_log[0] = 0;
    tprof__sources_flush();
    assert_string_equal(g_log, "a.flush,c.flush");
    g_log[0] = 0;
    tprof__sources_after_fork();
    tprof__sources_window(1);
    assert_string_equal(g_log, "b.fork,b.window");
    assert_int_equal(g_window_seen, 1);
}

static void test_capability_and_active(void **state) {
    (void)state;
    tprof__sources_capability();
    assert_string_equal(g_caps, "a=off: test;"); /* b had nothing to say; c, d no member */
    assert_int_equal(tprof__source_active("b"), 7);
    assert_int_equal(tprof__source_active("a"), 0);       /* no `active` member */
    assert_int_equal(tprof__source_active("cupti"), 0);   /* not in the table */
}

/* --------------------------------- src/capture/sources.c's table, built here without CUPTI */

const tprof__source *const *tprof__capture_sources(size_t *n);
const tprof__source tprof__source_procfs = {.name = "procfs"};
const tprof__source tprof__source_nvml = {.name = "nvml"};
const tprof__source tprof__source_cuda_devices = {.name = "cuda_devices"};
const tprof__source tprof__source_nccl = {.name = "nccl"};
const tprof__source tprof__source_nvtx = {.name = "nvtx"};

static void test_capture_table(void **state) {
    (void)state;
    size_t n;
    const tprof__source *const *t = tprof__capture_sources(&n);
    char names[128] = "";
    for (size_t i = 0; i < n; i++) {
        size_t k = strlen(names);
        snprintf(names + k, sizeof names - k, "%s%s", i ? "," : "", t[i]->name);
    }
    assert_string_equal(names, "procfs,nvml,cuda_devices,nccl,nvtx");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_loops_in_table_order, reset),
        cmocka_unit_test_setup(test_capability_and_active, reset),
        cmocka_unit_test(test_capture_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
