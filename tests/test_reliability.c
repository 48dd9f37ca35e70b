/*
 * test_reliability.c — what happens to a profiled process, and to its rank file, when
 * things go wrong: SIGTERM/SIGINT (directly and through `trainprof run`), a program's own
 * signal handler, fork (with and without exec, with and without recording in the child),
 * damaged rank files (torn, flipped, bad header, empty, random), and hostile names.
 *
 * The processes under test are real: tests/rel_victim.c, linked with libtrainprof, run as
 * a child (fork + exec) with a clean environment and default signal dispositions, and
 * reports progress through a pipe only after the events it speaks of were flushed, so the
 * tests can assert lower bounds (or exact counts) on what the rank file holds. Damaged
 * files are made by damaging real files the library wrote; what a damaged file must still
 * yield is computed from an undamaged copy with the damaged chunk cut out (the reader
 * contract in src/format/reader.h: one bad chunk loses that chunk, not the file).
 *
 * Scratch files live under $TPROF_TEST_TMP (else /tmp) and are removed at the end unless
 * REL_KEEP is set. REL_VICTIM, TPROF_CLI are paths given by tests/reliability.cmake.
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
#include <ftw.h>
#include <limits.h>
#include <poll.h>
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
#include "analysis/steps.h"
#include "format/reader.h"
#include "trainprof.h"

#ifndef REL_VICTIM
#error "REL_VICTIM (path of rel_victim) must be defined by the build"
#endif
#ifndef TPROF_CLI
#error "TPROF_CLI (path of the trainprof command) must be defined by the build"
#endif

#define GEN_STEPS 12
#define WAIT_MS 30000

extern char **environ;
static char g_root[PATH_MAX];

/* snprintf that never truncates silently (and keeps -Wformat-truncation quiet about
 * paths that are PATH_MAX long only in theory). */
static void fmt(char *out, size_t n, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void fmt(char *out, size_t n, const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    int k = vsnprintf(out, n, f, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= n) {
        fprintf(stderr, "path or text too long: %s\n", out);
        abort();
    }
}

/* ================================================================== small helpers */

static void scratch(char *out, size_t n, const char *tag) {
    fmt(out, n, "%s/%s-XXXXXX", g_root, tag);
    assert_non_null(mkdtemp(out));
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)st;
    (void)flag;
    (void)f;
    return remove(p);
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *b = malloc(cap + 1);
    size_t k;
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
    if (!b) return NULL;
    b[n] = 0;
    if (len) *len = n;
    return b;
}

static void write_bytes(const char *path, const void *data, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal((ssize_t)n, write(fd, data, n));
    close(fd);
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* Names of the *.tprof files of dir (count returned, up to max). */
static int tprof_files(const char *dir, char names[][256], int max) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l > 6 && !strcmp(e->d_name + l - 6, ".tprof") && n < max)
            fmt(names[n++], 256, "%s", e->d_name);
    }
    closedir(d);
    return n;
}

/* ================================================================== cleanup on failure */

/* What a test holds (loaded runs, parsed JSON, captured output) is registered here and
 * released by the per-test teardown too, so that a failing assertion, which longjmps out
 * of the test, does not show up as a leak in the ASan build. */
typedef struct owned {
    const void *key;
    void (*fn)(void *);
    void *arg;
} owned;
static owned g_owned[64];
static size_t g_nowned;

static void own(const void *key, void (*fn)(void *), void *arg) {
    if (g_nowned == sizeof g_owned / sizeof *g_owned) {
        fprintf(stderr, "too many owned resources\n");
        abort();
    }
    g_owned[g_nowned++] = (owned){key, fn, arg};
}

static void disown(const void *key) {
    for (size_t i = g_nowned; i-- > 0;)
        if (g_owned[i].key == key) {
            owned o = g_owned[i];
            g_owned[i] = g_owned[--g_nowned];
            o.fn(o.arg);
            return;
        }
}

static int release_all(void **state) {
    (void)state;
    while (g_nowned) {
        owned o = g_owned[--g_nowned];
        o.fn(o.arg);
    }
    return 0;
}

static void free_run_copy(void *p) {
    tp_run_free(p);
    free(p);
}
static void free_json(void *p) { cJSON_Delete(p); }

/* Frees a run loaded by load_ok (through the copy registered then). */
static void run_done(tp_run *run) {
    disown(run);
    memset(run, 0, sizeof *run);
}
static void json_done(cJSON *j) { disown(j); }
static void str_done(char *s) { disown(s); }

/* ================================================================== processes */

/* The child gets default SIGTERM/SIGINT, an empty signal mask, no TRAINPROF_* or
 * launcher rank variables from the outside, plus `env` (NAME=VALUE, NULL-terminated). */
static pid_t spawn(const char *const argv[], const char *const env[], const char *out_path,
                   const char *err_path) {
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid != 0) return pid;
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    static const char *const drop_prefix[] = {"TRAINPROF_", "NVTX_INJECTION", "LD_PRELOAD",
                                              "OMPI_COMM_WORLD_", "PMI_", "PMIX_", "SLURM_"};
    static const char *const drop_exact[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK"};
    for (int again = 1; again;) {
        again = 0;
        for (char **e = environ; e && *e; e++) {
            int drop = 0;
            for (size_t i = 0; i < sizeof drop_prefix / sizeof *drop_prefix; i++)
                drop |= !strncmp(*e, drop_prefix[i], strlen(drop_prefix[i]));
            for (size_t i = 0; i < sizeof drop_exact / sizeof *drop_exact; i++) {
                size_t l = strlen(drop_exact[i]);
                drop |= !strncmp(*e, drop_exact[i], l) && (*e)[l] == '=';
            }
            if (drop) {
                char name[256];
                fmt(name, sizeof name, "%.*s", (int)(strcspn(*e, "=")), *e);
                unsetenv(name);
                again = 1;
                break;
            }
        }
    }
    /* no process sampler: these tests compare exact sets of names and counts */
    putenv((char *)"TRAINPROF_SAMPLE_HZ=0");
    putenv((char *)"TRAINPROF_NVML_HZ=0");
    for (size_t i = 0; env && env[i]; i++) putenv((char *)env[i]);
    int in = open("/dev/null", O_RDONLY);
    if (in >= 0) dup2(in, 0);
    if (out_path) {
        int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) dup2(fd, 1);
    }
    if (err_path) {
        int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) dup2(fd, 2);
    }
    execv(argv[0], (char *const *)argv);
    _exit(127);
}

static int wait_for(pid_t pid) {
    int st = 0;
    for (int waited = 0;; waited += 2) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return st;
        if (r < 0 && errno != EINTR) fail_msg("waitpid: %s", strerror(errno));
        if (waited > WAIT_MS) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            fail_msg("process %d did not end within %d ms", (int)pid, WAIT_MS);
        }
        usleep(2000);
    }
}

/* Runs argv to completion; stdout/stderr captured (caller frees). Returns the wait status. */
static int run_capture(const char *const argv[], const char *const env[], char **out,
                       char **err) {
    char op[PATH_MAX], ep[PATH_MAX];
    static int seq;
    fmt(op, sizeof op, "%s/cmd%d.out", g_root, ++seq);
    fmt(ep, sizeof ep, "%s/cmd%d.err", g_root, seq);
    int st = wait_for(spawn(argv, env, op, ep));
    char *o = slurp(op, NULL), *e = slurp(ep, NULL);
    assert_non_null(o);
    assert_non_null(e);
    if (out) { *out = o; own(o, free, o); } else free(o);
    if (err) { *err = e; own(e, free, e); } else free(e);
    return st;
}

/* A pipe whose write end survives exec (as "FD" text) and whose read end does not. */
typedef struct progress {
    int rd, wr;
    char wr_text[16];
    char buf[8192];
    size_t len;
} progress;

static void progress_open(progress *p) {
    int fds[2];
    assert_int_equal(0, pipe2(fds, O_CLOEXEC));
    p->rd = fds[0];
    p->wr = fds[1];
    assert_int_equal(0, fcntl(p->wr, F_SETFD, 0));
    fmt(p->wr_text, sizeof p->wr_text, "%d", p->wr);
    p->len = 0;
}

/* Call after spawning the writer(s): only they hold the write end then. */
static void progress_started(progress *p) {
    close(p->wr);
    p->wr = -1;
}

/* 1 with a line, 0 at EOF, -1 on timeout. */
static int progress_line(progress *p, char *out, size_t n, int timeout_ms) {
    for (;;) {
        char *nl = memchr(p->buf, '\n', p->len);
        if (nl) {
            size_t l = (size_t)(nl - p->buf);
            fmt(out, n, "%.*s", (int)l, p->buf);
            memmove(p->buf, nl + 1, p->len - l - 1);
            p->len -= l + 1;
            return 1;
        }
        struct pollfd pf = {p->rd, POLLIN, 0};
        int r = poll(&pf, 1, timeout_ms);
        if (r == 0) return -1;
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        ssize_t k = read(p->rd, p->buf + p->len, sizeof p->buf - p->len - 1);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return 0;
        p->len += (size_t)k;
    }
}

static void progress_close(progress *p) {
    if (p->wr >= 0) close(p->wr);
    close(p->rd);
}

/* ================================================================== model queries */

static const tp_process *proc_by_pid(const tp_run *run, long pid) {
    for (size_t i = 0; i < run->nprocs; i++)
        if (run->procs[i].hdr.pid == pid) return &run->procs[i];
    return NULL;
}

static size_t count_ranges(const tp_process *p, const char *name) {
    size_t n = 0;
    for (size_t t = 0; t < p->nthreads; t++)
        for (size_t k = 0; k < p->threads[t].nranges; k++)
            n += !strcmp(p->threads[t].ranges[k].name, name);
    return n;
}

static size_t count_counters(const tp_process *p, const char *name) {
    size_t n = 0;
    for (size_t t = 0; t < p->nthreads; t++)
        for (size_t k = 0; k < p->threads[t].ncounters; k++)
            n += !strcmp(p->threads[t].counters[k].name, name);
    return n;
}

/* Every range, mark and counter name of p starts with `prefix`; else the offender. */
static const char *name_not_prefixed(const tp_process *p, const char *prefix) {
    size_t l = strlen(prefix);
    for (size_t t = 0; t < p->nthreads; t++) {
        const tp_thread *th = &p->threads[t];
        for (size_t k = 0; k < th->nranges; k++)
            if (strncmp(th->ranges[k].name, prefix, l)) return th->ranges[k].name;
        for (size_t k = 0; k < th->nmarks; k++)
            if (strncmp(th->marks[k].name, prefix, l)) return th->marks[k].name;
        for (size_t k = 0; k < th->ncounters; k++)
            if (strncmp(th->counters[k].name, prefix, l)) return th->counters[k].name;
    }
    return NULL;
}

static size_t step_count(const tp_process *p) {
    tp_steps s;
    assert_int_equal(TPROF_OK, tp_find_steps(p, NULL, 1, &s));
    size_t n = s.source == TP_STEPS_API ? s.nsteps : 0;
    tp_steps_free(&s);
    return n;
}

static int has_damage(const tp_process *p, const char *needle) {
    for (size_t i = 0; i < p->ndamage; i++)
        if (strstr(p->damage[i], needle)) return 1;
    return 0;
}

static void load_ok(const char *dir, tp_run *run) {
    char err[PATH_MAX + 200] = "";
    int rc = tp_run_load(dir, run, err, sizeof err);
    tp_run *copy = malloc(sizeof *copy);
    assert_non_null(copy);
    *copy = *run; /* runs are not modified after loading: the copy frees the same memory */
    own(run, free_run_copy, copy);
    if (rc != TPROF_OK) fail_msg("tp_run_load(%s): %s (%s)", dir, tprof_strerror(rc), err);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The file of a `loop`/`handler` victim: returns M, the number of "iter" samples, after
 * checking that they are exactly 0..M-1 (no gap, no duplicate), that M >= `at_least`,
 * that "work" ranges number M or M+1 (the kill may fall between push and counter), that
 * nothing was dropped, and that the file is complete (`complete`). */
static size_t check_loop_file(const char *dir, unsigned long long at_least, int complete) {
    tp_run run;
    load_ok(dir, &run);
    assert_int_equal(1, run.nprocs);
    assert_int_equal(0, run.nerrors);
    const tp_process *p = &run.procs[0];
    size_t m = count_counters(p, "iter");
    double *v = malloc((m + 1) * sizeof *v);
    assert_non_null(v);
    own(v, free, v);
    size_t k = 0;
    for (size_t t = 0; t < p->nthreads; t++)
        for (size_t c = 0; c < p->threads[t].ncounters; c++)
            if (!strcmp(p->threads[t].counters[c].name, "iter"))
                v[k++] = p->threads[t].counters[c].value;
    qsort(v, m, sizeof *v, cmp_double);
    for (size_t i = 0; i < m; i++)
        if (v[i] != (double)i) fail_msg("iter samples: position %zu holds %.0f", i, v[i]);
    disown(v);
    if (m < at_least)
        fail_msg("the victim reported %llu flushed iterations, the file holds %zu", at_least, m);
    size_t work = count_ranges(p, "work");
    if (work != m && work != m + 1) fail_msg("%zu work ranges for %zu iter samples", work, m);
    assert_int_equal(0, p->dropped);
    if (p->complete != complete) {
        for (size_t i = 0; i < p->ndamage; i++) print_message("damage: %s\n", p->damage[i]);
        fail_msg("complete is %d, expected %d", p->complete, complete);
    }
    run_done(&run);
    return m;
}

/* ================================================================== JSON validity */

/* Length of the valid UTF-8 sequence at s (RFC 3629: no overlong, no surrogate, <= 10FFFF),
 * or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!len || len > n) return 0;
    for (size_t k = 1; k < len; k++)
        if ((s[k] & 0xC0) != 0x80) return 0;
    if (len == 2 && c < 0xC2) return 0;
    if (len == 3 && c == 0xE0 && s[1] < 0xA0) return 0;
    if (len == 3 && c == 0xED && s[1] >= 0xA0) return 0;
    if (len == 4 && c == 0xF0 && s[1] < 0x90) return 0;
    if (len == 4 && (c > 0xF4 || (c == 0xF4 && s[1] >= 0x90))) return 0;
    return len;
}

/* NULL when text is valid UTF-8 and no JSON string in it holds a raw control byte;
 * else what is wrong (and where, in *at). cJSON_Parse checks neither. */
static const char *json_text_problem(const char *text, size_t n, size_t *at) {
    const unsigned char *s = (const unsigned char *)text;
    int in_str = 0, esc = 0;
    for (size_t i = 0; i < n;) {
        if (s[i] >= 0x80) {
            size_t l = utf8_seq(s + i, n - i);
            if (!l) { *at = i; return "invalid UTF-8"; }
            i += l;
            esc = 0;
            continue;
        }
        unsigned c = s[i];
        if (in_str) {
            if (esc) esc = 0;
            else if (c == '\\') esc = 1;
            else if (c == '"') in_str = 0;
            else if (c < 0x20) { *at = i; return "raw control byte inside a string"; }
        } else if (c == '"') {
            in_str = 1;
        }
        i++;
    }
    return NULL;
}

/* Reads, checks and parses a JSON file the CLI wrote. */
static cJSON *load_json(const char *path) {
    size_t n = 0;
    char *text = slurp(path, &n);
    if (!text) fail_msg("cannot read %s: %s", path, strerror(errno));
    size_t at = 0;
    const char *bad = json_text_problem(text, n, &at);
    if (bad) {
        size_t from = at > 40 ? at - 40 : 0;
        print_message("%s: %s at byte %zu, near: %.*s\n", path, bad, at, 80, text + from);
        free(text);
        fail_msg("%s is not valid JSON text: %s at byte %zu", path, bad, at);
    }
    cJSON *j = cJSON_Parse(text);
    free(text);
    if (!j) fail_msg("%s does not parse as JSON", path);
    own(j, free_json, j);
    return j;
}

static const cJSON *jget(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v) fail_msg("JSON: no member \"%s\"", k);
    return v;
}
static double jnum(const cJSON *o, const char *k) {
    const cJSON *v = jget(o, k);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

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
    const char *argv[] = {TPROF_CLI, "run", "-o", dir, "--no-report", "--",
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

/* ================================================================== 4. damaged files */

static char g_base[PATH_MAX];          /* three healthy rank files, ranks 0..2 */
static char g_rankfile[3][PATH_MAX];

static void fixture(void) {
    if (g_base[0]) return;
    scratch(g_base, sizeof g_base, "gen");
    char envdir[PATH_MAX + 16], envrank[3][16];
    fmt(envdir, sizeof envdir, "TRAINPROF_DIR=%s", g_base);
    pid_t pids[3];
    char steps[16];
    fmt(steps, sizeof steps, "%d", GEN_STEPS);
    for (int r = 0; r < 3; r++) {
        fmt(envrank[r], sizeof envrank[r], "RANK=%d", r);
        const char *argv[] = {REL_VICTIM, "gen", steps, NULL};
        const char *env[] = {envdir, envrank[r], "WORLD_SIZE=3", "TRAINPROF_FLUSH_MS=5", NULL};
        pids[r] = spawn(argv, env, NULL, NULL);
    }
    for (int r = 0; r < 3; r++) {
        int st = wait_for(pids[r]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    tp_run run;
    load_ok(g_base, &run);
    assert_int_equal(3, run.nprocs);
    for (size_t i = 0; i < run.nprocs; i++) {
        const tp_process *p = &run.procs[i];
        assert_true(p->rank >= 0 && p->rank < 3);
        assert_int_equal(GEN_STEPS, step_count(p));
        assert_int_equal(1, p->complete);
        assert_int_equal(0, p->ndamage);
        fmt(g_rankfile[p->rank], PATH_MAX, "%s", p->path);
    }
    run_done(&run);
}

typedef struct chunk_pos {
    uint64_t off, len; /* header offset, payload bytes */
    uint32_t serial;
} chunk_pos;

/* The thread chunk (serial != 0) in the middle of the file, never the thread's first
 * (which defines its strings). */
static chunk_pos middle_thread_chunk(const char *path) {
    tprof_reader *r;
    char err[200];
    assert_int_equal(TPROF_OK, tprof__reader_open(path, &r, err, sizeof err));
    chunk_pos all[512];
    int n = 0;
    tprof_chunk c;
    while (tprof__reader_next(r, &c) && n < 512)
        if (c.thread_serial != 0) all[n++] = (chunk_pos){c.file_offset, c.len, c.thread_serial};
    assert_int_equal(0, tprof__reader_damage_count(r));
    tprof__reader_close(r);
    if (n < 4) fail_msg("%s has only %d thread chunks", path, n);
    return all[n / 2];
}

static void copy_range(const char *src, const char *dst, uint64_t cut_from, uint64_t cut_len) {
    size_t n;
    char *b = slurp(src, &n);
    assert_non_null(b);
    own(b, free, b);
    assert_true(cut_from + cut_len <= n);
    int fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal((ssize_t)cut_from, write(fd, b, cut_from));
    size_t rest = n - cut_from - cut_len;
    assert_int_equal((ssize_t)rest, write(fd, b + cut_from + cut_len, rest));
    close(fd);
    disown(b);
}

static void copy_file(const char *src, const char *dst) { copy_range(src, dst, 0, 0); }

static void copy_truncated(const char *src, const char *dst, uint64_t len) {
    size_t n;
    char *b = slurp(src, &n);
    assert_non_null(b);
    own(b, free, b);
    assert_true(len <= n);
    write_bytes(dst, b, len);
    disown(b);
}

static void copy_flipped(const char *src, const char *dst, uint64_t off, uint8_t mask) {
    size_t n;
    char *b = slurp(src, &n);
    assert_non_null(b);
    own(b, free, b);
    assert_true(off < n);
    b[off] = (char)(b[off] ^ mask);
    write_bytes(dst, b, n);
    disown(b);
}

static void path_in(char *out, size_t n, const char *dir, const char *name) {
    fmt(out, n, "%s/%s", dir, name);
}

/* Loads `damaged_dir` and `expected_dir` (same file names, rank 0 healthy in both) and
 * checks that every process holds the same events, ranges, counters and steps and is as
 * complete. The damaged run stays loaded in *keep for the caller's own checks. */
static void expect_same(const char *damaged_dir, const char *expected_dir, tp_run *keep) {
    tp_run exp;
    load_ok(expected_dir, &exp);
    load_ok(damaged_dir, keep);
    assert_int_equal(exp.nprocs, keep->nprocs);
    assert_int_equal(0, keep->nerrors);
    for (size_t i = 0; i < exp.nprocs; i++) {
        const tp_process *e = &exp.procs[i];
        const tp_process *d = proc_by_pid(keep, e->hdr.pid);
        assert_non_null(d);
        if (d->events != e->events)
            fail_msg("pid %d: %llu events in the damaged file, %llu without the bad chunk",
                     (int)e->hdr.pid, (unsigned long long)d->events,
                     (unsigned long long)e->events);
        assert_int_equal(e->rank, d->rank);
        assert_int_equal(step_count(e), step_count(d));
        static const char *const names[] = {"data_load", "forward", "matmul", "backward"};
        for (size_t k = 0; k < 4; k++)
            assert_int_equal(count_ranges(e, names[k]), count_ranges(d, names[k]));
        assert_int_equal(count_counters(e, "loss"), count_counters(d, "loss"));
        assert_int_equal(e->complete, d->complete);
    }
    run_done(&exp);
}

static void two_rank_dirs(const char *tag, char *dmg, char *exp, size_t n) {
    fixture();
    char t[64];
    fmt(t, sizeof t, "%s-dmg", tag);
    scratch(dmg, n, t);
    fmt(t, sizeof t, "%s-exp", tag);
    scratch(exp, n, t);
    char p[PATH_MAX + 300];
    path_in(p, sizeof p, dmg, base_name(g_rankfile[0]));
    copy_file(g_rankfile[0], p);
    path_in(p, sizeof p, exp, base_name(g_rankfile[0]));
    copy_file(g_rankfile[0], p);
}

static void print_damage(const tp_process *p) {
    for (size_t i = 0; i < p->ndamage; i++) print_message("  damage: %s\n", p->damage[i]);
}

/* Cut in the middle of a chunk's payload: everything before that chunk is kept, the file
 * is reported as torn and incomplete, rank 0 is untouched. */
static void test_damage_truncated(void **state) {
    (void)state;
    char dmg[PATH_MAX], exp[PATH_MAX], p[PATH_MAX + 300];
    two_rank_dirs("trunc", dmg, exp, sizeof dmg);
    chunk_pos c = middle_thread_chunk(g_rankfile[1]);
    const char *name = base_name(g_rankfile[1]);
    path_in(p, sizeof p, dmg, name);
    copy_truncated(g_rankfile[1], p, c.off + sizeof(tprof_chunk_header) + c.len / 2);
    path_in(p, sizeof p, exp, name);
    copy_truncated(g_rankfile[1], p, c.off);
    tp_run run;
    expect_same(dmg, exp, &run);
    const tp_process *r0 = NULL, *r1 = NULL;
    for (size_t i = 0; i < run.nprocs; i++)
        if (run.procs[i].rank == 0) r0 = &run.procs[i];
        else if (run.procs[i].rank == 1) r1 = &run.procs[i];
    assert_non_null(r0);
    assert_non_null(r1);
    assert_int_equal(GEN_STEPS, step_count(r0));
    assert_int_equal(0, r0->ndamage);
    assert_true(step_count(r1) < GEN_STEPS);
    assert_true(step_count(r1) >= 2);
    assert_int_equal(0, r1->complete);
    char want[64];
    fmt(want, sizeof want, "at byte %llu", (unsigned long long)c.off);
    print_damage(r1);
    assert_true(has_damage(r1, "torn tail"));
    assert_true(has_damage(r1, want));
    assert_true(has_damage(r1, "no end record"));
    run_done(&run);
}

/* One flipped byte inside a chunk payload loses that chunk only: the reader resumes at
 * the next chunk, so later steps and the end record are still read. */
static void test_damage_flipped_payload(void **state) {
    (void)state;
    char dmg[PATH_MAX], exp[PATH_MAX], p[PATH_MAX + 300];
    two_rank_dirs("flip", dmg, exp, sizeof dmg);
    chunk_pos c = middle_thread_chunk(g_rankfile[1]);
    const char *name = base_name(g_rankfile[1]);
    path_in(p, sizeof p, dmg, name);
    copy_flipped(g_rankfile[1], p, c.off + sizeof(tprof_chunk_header) + c.len / 2 + 3, 0x5a);
    path_in(p, sizeof p, exp, name);
    copy_range(g_rankfile[1], p, c.off, sizeof(tprof_chunk_header) + c.len);
    tp_run run;
    expect_same(dmg, exp, &run);
    const tp_process *r1 = NULL;
    for (size_t i = 0; i < run.nprocs; i++)
        if (run.procs[i].rank == 1) r1 = &run.procs[i];
    assert_non_null(r1);
    print_damage(r1);
    assert_int_equal(1, r1->complete);
    assert_int_equal(1, r1->ndamage);
    char want[96];
    fmt(want, sizeof want, "chunk checksum mismatch at byte %llu", (unsigned long long)c.off);
    assert_true(has_damage(r1, want));
    run_done(&run);
}

/* A damaged chunk header in the middle of a file (bad magic; a length that runs past the
 * end) is one damaged chunk too: the reader must scan on to the next valid chunk rather
 * than stop as if the file had been torn there. */
static void damaged_header(const char *tag, uint64_t field_off, uint8_t mask,
                           const char *what) {
    char dmg[PATH_MAX], exp[PATH_MAX], p[PATH_MAX + 300];
    two_rank_dirs(tag, dmg, exp, sizeof dmg);
    chunk_pos c = middle_thread_chunk(g_rankfile[1]);
    const char *name = base_name(g_rankfile[1]);
    path_in(p, sizeof p, dmg, name);
    copy_flipped(g_rankfile[1], p, c.off + field_off, mask);
    path_in(p, sizeof p, exp, name);
    copy_range(g_rankfile[1], p, c.off, sizeof(tprof_chunk_header) + c.len);
    tp_run run;
    load_ok(dmg, &run);
    for (size_t i = 0; i < run.nprocs; i++)
        if (run.procs[i].rank == 1) print_damage(&run.procs[i]);
    run_done(&run);
    expect_same(dmg, exp, &run);
    const tp_process *r1 = NULL;
    for (size_t i = 0; i < run.nprocs; i++)
        if (run.procs[i].rank == 1) r1 = &run.procs[i];
    assert_non_null(r1);
    assert_int_equal(1, r1->complete);
    assert_true(has_damage(r1, what));
    run_done(&run);
}

static void test_damage_chunk_magic(void **state) {
    (void)state;
    damaged_header("cmagic", offsetof(tprof_chunk_header, magic), 0x01, "bad chunk magic");
}

static void test_damage_chunk_length(void **state) {
    (void)state;
    /* the high byte of payload_bytes: the chunk now claims ~1 GiB */
    damaged_header("clen", offsetof(tprof_chunk_header, payload_bytes) + 3, 0x40, "at byte");
}

static void make_random(const char *path, size_t n) {
    uint8_t *b = malloc(n);
    assert_non_null(b);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b[i] = (uint8_t)x;
    }
    write_bytes(path, b, n);
    free(b);
}

/* Files that cannot be read at all are named with the reason; the healthy rank is
 * reported in full. */
static void test_damage_unreadable(void **state) {
    (void)state;
    fixture();
    char dir[PATH_MAX], p[PATH_MAX + 300];
    scratch(dir, sizeof dir, "unreadable");
    path_in(p, sizeof p, dir, base_name(g_rankfile[0]));
    copy_file(g_rankfile[0], p);
    struct { const char *name, *reason; } bad[] = {
        {"badmagic.tprof", "bad magic"},
        {"empty.tprof", "too short"},
        {"random.tprof", "bad magic"},
        {"headercut.tprof", "too short"},
        {"badcrc.tprof", "header checksum mismatch"},
    };
    path_in(p, sizeof p, dir, bad[0].name);
    copy_file(g_rankfile[1], p);
    int fd = open(p, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(8, pwrite(fd, "NOTPROF!", 8, 0));
    close(fd);
    path_in(p, sizeof p, dir, bad[1].name);
    write_bytes(p, "", 0);
    path_in(p, sizeof p, dir, bad[2].name);
    make_random(p, 8192);
    path_in(p, sizeof p, dir, bad[3].name);
    copy_truncated(g_rankfile[1], p, 100);
    path_in(p, sizeof p, dir, bad[4].name);
    copy_flipped(g_rankfile[1], p, offsetof(tprof_file_header, host) + 1, 0x20);

    tp_run run;
    load_ok(dir, &run);
    assert_int_equal(1, run.nprocs);
    assert_int_equal(0, run.procs[0].rank);
    assert_int_equal(GEN_STEPS, step_count(&run.procs[0]));
    assert_int_equal(0, run.procs[0].ndamage);
    assert_int_equal(5, run.nerrors);
    for (size_t i = 0; i < 5; i++) {
        path_in(p, sizeof p, dir, bad[i].name);
        int found = 0;
        for (size_t k = 0; k < run.nerrors; k++)
            found |= strstr(run.errors[k], p) && strstr(run.errors[k], bad[i].reason);
        if (!found) {
            for (size_t k = 0; k < run.nerrors; k++) print_message("error: %s\n", run.errors[k]);
            fail_msg("no error line names %s with '%s'", p, bad[i].reason);
        }
    }
    run_done(&run);

    /* with no readable file left, report fails and names every file */
    path_in(p, sizeof p, dir, base_name(g_rankfile[0]));
    assert_int_equal(0, unlink(p));
    char *out, *err;
    const char *argv[] = {TPROF_CLI, "report", dir, NULL};
    int st = run_capture(argv, NULL, &out, &err);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 0);
    for (size_t i = 0; i < 5; i++)
        if (!strstr(err, bad[i].name)) fail_msg("stderr does not name %s: %s", bad[i].name, err);
    assert_string_equal("", out);
    str_done(out);
    str_done(err);
}

static const cJSON *report_rank(const cJSON *rep, int rank) {
    const cJSON *r;
    cJSON_ArrayForEach(r, jget(rep, "ranks"))
        if ((int)jnum(r, "rank") == rank) return r;
    fail_msg("report.json has no rank %d", rank);
    return NULL;
}

static const cJSON *report_process(const cJSON *rep, const char *file_base) {
    const cJSON *p;
    cJSON_ArrayForEach(p, jget(rep, "processes")) {
        const cJSON *f = jget(p, "file");
        if (cJSON_IsString(f) && !strcmp(base_name(f->valuestring), file_base)) return p;
    }
    fail_msg("report.json has no process for %s", file_base);
    return NULL;
}

static int json_array_has(const cJSON *arr, const char *a, const char *b) {
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
        if (cJSON_IsString(e) && strstr(e->valuestring, a) && (!b || strstr(e->valuestring, b)))
            return 1;
    return 0;
}

/* Everything at once, through the command line: the JSON and text reports name each
 * damaged file and its damage, and still report every rank and step that survived. */
static void test_damage_report_cli(void **state) {
    (void)state;
    fixture();
    char dir[PATH_MAX], exp[PATH_MAX], p[PATH_MAX + 300];
    scratch(dir, sizeof dir, "alldamage");
    scratch(exp, sizeof exp, "alldamage-exp");
    const char *n0 = base_name(g_rankfile[0]), *n1 = base_name(g_rankfile[1]),
               *n2 = base_name(g_rankfile[2]);
    path_in(p, sizeof p, dir, n0);
    copy_file(g_rankfile[0], p);
    chunk_pos c1 = middle_thread_chunk(g_rankfile[1]);
    path_in(p, sizeof p, dir, n1);
    copy_truncated(g_rankfile[1], p, c1.off + sizeof(tprof_chunk_header) + c1.len / 2);
    path_in(p, sizeof p, exp, n1);
    copy_truncated(g_rankfile[1], p, c1.off);
    chunk_pos c2 = middle_thread_chunk(g_rankfile[2]);
    path_in(p, sizeof p, dir, n2);
    copy_flipped(g_rankfile[2], p, c2.off + sizeof(tprof_chunk_header) + c2.len / 2, 0x80);
    path_in(p, sizeof p, exp, n2);
    copy_range(g_rankfile[2], p, c2.off, sizeof(tprof_chunk_header) + c2.len);
    path_in(p, sizeof p, dir, "empty.tprof");
    write_bytes(p, "", 0);
    path_in(p, sizeof p, dir, "random.tprof");
    make_random(p, 4096);

    tp_run e;
    load_ok(exp, &e);
    assert_int_equal(2, e.nprocs);
    size_t steps1 = 0, steps2 = 0;
    uint64_t ev1 = 0, ev2 = 0;
    for (size_t i = 0; i < e.nprocs; i++) {
        if (e.procs[i].rank == 1) { steps1 = step_count(&e.procs[i]); ev1 = e.procs[i].events; }
        if (e.procs[i].rank == 2) { steps2 = step_count(&e.procs[i]); ev2 = e.procs[i].events; }
    }
    run_done(&e);

    char json[PATH_MAX + 16];
    fmt(json, sizeof json, "%s/report.json", exp);
    const char *argv[] = {TPROF_CLI, "report", dir, "--format", "json", "-o", json, NULL};
    char *out, *err;
    int st = run_capture(argv, NULL, &out, &err);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_msg("report failed (0x%x): %s", st, err);
    str_done(out);
    str_done(err);
    cJSON *rep = load_json(json);
    const cJSON *run = jget(rep, "run");
    assert_int_equal(3, (int)jnum(run, "processes"));
    assert_int_equal(3, (int)jnum(run, "ranks"));
    assert_int_equal(3, cJSON_GetArraySize(jget(rep, "ranks")));
    /* steps per rank: API steps minus the warm-up step */
    const cJSON *s0 = jget(report_rank(rep, 0), "steps");
    const cJSON *s1 = jget(report_rank(rep, 1), "steps");
    const cJSON *s2 = jget(report_rank(rep, 2), "steps");
    assert_int_equal(GEN_STEPS, (int)jnum(s0, "count"));
    assert_int_equal((int)steps1, (int)jnum(s1, "count"));
    assert_int_equal((int)steps2, (int)jnum(s2, "count"));
    assert_int_equal(GEN_STEPS - 1, (int)jnum(s0, "measured"));
    const cJSON *p0 = report_process(rep, n0), *p1 = report_process(rep, n1),
                *p2 = report_process(rep, n2);
    assert_true(cJSON_IsTrue(jget(p0, "complete")));
    assert_int_equal(0, cJSON_GetArraySize(jget(p0, "damage")));
    assert_true(cJSON_IsFalse(jget(p1, "complete")));
    assert_true(json_array_has(jget(p1, "damage"), "torn tail", NULL));
    assert_true(cJSON_IsTrue(jget(p2, "complete")));
    assert_true(json_array_has(jget(p2, "damage"), "chunk checksum mismatch", NULL));
    assert_int_equal((int)ev1, (int)jnum(p1, "events"));
    assert_int_equal((int)ev2, (int)jnum(p2, "events"));
    const cJSON *un = jget(rep, "unreadable_files");
    assert_int_equal(2, cJSON_GetArraySize(un));
    assert_true(json_array_has(un, "empty.tprof", "too short"));
    assert_true(json_array_has(un, "random.tprof", "bad magic"));
    json_done(rep);

    /* the text report names the damaged and unreadable files */
    const char *targv[] = {TPROF_CLI, "report", dir, NULL};
    st = run_capture(targv, NULL, &out, &err);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char want[512];
    fmt(want, sizeof want, "damage in %s: torn tail", n1);
    if (!strstr(out, want)) fail_msg("text report lacks '%s':\n%s", want, out);
    fmt(want, sizeof want, "damage in %s: chunk checksum mismatch at byte %llu", n2,
             (unsigned long long)c2.off);
    if (!strstr(out, want)) fail_msg("text report lacks '%s':\n%s", want, out);
    fmt(want, sizeof want, "unreadable: %s/empty.tprof", dir);
    if (!strstr(out, want)) fail_msg("text report lacks '%s':\n%s", want, out);
    fmt(want, sizeof want, "unreadable: %s/random.tprof", dir);
    if (!strstr(out, want)) fail_msg("text report lacks '%s':\n%s", want, out);
    assert_non_null(strstr(out, "rank 0"));
    assert_non_null(strstr(out, "rank 1"));
    assert_non_null(strstr(out, "rank 2"));
    str_done(out);
    str_done(err);
}

/* ================================================================== 6. hostile names */

/* What the model must make of each name rel_victim records (same order): bytes that are
 * not valid UTF-8 become U+FFFD, one per byte; everything else is kept as is. */
#define FFFD "\xef\xbf\xbd"
static const char *const names_expected[] = {
    "quote\"back\\slash",
    "new\nline\ttab\rcr",
    "ctl\x01\x02\x1b[31m\x7f",
    "bad" FFFD FFFD " utf8",
    "trunc" FFFD FFFD,
    "overlong" FFFD FFFD,
    "lead" FFFD "(",
    "ok \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
};
#define NNAMES (sizeof names_expected / sizeof *names_expected)

static void run_names_victim(const char *dir) {
    char envdir[PATH_MAX + 16];
    fmt(envdir, sizeof envdir, "TRAINPROF_DIR=%s", dir);
    const char *argv[] = {REL_VICTIM, "names", NULL};
    const char *env[] = {envdir, NULL};
    int st = run_capture(argv, env, NULL, NULL);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void check_names_report(const char *json_path) {
    cJSON *rep = load_json(json_path);
    const cJSON *r0 = report_rank(rep, 0);
    const cJSON *rows = jget(jget(r0, "ranges"), "top_inclusive");
    for (size_t i = 0; i < NNAMES; i++) {
        const cJSON *row, *hit = NULL;
        cJSON_ArrayForEach(row, rows) {
            const cJSON *n = jget(row, "name");
            if (cJSON_IsString(n) && !strcmp(n->valuestring, names_expected[i])) hit = row;
        }
        if (!hit) fail_msg("report.json lacks range name #%zu", i);
        assert_int_equal(3, (int)jnum(hit, "count"));
    }
    json_done(rep);
}

static void test_hostile_names(void **state) {
    (void)state;
    char dir[PATH_MAX];
    scratch(dir, sizeof dir, "names");
    run_names_victim(dir);

    /* the model: every name, as range, mark and counter, made valid UTF-8 */
    tp_run run;
    load_ok(dir, &run);
    assert_int_equal(1, run.nprocs);
    const tp_process *p = &run.procs[0];
    for (size_t i = 0; i < NNAMES; i++) {
        assert_int_equal(3, count_ranges(p, names_expected[i]));
        assert_int_equal(1, count_counters(p, names_expected[i]));
        size_t marks = 0;
        for (size_t t = 0; t < p->nthreads; t++)
            for (size_t k = 0; k < p->threads[t].nmarks; k++)
                marks += !strcmp(p->threads[t].marks[k].name, names_expected[i]);
        assert_int_equal(1, marks);
    }
    run_done(&run);

    char json[PATH_MAX + 16];
    fmt(json, sizeof json, "%s/r.json", dir);
    const char *argv[] = {TPROF_CLI, "report", dir, "--format", "json", "-o", json, NULL};
    int st = run_capture(argv, NULL, NULL, NULL);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    check_names_report(json);

    /* the text report: valid UTF-8, control bytes shown as '?', one name per line */
    const char *targv[] = {TPROF_CLI, "report", dir, NULL};
    char *out;
    st = run_capture(targv, NULL, &out, NULL);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    const unsigned char *s = (const unsigned char *)out;
    for (size_t i = 0; s[i];) {
        if (s[i] >= 0x80) {
            size_t l = utf8_seq(s + i, strlen(out) - i);
            if (!l) fail_msg("text report: invalid UTF-8 at byte %zu", i);
            i += l;
            continue;
        }
        if ((s[i] < 0x20 && s[i] != '\n') || s[i] == 0x7f)
            fail_msg("text report: raw control byte 0x%02x at byte %zu", s[i], i);
        i++;
    }
    assert_non_null(strstr(out, "new?line?tab?cr"));
    assert_non_null(strstr(out, "quote\"back\\slash"));
    assert_non_null(strstr(out, "lead" FFFD "("));
    str_done(out);
}

/* The same through `trainprof run` into a directory whose name is itself hostile (it
 * becomes the run id): report.json must still be valid UTF-8 JSON. */
static void test_hostile_run_dir(void **state) {
    (void)state;
    char parent[PATH_MAX], dir[PATH_MAX + 32];
    scratch(parent, sizeof parent, "hostile-dir");
    fmt(dir, sizeof dir, "%s/run-\xff\xfe-\x01-\"q\"", parent);
    const char *argv[] = {TPROF_CLI, "run", "-o", dir, "--no-report", "--", REL_VICTIM, "names",
                          NULL};
    char *err;
    int st = run_capture(argv, NULL, NULL, &err);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_msg("trainprof run: 0x%x %s", st, err);
    str_done(err);
    char json[PATH_MAX + 64];
    fmt(json, sizeof json, "%s/report.json", dir);
    check_names_report(json);
}

/* ================================================================== main */

static int group_setup(void **state) {
    (void)state;
    const char *t = getenv("TPROF_TEST_TMP");
    fmt(g_root, sizeof g_root, "%s/reliability-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(g_root)) {
        fprintf(stderr, "mkdtemp %s: %s\n", g_root, strerror(errno));
        return -1;
    }
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    if (getenv("REL_KEEP")) {
        fprintf(stderr, "scratch kept in %s\n", g_root);
        return 0;
    }
    nftw(g_root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

int main(void) {
    /* this process never records: make sure no lazy session could start in it */
    unsetenv("TRAINPROF_DIR");
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_sigterm_direct, release_all),
        cmocka_unit_test_teardown(test_sigint_direct, release_all),
        cmocka_unit_test_teardown(test_sigterm_in_sleep, release_all),
        cmocka_unit_test_teardown(test_own_handler, release_all),
        cmocka_unit_test_teardown(test_sigterm_via_cli, release_all),
        cmocka_unit_test_teardown(test_sigint_via_cli, release_all),
        cmocka_unit_test_teardown(test_fork, release_all),
        cmocka_unit_test_teardown(test_fork_exec, release_all),
        cmocka_unit_test_teardown(test_fork_idle, release_all),
        cmocka_unit_test_teardown(test_fork_record_exec, release_all),
        cmocka_unit_test_teardown(test_fork_after_init, release_all),
        cmocka_unit_test_teardown(test_damage_truncated, release_all),
        cmocka_unit_test_teardown(test_damage_flipped_payload, release_all),
        cmocka_unit_test_teardown(test_damage_chunk_magic, release_all),
        cmocka_unit_test_teardown(test_damage_chunk_length, release_all),
        cmocka_unit_test_teardown(test_damage_unreadable, release_all),
        cmocka_unit_test_teardown(test_damage_report_cli, release_all),
        cmocka_unit_test_teardown(test_hostile_names, release_all),
        cmocka_unit_test_teardown(test_hostile_run_dir, release_all),
    };
    return cmocka_run_group_tests_name("reliability", tests, group_setup, group_teardown);
}
