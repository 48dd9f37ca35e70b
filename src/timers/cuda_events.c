/*
 * cuda_events.c — the few CUDA driver calls GPU-accurate Timers need: events recorded on a
 * stream at start and stop, resolved when the time is read (no device synchronize on the
 * timed path), and the context synchronize of Megatron's compatibility mode.
 *
 * libcuda is never linked: dlopen of the copy the process already has (RTLD_NOLOAD first),
 * with our own minimal declarations (docs/design.md §6.6). Without a driver, or without a current
 * context on the calling thread, every call reports failure and the Timers fall back to
 * host time.
 */
#define _GNU_SOURCE
#include "cuda_events.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

typedef int cu_result; /* CUDA_SUCCESS = 0 */

static struct {
    cu_result (*ctx_get_current)(void **ctx);
    cu_result (*ctx_synchronize)(void);
    cu_result (*event_create)(void **ev, unsigned flags);
    cu_result (*event_record)(void *ev, void *stream);
    cu_result (*event_synchronize)(void *ev);
    cu_result (*event_destroy)(void *ev);
    cu_result (*event_elapsed)(float *ms, void *start, void *end);
    int ok;
} D;

static void load(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    *(void **)&D.ctx_get_current = dlsym(h, "cuCtxGetCurrent");
    *(void **)&D.ctx_synchronize = dlsym(h, "cuCtxSynchronize");
    *(void **)&D.event_create = dlsym(h, "cuEventCreate");
    *(void **)&D.event_record = dlsym(h, "cuEventRecord");
    *(void **)&D.event_synchronize = dlsym(h, "cuEventSynchronize");
    *(void **)&D.event_destroy = dlsym(h, "cuEventDestroy_v2");
    *(void **)&D.event_elapsed = dlsym(h, "cuEventElapsedTime_v2");
    if (!D.event_elapsed) *(void **)&D.event_elapsed = dlsym(h, "cuEventElapsedTime");
    D.ok = D.ctx_get_current && D.ctx_synchronize && D.event_create && D.event_record &&
           D.event_synchronize && D.event_destroy && D.event_elapsed;
}

int tprof__cuda_available(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, load);
    return D.ok;
}

int tprof__cuda_has_context(void) {
    void *ctx = NULL;
    return tprof__cuda_available() && D.ctx_get_current(&ctx) == 0 && ctx != NULL;
}

void *tprof__cuda_event_record(void *stream) {
    if (!tprof__cuda_has_context()) return NULL;
    void *ev = NULL;
    if (D.event_create(&ev, 0) != 0) return NULL;
    if (D.event_record(ev, stream) != 0) {
        D.event_destroy(ev);
        return NULL;
    }
    return ev;
}

double tprof__cuda_elapsed_s(void *start, void *end) {
    float ms = 0;
    if (!D.ok || !start || !end) return -1;
    if (D.event_synchronize(end) != 0 || D.event_elapsed(&ms, start, end) != 0) return -1;
    return (double)ms * 1e-3;
}

void tprof__cuda_event_destroy(void *ev) {
    if (D.ok && ev) D.event_destroy(ev);
}

int tprof__cuda_synchronize(void) {
    return tprof__cuda_has_context() && D.ctx_synchronize() == 0 ? 0 : -1;
}
