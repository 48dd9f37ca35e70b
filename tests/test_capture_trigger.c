/*
 * test_capture_trigger.c — GPU capture windows asked for while the job runs, without a GPU:
 * kwindow.c records each switch of capture as metadata (gpu_capture.windows) at the moment
 * CUPTI would be switched, so the test checks, against the "step" ranges the job recorded,
 * that the windows asked for open and close at exactly the right step boundaries:
 *  - from the program (tprof_gpu_capture_steps): the next 3 steps after step 5, then steps
 *    30-31 by number; gpu_capture.requests lists both; plan "all" answers ERR_ALREADY,
 *    "off" ERR_UNAVAILABLE, a count of 0 ERR_INVALID_ARG;
 *  - from outside (`trainprof capture DIR --steps 3 --start S`, core/capture_ctl.c): the
 *    process's progress file tells the step it reached, the command writes the request, and
 *    the process captures exactly steps S..S+2; a request file older than the session is
 *    not taken; the progress file is gone when the session ends; with plan "all" the
 *    command finds no process that can take a window and exits 1.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "analysis/model.h"
#include "core/capture_ctl.h"
#include "trainprof.h"

#define CHILD_PREFIX "ctrig"
#include "child.h"
#include "spawn.h"

#ifndef TPROF_CLI
#error "TPROF_CLI (the trainprof command) must be defined"
#endif

static void sleep_ms(long ms) {
    struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&d, NULL);
}

/* Window w (from 0) of gpu_capture.windows: 0 with on/off, -1 when there is none. */
static int window(const tp_process *p, int w, uint64_t *on, uint64_t *off) {
    const char *s = tp_meta(p, "gpu_capture.windows");
    if (!s) return -1;
    for (int i = 0; *s; i++) {
        unsigned long long a, b;
        int n;
        if (sscanf(s, "%llu-%llu%n", &a, &b, &n) != 2) return -1;
        if (i == w) {
            *on = a;
            *off = b;
            return 0;
        }
        s += n;
        if (*s == ',') s++;
    }
    return -1;
}

static const char *g_step_range = "step"; /* the ranges assert_window counts steps by */

/* Capture window w covers exactly steps first..last (g_step_range ranges from 0). */
static void assert_window(const tp_process *p, int w, int first, int last) {
    uint64_t on = 0, off = 0;
    if (window(p, w, &on, &off) != 0)
        fail_msg("no window %d in gpu_capture.windows \"%s\"", w,
                 tp_meta(p, "gpu_capture.windows") ? tp_meta(p, "gpu_capture.windows") : "");
    const tp_range *before = nth_range(p, g_step_range, first - 1);
    const tp_range *begin = nth_range(p, g_step_range, first);
    const tp_range *end = nth_range(p, g_step_range, last);
    const tp_range *after = nth_range(p, g_step_range, last + 1);
    assert_non_null(begin);
    assert_non_null(after);
    if (!(on >= before->end && on <= begin->start))
        fail_msg("window %d opens at %" PRIu64 ", not between step %d's end %" PRIu64
                 " and step %d's start %" PRIu64, w, on, first - 1, before->end, first,
                 begin->start);
    if (!(off >= end->end && off <= after->start))
        fail_msg("window %d closes at %" PRIu64 ", not between step %d's end and step %d's "
                 "start", w, off, last, last + 1);
}

static int g_nsteps = 40, g_step_ms = 2;

/* "step" ranges; at step 5 the next 3 steps are asked for, at step 20 steps 30-31 */
static void body_api(void) {
    for (int i = 0; i < g_nsteps; i++) {
        tprof_range_push("step");
        if (i == 5) CHECK(tprof_gpu_capture_steps(TPROF_NEXT_STEP, 3) == TPROF_OK, 10);
        if (i == 20) CHECK(tprof_gpu_capture_steps(30, 2) == TPROF_OK, 11);
        if (i == 21) CHECK(tprof_gpu_capture_steps(40, 0) == TPROF_ERR_INVALID_ARG, 12);
        sleep_ms(g_step_ms);
        tprof_range_pop();
    }
}

static void with_plan(const char *plan) {
    setenv("TRAINPROF_GPU_CAPTURE", plan, 1);
    unsetenv("TRAINPROF_KERNEL_STEPS");
    unsetenv("TRAINPROF_STEP_NAME");
}

static void api_child(void) {
    with_plan("100000-100001");
    start_session();
    body_api();
}

static void test_from_the_program(void **state) {
    (void)state;
    fresh_dir("api");
    in_child(api_child);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_window(p, 0, 6, 8);
    assert_window(p, 1, 30, 31);
    uint64_t on, off;
    assert_int_equal(window(p, 2, &on, &off), -1);
    assert_string_equal(tp_meta(p, "gpu_capture.requests"), "0:6-8,0:30-31");
    tp_run_free(&run);
}

static void all_child(void) {
    with_plan("all");
    start_session();
    tprof_range_push("step");
    CHECK(tprof_gpu_capture_steps(TPROF_NEXT_STEP, 3) == TPROF_ERR_ALREADY, 20);
    tprof_range_pop();
}

static void off_child(void) {
    with_plan("off");
    start_session();
    CHECK(tprof_gpu_capture_steps(TPROF_NEXT_STEP, 3) == TPROF_ERR_UNAVAILABLE, 21);
}

static void test_plans_without_windows(void **state) {
    (void)state;
    fresh_dir("all");
    in_child(all_child);
    fresh_dir("off");
    in_child(off_child);
    /* no session (no TRAINPROF_DIR): not recording */
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        unsetenv("TRAINPROF_DIR");
        _exit(tprof_gpu_capture_steps(TPROF_NEXT_STEP, 3) == TPROF_ERR_DISABLED ? 0 : 22);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* The step in the progress file of dir (the only one), -1 when there is none yet. */
static long progress_step(void) {
    DIR *d = opendir(g_dir);
    assert_non_null(d);
    struct dirent *e;
    long step = -1;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 5, ".step") != 0) continue;
        char path[1024], buf[TPROF_CTL_LINE + 1];
        snprintf(path, sizeof path, "%s/%s", g_dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t r = fread(buf, 1, TPROF_CTL_LINE, f);
        fclose(f);
        buf[r] = 0;
        uint64_t pid, s, ns;
        int has;
        if (tprof__ctl_parse_progress(buf, &pid, &has, &s, &ns) == 0 && has)
            step = (long)s;
    }
    closedir(d);
    return step;
}

static int count_step_files(void) {
    DIR *d = opendir(g_dir);
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)) != NULL) n += strstr(e->d_name, ".step") != NULL;
    closedir(d);
    return n;
}

/* runs `trainprof capture ARGS...` into out (stdout), its exit status */
static int run_cli(const char *const *args, char *out, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/cli.out", g_dir);
    const char *argv[16] = {TPROF_CLI, "capture"};
    int k = 2;
    for (; args[k - 2] && k < 15; k++) argv[k] = args[k - 2];
    argv[k] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(30); /* a command that hangs ends (SIGALRM) rather than the test */
        spawn_exec(argv, path, NULL);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    FILE *f = fopen(path, "r");
    size_t r = f ? fread(out, 1, n - 1, f) : 0;
    if (f) fclose(f);
    out[r] = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static const char *g_outside_plan;

static void outside_child(void) {
    with_plan(g_outside_plan);
    start_session();
    for (int i = 0; i < g_nsteps; i++) {
        tprof_range_push("step");
        sleep_ms(g_step_ms);
        tprof_range_pop();
    }
}

static void steps_child(void) {
    outside_child();
    _exit(tprof_shutdown() == TPROF_OK ? 0 : 91);
}

/* A child recording `nsteps` "step" ranges of `ms` ms each under the capture plan `plan`
 * (steps_child); its pid. */
static pid_t start_steps(const char *plan, int nsteps, int ms) {
    g_outside_plan = plan;
    g_nsteps = nsteps;
    g_step_ms = ms;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) steps_child();
    return pid;
}

/* The step in the run directory's progress file once it is at least `at_least` (5 s at
 * most: the test fails otherwise). */
static long await_step(long at_least) {
    long s = -1;
    for (int i = 0; i < 500 && s < at_least; i++) {
        sleep_ms(10);
        s = progress_step();
    }
    assert_true(s >= at_least);
    return s;
}

static void test_from_outside(void **state) {
    (void)state;
    fresh_dir("out");
    /* a request left from before the session: never taken */
    char path[1024];
    snprintf(path, sizeof path, "%s/" TPROF_CTL_REQUEST, g_dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("trainprof-capture 1 id=1 first=5 count=2\n", f);
    fclose(f);
    pid_t pid = start_steps("100000-100001", 700, 5);
    long s = await_step(10);
    /* 1.5 s ahead, so that even a loaded machine's process sees the request in time (it
     * looks every 0.2 s; the command's own default lead is 0.6 s) */
    char out[1024], start[32];
    snprintf(start, sizeof start, "%ld", s + 300);
    const char *args[] = {g_dir, "--steps", "3", "--start", start, NULL};
    int rc = run_cli(args, out, sizeof out);
    if (rc != 0) fail_msg("trainprof capture exited %d: %s", rc, out);
    unsigned long long a, b;
    const char *w = strstr(out, "in steps ");
    assert_non_null(w);
    assert_int_equal(sscanf(w, "in steps %llu-%llu", &a, &b), 2);
    assert_int_equal(a, (unsigned long long)s + 300);
    /* a first step that has begun already: refused, no request written (one window below) */
    const char *past[] = {g_dir, "--steps", "2", "--start", "1", NULL};
    assert_int_equal(run_cli(past, out, sizeof out), 1);
    assert_int_equal(b, a + 2);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(count_step_files(), 0); /* removed as the session ended */
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_window(p, 0, (int)a, (int)b);
    uint64_t on, off;
    assert_int_equal(window(p, 1, &on, &off), -1);
    const char *req = tp_meta(p, "gpu_capture.requests");
    assert_non_null(req);
    char want[64];
    snprintf(want, sizeof want, ":%llu-%llu", a, b);
    assert_non_null(strstr(req, want));
    assert_null(strchr(req, ','));
    tp_run_free(&run);
}

static void test_outside_plan_all(void **state) {
    (void)state;
    fresh_dir("oall");
    pid_t pid = start_steps("all", 60, 5);
    sleep_ms(100);
    char out[1024];
    const char *args[] = {g_dir, "--steps", "3", NULL};
    assert_int_equal(run_cli(args, out, sizeof out), 1); /* no process can take a window */
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* waits for pid at most `s` seconds: its wait status, or -1 (then it is killed) */
static int wait_bounded(pid_t pid, int s) {
    for (int i = 0; i < s * 100; i++) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return st;
        sleep_ms(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}


/* A FIFO named capture.request: the flusher must not block on it (open and read would wait
 * for a writer forever): the process ends on time with every step in its file. */
static void test_request_fifo(void **state) {
    (void)state;
    fresh_dir("fifo");
    char path[1024];
    snprintf(path, sizeof path, "%s/" TPROF_CTL_REQUEST, g_dir);
    assert_int_equal(mkfifo(path, 0644), 0);
    pid_t pid = start_steps("auto", 80, 5);
    int st = wait_bounded(pid, 20);
    if (st == -1) fail_msg("the process did not end within 20 s (flusher blocked on the FIFO)");
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    unlink(path);
    tp_run run;
    load(&run);
    assert_non_null(nth_range(&run.procs[0], "step", 79));
    tp_run_free(&run);
}

/* Something else already named <host>-<pid>.step when the session starts: a symbolic link
 * to a file (it must not be written through: the file keeps its bytes) and a FIFO (opening
 * it for writing must not block the flusher). The process runs and ends all the same. */
static void hostile_step_name(int fifo) {
    fresh_dir(fifo ? "sfifo" : "slink");
    char victim[1024];
    snprintf(victim, sizeof victim, "%s/victim.txt", g_dir);
    FILE *f = fopen(victim, "w");
    assert_non_null(f);
    fputs("precious\n", f);
    fclose(f);
    int go[2];
    assert_int_equal(pipe(go), 0);
    g_outside_plan = "auto";
    g_nsteps = 60;
    g_step_ms = 5;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char c;
        close(go[1]);
        if (read(go[0], &c, 1) != 1) _exit(92);
        close(go[0]);
        steps_child();
    }
    close(go[0]);
    char host[64], name[1200];
    tprof__file_host(host);
    snprintf(name, sizeof name, "%s/%.63s-%d" TPROF_CTL_STEP_SUFFIX, g_dir, host, (int)pid);
    if (fifo) assert_int_equal(mkfifo(name, 0644), 0);
    else assert_int_equal(symlink(victim, name), 0);
    assert_int_equal(write(go[1], "g", 1), 1);
    close(go[1]);
    int st = wait_bounded(pid, 20);
    if (st == -1) fail_msg("the process did not end within 20 s");
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    char buf[64] = {0};
    f = fopen(victim, "r");
    assert_non_null(f);
    size_t r = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[r] = 0;
    assert_string_equal(buf, "precious\n");
    struct stat sb;
    assert_int_equal(lstat(name, &sb), 0); /* not ours: left as it was */
    assert_true(fifo ? S_ISFIFO(sb.st_mode) : S_ISLNK(sb.st_mode));
    unlink(name);
    unlink(victim);
    tp_run run;
    load(&run);
    assert_non_null(nth_range(&run.procs[0], "step", 59));
    tp_run_free(&run);
}

static void test_step_name_symlink(void **state) {
    (void)state;
    hostile_step_name(0);
}

static void test_step_name_fifo(void **state) {
    (void)state;
    hostile_step_name(1);
}

/* at step 5 the next 3 steps (6-8); at step 7, inside that window, steps 20-21, which do not
 * touch it */
static void gap_child(void) {
    with_plan("100000-100001");
    start_session();
    for (int i = 0; i < 30; i++) {
        tprof_range_push("step");
        if (i == 5) CHECK(tprof_gpu_capture_steps(TPROF_NEXT_STEP, 3) == TPROF_OK, 30);
        if (i == 7) CHECK(tprof_gpu_capture_steps(20, 2) == TPROF_OK, 31);
        sleep_ms(2);
        tprof_range_pop();
    }
}

/* A window asked for while another is open and not touching it: the open one still closes
 * at its end (step 9 begins), the new one opens at step 20; the steps between are not
 * captured. */
static void test_demand_while_open(void **state) {
    (void)state;
    fresh_dir("gap");
    in_child(gap_child);
    tp_run run;
    load(&run);
    const tp_process *p = &run.procs[0];
    assert_window(p, 0, 6, 8);
    assert_window(p, 1, 20, 21);
    uint64_t on, off;
    assert_int_equal(window(p, 2, &on, &off), -1);
    assert_string_equal(tp_meta(p, "gpu_capture.requests"), "0:6-8,0:20-21");
    tp_run_free(&run);
}

static void write_file(const char *name, const char *text) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Progress files no live process keeps: a FIFO named like one (the command must not block on
 * it), one whose pid is not the one its name gives, one of pid 0, and one of a live pid
 * (this test's, on this host) that has not been rewritten for an hour (its process would
 * rewrite it every 5 s). None is a live process: the command says so and exits 1, at once. */
static void test_cli_hostile_progress(void **state) {
    (void)state;
    fresh_dir("hprog");
    char host[64], name[256], line[256], path[1024];
    tprof__file_host(host);
    snprintf(path, sizeof path, "%s/%s-77.step", g_dir, host);
    assert_int_equal(mkfifo(path, 0644), 0);
    snprintf(name, sizeof name, "%s-%d.step", host, (int)getppid());
    snprintf(line, sizeof line, "trainprof-step 1 pid=%d step=900000 step_ns=1000 plan=auto\n",
             (int)getpid());
    write_file(name, line); /* live pid inside, another in the name */
    write_file("otherhost-0.step", "trainprof-step 1 pid=0 step=900000 step_ns=1000 plan=auto\n");
    snprintf(name, sizeof name, "%s-%d.step", host, (int)getpid());
    snprintf(line, sizeof line, "trainprof-step 1 pid=%d step=900000 step_ns=1000 plan=auto\n",
             (int)getpid());
    write_file(name, line);
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    struct timespec old[2] = {{time(NULL) - 3600, 0}, {time(NULL) - 3600, 0}};
    assert_int_equal(utimensat(AT_FDCWD, path, old, 0), 0);
    char out[1024];
    const char *args[] = {g_dir, "--steps", "3", NULL};
    int rc = run_cli(args, out, sizeof out);
    if (rc != 1) fail_msg("trainprof capture exited %d (1 expected): %s", rc, out);
    snprintf(path, sizeof path, "%s/" TPROF_CTL_REQUEST, g_dir);
    assert_int_equal(access(path, F_OK), -1); /* nothing asked */
}

/* the descriptor of this process open on its progress file, -1 when none */
static int progress_fd(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    struct dirent *e;
    int found = -1;
    while ((e = readdir(d)) != NULL) {
        char l[300], t[1024];
        snprintf(l, sizeof l, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(l, t, sizeof t - 1);
        if (n <= 0) continue;
        t[n] = 0;
        if (n > 5 && !strcmp(t + n - 5, ".step")) found = atoi(e->d_name);
    }
    closedir(d);
    return found;
}

/* The program puts a file of its own on the progress file's descriptor number (dup2): the
 * session must neither write its progress line into it nor close it as it ends. */
static void dup2_child(void) {
    with_plan("auto");
    start_session();
    int pfd = -1;
    for (int i = 0; i < 300 && pfd < 0; i++) {
        tprof_range_push("step");
        sleep_ms(5);
        tprof_range_pop();
        pfd = progress_fd();
    }
    CHECK(pfd >= 0, 40);
    char mine[1024];
    snprintf(mine, sizeof mine, "%s/mine.txt", g_dir);
    int fd = open(mine, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && write(fd, "mine\n", 5) == 5, 41);
    CHECK(dup2(fd, pfd) == pfd, 42);
    close(fd);
    for (int i = 0; i < 150; i++) { /* 0.75 s of steps: the flusher writes every 0.2 s */
        tprof_range_push("step");
        sleep_ms(5);
        tprof_range_pop();
    }
    CHECK(tprof_shutdown() == TPROF_OK, 43);
    CHECK(fcntl(pfd, F_GETFD) >= 0, 44); /* still open: the program's */
    char buf[256] = {0};
    ssize_t n = pread(pfd, buf, sizeof buf - 1, 0);
    CHECK(n == 5 && !memcmp(buf, "mine\n", 5), 45);
    _exit(0);
}

static void test_progress_fd_taken_over(void **state) {
    (void)state;
    fresh_dir("dup2");
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) dup2_child();
    int st = wait_bounded(pid, 30);
    assert_true(st != -1 && WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(count_step_files(), 0); /* reopened after the takeover, removed at the end */
}

/* A request that another user wrote (only root can make one here): not taken. */
static void test_request_of_another_user(void **state) {
    (void)state;
    if (geteuid() != 0) skip(); /* chown to another user needs root */
    fresh_dir("ouser");
    assert_int_equal(chmod(g_dir, 0777), 0);
    pid_t pid = start_steps("auto", 400, 5);
    long s = await_step(10);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char line[160], tmp[1024], path[1024];
    snprintf(line, sizeof line, "trainprof-capture 1 id=%llu first=%ld count=3\n",
             (unsigned long long)now.tv_sec * 1000000000ull + (unsigned long long)now.tv_nsec,
             s + 150);
    write_file(".req.tmp", line);
    snprintf(tmp, sizeof tmp, "%s/.req.tmp", g_dir);
    snprintf(path, sizeof path, "%s/" TPROF_CTL_REQUEST, g_dir);
    assert_int_equal(chown(tmp, 65534, 65534), 0);
    assert_int_equal(rename(tmp, path), 0);
    int st = wait_bounded(pid, 30);
    assert_true(st != -1 && WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    tp_run run;
    load(&run);
    assert_null(tp_meta(&run.procs[0], "gpu_capture.requests"));
    tp_run_free(&run);
}

/* A process ended by SIGTERM finishes its file; its progress file goes with it. */
static void test_progress_gone_on_sigterm(void **state) {
    (void)state;
    fresh_dir("term");
    pid_t pid = start_steps("auto", 100000, 5);
    await_step(10);
    assert_int_equal(kill(pid, SIGTERM), 0);
    int st = wait_bounded(pid, 30);
    assert_true(st != -1 && WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGTERM);
    assert_int_equal(count_step_files(), 0);
}

static const char *g_names[4]; /* pushed in each step, the step range g_names[0] around them */

static void names_child(void) {
    start_session();
    for (int i = 0; i < 20; i++) {
        tprof_range_push(g_names[0]);
        for (int j = 1; j < 4; j++) {
            tprof_range_push(g_names[j]);
            tprof_range_pop();
        }
        if (i == 5) CHECK(tprof_gpu_capture_steps(TPROF_NEXT_STEP, 2) == TPROF_OK, 50);
        sleep_ms(2);
        tprof_range_pop();
    }
}

/* Step ranges are counted by name, whatever other names the steps hold: names that begin
 * like a step pattern and are not one ("Prof", "steps", "iter") do not count; a user's
 * pattern that begins with a glob character ("*_it") does. The window asked for at step 5
 * is exactly steps 6-7 of those ranges. */
static void test_step_names_counted(void **state) {
    (void)state;
    static const char *const sets[][5] = {
        {"*_it", "a_it", "forward", "x_iter", "_iter"},
        {NULL, "ProfilerStep#0", "Prof", "aten::mm", "ProfilerStepX"},
        {NULL, "step", "steps", "s", "forward"},
    };
    for (size_t k = 0; k < sizeof sets / sizeof *sets; k++) {
        fresh_dir("names");
        with_plan("100000-100001");
        if (sets[k][0]) setenv("TRAINPROF_STEP_NAME", sets[k][0], 1);
        for (int j = 0; j < 4; j++) g_names[j] = sets[k][j + 1];
        in_child(names_child);
        unsetenv("TRAINPROF_STEP_NAME");
        tp_run run;
        load(&run);
        g_step_range = g_names[0];
        assert_window(&run.procs[0], 0, 6, 7);
        g_step_range = "step";
        tp_run_free(&run);
    }
}

/* The command's temporary request file name is already a symbolic link to a file (another
 * user could put it in a shared run directory): the command must not write through it. */
static void test_cli_tmp_symlink(void **state) {
    (void)state;
    fresh_dir("tmpl");
    char victim[1024];
    snprintf(victim, sizeof victim, "%s/victim.txt", g_dir);
    write_file("victim.txt", "precious\n");
    pid_t job = start_steps("auto", 400, 5);
    await_step(5);
    int go[2];
    assert_int_equal(pipe(go), 0);
    char out[1024];
    snprintf(out, sizeof out, "%s/cli.out", g_dir);
    const char *argv[] = {TPROF_CLI, "capture", g_dir, "--steps", "2", NULL};
    pid_t cli = fork();
    assert_true(cli >= 0);
    if (cli == 0) {
        char c;
        close(go[1]);
        if (read(go[0], &c, 1) != 1) _exit(92);
        alarm(30);
        spawn_exec(argv, out, NULL);
    }
    close(go[0]);
    char link[1200];
    snprintf(link, sizeof link, "%s/." TPROF_CTL_REQUEST ".%d", g_dir, (int)cli);
    assert_int_equal(symlink(victim, link), 0);
    assert_int_equal(write(go[1], "g", 1), 1);
    close(go[1]);
    int st;
    assert_int_equal(waitpid(cli, &st, 0), cli);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0); /* asked all the same */
    char buf[64] = {0};
    FILE *f = fopen(victim, "r");
    assert_non_null(f);
    size_t r = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[r] = 0;
    assert_string_equal(buf, "precious\n");
    struct stat sb;
    snprintf(link, sizeof link, "%s/" TPROF_CTL_REQUEST, g_dir);
    assert_int_equal(lstat(link, &sb), 0);
    assert_true(S_ISREG(sb.st_mode)); /* the request itself is in place */
    assert_int_equal(waitpid(job, &st, 0), job);
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_from_the_program),
        cmocka_unit_test(test_plans_without_windows),
        cmocka_unit_test(test_from_outside),
        cmocka_unit_test(test_outside_plan_all),
        cmocka_unit_test(test_request_fifo),
        cmocka_unit_test(test_step_name_symlink),
        cmocka_unit_test(test_step_name_fifo),
        cmocka_unit_test(test_demand_while_open),
        cmocka_unit_test(test_cli_hostile_progress),
        cmocka_unit_test(test_progress_fd_taken_over),
        cmocka_unit_test(test_request_of_another_user),
        cmocka_unit_test(test_progress_gone_on_sigterm),
        cmocka_unit_test(test_step_names_counted),
        cmocka_unit_test(test_cli_tmp_symlink),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
