/*
 * test_comm_apart.c — a rank section whose communication ops are read apart, in passes over
 * its file (comm.h, tp_comm_stream_open), gives the report a section holding every op gives:
 * the JSON, text and HTML byte for byte, on synthetic runs of capture windows, communicators
 * sharing streams, fused launches, ops past a window's end, GPU intervals with a varying
 * placement error, and two devices, the NCCL ops recorded by the plugin or by torch alone,
 * MPI or gloo ops beside them (blocking, nonblocking, unfinished), or MPI calls alone (a CPU
 * job's); and a file whose ops need each other (a communicator's ops out of issue order, a
 * device with kernels but no NCCL kernel while ops have GPU intervals, torch's ops beside
 * MPI's) is read whole instead, the same again. The slim load keys every such file's ops as
 * it reads them, but those with torch's ops beside MPI's.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/comm.h"
#include "analysis/model.h"
#include "analysis/report.h"
#include "format/format.h"
#include "slim_runs.h"
#include "synth.h"


enum { NSTEPS = 40, NCOMM = 5, PER_STEP = 30 };

static uint64_t g_rs;
static uint64_t rnd(void) {
    g_rs ^= g_rs << 13;
    g_rs ^= g_rs >> 7;
    g_rs ^= g_rs << 17;
    return g_rs;
}

/* How a run's files are made. */
typedef struct shape {
    int mpi;      /* an MPI op a step (host-timed: the exposure's and breakdown's spans) */
    int gloo;     /* a torch.distributed op over gloo a step (host-timed too) */
    int disorder; /* one communicator's ops written out of issue order */
    int bare_gpu; /* a device with kernels but no NCCL kernel */
    int twins;    /* torch's enqueue-flagged records of the first calls, as a PyTorch job's */
    int torch_nccl; /* the NCCL ops recorded by torch alone (enqueue-flagged, no GPU interval):
                     * a PyTorch job without NCCL's profiler plugin */
    int unknown;    /* an op of a source no reader knows (a later writer's), before the rest */
    int host_only;  /* a CPU job of MPI calls alone: no GPU record, no NCCL op */
    int blocking;   /* its calls all blocking (no nonblocking one) */
} shape;

/* An all-reduce of rank r (of 2) on communicator hash, of `bytes`, from `source`. */
static tprof_pl_comm op_of(int r, uint64_t hash, uint64_t bytes, uint32_t source) {
    tprof_pl_comm o;
    memset(&o, 0, sizeof o);
    o.op = TPROF_COMM_ALLREDUCE;
    o.comm_hash = hash;
    o.nranks = 2;
    o.rank = (uint32_t)r;
    o.bytes = bytes;
    o.peer = TPROF_COMM_NO_PEER;
    o.source = source;
    return o;
}

/* An NCCL op's source and flags as sh records it. */
static void nccl_source(tprof_pl_comm *op, const shape *sh) {
    op->source = sh->torch_nccl ? TPROF_COMM_SRC_TORCH : TPROF_COMM_SRC_NCCL;
    op->flags = sh->torch_nccl ? TPROF_COMM_F_ENQUEUE : 0;
}

static const char *kernel_of(uint32_t op) {
    return op == TPROF_COMM_ALLGATHER ? "ncclDevKernel_AllGather_RING_LL(x)"
                                      : "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)";
}

/* Host-timed op k of step s (from `source`) on one of `ncomms` communicators, at t on the
 * host: blocking mostly, some nonblocking (in flight past the next ones: their span is
 * overlapped communication on the host basis) and some unfinished (no span). */
static void host_op(synth_file *f, int r, uint32_t source, int ncomms, uint32_t seq,
                    uint64_t t, int blocking) {
    tprof_pl_comm m = op_of(r, 0x77 + rnd() % (uint64_t)ncomms, 64, source);
    m.op = rnd() % 3 ? TPROF_COMM_ALLREDUCE : TPROF_COMM_BARRIER;
    m.seq = seq;
    m.end_ns = t + 100 * US + rnd() % (200 * US);
    uint64_t kind = rnd() % 8;
    if (kind == 0 && !blocking) m.flags |= TPROF_COMM_F_NONBLOCKING, m.end_ns += 600 * US;
    if (kind == 1) m.flags |= TPROF_COMM_F_UNFINISHED, m.end_ns = t;
    synth_comm(f, 1, t, &m, NULL);
}

/* Rank r's file: 40 steps of 10 ms, GPU activity captured in steps 5-9 and 20-24 (a plan,
 * so capture is off before), 30 collectives a step over 5 communicators on 3 streams of 2
 * devices, each op's kernel recorded when it was issued in a window (some starting after
 * the window closed), a fused pair now and then, GPU intervals with a varying placement
 * error, and a GEMM on each device. */
static void rank_file_of(const char *dir, int r, const shape *sh) {
    synth_file *f = synth_open(dir, "h", 4000 + r, RT0, T0);
    assert_non_null(f);
    synth_rank(f, r, 2);
    synth_thread(f, 1, 4000 + r);
    synth_thread(f, 2, 5000 + r);
    if (!sh->host_only) {
        synth_meta(f, "capability.cupti", "activity capture on: 8 kinds");
        synth_meta(f, "kernel_steps", "5-9,20-24");
        char w[256];
        snprintf(w, sizeof w, "%llu-%llu,%llu-%llu", (unsigned long long)(T0 + 50 * MS),
                 (unsigned long long)(T0 + 100 * MS), (unsigned long long)(T0 + 200 * MS),
                 (unsigned long long)(T0 + 250 * MS));
        synth_meta(f, "gpu_capture.windows", w);
    }
    uint32_t seq[NCOMM] = {0};
    if (sh->unknown) {
        tprof_pl_comm u = op_of(r, 0x4000, 8, 9);
        u.end_ns = T0 + 15 * US;
        synth_comm(f, 1, T0 + 10 * US, &u, NULL);
    }
    for (int k = 0; sh->twins && k < 3; k++) { /* torch saw each group's first call */
        tprof_pl_comm tw = op_of(r, 0x3000 + (uint64_t)k, 4, TPROF_COMM_SRC_TORCH);
        tw.flags = TPROF_COMM_F_ENQUEUE;
        tw.end_ns = T0 + (uint64_t)(k + 1) * 30 * US;
        synth_comm(f, 1, T0 + (uint64_t)(k + 1) * 20 * US, &tw, NULL);
    }
    for (int s = 0; s < NSTEPS; s++) {
        uint64_t b = T0 + (uint64_t)s * 10 * MS;
        synth_step_begin(f, 1, b, (uint64_t)s);
        if (sh->host_only) { /* 8 calls a step, 1 ms apart */
            for (int k = 0; k < 8; k++)
                host_op(f, r, TPROF_COMM_SRC_MPI, 3, (uint32_t)(8 * s + k),
                        b + (uint64_t)(1 + k) * MS, sh->blocking);
            synth_step_end(f, 1, b + 10 * MS, (uint64_t)s);
            continue;
        }
        int captured = (s >= 5 && s <= 9) || (s >= 20 && s <= 24);
        if (captured && sh->bare_gpu)
            synth_kernel(f, 2, b + 100 * US, b + 2 * MS, 2, 7, 0, "ampere_bf16_s16816gemm_128x128");
        if (captured)
            for (uint32_t d = 0; d < 2; d++)
                synth_kernel(f, 2, b + 100 * US, b + 3 * MS, d, 7, 0,
                             "ampere_bf16_s16816gemm_128x128");
        uint64_t t = b + 200 * US;
        for (int k = 0; k < PER_STEP; k++) {
            int c = (int)(rnd() % NCOMM);
            int fused = k && rnd() % 6 == 0;
            t += fused ? 2 * US : (uint64_t)(50 + rnd() % 200) * US;
            tprof_pl_comm op = op_of(r, 0x1000 + (uint64_t)c, 0, 0);
            op.op = rnd() % 4 ? TPROF_COMM_ALLREDUCE : TPROF_COMM_ALLGATHER;
            op.bytes = 1ull << (12 + rnd() % 10);
            op.count = op.bytes / 4;
            nccl_source(&op, sh);
            op.dtype = TPROF_DTYPE_FLOAT32;
            op.seq = seq[c]++;
            op.end_ns = t + (uint64_t)(5 + rnd() % 20) * US;
            uint64_t ks = t + (uint64_t)(rnd() % 80) * US;
            uint64_t ke = ks + (uint64_t)(20 + rnd() % 60) * US;
            if (rnd() % 2 && !sh->torch_nccl) {
                op.flags |= TPROF_COMM_F_GPU_TIME;
                uint64_t off = (uint64_t)(25 + rnd() % 6) * US + rnd() % 1000;
                op.gpu_start_ns = ks + off;
                op.gpu_end_ns = ke + off;
            }
            /* a kernel is recorded when launched while capture was on (the window's end
             * may fall before it starts) */
            uint64_t ws = T0 + (s < 15 ? 50 : 200) * MS;
            if (!fused && t >= ws && t < ws + 50 * MS)
                synth_kernel(f, 2, ks, ke, (uint32_t)(c % 2), 100 + (uint32_t)(c % 3), 0,
                             kernel_of(op.op));
            synth_comm(f, 1, t, &op, NULL);
        }
        for (int h = 0; h < 2; h++)
            if (h ? sh->gloo : sh->mpi)
                host_op(f, r, h ? TPROF_COMM_SRC_TORCH : TPROF_COMM_SRC_MPI, 2, (uint32_t)s,
                        b + (900 + 1000 * (uint64_t)h) * US, 0);
        if (s == 0 || s == 5) { /* communicators 0x2000 and 0x2001 on one stream */
            tprof_pl_comm op = op_of(r, 0, 8192, 0);
            nccl_source(&op, sh);
            for (int k = s ? 0 : 1; k < 2; k++) {
                op.comm_hash = 0x2001 - (uint64_t)k; /* B, then A */
                op.seq = s && k ? 1 : 0;
                op.end_ns = b + (150 + 10 * (uint64_t)k) * US + 5 * US;
                synth_comm(f, 1, b + (150 + 10 * (uint64_t)k) * US, &op, NULL);
            }
            if (s)
                for (int k = 0; k < 2; k++)
                    synth_kernel(f, 2, b + (400 + 100 * (uint64_t)k) * US,
                                 b + (430 + 130 * (uint64_t)k) * US, 0, 200, 0,
                                 kernel_of(TPROF_COMM_ALLREDUCE));
        }
        synth_step_end(f, 1, b + 10 * MS, (uint64_t)s);
    }
    if (sh->disorder) { /* an op of communicator 0 issued before its last one, written after */
        tprof_pl_comm op = op_of(r, 0x1000, 4096, 0);
        nccl_source(&op, sh);
        op.seq = seq[0]++;
        op.end_ns = T0 + 5 * MS + 10 * US;
        synth_comm(f, 1, T0 + 5 * MS, &op, NULL);
    }
    synth_end_of_file(f, T0 + (NSTEPS + 1) * 10 * MS, 0);
    assert_int_equal(synth_close(f), 0);
}

/* The run's report as the command renders it, its sections holding at most comm_ops ops
 * (SIZE_MAX: every one), streamed when `stream`. */
static char *render(const char *dir, size_t comm_ops, int stream) {
    tp_run run;
    char err[512];
    const char *ops[] = {dir};
    assert_int_equal(tp_run_load_slim(ops, 1, &run, err, sizeof err), 0);
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.threads = 2;
    o.comm_ops = comm_ops;
    o.stream_sections = stream ? 1 : -1;
    char *buf = slim_render_str(&run, &o);
    tp_run_free(&run);
    return buf;
}

/* The report of the run in dir loaded whole (tp_run_load: every op held from the start), as
 * render gives it. */
static char *render_whole(const char *dir) {
    tp_run run;
    char err[512];
    assert_int_equal(tp_run_load(dir, &run, err, sizeof err), 0);
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.threads = 2;
    char *buf = slim_render_str(&run, &o);
    tp_run_free(&run);
    return buf;
}

/* The run made as sh says gives the same report whether its ops are read apart or not, and
 * loaded whole (so that what the slim load keyed of its ops is checked too);
 * `apart`: whether its sections read them apart (each rank's, once a render); `again`:
 * whether the slim load reads its files again with their ops (tp_slim_comm_again: those
 * of torch's ops that a whole load keeps depend on metadata). */
static void same_either_way_again(const char *tag, uint64_t seed, const shape *sh, int apart,
                                  int again) {
    char dir[] = "/tmp/tprof-comm-apart-XXXXXX";
    assert_non_null(mkdtemp(dir));
    g_rs = seed * 2654435761ull + 88172645463325252ull;
    for (int r = 0; r < 2; r++) rank_file_of(dir, r, sh);
    size_t again0 = tp_slim_comm_again();
    char *ref = render(dir, SIZE_MAX, 0);
    if (again) assert_true(tp_slim_comm_again() >= again0 + 2);
    else assert_int_equal(tp_slim_comm_again(), again0);
    char *whole = render_whole(dir);
    if (strcmp(ref, whole)) fprintf(stderr, "%s (seed %llu): slim != whole\n", tag,
                                    (unsigned long long)seed);
    assert_string_equal(ref, whole);
    free(whole);
    for (int stream = 0; stream < 2; stream++) {
        size_t before = tp_comm_streams_opened();
        char *got = render(dir, 16, stream);
        size_t opened = tp_comm_streams_opened() - before;
        if (strcmp(ref, got)) {
            size_t i = 0;
            while (ref[i] && ref[i] == got[i]) i++;
            size_t from = i > 300 ? i - 300 : 0;
            fprintf(stderr, "%s (seed %llu, streamed %d): differs at byte %zu:\nwhole: %.600s\n"
                            "apart: %.600s\n",
                    tag, (unsigned long long)seed, stream, i, ref + from, got + from);
        }
        assert_string_equal(ref, got);
        /* each rank's section once (the spilled report's, slim_spilled_same, once more) */
        if (apart) assert_true(opened >= 2);
        else assert_int_equal(opened, 0);
        free(got);
    }
    free(ref);
    synth_rmtree(dir);
}

static void same_either_way(const char *tag, uint64_t seed, const shape *sh, int apart) {
    same_either_way_again(tag, seed, sh, apart, 0);
}

static void test_apart_same(void **state) {
    (void)state;
    for (uint64_t seed = 1; seed <= 6; seed++) same_either_way("apart", seed, &(shape){0}, 1);
    /* a PyTorch job's: torch's records of the first calls are the plugin's twins */
    same_either_way("torch's twins", 11, &(shape){.twins = 1}, 1);
    /* host-timed ops beside NCCL's: their spans kept, the exposure's and breakdown's */
    same_either_way("MPI ops", 7, &(shape){.mpi = 1}, 1);
    /* a CPU job of MPI calls alone: the exposure on the host basis from the spans kept */
    for (uint64_t seed = 18; seed <= 20; seed++)
        same_either_way("MPI calls alone", seed, &(shape){.host_only = 1}, 1);
    same_either_way("blocking MPI calls alone", 21, &(shape){.host_only = 1, .blocking = 1}, 1);
    same_either_way("gloo ops", 8, &(shape){.gloo = 1, .twins = 1}, 1);
    /* a PyTorch job without the plugin: torch's NCCL ops are the file's own */
    same_either_way("torch's NCCL ops alone", 12, &(shape){.torch_nccl = 1}, 1);
    same_either_way("torch's NCCL and gloo ops", 13, &(shape){.torch_nccl = 1, .gloo = 1}, 1);
    /* an op of no known source first: torch's ops are then not alone, the slim load reads
     * the file again with them (a whole load keeps every op of such a file) */
    same_either_way_again("an unknown source's op, torch's NCCL ops", 16,
                          &(shape){.torch_nccl = 1, .unknown = 1}, 1, 1);
    same_either_way("an unknown source's op, the plugin's ops", 17, &(shape){.unknown = 1}, 1);
}

static void test_whole_when_needed(void **state) {
    (void)state;
    same_either_way("out of issue order", 9, &(shape){.disorder = 1}, 0);
    same_either_way("a device without NCCL kernels", 10, &(shape){.bare_gpu = 1}, 0);
    /* torch's ops beside MPI's: its gloo ops are twins or not by their group's backend, its
     * NCCL ops kept; the slim load reads such a file again with its ops */
    same_either_way_again("gloo ops beside MPI's", 14, &(shape){.mpi = 1, .gloo = 1}, 0, 1);
    same_either_way_again("torch's NCCL ops beside MPI's", 15,
                          &(shape){.torch_nccl = 1, .mpi = 1}, 0, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_apart_same),
        cmocka_unit_test(test_whole_when_needed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
