/*
 * cupti_oom.c — a failed device allocation seen by CUPTI's callbacks (capture/cupti.c holds
 * the subscriber): the out-of-memory post-mortem of source cuda, for any program
 * (docs/format.md, "Memory"). Compiled with cupti.c, where the CUDA toolkit's headers exist.
 */
#define _GNU_SOURCE
#include "cupti_oom.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>

#include "../core/internal.h"
#include "comm_ext.h"
#include "mapped.h"

/* The device allocations whose failure is an out-of-memory of any program (docs/format.md,
 * "Memory", source cuda): the runtime's and the driver's allocators of device memory,
 * including the virtual-memory path (cuMemCreate) PyTorch's expandable segments take. */
static const CUpti_CallbackId oom_runtime[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020,
};
static const CUpti_CallbackId oom_driver[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemCreate,
};

const CUpti_CallbackId *tprof__cupti_oom_ids(CUpti_CallbackDomain dom, size_t *n) {
    if (dom == CUPTI_CB_DOMAIN_RUNTIME_API) {
        *n = sizeof oom_runtime / sizeof *oom_runtime;
        return oom_runtime;
    }
    if (dom == CUPTI_CB_DOMAIN_DRIVER_API) {
        *n = sizeof oom_driver / sizeof *oom_driver;
        return oom_driver;
    }
    *n = 0;
    return NULL;
}

static int is_oom_cbid(CUpti_CallbackDomain dom, CUpti_CallbackId cbid) {
    size_t n;
    const CUpti_CallbackId *ids = tprof__cupti_oom_ids(dom, &n);
    for (size_t i = 0; i < n; i++)
        if (ids[i] == cbid) return 1;
    return 0;
}


/* The bytes a failed call asked for, from its parameters (generated_cuda_*_meta.h); every
 * struct but the pitched ones has the size second. */
static uint64_t request_bytes(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *p) {
    if (!p) return 0;
    if (dom == CUPTI_CB_DOMAIN_RUNTIME_API) {
        if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020) {
            const cudaMallocPitch_v3020_params *q = p;
            return (uint64_t)q->width * q->height;
        }
        if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020 ||
            cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020)
            return ((const cudaMallocFromPoolAsync_v11020_params *)p)->size;
        return ((const cudaMalloc_v3020_params *)p)->size;
    }
    if (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2) {
        const cuMemAllocPitch_v2_params *q = p;
        return (uint64_t)q->WidthInBytes * q->Height;
    }
    if (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemCreate) return ((const cuMemCreate_params *)p)->size;
    return ((const cuMemAlloc_v2_params *)p)->bytesize;
}

/* The driver's answers at the failure, from the libcuda the process mapped (we are inside
 * one of its calls): the context's device and its free and total memory. */
static struct {
    _Atomic int loaded;
    CUresult (*mem_info)(size_t *, size_t *);
    CUresult (*ctx_device)(CUdevice *);
} D;

static void driver_calls(void) {
    if (atomic_load(&D.loaded)) return;
    char path[512];
    void *h = NULL;
    if (tprof__mapped("libcuda.so", path, sizeof path, 1))
        h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (h) {
        *(void **)&D.mem_info = dlsym(h, "cuMemGetInfo_v2");
        *(void **)&D.ctx_device = dlsym(h, "cuCtxGetDevice");
    }
    atomic_store(&D.loaded, 1);
}

/* At the exit of an allocation call that failed for want of memory: the cuda.oom mark and,
 * for the process's first OOM, the memory.oom.* keys of source cuda, flushed at once so that
 * a program that dies of it keeps them. In a PyTorch process whose allocator trainprof.torch
 * observes, nothing: the caching allocator frees its cache and retries a failed cudaMalloc,
 * and the observer reports the failure it gives up on. */
void tprof__cupti_oom_callback(CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
                               const CUpti_CallbackData *cb) {
    if (!is_oom_cbid(dom, cbid)) return;
    /* the calling thread's ring: nothing is recorded without one; its depth counts the
     * runtime allocation calls in progress, whose own driver allocations are not a second
     * failure */
    tprof__thread *t = tprof__thread_get();
    if (!t) return;
    int failed;
    if (dom == CUPTI_CB_DOMAIN_RUNTIME_API) {
        if (cb->callbackSite == CUPTI_API_ENTER) {
            t->cuda_alloc_depth++;
            return;
        }
        if (t->cuda_alloc_depth) t->cuda_alloc_depth--;
        failed = cb->functionReturnValue &&
                 *(const cudaError_t *)cb->functionReturnValue == cudaErrorMemoryAllocation;
    } else {
        if (cb->callbackSite != CUPTI_API_EXIT || t->cuda_alloc_depth) return;
        failed = cb->functionReturnValue &&
                 *(const CUresult *)cb->functionReturnValue == CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (!failed || tprof__oom_torch()) return;
    const unsigned n = tprof__oom_begin();
    tprof_mark("cuda.oom");
    char v[32];
    if (n == 1) {
        tprof__set_meta("memory.oom.source", "cuda");
        snprintf(v, sizeof v, "%llu",
                 (unsigned long long)request_bytes(dom, cbid, cb->functionParams));
        tprof__set_meta("memory.oom.request_bytes", v);
        driver_calls();
        CUdevice dev;
        if (D.ctx_device && D.ctx_device(&dev) == CUDA_SUCCESS) {
            snprintf(v, sizeof v, "%d", (int)dev);
            tprof__set_meta("memory.oom.device", v);
        }
        size_t free_b, total_b;
        if (D.mem_info && D.mem_info(&free_b, &total_b) == CUDA_SUCCESS) {
            snprintf(v, sizeof v, "%llu", (unsigned long long)free_b);
            tprof__set_meta("memory.oom.free_bytes", v);
            snprintf(v, sizeof v, "%llu", (unsigned long long)total_b);
            tprof__set_meta("memory.oom.total_bytes", v);
        }
    }
    snprintf(v, sizeof v, "%u", n);
    tprof__set_meta("memory.oom.count", v);
    if (n == 1) tprof_flush();
}
