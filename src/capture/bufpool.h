/*
 * bufpool.h — the fixed-size buffers CUPTI fills with activity records (capture/cupti.c),
 * kept and reused instead of allocated and freed for each request.
 *
 * Why: CUPTI asks for a buffer in the thread that needs one, which is an application thread
 * issuing a launch, and gets it back to us every flush period (100 ms here). A fresh 4 MiB
 * buffer per request costs that thread an mmap and, when CUPTI zeroes it before use, a page
 * fault per 4 KiB page; returning it costs a munmap. A reused buffer is already resident, so
 * a request costs a mutex and a pointer (CUPTI still zeroes it: we do not promise zeroed
 * buffers with CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, a process-wide setting that a
 * CUPTI client taking over from us, such as torch.profiler, would inherit for its own
 * buffers).
 *
 * Memory: at most `cap` buffers of `size` bytes are ever allocated; none is released before
 * the process exits (with reuse).
 *
 * Thread safety: get and put may be called from any threads at once; both hold one mutex
 * for a scan of at most `cap` pointers (get also while it allocates, the first `cap` times).
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
    size_t cap;       /* most buffers allocated at once, <= TPROF_BUFPOOL_MAX */
    int reuse;        /* 0: every get allocates and every put frees */
    size_t allocated; /* buffers that exist now: mine[0, allocated) */
    uint8_t *mine[TPROF_BUFPOOL_MAX];
    uint8_t out[TPROF_BUFPOOL_MAX]; /* mine[i] is handed out (1) or free for the next get (0) */
    uint64_t refused; /* gets refused because `cap` buffers were out */
} tprof_bufpool;

/* Sets the pool up: `size` bytes per buffer, at most `cap` buffers (clamped to
 * TPROF_BUFPOOL_MAX), reusing them when `reuse` is non-zero. Allocates nothing. */
void tprof__bufpool_init(tprof_bufpool *p, size_t size, size_t cap, int reuse);

/* A buffer of p->size bytes, 8-byte aligned, contents unspecified (a reused buffer holds its
 * last records). NULL when `cap` buffers are out (counted in p->refused) or memory is
 * exhausted. */
uint8_t *tprof__bufpool_get(tprof_bufpool *p);

/* Takes back a buffer from get: kept for the next get with reuse, else freed. Returns 1; 0,
 * touching nothing, for NULL, a buffer this pool did not hand out (after another CUPTI
 * client held the activity API, CUPTI may return that client's buffers to us, and their
 * owner may still know them: they are neither reused nor freed) or one already put back. */
int tprof__bufpool_put(tprof_bufpool *p, uint8_t *b);

/* Buffers handed out and not yet put back. */
size_t tprof__bufpool_out(tprof_bufpool *p);

#endif /* TPROF_BUFPOOL_H */
