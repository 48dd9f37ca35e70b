/*
 * test_diagnose.c — the run-level analyses on synthetic runs with known answers: the step breakdown
 * (GPU and CPU), clock alignment across hosts, Megatron-LM's FLOPs formula and the peak
 * table, throughput and MFU, stragglers, and every diagnosis rule once where it must fire and
 * once where it must stay silent.
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

#include "analysis/mfu.h"
#include "analysis/model.h"
#include "analysis/report.h"
#include "analysis/results.h"
#include "export/html.h"
#include "common/nvml_abi.h"
#include "format/format.h"
#include "diag_scen.h"
#include "synth.h"
#include "trainprof.h"


#define NEAR(a, b, eps) assert_true(fabs((double)(a) - (double)(b)) < (eps))

static cJSON *run_scen(const scen *sc, const char *tag, tp_report_opts *o) {
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, tag), 0);
    for (int r = 0; r < sc->nranks; r++) scen_write_rank(dir, sc, r);
    tp_run run;
    char err[256] = "";
    int rc = tp_run_load(dir, &run, err, sizeof err);
    if (rc) fprintf(stderr, "load: %s\n", err);
    assert_int_equal(rc, 0);
    tp_report_opts def;
    if (!o) {
        tp_report_opts_init(&def);
        o = &def;
    }
    tp_report tr;
    assert_int_equal(tp_report_make(&run, o, &tr), 0);
    cJSON *rep = tr.doc;
    tr.doc = NULL;
    /* the text rendering runs over every new section */
    FILE *null = fopen("/dev/null", "w");
    assert_non_null(null);
    assert_int_equal(tp_report_write_text(&tr, null, 1), 0);
    tp_report_free(&tr);
    fclose(null);
    tp_run_free(&run);
    synth_rmtree(dir);
    return rep;
}

static const cJSON *rank(const cJSON *rep, int r) { return cJSON_GetArrayItem(J(rep, "ranks"), r); }

/* ------------------------------------------------------------------ breakdown */

static void breakdown_gpu_exact(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.data = 1 * MS;
    cJSON *rep = run_scen(&sc, "bd-gpu", NULL);
    const cJSON *b = J(rank(rep, 0), "breakdown");
    assert_string_equal(J(b, "basis")->valuestring, "gpu");
    assert_string_equal(J(b, "per")->valuestring, "step");
    assert_int_equal((int)N(b, "windows"), 5);
    const cJSON *ms = J(b, "ms");
    /* step 10: data idle [0,1), compute [1,8.5), comm [5,9) => exposed [8.5,9), idle [9,10) */
    NEAR(N(J(ms, "step"), "mean"), 10, 1e-9);
    NEAR(N(J(ms, "compute"), "mean"), 7.5, 1e-9);
    NEAR(N(J(ms, "exposed_comm"), "p50"), 0.5, 1e-9);
    NEAR(N(J(ms, "overlapped_comm"), "p90"), 3.5, 1e-9);
    NEAR(N(J(ms, "memcpy_memset"), "max"), 0, 1e-9);
    NEAR(N(J(ms, "idle_data"), "mean"), 1, 1e-9);
    NEAR(N(J(ms, "idle_other"), "mean"), 1, 1e-9);
    NEAR(N(J(ms, "idle_host_sync"), "mean"), 0, 1e-9);
    NEAR(N(J(ms, "start_idle_data"), "min"), 1, 1e-9);
    NEAR(N(J(b, "share"), "busy"), 0.8, 1e-9);
    /* warm-up apart */
    assert_int_equal(cJSON_GetArraySize(J(b, "warmup")), 1);
    NEAR(N(cJSON_GetArrayItem(J(b, "warmup"), 0), "compute_ms"), 7.5, 1e-9);
    /* the same exposed time as the communication section */
    NEAR(N(J(J(J(rank(rep, 0), "communication"), "exposure"), "exposed_ms"), "mean"), 0.5, 1e-9);
    cJSON_Delete(rep);
}

static void breakdown_cpu(void **st) {
    (void)st;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "bd-cpu"), 0);
    synth_file *f = synth_open(dir, "node0", 42, RT0, T0);
    synth_rank(f, 0, 1);
    for (int i = 0; i < 4; i++) {
        uint64_t t = T0 + (uint64_t)i * 10 * MS;
        synth_push(f, 1, t, "step", 0, 0);
        synth_push(f, 1, t, "forward", 0, 0);
        synth_pop(f, 1, t + 3 * MS, 0);
        synth_push(f, 1, t + 3 * MS, "backward", 0, 0);
        synth_push(f, 1, t + 4 * MS, "inner", 0, 0); /* not top level */
        synth_pop(f, 1, t + 5 * MS, 0);
        synth_pop(f, 1, t + 8 * MS, 0);
        synth_pop(f, 1, t + 10 * MS, 0);
    }
    synth_end_of_file(f, T0 + 50 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    char err[256];
    assert_int_equal(tp_run_load(dir, &run, err, sizeof err), 0);
    cJSON *rep = tp_report_build(&run, NULL);
    const cJSON *b = J(rank(rep, 0), "breakdown");
    assert_string_equal(J(b, "basis")->valuestring, "cpu");
    const cJSON *rows = J(b, "ranges");
    assert_int_equal(cJSON_GetArraySize(rows), 2);
    assert_string_equal(J(cJSON_GetArrayItem(rows, 0), "name")->valuestring, "backward");
    NEAR(N(cJSON_GetArrayItem(rows, 0), "share"), 0.5, 1e-9);
    NEAR(N(J(cJSON_GetArrayItem(rows, 1), "ms"), "mean"), 3, 1e-9);
    NEAR(N(J(J(b, "ms"), "untracked"), "mean"), 2, 1e-9);
    NEAR(N(J(b, "share"), "untracked"), 0.2, 1e-9);
    assert_int_equal(cJSON_GetArraySize(J(b, "warmup")), 1);
    FILE *null = fopen("/dev/null", "w");
    tp_report tr;
    assert_int_equal(tp_report_make(&run, NULL, &tr), 0);
    assert_int_equal(tp_report_write_text(&tr, null, 0), 0);
    tp_report_free(&tr);
    fclose(null);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* ------------------------------------------------------------------ clocks */

static void clocks_two_hosts(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.nranks = 4;
    sc.hosts = 2;
    sc.clock_err = 3 * (int64_t)MS + 1234; /* host 1's wall clock runs 3.001234 ms ahead */
    cJSON *rep = run_scen(&sc, "clk2", NULL);
    const cJSON *c = J(rep, "clocks");
    assert_int_equal((int)N(c, "hosts"), 2);
    assert_string_equal(J(c, "status")->valuestring, "aligned");
    assert_int_equal((int)N(c, "collectives_matched"), 6);
    const cJSON *h0 = cJSON_GetArrayItem(J(c, "per_host"), 0), *h1 = cJSON_GetArrayItem(J(c, "per_host"), 1);
    assert_true(cJSON_IsTrue(J(h0, "reference")));
    NEAR(N(h0, "offset_us"), 0, 1e-9);
    NEAR(N(h1, "offset_us"), -3001.234, 1e-6);
    NEAR(N(h1, "residual_max_us"), 0, 1e-9);
    assert_int_equal((int)N(h1, "collectives_used"), 6);
    /* aligned: nobody lags */
    assert_null(finding(rep, "straggler"));
    cJSON_Delete(rep);
}

static void clocks_one_host(void **st) {
    (void)st;
    scen sc = scen_base();
    cJSON *rep = run_scen(&sc, "clk1", NULL);
    const cJSON *c = J(rep, "clocks");
    assert_int_equal((int)N(c, "hosts"), 1);
    assert_string_equal(J(c, "status")->valuestring, "single host");
    assert_null(J(c, "per_host"));
    cJSON_Delete(rep);
}

/* ------------------------------------------------------------------ FLOPs, peaks, MFU */

static void megatron_flops(void **st) {
    (void)st;
    tp_model_desc m;
    char err[128];
    assert_int_equal(tp_model_parse("layers=12,hidden=768,heads=12,seq=1024,vocab=50257", &m, err,
                                    sizeof err), 0);
    double h = 768, L = 12, s = 1024, V = 50257;
    /* plain GPT: 72 h^2 per token per layer + 6 s h core attention + 6 h V logits */
    NEAR(tp_model_flops(&m, 1), L * (72 * h * h + 6 * s * h) + 6 * h * V, 1e-3);
    NEAR(tp_model_flops(&m, 8192), 8192 * (L * (72 * h * h + 6 * s * h) + 6 * h * V), 1);
    /* GQA, gated, explicit ffn: q = 4096, k = v = 1024 */
    assert_int_equal(tp_model_parse("layers=2,hidden=4096,heads=32,groups=8,ffn=14336,gated=1,"
                                    "seq=8192,vocab=128256",
                                    &m, err, sizeof err), 0);
    double H = 4096, q = 4096, kv = 1024;
    double per_layer = 6 * (H * (q + 2 * kv) + q * H) + 6 * H * 14336 * 3;
    NEAR(tp_model_flops(&m, 1), 2 * per_layer + 6 * H * 128256 + 2 * 6 * q * 8192, 1);
    /* MoE: experts use moe_ffn x topk */
    assert_int_equal(tp_model_parse("layers=1,hidden=1024,heads=16,seq=1,vocab=1,experts=8,"
                                    "topk=2,moe_ffn=512",
                                    &m, err, sizeof err), 0);
    NEAR(tp_model_flops(&m, 1), 6 * (1024.0 * 3072 + 1024.0 * 1024) + 6 * 1024.0 * 512 * 2 * 2 +
                                    6 * 1024.0 + 6 * 1024.0,
         1e-6);
    /* defaults and errors */
    assert_int_equal(tp_model_parse("layers=1,hidden=768,heads=12,seq=8,vocab=8,gated=1", &m, err,
                                    sizeof err), 0);
    NEAR(m.ffn, 2048, 1e-9); /* int(8*768/3 / 64) * 64 */
    assert_int_equal(tp_model_parse("layers=1,hidden=768", &m, err, sizeof err),
                     TPROF_ERR_INVALID_ARG);
    assert_string_equal(err, "the model needs layers, hidden, heads, seq and vocab (> 0)");
    assert_int_equal(tp_model_parse("layers=1,bogus=2", &m, err, sizeof err), TPROF_ERR_INVALID_ARG);
    assert_int_equal(tp_model_parse("layers=x", &m, err, sizeof err), TPROF_ERR_INVALID_ARG);
    assert_string_equal(err, "layers needs a whole number from 0 to 1e9, got 'x'");
    /* without a buffer for the reason, as `run` checks a spec */
    assert_int_equal(tp_model_parse("layers=1,layers=2", &m, NULL, 0), TPROF_ERR_INVALID_ARG);
}

static void peak_table(void **st) {
    (void)st;
    const char *e, *src;
    NEAR(tp_peak_tflops("NVIDIA H100 80GB HBM3", "bf16", &e, &src), 989.5, 1e-9);
    assert_non_null(src);
    NEAR(tp_peak_tflops("NVIDIA H100 PCIe", "bf16", &e, &src), 756.5, 1e-9);
    NEAR(tp_peak_tflops("NVIDIA H200", "fp8", &e, &src), 1979, 1e-9);
    NEAR(tp_peak_tflops("NVIDIA H200 NVL", "bf16", &e, &src), 835.5, 1e-9);
    NEAR(tp_peak_tflops("NVIDIA GH200 480GB", "bf16", &e, &src), 989.5, 1e-9);
    NEAR(tp_peak_tflops("NVIDIA A100-SXM4-80GB", "tf32", &e, &src), 156, 1e-9);
    NEAR(tp_peak_tflops("NVIDIA L40S", "bf16", &e, &src), 362.05, 1e-9);
    NEAR(tp_peak_tflops("NVIDIA L4", "bf16", &e, &src), 121, 1e-9);
    NEAR(tp_peak_tflops("NVIDIA A100-SXM4-80GB", "fp8", &e, &src), 0, 1e-9); /* none */
    assert_string_equal(e, "A100");
    NEAR(tp_peak_tflops("Some GPU", "bf16", &e, &src), 0, 1e-9);
    assert_null(e);
}

static void throughput_mfu(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.meta_model = "layers=12,hidden=768,heads=12,seq=1024,vocab=50257";
    sc.meta_tokens = "8192";
    cJSON *rep = run_scen(&sc, "mfu", NULL);
    const cJSON *t = J(rep, "throughput");
    NEAR(N(t, "step_ms"), 10, 1e-9);
    assert_string_equal(J(t, "tokens_per_step_source")->valuestring, "metadata");
    NEAR(N(t, "tokens_per_s"), 8192 * 2 / 0.010, 1e-6);
    NEAR(N(t, "tokens_per_s_per_gpu"), 8192 / 0.010, 1e-6);
    assert_string_equal(J(t, "flops_source")->valuestring, "model");
    double h = 768, L = 12, s = 1024, V = 50257;
    double fl = 8192 * (L * (72 * h * h + 6 * s * h) + 6 * h * V);
    NEAR(N(t, "flops_per_step"), fl, 1);
    NEAR(N(t, "tflops_per_gpu"), fl / 0.010 / 1e12, 1e-9);
    NEAR(N(t, "peak_tflops"), 989.5, 1e-9);
    NEAR(N(t, "mfu"), fl / 0.010 / 1e12 / 989.5, 1e-12);
    cJSON_Delete(rep);
    /* options win over metadata; flops given directly; samples */
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.flops_per_step = 5e12;
    o.samples_per_step = 4;
    o.dtype = "fp8";
    rep = run_scen(&sc, "mfu2", &o);
    t = J(rep, "throughput");
    assert_string_equal(J(t, "flops_source")->valuestring, "option");
    NEAR(N(t, "tflops_per_gpu"), 500, 1e-9);
    NEAR(N(t, "samples_per_s"), 4 * 2 / 0.010, 1e-6);
    NEAR(N(t, "mfu"), 500 / 1979.0, 1e-12);
    cJSON_Delete(rep);
}

/* ------------------------------------------------------------------ rules: the clean run */

static void clean_run_is_silent(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.nranks = 4;
    cJSON *rep = run_scen(&sc, "clean", NULL);
    if (count_findings(rep)) {
        char *s = cJSON_Print(J(rep, "findings"));
        fprintf(stderr, "%s\n", s);
        free(s);
    }
    assert_int_equal(count_findings(rep), 0);
    const cJSON *r;
    cJSON_ArrayForEach(r, J(J(rep, "diagnosis"), "rules")) assert_int_equal((int)N(r, "findings"), 0);
    assert_int_equal(cJSON_GetArraySize(J(J(rep, "diagnosis"), "rules")), 12);
    assert_int_equal(cJSON_GetArraySize(J(J(rep, "stragglers"), "named")), 0);
    cJSON_Delete(rep);
}

static void rule_data_loading(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.data = 3 * MS; /* 30 % of the step, GPU idle under it */
    cJSON *rep = run_scen(&sc, "data", NULL);
    const cJSON *f = finding(rep, "data_loading");
    assert_non_null(f);
    const cJSON *ev = J(f, "evidence");
    NEAR(N(ev, "data_share"), 0.3, 1e-9);
    NEAR(N(ev, "start_idle_data_share"), 0.3, 1e-9);
    assert_int_equal(cJSON_GetArraySize(J(ev, "ranks")), 2);
    assert_non_null(J(f, "recommendation"));
    cJSON_Delete(rep);
    /* 1 ms at step start with the GPU idle: 10 % of the step, over the 5 % start-idle test */
    sc.data = 1 * MS;
    rep = run_scen(&sc, "data2", NULL);
    assert_non_null(finding(rep, "data_loading"));
    cJSON_Delete(rep);
    /* 1 ms over busy GPU time: silent, unless a sample costs more than the threshold */
    sc.data_over_busy = 1;
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.samples_per_step = 1;
    rep = run_scen(&sc, "data3", &o);
    assert_null(finding(rep, "data_loading"));
    cJSON_Delete(rep);
    o.data_ms_per_sample = 0.5;
    rep = run_scen(&sc, "data4", &o);
    f = finding(rep, "data_loading");
    assert_non_null(f);
    NEAR(N(J(f, "evidence"), "data_ms_per_sample"), 1, 1e-9);
    cJSON_Delete(rep);
}

static void rule_launch_bound(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.short_kernels = 1;
    /* short gaps are 25 % of the step: past the 20 % threshold, but not by a quarter of it
     * (diag_band): near the threshold on both ranks, not a finding */
    cJSON *rep = run_scen(&sc, "launch", NULL);
    assert_null(finding(rep, "launch_bound"));
    const cJSON *near = J(J(rep, "diagnosis"), "near");
    assert_int_equal(cJSON_GetArraySize(near), 2);
    const cJSON *nr = cJSON_GetArrayItem(near, 0);
    assert_string_equal(cJSON_GetObjectItem(nr, "id")->valuestring, "launch_bound");
    NEAR(N(nr, "value"), 0.25, 1e-9);
    NEAR(N(nr, "threshold"), 0.2, 1e-9);
    NEAR(N(nr, "finding_from"), 0.25, 1e-9);
    cJSON_Delete(rep);
    /* a threshold of 18 %: past it by more than a quarter (22.5 %): a finding, nothing near */
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.launch_idle_share = 0.18;
    rep = run_scen(&sc, "launch1", &o);
    const cJSON *f = finding(rep, "launch_bound");
    assert_non_null(f);
    NEAR(N(J(f, "evidence"), "kernel_median_us"), 10, 1e-9);
    NEAR(N(J(f, "evidence"), "idle_other_short_gaps_share"), 0.25, 1e-9);
    assert_null(J(J(rep, "diagnosis"), "near"));
    cJSON_Delete(rep);
    /* the same finding in a Megatron-LM job: advice in its arguments, only what it did not do */
    sc.cmdline = "/usr/bin/python3 pretrain_gpt.py --transformer-impl local --micro-batch-size 4 "
                 "--global-batch-size 16 --no-masked-softmax-fusion";
    rep = run_scen(&sc, "launch-meg", &o);
    f = finding(rep, "launch_bound");
    assert_non_null(f);
    assert_string_equal(cJSON_GetObjectItem(f, "megatron")->valuestring,
                        "--transformer-impl transformer_engine instead of local (fused attention, "
                        "LayerNorm and GEMM kernels: fewer, larger kernels); turn the fusions back "
                        "on (drop --no-masked-softmax-fusion); CUDA graphs (--cuda-graph-impl local "
                        "or transformer_engine) to replay the step's launches; a larger "
                        "--micro-batch-size (now 4) with fewer micro-batches per step");
    cJSON_Delete(rep);
    sc.cmdline = NULL;
    /* the same idle with long kernels is not launch-bound */
    o.launch_kernel_us = 5;
    rep = run_scen(&sc, "launch2", &o);
    assert_null(finding(rep, "launch_bound"));
    cJSON_Delete(rep);
}

static void rule_host_sync(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.sync = 1; /* the 1 ms idle tail sits under cudaStreamSynchronize */
    cJSON *rep = run_scen(&sc, "sync", NULL);
    const cJSON *b = J(rank(rep, 1), "breakdown");
    NEAR(N(J(J(b, "ms"), "idle_host_sync"), "mean"), 1, 1e-9);
    NEAR(N(J(J(b, "ms"), "idle_other"), "mean"), 0, 1e-9);
    const cJSON *f = finding(rep, "host_sync");
    assert_non_null(f);
    NEAR(N(J(f, "evidence"), "idle_host_sync_share"), 0.1, 1e-9);
    cJSON_Delete(rep);
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.host_sync_share = 0.15;
    rep = run_scen(&sc, "sync2", &o);
    assert_null(finding(rep, "host_sync"));
    cJSON_Delete(rep);
}

static void rule_memory(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.mem_share = 0.95;
    cJSON *rep = run_scen(&sc, "mem", NULL);
    const cJSON *f = finding(rep, "memory_peak");
    assert_non_null(f);
    NEAR(N(J(f, "evidence"), "peak_share"), 0.95, 1e-9);
    assert_string_equal(J(J(f, "evidence"), "source")->valuestring, "nvml");
    cJSON_Delete(rep);
    sc.mem_share = 0.89;
    rep = run_scen(&sc, "mem2", NULL);
    assert_null(finding(rep, "memory_peak"));
    cJSON_Delete(rep);
    /* the allocator's peak against the capacity of its GPU, in the GPU section itself */
    sc.alloc_share = 0.6;
    rep = run_scen(&sc, "mem3", NULL);
    const cJSON *d0 = cJSON_GetArrayItem(J(J(rank(rep, 0), "gpu"), "devices"), 0);
    NEAR(N(d0, "memory_capacity_bytes"), 85899345920.0, 1e-3);
    NEAR(N(d0, "memory_peak_share"), 0.6, 1e-9);
    assert_null(finding(rep, "memory_peak")); /* 60 %: no finding */
    cJSON_Delete(rep);
}

static void rule_straggler_many(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.nranks = 4;
    sc.lag_rank = 2;
    sc.lag = 1500 * US; /* 15 % of the step late at every collective */
    cJSON *rep = run_scen(&sc, "strag4", NULL);
    const cJSON *s = J(rep, "stragglers");
    assert_int_equal(cJSON_GetArraySize(J(s, "named")), 1);
    const cJSON *e = cJSON_GetArrayItem(J(s, "named"), 0);
    assert_int_equal((int)N(e, "rank"), 2);
    NEAR(N(e, "lag_ms"), 1.5, 1e-9);
    assert_string_equal(J(e, "by")->valuestring, "collective lag");
    assert_false(cJSON_IsTrue(J(e, "gpu_differs")));
    NEAR(N(s, "lag_threshold_ms"), 0.5, 1e-9);
    const cJSON *f = finding(rep, "straggler");
    assert_non_null(f);
    assert_int_equal((int)N(f, "rank"), 2);
    cJSON_Delete(rep);
    /* a lag under 5 % of the step: silent */
    sc.lag = 400 * US;
    rep = run_scen(&sc, "strag4b", NULL);
    assert_null(finding(rep, "straggler"));
    cJSON_Delete(rep);
}

static void rule_straggler_two(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.lag_rank = 1;
    sc.lag = 800 * US;
    sc.throttle = 1; /* both throttle alike: the GPU does not differ */
    cJSON *rep = run_scen(&sc, "strag2", NULL);
    const cJSON *f = finding(rep, "straggler");
    assert_non_null(f);
    assert_int_equal((int)N(f, "rank"), 1);
    const cJSON *e = J(J(f, "evidence"), "straggler");
    NEAR(N(e, "lag_excess_ms"), 0.8, 1e-9);
    assert_string_equal(J(J(e, "gpu"), "name")->valuestring, "NVIDIA H100 80GB HBM3");
    cJSON_Delete(rep);
    sc.lag = 300 * US;
    rep = run_scen(&sc, "strag2b", NULL);
    assert_null(finding(rep, "straggler"));
    cJSON_Delete(rep);
}

/* DDP's pattern: the late rank lags only at the first all-reduce of each step (1.5 ms, 15 %
 * of the step); the eight buckets after it start together. The median lag over all
 * collectives is 0; the lag per step (each step's largest, median over steps) names it. */
static void rule_straggler_first_bucket(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.lag_rank = 1;
    sc.lag = 1500 * US;
    sc.buckets = 8;
    cJSON *rep = run_scen(&sc, "strag-ddp", NULL);
    const cJSON *r1 = cJSON_GetArrayItem(J(J(rep, "stragglers"), "ranks"), 1);
    NEAR(N(r1, "lag_ms_median"), 0, 1e-9);
    NEAR(N(r1, "lag_ms_per_step"), 1.5, 1e-9);
    const cJSON *f = finding(rep, "straggler");
    assert_non_null(f);
    assert_int_equal((int)N(f, "rank"), 1);
    NEAR(N(J(J(f, "evidence"), "straggler"), "lag_excess_ms"), 1.5, 1e-9);
    cJSON_Delete(rep);
}

/* Two communicators of two ranks each ({0, 2} and {1, 3}): a rank's lag is behind the
 * earliest rank of its own collective only. Rank 3 starts 1.5 ms after rank 1; ranks 0 and 2
 * start together. Each rank is at the 5 collectives of its measured steps. */
static void straggler_communicators(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.nranks = 4;
    sc.groups = 2;
    sc.lag_rank = 3;
    sc.lag = 1500 * US;
    cJSON *rep = run_scen(&sc, "strag-groups", NULL);
    const cJSON *ranks = J(J(rep, "stragglers"), "ranks");
    assert_int_equal(cJSON_GetArraySize(ranks), 4);
    for (int r = 0; r < 4; r++) {
        const cJSON *e = cJSON_GetArrayItem(ranks, r);
        assert_int_equal((int)N(e, "rank"), r);
        assert_int_equal((int)N(e, "collectives"), 5);
        NEAR(N(e, "lag_ms_median"), r == 3 ? 1.5 : 0, 1e-9);
        NEAR(N(e, "lag_ms_per_step"), r == 3 ? 1.5 : 0, 1e-9);
    }
    const cJSON *f = finding(rep, "straggler");
    assert_non_null(f);
    assert_int_equal((int)N(f, "rank"), 3);
    cJSON_Delete(rep);
}

static void rule_throttling(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.throttle = 1;
    cJSON *rep = run_scen(&sc, "thr", NULL);
    const cJSON *f = finding(rep, "throttling");
    assert_non_null(f);
    assert_true(cJSON_IsTrue(J(J(f, "evidence"), "clock_throttled")));
    assert_false(cJSON_IsTrue(J(J(f, "evidence"), "power_at_limit")));
    NEAR(N(J(f, "evidence"), "sm_clock_mhz_min"), 1400, 1e-9);
    cJSON_Delete(rep);
    sc.throttle = 0;
    sc.power_at_limit = 1;
    rep = run_scen(&sc, "thr2", NULL);
    f = finding(rep, "throttling");
    assert_non_null(f);
    assert_true(cJSON_IsTrue(J(J(f, "evidence"), "power_at_limit")));
    cJSON_Delete(rep);
    /* a clock that falls without a throttle reason is not throttling */
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.power_limit_share = 1.01;
    rep = run_scen(&sc, "thr3", &o);
    assert_null(finding(rep, "throttling"));
    cJSON_Delete(rep);
}

static void rule_gpu_busy(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.end_frac = 0.6; /* 40 % idle at the end of each step */
    cJSON *rep = run_scen(&sc, "busy", NULL);
    const cJSON *f = finding(rep, "gpu_busy");
    assert_non_null(f);
    NEAR(N(J(f, "evidence"), "busy_share"), 0.6, 1e-9);
    NEAR(N(J(f, "evidence"), "idle_other_share"), 0.4, 1e-9);
    assert_null(finding(rep, "launch_bound")); /* two kernels per step */
    cJSON_Delete(rep);
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.busy_share = 0.5;
    rep = run_scen(&sc, "busy2", &o);
    assert_null(finding(rep, "gpu_busy"));
    cJSON_Delete(rep);
}

/* The text or the HTML (html != 0) of the report of scenario sc, in a malloc'd string; the
 * typed findings are checked with check() first. */
static char *render_scen(const scen *sc, const char *tag, const tp_report_opts *o, int html,
                         void (*check)(const tp_findings_result *)) {
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, tag), 0);
    for (int r = 0; r < sc->nranks; r++) scen_write_rank(dir, sc, r);
    tp_run run;
    char err[256] = "";
    assert_int_equal(tp_run_load(dir, &run, err, sizeof err), 0);
    tp_report tr;
    assert_int_equal(tp_report_make(&run, o, &tr), 0);
    if (check) check(&tr.res.findings);
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    assert_non_null(mf);
    assert_int_equal(html ? tp_html_write(&tr, o, mf) : tp_report_write_text(&tr, mf, 0), 0);
    fclose(mf);
    tp_report_free(&tr);
    tp_run_free(&run);
    synth_rmtree(dir);
    return buf;
}

static void check_near(const tp_findings_result *fs) {
    for (size_t i = 0; i < fs->n; i++) assert_string_not_equal(fs->items[i].id, "launch_bound");
    assert_int_equal(fs->nnear, 2);
    assert_string_equal(fs->near[1].id, "launch_bound");
    assert_string_equal(fs->near[1].unit, "share");
    assert_int_equal(fs->near[1].rank, 1);
    NEAR(fs->near[1].value, 0.25, 1e-9);
    NEAR(fs->diag_band, 0.25, 1e-12);
}

static void check_launch(const tp_findings_result *fs) {
    const tp_finding *f = NULL;
    for (size_t i = 0; i < fs->n; i++)
        if (!strcmp(fs->items[i].id, "launch_bound")) f = &fs->items[i];
    assert_non_null(f);
    assert_string_equal(f->id, "launch_bound");
    assert_string_equal(f->severity, "warning");
    assert_true(f->has_rank);
    assert_non_null(f->recommendation);
    /* the evidence in the document's order: kernels per step first, the ranks last */
    assert_true(f->nev >= 2);
    assert_int_equal(f->ev[f->nev - 1].kind, TP_EV_INTS);
    assert_string_equal(f->ev[f->nev - 1].key, "ranks");
    assert_int_equal(f->ev[f->nev - 1].n, 2);
    assert_int_equal(f->ev[f->nev - 1].ints[1], 1);
    int seen = 0;
    for (size_t k = 0; k < f->nev; k++)
        if (!strcmp(f->ev[k].key, "kernel_median_us")) {
            assert_int_equal(f->ev[k].kind, TP_EV_NUMBER);
            NEAR(f->ev[k].num, 10, 1e-9);
            seen = 1;
        }
    assert_true(seen);
    assert_int_equal(fs->nnear, 0);
}

/* The findings and the values near a threshold are typed results: the text and the HTML
 * render them, the HTML with its own list of the values near a threshold. */
static void findings_typed_rendered(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.short_kernels = 1; /* short gaps 25 % of the step: near the 20 % threshold */
    tp_report_opts o;
    tp_report_opts_init(&o);
    char *t = render_scen(&sc, "ntext", &o, 0, check_near);
    assert_non_null(strstr(t, "near a threshold (not findings: the shares of identical runs "
                              "move by a few points, so a finding needs a margin of 25 % of "
                              "its threshold)\n"
                              "  launch_bound, rank 0: 25.0 % (threshold 20.0 %, a finding from "
                              "25.0 %)\n"));
    free(t);
    char *h = render_scen(&sc, "nhtml", &o, 1, check_near);
    assert_non_null(strstr(h, "<ul class=\"near\">\n<li><code>launch_bound</code> rank 0: 25.0 % "
                              "(threshold 20.0 %, a finding from 25.0 %)</li>\n"
                              "<li><code>launch_bound</code> rank 1: 25.0 %"));
    free(h);
    o.launch_idle_share = 0.18; /* past it by more than a quarter: a finding */
    t = render_scen(&sc, "ftext", &o, 0, check_launch);
    assert_non_null(strstr(t, "\nfindings\n  warning: "));
    assert_non_null(strstr(t, " looks launch-bound: "));
    assert_null(strstr(t, "near a threshold"));
    free(t);
    h = render_scen(&sc, "fhtml", &o, 1, check_launch);
    assert_non_null(strstr(h, "<code>launch_bound</code> (rank "));
    assert_non_null(strstr(h, "<tr><th>kernel_median_us</th><td>10</td></tr>"));
    assert_non_null(strstr(h, "<tr><th>ranks</th><td>0, 1</td></tr></table></div>"));
    assert_null(strstr(h, "<ul class=\"near\">"));
    free(h);
}

/* The HTML's throughput section is rendered from the typed throughput, with labels and
 * units, and not dumped a second time as a generic section; a TFLOP/s past the GPU's peak is
 * shown flagged, never as a result. */
static void throughput_html(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.meta_model = "layers=12,hidden=768,heads=12,seq=1024,vocab=50257";
    sc.meta_tokens = "8192";
    tp_report_opts o;
    tp_report_opts_init(&o);
    char *h = render_scen(&sc, "tphtml", &o, 1, NULL);
    /* 8192 x 797815296 FLOPs per token (Megatron-LM's formula) in 10 ms: 653.6 TFLOP/s, 66.1 %
     * of the H100's 989.5 */
    assert_non_null(strstr(h, "<h2 id=\"throughput\">Throughput</h2>\n<table class=\"kv\" "
                              "id=\"throughput-table\"><tr><th>step time</th><td>10.00 ms (mean "
                              "over 2 ranks)</td></tr><tr><th>tokens/s</th><td>1638400 in total, "
                              "819200 per GPU (8192 per step per rank, from the rank files' "
                              "metadata)</td></tr>"));
    assert_non_null(strstr(h, "<tr><th>model FLOPs per token</th><td>0.798 GFLOP (Megatron-LM "
                              "num_floating_point_operations (megatron/training/training.py))"));
    assert_non_null(strstr(h, "<tr><th>TFLOP/s per GPU</th><td>653.6</td></tr><tr><th>MFU</th>"
                              "<td><b>66.1 %</b> of 989.5 TFLOP/s dense bf16 peak (NVIDIA H100"));
    assert_null(strstr(h, "<h2 class=\"generic\">throughput</h2>"));
    free(h);
    o.flops_per_step = 1e16; /* 1e6 TFLOP/s: past any peak */
    h = render_scen(&sc, "tphtml2", &o, 1, NULL);
    assert_non_null(strstr(h, "<tr><th>TFLOP/s per GPU</th><td><span class=\"flagged\">flagged, "
                              "not a result: 1000000.0 (limit 989.5)</span></td></tr>"));
    assert_non_null(strstr(h, "<span class=\"flagged\">flagged, not a result: 101061.1 %</span>"));
    assert_null(strstr(h, "<b>101061.1 %</b>"));
    free(h);
}

/* The text of the run-level sections is rendered from the typed results: with their
 * copies taken out of the document, the clocks, throughput, stragglers, communication,
 * processes and findings still show the run's figures. */
static void text_from_typed_results(void **st) {
    (void)st;
    scen sc = scen_base();
    sc.nranks = 4;
    sc.hosts = 2;
    sc.clock_err = 3 * (int64_t)MS + 1234;
    sc.lag_rank = 2;
    sc.lag = 1500 * US;
    sc.meta_tokens = "8192";
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "typedtext"), 0);
    for (int r = 0; r < sc.nranks; r++) scen_write_rank(dir, &sc, r);
    tp_run run;
    char err[256] = "";
    assert_int_equal(tp_run_load(dir, &run, err, sizeof err), 0);
    tp_report tr;
    assert_int_equal(tp_report_make(&run, NULL, &tr), 0);
    static const char *const keys[] = {"clocks", "throughput", "stragglers", "communication",
                                       "processes", "findings", "diagnosis"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        cJSON_DeleteItemFromObjectCaseSensitive(tr.doc, keys[i]);
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    assert_non_null(mf);
    assert_int_equal(tp_report_write_text(&tr, mf, 0), 0);
    fclose(mf);
    assert_non_null(strstr(buf, "\n  rank 2             node1:102                      1       102 "));
    assert_non_null(strstr(buf, "  comm 0xabcdef0123456789: size 4, seen on 4 rank files (world "
                                "ranks 0, 1, 2, 3); guess: world/data-parallel"));
    assert_non_null(strstr(buf, "  exposed communication: mean 3.8 % of the step over 4 ranks, "
                                "median 5.0 %, worst rank 0 (5.0 %)\n"));
    /* host 1's wall clock 3.001234 ms ahead: its offset takes it back */
    assert_non_null(strstr(buf, "clocks: 2 hosts, 6 collectives matched across ranks (6 with "
                                "GPU-timed ends); aligned\n"));
    assert_non_null(strstr(buf, "  node1                offset -3001.2 us from 6 collectives"));
    assert_non_null(strstr(buf, "throughput: step 10.00 ms (mean over 4 ranks); 3276800 tokens/s, "
                                "819200 per GPU (8192 per step per rank)\n"));
    assert_non_null(strstr(buf, "\n  2        node1                     10.00            5      "
                                "1.500      1.500      1.500     <-\n"));
    assert_non_null(strstr(buf, "  thresholds: lag 0.500 ms, step 0.500 ms\n"));
    assert_non_null(strstr(buf, "\nfindings\n  warning: rank 2 (host node1, GPU 0 NVIDIA H100 "
                                "80GB HBM3) is a straggler (collective lag)"));
    free(buf);
    tp_report_free(&tr);
    tp_run_free(&run);
    synth_rmtree(dir);
}

static void rule_exposed_comm_registered(void **st) {
    (void)st;
    scen sc = scen_base(); /* comm [5,9) beside compute [1,8.5): 0.5 ms = 5 % exposed */
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.comm_warn_share = 0.04;
    cJSON *rep = run_scen(&sc, "exp", &o);
    const cJSON *f = finding(rep, "exposed_communication");
    assert_non_null(f);
    assert_non_null(J(f, "recommendation"));
    const cJSON *r;
    int seen = 0;
    cJSON_ArrayForEach(r, J(J(rep, "diagnosis"), "rules")) {
        if (strcmp(J(r, "id")->valuestring, "exposed_communication")) continue;
        seen = 1;
        assert_int_equal((int)N(r, "findings"), 1);
    }
    assert_true(seen);
    cJSON_Delete(rep);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(breakdown_gpu_exact),
        cmocka_unit_test(breakdown_cpu),
        cmocka_unit_test(clocks_two_hosts),
        cmocka_unit_test(clocks_one_host),
        cmocka_unit_test(megatron_flops),
        cmocka_unit_test(peak_table),
        cmocka_unit_test(throughput_mfu),
        cmocka_unit_test(clean_run_is_silent),
        cmocka_unit_test(rule_data_loading),
        cmocka_unit_test(rule_launch_bound),
        cmocka_unit_test(rule_host_sync),
        cmocka_unit_test(rule_memory),
        cmocka_unit_test(rule_straggler_many),
        cmocka_unit_test(rule_straggler_two),
        cmocka_unit_test(rule_straggler_first_bucket),
        cmocka_unit_test(straggler_communicators),
        cmocka_unit_test(rule_throttling),
        cmocka_unit_test(rule_gpu_busy),
        cmocka_unit_test(rule_exposed_comm_registered),
        cmocka_unit_test(findings_typed_rendered),
        cmocka_unit_test(throughput_html),
        cmocka_unit_test(text_from_typed_results),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
