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
#define _GNU_SOURCE /* RTLD_NEXT, RTLD_DEFAULT, dl_iterate_phdr */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#include "../core/config.h"
#include "trainprof.h"
#include "comm_ext.h"
#include "mpi_pmpi.h"
#include "mapped.h"

#ifndef OPEN_MPI
#error "libtrainprof_mpi is written for Open MPI (pointer handles, ompi_* predefined objects)"
#endif

#define WRAP __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ------------------------------------------------------------------ finding libmpi */

static _Atomic(void *) g_libmpi; /* a libmpi the process loaded outside the global scope */
static _Atomic int g_warned_missing;

static void *libmpi_handle(void) {
    void *h = atomic_load_explicit(&g_libmpi, memory_order_acquire);
    if (h) return h;
    char path[PATH_MAX];
    if (!tprof__mapped("libmpi.so", path, sizeof path, 1)) return NULL;
    h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD); /* only if already loaded; never closed */
    if (h) atomic_store_explicit(&g_libmpi, h, memory_order_release);
    return h;
}

/* The next definition of `name` after this library: libmpi's. */
static void *mpi_sym(const char *name) {
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) p = dlsym(RTLD_DEFAULT, name);
    if (!p) {
        void *h = libmpi_handle();
        if (h) p = dlsym(h, name);
    }
    return p;
}

/* PMPI_<x>; failing that, the next MPI_<x> (an MPI stub library for serial runs defines
 * MPI_* without PMPI_*: calls must still reach it). RTLD_NEXT only for the latter:
 * RTLD_DEFAULT would find this library's own wrapper first. */
static void *pmpi_resolve(_Atomic(void *) *cache, const char *name) {
    void *p = mpi_sym(name);
    if (!p) p = dlsym(RTLD_NEXT, name + 1);
    if (p) {
        atomic_store_explicit(cache, p, memory_order_relaxed);
    } else if (!atomic_exchange(&g_warned_missing, 1)) {
        fprintf(stderr, "trainprof: libtrainprof_mpi: no %s in this process (no MPI library, "
                        "or one without the profiling interface): MPI calls are not recorded, "
                        "and one with nothing to forward to returns MPI_ERR_OTHER\n",
                name);
    }
    return p;
}

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

/* ------------------------------------------------------------------ state */

/* Open MPI's predefined handles, looked up at MPI_Init (see the top of the file). */
static struct {
    MPI_Comm world, self, null;
    MPI_Datatype byte, dbl, dt_null;
    MPI_Op sum, min, max;
    MPI_Errhandler errors_return;
    /* Shared request objects: Open MPI's ob1 PML returns &ompi_request_empty from an Isend it
     * completed inline, to any number of callers at once, so such a handle names no single
     * operation (and MPI_REQUEST_NULL none at all). */
    MPI_Request req_empty, req_null;
    int world_rank, world_size;
} H;

/* 1 between a successful MPI_Init (with Open MPI's symbols found) and MPI_Finalize. Its
 * release store publishes H and the communicator table's first entries. */
static _Atomic int g_active;

#define CAPTURE() \
    (TPROF__ON() && atomic_load_explicit(&g_active, memory_order_acquire))

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint32_t peer_of(int r) { return r >= 0 ? (uint32_t)r : TPROF_COMM_NO_PEER; }

/* count x the size of dt; 0 for a zero count or the null datatype (never looked up). */
static uint64_t type_bytes(MPI_Datatype dt, uint64_t count) {
    if (!count || dt == H.dt_null) return 0;
    PMPI_GET(Type_size_x);
    MPI_Count n = 0;
    if (fn && fn(dt, &n) == MPI_SUCCESS && n > 0) return count * (uint64_t)n;
    return 0;
}

static uint64_t sum_counts(const int *counts, int n) {
    uint64_t s = 0;
    if (counts)
        for (int i = 0; i < n; i++) s += counts[i] > 0 ? (uint64_t)counts[i] : 0;
    return s;
}

/* ------------------------------------------------------------------ communicator ids */

static uint64_t mix64(uint64_t z) { /* splitmix64's finaliser */
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* FNV-1a over the member count and the world ranks (4 little-endian bytes each). */
static uint64_t group_hash(const int *ranks, int n) {
    uint64_t h = 0xcbf29ce484222325ull;
    uint32_t v = (uint32_t)n;
    for (int b = 0; b < 4; b++) h = (h ^ ((v >> (8 * b)) & 0xFF)) * 0x100000001b3ull;
    for (int i = 0; i < n; i++) {
        v = (uint32_t)ranks[i];
        for (int b = 0; b < 4; b++) h = (h ^ ((v >> (8 * b)) & 0xFF)) * 0x100000001b3ull;
    }
    return h;
}

/* The member list's hash, before the ordinal; never 0 (0 marks a free ordinal slot). */
static uint64_t members_base(const int *l, int n, const int *r, int rn) {
    uint64_t h = mix64(group_hash(l, n) ^ 0x4d5049434f4d4d31ull /* "MPICOMM1" */);
    if (r) { /* an inter-communicator: both sides must agree, so order the two hashes */
        uint64_t a = h, b = mix64(group_hash(r, rn) ^ 0x4d5049434f4d4d31ull);
        if (a > b) { uint64_t t = a; a = b; b = t; }
        h = mix64(a ^ mix64(b ^ 0x494e544552ull /* "INTER" */));
    }
    return h ? h : 1;
}

static uint64_t id_of(uint64_t base, uint32_t ordinal) {
    uint64_t id = mix64(base ^ ((uint64_t)ordinal * 0x9E3779B97F4A7C15ull));
    return id ? id : 1;
}

uint64_t tprof__mpi_comm_id(const int *world_ranks, int n, const int *remote_ranks, int rn,
                            uint32_t ordinal) {
    if (!world_ranks || n < 0) n = 0;
    if (rn < 0) rn = 0;
    return id_of(members_base(world_ranks, n, remote_ranks, rn), ordinal);
}

/* The table: handle -> id, size, rank, collective sequence. Open addressing with linear
 * probing; writers hold g_comm_lock (creation and free are rare), readers take no lock: the
 * key's release store publishes the fields, and a slot is only rewritten for a new
 * communicator, which no reader can hold yet. Deleted slots become tombstones, reused by the
 * next insertion, so probe chains stay short. */
#define COMM_SLOTS 4096u
#define COMM_DEFAULT_MAX 3072u /* live communicators; at most 3/4 of the slots */
#define KEY_EMPTY ((uintptr_t)0)
#define KEY_TOMB ((uintptr_t)1)

typedef struct comm_slot {
    _Atomic uintptr_t key;
    _Atomic uint64_t id;
    _Atomic uint64_t shape; /* nranks << 32 | rank */
    _Atomic uint32_t seq;   /* next collective's sequence number */
} comm_slot;

typedef struct comm_info {
    uint64_t id;
    uint32_t nranks, rank;
    comm_slot *slot; /* NULL for a fallback id */
} comm_info;

static comm_slot g_comms[COMM_SLOTS];
static pthread_mutex_t g_comm_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t g_comm_live;               /* under the lock */
static uint32_t g_comm_max = COMM_DEFAULT_MAX; /* set at MPI_Init, before any insertion */
static _Atomic int g_comm_full;            /* the last insertion found no room */
static _Atomic uint64_t g_comms_over;      /* communicators created while the table was full */
static _Atomic uint64_t g_ops_fallback;    /* operations recorded with a fallback id */

/* Ordinals: member-list hash -> communicators created with that list so far (locked). */
#define ORD_SLOTS 4096u
static struct { uint64_t base; uint32_t next; } g_ord[ORD_SLOTS];

static inline size_t ptr_slot(uintptr_t k, size_t mask) {
    return (size_t)(((uint64_t)k * 0x9E3779B97F4A7C15ull) >> 40) & mask;
}

static uint32_t ordinal_next(uint64_t base) { /* caller holds g_comm_lock */
    size_t h = (size_t)mix64(base) & (ORD_SLOTS - 1);
    for (size_t i = 0; i < ORD_SLOTS; i++) {
        size_t j = (h + i) & (ORD_SLOTS - 1);
        if (g_ord[j].base == base) return g_ord[j].next++;
        if (!g_ord[j].base) {
            g_ord[j].base = base;
            g_ord[j].next = 1;
            return 0;
        }
    }
    return TPROF_MPI_ORDINAL_FULL;
}

static int comm_find(MPI_Comm c, comm_info *ci) {
    uintptr_t k = (uintptr_t)c;
    if (k <= KEY_TOMB) return 0;
    size_t h = ptr_slot(k, COMM_SLOTS - 1);
    for (size_t i = 0; i < COMM_SLOTS; i++) {
        comm_slot *s = &g_comms[(h + i) & (COMM_SLOTS - 1)];
        uintptr_t v = atomic_load_explicit(&s->key, memory_order_acquire);
        if (v == k) {
            uint64_t shape = atomic_load_explicit(&s->shape, memory_order_relaxed);
            ci->id = atomic_load_explicit(&s->id, memory_order_relaxed);
            ci->nranks = (uint32_t)(shape >> 32);
            ci->rank = (uint32_t)shape;
            ci->slot = s;
            return 1;
        }
        if (v == KEY_EMPTY) return 0;
    }
    return 0;
}

/* Inserts or refreshes c (caller holds g_comm_lock). NULL when the table is at its bound. */
static comm_slot *comm_put(MPI_Comm c, uint64_t id, uint32_t nranks, uint32_t rank) {
    uintptr_t k = (uintptr_t)c;
    size_t h = ptr_slot(k, COMM_SLOTS - 1);
    comm_slot *free_slot = NULL, *found = NULL;
    for (size_t i = 0; i < COMM_SLOTS; i++) {
        comm_slot *s = &g_comms[(h + i) & (COMM_SLOTS - 1)];
        uintptr_t v = atomic_load_explicit(&s->key, memory_order_relaxed);
        if (v == k) { found = s; break; }
        if (v == KEY_TOMB && !free_slot) free_slot = s;
        if (v == KEY_EMPTY) {
            if (!free_slot) free_slot = s;
            break;
        }
    }
    comm_slot *s = found;
    if (s) {
        /* a handle reused by a new communicator (the old one was freed behind our back) */
        atomic_store_explicit(&s->key, KEY_TOMB, memory_order_relaxed);
    } else {
        if (g_comm_live >= g_comm_max || !free_slot) return NULL;
        s = free_slot;
        g_comm_live++;
    }
    atomic_store_explicit(&s->id, id, memory_order_relaxed);
    atomic_store_explicit(&s->shape, (uint64_t)nranks << 32 | rank, memory_order_relaxed);
    atomic_store_explicit(&s->seq, 0, memory_order_relaxed);
    atomic_store_explicit(&s->key, k, memory_order_release);
    return s;
}

static void comm_forget(MPI_Comm c) {
    uintptr_t k = (uintptr_t)c;
    if (k <= KEY_TOMB) return;
    pthread_mutex_lock(&g_comm_lock);
    size_t h = ptr_slot(k, COMM_SLOTS - 1);
    for (size_t i = 0; i < COMM_SLOTS; i++) {
        comm_slot *s = &g_comms[(h + i) & (COMM_SLOTS - 1)];
        uintptr_t v = atomic_load_explicit(&s->key, memory_order_relaxed);
        if (v == k) {
            atomic_store_explicit(&s->key, KEY_TOMB, memory_order_release);
            g_comm_live--;
            atomic_store_explicit(&g_comm_full, 0, memory_order_relaxed);
            break;
        }
        if (v == KEY_EMPTY) break;
    }
    pthread_mutex_unlock(&g_comm_lock);
}


/* World ranks of the members of group g in rank order (malloc'ed, *n entries), or NULL. */
static int *world_ranks_of(MPI_Group g, MPI_Group world_group, int *n) {
    PMPI_DECL(group_size, Group_size);
    PMPI_DECL(translate, Group_translate_ranks);
    int sz = 0;
    if (!group_size || !translate || group_size(g, &sz) != MPI_SUCCESS || sz < 0) return NULL;
    int *in = malloc((size_t)(sz ? sz : 1) * sizeof *in);
    int *out = malloc((size_t)(sz ? sz : 1) * sizeof *out);
    if (in && out) {
        for (int i = 0; i < sz; i++) in[i] = i;
        if (sz && translate(g, sz, in, world_group, out) != MPI_SUCCESS) {
            free(out);
            out = NULL;
        }
    } else {
        free(out);
        out = NULL;
    }
    free(in);
    *n = sz;
    return out;
}

/* c's member-list hash (before the ordinal), size and rank, from local calls only. */
static int comm_shape(MPI_Comm c, uint64_t *base, uint32_t *nranks, uint32_t *rank) {
    PMPI_DECL(comm_size, Comm_size);
    PMPI_DECL(comm_rank, Comm_rank);
    PMPI_DECL(comm_group, Comm_group);
    PMPI_DECL(remote_group, Comm_remote_group);
    PMPI_DECL(test_inter, Comm_test_inter);
    PMPI_DECL(group_free, Group_free);
    if (!comm_size || !comm_rank || !comm_group || !remote_group || !test_inter || !group_free)
        return 0;
    int sz = 0, rk = 0, inter = 0;
    if (comm_size(c, &sz) != MPI_SUCCESS || comm_rank(c, &rk) != MPI_SUCCESS || sz < 0 ||
        rk < 0)
        return 0;
    if (test_inter(c, &inter) != MPI_SUCCESS) inter = 0;
    MPI_Group wg, lg, rg;
    if (comm_group(H.world, &wg) != MPI_SUCCESS) return 0;
    int *l = NULL, *r = NULL, ln = 0, rn = 0, ok = 0;
    if (comm_group(c, &lg) == MPI_SUCCESS) {
        l = world_ranks_of(lg, wg, &ln);
        group_free(&lg);
    }
    if (l && inter) {
        if (remote_group(c, &rg) == MPI_SUCCESS) {
            r = world_ranks_of(rg, wg, &rn);
            group_free(&rg);
        }
        ok = r != NULL;
    } else {
        ok = l != NULL;
    }
    if (ok) *base = members_base(l, ln, r, rn);
    free(l);
    free(r);
    group_free(&wg);
    *nranks = (uint32_t)sz;
    *rank = (uint32_t)rk;
    return ok;
}

/* Learns c: computes its id and enters it in the table. `created`: called from a wrapped
 * constructor (the ordinal counts it) rather than on first use. 0 when it could not be
 * entered (table at its bound, or an MPI or allocation failure). */
static int comm_learn(MPI_Comm c, int created, comm_info *ci) {
    uint64_t base;
    uint32_t nr, rk;
    if (!comm_shape(c, &base, &nr, &rk)) return 0;
    pthread_mutex_lock(&g_comm_lock);
    comm_slot *s = NULL;
    if (!created && comm_find(c, ci)) { /* another thread learned it meanwhile */
        pthread_mutex_unlock(&g_comm_lock);
        return 1;
    }
    uint32_t ord = created ? ordinal_next(base) : TPROF_MPI_ORDINAL_LAZY;
    uint64_t id = id_of(base, ord);
    s = comm_put(c, id, nr, rk);
    pthread_mutex_unlock(&g_comm_lock);
    if (!s) {
        atomic_store_explicit(&g_comm_full, 1, memory_order_relaxed);
        if (created) atomic_fetch_add_explicit(&g_comms_over, 1, memory_order_relaxed);
        return 0;
    }
    ci->id = id;
    ci->nranks = nr;
    ci->rank = rk;
    ci->slot = s;
    return 1;
}

/* The hot path's lookup: the table, else learn it, else a fallback id (counted). */
static void comm_get(MPI_Comm c, comm_info *ci) {
    if (LIKELY(comm_find(c, ci))) return;
    if (!atomic_load_explicit(&g_comm_full, memory_order_relaxed) && comm_learn(c, 0, ci))
        return;
    PMPI_DECL(comm_size, Comm_size);
    PMPI_DECL(comm_rank, Comm_rank);
    int sz = 0, rk = 0;
    if (!comm_size || comm_size(c, &sz) != MPI_SUCCESS || sz < 0) sz = 0;
    if (!comm_rank || comm_rank(c, &rk) != MPI_SUCCESS || rk < 0) rk = 0;
    ci->nranks = (uint32_t)sz;
    ci->rank = (uint32_t)rk;
    /* same on every member that overflowed, and apart by size: better than one id for all */
    ci->id = id_of(0x4f564552464c4f57ull /* "OVERFLOW" */ ^ (uint64_t)sz, TPROF_MPI_ORDINAL_FULL);
    ci->slot = NULL;
    atomic_fetch_add_explicit(&g_ops_fallback, 1, memory_order_relaxed);
}

/* A wrapped constructor returned newcomm. */
static void comm_created(MPI_Comm newcomm) {
    if (!CAPTURE() || newcomm == H.null) return;
    comm_info ci;
    comm_learn(newcomm, 1, &ci);
}

/* The k-th collective on this communicator (from 0). A plain load and store, not a
 * read-modify-write: MPI requires the collectives of one communicator to be ordered, so two
 * threads never issue them at once on it, and the count stays off the locked-instruction
 * path. */
static uint32_t seq_next(const comm_info *ci) {
    if (!ci->slot) return 0;
    uint32_t s = atomic_load_explicit(&ci->slot->seq, memory_order_relaxed);
    atomic_store_explicit(&ci->slot->seq, s + 1, memory_order_relaxed);
    return s;
}

/* ------------------------------------------------------------------ records */

static void put(uint32_t op, const char *name, uint64_t comm_id, uint32_t nranks,
                uint32_t rank, uint64_t count, uint64_t bytes, uint32_t peer, uint32_t seq,
                uint64_t t0, uint64_t t1, uint32_t flags) {
    tprof_pl_comm pl = {.end_ns = t1,
                        .bytes = bytes,
                        .count = count,
                        .comm_hash = comm_id,
                        .seq = seq,
                        .nranks = nranks,
                        .rank = rank,
                        .op = op,
                        .peer = peer,
                        .flags = flags,
                        .source = TPROF_COMM_SRC_MPI};
    tprof__comm_record(name ? name : tprof__comm_op_name(op), t0, &pl);
}

/* A blocking operation that returned MPI_SUCCESS. */
static void op_done(const comm_info *ci, uint32_t op, uint64_t count, MPI_Datatype dt,
                    int peer, int is_coll, uint64_t t0, uint64_t t1) {
    put(op, NULL, ci->id, ci->nranks, ci->rank, count, type_bytes(dt, count), peer_of(peer),
        is_coll ? seq_next(ci) : 0, t0, t1, 0);
}

/* ------------------------------------------------------------------ requests */

/* Nonblocking operations in flight, keyed by request handle. Lock-free open addressing over a
 * short probe window: an insertion claims a free slot with a CAS (EMPTY or TOMB -> BUSY),
 * fills it and publishes the key; a Wait or Test claims the request's slot before calling
 * PMPI (key -> CLAIMED), so the slot cannot be handed to a new request that reuses the handle
 * once MPI frees it, and afterwards either records and frees the slot (completed: the handle
 * became MPI_REQUEST_NULL) or puts the key back (not completed). MPI forbids two threads to
 * complete the same request, so a key has one claimer at a time. A full window means the
 * operation is recorded at once with the interval of its initiation, flagged unfinished.
 * A handle shared by several operations (H.req_empty) never enters the table: the operation
 * completed inside its initiating call and is recorded there. */
#define REQ_SLOTS 4096u
#define REQ_PROBE 64u
#define KEY_BUSY ((uintptr_t)2)
#define KEY_CLAIMED ((uintptr_t)3)
#define REQ_STACK 64 /* requests of one Waitall claimed without allocating */

typedef struct req_slot {
    _Atomic uintptr_t key;
    /* written by the inserter between BUSY and the key's release store; read by the claimer
     * after its acquiring CAS */
    uint64_t start_ns, count, bytes, comm_id;
    uint32_t nranks, rank, op, peer, seq;
} req_slot;

static req_slot g_reqs[REQ_SLOTS];
static _Atomic int g_req_used;              /* some request was ever entered */
static _Atomic uint64_t g_req_untracked;    /* window full: recorded at initiation */
static _Atomic uint64_t g_req_unfinished;   /* freed or still open at MPI_Finalize */

static int req_insert(MPI_Request req, uint64_t t0, uint32_t op, const comm_info *ci,
                      uint64_t count, uint64_t bytes, uint32_t peer, uint32_t seq) {
    uintptr_t k = (uintptr_t)req;
    if (k <= KEY_CLAIMED) return 0;
    size_t h = ptr_slot(k, REQ_SLOTS - 1);
    for (size_t i = 0; i < REQ_PROBE; i++) {
        req_slot *s = &g_reqs[(h + i) & (REQ_SLOTS - 1)];
        uintptr_t v = atomic_load_explicit(&s->key, memory_order_relaxed);
        /* a stale entry of the same handle (completed behind our back) is simply replaced */
        if (v != KEY_EMPTY && v != KEY_TOMB && v != k) continue;
        if (!atomic_compare_exchange_strong_explicit(&s->key, &v, KEY_BUSY,
                                                     memory_order_acquire,
                                                     memory_order_relaxed))
            continue;
        s->start_ns = t0;
        s->count = count;
        s->bytes = bytes;
        s->comm_id = ci->id;
        s->nranks = ci->nranks;
        s->rank = ci->rank;
        s->op = op;
        s->peer = peer;
        s->seq = seq;
        atomic_store_explicit(&s->key, k, memory_order_release);
        if (!atomic_load_explicit(&g_req_used, memory_order_relaxed))
            atomic_store_explicit(&g_req_used, 1, memory_order_relaxed);
        return 1;
    }
    return 0;
}

/* The slot index of req, now CLAIMED, or -1 when it is not tracked. */
static int req_claim(MPI_Request req) {
    uintptr_t k = (uintptr_t)req;
    if (k <= KEY_CLAIMED || req == H.req_empty || req == H.req_null) return -1;
    size_t h = ptr_slot(k, REQ_SLOTS - 1);
    for (size_t i = 0; i < REQ_PROBE; i++) {
        size_t j = (h + i) & (REQ_SLOTS - 1);
        uintptr_t v = atomic_load_explicit(&g_reqs[j].key, memory_order_relaxed);
        if (v == k) {
            if (atomic_compare_exchange_strong_explicit(&g_reqs[j].key, &v, KEY_CLAIMED,
                                                        memory_order_acquire,
                                                        memory_order_relaxed))
                return (int)j;
            return -1;
        }
        if (v == KEY_EMPTY) return -1;
    }
    return -1;
}

static void req_emit(const req_slot *s, uint64_t t1, uint32_t flags) {
    put(s->op, NULL, s->comm_id, s->nranks, s->rank, s->count, s->bytes, s->peer, s->seq,
        s->start_ns, t1, flags | TPROF_COMM_F_NONBLOCKING);
}

/* After the PMPI call: `old` was the handle, `now` what the call left. A completed
 * nonpersistent request is set to MPI_REQUEST_NULL by MPI, so a changed handle means done. */
static void req_settle(int idx, MPI_Request old, MPI_Request now, uint64_t t1, uint32_t flags) {
    if (idx < 0) return;
    req_slot *s = &g_reqs[idx];
    if (now != old) {
        req_emit(s, t1, flags);
        if (flags & TPROF_COMM_F_UNFINISHED)
            atomic_fetch_add_explicit(&g_req_unfinished, 1, memory_order_relaxed);
        atomic_store_explicit(&s->key, KEY_TOMB, memory_order_release);
    } else {
        atomic_store_explicit(&s->key, (uintptr_t)old, memory_order_release);
    }
}

/* A nonblocking operation was started (PMPI returned MPI_SUCCESS and *request). */
static void op_started(const comm_info *ci, uint32_t op, uint64_t count, MPI_Datatype dt,
                       int peer, int is_coll, uint64_t t0, uint64_t t1, MPI_Request req) {
    uint64_t bytes = type_bytes(dt, count);
    uint32_t seq = is_coll ? seq_next(ci) : 0;
    if (req == H.req_empty || req == H.req_null) { /* done within the call (see H) */
        put(op, NULL, ci->id, ci->nranks, ci->rank, count, bytes, peer_of(peer), seq, t0, t1, 0);
        return;
    }
    if (req_insert(req, t0, op, ci, count, bytes, peer_of(peer), seq)) return;
    atomic_fetch_add_explicit(&g_req_untracked, 1, memory_order_relaxed);
    put(op, NULL, ci->id, ci->nranks, ci->rank, count, bytes, peer_of(peer), seq, t0, t1,
        TPROF_COMM_F_UNFINISHED);
}

/* The requests of one Wait or Test call, claimed before PMPI and settled after it. */
typedef struct claimset {
    int n; /* 0: nothing claimed (table unused, or no memory) */
    MPI_Request *old;
    int *idx;
    MPI_Request old_s[REQ_STACK];
    int idx_s[REQ_STACK];
} claimset;

static void claim_all(claimset *cs, int n, const MPI_Request *reqs) {
    cs->n = 0;
    if (n <= 0 || !reqs || !atomic_load_explicit(&g_req_used, memory_order_relaxed)) return;
    cs->old = cs->old_s;
    cs->idx = cs->idx_s;
    if (n > REQ_STACK) {
        cs->old = malloc((size_t)n * sizeof *cs->old);
        cs->idx = malloc((size_t)n * sizeof *cs->idx);
        if (!cs->old || !cs->idx) { /* not tracked this time; the call itself goes on */
            free(cs->old);
            free(cs->idx);
            return;
        }
    }
    for (int i = 0; i < n; i++) {
        cs->old[i] = reqs[i];
        cs->idx[i] = req_claim(reqs[i]);
    }
    cs->n = n;
}

static void settle_all(claimset *cs, const MPI_Request *reqs, uint64_t t1) {
    for (int i = 0; i < cs->n; i++) req_settle(cs->idx[i], cs->old[i], reqs[i], t1, 0);
    if (cs->n > REQ_STACK) {
        free(cs->old);
        free(cs->idx);
    }
    cs->n = 0;
}

/* The record of a Wait* call itself: op UNKNOWN under its MPI name, count = the requests
 * passed, bytes 0 (the operations' own records carry the bytes), the communicator of the
 * tracked requests when they share one. */
static void wait_put(const char *name, int n, const int *idx, int nidx, uint64_t t0,
                     uint64_t t1) {
    uint64_t id = 0;
    uint32_t nranks = 0, rank = 0;
    int first = 1;
    for (int i = 0; i < nidx; i++) {
        if (idx[i] < 0) continue;
        const req_slot *s = &g_reqs[idx[i]];
        if (first) {
            id = s->comm_id;
            nranks = s->nranks;
            rank = s->rank;
            first = 0;
        } else if (s->comm_id != id) {
            id = 0;
            nranks = rank = 0;
            break;
        }
    }
    put(TPROF_COMM_UNKNOWN, name, id, nranks, rank, n > 0 ? (uint64_t)n : 0, 0,
        TPROF_COMM_NO_PEER, 0, t0, t1, 0);
}

/* Records what is still open (MPI_Finalize): flagged unfinished, ending now. */
static void req_sweep(uint64_t t) {
    if (!atomic_load_explicit(&g_req_used, memory_order_relaxed)) return;
    for (size_t i = 0; i < REQ_SLOTS; i++) {
        uintptr_t v = atomic_load_explicit(&g_reqs[i].key, memory_order_relaxed);
        if (v <= KEY_CLAIMED) continue;
        if (!atomic_compare_exchange_strong_explicit(&g_reqs[i].key, &v, KEY_CLAIMED,
                                                     memory_order_acquire,
                                                     memory_order_relaxed))
            continue;
        req_emit(&g_reqs[i], t, TPROF_COMM_F_UNFINISHED);
        atomic_fetch_add_explicit(&g_req_unfinished, 1, memory_order_relaxed);
        atomic_store_explicit(&g_reqs[i].key, KEY_TOMB, memory_order_release);
    }
}

/* ------------------------------------------------------------------ the collectives hook */

static MPI_Comm g_hook_comm;     /* PMPI_Comm_dup of MPI_COMM_WORLD; set at MPI_Init */
static int g_hook_have_comm;
static _Atomic int g_hook_live;  /* 0 after MPI_Finalize began */

static int hook_all_gather(void *ctx, const void *send, size_t bytes, void *recv) {
    if (!atomic_load_explicit(&g_hook_live, memory_order_acquire) || bytes > INT_MAX)
        return 1;
    PMPI_GET(Allgather);
    if (!fn) return 1;
    const char *s = send, *r = recv;
    size_t total = bytes * (size_t)H.world_size;
    const void *sb = send;
    void *tmp = NULL;
    if (bytes && s < r + total && r < s + bytes) { /* MPI forbids aliased buffers */
        if (s == r + (size_t)H.world_rank * bytes) {
            sb = MPI_IN_PLACE;
        } else {
            tmp = malloc(bytes);
            if (!tmp) return 1;
            memcpy(tmp, send, bytes);
            sb = tmp;
        }
    }
    int rc = fn(sb, (int)bytes, H.byte, recv, (int)bytes, H.byte, (MPI_Comm)ctx);
    free(tmp);
    return rc != MPI_SUCCESS;
}

static int hook_all_reduce(void *ctx, double *values, size_t count, tprof_reduce_op op) {
    if (!atomic_load_explicit(&g_hook_live, memory_order_acquire) || count > INT_MAX)
        return 1;
    PMPI_GET(Allreduce);
    if (!fn) return 1;
    MPI_Op o = op == TPROF_REDUCE_MIN ? H.min : op == TPROF_REDUCE_MAX ? H.max : H.sum;
    return fn(MPI_IN_PLACE, values, (int)count, H.dbl, o, (MPI_Comm)ctx) != MPI_SUCCESS;
}

static int hook_barrier(void *ctx) {
    if (!atomic_load_explicit(&g_hook_live, memory_order_acquire)) return 1;
    PMPI_GET(Barrier);
    return !fn || fn((MPI_Comm)ctx) != MPI_SUCCESS;
}

static int hook_is_ours(void) {
    tprof_collectives cur;
    tprof_get_collectives(&cur);
    return g_hook_have_comm && cur.all_gather == hook_all_gather &&
           cur.ctx == (void *)g_hook_comm;
}

/* Every rank duplicates the world (a collective call, so never conditional on anything that
 * may differ between ranks); the registration itself is local. */
static void hook_setup(void) {
    const char *e = tprof__env(TPROF__OPT_MPI_HOOK);
    if (e && !strcmp(e, "0")) return; /* job-wide switch: the same on every rank */
    PMPI_DECL(dup, Comm_dup);
    PMPI_DECL(set_eh, Comm_set_errhandler);
    if (!dup || dup(H.world, &g_hook_comm) != MPI_SUCCESS) return;
    g_hook_have_comm = 1;
    /* a failing timers exchange must return an error to the timers, not abort the job */
    if (set_eh && H.errors_return) set_eh(g_hook_comm, H.errors_return);
    atomic_store_explicit(&g_hook_live, 1, memory_order_release);
    tprof_collectives cur;
    tprof_get_collectives(&cur);
    if (cur.world_size > 1 || cur.ctx) return; /* the program registered its own */
    tprof_collectives c = {.struct_size = sizeof c,
                           .ctx = (void *)g_hook_comm,
                           .rank = H.world_rank,
                           .world_size = H.world_size,
                           .all_gather = hook_all_gather,
                           .all_reduce = hook_all_reduce,
                           .barrier = hook_barrier};
    tprof_set_collectives(&c);
}

static void hook_teardown(void) {
    if (!g_hook_have_comm) return;
    if (hook_is_ours()) tprof_set_collectives(NULL);
    atomic_store_explicit(&g_hook_live, 0, memory_order_release);
    PMPI_DECL(comm_free, Comm_free);
    if (comm_free) comm_free(&g_hook_comm);
    g_hook_have_comm = 0;
}

/* ------------------------------------------------------------------ init and finalize */

/* A predefined object's address as the program sees it. RTLD_DEFAULT, not RTLD_NEXT: an
 * executable that names MPI_COMM_WORLD gets a copy relocation, so the canonical object (the
 * one libmpi's own code uses) is the executable's copy, which RTLD_NEXT would skip. */
static void *data_sym(const char *name) {
    void *p = dlsym(RTLD_DEFAULT, name);
    if (!p) {
        void *h = libmpi_handle();
        if (h) p = dlsym(h, name);
    }
    return p;
}

static void after_init(int provided) {
    const char *e = tprof__env(TPROF__OPT_MPI);
    if (e && !strcmp(e, "0")) {
        tprof__capability_ext("mpi", "off (TRAINPROF_MPI=0)");
        return;
    }
    H.world = (MPI_Comm)data_sym("ompi_mpi_comm_world");
    H.self = (MPI_Comm)data_sym("ompi_mpi_comm_self");
    H.null = (MPI_Comm)data_sym("ompi_mpi_comm_null");
    H.byte = (MPI_Datatype)data_sym("ompi_mpi_byte");
    H.dbl = (MPI_Datatype)data_sym("ompi_mpi_double");
    H.dt_null = (MPI_Datatype)data_sym("ompi_mpi_datatype_null");
    H.sum = (MPI_Op)data_sym("ompi_mpi_op_sum");
    H.min = (MPI_Op)data_sym("ompi_mpi_op_min");
    H.max = (MPI_Op)data_sym("ompi_mpi_op_max");
    H.errors_return = (MPI_Errhandler)data_sym("ompi_mpi_errors_return");
    H.req_empty = (MPI_Request)data_sym("ompi_request_empty");
    H.req_null = (MPI_Request)data_sym("ompi_request_null");
    if (!H.world || !H.self || !H.null || !H.byte || !H.dbl || !H.dt_null || !H.sum ||
        !H.min || !H.max) {
        /* MPICH and its derivatives: integer handles; forward everything untouched */
        tprof__capability_ext("mpi", "unavailable: the MPI library is not Open MPI "
                                     "(libtrainprof_mpi forwards calls without recording)");
        return;
    }
    PMPI_DECL(comm_rank, Comm_rank);
    PMPI_DECL(comm_size, Comm_size);
    if (!comm_rank || !comm_size || comm_rank(H.world, &H.world_rank) != MPI_SUCCESS ||
        comm_size(H.world, &H.world_size) != MPI_SUCCESS || H.world_size < 1)
        return;
    const char *m = tprof__env(TPROF__OPT_MPI_MAX_COMMS);
    if (m && *m) {
        long v = strtol(m, NULL, 10);
        if (v >= 2 && v <= (long)(COMM_SLOTS / 4 * 3)) g_comm_max = (uint32_t)v;
    }
    /* the world first (ordinal 0 of its member list), then self, on every rank alike */
    comm_info ci;
    comm_learn(H.world, 1, &ci);
    comm_learn(H.self, 1, &ci);

    /* rank identity from MPI itself (a singleton has no launcher variables); these calls
     * start the session when the process records (TRAINPROF_DIR), and fail quietly if not */
    char r[16], w[16];
    snprintf(r, sizeof r, "%d", H.world_rank);
    snprintf(w, sizeof w, "%d", H.world_size);
    if (tprof_set_metadata("rank", r) == TPROF_OK) {
        tprof_set_metadata("world_size", w);
        tprof_set_metadata("rank_source", "mpi");
    }
    char ver[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int vlen = 0;
    PMPI_DECL(get_version, Get_library_version);
    if (get_version && get_version(ver, &vlen) == MPI_SUCCESS) {
        ver[vlen > 0 && vlen < (int)sizeof ver ? vlen : (int)sizeof ver - 1] = 0;
        char *cut = strpbrk(ver, ",\n");
        if (cut) *cut = 0;
    }
    static const char *const levels[] = {"single", "funneled", "serialized", "multiple"};
    char st[256];
    snprintf(st, sizeof st, "PMPI wrappers: %.96s (built against Open MPI %d.%d.%d headers), "
             "thread level %s, %d ranks",
             ver[0] ? ver : "Open MPI", OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION,
             OMPI_RELEASE_VERSION,
             provided >= 0 && provided <= 3 ? levels[provided] : "unknown", H.world_size);
    tprof__capability_ext("mpi", st);

    hook_setup();
    atomic_store_explicit(&g_active, 1, memory_order_release);
}

static void before_finalize(void) {
    if (!atomic_load_explicit(&g_active, memory_order_acquire)) return;
    if (TPROF__ON()) req_sweep(now_ns());
    hook_teardown();
    atomic_store_explicit(&g_active, 0, memory_order_release);
    static const struct { const char *key; _Atomic uint64_t *v; } counters[] = {
        {"mpi.comms_over_limit", &g_comms_over},
        {"mpi.ops_fallback_comm_id", &g_ops_fallback},
        {"mpi.requests_untracked", &g_req_untracked},
        {"mpi.requests_unfinished", &g_req_unfinished}};
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++) {
        char v[24];
        snprintf(v, sizeof v, "%llu",
                 (unsigned long long)atomic_load_explicit(counters[i].v, memory_order_relaxed));
        tprof_set_metadata(counters[i].key, v);
    }
}

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
