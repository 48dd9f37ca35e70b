/*
 * test_kineto.c — torch.profiler / Kineto traces read as runs (analysis/kineto.h), with known
 * answers:
 *  - a trace written here (three ProfilerStep#N of known lengths, known kernels launched by
 *    cudaLaunchKernel with their correlation ids, one NCCL all-reduce per step) gives exactly
 *    the step times, kernel time per step, GPU busy share and communication time it holds;
 *  - trainprof's own per-rank export of a run, read back, gives the same step count, kernel
 *    time per step and top kernels as the run's own report;
 *  - a malformed or truncated trace fails the load with one line naming the file and what is
 *    wrong;
 *  - a real trace: one step (ProfilerStep#17) of Megatron-LM's own torch.profiler trace
 *    (--use-pytorch-profiler, 1 H200, the configuration of bench/megatron_reference.sh; kept
 *    in tests/data/kineto with the step's runtime calls, CPU operators and the kernels they
 *    launched) gives its 1,699 kernels and their 52.944977 ms exactly, and its step time.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cjson/cJSON.h>

#include "analysis/comm.h"
#include "analysis/model.h"
#include "analysis/report.h"
#include "analysis/steps.h"
#include "export/chrome.h"
#include "format/format.h"
#include "synth.h"
#include "trainprof.h"
#include "chrome_out.h"

static const uint64_t T0 = 1000000000ull, US = 1000ull, MS = 1000000ull;
#define RT0 1700000000000000000ull

static tp_report make(const tp_run *run, int warmup) {
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.warmup = warmup;
    tp_report r;
    assert_int_equal(tp_report_make(run, &o, &r), TPROF_OK);
    return r;
}

/* ------------------------------------------------------------------ a known trace */

/* Step k (0, 1, 2) starts at 1000.250 us + k x 20 ms and lasts 10, 12, 14 ms (the
 * nanosecond fraction must survive). In each: gemm 2 ms, then elementwise 1 ms, on stream 7,
 * each launched 50 us before it starts; an NCCL all-reduce of 1 Mi floats (4 MiB) for
 * 1.5 ms on stream 20, then an idle rest. */
static void write_trace(const char *path, int rank) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "{\"schemaVersion\": 1, \"deviceProperties\": [{\"id\": 0}],\n"
            "\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": %d, \"world_size\": 2},\n"
            "\"traceEvents\": [\n",
            rank);
    static const double len_ms[3] = {10, 12, 14};
    unsigned corr = 100;
    for (int k = 0; k < 3; k++) {
        double s = 1000.250 + k * 20000.0; /* us */
        fprintf(f,
                "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#%d\","
                " \"pid\": 77, \"tid\": 78, \"ts\": %.3f, \"dur\": %.3f},\n",
                k + 5, s, len_ms[k] * 1000);
        struct {
            const char *name;
            double at, dur;
            unsigned stream;
        } w[3] = {
            {"ampere_sgemm_128x64_nn", 100, 2000, 7},
            {"void at::native::vectorized_elementwise_kernel<4>()", 2200, 1000, 7},
            {"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
             3300, 1500, 20}};
        for (int j = 0; j < 3; j++, corr++) {
            fprintf(f,
                    "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\","
                    " \"pid\": 77, \"tid\": 78, \"ts\": %.3f, \"dur\": 5,"
                    " \"args\": {\"cbid\": 211, \"correlation\": %u}},\n",
                    s + w[j].at - 50, corr);
            fprintf(f,
                    "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0,"
                    " \"tid\": %u, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"device\": 0,"
                    " \"stream\": %u, \"correlation\": %u",
                    w[j].name, w[j].stream, s + w[j].at, w[j].dur, w[j].stream, corr);
            if (j == 2)
                fprintf(f, ", \"Collective name\": \"allreduce\", \"In msg nelems\": 1048576,"
                           " \"Out msg nelems\": 1048576, \"dtype\": \"Float\","
                           " \"Group size\": 2, \"Process Group Name\": \"0\"");
            fprintf(f, "}},\n");
            fprintf(f,
                    "{\"ph\": \"s\", \"cat\": \"ac2g\", \"name\": \"launch\", \"id\": %u,"
                    " \"pid\": 77, \"tid\": 78, \"ts\": %.3f},\n",
                    corr, s + w[j].at - 50);
        }
    }
    fprintf(f, "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 77, \"tid\": 78,"
               " \"args\": {\"name\": \"python\"}}\n],\n"
               "\"traceName\": \"t\", \"displayTimeUnit\": \"ms\","
               " \"baseTimeNanoseconds\": 1700000000000000000}\n");
    assert_int_equal(fclose(f), 0);
}

static void test_known_trace(void **state) {
    (void)state;
    char dir[256], a[300], b[300];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "kineto"), 0);
    snprintf(a, sizeof a, "%s/host-a_77.1.pt.trace.json", dir);
    snprintf(b, sizeof b, "%s/host-a_78.1.pt.trace.json", dir);
    write_trace(a, 0);
    write_trace(b, 1);
    tp_run run;
    char err[512];
    assert_int_equal(tp_run_load(dir, &run, err, sizeof err), TPROF_OK);
    assert_int_equal(run.nprocs, 2);
    const tp_process *p = &run.procs[0];
    assert_int_equal(p->rank, 0);
    assert_int_equal(run.procs[1].rank, 1);
    assert_int_equal(p->world_size, 2);
    assert_string_equal(p->hdr.host, "host-a");
    assert_int_equal(p->ngpu, 9);
    assert_int_equal(p->napi, 9);
    assert_int_equal(p->ncomm, 3);

    /* the steps, to the nanosecond; the earliest event (the first step) is the origin */
    tp_steps st;
    assert_int_equal(tp_find_steps(p, NULL, 0, &st), TPROF_OK);
    assert_int_equal(st.source, TP_STEPS_PROFILER);
    assert_int_equal(st.nsteps, 3);
    assert_int_equal(st.steps[0].start, T0);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(st.steps[k].start, T0 + (uint64_t)k * 20 * MS);
        assert_int_equal(st.steps[k].end - st.steps[k].start, (10 + 2 * (uint64_t)k) * MS);
    }
    tp_steps_free(&st);
    /* the wall clock: baseTimeNanoseconds + the first event's 1000.250 us */
    assert_int_equal(tp_to_realtime(p, T0), RT0 + 1000250);

    tp_report r = make(&run, 0);
    assert_int_equal(r.res.nranks, 2);
    const tp_rank_result *rk = &r.res.ranks[0];
    assert_int_equal(rk->steps.count, 3);
    assert_true(fabs(rk->steps.mean_ms - 12.0) < 1e-9);
    const tp_gpu_result *g = &rk->gpu;
    assert_true(g->present && g->per_step);
    assert_int_equal(g->ndevices, 1);
    /* 2 + 1 + 1.5 ms of kernels per step, busy 4.5 of a mean 12 ms step */
    assert_true(fabs(g->devices[0].kernel_ms - 4.5) < 1e-9);
    assert_true(fabs(g->devices[0].kernels - 3.0) < 1e-9);
    assert_true(fabs(g->devices[0].busy_share - 4.5 * 3 / 36.0) < 1e-9);
    assert_true(fabs(g->devices[0].kernel_ms_by_class[TP_KC_GEMM] - 2.0) < 1e-9);
    assert_true(fabs(g->devices[0].kernel_ms_by_class[TP_KC_COMM] - 1.5) < 1e-9);
    assert_int_equal(g->nkernels, 3);
    assert_string_equal(g->kernels[0].name, "ampere_sgemm_128x64_nn");
    /* communication: 3 all-reduces of 4 MiB, each timed by its kernel, 1.5 ms */
    const tp_comm_result *c = &rk->comm;
    assert_true(c->present && c->resolved);
    assert_int_equal(c->nccl_ops, 3);
    assert_int_equal(c->nrows, 1);
    assert_int_equal(c->rows[0].op, TPROF_COMM_ALLREDUCE);
    assert_int_equal(c->rows[0].count, 3);
    assert_int_equal(c->rows[0].bytes, 3ull * 4 * 1048576);
    assert_int_equal(c->rows[0].time_ns, 3 * 1500 * US);
    assert_int_equal(c->rows[0].src[TP_COMM_TIME_KERNEL], 3);
    assert_int_equal(c->rows[0].nranks, 2);
    /* the run says where it came from */
    assert_string_equal(r.res.run.source, "torch.profiler");
    assert_int_equal(r.res.run.source_files, 2);
    tp_report_free(&r);
    tp_run_free(&run);

    /* the same trace gzip-compressed, named as Megatron-LM names a rank's file, loads alike */
    char gz[300];
    snprintf(gz, sizeof gz, "%s/rank-1.json.gz", dir);
    FILE *in = fopen(a, "rb");
    gzFile out = gzopen(gz, "wb");
    assert_true(in && out);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(gzwrite(out, buf, (unsigned)n), (int)n);
    fclose(in);
    assert_int_equal(gzclose(out), Z_OK);
    assert_int_equal(tp_run_load(gz, &run, err, sizeof err), TPROF_OK);
    assert_int_equal(run.nprocs, 1);
    assert_int_equal(run.procs[0].ngpu, 9);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* ------------------------------------------------------------------ round trip */

static void write_run(const char *dir) {
    synth_file *f = synth_open(dir, "h", 40, RT0, T0);
    synth_thread(f, 1, 40);
    synth_rank(f, 0, 1);
    static const char *const names[3] = {"sm90_xmma_gemm_bf16", "flash_fwd_kernel",
                                         "vectorized_elementwise_kernel"};
    uint32_t corr = 1;
    for (uint64_t k = 0; k < 4; k++) {
        uint64_t s = T0 + k * 10 * MS;
        synth_step_begin(f, 1, s, k);
        for (int j = 0; j < 3; j++, corr++) {
            uint64_t at = s + (uint64_t)(1 + 2 * j) * MS + 123; /* ns that must survive */
            tprof_pl_gpu launch = {at - 40 * US, 0, 0, 0, corr, 211, 40, 0};
            synth_raw(f, 1, TPROF_REC_GPU_API, TPROF_INLINE_NAME, at - 50 * US, &launch,
                      sizeof launch, "cudaLaunchKernel", sizeof "cudaLaunchKernel");
            synth_kernel(f, 1, at, at + (uint64_t)(j + 1) * 300 * US + 7, 0, 7, corr, names[j]);
        }
        synth_step_end(f, 1, s + 9 * MS, k);
    }
    synth_end_of_file(f, T0 + 50 * MS, 0);
    assert_int_equal(synth_close(f), 0);
}

static void test_megatron_trace(void **state) {
    (void)state;
    tp_run run;
    char err[512];
    const char *path = TPROF_SOURCE_DIR "/tests/data/kineto/megatron_step17.pt.trace.json.gz";
    assert_int_equal(tp_run_load(path, &run, err, sizeof err), TPROF_OK);
    assert_int_equal(run.nprocs, 1);
    tp_report r = make(&run, 0);
    const tp_rank_result *rk = &r.res.ranks[0];
    assert_int_equal(rk->steps.count, 1);
    assert_true(fabs(rk->steps.mean_ms - 202.14745) < 1e-6);
    const tp_gpu_result *g = &rk->gpu;
    assert_true(g->present && g->per_step);
    assert_int_equal(g->ndevices, 1);
    /* the sum of the trace's 1,699 "kernel" events' dur (us), computed from the file */
    assert_true(fabs(g->devices[0].kernel_ms - 52.944977) < 1e-6);
    assert_true(fabs(g->devices[0].kernels - 1699.0) < 1e-9);
    tp_report_free(&r);
    /* exported per rank again, as HTA reads torch.profiler's: its 9,496 operators stay
     * "cpu_op" (HTA's critical path nodes), holding the launches made inside them ("External
     * id"), and its 48 annotations stay "user_annotation" */
    chrome_out o = export_run(&run, 0, NULL);
    size_t ops = 0, notes = 0, linked = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, o.events) {
        const char *cat = str(ev, "cat");
        if (!cat || !is(ev, "X", NULL)) continue;
        ops += !strcmp(cat, "cpu_op");
        notes += !strcmp(cat, "user_annotation");
        linked += !strcmp(cat, "cuda_runtime") && arg(ev, "External id");
    }
    assert_int_equal(ops, 9496);
    assert_int_equal(notes, 48);
    assert_true(linked > 3000); /* 3,325 of the 3,718 runtime calls lie inside an operator */
    out_free(&o);
    tp_run_free(&run);
}

static void test_round_trip(void **state) {
    (void)state;
    char dir[256], out[300], path[400];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "kineto-rt"), 0);
    write_run(dir);
    tp_run run;
    char err[512];
    assert_int_equal(tp_run_load(dir, &run, err, sizeof err), TPROF_OK);
    tp_report ra = make(&run, 1);
    snprintf(out, sizeof out, "%s/traces", dir);
    assert_int_equal(mkdir(out, 0700), 0);
    snprintf(path, sizeof path, "%s/rank0.pt.trace.json", out);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    tp_export_opts eo = {NULL, 1, NULL};
    assert_int_equal(tp_export_chrome_rank(&run, 0, f, &eo), TPROF_OK);
    assert_int_equal(fclose(f), 0);

    tp_run back;
    assert_int_equal(tp_run_load(out, &back, err, sizeof err), TPROF_OK);
    tp_report rb = make(&back, 1);
    const tp_rank_result *a = &ra.res.ranks[0], *b = &rb.res.ranks[0];
    assert_int_equal(a->steps.count, 4);
    assert_int_equal(b->steps.count, a->steps.count);
    assert_true(fabs(b->steps.mean_ms - a->steps.mean_ms) < 1e-9);
    /* kernel time per step: (300 + 600 + 900) us + 21 ns, both ways */
    assert_true(fabs(a->gpu.devices[0].kernel_ms - 1.800021) < 1e-9);
    assert_true(fabs(b->gpu.devices[0].kernel_ms - a->gpu.devices[0].kernel_ms) < 1e-9);
    assert_int_equal(b->gpu.nkernels, a->gpu.nkernels);
    for (size_t i = 0; i < a->gpu.nkernels; i++) {
        assert_string_equal(b->gpu.kernels[i].name, a->gpu.kernels[i].name);
        assert_true(fabs(b->gpu.kernels[i].total_ms - a->gpu.kernels[i].total_ms) < 1e-9);
    }
    assert_string_equal(b->gpu.kernels[0].name, "vectorized_elementwise_kernel");
    tp_report_free(&ra);
    tp_report_free(&rb);
    tp_run_free(&run);
    tp_run_free(&back);
    synth_rmtree(dir);
}

/* ------------------------------------------------------------------ damaged traces */

static void expect_error(const char *dir, const char *name, const void *data, size_t n,
                         const char *want) {
    char path[400], line[600], err[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    tp_run run;
    assert_int_equal(tp_run_load(path, &run, err, sizeof err), TPROF_ERR_FORMAT);
    snprintf(line, sizeof line, "%s: %s", path, want);
    assert_string_equal(err, line);
    tp_run_free(&run);
    remove(path);
}

static void test_damaged(void **state) {
    (void)state;
    char dir[256];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "kineto-bad"), 0);
#define S(x) x, sizeof x - 1
    expect_error(dir, "a.json", S("{\"traceEvents\": [{\"ph\": \"X\", \"ts\": 1,}]}"),
                 "traceEvents[0] is not valid JSON (near byte 38)");
    expect_error(dir, "b.json", S("{\"traceEvents\": [{\"ph\": \"X\", \"ts\": 1, \"dur\": 2},"),
                 "the text ends inside \"traceEvents\": truncated?");
    expect_error(dir, "c.json", S("{\"schemaVersion\": 1, \"x\": []}"),
                 "no \"traceEvents\" array: not a torch.profiler trace");
    expect_error(dir, "d.json", S("{\"traceEvents\": [{\"ph\": \"X\", \"ts\": \"1\"}]}"),
                 "traceEvents[0].ts is not a number");
    expect_error(dir, "e.json", S("{\"traceEvents\": {}}"), "\"traceEvents\" is not an array");
    expect_error(dir, "f.json", S("[1, 2]"),
                 "not a JSON object (a torch.profiler trace starts with '{')");
    expect_error(dir, "g.json", S("{\"traceEvents\": [{\"ph\": \"X\", \"ts\": 1, \"args\": 3}]}"),
                 "traceEvents[0].args is not an object");
    /* a gzip stream cut short */
    char gzpath[400];
    snprintf(gzpath, sizeof gzpath, "%s/whole.json.gz", dir);
    gzFile z = gzopen(gzpath, "wb");
    assert_non_null(z);
    gzprintf(z, "{\"traceEvents\": [");
    for (int i = 0; i < 2000; i++)
        gzprintf(z,
                 "%s{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"op%d\", \"pid\": 1,"
                 " \"tid\": 1, \"ts\": %d.125, \"dur\": 3}",
                 i ? "," : "", i, i * 7);
    gzprintf(z, "]}");
    assert_int_equal(gzclose(z), Z_OK);
    FILE *f = fopen(gzpath, "rb");
    static unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(n > 2000 && n < sizeof buf);
    tp_run run;
    char err[600];
    assert_int_equal(tp_run_load(gzpath, &run, err, sizeof err), TPROF_OK);
    assert_int_equal(run.procs[0].threads[0].nranges, 2000);
    tp_run_free(&run);
    snprintf(gzpath, sizeof gzpath, "%s/cut.json.gz", dir);
    f = fopen(gzpath, "wb");
    assert_int_equal(fwrite(buf, 1, n / 2, f), n / 2);
    fclose(f);
    assert_int_equal(tp_run_load(gzpath, &run, err, sizeof err), TPROF_ERR_FORMAT);
    char want[500];
    snprintf(want, sizeof want, "%s: truncated gzip data", gzpath);
    if (strncmp(err, want, strlen(want))) fail_msg("got: %s", err);
    tp_run_free(&run);
#undef S
    synth_rmtree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_trace),
        cmocka_unit_test(test_megatron_trace),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_damaged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
