/*
 * reader.h — reading .tprof rank files chunk by chunk, with damage reporting.
 *
 * The reader maps the file into memory, validates the header, and hands out chunks whose
 * checksums match. A torn tail (a killed process) ends the stream cleanly; a damaged chunk
 * in the middle is reported and skipped by scanning forward to the next valid chunk, so
 * one bad sector loses one chunk, not the file. Not thread safe per reader; independent
 * readers may run on different threads.
 *
 * Compressed chunks (TPROF_CHUNK_F_ZSTD) are handed out decompressed. Their checksum is
 * checked first, on the bytes as stored; a chunk whose frame then does not decompress to
 * exactly the size its prefix claims is damage like any other bad chunk. The reader never
 * decompresses more than TPROF_CHUNK_RAW_MAX bytes per chunk, so one buffer of at most
 * 16 MiB per reader bounds what a hostile file makes it allocate. A build without libzstd
 * skips such chunks, counts them (tprof__reader_zstd_skipped) and says so in one line on
 * stderr when the reader is closed: they are not damage.
 */
#ifndef TPROF_READER_H
#define TPROF_READER_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

typedef struct tprof_reader tprof_reader;

typedef struct tprof_chunk {
    uint32_t thread_serial;
    uint32_t os_tid;
    uint64_t dropped;
    const uint8_t *data; /* records; valid until the next tprof__reader_next or close
                          * (a compressed chunk's are in the reader's own buffer) */
    size_t len;          /* bytes of records at data */
    uint64_t file_offset;
    size_t stored;       /* payload bytes in the file after the 32-byte header */
    int compressed;      /* TPROF_CHUNK_F_ZSTD: stored compressed, data decompressed */
} tprof_chunk;

/* One problem found in a file: byte offset and a short description. */
typedef struct tprof_damage {
    uint64_t offset;
    char what[120];
} tprof_damage;

/* Opens `path`. On failure returns a negative tprof_err and writes a one-line reason into
 * err (if non-NULL). The reader owns the mapping; close with tprof__reader_close. */
int tprof__reader_open(const char *path, tprof_reader **out, char *err, size_t errlen);
/* tprof__reader_open over the file's first `limit` bytes (0: all of it), for a file read
 * again that was `limit` bytes long when first read: rank files only grow while written, so
 * the prefix holds what was read then. A file now shorter fails (TPROF_ERR_TRUNCATED). */
int tprof__reader_open_prefix(const char *path, uint64_t limit, tprof_reader **out, char *err,
                              size_t errlen);
void tprof__reader_close(tprof_reader *r);
const tprof_file_header *tprof__reader_header(const tprof_reader *r);
uint64_t tprof__reader_size(const tprof_reader *r);

/* Next valid chunk: returns 1 and fills *c, or 0 at the end. Damage met on the way is
 * appended to the reader's damage list. */
int tprof__reader_next(tprof_reader *r, tprof_chunk *c);

/* Gives the pages of the file below `offset` back to the kernel (madvise MADV_DONTNEED: a
 * later read of them maps them again from the file): the caller holds no pointer into chunks
 * that end before it. Bounds a sequential reader's resident set to what it has not passed,
 * whatever the file's size. Done in steps of 8 MiB; an offset past what tprof__reader_next
 * returned counts as that. */
void tprof__reader_release(tprof_reader *r, uint64_t offset);

/* Compressed chunks skipped because this build has no libzstd (0 in a build with it). */
size_t tprof__reader_zstd_skipped(const tprof_reader *r);

size_t tprof__reader_damage_count(const tprof_reader *r);
/* Allocations refused to the reader so far: a chunk skipped for memory is listed as damage
 * too, but the file may be whole (the report says that memory ran out, analysis/alloc.h). */
size_t tprof__reader_nomem(const tprof_reader *r);
const tprof_damage *tprof__reader_damage(const tprof_reader *r, size_t i);

/* Record iteration inside a chunk: returns the record at *pos and advances *pos, or NULL
 * at the end or on a malformed size (which is recorded as damage by the caller). */
static inline const tprof_rec *tprof__chunk_next_rec(const tprof_chunk *c, size_t *pos,
                                                     int *bad) {
    if (*pos + 8 > c->len) return NULL;
    const tprof_rec *r = (const tprof_rec *)(c->data + *pos);
    size_t sz = r->size;
    if (sz < 8 || (sz & 7) || *pos + sz > c->len ||
        (r->kind != TPROF_REC_PAD && sz < sizeof(tprof_rec))) {
        *bad = 1;
        return NULL;
    }
    *pos += sz;
    return r;
}

/* Inline name of a named record whose fixed payload is pl_bytes, or NULL. */
static inline const char *tprof__rec_inline(const tprof_rec *r, size_t pl_bytes) {
    size_t off = sizeof(tprof_rec) + pl_bytes;
    if (r->size <= off) return NULL;
    const char *s = (const char *)r + off;
    /* must be NUL-terminated inside the record */
    for (size_t i = 0; i < r->size - off; i++)
        if (!s[i]) return s;
    return NULL;
}

#endif /* TPROF_READER_H */
