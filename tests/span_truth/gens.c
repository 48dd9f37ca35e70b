/*
 * gens.c — synthetic rank files without measured steps for the GPU-record bound
 * (--gpu-records): many record kinds, devices and streams, written in 10 ms iterations.
 * Built as span_truth_gens (tests/span_truth.cmake); cases.sh and repro.sh run it.
 *   --iters N  --kernels K (compute kernels an iteration, names kA kB kC in turn)
 *   --streams S (kernels spread over S streams, overlapping)  --devices D
 *   --memcpy M (HtoD copies an iteration, 1 MB, 100 us, blocking cudaMemcpy each)
 *   --memset  --sync (a cudaDeviceSynchronize and its context sync record an iteration)
 *   --graph (every kernel a node of graph 7, launched by one cudaGraphLaunch an iteration)
 *   --overhead (a 3 ms CUPTI overhead record an iteration, from 8.5 ms: past its end)
 *   --zero (every other kernel of zero length)  --reverse (each iteration's records reversed)
 *   --comm-only (NCCL kernels alone)  --nccl N (NCCL kernels an iteration)
 *   --long (each iteration's first kernel runs 25 ms: past two iterations; --long-all: every
 *   compute kernel)  --tail (a plain kernel of 100 us on stream 7 at 9 ms an iteration: with
 *   --graph, the record outside the graph that bounds its nodes on that stream)
 *   --steps-rank R (rank R marks each iteration as a step)  --ranks R  --pause A-B (ms)
 *   --dir D
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "format/format.h"
#include "synth.h"

static const uint64_t T0 = 1000000000ull, US = 1000ull, MS = 1000000ull;
#define RT0 1700000000000000000ull
#define NCCL "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"

static int iters = 100, nk = 4, nstreams = 1, ndev = 1, nmemcpy = 0, memset_on = 0, sync_on = 0;
static int graph = 0, overhead = 0, zero = 0, reverse = 0, comm_only = 0, nccl = 1, longk = 0;
static int tail = 0;
static int steps_rank = -1, ranks = 1;
static const char *pause_spec;

typedef struct rec {
    int type;
    uint64_t s, e;
    uint32_t dev, stream, corr, kind, graph;
    uint64_t bytes;
    const char *name;
} rec;

static void put(synth_file *f, const rec *r) {
    tprof_pl_gpu pl = {r->e, r->bytes, r->dev, r->stream, r->corr, r->kind, 100, r->graph};
    const char *n = r->name ? r->name : "";
    synth_raw(f, 2, (uint16_t)r->type, TPROF_INLINE_NAME, r->s, &pl, sizeof pl, n, strlen(n) + 1);
}

static void write_rank(const char *dir, int rank) {
    synth_file *f = synth_open(dir, "h", 100 + rank, RT0, T0);
    synth_thread(f, 1, 100 + rank);
    synth_thread(f, 2, 300 + rank);
    synth_rank(f, rank, ranks);
    synth_meta(f, "capability.cupti", "activity capture on: 8 kinds");
    if (pause_spec) {
        double a, b;
        char v[64];
        sscanf(pause_spec, "%lf-%lf", &a, &b);
        snprintf(v, sizeof v, "%llu-%llu", (unsigned long long)(T0 + (uint64_t)(a * 1e6)),
                 (unsigned long long)(T0 + (uint64_t)(b * 1e6)));
        synth_meta(f, "gpu_capture.pauses", v);
    }
    synth_flush(f);
    uint32_t corr = 1;
    rec *v = malloc(sizeof *v * 4096);
    for (int k = 0; k < iters; k++) {
        uint64_t t = T0 + MS + (uint64_t)k * 10 * MS;
        size_t n = 0;
        if (pause_spec) {
            double a, b;
            sscanf(pause_spec, "%lf-%lf", &a, &b);
            if (t >= T0 + (uint64_t)(a * 1e6) && t < T0 + (uint64_t)(b * 1e6)) goto step;
        }
        if (steps_rank == rank) synth_step_begin(f, 1, t, (uint64_t)k);
        if (graph)
            v[n++] = (rec){TPROF_REC_GPU_API, t + 5 * US, t + 15 * US, 0, 0, corr, 311, 0, 0,
                           "cudaGraphLaunch"};
        for (int j = 0; !comm_only && j < nk; j++) {
            uint32_t c = corr + 1 + (uint32_t)j, st = 7 + (uint32_t)(j % nstreams);
            uint64_t ks = t + MS + (uint64_t)(j / nstreams) * 300 * US +
                          (uint64_t)(j % nstreams) * 50 * US;
            uint64_t kd = zero && j % 2 ? 0 : 200 * US;
            if (longk && (j == 0 || longk > 1)) kd = 25 * MS;
            if (!graph)
                v[n++] = (rec){TPROF_REC_GPU_API, t + 10 * US + (uint64_t)j * 20 * US,
                               t + 15 * US + (uint64_t)j * 20 * US, 0, 0, c, 211, 0, 0,
                               "cudaLaunchKernel"};
            const char *nm = j % 3 == 0 ? "kA" : j % 3 == 1 ? "kB" : "kC";
            v[n++] = (rec){TPROF_REC_GPU_KERNEL, ks, ks + kd, (uint32_t)(j % ndev), st,
                           graph ? corr : c, 0, graph ? 7u : 0u, 0, nm};
        }
        corr += 1 + (uint32_t)nk;
        if (tail) {
            v[n++] = (rec){TPROF_REC_GPU_API, t + 8900 * US, t + 8905 * US, 0, 0, corr, 211, 0, 0,
                           "cudaLaunchKernel"};
            v[n++] = (rec){TPROF_REC_GPU_KERNEL, t + 9 * MS, t + 9100 * US, 0, 7, corr, 0, 0, 0,
                           "kTail"};
            corr++;
        }
        for (int j = 0; j < nmemcpy; j++, corr++) {
            uint64_t cs = t + 6 * MS + (uint64_t)j * 150 * US;
            v[n++] = (rec){TPROF_REC_GPU_API, cs - 20 * US, cs + 110 * US, 0, 0, corr, 31, 0, 0,
                           "cudaMemcpy"};
            v[n++] = (rec){TPROF_REC_GPU_MEMCPY, cs, cs + 100 * US, 0, 20, corr, 1, 0, 1 << 20,
                           ""};
        }
        if (memset_on) {
            uint64_t ms = t + 7 * MS;
            v[n++] = (rec){TPROF_REC_GPU_API, ms - 10 * US, ms - 5 * US, 0, 0, corr, 41, 0, 0,
                           "cudaMemsetAsync"};
            v[n++] = (rec){TPROF_REC_GPU_MEMSET, ms, ms + 50 * US, 0, 21, corr, 0, 0, 4096, ""};
            corr++;
        }
        if (sync_on) {
            uint64_t ss = t + 7500 * US;
            v[n++] = (rec){TPROF_REC_GPU_API, ss, ss + 400 * US, 0, 0, corr, 165, 0, 0,
                           "cudaDeviceSynchronize"};
            v[n++] = (rec){TPROF_REC_GPU_SYNC, ss, ss + 400 * US, 0, 0, corr, 4, 0, 0, ""};
            corr++;
        }
        if (overhead)
            v[n++] = (rec){TPROF_REC_GPU_OVERHEAD, t + 8500 * US, t + 11500 * US,
                           TPROF_DEVICE_UNKNOWN, 0, 0, 1, 0, 0, "CUPTI buffer flush"};
        for (int q = 0; q < nccl; q++) {
            tprof_pl_comm cm;
            memset(&cm, 0, sizeof cm);
            cm.bytes = 1u << 20; cm.count = 1u << 18; cm.comm_hash = 0xabc;
            cm.nranks = (uint32_t)ranks; cm.op = TPROF_COMM_ALLREDUCE;
            cm.seq = (uint64_t)k * (uint64_t)nccl + (uint64_t)q;
            uint64_t cs = t + 8 * MS + (uint64_t)q * (1800 * US / (uint64_t)nccl);
            cm.end_ns = cs + 10 * US;
            synth_comm(f, 1, cs - 20 * US, &cm, NULL);
            v[n++] = (rec){TPROF_REC_GPU_KERNEL, cs, cs + 1500 * US / (uint64_t)nccl, 0, 13, 0, 0,
                           0, 0, NCCL};
        }
        for (size_t i = 0; i < n; i++) put(f, &v[reverse ? n - 1 - i : i]);
        if (steps_rank == rank) synth_step_end(f, 1, t + 10 * MS, (uint64_t)k);
    step:
        synth_flush(f);
    }
    free(v);
    synth_end_of_file(f, T0 + MS + (uint64_t)iters * 10 * MS + 50 * MS, 0);
    if (synth_close(f) != 0) exit(1);
}

int main(int argc, char **argv) {
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "0";
        if (!strcmp(a, "--dir")) dir = v, i++;
        else if (!strcmp(a, "--iters")) iters = atoi(v), i++;
        else if (!strcmp(a, "--kernels")) nk = atoi(v), i++;
        else if (!strcmp(a, "--streams")) nstreams = atoi(v), i++;
        else if (!strcmp(a, "--devices")) ndev = atoi(v), i++;
        else if (!strcmp(a, "--memcpy")) nmemcpy = atoi(v), i++;
        else if (!strcmp(a, "--nccl")) nccl = atoi(v), i++;
        else if (!strcmp(a, "--ranks")) ranks = atoi(v), i++;
        else if (!strcmp(a, "--steps-rank")) steps_rank = atoi(v), i++;
        else if (!strcmp(a, "--pause")) pause_spec = v, i++;
        else if (!strcmp(a, "--memset")) memset_on = 1;
        else if (!strcmp(a, "--sync")) sync_on = 1;
        else if (!strcmp(a, "--graph")) graph = 1;
        else if (!strcmp(a, "--overhead")) overhead = 1;
        else if (!strcmp(a, "--zero")) zero = 1;
        else if (!strcmp(a, "--reverse")) reverse = 1;
        else if (!strcmp(a, "--comm-only")) comm_only = 1;
        else if (!strcmp(a, "--long")) longk = 1;
        else if (!strcmp(a, "--long-all")) longk = 2;
        else if (!strcmp(a, "--tail")) tail = 1;
        else { fprintf(stderr, "bad arg %s\n", a); return 2; }
    }
    if (!dir || nk > 1000 || nstreams < 1 || ndev < 1) return 2;
    for (int r = 0; r < ranks; r++) write_rank(dir, r);
    return 0;
}
