/*
 * compress.c — gzip and zstd output streams over stdio (compress.h), through glibc's
 * fopencookie: the writer keeps writing into a FILE, and each block the FILE hands over is
 * compressed at once into a fixed buffer that is written to the destination, so memory does
 * not grow with the document. gzip: zlib's deflate with windowBits 15 + 16, which writes the
 * gzip header and trailer (zlib.h, deflateInit2). zstd: ZSTD_compressStream2 with
 * ZSTD_e_continue, then ZSTD_e_end until it returns 0 (zstd.h, "Streaming compression").
 */
#define _GNU_SOURCE
#include "export/compress.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/types.h>

#include <zlib.h>
#if TPROF_HAVE_ZSTD
#include <zstd.h>
#endif

#define OUT_BUF (64 * 1024)

typedef struct zcookie {
    tp_compress kind;
    FILE *dst;
    int failed;
    z_stream z;
#if TPROF_HAVE_ZSTD
    ZSTD_CStream *zs;
#endif
    unsigned char out[OUT_BUF];
} zcookie;

tp_compress tp_compress_by_name(const char *path) {
    size_t n = path ? strlen(path) : 0;
    if (n > 3 && !strcmp(path + n - 3, ".gz")) return TP_COMPRESS_GZIP;
    if (n > 4 && !strcmp(path + n - 4, ".zst")) return TP_COMPRESS_ZSTD;
    return TP_COMPRESS_NONE;
}

int tp_compress_available(tp_compress c) {
    if (c == TP_COMPRESS_ZSTD) return TPROF_HAVE_ZSTD;
    return c == TP_COMPRESS_NONE || c == TP_COMPRESS_GZIP;
}

const char *tp_compress_suffix(tp_compress c) {
    return c == TP_COMPRESS_GZIP ? ".gz" : c == TP_COMPRESS_ZSTD ? ".zst" : "";
}

const char *tp_compress_name(tp_compress c) {
    return c == TP_COMPRESS_GZIP ? "gzip" : c == TP_COMPRESS_ZSTD ? "zstd" : "none";
}

static int put_out(zcookie *k, size_t n) {
    if (n && fwrite(k->out, 1, n, k->dst) != n) k->failed = 1;
    return k->failed ? -1 : 0;
}

/* deflate `n` bytes (flush: Z_NO_FLUSH while writing, Z_FINISH at the end) */
static int gz_feed(zcookie *k, const char *buf, size_t n, int flush) {
    k->z.next_in = (Bytef *)(uintptr_t)buf;
    k->z.avail_in = (uInt)n;
    for (;;) {
        k->z.next_out = k->out;
        k->z.avail_out = OUT_BUF;
        int rc = deflate(&k->z, flush);
        if (rc == Z_STREAM_ERROR) return k->failed = 1, -1;
        if (put_out(k, OUT_BUF - k->z.avail_out)) return -1;
        if (flush == Z_FINISH ? rc == Z_STREAM_END : k->z.avail_out != 0) return 0;
    }
}

#if TPROF_HAVE_ZSTD
static int zs_feed(zcookie *k, const char *buf, size_t n, ZSTD_EndDirective end) {
    ZSTD_inBuffer in = {buf, n, 0};
    for (;;) {
        ZSTD_outBuffer out = {k->out, OUT_BUF, 0};
        size_t left = ZSTD_compressStream2(k->zs, &out, &in, end);
        if (ZSTD_isError(left)) return k->failed = 1, -1;
        if (put_out(k, out.pos)) return -1;
        if (end == ZSTD_e_end ? left == 0 : in.pos == in.size) return 0;
    }
}
#endif

static ssize_t z_write(void *cookie, const char *buf, size_t n) {
    zcookie *k = cookie;
    if (k->failed) return -1;
    /* deflate takes at most UINT_MAX bytes a call; stdio hands over far less */
    for (size_t done = 0; done < n;) {
        size_t part = n - done > (1u << 30) ? (1u << 30) : n - done;
        int rc;
#if TPROF_HAVE_ZSTD
        if (k->kind == TP_COMPRESS_ZSTD) rc = zs_feed(k, buf + done, part, ZSTD_e_continue);
        else
#endif
            rc = gz_feed(k, buf + done, part, Z_NO_FLUSH);
        if (rc) return -1;
        done += part;
    }
    return (ssize_t)n;
}

static int z_close(void *cookie) {
    zcookie *k = cookie;
    int rc;
#if TPROF_HAVE_ZSTD
    if (k->kind == TP_COMPRESS_ZSTD) {
        rc = k->failed ? -1 : zs_feed(k, NULL, 0, ZSTD_e_end);
        ZSTD_freeCStream(k->zs);
    } else
#endif
    {
        rc = k->failed ? -1 : gz_feed(k, NULL, 0, Z_FINISH);
        deflateEnd(&k->z);
    }
    if (rc == 0 && fflush(k->dst) != 0) rc = -1;
    free(k);
    return rc;
}

FILE *tp_compress_open(FILE *dst, tp_compress c) {
    if (!dst || c == TP_COMPRESS_NONE) {
        errno = EINVAL;
        return NULL;
    }
    if (!tp_compress_available(c)) {
        errno = ENOTSUP;
        return NULL;
    }
    zcookie *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    k->kind = c;
    k->dst = dst;
#if TPROF_HAVE_ZSTD
    if (c == TP_COMPRESS_ZSTD) {
        k->zs = ZSTD_createCStream();
        if (!k->zs ||
            ZSTD_isError(ZSTD_CCtx_setParameter(k->zs, ZSTD_c_compressionLevel, 3))) {
            ZSTD_freeCStream(k->zs);
            free(k);
            errno = ENOMEM;
            return NULL;
        }
    } else
#endif
        /* level 6 (zlib's default), window 2^15 with the gzip wrapper (+16), memLevel 8 */
        if (deflateInit2(&k->z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
            free(k);
            errno = ENOMEM;
            return NULL;
        }
    cookie_io_functions_t io = {.read = NULL, .write = z_write, .seek = NULL, .close = z_close};
    FILE *f = fopencookie(k, "w", io);
    if (!f) {
        int e = errno;
#if TPROF_HAVE_ZSTD
        if (c == TP_COMPRESS_ZSTD) ZSTD_freeCStream(k->zs);
        else
#endif
            deflateEnd(&k->z);
        free(k);
        errno = e;
    }
    return f;
}
