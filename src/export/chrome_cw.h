/*
 * chrome_cw.h — private to the Chrome trace writer (chrome.c, chrome_comm.c): the state of one
 * document being written and the small writers its parts share. Single-threaded: one writer
 * per document. Times are ns after the document's base (baseTimeNanoseconds) on the run's
 * aligned clock (analysis/clocks.h).
 */
#ifndef TPROF_CHROME_CW_H
#define TPROF_CHROME_CW_H

#include <stdint.h>
#include <stdio.h>

#include "analysis/clocks.h"
#include "analysis/model.h"

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
} cw;

/* Whether an event over [ts, te] is in the selected window (tp_export_opts). */
int tp_cw_in_win(const cw *w, int64_t ts, int64_t te);
/* A JSON number for v (finite; "0" otherwise), with no locale. */
void tp_cw_put_double(FILE *f, double v);
/* A monotonic time of process p as ns after the base. */
int64_t tp_cw_rel_ns(const cw *w, const tp_process *p, uint64_t mono);
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

#endif /* TPROF_CHROME_CW_H */
