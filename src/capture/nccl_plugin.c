/*
 * nccl_plugin.c — the NCCL profiler plugin inside libtrainprof.so (docs/design.md §1): NCCL
 * dlopens the library named by NCCL_PROFILER_PLUGIN and takes the newest ncclProfiler_vN struct
 * it knows; we export v5 (NCCL 2.28; 2.29 falls back to it when v6 is absent) and v4 (NCCL
 * 2.27), whose descriptors differ only in the width of `type` and in init's argument order
 * (capture/nccl_abi.h).
 *
 * What is recorded: one TPROF_REC_COMM_OP record per collective (Coll events) and per
 * send or receive (P2p events), with start and stop read from CLOCK_MONOTONIC (tprof__now).
 * For these events NCCL's stop means "enqueued", so that interval is host time of the call.
 * The GPU-side interval comes from the kernel-channel events (KernelCh, v4 and later): NCCL's
 * proxy reads, per channel, the GPU globaltimer when the kernel started and finished that
 * channel's share of the operation, and hands them to us as a KernelCh event (start pTimer)
 * whose parent is the Coll/P2p handle, then a KernelChStop state (stop pTimer) and a stop.
 * An operation's GPU interval is its first channel start to its last channel stop. The
 * record is written once the host stop and all nChannels channel stops have arrived (by
 * whichever thread completes it: application or proxy); an operation whose channels never
 * all report (CUDA-graph replays, a channel count that differs) is written by the flusher's
 * sweep after TP_NCCL_STALE_NS, with what arrived.
 *
 * Clock: globaltimer is nanoseconds near CLOCK_REALTIME but observed 4-6 ms off it, so it
 * is mapped onto CLOCK_MONOTONIC with an offset calibrated on the fly: the smallest
 * (channel start - host enqueue start) seen so far, since a kernel channel can only start
 * after its operation was enqueued. That bounds the placement error by the shortest
 * enqueue-to-start delay observed (microseconds on an idle GPU); durations are differences
 * of GPU times and do not depend on it. The final offset goes into the metadata
 * (nccl.gpu_timer_offset_ns) so a report can cross-check it against CUPTI's records of the
 * same NCCL kernels. TRAINPROF_NCCL_KERNEL=0 asks NCCL for Coll and P2p only.
 *
 * Event handles come from one process-wide pool of TP_NCCL_SLOTS slots, not from one pool
 * per communicator: Megatron-style jobs create thousands of communicators, most of them
 * idle, and a shared pool bounds memory whatever their number while a communicator context
 * stays ~100 bytes. Slots are taken and given back through an atomic bitmap (no lock, no
 * allocation on the hot path; application and proxy threads call concurrently). A full pool
 * returns a NULL handle, which NCCL ignores, and counts a drop. A handle is the slot's tag
 * (generation << 12 | index), not a pointer, so a stale or repeated stop (or one after its
 * communicator's finalize closed the event) is recognised and ignored instead of touching
 * a slot that now belongs to another event.
 *
 * Every entry point returns success whatever happens: an error would make NCCL disable the
 * plugin or, worse, fail the user's communicator.
 */
#define _GNU_SOURCE /* strnlen, clock_gettime under -std=c11 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../core/config.h"
#include "../core/internal.h"
#include "../core/source.h"
#include "comm_ext.h"
#include "nccl_abi.h"
#include "nccl_internal.h"

#define TP_NCCL_SLOT_BITS 12
#define TP_NCCL_SLOTS (1u << TP_NCCL_SLOT_BITS) /* events open at once, all communicators */
#define TP_NCCL_WORDS (TP_NCCL_SLOTS / 64)
#define TP_NCCL_CTX_MAGIC 0x4c43434e464f5250ull /* "PROFNCCL": rejects a foreign pointer */

/* One communicator, as init describes it. Small on purpose (see above). */
typedef struct tp_nccl_ctx {
    uint64_t magic;
    uint64_t comm_hash;
    uint32_t nranks, rank, nnodes;
    int version;          /* 4 or 5: which struct NCCL chose */
    _Atomic uint64_t drops; /* events refused because the pool was full */
    char name[40];        /* commName when given (torch 2.11 gives none), truncated */
} tp_nccl_ctx;

/* One open event. Fields other than tag and ctx are written only by the thread that won
 * the slot's bit and read only by the thread that wins the tag back (CAS), so they need
 * no atomics: the release store of tag publishes them. */
typedef struct tp_nccl_slot {
    _Atomic uint64_t tag;   /* (gen << TP_NCCL_SLOT_BITS) | index while open, 0 when not */
    _Atomic uintptr_t ctx;  /* owner, for finalize's sweep of events left open */
    uint64_t start_ns, count, bytes, comm_hash, seq;
    uint32_t gen, nranks, rank, op, algo, proto, peer, nchannels, dtype;
    char name[24];          /* the source's op name, kept only when op is unknown */
    /* kernel-channel timing, updated by the proxy thread while the event is open */
    _Atomic uint64_t host_end;  /* host stop (enqueued); 0 until NCCL stopped the event */
    _Atomic uint64_t touched;   /* CLOCK_MONOTONIC of the last stop or channel event */
    _Atomic uint64_t gpu_first; /* smallest channel start pTimer; UINT64_MAX when none */
    _Atomic uint64_t gpu_last;  /* largest channel stop pTimer; 0 when none */
    _Atomic uint32_t ch_done;   /* channels stopped */
    _Atomic uint32_t ch_want;   /* channels to wait for (0: write at host stop) */
} tp_nccl_slot;

static tp_nccl_slot g_slots[TP_NCCL_SLOTS];
static _Atomic uint64_t g_used[TP_NCCL_WORDS];
static _Atomic uint64_t g_drops;      /* pool-full drops, all communicators */
static _Atomic int g_announced;       /* capability reported */
static _Atomic int g_recording;       /* a communicator asked NCCL for events */
static _Atomic uint32_t g_described;  /* communicators described in the metadata */
#define TP_NCCL_DESCRIBED 256u
static __thread uint32_t g_hint;      /* bitmap word this thread last took a slot from */
static _Atomic int g_kernel_timing = -1; /* KernelCh asked for: -1 not decided, 0, 1 */
static _Atomic int64_t g_gpu_offset = INT64_MAX; /* min(channel start - host start), ns */
static _Atomic uint64_t g_pending;    /* events waiting for their channels */

#define TP_NCCL_KCH_BIT (1ull << 62) /* handle of a KernelCh child: this bit | parent tag */
#define TP_NCCL_STALE_NS 2000000000ull /* write an event whose channels stopped reporting */

/* ------------------------------------------------------------------ vocabulary */

/* NCCL's function names ("AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce",
 * "AllToAll", "Send", "Recv", ...) onto docs/design.md §5.2's op set; case-insensitive because the
 * spelling of all-to-all has varied. */
static uint32_t op_of(const char *f) {
    static const struct { const char *s; uint32_t op; } map[] = {
        {"AllReduce", TPROF_COMM_ALLREDUCE}, {"AllGather", TPROF_COMM_ALLGATHER},
        {"ReduceScatter", TPROF_COMM_REDUCESCATTER}, {"Broadcast", TPROF_COMM_BROADCAST},
        {"Reduce", TPROF_COMM_REDUCE}, {"AllToAll", TPROF_COMM_ALLTOALL},
        {"Send", TPROF_COMM_SEND}, {"Recv", TPROF_COMM_RECV},
        {"Barrier", TPROF_COMM_BARRIER}, {"Gather", TPROF_COMM_GATHER},
        {"Scatter", TPROF_COMM_SCATTER}};
    if (!f) return TPROF_COMM_UNKNOWN;
    if (!strncasecmp(f, "nccl", 4)) f += 4;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcasecmp(f, map[i].s)) return map[i].op;
    return TPROF_COMM_UNKNOWN;
}

/* NCCL's datatype names ("ncclFloat32", "ncclBfloat16", ...): the element type and size;
 * unknown (and size 0, so bytes read 0 rather than a guess) otherwise. */
static uint32_t dtype_of(const char *d, uint32_t *size) {
    static const struct { const char *s; uint32_t n, t; } map[] = {
        {"Int8", 1, TPROF_DTYPE_INT8}, {"Char", 1, TPROF_DTYPE_INT8},
        {"Uint8", 1, TPROF_DTYPE_UINT8}, {"Float8e4m3", 1, TPROF_DTYPE_FLOAT8E4M3},
        {"Float8e5m2", 1, TPROF_DTYPE_FLOAT8E5M2}, {"Float16", 2, TPROF_DTYPE_FLOAT16},
        {"Half", 2, TPROF_DTYPE_FLOAT16}, {"Bfloat16", 2, TPROF_DTYPE_BFLOAT16},
        {"Int32", 4, TPROF_DTYPE_INT32}, {"Int", 4, TPROF_DTYPE_INT32},
        {"Uint32", 4, TPROF_DTYPE_UINT32}, {"Float32", 4, TPROF_DTYPE_FLOAT32},
        {"Float", 4, TPROF_DTYPE_FLOAT32}, {"Int64", 8, TPROF_DTYPE_INT64},
        {"Uint64", 8, TPROF_DTYPE_UINT64}, {"Float64", 8, TPROF_DTYPE_FLOAT64},
        {"Double", 8, TPROF_DTYPE_FLOAT64}};
    *size = 0;
    if (!d) return TPROF_DTYPE_UNKNOWN;
    if (!strncasecmp(d, "nccl", 4)) d += 4;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcasecmp(d, map[i].s)) {
            *size = map[i].n;
            return map[i].t;
        }
    return TPROF_DTYPE_UNKNOWN;
}

static uint32_t algo_of(const char *a) {
    static const char *const names[] = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN",
                                        "NVLS", "NVLS_TREE", "PAT"};
    if (!a) return TPROF_ALGO_UNKNOWN;
    for (uint32_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcasecmp(a, names[i])) return i + 1; /* enum tprof_comm_algo order */
    return TPROF_ALGO_UNKNOWN;
}

static uint32_t proto_of(const char *p) {
    if (!p) return TPROF_PROTO_UNKNOWN;
    if (!strcasecmp(p, "LL")) return TPROF_PROTO_LL;
    if (!strcasecmp(p, "LL128")) return TPROF_PROTO_LL128;
    if (!strcasecmp(p, "SIMPLE")) return TPROF_PROTO_SIMPLE;
    return TPROF_PROTO_UNKNOWN;
}

/* ------------------------------------------------------------------ the slot pool */

static int slot_take(void) {
    uint32_t start = g_hint;
    for (uint32_t i = 0; i < TP_NCCL_WORDS; i++) {
        uint32_t w = (start + i) % TP_NCCL_WORDS;
        uint64_t v = atomic_load_explicit(&g_used[w], memory_order_relaxed);
        while (~v) {
            int b = __builtin_ctzll(~v);
            if (atomic_compare_exchange_weak_explicit(&g_used[w], &v, v | (1ull << b),
                                                      memory_order_acquire,
                                                      memory_order_relaxed)) {
                g_hint = w;
                return (int)(w * 64 + (uint32_t)b);
            }
        }
    }
    return -1;
}

static void slot_give(uint32_t idx) {
    atomic_fetch_and_explicit(&g_used[idx / 64], ~(1ull << (idx % 64)), memory_order_release);
}

/* ------------------------------------------------------------------ recording */

static void emit(const tp_nccl_slot *s, uint64_t end, uint32_t flags) {
    tprof__thread *t = tprof__thread_get();
    if (!t) return; /* not recording, or a thread over the limit (counted there) */
    const char *name = s->op != TPROF_COMM_UNKNOWN ? tprof__comm_op_name(s->op)
                       : s->name[0]                ? s->name
                                                   : "Unknown";
    uint32_t size;
    tprof_pl_comm *pl = tprof__begin_named(t, TPROF_REC_COMM_OP, name, sizeof *pl,
                                           s->start_ns, &size);
    if (!pl) return; /* ring full: counted as a drop by the reserve */
    *pl = (tprof_pl_comm){.end_ns = end < s->start_ns ? s->start_ns : end,
                          .bytes = s->bytes,
                          .count = s->count,
                          .comm_hash = s->comm_hash,
                          .seq = (uint32_t)s->seq,
                          .nranks = s->nranks,
                          .rank = s->rank,
                          .op = s->op,
                          .algo = s->algo,
                          .proto = s->proto,
                          .peer = s->peer,
                          .flags = flags,
                          .nchannels = s->nchannels,
                          .source = TPROF_COMM_SRC_NCCL,
                          .dtype = s->dtype};
    uint64_t g0 = atomic_load_explicit(&s->gpu_first, memory_order_relaxed);
    uint64_t g1 = atomic_load_explicit(&s->gpu_last, memory_order_relaxed);
    int64_t off = atomic_load_explicit(&g_gpu_offset, memory_order_relaxed);
    if (g0 != UINT64_MAX && g1 >= g0 && off != INT64_MAX && (int64_t)g0 - off > 0) {
        pl->gpu_start_ns = (uint64_t)((int64_t)g0 - off);
        pl->gpu_end_ns = (uint64_t)((int64_t)g1 - off);
        pl->flags |= TPROF_COMM_F_GPU_TIME;
    }
    tprof__commit(t, size);
}

/* Claims the open event `tag`; on success copies it out and frees its slot. Exactly one
 * caller (stop or finalize's sweep) wins a given tag. */
static int slot_claim(uint64_t tag, tp_nccl_slot *out) {
    uint32_t idx = (uint32_t)(tag & (TP_NCCL_SLOTS - 1));
    tp_nccl_slot *s = &g_slots[idx];
    uint64_t expect = tag;
    if (!atomic_compare_exchange_strong_explicit(&s->tag, &expect, 0, memory_order_acq_rel,
                                                 memory_order_relaxed))
        return 0;
    /* copy the plain fields (not the atomics) before the slot can be taken again */
    out->start_ns = s->start_ns;
    out->count = s->count;
    out->bytes = s->bytes;
    out->comm_hash = s->comm_hash;
    out->seq = s->seq;
    out->nranks = s->nranks;
    out->rank = s->rank;
    out->op = s->op;
    out->algo = s->algo;
    out->proto = s->proto;
    out->peer = s->peer;
    out->nchannels = s->nchannels;
    out->dtype = s->dtype;
    memcpy(out->name, s->name, sizeof out->name);
    atomic_store_explicit(&out->host_end, atomic_load(&s->host_end), memory_order_relaxed);
    atomic_store_explicit(&out->gpu_first, atomic_load(&s->gpu_first), memory_order_relaxed);
    atomic_store_explicit(&out->gpu_last, atomic_load(&s->gpu_last), memory_order_relaxed);
    atomic_store_explicit(&out->ch_done, atomic_load(&s->ch_done), memory_order_relaxed);
    atomic_store_explicit(&out->ch_want, atomic_load_explicit(&s->ch_want, memory_order_relaxed),
                          memory_order_relaxed);
    slot_give(idx);
    return 1;
}

/* The open event a handle names, or NULL when the handle is stale or not ours. */
static tp_nccl_slot *slot_of(uint64_t tag) {
    if (!(tag >> TP_NCCL_SLOT_BITS) || (tag & TP_NCCL_KCH_BIT)) return NULL;
    tp_nccl_slot *s = &g_slots[tag & (TP_NCCL_SLOTS - 1)];
    return atomic_load_explicit(&s->tag, memory_order_acquire) == tag ? s : NULL;
}

static void atomic_min_u64(_Atomic uint64_t *a, uint64_t v) {
    uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);
    while (v < cur && !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed,
                                                             memory_order_relaxed)) {
    }
}

static void atomic_max_u64(_Atomic uint64_t *a, uint64_t v) {
    uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);
    while (v > cur && !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed,
                                                             memory_order_relaxed)) {
    }
}

/* Writes the event `tag` if NCCL has stopped it and all its channels have reported; exactly
 * one of the racing callers (host stop, last channel stop) wins the claim. */
/* Writes the event `tag`, which NCCL stopped at `end` and which waited for its channels,
 * if this caller wins its claim. */
static void write_pending(uint64_t tag, uint64_t end) {
    tp_nccl_slot copy;
    if (slot_claim(tag, &copy)) {
        atomic_fetch_sub_explicit(&g_pending, 1, memory_order_relaxed);
        emit(&copy, end, 0);
    }
}

static void try_finish(tp_nccl_slot *s, uint64_t tag, uint32_t want) {
    uint64_t end = atomic_load(&s->host_end);
    if (!end || atomic_load(&s->ch_done) < want) return;
    write_pending(tag, end);
}

/* KernelCh start: the channel's GPU start time, against the parent Coll/P2p handle. The
 * context pointer is not touched: only the handle, checked against our pool, is used. */
static void kernel_ch_start(void **eHandle, void *parentObj, const tp_nccl_kernel_ch *k) {
    uint64_t parent = (uint64_t)(uintptr_t)parentObj;
    tp_nccl_slot *s = slot_of(parent);
    if (!s) return; /* its parent was dropped or already written: NULL handle */
    if (k->pTimer) {
        atomic_min_u64(&s->gpu_first, k->pTimer);
        /* calibration: a channel starts after its operation was enqueued */
        int64_t d = (int64_t)k->pTimer - (int64_t)s->start_ns;
        int64_t cur = atomic_load_explicit(&g_gpu_offset, memory_order_relaxed);
        while (d < cur && !atomic_compare_exchange_weak_explicit(
                              &g_gpu_offset, &cur, d, memory_order_relaxed, memory_order_relaxed)) {
        }
    }
    atomic_store_explicit(&s->touched, tprof__now(), memory_order_relaxed);
    *eHandle = (void *)(uintptr_t)(TP_NCCL_KCH_BIT | parent);
}

/* nccl.pool_drops, written as it grows (rare: a full pool, at powers of two, and at
 * finalize) */
static tprof__meta_max g_drops_meta = TPROF__META_MAX_INIT;

static void start_event(tp_nccl_ctx *c, void **eHandle, uint64_t type,
                        const tp_nccl_descr_u *u, int rank, uint64_t comm_hash) {
    if (!(type & (TP_NCCL_COLL | TP_NCCL_P2P))) return; /* NULL handle: NCCL ignores it */
    if (atomic_load_explicit(&tprof__g_state, memory_order_relaxed) != TPROF__ON) return;
    int idx = slot_take();
    if (idx < 0) {
        atomic_fetch_add_explicit(&c->drops, 1, memory_order_relaxed);
        uint64_t n = atomic_fetch_add_explicit(&g_drops, 1, memory_order_relaxed) + 1;
        /* into the file at the 1st, 2nd, 4th, 8th ... drop, so a job that never destroys its
         * communicators still says it lost ops; each communicator's finalize writes the exact
         * total. A few metadata writes, not one per drop on a full pool. */
        if (!(n & (n - 1))) tprof__set_meta_max(&g_drops_meta, "nccl.pool_drops", n);
        return;
    }
    tp_nccl_slot *s = &g_slots[idx];
    const char *func, *dtype;
    size_t count;
    if (type & TP_NCCL_COLL) {
        func = u->coll.func;
        dtype = u->coll.datatype;
        count = u->coll.count;
        s->seq = u->coll.seqNumber;
        s->algo = algo_of(u->coll.algo);
        s->proto = proto_of(u->coll.proto);
        s->nchannels = u->coll.nChannels;
        s->op = op_of(func);
        s->peer = (s->op == TPROF_COMM_BROADCAST || s->op == TPROF_COMM_REDUCE) &&
                          u->coll.root >= 0
                      ? (uint32_t)u->coll.root
                      : TPROF_COMM_NO_PEER;
    } else {
        func = u->p2p.func;
        dtype = u->p2p.datatype;
        count = u->p2p.count;
        s->seq = 0;
        s->algo = TPROF_ALGO_UNKNOWN;
        s->proto = TPROF_PROTO_UNKNOWN;
        s->nchannels = u->p2p.nChannels;
        s->op = op_of(func);
        s->peer = u->p2p.peer >= 0 ? (uint32_t)u->p2p.peer : TPROF_COMM_NO_PEER;
    }
    s->name[0] = 0;
    if (s->op == TPROF_COMM_UNKNOWN && func) { /* keep the source's name, bounded */
        size_t n = strnlen(func, sizeof s->name - 1);
        memcpy(s->name, func, n);
        s->name[n] = 0;
    }
    s->count = count;
    uint32_t esize;
    s->dtype = dtype_of(dtype, &esize);
    s->bytes = (uint64_t)count * esize;
    s->comm_hash = comm_hash ? comm_hash : c->comm_hash;
    s->nranks = c->nranks;
    s->rank = rank >= 0 ? (uint32_t)rank : c->rank;
    atomic_store_explicit(&s->ctx, (uintptr_t)c, memory_order_relaxed);
    atomic_store_explicit(&s->host_end, 0, memory_order_relaxed);
    atomic_store_explicit(&s->gpu_first, UINT64_MAX, memory_order_relaxed);
    atomic_store_explicit(&s->gpu_last, 0, memory_order_relaxed);
    atomic_store_explicit(&s->ch_done, 0, memory_order_relaxed);
    atomic_store_explicit(&s->ch_want,
                          atomic_load_explicit(&g_kernel_timing, memory_order_relaxed) == 1
                              ? s->nchannels
                              : 0,
                          memory_order_relaxed);
    s->gen = s->gen + 1 ? s->gen + 1 : 1; /* never 0: a zero tag means "free" */
    uint64_t tag = ((uint64_t)s->gen << TP_NCCL_SLOT_BITS) | (uint32_t)idx;
    s->start_ns = tprof__now();
    atomic_store_explicit(&s->tag, tag, memory_order_release);
    *eHandle = (void *)(uintptr_t)tag;
}

/* ------------------------------------------------------------------ entry points */

static tp_nccl_ctx *ctx_of(void *context) {
    tp_nccl_ctx *c = context;
    return c && c->magic == TP_NCCL_CTX_MAGIC ? c : NULL;
}

void tprof__nccl_init(void **context, uint64_t hash, int *mask, const char *name, int nnodes,
                      int nranks, int rank, int version) {
    if (context) *context = NULL;
    int kt = atomic_load(&g_kernel_timing);
    if (kt < 0) { /* decided once per process: every communicator asks for the same */
        const char *e = tprof__env(TPROF__OPT_NCCL_KERNEL);
        int v = version >= 4 && !(e && !strcmp(e, "0"));
        atomic_compare_exchange_strong(&g_kernel_timing, &kt, v);
        kt = atomic_load(&g_kernel_timing);
    }
    int want = TP_NCCL_COLL | TP_NCCL_P2P | (kt == 1 && version >= 4 ? TP_NCCL_KERNEL_CH : 0);
    const char *off = tprof__env(TPROF__OPT_NCCL);
    /* Touching the thread state starts a lazy session (TRAINPROF_DIR); when we will not
     * record, ask NCCL for nothing so that it skips the calls altogether. */
    if (off && !strcmp(off, "0")) {
        want = 0;
        if (tprof__thread_get() && !atomic_exchange(&g_announced, 1))
            tprof__capability("nccl", "off (TRAINPROF_NCCL=0)");
    } else if (!tprof__thread_get()) {
        want = 0;
    }
    if (mask) *mask = want;
    if (!context) return;
    tp_nccl_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        if (mask) *mask = 0; /* no context: nothing will be started against it */
        return;
    }
    c->magic = TP_NCCL_CTX_MAGIC;
    c->comm_hash = hash;
    c->nranks = nranks > 0 ? (uint32_t)nranks : 0;
    c->rank = rank >= 0 ? (uint32_t)rank : 0;
    c->nnodes = nnodes > 0 ? (uint32_t)nnodes : 0;
    c->version = version;
    if (name) {
        size_t n = strnlen(name, sizeof c->name - 1);
        memcpy(c->name, name, n);
    }
    *context = c;
    /* What only init says of a communicator: its nodes and name (docs/design.md §5.2), as
     * metadata, for the first TP_NCCL_DESCRIBED communicators of the process (a rank inits only
     * those it belongs to, a few dozen even under Megatron; the bound keeps memory flat
     * whatever NCCL does). */
    if (want && atomic_fetch_add(&g_described, 1) < TP_NCCL_DESCRIBED) {
        char key[40], v[96];
        snprintf(key, sizeof key, "nccl.comm.%016llx", (unsigned long long)hash);
        snprintf(v, sizeof v, "nranks=%u rank=%u nnodes=%u name=%s", c->nranks, c->rank,
                 c->nnodes, c->name[0] ? c->name : "-");
        tprof__set_meta(key, v);
    }
    if (want) atomic_store(&g_recording, 1);
    if (want && !atomic_exchange(&g_announced, 1)) {
        char st[96];
        snprintf(st, sizeof st, "profiler plugin v%d: Coll and P2p events, %s", version,
                 want & TP_NCCL_KERNEL_CH ? "GPU times from kernel-channel events"
                                          : "host enqueue times only");
        tprof__capability("nccl", st);
    }
}

tp_nccl_result tprof__nccl_finalize(void *context) {
    tp_nccl_ctx *c = ctx_of(context);
    if (!c) return TP_NCCL_SUCCESS;
    /* Close what NCCL left open on this communicator (an aborted communicator does), so
     * the pool does not leak slots and the events still appear, flagged unfinished. */
    uint64_t now = tprof__now();
    for (uint32_t i = 0; i < TP_NCCL_SLOTS; i++) {
        tp_nccl_slot *s = &g_slots[i];
        if (atomic_load_explicit(&s->ctx, memory_order_relaxed) != (uintptr_t)c) continue;
        uint64_t tag = atomic_load_explicit(&s->tag, memory_order_acquire);
        /* re-read the owner after the tag: the tag's release published that owner */
        if (!tag || atomic_load_explicit(&s->ctx, memory_order_relaxed) != (uintptr_t)c)
            continue;
        tp_nccl_slot copy;
        if (!slot_claim(tag, &copy)) continue;
        uint64_t end = atomic_load_explicit(&copy.host_end, memory_order_relaxed);
        if (end) { /* stopped by NCCL, still waiting for channels: complete as it is */
            atomic_fetch_sub_explicit(&g_pending, 1, memory_order_relaxed);
            emit(&copy, end, 0);
        } else {
            emit(&copy, now, TPROF_COMM_F_UNFINISHED);
        }
    }
    int64_t off = atomic_load_explicit(&g_gpu_offset, memory_order_relaxed);
    if (off != INT64_MAX) {
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)off);
        tprof__set_meta("nccl.gpu_timer_offset_ns", v); /* globaltimer - CLOCK_MONOTONIC */
    }
    if (atomic_load_explicit(&c->drops, memory_order_relaxed)) /* the total so far */
        tprof__set_meta_max(&g_drops_meta, "nccl.pool_drops",
                            atomic_load_explicit(&g_drops, memory_order_relaxed));
    c->magic = 0;
    free(c);
    return TP_NCCL_SUCCESS;
}

tp_nccl_result tprof__nccl_stop(void *eHandle) {
    uint64_t tag = (uint64_t)(uintptr_t)eHandle;
    if (!(tag >> TP_NCCL_SLOT_BITS)) return TP_NCCL_SUCCESS; /* NULL or not one of ours */
    uint64_t now = tprof__now();
    if (tag & TP_NCCL_KCH_BIT) { /* a channel finished: count it */
        uint64_t parent = tag & ~TP_NCCL_KCH_BIT;
        tp_nccl_slot *s = slot_of(parent);
        if (!s) return TP_NCCL_SUCCESS;
        atomic_store_explicit(&s->touched, now, memory_order_relaxed);
        uint32_t want = atomic_load_explicit(&s->ch_want, memory_order_relaxed);
        atomic_fetch_add(&s->ch_done, 1);
        try_finish(s, parent, want);
        return TP_NCCL_SUCCESS;
    }
    tp_nccl_slot *s = slot_of(tag);
    /* read before host_end is set: once it is, the last channel may free the slot */
    uint32_t want = s ? atomic_load_explicit(&s->ch_want, memory_order_relaxed) : 0;
    if (s && want) { /* wait for the channels; the last one writes the record */
        atomic_fetch_add_explicit(&g_pending, 1, memory_order_relaxed);
        atomic_store_explicit(&s->touched, now, memory_order_relaxed);
        atomic_store(&s->host_end, now);
        try_finish(s, tag, want);
        return TP_NCCL_SUCCESS;
    }
    tp_nccl_slot copy;
    if (slot_claim(tag, &copy)) emit(&copy, now, 0);
    return TP_NCCL_SUCCESS;
}

tp_nccl_result tprof__nccl_state(void *eHandle, tp_nccl_state st, tp_nccl_state_args *a) {
    uint64_t tag = (uint64_t)(uintptr_t)eHandle;
    if (st != TP_NCCL_STATE_KERNEL_CH_STOP || !a || !(tag & TP_NCCL_KCH_BIT))
        return TP_NCCL_SUCCESS; /* no other state is asked for */
    tp_nccl_slot *s = slot_of(tag & ~TP_NCCL_KCH_BIT);
    if (s && a->kernelCh.pTimer) atomic_max_u64(&s->gpu_last, a->kernelCh.pTimer);
    return TP_NCCL_SUCCESS;
}

/* Called by the flusher on every pass (core/flusher.c): writes events NCCL stopped but
 * whose channels stopped reporting for TP_NCCL_STALE_NS, or all of them when `final`. A scan
 * of the pool's bitmap, skipped entirely while nothing waits. */
static void nccl_sweep(int final) {
    if (!atomic_load_explicit(&g_pending, memory_order_relaxed)) return;
    uint64_t now = tprof__now();
    for (uint32_t w = 0; w < TP_NCCL_WORDS; w++) {
        uint64_t used = atomic_load_explicit(&g_used[w], memory_order_acquire);
        while (used) {
            uint32_t idx = w * 64 + (uint32_t)__builtin_ctzll(used);
            used &= used - 1;
            tp_nccl_slot *s = &g_slots[idx];
            uint64_t tag = atomic_load_explicit(&s->tag, memory_order_acquire);
            uint64_t end = atomic_load(&s->host_end);
            if (!tag || !end) continue;
            uint64_t last = atomic_load_explicit(&s->touched, memory_order_relaxed);
            /* another thread may have touched it after `now` was read: not stale */
            uint64_t recent = last > end ? last : end;
            if (!final && (recent >= now || now - recent < TP_NCCL_STALE_NS)) continue;
            write_pending(tag, end);
        }
    }
}

void tprof__nccl_start(void *context, void **eHandle, uint64_t type, void *parentObj,
                       const tp_nccl_descr_u *u, int rank, uint64_t comm_hash) {
    if (!eHandle) return;
    *eHandle = NULL;
    if (!u) return;
    if (type & TP_NCCL_KERNEL_CH) { /* the context is not touched for these */
        kernel_ch_start(eHandle, parentObj, &u->kernelCh);
        return;
    }
    tp_nccl_ctx *c = ctx_of(context);
    if (c) start_event(c, eHandle, type, u, rank, comm_hash);
}

static tp_nccl_result init_v5(void **context, uint64_t commId, int *mask, const char *name,
                              int nNodes, int nranks, int rank, tp_nccl_logger logfn) {
    (void)logfn;
    tprof__nccl_init(context, commId, mask, name, nNodes, nranks, rank, 5);
    return TP_NCCL_SUCCESS;
}

static tp_nccl_result start_v5(void *context, void **eHandle, tp_nccl_descr_v5 *d) {
    if (!eHandle) return TP_NCCL_SUCCESS;
    *eHandle = NULL;
    if (d) tprof__nccl_start(context, eHandle, d->type, d->parentObj, &d->u, d->rank, 0);
    return TP_NCCL_SUCCESS;
}

static tp_nccl_result init_v4(void **context, int *mask, const char *name, uint64_t commHash,
                              int nNodes, int nranks, int rank, tp_nccl_logger logfn) {
    (void)logfn;
    tprof__nccl_init(context, commHash, mask, name, nNodes, nranks, rank, 4);
    return TP_NCCL_SUCCESS;
}

static tp_nccl_result start_v4(void *context, void **eHandle, tp_nccl_descr_v4 *d) {
    if (!eHandle) return TP_NCCL_SUCCESS;
    *eHandle = NULL;
    /* NCCL 2.27 starts a group's Coll/P2p events only when the Group event got a handle:
     * give it an inert one (below the pool's tags, so stop ignores it) */
    if (d && d->type == TP_NCCL_GROUP) {
        if (context) *eHandle = (void *)(uintptr_t)0x47;
        return TP_NCCL_SUCCESS;
    }
    if (d) tprof__nccl_start(context, eHandle, d->type, d->parentObj, &d->u, d->rank, 0);
    return TP_NCCL_SUCCESS;
}

/* The symbols NCCL looks up (default visibility: the library hides everything else). */
__attribute__((visibility("default"))) const tp_nccl_profiler_v5 ncclProfiler_v5 = {
    "trainprof", init_v5, start_v5, tprof__nccl_stop, tprof__nccl_state, tprof__nccl_finalize};
__attribute__((visibility("default"))) const tp_nccl_profiler_v4 ncclProfiler_v4 = {
    "trainprof", init_v4, start_v4, tprof__nccl_stop, tprof__nccl_state, tprof__nccl_finalize};

int tprof__nccl_recording(void) { return atomic_load(&g_recording); }

/* Each flusher pass but the last: operations whose channels went quiet. The last pass has
 * nothing left to sweep: the flush before it wrote every operation still waiting. */
static uint64_t nccl_source_tick(int final) {
    if (!final) nccl_sweep(0);
    return 0;
}

/* Shutdown, or a signal sent from outside: every operation still waiting for its kernel
 * channels. */
static void nccl_source_flush(void) { nccl_sweep(1); }

const tprof__source tprof__source_nccl = {
    .name = "nccl",
    .tick = nccl_source_tick,
    .flush = nccl_source_flush,
};
