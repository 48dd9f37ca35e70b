/*
 * comm_dump.c — prints a run's communication ops and NCCL kernels as CSV, for the GPU
 * checks (the Python scripts in tests/gpu compare them with the program's own CUDA-event
 * timings):
 *   op,<rank>,<name>,<bytes>,<nranks>,<comm hash>,<seq>,<host start>,<host end>,
 *      <gpu start>,<gpu end>,<flags>,<start>,<end>,<source>,<shift>
 *      (the last four: the interval the report times the op by, and how far the channel
 *      interval was moved to agree with CUPTI: tp_comm_resolve)
 *   kernel,<rank>,<device>,<stream>,<start>,<end>,<name>
 *   meta,<rank>,<key>,<value>   (nccl.* and capability.nccl)
 * Times are CLOCK_MONOTONIC ns of the host that recorded them.
 */
#include <stdio.h>
#include <string.h>

#include <stdlib.h>

#include "analysis/comm.h"
#include "analysis/model.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: comm_dump RUN_DIR\n");
        return 2;
    }
    tp_run run;
    char err[512];
    if (tp_run_load(argv[1], &run, err, sizeof err) != 0) {
        fprintf(stderr, "comm_dump: %s\n", err);
        return 1;
    }
    for (size_t i = 0; i < run.nprocs; i++) {
        const tp_process *p = &run.procs[i];
        if (p->role != TP_ROLE_RANK) continue;
        for (size_t k = 0; k < p->nmeta; k++)
            if (!strncmp(p->meta[k].key, "nccl.", 5) || !strcmp(p->meta[k].key, "capability.nccl"))
                printf("meta,%d,%s,%s\n", p->rank, p->meta[k].key, p->meta[k].value);
        tp_comm_time *tm = calloc(p->ncomm ? p->ncomm : 1, sizeof *tm);
        if (!tm || tp_comm_resolve(p, tm) != 0) {
            fprintf(stderr, "comm_dump: out of memory\n");
            free(tm);
            tp_run_free(&run);
            return 1;
        }
        for (size_t k = 0; k < p->ncomm; k++) {
            const tp_comm_op *o = &p->comm[k];
            printf("op,%d,%s,%llu,%u,%016llx,%u,%llu,%llu,%llu,%llu,%u,%llu,%llu,%s,%lld\n",
                   p->rank, o->name, (unsigned long long)o->bytes, o->nranks,
                   (unsigned long long)o->comm_hash, o->seq, (unsigned long long)o->start,
                   (unsigned long long)o->end, (unsigned long long)o->gpu_start,
                   (unsigned long long)o->gpu_end, o->flags, (unsigned long long)tm[k].start,
                   (unsigned long long)tm[k].end, tp_comm_src_name(tm[k].src),
                   (long long)tm[k].shift_ns);
        }
        free(tm);
        for (size_t k = 0; k < p->ngpu; k++) {
            const tp_gpu_op *g = &p->gpu[k];
            if (!g->name || !strstr(g->name, "nccl")) continue;
            printf("kernel,%d,%u,%u,%llu,%llu,%s\n", p->rank, g->device, g->stream,
                   (unsigned long long)g->start, (unsigned long long)g->end, g->name);
        }
    }
    tp_run_free(&run);
    return 0;
}
