/*
 * cupti_records.c — CUPTI's side of GPU activity capture: the buffers trainprof hands CUPTI
 * (a bounded pool, bufpool.h) and the translation of the activity records CUPTI returns in them
 * (kernels, copies, memsets, memory, synchronisations, runtime and driver calls, CUPTI's own
 * overhead, device descriptions) into records of the calling thread's ring, in the file's
 * layout (format/format.h). capture/cupti.c decides when CUPTI records what; cupti_lib.h is
 * the interface between the two.
 */
#define _GNU_SOURCE
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "../core/session_state.h"
#include "bufpool.h"
#include "cupti_lib.h"

#define F tprof__cupti_fn

static _Atomic uint64_t g_cupti_dropped; /* CUPTI's own drops, as it last counted them */
#define BUF_BYTES (4u << 20)  /* per buffer: ~19k kernel records (216 bytes each), ~100k calls */
#define MAX_BUFFERS 64u       /* bound on memory held for CUPTI: 256 MiB at most */
/* The buffers (bufpool.h): reused, unless TRAINPROF_CUPTI_POOL=0 asks for one fresh buffer
 * per request (for benchmarks: the way before the pool). */
static tprof_bufpool g_pool;
/* Interval records whose start or end CUPTI did not know (CUPTI_TIMESTAMP_UNKNOWN, e.g. a
 * kernel still running when a forced flush took its buffer): counted, not recorded, so that
 * nothing is drawn at time zero. Reported as the metadata cupti.untimed_records. */
static _Atomic uint64_t g_untimed;
static tprof__meta_max g_untimed_meta = TPROF__META_MAX_INIT;
/* Correlation ids as written: CUPTI's plus g_corr_base, which becomes the largest id written
 * so far (g_corr_max) each time CUPTI is attached again, whose ids may start over; every
 * record of an attachment is delivered before it detaches (a forced flush), so the ids of a
 * file stay unique. */
static _Atomic uint32_t g_corr_base, g_corr_max;

void CUPTIAPI tprof__cupti_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *max_records = 0; /* fill it */
    /* NULL when the bound is reached: CUPTI then drops records and counts them */
    *buffer = tprof__bufpool_get(&g_pool);
    *size = *buffer ? BUF_BYTES : 0;
}

void tprof__cupti_emit_gpu(tprof__thread *t, uint16_t kind, const char *name, uint64_t start,
                           const tprof_pl_gpu *pl) {
    uint32_t size;
    tprof_pl_gpu *dst;
    if (name) {
        dst = tprof__begin_named(t, kind, name, sizeof *dst, start, &size);
    } else {
        size = sizeof(tprof_rec) + sizeof *dst;
        tprof_rec *r = tprof__reserve(t, size);
        if (!r) return;
        r->kind = kind;
        r->size = (uint16_t)size;
        r->arg = 0;
        r->ts_ns = start;
        dst = (tprof_pl_gpu *)(r + 1);
    }
    if (!dst) return;
    *dst = *pl;
    if (dst->correlation) {
        /* unique within the file across attachments of CUPTI (g_corr_base) */
        dst->correlation += atomic_load_explicit(&g_corr_base, memory_order_relaxed);
        uint32_t m = atomic_load_explicit(&g_corr_max, memory_order_relaxed);
        while (dst->correlation > m &&
               !atomic_compare_exchange_weak_explicit(&g_corr_max, &m, dst->correlation,
                                                      memory_order_relaxed, memory_order_relaxed)) {
        }
    }
    tprof__commit(t, size);
}

static void emit_mem(tprof__thread *t, uint64_t ts, const tprof_pl_gpu_mem *pl) {
    const uint32_t size = sizeof(tprof_rec) + sizeof *pl;
    tprof_rec *r = tprof__reserve(t, size);
    if (!r) return;
    r->kind = TPROF_REC_GPU_MEMORY;
    r->size = size;
    r->arg = 0;
    r->ts_ns = ts;
    memcpy(r + 1, pl, sizeof *pl);
    tprof__commit(t, size);
}

/* Name of a runtime API function as users know it ("cudaLaunchKernel", not CUPTI's
 * "cudaLaunchKernel_v7000"), interned by the ring like any name. */
const char *tprof__cupti_api_name(CUpti_CallbackDomain domain, uint32_t cbid) {
    static __thread char buf[128];
    const char *n = NULL;
    if (!F.cuptiGetCallbackName || F.cuptiGetCallbackName(domain, cbid, &n) != CUPTI_SUCCESS || !n)
        return domain == CUPTI_CB_DOMAIN_DRIVER_API ? "cuda driver call" : "cuda runtime call";
    snprintf(buf, sizeof buf, "%s", n);
    char *v = strrchr(buf, '_');
    if (v && v[1] == 'v' && v[2] >= '0' && v[2] <= '9') *v = 0;
    return buf;
}

/* CUDA context -> device, learned from kernel and copy records: a synchronisation record
 * names its context only. Slots hold (context id << 32) | (device + 1), 0 when free; written
 * once with compare-and-swap, so CUPTI's worker and a flushing thread may both learn. A
 * process has one primary context per device; 32 slots hold any node's GPUs. */
#define CTX_SLOTS 32
static _Atomic uint64_t g_ctx_dev[CTX_SLOTS];

static void learn_context(uint32_t ctx, uint32_t dev) {
    const uint64_t v = ((uint64_t)ctx << 32) | ((uint64_t)dev + 1);
    for (size_t i = 0; i < CTX_SLOTS; i++) {
        uint64_t cur = atomic_load_explicit(&g_ctx_dev[i], memory_order_relaxed);
        if (cur >> 32 == ctx && cur) return;
        if (!cur && atomic_compare_exchange_strong(&g_ctx_dev[i], &cur, v)) return;
        if (cur >> 32 == ctx) return; /* another thread stored it first */
    }
}

static uint32_t context_device(uint32_t ctx) {
    for (size_t i = 0; i < CTX_SLOTS; i++) {
        uint64_t cur = atomic_load_explicit(&g_ctx_dev[i], memory_order_relaxed);
        if (!cur) break;
        if (cur >> 32 == ctx) return (uint32_t)(cur & 0xffffffffu) - 1;
    }
    return TPROF_DEVICE_UNKNOWN;
}

/* The fields every device interval record of CUPTI shares, whatever its struct. */
#define PLACE(pl, r)                      \
    do {                                  \
        (pl).end_ns = (r)->end;           \
        (pl).device = (r)->deviceId;      \
        (pl).stream = (r)->streamId;      \
        (pl).correlation = (r)->correlationId; \
    } while (0)

/* A CUDA device as CUPTI describes it (one record per device, when CUDA starts): into the
 * rank file's metadata under cuda.<ordinal>.* (capture/cuda_devices.c). */
static void describe_device(const CUpti_ActivityDevice5 *d) {
    /* CUPTI may also describe GPUs that CUDA_VISIBLE_DEVICES hides: they have no ordinal in
     * this process */
    if (!d->isCudaVisible) return;
    /* CUPTI's clock is in kHz, as the driver's attribute */
    tprof__cuda_describe((unsigned)d->id, (const unsigned char *)d->uuid.bytes, d->name,
                         (unsigned)d->numMultiprocessors, (unsigned long long)d->globalMemorySize,
                         (unsigned)d->coreClockRate, (unsigned)d->computeCapabilityMajor,
                         (unsigned)d->computeCapabilityMinor);
    /* a MIG device: CUPTI gives its own UUID (migUuid) beside its GPU's (uuid); the report
     * joins it to NVML's GPU through either (NVML reports power and energy per GPU only) */
    if (d->isMigEnabled && memcmp(d->migUuid.bytes, d->uuid.bytes, sizeof d->uuid.bytes))
        tprof__cuda_describe_mig((unsigned)d->id, (const unsigned char *)d->migUuid.bytes,
                                 (const unsigned char *)d->uuid.bytes);
}

/* What an overhead record says CUPTI (or the driver) spent the time on. */
static const char *overhead_name(CUpti_ActivityOverheadKind k) {
    switch (k) {
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER: return "driver JIT compilation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH: return "CUPTI buffer flush";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION: return "CUPTI instrumentation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE: return "CUPTI resource";
    case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING: return "module loading";
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING: return "lazy function loading";
    case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL: return "command buffer full";
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST: return "CUPTI activity buffer request";
    case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT: return "UVM activity init";
    default: return "CUPTI overhead";
    }
}

/* An interval record's times are unusable: one is unknown (0) or the end precedes the start. */
#define UNTIMED(r)                                                                   \
    ((r)->start == CUPTI_TIMESTAMP_UNKNOWN || (r)->end == CUPTI_TIMESTAMP_UNKNOWN || \
     (r)->end < (r)->start)

/* One CUPTI record into t's ring. Returns 0, or 1 when it was left out for unknown times. */
static int translate(tprof__thread *t, const CUpti_Activity *rec) {
    tprof_pl_gpu pl;
    memset(&pl, 0, sizeof pl);
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const void *)rec;
        if (UNTIMED(k)) return 1;
        PLACE(pl, k);
        learn_context(k->contextId, k->deviceId);
        pl.graph = k->graphId;
        tprof__cupti_emit_gpu(t, TPROF_REC_GPU_KERNEL, k->name ? k->name : "(unnamed kernel)",
                              k->start, &pl);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = (const void *)rec;
        if (UNTIMED(m)) return 1;
        PLACE(pl, m);
        learn_context(m->contextId, m->deviceId);
        pl.bytes = m->bytes;
        pl.kind = m->copyKind;
        pl.graph = m->graphId;
        tprof__cupti_emit_gpu(t, TPROF_REC_GPU_MEMCPY, NULL, m->start, &pl);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
        const CUpti_ActivityMemcpyPtoP4 *m = (const void *)rec;
        if (UNTIMED(m)) return 1;
        PLACE(pl, m);
        pl.bytes = m->bytes;
        pl.kind = m->copyKind;
        tprof__cupti_emit_gpu(t, TPROF_REC_GPU_MEMCPY, NULL, m->start, &pl);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const void *)rec;
        if (UNTIMED(m)) return 1;
        PLACE(pl, m);
        pl.bytes = m->bytes;
        tprof__cupti_emit_gpu(t, TPROF_REC_GPU_MEMSET, NULL, m->start, &pl);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
        const CUpti_ActivityMemory4 *m = (const void *)rec;
        if (m->timestamp == CUPTI_TIMESTAMP_UNKNOWN) return 1;
        tprof_pl_gpu_mem mp = {m->address, m->bytes, m->deviceId,
                               (uint32_t)m->memoryOperationType, (uint32_t)m->memoryKind,
                               m->streamId};
        emit_mem(t, m->timestamp, &mp);
        break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const CUpti_ActivitySynchronization2 *sy = (const void *)rec;
        if (UNTIMED(sy)) return 1;
        pl.end_ns = sy->end;
        pl.device = context_device(sy->contextId); /* CUPTI names the context only */
        pl.stream = sy->streamId;
        pl.correlation = sy->correlationId;
        pl.kind = (uint32_t)sy->type;
        tprof__cupti_emit_gpu(t, TPROF_REC_GPU_SYNC, NULL, sy->start, &pl);
        break;
    }
    case CUPTI_ACTIVITY_KIND_DEVICE:
        describe_device((const CUpti_ActivityDevice5 *)(const void *)rec);
        break;
    case CUPTI_ACTIVITY_KIND_OVERHEAD: { /* CUPTI's own work, and the driver's it reports */
        const CUpti_ActivityOverhead3 *o = (const void *)rec;
        if (UNTIMED(o)) return 1;
        pl.end_ns = o->end;
        pl.kind = (uint32_t)o->overheadKind;
        pl.correlation = o->correlationId;
        pl.device = TPROF_DEVICE_UNKNOWN;
        if (o->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD) pl.os_tid = o->objectId.pt.threadId;
        else if (o->objectKind == CUPTI_ACTIVITY_OBJECT_DEVICE ||
                 o->objectKind == CUPTI_ACTIVITY_OBJECT_CONTEXT ||
                 o->objectKind == CUPTI_ACTIVITY_OBJECT_STREAM)
            pl.device = o->objectId.dcs.deviceId;
        tprof__cupti_emit_gpu(t, TPROF_REC_GPU_OVERHEAD, overhead_name(o->overheadKind), o->start,
                              &pl);
        break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
        const CUpti_ActivityAPI *a = (const void *)rec;
        if (UNTIMED(a)) return 1;
        pl.end_ns = a->end;
        pl.correlation = a->correlationId;
        pl.kind = (uint32_t)a->cbid;
        pl.os_tid = a->threadId;
        tprof__cupti_emit_gpu(t, TPROF_REC_GPU_API,
                              tprof__cupti_api_name(rec->kind == CUPTI_ACTIVITY_KIND_DRIVER
                                                        ? CUPTI_CB_DOMAIN_DRIVER_API
                                                        : CUPTI_CB_DOMAIN_RUNTIME_API,
                                                    (uint32_t)a->cbid),
                              a->start, &pl);
        break;
    }
    default:
        break; /* others: not recorded */
    }
    return 0;
}

/* Memory CUPTI hands to the client with a record (cupti_activity.h: "Client is responsible
 * for freeing this memory"): a device record's name, an overhead record's details. After
 * translate, and for records not translated (no session). */
static void release_record(const CUpti_Activity *rec) {
    if (rec->kind == CUPTI_ACTIVITY_KIND_DEVICE)
        free((void *)((const CUpti_ActivityDevice5 *)(const void *)rec)->name);
    else if (rec->kind == CUPTI_ACTIVITY_KIND_OVERHEAD)
        free(((const CUpti_ActivityOverhead3 *)(const void *)rec)->overheadData);
}

void CUPTIAPI tprof__cupti_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                                            size_t size, size_t valid) {
    (void)ctx;
    (void)size;
    (void)stream;
    tprof__thread *t = tprof__cupti_delivering() ? tprof__thread_get() : NULL;
    if (t && buffer) {
        CUpti_Activity *rec = NULL;
        /* a buffer holds up to ~100k records, more than the ring takes at once: before each
         * record, make sure 64 KiB are free, waiting for the flusher if not; one wait that
         * times out (200 ms) ends the waiting for this buffer, so a stuck flusher costs
         * each buffer at most that, and the rest drops as counted drops */
        int may_wait = 1;
        uint64_t untimed = 0, nrec = 0;
        while (F.cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
            if (may_wait && !tprof__ring_wait_room(t, 64u << 10, 200)) may_wait = 0;
            untimed += (uint64_t)translate(t, rec);
            nrec++;
            release_record(rec);
        }
        if (untimed) { /* the time in the run, as the hand-over trace gives its calls' */
            const uint64_t now = tprof__now(), t0 = tprof__S.start_mono;
            tprof__log(TPROF_LOG_DEBUG, "CUPTI buffer at %.6f s of the run: %llu of %llu "
                       "records untimed", (double)(now > t0 ? now - t0 : 0) / 1e9,
                       (unsigned long long)untimed, (unsigned long long)nrec);
        }
        if (untimed) /* two threads may flush at once: the larger total is the one left */
            tprof__set_meta_max(&g_untimed_meta, "cupti.untimed_records",
                                atomic_fetch_add(&g_untimed, untimed) + untimed);
        size_t dropped = 0;
        if (F.cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS && dropped) {
            uint64_t total = atomic_fetch_add(&g_cupti_dropped, dropped) + dropped;
            const uint32_t sz = sizeof(tprof_rec) + sizeof(tprof_pl_u64);
            tprof_rec *r = tprof__reserve(t, sz);
            if (r) {
                r->kind = TPROF_REC_GPU_DROPS;
                r->size = sz;
                r->arg = 0;
                r->ts_ns = tprof__now();
                ((tprof_pl_u64 *)(r + 1))->value = total;
                tprof__commit(t, sz);
            }
        }
    } else if (buffer) { /* nothing to record into: still give back what CUPTI handed over */
        CUpti_Activity *rec = NULL;
        while (F.cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS)
            release_record(rec);
    }
    /* back for the next request; a buffer of a client that held CUPTI during a pause is
     * left to its owner */
    tprof__bufpool_put(&g_pool, buffer);
}

void tprof__cupti_pool_init(int reuse) {
    tprof__bufpool_init(&g_pool, BUF_BYTES, MAX_BUFFERS, reuse);
}

int tprof__cupti_pool_reuse(void) { return g_pool.reuse; }

size_t tprof__cupti_buffers_out(void) { return tprof__bufpool_out(&g_pool); }

void tprof__cupti_corr_rebase(void) { atomic_store(&g_corr_base, atomic_load(&g_corr_max)); }
