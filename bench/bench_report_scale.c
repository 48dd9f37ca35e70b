/*
 * bench_report_scale.c — the report at scale: a synthetic run of 8 ranks x
 * 1000 steps x 1000 kernels per step (about 8 million events) by default is written with the
 * tests' rank-file writer (tests/synth.c, which lays records out exactly as format.h says),
 * then the report is timed phase by phase as `trainprof report` makes it: tp_run_load_slim
 * (each file read once, its bulky records skipped), tp_report_make (each rank file read again
 * whole for its section, a few at a time on one thread per core, then the run-level
 * analyses), the text rendering and the HTML rendering. `--whole` times the run loaded whole
 * (tp_run_load) instead. Prints events per second, wall time per phase and the peak RSS
 * (getrusage); targets: the full report in at most 60 s and 1 GB at any size (and 10 s at the
 * default size).
 *
 * Each rank: a main thread with API steps of 10 ms; a CUPTI thread with 1000 kernels per
 * step on two streams (GEMMs, attention, elementwise, one NCCL AllReduce kernel) whose names
 * are interned strings as the library writes them; one NCCL AllReduce op per step; NVML
 * counters at 10 Hz in rank 0 (power, energy, utilisation, memory).
 *
 *     bench_report_scale [--ranks N] [--steps N] [--kernels N] [--threads N] [--whole]
 *                        [--ranges N | --flat N | --flat-top N] [--stream 1|-1] [--keep]
 *                        [--groups N] [--collectives N] [--dir DIR] [--launches]
 *                        [--gpu-records N] [--nvml N] [--windows N] [--torch] [--gloo]
 *                        [--mpi]
 *
 * --dir DIR reads the run already in DIR (written by an earlier --keep) instead of writing
 * one; --threads sets tp_report_opts.threads (0, the default: one per core). --ranges N
 * writes one rank recording N NVTX ranges instead (write_ranges_rank: the report of a huge
 * single rank file, whose section streams its ranges, report.c STREAM_SECTION_RANGES);
 * --flat N the same in a flat loop (write_flat_rank: nearly every range at depth 0 or 1),
 * --flat-top N with its ranges at the top level and no steps;
 * --stream 1 or -1 sets tp_report_opts.stream_sections (stream every section, or none).
 * --groups N puts the ranks' all-reduces on N communicators (rank r in group r % N, of
 * ranks / N ranks each, as data-parallel groups beside tensor parallelism): the run has N
 * times the collectives, each rank at 1 / N of them; --collectives N makes each step's one
 * all-reduce N (tensor parallelism's per layer), back to back before its kernel.
 * --nvml N adds the node sampler of the ranks' host with N samples of 8 GPUs' NVML metrics
 * (write_node_sampler), which every rank's NVML section reads and the merge holds.
 * --windows N gives each rank N capture windows, their list written as the runtime writes it
 * (write_windows). --torch records the all-reduces as torch.distributed's (torch_ops);
 * --gloo adds a gloo all-reduce a step (gloo_ops); --mpi records the all-reduces as MPI
 * calls (mpi_ops).
 * report.json and report.html are written into the run's directory.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "analysis/model.h"
#include "analysis/report.h"
#include "bench_common.h"
#include "export/html.h"
#include "format/format.h"
#include "synth.h"

static const uint64_t MS = 1000000ull;

static const char *const base_names[] = {
    "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
    "flash_fwd_kernel",
    "flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel",
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_",
    "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_14func_wrapper_tIfZNS0_15sum_kernel_implIfffEEvRNS_14TensorIteratorEEUlffE_EEjfLi4EEEEEvT1_",
    "void cunn_SoftMaxForward<4, float, float, float, Epilogue>",
    "layer_norm_fwd_kernel",
    "rms_norm_bwd_kernel",
    "elementwise_add_kernel",
};
#define NBASE (sizeof base_names / sizeof *base_names)
#define NNAMES 64 /* distinct kernel names: base names with a variant suffix */

/* --launches: each kernel has its launch, a cudaLaunchKernel runtime call on the main thread
 * with the kernel's correlation id, as CUPTI records one for every kernel of a real job (an
 * API record a kernel, which the report reads whole beside the kernel). */
static int launches;

/* --windows N: each rank's capture plan opened N windows of one step, spread over its steps,
 * and wrote their list as the runtime does (src/core/kwindow.c: gpu_capture.windows in pages
 * of 3,967 bytes, gpu_capture.windows.2, ..., the page being filled written again as each
 * window opens and closes), so that the loaders' hold of metadata written again and again is
 * measured: the last value of each page is what a rank file's reader keeps. */
static int nwindows;

/* --torch: the all-reduces recorded as trainprof.torch records NCCL calls when NCCL's
 * profiler plugin records none (torch.distributed source, enqueue-flagged): the slim load and
 * the sections hold them as a plugin-less PyTorch job's. */
static int torch_ops;

/* --gloo: each step also all-reduces over a gloo group (torch.distributed source, host-timed),
 * as Megatron-LM's gloo groups do beside NCCL's collectives. */
static int gloo_ops;

/* --mpi: the all-reduces recorded as MPI calls (host-timed, blocking), as a CUDA program's
 * MPI_Allreduce is by the PMPI layer: the sections keep their spans, the exposure's. */
static int mpi_ops;

static void write_windows(synth_file *f, int steps, uint64_t t0, uint64_t step_ns) {
    char page[3968], v[4100], key[48];
    size_t len = 0;
    unsigned pg = 1;
    unsigned long long left_out = 0;
    page[0] = 0;
    for (int w = 0; w < nwindows; w++) {
        uint64_t on = t0 + MS + (uint64_t)((int64_t)w * steps / nwindows) * step_ns,
                 off = on + step_ns;
        if (len + 43 >= sizeof page && pg < TPROF_META_PAGES) pg++, len = 0, page[0] = 0;
        if (len + 43 >= sizeof page) {
            snprintf(v, sizeof v, "%llu", ++left_out);
            synth_meta(f, "gpu_capture.windows_left_out", v);
            continue;
        }
        tprof__meta_page_key(key, sizeof key, "gpu_capture.windows", pg);
        snprintf(v, sizeof v, "%s%s%llu-", page, len ? "," : "", (unsigned long long)on);
        synth_meta(f, key, v);
        len += (size_t)snprintf(page + len, sizeof page - len, "%s%llu-%llu", len ? "," : "",
                                (unsigned long long)on, (unsigned long long)off);
        synth_meta(f, key, page);
    }
}

/* groups: the ranks' all-reduces are on that many communicators, rank r in group r % groups
 * (--groups); 1: one over all ranks. colls: all-reduces per step (--collectives). */
static int write_rank(const char *dir, int rank, int nranks, int steps, int kernels,
                      int groups, int colls) {
    uint64_t rt0 = 1700000000000000000ull, t0 = 1000000000ull;
    synth_file *f = synth_open(dir, "bench", 1000 + rank, rt0, t0);
    if (!f) return -1;
    synth_rank(f, rank, nranks);
    synth_meta(f, "local_rank", rank == 0 ? "0" : "1");
    synth_thread(f, 1, 1000 + rank);
    synth_thread(f, 2, 5000 + rank);
    synth_thread(f, 3, 9000 + rank);
    for (uint32_t i = 0; i < NNAMES; i++) {
        char name[256];
        snprintf(name, sizeof name, "%s%s%u", base_names[i % NBASE], i < NBASE ? "" : "_v", i);
        synth_string(f, 2, i + 1, name);
    }
    const char *nccl = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
    synth_string(f, 2, NNAMES + 1, nccl);
    synth_string(f, 2, NNAMES + 2, "cudaLaunchKernel");
    uint32_t corr = 1;
    uint64_t step_ns = 10 * MS, jitter = (uint64_t)rank * 3000;
    if (nwindows) write_windows(f, steps, t0, step_ns + jitter);
    double energy = 0;
    for (int s = 0; s < steps; s++) {
        uint64_t b = t0 + MS + (uint64_t)s * (step_ns + jitter);
        synth_step_begin(f, 1, b, (uint64_t)s);
        /* kernels back to back on stream 7, each slot 9 ms / kernels; the AllReduce last on
         * stream 13 */
        uint64_t slot = 9 * MS / (uint64_t)kernels;
        for (int k = 0; k < kernels - 1; k++) {
            uint64_t ks = b + (uint64_t)k * slot + 1000;
            tprof_pl_gpu pl = {ks + slot * 8 / 10 + (uint64_t)((s * 7 + k) % 13) * 10, 0, 0, 7, corr++, 0, 0, 0};
            synth_raw(f, 2, TPROF_REC_GPU_KERNEL, (uint32_t)(k % NNAMES) + 1, ks, &pl, sizeof pl, NULL, 0);
            if (launches) { /* 3 us, half a slot apart: each before its kernel, in the step */
                uint64_t ls = b + 100 + (uint64_t)k * (slot / 2);
                tprof_pl_gpu api = {ls + 3000, 0, TPROF_DEVICE_UNKNOWN, 0, pl.correlation, 211,
                                    1000u + (uint32_t)rank, 0};
                synth_raw(f, 2, TPROF_REC_GPU_API, NNAMES + 2, ls, &api, sizeof api, NULL, 0);
            }
        }
        uint64_t cs = b + 9 * MS;
        tprof_pl_gpu pl = {cs + 800000, 0, 0, 13, corr++, 0, 0, 0};
        synth_raw(f, 2, TPROF_REC_GPU_KERNEL, NNAMES + 1, cs, &pl, sizeof pl, NULL, 0);
        tprof_pl_comm c;
        memset(&c, 0, sizeof c);
        c.bytes = 64u << 20;
        c.count = 32u << 20;
        c.comm_hash = 0xabcdef + (uint64_t)(rank % groups);
        c.nranks = (uint32_t)((nranks - rank % groups + groups - 1) / groups);
        c.rank = (uint32_t)(rank / groups);
        c.op = TPROF_COMM_ALLREDUCE;
        if (torch_ops) {
            c.source = TPROF_COMM_SRC_TORCH;
            c.flags = TPROF_COMM_F_ENQUEUE;
        }
        if (mpi_ops) c.source = TPROF_COMM_SRC_MPI;
        /* one call of 30 us, or calls of 300 ns one after another, 400 ns apart */
        uint64_t dur = colls == 1 ? 30000 : 300;
        for (int q = 0; q < colls; q++) {
            c.seq = (uint32_t)(s * colls + q);
            c.end_ns = cs - 20000 - (uint64_t)(colls - 1 - q) * 400;
            synth_comm(f, 1, c.end_ns - dur, &c, NULL);
        }
        if (gloo_ops) {
            tprof_pl_comm g = c;
            g.source = TPROF_COMM_SRC_TORCH;
            g.flags = 0;
            g.comm_hash = 0x6100;
            g.bytes = 64;
            g.count = 16;
            g.seq = (uint32_t)s;
            g.end_ns = b + 9 * MS + 900000;
            synth_comm(f, 1, b + 9 * MS + 850000, &g, NULL);
        }
        synth_step_end(f, 1, b + step_ns, (uint64_t)s);
        if (rank == 0 && s % 10 == 0) {
            double w = 400 + (s % 7) * 5;
            energy += w * 0.1;
            synth_counter(f, 3, b, "gpu0.power_w", w);
            synth_counter(f, 3, b, "gpu0.energy_j", energy);
            synth_counter(f, 3, b, "gpu0.util_percent", 90);
            synth_counter(f, 3, b, "gpu0.mem_used_bytes", 60e9);
        }
        synth_flush(f); /* one chunk per thread and step: the writer's memory stays small */
    }
    synth_end_of_file(f, t0 + 2 * MS + (uint64_t)steps * (step_ns + jitter), 0);
    return synth_close(f);
}

/* --nvml N: the node sampler of host "bench" (trainprof run's NVML session) with N samples of
 * 8 GPUs x the 10 metrics of capture/nvml.c, spread evenly over [t0, t0 + span):
 * watts and joules from whole milliwatts and millijoules, a power that moves every sample,
 * the temperature, utilisation and memory moving too. 10 Hz for a day is 864,000 samples. */
static int write_node_sampler(const char *dir, uint64_t n, uint64_t span) {
    static const char *const metric[10] = {
        "power_w",        "power_instant_w", "energy_j", "util_percent",  "mem_util_percent",
        "mem_used_bytes", "sm_clock_mhz",    "temp_c",   "power_limit_w", "clock_event_reasons"};
    uint64_t rt0 = 1700000000000000000ull, t0 = 1000000000ull, mj[8] = {0}, seed = 1;
    synth_file *f = synth_open(dir, "bench", 900, rt0, t0);
    if (!f) return -1;
    synth_meta(f, "trainprof.role", "node-sampler");
    synth_thread(f, 1, 900);
    char names[8][10][48];
    for (int g = 0; g < 8; g++)
        for (int m = 0; m < 10; m++) snprintf(names[g][m], sizeof names[g][m], "gpu%d.%s", g, metric[m]);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t ts = t0 + (uint64_t)((double)span * (double)i / (double)n);
        for (int g = 0; g < 8; g++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            uint64_t mw = 350000 + (seed >> 40) % 300000;
            mj[g] += mw * (span / n) / 1000000000; /* mW x ns -> mJ */
            const double v[10] = {(double)mw / 1000.0, (double)(mw + (seed >> 50) % 9000) / 1000.0,
                                  (double)mj[g] / 1000.0, (double)(seed % 101),
                                  (double)((seed >> 8) % 101),
                                  60e9 + (double)((seed >> 30) % 64) * 2097152, 1980,
                                  45 + (double)((seed >> 20) % 25), 700, 0};
            for (int m = 0; m < 10; m++) synth_counter(f, 1, ts, names[g][m], v[m]);
        }
        if (i % 64 == 63) synth_flush(f);
    }
    synth_end_of_file(f, t0 + span, 0);
    if (synth_close(f) != 0) {
        fprintf(stderr, "cannot write the node sampler in %s\n", dir);
        return -1;
    }
    printf("  generated the node sampler: %llu samples of 8 GPUs x 10 metrics\n",
           (unsigned long long)n);
    return 0;
}

/* --ranges N: one rank recording about N NVTX ranges, 20003 a step of 10 ms (two million a
 * second): "train_step" (the steps), "forward" and "backward" inside it, 50 "layer" ranges in
 * each, and in each layer 159 ranges of 8 names ("op_0".."op_7", every fourth with a "kernel"
 * range inside), names interned as the library writes them. Its count of ranges into
 * *written. */
static int write_ranges_rank(const char *dir, uint64_t nranges, uint64_t *written) {
    enum { LAYERS = 50, OPS = 159, PER_STEP = 3 + 2 * LAYERS * (1 + OPS + (OPS + 3) / 4) };
    uint64_t rt0 = 1700000000000000000ull, t0 = 1000000000ull, n = 0;
    synth_file *f = synth_open(dir, "bench", 1000, rt0, t0);
    if (!f) return -1;
    synth_rank(f, 0, 1);
    synth_thread(f, 1, 1000);
    static const char *const names[] = {"train_step", "forward", "backward", "layer", "kernel",
                                        "op_0", "op_1", "op_2", "op_3", "op_4", "op_5",
                                        "op_6", "op_7"};
    for (uint32_t i = 0; i < sizeof names / sizeof *names; i++)
        synth_string(f, 1, i + 1, names[i]);
    uint64_t steps = (nranges + PER_STEP - 1) / PER_STEP;
    for (uint64_t s = 0; s < steps; s++) {
        uint64_t t = t0 + MS + s * 10 * MS; /* 400 ns an op: 10 ms a step */
        synth_push_sid(f, 1, t, 1, 0, 0);
        for (uint32_t ph = 0; ph < 2; ph++) {
            synth_push_sid(f, 1, t += 100, 2 + ph, 0, 0);
            for (int l = 0; l < LAYERS; l++) {
                synth_push_sid(f, 1, t += 100, 4, 0, 0);
                for (int k = 0; k < OPS; k++) {
                    synth_push_sid(f, 1, t += 50, 6 + (uint32_t)(k % 8), 0, 0);
                    if (k % 4 == 0) {
                        synth_push_sid(f, 1, t += 50, 5, 0, 0);
                        synth_pop(f, 1, t += 200, 0);
                        n++;
                    }
                    synth_pop(f, 1, t += 300, 0);
                }
                synth_pop(f, 1, t += 100, 0);
            }
            synth_pop(f, 1, t += 100, 0);
        }
        synth_pop(f, 1, t0 + MS + s * 10 * MS + 9900 * 1000, 0);
        n += 3 + 2 * LAYERS * (1 + OPS);
        synth_flush(f); /* one chunk a step: the writer's memory stays small */
    }
    synth_end_of_file(f, t0 + 2 * MS + steps * 10 * MS, 0);
    *written = n;
    return synth_close(f);
}

/* --flat N: one rank recording about N NVTX ranges in a flat loop, the shape whose ranges are
 * nearly all at depth 0 or 1: "train_step" (the steps, 1 ms each) holding 2000 ranges of 8
 * names ("op_0".."op_7", 400 ns each) side by side, two million a second; top (--flat-top N):
 * the same ranges at the top level, no step range around them (the report has no steps). Its
 * count of ranges into *written. */
static int write_flat_rank(const char *dir, uint64_t nranges, int top, uint64_t *written) {
    enum { OPS = 2000, PER_STEP = 1 + OPS };
    uint64_t rt0 = 1700000000000000000ull, t0 = 1000000000ull, n = 0;
    synth_file *f = synth_open(dir, "bench", 1000, rt0, t0);
    if (!f) return -1;
    synth_rank(f, 0, 1);
    synth_thread(f, 1, 1000);
    static const char *const names[] = {"train_step", "op_0", "op_1", "op_2", "op_3",
                                        "op_4",       "op_5", "op_6", "op_7"};
    for (uint32_t i = 0; i < sizeof names / sizeof *names; i++)
        synth_string(f, 1, i + 1, names[i]);
    uint64_t steps = (nranges + PER_STEP - 1) / PER_STEP;
    for (uint64_t s = 0; s < steps; s++) {
        uint64_t t = t0 + MS + s * MS;
        if (!top) synth_push_sid(f, 1, t, 1, 0, 0);
        for (int k = 0; k < OPS; k++) {
            synth_push_sid(f, 1, t += 50, 2 + (uint32_t)(k % 8), 0, 0);
            synth_pop(f, 1, t += 400, 0);
        }
        if (!top) synth_pop(f, 1, t0 + MS + s * MS + 990 * 1000, 0);
        n += top ? OPS : PER_STEP;
        synth_flush(f); /* one chunk a step: the writer's memory stays small */
    }
    synth_end_of_file(f, t0 + 2 * MS + steps * MS, 0);
    *written = n;
    return synth_close(f);
}

static double now_s(void) { return (double)bench_mono_ns() / 1e9; }

static double peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0; /* KiB on Linux */
}

static int usage(const char *argv0) {
    fprintf(stderr, "usage: %s [--ranks N] [--steps N] [--kernels N] [--threads N] "
                    "[--ranges N | --flat N | --flat-top N] [--stream 1|-1] [--whole] "
                    "[--keep] [--launches] [--torch] [--gloo] [--mpi] [--gpu-records N] "
                    "[--nvml N] [--windows N] [--groups N] [--collectives N] [--dir DIR]\n",
            argv0);
    return 2;
}

int main(int argc, char **argv) {
    int ranks = 8, steps = 1000, kernels = 1000, keep = 0, whole = 0, threads = 0, stream = 0;
    uint64_t nranges = 0, written = 0, gpu_records = 0, nvml = 0;
    int flat = 0, groups = 1, colls = 1;
    const char *given = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ranks") && i + 1 < argc) ranks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kernels") && i + 1 < argc) kernels = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--stream") && i + 1 < argc) stream = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ranges") && i + 1 < argc)
            nranges = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--flat") && i + 1 < argc)
            nranges = strtoull(argv[++i], NULL, 10), flat = 1;
        else if (!strcmp(argv[i], "--flat-top") && i + 1 < argc)
            nranges = strtoull(argv[++i], NULL, 10), flat = 2;
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc) given = argv[++i];
        else if (!strcmp(argv[i], "--groups") && i + 1 < argc) groups = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--collectives") && i + 1 < argc) colls = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--nvml") && i + 1 < argc) nvml = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--windows") && i + 1 < argc) nwindows = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--keep")) keep = 1;
        else if (!strcmp(argv[i], "--whole")) whole = 1;
        else if (!strcmp(argv[i], "--launches")) launches = 1;
        else if (!strcmp(argv[i], "--torch")) torch_ops = 1;
        else if (!strcmp(argv[i], "--gloo")) gloo_ops = 1;
        else if (!strcmp(argv[i], "--mpi")) mpi_ops = 1;
        else if (!strcmp(argv[i], "--gpu-records") && i + 1 < argc)
            gpu_records = strtoull(argv[++i], NULL, 10);
        else
            return usage(argv[0]);
    }
    if (ranks < 1 || steps < 2 || kernels < 2 || groups < 1 || groups > ranks ||
        colls < 1 || colls > 100000 || nwindows < 0 || nwindows > steps)
        return 2;
    bench_banner("bench_report_scale", "full report of a synthetic run (load, build, text, HTML)");
    char *dir = given ? strdup(given) : bench_mkdtemp("report-scale");
    if (!dir) return 1;
    if (given) keep = 1;
    double g0 = now_s();
    if (nranges && !given) {
        if ((flat ? write_flat_rank(dir, nranges, flat == 2, &written)
                  : write_ranges_rank(dir, nranges, &written)) != 0) {
            fprintf(stderr, "cannot write the synthetic run in %s\n", dir);
            return 1;
        }
        char fp[4200];
        snprintf(fp, sizeof fp, "%s/bench-1000.tprof", dir);
        printf("  generated 1 rank of %llu ranges (%lld bytes) in %s (%.1f s, not timed)\n",
               (unsigned long long)written, (long long)synth_file_size(fp), dir, now_s() - g0);
        ranks = 1;
    }
    for (int r = 0; !given && !nranges && r < ranks; r++)
        if (write_rank(dir, r, ranks, steps, kernels, groups, colls) != 0) {
            fprintf(stderr, "cannot write the synthetic run in %s\n", dir);
            return 1;
        }
    /* the sampler covers every rank's steps (the last rank's are the longest) */
    uint64_t span = 3 * MS + (uint64_t)steps * (10 * MS + (uint64_t)ranks * 3000);
    if (nvml && !given && !nranges && write_node_sampler(dir, nvml, span)) return 1;
    if (!given && !nranges)
        printf("  generated %d ranks x %d steps x %d kernels%s, %d all-reduce(s) a step on %d "
               "communicator(s), in %s (%.1f s, not timed)\n",
               ranks, steps, kernels, launches ? " with their launches" : "", colls, groups,
               dir, now_s() - g0);
    else
        printf("  reading the run in %s (%d ranks x %d steps x %d kernels expected)\n", dir,
               ranks, steps, kernels);
    printf("  %s load, %d section thread(s) (0: one per core)\n", whole ? "whole" : "slim",
           threads);
    double rss0 = peak_rss_mb();

    double t0 = now_s();
    tp_run run;
    char err[512];
    const char *ops[] = {dir};
    if ((whole ? tp_run_load_list(ops, 1, &run, err, sizeof err)
               : tp_run_load_slim(ops, 1, &run, err, sizeof err)) != 0) {
        fprintf(stderr, "load failed: %s\n", err);
        return 1;
    }
    double t1 = now_s();
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.threads = threads;
    o.stream_sections = stream;
    o.gpu_records = (size_t)gpu_records;
    tp_report tr;
    if (tp_report_make_spilled(&run, &o, &tr) != 0) return 1;
    double t2 = now_s();
    FILE *devnull = fopen("/dev/null", "w");
    if (!devnull) return 1;
    tp_report_write_text(&tr, devnull, 0);
    double t3 = now_s();
    char path[4200];
    snprintf(path, sizeof path, "%s/report.html", dir);
    FILE *hf = fopen(path, "w");
    if (!hf || tp_html_write(&tr, &o, hf) != 0) return 1;
    fclose(hf);
    double t4 = now_s();
    /* the document beside it, to compare the streamed and whole sections' (--stream) */
    snprintf(path, sizeof path, "%s/report.json", dir);
    FILE *jf = fopen(path, "w");
    if (!jf || tp_report_write_doc(&tr, jf) != 0) return 1;
    fclose(jf);
    snprintf(path, sizeof path, "%s/report.html", dir);
    fclose(devnull);
    uint64_t events = 0, dropped = 0;
    for (size_t i = 0; i < run.nprocs; i++) {
        events += run.procs[i].events;
        dropped += run.procs[i].dropped;
    }
    int64_t html_bytes = synth_file_size(path);
    /* what `trainprof summarize` spared: the files whose slim process the load took from
     * their summaries (none decoded), and the sections read from them */
    size_t nslim = 0;
    for (size_t i = 0; i < run.nprocs; i++) nslim += run.procs[i].slim != 0;
    char sums[160];
    snprintf(sums, sizeof sums, "  from summaries    %zu of %zu files, %zu of %zu sections\n",
             tr.res.slims_read, nslim, tr.res.summaries_read, tr.res.nranks);
    int all_sums = tr.res.nranks && tr.res.summaries_read == tr.res.nranks;
    tp_report_free(&tr);
    tp_run_free(&run);

    double total = t4 - t0, rss = peak_rss_mb();
    printf("  events %llu (dropped %llu)\n", (unsigned long long)events, (unsigned long long)dropped);
    printf("  %-17s %7.2f s  %8.2f M events/s\n", whole ? "tp_run_load" : "tp_run_load_slim",
           t1 - t0, (double)events / (t1 - t0) / 1e6);
    printf("  tp_report_make    %7.2f s  %8.2f M events/s%s\n", t2 - t1,
           (double)events / (t2 - t1) / 1e6,
           whole ? "" : all_sums ? " (sections from summaries)" : " (rank files read again)");
    fputs(sums, stdout);
    printf("  text rendering    %7.3f s\n", t3 - t2);
    printf("  HTML rendering    %7.3f s  (%lld bytes)\n", t4 - t3, (long long)html_bytes);
    printf("  full report       %7.2f s  %8.2f M events/s; peak RSS %.0f MB (%.0f MB before loading)\n",
           total, (double)events / total / 1e6, rss, rss0);
    /* a run read with --dir is of a size the options do not say: not held to the default's */
    if (!given && ranks == 8 && steps == 1000 && kernels == 1000)
        bench_target("full report, default size (load + build + text + HTML)", total, 10.0, " s");
    bench_target("full report (load + build + text + HTML)", total, 60.0, " s");
    bench_target("peak RSS", rss / 1024.0, 1.0, " GB");
    if (!keep) bench_rm_dir(dir);
    else printf("  kept %s\n", dir);
    free(dir);
    if (nranges) return events >= 2 * written ? 0 : 1; /* a push and a pop each */
    return events >= (uint64_t)ranks * (uint64_t)steps * (uint64_t)kernels ? 0 : 1;
}
