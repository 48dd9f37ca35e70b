/*
 * nvtx_prog.c — an independent program that knows nothing of trainprof: it uses only the
 * NVTX3 headers (header-only, from the CUDA toolkit), as PyTorch or NCCL do. The NVTX
 * integration test runs it under `trainprof run` and checks the exported trace.
 *
 * What it records (the test asserts each): thread names; "outer" containing three 10 ms
 * "sleep_10ms" and a wide-string range; a range in the named domain "mydomain" with a
 * registered string and a named category, on a second thread named "worker"; a
 * start/end range begun on the main thread and ended on the worker; a mark; a pop with
 * nothing pushed; and "left_open", never closed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static nvtxRangeId_t g_cross;
static nvtxDomainHandle_t g_domain;

static void sleep_ms(int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static void *worker(void *arg) {
    (void)arg;
    nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), "worker");
    nvtxStringHandle_t reg = nvtxDomainRegisterStringA(g_domain, "registered_work");
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.category = 5;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = reg;
    nvtxDomainRangePushEx(g_domain, &a);
    sleep_ms(3);
    nvtxDomainRangePop(g_domain);
    nvtxRangeEnd(g_cross);
    return NULL;
}

int main(void) {
    nvtxRangePop(); /* nothing pushed: must be tolerated */
    nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), "main");
    g_domain = nvtxDomainCreateA("mydomain");
    nvtxDomainNameCategoryA(g_domain, 5, "io");
    nvtxRangePushA("outer");
    /* the program's own clock around each push..pop goes to $NVTX_PROG_TRUTH, so the test
     * can check the captured durations against it (within 1 ms) on a loaded machine too */
    const char *truth_path = getenv("NVTX_PROG_TRUTH");
    FILE *truth = truth_path ? fopen(truth_path, "w") : NULL;
    for (int i = 0; i < 3; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        nvtxRangePushA("sleep_10ms");
        sleep_ms(10);
        nvtxRangePop();
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (truth)
            fprintf(truth, "%.3f\n", (double)(b.tv_sec - a.tv_sec) * 1e6 +
                                         (double)(b.tv_nsec - a.tv_nsec) / 1e3);
    }
    if (truth) fclose(truth);
    nvtxRangePushW(L"wide_\u00fc");
    nvtxMarkA("checkpoint");
    nvtxRangePop();
    g_cross = nvtxRangeStartA("cross_thread");
    pthread_t th;
    pthread_create(&th, NULL, worker, NULL);
    pthread_join(th, NULL);
    nvtxRangePop(); /* outer */
    nvtxRangePushA("left_open");
    printf("nvtx_prog done\n");
    return 0;
}
