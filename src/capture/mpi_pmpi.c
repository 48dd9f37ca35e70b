/*
 * mpi_pmpi.c — libtrainprof_mpi.so: MPI capture through the PMPI profiling interface, and the
 * MPI implementation of the cross-rank collectives hook (trainprof.h, docs/timers.md).
 * docs/mpi.md is the user's page; this comment is the engineer's.
 *
 * How it attaches. `trainprof run` puts this library into LD_PRELOAD of every process of the
 * job (python, torchrun, mpirun and orted too), so it must be harmless where there is no MPI:
 * it links no MPI library, has no constructor, and references no libmpi symbol at load time.
 * It defines MPI_* entry points; the program's calls bind to them (preloaded objects come
 * first), and each one calls its PMPI_* twin, found on first use with dlsym(RTLD_NEXT), then
 * RTLD_DEFAULT, then in a libmpi the process loaded privately (RTLD_LOCAL, as some Python
 * extensions do). Open MPI's predefined handles (MPI_COMM_WORLD, MPI_BYTE, MPI_SUM, ...) are
 * macros over the addresses of data symbols (&ompi_mpi_comm_world); writing them here would
 * make the dynamic linker demand libmpi in every process, so they are looked up by name at
 * MPI_Init instead (the build links with --no-undefined to prove nothing else slipped in).
 * When those symbols are missing the MPI is not Open MPI (MPICH-derived MPIs have integer
 * handles and other constants): every wrapper then only forwards, which is ABI-safe because
 * no MPI C function takes a structure by value.
 *
 * What is recorded (only while the session records, TPROF__ON(); otherwise a wrapper costs
 * one load and a branch before the PMPI call): one TPROF_REC_COMM_OP record per call of a
 * blocking collective or point-to-point function, on the calling thread, with the host
 * interval of the call on CLOCK_MONOTONIC, the docs/design.md §5.2 op, count and bytes (count x
 * MPI_Type_size of the argument significant on this rank, looked up after the call returned
 * MPI_SUCCESS, so that a datatype that is only meaningful at the root is never touched
 * elsewhere), the communicator's id, size and this rank, the root or peer, and for
 * collectives a per-communicator sequence number (collectives on one communicator are
 * ordered on every member, so the k-th has the same seq everywhere). Failed calls record
 * nothing. Nonblocking operations are remembered by request in a bounded lock-free table and
 * recorded when a Wait or Test sees them complete, from the initiation to the end of that
 * call; MPI_Wait* calls are recorded as well (op UNKNOWN, named "Wait", "Waitall", ...), Test*
 * calls are not (polling loops would flood the ring).
 *
 * Communicator ids (docs/design.md §5.2: a hash of the members' world ranks): the world ranks
 * of the members in rank order, hashed, plus an ordinal that tells apart communicators with the
 * same members (MPI_COMM_WORLD and its duplicates): the k-th such communicator this process
 * created. Creation is collective over every member, so each member counts the same k. The id
 * is computed when a wrapped constructor (Comm_dup, Comm_split, ...) returns, with local group
 * calls only (no communication), and kept in a bounded open-addressing table keyed by the
 * handle (a pointer in Open MPI); lookups on the hot path take no lock. A communicator made by
 * a call we do not wrap gets the same hash with the ordinal LAZY on its first use. Past the
 * table's bound a communicator gets a fallback id (counted in the file's metadata).
 *
 * The collectives hook: after PMPI_Init succeeds, the library duplicates MPI_COMM_WORLD with
 * PMPI (on every rank, whatever happens next, since a dup is collective) and, unless the
 * program registered its own hook, registers all-gather / all-reduce / barrier callbacks over
 * that communicator, so timers traffic never mixes with the program's and is never recorded
 * (the callbacks call PMPI directly). MPI_Finalize unregisters it before PMPI_Finalize.
 *
 * Never harm the job: every return value is PMPI's, arguments are passed unchanged (except
 * MPI_STATUS_IGNORE replaced by a local status to learn an MPI_ANY_SOURCE sender, which is
 * not observable), and nothing here calls MPI_Abort or exits.
 */
#define _GNU_SOURCE /* CLOCK_MONOTONIC */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_track.h"

#define WRAP __attribute__((visibility("default")))

WRAP int MPI_Init(int *argc, char ***argv) {
    PMPI_GET(Init);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    int rc = fn(argc, argv);
    if (rc == MPI_SUCCESS) {
        int provided = MPI_THREAD_SINGLE;
        PMPI_DECL(query, Query_thread);
        if (!query || query(&provided) != MPI_SUCCESS) provided = -1;
        after_init(provided);
    }
    return rc;
}

WRAP int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    PMPI_GET(Init_thread);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    int rc = fn(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) after_init(provided ? *provided : -1);
    return rc;
}

WRAP int MPI_Finalize(void) {
    PMPI_GET(Finalize);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    before_finalize();
    return fn();
}

/* ------------------------------------------------------------------ communicators */

#define CTOR_TAIL(newp)                                             \
    if (rc == MPI_SUCCESS && (newp)) comm_created(*(newp));         \
    return rc

WRAP int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
    PMPI_GET(Comm_dup);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    int rc = fn(comm, newcomm);
    CTOR_TAIL(newcomm);
}

WRAP int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm) {
    PMPI_GET(Comm_dup_with_info);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    int rc = fn(comm, info, newcomm);
    CTOR_TAIL(newcomm);
}

WRAP int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
    PMPI_GET(Comm_split);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    int rc = fn(comm, color, key, newcomm);
    CTOR_TAIL(newcomm);
}

WRAP int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info,
                             MPI_Comm *newcomm) {
    PMPI_GET(Comm_split_type);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    int rc = fn(comm, split_type, key, info, newcomm);
    CTOR_TAIL(newcomm);
}

WRAP int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm) {
    PMPI_GET(Comm_create);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    int rc = fn(comm, group, newcomm);
    CTOR_TAIL(newcomm);
}

WRAP int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm) {
    PMPI_GET(Comm_create_group);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    int rc = fn(comm, group, tag, newcomm);
    CTOR_TAIL(newcomm);
}

WRAP int MPI_Cart_create(MPI_Comm old_comm, int ndims, const int dims[], const int periods[],
                         int reorder, MPI_Comm *comm_cart) {
    PMPI_GET(Cart_create);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    int rc = fn(old_comm, ndims, dims, periods, reorder, comm_cart);
    CTOR_TAIL(comm_cart);
}

WRAP int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *new_comm) {
    PMPI_GET(Cart_sub);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    int rc = fn(comm, remain_dims, new_comm);
    CTOR_TAIL(new_comm);
}

WRAP int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm bridge_comm,
                              int remote_leader, int tag, MPI_Comm *newintercomm) {
    PMPI_GET(Intercomm_create);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    int rc = fn(local_comm, local_leader, bridge_comm, remote_leader, tag, newintercomm);
    CTOR_TAIL(newintercomm);
}

WRAP int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm *newintracomm) {
    PMPI_GET(Intercomm_merge);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    int rc = fn(intercomm, high, newintracomm);
    CTOR_TAIL(newintracomm);
}

WRAP int MPI_Comm_free(MPI_Comm *comm) {
    PMPI_GET(Comm_free);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    /* forget first: once freed, MPI may hand the same address to a new communicator */
    if (comm && atomic_load_explicit(&g_active, memory_order_acquire)) comm_forget(*comm);
    return fn(comm);
}

WRAP int MPI_Comm_disconnect(MPI_Comm *comm) {
    PMPI_GET(Comm_disconnect);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    if (comm && atomic_load_explicit(&g_active, memory_order_acquire)) comm_forget(*comm);
    return fn(comm);
}

static uint64_t sum_counts(const int *counts, int n) {
    uint64_t s = 0;
    if (counts)
        for (int i = 0; i < n; i++) s += counts[i] > 0 ? (uint64_t)counts[i] : 0;
    return s;
}

/* ------------------------------------------------------------------ collectives */

/* Blocking collective: forward, time, and describe it after MPI_SUCCESS. DESCRIBE sets
 * `count` (elements this rank passes, docs/design.md §5.2), `dt` and `root` from the arguments
 * significant on this rank, with `ci` (the communicator) in scope. */
#define COLL(OP, CALL, COMM, DESCRIBE)                                  \
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;                            \
    if (!CAPTURE()) return CALL;                                        \
    uint64_t t0 = now_ns();                                             \
    int rc = CALL;                                                      \
    uint64_t t1 = now_ns();                                             \
    if (rc == MPI_SUCCESS) {                                            \
        comm_info ci;                                                   \
        comm_get(COMM, &ci);                                            \
        uint64_t count = 0;                                             \
        MPI_Datatype dt = H.dt_null;                                    \
        int root = -1;                                                  \
        DESCRIBE;                                                       \
        (void)root;                                                     \
        op_done(&ci, OP, count, dt, root, 1, t0, t1);                   \
    }                                                                   \
    return rc

/* Nonblocking collective: the same, but remembered under *request until a Wait or Test. */
#define ICOLL(OP, CALL, COMM, REQ, DESCRIBE)                            \
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;                            \
    if (!CAPTURE()) return CALL;                                        \
    uint64_t t0 = now_ns();                                             \
    int rc = CALL;                                                      \
    uint64_t t1 = now_ns();                                             \
    if (rc == MPI_SUCCESS && (REQ)) {                                   \
        comm_info ci;                                                   \
        comm_get(COMM, &ci);                                            \
        uint64_t count = 0;                                             \
        MPI_Datatype dt = H.dt_null;                                    \
        int root = -1;                                                  \
        DESCRIBE;                                                       \
        op_started(&ci, OP, count, dt, root, 1, t0, t1, *(REQ));        \
    }                                                                   \
    return rc

#define NN(x) ((x) > 0 ? (uint64_t)(x) : 0u)
/* this rank's entry of a per-rank counts array */
#define MINE(arr) ((arr) && ci.rank < ci.nranks ? NN((arr)[ci.rank]) : 0u)

/* Root-based collectives on an inter-communicator: MPI_PROC_NULL marks a process of the
 * root group that takes no part (its buffer arguments are not significant), MPI_ROOT the
 * root itself. */
#define ROOTED(r) ((r) != MPI_PROC_NULL)

WRAP int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count_, MPI_Datatype datatype,
                       MPI_Op op, MPI_Comm comm) {
    PMPI_GET(Allreduce);
    COLL(TPROF_COMM_ALLREDUCE, fn(sendbuf, recvbuf, count_, datatype, op, comm), comm,
         (count = NN(count_), dt = datatype));
}

WRAP int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count_, MPI_Datatype datatype,
                        MPI_Op op, MPI_Comm comm, MPI_Request *request) {
    PMPI_GET(Iallreduce);
    ICOLL(TPROF_COMM_ALLREDUCE, fn(sendbuf, recvbuf, count_, datatype, op, comm, request),
          comm, request, (count = NN(count_), dt = datatype));
}

#define DESCRIBE_ALLGATHER                                                       \
    if (sendbuf == MPI_IN_PLACE) count = NN(recvcount), dt = recvtype;           \
    else count = NN(sendcount), dt = sendtype

WRAP int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                       int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    PMPI_GET(Allgather);
    COLL(TPROF_COMM_ALLGATHER,
         fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm), comm,
         DESCRIBE_ALLGATHER);
}

WRAP int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                        void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                        MPI_Request *request) {
    PMPI_GET(Iallgather);
    ICOLL(TPROF_COMM_ALLGATHER,
          fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request), comm,
          request, DESCRIBE_ALLGATHER);
}

#define DESCRIBE_ALLGATHERV                                                      \
    if (sendbuf == MPI_IN_PLACE) count = MINE(recvcounts), dt = recvtype;        \
    else count = NN(sendcount), dt = sendtype

WRAP int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                        void *recvbuf, const int recvcounts[], const int displs[],
                        MPI_Datatype recvtype, MPI_Comm comm) {
    PMPI_GET(Allgatherv);
    COLL(TPROF_COMM_ALLGATHER,
         fn(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm), comm,
         DESCRIBE_ALLGATHERV);
}

WRAP int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                         void *recvbuf, const int recvcounts[], const int displs[],
                         MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
    PMPI_GET(Iallgatherv);
    ICOLL(TPROF_COMM_ALLGATHER,
          fn(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
             request),
          comm, request, DESCRIBE_ALLGATHERV);
}

WRAP int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                            MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
    PMPI_GET(Reduce_scatter);
    COLL(TPROF_COMM_REDUCESCATTER, fn(sendbuf, recvbuf, recvcounts, datatype, op, comm), comm,
         (count = MINE(recvcounts), dt = datatype));
}

WRAP int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                             MPI_Request *request) {
    PMPI_GET(Ireduce_scatter);
    ICOLL(TPROF_COMM_REDUCESCATTER,
          fn(sendbuf, recvbuf, recvcounts, datatype, op, comm, request), comm, request,
          (count = MINE(recvcounts), dt = datatype));
}

WRAP int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
    PMPI_GET(Reduce_scatter_block);
    COLL(TPROF_COMM_REDUCESCATTER, fn(sendbuf, recvbuf, recvcount, datatype, op, comm), comm,
         (count = NN(recvcount), dt = datatype));
}

WRAP int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                                   MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                   MPI_Request *request) {
    PMPI_GET(Ireduce_scatter_block);
    ICOLL(TPROF_COMM_REDUCESCATTER,
          fn(sendbuf, recvbuf, recvcount, datatype, op, comm, request), comm, request,
          (count = NN(recvcount), dt = datatype));
}

#define DESCRIBE_ROOTED                                                          \
    root = root_;                                                                \
    if (ROOTED(root_)) count = NN(count_), dt = datatype

WRAP int MPI_Bcast(void *buffer, int count_, MPI_Datatype datatype, int root_, MPI_Comm comm) {
    PMPI_GET(Bcast);
    COLL(TPROF_COMM_BROADCAST, fn(buffer, count_, datatype, root_, comm), comm,
         DESCRIBE_ROOTED);
}

WRAP int MPI_Ibcast(void *buffer, int count_, MPI_Datatype datatype, int root_, MPI_Comm comm,
                    MPI_Request *request) {
    PMPI_GET(Ibcast);
    ICOLL(TPROF_COMM_BROADCAST, fn(buffer, count_, datatype, root_, comm, request), comm,
          request, DESCRIBE_ROOTED);
}

WRAP int MPI_Reduce(const void *sendbuf, void *recvbuf, int count_, MPI_Datatype datatype,
                    MPI_Op op, int root_, MPI_Comm comm) {
    PMPI_GET(Reduce);
    COLL(TPROF_COMM_REDUCE, fn(sendbuf, recvbuf, count_, datatype, op, root_, comm), comm,
         DESCRIBE_ROOTED);
}

WRAP int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count_, MPI_Datatype datatype,
                     MPI_Op op, int root_, MPI_Comm comm, MPI_Request *request) {
    PMPI_GET(Ireduce);
    ICOLL(TPROF_COMM_REDUCE, fn(sendbuf, recvbuf, count_, datatype, op, root_, comm, request),
          comm, request, DESCRIBE_ROOTED);
}

/* AllToAll: everything this rank sends (all peers' blocks), the nccl-tests size. */
#define DESCRIBE_ALLTOALL                                                        \
    if (sendbuf == MPI_IN_PLACE) count = NN(recvcount) * ci.nranks, dt = recvtype; \
    else count = NN(sendcount) * ci.nranks, dt = sendtype

WRAP int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                      int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    PMPI_GET(Alltoall);
    COLL(TPROF_COMM_ALLTOALL,
         fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm), comm,
         DESCRIBE_ALLTOALL);
}

WRAP int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                       void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                       MPI_Request *request) {
    PMPI_GET(Ialltoall);
    ICOLL(TPROF_COMM_ALLTOALL,
          fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request), comm,
          request, DESCRIBE_ALLTOALL);
}

#define DESCRIBE_ALLTOALLV                                                       \
    if (sendbuf == MPI_IN_PLACE) count = sum_counts(recvcounts, (int)ci.nranks), dt = recvtype; \
    else count = sum_counts(sendcounts, (int)ci.nranks), dt = sendtype

WRAP int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                       MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                       const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
    PMPI_GET(Alltoallv);
    COLL(TPROF_COMM_ALLTOALL,
         fn(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
            comm),
         comm, DESCRIBE_ALLTOALLV);
}

WRAP int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                        MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                        const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                        MPI_Request *request) {
    PMPI_GET(Ialltoallv);
    ICOLL(TPROF_COMM_ALLTOALL,
          fn(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
             comm, request),
          comm, request, DESCRIBE_ALLTOALLV);
}

WRAP int MPI_Barrier(MPI_Comm comm) {
    PMPI_GET(Barrier);
    COLL(TPROF_COMM_BARRIER, fn(comm), comm, (void)0);
}

WRAP int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request) {
    PMPI_GET(Ibarrier);
    ICOLL(TPROF_COMM_BARRIER, fn(comm, request), comm, request, (void)0);
}

/* Gather: this rank's block (the root's own block when it gathers in place). */
#define DESCRIBE_GATHER                                                          \
    root = root_;                                                                \
    if (root_ == MPI_ROOT) count = NN(recvcount), dt = recvtype;                 \
    else if (!ROOTED(root_)) (void)0;                                            \
    else if (sendbuf == MPI_IN_PLACE) count = NN(recvcount), dt = recvtype;      \
    else count = NN(sendcount), dt = sendtype

WRAP int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                    int recvcount, MPI_Datatype recvtype, int root_, MPI_Comm comm) {
    PMPI_GET(Gather);
    COLL(TPROF_COMM_GATHER,
         fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root_, comm), comm,
         DESCRIBE_GATHER);
}

WRAP int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                     int recvcount, MPI_Datatype recvtype, int root_, MPI_Comm comm,
                     MPI_Request *request) {
    PMPI_GET(Igather);
    ICOLL(TPROF_COMM_GATHER,
          fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root_, comm, request),
          comm, request, DESCRIBE_GATHER);
}

#define DESCRIBE_GATHERV                                                         \
    root = root_;                                                                \
    if (!ROOTED(root_) || root_ == MPI_ROOT) (void)0;                            \
    else if (sendbuf == MPI_IN_PLACE) count = MINE(recvcounts), dt = recvtype;   \
    else count = NN(sendcount), dt = sendtype

WRAP int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                     const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                     int root_, MPI_Comm comm) {
    PMPI_GET(Gatherv);
    COLL(TPROF_COMM_GATHER,
         fn(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root_, comm),
         comm, DESCRIBE_GATHERV);
}

WRAP int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                      const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                      int root_, MPI_Comm comm, MPI_Request *request) {
    PMPI_GET(Igatherv);
    ICOLL(TPROF_COMM_GATHER,
          fn(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root_, comm,
             request),
          comm, request, DESCRIBE_GATHERV);
}

/* Scatter: this rank's block (the root's own block when it scatters in place). */
#define DESCRIBE_SCATTER                                                         \
    root = root_;                                                                \
    if (root_ == MPI_ROOT) count = NN(sendcount), dt = sendtype;                 \
    else if (!ROOTED(root_)) (void)0;                                            \
    else if (recvbuf == MPI_IN_PLACE) count = NN(sendcount), dt = sendtype;      \
    else count = NN(recvcount), dt = recvtype

WRAP int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                     int recvcount, MPI_Datatype recvtype, int root_, MPI_Comm comm) {
    PMPI_GET(Scatter);
    COLL(TPROF_COMM_SCATTER,
         fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root_, comm), comm,
         DESCRIBE_SCATTER);
}

WRAP int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                      int recvcount, MPI_Datatype recvtype, int root_, MPI_Comm comm,
                      MPI_Request *request) {
    PMPI_GET(Iscatter);
    ICOLL(TPROF_COMM_SCATTER,
          fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root_, comm, request),
          comm, request, DESCRIBE_SCATTER);
}

#define DESCRIBE_SCATTERV                                                        \
    root = root_;                                                                \
    if (!ROOTED(root_) || root_ == MPI_ROOT) (void)0;                            \
    else if (recvbuf == MPI_IN_PLACE) count = MINE(sendcounts), dt = sendtype;   \
    else count = NN(recvcount), dt = recvtype

WRAP int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                      MPI_Datatype sendtype, void *recvbuf, int recvcount,
                      MPI_Datatype recvtype, int root_, MPI_Comm comm) {
    PMPI_GET(Scatterv);
    COLL(TPROF_COMM_SCATTER,
         fn(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root_, comm),
         comm, DESCRIBE_SCATTERV);
}

WRAP int MPI_Iscatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                       MPI_Datatype sendtype, void *recvbuf, int recvcount,
                       MPI_Datatype recvtype, int root_, MPI_Comm comm, MPI_Request *request) {
    PMPI_GET(Iscatterv);
    ICOLL(TPROF_COMM_SCATTER,
          fn(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root_, comm,
             request),
          comm, request, DESCRIBE_SCATTERV);
}

/* ------------------------------------------------------------------ point to point */

/* A message to or from MPI_PROC_NULL moves nothing: its bytes are 0, its peer none. */
static void p2p_done(MPI_Comm comm, uint32_t op, int count, MPI_Datatype dt, int peer,
                     uint64_t t0, uint64_t t1) {
    comm_info ci;
    comm_get(comm, &ci);
    op_done(&ci, op, NN(count), peer == MPI_PROC_NULL ? H.dt_null : dt, peer, 0, t0, t1);
}

static void p2p_started(MPI_Comm comm, uint32_t op, int count, MPI_Datatype dt, int peer,
                        uint64_t t0, uint64_t t1, MPI_Request req) {
    comm_info ci;
    comm_get(comm, &ci);
    op_started(&ci, op, NN(count), peer == MPI_PROC_NULL ? H.dt_null : dt, peer, 0, t0, t1,
               req);
}

#define SEND_BODY(CALL)                                                              \
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;                                         \
    if (!CAPTURE()) return CALL;                                                     \
    uint64_t t0 = now_ns();                                                          \
    int rc = CALL;                                                                   \
    if (rc == MPI_SUCCESS) p2p_done(comm, TPROF_COMM_SEND, count, datatype, dest, t0, now_ns()); \
    return rc

#define ISEND_BODY(CALL)                                                             \
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;                                         \
    if (!CAPTURE()) return CALL;                                                     \
    uint64_t t0 = now_ns();                                                          \
    int rc = CALL;                                                                   \
    uint64_t t1 = now_ns();                                                          \
    if (rc == MPI_SUCCESS && request)                                                \
        p2p_started(comm, TPROF_COMM_SEND, count, datatype, dest, t0, t1, *request); \
    return rc

WRAP int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                  MPI_Comm comm) {
    PMPI_GET(Send);
    SEND_BODY(fn(buf, count, datatype, dest, tag, comm));
}

WRAP int MPI_Ssend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                   MPI_Comm comm) {
    PMPI_GET(Ssend);
    SEND_BODY(fn(buf, count, datatype, dest, tag, comm));
}

WRAP int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                   MPI_Comm comm, MPI_Request *request) {
    PMPI_GET(Isend);
    ISEND_BODY(fn(buf, count, datatype, dest, tag, comm, request));
}

WRAP int MPI_Issend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                    MPI_Comm comm, MPI_Request *request) {
    PMPI_GET(Issend);
    ISEND_BODY(fn(buf, count, datatype, dest, tag, comm, request));
}

WRAP int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag,
                  MPI_Comm comm, MPI_Status *status) {
    PMPI_GET(Recv);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    if (!CAPTURE()) return fn(buf, count, datatype, source, tag, comm, status);
    /* to learn who sent an MPI_ANY_SOURCE message, a status of our own when none is kept */
    MPI_Status local;
    MPI_Status *sp = status == MPI_STATUS_IGNORE && source == MPI_ANY_SOURCE ? &local : status;
    uint64_t t0 = now_ns();
    int rc = fn(buf, count, datatype, source, tag, comm, sp);
    uint64_t t1 = now_ns();
    if (rc == MPI_SUCCESS)
        p2p_done(comm, TPROF_COMM_RECV, count, datatype,
                 source == MPI_ANY_SOURCE && sp ? sp->MPI_SOURCE : source, t0, t1);
    return rc;
}

WRAP int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag,
                   MPI_Comm comm, MPI_Request *request) {
    PMPI_GET(Irecv);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    if (!CAPTURE()) return fn(buf, count, datatype, source, tag, comm, request);
    uint64_t t0 = now_ns();
    int rc = fn(buf, count, datatype, source, tag, comm, request);
    uint64_t t1 = now_ns();
    if (rc == MPI_SUCCESS && request) /* an MPI_ANY_SOURCE receive keeps no peer */
        p2p_started(comm, TPROF_COMM_RECV, count, datatype, source, t0, t1, *request);
    return rc;
}

/* Sendrecv: two records over the same interval, a Send and a Recv, so that the op vocabulary
 * stays docs/design.md §5.2's. */
WRAP int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
                      int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                      int source, int recvtag, MPI_Comm comm, MPI_Status *status) {
    PMPI_GET(Sendrecv);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    if (!CAPTURE())
        return fn(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                  source, recvtag, comm, status);
    MPI_Status local;
    MPI_Status *sp = status == MPI_STATUS_IGNORE && source == MPI_ANY_SOURCE ? &local : status;
    uint64_t t0 = now_ns();
    int rc = fn(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                source, recvtag, comm, sp);
    uint64_t t1 = now_ns();
    if (rc == MPI_SUCCESS) {
        p2p_done(comm, TPROF_COMM_SEND, sendcount, sendtype, dest, t0, t1);
        p2p_done(comm, TPROF_COMM_RECV, recvcount, recvtype,
                 source == MPI_ANY_SOURCE && sp ? sp->MPI_SOURCE : source, t0, t1);
    }
    return rc;
}

WRAP int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype datatype, int dest,
                              int sendtag, int source, int recvtag, MPI_Comm comm,
                              MPI_Status *status) {
    PMPI_GET(Sendrecv_replace);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    if (!CAPTURE())
        return fn(buf, count, datatype, dest, sendtag, source, recvtag, comm, status);
    MPI_Status local;
    MPI_Status *sp = status == MPI_STATUS_IGNORE && source == MPI_ANY_SOURCE ? &local : status;
    uint64_t t0 = now_ns();
    int rc = fn(buf, count, datatype, dest, sendtag, source, recvtag, comm, sp);
    uint64_t t1 = now_ns();
    if (rc == MPI_SUCCESS) {
        p2p_done(comm, TPROF_COMM_SEND, count, datatype, dest, t0, t1);
        p2p_done(comm, TPROF_COMM_RECV, count, datatype,
                 source == MPI_ANY_SOURCE && sp ? sp->MPI_SOURCE : source, t0, t1);
    }
    return rc;
}

/* ------------------------------------------------------------------ completion */

WRAP int MPI_Wait(MPI_Request *request, MPI_Status *status) {
    PMPI_GET(Wait);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    if (!CAPTURE() || !request) return fn(request, status);
    uint64_t t0 = now_ns();
    MPI_Request old = *request;
    int idx = atomic_load_explicit(&g_req_used, memory_order_relaxed) ? req_claim(old) : -1;
    int rc = fn(request, status);
    uint64_t t1 = now_ns();
    wait_put("Wait", 1, &idx, 1, t0, t1);
    req_settle(idx, old, *request, t1, 0);
    return rc;
}

WRAP int MPI_Waitall(int count, MPI_Request array_of_requests[],
                     MPI_Status *array_of_statuses) {
    PMPI_GET(Waitall);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    if (!CAPTURE()) return fn(count, array_of_requests, array_of_statuses);
    uint64_t t0 = now_ns();
    claimset cs;
    claim_all(&cs, count, array_of_requests);
    int rc = fn(count, array_of_requests, array_of_statuses);
    uint64_t t1 = now_ns();
    wait_put("Waitall", count, cs.n ? cs.idx : NULL, cs.n, t0, t1);
    settle_all(&cs, array_of_requests, t1);
    return rc;
}

WRAP int MPI_Waitany(int count, MPI_Request array_of_requests[], int *index,
                     MPI_Status *status) {
    PMPI_GET(Waitany);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    if (!CAPTURE()) return fn(count, array_of_requests, index, status);
    uint64_t t0 = now_ns();
    claimset cs;
    claim_all(&cs, count, array_of_requests);
    int rc = fn(count, array_of_requests, index, status);
    uint64_t t1 = now_ns();
    /* the Wait record's communicator: the request that completed */
    int done = cs.n && index && *index >= 0 && *index < cs.n ? cs.idx[*index] : -1;
    wait_put("Waitany", count, &done, 1, t0, t1);
    settle_all(&cs, array_of_requests, t1);
    return rc;
}

WRAP int MPI_Waitsome(int incount, MPI_Request array_of_requests[], int *outcount,
                      int array_of_indices[], MPI_Status array_of_statuses[]) {
    PMPI_GET(Waitsome);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    if (!CAPTURE())
        return fn(incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
    uint64_t t0 = now_ns();
    claimset cs;
    claim_all(&cs, incount, array_of_requests);
    int rc = fn(incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
    uint64_t t1 = now_ns();
    wait_put("Waitsome", incount, cs.n ? cs.idx : NULL, cs.n, t0, t1);
    settle_all(&cs, array_of_requests, t1);
    return rc;
}

/* Tests are not recorded themselves (a polling loop would flood the ring); they only
 * complete tracked operations. */
WRAP int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
    PMPI_GET(Test);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    if (!CAPTURE() || !request || !atomic_load_explicit(&g_req_used, memory_order_relaxed))
        return fn(request, flag, status);
    MPI_Request old = *request;
    int idx = req_claim(old);
    int rc = fn(request, flag, status);
    if (idx >= 0) req_settle(idx, old, *request, now_ns(), 0);
    return rc;
}

#define TEST_MANY(CALL, N, REQS)                                                 \
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;                                     \
    if (!CAPTURE() || !atomic_load_explicit(&g_req_used, memory_order_relaxed))  \
        return CALL;                                                             \
    claimset cs;                                                                 \
    claim_all(&cs, N, REQS);                                                     \
    int rc = CALL;                                                               \
    if (cs.n) settle_all(&cs, REQS, now_ns());                                   \
    return rc

WRAP int MPI_Testall(int count, MPI_Request array_of_requests[], int *flag,
                     MPI_Status array_of_statuses[]) {
    PMPI_GET(Testall);
    TEST_MANY(fn(count, array_of_requests, flag, array_of_statuses), count, array_of_requests);
}

WRAP int MPI_Testany(int count, MPI_Request array_of_requests[], int *index, int *flag,
                     MPI_Status *status) {
    PMPI_GET(Testany);
    TEST_MANY(fn(count, array_of_requests, index, flag, status), count, array_of_requests);
}

WRAP int MPI_Testsome(int incount, MPI_Request array_of_requests[], int *outcount,
                      int array_of_indices[], MPI_Status array_of_statuses[]) {
    PMPI_GET(Testsome);
    TEST_MANY(fn(incount, array_of_requests, outcount, array_of_indices, array_of_statuses),
              incount, array_of_requests);
}

/* A freed request may still complete, but we will never see it: recorded as unfinished. */
WRAP int MPI_Request_free(MPI_Request *request) {
    PMPI_GET(Request_free);
    if (UNLIKELY(!fn)) return MPI_ERR_OTHER;
    if (!CAPTURE() || !request || !atomic_load_explicit(&g_req_used, memory_order_relaxed))
        return fn(request);
    MPI_Request old = *request;
    int idx = req_claim(old);
    int rc = fn(request);
    req_settle(idx, old, *request, now_ns(), TPROF_COMM_F_UNFINISHED);
    return rc;
}
