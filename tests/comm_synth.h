/*
 * comm_synth.h — what the communication tests (test_comm_times.c, test_comm_groups.c)
 * share: synthetic collectives and rank files (tests/synth.h) with times in whole
 * nanoseconds from T0, the report built from them, and look-ups in its communication
 * sections that fail the test when a member is missing. Single-threaded (cmocka).
 */
#ifndef TPROF_TESTS_COMM_SYNTH_H
#define TPROF_TESTS_COMM_SYNTH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "analysis/model.h"
#include "format/format.h"
#include "synth.h"

/* Monotonic times of the synthetic files (ns), the files' realtime origin, sizes. */
static const uint64_t T0 = 1000000000ull, MS = 1000000ull, US = 1000ull;
static const uint64_t RT0 = 1700000000000000000ull;
static const uint64_t MiB = 1048576ull;

#define NEAR(a, b) assert_true(fabs((double)(a) - (double)(b)) < 1e-9)

/* A GEMM kernel, and an NCCL AllReduce kernel as CUPTI names them. */
#define K_GEMM "ampere_bf16_s16816gemm_128x128"
#define K_AR "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"

/* An NCCL collective of `bytes` (float32) on communicator `hash`, rank `rank` of `nranks`,
 * ending at `end` on the host (ring, simple, 4 channels, no peer). */
tprof_pl_comm comm(uint32_t op, uint64_t hash, uint32_t nranks, uint32_t rank,
                   uint64_t bytes, uint64_t end);
/* Gives c the GPU interval [s, e). */
void with_gpu(tprof_pl_comm *c, uint64_t s, uint64_t e);
/* A run directory with one rank file: process `pid` on host "h", rank `rank` of `world`. */
synth_file *rank_file(char *dir, size_t n, const char *tag, uint32_t pid, int rank,
                      int world);
/* steps [T0 + i*len, T0 + (i+1)*len) on thread 1 */
void steps(synth_file *f, int n, uint64_t len);
/* The run of dir loaded into *run (the caller frees it) and its report with no warm-up
 * step (the caller deletes it). */
cJSON *report(const char *dir, tp_run *run);
/* The communication section of rank i. */
cJSON *rank_comm(cJSON *rep, int i);
/* Member k of o, a number or a string. */
double num(const cJSON *o, const char *k);
const char *str(const cJSON *o, const char *k);
/* The row of op `op` in the rank communicator `id` ("0x..."). */
cJSON *rank_row(cJSON *c, const char *id, const char *op);
/* The run-level communicator `id`. */
cJSON *run_comm(cJSON *rep, const char *id);

#endif
