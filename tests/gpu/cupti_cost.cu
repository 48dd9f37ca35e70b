// cupti_cost.cu — host cost per kernel launch under different CUPTI set-ups, one process per
// mode (CUPTI allows one client per process), to find what the runtime-call records of full
// capture cost and whether CUPTI's callback API records launches more cheaply.
//
//   cupti_cost MODE [LAUNCHES]
//   none          no CUPTI in the process (also the mode to use under CUDA_INJECTION64_PATH)
//   act_kernel    activity: concurrent kernels
//   act_runtime   activity: runtime calls, cudaLaunchKernel only
//   act_both      activity: kernels + runtime cudaLaunchKernel (what full capture records)
//   cb_empty      callback API on cudaLaunchKernel, callback does nothing
//   cb_record     callback API: enter/exit timestamps + a 32-byte record per launch
//   cb_kernel     cb_record + activity kernels (a possible full capture)
// Prints the median over 20 batches of the launch loop's host time per launch (ns); the
// GPU runs each empty kernel in ~1-2 us, batches of 500 then a synchronize.
#include <cuda_runtime.h>
#include <cupti.h>
#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

__global__ void empty_kernel(int *p) { if (p) *p = 1; }

static unsigned long long now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}
static unsigned long long records;
static void CUPTIAPI buf_req(uint8_t **b, size_t *sz, size_t *mx) {
    *sz = 8 << 20; *b = (uint8_t *)aligned_alloc(8, *sz); *mx = 0;
}
static void CUPTIAPI buf_done(CUcontext, uint32_t, uint8_t *b, size_t, size_t valid) {
    CUpti_Activity *r = NULL;
    while (cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS) records++;
    free(b);
}
struct rec { unsigned long long start, end; uint32_t corr, tid; };
static thread_local unsigned long long t_enter;
static rec *ring; static size_t ring_n, ring_i;
static int do_record;
static void CUPTIAPI on_cb(void *, CUpti_CallbackDomain, CUpti_CallbackId, const void *data) {
    if (!do_record) return;
    const CUpti_CallbackData *d = (const CUpti_CallbackData *)data;
    if (d->callbackSite == CUPTI_API_ENTER) { t_enter = now_ns(); return; }
    rec *r = &ring[ring_i++ & (ring_n - 1)];
    r->start = t_enter; r->end = now_ns(); r->corr = d->correlationId; r->tid = 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "none";
    int batches = 20, per = 500;
    if (argc > 2) per = atoi(argv[2]);
    ring_n = 1 << 20; ring = (rec *)calloc(ring_n, sizeof(rec));
    bool act_k =
        !strcmp(mode, "act_kernel") || !strcmp(mode, "act_both") || !strcmp(mode, "cb_kernel");
    bool act_r = !strcmp(mode, "act_runtime") || !strcmp(mode, "act_both");
    bool cb = !strncmp(mode, "cb_", 3);
    do_record = strcmp(mode, "cb_empty") != 0;
    if (act_k || act_r) {
        cuptiActivityRegisterCallbacks(buf_req, buf_done);
        if (act_k) cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        if (act_r) {
            cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
            for (CUpti_CallbackId c = 1; c < CUPTI_RUNTIME_TRACE_CBID_SIZE; c++)
                cuptiActivityEnableRuntimeApi(c,
                                              c == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
        }
    }
    if (cb) {
        CUpti_SubscriberHandle sub;
        CUptiResult r = cuptiSubscribe(&sub, (CUpti_CallbackFunc)on_cb, NULL);
        if (r != CUPTI_SUCCESS) { printf("%s: subscribe failed %d\n", mode, (int)r); return 1; }
        cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API,
                            CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
    }
    cudaStream_t s;
    cudaStreamCreate(&s);
    for (int i = 0; i < 2000; i++) empty_kernel<<<1, 1, 0, s>>>(NULL); // warm up
    cudaStreamSynchronize(s);
    std::vector<double> per_launch;
    for (int b = 0; b < batches; b++) {
        unsigned long long t = now_ns();
        for (int i = 0; i < per; i++) empty_kernel<<<1, 1, 0, s>>>(NULL);
        per_launch.push_back((double)(now_ns() - t) / per);
        cudaStreamSynchronize(s);
    }
    std::sort(per_launch.begin(), per_launch.end());
    if (act_k || act_r) cuptiActivityFlushAll(1);
    printf("%-12s %7.1f ns per launch (median of %d batches of %d; min %.1f max %.1f), "
           "%llu activity records, %zu callback records\n",
           mode, per_launch[batches / 2], batches, per, per_launch[0], per_launch[batches - 1],
           records, ring_i);
    return 0;
}
