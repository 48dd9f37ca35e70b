/*
 * test_html.c — the HTML report (src/export/html.c) on a synthetic run with known values and
 * hostile names: no markup from the run survives unescaped, every plot has the expected
 * number of points, bars and cells, and the figures appear.
 *
 * `test_html --write DIR` only writes the synthetic run into DIR (for html_check.py and the
 * headless Chromium test, tests/html_browser.sh, which render it through the CLI);
 * `test_html --write-long DIR` writes the 30,000-step run of write_long_run (for the
 * screenshot test, tests/html_shot.sh).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/findings.h"
#include "analysis/model.h"
#include "analysis/report.h"
#include "export/html.h"
#include "export/html_svg.h"
#include "format/format.h"
#include "synth.h"

static const uint64_t T0 = 1000000000ull, MS = 1000000ull;

/* Hostile names: each would break the page, or run script, if written raw. */
#define EVIL_KERNEL "<script>alert(\"k\")</script>&'gemm"
#define EVIL_RANGE "</table><img src=x onerror=alert(1)>"
#define EVIL_TIMER "fwd<b>\"'"
#define EVIL_HOST "h<i>&"

/* Two ranks, 5 API steps each (the first warm-up). Rank 0's steps last 10, 20, 30, 40, 50 ms
 * (measured: 20..50, mean 35); rank 1's 11, 22, 33, 44, 55 ms (mean 38.5). In each step of
 * rank 0: the hostile kernel 2 ms and "ampere_sgemm_nn" 3 ms, the hostile range 1 ms, a
 * timer 4 ms; on both ranks one AllReduce of 4 MB on communicator 0x77. Rank 0 also sampled
 * its GPU: 12 power and utilisation samples. */
static void write_run(const char *dir) {
    for (int r = 0; r < 2; r++) {
        synth_file *f = synth_open(dir, r ? "node1" : EVIL_HOST, 100 + r, 1700000000000000000ull, T0);
        assert_non_null(f);
        synth_rank(f, r, 2);
        synth_thread(f, 1, (uint32_t)(100 + r));
        synth_thread(f, 2, (uint32_t)(200 + r));
        synth_domain(f, 1, "trainprof");
        synth_category(f, 1, 1, "timers");
        uint64_t b = T0 + MS;
        for (uint64_t s = 0; s < 5; s++) {
            uint64_t len = (s + 1) * (r ? 11 : 10) * MS;
            synth_step_begin(f, 1, b, s);
            if (r == 0) {
                synth_kernel(f, 2, b + 1 * MS, b + 3 * MS, 0, 7, (uint32_t)(10 * s + 1), EVIL_KERNEL);
                synth_kernel(f, 2, b + 3 * MS, b + 6 * MS, 0, 7, (uint32_t)(10 * s + 2), "ampere_sgemm_nn");
                synth_push(f, 1, b + 1 * MS, EVIL_RANGE, 0, 0);
                synth_pop(f, 1, b + 2 * MS, 0);
                synth_push(f, 1, b + 2 * MS, EVIL_TIMER, 1, 1);
                synth_pop(f, 1, b + 6 * MS, 1);
            }
            tprof_pl_comm c;
            memset(&c, 0, sizeof c);
            c.end_ns = b + 8 * MS;
            c.bytes = 4000000;
            c.count = 1000000;
            c.comm_hash = 0x77;
            c.seq = (uint32_t)s;
            c.nranks = 2;
            c.rank = (uint32_t)r;
            c.op = TPROF_COMM_ALLREDUCE;
            synth_comm(f, 1, b + 7 * MS, &c, NULL);
            synth_step_end(f, 1, b + len, s);
            b += len;
        }
        if (r == 0)
            for (int i = 0; i < 12; i++) {
                synth_counter(f, 2, T0 + (uint64_t)i * 14 * MS, "gpu0.power_w", 100 + 10 * i);
                synth_counter(f, 2, T0 + (uint64_t)i * 14 * MS, "gpu0.util_percent", 50);
            }
        synth_end_of_file(f, b + MS, 0);
        assert_int_equal(synth_close(f), 0);
    }
}

/* A long run with structure the eye should see: 2 ranks, 30,001 steps each (the first, 50 ms,
 * the warm-up), so 30,000 measured steps, which the heatmap averages in 120 columns of 250.
 * A step lasts 1 ms on rank 0 and 1.05 ms on rank 1, plus a jitter of -80 to +80 us that
 * repeats every 10 steps and sums to 0 over them; steps 12,001-18,000 (the columns 48-71) are
 * 0.3 ms slower, every 1,000th step (a checkpoint) lasts 30 ms, and three single steps stall
 * for 105 ms (rank 0's steps 5,123 and 24,321, rank 1's 9,876): single steps span 0.92 to
 * 105 ms. Column means (rank 0 / rank 1): 1.000 / 1.050 ms, 1.300 / 1.350 ms in the slow
 * stretch; every fourth column (the one holding a checkpoint) (30 - d) / 250 ms more, where d
 * is the time the checkpoint step would have had (jitter -80 us: rank 0's 1.116 ms), a stalled
 * step's column (105 - d) / 250 ms more (1.416 ms). */
#define LONG_STEPS 30000
static void write_long_run(const char *dir) {
    static const int jitter_us[10] = {-80, 40, -60, 80, 0, -20, 60, -40, 20, 0};
    for (int r = 0; r < 2; r++) {
        synth_file *f = synth_open(dir, r ? "node1" : "node0", 300 + r, 1700000000000000000ull, T0);
        assert_non_null(f);
        synth_rank(f, r, 2);
        synth_thread(f, 1, (uint32_t)(300 + r));
        uint64_t b = T0;
        for (uint64_t s = 0; s <= LONG_STEPS; s++) {
            int64_t us = 1000 + 50 * r + jitter_us[s % 10];
            if (s >= 12001 && s <= 18000) us += 300;
            if (s == 0) us = 50000;
            else if (s % 1000 == 0) us = 30000;
            if ((r == 0 && (s == 5123 || s == 24321)) || (r == 1 && s == 9876)) us = 105000;
            synth_step_begin(f, 1, b, s);
            b += (uint64_t)us * 1000;
            synth_step_end(f, 1, b, s);
            /* a chunk per 500 steps (1,000 records): the reader walks many chunks */
            if (s % 500 == 499) synth_flush(f);
        }
        synth_end_of_file(f, b + MS, 0);
        assert_int_equal(synth_close(f), 0);
    }
}

static size_t count(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* The attribute data-points of the polyline whose data-label is `label` inside the svg
 * whose id is `svg_id`; -1 when absent. */
static int points_of(const char *html, const char *svg_id, const char *label) {
    char key[128];
    snprintf(key, sizeof key, "<svg class=\"chart\" id=\"%s\"", svg_id);
    const char *s = strstr(html, key);
    if (!s) return -1;
    const char *end = strstr(s, "</svg>");
    snprintf(key, sizeof key, "data-label=\"%s\" data-points=\"", label);
    const char *p = strstr(s, key);
    if (!p || p > end) return -1;
    return atoi(p + strlen(key));
}

static size_t count_in_svg(const char *html, const char *svg_id, const char *needle) {
    char key[128];
    snprintf(key, sizeof key, "<svg class=\"chart\" id=\"%s\"", svg_id);
    const char *s = strstr(html, key);
    if (!s) return 0;
    const char *end = strstr(s, "</svg>");
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, needle)) && p < end; p += strlen(needle)) n++;
    return n;
}

static void test_html_report(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "html"), 0);
    write_run(dir);
    tp_run run;
    char err[256];
    assert_int_equal(tp_run_load(dir, &run, err, sizeof err), 0);
    tp_report_opts o;
    tp_report_opts_init(&o);
    tp_report tr;
    assert_int_equal(tp_report_make(&run, &o, &tr), 0);
    cJSON *rep = tr.doc;
    /* a finding with hostile text, as a later rule could write one (the findings are typed
     * results: the HTML renders them, not the document) */
    tp_finding *fd = tp_finding_add(&tr.res.findings, "test_rule", "critical", -1,
                                    "slow <kernel> " EVIL_KERNEL, NULL);
    assert_non_null(fd);
    tp_ev_number(fd, "ratio_known", 4.25);
    /* the header, the steps and the timers tables come from the typed results: with their
     * copies taken out of the document, they still show the run's figures below */
    cJSON *rk;
    cJSON_ArrayForEach(rk, cJSON_GetObjectItem(rep, "ranks"))
        cJSON_DeleteItemFromObject(rk, "steps");
    cJSON_DeleteItemFromObject(rep, "timers");
    cJSON_DeleteItemFromObject(rep, "run");
    /* a section this renderer does not know: shown generically */
    cJSON *extra = cJSON_AddObjectToObject(rep, "future_section");
    cJSON_AddStringToObject(extra, EVIL_RANGE, "value<1>");

    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    assert_int_equal(tp_html_write(&tr, &o, mf), 0);
    fclose(mf);

    /* nothing from the run came through as markup */
    assert_null(strcasestr(buf, "<script"));
    assert_null(strcasestr(buf, "<img"));
    assert_null(strstr(buf, "fwd<b>"));
    assert_null(strstr(buf, "h<i>&"));
    assert_non_null(strstr(buf, "&lt;script&gt;alert(&quot;k&quot;)&lt;/script&gt;&amp;&#39;gemm"));
    assert_non_null(strstr(buf, "&lt;/table&gt;&lt;img src=x onerror=alert(1)&gt;"));
    assert_non_null(strstr(buf, "fwd&lt;b&gt;&quot;&#39;"));
    assert_non_null(strstr(buf, "h&lt;i&gt;&amp;"));
    assert_non_null(strstr(buf, "slow &lt;kernel&gt;"));
    assert_non_null(strstr(buf, "value&lt;1&gt;"));
    assert_non_null(strstr(buf, "<h2 class=\"generic\">future_section</h2>"));
    assert_non_null(strstr(buf, "4.25"));
    assert_int_equal(count(buf, "<li class=\"finding sev-critical\">"), 1);

    /* step time: 4 measured steps per rank; heatmap 2 ranks x 4 steps */
    assert_int_equal(points_of(buf, "step-time", "rank 0"), 4);
    assert_int_equal(points_of(buf, "step-time", "rank 1"), 4);
    assert_int_equal(count_in_svg(buf, "heatmap", "<rect class=\"cell\""), 8);
    assert_non_null(strstr(buf, "rank 0, step 4: 50.000 ms"));
    assert_non_null(strstr(buf, "rank 1, step 1: 22.000 ms"));
    /* the steps table: rank 0 mean 35, rank 1 mean 38.5 */
    assert_non_null(strstr(buf, "<td class=\"n\">35.000</td>"));
    assert_non_null(strstr(buf, "<td class=\"n\">38.500</td>"));
    /* breakdown: a bar per rank, at least the two kernel classes of rank 0 */
    assert_true(count_in_svg(buf, "breakdown", "<rect class=\"seg\"") >= 2);
    /* rank 0's compute: 5 ms of kernels (the report's breakdown section when it has one,
     * else the kernel classes, both GEMM here) */
    assert_true(strstr(buf, "<title>rank 0, compute: 5.000 ms</title>") ||
                strstr(buf, "<title>rank 0, gemm: 5.000 ms</title>"));
    /* NVML: 12 samples of power and utilisation on rank 0 */
    assert_int_equal(points_of(buf, "nvml-0-power_w", "GPU 0"), 12);
    assert_int_equal(points_of(buf, "nvml-1-util_percent", "GPU 0"), 12);
    /* communication table: AllReduce, 4 ops per rank in measured... 5 per run, 4 MB */
    assert_non_null(strstr(buf, "<td>AllReduce</td>"));
    assert_non_null(strstr(buf, "<code>0x77</code>") ? strstr(buf, "<code>0x77</code>")
                                                        : strstr(buf, "<code>0x0000000000000077</code>"));
    /* timers table */
    assert_non_null(strstr(buf, "id=\"timers-table\""));
    /* rank 0's timer: 4 ms per measured step, the only rank with timers */
    assert_non_null(strstr(buf, "<tr><td class=\"name\">fwd&lt;b&gt;&quot;&#39;</td>"
                                "<td class=\"n\">4.000</td><td class=\"n\">4.000</td>"
                                "<td class=\"n\">4.000</td></tr>"));
    /* the header: 2 ranks, 2 processes */
    assert_non_null(strstr(buf, " &mdash; 2 ranks, 2 processes, "));
    /* every tag balanced is checked by html_check.py; here: one document */
    assert_int_equal(count(buf, "<html"), 1);
    assert_int_equal(count(buf, "</html>"), 1);
    free(buf);

    /* without the run: tables only, a note instead of the per-step plots */
    mf = open_memstream(&buf, &len);
    tp_report no_run = tr;
    no_run.run = NULL;
    assert_int_equal(tp_html_write(&no_run, NULL, mf), 0);
    fclose(mf);
    assert_null(strstr(buf, "id=\"step-time\""));
    assert_non_null(strstr(buf, "Per-step plots need the rank files"));
    free(buf);

    /* long series are downsampled */
    tp_report_free(&tr);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* The HTML report (default options) of the synthetic run in dir; *len gets its length. The
 * caller frees it. */
static char *html_of(const char *dir, size_t *len) {
    tp_run run;
    char err[256];
    assert_int_equal(tp_run_load(dir, &run, err, sizeof err), 0);
    tp_report rep;
    assert_int_equal(tp_report_make(&run, NULL, &rep), 0);
    char *buf = NULL;
    FILE *mf = open_memstream(&buf, len);
    assert_int_equal(tp_html_write(&rep, NULL, mf), 0);
    fclose(mf);
    tp_report_free(&rep);
    tp_run_free(&run);
    return buf;
}

/* rep rendered as HTML (as_html) or text, into a string the caller frees. Not inlined: gcc 12
 * at -O3 takes the string for a pointer to the local that open_memstream filled in
 * (-Wdangling-pointer, a false positive). */
__attribute__((noinline)) static char *render(const tp_report *rep, int as_html) {
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    assert_non_null(mf);
    assert_int_equal(as_html ? tp_html_write(rep, NULL, mf) : tp_report_write_text(rep, mf, 0), 0);
    fclose(mf);
    return buf;
}

/* The part of html from `from` up to `to` (a copy the caller frees; "" when absent). */
static char *between(const char *html, const char *from, const char *to) {
    const char *a = strstr(html, from);
    const char *b = a ? strstr(a, to) : NULL;
    if (!a || !b) return strdup("");
    return strndup(a, (size_t)(b - a));
}

/* The GPU, NVML and breakdown parts of the text, the kernel tables and the breakdown chart
 * of the HTML come from the typed results (results.h), not back from the document: with
 * the ranks' "gpu", "nvml" and "breakdown" removed from the document they are unchanged.
 * Rank 0 of write_run, per measured step (4 steps, 140 ms in all): ampere_sgemm_nn once, 3 ms
 * (60 % of the 5 ms of kernels), 5 ms of compute (14.3 % of the steps); its power samples
 * inside the steps' span (14 to 140 ms after T0: 110 to 200 W) average 155 W. */
static void test_html_text_typed(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "html-typed"), 0);
    write_run(dir);
    tp_run run;
    char err[256];
    assert_int_equal(tp_run_load(dir, &run, err, sizeof err), 0);
    tp_report rep;
    assert_int_equal(tp_report_make(&run, NULL, &rep), 0);
    char *h1 = render(&rep, 1), *t1 = render(&rep, 0);
    cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(rep.doc, "ranks")) {
        cJSON_DeleteItemFromObject(r, "gpu");
        cJSON_DeleteItemFromObject(r, "nvml");
        cJSON_DeleteItemFromObject(r, "breakdown");
    }
    char *h2 = render(&rep, 1), *t2 = render(&rep, 0);
    assert_string_equal(t2, t1);
    char line[256];
    snprintf(line, sizeof line, "  %-60s %9.1f %11.3f %10.1f %6.1f%%\n", "ampere_sgemm_nn", 1.0,
             3.0, 3000.0, 60.0);
    assert_non_null(strstr(t2, line));
    snprintf(line, sizeof line, "    %-28s%8.2f %8.2f %8.2f  %5.1f %%\n", "compute kernels", 5.0,
             5.0, 5.0, 100 * 20.0 / 140.0);
    assert_non_null(strstr(t2, line));
    assert_non_null(strstr(t2, "; power samples 155.0 W mean, 200.0 W max"));
    assert_non_null(strstr(h2, "<td class=\"name\">ampere_sgemm_nn</td><td>gemm</td>"
                               "<td class=\"n\">1.0</td><td class=\"n\">3.000</td>"
                               "<td class=\"n\">3000.0</td><td class=\"n\">60.0 %</td>"));
    assert_non_null(strstr(h2, "<title>rank 0, compute: 5.000 ms</title>"));
    /* the curated sections: breakdown, communication and kernels */
    char *c1 = between(h1, "<h2 id=\"breakdown-h\">", "<h2 id=\"nvml\">");
    char *c2 = between(h2, "<h2 id=\"breakdown-h\">", "<h2 id=\"nvml\">");
    assert_true(strlen(c1) > 1000);
    assert_string_equal(c2, c1);
    free(c1);
    free(c2);
    free(h1);
    free(h2);
    free(t1);
    free(t2);
    tp_report_free(&rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* A run directory with one rank file: rank 0 of 1, process 7, its step thread (serial 1). */
static synth_file *one_rank(char *dir, size_t n, const char *tag) {
    assert_int_equal(synth_tmpdir(dir, n, tag), 0);
    synth_file *f = synth_open(dir, "h", 7, 1700000000000000000ull, T0);
    synth_rank(f, 0, 1);
    synth_thread(f, 1, 7);
    return f;
}

/* A CPU-only job (no GPU records): the stacked bar splits each step by range, as the
 * report's breakdown (basis "cpu") does: 4 measured steps of 10 ms, "forward" 0-4 ms and
 * "backward" 4-9 ms in each, 1 ms untracked. */
static void test_html_cpu_breakdown(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = one_rank(dir, sizeof dir, "html-cpu");
    for (uint64_t s = 0; s < 5; s++) {
        uint64_t b = T0 + s * 10 * MS;
        synth_step_begin(f, 1, b, s);
        synth_push(f, 1, b, "forward", 0, 0);
        synth_pop(f, 1, b + 4 * MS, 0);
        synth_push(f, 1, b + 4 * MS, "backward", 0, 0);
        synth_pop(f, 1, b + 9 * MS, 0);
        synth_step_end(f, 1, b + 10 * MS, s);
    }
    synth_end_of_file(f, T0 + 51 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    size_t len = 0;
    char *buf = html_of(dir, &len);
    assert_non_null(strstr(buf, "<title>rank 0, forward: 4.000 ms</title>"));
    assert_non_null(strstr(buf, "<title>rank 0, backward: 5.000 ms</title>"));
    assert_int_equal(count_in_svg(buf, "breakdown", "<rect class=\"seg\""), 3);
    free(buf);
    synth_rmtree(dir);
}

/* Many steps: plots keep at most TP_HTML_MAX_POINTS points and TP_HTML_MAX_COLS columns. */
static void test_html_downsampled(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = one_rank(dir, sizeof dir, "html-long");
    uint64_t b = T0;
    for (uint64_t s = 0; s < 2001; s++) {
        synth_step_begin(f, 1, b, s);
        b += MS + (s % 10) * 1000;
        synth_step_end(f, 1, b, s);
    }
    synth_end_of_file(f, b + MS, 0);
    assert_int_equal(synth_close(f), 0);
    size_t len = 0;
    char *buf = html_of(dir, &len);
    assert_int_equal(points_of(buf, "step-time", "rank 0"), TP_HTML_MAX_POINTS);
    /* 2000 measured steps in columns of 17: 118 columns */
    assert_int_equal(count_in_svg(buf, "heatmap", "<rect class=\"cell\""), 118);
    assert_true(len < 200000);
    free(buf);
    synth_rmtree(dir);
}

/* The fill of the first rect whose title starts with `title`, e.g. "rank 0, step 476-"
 * (a copy the caller frees; NULL when absent). */
static char *fill_of(const char *html, const char *title) {
    char key[160];
    snprintf(key, sizeof key, "<title>%s", title);
    const char *t = strstr(html, key);
    if (!t) return NULL;
    const char *r = t;
    while (r > html && strncmp(r, "<rect ", 6)) r--;
    const char *p = strstr(r, "fill=\"");
    if (!p || p > t) return NULL;
    p += 6;
    return strndup(p, strcspn(p, "\""));
}

/* A long run with a slow phase: 3000 measured steps of 1 ms (a warm-up step first), steps
 * 1001-2000 1.2 ms each, step 100 0.5 ms and step 2500 stalled for 2 s. In columns of 25
 * steps the phases' cells are 1.0 and 1.2 ms (the stalled column 80.96 ms, step 100's
 * 0.98 ms): scaled on the cells' 2nd to 98th percentile, 1.0 to 1.2 ms, the slow phase is
 * dark and the rest pale. Scaled on single steps (0.5 ms to 2 s) both would be the same
 * pale colour and the phase invisible. */
static void test_html_heatmap_binned(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = one_rank(dir, sizeof dir, "html-heat");
    uint64_t b = T0;
    for (uint64_t s = 0; s <= 3000; s++) {
        uint64_t len = s >= 1001 && s <= 2000 ? 1200000 : s == 100 ? 500000 : s == 2500 ? 2000 * MS : MS;
        synth_step_begin(f, 1, b, s);
        b += len;
        synth_step_end(f, 1, b, s);
    }
    synth_end_of_file(f, b + MS, 0);
    assert_int_equal(synth_close(f), 0);
    size_t len = 0;
    char *buf = html_of(dir, &len);
    assert_int_equal(count_in_svg(buf, "heatmap", "<rect class=\"cell\""), 120);
    assert_non_null(strstr(buf, "rank 0, step 1476-1500: 1.200 ms"));
    assert_non_null(strstr(buf, "rank 0, step 476-500: 1.000 ms"));
    assert_non_null(strstr(buf, "rank 0, step 2476-2500: 80.960 ms"));
    char *fast = fill_of(buf, "rank 0, step 476-"), *slow = fill_of(buf, "rank 0, step 1476-");
    char *stall = fill_of(buf, "rank 0, step 2476-"), *low = fill_of(buf, "rank 0, step 76-");
    assert_non_null(fast);
    assert_non_null(slow);
    assert_non_null(stall);
    assert_non_null(low);
    /* the ends of the scale: pale yellow for the fast phase, dark red for the slow one; the
     * cells beyond the scale drawn at its ends */
    assert_string_equal(fast, "rgb(255,245,200)");
    assert_string_equal(slow, "rgb(180,20,20)");
    assert_string_equal(stall, "rgb(180,20,20)");
    assert_string_equal(low, "rgb(255,245,200)");
    assert_non_null(strstr(buf, "colour: 1.000 ms (pale) to 1.200 ms (dark)"));
    free(fast);
    free(slow);
    free(stall);
    free(low);
    free(buf);
    synth_rmtree(dir);
}

/* Every in-page link (href="#x") of html has its target (id="x"); returns how many links. */
static size_t check_anchors(const char *html) {
    size_t n = 0;
    for (const char *p = html; (p = strstr(p, "href=\"#")); n++) {
        p += 7;
        size_t k = strcspn(p, "\"");
        char key[128];
        snprintf(key, sizeof key, "id=\"%.*s\"", (int)k, p);
        if (!strstr(html, key)) fail_msg("dead link: #%.*s", (int)k, p);
    }
    return n;
}

/* The navigation's links all go somewhere: with kernels and timers (write_run) it links to
 * both sections, without them (a CPU job) to neither. */
static void test_html_anchors(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "html-anchors"), 0);
    write_run(dir);
    size_t len = 0;
    char *buf = html_of(dir, &len);
    assert_int_equal(check_anchors(buf), 9);
    assert_non_null(strstr(buf, "<a href=\"#kernels\">"));
    assert_non_null(strstr(buf, "<a href=\"#timers\">"));
    free(buf);
    synth_rmtree(dir);

    synth_file *f = one_rank(dir, sizeof dir, "html-anchors-cpu");
    for (uint64_t s = 0; s < 3; s++) {
        synth_step_begin(f, 1, T0 + s * 10 * MS, s);
        synth_step_end(f, 1, T0 + (s + 1) * 10 * MS, s);
    }
    synth_end_of_file(f, T0 + 31 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    buf = html_of(dir, &len);
    assert_int_equal(check_anchors(buf), 7);
    assert_null(strstr(buf, "id=\"kernels\""));
    assert_null(strstr(buf, "id=\"timers\""));
    free(buf);
    synth_rmtree(dir);
}

/* The 30,000-step run of the screenshot test (write_long_run): 120 columns of 250 steps per
 * rank, whose means are those the run was written with; the colour scale spans the 2nd (1.000
 * ms, rank 0's plain columns) to the 98th percentile of the 240 cells (1.465 ms, the 236th:
 * rank 1's six slow columns holding a checkpoint, 1.350 + (30 - 1.27) / 250; only rank 1's
 * stalled column, 1.582 ms, lies above them); no link to the kernels or timers, which the
 * run has not. */
static void test_html_long_run(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "html-long-run"), 0);
    write_long_run(dir);
    size_t len = 0;
    char *buf = html_of(dir, &len);
    assert_int_equal(count_in_svg(buf, "heatmap", "<rect class=\"cell\""), 240);
    assert_non_null(strstr(buf, "data-columns=\"120\" data-steps-per-column=\"250\""));
    assert_non_null(strstr(buf, "rank 0, step 1-250: 1.000 ms"));
    assert_non_null(strstr(buf, "rank 1, step 1-250: 1.050 ms"));
    assert_non_null(strstr(buf, "rank 0, step 12001-12250: 1.300 ms"));
    assert_non_null(strstr(buf, "rank 1, step 17751-18000: 1.465 ms"));
    assert_non_null(strstr(buf, "rank 0, step 751-1000: 1.116 ms"));
    assert_non_null(strstr(buf, "rank 0, step 5001-5250: 1.416 ms"));
    assert_non_null(strstr(buf, "rank 1, step 9751-10000: 1.582 ms"));
    assert_non_null(strstr(buf, "rank 1, step 29751-30000: 1.166 ms"));
    assert_non_null(strstr(buf, "colour: 1.000 ms (pale) to 1.465 ms (dark)"));
    assert_int_equal(check_anchors(buf), 7);
    free(buf);
    synth_rmtree(dir);
}

/* A CPU job's run whose steps (4 measured, 10 ms) hold the ranges names[0..n-1], 3 ms each
 * one after the other; its HTML report. */
static char *phases_run(const char *tag, const char *const *names, int n) {
    char dir[512];
    synth_file *f = one_rank(dir, sizeof dir, tag);
    for (uint64_t s = 0; s < 5; s++) {
        uint64_t b = T0 + s * 10 * MS;
        synth_step_begin(f, 1, b, s);
        for (int k = 0; k < n; k++) {
            synth_push(f, 1, b + (uint64_t)k * 3 * MS, names[k], 0, 0);
            synth_pop(f, 1, b + (uint64_t)(k + 1) * 3 * MS, 0);
        }
        synth_step_end(f, 1, b + 10 * MS, s);
    }
    synth_end_of_file(f, T0 + 51 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    size_t len = 0;
    char *buf = html_of(dir, &len);
    synth_rmtree(dir);
    return buf;
}

/* A phase's colour comes from its name: "backward" and a name of the program's own
 * ("zz_custom") have the same fill in a run where they come first and in one where another
 * phase comes before them; two fixed names differ. */
static void test_html_phase_colours(void **state) {
    (void)state;
    static const char *const one[] = {"backward", "zz_custom"};
    static const char *const two[] = {"aaa_load", "forward", "backward", "zz_custom"};
    char *h1 = phases_run("html-ph1", one, 2), *h2 = phases_run("html-ph2", two, 4);
    assert_non_null(strstr(h1, "<title>rank 0, backward: 3.000 ms</title>"));
    assert_non_null(strstr(h2, "<title>rank 0, backward: 3.000 ms</title>"));
    char *b1 = fill_of(h1, "rank 0, backward:"), *b2 = fill_of(h2, "rank 0, backward:");
    char *z1 = fill_of(h1, "rank 0, zz_custom:"), *z2 = fill_of(h2, "rank 0, zz_custom:");
    char *fw = fill_of(h2, "rank 0, forward:");
    assert_non_null(b1);
    assert_non_null(z1);
    assert_non_null(fw);
    assert_string_equal(b2, b1);
    assert_string_equal(z2, z1);
    assert_string_not_equal(fw, b1);
    /* the legend shows the same colour as the bars */
    char key[96];
    snprintf(key, sizeof key, "<i style=\"background:%s\"></i>backward</span>", b1);
    assert_non_null(strstr(h1, key));
    assert_non_null(strstr(h2, key));
    free(b1);
    free(b2);
    free(z1);
    free(z2);
    free(fw);
    free(h1);
    free(h2);
}

/* Bytes read in binary units, as in the text report: 5 AllReduces of 4,000,000 bytes per
 * rank are 20,000,000 bytes, 19.07 MiB. */
static void test_html_units(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "html-units"), 0);
    write_run(dir);
    size_t len = 0;
    char *buf = html_of(dir, &len);
    assert_non_null(strstr(buf, "<td class=\"n\">19.07 MiB</td>"));
    assert_null(strstr(buf, " MB<"));
    assert_null(strstr(buf, " kB<"));
    free(buf);
    synth_rmtree(dir);
}

/* The node sampler of one host with the samples `kind` picks: 0, GPU 0's power at the run's
 * start and eight GPUs' utilisation 2^62 ns later, 150 ns apart (a curve whose ticks are far
 * finer than the spacing of doubles that far from 0); 1, a power sample of 1.7e308 W (the
 * axis's top past DBL_MAX); both made the axes' tick loops run forever; 2, power samples
 * of 5e-324 W alone (a tick step of 0: the curve was drawn at NaN). */
static void write_far_samples(const char *dir, int kind) {
    synth_file *f = synth_open(dir, "h0", 90, 1700000000000000000ull, T0);
    synth_meta(f, "trainprof.role", "node-sampler");
    synth_thread(f, 1, 90);
    synth_counter(f, 1, T0, "gpu0.power_w", kind == 2 ? 5e-324 : 300);
    for (int k = 0; k < 8 && kind == 0; k++) {
        char n[32];
        snprintf(n, sizeof n, "gpu%d.util_percent", k);
        synth_counter(f, 1, T0 + (1ull << 62) + (uint64_t)k * 150, n, 50);
    }
    if (kind == 1) synth_counter(f, 1, T0 + 100000000, "gpu0.power_w", 1.7e308);
    for (uint64_t k = 1; k < 5 && kind == 2; k++)
        synth_counter(f, 1, T0 + k * 1000000, "gpu0.power_w", 5e-324);
    synth_end_of_file(f, T0 + 1000000, 0);
    assert_int_equal(synth_close(f), 0);
}

/* Axes of samples far from 0 or near DBL_MAX end: at most TP_SVG_MAX_TICKS ticks a chart, and
 * no NaN or infinity drawn. */
static void test_html_axes_bounded(void **state) {
    (void)state;
    for (int kind = 0; kind < 3; kind++) {
        char dir[512];
        assert_int_equal(synth_tmpdir(dir, sizeof dir, "html-axes"), 0);
        write_far_samples(dir, kind);
        size_t len = 0;
        char *buf = html_of(dir, &len);
        assert_true(len < (1u << 20));
        for (const char *svg = strstr(buf, "<svg class=\"chart\""); svg;
             svg = strstr(svg + 1, "<svg class=\"chart\"")) {
            const char *end = strstr(svg, "</svg>");
            assert_non_null(end);
            size_t ticks = 0, grid = 0;
            for (const char *t = strstr(svg, "class=\"tick\""); t && t < end;
                 t = strstr(t + 1, "class=\"tick\""))
                ticks++;
            for (const char *t = strstr(svg, "class=\"grid\""); t && t < end;
                 t = strstr(t + 1, "class=\"grid\""))
                grid++;
            assert_true(ticks <= TP_SVG_MAX_TICKS && grid <= TP_SVG_MAX_TICKS);
        }
        assert_null(strstr(buf, "\"nan\""));
        assert_null(strstr(buf, "\"-nan\""));
        assert_null(strstr(buf, "\"inf\""));
        assert_null(strstr(buf, "\"-inf\""));
        assert_null(strstr(buf, ",nan"));
        assert_null(strstr(buf, ",-nan"));
        free(buf);
        synth_rmtree(dir);
    }
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--write")) {
        write_run(argv[2]);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "--write-long")) {
        write_long_run(argv[2]);
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_html_report),
        cmocka_unit_test(test_html_downsampled),
        cmocka_unit_test(test_html_cpu_breakdown),
        cmocka_unit_test(test_html_text_typed),
        cmocka_unit_test(test_html_heatmap_binned),
        cmocka_unit_test(test_html_anchors),
        cmocka_unit_test(test_html_long_run),
        cmocka_unit_test(test_html_phase_colours),
        cmocka_unit_test(test_html_units),
        cmocka_unit_test(test_html_axes_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
