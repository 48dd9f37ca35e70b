/*
 * test_jobs.c — the report's job pool (jobs.h): every job runs once, and with no thread
 * count given the pool starts one thread per CPU the process may run on (its affinity), not
 * per CPU online: a process pinned to one CPU (taskset, a Slurm task of one CPU) runs every
 * job on the calling thread, where the online count would put several threads on that CPU.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "analysis/jobs.h"

#define NJOBS 200

typedef struct ran {
    pthread_mutex_t lock;
    int times[NJOBS];
    pthread_t by[NJOBS];
} ran;

/* A job of 1 ms, asleep: every thread started gets some of the jobs, even on one CPU */
static void run_job(void *ctx, size_t i) {
    ran *r = ctx;
    nanosleep(&(struct timespec){0, 1000000}, NULL);
    pthread_mutex_lock(&r->lock);
    r->times[i]++;
    r->by[i] = pthread_self();
    pthread_mutex_unlock(&r->lock);
}

/* Runs NJOBS jobs with `threads`; how many distinct threads ran them. */
static int threads_used(int threads) {
    static ran r;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.lock, NULL);
    tp_jobs j = {NJOBS, threads, 1u << 30, NULL, run_job, &r};
    tp_jobs_run(&j);
    pthread_mutex_destroy(&r.lock);
    int distinct = 0;
    for (size_t i = 0; i < NJOBS; i++) {
        assert_int_equal(r.times[i], 1);
        int seen = 0;
        for (size_t k = 0; k < i && !seen; k++) seen = pthread_equal(r.by[k], r.by[i]);
        distinct += !seen;
    }
    return distinct;
}

static void test_each_job_once(void **state) {
    (void)state;
    assert_int_equal(threads_used(1), 1);
    assert_in_range(threads_used(4), 1, 4);
}

static void test_affinity_bounds_threads(void **state) {
    (void)state;
    cpu_set_t was, one;
    assert_int_equal(sched_getaffinity(0, sizeof was, &was), 0);
    int cpu = -1;
    for (int c = 0; c < CPU_SETSIZE && cpu < 0; c++)
        if (CPU_ISSET(c, &was)) cpu = c;
    assert_true(cpu >= 0);
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    int used = threads_used(0);
    assert_int_equal(sched_setaffinity(0, sizeof was, &was), 0);
    /* one CPU allowed: the calling thread alone, however many CPUs are online */
    assert_int_equal(used, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_job_once),
        cmocka_unit_test(test_affinity_bounds_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
