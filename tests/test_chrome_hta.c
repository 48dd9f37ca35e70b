/*
 * test_chrome_hta.c — the per-rank Chrome export as Holistic Trace Analysis reads it
 * (src/export/chrome.c): tests/hta_run.h's run exported into memory and parsed with cJSON.
 * HTA itself reads the same files in the hta_export test (tests/hta/).
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

#include "analysis/model.h"
#include "export/chrome.h"
#include "hta_run.h"
#include "export_same.h"
#include "synth.h"
#include "trainprof.h"

#include "chrome_out.h"

static long long ns(double us) { return llround(us * 1000.0); }

static void assert_us(const cJSON *ev, const char *key, long long want_ns) {
    assert_int_equal(ns(num(ev, key)), want_ns);
}

/* ------------------------------------------------------------------ what HTA reads */

/* The X event of this cat and name on (pid, tid) starting at ts_ns, or fail. */
static const cJSON *find_at(const chrome_out *o, const char *cat, const char *name, double tid,
                            long long ts_ns) {
    const cJSON *ev;
    cJSON_ArrayForEach(ev, o->events) {
        if (!is(ev, "X", name) || strcmp(str(ev, "cat"), cat) || num(ev, "tid") != tid) continue;
        if (ns(num(ev, "ts")) == ts_ns) return ev;
    }
    fail_msg("no %s %s on tid %.0f at %lld ns", cat, name, tid, ts_ns);
    return NULL;
}

static size_t count_cat(const chrome_out *o, const char *cat) {
    size_t n = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, o->events) n += str(ev, "cat") && !strcmp(str(ev, "cat"), cat);
    return n;
}

/* tests/hta_run.h's run: per rank, ProfilerStep#0..2, each range projected onto the streams
 * it launched work on (first kernel start .. last kernel end), every kernel with a launch of
 * the same correlation id (the driver's cuLaunchKernel as cuda_driver), the phases as
 * cpu_op whose External id the launches inside them carry, and distributedInfo from the
 * torch.distributed groups, deviceProperties from the CUDA device metadata. */
static void test_hta_shape(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "chrome-hta"), 0);
    assert_int_equal(hta_write_run(dir), 0);
    tp_run run;
    load(dir, &run);
    for (int rank = 0; rank < 2; rank++) {
        chrome_out o = export_run(&run, rank, NULL);
        const cJSON *di = cJSON_GetObjectItemCaseSensitive(o.root, "distributedInfo");
        assert_string_equal(str(di, "backend"), "nccl");
        assert_int_equal(num(di, "rank"), rank);
        assert_int_equal(num(di, "world_size"), 2);
        assert_int_equal(num(di, "pg_count"), 2);
        const cJSON *pg = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(di, "pg_config"), 0);
        assert_string_equal(str(pg, "pg_name"), "00000000000000aa");
        assert_string_equal(str(pg, "pg_desc"), "default_pg");
        assert_string_equal(str(pg, "backend_config"), "nccl");
        assert_int_equal(num(pg, "pg_size"), 2);
        const cJSON *rk = cJSON_GetObjectItemCaseSensitive(pg, "ranks");
        assert_int_equal(cJSON_GetArraySize(rk), 2);
        assert_int_equal(cJSON_GetArrayItem(rk, 1)->valuedouble, 1);
        pg = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(di, "pg_config"), 1);
        assert_string_equal(str(pg, "pg_desc"), "undefined");
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(pg, "ranks")), 0);
        const cJSON *dp = cJSON_GetObjectItemCaseSensitive(o.root, "deviceProperties");
        assert_int_equal(cJSON_GetArraySize(dp), 1);
        const cJSON *d0 = cJSON_GetArrayItem(dp, 0);
        assert_int_equal(num(d0, "id"), 0);
        assert_string_equal(str(d0, "name"), "NVIDIA H200");
        assert_int_equal(num(d0, "numSms"), 132);
        assert_true(num(d0, "totalGlobalMem") == 150109880320.0);
        assert_int_equal(num(d0, "computeMajor"), 9);
        assert_int_equal(num(d0, "computeMinor"), 0);

        double pid = 100 + rank, s7 = 0x40000000 | 7, s20 = 0x40000000 | 20;
        assert_int_equal(count(&o, "X", NULL) - count_cat(&o, "gpu_user_annotation") -
                             count_cat(&o, "kernel") - count_cat(&o, "cuda_runtime") -
                             count_cat(&o, "cuda_driver"),
                         3 * 5); /* ProfilerStep, forward, layer0, backward, optimizer */
        assert_int_equal(count_cat(&o, "kernel"), 12);
        assert_int_equal(count_cat(&o, "cuda_runtime"), 9);
        assert_int_equal(count_cat(&o, "cuda_driver"), 3);
        assert_int_equal(count_cat(&o, "cpu_op"), 9);
        assert_int_equal(count_cat(&o, "gpu_user_annotation"), 3 * 7);
        long long fwd = (long long)HTA_FWD_US(rank) * 1000;
        for (int k = 0; k < HTA_NSTEPS; k++) {
            long long t = (long long)(HTA_T0_US + HTA_STEP_US * (unsigned)k) * 1000;
            char name[32];
            snprintf(name, sizeof name, "ProfilerStep#%d", k);
            const cJSON *st = find_at(&o, "user_annotation", name, pid, t);
            assert_us(st, "dur", 10000000);
            /* on each stream: its first kernel's start to its last kernel's end */
            assert_us(find_at(&o, "gpu_user_annotation", name, s7, t + 300000), "dur", 7500000);
            long long late = (long long)HTA_NCCL_LATE_US(rank) * 1000;
            assert_us(find_at(&o, "gpu_user_annotation", name, s20, t + 6500000 + late), "dur",
                      1000000 - late);
            assert_us(find_at(&o, "gpu_user_annotation", "forward", s7, t + 300000), "dur", fwd);
            assert_us(find_at(&o, "gpu_user_annotation", "layer0", s7, t + 300000), "dur", fwd);
            assert_us(find_at(&o, "gpu_user_annotation", "backward", s7, t + 3300000), "dur",
                      3000000);
            assert_us(find_at(&o, "gpu_user_annotation", "backward", s20, t + 6500000 + late),
                      "dur", 1000000 - late);
            assert_us(find_at(&o, "gpu_user_annotation", "optimizer", s7, t + 7300000), "dur",
                      500000);
            assert_int_equal(num(find_at(&o, "gpu_user_annotation", "forward", s7, t + 300000),
                                 "pid"), pid);
            /* launches and their kernels: one correlation id; the operator's External id */
            const cJSON *fw = find_at(&o, "cpu_op", "forward", pid, t + 100000);
            const cJSON *bw = find_at(&o, "cpu_op", "backward", pid, t + 3100000);
            find_at(&o, "user_annotation", "layer0", pid, t + 150000);
            double efw = arg(fw, "External id")->valuedouble;
            double ebw = arg(bw, "External id")->valuedouble;
            assert_true(efw > 0 && ebw > 0 && efw != ebw);
            const cJSON *l1 = find_at(&o, "cuda_runtime", "cudaLaunchKernel", pid, t + 200000);
            const cJSON *l2 = find_at(&o, "cuda_driver", "cuLaunchKernel", pid, t + 3200000);
            const cJSON *k1 = find_at(&o, "kernel", "gemm_fwd", s7, t + 300000);
            const cJSON *k2 = find_at(&o, "kernel", "gemm_bwd", s7, t + 3300000);
            assert_int_equal(arg(l1, "correlation")->valuedouble, 10 * k + 1);
            assert_int_equal(arg(k1, "correlation")->valuedouble, 10 * k + 1);
            assert_int_equal(arg(l2, "correlation")->valuedouble, 10 * k + 2);
            assert_int_equal(arg(k2, "correlation")->valuedouble, 10 * k + 2);
            assert_int_equal(arg(k2, "stream")->valuedouble, 7);
            assert_true(arg(l1, "External id")->valuedouble == efw);
            assert_true(arg(k1, "External id")->valuedouble == efw);
            assert_true(arg(l2, "External id")->valuedouble == ebw);
        }
        out_free(&o);
    }
    /* the merged trace holds what the Perfetto export holds: no GPU projections */
    chrome_out o = export_run(&run, -1, NULL);
    assert_int_equal(count_cat(&o, "gpu_user_annotation"), 0);
    assert_int_equal(count_cat(&o, "cuda_driver"), 6);
    out_free(&o);
    tp_run_free(&run);
    export_same((const char *[]){dir}, 1, NULL); /* slim: the same bytes */
    assert_int_equal(synth_rmtree(dir), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_hta_shape)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
