/*
 * clocks.c — collectives matched across ranks, and per-host clock offsets (clocks.h).
 */
#define _GNU_SOURCE
#include "analysis/clocks.h"
#include "analysis/alloc.h"
#include "analysis/stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analysis/comm.h"
#include "analysis/hash.h"
#include "analysis/spans.h"
#include "format/format.h"
#include "trainprof.h"

/* median of v[0..n) (sorted in place); lower middle for even n */
static int64_t med_i64(int64_t *v, size_t n) {
    qsort(v, n, sizeof *v, tp_cmp_i64);
    return v[(n - 1) / 2];
}

static int ends_agree(uint32_t op) {
    return op == TPROF_COMM_ALLREDUCE || op == TPROF_COMM_ALLGATHER ||
           op == TPROF_COMM_REDUCESCATTER || op == TPROF_COMM_ALLTOALL || op == TPROF_COMM_BARRIER;
}

static int cmp_rankp(const void *a, const void *b) {
    const tp_process *x = *(const tp_process *const *)a, *y = *(const tp_process *const *)b;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* 2000-01-01T00:00:00Z in ns since 1970 (946684800 s, POSIX time) */
#define RT_MIN_NS 946684800000000000LL
#define DAY_NS 86400000000000LL

const char *tp_clock_pair_problem(const tp_process *p, uint64_t now_rt) {
    uint64_t rt = p->hdr.start_realtime_ns, mono = p->hdr.start_mono_ns;
    if (!rt && !mono) return "realtime and monotonic are zero";
    if (!rt) return "realtime is zero";
    if (!mono) return "monotonic is zero";
    if (rt < (uint64_t)RT_MIN_NS) return "realtime before 2000-01-01";
    if (now_rt && rt > now_rt + (uint64_t)DAY_NS) return "realtime more than a day in the future";
    if (mono > p->end_mono) return "monotonic after the file's end";
    return NULL;
}

/* The process's first time: its first event, else its start pair's monotonic reading. */
static uint64_t first_time(const tp_process *p) {
    return p->first_ts ? p->first_ts : p->hdr.start_mono_ns;
}

void tp_clocks_free(tp_clocks *c) {
    free(c->proc_map_ns);
    free(c->proc_problem);
    free(c->rank);
    free(c->host_of);
    free(c->map_ns);
    free(c->hosts);
    free(c->coll);
    free(c->arr);
    for (size_t r = 0; c->span && c->owned && r < c->nranks; r++)
        if (c->owned[r]) free((void *)c->span[r]);
    free(c->span);
    free(c->owned);
    memset(c, 0, sizeof *c);
}

int64_t tp_arrival_start(const tp_clocks *c, const tp_arrival *x) {
    return tp_add_sat((int64_t)c->span[x->rank][x->op].start, c->map_ns[x->rank]);
}

int64_t tp_arrival_end(const tp_clocks *c, const tp_arrival *x) {
    return tp_add_sat((int64_t)c->span[x->rank][x->op].end, c->map_ns[x->rank]);
}

/* The ranks in rank order; the hosts, in order of their first rank; each host's pair (its
 * first rank file with a usable one) and the reference; each rank's clock mapped through its
 * host's pair, or, for a host without one, so that its first event falls on the reference's
 * first event. */
static int clocks_ranks(const tp_run *run, tp_clocks *c) {
    size_t nr = 0;
    for (size_t i = 0; i < run->nprocs; i++) nr += run->procs[i].role == TP_ROLE_RANK;
    if (nr > UINT32_MAX) return TPROF_ERR_NO_MEMORY; /* tp_arrival.rank is 32 bits */
    c->rank = tp_malloc((nr ? nr : 1) * sizeof *c->rank);
    c->host_of = tp_calloc(nr ? nr : 1, sizeof *c->host_of);
    c->map_ns = tp_calloc(nr ? nr : 1, sizeof *c->map_ns);
    c->hosts = tp_calloc(nr ? nr : 1, sizeof *c->hosts);
    if (!c->rank || !c->host_of || !c->map_ns || !c->hosts) return TPROF_ERR_NO_MEMORY;
    for (size_t i = 0; i < run->nprocs; i++)
        if (run->procs[i].role == TP_ROLE_RANK) c->rank[c->nranks++] = &run->procs[i];
    if (nr > 1) qsort(c->rank, nr, sizeof *c->rank, cmp_rankp);
    for (size_t r = 0; r < nr; r++) {
        const tp_process *p = c->rank[r];
        size_t h = 0;
        while (h < c->nhosts && strcmp(c->hosts[h].host, p->hdr.host)) h++;
        if (h == c->nhosts) c->hosts[c->nhosts++].host = p->hdr.host;
        c->host_of[r] = h;
        if (!c->hosts[h].pair_of && !c->proc_problem[p - run->procs]) c->hosts[h].pair_of = p;
    }
    c->ref = 0;
    while (c->ref < c->nhosts && !c->hosts[c->ref].pair_of) c->ref++;
    if (c->ref == c->nhosts) c->ref = 0; /* no usable pair at all: monotonic as it is */
    if (c->nhosts) c->hosts[c->ref].aligned = 1;
    /* the reference's first event, aligned */
    int64_t ref_first = 0;
    const tp_process *rp = c->hosts[c->ref].pair_of;
    for (size_t r = 0; r < nr && c->nhosts; r++)
        if (c->host_of[r] == c->ref) {
            const tp_process *p = c->rank[r];
            int64_t base = rp ? (int64_t)rp->hdr.start_realtime_ns - (int64_t)rp->hdr.start_mono_ns
                              : 0;
            ref_first = tp_add_sat((int64_t)first_time(p), base);
            break;
        }
    for (size_t r = 0; r < nr; r++) {
        const tp_host_clock *hc = &c->hosts[c->host_of[r]];
        if (hc->pair_of) {
            c->map_ns[r] = (int64_t)hc->pair_of->hdr.start_realtime_ns -
                           (int64_t)hc->pair_of->hdr.start_mono_ns;
            continue;
        }
        size_t first = r; /* the host's first rank */
        for (size_t k = 0; k < r; k++)
            if (c->host_of[k] == c->host_of[r]) { first = k; break; }
        c->map_ns[r] = c->host_of[r] == c->ref && !rp
                           ? 0
                           : tp_sub_sat(ref_first, (int64_t)first_time(c->rank[first]));
    }
    return TPROF_OK;
}

/* ------------------------------------------------------------------ matching */

/* A collective while the ranks' ops are grouped: its key (communicator, op, sequence
 * number), how many ranks arrived, the last rank counted + 1 (one arrival per rank: a rank's
 * first op of the key), and the slot its next arrival goes to (SIZE_MAX: seen on fewer than
 * two ranks, left out). */
typedef struct ckey {
    uint64_t hash;
    uint32_t op, seq;
    size_t n, last, at;
} ckey;

/* The keys met so far, in an open-addressing table of indices into keys (cap a power of
 * two, at most half full; SIZE_MAX: empty slot), placed under a key of the table's own
 * (hash.h: communicator ids come from files, and crafted ones, multiples of 2^32, piled up
 * under a multiplicative hash: 40,000 communicators took 3 times as long). */
typedef struct ckeys {
    ckey *keys;
    size_t nkeys, capkeys;
    size_t *slot;
    size_t cap;
    uint64_t key;
} ckeys;

static size_t key_slot(const ckeys *t, uint64_t hash, uint32_t op, uint32_t seq) {
    uint64_t h = tp_mix64(tp_mix64(hash ^ t->key) ^ ((uint64_t)op << 32 | seq));
    size_t i = (size_t)h & (t->cap - 1);
    while (t->slot[i] != SIZE_MAX) {
        const ckey *k = &t->keys[t->slot[i]];
        if (k->hash == hash && k->op == op && k->seq == seq) break;
        i = (i + 1) & (t->cap - 1);
    }
    return i;
}

/* (Re)builds the table over keys[0..nkeys) with room for at least `want` keys. */
static int keys_index(ckeys *t, size_t want) {
    size_t cap = 64;
    while (cap < 2 * want) cap *= 2;
    size_t *slot = tp_malloc(cap * sizeof *slot);
    if (!slot) return -1;
    if (!t->slot) t->key = tp_table_key(t); /* the first index: one key for the table's life */
    free(t->slot);
    t->slot = slot;
    t->cap = cap;
    memset(slot, 0xff, cap * sizeof *slot);
    for (size_t k = 0; k < t->nkeys; k++)
        slot[key_slot(t, t->keys[k].hash, t->keys[k].op, t->keys[k].seq)] = k;
    return 0;
}

/* The key's entry, added when new; NULL when out of memory. */
static ckey *key_get(ckeys *t, uint64_t hash, uint32_t op, uint32_t seq) {
    size_t i = key_slot(t, hash, op, seq);
    if (t->slot[i] != SIZE_MAX) return &t->keys[t->slot[i]];
    if (t->nkeys == t->capkeys) {
        size_t nc = t->capkeys ? 2 * t->capkeys : 256;
        ckey *nk = tp_realloc(t->keys, nc * sizeof *nk);
        if (!nk) return NULL;
        t->keys = nk;
        t->capkeys = nc;
    }
    t->keys[t->nkeys] = (ckey){hash, op, seq, 0, 0, 0};
    t->slot[i] = t->nkeys++;
    if (2 * t->nkeys > t->cap) {
        if (keys_index(t, t->nkeys) != 0) return NULL;
        return &t->keys[t->nkeys - 1];
    }
    return &t->keys[t->slot[i]];
}

static int cmp_ckey(const void *a, const void *b) {
    const ckey *x = a, *y = b;
    if (x->hash != y->hash) return x->hash < y->hash ? -1 : 1;
    if (x->op != y->op) return x->op < y->op ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Whether op o, the i-th of its rank, can be matched across ranks: a finished collective
 * whose index fits tp_arrival.op. */
static int matchable(const tp_comm_key *o, size_t i) {
    return i <= 0x7fffffffu && tp_comm_kept(o, 1); /* level 1: every collective (comm.h) */
}

/* Rank r's resolved intervals into c->span[r]: the process's comm memo where it has one (what
 * tp_comm_resolve would copy out of it), else resolved here and kept as spans (24 bytes an
 * op). Returns 0, or -1 when out of memory. */
static int rank_spans(tp_clocks *c, size_t r) {
    const tp_process *p = c->rank[r];
    if (p->comm_memo || !p->comm) {
        c->span[r] = p->comm_memo;
        return 0;
    }
    tp_comm_time *tm = tp_malloc(p->ncomm * sizeof *tm);
    if (!tm) return -1;
    tp_comm_resolve(p, tm); /* out of memory it leaves host intervals, still valid */
    tp_comm_span *sp = tp_comm_spans(tm, p->ncomm); /* takes tm */
    if (!sp) return -1;
    c->span[r] = sp;
    c->owned[r] = 1;
    return 0;
}

/* The ranks' collectives grouped by key (same communicator, op and sequence number) into
 * c->coll, in key order, and their arrivals into c->arr, a collective's in rank order, one
 * per rank (its first op of the key); a collective seen on fewer than two ranks is left out.
 * Two passes over the ops: the first counts each key's ranks, the second writes every
 * arrival in its place. Only the distinct keys are held beside the arrivals (40 bytes and
 * two table slots a key): sorting one entry per op of the run, as this did, held 48 bytes an
 * op and the sort's copy beside them. An arrival names its op; its times stay in the rank's
 * intervals (rank_spans), which a slim process holds anyway: copying them into each arrival
 * made the arrivals 32 bytes each, the merge's largest array. */
/* Per communicator, the highest level any of its ranks kept its ops at (tp_process.comm_level,
 * comm.h), in a table of keys (communicator, 0, 0) whose n is the level: a sampled file's
 * (level >= 2) every communicator, kept or not (tp_process.comm_comms). Level 1 leaves out
 * only what matchable does, so it needs no entry; empty when no rank sampled (then nothing
 * is filtered). Returns 0, or -1 when out of memory. */
static int comm_levels(const tp_clocks *c, ckeys *lv) {
    if (keys_index(lv, 0) != 0) return -1;
    for (size_t r = 0; r < c->nranks; r++) {
        const tp_process *p = c->rank[r];
        for (size_t i = 0; i < p->ncomm_comms; i++) {
            ckey *k = key_get(lv, p->comm_comms[i], 0, 0);
            if (!k) return -1;
            if (k->n < p->comm_level) k->n = p->comm_level;
        }
    }
    return 0;
}

/* Whether the merge takes op o: kept at its communicator's level in lv (comm_levels), so that
 * every rank of the collective has it. *last caches the last communicator's entry. */
static int level_kept(const ckeys *lv, const tp_comm_key *o, const ckey **last) {
    if (!lv->nkeys) return 1;
    if (!*last || (*last)->hash != o->comm_hash) {
        size_t i = key_slot(lv, o->comm_hash, 0, 0);
        if (lv->slot[i] == SIZE_MAX) return 1; /* no rank of it keeps a level */
        *last = &lv->keys[lv->slot[i]];
    }
    return tp_comm_kept(o, (unsigned)(*last)->n);
}

static int clocks_group(tp_clocks *c) {
    ckeys t = {0}, lv = {0};
    const ckey *lk = NULL;
    int rc = TPROF_ERR_NO_MEMORY;
    c->span = tp_calloc(c->nranks ? c->nranks : 1, sizeof *c->span);
    c->owned = tp_calloc(c->nranks ? c->nranks : 1, 1);
    if (!c->span || !c->owned || keys_index(&t, 0) != 0 || comm_levels(c, &lv) != 0) goto out;
    /* the sample is said whenever a rank file sampled, even of communicators it then kept
     * none of (every rank's level, not only its communicators'), but not of a run of one
     * rank, which matches nothing across ranks */
    for (size_t r = 0; c->nranks >= 2 && r < c->nranks; r++)
        if (c->level < c->rank[r]->comm_level) c->level = c->rank[r]->comm_level;
    for (size_t r = 0; r < c->nranks; r++) {
        const tp_process *p = c->rank[r];
        if (!p->comm_memo && !p->comm) continue; /* keys without times: never made so */
        for (size_t i = 0; i < p->ncomm; i++) {
            tp_comm_key key = tp_comm_key_at(p, i);
            const tp_comm_key *o = &key;
            if (!matchable(o, i) || !level_kept(&lv, o, &lk)) continue;
            ckey *k = key_get(&t, o->comm_hash, o->op, o->seq);
            if (!k) goto out;
            if (k->last != r + 1) k->n++, k->last = r + 1;
        }
    }
    if (t.nkeys > 1) qsort(t.keys, t.nkeys, sizeof *t.keys, cmp_ckey);
    if (keys_index(&t, t.nkeys) != 0) goto out;
    size_t ncoll = 0, narr = 0;
    for (size_t k = 0; k < t.nkeys; k++) {
        ckey *g = &t.keys[k];
        g->last = 0;
        g->at = g->n >= 2 ? narr : SIZE_MAX;
        if (g->n >= 2) ncoll++, narr += g->n;
    }
    c->coll = tp_malloc((ncoll ? ncoll : 1) * sizeof *c->coll);
    c->arr = tp_malloc((narr ? narr : 1) * sizeof *c->arr);
    if (!c->coll || !c->arr) goto out;
    for (size_t k = 0; k < t.nkeys; k++) {
        const ckey *g = &t.keys[k];
        if (g->at != SIZE_MAX)
            c->coll[c->ncoll++] = (tp_coll){g->hash, g->op, g->seq, g->at, g->n, 0, 0, 0};
    }
    c->narr = narr;
    for (size_t r = 0; r < c->nranks; r++) {
        const tp_process *p = c->rank[r];
        if (!p->ncomm || (!p->comm_memo && !p->comm)) continue;
        if (rank_spans(c, r) != 0) goto out;
        for (size_t i = 0; i < p->ncomm; i++) {
            tp_comm_key key = tp_comm_key_at(p, i);
            const tp_comm_key *o = &key;
            if (!matchable(o, i) || !level_kept(&lv, o, &lk)) continue;
            ckey *g = &t.keys[t.slot[key_slot(&t, o->comm_hash, o->op, o->seq)]];
            if (g->at == SIZE_MAX || g->last == r + 1) continue;
            g->last = r + 1;
            int mpi = tp_comm_host_timed(o->source, o->flags);
            int timed = mpi || c->span[r][i].src != TP_COMM_TIME_HOST; /* spans set above */
            c->arr[g->at++] = (tp_arrival){
                (uint32_t)r, (unsigned)i,
                timed && ends_agree(o->op) && !(o->flags & TPROF_COMM_F_NONBLOCKING)};
        }
    }
    rc = TPROF_OK;
out:
    free(t.keys);
    free(t.slot);
    free(lv.keys);
    free(lv.slot);
    return rc;
}

/* Host offsets: each unaligned host against the hosts aligned so far, then every rank's map
 * (and so its arrivals) moved by its host's offset. ra, hb: room for the largest collective's
 * arrivals; d: for one difference per collective. */
static void clocks_align(tp_clocks *c, int64_t *ra, int64_t *hb, int64_t *d) {
    for (size_t pass = 1; pass < c->nhosts; pass++) {
        int progress = 0;
        for (size_t h = 0; h < c->nhosts; h++) {
            if (c->hosts[h].aligned) continue;
            size_t nd = 0;
            for (size_t k = 0; k < c->ncoll; k++) {
                const tp_coll *g = &c->coll[k];
                size_t na = 0, nb = 0;
                for (size_t j = 0; j < g->n; j++) {
                    const tp_arrival *x = &c->arr[g->first + j];
                    if (!x->end_ok) continue;
                    size_t xh = c->host_of[x->rank];
                    if (xh == h) hb[nb++] = tp_arrival_end(c, x);
                    else if (c->hosts[xh].aligned)
                        ra[na++] = tp_add_sat(tp_arrival_end(c, x), c->hosts[xh].offset_ns);
                }
                if (na && nb) d[nd++] = tp_sub_sat(med_i64(ra, na), med_i64(hb, nb));
            }
            if (!nd) continue;
            c->hosts[h].offset_ns = med_i64(d, nd);
            c->hosts[h].shared = nd;
            c->hosts[h].aligned = 1;
            progress = 1;
        }
        if (!progress) break;
    }
    /* the arrivals' times follow: they are read through map_ns */
    for (size_t r = 0; r < c->nranks; r++)
        c->map_ns[r] = tp_add_sat(c->map_ns[r], c->hosts[c->host_of[r]].offset_ns);
}

/* Arrival x's residual at collective g: how far its end lies from g's median end, ns; -1
 * without one (its end does not count, or fewer than two of g's do). */
static int64_t residual(const tp_clocks *c, const tp_coll *g, const tp_arrival *x) {
    if (!x->end_ok || !g->median_ok) return -1;
    int64_t d = tp_sub_sat(tp_arrival_end(c, x), g->median_end);
    return d == INT64_MIN ? INT64_MAX : d < 0 ? -d : d;
}

/* Residuals: each arrival's end against its collective's median end (of the arrivals whose
 * end counts, at a collective with two or more of them: tp_coll.median_end), and per host
 * their median (the lower middle) and maximum, in µs. Each host's median is a radix selection
 * (spans.h, tp_kth) of 8-bit digits, 2 kB a host, all hosts advancing together through the
 * same passes over the arrivals, so that no copy of every residual is held beside the
 * arrivals, the largest array of the merge. ra: room for the largest collective's arrivals.
 * Out of memory: no residuals (for the hosts whose selection could not run). */
static void clocks_residuals(tp_clocks *c, int64_t *ra) {
    for (size_t k = 0; k < c->ncoll; k++) {
        tp_coll *g = &c->coll[k];
        size_t na = 0;
        for (size_t j = 0; j < g->n; j++)
            if (c->arr[g->first + j].end_ok) ra[na++] = tp_arrival_end(c, &c->arr[g->first + j]);
        g->median_ok = na >= 2;
        g->median_end = na >= 2 ? med_i64(ra, na) : 0;
    }
    size_t nh = c->nhosts;
    tp_kth *q = tp_calloc(nh ? nh : 1, sizeof *q);
    unsigned char *on = tp_calloc(nh ? nh : 1, 1);
    if (!q || !on) goto out;
    for (size_t k = 0; k < c->ncoll; k++)
        for (size_t j = 0; j < c->coll[k].n; j++) {
            const tp_arrival *x = &c->arr[c->coll[k].first + j];
            int64_t v = residual(c, &c->coll[k], x);
            if (v < 0) continue;
            tp_host_clock *hc = &c->hosts[c->host_of[x->rank]];
            hc->nresid++;
            if ((double)v / 1e3 > hc->resid_max_us) hc->resid_max_us = (double)v / 1e3;
        }
    for (size_t h = 0; h < nh; h++)
        tp_kth_init_bits(&q[h], c->hosts[h].nresid ? (c->hosts[h].nresid - 1) / 2 : 0, 8);
    for (;;) {
        size_t more = 0;
        for (size_t h = 0; h < nh; h++) more += on[h] = c->hosts[h].nresid && tp_kth_pass(&q[h]);
        if (!more) break;
        for (size_t k = 0; k < c->ncoll; k++)
            for (size_t j = 0; j < c->coll[k].n; j++) {
                const tp_arrival *x = &c->arr[c->coll[k].first + j];
                size_t h = c->host_of[x->rank];
                int64_t v = on[h] ? residual(c, &c->coll[k], x) : -1;
                if (v >= 0) tp_kth_see(&q[h], (uint64_t)v);
            }
    }
    for (size_t h = 0; h < nh; h++) {
        tp_host_clock *hc = &c->hosts[h];
        if (hc->nresid && !q[h].oom) hc->resid_median_us = (double)q[h].value / 1e3;
        else if (hc->nresid) hc->nresid = 0, hc->resid_max_us = 0; /* the selection failed */
    }
out:
    free(q);
    free(on);
}

/* Every process of the run onto the aligned clock: through its host's mapping when a rank
 * shares its host (one monotonic clock), else through its own pair, else with its first
 * event on the reference's first event. */
static void clocks_procs(const tp_run *run, tp_clocks *c) {
    int64_t ref_first = 0;
    for (size_t r = 0; r < c->nranks; r++)
        if (c->host_of[r] == c->ref) {
            ref_first = tp_add_sat((int64_t)first_time(c->rank[r]), c->map_ns[r]);
            break;
        }
    for (size_t i = 0; i < run->nprocs; i++) {
        const tp_process *p = &run->procs[i];
        size_t r = 0;
        while (r < c->nranks && strcmp(c->hosts[c->host_of[r]].host, p->hdr.host)) r++;
        if (r < c->nranks) c->proc_map_ns[i] = c->map_ns[r];
        else if (!c->proc_problem[i])
            c->proc_map_ns[i] = (int64_t)p->hdr.start_realtime_ns - (int64_t)p->hdr.start_mono_ns;
        else c->proc_map_ns[i] = c->nranks ? tp_sub_sat(ref_first, (int64_t)first_time(p)) : 0;
    }
}

int tp_clocks_build(const tp_run *run, tp_clocks *c) {
    memset(c, 0, sizeof *c);
    int64_t *tmp = NULL;
    c->run = run;
    c->proc_map_ns = tp_calloc(run->nprocs ? run->nprocs : 1, sizeof *c->proc_map_ns);
    c->proc_problem = tp_calloc(run->nprocs ? run->nprocs : 1, sizeof *c->proc_problem);
    if (!c->proc_map_ns || !c->proc_problem) goto oom;
    struct timespec now;
    uint64_t now_rt = clock_gettime(CLOCK_REALTIME, &now) == 0
                          ? (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec
                          : 0;
    for (size_t i = 0; i < run->nprocs; i++)
        c->proc_problem[i] = tp_clock_pair_problem(&run->procs[i], now_rt);
    if (clocks_ranks(run, c) != TPROF_OK || clocks_group(c) != TPROF_OK) goto oom;
    size_t maxn = 1;
    for (size_t k = 0; k < c->ncoll; k++)
        if (c->coll[k].n > maxn) maxn = c->coll[k].n;
    tmp = tp_malloc((maxn * 2 + c->ncoll + 1) * sizeof *tmp);
    if (!tmp) goto oom;
    clocks_align(c, tmp, tmp + maxn, tmp + 2 * maxn);
    for (size_t k = 0; k < c->ncoll; k++) { /* on the aligned clock, where lags are read */
        tp_coll *g = &c->coll[k];
        g->earliest = INT64_MAX;
        for (size_t j = 0; j < g->n; j++) {
            int64_t t = tp_arrival_start(c, &c->arr[g->first + j]);
            if (t < g->earliest) g->earliest = t;
        }
    }
    clocks_residuals(c, tmp);
    clocks_procs(run, c);
    free(tmp);
    return TPROF_OK;
oom:
    free(tmp);
    tp_clocks_free(c);
    return TPROF_ERR_NO_MEMORY;
}

/* How host h was placed (static; tp_host_clock_result.found_by). */
static const char *found_by(const tp_clocks *c, size_t h) {
    if (h == c->ref) return c->hosts[h].pair_of ? "reference" : "reference, monotonic clock";
    if (c->hosts[h].aligned) return "matched collectives";
    return c->hosts[h].pair_of ? "start pair only" : "reference's start";
}

/* The issue of process i: what placed it, and its line. */
static int clock_issue(const tp_clocks *c, size_t i, tp_clock_issue *o) {
    const tp_process *p = &c->run->procs[i];
    o->host = p->hdr.host;
    o->pid = (int)p->hdr.pid;
    o->rank = p->role == TP_ROLE_RANK ? p->rank : -1;
    o->problem = c->proc_problem[i];
    size_t h = 0;
    while (h < c->nhosts && strcmp(c->hosts[h].host, p->hdr.host)) h++;
    char how[192];
    if (h < c->nhosts && c->hosts[h].pair_of) {
        o->placed_by = "the clock pair of another file of its host";
        snprintf(how, sizeof how, "the clock pair of %s:%d (same host, same monotonic clock)",
                 c->hosts[h].pair_of->hdr.host, (int)c->hosts[h].pair_of->hdr.pid);
    } else if (h < c->nhosts && h != c->ref && c->hosts[h].aligned) {
        o->placed_by = "matched collectives";
        snprintf(how, sizeof how, "%zu matched collectives with aligned hosts",
                 c->hosts[h].shared);
    } else if (h < c->nhosts && h == c->ref) {
        o->placed_by = "its monotonic clock";
        snprintf(how, sizeof how, "its monotonic clock (no usable clock pair in the run)");
    } else if (c->nranks) {
        o->placed_by = "its first event at the reference's first event";
        snprintf(how, sizeof how,
                 "its first event at the reference host's first event (no usable clock pair "
                 "on its host, no collective shared)");
    } else {
        o->placed_by = "its monotonic clock";
        snprintf(how, sizeof how, "its monotonic clock (no rank to align to)");
    }
    size_t n = strlen(p->hdr.host) + strlen(o->problem) + strlen(how) + 80;
    o->line = tp_malloc(n);
    if (!o->line) return TPROF_ERR_NO_MEMORY;
    snprintf(o->line, n, "clock pair of %s:%d is not usable (%s): placed by %s", p->hdr.host,
             o->pid, o->problem, how);
    return TPROF_OK;
}

int tp_clocks_result_fill(tp_clocks_result *out, const tp_clocks *c) {
    memset(out, 0, sizeof *out);
    out->present = 1;
    out->hosts = (double)c->nhosts;
    out->collectives_matched = (double)c->ncoll;
    size_t usable = 0;
    for (size_t k = 0; k < c->ncoll; k++) {
        size_t ok = 0;
        for (size_t i = 0; i < c->coll[k].n; i++) ok += c->arr[c->coll[k].first + i].end_ok;
        usable += ok >= 2;
    }
    out->collectives_with_ends = (double)usable;
    out->sample_period = tp_comm_period(c->level);
    /* the bound of the files that sampled (one world size, one bound, unless files of
     * several jobs are read together: the least) */
    for (size_t r = 0; out->sample_period > 0 && r < c->nranks; r++) {
        size_t k = c->rank[r]->comm_level >= 2 ? tp_comm_keep_of(c->rank[r]) : 0;
        if (!k || (out->sample_keep && k >= out->sample_keep)) continue;
        out->sample_keep = k;
        out->sample_world = tp_comm_keep() ? 0 : tp_meta_int(c->rank[r], "world_size");
    }
    size_t np = c->run ? c->run->nprocs : 0, nbad = 0;
    out->proc_map_ns = tp_malloc((np ? np : 1) * sizeof *out->proc_map_ns);
    out->proc_pair_ok = tp_malloc(np ? np : 1);
    if (!out->proc_map_ns || !out->proc_pair_ok) return TPROF_ERR_NO_MEMORY;
    out->nprocs = np;
    for (size_t i = 0; i < np; i++) {
        out->proc_map_ns[i] = c->proc_map_ns[i];
        out->proc_pair_ok[i] = !c->proc_problem[i];
        nbad += c->proc_problem[i] != NULL;
    }
    if (nbad) {
        out->issues = tp_calloc(nbad, sizeof *out->issues);
        if (!out->issues) return TPROF_ERR_NO_MEMORY;
        for (size_t i = 0; i < np; i++)
            if (c->proc_problem[i] && clock_issue(c, i, &out->issues[out->nissues++]) != TPROF_OK)
                return TPROF_ERR_NO_MEMORY;
    }
    out->per_host = tp_calloc(c->nhosts ? c->nhosts : 1, sizeof *out->per_host);
    if (!out->per_host) return TPROF_ERR_NO_MEMORY;
    for (size_t h = 0; h < c->nhosts; h++) {
        const tp_host_clock *x = &c->hosts[h];
        tp_host_clock_result *o = &out->per_host[out->nper_host++];
        o->host = x->host;
        o->ranks = tp_malloc((c->nranks ? c->nranks : 1) * sizeof *o->ranks);
        if (!o->ranks) return TPROF_ERR_NO_MEMORY;
        for (size_t r = 0; r < c->nranks; r++)
            if (c->host_of[r] == h) {
                if (!o->nranks) o->map_ns = c->map_ns[r];
                o->ranks[o->nranks++] = c->rank[r]->rank;
            }
        o->reference = h == c->ref;
        o->aligned = x->aligned;
        o->offset_ns = x->offset_ns;
        o->offset_us = (double)x->offset_ns / 1e3;
        o->found_by = found_by(c, h);
        o->collectives_used = (double)x->shared;
        o->has_residual = x->nresid > 0;
        o->residual_median_us = x->resid_median_us;
        o->residual_max_us = x->resid_max_us;
        if (!x->aligned)
            o->note = x->pair_of
                          ? "no timed collective shared with an aligned host: its wall clock "
                            "(start pair) is used as it is"
                          : "no timed collective shared with an aligned host and no usable "
                            "clock pair: its first event is placed at the reference's first "
                            "event";
    }
    if (c->nhosts <= 1) {
        out->status = "single host";
        out->note = c->nhosts ? "every rank is on one host and shares its monotonic clock: no "
                                "alignment needed"
                              : "no rank";
        return TPROF_OK;
    }
    int all = 1;
    for (size_t h = 0; h < c->nhosts; h++) all &= c->hosts[h].aligned;
    out->status = all ? "aligned" : "partly aligned";
    out->method = "start pairs (realtime, monotonic) of each host's first rank file with a "
                  "usable pair, then per host the median offset that makes the ends of matched "
                  "collectives agree";
    return TPROF_OK;
}

int tp_clocks_compute(const tp_run *run, tp_clocks_result *out) {
    tp_clocks c;
    memset(out, 0, sizeof *out);
    int rc = tp_clocks_build(run, &c);
    if (rc != TPROF_OK) return rc;
    rc = tp_clocks_result_fill(out, &c);
    tp_clocks_free(&c);
    return rc;
}

void tp_clocks_result_free(tp_clocks_result *r) {
    for (size_t h = 0; h < r->nper_host; h++) free(r->per_host[h].ranks);
    free(r->per_host);
    for (size_t i = 0; i < r->nissues; i++) free(r->issues[i].line);
    free(r->issues);
    free(r->proc_map_ns);
    free(r->proc_pair_ok);
    memset(r, 0, sizeof *r);
}

/* What a sampled merge matched, said in the report's JSON and the export's metadata. */
#define SAMPLE_WHAT                                                                            \
    "a rank file held more collectives than keep_per_rank (TRAINPROF_COMM_KEEP), so the "       \
    "collectives were matched across ranks on a systematic sample, the same on every rank: on " \
    "each communicator whose files exceeded the bound, the collectives whose sequence numbers " \
    "lie in the first `window` or in the last `window` of every `period` (the longest period " \
    "any communicator needed); "
/* where the bound came from, and how to have every collective */
#define SAMPLE_HOW                                                                             \
    "; not set, the bound is 2^23 collectives over the world size a rank file names, 8192 up to " \
    "1024 ranks and 1024 at least, and TRAINPROF_COMM_KEEP=2147483648 matches every collective"

const char *tp_clocks_sample_note(int lags) {
    return lags ? SAMPLE_WHAT "the offsets, residuals, matched-collective counts and start lags "
                              "(stragglers) are over that sample" SAMPLE_HOW
                : SAMPLE_WHAT "the clock offsets and residuals are over that sample" SAMPLE_HOW;
}

void tp_clocks_json(cJSON *rep, const tp_clocks_result *c) {
    if (!c->present) return;
    cJSON *j = cJSON_AddObjectToObject(rep, "clocks");
    cJSON_AddNumberToObject(j, "hosts", c->hosts);
    cJSON_AddNumberToObject(j, "collectives_matched", c->collectives_matched);
    cJSON_AddNumberToObject(j, "collectives_with_ends", c->collectives_with_ends);
    cJSON_AddStringToObject(j, "status", c->status);
    if (c->note) cJSON_AddStringToObject(j, "note", c->note);
    if (c->sample_period > 0) {
        cJSON *sm = cJSON_AddObjectToObject(j, "sample");
        cJSON_AddNumberToObject(sm, "window", TP_COMM_WINDOW);
        cJSON_AddNumberToObject(sm, "period", c->sample_period);
        cJSON_AddNumberToObject(sm, "keep_per_rank", (double)c->sample_keep);
        cJSON_AddStringToObject(sm, "note", tp_clocks_sample_note(1));
    }
    if (c->nissues) {
        cJSON *ia = cJSON_AddArrayToObject(j, "unusable_clock_pairs");
        for (size_t i = 0; i < c->nissues; i++) {
            const tp_clock_issue *x = &c->issues[i];
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "host", x->host);
            cJSON_AddNumberToObject(o, "pid", x->pid);
            if (x->rank >= 0) cJSON_AddNumberToObject(o, "rank", x->rank);
            cJSON_AddStringToObject(o, "problem", x->problem);
            cJSON_AddStringToObject(o, "placed_by", x->placed_by);
            cJSON_AddStringToObject(o, "line", x->line);
            tp_json_item_to_array(ia, o);
        }
    }
    if (!c->method) return;
    cJSON_AddStringToObject(j, "method", c->method);
    cJSON *ha = cJSON_AddArrayToObject(j, "per_host");
    for (size_t h = 0; h < c->nper_host; h++) {
        const tp_host_clock_result *x = &c->per_host[h];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "host", x->host);
        cJSON *rk = cJSON_AddArrayToObject(o, "ranks");
        for (size_t r = 0; r < x->nranks; r++) tp_json_item_to_array(rk, cJSON_CreateNumber(x->ranks[r]));
        if (x->reference) cJSON_AddBoolToObject(o, "reference", 1);
        cJSON_AddBoolToObject(o, "aligned", x->aligned);
        cJSON_AddNumberToObject(o, "offset_us", x->offset_us);
        cJSON_AddStringToObject(o, "found_by", x->found_by);
        if (!x->reference) cJSON_AddNumberToObject(o, "collectives_used", x->collectives_used);
        if (x->has_residual) {
            cJSON_AddNumberToObject(o, "residual_median_us", x->residual_median_us);
            cJSON_AddNumberToObject(o, "residual_max_us", x->residual_max_us);
        }
        if (x->note) cJSON_AddStringToObject(o, "note", x->note);
        tp_json_item_to_array(ha, o);
    }
}

/* Whether arrival x counts for its rank's lags: inside the rank's window, if it has one. */
static int in_window(const tp_clocks *c, const tp_arrival *x, const int64_t *w0,
                     const int64_t *w1) {
    if (!w1 || !w1[x->rank]) return 1;
    int64_t t = tp_arrival_start(c, x);
    return t >= w0[x->rank] && t <= w1[x->rank];
}

int tp_clocks_by_rank(const tp_clocks *c, size_t *off, uint32_t **out) {
    *out = NULL;
    if (c->narr > UINT32_MAX) return TPROF_ERR_NO_MEMORY;
    uint32_t *idx = tp_malloc((c->narr ? c->narr : 1) * sizeof *idx);
    if (!idx) return TPROF_ERR_NO_MEMORY;
    memset(off, 0, (c->nranks + 1) * sizeof *off);
    for (size_t i = 0; i < c->narr; i++) off[c->arr[i].rank + 1]++;
    for (size_t r = 0; r < c->nranks; r++) off[r + 1] += off[r];
    for (size_t i = 0; i < c->narr; i++) idx[off[c->arr[i].rank]++] = (uint32_t)i;
    /* each off[r] now ends rank r's group, where rank r + 1's begins: one place back */
    for (size_t r = c->nranks; r > 0; r--) off[r] = off[r - 1];
    off[0] = 0;
    *out = idx;
    return TPROF_OK;
}

size_t tp_clocks_coll_of(const tp_clocks *c, size_t i) {
    size_t lo = 0, hi = c->ncoll;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (c->coll[mid].first <= i) lo = mid;
        else hi = mid;
    }
    return lo;
}

int tp_clocks_lags(const tp_clocks *c, const int64_t *w0, const int64_t *w1, size_t *n,
                   double *median_ms, double *mean_ms, double *p90_ms) {
    for (size_t r = 0; r < c->nranks; r++) {
        n[r] = 0;
        median_ms[r] = mean_ms[r] = p90_ms[r] = 0;
    }
    /* rank by rank through the arrivals' index by rank (4 bytes an arrival), each rank's lags
     * in room for the most any rank has: every rank's lags at once were 8 bytes an arrival,
     * as many as the arrivals themselves */
    size_t *off = tp_malloc((c->nranks + 1) * sizeof *off), most = 0;
    uint32_t *idx = NULL;
    double *v = NULL;
    if (off && tp_clocks_by_rank(c, off, &idx) == 0) {
        for (size_t r = 0; r < c->nranks; r++)
            if (off[r + 1] - off[r] > most) most = off[r + 1] - off[r];
        v = tp_malloc((most ? most : 1) * sizeof *v);
    }
    if (!v) {
        free(off);
        free(idx);
        return TPROF_ERR_NO_MEMORY;
    }
    for (size_t r = 0; r < c->nranks; r++) {
        size_t m = 0;
        double s = 0;
        for (size_t a = off[r]; a < off[r + 1]; a++) {
            const tp_arrival *x = &c->arr[idx[a]];
            if (!in_window(c, x, w0, w1)) continue;
            const tp_coll *g = &c->coll[tp_clocks_coll_of(c, idx[a])];
            v[m++] = (double)tp_sub_sat(tp_arrival_start(c, x), g->earliest) / 1e6;
        }
        n[r] = m;
        if (!m) continue;
        for (size_t i = 0; i < m; i++) s += v[i];
        qsort(v, m, sizeof *v, tp_cmp_double);
        mean_ms[r] = s / (double)m;
        median_ms[r] = tp_pct_double(v, m, 0.5);
        p90_ms[r] = tp_pct_double(v, m, 0.9);
    }
    free(v);
    free(idx);
    free(off);
    return TPROF_OK;
}

