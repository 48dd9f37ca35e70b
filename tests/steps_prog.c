/*
 * steps_prog.c — a training loop stand-in for the on-demand capture tests
 * (capture_trigger_test.sh): N steps of MS milliseconds each, numbered through
 * tprof_step_begin (mode "api") or marked by a "step" range (mode "ranges"). With AT and
 * COUNT, the program itself asks, at the start of step AT, for GPU capture in the COUNT
 * steps that follow (tprof_gpu_capture_steps(TPROF_NEXT_STEP, COUNT)) and prints the
 * answer.
 *
 *   steps_prog N MS api|ranges [AT COUNT]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trainprof.h"

int main(int argc, char **argv) {
    if (argc != 4 && argc != 6) {
        fprintf(stderr, "usage: steps_prog N MS api|ranges [AT COUNT]\n");
        return 2;
    }
    long n = atol(argv[1]), ms = atol(argv[2]);
    int api = !strcmp(argv[3], "api");
    long at = argc == 6 ? atol(argv[4]) : -1, count = argc == 6 ? atol(argv[5]) : 0;
    struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
    for (long i = 0; i < n; i++) {
        if (api) tprof_step_begin((uint64_t)i);
        else tprof_range_push("step");
        if (i == at) {
            /* after this step began: the next step to begin is i + 1 */
            int r = tprof_gpu_capture_steps(TPROF_NEXT_STEP, (uint64_t)count);
            printf("steps_prog: asked at step %ld: %d\n", i, r);
            fflush(stdout);
        }
        nanosleep(&d, NULL);
        if (api) tprof_step_end((uint64_t)i);
        else tprof_range_pop();
    }
    return 0;
}
