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
#include "analysis/counter_pack.h"
#include "analysis/gpu.h"
#include "analysis/stats.h"
#include "analysis/steps.h"
#include "format/format.h"
#include "trainprof.h"


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
    fputc(']', out);
    /* the collectives were a sample (the report's clocks.sample): its window and period */
    if (ck->sample_period > 0) {
        fprintf(out, ", \"sample\": {\"window\": %u, \"period\": %.0f, \"keep_per_rank\": %zu, "
                     "\"note\": ",
                TP_COMM_WINDOW, ck->sample_period, ck->sample_keep);
        put_raw_string(out, tp_clocks_sample_note(0));
        fputc('}', out);
    }
    fputs("},\n", out);
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

/* Opens an X event (the caller writes its args and closes it); 0 when it is outside the
 * selected window and nothing was written. */
static int write_complete(cw *w, const tp_process *p, int64_t pid, uint32_t tid,
                          const char *cat, const char *name, uint64_t start, uint64_t end) {
    int64_t ts = tp_cw_rel_ns(w, p, start), te = tp_cw_rel_ns(w, p, end);
    if (!tp_cw_in_win(w, ts, te)) return 0;
    tp_cw_ev_open(w, "X", pid, tid);
    fprintf(w->f, ",\"cat\":\"%s\",\"name\":", cat);
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

/* ------------------------------------------------------------------ HTA's links */

/* What Holistic Trace Analysis (facebookresearch/HolisticTraceAnalysis: hta/common/trace.py,
 * hta/analyzers/critical_path_analysis.py) follows in a torch.profiler trace, as Kineto
 * writes it (pytorch/kineto libkineto/src/output_json.cpp): a CPU operator (cat "cpu_op")
 * holds the launches made inside it ("External id"), a launch (cat "cuda_runtime" or
 * "cuda_driver") and its GPU work share CUPTI's "correlation", and a range of the program
 * shows on each GPU stream it put work on, from its first kernel's start to its last
 * kernel's end (cat "gpu_user_annotation", Kineto's GpuUserEventMap). */

/* trainprof.torch's phase ranges (docs/python.md), and the operators of a torch.profiler
 * trace read as a run (category "cpu_op", analysis/kineto_load.c): the CPU operators of our
 * traces. Other ranges (NVTX, the C API) stay user annotations, as record_function ranges
 * are in Kineto's. */
static int is_cpu_op(const tp_process *p, const tp_range *r) {
    static const char *const ops[] = {"data", "forward", "backward", "optimizer",
                                      "cuda graph capture", "cuda graph replay"};
    if (r->domain || (r->flags & TP_R_ASYNC) || !r->name) return 0;
    if (r->category) {
        const char *c = tp_category_name(p, r->domain, r->category);
        if (c && !strcmp(c, "cpu_op")) return 1;
    }
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (!strcmp(r->name, ops[i])) return 1;
    return 0;
}

typedef struct hta_op {
    uint64_t start, end, ext;
    uint32_t tid;
} hta_op;

/* One process's links, built once per process: O(n log n) in its API calls, GPU records
 * and ranges. External ids: range k of thread t is base[t] + k + 1, step i is nranges + i +
 * 1, so that ids are unique in the process without a table. */
typedef struct hta_index {
    const tp_gpu_op **launch; /* API calls by (os_tid, start) */
    size_t nlaunch;
    const tp_gpu_op **work;   /* kernels, copies and memsets by correlation id */
    size_t nwork;
    hta_op *ops;              /* CPU operator ranges by (tid, start) */
    size_t nops;
    uint64_t *base;           /* per thread */
    uint64_t nranges;
} hta_index;

static int cmp_hta_op(const void *a, const void *b) {
    const hta_op *x = a, *y = b;
    if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->end > y->end ? -1 : x->end < y->end; /* parents first */
}

static void hta_free(hta_index *ix) {
    free(ix->launch);
    free(ix->work);
    free(ix->ops);
    free(ix->base);
    memset(ix, 0, sizeof *ix);
}

/* The index of p; the launches and their GPU work (for the GPU annotations, hta_project)
 * only for a per-rank file (projections), the merged trace writes none. */
static int hta_build(const tp_process *p, int projections, hta_index *ix) {
    memset(ix, 0, sizeof *ix);
    size_t nops = 0;
    for (size_t t = 0; t < p->nthreads; t++)
        for (size_t k = 0; k < p->threads[t].nranges; k++)
            nops += is_cpu_op(p, &p->threads[t].ranges[k]);
    size_t nlaunch = projections ? p->napi : 0, nwork = projections ? p->ngpu : 0;
    ix->launch = malloc((nlaunch ? nlaunch : 1) * sizeof *ix->launch);
    ix->work = malloc((nwork ? nwork : 1) * sizeof *ix->work);
    ix->ops = malloc((nops ? nops : 1) * sizeof *ix->ops);
    ix->base = malloc((p->nthreads ? p->nthreads : 1) * sizeof *ix->base);
    if (!ix->launch || !ix->work || !ix->ops || !ix->base) {
        hta_free(ix);
        return TPROF_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < nlaunch; i++) ix->launch[i] = &p->api[i];
    ix->nlaunch = nlaunch;
    if (ix->nlaunch > 1) qsort(ix->launch, ix->nlaunch, sizeof *ix->launch, tp_cw_cmp_api_thread);
    for (size_t i = 0; i < nwork; i++)
        if (p->gpu[i].type != TPROF_REC_GPU_SYNC && p->gpu[i].correlation)
            ix->work[ix->nwork++] = &p->gpu[i];
    if (ix->nwork > 1) qsort(ix->work, ix->nwork, sizeof *ix->work, tp_cw_cmp_api_corr);
    for (size_t t = 0; t < p->nthreads; t++) {
        const tp_thread *th = &p->threads[t];
        ix->base[t] = ix->nranges;
        for (size_t k = 0; k < th->nranges; k++)
            if (is_cpu_op(p, &th->ranges[k]))
                ix->ops[ix->nops++] = (hta_op){th->ranges[k].start, th->ranges[k].end,
                                               ix->nranges + k + 1, th->os_tid};
        ix->nranges += th->nranges;
    }
    if (ix->nops > 1) qsort(ix->ops, ix->nops, sizeof *ix->ops, cmp_hta_op);
    return TPROF_OK;
}

/* The External id of the innermost CPU operator open on launch a's thread when it was
 * called, 0 when none. Operators of one thread nest, so the innermost is the latest-starting
 * one that contains the call; the walk back stops at a bounded number of operators that
 * ended before it (siblings are disjoint, only ancestors can still contain it). */
static uint64_t hta_ext_of(const hta_index *ix, const tp_gpu_op *a) {
    size_t lo = 0, hi = ix->nops;
    while (lo < hi) { /* first op after (tid, start) */
        size_t mid = lo + (hi - lo) / 2;
        const hta_op *o = &ix->ops[mid];
        if (o->tid < a->os_tid || (o->tid == a->os_tid && o->start <= a->start)) lo = mid + 1;
        else hi = mid;
    }
    for (size_t i = lo, walked = 0; i > 0 && walked < 256; i--, walked++) {
        const hta_op *o = &ix->ops[i - 1];
        if (o->tid != a->os_tid) break;
        if (o->end > a->start) return o->ext;
    }
    return 0;
}

/* The GPU work of launches that thread `tid` made in [start, end), per device and stream:
 * the first start and the last end (at most HTA_MAX_STREAMS streams; work on more is left
 * out of the annotation). Returns how many streams. */
#define HTA_MAX_STREAMS 64
typedef struct hta_span {
    uint32_t device, stream;
    uint64_t lo, hi;
} hta_span;

static size_t hta_project(const hta_index *ix, uint32_t tid, uint64_t start, uint64_t end,
                          hta_span *sp) {
    size_t lo = 0, hi = ix->nlaunch, n = 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const tp_gpu_op *a = ix->launch[mid];
        if (a->os_tid < tid || (a->os_tid == tid && a->start < start)) lo = mid + 1;
        else hi = mid;
    }
    for (size_t i = lo; i < ix->nlaunch; i++) {
        const tp_gpu_op *a = ix->launch[i];
        if (a->os_tid != tid || a->start >= end) break;
        if (!a->correlation) continue;
        size_t l = 0, h = ix->nwork;
        while (l < h) {
            size_t mid = l + (h - l) / 2;
            if (ix->work[mid]->correlation < a->correlation) l = mid + 1;
            else h = mid;
        }
        /* one launch can put many records there (a CUDA graph) */
        for (; l < ix->nwork && ix->work[l]->correlation == a->correlation; l++) {
            const tp_gpu_op *o = ix->work[l];
            size_t k = 0;
            while (k < n && (sp[k].device != o->device || sp[k].stream != o->stream)) k++;
            if (k == n) {
                if (n == HTA_MAX_STREAMS) continue;
                sp[n++] = (hta_span){o->device, o->stream, o->start, o->end};
                continue;
            }
            if (o->start < sp[k].lo) sp[k].lo = o->start;
            if (o->end > sp[k].hi) sp[k].hi = o->end;
        }
    }
    return n;
}

typedef struct track_ctx {
    cw *w;
    const tp_process *p;
    int64_t pid;
    uint32_t tid;
    const hta_index *ix;
    const tp_step *steps0; /* the process's steps, for their External ids */
} track_ctx;

/* A slice kept on its CPU track, as Kineto shows a record_function range on the GPU: on
 * each stream it launched work on (the kernels' own track), first start to last end. */
static void write_gpu_annotations(track_ctx *t, const char *name, uint64_t start, uint64_t end,
                                  uint64_t ext) {
    hta_span sp[HTA_MAX_STREAMS];
    size_t n = hta_project(t->ix, t->tid, start, end, sp);
    for (size_t k = 0; k < n; k++) {
        int64_t ts = tp_cw_rel_ns(t->w, t->p, sp[k].lo), te = tp_cw_rel_ns(t->w, t->p, sp[k].hi);
        if (!tp_cw_in_win(t->w, ts, te)) continue;
        tp_cw_ev_open(t->w, "X", t->pid, tp_cw_gpu_tid(sp[k].device, sp[k].stream));
        fputs(",\"cat\":\"gpu_user_annotation\",\"name\":", t->w->f);
        tp_json_string(t->w->f, name);
        tp_cw_put_ts(t->w, "ts", ts);
        tp_cw_put_ts(t->w, "dur", te - ts);
        fprintf(t->w->f, ",\"args\":{\"External id\":%" PRIu64 ",\"device\":%" PRIu32 "}}", ext,
                sp[k].device);
        tp_cw_note_time(t->w, te);
    }
}

/* A range or step of the sweep: a complete (X) event when it nests, else an async pair. */
static int write_slice(void *ctx, const tp_cw_slice *sl) {
    track_ctx *t = ctx;
    cw *w = t->w;
    char extra[48];
    if (sl->s) {
        uint64_t ext = t->ix->nranges + (uint64_t)(sl->s - t->steps0) + 1;
        if (!sl->nested)
            write_async(w, t->p, t->pid, t->tid, 0, sl->name, sl->start, sl->end, NULL,
                        sl->s->warmup ? "\"warmup\":true" : NULL);
        else if (write_complete(w, t->p, t->pid, t->tid, "user_annotation", sl->name, sl->start,
                                sl->end))
            fprintf(w->f, ",\"args\":{\"step\":%" PRIu64 ",\"External id\":%" PRIu64 "%s}}",
                    sl->s->app_step, ext, sl->s->warmup ? ",\"warmup\":true" : "");
        if (sl->nested && w->rank_file) write_gpu_annotations(t, sl->name, sl->start, sl->end, ext);
    } else if (sl->nested) {
        const tp_range *r = sl->r;
        uint64_t ext = t->ix->base[sl->thread] + (uint64_t)(r - t->p->threads[sl->thread].ranges) + 1;
        snprintf(extra, sizeof extra, "\"External id\":%" PRIu64, ext);
        if (write_complete(w, t->p, t->pid, t->tid, is_cpu_op(t->p, r) ? "cpu_op" : "user_annotation",
                           sl->name, sl->start, sl->end)) {
            put_args(w, t->p, r->domain, r->category, r->flags & TP_R_UNCLOSED, extra);
            fputc('}', w->f);
        }
        if (w->rank_file) write_gpu_annotations(t, sl->name, sl->start, sl->end, ext);
    } else {
        write_async(w, t->p, t->pid, t->tid, 0, sl->name, sl->start, sl->end, sl->r, NULL);
    }
    return TPROF_OK;
}

/* All events of one track: the threads of p whose os tid is `tid` (tp_cw_sweep). `steps` is
 * non-NULL when the API steps live on this track. */
/* Thread th's counters wanted in the file (tp_cw_counter_wanted) as counter events. */
static int write_counters(cw *w, const tp_process *p, int64_t pid, const tp_thread *th) {
    tp_counter_it it;
    tp_counter cv;
    if (tp_counter_it_init(&it, th)) return TPROF_ERR_NO_MEMORY;
    while (tp_counter_next(&it, &cv)) {
        const tp_counter *c = &cv;
        if (!isfinite(c->value)) continue; /* JSON has no NaN or Inf */
        int64_t ts = tp_cw_rel_ns(w, p, c->ts);
        if (!tp_cw_counter_wanted(w, c->name, ts) || !tp_cw_in_win(w, ts, ts)) continue;
        tp_cw_ev_open(w, "C", pid, th->os_tid);
        fputs(",\"name\":", w->f);
        tp_json_string(w->f, c->name);
        tp_cw_put_ts(w, "ts", ts);
        fputs(",\"args\":{\"value\":", w->f);
        tp_cw_put_double(w->f, c->value);
        fputs("}}", w->f);
        tp_cw_note_time(w, ts);
    }
    return tp_counter_it_done(&it) ? TPROF_ERR_CORRUPT : TPROF_OK;
}

static int write_track(cw *w, const tp_process *p, int64_t pid, uint32_t tid,
                       const tp_steps *steps, tp_cw_scratch *sc, const hta_index *ix) {
    track_ctx tc = {w, p, pid, tid, ix, steps ? steps->steps : NULL};
    int rc = tp_cw_sweep(p, tid, steps, sc, write_slice, &tc);
    if (rc != TPROF_OK) return rc;

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
        rc = write_counters(w, p, pid, th);
        if (rc != TPROF_OK) return rc;
    }
    return ferror(w->f) ? TPROF_ERR_IO : TPROF_OK;
}

/* ------------------------------------------------------------------ processes */

/* ------------------------------------------------------------------ GPU activity */

/* Kernels, copies and memsets as complete events on one track per device and stream (as
 * Kineto: the stream is the tid), the CUDA runtime calls on their CPU threads, an ac2g
 * flow arrow from each launch to its work (CUPTI's correlation id), and the device memory
 * allocated as a counter track. */
/* A launch's category as Kineto names it: the driver API's functions are cu*, the
 * runtime's cuda* (CUDA Driver API and Runtime API references). */
static const char *api_cat(const tp_gpu_op *a) {
    return tp_driver_call(a->name) ? "cuda_driver" : "cuda_runtime";
}

/* One device-memory counter event (tp_cw_gpu_mem_walk). */
typedef struct gmem_ctx {
    cw *w;
    int64_t pid;
} gmem_ctx;

static int gmem_counter(void *ctx, uint32_t device, int64_t rel_ns, int64_t bytes) {
    gmem_ctx *g = ctx;
    tp_cw_ev_open(g->w, "C", g->pid, 0);
    fprintf(g->w->f, ",\"name\":\"GPU %" PRIu32 " memory allocated (bytes)\"", device);
    tp_cw_put_ts(g->w, "ts", rel_ns);
    fprintf(g->w->f, ",\"args\":{\"bytes\":%" PRId64 "}}", bytes);
    return 0;
}

static int write_gpu(cw *w, const tp_process *p, int64_t pid, const hta_index *ix) {
    FILE *f = w->f;
    if (!p->ngpu && !p->napi && !p->ngmem) return TPROF_OK;
    size_t n = 0;
    const tp_gpu_op **ops = tp_cw_gpu_ops(p, &n);
    const tp_gpu_op **apis = malloc((p->napi ? p->napi : 1) * sizeof *apis);
    if (!ops || !apis) {
        free(ops);
        free(apis);
        return TPROF_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < p->napi; i++) apis[i] = &p->api[i];
    if (p->napi > 1) qsort(apis, p->napi, sizeof *apis, tp_cw_cmp_api_corr);
    /* flow ids unique in a merged file: the pid in the high bits */
    uint64_t flow_base = (uint64_t)pid << 32;
    char nb[64];
    uint32_t last_tid = 0;
    for (size_t i = 0; i < n; i++) {
        const tp_gpu_op *o = ops[i];
        uint32_t tid = tp_cw_gpu_tid(o->device, o->stream);
        if (tid != last_tid) {
            tp_cw_write_meta(w, pid, tid, "thread_name", "name");
            fprintf(f, "\"GPU %" PRIu32 " stream %" PRIu32 "\"}}", o->device, o->stream);
            tp_cw_write_meta(w, pid, tid, "thread_sort_index", "sort_index");
            fprintf(f, "%" PRIu32 "}}", tid);
            last_tid = tid;
        }
        uint64_t end = tp_cw_gpu_end(ops, n, i);
        int64_t ts = tp_cw_rel_ns(w, p, o->start), te = tp_cw_rel_ns(w, p, end);
        if (!tp_cw_in_win(w, ts, te)) continue;
        const tp_gpu_clip *clip = tp_gpu_clip_of(p, o);
        tp_cw_ev_open(w, "X", pid, tid);
        fprintf(f, ",\"cat\":\"%s\",\"name\":", tp_cw_gpu_cat(o));
        tp_json_string(f, tp_cw_gpu_name(o, nb, sizeof nb));
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
        /* the launch that put it there, and the CPU operator that made the launch */
        const tp_gpu_op *hit = tp_cw_launch_of(apis, p->napi, o);
        uint64_t ext = hit ? hta_ext_of(ix, hit) : 0;
        if (ext) fprintf(f, ",\"External id\":%" PRIu64, ext);
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
        if (hit && tp_cw_in_win(w, tp_cw_rel_ns(w, p, hit->start), tp_cw_rel_ns(w, p, hit->end))) {
            uint64_t id = flow_base | o->correlation;
            tp_cw_ev_open(w, "s", pid, hit->os_tid);
            fprintf(f, ",\"cat\":\"ac2g\",\"name\":\"launch\",\"id\":\"%" PRIu64 "\"", id);
            tp_cw_put_ts(w, "ts", tp_cw_rel_ns(w, p, hit->start));
            fputc('}', f);
            tp_cw_ev_open(w, "f", pid, tid);
            fprintf(f, ",\"cat\":\"ac2g\",\"name\":\"launch\",\"id\":\"%" PRIu64 "\",\"bp\":\"e\"",
                    id);
            tp_cw_put_ts(w, "ts", ts);
            fputc('}', f);
        }
    }
    /* runtime and driver calls on the threads that made them (sequential on a thread: they
     * nest with that thread's ranges) */
    for (size_t i = 0; i < p->napi; i++) {
        const tp_gpu_op *a = &p->api[i];
        int64_t ts = tp_cw_rel_ns(w, p, a->start), te = tp_cw_rel_ns(w, p, a->end);
        if (!tp_cw_in_win(w, ts, te)) continue;
        tp_cw_ev_open(w, "X", pid, a->os_tid);
        fprintf(f, ",\"cat\":\"%s\",\"name\":", api_cat(a));
        tp_json_string(f, a->name ? a->name : "cuda runtime call");
        tp_cw_put_ts(w, "ts", ts);
        tp_cw_put_ts(w, "dur", te - ts);
        fprintf(f, ",\"args\":{\"cbid\":%" PRIu32 ",\"correlation\":%" PRIu32, a->kind,
                a->correlation);
        uint64_t ext = hta_ext_of(ix, a);
        if (ext) fprintf(f, ",\"External id\":%" PRIu64, ext);
        fputs("}}", f);
        tp_cw_note_time(w, te);
    }
    /* device memory allocated, per device */
    gmem_ctx gc = {w, pid};
    tp_cw_gpu_mem_walk(w, p, gmem_counter, &gc);
    free(ops);
    free(apis);
    return ferror(f) ? TPROF_ERR_IO : TPROF_OK;
}

static int write_process(cw *w, const tp_process *p, int64_t pid, const tp_export_opts *opts,
                         tp_cw_scratch *sc) {
    FILE *f = w->f;
    char *pname = tp_cw_process_name(p);
    if (!pname) return TPROF_ERR_NO_MEMORY;
    tp_cw_write_meta(w, pid, 0, "process_name", "name");
    put_raw_string(f, pname);
    fputs("}}", f);
    free(pname);
    tp_cw_write_meta(w, pid, 0, "process_sort_index", "sort_index");
    fprintf(f, "%" PRId64 "}}", tp_cw_sort_index(p));

    for (size_t t = 0; t < p->nthreads; t++) {
        if (!tp_cw_first_of_tid(p, t)) continue;
        uint32_t tid = p->threads[t].os_tid;
        const char *tname = tp_cw_thread_name(p, t);
        tp_cw_write_meta(w, pid, tid, "thread_name", "name");
        if (tname) tp_json_string(f, tname);
        else fprintf(f, "\"thread %" PRIu32 "\"", tid);
        fputs("}}", f);
    }
    if (w->gpu_only) {
        /* another process in a rank's file (the node sampler, or the host's rank that
         * sampled its GPUs): its NVML counters alone, not its own ranges, kernels or ops */
        for (size_t t = 0; t < p->nthreads; t++) {
            int rc = write_counters(w, p, pid, &p->threads[t]);
            if (rc != TPROF_OK) return rc;
        }
        return ferror(f) ? TPROF_ERR_IO : TPROF_OK;
    }

    tp_steps st;
    int rc = tp_find_steps(p, opts->step_name, opts->warmup, &st);
    if (rc != TPROF_OK) return rc;
    /* API steps need events of their own; every other source is a range already in the
     * trace. A rank's file, which HTA reads, names every step ProfilerStep#N as Kineto does
     * (HTA finds iterations by that name only): a step range gets a twin of the same
     * interval, which nests with it. */
    uint32_t step_tid = 0;
    int named = st.source == TP_STEPS_NAMED || st.source == TP_STEPS_DEFAULT_NAME;
    int api = (st.source == TP_STEPS_API || st.source == TP_STEPS_ITERATION ||
               (w->rank_file && named && strncmp(st.name ? st.name : "", "ProfilerStep", 12))) &&
              st.thread < p->nthreads;
    if (api) step_tid = p->threads[st.thread].os_tid;
    hta_index ix;
    rc = hta_build(p, w->rank_file, &ix);
    if (rc != TPROF_OK) {
        tp_steps_free(&st);
        return rc;
    }

    for (size_t t = 0; t < p->nthreads && rc == TPROF_OK; t++) {
        if (!tp_cw_first_of_tid(p, t)) continue;
        uint32_t tid = p->threads[t].os_tid;
        rc = write_track(w, p, pid, tid, api && tid == step_tid ? &st : NULL, sc, &ix);
    }
    tp_steps_free(&st);
    if (rc == TPROF_OK) rc = write_gpu(w, p, pid, &ix);
    hta_free(&ix);
    if (rc == TPROF_OK) rc = tp_cw_write_comm(w, p, pid);
    return rc;
}

/* ------------------------------------------------------------------ rank file header */

/* A decimal metadata value, whole: 0 when absent or not a number. */
static int meta_u64(const tp_process *p, const char *key, uint64_t *v) {
    const char *s = tp_meta(p, key);
    if (!s || *s < '0' || *s > '9') return 0;
    char *e;
    *v = strtoull(s, &e, 10);
    return *e == 0;
}

/* "deviceProperties" as Kineto writes it, from what the rank recorded of its CUDA devices
 * (cuda.<i>.* metadata, docs/format.md): id, name, totalGlobalMem, computeMajor,
 * computeMinor, numSms; a property not recorded is left out. */
static void write_device_props(FILE *out, const tp_process *rk) {
    fputs("\"deviceProperties\": [", out);
    int n = 0;
    for (unsigned i = 0; rk && i < 64; i++) {
        char k[64];
        snprintf(k, sizeof k, "cuda.%u.name", i);
        const char *name = tp_meta(rk, k);
        if (!name) continue;
        fprintf(out, "%s{\"id\": %u, \"name\": ", n++ ? ", " : "", i);
        put_raw_string(out, name);
        uint64_t v;
        snprintf(k, sizeof k, "cuda.%u.memory_total_bytes", i);
        if (meta_u64(rk, k, &v)) fprintf(out, ", \"totalGlobalMem\": %" PRIu64, v);
        snprintf(k, sizeof k, "cuda.%u.compute_capability", i);
        const char *cc = tp_meta(rk, k);
        unsigned maj, min;
        char tail;
        if (cc && sscanf(cc, "%u.%u%c", &maj, &min, &tail) == 2)
            fprintf(out, ", \"computeMajor\": %u, \"computeMinor\": %u", maj, min);
        snprintf(k, sizeof k, "cuda.%u.sm_count", i);
        if (meta_u64(rk, k, &v)) fprintf(out, ", \"numSms\": %" PRIu64, v);
        fputc('}', out);
    }
    fputs("],\n", out);
}

/* The process groups trainprof.torch recorded (torch.pg.<id> = "backend=B size=N
 * ranks=R0,R1,...", torch.pg_name.<id>), as Kineto's distributedInfo.pg_config entries
 * (pg_name, pg_desc, backend_config, pg_size, ranks); the count in *count. With
 * want_backend, instead the backend of the group of `world` ranks, into be (n bytes): the
 * device backend of a device-mapped one ("cpu:gloo,cuda:nccl" -> nccl). */
static void write_pg_config(FILE *out, const tp_process *rk, size_t *count, int world,
                            char *be, size_t n) {
    static const char pfx[] = "torch.pg.";
    *count = 0;
    for (size_t i = 0; rk && i < rk->nmeta; i++) {
        const tp_kv *kv = &rk->meta[i];
        /* (one entry a key, its last value: the loader keeps no other) */
        if (strncmp(kv->key, pfx, sizeof pfx - 1) || !kv->value) continue;
        char backend[64] = "", ranks[4096] = "";
        int size = -1;
        const char *v = kv->value;
        const char *b = strstr(v, "backend="), *z = strstr(v, " size="), *r = strstr(v, " ranks=");
        if (!b || !z || !r) continue;
        size_t bl = (size_t)(z - (b + 8));
        if (bl >= sizeof backend) bl = sizeof backend - 1;
        memcpy(backend, b + 8, bl);
        backend[bl] = 0;
        size = atoi(z + 6);
        snprintf(ranks, sizeof ranks, "%s", r + 7);
        const char *id = kv->key + sizeof pfx - 1;
        if (be) {
            if (size == world && !*be) {
                const char *c = strstr(backend, "cuda:");
                const char *src = c ? c + 5 : backend;
                size_t l = strcspn(src, ",");
                if (l >= n) l = n - 1;
                memcpy(be, src, l);
                be[l] = 0;
            }
            continue;
        }
        char nk[96];
        snprintf(nk, sizeof nk, "torch.pg_name.%s", id);
        const char *desc = tp_meta(rk, nk);
        fputs((*count)++ ? ", {\"pg_name\": " : "{\"pg_name\": ", out);
        put_raw_string(out, id);
        fputs(", \"pg_desc\": ", out);
        put_raw_string(out, desc ? desc : "undefined");
        fputs(", \"backend_config\": ", out);
        put_raw_string(out, backend);
        fprintf(out, ", \"pg_size\": %d, \"ranks\": [", size);
        /* a member list ("0,1,2") or "?" when torch did not say */
        int first = 1;
        for (const char *q = ranks; *q;) {
            char *e;
            long x = strtol(q, &e, 10);
            if (e == q) break;
            fprintf(out, "%s%ld", first ? "" : ", ", x);
            first = 0;
            q = *e == ',' ? e + 1 : e;
        }
        fputs("]}", out);
    }
}

/* ------------------------------------------------------------------ documents */

/* The whole document. rank < 0: the merged form. */
static int export_sel(const tp_run *run, const size_t *sel, size_t nsel, int rank, FILE *out,
                      const tp_export_opts *opts) {
    static const tp_export_opts no_opts = {NULL, 1};
    if (!opts) opts = &no_opts;
    int merged = rank < 0;
    int64_t *pids = malloc((nsel ? nsel : 1) * sizeof *pids);
    if (!pids) return TPROF_ERR_NO_MEMORY;
    int rc = tp_cw_assign_pids(run, sel, nsel, merged, pids);
    cw w = {.f = out, .rank_file = !merged};
    tp_clocks_result own;
    if (rc == TPROF_OK) rc = tp_cw_setup(&w, run, sel, nsel, merged, opts, &own);
    else memset(&own, 0, sizeof own);
    if (rc != TPROF_OK) {
        tp_clocks_result_free(&own);
        free(pids);
        return rc;
    }
    const tp_clocks_result *ck = w.ck;
    const tp_process *rp = nsel ? &run->procs[sel[0]] : NULL;
    const tp_process *src = merged || !rp ? NULL : tp_gpu_samples_for(run, rp);

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
                if (tp_comm_key_at(rk, i).source == TPROF_COMM_SRC_NCCL) backend = "nccl";
            /* else the backend of torch.distributed's ops (gloo on a CPU job) */
            for (size_t i = 0; !backend && i < rk->ncomm; i++) {
                tp_comm_key k = tp_comm_key_at(rk, i);
                if (k.source == TPROF_COMM_SRC_TORCH) backend = tp_comm_backend(rk, &k, be, sizeof be);
            }
            /* a long run's slim rank keeps only its sampled collectives (comm.h), maybe none
             * (sends and receives alone): its last op then tells */
            const tp_comm_op *last = !backend && rk->comm_level ? tp_comm_last(rk) : NULL;
            tp_comm_key lk = last ? tp_comm_key_of(last) : (tp_comm_key){0};
            if (last && lk.source == TPROF_COMM_SRC_NCCL) backend = "nccl";
            else if (last && lk.source == TPROF_COMM_SRC_TORCH)
                backend = tp_comm_backend(rk, &lk, be, sizeof be);
        }
        /* world_size from the rank's metadata, else as many ranks as the run holds */
        int world = rk ? rk->world_size : -1;
        if (world <= 0) {
            world = 0;
            for (size_t i = 0; i < run->nprocs; i++) world += run->procs[i].role == TP_ROLE_RANK;
        }
        /* else the backend of torch.distributed's group of every rank */
        char pgbe[32] = "";
        size_t npg = 0;
        if (rk && !backend) {
            write_pg_config(out, rk, &npg, world, pgbe, sizeof pgbe);
            if (*pgbe) backend = pgbe;
        }
        write_device_props(out, rk);
        fputs("\"distributedInfo\": {\"backend\": ", out);
        tp_json_string(out, backend ? backend : "unknown");
        fprintf(out, ", \"rank\": %d, \"world_size\": %d, \"pg_config\": [", rank, world);
        write_pg_config(out, rk, &npg, world, NULL, 0);
        fprintf(out, "], \"pg_count\": %zu},\n", npg);
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

    tp_cw_scratch sc = {0};
    unsigned allow[64];
    size_t nallow = 0;
    int filter = 0;
    /* one process in memory at a time: a slim one's file is read again whole just before
     * its events are written and freed after them */
    for (size_t i = 0; i < nsel && rc == TPROF_OK; i++) {
        const tp_process *p = &run->procs[sel[i]];
        tp_process whole;
        const tp_process *q = tp_cw_acquire(&w, sel[i], &whole, &rc);
        if (!q) break;
        if (!merged && src && p == rp) {
            /* the rank's GPUs among the sampler's, found from the rank's GPU records while
             * they are in memory (the sampler's side is its metadata) */
            size_t unmatched = 0;
            tp_gpu_link l[64];
            nallow = tp_rank_gpu_links(q, src == rp ? q : src, l, 64, &unmatched);
            for (size_t k = 0; k < nallow; k++) allow[k] = l[k].index;
            filter = nallow || unmatched;
        }
        w.gpu_only = !merged && p != rp && p == src;
        w.gpu_filter = !merged && p == src ? filter : 0;
        w.ngpu_allow = !merged && p == src ? nallow : 0;
        w.gpu_allow = allow;
        if (w.gpu_only) w.gpu_until = tp_cw_rel_ns(&w, rp, rp->end_mono);
        rc = write_process(&w, q, pids[i], opts, &sc);
        tp_cw_release(&w, q, &whole);
        if (rc == TPROF_OK && ferror(out)) rc = TPROF_ERR_IO; /* stop early on a full disk */
    }
    tp_cw_scratch_free(&sc);

    if (rc == TPROF_OK) {
        /* Kineto closes the window with a global instant at the last timestamp */
        int64_t last = tp_cw_end_time(&w, sel, nsel);
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

int tp_export_chrome(const tp_run *run, FILE *out, const tp_export_opts *opts) {
    if (!run || !out) return TPROF_ERR_INVALID_ARG;
    size_t *sel, n;
    int rc = tp_cw_select_merged(run, opts, &sel, &n);
    if (rc != TPROF_OK) return rc;
    rc = export_sel(run, sel, n, -1, out, opts);
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
