/*
 * cupti_lib.c — which libcupti GPU activity capture uses and what it asks of it: the copy the
 * process already mapped (else the usual places, or TRAINPROF_CUPTI_LIB), its functions as
 * bound (cupti_lib.h), its results' names, its default clock, and the runtime calls recorded
 * (the work calls by default; every call but a few queries with TRAINPROF_CUPTI_CALLS=all).
 */
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../core/config.h"
#include "../core/internal.h"
#include "cupti_lib.h"
#include "mapped.h"

tprof__cupti_fns tprof__cupti_fn;
#define F tprof__cupti_fn

static const char *const lib_names[] = {
    "libcupti.so.13", "libcupti.so", "/usr/local/cuda/lib64/libcupti.so.13",
    "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
};



/* The libcupti this process already has (torch loads its own, under whatever version
 * suffix) is the one to use: two copies in one process would both try to own the activity
 * API. Of several mapped copies, the first of our API's major version; else the first, whose
 * version the caller then reports. */
void *tprof__cupti_open(char *which, size_t n) {
    char mapped[TPROF__CUPTI_MAPPED][256];
    const int nmapped =
        tprof__mapped("libcupti.so", mapped[0], sizeof mapped[0], TPROF__CUPTI_MAPPED);
    /* pass 0: a copy of our major version; pass 1: the first one that opens */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < nmapped; i++) {
            void *h = dlopen(mapped[i], RTLD_NOW | RTLD_NOLOAD);
            if (!h) continue;
            CUptiResult (*ver)(uint32_t *) =
                (CUptiResult(*)(uint32_t *))dlsym(h, "cuptiGetVersion");
            uint32_t v = 0;
            if (pass ||
                (ver && ver(&v) == CUPTI_SUCCESS && v / 10000 == CUPTI_API_VERSION / 10000)) {
                snprintf(which, n, "%.200s (already loaded)", mapped[i]);
                return h;
            }
            dlclose(h); /* RTLD_NOLOAD took a reference: give it back */
        }
    for (size_t i = 0; i < sizeof lib_names / sizeof *lib_names; i++) {
        void *h = dlopen(lib_names[i], RTLD_NOW | RTLD_NOLOAD);
        if (h) {
            snprintf(which, n, "%s (already loaded)", lib_names[i]);
            return h;
        }
    }
    const char *env = tprof__env(TPROF__OPT_CUPTI_LIB);
    if (env && *env) {
        void *h = dlopen(env, RTLD_NOW | RTLD_GLOBAL);
        if (h) snprintf(which, n, "%s", env);
        return h;
    }
    for (size_t i = 0; i < sizeof lib_names / sizeof *lib_names; i++) {
        void *h = dlopen(lib_names[i], RTLD_NOW | RTLD_GLOBAL);
        if (h) {
            snprintf(which, n, "%s", lib_names[i]);
            return h;
        }
    }
    return NULL;
}

/* CUPTI's default clock (cupti_activity.h, cuptiActivityRegisterTimestampCallback): Linux's
 * CLOCK_REALTIME, but CLOCK_MONOTONIC_RAW under WSL, where the real-time clock can step back.
 * Another client that registered no clock of its own expects its records on it (Kineto puts
 * them beside its CPU events, taken from the system clock). */
static _Atomic int g_default_clock = CLOCK_REALTIME;

void tprof__cupti_default_clock_init(void) {
    char rel[256] = "";
    FILE *f = fopen("/proc/sys/kernel/osrelease", "re");
    if (!f) return;
    if (!fgets(rel, sizeof rel, f)) rel[0] = 0;
    fclose(f);
    if (strcasestr(rel, "microsoft") || strstr(rel, "WSL"))
        atomic_store(&g_default_clock, CLOCK_MONOTONIC_RAW);
}

uint64_t CUPTIAPI tprof__cupti_default_clock(void) {
    struct timespec ts;
    clock_gettime((clockid_t)atomic_load(&g_default_clock), &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *tprof__cupti_result(CUptiResult r) {
    const char *s = NULL;
    if (F.cuptiGetResultString) F.cuptiGetResultString(r, &s);
    return s ? s : "unknown CUPTI error";
}

/* The runtime calls recorded by default: those that put work on the GPU, wait for it or
 * allocate its memory, matched by name prefix ("cudaLaunchKernel_v7000" has the prefix
 * "cudaLaunch"). The analysis needs no other: launches tie GPU work to its step and thread by
 * correlation id, synchronisations and blocking copies are host waits (analysis/gpu.c,
 * breakdown.c). Everything else torch calls per op is a query (cudaGetDevice alone ~250 per
 * GPT-2 step, capture-state and error checks, attribute queries), and each recorded call
 * costs CUPTI a timestamp pair and a record. TRAINPROF_CUPTI_CALLS=all records every call
 * but the queries in quiet_calls below, as Nsight's CUDA API trace does. */
static const char *const work_calls[] = {
    "cudaLaunch",           "cudaGraphLaunch",     "cudaMemcpy",            "cudaMemset",
    "cudaMalloc",           "cudaFree",            "cudaHostAlloc",         "cudaHostRegister",
    "cudaHostUnregister",   "cudaMemPrefetch",     "cudaDeviceSynchronize", "cudaStreamSynchronize",
    "cudaEventSynchronize", "cudaStreamWaitEvent", "cudaThreadSynchronize",
};

/* With TRAINPROF_CUPTI_CALLS=all: every runtime call but these queries. */
static const CUpti_CallbackId quiet_calls[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceCount_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetAttribute_v5000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceProperties_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_ptsz_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v10010,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v2_v11030,
    CUPTI_RUNTIME_TRACE_CBID_cudaOccupancyMaxActiveBlocksPerMultiprocessor_v6000,
    CUPTI_RUNTIME_TRACE_CBID_cudaOccupancyMaxActiveClusters_v11070,
    CUPTI_RUNTIME_TRACE_CBID_cudaFuncGetAttributes_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetDriverEntryPoint_v11030,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetDriverEntryPointByVersion_v12050,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetFuncBySymbol_v11000,
    CUPTI_RUNTIME_TRACE_CBID_cudaDriverGetVersion_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaRuntimeGetVersion_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020,
};

static int is_work_call(const char *name) {
    for (size_t i = 0; name && i < sizeof work_calls / sizeof *work_calls; i++)
        if (!strncmp(name, work_calls[i], strlen(work_calls[i]))) return 1;
    return 0;
}

void tprof__cupti_runtime_filter(const char *calls) {
    if (!F.cuptiActivityEnableRuntimeApi) return;
    if ((calls && !strcmp(calls, "all")) || !F.cuptiGetCallbackName) {
        for (size_t i = 0; i < sizeof quiet_calls / sizeof *quiet_calls; i++)
            F.cuptiActivityEnableRuntimeApi(quiet_calls[i], 0);
        return;
    }
    /* past the ids of the headers we were built with, as long as the libcupti loaded (it may
     * be newer) names them */
    for (CUpti_CallbackId cb = 1; cb < 4096; cb++) {
        const char *n = NULL;
        if (F.cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, cb, &n) != CUPTI_SUCCESS) n = NULL;
        if (!n && cb >= CUPTI_RUNTIME_TRACE_CBID_SIZE) break;
        F.cuptiActivityEnableRuntimeApi(cb, (uint8_t)is_work_call(n));
    }
}

/* libcupti's function of that name, for a call of the program's: the next definition after
 * ours in the lookup order; else the one bound from the libcupti we loaded; else the program's
 * own copy among those mapped. The program's copy is often private to the library that uses
 * it (torch's, a dependency of an extension Python loaded with RTLD_LOCAL): RTLD_NEXT searches
 * the global scope only, and with TRAINPROF_CUPTI=0, no session, or a client that calls
 * before the driver started our CUPTI, nothing is bound yet; the call must still reach
 * libcupti. The answer is kept (once found, in *cache); the mapped copy's reference is kept
 * too, so that the function stays mapped. NULL: no libcupti in the process. */
void *tprof__cupti_next(_Atomic(void *) *cache, const char *name, void *bound) {
    void *f = atomic_load_explicit(cache, memory_order_acquire);
    if (f) return f;
    f = dlsym(RTLD_NEXT, name);
    if (!f) f = bound;
    if (!f) {
        char mapped[TPROF__CUPTI_MAPPED][256];
        const int n =
            tprof__mapped("libcupti.so", mapped[0], sizeof mapped[0], TPROF__CUPTI_MAPPED);
        for (int i = 0; i < n && !f; i++) {
            void *h = dlopen(mapped[i], RTLD_NOW | RTLD_NOLOAD);
            if (h && !(f = dlsym(h, name))) dlclose(h);
        }
    }
    if (f) atomic_store_explicit(cache, f, memory_order_release);
    return f;
}

/* What TRAINPROF_CUPTI_KINDS may name (default: all of them). */
static const struct {
    const char *name;
    CUpti_ActivityKind kind;
} kinds[] = {
    {"kernel", CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL},
    {"memcpy", CUPTI_ACTIVITY_KIND_MEMCPY},
    {"memcpy", CUPTI_ACTIVITY_KIND_MEMCPY2},
    {"memset", CUPTI_ACTIVITY_KIND_MEMSET},
    {"memory", CUPTI_ACTIVITY_KIND_MEMORY2},
    {"sync", CUPTI_ACTIVITY_KIND_SYNCHRONIZATION},
    {"runtime", CUPTI_ACTIVITY_KIND_RUNTIME},
    {"overhead", CUPTI_ACTIVITY_KIND_OVERHEAD},
};

int tprof__cupti_kind_wanted(const char *list, const char *name) {
    if (!list || !*list) return 1;
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return 1;
    return 0;
}

size_t tprof__cupti_kinds(const char *want, CUpti_ActivityKind *out, size_t max, char *names,
                          size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds && k < max; i++)
        if (tprof__cupti_kind_wanted(want, kinds[i].name)) {
            out[k++] = kinds[i].kind;
            if (!strstr(names, kinds[i].name)) {
                size_t l = strlen(names);
                snprintf(names + l, n - l, "%s%s", l ? "," : "", kinds[i].name);
            }
        }
    return k;
}
