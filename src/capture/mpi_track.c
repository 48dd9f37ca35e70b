/*
 * mpi_track.c — the bookkeeping behind libtrainprof_mpi.so's PMPI wrappers (mpi_pmpi.c, whose
 * opening comment is the engineer's description of both files): finding libmpi and the PMPI
 * functions, Open MPI's predefined handles, communicator ids and their table, the records,
 * the table of nonblocking requests, the MPI collectives hook, and what MPI_Init and
 * MPI_Finalize set up and tear down. The wrappers reach it through mpi_track.h.
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

#include "../core/config.h"
#include "mpi_pmpi.h"
#include "mpi_track.h"
#include "mapped.h"

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
void *pmpi_resolve(_Atomic(void *) *cache, const char *name) {
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


/* ------------------------------------------------------------------ state */

mpi_handles H;
_Atomic int g_active;






/* count x the size of dt; 0 for a zero count or the null datatype (never looked up). */
static uint64_t type_bytes(MPI_Datatype dt, uint64_t count) {
    if (!count || dt == H.dt_null) return 0;
    PMPI_GET(Type_size_x);
    MPI_Count n = 0;
    if (fn && fn(dt, &n) == MPI_SUCCESS && n > 0) return count * (uint64_t)n;
    return 0;
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

void comm_forget(MPI_Comm c) {
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
void comm_get(MPI_Comm c, comm_info *ci) {
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
void comm_created(MPI_Comm newcomm) {
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
void op_done(const comm_info *ci, uint32_t op, uint64_t count, MPI_Datatype dt,
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

typedef struct req_slot {
    _Atomic uintptr_t key;
    /* written by the inserter between BUSY and the key's release store; read by the claimer
     * after its acquiring CAS */
    uint64_t start_ns, count, bytes, comm_id;
    uint32_t nranks, rank, op, peer, seq;
} req_slot;

static req_slot g_reqs[REQ_SLOTS];
_Atomic int g_req_used;              /* some request was ever entered */
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
int req_claim(MPI_Request req) {
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
void req_settle(int idx, MPI_Request old, MPI_Request now, uint64_t t1, uint32_t flags) {
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
void op_started(const comm_info *ci, uint32_t op, uint64_t count, MPI_Datatype dt,
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


void claim_all(claimset *cs, int n, const MPI_Request *reqs) {
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

void settle_all(claimset *cs, const MPI_Request *reqs, uint64_t t1) {
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
void wait_put(const char *name, int n, const int *idx, int nidx, uint64_t t0,
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

void after_init(int provided) {
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

void before_finalize(void) {
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
