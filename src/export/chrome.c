/*
 * chrome.c — writes a loaded run as Chrome Trace Event JSON in the shape of Kineto's
 * per-rank traces (the Trace Event Format document; pytorch/kineto
 * libkineto/src/output_json.cpp), for Perfetto UI, chrome://tracing and HTA.
 *
 * Events are streamed to the FILE as they are produced; the only memory held is one
 * track's worth of sort keys, because a run can hold millions of ranges. Times go out on
 * the realtime clock as microseconds relative to baseTimeNanoseconds with three decimals,
 * i.e. exact nanoseconds, small enough to survive a reader's conversion to double.
 *
 * The one real decision is which ranges become complete ("X") events. Perfetto drops X
 * events that overlap on one thread without nesting, which NVTX allows (one stack per
 * domain, and ranges left open at exit). So each thread's synchronous ranges are swept in
 * start order and only those that nest with everything already kept stay X; the rest are
 * written as async b/e pairs, as are start/end ranges that may cross threads.
 */
#define _GNU_SOURCE
#include "export/chrome.h"
#include "export/chrome_cw.h"

#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/clocks.h"
#include "analysis/comm.h"
#include "analysis/gpu.h"
#include "analysis/stats.h"
#include "analysis/steps.h"
#include "format/format.h"
#include "trainprof.h"

/* Synthetic pids for processes whose preferred pid is taken: above any Linux pid_max
 * (2^22) and any plausible rank, so they collide with neither. */
#define SYNTH_PID_BASE 1000000000LL


/* Whether an event over [ts, te] (ns after the base) is in the selected window [lo, hi):
 * an interval that overlaps it (touching an end is not overlapping: the step before a
 * selected one ends where it begins), an instant inside it. */
int tp_cw_in_win(const cw *w, int64_t ts, int64_t te) {
    if (!w->win) return 1;
    if (te <= ts) return ts >= w->win_lo && ts < w->win_hi;
    return te > w->win_lo && ts < w->win_hi;
}

/* Whether counter `name` goes into the file (see cw.gpu_only). */
static int counter_wanted(const cw *w, const char *name, int64_t ts) {
    unsigned long idx;
    int nvml = tp_gpu_counter(name, &idx) != NULL;
    if (w->gpu_only && (ts < 0 || ts > w->gpu_until || !nvml)) return 0;
    if (!nvml || !w->gpu_filter) return 1;
    for (size_t i = 0; i < w->ngpu_allow; i++)
        if (w->gpu_allow[i] == idx) return 1;
    return 0;
}

/* One candidate complete event on a track: a synchronous range or an API step. */
enum { IT_STEP = 0, IT_RANGE = 1 }; /* steps first among equals: they are kept by force */

typedef struct item {
    uint64_t start, end; /* monotonic ns of the process */
    size_t idx;          /* range index in its thread, or step index */
    uint32_t thread;     /* index in p->threads */
    uint32_t kind;
} item;

typedef struct scratch { /* reused across tracks */
    item *items;
    size_t cap;
    uint64_t *stack;
    item *fixed;
    size_t cap_fixed;
} scratch;

/* ------------------------------------------------------------------ small writers */

/* Writes bytes that the model did not clean (header host, directory path) as a JSON
 * string: tp_json_string needs valid UTF-8, so bad bytes become U+FFFD first. */
static void put_raw_string(FILE *f, const char *s) {
    size_t n = strlen(s);
    char small[256];
    char *clean = 3 * n + 1 <= sizeof small ? small : malloc(3 * n + 1);
    if (!clean) {
        tp_json_string(f, "(out of memory)");
        return;
    }
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
                   : (c & 0xF8) == 0xF0 ? 4 : 0;
        int ok = len > 0 && i + len <= n;
        for (size_t k = 1; ok && k < len; k++) ok = (p[i + k] & 0xC0) == 0x80;
        if (ok && len > 1) { /* reject overlongs, surrogates and code points past U+10FFFF */
            uint32_t cp = c & (0x7Fu >> len);
            for (size_t k = 1; k < len; k++) cp = cp << 6 | (p[i + k] & 0x3Fu);
            static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
            ok = cp >= min_cp[len] && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
        }
        if (ok) {
            memcpy(clean + o, p + i, len);
            o += len;
            i += len;
        } else {
            memcpy(clean + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    clean[o] = 0;
    tp_json_string(f, clean);
    if (clean != small) free(clean);
}

/* Exact ns as µs with three decimals; integer arithmetic, so no rounding and no locale. */
static void put_us(FILE *f, int64_t ns) {
    uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    fprintf(f, "%s%" PRIu64 ".%03u", ns < 0 ? "-" : "", a / 1000u, (unsigned)(a % 1000u));
}

/* A finite double, shortest form that reads back exactly. printf follows LC_NUMERIC, and
 * a program that set a decimal-comma locale must not get invalid JSON. */
void tp_cw_put_double(FILE *f, double v) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v);
    const char *dp = localeconv()->decimal_point;
    if (dp && *dp && strcmp(dp, ".") != 0) {
        char *q = strstr(buf, dp);
        if (q) {
            size_t dl = strlen(dp);
            *q = '.';
            memmove(q + 1, q + dl, strlen(q + dl) + 1);
        }
    }
    fputs(buf, f);
}

int64_t tp_cw_rel_ns(const cw *w, const tp_process *p, uint64_t mono) {
    /* unsigned wrap-around gives the right signed difference for events before the base */
    return (int64_t)((uint64_t)tp_clocks_aligned(w->ck, p, (size_t)(p - w->run->procs), mono) -
                     w->base_rt);
}

/* The run's clock alignment as metadata: each host's offset (ns added to its start-pair
 * mapping) and how it was found, and each rank file whose start pair was not used. */
static void write_clock_meta(FILE *out, const tp_clocks_result *ck) {
    fputs("\"trainprof.clock_offsets\": {", out);
    for (size_t h = 0; h < ck->nper_host; h++) {
        fputs(h ? ", " : "", out);
        put_raw_string(out, ck->per_host[h].host);
        fprintf(out, ": %" PRId64, ck->per_host[h].offset_ns);
    }
    fputs("},\n\"trainprof.clock_alignment\": {\"status\": ", out);
    tp_json_string(out, ck->status ? ck->status : "unknown");
    fputs(", \"hosts\": [", out);
    for (size_t h = 0; h < ck->nper_host; h++) {
        const tp_host_clock_result *x = &ck->per_host[h];
        fputs(h ? ", {\"host\": " : "{\"host\": ", out);
        put_raw_string(out, x->host);
        fprintf(out, ", \"offset_ns\": %" PRId64 ", \"found_by\": ", x->offset_ns);
        tp_json_string(out, x->found_by);
        if (!x->reference && x->aligned)
            fprintf(out, ", \"collectives_used\": %.0f", x->collectives_used);
        if (x->has_residual) {
            fputs(", \"residual_median_us\": ", out);
            tp_cw_put_double(out, x->residual_median_us);
        }
        fputc('}', out);
    }
    fputs("], \"unusable_clock_pairs\": [", out);
    for (size_t i = 0; i < ck->nissues; i++) {
        fputs(i ? ", " : "", out);
        put_raw_string(out, ck->issues[i].line);
    }
    fputs("]},\n", out);
}

void tp_cw_note_time(cw *w, int64_t rel) {
    if (!w->have_last || rel > w->last_rel) w->last_rel = rel;
    w->have_last = 1;
}

/* Starts an event object: separator, phase, pid and tid. */
void tp_cw_ev_open(cw *w, const char *ph, int64_t pid, uint32_t tid) {
    fputs(w->nevents++ ? ",\n" : "\n", w->f);
    fprintf(w->f, "{\"ph\":\"%s\",\"pid\":%" PRId64 ",\"tid\":%" PRIu32, ph, pid, tid);
}

void tp_cw_put_ts(cw *w, const char *key, int64_t rel) {
    fprintf(w->f, ",\"%s\":", key);
    put_us(w->f, rel);
}

/* NVTX domain, category and the unclosed flag as args (the object is always written:
 * some readers expect every event to carry args). */
static void put_args(cw *w, const tp_process *p, uint32_t domain, uint32_t category,
                     int unclosed, const char *extra) {
    FILE *f = w->f;
    int n = 0;
    fputs(",\"args\":{", f);
    if (domain) {
        fputs("\"domain\":", f);
        tp_json_string(f, tp_domain_name(p, domain));
        n++;
    }
    if (category) {
        const char *cn = tp_category_name(p, domain, category);
        fputs(n++ ? ",\"category\":" : "\"category\":", f);
        if (cn && *cn) tp_json_string(f, cn);
        else fprintf(f, "%" PRIu32, category);
    }
    if (unclosed) fputs(n++ ? ",\"unclosed\":true" : "\"unclosed\":true", f);
    if (extra) fprintf(f, "%s%s", n++ ? "," : "", extra);
    fputc('}', f);
}

void tp_cw_write_meta(cw *w, int64_t pid, uint32_t tid, const char *what, const char *key) {
    tp_cw_ev_open(w, "M", pid, tid);
    fprintf(w->f, ",\"name\":\"%s\",\"ts\":0.000,\"args\":{\"%s\":", what, key);
}

/* ------------------------------------------------------------------ ranges and steps */

static void step_name(char *buf, size_t n, uint64_t app_step) {
    snprintf(buf, n, "ProfilerStep#%" PRIu64, app_step);
}

/* Opens an X event (the caller writes its args and closes it); 0 when it is outside the
 * selected window and nothing was written. */
static int write_complete(cw *w, const tp_process *p, int64_t pid, uint32_t tid,
                          const char *name, uint64_t start, uint64_t end) {
    int64_t ts = tp_cw_rel_ns(w, p, start), te = tp_cw_rel_ns(w, p, end);
    if (!tp_cw_in_win(w, ts, te)) return 0;
    tp_cw_ev_open(w, "X", pid, tid);
    fputs(",\"cat\":\"user_annotation\",\"name\":", w->f);
    tp_json_string(w->f, name);
    tp_cw_put_ts(w, "ts", ts);
    tp_cw_put_ts(w, "dur", te - ts);
    tp_cw_note_time(w, te);
    return 1;
}

/* An async b/e pair. The e goes on the thread that ended the range when it is known;
 * viewers match the pair by cat and id, not by thread. */
static void write_async(cw *w, const tp_process *p, int64_t pid, uint32_t tid, uint32_t end_tid,
                        const char *name, uint64_t start, uint64_t end, const tp_range *r,
                        const char *extra) {
    int64_t ts = tp_cw_rel_ns(w, p, start), te = tp_cw_rel_ns(w, p, end);
    if (!tp_cw_in_win(w, ts, te)) return;
    uint64_t id = ++w->next_async;
    tp_cw_ev_open(w, "b", pid, tid);
    fprintf(w->f, ",\"cat\":\"async_range\",\"id\":\"%" PRIu64 "\",\"name\":", id);
    tp_json_string(w->f, name);
    tp_cw_put_ts(w, "ts", ts);
    if (r) put_args(w, p, r->domain, r->category, r->flags & TP_R_UNCLOSED, extra);
    else put_args(w, p, 0, 0, 0, extra);
    fputc('}', w->f);
    tp_cw_ev_open(w, "e", pid, end_tid ? end_tid : tid);
    fprintf(w->f, ",\"cat\":\"async_range\",\"id\":\"%" PRIu64 "\",\"name\":", id);
    tp_json_string(w->f, name);
    tp_cw_put_ts(w, "ts", te);
    fputc('}', w->f);
    tp_cw_note_time(w, te);
}

static int cmp_item(const void *a, const void *b) {
    const item *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end > y->end ? -1 : 1; /* parents before children */
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    if (x->thread != y->thread) return x->thread < y->thread ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Would [s, e] cross a kept step that starts inside it? Kept steps are disjoint and sorted,
 * so only the last one starting before e can end after e. (A step that started earlier is
 * already on the sweep's stack and is checked there.) */
static int crosses_step(const item *fixed, size_t n, uint64_t s, uint64_t e) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (fixed[mid].start < e) lo = mid + 1;
        else hi = mid;
    }
    return lo > 0 && fixed[lo - 1].start > s && fixed[lo - 1].end > e;
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap : 256;
    while (nc < need) nc *= 2;
    void *na = realloc(*arr, nc * elem);
    if (!na) return TPROF_ERR_NO_MEMORY;
    *arr = na;
    *cap = nc;
    return 0;
}

/* All events of one track: the threads of p whose os tid is `tid` (a tid can be reused by
 * a later thread, and both then share one row in the viewer, so they must nest together).
 * `steps` is non-NULL when the API steps live on this track. */
static int write_track(cw *w, const tp_process *p, int64_t pid, uint32_t tid,
                       const tp_steps *steps, scratch *sc) {
    size_t n = 0, nsteps = steps ? steps->nsteps : 0;
    for (size_t t = 0; t < p->nthreads; t++) {
        if (p->threads[t].os_tid != tid) continue;
        for (size_t k = 0; k < p->threads[t].nranges; k++)
            n += !(p->threads[t].ranges[k].flags & TP_R_ASYNC);
    }
    n += nsteps;
    if (grow((void **)&sc->items, &sc->cap, n, sizeof *sc->items) ||
        grow((void **)&sc->fixed, &sc->cap_fixed, nsteps, sizeof *sc->fixed))
        return TPROF_ERR_NO_MEMORY;
    uint64_t *stack = realloc(sc->stack, (n ? n : 1) * sizeof *stack);
    if (!stack) return TPROF_ERR_NO_MEMORY;
    sc->stack = stack;

    /* API steps first: they do not overlap one another in practice; any that would is
     * demoted like a range. The kept ones are forced X events, so HTA sees every step. */
    size_t ni = 0, nfixed = 0;
    char name[48];
    for (size_t k = 0; k < nsteps; k++) {
        const tp_step *s = &steps->steps[k];
        if (nfixed && s->start < sc->fixed[nfixed - 1].end) {
            step_name(name, sizeof name, s->app_step);
            write_async(w, p, pid, tid, 0, name, s->start, s->end, NULL,
                        s->warmup ? "\"warmup\":true" : NULL);
            continue;
        }
        item it = {s->start, s->end, k, 0, IT_STEP};
        sc->fixed[nfixed++] = it;
        sc->items[ni++] = it;
    }
    for (size_t t = 0; t < p->nthreads; t++) {
        const tp_thread *th = &p->threads[t];
        if (th->os_tid != tid) continue;
        for (size_t k = 0; k < th->nranges; k++) {
            if (th->ranges[k].flags & TP_R_ASYNC) continue;
            sc->items[ni++] = (item){th->ranges[k].start, th->ranges[k].end, k, (uint32_t)t,
                                     IT_RANGE};
        }
    }
    if (ni > 1) qsort(sc->items, ni, sizeof *sc->items, cmp_item); /* items is NULL when 0 */

    /* The sweep: the stack holds the ends of the kept events still open at this start. */
    size_t sp = 0;
    for (size_t i = 0; i < ni; i++) {
        const item *it = &sc->items[i];
        while (sp && stack[sp - 1] <= it->start) sp--;
        int keep = it->kind == IT_STEP ||
                   ((!sp || it->end <= stack[sp - 1]) &&
                    !crosses_step(sc->fixed, nfixed, it->start, it->end));
        if (it->kind == IT_STEP) {
            const tp_step *s = &steps->steps[it->idx];
            step_name(name, sizeof name, s->app_step);
            if (write_complete(w, p, pid, tid, name, s->start, s->end))
                fprintf(w->f, ",\"args\":{\"step\":%" PRIu64 "%s}}", s->app_step,
                        s->warmup ? ",\"warmup\":true" : "");
        } else {
            const tp_range *r = &p->threads[it->thread].ranges[it->idx];
            if (keep) {
                if (write_complete(w, p, pid, tid, r->name, r->start, r->end)) {
                    put_args(w, p, r->domain, r->category, r->flags & TP_R_UNCLOSED, NULL);
                    fputc('}', w->f);
                }
            } else {
                write_async(w, p, pid, tid, 0, r->name, r->start, r->end, r, NULL);
            }
        }
        if (keep) stack[sp++] = it->end;
    }

    /* Start/end ranges, marks and counters need no ordering. */
    for (size_t t = 0; t < p->nthreads; t++) {
        const tp_thread *th = &p->threads[t];
        if (th->os_tid != tid) continue;
        for (size_t k = 0; k < th->nranges; k++) {
            const tp_range *r = &th->ranges[k];
            if (r->flags & TP_R_ASYNC)
                write_async(w, p, pid, tid, r->end_tid, r->name, r->start, r->end, r, NULL);
        }
        for (size_t k = 0; k < th->nmarks; k++) {
            const tp_mark *m = &th->marks[k];
            int64_t ts = tp_cw_rel_ns(w, p, m->ts);
            if (!tp_cw_in_win(w, ts, ts)) continue;
            tp_cw_ev_open(w, "i", pid, tid);
            fputs(",\"s\":\"t\",\"cat\":\"mark\",\"name\":", w->f);
            tp_json_string(w->f, m->name);
            tp_cw_put_ts(w, "ts", ts);
            put_args(w, p, m->domain, m->category, 0, NULL);
            fputc('}', w->f);
            tp_cw_note_time(w, ts);
        }
        for (size_t k = 0; k < th->ncounters; k++) {
            const tp_counter *c = &th->counters[k];
            if (!isfinite(c->value)) continue; /* JSON has no NaN or Inf */
            int64_t ts = tp_cw_rel_ns(w, p, c->ts);
            if (!counter_wanted(w, c->name, ts) || !tp_cw_in_win(w, ts, ts)) continue;
            tp_cw_ev_open(w, "C", pid, tid);
            fputs(",\"name\":", w->f);
            tp_json_string(w->f, c->name);
            tp_cw_put_ts(w, "ts", ts);
            fputs(",\"args\":{\"value\":", w->f);
            tp_cw_put_double(w->f, c->value);
            fputs("}}", w->f);
            tp_cw_note_time(w, ts);
        }
    }
    return ferror(w->f) ? TPROF_ERR_IO : TPROF_OK;
}

/* ------------------------------------------------------------------ processes */

static int64_t sort_index(const tp_process *p) {
    if (p->role == TP_ROLE_RANK) return p->rank;
    if (p->helper_of >= 0) return p->helper_of; /* next to its rank; ties go by pid */
    return SYNTH_PID_BASE;                      /* unattached helpers last */
}

/* ------------------------------------------------------------------ GPU activity */

/* GPU tracks are tids above any thread id: 0x40000000 | device << 16 | stream. */
static uint32_t gpu_tid(uint32_t device, uint32_t stream) {
    return 0x40000000u | ((device & 0x3fffu) << 16) | (stream & 0xffffu);
}

static int cmp_api_corr(const void *a, const void *b) {
    const tp_gpu_op *x = *(const tp_gpu_op *const *)a, *y = *(const tp_gpu_op *const *)b;
    return x->correlation < y->correlation ? -1 : x->correlation > y->correlation;
}

static int cmp_op_track(const void *a, const void *b) {
    const tp_gpu_op *x = *(const tp_gpu_op *const *)a, *y = *(const tp_gpu_op *const *)b;
    uint32_t tx = gpu_tid(x->device, x->stream), ty = gpu_tid(y->device, y->stream);
    if (tx != ty) return tx < ty ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

static const char *gpu_cat(const tp_gpu_op *o) {
    return o->type == TPROF_REC_GPU_KERNEL   ? "kernel"
           : o->type == TPROF_REC_GPU_MEMCPY ? "gpu_memcpy"
           : o->type == TPROF_REC_GPU_MEMSET ? "gpu_memset"
                                             : "cuda_sync";
}

static const char *gpu_name(const tp_gpu_op *o, char *buf, size_t n) {
    static const char *const copy_kinds[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                             "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
    if (o->type == TPROF_REC_GPU_KERNEL) return o->name ? o->name : "(kernel)";
    if (o->type == TPROF_REC_GPU_MEMCPY) {
        snprintf(buf, n, "Memcpy %s", o->kind < 11 ? copy_kinds[o->kind] : "?");
        return buf;
    }
    return o->type == TPROF_REC_GPU_MEMSET ? "Memset" : "Synchronization";
}

/* Kernels, copies and memsets as complete events on one track per device and stream (as
 * Kineto: the stream is the tid), the CUDA runtime calls on their CPU threads, an ac2g
 * flow arrow from each launch to its work (CUPTI's correlation id), and the device memory
 * allocated as a counter track. */
static int write_gpu(cw *w, const tp_process *p, int64_t pid) {
    FILE *f = w->f;
    if (!p->ngpu && !p->napi && !p->ngmem) return TPROF_OK;
    const tp_gpu_op **ops = malloc((p->ngpu ? p->ngpu : 1) * sizeof *ops);
    const tp_gpu_op **apis = malloc((p->napi ? p->napi : 1) * sizeof *apis);
    if (!ops || !apis) {
        free(ops);
        free(apis);
        return TPROF_ERR_NO_MEMORY;
    }
    size_t n = 0;
    for (size_t i = 0; i < p->ngpu; i++)
        if (p->gpu[i].type != TPROF_REC_GPU_SYNC) ops[n++] = &p->gpu[i];
    if (n > 1) qsort(ops, n, sizeof *ops, cmp_op_track);
    for (size_t i = 0; i < p->napi; i++) apis[i] = &p->api[i];
    if (p->napi > 1) qsort(apis, p->napi, sizeof *apis, cmp_api_corr);
    /* flow ids unique in a merged file: the pid in the high bits */
    uint64_t flow_base = (uint64_t)pid << 32;
    char nb[64];
    uint32_t last_tid = 0;
    for (size_t i = 0; i < n; i++) {
        const tp_gpu_op *o = ops[i];
        uint32_t tid = gpu_tid(o->device, o->stream);
        if (tid != last_tid) {
            tp_cw_write_meta(w, pid, tid, "thread_name", "name");
            fprintf(f, "\"GPU %" PRIu32 " stream %" PRIu32 "\"}}", o->device, o->stream);
            tp_cw_write_meta(w, pid, tid, "thread_sort_index", "sort_index");
            fprintf(f, "%" PRIu32 "}}", tid);
            last_tid = tid;
        }
        /* Records that contradicted their stream's order were clipped by the loader
         * (tp_gpu_clip_to_streams), as the report sees them. Nodes of one CUDA graph may
         * overlap on the stream CUPTI names; a viewer rejects overlapping slices on one
         * track, so only there the slice is shortened for display. */
        uint64_t end = o->end;
        if (i + 1 < n && gpu_tid(ops[i + 1]->device, ops[i + 1]->stream) == tid &&
            ops[i + 1]->start < end)
            end = ops[i + 1]->start > o->start ? ops[i + 1]->start : o->start;
        int64_t ts = tp_cw_rel_ns(w, p, o->start), te = tp_cw_rel_ns(w, p, end);
        if (!tp_cw_in_win(w, ts, te)) continue;
        const tp_gpu_clip *clip = tp_gpu_clip_of(p, o);
        tp_cw_ev_open(w, "X", pid, tid);
        fprintf(f, ",\"cat\":\"%s\",\"name\":", gpu_cat(o));
        tp_json_string(f, gpu_name(o, nb, sizeof nb));
        tp_cw_put_ts(w, "ts", ts);
        tp_cw_put_ts(w, "dur", te - ts);
        fprintf(f, ",\"args\":{\"device\":%" PRIu32 ",\"stream\":%" PRIu32
                   ",\"correlation\":%" PRIu32,
                o->device, o->stream, o->correlation);
        if (o->type != TPROF_REC_GPU_KERNEL) {
            fprintf(f, ",\"bytes\":%" PRIu64, o->bytes);
            if (o->end > o->start) {
                fputs(",\"memory bandwidth (GB/s)\":", f);
                tp_cw_put_double(f, (double)o->bytes / (double)(o->end - o->start));
            }
        }
        if (o->graph) fprintf(f, ",\"graph\":%" PRIu32, o->graph);
        if (clip) {
            /* what CUPTI said, and why it was not believed */
            fputs(",\"clipped\":", f);
            tp_json_string(f, clip->why == (TP_CLIP_SYNC | TP_CLIP_NEXT)
                                  ? "stream synchronisation and next record on the stream"
                              : clip->why == TP_CLIP_SYNC ? "stream synchronisation"
                                                          : "next record on the stream");
            fputs(",\"recorded_dur_us\":", f);
            tp_cw_put_double(f, (double)(clip->recorded_end - o->start) / 1e3);
        }
        fputs("}}", f);
        tp_cw_note_time(w, te);
        /* the launch that put it there */
        tp_gpu_op key = *o;
        const tp_gpu_op *kp = &key;
        const tp_gpu_op **hit = p->napi && o->correlation
                                    ? bsearch(&kp, apis, p->napi, sizeof *apis, cmp_api_corr)
                                    : NULL;
        if (hit && tp_cw_in_win(w, tp_cw_rel_ns(w, p, (*hit)->start), tp_cw_rel_ns(w, p, (*hit)->end))) {
            uint64_t id = flow_base | o->correlation;
            tp_cw_ev_open(w, "s", pid, (*hit)->os_tid);
            fprintf(f, ",\"cat\":\"ac2g\",\"name\":\"launch\",\"id\":\"%" PRIu64 "\"", id);
            tp_cw_put_ts(w, "ts", tp_cw_rel_ns(w, p, (*hit)->start));
            fputc('}', f);
            tp_cw_ev_open(w, "f", pid, tid);
            fprintf(f, ",\"cat\":\"ac2g\",\"name\":\"launch\",\"id\":\"%" PRIu64 "\",\"bp\":\"e\"",
                    id);
            tp_cw_put_ts(w, "ts", ts);
            fputc('}', f);
        }
    }
    /* runtime calls on the threads that made them (sequential on a thread: they nest with
     * that thread's ranges) */
    for (size_t i = 0; i < p->napi; i++) {
        const tp_gpu_op *a = &p->api[i];
        int64_t ts = tp_cw_rel_ns(w, p, a->start), te = tp_cw_rel_ns(w, p, a->end);
        if (!tp_cw_in_win(w, ts, te)) continue;
        tp_cw_ev_open(w, "X", pid, a->os_tid);
        fputs(",\"cat\":\"cuda_runtime\",\"name\":", f);
        tp_json_string(f, a->name ? a->name : "cuda runtime call");
        tp_cw_put_ts(w, "ts", ts);
        tp_cw_put_ts(w, "dur", te - ts);
        fprintf(f, ",\"args\":{\"cbid\":%" PRIu32 ",\"correlation\":%" PRIu32 "}}", a->kind,
                a->correlation);
        tp_cw_note_time(w, te);
    }
    /* device memory allocated, per device */
    uint32_t devs[64];
    int64_t cur[64];
    size_t ndev = 0;
    for (size_t i = 0; i < p->ngmem; i++) {
        const tp_gpu_mem *m = &p->gmem[i];
        if (m->memory_kind != 3) continue; /* device memory */
        size_t d = 0;
        while (d < ndev && devs[d] != m->device) d++;
        if (d == ndev) {
            if (ndev == 64) continue;
            devs[ndev] = m->device;
            cur[ndev++] = 0;
        }
        cur[d] = tp_mem_step(cur[d], m->bytes, m->op == 1); /* over every record */
        int64_t mt = tp_cw_rel_ns(w, p, m->ts);
        if (!tp_cw_in_win(w, mt, mt)) continue;
        tp_cw_ev_open(w, "C", pid, 0);
        fprintf(f, ",\"name\":\"GPU %" PRIu32 " memory allocated (bytes)\"", m->device);
        tp_cw_put_ts(w, "ts", tp_cw_rel_ns(w, p, m->ts));
        fprintf(f, ",\"args\":{\"bytes\":%" PRId64 "}}", cur[d]);
    }
    free(ops);
    free(apis);
    return ferror(f) ? TPROF_ERR_IO : TPROF_OK;
}

static int write_process(cw *w, const tp_process *p, int64_t pid, const tp_export_opts *opts,
                         scratch *sc) {
    FILE *f = w->f;
    char label[96];
    tp_process_label(p, label, sizeof label);
    /* label, host and pid: the viewer shows this string, and a synthetic pid (see
     * assign_pids) would otherwise hide the real one */
    size_t hl = strlen(p->hdr.host), ll = strlen(label);
    char *pname = malloc(ll + hl + 32);
    if (!pname) return TPROF_ERR_NO_MEMORY;
    snprintf(pname, ll + hl + 32, "%s (%s:%d)", label, p->hdr.host, (int)p->hdr.pid);
    tp_cw_write_meta(w, pid, 0, "process_name", "name");
    put_raw_string(f, pname);
    fputs("}}", f);
    free(pname);
    tp_cw_write_meta(w, pid, 0, "process_sort_index", "sort_index");
    fprintf(f, "%" PRId64 "}}", sort_index(p));

    for (size_t t = 0; t < p->nthreads; t++) {
        uint32_t tid = p->threads[t].os_tid;
        int seen = 0;
        for (size_t u = 0; u < t && !seen; u++) seen = p->threads[u].os_tid == tid;
        if (seen) continue;
        const char *tname = NULL;
        for (size_t u = t; u < p->nthreads && !tname; u++)
            if (p->threads[u].os_tid == tid) tname = p->threads[u].name;
        tp_cw_write_meta(w, pid, tid, "thread_name", "name");
        if (tname) tp_json_string(f, tname);
        else fprintf(f, "\"thread %" PRIu32 "\"", tid);
        fputs("}}", f);
    }

    tp_steps st;
    int rc = tp_find_steps(p, opts->step_name, opts->warmup, &st);
    if (rc != TPROF_OK) return rc;
    /* Only API steps need events of their own: every other source is a range already in
     * the trace, and a duplicate would break nesting. */
    uint32_t step_tid = 0;
    int api = (st.source == TP_STEPS_API || st.source == TP_STEPS_ITERATION) &&
              st.thread < p->nthreads;
    if (api) step_tid = p->threads[st.thread].os_tid;

    for (size_t t = 0; t < p->nthreads && rc == TPROF_OK; t++) {
        uint32_t tid = p->threads[t].os_tid;
        int seen = 0;
        for (size_t u = 0; u < t && !seen; u++) seen = p->threads[u].os_tid == tid;
        if (seen) continue;
        rc = write_track(w, p, pid, tid, api && tid == step_tid ? &st : NULL, sc);
    }
    tp_steps_free(&st);
    if (rc == TPROF_OK) rc = write_gpu(w, p, pid);
    if (rc == TPROF_OK) rc = tp_cw_write_comm(w, p, pid);
    return rc;
}

/* pid per exported process: the preferred one (rank, or the OS pid) unless an earlier
 * claimant has it — a helper whose OS pid equals a rank number, or two hosts with the same
 * pid — in which case a synthetic one above any real pid, so rows never merge. */
typedef struct pid_claim {
    int64_t want;
    int prio; /* 0 for ranks: they keep their number */
    size_t order;
} pid_claim;

static int cmp_claim(const void *a, const void *b) {
    const pid_claim *x = a, *y = b;
    if (x->want != y->want) return x->want < y->want ? -1 : 1;
    if (x->prio != y->prio) return x->prio < y->prio ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int assign_pids(const tp_run *run, const size_t *sel, size_t nsel, int merged,
                       int64_t *pids) {
    pid_claim *c = malloc((nsel ? nsel : 1) * sizeof *c);
    if (!c) return TPROF_ERR_NO_MEMORY;
    for (size_t i = 0; i < nsel; i++) {
        const tp_process *p = &run->procs[sel[i]];
        int rank = merged && p->role == TP_ROLE_RANK;
        c[i] = (pid_claim){rank ? p->rank : p->hdr.pid, !rank, i};
    }
    qsort(c, nsel, sizeof *c, cmp_claim);
    for (size_t i = 0; i < nsel; i++)
        pids[c[i].order] = i && c[i].want == c[i - 1].want
                               ? SYNTH_PID_BASE + (int64_t)c[i].order
                               : c[i].want;
    free(c);
    return TPROF_OK;
}

/* The window of opts (tp_export_opts) into w, once the base is known: steps of the lowest
 * selected rank that has them, and seconds from the base. TPROF_ERR_NOT_FOUND when steps are
 * asked for and no selected rank has one of them. */
static int select_window(cw *w, const tp_run *run, const size_t *sel, size_t nsel,
                         const tp_export_opts *opts) {
    w->win = opts->has_steps || opts->has_time;
    w->win_lo = INT64_MIN;
    w->win_hi = INT64_MAX;
    if (opts->has_time) {
        w->win_lo = (int64_t)(opts->t_lo * 1e9);
        w->win_hi = (int64_t)(opts->t_hi * 1e9);
    }
    if (!opts->has_steps) return TPROF_OK;
    const tp_process *ref = NULL;
    for (size_t i = 0; i < nsel; i++) {
        const tp_process *p = &run->procs[sel[i]];
        if (p->role != TP_ROLE_RANK || (ref && ref->rank <= p->rank)) continue;
        tp_steps st;
        if (tp_find_steps(p, opts->step_name, opts->warmup, &st) != TPROF_OK) continue;
        int found = 0;
        uint64_t lo = UINT64_MAX, hi = 0;
        for (size_t k = 0; k < st.nsteps; k++) {
            const tp_step *x = &st.steps[k];
            if (x->app_step < opts->step_lo || x->app_step > opts->step_hi) continue;
            found = 1;
            if (x->start < lo) lo = x->start;
            if (x->end > hi) hi = x->end;
        }
        tp_steps_free(&st);
        if (!found) continue;
        ref = p;
        int64_t a = tp_cw_rel_ns(w, p, lo), b = tp_cw_rel_ns(w, p, hi);
        w->win_lo = opts->has_time && w->win_lo > a ? w->win_lo : a;
        w->win_hi = opts->has_time && w->win_hi < b ? w->win_hi : b;
    }
    return ref ? TPROF_OK : TPROF_ERR_NOT_FOUND;
}

/* The whole document. rank < 0: the merged form. */
static int export_sel(const tp_run *run, const size_t *sel, size_t nsel, int rank, FILE *out,
                      const tp_export_opts *opts) {
    static const tp_export_opts no_opts = {NULL, 1};
    if (!opts) opts = &no_opts;
    int merged = rank < 0;
    int64_t *pids = malloc((nsel ? nsel : 1) * sizeof *pids);
    if (!pids) return TPROF_ERR_NO_MEMORY;
    int rc = assign_pids(run, sel, nsel, merged, pids);
    if (rc != TPROF_OK) {
        free(pids);
        return rc;
    }

    /* the same alignment as the report's: borrowed, else computed here as it does */
    tp_clocks_result own = {0};
    const tp_clocks_result *ck = opts->clocks;
    if (!ck || ck->nprocs != run->nprocs) {
        if ((rc = tp_clocks_compute(run, &own)) != TPROF_OK) {
            tp_clocks_result_free(&own);
            free(pids);
            return rc;
        }
        ck = &own;
    }

    cw w = {.f = out, .run = run, .ck = ck};
    /* the base: the earliest start among the processes (aligned; a process whose start pair
     * is unusable starts at its first event), but in one rank's file not that of the process
     * whose NVML samples come with it (the rank's own start stays the base, as Kineto's
     * traces have it) */
    const tp_process *rp = nsel ? &run->procs[sel[0]] : NULL;
    const tp_process *src = merged || !rp ? NULL : tp_gpu_samples_for(run, rp);
    int have_base = 0;
    for (size_t i = 0; i < nsel; i++) {
        const tp_process *p = &run->procs[sel[i]];
        if (!merged && p == src && src != rp) continue;
        uint64_t first = ck->proc_pair_ok[sel[i]] || !p->first_ts ? p->hdr.start_mono_ns
                                                                  : p->first_ts;
        uint64_t s = (uint64_t)tp_clocks_aligned(ck, p, sel[i], first);
        if (!have_base || s < w.base_rt) w.base_rt = s;
        have_base = 1;
    }

    if ((rc = select_window(&w, run, sel, nsel, opts)) != TPROF_OK) {
        tp_clocks_result_free(&own);
        free(pids);
        return rc;
    }

    fputs("{\n\"schemaVersion\": 1,\n", out);
    if (!merged) {
        const tp_process *rk = NULL;
        for (size_t i = 0; i < nsel && !rk; i++)
            if (run->procs[sel[i]].role == TP_ROLE_RANK) rk = &run->procs[sel[i]];
        const char *backend = rk ? tp_meta(rk, "backend") : NULL;
        char be[32];
        /* without a declared backend: what the rank's communication went through */
        if (rk && !backend) {
            const char *rs = tp_meta(rk, "rank_source");
            if (rs && !strcmp(rs, "mpi")) backend = "mpi";
            for (size_t i = 0; !backend && i < rk->ncomm; i++)
                if (rk->comm[i].source == TPROF_COMM_SRC_NCCL) backend = "nccl";
            /* else the backend of torch.distributed's ops (gloo on a CPU job) */
            for (size_t i = 0; !backend && i < rk->ncomm; i++)
                if (rk->comm[i].source == TPROF_COMM_SRC_TORCH)
                    backend = tp_comm_backend(rk, &rk->comm[i], be, sizeof be);
        }
        /* world_size from the rank's metadata, else as many ranks as the run holds */
        int world = rk ? rk->world_size : -1;
        if (world <= 0) {
            world = 0;
            for (size_t i = 0; i < run->nprocs; i++) world += run->procs[i].role == TP_ROLE_RANK;
        }
        fputs("\"deviceProperties\": [],\n\"distributedInfo\": {\"backend\": ", out);
        tp_json_string(out, backend ? backend : "unknown");
        fprintf(out, ", \"rank\": %d, \"world_size\": %d},\n", rank, world);
    }
    fprintf(out, "\"displayTimeUnit\": \"ms\",\n\"baseTimeNanoseconds\": %" PRIu64 ",\n",
            w.base_rt);
    write_clock_meta(out, ck);
    {
        const char *dir = run->dir ? run->dir : "";
        size_t n = strlen(dir) + 40;
        char *tn = malloc(n);
        if (!tn) {
            free(pids);
            tp_clocks_result_free(&own);
            return TPROF_ERR_NO_MEMORY;
        }
        if (merged) snprintf(tn, n, "trainprof %s", dir);
        else snprintf(tn, n, "trainprof %s rank %d", dir, rank);
        fputs("\"traceName\": ", out);
        put_raw_string(out, tn);
        free(tn);
    }
    fputs(",\n\"traceEvents\": [", out);

    scratch sc = {0};
    unsigned allow[64];
    for (size_t i = 0; i < nsel && rc == TPROF_OK; i++) {
        const tp_process *p = &run->procs[sel[i]];
        w.gpu_only = !merged && p != rp && p == src;
        w.gpu_filter = 0;
        w.ngpu_allow = 0;
        if (!merged && p == src) {
            size_t unmatched = 0;
            tp_gpu_link l[64];
            w.ngpu_allow = tp_rank_gpu_links(rp, src, l, 64, &unmatched);
            for (size_t k = 0; k < w.ngpu_allow; k++) allow[k] = l[k].index;
            w.gpu_filter = w.ngpu_allow || unmatched;
        }
        w.gpu_allow = allow;
        if (w.gpu_only) w.gpu_until = tp_cw_rel_ns(&w, rp, rp->end_mono);
        rc = write_process(&w, p, pids[i], opts, &sc);
        if (rc == TPROF_OK && ferror(out)) rc = TPROF_ERR_IO; /* stop early on a full disk */
    }
    free(sc.items);
    free(sc.stack);
    free(sc.fixed);

    if (rc == TPROF_OK) {
        /* Kineto closes the window with a global instant at the last timestamp */
        int64_t last = w.last_rel;
        if (!w.have_last) {
            last = 0;
            for (size_t i = 0; i < nsel; i++) {
                const tp_process *p = &run->procs[sel[i]];
                int64_t e = tp_cw_rel_ns(&w, p, p->end_mono);
                if (e > last) last = e;
            }
        }
        tp_cw_ev_open(&w, "i", nsel ? pids[0] : 0, 0);
        fputs(",\"s\":\"g\",\"cat\":\"global\",\"name\":\"Record Window End\"", out);
        tp_cw_put_ts(&w, "ts", last);
        fputs(",\"args\":{}}", out);
        fputs("\n]\n}\n", out);
    }
    free(pids);
    tp_clocks_result_free(&own);
    if (rc == TPROF_OK && (fflush(out) != 0 || ferror(out))) rc = TPROF_ERR_IO;
    return rc;
}

int tp_export_rank_selected(const tp_export_opts *opts, int rank) {
    if (!opts || !opts->ranks) return 1;
    for (size_t i = 0; i < opts->n_ranks; i++)
        if (opts->ranks[i] == rank) return 1;
    return 0;
}

int tp_export_chrome(const tp_run *run, FILE *out, const tp_export_opts *opts) {
    if (!run || !out) return TPROF_ERR_INVALID_ARG;
    size_t *sel = malloc((run->nprocs ? run->nprocs : 1) * sizeof *sel);
    if (!sel) return TPROF_ERR_NO_MEMORY;
    /* ranks in rank order first, then helpers in file order: a stable, readable file */
    size_t n = 0;
    for (size_t i = 0; i < run->nprocs; i++)
        if (run->procs[i].role == TP_ROLE_RANK && tp_export_rank_selected(opts, run->procs[i].rank))
            sel[n++] = i;
    if (!n && opts && opts->ranks) {
        free(sel);
        return TPROF_ERR_NOT_FOUND;
    }
    for (size_t i = 1; i < n; i++) /* insertion sort: few ranks out of order, if any */
        for (size_t k = i; k > 0 && run->procs[sel[k]].rank < run->procs[sel[k - 1]].rank; k--) {
            size_t t = sel[k];
            sel[k] = sel[k - 1];
            sel[k - 1] = t;
        }
    for (size_t i = 0; i < run->nprocs; i++) {
        const tp_process *p = &run->procs[i];
        if (p->role == TP_ROLE_RANK) continue;
        /* a helper with the rank it serves; the rest (node samplers, ...) with every rank */
        if (opts && opts->ranks &&
            (p->role != TP_ROLE_HELPER || !tp_export_rank_selected(opts, p->helper_of)))
            continue;
        sel[n++] = i;
    }
    int rc = export_sel(run, sel, n, -1, out, opts);
    free(sel);
    return rc;
}

int tp_export_chrome_rank(const tp_run *run, int rank, FILE *out, const tp_export_opts *opts) {
    if (!run || !out || rank < 0) return TPROF_ERR_INVALID_ARG;
    size_t *sel = malloc((run->nprocs ? run->nprocs : 1) * sizeof *sel);
    if (!sel) return TPROF_ERR_NO_MEMORY;
    size_t n = 0;
    for (size_t i = 0; i < run->nprocs; i++)
        if (run->procs[i].role == TP_ROLE_RANK && run->procs[i].rank == rank) sel[n++] = i;
    if (!n) {
        free(sel);
        return TPROF_ERR_NOT_FOUND;
    }
    for (size_t i = 0; i < run->nprocs; i++)
        if (run->procs[i].role == TP_ROLE_HELPER && run->procs[i].helper_of == rank)
            sel[n++] = i;
    /* the process that sampled the rank's GPUs, when not the rank itself (the node sampler
     * of its host, or the host's rank that sampled), for their NVML counters */
    const tp_process *src = tp_gpu_samples_for(run, &run->procs[sel[0]]);
    int have = 0;
    for (size_t i = 0; i < n; i++) have |= &run->procs[sel[i]] == src;
    if (src && !have) sel[n++] = (size_t)(src - run->procs);
    int rc = export_sel(run, sel, n, rank, out, opts);
    free(sel);
    return rc;
}
