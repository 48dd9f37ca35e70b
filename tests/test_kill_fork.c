/*
 * test_kill_fork.c — what happens to a profiled process, and to its rank file, when it is
 * signalled or forks: SIGTERM/SIGINT (directly and through `trainprof run`), a program's own
 * signal handler, fork (with and without exec, with and without recording in the child).
 *
 * The victim is tests/rel_victim.c (rel_common.h says how it runs and reports); its
 * progress lines come only after what they count was flushed, so the rank file must hold
 * at least that much. REL_VICTIM, TPROF_CLI are paths given by tests/reliability.cmake.
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
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "analysis/model.h"
#include "format/reader.h"
#include "rel_common.h"
#include "trainprof.h"

#ifndef REL_VICTIM
#error "REL_VICTIM (path of rel_victim) must be defined by the build"
#endif
#ifndef TPROF_CLI
#error "TPROF_CLI (path of the trainprof command) must be defined by the build"
#endif

/* ================================================================== 1. signals */

/* Starts argv (whose progress FD is pr), waits for `lines` progress reports plus a few
 * ms (so the signal lands while the victim records, not while it flushes), sends `sig`
 * to the started process, and returns its wait status; *last gets the last number the
 * victim reported (before or after the signal). */
static int kill_after_progress(const char *const argv[], const char *const env[], progress *pr,
                               int lines, int sig, unsigned long long *last) {
    char errp[PATH_MAX];
    fmt(errp, sizeof errp, "%s/victim-%d.err", g_root, sig);
    pid_t pid = spawn(argv, env, NULL, errp);
    progress_started(pr);
    char line[128];
    *last = 0;
    for (int got = 0; got < lines;) {
        int r = progress_line(pr, line, sizeof line, WAIT_MS);
        if (r <= 0) {
            kill(pid, SIGKILL);
            wait_for(pid);
            char *e = slurp(errp, NULL);
            if (e) own(e, free, e);
            fail_msg("victim stopped reporting (%s); stderr: %s", r == 0 ? "EOF" : "timeout",
                     e ? e : "");
        }
        *last = strtoull(line, NULL, 10);
        got++;
    }
    usleep(7000);
    assert_int_equal(0, kill(pid, sig));
    int st = wait_for(pid);
    while (progress_line(pr, line, sizeof line, WAIT_MS) == 1)
        if (line[0] >= '0' && line[0] <= '9') *last = strtoull(line, NULL, 10);
    return st;
}

static void signal_direct(int sig) {
    char dir[PATH_MAX], envdir[PATH_MAX + 16];
    scratch(dir, sizeof dir, sig == SIGTERM ? "sigterm" : "sigint");
    fmt(envdir, sizeof envdir, "TRAINPROF_DIR=%s", dir);
    progress pr;
    progress_open(&pr);
    const char *argv[] = {REL_VICTIM, "loop", pr.wr_text, NULL};
    const char *env[] = {envdir, NULL};
    unsigned long long last;
    int st = kill_after_progress(argv, env, &pr, 3, sig, &last);
    progress_close(&pr);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != sig)
        fail_msg("victim status 0x%x: expected death by signal %d", st, sig);
    assert_true(last > 0);
    /* the handler's flusher writes everything recorded and the end record before
     * re-raising, so the file is complete */
    size_t m = check_loop_file(dir, last, 1);
    print_message("signal %d: victim reported %llu flushed iterations, file holds %zu\n", sig,
                  last, m);
}

static void test_sigterm_direct(void **state) {
    (void)state;
    signal_direct(SIGTERM);
}

static void test_sigint_direct(void **state) {
    (void)state;
    signal_direct(SIGINT);
}

/* Compressed chunks of `path`, walking the chunk headers as laid out in the file (no
 * reader): each must be a whole chunk, save a torn last one (*torn). */
static int compressed_chunks(const char *path, int *torn) {
    size_t n;
    uint8_t *b = (uint8_t *)slurp(path, &n);
    assert_non_null(b);
    own(b, free, b);
    tprof_file_header fh;
    assert_true(n >= sizeof fh);
    memcpy(&fh, b, sizeof fh);
    size_t pos = fh.header_bytes;
    int z = 0;
    *torn = 0;
    while (pos < n) {
        tprof_chunk_header h;
        if (n - pos < sizeof h) { *torn = 1; break; }
        memcpy(&h, b + pos, sizeof h);
        assert_int_equal(TPROF_CHUNK_MAGIC, h.magic);
        if (h.payload_bytes > n - pos - sizeof h) { *torn = 1; break; }
        assert_int_equal(h.crc32, tprof__crc32(0, b + pos + sizeof h, h.payload_bytes));
        if (h.flags & 1u) z++;
        pos += sizeof h + tprof__align8(h.payload_bytes);
    }
    disown(b);
    return z;
}

/* SIGKILL mid-run with compressed chunks (the default): no handler runs, so the file ends
 * at the last chunk the flusher wrote, and every chunk up to it decompresses by itself:
 * all the iterations the victim saw flushed are read, in order, without damage other than
 * the missing end (and a torn last chunk, if the kill cut a write). */
static void test_sigkill_compressed(void **state) {
    (void)state;
    char dir[PATH_MAX], envdir[PATH_MAX + 16];
    scratch(dir, sizeof dir, "sigkill");
    fmt(envdir, sizeof envdir, "TRAINPROF_DIR=%s", dir);
    progress pr;
    progress_open(&pr);
    const char *argv[] = {REL_VICTIM, "loop", pr.wr_text, NULL};
    const char *env[] = {envdir, NULL};
    unsigned long long last;
    int st = kill_after_progress(argv, env, &pr, 5, SIGKILL, &last);
    progress_close(&pr);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
        fail_msg("victim status 0x%x: expected death by SIGKILL", st);
    assert_true(last > 0);
    char names[4][256];
    assert_int_equal(1, tprof_files(dir, names, 4));
    char path[PATH_MAX + 300];
    fmt(path, sizeof path, "%s/%s", dir, names[0]);
    int torn;
    int z = compressed_chunks(path, &torn);
    if (z < 5) fail_msg("%d compressed chunks in %s (expected one per flush at least)", z, path);
    size_t m = check_loop_file(dir, last, 0);
    print_message("SIGKILL: victim reported %llu flushed iterations, file holds %zu in %d "
                  "compressed chunks%s\n", last, m, z, torn ? " and a torn tail" : "");
}

/* TRAINPROF_COMPRESS: 0 writes every chunk plain in a version 1 file and says so in the
 * capability; the default (level 1) compresses and says the level. Same program, same
 * records (gen: 12 steps), both read in full. */
static void test_compress_option(void **state) {
    (void)state;
    static const char *const setting[2] = {"TRAINPROF_COMPRESS=0", NULL};
    static const char *const cap[2] = {"off (TRAINPROF_COMPRESS=0): chunks written plain",
                                       "zstd level 1"};
    for (int k = 0; k < 2; k++) {
        char dir[PATH_MAX], envdir[PATH_MAX + 16];
        scratch(dir, sizeof dir, k ? "compress-default" : "compress-0");
        fmt(envdir, sizeof envdir, "TRAINPROF_DIR=%s", dir);
        const char *argv[] = {REL_VICTIM, "gen", "12", NULL};
        const char *env[] = {envdir, "TRAINPROF_FLUSH_MS=5", setting[k], NULL};
        int st = wait_for(spawn(argv, env, NULL, NULL));
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        char names[4][256], path[PATH_MAX + 300];
        assert_int_equal(1, tprof_files(dir, names, 4));
        fmt(path, sizeof path, "%s/%s", dir, names[0]);
        int torn;
        int z = compressed_chunks(path, &torn);
        assert_int_equal(0, torn);
        size_t n;
        char *b = slurp(path, &n);
        assert_non_null(b);
        tprof_file_header fh;
        memcpy(&fh, b, sizeof fh);
        free(b);
        if (k == 0) {
            assert_int_equal(0, z);
            assert_int_equal(1, fh.version);
        } else {
            assert_true(z > 0);
            assert_int_equal(2, fh.version);
        }
        tp_run run;
        load_ok(dir, &run);
        assert_int_equal(1, run.nprocs);
        const tp_process *p = &run.procs[0];
        assert_int_equal(1, p->complete);
        assert_int_equal(0, p->ndamage);
        assert_int_equal(12, count_counters(p, "loss"));
        const char *c = tp_meta(p, "capability.compression");
        assert_non_null(c);
        assert_string_equal(cap[k], c);
        run_done(&run);
    }
}

/* A program that ends before the flusher's first pass (a short one, or a loaded machine):
 * its whole file is written after the session is shut down, and must still say how its
 * chunks were written (the capability the flusher records as it writes the first one). */
static void test_compress_capability_at_exit(void **state) {
    (void)state;
    char dir[PATH_MAX], envdir[PATH_MAX + 16];
    scratch(dir, sizeof dir, "compress-at-exit");
    fmt(envdir, sizeof envdir, "TRAINPROF_DIR=%s", dir);
    const char *argv[] = {REL_VICTIM, "exec_child", NULL};
    const char *env[] = {envdir, "TRAINPROF_FLUSH_MS=600000", "TRAINPROF_NVML_HZ=0", NULL};
    int st = wait_for(spawn(argv, env, NULL, NULL));
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    tp_run run;
    load_ok(dir, &run);
    assert_int_equal(1, run.nprocs);
    const tp_process *p = &run.procs[0];
    assert_int_equal(1, p->complete);
    const char *c = tp_meta(p, "capability.compression");
    assert_non_null(c);
    assert_string_equal("zstd level 1", c);
    run_done(&run);
}

/* SIGTERM while the program is blocked in sleep(): the default action ends the program
 * there, so no code after the sleep may run and the status is death by SIGTERM. The
 * library's handler must not let the program resume while the flusher finishes (it could
 * run on and exit 0 first); repeated because that is a race. */
static void test_sigterm_in_sleep(void **state) {
    (void)state;
    int runs = 10, exited = 0, woke = 0, incomplete = 0;
    for (int i = 0; i < runs; i++) {
        char dir[PATH_MAX], envdir[PATH_MAX + 16];
        scratch(dir, sizeof dir, "sleep");
        fmt(envdir, sizeof envdir, "TRAINPROF_DIR=%s", dir);
        progress pr;
        progress_open(&pr);
        const char *argv[] = {REL_VICTIM, "sleepexit", pr.wr_text, NULL};
        const char *env[] = {envdir, NULL};
        pid_t pid = spawn(argv, env, NULL, NULL);
        progress_started(&pr);
        char line[128];
        if (progress_line(&pr, line, sizeof line, WAIT_MS) != 1 || strncmp(line, "ready", 5)) {
            kill(pid, SIGKILL);
            wait_for(pid);
            fail_msg("sleepexit victim did not get ready");
        }
        usleep(2000); /* inside sleep() by now */
        assert_int_equal(0, kill(pid, SIGTERM));
        int st = wait_for(pid);
        while (progress_line(&pr, line, sizeof line, WAIT_MS) == 1)
            woke += !strncmp(line, "woke", 4);
        progress_close(&pr);
        if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGTERM) exited++;
        tp_run run;
        load_ok(dir, &run);
        assert_int_equal(1, run.nprocs);
        assert_int_equal(100, count_ranges(&run.procs[0], "before_sleep"));
        incomplete += !run.procs[0].complete;
        run_done(&run);
    }
    print_message("%d runs: %d not killed by SIGTERM, %d ran code after the sleep, %d files "
                  "without end record\n",
                  runs, exited, woke, incomplete);
    if (exited || woke || incomplete)
        fail_msg("SIGTERM in sleep(): %d of %d runs were not killed by it, %d ran on after "
                 "it, %d left no end record",
                 exited, runs, woke, incomplete);
}

/* A program that set its own SIGTERM handler before trainprof started keeps it: the
 * handler runs, the program exits 42 by itself, and its file is complete and exact. */
static void test_own_handler(void **state) {
    (void)state;
    char dir[PATH_MAX], envdir[PATH_MAX + 16];
    scratch(dir, sizeof dir, "handler");
    fmt(envdir, sizeof envdir, "TRAINPROF_DIR=%s", dir);
    progress pr;
    progress_open(&pr);
    const char *argv[] = {REL_VICTIM, "handler", pr.wr_text, NULL};
    const char *env[] = {envdir, NULL};
    char errp[PATH_MAX];
    fmt(errp, sizeof errp, "%s/handler.err", g_root);
    pid_t pid = spawn(argv, env, NULL, errp);
    progress_started(&pr);
    char line[128];
    for (int got = 0; got < 3; got++)
        if (progress_line(&pr, line, sizeof line, WAIT_MS) != 1) {
            kill(pid, SIGKILL);
            wait_for(pid);
            fail_msg("handler victim stopped reporting");
        }
    usleep(7000);
    assert_int_equal(0, kill(pid, SIGTERM));
    int st = wait_for(pid);
    unsigned long long final = 0;
    int have_final = 0;
    while (progress_line(&pr, line, sizeof line, WAIT_MS) == 1)
        if (!strncmp(line, "final ", 6)) {
            final = strtoull(line + 6, NULL, 10);
            have_final = 1;
        }
    progress_close(&pr);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 42) {
        char *e = slurp(errp, NULL);
        if (e) own(e, free, e);
        fail_msg("status 0x%x, expected exit 42 from the program's own handler; stderr: %s",
                 st, e ? e : "");
    }
    assert_true(have_final);
    /* exit() ran the library's shutdown: every completed iteration is in the file, and
     * nothing more */
    size_t m = check_loop_file(dir, final, 1);
    assert_int_equal(final, m);
    tp_run run;
    load_ok(dir, &run);
    assert_int_equal(final, count_ranges(&run.procs[0], "work"));
    run_done(&run);
}

/* `trainprof run` killed with `sig`: it forwards the signal, the victim dies of it, the
 * report is written, and trainprof itself ends by the same signal. */
static void signal_via_cli(int sig) {
    char parent[PATH_MAX], dir[PATH_MAX + 8];
    scratch(parent, sizeof parent, "cli-sig");
    fmt(dir, sizeof dir, "%s/run", parent);
    progress pr;
    progress_open(&pr);
    const char *argv[] = {TPROF_CLI, "run", "-o", dir, "--quiet", "--",
                          REL_VICTIM, "loop", pr.wr_text, NULL};
    unsigned long long last;
    int st = kill_after_progress(argv, NULL, &pr, 3, sig, &last);
    progress_close(&pr);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != sig)
        fail_msg("trainprof status 0x%x: expected death by re-raised signal %d", st, sig);
    char path[PATH_MAX + 32];
    fmt(path, sizeof path, "%s/report.txt", dir);
    assert_int_equal(0, access(path, R_OK));
    fmt(path, sizeof path, "%s/report.json", dir);
    cJSON *rep = load_json(path);
    const cJSON *procs = jget(rep, "processes");
    assert_int_equal(1, cJSON_GetArraySize(procs));
    const cJSON *p0 = cJSON_GetArrayItem(procs, 0);
    /* 3 events per iteration: push, counter, pop */
    if (jnum(p0, "events") < 3.0 * (double)last)
        fail_msg("report.json: %.0f events, the victim had flushed %llu iterations",
                 jnum(p0, "events"), last);
    assert_true(cJSON_IsTrue(jget(p0, "complete")));
    json_done(rep);
    check_loop_file(dir, last, 1);
}

static void test_sigterm_via_cli(void **state) {
    (void)state;
    signal_via_cli(SIGTERM);
}

static void test_sigint_via_cli(void **state) {
    (void)state;
    signal_via_cli(SIGINT);
}

/* ================================================================== 2. fork */

/* Reads "key N" lines until EOF; fills up to 4 values per key in order. */
static int read_kv(progress *pr, const char *key, unsigned long long *vals, int max) {
    char line[128];
    int n = 0;
    size_t kl = strlen(key);
    while (progress_line(pr, line, sizeof line, WAIT_MS) == 1)
        if (!strncmp(line, key, kl) && line[kl] == ' ' && n < max)
            vals[n++] = strtoull(line + kl + 1, NULL, 10);
    return n;
}

static void check_fork_run(const char *dir, pid_t parent, pid_t child, size_t thread_ranges) {
    char names[8][256];
    int nf = tprof_files(dir, names, 8);
    tp_run run;
    load_ok(dir, &run);
    if (nf != 2 || run.nprocs != 2) {
        for (int i = 0; i < nf; i++) print_message("file: %s\n", names[i]);
        fail_msg("expected 2 rank files (parent %d, child %d), found %d", (int)parent,
                 (int)child, nf);
    }
    const tp_process *pp = proc_by_pid(&run, parent), *cp = proc_by_pid(&run, child);
    assert_non_null(pp);
    assert_non_null(cp);
    const char *bad;
    if ((bad = name_not_prefixed(pp, "parent_"))) fail_msg("parent file holds '%s'", bad);
    if ((bad = name_not_prefixed(cp, "child_"))) fail_msg("child file holds '%s'", bad);
    /* nothing lost, nothing twice */
    assert_int_equal(100, count_ranges(pp, "parent_before"));
    assert_int_equal(100, count_ranges(pp, "parent_after"));
    if (thread_ranges != (size_t)-1)
        assert_int_equal(thread_ranges, count_ranges(pp, "parent_thread"));
    assert_int_equal(50, count_ranges(cp, "child_work"));
    assert_int_equal(50, count_counters(cp, "child_counter"));
    assert_int_equal(parent, cp->hdr.ppid);
    assert_int_equal(1, pp->complete);
    assert_int_equal(1, cp->complete);
    assert_int_equal(0, pp->dropped);
    assert_int_equal(0, cp->dropped);
    assert_int_equal(0, pp->ndamage);
    assert_int_equal(0, cp->ndamage);
    run_done(&run);
}

/* Runs rel_victim MODE with TRAINPROF_DIR set to a fresh scratch dir (written to dir, of
 * PATH_MAX bytes), reads the nkids "child PID" lines it reports into kids, and asserts it
 * exits 0. Returns its pid. */
static pid_t run_forking_victim(const char *mode, char *dir, unsigned long long *kids,
                                int nkids) {
    char envdir[PATH_MAX + 16];
    scratch(dir, PATH_MAX, mode);
    fmt(envdir, sizeof envdir, "TRAINPROF_DIR=%s", dir);
    progress pr;
    progress_open(&pr);
    const char *argv[] = {REL_VICTIM, mode, pr.wr_text, NULL};
    const char *env[] = {envdir, NULL};
    pid_t pid = spawn(argv, env, NULL, NULL);
    progress_started(&pr);
    assert_int_equal(nkids, read_kv(&pr, "child", kids, nkids));
    progress_close(&pr);
    int st = wait_for(pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(0, WEXITSTATUS(st));
    return pid;
}

static void test_fork(void **state) {
    (void)state;
    char dir[PATH_MAX], envdir[PATH_MAX + 16];
    scratch(dir, sizeof dir, "fork");
    fmt(envdir, sizeof envdir, "TRAINPROF_DIR=%s", dir);
    progress pr;
    progress_open(&pr);
    const char *argv[] = {REL_VICTIM, "fork", pr.wr_text, NULL};
    const char *env[] = {envdir, NULL};
    pid_t pid = spawn(argv, env, NULL, NULL);
    progress_started(&pr);
    unsigned long long child = 0, thr = 0;
    /* "thread N" comes before "child PID" */
    char line[128];
    while (progress_line(&pr, line, sizeof line, WAIT_MS) == 1) {
        if (!strncmp(line, "thread ", 7)) thr = strtoull(line + 7, NULL, 10);
        if (!strncmp(line, "child ", 6)) child = strtoull(line + 6, NULL, 10);
    }
    progress_close(&pr);
    int st = wait_for(pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(0, WEXITSTATUS(st));
    assert_true(child > 0);
    assert_true(thr > 0);
    check_fork_run(dir, pid, (pid_t)child, (size_t)thr);
}

/* A process that set its session up with tprof_init() (no TRAINPROF_DIR): its forked
 * child records into its own file in the same directory, as after a lazy start. */
static void test_fork_after_init(void **state) {
    (void)state;
    char dir[PATH_MAX];
    scratch(dir, sizeof dir, "forkinit");
    progress pr;
    progress_open(&pr);
    const char *argv[] = {REL_VICTIM, "forkinit", dir, pr.wr_text, NULL};
    pid_t pid = spawn(argv, NULL, NULL, NULL);
    progress_started(&pr);
    unsigned long long child = 0;
    assert_int_equal(1, read_kv(&pr, "child", &child, 1));
    progress_close(&pr);
    int st = wait_for(pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(0, WEXITSTATUS(st));
    check_fork_run(dir, pid, (pid_t)child, (size_t)-1);
}

static void test_fork_exec(void **state) {
    (void)state;
    char dir[PATH_MAX];
    unsigned long long child = 0;
    pid_t pid = run_forking_victim("forkexec", dir, &child, 1);
    char names[8][256];
    assert_int_equal(2, tprof_files(dir, names, 8));
    tp_run run;
    load_ok(dir, &run);
    assert_int_equal(2, run.nprocs);
    const tp_process *pp = proc_by_pid(&run, pid), *cp = proc_by_pid(&run, (long)child);
    assert_non_null(pp);
    assert_non_null(cp);
    const char *bad;
    if ((bad = name_not_prefixed(pp, "parent_"))) fail_msg("parent file holds '%s'", bad);
    if ((bad = name_not_prefixed(cp, "exec_"))) fail_msg("exec'd child file holds '%s'", bad);
    assert_int_equal(20, count_ranges(pp, "parent_work"));
    assert_int_equal(20, count_ranges(pp, "parent_after"));
    assert_int_equal(30, count_ranges(cp, "exec_work"));
    assert_int_equal(pid, cp->hdr.ppid);
    assert_int_equal(1, pp->complete);
    assert_int_equal(1, cp->complete);
    run_done(&run);
}

/* A child that records, flushes, then exec's another program that records: the exec'd
 * image has the same pid, but what the child had already written to disk must survive
 * (in its own file or in the same one). */
static void test_fork_record_exec(void **state) {
    (void)state;
    char dir[PATH_MAX];
    unsigned long long child = 0;
    pid_t pid = run_forking_victim("forkrecexec", dir, &child, 1);
    char names[8][256];
    int nf = tprof_files(dir, names, 8);
    for (int i = 0; i < nf; i++) print_message("file: %s\n", names[i]);
    tp_run run;
    load_ok(dir, &run);
    size_t prexec = 0, exec = 0, parent = 0;
    for (size_t i = 0; i < run.nprocs; i++) {
        const tp_process *p = &run.procs[i];
        if (p->hdr.pid == (long)child) {
            prexec += count_ranges(p, "prexec_work");
            exec += count_ranges(p, "exec_work");
        } else {
            assert_int_equal(pid, p->hdr.pid);
            parent += count_ranges(p, "parent_work");
        }
    }
    assert_int_equal(20, parent);
    assert_int_equal(30, exec);
    if (prexec != 20)
        fail_msg("the child's 20 flushed prexec_work ranges: %zu left after its exec", prexec);
    run_done(&run);
}

/* Children that record nothing (one exits after fork, one exec's a program that records
 * nothing) leave no file. */
static void test_fork_idle(void **state) {
    (void)state;
    char dir[PATH_MAX];
    unsigned long long kids[2] = {0, 0};
    pid_t pid = run_forking_victim("forkidle", dir, kids, 2);
    char names[8][256];
    int nf = tprof_files(dir, names, 8);
    for (int i = 0; i < nf; i++) print_message("file: %s\n", names[i]);
    assert_int_equal(1, nf);
    char want[64];
    fmt(want, sizeof want, "-%d.tprof", (int)pid);
    assert_non_null(strstr(names[0], want));
    tp_run run;
    load_ok(dir, &run);
    assert_int_equal(20, count_ranges(&run.procs[0], "parent_work"));
    assert_int_equal(1, run.procs[0].complete);
    run_done(&run);
}

/* ================================================================== main */

int main(void) {
    /* this process never records: make sure no lazy session could start in it */
    unsetenv("TRAINPROF_DIR");
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_sigterm_direct, release_all),
        cmocka_unit_test_teardown(test_sigint_direct, release_all),
        cmocka_unit_test_teardown(test_sigkill_compressed, release_all),
        cmocka_unit_test_teardown(test_compress_option, release_all),
        cmocka_unit_test_teardown(test_compress_capability_at_exit, release_all),
        cmocka_unit_test_teardown(test_sigterm_in_sleep, release_all),
        cmocka_unit_test_teardown(test_own_handler, release_all),
        cmocka_unit_test_teardown(test_sigterm_via_cli, release_all),
        cmocka_unit_test_teardown(test_sigint_via_cli, release_all),
        cmocka_unit_test_teardown(test_fork, release_all),
        cmocka_unit_test_teardown(test_fork_exec, release_all),
        cmocka_unit_test_teardown(test_fork_idle, release_all),
        cmocka_unit_test_teardown(test_fork_record_exec, release_all),
        cmocka_unit_test_teardown(test_fork_after_init, release_all),
    };
    return cmocka_run_group_tests_name("kill_fork", tests, rel_group_setup, rel_group_teardown);
}
