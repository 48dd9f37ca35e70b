/*
 * session.c — the life of a trainprof session in one process: lazy start from a
 * configuration (core/config.c), the registries of names, the process stream, the registry
 * of per-thread rings, and shutdown at exit. The flusher thread that moves rings into the
 * rank file and drives the capture sources (core/source.h), with the session's side of
 * signal handling (signals.c), is flusher.c; fork handling is fork.c; the state the three
 * share, which file owns which field and which lock guards what: session_state.h.
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
#include "session_state.h"

_Atomic int tprof__g_state = TPROF__UNINIT;
__thread tprof__thread *tprof__tls __attribute__((tls_model("initial-exec")));
int tprof__maybe_on = 1;

/* Every state change goes through here so the header's inline switch follows it. */
void tprof__session_set_state(int st) {
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

/* The session's state: its fields, who owns them and the locks, in session_state.h. */
struct tprof__session tprof__S = {.lock = PTHREAD_MUTEX_INITIALIZER,
                                  .busy = PTHREAD_MUTEX_INITIALIZER,
                                  .flush_lock = PTHREAD_MUTEX_INITIALIZER,
                                  .flush_cond = PTHREAD_COND_INITIALIZER};

/* ---------------------------------------------------------------- log */

/* What standard error was when the session started (dev, inode), so that a message never
 * lands in a file the program later put on descriptor 2 for its own data (dup2 over it, or
 * every descriptor closed and reopened): 0 not bound, 1 bound, 2 closed at the start. */
static struct {
    _Atomic int bound;
    dev_t dev;
    ino_t ino;
} g_stderr;

void tprof__log_bind_stderr(void) {
    struct stat st;
    if (fstat(2, &st) == 0) {
        g_stderr.dev = st.st_dev;
        g_stderr.ino = st.st_ino;
        atomic_store(&g_stderr.bound, 1);
    } else {
        atomic_store(&g_stderr.bound, 2);
    }
}

/* 1 when descriptor 2 is still the standard error the session started with (or no session
 * has bound it yet). */
static int stderr_ours(void) {
    int b = atomic_load(&g_stderr.bound);
    if (!b) return 1;
    struct stat st;
    if (fstat(2, &st) != 0) return 0;
    return b == 1 && st.st_dev == g_stderr.dev && st.st_ino == g_stderr.ino;
}

void tprof__log(int level, const char *fmt, ...) {
    if (level > tprof__log_level) return;
    if (!stderr_ours()) return; /* the program's own file now: say nothing into it */
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

uint64_t tprof__realtime_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------ process stream */

static int proc_append(const void *rec, size_t n) {
    if (tprof__S.proc_len + n > TPROF__PROC_MAX) {
        tprof__S.proc_dropped++;
        return TPROF_ERR_LIMIT;
    }
    if (tprof__S.proc_len + n > tprof__S.proc_cap) {
        size_t cap = tprof__S.proc_cap ? tprof__S.proc_cap : 4096;
        while (cap < tprof__S.proc_len + n) cap *= 2;
        uint8_t *p = realloc(tprof__S.proc, cap);
        if (!p) return TPROF_ERR_NO_MEMORY;
        tprof__S.proc = p;
        tprof__S.proc_cap = cap;
    }
    memcpy(tprof__S.proc + tprof__S.proc_len, rec, n);
    tprof__S.proc_len += n;
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

/* caller holds tprof__S.lock */
int tprof__proc_record_locked(uint16_t kind, uint32_t arg, const void *payload,
                              size_t pl_bytes, const char *s1, const char *s2) {
    _Alignas(8) uint8_t rec[2 * TPROF_MAX_INLINE + 64];
    size_t n = build_record(rec, kind, arg, tprof__now(), payload, pl_bytes, s1, s2);
    return proc_append(rec, n);
}

int tprof__proc_record(uint16_t kind, uint32_t arg, const void *payload, size_t pl_bytes,
                       const char *s1, const char *s2) {
    pthread_mutex_lock(&tprof__S.lock);
    int rc = tprof__proc_record_locked(kind, arg, payload, pl_bytes, s1, s2);
    pthread_mutex_unlock(&tprof__S.lock);
    return rc;
}

int tprof__set_meta(const char *key, const char *value) {
    double x;
    if (tprof__per_step_max(key) > 0 && !tprof__per_step_parse(key, value, &x))
        return TPROF_ERR_INVALID_ARG; /* a throughput figure that is not one */
    tprof__metrics_meta(key, value); /* throughput per step, rank labels */
    return tprof__proc_record(TPROF_REC_META, 0, NULL, 0, key, value);
}

/* The reason named last with tprof_set_metadata("gpu_capture.pause_reason"), for the pauses
 * that follow (capture/cupti.c gives each pause its own); under tprof__S.lock, which a fork
 * does not copy held. */
static char g_pause_reason[64];

void tprof__pause_reason_named(const char *why) {
    pthread_mutex_lock(&tprof__S.lock);
    snprintf(g_pause_reason, sizeof g_pause_reason, "%s", why);
    pthread_mutex_unlock(&tprof__S.lock);
}

void tprof__pause_reason(char *out, size_t n) {
    pthread_mutex_lock(&tprof__S.lock);
    snprintf(out, n, "%s", g_pause_reason);
    pthread_mutex_unlock(&tprof__S.lock);
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
    uint32_t n = atomic_load_explicit(&tprof__S.ndomains, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(tprof__S.domains[i], name)) return i + 1;
    pthread_mutex_lock(&tprof__S.lock);
    uint32_t id = 0;
    n = atomic_load_explicit(&tprof__S.ndomains, memory_order_relaxed);
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(tprof__S.domains[i], name)) { id = i + 1; break; }
    if (!id && n < TPROF__MAX_DOMAINS) {
        char *copy = xstrdup(name);
        if (copy) {
            tprof__S.domains[n] = copy;
            atomic_store_explicit(&tprof__S.ndomains, n + 1, memory_order_release);
            id = n + 1;
            if (atomic_load(&tprof__g_state) == TPROF__ON)
                tprof__proc_record_locked(TPROF_REC_DOMAIN, id, NULL, 0, copy, NULL);
        }
    }
    pthread_mutex_unlock(&tprof__S.lock);
    return id; /* 0 (the default domain) past the bound */
}

const char *tprof__domain_name(uint32_t domain) {
    uint32_t n = atomic_load_explicit(&tprof__S.ndomains, memory_order_acquire);
    return domain >= 1 && domain <= n ? tprof__S.domains[domain - 1] : NULL;
}

const char *tprof__category_name(uint32_t domain, uint32_t category) {
    pthread_mutex_lock(&tprof__S.lock);
    const char *n = NULL;
    for (uint32_t i = 0; i < tprof__S.ncats; i++)
        if (tprof__S.cats[i].domain == domain && tprof__S.cats[i].id == category)
            n = tprof__S.cats[i].name;
    pthread_mutex_unlock(&tprof__S.lock);
    return n; /* names live as long as the process (replaced ones are not freed while read) */
}

void tprof__name_category(uint32_t domain, uint32_t category, const char *name) {
    if (!name) return;
    pthread_mutex_lock(&tprof__S.lock);
    struct tprof__cat *c = NULL;
    for (uint32_t i = 0; i < tprof__S.ncats; i++)
        if (tprof__S.cats[i].domain == domain && tprof__S.cats[i].id == category)
            c = &tprof__S.cats[i];
    char *copy = xstrdup(name);
    if (copy && !c && tprof__S.ncats < 65536) {
        if (tprof__S.ncats == tprof__S.cat_cap) {
            uint32_t cap = tprof__S.cat_cap ? tprof__S.cat_cap * 2 : 16;
            struct tprof__cat *n = realloc(tprof__S.cats, cap * sizeof *n);
            if (n) { tprof__S.cats = n; tprof__S.cat_cap = cap; }
        }
        if (tprof__S.ncats < tprof__S.cat_cap) {
            c = &tprof__S.cats[tprof__S.ncats++];
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
            tprof__proc_record_locked(TPROF_REC_CATEGORY, category, &pl, sizeof pl, c->name, NULL);
    }
    free(copy);
    pthread_mutex_unlock(&tprof__S.lock);
}

static void capability_set(const char *name, const char *status, int any_state) {
    pthread_mutex_lock(&tprof__S.lock);
    struct tprof__kv *kv = NULL;
    for (uint32_t i = 0; i < tprof__S.ncaps; i++)
        if (!strcmp(tprof__S.caps[i].key, name)) kv = &tprof__S.caps[i];
    if (!kv) {
        struct tprof__kv *n = realloc(tprof__S.caps, (tprof__S.ncaps + 1) * sizeof *n);
        if (n) {
            tprof__S.caps = n;
            kv = &tprof__S.caps[tprof__S.ncaps];
            kv->key = xstrdup(name);
            kv->value = NULL;
            if (kv->key) tprof__S.ncaps++;
            else kv = NULL;
        }
    }
    if (kv) {
        free(kv->value);
        kv->value = xstrdup(status);
        char key[160];
        snprintf(key, sizeof key, "capability.%s", name);
        if ((any_state || atomic_load(&tprof__g_state) == TPROF__ON) && kv->value)
            tprof__proc_record_locked(TPROF_REC_META, 0, NULL, 0, key, kv->value);
    }
    pthread_mutex_unlock(&tprof__S.lock);
}

void tprof__capability(const char *name, const char *status) {
    capability_set(name, status, 0);
}

void tprof__capability_of_file(const char *name, const char *status) {
    capability_set(name, status, 1);
}

/* Re-emit everything the process stream must hold at the start of a file (a new session
 * or a forked child): domains, categories, capabilities. Caller holds tprof__S.lock. */
static void emit_registries_locked(void) {
    uint32_t nd = atomic_load(&tprof__S.ndomains);
    for (uint32_t i = 0; i < nd; i++)
        tprof__proc_record_locked(TPROF_REC_DOMAIN, i + 1, NULL, 0, tprof__S.domains[i], NULL);
    for (uint32_t i = 0; i < tprof__S.ncats; i++) {
        tprof_pl_category pl = {tprof__S.cats[i].domain, 0};
        tprof__proc_record_locked(TPROF_REC_CATEGORY, tprof__S.cats[i].id, &pl, sizeof pl,
                                  tprof__S.cats[i].name, NULL);
    }
    for (uint32_t i = 0; i < tprof__S.ncaps; i++) {
        char key[160];
        snprintf(key, sizeof key, "capability.%s", tprof__S.caps[i].key);
        if (tprof__S.caps[i].value)
            tprof__proc_record_locked(TPROF_REC_META, 0, NULL, 0, key, tprof__S.caps[i].value);
    }
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
    atomic_fetch_add(&tprof__S.lost_threads, 1);
    atomic_fetch_add_explicit(&tprof__S.lost_events, 1, memory_order_relaxed);
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
        atomic_fetch_add_explicit(&tprof__S.lost_events, 1, memory_order_relaxed);
        return NULL;
    }
    if (t) return t;

    /* Allocated and registered under the session lock, which fork_prepare takes: a fork()
     * on another thread between the two would leave the allocations, in the child, to a
     * thread that does not exist there. The lock is held for allocations only, never I/O. */
    size_t ring = floor_pow2(tprof__S.cfg.ring_bytes);
    pthread_mutex_lock(&tprof__S.lock);
    int full = tprof__S.nthreads >= tprof__S.cfg.max_threads;
    t = full ? NULL : calloc(1, sizeof *t);
    if (t) t->buf = aligned_alloc(64, ring);
    if (t) {
        /* start small; grow up to max_strings */
        t->str_cap = 64;
        t->strs = calloc(t->str_cap, sizeof *t->strs);
        t->str_max = tprof__S.cfg.max_strings;
    }
    if (t && t->buf && t->strs) {
        t->mask = ring - 1;
        t->os_tid = (uint32_t)syscall(SYS_gettid);
        t->serial = ++tprof__S.next_serial;
        tprof__S.threads[tprof__S.nthreads++] = t;
    } else if (t) {
        free(t->buf);
        free(t->strs);
        free(t);
        t = NULL;
    }
    pthread_mutex_unlock(&tprof__S.lock);
    if (!t) return over_limit();
    tprof__tls = t;
    if (tprof__S.key_made) pthread_setspecific(tprof__S.key, t);
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
        tprof__proc_record_locked(TPROF_REC_META, 0, NULL, 0, "rank", r);
        const char *w = getenv(rank_vars[i][1]);
        if (w && *w) tprof__proc_record_locked(TPROF_REC_META, 0, NULL, 0, "world_size", w);
        const char *l = getenv(rank_vars[i][2]);
        if (l && *l) tprof__proc_record_locked(TPROF_REC_META, 0, NULL, 0, "local_rank", l);
        tprof__proc_record_locked(TPROF_REC_META, 0, NULL, 0, "rank_source", rank_vars[i][3]);
        break;
    }
}

/* caller holds tprof__S.lock */
static void meta_locked(const char *key, const char *value) {
    tprof__proc_record_locked(TPROF_REC_META, 0, NULL, 0, key, value);
}

static void write_start_metadata_locked(void) {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) {
        buf[n] = 0;
        tprof__proc_record_locked(TPROF_REC_META, 0, NULL, 0, "exe", buf);
    }
    int fd = tprof__open_private("/proc/self/cmdline", O_RDONLY, 0);
    if (fd >= 0) {
        n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n > 0) {
            for (ssize_t i = 0; i < n - 1; i++)
                if (!buf[i]) buf[i] = ' ';
            buf[n] = 0;
            tprof__proc_record_locked(TPROF_REC_META, 0, NULL, 0, "cmdline", buf);
        }
    }
    read_rank_env();
    const char *v = tprof__env(TPROF__OPT_STEP_NAME);
    if (v && *v) tprof__proc_record_locked(TPROF_REC_META, 0, NULL, 0, "step_name", v);
    /* the throughput figures of `trainprof run` (or the user's environment): into the file,
     * so that a later `trainprof report` of it has them too, and to the live counters */
    int flops_given = 0;
    for (int i = 0; i < TPROF_PER_STEP_N; i++) {
        double x;
        const char *key = tprof__per_step_key(i);
        if (!(v = tprof__env_nonempty(tprof__per_step_opt(i)))) continue;
        flops_given |= i == 2;
        if (tprof__per_step_parse(key, v, &x)) {
            tprof__proc_record_locked(TPROF_REC_META, 0, NULL, 0, key, v);
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
        tprof__proc_record_locked(TPROF_REC_META, 0, NULL, 0, "model", v);
    if ((v = tprof__env(TPROF__OPT_DTYPE)) && *v)
        tprof__proc_record_locked(TPROF_REC_META, 0, NULL, 0, "dtype", v);
    tprof__kwin_start_meta(meta_locked); /* gpu_capture, kernel_steps */
    tprof_pl_clock pl = {tprof__S.start_rt, tprof__S.start_mono, 0};
    tprof__proc_record_locked(TPROF_REC_CLOCK, 0, &pl, sizeof pl, NULL, NULL);
    emit_registries_locked();
}

static void atexit_shutdown(void) { tprof_shutdown(); }

/* Caller holds nothing; state is STARTING. Returns the final state. */
static int start_locked_cfg(const tprof_config *cfg) {
    tprof__log_level = cfg->log_level;
    tprof__log_bind_stderr();
    tprof__S.cfg = *cfg;
    /* TRAINPROF_NO_FILE=1: a session that feeds the live metrics and writes nothing (no
     * directory, no rank file; `trainprof serve`); records are drained and dropped */
    const char *nf = tprof__env(TPROF__OPT_NO_FILE);
    tprof__S.no_file = nf && !strcmp(nf, "1");
    if (!cfg->enabled || (!tprof__S.no_file && (!cfg->output_dir || !*cfg->output_dir)))
        return TPROF__OFF;
    if (cfg->ring_bytes < TPROF__MIN_RING) {
        tprof__log(TPROF_LOG_WARN, "ring size %zu below %u bytes; using the minimum",
                   cfg->ring_bytes, TPROF__MIN_RING);
        tprof__S.cfg.ring_bytes = TPROF__MIN_RING;
    }
    if (tprof__S.cfg.max_threads == 0) tprof__S.cfg.max_threads = 1;
    if (tprof__S.cfg.max_strings > (1u << 24)) tprof__S.cfg.max_strings = 1u << 24;
    if (cfg->output_dir != tprof__S.dir)
        snprintf(tprof__S.dir, sizeof tprof__S.dir, "%s",
                 tprof__S.no_file || !cfg->output_dir ? "" : cfg->output_dir);
    if (cfg->run_id != tprof__S.run_id)
        snprintf(tprof__S.run_id, sizeof tprof__S.run_id, "%s", cfg->run_id ? cfg->run_id : "");
    if (!tprof__S.no_file && mkdir(tprof__S.dir, 0755) != 0 && errno != EEXIST) {
        tprof__log(TPROF_LOG_ERROR, "cannot create %s: %s; recording is off", tprof__S.dir,
                   strerror(errno));
        return TPROF__OFF;
    }
    if (!tprof__S.no_file && access(tprof__S.dir, W_OK) != 0) {
        tprof__log(TPROF_LOG_ERROR, "%s is not writable; recording is off", tprof__S.dir);
        return TPROF__OFF;
    }
    free(tprof__S.threads);
    free(tprof__S.snap);
    tprof__S.threads = calloc(tprof__S.cfg.max_threads, sizeof *tprof__S.threads);
    tprof__S.snap = calloc(tprof__S.cfg.max_threads, sizeof *tprof__S.snap);
    if (!tprof__S.threads || !tprof__S.snap) return TPROF__OFF;
    tprof__S.start_mono = tprof__now();
    tprof__S.start_rt = tprof__realtime_now();
    tprof__S.pid = getpid();
    if (!tprof__S.key_made) tprof__S.key_made = pthread_key_create(&tprof__S.key, thread_exit) == 0;
    if (sem_init(&tprof__S.wake, 0, 0) != 0) return TPROF__OFF;
    tprof__writer_setup(tprof__S.dir, tprof__S.run_id, tprof__S.start_rt, tprof__S.start_mono,
                        tprof__S.no_file);
    tprof__kwin_init();
    pthread_mutex_lock(&tprof__S.lock);
    write_start_metadata_locked();
    pthread_mutex_unlock(&tprof__S.lock);
    /* the flusher must not inherit a signal mask that lets it take SIGTERM; it blocks
     * everything itself */
    static int once; /* before the flusher exists: a fork from now on goes through them */
    if (!once) {
        once = 1;
        atexit(atexit_shutdown);
        tprof__fork_handlers_install();
    }
    if (tprof__flusher_start() != 0) {
        tprof__log(TPROF_LOG_ERROR, "cannot start the flusher thread; recording is off");
        return TPROF__OFF;
    }
    tprof__S.flusher_running = 1;
    tprof__signals_install();
    return TPROF__ON;
}

/* What a session does once it records: the live metrics, and the capability lines the
 * capture sources know at start (core/source.h). */
static void session_started(void) {
    tprof__metrics_session_start(tprof__S.start_rt);
    tprof__sources_capability();
}

int tprof_init(const tprof_config *cfg) {
    if (!cfg || cfg->struct_size < sizeof(tprof_config)) return TPROF_ERR_INVALID_ARG;
    int expected = TPROF__UNINIT;
    if (!atomic_compare_exchange_strong(&tprof__g_state, &expected, TPROF__STARTING))
        return TPROF_ERR_ALREADY;
    int st = start_locked_cfg(cfg);
    /* keep the configuration (its strings now point into tprof__S) for a forked child */
    tprof__S.api_cfg = 1;
    tprof__S.cfg.output_dir = tprof__S.dir[0] ? tprof__S.dir : NULL;
    tprof__S.cfg.run_id = tprof__S.run_id;
    tprof__session_set_state(st);
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
    if (tprof__S.api_cfg) {
        cfg = tprof__S.cfg; /* a forked child of a tprof_init() session: same configuration */
    } else {
        tprof_config_init(&cfg);
        tprof_config_from_env(&cfg);
    }
    int expected = TPROF__UNINIT;
    if (atomic_compare_exchange_strong(&tprof__g_state, &expected, TPROF__STARTING)) {
        int started = start_locked_cfg(&cfg);
        tprof__session_set_state(started);
        if (started == TPROF__ON) session_started();
    }
    return tprof_enabled();
}

int tprof_flush(void) {
    if (atomic_load(&tprof__g_state) != TPROF__ON || !tprof__S.flusher_running)
        return TPROF_ERR_DISABLED;
    atomic_store(&tprof__S.flush_asked, 1); /* write now even while backing off after an error */
    pthread_mutex_lock(&tprof__S.flush_lock);
    uint64_t target = tprof__S.flush_gen + 2; /* a full pass that started after this call */
    tprof__flusher_wake();
    int stalled = 0;
    while (tprof__S.flush_gen < target && !tprof__S.flusher_done) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        if (pthread_cond_timedwait(&tprof__S.flush_cond, &tprof__S.flush_lock, &ts) == ETIMEDOUT) {
            if ((stalled = tprof__flusher_stalled())) break;
            tprof__flusher_wake();
        }
    }
    pthread_mutex_unlock(&tprof__S.flush_lock);
    return stalled || tprof__writer_failing() ? TPROF_ERR_IO : TPROF_OK;
}

/* Waits for the flusher to finish its work, as long as it shows progress. 1 when it did. */
static int wait_flusher_done(void) {
    pthread_mutex_lock(&tprof__S.flush_lock);
    while (!tprof__S.flusher_done) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        if (pthread_cond_timedwait(&tprof__S.flush_cond, &tprof__S.flush_lock, &ts) == ETIMEDOUT &&
            !tprof__S.flusher_done && tprof__flusher_stalled())
            break;
    }
    int done = tprof__S.flusher_done;
    pthread_mutex_unlock(&tprof__S.flush_lock);
    return done;
}

/* The flusher may be finishing the file for a fatal signal: let it (bounded), so that
 * exit() on another thread neither cuts the file short nor ends it a second time. */
static void wait_signal_end(void) {
    for (int i = 0; i < TPROF__SIGNAL_FLUSH_MS / 10 && !atomic_load(&tprof__S.final_done); i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
}

int tprof_shutdown(void) {
    if (atomic_load(&tprof__S.fatal_signal)) {
        wait_signal_end();
        return TPROF_OK;
    }
    /* GPU records CUPTI still holds, while we still record them */
    if (atomic_load(&tprof__g_state) == TPROF__ON) {
        tprof__sources_flush(); /* e.g. NCCL ops still waiting for their kernel channels */
    }
    int expected = TPROF__ON;
    if (!atomic_compare_exchange_strong(&tprof__g_state, &expected, TPROF__DOWN)) {
        if (atomic_load(&tprof__S.fatal_signal)) wait_signal_end();
        return TPROF_OK;
    }
    tprof__session_set_state(TPROF__DOWN);
    /* the calling thread's ring stays registered (it may still record and be ignored) */
    int rc = TPROF_OK;
    if (tprof__S.flusher_running) {
        /* the flusher writes the rest, the end record, and closes the file */
        atomic_store(&tprof__S.stop, 1);
        tprof__flusher_wake();
        if (wait_flusher_done()) {
            pthread_join(tprof__S.flusher, NULL);
        } else if (atomic_load(&tprof__S.end_written)) {
            pthread_detach(tprof__S.flusher); /* the end is written; only fsync is still waiting */
        } else {
            pthread_detach(tprof__S.flusher); /* it finishes on its own if storage ever answers */
            tprof__log(TPROF_LOG_WARN,
                       "the rank file's storage has not answered for %d ms; not waiting for "
                       "it (the file may lack its end)", TPROF__STALL_MS);
            rc = TPROF_ERR_IO;
        }
        tprof__S.flusher_running = 0;
    }
    tprof__metrics_session_stop(); /* joins the endpoint's thread */
    return rc;
}

pid_t tprof__session_pid(void) { return tprof__S.pid; }

const char *tprof_output_path(void) {
    return atomic_load(&tprof__g_state) == TPROF__ON ? tprof__writer_path() : NULL;
}
