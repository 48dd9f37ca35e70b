/*
 * test_clocks_match.c — the rules by which the report's merge matches collectives across rank
 * files (clocks.c, tp_clocks_build): a collective is a key (communicator, op, sequence
 * number) seen on at least two ranks; each rank arrives once, with its first op of the key
 * in its file; send, recv, unknown and unfinished ops are never matched; the collectives lie
 * in key order, their arrivals in rank order. And the start lags drawn from them
 * (tp_clocks_lags): each rank behind its own collective's earliest rank, inside its window.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/clocks.h"
#include "analysis/comm.h"
#include "analysis/model.h"
#include "format/format.h"
#include "synth.h"
#include "trainprof.h"

static const uint64_t T0 = 1000000000ull, MS = 1000000ull, US = 1000ull;
static const uint64_t RT0 = 1700000000000000000ull;
static const uint64_t CA = 0xa0, CB = 0xb0, CC = 0xc0; /* the communicators' hashes */

#define NEAR(a, b) assert_true(fabs((double)(a) - (double)(b)) < 1e-9)

/* Op `op` of rank `rank` of `n` on communicator `hash`, sequence `seq`, from `at` to `end`
 * (monotonic ns), from source `src` with flags `flags`. */
static void op_at(synth_file *f, uint32_t o, uint64_t hash, uint32_t seq, uint32_t rank,
                  uint32_t n, uint64_t at, uint64_t end, uint32_t src, uint32_t flags) {
    tprof_pl_comm c;
    memset(&c, 0, sizeof c);
    c.op = o;
    c.comm_hash = hash;
    c.seq = seq;
    c.nranks = n;
    c.rank = rank;
    c.end_ns = end;
    c.peer = o == TPROF_COMM_SEND || o == TPROF_COMM_RECV ? (rank + 1) % n : TPROF_COMM_NO_PEER;
    c.source = src;
    c.flags = flags;
    synth_comm(f, 1, at, &c, NULL);
}

/* op_at from T0 + at to T0 + end. */
static void op(synth_file *f, uint32_t o, uint64_t hash, uint32_t seq, uint32_t rank, uint32_t n,
               uint64_t at, uint64_t end, uint32_t src, uint32_t flags) {
    op_at(f, o, hash, seq, rank, n, T0 + at, T0 + end, src, flags);
}

/* Four ranks on one host (one clock, one start pair). Communicator A holds ranks 0-2,
 * communicator B ranks 0 and 2; rank 3 has no communication op.
 *   A barrier 0: ranks 0, 1, 2 at 1.0, 1.2, 1.5 ms; rank 1 enters it again at 3.0 ms
 *   A barrier 1: rank 0 only
 *   A barrier 2: rank 0, and rank 1's unfinished
 *   A send/recv seq 3 and an unknown op seq 4 on ranks 0-2
 *   B all-reduce 0 (NCCL, enqueue only): ranks 0 and 2 at 4.0 and 4.3 ms */
static void write_run(const char *dir) {
    const uint32_t MPI = TPROF_COMM_SRC_MPI, NCCL = TPROF_COMM_SRC_NCCL;
    const uint64_t a0[3] = {1000 * US, 1200 * US, 1500 * US};
    for (uint32_t r = 0; r < 4; r++) {
        synth_file *f = synth_open(dir, "h", (int32_t)(10 + r), RT0, T0);
        assert_non_null(f);
        synth_rank(f, (int)r, 4);
        synth_thread(f, 1, 10 + r);
        synth_step_begin(f, 1, T0, 0);
        if (r < 3) {
            op(f, TPROF_COMM_BARRIER, CA, 0, r, 3, a0[r], 2 * MS, MPI, 0);
            if (r == 0) op(f, TPROF_COMM_BARRIER, CA, 1, r, 3, 2100 * US, 2200 * US, MPI, 0);
            if (r < 2)
                op(f, TPROF_COMM_BARRIER, CA, 2, r, 3, 2300 * US, 2400 * US, MPI,
                   r == 1 ? TPROF_COMM_F_UNFINISHED : 0);
            if (r == 1) op(f, TPROF_COMM_BARRIER, CA, 0, r, 3, 3 * MS, 3100 * US, MPI, 0);
            op(f, r % 2 ? TPROF_COMM_RECV : TPROF_COMM_SEND, CA, 3, r, 3, 3200 * US, 3300 * US,
               MPI, 0);
            op(f, TPROF_COMM_UNKNOWN, CA, 4, r, 3, 3400 * US, 3500 * US, MPI, 0);
        }
        if (r == 0 || r == 2)
            op(f, TPROF_COMM_ALLREDUCE, CB, 0, r / 2, 2, r ? 4300 * US : 4 * MS,
               (r ? 4300 : 4000) * US + 20 * US, NCCL, 0);
        synth_step_end(f, 1, T0 + 10 * MS, 0);
        synth_end_of_file(f, T0 + 11 * MS, 0);
        assert_int_equal(synth_close(f), 0);
    }
}

static void load(tp_run *run, char *dir, size_t n) {
    assert_int_equal(synth_tmpdir(dir, n, "clocks_match"), 0);
    write_run(dir);
    char err[256] = "";
    int rc = tp_run_load(dir, run, err, sizeof err);
    if (rc) fprintf(stderr, "load: %s\n", err);
    assert_int_equal(rc, TPROF_OK);
}

static void matched_collectives(void **st) {
    (void)st;
    char dir[512];
    tp_run run;
    load(&run, dir, sizeof dir);
    tp_clocks c;
    assert_int_equal(tp_clocks_build(&run, &c), TPROF_OK);
    assert_int_equal(c.nranks, 4);
    /* A's barrier 0 and B's all-reduce 0; the rest seen on one rank, or never matchable */
    assert_int_equal(c.ncoll, 2);
    assert_int_equal(c.narr, 5);
    assert_true(c.coll[0].hash == CA && c.coll[0].op == TPROF_COMM_BARRIER);
    assert_int_equal(c.coll[0].seq, 0);
    assert_int_equal(c.coll[0].first, 0);
    assert_int_equal(c.coll[0].n, 3);
    assert_true(c.coll[1].hash == CB && c.coll[1].op == TPROF_COMM_ALLREDUCE);
    assert_int_equal(c.coll[1].first, 3);
    assert_int_equal(c.coll[1].n, 2);
    /* rank order; rank 1 arrives at its first barrier 0 (1.2 ms), not at its second (3 ms) */
    const size_t rk[5] = {0, 1, 2, 0, 2};
    const int64_t at[5] = {1000000, 1200000, 1500000, 4000000, 4300000};
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(c.arr[i].rank, rk[i]);
        assert_int_equal(tp_arrival_start(&c, &c.arr[i]) - tp_arrival_start(&c, &c.arr[0]),
                         at[i] - at[0]);
    }
    /* the barrier's ends count for alignment (MPI, blocking); the NCCL enqueue's do not; the
     * barrier's three ends agree (rank 1's second barrier 0 ended 1.1 ms later) */
    assert_int_equal(tp_arrival_end(&c, &c.arr[1]) - tp_arrival_start(&c, &c.arr[1]), 800000);
    assert_true(c.arr[0].end_ok && c.arr[1].end_ok && c.arr[2].end_ok);
    assert_false(c.arr[3].end_ok || c.arr[4].end_ok);
    assert_true(c.coll[0].median_ok && !c.coll[1].median_ok);
    assert_int_equal(c.coll[0].median_end, tp_arrival_end(&c, &c.arr[0]));
    assert_int_equal(c.hosts[0].nresid, 3);
    NEAR(c.hosts[0].resid_max_us, 0);

    size_t n[4];
    double med[4], mean[4], p90[4];
    tp_clocks_lags(&c, NULL, NULL, n, med, mean, p90);
    assert_int_equal(n[0], 2);
    assert_int_equal(n[1], 1);
    assert_int_equal(n[2], 2);
    assert_int_equal(n[3], 0);
    NEAR(mean[0], 0);
    NEAR(med[1], 0.2);
    NEAR(mean[2], 0.4); /* 0.5 ms behind rank 0 at the barrier, 0.3 at the all-reduce */
    NEAR(mean[3], 0);
    /* windows: rank 2's ends at 3 ms, so only its barrier counts; rank 0's is open */
    int64_t w0[4] = {0}, w1[4] = {0};
    w0[2] = tp_arrival_start(&c, &c.arr[0]);
    w1[2] = w0[2] + 2 * (int64_t)MS;
    tp_clocks_lags(&c, w0, w1, n, med, mean, p90);
    assert_int_equal(n[0], 2);
    assert_int_equal(n[2], 1);
    NEAR(med[2], 0.5);
    tp_clocks_free(&c);
    tp_run_free(&run);
    synth_rmtree(dir);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Each host's residuals, their median and maximum, against the definition computed here:
 * host "a" holds ranks 0-3 at NRES barriers of communicator A, host "b" ranks 4-6 at as many
 * of B (no collective shared: b is placed by its start pair alone). Barrier k starts at k s
 * and each rank's end lies a pseudo-random 0 to 2^29 ns (0.54 s) after it, so that the
 * residuals span four bytes of the radix selection, and no two ranks agree. */
#define NRES 200
static void residuals(void **st) {
    (void)st;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "clocks_resid"), 0);
    static int64_t end[7][NRES];
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int k = 0; k < NRES; k++)
        for (int r = 0; r < 7; r++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            end[r][k] = (int64_t)(1000 * MS * (uint64_t)k + 10 * US + (x & ((1u << 29) - 1)));
        }
    for (uint32_t r = 0; r < 7; r++) {
        synth_file *f = synth_open(dir, r < 4 ? "a" : "b", (int32_t)(10 + r), RT0, T0);
        assert_non_null(f);
        synth_rank(f, (int)r, 7);
        synth_thread(f, 1, 10 + r);
        synth_step_begin(f, 1, T0, 0);
        for (uint32_t k = 0; k < NRES; k++)
            op(f, TPROF_COMM_BARRIER, r < 4 ? CA : CB, k, r < 4 ? r : r - 4, r < 4 ? 4 : 3,
               1000 * MS * k, (uint64_t)end[r][k], TPROF_COMM_SRC_MPI, 0);
        synth_step_end(f, 1, T0 + 1000 * MS * NRES, 0);
        synth_end_of_file(f, T0 + 1000 * MS * NRES + MS, 0);
        assert_int_equal(synth_close(f), 0);
    }
    /* the definition: per barrier, the lower middle of the members' ends; per host, the
     * lower middle and the largest of |end - that| over its ranks' arrivals */
    static int64_t res[2][4 * NRES];
    size_t nres[2] = {0, 0};
    for (int k = 0; k < NRES; k++)
        for (int h = 0; h < 2; h++) {
            int lo = h ? 4 : 0, n = h ? 3 : 4;
            int64_t e[4];
            for (int j = 0; j < n; j++) e[j] = end[lo + j][k];
            qsort(e, (size_t)n, sizeof *e, cmp_i64);
            for (int j = 0; j < n; j++) res[h][nres[h]++] = llabs(end[lo + j][k] - e[(n - 1) / 2]);
        }
    tp_run run;
    char err[256] = "";
    assert_int_equal(tp_run_load(dir, &run, err, sizeof err), TPROF_OK);
    tp_clocks c;
    assert_int_equal(tp_clocks_build(&run, &c), TPROF_OK);
    assert_int_equal(c.nhosts, 2);
    for (size_t h = 0; h < 2; h++) {
        qsort(res[h], nres[h], sizeof *res[h], cmp_i64);
        assert_int_equal(c.hosts[h].nresid, nres[h]);
        NEAR(c.hosts[h].resid_median_us, (double)res[h][(nres[h] - 1) / 2] / 1e3);
        NEAR(c.hosts[h].resid_max_us, (double)res[h][nres[h] - 1] / 1e3);
        assert_true(c.hosts[h].resid_median_us > 1e3); /* not the zero of each median rank */
    }
    tp_clocks_free(&c);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* A collective's median end may be any value a saturated clock gives, INT64_MIN too, and its
 * residuals still count. Three hosts of two ranks, each with a usable start pair: B's ends at
 * the barriers it shares with A lie so far after A's that B's offset saturates at INT64_MIN,
 * C's likewise against B, so that C's map is INT64_MIN and the ends of C's own barriers, at
 * monotonic 0, are INT64_MIN on the aligned clock: their residuals are 0. */
static void residuals_saturated(void **st) {
    (void)st;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "clocks_sat"), 0);
    const uint64_t late_b = 4600000000000000000ull, late_c = 4000000000000000000ull;
    const struct {
        const char *host;
        uint64_t rt, mono;
    } h[3] = {{"a", 950000000000000000ull, 4600000000000000000ull},
              {"b", 1750000000000000000ull, 1},
              {"c", 950000000000000000ull, 950000000000000000ull}};
    for (uint32_t r = 0; r < 6; r++) {
        synth_file *f = synth_open(dir, h[r / 2].host, (int32_t)(10 + r), h[r / 2].rt,
                                   h[r / 2].mono);
        assert_non_null(f);
        synth_rank(f, (int)r, 6);
        synth_thread(f, 1, 10 + r);
        for (uint32_t k = 0; k < 3; k++) {
            const uint32_t MPI = TPROF_COMM_SRC_MPI, B = TPROF_COMM_BARRIER;
            uint64_t t = k * 10000;
            if (r / 2 == 0) /* A's barriers with B: early */
                op_at(f, B, 0xab, k, r, 4, 1000 + t + r * 7, 2000 + t + r * 11, MPI, 0);
            if (r / 2 == 1) { /* B's with C: early; with A: late */
                op_at(f, B, 0xbc, k, r - 2, 4, 1000 + t + r * 7, 2000 + t + r * 13, MPI, 0);
                op_at(f, B, 0xab, k, r, 4, late_b + t, late_b + 1000 + t + r * 3, MPI, 0);
            }
            if (r / 2 == 2) { /* C's own, at 0; with B: late */
                op_at(f, B, 0xcc, k, r - 4, 2, 0, 0, MPI, 0);
                op_at(f, B, 0xbc, k, r - 2, 4, late_c + t, late_c + 1000 + t + r * 5, MPI, 0);
            }
        }
        synth_end_of_file(f, 4611686018000000000ull, 0);
        assert_int_equal(synth_close(f), 0);
    }
    tp_run run;
    char err[256] = "";
    assert_int_equal(tp_run_load(dir, &run, err, sizeof err), TPROF_OK);
    tp_clocks c;
    assert_int_equal(tp_clocks_build(&run, &c), TPROF_OK);
    assert_int_equal(c.nhosts, 3);
    assert_int_equal(c.map_ns[4], INT64_MIN); /* the premise: C's clock saturated */
    size_t cc = 0;
    while (cc < c.ncoll && c.coll[cc].hash != 0xcc) cc++;
    assert_true(cc < c.ncoll && c.coll[cc].median_ok);
    assert_int_equal(c.coll[cc].median_end, INT64_MIN);
    /* C's residuals: its three barriers with B and its own three, two ranks each */
    assert_int_equal(c.hosts[2].nresid, 12);
    NEAR(c.hosts[2].resid_median_us, 0);
    tp_clocks_free(&c);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* A key holds every op, flag and source the format defines as the op has them; a file's
 * value past its narrow fields reads as unknown: an op past 255 is never matched. */
static void key_narrowing(void **st) {
    (void)st;
    tp_comm_op o;
    memset(&o, 0, sizeof o);
    o.comm_hash = CA;
    o.seq = 0xfffffffeu;
    o.op = TPROF_COMM_OP_COUNT - 1;
    o.flags = TPROF_COMM_F_UNFINISHED | TPROF_COMM_F_GPU_TIME | TPROF_COMM_F_NONBLOCKING |
              TPROF_COMM_F_ENQUEUE;
    o.source = TPROF_COMM_SRC_TORCH;
    tp_comm_key k = tp_comm_key_of(&o);
    assert_true(k.comm_hash == CA && k.seq == o.seq && k.op == o.op && k.flags == o.flags &&
                k.source == o.source);
    o.op = 256 + TPROF_COMM_ALLREDUCE;
    o.flags = 0x10000u | TPROF_COMM_F_ENQUEUE;
    o.source = 256 + TPROF_COMM_SRC_NCCL;
    k = tp_comm_key_of(&o);
    assert_int_equal(k.op, TPROF_COMM_UNKNOWN);
    assert_int_equal(k.flags, TPROF_COMM_F_ENQUEUE);
    assert_int_equal(k.source, 0);
}

/* A long run's merge matches a systematic sample of the collectives (comm.h, TP_COMM_KEEP):
 * rank files of one host (MPI all-reduces: host-timed), read slim as the report reads them.
 * Windows of 64 sequence numbers, 157 of them in 10000 (0 to 156, the last of 16); level L
 * keeps window 0 and the last window of each period of 2^(L - 1) windows, those w with
 * w % 2^(L - 1) = 2^(L - 1) - 1.
 *   rank 0: 10000 all-reduces on A and on B (seq 0-9999), 100 sends on A and 64 all-reduces
 *           on C (seq 64-127, window 1): 20164 ops; level 2 keeps window 0 and the 78 odd
 *           windows of A and of B (5056 each) and C's (64), over the bound together; level 3
 *           windows 0, 3, 7, ..., 155: 40, 2560 a communicator, none of C; no send kept
 *   rank 1: 10000 on A: level 2 (5056)
 *   rank 2: 3000 on B and C's 64: level 0, every op kept
 *   rank 3: C's 64: level 0
 * A's collectives are matched at level 3 (rank 0's), B's at level 3 too, of which rank 2
 * holds windows 0, 3, 7, ..., 43 (12 windows, 768): 2560 + 768 collectives of two ranks each.
 * C's at level 3 too, though rank 0 kept none of them (tp_process.comm_comms): none, where
 * ranks 2 and 3 alone would match 64 without rank 0. Rank 1 starts each all-reduce of A
 * 100 us after rank 0, and rank 2 each of B 40 us after. */
#define NA 10000u
static const uint32_t AR = TPROF_COMM_ALLREDUCE;

/* sampled_merge's rank files into dir, their ops of source src with flags. */
static void sample_files(const char *dir, uint32_t MPI, uint32_t flags) {
    for (uint32_t r = 0; r < 4; r++) {
        synth_file *f = synth_open(dir, "h", (int32_t)(10 + r), RT0, T0);
        assert_non_null(f);
        synth_rank(f, (int)r, 4);
        synth_thread(f, 1, 10 + r);
        for (uint32_t k = 0; k < NA; k++) {
            uint64_t t = 100 * US * k, la = r * 100 * US;
            uint64_t lb = t + 50 * US + r / 2 * 40 * US;
            if (r < 2) op(f, AR, CA, k, r, 2, t + la, t + 90 * US + la, MPI, flags);
            if (r == 0 || (r == 2 && k < 3000))
                op(f, AR, CB, k, r / 2, 2, lb, lb + 9 * US, MPI, flags);
            if (r == 0 && k < 100) op(f, TPROF_COMM_SEND, CA, k, 0, 2, t, t + US, MPI, flags);
            if (r != 1 && k >= 64 && k < 128)
                op(f, AR, CC, k, r / 2, 3, t + 20 * US, t + 29 * US, MPI, flags);
        }
        synth_end_of_file(f, T0 + 100 * US * NA + MS, 0);
        assert_int_equal(synth_close(f), 0);
    }
}

/* sample_files' run, loaded slim: each rank's level and the ops it keeps, as
 * sampled_merge says, keyed as the load read them (none read again). */
static void sample_load(const char *dir, tp_run *run) {
    char err[256] = "";
    const char *ops[1] = {dir};
    size_t again = tp_slim_comm_again();
    assert_int_equal(tp_run_load_slim(ops, 1, run, err, sizeof err), TPROF_OK);
    assert_int_equal(tp_slim_comm_again(), again);
    assert_int_equal(run->nprocs, 4);
    const unsigned level[4] = {3, 2, 0, 0};
    const size_t kept[4] = {2 * 2560, 5056, 3064, 64};
    assert_int_equal(run->procs[0].ncomm_comms, 3); /* A, B and C */
    assert_true(tp_comm_comms_has(&run->procs[0], CC));
    for (size_t i = 0; i < 4; i++) {
        const tp_process *p = &run->procs[i];
        assert_int_equal(p->comm_level, level[p->rank]);
        assert_int_equal(p->ncomm, kept[p->rank]);
        assert_int_equal(tp_comm_level(p), 0); /* what it keeps is under the bound */
        for (size_t k = 0; k < p->ncomm; k++) {
            tp_comm_key key = tp_comm_key_at(p, k);
            assert_true(tp_comm_kept(&key, p->comm_level) && key.op == AR);
        }
        assert_int_equal(tp_comm_last(p)->op, AR);
    }
}

static void sampled_merge(void **st) {
    (void)st;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "clocks_sample"), 0);
    sample_files(dir, TPROF_COMM_SRC_MPI, 0);
    tp_run run;
    char err[256] = "";
    sample_load(dir, &run);
    tp_clocks c;
    assert_int_equal(tp_clocks_build(&run, &c), TPROF_OK);
    assert_int_equal(c.level, 3);
    assert_int_equal(c.ncoll, 2560 + 768);
    assert_int_equal(c.narr, 2 * (2560 + 768));
    for (size_t k = 0; k < c.ncoll; k++) {
        assert_int_equal(c.coll[k].n, 2);
        tp_comm_key key = {c.coll[k].hash, c.coll[k].seq, 0, (uint8_t)AR, 0};
        assert_true(tp_comm_kept(&key, 3) &&
                    (c.coll[k].seq / 64 % 4 == 3 || c.coll[k].seq / 64 == 0));
        assert_true(c.coll[k].hash == CA || c.coll[k].seq < 3000);
    }
    size_t n[4];
    double med[4], mean[4], p90[4];
    assert_int_equal(tp_clocks_lags(&c, NULL, NULL, n, med, mean, p90), TPROF_OK);
    assert_int_equal(n[0], 2560 + 768);
    assert_int_equal(n[1], 2560);
    assert_int_equal(n[2], 768);
    assert_int_equal(n[3], 0);
    NEAR(mean[0], 0);
    NEAR(mean[1], 0.1);
    NEAR(mean[2], 0.04);
    tp_clocks_result res;
    assert_int_equal(tp_clocks_result_fill(&res, &c), TPROF_OK);
    NEAR(res.sample_period, 256);
    tp_clocks_result_free(&res);
    tp_clocks_free(&c);
    char one[600];
    for (size_t i = 0; i < 4; i++)
        if (run.procs[i].rank == 0) snprintf(one, sizeof one, "%s", run.procs[i].path);
    tp_run_free(&run);
    /* rank 0 alone, its file sampled at level 3: nothing is matched across ranks, so no
     * sample is said */
    const char *alone[1] = {one};
    assert_int_equal(tp_run_load_slim(alone, 1, &run, err, sizeof err), TPROF_OK);
    assert_int_equal(run.procs[0].comm_level, 3);
    assert_int_equal(tp_clocks_build(&run, &c), TPROF_OK);
    assert_int_equal(c.level, 0);
    assert_int_equal(tp_clocks_result_fill(&res, &c), TPROF_OK);
    NEAR(res.sample_period, 0);
    tp_clocks_result_free(&res);
    tp_clocks_free(&c);
    tp_run_free(&run);
    /* read whole, every op is matched: the sample is the slim load's alone */
    assert_int_equal(tp_run_load(dir, &run, err, sizeof err), TPROF_OK);
    assert_int_equal(tp_clocks_build(&run, &c), TPROF_OK);
    assert_int_equal(c.level, 0);
    assert_int_equal(c.ncoll, NA + 3000 + 64);
    tp_clocks_free(&c);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* The same ops recorded by torch.distributed alone (enqueue-flagged NCCL calls of a job
 * without NCCL's profiler plugin): every one the file's, keyed and sampled as MPI's are. */
static void sampled_torch(void **st) {
    (void)st;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "clocks_sample_torch"), 0);
    sample_files(dir, TPROF_COMM_SRC_TORCH, TPROF_COMM_F_ENQUEUE);
    tp_run run;
    sample_load(dir, &run);
    const size_t nops[4] = {20164, 10000, 3064, 64};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(run.procs[i].nrec_twins, 0);
        assert_int_equal(run.procs[i].nrec_comm, nops[run.procs[i].rank]);
    }
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* The level a file's ops are kept at: the least that leaves at most TP_COMM_KEEP of them,
 * counting only the collectives the merge matches (windows of 64 sequence numbers). */
static void sample_level(void **st) {
    (void)st;
    tp_process p;
    memset(&p, 0, sizeof p);
    p.comm_keys = calloc(40000, sizeof *p.comm_keys);
    assert_non_null(p.comm_keys);
    p.ncomm = TP_COMM_KEEP;
    for (size_t i = 0; i < 40000; i++)
        p.comm_keys[i] = (tp_comm_key){CA, (uint32_t)i, 0, TPROF_COMM_ALLREDUCE, 0};
    assert_int_equal(tp_comm_level(&p), 0);
    /* windows 0..128, the last of one op: level 2 keeps window 0 and the odd ones (4160) */
    p.ncomm = TP_COMM_KEEP + 1;
    assert_int_equal(tp_comm_level(&p), 2);
    NEAR(tp_comm_period(2), 128);
    /* 625 windows: level 2 keeps 313 (20032), 3 157 (10048), 4 79 (5056) */
    p.ncomm = 40000;
    assert_int_equal(tp_comm_level(&p), 4);
    for (size_t i = 0; i < 100; i++) p.comm_keys[i].op = TPROF_COMM_SEND;
    p.ncomm = TP_COMM_KEEP + 100; /* its collectives within the bound: level 1, no sample */
    assert_int_equal(tp_comm_level(&p), 1);
    assert_true(tp_comm_period(1) == 0 && tp_comm_period(0) == 0);
    p.ncomm = 40000;
    for (size_t i = 0; i < 40000; i++) p.comm_keys[i].op = TPROF_COMM_SEND;
    assert_int_equal(tp_comm_level(&p), 1); /* none is matched: level 1 keeps none */
    for (size_t i = 0; i < 40000; i++) /* one communicator per op, in window 78 (0b1001110) */
        p.comm_keys[i] = (tp_comm_key){i, 5000, 0, TPROF_COMM_ALLREDUCE, 0};
    assert_int_equal(tp_comm_level(&p), 0); /* level 2 would keep none: none is left out */
    /* 150 communicators of 200 collectives from sequence number 960 (a capture begun
     * mid-run, no window 0): windows 15 to 18, of classes 4, 0, 1, 0; level 2 keeps 19200, 3
     * to 5 window 15 alone (9600), 6 none: of the deepest levels with some, the least */
    p.ncomm = 30000;
    for (size_t i = 0; i < 30000; i++)
        p.comm_keys[i] = (tp_comm_key){i / 200, 960 + (uint32_t)(i % 200), 0,
                                       TPROF_COMM_ALLREDUCE, 0};
    assert_int_equal(tp_comm_level(&p), 3);
    p.ncomm = 40000;
    for (size_t i = 0; i < 40000; i++)
        p.comm_keys[i] = (tp_comm_key){i, 5000, 0, TPROF_COMM_ALLREDUCE, 0};
    for (size_t i = 0; i < 40000; i++) p.comm_keys[i].seq = 7;
    assert_int_equal(tp_comm_level(&p), 0); /* none meets the bound, and none is left out */
    p.comm_keys[0].op = TPROF_COMM_RECV; /* ... but a receive, which level 1 leaves */
    assert_int_equal(tp_comm_level(&p), 1);
    p.comm_keys[0].op = TPROF_COMM_ALLREDUCE;
    /* the others in window 0, kept at every level: none meets the bound, and no level keeps
     * a window past the first, so the least that keeps as few as the deepest */
    p.comm_keys[0].seq = 1u << 31; /* window 2^25 (class 0): left out from level 2 on */
    assert_int_equal(tp_comm_level(&p), 2);
    p.comm_keys[0].seq = 64; /* window 1 (class 1): level 2 keeps every op, so none is left */
    assert_int_equal(tp_comm_level(&p), 0);
    p.comm_keys[0].seq = UINT32_MAX; /* the last window (2^26 - 1): kept at every level */
    assert_int_equal(tp_comm_class(&p.comm_keys[0]), TP_COMM_LEVEL_MAX - 1);
    assert_true(tp_comm_kept(&p.comm_keys[0], TP_COMM_LEVEL_MAX));
    assert_int_equal(tp_comm_level(&p), 0);
    /* 20 communicators of 2000 collectives under a bound of 1024: their window 0 alone (1280)
     * is past it; the deepest level that keeps a window past the first is 6 (window 31, seq
     * 1984-1999: 16 each, 1600 in all), not the warm-up alone */
    tp_comm_keep_set(1024);
    p.ncomm = 40000;
    for (size_t i = 0; i < 40000; i++)
        p.comm_keys[i] = (tp_comm_key){i / 2000, (uint32_t)(i % 2000), 0,
                                       TPROF_COMM_ALLREDUCE, 0};
    assert_int_equal(tp_comm_level(&p), 6);
    tp_comm_keep_set(0);
    /* the bound as configured: 40000 ops in 625 windows; level 3 keeps 10048, level 7 window 0
     * and every 64th from 63 (10: 640) */
    for (size_t i = 0; i < 40000; i++)
        p.comm_keys[i] = (tp_comm_key){CA, (uint32_t)i, 0, TPROF_COMM_ALLREDUCE, 0};
    const struct {
        size_t set, keep;
        unsigned level;
    } cf[] = {{20000, 20000, 3}, {100, 1024, 7}, {0, 0, 4}};
    for (size_t i = 0; i < sizeof cf / sizeof *cf; i++) {
        tp_comm_keep_set(cf[i].set);
        assert_int_equal(tp_comm_keep(), cf[i].keep);
        assert_int_equal(tp_comm_keep_of(&p), cf[i].keep ? cf[i].keep : TP_COMM_KEEP);
        assert_int_equal(tp_comm_level(&p), cf[i].level);
    }
    tp_comm_keep_set(40000);
    assert_int_equal(tp_comm_level(&p), 0);
    tp_comm_keep_set(0);
    /* not configured, the bound follows the world size the file names, read as the load
     * reads it (tp_meta_int: as atoi, out of range unknown): 2^23 ops over the ranks, within
     * [1024, 8192]; level 5 keeps 40 windows (2560), level 6 20 (1280), level 7 10 (640) */
    const struct {
        const char *world;
        size_t keep;
        unsigned level;
    } ws[] = {{"1024", 8192, 4}, {"1025", 8184, 4}, {"2048", 4096, 5}, {"100000", 1024, 7},
              {"0", 8192, 4},    {"-5", 8192, 4},   {"12x", 8192, 4}, {"", 8192, 4},
              {"99999999999999999999", 8192, 4}, {" 4096", 2048, 6}, {"4096abc", 2048, 6}};
    tp_kv meta[2] = {{"rank", "0"}, {"world_size", NULL}};
    p.meta = meta;
    p.nmeta = 2;
    for (size_t i = 0; i < sizeof ws / sizeof *ws; i++) {
        meta[1].value = ws[i].world;
        assert_int_equal(tp_comm_keep_of(&p), ws[i].keep);
        assert_int_equal(tp_comm_level(&p), ws[i].level);
    }
    meta[1].value = "2048"; /* a configured bound holds whatever the world size */
    tp_comm_keep_set(20000);
    assert_int_equal(tp_comm_keep_of(&p), 20000);
    assert_int_equal(tp_comm_level(&p), 3);
    tp_comm_keep_set(0);
    p.meta = NULL;
    p.nmeta = 0;
    tp_comm_key k = {CA, 4095, 0, TPROF_COMM_ALLREDUCE, 0}; /* window 63 (0b111111) */
    assert_true(tp_comm_kept(&k, 0) && tp_comm_kept(&k, 2) && tp_comm_kept(&k, 7) &&
                !tp_comm_kept(&k, 8));
    k.seq = 4096; /* window 64 (0b1000000) */
    assert_true(tp_comm_kept(&k, 1) && !tp_comm_kept(&k, 2));
    k.flags = TPROF_COMM_F_UNFINISHED;
    assert_true(tp_comm_kept(&k, 0) && !tp_comm_kept(&k, 1));
    NEAR(tp_comm_period(TP_COMM_LEVEL_MAX), 4294967296.0);
    free(p.comm_keys);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sampled_merge),
        cmocka_unit_test(sampled_torch),
        cmocka_unit_test(sample_level),
        cmocka_unit_test(matched_collectives),
        cmocka_unit_test(residuals),
        cmocka_unit_test(residuals_saturated),
        cmocka_unit_test(key_narrowing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
