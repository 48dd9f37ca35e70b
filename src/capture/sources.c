/*
 * sources.c — the table of capture sources built into libtrainprof (core/source.h).
 *
 * Adding a source: fill in a tprof__source in the source's own file, declare it below and
 * put it in the table; core needs no edit. A source built only under a condition (CUPTI
 * needs its headers) is listed under the same condition, so an absent source has no entry
 * and no stub.
 *
 * The order is the order of every loop, and core keeps it:
 *  - ticks, each flusher pass: the process sampler, NVML, the CUDA devices, the NCCL sweep,
 *    NVTX's count of registered strings past its limit;
 *  - flush, before the last pass of a shutdown or of a signal sent from outside: CUPTI's
 *    buffers, then the NCCL operations still waiting for their kernel channels, then that
 *    NVTX count.
 */
#include "../core/source.h"

extern const tprof__source tprof__source_procfs;
extern const tprof__source tprof__source_nvml;
extern const tprof__source tprof__source_cuda_devices;
#ifdef TPROF_HAVE_CUPTI
extern const tprof__source tprof__source_cupti;
#endif
extern const tprof__source tprof__source_nccl;
extern const tprof__source tprof__source_nvtx;

static const tprof__source *const g_table[] = {
    &tprof__source_procfs,
    &tprof__source_nvml,
    &tprof__source_cuda_devices,
#ifdef TPROF_HAVE_CUPTI
    &tprof__source_cupti,
#endif
    &tprof__source_nccl,
    &tprof__source_nvtx,
};

const tprof__source *const *tprof__sources(size_t *n) {
    *n = sizeof g_table / sizeof g_table[0];
    return g_table;
}
