/*
 * chrome_cw.h — private to the trace exporters (chrome.c, chrome_comm.c, perfetto.c and what
 * they share, export_common.c): the state of one document being written, the small writers
 * of the Chrome JSON, and the choices both formats make the same way (processes, pids,
 * clock, window, track sweeps, GPU stream order, communicator tracks). Single-threaded: one
 * writer per document. Times are ns after the document's base (baseTimeNanoseconds) on the
 * run's aligned clock (analysis/clocks.h).
 */
#ifndef TPROF_CHROME_CW_H
#define TPROF_CHROME_CW_H

#include <stdint.h>
#include <stdio.h>

#include "analysis/clocks.h"
#include "analysis/comm.h"
#include "analysis/model.h"
#include "analysis/steps.h"
#include "export/chrome.h"

/* Synthetic pids for processes whose preferred pid is taken: above any Linux pid_max
 * (2^22) and any plausible rank, so they collide with neither. */
#define TP_CW_SYNTH_PID_BASE 1000000000LL

typedef struct cw {
    FILE *f;
    const tp_run *run;
    const tp_clocks_result *ck; /* the aligned clock (tp_clocks_aligned) */
    uint64_t base_rt;    /* baseTimeNanoseconds */
    int64_t last_rel;    /* latest event time written, ns after base */
    int have_last;
    uint64_t next_async; /* ids of b/e pairs, unique in the file */
    int nevents;         /* for the separators */
    /* In one rank's file, the NVML counters ("gpu<i>.*") of the process that sampled the
     * rank's GPUs (tp_gpu_samples_for): with gpu_filter, only those of the GPUs in gpu_allow
     * (the rank's, found by UUID; none when its GPUs were not sampled), else all of them (the
     * rank's GPUs are not known). gpu_only: that process is another one (the node sampler,
     * or the host's rank that sampled): only its NVML counters, inside the rank's own span
     * (the base to gpu_until, ns after the base). */
    int gpu_only, gpu_filter;
    int64_t gpu_until;
    const unsigned *gpu_allow;
    size_t ngpu_allow;
    /* the selected window (tp_export_opts), ns after the base; win = 0: everything */
    int win;
    int64_t win_lo, win_hi;
    /* one rank's file (tp_export_chrome_rank), which HTA reads as torch.profiler's: every
     * step as ProfilerStep#N and the ranges projected onto the GPU streams
     * (gpu_user_annotation) too; the merged trace keeps to what the Perfetto export holds */
    int rank_file;
    /* the process being written when it is a slim one's file read again whole
     * (tp_cw_acquire), and the index in run->procs of the slim process it stands for: its
     * times map through that process's clock */
    const tp_process *cur;
    size_t cur_idx;
} cw;

/* Whether an event over [ts, te] is in the selected window (tp_export_opts). */
int tp_cw_in_win(const cw *w, int64_t ts, int64_t te);
/* A JSON number for v (finite; "0" otherwise), with no locale. */
void tp_cw_put_double(FILE *f, double v);
/* A monotonic time of process p as ns after the base. */
int64_t tp_cw_rel_ns(const cw *w, const tp_process *p, uint64_t mono);
/* The device memory allocated on each device of process p, over its CUPTI device-memory
 * records (the running sum over every record, allocations minus releases; the first 64
 * devices): for each record inside the window, fn(ctx, device, time after the base (ns),
 * bytes allocated then). Stops at the first fn that returns non-zero. */
void tp_cw_gpu_mem_walk(const cw *w, const tp_process *p,
                        int (*fn)(void *ctx, uint32_t device, int64_t rel_ns, int64_t bytes),
                        void *ctx);
/* Keeps the latest event time written (the document's end). */
void tp_cw_note_time(cw *w, int64_t rel);
/* Opens an event object: the separator, "ph", "pid", "tid". */
void tp_cw_ev_open(cw *w, const char *ph, int64_t pid, uint32_t tid);
/* ,"key":<microseconds with ns decimals> */
void tp_cw_put_ts(cw *w, const char *key, int64_t rel);
/* A metadata ("M") event of `what` whose args hold `key`, left open for its value. */
void tp_cw_write_meta(cw *w, int64_t pid, uint32_t tid, const char *what, const char *key);
/* The communicator tracks of p (chrome_comm.c). 0 or a negative tprof_err. */
int tp_cw_write_comm(cw *w, const tp_process *p, int64_t pid);

/* ---- shared by the formats (export_common.c) */

/* The process to write for run->procs[i]: that process, or for a slim one (model.h) its file
 * read again whole into *whole, which w->cur then names until tp_cw_release (so that a trace
 * holds the whole run's events while memory holds one rank file's model at a time). NULL,
 * with *rc set (TPROF_ERR_IO and the like: the file can no longer be read), on failure. */
const tp_process *tp_cw_acquire(cw *w, size_t i, tp_process *whole, int *rc);
/* Frees what tp_cw_acquire read for process p (nothing for a process of the run). */
void tp_cw_release(cw *w, const tp_process *p, tp_process *whole);

/* Whether counter `name` at ts goes into the file (see cw.gpu_only). */
int tp_cw_counter_wanted(const cw *w, const char *name, int64_t ts);
/* "rank N (host:pid)": the label, host and pid the viewer shows (a synthetic pid would
 * otherwise hide the real one). malloc'ed; NULL when out of memory. */
char *tp_cw_process_name(const tp_process *p);
/* Ranks by rank, then their helpers, then unattached helpers. */
int64_t tp_cw_sort_index(const tp_process *p);

/* The processes of a merged trace (tp_export_opts.ranks): ranks in rank order, then the
 * other processes in file order. *sel is malloc'ed (the caller frees it). 0,
 * TPROF_ERR_NOT_FOUND when no process has a selected rank, TPROF_ERR_NO_MEMORY. */
int tp_cw_select_merged(const tp_run *run, const tp_export_opts *opts, size_t **sel,
                        size_t *n);
/* pid per exported process: the preferred one (the rank in a merged trace, else the OS
 * pid) unless an earlier claimant has it (a helper whose OS pid equals a rank number, two
 * hosts with the same pid): then one above TP_CW_SYNTH_PID_BASE, so rows never merge. */
int tp_cw_assign_pids(const tp_run *run, const size_t *sel, size_t nsel, int merged,
                      int64_t *pids);
/* Fills w's run, clock (opts->clocks, else computed into *own, which the caller frees with
 * tp_clocks_result_free whatever this returns), base and window. TPROF_ERR_NOT_FOUND when
 * opts asks for steps that no selected rank has. */
int tp_cw_setup(cw *w, const tp_run *run, const size_t *sel, size_t nsel, int merged,
                const tp_export_opts *opts, tp_clocks_result *own);
/* The trace's last time (ns after the base): the latest event written, else the latest
 * process end. */
int64_t tp_cw_end_time(const cw *w, const size_t *sel, size_t nsel);

/* One candidate nested slice of a thread track. */
typedef struct tp_cw_item {
    uint64_t start, end; /* monotonic ns of the process */
    size_t idx;          /* range index in its thread, or step index */
    uint32_t thread;     /* index in p->threads */
    uint32_t kind;
} tp_cw_item;

typedef struct tp_cw_scratch { /* reused across tracks; zero-initialised */
    tp_cw_item *items;
    size_t cap;
    uint64_t *stack;
    tp_cw_item *fixed;
    size_t cap_fixed;
} tp_cw_scratch;
void tp_cw_scratch_free(tp_cw_scratch *sc);

/* A synchronous range or an API step of a thread track, as the sweep hands it over. */
typedef struct tp_cw_slice {
    const char *name;     /* valid during the call only (a step's name is built for it) */
    uint64_t start, end;  /* monotonic ns of the process */
    const tp_range *r;    /* the range, or NULL for a step */
    const tp_step *s;     /* the step, or NULL for a range */
    uint32_t thread;      /* a range's thread: index in p->threads */
    int nested;           /* 1: nests with every nested slice before it on the track; 0: it
                           * would cross one, and goes out as an async slice */
} tp_cw_slice;
typedef int (*tp_cw_slice_fn)(void *ctx, const tp_cw_slice *sl);

/* The ranges (not TP_R_ASYNC ones) of p's threads whose os tid is `tid` (a tid can be reused
 * by a later thread, and both then share one row in a viewer, so they must nest together),
 * and `steps` (non-NULL when the API steps live on this track), handed to fn: first the steps
 * that overlap an earlier step (async), then everything else in start order, parents before
 * children. Viewers drop slices that overlap on one track without nesting, which NVTX allows
 * (one stack per domain, ranges left open at exit); so a range that would cross a nested
 * slice kept before it, or a kept step, is handed over with nested = 0. Steps are always
 * kept. Returns 0, TPROF_ERR_NO_MEMORY, or the first nonzero value of fn (which stops it). */
int tp_cw_sweep(const tp_process *p, uint32_t tid, const tp_steps *steps, tp_cw_scratch *sc,
                tp_cw_slice_fn fn, void *ctx);

/* The GPU track of a device and stream (a tid above any thread id):
 * 0x40000000 | device << 16 | stream. */
uint32_t tp_cw_gpu_tid(uint32_t device, uint32_t stream);
/* p's kernels, copies and memsets (not syncs) by track (tp_cw_gpu_tid) and start: malloc'ed,
 * *n of them; NULL when out of memory. */
const tp_gpu_op **tp_cw_gpu_ops(const tp_process *p, size_t *n);
/* The end of ops[i] as shown: records that contradicted their stream's order were clipped by
 * the loader (tp_gpu_clip_to_streams), as the report sees them; nodes of one CUDA graph may
 * still overlap on the stream CUPTI names, and a viewer rejects overlapping slices on one
 * track, so there only the slice is cut at the next one's start. */
uint64_t tp_cw_gpu_end(const tp_gpu_op *const *ops, size_t n, size_t i);
/* qsort/bsearch order of pointers to runtime calls by correlation id. */
int tp_cw_cmp_api_corr(const void *a, const void *b);
/* The runtime call that launched GPU record o (its correlation id), in apis (n pointers
 * sorted by tp_cw_cmp_api_corr), or NULL. */
const tp_gpu_op *tp_cw_launch_of(const tp_gpu_op *const *apis, size_t n, const tp_gpu_op *o);
/* Threads of one process that share an os tid (a thread id reused after an exit) are one
 * track: whether thread index t is the first of p's threads with its tid, and the track's
 * name, the first name among those threads (NULL: none has one). */
int tp_cw_first_of_tid(const tp_process *p, size_t t);
const char *tp_cw_thread_name(const tp_process *p, size_t t);
/* qsort order of pointers to runtime calls by thread (os tid), then start, the enclosing
 * call first, then address: one order for any input. */
int tp_cw_cmp_api_thread(const void *a, const void *b);
/* An op's category as Kineto names it ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync"),
 * and its name: the kernel's, or "Memcpy HtoD" ... built in buf (n >= 32). */
const char *tp_cw_gpu_cat(const tp_gpu_op *o);
const char *tp_cw_gpu_name(const tp_gpu_op *o, char *buf, size_t n);

/* The ops of one communicator as the communicator tracks show them (tp_cw_comm_walk). */
typedef struct tp_cw_comm_ev {
    size_t track;             /* the communicator's track: 0, 1, ... in order of first issue */
    int first;                /* the first op of its track */
    const tp_comm_op *op;
    const tp_comm_time *time; /* the report's timing rule (analysis/comm.c) */
    const char *name;         /* the op's name */
    uint64_t start, end;      /* as shown: end cut at the enclosing op's end when clamped */
    int clamped;
} tp_cw_comm_ev;
typedef int (*tp_cw_comm_fn)(void *ctx, const tp_cw_comm_ev *ev);
/* p's communication, one communicator after the other, each's ops in start order (an op
 * that would overlap the previous one without nesting, as NCCL enqueues of one group do, is
 * cut at the enclosing op's end and marked clamped). 0, TPROF_ERR_NO_MEMORY, or the first
 * nonzero value of fn (chrome_comm.c). */
int tp_cw_comm_walk(const tp_process *p, tp_cw_comm_fn fn, void *ctx);

#endif /* TPROF_CHROME_CW_H */
