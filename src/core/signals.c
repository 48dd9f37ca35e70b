/*
 * signals.c — a process that dies of a signal still gets its rank file finished, and the
 * job never sees a signal behave otherwise than it asked.
 *
 * What the job sees (the invariant): every disposition it can observe is the one it set or
 * inherited. Once a session starts, trainprof's handler (on_signal) sits in the kernel in
 * front of each covered signal (those whose default action ends the process) that the job
 * left at its default or gave a handler of its own; a signal it ignores stays ignored in the
 * kernel. For each such signal the slot below keeps the job's disposition exactly as the
 * kernel reported it (handler, flags with glibc's SA_RESTORER, mask, restorer), and:
 *  - the kernel action carries the job's SA_RESTART, SA_NODEFER, SA_ONSTACK and sa_mask,
 *    so an interrupted read returns EINTR or restarts, and signals nest, exactly as with the
 *    job's own action; SA_RESETHAND is done here, as the kernel does it (only the handler
 *    is reset to SIG_DFL, under the slot's lock, before the handler runs once);
 *  - the job's handler is called with the same arguments (signo; or signo, siginfo and
 *    context for SA_SIGINFO), errno as the kernel left it;
 *  - for the default action, the flusher first writes what is recorded and the end record
 *    naming the signal (bounded wait), then the kernel takes the default action for the
 *    same signal with the same siginfo, so the wait status, the core dump and its siginfo
 *    are what they would have been;
 *  - sigaction(), signal(), bsd_signal(), sysv_signal(), sigset() and siginterrupt() are
 *    interposed (libtrainprof is preloaded, or linked ahead of libc): a query returns the
 *    job's disposition, never ours (CPython installs its SIGINT handler only where it finds
 *    SIG_DFL, and faulthandler restores what it found). A handler the job sets after the
 *    session started goes into the kernel as given (the job owns that signal from then on);
 *    SIG_DFL set later brings trainprof's handler back in front of it, so that a job
 *    handler that restores the default and re-raises (faulthandler, PyTorch's worker
 *    handlers) still ends with a finished file; so does a one-shot handler (SA_RESETHAND,
 *    sysv_signal) set later, whose reset to the default the kernel would do unseen.
 * A disposition set behind our back (a raw rt_sigaction, a runtime such as Go's) replaces
 * ours in the kernel; from then on the signal is the job's and queries pass through: a slot
 * is used only while the kernel holds on_signal.
 *
 * Async-signal safety: the handler takes no lock another thread may hold across a call.
 * A slot's lock is a spin flag held only with every signal blocked and only around a copy,
 * so it is never held by the interrupted context of the same thread. The flusher is woken
 * through a semaphore (sem_post) and waited for in 1 ms nanosleep steps (flusher.c), so the
 * session holds no descriptor the job could close or reuse. A fatal signal on the flusher
 * thread itself, or a fault inside the fatal path, ends the process at once: no wait on a
 * thread that cannot answer, no loop.
 *
 * Fork: the dispositions and slots are inherited; a forked child owns its copy (atfork).
 * A vfork()ed child shares the parent's memory: there the wrappers answer queries from the
 * slots but write none, so nothing the child does changes the parent's view.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "interpose.h"
#include "config.h"
#include "internal.h"
#include "signals.h"

/* Not in a ThreadSanitizer build: its runtime resolves the sigaction it calls itself to the
 * next definition after it, which would be ours, and calls it while it initialises, before
 * the instrumented code here may run (ASan's runtime initialises its shadow first, so there
 * the interposition is tested). Such a build then shows on_signal in queries. */
#if defined(__SANITIZE_THREAD__)
#define TPROF__INTERPOSE 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TPROF__INTERPOSE 0
#endif
#endif
#ifndef TPROF__INTERPOSE
#define TPROF__INTERPOSE 1
#endif

/* Each signal whose default action ends the process (signal(7)), less SIGTRAP (debuggers),
 * SIGPROF and SIGVTALRM (profilers' timers), SIGIO, SIGPWR, SIGSTKFLT and the real-time
 * signals (libraries' private channels, which trainprof leaves to them). */
static const int k_covered[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGILL,  SIGABRT, SIGBUS,
                                SIGFPE,  SIGUSR1, SIGSEGV, SIGUSR2, SIGPIPE, SIGALRM,
                                SIGTERM, SIGXCPU, SIGXFSZ, SIGSYS};
#define NCOVERED (sizeof k_covered / sizeof k_covered[0])

typedef struct slot {
    _Atomic int lock;     /* spin flag; held only with all signals blocked */
    struct sigaction job; /* the job's disposition, as the kernel reported it */
} slot;

static slot g_slot[_NSIG];
static _Atomic int g_active;        /* tprof__signals_install ran (in this process or a parent) */
static _Atomic pid_t g_owner;       /* the process that may write the slots */
static _Atomic pid_t g_fatal_tid;   /* the thread finishing the file for a fatal signal */

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef sighandler_t (*signal_fn)(int, sighandler_t);
typedef int (*siginterrupt_fn)(int, int);

/* libc's functions (or those of a sanitizer interposed between us and libc). Resolved in
 * the constructor, so the handler never calls dlsym; earlier when another library calls one
 * of them first (a sanitizer's runtime installs its handlers before our constructor runs). */
static void *g_real[7];
enum { R_SIGACTION, R_SIGNAL, R_BSD_SIGNAL, R_SYSV_SIGNAL, R___SYSV_SIGNAL, R_SIGSET,
       R_SIGINTERRUPT };
/* sigset() and siginterrupt() are obsolescent, and programs still call them */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static const char *const k_real_names[7] = {"sigaction",     "signal", "bsd_signal",
                                            "sysv_signal",   "__sysv_signal", "sigset",
                                            "siginterrupt"};

static void *real(int which) {
    return tprof__next_symbol_cached(&g_real[which], k_real_names[which]);
}

static sigaction_fn real_sigaction(void) { return (sigaction_fn)real(R_SIGACTION); }

int tprof__signal_synchronous(int sig) {
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGABRT ||
           sig == SIGSYS;
}

static void on_signal(int sig, siginfo_t *info, void *uc);

static int is_ours(const struct sigaction *k) {
    return (k->sa_flags & SA_SIGINFO) &&
           (void (*)(void))k->sa_sigaction == (void (*)(void))on_signal;
}

/* ------------------------------------------------------------------------ slots */

static void slot_lock(int sig, sigset_t *saved) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, saved);
    while (atomic_exchange_explicit(&g_slot[sig].lock, 1, memory_order_acquire)) sched_yield();
}

static void slot_unlock(int sig, const sigset_t *saved) {
    atomic_store_explicit(&g_slot[sig].lock, 0, memory_order_release);
    pthread_sigmask(SIG_SETMASK, saved, NULL);
}

/* Puts on_signal in the kernel in front of `job`. For a handler of the job, the kernel
 * action has the job's flags and mask, so that delivery, nesting and restart are the job's;
 * for SIG_DFL, every signal is blocked while the file is finished (the process is dying:
 * nothing of the job may run meanwhile). Caller holds the slot. */
static void put_ours(sigaction_fn sa, int sig, const struct sigaction *job) {
    struct sigaction k;
    memset(&k, 0, sizeof k);
    k.sa_sigaction = on_signal;
    if (job->sa_handler == SIG_DFL) {
        k.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
        sigfillset(&k.sa_mask);
    } else {
        k.sa_flags = SA_SIGINFO | (job->sa_flags & (SA_ONSTACK | SA_RESTART | SA_NODEFER));
        k.sa_mask = job->sa_mask;
    }
    sa(sig, &k, NULL);
}

#if TPROF__INTERPOSE
/* The job just set an action in the kernel. SIG_DFL, or a one-shot handler (SA_RESETHAND,
 * which the kernel would turn back into SIG_DFL without any call we could see): keep it as
 * the kernel reports it, and put on_signal back in front of it, so that the default action,
 * now or after the one shot, still finishes the file. Any other handler stays in the
 * kernel as given. Caller holds the slot. */
static void take_kernel(sigaction_fn sa, int sig) {
    struct sigaction now;
    if (sa(sig, NULL, &now) != 0 || now.sa_handler == SIG_IGN || is_ours(&now)) return;
    if (now.sa_handler != SIG_DFL && !(now.sa_flags & SA_RESETHAND)) return;
    g_slot[sig].job = now;
    put_ours(sa, sig, &now);
}

static int covered(int sig) {
    for (size_t i = 0; i < NCOVERED; i++)
        if (k_covered[i] == sig) return 1;
    return 0;
}

/* Whether the wrappers answer for `sig` from its slot (any process that inherited the
 * slots), and whether they may write it (only the owner: not a vfork()ed child). */
static int translating(int sig) {
    return sig > 0 && sig < _NSIG && atomic_load_explicit(&g_active, memory_order_acquire) &&
           covered(sig);
}
static int owning(void) {
    return atomic_load_explicit(&g_owner, memory_order_relaxed) == (pid_t)syscall(SYS_getpid);
}
#endif

void tprof__signals_install(void) {
    if (tprof__env(TPROF__OPT_NO_SIGNALS)) return; /* set at all: docs/cli.md */
    sigaction_fn sa = real_sigaction();
    if (!sa) return;
    atomic_store(&g_owner, (pid_t)syscall(SYS_getpid));
    atomic_store_explicit(&g_active, 1, memory_order_release);
    for (size_t i = 0; i < NCOVERED; i++) {
        int sig = k_covered[i];
        sigset_t saved;
        slot_lock(sig, &saved);
        struct sigaction cur;
        /* ignored: stays ignored in the kernel (a job that ignores SIGPIPE gets EPIPE);
         * ours already (a forked child's new session): the inherited slot is right */
        if (sa(sig, NULL, &cur) == 0 && cur.sa_handler != SIG_IGN && !is_ours(&cur)) {
            g_slot[sig].job = cur;
            put_ours(sa, sig, &cur);
        }
        slot_unlock(sig, &saved);
    }
}

/* --------------------------------------------------------------------- the handler */

/* Ends the process by `sig` as its default action would: the kernel's default back, and
 * the signal queued again to this thread with the same siginfo, blocked here until the
 * handler returns. Returning restores the interrupted context first, so a core dump shows
 * where the program was, and its siginfo (si_code, si_addr) is the original's. */
static void die(int sig, const siginfo_t *info) {
    sigaction_fn sa = real_sigaction();
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    if (sa) sa(sig, &dfl, NULL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    pthread_sigmask(SIG_BLOCK, &one, NULL);
    pid_t pid = (pid_t)syscall(SYS_getpid), tid = (pid_t)syscall(SYS_gettid);
    if (info) {
        siginfo_t si = *info;
        if (syscall(SYS_rt_tgsigqueueinfo, pid, tid, sig, &si) == 0) return;
    }
    syscall(SYS_tgkill, pid, tid, sig);
}

static void fatal(int sig, const siginfo_t *info) {
    /* the job would be dead now: none of its handlers may run while the file is finished */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    pid_t tid = (pid_t)syscall(SYS_gettid), none = 0;
    if (atomic_load(&g_fatal_tid) == tid) {
        /* a fatal signal inside the path below on this thread: end at once */
    } else if (atomic_compare_exchange_strong(&g_fatal_tid, &none, tid)) {
        if (tprof__session_on_flusher()) tprof__session_signal_emergency(sig);
        else tprof__session_signal_final(sig, TPROF__SIGNAL_FLUSH_MS);
    } else {
        /* another thread is finishing the file: die after it, not before */
        tprof__session_signal_final(sig, TPROF__SIGNAL_FLUSH_MS);
    }
    die(sig, info);
}

static void on_signal(int sig, siginfo_t *info, void *uc) {
    int saved_errno = errno;
    if (sig <= 0 || sig >= _NSIG) return;
    struct sigaction job;
    sigset_t saved;
    slot_lock(sig, &saved);
    job = g_slot[sig].job;
    if ((job.sa_flags & SA_RESETHAND) && job.sa_handler != SIG_DFL && job.sa_handler != SIG_IGN)
        g_slot[sig].job.sa_handler = SIG_DFL; /* one shot: the kernel resets only the handler */
    slot_unlock(sig, &saved);
    if (job.sa_handler == SIG_IGN) {
        errno = saved_errno;
        return;
    }
    if (job.sa_handler == SIG_DFL) {
        fatal(sig, info);
        errno = saved_errno;
        return;
    }
    if (sig == SIGTERM || sig == SIGINT) tprof__session_signal_notify(sig);
    errno = saved_errno;
    if (job.sa_flags & SA_SIGINFO) job.sa_sigaction(sig, info, uc);
    else job.sa_handler(sig);
}

/* ---------------------------------------------------------------- the interposed calls */

#if TPROF__INTERPOSE

static int wrap_sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    sigaction_fn sa = real_sigaction();
    if (!sa) {
        errno = ENOSYS;
        return -1;
    }
    if (!translating(sig)) return sa(sig, act, old);
    int own = owning();
    int setting = own && act != NULL; /* act may alias old */
    int e = errno;
    sigset_t saved;
    slot_lock(sig, &saved);
    struct sigaction k;
    int rc = sa(sig, act, &k);
    if (rc != 0) {
        e = errno;
    } else {
        if (old) *old = is_ours(&k) ? g_slot[sig].job : k;
        if (setting) take_kernel(sa, sig);
    }
    slot_unlock(sig, &saved);
    errno = e;
    return rc;
}

TPROF_API int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    return wrap_sigaction(sig, act, old);
}

/* glibc exports its implementation under this name too */
TPROF_API int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);
TPROF_API int __sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    return wrap_sigaction(sig, act, old);
}

static sighandler_t signal_via(int which, int sig, sighandler_t h) {
    signal_fn fn = (signal_fn)real(which);
    if (!fn) {
        errno = ENOSYS;
        return SIG_ERR;
    }
    if (!translating(sig)) return fn(sig, h);
    int own = owning();
    sigset_t saved;
    slot_lock(sig, &saved);
    /* libc builds the job's action (its flags and mask differ between these functions) */
    sighandler_t prev = fn(sig, h);
    int e = errno;
    if (prev != SIG_ERR) {
        if ((void (*)(void))prev == (void (*)(void))on_signal) prev = g_slot[sig].job.sa_handler;
        if (own) take_kernel(real_sigaction(), sig);
    }
    slot_unlock(sig, &saved);
    errno = e;
    return prev;
}

TPROF_API sighandler_t signal(int sig, sighandler_t h) { return signal_via(R_SIGNAL, sig, h); }
TPROF_API sighandler_t bsd_signal(int sig, sighandler_t h) {
    return signal_via(R_BSD_SIGNAL, sig, h);
}
TPROF_API sighandler_t sysv_signal(int sig, sighandler_t h) {
    return signal_via(R_SYSV_SIGNAL, sig, h);
}
TPROF_API sighandler_t __sysv_signal(int sig, sighandler_t h) {
    return signal_via(R___SYSV_SIGNAL, sig, h);
}
/* sigset() also changes the signal mask and reports it (SIG_HOLD), which the slot's blocking
 * would disturb: libc's runs unlocked, then its answer is translated and SIG_DFL covered. A
 * signal in between finds the job's disposition as libc set it. */
TPROF_API sighandler_t sigset(int sig, sighandler_t disp) {
    signal_fn fn = (signal_fn)real(R_SIGSET);
    if (!fn) {
        errno = ENOSYS;
        return SIG_ERR;
    }
    if (!translating(sig)) return fn(sig, disp);
    int own = owning();
    sighandler_t prev = fn(sig, disp);
    if (prev == SIG_ERR) return prev;
    int e = errno;
    sigset_t saved;
    slot_lock(sig, &saved);
    if ((void (*)(void))prev == (void (*)(void))on_signal) prev = g_slot[sig].job.sa_handler;
    if (own && disp != SIG_HOLD) take_kernel(real_sigaction(), sig);
    slot_unlock(sig, &saved);
    errno = e;
    return prev;
}

/* glibc's siginterrupt edits the kernel action in place (its internal sigaction): while
 * on_signal is there, the edit lands on ours, and the job's view follows it. */
TPROF_API int siginterrupt(int sig, int flag) {
    siginterrupt_fn fn = (siginterrupt_fn)real(R_SIGINTERRUPT);
    sigaction_fn sa = real_sigaction();
    if (!fn || !sa) {
        errno = ENOSYS;
        return -1;
    }
    if (!translating(sig)) return fn(sig, flag);
    int own = owning();
    sigset_t saved;
    slot_lock(sig, &saved);
    int rc = fn(sig, flag);
    int e = errno;
    struct sigaction k;
    if (rc == 0 && own && sa(sig, NULL, &k) == 0 && is_ours(&k)) {
        struct sigaction *job = &g_slot[sig].job;
        if (flag) job->sa_flags &= ~SA_RESTART;
        else job->sa_flags |= SA_RESTART;
        if (job->sa_handler == SIG_DFL) put_ours(sa, sig, job);
    }
    slot_unlock(sig, &saved);
    errno = e;
    return rc;
}
#endif /* TPROF__INTERPOSE */

/* ------------------------------------------------------------------------ fork */

/* A fork while another thread holds a slot would leave the child's copy locked forever:
 * the slots are taken across fork(), with signals blocked (the mask is per thread). */
static __thread sigset_t t_fork_mask;

static void fork_prepare(void) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &t_fork_mask);
    for (size_t i = 0; i < NCOVERED; i++)
        while (atomic_exchange_explicit(&g_slot[k_covered[i]].lock, 1, memory_order_acquire))
            sched_yield();
}

static void fork_release(void) {
    for (size_t i = 0; i < NCOVERED; i++)
        atomic_store_explicit(&g_slot[k_covered[i]].lock, 0, memory_order_release);
    pthread_sigmask(SIG_SETMASK, &t_fork_mask, NULL);
}

static void fork_child(void) {
    /* the child's slots are its own copy: it may write them */
    if (atomic_load(&g_active)) atomic_store(&g_owner, (pid_t)syscall(SYS_getpid));
    atomic_store(&g_fatal_tid, 0);
    fork_release();
}

__attribute__((constructor)) static void signals_ctor(void) {
    for (int i = 0; i < 7; i++) real(i);
    pthread_atfork(fork_prepare, fork_release, fork_child);
}
