/*
 * test_nccl.c — the NCCL profiler plugin (src/capture/nccl_plugin.c) without NCCL or a GPU.
 *
 * The test plays NCCL: it finds ncclProfiler_v5 (and v4) with dlsym as NCCL does, calls
 * init/startEvent/stopEvent/finalize with synthetic descriptors laid out as NCCL's headers
 * say (src/capture/nccl_abi.h), and reads the records back through the model. One session
 * per process is the library's rule, so each recording runs in a forked child (as in
 * test_api.c) and the parent asserts on the loaded directory.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "analysis/model.h"
#include "analysis/report.h"
#include "report_text.h"
#include "nccl_test.h"
#include "capture/nccl_abi.h"
#include "trainprof.h"

#define CHILD_PREFIX "nccl"
#include "child.h"

/* Found the way NCCL finds it: by name, in the library the process has loaded. */
static const tp_nccl_profiler_v5 *v5(void) {
    const tp_nccl_profiler_v5 *p = dlsym(RTLD_DEFAULT, "ncclProfiler_v5");
    CHECK(p && p->init && p->startEvent && p->stopEvent && p->recordEventState && p->finalize,
          80);
    return p;
}

static const tp_nccl_profiler_v4 *v4(void) {
    const tp_nccl_profiler_v4 *p = dlsym(RTLD_DEFAULT, "ncclProfiler_v4");
    CHECK(p && p->init && p->startEvent && p->finalize, 81);
    return p;
}

static tp_nccl_descr_v5 coll(const char *func, size_t count, const char *dtype, uint64_t seq) {
    tp_nccl_descr_v5 d;
    memset(&d, 0, sizeof d);
    d.type = TP_NCCL_COLL;
    d.rank = -1; /* let the communicator's rank stand */
    d.u.coll.seqNumber = seq;
    d.u.coll.func = func;
    d.u.coll.count = count;
    d.u.coll.root = -1;
    d.u.coll.datatype = dtype;
    d.u.coll.nChannels = 24;
    d.u.coll.nWarps = 16;
    d.u.coll.algo = "RING";
    d.u.coll.proto = "SIMPLE";
    return d;
}

static tp_nccl_descr_v5 p2p(const char *func, size_t count, const char *dtype, int peer) {
    tp_nccl_descr_v5 d;
    memset(&d, 0, sizeof d);
    d.type = TP_NCCL_P2P;
    d.rank = -1;
    d.u.p2p.func = func;
    d.u.p2p.count = count;
    d.u.p2p.datatype = dtype;
    d.u.p2p.peer = peer;
    d.u.p2p.nChannels = 2;
    return d;
}

/* ------------------------------------------------------------------ ops of two communicators */

#define HASH_A 0x1111222233334444ull
#define HASH_B 0x5555666677778888ull
#define HASH_C 0x9999aaaabbbbccccull

static void body_ops(void) {
    start_session();
    const tp_nccl_profiler_v5 *pl = v5();
    void *a = NULL, *b = NULL;
    int mask_a = 0, mask_b = 0;
    CHECK(pl->init(&a, HASH_A, &mask_a, "dp", 1, 2, 0, NULL) == TP_NCCL_SUCCESS, 10);
    /* torch 2.11 passes no name */
    CHECK(pl->init(&b, HASH_B, &mask_b, NULL, 1, 4, 3, NULL) == TP_NCCL_SUCCESS, 11);
    CHECK(a && b, 12);
    CHECK(mask_a == (TP_NCCL_COLL | TP_NCCL_P2P | TP_NCCL_KERNEL_CH) && mask_b == mask_a, 13);

    tp_nccl_descr_v5 d = coll("AllReduce", 1048576, "ncclFloat32", 7);
    void *h = NULL;
    CHECK(pl->startEvent(a, &h, &d) == TP_NCCL_SUCCESS && h, 14);
    sleep_ms(20);
    CHECK(pl->stopEvent(h) == TP_NCCL_SUCCESS, 15);

    tp_nccl_descr_v5 s = p2p("Send", 1000, "ncclBfloat16", 1);
    tp_nccl_descr_v5 r = p2p("Recv", 1000, "ncclBfloat16", 2);
    void *hs = NULL, *hr = NULL;
    CHECK(pl->startEvent(b, &hs, &s) == TP_NCCL_SUCCESS && hs, 16);
    CHECK(pl->startEvent(b, &hr, &r) == TP_NCCL_SUCCESS && hr, 17);
    sleep_ms(10);
    pl->stopEvent(hr);
    pl->stopEvent(hs);

    /* a broadcast keeps its root; an op NCCL may add later keeps its own name */
    tp_nccl_descr_v5 bc = coll("Broadcast", 10, "ncclInt64", 8);
    bc.u.coll.root = 1;
    pl->startEvent(a, &h, &bc);
    pl->stopEvent(h);
    tp_nccl_descr_v5 fut = coll("AllReduceFancy", 4, "ncclUnknownType", 9);
    pl->startEvent(a, &h, &fut);
    pl->stopEvent(h);

    /* events we do not ask for get a NULL handle, which NCCL ignores */
    tp_nccl_descr_v5 g;
    memset(&g, 0, sizeof g);
    g.type = TP_NCCL_GROUP_API;
    h = (void *)1;
    CHECK(pl->startEvent(a, &h, &g) == TP_NCCL_SUCCESS && h == NULL, 18);

    /* the v4 struct: type is a byte and init names the communicator before its hash */
    const tp_nccl_profiler_v4 *p4 = v4();
    void *c = NULL;
    int mask_c = 0;
    CHECK(p4->init(&c, &mask_c, "tp", HASH_C, 1, 8, 5, NULL) == TP_NCCL_SUCCESS && c, 19);
    tp_nccl_descr_v4 d4;
    memset(&d4, 0, sizeof d4);
    d4.type = TP_NCCL_COLL;
    d4.rank = 5;
    d4.u.coll.func = "AllGather";
    d4.u.coll.count = 256;
    d4.u.coll.datatype = "ncclFloat16";
    d4.u.coll.algo = "NVLS";
    d4.u.coll.proto = "LL128";
    CHECK(p4->startEvent(c, &h, &d4) == TP_NCCL_SUCCESS && h, 20);
    p4->stopEvent(h);

    pl->finalize(a);
    pl->finalize(b);
    p4->finalize(c);
}

static void test_ops(void **state) {
    (void)state;
    fresh_dir("ops");
    in_child(body_ops);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_int_equal(p->ncomm, 6);

    const tp_comm_op *ar = find_op(p, "AllReduce", HASH_A);
    assert_non_null(ar);
    assert_int_equal(ar->op, TPROF_COMM_ALLREDUCE);
    assert_int_equal(ar->bytes, 4194304); /* 1048576 float32 */
    assert_int_equal(ar->count, 1048576);
    assert_int_equal(ar->nranks, 2);
    assert_int_equal(ar->rank, 0);
    assert_int_equal(ar->seq, 7);
    assert_int_equal(ar->algo, TPROF_ALGO_RING);
    assert_int_equal(ar->proto, TPROF_PROTO_SIMPLE);
    assert_int_equal(ar->nchannels, 24);
    assert_int_equal(ar->peer, TPROF_COMM_NO_PEER);
    assert_int_equal(ar->flags, 0);
    assert_int_equal(ar->source, TPROF_COMM_SRC_NCCL);
    assert_int_equal(ar->dtype, TPROF_DTYPE_FLOAT32);
    assert_true(ar->end - ar->start >= 20000000ull);

    const tp_comm_op *snd = find_op(p, "Send", HASH_B);
    const tp_comm_op *rcv = find_op(p, "Recv", HASH_B);
    assert_non_null(snd);
    assert_non_null(rcv);
    assert_int_equal(snd->op, TPROF_COMM_SEND);
    assert_int_equal(rcv->op, TPROF_COMM_RECV);
    assert_int_equal(snd->bytes, 2000);
    assert_int_equal(rcv->bytes, 2000);
    assert_int_equal(snd->dtype, TPROF_DTYPE_BFLOAT16);
    assert_int_equal(rcv->dtype, TPROF_DTYPE_BFLOAT16);
    assert_int_equal(snd->peer, 1);
    assert_int_equal(rcv->peer, 2);
    assert_int_equal(snd->nranks, 4);
    assert_int_equal(snd->rank, 3);
    assert_true(snd->end - snd->start >= 10000000ull);
    assert_true(rcv->end - rcv->start >= 10000000ull);

    const tp_comm_op *bc = find_op(p, "Broadcast", HASH_A);
    assert_non_null(bc);
    assert_int_equal(bc->peer, 1);
    assert_int_equal(bc->bytes, 80);
    assert_int_equal(bc->dtype, TPROF_DTYPE_INT64);

    const tp_comm_op *fut = find_op(p, "AllReduceFancy", HASH_A);
    assert_non_null(fut);
    assert_int_equal(fut->op, TPROF_COMM_UNKNOWN);
    assert_int_equal(fut->bytes, 0); /* unknown datatype: no guessed size */
    assert_int_equal(fut->dtype, TPROF_DTYPE_UNKNOWN);
    assert_int_equal(fut->count, 4);

    const tp_comm_op *ag = find_op(p, "AllGather", HASH_C);
    assert_non_null(ag);
    assert_int_equal(ag->bytes, 512);
    assert_int_equal(ag->nranks, 8);
    assert_int_equal(ag->rank, 5);
    assert_int_equal(ag->algo, TPROF_ALGO_NVLS);
    assert_int_equal(ag->proto, TPROF_PROTO_LL128);

    const char *cap = tp_meta(p, "capability.nccl");
    assert_non_null(cap);
    assert_non_null(strstr(cap, "v5"));
    /* what init told of each communicator */
    assert_string_equal(tp_meta(p, "nccl.comm.1111222233334444"),
                        "nranks=2 rank=0 nnodes=1 name=dp");
    assert_string_equal(tp_meta(p, "nccl.comm.5555666677778888"),
                        "nranks=4 rank=3 nnodes=1 name=-");
    assert_string_equal(tp_meta(p, "nccl.comm.9999aaaabbbbcccc"),
                        "nranks=8 rank=5 nnodes=1 name=tp");
    assert_null(tp_meta(p, "nccl.pool_drops"));
    tp_run_free(&run);
}

/* ------------------------------------------------------------------ 8 threads, one communicator */

#define NTHREADS 8
#define PER_THREAD 4000
#define BATCH 8

static void *comm_ctx;

/* Plays NCCL's proxy thread for one channel: the KernelCh start at GPU time t0 against the
 * parent handle, the KernelChStop state at t1, the stop. The context is not used (it may be
 * a PXN peer's). */
static void kch(const tp_nccl_profiler_v5 *pl, void *parent, int ch, uint64_t t0, uint64_t t1) {
    tp_nccl_descr_v5 k;
    memset(&k, 0, sizeof k);
    k.type = TP_NCCL_KERNEL_CH;
    k.parentObj = parent;
    k.u.kernelCh.channelId = (uint8_t)ch;
    k.u.kernelCh.pTimer = t0;
    void *kh = NULL;
    CHECK(pl->startEvent((void *)0x10, &kh, &k) == TP_NCCL_SUCCESS && kh, 100);
    tp_nccl_state_args a = {.kernelCh = {t1}};
    pl->recordEventState(kh, TP_NCCL_STATE_KERNEL_CH_STOP, &a);
    pl->stopEvent(kh);
}

/* ... and for one operation: each channel starts (GPU time 1000 + ch), reports its stop
 * (2000 + ch) and stops. */
static void channels(const tp_nccl_profiler_v5 *pl, void *parent, int n) {
    for (int ch = 0; ch < n; ch++) kch(pl, parent, ch, 1000 + (uint64_t)ch, 2000 + (uint64_t)ch);
}

static void *hammer(void *arg) {
    const tp_nccl_profiler_v5 *pl = arg;
    void *h[BATCH];
    int nch[BATCH];
    for (int i = 0; i < PER_THREAD / BATCH; i++) {
        for (int k = 0; k < BATCH; k++) {
            tp_nccl_descr_v5 d = (k & 1) ? p2p("Send", 16, "ncclInt8", 1)
                                         : coll("AllReduce", 16, "ncclFloat32", (uint64_t)i);
            d.u.coll.nChannels = 3; /* p2p's nChannels stays 2 (another union member) */
            nch[k] = (k & 1) ? 2 : 3;
            h[k] = NULL;
            pl->startEvent(comm_ctx, &h[k], &d);
        }
        /* stop in another order than started: NCCL stops Colls when their group ends; the
         * channels report afterwards, and the last one writes the record */
        for (int k = BATCH - 1; k >= 0; k--) pl->stopEvent(h[k]);
        for (int k = 0; k < BATCH; k++) channels(pl, h[k], nch[k]);
    }
    return NULL;
}

static void body_threads(void) {
    start_session();
    const tp_nccl_profiler_v5 *pl = v5();
    int mask = 0;
    CHECK(pl->init(&comm_ctx, HASH_A, &mask, NULL, 1, 2, 1, NULL) == TP_NCCL_SUCCESS, 30);
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        CHECK(pthread_create(&th[i], NULL, hammer, (void *)pl) == 0, 31);
    for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    pl->finalize(comm_ctx);
}

static void test_threads(void **state) {
    (void)state;
    fresh_dir("threads");
    in_child(body_threads);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    /* 64 events open at most, far below the pool: nothing may be lost */
    const char *drops = tp_meta(p, "nccl.pool_drops");
    assert_null(drops);
    assert_int_equal(p->dropped, 0);
    assert_int_equal(p->ncomm, (size_t)NTHREADS * PER_THREAD);
    assert_int_equal(count_ops(p, "AllReduce"), (size_t)NTHREADS * PER_THREAD / 2);
    assert_int_equal(count_ops(p, "Send"), (size_t)NTHREADS * PER_THREAD / 2);
    for (size_t i = 0; i < p->ncomm; i++) {
        assert_int_equal(p->comm[i].flags, TPROF_COMM_F_GPU_TIME);
        assert_int_equal(p->comm[i].gpu_end - p->comm[i].gpu_start,
                         p->comm[i].op == TPROF_COMM_SEND ? 1001 : 1002);
        assert_int_equal(p->comm[i].rank, 1);
        assert_true(p->comm[i].end >= p->comm[i].start);
    }
    tp_run_free(&run);
}

/* ------------------------------------------------------------------ kernel-channel times */

#define GPU_BASE 1700000000000000000ull /* globaltimer-like: near the Unix epoch, in ns */


static void body_kernel_ch(void) {
    start_session();
    const tp_nccl_profiler_v5 *pl = v5();
    void *c = NULL;
    int mask = 0;
    CHECK(pl->init(&c, HASH_A, &mask, NULL, 1, 2, 0, NULL) == TP_NCCL_SUCCESS && c, 101);
    CHECK(mask & TP_NCCL_KERNEL_CH, 102);
    /* op 1: two channels, GPU starts 300 and 100 ns, stops 5000 and 9000 ns after GPU_BASE;
     * the host stop comes first, the channels after it (as NCCL's proxy reports them) */
    tp_nccl_descr_v5 d = coll("AllReduce", 1024, "ncclFloat32", 1);
    d.u.coll.nChannels = 2;
    void *h1 = NULL;
    CHECK(pl->startEvent(c, &h1, &d) == TP_NCCL_SUCCESS && h1, 103);
    pl->stopEvent(h1);
    kch(pl, h1, 0, GPU_BASE + 300, GPU_BASE + 5000);
    kch(pl, h1, 1, GPU_BASE + 100, GPU_BASE + 9000);
    /* op 2: one channel that starts 1 s (GPU) after op 1's (far more than any host delay
     * between the two starts, so op 1 keeps defining the offset); its channel stops before
     * the host stop arrives */
    d.u.coll.seqNumber = 2;
    d.u.coll.nChannels = 1;
    void *h2 = NULL;
    CHECK(pl->startEvent(c, &h2, &d) == TP_NCCL_SUCCESS && h2, 104);
    kch(pl, h2, 0, GPU_BASE + 1000000100, GPU_BASE + 1000002100);
    sleep_ms(1);
    pl->stopEvent(h2);
    /* op 3: two channels, only one ever reports: written at shutdown with what arrived */
    d.u.coll.seqNumber = 3;
    d.u.coll.nChannels = 2;
    void *h3 = NULL;
    CHECK(pl->startEvent(c, &h3, &d) == TP_NCCL_SUCCESS && h3, 105);
    pl->stopEvent(h3);
    kch(pl, h3, 0, GPU_BASE + 2000000000, GPU_BASE + 2000000400);
    /* a channel whose parent was never ours (dropped, stale, a PXN peer's): NULL handle */
    tp_nccl_descr_v5 k;
    memset(&k, 0, sizeof k);
    k.type = TP_NCCL_KERNEL_CH;
    k.parentObj = (void *)(uintptr_t)0x777000;
    void *kh = (void *)1;
    CHECK(pl->startEvent(c, &kh, &k) == TP_NCCL_SUCCESS && kh == NULL, 106);
    k.parentObj = h1; /* op 1 is written: its handle is stale now */
    kh = (void *)1;
    CHECK(pl->startEvent(c, &kh, &k) == TP_NCCL_SUCCESS && kh == NULL, 107);
}

static const tp_comm_op *by_seq(const tp_process *p, uint32_t seq) {
    for (size_t i = 0; i < p->ncomm; i++)
        if (p->comm[i].seq == seq) return &p->comm[i];
    return NULL;
}

static void test_kernel_ch(void **state) {
    (void)state;
    fresh_dir("kch");
    in_child(body_kernel_ch);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_int_equal(p->ncomm, 3);
    const tp_comm_op *a = by_seq(p, 1), *b = by_seq(p, 2), *c = by_seq(p, 3);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    for (int i = 0; i < 3; i++) {
        const tp_comm_op *o = i == 0 ? a : i == 1 ? b : c;
        assert_int_equal(o->flags, TPROF_COMM_F_GPU_TIME);
    }
    /* the offset is calibrated on op 1's earliest channel (GPU_BASE + 100 at a's host
     * start): so a's GPU interval begins exactly at its host start and lasts 8900 ns */
    assert_int_equal(a->gpu_start, a->start);
    assert_int_equal(a->gpu_end - a->gpu_start, 8900);
    /* op 2 on the same clock: 1 s of GPU time after op 1, 2000 ns long */
    assert_int_equal(b->gpu_start - a->gpu_start, 1000000000);
    assert_int_equal(b->gpu_end - b->gpu_start, 2000);
    /* the host stop stays the enqueue end; op 2's came >= 1 ms after its start */
    assert_true(b->end - b->start >= 1000000);
    /* op 3: its one reporting channel */
    assert_int_equal(c->gpu_start - a->gpu_start, 1999999900);
    assert_int_equal(c->gpu_end - c->gpu_start, 400);
    const char *off = tp_meta(p, "nccl.gpu_timer_offset_ns");
    assert_null(off); /* no finalize ran: written only by finalize */
    const char *cap = tp_meta(p, "capability.nccl");
    assert_non_null(cap);
    assert_non_null(strstr(cap, "kernel-channel"));
    tp_run_free(&run);
}

/* ------------------------------------------------------------------ a full pool */

#define OVERFILL 5000
static int g_finalize = 1; /* body_pool_full destroys its communicator */

static void body_pool_full(void) {
    setenv("TRAINPROF_NCCL_KERNEL", "0", 1); /* events end at their stop */
    start_session();
    const tp_nccl_profiler_v5 *pl = v5();
    void *c = NULL;
    int mask = 0;
    pl->init(&c, HASH_B, &mask, "big", 1, 2, 0, NULL);
    static void *h[OVERFILL];
    int got = 0;
    for (int i = 0; i < OVERFILL; i++) {
        tp_nccl_descr_v5 d = coll("AllReduce", 1, "ncclFloat32", (uint64_t)i);
        pl->startEvent(c, &h[i], &d);
        got += h[i] != NULL;
    }
    CHECK(got > 0 && got < OVERFILL, 40);
    for (int i = 0; i < OVERFILL; i++) pl->stopEvent(h[i]);
    /* the pool is whole again */
    tp_nccl_descr_v5 d = coll("AllReduce", 1, "ncclFloat32", 0);
    void *again = NULL;
    pl->startEvent(c, &again, &d);
    CHECK(again != NULL, 41);
    pl->stopEvent(again);
    if (g_finalize) pl->finalize(c); /* else: as a job that exits without destroying it */
    char v[32];
    snprintf(v, sizeof v, "%d", got);
    tprof_set_metadata("test.got", v);
}

static void test_pool_full(void **state) {
    (void)state;
    fresh_dir("pool");
    in_child(body_pool_full);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    const char *got_s = tp_meta(p, "test.got");
    const char *drops_s = tp_meta(p, "nccl.pool_drops");
    assert_non_null(got_s);
    assert_non_null(drops_s);
    size_t got = strtoul(got_s, NULL, 10);
    assert_int_equal(got + strtoul(drops_s, NULL, 10), OVERFILL); /* every refusal counted */
    assert_int_equal(p->ncomm, got + 1);
    /* the report says so */
    tp_report_opts o;
    tp_report_opts_init(&o);
    cJSON *rep = tp_report_build(&run, &o);
    const cJSON *c = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "ranks"), 0),
                                         "communication");
    assert_true(cJSON_GetObjectItem(c, "nccl_ops_not_recorded")->valuedouble ==
                (double)(OVERFILL - got));
    char *text = report_text(&run, &o);
    char want[96];
    snprintf(want, sizeof want, "at least %zu NCCL ops not recorded", (size_t)(OVERFILL - got));
    if (!strstr(text, want)) fail_msg("text report lacks \"%s\"", want);
    free(text);
    cJSON_Delete(rep);
    tp_run_free(&run);
}

/* The same without the communicator's finalize: the file still says ops were lost, with
 * the largest power of two up to the count (written as drops went on). */
static void test_pool_full_no_finalize(void **state) {
    (void)state;
    fresh_dir("poolnofin");
    g_finalize = 0;
    in_child(body_pool_full);
    g_finalize = 1;
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    size_t drops = OVERFILL - strtoul(tp_meta(p, "test.got"), NULL, 10);
    const char *drops_s = tp_meta(p, "nccl.pool_drops");
    assert_non_null(drops_s);
    size_t pow2 = 1;
    while (pow2 * 2 <= drops) pow2 *= 2;
    assert_int_equal(strtoul(drops_s, NULL, 10), pow2);
    tp_run_free(&run);
}

/* ------------------------------------------------------------------ thousands of communicators */

static void body_many(void) {
    /* the writer's compression buffer grows with the largest chunk a flusher pass writes,
     * which depends on how late the flusher runs on a loaded machine: the heap measured
     * here must be the contexts' alone */
    setenv("TRAINPROF_COMPRESS", "0", 1);
    start_session();
    const tp_nccl_profiler_v5 *pl = v5();
    enum { N = 2000 };
    static void *ctx[N];
    /* warm up what the first calls allocate once (thread ring, interned names) */
    for (int i = 0; i < 10; i++) {
        int mask;
        void *c = NULL;
        pl->init(&c, (uint64_t)i, &mask, NULL, 1, 2, 0, NULL);
        tp_nccl_descr_v5 d = coll("AllReduce", 1, "ncclFloat32", 0);
        void *h = NULL;
        pl->startEvent(c, &h, &d);
        pl->stopEvent(h);
        pl->finalize(c);
    }
    /* and what the flusher allocates once, on its first pass with records (its buffers, the
     * compressor's context): on a loaded machine that pass may otherwise fall between the two
     * measurements below and be counted as the contexts' */
    CHECK(tprof_flush() == TPROF_OK, 53);
    struct mallinfo2 m0 = mallinfo2();
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            int mask = 0;
            ctx[i] = NULL;
            pl->init(&ctx[i], (uint64_t)(round * N + i), &mask, (i & 1) ? NULL : "megatron-tp",
                     1, 2, i & 1, NULL);
            CHECK(ctx[i] != NULL, 50);
            tp_nccl_descr_v5 d = coll("AllReduce", 1, "ncclFloat32", 0);
            void *h = NULL;
            pl->startEvent(ctx[i], &h, &d);
            pl->stopEvent(h);
        }
        struct mallinfo2 m1 = mallinfo2();
        /* all alive at once: a context is small (under 128 bytes of heap each) */
        CHECK(m1.uordblks < m0.uordblks || m1.uordblks - m0.uordblks < (size_t)N * 128, 51);
        for (int i = 0; i < N; i++) pl->finalize(ctx[i]);
    }
    struct mallinfo2 m2 = mallinfo2();
    /* after finalize the heap is back where it was (a little slack for stdio and the
     * session's own buffers, which the flusher may grow meanwhile) */
    CHECK(m2.uordblks < m0.uordblks || m2.uordblks - m0.uordblks < 64 * 1024, 52);
}

static void test_many_comms(void **state) {
    (void)state;
    fresh_dir("many");
    in_child(body_many);
    tp_run run;
    load(&run);
    assert_int_equal(run.procs[0].ncomm, 10 + 3 * 2000);
    tp_run_free(&run);
}

/* ------------------------------------------------------------------ misuse and teardown */

static void body_misuse(void) {
    start_session();
    const tp_nccl_profiler_v5 *pl = v5();
    int mask = 0;
    void *c = NULL;
    /* NULL everywhere NCCL could pass one */
    CHECK(pl->init(NULL, 1, &mask, NULL, 1, 2, 0, NULL) == TP_NCCL_SUCCESS, 60);
    CHECK(pl->init(&c, 1, NULL, NULL, 0, 0, -1, NULL) == TP_NCCL_SUCCESS && c, 61);
    pl->finalize(c);
    CHECK(pl->finalize(NULL) == TP_NCCL_SUCCESS, 62);
    CHECK(pl->stopEvent(NULL) == TP_NCCL_SUCCESS, 63);
    CHECK(pl->recordEventState(NULL, TP_NCCL_STATE_KERNEL_CH_STOP, NULL) == TP_NCCL_SUCCESS, 64);
    c = NULL;
    CHECK(pl->init(&c, HASH_C, &mask, NULL, 1, 2, 0, NULL) == TP_NCCL_SUCCESS && c, 65);
    tp_nccl_descr_v5 d = coll("AllReduce", 8, "ncclFloat32", 1);
    void *h = NULL;
    CHECK(pl->startEvent(c, NULL, &d) == TP_NCCL_SUCCESS, 66);
    CHECK(pl->startEvent(c, &h, NULL) == TP_NCCL_SUCCESS && h == NULL, 67);
    CHECK(pl->startEvent(NULL, &h, &d) == TP_NCCL_SUCCESS && h == NULL, 68);
    tp_nccl_descr_v5 nf = coll(NULL, 8, NULL, 2); /* no func, no datatype */
    nf.u.coll.algo = NULL;
    nf.u.coll.proto = NULL;
    CHECK(pl->startEvent(c, &h, &nf) == TP_NCCL_SUCCESS && h, 69);
    pl->stopEvent(h);
    pl->stopEvent(h); /* a second stop of the same event is ignored */
    CHECK(pl->stopEvent((void *)(uintptr_t)0x12345678u) == TP_NCCL_SUCCESS, 70); /* never ours */

    /* finalize with events still open: they are closed, flagged, and their slots reused */
    void *open[3];
    for (int i = 0; i < 3; i++) {
        tp_nccl_descr_v5 o = p2p("Recv", 4, "ncclUint8", i);
        open[i] = NULL;
        CHECK(pl->startEvent(c, &open[i], &o) == TP_NCCL_SUCCESS && open[i], 71);
    }
    pl->finalize(c);
    for (int i = 0; i < 3; i++) pl->stopEvent(open[i]); /* stale: must be ignored */
}

static void test_misuse_and_open_events(void **state) {
    (void)state;
    fresh_dir("misuse");
    in_child(body_misuse);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_int_equal(p->ncomm, 4); /* the nameless op and three unfinished receives */
    assert_int_equal(count_ops(p, "Unknown"), 1);
    assert_int_equal(count_ops(p, "Recv"), 3);
    for (size_t i = 0; i < p->ncomm; i++)
        if (!strcmp(p->comm[i].name, "Recv")) {
            assert_int_equal(p->comm[i].flags, TPROF_COMM_F_UNFINISHED);
            assert_int_equal(p->comm[i].bytes, 4);
        }
    tp_run_free(&run);
}

/* Without a session the plugin asks NCCL for nothing and hands out no handles. */
static void test_not_recording(void **state) {
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        unsetenv("TRAINPROF_DIR");
        setenv("TRAINPROF_ENABLE", "0", 1);
        const tp_nccl_profiler_v5 *pl = v5();
        void *c = NULL;
        int mask = -1;
        CHECK(pl->init(&c, 9, &mask, NULL, 1, 2, 0, NULL) == TP_NCCL_SUCCESS, 2);
        CHECK(mask == 0, 3);
        tp_nccl_descr_v5 d = coll("AllReduce", 8, "ncclFloat32", 1);
        void *h = (void *)1;
        pl->startEvent(c, &h, &d);
        CHECK(h == NULL, 4);
        pl->finalize(c);
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_kernel_ch),
        cmocka_unit_test(test_pool_full),
        cmocka_unit_test(test_pool_full_no_finalize),
        cmocka_unit_test(test_many_comms),
        cmocka_unit_test(test_misuse_and_open_events),
        cmocka_unit_test(test_not_recording),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
