/*
 * fake_cuda.c — a scripted CUDA driver, built as libcuda.so.1 (tests/cuda.cmake), for the
 * parts of trainprof that call the driver the program loaded: the device description without
 * CUPTI (capture/cuda_devices.c) and the Timers' CUDA events (timers/cuda_events.c).
 *
 * Two devices (ordinals 0 and 1: "Fake H100", "Fake H200"), visible once cuInit was called;
 * before that every device query answers CUDA_ERROR_NOT_INITIALIZED (3), as the driver does.
 * Streams are opaque pointers, each with its own GPU clock in milliseconds, advanced by
 * fake_cuda_work(stream, ms); an event takes its stream's clock when recorded, and
 * cuEventElapsedTime is the difference. Test controls:
 *   fake_cuda_work(stream, ms)   the stream runs `ms` of work
 *   fake_cuda_set_context(on)    cuCtxGetCurrent answers a context (1) or none (0)
 *   fake_cuda_set_active(mask)   the devices whose primary context is active (bit per ordinal)
 *   fake_cuda_count(what)        calls so far: 'i' cuInit, 'q' device queries before cuInit,
 *                                'n' cuDeviceGetName, 'e' live events, 's' cuCtxSynchronize
 *   fake_cuda_events_on(stream)  events recorded on that stream so far
 * FAKE_CUDA_MIG=1: device 1 is a MIG device (its own UUID from cuDeviceGetUuid_v2, its GPU's
 * from cuDeviceGetUuid).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

enum { OK = 0, INVALID_VALUE = 1, NOT_INITIALIZED = 3, INVALID_CONTEXT = 201 };

/* the flusher thread asks too: atomic */
static _Atomic int g_init, g_ctx, g_active, g_pre_init_queries, g_names, g_live_events, g_syncs;

static struct stream_clock {
    void *stream;
    double ms;
    int events, used;
} g_streams[16];

/* The stream's clock (NULL, the legacy default stream, is one too); the last slot when full. */
static struct stream_clock *clock_of(void *stream) {
    for (int i = 0; i < 16; i++)
        if (!g_streams[i].used || g_streams[i].stream == stream) {
            g_streams[i].used = 1;
            g_streams[i].stream = stream;
            return &g_streams[i];
        }
    return &g_streams[15];
}

struct fake_event {
    double ms;
    int recorded;
};

EXPORT void fake_cuda_work(void *stream, double ms) { clock_of(stream)->ms += ms; }
EXPORT void fake_cuda_set_context(int on) { g_ctx = on; }
EXPORT void fake_cuda_set_active(int mask) { g_active = mask; }
EXPORT int fake_cuda_events_on(void *stream) { return clock_of(stream)->events; }
EXPORT int fake_cuda_count(char what) {
    switch (what) {
    case 'i': return g_init;
    case 'q': return g_pre_init_queries;
    case 'n': return g_names;
    case 'e': return g_live_events;
    case 's': return g_syncs;
    default: return -1;
    }
}

EXPORT int cuInit(unsigned flags) {
    (void)flags;
    g_init++;
    return OK;
}

EXPORT int cuDeviceGetCount(int *n) {
    if (!g_init) {
        g_pre_init_queries++;
        return NOT_INITIALIZED;
    }
    *n = 2;
    return OK;
}

EXPORT int cuDeviceGet(int *dev, int ordinal) {
    if (!g_init) return NOT_INITIALIZED;
    if (ordinal < 0 || ordinal > 1) return INVALID_VALUE;
    *dev = ordinal;
    return OK;
}

EXPORT int cuDeviceGetName(char *name, int len, int dev) {
    if (!g_init) return NOT_INITIALIZED;
    g_names++;
    const char *n = dev ? "Fake H200" : "Fake H100";
    if (len <= (int)strlen(n)) return INVALID_VALUE;
    strcpy(name, n);
    return OK;
}

/* The first version: the device's UUID; for a MIG device (FAKE_CUDA_MIG=1: device 1) its
 * GPU's. _v2: a MIG device's own UUID (0x60..), as cuda.h documents. */
EXPORT int cuDeviceGetUuid(unsigned char uuid[16], int dev) {
    if (!g_init) return NOT_INITIALIZED;
    for (int i = 0; i < 16; i++) uuid[i] = (unsigned char)(0x20 * (dev + 1) + i);
    return OK;
}

EXPORT int cuDeviceGetUuid_v2(unsigned char uuid[16], int dev) {
    if (!g_init) return NOT_INITIALIZED;
    const char *mig = getenv("FAKE_CUDA_MIG");
    int m = mig && !strcmp(mig, "1") && dev == 1;
    for (int i = 0; i < 16; i++) uuid[i] = (unsigned char)(m ? 0x60 + i : 0x20 * (dev + 1) + i);
    return OK;
}

EXPORT int cuDeviceTotalMem_v2(size_t *bytes, int dev) {
    if (!g_init) return NOT_INITIALIZED;
    *bytes = dev ? 150754820096ull : 85029158912ull;
    return OK;
}

EXPORT int cuDeviceGetAttribute(int *v, int attr, int dev) {
    if (!g_init) return NOT_INITIALIZED;
    switch (attr) {
    case 13: *v = dev ? 1980000 : 1755000; return OK; /* clock rate, kHz */
    case 16: *v = 132; return OK;                     /* SMs */
    case 75: *v = 9; return OK;                       /* compute capability */
    case 76: *v = 0; return OK;
    default: return INVALID_VALUE;
    }
}

EXPORT int cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active) {
    if (!g_init) return NOT_INITIALIZED;
    *flags = 0;
    *active = (g_active >> dev) & 1;
    return OK;
}

EXPORT int cuCtxGetCurrent(void **ctx) {
    *ctx = g_ctx ? (void *)&g_ctx : NULL;
    return OK;
}

/* the scripted device at an out-of-memory (test_cupti): device 1, 512 MiB free of 141 GiB */
EXPORT int cuCtxGetDevice(int *dev) {
    *dev = 1;
    return OK;
}

EXPORT int cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    *free_bytes = (size_t)512 << 20;
    *total = (size_t)141 << 30;
    return OK;
}

EXPORT int cuCtxSynchronize(void) {
    g_syncs++;
    return g_ctx ? OK : INVALID_CONTEXT;
}

EXPORT int cuEventCreate(void **ev, unsigned flags) {
    (void)flags;
    if (!g_ctx) return INVALID_CONTEXT;
    struct fake_event *e = calloc(1, sizeof *e);
    if (!e) return INVALID_VALUE;
    g_live_events++;
    *ev = e;
    return OK;
}

EXPORT int cuEventRecord(void *ev, void *stream) {
    struct fake_event *e = ev;
    struct stream_clock *c = clock_of(stream);
    e->ms = c->ms;
    e->recorded = 1;
    c->events++;
    return OK;
}

EXPORT int cuEventSynchronize(void *ev) {
    return ((struct fake_event *)ev)->recorded ? OK : INVALID_VALUE;
}

EXPORT int cuEventElapsedTime_v2(float *ms, void *a, void *b) {
    const struct fake_event *x = a, *y = b;
    if (!x->recorded || !y->recorded) return INVALID_VALUE;
    *ms = (float)(y->ms - x->ms);
    return OK;
}

EXPORT int cuEventDestroy_v2(void *ev) {
    if (!ev) return INVALID_VALUE;
    g_live_events--;
    free(ev);
    return OK;
}
