/*
 * test_exit.c — processes that leave through _exit or exec keep every event: the file is
 * complete (end record) with all ranges; a vfork()ed child's exec does not end its
 * parent's session.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "analysis/model.h"

static size_t count(const tp_process *p, const char *name) {
    size_t n = 0;
    for (size_t i = 0; i < p->nthreads; i++)
        for (size_t k = 0; k < p->threads[i].nranges; k++)
            n += !strcmp(p->threads[i].ranges[k].name, name);
    return n;
}

static void run_mode(const char *mode, size_t before, size_t after) {
    char dir[512];
    const char *base = getenv("TPROF_TEST_TMP");
    snprintf(dir, sizeof dir, "%s/exit-%s-XXXXXX", base && *base ? base : "/tmp",
             mode + (*mode == '_'));
    assert_non_null(mkdtemp(dir));
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TRAINPROF_DIR", dir, 1);
        setenv("TRAINPROF_SAMPLE_HZ", "0", 1);
        setenv("TRAINPROF_NVML_HZ", "0", 1);
        execl(EXIT_PROG, EXIT_PROG, mode, (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    tp_run run;
    char err[256];
    assert_int_equal(tp_run_load(dir, &run, err, sizeof err), 0);
    assert_int_equal(run.nprocs, 1); /* /bin/true records nothing: no file */
    const tp_process *p = &run.procs[0];
    assert_true(p->complete);
    assert_int_equal(count(p, "before"), before);
    assert_int_equal(count(p, "after"), after);
    assert_int_equal(p->dropped, 0);
    tp_run_free(&run);
}

static void test__exit(void **state) { (void)state; run_mode("_exit", 20, 0); }
static void test_exec(void **state) { (void)state; run_mode("exec", 20, 0); }
static void test_vfork_exec(void **state) { (void)state; run_mode("vfork", 20, 20); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test__exit),
        cmocka_unit_test(test_exec),
        cmocka_unit_test(test_vfork_exec),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
