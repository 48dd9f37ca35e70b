/*
 * sig_victim.c — the program test_signals.c runs twice, once on its own and once with
 * libtrainprof preloaded (as `trainprof run` does), to compare what it sees of its signals.
 * It is NOT linked with libtrainprof: it finds the recording API with dlsym when the library
 * is preloaded, and runs the same code without recording otherwise, so the plain run is the
 * reference the profiled run must match exactly.
 *
 * Modes (output on stdout unless a FD is given; every line is a fact to compare):
 *   report        sets dispositions with each flag combination, some before the first
 *                 recorded range (the session starts there) and some after, and prints
 *                 what sigaction(), signal() and siginterrupt() report.
 *   behave        for handlers installed before and after the session: whether a blocking
 *                 read() interrupted by the signal returns EINTR or is restarted, the order
 *                 of nested deliveries with and without SA_NODEFER, sa_mask deferral,
 *                 whether the handler ran on the alternate stack, EPIPE with SIGPIPE
 *                 ignored.
 *   resethand SIG [late|sysv]
 *                 installs a handler for SIG with SA_RESETHAND, starts the session, sends
 *                 SIG twice: the second one takes the default action (the process dies).
 *                 late: the session starts first, then the handler is installed; sysv:
 *                 likewise, installed with sysv_signal() (one shot, SA_NODEFER).
 *   fatal KIND N  pushes "outer", records N ranges "work", pushes "last" and then dies by
 *                 KIND: abort, segv (raise), segv_real (a write through NULL), bus (raise),
 *                 bus_real (a mapped page past the end of its file), fpe_real (integer
 *                 division by zero), ill_real (__builtin_trap), hup, int, term, quit, usr1,
 *                 usr2, alrm (alarm(1)), pipe (a write to a pipe without reader). It never
 *                 flushes: what reaches the file is the final flush's doing.
 *   race T N      T threads each record N ranges "work", meet at a barrier, and all
 *                 raise(SIGSEGV) at once: one thread finishes the file, the others wait
 *                 for it, the process dies once.
 *   flusher N     records N ranges "work", flushes, then sends SIGSEGV to trainprof's
 *                 flusher thread (a fault of the flusher itself, as far as the handler can
 *                 tell); without trainprof, raise(SIGSEGV).
 *   loop FD       writes "pid P" then records "work" ranges forever, writing "N" after each
 *                 flush (the first N ranges are on disk).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* sigset() and siginterrupt() are obsolescent, and programs still call them */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static void (*p_push)(const char *);
static void (*p_pop)(void);
static int (*p_flush)(void);

static void load_api(void) {
    p_push = (void (*)(const char *))dlsym(RTLD_DEFAULT, "tprof_range_push");
    p_pop = (void (*)(void))dlsym(RTLD_DEFAULT, "tprof_range_pop");
    p_flush = (int (*)(void))dlsym(RTLD_DEFAULT, "tprof_flush");
}
static void push(const char *n) { if (p_push) p_push(n); }
static void pop(void) { if (p_pop) p_pop(); }
static void flush(void) { if (p_flush) p_flush(); }

/* The session starts with the first recorded range. */
static void start_session(void) {
    push("start");
    pop();
    flush();
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static pid_t gettid_(void) { return (pid_t)syscall(SYS_gettid); }

/* ------------------------------------------------------------------ handlers */

static volatile sig_atomic_t g_count[65];
static char g_log[256];
static volatile sig_atomic_t g_loglen;
static void logc(char c) {
    if (g_loglen < (sig_atomic_t)sizeof g_log - 1) g_log[g_loglen++] = c;
}
static stack_t g_alt;
static volatile sig_atomic_t g_on_alt;

static void h_plain(int sig) { g_count[sig]++; }
static void h_info(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    g_count[sig]++;
    if (si->si_signo != sig) logc('!');
}
/* nests: on the first entry raises its own signal again */
static void h_nest(int sig) {
    int d = ++g_count[sig];
    logc('0' + (char)d);
    if (d == 1) raise(sig);
    logc('a' + (char)(d - 1));
}
/* raises SIGHUP inside: deferred when SIGHUP is in the handler's mask */
static void h_masker(int sig) {
    (void)sig;
    logc('M');
    raise(SIGHUP);
    logc('m');
}
static void h_hup_log(int sig) {
    g_count[sig]++;
    logc('H');
}
static void h_alt(int sig) {
    char here;
    g_count[sig]++;
    g_on_alt = &here >= (char *)g_alt.ss_sp && &here < (char *)g_alt.ss_sp + g_alt.ss_size;
}
static void h_print(int sig) {
    char b[32];
    int n = snprintf(b, sizeof b, "handler %d\n", (int)++g_count[sig]);
    ssize_t w = write(1, b, (size_t)n);
    (void)w;
}

static const struct {
    void (*fn)(void);
    const char *name;
} k_names[] = {
    {(void (*)(void))h_plain, "h_plain"}, {(void (*)(void))h_info, "h_info"},
    {(void (*)(void))h_nest, "h_nest"},   {(void (*)(void))h_masker, "h_masker"},
    {(void (*)(void))h_hup_log, "h_hup_log"}, {(void (*)(void))h_alt, "h_alt"},
    {(void (*)(void))h_print, "h_print"},
};

static const char *handler_name(void (*fn)(void)) {
    if (fn == (void (*)(void))SIG_DFL) return "SIG_DFL";
    if (fn == (void (*)(void))SIG_IGN) return "SIG_IGN";
    for (size_t i = 0; i < sizeof k_names / sizeof *k_names; i++)
        if (k_names[i].fn == fn) return k_names[i].name;
    return "FOREIGN"; /* a handler this program never set */
}

static const int k_sigs[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGILL,  SIGABRT, SIGBUS,
                             SIGFPE,  SIGUSR1, SIGSEGV, SIGUSR2, SIGPIPE, SIGALRM,
                             SIGTERM, SIGXCPU, SIGXFSZ, SIGSYS,  SIGCHLD, SIGPROF};
#define NSIGS (sizeof k_sigs / sizeof *k_sigs)

static void print_disp(const char *when) {
    for (size_t i = 0; i < NSIGS; i++) {
        struct sigaction o;
        memset(&o, 0xa5, sizeof o);
        if (sigaction(k_sigs[i], NULL, &o) != 0) {
            printf("%s %s: sigaction failed: %s\n", when, strsignal(k_sigs[i]), strerror(errno));
            continue;
        }
        unsigned long mask = 0;
        for (int s = 1; s < 64; s++)
            if (sigismember(&o.sa_mask, s) == 1) mask |= 1ul << s;
        printf("%s %-2d %-10s flags=%#x mask=%#lx restorer=%s\n", when, k_sigs[i],
               handler_name((void (*)(void))o.sa_handler), (unsigned)o.sa_flags, mask,
               o.sa_restorer ? "set" : "null");
    }
}

static void set(int sig, void (*fn)(void), int flags, int mask_sig) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    if (flags & SA_SIGINFO) sa.sa_sigaction = (void (*)(int, siginfo_t *, void *))fn;
    else sa.sa_handler = (void (*)(int))fn;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    if (mask_sig) sigaddset(&sa.sa_mask, mask_sig);
    if (sigaction(sig, &sa, NULL) != 0) {
        perror("sigaction");
        exit(3);
    }
}

/* ------------------------------------------------------------------ report */

static int mode_report(void) {
    /* before the session: the handlers trainprof finds and must chain to */
    set(SIGINT, (void (*)(void))h_plain, 0, SIGUSR2);
    set(SIGTERM, (void (*)(void))h_info, SA_SIGINFO | SA_RESTART | SA_ONSTACK, 0);
    set(SIGHUP, (void (*)(void))h_plain, SA_RESETHAND, 0);
    set(SIGUSR1, (void (*)(void))h_info, SA_SIGINFO | SA_NODEFER, SIGALRM);
    set(SIGPIPE, (void (*)(void))SIG_IGN, 0, 0);
    set(SIGXCPU, (void (*)(void))SIG_DFL, SA_RESTART, SIGINT);
    signal(SIGQUIT, h_plain);
    sysv_signal(SIGALRM, h_plain);
    print_disp("before");
    start_session();
    print_disp("session");
    /* after: what trainprof must hand over, and SIG_DFL it covers again */
    set(SIGUSR2, (void (*)(void))h_plain, SA_RESTART, SIGHUP);
    set(SIGTERM, (void (*)(void))SIG_DFL, SA_NODEFER, SIGQUIT);
    struct sigaction old;
    memset(&old, 0, sizeof old);
    struct sigaction dfl = {0};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGUSR1, &dfl, &old); /* the old one is the job's */
    printf("replaced SIGUSR1: %s flags=%#x\n", handler_name((void (*)(void))old.sa_handler),
           (unsigned)old.sa_flags);
    printf("signal(SIGINT) returned %s\n",
           handler_name((void (*)(void))signal(SIGINT, SIG_DFL)));
    printf("signal(SIGINT) returned %s\n",
           handler_name((void (*)(void))signal(SIGINT, h_plain)));
    printf("sigset(SIGQUIT) returned %s\n",
           handler_name((void (*)(void))sigset(SIGQUIT, SIG_DFL)));
    siginterrupt(SIGINT, 1);
    siginterrupt(SIGXCPU, 1);
    print_disp("after");
    fflush(stdout);
    return 0;
}

/* ------------------------------------------------------------------ behave */

typedef struct kicker {
    pid_t tid;
    int sig;
    int wr;
} kicker;

/* Waits (at most 5 s) until thread tid is blocked in read(): /proc shows the system call a
 * thread is blocked in, so the signal surely lands inside the read, however loaded the
 * machine is. */
static void wait_in_read(pid_t tid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
    for (int i = 0; i < 5000; i++) {
        FILE *f = fopen(path, "r");
        long nr = -1;
        if (f) {
            if (fscanf(f, "%ld", &nr) != 1) nr = -1;
            fclose(f);
        } else {
            sleep_ms(20); /* no such file in this kernel: give the reader time */
            return;
        }
        if (nr == SYS_read) return;
        sleep_ms(1);
    }
}

/* Sends the signal to the reading thread once it blocks in read(), then ends the read with
 * a byte 300 ms later (a restarted read returns then). It blocks every signal: only the
 * reader gets it. */
static void *kick(void *arg) {
    kicker *k = arg;
    wait_in_read(k->tid);
    syscall(SYS_tgkill, getpid(), k->tid, k->sig);
    sleep_ms(300);
    ssize_t w = write(k->wr, "x", 1);
    (void)w;
    return NULL;
}

static void read_interrupted(int sig) {
    int p[2];
    if (pipe(p) != 0) exit(3);
    kicker k = {gettid_(), sig, p[1]};
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_t th;
    pthread_create(&th, NULL, kick, &k);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    int before = g_count[sig];
    char c;
    ssize_t r = read(p[0], &c, 1);
    int e = errno;
    pthread_join(th, NULL);
    printf("read during %s: %s, handler ran %d time(s)\n", strsignal(sig),
           r < 0 ? (e == EINTR ? "EINTR" : strerror(e)) : "restarted and completed",
           g_count[sig] - before);
    close(p[0]);
    close(p[1]);
}

static void nest(int sig) {
    g_loglen = 0;
    g_count[sig] = 0;
    raise(sig);
    g_log[g_loglen] = 0;
    printf("nesting of %s: %s\n", strsignal(sig), g_log);
}

static int mode_behave(void) {
    g_alt.ss_size = 1 << 16;
    g_alt.ss_sp = malloc(g_alt.ss_size);
    g_alt.ss_flags = 0;
    if (!g_alt.ss_sp || sigaltstack(&g_alt, NULL) != 0) exit(3);
    /* before the session */
    set(SIGINT, (void (*)(void))h_plain, 0, 0);
    set(SIGTERM, (void (*)(void))h_info, SA_SIGINFO | SA_RESTART, 0);
    set(SIGUSR1, (void (*)(void))h_nest, SA_NODEFER, 0);
    set(SIGUSR2, (void (*)(void))h_nest, 0, 0);
    set(SIGQUIT, (void (*)(void))h_masker, 0, SIGHUP);
    set(SIGHUP, (void (*)(void))h_hup_log, 0, 0);
    set(SIGALRM, (void (*)(void))h_alt, SA_ONSTACK, 0);
    signal(SIGPIPE, SIG_IGN);
    start_session();
    {
        int p[2];
        if (pipe(p) != 0) exit(3);
        close(p[0]);
        ssize_t w = write(p[1], "x", 1);
        printf("write to a pipe without reader, SIGPIPE ignored: %s\n",
               w < 0 && errno == EPIPE ? "EPIPE" : "other");
        close(p[1]);
    }
    read_interrupted(SIGINT);
    read_interrupted(SIGTERM);
    nest(SIGUSR1);
    nest(SIGUSR2);
    g_loglen = 0;
    raise(SIGQUIT);
    g_log[g_loglen] = 0;
    printf("SIGHUP raised inside a handler that masks it: %s\n", g_log);
    raise(SIGALRM);
    printf("SIGALRM handler on the alternate stack: %s\n", g_on_alt ? "yes" : "no");
    /* after the session: handed over as set */
    set(SIGINT, (void (*)(void))h_plain, SA_RESTART, 0);
    set(SIGTERM, (void (*)(void))h_plain, 0, 0);
    set(SIGUSR1, (void (*)(void))h_nest, 0, 0);
    set(SIGUSR2, (void (*)(void))h_nest, SA_NODEFER, 0);
    read_interrupted(SIGINT);
    read_interrupted(SIGTERM);
    nest(SIGUSR1);
    nest(SIGUSR2);
    /* BSD signal() restarts, until siginterrupt() says otherwise */
    signal(SIGINT, h_plain);
    read_interrupted(SIGINT);
    siginterrupt(SIGINT, 1);
    read_interrupted(SIGINT);
    fflush(stdout);
    return 0;
}

/* ------------------------------------------------------------------ resethand */

static int mode_resethand(int sig, const char *how) {
    if (!strcmp(how, "late") || !strcmp(how, "sysv")) {
        start_session();
        if (!strcmp(how, "late")) set(sig, (void (*)(void))h_print, SA_RESETHAND, 0);
        else if (sysv_signal(sig, h_print) == SIG_ERR) return 3;
    } else {
        set(sig, (void (*)(void))h_print, SA_RESETHAND, 0);
        start_session();
    }
    raise(sig);
    raise(sig); /* the default action: the process ends here */
    printf("survived a second %s\n", strsignal(sig));
    fflush(stdout);
    return 0;
}

/* ------------------------------------------------------------------ fatal */

static volatile int g_zero;

static void die_by(const char *kind) {
    if (!strcmp(kind, "abort")) abort();
    if (!strcmp(kind, "segv")) raise(SIGSEGV);
    if (!strcmp(kind, "segv_real")) *(volatile int *)(uintptr_t)g_zero = 1;
    if (!strcmp(kind, "bus")) raise(SIGBUS);
    if (!strcmp(kind, "bus_real")) {
        char path[] = "/tmp/sig_victim_bus_XXXXXX";
        int fd = mkstemp(path);
        if (fd < 0) exit(3);
        unlink(path);
        volatile char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) exit(3);
        m[0] = 1; /* the file is empty: past its end */
    }
    if (!strcmp(kind, "fpe_real")) {
        volatile int a = 1;
        g_zero = a / g_zero;
    }
    if (!strcmp(kind, "ill_real")) __builtin_trap();
    if (!strcmp(kind, "hup")) kill(getpid(), SIGHUP);
    if (!strcmp(kind, "int")) kill(getpid(), SIGINT);
    if (!strcmp(kind, "term")) kill(getpid(), SIGTERM);
    if (!strcmp(kind, "quit")) kill(getpid(), SIGQUIT);
    if (!strcmp(kind, "usr1")) kill(getpid(), SIGUSR1);
    if (!strcmp(kind, "usr2")) kill(getpid(), SIGUSR2);
    if (!strcmp(kind, "alrm")) {
        alarm(1);
        for (;;) pause();
    }
    if (!strcmp(kind, "pipe")) {
        int p[2];
        if (pipe(p) != 0) exit(3);
        close(p[0]);
        ssize_t w = write(p[1], "x", 1);
        (void)w;
    }
    for (int i = 0; i < 1000; i++) sleep_ms(10); /* a signal sent with kill() lands here */
    fprintf(stderr, "sig_victim: %s did not end the process\n", kind);
    exit(4);
}

static int mode_fatal(const char *kind, int n) {
    push("outer");
    for (int i = 0; i < n; i++) {
        push("work");
        pop();
    }
    push("last");
    die_by(kind);
    return 4;
}

/* ------------------------------------------------------------------ race */

static pthread_barrier_t g_barrier;
static int g_race_n;

static void *racer(void *arg) {
    (void)arg;
    for (int i = 0; i < g_race_n; i++) {
        push("work");
        pop();
    }
    pthread_barrier_wait(&g_barrier);
    raise(SIGSEGV);
    for (;;) pause();
    return NULL;
}

static int mode_race(int threads, int n) {
    g_race_n = n;
    if (threads < 1 || threads > 64) return 2;
    pthread_barrier_init(&g_barrier, NULL, (unsigned)threads);
    pthread_t th[64];
    for (int i = 0; i < threads; i++) pthread_create(&th[i], NULL, racer, NULL);
    for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
    return 4;
}

/* ------------------------------------------------------------------ flusher */

static pid_t flusher_tid(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return 0;
    struct dirent *e;
    pid_t found = 0;
    while ((e = readdir(d)) != NULL && !found) {
        char path[300], name[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(name, sizeof name, f) && !strncmp(name, "trainprof-flush", 15))
            found = (pid_t)atoi(e->d_name);
        fclose(f);
    }
    closedir(d);
    return found;
}

static int mode_flusher(int n) {
    for (int i = 0; i < n; i++) {
        push("work");
        pop();
    }
    flush();
    pid_t t = p_push ? flusher_tid() : 0;
    if (p_push && !t) {
        fprintf(stderr, "sig_victim: no flusher thread\n");
        return 3;
    }
    if (t) syscall(SYS_tgkill, getpid(), t, SIGSEGV);
    else raise(SIGSEGV);
    for (int i = 0; i < 1000; i++) sleep_ms(10);
    fprintf(stderr, "sig_victim: SIGSEGV to the flusher did not end the process\n");
    return 4;
}

/* ------------------------------------------------------------------ loop */

static int mode_loop(int fd) {
    dprintf(fd, "pid %d\n", (int)getpid());
    for (unsigned long long i = 0;; i++) {
        push("work");
        pop();
        if ((i & 1023) == 1023) {
            flush();
            dprintf(fd, "%llu\n", i + 1);
            sleep_ms(5);
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    load_api();
    if (argc < 2) return 2;
    const char *m = argv[1];
    if (!strcmp(m, "report")) return mode_report();
    if (!strcmp(m, "behave")) return mode_behave();
    if (!strcmp(m, "resethand") && argc > 2)
        return mode_resethand(atoi(argv[2]), argc > 3 ? argv[3] : "");
    if (!strcmp(m, "fatal") && argc > 3) return mode_fatal(argv[2], atoi(argv[3]));
    if (!strcmp(m, "flusher") && argc > 2) return mode_flusher(atoi(argv[2]));
    if (!strcmp(m, "race") && argc > 3) return mode_race(atoi(argv[2]), atoi(argv[3]));
    if (!strcmp(m, "loop") && argc > 2) return mode_loop(atoi(argv[2]));
    fprintf(stderr, "sig_victim: unknown mode or missing argument: %s\n", m);
    return 2;
}
