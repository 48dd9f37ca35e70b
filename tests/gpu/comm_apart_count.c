/*
 * comm_apart_count.c — for the GPU check of communication ops read apart
 * (tests/gpu/comm_apart.sh): makes a run's report as `trainprof report` does, with sections of
 * more than COMM_OPS ops reading them apart (tp_report_opts.comm_ops), and prints how many
 * rank sections took that path, which the CLI does not say:
 *   comm_apart_count DIR COMM_OPS
 *   -> "sections read apart: N"
 * Exit status 1 when the run or the report cannot be made (the reason on stderr).
 */
#include <stdio.h>
#include <stdlib.h>

#include "analysis/comm.h"
#include "analysis/model.h"
#include "analysis/report.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: comm_apart_count DIR COMM_OPS\n");
        return 2;
    }
    const char *dirs[] = {argv[1]};
    char err[512];
    tp_run run;
    if (tp_run_load_slim(dirs, 1, &run, err, sizeof err)) {
        fprintf(stderr, "comm_apart_count: %s\n", err);
        return 1;
    }
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.comm_ops = strtoull(argv[2], NULL, 10);
    tp_report r;
    if (tp_report_make(&run, &o, &r)) {
        fprintf(stderr, "comm_apart_count: the report could not be made\n");
        tp_run_free(&run);
        return 1;
    }
    printf("sections read apart: %zu\n", tp_comm_streams_opened());
    tp_report_free(&r);
    tp_run_free(&run);
    return 0;
}
