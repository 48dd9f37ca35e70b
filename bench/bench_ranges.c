/*
 * bench_ranges.c — cost of a range push+pop through the public C API.
 *
 * Measures tprof_range_push("forward"); tprof_range_pop(); against a floor measured in the
 * same run on the same thread: two clock_gettime(CLOCK_MONOTONIC) calls, the clock reads a
 * push+pop cannot avoid. Both are timed with per-thread CPU time
 * (CLOCK_THREAD_CPUTIME_ID), so that at 8 threads on a 2-core machine the time a thread
 * spends descheduled is not counted. Each configuration runs in its own forked child (one
 * session per process): 1 thread and 8 threads with an explicit tprof_init session and a
 * large ring, in batches that fit the ring (40 bytes per pair once the name is interned)
 * with tprof_flush() between batches outside the timed region, so nothing is dropped; the
 * rank file is read back with the project's reader to check that every pair was recorded
 * and the drop count is 0. Two more children measure the run-time-disabled API (tprof_init
 * with enabled = 0, and the lazy start with TRAINPROF_DIR unset), next to an empty call into
 * a shared library of our own (libtprof_bench_stub.so), what any out-of-line call costs.
 * Each figure is the median over repetitions (and threads) of one batch's CPU time divided
 * by its size.
 *
 * Targets: enabled push+pop <= 2x the floor at 1 and 8 threads; disabled < 2 ns per call.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "bench_stub.h"
#include "range_harness.h"
#include "trainprof.h"

#define REPS 9

static void __attribute__((noinline)) api_loop(long n) {
    for (long i = 0; i < n; i++) {
        tprof_range_push("forward");
        tprof_range_pop();
        __asm__ volatile("" ::: "memory");
    }
}

/* The same shape with an empty function in another shared library: the PLT call, call and
 * return that every out-of-line API pays, enabled or not. */
static void __attribute__((noinline)) stub_loop(long n) {
    for (long i = 0; i < n; i++) {
        tprof_bench_stub_call("forward");
        tprof_bench_stub_call(NULL);
        __asm__ volatile("" ::: "memory");
    }
}

/* ------------------------------------------------------------------ enabled session */

static int run_enabled(const char *dir, int nthreads, size_t ring_bytes, long batch,
                       int warmup) {
    tprof_config cfg;
    tprof_config_init(&cfg);
    cfg.output_dir = dir;
    cfg.ring_bytes = ring_bytes;
    int rc = tprof_init(&cfg);
    if (rc != TPROF_OK) {
        fprintf(stderr, "bench_ranges: tprof_init: %s\n", tprof_strerror(rc));
        return 2;
    }
    const rh_ops ops = {api_loop, tprof_flush};
    rh_result res;
    if (rh_run(nthreads, batch, warmup, &ops, &res) != 0) return 2;
    char path[4096] = "";
    const char *op = tprof_output_path();
    if (op) snprintf(path, sizeof path, "%s", op);
    tprof_shutdown();
    return rh_report("API", nthreads, ring_bytes, batch, &res, path, 2.0);
}

/* ------------------------------------------------------------------ disabled session */

static int run_disabled(const char *dir, int lazy) {
    if (lazy) {
        unsetenv("TRAINPROF_DIR");
    } else {
        tprof_config cfg;
        tprof_config_init(&cfg);
        cfg.output_dir = dir;
        cfg.enabled = 0;
        int rc = tprof_init(&cfg);
        if (rc != TPROF_ERR_DISABLED) {
            fprintf(stderr, "bench_ranges: tprof_init(enabled=0) returned %s\n",
                    tprof_strerror(rc));
            return 2;
        }
    }
    const long n = 10 * 1000 * 1000; /* pairs per batch */
    double api[REPS], flo[REPS], stub[REPS];
    api_loop(100000); /* lazy start happens here */
    if (tprof_enabled()) {
        fprintf(stderr, "bench_ranges: session unexpectedly enabled\n");
        return 2;
    }
    for (int r = 0; r < REPS; r++) {
        flo[r] = bench_floor_pair_ns(200000);
        uint64_t t0 = bench_thread_cpu_ns();
        api_loop(n);
        uint64_t t1 = bench_thread_cpu_ns();
        stub_loop(n / 2);
        uint64_t t2 = bench_thread_cpu_ns();
        api[r] = (double)(t1 - t0) / (double)n;
        stub[r] = (double)(t2 - t1) / (double)(n / 2);
    }
    double a = bench_median(api, REPS), f = bench_median(flo, REPS),
           e = bench_median(stub, REPS);
    printf("\n[disabled at run time: %s] %d reps x %ld pairs\n",
           lazy ? "TRAINPROF_DIR unset, lazy start" : "tprof_init with enabled = 0", REPS, n);
    printf("  push+pop            %8.2f ns/pair  = %.2f ns/call (min %.2f, max %.2f ns/call)\n",
           a, a / 2, bench_min(api, REPS) / 2, bench_max(api, REPS) / 2);
    printf("  floor: 2 clock reads %7.2f ns/pair; disabled pair / floor = %.3fx\n", f, a / f);
    printf("  reference: empty call into a shared library %.2f ns/call; disabled call / empty "
           "call = %.2fx\n", e / 2, a / e);
    bench_target(lazy ? "disabled (lazy, no dir) ns per call" : "disabled (enabled=0) ns per call",
                 a / 2, 2.0, "ns");
    return 0;
}

/* ------------------------------------------------------------------ driver */

typedef struct child_spec {
    const char *label;
    int nthreads; /* 0 = disabled */
    int lazy;
    size_t ring_bytes;
    long batch;
    int warmup;
} child_spec;

int main(void) {
    bench_banner("bench_ranges", "tprof_range_push(\"forward\") + tprof_range_pop() vs two "
                                 "clock_gettime(CLOCK_MONOTONIC)");
    char *dir = bench_mkdtemp("bench-ranges");
    printf("  output dir %s\n", dir);
    const child_spec specs[] = {
        /* 1 M pairs = 40 MB per batch in a 64 MiB ring; 2 warm-up batches lap it */
        {"enabled-1", 1, 0, 64u << 20, 1000000, 2},
        /* 8 rings of 16 MiB; 200 k pairs = 8 MB per batch; 3 warm-up batches lap them */
        {"enabled-8", 8, 0, 16u << 20, 200000, 3},
        {"disabled-init", 0, 0, 0, 0, 0},
        {"disabled-lazy", 0, 1, 0, 0, 0},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        const child_spec *s = &specs[i];
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 2;
        }
        if (pid == 0) {
            int rc = s->nthreads ? run_enabled(dir, s->nthreads, s->ring_bytes, s->batch,
                                               s->warmup)
                                 : run_disabled(dir, s->lazy);
            fflush(stdout);
            exit(rc);
        }
        int rc = bench_wait(pid);
        if (rc != 0) {
            printf("  child %s failed with status %d\n", s->label, rc);
            failed = 1;
        }
    }
    bench_rm_dir(dir);
    free(dir);
    printf("\nbench_ranges: %s\n", failed ? "BROKEN (see above)" : "done");
    return failed;
}
