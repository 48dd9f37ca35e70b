/*
 * test_writer.c — the rank file's writer against a hostile or failing world: a program that
 * closes every descriptor and reuses the numbers, storage that blocks, a file size limit
 * and a full disk. Each case records in a forked child (one session per process) and the
 * parent asserts on the child's exit, on what it measured, and on the loaded rank file.
 *
 * Storage faults that need no privilege come from this executable's own writev(), which
 * libtrainprof's calls reach ahead of libc's (an executable's symbols come first in the
 * dynamic linker's search order): for descriptors whose file lies in the test's directory it
 * can block until a given time, or write half of what it is asked and then fail with ENOSPC.
 * Every other call goes straight to the next writev (libc's, or a sanitizer's interceptor).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "analysis/model.h"
#include "analysis/report.h"
#include "trainprof.h"

#define CHILD_PREFIX "writer"
#include "child.h"
#include "report_text.h"

/* ------------------------------------------------------------------ storage faults */

static char g_real_dir[PATH_MAX];       /* realpath of g_dir, as /proc/self/fd shows it */
static _Atomic uint64_t g_block_until;  /* CLOCK_MONOTONIC ns; writes wait until then */
static atomic_int g_blocked;            /* a write is waiting now */
static atomic_int g_enospc;             /* writes fail: half written, then ENOSPC */
static atomic_int g_short_done;         /* the half of the current write went out */
static _Atomic int64_t g_cap = -1;    /* >= 0: the disk holds this many bytes of the file:
                                         * what passes it fails with ENOSPC, and a cut
                                         * (ftruncate) gives the space back */
static atomic_int g_steal = -1;         /* >= 0: after half of the next write, the program
                                         * closes the descriptor and puts this one there */

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int in_test_dir(int fd) {
    if (!g_real_dir[0]) return 0;
    char link[64], target[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) return 0;
    target[n] = 0;
    size_t l = strlen(g_real_dir);
    return !strncmp(target, g_real_dir, l) && target[l] == '/';
}

typedef ssize_t (*writev_fn)(int, const struct iovec *, int);

ssize_t writev(int fd, const struct iovec *iov, int iovcnt) {
    static writev_fn real;
    if (!real) real = (writev_fn)dlsym(RTLD_NEXT, "writev");
    int faulty = (atomic_load(&g_block_until) || atomic_load(&g_enospc) ||
                  atomic_load(&g_steal) >= 0 || atomic_load(&g_cap) >= 0) &&
                 in_test_dir(fd);
    if (faulty && atomic_load(&g_cap) >= 0) {
        /* what fits up to the cap goes out (a short write), then ENOSPC */
        struct stat st;
        if (fstat(fd, &st) != 0) return -1;
        int64_t room = atomic_load(&g_cap) - (int64_t)st.st_size;
        if (room <= 0) {
            errno = ENOSPC;
            return -1;
        }
        struct iovec v[8];
        int n = 0;
        for (int i = 0; i < iovcnt && room > 0 && n < 8; i++) {
            size_t k = iov[i].iov_len < (size_t)room ? iov[i].iov_len : (size_t)room;
            v[n++] = (struct iovec){iov[i].iov_base, k};
            room -= (int64_t)k;
        }
        return real(fd, v, n);
    }
    if (faulty && atomic_load(&g_steal) >= 0) {
        /* half of it, then the descriptor is the program's pipe */
        size_t half = iov[0].iov_len / 2;
        struct iovec v = {iov[0].iov_base, half ? half : 1};
        ssize_t w = real(fd, &v, 1);
        int pipe_end = atomic_exchange(&g_steal, -1);
        if (dup2(pipe_end, fd) != fd) abort();
        return w;
    }
    if (faulty) {
        uint64_t until = atomic_load(&g_block_until);
        if (until && mono_ns() < until) {
            atomic_store(&g_blocked, 1);
            struct timespec ts = {(time_t)(until / 1000000000ull), (long)(until % 1000000000ull)};
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
            }
            atomic_store(&g_blocked, 0);
        }
        if (atomic_load(&g_enospc)) {
            if (atomic_exchange(&g_short_done, 0)) {
                errno = ENOSPC;
                return -1;
            }
            size_t total = 0;
            for (int i = 0; i < iovcnt; i++) total += iov[i].iov_len;
            size_t half = total / 2, left = half;
            struct iovec v[8];
            int n = 0;
            for (int i = 0; i < iovcnt && left && n < 8; i++) {
                size_t k = iov[i].iov_len < left ? iov[i].iov_len : left;
                v[n++] = (struct iovec){iov[i].iov_base, k};
                left -= k;
            }
            atomic_store(&g_short_done, 1);
            return n ? real(fd, v, n) : 0;
        }
    }
    return real(fd, iov, iovcnt);
}

static void faults_setup(void) {
    if (!realpath(g_dir, g_real_dir)) g_real_dir[0] = 0;
}

/* ------------------------------------------------------------------ helpers */

/* A session in g_dir with no samplers; flush_ms 0 keeps the library's default period. */
static void start(uint32_t flush_ms) {
    tprof_config c;
    tprof_config_init(&c);
    c.output_dir = g_dir;
    c.sample_hz = 0;
    c.nvml_hz = 0;
    if (flush_ms) c.flush_interval_ms = flush_ms;
    if (tprof_init(&c) != TPROF_OK) _exit(90);
}

static void ranges(const char *name, int n) {
    for (int i = 0; i < n; i++) {
        tprof_range_push(name);
        tprof_range_pop();
    }
}

static size_t count_ranges(const tp_process *p, const char *name) {
    size_t n = 0;
    for (size_t i = 0; i < p->nthreads; i++)
        for (size_t k = 0; k < p->threads[i].nranges; k++)
            n += !strcmp(p->threads[i].ranges[k].name, name);
    return n;
}

static void expect_meta(const tp_process *p, const char *key, const char *value) {
    const char *v = tp_meta(p, key);
    if (!v || strcmp(v, value))
        fprintf(stderr, "meta %s: expected %s, got %s\n", key, value, v ? v : "(none)");
    assert_non_null(v);
    assert_string_equal(v, value);
}

static void no_damage(const tp_process *p) {
    for (size_t i = 0; i < p->ndamage; i++) fprintf(stderr, "damage: %s\n", p->damage[i]);
    assert_int_equal(p->ndamage, 0);
}

static int wait_child(pid_t pid) {
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st)) fprintf(stderr, "child ended with status 0x%x\n", st);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static pid_t fork_child(void) {
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    return pid;
}

/* -------------------------------------------- descriptors closed and reused by the program */

/* CPU seconds (user + system) of this process's thread named `name`, or -1. */
static double thread_cpu_s(const char *name) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    struct dirent *e;
    double cpu = -1;
    while ((e = readdir(d)) != NULL && cpu < 0) {
        if (e->d_name[0] == '.') continue;
        char path[300], buf[1024];
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "re");
        if (!f) continue;
        int same = fgets(buf, sizeof buf, f) && !strncmp(buf, name, strlen(name));
        fclose(f);
        if (!same) continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        if (!(f = fopen(path, "re"))) continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        const char *p = strrchr(buf, ')'); /* the name may hold spaces */
        unsigned long long ut = 0, st = 0;
        if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
                        &st) == 2)
            cpu = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
    }
    closedir(d);
    return cpu;
}

/* The descriptor of this process that refers to `path`, or -1. */
static int fd_of(const char *path) {
    char want[PATH_MAX];
    if (!realpath(path, want)) return -1;
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int found = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char link[300], target[PATH_MAX];
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n <= 0) continue;
        target[n] = 0;
        if (!strcmp(target, want)) found = atoi(e->d_name);
    }
    closedir(d);
    return found;
}

static void body_closed_descriptors(void) {
    start(0); /* the default period: the flusher keeps running while the program works */
    ranges("before", 100);
    CHECK(tprof_flush() == TPROF_OK, 10);
    const char *path = tprof_output_path();
    CHECK(path != NULL, 11);
    char saved[PATH_MAX];
    snprintf(saved, sizeof saved, "%s", path);
    int rank_fd = fd_of(saved);
    CHECK(rank_fd >= 0, 12);
    /* the rank file lives in the reserved range at the top of the table, close-on-exec */
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, 13);
    long top = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 4096 ? 4096 : (long)rl.rlim_cur;
    long base = top - 64 < top / 2 ? top / 2 : top - 64;
    CHECK(rank_fd >= base, 14);
    CHECK(fcntl(rank_fd, F_GETFD) & FD_CLOEXEC, 15);

    /* a daemon-like program: every descriptor above stderr closed, then a pipe of its own,
     * which also gets the number the rank file had, and some bytes of its own in it */
    for (long fd = 3; fd < top; fd++) close((int)fd);
    int p[2];
    CHECK(pipe(p) == 0, 16);
    CHECK(fcntl(p[0], F_SETFL, O_NONBLOCK) == 0, 17);
    CHECK(dup2(p[1], rank_fd) == rank_fd, 18);
    static const char mine[] = "the program's own bytes";
    CHECK(write(rank_fd, mine, sizeof mine) == (ssize_t)sizeof mine, 19);

    ranges("after", 100);
    CHECK(tprof_flush() == TPROF_OK, 20);
    struct timespec pause_s = {0, 200000000};
    nanosleep(&pause_s, NULL);
    /* the pipe holds the program's bytes, all of them, and nothing else */
    char buf[8192];
    ssize_t n = read(p[0], buf, sizeof buf);
    if (n != (ssize_t)sizeof mine)
        fprintf(stderr, "the program's pipe held %zd bytes instead of its own %zu\n", n,
                sizeof mine);
    CHECK(n == (ssize_t)sizeof mine && !memcmp(buf, mine, sizeof mine), 21);

    /* every descriptor closed again, the pipe's reading end too: the flusher keeps its
     * pace, a second of it costing a small part of a second of CPU */
    for (long fd = 3; fd < top; fd++)
        if (fd != rank_fd) close((int)fd);
    ranges("last", 100);
    CHECK(tprof_flush() == TPROF_OK, 22);
    double c0 = thread_cpu_s("trainprof-flush");
    CHECK(c0 >= 0, 23);
    struct timespec one = {1, 0};
    nanosleep(&one, NULL);
    double c1 = thread_cpu_s("trainprof-flush");
    fprintf(stderr, "flusher CPU over 1 s: %.2f s\n", c1 - c0);
    CHECK(c1 - c0 < 0.25, 24);
    /* the library never closes the program's descriptor, not even when it ends */
    CHECK(tprof_shutdown() == TPROF_OK, 25);
    CHECK(fcntl(rank_fd, F_GETFD) >= 0, 26);
}

static void test_closed_descriptors(void **state) {
    (void)state;
    fresh_dir("fds");
    in_child(body_closed_descriptors);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_int_equal(count_ranges(p, "before"), 100);
    assert_int_equal(count_ranges(p, "after"), 100);
    assert_int_equal(count_ranges(p, "last"), 100);
    assert_true(p->complete);
    no_damage(p);
    expect_meta(p, "rank_file.reopened", "2"); /* once after each closing */
    cJSON *rep = tp_report_build(&run, NULL);
    char *text = report_text(&run, NULL);
    assert_non_null(
        strstr(text, "the program closed the rank file's descriptor: reopened 2 time(s)"));
    free(text);
    cJSON_Delete(rep);
    tp_run_free(&run);
}

/* A program that puts a file of its own on descriptor 2 (and over the rank file's, so that
 * the writer has something to warn about): its file holds its own bytes only. */
static void body_stderr_taken(void) {
    start(0);
    ranges("before", 10);
    CHECK(tprof_flush() == TPROF_OK, 40);
    const char *path = tprof_output_path();
    CHECK(path != NULL, 41);
    int rank_fd = fd_of(path);
    CHECK(rank_fd >= 0, 42);
    char mine_path[PATH_MAX];
    snprintf(mine_path, sizeof mine_path, "%s/job.txt", g_dir);
    int mine = open(mine_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(mine >= 0, 43);
    CHECK(dup2(mine, 2) == 2, 44);
    CHECK(dup2(mine, rank_fd) == rank_fd, 45);
    static const char own[] = "the program's own line\n";
    CHECK(write(2, own, sizeof own - 1) == (ssize_t)(sizeof own - 1), 46);
    ranges("after", 10); /* the writer finds its descriptor taken, reopens, and warns */
    CHECK(tprof_flush() == TPROF_OK, 47);
}

static void test_stderr_taken(void **state) {
    (void)state;
    fresh_dir("stderr");
    in_child(body_stderr_taken);
    char mine_path[PATH_MAX];
    snprintf(mine_path, sizeof mine_path, "%s/job.txt", g_dir);
    FILE *f = fopen(mine_path, "r");
    assert_non_null(f);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    if (strcmp(buf, "the program's own line\n"))
        fprintf(stderr, "the program's file on descriptor 2 holds:\n%s\n", buf);
    assert_string_equal(buf, "the program's own line\n");
    tp_run run;
    load(&run);
    assert_int_equal(count_ranges(&run.procs[0], "after"), 10);
    expect_meta(&run.procs[0], "rank_file.reopened", "1");
    tp_run_free(&run);
}

/* ----------------------------------------------------- storage that does not answer */

#define BLOCK_S 8

static atomic_int g_stop_busy;

static void *busy_thread(void *arg) {
    (void)arg;
    while (!atomic_load(&g_stop_busy)) {
        tprof_range_push("busy");
        tprof_range_pop();
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void *first_event(void *arg) {
    tprof_range_push("late");
    tprof_range_pop();
    *(uint64_t *)arg = mono_ns();
    return NULL;
}

/* Busy threads record while every write of the rank file blocks for BLOCK_S seconds; once
 * the flusher waits in one, returns. */
static void block_writer(void) {
    start(0);
    ranges("warm", 10);
    CHECK(tprof_flush() == TPROF_OK, 30);
    faults_setup();
    atomic_store(&g_block_until, mono_ns() + (uint64_t)BLOCK_S * 1000000000ull);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&th[i], NULL, busy_thread, NULL) == 0, 31);
    for (int i = 0; i < 300 && !atomic_load(&g_blocked); i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    CHECK(atomic_load(&g_blocked), 32);
    for (int i = 0; i < 2; i++) pthread_detach(th[i]);
}

static void body_blocked_writer(void) {
    block_writer();
    /* a new thread's first event: it registers its ring under the session lock */
    uint64_t t0 = mono_ns(), t1 = 0;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, first_event, &t1) == 0, 33);
    CHECK(pthread_join(th, NULL) == 0, 34);
    fprintf(stderr, "first event of a new thread: %.3f s\n", (double)(t1 - t0) / 1e9);
    CHECK(t1 - t0 < 1000000000ull, 35);
    /* metadata goes to the process stream under the same lock */
    t0 = mono_ns();
    CHECK(tprof_set_metadata("during_block", "1") == TPROF_OK, 36);
    t1 = mono_ns();
    CHECK(t1 - t0 < 1000000000ull, 37);
    /* shutting down waits for the writer only while it progresses */
    t0 = mono_ns();
    int rc = tprof_shutdown();
    t1 = mono_ns();
    fprintf(stderr, "tprof_shutdown with a blocked writer: %.3f s\n", (double)(t1 - t0) / 1e9);
    CHECK(t1 - t0 < 5000000000ull, 38);
    CHECK(rc == TPROF_ERR_IO, 39); /* it says it did not finish the file */
    atomic_store(&g_stop_busy, 1);
    _exit(0);
}

static void test_blocked_writer(void **state) {
    (void)state;
    fresh_dir("block");
    pid_t pid = fork_child();
    if (pid == 0) body_blocked_writer();
    assert_int_equal(wait_child(pid), 0);
}

static int g_exit_pipe[2];

static void *exit_now(void *arg) {
    (void)arg;
    uint64_t t = mono_ns();
    if (write(g_exit_pipe[1], &t, sizeof t) != (ssize_t)sizeof t) _exit(41);
    exit(7); /* atexit: tprof_shutdown */
}

static void body_exit_blocked(void) {
    block_writer();
    pthread_t th;
    CHECK(pthread_create(&th, NULL, exit_now, NULL) == 0, 40);
    pause();
}

static void test_exit_with_blocked_writer(void **state) {
    (void)state;
    fresh_dir("exit");
    assert_int_equal(pipe(g_exit_pipe), 0);
    pid_t pid = fork_child();
    if (pid == 0) body_exit_blocked();
    close(g_exit_pipe[1]);
    uint64_t t = 0;
    assert_int_equal(read(g_exit_pipe[0], &t, sizeof t), (ssize_t)sizeof t);
    int code = wait_child(pid);
    uint64_t dt = mono_ns() - t;
    close(g_exit_pipe[0]);
    fprintf(stderr, "exit() with a blocked writer: %.3f s\n", (double)dt / 1e9);
    assert_int_equal(code, 7); /* the program's own status */
    assert_true(dt < 5000000000ull);
}

/* ------------------------------------------------------------------ write errors */

#define BATCH 100 /* ranges per batch: 100 PUSH (24 bytes) + 100 POP (16 bytes) records */
#define LOST 5

/* A file size limit (RLIMIT_FSIZE) just above the file's size: the kernel writes what fits
 * and then fails with EFBIG (and raises SIGXFSZ, whose default action would end the job,
 * on the writing thread: the flusher, which blocks every signal). The limit goes back up
 * before the last batch, which must be written. The flusher runs only when asked
 * (flush_ms one minute), so that each batch is one chunk. */
static void body_file_size_limit(void) {
    start(60000);
    ranges("kept", BATCH);
    CHECK(tprof_flush() == TPROF_OK, 50);
    struct stat st;
    CHECK(stat(tprof_output_path(), &st) == 0, 51);
    struct rlimit old, lim;
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0, 52);
    lim = old;
    lim.rlim_cur = (rlim_t)st.st_size + 100; /* less than a batch's chunk: a short write */
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0, 53);
    for (int i = 0; i < LOST; i++) {
        ranges("lost", BATCH);
        CHECK(tprof_flush() == TPROF_ERR_IO, 54);
    }
    CHECK(stat(tprof_output_path(), &st) == 0, 55);
    CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0, 56);
    ranges("kept_after", BATCH);
    CHECK(tprof_flush() == TPROF_OK, 57);
}

static void check_lost(const tp_process *p, const char *errno_name, const char *text) {
    assert_int_equal(count_ranges(p, "kept"), BATCH);
    assert_int_equal(count_ranges(p, "lost"), 0);
    assert_int_equal(count_ranges(p, "kept_after"), BATCH);
    expect_meta(p, "write_errors.chunks", "5");
    expect_meta(p, "write_errors.records", "1000");               /* LOST x BATCH x 2 */
    expect_meta(p, "write_errors.bytes", "20000");                /* LOST x BATCH x 40 */
    expect_meta(p, "write_errors.first_errno", errno_name);
    expect_meta(p, "write_errors.first_error", text);
}

static void test_file_size_limit(void **state) {
    (void)state;
    fresh_dir("fsize");
    in_child(body_file_size_limit);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    check_lost(p, "EFBIG", strerror(EFBIG));
    assert_true(p->complete);
    no_damage(p); /* no torn tail: the file was cut back to whole chunks */
    cJSON *rep = tp_report_build(&run, NULL);
    const cJSON *jr = cJSON_GetObjectItem(rep, "run");
    assert_int_equal((int)cJSON_GetObjectItem(jr, "records_lost_to_write_errors")->valuedouble,
                     1000);
    const cJSON *jp = cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "processes"), 0);
    const cJSON *we = cJSON_GetObjectItem(jp, "write_errors");
    assert_non_null(we);
    assert_int_equal((int)cJSON_GetObjectItem(we, "chunks_lost")->valuedouble, 5);
    assert_string_equal(cJSON_GetObjectItem(we, "first_errno")->valuestring, "EFBIG");
    char *text = report_text(&run, NULL);
    char want[200];
    snprintf(want, sizeof want, "1000 records lost to write errors (EFBIG: %s)", strerror(EFBIG));
    if (!strstr(text, want)) fprintf(stderr, "%s", text);
    assert_non_null(strstr(text, want));
    assert_null(strstr(text, "killed?"));
    free(text);
    cJSON_Delete(rep);
    tp_run_free(&run);
}

/* A full disk through the writev above: every write goes half out, then fails with ENOSPC.
 * The process then ends without its end record (exit_group, past the library's exit hooks),
 * and the report says why the end may be missing instead of only blaming a kill. */
static void body_disk_full(void) {
    start(60000);
    faults_setup();
    ranges("kept", BATCH);
    CHECK(tprof_flush() == TPROF_OK, 60);
    atomic_store(&g_enospc, 1);
    for (int i = 0; i < LOST; i++) {
        ranges("lost", BATCH);
        CHECK(tprof_flush() == TPROF_ERR_IO, 61);
    }
    atomic_store(&g_enospc, 0);
    atomic_store(&g_short_done, 0);
    ranges("kept_after", BATCH);
    CHECK(tprof_flush() == TPROF_OK, 62);
    syscall(SYS_exit_group, 0);
}

static void test_disk_full(void **state) {
    (void)state;
    fresh_dir("enospc");
    pid_t pid = fork_child();
    if (pid == 0) body_disk_full();
    assert_int_equal(wait_child(pid), 0);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    check_lost(p, "ENOSPC", strerror(ENOSPC));
    assert_false(p->complete);
    /* the only damage: the missing end, with the write errors named */
    assert_int_equal(p->ndamage, 1);
    char want[200];
    snprintf(want, sizeof want, "the rank file had write errors (ENOSPC: %s)", strerror(ENOSPC));
    if (!strstr(p->damage[0], want)) fprintf(stderr, "damage: %s\n", p->damage[0]);
    assert_non_null(strstr(p->damage[0], want));
    cJSON *rep = tp_report_build(&run, NULL);
    char *text = report_text(&run, NULL);
    snprintf(want, sizeof want, "1000 records lost to write errors (ENOSPC: %s)", strerror(ENOSPC));
    assert_non_null(strstr(text, want));
    free(text);
    cJSON_Delete(rep);
    tp_run_free(&run);
}

/* The disk fills up in the middle of the run and stays full until the end: the counts must
 * still reach the file (cutting whole chunks off its end to make room, counted as lost), so
 * that the records the report says were lost are exactly those the file misses, and the
 * steps are flagged. */
#define FULL_STEPS 30

static int g_slack_halves; /* the room left after the last step that fits, in half steps */

static void body_disk_stays_full(void) {
    /* every record counted below is the program's: no capture-window metadata in between */
    setenv("TRAINPROF_GPU_CAPTURE", "all", 1);
    start(60000);
    faults_setup();
    struct stat st;
    uint64_t size[3];
    for (int i = 0; i < FULL_STEPS; i++) {
        tprof_step_begin((uint64_t)i);
        ranges("r", BATCH);
        tprof_step_end((uint64_t)i);
        tprof_flush();
        if (i < 3) {
            CHECK(stat(tprof_output_path(), &st) == 0, 80);
            size[i] = (uint64_t)st.st_size;
        }
        if (i == 2) /* room for two steps more, and what slack says */
            atomic_store(&g_cap, (int64_t)(size[2] + 2 * (size[2] - size[1]) +
                                           g_slack_halves * (size[2] - size[1]) / 2));
    }
    tprof_shutdown();
    _exit(0);
}

/* slack 1: a stale count fits in the room left, and the final one takes its place; slack 0:
 * no room at all, so the final count needs a step's chunk cut off */
static void disk_stays_full(int slack_halves) {
    g_slack_halves = slack_halves;
    fresh_dir(slack_halves ? "stays_full_slack" : "stays_full");
    pid_t pid = fork_child();
    if (pid == 0) body_disk_stays_full();
    assert_int_equal(wait_child(pid), 0);
    tp_run run;
    load(&run);
    assert_int_equal(run.nprocs, 1);
    const tp_process *p = &run.procs[0];
    size_t ranges_kept = count_ranges(p, "r"), stepevs_kept = 0;
    for (size_t i = 0; i < p->nthreads; i++) stepevs_kept += p->threads[i].nsteps;
    /* every record the program made: per step a PUSH and a POP per range and the step's
     * begin and end; at the end, the END_OF_FILE record */
    uint64_t missing = 2 * ((uint64_t)FULL_STEPS * BATCH - ranges_kept) +
                       (2 * (uint64_t)FULL_STEPS - stepevs_kept) + (p->complete ? 0 : 1);
    fprintf(stderr, "kept %zu ranges, %zu step events of %d steps, end %s; missing %llu\n",
            ranges_kept, stepevs_kept, FULL_STEPS, p->complete ? "kept" : "lost",
            (unsigned long long)missing);
    assert_true(ranges_kept >= 3 * BATCH && ranges_kept < FULL_STEPS * BATCH);
    const char *v = tp_meta(p, "write_errors.records");
    assert_non_null(v);
    assert_int_equal(strtoull(v, NULL, 10), missing);
    expect_meta(p, "write_errors.first_errno", "ENOSPC");
    cJSON *rep = tp_report_build(&run, NULL);
    const cJSON *jr = cJSON_GetObjectItem(rep, "run");
    assert_int_equal((uint64_t)cJSON_GetObjectItem(jr, "records_lost_to_write_errors")->valuedouble,
                     missing);
    const cJSON *rk = cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "ranks"), 0);
    const cJSON *de = cJSON_GetObjectItem(cJSON_GetObjectItem(rk, "steps"), "dropped_events");
    assert_non_null(de);
    assert_int_equal((uint64_t)cJSON_GetObjectItem(de, "records_lost_to_write_errors")->valuedouble,
                     missing);
    assert_true(cJSON_GetObjectItem(de, "steps_touched")->valuedouble > 0);
    cJSON_Delete(rep);
    tp_run_free(&run);
}

static void test_disk_stays_full(void **state) {
    (void)state;
    disk_stays_full(1);
}

static void test_disk_stays_full_no_room(void **state) {
    (void)state;
    disk_stays_full(0);
}

/* The descriptor table is full when the first events are flushed (EMFILE): the file cannot be
 * created yet, which is not for good. What is recorded meanwhile is counted lost with its
 * reason, and the file is created once a descriptor is free again. */
static void body_table_full(void) {
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, 88);
    rl.rlim_cur = 256; /* a table small enough to fill */
    CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, 89);
    start(60000);
    int fds[8192], n = 0;
    while (n < 8192 && (fds[n] = dup(2)) >= 0) n++;
    CHECK(n < 8192 && errno == EMFILE, 90);
    ranges("lost", BATCH);
    CHECK(tprof_flush() == TPROF_ERR_IO, 91);
    CHECK(tprof_output_path() == NULL, 92);
    while (n > 0) close(fds[--n]);
    ranges("kept_after", BATCH);
    CHECK(tprof_flush() == TPROF_OK, 93);
    CHECK(tprof_shutdown() == TPROF_OK, 94);
}

static void test_table_full(void **state) {
    (void)state;
    fresh_dir("table_full");
    in_child(body_table_full);
    tp_run run;
    load(&run);
    assert_int_equal(run.nprocs, 1);
    const tp_process *p = &run.procs[0];
    assert_int_equal(count_ranges(p, "lost"), 0);
    assert_int_equal(count_ranges(p, "kept_after"), BATCH);
    /* the lost batch (200 records) and its range name (a STRING record), kept for the next
     * chunk, which was written */
    expect_meta(p, "write_errors.records", "200");
    expect_meta(p, "write_errors.first_errno", "EMFILE");
    expect_meta(p, "write_errors.first_error", strerror(EMFILE));
    assert_true(p->complete);
    no_damage(p);
    tp_run_free(&run);
}

/* The program closes the descriptor, and gets the number for a pipe of its own, in the middle
 * of a chunk's write: the rest of the chunk must not go into the pipe, the chunk is counted
 * lost (EBADF), and the next write reopens the file and cuts the half chunk away. */
static void body_closed_mid_chunk(void) {
    start(60000);
    faults_setup();
    ranges("kept", BATCH);
    CHECK(tprof_flush() == TPROF_OK, 70);
    int p[2];
    CHECK(pipe(p) == 0, 71);
    CHECK(fcntl(p[0], F_SETFL, O_NONBLOCK) == 0, 72);
    atomic_store(&g_steal, p[1]);
    ranges("lost", BATCH);
    CHECK(tprof_flush() == TPROF_ERR_IO, 73);
    ranges("kept_after", BATCH);
    CHECK(tprof_flush() == TPROF_OK, 74);
    char buf[64];
    ssize_t n = read(p[0], buf, sizeof buf);
    if (n > 0) fprintf(stderr, "%zd foreign bytes in the program's pipe\n", n);
    CHECK(n < 0 && errno == EAGAIN, 75);
}

static void test_closed_mid_chunk(void **state) {
    (void)state;
    fresh_dir("midchunk");
    in_child(body_closed_mid_chunk);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_int_equal(count_ranges(p, "kept"), BATCH);
    assert_int_equal(count_ranges(p, "lost"), 0);
    assert_int_equal(count_ranges(p, "kept_after"), BATCH);
    expect_meta(p, "write_errors.chunks", "1");
    expect_meta(p, "write_errors.records", "200");
    expect_meta(p, "write_errors.first_errno", "EBADF");
    expect_meta(p, "rank_file.reopened", "1");
    assert_true(p->complete);
    no_damage(p); /* the half chunk was cut away */
    tp_run_free(&run);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_closed_descriptors),
        cmocka_unit_test(test_stderr_taken),
        cmocka_unit_test(test_closed_mid_chunk),
        cmocka_unit_test(test_blocked_writer),
        cmocka_unit_test(test_exit_with_blocked_writer),
        cmocka_unit_test(test_file_size_limit),
        cmocka_unit_test(test_disk_full),
        cmocka_unit_test(test_disk_stays_full),
        cmocka_unit_test(test_disk_stays_full_no_room),
        cmocka_unit_test(test_table_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
