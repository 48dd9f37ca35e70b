/*
 * range_harness.h — the measurement shared by bench_ranges and bench_nvtx: run a
 * push+pop loop on N threads in batches that fit each thread's ring, timing each batch
 * and a floor batch (two CLOCK_MONOTONIC reads per pair) with per-thread CPU time; flush
 * between batches outside the timed region; then read the rank file back with the
 * project's reader and check that every pair was recorded and nothing was dropped.
 *
 * The caller supplies the loop (public API or NVTX) and the flush/output-path calls (direct
 * or through dlsym), so the two benchmarks differ only in how events get in.
 */
#ifndef TPROF_BENCH_RANGE_HARNESS_H
#define TPROF_BENCH_RANGE_HARNESS_H

#include <pthread.h>

#include "bench_common.h"
#include "format/reader.h"

#define RH_REPS 9

typedef struct rh_ops {
    void (*loop)(long pairs);   /* the measured push+pop loop */
    int (*flush)(void);         /* tprof_flush */
} rh_ops;

typedef struct rh_worker {
    int id;
    long batch;
    int warmup;
    const rh_ops *ops;
    pthread_barrier_t *bar;
    double api_ns[RH_REPS];   /* per pair */
    double floor_ns[RH_REPS]; /* per pair of clock reads */
    uint64_t pairs;
    int flush_rc;
} rh_worker;

/* All threads stop, one flushes every ring (outside any timed region), all go on. */
static void rh_sync_flush(rh_worker *w) {
    pthread_barrier_wait(w->bar);
    if (w->id == 0) {
        int rc = w->ops->flush();
        if (rc != 0) w->flush_rc = rc;
    }
    pthread_barrier_wait(w->bar);
}

static void *rh_worker_main(void *p) {
    rh_worker *w = p;
    /* first use: registers the thread's ring and interns the name (not timed) */
    w->ops->loop(1);
    w->pairs = 1;
    /* warm-up laps touch every page of the ring, so page faults are not timed */
    for (int i = 0; i < w->warmup; i++) {
        w->ops->loop(w->batch);
        w->pairs += (uint64_t)w->batch;
        rh_sync_flush(w);
    }
    for (int r = 0; r < RH_REPS; r++) {
        w->floor_ns[r] = bench_floor_pair_ns(w->batch / 2);
        uint64_t t0 = bench_thread_cpu_ns();
        w->ops->loop(w->batch);
        uint64_t t1 = bench_thread_cpu_ns();
        w->api_ns[r] = (double)(t1 - t0) / (double)w->batch;
        w->pairs += (uint64_t)w->batch;
        rh_sync_flush(w);
    }
    return NULL;
}

/* Reads a rank file back: counts PUSH and POP records and sums the per-thread drop
 * counts (cumulative in each chunk header, so the largest value per thread). */
static int rh_verify_file(const char *path, uint64_t *pushes, uint64_t *pops,
                          uint64_t *dropped) {
    tprof_reader *r;
    char err[256];
    int rc = tprof__reader_open(path, &r, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "cannot read %s: %s\n", path, err);
        return -1;
    }
    static uint64_t drop_by_serial[4096];
    memset(drop_by_serial, 0, sizeof drop_by_serial);
    tprof_chunk c;
    *pushes = *pops = *dropped = 0;
    int bad = 0;
    while (tprof__reader_next(r, &c)) {
        if (c.thread_serial < 4096 && c.dropped > drop_by_serial[c.thread_serial])
            drop_by_serial[c.thread_serial] = c.dropped;
        size_t pos = 0;
        const tprof_rec *rec;
        while ((rec = tprof__chunk_next_rec(&c, &pos, &bad)) != NULL) {
            if (rec->kind == TPROF_REC_PUSH) (*pushes)++;
            else if (rec->kind == TPROF_REC_POP) (*pops)++;
        }
    }
    for (int i = 0; i < 4096; i++) *dropped += drop_by_serial[i];
    size_t damage = tprof__reader_damage_count(r);
    tprof__reader_close(r);
    if (bad || damage) {
        fprintf(stderr, "%s is damaged (%zu damage entries)\n", path, damage);
        return -1;
    }
    return 0;
}

typedef struct rh_result {
    double api_ns, floor_ns; /* medians per pair over threads x reps */
    double api_min, api_max, floor_min, floor_max;
    double ratio_med, ratio_min, ratio_max; /* per-batch ratios */
    uint64_t expected_pairs;
    int flush_failed;
} rh_result;

/* Runs the threads; returns 0, or -1 when a thread could not be started. */
static int rh_run(int nthreads, long batch, int warmup, const rh_ops *ops, rh_result *res) {
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)nthreads);
    rh_worker *w = calloc((size_t)nthreads, sizeof *w);
    pthread_t *th = calloc((size_t)nthreads, sizeof *th);
    if (!w || !th) return -1;
    for (int i = 0; i < nthreads; i++) {
        w[i] = (rh_worker){.id = i, .batch = batch, .warmup = warmup, .ops = ops, .bar = &bar};
        if (pthread_create(&th[i], NULL, rh_worker_main, &w[i]) != 0) return -1;
    }
    for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);

    size_t n = (size_t)nthreads * RH_REPS;
    double *api = malloc(n * sizeof *api), *flo = malloc(n * sizeof *flo),
           *ratio = malloc(n * sizeof *ratio);
    if (!api || !flo || !ratio) return -1;
    memset(res, 0, sizeof *res);
    for (int i = 0; i < nthreads; i++) {
        res->expected_pairs += w[i].pairs;
        if (w[i].flush_rc) res->flush_failed = 1;
        for (int r = 0; r < RH_REPS; r++) {
            api[i * RH_REPS + r] = w[i].api_ns[r];
            flo[i * RH_REPS + r] = w[i].floor_ns[r];
            ratio[i * RH_REPS + r] = w[i].api_ns[r] / w[i].floor_ns[r];
        }
    }
    res->api_ns = bench_median(api, n);
    res->api_min = bench_min(api, n);
    res->api_max = bench_max(api, n);
    res->floor_ns = bench_median(flo, n);
    res->floor_min = bench_min(flo, n);
    res->floor_max = bench_max(flo, n);
    res->ratio_med = bench_median(ratio, n);
    res->ratio_min = bench_min(ratio, n);
    res->ratio_max = bench_max(ratio, n);
    free(api);
    free(flo);
    free(ratio);
    free(w);
    free(th);
    return 0;
}

/* Prints the figures, the file check and the verdict; returns 1 when the measurement is
 * broken (events lost, file unreadable, flush failed). */
static int rh_report(const char *label, int nthreads, size_t ring_bytes, long batch,
                     const rh_result *res, const char *path, double limit) {
    uint64_t pushes = 0, pops = 0, dropped = 0;
    int broken = res->flush_failed;
    if (!path || !path[0] || rh_verify_file(path, &pushes, &pops, &dropped) != 0) broken = 1;
    printf("\n[%s, %d thread%s] ring %zu MiB, batch %ld pairs, %d reps x %d thread%s "
           "(per-thread CPU time)\n",
           label, nthreads, nthreads == 1 ? "" : "s", ring_bytes >> 20, batch, RH_REPS,
           nthreads, nthreads == 1 ? "" : "s");
    printf("  push+pop             %7.2f ns/pair  (%.2f ns/call; min %.2f, max %.2f)\n",
           res->api_ns, res->api_ns / 2, res->api_min, res->api_max);
    printf("  floor: 2 clock reads %7.2f ns/pair  (min %.2f, max %.2f)\n", res->floor_ns,
           res->floor_min, res->floor_max);
    printf("  ratio                %7.2fx (per-batch ratios: median %.2fx, range %.2f-%.2fx)\n",
           res->api_ns / res->floor_ns, res->ratio_med, res->ratio_min, res->ratio_max);
    printf("  above the floor      %7.2f ns/pair\n", res->api_ns - res->floor_ns);
    printf("  rank file: %llu pushes, %llu pops recorded of %llu pairs; dropped %llu\n",
           (unsigned long long)pushes, (unsigned long long)pops,
           (unsigned long long)res->expected_pairs, (unsigned long long)dropped);
    if (pushes != res->expected_pairs || pops != res->expected_pairs || dropped != 0) {
        printf("  BROKEN: events were lost; the timing above does not describe the hot path\n");
        broken = 1;
    }
    char what[96];
    snprintf(what, sizeof what, "%s push+pop / floor, %d thread%s", label, nthreads,
             nthreads == 1 ? "" : "s");
    bench_target(what, res->api_ns / res->floor_ns, limit, "x");
    return broken;
}

#endif /* TPROF_BENCH_RANGE_HARNESS_H */
