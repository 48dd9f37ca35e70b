/*
 * test_capture_window.c — the report over the steps in which GPU activity was recorded
 * (analysis/capture.c), on synthetic runs (tests/synth.c) with known answers:
 *  - a kernel-capture window (--kernel-steps 8-11) in 20 measured steps: the window's steps
 *    are 10 ms slower and the GPU is 50 % busy in them. Every GPU figure (the GPU section,
 *    the step breakdown, the gpu_busy finding, the headline) is over those 4 steps, not
 *    averaged over the 20; the memory peak without a memory record reads "not captured";
 *    the capture cost is +10 ms per step, measured against the 15 steps run with capture
 *    off (the first one after the window, which holds the closing flush, left out);
 *  - the metrics endpoint turning detail off after step 10: the first steps against the
 *    pace with CUPTI off, and the memory peak up to the moment capture went off;
 *  - capture paused for another CUPTI client (gpu_capture.pauses) in steps 5-7: those steps
 *    are not captured, never idle; the memory peak is read up to the pause only;
 *  - a pause never resumed before the measured steps: no GPU figure and no GPU finding;
 *  - damaged gpu_capture.windows: overlapping entries are their union, reversed or malformed
 *    ones capture nothing and are counted (windows_ignored) and named in the text.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/capture.h"
#include "analysis/model.h"
#include "analysis/report.h"
#include "export/html.h"
#include "format/format.h"
#include "json_path.h"
#include "report_text.h"
#include "synth.h"

static const uint64_t T0 = 1000000000ull, US = 1000ull, MS = 1000000ull;
#define RT0 1700000000000000000ull

/* ------------------------------------------------------------------ helpers */

static void meta_u64(synth_file *f, const char *key, uint64_t v) {
    char s[32];
    snprintf(s, sizeof s, "%llu", (unsigned long long)v);
    synth_meta(f, key, s);
}

/* A rank file of rank 0 of 1 in a new directory (dir, n bytes) named after tag: its step
 * thread 1 (tid 40), CUPTI's buffer thread 2 (41), CUPTI capturing. */
static synth_file *cupti_rank(char *dir, size_t n, const char *tag) {
    assert_int_equal(synth_tmpdir(dir, n, tag), 0);
    synth_file *f = synth_open(dir, "h", 40, RT0, T0);
    synth_thread(f, 1, 40);
    synth_thread(f, 2, 41);
    synth_rank(f, 0, 1);
    synth_meta(f, "capability.cupti", "activity capture on: 8 kinds");
    return f;
}

/* A kernel of `len` ns at the start of a step, launched by a cudaLaunchKernel on the step
 * thread 10 us earlier (correlation id `corr`), as CUPTI records it on its buffer thread. */
static void launch(synth_file *f, uint64_t at, uint64_t len, uint32_t corr) {
    tprof_pl_gpu api = {at - 5 * US, 0, 0, 7, corr, 211, 40, 0};
    synth_raw(f, 2, TPROF_REC_GPU_API, TPROF_INLINE_NAME, at - 10 * US, &api, sizeof api,
              "cudaLaunchKernel", sizeof "cudaLaunchKernel");
    synth_kernel(f, 2, at, at + len, 0, 7, corr, "ampere_sgemm_128x64_nn");
}

/* API steps 0 to n-1 of 20 ms from T0, each running a 5 ms kernel (correlation ids from
 * corr0), then the file's end 1 ms after the last, and f closed. */
static void steps_to_end(synth_file *f, uint32_t n, uint32_t corr0) {
    uint64_t t = T0;
    for (uint32_t k = 0; k < n; k++) {
        synth_step_begin(f, 1, t, k);
        launch(f, t + 100 * US, 5 * MS, corr0 + k);
        synth_step_end(f, 1, t + 20 * MS, k);
        t += 20 * MS;
    }
    synth_end_of_file(f, t + MS, 0);
    assert_int_equal(synth_close(f), 0);
}

/* A device-memory allocation (op 1) of `bytes` at `ts`. */
static void alloc(synth_file *f, uint64_t ts, uint64_t address, uint64_t bytes) {
    tprof_pl_gpu_mem m = {address, bytes, 0, 1, 3, 7};
    synth_raw(f, 2, TPROF_REC_GPU_MEMORY, 0, ts, &m, sizeof m, NULL, 0);
}

/* ------------------------------------------------------------------ kernel window */

/* API steps 0-20 (step 0 warm-up, 20 measured), --kernel-steps 8-11: capture on just before
 * step 8 begins, off just before step 12 begins (kwindow.c). Steps take 20 ms, the window's
 * 30 ms (the capture's cost: +10 ms) and step 12 45 ms (the closing flush). In each window
 * step one 15 ms kernel: the GPU is busy 15 of 30 ms, 50 %. No memory record. */
static const char *g_kinds; /* cupti.kinds of window_run's file, NULL: none (older files) */

/* window_run with step k taking lens[k] (21 steps) instead. */
static void window_run_lens(char *dir, size_t n, const uint64_t *lens);

static void window_run(char *dir, size_t n) { window_run_lens(dir, n, NULL); }

static void window_run_lens(char *dir, size_t n, const uint64_t *lens) {
    assert_int_equal(synth_tmpdir(dir, n, "kwin"), 0);
    synth_file *f = synth_open(dir, "h", 40, RT0, T0);
    synth_thread(f, 1, 40);
    synth_thread(f, 2, 41);
    synth_rank(f, 0, 1);
    synth_meta(f, "capability.cupti",
               "activity capture in the steps of TRAINPROF_KERNEL_STEPS=8-11");
    synth_meta(f, "kernel_steps", "8-11");
    if (g_kinds) synth_meta(f, "cupti.kinds", g_kinds);
    uint64_t t = T0;
    for (uint32_t k = 0; k <= 20; k++) {
        uint64_t len = k >= 8 && k <= 11 ? 30 * MS : k == 12 ? 45 * MS : 20 * MS;
        if (lens) len = lens[k];
        if (k == 8) meta_u64(f, "kernel_steps.on_ns", t - 2 * US);
        if (k == 12) meta_u64(f, "kernel_steps.off_ns", t - 2 * US);
        synth_step_begin(f, 1, t, k);
        if (k >= 8 && k <= 11) launch(f, t + 100 * US, 15 * MS, 100 + k);
        synth_step_end(f, 1, t + len, k);
        t += len;
    }
    synth_end_of_file(f, t + MS, 0);
    assert_int_equal(synth_close(f), 0);
}

/* run's HTML report with the default options (owned). */
static char *html_of(tp_run *run) {
    tp_report r;
    assert_int_equal(tp_report_make(run, NULL, &r), 0);
    char *html = NULL;
    size_t hl = 0;
    FILE *hf = open_memstream(&html, &hl);
    assert_non_null(hf);
    assert_int_equal(tp_html_write(&r, NULL, hf), 0);
    fclose(hf);
    tp_report_free(&r);
    return html;
}

static void test_window_gpu_figures(void **state) {
    (void)state;
    char dir[512];
    window_run(dir, sizeof dir);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = default_report(&run);
    /* the GPU section and the breakdown: 15 ms of 30 ms in each of the 4 window steps
     * (averaged over the 20 measured steps it read 60 / 440 = 13.6 % and 3 ms) */
    jnear(jnum(rep, "ranks.0.gpu.devices.0.busy_share"), 0.5, "gpu busy_share");
    jnear(jnum(rep, "ranks.0.gpu.devices.0.kernels"), 1.0, "kernels per step");
    jnear(jnum(rep, "ranks.0.breakdown.windows"), 4, "breakdown windows");
    jnear(jnum(rep, "ranks.0.breakdown.share.busy"), 0.5, "breakdown busy");
    jnear(jnum(rep, "ranks.0.breakdown.ms.compute.mean"), 15.0, "compute ms per captured step");
    jnear(jnum(rep, "ranks.0.breakdown.kernels_per_step"), 1.0, "breakdown kernels per step");
    jnear(jnum(rep, "headline.figures.gpu_busy_share"), 0.5, "headline busy");
    assert_string_equal(jstr(rep, "headline.figures.gpu_busy_steps"), "8-11");
    jnear(jnum(rep, "ranks.0.gpu_capture.captured_steps"), 4, "captured");
    jnear(jnum(rep, "ranks.0.gpu_capture.measured_steps"), 20, "measured");
    jnear(jnum(rep, "ranks.0.gpu_capture.steps.0.0"), 8, "first captured step");
    jnear(jnum(rep, "ranks.0.gpu_capture.steps.0.1"), 11, "last captured step");
    /* the gpu_busy rule reads the same 50 % */
    const cJSON *busy = jfinding(rep, "gpu_busy");
    assert_non_null(busy);
    jnear(jnum(busy, "evidence.busy_share"), 0.5, "gpu_busy evidence");
    jnear(jnum(busy, "evidence.captured_steps"), 4, "gpu_busy captured steps");
    /* no memory record: the peak is unknown, not 0 */
    assert_true(cJSON_IsNull(jget(rep, "ranks.0.gpu.devices.0.memory_peak_bytes")));
    cJSON_Delete(rep);
    char *text = report_text(&run, NULL);
    report_has(text, "GPU activity recorded in steps 8-11 (4 of 20 measured steps)");
    report_has(text, "busy 50.0 % of the step");
    report_has(text, "GPU busy only 50.0 % of the step on rank 0");
    report_has(text, "; GPU activity recorded in steps 8-11 (4 of 20 measured steps)\n");
    report_has(text, "device memory peak not captured");
    report_lacks(text, "device memory peak 0.0 MiB");
    free(text);
    /* the HTML names the steps beside the breakdown and the kernels */
    char *html = html_of(&run);
    report_has(html, "rank 0: GPU activity recorded in steps 8-11 (4 of 20 measured steps): its "
                   "GPU figures are over those steps only");
    free(html);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* GPU activity in every step (5 steps of 20 ms, a kernel in each) with two device allocations
 * of 768 MiB that are never released, on a device of `capacity` bytes: past the capacity the
 * sum cannot be (a release went unrecorded), so the peak is flagged, not shown */
static void alloc_run(char *dir, size_t n, uint64_t capacity) {
    assert_int_equal(synth_tmpdir(dir, n, "mpeak"), 0);
    synth_file *f = synth_open(dir, "h", 42, RT0, T0);
    synth_thread(f, 1, 42);
    synth_thread(f, 2, 43);
    synth_rank(f, 0, 1);
    synth_meta(f, "capability.cupti", "activity capture on: 8 kinds");
    meta_u64(f, "cuda.0.memory_total_bytes", capacity);
    alloc(f, T0 - 2 * MS, 0x1000000, 768ull << 20);
    alloc(f, T0 - MS, 0x40000000, 768ull << 20);
    steps_to_end(f, 5, 200);
}

static void test_memory_peak_past_capacity(void **state) {
    (void)state;
    char dir[512];
    alloc_run(dir, sizeof dir, 2ull << 30); /* 1.5 GiB of 2 GiB: shown */
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = default_report(&run);
    jnear(jnum(rep, "ranks.0.gpu.devices.0.memory_peak_bytes"), 1536.0 * 1048576, "peak");
    jnear(jnum(rep, "ranks.0.gpu.devices.0.memory_peak_share"), 0.75, "share");
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
    alloc_run(dir, sizeof dir, 1ull << 30); /* 1.5 GiB of 1 GiB: impossible */
    load_run(dir, &run);
    rep = default_report(&run);
    assert_true(cJSON_IsNull(jget(rep, "ranks.0.gpu.devices.0.memory_peak_bytes")));
    jnear(jnum(rep, "ranks.0.gpu.devices.0.invalid.memory_peak_share.value"), 1.5, "flagged");
    cJSON_Delete(rep);
    char *text = report_text(&run, NULL);
    report_has(text, "device memory peak not shown (flagged below)");
    report_has(text, "flagged, not a result: gpu.devices[0].memory_peak_share = 1.5 (limit 1)");
    report_lacks(text, "device memory peak 1536.0 MiB");
    free(text);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* A file that names the kinds CUPTI had on (cupti.kinds): copies on and none recorded is a
 * known 0; copies off is unknown (null), as without the list */
static void test_kinds_named(void **state) {
    (void)state;
    const char *lists[] = {"kernel,memcpy,memset,runtime", "kernel,runtime"};
    for (int i = 0; i < 2; i++) {
        char dir[512];
        g_kinds = lists[i];
        window_run(dir, sizeof dir);
        g_kinds = NULL;
        tp_run run;
        load_run(dir, &run);
        cJSON *rep = default_report(&run);
        const cJSON *h2d = jget(rep, "ranks.0.gpu.devices.0.h2d_bytes");
        if (i == 0) {
            assert_true(cJSON_IsNumber(h2d));
            assert_true(h2d->valuedouble == 0.0);
        } else {
            assert_true(cJSON_IsNull(h2d));
        }
        cJSON_Delete(rep);
        tp_run_free(&run);
        synth_rmtree(dir);
    }
}


/* A capture plan "5-7/10" over API steps 0-24 (step 0 warm-up): windows at steps 5-7, 15-17
 * and an open one from step 25 on, as gpu_capture.windows lists them ("on-off,on-off,on-");
 * kernel_steps.* name the first window only. Steps take 20 ms, captured ones 30 ms with a
 * 15 ms kernel: the GPU figures are over the 6 captured steps (busy 50 %) and the capture costs
 * +10 ms a step (the first step after each window, which holds the closing flush, left out). */
static void test_plan_windows(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "plan"), 0);
    synth_file *f = synth_open(dir, "h", 40, RT0, T0);
    synth_thread(f, 1, 40);
    synth_thread(f, 2, 41);
    synth_rank(f, 0, 1);
    synth_meta(f, "capability.cupti",
               "activity capture in the steps of TRAINPROF_GPU_CAPTURE=5-7/10");
    synth_meta(f, "gpu_capture", "5-7/10");
    synth_meta(f, "kernel_steps", "5-7");
    uint64_t t = T0, on[3] = {0}, off[2] = {0};
    char list[128] = "";
    for (uint32_t k = 0; k <= 24; k++) {
        int in = (k >= 5 && k <= 7) || (k >= 15 && k <= 17);
        uint64_t len = in ? 30 * MS : 20 * MS;
        if (k == 5 || k == 15) on[k / 10] = t - 2 * US;
        if (k == 8 || k == 18) off[k / 10] = t - 2 * US;
        if (k == 5) meta_u64(f, "kernel_steps.on_ns", t - 2 * US);
        if (k == 8) meta_u64(f, "kernel_steps.off_ns", t - 2 * US);
        synth_step_begin(f, 1, t, k);
        if (in) launch(f, t + 100 * US, 15 * MS, 100 + k);
        synth_step_end(f, 1, t + len, k);
        t += len;
    }
    on[2] = t + MS; /* the third window opens after the last measured step */
    snprintf(list, sizeof list, "%llu-%llu,%llu-%llu,%llu-", (unsigned long long)on[0],
             (unsigned long long)off[0], (unsigned long long)on[1], (unsigned long long)off[1],
             (unsigned long long)on[2]);
    synth_meta(f, "gpu_capture.windows", list);
    synth_end_of_file(f, t + 2 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = default_report(&run);
    jnear(jnum(rep, "ranks.0.gpu_capture.captured_steps"), 6, "captured");
    jnear(jnum(rep, "ranks.0.gpu_capture.steps.1.0"), 15, "second window's first step");
    jnear(jnum(rep, "ranks.0.gpu.devices.0.busy_share"), 0.5, "gpu busy_share");
    jnear(jnum(rep, "ranks.0.breakdown.windows"), 6, "breakdown windows");
    jnear(jnum(rep, "ranks.0.gpu_capture.cost.ms_per_step"), 10.0, "capture cost ms");
    cJSON_Delete(rep);
    char *text = report_text(&run, NULL);
    report_has(text, "GPU activity recorded in steps 5-7, 15-17 (6 of 24 measured steps)");
    free(text);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* gpu_capture.windows hand-edited or damaged: overlapping entries are one window (their
 * union), and an entry that ends before it begins, or is not "on-off", captures nothing and
 * is named; read as independent switches, the reversed entry turned capture on from its
 * "end" to the end of the run (steps 16-20) and the overlap turned it off inside the other
 * window (step 8). */
static void test_damaged_windows(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "dmgwin"), 0);
    synth_file *f = synth_open(dir, "h", 40, RT0, T0);
    synth_thread(f, 1, 40);
    synth_thread(f, 2, 41);
    synth_rank(f, 0, 1);
    synth_meta(f, "capability.cupti",
               "activity capture in the steps of TRAINPROF_GPU_CAPTURE=5-7,12-13");
    synth_meta(f, "gpu_capture", "5-7,12-13");
    synth_meta(f, "kernel_steps", "5-7");
    uint64_t t = T0, at[21];
    for (uint32_t k = 0; k <= 20; k++) {
        at[k] = t - 2 * US; /* capture would switch just before step k begins */
        int in = k >= 5 && k <= 9;
        synth_step_begin(f, 1, t, k);
        if (in) launch(f, t + 100 * US, 15 * MS, 100 + k);
        synth_step_end(f, 1, t + 20 * MS, k);
        t += 20 * MS;
    }
    char list[256];
    snprintf(list, sizeof list, "%llu-%llu,%llu-%llu,%llu-%llu,x-%llu,-5-%llu",
             (unsigned long long)at[5], (unsigned long long)at[8], (unsigned long long)at[6],
             (unsigned long long)at[10], (unsigned long long)at[16], (unsigned long long)at[14],
             (unsigned long long)at[18], (unsigned long long)at[19]);
    synth_meta(f, "gpu_capture.windows", list);
    synth_end_of_file(f, t + MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = default_report(&run);
    jnear(jnum(rep, "ranks.0.gpu_capture.captured_steps"), 5, "captured");
    jnear(jnum(rep, "ranks.0.gpu_capture.steps.0.0"), 5, "first captured step");
    jnear(jnum(rep, "ranks.0.gpu_capture.steps.0.1"), 9, "last captured step");
    assert_null(jget(rep, "ranks.0.gpu_capture.steps.1"));
    jnear(jnum(rep, "ranks.0.gpu_capture.windows_ignored"), 3, "entries ignored");
    cJSON_Delete(rep);
    char *text = report_text(&run, NULL);
    report_has(text, "GPU activity recorded in steps 5-9 (5 of 20 measured steps)");
    report_has(text, "damaged metadata: 3 entries of gpu_capture.windows not \"on-off\" or "
                     "ending before they begin, left out of the captured steps");
    free(text);
    tp_run_free(&run);
    synth_rmtree(dir);
}

static void test_window_capture_cost(void **state) {
    (void)state;
    char dir[512];
    window_run(dir, sizeof dir);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = default_report(&run);
    /* captured: steps 8-11 at 30 ms; against the 4 steps before them, 4-7 at 20 ms (step 12,
     * the first after the window, holds the flush and is left out) */
    jnear(jnum(rep, "ranks.0.gpu_capture.cost.ms_per_step"), 10.0, "cost ms");
    jnear(jnum(rep, "ranks.0.gpu_capture.cost.share"), 0.5, "cost share");
    jnear(jnum(rep, "ranks.0.gpu_capture.cost.captured_steps"), 4, "cost captured");
    jnear(jnum(rep, "ranks.0.gpu_capture.cost.other_steps"), 4, "cost others");
    jnear(jnum(rep, "ranks.0.gpu_capture.cost.skipped_steps"), 1, "cost skipped");
    jnear(jnum(rep, "ranks.0.gpu_capture.cost.other_spread_ms"), 0.0, "cost spread");
    jnear(jnum(rep, "ranks.0.gpu_capture.cost.noise_ms"), 0.0, "cost noise");
    cJSON_Delete(rep);
    char *text = report_text(&run, NULL);
    report_has(text, "capture cost: +10.00 ms per step (+50.0 %) while GPU activity was recorded "
                   "(median of 4 captured steps vs median of 4 uncaptured steps beside them");
    free(text);
    tp_run_free(&run);
    synth_rmtree(dir);
    /* a pace that drifts: 20 ms before the window, 22 ms in it, 24 ms after it. Against the
     * steps beside it the window costs +2 ms; against the whole run's others (median 24 ms)
     * it would read -2 ms */
    uint64_t lens[21];
    for (int k = 0; k <= 20; k++) lens[k] = (k <= 7 ? 20 : k <= 11 ? 22 : k == 12 ? 40 : 24) * MS;
    window_run_lens(dir, sizeof dir, lens);
    load_run(dir, &run);
    rep = default_report(&run);
    jnear(jnum(rep, "ranks.0.gpu_capture.cost.ms_per_step"), 2.0, "drift: cost ms");
    jnear(jnum(rep, "ranks.0.gpu_capture.cost.other_median_ms"), 20.0, "drift: others");
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
    /* steps that jitter by +/-1 ms around 20 ms, the window 0.5 ms slower: the pooled MAD is
     * 1 ms, sigma 1.4826 ms, two standard errors of the difference 2 * 1.2533 * 1.4826 *
     * sqrt(1/4 + 1/4) = 2.63 ms: within the noise, flagged */
    for (int k = 0; k <= 20; k++)
        lens[k] = (k == 12 ? 40 * MS : (k >= 8 && k <= 11 ? 20 * MS + MS / 2 : 20 * MS)) +
                  (k % 2 ? MS : 0) - (k % 2 ? 0 : MS);
    window_run_lens(dir, sizeof dir, lens);
    load_run(dir, &run);
    rep = default_report(&run);
    assert_null(jget(rep, "ranks.0.gpu_capture.cost"));
    jnear(jnum(rep, "ranks.0.gpu_capture.cost_flagged.ms_per_step"), 0.5, "noisy: cost ms");
    jnear(jnum(rep, "ranks.0.gpu_capture.cost_flagged.noise_ms"),
          2 * 1.2533 * 1.4826 * sqrt(0.5), "noisy: noise");
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
    /* the window 5 ms faster than the steps around it: past the noise (0 here), but no cost
     * of recording; flagged, not a result */
    for (int k = 0; k <= 20; k++) lens[k] = (k >= 8 && k <= 11 ? 15 : k == 12 ? 40 : 20) * MS;
    window_run_lens(dir, sizeof dir, lens);
    load_run(dir, &run);
    rep = default_report(&run);
    assert_null(jget(rep, "ranks.0.gpu_capture.cost"));
    jnear(jnum(rep, "ranks.0.gpu_capture.cost_flagged.ms_per_step"), -5.0, "faster: cost ms");
    cJSON_Delete(rep);
    text = report_text(&run, NULL);
    report_has(text, "capture cost: flagged, not a result: -5.00 ms per step");
    report_has(text, "the captured steps ran faster than the steps beside them");
    free(text);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* API steps 0-20 (step 0 warm-up), capture on from the start until the metrics endpoint
 * turns detail off as step 11 begins (capture.detail_off_ns). Steps 1-10 take 25 ms with a
 * 5 ms kernel, step 11 (the flush) 40 ms, steps 12-20 20 ms: the first steps against the
 * pace with CUPTI off, +5 ms (+25 %). 1 GiB allocated in step 2. */
static void detail_run(char *dir, size_t n) {
    synth_file *f = cupti_rank(dir, n, "kdetail");
    uint64_t t = T0;
    for (uint32_t k = 0; k <= 20; k++) {
        uint64_t len = k <= 10 ? 25 * MS : k == 11 ? 40 * MS : 20 * MS;
        if (k == 11) meta_u64(f, "capture.detail_off_ns", t - 2 * US);
        synth_step_begin(f, 1, t, k);
        if (k <= 10) launch(f, t + 100 * US, 5 * MS, 100 + k);
        if (k == 2) alloc(f, t + 200 * US, 0x1000, 1ull << 30);
        synth_step_end(f, 1, t + len, k);
        t += len;
    }
    synth_end_of_file(f, t + MS, 0);
    assert_int_equal(synth_close(f), 0);
}

static void test_detail_off(void **state) {
    (void)state;
    char dir[512];
    detail_run(dir, sizeof dir);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = default_report(&run);
    jnear(jnum(rep, "ranks.0.gpu_capture.captured_steps"), 10, "captured");
    assert_string_equal(jstr(rep, "ranks.0.gpu_capture.limited_by.0"), "detail");
    jnear(jnum(rep, "ranks.0.gpu.devices.0.busy_share"), 0.2, "busy 5 of 25 ms");
    jnear(jnum(rep, "ranks.0.breakdown.share.busy"), 0.2, "breakdown busy");
    jnear(jnum(rep, "ranks.0.gpu_capture.cost.ms_per_step"), 5.0, "cost ms");
    jnear(jnum(rep, "ranks.0.gpu_capture.cost.share"), 0.25, "cost share");
    jnear(jnum(rep, "ranks.0.gpu_capture.cost.other_steps"), 9, "cost others: 12-20, after");
    jnear(jnum(rep, "ranks.0.gpu_capture.cost.skipped_steps"), 1, "cost skipped");
    /* the allocator's records are complete until capture went off: 1 GiB up to then */
    jnear(jnum(rep, "ranks.0.gpu.devices.0.memory_peak_bytes"), 1073741824.0, "memory peak");
    jnear(jnum(rep, "ranks.0.gpu.devices.0.memory_peak_until_s"),
         (double)(11 * 25 * MS - 2 * US) / 1e9, "memory peak until");
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* f ended at `end` and closed, then its run (in dir) loaded into run. */
static void close_and_load(synth_file *f, uint64_t end, const char *dir, tp_run *run) {
    synth_end_of_file(f, end, 0);
    assert_int_equal(synth_close(f), 0);
    load_run(dir, run);
}

/* The metrics endpoint's switches are one record each (capture.detail_off_ns written twice,
 * capture.detail_on_ns once), where every other key's last value wins: API steps 0-14 of
 * 20 ms, capture on from the start, detail off as steps 5 and 11 begin and on as step 8
 * begins. Captured: the measured steps 1-4 and 8-10, 7; the last switches alone (on at 8,
 * off at 11) would say 1-10. */
static void test_detail_switches(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = cupti_rank(dir, sizeof dir, "kswitch");
    synth_meta(f, "step_name", "first");
    synth_meta(f, "step_name", "second"); /* a key written again: its last value */
    uint64_t t = T0;
    for (uint32_t k = 0; k <= 14; k++) {
        if (k == 5 || k == 11) meta_u64(f, "capture.detail_off_ns", t - 2 * US);
        if (k == 8) meta_u64(f, "capture.detail_on_ns", t - 2 * US);
        synth_step_begin(f, 1, t, k);
        if (k < 5 || (k >= 8 && k < 11)) launch(f, t + 100 * US, 5 * MS, 100 + k);
        synth_step_end(f, 1, t + 20 * MS, k);
        t += 20 * MS;
    }
    tp_run run;
    close_and_load(f, t + MS, dir, &run);
    size_t offs = 0, names = 0;
    for (size_t i = 0; i < run.procs[0].nmeta; i++) {
        offs += !strcmp(run.procs[0].meta[i].key, "capture.detail_off_ns");
        names += !strcmp(run.procs[0].meta[i].key, "step_name");
    }
    assert_int_equal(offs, 2);
    assert_int_equal(names, 1);
    assert_string_equal(tp_meta(&run.procs[0], "step_name"), "second");
    cJSON *rep = default_report(&run);
    jnear(jnum(rep, "ranks.0.gpu_capture.captured_steps"), 7, "captured: 1-4, 8-10");
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* ------------------------------------------------------------------ pauses */

/* API steps 0-20 of 20 ms (step 0 warm-up), capture on throughout but paused for
 * torch.profiler from the start of step 5 to the end of step 7 (gpu_capture.pauses). Each
 * step but the paused ones runs one 10 ms kernel: 50 % busy. 1 GiB is allocated in step 2
 * and 2 GiB in step 10, after the pause (the allocations made during it are unknown, so the
 * running sum is not read past the pause: the peak is 1 GiB up to the pause). */
static void pause_run(char *dir, size_t n, int never_resumed, int steps) {
    synth_file *f = cupti_rank(dir, n, "kpause");
    uint64_t t = T0, from = T0 + 5 * 20 * MS, to = T0 + 8 * 20 * MS; /* steps 5 to 7 */
    if (never_resumed) from = T0 + 20 * MS; /* from step 1: every measured step */
    char v[64];
    snprintf(v, sizeof v, "%llu-%llu", (unsigned long long)from, (unsigned long long)to);
    synth_meta(f, "gpu_capture.pause_reason", "torch.profiler");
    if (never_resumed) meta_u64(f, "gpu_capture.paused_since_ns", from);
    else synth_meta(f, "gpu_capture.pauses", v);
    for (uint32_t k = 0; k <= 20; k++) {
        if (steps) synth_step_begin(f, 1, t, k);
        int paused = never_resumed ? k >= 1 : k >= 5 && k <= 7;
        if (!paused) launch(f, t + 100 * US, 10 * MS, 100 + k);
        if (k == 2 && !never_resumed) alloc(f, t + 200 * US, 0x1000, 1ull << 30);
        if (k == 10 && !never_resumed) alloc(f, t + 200 * US, 0x80001000, 2ull << 30);
        if (steps) synth_step_end(f, 1, t + 20 * MS, k);
        t += 20 * MS;
    }
    synth_end_of_file(f, t + MS, 0);
    assert_int_equal(synth_close(f), 0);
}

static void test_paused_steps_not_idle(void **state) {
    (void)state;
    char dir[512];
    pause_run(dir, sizeof dir, 0, 1);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = default_report(&run);
    /* 17 captured steps, each 10 of 20 ms busy (with the paused ones as idle: 170 / 400 =
     * 42.5 %, 0.85 kernels per step) */
    jnear(jnum(rep, "ranks.0.gpu.devices.0.busy_share"), 0.5, "gpu busy_share");
    jnear(jnum(rep, "ranks.0.gpu.devices.0.kernels"), 1.0, "kernels per step");
    jnear(jnum(rep, "ranks.0.breakdown.windows"), 17, "breakdown windows");
    jnear(jnum(rep, "ranks.0.breakdown.share.busy"), 0.5, "breakdown busy");
    jnear(jnum(rep, "ranks.0.breakdown.ms.idle.max"), 10.0, "no step all idle");
    jnear(jnum(rep, "ranks.0.gpu_capture.captured_steps"), 17, "captured");
    assert_string_equal(jstr(rep, "ranks.0.gpu_capture.limited_by.0"), "paused");
    jnear(jnum(rep, "ranks.0.gpu_capture.steps.0.1"), 4, "captured before the pause");
    jnear(jnum(rep, "ranks.0.gpu_capture.steps.1.0"), 8, "captured after the pause");
    /* the peak of the allocations seen before the pause: 1 GiB, not 3 */
    jnear(jnum(rep, "ranks.0.gpu.devices.0.memory_peak_bytes"), 1073741824.0, "memory peak");
    /* the paused steps ran under torch.profiler: no side of the capture's cost */
    assert_null(jget(rep, "ranks.0.gpu_capture.cost"));
    cJSON_Delete(rep);
    char *text = report_text(&run, NULL);
    report_has(text, "GPU activity recorded in steps 1-4, 8-20 (17 of 20 measured steps)");
    report_has(text, "busy 50.0 % of the step");
    free(text);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* 30 pauses in two pages (gpu_capture.pauses: steps 1-20, gpu_capture.pauses.2: steps 21-30,
 * their reasons "r<step>" in gpu_capture.pause_reasons and .2 beside them), each 5 ms of a
 * 20 ms step, over API steps 0-40, written into a new directory (dir, n bytes). damaged:
 * page 1 names the reasons of its first 15 pauses alone, the runtime joined 500 pauses it
 * could not list (gpu_capture.pauses_merged), and a pause named "open" began in step 35 and
 * never resumed (its reason after page 2's). */
static void paged_pauses_run(char *dir, size_t n, int damaged) {
    synth_file *f = cupti_rank(dir, n, "kpages");
    char pz[2][2048] = {"", ""}, rs[2][512] = {"", ""};
    for (int k = 1; k <= 30; k++) {
        int pg = k > 20;
        uint64_t from = T0 + (uint64_t)k * 20 * MS + 10 * MS;
        size_t l = strlen(pz[pg]), m = strlen(rs[pg]);
        snprintf(pz[pg] + l, sizeof pz[pg] - l, "%s%llu-%llu", l ? "," : "",
                 (unsigned long long)from, (unsigned long long)(from + 5 * MS));
        if (!damaged || k > 15)
            snprintf(rs[pg] + m, sizeof rs[pg] - m, "%sr%d", m ? "," : "", k);
    }
    if (damaged) {
        strcat(rs[1], ",open");
        meta_u64(f, "gpu_capture.paused_since_ns", T0 + 35 * 20 * MS + 10 * MS);
        synth_meta(f, "gpu_capture.pauses_merged", "500");
    }
    synth_meta(f, "gpu_capture.pauses", pz[0]);
    synth_meta(f, "gpu_capture.pause_reasons", damaged ? "r1,r2,r3,r4,r5,r6,r7,r8,r9,r10,r11,"
                                                         "r12,r13,r14,r15" : rs[0]);
    synth_meta(f, "gpu_capture.pauses.2", pz[1]);
    synth_meta(f, "gpu_capture.pause_reasons.2", rs[1]);
    steps_to_end(f, 41, 100);
}

/* paged_pauses_run as written: every pause counts against the capture (steps 1-30 limited,
 * 31-40 captured whole); the report lists the first 24 with their own reasons and counts the
 * other 6 with their time (30 ms). Damaged: page 1's missing reasons move none of page 2's;
 * the pause never resumed is listed (the 24th), with its reason; the runtime's merged pauses
 * are counted; captured: steps 31-34 alone. */
static void test_paused_pages(void **state) {
    (void)state;
    for (int damaged = 0; damaged < 2; damaged++) {
        char dir[512];
        paged_pauses_run(dir, sizeof dir, damaged);
        tp_run run;
        load_run(dir, &run);
        assert_int_equal(tp_capture_npauses(&run.procs[0]), damaged ? 31 : 30);
        cJSON *rep = default_report(&run);
        jnear(jnum(rep, "ranks.0.gpu_capture.captured_steps"), damaged ? 4 : 10, "captured");
        assert_int_equal(cJSON_GetArraySize(jget(rep, "ranks.0.gpu.capture_paused")), 24);
        assert_string_equal(jstr(rep, "ranks.0.gpu.capture_paused.20.reason"), "r21");
        jnear(jnum(rep, "ranks.0.gpu.capture_paused_more.pauses"), damaged ? 7 + 500 : 6,
              "pauses counted (24-30, and those merged)");
        jnear(jnum(rep, "ranks.0.gpu.capture_paused_more.seconds"), damaged ? 0.035 : 0.030,
              "their time");
        char *text = report_text(&run, NULL);
        if (!damaged) {
            assert_string_equal(jstr(rep, "ranks.0.gpu.capture_paused.19.reason"), "r20");
            assert_string_equal(jstr(rep, "ranks.0.gpu.capture_paused.23.reason"), "r24");
            jnear(jnum(rep, "ranks.0.gpu.capture_paused.23.from_s"),
                  (double)(24 * 20 + 10) / 1e3, "pause 24 from");
            report_has(text, "GPU activity paused for r24 from");
            report_has(text, "GPU activity paused 6 more times, 0.030 s in all: no GPU records "
                             "then");
        } else {
            assert_string_equal(jstr(rep, "ranks.0.gpu.capture_paused.14.reason"), "r15");
            assert_null(jget(rep, "ranks.0.gpu.capture_paused.15.reason"));
            assert_null(jget(rep, "ranks.0.gpu.capture_paused.19.reason"));
            assert_string_equal(jstr(rep, "ranks.0.gpu.capture_paused.22.reason"), "r23");
            assert_true(cJSON_IsTrue(jget(rep, "ranks.0.gpu.capture_paused.23.never_resumed")));
            assert_string_equal(jstr(rep, "ranks.0.gpu.capture_paused.23.reason"), "open");
            report_has(text, "(never resumed)");
            report_has(text, "GPU activity paused 507 more times, 0.035 s in all");
        }
        free(text);
        cJSON_Delete(rep);
        tp_run_free(&run);
        synth_rmtree(dir);
    }
}

/* pause_run's program without steps (a plain `trainprof run` of a program whose steps it cannot
 * see): the breakdown's one window is the run less the 60 ms paused, not idle in it */
static void test_paused_without_steps(void **state) {
    (void)state;
    char dir[512];
    pause_run(dir, sizeof dir, 0, 0);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = default_report(&run);
    double run_s = jnum(rep, "ranks.0.breakdown.run_s"), in_s = run_s - 0.060;
    jnear(jnum(rep, "ranks.0.breakdown.captured_s"), in_s, "captured time");
    jnear(jnum(rep, "ranks.0.breakdown.windows"), 1, "one window");
    jnear(jnum(rep, "ranks.0.breakdown.kernels_per_step"), 18, "kernels of the window");
    jnear(jnum(rep, "ranks.0.breakdown.share.busy"), 0.180 / in_s, "busy of the captured time");
    jnear(jnum(rep, "ranks.0.breakdown.ms.step.mean"), 1e3 * in_s, "window ms");
    jnear(jnum(rep, "ranks.0.breakdown.ms.idle.mean"), 1e3 * in_s - 180, "idle ms");
    /* the idle that opens the run: from its first record (the launch, 10 us before the first
     * kernel) to that kernel; the 100 us after the pause before the next kernel opens no run */
    jnear(jnum(rep, "ranks.0.breakdown.ms.start_idle.mean"), 0.010, "start idle ms");
    cJSON_Delete(rep);
    char *text = report_text(&run, NULL);
    report_has(text, "no steps: the run as one window, the ");
    report_has(text, "18 kernels in all");
    report_lacks(text, "idle at step start");
    /* no step to be a share of: the headline's busy is of the time captured */
    report_has(text, "GPU busy 49.9 % of the time GPU activity was recorded (rank 0");
    free(text);
    /* the HTML says beside the breakdown what time it is over */
    char *html = html_of(&run);
    report_has(html, "rank 0: no steps; GPU activity recorded 0.361 s of the 0.421 s run: "
                     "its GPU breakdown is over that time only");
    report_has(html, ">ms in the run (no steps: the run is one window)</text>");
    report_lacks(html, ">ms per step</text>");
    free(html);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* A run without steps whose capture was paused from before its first record (a damaged file:
 * kernels recorded in a pause): no GPU figure, and the headline says so without naming steps
 * the run does not have. */
static void test_paused_before_records_without_steps(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = cupti_rank(dir, sizeof dir, "kpause0");
    meta_u64(f, "gpu_capture.paused_since_ns", T0 - MS);
    launch(f, T0 + 100 * US, 10 * MS, 100);
    synth_end_of_file(f, T0 + 20 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = default_report(&run);
    assert_string_equal(jstr(rep, "ranks.0.breakdown.not_captured"),
                        "GPU activity was recorded at no time of the run");
    cJSON_Delete(rep);
    char *text = report_text(&run, NULL);
    report_has(text, "GPU activity recorded at no time of the run (rank 0)");
    report_lacks(text, "measured step");
    free(text);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* A rank that ended before its first step under the default plan (a window over steps 0-4,
 * open from the start: Megatron-LM's rank 1 when its dataset helpers failed to import): its
 * capture line names the plan's steps and says the figures are over the run, not that the
 * window was "every measured step" of a rank that has none. */
static void test_plan_without_steps(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "kplan0"), 0);
    synth_file *f = synth_open(dir, "h", 40, RT0, T0);
    synth_thread(f, 1, 40);
    synth_thread(f, 2, 41);
    synth_rank(f, 1, 2);
    synth_meta(f, "capability.cupti", "activity capture in the steps of the capture plan auto");
    synth_meta(f, "kernel_steps", "0-4");
    meta_u64(f, "kernel_steps.on_ns", T0);
    launch(f, T0 + 100 * US, 10 * MS, 100);
    synth_end_of_file(f, T0 + 20 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    char *text = report_text(&run, NULL);
    report_has(text, "GPU activity captured in the capture plan's steps 0-4; this rank has no "
                     "measured steps, so the GPU figures are over the run");
    report_lacks(text, "every measured step");
    report_lacks(text, "--kernel-steps");
    free(text);
    tp_run_free(&run);
    synth_rmtree(dir);
}

static void test_paused_throughout(void **state) {
    (void)state;
    char dir[512];
    pause_run(dir, sizeof dir, 1, 1);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = default_report(&run);
    /* kernels in the warm-up step only, then paused: no measured step captured */
    jnear(jnum(rep, "ranks.0.gpu_capture.captured_steps"), 0, "captured");
    assert_true(cJSON_IsString(jget(rep, "ranks.0.gpu.not_captured")));
    assert_true(cJSON_IsNull(jget(rep, "ranks.0.gpu.devices")));
    assert_true(cJSON_IsNull(jget(rep, "ranks.0.breakdown.ms")));
    assert_false(cJSON_IsNumber(jget(rep, "headline.figures.gpu_busy_share")));
    assert_null(jfinding(rep, "gpu_busy"));
    assert_null(jfinding(rep, "launch_bound"));
    cJSON_Delete(rep);
    char *text = report_text(&run, NULL);
    report_has(text, "GPU activity recorded in no measured step (0 of 20)");
    report_has(text, "capture was paused for torch.profiler");
    report_has(text, "no bottleneck found: step 20.00 ms, GPU activity not captured in any "
                   "measured step (rank 0)");
    report_lacks(text, "busy 0.0 %");
    report_lacks(text, "idle 100");
    free(text);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* API steps 0-20 of 20 ms as pause_run's, paused in steps 5-7 for torch.profiler and in steps
 * 12-13 for another CUPTI client (gpu_capture.pause_reasons), each paused step without a
 * kernel; with `all`, in steps 1-9 for torch.profiler and from step 10 on, never resumed, for
 * another CUPTI client; with `old` 1, as a file written before gpu_capture.pause_reasons: the
 * reason written last (gpu_capture.pause_reason) only; with `old` 2, damaged: the first pause
 * listed with its end before its start. */
static void reasons_run(char *dir, size_t n, int all, int old) {
    assert_int_equal(synth_tmpdir(dir, n, "kreasons"), 0);
    synth_file *f = synth_open(dir, "h", 40, RT0, T0);
    synth_thread(f, 1, 40);
    synth_rank(f, 0, 1);
    synth_meta(f, "capability.cupti", "activity capture on: 8 kinds");
    const uint64_t s = 20 * MS;
    uint64_t a0 = T0 + 5 * s, a1 = T0 + 8 * s, b0 = T0 + 12 * s, b1 = T0 + 14 * s;
    if (all) a0 = T0 + s, a1 = b0 = T0 + 10 * s, b1 = UINT64_MAX;
    char v[96];
    if (all) snprintf(v, sizeof v, "%llu-%llu", (unsigned long long)a0, (unsigned long long)a1);
    else if (old == 2) /* damaged: the first pause ends before it starts */
        snprintf(v, sizeof v, "%llu-%llu,%llu-%llu", (unsigned long long)a1,
                 (unsigned long long)a0, (unsigned long long)b0, (unsigned long long)b1);
    else if (old == 3) /* damaged: the first pause does not read */
        snprintf(v, sizeof v, "%llu-%llux,%llu-%llu", (unsigned long long)a0,
                 (unsigned long long)a1, (unsigned long long)b0, (unsigned long long)b1);
    else snprintf(v, sizeof v, "%llu-%llu,%llu-%llu", (unsigned long long)a0,
                  (unsigned long long)a1, (unsigned long long)b0, (unsigned long long)b1);
    synth_meta(f, "gpu_capture.pause_reason", "torch.profiler");
    synth_meta(f, "gpu_capture.pause_reason", "another CUPTI client");
    if (old != 1) synth_meta(f, "gpu_capture.pause_reasons", "torch.profiler,another CUPTI client");
    synth_meta(f, "gpu_capture.pauses", v);
    if (all) meta_u64(f, "gpu_capture.paused_since_ns", b0);
    if (old == 3) synth_meta(f, "gpu_capture.paused_since_ns", "-1"); /* not a time */
    uint64_t t = T0;
    for (uint32_t k = 0; k <= 20; k++) {
        synth_step_begin(f, 1, t, k);
        int paused = (t >= a0 && t < a1) || (t >= b0 && t < b1);
        if (!paused) launch(f, t + 100 * US, 10 * MS, 100 + k);
        synth_step_end(f, 1, t + s, k);
        t += s;
    }
    synth_end_of_file(f, t + MS, 0);
    assert_int_equal(synth_close(f), 0);
}

static void test_pause_reasons(void **state) {
    (void)state;
    char dir[512];
    for (int old = 0; old < 2; old++) { /* each pause its reason; an older file: the last */
        reasons_run(dir, sizeof dir, 0, old);
        tp_run run;
        load_run(dir, &run);
        cJSON *rep = default_report(&run);
        jnear(jnum(rep, "ranks.0.gpu_capture.captured_steps"), 15, "captured");
        jnear(jnum(rep, "ranks.0.gpu.capture_paused.1.from_s"), 0.240, "second pause");
        assert_string_equal(jstr(rep, "ranks.0.gpu.capture_paused.0.reason"),
                            old ? "another CUPTI client" : "torch.profiler");
        assert_string_equal(jstr(rep, "ranks.0.gpu.capture_paused.1.reason"),
                            "another CUPTI client");
        cJSON_Delete(rep);
        char *text = report_text(&run, NULL);
        report_has(text, old ? "GPU activity paused for another CUPTI client from 0.100 s"
                             : "GPU activity paused for torch.profiler from 0.100 s to 0.160 s");
        report_has(text, "GPU activity paused for another CUPTI client from 0.240 s to 0.280 s");
        free(text);
        tp_run_free(&run);
        synth_rmtree(dir);
    }
    /* a reversed pause is none (as the captured steps read it), and the next keeps its own
     * reason: no line "from 0.160 s to 0.100 s"; so is one that does not read (the entries
     * after it still count, each with its reason), and a pause never resumed whose start is
     * not a time (it read as a pause from the process's start) */
    for (int damaged = 2; damaged <= 3; damaged++) {
        reasons_run(dir, sizeof dir, 0, damaged);
        tp_run run;
        load_run(dir, &run);
        cJSON *rep = default_report(&run);
        jnear(jnum(rep, "ranks.0.gpu_capture.captured_steps"), 18, "captured");
        assert_null(jget(rep, "ranks.0.gpu.capture_paused.1"));
        assert_string_equal(jstr(rep, "ranks.0.gpu.capture_paused.0.reason"),
                            "another CUPTI client");
        cJSON_Delete(rep);
        char *text = report_text(&run, NULL);
        report_has(text, "GPU activity paused for another CUPTI client from 0.240 s to 0.280 s");
        report_lacks(text, "paused for torch.profiler");
        report_lacks(text, "never resumed");
        free(text);
        tp_run_free(&run);
        synth_rmtree(dir);
    }
    /* no measured step captured: the report names both reasons, once each */
    reasons_run(dir, sizeof dir, 1, 0);
    tp_run run;
    load_run(dir, &run);
    char *text = report_text(&run, NULL);
    report_has(text, "GPU activity recorded in no measured step (0 of 20)");
    report_has(text, "capture was paused for torch.profiler, another CUPTI client");
    report_has(text, "GPU activity paused for another CUPTI client from 0.200 s");
    free(text);
    tp_run_free(&run);
    synth_rmtree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_gpu_figures),
        cmocka_unit_test(test_window_capture_cost),
        cmocka_unit_test(test_kinds_named),
        cmocka_unit_test(test_memory_peak_past_capacity),
        cmocka_unit_test(test_plan_windows),
        cmocka_unit_test(test_damaged_windows),
        cmocka_unit_test(test_detail_off),
        cmocka_unit_test(test_detail_switches),
        cmocka_unit_test(test_paused_pages),
        cmocka_unit_test(test_paused_steps_not_idle),
        cmocka_unit_test(test_paused_throughout),
        cmocka_unit_test(test_paused_without_steps),
        cmocka_unit_test(test_paused_before_records_without_steps),
        cmocka_unit_test(test_plan_without_steps),
        cmocka_unit_test(test_pause_reasons),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
