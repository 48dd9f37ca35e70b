/*
 * bench_timers.c — cost of the Megatron-compatible Timers.
 *
 * Three measurements, each as per-thread CPU time, median over repetitions, against the
 * floor measured in the same run (two CLOCK_MONOTONIC reads, bench_common.h):
 *  - a timer above the registry's log level (the dummy): start+stop per call, through the
 *    header's inline check. Target: under 2 ns per call.
 *  - an enabled host timer without a session (TRAINPROF_DIR unset): start+stop. Target: at
 *    most 2x the floor (a start and a stop read the clock once each).
 *  - an enabled host timer with a recording session: start+stop, each interval also a
 *    trace range (START and END records); batches fit the ring and are flushed outside the
 *    timed region. Printed beside the same target.
 * Each configuration runs in its own forked child (one session per process).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"
#include "trainprof.h"

#define REPS 9

static void __attribute__((noinline)) timer_loop(tprof_timer *t, long n) {
    for (long i = 0; i < n; i++) {
        tprof_timer_start(t, 0);
        tprof_timer_stop(t, 0);
    }
}

static int run(const char *mode, const char *dir) {
    int recording = !strcmp(mode, "recording");
    if (recording) {
        tprof_config cfg;
        tprof_config_init(&cfg);
        cfg.output_dir = dir;
        cfg.ring_bytes = 64u << 20;
        cfg.sample_hz = 0;
        if (tprof_init(&cfg) != TPROF_OK) return 2;
    } else {
        unsetenv("TRAINPROF_DIR");
    }
    tprof_timers *timers;
    if (tprof_timers_create(1, TPROF_TIMERS_MINMAX, &timers) != TPROF_OK) return 2;
    int dummy = !strcmp(mode, "dummy");
    tprof_timer *t = tprof_timer_get(timers, "forward-compute", dummy ? 2 : 1);
    /* a start+stop pair records START (24 B + name once) and END (24 B): 48 B per pair */
    long n = dummy ? 20000000 : recording ? 500000 : 2000000;
    double cost[REPS], flo[REPS];
    timer_loop(t, 1000);
    if (recording) tprof_flush();
    for (int r = 0; r < REPS; r++) {
        flo[r] = bench_floor_pair_ns(200000);
        uint64_t t0 = bench_thread_cpu_ns();
        timer_loop(t, n);
        uint64_t t1 = bench_thread_cpu_ns();
        cost[r] = (double)(t1 - t0) / (double)n;
        if (recording) tprof_flush();
    }
    double c = bench_median(cost, REPS), f = bench_median(flo, REPS);
    printf("\n[%s timer] %d reps x %ld start+stop pairs (per-thread CPU time)\n", mode, REPS, n);
    printf("  start+stop          %8.2f ns/pair (min %.2f, max %.2f)\n", c, bench_min(cost, REPS),
           bench_max(cost, REPS));
    printf("  floor: 2 clock reads %7.2f ns/pair; ratio %.2fx\n", f, c / f);
    if (dummy) bench_target("timer above the log level, ns per call", c / 2, 2.0, "ns");
    else
        bench_target(recording ? "enabled timer + trace range / floor"
                               : "enabled host timer / floor",
                     c / f, 2.0, "x");
    if (!dummy && tprof_timer_active_time(t) <= 0) return 3;
    tprof_timers_destroy(timers);
    if (recording) tprof_shutdown();
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3) return run(argv[1], argv[2]);
    bench_banner("bench_timers", "Megatron-compatible Timers: start+stop cost");
    char *dir = bench_mkdtemp("tprof-bench-timers");
    static const char *const modes[] = {"dummy", "host", "recording"};
    int rc = 0;
    for (int i = 0; i < 3 && !rc; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            execl("/proc/self/exe", argv[0], modes[i], dir, (char *)NULL);
            _exit(127);
        }
        if (bench_wait(pid) != 0) {
            fprintf(stderr, "bench_timers: the %s run failed\n", modes[i]);
            rc = 1;
        }
    }
    bench_rm_dir(dir);
    free(dir);
    printf("\nbench_timers: done\n");
    return rc;
}
