/*
 * test_export_slim.c — the exports of a slim run (tp_run_load_slim, memos filled by
 * tp_export_fill_memos, each rank file read again whole just before its events are written)
 * are those of the whole run, byte for byte: the merged Chrome trace, each rank's file and
 * the Perfetto trace, with no selection and with --ranks, --steps and --time (export_same.h).
 * Inputs: the two-rank GPU run HTA reads (hta_run.h); a run of four ranks on two hosts with
 * NCCL ops timed by their kernels, named steps, a rank killed inside open ranges, a node
 * sampler of two GPUs (rank 0's is the second, known from its GPU records alone) and a rank
 * sampling NVML for its host, and a helper; the diagnosis scenarios of
 * diag_scen.c (two hosts with a clock error, a late rank, memory records, ...); every rank
 * file of the fuzz corpus alone and the corpus as one run, with a torch.profiler trace. The
 * exporters' own tests (test_chrome.c, test_perfetto.c, test_chrome_hta.c) check their runs
 * the same way.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis/model.h"
#include "diag_scen.h"
#include "export_same.h"
#include "format/format.h"
#include "hta_run.h"
#include "synth.h"

static void hta(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "export-slim-hta"), 0);
    assert_int_equal(hta_write_run(dir), 0);
    const char *ops[] = {dir};
    /* 5 selections: merged and perfetto each, and the selected ranks' files */
    assert_int_equal(export_same(ops, 1, NULL), 5 * 2 + 2 + 1 + 2 + 2 + 1);
    synth_rmtree(dir);
}

/* Rank r of 4 on host h<r/2> (host 1's clock 3 ms off): named steps "train_step" with a
 * phase, a mark, a launch and its kernels, an AllReduce per step with its NCCL kernel (the
 * alignment reads its end), rank 1 killed inside open ranges, rank 2 sampling NVML. */
static void write_rank(const char *dir, int r) {
    char host[16];
    snprintf(host, sizeof host, "h%d", r / 2);
    uint64_t rt = RT0 + (r / 2 ? 3 * MS : 0);
    synth_file *f = synth_open(dir, host, 100 + r, rt, T0);
    synth_rank(f, r, 4);
    synth_meta(f, "torch.pg.0", "backend=nccl size=4 ranks=0,1,2,3");
    synth_thread(f, 1, 100 + r);
    synth_thread(f, 2, 200 + r);
    synth_thread(f, 3, 300 + r);
    for (int s = 0; s < 6; s++) {
        uint64_t b = T0 + MS + (uint64_t)s * (10 + (uint64_t)r) * MS;
        synth_push(f, 1, b, "train_step", 0, 0);
        synth_push(f, 1, b + MS / 2, "forward", 0, 0);
        synth_mark(f, 1, b + MS, "marker", 0, 0);
        synth_api(f, 1, b + MS, b + MS + 20000, 100 + (uint32_t)r, 211, 7 + (uint32_t)s,
                  "cudaLaunchKernel");
        /* rank 0's work on device 1: the node sampler's GPU 1 is its GPU */
        synth_kernel(f, 2, b + 2 * MS, b + 6 * MS, r == 0, 7, 7 + (uint32_t)s,
                     "ampere_gemm_kernel");
        synth_kernel(f, 2, b + 6 * MS, b + 7 * MS, 0, 7, 100 + (uint32_t)s,
                     "_ZN2at6native18elementwise_kernelEv");
        if (r == 1 && s == 5) break; /* killed inside "forward" of "train_step" */
        synth_pop(f, 1, b + 7 * MS, 0);
        tprof_pl_comm c;
        memset(&c, 0, sizeof c);
        c.end_ns = b + 8 * MS;
        c.bytes = 1 << 20;
        c.count = 1 << 18;
        c.comm_hash = 0xabc;
        c.seq = (uint32_t)s;
        c.nranks = 4;
        c.rank = (uint32_t)r;
        c.op = TPROF_COMM_ALLREDUCE;
        synth_comm(f, 1, b + 7 * MS + 1000, &c, NULL);
        synth_kernel(f, 2, b + 7 * MS + 5000 + (uint64_t)r * 1000, b + 8 * MS + 500000, 0, 13,
                     1000 + (uint32_t)s, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
        synth_pop(f, 1, b + 9 * MS, 0);
        if (r == 2) {
            synth_counter(f, 3, b, "gpu0.power_w", 300 + s);
            synth_counter(f, 3, b, "gpu0.util_percent", 80);
        }
        synth_flush(f);
    }
    if (r != 1) synth_end_of_file(f, T0 + 200 * MS, 0);
    assert_int_equal(synth_close(f), 0);
}

static void four_ranks(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "export-slim-four"), 0);
    for (int r = 0; r < 4; r++) write_rank(dir, r);
    /* the node sampler of host h0, and a helper of rank 0 (its parent) with a range */
    synth_file *f = synth_open(dir, "h0", 90, RT0, T0);
    synth_meta(f, "trainprof.role", "node-sampler");
    synth_meta(f, "nvml.devices", "0,1");
    synth_thread(f, 1, 90);
    for (int s = 0; s < 20; s++) {
        synth_counter(f, 1, T0 + (uint64_t)s * 5 * MS, "gpu0.power_w", 250 + s);
        synth_counter(f, 1, T0 + (uint64_t)s * 5 * MS, "gpu1.power_w", 150 + s);
    }
    synth_end_of_file(f, T0 + 200 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    synth_header h;
    memset(&h, 0, sizeof h);
    h.host = "h0";
    h.pid = 91;
    h.ppid = 100;
    h.start_realtime_ns = RT0;
    h.start_mono_ns = T0;
    f = synth_open_ex(dir, &h);
    synth_thread(f, 1, 91);
    synth_push(f, 1, T0 + MS, "data", 0, 0);
    synth_pop(f, 1, T0 + 3 * MS, 0);
    synth_end_of_file(f, T0 + 200 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    const char *ops[] = {dir};
    assert_true(export_same(ops, 1, NULL) > 20);
    assert_true(export_same(ops, 1, "train_step") > 20);
    synth_rmtree(dir);
}

static void scenarios(void **state) {
    (void)state;
    scen v[5];
    for (int i = 0; i < 5; i++) v[i] = scen_base();
    v[1].nranks = 4, v[1].hosts = 2, v[1].clock_err = 3 * (int64_t)MS, v[1].lag_rank = 2,
    v[1].lag = 2 * MS;
    v[2].short_kernels = 1, v[2].sync = 1;
    v[3].data = 2 * MS, v[3].buckets = 3;
    v[4].alloc_share = 0.95, v[4].mem_share = 0.97;
    for (int i = 0; i < 5; i++) {
        char dir[512];
        assert_int_equal(synth_tmpdir(dir, sizeof dir, "export-slim-scen"), 0);
        for (int r = 0; r < v[i].nranks; r++) scen_write_rank(dir, &v[i], r);
        const char *ops[] = {dir};
        assert_true(export_same(ops, 1, NULL) > 0);
        synth_rmtree(dir);
    }
}

static void corpus(void **state) {
    (void)state;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/rankfile", TPROF_SOURCE_DIR);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    size_t files = 0;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 6, ".tprof")) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        const char *ops[] = {path};
        export_same(ops, 1, NULL); /* a file that cannot be read at all compares nothing */
        files++;
    }
    closedir(d);
    assert_true(files >= 20);
    const char *ops[] = {dir};
    assert_true(export_same(ops, 1, NULL) > 0); /* the corpus as one run */
    char trace[8192];
    snprintf(trace, sizeof trace, "%s/tests/data/kineto/megatron_step17.pt.trace.json.gz",
             TPROF_SOURCE_DIR);
    const char *mixed[] = {trace, dir};
    assert_true(export_same(mixed, 2, NULL) > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hta),
        cmocka_unit_test(four_ranks),
        cmocka_unit_test(scenarios),
        cmocka_unit_test(corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
