/*
 * flusher.c — the flusher thread of a session (session.c starts and stops it): it moves the
 * per-thread rings and the process stream into the rank file (core/writer.c), drives the
 * capture sources' periodic work (core/source.h), writes the end record, and answers the
 * signal code (signals.c) when a signal ends the process. Also the waiting side's tools:
 * waking it, telling when it has stalled, and making room in a ring for a thread that is
 * not the application's.
 *
 * Design points (docs/design.md §1, §3; the state it shares: session_state.h):
 *  - No lock a recording thread can need is held across I/O: a pass copies the registry
 *    and takes the process stream under tprof__S.lock, then writes with no lock held.
 *  - The flusher holds tprof__S.busy except while it sleeps or waits on storage, so fork() never
 *    waits for storage and never copies the flusher inside an allocator (fork.c).
 *  - A signal that ends the process wakes it through a semaphore (sem_post is
 *    async-signal-safe); it writes what is recorded and the end record naming the signal
 *    while the handler waits, bounded.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "metrics.h"
#include "signals.h"
#include "source.h"
#include "threads.h"
#include "writer.h"
#include "session_state.h"

/* ---------------------------------------------------------------------- rank file I/O */

/* The writer (core/writer.c) calls these around each system call that may wait on storage:
 * the flusher lets go of `busy` there, so a fork() of the program never waits for storage
 * (inside the system call the flusher holds no lock of libc's either). busy_held: the
 * flusher holds busy outside those calls; flusher only. */
void tprof__flusher_io_begin(void) {
    atomic_store_explicit(&tprof__S.io_since_ns, tprof__now(), memory_order_relaxed);
    if (tprof__S.busy_held) pthread_mutex_unlock(&tprof__S.busy);
}

void tprof__flusher_io_end(void) {
    uint64_t now = tprof__now();
    atomic_store_explicit(&tprof__S.io_since_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&tprof__S.alive_ns, now, memory_order_relaxed);
    if (tprof__S.busy_held) pthread_mutex_lock(&tprof__S.busy);
}

static void flusher_busy(int on) {
    if (on) {
        pthread_mutex_lock(&tprof__S.busy);
        tprof__S.busy_held = 1;
    } else {
        tprof__S.busy_held = 0;
        pthread_mutex_unlock(&tprof__S.busy);
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
            tprof__S.m_bytes += n;
        }
        /* a chunk that cannot be written is dropped and counted by the writer: the ring
         * must make room for the thread either way */
        tprof__writer_thread_chunk(t, dropped, t->buf + off, (size_t)n);
        tail += n;
        atomic_store_explicit(&t->tail, tail, memory_order_release);
    }
}

/* Moves the process stream into the flusher's buffer (tprof__S.pend), behind what an earlier pass
 * could not write; past TPROF__PROC_MAX there it stays where it is (and, full, counts its
 * drops) until writing resumes. Caller holds tprof__S.lock: a copy, no I/O. */
static void take_proc_locked(void) {
    if (!tprof__S.proc_len) return;
    if (!tprof__S.pend_len) {
        uint8_t *b = tprof__S.pend;
        size_t cap = tprof__S.pend_cap;
        tprof__S.pend = tprof__S.proc;
        tprof__S.pend_cap = tprof__S.proc_cap;
        tprof__S.pend_len = tprof__S.proc_len;
        tprof__S.proc = b;
        tprof__S.proc_cap = cap;
        tprof__S.proc_len = 0;
        return;
    }
    size_t need = tprof__S.pend_len + tprof__S.proc_len;
    if (need > TPROF__PROC_MAX) return;
    if (need > tprof__S.pend_cap) {
        uint8_t *b = realloc(tprof__S.pend, need);
        if (!b) return;
        tprof__S.pend = b;
        tprof__S.pend_cap = need;
    }
    memcpy(tprof__S.pend + tprof__S.pend_len, tprof__S.proc, tprof__S.proc_len);
    tprof__S.pend_len = need;
    tprof__S.proc_len = 0;
}

/* The drops no thread ring can carry: process-stream overflow and the events of threads
 * that got no ring. Caller holds tprof__S.lock. */
static uint64_t proc_dropped_locked(void) {
    return tprof__S.proc_dropped + atomic_load(&tprof__S.lost_events);
}

/* Writes the process stream taken into tprof__S.pend; its chunk header carries `dropped`. Its
 * records (the rank, capabilities, names of domains) are worth a retry: a chunk that
 * cannot be written is kept and offered again on the next pass, except on the `final` one,
 * where it is counted as lost. Flusher only. */
static void flush_proc(uint64_t dropped, int final) {
    if (tprof__S.pend_len == 0 && dropped == tprof__S.proc_dropped_written) return;
    if (tprof__writer_chunk(0, (uint32_t)getpid(), dropped, tprof__S.pend, tprof__S.pend_len,
                            !final) == 0 ||
        final) {
        tprof__S.proc_dropped_written = dropped;
        tprof__S.pend_len = 0;
    }
}

void tprof__thread_free(tprof__thread *t) {
    tprof__writer_thread_gone(t);
    tprof__metrics_thread_free(t->m_scan);
    for (uint32_t i = 0; i < t->str_cap; i++) free(t->strs[i].str);
    free(t->strs);
    free(t->buf);
    free(t);
}

/* One pass of the flusher: the process stream, then every ring; threads that exited are
 * freed once drained. tprof__S.lock is taken twice, briefly, and never across a write: to take the
 * process stream and a copy of the registry, then to remove the threads freed. A thread that
 * registers, names a domain or sets metadata meanwhile waits for a copy, never for storage.
 * `final`: the last pass, which tries writing even while backing off after errors. */
static void flush_pass(int final) {
    if (atomic_exchange(&tprof__S.flush_asked, 0) || final) tprof__writer_retry_now();
    pthread_mutex_lock(&tprof__S.lock);
    /* process stream first so that domains are defined before the ranges that use them
     * (the reader does not depend on it, but a torn file keeps more meaning) */
    take_proc_locked();
    uint64_t proc_dropped = proc_dropped_locked();
    uint32_t n = tprof__S.nthreads;
    memcpy(tprof__S.snap, tprof__S.threads, n * sizeof *tprof__S.snap);
    pthread_mutex_unlock(&tprof__S.lock);

    flush_proc(proc_dropped, 0);
    uint32_t nfreed = 0;
    for (uint32_t i = 0; i < n; i++) {
        tprof__thread *t = tprof__S.snap[i];
        int exited = atomic_load_explicit(&t->exited, memory_order_acquire);
        drain_thread(t);
        if (!exited) continue;
        /* keep its drop count: add a final empty chunk if it dropped anything */
        uint64_t d = atomic_load_explicit(&t->dropped, memory_order_relaxed);
        if (d) tprof__writer_thread_chunk(t, d, NULL, 0);
        tprof__S.m_freed_drops += d;
        tprof__S.snap[nfreed++] = t; /* in registry order */
    }

    uint64_t drops = 0;
    pthread_mutex_lock(&tprof__S.lock);
    if (nfreed) {
        /* the registry still starts with the threads copied (only this thread removes),
         * so the freed ones are found in one walk */
        uint32_t w = 0, k = 0;
        for (uint32_t i = 0; i < tprof__S.nthreads; i++) {
            if (k < nfreed && tprof__S.threads[i] == tprof__S.snap[k]) {
                k++;
                continue;
            }
            tprof__S.threads[w++] = tprof__S.threads[i];
        }
        tprof__S.nthreads = w;
    }
    int metrics = TPROF_UNLIKELY(TPROF__METRICS_ON());
    if (metrics) {
        drops = tprof__S.m_freed_drops + proc_dropped_locked();
        for (uint32_t i = 0; i < tprof__S.nthreads; i++)
            drops += atomic_load_explicit(&tprof__S.threads[i]->dropped, memory_order_relaxed);
    }
    pthread_mutex_unlock(&tprof__S.lock);
    for (uint32_t k = 0; k < nfreed; k++) tprof__thread_free(tprof__S.snap[k]);
    if (metrics) tprof__metrics_pass(drops, tprof__S.m_bytes);
    atomic_store_explicit(&tprof__S.alive_ns, tprof__now(), memory_order_relaxed);
}

/* The end of the file: drop totals and the END_OF_FILE record, written at once (with the
 * writer's error counts before them), then fsync. Flusher only. `reason`: the signal that
 * ends the process, 0 for a normal end (docs/format.md). */
static void write_end_record(int reason) {
    pthread_mutex_lock(&tprof__S.lock);
    uint64_t total = proc_dropped_locked() + tprof__S.m_freed_drops;
    uint64_t lost = atomic_load(&tprof__S.lost_threads);
    if (lost) {
        char v[32];
        snprintf(v, sizeof v, "%llu", (unsigned long long)lost);
        tprof__proc_record_locked(TPROF_REC_META, 0, NULL, 0, "threads_over_limit", v);
    }
    for (uint32_t i = 0; i < tprof__S.nthreads; i++)
        total += atomic_load(&tprof__S.threads[i]->dropped);
    tprof_pl_clock pl = {tprof__realtime_now(), tprof__now(), total};
    tprof__proc_record_locked(TPROF_REC_END_OF_FILE, (uint32_t)reason, &pl, sizeof pl, NULL, NULL);
    pthread_mutex_unlock(&tprof__S.lock);
    tprof__writer_retry_now();
    tprof__writer_status();
    /* twice: what an earlier pass kept, then what did not fit behind it */
    for (int i = 0; i < 2; i++) {
        pthread_mutex_lock(&tprof__S.lock);
        take_proc_locked();
        uint64_t dropped = proc_dropped_locked();
        pthread_mutex_unlock(&tprof__S.lock);
        flush_proc(dropped, 1);
    }
    tprof__writer_final(); /* the counts last, so that they include the end's own chunk */
    atomic_store(&tprof__S.end_written, !tprof__writer_failing());
    tprof__writer_sync();
}

/* Wakes the flusher. Async-signal-safe (sem_post). */
void tprof__flusher_wake(void) { sem_post(&tprof__S.wake); }

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
    while (sem_clockwait(&tprof__S.wake, CLOCK_MONOTONIC, &until) != 0 && errno == EINTR) {
    }
    while (sem_trywait(&tprof__S.wake) == 0) {
    }
}

/* Bounds: TPROF__STALL_MS, TPROF__HANG_MS (session_state.h). */
int tprof__flusher_stalled(void) {
    uint64_t now = tprof__now();
    uint64_t since = atomic_load_explicit(&tprof__S.io_since_ns, memory_order_relaxed);
    if (since && now > since && now - since > (uint64_t)TPROF__STALL_MS * 1000000ull) return 1;
    uint64_t alive = atomic_load_explicit(&tprof__S.alive_ns, memory_order_relaxed);
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
        if (i >= max_ms * 4 || !tprof__S.flusher_running ||
            pthread_equal(pthread_self(), tprof__S.flusher))
            return 0;
        tprof__flusher_wake();
        struct timespec ts = {0, 250000};
        nanosleep(&ts, NULL);
    }
}

/* ------------------------------------------------------------- signals (signals.c) */

/* Each of these runs in a signal handler: atomics, sem_post (wake_flusher), nanosleep and
 * write() only. */

static int flusher_can_answer(void) {
    return atomic_load(&tprof__g_state) == TPROF__ON && tprof__S.flusher_running;
}

void tprof__session_signal_notify(int sig) {
    if (!flusher_can_answer()) return;
    int expected = 0;
    atomic_compare_exchange_strong(&tprof__S.pending_signal, &expected, sig);
    tprof__flusher_wake();
}

int tprof__session_signal_final(int sig, int wait_ms) {
    if (atomic_load(&tprof__S.final_done)) return 1;
    if (flusher_can_answer()) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&tprof__S.fatal_signal, &expected, sig))
            tprof__flusher_wake();
    }
    if (!atomic_load(&tprof__S.fatal_signal)) return 0; /* no session to finish */
    for (int ms = 0; ms < wait_ms && !atomic_load(&tprof__S.final_done); ms++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&tprof__S.final_done) != 0;
}

int tprof__session_on_flusher(void) {
    return tprof__S.flusher_running && pthread_equal(pthread_self(), tprof__S.flusher);
}

/* The flusher faulted: its state (and tprof__S.lock, which it may hold) cannot be trusted, so the
 * end record goes out as one chunk built here, after whatever the file already holds. A
 * reader that finds a chunk cut short before it skips that one as damage. */
void tprof__session_signal_emergency(int sig) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&tprof__S.fatal_signal, &expected, sig)) return;
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
        uint64_t dropped = atomic_load(&tprof__S.lost_events) + tprof__S.proc_dropped;
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
        end.ch.os_tid = (uint32_t)tprof__S.pid;
        end.ch.dropped = dropped;
        tprof__writer_emergency(&end, sizeof end);
    }
    atomic_store(&tprof__S.final_done, 1);
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
        tprof__session_set_state(TPROF__DOWN);
        flush_pass(1); /* what threads wrote while the state changed */
        write_end_record(sig);
    }
    tprof__session_set_state(TPROF__DOWN);
    tprof__capture_ctl_end(); /* the progress file says "alive": not past the process */
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
    atomic_store_explicit(&tprof__S.alive_ns, tprof__now(), memory_order_relaxed);
    /* running our code now: the thread library's and sanitizers' setup of this thread is
     * over (see tprof__flusher_start) */
    pthread_mutex_lock(&tprof__S.flush_lock);
    tprof__S.flusher_up = 1;
    pthread_cond_broadcast(&tprof__S.flush_cond);
    pthread_mutex_unlock(&tprof__S.flush_lock);
    int interval = (int)tprof__S.cfg.flush_interval_ms;
    if (interval <= 0) interval = 50;
    tprof__sources_start(&tprof__S.cfg);
    for (;;) {
        flusher_busy(1);
        atomic_store_explicit(&tprof__S.alive_ns, tprof__now(), memory_order_relaxed);
        int stopping = atomic_load(&tprof__S.stop);
        /* the capture sources' periodic work (src/capture/sources.c), on this thread */
        uint64_t due = tprof__sources_tick(stopping);
        tprof__capture_ctl_tick(stopping);
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
            atomic_store_explicit(&tprof__S.alive_ns, tprof__now(), memory_order_relaxed);
        }
        flush_pass(0);
        if (TPROF_UNLIKELY(TPROF__METRICS_ON())) tprof__metrics_after_pass();
        int sig = atomic_exchange(&tprof__S.pending_signal, 0);
        int fatal = atomic_load(&tprof__S.fatal_signal);
        if (fatal) {
            /* the process is about to end: finish the file, then release the handler,
             * which lets the default action happen */
            final_on_signal(fatal);
            atomic_store(&tprof__S.final_done, 1);
        } else if (sig) {
            tprof__writer_sync(); /* the program handles it; make what we have durable */
        }
        pthread_mutex_lock(&tprof__S.flush_lock);
        tprof__S.flush_gen++;
        pthread_cond_broadcast(&tprof__S.flush_cond);
        pthread_mutex_unlock(&tprof__S.flush_lock);
        flusher_busy(0);
        if (stopping || atomic_load(&tprof__S.final_done)) break;
    }
    if (atomic_load(&tprof__S.stop) && !atomic_load(&tprof__S.final_done)) {
        /* tprof_shutdown: what threads recorded while the state changed, the end record,
         * and the file closed, here rather than in the thread that shuts down, which waits
         * for it only as long as storage answers */
        flusher_busy(1);
        flush_pass(1);
        write_end_record(atomic_load(&tprof__S.fatal_signal)); /* one that came while stopping */
        tprof__writer_close();
        tprof__capture_ctl_end();
        atomic_store(&tprof__S.final_done, 1); /* a handler waiting for it goes on */
        flusher_busy(0);
    }
    pthread_mutex_lock(&tprof__S.flush_lock);
    tprof__S.flusher_done = 1;
    pthread_cond_broadcast(&tprof__S.flush_cond);
    pthread_mutex_unlock(&tprof__S.flush_lock);
    return NULL;
}



/* Starts the flusher and waits (at most 2 s) until it runs flusher_main. Until then the new
 * thread may be inside the thread library's or a sanitizer's setup of it, which allocates
 * (pthread_getattr_np under ASan), and fork_prepare's lock on busy cannot keep a fork from
 * copying it there with an allocator lock held: a child forked right after tprof_init would
 * hang in its first malloc (GCC 12's ASan). 0, or pthread_create's error. */
int tprof__flusher_start(void) {
    tprof__S.flusher_up = 0;
    int rc = tprof__thread_create(&tprof__S.flusher, flusher_main, NULL); /* a small stack */
    if (rc != 0) return rc;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2;
    pthread_mutex_lock(&tprof__S.flush_lock);
    while (!tprof__S.flusher_up)
        if (pthread_cond_timedwait(&tprof__S.flush_cond, &tprof__S.flush_lock, &until) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&tprof__S.flush_lock);
    return 0;
}
