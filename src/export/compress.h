/*
 * compress.h — a stdio stream that compresses what is written to it into another stream:
 * gzip (zlib's deflate with the gzip wrapper, RFC 1952) or zstd (libzstd's streaming API,
 * RFC 8878), so that writers that stream into a FILE (the exporters, the report) write
 * compressed files without holding the document in memory.
 *
 * Memory: the compressor's state (deflate: about 256 KiB at level 6; zstd level 3: a few MiB)
 * and one 64 KiB output buffer, whatever the size of the document. Not thread safe (one
 * stream per thread, as any FILE written without locking by one writer).
 */
#ifndef TPROF_COMPRESS_H
#define TPROF_COMPRESS_H

#include <stdio.h>

typedef enum tp_compress {
    TP_COMPRESS_NONE = 0,
    TP_COMPRESS_GZIP = 1, /* ".gz" */
    TP_COMPRESS_ZSTD = 2, /* ".zst" */
} tp_compress;

/* The compression a file name asks for: its suffix ".gz" or ".zst", else none. */
tp_compress tp_compress_by_name(const char *path);

/* Whether this build can write `c` (zstd needs libzstd at build time; none and gzip always). */
int tp_compress_available(tp_compress c);

/* The suffix of `c` (".gz", ".zst", "" for none), and its name ("gzip", "zstd", "none"). */
const char *tp_compress_suffix(tp_compress c);
const char *tp_compress_name(tp_compress c);

/* A write-only stream whose bytes reach `dst` compressed. fclose() on it ends the compressed
 * stream (its trailer) and flushes it into dst, but does not close dst; it returns EOF when
 * any write into dst or the compressor failed, as a failed write on it does. dst stays owned
 * by the caller and must outlive the returned stream. Returns NULL with errno set (ENOMEM;
 * ENOTSUP for a compression this build lacks; EINVAL for TP_COMPRESS_NONE). */
FILE *tp_compress_open(FILE *dst, tp_compress c);

#endif /* TPROF_COMPRESS_H */
