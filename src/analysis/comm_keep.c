/*
 * comm_keep.c — what a slim process keeps of its communication ops for the merge
 * (comm.h): each op's key and resolved span in place of the op, and past a bound the
 * collectives of a sample of sequence-number windows spread over the run (the levels), so
 * that the merge's memory stays within one budget whatever the run's length and, up to 8192
 * ranks, whatever their number. The timing of the ops is comm.c's (tp_comm_resolve).
 */
#define _GNU_SOURCE
#include "analysis/comm.h"
#include "analysis/alloc.h"
#include "analysis/model_load.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "format/format.h"
#include "trainprof.h"

tp_comm_span *tp_comm_spans(tp_comm_time *t, size_t n) {
    _Static_assert(sizeof(tp_comm_span) <= sizeof(tp_comm_time), "spans go over the times");
    tp_comm_span *s = (tp_comm_span *)(void *)t;
    for (size_t i = 0; i < n; i++) { /* span i ends at or below time i's start: read first */
        tp_comm_time x = t[i];
        s[i] = (tp_comm_span){x.start, x.end, x.src};
    }
    tp_comm_span *fit = n ? tp_realloc(s, n * sizeof *fit) : NULL;
    if (!fit) free(s);
    return fit;
}

/* Never matched by the merge (clocks.c's matchable asks tp_comm_kept at level 1): kept at
 * no level but 0. */
static int unmatched(const tp_comm_key *k) {
    return k->op == TPROF_COMM_SEND || k->op == TPROF_COMM_RECV ||
           k->op == TPROF_COMM_UNKNOWN || (k->flags & TPROF_COMM_F_UNFINISHED);
}

static _Atomic size_t g_keep = 0;

size_t tp_comm_keep(void) { return atomic_load_explicit(&g_keep, memory_order_relaxed); }

void tp_comm_keep_set(size_t keep) {
    size_t k = keep && keep < TP_COMM_KEEP_MIN ? TP_COMM_KEEP_MIN : keep;
    atomic_store_explicit(&g_keep, k, memory_order_relaxed);
}

size_t tp_comm_keep_of(const tp_process *p) {
    size_t set = tp_comm_keep();
    if (set) return set;
    /* the metadata's value read as the load reads p->world_size, not that field: a summary's
     * decoding checks its keys against the bound before the process's identity is set */
    int w = tp_meta_int(p, "world_size");
    if (w <= 0) return TP_COMM_KEEP;
    size_t keep = (size_t)TP_COMM_MERGE_OPS / (size_t)w;
    return keep > TP_COMM_KEEP ? TP_COMM_KEEP : keep < TP_COMM_KEEP_MIN ? TP_COMM_KEEP_MIN : keep;
}

int tp_comm_kept(const tp_comm_key *k, unsigned level) {
    if (!level) return 1;
    if (level > TP_COMM_LEVEL_MAX) level = TP_COMM_LEVEL_MAX;
    uint32_t w = k->seq / TP_COMM_WINDOW;
    uint32_t last = (1u << (level - 1)) - 1; /* the period's last window: its low bits all 1 */
    return !unmatched(k) && (w == 0 || (w & last) == last);
}

double tp_comm_period(unsigned level) {
    if (level > TP_COMM_LEVEL_MAX) level = TP_COMM_LEVEL_MAX;
    return level < 2 ? 0 : (double)TP_COMM_WINDOW * (double)(1ull << (level - 1));
}

unsigned tp_comm_class(const tp_comm_key *k) {
    uint32_t w = k->seq / TP_COMM_WINDOW; /* below 2^26: ~w has a zero bit */
    unsigned m = w ? (unsigned)__builtin_ctz(~w) : TP_COMM_LEVEL_MAX - 1; /* 0: every level */
    return m < TP_COMM_LEVEL_MAX - 1 ? m : TP_COMM_LEVEL_MAX - 1;
}

void tp_comm_level_add(tp_comm_levels *c, const tp_comm_key *k) {
    if (unmatched(k)) return;
    c->hist[tp_comm_class(k)]++;
    c->first += k->seq < TP_COMM_WINDOW;
    c->all++;
}

unsigned tp_comm_level_end(const tp_comm_levels *c, size_t n, size_t keep) {
    if (n <= keep) return 0;
    /* hist[m]: the collectives of class m (tp_comm_class), kept up to level m + 1, so that
     * level s >= 2 keeps the sum of hist[s - 1..] */
    size_t at[TP_COMM_LEVEL_MAX + 1] = {0}, all = c->all, first = c->first;
    at[1] = all;
    for (unsigned s = 2; s <= TP_COMM_LEVEL_MAX; s++) at[s] = at[s - 1] - c->hist[s - 2];
    unsigned s = 1;
    if (all > keep) {
        /* the least level within the bound, unless it would keep no collective (a capture
         * begun mid-run has no window 0, and a deep level's one window may lie past its
         * end); then, as when none is within the bound, the deepest level that keeps a
         * window past the first (window 0 alone is the warm-up, which the stragglers leave
         * out: many communicators' first windows can fill the bound), else the deepest that
         * keeps some; of levels that keep the same, the least */
        unsigned last = 1;
        for (s = 2; s <= TP_COMM_LEVEL_MAX && at[s]; s++) {
            last = s;
            if (at[s] <= keep) break;
        }
        s = last;
        if (at[s] > keep) {
            unsigned past = 0;
            for (unsigned t = 2; t <= TP_COMM_LEVEL_MAX; t++)
                if (at[t] > first) past = t;
            if (past) s = past;
            while (s > 2 && at[s - 1] == at[s]) s--;
        }
    }
    /* what leaves no op out is no sample; what leaves only the unmatched ops out is level 1 */
    if (at[s] == n) return 0;
    return at[s] == all ? 1 : s;
}

unsigned tp_comm_level(const tp_process *p) {
    size_t keep = tp_comm_keep_of(p);
    if (p->ncomm <= keep) return 0;
    tp_comm_levels c = {0};
    for (size_t i = 0; i < p->ncomm; i++) {
        tp_comm_key k = tp_comm_key_at(p, i);
        tp_comm_level_add(&c, &k);
    }
    return tp_comm_level_end(&c, p->ncomm, keep);
}

tp_comm_time *tp_comm_times_kept(tp_process *whole, const tp_process *p) {
    size_t n = whole->ncomm, k = 0;
    if (!n || !p->ncomm || (p->comm_level ? tp_comm_level(whole) != p->comm_level
                                          : n != p->ncomm))
        return NULL;
    for (size_t i = 0; p->comm_level && i < n; i++) {
        tp_comm_key key = tp_comm_key_at(whole, i);
        k += (size_t)tp_comm_kept(&key, p->comm_level);
    }
    if (p->comm_level && k != p->ncomm) return NULL;
    tp_comm_time *t = whole->comm_times;
    whole->comm_times = NULL; /* taken: what it kept are filtered in place below */
    if (!t && (t = tp_malloc(n * sizeof *t)) && tp_comm_resolve(whole, t) != TPROF_OK) {
        free(t);
        return NULL;
    }
    if (!t || !p->comm_level) return t;
    k = 0;
    for (size_t i = 0; i < n; i++) {
        tp_comm_key key = tp_comm_key_at(whole, i);
        if (tp_comm_kept(&key, p->comm_level)) t[k++] = t[i];
    }
    tp_comm_time *fit = tp_realloc(t, k * sizeof *fit); /* a failed shrink leaves t, valid */
    return fit ? fit : t;
}

int tp_comm_comms_has(const tp_process *p, uint64_t hash) {
    size_t lo = 0, hi = p->ncomm_comms;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->comm_comms[mid] == hash) return 1;
        if (p->comm_comms[mid] < hash) lo = mid + 1;
        else hi = mid;
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The communicators of keys' collectives, sorted and distinct, into p (comm_comms): a
 * sampled file's, so that the merge filters at its level a communicator it kept none of.
 * Returns 0, or -1 without memory (8 bytes a collective while it runs). */
static int comms_of(tp_process *p, const tp_comm_key *keys, size_t n) {
    uint64_t *h = tp_malloc((n ? n : 1) * sizeof *h);
    if (!h) return -1;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!unmatched(&keys[i]) && (!m || h[m - 1] != keys[i].comm_hash))
            h[m++] = keys[i].comm_hash;
    qsort(h, m, sizeof *h, cmp_u64);
    size_t u = 0;
    for (size_t i = 0; i < m; i++)
        if (!u || h[u - 1] != h[i]) h[u++] = h[i];
    uint64_t *fit = tp_realloc(h, (u ? u : 1) * sizeof *fit);
    p->comm_comms = fit ? fit : h;
    p->ncomm_comms = u;
    return 0;
}

void tp_process_slim_comm(tp_process *p) {
    size_t n = p->ncomm;
    if (!n || !p->comm || p->comm_keys) return;
    tp_comm_key *keys = tp_malloc(n * sizeof *keys);
    tp_comm_op *last = tp_malloc(sizeof *last);
    tp_comm_time *tm = tp_malloc(n * sizeof *tm);
    if (!keys || !last || !tm || tp_comm_resolve(p, tm) != TPROF_OK) {
        free(keys), free(last), free(tm);
        return;
    }
    tp_comm_span *memo = tp_comm_spans(tm, n); /* takes tm */
    if (!memo) {
        free(keys), free(last);
        return;
    }
    for (size_t i = 0; i < n; i++) keys[i] = tp_comm_key_at(p, i);
    *last = *tp_comm_last(p);
    free(p->comm);
    free(p->comm_memo);
    p->comm = NULL;
    p->cap_comm = 0;
    p->comm_keys = keys;
    p->comm_last = last;
    p->comm_memo = memo;
    p->comm_memo_whole = 0;
    p->comm_level = tp_comm_level(p);
    /* without memory for the communicators' list, every op is kept (level 0), as the merge
     * could not filter at this level a communicator of which none is kept */
    if (p->comm_level >= 2 && comms_of(p, keys, n) != 0) p->comm_level = 0;
    if (!p->comm_level) return;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (tp_comm_kept(&keys[i], p->comm_level)) keys[k] = keys[i], memo[k++] = memo[i];
    p->ncomm = k;
    /* shrunk (a failed realloc leaves the larger block, still valid); with none kept (a rank
     * of sends and receives alone) an entry stays, as the key form needs its arrays */
    tp_comm_key *fk = tp_realloc(keys, (k ? k : 1) * sizeof *fk);
    tp_comm_span *fm = tp_realloc(memo, (k ? k : 1) * sizeof *fm);
    if (fk) p->comm_keys = fk;
    if (fm) p->comm_memo = fm;
}

/* ------------------------------------------------------------------ the slim load's stream */

/* The superset's bound: four times the most ops a file may keep, so that a raise leaves it
 * at most half full and the level the file ends at is at or past the one held. */
static size_t slim_bound(void) {
    size_t k = tp_comm_keep();
    if (k < TP_COMM_KEEP) k = TP_COMM_KEEP;
    return k > SIZE_MAX / 4 ? SIZE_MAX : 4 * k;
}

void tp_slim_comm_init(tp_slim_comm *s) {
    memset(s, 0, sizeof *s);
    s->bound = s->next = slim_bound();
    tp_idmap_init(&s->comms);
}

static void slim_free_torch(tp_slim_comm *s) {
    if (!s->torch) return;
    tp_slim_comm_free(s->torch);
    free(s->torch);
    s->torch = NULL;
}

void tp_slim_comm_free(tp_slim_comm *s) {
    slim_free_torch(s);
    free(s->keys);
    free(s->memo);
    tp_idmap_free(&s->comms);
    memset(s, 0, sizeof *s);
}

/* The held ops filtered to those level keeps. */
static void slim_filter(tp_slim_comm *s, unsigned level) {
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++)
        if (tp_comm_kept(&s->keys[i], level)) s->keys[k] = s->keys[i], s->memo[k++] = s->memo[i];
    s->n = k;
    s->level = level;
}

/* The least level past the one held that keeps at most half the bound of the ops so far,
 * and some past window 0 (a level keeping window 0 alone is one the file's level passes
 * over: tp_comm_level_end), the held ops filtered to it; none such: the held ones stay, and
 * the next try waits until they are twice as many, so that a file whose ops no level thins
 * (every op in window 0) costs a filter per doubling, not one per op. */
static void slim_raise(tp_slim_comm *s) {
    size_t at = s->lv.all;
    unsigned l = 1;
    for (; l < TP_COMM_LEVEL_MAX; l++) {
        if (l > s->level && at <= s->bound / 2 && at > s->lv.first) break;
        at -= s->lv.hist[l - 1];
    }
    if (l > s->level && at <= s->bound / 2 && at > s->lv.first) slim_filter(s, l);
    s->next = s->n > s->bound / 2 ? 2 * s->n : s->bound;
}

/* op, one a whole load keeps, into s: its key counted, its communicator gathered, and its
 * key and memo span held when s's level keeps it; s->failed without memory. */
static void slim_add(tp_slim_comm *s, const tp_comm_op *op) {
    tp_comm_key k = tp_comm_key_of(op);
    tp_comm_level_add(&s->lv, &k);
    s->seen++;
    if (!s->has_last || op->start >= s->last.start) s->last = *op, s->has_last = 1;
    int made; /* the file's collectives' communicators */
    if (!unmatched(&k) && tp_idmap_add(&s->comms, k.comm_hash, &made) == SIZE_MAX) {
        s->failed = 1;
        return;
    }
    if (!tp_comm_kept(&k, s->level)) return;
    if (s->n == s->cap && tp_grow_pair((void **)&s->keys, sizeof *s->keys, (void **)&s->memo,
                                       sizeof *s->memo, &s->cap, 1024) != TPROF_OK) {
        s->failed = 1;
        return;
    }
    s->keys[s->n] = k;
    tp_comm_time t; /* as tp_comm_resolve gives it without GPU records */
    tp_comm_resolve_other(NULL, op, &t);
    s->memo[s->n++] = (tp_comm_span){t.start, t.end, t.src};
    if (s->n > s->next) slim_raise(s);
}

int tp_slim_comm_op(void *ctx, const tp_comm_op *op, size_t i) {
    tp_slim_comm *s = ctx;
    (void)i;
    if (s->failed) return 0;
    /* Which of torch's ops a whole load keeps depends on the file's other ops (model.c,
     * drop_torch_twins): with the plugin's, the enqueue-flagged ones are their twins; with
     * MPI's, the others may be twins, by their group's backend; with neither, every one is
     * the file's. So the other ops (and torch's not flagged enqueue, kept beside the plugin's)
     * go into s; torch's, while no other op (of any source) has come, into s->torch as well,
     * which the end takes when none comes: a job whose NCCL calls torch.distributed alone
     * recorded. */
    int torch = op->source == TPROF_COMM_SRC_TORCH;
    int enq = torch && (op->flags & TPROF_COMM_F_ENQUEUE);
    if (torch) {
        s->twins += enq;
        s->torch_host += !enq;
        if (!s->other) {
            if (!s->torch && (s->torch = tp_malloc(sizeof *s->torch))) tp_slim_comm_init(s->torch);
            if (!s->torch) {
                s->failed = 1;
                return 0;
            }
            slim_add(s->torch, op);
            s->failed = s->torch->failed;
        }
    } else {
        s->nccl |= op->source == TPROF_COMM_SRC_NCCL;
        s->mpi |= op->source == TPROF_COMM_SRC_MPI;
        s->other = 1; /* an op of no known source too: torch's are then not alone */
        slim_free_torch(s);
    }
    /* beside MPI's, torch's ops not flagged enqueue are twins or not by metadata */
    if (s->mpi && s->torch_host) s->failed = 1;
    if (!enq && !s->failed) slim_add(s, op);
    return 0;
}

/* s's ops into p (tp_slim_comm_end), nrec_twins of the file's set aside as twins. */
static int slim_end(tp_slim_comm *s, tp_process *p, size_t nrec_twins) {
    p->nrec_comm = s->seen;
    p->nrec_twins = nrec_twins;
    if (!s->seen) return 1;
    unsigned level = tp_comm_level_end(&s->lv, s->seen, tp_comm_keep_of(p));
    /* the level the file ends at keeps a part of what is held, or it must be read again */
    if (level ? level < s->level : s->level != 0) return 0;
    tp_comm_op *last = tp_malloc(sizeof *last);
    size_t u = s->comms.n;
    uint64_t *comms = level >= 2 ? tp_malloc((u ? u : 1) * sizeof *comms) : NULL;
    if (!last || (level >= 2 && !comms)) {
        free(last);
        free(comms);
        return 0;
    }
    if (level) slim_filter(s, level);
    if (!comms) u = 0; /* read from level 2 on alone */
    if (u) memcpy(comms, s->comms.ids, u * sizeof *comms);
    if (u > 1) qsort(comms, u, sizeof *comms, cmp_u64);
    *last = s->last;
    /* shrunk (a failed realloc leaves the larger block, still valid); with none kept an
     * entry stays, as the key form needs its arrays */
    size_t n = s->n;
    tp_comm_key *fk = tp_realloc(s->keys, (n ? n : 1) * sizeof *fk);
    tp_comm_span *fm = tp_realloc(s->memo, (n ? n : 1) * sizeof *fm);
    if (fk) s->keys = fk;
    if (fm) s->memo = fm;
    free(p->comm);
    free(p->comm_memo);
    p->comm = NULL;
    p->cap_comm = 0;
    p->comm_keys = s->keys;
    p->comm_memo = s->memo;
    p->comm_last = last;
    p->comm_memo_whole = 0;
    p->comm_level = level;
    p->ncomm = level ? n : s->seen;
    p->comm_comms = comms;
    p->ncomm_comms = u;
    s->keys = NULL;
    s->memo = NULL;
    return 1;
}

static _Atomic size_t g_again;

size_t tp_slim_comm_again(void) { return atomic_load(&g_again); }

int tp_slim_comm_end(tp_slim_comm *s, tp_process *p) {
    int ok = !s->failed;
    /* torch's ops alone: every one the file's, none a twin */
    if (ok && s->torch) ok = slim_end(s->torch, p, 0);
    /* torch's enqueue-flagged ops are twins beside the plugin's, the file's beside MPI's */
    else if (ok) ok = (!s->twins || s->nccl) && slim_end(s, p, s->twins);
    if (!ok) atomic_fetch_add(&g_again, 1);
    return ok;
}
