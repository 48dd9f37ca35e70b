/*
 * mpi_track.h — what libtrainprof_mpi.so's PMPI wrappers (mpi_pmpi.c) use of its bookkeeping
 * (mpi_track.c): the PMPI lookup, Open MPI's predefined handles, communicator ids, records and
 * the table of nonblocking requests. Internal to the library (hidden: its only exports are the
 * MPI_* wrappers and mpi_pmpi.h's function). Thread safety as the wrappers need it: every
 * function may be called from any thread at once (MPI_THREAD_MULTIPLE), except after_init and
 * before_finalize, which MPI_Init* and MPI_Finalize call once.
 */
#ifndef TPROF_MPI_TRACK_H
#define TPROF_MPI_TRACK_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include <mpi.h>

#include "trainprof.h"
#include "comm_ext.h"

#ifndef OPEN_MPI
#error "libtrainprof_mpi is written for Open MPI (pointer handles, ompi_* predefined objects)"
#endif

#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

#pragma GCC visibility push(hidden)

/* PMPI_<name> (or the next MPI_<name>) looked up once and cached in *cache; NULL when the
 * process has none (warned about once). */
void *pmpi_resolve(_Atomic(void *) *cache, const char *name);

/* Declares `var`, the PMPI twin of MPI_<name> (NULL when there is none), resolved once and
 * cached in a function-local static. The cache costs one relaxed pointer load: the address it
 * holds never changes. __typeof__ only reads PMPI_<name>'s declaration from mpi.h; it makes
 * no reference to the symbol. */
#define PMPI_DECL(var, name)                                                              \
    static _Atomic(void *) var##_cache_;                                                  \
    void *var##_p_ = atomic_load_explicit(&var##_cache_, memory_order_relaxed);          \
    if (UNLIKELY(!var##_p_)) var##_p_ = pmpi_resolve(&var##_cache_, "PMPI_" #name);       \
    __typeof__(&PMPI_##name) var = (__typeof__(&PMPI_##name))var##_p_
#define PMPI_GET(name) PMPI_DECL(fn, name)

/* Open MPI's predefined handles, looked up at MPI_Init (see the top of mpi_pmpi.c). */
typedef struct {
    MPI_Comm world, self, null;
    MPI_Datatype byte, dbl, dt_null;
    MPI_Op sum, min, max;
    MPI_Errhandler errors_return;
    /* Shared request objects: Open MPI's ob1 PML returns &ompi_request_empty from an Isend it
     * completed inline, to any number of callers at once, so such a handle names no single
     * operation (and MPI_REQUEST_NULL none at all). */
    MPI_Request req_empty, req_null;
    int world_rank, world_size;
} mpi_handles;
extern mpi_handles H;

/* 1 between a successful MPI_Init (with Open MPI's symbols found) and MPI_Finalize. Its
 * release store publishes H and the communicator table's first entries. */
extern _Atomic int g_active;

#define CAPTURE() \
    (TPROF__ON() && atomic_load_explicit(&g_active, memory_order_acquire))

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint32_t peer_of(int r) { return r >= 0 ? (uint32_t)r : TPROF_COMM_NO_PEER; }

typedef struct comm_info {
    uint64_t id;
    uint32_t nranks, rank;
    struct comm_slot *slot; /* NULL for a fallback id */
} comm_info;

/* ---- communicators (mpi_track.c) */
/* The hot path's lookup: the table, else learn it, else a fallback id (counted). Lock-free
 * on a hit. */
void comm_get(MPI_Comm c, comm_info *ci);
/* A wrapped constructor returned newcomm: compute its id (local group calls only). */
void comm_created(MPI_Comm newcomm);
/* A wrapped MPI_Comm_free or MPI_Comm_disconnect is about to release c. */
void comm_forget(MPI_Comm c);

/* ---- records */
/* A blocking operation that returned MPI_SUCCESS: its COMM_OP record on this thread. */
void op_done(const comm_info *ci, uint32_t op, uint64_t count, MPI_Datatype dt, int peer,
             int is_coll, uint64_t t0, uint64_t t1);
/* A nonblocking operation was started (PMPI returned MPI_SUCCESS and *request): entered in
 * the request table, or recorded at once when that is full or the handle is shared. */
void op_started(const comm_info *ci, uint32_t op, uint64_t count, MPI_Datatype dt, int peer,
                int is_coll, uint64_t t0, uint64_t t1, MPI_Request req);
/* The record of a Wait* call itself (op UNKNOWN under its MPI name). */
void wait_put(const char *name, int n, const int *idx, int nidx, uint64_t t0, uint64_t t1);

/* ---- requests */
extern _Atomic int g_req_used; /* some request was ever entered */
#define REQ_STACK 64 /* requests of one Waitall claimed without allocating */

/* The requests of one Wait or Test call, claimed before PMPI and settled after it. */
typedef struct claimset {
    int n; /* 0: nothing claimed (table unused, or no memory) */
    MPI_Request *old;
    int *idx;
    MPI_Request old_s[REQ_STACK];
    int idx_s[REQ_STACK];
} claimset;

/* The slot index of req, now CLAIMED, or -1 when it is not tracked. */
int req_claim(MPI_Request req);
/* After the PMPI call: `old` was the handle, `now` what the call left. */
void req_settle(int idx, MPI_Request old, MPI_Request now, uint64_t t1, uint32_t flags);
void claim_all(claimset *cs, int n, const MPI_Request *reqs);
void settle_all(claimset *cs, const MPI_Request *reqs, uint64_t t1);

/* ---- init and finalize: after a successful PMPI_Init* (provided: the thread level, -1
 * unknown), and before PMPI_Finalize */
void after_init(int provided);
void before_finalize(void);

#pragma GCC visibility pop

#endif /* TPROF_MPI_TRACK_H */
