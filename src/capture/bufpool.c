/*
 * bufpool.c — reused, zeroed activity buffers for CUPTI (see bufpool.h for why).
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
    pthread_mutex_lock(&p->lock);
    if (p->reuse && p->nfree) {
        uint8_t *b = p->free[--p->nfree];
        pthread_mutex_unlock(&p->lock);
        return b;
    }
    if (p->allocated >= p->cap) {
        p->refused++;
        pthread_mutex_unlock(&p->lock);
        return NULL;
    }
    /* calloc of a large block maps fresh zero pages without writing them; the other path
     * stands for the allocate-per-request behaviour, which CUPTI zeroes itself. Under the
     * lock: the cap holds, and this happens a few times per process (or per 100 ms flush
     * without reuse, the cost the pool removes) */
    uint8_t *b = p->reuse ? calloc(1, p->size) : aligned_alloc(8, p->size);
    if (b) p->mine[p->allocated++] = b;
    pthread_mutex_unlock(&p->lock);
    return b;
}

/* Index of b in p->mine, or -1. Called with the lock held. */
static long find_mine(const tprof_bufpool *p, const uint8_t *b) {
    for (size_t i = 0; i < p->allocated; i++)
        if (p->mine[i] == b) return (long)i;
    return -1;
}

int tprof__bufpool_put(tprof_bufpool *p, uint8_t *b, size_t dirty) {
    if (!b) return 0;
    pthread_mutex_lock(&p->lock);
    long i = find_mine(p, b);
    for (size_t k = 0; i >= 0 && p->reuse && k < p->nfree; k++)
        if (p->free[k] == b) i = -1; /* put back twice: the first time counts */
    if (i >= 0 && !p->reuse) p->mine[i] = p->mine[--p->allocated];
    pthread_mutex_unlock(&p->lock);
    if (i < 0) return 0;
    if (!p->reuse) {
        free(b);
        return 1;
    }
    memset(b, 0, dirty < p->size ? dirty : p->size);
    pthread_mutex_lock(&p->lock);
    p->free[p->nfree++] = b; /* b is out, so nfree < allocated <= cap */
    pthread_mutex_unlock(&p->lock);
    return 1;
}

size_t tprof__bufpool_out(tprof_bufpool *p) {
    pthread_mutex_lock(&p->lock);
    size_t out = p->reuse ? p->allocated - p->nfree : p->allocated;
    pthread_mutex_unlock(&p->lock);
    return out;
}
