/*
 * test_comm_times.c — the communication analysis (src/analysis/comm.c) on synthetic runs
 * whose answers are known to the nanosecond: each collective's time, exposed vs
 * overlapped, algbw/busbw with the nccl-tests factors and size convention, the three
 * duration sources and the kernel matching rule, and the placement of kernel channels.
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
 * plus a drift of 12 ppm (12 us per second, as measured under DDP on H200 hosts). The first
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

/* f's CUPTI on, and GPU activity captured in n windows: on_off[2i] to on_off[2i + 1]
 * (gpu_capture.windows, as the runtime writes it). */
static void capture_windows(synth_file *f, const uint64_t *on_off, size_t n) {
    char v[512];
    size_t len = 0;
    for (size_t i = 0; i < n && len < sizeof v; i++)
        len += (size_t)snprintf(v + len, sizeof v - len, "%s%llu-%llu", i ? "," : "",
                                (unsigned long long)on_off[2 * i],
                                (unsigned long long)on_off[2 * i + 1]);
    synth_meta(f, "capability.cupti", "activity capture on: 8 kinds");
    synth_meta(f, "gpu_capture.windows", v);
}

/* Ten steps of 10 ms with an AllReduce enqueued 1 ms into each (50 us on the host, no
 * kernel-channel interval: the plugin's records, or torch's), GPU activity captured in steps
 * 0-1 and 6-7 (gpu_capture.windows), so that only those ops' kernels were recorded: 2 ms from
 * 2 ms into the step, but step 7's kernel runs late, from 10.5 ms, after the window closed.
 * The ops of steps 2-5 and 8-9 were issued while capture was off and take no kernel (order
 * alone gave steps 2 and 3 the kernels of steps 6 and 7, 40 ms after their issue, and left
 * 6 and 7 to their host times); the ops of steps 6 and 7 take their own, the late one too.
 * A Send/Recv pair fused into one kernel whose Recv was issued 2 us after the second window
 * closed shares the Send's kernel all the same (one launch). */
static void test_match_within_capture(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = rank_file(dir, sizeof dir, "comm-win", 21, 0, 2);
    capture_windows(f, (const uint64_t[]){T0, T0 + 20 * MS, T0 + 60 * MS, T0 + 80 * MS}, 2);
    steps(f, 10, 10 * MS);
    uint64_t kstart[10] = {0};
    for (int i = 0; i < 10; i++) {
        uint64_t b = T0 + (uint64_t)i * 10 * MS;
        tprof_pl_comm c = comm(TPROF_COMM_ALLREDUCE, 0xA, 2, 0, MiB, b + MS + 50 * US);
        synth_comm(f, 1, b + MS, &c, NULL);
        if (i < 2 || i == 6 || i == 7) {
            kstart[i] = b + (i == 7 ? 10500 * US : 2 * MS);
            synth_kernel(f, 2, kstart[i], kstart[i] + 2 * MS, 0, 9, 0, K_AR);
            synth_kernel(f, 2, b + 4 * MS, b + 8 * MS, 0, 7, 0, K_GEMM);
        }
    }
    tprof_pl_comm sr = comm(TPROF_COMM_SEND, 0xB, 2, 0, MiB, T0 + 80 * MS + 20 * US);
    sr.peer = 1;
    synth_comm(f, 1, T0 + 80 * MS - 10 * US, &sr, NULL);
    sr.op = TPROF_COMM_RECV;
    synth_comm(f, 1, T0 + 80 * MS + 2 * US, &sr, NULL);
    synth_kernel(f, 2, T0 + 81 * MS, T0 + 82 * MS, 0, 12, 0,
                 "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)");
    synth_end_of_file(f, T0 + 100 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    cJSON *rep = report(dir, &run);
    tp_comm_time *tm = resolved(&run.procs[0], 12);
    assert_int_not_equal(tm[10].kernel, SIZE_MAX);
    assert_int_equal(tm[10].kernel, tm[11].kernel);
    for (int i = 0; i < 10; i++) {
        uint64_t host = T0 + (uint64_t)i * 10 * MS + MS;
        if (kstart[i]) {
            assert_int_equal(tm[i].src, TP_COMM_TIME_KERNEL);
            assert_int_equal(tm[i].start, kstart[i]);
            assert_int_equal(tm[i].end, kstart[i] + 2 * MS);
        } else {
            assert_int_equal(tm[i].src, TP_COMM_TIME_HOST);
            assert_int_equal(tm[i].start, host);
            assert_int_equal(tm[i].kernel, SIZE_MAX);
        }
    }
    free(tm);
    /* four ops timed by their kernels (8 ms), six by their enqueue (0.3 ms) */
    cJSON *r = rank_row(rank_comm(rep, 0), "0x000000000000000a", "AllReduce");
    NEAR(num(r, "time_ms"), 8.3);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* Two windows (steps 0-1 and 6-7) of which the file lists the first alone, the runtime having
 * counted the second (gpu_capture.windows_left_out), and AllReduces in those four steps.
 * When capture was on past the list is not known, so it counts as off, as for the GPU
 * figures: the ops of steps 6 and 7 take no kernel (order alone would have given them the
 * kernels recorded there, right here, but wrong wherever ops ran between windows), and the
 * capture section says that a window was not listed. A damaged count says nothing. */
static void test_match_past_window_list(void **state) {
    (void)state;
    for (int damaged = 0; damaged < 2; damaged++) {
        char dir[512];
        synth_file *f = rank_file(dir, sizeof dir, "comm-winleft", 22, 0, 2);
        capture_windows(f, (const uint64_t[]){T0, T0 + 20 * MS}, 1);
        synth_meta(f, "gpu_capture.windows_left_out", damaged ? "1x" : "1");
        steps(f, 10, 10 * MS);
        const int in[4] = {0, 1, 6, 7};
        for (int i = 0; i < 4; i++) {
            uint64_t b = T0 + (uint64_t)in[i] * 10 * MS;
            tprof_pl_comm c = comm(TPROF_COMM_ALLREDUCE, 0xA, 2, 0, MiB, b + MS + 50 * US);
            synth_comm(f, 1, b + MS, &c, NULL);
            synth_kernel(f, 2, b + 2 * MS, b + 4 * MS, 0, 9, 0, K_AR);
        }
        synth_end_of_file(f, T0 + 100 * MS, 0);
        assert_int_equal(synth_close(f), 0);
        tp_run run;
        cJSON *rep = report(dir, &run);
        tp_comm_time *tm = resolved(&run.procs[0], 4);
        for (int i = 0; i < 4; i++)
            assert_int_equal(tm[i].src, i < 2 ? TP_COMM_TIME_KERNEL : TP_COMM_TIME_HOST);
        free(tm);
        cJSON *gc = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "ranks"), 0),
                                        "gpu_capture");
        assert_non_null(gc);
        cJSON *nl = cJSON_GetObjectItem(gc, "windows_not_listed");
        if (damaged) assert_null(nl);
        else assert_int_equal(cJSON_GetNumberValue(nl), 1);
        char *t = report_text_warmup(&run, 0);
        assert_int_equal(strstr(t, "1 later capture window is not listed") != NULL, !damaged);
        free(t);
        cJSON_Delete(rep);
        tp_run_free(&run);
        synth_rmtree(dir);
    }
}

/* One capture window listed (0-10 ms) and a later one unlisted (gpu_capture.windows_left_out),
 * an AllReduce enqueued every 400 us from 0.1 ms, each kernel run 500 us after its op's
 * issue, the kernel of the op of 9.7 ms lost. The ops of the listed window take their own
 * kernels; the op of 9.7 ms takes none, rather than the first kernel past the window's end
 * (10.6 ms: the kernel of an op issued while capture counts as off); no later op takes one. */
static void test_match_lost_at_list_end(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = rank_file(dir, sizeof dir, "comm-listend", 24, 0, 2);
    capture_windows(f, (const uint64_t[]){T0, T0 + 10 * MS}, 1);
    synth_meta(f, "gpu_capture.windows_left_out", "1");
    enum { N = 60 };
    for (uint32_t i = 0; i < N; i++) {
        uint64_t t = T0 + 100 * US + i * 400 * US;
        tprof_pl_comm c = comm(TPROF_COMM_ALLREDUCE, 0xA, 2, 0, MiB, t + 5 * US);
        synth_comm(f, 1, t, &c, NULL);
        if (i != 24) synth_kernel(f, 2, t + 500 * US, t + 600 * US, 0, 9, 0, K_AR);
    }
    synth_end_of_file(f, T0 + 40 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    cJSON *rep = report(dir, &run);
    const tp_process *p = &run.procs[0];
    tp_comm_time *tm = resolved(p, N);
    for (size_t i = 0; i < N; i++) {
        uint64_t t = p->comm[i].start;
        if (i < 24) {
            assert_int_equal(tm[i].src, TP_COMM_TIME_KERNEL);
            assert_int_equal(tm[i].start, t + 500 * US);
        } else {
            assert_int_equal(tm[i].src, TP_COMM_TIME_HOST);
        }
    }
    free(tm);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* The id of communicator c of test_many_communicators: spread over 64 bits (splitmix64's
 * mixing), as NCCL's hashes of its unique ids are. */
static uint64_t comm_id(int c) {
    uint64_t z = (uint64_t)(c + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* 400 communicators, two AllReduces each, issued 100 us apart in turn (the first op of every
 * communicator, then the second), each with its kernel on a stream of the communicator's own
 * 20 us after the issue; every fifth communicator's records are written latest first, so
 * that its ops must be put back in issue order. Each op is timed by its own kernel. */
static void test_many_communicators(void **state) {
    (void)state;
    enum { NC = 400, K = 2 };
    char dir[512];
    synth_file *f = rank_file(dir, sizeof dir, "comm-many", 23, 0, 2);
    for (int c = 0; c < NC; c++)
        for (int q = 0; q < K; q++) {
            int k = c % 5 ? q : K - 1 - q;
            uint64_t t = T0 + (uint64_t)(k * NC + c) * 100 * US;
            tprof_pl_comm op = comm(TPROF_COMM_ALLREDUCE, comm_id(c), 2, 0, MiB, t + 5 * US);
            synth_comm(f, 1, t, &op, NULL);
            synth_kernel(f, 2, t + 20 * US, t + 60 * US, 0, 100 + (uint32_t)c, 0, K_AR);
        }
    synth_end_of_file(f, T0 + (uint64_t)(K * NC + 1) * 100 * US, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    cJSON *rep = report(dir, &run);
    const tp_process *p = &run.procs[0];
    tp_comm_time *tm = resolved(p, NC * K);
    for (size_t i = 0; i < NC * K; i++) {
        assert_int_equal(tm[i].src, TP_COMM_TIME_KERNEL);
        assert_int_equal(tm[i].start, p->comm[i].start + 20 * US);
        assert_int_equal(p->comm[i].comm_hash, comm_id((int)p->gpu[tm[i].kernel].stream - 100));
    }
    free(tm);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* 200 communicators on one stream (a job that passes the same stream to every group), five
 * AllReduces each: in each round every communicator issues one op, 1 us after the one
 * before, and the GPU runs them in issue order 500 us later, 20 us each. Communicators are
 * served in the order of their first op, and each op's first kernel at or after its issue is
 * one an earlier communicator took: communicator c skips c taken kernels to its own. */
static void test_shared_stream(void **state) {
    (void)state;
    enum { NC = 200, K = 5 };
    const uint64_t round = 10 * MS;
    char dir[512];
    synth_file *f = rank_file(dir, sizeof dir, "comm-shared", 24, 0, 2);
    for (int q = 0; q < K; q++)
        for (int c = 0; c < NC; c++) {
            uint64_t t = T0 + (uint64_t)q * round + (uint64_t)c * US;
            tprof_pl_comm op = comm(TPROF_COMM_ALLREDUCE, comm_id(c), 2, 0, MiB, t + 5 * US);
            synth_comm(f, 1, t, &op, NULL);
            uint64_t k0 = T0 + (uint64_t)q * round + 500 * US + (uint64_t)c * 20 * US;
            synth_kernel(f, 2, k0, k0 + 15 * US, 0, 7, 0, K_AR);
        }
    synth_end_of_file(f, T0 + (uint64_t)(K + 1) * round, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    cJSON *rep = report(dir, &run);
    const tp_process *p = &run.procs[0];
    tp_comm_time *tm = resolved(p, NC * K);
    for (size_t i = 0; i < NC * K; i++) {
        uint64_t c = (p->comm[i].start - T0) % round / US;
        assert_int_equal(p->comm[i].comm_hash, comm_id((int)c));
        assert_int_equal(tm[i].src, TP_COMM_TIME_KERNEL);
        assert_int_equal(tm[i].start, p->comm[i].start + 500 * US + c * 19 * US);
    }
    free(tm);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* Two communicators on one stream, capture on from 10 to 20 ms. A issues an AllReduce at 1 ms
 * (capture off: it takes no kernel) and one at 12 ms, B one at 11 ms; the stream runs two
 * AllReduce kernels, at 13 and 14 ms. Communicators are served in the order of their first
 * op, A's at 1 ms though that op can take no kernel: A's second op takes the kernel of 13
 * ms, and B the next. A GEMM on a second device makes each op's device its communicator's. */
static void test_served_by_first_op(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = rank_file(dir, sizeof dir, "comm-first", 25, 0, 2);
    synth_meta(f, "kernel_steps", "1-1"); /* a plan: capture off until its window */
    capture_windows(f, (const uint64_t[]){T0 + 10 * MS, T0 + 20 * MS}, 1);
    const uint64_t issue[3] = {T0 + MS, T0 + 11 * MS, T0 + 12 * MS};
    const uint64_t hash[3] = {0xA, 0xB, 0xA};
    for (int i = 0; i < 3; i++) {
        tprof_pl_comm c = comm(TPROF_COMM_ALLREDUCE, hash[i], 2, 0, MiB, issue[i] + 50 * US);
        synth_comm(f, 1, issue[i], &c, NULL);
    }
    synth_kernel(f, 2, T0 + 13 * MS, T0 + 13 * MS + 500 * US, 0, 9, 0, K_AR);
    synth_kernel(f, 2, T0 + 14 * MS, T0 + 14 * MS + 500 * US, 0, 9, 0, K_AR);
    synth_kernel(f, 2, T0 + 15 * MS, T0 + 16 * MS, 1, 7, 0, K_GEMM); /* a second device */
    synth_end_of_file(f, T0 + 30 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    cJSON *rep = report(dir, &run);
    tp_comm_time *tm = resolved(&run.procs[0], 3);
    assert_int_equal(tm[0].src, TP_COMM_TIME_HOST);
    assert_int_equal(tm[2].src, TP_COMM_TIME_KERNEL);
    assert_int_equal(tm[2].start, T0 + 13 * MS);
    assert_int_equal(tm[1].src, TP_COMM_TIME_KERNEL);
    assert_int_equal(tm[1].start, T0 + 14 * MS);
    /* A's first op ran on the device of A's stream (of two), though it took no kernel */
    assert_int_equal(tm[0].device, 0);
    free(tm);
    cJSON_Delete(rep);
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
        cmocka_unit_test(test_match_within_capture),
        cmocka_unit_test(test_match_past_window_list),
        cmocka_unit_test(test_match_lost_at_list_end),
        cmocka_unit_test(test_many_communicators),
        cmocka_unit_test(test_shared_stream),
        cmocka_unit_test(test_served_by_first_op),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
