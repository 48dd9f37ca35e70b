/*
 * bufpool.c — reused activity buffers for CUPTI (see bufpool.h for why).
 */
#include "bufpool.h"

#include <stdlib.h>
#include <string.h>

void tprof__bufpool_init(tprof_bufpool *p, size_t size, size_t cap, int reuse) {
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
    p->size = size;
    p->cap = cap < TPROF_BUFPOOL_MAX ? cap : TPROF_BUFPOOL_MAX;
    p->reuse = reuse;
}

uint8_t *tprof__bufpool_get(tprof_bufpool *p) {
    uint8_t *b = NULL;
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; p->reuse && i < p->allocated; i++)
        if (!p->out[i]) {
            p->out[i] = 1;
            b = p->mine[i];
            break;
        }
    if (!b && p->allocated >= p->cap) {
        p->refused++;
    } else if (!b) {
        /* under the lock, so the cap holds; with reuse this happens at most `cap` times */
        b = aligned_alloc(8, p->size);
        if (b) {
            p->out[p->allocated] = 1;
            p->mine[p->allocated++] = b;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return b;
}

int tprof__bufpool_put(tprof_bufpool *p, uint8_t *b) {
    if (!b) return 0;
    int ok = 0;
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < p->allocated; i++) {
        if (p->mine[i] != b) continue;
        if (!p->out[i]) break; /* put back twice: the first time counted */
        ok = 1;
        if (p->reuse) {
            p->out[i] = 0;
        } else { /* forget it: the last one takes its place */
            p->allocated--;
            p->mine[i] = p->mine[p->allocated];
            p->out[i] = p->out[p->allocated];
        }
        break;
    }
    pthread_mutex_unlock(&p->lock);
    if (ok && !p->reuse) free(b);
    return ok;
}

size_t tprof__bufpool_out(tprof_bufpool *p) {
    size_t n = 0;
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < p->allocated; i++) n += p->out[i];
    pthread_mutex_unlock(&p->lock);
    return n;
}
