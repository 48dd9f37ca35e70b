/*
 * nofile_prog.c — a program whose descriptor table is full when it records its first event
 * (every free number taken with dup), and stays full to the end: the library can never
 * create its rank file. `trainprof run` must say so instead of blaming the program for not
 * recording (nofile_run_test.sh).
 */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "trainprof.h"

int main(void) {
    int n = 0;
    while (dup(2) >= 0) n++;
    if (errno != EMFILE) return 2;
    for (int i = 0; i < 100; i++) {
        tprof_range_push("step");
        tprof_range_pop();
    }
    printf("nofile_prog: %d descriptors taken\n", n);
    return 0;
}
