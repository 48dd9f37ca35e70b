/*
 * test_nccl_compat.c — the NCCL profiler plugin structs v1, v2, v3 and v6
 * (src/capture/nccl_compat.c) without NCCL or a GPU.
 *
 * As test_nccl.c does for v4/v5: the test plays NCCL, finding each ncclProfiler_vN with
 * dlsym, calling its entry points with synthetic descriptors laid out as our declarations
 * say (src/capture/nccl_abi_compat.h), and reading the records back through the model. Each
 * recording runs in a forked child (one session per process; and NCCL uses one struct
 * version per process, which the core relies on for its kernel-timing choice).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "analysis/model.h"
#include "nccl_test.h"
#include "capture/nccl_abi.h"
#include "capture/nccl_abi_compat.h"
#include "trainprof.h"

#define CHILD_PREFIX "ncclv"
#include "child.h"

/* Found the way NCCL finds them: by name, in the library the process has loaded. */
#define LOOKUP(type, sym, code)                                                          \
    static const type *sym##_struct(void) {                                              \
        const type *p = dlsym(RTLD_DEFAULT, #sym);                                       \
        CHECK(p && p->name && p->init && p->startEvent && p->stopEvent &&                \
                  p->recordEventState && p->finalize,                                    \
              code);                                                                     \
        return p;                                                                        \
    }
LOOKUP(tp_nccl_profiler_v1, ncclProfiler_v1, 81)
LOOKUP(tp_nccl_profiler_v2, ncclProfiler_v2, 82)
LOOKUP(tp_nccl_profiler_v3, ncclProfiler_v3, 83)
LOOKUP(tp_nccl_profiler_v6, ncclProfiler_v6, 86)

static const tp_comm_op *by_seq(const tp_process *p, uint32_t seq) {
    for (size_t i = 0; i < p->ncomm; i++)
        if (p->comm[i].seq == seq) return &p->comm[i];
    return NULL;
}

#define HASH_A 0x1111222233334444ull
#define HASH_B 0x5555666677778888ull
#define HASH_C 0x9999aaaabbbbccccull
#define OLD_MASK (TP_NCCL_COLL | TP_NCCL_P2P) /* v1-v3: no kernel-channel timing */

/* ------------------------------------------------------------------ v1: enum indices */

/* NCCL 2.23's indices: ncclFunc_t, ncclDataType_t, NCCL_ALGO_*, NCCL_PROTO_* */
enum { F_BCAST = 0, F_REDUCE, F_ALLGATHER, F_REDSCAT, F_ALLREDUCE, F_SENDRECV, F_SEND, F_RECV };
enum { D_INT8 = 0, D_UINT8, D_INT32, D_UINT32, D_INT64, D_UINT64, D_F16, D_F32, D_F64, D_BF16 };
enum { A_TREE = 0, A_RING, A_CN_DIRECT, A_CN_CHAIN, A_NVLS, A_NVLS_TREE, A_PAT };
enum { P_LL = 0, P_LL128, P_SIMPLE };

static tp_nccl_descr_v1 coll_v1(uint8_t func, size_t count, uint8_t dtype, uint64_t hash,
                                uint64_t seq, uint8_t algo, uint8_t proto) {
    tp_nccl_descr_v1 d;
    memset(&d, 0, sizeof d);
    d.type = TP_NCCL_COLL;
    d.rank = 3;
    d.u.coll.name = "dp";
    d.u.coll.commHash = hash;
    d.u.coll.seqNumber = seq;
    d.u.coll.func = func;
    d.u.coll.count = count;
    d.u.coll.root = -1;
    d.u.coll.datatype = dtype;
    d.u.coll.op = 0;
    d.u.coll.trafficBytes = 123456789; /* never mistaken for anything else */
    d.u.coll.nMaxChannels = 4;
    d.u.coll.nWarps = 16;
    d.u.coll.algo = algo;
    d.u.coll.proto = proto;
    d.u.coll.isCollnet = 1;
    d.u.coll.isNvls = 1;
    return d;
}

static tp_nccl_descr_v1 p2p_v1(uint8_t func, size_t count, uint8_t dtype, uint64_t hash,
                               int peer) {
    tp_nccl_descr_v1 d;
    memset(&d, 0, sizeof d);
    d.type = TP_NCCL_P2P;
    d.rank = 3;
    d.u.p2p.name = "pp";
    d.u.p2p.commHash = hash;
    d.u.p2p.func = func;
    d.u.p2p.count = count;
    d.u.p2p.datatype = dtype;
    d.u.p2p.peer = peer;
    return d;
}

static void body_v1(void) {
    start_session();
    const tp_nccl_profiler_v1 *pl = ncclProfiler_v1_struct();
    void *c = NULL;
    int mask = -1;
    CHECK(pl->init(&c, &mask) == TP_NCCL_SUCCESS && c, 10);
    CHECK(mask == OLD_MASK, 11);

    /* NCCL 2.23 starts a plan's Coll/P2p events only under a non-NULL Group handle */
    tp_nccl_descr_v1 g;
    memset(&g, 0, sizeof g);
    g.type = TP_NCCL_GROUP;
    void *hg = NULL;
    CHECK(pl->startEvent(c, &hg, &g) == TP_NCCL_SUCCESS && hg, 12);

    struct { tp_nccl_descr_v1 d; void *h; } ev[] = {
        {coll_v1(F_ALLREDUCE, 1024, D_F32, HASH_A, 7, A_RING, P_SIMPLE), NULL},
        {coll_v1(F_BCAST, 10, D_BF16, HASH_B, 8, A_TREE, P_LL), NULL},
        {coll_v1(F_ALLGATHER, 100, D_F16, HASH_A, 9, A_PAT, P_LL128), NULL},
        {coll_v1(F_REDSCAT, 64, D_UINT8, HASH_A, 10, A_NVLS, P_SIMPLE), NULL},
        {coll_v1(F_REDUCE, 5, D_F64, HASH_A, 11, A_CN_CHAIN, P_LL), NULL},
        {coll_v1(F_SENDRECV, 3, D_INT32, HASH_A, 12, A_NVLS_TREE, P_LL128), NULL},
        {coll_v1(99, 8, 77, HASH_A, 13, 50, 9), NULL}, /* indices past the tables */
        {p2p_v1(F_SEND, 100, D_INT64, HASH_B, 5), NULL},
        {p2p_v1(F_RECV, 100, D_INT8, HASH_B, 6), NULL},
        {p2p_v1(F_SEND, 9, 10, HASH_C, 2), NULL}, /* ncclFloat8e4m3 */
    };
    enum { NEV = sizeof ev / sizeof ev[0] };
    ev[1].d.u.coll.root = 2;
    ev[4].d.u.coll.root = 0;
    ev[8].d.rank = -1; /* no rank in the descriptor: the communicator's (unknown in v1) */
    for (int i = 0; i < NEV; i++) {
        ev[i].d.parentObj = hg;
        CHECK(pl->startEvent(c, &ev[i].h, &ev[i].d) == TP_NCCL_SUCCESS && ev[i].h, 13);
    }
    sleep_ms(5);
    /* events we never record: a NULL handle */
    tp_nccl_descr_v1 po;
    memset(&po, 0, sizeof po);
    po.type = TP_NCCL_PROXY_OP;
    po.parentObj = ev[0].h;
    void *hp = (void *)1;
    CHECK(pl->startEvent(c, &hp, &po) == TP_NCCL_SUCCESS && hp == NULL, 14);
    tp_nccl_state_args_v1 sa = {.proxyCtrl = {3}};
    CHECK(pl->recordEventState(ev[0].h, 17, &sa) == TP_NCCL_SUCCESS, 15);
    for (int i = 0; i < NEV; i++) CHECK(pl->stopEvent(ev[i].h) == TP_NCCL_SUCCESS, 16);
    CHECK(pl->stopEvent(hg) == TP_NCCL_SUCCESS, 17);
    CHECK(pl->stopEvent(hg) == TP_NCCL_SUCCESS, 18); /* the Group handle is inert */

    /* NULL wherever NCCL could pass one */
    CHECK(pl->init(NULL, NULL) == TP_NCCL_SUCCESS, 19);
    void *h = (void *)1;
    CHECK(pl->startEvent(c, NULL, &ev[0].d) == TP_NCCL_SUCCESS, 20);
    CHECK(pl->startEvent(c, &h, NULL) == TP_NCCL_SUCCESS && h == NULL, 21);
    h = (void *)1;
    CHECK(pl->startEvent(NULL, &h, &ev[0].d) == TP_NCCL_SUCCESS && h == NULL, 22);
    h = (void *)1;
    CHECK(pl->startEvent(NULL, &h, &g) == TP_NCCL_SUCCESS && h == NULL, 23);
    CHECK(pl->stopEvent(NULL) == TP_NCCL_SUCCESS, 24);
    CHECK(pl->recordEventState(NULL, 0, NULL) == TP_NCCL_SUCCESS, 25);
    CHECK(pl->finalize(NULL) == TP_NCCL_SUCCESS, 26);
    CHECK(pl->finalize(c) == TP_NCCL_SUCCESS, 27);
}

static void test_v1(void **state) {
    (void)state;
    fresh_dir("v1");
    in_child(body_v1);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_int_equal(p->ncomm, 10);

    const tp_comm_op *ar = find_op(p, "AllReduce", HASH_A);
    assert_non_null(ar);
    assert_int_equal(ar->op, TPROF_COMM_ALLREDUCE);
    assert_int_equal(ar->bytes, 4096);
    assert_int_equal(ar->count, 1024);
    assert_int_equal(ar->seq, 7);
    assert_int_equal(ar->algo, TPROF_ALGO_RING);
    assert_int_equal(ar->proto, TPROF_PROTO_SIMPLE);
    assert_int_equal(ar->peer, TPROF_COMM_NO_PEER);
    assert_int_equal(ar->rank, 3);
    assert_int_equal(ar->nranks, 0); /* v1 never says */
    assert_int_equal(ar->nchannels, 4);
    assert_int_equal(ar->flags, 0);
    assert_int_equal(ar->source, TPROF_COMM_SRC_NCCL);
    assert_true(ar->end - ar->start >= 5000000ull);

    const tp_comm_op *bc = find_op(p, "Broadcast", HASH_B);
    assert_non_null(bc);
    assert_int_equal(bc->op, TPROF_COMM_BROADCAST);
    assert_int_equal(bc->bytes, 20); /* bfloat16 */
    assert_int_equal(bc->peer, 2);
    assert_int_equal(bc->seq, 8);
    assert_int_equal(bc->algo, TPROF_ALGO_TREE);
    assert_int_equal(bc->proto, TPROF_PROTO_LL);

    const tp_comm_op *ag = find_op(p, "AllGather", HASH_A);
    assert_non_null(ag);
    assert_int_equal(ag->bytes, 200);
    assert_int_equal(ag->algo, TPROF_ALGO_PAT);
    assert_int_equal(ag->proto, TPROF_PROTO_LL128);

    const tp_comm_op *rs = find_op(p, "ReduceScatter", HASH_A);
    assert_non_null(rs);
    assert_int_equal(rs->op, TPROF_COMM_REDUCESCATTER);
    assert_int_equal(rs->bytes, 64);
    assert_int_equal(rs->algo, TPROF_ALGO_NVLS);

    const tp_comm_op *rd = find_op(p, "Reduce", HASH_A);
    assert_non_null(rd);
    assert_int_equal(rd->bytes, 40);
    assert_int_equal(rd->peer, 0);
    assert_int_equal(rd->algo, TPROF_ALGO_COLLNET_CHAIN);

    const tp_comm_op *sr = find_op(p, "SendRecv", HASH_A); /* no op of ours: its own name */
    assert_non_null(sr);
    assert_int_equal(sr->op, TPROF_COMM_UNKNOWN);
    assert_int_equal(sr->bytes, 12);
    assert_int_equal(sr->algo, TPROF_ALGO_NVLS_TREE);

    const tp_comm_op *un = by_seq(p, 13);
    assert_non_null(un);
    assert_string_equal(un->name, "Unknown");
    assert_int_equal(un->op, TPROF_COMM_UNKNOWN);
    assert_int_equal(un->bytes, 0);
    assert_int_equal(un->count, 8);
    assert_int_equal(un->algo, TPROF_ALGO_UNKNOWN);
    assert_int_equal(un->proto, TPROF_PROTO_UNKNOWN);

    const tp_comm_op *snd = find_op(p, "Send", HASH_B);
    const tp_comm_op *rcv = find_op(p, "Recv", HASH_B);
    assert_non_null(snd);
    assert_non_null(rcv);
    assert_int_equal(snd->op, TPROF_COMM_SEND);
    assert_int_equal(snd->bytes, 800);
    assert_int_equal(snd->peer, 5);
    assert_int_equal(snd->rank, 3);
    assert_int_equal(rcv->op, TPROF_COMM_RECV);
    assert_int_equal(rcv->bytes, 100);
    assert_int_equal(rcv->peer, 6);
    assert_int_equal(rcv->rank, 0);
    const tp_comm_op *f8 = find_op(p, "Send", HASH_C);
    assert_non_null(f8);
    assert_int_equal(f8->bytes, 9);

    const char *cap = tp_meta(p, "capability.nccl");
    assert_non_null(cap);
    assert_non_null(strstr(cap, "v1"));
    assert_non_null(strstr(cap, "host enqueue times only"));
    tp_run_free(&run);
}

/* ------------------------------------------------------------------ v2: strings */

static void body_v2(void) {
    start_session();
    const tp_nccl_profiler_v2 *pl = ncclProfiler_v2_struct();
    void *c = NULL;
    int mask = -1;
    CHECK(pl->init(&c, &mask) == TP_NCCL_SUCCESS && c, 10);
    CHECK(mask == OLD_MASK, 11);
    tp_nccl_descr_v2 g;
    memset(&g, 0, sizeof g);
    g.type = TP_NCCL_GROUP;
    void *hg = NULL;
    CHECK(pl->startEvent(c, &hg, &g) == TP_NCCL_SUCCESS && hg, 12);

    tp_nccl_descr_v2 d;
    memset(&d, 0, sizeof d);
    d.type = TP_NCCL_COLL;
    d.parentObj = hg;
    d.rank = 1;
    d.u.coll.name = "dp";
    d.u.coll.commHash = HASH_A;
    d.u.coll.seqNumber = 3;
    d.u.coll.func = "AllReduce";
    d.u.coll.count = 256;
    d.u.coll.root = -1;
    d.u.coll.datatype = "ncclFloat32";
    d.u.coll.trafficBytes = 999;
    d.u.coll.nMaxChannels = 8;
    d.u.coll.nWarps = 16;
    d.u.coll.algo = "NVLS_TREE";
    d.u.coll.proto = "LL128";
    void *h1 = NULL;
    CHECK(pl->startEvent(c, &h1, &d) == TP_NCCL_SUCCESS && h1, 13);
    d.u.coll.func = "Reduce";
    d.u.coll.seqNumber = 4;
    d.u.coll.root = 1;
    d.u.coll.datatype = "ncclInt64";
    d.u.coll.count = 3;
    d.u.coll.algo = "COLLNET_DIRECT";
    d.u.coll.proto = "SIMPLE";
    void *h2 = NULL;
    CHECK(pl->startEvent(c, &h2, &d) == TP_NCCL_SUCCESS && h2, 14);

    tp_nccl_descr_v2 r;
    memset(&r, 0, sizeof r);
    r.type = TP_NCCL_P2P;
    r.parentObj = hg;
    r.rank = 1;
    r.u.p2p.name = "pp";
    r.u.p2p.commHash = HASH_B;
    r.u.p2p.func = "Recv";
    r.u.p2p.count = 1000;
    r.u.p2p.datatype = "ncclBfloat16";
    r.u.p2p.peer = 0;
    void *h3 = NULL;
    CHECK(pl->startEvent(c, &h3, &r) == TP_NCCL_SUCCESS && h3, 15);
    pl->stopEvent(h3);
    pl->stopEvent(h2);
    pl->stopEvent(h1);
    pl->stopEvent(hg);
    CHECK(pl->recordEventState(h1, 22, NULL) == TP_NCCL_SUCCESS, 16);
    CHECK(pl->init(NULL, NULL) == TP_NCCL_SUCCESS, 17);
    void *h = (void *)1;
    CHECK(pl->startEvent(c, &h, NULL) == TP_NCCL_SUCCESS && h == NULL, 18);
    CHECK(pl->startEvent(c, NULL, &d) == TP_NCCL_SUCCESS, 19);
    CHECK(pl->stopEvent(NULL) == TP_NCCL_SUCCESS && pl->finalize(NULL) == TP_NCCL_SUCCESS, 20);
    pl->finalize(c);
}

static void test_v2(void **state) {
    (void)state;
    fresh_dir("v2");
    in_child(body_v2);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_int_equal(p->ncomm, 3);
    const tp_comm_op *ar = find_op(p, "AllReduce", HASH_A);
    assert_non_null(ar);
    assert_int_equal(ar->op, TPROF_COMM_ALLREDUCE);
    assert_int_equal(ar->bytes, 1024);
    assert_int_equal(ar->seq, 3);
    assert_int_equal(ar->algo, TPROF_ALGO_NVLS_TREE);
    assert_int_equal(ar->proto, TPROF_PROTO_LL128);
    assert_int_equal(ar->nchannels, 8);
    assert_int_equal(ar->peer, TPROF_COMM_NO_PEER);
    assert_int_equal(ar->rank, 1);
    const tp_comm_op *rd = find_op(p, "Reduce", HASH_A);
    assert_non_null(rd);
    assert_int_equal(rd->bytes, 24);
    assert_int_equal(rd->peer, 1);
    assert_int_equal(rd->seq, 4);
    assert_int_equal(rd->algo, TPROF_ALGO_COLLNET_DIRECT);
    assert_int_equal(rd->proto, TPROF_PROTO_SIMPLE);
    const tp_comm_op *rcv = find_op(p, "Recv", HASH_B);
    assert_non_null(rcv);
    assert_int_equal(rcv->op, TPROF_COMM_RECV);
    assert_int_equal(rcv->bytes, 2000);
    assert_int_equal(rcv->peer, 0);
    assert_int_equal(rcv->flags, 0);
    tp_run_free(&run);
}

/* ------------------------------------------------------------------ v3: no GPU times */

static void body_v3(void) {
    start_session();
    const tp_nccl_profiler_v3 *pl = ncclProfiler_v3_struct();
    void *c = NULL;
    int mask = -1;
    CHECK(pl->init(&c, &mask) == TP_NCCL_SUCCESS && c, 10);
    CHECK(mask == OLD_MASK, 11); /* v3's KernelCh has no timer: not asked for */
    tp_nccl_descr_v3 g;
    memset(&g, 0, sizeof g);
    g.type = TP_NCCL_GROUP;
    void *hg = NULL;
    CHECK(pl->startEvent(c, &hg, &g) == TP_NCCL_SUCCESS && hg, 12);

    tp_nccl_descr_v3 d;
    memset(&d, 0, sizeof d);
    d.type = TP_NCCL_COLL;
    d.parentObj = hg;
    d.rank = 2;
    d.u.coll.commHash = HASH_C;
    d.u.coll.seqNumber = 21;
    d.u.coll.func = "AllGather";
    d.u.coll.count = 512;
    d.u.coll.root = -1;
    d.u.coll.datatype = "ncclFloat16";
    d.u.coll.nMaxChannels = 2;
    d.u.coll.algo = "RING";
    d.u.coll.proto = "LL";
    void *h1 = NULL;
    CHECK(pl->startEvent(c, &h1, &d) == TP_NCCL_SUCCESS && h1, 13);

    tp_nccl_descr_v3 s;
    memset(&s, 0, sizeof s);
    s.type = TP_NCCL_P2P;
    s.parentObj = hg;
    s.rank = 2;
    s.u.p2p.commHash = HASH_C;
    s.u.p2p.func = "Send";
    s.u.p2p.count = 7;
    s.u.p2p.datatype = "ncclUint32";
    s.u.p2p.peer = 3;
    void *h2 = NULL;
    CHECK(pl->startEvent(c, &h2, &s) == TP_NCCL_SUCCESS && h2, 14);

    /* a KernelCh all the same (NCCL would not send one): refused, it has no time */
    tp_nccl_descr_v3 k;
    memset(&k, 0, sizeof k);
    k.type = TP_NCCL_KERNEL_CH;
    k.parentObj = h1;
    k.u.kernelCh.channelId = 1;
    void *hk = (void *)1;
    CHECK(pl->startEvent(c, &hk, &k) == TP_NCCL_SUCCESS && hk == NULL, 15);
    pl->stopEvent(h1);
    pl->stopEvent(h2);
    pl->stopEvent(hg);
    pl->finalize(c);
}

static void test_v3(void **state) {
    (void)state;
    fresh_dir("v3");
    in_child(body_v3);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_int_equal(p->ncomm, 2);
    const tp_comm_op *ag = find_op(p, "AllGather", HASH_C);
    assert_non_null(ag);
    assert_int_equal(ag->op, TPROF_COMM_ALLGATHER);
    assert_int_equal(ag->bytes, 1024);
    assert_int_equal(ag->seq, 21);
    assert_int_equal(ag->algo, TPROF_ALGO_RING);
    assert_int_equal(ag->proto, TPROF_PROTO_LL);
    assert_int_equal(ag->nchannels, 2);
    assert_int_equal(ag->rank, 2);
    assert_int_equal(ag->flags, 0); /* finished, and no GPU time */
    const tp_comm_op *snd = find_op(p, "Send", HASH_C);
    assert_non_null(snd);
    assert_int_equal(snd->bytes, 28);
    assert_int_equal(snd->peer, 3);
    assert_int_equal(snd->flags, 0);
    assert_null(tp_meta(p, "nccl.gpu_timer_offset_ns"));
    tp_run_free(&run);
}

/* ------------------------------------------------------------------ v6: v5 + copy engines */

#define GPU_BASE 1700000000000000000ull /* globaltimer-like: near the Unix epoch, in ns */
#define GPU_SEC 1000000000ull

static tp_nccl_descr_v6 coll_v6(const char *func, size_t count, const char *dtype,
                                uint64_t seq, uint8_t nch) {
    tp_nccl_descr_v6 d;
    memset(&d, 0, sizeof d);
    d.type = TP_NCCL_COLL;
    d.rank = -1; /* the communicator's */
    d.u.v5.coll.seqNumber = seq;
    d.u.v5.coll.func = func;
    d.u.v5.coll.count = count;
    d.u.v5.coll.root = -1;
    d.u.v5.coll.datatype = dtype;
    d.u.v5.coll.nChannels = nch;
    d.u.v5.coll.nWarps = 16;
    d.u.v5.coll.algo = "RING";
    d.u.v5.coll.proto = "SIMPLE";
    return d;
}

static tp_nccl_descr_v6 p2p_v6(const char *func, size_t count, const char *dtype, int peer,
                               uint8_t nch) {
    tp_nccl_descr_v6 d;
    memset(&d, 0, sizeof d);
    d.type = TP_NCCL_P2P;
    d.rank = -1;
    d.u.v5.p2p.func = func;
    d.u.v5.p2p.count = count;
    d.u.v5.p2p.datatype = dtype;
    d.u.v5.p2p.peer = peer;
    d.u.v5.p2p.nChannels = nch;
    return d;
}

static tp_nccl_descr_v6 ce_v6(const char *func, size_t count, const char *dtype, int root,
                              uint32_t seq) {
    tp_nccl_descr_v6 d;
    memset(&d, 0, sizeof d);
    d.type = TP_NCCL_CE_COLL;
    d.rank = -1;
    d.u.ceColl.seqNumber = seq;
    d.u.ceColl.func = func;
    d.u.ceColl.count = count;
    d.u.ceColl.root = root;
    d.u.ceColl.datatype = dtype;
    d.u.ceColl.syncStrategy = "MC";
    d.u.ceColl.ceSeqNum = seq;
    d.u.ceColl.stream = (void *)0x1234;
    return d;
}

/* Plays NCCL's proxy thread for one channel of an operation. */
static void kch_v6(const tp_nccl_profiler_v6 *pl, void *parent, int ch, uint64_t t0,
                   uint64_t t1, int code) {
    tp_nccl_descr_v6 k;
    memset(&k, 0, sizeof k);
    k.type = TP_NCCL_KERNEL_CH;
    k.parentObj = parent;
    k.u.v5.kernelCh.channelId = (uint8_t)ch;
    k.u.v5.kernelCh.pTimer = t0;
    void *kh = NULL;
    CHECK(pl->startEvent(NULL, &kh, &k) == TP_NCCL_SUCCESS && kh, code);
    tp_nccl_state_args a = {.kernelCh = {t1}};
    CHECK(pl->recordEventState(kh, TP_NCCL_STATE_KERNEL_CH_STOP, &a) == TP_NCCL_SUCCESS, code);
    CHECK(pl->stopEvent(kh) == TP_NCCL_SUCCESS, code);
}

static void body_v6(void) {
    start_session();
    const tp_nccl_profiler_v6 *pl = ncclProfiler_v6_struct();
    void *c = NULL;
    int mask = -1;
    CHECK(pl->init(&c, HASH_C, &mask, "tp", 2, 8, 5, NULL) == TP_NCCL_SUCCESS && c, 10);
    CHECK(mask == (TP_NCCL_COLL | TP_NCCL_P2P | TP_NCCL_KERNEL_CH | TP_NCCL_CE_COLL), 11);

    /* op 1: two channels, GPU starts 300 and 100 ns, stops 5000 and 9000 ns after GPU_BASE;
     * the host stop first, the channels after it */
    tp_nccl_descr_v6 d = coll_v6("AllReduce", 1024, "ncclFloat32", 1, 2);
    d.u.v5.coll.parentGroup = (void *)0x99;
    void *h1 = NULL;
    CHECK(pl->startEvent(c, &h1, &d) == TP_NCCL_SUCCESS && h1, 12);
    pl->stopEvent(h1);
    kch_v6(pl, h1, 0, GPU_BASE + 300, GPU_BASE + 5000, 13);
    kch_v6(pl, h1, 1, GPU_BASE + 100, GPU_BASE + 9000, 14);

    /* op 2: one channel, 1 s of GPU time after op 1 (far more than the host gap, so the
     * calibration stays on op 1); the channel reports before the host stop */
    d = coll_v6("Broadcast", 16, "ncclInt32", 2, 1);
    d.u.v5.coll.root = 4;
    void *h2 = NULL;
    CHECK(pl->startEvent(c, &h2, &d) == TP_NCCL_SUCCESS && h2, 15);
    kch_v6(pl, h2, 0, GPU_BASE + GPU_SEC + 100, GPU_BASE + GPU_SEC + 2100, 16);
    sleep_ms(1);
    pl->stopEvent(h2);

    /* a receive over one channel, 2 s after op 1 */
    tp_nccl_descr_v6 r = p2p_v6("Recv", 50, "ncclFloat64", 7, 1);
    r.rank = 6;
    void *h3 = NULL;
    CHECK(pl->startEvent(c, &h3, &r) == TP_NCCL_SUCCESS && h3, 17);
    pl->stopEvent(h3);
    kch_v6(pl, h3, 3, GPU_BASE + 2 * GPU_SEC + 100, GPU_BASE + 2 * GPU_SEC + 700, 18);

    /* a copy-engine all-gather: a collective with no kernel behind it */
    tp_nccl_descr_v6 ce = ce_v6("AllGather", 1000, "ncclFloat32", -1, 11);
    void *h4 = NULL;
    CHECK(pl->startEvent(c, &h4, &ce) == TP_NCCL_SUCCESS && h4, 19);
    /* its CeSync and CeBatch children are not recorded */
    tp_nccl_descr_v6 cs;
    memset(&cs, 0, sizeof cs);
    cs.type = TP_NCCL_CE_SYNC;
    cs.parentObj = h4;
    cs.u.ceCollSync.nRanks = 8;
    void *hs = (void *)1;
    CHECK(pl->startEvent(c, &hs, &cs) == TP_NCCL_SUCCESS && hs == NULL, 20);
    cs.type = TP_NCCL_CE_BATCH;
    cs.u.ceCollBatch.numOps = 3;
    cs.u.ceCollBatch.totalBytes = 4000;
    hs = (void *)1;
    CHECK(pl->startEvent(c, &hs, &cs) == TP_NCCL_SUCCESS && hs == NULL, 21);
    sleep_ms(2);
    CHECK(pl->stopEvent(h4) == TP_NCCL_SUCCESS, 22);
    /* another CE collective: NCCL spells it AlltoAll */
    ce = ce_v6("AlltoAll", 10, "ncclUint8", -1, 12);
    void *h5 = NULL;
    CHECK(pl->startEvent(c, &h5, &ce) == TP_NCCL_SUCCESS && h5, 23);
    pl->stopEvent(h5);

    /* API events are not asked for: NULL */
    tp_nccl_descr_v6 api;
    memset(&api, 0, sizeof api);
    api.type = TP_NCCL_COLL_API;
    void *ha = (void *)1;
    CHECK(pl->startEvent(c, &ha, &api) == TP_NCCL_SUCCESS && ha == NULL, 24);

    /* NULL wherever NCCL could pass one */
    CHECK(pl->init(NULL, 1, &mask, NULL, 1, 2, 0, NULL) == TP_NCCL_SUCCESS, 25);
    void *c2 = NULL;
    CHECK(pl->init(&c2, 1, NULL, NULL, 0, 0, -1, NULL) == TP_NCCL_SUCCESS && c2, 26);
    pl->finalize(c2);
    void *h = (void *)1;
    CHECK(pl->startEvent(c, &h, NULL) == TP_NCCL_SUCCESS && h == NULL, 27);
    CHECK(pl->startEvent(c, NULL, &ce) == TP_NCCL_SUCCESS, 28);
    h = (void *)1;
    CHECK(pl->startEvent(NULL, &h, &ce) == TP_NCCL_SUCCESS && h == NULL, 29);
    CHECK(pl->stopEvent(NULL) == TP_NCCL_SUCCESS, 30);
    CHECK(pl->recordEventState(NULL, TP_NCCL_STATE_KERNEL_CH_STOP, NULL) == TP_NCCL_SUCCESS,
          31);
    CHECK(pl->finalize(NULL) == TP_NCCL_SUCCESS, 32);
    pl->finalize(c);
}

static void test_v6(void **state) {
    (void)state;
    fresh_dir("v6");
    in_child(body_v6);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_int_equal(p->ncomm, 5);

    const tp_comm_op *a = find_op(p, "AllReduce", HASH_C);
    const tp_comm_op *b = find_op(p, "Broadcast", HASH_C);
    const tp_comm_op *r = find_op(p, "Recv", HASH_C);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(r);
    assert_int_equal(a->bytes, 4096);
    assert_int_equal(a->seq, 1);
    assert_int_equal(a->nranks, 8);
    assert_int_equal(a->rank, 5);
    assert_int_equal(a->algo, TPROF_ALGO_RING);
    assert_int_equal(a->proto, TPROF_PROTO_SIMPLE);
    assert_int_equal(a->nchannels, 2);
    assert_int_equal(a->flags, TPROF_COMM_F_GPU_TIME);
    /* calibrated on op 1's earliest channel: its GPU interval starts at its host start */
    assert_int_equal(a->gpu_start, a->start);
    assert_int_equal(a->gpu_end - a->gpu_start, 8900);

    assert_int_equal(b->bytes, 64);
    assert_int_equal(b->peer, 4);
    assert_int_equal(b->flags, TPROF_COMM_F_GPU_TIME);
    assert_int_equal(b->gpu_start - a->gpu_start, GPU_SEC);
    assert_int_equal(b->gpu_end - b->gpu_start, 2000);
    assert_true(b->end - b->start >= 1000000);

    assert_int_equal(r->op, TPROF_COMM_RECV);
    assert_int_equal(r->bytes, 400);
    assert_int_equal(r->peer, 7);
    assert_int_equal(r->rank, 6);
    assert_int_equal(r->flags, TPROF_COMM_F_GPU_TIME);
    assert_int_equal(r->gpu_start - a->gpu_start, 2 * GPU_SEC);
    assert_int_equal(r->gpu_end - r->gpu_start, 600);

    const tp_comm_op *ce = find_op(p, "AllGather", HASH_C);
    assert_non_null(ce);
    assert_int_equal(ce->op, TPROF_COMM_ALLGATHER);
    assert_int_equal(ce->bytes, 4000);
    assert_int_equal(ce->count, 1000);
    assert_int_equal(ce->seq, 11);
    assert_int_equal(ce->peer, TPROF_COMM_NO_PEER);
    assert_int_equal(ce->algo, TPROF_ALGO_UNKNOWN);
    assert_int_equal(ce->proto, TPROF_PROTO_UNKNOWN);
    assert_int_equal(ce->nchannels, 0);
    assert_int_equal(ce->flags, 0); /* host interval only */
    assert_int_equal(ce->nranks, 8);
    assert_int_equal(ce->rank, 5);
    assert_true(ce->end - ce->start >= 2000000);
    const tp_comm_op *a2a = find_op(p, "AllToAll", HASH_C);
    assert_non_null(a2a);
    assert_int_equal(a2a->op, TPROF_COMM_ALLTOALL);
    assert_int_equal(a2a->bytes, 10);

    const char *cap = tp_meta(p, "capability.nccl");
    assert_non_null(cap);
    assert_non_null(strstr(cap, "v6"));
    assert_non_null(strstr(cap, "kernel-channel"));
    assert_non_null(tp_meta(p, "nccl.gpu_timer_offset_ns")); /* finalize ran */
    tp_run_free(&run);
}

/* ------------------------------------------------------------------ concurrency */

#define NTHREADS 4
#define PER_THREAD 2000
#define BATCH 8

static void *g_ctx;

/* v1: each thread is a communicator's application thread (its own hash), in groups */
static void *hammer_v1(void *arg) {
    const tp_nccl_profiler_v1 *pl = ncclProfiler_v1_struct();
    uint64_t hash = HASH_A + (uint64_t)(uintptr_t)arg;
    for (int i = 0; i < PER_THREAD / BATCH; i++) {
        tp_nccl_descr_v1 g;
        memset(&g, 0, sizeof g);
        g.type = TP_NCCL_GROUP;
        void *hg = NULL;
        pl->startEvent(g_ctx, &hg, &g);
        CHECK(hg != NULL, 40);
        void *h[BATCH];
        for (int k = 0; k < BATCH; k++) {
            tp_nccl_descr_v1 d = (k & 1) ? p2p_v1(F_SEND, 16, D_INT8, hash, 1)
                                         : coll_v1(F_ALLREDUCE, 16, D_F32, hash, (uint64_t)i,
                                                   A_RING, P_LL);
            d.parentObj = hg;
            h[k] = NULL;
            pl->startEvent(g_ctx, &h[k], &d);
            CHECK(h[k] != NULL, 41);
        }
        for (int k = BATCH - 1; k >= 0; k--) pl->stopEvent(h[k]);
        pl->stopEvent(hg);
    }
    return NULL;
}

static void body_threads_v1(void) {
    start_session();
    const tp_nccl_profiler_v1 *pl = ncclProfiler_v1_struct();
    int mask = 0;
    CHECK(pl->init(&g_ctx, &mask) == TP_NCCL_SUCCESS && g_ctx && mask == OLD_MASK, 42);
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        CHECK(pthread_create(&th[i], NULL, hammer_v1, (void *)(uintptr_t)i) == 0, 43);
    for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    pl->finalize(g_ctx);
}

static void test_threads_v1(void **state) {
    (void)state;
    fresh_dir("threads1");
    in_child(body_threads_v1);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_null(tp_meta(p, "nccl.pool_drops"));
    assert_int_equal(p->dropped, 0);
    assert_int_equal(p->ncomm, (size_t)NTHREADS * PER_THREAD);
    size_t per_hash[NTHREADS] = {0};
    for (size_t i = 0; i < p->ncomm; i++) {
        const tp_comm_op *o = &p->comm[i];
        assert_true(o->comm_hash >= HASH_A && o->comm_hash < HASH_A + NTHREADS);
        per_hash[o->comm_hash - HASH_A]++;
        assert_int_equal(o->flags, 0);
        assert_int_equal(o->rank, 3);
        if (o->op == TPROF_COMM_SEND) {
            assert_int_equal(o->bytes, 16);
            assert_int_equal(o->peer, 1);
        } else {
            assert_int_equal(o->op, TPROF_COMM_ALLREDUCE);
            assert_int_equal(o->bytes, 64);
            assert_int_equal(o->proto, TPROF_PROTO_LL);
        }
    }
    for (int i = 0; i < NTHREADS; i++) assert_int_equal(per_hash[i], PER_THREAD);
    assert_int_equal(count_ops(p, "Send"), (size_t)NTHREADS * PER_THREAD / 2);
    tp_run_free(&run);
}

/* v6: application threads enqueue, stop, then play the proxy's channel reports (GPU times
 * 1000 + ch .. 2000 + ch); of each 8 operations, 4 are all-reduces (3 channels), 2 sends
 * (2 channels) and 2 copy-engine all-gathers */
static void *hammer_v6(void *arg) {
    const tp_nccl_profiler_v6 *pl = arg;
    for (int i = 0; i < PER_THREAD / BATCH; i++) {
        void *h[BATCH];
        int nch[BATCH];
        for (int k = 0; k < BATCH; k++) {
            tp_nccl_descr_v6 d;
            if (k % 4 == 3) {
                d = ce_v6("AllGather", 16, "ncclFloat32", -1, (uint32_t)i);
                nch[k] = 0;
            } else if (k & 1) {
                d = p2p_v6("Send", 16, "ncclInt8", 1, 2);
                nch[k] = 2;
            } else {
                d = coll_v6("AllReduce", 16, "ncclFloat32", (uint64_t)i, 3);
                nch[k] = 3;
            }
            h[k] = NULL;
            pl->startEvent(g_ctx, &h[k], &d);
            CHECK(h[k] != NULL, 50);
        }
        for (int k = BATCH - 1; k >= 0; k--) pl->stopEvent(h[k]);
        for (int k = 0; k < BATCH; k++)
            for (int ch = 0; ch < nch[k]; ch++)
                kch_v6(pl, h[k], ch, 1000 + (uint64_t)ch, 2000 + (uint64_t)ch, 51);
    }
    return NULL;
}

static void body_threads_v6(void) {
    start_session();
    const tp_nccl_profiler_v6 *pl = ncclProfiler_v6_struct();
    int mask = 0;
    CHECK(pl->init(&g_ctx, HASH_B, &mask, NULL, 1, 2, 1, NULL) == TP_NCCL_SUCCESS && g_ctx, 52);
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        CHECK(pthread_create(&th[i], NULL, hammer_v6, (void *)pl) == 0, 53);
    for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    pl->finalize(g_ctx);
}

static void test_threads_v6(void **state) {
    (void)state;
    fresh_dir("threads6");
    in_child(body_threads_v6);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_null(tp_meta(p, "nccl.pool_drops"));
    assert_int_equal(p->dropped, 0);
    assert_int_equal(p->ncomm, (size_t)NTHREADS * PER_THREAD);
    assert_int_equal(count_ops(p, "AllGather"), (size_t)NTHREADS * PER_THREAD / 4);
    assert_int_equal(count_ops(p, "Send"), (size_t)NTHREADS * PER_THREAD / 4);
    assert_int_equal(count_ops(p, "AllReduce"), (size_t)NTHREADS * PER_THREAD / 2);
    for (size_t i = 0; i < p->ncomm; i++) {
        const tp_comm_op *o = &p->comm[i];
        assert_int_equal(o->comm_hash, HASH_B);
        assert_int_equal(o->rank, 1);
        if (o->op == TPROF_COMM_ALLGATHER) {
            assert_int_equal(o->flags, 0);
        } else {
            assert_int_equal(o->flags, TPROF_COMM_F_GPU_TIME);
            assert_int_equal(o->gpu_end - o->gpu_start, o->op == TPROF_COMM_SEND ? 1001 : 1002);
        }
    }
    tp_run_free(&run);
}

/* ------------------------------------------------------------------ names, not recording */

/* Without a session every version asks NCCL for nothing and hands out no handles. */
static void test_names_and_not_recording(void **state) {
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        unsetenv("TRAINPROF_DIR");
        setenv("TRAINPROF_ENABLE", "0", 1);
        const tp_nccl_profiler_v1 *p1 = ncclProfiler_v1_struct();
        const tp_nccl_profiler_v2 *p2 = ncclProfiler_v2_struct();
        const tp_nccl_profiler_v3 *p3 = ncclProfiler_v3_struct();
        const tp_nccl_profiler_v6 *p6 = ncclProfiler_v6_struct();
        CHECK(!strcmp(p1->name, "trainprof") && !strcmp(p2->name, "trainprof") &&
                  !strcmp(p3->name, "trainprof") && !strcmp(p6->name, "trainprof"),
              2);
        void *c[4] = {NULL, NULL, NULL, NULL};
        int mask[4] = {-1, -1, -1, -1};
        CHECK(p1->init(&c[0], &mask[0]) == TP_NCCL_SUCCESS, 3);
        CHECK(p2->init(&c[1], &mask[1]) == TP_NCCL_SUCCESS, 4);
        CHECK(p3->init(&c[2], &mask[2]) == TP_NCCL_SUCCESS, 5);
        CHECK(p6->init(&c[3], 9, &mask[3], "x", 1, 2, 0, NULL) == TP_NCCL_SUCCESS, 6);
        for (int i = 0; i < 4; i++) CHECK(mask[i] == 0, 7 + i);
        tp_nccl_descr_v1 d1 = coll_v1(F_ALLREDUCE, 8, D_F32, HASH_A, 1, A_RING, P_LL);
        void *h = (void *)1;
        p1->startEvent(c[0], &h, &d1);
        CHECK(h == NULL, 12);
        tp_nccl_descr_v6 d6 = coll_v6("AllReduce", 8, "ncclFloat32", 1, 1);
        h = (void *)1;
        p6->startEvent(c[3], &h, &d6);
        CHECK(h == NULL, 13);
        d6 = ce_v6("AllGather", 8, "ncclFloat32", -1, 1);
        h = (void *)1;
        p6->startEvent(c[3], &h, &d6);
        CHECK(h == NULL, 14);
        p1->finalize(c[0]);
        p2->finalize(c[1]);
        p3->finalize(c[2]);
        p6->finalize(c[3]);
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v1),
        cmocka_unit_test(test_v2),
        cmocka_unit_test(test_v3),
        cmocka_unit_test(test_v6),
        cmocka_unit_test(test_threads_v1),
        cmocka_unit_test(test_threads_v6),
        cmocka_unit_test(test_names_and_not_recording),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
