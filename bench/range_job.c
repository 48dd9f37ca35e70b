/*
 * range_job.c — a job for `trainprof run` that records NVTX-style ranges as fast as one
 * thread can for a given time: steps of 20003 ranges ("train_step", "forward" and
 * "backward" inside it, 50 "layer" ranges in each, 159 ranges of 8 names in each layer and a
 * "kernel" inside every fourth), as bench_report_scale --ranges writes them. It measures
 * what the end-of-run report of a huge single rank file costs in a real run:
 *
 *     /usr/bin/time -v trainprof run -o DIR -- range_job SECONDS [MILLION_RANGES_PER_S]
 *
 * paced at that rate (default 2: a step each 10 ms; 0: as fast as it can), and prints the
 * ranges it recorded and their rate. Its ring must hold a flush interval's
 * ranges (about 40 bytes each): TRAINPROF_RING_KB=262144 keeps a 50 ms flush of 2 M ranges
 * a second with room to spare; what the ring drops is reported as usual.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "trainprof.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 10.0;
    double rate = argc > 2 ? atof(argv[2]) * 1e6 : 2e6;
    const double per_step = 3 + 2 * 50 * 200; /* ranges a step */
    static const char *const ops[] = {"op_0", "op_1", "op_2", "op_3",
                                      "op_4", "op_5", "op_6", "op_7"};
    uint64_t n = 0;
    double t0 = now_s(), t = t0;
    for (uint64_t step = 0; t - t0 < secs; step++, t = now_s()) {
        tprof_range_push("train_step");
        for (int ph = 0; ph < 2; ph++) {
            tprof_range_push(ph ? "backward" : "forward");
            for (int l = 0; l < 50; l++) {
                tprof_range_push("layer");
                for (int k = 0; k < 159; k++) {
                    tprof_range_push(ops[k % 8]);
                    if (k % 4 == 0) {
                        tprof_range_push("kernel");
                        tprof_range_pop();
                        n++;
                    }
                    tprof_range_pop();
                }
                tprof_range_pop();
            }
            tprof_range_pop();
        }
        tprof_range_pop();
        n += 3 + 2 * 50 * 160;
        /* paced: the next step starts when the rate allows it */
        double due = t0 + (double)(step + 1) * per_step / (rate > 0 ? rate : 1e300);
        while (rate > 0 && now_s() < due) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
    double el = now_s() - t0;
    printf("range_job: %llu ranges in %.1f s (%.2f M/s)\n", (unsigned long long)n, el,
           (double)n / el / 1e6);
    return 0;
}
