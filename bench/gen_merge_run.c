/*
 * gen_merge_run.c — a random synthetic run (tests/synth.h) that stresses the report's
 * cross-rank merge (clocks.c: collectives matched by communicator, op and sequence number;
 * stragglers.c: start lags per step; the slim ranks' resolved comm times): 2..40 ranks over
 * 1..3 hosts with their own start pairs, several communicators of random members, collectives
 * missing on some ranks, seen on one rank only, duplicated on a rank, unfinished, nonblocking,
 * send/recv and unknown ops, MPI, NCCL and torch sources, with and without GPU intervals and
 * NCCL kernels, steps with warm-up, ranks without steps and ranks without comm ops.
 *
 * Usage: gen_merge_run DIR SEED [heavy]   (DIR must exist; the same seed writes the same
 * files; heavy: many collectives a step, frequent duplicates, communicators sharing a hash,
 * ops on a second thread, a rank number claimed twice, op codes past the known ones)
 *
 * Used for a differential check: the report of one run from two builds of trainprof
 * (`trainprof report DIR --format json`) must be the same when the merge is rewritten.
 * Built with the benchmarks (bench.cmake: build/bench/gen_merge_run); bench/merge_diff.sh
 * runs the comparison.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/format.h"
#include "synth.h"

static const uint64_t T0 = 1000000000ull, MS = 1000000ull, US = 1000ull;
static const uint64_t RT0 = 1700000000000000000ull;

static uint64_t rng_s;
static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static uint64_t below(uint64_t n) { return n ? rnd() % n : 0; }
static int chance(double p) { return (double)(rnd() >> 11) / 9007199254740992.0 < p; }

enum { EV_BEGIN, EV_END, EV_KERNEL, EV_COMM };
typedef struct ev {
    uint64_t ts;
    int type;
    uint64_t a, b;   /* step: number; kernel: end, stream */
    const char *name;
    tprof_pl_comm pl;
    size_t order;
} ev;

typedef struct evs {
    ev *v;
    size_t n, cap;
} evs;

static ev *push(evs *e) {
    if (e->n == e->cap) {
        e->cap = e->cap ? 2 * e->cap : 256;
        e->v = realloc(e->v, e->cap * sizeof *e->v);
        if (!e->v) abort();
    }
    ev *x = &e->v[e->n];
    memset(x, 0, sizeof *x);
    x->order = e->n++;
    return x;
}

static int cmp_ev(const void *a, const void *b) {
    const ev *x = a, *y = b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

#define MAXR 40
#define MAXC 6

static const uint32_t coll_ops[] = {TPROF_COMM_ALLREDUCE,   TPROF_COMM_ALLGATHER,
                                    TPROF_COMM_REDUCESCATTER, TPROF_COMM_BROADCAST,
                                    TPROF_COMM_REDUCE,      TPROF_COMM_ALLTOALL,
                                    TPROF_COMM_BARRIER,     TPROF_COMM_GATHER,
                                    TPROF_COMM_SCATTER};
static const char *kname[] = {
    "ncclDevKernel_Generic",          "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
    "ncclDevKernel_AllGather_RING_LL", "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL",
    "ncclDevKernel_Broadcast_RING_LL", "ncclDevKernel_Reduce_Sum_f32_RING_LL",
    "ncclDevKernel_SendRecv",         "ncclDevKernel_SendRecv",
    "ncclDevKernel_SendRecv",         "ncclDevKernel_Generic",
    "ncclDevKernel_Generic",          "ncclDevKernel_Generic"};

/* The job drawn from the seed: its hosts, ranks and communicators, and each rank's records
 * (true times: ns since the job's start, the same instant on every host). */
static struct {
    int heavy;
    double p_dup, p_miss;
    uint64_t max_coll;
    int nr, nh, nc, nsteps;
    int host[MAXR], has_steps[MAXR], has_comm[MAXR];
    uint64_t lag[MAXR];
    uint64_t mono0[3], rt[3];
    unsigned char member[MAXC][MAXR];
    uint64_t hash[MAXC];
    uint32_t src[MAXC], cseq[MAXC], csize[MAXC], crank[MAXC][MAXR];
    uint64_t L; /* step length */
    evs E[MAXR];
} G;

/* Hosts (their clocks and start pairs), ranks, communicators. */
static void draw_job(void) {
    G.nr = 2 + (int)below(39);
    G.nh = 1 + (int)below(3);
    G.nc = 1 + (int)below(MAXC);
    G.nsteps = (int)below(9);
    for (int h = 0; h < G.nh; h++) {
        G.mono0[h] = T0 * (1 + 5 * (uint64_t)h) + below(MS);
        /* host h's realtime claim is off by up to +-3 ms; now and then no usable pair */
        G.rt[h] = RT0 + (h ? below(6 * MS) - 3 * MS : 0);
        if (h && chance(0.1)) G.rt[h] = 0;
    }
    for (int r = 0; r < G.nr; r++) {
        G.host[r] = chance(0.5) ? (int)below((uint64_t)G.nh) : r * G.nh / G.nr;
        G.has_steps[r] = !chance(0.1);
        G.has_comm[r] = !chance(0.08);
        G.lag[r] = chance(0.15) ? 1 * MS + below(4 * MS) : below(300 * US);
    }
    /* communicators: 0 is every rank (now and then), the others random member subsets; a
     * communicator may share the previous one's hash (heavy: its own members otherwise) */
    for (int c = 0; c < G.nc; c++) {
        G.hash[c] = chance(G.heavy ? 0.4 : 0.1) && c ? G.hash[c - 1] ^ (uint64_t)G.heavy : rnd();
        G.src[c] = chance(0.6)   ? TPROF_COMM_SRC_NCCL
                   : chance(0.8) ? TPROF_COMM_SRC_MPI
                                 : TPROF_COMM_SRC_TORCH;
        G.cseq[c] = chance(0.2) ? (uint32_t)(UINT32_MAX - below(5)) : (uint32_t)below(3);
        double p = c == 0 && chance(0.5) ? 1.0 : 0.1 + 0.8 * (double)(rnd() % 1000) / 1000;
        G.csize[c] = 0;
        for (int r = 0; r < G.nr; r++) {
            G.member[c][r] = chance(p);
            if (G.member[c][r]) G.crank[c][r] = G.csize[c]++;
        }
    }
    G.L = 8 * MS + below(4 * MS);
}

/* Step s (0-based) of every rank with steps over [u0, u0 + L), with a compute kernel. */
static void add_steps(int s, uint64_t u0) {
    for (int r = 0; r < G.nr; r++) {
        if (!G.has_steps[r]) continue;
        ev *b = push(&G.E[r]);
        b->ts = u0;
        b->type = EV_BEGIN;
        b->a = (uint64_t)s;
        ev *e = push(&G.E[r]);
        e->ts = u0 + G.L - 1;
        e->type = EV_END;
        e->a = (uint64_t)s;
        ev *k = push(&G.E[r]);
        k->ts = u0 + 100 * US;
        k->type = EV_KERNEL;
        k->a = u0 + G.L / 2;
        k->b = 7;
        k->name = "sm90_xmma_gemm_bf16";
    }
}

/* Rank r's copy d of a collective of communicator c starting at st, ending (for every rank)
 * at cend: its record, and for NCCL now and then a GPU interval and a kernel. */
static void add_op(int r, int c, uint32_t op, uint32_t seq, uint64_t st, uint64_t cend) {
    uint32_t so = chance(0.1) ? (uint32_t)(1 + below(3)) : G.src[c];
    tprof_pl_comm pl;
    memset(&pl, 0, sizeof pl);
    pl.op = op;
    pl.comm_hash = G.hash[c];
    pl.seq = seq;
    pl.nranks = G.csize[c];
    pl.rank = G.crank[c][r];
    pl.bytes = 1ull << (10 + below(14));
    pl.count = pl.bytes / 4;
    pl.peer = TPROF_COMM_NO_PEER;
    pl.source = so;
    if (so == TPROF_COMM_SRC_MPI) {
        pl.end_ns = cend + below(50 * US);
        if (chance(0.1)) pl.flags |= TPROF_COMM_F_NONBLOCKING;
    } else {
        pl.end_ns = st + 30 * US + below(30 * US);
        if (so == TPROF_COMM_SRC_TORCH) pl.flags |= TPROF_COMM_F_ENQUEUE;
        if (chance(0.6)) {
            pl.flags |= TPROF_COMM_F_GPU_TIME;
            pl.gpu_start_ns = st + 40 * US;
            pl.gpu_end_ns = cend;
        }
        if (chance(0.7)) {
            ev *kk = push(&G.E[r]);
            kk->ts = st + 45 * US + below(20 * US);
            kk->type = EV_KERNEL;
            kk->a = cend + below(20 * US);
            kk->b = 10 + (uint64_t)c;
            kk->name = kname[op < 12 ? op : 0];
        }
    }
    if (chance(0.04)) pl.flags |= TPROF_COMM_F_UNFINISHED;
    ev *x = push(&G.E[r]);
    x->ts = st;
    x->type = EV_COMM;
    x->pl = pl;
    x->b = G.heavy && chance(0.3) ? 2 : 1; /* the thread */
}

/* Communicator c's collectives in the global step at u0: each missing on some ranks, now
 * and then on one rank only or twice (or more) on a rank; then point-to-point ops. */
static void add_collectives(int c, uint64_t u0) {
    int ncoll = (int)below(G.max_coll);
    for (int k = 0; k < ncoll; k++) {
        uint32_t op = coll_ops[below(sizeof coll_ops / sizeof *coll_ops)];
        if (chance(0.03)) op = TPROF_COMM_UNKNOWN;
        if (G.heavy && chance(0.03)) op = TPROF_COMM_OP_COUNT + (uint32_t)below(3);
        uint32_t seq = G.cseq[c]++;
        uint64_t base = u0 + G.L / 2 + (uint64_t)k * G.L / 10, maxlag = 0;
        for (int r = 0; r < G.nr; r++)
            if (G.member[c][r] && G.lag[r] > maxlag) maxlag = G.lag[r];
        uint64_t dur = 50 * US + below(500 * US), cend = base + maxlag + dur;
        int only = chance(0.05) ? (int)below((uint64_t)G.nr) : -1; /* seen on one rank */
        for (int r = 0; r < G.nr; r++) {
            if (!G.member[c][r] || !G.has_comm[r]) continue;
            if (only >= 0 && r != only) continue;
            if (chance(G.p_miss)) continue; /* missing on this rank */
            int copies = chance(G.p_dup) ? 2 + (int)below(2) : 1;
            for (int d = 0; d < copies; d++) {
                uint64_t again = (uint64_t)d * 700 * US;
                add_op(r, c, op, seq, base + G.lag[r] + below(200 * US) + again, cend + again);
            }
        }
    }
    if (!chance(0.3)) return;
    for (int r = 0; r < G.nr; r++) {
        if (!G.member[c][r] || !G.has_comm[r] || !chance(0.3)) continue;
        tprof_pl_comm pl;
        memset(&pl, 0, sizeof pl);
        pl.op = chance(0.5) ? TPROF_COMM_SEND : TPROF_COMM_RECV;
        pl.comm_hash = G.hash[c];
        pl.seq = chance(0.5) ? 0 : G.cseq[c];
        pl.nranks = G.csize[c];
        pl.rank = G.crank[c][r];
        pl.bytes = 4096;
        pl.count = 1024;
        pl.peer = 0;
        pl.source = G.src[c];
        uint64_t st = u0 + G.L / 4 + G.lag[r];
        pl.end_ns = st + 100 * US;
        ev *x = push(&G.E[r]);
        x->ts = st;
        x->type = EV_COMM;
        x->pl = pl;
    }
}

/* Rank r's file, its records in time order on its host's clock. 0 or -1. */
static int write_rank(const char *dir, int r) {
    int h = G.host[r];
    uint64_t m0 = G.mono0[h];
    char hn[16];
    snprintf(hn, sizeof hn, "host%c", 'a' + h);
    synth_file *f = synth_open(dir, hn, 1000 + r, G.rt[h], m0);
    if (!f) return -1;
    /* heavy: rank 1 now and then claims rank 0's number */
    synth_rank(f, G.heavy && r == 1 && chance(0.2) ? 0 : r, G.nr);
    synth_thread(f, 1, 1000 + (uint32_t)r);
    evs *E = &G.E[r];
    if (E->n) qsort(E->v, E->n, sizeof *E->v, cmp_ev);
    uint32_t corr = 1;
    uint64_t last = m0;
    for (size_t i = 0; i < E->n; i++) {
        const ev *x = &E->v[i];
        uint64_t ts = m0 + x->ts;
        switch (x->type) {
        case EV_BEGIN: synth_step_begin(f, 1, ts, x->a); break;
        case EV_END: synth_step_end(f, 1, ts, x->a); break;
        case EV_KERNEL:
            synth_kernel(f, 1, ts, m0 + x->a, 0, (uint32_t)x->b, corr++, x->name);
            if (m0 + x->a > last) last = m0 + x->a;
            break;
        default: {
            tprof_pl_comm pl = x->pl;
            pl.end_ns += m0;
            if (pl.gpu_start_ns) pl.gpu_start_ns += m0;
            if (pl.gpu_end_ns) pl.gpu_end_ns += m0;
            synth_comm(f, x->b == 2 ? 2 : 1, ts, &pl, NULL);
        }
        }
        if (ts > last) last = ts;
    }
    synth_end_of_file(f, last + 5 * MS, 0);
    free(E->v);
    return synth_close(f);
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: gen_merge_run DIR SEED [heavy]\n");
        return 2;
    }
    rng_s = strtoull(argv[2], NULL, 10) * 0x2545f4914f6cdd1dull + 1;
    G.heavy = argc == 4;
    G.p_dup = G.heavy ? 0.3 : 0.05;
    G.p_miss = G.heavy ? 0.2 : 0.08;
    G.max_coll = G.heavy ? 25 : 4;
    draw_job();
    /* collectives also before the first step and after the last */
    for (int s = 0; s < G.nsteps + 2; s++) {
        uint64_t u0 = MS + (uint64_t)s * G.L; /* true time of the global step's start */
        if (s >= 1 && s <= G.nsteps) add_steps(s - 1, u0);
        for (int c = 0; c < G.nc; c++) add_collectives(c, u0);
    }
    for (int r = 0; r < G.nr; r++)
        if (write_rank(argv[1], r) != 0) return 1;
    return 0;
}
