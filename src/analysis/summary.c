/*
 * summary.c — summary files (summary.h; docs/format.md "Summary files"): the keys that make
 * their parts valid, and reading and writing one whole. The parts themselves are coded by
 * summary_codec.c (the rank section) and summary_slim.c (the slim process).
 *
 * The file: "TPSUMARY" (8 bytes), the format version (u32), then two blocks, each its key's
 * length (u64) and the key, its body's length (u64) and CRC-32 (u32, zlib's), and the body.
 * First the slim block: the rank file's slim process (tp_sum_slim), under a key of the file
 * alone (tp_sum_slim_key), which the run's load checks before it takes the process instead of
 * decoding the file. Then the section block, which ends the file: four parts, each its length
 * (u64) and its bytes: the section's JSON, the rank result, the steps memo, the comm memo,
 * under a key that also holds what the run decided of the process and the report's options
 * (summary_key); a process other than a rank has none (key and body of length 0). Each key is
 * compared byte for byte with the one computed by the reader, so that whatever a part depends
 * on is in it once and checked the same way by writer and reader.
 */
#define _GNU_SOURCE
#include "analysis/summary.h"
#include "analysis/alloc.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "analysis/model_load.h"
#include "analysis/report.h"
#include "analysis/report_spill.h"
#include "format/format.h"
#include "format/reader.h"
#include "trainprof.h"

#define SUM_MAGIC "TPSUMARY"

/* What is read of a summary before its blocks: magic, version. */
#define SUM_HEAD (8 + 4)

/* A summary larger than this is damage (a rank's section is kilobytes to a few megabytes). */
#define SUM_MAX (1ull << 32)
/* The window through which a slim block's body is read and written (tp_sum_stream_read,
 * tp_sum_stream_write). */
#define SUM_WINDOW (64u << 10)

/* Rank file `file`'s summary's name into buf (n bytes): 0, or -1 when it does not fit (a
 * path too long has no summary). */
static int summary_name(const char *file, char *buf, size_t n) {
    int k = snprintf(buf, n, "%s%s", file, TP_SUMMARY_SUFFIX);
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

int tp_summary_path(const tp_process *p, char *buf, size_t n) {
    return summary_name(p->file ? p->file : p->path, buf, n);
}

static void put_u64(tp_sum_buf *k, uint64_t v) { tp_sum_put(k, &v, 8); }
static void put_i64(tp_sum_buf *k, int64_t v) { tp_sum_put(k, &v, 8); }

static void put_text(tp_sum_buf *k, const char *s) {
    unsigned char has = s != NULL;
    tp_sum_put(k, &has, 1);
    if (!s) return;
    put_u64(k, strlen(s));
    tp_sum_put(k, s, strlen(s));
}

/* A file as the key names it: its size and modification time now, the bytes the slim load
 * read, its header's fields (those tp_process_load_whole checks, and the rest), and what the
 * run decided of its process. -1 when the file cannot be looked at. */
static int put_file(tp_sum_buf *k, const tp_process *p) {
    struct stat st;
    if (stat(p->file ? p->file : p->path, &st) != 0) return -1;
    put_u64(k, (uint64_t)st.st_size);
    put_i64(k, (int64_t)st.st_mtim.tv_sec);
    put_i64(k, (int64_t)st.st_mtim.tv_nsec);
    put_i64(k, (int64_t)st.st_ctim.tv_sec); /* as tp_sum_slim_key: no call sets it */
    put_i64(k, (int64_t)st.st_ctim.tv_nsec);
    put_u64(k, p->file_bytes);
    const tprof_file_header *h = &p->hdr;
    tp_sum_put(k, h->magic, sizeof h->magic);
    tp_sum_put(k, &h->version, 4);
    tp_sum_put(k, &h->header_bytes, 4);
    put_u64(k, h->start_realtime_ns);
    put_u64(k, h->start_mono_ns);
    tp_sum_put(k, &h->pid, 4);
    tp_sum_put(k, &h->ppid, 4);
    tp_sum_put(k, h->host, sizeof h->host);
    tp_sum_put(k, h->run_id, sizeof h->run_id);
    tp_sum_put(k, h->build, sizeof h->build);
    tp_sum_put(k, &h->header_crc, 4);
    int v[] = {p->rank,         p->world_size, p->local_rank, p->rank_implied,
               (int)p->role,    p->helper_of,  p->launched,   p->launched_lo,
               p->launched_hi,  p->slim};
    tp_sum_put(k, v, sizeof v);
    char label[64];
    tp_process_label(p, label, sizeof label);
    put_text(k, label);
    /* what the slim load found damaged: a byte of the file changed in place with its time put
     * back (or rotted on disk) keeps its size and time, but fails its chunk's CRC */
    put_u64(k, p->ndamage);
    for (size_t i = 0; i < p->ndamage; i++) put_text(k, p->damage[i]);
    return 0;
}

/* The key of slim rank p's summary under options o into k (summary.h): 0, or -1 when a file
 * it names cannot be looked at (then no summary of p is valid). The options are those a rank
 * section reads (report.c's rank_section and stream_section, report_ranges.c): the step name,
 * the warm-up, the top rows, the data-loading names and the bound on GPU records; the other
 * fields of tp_report_opts are read by the run-level analyses alone (throughput, thresholds,
 * threads), or change no figure (stream_sections, comm_ops). A field added to tp_report_opts
 * fails the assertion below until it is placed on one side or the other. */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(tp_report_opts) == 264,
               "tp_report_opts changed: a field a rank section reads goes into summary_key");
#endif
static int summary_key(const tp_run *run, const tp_process *p, const tp_report_opts *o,
                       tp_sum_buf *k) {
    /* the machine kind: scalars are stored in its byte order and widths */
    uint32_t kind[] = {0x01020304u, (uint32_t)sizeof(void *), (uint32_t)sizeof(int),
                       (uint32_t)sizeof(long), (uint32_t)sizeof(double)};
    tp_sum_put(k, kind, sizeof kind);
    put_text(k, tprof_build_info());
    if (put_file(k, p) != 0) return -1;
    /* the NVML samples the section reads: none, its own, or another process's file */
    const tp_process *q = tp_gpu_samples_for(run, p);
    unsigned char sq = !q ? 0 : q == p ? 1 : 2;
    tp_sum_put(k, &sq, 1);
    if (sq == 2 && put_file(k, q) != 0) return -1;
    put_text(k, o->step_name);
    int nums[] = {o->warmup, o->top_n};
    tp_sum_put(k, nums, sizeof nums);
    put_u64(k, o->ndata_names);
    for (size_t i = 0; i < o->ndata_names; i++) put_text(k, o->data_names[i]);
    /* the bound on GPU records, where it cuts this file's (else it changes nothing: a bound
     * given again keeps the summaries of the files under it) */
    size_t gmax = tp_report_gpu_records(o);
    put_u64(k, p->nrec_gpu + p->nrec_api > gmax ? (uint64_t)gmax : 0);
    /* the ops whose times the comm memo holds: those the slim process kept (comm.h,
     * tp_comm_level), which another bound (TRAINPROF_COMM_KEEP) makes others */
    put_u64(k, p->comm_level);
    put_u64(k, p->ncomm);
    return k->bad ? -1 : 0;
}

/* A block's key: 1 when it is `want` (NULL: skipped unread, and taken as it), 0 when the
 * block has none (length 0), -1 when it differs or cannot be read. */
static int block_key(FILE *in, const tp_sum_buf *want) {
    uint64_t klen;
    if (fread(&klen, 8, 1, in) != 1 || klen > SUM_MAX) return -1;
    if (!klen) return 0;
    if (!want) return fseeko(in, (off_t)klen, SEEK_CUR) == 0 ? 1 : -1;
    if (klen != want->len) return -1;
    unsigned char *stored = tp_malloc(want->len);
    int ok = stored && fread(stored, 1, want->len, in) == want->len &&
             !memcmp(stored, want->b, want->len);
    free(stored);
    return ok ? 1 : -1;
}

/* A summary opened for reading, not blocking and only when it is a regular file: a FIFO (or
 * device) of that name would hold the report at its open or its first read. NULL with errno
 * ENOENT when there is none, another errno (EINVAL for a file of another type) otherwise. */
static FILE *open_regular(const char *path) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat sst;
    FILE *in = fstat(fd, &sst) == 0 && S_ISREG(sst.st_mode) ? fdopen(fd, "rb") : NULL;
    if (!in) {
        close(fd);
        errno = EINVAL;
    }
    return in;
}

static int read_body(FILE *f, tp_sum_buf *c, int last);
static int slim_body_decode(tp_run *run, FILE *f, tp_process *p);

/* Whether slim process d, decoded from a summary's slim block, stands for the rank file whose
 * slim key is k (tp_sum_slim_key: it ends with the file's header as on disk) and whose size is
 * `size`: its file size, and its header as the loader leaves it (model.c: the texts cleaned).
 * The key and the CRC vouch for the block's bytes, not for what they hold. */
static int slim_is_file(const tp_process *d, const tp_sum_buf *k, uint64_t size) {
    tprof_file_header h;
    if (d->file_bytes != size || k->len < sizeof h) return 0;
    memcpy(&h, k->b + k->len - sizeof h, sizeof h);
    tp_load_clean_field(h.host, sizeof h.host);
    tp_load_clean_field(h.run_id, sizeof h.run_id);
    tp_load_clean_field(h.build, sizeof h.build);
    return !memcmp(&h, &d->hdr, sizeof h);
}

/* Opens p's summary, checking its head and, where asked, the slim block (its key computed now
 * from p's file, its body's CRC; with decode, its body decoded and standing for the file,
 * slim_is_file) and the section's key (computed now from the run, p and the options; *f is
 * left just past it): 1 with *f open when those are valid, 0 when there is no summary (or,
 * section asked, it holds none), -1 when it is not valid. Decoding interns strings into
 * run's pool. */
static int open_checked(const tp_run *run, const tp_process *p, const tp_report_opts *o,
                        FILE **f, int slim, int section, int decode) {
    char path[4096];
    *f = NULL;
    if (tp_summary_path(p, path, sizeof path) != 0) return 0;
    FILE *in = open_regular(path);
    if (!in) return errno == ENOENT ? 0 : -1;
    tp_sum_buf key = {0}, body = {0};
    unsigned char head[SUM_HEAD] = {0};
    uint32_t version;
    uint64_t size, blen;
    uint32_t crc;
    int ok = fread(head, 1, sizeof head, in) == sizeof head && !memcmp(head, SUM_MAGIC, 8);
    memcpy(&version, head + 8, 4);
    ok = ok && version == TP_SUMMARY_VERSION;
    if (ok && slim) /* the slim process stands for the file p was read from */
        ok = tp_sum_slim_key(p->file ? p->file : p->path, &key, &size) == 0 &&
             size == p->file_bytes && block_key(in, &key) == 1 &&
             (decode || read_body(in, &body, 0) == 0);
    else if (ok)
        ok = block_key(in, NULL) == 1 && fread(&blen, 8, 1, in) == 1 &&
             fread(&crc, 4, 1, in) == 1 && blen <= SUM_MAX &&
             fseeko(in, (off_t)blen, SEEK_CUR) == 0;
    tp_process d;
    if (ok && slim && decode) {
        ok = slim_body_decode((tp_run *)run, in, &d) == 1;
        if (ok) {
            ok = slim_is_file(&d, &key, size);
            tp_process_free(&d);
        }
    }
    free(key.b);
    free(body.b);
    key = (tp_sum_buf){0};
    int rc = ok ? 1 : -1;
    if (ok && section)
        rc = summary_key(run, p, o, &key) != 0 ? -1 : block_key(in, &key);
    free(key.b);
    if (rc != 1) {
        fclose(in);
        return rc;
    }
    *f = in;
    return 1;
}

int tp_summary_check(const tp_run *run, const tp_process *p, const tp_report_opts *o) {
    FILE *f;
    int rc = open_checked(run, p, o, &f, 0, 1, 0);
    if (f) fclose(f);
    return rc;
}

static void parts_drop(tp_summary_parts *out, int memos_only);

int tp_summary_current(const tp_run *run, const tp_process *p, const tp_report_opts *o) {
    FILE *f;
    tp_sum_buf body = {0};
    int rank = p->role == TP_ROLE_RANK;
    /* keys and CRCs are not all: a body the reader refuses is no summary to leave as it is.
     * Decoding interns strings into the run's pool, as the report's own reading would */
    int ok = open_checked(run, p, o, &f, 1, rank, 1) == 1;
    if (ok && rank) {
        tp_rank_result res = {0};
        tp_summary_parts parts = {.res = &res};
        ok = read_body(f, &body, 1) == 0 &&
             tp_summary_section_decode((tp_run *)run, p, body.b, body.len, 0, &parts) == 1;
        if (ok) parts_drop(&parts, 0);
    } else if (ok) { /* any other process: an empty section block, then the file's end */
        ok = block_key(f, NULL) == 0 && read_body(f, &body, 1) == 0 && body.len == 0;
    }
    if (f) fclose(f);
    free(body.b);
    return ok;
}

/* CRC-32 of c's bytes. */
static uint32_t body_crc(const tp_sum_buf *c) { return tp_sum_crc(0, c->b, c->len); }

/* The head of a block's body whose key was checked, its length and CRC, f left at its bytes:
 * 0, or -1 when they do not fit the file. The section's (last) must be the rest of the file,
 * to the byte. */
static int body_head(FILE *f, uint64_t *blen, uint32_t *crc, int last) {
    struct stat st;
    off_t at = ftello(f);
    if (at < 0 || fstat(fileno(f), &st) != 0 || fread(blen, 8, 1, f) != 1 ||
        fread(crc, 4, 1, f) != 1 || *blen > SUM_MAX ||
        *blen > (uint64_t)st.st_size - (uint64_t)at - 12 ||
        (last && *blen != (uint64_t)st.st_size - (uint64_t)at - 12))
        return -1;
    return 0;
}

/* A block's body whose key was checked: its bytes, CRC checked, into c (owned). */
static int read_body(FILE *f, tp_sum_buf *c, int last) {
    uint64_t blen;
    uint32_t crc;
    if (body_head(f, &blen, &crc, last)) return -1;
    c->b = tp_malloc(blen ? blen : 1);
    if (!c->b || fread(c->b, 1, blen, f) != blen || (last && fgetc(f) != EOF)) return -1;
    c->len = c->cap = blen;
    return body_crc(c) == crc ? 0 : -1;
}

/* The next part of the body: its end (c->at is its start), or 0 when it does not fit. */
static size_t part_end(tp_sum_buf *c) {
    uint64_t n = 0;
    tp_sum_get(c, &n, 8);
    if (c->bad || n > c->len - c->at) {
        c->bad = 1;
        return 0;
    }
    return c->at + (size_t)n;
}

/* Decodes the four parts (summary.c's head comment) into out. */
static void decode(tp_sum_buf *c, const tp_process *p, int memos_only, tp_summary_parts *out) {
    size_t end = part_end(c);
    if (!memos_only && !c->bad) out->section = tp_sum_json_get(c);
    c->bad |= !memos_only && c->at != end;
    c->at = end;
    end = part_end(c);
    if (!memos_only && !c->bad) {
        tp_sum_rank_result(c, out->res, 1);
        out->res->host = p->hdr.host; /* as section_job sets it: the slim process's copy */
    }
    c->bad |= !memos_only && c->at != end;
    c->at = end;
    end = part_end(c);
    if (!c->bad) tp_sum_steps(c, &out->steps, 1);
    c->bad |= c->at != end;
    end = part_end(c);
    /* the memo stands for the slim process's ncomm ops (report.c, section_job) */
    if (!c->bad) tp_sum_comm(c, &out->comm, p->ncomm, 1);
    c->bad |= c->at != end || end != c->len;
}

/* The section parts a decoding left, freed; out as tp_summary_read leaves it on failure. */
static void parts_drop(tp_summary_parts *out, int memos_only) {
    tp_rank_result *res = out->res;
    cJSON_Delete(out->section);
    if (res) {
        tp_rank_result_free(res);
        memset(res, 0, sizeof *res);
    }
    if (out->steps) tp_steps_free(out->steps);
    free(out->steps);
    free(out->comm);
    memset(out, 0, sizeof *out);
    out->res = memos_only ? NULL : res;
}

int tp_summary_section_decode(tp_run *run, const tp_process *p, const void *b, size_t n,
                              int memos_only, tp_summary_parts *out) {
    tp_rank_result *res = out->res;
    memset(out, 0, sizeof *out);
    out->res = memos_only ? NULL : res;
    /* the reader never writes c.b: the cast only fits the buffer both ways share */
    tp_sum_buf c = {.b = (unsigned char *)b, .len = n, .cap = n, .run = run};
    decode(&c, p, memos_only, out);
    if (!c.bad) return 1;
    parts_drop(out, memos_only);
    return 0;
}

int tp_summary_read(tp_run *run, const tp_process *p, const tp_report_opts *o, int memos_only,
                    tp_summary_parts *out) {
    tp_rank_result *res = out->res;
    memset(out, 0, sizeof *out);
    out->res = memos_only ? NULL : res;
    FILE *f;
    int rc = open_checked(run, p, o, &f, 0, 1, 0);
    if (rc <= 0) return rc;
    tp_sum_buf c = {0};
    int ok = read_body(f, &c, 1) == 0;
    fclose(f);
    if (ok) ok = tp_summary_section_decode(run, p, c.b, c.len, memos_only, out);
    else parts_drop(out, memos_only); /* res left empty, as a failed decoding leaves it */
    free(c.b);
    return ok ? 1 : -1;
}

/* A process read of no file: its arrays freed as far as they were read. */
static void slim_drop(tp_process *p) {
    if (!p->threads) p->nthreads = 0;
    if (!p->damage) p->ndamage = 0;
    tp_process_free(p);
}

int tp_summary_slim_decode(tp_run *run, const void *b, size_t n, tp_process *p) {
    memset(p, 0, sizeof *p);
    /* the reader never writes c.b: the cast only fits the buffer both ways share */
    tp_sum_buf c = {.b = (unsigned char *)b, .len = n, .cap = n, .run = run};
    tp_sum_slim(&c, p, 1);
    if (!c.bad && c.at == c.len) return 1;
    slim_drop(p);
    return 0;
}

int tp_summary_slim_decode_file(tp_run *run, FILE *f, int in_place, size_t n, size_t window,
                                uint32_t *crc, tp_process *p) {
    memset(p, 0, sizeof *p);
    tp_sum_buf c = {.run = run};
    off_t at = in_place ? ftello(f) : -1;
    if (at >= 0) c.in_place = 1, c.src_off = (uint64_t)at;
    if (tp_sum_stream_read(&c, f, n, window) == 0) tp_sum_slim(&c, p, 1);
    int ok = !c.bad && c.at == c.len;
    *crc = tp_sum_stream_end(&c);
    free(c.b);
    if (ok) return 1;
    slim_drop(p);
    return 0;
}

/* The slim block's body at f (its head next) decoded into *p as it is read, its CRC checked
 * once it is all read: 1, or 0 (p left zeroed). f is left past the body when it is 1. */
static int slim_body_decode(tp_run *run, FILE *f, tp_process *p) {
    uint64_t blen;
    uint32_t crc, got;
    memset(p, 0, sizeof *p);
    if (body_head(f, &blen, &crc, 0) ||
        !tp_summary_slim_decode_file(run, f, 1, (size_t)blen, SUM_WINDOW, &got, p))
        return 0;
    if (got == crc) return 1;
    slim_drop(p);
    return 0;
}

/* Rank file `path`'s summary's slim block: 1 when its key is the file's now (tp_sum_slim_key;
 * *size the file's size; the key into *key, owned, when that is given), with body given the
 * summary left open in *body at the block's body (the caller closes it); 0 when there is no
 * summary; -1 when it is not valid. */
static int slim_block(const char *path, FILE **body, tp_sum_buf *key_out, uint64_t *size) {
    char sum[4096];
    int named = summary_name(path, sum, sizeof sum) == 0;
    FILE *in = named ? open_regular(sum) : NULL;
    if (!in) return !named || errno == ENOENT ? 0 : -1;
    tp_sum_buf key = {0};
    unsigned char head[SUM_HEAD] = {0};
    uint32_t version;
    int ok = fread(head, 1, sizeof head, in) == sizeof head && !memcmp(head, SUM_MAGIC, 8);
    memcpy(&version, head + 8, 4);
    ok = ok && version == TP_SUMMARY_VERSION && tp_sum_slim_key(path, &key, size) == 0 &&
         block_key(in, &key) == 1;
    if (ok && body) *body = in;
    else fclose(in);
    if (ok && key_out) *key_out = key;
    else free(key.b);
    return ok ? 1 : -1;
}

int tp_summary_slim_ready(const char *path) {
    uint64_t size;
    return slim_block(path, NULL, NULL, &size) == 1;
}

int tp_summary_slim_hopeless(const char *path) {
    /* the reader's own checks of a regular file and its header (size, magic, version, header
     * length and CRC, clocks), which the owner's slim load fails on with nothing kept
     * (tp_summary_write_slim): a file cut inside its header (a disk that filled as the
     * process started) starts with the magic, yet no summary of it ever comes */
    tprof_reader *rd = NULL;
    if (tprof__reader_open(path, &rd, NULL, 0) != TPROF_OK) return 1;
    tprof__reader_close(rd);
    struct stat st;
    char sum[4096], dir[4096];
    if (summary_name(path, sum, sizeof sum) != 0) return 1;
    if (lstat(sum, &st) == 0 && !S_ISREG(st.st_mode)) return 1;
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) slash[1] = 0;
    else if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    return access(dir, W_OK) != 0;
}

static void summary_sweep(const tp_process *p); /* below, beside the temporary files */

int tp_summary_write_slim(const char *path, char *why, size_t n) {
    tp_run run;
    memset(&run, 0, sizeof run);
    if (!(run.pool = tp_load_pool_new())) {
        snprintf(why, n, "out of memory");
        return -1;
    }
    /* a slim block the report's load would take is left as it is; any other is written */
    tp_process p;
    if (tp_summary_slim_load(&run, path, &p) == 1) {
        tp_process_free(&p);
        tp_run_free(&run);
        return 1;
    }
    int rc = tp_process_load_slim(&run, path, &p), ok = 0;
    if (rc != TPROF_OK && !p.nthreads && !p.nmeta) /* the load keeps what a damaged file had */
        snprintf(why, n, "%s", run.nerrors ? run.errors[0] : tprof_strerror(rc));
    else {
        summary_sweep(&p); /* what dead writers left, before this write */
        ok = tp_summary_write(&run, &p, NULL, NULL, why, n) == 0;
    }
    tp_process_free(&p);
    tp_run_free(&run);
    return ok ? 0 : -1;
}

int tp_summary_slim_load(tp_run *run, const char *path, tp_process *p) {
    memset(p, 0, sizeof *p);
    tp_sum_buf key = {0};
    FILE *f = NULL;
    uint64_t size;
    int r = slim_block(path, &f, &key, &size);
    if (r != 1) return r;
    int ok = slim_body_decode(run, f, p);
    fclose(f);
    if (!ok) {
        free(key.b);
        return -1; /* p is left zeroed */
    }
    ok = slim_is_file(p, &key, size); /* the key ends with the file's header */
    free(key.b);
    if (ok) { /* what the loader sets itself (summary_slim.c's head comment) */
        p->path = tp_intern(run, path);
        p->file = tp_strdup(path);
        tp_load_identity(p);
        p->helper_of = -1;
        ok = p->file != NULL && p->path != tp_intern_no_memory;
    }
    if (ok) return 1;
    slim_drop(p);
    return -1;
}

/* Appends one part: its length, then what fn codes. */
static void put_part(tp_sum_buf *c, void (*fn)(tp_sum_buf *, const tp_summary_parts *,
                                               const tp_process *),
                     const tp_summary_parts *in, const tp_process *p) {
    size_t at = c->len;
    put_u64(c, 0);
    fn(c, in, p);
    if (c->bad) return;
    uint64_t n = c->len - at - 8;
    memcpy(c->b + at, &n, 8);
}

static void part_json(tp_sum_buf *c, const tp_summary_parts *in, const tp_process *p) {
    (void)p;
    tp_sum_json_put(c, in->section);
}

static void part_result(tp_sum_buf *c, const tp_summary_parts *in, const tp_process *p) {
    (void)p;
    tp_sum_rank_result(c, in->res, 0);
}

static void part_steps(tp_sum_buf *c, const tp_summary_parts *in, const tp_process *p) {
    (void)p;
    tp_steps *s = in->steps;
    tp_sum_steps(c, &s, 0);
}

static void part_comm(tp_sum_buf *c, const tp_summary_parts *in, const tp_process *p) {
    tp_comm_time *t = in->comm;
    tp_sum_comm(c, &t, p->ncomm, 0);
}

/* The temporary files being written (tp_summary_abandon): names malloc'd, under g_tmp_lock,
 * which tp_summary_abandon takes for good. A name is listed before its file is created and
 * unlisted after it was renamed or removed, so that no temporary file exists unlisted. */
static pthread_mutex_t g_tmp_lock = PTHREAD_MUTEX_INITIALIZER;
static char **g_tmp;
static size_t g_ntmp, g_captmp;

/* Creates the temporary file `tmp`, listed: its descriptor, or -1 (errno set). */
static int tmp_create(const char *tmp) {
    int fl = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    pthread_mutex_lock(&g_tmp_lock);
    if (g_ntmp == g_captmp) {
        size_t cap = g_captmp ? 2 * g_captmp : 16;
        char **nv = tp_realloc(g_tmp, cap * sizeof *nv);
        if (nv) {
            g_tmp = nv;
            g_captmp = cap;
        }
    }
    char *name = g_ntmp < g_captmp ? tp_strdup(tmp) : NULL;
    int fd = -1;
    if (!name) {
        errno = ENOMEM;
    } else {
        /* a name of its own, never an existing one: a link planted under it in a directory
         * others can write would have this write through it; one left by a killed task of the
         * same pid and tid is its own leftover */
        fd = open(tmp, fl, 0644);
        if (fd < 0 && errno == EEXIST && unlink(tmp) == 0) fd = open(tmp, fl, 0644);
    }
    if (fd >= 0) g_tmp[g_ntmp++] = name;
    else free(name);
    pthread_mutex_unlock(&g_tmp_lock);
    return fd;
}

/* One summary of those a sweep looks for: its directory and its name, in one buffer. */
typedef struct swept {
    char *dir;
    const char *name;
} swept;

static int by_dir_name(const void *a, const void *b) {
    const swept *x = a, *y = b;
    int c = strcmp(x->dir, y->dir);
    return c ? c : strcmp(x->name, y->name);
}

/* Whether the group [v, v + n) of one directory, sorted by name, holds the summary named by
 * the `len` bytes at `name`. */
static int in_group(const swept *v, size_t n, const char *name, size_t len) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *m = v[mid].name;
        int c = strncmp(m, name, len);
        if (!c) c = m[len] ? 1 : 0; /* a longer name sorts after */
        if (!c) return 1;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return 0;
}

/* Whether directory entry e is a temporary file of one of the summaries [v, v + n) (sorted
 * by name) that a writer of this host (`host`) left when it died before it could remove it
 * (SIGKILL, the OOM killer, a crash: no handler runs): `<summary>.tmp.<host>.<pid>.<tid>`,
 * exactly two numbers after the host (a host named ours and ".<digits>" more writes three),
 * the pid not ours and no longer alive. The file of a live process, or of a process whose
 * pid was reused since, is not; neither are other hosts' (their pids say nothing here). The
 * name is looked up first, so that only the files of the summaries swept cost a look at
 * their pid. */
static int dead_leftover(const char *e, const char *host, const swept *v, size_t n) {
    size_t len = strlen(e), hl = strlen(host), i = len;
    while (i && isdigit((unsigned char)e[i - 1])) i--;
    size_t ntid = len - i;
    if (!ntid || !i || e[--i] != '.') return 0;
    size_t end_pid = i;
    while (i && isdigit((unsigned char)e[i - 1])) i--;
    size_t npid = end_pid - i;
    if (!npid || npid > 9 || !i || e[--i] != '.') return 0;
    /* then ".tmp.<host>" before the pid's dot */
    if (i < 5 + hl || memcmp(e + i - hl, host, hl) || memcmp(e + i - hl - 5, ".tmp.", 5)) return 0;
    size_t base = i - hl - 5;
    if (!base || !in_group(v, n, e, base)) return 0;
    long pid = strtol(e + end_pid - npid, NULL, 10);
    if (pid <= 0 || pid == getpid()) return 0;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* Summary `path`'s directory into dir (n bytes) and a pointer to its name in path. */
static const char *split_dir(const char *path, char *dir, size_t n) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, n, ".");
    else if (slash == path) snprintf(dir, n, "/");
    else snprintf(dir, n, "%.*s", (int)(slash - path), path);
    return slash ? slash + 1 : path;
}

/* This host's name into host (65 bytes), as the temporary files' names hold it: empty when
 * it cannot be had or holds a '/'. */
static void this_host(char *host) {
    host[0] = 0;
    if (gethostname(host, 64) != 0 || strchr(host, '/')) host[0] = 0;
    host[64] = 0;
}

/* Removes what dead writers of this host left of the summaries [v, v + n) of directory dir
 * (dead_leftover), reading the directory once: a node sampler's can be hundreds of MB, and
 * no later write has their name. */
static void sweep_dir(const char *dir, const char *host, const swept *v, size_t n) {
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));)
        if (dead_leftover(e->d_name, host, v, n)) unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
}

/* What dead writers left of p's summary, removed. */
static void summary_sweep(const tp_process *p) {
    char path[4096], dir[4096], host[65];
    if (tp_summary_path(p, path, sizeof path) != 0) return;
    this_host(host);
    swept one = {dir, split_dir(path, dir, sizeof dir)};
    sweep_dir(dir, host, &one, 1);
}

void tp_summary_sweep_run(const tp_run *run, const unsigned char *want) {
    char host[65], path[4096], dir[4096];
    this_host(host);
    swept *v = tp_calloc(run->nprocs ? run->nprocs : 1, sizeof *v);
    size_t n = 0;
    for (size_t i = 0; v && i < run->nprocs; i++) {
        const tp_process *p = &run->procs[i];
        if (!p->slim || (want && !want[i]) || tp_summary_path(p, path, sizeof path) != 0)
            continue;
        const char *name = split_dir(path, dir, sizeof dir);
        size_t dl = strlen(dir) + 1, nl = strlen(name) + 1;
        char *b = tp_malloc(dl + nl);
        if (!b) break; /* without memory the rest is not swept: nothing is lost by that */
        memcpy(b, dir, dl);
        memcpy(b + dl, name, nl);
        v[n++] = (swept){b, b + dl};
    }
    if (n > 1) qsort(v, n, sizeof *v, by_dir_name);
    /* each directory read once, whatever the number of its summaries */
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && !strcmp(v[j].dir, v[i].dir);) j++;
        sweep_dir(v[i].dir, host, v + i, j - i);
    }
    for (size_t i = 0; i < n; i++) free(v[i].dir);
    free(v);
}

int tp_summarize_others(tp_run *run, const tp_report_opts *o, const unsigned char *want,
                        tp_summarize_stats *st) {
    int rc = TPROF_OK;
    for (size_t i = 0; i < run->nprocs && rc == TPROF_OK; i++) {
        const tp_process *p = &run->procs[i];
        if (!p->slim || p->role == TP_ROLE_RANK || (want && !want[i])) continue;
        st->files++;
        char why[256], line[768];
        if (tp_summary_current(run, p, o)) {
            st->current++;
        } else if (tp_summary_write(run, p, o, NULL, why, sizeof why) == 0) {
            st->written++;
        } else {
            snprintf(line, sizeof line, "%s: no summary written: %s", p->path, why);
            char **e = tp_realloc(st->errors, (st->nerrors + 1) * sizeof *e);
            if (e) st->errors = e;
            if (!e || !(e[st->nerrors] = tp_strdup(line))) rc = TPROF_ERR_NO_MEMORY;
            else st->nerrors++;
        }
    }
    return rc;
}

/* `tmp` off the list (renamed into place or removed). */
static void tmp_done(const char *tmp) {
    pthread_mutex_lock(&g_tmp_lock);
    for (size_t i = 0; i < g_ntmp; i++)
        if (!strcmp(g_tmp[i], tmp)) {
            free(g_tmp[i]);
            g_tmp[i] = g_tmp[--g_ntmp];
            break;
        }
    pthread_mutex_unlock(&g_tmp_lock);
}

void tp_summary_abandon(void) {
    pthread_mutex_lock(&g_tmp_lock); /* never unlocked: no temporary file is created after */
    for (size_t i = 0; i < g_ntmp; i++) unlink(g_tmp[i]);
}

int tp_summary_write(const tp_run *run, const tp_process *p, const tp_report_opts *o,
                     const tp_summary_parts *in, char *why, size_t n) {
    char path[4096], tmp[4300];
    if (tp_summary_path(p, path, sizeof path) != 0) {
        snprintf(why, n, "path too long");
        return -1;
    }
    tp_sum_buf skey = {0}, sbody = {0}, key = {0}, body = {0};
    uint64_t size = 0;
    const char *fail = NULL;
    if (tp_sum_slim_key(p->file ? p->file : p->path, &skey, &size) != 0 ||
        (in && summary_key(run, p, o, &key) != 0))
        fail = skey.bad || key.bad ? "out of memory" : "the rank file cannot be looked at";
    else if (size != p->file_bytes) /* the slim process is of the bytes read then */
        fail = "the rank file changed since it was read";
    if (!fail && in) {
        /* the result's own capture texts are told apart by address: the caller's result */
        body.rr = in->res;
        put_part(&body, part_json, in, p);
        put_part(&body, part_result, in, p);
        put_part(&body, part_steps, in, p);
        put_part(&body, part_comm, in, p);
    }
    if (!fail && body.bad) fail = "out of memory";
    uint32_t version = TP_SUMMARY_VERSION, scrc = 0, crc = fail ? 0 : body_crc(&body);
    uint64_t sklen = skey.len, sblen = 0, klen = key.len, blen = body.len;
    /* beside it, a name the loader never takes for a rank file (it ends in neither .tprof
     * nor .json), unique to this thread of this host (tasks on several nodes share the
     * directory, and their pids may be the same) */
    char host[65];
    this_host(host);
    snprintf(tmp, sizeof tmp, "%s.tmp.%s.%ld.%ld", path, host, (long)getpid(),
             (long)syscall(SYS_gettid));
    int fd = fail ? -1 : tmp_create(tmp);
    int rc = fd < 0 ? -1 : 0;
    off_t shead = (off_t)(8 + 4 + 8 + sklen); /* the slim body's length and CRC */
    if (!rc)
        rc = tp_sum_write_all(fd, SUM_MAGIC, 8) || tp_sum_write_all(fd, &version, 4) ||
                     tp_sum_write_all(fd, &sklen, 8) || tp_sum_write_all(fd, skey.b, skey.len) ||
                     tp_sum_write_all(fd, &sblen, 8) || tp_sum_write_all(fd, &scrc, 4)
                 ? -1
                 : 0;
    /* the slim body streamed to the file, its length and CRC written before it once known:
     * it holds a node sampler's packed samples, which the process holds already */
    if (!rc) {
        rc = tp_sum_stream_write(&sbody, fd, SUM_WINDOW);
        if (!rc) tp_sum_slim(&sbody, (tp_process *)p, 0);
        scrc = tp_sum_stream_end(&sbody);
        sblen = sbody.len;
        if (sbody.bad) {
            fail = sbody.err ? NULL : "out of memory";
            errno = sbody.err;
            rc = -1;
        }
    }
    if (!rc)
        rc = tp_spill_pwrite_all(fd, &sblen, 8, (uint64_t)shead) != TPROF_OK ||
                     tp_spill_pwrite_all(fd, &scrc, 4, (uint64_t)shead + 8) != TPROF_OK ||
                     tp_sum_write_all(fd, &klen, 8) || tp_sum_write_all(fd, key.b, key.len) ||
                     tp_sum_write_all(fd, &blen, 8) || tp_sum_write_all(fd, &crc, 4) ||
                     tp_sum_write_all(fd, body.b, body.len)
                 ? -1
                 : 0;
    if (fd >= 0 && close(fd) != 0) rc = -1;
    if (!rc && rename(tmp, path) != 0) rc = -1;
    if (rc) {
        snprintf(why, n, "%s", fail ? fail : strerror(errno));
        if (fd >= 0) unlink(tmp);
    }
    if (fd >= 0) tmp_done(tmp);
    free(skey.b);
    free(sbody.b);
    free(key.b);
    free(body.b);
    return rc;
}

void tp_summarize_stats_free(tp_summarize_stats *st) {
    for (size_t i = 0; i < st->nerrors; i++) free(st->errors[i]);
    free(st->errors);
    memset(st, 0, sizeof *st);
}
