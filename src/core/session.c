/*
 * session.c — the life of a trainprof session in one process: lazy start from a
 * configuration (core/config.c), the registry of per-thread rings, the flusher thread that
 * moves rings into the rank file and drives the capture sources (core/source.h), the
 * session's side of signal handling (signals.c) and fork handling, and shutdown at exit.
 *
 * Design points (docs/design.md §1, §3):
 *  - Nothing is started until something is recorded, so processes that record nothing
 *    (launchers, compilers) leave no file and no thread.
 *  - A signal that ends the process (signals.c) wakes the flusher through a semaphore
 *    (sem_post is async-signal-safe) and waits, bounded, while it writes what is recorded
 *    and the end record naming the signal; signals.c then lets the default action happen.
 *  - No lock a recording thread can need is held across I/O: the flusher copies the
 *    registry and takes the process stream under the session lock, then writes with no
 *    lock held; the rank file is the flusher's alone (core/writer.c). Threads that wait for
 *    the flusher (tprof_flush, tprof_shutdown) stop waiting when storage stops answering.
 *  - After fork() the child drops its copy of every ring and starts its own file lazily.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <semaphore.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "internal.h"
#include "per_step.h"
#include "metrics.h"
#include "signals.h"
#include "source.h"
#include "threads.h"
#include "writer.h"

_Atomic int tprof__g_state = TPROF__UNINIT;
__thread tprof__thread *tprof__tls __attribute__((tls_model("initial-exec")));
int tprof__maybe_on = 1;

/* Every state change goes through here so the header's inline switch follows it. */
static void set_state(int st) {
    atomic_store(&tprof__g_state, st);
    /* not recording: another NVTX tool may be attached, and then the API emits to it */
    if (st == TPROF__OFF) tprof__nvtx_emit_setup();
    __atomic_store_n(&tprof__maybe_on,
                     st == TPROF__ON || st == TPROF__UNINIT || st == TPROF__STARTING ||
                         (st == TPROF__OFF && tprof__emit_on),
                     __ATOMIC_RELAXED);
}
int tprof__log_level = TPROF_LOG_WARN;

#define TPROF__MIN_RING (64u * 1024u)
#define TPROF__PROC_MAX (4u << 20) /* process stream bound between flushes */
#define TPROF__MAX_DOMAINS 4096u

static struct {
    tprof_config cfg;
    char dir[PATH_MAX];
    char run_id[64];
    int no_file;            /* TRAINPROF_NO_FILE=1: live metrics only, no rank file */
    pthread_mutex_t lock;   /* registry, process stream, registries of names; never held
                             * across I/O: the rank file belongs to the flusher alone
                             * (core/writer.c) */
    pthread_mutex_t busy;   /* held by the flusher except while it sleeps or waits on
                             * storage: fork() waits for it, so a child never inherits the
                             * flusher stopped inside malloc, fopen or zlib with their locks
                             * taken (such a child hangs under ASan, whose allocator GCC 12
                             * does not lock around fork) */
    tprof__thread **threads;
    uint32_t nthreads;
    uint32_t next_serial;
    _Atomic uint64_t lost_threads; /* threads beyond max_threads (no ring) */
    _Atomic uint64_t lost_events;  /* their events: counted as drops of the process stream */
    uint8_t *proc;          /* process stream */
    size_t proc_len, proc_cap;
    uint64_t proc_dropped;
    uint64_t proc_dropped_written; /* last drop count written for the process stream */
    pthread_t flusher;
    int flusher_running;
    /* Wakes the flusher: a semaphore, not a descriptor, since a program that closes its
     * descriptors would close it too; sem_post is async-signal-safe (POSIX). */
    sem_t wake;
    _Atomic int stop;
    _Atomic int pending_signal;
    _Atomic int final_done; /* the flusher's final write after a fatal signal is done */
    _Atomic int flush_asked; /* tprof_flush: the next pass writes even while backing off */
    _Atomic uint64_t alive_ns; /* the flusher's last sign of progress (CLOCK_MONOTONIC) */
    _Atomic uint64_t io_since_ns; /* when its storage call began; 0 outside one */
    int flusher_done;       /* the flusher finished its work (under flush_lock) */
    _Atomic int end_written; /* the end record is in the file (fsync may still run) */
    int busy_held;          /* the flusher holds busy outside its storage calls */
    /* the flusher's own: the registry as a pass found it, and the process stream it took */
    tprof__thread **snap;
    uint8_t *pend;
    size_t pend_len, pend_cap;
    _Atomic int fatal_signal; /* a signal whose default action will end the process */
    int api_cfg;            /* started by tprof_init: a forked child restarts from S.cfg */
    pid_t pid;              /* the process the session belongs to */
    pthread_mutex_t flush_lock;
    pthread_cond_t flush_cond;
    uint64_t flush_gen;     /* completed flush passes */
    int flusher_up;         /* the flusher reached flusher_main (under flush_lock) */
    uint64_t start_rt, start_mono;
    pthread_key_t key;
    int key_made;
    /* domains and categories survive fork: they are re-emitted into a child's file */
    char *domains[TPROF__MAX_DOMAINS];
    _Atomic uint32_t ndomains;
    struct tprof__cat { uint32_t domain, id; char *name; } *cats;
    uint32_t ncats, cat_cap;
    struct tprof__kv { char *key, *value; } *caps;
    uint32_t ncaps;
    /* live metrics (metrics_feed.c): totals the flusher keeps while metrics are on */
    uint64_t m_bytes;        /* bytes drained from rings */
    uint64_t m_freed_drops;  /* drops of threads already freed */
} S = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .busy = PTHREAD_MUTEX_INITIALIZER,
       .flush_lock = PTHREAD_MUTEX_INITIALIZER, .flush_cond = PTHREAD_COND_INITIALIZER};

/* ---------------------------------------------------------------- log */

void tprof__log(int level, const char *fmt, ...) {
    if (level > tprof__log_level) return;
    char buf[1024];
    static const char *names[] = {"error", "warning", "info", "debug"};
    int n = snprintf(buf, sizeof buf, "trainprof[%d]: %s: ", (int)getpid(),
                     names[level < 0 ? 0 : level > 3 ? 3 : level]);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof buf) n += vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof buf - 1) n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    /* one write so lines from ranks do not interleave */
    ssize_t w = write(2, buf, (size_t)n);
    (void)w;
}

/* ---------------------------------------------------------------------------- clock */

uint64_t tprof_now_ns(void) { return tprof__now(); }

static uint64_t realtime_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------ process stream */

static int proc_append(const void *rec, size_t n) {
    if (S.proc_len + n > TPROF__PROC_MAX) {
        S.proc_dropped++;
        return TPROF_ERR_LIMIT;
    }
    if (S.proc_len + n > S.proc_cap) {
        size_t cap = S.proc_cap ? S.proc_cap : 4096;
        while (cap < S.proc_len + n) cap *= 2;
        uint8_t *p = realloc(S.proc, cap);
        if (!p) return TPROF_ERR_NO_MEMORY;
        S.proc = p;
        S.proc_cap = cap;
    }
    memcpy(S.proc + S.proc_len, rec, n);
    S.proc_len += n;
    return TPROF_OK;
}

/* Builds a record into `out` (at least TPROF_MAX_RECORD bytes); returns its size. */
static size_t build_record(uint8_t *out, uint16_t kind, uint32_t arg, uint64_t ts,
                           const void *payload, size_t pl_bytes, const char *s1,
                           const char *s2) {
    tprof_rec *r = (tprof_rec *)out;
    size_t n = sizeof *r;
    if (pl_bytes) memcpy(out + n, payload, pl_bytes);
    n += pl_bytes;
    const char *ss[2] = {s1, s2};
    for (int i = 0; i < 2; i++) {
        if (!ss[i]) continue;
        size_t l = strlen(ss[i]);
        if (l > TPROF_MAX_INLINE) l = TPROF_MAX_INLINE;
        memcpy(out + n, ss[i], l);
        out[n + l] = 0;
        n += l + 1;
    }
    size_t total = tprof__align8(n);
    memset(out + n, 0, total - n);
    r->kind = kind;
    r->size = (uint16_t)total;
    r->arg = arg;
    r->ts_ns = ts;
    return total;
}

/* caller holds S.lock */
static int proc_record_locked(uint16_t kind, uint32_t arg, const void *payload,
                              size_t pl_bytes, const char *s1, const char *s2) {
    _Alignas(8) uint8_t rec[2 * TPROF_MAX_INLINE + 64];
    size_t n = build_record(rec, kind, arg, tprof__now(), payload, pl_bytes, s1, s2);
    return proc_append(rec, n);
}

int tprof__proc_record(uint16_t kind, uint32_t arg, const void *payload, size_t pl_bytes,
                       const char *s1, const char *s2) {
    pthread_mutex_lock(&S.lock);
    int rc = proc_record_locked(kind, arg, payload, pl_bytes, s1, s2);
    pthread_mutex_unlock(&S.lock);
    return rc;
}

int tprof__set_meta(const char *key, const char *value) {
    double x;
    if (tprof__per_step_max(key) > 0 && !tprof__per_step_parse(key, value, &x))
        return TPROF_ERR_INVALID_ARG; /* a throughput figure that is not one */
    tprof__metrics_meta(key, value); /* throughput per step, rank labels */
    return tprof__proc_record(TPROF_REC_META, 0, NULL, 0, key, value);
}

void tprof__set_meta_max(tprof__meta_max *m, const char *key, uint64_t n) {
    pthread_mutex_lock(&m->lock);
    if (n > m->written) {
        m->written = n;
        char v[24];
        snprintf(v, sizeof v, "%llu", (unsigned long long)n);
        tprof__set_meta(key, v);
    }
    pthread_mutex_unlock(&m->lock);
}

static char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

/* Lock-free lookup first: the table only grows, and a slot is published (release) before
 * the count that covers it, so the API's push_ex takes no lock once its domain exists. */
uint32_t tprof__domain_id(const char *name) {
    if (!name || !*name) return 0;
    uint32_t n = atomic_load_explicit(&S.ndomains, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(S.domains[i], name)) return i + 1;
    pthread_mutex_lock(&S.lock);
    uint32_t id = 0;
    n = atomic_load_explicit(&S.ndomains, memory_order_relaxed);
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(S.domains[i], name)) { id = i + 1; break; }
    if (!id && n < TPROF__MAX_DOMAINS) {
        char *copy = xstrdup(name);
        if (copy) {
            S.domains[n] = copy;
            atomic_store_explicit(&S.ndomains, n + 1, memory_order_release);
            id = n + 1;
            if (atomic_load(&tprof__g_state) == TPROF__ON)
                proc_record_locked(TPROF_REC_DOMAIN, id, NULL, 0, copy, NULL);
        }
    }
    pthread_mutex_unlock(&S.lock);
    return id; /* 0 (the default domain) past the bound */
}

const char *tprof__domain_name(uint32_t domain) {
    uint32_t n = atomic_load_explicit(&S.ndomains, memory_order_acquire);
    return domain >= 1 && domain <= n ? S.domains[domain - 1] : NULL;
}

const char *tprof__category_name(uint32_t domain, uint32_t category) {
    pthread_mutex_lock(&S.lock);
    const char *n = NULL;
    for (uint32_t i = 0; i < S.ncats; i++)
        if (S.cats[i].domain == domain && S.cats[i].id == category) n = S.cats[i].name;
    pthread_mutex_unlock(&S.lock);
    return n; /* names live as long as the process (replaced ones are not freed while read) */
}

void tprof__name_category(uint32_t domain, uint32_t category, const char *name) {
    if (!name) return;
    pthread_mutex_lock(&S.lock);
    struct tprof__cat *c = NULL;
    for (uint32_t i = 0; i < S.ncats; i++)
        if (S.cats[i].domain == domain && S.cats[i].id == category) c = &S.cats[i];
    char *copy = xstrdup(name);
    if (copy && !c && S.ncats < 65536) {
        if (S.ncats == S.cat_cap) {
            uint32_t cap = S.cat_cap ? S.cat_cap * 2 : 16;
            struct tprof__cat *n = realloc(S.cats, cap * sizeof *n);
            if (n) { S.cats = n; S.cat_cap = cap; }
        }
        if (S.ncats < S.cat_cap) {
            c = &S.cats[S.ncats++];
            c->domain = domain;
            c->id = category;
            c->name = NULL;
        }
    }
    if (c && copy) {
        free(c->name);
        c->name = copy;
        copy = NULL;
        tprof_pl_category pl = {domain, 0};
        if (atomic_load(&tprof__g_state) == TPROF__ON)
            proc_record_locked(TPROF_REC_CATEGORY, category, &pl, sizeof pl, c->name, NULL);
    }
    free(copy);
    pthread_mutex_unlock(&S.lock);
}

void tprof__capability(const char *name, const char *status) {
    pthread_mutex_lock(&S.lock);
    struct tprof__kv *kv = NULL;
    for (uint32_t i = 0; i < S.ncaps; i++)
        if (!strcmp(S.caps[i].key, name)) kv = &S.caps[i];
    if (!kv) {
        struct tprof__kv *n = realloc(S.caps, (S.ncaps + 1) * sizeof *n);
        if (n) {
            S.caps = n;
            kv = &S.caps[S.ncaps];
            kv->key = xstrdup(name);
            kv->value = NULL;
            if (kv->key) S.ncaps++;
            else kv = NULL;
        }
    }
    if (kv) {
        free(kv->value);
        kv->value = xstrdup(status);
        char key[160];
        snprintf(key, sizeof key, "capability.%s", name);
        if (atomic_load(&tprof__g_state) == TPROF__ON && kv->value)
            proc_record_locked(TPROF_REC_META, 0, NULL, 0, key, kv->value);
    }
    pthread_mutex_unlock(&S.lock);
}

/* Re-emit everything the process stream must hold at the start of a file (a new session
 * or a forked child): domains, categories, capabilities. Caller holds S.lock. */
static void emit_registries_locked(void) {
    uint32_t nd = atomic_load(&S.ndomains);
    for (uint32_t i = 0; i < nd; i++)
        proc_record_locked(TPROF_REC_DOMAIN, i + 1, NULL, 0, S.domains[i], NULL);
    for (uint32_t i = 0; i < S.ncats; i++) {
        tprof_pl_category pl = {S.cats[i].domain, 0};
        proc_record_locked(TPROF_REC_CATEGORY, S.cats[i].id, &pl, sizeof pl, S.cats[i].name,
                           NULL);
    }
    for (uint32_t i = 0; i < S.ncaps; i++) {
        char key[160];
        snprintf(key, sizeof key, "capability.%s", S.caps[i].key);
        if (S.caps[i].value) proc_record_locked(TPROF_REC_META, 0, NULL, 0, key, S.caps[i].value);
    }
}

/* ---------------------------------------------------------------------- rank file I/O */

/* The writer (core/writer.c) calls these around each system call that may wait on storage:
 * the flusher lets go of `busy` there, so a fork() of the program never waits for storage
 * (inside the system call the flusher holds no lock of libc's either). busy_held: the
 * flusher holds busy outside those calls; flusher only. */
void tprof__flusher_io_begin(void) {
    atomic_store_explicit(&S.io_since_ns, tprof__now(), memory_order_relaxed);
    if (S.busy_held) pthread_mutex_unlock(&S.busy);
}

void tprof__flusher_io_end(void) {
    uint64_t now = tprof__now();
    atomic_store_explicit(&S.io_since_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&S.alive_ns, now, memory_order_relaxed);
    if (S.busy_held) pthread_mutex_lock(&S.busy);
}

static void flusher_busy(int on) {
    if (on) {
        pthread_mutex_lock(&S.busy);
        S.busy_held = 1;
    } else {
        S.busy_held = 0;
        pthread_mutex_unlock(&S.busy);
    }
}

#define TPROF__CHUNK_MAX (4u << 20) /* the default ring: no record walk by default */

/* Drains one thread's ring into chunks of at most TPROF__CHUNK_MAX bytes, never splitting
 * a record. Flusher only (the ring's one consumer); no lock: the owner thread only moves
 * head, and a ring is freed by the flusher alone. */
static void drain_thread(tprof__thread *t) {
    uint64_t head = atomic_load_explicit(&t->head, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&t->tail, memory_order_relaxed);
    uint64_t dropped = atomic_load_explicit(&t->dropped, memory_order_relaxed);
    uint64_t ring = t->mask + 1;
    while (tail < head) {
        uint64_t off = tail & t->mask;
        uint64_t n = head - tail;
        if (n > ring - off) n = ring - off; /* up to the end of the lap */
        if (n > TPROF__CHUNK_MAX) {
            /* cut at a record boundary */
            uint64_t cut = 0;
            while (cut < n) {
                const tprof_rec *r = (const tprof_rec *)(t->buf + off + cut);
                uint64_t sz = r->size < 8 ? 8 : r->size;
                if (cut + sz > TPROF__CHUNK_MAX) break;
                cut += sz;
            }
            n = cut ? cut : n;
        }
        if (TPROF_UNLIKELY(TPROF__METRICS_ON())) {
            tprof__metrics_scan(t, t->buf + off, (size_t)n); /* steps, for live metrics */
            S.m_bytes += n;
        }
        /* a chunk that cannot be written is dropped and counted by the writer: the ring
         * must make room for the thread either way */
        tprof__writer_thread_chunk(t, dropped, t->buf + off, (size_t)n);
        tail += n;
        atomic_store_explicit(&t->tail, tail, memory_order_release);
    }
}

/* Moves the process stream into the flusher's buffer (S.pend), behind what an earlier pass
 * could not write; past TPROF__PROC_MAX there it stays where it is (and, full, counts its
 * drops) until writing resumes. Caller holds S.lock: a copy, no I/O. */
static void take_proc_locked(void) {
    if (!S.proc_len) return;
    if (!S.pend_len) {
        uint8_t *b = S.pend;
        size_t cap = S.pend_cap;
        S.pend = S.proc;
        S.pend_cap = S.proc_cap;
        S.pend_len = S.proc_len;
        S.proc = b;
        S.proc_cap = cap;
        S.proc_len = 0;
        return;
    }
    size_t need = S.pend_len + S.proc_len;
    if (need > TPROF__PROC_MAX) return;
    if (need > S.pend_cap) {
        uint8_t *b = realloc(S.pend, need);
        if (!b) return;
        S.pend = b;
        S.pend_cap = need;
    }
    memcpy(S.pend + S.pend_len, S.proc, S.proc_len);
    S.pend_len = need;
    S.proc_len = 0;
}

/* The drops no thread ring can carry: process-stream overflow and the events of threads
 * that got no ring. Caller holds S.lock. */
static uint64_t proc_dropped_locked(void) {
    return S.proc_dropped + atomic_load(&S.lost_events);
}

/* Writes the process stream taken into S.pend; its chunk header carries `dropped`. Its
 * records (the rank, capabilities, names of domains) are worth a retry: a chunk that
 * cannot be written is kept and offered again on the next pass, except on the `final` one,
 * where it is counted as lost. Flusher only. */
static void flush_proc(uint64_t dropped, int final) {
    if (S.pend_len == 0 && dropped == S.proc_dropped_written) return;
    if (tprof__writer_chunk(0, (uint32_t)getpid(), dropped, S.pend, S.pend_len, !final) == 0 ||
        final) {
        S.proc_dropped_written = dropped;
        S.pend_len = 0;
    }
}

static void free_thread(tprof__thread *t) {
    tprof__writer_thread_gone(t);
    tprof__metrics_thread_free(t->m_scan);
    for (uint32_t i = 0; i < t->str_cap; i++) free(t->strs[i].str);
    free(t->strs);
    free(t->buf);
    free(t);
}

/* One pass of the flusher: the process stream, then every ring; threads that exited are
 * freed once drained. S.lock is taken twice, briefly, and never across a write: to take the
 * process stream and a copy of the registry, then to remove the threads freed. A thread that
 * registers, names a domain or sets metadata meanwhile waits for a copy, never for storage.
 * `final`: the last pass, which tries writing even while backing off after errors. */
static void flush_pass(int final) {
    if (atomic_exchange(&S.flush_asked, 0) || final) tprof__writer_retry_now();
    pthread_mutex_lock(&S.lock);
    /* process stream first so that domains are defined before the ranges that use them
     * (the reader does not depend on it, but a torn file keeps more meaning) */
    take_proc_locked();
    uint64_t proc_dropped = proc_dropped_locked();
    uint32_t n = S.nthreads;
    memcpy(S.snap, S.threads, n * sizeof *S.snap);
    pthread_mutex_unlock(&S.lock);

    flush_proc(proc_dropped, 0);
    uint32_t nfreed = 0;
    for (uint32_t i = 0; i < n; i++) {
        tprof__thread *t = S.snap[i];
        int exited = atomic_load_explicit(&t->exited, memory_order_acquire);
        drain_thread(t);
        if (!exited) continue;
        /* keep its drop count: add a final empty chunk if it dropped anything */
        uint64_t d = atomic_load_explicit(&t->dropped, memory_order_relaxed);
        if (d) tprof__writer_thread_chunk(t, d, NULL, 0);
        S.m_freed_drops += d;
        S.snap[nfreed++] = t; /* in registry order */
    }

    uint64_t drops = 0;
    pthread_mutex_lock(&S.lock);
    if (nfreed) {
        /* the registry still starts with the threads copied (only this thread removes),
         * so the freed ones are found in one walk */
        uint32_t w = 0, k = 0;
        for (uint32_t i = 0; i < S.nthreads; i++) {
            if (k < nfreed && S.threads[i] == S.snap[k]) {
                k++;
                continue;
            }
            S.threads[w++] = S.threads[i];
        }
        S.nthreads = w;
    }
    int metrics = TPROF_UNLIKELY(TPROF__METRICS_ON());
    if (metrics) {
        drops = S.m_freed_drops + proc_dropped_locked();
        for (uint32_t i = 0; i < S.nthreads; i++)
            drops += atomic_load_explicit(&S.threads[i]->dropped, memory_order_relaxed);
    }
    pthread_mutex_unlock(&S.lock);
    for (uint32_t k = 0; k < nfreed; k++) free_thread(S.snap[k]);
    if (metrics) tprof__metrics_pass(drops, S.m_bytes);
    atomic_store_explicit(&S.alive_ns, tprof__now(), memory_order_relaxed);
}

/* The end of the file: drop totals and the END_OF_FILE record, written at once (with the
 * writer's error counts before them), then fsync. Flusher only. `reason`: the signal that
 * ends the process, 0 for a normal end (docs/format.md). */
static void write_end_record(int reason) {
    pthread_mutex_lock(&S.lock);
    uint64_t total = proc_dropped_locked() + S.m_freed_drops;
    uint64_t lost = atomic_load(&S.lost_threads);
    if (lost) {
        char v[32];
        snprintf(v, sizeof v, "%llu", (unsigned long long)lost);
        proc_record_locked(TPROF_REC_META, 0, NULL, 0, "threads_over_limit", v);
    }
    for (uint32_t i = 0; i < S.nthreads; i++) total += atomic_load(&S.threads[i]->dropped);
    tprof_pl_clock pl = {realtime_now(), tprof__now(), total};
    proc_record_locked(TPROF_REC_END_OF_FILE, (uint32_t)reason, &pl, sizeof pl, NULL, NULL);
    pthread_mutex_unlock(&S.lock);
    tprof__writer_retry_now();
    tprof__writer_status();
    /* twice: what an earlier pass kept, then what did not fit behind it */
    for (int i = 0; i < 2; i++) {
        pthread_mutex_lock(&S.lock);
        take_proc_locked();
        uint64_t dropped = proc_dropped_locked();
        pthread_mutex_unlock(&S.lock);
        flush_proc(dropped, 1);
    }
    tprof__writer_final(); /* the counts last, so that they include the end's own chunk */
    atomic_store(&S.end_written, !tprof__writer_failing());
    tprof__writer_sync();
}

/* Wakes the flusher. Async-signal-safe (sem_post). */
static void wake_flusher(void) { sem_post(&S.wake); }

/* The flusher's sleep: until woken or `ms` milliseconds have passed (CLOCK_MONOTONIC, so
 * a change of the wall clock cannot stretch it); wakes that came meanwhile count as one. */
static void flusher_sleep(int ms) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (sem_clockwait(&S.wake, CLOCK_MONOTONIC, &until) != 0 && errno == EINTR) {
    }
    while (sem_trywait(&S.wake) == 0) {
    }
}

/* A thread that waits for the flusher (tprof_flush, tprof_shutdown) stops waiting once one
 * storage call of the flusher (a write of at most 1 MiB, ftruncate, fsync) has lasted this
 * long: storage that does not answer (a hung network file system, a full pipe) must not hang
 * the program. Outside storage calls the flusher may legitimately take longer (a vendor
 * library's first initialisation can take seconds), so there the bound is TPROF__HANG_MS
 * without any sign of progress. */
#define TPROF__STALL_MS 2000
#define TPROF__HANG_MS 30000

static int flusher_stalled(void) {
    uint64_t now = tprof__now();
    uint64_t since = atomic_load_explicit(&S.io_since_ns, memory_order_relaxed);
    if (since && now > since && now - since > (uint64_t)TPROF__STALL_MS * 1000000ull) return 1;
    uint64_t alive = atomic_load_explicit(&S.alive_ns, memory_order_relaxed);
    return now > alive && now - alive > (uint64_t)TPROF__HANG_MS * 1000000ull;
}

/* For a recording thread that is not the application's (CUPTI's buffer thread, whose bursts
 * of tens of thousands of records outran the flusher and dropped 3621 of them in a DDP run on
 * an H200): waits until t's ring has `bytes` free (at most half the ring), waking the
 * flusher every 0.25 ms, for at most max_ms. Returns 1 when there is room, 0 otherwise (the
 * caller then records as usual and a full ring counts its drops). Returns at once on the
 * flusher itself or without one. Cost when there is room: two atomic loads. */
int tprof__ring_wait_room(tprof__thread *t, uint32_t bytes, int max_ms) {
    uint64_t ring = t->mask + 1;
    if (bytes > ring / 2) bytes = (uint32_t)(ring / 2);
    for (int i = 0;; i++) {
        uint64_t head = atomic_load_explicit(&t->head, memory_order_relaxed);
        uint64_t tail = atomic_load_explicit(&t->tail, memory_order_acquire);
        if (ring - (head - tail) >= bytes) return 1;
        if (i >= max_ms * 4 || !S.flusher_running || pthread_equal(pthread_self(), S.flusher))
            return 0;
        wake_flusher();
        struct timespec ts = {0, 250000};
        nanosleep(&ts, NULL);
    }
}

/* ------------------------------------------------------------- signals (signals.c) */

/* Each of these runs in a signal handler: atomics, sem_post (wake_flusher), nanosleep and
 * write() only. */

static int flusher_can_answer(void) {
    return atomic_load(&tprof__g_state) == TPROF__ON && S.flusher_running;
}

void tprof__session_signal_notify(int sig) {
    if (!flusher_can_answer()) return;
    int expected = 0;
    atomic_compare_exchange_strong(&S.pending_signal, &expected, sig);
    wake_flusher();
}

int tprof__session_signal_final(int sig, int wait_ms) {
    if (atomic_load(&S.final_done)) return 1;
    if (flusher_can_answer()) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&S.fatal_signal, &expected, sig)) wake_flusher();
    }
    if (!atomic_load(&S.fatal_signal)) return 0; /* no session to finish */
    for (int ms = 0; ms < wait_ms && !atomic_load(&S.final_done); ms++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&S.final_done) != 0;
}

int tprof__session_on_flusher(void) {
    return S.flusher_running && pthread_equal(pthread_self(), S.flusher);
}

/* The flusher faulted: its state (and S.lock, which it may hold) cannot be trusted, so the
 * end record goes out as one chunk built here, after whatever the file already holds. A
 * reader that finds a chunk cut short before it skips that one as damage. */
void tprof__session_signal_emergency(int sig) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&S.fatal_signal, &expected, sig)) return;
    if (atomic_load(&tprof__g_state) == TPROF__ON) {
        struct {
            tprof_chunk_header ch;
            tprof_rec r;
            tprof_pl_clock pl;
        } end;
        memset(&end, 0, sizeof end);
        struct timespec rt, mono;
        clock_gettime(CLOCK_REALTIME, &rt);
        clock_gettime(CLOCK_MONOTONIC, &mono);
        /* the threads' drops are in their chunk headers; their rings may be mid-free */
        uint64_t dropped = atomic_load(&S.lost_events) + S.proc_dropped;
        end.r.kind = TPROF_REC_END_OF_FILE;
        end.r.size = (uint16_t)(sizeof end.r + sizeof end.pl);
        end.r.arg = (uint32_t)sig;
        end.r.ts_ns = (uint64_t)mono.tv_sec * 1000000000ull + (uint64_t)mono.tv_nsec;
        end.pl.realtime_ns = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
        end.pl.mono_ns = end.r.ts_ns;
        end.pl.dropped_total = dropped;
        end.ch.magic = TPROF_CHUNK_MAGIC;
        end.ch.payload_bytes = (uint32_t)(sizeof end.r + sizeof end.pl);
        end.ch.crc32 = tprof__crc32(0, &end.r, sizeof end.r + sizeof end.pl);
        end.ch.thread_serial = 0;
        end.ch.os_tid = (uint32_t)S.pid;
        end.ch.dropped = dropped;
        tprof__writer_emergency(&end, sizeof end);
    }
    atomic_store(&S.final_done, 1);
}

/* The flusher's last work when a signal ends the process: what is recorded and the end
 * record first, so that the file is complete even if what follows blocks (the interrupted
 * thread may be inside the CUDA driver or NCCL, holding their locks); then, for a signal sent
 * from outside, the GPU and NCCL records CUPTI and the plugin still hold, and the end record
 * again after them (a reader keeps the last one). The handler's wait is bounded either way. */
static void final_on_signal(int sig) {
    flush_pass(1);
    write_end_record(sig);
    if (!tprof__signal_synchronous(sig)) {
        tprof__sources_flush();
        set_state(TPROF__DOWN);
        flush_pass(1); /* what threads wrote while the state changed */
        write_end_record(sig);
    }
    set_state(TPROF__DOWN);
}

/* ------------------------------------------------------------------------ flusher */

static void *flusher_main(void *arg) {
    (void)arg;
    /* the job's signals go to the job's threads; a fault of this thread's own still reaches
     * signals.c, which then finishes the file without it */
    sigset_t all;
    sigfillset(&all);
    for (int sig = 1; sig < NSIG; sig++)
        if (tprof__signal_synchronous(sig) && sig != SIGABRT) sigdelset(&all, sig);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
#ifdef __linux__
    pthread_setname_np(pthread_self(), "trainprof-flush");
#endif
    atomic_store_explicit(&S.alive_ns, tprof__now(), memory_order_relaxed);
    /* running our code now: the thread library's and sanitizers' setup of this thread is
     * over (see start_flusher) */
    pthread_mutex_lock(&S.flush_lock);
    S.flusher_up = 1;
    pthread_cond_broadcast(&S.flush_cond);
    pthread_mutex_unlock(&S.flush_lock);
    int interval = (int)S.cfg.flush_interval_ms;
    if (interval <= 0) interval = 50;
    tprof__sources_start(&S.cfg);
    for (;;) {
        flusher_busy(1);
        atomic_store_explicit(&S.alive_ns, tprof__now(), memory_order_relaxed);
        int stopping = atomic_load(&S.stop);
        /* the capture sources' periodic work (src/capture/sources.c), on this thread */
        uint64_t due = tprof__sources_tick(stopping);
        if (!stopping) {
            int wait = interval;
            if (due) {
                uint64_t now = tprof__now();
                int to_due = due > now ? (int)((due - now) / 1000000) + 1 : 0;
                if (to_due < wait) wait = to_due;
            }
            flusher_busy(0); /* asleep: a fork may go ahead */
            flusher_sleep(wait);
            flusher_busy(1);
            atomic_store_explicit(&S.alive_ns, tprof__now(), memory_order_relaxed);
        }
        flush_pass(0);
        if (TPROF_UNLIKELY(TPROF__METRICS_ON())) tprof__metrics_after_pass();
        int sig = atomic_exchange(&S.pending_signal, 0);
        int fatal = atomic_load(&S.fatal_signal);
        if (fatal) {
            /* the process is about to end: finish the file, then release the handler,
             * which lets the default action happen */
            final_on_signal(fatal);
            atomic_store(&S.final_done, 1);
        } else if (sig) {
            tprof__writer_sync(); /* the program handles it; make what we have durable */
        }
        pthread_mutex_lock(&S.flush_lock);
        S.flush_gen++;
        pthread_cond_broadcast(&S.flush_cond);
        pthread_mutex_unlock(&S.flush_lock);
        flusher_busy(0);
        if (stopping || atomic_load(&S.final_done)) break;
    }
    if (atomic_load(&S.stop) && !atomic_load(&S.final_done)) {
        /* tprof_shutdown: what threads recorded while the state changed, the end record,
         * and the file closed, here rather than in the thread that shuts down, which waits
         * for it only as long as storage answers */
        flusher_busy(1);
        flush_pass(1);
        write_end_record(atomic_load(&S.fatal_signal)); /* one that came while stopping */
        tprof__writer_close();
        atomic_store(&S.final_done, 1); /* a handler waiting for it goes on */
        flusher_busy(0);
    }
    pthread_mutex_lock(&S.flush_lock);
    S.flusher_done = 1;
    pthread_cond_broadcast(&S.flush_cond);
    pthread_mutex_unlock(&S.flush_lock);
    return NULL;
}

/* --------------------------------------------------------------------- threads */

static void thread_exit(void *p) {
    tprof__thread *t = p;
    if ((uintptr_t)t > TPROF__TLS_SENTINELS)
        atomic_store_explicit(&t->exited, 1, memory_order_release);
    tprof__tls = TPROF__DEAD_THREAD;
}

static size_t floor_pow2(size_t n) {
    size_t p = 1;
    while (p * 2 <= n && p * 2 != 0) p *= 2;
    return p;
}

/* A thread that gets no ring (beyond max_threads, or out of memory) records nothing, and
 * each of its events, this first one included, is counted as dropped. */
static tprof__thread *over_limit(void) {
    tprof__tls = TPROF__OVER_LIMIT;
    atomic_fetch_add(&S.lost_threads, 1);
    atomic_fetch_add_explicit(&S.lost_events, 1, memory_order_relaxed);
    return NULL;
}

tprof__thread *tprof__thread_slow(void) {
    int st = atomic_load_explicit(&tprof__g_state, memory_order_acquire);
    if (st == TPROF__UNINIT || st == TPROF__STARTING) {
        /* start lazily, or wait for the thread that is starting the session: an event
         * recorded meanwhile belongs in the file (the start waits for its flusher, which a
         * loaded machine may take milliseconds to schedule) */
        tprof_enabled();
        st = atomic_load(&tprof__g_state);
    }
    if (st != TPROF__ON) return NULL;
    tprof__thread *t = tprof__tls;
    if (t == TPROF__DEAD_THREAD) return NULL;
    if (t == TPROF__OVER_LIMIT) {
        /* every event of a thread beyond max_threads is a drop, reported as such */
        atomic_fetch_add_explicit(&S.lost_events, 1, memory_order_relaxed);
        return NULL;
    }
    if (t) return t;

    /* Allocated and registered under the session lock, which fork_prepare takes: a fork()
     * on another thread between the two would leave the allocations, in the child, to a
     * thread that does not exist there. The lock is held for allocations only, never I/O. */
    size_t ring = floor_pow2(S.cfg.ring_bytes);
    pthread_mutex_lock(&S.lock);
    int full = S.nthreads >= S.cfg.max_threads;
    t = full ? NULL : calloc(1, sizeof *t);
    if (t) t->buf = aligned_alloc(64, ring);
    if (t) {
        /* start small; grow up to max_strings */
        t->str_cap = 64;
        t->strs = calloc(t->str_cap, sizeof *t->strs);
        t->str_max = S.cfg.max_strings;
    }
    if (t && t->buf && t->strs) {
        t->mask = ring - 1;
        t->os_tid = (uint32_t)syscall(SYS_gettid);
        t->serial = ++S.next_serial;
        S.threads[S.nthreads++] = t;
    } else if (t) {
        free(t->buf);
        free(t->strs);
        free(t);
        t = NULL;
    }
    pthread_mutex_unlock(&S.lock);
    if (!t) return over_limit();
    tprof__tls = t;
    if (S.key_made) pthread_setspecific(S.key, t);
    return t;
}

/* ---------------------------------------------------------------- start and stop */

static void read_rank_env(void) {
    static const char *rank_vars[][4] = {
        /* rank var, world var, local rank var, source name */
        {"RANK", "WORLD_SIZE", "LOCAL_RANK", "torch"},
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "openmpi"},
        {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "pmi"},
        {"PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK", "pmix"},
        {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "slurm"},
    };
    for (size_t i = 0; i < sizeof rank_vars / sizeof rank_vars[0]; i++) {
        const char *r = getenv(rank_vars[i][0]);
        if (!r || !*r) continue;
        proc_record_locked(TPROF_REC_META, 0, NULL, 0, "rank", r);
        const char *w = getenv(rank_vars[i][1]);
        if (w && *w) proc_record_locked(TPROF_REC_META, 0, NULL, 0, "world_size", w);
        const char *l = getenv(rank_vars[i][2]);
        if (l && *l) proc_record_locked(TPROF_REC_META, 0, NULL, 0, "local_rank", l);
        proc_record_locked(TPROF_REC_META, 0, NULL, 0, "rank_source", rank_vars[i][3]);
        break;
    }
}

static void write_start_metadata_locked(void) {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) {
        buf[n] = 0;
        proc_record_locked(TPROF_REC_META, 0, NULL, 0, "exe", buf);
    }
    int fd = tprof__open_private("/proc/self/cmdline", O_RDONLY, 0);
    if (fd >= 0) {
        n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n > 0) {
            for (ssize_t i = 0; i < n - 1; i++)
                if (!buf[i]) buf[i] = ' ';
            buf[n] = 0;
            proc_record_locked(TPROF_REC_META, 0, NULL, 0, "cmdline", buf);
        }
    }
    read_rank_env();
    const char *v = tprof__env(TPROF__OPT_STEP_NAME);
    if (v && *v) proc_record_locked(TPROF_REC_META, 0, NULL, 0, "step_name", v);
    /* the throughput figures of `trainprof run` (or the user's environment): into the file,
     * so that a later `trainprof report` of it has them too, and to the live counters */
    int flops_given = 0;
    for (int i = 0; i < TPROF_PER_STEP_N; i++) {
        double x;
        const char *key = tprof__per_step_key(i);
        if (!(v = tprof__env_nonempty(tprof__per_step_opt(i)))) continue;
        flops_given |= i == 2;
        if (tprof__per_step_parse(key, v, &x)) {
            proc_record_locked(TPROF_REC_META, 0, NULL, 0, key, v);
            tprof__metrics_meta(key, v);
        } else {
            tprof__log(TPROF_LOG_WARN, "%s=%.40s ignored: not a number > 0 and at most %g",
                       tprof__per_step_env(i), v, tprof__per_step_max(key));
        }
    }
    /* `trainprof run --model`: the formula's FLOPs, for the live counters only (the file
     * keeps the model itself, and the report says it used the model) */
    if (!flops_given && (v = tprof__env(TPROF__OPT_MODEL_FLOPS_PER_STEP)))
        tprof__metrics_meta("flops_per_step", v);
    if ((v = tprof__env(TPROF__OPT_MODEL)) && *v)
        proc_record_locked(TPROF_REC_META, 0, NULL, 0, "model", v);
    if ((v = tprof__env(TPROF__OPT_DTYPE)) && *v)
        proc_record_locked(TPROF_REC_META, 0, NULL, 0, "dtype", v);
    const char *kw = tprof__env(TPROF__OPT_KERNEL_STEPS);
    if (kw && *kw && tprof__kwin_active())
        proc_record_locked(TPROF_REC_META, 0, NULL, 0, "kernel_steps", kw);
    tprof_pl_clock pl = {S.start_rt, S.start_mono, 0};
    proc_record_locked(TPROF_REC_CLOCK, 0, &pl, sizeof pl, NULL, NULL);
    emit_registries_locked();
}

static void atexit_shutdown(void) { tprof_shutdown(); }

/* a session that is starting first (a child cannot finish another thread's start), then
 * the flusher idle (busy), then the session (lock): the order the flusher takes them in */
static void fork_prepare(void) {
    while (atomic_load(&tprof__g_state) == TPROF__STARTING) sched_yield();
    pthread_mutex_lock(&S.busy);
    pthread_mutex_lock(&S.lock);
}
static void fork_parent(void) {
    pthread_mutex_unlock(&S.lock);
    pthread_mutex_unlock(&S.busy);
}
static void fork_child(void) {
    /* Only this thread exists now. Drop the parent's unflushed events (they belong to the
     * parent's file) and let the child start its own file lazily. */
    pthread_mutex_init(&S.lock, NULL);
    pthread_mutex_init(&S.busy, NULL);
    pthread_mutex_init(&S.flush_lock, NULL);
    pthread_cond_init(&S.flush_cond, NULL);
    for (uint32_t i = 0; i < S.nthreads; i++) free_thread(S.threads[i]);
    S.nthreads = 0;
    S.next_serial = 0;
    tprof__tls = NULL;
    if (S.key_made) pthread_setspecific(S.key, NULL);
    tprof__writer_after_fork(); /* closes the child's copy of the parent's file */
    S.proc_len = 0;
    S.pend_len = 0;
    S.proc_dropped = 0;
    S.flusher_running = 0;
    S.flusher_done = 0;
    atomic_store(&S.end_written, 0);
    atomic_store(&S.io_since_ns, 0);
    S.busy_held = 0;
    atomic_store(&S.flush_asked, 0);
    atomic_store(&S.stop, 0);
    atomic_store(&S.pending_signal, 0);
    atomic_store(&S.lost_threads, 0);
    atomic_store(&S.lost_events, 0);
    S.proc_dropped_written = 0;
    atomic_store(&S.final_done, 0);
    atomic_store(&S.fatal_signal, 0);
    S.flush_gen = 0;
    S.flusher_up = 0;
    S.m_bytes = 0;
    S.m_freed_drops = 0;
    tprof__metrics_after_fork(); /* the parent's endpoint thread is not in this process */
    tprof__sources_after_fork(); /* e.g. the child's file names its own devices */
    /* STARTING only when another thread began a start after fork_prepare looked: that
     * thread is not in this process, so this one starts afresh */
    int st = atomic_load(&tprof__g_state);
    if (st == TPROF__ON || st == TPROF__STARTING) set_state(TPROF__UNINIT);
}

/* Starts the flusher and waits (at most 2 s) until it runs flusher_main. Until then the new
 * thread may be inside the thread library's or a sanitizer's setup of it, which allocates
 * (pthread_getattr_np under ASan), and fork_prepare's lock on busy cannot keep a fork from
 * copying it there with an allocator lock held: a child forked right after tprof_init would
 * hang in its first malloc (GCC 12's ASan). 0, or pthread_create's error. */
static int start_flusher(void) {
    S.flusher_up = 0;
    int rc = tprof__thread_create(&S.flusher, flusher_main, NULL); /* a small stack */
    if (rc != 0) return rc;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2;
    pthread_mutex_lock(&S.flush_lock);
    while (!S.flusher_up)
        if (pthread_cond_timedwait(&S.flush_cond, &S.flush_lock, &until) == ETIMEDOUT) break;
    pthread_mutex_unlock(&S.flush_lock);
    return 0;
}

/* Caller holds nothing; state is STARTING. Returns the final state. */
static int start_locked_cfg(const tprof_config *cfg) {
    tprof__log_level = cfg->log_level;
    S.cfg = *cfg;
    /* TRAINPROF_NO_FILE=1: a session that feeds the live metrics and writes nothing (no
     * directory, no rank file; `trainprof serve`); records are drained and dropped */
    const char *nf = tprof__env(TPROF__OPT_NO_FILE);
    S.no_file = nf && !strcmp(nf, "1");
    if (!cfg->enabled || (!S.no_file && (!cfg->output_dir || !*cfg->output_dir)))
        return TPROF__OFF;
    if (cfg->ring_bytes < TPROF__MIN_RING) {
        tprof__log(TPROF_LOG_WARN, "ring size %zu below %u bytes; using the minimum",
                   cfg->ring_bytes, TPROF__MIN_RING);
        S.cfg.ring_bytes = TPROF__MIN_RING;
    }
    if (S.cfg.max_threads == 0) S.cfg.max_threads = 1;
    if (S.cfg.max_strings > (1u << 24)) S.cfg.max_strings = 1u << 24;
    if (cfg->output_dir != S.dir)
        snprintf(S.dir, sizeof S.dir, "%s", S.no_file || !cfg->output_dir ? "" : cfg->output_dir);
    if (cfg->run_id != S.run_id)
        snprintf(S.run_id, sizeof S.run_id, "%s", cfg->run_id ? cfg->run_id : "");
    if (!S.no_file && mkdir(S.dir, 0755) != 0 && errno != EEXIST) {
        tprof__log(TPROF_LOG_ERROR, "cannot create %s: %s; recording is off", S.dir,
                   strerror(errno));
        return TPROF__OFF;
    }
    if (!S.no_file && access(S.dir, W_OK) != 0) {
        tprof__log(TPROF_LOG_ERROR, "%s is not writable; recording is off", S.dir);
        return TPROF__OFF;
    }
    free(S.threads);
    free(S.snap);
    S.threads = calloc(S.cfg.max_threads, sizeof *S.threads);
    S.snap = calloc(S.cfg.max_threads, sizeof *S.snap);
    if (!S.threads || !S.snap) return TPROF__OFF;
    S.start_mono = tprof__now();
    S.start_rt = realtime_now();
    S.pid = getpid();
    if (!S.key_made) S.key_made = pthread_key_create(&S.key, thread_exit) == 0;
    if (sem_init(&S.wake, 0, 0) != 0) return TPROF__OFF;
    tprof__writer_setup(S.dir, S.run_id, S.start_rt, S.start_mono, S.no_file);
    tprof__kwin_init();
    pthread_mutex_lock(&S.lock);
    write_start_metadata_locked();
    pthread_mutex_unlock(&S.lock);
    /* the flusher must not inherit a signal mask that lets it take SIGTERM; it blocks
     * everything itself */
    static int once; /* before the flusher exists: a fork from now on goes through them */
    if (!once) {
        once = 1;
        atexit(atexit_shutdown);
        pthread_atfork(fork_prepare, fork_parent, fork_child);
    }
    if (start_flusher() != 0) {
        tprof__log(TPROF_LOG_ERROR, "cannot start the flusher thread; recording is off");
        return TPROF__OFF;
    }
    S.flusher_running = 1;
    tprof__signals_install();
    return TPROF__ON;
}

/* What a session does once it records: the live metrics, and the capability lines the
 * capture sources know at start (core/source.h). */
static void session_started(void) {
    tprof__metrics_session_start(S.start_rt);
    tprof__sources_capability();
}

int tprof_init(const tprof_config *cfg) {
    if (!cfg || cfg->struct_size < sizeof(tprof_config)) return TPROF_ERR_INVALID_ARG;
    int expected = TPROF__UNINIT;
    if (!atomic_compare_exchange_strong(&tprof__g_state, &expected, TPROF__STARTING))
        return TPROF_ERR_ALREADY;
    int st = start_locked_cfg(cfg);
    /* keep the configuration (its strings now point into S) for a forked child */
    S.api_cfg = 1;
    S.cfg.output_dir = S.dir[0] ? S.dir : NULL;
    S.cfg.run_id = S.run_id;
    set_state(st);
    if (st == TPROF__ON) session_started();
    return st == TPROF__ON ? TPROF_OK : TPROF_ERR_DISABLED;
}

int tprof_enabled(void) {
    int st = atomic_load_explicit(&tprof__g_state, memory_order_acquire);
    if (TPROF_LIKELY(st == TPROF__ON)) return 1;
    if (st != TPROF__UNINIT) {
        /* another thread is starting: wait for it (set-up takes microseconds) */
        while (st == TPROF__STARTING) {
            sched_yield();
            st = atomic_load(&tprof__g_state);
        }
        return st == TPROF__ON;
    }
    tprof_config cfg;
    if (S.api_cfg) {
        cfg = S.cfg; /* a forked child of a tprof_init() session: same configuration */
    } else {
        tprof_config_init(&cfg);
        tprof_config_from_env(&cfg);
    }
    int expected = TPROF__UNINIT;
    if (atomic_compare_exchange_strong(&tprof__g_state, &expected, TPROF__STARTING)) {
        int started = start_locked_cfg(&cfg);
        set_state(started);
        if (started == TPROF__ON) session_started();
    }
    return tprof_enabled();
}

int tprof_flush(void) {
    if (atomic_load(&tprof__g_state) != TPROF__ON || !S.flusher_running)
        return TPROF_ERR_DISABLED;
    atomic_store(&S.flush_asked, 1); /* write now even while backing off after an error */
    pthread_mutex_lock(&S.flush_lock);
    uint64_t target = S.flush_gen + 2; /* a full pass that started after this call */
    wake_flusher();
    int stalled = 0;
    while (S.flush_gen < target && !S.flusher_done) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        if (pthread_cond_timedwait(&S.flush_cond, &S.flush_lock, &ts) == ETIMEDOUT) {
            if ((stalled = flusher_stalled())) break;
            wake_flusher();
        }
    }
    pthread_mutex_unlock(&S.flush_lock);
    return stalled || tprof__writer_failing() ? TPROF_ERR_IO : TPROF_OK;
}

/* Waits for the flusher to finish its work, as long as it shows progress. 1 when it did. */
static int wait_flusher_done(void) {
    pthread_mutex_lock(&S.flush_lock);
    while (!S.flusher_done) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        if (pthread_cond_timedwait(&S.flush_cond, &S.flush_lock, &ts) == ETIMEDOUT &&
            !S.flusher_done && flusher_stalled())
            break;
    }
    int done = S.flusher_done;
    pthread_mutex_unlock(&S.flush_lock);
    return done;
}

/* The flusher may be finishing the file for a fatal signal: let it (bounded), so that
 * exit() on another thread neither cuts the file short nor ends it a second time. */
static void wait_signal_end(void) {
    for (int i = 0; i < TPROF__SIGNAL_FLUSH_MS / 10 && !atomic_load(&S.final_done); i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
}

int tprof_shutdown(void) {
    if (atomic_load(&S.fatal_signal)) {
        wait_signal_end();
        return TPROF_OK;
    }
    /* GPU records CUPTI still holds, while we still record them */
    if (atomic_load(&tprof__g_state) == TPROF__ON) {
        tprof__sources_flush(); /* e.g. NCCL ops still waiting for their kernel channels */
    }
    int expected = TPROF__ON;
    if (!atomic_compare_exchange_strong(&tprof__g_state, &expected, TPROF__DOWN)) {
        if (atomic_load(&S.fatal_signal)) wait_signal_end();
        return TPROF_OK;
    }
    set_state(TPROF__DOWN);
    /* the calling thread's ring stays registered (it may still record and be ignored) */
    int rc = TPROF_OK;
    if (S.flusher_running) {
        /* the flusher writes the rest, the end record, and closes the file */
        atomic_store(&S.stop, 1);
        wake_flusher();
        if (wait_flusher_done()) {
            pthread_join(S.flusher, NULL);
        } else if (atomic_load(&S.end_written)) {
            pthread_detach(S.flusher); /* the end is written; only fsync is still waiting */
        } else {
            pthread_detach(S.flusher); /* it finishes on its own if storage ever answers */
            tprof__log(TPROF_LOG_WARN,
                       "the rank file's storage has not answered for %d ms; not waiting for "
                       "it (the file may lack its end)", TPROF__STALL_MS);
            rc = TPROF_ERR_IO;
        }
        S.flusher_running = 0;
    }
    tprof__metrics_session_stop(); /* joins the endpoint's thread */
    return rc;
}

pid_t tprof__session_pid(void) { return S.pid; }

const char *tprof_output_path(void) {
    return atomic_load(&tprof__g_state) == TPROF__ON ? tprof__writer_path() : NULL;
}
