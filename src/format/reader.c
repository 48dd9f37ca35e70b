/*
 * reader.c — validating reader of .tprof files (see reader.h and docs/format.md).
 */
#define _GNU_SOURCE
#include "reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trainprof.h"

#ifndef TPROF_HAVE_ZSTD
#define TPROF_HAVE_ZSTD 0
#endif
#if TPROF_HAVE_ZSTD
#include <zstd.h>
#endif

struct tprof_reader {
    const uint8_t *map;
    size_t size;
    size_t pos;
    tprof_file_header hdr;
    tprof_damage *damage;
    size_t ndamage, damage_cap;
    int in_bad_run; /* report one damage per run of garbage, not one per byte */
    size_t nomem;   /* allocations refused: what was skipped for them is not damage */
    char path[256];  /* for the one line about skipped compressed chunks */
    uint8_t *zbuf;   /* a compressed chunk's records, decompressed */
    size_t zcap;     /* at most TPROF_CHUNK_RAW_MAX */
    size_t zskipped; /* compressed chunks a build without libzstd skipped */
    size_t released; /* bytes of the mapping from its start given back (tprof__reader_release) */
#if TPROF_HAVE_ZSTD
    ZSTD_DCtx *dctx;
#endif
};

static void add_damage(tprof_reader *r, uint64_t off, const char *what) {
    if (r->ndamage == r->damage_cap) {
        if (r->damage_cap >= 1024) return; /* enough to say the file is badly damaged */
        size_t cap = r->damage_cap ? r->damage_cap * 2 : 4;
        tprof_damage *d = realloc(r->damage, cap * sizeof *d);
        if (!d) {
            r->nomem++;
            return;
        }
        r->damage = d;
        r->damage_cap = cap;
    }
    r->damage[r->ndamage].offset = off;
    snprintf(r->damage[r->ndamage].what, sizeof r->damage[0].what, "%s", what);
    r->ndamage++;
}

int tprof__reader_open(const char *path, tprof_reader **out, char *err, size_t errlen) {
    return tprof__reader_open_prefix(path, 0, out, err, errlen);
}

int tprof__reader_open_prefix(const char *path, uint64_t limit, tprof_reader **out, char *err,
                              size_t errlen) {
    char dummy[8];
    if (!err) { err = dummy; errlen = sizeof dummy; }
    err[0] = 0;
    if (!path || !out) return TPROF_ERR_INVALID_ARG;
    /* not blocking: a FIFO under a rank file's name (or a link to one) would hold the open
     * until a writer came; it is refused below, as any file that is not a regular one */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open: %s", strerror(errno));
        return TPROF_ERR_IO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "cannot stat: %s", strerror(errno));
        close(fd);
        return TPROF_ERR_IO;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "not a regular file");
        close(fd);
        return TPROF_ERR_IO;
    }
    if ((size_t)st.st_size < sizeof(tprof_file_header)) {
        close(fd);
        snprintf(err, errlen, "too short for a rank file header (%lld bytes)",
                 (long long)st.st_size);
        return st.st_size == 0 ? TPROF_ERR_TRUNCATED : TPROF_ERR_FORMAT;
    }
    if (limit && (uint64_t)st.st_size < limit) {
        close(fd);
        snprintf(err, errlen, "now %lld bytes, shorter than the %llu read before",
                 (long long)st.st_size, (unsigned long long)limit);
        return TPROF_ERR_TRUNCATED;
    }
    /* a file still being written has grown since: its first `limit` bytes are what was read */
    if (limit) st.st_size = (off_t)limit;
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        snprintf(err, errlen, "cannot map: %s", strerror(errno));
        return TPROF_ERR_IO;
    }
    tprof_reader *r = calloc(1, sizeof *r);
    if (!r) {
        munmap(m, (size_t)st.st_size);
        return TPROF_ERR_NO_MEMORY;
    }
    r->map = m;
    r->size = (size_t)st.st_size;
    memcpy(&r->hdr, m, sizeof r->hdr);
    int rc = TPROF_OK;
    if (memcmp(r->hdr.magic, TPROF_FILE_MAGIC, 8) != 0) {
        snprintf(err, errlen, "not a trainprof rank file (bad magic)");
        rc = TPROF_ERR_FORMAT;
    } else if (r->hdr.version < TPROF_FORMAT_VERSION_MIN ||
               r->hdr.version > TPROF_FORMAT_VERSION) {
        snprintf(err, errlen, "format version %u, this reader knows %u to %u", r->hdr.version,
                 TPROF_FORMAT_VERSION_MIN, TPROF_FORMAT_VERSION);
        rc = TPROF_ERR_VERSION;
    } else if (r->hdr.header_bytes < sizeof r->hdr || r->hdr.header_bytes > r->size ||
               (r->hdr.header_bytes & 7)) {
        snprintf(err, errlen, "bad header length %u", r->hdr.header_bytes);
        rc = TPROF_ERR_CORRUPT;
    } else if (tprof__crc32(0, &r->hdr, offsetof(tprof_file_header, header_crc)) !=
               r->hdr.header_crc) {
        snprintf(err, errlen, "header checksum mismatch");
        rc = TPROF_ERR_CORRUPT;
    } else if (r->hdr.start_realtime_ns >= TPROF_TIME_MAX ||
               r->hdr.start_mono_ns >= TPROF_TIME_MAX) {
        snprintf(err, errlen, "start clock pair out of range (%llu, %llu ns)",
                 (unsigned long long)r->hdr.start_realtime_ns,
                 (unsigned long long)r->hdr.start_mono_ns);
        rc = TPROF_ERR_CORRUPT;
    }
    if (rc != TPROF_OK) {
        tprof__reader_close(r);
        return rc;
    }
    r->hdr.host[sizeof r->hdr.host - 1] = 0;
    r->hdr.run_id[sizeof r->hdr.run_id - 1] = 0;
    r->hdr.build[sizeof r->hdr.build - 1] = 0;
    r->pos = r->hdr.header_bytes;
    snprintf(r->path, sizeof r->path, "%s", path);
    *out = r;
    return TPROF_OK;
}

void tprof__reader_close(tprof_reader *r) {
    if (!r) return;
    if (r->map) munmap((void *)r->map, r->size);
    if (r->zskipped)
        fprintf(stderr,
                "trainprof: %s: %zu chunk%s compressed, no zstd in this build (libzstd-dev): "
                "skipped\n",
                r->path, r->zskipped, r->zskipped == 1 ? "" : "s");
#if TPROF_HAVE_ZSTD
    ZSTD_freeDCtx(r->dctx);
#endif
    free(r->zbuf);
    free(r->damage);
    free(r);
}

const tprof_file_header *tprof__reader_header(const tprof_reader *r) { return &r->hdr; }

void tprof__reader_release(tprof_reader *r, uint64_t offset) {
    /* in steps of 8 MiB: one call per step, not per chunk */
    const size_t step = 8u << 20;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (offset > r->pos) offset = r->pos; /* never what the reader has not passed */
    size_t upto = (size_t)offset / page * page;
    if (upto < r->released + step) return;
    /* a private read-only mapping of a file: the pages are read again from the file if
     * touched, so this only lowers the resident set */
    if (madvise((void *)(r->map + r->released), upto - r->released, MADV_DONTNEED) == 0)
        r->released = upto;
}
uint64_t tprof__reader_size(const tprof_reader *r) { return r->size; }
size_t tprof__reader_damage_count(const tprof_reader *r) { return r->ndamage; }

size_t tprof__reader_nomem(const tprof_reader *r) { return r->nomem; }
size_t tprof__reader_zstd_skipped(const tprof_reader *r) { return r->zskipped; }
const tprof_damage *tprof__reader_damage(const tprof_reader *r, size_t i) {
    return i < r->ndamage ? &r->damage[i] : NULL;
}

/* 0 when a valid chunk starts at pos; else a short reason. */
static const char *check_chunk(const tprof_reader *r, size_t pos, tprof_chunk_header *h) {
    if (r->size - pos < sizeof *h) return "truncated chunk header";
    memcpy(h, r->map + pos, sizeof *h);
    if (h->magic != TPROF_CHUNK_MAGIC) return "bad chunk magic";
    if (h->payload_bytes > r->size - pos - sizeof *h) return "chunk runs past the end of the file";
    if (tprof__crc32(0, r->map + pos + sizeof *h, h->payload_bytes) != h->crc32)
        return "chunk checksum mismatch";
    return NULL;
}

static int valid_chunk_after(const tprof_reader *r, size_t pos) {
    tprof_chunk_header h;
    for (; pos + sizeof h <= r->size; pos += 8) {
        uint32_t magic;
        memcpy(&magic, r->map + pos, sizeof magic);
        if (magic == TPROF_CHUNK_MAGIC && !check_chunk(r, pos, &h)) return 1;
    }
    return 0;
}

/* The records of a compressed chunk whose checksum matched, decompressed into r->zbuf:
 * NULL with a reason in why when the payload is not what the format says (damage), or
 * with *skip set when this build cannot decompress it. */
static const uint8_t *unpack(tprof_reader *r, const uint8_t *p, size_t n, size_t *len,
                             int *skip, char *why, size_t whylen) {
    tprof_zchunk zh;
    *skip = 0;
    if (n < sizeof zh) {
        snprintf(why, whylen, "compressed chunk shorter than its prefix");
        return NULL;
    }
    memcpy(&zh, p, sizeof zh);
    if (zh.zstd_bytes > n - sizeof zh || zh.raw_bytes == 0 || (zh.raw_bytes & 7) ||
        zh.raw_bytes > TPROF_CHUNK_RAW_MAX) {
        snprintf(why, whylen, "compressed chunk claims %u bytes in a %u-byte frame", zh.raw_bytes,
                 zh.zstd_bytes);
        return NULL;
    }
#if TPROF_HAVE_ZSTD
    if (!r->dctx && !(r->dctx = ZSTD_createDCtx())) {
        r->nomem++;
        snprintf(why, whylen, "compressed chunk: no memory to decompress");
        return NULL;
    }
    if (zh.raw_bytes > r->zcap) {
        uint8_t *b = realloc(r->zbuf, zh.raw_bytes);
        if (!b) {
            r->nomem++;
            snprintf(why, whylen, "compressed chunk: no memory for %u bytes", zh.raw_bytes);
            return NULL;
        }
        r->zbuf = b;
        r->zcap = zh.raw_bytes;
    }
    /* the frame must say the same size: one frame, nothing more, nothing less */
    unsigned long long fc = ZSTD_getFrameContentSize(p + sizeof zh, zh.zstd_bytes);
    if (fc != zh.raw_bytes) {
        const char *what = fc == ZSTD_CONTENTSIZE_ERROR     ? "unreadable"
                           : fc == ZSTD_CONTENTSIZE_UNKNOWN ? "absent"
                                                            : "differs";
        snprintf(why, whylen, "compressed chunk: frame content size %s, prefix says %u", what,
                 zh.raw_bytes);
        return NULL;
    }
    size_t got = ZSTD_decompressDCtx(r->dctx, r->zbuf, zh.raw_bytes, p + sizeof zh, zh.zstd_bytes);
    if (ZSTD_isError(got) || got != zh.raw_bytes) {
        snprintf(why, whylen, "compressed chunk does not decompress (zstd: %s)",
                 ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short");
        return NULL;
    }
    *len = got;
    return r->zbuf;
#else
    (void)r;
    (void)len;
    (void)why;
    (void)whylen;
    *skip = 1;
    return NULL;
#endif
}

int tprof__reader_next(tprof_reader *r, tprof_chunk *c) {
    while (r->pos < r->size) {
        tprof_chunk_header h;
        memset(&h, 0, sizeof h);
        const char *bad = check_chunk(r, r->pos, &h);
        if (!bad) {
            r->in_bad_run = 0;
            size_t at = r->pos;
            const uint8_t *payload = r->map + at + sizeof h;
            r->pos += sizeof h + tprof__align8(h.payload_bytes);
            c->thread_serial = h.thread_serial;
            c->os_tid = h.os_tid;
            c->dropped = h.dropped;
            c->data = payload;
            c->len = h.payload_bytes;
            c->file_offset = at;
            c->stored = h.payload_bytes;
            c->compressed = 0;
            if (h.flags & TPROF_CHUNK_F_ZSTD) {
                char why[120];
                int skip;
                c->compressed = 1;
                c->data = unpack(r, payload, h.payload_bytes, &c->len, &skip, why, sizeof why);
                if (!c->data) {
                    if (skip) r->zskipped++;
                    else add_damage(r, at, why);
                    continue; /* the next chunk: this one is whole, only its content is bad */
                }
            }
            return 1;
        }
        /* A torn tail is the normal end of a killed process: a header that starts here
         * with the right magic but runs past the end, and no valid chunk after it (else
         * the length field itself was damaged: resynchronise below). */
        if (h.magic == TPROF_CHUNK_MAGIC && r->size - r->pos >= sizeof h &&
            h.payload_bytes > r->size - r->pos - sizeof h && !valid_chunk_after(r, r->pos + 8)) {
            char what[120];
            snprintf(what, sizeof what, "torn tail: last chunk cut short (%zu of %zu bytes)",
                     r->size - r->pos - sizeof h, (size_t)h.payload_bytes);
            add_damage(r, r->pos, what);
            r->pos = r->size;
            return 0;
        }
        if (r->size - r->pos < sizeof h) {
            add_damage(r, r->pos, "torn tail: truncated chunk header");
            r->pos = r->size;
            return 0;
        }
        if (!r->in_bad_run) add_damage(r, r->pos, bad);
        r->in_bad_run = 1;
        r->pos += 8; /* chunks start 8-byte aligned: resynchronise */
    }
    return 0;
}
