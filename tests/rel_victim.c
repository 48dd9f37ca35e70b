/*
 * rel_victim.c — the program the reliability tests (test_kill_fork.c,
 * test_damaged_files.c) profile, kill, fork and feed hostile names to. It is linked with
 * libtrainprof and starts its session lazily from TRAINPROF_DIR (set by the test, or by
 * `trainprof run`), except in `forkinit`, which calls tprof_init() with no environment at
 * all.
 *
 * Every mode that the test must follow writes progress lines to a file descriptor it is
 * given (a pipe), always AFTER the events the line speaks of were flushed, so that what
 * the line says is a lower bound of what the rank file must hold:
 *
 *   loop FD        forever: push "work", counter "iter" = i, pop; about every 20 ms
 *                  tprof_flush() and then "N\n" (iterations 0..N-1 are on disk).
 *   handler FD     installs its own SIGTERM handler BEFORE trainprof starts, then loops as
 *                  `loop`; on SIGTERM stops recording, writes "final N\n", exits 42.
 *   sleepexit FD   records "before_sleep" x100, flushes, writes "ready 100\n", sleeps
 *                  30 s; if the sleep ever returns, writes "woke 1\n", marks
 *                  "after_sleep" and exits 0.
 *   fork FD        parent records "parent_before" x100 and a helper thread records
 *                  "parent_thread" ranges all along; forks (while that thread records);
 *                  the child records "child_work" x50 and counter "child_counter" 0..49 and
 *                  exits 0; the parent records "parent_after" x100, waits, writes
 *                  "child PID\n" and "thread N\n" (parent_thread ranges), exits 0.
 *   forkexec FD    parent records "parent_work" x20; a child forks and exec's
 *                  `rel_victim exec_child` (records "exec_work" x30); parent records
 *                  "parent_after" x20; writes "child PID\n".
 *   forkrecexec FD parent records "parent_work" x20; a child records "prexec_work" x20,
 *                  flushes them to disk, then exec's `rel_victim exec_child` (same pid);
 *                  writes "child PID\n".
 *   forkidle FD    parent records "parent_work" x20; one child exits without recording,
 *                  another exec's `rel_victim idle`; writes "child PID\n" for each.
 *   forkinit DIR FD  like `fork` without the thread, with the session started by
 *                  tprof_init(output_dir = DIR) and no TRAINPROF_DIR in the environment.
 *   exec_child     records "exec_work" x30 and exits 0.
 *   idle           records nothing and exits 0.
 *   gen STEPS      STEPS API steps, each: data_load, forward{matmul}, backward ranges and
 *                  a "loss" counter, then tprof_flush() (so the file has many chunks).
 *   names          records the hostile names of names_table() as ranges, marks and
 *                  counters, then exits 0.
 *
 * Exit status 3 means a check inside the victim failed (message on stderr).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "trainprof.h"

static void fail(const char *what) {
    fprintf(stderr, "rel_victim: %s: %s\n", what, strerror(errno));
    exit(3);
}

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void say(int fd, const char *fmt, unsigned long long v) {
    char buf[64];
    int n = snprintf(buf, sizeof buf, fmt, v);
    if (write(fd, buf, (size_t)n) != n) fail("write progress");
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ----------------------------------------------------------------- loop / handler */

static void ranges(const char *name, int n);

static volatile sig_atomic_t g_stop;
static void on_term(int sig) {
    (void)sig;
    g_stop = 1;
}

static int mode_loop(int fd, int own_handler) {
    if (own_handler) {
        /* before the first trainprof call: the session starts lazily afterwards and
         * must chain to this handler instead of replacing it */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_term;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGTERM, &sa, NULL) != 0) fail("sigaction");
    }
    uint64_t last = now_ms();
    uint64_t i = 0;
    for (;; i++) {
        if (g_stop) break;
        tprof_range_push("work");
        tprof_counter("iter", (double)i);
        tprof_range_pop();
        /* pace the loop so that the 4 MiB default ring never fills (no drops) */
        if ((i & 127) == 127) sleep_ms(1);
        if ((i & 63) == 63 && now_ms() - last >= 20) {
            int rc = tprof_flush();
            /* between a SIGTERM and its re-raise by the flusher the program keeps running
             * with the session already shut down (see test_sigterm_in_sleep): keep going
             * without reporting, as the re-raise is imminent */
            if (rc == TPROF_ERR_DISABLED) continue;
            if (rc != TPROF_OK) {
                fprintf(stderr, "rel_victim: tprof_flush: %s\n", tprof_strerror(rc));
                exit(3);
            }
            say(fd, "%llu\n", (unsigned long long)(i + 1));
            last = now_ms();
        }
    }
    say(fd, "final %llu\n", (unsigned long long)i);
    exit(42);
}

/* A program blocked in sleep() when SIGTERM comes: without trainprof the default action
 * ends it there; nothing after the sleep may run. */
static int mode_sleepexit(int fd) {
    ranges("before_sleep", 100);
    if (tprof_flush() != TPROF_OK) fail("tprof_flush");
    say(fd, "ready %llu\n", 100);
    sleep(30); /* SIGTERM interrupts it (sleep is never restarted) */
    say(fd, "woke %llu\n", 1);
    tprof_mark("after_sleep");
    exit(0);
}

/* ----------------------------------------------------------------------- fork */

static atomic_int g_thread_stop;
static atomic_ullong g_thread_ranges;

static void *parent_thread(void *arg) {
    (void)arg;
    unsigned long long n = 0;
    while (!atomic_load(&g_thread_stop)) {
        tprof_range_push("parent_thread");
        tprof_range_pop();
        n++;
        if ((n & 15) == 0) sleep_ms(1);
    }
    atomic_store(&g_thread_ranges, n);
    return NULL;
}

static void ranges(const char *name, int n) {
    for (int i = 0; i < n; i++) {
        tprof_range_push(name);
        tprof_range_pop();
    }
}

static int wait_ok(pid_t pid) {
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) fail("waitpid");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "rel_victim: child %d ended with status 0x%x\n", (int)pid, st);
        exit(3);
    }
    return 0;
}

static void child_work(void) {
    for (int i = 0; i < 50; i++) {
        tprof_range_push("child_work");
        tprof_counter("child_counter", i);
        tprof_range_pop();
    }
    exit(0); /* a normal exit: atexit shutdown writes the child's end record */
}

static int mode_fork(int fd, int with_thread) {
    pthread_t th;
    if (with_thread) {
        if (pthread_create(&th, NULL, parent_thread, NULL) != 0) fail("pthread_create");
        sleep_ms(5);
    }
    ranges("parent_before", 100);
    tprof_mark("parent_mark_before");
    pid_t pid = fork();
    if (pid < 0) fail("fork");
    if (pid == 0) child_work();
    ranges("parent_after", 100);
    wait_ok(pid);
    if (with_thread) {
        atomic_store(&g_thread_stop, 1);
        pthread_join(th, NULL);
        say(fd, "thread %llu\n", atomic_load(&g_thread_ranges));
    }
    say(fd, "child %llu\n", (unsigned long long)pid);
    return 0;
}

static const char *g_self;

static pid_t fork_exec(const char *mode) {
    pid_t pid = fork();
    if (pid < 0) fail("fork");
    if (pid == 0) {
        execl(g_self, g_self, mode, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int mode_forkexec(int fd) {
    ranges("parent_work", 20);
    pid_t pid = fork_exec("exec_child");
    ranges("parent_after", 20);
    wait_ok(pid);
    say(fd, "child %llu\n", (unsigned long long)pid);
    return 0;
}

static int mode_forkrecexec(int fd) {
    ranges("parent_work", 20);
    pid_t pid = fork();
    if (pid < 0) fail("fork");
    if (pid == 0) {
        ranges("prexec_work", 20);
        if (tprof_flush() != TPROF_OK) _exit(3); /* on disk before the exec */
        execl(g_self, g_self, "exec_child", (char *)NULL);
        _exit(127);
    }
    wait_ok(pid);
    say(fd, "child %llu\n", (unsigned long long)pid);
    return 0;
}

static int mode_forkidle(int fd) {
    ranges("parent_work", 20);
    tprof_flush(); /* the parent's file exists before the children start */
    pid_t a = fork();
    if (a < 0) fail("fork");
    if (a == 0) exit(0); /* records nothing, exits normally (atexit handlers run) */
    pid_t b = fork_exec("idle");
    wait_ok(a);
    wait_ok(b);
    say(fd, "child %llu\n", (unsigned long long)a);
    say(fd, "child %llu\n", (unsigned long long)b);
    return 0;
}

static int mode_forkinit(const char *dir, int fd) {
    tprof_config cfg;
    tprof_config_init(&cfg);
    cfg.output_dir = dir;
    cfg.sample_hz = 0; /* the test compares exact name sets */
    cfg.nvml_hz = 0;   /* no GPU sampler either (on a GPU machine) */
    int rc = tprof_init(&cfg);
    if (rc != TPROF_OK) {
        fprintf(stderr, "rel_victim: tprof_init: %s\n", tprof_strerror(rc));
        exit(3);
    }
    return mode_fork(fd, 0);
}

/* ------------------------------------------------------------------------ gen */

static void spin_us(unsigned us) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < (long)us);
}

static int mode_gen(int steps) {
    tprof_name_thread("main");
    for (int s = 0; s < steps; s++) {
        tprof_step_begin((uint64_t)s);
        tprof_range_push("data_load");
        spin_us(100);
        tprof_range_pop();
        tprof_range_push("forward");
        tprof_range_push("matmul");
        spin_us(300);
        tprof_range_pop();
        tprof_range_pop();
        tprof_range_push("backward");
        spin_us(200);
        tprof_range_pop();
        tprof_counter("loss", 1.0 / (s + 1));
        tprof_step_end((uint64_t)s);
        if (tprof_flush() != TPROF_OK) fail("tprof_flush");
    }
    return 0;
}

/* ---------------------------------------------------------------------- names */

/* Kept in sync with the expectations in test_damaged_files.c (names_expected). */
static const char *const hostile[] = {
    "quote\"back\\slash",
    "new\nline\ttab\rcr",
    "ctl\x01\x02\x1b[31m\x7f",
    "bad\xff\xfe utf8",
    "trunc\xe2\x82",
    "overlong\xc0\xaf",
    "lead\xc3(",
    "ok \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
};

static int mode_names(void) {
    for (size_t i = 0; i < sizeof hostile / sizeof *hostile; i++) {
        for (int k = 0; k < 3; k++) {
            tprof_range_push(hostile[i]);
            spin_us(50);
            tprof_range_pop();
        }
        tprof_mark(hostile[i]);
        tprof_counter(hostile[i], (double)i);
    }
    return 0;
}

int main(int argc, char **argv) {
    g_self = argv[0];
    if (argc < 2) {
        fprintf(stderr, "usage: rel_victim MODE [ARGS]\n");
        return 2;
    }
    const char *m = argv[1];
    int fd = argc > 2 ? atoi(argv[2]) : -1;
    if (!strcmp(m, "loop") && argc > 2) return mode_loop(fd, 0);
    if (!strcmp(m, "handler") && argc > 2) return mode_loop(fd, 1);
    if (!strcmp(m, "sleepexit") && argc > 2) return mode_sleepexit(fd);
    if (!strcmp(m, "fork") && argc > 2) return mode_fork(fd, 1);
    if (!strcmp(m, "forkexec") && argc > 2) return mode_forkexec(fd);
    if (!strcmp(m, "forkidle") && argc > 2) return mode_forkidle(fd);
    if (!strcmp(m, "forkrecexec") && argc > 2) return mode_forkrecexec(fd);
    if (!strcmp(m, "forkinit") && argc > 3) return mode_forkinit(argv[2], atoi(argv[3]));
    if (!strcmp(m, "exec_child")) {
        ranges("exec_work", 30);
        return 0;
    }
    if (!strcmp(m, "idle")) return 0;
    if (!strcmp(m, "gen") && argc > 2) return mode_gen(atoi(argv[2]));
    if (!strcmp(m, "names")) return mode_names();
    fprintf(stderr, "rel_victim: unknown mode or missing argument: %s\n", m);
    return 2;
}
