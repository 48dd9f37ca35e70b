/*
 * model.h — a run loaded into memory: processes, their threads, ranges, marks, counters
 * and step events, with names resolved and every string valid UTF-8.
 *
 * Built by tp_run_load() from the .tprof files of a directory; read by steps.c, report.c
 * and the exporters. All memory belongs to the tp_run and is freed by tp_run_free().
 * Times are CLOCK_MONOTONIC ns of the process that recorded them; tp_to_realtime() maps
 * them onto the shared wall clock through the file's start clock pair.
 *
 * What a file may claim is bounded here, once, so that the analyses' arithmetic cannot
 * overflow on a damaged or forged file: every time the model holds (the header's start
 * pair included) is below TPROF_TIME_MAX (2^62 ns), so the difference of two fits an
 * int64_t; a communication op's nranks and rank fit an int. Records that break these are
 * malformed: skipped and counted in the process's damage.
 */
#ifndef TPROF_MODEL_H
#define TPROF_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "format/format.h"

enum {
    TP_R_ASYNC = 1,       /* opened with range_start/end (may cross threads) */
    TP_R_UNCLOSED = 2,    /* never ended (unterminated): end = the last time it is known to
                           * have been open. A thread range (push/pop) ends only on its own
                           * thread (NVTX: nesting is kept per thread and domain), so that is
                           * its thread's last event: the thread may have exited, and nothing
                           * later is known of it. A process range (start/end) may end on any
                           * thread, so that is the end of the process's record. */
    TP_R_NESTED_SAME = 4, /* inside a range of the same name and domain (recursion): its
                           * time is already in that ancestor's inclusive time */
};

/* trainprof.torch's module-detail ranges ("nn.Module: decoder.layers.3", in the GPU capture
 * plan's steps only: python/trainprof/torch.py): instrumentation around work already inside
 * a phase, so they are transparent to exclusive time and left out of the per-step range
 * tables (present in a few steps, a per-step figure of them would be off by the plan's
 * ratio); the memory analysis names peaks with them. A range of that name from any source is
 * read the same way: torch.profiler names its module events so (an imported trace's
 * python_function "nn.Module: Linear_0"), and a program's own range of that name claims to be
 * one. */
#define TP_MODULE_RANGE_PREFIX "nn.Module: "
static inline int tp_module_range(const char *name) {
    return name && !strncmp(name, TP_MODULE_RANGE_PREFIX, sizeof TP_MODULE_RANGE_PREFIX - 1);
}

typedef struct tp_range {
    const char *name;
    uint64_t start, end;
    uint64_t child_ns; /* sum of the synchronous ranges directly inside it on its thread,
                        * whatever their domain (0 for async ranges) */
    int32_t parent;    /* index in the thread's ranges, -1 for none */
    uint32_t domain;   /* index into the process's domain names, 0 = default */
    uint32_t category;
    uint16_t depth;
    uint16_t flags;
    uint32_t end_tid;  /* thread that ended an async range (os tid), else 0 */
} tp_range;

typedef struct tp_mark {
    const char *name;
    uint64_t ts;
    uint32_t domain, category;
} tp_mark;

typedef struct tp_counter {
    const char *name;
    uint64_t ts;
    double value;
} tp_counter;

typedef struct tp_stepev {
    uint64_t step;
    uint64_t ts;
    int begin;
} tp_stepev;

typedef struct tp_thread {
    uint32_t serial, os_tid;
    const char *name; /* NULL if never named */
    tp_range *ranges;
    size_t nranges, cap_ranges;
    tp_mark *marks;
    size_t nmarks, cap_marks;
    tp_counter *counters;   /* NULL in a slim process that packed them (counter_pack.h):
                             * read them through tp_counter_it, which reads either form */
    size_t ncounters, cap_counters;
    uint8_t *counters_packed; /* slim: its ncounters counters packed, owned; NULL when they
                               * are in counters */
    size_t counters_packed_len;
    struct tp_cpack_spilled *counters_spilled; /* slim: the first bytes of its packed
                               * counters, written out to a temporary file when they grew
                               * long (counter_pack.h), owned; NULL when all are in
                               * counters_packed */
    const char **counter_names; /* the packed counters' names by index (the run's strings),
                                 * owned */
    size_t ncounter_names;
    tp_stepev *steps;       /* NULL in a slim process that packed them (step_pack.h) */
    size_t nsteps, cap_steps;
    uint8_t *steps_packed;  /* slim: its nsteps step events packed (tp_thread_stepevs reads
                             * either form), owned; NULL when they are in steps, or written
                             * out (steps_spilled) */
    size_t steps_packed_len;
    struct tp_spill_block *steps_spilled; /* slim: the packed events written out to the
                                           * temporary file when long (step_pack.h), owned;
                                           * steps_packed_len bytes */
    uint64_t dropped;
    uint64_t first_ts, last_ts; /* 0 when it recorded nothing */
    uint64_t unmatched_pops;    /* pops of this thread with no range open in their domain
                                 * (NVTX: nvtxRangePop returns a negative level): ignored */
    uint64_t first_unmatched_pop_ts; /* the first of them, 0 when none */
    uint64_t unmatched_pops_after_drops; /* of them, those after the thread's ring dropped
                                          * events (a tp_drop_window of the thread starts
                                          * before them): their push was likely dropped */
    uint64_t events;
} tp_thread;

/* One GPU interval from CUPTI: a kernel, copy, memset or synchronisation (`type` is the
 * record kind, TPROF_REC_GPU_*), or a CUDA runtime call (in tp_process.api). */
/* Kernel classes (analysis/gpu.c's table), stored per kernel at load time. */
enum { TP_KC_COMM = 0, TP_KC_ATTENTION, TP_KC_GEMM, TP_KC_ELEMENTWISE, TP_KC_OTHER, TP_KC_COUNT };

enum {
    TP_GPU_CLIPPED = 1, /* its end was cut back to its stream's order (tp_gpu_clip_to_streams) */
};

typedef struct tp_gpu_op {
    uint64_t start, end;
    uint64_t bytes;
    const char *name; /* kernels: demangled; API calls: the function */
    uint32_t device, stream, correlation, kind, os_tid, graph;
    uint16_t type;
    uint8_t cls;      /* kernels: TP_KC_*, from the name; others TP_KC_OTHER */
    uint8_t flags;    /* TP_GPU_CLIPPED */
} tp_gpu_op;

/* A GPU record whose end contradicted its stream's order, as CUPTI recorded it: `index` in
 * tp_process.gpu, the recorded end, and what contradicted it (TP_CLIP_*). */
enum { TP_CLIP_NEXT = 1, TP_CLIP_SYNC = 2 };
typedef struct tp_gpu_clip {
    size_t index;
    uint64_t recorded_end;
    uint32_t why;
} tp_gpu_clip;

/* What a load bounded in GPU records left out after its span on one stream: the first of its
 * device work records (kernel, copy, memset) that began after the span. Its start still
 * bounds the end of the last record held on that stream, as the record would in a whole load
 * (gpu.c, tp_gpu_clip_to_streams); graph: its CUDA graph (0: none), whose own nodes it does
 * not bound. past_graph: the start of the first record left out there that is not a node of
 * that graph (UINT64_MAX: none), which bounds a held node of the graph instead, as it would
 * in a whole load (a graph's nodes run on past the span's end). Times in ns. */
typedef struct tp_gpu_fence {
    uint64_t start, past_graph;
    uint32_t device, stream, graph;
} tp_gpu_fence;

typedef struct tp_gpu_mem {
    uint64_t ts, address, bytes;
    uint32_t device, op, memory_kind;
} tp_gpu_mem;

/* One communication op (TPROF_REC_COMM_OP), e.g. from the NCCL profiler plugin: start and
 * end are host times (for NCCL: the call until it was enqueued). */
typedef struct tp_comm_op {
    uint64_t start, end;         /* host interval of the call */
    uint64_t gpu_start, gpu_end; /* GPU-side interval when flags has TPROF_COMM_F_GPU_TIME */
    uint64_t bytes, count, comm_hash;
    const char *name; /* docs/design.md §5.2 op name, or the source's when op is unknown */
    uint32_t seq, nranks, rank, op, algo, proto, peer, flags, nchannels, source;
    uint32_t os_tid;  /* thread that recorded it */
    uint32_t dtype;   /* enum tprof_comm_dtype */
} tp_comm_op;

/* What the run-level analyses read of a communication op beside its resolved times: the
 * clocks' matching key (communicator, op, sequence number; clocks.c) and what tells its
 * timing and backend (flags, source; comm.h). A slim process keeps this, 16 bytes, in place
 * of each tp_comm_op, 112 (tp_process.comm_keys): with the op's memo span, the most it holds
 * of each op for the merge. The narrow fields hold every value the format defines; a file's
 * value past them (no capture writes one) is read as unknown (tp_comm_key_of). */
typedef struct tp_comm_key {
    uint64_t comm_hash;
    uint32_t seq;     /* as in tp_comm_op */
    uint16_t flags;   /* TPROF_COMM_F_*: the op's low 16 bits, where every flag lies */
    uint8_t op;       /* enum tprof_comm_op; TPROF_COMM_UNKNOWN for a value past 255 */
    uint8_t source;   /* TPROF_COMM_SRC_*; 0 (no known source) for a value past 255 */
} tp_comm_key;

typedef struct tp_kv {
    const char *key, *value;
} tp_kv;

/* Events a thread's ring dropped (it was full), placed in time: they were recorded between
 * `from` (the thread's last event before the flush that reported them) and `to` (its first
 * event after that flush, or the end of the process's record), CLOCK_MONOTONIC ns. */
typedef struct tp_drop_window {
    uint64_t from, to, count;
    uint32_t os_tid;
} tp_drop_window;

/* A rank; a helper process (a launcher agent, a data-loader worker, ...); or the node
 * sampler `trainprof run` starts (meta trainprof.role = node-sampler: NVML series of the
 * host's GPUs, no rank of its own). */
typedef enum tp_role { TP_ROLE_RANK = 0, TP_ROLE_HELPER = 1, TP_ROLE_SAMPLER = 2 } tp_role;

/* Samples in tp_process.gpu_starts. */
#define TP_GPU_STARTS 256

typedef struct tp_process {
    const char *path;
    tprof_file_header hdr;
    int rank, world_size, local_rank; /* -1 when unknown */
    int rank_implied;                 /* no launcher told: the report assumed rank 0 */
    tp_role role;
    int helper_of;                    /* rank a helper belongs to, -1 if none */
    int launched;                     /* ranks on its host whose parent it is: a launcher
                                       * (torchrun's agent, mpirun); 0 otherwise */
    int launched_lo, launched_hi;     /* the lowest and highest of those ranks */
    /* The metadata, one entry per key holding its last value (docs/format.md: the last value
     * of a key wins), at the place the key was first written; the capture switches
     * (capture.detail_on_ns/off_ns, kernel_steps.on_ns/off_ns), which readers take one record
     * each, keep every record in the file's order. */
    tp_kv *meta;
    size_t nmeta, cap_meta;
    const char **domains; /* [0] = "" (default) */
    size_t ndomains;
    struct tp_category { uint32_t domain, id; const char *name; } *categories;
    size_t ncategories;
    tp_thread *threads;
    size_t nthreads;
    char **damage; /* one line each */
    size_t ndamage;
    int complete;           /* END_OF_FILE record seen */
    int end_signal;         /* the signal that ended the process (END_OF_FILE's arg), 0 for
                             * a normal end or without an end record */
    uint64_t end_mono;      /* from END_OF_FILE, else the last event */
    uint64_t dropped;       /* sum over threads and the process stream (or the end record's
                             * total when larger) */
    uint64_t end_dropped;   /* total from the END_OF_FILE record */
    uint64_t events;
    uint64_t first_ts, last_ts;
    uint64_t unknown_ends;  /* range_end ids never started */
    tp_drop_window *drops;  /* ring drops placed in time, in file order */
    size_t ndrops, cap_drops;
    uint64_t drops_unplaced; /* dropped events no thread's chunks place in time: the process
                              * stream's, those of threads that got no ring, and any the end
                              * record counts beyond the threads' */
    tp_gpu_op *gpu;         /* kernels, copies, memsets, syncs, in start order */
    size_t ngpu, cap_gpu;
    tp_gpu_op *api;         /* CUDA runtime calls */
    size_t napi, cap_api;
    tp_gpu_op *ovh;         /* CUPTI's overhead records (name: what it did; kind: CUPTI's) */
    size_t novh, cap_ovh;
    tp_gpu_mem *gmem;       /* device memory allocations and releases */
    size_t ngmem, cap_gmem;
    uint64_t cupti_dropped; /* records CUPTI itself dropped */
    /* A whole load bounded in GPU records (tp_process_load_bounded) whose file held more
     * than the bound keeps those that began in [gpu_window_from, gpu_window_to) alone, both
     * 0 otherwise: kernels, copies, memsets, syncs and API calls, but not the kernels of the
     * communication class, overhead records or allocations (read whole). gpu_held counts
     * those it kept, gpu_left_out those it left; gpu_bound is the bound. */
    uint64_t gpu_window_from, gpu_window_to;
    size_t gpu_held, gpu_left_out, gpu_bound;
    tp_gpu_fence *gpu_fences; /* a bounded load's: per stream, its first record left out after
                               * the span (at most TP_GPU_FENCES_MAX streams), owned */
    size_t ngpu_fences;
    /* Slim: the start times of every gpu_stride-th of its GPU records and API calls
     * (overhead records apart) in file order, gpu_nstarts of them (TP_GPU_STARTS / 2 to
     * TP_GPU_STARTS once there are that many records: each time the array fills, every
     * other is dropped and the stride doubles): a systematic sample of the records, whose
     * sorted times give their quantiles within a stride's records whatever their order or
     * outliers, where a bounded load places its window. */
    uint64_t gpu_starts[TP_GPU_STARTS];
    uint64_t gpu_stride;
    size_t gpu_nstarts;
    tp_gpu_clip *clips;     /* records of gpu[] clipped to their stream's order, by index */
    size_t nclips;
    uint64_t clipped_ns;    /* recorded time those clips removed */
    tp_comm_op *comm;       /* communication ops, in file order */
    size_t ncomm, cap_comm;
    uint64_t file_bytes;    /* size of its rank file (0 for a trace): what loading it whole
                             * costs, give or take, in memory */
    size_t nrec_gpu, nrec_api, nrec_ovh, nrec_gmem; /* slim: the GPU records, API calls,
                             * overhead records and allocations its file holds (what a whole
                             * load sizes its arrays by); 0 otherwise */
    size_t nrec_ranges;     /* the thread ranges its file holds (pushes and starts), whatever
                             * a load kept of them (report.c streams a section past
                             * STREAM_SECTION_RANGES) */
    size_t nrec_comm;       /* slim: the communication ops its file holds (a whole load's
                             * ncomm), whatever it kept of them (report.c reads a section's
                             * ops apart past TP_SECTION_COMM_OPS); 0 otherwise */
    size_t nrec_twins;      /* torch.distributed's ops dropped as twins of the NCCL plugin's
                             * or the MPI wrappers' (model.c, drop_torch_twins) */
    /* A slim process (tp_process_slim) holds what the run-level analyses and the renderers
     * read after the rank sections, and none of the bulky records: no GPU records, API
     * calls, overhead records, allocations, clips or marks; of each thread's ranges only
     * its last (ended.c: the innermost open one, else the last ended) with its enclosing
     * ranges; of its counters only the GPU samples (tp_slim_keeps_counter). What the
     * run-level analyses derive from the records it dropped is kept once its rank section
     * has read the whole file (report.c): its steps for the report's step
     * rule (steps_memo: tp_find_steps answers from them) and its communication ops' resolved
     * times (comm_memo: tp_comm_resolve answers from them, with the interval and its source
     * alone, which is what the run-level readers take: 24 bytes an op where the whole
     * resolution is 56). tp_process_load_whole reads its
     * file again in full.
     * Of its communication ops a slim process of a run (tp_run_load_slim, tp_process_load_slim)
     * keeps no tp_comm_op: comm is NULL, ncomm still counts them, comm_keys holds each one's
     * key (tp_comm_key_at reads either form), comm_last the op ended.c reports
     * (tp_comm_last), and comm_memo, from the load on, the times tp_comm_resolve gives
     * without GPU records; its rank section replaces them with those of the whole file
     * (comm_memo_whole set). Without memory for that form it keeps its tp_comm_ops. */
    int slim;
    char *file;                    /* slim: its file's path as opened (owned; path above is
                                    * made valid UTF-8 for reports, which a path need not be) */
    struct tp_steps *steps_memo;   /* owned; NULL when none kept. Packed when they could
                                    * be (tp_steps.packed): tp_find_steps reads either form */
    const char *steps_memo_name;   /* the step name they were found with (NULL: none) */
    int steps_memo_warmup;
    struct tp_comm_span *comm_memo; /* owned, ncomm entries; NULL when none */
    int comm_memo_whole;            /* comm_memo came from the whole file (a rank section) */
    tp_comm_key *comm_keys;         /* slim: owned, ncomm entries, in place of comm */
    tp_comm_op *comm_last;          /* slim with comm_keys: owned copy of tp_comm_last */
    unsigned comm_level;            /* slim with comm_keys: 0, every op of the file kept;
                                     * else only the collectives of that level (comm.h,
                                     * tp_comm_level: a file of more than TP_COMM_KEEP ops),
                                     * comm_keys and comm_memo theirs alone */
    uint64_t *comm_comms;           /* slim at a level >= 2: owned, the communicators of the
                                     * file's collectives, sorted, distinct: the merge
                                     * filters each at this level, even one it kept none of */
    size_t ncomm_comms;
    /* A whole process's ops resolved once for its rank section's analyses (comm.h,
     * tp_comm_resolve_once: the communication section, the step breakdown and the memo the
     * slim process keeps read them, where each resolved them again into a copy of its own):
     * owned, ncomm entries; NULL when not resolved. */
    struct tp_comm_time *comm_times;
    /* A whole process whose section reads its ops apart, in passes over its file, for
     * holding more than a section may (comm.h, tp_comm_stream_open): owned; its comm then
     * holds only the ops the matching needs. NULL otherwise. */
    struct tp_comm_stream *comm_stream;
} tp_process;

typedef struct tp_run {
    char *dir;
    tp_process *procs;
    size_t nprocs;
    char **errors; /* files that could not be read at all */
    size_t nerrors;
    struct tp_pool *pool;
    size_t from_summaries; /* tp_run_load_slim: processes taken from their summary files
                            * (summary.h), their rank files not decoded */
    int no_memory;         /* memory ran out while the run was loaded (alloc.h): a file may be
                            * loaded short (the report says so, TP_RUN_NO_MEMORY) */
} tp_run;

/* Loads every *.tprof file of `dir` (or a single file path). Unreadable files go to
 * run->errors; damaged ones load what is valid and list the damage. Returns 0, or a
 * negative tprof_err with a message in err when the directory itself cannot be read or
 * holds no rank file. */
int tp_run_load(const char *dir, tp_run *run, char *err, size_t errlen);
/* The run of several operands, each a directory (its .tprof rank files, else its
 * torch.profiler traces: *.json and *.json.gz holding "traceEvents"), a file (a rank file by
 * its magic, anything else read as a torch.profiler trace, kineto.h), or a glob pattern that
 * matched no file by its own name. tp_run_load is this with one operand. A trace that cannot
 * be read whole fails the load (TPROF_ERR_FORMAT, err: "PATH: what is wrong"); a damaged
 * rank file does not (above). */
int tp_run_load_list(const char *const *ops, size_t nops, tp_run *run, char *err,
                     size_t errlen);
void tp_run_free(tp_run *run);
/* tp_run_load_list for the report of a large run, in bounded memory: each rank file is read
 * through once, its counts, metadata, steps, communication ops and samples kept and its bulky
 * records skipped (the process is slim, above; its counts, times, damage and roles are those
 * of the whole load); traces are loaded whole. Memory: the slim processes plus one file's
 * ranges at a time. The report (tp_report_make) then reads each slim
 * rank's file again, one or a few at a time, for its section. Same errors as
 * tp_run_load_list. Not thread safe. */
int tp_run_load_slim(const char *const *ops, size_t nops, tp_run *run, char *err,
                     size_t errlen);
/* The rank files a load of these operands reads (tp_run_load_list's, torch.profiler traces
 * left out), in its order: *n owned paths in *paths (free each, then the array; NULL when
 * none). Every reader of one run lists them alike (`trainprof summarize`'s tasks share the
 * files by their place in it). 0, or TPROF_ERR_IO / TPROF_ERR_NOT_FOUND (err: "OP: why") when
 * an operand cannot be listed, TPROF_ERR_NO_MEMORY. Reads directories only. */
int tp_run_rank_files(const char *const *ops, size_t nops, char ***paths, size_t *n, char *err,
                      size_t errlen);
/* One rank file read slim, as tp_run_load_slim reads it, into *p (zeroed first), before the
 * run decides roles (rank, role and the rest are the file's own): its strings in run's pool.
 * 0; or a negative tprof_err, the file's line in run->errors when it cannot be opened (p then
 * holds nothing: free it with tp_process_free). Not thread safe on one run. */
int tp_process_load_slim(tp_run *run, const char *path, tp_process *p);
/* Reads slim process p's rank file again in full into *out (a process of the run in every
 * respect but the steps memo; its strings in run's pool): roles as p's. Free with
 * tp_process_free. Safe to call from several threads at once on one run (the pool locks);
 * memory: about out->file_bytes plus the model of that file. Reads the file's first
 * p->file_bytes bytes, what the slim load read (a file still being written has grown), so
 * that the counts the slim process holds are the whole one's. 0, or a negative tprof_err:
 * the file can no longer be read (TPROF_ERR_IO and the like), is now shorter than then
 * (TPROF_ERR_TRUNCATED), or is another process's (TPROF_ERR_FORMAT: replaced). */
int tp_process_load_whole(tp_run *run, const tp_process *p, tp_process *out);
/* A rank file read again with its thread ranges in bounded memory (report.c's streamed
 * sections, for files too large to hold every range). The loader keeps a thread's ranges as it
 * reads, and each time its array fills it keeps of them only those still open, the start/end
 * ranges (ended only when the whole file is read) and those the caller asks for:
 * - keep (keep mode): ranges for which keep() returns nonzero are kept, with every range
 *   around them (their parents stay true indices). The process holds no nesting figures:
 *   child_ns is 0 and TP_R_NESTED_SAME unset on every range (only the range tables read them).
 * - take (take mode, keep NULL): each thread's nesting (child_ns, TP_R_NESTED_SAME, as the
 *   whole load computes it) is swept as the ranges are read, and every range is handed to
 *   take() once its figures are final, then dropped: per thread and per (name, domain) in the
 *   thread's order, the threads in turn for the ranges still held at the end (never closed,
 *   start/end ranges, and those after them of the same name and domain). Thread ranges whose
 *   times run backwards on their thread, or that cross (a range ending while one opened later
 *   inside it on its thread is still open: two domains that do not nest), cannot be swept
 *   in that order: the stream then sets failed, takes nothing more, and the caller reads the
 *   file whole instead. GPU records, API calls and allocations are not kept in take mode.
 * Memory: the model without its ranges (keep mode: as tp_process_load_whole's), plus the
 * ranges kept, plus the ranges closed since the array was last compacted (at most as many as
 * are kept, and at least 4096). The callbacks run on the calling thread. */
typedef struct tp_range_stream {
    int (*keep)(void *ctx, const tp_process *p, const tp_range *r, const tp_range *parent);
    void (*take)(void *ctx, size_t thread, const tp_range *r);
    void *ctx;
    int failed;        /* out: take mode could not sweep the file (above) */
    size_t min_ranges; /* for tests: compact from this many ranges a thread (0: 4096) */
    /* Optional, either mode: each thread range (push/pop) as its push is read (r->end 0,
     * TP_R_UNCLOSED set) and as its pop is read (its end set), whatever is kept of it, in the
     * file's order; a pop that matches no open range is not seen. r lives for the call. */
    void (*opened)(void *ctx, size_t thread, const tp_range *r);
    void (*closed)(void *ctx, size_t thread, const tp_range *r);
} tp_range_stream;
/* tp_process_load_whole with its ranges streamed through s (above). Same errors. */
int tp_process_load_streamed(tp_run *run, const tp_process *p, tp_process *out,
                             tp_range_stream *s);
/* tp_process_load_streamed keeping at most about b->max GPU records (b NULL or max 0: every
 * one), so that a rank file of any length is read in bounded memory: 64 bytes a kernel and 64
 * a launch held, where a step of a thousand kernels over a day's run holds hundreds of
 * millions. A file whose GPU records (gpu[] and api[], counted by the slim load of p) number
 * more keeps those that began in one span of time: the middle of them that 9/10 of the bound
 * of them began in, by the slim load's sample of their start times (gpu_starts: quantiles
 * within a stride of records, whatever their order), at least one gap between samples wide;
 * or, with b->from, the span from then on. Each time the records held reach the bound, the
 * span's end is moved back before the last tenth of them, which are dropped. The kernels of
 * the communication class and CUPTI's overhead records are kept whole (a communication op is
 * matched to its kernel wherever it ran), and so are allocations. The process names the span
 * and counts what it held and left out (gpu_window_from/to, gpu_held, gpu_left_out,
 * gpu_bound; all 0 when nothing was left out); the capture analysis counts the steps inside
 * the span alone as captured (capture.h, TP_CAP_BOUND), as for a kernel-capture window. p
 * must be slim (its counts and sample place the span, or tell that it is needed); otherwise,
 * and below the bound, the same as tp_process_load_streamed. Memory: the model less its GPU
 * records, plus at most b->max of them, plus the communication kernels, plus a transient 8
 * bytes each when the span moves. Same errors. */
/* What a load does with a file's communication ops: each, with its index in the file's
 * order (that of tp_process.comm in a whole load of the file, before trainprof.torch's twins
 * are dropped), handed to fn, and kept only when fn returns 1. fn runs on the loading
 * thread; the op lives for the call (its name is the run's). */
typedef struct tp_comm_read {
    int (*fn)(void *ctx, const tp_comm_op *op, size_t i);
    void *ctx;
} tp_comm_read;
/* Keeps no op (a section reading them apart: comm.h, tp_comm_stream_open). */
extern const tp_comm_read tp_comm_read_none;
typedef struct tp_gpu_bound {
    size_t max;    /* GPU records held at most (0: every one) */
    uint64_t from; /* CLOCK_MONOTONIC ns: 0, the span at the middle of the records; else the
                    * span from then on, as many records as fit (the first measured step's) */
    const tp_comm_read *comm; /* NULL: every communication op kept */
} tp_gpu_bound;
int tp_process_load_bounded(tp_run *run, const tp_process *p, tp_process *out,
                            tp_range_stream *s, const tp_gpu_bound *b);
/* Slim process p's file read again for its communication ops alone, each handed to r->fn
 * (none kept), in the file's order: a pass of a few kilobytes whatever the file's length.
 * Errors as tp_process_load_whole. */
int tp_process_read_comm(tp_run *run, const tp_process *p, const tp_comm_read *r);
/* Why slim process p's file cannot be read again (tp_process_load_whole), as one line into
 * why (n bytes: "cannot open: ...", "now N bytes, shorter than ..."); 0 when it can be,
 * else the error tp_process_load_whole would return. Reads the file's header only. */
int tp_process_file_check(const tp_process *p, char *why, size_t n);
/* Drops p's bulky records, keeping what a slim process holds (above). */
void tp_process_slim(tp_process *p);
/* Frees what a process holds (not the process struct itself, nor its pooled strings). */
void tp_process_free(tp_process *p);

/* 1 when a CUDA call record named n is the driver's ("cuLaunchKernel", or "cuda driver call",
 * the name the capture gives one CUPTI did not name), 0 for the runtime's ("cudaLaunchKernel")
 * or NULL. The loader and the exports classify calls by this one rule. */
int tp_driver_call(const char *n);

/* Interns `s` (made valid UTF-8) in the run's pool; never NULL: without memory (counted,
 * alloc.h) tp_intern_no_memory, the text "(out of memory)", which a reader whose output must
 * be whole or nothing (a summary's) compares against. Thread safe (the pool locks), so that
 * several loaders can fill one run. */
const char *tp_intern(tp_run *run, const char *s);
extern const char tp_intern_no_memory[];

const char *tp_meta(const tp_process *p, const char *key); /* last value, or NULL */
/* Page k of the paged metadata list `key` (TPROF_META_PAGES: 1 is key itself, k >= 2 is
 * "key.k"): its last value, or NULL when p has none or k is past TPROF_META_PAGES. A list
 * ends at its first missing page. */
const char *tp_meta_page(const tp_process *p, const char *key, unsigned k);
/* The last value of key read as atoi reads it (leading space and sign, digits, the rest
 * left; no digit: 0), or -1 when p has none or it is out of int's range: the rank, world
 * size and local rank the load sets, and the world size the comm bound follows. */
int tp_meta_int(const tp_process *p, const char *key);
/* Op i's key (i < p->ncomm), from whichever form p holds: its tp_comm_op, or the key a slim
 * process keeps in its place (comm_keys). */
tp_comm_key tp_comm_key_at(const tp_process *p, size_t i);
tp_comm_key tp_comm_key_of(const tp_comm_op *o); /* o's key, narrowed as tp_comm_key says */
/* The op that started last (of equal starts, the last in the file), or NULL without ops: the
 * last collective ended.c reports. A slim process answers from its copy (comm_last). */
const tp_comm_op *tp_comm_last(const tp_process *p);
/* The rank process recorded on `host` with process id `pid` (as a report's rank entry names
 * it), or NULL; run may be NULL. */
const tp_process *tp_rank_process(const tp_run *run, const char *host, double pid);
/* Whether p holds NVML gauges of its own ("gpu<N>.*" counters, tp_gpu_counter: it sampled
 * NVML itself). */
int tp_has_gpu_counters(const tp_process *p);
/* The NVML gauge name "gpu<index>.<metric>" (the samplers' counters): its metric, with the
 * index in *idx; NULL for any other name. */
const char *tp_gpu_counter(const char *name, unsigned long *idx);
/* Whether a slim process keeps counter `name`: the GPU samples (gpuN.*, tp_gpu_counter),
 * which the run-level readers read (a rank section's NVML figures, from the node sampler's
 * process or the rank's own; the HTML's curves). The others (the process sampler's
 * process.*, trainprof.torch's cuda.memory_*, the program's own) only a rank's section
 * reads, from its file read whole: a slim process that kept them would grow with the run's
 * length (the process sampler's four at 10 Hz are 83 MB a day a rank). */
int tp_slim_keeps_counter(const char *name);
/* Drops from thread t the counters a slim process does not keep (tp_slim_keeps_counter),
 * the array shrunk to what is left. */
void tp_thread_slim_counters(tp_thread *t);
/* Writes s to f as valid UTF-8 (invalid bytes as U+FFFD) with control bytes (below 0x20, and
 * 0x7f) shown as '?': text from a program or a driver (a communicator's name, a torch group,
 * a GPU's name) cannot disturb the terminal (tp_text_put, text.h). */
void tp_fput_printable(FILE *f, const char *s);
/* GPU identity across processes. A rank names its CUDA devices by UUID (cuda.<o>.uuid, from
 * CUPTI's device record or the CUDA driver it initialised; a MIG device's is "MIG-...", and
 * cuda.<o>.gpu_uuid its GPU's when known); a process that sampled NVML names its GPUs by
 * NVML index with their UUIDs (gpu.<i>.uuid, and gpu.<i>.mig_uuids: the MIG devices of a
 * GPU in MIG mode). CUDA numbers devices fastest first (or as CUDA_VISIBLE_DEVICES lists
 * them), NVML in PCI order: the two are joined by UUID only. Position (the sampler's
 * nvml.devices read as CUDA's order) is used only for a rank that named no device at all. */
typedef enum tp_gpu_match {
    TP_GPU_NOT_SAMPLED = 0,   /* the rank named this device, and no sampled GPU is it */
    TP_GPU_BY_UUID = 1,       /* the rank's UUID is the sampler's GPU's */
    TP_GPU_BY_MIG_PARENT = 2, /* the rank's device is a MIG instance of that GPU */
    TP_GPU_BY_POSITION = 3,   /* the rank named no device: its ordinal's place in nvml.devices */
} tp_gpu_match;

typedef struct tp_gpu_link {
    unsigned index;       /* NVML index in the sampler's numbering */
    int cuda_ordinal;     /* the rank's CUDA device ordinal */
    tp_gpu_match by;
    const char *uuid;     /* the rank's cuda.<o>.uuid (NULL by position) */
} tp_gpu_link;

/* The GPUs rank `p` used, in `sampler`'s numbering, each at most once: p's CUDA device
 * ordinals (from its GPU records; else the devices whose primary context was active,
 * cuda.<o>.in_use; else its local rank, the device torchrun-style jobs use), joined as the
 * comment above says. Returns how many were found (out[0..n), at most max). *unmatched (may
 * be NULL) gets the number of p's devices whose UUID is known but is none of the sampler's
 * GPUs (not sampled there); as many of them as fit follow in out[n..] (by
 * TP_GPU_NOT_SAMPLED, index 0). With 0 found and unmatched > 0 the rank's GPUs are known and
 * absent; with 0 and 0 they are not known. `sampler` may be p itself. */
size_t tp_rank_gpu_links(const tp_process *p, const tp_process *sampler, tp_gpu_link *out,
                         size_t max, size_t *unmatched);
/* The NVML indices of tp_rank_gpu_links, into out; 0 = none (not known, or not sampled). */
size_t tp_rank_gpus(const tp_process *p, const tp_process *sampler, unsigned *out, size_t max);
/* The CUDA device ordinal, in process `rank`, of the sampler's NVML GPU `idx` (the ordinal of
 * a MIG instance of it for a GPU in MIG mode), by UUID as above; by position only when
 * `rank` named no device; -1 when not known. `rank` may be the sampler itself. */
int tp_cuda_ordinal_of(const tp_process *rank, const tp_process *sampler, unsigned idx);
/* The process whose NVML samples describe rank p's GPUs: p itself when it sampled
 * ("gpu<N>.*" counters), else the node sampler of its host, else another process of its
 * host that sampled (the local rank 0 of a torchrun job samples the node's GPUs); NULL when
 * none did. */
const tp_process *tp_gpu_samples_for(const tp_run *run, const tp_process *p);
const char *tp_domain_name(const tp_process *p, uint32_t domain);  /* "" for default */
const char *tp_category_name(const tp_process *p, uint32_t domain, uint32_t category);

static inline uint64_t tp_to_realtime(const tp_process *p, uint64_t mono) {
    return mono - p->hdr.start_mono_ns + p->hdr.start_realtime_ns;
}

/* Short label, e.g. "rank 0" or "helper of rank 1" or "process 1234". */
void tp_process_label(const tp_process *p, char *buf, size_t n);

/* Writes `s` as a JSON string literal (quotes included) with every special character
 * escaped. `s` must be valid UTF-8 (model strings are). */
void tp_json_string(FILE *f, const char *s);

#endif /* TPROF_MODEL_H */
