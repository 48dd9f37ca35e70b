/*
 * counter_pack.c — packs and reads a slim process's counters (counter_pack.h).
 */
#define _GNU_SOURCE
#include "analysis/counter_pack.h"
#include "analysis/alloc.h"

#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/report_spill.h"
#include "common/varint.h"
#include "trainprof.h"

/* the most bytes one counter takes: two varints of at most 10 bytes and 8 raw ones */
#define ELEM_MAX 28

enum { FORM_INT = 0, FORM_MILLI = 1, FORM_RAW = 2 };

static int same_bits(double a, double b) { return !memcmp(&a, &b, sizeof a); }

/* The first form (FORM_*) that gives v back bit for bit, with its scaled value in *s. */
static int form_of(double v, int64_t *s) {
    const double lim = 9007199254740992.0; /* 2^53: every integer up to it is a double */
    if (v >= -lim && v <= lim) {
        int64_t i = (int64_t)v;
        if (same_bits((double)i, v)) return *s = i, FORM_INT; /* -0.0 is not 0 */
        if (v >= -lim / 1000 && v <= lim / 1000) {
            int64_t m = llround(v * 1000.0);
            if (same_bits((double)m / 1000.0, v)) return *s = m, FORM_MILLI;
        }
    }
    return FORM_RAW;
}

static double value_of(int form, int64_t s) {
    return form == FORM_INT ? (double)s : (double)s / 1000.0;
}

/* ---- where spilled bytes lie ---- */

/* A file holding segments of packed bytes, under mu: the process's one temporary file of
 * spilled bytes (made at the first write-out, closed when the last thread with bytes in it
 * frees them), or a summary whose slim block holds a thread's packed bytes, read in place
 * through a descriptor of its own (summary: 1), so that a summary renamed over or removed
 * while the report runs is still the file read; a reader reads it only while it is the file
 * that was decoded (the same device, inode, size and modification time: a summary is never
 * written in place, so a change is damage; not the change time, which a rename or removal
 * of the file changes too). refs: its segments not freed. */
typedef struct cstore {
    int fd;
    int summary;
    struct stat id;
    uint64_t end; /* the temporary file's next free byte */
    size_t refs;
} cstore;

static pthread_mutex_t store_mu = PTHREAD_MUTEX_INITIALIZER;
static cstore *store; /* the temporary file; NULL when none is open */
static size_t summaries_held; /* descriptors of summaries read in place */
static _Atomic size_t spill_at = 1u << 20;

typedef struct cseg {
    cstore *file;
    uint64_t off; /* in the file */
    size_t len;
} cseg;

struct tp_cpack_spilled {
    cseg *seg;
    size_t n, cap;
    uint64_t bytes; /* the segments' lengths summed */
};

size_t tp_cpack_set_spill(size_t bytes) { return atomic_exchange(&spill_at, bytes); }

size_t tp_cpack_spill_threshold(void) { return atomic_load(&spill_at); }

static _Atomic uint64_t read_failures;
/* this thread's share: a reader that runs beside others (summarize's tasks) tells its own
 * failures from theirs */
static _Thread_local uint64_t thread_read_failures;

uint64_t tp_counters_read_failures(void) { return atomic_load(&read_failures); }

uint64_t tp_counters_read_failures_here(void) { return thread_read_failures; }

static void read_failed(void) {
    atomic_fetch_add(&read_failures, 1);
    thread_read_failures++;
}

/* One segment of file f freed: the file is closed (or forgotten) with its last, and the next
 * write-out makes a new one. */
static void release(cstore *f) {
    pthread_mutex_lock(&store_mu);
    if (!--f->refs) {
        close(f->fd);
        summaries_held -= f->summary != 0;
        if (store == f) store = NULL;
        free(f);
    }
    pthread_mutex_unlock(&store_mu);
}

/* Room for one more segment in t's list (made when it has none): the list, or NULL. */
static tp_cpack_spilled *seg_room(tp_thread *t) {
    tp_cpack_spilled *sp = t->counters_spilled;
    if (!sp && !(sp = tp_calloc(1, sizeof *sp))) return NULL;
    t->counters_spilled = sp;
    if (sp->n == sp->cap) {
        size_t nc = sp->cap ? sp->cap * 2 : 8;
        cseg *ns = tp_realloc(sp->seg, nc * sizeof *ns);
        if (!ns) return NULL;
        sp->seg = ns;
        sp->cap = nc;
    }
    return sp;
}

/* The process's descriptors (RLIMIT_NOFILE), as many as it may want when unlimited. */
static size_t fds_allowed(void) {
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 1u << 20;
    return r.rlim_cur < (1u << 20) ? (size_t)r.rlim_cur : 1u << 20;
}

/* Below this many descriptors, bytes are held in memory as they were: the temporary file and
 * held summaries would take the ones the command's own files need (a report at `ulimit -n 6`
 * has three standard streams, its sections' temporary file and its output). */
#define FDS_SPARE 32

/* Writes n bytes at b out to the temporary file (made at the first write), at *off: the file,
 * holding one more reference, or NULL (nothing written: below FDS_SPARE descriptors, no file,
 * or a failed write). The file, shared by every thread, is written at a place reserved under
 * the lock, so that writes of several loads run at once. */
static cstore *write_out(const void *b, size_t n, uint64_t *off) {
    if (fds_allowed() <= FDS_SPARE) return NULL;
    pthread_mutex_lock(&store_mu);
    if (!store && (store = tp_calloc(1, sizeof *store)) && (store->fd = tp_spill_tmpfile()) < 0) {
        free(store);
        store = NULL;
    }
    cstore *f = store;
    *off = f ? f->end : 0;
    if (f) f->end += n, f->refs++;
    pthread_mutex_unlock(&store_mu);
    if (f && tp_spill_pwrite_all(f->fd, b, n, *off) != TPROF_OK) {
        release(f); /* its place stays reserved (a hole, or what was written of it) */
        f = NULL;
    }
    return f;
}

/* Writes t's bytes in memory out as its next segment: 0, or -1 (nothing written; t as it
 * was). */
static int spill(tp_thread *t) {
    tp_cpack_spilled *sp = seg_room(t);
    if (!sp) return -1;
    size_t len = t->counters_packed_len;
    uint64_t off;
    cstore *f = write_out(t->counters_packed, len, &off);
    if (!f) return -1;
    sp->seg[sp->n++] = (cseg){f, off, len};
    sp->bytes += len;
    t->counters_packed_len = 0;
    return 0;
}

struct tp_spill_block {
    cstore *file;
    uint64_t off;
    size_t len;
};

tp_spill_block *tp_spill_block_out(const void *b, size_t n) {
    tp_spill_block *x = tp_malloc(sizeof *x);
    uint64_t off;
    cstore *f = x ? write_out(b, n, &off) : NULL;
    if (!f) {
        free(x);
        return NULL;
    }
    *x = (tp_spill_block){f, off, n};
    return x;
}

static int seg_read(const cstore *f, void *b, size_t n, uint64_t off);

int tp_spill_block_in(const tp_spill_block *x, uint64_t off, void *b, size_t n) {
    if (off > x->len || n > x->len - off) return TPROF_ERR_INVALID_ARG;
    int rc = seg_read(x->file, b, n, x->off + off);
    if (rc == TPROF_ERR_IO) read_failed();
    return rc;
}

void tp_spill_read_damaged(void) { read_failed(); }

void tp_spill_block_free(tp_spill_block *x) {
    if (!x) return;
    release(x->file);
    free(x);
}

/* The summaries a process reads in place at once: a quarter of the descriptors past
 * FDS_SPARE, 1024 at most; past it a summary's bytes are copied into the temporary file. */
static size_t summaries_max(void) {
    size_t n = fds_allowed();
    return n <= FDS_SPARE ? 0 : (n - FDS_SPARE) / 4 < 1024 ? (n - FDS_SPARE) / 4 : 1024;
}

int tp_cpack_refer(tp_thread *t, int fd, uint64_t off, size_t len) {
    cstore *f = tp_calloc(1, sizeof *f);
    if (!f) return TPROF_ERR_NO_MEMORY;
    if (fstat(fd, &f->id) != 0 || !S_ISREG(f->id.st_mode)) {
        free(f);
        return TPROF_ERR_IO;
    }
    pthread_mutex_lock(&store_mu);
    int room = summaries_held < summaries_max();
    summaries_held += room;
    pthread_mutex_unlock(&store_mu);
    /* never 0, 1 or 2 (report_spill.c says why) */
    f->fd = room ? fcntl(fd, F_DUPFD_CLOEXEC, 3) : -1;
    tp_cpack_spilled *sp = f->fd >= 0 ? seg_room(t) : NULL;
    if (!sp) {
        int rc = f->fd < 0 ? TPROF_ERR_IO : TPROF_ERR_NO_MEMORY;
        if (f->fd >= 0) close(f->fd);
        pthread_mutex_lock(&store_mu);
        summaries_held -= room;
        pthread_mutex_unlock(&store_mu);
        free(f);
        return rc;
    }
    f->summary = 1;
    f->refs = 1;
    sp->seg[sp->n++] = (cseg){f, off, len};
    sp->bytes += len;
    return TPROF_OK;
}

/* After bytes were added to t's buffer: writes them out once they reach the threshold (or,
 * after a write-out failed, twice the length it failed at). */
static void maybe_spill(tp_thread *t, tp_cpack *st) {
    size_t at = atomic_load_explicit(&spill_at, memory_order_relaxed);
    if (!at || t->counters_packed_len < (st->spill_next > at ? st->spill_next : at)) return;
    if (spill(t) != 0) st->spill_next = t->counters_packed_len * 2;
}

static void spilled_free(tp_cpack_spilled *sp) {
    if (!sp) return;
    for (size_t k = 0; k < sp->n; k++) release(sp->seg[k].file);
    free(sp->seg);
    free(sp);
}

uint64_t tp_counters_packed_size(const tp_thread *t) {
    return (t->counters_spilled ? t->counters_spilled->bytes : 0) + t->counters_packed_len;
}

/* Whether summary f is still the file decoded (device, inode, size, modification time). */
static int unchanged(const cstore *f) {
    struct stat st;
    return fstat(f->fd, &st) == 0 && st.st_dev == f->id.st_dev && st.st_ino == f->id.st_ino &&
           st.st_size == f->id.st_size && st.st_mtim.tv_sec == f->id.st_mtim.tv_sec &&
           st.st_mtim.tv_nsec == f->id.st_mtim.tv_nsec;
}

/* n bytes at off of file f into b: TPROF_OK, or TPROF_ERR_IO. A summary is checked after
 * the read (a write changes the time before its bytes land: one during the read is seen). */
static int seg_read(const cstore *f, void *b, size_t n, uint64_t off) {
    int rc = tp_spill_pread_all(f->fd, b, n, off);
    return rc == TPROF_OK && f->summary && !unchanged(f) ? TPROF_ERR_IO : rc;
}

static int packed_read(const tp_thread *t, uint64_t off, void *b, size_t n) {
    if (off > tp_counters_packed_size(t) || n > tp_counters_packed_size(t) - off)
        return TPROF_ERR_INVALID_ARG;
    uint8_t *q = b;
    const tp_cpack_spilled *sp = t->counters_spilled;
    uint64_t at = 0; /* where segment k starts in the packed bytes */
    for (size_t k = 0; sp && k < sp->n && n; at += sp->seg[k++].len) {
        const cseg *g = &sp->seg[k];
        if (off >= at + g->len) continue;
        size_t in = (size_t)(off - at), take = g->len - in;
        if (take > n) take = n;
        int rc = seg_read(g->file, q, take, g->off + in);
        if (rc != TPROF_OK) return rc;
        q += take, off += take, n -= take;
    }
    if (n) memcpy(q, t->counters_packed + (off - at), n);
    return TPROF_OK;
}

int tp_counters_packed_read(const tp_thread *t, uint64_t off, void *b, size_t n) {
    int rc = packed_read(t, off, b, n);
    if (rc == TPROF_ERR_IO) read_failed();
    return rc;
}

uint8_t *tp_cpack_reserve(tp_thread *t, tp_cpack *st, size_t n) {
    if (st->cap - t->counters_packed_len < n || !t->counters_packed) {
        size_t nc = st->cap ? st->cap : 256;
        while (nc - t->counters_packed_len < n) nc *= 2;
        uint8_t *nb = tp_realloc(t->counters_packed, nc);
        if (!nb) return NULL;
        t->counters_packed = nb;
        st->cap = nc;
    }
    return t->counters_packed + t->counters_packed_len;
}

void tp_cpack_commit(tp_thread *t, tp_cpack *st, size_t n) {
    t->counters_packed_len += n;
    maybe_spill(t, st);
}

/* Shrinks what was allocated as it grew to what it holds (a failed shrink keeps it). */
static void fit(void **a, size_t size) {
    void *f = tp_realloc(*a, size ? size : 1);
    if (f) *a = f;
}

void tp_cpack_finish(tp_thread *t) {
    if (!t->counters_packed) return;
    if (t->counters_spilled && t->counters_packed_len) (void)spill(t);
    fit((void **)&t->counters_packed, t->counters_packed_len);
}

void tp_thread_free_counters(tp_thread *t) {
    free(t->counters);
    free(t->counters_packed);
    free(t->counter_names);
    spilled_free(t->counters_spilled);
    t->counters = NULL;
    t->counters_packed = NULL;
    t->counter_names = NULL;
    t->counters_spilled = NULL;
    t->ncounters = t->cap_counters = t->counters_packed_len = t->ncounter_names = 0;
}

/* ---- packing ---- */

void tp_cpack_free(tp_cpack *st) {
    free(st->last);
    memset(st, 0, sizeof *st);
}

/* The index of name in t's table, the one predicted first; t's table size when it is new. */
static size_t name_index(const tp_thread *t, size_t pred, const char *name) {
    if (pred < t->ncounter_names && t->counter_names[pred] == name) return pred;
    for (size_t i = 0; i < t->ncounter_names; i++)
        if (t->counter_names[i] == name) return i;
    /* the run interns its strings, but a table may have been given equal text elsewhere */
    for (size_t i = 0; i < t->ncounter_names; i++)
        if (!strcmp(t->counter_names[i], name)) return i;
    return t->ncounter_names;
}

static int add_name(tp_thread *t, tp_cpack *st, const char *name) {
    if (t->ncounter_names >= TP_CPACK_NAMES) return 1;
    const char **nn = tp_realloc(t->counter_names, (t->ncounter_names + 1) * sizeof *nn);
    if (!nn) return TPROF_ERR_NO_MEMORY;
    t->counter_names = nn;
    if (st->cap_last <= t->ncounter_names) {
        size_t nc = st->cap_last ? st->cap_last * 2 : 16;
        tp_cpack_last *nl = tp_realloc(st->last, nc * sizeof *nl);
        if (!nl) return TPROF_ERR_NO_MEMORY;
        st->last = nl;
        st->cap_last = nc;
    }
    st->last[t->ncounter_names] = (tp_cpack_last){0, FORM_RAW};
    nn[t->ncounter_names++] = name;
    return 0;
}

/* The name index predicted after index `prev` when `seen` names have been met so far: the
 * next in the cycle (a reader counts the names met as it goes, as they are numbered in the
 * order they are met). */
static size_t predict(size_t prev, size_t seen) { return seen ? (prev + 1) % seen : 0; }

int tp_counter_append(tp_thread *t, tp_cpack *st, const tp_counter *c) {
    if (!tp_cpack_reserve(t, st, ELEM_MAX)) return TPROF_ERR_NO_MEMORY;
    size_t pred = predict(st->name, t->ncounter_names);
    size_t idx = name_index(t, pred, c->name);
    if (idx == t->ncounter_names) {
        int rc = add_name(t, st, c->name);
        if (rc) return rc;
    }
    int64_t s = 0;
    int form = form_of(c->value, &s);
    uint8_t *b = t->counters_packed + t->counters_packed_len;
    size_t n = tp_varint_put(b, tp_zigzag((uint64_t)idx - (uint64_t)pred) << 2 | (unsigned)form);
    n += tp_varint_put(b + n, tp_zigzag(c->ts - st->ts));
    tp_cpack_last *l = &st->last[idx];
    if (form == FORM_RAW) {
        memcpy(b + n, &c->value, 8);
        n += 8;
        s = 0;
    } else {
        uint64_t base = l->form == form ? (uint64_t)l->v : 0;
        n += tp_varint_put(b + n, tp_zigzag((uint64_t)s - base));
    }
    *l = (tp_cpack_last){s, (uint8_t)form};
    st->ts = c->ts;
    st->name = idx;
    t->ncounters++;
    tp_cpack_commit(t, st, n);
    return 0;
}

int tp_counter_it_init(tp_counter_it *it, const tp_thread *t) {
    memset(it, 0, sizeof *it);
    it->t = t;
    if (!t->counters_packed) return 0;
    it->p = t->counters_packed;
    it->end = it->p + t->counters_packed_len;
    it->total = tp_counters_packed_size(t);
    if (t->counters_spilled) { /* read through the window, from the start */
        it->win = tp_malloc(TP_CPACK_WINDOW);
        it->p = it->end = it->win;
    }
    it->last = tp_calloc(t->ncounter_names ? t->ncounter_names : 1, sizeof *it->last);
    if (!it->last || (t->counters_spilled && !it->win)) {
        it->bad = TPROF_ERR_NO_MEMORY;
        return TPROF_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < t->ncounter_names; i++) it->last[i].form = FORM_RAW;
    return 0;
}

/* Moves what is left in the window to its start and fills it from the packed bytes. */
static void refill(tp_counter_it *it) {
    size_t keep = (size_t)(it->end - it->p), take = TP_CPACK_WINDOW - keep;
    if (take > it->total - it->off) take = (size_t)(it->total - it->off);
    memmove(it->win, it->p, keep);
    it->p = it->win;
    it->end = it->win + keep;
    int rc = packed_read(it->t, it->off, it->win + keep, take);
    if (rc != TPROF_OK) {
        it->bad = rc;
        return;
    }
    it->off += take;
    it->end += take;
}

int tp_counter_next(tp_counter_it *it, tp_counter *c) {
    const tp_thread *t = it->t;
    if (it->bad || it->i >= t->ncounters) return 0;
    if (!t->counters_packed) {
        if (!t->counters) return it->bad = TPROF_ERR_CORRUPT, 0;
        *c = t->counters[it->i++];
        return 1;
    }
    if (it->win && it->end - it->p < ELEM_MAX && it->off < it->total) {
        refill(it);
        if (it->bad) return 0;
    }
    uint64_t h, d, z = 0;
    if (tp_varint_get(&it->p, it->end, &h) || tp_varint_get(&it->p, it->end, &d))
        return it->bad = TPROF_ERR_CORRUPT, 0;
    size_t pred = predict(it->name, it->seen);
    uint64_t idx = (uint64_t)pred + tp_unzigzag(h >> 2);
    int form = (int)(h & 3);
    /* a name is met first as the next index */
    if (idx > it->seen || idx >= t->ncounter_names || form > FORM_RAW)
        return it->bad = TPROF_ERR_CORRUPT, 0;
    if (idx == it->seen) it->seen++;
    tp_cpack_last *l = &it->last[idx];
    double v;
    if (form == FORM_RAW) {
        if (it->end - it->p < 8) return it->bad = TPROF_ERR_CORRUPT, 0;
        memcpy(&v, it->p, 8);
        it->p += 8;
        *l = (tp_cpack_last){0, FORM_RAW};
    } else {
        if (tp_varint_get(&it->p, it->end, &z)) return it->bad = TPROF_ERR_CORRUPT, 0;
        uint64_t base = l->form == form ? (uint64_t)l->v : 0;
        int64_t s = (int64_t)(base + tp_unzigzag(z));
        *l = (tp_cpack_last){s, (uint8_t)form};
        v = value_of(form, s);
    }
    it->ts += tp_unzigzag(d);
    it->name = (size_t)idx;
    *c = (tp_counter){t->counter_names[idx], it->ts, v};
    it->i++;
    return 1;
}

int tp_counter_it_done(tp_counter_it *it) {
    int rc = it->bad;
    if (!rc && it->t && it->t->counters_packed &&
        (it->i != it->t->ncounters || it->p != it->end ||
         (it->win ? it->off : (uint64_t)it->t->counters_packed_len) != it->total))
        rc = TPROF_ERR_CORRUPT;
    /* read back from a file, damage is the file's changing (what was written decodes) */
    if (!it->quiet && (rc == TPROF_ERR_IO || (rc == TPROF_ERR_CORRUPT && it->win)))
        read_failed();
    free(it->last);
    free(it->win);
    it->last = NULL;
    it->win = NULL;
    return rc;
}

int tp_thread_unpack_counters(tp_thread *t) {
    if (!t->counters_packed) return 0;
    tp_counter *a = tp_malloc((t->ncounters ? t->ncounters : 1) * sizeof *a);
    if (!a) return TPROF_ERR_NO_MEMORY;
    tp_counter_it it;
    size_t n = 0;
    if (tp_counter_it_init(&it, t) == 0)
        while (n < t->ncounters && tp_counter_next(&it, &a[n])) n++;
    int rc = tp_counter_it_done(&it);
    if (rc) {
        free(a);
        return rc;
    }
    tp_thread_free_counters(t); /* n is its count: the iterator read them all */
    t->counters = a;
    t->ncounters = t->cap_counters = n;
    return 0;
}

void tp_thread_pack_counters(tp_thread *t) {
    if (t->counters_packed) { /* packed as loaded */
        tp_cpack_finish(t);
        return;
    }
    if (!t->ncounters || !t->counters) return;
    tp_thread q = {0}; /* packed beside t, then swapped in */
    tp_cpack st = {0};
    int rc = 0;
    for (size_t i = 0; i < t->ncounters && !rc; i++)
        rc = tp_counter_append(&q, &st, &t->counters[i]);
    tp_cpack_free(&st);
    if (rc) {
        tp_thread_free_counters(&q);
        return;
    }
    tp_cpack_finish(&q);
    free(t->counters);
    t->counters = NULL;
    t->cap_counters = 0;
    t->counters_packed = q.counters_packed;
    t->counters_packed_len = q.counters_packed_len;
    t->counters_spilled = q.counters_spilled;
    t->counter_names = q.counter_names;
    t->ncounter_names = q.ncounter_names;
}
