/*
 * comm.c — the communication analysis (docs/design.md §5.2): what each communicator carried,
 * how fast, and how much of each step was communication the GPU could not hide.
 *
 * Inputs are the COMM_OP records (NCCL profiler plugin or MPI through PMPI), the CUPTI
 * kernels and the steps. Three parts:
 *
 * 1. Timing of each op (tp_comm_resolve), best first (docs/design.md §5.2): the CUPTI NCCL
 *    kernel matched to it (rule below) when that kernel runs this op alone and holds the op's
 *    kernel-channel interval (100 us slack) when there is one; the record's GPU
 *    interval (NCCL kernel-channel events); a kernel shared by a fused group; else the host
 *    interval, which for NCCL is only the enqueue and for MPI's blocking calls is the real
 *    duration. Every output says which source it used.
 *
 *    Matching rule. A kernel record does not name its communicator, but NCCL runs each
 *    communicator's work in issue order on the stream the caller gave it (PyTorch: one
 *    stream per process group and device). So, per communicator, its NCCL ops in issue order
 *    (host start) are aligned with the communication-class kernels of one (device, stream):
 *    each op takes the first kernel not yet taken that starts at or after the op's host start
 *    (work cannot start before it was issued); kernels that started earlier are skipped; if
 *    that kernel's name names another function (tokens of the name: AllReduce, AllGather,
 *    ReduceScatter, Broadcast, Reduce, SendRecv/Send/Recv, AllToAll, Gather, Scatter; a name
 *    with none of them, e.g. ncclDevKernel_Generic, fits any op) the op stays unmatched and
 *    the kernel is left for the next op. An op whose host interval overlaps the previous
 *    op's (NCCL starts and stops the events of one launch together: a group, such as a
 *    Send/Recv pair, fused into one kernel) shares that op's kernel. Each communicator takes
 *    the stream on which the most of its ops match (among equals, the one whose kernels start
 *    soonest after the issues, in sum); communicators are served in the order of their first
 *    op, and a kernel taken by one is not offered to the next.
 *
 * 2. Bandwidth per communicator and op (nccl-tests, doc/PERFORMANCE.md): algbw =
 *    S / t with S nccl-tests' "size" and GB = 1e9 bytes; busbw = algbw x factor. Over several
 *    ops, algbw = sum S / sum t (the time-weighted rate, equal to each op's when all are
 *    alike), as nccl-tests divides one size by its mean time.
 *
 * 3. Exposed vs overlapped communication per step: on each device, communication is the
 *    union of the NCCL kernels (CUPTI "communication" class, so CUDA graph replays count) and
 *    the ops' GPU intervals, plus MPI calls (the host is blocked in them); compute is the union
 *    of every other kernel on the device. Exposed = |comm \ compute|, overlapped =
 *    |comm ∩ compute|, both clipped to the step's window; with several devices the step's
 *    figure is the device with the most exposed time. Without any GPU record (a CPU/MPI job)
 *    the process is blocked in each MPI call, so all of it is exposed.
 */
#define _GNU_SOURCE
#include "analysis/comm.h"
#include "analysis/stats.h"
#include "analysis/jsonget.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "analysis/gpu.h"
#include "format/format.h"
#include "trainprof.h"

/* ------------------------------------------------------------------ names and factors */

const char *tp_comm_src_name(tp_comm_src s) {
    return s == TP_COMM_TIME_GPU ? "gpu" : s == TP_COMM_TIME_KERNEL ? "kernel" : "host";
}

const char *tp_comm_algo_name(uint32_t algo) {
    static const char *const n[] = {"unknown", "TREE", "RING", "COLLNET_DIRECT",
                                    "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
    return algo < sizeof n / sizeof *n ? n[algo] : "unknown";
}

const char *tp_comm_proto_name(uint32_t proto) {
    static const char *const n[] = {"unknown", "LL", "LL128", "SIMPLE"};
    return proto < sizeof n / sizeof *n ? n[proto] : "unknown";
}

/* nccl-tests (its src/<collective>.cu, the *GetBw functions) computes S from the count it passed to NCCL: count x size for
 * AllReduce, Broadcast, Reduce and SendRecv, count x size x n for AllGather (sendcount),
 * ReduceScatter (recvcount), AlltoAll (count per peer), Gather and Scatter (count per rank).
 * Our `bytes` is the caller's count x datatype size, and NCCL's profiler Coll descriptor
 * passes the API's count (src/collectives.cc: ncclAllGather's sendcount, ncclReduceScatter's
 * recvcount), so the same multiplication turns it into S. */
uint64_t tp_comm_size_bytes(uint32_t op, uint64_t bytes, uint32_t nranks) {
    switch (op) {
    case TPROF_COMM_ALLREDUCE:
    case TPROF_COMM_BROADCAST:
    case TPROF_COMM_REDUCE:
    case TPROF_COMM_SEND:
    case TPROF_COMM_RECV: return bytes;
    case TPROF_COMM_ALLGATHER:
    case TPROF_COMM_REDUCESCATTER:
    case TPROF_COMM_ALLTOALL:
    case TPROF_COMM_GATHER:
    case TPROF_COMM_SCATTER: return bytes * nranks;
    default: return 0;
    }
}

/* The factors of nccl-tests' *GetBw functions: AllReduceGetBw 2(n-1)/n; AllGatherGetBw,
 * ReduceScatterGetBw, AlltoAllGetBw, GatherGetBw, ScatterGetBw (n-1)/n; BroadcastGetBw,
 * ReduceGetBw, SendRecvGetBw 1. */
double tp_comm_bus_factor(uint32_t op, uint32_t nranks) {
    if (!nranks) return 0;
    double n = (double)nranks;
    switch (op) {
    case TPROF_COMM_ALLREDUCE: return 2.0 * (n - 1) / n;
    case TPROF_COMM_ALLGATHER:
    case TPROF_COMM_REDUCESCATTER:
    case TPROF_COMM_ALLTOALL:
    case TPROF_COMM_GATHER:
    case TPROF_COMM_SCATTER: return (n - 1) / n;
    case TPROF_COMM_BROADCAST:
    case TPROF_COMM_REDUCE:
    case TPROF_COMM_SEND:
    case TPROF_COMM_RECV: return 1.0;
    default: return 0;
    }
}

static const char *op_name(const tp_comm_op *o) {
    if (o->op != TPROF_COMM_UNKNOWN && o->op < TPROF_COMM_OP_COUNT)
        return tprof__comm_op_name(o->op);
    return o->name ? o->name : "Unknown";
}

/* Host-timed sources: MPI calls and torch.distributed calls of a backend that runs on the
 * host (gloo, mpi, ucc, ...) have no GPU side; their host interval is the duration. */
int tp_comm_host_timed(const tp_comm_op *o) {
    return o->source == TPROF_COMM_SRC_MPI ||
           (o->source == TPROF_COMM_SRC_TORCH && !(o->flags & TPROF_COMM_F_ENQUEUE));
}

static int is_mpi(const tp_comm_op *o) { return tp_comm_host_timed(o); }

const char *tp_comm_source_name(uint32_t source) {
    return source == TPROF_COMM_SRC_NCCL    ? "nccl"
           : source == TPROF_COMM_SRC_MPI   ? "mpi"
           : source == TPROF_COMM_SRC_TORCH ? "torch"
                                            : "unknown";
}

const char *tp_comm_backend(const tp_process *p, const tp_comm_op *o, char *buf, size_t n) {
    if (o->source != TPROF_COMM_SRC_TORCH) {
        snprintf(buf, n, "%s", tp_comm_source_name(o->source));
        return buf;
    }
    char key[40];
    snprintf(key, sizeof key, "torch.pg.%016llx", (unsigned long long)o->comm_hash);
    const char *d = tp_meta(p, key);
    if (!d || strncmp(d, "backend=", 8)) {
        snprintf(buf, n, "%s", o->flags & TPROF_COMM_F_ENQUEUE ? "nccl" : "torch");
        return buf;
    }
    const char *b = d + 8;
    size_t len = strcspn(b, " ");
    if (!memchr(b, ':', len)) { /* one backend for every device */
        snprintf(buf, n, "%.*s", (int)len, b);
        return buf;
    }
    /* "cpu:gloo,cuda:nccl": NCCL ran the device's ops (flagged enqueue), the other the rest */
    int want_nccl = (o->flags & TPROF_COMM_F_ENQUEUE) != 0;
    for (const char *e = b; e < b + len;) {
        const char *comma = memchr(e, ',', (size_t)(b + len - e));
        const char *end = comma ? comma : b + len;
        const char *colon = memchr(e, ':', (size_t)(end - e));
        if (colon) {
            size_t bl = (size_t)(end - colon - 1);
            int is_nccl = bl == 4 && !strncmp(colon + 1, "nccl", 4);
            if (is_nccl == want_nccl) {
                snprintf(buf, n, "%.*s", (int)bl, colon + 1);
                return buf;
            }
        }
        e = end + (comma ? 1 : 0);
    }
    snprintf(buf, n, "%s", want_nccl ? "nccl" : "torch");
    return buf;
}

/* ------------------------------------------------------------------ kernel matching */

enum {
    FN_ALLREDUCE = 1, FN_ALLGATHER = 2, FN_REDUCESCATTER = 4, FN_BROADCAST = 8,
    FN_REDUCE = 16, FN_SENDRECV = 32, FN_ALLTOALL = 64, FN_GATHER = 128, FN_SCATTER = 256
};

/* Function names as NCCL's kernels spell them (ncclDevKernel_AllReduce_Sum_f32_RING_LL,
 * ncclDevKernel_SendRecv, older ncclKernel_AllGather_RING_LL_Sum_int8_t). */
static const struct { const char *tok; unsigned bit; } fn_tokens[] = {
    {"AllReduce", FN_ALLREDUCE}, {"AllGather", FN_ALLGATHER}, {"ReduceScatter", FN_REDUCESCATTER},
    {"Broadcast", FN_BROADCAST}, {"Reduce", FN_REDUCE},       {"SendRecv", FN_SENDRECV},
    {"Send", FN_SENDRECV},       {"Recv", FN_SENDRECV},       {"AllToAll", FN_ALLTOALL},
    {"Gather", FN_GATHER},       {"Scatter", FN_SCATTER},
};

/* The functions a kernel name names: its alphanumeric tokens compared whole, so "Reduce"
 * is not found inside "AllReduce". 0 = none (a generic kernel). */
static unsigned kernel_fns(const char *name) {
    unsigned m = 0;
    if (!name) return 0;
    for (const char *s = name; *s;) {
        if (!isalnum((unsigned char)*s)) {
            s++;
            continue;
        }
        const char *e = s;
        while (*e && isalnum((unsigned char)*e)) e++;
        size_t len = (size_t)(e - s);
        for (size_t k = 0; k < sizeof fn_tokens / sizeof *fn_tokens; k++)
            if (strlen(fn_tokens[k].tok) == len && !strncasecmp(s, fn_tokens[k].tok, len))
                m |= fn_tokens[k].bit;
        s = e;
    }
    return m;
}

/* Kernel functions that can carry the op. NCCL builds AllToAll, Gather and Scatter from
 * point-to-point work, so a SendRecv kernel carries them. */
static unsigned op_fns(uint32_t op) {
    switch (op) {
    case TPROF_COMM_ALLREDUCE: return FN_ALLREDUCE;
    case TPROF_COMM_ALLGATHER: return FN_ALLGATHER;
    case TPROF_COMM_REDUCESCATTER: return FN_REDUCESCATTER;
    case TPROF_COMM_BROADCAST: return FN_BROADCAST;
    case TPROF_COMM_REDUCE: return FN_REDUCE;
    case TPROF_COMM_SEND:
    case TPROF_COMM_RECV: return FN_SENDRECV;
    case TPROF_COMM_ALLTOALL: return FN_ALLTOALL | FN_SENDRECV;
    case TPROF_COMM_GATHER: return FN_GATHER | FN_SENDRECV;
    case TPROF_COMM_SCATTER: return FN_SCATTER | FN_SENDRECV;
    default: return ~0u;
    }
}

static int fits(unsigned kernel, unsigned op) { return kernel == 0 || (kernel & op) != 0; }

static int is_comm_kernel(const tp_gpu_op *g) {
    return g->type == TPROF_REC_GPU_KERNEL && g->name &&
           g->cls == TP_KC_COMM;
}

typedef struct kref {
    uint64_t start;
    size_t gi; /* index in p->gpu */
    uint32_t device, stream;
    unsigned fns;
} kref;

typedef struct oref {
    uint64_t hash, start;
    size_t ci; /* index in p->comm */
} oref;

static int cmp_kref(const void *a, const void *b) {
    const kref *x = a, *y = b;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    if (x->stream != y->stream) return x->stream < y->stream ? -1 : 1;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->gi < y->gi ? -1 : x->gi > y->gi;
}

static int cmp_oref(const void *a, const void *b) {
    const oref *x = a, *y = b;
    if (x->hash != y->hash) return x->hash < y->hash ? -1 : 1;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->ci < y->ci ? -1 : x->ci > y->ci;
}

typedef struct span_ix { size_t a, b; uint64_t first; } span_ix; /* [a, b) of an array */

static int cmp_first(const void *a, const void *b) {
    const span_ix *x = a, *y = b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return x->a < y->a ? -1 : x->a > y->a;
}

/* Aligns one communicator's ops (issue order) with one stream's kernels (start order) by
 * the rule in the file comment. Returns the number of ops matched, and in *lag the sum of
 * their issue-to-kernel-start delays (ns); with `out`, records the matches and marks the
 * kernels taken. */
/* How long before an op's host start its kernel may start: NCCL starts the op's Coll event
 * after it launched the kernel, and on an idle GPU the kernel runs at once (seen 3-4 us
 * before the event's start on 2 x H200, NCCL 2.28). Without this the first op after an idle
 * spell skipped its own kernel and every later op took its successor's. */
#define ISSUE_SLACK_NS 50000u

static size_t align(const tp_process *p, const oref *ops, size_t nops, const kref *k, size_t nk,
                    uint8_t *taken, tp_comm_time *out, double *lag) {
    size_t j = 0, matched = 0, prev_k = SIZE_MAX;
    const tp_comm_op *prev = NULL;
    if (nops) { /* the first kernel that starts at or after the first issue (less the slack) */
        size_t lo = 0, hi = nk;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (k[mid].start + ISSUE_SLACK_NS < p->comm[ops[0].ci].start) lo = mid + 1;
            else hi = mid;
        }
        j = lo;
    }
    for (size_t i = 0; i < nops; i++) {
        const tp_comm_op *o = &p->comm[ops[i].ci];
        unsigned want = op_fns(o->op);
        size_t hit = SIZE_MAX;
        if (prev && prev_k != SIZE_MAX && o->start < prev->end && fits(k[prev_k].fns, want)) {
            hit = prev_k; /* enqueued in the same launch as the previous op */
        } else {
            while (j < nk && (k[j].start + ISSUE_SLACK_NS < o->start || taken[j])) j++;
            if (j == nk) break;
            if (fits(k[j].fns, want)) hit = j++;
        }
        prev = o;
        prev_k = hit;
        if (hit == SIZE_MAX) continue;
        matched++;
        *lag += (double)k[hit].start - (double)o->start;
        if (out) {
            taken[hit] = 1;
            out[ops[i].ci].kernel = k[hit].gi;
        }
    }
    return matched;
}

/* How far a kernel-channel interval may stick out of its CUPTI kernel when the placement
 * could not be checked against CUPTI (below): the plugin's calibration of the GPU timer to
 * host time was seen 3-31 us off CUPTI's placement on 2 x H200. */
#define KCH_SLACK_NS 100000u

/* Placement of the kernel-channel intervals, checked against CUPTI. The plugin maps NCCL's
 * GPU timer to host time by the smallest host-minus-GPU difference it saw; CUPTI places the
 * kernel of the same op on the host clock by its own means. Where ops have both (a matched
 * kernel that runs the op alone, and channel events), the difference of the two intervals'
 * centres is the plugin's placement error. On 2 x H200 it was 26-31 us in an all-reduce
 * loop, every op within 1.5 us of its neighbours, and 19-87 us over a DDP run on another
 * host, where it drifted by 12-14 us per second (12-14 ppm: the GPU timer and
 * CLOCK_MONOTONIC run at slightly different rates; 0.2-1 ppm on the loop's hosts). So the
 * differences are taken per device in time order, in chunks of CAL_CHUNK pairs at most and
 * CAL_CHUNK_NS at most (so the drift inside one stays under 3 us); a chunk of 3 pairs or
 * more whose median has at least half its pairs within CAL_SLACK_NS of it gives a point
 * (its middle pair's time, its median) if it follows on from its neighbours (cal_points),
 * and each op's channel interval moves by the value interpolated between the points around
 * it (beyond the ends, extrapolated along the device's drift: cal_devices). A kernel then
 * counts as holding its op's interval within CAL_SLACK_NS. */
#define CAL_SLACK_NS 10000
#define CAL_CHUNK 32
#define CAL_CHUNK_NS 200000000ull
/* the fastest drift a point may follow on with, 50 us per second: common crystal oscillators
 * are rated +-20-50 ppm, and 12-14 ppm was seen */
#define CAL_DRIFT_RATE 50e-6

/* A pair (one op: its kernel's start, its centre difference) or a point (a chunk: its
 * middle pair's time, its median difference), per device. */
typedef struct cal_pair { uint32_t device; uint64_t t; int64_t d; } cal_pair;
typedef cal_pair cal_point;

static int cmp_cal_pair(const void *a, const void *b) {
    const cal_pair *x = a, *y = b;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    return x->t < y->t ? -1 : x->t > y->t;
}

static int follows(const cal_point *last, const cal_point *c) {
    uint64_t dt = c->t > last->t ? c->t - last->t : last->t - c->t;
    return (double)llabs(c->d - last->d) <= CAL_SLACK_NS + CAL_DRIFT_RATE * (double)dt;
}

/* The points of the pairs v[0..n) (sorted by device, then time) into pts; returns how many
 * (0 when out of memory: no placement check, the old slack applies). A stretch of wrong
 * matches (each op given its successor's kernel, as after CUPTI lost a record) with evenly
 * spaced kernels looks like a steady placement error too, off by the spacing: so the points
 * must also follow on from each other. The walk starts at the point nearest the median of
 * all the device's pairs (most matches are right) and goes both ways, keeping a point only
 * when it is within CAL_SLACK_NS plus CAL_DRIFT_RATE times the time between them of the
 * last one kept. */
static size_t cal_points(const cal_pair *v, size_t n, cal_point *pts) {
    size_t np = 0;
    int64_t *tmp = malloc((n ? n : 1) * sizeof *tmp);
    cal_point *cand = malloc((n ? n : 1) * sizeof *cand);
    if (!tmp || !cand) {
        free(tmp);
        free(cand);
        return 0;
    }
    for (size_t a = 0; a < n;) {
        size_t e = a, nc = 0;
        while (e < n && v[e].device == v[a].device) e++;
        for (size_t c0 = a, c1; c0 < e; c0 = c1) {
            c1 = c0 + 1;
            while (c1 < e && c1 - c0 < CAL_CHUNK && v[c1].t - v[c0].t <= CAL_CHUNK_NS) c1++;
            size_t m = c1 - c0;
            if (m < 3) continue;
            for (size_t i = 0; i < m; i++) tmp[i] = v[c0 + i].d;
            qsort(tmp, m, sizeof *tmp, tp_cmp_i64);
            int64_t med = tmp[m / 2];
            size_t near = 0;
            for (size_t i = 0; i < m; i++) near += llabs(tmp[i] - med) <= CAL_SLACK_NS;
            if (2 * near >= m) cand[nc++] = (cal_point){v[a].device, v[c0 + m / 2].t, med};
        }
        if (nc) {
            const size_t len = e - a;
            for (size_t i = 0; i < len; i++) tmp[i] = v[a + i].d;
            qsort(tmp, len, sizeof *tmp, tp_cmp_i64);
            const int64_t all = tmp[len / 2];
            size_t anchor = 0;
            for (size_t c = 1; c < nc; c++)
                if (llabs(cand[c].d - all) < llabs(cand[anchor].d - all)) anchor = c;
            uint8_t *keep = (uint8_t *)tmp; /* tmp is free again, and n >= nc bytes */
            memset(keep, 0, nc);
            keep[anchor] = 1;
            const cal_point *last = &cand[anchor];
            for (size_t c = anchor + 1; c < nc; c++)
                if (follows(last, &cand[c])) keep[c] = 1, last = &cand[c];
            last = &cand[anchor];
            for (size_t c = anchor; c-- > 0;)
                if (follows(last, &cand[c])) keep[c] = 1, last = &cand[c];
            for (size_t c = 0; c < nc; c++)
                if (keep[c]) pts[np++] = cand[c];
        }
        a = e;
    }
    free(tmp);
    free(cand);
    return np;
}

/* One device's points: pts[a, b) in time order, and the least-squares slope of the error
 * against time over them, used beyond the ends (0 when the points span under CAL_SPAN_NS or
 * the slope is beyond CAL_MAX_RATE: no clock pair drifts that fast). On 2 x H200 a DDP run
 * drifted by 12 and 14 us per second (12-14 ppm) on its two ranks, steadily: with the
 * points of the run's first half, the slope's line met the second half's errors within
 * 1.3 us, where the last point's value was 15-17 us off by the end. */
#define CAL_SPAN_NS 500000000ull
#define CAL_MAX_RATE 1e-4

typedef struct cal_dev { uint32_t device; size_t a, b; double slope; } cal_dev;

static size_t cal_devices(const cal_point *pts, size_t np, cal_dev *devs) {
    size_t nd = 0;
    for (size_t a = 0; a < np;) {
        size_t b = a;
        while (b < np && pts[b].device == pts[a].device) b++;
        double slope = 0;
        if (b - a >= 2 && pts[b - 1].t - pts[a].t >= CAL_SPAN_NS) {
            double mt = 0, md = 0, stt = 0, std = 0;
            for (size_t i = a; i < b; i++) {
                mt += (double)(pts[i].t - pts[a].t);
                md += (double)pts[i].d;
            }
            mt /= (double)(b - a);
            md /= (double)(b - a);
            for (size_t i = a; i < b; i++) {
                double x = (double)(pts[i].t - pts[a].t) - mt;
                stt += x * x;
                std += x * ((double)pts[i].d - md);
            }
            slope = stt > 0 ? std / stt : 0;
            if (fabs(slope) > CAL_MAX_RATE) slope = 0;
        }
        devs[nd++] = (cal_dev){pts[a].device, a, b, slope};
        a = b;
    }
    return nd;
}

/* The placement error at time t on a device: interpolated between the points around t,
 * extrapolated along the device's slope beyond them (0 and *known = 0 when the device has
 * no point). O(log n). */
static int64_t cal_at(const cal_point *pts, const cal_dev *devs, size_t nd, uint32_t device,
                      uint64_t t, int *known) {
    const cal_dev *dv = NULL;
    for (size_t i = 0; i < nd && !dv; i++)
        if (devs[i].device == device) dv = &devs[i];
    *known = dv != NULL;
    if (!dv) return 0;
    size_t lo = dv->a, hi = dv->b; /* the first point after t */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pts[mid].t <= t) lo = mid + 1;
        else hi = mid;
    }
    const cal_point *first = &pts[dv->a], *last = &pts[dv->b - 1];
    if (lo == dv->a) return first->d - (int64_t)llround(dv->slope * (double)(first->t - t));
    if (lo == dv->b) return last->d + (int64_t)llround(dv->slope * (double)(t - last->t));
    const cal_point *p0 = &pts[lo - 1], *p1 = &pts[lo];
    double f = (double)(t - p0->t) / (double)(p1->t - p0->t);
    return p0->d + (int64_t)llround(f * (double)(p1->d - p0->d));
}

int tp_comm_resolve(const tp_process *p, tp_comm_time *out) {
    for (size_t i = 0; i < p->ncomm; i++)
        out[i] = (tp_comm_time){p->comm[i].start, p->comm[i].end, TP_COMM_TIME_HOST, SIZE_MAX, -1, 0, 0};
    if (!p->ncomm) return TPROF_OK;
    int rc = TPROF_OK;
    size_t nk = 0, no = 0;
    for (size_t i = 0; i < p->ngpu; i++) nk += is_comm_kernel(&p->gpu[i]);
    for (size_t i = 0; i < p->ncomm; i++) no += !is_mpi(&p->comm[i]);
    kref *k = malloc((nk ? nk : 1) * sizeof *k);
    uint8_t *taken = calloc(nk ? nk : 1, 1);
    oref *o = malloc((no ? no : 1) * sizeof *o);
    span_ix *streams = malloc((nk ? nk : 1) * sizeof *streams);
    span_ix *comms = malloc((no ? no : 1) * sizeof *comms);
    if (!k || !taken || !o || !streams || !comms) {
        rc = TPROF_ERR_NO_MEMORY;
        goto done;
    }
    nk = 0;
    for (size_t i = 0; i < p->ngpu; i++)
        if (is_comm_kernel(&p->gpu[i]))
            k[nk++] = (kref){p->gpu[i].start, i, p->gpu[i].device, p->gpu[i].stream,
                             kernel_fns(p->gpu[i].name)};
    no = 0;
    for (size_t i = 0; i < p->ncomm; i++)
        if (!is_mpi(&p->comm[i])) o[no++] = (oref){p->comm[i].comm_hash, p->comm[i].start, i};
    if (nk > 1) qsort(k, nk, sizeof *k, cmp_kref);
    if (no > 1) qsort(o, no, sizeof *o, cmp_oref);
    size_t ns = 0, nc = 0;
    for (size_t i = 0; i < nk; i++) {
        if (i && k[i].device == k[i - 1].device && k[i].stream == k[i - 1].stream) continue;
        if (ns) streams[ns - 1].b = i;
        streams[ns++] = (span_ix){i, nk, k[i].start};
    }
    for (size_t i = 0; i < no; i++) {
        if (i && o[i].hash == o[i - 1].hash) continue;
        if (nc) comms[nc - 1].b = i;
        comms[nc++] = (span_ix){i, no, o[i].start};
    }
    if (nc > 1) qsort(comms, nc, sizeof *comms, cmp_first);
    for (size_t c = 0; c < nc && ns; c++) {
        size_t best = 0, best_s = 0;
        double best_lag = 0, lag;
        for (size_t s = 0; s < ns; s++) {
            lag = 0;
            size_t m = align(p, o + comms[c].a, comms[c].b - comms[c].a, k + streams[s].a,
                             streams[s].b - streams[s].a, taken + streams[s].a, NULL, &lag);
            /* most matches; among equals, the stream whose kernels follow the issues soonest */
            if (m > best || (m == best && m && lag < best_lag)) {
                best = m;
                best_s = s;
                best_lag = lag;
            }
        }
        if (best) {
            align(p, o + comms[c].a, comms[c].b - comms[c].a, k + streams[best_s].a,
                  streams[best_s].b - streams[best_s].a, taken + streams[best_s].a, out, &lag);
            /* the communicator's ops ran on that stream's device, matched or not */
            for (size_t i = comms[c].a; i < comms[c].b; i++)
                out[o[i].ci].device = (int32_t)k[streams[best_s].a].device;
        }
    }
done:;
    /* the process's one device, when its kernels name only one: where its ops ran */
    int32_t single = -1;
    for (size_t i = 0; i < p->ngpu; i++) {
        if (p->gpu[i].type != TPROF_REC_GPU_KERNEL) continue;
        if (single == -1) single = (int32_t)p->gpu[i].device;
        else if ((uint32_t)single != p->gpu[i].device) { single = -2; break; }
    }
    /* ops per matched kernel: a kernel that runs several ops (a group fused into one
     * launch) times none of them alone (without memory, none counts as alone) */
    uint8_t *uses = calloc(p->ngpu ? p->ngpu : 1, 1);
    for (size_t i = 0; uses && i < p->ncomm; i++)
        if (out[i].kernel < p->ngpu && uses[out[i].kernel] < 2) uses[out[i].kernel]++;
    /* the channel intervals' placement against the kernels that run one op each */
    cal_pair *pairs = uses ? malloc(p->ncomm * sizeof *pairs) : NULL;
    cal_point *pts = pairs ? malloc(p->ncomm * sizeof *pts) : NULL;
    cal_dev *devs = pts ? malloc(p->ncomm * sizeof *devs) : NULL;
    size_t npair = 0, npts = 0, ndevs = 0;
    for (size_t i = 0; devs && i < p->ncomm; i++) {
        const tp_comm_op *op = &p->comm[i];
        size_t ki = out[i].kernel;
        if (is_mpi(op) || ki == SIZE_MAX || uses[ki] != 1 || !(op->flags & TPROF_COMM_F_GPU_TIME) ||
            op->gpu_end < op->gpu_start)
            continue;
        const tp_gpu_op *kr = &p->gpu[ki];
        /* centres, halved first: no overflow */
        int64_t d = ((int64_t)(op->gpu_start / 2 + op->gpu_end / 2) - (int64_t)(kr->start / 2 + kr->end / 2));
        pairs[npair++] = (cal_pair){kr->device, kr->start, d};
    }
    if (npair > 1) qsort(pairs, npair, sizeof *pairs, cmp_cal_pair);
    if (devs) {
        npts = cal_points(pairs, npair, pts);
        ndevs = cal_devices(pts, npts, devs);
    }
    for (size_t i = 0; i < p->ncomm; i++) {
        const tp_comm_op *op = &p->comm[i];
        tp_comm_time *t = &out[i];
        if (is_mpi(op)) continue; /* host time is the duration; no device */
        if (t->kernel != SIZE_MAX) t->device = (int32_t)p->gpu[t->kernel].device;
        else if (single >= 0) t->device = single;
        int channels = (op->flags & TPROF_COMM_F_GPU_TIME) != 0;
        int kernel = t->kernel != SIZE_MAX;
        uint64_t g0 = op->gpu_start, g1 = op->gpu_end, slack = KCH_SLACK_NS;
        if (channels && t->device >= 0) {
            int known = 0;
            int64_t d = cal_at(pts, devs, ndevs, (uint32_t)t->device, g0, &known);
            if (known && (d < 0 || (uint64_t)d <= g0)) {
                g0 = (uint64_t)((int64_t)g0 - d);
                g1 = (uint64_t)((int64_t)g1 - d);
                t->shift_ns = d;
                t->checked = 1;
                slack = CAL_SLACK_NS;
            }
        }
        if (kernel && channels) {
            /* CUPTI's record of the op's own kernel comes first (docs/design.md §5.2): the channel
             * interval starts ~3 us into the kernel. It counts only when the kernel runs this
             * op alone and holds its (placement-checked) channel interval; one that does not
             * is a wrong match (order-based matching shifts when CUPTI dropped records) */
            const tp_gpu_op *kr = &p->gpu[t->kernel];
            kernel = uses && uses[t->kernel] == 1 && kr->start <= g0 + slack && kr->end + slack >= g1;
        }
        if (kernel) {
            t->start = p->gpu[t->kernel].start;
            t->end = p->gpu[t->kernel].end;
            t->src = TP_COMM_TIME_KERNEL;
        } else if (channels) {
            t->start = g0;
            t->end = g1;
            t->src = TP_COMM_TIME_GPU;
        }
    }
    free(pairs);
    free(pts);
    free(devs);
    free(uses);
    free(k);
    free(taken);
    free(o);
    free(streams);
    free(comms);
    return rc;
}

/* ------------------------------------------------------------------ small helpers */

static void hex_id(char *buf, size_t n, uint64_t h) {
    snprintf(buf, n, "0x%016" PRIx64, h);
}

static int push_span(tp_span **v, size_t *n, size_t *cap, uint64_t s, uint64_t e) {
    if (e <= s) return 0;
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 256;
        tp_span *nv = realloc(*v, nc * sizeof *nv);
        if (!nv) return -1;
        *v = nv;
        *cap = nc;
    }
    (*v)[(*n)++] = (tp_span){s, e};
    return 0;
}

/* ------------------------------------------------------------------ per-rank table */

typedef tp_comm_row_result row;

static int cmp_row(const void *a, const void *b) {
    const row *x = a, *y = b;
    if (x->hash != y->hash) return x->hash < y->hash ? -1 : 1;
    if (x->op != y->op) return x->op < y->op ? -1 : 1;
    return strcmp(x->name, y->name);
}

typedef struct cref { size_t a, b; double time_ns; uint64_t hash; } cref;

static int cmp_cref(const void *a, const void *b) {
    const cref *x = a, *y = b;
    if (x->time_ns != y->time_ns) return x->time_ns < y->time_ns ? 1 : -1;
    return x->hash < y->hash ? -1 : x->hash > y->hash;
}

int tp_comm_row_bw(const tp_comm_row_result *r, double *algbw_gbs, double *bw_time_ms) {
    double factor = tp_comm_bus_factor(r->op, r->nranks);
    if (!(r->bw_ns && r->bw_size > 0 && factor > 0)) {
        *algbw_gbs = *bw_time_ms = 0;
        return 0;
    }
    *algbw_gbs = r->bw_size / (double)r->bw_ns; /* bytes per ns = GB/s (GB = 1e9) */
    *bw_time_ms = (double)r->bw_ns / 1e6;
    return 1;
}

static const char *time_source(const double src[3]) {
    int kinds = (src[0] > 0) + (src[1] > 0) + (src[2] > 0);
    return kinds > 1                       ? "mixed"
           : src[TP_COMM_TIME_GPU] > 0    ? "gpu"
           : src[TP_COMM_TIME_KERNEL] > 0 ? "kernel"
                                          : "host";
}

static cJSON *row_json(const row *r, size_t nst) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "op", r->name);
    cJSON_AddNumberToObject(e, "count", (double)r->count);
    cJSON_AddNumberToObject(e, "bytes", (double)r->bytes);
    if (r->dtypes) /* the element type, when the source said (NCCL does) */
        cJSON_AddStringToObject(
            e, "datatype",
            r->dtypes & (r->dtypes - 1) ? "mixed"
                                        : tprof__comm_dtype_name((uint32_t)__builtin_ctz(r->dtypes)));
    cJSON_AddNumberToObject(e, "timed", (double)r->timed);
    cJSON_AddNumberToObject(e, "time_ms", (double)r->time_ns / 1e6);
    if (r->timed) cJSON_AddNumberToObject(e, "mean_us", (double)r->time_ns / 1e3 / (double)r->timed);
    double factor = tp_comm_bus_factor(r->op, r->nranks);
    cJSON_AddNumberToObject(e, "bus_factor", factor);
    double algbw, bw_ms;
    if (tp_comm_row_bw(r, &algbw, &bw_ms)) {
        cJSON_AddNumberToObject(e, "algbw_gbs", algbw);
        cJSON_AddNumberToObject(e, "busbw_gbs", algbw * factor);
        cJSON_AddNumberToObject(e, "bw_ops", (double)r->bw_ops);
        cJSON_AddNumberToObject(e, "bw_time_ms", bw_ms);
    }
    const double src[3] = {(double)r->src[0], (double)r->src[1], (double)r->src[2]};
    cJSON_AddStringToObject(e, "time_source", time_source(src));
    cJSON *s = cJSON_AddObjectToObject(e, "time_sources");
    for (int k = 2; k >= 0; k--) cJSON_AddNumberToObject(s, tp_comm_src_name((tp_comm_src)k), (double)r->src[k]);
    if (r->enqueue_only) cJSON_AddNumberToObject(e, "enqueue_only", (double)r->enqueue_only);
    if (r->unfinished) cJSON_AddNumberToObject(e, "unfinished", (double)r->unfinished);
    if (nst) {
        cJSON_AddNumberToObject(e, "count_per_step", (double)r->in_steps / (double)nst);
        cJSON_AddNumberToObject(e, "bytes_per_step", (double)r->bytes_in_steps / (double)nst);
    }
    return e;
}
/* Rows per (communicator, op) from the resolved ops. Returns the rows (caller frees) or NULL
 * when out of memory; *nrows gets their number. */
static row *build_rows(const tp_process *p, const tp_comm_time *tm, const tp_step *st,
                       size_t nst, size_t *nrows) {
    row *v = malloc((p->ncomm ? p->ncomm : 1) * sizeof *v);
    if (!v) return NULL;
    for (size_t i = 0; i < p->ncomm; i++) {
        const tp_comm_op *o = &p->comm[i];
        row *r = &v[i];
        memset(r, 0, sizeof *r);
        r->hash = o->comm_hash;
        r->op = o->op < TPROF_COMM_OP_COUNT ? o->op : TPROF_COMM_UNKNOWN;
        r->name = op_name(o);
        r->nranks = o->nranks;
        r->rank = o->rank;
        r->first = o->start;
        r->op0 = i;
        r->count = 1;
        r->bytes = o->bytes;
        r->dtypes = o->dtype && o->dtype < TPROF_DTYPE_COUNT ? 1u << o->dtype : 0;
        /* an op never stopped has no real end unless the GPU side gave one */
        int untimed = (o->flags & TPROF_COMM_F_UNFINISHED) && tm[i].src == TP_COMM_TIME_HOST;
        r->unfinished = untimed;
        if (!untimed) {
            r->timed = 1;
            r->time_ns = tm[i].end - tm[i].start;
            r->src[tm[i].src] = 1;
            r->enqueue_only = !is_mpi(o) && tm[i].src == TP_COMM_TIME_HOST;
            if (!r->enqueue_only) { /* an enqueue says nothing about the transfer's speed */
                r->bw_ops = 1;
                r->bw_ns = r->time_ns;
                r->bw_size = (double)tp_comm_size_bytes(r->op, o->bytes, o->nranks);
            }
        }
        if (nst && tp_steps_overlap(st, nst, o->start, o->start + 1)) {
            r->in_steps = 1;
            r->bytes_in_steps = o->bytes;
        }
    }
    if (p->ncomm > 1) qsort(v, p->ncomm, sizeof *v, cmp_row);
    size_t n = 0;
    for (size_t i = 0; i < p->ncomm; i++) {
        row *r = &v[i];
        if (n && v[n - 1].hash == r->hash && v[n - 1].op == r->op && !strcmp(v[n - 1].name, r->name)) {
            row *d = &v[n - 1];
            if (r->first < d->first) d->first = r->first;
            if (r->nranks > d->nranks) d->nranks = r->nranks;
            d->count += r->count;
            d->bytes += r->bytes;
            d->timed += r->timed;
            d->unfinished += r->unfinished;
            d->enqueue_only += r->enqueue_only;
            d->in_steps += r->in_steps;
            d->bytes_in_steps += r->bytes_in_steps;
            d->time_ns += r->time_ns;
            d->bw_ops += r->bw_ops;
            d->bw_ns += r->bw_ns;
            d->bw_size += r->bw_size;
            for (int k = 0; k < 3; k++) d->src[k] += r->src[k];
            d->dtypes |= r->dtypes;
        } else {
            v[n++] = *r;
        }
    }
    *nrows = n;
    return v;
}

/* ------------------------------------------------------------------ exposure */

/* Exposed and overlapped communication per window (measured step, or the whole run) into *x. */
static void exposure_compute(tp_comm_exposure_result *x, const tp_process *p, const tp_comm_time *tm,
                             const tp_step *st, size_t nst) {
    x->present = 1;
    tp_step whole = {p->first_ts, p->end_mono, 0, 0};
    const tp_step *win = nst ? st : &whole;
    size_t nw = nst ? nst : (p->end_mono > p->first_ts ? 1 : 0);
    x->per_step = nst > 0;
    uint32_t *devs = x->devices;
    size_t ndev = 0;
    for (size_t i = 0; i < p->ngpu; i++) {
        if (p->gpu[i].type != TPROF_REC_GPU_KERNEL) continue;
        size_t k = 0;
        while (k < ndev && devs[k] != p->gpu[i].device) k++;
        if (k == ndev && ndev < 64) devs[ndev++] = p->gpu[i].device;
    }
    size_t nmpi = 0, ngpu_time = 0;
    for (size_t i = 0; i < p->ncomm; i++) {
        nmpi += is_mpi(&p->comm[i]);
        ngpu_time += tm[i].src != TP_COMM_TIME_HOST && !is_mpi(&p->comm[i]);
    }
    int comm_kernels = 0;
    for (size_t i = 0; i < p->ngpu && !comm_kernels; i++) comm_kernels = is_comm_kernel(&p->gpu[i]);
    const char *basis, *note;
    if (ndev && !comm_kernels && !ngpu_time && !nmpi) {
        basis = "none";
        note = "NCCL ops with only host enqueue times and no NCCL kernel in the CUPTI records: "
               "the time on the GPU is unknown";
    } else if (ndev) {
        basis = "gpu";
        note = nmpi ? "communication = NCCL kernels (CUPTI; the ops' GPU intervals on a device "
                      "without them), and MPI calls (the host is blocked in them); compute = "
                      "every other kernel on the device"
                    : "communication = NCCL kernels (CUPTI; the ops' GPU intervals on a device "
                      "without them); compute = every other kernel on the device";
    } else if (nmpi) {
        basis = "host";
        note = "no GPU records: a CPU job; communication = the MPI and torch.distributed calls "
               "(gloo, mpi, ...) with nonblocking ones from issue to observed completion; "
               "exposed = the time the host was blocked in a call or a wait, overlapped = the "
               "rest, when it was free to compute";
    } else {
        basis = "none";
        note = ngpu_time ? "NCCL GPU intervals but no CUPTI kernel records: what ran beside them "
                           "is unknown, so no split is made"
                         : "only the host enqueue times of NCCL ops (no GPU interval, no CUPTI "
                           "kernels): the time on the GPU is unknown";
    }
    x->basis = basis;
    x->note = note;
    if (!strcmp(basis, "none") || !nw) return;
    x->ndevices = ndev;

    size_t nd = ndev ? ndev : 1; /* host basis: one "device", the process */
    uint64_t *cw = calloc(nw * 3, sizeof *cw);     /* per window: comm, compute, union */
    uint64_t *ex = calloc(nw, sizeof *ex), *ov = calloc(nw, sizeof *ov), *cm = calloc(nw, sizeof *cm);
    double *tmp = malloc(nw * sizeof *tmp);
    uint8_t *cls = malloc(p->ngpu ? p->ngpu : 1); /* 1 communication kernel, 2 compute kernel */
    tp_span *sc = NULL, *sk = NULL, *su = NULL;
    size_t nsc = 0, csc = 0, nsk = 0, csk = 0, nsu = 0, csu = 0;
    int oom = !cw || !ex || !ov || !cm || !tmp || !cls;
    for (size_t i = 0; !oom && i < p->ngpu; i++)
        cls[i] = p->gpu[i].type != TPROF_REC_GPU_KERNEL ? 0 : is_comm_kernel(&p->gpu[i]) ? 1 : 2;
    int first = 1;
    for (size_t d = 0; d < nd && !oom; d++) {
        nsc = nsk = nsu = 0;
        for (size_t i = 0; ndev && i < p->ngpu && !oom; i++) {
            if (cls[i] != 2 || p->gpu[i].device != devs[d]) continue;
            oom |= push_span(&sk, &nsk, &csk, p->gpu[i].start, p->gpu[i].end);
        }
        if (!oom) oom |= tp_comm_device_spans(p, tm, ndev > 0, ndev ? devs[d] : 0, &sc, &nsc, &csc);
        for (size_t i = 0; i < nsc && !oom; i++) oom |= push_span(&su, &nsu, &csu, sc[i].s, sc[i].e);
        for (size_t i = 0; i < nsk && !oom; i++) oom |= push_span(&su, &nsu, &csu, sk[i].s, sk[i].e);
        if (oom) break;
        if (!ndev) {
            /* Host basis: the process is blocked in the blocking calls and the waits (sc:
             * exposed); the nonblocking ops in flight (an MPI I* op, an async torch
             * collective, DDP's bucket all-reduces: call to observed completion) are
             * communication too, but the host was free to compute meanwhile: overlapped,
             * except where it also waited. */
            for (size_t i = 0; i < p->ncomm && !oom; i++) {
                const tp_comm_op *o = &p->comm[i];
                if (is_mpi(o) && (o->flags & TPROF_COMM_F_NONBLOCKING) &&
                    !(o->flags & TPROF_COMM_F_UNFINISHED))
                    oom |= push_span(&su, &nsu, &csu, o->start, o->end);
            }
            if (oom) break;
            tp_steps_union_each(sc, nsc, win, nw, ex);
            tp_steps_union_each(su, nsu, win, nw, cm);
            for (size_t w = 0; w < nw; w++) ov[w] = cm[w] > ex[w] ? cm[w] - ex[w] : 0;
            break;
        }
        tp_steps_union_each(sc, nsc, win, nw, cw);
        tp_steps_union_each(sk, nsk, win, nw, cw + nw);
        tp_steps_union_each(su, nsu, win, nw, cw + 2 * nw);
        for (size_t w = 0; w < nw; w++) {
            uint64_t e = cw[2 * nw + w] - cw[nw + w]; /* |C ∪ K| - |K| = |C \ K| */
            uint64_t o = cw[w] - e;                  /* |C ∩ K| */
            if (first || e > ex[w]) {
                ex[w] = e;
                ov[w] = o;
                cm[w] = cw[w];
            }
        }
        first = 0;
    }
    if (!oom) {
        uint64_t tot_w = 0, tot_e = 0, tot_o = 0;
        size_t worst = 0;
        double worst_share = -1;
        for (size_t w = 0; w < nw; w++) {
            uint64_t len = win[w].end - win[w].start;
            tot_w += len;
            tot_e += ex[w];
            tot_o += ov[w];
            double sh = len ? (double)ex[w] / (double)len : 0;
            if (sh > worst_share) {
                worst_share = sh;
                worst = w;
            }
        }
        x->has_figures = 1;
        x->windows = nw;
        x->window_ms = (double)tot_w / 1e6 / (double)nw;
        const struct { tp_stat5 *out; const uint64_t *v; } series[3] = {
            {&x->comm_ms, cm}, {&x->exposed_ms, ex}, {&x->overlapped_ms, ov}};
        for (int s = 0; s < 3; s++) {
            for (size_t w = 0; w < nw; w++) tmp[w] = (double)series[s].v[w] / 1e6;
            *series[s].out = tp_stat5_of(tmp, nw);
        }
        x->exposed_share = tot_w ? (double)tot_e / (double)tot_w : 0;
        x->overlapped_share = tot_w ? (double)tot_o / (double)tot_w : 0;
        for (size_t w = 0; w < nw; w++) {
            uint64_t len = win[w].end - win[w].start;
            tmp[w] = len ? (double)ex[w] / (double)len : 0;
        }
        x->exposed_share_per_window = tp_stat5_of(tmp, nw);
        x->has_worst_step = nst > 0;
        if (nst) x->worst_step = (double)st[worst].app_step;
    }
    free(cw);
    free(ex);
    free(ov);
    free(cm);
    free(tmp);
    free(cls);
    free(sc);
    free(sk);
    free(su);
}

/* {"mean","p50","max"} of a per-window series */
static cJSON *stats_json(const tp_stat5 *s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "mean", s->mean);
    cJSON_AddNumberToObject(o, "p50", s->p50);
    cJSON_AddNumberToObject(o, "max", s->max);
    return o;
}

static void exposure_json(cJSON *c, const tp_comm_exposure_result *x) {
    cJSON *j = cJSON_AddObjectToObject(c, "exposure");
    cJSON_AddStringToObject(j, "per", x->per_step ? "step" : "run");
    cJSON_AddStringToObject(j, "basis", x->basis);
    cJSON_AddStringToObject(j, "note", x->note);
    if (x->ndevices) {
        cJSON *jd = cJSON_AddArrayToObject(j, "devices");
        for (size_t d = 0; d < x->ndevices; d++)
            cJSON_AddItemToArray(jd, cJSON_CreateNumber(x->devices[d]));
    }
    if (!x->has_figures) return;
    cJSON_AddNumberToObject(j, "windows", (double)x->windows);
    cJSON_AddNumberToObject(j, "window_ms", x->window_ms);
    cJSON_AddItemToObject(j, "comm_ms", stats_json(&x->comm_ms));
    cJSON_AddItemToObject(j, "exposed_ms", stats_json(&x->exposed_ms));
    cJSON_AddItemToObject(j, "overlapped_ms", stats_json(&x->overlapped_ms));
    cJSON_AddNumberToObject(j, "exposed_share", x->exposed_share);
    cJSON_AddNumberToObject(j, "overlapped_share", x->overlapped_share);
    cJSON_AddItemToObject(j, "exposed_share_per_window", stats_json(&x->exposed_share_per_window));
    if (x->has_worst_step) cJSON_AddNumberToObject(j, "worst_step", x->worst_step);
}

int tp_comm_is_kernel(const tp_gpu_op *g) { return is_comm_kernel(g); }

int tp_comm_device_spans(const tp_process *p, const tp_comm_time *tm, int has_device,
                         uint32_t device, tp_span **v, size_t *n, size_t *cap) {
    size_t n0 = *n;
    for (size_t i = 0; has_device && i < p->ngpu; i++) {
        if (p->gpu[i].device != device || !is_comm_kernel(&p->gpu[i])) continue;
        if (push_span(v, n, cap, p->gpu[i].start, p->gpu[i].end)) return -1;
    }
    /* The ops' own GPU intervals count only on a device without CUPTI NCCL kernels:
     * they come from NCCL's globaltimer, mapped onto the host clock by calibration, while
     * CUPTI's kernels share one clock with the compute kernels they are compared with
     * (on an H200 the two placements differed by ~29 us, a constant; durations by ~3 us). */
    int cupti_comm = *n > n0;
    for (size_t i = 0; i < p->ncomm; i++) {
        const tp_comm_op *o = &p->comm[i];
        if (is_mpi(o)) {
            /* blocking calls and waits: the host was blocked; a nonblocking op's span
             * (start to observed completion) was free time, its Wait counts instead */
            if (!(o->flags & (TPROF_COMM_F_UNFINISHED | TPROF_COMM_F_NONBLOCKING)) &&
                push_span(v, n, cap, o->start, o->end))
                return -1;
        } else if (has_device && !cupti_comm && tm[i].src == TP_COMM_TIME_GPU &&
                   tm[i].device >= 0 && (uint32_t)tm[i].device == device) {
            if (push_span(v, n, cap, tm[i].start, tm[i].end)) return -1;
        }
    }
    return 0;
}

/* The torch.distributed process group a communicator serves (docs/python.md, "NCCL and
 * torch records"): trainprof.torch writes `torch.pg.<id>` = "backend=B size=N ranks=..."
 * for each group it saw, id = the hash its own records carry. A torch-recorded communicator
 * has that id. An NCCL communicator (whose ops torch does not record, so nothing counts
 * twice) gets the one NCCL group of its size, when exactly one has that size. */
/* Whether a torch.pg.* description names an NCCL backend ("backend=nccl ...", or
 * "backend=cpu:gloo,cuda:nccl ..." for a default group). */
static int nccl_backend(const char *desc) {
    if (strncmp(desc, "backend=", 8)) return 0;
    const char *sp = strchr(desc, ' '), *nc = strstr(desc, "nccl");
    return sp && nc && nc < sp;
}


static const char *torch_group(const tp_process *p, uint64_t hash, uint32_t size, int nccl) {
    char key[40];
    snprintf(key, sizeof key, "torch.pg.%016llx", (unsigned long long)hash);
    const char *d = tp_meta(p, key);
    if (!d && nccl) {
        /* the process's groups with an NCCL backend ("nccl", or "cpu:gloo,cuda:nccl" for a
         * default group) of this size */
        char want[32];
        snprintf(want, sizeof want, " size=%u ", size);
        size_t hits = 0;
        for (size_t i = 0; i < p->nmeta; i++) {
            const tp_kv *kv = &p->meta[i];
            if (strncmp(kv->key, "torch.pg.", 9) || !nccl_backend(kv->value)) continue;
            if (strncmp(strchr(kv->value, ' '), want, strlen(want))) continue;
            if (d && !strcmp(d, kv->value)) continue; /* the same group written again */
            d = kv->value;
            hits++;
        }
        if (hits != 1) d = NULL;
    }
    return d;
}

/* How far the kernel-channel intervals moved to agree with CUPTI (tp_comm_resolve): the
 * median, least and most shift over the ops checked, in us; nothing when none was. */
static void placement(tp_comm_result *c, const tp_process *p, const tp_comm_time *tm) {
    size_t n = 0;
    double *v = malloc((p->ncomm ? p->ncomm : 1) * sizeof *v);
    if (!v) return;
    for (size_t i = 0; i < p->ncomm; i++)
        if (tm[i].checked) v[n++] = (double)tm[i].shift_ns / 1e3;
    if (n) {
        qsort(v, n, sizeof *v, tp_cmp_double);
        c->has_placement = 1;
        c->placement_ops = (double)n;
        c->shift_us_p50 = tp_pct_double(v, n, 0.5);
        c->shift_us_min = v[0];
        c->shift_us_max = v[n - 1];
    }
    free(v);
}

/* The communicators of the rank from its rows (sorted by communicator), most time first. */
static void communicators(tp_comm_result *c, const tp_process *p) {
    const row *rows = c->rows;
    size_t nrows = c->nrows;
    cref *cs = malloc((nrows ? nrows : 1) * sizeof *cs);
    if (!cs) return;
    size_t ncs = 0;
    for (size_t i = 0; i < nrows; i++) {
        if (!i || rows[i].hash != rows[i - 1].hash) {
            if (ncs) cs[ncs - 1].b = i;
            cs[ncs++] = (cref){i, nrows, 0, rows[i].hash};
        }
        cs[ncs - 1].time_ns += (double)rows[i].time_ns;
    }
    if (ncs > 1) qsort(cs, ncs, sizeof *cs, cmp_cref); /* most time first */
    c->comms = calloc(ncs ? ncs : 1, sizeof *c->comms);
    if (!c->comms) {
        free(cs);
        return;
    }
    c->ncomms = ncs;
    for (size_t k = 0; k < ncs; k++) {
        tp_comm_communicator_result *e = &c->comms[k];
        e->hash = cs[k].hash;
        hex_id(e->id, sizeof e->id, cs[k].hash);
        for (size_t i = cs[k].a; i < cs[k].b; i++)
            if (rows[i].nranks > e->size) e->size = rows[i].nranks;
        e->rank = rows[cs[k].a].rank;
        /* NCCL's init told the node count and the name (when one was given) */
        char key[40];
        snprintf(key, sizeof key, "nccl.comm.%016llx", (unsigned long long)cs[k].hash);
        const char *desc = tp_meta(p, key);
        unsigned nn = 0;
        const char *nm = desc ? strstr(desc, "nnodes=") : NULL;
        if (nm && sscanf(nm, "nnodes=%u", &nn) == 1 && nn) e->nodes = nn;
        const char *na = desc ? strstr(desc, " name=") : NULL;
        if (na && strcmp(na + 6, "-")) e->name = na + 6;
        e->torch_group = torch_group(p, cs[k].hash, e->size, 1);
        /* who recorded it, and the backend that carried it (gloo, nccl, mpi, ...) */
        const tp_comm_op *o0 = &p->comm[rows[cs[k].a].op0];
        e->source = tp_comm_source_name(o0->source);
        tp_comm_backend(p, o0, e->backend, sizeof e->backend);
        e->rows = &rows[cs[k].a];
        e->nrows = cs[k].b - cs[k].a;
    }
    free(cs);
}

/* The rank's figures: see tp_comm_rank_section. */
static void rank_compute(tp_comm_result *c, const tp_process *p, const tp_step *st, size_t nst) {
    memset(c, 0, sizeof *c);
    c->present = 1;
    int any_comm_kernel = 0;
    for (size_t i = 0; i < p->ngpu && !any_comm_kernel; i++) any_comm_kernel = is_comm_kernel(&p->gpu[i]);
    for (size_t i = 0; i < p->ncomm; i++) {
        c->mpi_ops += p->comm[i].source == TPROF_COMM_SRC_MPI;
        c->torch_ops += p->comm[i].source == TPROF_COMM_SRC_TORCH;
    }
    c->ops = p->ncomm;
    c->nccl_ops = p->ncomm - c->mpi_ops - c->torch_ops;
    /* the backends torch.distributed's ops went through, in order of first use */
    for (size_t i = 0; i < p->ncomm && c->torch_ops; i++) {
        if (p->comm[i].source != TPROF_COMM_SRC_TORCH) continue;
        char be[32];
        tp_comm_backend(p, &p->comm[i], be, sizeof be);
        int seen = 0;
        for (size_t k = 0; k < c->ntorch_backends && !seen; k++) seen = !strcmp(c->torch_backends[k], be);
        if (seen) continue;
        char (*nb)[32] = realloc(c->torch_backends, (c->ntorch_backends + 1) * sizeof *nb);
        if (!nb) break;
        c->torch_backends = nb;
        memcpy(c->torch_backends[c->ntorch_backends++], be, sizeof be);
    }
    /* NCCL events refused because the plugin's pool was full (at least this many) */
    const char *drops = tp_meta(p, "nccl.pool_drops");
    if (drops && strtod(drops, NULL) > 0) {
        c->has_not_recorded = 1;
        c->nccl_ops_not_recorded = strtod(drops, NULL);
    }
    if (!p->ncomm && !any_comm_kernel) {
        c->nothing = 1;
        return;
    }
    tp_comm_time *tm = malloc((p->ncomm ? p->ncomm : 1) * sizeof *tm);
    if (!tm) return;
    c->resolved = 1;
    tp_comm_resolve(p, tm); /* on failure it leaves host intervals, still valid */
    placement(c, p, tm);
    c->rows = build_rows(p, tm, st, nst, &c->nrows);
    if (c->rows) communicators(c, p);
    exposure_compute(&c->exposure, p, tm, st, nst);
    free(tm);
}

/* The document's "communication" of the rank, from its figures. */
static void rank_json(cJSON *rs, const tp_comm_result *c, size_t nst) {
    cJSON *j = cJSON_AddObjectToObject(rs, "communication");
    cJSON_AddNumberToObject(j, "ops", (double)c->ops);
    cJSON_AddNumberToObject(j, "nccl_ops", (double)c->nccl_ops);
    cJSON_AddNumberToObject(j, "mpi_ops", (double)c->mpi_ops);
    if (c->torch_ops) {
        cJSON_AddNumberToObject(j, "torch_ops", (double)c->torch_ops);
        cJSON *tb = cJSON_AddArrayToObject(j, "torch_backends");
        for (size_t i = 0; i < c->ntorch_backends; i++)
            cJSON_AddItemToArray(tb, cJSON_CreateString(c->torch_backends[i]));
    }
    if (c->has_not_recorded)
        cJSON_AddNumberToObject(j, "nccl_ops_not_recorded", c->nccl_ops_not_recorded);
    cJSON *jc = cJSON_AddArrayToObject(j, "communicators");
    if (c->nothing) {
        cJSON_AddStringToObject(j, "note", "no communication recorded");
        return;
    }
    if (!c->resolved) return;
    if (c->has_placement) {
        cJSON *x = cJSON_AddObjectToObject(j, "channel_placement");
        cJSON_AddNumberToObject(x, "ops", c->placement_ops);
        cJSON_AddNumberToObject(x, "shift_us_p50", c->shift_us_p50);
        cJSON_AddNumberToObject(x, "shift_us_min", c->shift_us_min);
        cJSON_AddNumberToObject(x, "shift_us_max", c->shift_us_max);
    }
    for (size_t k = 0; k < c->ncomms; k++) {
        const tp_comm_communicator_result *x = &c->comms[k];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "id", x->id);
        cJSON_AddNumberToObject(e, "size", x->size);
        cJSON_AddNumberToObject(e, "rank", x->rank);
        if (x->nodes) cJSON_AddNumberToObject(e, "nodes", x->nodes);
        if (x->name) cJSON_AddStringToObject(e, "name", x->name);
        if (x->torch_group) cJSON_AddStringToObject(e, "torch_group", x->torch_group);
        cJSON_AddStringToObject(e, "source", x->source);
        cJSON_AddStringToObject(e, "backend", x->backend);
        cJSON *jo = cJSON_AddArrayToObject(e, "ops");
        for (size_t i = 0; i < x->nrows; i++) cJSON_AddItemToArray(jo, row_json(&x->rows[i], nst));
        cJSON_AddItemToArray(jc, e);
    }
    exposure_json(j, &c->exposure);
}

void tp_comm_rank_section(cJSON *rs, tp_comm_result *out, const tp_process *p, const tp_step *st,
                          size_t nst) {
    rank_compute(out, p, st, nst);
    rank_json(rs, out, nst);
}
/* ------------------------------------------------------------------ across ranks */


typedef struct xop {
    const char *op;
    double count_max, count_min, bytes_max, ranks, count, timed, time_ms, bw_time_ms, size_bytes,
        factor, enqueue_only;
    double src[3];
} xop;

typedef struct member { int rank, comm_rank; } member;

typedef struct xcomm {
    const char *id;
    double size;
    member *m;
    size_t nm;
    xop *ops;
    size_t nops;
    int p2p_only;
    double time_ms;
} xcomm;

static int cmp_member(const void *a, const void *b) {
    const member *x = a, *y = b;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static int cmp_xcomm(const void *a, const void *b) {
    const xcomm *x = a, *y = b;
    if (x->time_ms != y->time_ms) return x->time_ms < y->time_ms ? 1 : -1;
    return strcmp(x->id, y->id);
}

/* A guess at what a communicator is for (docs/design.md §5.2: by size, members and traffic),
 * with the reason; Megatron-LM's default rank order puts tensor-parallel groups on consecutive
 * ranks and data-parallel groups at a stride. */
static void guess_role(const xcomm *c, int world, char *role, size_t nr, char *basis, size_t nb) {
    int size = (int)c->size;
    if (size <= 1) {
        snprintf(role, nr, "single rank");
        snprintf(basis, nb, "size 1: no traffic between ranks");
    } else if (c->p2p_only && c->nops) {
        snprintf(role, nr, "pipeline");
        snprintf(basis, nb, "only Send/Recv traffic");
    } else if (world > 1 && size == world) {
        snprintf(role, nr, "world/data-parallel");
        snprintf(basis, nb, "spans all %d ranks of the world", world);
    } else if ((int)c->nm == size) {
        int stride = c->m[1].rank - c->m[0].rank, even = 1;
        for (size_t i = 2; i < c->nm; i++) even &= c->m[i].rank - c->m[i - 1].rank == stride;
        if (even && stride == 1) {
            snprintf(role, nr, "tensor-parallel");
            snprintf(basis, nb, "%d consecutive world ranks with collectives: Megatron-LM puts "
                                "tensor-parallel groups on adjacent ranks", size);
        } else if (even) {
            snprintf(role, nr, "data-parallel");
            snprintf(basis, nb, "%d world ranks at a stride of %d with collectives; could also "
                                "be context- or expert-parallel", size, stride);
        } else {
            snprintf(role, nr, "subgroup");
            snprintf(basis, nb, "%d world ranks without a regular stride", size);
        }
    } else {
        snprintf(role, nr, "tensor- or data-parallel subgroup");
        snprintf(basis, nb, "%d of %d ranks with collectives; members not all in this run's files",
                 size, world);
    }
}

/* Whether a torch.pg.* description ("backend=B size=N ranks=a,b,...") lists exactly x's
 * members (x->m sorted by world rank, no repeats), each once. */
static int same_members(const char *desc, const xcomm *x) {
    const char *r = strstr(desc, " ranks=");
    if (!r) return 0;
    r += 7;
    unsigned char *seen = calloc(x->nm ? x->nm : 1, 1);
    if (!seen) return 0;
    size_t n = 0;
    int ok = 0;
    while (*r) {
        char *end;
        long v = strtol(r, &end, 10);
        if (end == r || n >= x->nm) break;
        member key = {(int)v, 0};
        const member *hit = bsearch(&key, x->m, x->nm, sizeof *x->m, cmp_member);
        if (!hit || seen[hit - x->m]++) break;
        n++;
        if (*end != ',') {
            ok = *end == 0 && n == x->nm;
            break;
        }
        r = end + 1;
    }
    free(seen);
    return ok;
}

/* The torch.distributed group of communicator x, from trainprof.torch's torch.pg.* metadata
 * in any rank file: the one with x's id (torch's own records, gloo/mpi), else an NCCL-backend
 * group whose member list is exactly x's world ranks when all of them were seen (an NCCL
 * communicator: NCCL's id is not torch's; Megatron's gloo twin of a data-parallel group has
 * the same members and must not be taken). Tells apart groups of the same size (a tensor- and a
 * data-parallel group of 2), which the per-rank match by size cannot. NULL when none. */
static const char *torch_group_by_members(const xcomm *x, const tp_run *run) {
    char key[40];
    unsigned long long id = strtoull(x->id, NULL, 16);
    snprintf(key, sizeof key, "torch.pg.%016llx", id);
    for (size_t pi = 0; pi < run->nprocs; pi++) {
        const char *d = tp_meta(&run->procs[pi], key);
        if (d) return d;
    }
    if (x->nm < 2 || (double)x->nm != x->size) return NULL;
    for (size_t pi = 0; pi < run->nprocs; pi++) {
        const tp_process *p = &run->procs[pi];
        for (size_t i = 0; i < p->nmeta; i++)
            if (!strncmp(p->meta[i].key, "torch.pg.", 9) && nccl_backend(p->meta[i].value) &&
                same_members(p->meta[i].value, x))
                return p->meta[i].value;
    }
    return NULL;
}

/* Adds rank rr's communicators to xc (one entry per id across the ranks). Returns 0, or -1
 * when out of memory. */
static int gather_rank(xcomm **xcp, size_t *nxc, const tp_rank_result *rr) {
    const tp_comm_result *c = &rr->comm;
    for (size_t ci = 0; c->present && ci < c->ncomms; ci++) {
        const tp_comm_communicator_result *rc = &c->comms[ci];
        xcomm *xc = *xcp;
        size_t k = 0;
        while (k < *nxc && strcmp(xc[k].id, rc->id)) k++;
        if (k == *nxc) {
            xcomm *n2 = realloc(xc, (*nxc + 1) * sizeof *n2);
            if (!n2) return -1;
            *xcp = xc = n2;
            memset(&xc[*nxc], 0, sizeof *xc);
            xc[*nxc].id = rc->id;
            xc[*nxc].p2p_only = 1;
            (*nxc)++;
        }
        xcomm *x = &xc[k];
        if ((double)rc->size > x->size) x->size = rc->size;
        member *m2 = realloc(x->m, (x->nm + 1) * sizeof *m2);
        if (!m2) return -1;
        x->m = m2;
        /* through double, as the document's number is read back: a forged rank beyond INT_MAX
         * converts as it always has */
        x->m[x->nm++] = (member){rr->rank, (int)(double)rc->rank};
        for (size_t ri = 0; ri < rc->nrows; ri++) {
            const tp_comm_row_result *ro = &rc->rows[ri];
            const char *op = ro->name;
            if (strcmp(op, "Send") && strcmp(op, "Recv")) x->p2p_only = 0;
            size_t q = 0;
            while (q < x->nops && strcmp(x->ops[q].op, op)) q++;
            if (q == x->nops) {
                xop *o2 = realloc(x->ops, (x->nops + 1) * sizeof *o2);
                if (!o2) return -1;
                x->ops = o2;
                memset(&x->ops[q], 0, sizeof *x->ops);
                x->ops[q].op = op;
                x->nops++;
            }
            xop *o = &x->ops[q];
            double cnt = (double)ro->count, by = (double)ro->bytes, t = (double)ro->time_ns / 1e6;
            if (cnt > o->count_max) o->count_max = cnt;
            if (!o->ranks || cnt < o->count_min) o->count_min = cnt;
            if (by > o->bytes_max) o->bytes_max = by;
            o->ranks++;
            o->count += cnt;
            o->timed += (double)ro->timed;
            o->time_ms += t;
            x->time_ms += t;
            /* S of the ops with a real duration, back from algbw = S / t */
            double algbw, bw_ms;
            tp_comm_row_bw(ro, &algbw, &bw_ms);
            o->size_bytes += algbw * bw_ms * 1e6;
            o->bw_time_ms += bw_ms;
            o->factor = tp_comm_bus_factor(ro->op, ro->nranks);
            o->enqueue_only += (double)ro->enqueue_only;
            for (int z = 0; z < 3; z++) o->src[z] += (double)ro->src[z];
        }
    }
    return 0;
}

/* The run's communicators across the ranks ("communicators"), into c. */
static void communicators_json(cJSON *c, const tp_run *run, const tp_run_results *res, int world) {
    xcomm *xc = NULL;
    size_t nxc = 0;
    int oom = 0;
    for (size_t i = 0; i < res->nranks && !oom; i++) oom = gather_rank(&xc, &nxc, &res->ranks[i]);
    if (nxc > 1) qsort(xc, nxc, sizeof *xc, cmp_xcomm);
    cJSON *jc = cJSON_AddArrayToObject(c, "communicators");
    for (size_t k = 0; k < nxc && !oom; k++) {
        xcomm *x = &xc[k];
        if (x->nm > 1) qsort(x->m, x->nm, sizeof *x->m, cmp_member);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "id", x->id);
        cJSON_AddNumberToObject(e, "size", x->size);
        cJSON_AddNumberToObject(e, "ranks_seen", (double)x->nm);
        if (x->nm > 1) { /* several rank files show this id: who is in it */
            cJSON *jm = cJSON_AddArrayToObject(e, "members");
            for (size_t i = 0; i < x->nm; i++) {
                cJSON *m = cJSON_CreateObject();
                cJSON_AddNumberToObject(m, "rank", x->m[i].rank);
                cJSON_AddNumberToObject(m, "comm_rank", x->m[i].comm_rank);
                cJSON_AddItemToArray(jm, m);
            }
        } else if (x->nm == 1) {
            cJSON_AddNumberToObject(e, "rank", x->m[0].rank);
            cJSON_AddNumberToObject(e, "comm_rank", x->m[0].comm_rank);
        }
        cJSON_AddStringToObject(e, "traffic", x->p2p_only && x->nops ? "point-to-point" : "collective");
        const char *tg = torch_group_by_members(x, run);
        if (tg) cJSON_AddStringToObject(e, "torch_group", tg);
        char role[64], basis[200];
        guess_role(x, world, role, sizeof role, basis, sizeof basis);
        cJSON_AddStringToObject(e, "role_guess", role);
        cJSON_AddStringToObject(e, "role_basis", basis);
        cJSON *jo = cJSON_AddArrayToObject(e, "ops");
        for (size_t q = 0; q < x->nops; q++) {
            xop *o = &x->ops[q];
            cJSON *oj = cJSON_CreateObject();
            cJSON_AddStringToObject(oj, "op", o->op);
            cJSON_AddNumberToObject(oj, "ranks", o->ranks);
            cJSON_AddNumberToObject(oj, "count_per_rank", o->count_max);
            /* ranks that saw fewer (a damaged or cut-short rank file, a rank that left) */
            if (o->count_min < o->count_max) cJSON_AddNumberToObject(oj, "count_min_rank", o->count_min);
            cJSON_AddNumberToObject(oj, "bytes_per_rank", o->bytes_max);
            if (o->count_max > 0)
                cJSON_AddNumberToObject(oj, "bytes_per_op", o->bytes_max / o->count_max);
            if (o->timed > 0) cJSON_AddNumberToObject(oj, "mean_ms", o->time_ms / o->timed);
            if (o->bw_time_ms > 0 && o->size_bytes > 0 && o->factor > 0) {
                double algbw = o->size_bytes / (o->bw_time_ms * 1e6);
                cJSON_AddNumberToObject(oj, "algbw_gbs", algbw);
                cJSON_AddNumberToObject(oj, "busbw_gbs", algbw * o->factor);
            }
            cJSON_AddStringToObject(oj, "time_source", time_source(o->src));
            if (o->enqueue_only > 0) cJSON_AddNumberToObject(oj, "enqueue_only", o->enqueue_only);
            cJSON_AddItemToArray(jo, oj);
        }
        cJSON_AddItemToArray(jc, e);
    }
    for (size_t k = 0; k < nxc; k++) {
        free(xc[k].m);
        free(xc[k].ops);
    }
    free(xc);
}

/* The exposed-communication finding on the worst rank (see tp_comm_run_section). */
static cJSON *exposure_finding(const tp_rank_result *worst, size_t n, double mean, size_t over,
                               double warn_share, double crit_share) {
    const tp_comm_exposure_result *wx = &worst->comm.exposure;
    double ws = wx->exposed_share;
    /* exposed communication over 10 % of the step is a warning (docs/design.md §5.2), over
     * 30 % critical: then communication takes more of the step than any single phase
     * usually does (thresholds in tp_report_opts) */
    int step = wx->per_step;
    const char *sev = ws > crit_share ? "critical" : "warning";
    char msg[400];
    snprintf(msg, sizeof msg,
             "exposed communication is %.1f %% of the %s time on rank %.0f (%.2f ms of "
             "%.2f ms per %s; %.2f ms more overlapped with compute); mean over %zu "
             "rank%s %.1f %%: %s",
             100 * ws, step ? "step" : "run", (double)worst->rank, wx->exposed_ms.mean,
             wx->window_ms, step ? "step" : "run", wx->overlapped_ms.mean, n, n == 1 ? "" : "s",
             100 * mean,
             !strcmp(wx->basis, "host")
                 ? "time the process spent blocked in communication instead of computing"
                 : "communication the GPU could not hide behind compute");
    cJSON *fd = cJSON_CreateObject();
    cJSON_AddStringToObject(fd, "id", "exposed_communication");
    cJSON_AddStringToObject(fd, "severity", sev);
    cJSON_AddNumberToObject(fd, "rank", worst->rank);
    cJSON_AddStringToObject(fd, "message", msg);
    cJSON *ev = cJSON_AddObjectToObject(fd, "evidence");
    cJSON_AddStringToObject(ev, "per", step ? "step" : "run");
    cJSON_AddStringToObject(ev, "basis", wx->basis);
    cJSON_AddNumberToObject(ev, "exposed_share", ws);
    cJSON_AddNumberToObject(ev, "exposed_ms", wx->exposed_ms.mean);
    cJSON_AddNumberToObject(ev, "overlapped_ms", wx->overlapped_ms.mean);
    cJSON_AddNumberToObject(ev, "window_ms", wx->window_ms);
    cJSON_AddNumberToObject(ev, "mean_exposed_share", mean);
    cJSON_AddNumberToObject(ev, "ranks_over_warning", (double)over);
    cJSON_AddNumberToObject(ev, "threshold", ws > crit_share ? crit_share : warn_share);
    return fd;
}

cJSON *tp_comm_run_section(cJSON *rep, const tp_run *run, const tp_run_results *res,
                           cJSON *findings, double warn_share, double crit_share) {
    int world = 0, nrank_procs = 0;
    for (size_t i = 0; i < run->nprocs; i++) {
        if (run->procs[i].role != TP_ROLE_RANK) continue;
        nrank_procs++;
        if (run->procs[i].world_size > world) world = run->procs[i].world_size;
    }
    if (world <= 0) world = nrank_procs;
    cJSON *c = cJSON_AddObjectToObject(rep, "communication");
    cJSON_AddNumberToObject(c, "world_size", world);
    communicators_json(c, run, res, world);

    /* exposure across ranks */
    cJSON *found = NULL; /* the finding appended */
    cJSON *xe = cJSON_AddObjectToObject(c, "exposure");
    cJSON *jr = cJSON_AddArrayToObject(xe, "ranks");
    size_t n = 0, cap = res->nranks;
    double *shares = malloc((cap ? cap : 1) * sizeof *shares);
    const tp_rank_result *worst = NULL;
    int per = -1; /* per_step of the ranks so far; -1 none yet */
    int mixed = 0;
    for (size_t i = 0; i < res->nranks; i++) {
        const tp_rank_result *r = &res->ranks[i];
        const tp_comm_exposure_result *x = &r->comm.exposure;
        if (!r->comm.present || !x->has_figures) continue;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "rank", r->rank);
        cJSON_AddStringToObject(e, "per", x->per_step ? "step" : "run");
        cJSON_AddStringToObject(e, "basis", x->basis);
        cJSON_AddNumberToObject(e, "exposed_share", x->exposed_share);
        cJSON_AddNumberToObject(e, "exposed_ms_mean", x->exposed_ms.mean);
        cJSON_AddNumberToObject(e, "exposed_ms_p50", x->exposed_ms.p50);
        cJSON_AddNumberToObject(e, "overlapped_ms_mean", x->overlapped_ms.mean);
        cJSON_AddNumberToObject(e, "window_ms", x->window_ms);
        cJSON_AddItemToArray(jr, e);
        if (per >= 0 && per != x->per_step) mixed = 1;
        per = x->per_step;
        if (shares && n < cap) shares[n++] = x->exposed_share;
        if (!worst || x->exposed_share > worst->comm.exposure.exposed_share) worst = r;
    }
    cJSON_AddStringToObject(xe, "per", mixed ? "mixed" : per == 0 ? "run" : "step");
    cJSON *th = cJSON_AddObjectToObject(xe, "thresholds");
    cJSON_AddNumberToObject(th, "warning", warn_share);
    cJSON_AddNumberToObject(th, "critical", crit_share);
    if (n && shares) {
        double mean = 0;
        size_t over = 0;
        for (size_t i = 0; i < n; i++) {
            mean += shares[i];
            over += shares[i] > warn_share;
        }
        mean /= (double)n;
        qsort(shares, n, sizeof *shares, tp_cmp_double);
        double median = tp_pct_double(shares, n, 0.5);
        double ws = worst->comm.exposure.exposed_share;
        cJSON_AddNumberToObject(xe, "mean_exposed_share", mean);
        cJSON_AddNumberToObject(xe, "median_exposed_share", median);
        cJSON_AddNumberToObject(xe, "worst_rank", worst->rank);
        cJSON_AddNumberToObject(xe, "worst_exposed_share", ws);
        if (findings && ws > warn_share) {
            found = exposure_finding(worst, n, mean, over, warn_share, crit_share);
            cJSON_AddItemToArray(findings, found);
        }
    }
    free(shares);
    return found;
}

/* ------------------------------------------------------------------ text */

static void put_bytes(FILE *f, double b) {
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4) {
        b /= 1024;
        i++;
    }
    fprintf(f, i ? "%.1f %s" : "%.0f %s", b, u[i]);
}

/* the NCCL ops the plugin could not record (its event pool was full), when there were any */
static void pool_warning(FILE *f, const cJSON *c) {
    if (tp_jnum(c, "nccl_ops_not_recorded") > 0)
        fprintf(f, "    warning: at least %.0f NCCL ops not recorded: the profiler plugin's event "
                   "pool was full\n",
                tp_jnum(c, "nccl_ops_not_recorded"));
}

void tp_comm_rank_text(FILE *f, const cJSON *c) {
    if (!c) return;
    const cJSON *comms = tp_jobj(c, "communicators");
    int ncomm = cJSON_GetArraySize(comms);
    if (tp_jnum(c, "ops") == 0 && !tp_jobj(c, "exposure")) {
        fprintf(f, "  communication: none recorded\n");
        pool_warning(f, c);
        return;
    }
    if (tp_jobj(c, "torch_ops")) {
        fprintf(f, "  communication: %.0f ops (%.0f NCCL, %.0f MPI, %.0f torch.distributed",
                tp_jnum(c, "ops"), tp_jnum(c, "nccl_ops"), tp_jnum(c, "mpi_ops"), tp_jnum(c, "torch_ops"));
        const cJSON *b;
        int first = 1;
        cJSON_ArrayForEach(b, tp_jobj(c, "torch_backends")) {
            fputs(first ? " over " : ", ", f);
            tp_fput_printable(f, cJSON_IsString(b) ? b->valuestring : "");
            first = 0;
        }
        fprintf(f, ") on %d communicator%s\n", ncomm, ncomm == 1 ? "" : "s");
    }
    else
        fprintf(f, "  communication: %.0f ops (%.0f NCCL, %.0f MPI) on %d communicator%s\n",
                tp_jnum(c, "ops"), tp_jnum(c, "nccl_ops"), tp_jnum(c, "mpi_ops"), ncomm, ncomm == 1 ? "" : "s");
    pool_warning(f, c);
    const cJSON *pl = tp_jobj(c, "channel_placement");
    if (pl)
        fprintf(f, "    NCCL's GPU times checked against CUPTI's NCCL kernels: moved by %+.1f us "
                   "(median; %+.1f to %+.1f) over %.0f ops\n",
                -tp_jnum(pl, "shift_us_p50"), -tp_jnum(pl, "shift_us_max"), -tp_jnum(pl, "shift_us_min"),
                tp_jnum(pl, "ops"));
    int shown = 0, enq = 0;
    const cJSON *e, *o;
    cJSON_ArrayForEach(e, comms) {
        if (shown++ == 10) {
            fprintf(f, "    ... %d more communicators (report.json lists them all)\n", ncomm - 10);
            break;
        }
        fprintf(f, "    comm %s", tp_jstr(e, "id"));
        if (tp_jobj(e, "name")) { /* a program's text */
            fputs(" \"", f);
            tp_fput_printable(f, tp_jstr(e, "name"));
            fputc('"', f);
        }
        if (tp_jobj(e, "backend")) {
            fputs(" via ", f);
            tp_fput_printable(f, tp_jstr(e, "backend"));
        }
        if (tp_jobj(e, "torch_group")) { /* written by trainprof.torch: backend, size, ranks */
            fputs(" [torch: ", f);
            tp_fput_printable(f, tp_jstr(e, "torch_group"));
            fputc(']', f);
        }
        fprintf(f, ": size %.0f, this rank %.0f in it", tp_jnum(e, "size"), tp_jnum(e, "rank"));
        if (tp_jnum(e, "nodes") > 0) fprintf(f, ", %.0f node%s", tp_jnum(e, "nodes"), tp_jnum(e, "nodes") == 1 ? "" : "s");
        fputc('\n', f);
        cJSON_ArrayForEach(o, tp_jobj(e, "ops")) {
            fprintf(f, "      %-14s %7.0f ops  ", tp_jstr(o, "op"), tp_jnum(o, "count"));
            put_bytes(f, tp_jnum(o, "bytes"));
            fprintf(f, " total");
            if (tp_jobj(o, "bytes_per_step")) { /* per measured step: e.g. DDP's gradient bytes */
                fprintf(f, " (%.1f ops, ", tp_jnum(o, "count_per_step"));
                put_bytes(f, tp_jnum(o, "bytes_per_step"));
                fprintf(f, " per step)");
            }
            fprintf(f, ", %.3f ms total, %.1f us mean", tp_jnum(o, "time_ms"), tp_jnum(o, "mean_us"));
            if (tp_jobj(o, "algbw_gbs"))
                fprintf(f, ", algbw %.2f GB/s, busbw %.2f GB/s", tp_jnum(o, "algbw_gbs"),
                        tp_jnum(o, "busbw_gbs"));
            fprintf(f, " [time: %s]\n", tp_jstr(o, "time_source"));
            enq |= tp_jnum(o, "enqueue_only") > 0;
        }
    }
    if (enq)
        fprintf(f, "    note: ops timed by \"host\" on NCCL are the enqueue only, not the duration "
                   "(no GPU interval and no matching NCCL kernel)\n");
    const cJSON *x = tp_jobj(c, "exposure");
    if (!x) return;
    int step = !strcmp(tp_jstr(x, "per"), "step");
    if (!tp_jobj(x, "exposed_share")) {
        fprintf(f, "    exposed communication: not known (%s)\n", tp_jstr(x, "note"));
        return;
    }
    fprintf(f, "    exposed communication: %.2f ms per %s = %.1f %% of the %s (median %.2f ms",
            tp_jnum(tp_jobj(x, "exposed_ms"), "mean"), step ? "step" : "run",
            100 * tp_jnum(x, "exposed_share"), step ? "step" : "run",
            tp_jnum(tp_jobj(x, "exposed_ms"), "p50"));
    if (step)
        fprintf(f, ", worst %.1f %% in step %.0f", 100 * tp_jnum(tp_jobj(x, "exposed_share_per_window"), "max"),
                tp_jnum(x, "worst_step"));
    fprintf(f, "); overlapped %.2f ms; communication %.2f ms in all\n",
            tp_jnum(tp_jobj(x, "overlapped_ms"), "mean"), tp_jnum(tp_jobj(x, "comm_ms"), "mean"));
    fprintf(f, "      basis: %s\n", tp_jstr(x, "note"));
}

void tp_comm_run_text(FILE *f, const cJSON *c, const char *B, const char *N) {
    if (!c) return;
    const cJSON *comms = tp_jobj(c, "communicators"), *x = tp_jobj(c, "exposure");
    int ncomm = cJSON_GetArraySize(comms);
    if (!ncomm && !tp_jobj(x, "worst_rank")) {
        fprintf(f, "\n%scommunication%s: none recorded\n", B, N);
        return;
    }
    fprintf(f, "\n%scommunication%s (across ranks; roles are guesses from size, members and "
               "traffic)\n", B, N);
    int shown = 0;
    const cJSON *e, *o;
    cJSON_ArrayForEach(e, comms) {
        if (shown++ == 20) {
            fprintf(f, "  ... %d more communicators (report.json lists them all)\n", ncomm - 20);
            break;
        }
        fprintf(f, "  comm %s: size %.0f, seen on %.0f rank file%s", tp_jstr(e, "id"),
                tp_jnum(e, "size"), tp_jnum(e, "ranks_seen"), tp_jnum(e, "ranks_seen") == 1 ? "" : "s");
        const cJSON *m;
        int first = 1;
        cJSON_ArrayForEach(m, tp_jobj(e, "members")) {
            fprintf(f, "%s%.0f", first ? " (world ranks " : ", ", tp_jnum(m, "rank"));
            first = 0;
        }
        if (!first) fputc(')', f);
        if (tp_jobj(e, "torch_group")) { /* a program's text */
            fputs("; torch group \"", f);
            tp_fput_printable(f, tp_jstr(e, "torch_group"));
            fputc('"', f);
        }
        fprintf(f, "; guess: %s (%s)\n", tp_jstr(e, "role_guess"), tp_jstr(e, "role_basis"));
        cJSON_ArrayForEach(o, tp_jobj(e, "ops")) {
            if (tp_jobj(o, "count_min_rank"))
                fprintf(f, "    %-14s %.0f-%.0f per rank (the rank files differ), ", tp_jstr(o, "op"),
                        tp_jnum(o, "count_min_rank"), tp_jnum(o, "count_per_rank"));
            else
                fprintf(f, "    %-14s %.0f per rank, ", tp_jstr(o, "op"), tp_jnum(o, "count_per_rank"));
            put_bytes(f, tp_jnum(o, "bytes_per_op"));
            fprintf(f, " per op on average (per rank), mean %.3f ms", tp_jnum(o, "mean_ms"));
            if (tp_jobj(o, "algbw_gbs"))
                fprintf(f, ", algbw %.2f GB/s, busbw %.2f GB/s", tp_jnum(o, "algbw_gbs"),
                        tp_jnum(o, "busbw_gbs"));
            fprintf(f, " [time: %s]\n", tp_jstr(o, "time_source"));
        }
    }
    if (tp_jobj(x, "worst_rank")) {
        int step = !strcmp(tp_jstr(x, "per"), "step");
        int nr = cJSON_GetArraySize(tp_jobj(x, "ranks"));
        fprintf(f, "  exposed communication: mean %.1f %% of the %s over %d rank%s, median %.1f %%, "
                   "worst rank %.0f (%.1f %%)\n",
                100 * tp_jnum(x, "mean_exposed_share"), step ? "step" : "run", nr, nr == 1 ? "" : "s",
                100 * tp_jnum(x, "median_exposed_share"), tp_jnum(x, "worst_rank"),
                100 * tp_jnum(x, "worst_exposed_share"));
    }
}
