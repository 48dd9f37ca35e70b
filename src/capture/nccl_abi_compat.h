/*
 * nccl_abi_compat.h — our own declarations of NCCL's profiler plugin ABI for the struct
 * versions other than 4 and 5 (those are in nccl_abi.h): v1, v2, v3 (NCCL 2.23 to 2.26) and
 * v6 (NCCL 2.29). capture/nccl_compat.c converts them onto the core (nccl_internal.h).
 *
 * Layouts read from NVIDIA/nccl (never included, never copied):
 *  - v1: src/include/plugin/profiler/profiler_v1.h of NCCL 2.29.7, which keeps the layout
 *    NCCL 2.23 used natively (cross-checked with 2.23's src/misc/profiler.cc, which fills
 *    it, and with ext-profiler/example/nccl/profiler_v1.h). func, datatype, algo and proto
 *    are uint8 enum indices there (ncclFunc_t, ncclDataType_t, NCCL_ALGO_*, NCCL_PROTO_*).
 *  - v2: src/include/plugin/profiler/profiler_v2.h (2.29 series), the layout 2.24 and 2.25
 *    used natively (cross-checked with 2.24's src/misc/profiler.cc): the four enums become
 *    strings; op, isCollnet and isNvls are gone.
 *  - v3: src/include/plugin/profiler/profiler_v3.h of NCCL 2.29.7, native in 2.26:
 *    trafficBytes is gone; kernelCh (channelId only: no pTimer before v4) and netPlugin
 *    join the union.
 *  - v6: src/include/plugin/profiler/profiler_v6.h of NCCL 2.29.3 (native there), plus the
 *    event bits and states of src/include/plugin/nccl_profiler.h of the same release: the v5
 *    descriptor with the same members at the same offsets, plus the copy-engine members
 *    ceColl, ceCollSync and ceCollBatch; state arguments are v5's. (A later revision of the
 *    header adds a kernelStep member, 32 bytes, which changes nothing here.)
 *
 * In v1 to v3 the descriptor carries the communicator's hash (and name) per Coll/P2p event,
 * init gets neither, and `type` is a uint8_t. The static assertions at the end pin every
 * offset we read, and each struct's entry points, on LP64 Linux.
 */
#ifndef TPROF_NCCL_ABI_COMPAT_H
#define TPROF_NCCL_ABI_COMPAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nccl_abi.h"

/* Copy-engine event bits (v6; nccl_profiler.h of 2.29). */
enum {
    TP_NCCL_CE_COLL = 1 << 12,
    TP_NCCL_CE_SYNC = 1 << 13,
    TP_NCCL_CE_BATCH = 1 << 14
};

/* ------------------------------------------------------------------ v1 (NCCL 2.23) */

typedef struct tp_nccl_coll_v1 {
    const char *name;   /* the communicator's name */
    uint64_t commHash;
    uint64_t seqNumber;
    uint8_t func;       /* ncclFunc_t */
    const void *sendBuff;
    void *recvBuff;
    size_t count;
    int root;
    uint8_t datatype;   /* ncclDataType_t */
    uint32_t op;        /* ncclRedOp_t */
    size_t trafficBytes;
    uint8_t nMaxChannels;
    uint8_t nWarps;
    uint8_t algo;       /* NCCL_ALGO_* */
    uint8_t proto;      /* NCCL_PROTO_* */
    int isCollnet;
    int isNvls;
} tp_nccl_coll_v1;

typedef struct tp_nccl_p2p_v1 {
    const char *name;
    uint64_t commHash;
    uint8_t func;
    void *buff;
    uint8_t datatype;
    size_t count;
    int peer;
} tp_nccl_p2p_v1;

typedef struct tp_nccl_descr_v1 {
    uint8_t type;
    void *parentObj;
    int rank;
    union {
        tp_nccl_coll_v1 coll;
        tp_nccl_p2p_v1 p2p;
        tp_nccl_proxy_op proxyOp;
        struct { int step; } proxyStep;
    } u;
} tp_nccl_descr_v1;

/* ------------------------------------------------------------------ v2 (NCCL 2.24, 2.25) */

typedef struct tp_nccl_coll_v2 {
    const char *name;
    uint64_t commHash;
    uint64_t seqNumber;
    const char *func;
    const void *sendBuff;
    void *recvBuff;
    size_t count;
    int root;
    const char *datatype;
    size_t trafficBytes;
    uint8_t nMaxChannels;
    uint8_t nWarps;
    const char *algo;
    const char *proto;
} tp_nccl_coll_v2;

/* v2 and v3 share this one. */
typedef struct tp_nccl_p2p_v2 {
    const char *name;
    uint64_t commHash;
    const char *func;
    void *buff;
    const char *datatype;
    size_t count;
    int peer;
} tp_nccl_p2p_v2;

typedef struct tp_nccl_descr_v2 {
    uint8_t type;
    void *parentObj;
    int rank;
    union {
        tp_nccl_coll_v2 coll;
        tp_nccl_p2p_v2 p2p;
        tp_nccl_proxy_op proxyOp;
        struct { int step; } proxyStep;
    } u;
} tp_nccl_descr_v2;

/* ------------------------------------------------------------------ v3 (NCCL 2.26) */

typedef struct tp_nccl_coll_v3 {
    const char *name;
    uint64_t commHash;
    uint64_t seqNumber;
    const char *func;
    const void *sendBuff;
    void *recvBuff;
    size_t count;
    int root;
    const char *datatype;
    uint8_t nMaxChannels;
    uint8_t nWarps;
    const char *algo;
    const char *proto;
} tp_nccl_coll_v3;

typedef struct tp_nccl_descr_v3 {
    uint8_t type;
    void *parentObj;
    int rank;
    union {
        tp_nccl_coll_v3 coll;
        tp_nccl_p2p_v2 p2p;
        tp_nccl_proxy_op proxyOp;
        struct { int step; } proxyStep;
        struct { uint8_t channelId; } kernelCh; /* no GPU time before v4 */
        struct { int64_t id; void *data; } netPlugin;
    } u;
} tp_nccl_descr_v3;

/* ncclProfilerEventStateArgs_v1_t .. _v3_t: the same 16-byte union in all three. */
typedef union tp_nccl_state_args_v1 {
    struct { size_t transSize; int steps; } proxyOp;
    struct { int appendedProxyOps; } proxyCtrl;
} tp_nccl_state_args_v1;

/* The structs NCCL finds with dlsym("ncclProfiler_v1") .. ("ncclProfiler_v3"): init takes
 * only the context and the activation mask. */
typedef struct tp_nccl_profiler_v1 {
    const char *name;
    tp_nccl_result (*init)(void **context, int *eActivationMask);
    tp_nccl_result (*startEvent)(void *context, void **eHandle, tp_nccl_descr_v1 *eDescr);
    tp_nccl_result (*stopEvent)(void *eHandle);
    tp_nccl_result (*recordEventState)(void *eHandle, tp_nccl_state eState,
                                       tp_nccl_state_args_v1 *eStateArgs);
    tp_nccl_result (*finalize)(void *context);
} tp_nccl_profiler_v1;

typedef struct tp_nccl_profiler_v2 {
    const char *name;
    tp_nccl_result (*init)(void **context, int *eActivationMask);
    tp_nccl_result (*startEvent)(void *context, void **eHandle, tp_nccl_descr_v2 *eDescr);
    tp_nccl_result (*stopEvent)(void *eHandle);
    tp_nccl_result (*recordEventState)(void *eHandle, tp_nccl_state eState,
                                       tp_nccl_state_args_v1 *eStateArgs);
    tp_nccl_result (*finalize)(void *context);
} tp_nccl_profiler_v2;

typedef struct tp_nccl_profiler_v3 {
    const char *name;
    tp_nccl_result (*init)(void **context, int *eActivationMask);
    tp_nccl_result (*startEvent)(void *context, void **eHandle, tp_nccl_descr_v3 *eDescr);
    tp_nccl_result (*stopEvent)(void *eHandle);
    tp_nccl_result (*recordEventState)(void *eHandle, tp_nccl_state eState,
                                       tp_nccl_state_args_v1 *eStateArgs);
    tp_nccl_result (*finalize)(void *context);
} tp_nccl_profiler_v3;

/* ------------------------------------------------------------------ v6 (NCCL 2.29) */

typedef struct tp_nccl_ce_coll {
    uint64_t seqNumber; /* NCCL fills it with the CE sequence number (ceSeqNum) */
    const char *func;
    const void *sendBuff;
    void *recvBuff;
    size_t count;
    int root;
    const char *datatype;
    const char *syncStrategy; /* "MC" or "UC" */
    bool intraBatchSync;
    uint32_t batchSize;
    uint32_t numBatches;
    uint32_t ceSeqNum;
    void *stream;
} tp_nccl_ce_coll;

/* The v6 union: v5's members are unchanged (same names, same offsets), so they are kept as
 * one tp_nccl_descr_u the core reads directly; the v5 API members (groupApi, collApi,
 * p2pApi, kernelLaunch) are never read and are smaller than `coll`. */
typedef union tp_nccl_descr_u_v6 {
    tp_nccl_descr_u v5;
    tp_nccl_ce_coll ceColl;
    struct { bool isComplete; int nRanks; } ceCollSync;
    struct { int numOps; size_t totalBytes; bool useIntraSync; } ceCollBatch;
} tp_nccl_descr_u_v6;

typedef struct tp_nccl_descr_v6 {
    uint64_t type;
    void *parentObj;
    int rank;
    tp_nccl_descr_u_v6 u;
} tp_nccl_descr_v6;

/* v6's state arguments are v5's (tp_nccl_state_args); init has v5's arguments. */
typedef struct tp_nccl_profiler_v6 {
    const char *name;
    tp_nccl_result (*init)(void **context, uint64_t commId, int *eActivationMask,
                           const char *commName, int nNodes, int nranks, int rank,
                           tp_nccl_logger logfn);
    tp_nccl_result (*startEvent)(void *context, void **eHandle, tp_nccl_descr_v6 *eDescr);
    tp_nccl_result (*stopEvent)(void *eHandle);
    tp_nccl_result (*recordEventState)(void *eHandle, tp_nccl_state eState,
                                       tp_nccl_state_args *eStateArgs);
    tp_nccl_result (*finalize)(void *context);
} tp_nccl_profiler_v6;

/* ------------------------------------------------------------------ offsets (LP64) */

/* v1 */
_Static_assert(offsetof(tp_nccl_descr_v1, parentObj) == 8, "v1 parentObj");
_Static_assert(offsetof(tp_nccl_descr_v1, rank) == 16, "v1 rank");
_Static_assert(offsetof(tp_nccl_descr_v1, u) == 24, "v1 union");
_Static_assert(offsetof(tp_nccl_coll_v1, commHash) == 8, "v1 coll.commHash");
_Static_assert(offsetof(tp_nccl_coll_v1, seqNumber) == 16, "v1 coll.seqNumber");
_Static_assert(offsetof(tp_nccl_coll_v1, func) == 24, "v1 coll.func");
_Static_assert(offsetof(tp_nccl_coll_v1, count) == 48, "v1 coll.count");
_Static_assert(offsetof(tp_nccl_coll_v1, root) == 56, "v1 coll.root");
_Static_assert(offsetof(tp_nccl_coll_v1, datatype) == 60, "v1 coll.datatype");
_Static_assert(offsetof(tp_nccl_coll_v1, op) == 64, "v1 coll.op");
_Static_assert(offsetof(tp_nccl_coll_v1, trafficBytes) == 72, "v1 coll.trafficBytes");
_Static_assert(offsetof(tp_nccl_coll_v1, nMaxChannels) == 80, "v1 coll.nMaxChannels");
_Static_assert(offsetof(tp_nccl_coll_v1, algo) == 82, "v1 coll.algo");
_Static_assert(offsetof(tp_nccl_coll_v1, proto) == 83, "v1 coll.proto");
_Static_assert(sizeof(tp_nccl_coll_v1) == 96, "v1 coll size");
_Static_assert(offsetof(tp_nccl_p2p_v1, commHash) == 8, "v1 p2p.commHash");
_Static_assert(offsetof(tp_nccl_p2p_v1, func) == 16, "v1 p2p.func");
_Static_assert(offsetof(tp_nccl_p2p_v1, datatype) == 32, "v1 p2p.datatype");
_Static_assert(offsetof(tp_nccl_p2p_v1, count) == 40, "v1 p2p.count");
_Static_assert(offsetof(tp_nccl_p2p_v1, peer) == 48, "v1 p2p.peer");
_Static_assert(sizeof(tp_nccl_descr_v1) == 120, "v1 descriptor size");

/* v2 */
_Static_assert(offsetof(tp_nccl_descr_v2, parentObj) == 8, "v2 parentObj");
_Static_assert(offsetof(tp_nccl_descr_v2, rank) == 16, "v2 rank");
_Static_assert(offsetof(tp_nccl_descr_v2, u) == 24, "v2 union");
_Static_assert(offsetof(tp_nccl_coll_v2, commHash) == 8, "v2 coll.commHash");
_Static_assert(offsetof(tp_nccl_coll_v2, seqNumber) == 16, "v2 coll.seqNumber");
_Static_assert(offsetof(tp_nccl_coll_v2, func) == 24, "v2 coll.func");
_Static_assert(offsetof(tp_nccl_coll_v2, count) == 48, "v2 coll.count");
_Static_assert(offsetof(tp_nccl_coll_v2, root) == 56, "v2 coll.root");
_Static_assert(offsetof(tp_nccl_coll_v2, datatype) == 64, "v2 coll.datatype");
_Static_assert(offsetof(tp_nccl_coll_v2, trafficBytes) == 72, "v2 coll.trafficBytes");
_Static_assert(offsetof(tp_nccl_coll_v2, nMaxChannels) == 80, "v2 coll.nMaxChannels");
_Static_assert(offsetof(tp_nccl_coll_v2, algo) == 88, "v2 coll.algo");
_Static_assert(offsetof(tp_nccl_coll_v2, proto) == 96, "v2 coll.proto");
_Static_assert(sizeof(tp_nccl_coll_v2) == 104, "v2 coll size");
_Static_assert(offsetof(tp_nccl_p2p_v2, commHash) == 8, "v2 p2p.commHash");
_Static_assert(offsetof(tp_nccl_p2p_v2, func) == 16, "v2 p2p.func");
_Static_assert(offsetof(tp_nccl_p2p_v2, datatype) == 32, "v2 p2p.datatype");
_Static_assert(offsetof(tp_nccl_p2p_v2, count) == 40, "v2 p2p.count");
_Static_assert(offsetof(tp_nccl_p2p_v2, peer) == 48, "v2 p2p.peer");

/* v3 */
_Static_assert(offsetof(tp_nccl_descr_v3, parentObj) == 8, "v3 parentObj");
_Static_assert(offsetof(tp_nccl_descr_v3, rank) == 16, "v3 rank");
_Static_assert(offsetof(tp_nccl_descr_v3, u) == 24, "v3 union");
_Static_assert(offsetof(tp_nccl_coll_v3, commHash) == 8, "v3 coll.commHash");
_Static_assert(offsetof(tp_nccl_coll_v3, seqNumber) == 16, "v3 coll.seqNumber");
_Static_assert(offsetof(tp_nccl_coll_v3, func) == 24, "v3 coll.func");
_Static_assert(offsetof(tp_nccl_coll_v3, count) == 48, "v3 coll.count");
_Static_assert(offsetof(tp_nccl_coll_v3, root) == 56, "v3 coll.root");
_Static_assert(offsetof(tp_nccl_coll_v3, datatype) == 64, "v3 coll.datatype");
_Static_assert(offsetof(tp_nccl_coll_v3, nMaxChannels) == 72, "v3 coll.nMaxChannels");
_Static_assert(offsetof(tp_nccl_coll_v3, algo) == 80, "v3 coll.algo");
_Static_assert(offsetof(tp_nccl_coll_v3, proto) == 88, "v3 coll.proto");
_Static_assert(sizeof(tp_nccl_coll_v3) == 96, "v3 coll size");

_Static_assert(sizeof(tp_nccl_state_args_v1) == 16, "v1-v3 state args");
_Static_assert(offsetof(tp_nccl_profiler_v1, init) == 8, "v1 struct init");
_Static_assert(offsetof(tp_nccl_profiler_v1, startEvent) == 16, "v1 struct startEvent");
_Static_assert(offsetof(tp_nccl_profiler_v1, stopEvent) == 24, "v1 struct stopEvent");
_Static_assert(offsetof(tp_nccl_profiler_v1, recordEventState) == 32, "v1 struct state");
_Static_assert(offsetof(tp_nccl_profiler_v1, finalize) == 40, "v1 struct finalize");
_Static_assert(offsetof(tp_nccl_profiler_v2, finalize) == 40, "v2 struct finalize");
_Static_assert(offsetof(tp_nccl_profiler_v3, finalize) == 40, "v3 struct finalize");

/* v6: the v5 members stay where nccl_abi.h pins them (the union starts at 24 as in v5) */
_Static_assert(offsetof(tp_nccl_descr_v6, parentObj) == 8, "v6 parentObj");
_Static_assert(offsetof(tp_nccl_descr_v6, rank) == 16, "v6 rank");
_Static_assert(offsetof(tp_nccl_descr_v6, u) == 24, "v6 union");
_Static_assert(offsetof(tp_nccl_descr_v6, u.v5.coll.parentGroup) == 24 + 80, "v6 coll");
_Static_assert(offsetof(tp_nccl_descr_v6, u.v5.p2p.nChannels) == 24 + 36, "v6 p2p");
_Static_assert(offsetof(tp_nccl_descr_v6, u.v5.kernelCh.pTimer) == 24 + 8, "v6 kernelCh");
_Static_assert(offsetof(tp_nccl_ce_coll, func) == 8, "v6 ceColl.func");
_Static_assert(offsetof(tp_nccl_ce_coll, count) == 32, "v6 ceColl.count");
_Static_assert(offsetof(tp_nccl_ce_coll, root) == 40, "v6 ceColl.root");
_Static_assert(offsetof(tp_nccl_ce_coll, datatype) == 48, "v6 ceColl.datatype");
_Static_assert(offsetof(tp_nccl_ce_coll, intraBatchSync) == 64, "v6 ceColl.intraBatchSync");
_Static_assert(offsetof(tp_nccl_ce_coll, ceSeqNum) == 76, "v6 ceColl.ceSeqNum");
_Static_assert(sizeof(tp_nccl_ce_coll) == 88, "v6 ceColl size");
_Static_assert(sizeof(tp_nccl_descr_u_v6) == 88, "v6 union size (coll and ceColl)");
_Static_assert(offsetof(tp_nccl_profiler_v6, init) == 8, "v6 struct init");
_Static_assert(offsetof(tp_nccl_profiler_v6, startEvent) == 16, "v6 struct startEvent");
_Static_assert(offsetof(tp_nccl_profiler_v6, stopEvent) == 24, "v6 struct stopEvent");
_Static_assert(offsetof(tp_nccl_profiler_v6, recordEventState) == 32, "v6 struct state");
_Static_assert(offsetof(tp_nccl_profiler_v6, finalize) == 40, "v6 struct finalize");

#endif /* TPROF_NCCL_ABI_COMPAT_H */
