/*
 * summary_codec.c — the rank section's outputs in a summary file (summary.h), field by field:
 * tp_rank_result and everything it owns, the section's cJSON fragment node by node, and the
 * steps and comm memos. One function per struct serves both ways (`reading`), so that the
 * writer and the reader cannot list different fields. Scalars are stored in the machine's
 * own byte order and widths (summary.c's head names them: a summary of another machine kind
 * is not read); size_t travels as 8 bytes.
 *
 * Strings: NULL, a string (interned into the reading run's pool: the results' strings are the
 * run's or static, and every reader compares them with strcmp, or by pointer only among
 * interned names, which interning keeps), or one of the rank's own capture texts
 * (tp_capture_result.not_captured and .steps, which the breakdown and GPU results point into).
 * Arrays keep whether they were allocated, so that a NULL array stays NULL; the reader
 * allocates them with calloc, as tp_rank_result_free frees them, and bounds every count by the
 * bytes left (each element takes at least one byte) and inline arrays by their size.
 */
#define _GNU_SOURCE
#include "analysis/summary.h"
#include "analysis/alloc.h"
#include "trainprof.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

/* Each struct below is coded field by field. A field added to one of them must be added to
 * its codec here (and TP_SUMMARY_VERSION bumped): these sizes fail the build until it is. */
#if UINTPTR_MAX == UINT64_MAX && INT_MAX == 2147483647
_Static_assert(sizeof(tp_rank_result) == 5896, "tp_rank_result changed: update its codec");
_Static_assert(sizeof(tp_steps_result) == 240, "tp_steps_result changed: update its codec");
_Static_assert(sizeof(tp_data_result) == 32, "tp_data_result changed: update its codec");
_Static_assert(sizeof(tp_breakdown_result) == 864, "tp_breakdown_result: update its codec");
_Static_assert(sizeof(tp_bd_range) == 64, "tp_bd_range changed: update its codec");
_Static_assert(sizeof(tp_bd_warmup) == 256, "tp_bd_warmup changed: update its codec");
_Static_assert(sizeof(tp_gpu_result) == 344, "tp_gpu_result changed: update its codec");
_Static_assert(sizeof(tp_gpu_device_result) == 248, "tp_gpu_device_result: update its codec");
_Static_assert(sizeof(tp_gpu_pause) == 32, "tp_gpu_pause changed: update its codec");
_Static_assert(sizeof(tp_gpu_overhead) == 24, "tp_gpu_overhead changed: update its codec");
_Static_assert(sizeof(tp_gpu_kernel) == 48, "tp_gpu_kernel changed: update its codec");
_Static_assert(sizeof(tp_nvml_result) == 688, "tp_nvml_result changed: update its codec");
_Static_assert(sizeof(tp_nvml_gpu_result) == 792, "tp_nvml_gpu_result: update its codec");
_Static_assert(sizeof(tp_comm_result) == 672, "tp_comm_result changed: update its codec");
_Static_assert(sizeof(tp_comm_row_result) == 168, "tp_comm_row_result: update its codec");
_Static_assert(sizeof(tp_comm_communicator_result) == 120, "communicator: update its codec");
_Static_assert(sizeof(tp_comm_exposure_result) == 512, "tp_comm_exposure_result: update codec");
_Static_assert(sizeof(tp_timers_result) == 24, "tp_timers_result changed: update its codec");
_Static_assert(sizeof(tp_timer_row) == 24, "tp_timer_row changed: update its codec");
_Static_assert(sizeof(tp_ranges_result) == 64, "tp_ranges_result changed: update its codec");
_Static_assert(sizeof(tp_range_row) == 64, "tp_range_row changed: update its codec");
_Static_assert(sizeof(tp_process_sampler_result) == 328, "process sampler: update its codec");
_Static_assert(sizeof(tp_capture_result) == 928, "tp_capture_result changed: update its codec");
_Static_assert(sizeof(tp_memory_result) == 760, "tp_memory_result changed: update its codec");
_Static_assert(sizeof(tp_mem_step_result) == 264, "tp_mem_step_result: update its codec");
_Static_assert(sizeof(tp_mem_oom) == 472, "tp_mem_oom changed: update its codec");
_Static_assert(sizeof(tp_mem_alloc) == 24, "tp_mem_alloc changed: update its codec");
_Static_assert(sizeof(tp_mem_peak) == 24, "tp_mem_peak changed: update its codec");
_Static_assert(sizeof(tp_stat5) == 40, "tp_stat5 changed: update its codec");
_Static_assert(sizeof(tp_flagged_figure) == 24, "tp_flagged_figure changed: update its codec");
/* (tp_steps.packed and spilled are not coded: a section's steps are written before their job
 * packs them, report.c; packed ones make no summary, tp_sum_steps) */
_Static_assert(sizeof(tp_steps) == 96, "tp_steps changed: update its codec");
_Static_assert(sizeof(tp_step) == 32, "tp_step changed: update its codec");
_Static_assert(sizeof(tp_comm_time) == 56, "tp_comm_time changed: update its codec");
#endif

/* ------------------------------------------------------------------ primitives */

enum { SUM_MEMORY, SUM_READ, SUM_WRITE };

uint32_t tp_sum_crc(uint32_t crc, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t k; n; n -= k, b += k) { /* zlib's crc32 takes at most 4 GiB - 1 a call */
        k = n > (1u << 30) ? (1u << 30) : n;
        crc = (uint32_t)crc32(crc, b, (uInt)k);
    }
    return crc;
}

/* c streamed (SUM_READ or SUM_WRITE) through a window of `window` bytes, at its start. */
static int stream_init(tp_sum_buf *c, int stream, size_t window) {
    c->stream = stream;
    c->at = c->base = c->wlen = 0;
    c->crc = 0; /* a CRC-32 of no bytes, as zlib starts one */
    c->cap = window ? window : 1;
    c->b = tp_malloc(c->cap);
    return c->b ? 0 : (c->bad = 1, TPROF_ERR_NO_MEMORY);
}

int tp_sum_stream_read(tp_sum_buf *c, FILE *f, size_t len, size_t window) {
    c->f = f;
    c->len = len;
    return stream_init(c, SUM_READ, window);
}

int tp_sum_stream_write(tp_sum_buf *c, int fd, size_t window) {
    c->fd = fd;
    c->len = 0;
    return stream_init(c, SUM_WRITE, window);
}

/* n bytes of the file into p, into the CRC: 0, or -1 (c->bad, c->err). */
static int stream_in(tp_sum_buf *c, void *p, size_t n) {
    if (fread(p, 1, n, c->f) != n) {
        c->err = ferror(c->f) ? errno : 0;
        c->bad = 1;
        return -1;
    }
    c->crc = tp_sum_crc(c->crc, p, n);
    return 0;
}

int tp_sum_write_all(int fd, const void *b, size_t n) {
    const char *q = b;
    while (n) {
        ssize_t w = write(fd, q, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (!w) errno = EIO;
            return TPROF_ERR_IO;
        }
        q += w;
        n -= (size_t)w;
    }
    return 0;
}

/* n bytes to the file, into the CRC: 0, or -1 (c->bad, c->err). */
static int stream_out(tp_sum_buf *c, const void *p, size_t n) {
    c->crc = tp_sum_crc(c->crc, p, n);
    if (!tp_sum_write_all(c->fd, p, n)) return 0;
    c->err = errno ? errno : EIO; /* 0 is kept for "out of memory" */
    c->bad = 1;
    return -1;
}

/* Reading streamed: the body's bytes [at, at + n) in the window (n at most the bytes left),
 * the window grown when n is larger. 0, or -1 (c->bad). */
static int stream_fill(tp_sum_buf *c, size_t n) {
    if (c->at + n <= c->base + c->wlen) return 0;
    size_t keep = c->base + c->wlen - c->at;
    memmove(c->b, c->b + (c->at - c->base), keep);
    c->base = c->at;
    c->wlen = keep;
    if (n > c->cap) {
        unsigned char *b = tp_realloc(c->b, n);
        if (!b) return c->bad = 1, -1;
        c->b = b;
        c->cap = n;
    }
    size_t more = c->cap - c->wlen, left = c->len - (c->base + c->wlen);
    if (more > left) more = left;
    if (stream_in(c, c->b + c->wlen, more)) return -1;
    c->wlen += more;
    return 0;
}

uint32_t tp_sum_stream_end(tp_sum_buf *c) {
    if (c->stream == SUM_WRITE) {
        if (!c->bad && c->wlen && !stream_out(c, c->b, c->wlen)) c->wlen = 0;
        return c->crc;
    }
    /* what the decoding left unread (it then failed) still counts for the CRC */
    unsigned char sink[4096];
    for (size_t left = c->len - (c->base + c->wlen); !c->bad && left;) {
        size_t k = left < sizeof sink ? left : sizeof sink;
        if (!stream_in(c, sink, k)) left -= k;
    }
    return c->crc;
}

void tp_sum_put(tp_sum_buf *c, const void *p, size_t n) {
    if (c->bad || !n) return;
    if (c->stream == SUM_WRITE) {
        c->len += n;
        if (c->wlen + n > c->cap) {
            if (c->wlen && stream_out(c, c->b, c->wlen)) return;
            c->wlen = 0;
            if (n >= c->cap) { /* straight to the file */
                stream_out(c, p, n);
                return;
            }
        }
        memcpy(c->b + c->wlen, p, n);
        c->wlen += n;
        return;
    }
    if (c->len + n > c->cap) {
        size_t cap = c->cap ? c->cap : 4096;
        while (cap < c->len + n) cap *= 2;
        unsigned char *b = tp_realloc(c->b, cap);
        if (!b) {
            c->bad = 1;
            return;
        }
        c->b = b;
        c->cap = cap;
    }
    memcpy(c->b + c->len, p, n);
    c->len += n;
}

void tp_sum_get(tp_sum_buf *c, void *p, size_t n) {
    if (c->bad || n > c->len - c->at) {
        c->bad = 1;
        memset(p, 0, n);
        return;
    }
    if (c->stream == SUM_READ && c->at + n > c->base + c->wlen && n >= c->cap) {
        /* larger than the window (a thread's packed samples): what the window holds, then
         * the rest straight from the file */
        size_t have = c->base + c->wlen - c->at;
        memcpy(p, c->b + (c->at - c->base), have);
        if (stream_in(c, (unsigned char *)p + have, n - have)) {
            memset(p, 0, n);
            return;
        }
        c->at += n;
        c->base = c->at;
        c->wlen = 0;
        return;
    }
    if (c->stream == SUM_READ && stream_fill(c, n)) {
        memset(p, 0, n);
        return;
    }
    memcpy(p, c->b + (c->at - c->base), n);
    c->at += n;
}

/* The codec's helpers (summary.h, shared with summary_slim.c) under this file's short names. */
#define raw(c, rd, p, n) tp_sum_raw(c, rd, p, n)
#define size(c, rd, v) tp_sum_size(c, rd, v)
#define str(c, rd, s) tp_sum_str(c, rd, s)
#define owned(c, rd, s) tp_sum_owned(c, rd, s)
#define array(c, rd, a, n, e) tp_sum_array(c, rd, a, n, e)

/* One field, either way. */
void tp_sum_raw(tp_sum_buf *c, int rd, void *p, size_t n) {
    if (rd) tp_sum_get(c, p, n);
    else tp_sum_put(c, p, n);
}

#define I(x) raw(c, rd, &(x), sizeof(int))
#define U(x) raw(c, rd, &(x), sizeof(unsigned))
#define U32(x) raw(c, rd, &(x), 4)
#define U64(x) raw(c, rd, &(x), 8)
#define D(x) raw(c, rd, &(x), sizeof(double))
#define A(x) raw(c, rd, (x), sizeof(x)) /* an inline array of plain values */
#define S(x) str(c, rd, &(x))
#define Z(x) size(c, rd, &(x))

void tp_sum_size(tp_sum_buf *c, int rd, size_t *v) {
    uint64_t x = *v;
    raw(c, rd, &x, 8);
    if (rd) *v = (size_t)x;
}

/* A count of an inline array: at most max (a larger one is damage). */
static void size_max(tp_sum_buf *c, int rd, size_t *v, size_t max) {
    size(c, rd, v);
    if (*v > max) {
        c->bad = 1;
        *v = 0;
    }
}

enum { S_NULL = 0, S_TEXT = 1, S_NOT_CAPTURED = 2, S_CAPTURED_STEPS = 3 };

/* A text stored with its NUL; on reading, its place in c's bytes (valid until c is freed;
 * read streamed, until c's next read), or NULL (with bad set) when it is not one. */
static const char *text(tp_sum_buf *c, int rd, const char *s) {
    uint64_t n = rd ? 0 : strlen(s) + 1;
    raw(c, rd, &n, 8);
    if (!rd) {
        tp_sum_put(c, s, (size_t)n);
        return s;
    }
    if (c->bad || !n || n > c->len - c->at || (c->stream == SUM_READ && stream_fill(c, n))) {
        c->bad = 1;
        return NULL;
    }
    const char *at = (const char *)c->b + (c->at - c->base);
    if (memchr(at, 0, (size_t)n) != at + n - 1) {
        c->bad = 1;
        return NULL;
    }
    c->at += (size_t)n;
    return at;
}

void tp_sum_str(tp_sum_buf *c, int rd, const char **s) {
    unsigned char tag = 0;
    const tp_capture_result *cap = c->rr ? &c->rr->capture : NULL;
    if (!rd) {
        tag = !*s                                    ? S_NULL
              : cap && *s == cap->not_captured ? S_NOT_CAPTURED
              : cap && *s == cap->steps        ? S_CAPTURED_STEPS
                                               : S_TEXT;
    }
    raw(c, rd, &tag, 1);
    if (!rd) {
        if (tag == S_TEXT) text(c, 0, *s);
        return;
    }
    *s = NULL;
    if ((tag == S_NOT_CAPTURED || tag == S_CAPTURED_STEPS) && !cap) c->bad = 1;
    else if (tag == S_NOT_CAPTURED) *s = cap->not_captured;
    else if (tag == S_CAPTURED_STEPS) *s = cap->steps;
    else if (tag == S_TEXT) {
        const char *t = text(c, 1, NULL);
        if (t) *s = tp_intern(c->run, t);
        /* a text that found no memory: the section would be short, so it is not read */
        if (*s == tp_intern_no_memory) c->bad = 1;
    } else if (tag != S_NULL) c->bad = 1;
}

/* An owned string (malloc'd on reading), or NULL. */
void tp_sum_owned(tp_sum_buf *c, int rd, char **s) {
    unsigned char has = rd ? 0 : *s != NULL;
    raw(c, rd, &has, 1);
    if (!has) {
        if (rd) *s = NULL;
        return;
    }
    const char *t = text(c, rd, rd ? NULL : *s);
    if (rd) {
        *s = t ? tp_strdup(t) : NULL;
        if (t && !*s) c->bad = 1;
    }
}

/* An owned array of n elements of `elem` bytes: whether it is allocated, and on reading its
 * allocation (zeroed). Returns whether it is, for the caller to code its elements. Reading,
 * n elements without an array is damage: the readers walk an array by its count alone. */
int tp_sum_array(tp_sum_buf *c, int rd, void *arrp, size_t n, size_t elem) {
    void **arr = arrp;
    unsigned char has = rd ? 0 : *arr != NULL;
    raw(c, rd, &has, 1);
    if (!rd) return has;
    *arr = NULL;
    if (!has && n) c->bad = 1;
    if (!has || c->bad) return 0;
    if (n > c->len - c->at) { /* every element takes a byte at least */
        c->bad = 1;
        return 0;
    }
    if (!(*arr = tp_calloc(n ? n : 1, elem))) c->bad = 1;
    return *arr != NULL;
}

/* ------------------------------------------------------------------ small structs */

static void stat5(tp_sum_buf *c, int rd, tp_stat5 *s) {
    D(s->mean), D(s->p50), D(s->p90), D(s->min), D(s->max);
}

static void flagged(tp_sum_buf *c, int rd, tp_flagged_figure *f) {
    I(f->flagged), D(f->value), D(f->limit);
}

static void peak(tp_sum_buf *c, int rd, tp_mem_peak *p) {
    int bound = (int)p->bound;
    I(p->has), D(p->bytes), I(bound);
    p->bound = (tp_mem_bound)bound;
}

/* ------------------------------------------------------------------ the rank's sections */

static void capture(tp_sum_buf *c, int rd, tp_capture_result *x) {
    I(x->present), I(x->limited), U(x->limited_by), Z(x->measured), Z(x->captured);
    size_max(c, rd, &x->nranges, TP_CAPTURE_RANGES);
    A(x->ranges), Z(x->ranges_left_out), A(x->steps), A(x->not_captured);
    U64(x->complete_until_ns), D(x->complete_until_s), I(x->has_records_stopped);
    D(x->stopped_after_s), D(x->stopped_span_s), Z(x->steps_without_gpu_records);
    I(x->has_cost), I(x->cost_flagged), D(x->cost_ms), D(x->cost_share);
    D(x->captured_median_ms), D(x->other_median_ms), D(x->other_spread_ms), D(x->noise_ms);
    Z(x->cost_captured), Z(x->cost_other), Z(x->cost_skipped), A(x->cost_reason);
    Z(x->windows_ignored), Z(x->windows_unlisted), Z(x->bound_records), Z(x->bound_kept);
    Z(x->bound_left_out);
    D(x->bound_from_s), D(x->bound_to_s);
    if (rd) { /* the texts read end where they should (the other results point into two) */
        x->steps[sizeof x->steps - 1] = x->not_captured[sizeof x->not_captured - 1] = 0;
        x->cost_reason[sizeof x->cost_reason - 1] = 0;
    }
}

static void steps(tp_sum_buf *c, int rd, tp_steps_result *x) {
    I(x->present), Z(x->count), Z(x->warmup), Z(x->measured), D(x->mean_ms);
    S(x->source), S(x->name), S(x->requested_name), S(x->note), I(x->torch_hooks);
    I(x->has_thread), S(x->thread), U32(x->tid);
    if (array(c, rd, &x->warmup_ms, x->warmup, sizeof *x->warmup_ms))
        for (size_t i = 0; i < x->warmup; i++) D(x->warmup_ms[i]);
    I(x->has_stats), D(x->p50_ms), D(x->p90_ms), D(x->min_ms), D(x->max_ms), D(x->first_ms);
    U64(x->missing_count), Z(x->nmissing);
    if (array(c, rd, &x->missing, x->nmissing, sizeof *x->missing))
        for (size_t i = 0; i < x->nmissing; i++) D(x->missing[i][0]), D(x->missing[i][1]);
    Z(x->missing_left_out), S(x->missing_flag), I(x->has_dropped), D(x->steps_touched);
    D(x->events_in_steps), U64(x->events_unplaced), U64(x->records_lost), S(x->dropped_flag);
}

static void data(tp_sum_buf *c, int rd, tp_data_result *x) {
    I(x->found), I(x->per_step), D(x->ms), D(x->share), S(x->where);
}

static void bd_warmup(tp_sum_buf *c, int rd, tp_bd_warmup *w) {
    D(w->step);
    for (int k = 0; k < TP_BD_NPARTS; k++) D(w->ms[k]);
    D(w->step_ms), D(w->untracked_ms);
    size_max(c, rd, &w->nranges, TP_BD_CPU_ROWS);
    for (size_t k = 0; k < w->nranges; k++) S(w->ranges[k].name), D(w->ranges[k].ms);
}

static void breakdown(tp_sum_buf *c, int rd, tp_breakdown_result *x) {
    I(x->present), I(x->gpu_basis), I(x->per_step), Z(x->windows), S(x->not_captured);
    S(x->captured_steps), Z(x->measured_all), I(x->has_uncaptured), D(x->captured_s);
    D(x->run_s), I(x->bounded), I(x->has_device), U32(x->device), Z(x->ndevices), I(x->has_parts);
    for (int k = 0; k < TP_BD_NPARTS; k++) stat5(c, rd, &x->ms[k]);
    for (int k = 0; k < TP_BD_NPARTS; k++) D(x->share[k]);
    D(x->busy_share), D(x->kernels_per_step), D(x->kernel_median_us);
    D(x->idle_gaps_per_step), D(x->idle_gap_median_us), I(x->has_most_idle_step);
    D(x->most_idle_step), I(x->has_cpu), Z(x->nranges);
    if (array(c, rd, &x->ranges, x->nranges, sizeof *x->ranges))
        for (size_t i = 0; i < x->nranges; i++) {
            tp_bd_range *r = &x->ranges[i];
            S(r->name), S(r->domain), stat5(c, rd, &r->ms), D(r->share);
        }
    stat5(c, rd, &x->step_ms), stat5(c, rd, &x->untracked_ms), D(x->untracked_share);
    Z(x->nwarmup);
    if (array(c, rd, &x->warmup, x->nwarmup, sizeof *x->warmup))
        for (size_t i = 0; i < x->nwarmup; i++) bd_warmup(c, rd, &x->warmup[i]);
}

static void gpu_device(tp_sum_buf *c, int rd, tp_gpu_device_result *x) {
    U(x->device), I(x->has_memory_peak), D(x->memory_peak_bytes);
    I(x->has_memory_peak_until), D(x->memory_peak_until_s), I(x->has_busy_share);
    D(x->busy_share), D(x->busy_ms), D(x->kernels), D(x->kernel_ms);
    A(x->kernel_ms_by_class), I(x->has_memcpy_memset), I(x->has_copies);
    D(x->memcpy_memset_ms), D(x->h2d_bytes), D(x->d2h_bytes), S(x->name), S(x->uuid);
    I(x->has_sm_count), D(x->sm_count), I(x->has_capacity), D(x->memory_capacity_bytes);
    D(x->memory_peak_share), flagged(c, rd, &x->busy_share_flagged);
    flagged(c, rd, &x->memory_peak_flagged);
}

/* The pauses, and their reasons in one block as gpu.c lays them out: each NUL-terminated, in
 * the pauses' order, the block allocated only when some pause has a reason. */
static void gpu_pauses(tp_sum_buf *c, int rd, tp_gpu_result *x) {
    Z(x->pauses_more), D(x->pauses_more_s);
    Z(x->npauses);
    if (!array(c, rd, &x->pauses, x->npauses, sizeof *x->pauses)) {
        if (rd) x->pause_reasons = NULL;
        return;
    }
    size_t bytes = 0;
    for (size_t i = 0; i < x->npauses; i++) {
        tp_gpu_pause *g = &x->pauses[i];
        D(g->from_s), D(g->to_s), I(g->never_resumed);
        unsigned char has = rd ? 0 : g->reason != NULL;
        raw(c, rd, &has, 1);
        /* reading: the reason's place in c's bytes for now, copied into the block below */
        if (has) g->reason = text(c, rd, g->reason);
        else if (rd) g->reason = NULL;
        bytes += g->reason ? strlen(g->reason) + 1 : 0;
    }
    if (!rd) return;
    x->pause_reasons = NULL;
    if (!bytes || c->bad || !(x->pause_reasons = tp_malloc(bytes))) {
        c->bad |= bytes != 0;
        for (size_t i = 0; i < x->npauses; i++) x->pauses[i].reason = NULL;
        return;
    }
    char *w = x->pause_reasons;
    for (size_t i = 0; i < x->npauses; i++) {
        const char *r = x->pauses[i].reason;
        if (!r) continue;
        size_t len = strlen(r);
        memcpy(w, r, len + 1);
        x->pauses[i].reason = w;
        w += len + 1;
    }
}

static void gpu(tp_sum_buf *c, int rd, tp_gpu_result *x) {
    I(x->present), I(x->per_step), I(x->in_span), I(x->has_launch_lag), D(x->launch_lag_ms);
    I(x->has_kernel_steps), S(x->kernel_steps_spec), Z(x->kernel_steps_in_window);
    Z(x->kernel_steps_measured), I(x->kernel_steps_opened), I(x->has_pauses);
    gpu_pauses(c, rd, x);
    U64(x->cupti_records_dropped), D(x->cupti_records_untimed), I(x->has_overhead);
    Z(x->overhead_records), Z(x->overhead_driver_records), D(x->overhead_ms);
    D(x->overhead_driver_ms), Z(x->noverhead_kinds);
    if (array(c, rd, &x->overhead_kinds, x->noverhead_kinds, sizeof *x->overhead_kinds))
        for (size_t i = 0; i < x->noverhead_kinds; i++) {
            tp_gpu_overhead *o = &x->overhead_kinds[i];
            S(o->name), I(o->driver), D(o->ms);
        }
    Z(x->records_clipped), D(x->records_clipped_ms), Z(x->ndevices);
    if (array(c, rd, &x->devices, x->ndevices, sizeof *x->devices))
        for (size_t i = 0; i < x->ndevices; i++) gpu_device(c, rd, &x->devices[i]);
    Z(x->nkernels);
    if (array(c, rd, &x->kernels, x->nkernels, sizeof *x->kernels))
        for (size_t i = 0; i < x->nkernels; i++) {
            tp_gpu_kernel *k = &x->kernels[i];
            S(k->name), S(k->cls), D(k->count_per_unit), D(k->total_ms), D(k->mean_us);
            D(k->share);
        }
    D(x->kernel_ms_total), S(x->not_captured), I(x->has_records_stopped);
    D(x->stopped_after_s), D(x->stopped_span_s), Z(x->steps_without_gpu_records);
    S(x->stopped_cause), I(x->has_host_syncs), D(x->host_syncs), D(x->host_sync_blocked_ms);
    D(x->graph_launches), D(x->graph_kernels), Z(x->kernels_after_steps);
    D(x->kernel_ms_after_steps), Z(x->steps_measured);
}

static void nvml_gpu(tp_sum_buf *c, int rd, tp_nvml_gpu_result *x) {
    U(x->index), S(x->name), S(x->uuid), I(x->has_cuda_device), I(x->cuda_device);
    I(x->shared_by_mig), S(x->mig_device), Z(x->samples), I(x->has_energy);
    S(x->energy_method), S(x->energy_counter), S(x->energy_series), D(x->sample_interval_ms);
    A(x->energy_unavailable), I(x->has_per_step_energy), Z(x->steps_with_energy);
    D(x->energy_per_step_j), D(x->energy_per_step_wh), D(x->energy_resolution_ms);
    I(x->energy_approximate), I(x->has_energy_from_power), D(x->energy_per_step_from_power_j);
    D(x->energy_j), D(x->avg_power_w), I(x->has_sm_clock), D(x->sm_clock_mhz_min);
    D(x->sm_clock_mhz_mean), D(x->sm_clock_mhz_max), I(x->has_power), D(x->power_mean_w);
    D(x->power_max_w), I(x->has_power_limit), D(x->power_limit_w), I(x->has_temp);
    D(x->temp_c_max), I(x->has_mem_used), D(x->mem_used_peak_bytes);
    I(x->has_mem_used_share), D(x->mem_used_peak_share), I(x->has_mem_total);
    D(x->mem_total_bytes), I(x->has_util), D(x->util_percent_mean), I(x->has_clock_events);
    I(x->throttled), D(x->throttled_share), raw(c, rd, &x->clock_event_mask, 8);
    flagged(c, rd, &x->util_flagged), flagged(c, rd, &x->mem_used_share_flagged);
    if (rd) x->energy_unavailable[sizeof x->energy_unavailable - 1] = 0;
}

static void nvml(tp_sum_buf *c, int rd, tp_nvml_result *x) {
    I(x->present), I(x->per_step), I(x->shared_with_other_ranks), I(x->has_sampled_by);
    A(x->sampled_by), D(x->sampler_pid), S(x->rank_gpus_by), I(x->has_not_sampled);
    size_max(c, rd, &x->nnot_sampled, sizeof x->not_sampled / sizeof *x->not_sampled);
    for (size_t i = 0; i < x->nnot_sampled; i++) S(x->not_sampled[i]);
    S(x->device_match), S(x->driver_version), I(x->has_hz), D(x->hz), I(x->has_total);
    D(x->total_energy_j), D(x->total_avg_power_w), S(x->energy_method), Z(x->ngpus);
    if (array(c, rd, &x->gpus, x->ngpus, sizeof *x->gpus))
        for (size_t i = 0; i < x->ngpus; i++) nvml_gpu(c, rd, &x->gpus[i]);
    if (rd) x->sampled_by[sizeof x->sampled_by - 1] = 0;
}

static void comm_row(tp_sum_buf *c, int rd, tp_comm_row_result *x) {
    U64(x->hash), U32(x->op), U32(x->nranks), U32(x->rank), S(x->name), U64(x->first);
    U64(x->count), U64(x->bytes), U64(x->timed), U64(x->unfinished), U64(x->enqueue_only);
    U64(x->in_steps), U64(x->bytes_in_steps), U64(x->time_ns), U64(x->bw_ops), U64(x->bw_ns);
    D(x->bw_size), A(x->src), U32(x->dtypes), Z(x->op0);
}

/* A communicator; its rows are a run of the rank's rows (tp_comm_result.rows), kept as their
 * index there. */
static void communicator(tp_sum_buf *c, int rd, tp_comm_communicator_result *x,
                         const tp_comm_result *cr) {
    A(x->id), U64(x->hash), U32(x->size), U32(x->rank), U(x->nodes), S(x->name);
    S(x->torch_group), S(x->source), A(x->backend), Z(x->nrows);
    size_t at = x->rows && cr->rows ? (size_t)(x->rows - cr->rows) : SIZE_MAX;
    Z(at);
    if (rd) {
        x->rows = NULL;
        if (at == SIZE_MAX) return;
        if (!cr->rows || at > cr->nrows || x->nrows > cr->nrows - at) c->bad = 1;
        else x->rows = cr->rows + at;
        x->id[sizeof x->id - 1] = x->backend[sizeof x->backend - 1] = 0;
    }
}

static void exposure(tp_sum_buf *c, int rd, tp_comm_exposure_result *x) {
    I(x->present), I(x->per_step), I(x->in_span), S(x->basis), S(x->note);
    size_max(c, rd, &x->ndevices, sizeof x->devices / sizeof *x->devices);
    A(x->devices), I(x->has_figures), Z(x->windows), D(x->window_ms);
    stat5(c, rd, &x->comm_ms), stat5(c, rd, &x->exposed_ms), stat5(c, rd, &x->overlapped_ms);
    stat5(c, rd, &x->exposed_share_per_window), D(x->exposed_share), D(x->overlapped_share);
    I(x->has_worst_step), D(x->worst_step);
}

static void comm(tp_sum_buf *c, int rd, tp_comm_result *x) {
    I(x->present), Z(x->ops), Z(x->nccl_ops), Z(x->mpi_ops), Z(x->torch_ops);
    Z(x->ntorch_backends);
    if (array(c, rd, &x->torch_backends, x->ntorch_backends, sizeof *x->torch_backends))
        for (size_t i = 0; i < x->ntorch_backends; i++) {
            A(x->torch_backends[i]);
            if (rd) x->torch_backends[i][sizeof *x->torch_backends - 1] = 0;
        }
    I(x->has_not_recorded), D(x->nccl_ops_not_recorded), I(x->nothing), I(x->resolved);
    I(x->has_placement), I(x->rows_no_memory);
    D(x->placement_ops), D(x->shift_us_p50), D(x->shift_us_min);
    D(x->shift_us_max);
    /* the rows before the communicators, which point into them */
    Z(x->nrows);
    if (array(c, rd, &x->rows, x->nrows, sizeof *x->rows))
        for (size_t i = 0; i < x->nrows; i++) comm_row(c, rd, &x->rows[i]);
    Z(x->ncomms);
    if (array(c, rd, &x->comms, x->ncomms, sizeof *x->comms))
        for (size_t i = 0; i < x->ncomms; i++) communicator(c, rd, &x->comms[i], x);
    exposure(c, rd, &x->exposure), Z(x->nsteps);
}

static void timers(tp_sum_buf *c, int rd, tp_timers_result *x) {
    I(x->present), I(x->per_step), Z(x->nrows);
    if (array(c, rd, &x->rows, x->nrows, sizeof *x->rows))
        for (size_t i = 0; i < x->nrows; i++) S(x->rows[i].name), D(x->rows[i].ms),
                                                   D(x->rows[i].count);
}

static void range_rows(tp_sum_buf *c, int rd, tp_range_row **v, size_t n) {
    if (!array(c, rd, v, n, sizeof **v)) return;
    for (size_t i = 0; i < n; i++) {
        tp_range_row *r = &(*v)[i];
        S(r->name), S(r->domain), D(r->count), D(r->count_per_unit), D(r->inclusive_ms);
        D(r->exclusive_ms), D(r->inclusive_share), D(r->exclusive_share);
    }
}

static void ranges(tp_sum_buf *c, int rd, tp_ranges_result *x) {
    I(x->present), I(x->per_step), Z(x->ninclusive), Z(x->nexclusive), Z(x->nunclosed);
    range_rows(c, rd, &x->top_inclusive, x->ninclusive);
    range_rows(c, rd, &x->top_exclusive, x->nexclusive);
    range_rows(c, rd, &x->unclosed, x->nunclosed);
    Z(x->distinct_names);
}

static void sampler(tp_sum_buf *c, int rd, tp_process_sampler_result *x) {
    I(x->present), D(x->samples), I(x->cpu_sampled), I(x->has_cpu_mean), I(x->has_cpu_max);
    D(x->cpu_percent_mean), D(x->cpu_percent_max), flagged(c, rd, &x->cpu_mean_flagged);
    flagged(c, rd, &x->cpu_max_flagged), A(x->cpu_flag_reason), D(x->rss_peak_bytes);
    I(x->has_threads), I(x->has_ctx_switches), D(x->threads_max);
    D(x->ctx_switches_per_s_mean);
    if (rd) x->cpu_flag_reason[sizeof x->cpu_flag_reason - 1] = 0;
}

static void mem_step(tp_sum_buf *c, int rd, tp_mem_step_result *x) {
    D(x->step), I(x->warmup), Z(x->samples), I(x->has_start), D(x->start_allocated_bytes);
    D(x->start_reserved_bytes), peak(c, rd, &x->allocated), peak(c, rd, &x->reserved);
    S(x->peak_phase), S(x->peak_module), S(x->top_sample_module), D(x->top_sample_bytes);
    for (int k = 0; k < TP_MEM_NPHASES; k++) peak(c, rd, &x->phase_allocated[k]);
    I(x->has_device_peak), D(x->device_peak_bytes);
}

static void oom(tp_sum_buf *c, int rd, tp_mem_oom *x) {
    I(x->present), S(x->source), I(x->has_request), I(x->has_free), I(x->has_total);
    I(x->has_allocated), I(x->has_reserved), I(x->has_largest_free), D(x->request_bytes);
    D(x->free_bytes), D(x->total_bytes), D(x->allocated_bytes), D(x->reserved_bytes);
    D(x->largest_free_block_bytes), I(x->has_device), I(x->has_step), D(x->device), D(x->step);
    S(x->phase), S(x->module), S(x->snapshot), I(x->snapshot_unusable), I(x->has_count);
    D(x->count), I(x->has_time), D(x->at_s);
    size_max(c, rd, &x->ntop, TP_MEM_TOP);
    for (size_t i = 0; i < x->ntop; i++) {
        D(x->top[i].bytes), D(x->top[i].stream);
        owned(c, rd, &x->top[i].frames);
    }
    I(x->top_unreadable), I(x->history), I(x->has_growth), D(x->growth_step);
    D(x->growth_from_bytes), D(x->growth_bytes), I(x->recovered), Z(x->steps_after);
}

static void memory(tp_sum_buf *c, int rd, tp_memory_result *x) {
    I(x->present), I(x->has_device), U(x->device), I(x->has_capacity), D(x->capacity_bytes);
    S(x->capacity_source), Z(x->samples), peak(c, rd, &x->peak_allocated);
    peak(c, rd, &x->peak_reserved), I(x->has_shares), D(x->peak_allocated_share);
    D(x->peak_reserved_share), D(x->headroom_bytes), I(x->has_fragmentation);
    D(x->fragmentation), D(x->frag_allocated_bytes), D(x->frag_reserved_bytes), D(x->frag_at_s);
    I(x->has_inactive_split), D(x->inactive_split_bytes), I(x->has_alloc_retries);
    I(x->has_ooms), D(x->alloc_retries), D(x->ooms), Z(x->nsteps);
    if (array(c, rd, &x->steps, x->nsteps, sizeof *x->steps))
        for (size_t i = 0; i < x->nsteps; i++) mem_step(c, rd, &x->steps[i]);
    Z(x->leak_steps), Z(x->leak_rises), I(x->leak_monotonic), D(x->leak_first_bytes);
    D(x->leak_last_bytes), D(x->leak_first_step), D(x->leak_last_step);
    I(x->has_device_peak), D(x->device_peak_bytes), oom(c, rd, &x->oom);
}

void tp_sum_rank_result(tp_sum_buf *c, tp_rank_result *rr, int rd) {
    c->rr = rr;
    if (rd) memset(rr, 0, sizeof *rr);
    /* host is not coded: the slim process's, set by the caller */
    capture(c, rd, &rr->capture);
    I(rr->rank), steps(c, rd, &rr->steps), data(c, rd, &rr->data);
    breakdown(c, rd, &rr->breakdown), gpu(c, rd, &rr->gpu), nvml(c, rd, &rr->nvml);
    comm(c, rd, &rr->comm), timers(c, rd, &rr->timers), A(rr->label), I(rr->pid);
    I(rr->no_memory);
    ranges(c, rd, &rr->ranges), sampler(c, rd, &rr->process);
    breakdown(c, rd, &rr->phases), memory(c, rd, &rr->memory);
    if (rd) rr->label[sizeof rr->label - 1] = 0;
}

/* ------------------------------------------------------------------ the memos */

void tp_sum_steps(tp_sum_buf *c, tp_steps **sp, int rd) {
    unsigned char has = rd ? 0 : *sp != NULL;
    raw(c, rd, &has, 1);
    if (!has) {
        if (rd) *sp = NULL;
        return;
    }
    tp_steps *s = rd ? tp_calloc(1, sizeof *s) : *sp;
    if (!s || (!rd && (s->packed || s->spilled))) {
        c->bad = 1;
        return;
    }
    int source = (int)s->source;
    I(source), S(s->name), U32(s->thread), Z(s->nsteps), Z(s->nwarmup);
    if (rd && (source < TP_STEPS_NONE || source > TP_STEPS_ITERATION)) c->bad = 1;
    s->source = (tp_step_source)source;
    if (array(c, rd, &s->steps, s->nsteps, sizeof *s->steps))
        for (size_t i = 0; i < s->nsteps; i++) {
            tp_step *t = &s->steps[i];
            U64(t->start), U64(t->end), U64(t->app_step), I(t->warmup);
        }
    Z(s->nmissing);
    if (array(c, rd, &s->missing, s->nmissing, sizeof *s->missing))
        for (size_t i = 0; i < s->nmissing; i++) U64(s->missing[i].s), U64(s->missing[i].e);
    U64(s->nmissing_steps);
    if (rd && (c->bad || s->nwarmup > s->nsteps || (s->nsteps && !s->steps))) {
        c->bad = 1;
        tp_steps_free(s);
        free(s);
        s = NULL;
    }
    if (rd) *sp = s;
}

void tp_sum_comm(tp_sum_buf *c, tp_comm_time **tp, size_t n, int rd) {
    if (!array(c, rd, tp, n, sizeof **tp)) return;
    for (size_t i = 0; i < n; i++) {
        tp_comm_time *t = &(*tp)[i];
        int src = (int)t->src;
        U64(t->start), U64(t->end), I(src), Z(t->kernel), raw(c, rd, &t->device, 4);
        raw(c, rd, &t->shift_ns, 8), I(t->checked);
        /* the analyses index by it (comm_rank.c: timed ops per source) */
        if (rd && (src < TP_COMM_TIME_HOST || src > TP_COMM_TIME_GPU)) c->bad = 1;
        t->src = (tp_comm_src)src;
    }
}

/* ------------------------------------------------------------------ the section's JSON */

/* A node: its type, then its value (a number's double bit for bit, a string's or raw text's
 * bytes) or its children (an object's each with its key), so that the fragment read prints
 * as the one written, byte for byte, NaN and raw numbers included. */
enum { J_NULL, J_FALSE, J_TRUE, J_NUMBER, J_STRING, J_RAW, J_ARRAY, J_OBJECT };

void tp_sum_json_put(tp_sum_buf *c, const cJSON *j) {
    unsigned char t = cJSON_IsNull(j)     ? J_NULL
                      : cJSON_IsFalse(j)  ? J_FALSE
                      : cJSON_IsTrue(j)   ? J_TRUE
                      : cJSON_IsNumber(j) ? J_NUMBER
                      : cJSON_IsString(j) ? J_STRING
                      : cJSON_IsRaw(j)    ? J_RAW
                      : cJSON_IsArray(j)  ? J_ARRAY
                      : cJSON_IsObject(j) ? J_OBJECT
                                          : 0xff;
    tp_sum_put(c, &t, 1);
    if (t == J_NUMBER) tp_sum_put(c, &j->valuedouble, sizeof j->valuedouble);
    else if (t == J_STRING || t == J_RAW) text(c, 0, j->valuestring ? j->valuestring : "");
    else if (t == J_ARRAY || t == J_OBJECT) {
        uint64_t n = (uint64_t)cJSON_GetArraySize(j);
        tp_sum_put(c, &n, 8);
        for (const cJSON *k = j->child; k; k = k->next) {
            if (t == J_OBJECT) text(c, 0, k->string ? k->string : "");
            tp_sum_json_put(c, k);
        }
    } else if (t == 0xff) c->bad = 1;
}

static cJSON *json_get(tp_sum_buf *c, int depth) {
    unsigned char t = 0xff;
    tp_sum_get(c, &t, 1);
    if (c->bad || depth > 200) {
        c->bad = 1;
        return NULL;
    }
    double d;
    const char *s;
    switch (t) {
    case J_NULL: return cJSON_CreateNull();
    case J_FALSE: return cJSON_CreateFalse();
    case J_TRUE: return cJSON_CreateTrue();
    case J_NUMBER: tp_sum_get(c, &d, sizeof d); return c->bad ? NULL : cJSON_CreateNumber(d);
    case J_STRING:
    case J_RAW:
        s = text(c, 1, NULL);
        return !s ? NULL : t == J_STRING ? cJSON_CreateString(s) : cJSON_CreateRaw(s);
    case J_ARRAY:
    case J_OBJECT: break;
    default: c->bad = 1; return NULL;
    }
    uint64_t n = 0;
    tp_sum_get(c, &n, 8);
    cJSON *o = t == J_ARRAY ? cJSON_CreateArray() : cJSON_CreateObject();
    for (uint64_t i = 0; o && !c->bad && i < n; i++) {
        const char *key = t == J_OBJECT ? text(c, 1, NULL) : NULL;
        cJSON *k = c->bad ? NULL : json_get(c, depth + 1);
        /* a node or key that found no memory: the fragment would be short, so it is not read
         * (the section is computed from the rank file instead) */
        int added = k && (t == J_OBJECT ? cJSON_AddItemToObject(o, key, k)
                                        : cJSON_AddItemToArray(o, k));
        if (!added) {
            cJSON_Delete(k);
            c->bad = 1;
            break;
        }
    }
    if (!o || c->bad) {
        c->bad = 1;
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *tp_sum_json_get(tp_sum_buf *c) {
    cJSON *j = json_get(c, 0);
    if (!j) c->bad = 1;
    return j;
}
