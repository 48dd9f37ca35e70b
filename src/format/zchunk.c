/*
 * zchunk.c — one chunk's records as a zstd chunk payload (zchunk.h, docs/format.md).
 */
#define _GNU_SOURCE
#include "zchunk.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "trainprof.h"

#ifndef TPROF_HAVE_ZSTD
#define TPROF_HAVE_ZSTD 0
#endif
#if TPROF_HAVE_ZSTD
#include <zstd.h>
#endif

#if TPROF_HAVE_ZSTD
/* the prototypes of zstd.h, so that a change there fails the build, not a run */
typedef ZSTD_CCtx *(*create_fn)(void);
typedef size_t (*setp_fn)(ZSTD_CCtx *, ZSTD_cParameter, int);
typedef size_t (*compress2_fn)(ZSTD_CCtx *, void *, size_t, const void *, size_t);
typedef unsigned (*is_error_fn)(size_t);
typedef void (*free_fn)(ZSTD_CCtx *);
_Static_assert(sizeof(void *) == sizeof(compress2_fn), "function pointers fit a void *");
#endif

int tprof__zc_open(tprof__zc *z, int level, char *why, size_t whylen) {
    if (z->cctx) return TPROF_OK;
#if TPROF_HAVE_ZSTD
    /* RTLD_LOCAL: its symbols stay out of the program's namespace */
    void *h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, whylen, "cannot load libzstd.so.1: %s", e ? e : "not found");
        return TPROF_ERR_UNAVAILABLE;
    }
    create_fn create = (create_fn)dlsym(h, "ZSTD_createCCtx");
    setp_fn setp = (setp_fn)dlsym(h, "ZSTD_CCtx_setParameter");
    compress2_fn c2 = (compress2_fn)dlsym(h, "ZSTD_compress2");
    is_error_fn ise = (is_error_fn)dlsym(h, "ZSTD_isError");
    free_fn fr = (free_fn)dlsym(h, "ZSTD_freeCCtx");
    if (!create || !setp || !c2 || !ise || !fr) {
        /* ZSTD_compress2 and ZSTD_CCtx_setParameter are stable API from zstd 1.4.0 */
        snprintf(why, whylen, "libzstd.so.1 is older than zstd 1.4.0");
        dlclose(h);
        return TPROF_ERR_UNAVAILABLE;
    }
    ZSTD_CCtx *c = create();
    if (!c) {
        snprintf(why, whylen, "ZSTD_createCCtx failed (no memory)");
        return TPROF_ERR_NO_MEMORY;
    }
    /* no frame checksum: the chunk's CRC-32 covers the stored bytes already */
    if (ise(setp(c, ZSTD_c_compressionLevel, level)) || ise(setp(c, ZSTD_c_checksumFlag, 0)) ||
        ise(setp(c, ZSTD_c_contentSizeFlag, 1))) {
        snprintf(why, whylen, "zstd refused compression level %d", level);
        fr(c);
        return TPROF_ERR_INVALID_ARG;
    }
    /* POSIX dlsym: a function's address round-trips through void * */
    z->compress2 = (void *)c2;
    z->is_error = (void *)ise;
    z->level = level;
    z->cctx = c; /* the handle stays open for the life of the process, as the context does */
    return TPROF_OK;
#else
    (void)z;
    (void)level;
    snprintf(why, whylen, "this build has no libzstd (libzstd-dev)");
    return TPROF_ERR_UNAVAILABLE;
#endif
}

size_t tprof__zc_pack(tprof__zc *z, const void *src, size_t len, void *dst, size_t cap) {
#if TPROF_HAVE_ZSTD
    if (!z->cctx || len == 0 || len > TPROF_CHUNK_RAW_MAX || (len & 7) ||
        cap < sizeof(tprof_zchunk) + 8)
        return 0;
    uint8_t *out = dst;
    /* room for the frame: less than the records minus the prefix, else plain is shorter */
    size_t room = cap - sizeof(tprof_zchunk) - 7;
    if (room > len - 1) room = len > 1 ? len - 1 : 0;
    if (room == 0) return 0;
    size_t n = ((compress2_fn)z->compress2)(z->cctx, out + sizeof(tprof_zchunk), room, src, len);
    if (((is_error_fn)z->is_error)(n)) return 0; /* dstSize_tooSmall: it does not shrink */
    size_t total = sizeof(tprof_zchunk) + tprof__align8(n);
    if (total >= len) return 0;
    tprof_zchunk zh = {(uint32_t)len, (uint32_t)n};
    memcpy(out, &zh, sizeof zh);
    memset(out + sizeof(tprof_zchunk) + n, 0, total - sizeof(tprof_zchunk) - n);
    return total;
#else
    (void)z;
    (void)src;
    (void)len;
    (void)dst;
    (void)cap;
    return 0;
#endif
}
