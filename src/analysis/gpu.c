/*
 * gpu.c — the GPU part of the report, from CUPTI records (capture/cupti.c): per device, the
 * share of the measured steps the GPU was busy, kernel time by class, the top kernels,
 * host synchronisations per step and the time the host was blocked in them, host<->device
 * copy bytes, and the device-memory peak from allocation records.
 *
 * Work counts for the measured steps (warm-up left out) when its launch was inside one
 * (the runtime call with the same CUPTI correlation id; for work of unknown launch, an
 * estimate from its known neighbours on the same stream: launch_times), so "per step"
 * figures match a profiler that synchronizes around the same steps; busy time is where the
 * device was busy during the step windows. One table of kernel-name patterns
 * (docs/design.md §5.2) classifies kernels.
 */
#define _GNU_SOURCE
#include "analysis/breakdown.h"
#include "analysis/alloc.h"
#include "analysis/capture.h"
#include "analysis/gpu.h"
#include "analysis/spans.h"
#include "analysis/figures.h"
#include "analysis/stats.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "format/format.h"
#include "trainprof.h"

/* Kernel classes by name, first match wins (case-insensitive substrings), unless a name also
 * holds one of the class's exclusions.
 * Attention in its forms: fused kernels name themselves (FlashAttention's flash_fwd/flash::,
 * PyTorch SDPA's fmha_cutlass (memory-efficient) and pytorch_flash, cuDNN's *sdpa* and *mha*
 * engines as Transformer Engine runs them, TE's fused_attn); the unfused form (Megatron-LM's
 * --transformer-impl local, a plain softmax(QK^T)V) runs a softmax kernel over the scores
 * (PyTorch's softmax_warp_forward/backward, cunn_SoftMax*, Megatron's fused
 * scaled_masked_softmax and scaled_upper_triang_masked_softmax), counted here as attention,
 * and batched GEMMs that a kernel name does not tell from the others (counted as gemm). A
 * log-softmax is the loss's, not attention's. */
static const struct {
    const char *cls;
    const char *const pats[16];
    const char *const unless[4];
} classes[] = {
    {"communication", {"nccl", "allreduce", "all_reduce", "allgather", "reducescatter", NULL},
     {NULL}},
    {"attention", {"flash", "fmha", "attention", "attn", "sdpa", "mha", "softmax", NULL},
     {"logsoftmax", "log_softmax", NULL}},
    {"gemm", {"gemm", "cutlass", "cublas", "xmma", "wgmma", "matmul", "nvjet", "sm90_", "sm80_", NULL},
     {NULL}},
    {"elementwise/norm", {"elementwise", "vectorized", "reduce", "norm", "softmax", "dropout",
                          "gelu", "silu", "relu", "adam", "foreach", "multi_tensor_apply", NULL},
     {NULL}},
};

/* the table's order is TP_KC_*'s */
_Static_assert(sizeof classes / sizeof *classes == TP_KC_OTHER, "one row per class but other");

static int excluded(const char *name, const char *const *unless) {
    for (size_t k = 0; unless[k]; k++)
        if (strcasestr(name, unless[k])) return 1;
    return 0;
}

int tp_kernel_class_id(const char *name) {
    for (size_t c = 0; name && c < sizeof classes / sizeof *classes; c++)
        for (size_t k = 0; classes[c].pats[k]; k++)
            if (strcasestr(name, classes[c].pats[k]) && !excluded(name, classes[c].unless))
                return (int)c;
    return TP_KC_OTHER;
}

const char *tp_kernel_class_name(int id) {
    return id >= 0 && id < TP_KC_OTHER ? classes[id].cls : "other";
}

const char *tp_kernel_class(const char *name) { return tp_kernel_class_name(tp_kernel_class_id(name)); }

typedef struct krow { const char *name; uint64_t count; double ns; } krow;

static int by_ns(const void *a, const void *b) {
    const krow *x = a, *y = b;
    return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : strcmp(x->name, y->name);
}

/* CUPTI's overhead kinds that are the driver's time, not CUPTI's (cupti_activity.h,
 * CUpti_ActivityOverheadKind): JIT compilation (1), module loading (4<<16), lazy function
 * loading (5<<16) and a full command buffer (6<<16: the launching thread waited for room in a
 * GPU command queue, i.e. its launches ran ahead of the GPU). */
static int driver_overhead(uint32_t kind) {
    return kind == 1 || kind == (4u << 16) || kind == (5u << 16) || kind == (6u << 16);
}

/* Outside the windows (attributed): not 0, which a record of no length counts for (CUPTI
 * gives them, and the loader cuts a record back to its start when the next on its stream
 * begins with it): such a kernel still ran, and counts among the kernels. */
#define NOT_IN UINT64_MAX

/* The ns of o that count for the windows st (o's length; every record without windows), or
 * NOT_IN when `when` (its launch, or its start) lies outside them. */
static uint64_t attributed(const tp_gpu_op *o, uint64_t when, const tp_step *st, size_t nst) {
    if (!nst) return o->end - o->start;
    return tp_steps_overlap(st, nst, when, when + 1) ? o->end - o->start : NOT_IN;
}

/* CUPTI's overhead records: their time inside the measured steps (all of it without steps),
 * per unit: CUPTI's own (overhead_ms) and the driver's (overhead_driver_ms), and by what was
 * done, most first. Nothing without records in the steps. began: st is a bounded load's one
 * span (tp_gpu_result.in_span), whose records count where they began, each whole, as its
 * kernels do. */
static void cupti_overhead(tp_gpu_result *out, const tp_process *p, const tp_step *st, size_t nst,
                           double per, int began) {
    if (!p->novh) return;
    enum { MAXK = 16 };
    const char *names[MAXK];
    double ms[MAXK], total = 0, driver = 0;
    int drv[MAXK];
    size_t nk = 0, n = 0, nd = 0;
    for (size_t i = 0; i < p->novh; i++) {
        const tp_gpu_op *o = &p->ovh[i];
        uint64_t in = began ? attributed(o, o->start, st, nst) /* where it began, whole */
                      : nst ? tp_steps_overlap(st, nst, o->start, o->end)
                            : o->end - o->start;
        if (in == NOT_IN || (nst && !began && !in)) continue;
        n++;
        int d = driver_overhead(o->kind);
        *(d ? &driver : &total) += (double)in / 1e6;
        nd += (size_t)d;
        const char *nm = o->name ? o->name : "CUPTI overhead";
        size_t k = 0;
        while (k < nk && strcmp(names[k], nm)) k++;
        if (k == nk) {
            if (nk == MAXK) continue; /* CUPTI has fewer kinds than this */
            names[nk] = nm;
            drv[nk] = d;
            ms[nk++] = 0;
        }
        ms[k] += (double)in / 1e6;
    }
    if (!n) return; /* all outside the measured steps */
    out->has_overhead = 1;
    out->overhead_records = n;
    out->overhead_ms = total / per;
    out->overhead_driver_records = nd;
    out->overhead_driver_ms = driver / per;
    out->overhead_kinds = tp_calloc(nk ? nk : 1, sizeof *out->overhead_kinds);
    for (size_t done = 0; out->overhead_kinds && done < nk; done++) { /* most first */
        size_t best = 0;
        for (size_t k = 1; k < nk; k++)
            if (ms[k] > ms[best]) best = k;
        out->overhead_kinds[out->noverhead_kinds++] =
            (tp_gpu_overhead){names[best], drv[best], ms[best] / per};
        ms[best] = -1;
    }
}

static int corr_only(const void *a, const void *b) {
    const tp_gpu_op *x = *(const tp_gpu_op *const *)a, *y = *(const tp_gpu_op *const *)b;
    return x->correlation < y->correlation ? -1 : x->correlation > y->correlation;
}

/* by correlation id, then start: ids may repeat within a file when CUPTI was detached between
 * capture windows and attached again (its ids may start over) */
static int by_corr(const void *a, const void *b) {
    int c = corr_only(a, b);
    if (c) return c;
    const tp_gpu_op *x = *(const tp_gpu_op *const *)a, *y = *(const tp_gpu_op *const *)b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* GPU work belongs to the step whose thread launched it (docs/design.md §4): the launch's time is
 * that of the runtime call with the same correlation id. Work whose launch is unknown
 * (driver API, graphs) counts by where it ran, clipped to the steps. Returns the ns of `o`
 * that count for the measured steps. */
static const tp_gpu_op *launch_of(const tp_gpu_op *o, const tp_gpu_op *const *apis,
                                  size_t napi) {
    if (!napi || !o->correlation) return NULL;
    tp_gpu_op key = *o;
    const tp_gpu_op *kp = &key;
    const tp_gpu_op *const *hit = bsearch(&kp, apis, napi, sizeof *apis, corr_only);
    if (!hit) return NULL;
    /* of the calls with this id (one per attachment of CUPTI), the last that began before
     * the work started: a launch precedes its kernel */
    const tp_gpu_op *const *lo = hit, *const *hi = hit, *const *end = apis + napi;
    while (lo > apis && lo[-1]->correlation == o->correlation) lo--;
    while (hi + 1 < end && hi[1]->correlation == o->correlation) hi++;
    const tp_gpu_op *const *best = lo;
    for (const tp_gpu_op *const *q = lo; q <= hi && (*q)->start <= o->start; q++) best = q;
    return *best;
}

static int by_stream_start(const void *a, const void *b, void *ctx) {
    const tp_gpu_op *g = ctx;
    const tp_gpu_op *x = &g[*(const uint32_t *)a], *y = &g[*(const uint32_t *)b];
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    if (x->stream != y->stream) return x->stream < y->stream ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

typedef struct skey { uint32_t device, stream; size_t count; } skey;

/* The index in k[0..nk) of o's (device, stream), last: the one found before (runs of one
 * stream are common); nk when absent. */
static size_t skey_find(const skey *k, size_t nk, size_t last, const tp_gpu_op *o) {
    if (last < nk && k[last].device == o->device && k[last].stream == o->stream) return last;
    size_t j = 0;
    while (j < nk && !(k[j].device == o->device && k[j].stream == o->stream)) j++;
    return j;
}

/* The indices of p->gpu grouped by (device, stream), each group in start order (a new array
 * of p->ngpu, 4 bytes each: a rank holds millions of records), or NULL when out of memory: a
 * stable counting sort over the ops, which the loader keeps in start order (model.c), so
 * O(n) with a handful of streams, in two passes that look each op's stream up again rather
 * than keep it. */
static uint32_t *stream_index(const tp_process *p) {
    size_t n = p->ngpu;
    if (n > UINT32_MAX) return NULL;
    uint32_t *ix = tp_malloc((n ? n : 1) * sizeof *ix);
    skey *k = NULL;
    size_t nk = 0, capk = 0, last = 0;
    for (size_t i = 0; ix && i < n; i++) {
        const tp_gpu_op *o = &p->gpu[i];
        size_t j = skey_find(k, nk, last, o);
        if (j == nk) {
            if (nk == capk) {
                capk = capk ? capk * 2 : 16;
                skey *nkp = realloc(k, capk * sizeof *nkp); /* not counted: the same order */
                if (!nkp) { /* no memory for the buckets: sort instead */
                    for (size_t x = 0; x < n; x++) ix[x] = (uint32_t)x;
                    qsort_r(ix, n, sizeof *ix, by_stream_start, (void *)p->gpu);
                    free(k);
                    return ix;
                }
                k = nkp;
            }
            k[nk++] = (skey){o->device, o->stream, 0};
        }
        last = j;
        k[j].count++;
    }
    size_t pos = 0; /* counts -> first positions */
    for (size_t j = 0; j < nk; j++) {
        size_t c = k[j].count;
        k[j].count = pos;
        pos += c;
    }
    last = 0;
    for (size_t i = 0; ix && i < n; i++) {
        last = skey_find(k, nk, last, &p->gpu[i]);
        ix[k[last].count++] = (uint32_t)i;
    }
    free(k);
    return ix;
}

/* When each GPU op was launched (CLOCK_MONOTONIC ns), into when[]. Known: the runtime call
 * with its correlation id. Unknown (kernels cuBLASLt, cuDNN or Triton launch through the
 * driver API, whose records are opt-in): a stream runs its work in launch order, so the
 * launch lies between those of the nearest known neighbours on the same stream, P before
 * and N after; within [launch(P), min(launch(N), start)], it is placed by N's own
 * launch-to-start delay (the queue depth at that moment), or by the run's median delay
 * `lag` when the stream has no known launch after it. Returns -1 when out of memory. */
static int launch_times(const tp_process *p, const tp_gpu_op *const *apis, uint64_t lag,
                        uint64_t *when) {
    size_t n = p->ngpu;
    uint32_t *ix = stream_index(p);
    if (!ix) return -1;
    /* each op's launch is looked up where it is needed, not kept: a binary search by
     * correlation id costs less than an array of millions */
    for (size_t a = 0; a < n;) {
        size_t b = a;
        while (b < n && p->gpu[ix[b]].device == p->gpu[ix[a]].device &&
               p->gpu[ix[b]].stream == p->gpu[ix[a]].stream)
            b++;
        /* backward: the next known launch on this stream, and its delay */
        uint64_t next_launch = UINT64_MAX, next_lag = lag;
        for (size_t k = b; k-- > a;) {
            const tp_gpu_op *o = &p->gpu[ix[k]];
            const tp_gpu_op *l = launch_of(o, apis, p->napi);
            if (l) {
                when[ix[k]] = l->start;
                next_launch = l->start;
                next_lag = o->start >= next_launch ? o->start - next_launch : 0;
                continue;
            }
            uint64_t w = o->start > next_lag ? o->start - next_lag : o->start;
            if (w > next_launch) w = next_launch;
            when[ix[k]] = w;
        }
        /* forward: never before the previous known launch */
        uint64_t prev_launch = 0;
        for (size_t k = a; k < b; k++) {
            const tp_gpu_op *l = launch_of(&p->gpu[ix[k]], apis, p->napi);
            if (l) prev_launch = l->start;
            else if (when[ix[k]] < prev_launch) when[ix[k]] = prev_launch;
        }
        a = b;
    }
    free(ix);
    return 0;
}

/* Median delay from a runtime launch to its work starting, over (at most 100k) matched
 * kernels: the queue depth the host runs ahead by. 0 when nothing matches. */
static uint64_t launch_lag(const tp_process *p, const tp_gpu_op *const *apis) {
    size_t cap = p->ngpu < 100000 ? p->ngpu : 100000, n = 0;
    uint64_t *d = tp_malloc((cap ? cap : 1) * sizeof *d);
    if (!d) return 0;
    for (size_t i = 0; i < p->ngpu && n < cap; i++) {
        const tp_gpu_op *l = launch_of(&p->gpu[i], apis, p->napi);
        if (l && p->gpu[i].start >= l->start) d[n++] = p->gpu[i].start - l->start;
    }
    uint64_t lag = 0;
    if (n) {
        qsort(d, n, sizeof *d, tp_cmp_u64);
        lag = d[n / 2];
    }
    free(d);
    return lag;
}

/* ------------------------------------------------------------------ stream order */

/* CUPTI's synchronisation types (cupti_activity.h, CUpti_ActivitySynchronizationType) after
 * which the host knows work is done: cudaStreamSynchronize returns once all work enqueued on
 * its stream before the call has completed, cudaDeviceSynchronize / cuCtxSynchronize once
 * all work of the context has (CUDA Runtime API reference). Event synchronisations wait for
 * an event's work only, and stream-wait-event does not block the host: neither bounds a
 * stream. */
#define SYNC_STREAM 3u
#define SYNC_CONTEXT 4u

typedef struct clip_sync {
    uint32_t key;        /* the stream (stream syncs) or the device (context syncs) */
    uint64_t start, end; /* host times of the call */
    uint64_t min_end;    /* the earliest end among this and the later-starting ones */
} clip_sync;

static int by_key_start(const void *a, const void *b) {
    const clip_sync *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Sorts v by (key, start) and fills min_end within each key, from the last call back. */
static void prepare_syncs(clip_sync *v, size_t n) {
    if (n > 1) qsort(v, n, sizeof *v, by_key_start);
    for (size_t i = n; i-- > 0;)
        v[i].min_end = i + 1 < n && v[i + 1].key == v[i].key && v[i + 1].min_end < v[i].end
                           ? v[i + 1].min_end
                           : v[i].end;
}

/* The time by which work enqueued at `enq` must have ended, given the synchronisations of
 * `key` in v: the earliest end of a call that began at or after `enq`; UINT64_MAX if none. */
static uint64_t sync_bound(const clip_sync *v, size_t n, uint32_t key, uint64_t enq) {
    size_t lo = 0, hi = n; /* first (key, start) >= (key, enq) */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].key < key || (v[mid].key == key && v[mid].start < enq)) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && v[lo].key == key ? v[lo].min_end : UINT64_MAX;
}

static int clip_by_index(const void *a, const void *b) {
    const tp_gpu_clip *x = a, *y = b;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Cuts p->gpu[i] back to end at `end` (never before its start), keeping what CUPTI said. */
static int clip_to(tp_process *p, size_t i, uint64_t end, uint32_t why, size_t *cap) {
    tp_gpu_op *o = &p->gpu[i];
    if (end < o->start) end = o->start;
    if (o->end <= end) return 0;
    if (o->flags & TP_GPU_CLIPPED) {
        for (size_t k = p->nclips; k-- > 0;) /* clipped earlier in the same pass: recent */
            if (p->clips[k].index == i) {
                p->clips[k].why |= why;
                break;
            }
    } else {
        if (p->nclips == *cap) {
            size_t nc = *cap ? *cap * 2 : 16;
            tp_gpu_clip *v = tp_realloc(p->clips, nc * sizeof *v);
            if (!v) return -1;
            p->clips = v;
            *cap = nc;
        }
        p->clips[p->nclips++] = (tp_gpu_clip){i, o->end, why};
        o->flags |= TP_GPU_CLIPPED;
    }
    p->clipped_ns += o->end - end;
    o->end = end;
    return 0;
}

static const tp_gpu_fence *fence_of(const tp_process *p, uint32_t device, uint32_t stream) {
    for (size_t i = 0; i < p->ngpu_fences; i++)
        if (p->gpu_fences[i].device == device && p->gpu_fences[i].stream == stream)
            return &p->gpu_fences[i];
    return NULL;
}

int tp_gpu_clip_to_streams(tp_process *p) {
    size_t n = p->ngpu, nss = 0, ncs = 0, cap = 0;
    if (!n) return 0;
    const tp_gpu_op **apis = tp_malloc((p->napi ? p->napi : 1) * sizeof *apis);
    uint32_t *ix = stream_index(p);
    /* room for the synchronisations only: a run's records are mostly kernels */
    size_t nsync = 0;
    for (size_t i = 0; i < n; i++) nsync += p->gpu[i].type == TPROF_REC_GPU_SYNC;
    /* stream syncs from the front, context syncs in the second half */
    clip_sync *ss = tp_malloc(2 * (nsync ? nsync : 1) * sizeof *ss), *cs = ss ? ss + nsync : NULL;
    int rc = apis && ix && ss && cs ? 0 : -1;
    for (size_t i = 0; !rc && i < p->napi; i++) apis[i] = &p->api[i];
    if (!rc && p->napi > 1) qsort(apis, p->napi, sizeof *apis, by_corr);
    for (size_t i = 0; !rc && i < n; i++) {
        const tp_gpu_op *o = &p->gpu[i];
        if (o->type != TPROF_REC_GPU_SYNC) continue;
        if (o->kind == SYNC_STREAM) ss[nss++] = (clip_sync){o->stream, o->start, o->end, 0};
        else if (o->kind == SYNC_CONTEXT && o->device != TPROF_DEVICE_UNKNOWN)
            cs[ncs++] = (clip_sync){o->device, o->start, o->end, 0};
    }
    if (!rc) {
        prepare_syncs(ss, nss);
        prepare_syncs(cs, ncs);
    }
    for (size_t a = 0; !rc && a < n;) {
        size_t b = a;
        while (b < n && p->gpu[ix[b]].device == p->gpu[ix[a]].device &&
               p->gpu[ix[b]].stream == p->gpu[ix[a]].stream)
            b++;
        /* Work enqueued before a synchronisation of its stream (or context) began has ended
         * when that call returns. Enqueued: by the end of its launch call when CUPTI's
         * correlation id names it, and in any case by the time it started running. */
        for (size_t k = a; k < b && (nss || ncs); k++) {
            const tp_gpu_op *o = &p->gpu[ix[k]];
            if (o->type == TPROF_REC_GPU_SYNC) continue;
            uint64_t enq = o->start;
            const tp_gpu_op *l = launch_of(o, apis, p->napi);
            if (l && l->end < enq) enq = l->end;
            uint64_t bound = sync_bound(ss, nss, o->stream, enq);
            uint64_t cb = sync_bound(cs, ncs, o->device, enq);
            if (cb < bound) bound = cb;
            if (bound < o->end && clip_to(p, ix[k], bound, TP_CLIP_SYNC, &cap)) rc = -1;
        }
        /* A stream runs its work one item after another: a record ends by the time the next
         * one on its stream begins. Nodes of one CUDA graph are the exception (a graph's
         * branches run concurrently while CUPTI names the stream it was launched into), so a
         * record is bounded by the next one outside its own graph. */
        uint64_t next = UINT64_MAX;
        const tp_gpu_op *after = NULL;
        /* a bounded load's last record held on the stream: the first left out after its
         * span bounds it, as it would have held (model.h, tp_gpu_fence) */
        const tp_gpu_fence *fence = fence_of(p, p->gpu[ix[a]].device, p->gpu[ix[a]].stream);
        for (size_t k = b; !rc && k-- > a;) {
            const tp_gpu_op *o = &p->gpu[ix[k]];
            if (o->type == TPROF_REC_GPU_SYNC) continue;
            if (after && !(o->graph && o->graph == after->graph)) next = after->start;
            /* the fence lies among the records by its start: it bounds the one before it
             * (records held whole, communication kernels, may come after it); a node of the
             * fence's own graph, by the first record left out outside that graph */
            uint64_t lim = next, fs = 0;
            if (fence) fs = o->graph && o->graph == fence->graph ? fence->past_graph : fence->start;
            if (fence && fs > o->start && fs < lim) lim = fs;
            if (lim < o->end && clip_to(p, ix[k], lim, TP_CLIP_NEXT, &cap)) rc = -1;
            after = o;
        }
        a = b;
    }
    if (p->nclips > 1) qsort(p->clips, p->nclips, sizeof *p->clips, clip_by_index);
    free(apis);
    free(ix);
    free(ss);
    return rc;
}

const tp_gpu_clip *tp_gpu_clip_of(const tp_process *p, const tp_gpu_op *o) {
    if (!(o->flags & TP_GPU_CLIPPED) || o < p->gpu || o >= p->gpu + p->ngpu) return NULL;
    tp_gpu_clip key = {(size_t)(o - p->gpu), 0, 0};
    return bsearch(&key, p->clips, p->nclips, sizeof *p->clips, clip_by_index);
}

/* GPU capture paused for another CUPTI client (tprof_gpu_capture_pause; trainprof.torch does
 * it around torch.profiler): metadata gpu_capture.pauses = "start-end,..." (ns), and
 * gpu_capture.paused_since_ns for a pause never resumed (until the end of the file). Kept
 * as seconds from the process's start, each with its reason (tp_capture_pause_reasons). */
static void capture_pauses(tp_gpu_result *out, const tp_process *p) {
    const char *l = tp_meta(p, "gpu_capture.pauses");
    const char *open = tp_meta(p, "gpu_capture.paused_since_ns");
    if ((!l || !*l) && (!open || !*open)) return;
    out->has_pauses = 1;
    tp_capture_pause *v;
    size_t n;
    if (tp_capture_pause_list(p, &v, &n) != TPROF_OK || !n) return;
    /* the first ones listed, and one never resumed (it holds capture off to the end: the
     * pause that most needs saying), the rest counted with their time; with those the runtime
     * could not list and joined into the last listed one (gpu_capture.pauses_merged, whose
     * time that one's holds) */
    size_t keep = n > TP_GPU_PAUSES_LISTED ? TP_GPU_PAUSES_LISTED : n;
    int open_last = n > keep && v[n - 1].open;
    if (open_last) keep--;
    for (size_t i = keep; i < n - (size_t)open_last; i++) {
        out->pauses_more++;
        out->pauses_more_s += (double)(v[i].to_ns - v[i].from_ns) / 1e9;
    }
    const char *merged = out->pauses_more ? tp_meta(p, "gpu_capture.pauses_merged") : NULL;
    if (merged) out->pauses_more += (size_t)strtoull(merged, NULL, 10);
    if (open_last) v[keep++] = v[n - 1];
    size_t places = v[n - 1].at + 1; /* the reasons' places: up to the last pause's */
    n = keep;
    /* each kept pause's place in the metadata's list, which numbers the reasons */
    size_t *at = tp_malloc(n * sizeof *at);
    if (!at || !(out->pauses = tp_calloc(n, sizeof *out->pauses))) {
        free(at);
        free(v);
        return;
    }
    double t0 = (double)p->hdr.start_mono_ns, t1 = ((double)p->end_mono - t0) / 1e9;
    /* times before the process started are shown as its start; one never resumed lasts
     * until the file's end */
    for (size_t i = 0; i < n; i++) {
        double a = ((double)v[i].from_ns - t0) / 1e9, b = ((double)v[i].to_ns - t0) / 1e9;
        if (a < 0) a = 0;
        at[i] = v[i].at;
        out->pauses[out->npauses++] = v[i].open ? (tp_gpu_pause){a < t1 ? a : t1, t1, 1, NULL}
                                                : (tp_gpu_pause){a, b > 0 ? b : 0, 0, NULL};
    }
    free(v);
    /* the reasons, NUL-terminated each in one block */
    const char **rs = tp_malloc(places * sizeof *rs);
    size_t *rl = tp_malloc(places * sizeof *rl), bytes = 0;
    if (rs && rl) tp_capture_pause_reasons(p, rs, rl, places);
    for (size_t i = 0; rs && rl && i < out->npauses; i++)
        if (rs[at[i]]) bytes += rl[at[i]] + 1;
    char *w = bytes ? (out->pause_reasons = tp_malloc(bytes)) : NULL;
    for (size_t i = 0; w && i < out->npauses; i++) {
        if (!rs[at[i]]) continue;
        memcpy(w, rs[at[i]], rl[at[i]]);
        w[rl[at[i]]] = 0;
        out->pauses[i].reason = w;
        w += rl[at[i]] + 1;
    }
    free(rs);
    free(rl);
    free(at);
}

/* A kernel-capture window (TRAINPROF_KERNEL_STEPS): its spec, whether it opened, and how many
 * of the measured steps were captured (the GPU figures are over those: capture.h). */
static void kernel_window(tp_gpu_result *out, const tp_process *p, const tp_capture_result *cap,
                          size_t nst) {
    const char *kw = tp_meta(p, "kernel_steps");
    if (!kw) return;
    out->has_kernel_steps = 1;
    out->kernel_steps_spec = kw;
    out->kernel_steps_measured = cap->present ? cap->measured : nst;
    out->kernel_steps_opened = tp_meta(p, "kernel_steps.on_ns") != NULL;
    out->kernel_steps_in_window = nst;
}

_Static_assert(TP_GPU_NCLASSES == TP_KC_COUNT, "results.h keeps one figure per kernel class");

/* Which record kinds the process holds at all: a kind with none was not captured (CUPTI's
 * kind off: TRAINPROF_CUPTI_KINDS), and its figures are unknown rather than 0. memory_until:
 * allocation records before this time (capture.h: complete_until_ns) make the peak. */
typedef struct kinds_seen {
    int copies, memsets;
    uint64_t memory_until;
    double memory_until_s;
} kinds_seen;

/* `name` is an item of the comma-separated `list` */
static int kind_listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *q = list; (q = strstr(q, name)) != NULL; q += n)
        if ((q == list || q[-1] == ',') && (q[n] == ',' || q[n] == 0)) return 1;
    return 0;
}

/* The work a device ran (not its synchronisations): its busy time. */
static int device_work(const tp_gpu_op *o, const void *arg) {
    return o->device == *(const uint32_t *)arg && o->type != TPROF_REC_GPU_SYNC;
}

/* Per device the GPU ran work on (at most 64): busy time (the union of everything it ran,
 * so overlapping streams count once), kernel time by class, copies, and the allocator's
 * peak. att[i]: the ns of p->gpu[i] that count for the measured steps, NOT_IN outside them. */
static void device_figures(tp_gpu_result *out, const tp_process *p, const uint64_t *att,
                           const tp_step *st, size_t nst, uint64_t step_ns, double per,
                           const kinds_seen kinds) {
    uint32_t devs[64];
    size_t ndev = 0;
    for (size_t i = 0; i < p->ngpu; i++) {
        if (p->gpu[i].device == TPROF_DEVICE_UNKNOWN) continue; /* a sync with no device known */
        size_t k = 0;
        while (k < ndev && devs[k] != p->gpu[i].device) k++;
        if (k == ndev && ndev < 64) devs[ndev++] = p->gpu[i].device;
    }
    out->devices = ndev ? tp_calloc(ndev, sizeof *out->devices) : NULL;
    for (size_t d = 0; d < ndev && out->devices; d++) {
        size_t nk = 0;
        double cls_ns[TP_KC_COUNT] = {0}, copy_ns = 0, kernel_ns = 0;
        uint64_t h2d = 0, d2h = 0;
        for (size_t i = 0; i < p->ngpu; i++) {
            const tp_gpu_op *o = &p->gpu[i];
            if (o->device != devs[d] || o->type == TPROF_REC_GPU_SYNC) continue;
            uint64_t in = att[i];
            if (in == NOT_IN) continue; /* launched outside the measured steps */
            if (o->type == TPROF_REC_GPU_KERNEL) {
                cls_ns[o->cls < TP_KC_OTHER ? o->cls : TP_KC_OTHER] += (double)in;
                kernel_ns += (double)in;
                nk++;
            } else {
                copy_ns += (double)in;
                if (o->type == TPROF_REC_GPU_MEMCPY) {
                    if (o->kind == 1) h2d += o->bytes; /* CUPTI_ACTIVITY_MEMCPY_KIND_HTOD */
                    if (o->kind == 2) d2h += o->bytes; /* DTOH */
                }
            }
        }
        uint64_t busy = 0; /* where it ran, walked from the records in start order */
        if (nst) {
            tp_union u;
            tp_gpu_walk w = {p, device_work, &devs[d], 0};
            tp_union_init(&u);
            tp_union_add(&u, tp_gpu_walk_next, &w);
            busy = tp_union_steps(&u, st, nst);
        }
        tp_gpu_device_result *D = &out->devices[out->ndevices++];
        D->device = devs[d];
        D->has_busy_share = nst > 0;
        D->busy_share = nst && step_ns ? (double)busy / (double)step_ns : 0;
        D->busy_ms = (double)busy / 1e6 / per;
        D->kernels = (double)nk / per;
        D->kernel_ms = kernel_ns / 1e6 / per;
        for (size_t ci = 0; ci < TP_KC_COUNT; ci++) D->kernel_ms_by_class[ci] = cls_ns[ci] / 1e6 / per;
        D->has_memcpy_memset = kinds.copies || kinds.memsets;
        D->memcpy_memset_ms = copy_ns / 1e6 / per;
        D->has_copies = kinds.copies;
        D->h2d_bytes = (double)h2d / per;
        D->d2h_bytes = (double)d2h / per;
        /* device-memory peak: running sum of allocations minus releases, over the records
         * of the time capture was on from the start (before it, nothing allocated; after
         * it first went off, allocations went unseen and the sum would be off by them) */
        int64_t cur = 0, peak = 0;
        size_t nmem = 0;
        for (size_t i = 0; i < p->ngmem; i++) {
            const tp_gpu_mem *m = &p->gmem[i];
            if (m->device != devs[d] || m->memory_kind != 3) continue; /* device memory */
            if (m->ts >= kinds.memory_until) continue;
            nmem++;
            cur = tp_mem_step(cur, m->bytes, m->op == 1);
            if (cur > peak) peak = cur;
        }
        D->has_memory_peak = nmem > 0;
        D->memory_peak_bytes = (double)peak;
        D->has_memory_peak_until = nmem > 0 && kinds.memory_until != UINT64_MAX;
        D->memory_peak_until_s = kinds.memory_until_s;
    }
}

/* The top_n kernels by time over all devices, and the total kernel time. */
static void top_kernels(tp_gpu_result *out, const tp_process *p, const uint64_t *att,
                        double per, int top_n) {
    krow *rows = NULL;
    size_t nrows = 0, caprows = 0;
    for (size_t i = 0; att && i < p->ngpu; i++) {
        const tp_gpu_op *o = &p->gpu[i];
        if (o->type != TPROF_REC_GPU_KERNEL) continue;
        uint64_t in = att[i];
        if (in == NOT_IN) continue;
        size_t k = 0;
        while (k < nrows && rows[k].name != o->name) k++; /* interned */
        if (k == nrows) {
            if (nrows == caprows) {
                caprows = caprows ? 2 * caprows : 64;
                krow *nr = tp_realloc(rows, caprows * sizeof *nr);
                if (!nr) break;
                rows = nr;
            }
            rows[nrows++] = (krow){o->name, 0, 0};
        }
        rows[k].count++;
        rows[k].ns += (double)in;
    }
    double ktot = 0;
    for (size_t k = 0; k < nrows; k++) ktot += rows[k].ns;
    if (nrows > 1) qsort(rows, nrows, sizeof *rows, by_ns);
    size_t shown = top_n > 0 ? (nrows < (size_t)top_n ? nrows : (size_t)top_n) : 0;
    out->kernels = shown ? tp_calloc(shown, sizeof *out->kernels) : NULL;
    for (size_t k = 0; k < shown && out->kernels; k++)
        out->kernels[out->nkernels++] = (tp_gpu_kernel){
            rows[k].name, tp_kernel_class(rows[k].name), (double)rows[k].count / per,
            rows[k].ns / 1e6 / per, rows[k].count ? rows[k].ns / 1e3 / (double)rows[k].count : 0,
            ktot > 0 ? rows[k].ns / ktot : 0};
    out->kernel_ms_total = ktot / 1e6 / per;
    free(rows);
}

/* Host synchronisations (CUDA calls that wait for the device) in the measured steps, and
 * whether GPU records stopped while the steps went on. */
static int is_graph_launch(const char *n) {
    return n && (!strncmp(n, "cudaGraphLaunch", 15) || !strncmp(n, "cuGraphLaunch", 13));
}

/* CUDA graph launches in the measured steps and the kernels that ran as graph nodes there
 * (a graph launch is one host call for all its kernels: kernels per launch is what a graph
 * saves), and the kernels that started after the last measured step: work no step holds (a
 * program whose steps the report did not find, or work after the loop). att: as
 * device_figures'; NULL leaves the graph kernels out. */
static void graphs_and_after(tp_gpu_result *out, const tp_process *p, const uint64_t *att,
                             const tp_step *st, size_t nst, double per) {
    uint64_t launches = 0, gk = 0;
    for (size_t i = 0; i < p->napi; i++) {
        const tp_gpu_op *a = &p->api[i];
        if (!is_graph_launch(a->name)) continue;
        if (nst && !tp_steps_overlap(st, nst, a->start, a->end > a->start ? a->end : a->start + 1))
            continue;
        launches++;
    }
    uint64_t after_ns = 0;
    size_t after = 0;
    for (size_t i = 0; i < p->ngpu; i++) {
        const tp_gpu_op *o = &p->gpu[i];
        if (o->type != TPROF_REC_GPU_KERNEL) continue;
        if (o->graph && att && att[i] != NOT_IN) gk++;
        /* a load bounded in GPU records held a span in the run's middle: its end is not
         * the run's (model.h, tp_process_load_bounded) */
        if (nst && !p->gpu_window_to && o->start >= st[nst - 1].end) {
            after++;
            after_ns += o->end - o->start;
        }
    }
    out->graph_launches = (double)launches / per;
    out->graph_kernels = (double)gk / per;
    out->kernels_after_steps = after;
    out->kernel_ms_after_steps = (double)after_ns / 1e6;
}

/* began: as cupti_overhead's (a synchronisation that began in the span blocks the host for
 * all of its time there, as its kernels' times are whole) */
static void host_side(tp_gpu_result *out, const tp_process *p, const tp_step *st, size_t nst,
                      double per, int began) {
    uint64_t nsync = 0;
    double blocked = 0;
    for (size_t i = 0; i < p->napi; i++) {
        const tp_gpu_op *a = &p->api[i];
        if (!tp_is_blocking_sync(a->name)) continue;
        uint64_t in = began ? attributed(a, a->start, st, nst)
                      : nst ? tp_steps_overlap(st, nst, a->start, a->end)
                            : a->end - a->start;
        if (in == NOT_IN) continue;
        if (nst && !in && !(a->start >= st[0].start && a->start < st[nst - 1].end)) continue;
        nsync++;
        blocked += (double)in;
    }
    /* the synchronisations are runtime-API records: without any, CUPTI's runtime kind was off
     * and their number is unknown, not 0 */
    out->has_host_syncs = p->napi > 0;
    out->host_syncs = (double)nsync / per;
    out->host_sync_blocked_ms = blocked / 1e6 / per;
}

void tp_gpu_compute(tp_gpu_result *out, const tp_process *p, const tp_step *st, size_t nst,
                    uint64_t step_ns, int top_n, const tp_capture_result *cap) {
    memset(out, 0, sizeof *out);
    if (!p->ngpu && !p->napi && !p->ngmem && !(cap->present && !cap->captured)) return;
    kernel_window(out, p, cap, nst);
    out->present = 1;
    capture_pauses(out, p);
    out->cupti_records_dropped = p->cupti_dropped;
    const char *untimed = tp_meta(p, "cupti.untimed_records"); /* left out by the capture */
    if (untimed && strtod(untimed, NULL) > 0) out->cupti_records_untimed = strtod(untimed, NULL);
    /* GPU records that stopped while the steps went on (capture.c found them) */
    out->has_records_stopped = cap->has_records_stopped;
    out->stopped_after_s = cap->stopped_after_s;
    out->stopped_span_s = cap->stopped_span_s;
    out->steps_without_gpu_records = cap->steps_without_gpu_records;
    out->stopped_cause = "another CUPTI client (torch.profiler, Nsight) took over the activity "
                         "API; GPU figures cover only the steps before";
    if (cap->present && !cap->captured) { /* measured steps, none captured: no figure */
        out->per_step = 1;
        out->not_captured = cap->not_captured;
        return;
    }
    /* No step, a load bounded in GPU records: the records held are those that began in its
     * span, and the kernels kept whole (communication) and the overhead records besides; the
     * totals are over the span, each record counted where it began, the busy share of the
     * span. */
    tp_step span = {p->gpu_window_from, p->gpu_window_to, 0, 0};
    out->in_span = !nst && p->gpu_window_to > p->gpu_window_from;
    /* its busy share is of the parts of the span in which GPU activity was recorded (a
     * pause for another CUPTI client is no idle GPU), as the step breakdown's one window */
    tp_step *parts = NULL;
    size_t nparts = 0;
    if (out->in_span) {
        st = &span;
        if (tp_capture_spans(p, span.start, span.end, &parts, &nparts) != TPROF_OK) return;
        step_ns = 0;
        for (size_t i = 0; i < nparts; i++) step_ns += parts[i].end - parts[i].start;
    }
    const tp_gpu_op **apis = tp_malloc((p->napi ? p->napi : 1) * sizeof *apis);
    if (!apis) {
        free(parts);
        return;
    }
    for (size_t i = 0; i < p->napi; i++) apis[i] = &p->api[i];
    if (p->napi > 1) qsort(apis, p->napi, sizeof *apis, by_corr);
    uint64_t lag = nst ? launch_lag(p, apis) : 0;
    double per = nst ? (double)nst : 1.0;
    out->per_step = nst > 0;
    out->steps_measured = nst;
    out->has_launch_lag = nst > 0;
    out->launch_lag_ms = (double)lag / 1e6;
    size_t nwin = out->in_span ? 1 : nst; /* the windows the records are counted in */
    cupti_overhead(out, p, st, nwin, per, out->in_span);
    /* records that contradicted their stream's order, as the loader clipped them (whole run:
     * the figures below are built on the clipped records) */
    out->records_clipped = p->nclips;
    out->records_clipped_ms = (double)p->clipped_ns / 1e6;
    kinds_seen kinds = {0, 0, cap->complete_until_ns, cap->complete_until_s};
    /* files that name the kinds CUPTI was asked for (cupti.kinds): a kind that was on and
     * left no record ran nothing, a known 0; older files: a kind with no record is unknown */
    const char *on = tp_meta(p, "cupti.kinds");
    if (on) {
        kinds.copies = kind_listed(on, "memcpy");
        kinds.memsets = kind_listed(on, "memset");
    }
    for (size_t i = 0; i < p->ngpu; i++) {
        kinds.copies |= p->gpu[i].type == TPROF_REC_GPU_MEMCPY;
        kinds.memsets |= p->gpu[i].type == TPROF_REC_GPU_MEMSET;
    }
    /* each op's ns that count for the measured steps, once for the tables below */
    uint64_t *att = tp_malloc((p->ngpu ? p->ngpu : 1) * sizeof *att);
    if (att && launch_times(p, apis, lag, att) != 0) {
        free(att);
        att = NULL;
    }
    for (size_t i = 0; att && i < p->ngpu; i++)
        att[i] = attributed(&p->gpu[i], out->in_span ? p->gpu[i].start : att[i], st, nwin);
    /* the busy share's windows: the span's captured parts, else those the records count in */
    if (att)
        device_figures(out, p, att, out->in_span ? parts : st, out->in_span ? nparts : nwin,
                       step_ns, per, kinds);
    top_kernels(out, p, att, per, top_n);
    host_side(out, p, st, nwin, per, out->in_span);
    graphs_and_after(out, p, att, st, nwin, per);
    free(att);
    free(apis);
    free(parts);
}

/* ------------------------------------------------------------------ the document */

static void overhead_json(cJSON *g, const tp_gpu_result *r) {
    cJSON *c = cJSON_AddObjectToObject(g, "cupti_overhead");
    cJSON_AddNumberToObject(c, "records", (double)r->overhead_records);
    cJSON_AddNumberToObject(c, "ms", r->overhead_ms);
    cJSON_AddNumberToObject(c, "driver_records", (double)r->overhead_driver_records);
    cJSON_AddNumberToObject(c, "driver_ms", r->overhead_driver_ms);
    cJSON *by = cJSON_AddArrayToObject(c, "by_kind");
    for (size_t k = 0; k < r->noverhead_kinds; k++) {
        const tp_gpu_overhead *o = &r->overhead_kinds[k];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", o->name);
        cJSON_AddStringToObject(e, "source", o->driver ? "driver" : "cupti");
        cJSON_AddNumberToObject(e, "ms", o->ms);
        tp_json_item_to_array(by, e);
    }
}

static void num_or_null(cJSON *o, const char *key, int known, double v) {
    if (known) cJSON_AddNumberToObject(o, key, v);
    else cJSON_AddNullToObject(o, key);
}

static void device_json(cJSON *jd, const tp_gpu_device_result *D) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "device", D->device);
    if (D->has_busy_share) cJSON_AddNumberToObject(e, "busy_share", D->busy_share);
    cJSON_AddNumberToObject(e, "busy_ms", D->busy_ms);
    cJSON_AddNumberToObject(e, "kernels", D->kernels);
    cJSON_AddNumberToObject(e, "kernel_ms", D->kernel_ms);
    cJSON *jc = cJSON_AddObjectToObject(e, "kernel_ms_by_class");
    for (int ci = 0; ci < TP_KC_COUNT; ci++)
        cJSON_AddNumberToObject(jc, tp_kernel_class_name(ci), D->kernel_ms_by_class[ci]);
    /* a kind not captured is null: unknown, not 0 */
    num_or_null(e, "memcpy_memset_ms", D->has_memcpy_memset, D->memcpy_memset_ms);
    num_or_null(e, "h2d_bytes", D->has_copies, D->h2d_bytes);
    num_or_null(e, "d2h_bytes", D->has_copies, D->d2h_bytes);
    num_or_null(e, "memory_peak_bytes", D->has_memory_peak, D->memory_peak_bytes);
    if (D->has_memory_peak_until)
        cJSON_AddNumberToObject(e, "memory_peak_until_s", D->memory_peak_until_s);
    if (D->name) cJSON_AddStringToObject(e, "name", D->name);
    if (D->uuid) cJSON_AddStringToObject(e, "uuid", D->uuid);
    if (D->has_sm_count) cJSON_AddNumberToObject(e, "sm_count", D->sm_count);
    if (D->has_capacity) {
        cJSON_AddNumberToObject(e, "memory_capacity_bytes", D->memory_capacity_bytes);
        num_or_null(e, "memory_peak_share", D->has_memory_peak, D->memory_peak_share);
    }
    cJSON *inv = NULL;
    tp_figure_invalid_json(&inv, e, "busy_share", &D->busy_share_flagged, tp_flag_reason_busy);
    tp_figure_invalid_json(&inv, e, "memory_peak_share", &D->memory_peak_flagged,
                           tp_flag_reason_mem_peak);
    tp_json_item_to_array(jd, e);
}

static void stopped_json(cJSON *g, const tp_gpu_result *r) {
    if (!r->has_records_stopped) return;
    cJSON *lost = cJSON_AddObjectToObject(g, "records_stopped");
    cJSON_AddNumberToObject(lost, "after_s", r->stopped_after_s);
    cJSON_AddNumberToObject(lost, "span_s", r->stopped_span_s);
    cJSON_AddNumberToObject(lost, "steps_without_gpu_records", (double)r->steps_without_gpu_records);
    cJSON_AddStringToObject(lost, "likely_cause", r->stopped_cause);
}

const char *tp_gpu_per(const tp_gpu_result *r) {
    return r->per_step ? "step" : r->in_span ? "span" : "run";
}

void tp_gpu_json(cJSON *rs, const tp_gpu_result *r) {
    if (!r->present) return;
    cJSON *g = cJSON_AddObjectToObject(rs, "gpu");
    if (r->has_launch_lag) cJSON_AddNumberToObject(g, "launch_lag_ms", r->launch_lag_ms);
    cJSON_AddStringToObject(g, "per", tp_gpu_per(r));
    if (r->has_kernel_steps) {
        cJSON *w = cJSON_AddObjectToObject(g, "kernel_steps");
        cJSON_AddStringToObject(w, "spec", r->kernel_steps_spec);
        cJSON_AddNumberToObject(w, "measured_steps_in_window", (double)r->kernel_steps_in_window);
        cJSON_AddNumberToObject(w, "measured_steps", (double)r->kernel_steps_measured);
        cJSON_AddBoolToObject(w, "opened", r->kernel_steps_opened);
    }
    if (r->has_pauses) {
        cJSON *a = cJSON_AddArrayToObject(g, "capture_paused");
        for (size_t i = 0; i < r->npauses; i++) {
            const tp_gpu_pause *x = &r->pauses[i];
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "from_s", x->from_s);
            cJSON_AddNumberToObject(e, "to_s", x->to_s);
            if (x->never_resumed) cJSON_AddBoolToObject(e, "never_resumed", 1);
            if (x->reason) cJSON_AddStringToObject(e, "reason", x->reason);
            tp_json_item_to_array(a, e);
        }
        if (r->pauses_more) {
            cJSON *m = cJSON_AddObjectToObject(g, "capture_paused_more");
            cJSON_AddNumberToObject(m, "pauses", (double)r->pauses_more);
            cJSON_AddNumberToObject(m, "seconds", r->pauses_more_s);
        }
    }
    if (r->not_captured) { /* measured steps, none captured: no figure is known */
        cJSON_AddStringToObject(g, "not_captured", r->not_captured);
        static const char *const none[] = {"devices", "top_kernels", "kernel_ms_total",
                                           "host_syncs", "host_sync_blocked_ms"};
        for (size_t i = 0; i < sizeof none / sizeof *none; i++) cJSON_AddNullToObject(g, none[i]);
    }
    if (r->cupti_records_dropped)
        cJSON_AddNumberToObject(g, "cupti_records_dropped", (double)r->cupti_records_dropped);
    if (r->cupti_records_untimed > 0)
        cJSON_AddNumberToObject(g, "cupti_records_untimed", r->cupti_records_untimed);
    if (r->has_overhead) overhead_json(g, r);
    if (r->records_clipped) {
        cJSON_AddNumberToObject(g, "records_clipped", (double)r->records_clipped);
        cJSON_AddNumberToObject(g, "records_clipped_ms", r->records_clipped_ms);
    }
    if (r->not_captured) {
        stopped_json(g, r);
        return;
    }
    cJSON *jd = cJSON_AddArrayToObject(g, "devices");
    for (size_t d = 0; d < r->ndevices; d++) device_json(jd, &r->devices[d]);
    cJSON *jt = cJSON_AddArrayToObject(g, "top_kernels");
    for (size_t k = 0; k < r->nkernels; k++) {
        const tp_gpu_kernel *x = &r->kernels[k];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", x->name);
        cJSON_AddStringToObject(e, "class", x->cls);
        cJSON_AddNumberToObject(e, "count_per_unit", x->count_per_unit);
        cJSON_AddNumberToObject(e, "total_ms", x->total_ms);
        cJSON_AddNumberToObject(e, "mean_us", x->mean_us);
        cJSON_AddNumberToObject(e, "share", x->share);
        tp_json_item_to_array(jt, e);
    }
    cJSON_AddNumberToObject(g, "kernel_ms_total", r->kernel_ms_total);
    stopped_json(g, r);
    num_or_null(g, "host_syncs", r->has_host_syncs, r->host_syncs);
    num_or_null(g, "host_sync_blocked_ms", r->has_host_syncs, r->host_sync_blocked_ms);
    if (r->graph_launches > 0 || r->graph_kernels > 0) {
        cJSON *jg = cJSON_AddObjectToObject(g, "cuda_graphs");
        cJSON_AddNumberToObject(jg, "launches", r->graph_launches);
        cJSON_AddNumberToObject(jg, "kernels", r->graph_kernels);
    }
    if (r->kernels_after_steps) {
        cJSON *ja = cJSON_AddObjectToObject(g, "after_last_step");
        cJSON_AddNumberToObject(ja, "kernels", (double)r->kernels_after_steps);
        cJSON_AddNumberToObject(ja, "kernel_ms", r->kernel_ms_after_steps);
    }
}
