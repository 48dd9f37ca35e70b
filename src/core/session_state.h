/*
 * session_state.h — the session state `tprof__S`, shared by the three files that make up the
 * session: session.c (start, registries, process stream, threads, shutdown), flusher.c (the
 * flusher thread, its passes, the end record, stall detection, the session's side of signal
 * handling) and fork.c (pthread_atfork handlers). Private to those three: nothing else in
 * the library includes it (everything else reaches the session through internal.h).
 *
 * Who owns what (writes it; others only read, as noted):
 *  - session.c: cfg, dir, run_id, no_file, api_cfg, pid, start_rt, start_mono, key,
 *    key_made, threads/snap (allocated), wake (sem_init): all set while the state is
 *    STARTING, before the flusher exists, and read-only while it runs. flusher_running
 *    (start, shutdown) and the thread handle `flusher` (set by tprof__flusher_start, joined
 *    or detached by shutdown), stop (shutdown), flush_asked (tprof_flush). The
 *    registries (domains, cats, caps), the process stream it appends to (proc, proc_len,
 *    proc_cap, proc_dropped) and the registry of threads (threads, nthreads, next_serial);
 *    lost_threads and lost_events (recording threads, atomically).
 *  - flusher.c: the flusher thread's own state, touched by no other thread: snap, pend,
 *    pend_len, pend_cap, proc_dropped_written, busy_held, m_bytes, m_freed_drops. It
 *    also takes the process stream (proc, under lock), removes the threads it freed from
 *    the registry (under lock), and writes alive_ns, io_since_ns (read by the waiters'
 *    stall check), end_written, flusher_up, flush_gen and flusher_done (under flush_lock).
 *    Its signal side (called from signal handlers, atomics only) sets pending_signal and
 *    fatal_signal, which the flusher takes; final_done is set by the flusher once the file
 *    is finished (or by the emergency end on the flusher's own fault) and read by the
 *    handler's wait and tprof_shutdown.
 *  - fork.c: in a forked child, where only the forking thread exists, it resets every
 *    field that describes the parent's session (locks, rings, flusher, signal state).
 *
 * Locks, and what each guards:
 *  - lock: the registry of threads, the process stream, the registries of names (domains
 *    are written under it and read without it: a slot is published before the count that
 *    covers it, release/acquire). Never held across I/O: the rank file is the flusher's
 *    alone (core/writer.c); it is held for copies and allocations only.
 *  - busy: held by the flusher except while it sleeps or waits on storage
 *    (tprof__flusher_io_begin/end); fork() takes it (fork.c) so that a child never
 *    inherits the flusher stopped inside malloc, fopen or zlib with their locks taken.
 *  - flush_lock (with flush_cond): flush_gen, flusher_done, flusher_up; the waiters
 *    (tprof_flush, tprof_shutdown, the flusher's start) sleep on flush_cond.
 * Order: a session that is STARTING settles first, then busy, then lock (fork_prepare
 * takes them so, as the flusher does); the flusher takes flush_lock while it holds busy,
 * never while it holds lock, and no thread takes lock while it holds flush_lock.
 *
 * The one instance is tprof__S, defined in session.c (hidden: not exported by the library).
 */
#ifndef TPROF_SESSION_STATE_H
#define TPROF_SESSION_STATE_H

#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "internal.h"

#define TPROF__PROC_MAX (4u << 20) /* process stream bound between flushes */
#define TPROF__MAX_DOMAINS 4096u

/* A thread that waits for the flusher (tprof_flush, tprof_shutdown) stops waiting once one
 * storage call of the flusher (a write of at most 1 MiB, ftruncate, fsync) has lasted this
 * long: storage that does not answer (a hung network file system, a full pipe) must not hang
 * the program. Outside storage calls the flusher may legitimately take longer (a vendor
 * library's first initialisation can take seconds), so there the bound is TPROF__HANG_MS
 * without any sign of progress. */
#define TPROF__STALL_MS 2000
#define TPROF__HANG_MS 30000

struct tprof__session {
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
    int api_cfg;            /* started by tprof_init: a forked child restarts from tprof__S.cfg */
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
};

extern struct tprof__session tprof__S;

/* ---- session.c */

/* Every state change goes through here so the header's inline switch follows it. */
void tprof__session_set_state(int st);

/* CLOCK_REALTIME in nanoseconds. */
uint64_t tprof__realtime_now(void);

/* Appends a record to the process stream (TPROF_ERR_LIMIT past TPROF__PROC_MAX, counted as
 * a drop). Caller holds tprof__S.lock. */
int tprof__proc_record_locked(uint16_t kind, uint32_t arg, const void *payload,
                              size_t pl_bytes, const char *s1, const char *s2);

/* ---- flusher.c */

/* Starts the flusher thread and waits (at most 2 s) until it runs. 0, or pthread_create's
 * error. Called by the session's start, with the state STARTING. */
int tprof__flusher_start(void);

/* Wakes the flusher. Async-signal-safe (sem_post). */
void tprof__flusher_wake(void);

/* 1 when the flusher shows no progress (TPROF__STALL_MS in one storage call,
 * TPROF__HANG_MS otherwise): a thread waiting for it stops waiting. Atomics only. */
int tprof__flusher_stalled(void);

/* Frees a ring and what hangs off it. The flusher, for a thread that exited and was
 * drained; fork.c, for the parent's rings in a child. */
void tprof__thread_free(tprof__thread *t);

/* ---- fork.c */

/* Registers the pthread_atfork handlers. Once per process, before the flusher exists. */
void tprof__fork_handlers_install(void);

#endif /* TPROF_SESSION_STATE_H */
