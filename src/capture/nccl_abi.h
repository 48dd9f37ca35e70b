/*
 * nccl_abi.h — our own declarations of the parts of NCCL's profiler plugin ABI that
 * capture/nccl_plugin.c uses: the result type, the event-type bits, the event descriptor
 * of versions 4 and 5, the state-argument union and the struct of entry points NCCL looks
 * up by name (ncclProfiler_v5, ncclProfiler_v4).
 *
 * We never include NCCL's headers (docs/design.md §1, §6.6: vendor ABIs are declared, not
 * linked). The layouts are facts read from NVIDIA/nccl src/include/plugin/nccl_profiler.h and
 * src/include/plugin/profiler/profiler_v4.h, profiler_v5.h (NCCL 2.27/2.28); the static
 * assertions at the end pin every offset the plugin reads, on LP64 Linux, so a mistaken
 * edit fails the build instead of misreading NCCL's memory.
 */
#ifndef TPROF_NCCL_ABI_H
#define TPROF_NCCL_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ncclResult_t is a C enum whose success value is 0; the plugin never returns anything
 * else, so an int of the same size is all we need. */
typedef int tp_nccl_result;
#define TP_NCCL_SUCCESS 0

/* ncclDebugLogger_t: void (*)(level, unsigned long flags, const char *file, int line,
 * const char *fmt, ...). Kept only as an opaque pointer: we do not log through NCCL. */
typedef void (*tp_nccl_logger)(int level, unsigned long flags, const char *file, int line,
                               const char *fmt, ...);

/* Event-type bits of eActivationMask and of the descriptor's `type` (nccl_profiler.h). */
enum {
    TP_NCCL_GROUP = 1 << 0,
    TP_NCCL_COLL = 1 << 1,
    TP_NCCL_P2P = 1 << 2,
    TP_NCCL_PROXY_OP = 1 << 3,
    TP_NCCL_PROXY_STEP = 1 << 4,
    TP_NCCL_PROXY_CTRL = 1 << 5,
    TP_NCCL_KERNEL_CH = 1 << 6,
    TP_NCCL_NET_PLUGIN = 1 << 7,
    TP_NCCL_GROUP_API = 1 << 8,     /* v5 */
    TP_NCCL_COLL_API = 1 << 9,      /* v5 */
    TP_NCCL_P2P_API = 1 << 10,      /* v5 */
    TP_NCCL_KERNEL_LAUNCH = 1 << 11 /* v5 */
};

/* ncclProfilerEventState_t is a C enum (int-sized); we only name the state we would act on. */
typedef int tp_nccl_state;
#define TP_NCCL_STATE_KERNEL_CH_STOP 22

/* The descriptor's union members the plugin reads. Both versions put the union at offset
 * 24 (after type, parentObj, rank) and give `coll` and `p2p` the same member offsets; v5
 * widens `type` from uint8_t to uint64_t and appends parentGroup to coll and p2p. */
typedef struct tp_nccl_coll {
    uint64_t seqNumber;
    const char *func;
    const void *sendBuff;
    void *recvBuff;
    size_t count;
    int root;
    const char *datatype;
    uint8_t nChannels;
    uint8_t nWarps;
    const char *algo;
    const char *proto;
    void *parentGroup; /* v5 only */
} tp_nccl_coll;

typedef struct tp_nccl_p2p {
    const char *func;
    void *buff;
    const char *datatype;
    size_t count;
    int peer;
    uint8_t nChannels;
    void *parentGroup; /* v5 only */
} tp_nccl_p2p;

typedef struct tp_nccl_proxy_op {
    pid_t pid; /* ncclPid_t: the originating process (PXN: parentObj may not be ours) */
    uint8_t channelId;
    int peer;
    int nSteps;
    int chunkSize;
    int isSend;
} tp_nccl_proxy_op;

typedef struct tp_nccl_kernel_ch {
    uint8_t channelId;
    uint64_t pTimer; /* GPU globaltimer, ns; not on our clock */
} tp_nccl_kernel_ch;

/* Union payload shared by both versions; the API members of v5 (groupApi, collApi,
 * p2pApi, kernelLaunch) are never read and are covered by the size of `coll`, the largest. */
typedef union tp_nccl_descr_u {
    tp_nccl_coll coll;
    tp_nccl_p2p p2p;
    tp_nccl_proxy_op proxyOp;
    struct { int step; } proxyStep;
    tp_nccl_kernel_ch kernelCh;
    struct { int64_t id; void *data; } netPlugin;
} tp_nccl_descr_u;

typedef struct tp_nccl_descr_v5 {
    uint64_t type;
    void *parentObj;
    int rank;
    tp_nccl_descr_u u;
} tp_nccl_descr_v5;

typedef struct tp_nccl_descr_v4 {
    uint8_t type;
    void *parentObj;
    int rank;
    tp_nccl_descr_u u;
} tp_nccl_descr_v4;

/* ncclProfilerEventStateArgs_v4_t / _v5_t: a union whose largest member is 8 bytes. */
typedef union tp_nccl_state_args {
    struct { size_t transSize; } proxyStep;
    struct { int appendedProxyOps; } proxyCtrl;
    struct { void *data; } netPlugin;
    struct { uint64_t pTimer; } kernelCh;
} tp_nccl_state_args;

/* The struct NCCL finds with dlsym("ncclProfiler_v5"). */
typedef struct tp_nccl_profiler_v5 {
    const char *name;
    tp_nccl_result (*init)(void **context, uint64_t commId, int *eActivationMask,
                           const char *commName, int nNodes, int nranks, int rank,
                           tp_nccl_logger logfn);
    tp_nccl_result (*startEvent)(void *context, void **eHandle, tp_nccl_descr_v5 *eDescr);
    tp_nccl_result (*stopEvent)(void *eHandle);
    tp_nccl_result (*recordEventState)(void *eHandle, tp_nccl_state eState,
                                       tp_nccl_state_args *eStateArgs);
    tp_nccl_result (*finalize)(void *context);
} tp_nccl_profiler_v5;

/* ncclProfiler_v4: init takes the name before the hash, and no commId. */
typedef struct tp_nccl_profiler_v4 {
    const char *name;
    tp_nccl_result (*init)(void **context, int *eActivationMask, const char *commName,
                           uint64_t commHash, int nNodes, int nranks, int rank,
                           tp_nccl_logger logfn);
    tp_nccl_result (*startEvent)(void *context, void **eHandle, tp_nccl_descr_v4 *eDescr);
    tp_nccl_result (*stopEvent)(void *eHandle);
    tp_nccl_result (*recordEventState)(void *eHandle, tp_nccl_state eState,
                                       tp_nccl_state_args *eStateArgs);
    tp_nccl_result (*finalize)(void *context);
} tp_nccl_profiler_v4;

/* Offsets on x86-64/aarch64 Linux (LP64), computed from the headers' member lists. */
_Static_assert(sizeof(void *) == 8, "the NCCL profiler ABI is declared for LP64");
_Static_assert(offsetof(tp_nccl_descr_v5, parentObj) == 8, "v5 parentObj");
_Static_assert(offsetof(tp_nccl_descr_v5, rank) == 16, "v5 rank");
_Static_assert(offsetof(tp_nccl_descr_v5, u) == 24, "v5 union");
_Static_assert(offsetof(tp_nccl_descr_v4, parentObj) == 8, "v4 parentObj");
_Static_assert(offsetof(tp_nccl_descr_v4, rank) == 16, "v4 rank");
_Static_assert(offsetof(tp_nccl_descr_v4, u) == 24, "v4 union");
_Static_assert(offsetof(tp_nccl_coll, func) == 8, "coll.func");
_Static_assert(offsetof(tp_nccl_coll, count) == 32, "coll.count");
_Static_assert(offsetof(tp_nccl_coll, root) == 40, "coll.root");
_Static_assert(offsetof(tp_nccl_coll, datatype) == 48, "coll.datatype");
_Static_assert(offsetof(tp_nccl_coll, nChannels) == 56, "coll.nChannels");
_Static_assert(offsetof(tp_nccl_coll, algo) == 64, "coll.algo");
_Static_assert(offsetof(tp_nccl_coll, proto) == 72, "coll.proto");
_Static_assert(offsetof(tp_nccl_coll, parentGroup) == 80, "coll.parentGroup");
_Static_assert(offsetof(tp_nccl_p2p, datatype) == 16, "p2p.datatype");
_Static_assert(offsetof(tp_nccl_p2p, count) == 24, "p2p.count");
_Static_assert(offsetof(tp_nccl_p2p, peer) == 32, "p2p.peer");
_Static_assert(offsetof(tp_nccl_p2p, nChannels) == 36, "p2p.nChannels");
_Static_assert(offsetof(tp_nccl_kernel_ch, pTimer) == 8, "kernelCh.pTimer");
_Static_assert(sizeof(tp_nccl_state_args) == 8, "state args");
_Static_assert(offsetof(tp_nccl_profiler_v5, finalize) == 40, "v5 struct");
_Static_assert(offsetof(tp_nccl_profiler_v4, finalize) == 40, "v4 struct");
/* every other member too, and the sizes, so that no edit moves a field unnoticed */
_Static_assert(offsetof(tp_nccl_coll, seqNumber) == 0, "coll.seqNumber");
_Static_assert(offsetof(tp_nccl_coll, sendBuff) == 16, "coll.sendBuff");
_Static_assert(offsetof(tp_nccl_coll, recvBuff) == 24, "coll.recvBuff");
_Static_assert(offsetof(tp_nccl_coll, nWarps) == 57, "coll.nWarps");
_Static_assert(sizeof(tp_nccl_coll) == 88, "coll size (v5; v4's ends before parentGroup)");
_Static_assert(offsetof(tp_nccl_p2p, func) == 0, "p2p.func");
_Static_assert(offsetof(tp_nccl_p2p, buff) == 8, "p2p.buff");
_Static_assert(offsetof(tp_nccl_p2p, parentGroup) == 40, "p2p.parentGroup");
_Static_assert(sizeof(tp_nccl_p2p) == 48, "p2p size (v5; v4's ends before parentGroup)");
_Static_assert(offsetof(tp_nccl_proxy_op, pid) == 0, "proxyOp.pid");
_Static_assert(offsetof(tp_nccl_proxy_op, channelId) == 4, "proxyOp.channelId");
_Static_assert(offsetof(tp_nccl_proxy_op, peer) == 8, "proxyOp.peer");
_Static_assert(offsetof(tp_nccl_proxy_op, nSteps) == 12, "proxyOp.nSteps");
_Static_assert(offsetof(tp_nccl_proxy_op, chunkSize) == 16, "proxyOp.chunkSize");
_Static_assert(offsetof(tp_nccl_proxy_op, isSend) == 20, "proxyOp.isSend");
_Static_assert(offsetof(tp_nccl_kernel_ch, channelId) == 0, "kernelCh.channelId");
_Static_assert(sizeof(tp_nccl_kernel_ch) == 16, "kernelCh size");
/* (no size for the descriptors: NCCL owns them and we read them through pointers; ours hold
 * the v5 union, which is larger than v4's) */
_Static_assert(offsetof(tp_nccl_descr_v5, type) == 0 && offsetof(tp_nccl_descr_v4, type) == 0,
               "descriptor type");
_Static_assert(offsetof(tp_nccl_profiler_v5, init) == 8 &&
                   offsetof(tp_nccl_profiler_v5, startEvent) == 16 &&
                   offsetof(tp_nccl_profiler_v5, stopEvent) == 24 &&
                   offsetof(tp_nccl_profiler_v5, recordEventState) == 32 &&
                   sizeof(tp_nccl_profiler_v5) == 48,
               "v5 struct members");
_Static_assert(offsetof(tp_nccl_profiler_v4, init) == 8 &&
                   offsetof(tp_nccl_profiler_v4, startEvent) == 16 &&
                   offsetof(tp_nccl_profiler_v4, stopEvent) == 24 &&
                   offsetof(tp_nccl_profiler_v4, recordEventState) == 32 &&
                   sizeof(tp_nccl_profiler_v4) == 48,
               "v4 struct members");

#endif /* TPROF_NCCL_ABI_H */
