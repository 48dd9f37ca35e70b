/*
 * test_gpu_report.c — what the report and the exports believe of GPU records and GPU
 * samples, on synthetic runs (tests/synth.c) with known answers:
 *  - records that contradict their stream's order are clipped once, by the loader, so the
 *    report, the step breakdown and the Chrome export give the same figures;
 *  - energy comes from integrated power samples when the NVML energy counter is missing,
 *    with the method named and, when there is none, the true reason;
 *  - a rank's GPUs are found by UUID (never by position once a UUID is known), MIG devices
 *    through their parent GPU, flagged as shared.
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

#include "analysis/gpu.h"
#include "analysis/model.h"
#include "analysis/text.h"
#include "analysis/report.h"
#include "json_path.h"
#include "report_text.h"
#include "export/chrome.h"
#include "format/format.h"
#include "synth.h"

static const uint64_t T0 = 1000000000ull, US = 1000ull, MS = 1000000ull;
#define RT0 1700000000000000000ull

/* ------------------------------------------------------------------ helpers */

/* The report's text, asserting it holds `want`. */
static void text_has(const tp_run *run, const char *want) {
    char *text = report_text(run, NULL);
    if (!strstr(text, want)) fail_msg("no \"%s\" in:\n%s", want, text);
    free(text);
}

/* The merged (rank < 0) or per-rank Chrome export of run, parsed. */
static cJSON *export_json(const tp_run *run, int rank) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    int rc = rank < 0 ? tp_export_chrome(run, f, NULL) : tp_export_chrome_rank(run, rank, f, NULL);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rc, 0);
    cJSON *root = cJSON_Parse(text);
    free(text);
    assert_non_null(root);
    return root;
}

/* ------------------------------------------------------------------ stream order */

/* A 256 KiB device-to-device copy on stream 7 recorded as lasting 11.08 ms, while 5,000
 * kernels of 1 us ran on the same stream in that span and a cudaStreamSynchronize of that
 * stream, called before the copy began, returned 5 us after it began. Steps of 12 ms: a
 * warm-up [T0, T0+12 ms] and the measured one [S, S+12 ms], S = T0 + 12 ms; the copy begins
 * at C = S + 0.5 ms. The copy can only have run until the synchronisation returned, C + 5 us
 * (before the next record on its stream, C + 10 us): busy = 5,000 us of kernels + 5 us of
 * copy = 5.005 ms of 12 ms, memcpy 5 us. Believed as recorded it made the step 92.3 % busy
 * and 50.7 % memcpy. */
static void stream_order_run(char *dir, size_t n) {
    assert_int_equal(synth_tmpdir(dir, n, "gpu-clip"), 0);
    synth_file *f = synth_open(dir, "h", 40, RT0, T0);
    synth_thread(f, 1, 40);
    synth_thread(f, 2, 41);
    synth_rank(f, 0, 1);
    const uint64_t S = T0 + 12 * MS, C = S + 500 * US;
    synth_step_begin(f, 1, T0, 0);
    synth_step_end(f, 1, S, 0);
    synth_step_begin(f, 1, S, 1);
    synth_step_end(f, 1, S + 12 * MS, 1);
    /* the copy's launch, then the host waiting for the stream */
    tprof_pl_gpu launch = {S + 410 * US, 0, 0, 0, 1, 41, 40, 0};
    synth_raw(f, 2, TPROF_REC_GPU_API, TPROF_INLINE_NAME, S + 400 * US, &launch, sizeof launch,
              "cudaMemcpyAsync", sizeof "cudaMemcpyAsync");
    tprof_pl_gpu wait = {C + 5 * US, 0, 0, 0, 2, 131, 40, 0};
    synth_raw(f, 2, TPROF_REC_GPU_API, TPROF_INLINE_NAME, S + 420 * US, &wait, sizeof wait,
              "cudaStreamSynchronize", sizeof "cudaStreamSynchronize");
    tprof_pl_gpu sync = {C + 5 * US, 0, 0, 7, 2, 3 /* stream */, 0, 0};
    synth_raw(f, 2, TPROF_REC_GPU_SYNC, 0, S + 420 * US, &sync, sizeof sync, NULL, 0);
    tprof_pl_gpu copy = {C + 11080 * US, 262144, 0, 7, 1, 8 /* DtoD */, 0, 0};
    synth_raw(f, 2, TPROF_REC_GPU_MEMCPY, 0, C, &copy, sizeof copy, NULL, 0);
    for (uint32_t k = 0; k < 5000; k++) {
        uint64_t b = C + 10 * US + k * 2 * US;
        synth_kernel(f, 2, b, b + US, 0, 7, 3 + k, "vectorized_elementwise_kernel");
    }
    synth_end_of_file(f, S + 13 * MS, 0);
    assert_int_equal(synth_close(f), 0);
}

static void test_stream_order_clip(void **state) {
    (void)state;
    char dir[512];
    stream_order_run(dir, sizeof dir);
    tp_run run;
    load_run(dir, &run);
    const tp_process *p = &run.procs[0];
    /* the loader clipped the copy, and only it, to the synchronisation's return */
    assert_int_equal(p->nclips, 1);
    const tp_gpu_op *copy = NULL;
    for (size_t i = 0; i < p->ngpu; i++)
        if (p->gpu[i].type == TPROF_REC_GPU_MEMCPY) copy = &p->gpu[i];
    assert_non_null(copy);
    assert_true(copy->end - copy->start == 5 * US);
    assert_true(p->clips[0].recorded_end - copy->start == 11080 * US);
    assert_int_equal(p->clips[0].why, TP_CLIP_SYNC);
    assert_true(p->clipped_ns == 11075 * US);

    cJSON *rep = default_report(&run);
    /* the GPU section: busy 5.005 of 12 ms, memcpy 5 us, 5,000 kernels of 1 us */
    assert_true(jnum(rep, "ranks.0.gpu.devices.0.busy_share") == 5005000.0 / 12000000.0);
    assert_true(jnum(rep, "ranks.0.gpu.devices.0.memcpy_memset_ms") == 5000.0 / 1e6);
    assert_true(jnum(rep, "ranks.0.gpu.devices.0.kernel_ms") == 5000000.0 / 1e6);
    assert_true(jnum(rep, "ranks.0.gpu.records_clipped") == 1.0);
    assert_true(jnum(rep, "ranks.0.gpu.records_clipped_ms") == 11075000.0 / 1e6);
    /* the step breakdown: the same records, so the same shares */
    assert_true(jnum(rep, "ranks.0.breakdown.share.compute") == 5000000.0 / 12000000.0);
    assert_true(jnum(rep, "ranks.0.breakdown.share.memcpy_memset") == 5000.0 / 12000000.0);
    assert_true(fabs(jnum(rep, "ranks.0.breakdown.share.busy") - 5005000.0 / 12000000.0) < 1e-15);
    text_has(&run, "GPU 0: busy 41.7 % of the step,");
    text_has(&run, "1 GPU record clipped to its stream's order (11.075 ms of recorded time removed)");

    /* the export: the copy's slice lasts 5 us, says what CUPTI recorded, and the busy time
     * of the exported slices inside the measured step is the report's */
    cJSON *root = export_json(&run, -1);
    const cJSON *ev, *cslice = NULL;
    double busy_us = 0, step_ts = -1, step_dur = 0;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItemCaseSensitive(root, "traceEvents")) {
        const cJSON *cat = cJSON_GetObjectItemCaseSensitive(ev, "cat");
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(ev, "ph");
        if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "X") || !cJSON_IsString(cat)) continue;
        if (!strcmp(cat->valuestring, "gpu_memcpy")) cslice = ev;
        if (!strcmp(cat->valuestring, "kernel") || !strcmp(cat->valuestring, "gpu_memcpy"))
            busy_us += jnum(ev, "dur");
    }
    /* the measured step's slice on the step thread */
    cJSON_ArrayForEach(ev, cJSON_GetObjectItemCaseSensitive(root, "traceEvents")) {
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(ev, "args");
        const cJSON *step = cJSON_GetObjectItemCaseSensitive(args, "step");
        if (cJSON_IsNumber(step) && step->valuedouble == 1 && cJSON_GetObjectItemCaseSensitive(ev, "dur")) {
            step_ts = jnum(ev, "ts");
            step_dur = jnum(ev, "dur");
        }
    }
    assert_non_null(cslice);
    assert_true(jnum(cslice, "dur") == 5.0);
    assert_string_equal(jstr(cslice, "args.clipped"), "stream synchronisation");
    assert_true(jnum(cslice, "args.recorded_dur_us") == 11080.0);
    assert_true(step_ts >= 0);
    assert_true(step_dur == 12000.0);
    assert_true(fabs(busy_us / step_dur - jnum(rep, "ranks.0.gpu.devices.0.busy_share")) < 1e-12);
    cJSON_Delete(root);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* Without any synchronisation: a kernel recorded [0, 100 us] with a 10 us kernel at 20 us
 * after it on its stream ends when that one begins (at 20 us); another stream is not
 * touched; two nodes of one CUDA graph overlapping on the stream they were launched into are
 * left as recorded (a graph's branches run concurrently). */
static void test_stream_order_next_and_graph(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "gpu-clip-next"), 0);
    synth_file *f = synth_open(dir, "h", 50, RT0, T0);
    synth_thread(f, 1, 50);
    synth_thread(f, 2, 51);
    synth_rank(f, 0, 1);
    synth_kernel(f, 2, T0, T0 + 100 * US, 0, 7, 1, "gemm_a");
    synth_kernel(f, 2, T0 + 20 * US, T0 + 30 * US, 0, 7, 2, "gemm_b");
    synth_kernel(f, 2, T0 + 10 * US, T0 + 90 * US, 0, 9, 3, "gemm_other_stream");
    tprof_pl_gpu g1 = {T0 + 300 * US, 0, 0, 11, 4, 0, 0, 77};
    synth_raw(f, 2, TPROF_REC_GPU_KERNEL, TPROF_INLINE_NAME, T0 + 200 * US, &g1, sizeof g1,
              "graph_branch_a", sizeof "graph_branch_a");
    tprof_pl_gpu g2 = {T0 + 260 * US, 0, 0, 11, 5, 0, 0, 77};
    synth_raw(f, 2, TPROF_REC_GPU_KERNEL, TPROF_INLINE_NAME, T0 + 210 * US, &g2, sizeof g2,
              "graph_branch_b", sizeof "graph_branch_b");
    synth_end_of_file(f, T0 + MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    const tp_process *p = &run.procs[0];
    assert_int_equal(p->ngpu, 5);
    assert_int_equal(p->nclips, 1);
    const tp_gpu_op *a = &p->gpu[p->clips[0].index];
    assert_string_equal(a->name, "gemm_a");
    assert_true(a->end == T0 + 20 * US);
    assert_true(p->clips[0].recorded_end == T0 + 100 * US);
    assert_int_equal(p->clips[0].why, TP_CLIP_NEXT);
    for (size_t i = 0; i < p->ngpu; i++) {
        const tp_gpu_op *o = &p->gpu[i];
        if (!strcmp(o->name, "gemm_other_stream")) assert_true(o->end == T0 + 90 * US);
        if (!strcmp(o->name, "graph_branch_a")) assert_true(o->end == T0 + 300 * US);
        assert_int_equal(o->flags & TP_GPU_CLIPPED, o == a ? TP_GPU_CLIPPED : 0);
    }
    cJSON *rep = default_report(&run);
    assert_true(jnum(rep, "ranks.0.gpu.records_clipped") == 1.0);
    assert_true(jnum(rep, "ranks.0.gpu.records_clipped_ms") == 0.08);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* ------------------------------------------------------------------ energy */

/* A rank that sampled NVML itself on a GPU whose energy counter is unsupported: the
 * instantaneous power (gpu0.power_instant_w) every 20 ms is 100 W but for one 300 W reading
 * at T0 + 100 ms; the 1 s average (gpu0.power_w) reads 150 W throughout. Steps: a warm-up
 * [T0 + 10, T0 + 50 ms] and three of 80 ms from T0 + 50 ms to T0 + 290 ms. The integral of
 * the instantaneous series over [50, 290] ms: 100 W x 0.24 s + the spike's triangle
 * (0.5 x 0.04 s x 200 W) = 28 J, i.e. 28/3 J per step and 116.67 W. Steps of 80 ms are
 * shorter than a power reading's resolution (100 ms): flagged approximate.
 * GPU 1: no energy counter and its power samples begin only at T0 + 200 ms; GPU 2: no
 * energy counter and no power at all (temperature only). */

/* ------------------------------------------------------------------ repeated correlation ids */

/* CUPTI detached between two capture windows and attached again may number its records from
 * 1 again: correlation id 5 names a cudaLaunchKernel in the warm-up step (window 1) and another
 * in the measured step (window 2). Each kernel belongs to the launch that began last before it
 * started, so only the second kernel counts for the measured step: 1 ms of kernel time (taking
 * the measured step's launch for both counted 2 ms). Steps of 10 ms: warm-up [T0, T0+10 ms],
 * then the measured one. */
static void test_repeated_correlation_ids(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "gpu-corr"), 0);
    synth_file *f = synth_open(dir, "h", 50, RT0, T0);
    synth_thread(f, 1, 50);
    synth_thread(f, 2, 51);
    synth_rank(f, 0, 1);
    for (uint32_t s = 0; s < 2; s++) {
        synth_step_begin(f, 1, T0 + s * 10 * MS, s);
        synth_step_end(f, 1, T0 + (s + 1) * 10 * MS, s);
    }
    for (uint32_t s = 0; s < 2; s++) {
        uint64_t b = T0 + s * 10 * MS + MS;
        tprof_pl_gpu launch = {b + 10 * US, 0, 0, 0, 5, 211, 50, 0};
        synth_raw(f, 2, TPROF_REC_GPU_API, TPROF_INLINE_NAME, b, &launch, sizeof launch,
                  "cudaLaunchKernel", sizeof "cudaLaunchKernel");
        synth_kernel(f, 2, b + 50 * US, b + 50 * US + MS, 0, 7, 5, "gemm_kernel");
    }
    synth_end_of_file(f, T0 + 21 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = default_report(&run);
    assert_true(jnum(rep, "ranks.0.gpu.devices.0.kernel_ms") == 1.0);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* A driver launch inside a runtime launch of its thread (the runtime's own, as launch
 * callbacks see it) is dropped; one of the program's own (cuBLASLt's) is kept. */
static void test_nested_driver_launch(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "gpu-drv"), 0);
    synth_file *f = synth_open(dir, "h", 60, RT0, T0);
    synth_thread(f, 1, 60);
    synth_thread(f, 2, 61);
    synth_rank(f, 0, 1);
    synth_step_begin(f, 1, T0, 0);
    synth_step_end(f, 1, T0 + 10 * MS, 0);
    uint64_t b = T0 + MS;
    tprof_pl_gpu rt = {b + 10 * US, 0, 0, 0, 5, 211, 60, 0};
    synth_raw(f, 2, TPROF_REC_GPU_API, TPROF_INLINE_NAME, b, &rt, sizeof rt, "cudaLaunchKernel",
              sizeof "cudaLaunchKernel");
    tprof_pl_gpu inner = {b + 8 * US, 0, 0, 0, 6, 307, 60, 0};
    synth_raw(f, 2, TPROF_REC_GPU_API, TPROF_INLINE_NAME, b + 2 * US, &inner, sizeof inner,
              "cuLaunchKernel", sizeof "cuLaunchKernel");
    tprof_pl_gpu own = {b + 30 * US, 0, 0, 0, 7, 307, 60, 0};
    synth_raw(f, 2, TPROF_REC_GPU_API, TPROF_INLINE_NAME, b + 20 * US, &own, sizeof own,
              "cuLaunchKernel", sizeof "cuLaunchKernel");
    synth_kernel(f, 2, b + 50 * US, b + 60 * US, 0, 7, 5, "gemm_kernel");
    synth_kernel(f, 2, b + 70 * US, b + 80 * US, 0, 7, 7, "cublasLt_kernel");
    synth_end_of_file(f, T0 + 11 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    const tp_process *p = &run.procs[0];
    assert_int_equal(p->napi, 2);
    uint32_t corr[2] = {p->api[0].correlation, p->api[1].correlation};
    assert_true((corr[0] == 5 && corr[1] == 7) || (corr[0] == 7 && corr[1] == 5));
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* Runtime calls that lie inside one another on a thread (a hostile or unusual file: a call of
 * no duration at the outer call's start, a short one inside it): a driver call inside the
 * outer call is still the runtime's, whatever the order of equal starts; so is one under the
 * name the capture gives a driver call CUPTI did not name. */
static void test_nested_driver_launch_nested_runtime(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "gpu-drv-nest"), 0);
    synth_file *f = synth_open(dir, "h", 62, RT0, T0);
    synth_thread(f, 1, 62);
    synth_thread(f, 2, 63);
    synth_rank(f, 0, 1);
    synth_step_begin(f, 1, T0, 0);
    synth_step_end(f, 1, T0 + 10 * MS, 0);
    const uint64_t b = T0 + MS;
    /* the outer call, b .. b+100 us; a call of no duration at b; a short one at b+1..b+2 us */
    tprof_pl_gpu outer = {b + 100 * US, 0, 0, 0, 5, 211, 62, 0};
    synth_raw(f, 2, TPROF_REC_GPU_API, TPROF_INLINE_NAME, b, &outer, sizeof outer,
              "cudaLaunchKernel", sizeof "cudaLaunchKernel");
    tprof_pl_gpu zero = {b, 0, 0, 0, 9, 10, 62, 0};
    synth_raw(f, 2, TPROF_REC_GPU_API, TPROF_INLINE_NAME, b, &zero, sizeof zero,
              "cudaGetLastError", sizeof "cudaGetLastError");
    tprof_pl_gpu shortc = {b + 2 * US, 0, 0, 0, 10, 10, 62, 0};
    synth_raw(f, 2, TPROF_REC_GPU_API, TPROF_INLINE_NAME, b + 1 * US, &shortc, sizeof shortc,
              "cudaPeekAtLastError", sizeof "cudaPeekAtLastError");
    /* the runtime's own launches, after the short call, and at the outer call's very start */
    tprof_pl_gpu inner = {b + 8 * US, 0, 0, 0, 6, 307, 62, 0};
    synth_raw(f, 2, TPROF_REC_GPU_API, TPROF_INLINE_NAME, b + 4 * US, &inner, sizeof inner,
              "cuLaunchKernel", sizeof "cuLaunchKernel");
    tprof_pl_gpu first = {b + US / 2, 0, 0, 0, 8, 307, 62, 0};
    synth_raw(f, 2, TPROF_REC_GPU_API, TPROF_INLINE_NAME, b, &first, sizeof first,
              "cuLaunchKernel", sizeof "cuLaunchKernel");
    /* one whose name CUPTI did not give (capture/cupti.c names it "cuda driver call") */
    tprof_pl_gpu unnamed = {b + 20 * US, 0, 0, 0, 11, 307, 62, 0};
    synth_raw(f, 2, TPROF_REC_GPU_API, TPROF_INLINE_NAME, b + 10 * US, &unnamed, sizeof unnamed,
              "cuda driver call", sizeof "cuda driver call");
    /* the program's own, after the outer call */
    tprof_pl_gpu own = {b + 130 * US, 0, 0, 0, 7, 307, 62, 0};
    synth_raw(f, 2, TPROF_REC_GPU_API, TPROF_INLINE_NAME, b + 120 * US, &own, sizeof own,
              "cuLaunchKernel", sizeof "cuLaunchKernel");
    synth_end_of_file(f, T0 + 11 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    const tp_process *p = &run.procs[0];
    size_t drv = 0;
    for (size_t i = 0; i < p->napi; i++)
        if (!strcmp(p->api[i].name, "cuLaunchKernel")) {
            drv++;
            assert_int_equal(p->api[i].correlation, 7);
        }
    assert_int_equal(drv, 1);
    assert_int_equal(p->napi, 4); /* the three runtime calls and the program's launch */
    tp_run_free(&run);
    synth_rmtree(dir);
}

static void test_energy_integrated_power(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "gpu-energy"), 0);
    synth_file *f = synth_open(dir, "h", 70, RT0, T0);
    synth_thread(f, 1, 70);
    synth_thread(f, 2, 71);
    synth_rank(f, 0, 1);
    const char *why = "unsupported: nvmlDeviceGetTotalEnergyConsumption answered \"Not Supported\" (3)";
    synth_meta(f, "gpu.0.uuid", "GPU-00000000-0000-4000-8000-000000000000");
    synth_meta(f, "gpu.0.energy_counter", why);
    synth_meta(f, "gpu.1.energy_counter", why);
    synth_meta(f, "gpu.2.energy_counter", why);
    synth_step_begin(f, 1, T0 + 10 * MS, 0);
    synth_step_end(f, 1, T0 + 50 * MS, 0);
    for (uint64_t k = 0; k < 3; k++) {
        synth_step_begin(f, 1, T0 + (50 + 80 * k) * MS, k + 1);
        synth_step_end(f, 1, T0 + (130 + 80 * k) * MS, k + 1);
    }
    for (uint64_t t = 0; t <= 300; t += 20) {
        synth_counter(f, 2, T0 + t * MS, "gpu0.power_instant_w", t == 100 ? 300.0 : 100.0);
        synth_counter(f, 2, T0 + t * MS, "gpu0.power_w", 150.0);
        if (t >= 200) synth_counter(f, 2, T0 + t * MS, "gpu1.power_w", 200.0);
        synth_counter(f, 2, T0 + t * MS, "gpu2.temp_c", 50.0);
    }
    synth_end_of_file(f, T0 + 310 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = default_report(&run);
    assert_string_equal(jstr(rep, "ranks.0.nvml.gpus.0.energy_method"), "integrated_power");
    assert_string_equal(jstr(rep, "ranks.0.nvml.gpus.0.energy_series"), "power_instant_w");
    assert_string_equal(jstr(rep, "ranks.0.nvml.gpus.0.energy_counter"), why);
    assert_true(jnum(rep, "ranks.0.nvml.gpus.0.sample_interval_ms") == 20.0);
    assert_true(jnum(rep, "ranks.0.nvml.gpus.0.steps_with_energy") == 3.0);
    assert_true(fabs(jnum(rep, "ranks.0.nvml.gpus.0.energy_j") - 28.0) < 1e-9);
    assert_true(fabs(jnum(rep, "ranks.0.nvml.gpus.0.energy_per_step_j") - 28.0 / 3.0) < 1e-9);
    assert_true(fabs(jnum(rep, "ranks.0.nvml.gpus.0.avg_power_w") - 28.0 / 0.24) < 1e-9);
    assert_true(jnum(rep, "ranks.0.nvml.gpus.0.energy_resolution_ms") == 100.0);
    assert_true(cJSON_IsTrue(jget(rep, "ranks.0.nvml.gpus.0.energy_approximate")));
    /* the true reasons where there is none */
    assert_string_equal(jstr(rep, "ranks.0.nvml.gpus.1.energy_method"), "none");
    assert_true(jnum(rep, "ranks.0.nvml.gpus.1.steps_with_energy") == 0.0);
    assert_string_equal(jstr(rep, "ranks.0.nvml.gpus.1.energy_unavailable"),
                        "the power samples (0.200 s to 0.300 s after the rank started) do not "
                        "cover the measured steps (0.050 s to 0.290 s)");
    assert_string_equal(jstr(rep, "ranks.0.nvml.gpus.2.energy_unavailable"),
                        "no energy counter (unsupported: nvmlDeviceGetTotalEnergyConsumption "
                        "answered \"Not Supported\" (3)) and fewer than two power samples");
    assert_null(jget(rep, "ranks.0.nvml.energy_per_step_j")); /* not every GPU has energy */
    assert_string_equal(jstr(rep, "ranks.0.nvml.energy_method"), "integrated_power");
    text_has(&run, "NVML GPU 0 (GPU-00000000-0000-4000-8000-000000000000): 9.3 J per step (0.0026 Wh) "
                  "over 3 steps, 116.7 W average, integrated from power_instant_w samples every "
                  "20 ms (no energy counter)");
    text_has(&run, "energy per step approximate: the steps are shorter than the interval of the "
                  "power readings (about 100 ms)");
    text_has(&run, "NVML GPU 1: no energy (the power samples (0.200 s to 0.300 s after the rank "
                  "started) do not cover the measured steps (0.050 s to 0.290 s))");
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* ------------------------------------------------------------------ GPU identity */

static const char *const UU[3] = {"GPU-00000000-0000-4000-8000-000000000000",
                                  "GPU-11111111-1111-4111-8111-111111111111",
                                  "GPU-22222222-2222-4222-8222-222222222222"};
static const char *const MIG_A = "MIG-aaaaaaaa-aaaa-5aaa-8aaa-aaaaaaaaaaaa";
static const char *const MIG_B = "MIG-bbbbbbbb-bbbb-5bbb-8bbb-bbbbbbbbbbbb";

/* NVML power samples every 2 ms over [T0, T0 + 40 ms] of GPUs 0..n-1 drawing watts[i], into
 * f (serial `serial`), with their UUIDs; `devices` is nvml.devices. */
static void nvml_samples(synth_file *f, uint32_t serial, size_t n, const double *watts,
                         const char *devices) {
    synth_meta(f, "nvml.devices", devices);
    for (size_t i = 0; i < n; i++) {
        char k[32];
        snprintf(k, sizeof k, "gpu.%zu.uuid", i);
        synth_meta(f, k, UU[i]);
    }
    for (uint64_t t = 0; t <= 40; t += 2)
        for (size_t i = 0; i < n; i++) {
            char name[32];
            snprintf(name, sizeof name, "gpu%zu.power_w", i);
            synth_counter(f, serial, T0 + t * MS, name, watts[i]);
        }
}

/* A rank (pid) on host "h": steps of 10 ms from T0 (the first warm-up), a kernel in each on
 * CUDA device `ordinal`, and its devices' UUIDs (uuids[o] for ordinal o, NULL: none). */
static synth_file *rank_file(const char *dir, uint32_t pid, int rank, unsigned ordinal,
                             const char *const *uuids, size_t nuuids) {
    synth_file *f = synth_open(dir, "h", (int32_t)pid, RT0, T0);
    synth_thread(f, 1, pid);
    synth_thread(f, 2, pid + 1);
    synth_rank(f, rank, 2);
    for (size_t o = 0; o < nuuids; o++)
        if (uuids[o]) {
            char k[32];
            snprintf(k, sizeof k, "cuda.%zu.uuid", o);
            synth_meta(f, k, uuids[o]);
        }
    for (uint64_t s = 0; s < 4; s++) {
        uint64_t b = T0 + s * 10 * MS;
        synth_step_begin(f, 1, b, s);
        synth_step_end(f, 1, b + 10 * MS, s);
        synth_kernel(f, 2, b + MS, b + 9 * MS, ordinal, 7, (uint32_t)(s + 1), "gemm_kernel");
    }
    return f;
}

/* The node sampler's file (pid 99) with n GPUs. */
static void node_sampler(const char *dir, size_t n, const double *watts, const char *devices) {
    synth_file *f = synth_open(dir, "h", 99, RT0, T0);
    synth_thread(f, 1, 99);
    synth_meta(f, "trainprof.role", "node-sampler");
    nvml_samples(f, 1, n, watts, devices);
    synth_end_of_file(f, T0 + 41 * MS, 0);
    assert_int_equal(synth_close(f), 0);
}

/* The names of the NVML counters in a per-rank export, as "gpu0.power_w,gpu1..." */
static void exported_gpu_counters(const tp_run *run, int rank, char *out, size_t n) {
    cJSON *root = export_json(run, rank);
    out[0] = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItemCaseSensitive(root, "traceEvents")) {
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(ev, "ph");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(ev, "name");
        if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "C") || !cJSON_IsString(name)) continue;
        if (strncmp(name->valuestring, "gpu", 3) || strstr(out, name->valuestring)) continue;
        snprintf(out + strlen(out), n - strlen(out), "%s%s", out[0] ? "," : "", name->valuestring);
    }
    cJSON_Delete(root);
}

/* Events of phase ph from OS pid `pid` in rank's per-rank export. */
static int exported_events(const tp_run *run, int rank, double pid, const char *ph) {
    cJSON *root = export_json(run, rank);
    int n = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItemCaseSensitive(root, "traceEvents")) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(ev, "ph");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(ev, "pid");
        n += cJSON_IsString(p) && !strcmp(p->valuestring, ph) && cJSON_IsNumber(id) &&
             id->valuedouble == pid;
    }
    cJSON_Delete(root);
    return n;
}

/* CUDA numbers its devices fastest first: the rank's device 0 is NVML's GPU 2, which the
 * node sampler did not sample (it read CUDA_VISIBLE_DEVICES=0,1 as NVML indices). The
 * rank's file names its GPU: no other GPU's energy is given to it (by position its device 0
 * would be NVML 0), the report says its GPU was not sampled, the per-rank export carries no
 * other GPU's counters. */
static void test_gpu_identity_not_sampled(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "gpu-id-absent"), 0);
    /* it also sees a device it does not use (CUPTI describes every visible device) */
    const char *uuids[] = {UU[2], "GPU-33333333-3333-4333-8333-333333333333"};
    synth_file *f = rank_file(dir, 60, 0, 0, uuids, 2);
    synth_end_of_file(f, T0 + 41 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    const double watts[] = {100, 300};
    node_sampler(dir, 2, watts, "0,1");
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = default_report(&run);
    assert_int_equal(cJSON_GetArraySize(jget(rep, "ranks.0.nvml.gpus")), 0);
    assert_int_equal(cJSON_GetArraySize(jget(rep, "ranks.0.nvml.rank_gpus_not_sampled")), 1);
    assert_string_equal(jstr(rep, "ranks.0.nvml.rank_gpus_not_sampled.0"), UU[2]);
    assert_null(jget(rep, "ranks.0.nvml.shared_with_other_ranks"));
    text_has(&run, "NVML: this rank's GPU GPU-22222222-2222-4222-8222-222222222222 was not among "
                  "the GPUs sampled: no energy or power for it");
    char names[256];
    exported_gpu_counters(&run, 0, names, sizeof names);
    assert_string_equal(names, "");
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* torchrun without a node sampler: local rank 0 sampled both GPUs of the node. CUDA's order
 * is the reverse of NVML's (CUDA 0 = NVML 1). Rank 0 works on its CUDA device 0 (NVML 1,
 * 300 W), rank 1 on its CUDA device 1 (NVML 0, 100 W). Each rank gets its own GPU's energy
 * (3 J and 1 J per 10 ms step), from rank 0's samples for rank 1, and no sum of both; the
 * per-rank exports carry each rank's GPU's counters only. */
static void test_gpu_identity_reversed_order(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "gpu-id-reversed"), 0);
    const char *uuids[] = {UU[1], UU[0]};
    synth_file *f0 = rank_file(dir, 60, 0, 0, uuids, 2);
    const double watts[] = {100, 300};
    synth_thread(f0, 3, 62);
    nvml_samples(f0, 3, 2, watts, "0,1");
    synth_end_of_file(f0, T0 + 41 * MS, 0);
    assert_int_equal(synth_close(f0), 0);
    synth_file *f1 = rank_file(dir, 70, 1, 1, uuids, 2);
    synth_end_of_file(f1, T0 + 41 * MS, 0);
    assert_int_equal(synth_close(f1), 0);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = default_report(&run);
    for (int r = 0; r < 2; r++) {
        char path[64];
        snprintf(path, sizeof path, "ranks.%d.nvml.gpus", r);
        assert_int_equal(cJSON_GetArraySize(jget(rep, path)), 1);
        snprintf(path, sizeof path, "ranks.%d.rank", r);
        assert_true(jnum(rep, path) == r);
    }
    assert_true(jnum(rep, "ranks.0.nvml.gpus.0.index") == 1.0);
    assert_true(jnum(rep, "ranks.0.nvml.gpus.0.cuda_device") == 0.0);
    assert_string_equal(jstr(rep, "ranks.0.nvml.gpus.0.uuid"), UU[1]);
    assert_true(fabs(jnum(rep, "ranks.0.nvml.gpus.0.energy_per_step_j") - 3.0) < 1e-9);
    assert_null(jget(rep, "ranks.0.nvml.energy_per_step_j")); /* one GPU: no sum */
    assert_string_equal(jstr(rep, "ranks.0.nvml.rank_gpus_by"), "uuid");
    assert_true(jnum(rep, "ranks.1.nvml.gpus.0.index") == 0.0);
    assert_true(jnum(rep, "ranks.1.nvml.gpus.0.cuda_device") == 1.0);
    assert_true(fabs(jnum(rep, "ranks.1.nvml.gpus.0.energy_per_step_j") - 1.0) < 1e-9);
    assert_string_equal(jstr(rep, "ranks.1.nvml.sampled_by"), "rank 0");
    text_has(&run, "NVML sampled by rank 0 (pid 60)");
    char names[256];
    exported_gpu_counters(&run, 0, names, sizeof names);
    assert_string_equal(names, "gpu1.power_w");
    exported_gpu_counters(&run, 1, names, sizeof names);
    assert_string_equal(names, "gpu0.power_w");
    /* rank 1's file takes rank 0's counters alone: its own 4 kernels and 4 steps, none of
     * rank 0's (which came with the counters' process before) */
    assert_int_equal(exported_events(&run, 1, 70, "X"), 4 + 4);
    assert_int_equal(exported_events(&run, 1, 60, "X"), 0);
    assert_true(exported_events(&run, 1, 60, "C") > 0);
    assert_int_equal(exported_events(&run, 0, 60, "X"), 4 + 4);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* A rank on a MIG device (its cuda.0.uuid is the MIG UUID, as the CUDA driver gives it): its
 * GPU is the one whose MIG devices the node sampler listed (gpu.1.mig_uuids), not NVML 0 by
 * position. The energy shown is that whole GPU's, flagged as shared by its MIG instances and
 * summed as nobody's own. With CUPTI's parent UUID (cuda.0.gpu_uuid) the same GPU is found
 * without the sampler's list. */
static void test_gpu_identity_mig(void **state) {
    (void)state;
    for (int parent_known = 0; parent_known < 2; parent_known++) {
        char dir[512];
        assert_int_equal(synth_tmpdir(dir, sizeof dir, "gpu-id-mig"), 0);
        const char *uuids[] = {MIG_B};
        synth_file *f = rank_file(dir, 60, 0, 0, uuids, 1);
        if (parent_known) synth_meta(f, "cuda.0.gpu_uuid", UU[1]);
        synth_end_of_file(f, T0 + 41 * MS, 0);
        assert_int_equal(synth_close(f), 0);
        synth_file *sf = synth_open(dir, "h", 99, RT0, T0);
        synth_thread(sf, 1, 99);
        synth_meta(sf, "trainprof.role", "node-sampler");
        const double watts[] = {100, 300};
        nvml_samples(sf, 1, 2, watts, "0,1");
        if (!parent_known) {
            char list[128];
            snprintf(list, sizeof list, "%s,%s", MIG_A, MIG_B);
            synth_meta(sf, "gpu.1.mig_uuids", list);
        }
        synth_end_of_file(sf, T0 + 41 * MS, 0);
        assert_int_equal(synth_close(sf), 0);
        tp_run run;
        load_run(dir, &run);
        cJSON *rep = default_report(&run);
        assert_int_equal(cJSON_GetArraySize(jget(rep, "ranks.0.nvml.gpus")), 1);
        assert_true(jnum(rep, "ranks.0.nvml.gpus.0.index") == 1.0);
        assert_true(jnum(rep, "ranks.0.nvml.gpus.0.cuda_device") == 0.0);
        assert_string_equal(jstr(rep, "ranks.0.nvml.rank_gpus_by"), "mig_parent");
        assert_true(cJSON_IsTrue(jget(rep, "ranks.0.nvml.gpus.0.shared_by_mig_instances")));
        assert_string_equal(jstr(rep, "ranks.0.nvml.gpus.0.mig_device"), MIG_B);
        assert_true(fabs(jnum(rep, "ranks.0.nvml.gpus.0.energy_per_step_j") - 3.0) < 1e-9);
        assert_null(jget(rep, "ranks.0.nvml.energy_per_step_j"));
        text_has(&run, "MIG mode (this rank's MIG device MIG-bbbbbbbb-bbbb-5bbb-8bbb-bbbbbbbbbbbb): "
                      "energy and power are the whole GPU's, shared by its MIG instances, not "
                      "this rank's own");
        cJSON_Delete(rep);
        tp_run_free(&run);
        synth_rmtree(dir);
    }
}

/* Attention in its forms is attention (fused kernels by their names; the unfused form by its
 * softmax over the scores), a loss's log-softmax is not, GEMMs and NCCL stay theirs. */
static void test_kernel_classes(void **state) {
    (void)state;
    static const struct { const char *name, *cls; } k[] = {
        {"void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, "
         "10, false, true>(c10::BFloat16*, c10::BFloat16 const*, int, int, int, bool const*, "
         "int, bool)", "attention"},
        {"void (anonymous namespace)::softmax_warp_backward<c10::BFloat16, c10::BFloat16, float, "
         "10, false, true>", "attention"},
        {"void scaled_masked_softmax_warp_forward<__nv_bfloat16, __nv_bfloat16, float, 11>",
         "attention"},
        {"void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>",
         "attention"},
        {"fmha_cutlassF_bf16_aligned_64x128_rf_sm80", "attention"},
        {"cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128",
         "attention"},
        {"void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
         "at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>", "elementwise/norm"},
        {"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "gemm"},
        {"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
         "communication"},
        {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
         "elementwise/norm"},
    };
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) assert_string_equal(tp_kernel_class(k[i].name), k[i].cls);
}

/* PyTorch's elementwise kernels as CUPTI names them: the same first 150 characters, the
 * functor deep inside. Their short forms for a 60-column table stay apart, keep the kernel's
 * name at the start and show the functor; a short name stays whole. */
#define EW(F) "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<" \
    "at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, " F " > >(" \
    "at::TensorIteratorBase&, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, " \
    "c10::BFloat16, " F " > const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<" \
    "at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, " F " > >(" \
    "at::TensorIteratorBase&)::{lambda(int)#1})"
static void test_kernel_short_names(void **state) {
    (void)state;
    const char *names[4] = {EW("at::native::binary_internal::MulFunctor<float>"),
                            EW("at::native::CUDAFunctor_add<c10::BFloat16>"),
                            EW("at::native::binary_internal::DivFunctor<float>"),
                            "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"};
    enum { SIZE = 4 * 60 + 1 };
    char out[4][SIZE];
    tp_kernel_short_names(names, 4, 60, &out[0][0], SIZE);
    const char *want[3] = {"MulFunctor", "CUDAFunctor_add", "DivFunctor"};
    for (int i = 0; i < 3; i++) {
        assert_true(strncmp(out[i], "elementwise_kernel<128, 2, ", 27) == 0);
        assert_non_null(strstr(out[i], want[i]));
        size_t cols = 0; /* ASCII but the cut marks (3 bytes, 1 column) */
        for (const char *c = out[i]; *c; c++) cols += ((unsigned char)*c & 0xC0) != 0x80;
        assert_true(cols <= 60);
        for (int k = 0; k < i; k++) assert_string_not_equal(out[i], out[k]);
    }
    assert_string_equal(out[3], names[3]);
    char one[256];
    assert_string_equal(tp_kernel_simplify(one, sizeof one,
                                           "void at::native::(anonymous namespace)::"
                                           "softmax_warp_forward<float, float, float, 10, false, "
                                           "true>(float*, float const*, int, int, int)"),
                        "softmax_warp_forward<float, float, float, 10, false, true>");
}

/* Kernels that differ only where the short form drops text: the same kernel in two
 * namespaces, two overloads, an empty name beside one made of qualifiers only. Each keeps
 * its whole name (bar "void ") so that no two rows read alike; a kernel alone in its short
 * form is still simplified. Then 3,000 names alike in their first 80 characters (a unique
 * number at the end) stay apart and within 60 columns. */
static void test_kernel_short_names_apart(void **state) {
    (void)state;
    const char *names[7] = {"void ns1::kern<float>(float*, int)",
                            "void ns2::kern<float>(float*, int)",
                            "void overload(float*)",
                            "void overload(double*)",
                            "",
                            "a::b::",
                            "void at::native::lone_kernel<4>(int)"};
    const char *want[7] = {"ns1::kern<float>(float*, int)", "ns2::kern<float>(float*, int)",
                           "overload(float*)", "overload(double*)", "", "a::b::",
                           "lone_kernel<4>"};
    enum { SIZE = 4 * 60 + 1, MANY = 3000 };
    char out[7][SIZE];
    tp_kernel_short_names(names, 7, 60, &out[0][0], SIZE);
    for (int i = 0; i < 7; i++) assert_string_equal(out[i], want[i]);

    char(*raw)[128] = malloc(MANY * sizeof *raw);
    const char **many = malloc(MANY * sizeof *many);
    char *short_many = malloc((size_t)MANY * SIZE);
    assert_non_null(raw);
    assert_non_null(many);
    assert_non_null(short_many);
    for (int i = 0; i < MANY; i++) {
        snprintf(raw[i], sizeof raw[i], "void at::native::a_long_templated_kernel_name_prefix"
                 "_that_is_the_same_for_all_of_them_%06d", (i * 7919) % MANY);
        many[i] = raw[i];
    }
    tp_kernel_short_names(many, MANY, 60, short_many, SIZE);
    for (int i = 0; i < MANY; i++) {
        const char *s = short_many + (size_t)i * SIZE;
        char tail[16];
        snprintf(tail, sizeof tail, "_%06d", (i * 7919) % MANY);
        assert_non_null(strstr(s, tail)); /* the number that tells it apart is shown */
        size_t cols = 0;
        for (const char *c = s; *c; c++) cols += ((unsigned char)*c & 0xC0) != 0x80;
        assert_true(cols <= 60);
    }
    free(raw);
    free(many);
    free(short_many);
}

/* A GPU rank with trainprof.torch's phases on its step thread: 4 steps of 20 ms (the first
 * warm-up), in each data 0-1 ms, forward 1-6 ms, backward 6-16 ms, optimizer 16-18 ms and 2 ms
 * outside any phase, with a kernel under the backward; a graph launch of 3 kernels in each
 * step; and one 5 ms kernel after the last step. The phases and the rest add up to the step;
 * the graph figures are per step; the kernel after the steps is reported as in no step. */
static void phases_run(int wrap);

static void test_phases_graphs_after(void **state) {
    (void)state;
    phases_run(0);
    /* the program's own "step" range around the phases: the phases are still the ranges
     * inside it, not "step" */
    phases_run(1);
}

static void phases_run(int wrap) {
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "gpu-phases"), 0);
    synth_file *f = synth_open(dir, "h", 50, RT0, T0);
    synth_thread(f, 1, 50);
    synth_thread(f, 2, 51);
    synth_rank(f, 0, 1);
    synth_meta(f, "trainprof.torch.steps", "iteration");
    uint32_t corr = 1;
    static const struct { const char *name; uint64_t a, b; } ph[] = {
        {"data", 0, 1}, {"forward", 1, 6}, {"backward", 6, 16}, {"optimizer", 16, 18}};
    for (uint64_t k = 0; k < 4; k++) {
        uint64_t t = T0 + k * 20 * MS;
        synth_step_begin(f, 1, t, k);
        if (wrap) synth_push(f, 1, t, "step", 0, 0);
        for (size_t i = 0; i < 4; i++) {
            synth_push(f, 1, t + ph[i].a * MS, ph[i].name, 0, 0);
            synth_pop(f, 1, t + ph[i].b * MS, 0);
        }
        if (wrap) synth_pop(f, 1, t + 18 * MS, 0);
        synth_step_end(f, 1, t + 18 * MS, k);
        synth_kernel(f, 2, t + 7 * MS, t + 15 * MS, 0, 7, corr++, "sm90_xmma_gemm_bf16");
        tprof_pl_gpu gl = {t + 17 * MS + 10 * US, 0, 0, 0, corr, 0, 50, 0};
        synth_raw(f, 2, TPROF_REC_GPU_API, TPROF_INLINE_NAME, t + 17 * MS, &gl, sizeof gl,
                  "cudaGraphLaunch", sizeof "cudaGraphLaunch");
        for (uint32_t g = 0; g < 3; g++) {
            tprof_pl_gpu kr = {t + 17 * MS + (g + 1) * 300 * US, 0, 0, 7, corr, 0, 0, 9};
            synth_raw(f, 2, TPROF_REC_GPU_KERNEL, TPROF_INLINE_NAME, t + 17 * MS + g * 300 * US + 100 * US,
                      &kr, sizeof kr, "graph_node_kernel", sizeof "graph_node_kernel");
        }
        corr++;
    }
    synth_kernel(f, 2, T0 + 100 * MS, T0 + 105 * MS, 0, 7, corr++, "cleanup_kernel");
    synth_end_of_file(f, T0 + 110 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = default_report(&run);
    const cJSON *r0 = cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "ranks"), 0);
    const cJSON *ph_j = cJSON_GetObjectItem(r0, "phases");
    assert_non_null(ph_j);
    double want[4] = {1, 5, 10, 2}, sum = 0;
    const cJSON *row;
    int seen = 0;
    cJSON_ArrayForEach(row, cJSON_GetObjectItem(ph_j, "ranges")) {
        const char *n = cJSON_GetObjectItem(row, "name")->valuestring;
        assert_string_not_equal(n, "step");
        double ms = jnum(row, "ms.mean");
        for (size_t i = 0; i < 4; i++)
            if (!strcmp(n, ph[i].name)) {
                assert_true(fabs(ms - want[i]) < 1e-9);
                seen++;
            }
        sum += ms;
    }
    assert_int_equal(seen, 4);
    /* iteration steps run to the next begin: 20 ms, of which 2 outside any phase (the last
     * step ends at its optimizer: 18 ms, nothing outside) */
    double step = jnum(ph_j, "ms.step.mean"), out = jnum(ph_j, "ms.untracked.mean");
    assert_true(fabs(sum + out - step) < 1e-9);
    assert_true(fabs(step - (20 + 20 + 18) / 3.0) < 1e-9);
    const cJSON *g = cJSON_GetObjectItem(r0, "gpu");
    assert_true(fabs(jnum(g, "cuda_graphs.launches") - 1) < 1e-9);
    assert_true(fabs(jnum(g, "cuda_graphs.kernels") - 3) < 1e-9);
    assert_true(fabs(jnum(g, "after_last_step.kernels") - 1) < 1e-9);
    assert_true(fabs(jnum(g, "after_last_step.kernel_ms") - 5) < 1e-9);
    cJSON_Delete(rep);
    text_has(&run, "phases (host: top-level ranges of the step thread, 3 measured steps");
    text_has(&run, "CUDA graphs: 1.0 graph launches per step running 3.0 kernels (3.0 kernels per launch)");
    text_has(&run, "note: 5.0 ms of GPU kernels (1 kernel) ran after the last measured step");
    tp_run_free(&run);
    synth_rmtree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_classes),
        cmocka_unit_test(test_kernel_short_names),
        cmocka_unit_test(test_kernel_short_names_apart),
        cmocka_unit_test(test_phases_graphs_after),
        cmocka_unit_test(test_stream_order_clip),
        cmocka_unit_test(test_repeated_correlation_ids),
        cmocka_unit_test(test_nested_driver_launch),
        cmocka_unit_test(test_nested_driver_launch_nested_runtime),
        cmocka_unit_test(test_stream_order_next_and_graph),
        cmocka_unit_test(test_energy_integrated_power),
        cmocka_unit_test(test_gpu_identity_not_sampled),
        cmocka_unit_test(test_gpu_identity_reversed_order),
        cmocka_unit_test(test_gpu_identity_mig),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
