/*
 * test_comm_groups.c — the communication analysis (src/analysis/comm.c) across ranks and
 * communicators, on synthetic runs with known answers: torch process groups named by their
 * member ranks, communicators shared by rank files, ranks that differ and the finding
 * thresholds, runs without communication, an MPI CPU job, and the Chrome export's track
 * per communicator.
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

#include "analysis/comm.h"
#include "analysis/model.h"
#include "analysis/report.h"
#include "report_text.h"
#include "export/chrome.h"
#include "format/format.h"
#include "comm_synth.h"
#include "synth.h"
#include "trainprof.h"

/* World of 4 as 2 x 2: tensor-parallel NCCL communicators 0x10 {0,1} and 0x11 {2,3},
 * data-parallel 0x20 {0,2} and 0x21 {1,3}, all of size 2. Each rank file carries
 * trainprof.torch's descriptions of its two groups. The per-rank match by size is ambiguous
 * (two groups of 2), so only the run-level match by member ranks names them. */
static void test_torch_group_by_members(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "comm-torchpg"), 0);
    for (int rk = 0; rk < 4; rk++) {
        synth_file *f = synth_open(dir, "h", 40 + (uint32_t)rk, RT0, T0);
        synth_rank(f, rk, 4);
        uint64_t tp = 0x10u + (uint64_t)(rk / 2), dp = 0x20u + (uint64_t)(rk % 2);
        char key[40], val[64];
        snprintf(key, sizeof key, "torch.pg.%016llx", 0xaa00ull + tp);
        snprintf(val, sizeof val, "backend=nccl size=2 ranks=%d,%d", rk / 2 * 2, rk / 2 * 2 + 1);
        synth_meta(f, key, val);
        snprintf(key, sizeof key, "torch.pg.%016llx", 0xaa00ull + dp);
        /* first a gloo twin of the data-parallel group (Megatron builds one): same members,
         * not the NCCL communicator's group */
        snprintf(key, sizeof key, "torch.pg.%016llx", 0xbb00ull + dp);
        snprintf(val, sizeof val, "backend=gloo size=2 ranks=%d,%d", rk % 2, rk % 2 + 2);
        synth_meta(f, key, val);
        /* a default group's backend as recent torch writes it, members in another order */
        snprintf(val, sizeof val, "backend=cpu:gloo,cuda:nccl size=2 ranks=%d,%d", rk % 2 + 2, rk % 2);
        synth_meta(f, key, val);
        steps(f, 1, 100 * MS);
        tprof_pl_comm c = comm(TPROF_COMM_ALLREDUCE, tp, 2, (uint32_t)(rk % 2), MiB, T0 + 100 * US);
        synth_comm(f, 1, T0, &c, NULL);
        c = comm(TPROF_COMM_ALLREDUCE, dp, 2, (uint32_t)(rk / 2), MiB, T0 + MS + 100 * US);
        synth_comm(f, 1, T0 + MS, &c, NULL);
        synth_end_of_file(f, T0 + 100 * MS, 0);
        assert_int_equal(synth_close(f), 0);
    }
    tp_run run;
    cJSON *rep = report(dir, &run);
    static const struct {
        const char *id, *group;
    } want[] = {{"0x0000000000000010", "backend=nccl size=2 ranks=0,1"},
                {"0x0000000000000011", "backend=nccl size=2 ranks=2,3"},
                {"0x0000000000000020", "backend=cpu:gloo,cuda:nccl size=2 ranks=2,0"},
                {"0x0000000000000021", "backend=cpu:gloo,cuda:nccl size=2 ranks=3,1"}};
    for (size_t i = 0; i < 4; i++) {
        cJSON *x = run_comm(rep, want[i].id);
        assert_non_null(x);
        assert_string_equal(str(x, "torch_group"), want[i].group);
    }
    /* per rank: two groups of size 2, so the size alone names none */
    cJSON *rc;
    cJSON_ArrayForEach(rc, cJSON_GetObjectItem(rank_comm(rep, 0), "communicators"))
        assert_null(cJSON_GetObjectItem(rc, "torch_group"));
    char *text = report_text_warmup(&run, 0);
    assert_non_null(strstr(text, "torch group \"backend=cpu:gloo,cuda:nccl size=2 ranks=3,1\""));
    free(text);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* ------------------------------------------------------------------ shared communicators */

/* World of 4; two rank files (ranks 0 and 1) show communicator 0x5 of size 2 (comm ranks 0
 * and 1: consecutive world ranks, all members seen) and 0x6 of size 4 (the world). On 0x5,
 * rank 0's AllReduce of 1 MiB takes 10 ms and rank 1's 30 ms: mean 20 ms; algbw =
 * 2 x 1 MiB / 40 ms = 0.0524288 GB/s, busbw the same (2(2-1)/2 = 1). Each step of 100 ms:
 * rank 0 has 10 ms exposed (kernel 0-10 ms, no compute), rank 1 30 ms. */
static void test_shared_communicator(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "comm-shared"), 0);
    for (int rk = 0; rk < 2; rk++) {
        synth_file *f = synth_open(dir, "h", 20 + rk, RT0, T0);
        synth_rank(f, rk, 4);
        steps(f, 1, 100 * MS);
        uint64_t d = rk ? 30 * MS : 10 * MS;
        tprof_pl_comm c = comm(TPROF_COMM_ALLREDUCE, 0x5, 2, (uint32_t)rk, MiB, T0 + 100 * US);
        with_gpu(&c, T0 + MS, T0 + MS + d);
        synth_comm(f, 1, T0, &c, NULL);
        synth_kernel(f, 2, T0 + MS, T0 + MS + d, 0, 9, 0, K_AR);
        c = comm(TPROF_COMM_ALLREDUCE, 0x6, 4, (uint32_t)rk, 4, T0 + 50 * MS + 100 * US);
        with_gpu(&c, T0 + 50 * MS, T0 + 50 * MS); /* 0 ns: no time, no bandwidth */
        synth_comm(f, 1, T0 + 50 * MS, &c, NULL);
        synth_end_of_file(f, T0 + 100 * MS, 0);
        assert_int_equal(synth_close(f), 0);
    }
    tp_run run;
    cJSON *rep = report(dir, &run);
    cJSON *x = run_comm(rep, "0x0000000000000005");
    NEAR(num(x, "size"), 2);
    NEAR(num(x, "ranks_seen"), 2);
    cJSON *m = cJSON_GetObjectItem(x, "members");
    assert_int_equal(cJSON_GetArraySize(m), 2);
    NEAR(num(cJSON_GetArrayItem(m, 0), "rank"), 0);
    NEAR(num(cJSON_GetArrayItem(m, 0), "comm_rank"), 0);
    NEAR(num(cJSON_GetArrayItem(m, 1), "rank"), 1);
    NEAR(num(cJSON_GetArrayItem(m, 1), "comm_rank"), 1);
    assert_string_equal(str(x, "role_guess"), "tensor-parallel");
    cJSON *o = cJSON_GetArrayItem(cJSON_GetObjectItem(x, "ops"), 0);
    NEAR(num(o, "ranks"), 2);
    NEAR(num(o, "count_per_rank"), 1);
    NEAR(num(o, "bytes_per_rank"), (double)MiB);
    NEAR(num(o, "mean_ms"), 20.0);
    NEAR(num(o, "algbw_gbs"), 0.0524288);
    NEAR(num(o, "busbw_gbs"), 0.0524288);
    assert_string_equal(str(run_comm(rep, "0x0000000000000006"), "role_guess"), "world/data-parallel");
    assert_null(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(run_comm(rep, "0x0000000000000006"), "ops"), 0), "algbw_gbs"));
    /* exposure across ranks: 10 % and 30 %: mean 20 %, median (nearest rank) 10 %, worst 1 */
    cJSON *xe = cJSON_GetObjectItem(cJSON_GetObjectItem(rep, "communication"), "exposure");
    NEAR(num(xe, "mean_exposed_share"), 0.2);
    NEAR(num(xe, "median_exposed_share"), 0.1);
    NEAR(num(xe, "worst_rank"), 1);
    NEAR(num(xe, "worst_exposed_share"), 0.3);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(xe, "ranks")), 2);
    /* 30 % is not above 30 %: a warning on rank 1, one rank over 10 % */
    cJSON *fd = cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "findings"), 0);
    assert_string_equal(str(fd, "severity"), "warning");
    NEAR(num(fd, "rank"), 1);
    NEAR(num(cJSON_GetObjectItem(fd, "evidence"), "ranks_over_warning"), 1);
    NEAR(num(cJSON_GetObjectItem(fd, "evidence"), "mean_exposed_share"), 0.2);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* ------------------------------------------------------------------ thresholds */

/* Rank files that disagree (rank 1's cut short after one of three AllReduces on 0x7): the
 * run-level row says the most any rank saw and the fewest. */
static void test_ranks_differ(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "comm-differ"), 0);
    for (int rk = 0; rk < 2; rk++) {
        synth_file *f = synth_open(dir, "h", 40 + rk, RT0, T0);
        synth_rank(f, rk, 2);
        steps(f, 1, 100 * MS);
        for (int k = 0; k < (rk ? 1 : 3); k++) {
            tprof_pl_comm c = comm(TPROF_COMM_ALLREDUCE, 0x7, 2, (uint32_t)rk, MiB,
                                   T0 + (uint64_t)k * 10 * MS + 100 * US);
            synth_comm(f, 1, T0 + (uint64_t)k * 10 * MS, &c, NULL);
        }
        synth_end_of_file(f, T0 + 100 * MS, 0);
        assert_int_equal(synth_close(f), 0);
    }
    tp_run run;
    cJSON *rep = report(dir, &run);
    cJSON *o = cJSON_GetArrayItem(cJSON_GetObjectItem(run_comm(rep, "0x0000000000000007"), "ops"), 0);
    NEAR(num(o, "count_per_rank"), 3);
    NEAR(num(o, "count_min_rank"), 1);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* A 100 ms step with only an NCCL kernel of `ms` (no compute): that share is exposed. */
static cJSON *finding_for(uint64_t ms, tp_run *run, char *dir, size_t n) {
    assert_int_equal(synth_tmpdir(dir, n, "comm-thr"), 0);
    synth_file *f = synth_open(dir, "h", 30, RT0, T0);
    synth_rank(f, 0, 1);
    steps(f, 1, 100 * MS);
    synth_kernel(f, 2, T0 + 10 * MS, T0 + (10 + ms) * MS, 0, 9, 0, K_AR);
    synth_end_of_file(f, T0 + 100 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    cJSON *rep = report(dir, run);
    NEAR(num(cJSON_GetObjectItem(rank_comm(rep, 0), "exposure"), "exposed_share"), (double)ms / 100.0);
    return rep;
}

static void test_finding_thresholds(void **state) {
    (void)state;
    static const struct { uint64_t ms; const char *severity; } cases[] = {
        {9, NULL}, {15, "warning"}, {35, "critical"}};
    for (size_t i = 0; i < 3; i++) {
        char dir[512];
        tp_run run;
        cJSON *rep = finding_for(cases[i].ms, &run, dir, sizeof dir);
        cJSON *fs = cJSON_GetObjectItem(rep, "findings");
        assert_true(cJSON_IsArray(fs));
        char *t = report_text_warmup(&run, 0);
        if (!cases[i].severity) {
            assert_int_equal(cJSON_GetArraySize(fs), 0);
            assert_null(strstr(t, "findings"));
        } else {
            assert_int_equal(cJSON_GetArraySize(fs), 1);
            cJSON *fd = cJSON_GetArrayItem(fs, 0);
            assert_string_equal(str(fd, "severity"), cases[i].severity);
            NEAR(num(cJSON_GetObjectItem(fd, "evidence"), "exposed_share"), (double)cases[i].ms / 100.0);
            NEAR(num(cJSON_GetObjectItem(fd, "evidence"), "exposed_ms"), (double)cases[i].ms);
            char want[64];
            snprintf(want, sizeof want, "%s: exposed communication is %.1f %%", cases[i].severity,
                     (double)cases[i].ms);
            assert_non_null(strstr(t, want));
        }
        free(t);
        cJSON_Delete(rep);
        tp_run_free(&run);
        synth_rmtree(dir);
    }
}

/* ------------------------------------------------------------------ nothing, and CPU jobs */

/* A GPU job without any communication, and a process with nothing at all: the section says
 * none, no finding, no crash, text and Chrome export fine. */
static void test_empty(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = rank_file(dir, sizeof dir, "comm-empty", 40, 0, 2);
    steps(f, 2, 10 * MS);
    synth_kernel(f, 2, T0 + MS, T0 + 5 * MS, 0, 7, 0, K_GEMM);
    synth_end_of_file(f, T0 + 20 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    f = synth_open(dir, "h", 41, RT0, T0);
    synth_rank(f, 1, 2);
    synth_end_of_file(f, T0, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    cJSON *rep = report(dir, &run);
    for (int i = 0; i < 2; i++) {
        cJSON *c = rank_comm(rep, i);
        NEAR(num(c, "ops"), 0);
        assert_string_equal(str(c, "note"), "no communication recorded");
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(c, "communicators")), 0);
        assert_null(cJSON_GetObjectItem(c, "exposure"));
    }
    cJSON *rc = cJSON_GetObjectItem(rep, "communication");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(rc, "communicators")), 0);
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(rc, "exposure"), "worst_rank"));
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(rep, "findings")), 0);
    char *t = report_text_warmup(&run, 0);
    assert_non_null(strstr(t, "communication: none recorded"));
    free(t);
    char *buf = NULL;
    size_t blen = 0;
    FILE *mf = open_memstream(&buf, &blen);
    assert_int_equal(tp_export_chrome(&run, mf, NULL), 0);
    fclose(mf);
    cJSON *tr = cJSON_Parse(buf);
    assert_non_null(tr);
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(tr, "traceEvents")) {
        const cJSON *cat = cJSON_GetObjectItem(e, "cat");
        assert_false(cJSON_IsString(cat) && !strcmp(cat->valuestring, "comm"));
    }
    cJSON_Delete(tr);
    free(buf);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* The report of the one-step CPU job in dir (its run into *run), whose rank 0's exposure is
 * on the host basis: exposed, overlapped and all communication (ms) as given, the exposed
 * share of the 100 ms step. */
static cJSON *host_exposure_is(const char *dir, tp_run *run, double exposed, double overlapped,
                               double comm_ms) {
    cJSON *rep = report(dir, run);
    cJSON *x = cJSON_GetObjectItem(rank_comm(rep, 0), "exposure");
    assert_string_equal(str(x, "basis"), "host");
    NEAR(num(cJSON_GetObjectItem(x, "exposed_ms"), "mean"), exposed);
    NEAR(num(cJSON_GetObjectItem(x, "overlapped_ms"), "mean"), overlapped);
    NEAR(num(cJSON_GetObjectItem(x, "comm_ms"), "mean"), comm_ms);
    NEAR(num(x, "exposed_share"), exposed / 100.0);
    return rep;
}

/* A CPU job under MPI: no GPU records; the process is blocked in MPI_Allreduce 20-45 ms of a
 * 100 ms step, so 25 ms are exposed (25 %). An Isend posted at 50 ms and seen complete by its
 * Wait at 80-82 ms is communication for 32 ms, 30 of which the host spent computing
 * (overlapped): only its Wait's 2 ms are exposed, for 27 ms exposed of 57 ms in all. */
static void test_mpi_cpu_job(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = rank_file(dir, sizeof dir, "comm-mpi", 50, 0, 2);
    steps(f, 1, 100 * MS);
    tprof_pl_comm c = comm(TPROF_COMM_ALLREDUCE, 0x1234, 2, 0, 8 * MiB, T0 + 45 * MS);
    c.source = TPROF_COMM_SRC_MPI;
    synth_comm(f, 1, T0 + 20 * MS, &c, "MPI_Allreduce");
    tprof_pl_comm is = comm(TPROF_COMM_SEND, 0x1234, 2, 0, MiB, T0 + 82 * MS);
    is.source = TPROF_COMM_SRC_MPI;
    is.flags = TPROF_COMM_F_NONBLOCKING;
    synth_comm(f, 1, T0 + 50 * MS, &is, "Send");
    tprof_pl_comm w = comm(TPROF_COMM_UNKNOWN, 0x1234, 2, 0, 0, T0 + 82 * MS);
    w.source = TPROF_COMM_SRC_MPI;
    synth_comm(f, 1, T0 + 80 * MS, &w, "Wait");
    synth_end_of_file(f, T0 + 100 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    cJSON *rep = host_exposure_is(dir, &run, 27.0, 30.0, 57.0);
    cJSON *r = rank_row(rank_comm(rep, 0), "0x0000000000001234", "AllReduce");
    assert_string_equal(str(r, "time_source"), "host");
    /* 8 MiB in 25 ms, x 2(2-1)/2 = 1 */
    NEAR(num(r, "algbw_gbs"), 8.0 * MiB / 25e6);
    NEAR(num(r, "busbw_gbs"), 8.0 * MiB / 25e6);
    assert_string_equal(str(cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "findings"), 0), "severity"),
                        "warning");
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* A CPU job of blocking MPI calls alone: MPI_Allreduce 20-45 ms and an MPI_Barrier 40-50 ms
 * of a 100 ms step (the host blocked 30 ms, the overlap counted once), and a call still in
 * flight at the end (no span): communication = exposed = 30 ms, overlapped 0. */
static void test_mpi_cpu_blocking(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = rank_file(dir, sizeof dir, "comm-mpi-blocking", 51, 0, 2);
    steps(f, 1, 100 * MS);
    tprof_pl_comm c = comm(TPROF_COMM_ALLREDUCE, 0x1234, 2, 0, 8 * MiB, T0 + 45 * MS);
    c.source = TPROF_COMM_SRC_MPI;
    synth_comm(f, 1, T0 + 20 * MS, &c, "MPI_Allreduce");
    tprof_pl_comm b = comm(TPROF_COMM_BARRIER, 0x1234, 2, 0, 0, T0 + 50 * MS);
    b.source = TPROF_COMM_SRC_MPI;
    synth_comm(f, 1, T0 + 40 * MS, &b, "MPI_Barrier");
    tprof_pl_comm u = comm(TPROF_COMM_ALLREDUCE, 0x1234, 2, 0, 8 * MiB, T0 + 60 * MS);
    u.source = TPROF_COMM_SRC_MPI;
    u.flags = TPROF_COMM_F_UNFINISHED;
    synth_comm(f, 1, T0 + 60 * MS, &u, "MPI_Allreduce");
    synth_end_of_file(f, T0 + 100 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    cJSON_Delete(host_exposure_is(dir, &run, 30.0, 0.0, 30.0));
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* ------------------------------------------------------------------ Chrome */

/* Two communicators on rank 0: 0x10 (AllReduce 256 MiB on 8 ranks, GPU 2-12 ms; then a second
 * one enqueued 20-20.1 ms without GPU time or kernel: host interval) and 0x20 (AllGather first
 * issued at 1 ms, GPU 3-5 ms). Tracks in order of first op: 0x20 then 0x10. */
static void test_chrome_tracks(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = rank_file(dir, sizeof dir, "comm-chrome", 60, 0, 8);
    tprof_pl_comm c = comm(TPROF_COMM_ALLGATHER, 0x20, 4, 2, MiB, T0 + MS + 100 * US);
    c.seq = 7;
    c.algo = TPROF_ALGO_NVLS;
    c.proto = TPROF_PROTO_LL128;
    with_gpu(&c, T0 + 3 * MS, T0 + 5 * MS);
    synth_comm(f, 1, T0 + MS, &c, NULL);
    c = comm(TPROF_COMM_ALLREDUCE, 0x10, 8, 0, 256 * MiB, T0 + 2 * MS + 100 * US);
    c.seq = 3;
    with_gpu(&c, T0 + 2 * MS, T0 + 12 * MS);
    synth_comm(f, 1, T0 + 1500 * US, &c, NULL);
    c = comm(TPROF_COMM_ALLREDUCE, 0x10, 8, 0, 256 * MiB, T0 + 20 * MS + 100 * US);
    c.seq = 4;
    synth_comm(f, 1, T0 + 20 * MS, &c, NULL);
    synth_end_of_file(f, T0 + 30 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    char err[256];
    assert_int_equal(tp_run_load(dir, &run, err, sizeof err), 0);
    char *buf = NULL;
    size_t blen = 0;
    FILE *mf = open_memstream(&buf, &blen);
    assert_int_equal(tp_export_chrome(&run, mf, NULL), 0);
    fclose(mf);
    cJSON *tr = cJSON_Parse(buf);
    free(buf);
    assert_non_null(tr);
    const double tid_ag = (double)0x20000000u, tid_ar = (double)0x20000001u;
    int names = 0, ar = 0, ag = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(tr, "traceEvents")) {
        const char *ph = str(e, "ph");
        const cJSON *nm = cJSON_GetObjectItem(e, "name");
        if (!strcmp(ph, "M") && !strcmp(nm->valuestring, "thread_name") &&
            num(e, "tid") >= tid_ag && num(e, "tid") <= tid_ar) {
            const char *tn = str(cJSON_GetObjectItem(e, "args"), "name");
            if (num(e, "tid") == tid_ag) assert_string_equal(tn, "comm 0x0000000000000020 (4 ranks, rank 2)");
            else assert_string_equal(tn, "comm 0x0000000000000010 (8 ranks, rank 0)");
            names++;
        }
        const cJSON *cat = cJSON_GetObjectItem(e, "cat");
        if (!cJSON_IsString(cat) || strcmp(cat->valuestring, "comm")) continue;
        assert_string_equal(ph, "X");
        NEAR(num(e, "pid"), 0);
        cJSON *a = cJSON_GetObjectItem(e, "args");
        if (!strcmp(nm->valuestring, "AllGather")) {
            ag++;
            NEAR(num(e, "tid"), tid_ag);
            NEAR(num(e, "ts"), 3000.0); /* µs after the base (the file's start) */
            NEAR(num(e, "dur"), 2000.0);
            assert_string_equal(str(a, "op"), "AllGather");
            NEAR(num(a, "bytes"), (double)MiB);
            NEAR(num(a, "count"), (double)MiB / 4);
            NEAR(num(a, "seq"), 7);
            assert_string_equal(str(a, "algo"), "NVLS");
            assert_string_equal(str(a, "proto"), "LL128");
            assert_string_equal(str(a, "time_source"), "gpu");
            /* 4 MiB (nccl-tests size) in 2 ms = 2.097152 GB/s; busbw x 3/4 */
            NEAR(num(a, "algbw (GB/s)"), 2.097152);
            NEAR(num(a, "busbw (GB/s)"), 1.572864);
        } else {
            assert_string_equal(nm->valuestring, "AllReduce");
            NEAR(num(e, "tid"), tid_ar);
            assert_string_equal(str(a, "algo"), "RING");
            assert_string_equal(str(a, "proto"), "SIMPLE");
            if (ar++ == 0) {
                NEAR(num(a, "seq"), 3);
                NEAR(num(e, "ts"), 2000.0);
                NEAR(num(e, "dur"), 10000.0);
                assert_string_equal(str(a, "time_source"), "gpu");
                NEAR(num(a, "algbw (GB/s)"), 26.8435456);
                NEAR(num(a, "busbw (GB/s)"), 46.9762048);
            } else {
                NEAR(num(a, "seq"), 4);
                NEAR(num(e, "ts"), 20000.0);
                NEAR(num(e, "dur"), 100.0);
                assert_string_equal(str(a, "time_source"), "host");
                /* an enqueue is no duration: no bandwidth */
                assert_null(cJSON_GetObjectItem(a, "algbw (GB/s)"));
            }
        }
    }
    assert_int_equal(names, 2);
    assert_int_equal(ag, 1);
    assert_int_equal(ar, 2);
    cJSON_Delete(tr);
    tp_run_free(&run);
    synth_rmtree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_communicator),
        cmocka_unit_test(test_torch_group_by_members),
        cmocka_unit_test(test_ranks_differ),
        cmocka_unit_test(test_finding_thresholds),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_mpi_cpu_job),
        cmocka_unit_test(test_mpi_cpu_blocking),
        cmocka_unit_test(test_chrome_tracks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
