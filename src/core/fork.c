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
#include "session_state.h" /* last: it defines S */

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
    for (uint32_t i = 0; i < S.nthreads; i++) tprof__thread_free(S.threads[i]);
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
    if (st == TPROF__ON || st == TPROF__STARTING) tprof__session_set_state(TPROF__UNINIT);
}

void tprof__fork_handlers_install(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }
