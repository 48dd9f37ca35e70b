/*
 * comm.h — the communication analysis (comm.c: the timing rule, names and factors;
 * comm_keep.c: what a slim process keeps of its ops for the merge;
 * comm_rank.c: a rank's section; comm_run.c: across ranks; comm_text.c: the text): per
 * communicator and collective, count, bytes, time, algbw and busbw (nccl-tests
 * definitions); per step and rank, communication time split into exposed and overlapped; the
 * exposed-communication finding; and the timing rule the Chrome export shares with the report.
 */
#ifndef TPROF_COMM_H
#define TPROF_COMM_H

#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "analysis/idmap.h"
#include "analysis/model.h"
#include "analysis/results.h"
#include "analysis/steps.h"

/* Where an op's duration came from (order of preference: comm.c, part 1; docs/design.md §5.2). */
typedef enum tp_comm_src {
    TP_COMM_TIME_HOST = 0,   /* host interval of the call: the real duration for MPI's blocking
                              * calls, only the enqueue for NCCL */
    TP_COMM_TIME_KERNEL = 1, /* the CUPTI NCCL kernel matched to the op (comm.c, matching rule):
                              * first choice when it runs this op alone */
    TP_COMM_TIME_GPU = 2,    /* the record's own GPU interval (NCCL kernel-channel events) */
} tp_comm_src;

typedef struct tp_comm_time {
    uint64_t start, end; /* CLOCK_MONOTONIC ns of the process: the interval the duration uses */
    tp_comm_src src;
    size_t kernel;       /* index in p->gpu of the matched kernel, or SIZE_MAX */
    int32_t device;      /* device the op ran on (its kernel's, else its communicator's
                          * stream's), -1 when not known (MPI, or several devices and no
                          * kernel matched to its communicator) */
    int64_t shift_ns;    /* how far the op's kernel-channel interval was moved to agree with
                          * CUPTI's placement of the NCCL kernels (comm.c), when checked */
    int checked;         /* 1: the interval's placement was checked against CUPTI (shift_ns
                          * holds the correction, which may be 0) */
} tp_comm_time;

/* What a slim process keeps of an op's resolution (model.h, comm_memo): its interval and
 * the interval's source. */
typedef struct tp_comm_span {
    uint64_t start, end;
    tp_comm_src src;
} tp_comm_span;

/* Resolves the duration of every op of p: out[i] for p->comm[i] (out holds p->ncomm
 * entries). Returns 0 or TPROF_ERR_NO_MEMORY (out then holds host intervals). A slim process
 * (model.h) answers from its comm_memo when it has one: the interval and its source as
 * resolved, without the kernel (SIZE_MAX), the device (-1) or the placement check (0). */
int tp_comm_resolve(const tp_process *p, tp_comm_time *out);

/* The matching's cut (comm.c, matchable) over one communicator's ops in issue order, one op
 * at a time: 1 when it keeps op (issued in one of the ncap capture spans cap, as
 * tp_capture_timeline gives them, or sharing the kept op before it's launch). c starts
 * zeroed. */
typedef struct tp_comm_cut { int prev_kept; uint64_t prev_end; } tp_comm_cut;
int tp_comm_cut_keeps(tp_comm_cut *c, const tp_step *cap, size_t ncap, const tp_comm_op *op);

/* What resolves any other op of a file alone once some of its ops were resolved
 * (tp_comm_resolve_keep): the matches' devices, the process's one device, the kernels' uses
 * and the placement's points. Holds pointers into the process it was made from, which must
 * outlive it. */
typedef struct tp_comm_resolver tp_comm_resolver;

/* tp_comm_resolve, keeping in *keep (NULL: not kept) what resolves the file's other ops
 * alone: for a process holding the ops the matching can use (those issued in a capture
 * span, those sharing a kept op's launch, and each communicator's first: comm.c,
 * matchable), the other ops then resolve (tp_comm_resolve_other) as they would in a process
 * holding them all. *keep NULL without memory (out then holds host intervals, or what
 * tp_comm_resolve gives without memory). */
int tp_comm_resolve_keep(const tp_process *p, tp_comm_time *out, tp_comm_resolver **keep);
/* Op op (not one of the resolver's process's) resolved into *t: took no kernel. O(log).
 * r NULL: as a process without GPU records resolves it (a slim one). */
void tp_comm_resolve_other(const tp_comm_resolver *r, const tp_comm_op *op, tp_comm_time *t);
void tp_comm_resolver_free(tp_comm_resolver *r);

/* p's ops resolved (tp_comm_resolve), read without a copy: p->comm_times when p was resolved
 * once (tp_comm_resolve_once; *owned NULL), else an array resolved here (*owned: the same
 * array, which the caller frees); for a process without ops, an empty array (*owned NULL).
 * NULL without memory (*owned NULL). */
const tp_comm_time *tp_comm_times(const tp_process *p, tp_comm_time **owned);

/* Resolves p's ops once into p->comm_times, for the analyses of its rank section to share
 * (tp_comm_times). A process without ops, a slim one, or one already resolved is left as it
 * is. TPROF_OK or TPROF_ERR_NO_MEMORY (p->comm_times NULL: each reader resolves its own).
 * Memory: 56 bytes an op, held until p is freed or its times are taken
 * (tp_comm_times_kept). */
int tp_comm_resolve_once(tp_process *p);

const char *tp_comm_src_name(tp_comm_src s); /* "host", "kernel", "gpu" */
const char *tp_comm_algo_name(uint32_t algo); /* "RING", ... or "unknown" */
const char *tp_comm_proto_name(uint32_t proto);

/* nccl-tests' "size" S in bytes for one op of `bytes` per-rank payload on a communicator of
 * `nranks`: bytes x nranks for AllGather, ReduceScatter, AllToAll, Gather and Scatter (their
 * per-rank count is a 1/n share of S), else bytes. 0 for ops without a bandwidth (Barrier,
 * unknown). */
uint64_t tp_comm_size_bytes(uint32_t op, uint64_t bytes, uint32_t nranks);

/* nccl-tests' busbw/algbw factor: 2(n-1)/n for AllReduce, (n-1)/n for AllGather,
 * ReduceScatter, AllToAll, Gather, Scatter, 1 for Broadcast, Reduce, Send, Recv; 0 when the
 * op has no bandwidth or n is 0. */
double tp_comm_bus_factor(uint32_t op, uint32_t nranks);

/* What x's windows are, as the document says it ("per"): "step" (the measured steps), "span"
 * (no step and a load bounded in GPU records: the span held; results.h, in_span) or "run".
 * A static string. */
const char *tp_comm_exposure_per(const tp_comm_exposure_result *x);

/* The exposure rule's communication set, for other analyses (the step breakdown): appends to
 * *v (grown with realloc; *n used, *cap allocated) the spans during which device `device` of p
 * communicated: its communication-class kernels (CUPTI); the ops' own GPU intervals on it
 * when it has no such kernel; and the blocking MPI calls and waits (the host is blocked in
 * them). has_device 0: no GPU records (a CPU job), only the MPI calls. tm: tp_comm_resolve's
 * output for p. Returns TPROF_OK (0), or TPROF_ERR_NO_MEMORY (the spans appended so far stay
 * in *v). A section reading its ops apart has the blocking calls of the ops it does not hold
 * in tp_comm_stream_host(p, 0) besides, a source of the caller's union. */
int tp_comm_device_spans(const tp_process *p, const tp_comm_time *tm, int has_device,
                         uint32_t device, tp_span **v, size_t *n, size_t *cap);

/* The spans of n resolved ops, what a slim process keeps of them (comm_memo): written over
 * t, whose block they take, shrunk to their size. NULL for n = 0, or without memory (t is
 * then freed). */
tp_comm_span *tp_comm_spans(tp_comm_time *t, size_t n);

/* The collectives a slim process keeps of a long run (tp_process.comm_level), so that the
 * merge, which holds every rank's kept ops at once (about 52 bytes an op: key, memo span,
 * arrival and its index), stays bounded whatever the run's length and, up to 8192 ranks,
 * whatever their number. A rank file with more than tp_comm_keep_of() ops (TP_COMM_KEEP
 * unless configured, fewer past 1024 ranks) keeps no op the merge never matches (send,
 * recv, unknown, unfinished): level 1 when its collectives are then within the bound.
 * Past it, level >= 2 keeps, on every communicator, the collectives whose sequence numbers
 * lie in the first TP_COMM_WINDOW (window 0) or in the last TP_COMM_WINDOW of each period of
 * TP_COMM_WINDOW << (level - 1), the least level that leaves at most the bound and some:
 * windows spread over the whole run. Window 0 at every level, so that a short communicator
 * (one used at start-up, which may be all that links two hosts) keeps its first collectives
 * for the clocks; the last window of each period, not the first, so that a deep level's few
 * windows lie after the warm-up (whose lags the stragglers leave out): with many
 * communicators (16 fill a bound of 1024 with their window 0 alone), the level chosen keeps
 * a window past the first where one is (tp_comm_level). Whole windows of consecutive
 * collectives, not every k-th one: the straggler rule takes each step's largest start lag,
 * which one collective of the step (the first gradient all-reduce under DDP) may hold alone,
 * so most steps of a window keep all of its collectives. A period is a multiple of every
 * shorter one, so a collective kept at one level is kept at every lower one: the merge
 * filters each communicator at the highest level any of its ranks chose (clocks.c), and
 * every rank of the collectives it keeps has them. */
#define TP_COMM_KEEP 8192u
#define TP_COMM_WINDOW 64u
/* a period of 2^32, the whole range of sequence numbers: window 0 and the last window alone */
#define TP_COMM_LEVEL_MAX 27u

/* The merge's budget for every rank's kept ops together, when the bound is not configured:
 * 2^23 ops, about 330 MB at 40 bytes an op (key and memo span; the arrivals and their
 * index add 12 more), so that a job of more than 1024 ranks keeps fewer a rank file
 * (tp_comm_keep_of) and the merge stays within it up to TP_COMM_MERGE_OPS / TP_COMM_KEEP_MIN
 * ranks (8192); past that, TP_COMM_KEEP_MIN a rank (41 kB). */
#define TP_COMM_MERGE_OPS (1u << 23)
#define TP_COMM_KEEP_MIN 1024u

/* The configured bound: what tp_comm_keep_set set (the command sets it from
 * TRAINPROF_COMM_KEEP, cli/common.c), 0 when none was (the bound then follows each file's
 * world size, tp_comm_keep_of). The summaries' slim key holds it, so that a summary made
 * under another bound is made again. Thread safe. */
size_t tp_comm_keep(void);
/* Sets the bound: keep ops a rank file, for every file whatever its world size
 * (TP_COMM_KEEP_MIN at least: a smaller value is taken as that; 0: not configured). Not to
 * be called while a load or a report runs. */
void tp_comm_keep_set(size_t keep);
/* The bound on p's rank file: the configured one (tp_comm_keep), else TP_COMM_MERGE_OPS
 * divided by the world size its metadata names ("world_size"), within [TP_COMM_KEEP_MIN,
 * TP_COMM_KEEP]: TP_COMM_KEEP up to 1024 ranks, or when the file names no world size. Reads
 * p's metadata (no allocation); thread safe. */
size_t tp_comm_keep_of(const tp_process *p);
/* 1 when key k is kept at level (0: every op is; 1: every collective the merge matches). */
int tp_comm_kept(const tp_comm_key *k, unsigned level);
/* The sample's period at level: TP_COMM_WINDOW << (level - 1) sequence numbers, 0 below 2
 * (no collective left out). */
double tp_comm_period(unsigned level);
/* Key k's class: the trailing one bits of its window's number (seq / TP_COMM_WINDOW), at most
 * TP_COMM_LEVEL_MAX - 1, which window 0 has too: a collective is kept up to level class + 1. */
unsigned tp_comm_class(const tp_comm_key *k);
/* The level p's ops are kept at (above): 0 when it has at most tp_comm_keep_of(p), or when its
 * level would keep every op; 1 when its collectives are within the bound, or when no level
 * leaves any of them out without leaving all; else the least level >= 2 that keeps at most
 * that many and at least one. When none does (more communicators than the bound holds
 * windows: their window 0 alone is past it), the deepest level that keeps a window past
 * window 0, else the deepest that keeps some; of levels that keep as many, the least: more
 * than the bound. Never a level that keeps no collective of a file that has some. One pass
 * over the ops' keys; no allocation. */
unsigned tp_comm_level(const tp_process *p);
/* tp_comm_level from the keys one at a time (tp_comm_level_add, each op's, in any order):
 * what it counts of them, and its decision (tp_comm_level_end, for a process of n ops whose
 * bound is keep). */
typedef struct tp_comm_levels {
    size_t hist[TP_COMM_LEVEL_MAX]; /* collectives per class (tp_comm_class) */
    size_t all, first;              /* collectives; those in window 0 */
} tp_comm_levels;
void tp_comm_level_add(tp_comm_levels *c, const tp_comm_key *k);
unsigned tp_comm_level_end(const tp_comm_levels *c, size_t n, size_t keep);

/* Replaces slim process p's tp_comm_ops by their keys, the last op and the times resolved
 * without GPU records (tp_process.comm_keys, comm_last, comm_memo): what the run-level
 * readers take of them, 72 bytes an op where the ops and their memo took 136. Past
 * tp_comm_keep_of(p) ops it keeps those of its level alone (tp_comm_level; comm_level set, ncomm
 * their count; comm_last is still the file's last op). Without memory p is left as it was
 * (those readers take either form). A process without ops is left too. */
void tp_process_slim_comm(tp_process *p);

/* tp_process_slim_comm as a slim load reads the ops (model.c), so that it never holds them:
 * each op's key and memo span as it comes (tp_slim_comm_op, a tp_comm_read's fn), those of
 * a level holding at most four times the most a file may keep (raised as they come: the
 * levels are nested), the keys counted and the communicators gathered; tp_slim_comm_end then
 * gives p the form tp_process_slim_comm gives it (the same keys, memo, level, last op and
 * communicators, and its nrec_comm and nrec_twins), or 0 when it cannot: the file is then
 * read again with its ops (0; 1 when p holds the form). It cannot when torch.distributed's
 * ops are twins or not by metadata (beside MPI's), or are kept beside MPI's (enqueue-flagged,
 * without the plugin's), when the level is shallower than the one held, or without memory.
 * A file of torch's ops alone (a PyTorch job without NCCL's profiler plugin) has them all;
 * until another op comes they are held a second time apart. Memory: the held ops (40 bytes
 * each, twice while torch's are alone) and the communicators (idmap.h). */
typedef struct tp_slim_comm {
    tp_comm_key *keys;    /* the ops held (those of `level`), n of cap */
    tp_comm_span *memo;
    size_t n, cap;
    unsigned level;       /* the level held */
    size_t bound;         /* held past this: a deeper level */
    size_t next;          /* held past this: the next try for one */
    size_t seen;          /* the file's ops */
    tp_comm_levels lv;
    tp_comm_op last;      /* tp_comm_last's op */
    int has_last;
    tp_idmap comms;       /* the collectives' communicators */
    size_t twins;         /* torch's enqueue-flagged ops: twins of the plugin's ones */
    size_t torch_host;    /* torch's other ops (host-timed backends) */
    int nccl, mpi, other; /* the file has plugin ops; MPI ops; ops not torch's */
    struct tp_slim_comm *torch; /* torch's ops, while no other has come */
    int failed;
} tp_slim_comm;
void tp_slim_comm_init(tp_slim_comm *s);
int tp_slim_comm_op(void *ctx, const tp_comm_op *op, size_t i);
int tp_slim_comm_end(tp_slim_comm *s, tp_process *p);
void tp_slim_comm_free(tp_slim_comm *s);
/* How many times in this process tp_slim_comm_end gave 0 (a file read again with its ops):
 * for tests, which tell the path taken by it. Thread-safe. */
size_t tp_slim_comm_again(void);

/* 1 when communicator hash is one of slim process p's comm_comms (binary search). */
int tp_comm_comms_has(const tp_process *p, uint64_t hash);

/* The times of whole (a rank file read again whole) of the ops slim process p keeps of that
 * file (its level's, above), in their order: p->ncomm of them, owned by the caller; what the
 * rank section gives its process's memo (report.c). Takes whole's times resolved once
 * (whole->comm_times, then NULL) rather than resolving them again. NULL without memory, or
 * when whole does not hold p's ops: a file read again that holds another count, or keeps
 * another level, cannot stand for them. Memory: whole->ncomm times (56 bytes each), the
 * ones taken or resolved here. */
tp_comm_time *tp_comm_times_kept(tp_process *whole, const tp_process *p);

/* A rank section whose file holds more communication ops than it may hold (more than
 * `bound`, TP_SECTION_COMM_OPS by default): they are read apart from the section's read, in
 * passes over the file (tp_process_read_comm), so that the section holds the ops the
 * matching needs, the communicators, the rows and the memo, not every op.
 * tp_comm_stream_open (after the section's read, which kept no op: tp_gpu_bound.comm) reads
 * the file once for the ops the matching needs (comm.c, matchable, and each communicator's
 * first; more than bound of them and than half the file's, as when capture was on over
 * most of the run, is a whole read, which holds no more) into whole->comm, resolves them,
 * and hangs the stream on whole->comm_stream; the communication section then reads the
 * file again for every op in the file's order (comm_rank.c), and the memo is taken from it
 * (tp_comm_stream_kept). Host-timed ops (MPI, torch's gloo) are the communication spans
 * of the exposure and the step breakdown: the first pass keeps each communicator's first
 * op and the others' spans (tp_comm_stream_host), 16 bytes an op up to the bound, then
 * written in sorted runs to a temporary file (span_store.h). Ops read apart
 * must not need each other beyond that and the matching: a file with more ops kept than
 * the bound and half its ops, torch's ops whose twins go by the file's other ops (its NCCL
 * ops beside the plugin's or MPI's, other than the plugin's twins; its gloo ops beside
 * MPI's: model.c, drop_torch_twins), ops of one communicator out of issue order, or GPU
 * intervals where a device has kernels but no NCCL kernel (then the intervals are its
 * communication spans), is read whole: 0 is returned and
 * whole is left for the caller to read again with its ops (the section's figures are the
 * same either way). 1 when the stream stands; -1 on an error (an unreadable file, memory),
 * whole then left as well. */
#define TP_SECTION_COMM_OPS (1u << 20)
int tp_comm_stream_open(tp_run *run, const tp_process *slim, tp_process *whole, size_t bound);
/* The spans of the host-timed ops of p's stream that p->comm does not hold, finished ones
 * alone (start, end: host CLOCK_MONOTONIC ns), walked in start order (span_store.h,
 * tp_span_walk_open): nonblocking 0 the blocking calls and waits, 1 the nonblocking ops
 * (call to observed completion). The bound's spans held, the others in a temporary file.
 * NULL without a stream (a walk of it gives none). Owned by the stream (freed with p). */
struct tp_span_store;
const struct tp_span_store *tp_comm_stream_host(const tp_process *p, int nonblocking);
/* 1 when a pass of whole's stream failed (its file changed or went while read); 2 when a
 * walk of its host spans could not read them back from their temporary file (span_store.h);
 * else 0. Either way its section's figures may be of two files, or short, and are not to be
 * shown. */
int tp_comm_stream_failed(const tp_process *whole);
/* 1 when slim process p's section reads its ops apart: its file holds more than bound
 * (0: TP_SECTION_COMM_OPS; SIZE_MAX: never). */
int tp_comm_apart(const tp_process *p, size_t bound);
/* A pass over the stream's ops in the file's order, every op resolved and given to the
 * section's sums a (comm_acc.h; comm_rank.c). 0, or the load's error (a, and the memo,
 * then hold a part of the ops). */
struct comm_acc;
int tp_comm_stream_feed(const tp_process *whole, struct comm_acc *a);
/* tp_kth's passes (spans.h) over the shifts of the stream's ops whose placement was checked
 * (tp_comm_shift_key's keys, comm_acc.h), a read of the file each. 0, or the load's error. */
struct tp_kth;
int tp_comm_stream_kth(const tp_process *whole, struct tp_kth *q);
/* The memo's times (tp_comm_times_kept's) from the stream's pass over every op; NULL as
 * there. Taken: the caller frees them. */
tp_comm_time *tp_comm_stream_kept(tp_process *whole, const tp_process *slim);
void tp_comm_stream_free(struct tp_comm_stream *s);
/* How many sections of this process read their ops apart (tp_comm_stream_open gave 1):
 * for tests, which tell the path taken by it. Thread-safe. */
size_t tp_comm_streams_opened(void);

/* 1 when the op's host interval is its duration: an MPI call, or a torch.distributed call of a
 * backend that runs on the host (gloo, mpi, ucc, ...); 0 for NCCL's (the plugin's, or torch's
 * over NCCL), whose host interval is only the enqueue. */
int tp_comm_host_timed(uint32_t source, uint32_t flags); /* an op's (or key's) fields */
/* What host-timed op o gives the exposure and the step breakdown: 0 the span of a blocking
 * call or wait (the host was blocked), 1 that of a nonblocking op (call to observed
 * completion: the host was free meanwhile), -1 none (not host-timed, or unfinished). */
int tp_comm_host_span(const tp_comm_op *o);
/* 1 when op is torch.distributed's record of an NCCL call (enqueue-flagged) in a file where
 * NCCL's profiler plugin recorded ops (`plugin`): the twin of the plugin's record of the same
 * call, which a whole load drops (model.c, drop_torch_twins), as it drops those of the first
 * calls of a PyTorch job's communicators, made before the plugin records them. */
int tp_comm_torch_twin(const tp_comm_op *op, int plugin);

/* The backend that carried the op: "nccl" and "mpi" for the NCCL plugin's and the MPI
 * wrappers' records; for torch.distributed's, the backend of its process group as
 * trainprof.torch described it (metadata torch.pg.<id>, "backend=B ..."; of a device-mapped
 * backend such as "cpu:gloo,cuda:nccl", the one that ran it), else "torch". Written into buf
 * (n bytes); returns buf. */
const char *tp_comm_backend(const tp_process *p, const tp_comm_key *o, char *buf, size_t n);

/* "nccl", "mpi", "torch" or "unknown": the record's source (TPROF_COMM_SRC_*). */
const char *tp_comm_source_name(uint32_t source);

/* The op's name in the document ("AllReduce", ...; the record's own name for an op outside
 * the table). Points into a static table or into p's run. */
const char *tp_comm_op_name(const tp_comm_op *o);

/* Appends [s, e) to *v (grown with realloc; *n used, *cap allocated) when e > s. Returns
 * TPROF_OK (0), or TPROF_ERR_NO_MEMORY (*v unchanged). */
int tp_comm_push_span(tp_span **v, size_t *n, size_t *cap, uint64_t s, uint64_t e);

/* Whether a torch.pg.* description names an NCCL backend ("backend=nccl ...", or
 * "backend=cpu:gloo,cuda:nccl ..." for a default group). */
int tp_comm_nccl_backend(const char *desc);

/* The document's "time_source" of ops timed src[k] times by each tp_comm_src k: "gpu",
 * "kernel", "host", or "mixed" when more than one. */
const char *tp_comm_time_source(const double src[3]);

/* 1 when g is a kernel of the communication class (tp_kernel_class). */
int tp_comm_is_kernel(const tp_gpu_op *g);

/* The rank's communication: fills *out (results.h; its arrays owned by it, freed with
 * tp_rank_result_free; strings into p's run) and adds "communication" to the rank's JSON
 * from it. st/nst: the measured steps (NULL/0: the whole run of the process is one window);
 * cst/ncst: those of them in which GPU activity was recorded (capture.h), the windows of the
 * exposure on the GPU basis (none of them with measured steps: no exposure figures). */
void tp_comm_rank_section(cJSON *rank, tp_comm_result *out, const tp_process *p,
                          const tp_step *st, size_t nst, const tp_step *cst, size_t ncst);

/* algbw (GB/s, GB = 1e9 bytes) and the time it is over (ms) of a row's ops with a real
 * duration, the document's "algbw_gbs" and "bw_time_ms": 1 when the row has them, else 0 with
 * both set to 0 (no such op, or an op without a bandwidth). */
int tp_comm_row_bw(const tp_comm_row_result *r, double *algbw_gbs, double *bw_time_ms);

/* Computes the run-level communication (communicators across ranks, exposure across ranks)
 * into res->comm from the ranks' typed results (res->ranks[].comm; free it with
 * tp_comm_run_result_free, which tp_run_results_free calls), adds "communication" to the
 * report from it, and appends the exposed-communication
 * finding to res->findings (findings.h) when the worst rank's exposed share exceeds
 * warn_share (warning) or crit_share (critical). Returns that finding's index in
 * res->findings, or SIZE_MAX when none. */
size_t tp_comm_run_section(cJSON *rep, const tp_run *run, tp_run_results *res,
                           double warn_share, double crit_share);

void tp_comm_run_result_free(tp_comm_run_result *r);

/* Text rendering of the rank's section (comm_rank_text.c) and of the run's (comm_text.c),
 * from their typed results. B/N: bold on/off sequences. */
void tp_comm_rank_text(FILE *f, const tp_comm_result *comm);
void tp_comm_run_text(FILE *f, const tp_comm_run_result *comm, const char *B, const char *N);

/* Writes a byte count as "12 B", "1.5 KiB", ... "TiB" (binary units). */
void tp_comm_put_bytes(FILE *f, double bytes);

#endif /* TPROF_COMM_H */
