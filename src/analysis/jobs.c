/*
 * jobs.c — independent jobs on a few threads under a memory budget (jobs.h). One lock guards
 * the next job and the costs in flight; a job that does not fit waits for one in flight to
 * end, so the jobs start in order and memory stays under the budget (or one job's own cost).
 */
#define _GNU_SOURCE
#include "analysis/jobs.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

typedef struct pool {
    const tp_jobs *j;
    size_t next, running;
    uint64_t inflight;
    pthread_mutex_t lock;
    pthread_cond_t done;
} pool;

static void *worker(void *arg) {
    pool *p = arg;
    const tp_jobs *j = p->j;
    pthread_mutex_lock(&p->lock);
    while (p->next < j->n) {
        size_t i = p->next;
        uint64_t cost = j->cost ? j->cost(j->ctx, i) : 0;
        if (p->running && p->inflight + cost > j->budget) {
            pthread_cond_wait(&p->done, &p->lock);
            continue;
        }
        p->next++;
        p->running++;
        p->inflight += cost;
        pthread_mutex_unlock(&p->lock);
        j->run(j->ctx, i);
        pthread_mutex_lock(&p->lock);
        p->running--;
        p->inflight -= cost;
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* The CPUs this process may run on (its affinity: taskset, a Slurm task's cpuset, where the
 * online count would run several threads on one CPU), else the CPUs online. */
static long cpus_usable(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    return sysconf(_SC_NPROCESSORS_ONLN);
}

void tp_jobs_run(const tp_jobs *j) {
    long nt = j->threads > 0 ? j->threads : cpus_usable();
    if (nt < 1) nt = 1;
    if ((size_t)nt > j->n) nt = j->n ? (long)j->n : 1;
    if (nt > 64) nt = 64;
    pool p = {j, 0, 0, 0, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};
    pthread_t tid[64];
    long started = 0;
    for (long i = 1; i < nt; i++)
        if (pthread_create(&tid[started], NULL, worker, &p) == 0) started++;
    worker(&p);
    for (long i = 0; i < started; i++) pthread_join(tid[i], NULL);
    pthread_mutex_destroy(&p.lock);
    pthread_cond_destroy(&p.done);
}
