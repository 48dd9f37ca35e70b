/*
 * nccl_compat.c — the NCCL profiler plugin structs other than v4/v5: ncclProfiler_v1 (NCCL
 * 2.23), ncclProfiler_v2 (2.24, 2.25), ncclProfiler_v3 (2.26) and ncclProfiler_v6 (2.29).
 * NCCL takes the newest one it knows, so each release uses exactly one of them; each entry
 * point converts its arguments onto the version-independent core (nccl_internal.h), which
 * records and times the events as for v4/v5 (see nccl_plugin.c). Layouts: nccl_abi_compat.h.
 *
 * v1-v3: init gets no communicator, so the context is made with hash 0 and each Coll/P2p
 * event passes the commHash its descriptor carries; nranks is unknown (0) and the rank comes
 * from each descriptor. No GPU times: v3's KernelCh events carry no timer (pTimer came with
 * v4), and the core asks for KernelCh only from v4 on, so those versions get Coll|P2p.
 * v1's func, datatype, algo and proto are enum indices of NCCL 2.23 (the one release that
 * used v1 natively; a later NCCL finds a newer struct first) and are turned into the names
 * the core knows; an index outside the table leaves the field NULL (op "Unknown", bytes 0,
 * algo/proto unknown).
 *
 * Group events (v1-v3): NCCL starts a plan's Coll and P2p events only when its Group event
 * got a non-NULL handle (src/misc/profiler.cc, ncclProfilerStartTaskEvents, read in 2.23,
 * 2.24 and 2.27; 2.28 dropped the condition), so a Group gets a constant placeholder handle
 * that stop ignores; nothing is recorded for it.
 *
 * v6 = v5 plus the copy-engine events. Coll, P2p and KernelCh descriptors are v5's, passed
 * through unchanged. A CeColl (a collective NCCL runs with copy engines instead of a kernel:
 * it has no Coll event of its own) is recorded as a collective: its function, count,
 * datatype, root and CE sequence number; host interval from start to stop (the enqueue, as
 * for Coll); no algorithm, protocol, channels or GPU time. CeSync and CeBatch are not asked
 * for and get a NULL handle.
 *
 * Every entry point returns success whatever it is given, NULL included.
 */
#include <stddef.h>
#include <stdint.h>

#include "nccl_abi.h"
#include "nccl_abi_compat.h"
#include "nccl_internal.h"

/* Handle of a v1-v3 Group event: not NULL (so NCCL goes on to the Coll/P2p events), below
 * the core's smallest tag (so even the core would ignore it), and never a pointer. */
#define TP_COMPAT_GROUP ((void *)(uintptr_t)0x47)

/* ------------------------------------------------------------------ v1 enum indices */

/* ncclFunc_t of NCCL 2.23 (src/include/nccl_common.h): 0..7 (later releases append). */
static const char *const v1_funcs[] = {"Broadcast", "Reduce",   "AllGather", "ReduceScatter",
                                       "AllReduce", "SendRecv", "Send",      "Recv"};
/* ncclDataType_t (nccl.h): 0..9 in every release since 2.23; 10 and 11 (float8) were
 * appended later and are mapped too, since the values are never reused. */
static const char *const v1_dtypes[] = {
    "ncclInt8",     "ncclUint8",      "ncclInt32",     "ncclUint32",
    "ncclInt64",    "ncclUint64",     "ncclFloat16",   "ncclFloat32",
    "ncclFloat64",  "ncclBfloat16",   "ncclFloat8e4m3", "ncclFloat8e5m2"};
/* NCCL_ALGO_* and NCCL_PROTO_* of NCCL 2.23 (PAT = 6 arrived with it). */
static const char *const v1_algos[] = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN",
                                       "NVLS", "NVLS_TREE", "PAT"};
static const char *const v1_protos[] = {"LL", "LL128", "SIMPLE"};

#define V1_NAME(table, i) ((size_t)(i) < sizeof table / sizeof table[0] ? table[i] : NULL)

/* ------------------------------------------------------------------ shared v1-v3 parts */

/* Returns 1 when the event was handled here (Group, or one we never record). */
static int start_old(void *context, void **eHandle, uint8_t type) {
    if (type == TP_NCCL_GROUP) {
        if (context) *eHandle = TP_COMPAT_GROUP;
        return 1;
    }
    return !(type & (TP_NCCL_COLL | TP_NCCL_P2P)); /* KernelCh (v3), proxy, net: NULL */
}

static tp_nccl_result stop_old(void *eHandle) {
    if (eHandle == TP_COMPAT_GROUP) return TP_NCCL_SUCCESS;
    return tprof__nccl_stop(eHandle);
}

/* No state of v1-v3 is of use (KernelChStop came with v4). */
static tp_nccl_result state_old(void *eHandle, tp_nccl_state st, tp_nccl_state_args_v1 *a) {
    (void)eHandle;
    (void)st;
    (void)a;
    return TP_NCCL_SUCCESS;
}

/* ------------------------------------------------------------------ v1 (NCCL 2.23) */

static tp_nccl_result init_v1(void **context, int *mask) {
    tprof__nccl_init(context, 0, mask, NULL, 0, 0, -1, 1);
    return TP_NCCL_SUCCESS;
}

static tp_nccl_result start_v1(void *context, void **eHandle, tp_nccl_descr_v1 *d) {
    if (!eHandle) return TP_NCCL_SUCCESS;
    *eHandle = NULL;
    if (!d || start_old(context, eHandle, d->type)) return TP_NCCL_SUCCESS;
    tp_nccl_descr_u u = {0};
    uint64_t hash;
    if (d->type & TP_NCCL_COLL) {
        const tp_nccl_coll_v1 *c = &d->u.coll;
        u.coll.seqNumber = c->seqNumber;
        u.coll.func = V1_NAME(v1_funcs, c->func);
        u.coll.sendBuff = c->sendBuff;
        u.coll.recvBuff = c->recvBuff;
        u.coll.count = c->count;
        u.coll.root = c->root;
        u.coll.datatype = V1_NAME(v1_dtypes, c->datatype);
        u.coll.nChannels = c->nMaxChannels;
        u.coll.nWarps = c->nWarps;
        u.coll.algo = V1_NAME(v1_algos, c->algo);
        u.coll.proto = V1_NAME(v1_protos, c->proto);
        hash = c->commHash;
    } else {
        const tp_nccl_p2p_v1 *p = &d->u.p2p;
        u.p2p.func = V1_NAME(v1_funcs, p->func);
        u.p2p.buff = p->buff;
        u.p2p.datatype = V1_NAME(v1_dtypes, p->datatype);
        u.p2p.count = p->count;
        u.p2p.peer = p->peer;
        hash = p->commHash;
    }
    tprof__nccl_start(context, eHandle, d->type, d->parentObj, &u, d->rank, hash);
    return TP_NCCL_SUCCESS;
}

/* ------------------------------------------------------------------ v2 (NCCL 2.24, 2.25) */

static tp_nccl_result init_v2(void **context, int *mask) {
    tprof__nccl_init(context, 0, mask, NULL, 0, 0, -1, 2);
    return TP_NCCL_SUCCESS;
}

/* v2's and v3's P2p member are the same; so are the Coll fields we read, but at other
 * offsets (v3 dropped trafficBytes): one macro copies them from either struct, and returns
 * the communicator hash. */
#define COLL_V2_V3(u, c)                                                                    \
    ((u)->coll.seqNumber = (c)->seqNumber, (u)->coll.func = (c)->func,                      \
     (u)->coll.sendBuff = (c)->sendBuff, (u)->coll.recvBuff = (c)->recvBuff,                \
     (u)->coll.count = (c)->count, (u)->coll.root = (c)->root,                              \
     (u)->coll.datatype = (c)->datatype, (u)->coll.nChannels = (c)->nMaxChannels,           \
     (u)->coll.nWarps = (c)->nWarps, (u)->coll.algo = (c)->algo, (u)->coll.proto = (c)->proto, \
     (uint64_t)(c)->commHash)

static uint64_t p2p_v2(tp_nccl_descr_u *u, const tp_nccl_p2p_v2 *p) {
    u->p2p.func = p->func;
    u->p2p.buff = p->buff;
    u->p2p.datatype = p->datatype;
    u->p2p.count = p->count;
    u->p2p.peer = p->peer;
    return p->commHash;
}

static tp_nccl_result start_v2(void *context, void **eHandle, tp_nccl_descr_v2 *d) {
    if (!eHandle) return TP_NCCL_SUCCESS;
    *eHandle = NULL;
    if (!d || start_old(context, eHandle, d->type)) return TP_NCCL_SUCCESS;
    tp_nccl_descr_u u = {0};
    uint64_t hash;
    if (d->type & TP_NCCL_COLL) {
        const tp_nccl_coll_v2 *c = &d->u.coll;
        hash = COLL_V2_V3(&u, c);
    } else {
        hash = p2p_v2(&u, &d->u.p2p);
    }
    tprof__nccl_start(context, eHandle, d->type, d->parentObj, &u, d->rank, hash);
    return TP_NCCL_SUCCESS;
}

/* ------------------------------------------------------------------ v3 (NCCL 2.26) */

static tp_nccl_result init_v3(void **context, int *mask) {
    tprof__nccl_init(context, 0, mask, NULL, 0, 0, -1, 3);
    return TP_NCCL_SUCCESS;
}

static tp_nccl_result start_v3(void *context, void **eHandle, tp_nccl_descr_v3 *d) {
    if (!eHandle) return TP_NCCL_SUCCESS;
    *eHandle = NULL;
    if (!d || start_old(context, eHandle, d->type)) return TP_NCCL_SUCCESS;
    tp_nccl_descr_u u = {0};
    uint64_t hash;
    if (d->type & TP_NCCL_COLL) {
        const tp_nccl_coll_v3 *c = &d->u.coll;
        hash = COLL_V2_V3(&u, c);
    } else {
        hash = p2p_v2(&u, &d->u.p2p);
    }
    tprof__nccl_start(context, eHandle, d->type, d->parentObj, &u, d->rank, hash);
    return TP_NCCL_SUCCESS;
}

/* ------------------------------------------------------------------ v6 (NCCL 2.29) */

static tp_nccl_result init_v6(void **context, uint64_t commId, int *mask, const char *name,
                              int nNodes, int nranks, int rank, tp_nccl_logger logfn) {
    (void)logfn;
    int want = 0;
    tprof__nccl_init(context, commId, &want, name, nNodes, nranks, rank, 6);
    /* CE collectives too, whenever anything is asked for (and a context exists for them) */
    if (want && context && *context) want |= TP_NCCL_CE_COLL;
    if (mask) *mask = want;
    return TP_NCCL_SUCCESS;
}

static tp_nccl_result start_v6(void *context, void **eHandle, tp_nccl_descr_v6 *d) {
    if (!eHandle) return TP_NCCL_SUCCESS;
    *eHandle = NULL;
    if (!d) return TP_NCCL_SUCCESS;
    if (d->type & TP_NCCL_CE_COLL) { /* recorded as the collective it is */
        const tp_nccl_ce_coll *ce = &d->u.ceColl;
        tp_nccl_descr_u u = {0};
        u.coll.seqNumber = ce->seqNumber;
        u.coll.func = ce->func;
        u.coll.sendBuff = ce->sendBuff;
        u.coll.recvBuff = ce->recvBuff;
        u.coll.count = ce->count;
        u.coll.root = ce->root;
        u.coll.datatype = ce->datatype;
        /* nChannels 0: no KernelCh will come, the record is written at stop */
        tprof__nccl_start(context, eHandle, TP_NCCL_COLL, d->parentObj, &u, d->rank, 0);
        return TP_NCCL_SUCCESS;
    }
    if (d->type & (TP_NCCL_CE_SYNC | TP_NCCL_CE_BATCH)) return TP_NCCL_SUCCESS;
    tprof__nccl_start(context, eHandle, d->type, d->parentObj, &d->u.v5, d->rank, 0);
    return TP_NCCL_SUCCESS;
}

/* ------------------------------------------------------------------ the exported structs */

__attribute__((visibility("default"))) const tp_nccl_profiler_v6 ncclProfiler_v6 = {
    "trainprof", init_v6, start_v6, tprof__nccl_stop, tprof__nccl_state, tprof__nccl_finalize};
__attribute__((visibility("default"))) const tp_nccl_profiler_v3 ncclProfiler_v3 = {
    "trainprof", init_v3, start_v3, stop_old, state_old, tprof__nccl_finalize};
__attribute__((visibility("default"))) const tp_nccl_profiler_v2 ncclProfiler_v2 = {
    "trainprof", init_v2, start_v2, stop_old, state_old, tprof__nccl_finalize};
__attribute__((visibility("default"))) const tp_nccl_profiler_v1 ncclProfiler_v1 = {
    "trainprof", init_v1, start_v1, stop_old, state_old, tprof__nccl_finalize};
