/*
 * test_signals.c — trainprof must not change what a job's signals do, and must finish the
 * rank file of a job that a signal ends.
 *
 * The job is tests/sig_victim.c, which is not linked with libtrainprof: every test runs it
 * once on its own (the reference) and once with libtrainprof preloaded and TRAINPROF_DIR
 * set, as `trainprof run` does, and compares what the two runs printed and how they ended
 * (the whole wait status: signal and core-dump bit). The profiled run's rank file must then
 * hold every range the victim recorded and an end record naming the signal.
 *
 * Also: `trainprof run` killed with SIGKILL takes its job down with it, its run lock is not
 * mistaken for a live run's, and the report names the ranks that ended early with the
 * range and collective each was in.
 *
 * SIG_VICTIM, TPROF_LIB and TPROF_CLI are paths given by tests/signals.cmake. Scratch
 * files live under $TPROF_TEST_TMP (else /tmp), removed at the end unless SIG_KEEP is set.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "analysis/ended.h"
#include "analysis/jsonget.h"
#include "analysis/model.h"
#include "analysis/report.h"
#include "fmt.h"
#include "spawn.h"
#include "format/format.h"
#include "synth.h"
#include "trainprof.h"

#ifndef SIG_VICTIM
#error "SIG_VICTIM must be defined by the build"
#endif

#define WAIT_MS 30000
#define STR2(x) #x
#define STR(x) STR2(x) /* a macro's value as text */
#define N_RANGES 20000

extern char **environ;
static char g_root[PATH_MAX];

static void scratch(char *out, size_t n, const char *tag) {
    fmt(out, n, "%s/%s-XXXXXX", g_root, tag);
    assert_non_null(mkdtemp(out));
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, k;
    char *b = malloc(cap + 1);
    while (b && (k = fread(b + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            char *nb = realloc(b, 2 * cap + 1);
            if (!nb) { free(b); b = NULL; break; }
            b = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (b) b[n] = 0;
    return b;
}

/* ================================================================== processes */

/* Victims get default dispositions, an empty mask, a clean environment plus `env`, a core
 * size limit (cores land in `cwd`), stdout and stderr to files. The sanitizers' own fatal
 * signal handlers are off in them: the reference and the profiled run then both take the
 * kernel's default action, which is what the tests compare. */
static pid_t spawn(const char *const argv[], const char *const env[], const char *cwd,
                   const char *out_path, const char *err_path) {
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid != 0) return pid;
    for (int s = 1; s < 32; s++)
        if (s != SIGKILL && s != SIGSTOP) signal(s, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    static const char *const drop[] = {"TRAINPROF_", "NVTX_INJECTION", "LD_PRELOAD",
                                       "CUDA_INJECTION", "NCCL_PROFILER", "ASAN_OPTIONS",
                                       "RANK=", "WORLD_SIZE=", "LOCAL_RANK="};
    for (int again = 1; again;) {
        again = 0;
        for (char **e = environ; e && *e && !again; e++)
            for (size_t i = 0; i < sizeof drop / sizeof *drop && !again; i++)
                if (!strncmp(*e, drop[i], strlen(drop[i]))) {
                    char name[256];
                    fmt(name, sizeof name, "%.*s", (int)strcspn(*e, "="), *e);
                    unsetenv(name);
                    again = 1;
                }
    }
    putenv((char *)"TRAINPROF_SAMPLE_HZ=0");
    putenv((char *)"TRAINPROF_NVML_HZ=0");
    putenv((char *)"ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0:handle_segv=0:"
                   "handle_sigbus=0:handle_sigfpe=0:handle_sigill=0:handle_abort=0");
    for (size_t i = 0; env && env[i]; i++) putenv((char *)env[i]);
    struct rlimit rl;
    if (getrlimit(RLIMIT_CORE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max < (256u << 20) ? rl.rlim_max : (256u << 20);
        setrlimit(RLIMIT_CORE, &rl);
    }
    if (cwd && chdir(cwd) != 0) _exit(126);
    spawn_exec(argv, out_path, err_path);
}

/* The wait status of pid, or -1 when it did not end within ms (it is then killed). */
static int wait_within(pid_t pid, int ms) {
    int st = 0;
    for (int waited = 0;; waited += 2) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return st;
        if (r < 0 && errno != EINTR) fail_msg("waitpid(%d): %s", (int)pid, strerror(errno));
        if (waited > ms) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        usleep(2000);
    }
}

typedef struct outcome {
    int status;
    char *out, *err;
} outcome;

static void outcome_free(outcome *o) {
    free(o->out);
    free(o->err);
    o->out = o->err = NULL;
}

static void describe(char *buf, size_t n, int st) {
    if (st == -1) fmt(buf, n, "did not end in time");
    else if (WIFSIGNALED(st))
        fmt(buf, n, "killed by signal %d%s", WTERMSIG(st), WCOREDUMP(st) ? " (core dumped)" : "");
    else fmt(buf, n, "exit %d", WEXITSTATUS(st));
}

/* Runs argv on its own (dir NULL) or profiled into dir, as `trainprof run` would: the
 * library preloaded (after the sanitizer's runtime in a sanitizer build, which an
 * uninstrumented program such as python3 needs first). */
static outcome run_cmd(const char *const argv[], const char *dir, const char *tag) {
    char cwd[PATH_MAX], op[PATH_MAX + 16], ep[PATH_MAX + 16];
    scratch(cwd, sizeof cwd, tag);
    fmt(op, sizeof op, "%s/out", cwd);
    fmt(ep, sizeof ep, "%s/err", cwd);
    char envdir[PATH_MAX + 16], pre[2 * PATH_MAX];
    fmt(envdir, sizeof envdir, "TRAINPROF_DIR=%s", dir ? dir : "");
    fmt(pre, sizeof pre, "LD_PRELOAD=%s", TPROF_PRELOAD);
    const char *env[] = {pre, envdir, NULL};
    outcome o;
    o.status = wait_within(spawn(argv, dir ? env : NULL, cwd, op, ep), WAIT_MS);
    o.out = slurp(op);
    o.err = slurp(ep);
    assert_non_null(o.out);
    assert_non_null(o.err);
    return o;
}

static outcome run_victim(const char *const args[], const char *dir, const char *tag) {
    const char *argv[16] = {SIG_VICTIM};
    size_t n = 1;
    for (size_t i = 0; args[i] && n < 15; i++) argv[n++] = args[i];
    argv[n] = NULL;
    return run_cmd(argv, dir, tag);
}

static int same_outcome(const char *const args[], const outcome *ref, const outcome *prof);

/* The lines where a and b differ, on stderr (print_message cuts long text). */
static void print_diff(const char *a, const char *b) {
    while (*a || *b) {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
        if (la != lb || memcmp(a, b, la))
            fprintf(stderr, "  without: %.*s\n  with:    %.*s\n", (int)la, a, (int)lb, b);
        a += la + (a[la] == '\n');
        b += lb + (b[lb] == '\n');
    }
}

/* Runs `args` without and with trainprof; 1 when both printed the same and ended the same,
 * else 0 with the difference on stderr. */
static int compare_to_reference(const char *const args[], const char *dir, outcome *ref,
                                outcome *prof) {
    *ref = run_victim(args, NULL, "ref");
    *prof = run_victim(args, dir, "prof");
    return same_outcome(args, ref, prof);
}

static int same_outcome(const char *const args[], const outcome *ref, const outcome *prof) {
    if (!strcmp(ref->out, prof->out) && ref->status == prof->status) return 1;
    char a[64], b[64];
    describe(a, sizeof a, ref->status);
    describe(b, sizeof b, prof->status);
    fprintf(stderr, "%s %s: without trainprof %s, with trainprof %s\n", args[0],
            args[1] ? args[1] : "", a, b);
    print_diff(ref->out, prof->out);
    if (*prof->err) fprintf(stderr, "  stderr with trainprof: %s", prof->err);
    return 0;
}

/* The reference and the profiled run of `args` must print the same and end the same. */
static void same_as_reference(const char *const args[], const char *dir, outcome *ref,
                              outcome *prof) {
    if (!compare_to_reference(args, dir, ref, prof))
        fail_msg("sig_victim %s: the profiled run differs from the run without trainprof",
                 args[0]);
}

/* ================================================================== rank files */

static size_t count_ranges(const tp_process *p, const char *name, int open) {
    size_t n = 0;
    for (size_t t = 0; t < p->nthreads; t++)
        for (size_t k = 0; k < p->threads[t].nranges; k++) {
            const tp_range *r = &p->threads[t].ranges[k];
            n += !strcmp(r->name, name) && !!(r->flags & TP_R_UNCLOSED) == open;
        }
    return n;
}

/* ================================================================== 1. dispositions */

/* What sigaction(), signal(), sigset() and siginterrupt() report is the job's own, for
 * handlers set before the session started (chained), after it (handed over), SIG_DFL and
 * SIG_IGN, with each flag. */
static void test_dispositions_as_set(void **state) {
    (void)state;
    char dir[PATH_MAX];
    scratch(dir, sizeof dir, "report");
    const char *args[] = {"report", NULL};
    outcome ref, prof;
    same_as_reference(args, dir, &ref, &prof);
    assert_true(WIFEXITED(prof.status) && WEXITSTATUS(prof.status) == 0);
    /* the reference itself: the facts the comparison rests on */
    assert_non_null(strstr(ref.out, "session 2  h_plain    flags=0x4000000 mask=0x1000 "));
    assert_non_null(strstr(ref.out, "replaced SIGUSR1: h_info flags=0x44000004"));
    assert_non_null(strstr(ref.out, "signal(SIGINT) returned h_plain"));
    outcome_free(&ref);
    outcome_free(&prof);
    /* the session did start in the profiled run */
    tp_run run;
    char err[256];
    assert_int_equal(TPROF_OK, tp_run_load(dir, &run, err, sizeof err));
    assert_int_equal(1, run.nprocs);
    assert_int_equal(1, count_ranges(&run.procs[0], "start", 0));
    tp_run_free(&run);
}

/* ================================================================== 2. behaviour */

/* EINTR or restart of a blocking read, nesting with and without SA_NODEFER, sa_mask, the
 * alternate stack: as the job's own flags say, before and after the session started. */
static void test_signal_behaviour(void **state) {
    (void)state;
    char dir[PATH_MAX];
    scratch(dir, sizeof dir, "behave");
    const char *args[] = {"behave", NULL};
    outcome ref, prof;
    same_as_reference(args, dir, &ref, &prof);
    assert_true(WIFEXITED(prof.status) && WEXITSTATUS(prof.status) == 0);
    assert_non_null(strstr(ref.out, "read during Interrupt: EINTR, handler ran 1 time(s)\n"
                                    "read during Terminated: restarted and completed"));
    assert_non_null(strstr(ref.out, "nesting of User defined signal 1: 12ba\n"
                                    "nesting of User defined signal 2: 1a2b\n"));
    assert_non_null(strstr(ref.out, "masks it: MmH\n"));
    assert_non_null(strstr(ref.out, "alternate stack: yes\n"));
    assert_non_null(strstr(ref.out, "SIGPIPE ignored: EPIPE\n"));
    outcome_free(&ref);
    outcome_free(&prof);
}

/* ================================================================== 3. SA_RESETHAND */

/* A handler set with SA_RESETHAND runs once; the second signal takes the default action,
 * and with trainprof the file is finished first, whether the handler was set before the
 * session started or after it (with sigaction, or sysv_signal's one shot). */
static void resethand(int sig, const char *how) {
    char dir[PATH_MAX], num[8];
    scratch(dir, sizeof dir, "resethand");
    fmt(num, sizeof num, "%d", sig);
    const char *args[] = {"resethand", num, how, NULL};
    outcome ref, prof;
    same_as_reference(args, dir, &ref, &prof);
    assert_string_equal("handler 1\n", ref.out);
    assert_true(WIFSIGNALED(ref.status) && WTERMSIG(ref.status) == sig);
    outcome_free(&ref);
    outcome_free(&prof);
    tp_run run;
    char err[256];
    assert_int_equal(TPROF_OK, tp_run_load(dir, &run, err, sizeof err));
    assert_int_equal(1, run.procs[0].complete);
    assert_int_equal(sig, run.procs[0].end_signal);
    tp_run_free(&run);
}

static void test_resethand_sigint(void **state) {
    (void)state;
    resethand(SIGINT, "before");
}
static void test_resethand_sighup(void **state) {
    (void)state;
    resethand(SIGHUP, "before");
}
static void test_resethand_late_sigterm(void **state) {
    (void)state;
    resethand(SIGTERM, "late");
}
static void test_sysv_signal_late_sigusr1(void **state) {
    (void)state;
    resethand(SIGUSR1, "sysv");
}

/* ================================================================== 4. fatal signals */

/* The victim records N ranges and dies without flushing: the status is the reference's
 * (signal and core bit), the file holds the N ranges, the two ranges left open, and an end
 * record naming the signal. 1 when all holds; else 0, and what did not is printed. */
static int fatal_kind(const char *kind, int expect_sig) {
    char dir[PATH_MAX], n[16];
    scratch(dir, sizeof dir, kind);
    fmt(n, sizeof n, "%d", N_RANGES);
    const char *args[] = {"fatal", kind, n, NULL};
    outcome ref, prof;
    int same = compare_to_reference(args, dir, &ref, &prof);
    if (!WIFSIGNALED(ref.status) || WTERMSIG(ref.status) != expect_sig)
        fail_msg("%s: the reference was not killed by signal %d (status 0x%x)", kind,
                 expect_sig, ref.status);
    int core = WCOREDUMP(ref.status) != 0;
    outcome_free(&ref);
    outcome_free(&prof);
    tp_run run;
    char err[256];
    size_t work = 0, outer = 0, last = 0;
    int complete = 0, end_signal = 0;
    uint64_t dropped = 0;
    if (tp_run_load(dir, &run, err, sizeof err) == TPROF_OK && run.nprocs == 1) {
        const tp_process *p = &run.procs[0];
        work = count_ranges(p, "work", 0);
        outer = count_ranges(p, "outer", 1);
        last = count_ranges(p, "last", 1);
        complete = p->complete;
        end_signal = p->end_signal;
        dropped = p->dropped;
        tp_run_free(&run);
    }
    int ok = same && work == N_RANGES && outer == 1 && last == 1 && !dropped && complete &&
             end_signal == expect_sig;
    print_message("%-9s %s status %s; %5zu of %d ranges, end record %s (signal %d)%s\n", kind,
                  core ? "(core)" : "      ", same ? "as without trainprof" : "DIFFERS",
                  work, N_RANGES, complete ? "yes" : "no ", end_signal, ok ? "" : "  FAIL");
    return ok;
}

static void test_fatal_signals(void **state) {
    (void)state;
    static const struct {
        const char *kind;
        int sig;
    } k[] = {{"abort", SIGABRT},    {"segv", SIGSEGV},    {"segv_real", SIGSEGV},
             {"bus", SIGBUS},       {"bus_real", SIGBUS}, {"fpe_real", SIGFPE},
             {"ill_real", SIGILL},  {"hup", SIGHUP},      {"int", SIGINT},
             {"term", SIGTERM},     {"quit", SIGQUIT},    {"usr1", SIGUSR1},
             {"usr2", SIGUSR2},     {"alrm", SIGALRM},    {"pipe", SIGPIPE}};
    int bad = 0;
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) bad += !fatal_kind(k[i].kind, k[i].sig);
    if (bad) fail_msg("%d of %zu ways to die lost events, the end record or the status", bad,
                      sizeof k / sizeof *k);
}

/* An abort's rank file, through `trainprof report`: the rank is named as ended by
 * SIGABRT, inside "outer > last". */
static void test_fatal_report(void **state) {
    (void)state;
    char dir[PATH_MAX], n[16];
    scratch(dir, sizeof dir, "abort-report");
    fmt(n, sizeof n, "%d", 100);
    const char *args[] = {"fatal", "abort", n, NULL};
    outcome prof = run_victim(args, dir, "prof");
    assert_true(WIFSIGNALED(prof.status) && WTERMSIG(prof.status) == SIGABRT);
    outcome_free(&prof);
    char json[PATH_MAX + 16], cwd[PATH_MAX];
    fmt(json, sizeof json, "%s/r.json", dir);
    scratch(cwd, sizeof cwd, "cli");
    const char *argv[] = {TPROF_CLI, "report", dir, "--format", "json", "-o", json, NULL};
    assert_int_equal(0, wait_within(spawn(argv, NULL, cwd, NULL, NULL), WAIT_MS));
    char *text = slurp(json);
    assert_non_null(text);
    cJSON *rep = cJSON_Parse(text);
    free(text);
    assert_non_null(rep);
    const cJSON *ee = tp_jobj(rep, "ended_early");
    assert_int_equal(1, cJSON_GetArraySize(ee));
    const cJSON *e = cJSON_GetArrayItem(ee, 0);
    assert_string_equal("signal", tp_jstr(e, "reason"));
    assert_int_equal(SIGABRT, (int)tp_jnum(e, "signal"));
    assert_string_equal("SIGABRT", tp_jstr(e, "signal_name"));
    const cJSON *r = tp_jobj(e, "last_range");
    assert_string_equal("last", tp_jstr(r, "name"));
    assert_true(cJSON_IsTrue(tp_jobj(r, "open")));
    const cJSON *st = tp_jobj(r, "stack");
    assert_int_equal(2, cJSON_GetArraySize(st));
    assert_string_equal("outer", cJSON_GetArrayItem(st, 0)->valuestring);
    assert_string_equal("last", cJSON_GetArrayItem(st, 1)->valuestring);
    assert_null(tp_jobj(e, "last_collective"));
    cJSON_Delete(rep);
}

/* Eight threads fault at the same moment: one of them finishes the file, the others wait
 * for it (no thread dies before the end record is written, none waits for ever). */
static void test_fatal_race(void **state) {
    (void)state;
    char dir[PATH_MAX];
    scratch(dir, sizeof dir, "race");
    const char *args[] = {"race", "8", "2000", NULL};
    outcome ref, prof;
    same_as_reference(args, dir, &ref, &prof);
    assert_true(WIFSIGNALED(ref.status) && WTERMSIG(ref.status) == SIGSEGV);
    outcome_free(&ref);
    outcome_free(&prof);
    tp_run run;
    char err[256];
    assert_int_equal(TPROF_OK, tp_run_load(dir, &run, err, sizeof err));
    const tp_process *p = &run.procs[0];
    assert_int_equal(8 * 2000, count_ranges(p, "work", 0));
    assert_int_equal(1, p->complete);
    assert_int_equal(SIGSEGV, p->end_signal);
    tp_run_free(&run);
}

/* ================================================================== 5. the flusher */

/* SIGSEGV on trainprof's own flusher thread: the process dies of it without a hang, and
 * the end record (written without the flusher) names it after what was flushed before. */
static void test_flusher_fault(void **state) {
    (void)state;
    char dir[PATH_MAX];
    scratch(dir, sizeof dir, "flusher");
    const char *args[] = {"flusher", "500", NULL};
    outcome ref = run_victim(args, NULL, "ref");
    outcome prof = run_victim(args, dir, "prof");
    char a[64], b[64];
    describe(a, sizeof a, ref.status);
    describe(b, sizeof b, prof.status);
    print_message("SIGSEGV on the flusher: %s (reference, raised in the main thread: %s)\n", b, a);
    if (prof.status != ref.status) fail_msg("status: %s, expected %s (stderr: %s)", b, a, prof.err);
    outcome_free(&ref);
    outcome_free(&prof);
    tp_run run;
    char err[256];
    assert_int_equal(TPROF_OK, tp_run_load(dir, &run, err, sizeof err));
    const tp_process *p = &run.procs[0];
    assert_int_equal(500, count_ranges(p, "work", 0));
    assert_int_equal(1, p->complete);
    assert_int_equal(SIGSEGV, p->end_signal);
    tp_run_free(&run);
}

/* ================================================================== 6. trainprof run */

static int read_line(int fd, char *buf, size_t n, int ms) {
    size_t len = 0;
    while (len + 1 < n) {
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, ms);
        if (r <= 0) return -1;
        ssize_t k = read(fd, buf + len, 1);
        if (k <= 0) return -1;
        if (buf[len] == '\n') break;
        len++;
    }
    buf[len] = 0;
    return 0;
}

/* SIGKILL, which trainprof cannot forward: its job must not run on orphaned. This process
 * becomes the subreaper so that it can wait for the orphan and see how it ended. */
static void test_run_sigkill(void **state) {
    (void)state;
    char parent[PATH_MAX], dir[PATH_MAX + 8], cwd[PATH_MAX];
    scratch(parent, sizeof parent, "run-kill");
    scratch(cwd, sizeof cwd, "cli");
    fmt(dir, sizeof dir, "%s/run", parent);
    assert_int_equal(0, prctl(PR_SET_CHILD_SUBREAPER, 1));
    int fds[2];
    assert_int_equal(0, pipe(fds));
    char fdtext[16];
    fmt(fdtext, sizeof fdtext, "%d", fds[1]);
    const char *argv[] = {TPROF_CLI, "run", "-o", dir, "--quiet", "--", SIG_VICTIM, "loop",
                          fdtext, NULL};
    pid_t tp = spawn(argv, NULL, cwd, NULL, NULL);
    close(fds[1]);
    char line[64];
    if (read_line(fds[0], line, sizeof line, WAIT_MS) != 0 || strncmp(line, "pid ", 4)) {
        kill(tp, SIGKILL);
        fail_msg("the job did not start");
    }
    pid_t job = (pid_t)atoi(line + 4);
    assert_int_equal(0, read_line(fds[0], line, sizeof line, WAIT_MS)); /* recording */
    /* a second run into the same directory meanwhile: refused, the lock is held */
    char *err2;
    {
        char ep[PATH_MAX + 8];
        fmt(ep, sizeof ep, "%s/second.err", cwd);
        const char *a2[] = {TPROF_CLI, "run", "-o", dir, "--quiet", "--", "/bin/true", NULL};
        int st = wait_within(spawn(a2, NULL, cwd, NULL, ep), WAIT_MS);
        err2 = slurp(ep);
        assert_non_null(err2);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 1 || !strstr(err2, "in use by another"))
            fail_msg("a second run into a busy directory: status 0x%x, %s", st, err2);
        free(err2);
    }
    assert_int_equal(0, kill(tp, SIGKILL));
    int st = wait_within(tp, WAIT_MS);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    /* the orphan is ours now (subreaper): it must end, by the SIGTERM it was given */
    int jst = wait_within(job, 10000);
    prctl(PR_SET_CHILD_SUBREAPER, 0);
    close(fds[0]);
    char d[64];
    describe(d, sizeof d, jst);
    print_message("job %d after `trainprof run` was killed: %s\n", (int)job, d);
    if (jst == -1) fail_msg("the job ran on for 10 s after its launcher was killed");
    assert_true(WIFSIGNALED(jst) && WTERMSIG(jst) == SIGTERM);
    tp_run run;
    char err[256];
    assert_int_equal(TPROF_OK, tp_run_load(dir, &run, err, sizeof err));
    const tp_process *jp = NULL;
    for (size_t i = 0; i < run.nprocs; i++)
        if (run.procs[i].hdr.pid == job) jp = &run.procs[i];
    assert_non_null(jp);
    assert_int_equal(1, jp->complete);
    assert_int_equal(SIGTERM, jp->end_signal);
    tp_run_free(&run);
    /* the lock file left behind does not make the directory look busy: the next run is
     * refused only for the rank files in it */
    char ep[PATH_MAX + 8];
    fmt(ep, sizeof ep, "%s/third.err", cwd);
    const char *a3[] = {TPROF_CLI, "run", "-o", dir, "--quiet", "--", "/bin/true", NULL};
    st = wait_within(spawn(a3, NULL, cwd, NULL, ep), WAIT_MS);
    char *e3 = slurp(ep);
    assert_non_null(e3);
    int ok = WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(e3, "already holds rank files") &&
             !strstr(e3, "in use");
    if (!ok) print_message("third run: status 0x%x, %s\n", st, e3);
    free(e3);
    assert_true(ok);
}

/* A lock file whose pid now belongs to a live process that is no trainprof run (pids are
 * reused) does not keep the directory busy. */
static void test_run_stale_lock(void **state) {
    (void)state;
    char dir[PATH_MAX], lock[PATH_MAX + 32], cwd[PATH_MAX];
    scratch(dir, sizeof dir, "stale-lock");
    scratch(cwd, sizeof cwd, "cli");
    fmt(lock, sizeof lock, "%s/.trainprof-run.lock", dir);
    FILE *f = fopen(lock, "w");
    assert_non_null(f);
    fprintf(f, "%d\n", (int)getpid()); /* alive, and not a run */
    fclose(f);
    char ep[PATH_MAX + 8];
    fmt(ep, sizeof ep, "%s/run.err", cwd);
    const char *argv[] = {TPROF_CLI, "run", "-o", dir, "--quiet", "--", "/bin/true", NULL};
    int st = wait_within(spawn(argv, NULL, cwd, NULL, ep), WAIT_MS);
    char *e = slurp(ep);
    assert_non_null(e);
    int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (!ok) print_message("status 0x%x: %s\n", st, e);
    free(e);
    assert_true(ok);
    assert_int_equal(-1, access(lock, F_OK)); /* removed by the run that took it */
}

/* ================================================================== 7. CPython */

/* Python's own use of signals, profiled once its interpreter runs (as with `trainprof run
 * --python`): Ctrl-C during a blocking os.read() raises KeyboardInterrupt at once (CPython
 * installs its SIGINT handler without SA_RESTART and relies on EINTR, PEP 475); and
 * faulthandler, which restores the disposition it found and re-raises, still ends with the
 * rank file finished. The recording goes through ctypes to the preloaded library. */
static const char k_py_prelude[] =
    "import ctypes, os, signal, sys, threading, time\n"
    "lib = ctypes.CDLL(None)\n"
    "if hasattr(lib, 'tprof_range_push'):\n"
    "    lib.tprof_range_push(b'py'); lib.tprof_range_pop(); lib.tprof_flush()\n";

static void python_case(const char *name, const char *body, const char *expect_out,
                        int expect_sig) {
    if (!*TPROF_PYTHON) skip();
    char script[4096], dir[PATH_MAX];
    fmt(script, sizeof script, "%s%s", k_py_prelude, body);
    scratch(dir, sizeof dir, name);
    const char *argv[] = {TPROF_PYTHON, "-c", script, NULL};
    const char *args[] = {name, NULL};
    outcome ref = run_cmd(argv, NULL, "ref"), prof = run_cmd(argv, dir, "prof");
#if SIG_SANITIZER_PRELOADED
    /* the sanitizer runtime preloaded into the profiled interpreter turns core dumps off
     * (ASan's disable_coredump): the core bit is its doing, not trainprof's */
    if (ref.status != -1) ref.status &= ~0x80;
    if (prof.status != -1) prof.status &= ~0x80;
#endif
    int same = same_outcome(args, &ref, &prof);
    if (!same) fail_msg("python %s: the profiled run differs from the run without trainprof", name);
    assert_string_equal(expect_out, ref.out);
    if (expect_sig) assert_true(WIFSIGNALED(ref.status) && WTERMSIG(ref.status) == expect_sig);
    else assert_true(WIFEXITED(ref.status) && WEXITSTATUS(ref.status) == 0);
    outcome_free(&ref);
    outcome_free(&prof);
    tp_run run;
    char err[256];
    assert_int_equal(TPROF_OK, tp_run_load(dir, &run, err, sizeof err));
    assert_int_equal(1, count_ranges(&run.procs[0], "py", 0));
    assert_int_equal(1, run.procs[0].complete);
    assert_int_equal(expect_sig, run.procs[0].end_signal);
    tp_run_free(&run);
}

static void test_python_sigint(void **state) {
    (void)state;
    python_case("py-sigint",
                "r, w = os.pipe()\n"
                "main, tid = threading.get_ident(), threading.get_native_id()\n"
                "def kick():\n"
                "    for i in range(5000):\n" /* until the main thread blocks in read() */
                "        try:\n"
                "            nr = open('/proc/self/task/%d/syscall' % tid).read().split()[0]\n"
                "        except OSError:\n"
                "            time.sleep(0.05); break\n"
                "        if nr == '" STR(SYS_read) "': break\n"
                "        time.sleep(0.001)\n"
                "    signal.pthread_kill(main, signal.SIGINT)\n"
                "    time.sleep(3); os.write(w, b'x')\n"
                "t = threading.Thread(target=kick); t.start(); t0 = time.monotonic()\n"
                "try:\n"
                "    os.read(r, 1); print('read returned')\n"
                "except KeyboardInterrupt:\n"
                "    print('KeyboardInterrupt',\n"
                "          'at once' if time.monotonic() - t0 < 2 else 'late')\n"
                "t.join()\n",
                "KeyboardInterrupt at once\n", 0);
}

static void test_python_faulthandler(void **state) {
    (void)state;
    python_case("py-faulthandler",
                "import faulthandler\n"
                "faulthandler.enable()\n"
                "print('crashing', flush=True)\n"
                "ctypes.string_at(0)\n",
                "crashing\n", SIGSEGV);
}

/* ================================================================== 8. the report */

#define RT0 1700000000000000000ull
#define MONO0 1000000000000ull
#define MS 1000000ull

static void end_record(synth_file *f, uint64_t mono, int sig) {
    tprof_pl_clock pl = {RT0 + (mono - MONO0), mono, 0};
    synth_raw(f, 0, TPROF_REC_END_OF_FILE, (uint32_t)sig, mono, &pl, sizeof pl, NULL, 0);
}

static void synth_allreduce(synth_file *f, uint64_t start, uint64_t end, uint32_t seq,
                            uint32_t rank, uint32_t flags) {
    struct tprof_pl_comm pl;
    memset(&pl, 0, sizeof pl);
    pl.end_ns = end;
    pl.bytes = 4096;
    pl.count = 1024;
    pl.comm_hash = 0xabcdef0123456789ull;
    pl.seq = seq;
    pl.nranks = 3;
    pl.rank = rank;
    pl.op = TPROF_COMM_ALLREDUCE;
    pl.flags = flags;
    pl.source = TPROF_COMM_SRC_NCCL;
    synth_comm(f, 1, start, &pl, NULL);
}

/* Three ranks: 0 ends normally, 1 is killed by SIGABRT inside forward > attention with
 * AllReduce #7 unfinished, 2 has no end record and was last in a finished backward after
 * AllReduce #6 completed. */
static void test_report_ended_early(void **state) {
    (void)state;
    char dir[PATH_MAX];
    assert_int_equal(0, synth_tmpdir(dir, sizeof dir, "ended"));
    for (int r = 0; r < 3; r++) {
        synth_file *f = synth_open(dir, "node0", 100 + r, RT0, MONO0);
        assert_non_null(f);
        synth_rank(f, r, 3);
        synth_thread(f, 1, 100 + r);
        synth_thread_name(f, 1, MONO0, 100 + r, "main");
        synth_push(f, 1, MONO0 + 1 * MS, "forward", 0, 0);
        synth_pop(f, 1, MONO0 + 2 * MS, 0);
        synth_allreduce(f, MONO0 + 2 * MS, MONO0 + 3 * MS, 6, (uint32_t)r, 0);
        synth_push(f, 1, MONO0 + 3 * MS, "backward", 0, 0);
        synth_pop(f, 1, MONO0 + 4 * MS, 0);
        if (r == 0) {
            end_record(f, MONO0 + 9 * MS, 0);
        } else if (r == 1) {
            synth_push(f, 1, MONO0 + 5 * MS, "forward", 0, 0);
            synth_push(f, 1, MONO0 + 6 * MS, "attention", 0, 0);
            synth_allreduce(f, MONO0 + 6600000, MONO0 + 6600000, 7, 1, TPROF_COMM_F_UNFINISHED);
            end_record(f, MONO0 + 7 * MS, SIGABRT);
        }
        assert_int_equal(0, synth_close(f));
    }
    tp_run run;
    char err[256];
    assert_int_equal(TPROF_OK, tp_run_load(dir, &run, err, sizeof err));
    cJSON *rep = tp_report_build(&run, NULL);
    assert_non_null(rep);
    const cJSON *ee = tp_jobj(rep, "ended_early");
    assert_int_equal(2, cJSON_GetArraySize(ee));
    const cJSON *e1 = cJSON_GetArrayItem(ee, 0), *e2 = cJSON_GetArrayItem(ee, 1);
    if (tp_jnum(e1, "rank") != 1) {
        const cJSON *t = e1;
        e1 = e2;
        e2 = t;
    }
    assert_int_equal(1, (int)tp_jnum(e1, "rank"));
    assert_string_equal("signal", tp_jstr(e1, "reason"));
    assert_string_equal("SIGABRT", tp_jstr(e1, "signal_name"));
    assert_true(tp_jnum(e1, "ended_s") == 0.007);
    const cJSON *r1 = tp_jobj(e1, "last_range");
    assert_string_equal("attention", tp_jstr(r1, "name"));
    assert_true(cJSON_IsTrue(tp_jobj(r1, "open")));
    assert_int_equal(2, cJSON_GetArraySize(tp_jobj(r1, "stack")));
    assert_string_equal("forward", cJSON_GetArrayItem(tp_jobj(r1, "stack"), 0)->valuestring);
    assert_string_equal("main", tp_jstr(r1, "thread"));
    const cJSON *c1 = tp_jobj(e1, "last_collective");
    assert_string_equal("AllReduce", tp_jstr(c1, "op"));
    assert_int_equal(7, (int)tp_jnum(c1, "seq"));
    assert_string_equal("0xabcdef0123456789", tp_jstr(c1, "communicator"));
    assert_string_equal("in flight", tp_jstr(c1, "state"));
    assert_string_equal("nccl", tp_jstr(c1, "source"));

    assert_int_equal(2, (int)tp_jnum(e2, "rank"));
    assert_string_equal("no end record", tp_jstr(e2, "reason"));
    assert_null(tp_jobj(e2, "signal"));
    const cJSON *r2 = tp_jobj(e2, "last_range");
    assert_string_equal("backward", tp_jstr(r2, "name"));
    assert_false(cJSON_IsTrue(tp_jobj(r2, "open")));
    const cJSON *c2 = tp_jobj(e2, "last_collective");
    assert_int_equal(6, (int)tp_jnum(c2, "seq"));
    assert_string_equal("completed", tp_jstr(c2, "state"));

    /* one critical finding names both */
    const cJSON *fd, *hit = NULL;
    cJSON_ArrayForEach(fd, tp_jobj(rep, "findings"))
        if (!strcmp(tp_jstr(fd, "id"), "ended_early")) hit = fd;
    assert_non_null(hit);
    assert_string_equal("critical", tp_jstr(hit, "severity"));
    assert_string_equal("2 ranks ended early: rank 1 (SIGABRT), rank 2 (no end record)",
                        tp_jstr(hit, "message"));

    /* the text */
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    assert_non_null(mf);
    tp_report tr;
    assert_int_equal(TPROF_OK, tp_report_make(&run, NULL, &tr));
    assert_int_equal(TPROF_OK, tp_report_write_text(&tr, mf, 0));
    tp_report_free(&tr);
    fclose(mf);
    if (!strstr(buf, "\nended early\n"
                     "  rank 1 (node0:101): killed by SIGABRT (signal 6) at 0.007 s\n"
                     "    in range forward > attention (thread 101 main, from 0.006 s)\n"
                     "    last collective AllReduce #7 on communicator 0xabcdef0123456789 (3 "
                     "ranks, 4096 bytes, nccl), in flight, from 0.007 s\n"
                     "  rank 2 (node0:102): no end record")) {
        fputs(buf, stderr); /* print_message cuts long text */
        fail_msg("the text report lacks the ended-early section as expected");
    }
    free(buf);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* Rank 0 ends normally; of its helper processes one crashed (SIGSEGV), one was stopped from
 * outside (SIGTERM, as a data loader stops its workers) and one ended normally: only the
 * crash is named, as a helper, with a warning (not the ranks' critical finding). */
static void test_report_helper_crashed(void **state) {
    (void)state;
    char dir[PATH_MAX];
    assert_int_equal(0, synth_tmpdir(dir, sizeof dir, "helpers"));
    const int sigs[4] = {0, SIGSEGV, SIGTERM, 0};
    for (int i = 0; i < 4; i++) {
        synth_file *f = synth_open(dir, "node0", 100 + i, RT0, MONO0);
        assert_non_null(f);
        if (i == 0) synth_rank(f, 0, 1);
        synth_thread(f, 1, 100 + i);
        synth_push(f, 1, MONO0 + 1 * MS, i == 0 ? "step" : "load", 0, 0);
        if (i != 1) synth_pop(f, 1, MONO0 + (i == 0 ? 8 : 2) * MS, 0);
        end_record(f, MONO0 + 9 * MS, sigs[i]);
        assert_int_equal(0, synth_close(f));
    }
    tp_run run;
    char err[256];
    assert_int_equal(TPROF_OK, tp_run_load(dir, &run, err, sizeof err));
    const tp_process *crashed = NULL;
    for (size_t i = 0; i < run.nprocs; i++)
        if (run.procs[i].hdr.pid == 101) crashed = &run.procs[i];
    assert_non_null(crashed);
    assert_int_equal(TP_ROLE_HELPER, crashed->role);
    char label[64];
    tp_process_label(crashed, label, sizeof label);
    cJSON *rep = tp_report_build(&run, NULL);
    assert_non_null(rep);
    const cJSON *ee = tp_jobj(rep, "ended_early");
    assert_int_equal(1, cJSON_GetArraySize(ee));
    const cJSON *e = cJSON_GetArrayItem(ee, 0);
    assert_int_equal(101, (int)tp_jnum(e, "pid"));
    assert_string_equal("helper", tp_jstr(e, "role"));
    assert_string_equal("SIGSEGV", tp_jstr(e, "signal_name"));
    assert_string_equal("load", tp_jstr(tp_jobj(e, "last_range"), "name"));
    const cJSON *fd, *helper = NULL, *ranks = NULL;
    cJSON_ArrayForEach(fd, tp_jobj(rep, "findings")) {
        if (!strcmp(tp_jstr(fd, "id"), "helper_crashed")) helper = fd;
        if (!strcmp(tp_jstr(fd, "id"), "ended_early")) ranks = fd;
    }
    assert_null(ranks);
    assert_non_null(helper);
    assert_string_equal("warning", tp_jstr(helper, "severity"));
    char want[160];
    snprintf(want, sizeof want, "1 helper process crashed: %s (SIGSEGV)", label);
    assert_string_equal(want, tp_jstr(helper, "message"));
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* ================================================================== main */

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)st;
    (void)flag;
    (void)f;
    return remove(p);
}

static int group_setup(void **state) {
    (void)state;
    const char *t = getenv("TPROF_TEST_TMP");
    fmt(g_root, sizeof g_root, "%s/signals-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(g_root)) return -1;
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    if (getenv("SIG_KEEP")) {
        fprintf(stderr, "scratch kept in %s\n", g_root);
        return 0;
    }
    nftw(g_root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

int main(void) {
    unsetenv("TRAINPROF_DIR"); /* this process never records */
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispositions_as_set),
        cmocka_unit_test(test_signal_behaviour),
        cmocka_unit_test(test_resethand_sigint),
        cmocka_unit_test(test_resethand_sighup),
        cmocka_unit_test(test_resethand_late_sigterm),
        cmocka_unit_test(test_sysv_signal_late_sigusr1),
        cmocka_unit_test(test_fatal_signals),
        cmocka_unit_test(test_fatal_report),
        cmocka_unit_test(test_fatal_race),
        cmocka_unit_test(test_flusher_fault),
        cmocka_unit_test(test_run_sigkill),
        cmocka_unit_test(test_run_stale_lock),
        cmocka_unit_test(test_python_sigint),
        cmocka_unit_test(test_python_faulthandler),
        cmocka_unit_test(test_report_ended_early),
        cmocka_unit_test(test_report_helper_crashed),
    };
    return cmocka_run_group_tests_name("signals", tests, group_setup, group_teardown);
}
