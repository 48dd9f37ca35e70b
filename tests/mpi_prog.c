/*
 * mpi_prog.c — an MPI program for tests/mpi_test.sh: a fixed sequence of collectives,
 * point-to-point calls, nonblocking operations and communicator constructors, each with a
 * known count, datatype, peer and communicator, run as 2 ranks under `trainprof run`. It
 * checks every result itself (the wrappers must not change what MPI computes) and prints the
 * communicator ids the records must carry, computed with libtrainprof_mpi's own
 * tprof__mpi_comm_id() (found with dlsym: the library is preloaded, not linked), so the test
 * compares the records against the documented formula.
 *
 * The sequence (per rank r of n; "next" = (r+1)%n, "prev" = (r+n-1)%n) is listed in
 * tests/mpi_test.sh next to the records it expects. Exit 0 when every result was right.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "trainprof.h"

static int g_rank, g_n, g_bad;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "mpi_prog: rank %d: check failed: %s (line %d)\n", g_rank, \
                    #cond, __LINE__);                                                 \
            g_bad = 1;                                                                \
        }                                                                             \
    } while (0)

typedef uint64_t (*id_fn)(const int *, int, const int *, int, uint32_t);

/* 1-10: collectives on the world, each with a known count, type and root. */
static void collectives(int prev) {
    /* 1. Barrier */
    CHECK(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS);
    /* 2. Bcast 100 ints from 0: 400 bytes, root 0 */
    int b[100];
    for (int i = 0; i < 100; i++) b[i] = g_rank == 0 ? i * 3 : -1;
    MPI_Bcast(b, 100, MPI_INT, 0, MPI_COMM_WORLD);
    CHECK(b[99] == 297);
    /* 3. Allreduce 10 doubles: 80 bytes */
    double d[10], dsum[10];
    for (int i = 0; i < 10; i++) d[i] = g_rank + i;
    MPI_Allreduce(d, dsum, 10, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CHECK(dsum[9] == 9.0 * g_n + g_n * (g_n - 1) / 2.0);
    /* 4. Allgather in place, 3 ints per rank: 12 bytes */
    int *ag = calloc((size_t)g_n * 3, sizeof *ag);
    for (int i = 0; i < 3; i++) ag[g_rank * 3 + i] = g_rank * 10 + i;
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ag, 3, MPI_INT, MPI_COMM_WORLD);
    CHECK(ag[(g_n - 1) * 3 + 2] == (g_n - 1) * 10 + 2);
    free(ag);
    /* 5. Reduce_scatter_block, 5 floats per rank: 20 bytes */
    float *rs = malloc((size_t)g_n * 5 * sizeof *rs), rr[5];
    for (int i = 0; i < g_n * 5; i++) rs[i] = 1.0f;
    MPI_Reduce_scatter_block(rs, rr, 5, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(rr[4] == (float)g_n);
    free(rs);
    /* 6. Reduce 7 doubles to root 1 % n: 56 bytes */
    double rd[7] = {1, 1, 1, 1, 1, 1, 1}, rdo[7] = {0};
    MPI_Reduce(rd, rdo, 7, MPI_DOUBLE, MPI_SUM, 1 % g_n, MPI_COMM_WORLD);
    if (g_rank == 1 % g_n) CHECK(rdo[6] == g_n);
    /* 7. Alltoall 2 ints per peer: everything sent = 2n ints */
    int *sa = malloc((size_t)g_n * 2 * sizeof *sa), *ra = malloc((size_t)g_n * 2 * sizeof *ra);
    for (int i = 0; i < g_n * 2; i++) sa[i] = g_rank * 100 + i;
    MPI_Alltoall(sa, 2, MPI_INT, ra, 2, MPI_INT, MPI_COMM_WORLD);
    CHECK(ra[prev * 2] == prev * 100 + g_rank * 2);
    free(sa);
    free(ra);
    /* 8. Gather 4 ints to root 0: 16 bytes, root 0 */
    int gs[4] = {g_rank, g_rank, g_rank, g_rank};
    int *gr = malloc((size_t)g_n * 4 * sizeof *gr);
    MPI_Gather(gs, 4, MPI_INT, gr, 4, MPI_INT, 0, MPI_COMM_WORLD);
    if (g_rank == 0) CHECK(gr[(g_n - 1) * 4] == g_n - 1);
    free(gr);
    /* 9. Scatter 6 chars from root 1 % n: 6 bytes (recvtype; sendtype is the root's only) */
    char *ss = malloc((size_t)g_n * 6), sr[6];
    for (int i = 0; i < g_n * 6; i++) ss[i] = (char)i;
    MPI_Scatter(ss, 6, MPI_CHAR, sr, 6, MPI_CHAR, 1 % g_n, MPI_COMM_WORLD);
    CHECK(sr[5] == (char)(g_rank * 6 + 5));
    free(ss);
    /* 10. Bcast of a derived type, 2 x contiguous(3 doubles): 48 bytes */
    MPI_Datatype t3;
    MPI_Type_contiguous(3, MPI_DOUBLE, &t3);
    MPI_Type_commit(&t3);
    double tb[6] = {0};
    if (g_rank == 0)
        for (int i = 0; i < 6; i++) tb[i] = i + 0.5;
    MPI_Bcast(tb, 2, t3, 0, MPI_COMM_WORLD);
    CHECK(tb[5] == 5.5);
    MPI_Type_free(&t3);
}

/* The communicators of 11 (freed at the end). */
typedef struct comms {
    MPI_Comm dup, rev, solo, lazy;
} comms;

/* 11-16: a duplicate, a reversed split, singletons, and an idup, each used once. */
static void communicators(comms *c) {
    /* 11. communicators: a duplicate, a reversed split, singletons, and an idup (a
     * constructor the library does not wrap: its id is learned on first use) */
    MPI_Comm_dup(MPI_COMM_WORLD, &c->dup);
    MPI_Comm_split(MPI_COMM_WORLD, 0, g_n - g_rank, &c->rev);
    MPI_Comm_split(MPI_COMM_WORLD, g_rank, 0, &c->solo);
    MPI_Request ir;
    MPI_Comm_idup(MPI_COMM_WORLD, &c->lazy, &ir);
    MPI_Wait(&ir, MPI_STATUS_IGNORE); /* 12. a Wait on a request we did not track */
    int rr_rank = -1;
    MPI_Comm_rank(c->rev, &rr_rank);
    CHECK(rr_rank == g_n - 1 - g_rank);
    MPI_Barrier(c->dup);  /* 13 */
    MPI_Barrier(c->rev);  /* 14 */
    MPI_Barrier(c->solo); /* 15 */
    int one = 1, sum1 = 0;
    MPI_Allreduce(&one, &sum1, 1, MPI_INT, MPI_SUM, c->lazy); /* 16: 4 bytes */
    CHECK(sum1 == g_n);
}

/* 17-22: point-to-point and nonblocking calls. */
static void point_to_point(int next, int prev) {
    /* 17. ring exchange, nonblocking: Irecv from prev, Isend to next, 1000 bytes; Waitall */
    char sbuf[1000], rbuf[1000];
    memset(sbuf, g_rank + 1, sizeof sbuf);
    MPI_Request rq[2];
    MPI_Irecv(rbuf, 1000, MPI_BYTE, prev, 7, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend(sbuf, 1000, MPI_BYTE, next, 7, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    CHECK(rbuf[999] == prev + 1);
    /* 18. Iallreduce 4 ints + Wait: 16 bytes */
    int ia[4] = {1, 2, 3, 4}, iao[4];
    MPI_Request r2;
    MPI_Iallreduce(ia, iao, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r2);
    MPI_Wait(&r2, MPI_STATUS_IGNORE);
    CHECK(iao[3] == 4 * g_n);
    /* 19. Ibarrier completed by a Test loop (Tests are not recorded) */
    MPI_Request r3;
    int flag = 0;
    MPI_Ibarrier(MPI_COMM_WORLD, &r3);
    while (!flag) MPI_Test(&r3, &flag, MPI_STATUS_IGNORE);
    CHECK(r3 == MPI_REQUEST_NULL);
    /* 20. Sendrecv, 8 ints to next, from MPI_ANY_SOURCE without a status: the peer is learnt */
    int sv[8], rv[8];
    for (int i = 0; i < 8; i++) sv[i] = g_rank;
    MPI_Sendrecv(sv, 8, MPI_INT, next, 9, rv, 8, MPI_INT, MPI_ANY_SOURCE, 9, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    CHECK(rv[7] == prev);
    /* 21. Send and Recv with MPI_PROC_NULL: bytes 0, no peer */
    MPI_Send(sv, 5, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD);
    MPI_Recv(rv, 5, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    /* 22. Ssend 3 doubles 0 -> 1, Recv on 1 */
    double sd[3] = {1.5, 2.5, 3.5}, rd3[3] = {0};
    if (g_n > 1 && g_rank == 0) MPI_Ssend(sd, 3, MPI_DOUBLE, 1, 3, MPI_COMM_WORLD);
    if (g_n > 1 && g_rank == 1) {
        MPI_Recv(rd3, 3, MPI_DOUBLE, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(rd3[2] == 3.5);
    }
}

/* The collectives hook: installed by libtrainprof_mpi over its own communicator; its traffic
 * must leave no record. 1 when its all_gather, all_reduce and barrier gave the right
 * answers. */
static int check_hook(void) {
    tprof_collectives hook;
    tprof_get_collectives(&hook);
    int hook_ok = hook.world_size == g_n && hook.rank == g_rank && hook.all_gather;
    if (hook_ok) {
        int mine = 1000 + g_rank, *all = calloc((size_t)g_n, sizeof *all);
        hook_ok = hook.all_gather(hook.ctx, &mine, sizeof mine, all) == 0 &&
                  all[g_n - 1] == 1000 + g_n - 1;
        double v[2] = {(double)g_rank, (double)g_rank};
        hook_ok = hook_ok && hook.all_reduce &&
                  hook.all_reduce(hook.ctx, v, 1, TPROF_REDUCE_MAX) == 0 && v[0] == g_n - 1;
        hook_ok = hook_ok && hook.barrier && hook.barrier(hook.ctx) == 0;
        free(all);
    }
    CHECK(hook_ok);
    return hook_ok;
}

/* Prints the ids the records must carry, from the library's own function. */
static void print_ids(void) {
    id_fn id = (id_fn)dlsym(RTLD_DEFAULT, "tprof__mpi_comm_id");
    if (id) {
        int *w = malloc((size_t)g_n * sizeof *w), *rv_ = malloc((size_t)g_n * sizeof *rv_);
        for (int i = 0; i < g_n; i++) {
            w[i] = i;
            rv_[i] = g_n - 1 - i;
        }
        /* solo: this rank's singleton list; MPI_COMM_SELF (made at MPI_Init) was the first
         * communicator with that list, so the split's ordinal is 1. With n == 1 the world
         * itself has that list too, one more before. */
        printf("mpi_prog: rank %d ids world=0x%016" PRIx64 " dup=0x%016" PRIx64
               " rev=0x%016" PRIx64 " solo=0x%016" PRIx64 " lazy=0x%016" PRIx64 "\n",
               g_rank, id(w, g_n, NULL, 0, 0), id(w, g_n, NULL, 0, 1), id(rv_, g_n, NULL, 0, 0),
               id(&g_rank, 1, NULL, 0, g_n == 1 ? 2 : 1), id(w, g_n, NULL, 0, 0xFFFFFFFFu));
        free(w);
        free(rv_);
    } else {
        printf("mpi_prog: rank %d: tprof__mpi_comm_id not found (libtrainprof_mpi not loaded)\n",
               g_rank);
    }
}

int main(int argc, char **argv) {
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_n);
    const int next = (g_rank + 1) % g_n, prev = (g_rank + g_n - 1) % g_n;
    collectives(prev);
    comms c;
    communicators(&c);
    point_to_point(next, prev);
    int hook_ok = check_hook();
    print_ids();
    printf("mpi_prog: rank %d of %d hook=%s results=%s\n", g_rank, g_n, hook_ok ? "ok" : "bad",
           g_bad ? "bad" : "ok");
    fflush(stdout);

    MPI_Comm_free(&c.dup);
    MPI_Comm_free(&c.rev);
    MPI_Comm_free(&c.solo);
    MPI_Comm_free(&c.lazy);
    MPI_Finalize();
    return g_bad;
}
