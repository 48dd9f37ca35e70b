/*
 * jobs.h — independent jobs on a few threads, those in flight together kept under a memory
 * budget: the report's rank sections (report.c), each of which may read a rank file whole.
 */
#ifndef TPROF_JOBS_H
#define TPROF_JOBS_H

#include <stddef.h>
#include <stdint.h>

typedef struct tp_jobs {
    size_t n;        /* jobs 0..n-1, started in this order */
    int threads;     /* at most this many at once: 0 = one per CPU the process may run on
                      * (sched_getaffinity, else sysconf), at most 64; the calling thread
                      * is one of them */
    uint64_t budget; /* a job starts only while the costs in flight, its own included, fit
                      * this many bytes, or when none is in flight (any job can run) */
    uint64_t (*cost)(void *ctx, size_t i); /* estimated bytes job i holds; NULL: 0 */
    void (*run)(void *ctx, size_t i);      /* does job i; must be safe beside the others */
    void *ctx;
} tp_jobs;

/* Runs every job and returns when all are done. A thread that cannot be started leaves its
 * share to the others (the calling thread alone does them all at worst). */
void tp_jobs_run(const tp_jobs *j);

#endif /* TPROF_JOBS_H */
