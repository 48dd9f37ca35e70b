/*
 * collectives.c — the cross-rank hook (trainprof.h): what the Timers and the EnergyMonitor
 * use to gather values from every rank, without trainprof owning a communicator.
 *
 * The registered hook is copied under a lock and read by copy, so a caller never sees a
 * half-written one. Without a hook, the process is rank 0 of 1 and the callbacks are local.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>

#include "internal.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static tprof_collectives g_hook;
static int g_have;

static int local_all_gather(void *ctx, const void *send, size_t bytes, void *recv) {
    (void)ctx;
    memmove(recv, send, bytes);
    return 0;
}

static int local_all_reduce(void *ctx, double *values, size_t count, tprof_reduce_op op) {
    (void)ctx;
    (void)values;
    (void)count;
    (void)op; /* one rank: the values are already the result */
    return 0;
}

static int local_barrier(void *ctx) {
    (void)ctx;
    return 0;
}

int tprof_set_collectives(const tprof_collectives *c) {
    if (c && (c->struct_size < sizeof *c || c->world_size < 1 || c->rank < 0 ||
              c->rank >= c->world_size))
        return TPROF_ERR_INVALID_ARG;
    pthread_mutex_lock(&g_lock);
    if (c) g_hook = *c;
    g_have = c != NULL;
    pthread_mutex_unlock(&g_lock);
    return TPROF_OK;
}

void tprof_get_collectives(tprof_collectives *out) {
    pthread_mutex_lock(&g_lock);
    if (g_have) {
        *out = g_hook;
    } else {
        memset(out, 0, sizeof *out);
        out->struct_size = sizeof *out;
        out->rank = 0;
        out->world_size = 1;
    }
    pthread_mutex_unlock(&g_lock);
    /* a partial hook still works: missing callbacks act locally */
    if (!g_have || !out->all_gather) {
        if (out->world_size == 1 || !g_have) out->all_gather = local_all_gather;
    }
    if (!out->all_reduce && (out->world_size == 1 || !g_have)) out->all_reduce = local_all_reduce;
    if (!out->barrier) out->barrier = local_barrier;
}
