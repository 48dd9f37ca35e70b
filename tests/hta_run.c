/* hta_run.c — the synthetic run of hta_run.h. */
#include "hta_run.h"

#include <stdint.h>

#include "synth.h"

#define US 1000ull

int hta_write_run(const char *dir) {
    for (int rank = 0; rank < 2; rank++) {
        uint32_t pid = 100 + (uint32_t)rank;
        synth_file *f = synth_open(dir, "node", (int32_t)pid, HTA_RT0, HTA_MONO0);
        if (!f) return -1;
        synth_rank(f, rank, 2);
        synth_meta(f, "torch.pg.00000000000000aa", "backend=nccl size=2 ranks=0,1");
        synth_meta(f, "torch.pg_name.00000000000000aa", "default_pg");
        synth_meta(f, "torch.pg.00000000000000bb", "backend=gloo size=1 ranks=?");
        synth_meta(f, "cuda.0.name", "NVIDIA H200");
        synth_meta(f, "cuda.0.sm_count", "132");
        synth_meta(f, "cuda.0.memory_total_bytes", "150109880320");
        synth_meta(f, "cuda.0.compute_capability", "9.0");
        synth_thread(f, 1, pid);
        synth_thread_name(f, 1, HTA_MONO0, pid, "main");
        for (uint32_t k = 0; k < HTA_NSTEPS; k++) {
            uint64_t t = HTA_MONO0 + (HTA_T0_US + HTA_STEP_US * k) * US;
            uint32_t c = 10 * k + 1;
            synth_step_begin(f, 1, t, k);
            synth_push(f, 1, t + 100 * US, "forward", 0, 0);
            synth_push(f, 1, t + 150 * US, "layer0", 0, 0);
            synth_api(f, 1, t + 200 * US, t + 210 * US, pid, 211, c, "cudaLaunchKernel");
            synth_pop(f, 1, t + 2900 * US, 0);
            synth_pop(f, 1, t + 3000 * US, 0);
            synth_push(f, 1, t + 3100 * US, "backward", 0, 0);
            synth_api(f, 1, t + 3200 * US, t + 3210 * US, pid, 307, c + 1, "cuLaunchKernel");
            synth_api(f, 1, t + 6400 * US, t + 6410 * US, pid, 211, c + 2, "cudaLaunchKernel");
            synth_pop(f, 1, t + 7000 * US, 0);
            synth_push(f, 1, t + 7100 * US, "optimizer", 0, 0);
            synth_api(f, 1, t + 7200 * US, t + 7210 * US, pid, 211, c + 3, "cudaLaunchKernel");
            synth_pop(f, 1, t + 8000 * US, 0);
            synth_step_end(f, 1, t + HTA_STEP_US * US, k);
            synth_kernel(f, 2, t + 300 * US, t + (300 + HTA_FWD_US(rank)) * US, 0, 7, c,
                         "gemm_fwd");
            synth_kernel(f, 2, t + 3300 * US, t + 6300 * US, 0, 7, c + 1, "gemm_bwd");
            uint64_t nccl = t + (6500 + HTA_NCCL_LATE_US(rank)) * US;
            synth_kernel(f, 2, nccl, t + 7500 * US, 0, 20, c + 2,
                         "ncclKernel_AllReduce_RING_LL_Sum_float");
            synth_kernel(f, 2, t + 7300 * US, t + 7800 * US, 0, 7, c + 3, "adam");
        }
        synth_end_of_file(f, HTA_MONO0 + (HTA_T0_US + HTA_STEP_US * HTA_NSTEPS + 1000) * US, 0);
        if (synth_close(f) != 0) return -1;
    }
    return 0;
}
