/*
 * synth.c — the synthetic rank-file writer of synth.h.
 *
 * It builds records byte for byte from the structs of format.h rather than calling the
 * library's writer, so that tests of the reader, model and exporters depend only on the
 * documented layout, and can write what the library never would (unknown kinds, ends
 * before starts, damaged chunks).
 */
#define _GNU_SOURCE
#include "synth.h"

#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/format.h"

typedef struct sbuf {
    uint32_t serial, os_tid;
    uint64_t dropped;
    uint8_t *data;
    size_t len, cap;
} sbuf;

struct synth_file {
    FILE *f;
    char *path;
    tprof_file_header hdr;
    uint64_t offset;
    sbuf *bufs; /* in order of first use, so chunk order is predictable */
    size_t nbufs;
    char err[200]; /* first failure; "" while all is well */
};

static void fail(synth_file *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(synth_file *f, const char *fmt, ...) {
    if (f->err[0]) return; /* keep the first: later ones are usually consequences */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->err, sizeof f->err, fmt, ap);
    va_end(ap);
}

static void copy_field(char *dst, size_t n, const char *s) {
    memset(dst, 0, n);
    if (s) strncpy(dst, s, n - 1);
}

synth_file *synth_open_ex(const char *dir, const synth_header *h) {
    synth_file *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    const char *host = h->host ? h->host : "";
    int n = h->file_name ? snprintf(NULL, 0, "%s/%s", dir, h->file_name)
                         : snprintf(NULL, 0, "%s/%s-%d.tprof", dir, host, (int)h->pid);
    f->path = malloc((size_t)n + 1);
    if (!f->path) {
        free(f);
        return NULL;
    }
    if (h->file_name) snprintf(f->path, (size_t)n + 1, "%s/%s", dir, h->file_name);
    else snprintf(f->path, (size_t)n + 1, "%s/%s-%d.tprof", dir, host, (int)h->pid);

    tprof_file_header *fh = &f->hdr;
    memset(fh, 0, sizeof *fh);
    memcpy(fh->magic, TPROF_FILE_MAGIC, 8);
    fh->version = TPROF_FORMAT_VERSION;
    fh->header_bytes = sizeof *fh;
    fh->start_realtime_ns = h->start_realtime_ns;
    fh->start_mono_ns = h->start_mono_ns;
    fh->pid = h->pid;
    fh->ppid = h->ppid;
    copy_field(fh->host, sizeof fh->host, host);
    copy_field(fh->run_id, sizeof fh->run_id, h->run_id);
    copy_field(fh->build, sizeof fh->build, h->build ? h->build : "synth");
    fh->header_crc = tprof__crc32(0, fh, offsetof(tprof_file_header, header_crc));

    f->f = fopen(f->path, "wb");
    if (!f->f || fwrite(fh, sizeof *fh, 1, f->f) != 1) {
        fprintf(stderr, "synth: cannot write %s: %s\n", f->path, strerror(errno));
        if (f->f) fclose(f->f);
        free(f->path);
        free(f);
        return NULL;
    }
    f->offset = sizeof *fh;
    return f;
}

synth_file *synth_open(const char *dir, const char *host, int32_t pid,
                       uint64_t start_realtime_ns, uint64_t start_mono_ns) {
    synth_header h = {host, pid, 1, start_realtime_ns, start_mono_ns, "synth-run", NULL, NULL};
    return synth_open_ex(dir, &h);
}

const char *synth_path(const synth_file *f) { return f->path; }
uint64_t synth_offset(const synth_file *f) { return f->offset; }

static sbuf *buf_for(synth_file *f, uint32_t serial) {
    for (size_t i = 0; i < f->nbufs; i++)
        if (f->bufs[i].serial == serial) return &f->bufs[i];
    sbuf *nb = realloc(f->bufs, (f->nbufs + 1) * sizeof *nb);
    if (!nb) {
        fail(f, "out of memory");
        return NULL;
    }
    f->bufs = nb;
    sbuf *b = &nb[f->nbufs++];
    memset(b, 0, sizeof *b);
    b->serial = serial;
    /* the library's process stream carries the pid; an undeclared thread gets a distinct,
     * predictable tid */
    b->os_tid = (uint32_t)f->hdr.pid + serial;
    return b;
}

void synth_thread(synth_file *f, uint32_t serial, uint32_t os_tid) {
    sbuf *b = buf_for(f, serial);
    if (b) b->os_tid = os_tid;
}

void synth_set_dropped(synth_file *f, uint32_t serial, uint64_t dropped) {
    sbuf *b = buf_for(f, serial);
    if (b) b->dropped = dropped;
}

void synth_raw(synth_file *f, uint32_t serial, uint16_t kind, uint32_t arg, uint64_t ts,
               const void *pl, size_t pl_len, const void *tail, size_t tail_len) {
    size_t body = sizeof(tprof_rec) + pl_len + tail_len;
    size_t size = tprof__align8(body);
    if (size > TPROF_MAX_RECORD) {
        fail(f, "record of kind %u is %zu bytes, over the format's limit", kind, size);
        return;
    }
    sbuf *b = buf_for(f, serial);
    if (!b) return;
    if (b->len + size > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + size) cap *= 2;
        uint8_t *nd = realloc(b->data, cap);
        if (!nd) {
            fail(f, "out of memory");
            return;
        }
        b->data = nd;
        b->cap = cap;
    }
    uint8_t *p = b->data + b->len;
    memset(p, 0, size);
    tprof_rec r = {kind, (uint16_t)size, arg, ts};
    memcpy(p, &r, sizeof r);
    if (pl_len) memcpy(p + sizeof r, pl, pl_len);
    if (tail_len) memcpy(p + sizeof r + pl_len, tail, tail_len);
    b->len += size;
}

/* A named record with its name inline (NUL included), truncated like the library does. */
static void named(synth_file *f, uint32_t serial, uint16_t kind, uint64_t ts, const void *pl,
                  size_t pl_len, const char *name) {
    if (!name) name = "";
    size_t n = strlen(name);
    if (n > TPROF_MAX_INLINE) n = TPROF_MAX_INLINE;
    char *tmp = malloc(n + 1);
    if (!tmp) {
        fail(f, "out of memory");
        return;
    }
    memcpy(tmp, name, n);
    tmp[n] = 0;
    synth_raw(f, serial, kind, TPROF_INLINE_NAME, ts, pl, pl_len, tmp, n + 1);
    free(tmp);
}

void synth_string(synth_file *f, uint32_t serial, uint32_t id, const char *s) {
    synth_raw(f, serial, TPROF_REC_STRING, id, 0, NULL, 0, s, strlen(s) + 1);
}

void synth_push(synth_file *f, uint32_t serial, uint64_t ts, const char *name,
                uint32_t domain, uint32_t category) {
    tprof_pl_push pl = {domain, category};
    named(f, serial, TPROF_REC_PUSH, ts, &pl, sizeof pl, name);
}

void synth_push_sid(synth_file *f, uint32_t serial, uint64_t ts, uint32_t string_id,
                    uint32_t domain, uint32_t category) {
    tprof_pl_push pl = {domain, category};
    synth_raw(f, serial, TPROF_REC_PUSH, string_id, ts, &pl, sizeof pl, NULL, 0);
}

void synth_pop(synth_file *f, uint32_t serial, uint64_t ts, uint32_t domain) {
    synth_raw(f, serial, TPROF_REC_POP, domain, ts, NULL, 0, NULL, 0);
}

void synth_start(synth_file *f, uint32_t serial, uint64_t ts, uint64_t id, const char *name,
                 uint32_t domain, uint32_t category) {
    tprof_pl_start pl = {id, domain, category};
    named(f, serial, TPROF_REC_START, ts, &pl, sizeof pl, name);
}

void synth_end(synth_file *f, uint32_t serial, uint64_t ts, uint64_t id) {
    tprof_pl_u64 pl = {id};
    synth_raw(f, serial, TPROF_REC_END, 0, ts, &pl, sizeof pl, NULL, 0);
}

void synth_mark(synth_file *f, uint32_t serial, uint64_t ts, const char *name,
                uint32_t domain, uint32_t category) {
    tprof_pl_push pl = {domain, category};
    named(f, serial, TPROF_REC_MARK, ts, &pl, sizeof pl, name);
}

void synth_counter(synth_file *f, uint32_t serial, uint64_t ts, const char *name,
                   double value) {
    tprof_pl_counter pl = {value};
    named(f, serial, TPROF_REC_COUNTER, ts, &pl, sizeof pl, name);
}

void synth_step_begin(synth_file *f, uint32_t serial, uint64_t ts, uint64_t step) {
    tprof_pl_u64 pl = {step};
    synth_raw(f, serial, TPROF_REC_STEP_BEGIN, 0, ts, &pl, sizeof pl, NULL, 0);
}

void synth_step_end(synth_file *f, uint32_t serial, uint64_t ts, uint64_t step) {
    tprof_pl_u64 pl = {step};
    synth_raw(f, serial, TPROF_REC_STEP_END, 0, ts, &pl, sizeof pl, NULL, 0);
}

void synth_thread_name(synth_file *f, uint32_t serial, uint64_t ts, uint64_t named_tid,
                       const char *name) {
    tprof_pl_u64 pl = {named_tid};
    synth_raw(f, serial, TPROF_REC_THREAD_NAME, 0, ts, &pl, sizeof pl, name, strlen(name) + 1);
}

void synth_kernel(synth_file *f, uint32_t serial, uint64_t start, uint64_t end, uint32_t device,
                  uint32_t stream, uint32_t correlation, const char *name) {
    tprof_pl_gpu pl = {end, 0, device, stream, correlation, 0, 0, 0};
    named(f, serial, TPROF_REC_GPU_KERNEL, start, &pl, sizeof pl, name);
}

void synth_api(synth_file *f, uint32_t serial, uint64_t start, uint64_t end, uint32_t os_tid,
               uint32_t cbid, uint32_t correlation, const char *name) {
    tprof_pl_gpu pl = {end, 0, 0, 0, correlation, cbid, os_tid, 0};
    named(f, serial, TPROF_REC_GPU_API, start, &pl, sizeof pl, name);
}

void synth_comm(synth_file *f, uint32_t serial, uint64_t start, const struct tprof_pl_comm *pl,
                const char *name) {
    named(f, serial, TPROF_REC_COMM_OP, start, pl, sizeof *pl,
          name ? name : tprof__comm_op_name(pl->op));
}

void synth_mpi_barrier(synth_file *f, uint32_t serial, uint64_t comm, uint32_t seq,
                       uint32_t rank, uint32_t nranks, uint64_t start, uint64_t end) {
    tprof_pl_comm c;
    memset(&c, 0, sizeof c);
    c.op = TPROF_COMM_BARRIER;
    c.comm_hash = comm;
    c.seq = seq;
    c.nranks = nranks;
    c.rank = rank;
    c.end_ns = end;
    c.peer = TPROF_COMM_NO_PEER;
    c.source = TPROF_COMM_SRC_MPI;
    synth_comm(f, serial, start, &c, NULL);
}

void synth_meta(synth_file *f, const char *key, const char *value) {
    size_t kl = strlen(key) + 1, vl = strlen(value) + 1;
    char *kv = malloc(kl + vl);
    if (!kv) {
        fail(f, "out of memory");
        return;
    }
    memcpy(kv, key, kl);
    memcpy(kv + kl, value, vl);
    synth_raw(f, 0, TPROF_REC_META, 0, f->hdr.start_mono_ns, NULL, 0, kv, kl + vl);
    free(kv);
}

void synth_rank(synth_file *f, int rank, int world_size) {
    char v[24];
    snprintf(v, sizeof v, "%d", rank);
    synth_meta(f, "rank", v);
    snprintf(v, sizeof v, "%d", world_size);
    synth_meta(f, "world_size", v);
}

void synth_domain(synth_file *f, uint32_t id, const char *name) {
    synth_raw(f, 0, TPROF_REC_DOMAIN, id, f->hdr.start_mono_ns, NULL, 0, name,
              strlen(name) + 1);
}

void synth_category(synth_file *f, uint32_t domain, uint32_t id, const char *name) {
    tprof_pl_category pl = {domain, 0};
    synth_raw(f, 0, TPROF_REC_CATEGORY, id, f->hdr.start_mono_ns, &pl, sizeof pl, name,
              strlen(name) + 1);
}

void synth_clock(synth_file *f, uint64_t ts, uint64_t realtime_ns, uint64_t mono_ns) {
    tprof_pl_clock pl = {realtime_ns, mono_ns, 0};
    /* the library writes the whole struct (dropped_total 0), so do the same */
    synth_raw(f, 0, TPROF_REC_CLOCK, 0, ts, &pl, sizeof pl, NULL, 0);
}

void synth_end_of_file(synth_file *f, uint64_t mono_ns, uint64_t dropped_total) {
    tprof_pl_clock pl = {mono_ns - f->hdr.start_mono_ns + f->hdr.start_realtime_ns, mono_ns,
                         dropped_total};
    synth_raw(f, 0, TPROF_REC_END_OF_FILE, 0, mono_ns, &pl, sizeof pl, NULL, 0);
}

static void flush_buf(synth_file *f, sbuf *b) {
    if (!b->len || f->err[0]) return;
    tprof_chunk_header h = {TPROF_CHUNK_MAGIC, (uint32_t)b->len, tprof__crc32(0, b->data, b->len),
                            b->serial, b->os_tid, 0, b->dropped};
    /* records are multiples of 8 bytes, so the payload needs no padding after it */
    if (fwrite(&h, sizeof h, 1, f->f) != 1 || fwrite(b->data, b->len, 1, f->f) != 1) {
        fail(f, "write %s: %s", f->path, strerror(errno));
        return;
    }
    f->offset += sizeof h + b->len;
    b->len = 0;
}

void synth_flush(synth_file *f) {
    for (size_t i = 0; i < f->nbufs; i++) flush_buf(f, &f->bufs[i]);
    if (fflush(f->f) != 0) fail(f, "flush %s: %s", f->path, strerror(errno));
}

void synth_flush_thread(synth_file *f, uint32_t serial) {
    for (size_t i = 0; i < f->nbufs; i++)
        if (f->bufs[i].serial == serial) flush_buf(f, &f->bufs[i]);
    if (fflush(f->f) != 0) fail(f, "flush %s: %s", f->path, strerror(errno));
}

int synth_close(synth_file *f) {
    if (!f) return -1;
    synth_flush(f);
    if (fclose(f->f) != 0) fail(f, "close %s: %s", f->path, strerror(errno));
    int rc = f->err[0] ? -1 : 0;
    if (rc) fprintf(stderr, "synth: %s\n", f->err);
    for (size_t i = 0; i < f->nbufs; i++) free(f->bufs[i].data);
    free(f->bufs);
    free(f->path);
    free(f);
    return rc;
}

/* ------------------------------------------------------------------ damage */

int64_t synth_file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

static int64_t resolve(const char *path, int64_t offset) {
    if (offset >= 0) return offset;
    int64_t size = synth_file_size(path);
    return size < 0 || -offset > size ? -1 : size + offset;
}

int synth_truncate(const char *path, int64_t offset) {
    int64_t at = resolve(path, offset);
    return at < 0 ? -1 : truncate(path, (off_t)at);
}

int synth_flip_byte(const char *path, int64_t offset, uint8_t xor_mask) {
    int64_t at = resolve(path, offset);
    if (at < 0) return -1;
    FILE *fp = fopen(path, "r+b");
    if (!fp) return -1;
    int rc = -1;
    if (fseeko(fp, (off_t)at, SEEK_SET) == 0) {
        int c = fgetc(fp);
        if (c != EOF && fseeko(fp, (off_t)at, SEEK_SET) == 0 &&
            fputc((unsigned char)c ^ xor_mask, fp) != EOF)
            rc = 0;
    }
    if (fclose(fp) != 0) rc = -1;
    return rc;
}

/* ------------------------------------------------------------------ scratch directories */

int synth_tmpdir(char *out, size_t n, const char *tag) {
    const char *base = getenv("TPROF_TEST_TMP");
    if (!base || !*base) base = "/tmp";
    mkdir(base, 0777); /* ctest creates it; a manual run may not have */
    int w = snprintf(out, n, "%s/%s-XXXXXX", base, tag ? tag : "synth");
    if (w < 0 || (size_t)w >= n) return -1;
    return mkdtemp(out) ? 0 : -1;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

int synth_rmtree(const char *dir) {
    return nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}
