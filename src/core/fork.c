/*
 * fork.c — a session across fork() (docs/design.md §1): the pthread_atfork handlers. The
 * parent's side keeps a fork from copying the session mid-change (a start under way, the
 * flusher inside malloc or zlib, the registry being edited); the child's side drops its
 * copy of every ring and of the parent's file, and lets the child start its own file
 * lazily. The state it resets is the session's (session_state.h).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "internal.h"
#include "source.h"
#include "writer.h"
#include "session_state.h"

/* a session that is starting first (a child cannot finish another thread's start), then
 * the flusher idle (busy), then the session (lock): the order the flusher takes them in */
static void fork_prepare(void) {
    while (atomic_load(&tprof__g_state) == TPROF__STARTING) sched_yield();
    pthread_mutex_lock(&tprof__S.busy);
    pthread_mutex_lock(&tprof__S.lock);
}
static void fork_parent(void) {
    pthread_mutex_unlock(&tprof__S.lock);
    pthread_mutex_unlock(&tprof__S.busy);
}
static void fork_child(void) {
    /* Only this thread exists now. Drop the parent's unflushed events (they belong to the
     * parent's file) and let the child start its own file lazily. */
    pthread_mutex_init(&tprof__S.lock, NULL);
    pthread_mutex_init(&tprof__S.busy, NULL);
    pthread_mutex_init(&tprof__S.flush_lock, NULL);
    pthread_cond_init(&tprof__S.flush_cond, NULL);
    for (uint32_t i = 0; i < tprof__S.nthreads; i++) tprof__thread_free(tprof__S.threads[i]);
    tprof__S.nthreads = 0;
    tprof__S.next_serial = 0;
    tprof__tls = NULL;
    if (tprof__S.key_made) pthread_setspecific(tprof__S.key, NULL);
    tprof__writer_after_fork(); /* closes the child's copy of the parent's file */
    tprof__S.proc_len = 0;
    tprof__S.pend_len = 0;
    tprof__S.proc_dropped = 0;
    tprof__S.flusher_running = 0;
    tprof__S.flusher_done = 0;
    atomic_store(&tprof__S.end_written, 0);
    atomic_store(&tprof__S.io_since_ns, 0);
    tprof__S.busy_held = 0;
    atomic_store(&tprof__S.flush_asked, 0);
    atomic_store(&tprof__S.stop, 0);
    atomic_store(&tprof__S.pending_signal, 0);
    atomic_store(&tprof__S.lost_threads, 0);
    atomic_store(&tprof__S.lost_events, 0);
    tprof__S.proc_dropped_written = 0;
    atomic_store(&tprof__S.final_done, 0);
    atomic_store(&tprof__S.fatal_signal, 0);
    tprof__S.flush_gen = 0;
    tprof__S.flusher_up = 0;
    tprof__S.m_bytes = 0;
    tprof__S.m_freed_drops = 0;
    tprof__metrics_after_fork(); /* the parent's endpoint thread is not in this process */
    tprof__sources_after_fork(); /* e.g. the child's file names its own devices */
    tprof__capture_ctl_after_fork();
    /* STARTING only when another thread began a start after fork_prepare looked: that
     * thread is not in this process, so this one starts afresh */
    int st = atomic_load(&tprof__g_state);
    if (st == TPROF__ON || st == TPROF__STARTING) tprof__session_set_state(TPROF__UNINIT);
}

void tprof__fork_handlers_install(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }
