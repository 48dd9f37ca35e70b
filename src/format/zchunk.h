/*
 * zchunk.h — compressing one chunk's records into a zstd chunk payload (format.h,
 * TPROF_CHUNK_F_ZSTD; docs/format.md), for the rank file's writer (core/writer.c) and the
 * benchmarks.
 *
 * libzstd is loaded at run time (dlopen of libzstd.so.1), never linked: the library is
 * preloaded into every process of a job, and a node without libzstd must still run the job
 * and record (plain chunks), not fail to load the library. The build needs zstd.h only to
 * check the prototypes (TPROF_HAVE_ZSTD); a build without it never compresses.
 *
 * One context (ZSTD_CCtx) is made once and reused for every chunk; each chunk is one whole
 * frame (ZSTD_compress2: no dictionary, nothing carried from one chunk to the next), so any
 * whole chunk in the file decompresses by itself, whatever happened to the others.
 * Memory: the context (on 4 MiB chunks about 0.6 MiB at level 1, 1.3 MiB at level 3:
 * ZSTD_estimateCCtxSize of zstd 1.5.4) plus the caller's output buffer of
 * tprof__zc_bound(len) bytes (4 MiB and 16 KiB for the writer's largest chunk).
 * Not thread safe: one user (the flusher thread). Cost: zstd's, about 2-4 ns per input byte at
 * levels 1-3 on one core (https://github.com/facebook/zstd#benchmarks), on the flusher,
 * never on a thread that records.
 */
#ifndef TPROF_ZCHUNK_H
#define TPROF_ZCHUNK_H

#include <stddef.h>

#include "format.h"

typedef struct tprof__zc {
    void *cctx; /* ZSTD_CCtx *, NULL until tprof__zc_open succeeds */
    int level;
    void *compress2; /* ZSTD_compress2 and ZSTD_isError, as loaded (zchunk.c casts them back) */
    void *is_error;
} tprof__zc;

/* The zstd level range the writer accepts (zstd's own negative "fast" levels are left out:
 * the default, 1, is already its fastest regular level). */
#define TPROF__ZC_LEVEL_MAX 19

/* Loads libzstd and makes the context at `level` (1 to TPROF__ZC_LEVEL_MAX). TPROF_OK, or
 * with a one-line reason in why: TPROF_ERR_UNAVAILABLE (this build has no libzstd, or
 * libzstd.so.1 cannot be loaded or is older than 1.4.0), TPROF_ERR_NO_MEMORY,
 * TPROF_ERR_INVALID_ARG (zstd refused the level); *z is left unusable then (tprof__zc_pack
 * returns 0). Idempotent once it succeeded. */
int tprof__zc_open(tprof__zc *z, int level, char *why, size_t whylen);

/* The destination size tprof__zc_pack needs for len bytes of records: the prefix, zstd's
 * worst case (ZSTD_COMPRESSBOUND, zstd.h) and 7 bytes of padding. */
static inline size_t tprof__zc_bound(size_t len) {
    return sizeof(tprof_zchunk) + len + (len >> 8) +
           (len < (128u << 10) ? (((128u << 10) - len) >> 11) : 0) + 8;
}

/* Compresses len bytes of records (len a multiple of 8, at most TPROF_CHUNK_RAW_MAX) into
 * dst (cap >= tprof__zc_bound(len)) as a TPROF_CHUNK_F_ZSTD payload: prefix, frame, zero
 * padding. Returns the payload's length (a multiple of 8), or 0 when the chunk is better
 * written plain: it would not be shorter, compression failed, or *z is not open. */
size_t tprof__zc_pack(tprof__zc *z, const void *src, size_t len, void *dst, size_t cap);

#endif /* TPROF_ZCHUNK_H */
