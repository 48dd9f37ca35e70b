/*
 * writer.c — the rank file's writer (writer.h): creation, the check that the descriptor is
 * still ours before each write, reopening by path, and writing on after errors with every
 * lost chunk counted and the file cut back to whole chunks. It also owns the reserved range
 * of descriptors that every descriptor the library keeps lives in.
 *
 * Runs on the flusher thread only; the few fields other threads read (the path, whether
 * writing fails) are published with atomics.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "capture_ctl.h"
#include "config.h"
#include "../format/zchunk.h"
#include "internal.h"
#include "writer.h"

/* ------------------------------------------------------------ private descriptors */

#define TPROF__FD_RANGE 64
#define TPROF__FD_TOP_MAX 4096

int tprof__fd_reserved_base(void) {
    struct rlimit rl;
    rlim_t top = TPROF__FD_TOP_MAX;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < TPROF__FD_TOP_MAX)
        top = rl.rlim_cur;
    long base = (long)top - TPROF__FD_RANGE;
    if (base < (long)top / 2) base = (long)top / 2; /* a tiny table: its upper half */
    return base < 3 ? 3 : (int)base;
}

int tprof__fd_private(int fd) {
    if (fd < 0) return fd;
    int base = tprof__fd_reserved_base();
    if (fd >= base) {
        int fl = fcntl(fd, F_GETFD);
        if (fl >= 0 && !(fl & FD_CLOEXEC)) fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
        return fd;
    }
    int hi = fcntl(fd, F_DUPFD_CLOEXEC, base);
    if (hi < 0) {
        /* the range is full, or the limit was lowered below it: keep the low number */
        int fl = fcntl(fd, F_GETFD);
        if (fl >= 0 && !(fl & FD_CLOEXEC)) fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
        return fd;
    }
    close(fd);
    return hi;
}

int tprof__open_private(const char *path, int flags, unsigned mode) {
    return tprof__fd_private(open(path, flags | O_CLOEXEC, (mode_t)mode));
}

/* ------------------------------------------------------------------- the writer */

#define TPROF__RETRY_FIRST_NS 50000000ull  /* 50 ms after the first error */
#define TPROF__RETRY_MAX_NS 2000000000ull  /* doubling up to 2 s */
#define TPROF__HIST 64 /* chunks the final counts may cut to fit (one almost always does) */

static struct {
    char dir[PATH_MAX];
    char run_id[64];
    uint64_t start_rt, start_mono;
    int no_file;
    char path[PATH_MAX];
    _Atomic int path_set;      /* path holds the created file's name (release) */
    int fd;                    /* -1: none, or found not ours */
    dev_t dev;
    ino_t ino;
    uint64_t end;              /* bytes of header and whole chunks in the file */
    _Atomic int create_failed; /* a permanent failure to create: nothing is written */
    _Atomic int failing;
    uint64_t retry_at, backoff; /* no attempt before retry_at (CLOCK_MONOTONIC ns) */
    int force;                 /* next attempt ignores retry_at */
    int logged_error, logged_reopen;
    uint64_t last_proc_dropped; /* `dropped` of the last process-stream chunk written */
    tprof__writer_stats st;
    int status_dirty;          /* st changed since the metadata was last written */
    int create_errno;          /* why the file could not be created yet (0: no failure) */
    /* The last chunks written, newest last: where each starts and what it holds, so that
     * the final counts can make room for themselves by cutting whole chunks off the end. */
    struct {
        uint64_t off, records, bytes;
        int status; /* a chunk of counts: ours, not the program's records */
    } hist[TPROF__HIST];
    unsigned nhist;
    /* Compression (format/zchunk.h): the level asked for (0: off), whether libzstd was
     * tried yet (on the flusher, at the first chunk), the context, and the one output
     * buffer every chunk is compressed into. */
    int zlevel, ztried;
    tprof__zc zc;
    uint8_t *zbuf;
    size_t zcap;
} W = {.fd = -1, .zlevel = 1};

void tprof__writer_setup(const char *dir, const char *run_id, uint64_t start_realtime_ns,
                         uint64_t start_mono_ns, int no_file) {
    snprintf(W.dir, sizeof W.dir, "%s", dir ? dir : "");
    snprintf(W.run_id, sizeof W.run_id, "%s", run_id ? run_id : "");
    W.start_rt = start_realtime_ns;
    W.start_mono = start_mono_ns;
    W.no_file = no_file;
    /* read here, on the thread that starts the session: the flusher reads no environment */
    uint64_t lv;
    W.zlevel = tprof__env_uint(TPROF__OPT_COMPRESS, &lv) ? (int)lv : 1;
}

/* Decides compression once, on the flusher before the file's first chunk (the header's
 * version says whether chunks may be compressed), and says the outcome as the capability
 * `compression`: libzstd is loaded here, not when the library is loaded. */
static void compression_setup(void) {
    if (W.ztried) return;
    W.ztried = 1;
    char why[200], line[240];
    if (W.zlevel == 0) {
        tprof__capability_of_file("compression",
                                  "off (TRAINPROF_COMPRESS=0): chunks written plain");
        return;
    }
    if (tprof__zc_open(&W.zc, W.zlevel, why, sizeof why) != TPROF_OK) {
        snprintf(line, sizeof line, "unavailable: %s; chunks written plain", why);
        tprof__log(TPROF_LOG_INFO, "rank file compression %s", line);
        tprof__capability_of_file("compression", line);
        return;
    }
    snprintf(line, sizeof line, "zstd level %d", W.zlevel);
    tprof__capability_of_file("compression", line);
}

/* The chunk's payload as written: compressed into W.zbuf when that makes it shorter (the
 * flags and length of *ch say so), else the records themselves. */
static const void *pack_chunk(tprof_chunk_header *ch, const void *data, size_t len) {
    if (!W.zc.cctx || len < 256 || len > TPROF_CHUNK_RAW_MAX) return data; /* small: no gain */
    size_t need = tprof__zc_bound(len);
    if (need > W.zcap) {
        /* grows to the largest chunk once (4 MiB and a little): then reused */
        uint8_t *b = realloc(W.zbuf, need);
        if (!b) return data;
        W.zbuf = b;
        W.zcap = need;
    }
    size_t n = tprof__zc_pack(&W.zc, data, len, W.zbuf, W.zcap);
    if (!n) return data;
    ch->payload_bytes = (uint32_t)n;
    ch->flags = TPROF_CHUNK_F_ZSTD;
    ch->crc32 = tprof__crc32(0, W.zbuf, n);
    return W.zbuf;
}

const char *tprof__writer_path(void) {
    return atomic_load_explicit(&W.path_set, memory_order_acquire) ? W.path : NULL;
}

int tprof__writer_failing(void) { return atomic_load(&W.failing) || W.create_failed; }

void tprof__writer_get_stats(tprof__writer_stats *out) { *out = W.st; }

void tprof__writer_retry_now(void) { W.force = 1; }

static const char *errno_name(int e, char *buf, size_t n) {
    switch (e) {
#define N(x) \
    case x:  \
        return #x;
        N(ENOSPC) N(EDQUOT) N(EFBIG) N(EIO) N(EROFS) N(ENOENT) N(ESTALE) N(EBADF) N(EPIPE)
        N(EINVAL) N(EACCES) N(EPERM) N(ENXIO) N(EAGAIN) N(ENOMEM) N(ENOTCONN) N(ETIMEDOUT)
        N(EMFILE) N(ENFILE)
#undef N
    }
    snprintf(buf, n, "errno %d", e);
    return buf;
}

int tprof__fd_is(int fd, uint64_t dev, uint64_t ino, uint64_t *size) {
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_dev != dev ||
        (uint64_t)st.st_ino != ino)
        return 0;
    if (size) *size = (uint64_t)st.st_size;
    return 1;
}

/* The descriptor is the file this writer created. Its size in *size when wanted. */
static int ours_sized(int fd, uint64_t *size) {
    return tprof__fd_is(fd, (uint64_t)W.dev, (uint64_t)W.ino, size);
}

static int ours(int fd) { return ours_sized(fd, NULL); }

void tprof__writer_emergency(const void *buf, size_t n) {
    int fd = W.fd;
    if (!ours(fd)) return;
    ssize_t w = write(fd, buf, n);
    (void)w;
}

static void fill_header(tprof_file_header *h) {
    memset(h, 0, sizeof *h);
    memcpy(h->magic, TPROF_FILE_MAGIC, 8);
    /* version 1 readers read a file with no compressed chunk */
    h->version = W.zc.cctx ? TPROF_FORMAT_VERSION : TPROF_FORMAT_VERSION_MIN;
    h->header_bytes = sizeof *h;
    h->start_realtime_ns = W.start_rt;
    h->start_mono_ns = W.start_mono;
    h->pid = (int32_t)getpid();
    h->ppid = (int32_t)getppid();
    gethostname(h->host, sizeof h->host - 1);
    snprintf(h->run_id, sizeof h->run_id, "%s", W.run_id);
    snprintf(h->build, sizeof h->build, "trainprof %s", TPROF_VERSION_STRING);
    h->header_crc = tprof__crc32(0, h, offsetof(tprof_file_header, header_crc));
}

/* Each write system call takes at most this much, so that a waiting thread sees progress
 * (tprof__flusher_io_end) at least this often on storage that is slow but answers. */
#define TPROF__WRITE_STEP (1u << 20)

/* writev of everything to our file, continuing after short writes, checking before each
 * step that the descriptor is still ours (the program may close it meanwhile: the rest of
 * the chunk must not go to what it opens under that number). 0, or -1 with errno (EBADF
 * for a descriptor no longer ours). A write that makes no progress is an error (EIO), never
 * a loop. */
static int write_all(int fd, const struct iovec *iov, int n) {
    struct iovec v[4];
    memcpy(v, iov, (size_t)n * sizeof *v);
    int i = 0;
    while (i < n && v[i].iov_len == 0) i++;
    while (i < n) {
        struct iovec part[4];
        int k = 0;
        size_t budget = TPROF__WRITE_STEP;
        for (int j = i; j < n && budget; j++) {
            size_t l = v[j].iov_len < budget ? v[j].iov_len : budget;
            part[k++] = (struct iovec){v[j].iov_base, l};
            budget -= l;
        }
        if (!ours(fd)) {
            errno = EBADF;
            return -1;
        }
        tprof__flusher_io_begin();
        ssize_t w = writev(fd, part, k);
        int e = errno;
        tprof__flusher_io_end();
        if (w < 0) {
            if (e == EINTR) continue;
            errno = e;
            return -1;
        }
        if (w == 0) {
            errno = EIO;
            return -1;
        }
        while (i < n && (size_t)w >= v[i].iov_len) w -= (ssize_t)v[i++].iov_len;
        if (i < n) {
            v[i].iov_base = (char *)v[i].iov_base + w;
            v[i].iov_len -= (size_t)w;
        }
        while (i < n && v[i].iov_len == 0) i++;
    }
    return 0;
}

/* The file ends at W.end again: whatever a failed write left after the last whole chunk
 * goes, so that the next chunk follows a whole one. Only on our own file (a descriptor the
 * program took over is never truncated); else the cut happens when the file is reopened. */
static void cut_back(void) {
    uint64_t size;
    if (!ours_sized(W.fd, &size) || size <= W.end) return;
    tprof__flusher_io_begin();
    int rc = ftruncate(W.fd, (off_t)W.end);
    tprof__flusher_io_end();
    /* cannot cut: the reader skips the partial chunk as damage and resynchronises */
    if (rc != 0) W.end = size;
}

/* Opens the rank file on first use: <dir>/<host>-<pid>.tprof, or .<k>.tprof when that name
 * exists (a process that exec'd keeps its pid, and its earlier image's file must survive).
 * 0, or -1 with errno. */
static int create_file(void) {
    char host[64];
    tprof__file_host(host);
    int fd = -1;
    for (int k = 0; k < 1000; k++) {
        if (k == 0)
            snprintf(W.path, sizeof W.path, "%.3900s/%.63s-%d.tprof", W.dir, host,
                     (int)getpid());
        else
            snprintf(W.path, sizeof W.path, "%.3900s/%.63s-%d.%d.tprof", W.dir, host,
                     (int)getpid(), k);
        fd = tprof__open_private(W.path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND, 0644);
        if (fd >= 0 || errno != EEXIST) break;
    }
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    W.fd = fd;
    W.dev = st.st_dev;
    W.ino = st.st_ino;
    W.end = 0; /* the header goes with the first chunk */
    atomic_store_explicit(&W.path_set, 1, memory_order_release);
    return 0;
}

/* A descriptor of our file to write to: the one we have if it is still ours, else the file
 * reopened by its path. 0, or -1 with errno. */
static int ensure_fd(void) {
    if (!atomic_load_explicit(&W.path_set, memory_order_relaxed)) {
        if (create_file() == 0) {
            if (W.create_errno) {
                /* the warning said creation; a later write error gets its own */
                W.logged_error = 0;
                tprof__log(TPROF_LOG_INFO, "created %s after retrying", W.path);
            }
            return 0;
        }
        int e = errno;
        /* a full disk or quota may free up, and so may a full descriptor table (the
         * process's, EMFILE, or the system's, ENFILE); anything else (no permission, no
         * directory) will not */
        if (e != ENOSPC && e != EDQUOT && e != EIO && e != EINTR && e != EMFILE &&
            e != ENFILE) {
            tprof__log(TPROF_LOG_ERROR, "cannot create %s: %s; nothing will be recorded",
                       W.path, strerror(e));
            W.create_failed = 1;
        } else if (!W.create_errno) {
            tprof__log(TPROF_LOG_WARN,
                       "cannot create %s yet: %s; retrying, and what is recorded meanwhile is "
                       "dropped and counted (metadata write_errors.*)",
                       W.path, strerror(e));
            W.logged_error = 1; /* this says it: no second warning for the same cause */
        }
        W.create_errno = e;
        errno = e;
        return -1;
    }
    if (ours(W.fd)) return 0;
    if (W.fd >= 0) {
        /* The program closed our descriptor (the number may now be its own pipe or socket):
         * never write to it, never close it. */
        if (!W.logged_reopen) {
            W.logged_reopen = 1;
            tprof__log(TPROF_LOG_WARN,
                       "descriptor %d of %s was closed by the program; reopening the file", W.fd,
                       W.path);
        }
        W.fd = -1;
    }
    int fd = tprof__open_private(W.path, O_WRONLY | O_APPEND, 0);
    if (fd < 0) return -1;
    W.fd = fd;
    if (!ours(fd)) {
        W.fd = -1;
        close(fd);
        errno = ESTALE; /* another file has our name now: ours was removed */
        return -1;
    }
    W.st.reopened++;
    W.status_dirty = 1;
    cut_back(); /* a chunk may have been cut short when the descriptor went */
    return 0;
}

/* Counts the records of a buffer of whole records (padding is not a record). */
static uint64_t count_records(const void *data, size_t n) {
    const uint8_t *p = data;
    uint64_t k = 0;
    size_t off = 0;
    while (off + 8 <= n) {
        const tprof_rec *r = (const tprof_rec *)(p + off);
        if (r->size < 8 || (r->size & 7) || off + r->size > n) break;
        if (r->kind != TPROF_REC_PAD) k++;
        off += r->size;
    }
    return k;
}

static void count_lost(const void *data, size_t len, uint64_t kept_records, size_t kept_bytes) {
    W.st.lost_chunks++;
    W.st.lost_records += count_records(data, len) - kept_records;
    W.st.lost_bytes += len - kept_bytes;
    W.status_dirty = 1;
}

/* Writes one chunk to our descriptor (known to be ours). 0, or -1 with errno and the file
 * cut back to its last whole chunk. */
static int put_chunk(uint32_t serial, uint32_t os_tid, uint64_t dropped, const void *data,
                     size_t len, int status) {
    tprof_chunk_header ch = {TPROF_CHUNK_MAGIC, (uint32_t)len, 0, serial, os_tid, 0, dropped};
    compression_setup();
    /* the counts' own chunks stay plain: a few hundred bytes, written when the disk is full */
    const void *stored = status ? data : pack_chunk(&ch, data, len);
    if (stored == data) ch.crc32 = tprof__crc32(0, data, len);
    tprof_file_header h;
    struct iovec v[3];
    int n = 0;
    if (W.end == 0) {
        fill_header(&h);
        v[n++] = (struct iovec){&h, sizeof h};
    }
    v[n++] = (struct iovec){&ch, sizeof ch};
    v[n++] = (struct iovec){(void *)stored, ch.payload_bytes};
    if (write_all(W.fd, v, n) != 0) {
        int e = errno;
        cut_back();
        errno = e;
        return -1;
    }
    uint64_t at = W.end == 0 ? sizeof h : W.end;
    W.end = at + sizeof ch + ch.payload_bytes;
    if (W.nhist == TPROF__HIST) {
        memmove(W.hist, W.hist + 1, (TPROF__HIST - 1) * sizeof W.hist[0]);
        W.nhist--;
    }
    W.hist[W.nhist].off = at;
    W.hist[W.nhist].records = status ? 0 : count_records(data, len);
    W.hist[W.nhist].bytes = len;
    W.hist[W.nhist].status = status;
    W.nhist++;
    if (serial == 0) W.last_proc_dropped = dropped;
    return 0;
}

static size_t put_meta(uint8_t *out, size_t cap, const char *key, const char *value) {
    size_t kl = strlen(key), vl = strlen(value);
    size_t total = tprof__align8(sizeof(tprof_rec) + kl + 1 + vl + 1);
    if (total > cap) return 0;
    memset(out, 0, total);
    tprof_rec *r = (tprof_rec *)out;
    r->kind = TPROF_REC_META;
    r->size = (uint16_t)total;
    r->ts_ns = tprof__now();
    memcpy(out + sizeof *r, key, kl);
    memcpy(out + sizeof *r + kl + 1, value, vl);
    return total;
}

/* The counts as process-stream metadata, in a chunk of their own built now, so that in file
 * order they only grow (the last value of a key is the one a reader keeps). */
static void put_status(void) {
    if (!W.status_dirty || W.fd < 0) return;
    _Alignas(8) uint8_t buf[1024];
    size_t n = 0;
    char v[64], name[32];
    if (W.st.lost_chunks) {
        snprintf(v, sizeof v, "%llu", (unsigned long long)W.st.lost_chunks);
        n += put_meta(buf + n, sizeof buf - n, "write_errors.chunks", v);
        snprintf(v, sizeof v, "%llu", (unsigned long long)W.st.lost_records);
        n += put_meta(buf + n, sizeof buf - n, "write_errors.records", v);
        snprintf(v, sizeof v, "%llu", (unsigned long long)W.st.lost_bytes);
        n += put_meta(buf + n, sizeof buf - n, "write_errors.bytes", v);
        n += put_meta(buf + n, sizeof buf - n, "write_errors.first_errno",
                      errno_name(W.st.first_errno, name, sizeof name));
        n += put_meta(buf + n, sizeof buf - n, "write_errors.first_error",
                      strerror(W.st.first_errno));
    }
    if (W.st.reopened) {
        snprintf(v, sizeof v, "%llu", (unsigned long long)W.st.reopened);
        n += put_meta(buf + n, sizeof buf - n, "rank_file.reopened", v);
    }
    if (n && put_chunk(0, (uint32_t)getpid(), W.last_proc_dropped, buf, n, 1) == 0)
        W.status_dirty = 0;
}

/* A chunk that could not be written: counted (unless the caller keeps it), logged once,
 * and writing backs off. */
static int failed(int e, const void *data, size_t len, int keep) {
    uint64_t now = tprof__now();
    W.backoff = atomic_load(&W.failing) ? W.backoff * 2 : TPROF__RETRY_FIRST_NS;
    if (W.backoff > TPROF__RETRY_MAX_NS) W.backoff = TPROF__RETRY_MAX_NS;
    W.retry_at = now + W.backoff;
    atomic_store(&W.failing, 1);
    if (!W.st.first_errno) W.st.first_errno = e;
    if (!keep) count_lost(data, len, 0, 0);
    if (!W.logged_error) {
        W.logged_error = 1;
        char name[32];
        tprof__log(TPROF_LOG_WARN,
                   "cannot write %s: %s (%s); what cannot be written is dropped and counted "
                   "(metadata write_errors.*), and writing is retried",
                   W.path, strerror(e), errno_name(e, name, sizeof name));
    }
    /* the space the failed chunk held may take the counts */
    if (W.fd >= 0 && ours(W.fd)) put_status();
    return TPROF_ERR_IO;
}

int tprof__writer_chunk(uint32_t serial, uint32_t os_tid, uint64_t dropped, const void *data,
                        size_t len, int keep) {
    if (W.no_file) return 0;
    if (W.create_failed) return TPROF_ERR_IO; /* said once; there is no file to count into */
    int force = W.force;
    W.force = 0;
    if (atomic_load_explicit(&W.failing, memory_order_relaxed) && !force &&
        tprof__now() < W.retry_at) {
        if (!keep) count_lost(data, len, 0, 0);
        return TPROF_ERR_IO;
    }
    if (ensure_fd() != 0) {
        int e = errno;
        if (W.create_failed) return TPROF_ERR_IO;
        return failed(e, data, len, keep);
    }
    if (put_chunk(serial, os_tid, dropped, data, len, 0) != 0)
        return failed(errno, data, len, keep);
    if (atomic_load_explicit(&W.failing, memory_order_relaxed)) {
        atomic_store(&W.failing, 0);
        W.backoff = 0;
    }
    put_status();
    return 0;
}

/* Keeps the name definitions of a chunk that was not written in t->w_defs; returns how
 * many records (and bytes) were kept. */
static uint64_t keep_defs(tprof__thread *t, const uint8_t *p, size_t n, size_t *kept_bytes) {
    uint64_t k = 0;
    size_t off = 0;
    *kept_bytes = 0;
    while (off + 8 <= n) {
        const tprof_rec *r = (const tprof_rec *)(p + off);
        if (r->size < 8 || (r->size & 7) || off + r->size > n) break;
        if (r->kind == TPROF_REC_STRING || r->kind == TPROF_REC_THREAD_NAME) {
            if (t->w_defs_len + r->size > t->w_defs_cap) {
                size_t cap = t->w_defs_cap ? t->w_defs_cap * 2 : 4096;
                while (cap < t->w_defs_len + r->size) cap *= 2;
                uint8_t *b = realloc(t->w_defs, cap);
                if (!b) break; /* the rest is lost, and counted so */
                t->w_defs = b;
                t->w_defs_cap = cap;
            }
            memcpy(t->w_defs + t->w_defs_len, r, r->size);
            t->w_defs_len += r->size;
            *kept_bytes += r->size;
            k++;
        }
        off += r->size;
    }
    return k;
}

int tprof__writer_thread_chunk(tprof__thread *t, uint64_t dropped, const void *data,
                               size_t len) {
    if (t->w_defs_len) {
        /* the definitions first, so that they precede their uses; kept until written */
        if (tprof__writer_chunk(t->serial, t->os_tid, dropped, t->w_defs, t->w_defs_len, 1) == 0)
            t->w_defs_len = 0;
    }
    if (t->w_defs_len == 0 && tprof__writer_chunk(t->serial, t->os_tid, dropped, data, len, 1) == 0)
        return 0;
    if (W.no_file || W.create_failed) return TPROF_ERR_IO;
    size_t kept_bytes;
    uint64_t kept = keep_defs(t, data, len, &kept_bytes);
    count_lost(data, len, kept, kept_bytes);
    return TPROF_ERR_IO;
}

void tprof__writer_thread_gone(tprof__thread *t) {
    if (t->w_defs_len) count_lost(t->w_defs, t->w_defs_len, 0, 0);
    free(t->w_defs);
    t->w_defs = NULL;
    t->w_defs_len = t->w_defs_cap = 0;
}

void tprof__writer_status(void) {
    if (W.no_file || W.create_failed || !W.status_dirty) return;
    if (ensure_fd() == 0) put_status();
}

/* Where a process that could not create its file says so without a descriptor (the reason
 * may be that it has none left): a symbolic link, <dir>/<host>-<pid>.tprof-create-failed,
 * whose target is the reason. symlink(2) takes no descriptor, and `trainprof run` reads it
 * back with readlink(2) (docs/format.md). */
static void leave_create_marker(void) {
    char host[64], path[PATH_MAX], why[160];
    tprof__file_host(host);
    snprintf(path, sizeof path, "%.3900s/%.63s-%d.tprof-create-failed", W.dir, host,
             (int)getpid());
    char name[32];
    snprintf(why, sizeof why, "%s (%s)", strerror(W.create_errno),
             errno_name(W.create_errno, name, sizeof name));
    if (symlink(why, path) != 0 && errno == EEXIST) {
        unlink(path); /* an earlier image of this pid (exec) left one */
        if (symlink(why, path) != 0) return;
    }
}

void tprof__writer_final(void) {
    if (W.no_file) return;
    if (!atomic_load_explicit(&W.path_set, memory_order_relaxed)) {
        if (W.create_errno || W.create_failed) leave_create_marker();
        return;
    }
    if (W.create_failed || !W.status_dirty || ensure_fd() != 0) return;
    put_status();
    /* The counts did not fit: the disk stayed full. Whole chunks come off the end, newest
     * first, their records counted as lost too, until the counts fit, so that the file says
     * what it misses rather than keeping records whose loss elsewhere it cannot tell. */
    while (W.status_dirty && W.nhist > 0 && ours(W.fd)) {
        unsigned i = W.nhist - 1;
        tprof__flusher_io_begin();
        int rc = ftruncate(W.fd, (off_t)W.hist[i].off);
        tprof__flusher_io_end();
        if (rc != 0) return;
        W.end = W.hist[i].off;
        W.nhist--;
        if (!W.hist[i].status) {
            W.st.lost_chunks++;
            W.st.lost_records += W.hist[i].records;
            W.st.lost_bytes += W.hist[i].bytes;
        }
        put_status();
    }
}

void tprof__writer_sync(void) {
    if (W.fd < 0 || !ours(W.fd)) return;
    tprof__flusher_io_begin();
    fsync(W.fd);
    tprof__flusher_io_end();
}

void tprof__writer_close(void) {
    if (W.fd >= 0 && ours(W.fd)) close(W.fd);
    W.fd = -1;
}

void tprof__writer_after_fork(void) {
    if (W.fd >= 0 && ours(W.fd)) close(W.fd); /* the child's copy; the parent keeps its own */
    W.fd = -1;
    W.path[0] = 0;
    atomic_store(&W.path_set, 0);
    W.end = 0;
    W.create_failed = 0;
    atomic_store(&W.failing, 0);
    W.retry_at = W.backoff = 0;
    W.force = 0;
    W.logged_error = W.logged_reopen = 0;
    W.last_proc_dropped = 0;
    memset(&W.st, 0, sizeof W.st);
    W.status_dirty = 0;
    W.create_errno = 0;
    W.nhist = 0;
}
