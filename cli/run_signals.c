/*
 * run_signals.c — the signals of `trainprof run` (cli/run_signals.h): those sent to the
 * launcher alone passed on to the job, those sent to the job's whole process group not twice.
 *
 * The job runs in this process's own process group, as any command a shell starts: the
 * terminal's Ctrl-C, Ctrl-\ and Ctrl-Z, a shell's `kill %1`, `timeout`, a batch system's
 * killpg reach every process of the job directly, the job reads and writes the terminal as
 * it does bare, and a script or `make` around `trainprof run` sees the interrupt itself.
 * A signal sent to this process alone (kill PID: a container's PID 1, a scheduler that
 * signals the step's first process) must be passed on; one sent to the whole group must
 * not, or the job would get it twice. The two look alike here (si_code SI_USER either
 * way), so a watcher process in the same group tells them apart: it gets every group
 * signal at the same moment, and reports each (signal, time) on a pipe. A signal this
 * process got is forwarded unless it came from the terminal (SI_KERNEL: delivered to the
 * whole foreground group) or the watcher got the same signal within TP_RUN_SIG_MATCH_MS,
 * in both cases only while the job is still in this group (a job that made a group of its
 * own, as Ray does, gets everything forwarded).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run_signals.h"
#include "trainprof.h"

/* Every signal whose default action ends a process that can come from outside (kill(2), a
 * batch system's warning before preemption, a terminal hang-up) is passed to the job, which
 * decides what it means; none ends this process first (which would leave the job without
 * its launcher: PR_SET_PDEATHSIG would then end it with SIGTERM, not the signal sent).
 * Those the kernel raises on this process's own faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
 * SIGXCPU, SIGXFSZ, SIGSYS) are not in the list. */
static const int fwd_sigs[] = {SIGTERM, SIGINT,  SIGHUP,    SIGQUIT, SIGUSR1,
                               SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGPIPE};
enum { N_FWD = sizeof fwd_sigs / sizeof *fwd_sigs };
static struct sigaction g_old_sa[N_FWD], g_old_chld;

#define TP_RUN_SIG_MATCH_MS 1000

static int g_wake[2] = {-1, -1};         /* self-pipe: a signal or SIGCHLD arrived */
static volatile sig_atomic_t g_recv[NSIG]; /* signals received (handler) ... */
static int g_done[NSIG];                   /* ... and dealt with (main loop) */
static volatile sig_atomic_t g_code[NSIG]; /* si_code of the latest */
static uint64_t g_when[NSIG];              /* CLOCK_MONOTONIC ns of the latest */

static void wake_main(void) {
    int e = errno;
    if (g_wake[1] >= 0) {
        ssize_t w = write(g_wake[1], "s", 1);
        (void)w; /* a full pipe already wakes the loop */
    }
    errno = e;
}

static void forward_signal(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    /* one this process raised on itself (a SIGPIPE for its own write to a pipe nobody
     * reads: the kernel names the writer as sender) is not the job's business */
    if (si && si->si_code == SI_USER && si->si_pid == getpid()) return;
    g_code[sig] = si ? si->si_code : SI_USER;
    g_when[sig] = tprof_now_ns();
    g_recv[sig]++;
    wake_main();
}

static void on_child(int sig) {
    (void)sig;
    wake_main();
}

/* The watcher: one (signal, time) report per signal it gets. */
typedef struct sig_report {
    int32_t sig;
    int32_t used;
    uint64_t ns;
} sig_report;

static int g_watch_fd = -1;
static void watcher_signal(int sig) {
    sig_report r = {sig, 0, tprof_now_ns()};
    ssize_t w = write(g_watch_fd, &r, sizeof r);
    (void)w;
}

/* Reports read from the watcher, the latest kept. */
#define TP_RUN_REPORTS 64
static sig_report g_reports[TP_RUN_REPORTS];
static unsigned g_nreports;

static void read_reports(int fd) {
    sig_report r;
    while (fd >= 0 && read(fd, &r, sizeof r) == (ssize_t)sizeof r) {
        r.used = 0;
        g_reports[g_nreports++ % TP_RUN_REPORTS] = r;
    }
}

/* Whether the watcher got `sig` within TP_RUN_SIG_MATCH_MS of `when` (waiting for its report
 * until then); a report matches one signal only. */
static int watcher_got(int fd, int sig, uint64_t when) {
    const uint64_t win = (uint64_t)TP_RUN_SIG_MATCH_MS * 1000000ull;
    for (;;) {
        read_reports(fd);
        unsigned n = g_nreports < TP_RUN_REPORTS ? g_nreports : TP_RUN_REPORTS;
        for (unsigned i = 0; i < n; i++) {
            sig_report *r = &g_reports[i];
            uint64_t d = r->ns > when ? r->ns - when : when - r->ns;
            if (r->sig == sig && !r->used && d <= win) {
                r->used = 1;
                return 1;
            }
        }
        uint64_t now = tprof_now_ns();
        if (fd < 0 || now >= when + win) return 0;
        struct pollfd pf = {fd, POLLIN, 0};
        int ms = (int)((when + win - now) / 1000000ull) + 1;
        if (poll(&pf, 1, ms) < 0 && errno != EINTR) return 0;
    }
}

/* The watcher's pid (the pipe's reading end in *fd), or -1 without one. */
static pid_t watcher_start(const int *sigs, int n, int *fd) {
    int p[2];
    *fd = -1;
    if (pipe2(p, O_CLOEXEC) != 0) return -1;
    /* the signals held from here until the watcher has its handlers (in the watcher) and
     * until it is known (here): none is lost, none meets the wrong handler */
    sigset_t held, old;
    sigemptyset(&held);
    for (int k = 0; k < n; k++) sigaddset(&held, sigs[k]);
    pthread_sigmask(SIG_BLOCK, &held, &old);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(0);
        prctl(PR_SET_NAME, "trainprof-sig");
        g_watch_fd = p[1];
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = watcher_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        for (int k = 0; k < n; k++) sigaction(sigs[k], &sa, NULL);
        for (int f = 0; f < 1024; f++)
            if (f != p[1]) close(f);
        watcher_signal(0); /* ready */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (;;) pause();
    }
    close(p[1]);
    if (pid > 0) {
        /* started once it says so (bounded: without it, every signal is forwarded) */
        sig_report r;
        struct pollfd pf = {p[0], POLLIN, 0};
        int ok = 0;
        for (int i = 0; i < 50 && !ok; i++) {
            if (poll(&pf, 1, 100) > 0) ok = read(p[0], &r, sizeof r) == (ssize_t)sizeof r;
            else if (waitpid(pid, NULL, WNOHANG) == pid) break;
        }
        if (!ok) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            pid = -1;
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) {
        close(p[0]);
        return -1;
    }
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    *fd = p[0];
    return pid;
}

void run_signals_forward(pid_t job, const run_watch *w) {
    int watch_fd = w->fd;
    for (int k = 0; k < N_FWD; k++) {
        int sig = fwd_sigs[k];
        while (g_done[sig] != g_recv[sig]) {
            g_done[sig]++;
            int same_group = getpgid(job) == getpgrp();
            if (same_group && g_code[sig] == SI_KERNEL) continue; /* the terminal's */
            if (same_group && watcher_got(watch_fd, sig, g_when[sig])) continue;
            kill(job, sig);
        }
    }
    read_reports(watch_fd); /* the watcher's own copies of signals dealt with above */
}

void run_signals_begin(void) {
    if (g_wake[0] < 0 && pipe2(g_wake, O_CLOEXEC | O_NONBLOCK) != 0) g_wake[0] = g_wake[1] = -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward_signal;
    sa.sa_flags = SA_RESTART | SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    for (int k = 0; k < N_FWD; k++) sigaction(fwd_sigs[k], &sa, &g_old_sa[k]);
    struct sigaction ch;
    memset(&ch, 0, sizeof ch);
    ch.sa_handler = on_child;
    ch.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&ch.sa_mask);
    sigaction(SIGCHLD, &ch, &g_old_chld);
}

void run_signals_end(void) {
    for (int k = 0; k < N_FWD; k++) sigaction(fwd_sigs[k], &g_old_sa[k], NULL);
    sigaction(SIGCHLD, &g_old_chld, NULL);
}

void run_watch_start(run_watch *w) {
    w->pid = watcher_start(fwd_sigs, N_FWD, &w->fd);
}

void run_watch_stop(run_watch *w) {
    if (w->pid <= 0) return;
    kill(w->pid, SIGKILL);
    while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    close(w->fd);
    w->pid = -1;
    w->fd = -1;
}

void run_signals_wait(int ms) {
    struct pollfd pf = {g_wake[0], POLLIN, 0};
    if (poll(&pf, g_wake[0] >= 0 ? 1 : 0, ms) > 0) {
        char buf[64];
        while (read(g_wake[0], buf, sizeof buf) > 0) {
        }
    }
}
