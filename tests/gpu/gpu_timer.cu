// gpu_timer.cu — GPU-accurate Timers on a real GPU: a kernel that spins for ~20 ms is
// launched asynchronously between start and stop. A host timer sees only the launch; a
// CUDA-event timer sees the kernel (without any synchronize at start or stop); the
// Megatron-compatible synchronize mode sees it too. Build on the GPU machine:
//   nvcc -O2 -o gpu_timer tests/gpu/gpu_timer.cu -Iinclude -LBUILD -ltrainprof
#include <cstdio>
#include <cuda_runtime.h>

#include "trainprof.h"

__global__ void spin(long long cycles) {
    long long s = clock64();
    while (clock64() - s < cycles) {
    }
}

int main() {
    cudaFree(0);  // create the context
    int khz = 0;
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
    long long cycles = (long long)khz * 20;  // ~20 ms at the reported clock
    spin<<<1, 1>>>(1000);                   // load the module before timing anything
    cudaDeviceSynchronize();
    const char *names[3] = {"host", "cuda-events", "cuda-sync"};
    tprof_timing modes[3] = {TPROF_TIMING_HOST, TPROF_TIMING_CUDA_EVENTS, TPROF_TIMING_CUDA_SYNC};
    for (int m = 0; m < 3; m++) {
        tprof_timers *t;
        tprof_timers_create(2, TPROF_TIMERS_MAX, &t);
        int rc = tprof_timers_set_timing(t, modes[m], nullptr);
        tprof_timer *tm = tprof_timer_get(t, "spin", 2);
        cudaEvent_t a, b;
        cudaEventCreate(&a);
        cudaEventCreate(&b);
        double sum = 0, ref = 0;
        for (int i = 0; i < 5; i++) {
            cudaEventRecord(a);
            tprof_timer_start(tm, 0);
            spin<<<1, 1>>>(cycles);
            tprof_timer_stop(tm, 0);
            cudaEventRecord(b);
            cudaEventSynchronize(b);
            float ms = 0;
            cudaEventElapsedTime(&ms, a, b);
            ref += ms;
            sum += tprof_timer_elapsed(tm, 1, 0) * 1e3;
        }
        printf("%-12s set_timing rc=%d: timer %.3f ms per interval, "
               "CUDA events around it %.3f ms\n",
               names[m], rc, sum / 5, ref / 5);
        tprof_timers_destroy(t);
    }
    return 0;
}
