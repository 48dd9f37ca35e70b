/*
 * rel_common.c — what the reliability tests share (rel_common.h): scratch directories,
 * resources released by the per-test teardown, the victim processes and their progress
 * pipe, queries on a loaded run, JSON checks, and the group setup and teardown.
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
#include <unistd.h>

#include <cjson/cJSON.h>

#include "analysis/steps.h"
#include "fmt.h"
#include "rel_common.h"
#include "spawn.h"
#include "trainprof.h"

extern char **environ;
char g_root[PATH_MAX];

/* ================================================================== small helpers */

void scratch(char *out, size_t n, const char *tag) {
    fmt(out, n, "%s/%s-XXXXXX", g_root, tag);
    assert_non_null(mkdtemp(out));
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)st;
    (void)flag;
    (void)f;
    return remove(p);
}

char *slurp(const char *path, size_t *len) {
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

void write_bytes(const char *path, const void *data, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal((ssize_t)n, write(fd, data, n));
    close(fd);
}

const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* Names of the *.tprof files of dir (count returned, up to max). */
int tprof_files(const char *dir, char names[][256], int max) {
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

void own(const void *key, void (*fn)(void *), void *arg) {
    if (g_nowned == sizeof g_owned / sizeof *g_owned) {
        fprintf(stderr, "too many owned resources\n");
        abort();
    }
    g_owned[g_nowned++] = (owned){key, fn, arg};
}

void disown(const void *key) {
    for (size_t i = g_nowned; i-- > 0;)
        if (g_owned[i].key == key) {
            owned o = g_owned[i];
            g_owned[i] = g_owned[--g_nowned];
            o.fn(o.arg);
            return;
        }
}

int release_all(void **state) {
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
void run_done(tp_run *run) {
    disown(run);
    memset(run, 0, sizeof *run);
}
void json_done(cJSON *j) { disown(j); }
void str_done(char *s) { disown(s); }

/* ================================================================== processes */

/* The child gets default SIGTERM/SIGINT, an empty signal mask, no TRAINPROF_* or
 * launcher rank variables from the outside, plus `env` (NAME=VALUE, NULL-terminated). */
pid_t spawn(const char *const argv[], const char *const env[], const char *out_path,
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
    spawn_exec(argv, out_path, err_path);
}

int wait_for(pid_t pid) {
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
int run_capture(const char *const argv[], const char *const env[], char **out,
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

void progress_open(progress *p) {
    int fds[2];
    assert_int_equal(0, pipe2(fds, O_CLOEXEC));
    p->rd = fds[0];
    p->wr = fds[1];
    assert_int_equal(0, fcntl(p->wr, F_SETFD, 0));
    fmt(p->wr_text, sizeof p->wr_text, "%d", p->wr);
    p->len = 0;
}

/* Call after spawning the writer(s): only they hold the write end then. */
void progress_started(progress *p) {
    close(p->wr);
    p->wr = -1;
}

/* 1 with a line, 0 at EOF, -1 on timeout. */
int progress_line(progress *p, char *out, size_t n, int timeout_ms) {
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

void progress_close(progress *p) {
    if (p->wr >= 0) close(p->wr);
    close(p->rd);
}

/* ================================================================== model queries */

const tp_process *proc_by_pid(const tp_run *run, long pid) {
    for (size_t i = 0; i < run->nprocs; i++)
        if (run->procs[i].hdr.pid == pid) return &run->procs[i];
    return NULL;
}

size_t count_ranges(const tp_process *p, const char *name) {
    size_t n = 0;
    for (size_t t = 0; t < p->nthreads; t++)
        for (size_t k = 0; k < p->threads[t].nranges; k++)
            n += !strcmp(p->threads[t].ranges[k].name, name);
    return n;
}

size_t count_counters(const tp_process *p, const char *name) {
    size_t n = 0;
    for (size_t t = 0; t < p->nthreads; t++)
        for (size_t k = 0; k < p->threads[t].ncounters; k++)
            n += !strcmp(p->threads[t].counters[k].name, name);
    return n;
}

/* Every range, mark and counter name of p starts with `prefix`; else the offender. */
const char *name_not_prefixed(const tp_process *p, const char *prefix) {
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

size_t step_count(const tp_process *p) {
    tp_steps s;
    assert_int_equal(TPROF_OK, tp_find_steps(p, NULL, 1, &s));
    size_t n = s.source == TP_STEPS_API ? s.nsteps : 0;
    tp_steps_free(&s);
    return n;
}

int has_damage(const tp_process *p, const char *needle) {
    for (size_t i = 0; i < p->ndamage; i++)
        if (strstr(p->damage[i], needle)) return 1;
    return 0;
}

void load_ok(const char *dir, tp_run *run) {
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
size_t check_loop_file(const char *dir, unsigned long long at_least, int complete) {
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
size_t utf8_seq(const unsigned char *s, size_t n) {
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
cJSON *load_json(const char *path) {
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

const cJSON *jget(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v) fail_msg("JSON: no member \"%s\"", k);
    return v;
}
double jnum(const cJSON *o, const char *k) {
    const cJSON *v = jget(o, k);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

/* ================================================================== the group */

int rel_group_setup(void **state) {
    (void)state;
    const char *t = getenv("TPROF_TEST_TMP");
    fmt(g_root, sizeof g_root, "%s/reliability-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(g_root)) {
        fprintf(stderr, "mkdtemp %s: %s\n", g_root, strerror(errno));
        return -1;
    }
    return 0;
}

int rel_group_teardown(void **state) {
    (void)state;
    if (getenv("REL_KEEP")) {
        fprintf(stderr, "scratch kept in %s\n", g_root);
        return 0;
    }
    nftw(g_root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}
