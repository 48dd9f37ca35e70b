/*
 * test_metrics_registry.c — the live metrics' registry (core/metrics.c, compiled in;
 * docs/metrics.md): its text formats (Prometheus 0.0.4 and OpenMetrics, escapes,
 * histograms, constant labels), label values that are not UTF-8 (each comes out valid and
 * escaped; cuts fall between characters), and the busy-time counter from known busy
 * intervals. Every rendering checked here passes the test's own check of the text format
 * and, when promtool is installed, `promtool check metrics`.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capture/comm_ext.h"
#include "core/metrics.h"
#include "trainprof.h"

#include "metrics_check.h"

/* ---------------------------------------------------------------- registry formats */

static void test_render_formats(void **state) {
    (void)state;
    assert_int_equal(tprof__m_enable(), 0);
    static const double b[] = {0.01, 0.1, 1};
    int c = tprof__m_family("t_requests_total", "requests\nserved", TPROF_M_COUNTER, NULL, 0);
    int g = tprof__m_family("t_temp_celsius", "a \\ gauge", TPROF_M_GAUGE, NULL, 0);
    int h = tprof__m_family("t_lat_seconds", "latency", TPROF_M_HISTOGRAM, b, 3);
    assert_true(c >= 0 && g >= 0 && h >= 0);
    assert_int_equal(tprof__m_family("t_requests_total", "x", TPROF_M_COUNTER, NULL, 0), c);
    assert_int_equal(tprof__m_family("bad name", "x", TPROF_M_GAUGE, NULL, 0), -1);
    int s1 = tprof__m_series(c, (const char *const[]){"op", "AllReduce", NULL});
    int s2 = tprof__m_series(c, (const char *const[]){"op", "we\"ird\\\n", NULL});
    assert_int_equal(tprof__m_series(c, (const char *const[]){"op", "AllReduce", NULL}), s1);
    tprof__m_add(s1, 3);
    tprof__m_add(s1, 0.5);
    tprof__m_add(s2, 1);
    int sg = tprof__m_series(g, NULL);
    tprof__m_set(sg, -2.25);
    int sh = tprof__m_series(h, (const char *const[]){"rank", "0", NULL});
    tprof__m_observe(sh, 0.005);
    tprof__m_observe(sh, 0.05);
    tprof__m_observe(sh, 0.05);
    tprof__m_observe(sh, 5);
    tprof__m_set_const_labels((const char *const[]){"job", "j1", NULL});
    char *out;
    size_t len;
    assert_int_equal(tprof__m_render(0, &out, &len), 0);
    assert_int_equal(strlen(out), len);
    assert_non_null(strstr(out, "# HELP t_requests_total requests\\nserved\n"
                                "# TYPE t_requests_total counter\n"));
    assert_non_null(strstr(out, "t_requests_total{job=\"j1\",op=\"AllReduce\"} 3.5\n"));
    assert_non_null(strstr(out, "t_requests_total{job=\"j1\",op=\"we\\\"ird\\\\\\n\"} 1\n"));
    assert_non_null(strstr(out, "# HELP t_temp_celsius a \\\\ gauge\n"));
    assert_non_null(strstr(out, "t_temp_celsius{job=\"j1\"} -2.25\n"));
    assert_non_null(strstr(out, "t_lat_seconds_bucket{job=\"j1\",rank=\"0\",le=\"0.01\"} 1\n"));
    assert_non_null(strstr(out, "t_lat_seconds_bucket{job=\"j1\",rank=\"0\",le=\"0.1\"} 3\n"));
    assert_non_null(strstr(out, "t_lat_seconds_bucket{job=\"j1\",rank=\"0\",le=\"1\"} 3\n"));
    assert_non_null(strstr(out, "t_lat_seconds_bucket{job=\"j1\",rank=\"0\",le=\"+Inf\"} 4\n"));
    assert_non_null(strstr(out, "t_lat_seconds_count{job=\"j1\",rank=\"0\"} 4\n"));
    assert_true(fabs(sample(out, "t_lat_seconds_sum{") - 5.105) < 1e-9);
    assert_null(strstr(out, "# EOF"));
    free(out);
    assert_int_equal(tprof__m_render(1, &out, &len), 0);
    assert_non_null(strstr(out, "# TYPE t_requests counter\n"));
    assert_non_null(strstr(out, "t_requests_total{job=\"j1\",op=\"AllReduce\"} 3.5\n"));
    assert_true(len > 6 && !strcmp(out + len - 6, "# EOF\n"));
    free(out);
    tprof__m_set_const_labels((const char *const[]){NULL});
}

/* Label values hold whatever bytes a host name, an environment variable or a user's timer
 * name held: each comes out valid UTF-8 (a maximal invalid subpart -> one U+FFFD) and
 * escaped, so that the scrape stays parsable. Cuts to a size fall between characters. */
static void test_label_utf8(void **state) {
    (void)state;
    fresh_dir("utf8");
    assert_int_equal(tprof__m_enable(), 0);
    int g = tprof__m_family("t_utf8_info", "labels of any bytes", TPROF_M_GAUGE, NULL, 0);
    static const struct { const char *in, *out; } v[] = {
        {"a\xff" "b", "a" FFFD "b"},               /* a byte that is never UTF-8 */
        {"cut\xE2\x82", "cut" FFFD},               /* a 3-byte character cut after 2 */
        {"\xE2\x82" "x\xE2", FFFD "x" FFFD},        /* cut, then a lone lead byte */
        {"\xC0\xAF", FFFD FFFD},                   /* overlong '/' */
        {"\xED\xA0\x80", FFFD FFFD FFFD},           /* a surrogate */
        {"\xF4\x90\x80\x80", FFFD FFFD FFFD FFFD},   /* above U+10FFFF */
        {"\xF0\x9F\x98", "" FFFD},                  /* a 4-byte character cut after 3 */
        {"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"},
        {"q\"b\\n\nl\xff", "q\\\"b\\\\n\\nl" FFFD},  /* escapes beside a bad byte */
    };
    char want[400];
    char *out;
    size_t len;
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        int se = tprof__m_series(g, (const char *const[]){"v", v[i].in, NULL});
        assert_true(se >= 0);
        tprof__m_set(se, (double)i);
    }
    assert_int_equal(tprof__m_render(0, &out, &len), 0);
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        snprintf(want, sizeof want, "\nt_utf8_info{v=\"%s\"} %zu\n", v[i].out, i);
        if (!strstr(out, want)) fprintf(stderr, "case %zu: no line %s", i, want + 1);
        assert_non_null(strstr(out, want));
    }
    const char *bad = exposition_error(out);
    if (bad) fprintf(stderr, "%s\n", bad);
    assert_null(bad);
    promtool_check(out);
    free(out);
    /* raw labels are refused unless valid UTF-8 */
    assert_int_equal(tprof__m_series_raw(g, "v=\"\xff\""), -1);
    /* cuts between characters: "ab" + U+20AC (3 bytes) + "c" */
    const char *s = "ab\xE2\x82\xAC" "c";
    assert_int_equal(tprof__m_utf8_cut(s, 0), 0);
    assert_int_equal(tprof__m_utf8_cut(s, 2), 2);
    assert_int_equal(tprof__m_utf8_cut(s, 3), 2);
    assert_int_equal(tprof__m_utf8_cut(s, 4), 2);
    assert_int_equal(tprof__m_utf8_cut(s, 5), 5);
    assert_int_equal(tprof__m_utf8_cut(s, 6), 6);
    assert_int_equal(tprof__m_utf8_cut(s, 60), 6);
    const char *e = "\xF0\x9F\x98\x80!"; /* U+1F600 */
    for (size_t m = 0; m < 4; m++) assert_int_equal(tprof__m_utf8_cut(e, m), 0);
    assert_int_equal(tprof__m_utf8_cut(e, 4), 4);
}

/* The busy-time counter fed by sampled utilisation (tprof__m_integrate, as the NVML sampler
 * feeds trainprof_gpu_busy_seconds_total): a GPU busy during known intervals, sampled every
 * 250 ms with the fraction of the past 250 ms it was busy (what NVML reports when its period
 * is the sampler's) -> the counter equals the busy seconds. A stall of the sampler (22 s
 * without a sample) adds nothing, rather than stretching one sample over it. */
static double busy_in(double a, double b, const double (*iv)[2], size_t n) {
    double t = 0;
    for (size_t i = 0; i < n; i++) {
        double lo = iv[i][0] > a ? iv[i][0] : a, hi = iv[i][1] < b ? iv[i][1] : b;
        if (hi > lo) t += hi - lo;
    }
    return t;
}

static void test_busy_counter(void **state) {
    (void)state;
    assert_int_equal(tprof__m_enable(), 0);
    int c = tprof__m_family("t_busy_seconds_total", "busy", TPROF_M_COUNTER, NULL, 0);
    int se = tprof__m_series(c, (const char *const[]){"gpu", "0", NULL});
    assert_true(se >= 0);
    /* [1, 3): whole periods; [5.25, 5.5) one; [6.125, 6.375) halves of two; [29.5, 31) half
     * before the stall ends at 30 (unseen), 1 s after */
    static const double busy[][2] = {{1.0, 3.0}, {5.25, 5.5}, {6.125, 6.375}, {29.5, 31.0}};
    const size_t nb = sizeof busy / sizeof *busy;
    tprof__m_integ st = {0};
    double prev = 0, seen = 0;
    char *out;
    size_t len;
    for (int k = 0; k <= 124; k++) { /* 0 .. 31 s; none in (8, 30) */
        double t = k * 0.25;
        if (t > 8.0 && t < 30.0) continue;
        double r = t == 0 ? 0 : busy_in(t - 0.25, t, busy, nb) / 0.25;
        tprof__m_integrate(se, &st, r, (uint64_t)(t * 1e9), 5000000000ull);
        /* the same time again: nothing */
        tprof__m_integrate(se, &st, 1.0, (uint64_t)(t * 1e9), 5000000000ull);
        assert_int_equal(tprof__m_render(0, &out, &len), 0);
        double v = sample(out, "t_busy_seconds_total{gpu=\"0\"}");
        free(out);
        assert_true(v >= prev); /* monotonic */
        prev = v;
        if (t <= 8.0 || t > 30.0) seen = v;
    }
    /* 2 + 0.25 + 0.25 + 1: the 0.5 s busy in (29.5, 30] fell in the stall */
    fprintf(stderr, "busy counter: %.17g s (busy 4.0 s, of which 3.5 s sampled)\n", seen);
    assert_true(seen == 3.5);
    /* a reading past 100 % counts the interval once, no more */
    tprof__m_integrate(se, &st, 1.7, (uint64_t)(31.5 * 1e9), 5000000000ull);
    assert_int_equal(tprof__m_render(0, &out, &len), 0);
    assert_true(sample(out, "t_busy_seconds_total{gpu=\"0\"}") == 4.0);
    free(out);
}

/* --------------------------------------------------------------- endpoint cases */

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_formats),
        cmocka_unit_test(test_label_utf8),
        cmocka_unit_test(test_busy_counter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
