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
 *    op, and a kernel taken by one is not offered to the next. Kernels are recorded only
 *    while capture is on (capture.h: the plan's windows, less the pauses for another CUPTI
 *    client), while the plugin records every op: an op issued while capture was off takes no
 *    kernel, and an op takes only a kernel of the span it was issued in (a kernel belongs to
 *    the last span that began before it), so that the ops after a window do not take the
 *    kernels of the next one.
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
#include "analysis/alloc.h"
#include "analysis/comm_cal.h"
#include "analysis/idmap.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "analysis/capture.h"
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

const char *tp_comm_op_name(const tp_comm_op *o) {
    if (o->op != TPROF_COMM_UNKNOWN && o->op < TPROF_COMM_OP_COUNT)
        return tprof__comm_op_name(o->op);
    return o->name ? o->name : "Unknown";
}

/* Host-timed sources: MPI calls and torch.distributed calls of a backend that runs on the
 * host (gloo, mpi, ucc, ...) have no GPU side; their host interval is the duration. */
int tp_comm_host_timed(uint32_t source, uint32_t flags) {
    return source == TPROF_COMM_SRC_MPI ||
           (source == TPROF_COMM_SRC_TORCH && !(flags & TPROF_COMM_F_ENQUEUE));
}

int tp_comm_torch_twin(const tp_comm_op *op, int plugin) {
    return plugin && op->source == TPROF_COMM_SRC_TORCH && (op->flags & TPROF_COMM_F_ENQUEUE);
}

static int is_mpi(const tp_comm_op *o) { return tp_comm_host_timed(o->source, o->flags); }

int tp_comm_host_span(const tp_comm_op *o) {
    if (!is_mpi(o) || (o->flags & TPROF_COMM_F_UNFINISHED)) return -1;
    return (o->flags & TPROF_COMM_F_NONBLOCKING) != 0;
}

const char *tp_comm_source_name(uint32_t source) {
    return source == TPROF_COMM_SRC_NCCL    ? "nccl"
           : source == TPROF_COMM_SRC_MPI   ? "mpi"
           : source == TPROF_COMM_SRC_TORCH ? "torch"
                                            : "unknown";
}

const char *tp_comm_backend(const tp_process *p, const tp_comm_key *o, char *buf, size_t n) {
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
#define TOK(s, bit) {s, sizeof s - 1, bit} /* lengths known here: no strlen per kernel */
static const struct { const char *tok; size_t len; unsigned bit; } fn_tokens[] = {
    TOK("AllReduce", FN_ALLREDUCE), TOK("AllGather", FN_ALLGATHER),
    TOK("ReduceScatter", FN_REDUCESCATTER), TOK("Broadcast", FN_BROADCAST),
    TOK("Reduce", FN_REDUCE), TOK("SendRecv", FN_SENDRECV), TOK("Send", FN_SENDRECV),
    TOK("Recv", FN_SENDRECV), TOK("AllToAll", FN_ALLTOALL), TOK("Gather", FN_GATHER),
    TOK("Scatter", FN_SCATTER),
};
#undef TOK

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
            if (fn_tokens[k].len == len && !strncasecmp(s, fn_tokens[k].tok, len))
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
    uint32_t span; /* the capture span it was recorded in (kernel_span) */
} kref;

/* An NCCL op, by its index in p->comm: 8 bytes an op while they are aligned, the
 * communicator, issue time and capture span read from the op itself. */
typedef struct oref {
    size_t ci; /* index in p->comm */
} oref;

#define NO_SPAN UINT32_MAX

/* The last of the n capture spans (time order, apart) that starts at or before t; n when
 * none does. */
static size_t last_from(const tp_step *sp, size_t n, uint64_t t) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sp[mid].start <= t) lo = mid + 1;
        else hi = mid;
    }
    return lo ? lo - 1 : n;
}

/* The span an op was issued in: the one holding its host start, NO_SPAN in none (capture
 * was off: its kernel, if it ran, was not recorded). Without spans (capture never on by the
 * metadata, yet kernels recorded: metadata that does not tell), every op is in span 0. */
static uint32_t op_span(const tp_step *sp, size_t n, uint64_t start) {
    if (!n) return 0;
    size_t i = last_from(sp, n, start);
    return i < n && start < sp[i].end ? (uint32_t)i : NO_SPAN;
}

static int cmp_kref(const void *a, const void *b) {
    const kref *x = a, *y = b;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    if (x->stream != y->stream) return x->stream < y->stream ? -1 : 1;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->gi < y->gi ? -1 : x->gi > y->gi;
}

/* The ops' order for the matching: by communicator, then issue time, then file order (arg:
 * the process). */
static int cmp_oref(const void *a, const void *b, void *arg) {
    const tp_process *p = arg;
    const oref *x = a, *y = b;
    const tp_comm_op *ox = &p->comm[x->ci], *oy = &p->comm[y->ci];
    if (ox->comm_hash != oy->comm_hash) return ox->comm_hash < oy->comm_hash ? -1 : 1;
    if (ox->start != oy->start) return ox->start < oy->start ? -1 : 1;
    return x->ci < y->ci ? -1 : x->ci > y->ci;
}
typedef struct span_ix { size_t a, b; uint64_t first; } span_ix; /* [a, b) of an array */

/* A communicator's place in the ops' order: its hash, its ops' count, where they go, and its
 * number in ops_in_order's map (idmap.h: ids read from a file numbered under a key of the
 * map's own, so that no crafted set of them piles into one run of slots). The ops' order
 * does not depend on the map. */
typedef struct comm_slot { uint64_t hash; size_t n, at, k; } comm_slot;

static int cmp_slot(const void *a, const void *b) {
    const comm_slot *x = a, *y = b;
    return x->hash < y->hash ? -1 : x->hash > y->hash;
}

/* p's NCCL ops (not is_mpi) into o (room for all of them) in cmp_oref's order: grouped by
 * communicator, counted first, each op written at its group's place in file order, then each
 * group sorted only when its ops are not already in issue order (a communicator's ops come
 * from one thread: they are), so that a rank file of millions of ops is not sorted whole,
 * nor copied (glibc's qsort takes a buffer the size of the array). Returns the ops written,
 * or SIZE_MAX without memory. */
static size_t ops_in_order(const tp_process *p, oref *o);

static int cmp_first(const void *a, const void *b) {
    const span_ix *x = a, *y = b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return x->a < y->a ? -1 : x->a > y->a;
}

/* How long before an op's host start its kernel may start: NCCL starts the op's Coll event
 * after it launched the kernel, and on an idle GPU the kernel runs at once (measured 3-4 us
 * before the event's start on H200s with NCCL 2.28). Without this slack the first op after
 * an idle spell would skip its own kernel and every later op take its successor's. */
#define ISSUE_SLACK_NS 50000u

/* The span a kernel was recorded in: the last that began before its start (less the issue
 * slack), since a kernel launched while capture was on may start after capture went off
 * (the GPU runs behind the host), never before its launch. One before every span, or
 * without spans, in span 0. Past the last span when the file did not list every window
 * (unlisted: capture then counts as off), NO_SPAN: no op takes it. Its launch (the call of
 * its correlation id) would place a kernel that started after a gap shorter than the GPU's
 * lag, but ids start over each time CUPTI is attached again, and a launch not recorded
 * (a driver launch outside the callbacks) would take an earlier attachment's call of the
 * same id: an earlier span, and every op after it the wrong kernel. */
static uint32_t kernel_span(const tp_step *sp, size_t n, uint64_t start, int unlisted) {
    if (unlisted && n && start >= sp[n - 1].end) return NO_SPAN;
    uint64_t t = start > UINT64_MAX - ISSUE_SLACK_NS ? UINT64_MAX : start + ISSUE_SLACK_NS;
    size_t i = last_from(sp, n, t);
    return i < n ? (uint32_t)i : 0;
}

/* The kernel's start less nothing and plus the issue slack, saturated: a start that the
 * slack would wrap reads as the latest time, so that "starts at or after the issue, less
 * the slack" is monotone along a stream's kernels (start order) and can be searched. */
static uint64_t slack_end(uint64_t start) {
    return start > UINT64_MAX - ISSUE_SLACK_NS ? UINT64_MAX : start + ISSUE_SLACK_NS;
}

/* 1 when kernel k cannot be op (start `issue`, span sp)'s nor any later op's of its
 * communicator: it started before the issue (less the slack) or in an earlier span. Both
 * hold for a prefix of a stream's kernels (their starts and spans only grow along it). */
static int before_op(const kref *k, uint64_t issue, uint32_t sp) {
    return slack_end(k->start) < issue || k->span < sp;
}

/* The first of k[j..nk) that before_op leaves (nk when none), from j: doubling steps then a
 * binary search, so that a step costs the log of its length. Those passed are a prefix of
 * the kernels past j, however many kernels of other communicators lie between two ops. */
static size_t first_after(const kref *k, size_t j, size_t nk, uint64_t issue, uint32_t sp) {
    if (j >= nk || !before_op(&k[j], issue, sp)) return j;
    size_t lo = j, step = 1; /* lo: known before the op */
    while (lo + step < nk && before_op(&k[lo + step], issue, sp)) {
        lo += step;
        step *= 2;
    }
    size_t hi = lo + step < nk ? lo + step : nk; /* hi: known not before it, or nk */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (before_op(&k[mid], issue, sp)) lo = mid;
        else hi = mid;
    }
    return hi;
}

/* The first kernel not taken at or after global index g: next[] holds g for a kernel not
 * taken and a later index for a taken one (next[nk] = nk for the end), each lookup halving
 * the paths it walks, so that a stream whose kernels thousands of communicators took costs
 * each op a few steps, not one per kernel taken (80,000 communicators on one stream). */
static size_t untaken(size_t *next, size_t g) {
    while (next[g] != g) {
        next[g] = next[next[g]];
        g = next[g];
    }
    return g;
}

/* Aligns one communicator's ops (issue order) with one stream's nk kernels k (start order)
 * by the rule in the file comment; next: the kernels' taken marks (untaken), indexed from
 * the stream's first kernel at global index base. Returns the number of ops matched, and in
 * *lag the sum of their issue-to-kernel-start delays (ns); with `out`, records the matches
 * and marks the kernels taken. */
static size_t align(const tp_process *p, const tp_step *cap, size_t ncap, const oref *ops,
                    size_t nops, const kref *k, size_t nk, size_t *next, size_t base,
                    tp_comm_time *out, double *lag) {
    size_t j = 0, matched = 0, prev_k = SIZE_MAX;
    const tp_comm_op *prev = NULL;
    for (size_t i = 0; i < nops; i++) {
        const tp_comm_op *o = &p->comm[ops[i].ci];
        const uint32_t sp = op_span(cap, ncap, o->start);
        unsigned want = op_fns(o->op);
        size_t hit = SIZE_MAX;
        if (prev && prev_k != SIZE_MAX && o->start < prev->end && fits(k[prev_k].fns, want)) {
            /* enqueued in the same launch as the previous op, whichever side of a window's
             * end its own issue fell */
            hit = prev_k;
        } else if (sp == NO_SPAN) {
            /* issued while capture was off: its kernel was not recorded, and one of a later
             * span is another op's */
        } else {
            /* the first kernel not taken that neither started before the op nor in an
             * earlier span; past the listed spans (NO_SPAN, the stream's last kernels) none */
            j = first_after(k, j, nk, o->start, sp);
            j = j < nk ? untaken(next, base + j) - base : nk;
            if (j >= nk || k[j].span == NO_SPAN) break;
            /* a kernel of a later span is left for the ops issued in it */
            if (k[j].span == sp && fits(k[j].fns, want)) hit = j++;
        }
        prev = o;
        prev_k = hit;
        if (hit == SIZE_MAX) continue;
        matched++;
        *lag += (double)k[hit].start - (double)o->start;
        if (out) {
            next[base + hit] = base + hit + 1;
            out[ops[i].ci].kernel = k[hit].gi;
        }
    }
    return matched;
}

/* How far a kernel-channel interval may stick out of its CUPTI kernel when the placement
 * could not be checked against CUPTI (below): the plugin's calibration of the GPU timer to
 * host time measured 3-31 us off CUPTI's placement (H200s, NCCL 2.28). */
#define KCH_SLACK_NS 100000u

/* A slim process's times, resolved while its GPU records were there, or at its load without
 * them (model.h, comm_memo). Keys without times are never made so (tp_process_slim_comm),
 * but would give no read: zero times and an error. */
static int from_memo(const tp_process *p, tp_comm_time *out) {
    for (size_t i = 0; i < p->ncomm; i++) {
        const tp_comm_span *m = p->comm_memo ? &p->comm_memo[i] : &(tp_comm_span){0, 0, 0};
        out[i] = (tp_comm_time){m->start, m->end, m->src, SIZE_MAX, -1, 0, 0};
    }
    return p->comm_memo || !p->ncomm ? TPROF_OK : TPROF_ERR_INVALID_ARG;
}

/* A communicator's device: that of the stream its ops were aligned with. */
typedef struct comm_dev { uint64_t hash; int32_t device; } comm_dev;

static int cmp_comm_dev(const void *a, const void *b) {
    const comm_dev *x = a, *y = b;
    return x->hash < y->hash ? -1 : x->hash > y->hash;
}

/* The device of communicator `hash` in the n entries of d (hash order), -1 when it has none. */
static int32_t device_of(const comm_dev *d, size_t n, uint64_t hash) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d[mid].hash < hash) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && d[lo].hash == hash ? d[lo].device : -1;
}

/* Each communicator's ops (o[a..b), issue order) cut down in place to those the alignment
 * can give a kernel, first ones first; returns how many. An op issued while capture was off
 * takes a kernel only by sharing its predecessor's (one launch), so the cut keeps every op
 * issued in a capture span and, after a kept op, each next op issued before it ended. The
 * cut leaves every match as it was: an op left out took no kernel, and an op kept after one
 * left out shares nothing in either sequence, since ops go by issue time and the first op
 * left out after a kept one was issued after that one ended. So the alignment need not hold
 * the ops issued while capture was off, which a long job's windows leave the most of. */
static size_t matchable(const tp_process *p, const tp_step *cap, size_t ncap, oref *o,
                        size_t a, size_t b, size_t w) {
    tp_comm_cut c = {0, 0};
    for (size_t i = a; i < b; i++)
        if (tp_comm_cut_keeps(&c, cap, ncap, &p->comm[o[i].ci])) o[w++] = o[i];
    return w;
}

int tp_comm_cut_keeps(tp_comm_cut *c, const tp_step *cap, size_t ncap, const tp_comm_op *op) {
    int keep = op_span(cap, ncap, op->start) != NO_SPAN || (c->prev_kept && op->start < c->prev_end);
    c->prev_kept = keep;
    c->prev_end = op->end;
    return keep;
}

/* The matching rule (file comment, part 1) over p's ops and communication kernels: each
 * matched op's kernel and device into out, and each communicator's device into *devs (*ndev
 * of them, hash order; NULL when none, else the caller frees it). *aligned: 1 when there
 * were kernels and NCCL ops to align. TPROF_OK or TPROF_ERR_NO_MEMORY (out then as it was,
 * no device). */
static int match_kernels(const tp_process *p, tp_comm_time *out, int *aligned, comm_dev **devs,
                         size_t *ndev) {
    int rc = TPROF_OK;
    *aligned = 0;
    *devs = NULL;
    *ndev = 0;
    size_t nk = 0, no = 0;
    for (size_t i = 0; i < p->ngpu; i++) nk += is_comm_kernel(&p->gpu[i]);
    for (size_t i = 0; i < p->ncomm; i++) no += !is_mpi(&p->comm[i]);
    kref *k = NULL;
    size_t *next = NULL; /* the kernels' taken marks (untaken) */
    oref *o = NULL;
    span_ix *streams = NULL, *comms = NULL;
    tp_step *cap = NULL;
    size_t ncap = 0;
    /* no kernel to match an op to (a slim process's load): nothing to sort or align */
    if (!nk || !no) goto done;
    if (tp_capture_timeline(p, &cap, &ncap) != TPROF_OK) {
        rc = TPROF_ERR_NO_MEMORY;
        goto done;
    }
    *aligned = 1;
    const int unlisted = tp_capture_unlisted(p) > 0;
    k = tp_malloc(nk * sizeof *k);
    next = tp_malloc((nk + 1) * sizeof *next);
    o = tp_malloc(no * sizeof *o);
    if (!k || !next || !o) {
        rc = TPROF_ERR_NO_MEMORY;
        goto done;
    }
    nk = 0;
    for (size_t i = 0; i < p->ngpu; i++)
        if (is_comm_kernel(&p->gpu[i]))
            k[nk++] = (kref){p->gpu[i].start, i, p->gpu[i].device, p->gpu[i].stream,
                             kernel_fns(p->gpu[i].name),
                             kernel_span(cap, ncap, p->gpu[i].start, unlisted)};
    if ((no = ops_in_order(p, o)) == SIZE_MAX) {
        rc = TPROF_ERR_NO_MEMORY;
        goto done;
    }
    if (nk > 1) qsort(k, nk, sizeof *k, cmp_kref);
    for (size_t i = 0; i <= nk; i++) next[i] = i;
    size_t ns = 0, nc = 0;
    /* one entry a stream and a communicator: a rank file of millions of ops has a few */
    for (size_t i = 0; i < nk; i++)
        ns += !i || k[i].device != k[i - 1].device || k[i].stream != k[i - 1].stream;
#define HASH_AT(i) (p->comm[o[i].ci].comm_hash)
    for (size_t i = 0; i < no; i++) nc += !i || HASH_AT(i) != HASH_AT(i - 1);
    streams = tp_malloc(ns * sizeof *streams);
    comms = tp_malloc(nc * sizeof *comms);
    *devs = tp_malloc(nc * sizeof **devs);
    if (!streams || !comms || !*devs) {
        rc = TPROF_ERR_NO_MEMORY;
        goto done;
    }
    ns = nc = 0;
    for (size_t i = 0; i < nk; i++) {
        if (i && k[i].device == k[i - 1].device && k[i].stream == k[i - 1].stream) continue;
        if (ns) streams[ns - 1].b = i;
        streams[ns++] = (span_ix){i, nk, k[i].start};
    }
    /* each communicator by its first op (served in that order), then cut to the ops that
     * can match; one with none matches nothing and takes no stream */
    size_t w = 0;
    for (size_t a = 0, b; a < no; a = b) {
        for (b = a + 1; b < no && HASH_AT(b) == HASH_AT(a);) b++;
        uint64_t first = p->comm[o[a].ci].start;
        size_t w0 = w;
        w = matchable(p, cap, ncap, o, a, b, w);
        if (w > w0) comms[nc++] = (span_ix){w0, w, first};
    }
#undef HASH_AT
    if (nc > 1) qsort(comms, nc, sizeof *comms, cmp_first);
    for (size_t c = 0; c < nc && ns; c++) {
        size_t best = 0, best_s = 0;
        double best_lag = 0, lag;
        for (size_t s = 0; s < ns; s++) {
            lag = 0;
            size_t m = align(p, cap, ncap, o + comms[c].a, comms[c].b - comms[c].a,
                             k + streams[s].a, streams[s].b - streams[s].a, next, streams[s].a,
                             NULL, &lag);
            /* most matches; among equals, the stream whose kernels follow the issues soonest */
            if (m > best || (m == best && m && lag < best_lag)) {
                best = m;
                best_s = s;
                best_lag = lag;
            }
        }
        if (best) {
            align(p, cap, ncap, o + comms[c].a, comms[c].b - comms[c].a,
                  k + streams[best_s].a, streams[best_s].b - streams[best_s].a,
                  next, streams[best_s].a, out, &lag);
            /* the communicator's ops ran on that stream's device, matched or not */
            (*devs)[(*ndev)++] =
                (comm_dev){p->comm[o[comms[c].a].ci].comm_hash, (int32_t)k[streams[best_s].a].device};
        }
    }
    if (*ndev > 1) qsort(*devs, *ndev, sizeof **devs, cmp_comm_dev);
done:
    if (rc != TPROF_OK) {
        free(*devs);
        *devs = NULL;
        *ndev = 0;
    }
    free(k);
    free(next);
    free(o);
    free(streams);
    free(comms);
    free(cap);
    return rc;
}

/* 1 when op i gives a pair of the placement check: matched to a kernel that runs it alone
 * (uses: the ops of each kernel, up to 2), with a kernel-channel interval. */
static int pairs_with(const tp_process *p, const tp_comm_time *out, const uint8_t *uses,
                      size_t i) {
    const tp_comm_op *op = &p->comm[i];
    size_t ki = out[i].kernel;
    return !is_mpi(op) && ki != SIZE_MAX && uses[ki] == 1 &&
           (op->flags & TPROF_COMM_F_GPU_TIME) && op->gpu_end >= op->gpu_start;
}

/* What an op's resolution reads beside the op and its match: the process's kernels and one
 * device (when its kernels name one), the kernels' uses, the placement's points per device,
 * and the communicators' devices. Each op is then resolved alone (resolve_op). */
typedef struct resolver {
    const tp_process *p;
    int32_t single;      /* the process's one device; -1 none, -2 several */
    const uint8_t *uses; /* ops per matched kernel (up to 2), by index in p->gpu; may be NULL */
    const tp_cal_point *pts;
    const tp_cal_dev *devs;
    size_t ndevs;
    const comm_dev *cdev; /* communicators' devices, hash order */
    size_t ncdev;
} resolver;

/* Op op's interval, source, device and placement into *t, which holds its host interval and
 * its matched kernel (or SIZE_MAX). */
static void resolve_op(const resolver *r, const tp_comm_op *op, tp_comm_time *t) {
    const tp_process *p = r->p;
    if (is_mpi(op)) return; /* host time is the duration; no device */
    if (t->kernel != SIZE_MAX) t->device = (int32_t)p->gpu[t->kernel].device;
    else if (r->single >= 0) t->device = r->single;
    else t->device = device_of(r->cdev, r->ncdev, op->comm_hash);
    int channels = (op->flags & TPROF_COMM_F_GPU_TIME) != 0;
    int kernel = t->kernel != SIZE_MAX;
    uint64_t g0 = op->gpu_start, g1 = op->gpu_end, slack = KCH_SLACK_NS;
    if (channels && t->device >= 0) {
        int known = 0;
        int64_t d = tp_cal_at(r->pts, r->devs, r->ndevs, (uint32_t)t->device, g0, &known);
        if (known && (d < 0 || (uint64_t)d <= g0)) {
            g0 = (uint64_t)((int64_t)g0 - d);
            g1 = (uint64_t)((int64_t)g1 - d);
            t->shift_ns = d;
            t->checked = 1;
            slack = TP_CAL_SLACK_NS;
        }
    }
    if (kernel && channels) {
        /* CUPTI's record of the op's own kernel comes first (docs/design.md §5.2): the channel
         * interval starts ~3 us into the kernel. It counts only when the kernel runs this
         * op alone and holds its (placement-checked) channel interval; one that does not
         * is a wrong match (order-based matching shifts when CUPTI dropped records) */
        const tp_gpu_op *kr = &p->gpu[t->kernel];
        kernel = r->uses && r->uses[t->kernel] == 1 && kr->start <= g0 + slack &&
                 kr->end + slack >= g1;
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

/* What resolves another op of the file alone: the resolver and the arrays it points into. */
struct tp_comm_resolver {
    resolver r;
    comm_dev *cdev;
    uint8_t *uses;
    tp_cal_point *pts;
    tp_cal_dev *devs;
};

void tp_comm_resolver_free(tp_comm_resolver *k) {
    if (!k) return;
    free(k->cdev);
    free(k->uses);
    free(k->pts);
    free(k->devs);
    free(k);
}

void tp_comm_resolve_other(const tp_comm_resolver *k, const tp_comm_op *op, tp_comm_time *t) {
    static const resolver none = {.single = -1}; /* no kernel, match or placement point */
    *t = (tp_comm_time){op->start, op->end, TP_COMM_TIME_HOST, SIZE_MAX, -1, 0, 0};
    resolve_op(k ? &k->r : &none, op, t);
}

int tp_comm_resolve_keep(const tp_process *p, tp_comm_time *out, tp_comm_resolver **keep) {
    if (keep) *keep = NULL;
    if (p->comm_memo || !p->comm) return from_memo(p, out);
    for (size_t i = 0; i < p->ncomm; i++)
        out[i] = (tp_comm_time){p->comm[i].start, p->comm[i].end, TP_COMM_TIME_HOST, SIZE_MAX, -1, 0, 0};
    if (!p->ncomm) return TPROF_OK;
    int aligned = 0;
    tp_comm_resolver *k = tp_calloc(1, sizeof *k);
    if (!k) return TPROF_ERR_NO_MEMORY; /* out: the host intervals */
    k->r = (resolver){.p = p, .single = -1};
    int rc = match_kernels(p, out, &aligned, &k->cdev, &k->r.ncdev);
    k->r.cdev = k->cdev;
    /* the process's one device, when its kernels name only one: where its ops ran */
    for (size_t i = 0; i < p->ngpu; i++) {
        if (p->gpu[i].type != TPROF_REC_GPU_KERNEL) continue;
        if (k->r.single == -1) k->r.single = (int32_t)p->gpu[i].device;
        else if ((uint32_t)k->r.single != p->gpu[i].device) { k->r.single = -2; break; }
    }
    /* ops per matched kernel: a kernel that runs several ops (a group fused into one
     * launch) times none of them alone (without memory, none counts as alone) */
    uint8_t *uses = k->uses = tp_calloc(p->ngpu ? p->ngpu : 1, 1);
    for (size_t i = 0; uses && i < p->ncomm; i++)
        if (out[i].kernel < p->ngpu && uses[out[i].kernel] < 2) uses[out[i].kernel]++;
    k->r.uses = uses;
    /* the channel intervals' placement against the kernels that run one op each (each array
     * sized by what the one before it holds: a slim load, without kernels, makes none) */
    size_t npair = 0, npts = 0;
    for (size_t i = 0; uses && aligned && i < p->ncomm; i++) npair += pairs_with(p, out, uses, i);
    tp_cal_pair *pairs = npair ? tp_malloc(npair * sizeof *pairs) : NULL;
    npair = 0;
    for (size_t i = 0; pairs && i < p->ncomm; i++) {
        if (!pairs_with(p, out, uses, i)) continue;
        const tp_comm_op *op = &p->comm[i];
        const tp_gpu_op *kr = &p->gpu[out[i].kernel];
        /* centres, halved first: no overflow */
        int64_t d = ((int64_t)(op->gpu_start / 2 + op->gpu_end / 2) - (int64_t)(kr->start / 2 + kr->end / 2));
        pairs[npair++] = (tp_cal_pair){kr->device, kr->start, d};
    }
    if (npair > 1) tp_cal_sort(pairs, npair);
    if (npair && (k->pts = tp_malloc(npair * sizeof *k->pts)))
        npts = tp_cal_points(pairs, npair, k->pts);
    free(pairs);
    if (npts && (k->devs = tp_malloc(npts * sizeof *k->devs)))
        k->r.ndevs = tp_cal_devices(k->pts, npts, k->devs);
    k->r.pts = k->pts;
    k->r.devs = k->devs;
    for (size_t i = 0; i < p->ncomm; i++) resolve_op(&k->r, &p->comm[i], &out[i]);
    if (keep) *keep = k;
    else tp_comm_resolver_free(k);
    return rc;
}

int tp_comm_resolve(const tp_process *p, tp_comm_time *out) {
    return tp_comm_resolve_keep(p, out, NULL);
}

const tp_comm_time *tp_comm_times(const tp_process *p, tp_comm_time **owned) {
    static const tp_comm_time none; /* a process without ops: an array of none */
    *owned = NULL;
    if (p->comm_times) return p->comm_times;
    if (!p->ncomm) return &none;
    if (!(*owned = tp_malloc(p->ncomm * sizeof **owned))) return NULL;
    tp_comm_resolve(p, *owned); /* on failure it leaves host intervals, still valid */
    return *owned;
}

int tp_comm_resolve_once(tp_process *p) {
    if (p->comm_times || !p->ncomm || !p->comm || p->comm_memo) return TPROF_OK;
    /* not counted (alloc.h): without it each reader resolves its own, the same times; a
     * resolution cut short by memory is each reader's own to make again */
    tp_comm_time *t = malloc(p->ncomm * sizeof *t);
    if (!t || tp_comm_resolve(p, t) != TPROF_OK) {
        free(t);
        return TPROF_ERR_NO_MEMORY;
    }
    p->comm_times = t;
    return TPROF_OK;
}

static size_t ops_in_order(const tp_process *p, oref *o) {
    tp_idmap ids;
    tp_idmap_init(&ids);
    size_t *next = NULL, cap = 0, no = 0; /* by number: ops counted, then where the next goes */
    int oom = 0, made;
    for (size_t i = 0; !oom && i < p->ncomm; i++) {
        if (is_mpi(&p->comm[i])) continue;
        if (ids.n == cap) {
            size_t nc = cap ? 2 * cap : 16;
            size_t *g = tp_realloc(next, nc * sizeof *g);
            oom = !g;
            if (g) next = g, cap = nc;
        }
        size_t k = oom ? SIZE_MAX : tp_idmap_add(&ids, p->comm[i].comm_hash, &made);
        oom |= k == SIZE_MAX;
        if (!oom) next[k] = (made ? 0 : next[k]) + 1;
    }
    size_t nd = ids.n;
    comm_slot *d = oom ? NULL : tp_malloc((nd ? nd : 1) * sizeof *d);
    if (!d) {
        tp_idmap_free(&ids);
        free(next);
        return SIZE_MAX;
    }
    for (size_t k = 0; k < nd; k++) d[k] = (comm_slot){ids.ids[k], next[k], 0, k};
    qsort(d, nd, sizeof *d, cmp_slot);
    for (size_t k = 0, at = 0; k < nd; k++) {
        next[d[k].k] = d[k].at = at;
        at += d[k].n;
    }
    for (size_t i = 0; i < p->ncomm; i++) {
        if (is_mpi(&p->comm[i])) continue;
        o[next[tp_idmap_find(&ids, p->comm[i].comm_hash)]++] = (oref){i};
        no++;
    }
    for (size_t k = 0; k < nd; k++) {
        size_t a = d[k].at, b = a + d[k].n, j = a + 1;
        while (j < b && cmp_oref(&o[j - 1], &o[j], (void *)p) < 0) j++;
        if (j < b) qsort_r(o + a, b - a, sizeof *o, cmp_oref, (void *)p);
    }
    tp_idmap_free(&ids);
    free(next);
    free(d);
    return no;
}

/* ------------------------------------------------------------------ small helpers */

int tp_comm_push_span(tp_span **v, size_t *n, size_t *cap, uint64_t s, uint64_t e) {
    if (e <= s) return 0;
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 256;
        tp_span *nv = tp_realloc(*v, nc * sizeof *nv);
        if (!nv) return TPROF_ERR_NO_MEMORY;
        *v = nv;
        *cap = nc;
    }
    (*v)[(*n)++] = (tp_span){s, e};
    return 0;
}

/* ------------------------------------------------------------------ shared with the sections */

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

const char *tp_comm_time_source(const double src[3]) {
    int kinds = (src[0] > 0) + (src[1] > 0) + (src[2] > 0);
    return kinds > 1                       ? "mixed"
           : src[TP_COMM_TIME_GPU] > 0    ? "gpu"
           : src[TP_COMM_TIME_KERNEL] > 0 ? "kernel"
                                          : "host";
}

int tp_comm_is_kernel(const tp_gpu_op *g) { return is_comm_kernel(g); }

int tp_comm_device_spans(const tp_process *p, const tp_comm_time *tm, int has_device,
                         uint32_t device, tp_span **v, size_t *n, size_t *cap) {
    size_t n0 = *n;
    for (size_t i = 0; has_device && i < p->ngpu; i++) {
        if (p->gpu[i].device != device || !is_comm_kernel(&p->gpu[i])) continue;
        int rc = tp_comm_push_span(v, n, cap, p->gpu[i].start, p->gpu[i].end);
        if (rc != TPROF_OK) return rc;
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
            if (tp_comm_host_span(o) == 0 &&
                tp_comm_push_span(v, n, cap, o->start, o->end) != TPROF_OK)
                return TPROF_ERR_NO_MEMORY;
        } else if (has_device && !cupti_comm && tm[i].src == TP_COMM_TIME_GPU &&
                   tm[i].device >= 0 && (uint32_t)tm[i].device == device) {
            if (tp_comm_push_span(v, n, cap, tm[i].start, tm[i].end) != TPROF_OK)
                return TPROF_ERR_NO_MEMORY;
        }
    }
    return TPROF_OK;
}

/* Whether a torch.pg.* description names an NCCL backend ("backend=nccl ...", or
 * "backend=cpu:gloo,cuda:nccl ..." for a default group). */
int tp_comm_nccl_backend(const char *desc) {
    if (strncmp(desc, "backend=", 8)) return 0;
    const char *sp = strchr(desc, ' '), *nc = strstr(desc, "nccl");
    return sp && nc && nc < sp;
}
