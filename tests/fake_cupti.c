/*
 * fake_cupti.c — a scripted stand-in for libcupti, loaded by libtrainprof through
 * TRAINPROF_CUPTI_LIB in tests/test_cupti.c, so GPU activity capture's set-up (its back-off
 * lines) and its translation of records are tested on machines without a GPU.
 *
 * It speaks the activity API of the CUPTI headers it is built with: records are real
 * CUpti_ActivityKernel10 structs in the buffers trainprof hands out, walked by
 * cuptiActivityGetNextRecord. Environment:
 *   FAKE_CUPTI_VERSION=N          what cuptiGetVersion answers (default: CUPTI_API_VERSION)
 *   FAKE_CUPTI_REGISTER_FAIL=1    cuptiActivityRegisterCallbacks answers "multiple subscribers"
 *       (read at each call); a NULL callback is refused with CUPTI_ERROR_INVALID_PARAMETER;
 *       fake_cupti_refuse_next_register() makes the next call alone answer that;
 *       fake_cupti_after_register(fn) runs fn once, just after the next registration took
 *       effect (another thread registering at that moment)
 *   fake_cupti_in_disable(fn)  runs fn once, at the start of the next cuptiActivityDisable
 *       (another client's call while trainprof is inside one of its own);
 *       fake_cupti_in_enable(kind, fn) the same at the next cuptiActivityEnable of `kind`
 *   fake_cupti_clock()  what the registered timestamp callback answers now (0: none registered,
 *       CUPTI's default clock); a NULL callback is refused with CUPTI_ERROR_INVALID_PARAMETER,
 *       and cuptiFinalize drops it
 * Test controls (exported, found with dlsym):
 *   fake_cupti_deliver(timed, untimed, t0)  asks trainprof for a buffer, writes `timed` kernels
 *       (i-th: start t0 + i us, end t0 + i us + 500 ns, "fake_kernel_<i mod 3>", device 0,
 *       stream 7, correlation i + 1) followed by `untimed` kernels with an unknown start, an
 *       unknown end or an end before the start (in turn), and completes it; returns the
 *       buffer's address (0 when trainprof gave none)
 *   fake_cupti_hold(n, t0, flushes)  asks trainprof for a buffer and keeps it, as CUPTI keeps
 *       a buffer whose kernels' times are not in yet: its n kernels (as fake_cupti_deliver's)
 *       are complete after `flushes` more unforced cuptiActivityFlushAll calls, which then
 *       deliver it; a forced flush before that delivers it with every kernel untimed.
 *       Returns 1 when trainprof gave a buffer
 *   fake_cupti_overhead(t0, tid)  a buffer of three overhead records: a buffer flush of
 *       100 us at t0 on thread `tid`, an instrumentation of 50 us at t0 + 200 us on device 0,
 *       and one with an unknown end; returns as fake_cupti_deliver
 *   fake_cupti_device(id)  a buffer with one device record: ordinal `id`, "Fake H200", 132
 *       SMs, 141 GiB, 1980 MHz, compute capability 9.0, UUID bytes 0x10 + i
 *   fake_cupti_enabled()   activity kinds enabled now
 *   fake_cupti_flushes()   cuptiActivityFlushAll calls, and fake_cupti_forced() those forced
 *   fake_cupti_api_exit()  a CUDA call returns: the subscriber's callback (cuptiSubscribe,
 *       when its runtime domain is enabled) runs at CUPTI_API_EXIT; returns 1 if it ran
 *   fake_cupti_kind_on(k)  1 while activity kind k is enabled
 *   fake_cupti_driver_launch(corr)  a cuLaunchKernel with correlation id `corr`: its ENTER
 *       and EXIT at the subscriber when that call's callback is on; returns 1 if they ran;
 *       fake_cupti_driver_launch_odd(corr, odd) the same with the EXIT alone (odd 1) or no
 *       correlationData slot (odd 2)
 *   fake_cupti_attached()  1 while CUPTI is attached: cuptiFinalize detaches it, and any
 *       other CUPTI call attaches it again (CUPTI's lazy initialisation)
 *   fake_cupti_finalizes(), fake_cupti_registers(), fake_cupti_subscribers()  calls of
 *       cuptiFinalize, of cuptiActivityRegisterCallbacks, and subscribers held now
 *   fake_cupti_thread_id_type()  the thread id type set (cuptiSetThreadIdType); cuptiFinalize
 *       resets it to CUPTI's default
 *   FAKE_CUPTI_SUBSCRIBE_FAIL=1  cuptiSubscribe answers "multiple subscribers"
 *   fake_cupti_alloc(driver, cbid, bytes, ret, nested)  an allocation call returns `ret`: a
 *       runtime (driver 0: cudaMalloc_v3020's parameters) or driver (cuMemAlloc_v2's) call of
 *       `bytes`, its ENTER and EXIT given to the subscriber where its callback
 *       (cuptiEnableCallback) or its domain is on; with `nested`, a runtime call makes a
 *       failing cuMemAlloc_v2 of the same size inside, as the runtime does. Returns the
 *       callbacks made
 */
#define _GNU_SOURCE
#include <cupti.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

/* Atomic: trainprof's flusher thread calls in (taking capture back) while the scenario's own
 * thread reads the controls. */
static _Atomic(CUpti_BuffersCallbackRequestFunc) g_req;
static _Atomic(CUpti_BuffersCallbackCompleteFunc) g_done;
static _Atomic int g_enabled, g_flushes, g_forced;
static _Atomic int g_attached = 1, g_finalizes, g_registers;
static _Atomic(CUpti_CallbackFunc) g_sub_fn;
static _Atomic int g_sub_held, g_sub_runtime, g_sub_driver;
static _Atomic unsigned char g_cb_on[2][1024]; /* cuptiEnableCallback: [0] runtime, [1] driver */
/* the callbacks of domain row d (0 runtime, 1 driver; -1 both) all on or off */
static void cb_fill(int d, int on) {
    for (int r = 0; r < 2; r++)
        for (size_t i = 0; (d < 0 || d == r) && i < 1024; i++) g_cb_on[r][i] = (unsigned char)on;
}
#define ATTACH() (g_attached = 1) /* any CUPTI call but cuptiFinalize */

#define SLOT ((sizeof(CUpti_ActivityKernel10) + 7) & ~(size_t)7)

EXPORT CUptiResult cuptiGetVersion(uint32_t *version) {
    const char *v = getenv("FAKE_CUPTI_VERSION");
    *version = v ? (uint32_t)strtoul(v, NULL, 10) : CUPTI_API_VERSION;
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetResultString(CUptiResult r, const char **s) {
    *s = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
             ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
             : "CUPTI_ERROR_UNKNOWN";
    return CUPTI_SUCCESS;
}

static _Atomic int g_refuse_next;
static void (*_Atomic g_after_register)(void);
EXPORT void fake_cupti_after_register(void (*fn)(void)) { g_after_register = fn; }
EXPORT void fake_cupti_refuse_next_register(void) { g_refuse_next = 1; }
EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                  CUpti_BuffersCallbackCompleteFunc done) {
    ATTACH();
    const char *f = getenv("FAKE_CUPTI_REGISTER_FAIL");
    if ((f && !strcmp(f, "1")) || g_refuse_next) {
        g_refuse_next = 0;
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    if (!req || !done) return CUPTI_ERROR_INVALID_PARAMETER; /* as cupti_activity.h says */
    g_req = req;
    g_done = done;
    g_registers++;
    if (g_after_register) { /* once */
        void (*fn)(void) = g_after_register;
        g_after_register = NULL;
        fn();
    }
    return CUPTI_SUCCESS;
}

static _Atomic(CUpti_TimestampCallbackFunc) g_clock;
EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f) {
    ATTACH();
    if (!f) return CUPTI_ERROR_INVALID_PARAMETER; /* as cupti_activity.h says */
    g_clock = f;
    return CUPTI_SUCCESS;
}
EXPORT uint64_t fake_cupti_clock(void) {
    CUpti_TimestampCallbackFunc f = g_clock;
    return f ? f() : 0;
}
static _Atomic int g_kind_on[64]; /* per activity kind: enabled now */
static void (*_Atomic g_in_enable)(void);
static _Atomic int g_in_enable_kind;
EXPORT void fake_cupti_in_enable(int kind, void (*fn)(void)) {
    g_in_enable_kind = kind;
    g_in_enable = fn;
}
EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind k) {
    void (*fn)(void) = g_in_enable;
    if (fn && (int)k == g_in_enable_kind) { /* once */
        g_in_enable = NULL;
        fn();
    }
    ATTACH();
    g_enabled++;
    if ((unsigned)k < 64) g_kind_on[k] = 1;
    return CUPTI_SUCCESS;
}
static void (*_Atomic g_in_disable)(void);
EXPORT void fake_cupti_in_disable(void (*fn)(void)) { g_in_disable = fn; }
EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind k) {
    void (*fn)(void) = g_in_disable;
    if (fn) { /* once */
        g_in_disable = NULL;
        fn();
    }
    ATTACH();
    g_enabled--;
    if ((unsigned)k < 64) g_kind_on[k] = 0;
    return CUPTI_SUCCESS;
}
EXPORT int fake_cupti_kind_on(int k) { return (unsigned)k < 64 && g_kind_on[k]; }
static void held_flush(int forced);
EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag) {
    ATTACH();
    g_flushes++;
    g_forced += (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0;
    held_flush((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0);
    return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute a, size_t *size, void *v) {
    ATTACH();
    (void)a;
    return size && v ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}
EXPORT CUptiResult cuptiActivityFlushPeriod(uint32_t ms) {
    ATTACH();
    (void)ms;
    return CUPTI_SUCCESS;
}
static _Atomic int g_tid_type; /* CUPTI's default until set; finalize resets */
EXPORT CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType t) {
    ATTACH();
    g_tid_type = (int)t;
    return CUPTI_SUCCESS;
}
EXPORT int fake_cupti_thread_id_type(void) { return g_tid_type; }
EXPORT CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId cb, uint8_t on) {
    (void)cb;
    (void)on;
    return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId cb, uint8_t on) {
    (void)cb;
    (void)on;
    return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain d, uint32_t cb, const char **name) {
    if (d == CUPTI_CB_DOMAIN_RUNTIME_API && cb == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) {
        *name = "cudaLaunchKernel_v7000";
        return CUPTI_SUCCESS;
    }
    if (d == CUPTI_CB_DOMAIN_DRIVER_API && cb == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) {
        *name = "cuLaunchKernel";
        return CUPTI_SUCCESS;
    }
    return CUPTI_ERROR_INVALID_PARAMETER;
}
EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext c, uint32_t s, size_t *n) {
    (void)c;
    (void)s;
    *n = 0;
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **rec) {
    uint8_t *next = *rec ? (uint8_t *)*rec + SLOT : buffer;
    if (next + SLOT > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *rec = (CUpti_Activity *)next;
    return CUPTI_SUCCESS;
}

static const char *const k_names[] = {"fake_kernel_0", "fake_kernel_1", "fake_kernel_2"};

EXPORT uintptr_t fake_cupti_deliver(int timed, int untimed, uint64_t t0) {
    uint8_t *buf = NULL;
    size_t size = 0, maxrec = 0;
    if (!g_req || !g_done) return 0;
    g_req(&buf, &size, &maxrec);
    if (!buf) return 0;
    size_t n = 0;
    for (int i = 0; i < timed + untimed && (n + 1) * SLOT <= size; i++, n++) {
        CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)(buf + n * SLOT);
        memset(k, 0, sizeof *k);
        k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        k->start = t0 + (uint64_t)i * 1000;
        k->end = k->start + 500;
        if (i >= timed) { /* unknown start, unknown end, end before start, in turn */
            int w = (i - timed) % 3;
            if (w == 0) k->start = 0;
            else if (w == 1) k->end = 0;
            else k->end = k->start - 1;
        }
        k->deviceId = 0;
        k->contextId = 1;
        k->streamId = 7;
        k->correlationId = (uint32_t)i + 1;
        k->name = k_names[i % 3];
    }
    uintptr_t at = (uintptr_t)buf;
    g_done(NULL, 0, buf, size, n * SLOT);
    return at;
}

/* fake_cupti_hold's buffer: taken by the flush that delivers it (one flush at a time) */
static struct {
    uint8_t *_Atomic buf;
    size_t size;
    int n;
    uint64_t t0;
    _Atomic int flushes;
    CUpti_BuffersCallbackCompleteFunc done;
} g_held;
EXPORT int fake_cupti_hold(int n, uint64_t t0, int flushes) {
    size_t size = 0, maxrec = 0;
    uint8_t *buf = NULL;
    if (!g_req || !g_done || g_held.buf) return 0;
    g_req(&buf, &size, &maxrec);
    if (!buf) return 0;
    g_held.size = size;
    g_held.n = n;
    g_held.t0 = t0;
    g_held.flushes = flushes;
    g_held.done = g_done; /* delivered to the callbacks that asked for it, as CUPTI does */
    g_held.buf = buf;
    return 1;
}
static void held_flush(int forced) {
    if (!g_held.buf || (!forced && --g_held.flushes > 0)) return;
    uint8_t *buf = atomic_exchange(&g_held.buf, NULL);
    if (!buf) return;
    size_t n = 0;
    for (int i = 0; i < g_held.n && (n + 1) * SLOT <= g_held.size; i++, n++) {
        CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)(buf + n * SLOT);
        memset(k, 0, sizeof *k);
        k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        k->start = g_held.t0 + (uint64_t)i * 1000;
        k->end = forced ? 0 : k->start + 500; /* forced before its times came: unknown end */
        k->contextId = 1;
        k->streamId = 7;
        k->correlationId = (uint32_t)i + 1;
        k->name = k_names[i % 3];
    }
    g_held.done(NULL, 0, buf, g_held.size, n * SLOT);
}

EXPORT uintptr_t fake_cupti_overhead(uint64_t t0, uint32_t tid) {
    uint8_t *buf = NULL;
    size_t size = 0, maxrec = 0;
    if (!g_req || !g_done) return 0;
    g_req(&buf, &size, &maxrec);
    if (!buf || size < 3 * SLOT) return 0;
    for (int i = 0; i < 3; i++) {
        CUpti_ActivityOverhead3 *o = (CUpti_ActivityOverhead3 *)(buf + (size_t)i * SLOT);
        memset(o, 0, sizeof *o);
        o->kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
        o->overheadData = malloc(16); /* the client frees it, as CUPTI's */
        if (i == 0) {
            o->overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
            o->objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
            o->objectId.pt.processId = 1;
            o->objectId.pt.threadId = tid;
            o->start = t0;
            o->end = t0 + 100000;
        } else {
            o->overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION;
            o->objectKind = CUPTI_ACTIVITY_OBJECT_DEVICE;
            o->objectId.dcs.deviceId = 0;
            o->start = t0 + 200000;
            o->end = i == 1 ? t0 + 250000 : 0;
        }
    }
    uintptr_t at = (uintptr_t)buf;
    g_done(NULL, 0, buf, size, 3 * SLOT);
    return at;
}

/* A device record for CUDA device `id`; with `mig`, a MIG device (isMigEnabled, its MIG
 * UUID 0x30.. beside its GPU's UUID 0x10..). */
static uintptr_t device_record(uint32_t id, int mig) {
    uint8_t *buf = NULL;
    size_t size = 0, maxrec = 0;
    if (!g_req || !g_done) return 0;
    g_req(&buf, &size, &maxrec);
    if (!buf || size < sizeof(CUpti_ActivityDevice5) + 8) return 0;
    CUpti_ActivityDevice5 *d = (CUpti_ActivityDevice5 *)buf;
    memset(d, 0, sizeof *d);
    d->kind = CUPTI_ACTIVITY_KIND_DEVICE;
    d->id = id;
    d->name = strdup("Fake H200"); /* the client frees it, as CUPTI's */
    d->numMultiprocessors = 132;
    d->globalMemorySize = 141ull << 30;
    d->coreClockRate = 1980000; /* kHz */
    d->computeCapabilityMajor = 9;
    d->isCudaVisible = 1;
    for (int i = 0; i < 16; i++) d->uuid.bytes[i] = (char)(0x10 + i);
    d->gpuInstanceId = d->computeInstanceId = UINT32_MAX;
    if (mig) {
        d->isMigEnabled = 1;
        d->gpuInstanceId = 1;
        d->computeInstanceId = 0;
        for (int i = 0; i < 16; i++) d->migUuid.bytes[i] = (char)(0x30 + i);
    }
    uintptr_t at = (uintptr_t)buf;
    g_done(NULL, 0, buf, size, SLOT > sizeof *d ? SLOT : sizeof *d);
    return at;
}

EXPORT uintptr_t fake_cupti_device(uint32_t id) { return device_record(id, 0); }
EXPORT uintptr_t fake_cupti_mig_device(uint32_t id) { return device_record(id, 1); }

EXPORT int fake_cupti_enabled(void) { return g_enabled; }
EXPORT int fake_cupti_flushes(void) { return g_flushes; }
EXPORT int fake_cupti_forced(void) { return g_forced; }

EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc fn, void *ud) {
    (void)ud;
    ATTACH();
    const char *f = getenv("FAKE_CUPTI_SUBSCRIBE_FAIL");
    if ((f && !strcmp(f, "1")) || g_sub_held) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    g_sub_fn = fn;
    g_sub_held = 1;
    g_sub_runtime = g_sub_driver = 0;
    cb_fill(-1, 0);
    *sub = (CUpti_SubscriberHandle)&g_sub_fn;
    return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle sub) {
    (void)sub;
    ATTACH();
    g_sub_held = 0;
    g_sub_fn = NULL;
    cb_fill(-1, 0);
    return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiEnableCallback(uint32_t on, CUpti_SubscriberHandle sub,
                                       CUpti_CallbackDomain d, CUpti_CallbackId cb) {
    (void)sub;
    ATTACH();
    if (!g_sub_held || cb >= 1024) return CUPTI_ERROR_INVALID_PARAMETER;
    if (d == CUPTI_CB_DOMAIN_RUNTIME_API || d == CUPTI_CB_DOMAIN_DRIVER_API)
        g_cb_on[d == CUPTI_CB_DOMAIN_DRIVER_API][cb] = (unsigned char)(on != 0);
    return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiEnableDomain(uint32_t on, CUpti_SubscriberHandle sub,
                                     CUpti_CallbackDomain d) {
    (void)sub;
    ATTACH();
    if (d == CUPTI_CB_DOMAIN_RUNTIME_API) g_sub_runtime = (int)on;
    if (d == CUPTI_CB_DOMAIN_DRIVER_API) g_sub_driver = (int)on;
    /* as CUPTI's: the domain's every callback on or off */
    if (d == CUPTI_CB_DOMAIN_RUNTIME_API || d == CUPTI_CB_DOMAIN_DRIVER_API)
        cb_fill(d == CUPTI_CB_DOMAIN_DRIVER_API, on != 0);
    return CUPTI_SUCCESS;
}
/* detaches: subscribers, callbacks and kinds are gone */
EXPORT CUptiResult cuptiFinalize(void) {
    g_finalizes++;
    g_attached = 0;
    g_sub_held = 0;
    g_sub_fn = NULL;
    cb_fill(-1, 0);
    g_enabled = 0;
    g_req = NULL;
    g_done = NULL;
    g_clock = NULL;
    g_tid_type = (int)CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT;
    return CUPTI_SUCCESS;
}
EXPORT int fake_cupti_api_exit(void) {
    if (!g_sub_held || !g_sub_runtime || !g_sub_fn) return 0;
    CUpti_CallbackData cb;
    memset(&cb, 0, sizeof cb);
    cb.callbackSite = CUPTI_API_EXIT;
    cb.functionName = "cudaLaunchKernel";
    g_sub_fn(NULL, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
             &cb);
    return 1;
}
/* A cuLaunchKernel of the program's: its ENTER and EXIT at the subscriber when the callback of
 * that call is on, with one correlationData slot between them, as CUPTI passes it. */
/* With `odd`: 1, the EXIT alone (the callback went on during the call), its slot holding
 * what it held before; 2, no correlationData slot. */
EXPORT int fake_cupti_driver_launch_odd(uint32_t correlation, int odd) {
    const uint32_t cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
    if (!g_sub_held || !g_sub_fn || !g_cb_on[1][cbid]) return 0;
    uint64_t slot = 0xdeadbeef; /* CUPTI does not promise it zeroed */
    CUpti_CallbackData cb;
    memset(&cb, 0, sizeof cb);
    cb.functionName = "cuLaunchKernel";
    cb.correlationData = odd == 2 ? NULL : &slot;
    cb.correlationId = correlation;
    cb.callbackSite = CUPTI_API_ENTER;
    if (odd != 1) g_sub_fn(NULL, CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cb);
    cb.callbackSite = CUPTI_API_EXIT;
    g_sub_fn(NULL, CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cb);
    return 1;
}
EXPORT int fake_cupti_driver_launch(uint32_t correlation) {
    return fake_cupti_driver_launch_odd(correlation, 0);
}
EXPORT int fake_cupti_attached(void) { return g_attached; }
EXPORT int fake_cupti_finalizes(void) { return g_finalizes; }
EXPORT int fake_cupti_registers(void) { return g_registers; }
EXPORT int fake_cupti_subscribers(void) { return g_sub_held; }

/* One site of an allocation call at the subscriber, when its callback is on. */
static int alloc_site(int driver, uint32_t cbid, CUpti_ApiCallbackSite site, const void *params,
                      const int *ret) {
    if (!g_sub_held || !g_sub_fn || cbid >= 1024 || !g_cb_on[driver != 0][cbid]) return 0;
    CUpti_CallbackData cb;
    memset(&cb, 0, sizeof cb);
    cb.callbackSite = site;
    cb.functionParams = params;
    cb.functionReturnValue = site == CUPTI_API_EXIT ? (void *)(uintptr_t)ret : NULL;
    g_sub_fn(NULL, driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &cb);
    return 1;
}

EXPORT int fake_cupti_alloc(int driver, uint32_t cbid, size_t bytes, int ret, int nested) {
    void *ptr = NULL;
    CUdeviceptr dptr = 0;
    cudaMalloc_v3020_params rp = {&ptr, bytes};
    cuMemAlloc_v2_params dp = {&dptr, bytes};
    const void *params = driver ? (const void *)&dp : (const void *)&rp;
    int n = alloc_site(driver, cbid, CUPTI_API_ENTER, params, &ret);
    if (!driver && nested) {
        const int dret = CUDA_ERROR_OUT_OF_MEMORY;
        n += alloc_site(1, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_API_ENTER, &dp, &dret);
        n += alloc_site(1, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_API_EXIT, &dp, &dret);
    }
    return n + alloc_site(driver, cbid, CUPTI_API_EXIT, params, &ret);
}
