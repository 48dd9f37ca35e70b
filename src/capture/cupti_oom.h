/*
 * cupti_oom.h — failed device allocations from CUPTI's callback API (capture/cupti_oom.c),
 * for capture/cupti.c, which subscribes and calls in.
 */
#ifndef TPROF_CUPTI_OOM_H
#define TPROF_CUPTI_OOM_H

#include <cupti.h>
#include <stddef.h>

/* The allocation calls of domain dom (runtime or driver) whose callbacks to enable: *n ids,
 * static storage; NULL and 0 for another domain. */
const CUpti_CallbackId *tprof__cupti_oom_ids(CUpti_CallbackDomain dom, size_t *n);

/* A callback of the subscriber: at the exit of one of those calls that failed for want of
 * memory, the cuda.oom mark, and for the process's first OOM the memory.oom.* keys of source
 * cuda (request from the call's parameters; device, free and total from the driver the
 * process mapped, asked in the failing call's context), flushed at once; nothing once
 * trainprof.torch observes PyTorch's allocator (tprof__oom_torch). Any other call returns at
 * once (a lookup in two short lists). On the application's thread, inside its CUDA call. */
void tprof__cupti_oom_callback(CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
                               const CUpti_CallbackData *cb);

#endif /* TPROF_CUPTI_OOM_H */
