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
 * with enabled = 0, and the lazy start with TRAINPROF_DIR unset). Each figure is the median
 * over repetitions (and threads) of one batch's CPU time divided by its size.
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
#include "format/reader.h"
#include "trainprof.h"

#define REPS 9

static void __attribute__((noinline)) api_loop(long n) {
    for (long i = 0; i < n; i++) {
        tprof_range_push("forward");
        tprof_range_pop();
    }
}

/* ------------------------------------------------------------------ enabled session */

typedef struct worker {
    int id;
    long batch;
    int warmup;
    pthread_barrier_t *bar;
    double api_ns[REPS];   /* per pair */
    double floor_ns[REPS]; /* per pair of clock reads */
    uint64_t pairs;
    int flush_rc;
} worker;

/* All threads stop, one flushes every ring (outside any timed region), all go on. */
static void sync_flush(worker *w) {
    pthread_barrier_wait(w->bar);
    if (w->id == 0) {
        int rc = tprof_flush();
        if (rc != TPROF_OK) w->flush_rc = rc;
    }
    pthread_barrier_wait(w->bar);
}

static void *worker_main(void *p) {
    worker *w = p;
    /* first use: registers the thread's ring and interns the name (not timed) */
    tprof_range_push("forward");
    tprof_range_pop();
    w->pairs = 1;
    /* warm-up laps touch every page of the ring, so page faults are not timed */
    for (int i = 0; i < w->warmup; i++) {
        api_loop(w->batch);
        w->pairs += (uint64_t)w->batch;
        sync_flush(w);
    }
    for (int r = 0; r < REPS; r++) {
        w->floor_ns[r] = bench_floor_pair_ns(w->batch / 2);
        uint64_t t0 = bench_thread_cpu_ns();
        api_loop(w->batch);
        uint64_t t1 = bench_thread_cpu_ns();
        w->api_ns[r] = (double)(t1 - t0) / (double)w->batch;
        w->pairs += (uint64_t)w->batch;
        sync_flush(w);
    }
    return NULL;
}

/* Reads the rank file back: counts PUSH and POP records and sums the per-thread drop
 * counts (cumulative in each chunk header, so the last value per thread). */
static int verify_file(const char *path, uint64_t *pushes, uint64_t *pops, uint64_t *dropped) {
    tprof_reader *r;
    char err[256];
    int rc = tprof_reader_open(path, &r, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "bench_ranges: cannot read %s: %s\n", path, err);
        return -1;
    }
    uint64_t drop_by_serial[1024] = {0};
    tprof_chunk c;
    *pushes = *pops = *dropped = 0;
    int bad = 0;
    while (tprof_reader_next(r, &c)) {
        if (c.thread_serial < 1024 && c.dropped > drop_by_serial[c.thread_serial])
            drop_by_serial[c.thread_serial] = c.dropped;
        size_t pos = 0;
        const tprof_rec *rec;
        while ((rec = tprof_chunk_next_rec(&c, &pos, &bad)) != NULL) {
            if (rec->kind == TPROF_REC_PUSH) (*pushes)++;
            else if (rec->kind == TPROF_REC_POP) (*pops)++;
        }
    }
    for (int i = 0; i < 1024; i++) *dropped += drop_by_serial[i];
    size_t damage = tprof_reader_damage_count(r);
    tprof_reader_close(r);
    if (bad || damage) {
        fprintf(stderr, "bench_ranges: %s is damaged (%zu damage entries)\n", path, damage);
        return -1;
    }
    return 0;
}

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
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)nthreads);
    worker *w = calloc((size_t)nthreads, sizeof *w);
    pthread_t *th = calloc((size_t)nthreads, sizeof *th);
    if (!w || !th) return 2;
    for (int i = 0; i < nthreads; i++) {
        w[i] = (worker){.id = i, .batch = batch, .warmup = warmup, .bar = &bar};
        if (pthread_create(&th[i], NULL, worker_main, &w[i]) != 0) return 2;
    }
    for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    char path[4096] = "";
    const char *op = tprof_output_path();
    if (op) snprintf(path, sizeof path, "%s", op);
    tprof_shutdown();

    size_t n = (size_t)nthreads * REPS;
    double *api = malloc(n * sizeof *api), *flo = malloc(n * sizeof *flo),
           *ratio = malloc(n * sizeof *ratio);
    if (!api || !flo || !ratio) return 2;
    uint64_t expected = 0;
    int broken = 0;
    for (int i = 0; i < nthreads; i++) {
        expected += w[i].pairs;
        if (w[i].flush_rc) broken = 1;
        for (int r = 0; r < REPS; r++) {
            api[i * REPS + r] = w[i].api_ns[r];
            flo[i * REPS + r] = w[i].floor_ns[r];
            ratio[i * REPS + r] = w[i].api_ns[r] / w[i].floor_ns[r];
        }
    }
    double api_med = bench_median(api, n), flo_med = bench_median(flo, n);
    double ratio_med = bench_median(ratio, n);

    uint64_t pushes = 0, pops = 0, dropped = 0;
    if (!path[0] || verify_file(path, &pushes, &pops, &dropped) != 0) broken = 1;

    printf("\n[enabled, %d thread%s] ring %zu MiB, batch %ld pairs, %d reps x %d thread%s "
           "(per-thread CPU time)\n",
           nthreads, nthreads == 1 ? "" : "s", ring_bytes >> 20, batch, REPS, nthreads,
           nthreads == 1 ? "" : "s");
    printf("  push+pop            %8.2f ns/pair  (%.2f ns/call; min %.2f, max %.2f)\n", api_med,
           api_med / 2, bench_min(api, n), bench_max(api, n));
    printf("  floor: 2 clock reads %7.2f ns/pair  (min %.2f, max %.2f)\n", flo_med,
           bench_min(flo, n), bench_max(flo, n));
    printf("  ratio               %8.2fx (median of per-batch ratios %.2fx, range %.2f-%.2fx)\n",
           api_med / flo_med, ratio_med, bench_min(ratio, n), bench_max(ratio, n));
    printf("  overhead above floor %7.2f ns/pair\n", api_med - flo_med);
    printf("  rank file: %llu pushes, %llu pops recorded of %llu pairs; dropped %llu\n",
           (unsigned long long)pushes, (unsigned long long)pops, (unsigned long long)expected,
           (unsigned long long)dropped);
    if (pushes != expected || pops != expected || dropped != 0) {
        printf("  BROKEN: events were lost; the timing above does not describe the hot path\n");
        broken = 1;
    }
    char what[96];
    snprintf(what, sizeof what, "push+pop / floor, %d thread%s", nthreads,
             nthreads == 1 ? "" : "s");
    bench_target(what, api_med / flo_med, 2.0, "x");
    free(api);
    free(flo);
    free(ratio);
    free(w);
    free(th);
    return broken ? 1 : 0;
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
    double api[REPS], flo[REPS];
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
        api[r] = (double)(t1 - t0) / (double)n;
    }
    double a = bench_median(api, REPS), f = bench_median(flo, REPS);
    printf("\n[disabled at run time: %s] %d reps x %ld pairs\n",
           lazy ? "TRAINPROF_DIR unset, lazy start" : "tprof_init with enabled = 0", REPS, n);
    printf("  push+pop            %8.2f ns/pair  = %.2f ns/call (min %.2f, max %.2f ns/call)\n",
           a, a / 2, bench_min(api, REPS) / 2, bench_max(api, REPS) / 2);
    printf("  floor: 2 clock reads %7.2f ns/pair; disabled pair / floor = %.3fx\n", f, a / f);
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
