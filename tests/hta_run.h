/*
 * hta_run.h — a synthetic two-rank GPU run whose every figure is known, for the tests of the
 * per-rank Chrome export that Holistic Trace Analysis reads (tests/test_chrome.c and the
 * hta_export test, tests/hta/).
 *
 * Both ranks: one host and one clock (start at HTA_RT0 realtime, HTA_MONO0 monotonic), a
 * main thread (os tid = pid: 100 + rank), three API steps of HTA_STEP_US µs from
 * HTA_T0_US after the start, each holding the phases forward, backward and optimizer (and an
 * NVTX range "layer0" inside forward), and in them four launches, each of one kernel:
 *   forward   cudaLaunchKernel at +200 µs -> gemm_fwd   stream 7,  +300 .. +300+FWD(rank)
 *   backward  cuLaunchKernel   at +3200   -> gemm_bwd   stream 7,  +3300 .. +6300
 *   backward  cudaLaunchKernel at +6400   -> ncclKernel_AllReduce_RING_LL_Sum_float
 *                                      stream 20, +6500+LATE(rank) .. +7500
 *   optimizer cudaLaunchKernel at +7200   -> adam       stream 7,  +7300 .. +7800
 * (times from the step's start; FWD(0) = 2000 µs, FWD(1) = 2500 µs; LATE(0) = 0, LATE(1) =
 * 100 µs: rank 1 reaches the all-reduce last, the straggler), every launch 10 µs.
 * Metadata: a torch.distributed group of both ranks (nccl), device 0 an H200.
 */
#ifndef TPROF_TESTS_HTA_RUN_H
#define TPROF_TESTS_HTA_RUN_H

#define HTA_RT0 1700000000000000000ull
#define HTA_MONO0 5000000000ull
#define HTA_T0_US 1000ull
#define HTA_STEP_US 10000ull
#define HTA_NSTEPS 3
#define HTA_FWD_US(rank) ((rank) ? 2500ull : 2000ull)
#define HTA_NCCL_LATE_US(rank) ((rank) ? 100ull : 0ull)

/* Writes the two rank files into dir. 0, or -1 (reason on stderr). */
int hta_write_run(const char *dir);

#endif
