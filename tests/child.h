/*
 * child.h — the harness of the tests that record in a forked child and assert in the parent
 * on the loaded run (one session per process is the library's rule). Include it after
 * <cmocka.h>, "analysis/model.h" and "trainprof.h"; define CHILD_PREFIX (the temporary
 * directory's prefix) first.
 *
 *   fresh_dir(tag)   a new empty directory $TPROF_TEST_TMP/<prefix>-<tag>-XXXXXX in g_dir
 *   start_session()  in the child: a session into g_dir with an 8 MiB ring per thread (tests
 *                    count records exactly), no process or NVML sampler
 *   CHECK(cond, n)   in the child: on failure print the condition and _exit(n)
 *   in_child(body)   fork, run body in the child, then tprof_shutdown (must succeed); the
 *                    parent asserts the child exited 0
 *   load(run)        the parent: load g_dir, which must hold exactly one process
 *   nth_range(p, name, i) the parent: the i-th range called name on any thread of p, or NULL
 */
#ifndef TPROF_TEST_CHILD_H
#define TPROF_TEST_CHILD_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CHILD_PREFIX
#define CHILD_PREFIX "test"
#endif

#define CHILD_UNUSED __attribute__((unused))

static char g_dir[512];

static CHILD_UNUSED void fresh_dir(const char *tag) {
    const char *base = getenv("TPROF_TEST_TMP");
    snprintf(g_dir, sizeof g_dir, "%s/" CHILD_PREFIX "-%s-XXXXXX", base && *base ? base : "/tmp",
             tag);
    assert_non_null(mkdtemp(g_dir));
}

static CHILD_UNUSED void start_session(void) {
    tprof_config c;
    tprof_config_init(&c);
    c.output_dir = g_dir;
    c.ring_bytes = 8u << 20;
    c.sample_hz = 0;
    c.nvml_hz = 0;
    if (tprof_init(&c) != TPROF_OK) _exit(90);
}

/* Child exit codes name the check that failed (the parent prints them). */
#define CHECK(cond, code)                                                           \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "child check failed: %s (line %d)\n", #cond, __LINE__); \
            _exit(code);                                                            \
        }                                                                           \
    } while (0)

static CHILD_UNUSED void in_child(void (*body)(void)) {
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        body();
        _exit(tprof_shutdown() == TPROF_OK ? 0 : 91);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

static CHILD_UNUSED void load(tp_run *run) {
    char err[256];
    int rc = tp_run_load(g_dir, run, err, sizeof err);
    if (rc) fprintf(stderr, "load: %s\n", err);
    assert_int_equal(rc, TPROF_OK);
    assert_int_equal(run->nprocs, 1);
}

static CHILD_UNUSED const tp_range *nth_range(const tp_process *p, const char *name, int i) {
    for (size_t t = 0; t < p->nthreads; t++)
        for (size_t k = 0; k < p->threads[t].nranges; k++)
            if (!strcmp(p->threads[t].ranges[k].name, name) && i-- == 0)
                return &p->threads[t].ranges[k];
    return NULL;
}

#endif /* TPROF_TEST_CHILD_H */
