/*
 * test_comm.c — the communication analysis (src/analysis/comm.c) on synthetic runs whose
 * answers are known to the nanosecond: exposed vs overlapped time, algbw/busbw with the
 * nccl-tests factors and size convention, the three duration sources and the kernel
 * matching rule, communicators shared by rank files, the finding thresholds, runs without
 * communication, an MPI CPU job, and the Chrome export's track per communicator.
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
#include "synth.h"
#include "trainprof.h"

static const uint64_t T0 = 1000000000ull, MS = 1000000ull, US = 1000ull;
static const uint64_t RT0 = 1700000000000000000ull;
static const uint64_t MiB = 1048576ull;

#define NEAR(a, b) assert_true(fabs((double)(a) - (double)(b)) < 1e-9)

static const char *K_GEMM = "ampere_bf16_s16816gemm_128x128";
static const char *K_AR = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";

/* ------------------------------------------------------------------ helpers */

static tprof_pl_comm comm(uint32_t op, uint64_t hash, uint32_t nranks, uint32_t rank,
                          uint64_t bytes, uint64_t end) {
    tprof_pl_comm c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.comm_hash = hash;
    c.nranks = nranks;
    c.rank = rank;
    c.bytes = bytes;
    c.count = bytes / 4; /* float32 */
    c.end_ns = end;
    c.peer = TPROF_COMM_NO_PEER;
    c.source = TPROF_COMM_SRC_NCCL;
    c.algo = TPROF_ALGO_RING;
    c.proto = TPROF_PROTO_SIMPLE;
    c.nchannels = 4;
    return c;
}

static void with_gpu(tprof_pl_comm *c, uint64_t s, uint64_t e) {
    c->flags |= TPROF_COMM_F_GPU_TIME;
    c->gpu_start_ns = s;
    c->gpu_end_ns = e;
}

/* A run directory with one rank file: process `pid` on host "h", rank `rank` of `world`. */
static synth_file *rank_file(char *dir, size_t n, const char *tag, uint32_t pid, int rank,
                             int world) {
    assert_int_equal(synth_tmpdir(dir, n, tag), 0);
    synth_file *f = synth_open(dir, "h", pid, RT0, T0);
    synth_rank(f, rank, world);
    return f;
}

/* An AllReduce of 1 MiB on communicator `hash` (2 ranks) enqueued at `host` for 2 us, with
 * kernel-channel interval [g0, g1). */
static void allreduce_ch(synth_file *f, uint64_t hash, uint64_t host, uint64_t g0, uint64_t g1) {
    tprof_pl_comm c = comm(TPROF_COMM_ALLREDUCE, hash, 2, 0, MiB, host + 2 * US);
    with_gpu(&c, g0, g1);
    synth_comm(f, 1, host, &c, NULL);
}

/* tp_comm_resolve over p's n ops (p must have n), in memory the caller frees. */
static tp_comm_time *resolved(const tp_process *p, size_t n) {
    assert_int_equal(p->ncomm, n);
    tp_comm_time *tm = calloc(n, sizeof *tm);
    assert_non_null(tm);
    assert_int_equal(tp_comm_resolve(p, tm), 0);
    return tm;
}

/* steps [T0 + i*len, T0 + (i+1)*len) on thread 1 */
static void steps(synth_file *f, int n, uint64_t len) {
    for (int i = 0; i < n; i++) {
        synth_step_begin(f, 1, T0 + (uint64_t)i * len, (uint64_t)i);
        synth_step_end(f, 1, T0 + (uint64_t)(i + 1) * len, (uint64_t)i);
    }
}

static cJSON *report(const char *dir, tp_run *run) {
    char err[256] = "";
    int rc = tp_run_load(dir, run, err, sizeof err);
    if (rc) fprintf(stderr, "load: %s\n", err);
    assert_int_equal(rc, 0);
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.warmup = 0;
    cJSON *rep = tp_report_build(run, &o);
    assert_non_null(rep);
    return rep;
}

static cJSON *rank_comm(cJSON *rep, int i) {
    cJSON *c = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "ranks"), i),
                                   "communication");
    assert_non_null(c);
    return c;
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItem(o, k);
    if (!cJSON_IsNumber(v)) fail_msg("no number \"%s\"", k);
    return v->valuedouble;
}

static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItem(o, k);
    if (!cJSON_IsString(v)) fail_msg("no string \"%s\"", k);
    return v->valuestring;
}

/* The row of op `op` in the rank communicator `id` ("0x..."). */
static cJSON *rank_row(cJSON *c, const char *id, const char *op) {
    cJSON *e, *r;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(c, "communicators")) {
        if (strcmp(str(e, "id"), id)) continue;
        cJSON_ArrayForEach(r, cJSON_GetObjectItem(e, "ops")) if (!strcmp(str(r, "op"), op)) return r;
    }
    fail_msg("no row %s %s", id, op);
    return NULL;
}

static cJSON *run_comm(cJSON *rep, const char *id) {
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(cJSON_GetObjectItem(rep, "communication"), "communicators"))
        if (!strcmp(str(e, "id"), id)) return e;
    fail_msg("no communicator %s", id);
    return NULL;
}

/* ------------------------------------------------------------------ factors */

static void test_factors_and_sizes(void **state) {
    (void)state;
    NEAR(tp_comm_bus_factor(TPROF_COMM_ALLREDUCE, 8), 1.75);
    NEAR(tp_comm_bus_factor(TPROF_COMM_ALLGATHER, 4), 0.75);
    NEAR(tp_comm_bus_factor(TPROF_COMM_REDUCESCATTER, 4), 0.75);
    NEAR(tp_comm_bus_factor(TPROF_COMM_ALLTOALL, 8), 0.875);
    NEAR(tp_comm_bus_factor(TPROF_COMM_GATHER, 2), 0.5);
    NEAR(tp_comm_bus_factor(TPROF_COMM_SCATTER, 2), 0.5);
    NEAR(tp_comm_bus_factor(TPROF_COMM_BROADCAST, 8), 1.0);
    NEAR(tp_comm_bus_factor(TPROF_COMM_REDUCE, 8), 1.0);
    NEAR(tp_comm_bus_factor(TPROF_COMM_SEND, 2), 1.0);
    NEAR(tp_comm_bus_factor(TPROF_COMM_RECV, 2), 1.0);
    NEAR(tp_comm_bus_factor(TPROF_COMM_BARRIER, 8), 0.0);
    NEAR(tp_comm_bus_factor(TPROF_COMM_ALLREDUCE, 0), 0.0);
    /* per-rank payload -> nccl-tests size */
    assert_int_equal(tp_comm_size_bytes(TPROF_COMM_ALLREDUCE, 100, 8), 100);
    assert_int_equal(tp_comm_size_bytes(TPROF_COMM_ALLGATHER, 100, 8), 800);     /* sendcount */
    assert_int_equal(tp_comm_size_bytes(TPROF_COMM_REDUCESCATTER, 100, 8), 800); /* recvcount */
    assert_int_equal(tp_comm_size_bytes(TPROF_COMM_ALLTOALL, 100, 8), 800);      /* per peer */
    assert_int_equal(tp_comm_size_bytes(TPROF_COMM_BROADCAST, 100, 8), 100);
    assert_int_equal(tp_comm_size_bytes(TPROF_COMM_SEND, 100, 2), 100);
    assert_int_equal(tp_comm_size_bytes(TPROF_COMM_BARRIER, 0, 8), 0);
}

/* ------------------------------------------------------------------ exposed vs overlapped */

/* Two steps of 100 ms. In each: compute kernels 0-40 ms (stream 7) and 30-60 ms (stream 8):
 * compute 0-60 ms; an NCCL AllReduce kernel 50-80 ms (stream 9); a copy 80-90 ms (not
 * compute). The AllReduce op is issued at 1 ms (enqueued by 1.05 ms) with no GPU interval.
 * Communication 30 ms: 10 ms overlapped (50-60), 20 ms exposed (60-80) = 20 %. */
static void test_exposed_overlapped(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = rank_file(dir, sizeof dir, "comm-exposed", 10, 0, 1);
    steps(f, 2, 100 * MS);
    for (uint64_t s = 0; s < 2; s++) {
        uint64_t b = T0 + s * 100 * MS;
        synth_kernel(f, 2, b, b + 40 * MS, 0, 7, 0, K_GEMM);
        synth_kernel(f, 2, b + 30 * MS, b + 60 * MS, 0, 8, 0, K_GEMM);
        synth_kernel(f, 2, b + 50 * MS, b + 80 * MS, 0, 9, 0, K_AR);
        tprof_pl_gpu cp = {b + 90 * MS, 1000, 0, 7, 0, 1, 0, 0};
        synth_raw(f, 2, TPROF_REC_GPU_MEMCPY, 0, b + 80 * MS, &cp, sizeof cp, NULL, 0);
        tprof_pl_comm c = comm(TPROF_COMM_ALLREDUCE, 0xa1, 1, 0, 4 * MiB, b + 1 * MS + 50 * US);
        c.seq = (uint32_t)s;
        synth_comm(f, 1, b + 1 * MS, &c, NULL);
    }
    synth_end_of_file(f, T0 + 200 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    cJSON *rep = report(dir, &run);
    cJSON *x = cJSON_GetObjectItem(rank_comm(rep, 0), "exposure");
    assert_non_null(x);
    assert_string_equal(str(x, "per"), "step");
    assert_string_equal(str(x, "basis"), "gpu");
    NEAR(num(x, "windows"), 2);
    NEAR(num(x, "window_ms"), 100.0);
    NEAR(num(cJSON_GetObjectItem(x, "comm_ms"), "mean"), 30.0);
    NEAR(num(cJSON_GetObjectItem(x, "exposed_ms"), "mean"), 20.0);
    NEAR(num(cJSON_GetObjectItem(x, "exposed_ms"), "p50"), 20.0);
    NEAR(num(cJSON_GetObjectItem(x, "overlapped_ms"), "mean"), 10.0);
    NEAR(num(x, "exposed_share"), 0.2);
    NEAR(num(x, "overlapped_share"), 0.1);
    NEAR(num(cJSON_GetObjectItem(x, "exposed_share_per_window"), "max"), 0.2);
    /* the op took the kernel's time: matched in issue order on its stream */
    cJSON *r = rank_row(rank_comm(rep, 0), "0x00000000000000a1", "AllReduce");
    assert_string_equal(str(r, "time_source"), "kernel");
    NEAR(num(r, "count"), 2);
    NEAR(num(r, "time_ms"), 60.0);
    NEAR(num(r, "mean_us"), 30000.0);
    NEAR(num(r, "count_per_step"), 1.0);
    NEAR(num(r, "bytes_per_step"), 4.0 * MiB);
    /* 20 % > 10 %: a warning, with the evidence */
    cJSON *fd = cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "findings"), 0);
    assert_non_null(fd);
    assert_string_equal(str(fd, "id"), "exposed_communication");
    assert_string_equal(str(fd, "severity"), "warning");
    cJSON *ev = cJSON_GetObjectItem(fd, "evidence");
    NEAR(num(ev, "exposed_share"), 0.2);
    NEAR(num(ev, "exposed_ms"), 20.0);
    NEAR(num(ev, "overlapped_ms"), 10.0);
    NEAR(num(ev, "window_ms"), 100.0);
    NEAR(num(ev, "threshold"), 0.1);
    char *t = report_text_warmup(&run, 0);
    assert_non_null(strstr(t, "exposed communication: 20.00 ms per step = 20.0 % of the step"));
    assert_non_null(strstr(t, "warning: exposed communication is 20.0 % of the step time on rank 0"));
    free(t);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* ------------------------------------------------------------------ bandwidth */

/* One AllReduce of 256 MiB on 8 ranks taking 10 ms on the GPU: algbw = 268435456 B / 10 ms =
 * 26.8435456 GB/s, busbw = algbw x 2(8-1)/8 = 46.9762048 GB/s. */
static void test_busbw_allreduce(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = rank_file(dir, sizeof dir, "comm-busbw", 11, 0, 8);
    tprof_pl_comm c = comm(TPROF_COMM_ALLREDUCE, 0xbeef, 8, 0, 256 * MiB, T0 + 100 * US);
    c.dtype = TPROF_DTYPE_BFLOAT16;
    with_gpu(&c, T0 + 2 * MS, T0 + 12 * MS);
    synth_comm(f, 1, T0, &c, NULL);
    /* a Broadcast of float32 then int64 (its row is "mixed"), and one of no known type */
    tprof_pl_comm b = comm(TPROF_COMM_BROADCAST, 0xbeef, 8, 0, 4, T0 + 13 * MS);
    b.dtype = TPROF_DTYPE_FLOAT32;
    synth_comm(f, 1, T0 + 13 * MS - US, &b, NULL);
    b.dtype = TPROF_DTYPE_INT64;
    synth_comm(f, 1, T0 + 14 * MS - US, &b, NULL);
    tprof_pl_comm g = comm(TPROF_COMM_ALLGATHER, 0xbeef, 8, 0, 4, T0 + 15 * MS);
    synth_comm(f, 1, T0 + 15 * MS - US, &g, NULL);
    synth_end_of_file(f, T0 + 20 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    cJSON *rep = report(dir, &run);
    cJSON *r = rank_row(rank_comm(rep, 0), "0x000000000000beef", "AllReduce");
    assert_string_equal(str(r, "time_source"), "gpu");
    NEAR(num(r, "time_ms"), 10.0);
    NEAR(num(r, "bus_factor"), 1.75);
    NEAR(num(r, "algbw_gbs"), 26.8435456);
    NEAR(num(r, "busbw_gbs"), 46.9762048);
    NEAR(num(r, "bytes"), 268435456.0);
    assert_string_equal(str(r, "datatype"), "bfloat16");
    assert_string_equal(str(rank_row(rank_comm(rep, 0), "0x000000000000beef", "Broadcast"), "datatype"), "mixed");
    assert_null(cJSON_GetObjectItem(rank_row(rank_comm(rep, 0), "0x000000000000beef", "AllGather"), "datatype"));
    cJSON *x = run_comm(rep, "0x000000000000beef");
    NEAR(num(x, "size"), 8);
    assert_string_equal(str(x, "role_guess"), "world/data-parallel");
    cJSON *o = cJSON_GetArrayItem(cJSON_GetObjectItem(x, "ops"), 0);
    NEAR(num(o, "algbw_gbs"), 26.8435456);
    NEAR(num(o, "busbw_gbs"), 46.9762048);
    NEAR(num(o, "mean_ms"), 10.0);
    /* NCCL GPU intervals without CUPTI kernels: no split */
    assert_string_equal(str(cJSON_GetObjectItem(rank_comm(rep, 0), "exposure"), "basis"), "none");
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* AllGather: NCCL's count is the send count, so 16 MiB per rank on 4 ranks is nccl-tests size
 * 64 MiB; in 8 ms: algbw 67108864 / 8e6 = 8.388608 GB/s, busbw x 3/4 = 6.291456. ReduceScatter:
 * the receive count, 8 MiB per rank on 4 ranks = 32 MiB in 4 ms: the same rates. Broadcast
 * 8 MiB in 2 ms: factor 1, 4.194304 GB/s. */
static void test_allgather_size_convention(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = rank_file(dir, sizeof dir, "comm-ag", 12, 1, 4);
    tprof_pl_comm c = comm(TPROF_COMM_ALLGATHER, 0x77, 4, 1, 16 * MiB, T0 + 100 * US);
    with_gpu(&c, T0 + 1 * MS, T0 + 9 * MS);
    synth_comm(f, 1, T0, &c, NULL);
    c = comm(TPROF_COMM_REDUCESCATTER, 0x77, 4, 1, 8 * MiB, T0 + 10 * MS + 100 * US);
    with_gpu(&c, T0 + 11 * MS, T0 + 15 * MS);
    synth_comm(f, 1, T0 + 10 * MS, &c, NULL);
    c = comm(TPROF_COMM_BROADCAST, 0x77, 4, 1, 8 * MiB, T0 + 20 * MS + 100 * US);
    c.peer = 0; /* root */
    with_gpu(&c, T0 + 21 * MS, T0 + 23 * MS);
    synth_comm(f, 1, T0 + 20 * MS, &c, NULL);
    synth_end_of_file(f, T0 + 30 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    cJSON *rep = report(dir, &run);
    cJSON *rc = rank_comm(rep, 0);
    cJSON *ag = rank_row(rc, "0x0000000000000077", "AllGather");
    NEAR(num(ag, "bytes"), 16.0 * MiB); /* the per-rank payload, as passed */
    NEAR(num(ag, "algbw_gbs"), 8.388608);
    NEAR(num(ag, "busbw_gbs"), 6.291456);
    cJSON *rs = rank_row(rc, "0x0000000000000077", "ReduceScatter");
    NEAR(num(rs, "algbw_gbs"), 8.388608);
    NEAR(num(rs, "busbw_gbs"), 6.291456);
    cJSON *bc = rank_row(rc, "0x0000000000000077", "Broadcast");
    NEAR(num(bc, "algbw_gbs"), 4.194304);
    NEAR(num(bc, "busbw_gbs"), 4.194304);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* ------------------------------------------------------------------ duration sources */

/* Six communicators on one rank (device 0):
 * - 0xA: an AllReduce with its own GPU interval 3-5 ms (kernel channels) and its kernel on
 *   stream 14 at 2.9-5.1 ms: CUPTI's record of a kernel that runs this op alone comes first
 *   (docs/design.md §5.2), so its time is 2.2 ms from "kernel";
 * - 0xB and 0xC, two AllReduces each, issued interleaved (B at 1 and 3 ms, C at 2 and 4 ms),
 *   no GPU interval. B's kernels run on stream 11 at 5-6 and 7-8 ms, C's on stream 10 at
 *   5.5-9 and 9.5-12 ms: both streams fit both in number, and B takes stream 11 because its
 *   kernels follow B's issues sooner (4 + 4 ms against 4.5 + 6.5 ms);
 * - 0xD: a Send and a Recv enqueued together (overlapping host intervals, 20-20.1 and
 *   20.05-20.1 ms) share one SendRecv kernel 21-23 ms (stream 12);
 * - 0xE: an AllGather at 30 ms whose stream only has an AllReduce kernel later: no match,
 *   so its time is the host enqueue (30-30.2 ms), flagged enqueue-only;
 * - 0xF: an MPI Allreduce, host time 40-45 ms (its real duration);
 * - 0x10: an AllReduce with its GPU interval 46-47 ms whose order-matched kernel (stream 15)
 *   runs 48-49 ms, so it does not hold the interval (a wrong match, as after CUPTI drops):
 *   the channel interval counts, 1 ms from "gpu". */
static void test_duration_sources(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = rank_file(dir, sizeof dir, "comm-src", 13, 0, 2);
    tprof_pl_comm c = comm(TPROF_COMM_ALLREDUCE, 0xA, 2, 0, MiB, T0 + 100 * US);
    with_gpu(&c, T0 + 3 * MS, T0 + 5 * MS);
    synth_comm(f, 1, T0, &c, NULL);
    synth_kernel(f, 2, T0 + 2900 * US, T0 + 5100 * US, 0, 14, 0, K_AR);
    uint64_t issue[4] = {1, 2, 3, 4};
    for (int i = 0; i < 4; i++) {
        c = comm(TPROF_COMM_ALLREDUCE, i % 2 ? 0xC : 0xB, 2, 0, MiB, T0 + issue[i] * MS + 50 * US);
        synth_comm(f, 1, T0 + issue[i] * MS, &c, NULL);
    }
    synth_kernel(f, 2, T0 + 5 * MS, T0 + 6 * MS, 0, 11, 0, K_AR);
    synth_kernel(f, 2, T0 + 7 * MS, T0 + 8 * MS, 0, 11, 0, K_AR);
    synth_kernel(f, 2, T0 + 5500 * US, T0 + 9 * MS, 0, 10, 0, K_AR);
    synth_kernel(f, 2, T0 + 9500 * US, T0 + 12 * MS, 0, 10, 0, K_AR);
    c = comm(TPROF_COMM_SEND, 0xD, 2, 0, MiB, T0 + 20 * MS + 100 * US);
    c.peer = 1;
    synth_comm(f, 1, T0 + 20 * MS, &c, NULL);
    c = comm(TPROF_COMM_RECV, 0xD, 2, 0, MiB, T0 + 20 * MS + 100 * US);
    c.peer = 1;
    synth_comm(f, 1, T0 + 20 * MS + 50 * US, &c, NULL);
    synth_kernel(f, 2, T0 + 21 * MS, T0 + 23 * MS, 0, 12, 0, "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)");
    c = comm(TPROF_COMM_ALLGATHER, 0xE, 2, 0, MiB, T0 + 30 * MS + 200 * US);
    synth_comm(f, 1, T0 + 30 * MS, &c, NULL);
    synth_kernel(f, 2, T0 + 31 * MS, T0 + 32 * MS, 0, 13, 0, K_AR);
    c = comm(TPROF_COMM_ALLREDUCE, 0xF, 2, 0, MiB, T0 + 45 * MS);
    c.source = TPROF_COMM_SRC_MPI;
    c.algo = c.proto = 0;
    synth_comm(f, 1, T0 + 40 * MS, &c, NULL);
    c = comm(TPROF_COMM_ALLREDUCE, 0x10, 2, 0, MiB, T0 + 45500 * US);
    with_gpu(&c, T0 + 46 * MS, T0 + 47 * MS);
    synth_comm(f, 1, T0 + 45400 * US, &c, NULL);
    synth_kernel(f, 2, T0 + 48 * MS, T0 + 49 * MS, 0, 15, 0, K_AR);
    synth_end_of_file(f, T0 + 50 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    cJSON *rep = report(dir, &run);
    cJSON *rc = rank_comm(rep, 0);
    NEAR(num(rc, "ops"), 10);
    NEAR(num(rc, "mpi_ops"), 1);
    cJSON *r = rank_row(rc, "0x000000000000000a", "AllReduce");
    assert_string_equal(str(r, "time_source"), "kernel");
    NEAR(num(r, "time_ms"), 2.2);
    r = rank_row(rc, "0x000000000000000b", "AllReduce");
    assert_string_equal(str(r, "time_source"), "kernel");
    NEAR(num(r, "time_ms"), 2.0); /* 5-6 and 7-8 ms */
    r = rank_row(rc, "0x000000000000000c", "AllReduce");
    assert_string_equal(str(r, "time_source"), "kernel");
    NEAR(num(r, "time_ms"), 6.0); /* 5.5-9 and 9.5-12 ms */
    r = rank_row(rc, "0x000000000000000d", "Send");
    assert_string_equal(str(r, "time_source"), "kernel");
    NEAR(num(r, "time_ms"), 2.0);
    NEAR(num(r, "algbw_gbs"), (double)MiB / 2e6);
    r = rank_row(rc, "0x000000000000000d", "Recv");
    assert_string_equal(str(r, "time_source"), "kernel");
    NEAR(num(r, "time_ms"), 2.0);
    r = rank_row(rc, "0x000000000000000e", "AllGather");
    assert_string_equal(str(r, "time_source"), "host");
    NEAR(num(r, "time_ms"), 0.2);
    NEAR(num(r, "enqueue_only"), 1);
    assert_null(cJSON_GetObjectItem(r, "algbw_gbs")); /* an enqueue is no transfer time */
    r = rank_row(rc, "0x000000000000000f", "AllReduce");
    assert_string_equal(str(r, "time_source"), "host");
    NEAR(num(r, "time_ms"), 5.0);
    assert_null(cJSON_GetObjectItem(r, "enqueue_only")); /* MPI: the real duration */
    r = rank_row(rc, "0x0000000000000010", "AllReduce");
    assert_string_equal(str(r, "time_source"), "gpu");
    NEAR(num(r, "time_ms"), 1.0);
    /* the Send/Recv-only communicator is guessed to be pipeline-parallel */
    assert_string_equal(str(run_comm(rep, "0x000000000000000d"), "role_guess"), "pipeline");
    assert_string_equal(str(run_comm(rep, "0x000000000000000d"), "traffic"), "point-to-point");
    char *t = report_text_warmup(&run, 0);
    assert_non_null(strstr(t, "[time: kernel]"));
    assert_non_null(strstr(t, "are the enqueue only"));
    free(t);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* 100 AllReduces (communicator 0x20, device 0, stream 7) issued in a burst 3 us apart, as
 * behind a busy GPU, with kernels of 20 us every 25 us; the first finds the GPU idle and its
 * kernel starts 4 us before the op's host start (NCCL starts the Coll event after the
 * launch). Each op's kernel-channel interval runs from 3 us after its kernel's start to 1 us
 * before its end, placed 28 us late plus a drift of 10 ns per op (the plugin's calibration
 * and the clocks' rates): the centres differ by 29 us + drift. CUPTI lost op 50's kernel, so
 * order matching gives ops 50-98 their successors' kernels (pairs off by the 25 us spacing,
 * as steady as the right ones) and op 99 none. Then:
 * - ops 0-49 are timed by their own kernels (20 us), none skipped for starting early;
 * - every channel interval moves by its placement error, from the chunks of right pairs
 *   only (29-30 us): the last chunk, all wrong pairs, does not follow on from the others;
 * - ops 50-98's matched kernels (25 us later) do not hold the moved intervals (10 us
 *   slack), so they and op 99 are timed by the moved channel intervals (16 us), which now
 *   sit where their lost kernels ran. */
static void test_channel_placement(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = rank_file(dir, sizeof dir, "comm-place", 13, 0, 2);
    const uint64_t k0 = T0 + 1 * MS; /* kernel i: [k0 + 25 us * i, + 20 us) */
    for (uint64_t i = 0; i < 100; i++) {
        uint64_t ks = k0 + 25 * US * i, ke = ks + 20 * US;
        uint64_t host = i == 0 ? ks + 4 * US : k0 + 10 * US + 3 * US * i;
        allreduce_ch(f, 0x20, host, ks + 3 * US + 28 * US + 10 * i, ke - 1 * US + 28 * US + 10 * i);
        if (i != 50) synth_kernel(f, 2, ks, ke, 0, 7, 0, K_AR);
    }
    synth_end_of_file(f, T0 + 5 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    cJSON *rep = report(dir, &run);
    const tp_process *p = &run.procs[0];
    tp_comm_time *tm = resolved(p, 100);
    for (size_t n = 0; n < 100; n++) {
        /* op i by its channel start */
        uint64_t i = (p->comm[n].gpu_start - k0 - 31 * US) / (25 * US);
        uint64_t ks = k0 + 25 * US * i;
        assert_true(tm[n].shift_ns >= 29000 && tm[n].shift_ns <= 30000);
        if (i < 50) {
            assert_int_equal(tm[n].src, TP_COMM_TIME_KERNEL);
            assert_int_equal(tm[n].start, ks);
            assert_int_equal(tm[n].end, ks + 20 * US);
        } else {
            assert_int_equal(tm[n].src, TP_COMM_TIME_GPU);
            assert_int_equal(tm[n].end - tm[n].start, 16 * US);
            /* the moved interval is centred where the lost kernel ran, within the drift */
            int64_t centre = (int64_t)(tm[n].start + tm[n].end) / 2 - (int64_t)(ks + 10 * US);
            assert_true(centre > -1000 && centre < 1000);
        }
    }
    cJSON *pl = cJSON_GetObjectItem(rank_comm(rep, 0), "channel_placement");
    assert_non_null(pl);
    NEAR(num(pl, "ops"), 100);
    assert_true(num(pl, "shift_us_p50") >= 29.0 && num(pl, "shift_us_p50") <= 30.0);
    char *t = report_text_warmup(&run, 0);
    assert_non_null(strstr(t, "NCCL's GPU times checked against CUPTI's NCCL kernels: moved by -29."));
    free(t);
    cJSON_Delete(rep);
    free(tm);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* A kernel-capture window: 400 AllReduces (communicator 0x30, device 0) every 5 ms, each
 * kernel 20 us, issued 100 us ahead; CUPTI recorded the kernels of the first 200 only. The
 * channel intervals (3 us after kernel start to 1 us before its end) are placed 29 us late
 * plus a drift of 12 ppm (12 us per second, as a DDP run on 2 x H200 showed). The first
 * 200 ops are timed by their kernels; the last 200 by their channel intervals, moved by the
 * error extrapolated along the drift measured in the window: each centred on where its
 * kernel ran within 1 us (holding the window's last value would be up to 12 us off). */
static void test_channel_drift(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = rank_file(dir, sizeof dir, "comm-drift", 13, 0, 2);
    const uint64_t k0 = T0 + 1 * MS;
    for (uint64_t i = 0; i < 400; i++) {
        uint64_t ks = k0 + 5 * MS * i, ke = ks + 20 * US;
        uint64_t err = 28 * US + (ks - k0) * 12 / 1000000; /* + 1 us: centres differ by 29 */
        allreduce_ch(f, 0x30, ks - 100 * US, ks + 3 * US + err, ke - 1 * US + err);
        if (i < 200) synth_kernel(f, 2, ks, ke, 0, 7, 0, K_AR);
    }
    synth_end_of_file(f, k0 + 2001 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    char err[256];
    assert_int_equal(tp_run_load(dir, &run, err, sizeof err), 0);
    const tp_process *p = &run.procs[0];
    tp_comm_time *tm = resolved(p, 400);
    for (size_t n = 0; n < 400; n++) {
        uint64_t i = (p->comm[n].start + 100 * US - k0) / (5 * MS), ks = k0 + 5 * MS * i;
        if (i < 200) {
            assert_int_equal(tm[n].src, TP_COMM_TIME_KERNEL);
            assert_int_equal(tm[n].start, ks);
        } else {
            assert_int_equal(tm[n].src, TP_COMM_TIME_GPU);
            int64_t centre = (int64_t)(tm[n].start / 2 + tm[n].end / 2) - (int64_t)(ks + 10 * US);
            assert_true(centre > -1000 && centre < 1000);
        }
    }
    free(tm);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* The placement check with sparse ops and drift: 5 steps of 1 s, each with 30 AllReduces
 * 10 ms apart (communicator 0x50, device 0), kernels of 50 us issued 100 us ahead, channel
 * intervals placed 29 us late plus 12 ppm. Chunks end at 200 ms, and a point follows on from
 * the last one kept within 10 us plus 50 us per second between them, so every op keeps its
 * own kernel's time (points a second apart differ by 12 us). */
static void test_channel_sparse_drift(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = rank_file(dir, sizeof dir, "comm-sparse", 13, 0, 2);
    const uint64_t k0 = T0 + 100 * MS;
    for (uint64_t st = 0; st < 5; st++)
        for (uint64_t i = 0; i < 30; i++) {
            uint64_t ks = k0 + st * 1000 * MS + i * 10 * MS, ke = ks + 50 * US;
            uint64_t err = 28 * US + (ks - k0) * 12 / 1000000;
            allreduce_ch(f, 0x50, ks - 100 * US, ks + 3 * US + err, ke - 1 * US + err);
            synth_kernel(f, 2, ks, ke, 0, 7, 0, K_AR);
        }
    synth_end_of_file(f, k0 + 5000 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    char err[256];
    assert_int_equal(tp_run_load(dir, &run, err, sizeof err), 0);
    const tp_process *p = &run.procs[0];
    tp_comm_time *tm = resolved(p, 150);
    for (size_t n = 0; n < 150; n++) {
        assert_int_equal(tm[n].src, TP_COMM_TIME_KERNEL);
        assert_int_equal(tm[n].checked, 1);
        assert_int_equal(tm[n].end - tm[n].start, 50 * US);
    }
    free(tm);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* A process on two GPUs: communicator 0x60 on device 0 (10 AllReduces, channel intervals
 * centred exactly on their kernels: a correction of 0 that was checked), communicator 0x61
 * on device 1 (10 AllReduces placed 29 us late; CUPTI lost the last one's kernel). The
 * placement table counts all 20 ops, zero corrections included, and 0x61's unmatched op
 * takes its communicator's device, so it is moved like the others: centred on where its
 * kernel ran. */
static void test_channel_zero_and_unmatched(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = rank_file(dir, sizeof dir, "comm-zero", 13, 0, 2);
    for (uint64_t i = 0; i < 10; i++)
        for (uint32_t dev = 0; dev < 2; dev++) {
            uint64_t ks = T0 + MS + i * MS + dev * 300 * US, ke = ks + 40 * US;
            uint64_t err = dev ? 28 * US : 0;
            allreduce_ch(f, 0x60 + dev, ks - 100 * US, ks + 2 * US + err,
                         ke - 2 * US + err + (dev ? 2 * US : 0));
            if (!(dev == 1 && i == 9)) synth_kernel(f, 2, ks, ke, dev, 7 + dev, 0, K_AR);
        }
    synth_end_of_file(f, T0 + 20 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    cJSON *rep = report(dir, &run);
    const tp_process *p = &run.procs[0];
    tp_comm_time *tm = resolved(p, 20);
    for (size_t n = 0; n < 20; n++) {
        assert_int_equal(tm[n].checked, 1);
        if (p->comm[n].comm_hash == 0x60) {
            assert_int_equal(tm[n].device, 0);
            assert_int_equal(tm[n].shift_ns, 0);
            assert_int_equal(tm[n].src, TP_COMM_TIME_KERNEL);
        } else {
            assert_int_equal(tm[n].device, 1);
            assert_int_equal(tm[n].shift_ns, 29 * (int64_t)US);
            if (tm[n].src == TP_COMM_TIME_GPU) { /* the op whose kernel was lost */
                uint64_t ks = T0 + MS + 9 * MS + 300 * US;
                assert_int_equal(tm[n].start, ks + 1 * US);
                assert_int_equal(tm[n].end, ks + 39 * US);
            }
        }
    }
    cJSON *pl = cJSON_GetObjectItem(rank_comm(rep, 0), "channel_placement");
    assert_non_null(pl);
    NEAR(num(pl, "ops"), 20);
    NEAR(num(pl, "shift_us_min"), 0);
    NEAR(num(pl, "shift_us_max"), 29);
    cJSON_Delete(rep);
    free(tm);
    tp_run_free(&run);
    synth_rmtree(dir);
}

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
    cJSON *rep = report(dir, &run);
    cJSON *x = cJSON_GetObjectItem(rank_comm(rep, 0), "exposure");
    assert_string_equal(str(x, "basis"), "host");
    NEAR(num(cJSON_GetObjectItem(x, "exposed_ms"), "mean"), 27.0);
    NEAR(num(cJSON_GetObjectItem(x, "overlapped_ms"), "mean"), 30.0);
    NEAR(num(cJSON_GetObjectItem(x, "comm_ms"), "mean"), 57.0);
    NEAR(num(x, "exposed_share"), 0.27);
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
        cmocka_unit_test(test_factors_and_sizes),
        cmocka_unit_test(test_exposed_overlapped),
        cmocka_unit_test(test_busbw_allreduce),
        cmocka_unit_test(test_allgather_size_convention),
        cmocka_unit_test(test_duration_sources),
        cmocka_unit_test(test_channel_placement),
        cmocka_unit_test(test_channel_drift),
        cmocka_unit_test(test_channel_sparse_drift),
        cmocka_unit_test(test_channel_zero_and_unmatched),
        cmocka_unit_test(test_shared_communicator),
        cmocka_unit_test(test_torch_group_by_members),
        cmocka_unit_test(test_ranks_differ),
        cmocka_unit_test(test_finding_thresholds),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_mpi_cpu_job),
        cmocka_unit_test(test_chrome_tracks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
