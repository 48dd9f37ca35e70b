/*
 * bufpool.h — the fixed-size buffers CUPTI fills with activity records (capture/cupti.c),
 * kept and reused instead of allocated and freed for each request.
 *
 * Why: CUPTI asks for a buffer in the thread that needs one, which is the application's thread
 * issuing a launch, and returns it from its worker thread (every flush period, 100 ms here).
 * A fresh buffer per request costs that application thread an mmap, a page fault per 4 KiB
 * page CUPTI touches and, unless the client promises zeroed buffers
 * (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER), CUPTI's own memset of the whole buffer
 * "in the main thread" (cupti_activity.h); and a munmap when it is freed. A reused buffer is
 * already resident, and the worker thread zeroes the bytes CUPTI wrote before the buffer is
 * handed out again, so a request costs a mutex and a pointer.
 *
 * Memory: at most `cap` buffers of `size` bytes are ever allocated (calloc: pages are touched
 * only where records were written); none is released before the process exits.
 *
 * Thread safety: get and put may be called from any threads at once (one mutex, held for a
 * few instructions; the zeroing is outside it).
 */
#ifndef TPROF_BUFPOOL_H
#define TPROF_BUFPOOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define TPROF_BUFPOOL_MAX 64

typedef struct tprof_bufpool {
    pthread_mutex_t lock;
    size_t size;      /* bytes per buffer */
    size_t cap;       /* most buffers ever allocated, <= TPROF_BUFPOOL_MAX */
    int reuse;        /* 0: every get allocates (not zeroed) and every put frees */
    size_t allocated; /* buffers that exist now (reuse) or are out now (no reuse) */
    size_t nfree;
    uint8_t *free[TPROF_BUFPOOL_MAX];
    uint8_t *mine[TPROF_BUFPOOL_MAX]; /* every buffer that exists now, [0, allocated) */
    uint64_t refused; /* gets refused because `cap` buffers were out */
} tprof_bufpool;

/* Sets the pool up: `size` bytes per buffer (a multiple of 8), at most `cap` buffers
 * (clamped to TPROF_BUFPOOL_MAX), reusing them when `reuse` is non-zero. Allocates nothing. */
void tprof__bufpool_init(tprof_bufpool *p, size_t size, size_t cap, int reuse);

/* A buffer of p->size bytes, 8-byte aligned; all zero when the pool reuses (a fresh calloc
 * or a returned buffer zeroed by put), uninitialised otherwise. NULL when `cap` buffers are
 * out (counted in p->refused) or memory is exhausted. */
uint8_t *tprof__bufpool_get(tprof_bufpool *p);

/* Takes back a buffer from get, of which the first `dirty` bytes may be non-zero (the rest
 * must still be zero, as CUPTI leaves the bytes past its valid records); with reuse, zeroes
 * those bytes and keeps the buffer for the next get, else frees it. Returns 1; 0, touching
 * nothing, for NULL or a buffer this pool did not hand out (after another CUPTI client held
 * the activity API, CUPTI may return that client's buffers to us: its owner may still know
 * them, so they are neither reused nor freed). Cost: a scan of at most `cap` pointers. */
int tprof__bufpool_put(tprof_bufpool *p, uint8_t *b, size_t dirty);

/* Buffers handed out and not yet put back. */
size_t tprof__bufpool_out(tprof_bufpool *p);

#endif /* TPROF_BUFPOOL_H */
