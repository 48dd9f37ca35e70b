/*
 * report_ranges.h — a rank's range tables and data loading (the section's "ranges" and
 * "data_loading"), from the whole model of its file or streamed from the file (model.h,
 * tp_range_stream) when holding every range would cost too much. Private to report*.c.
 *
 * The tables add each range's time to its (name, domain) row in its thread's order, one
 * thread's sums after the other's, so that the two ways read the same figures to the bit.
 */
#ifndef TP_REPORT_RANGES_H
#define TP_REPORT_RANGES_H

#include "analysis/breakdown.h"
#include "analysis/model.h"
#include "analysis/report.h"
#include "analysis/steps.h"

struct tp_aggtab;

/* What one pass over the rank's ranges gathers: rows by (name, domain) inside the measured
 * steps (or the run), the ranges never closed, and the data-loading spans. */
typedef struct tp_rscan {
    struct tp_aggtab *tab, *unclosed;
    tp_span *dv;             /* data-named ranges' spans */
    size_t ndv, capdv;
    int data_on_step_thread; /* found on the step thread (else on other threads) */
    tp_cpu_stream *cpu;      /* streamed: the CPU basis of the breakdown or the phases, or
                              * NULL (none, or from the model) */
} tp_rscan;

/* Every range of p into sc (zeroed first); meas NULL: over the whole run. 0, or
 * TPROF_ERR_NO_MEMORY (sc then holds what fitted; free it). */
int tp_rscan_whole(tp_rscan *sc, const tp_process *p, const tp_report_opts *o,
                   const tp_steps *s, const tp_step *meas, size_t nm);
/* The same from slim rank `slim`'s file, read again with its ranges streamed (take mode),
 * the data-loading spans from `kept`: that file read in keep mode with tp_rscan_keep's
 * predicate and state k, whose steps s are. Unless k is wide, the CPU basis of the breakdown
 * or the phases is streamed in the same read (sc->cpu, for tp_breakdown_compute and
 * tp_phases_compute). 0; 1 when the file cannot be streamed (its ranges cross or run
 * backwards, or it can no longer be read: read it whole instead); 2 when the range tables
 * are made but the CPU basis could not be streamed (tp_cpu_stream_finish: read the file in
 * keep mode again, wide, for it); or TPROF_ERR_NO_MEMORY. sc is to be freed in every case. */
struct tp_rkeep;
int tp_rscan_streamed(tp_rscan *sc, tp_run *run, const tp_process *slim,
                      const tp_process *kept, const struct tp_rkeep *k,
                      const tp_report_opts *o, const tp_steps *s, const tp_step *meas,
                      size_t nm);
/* The keep mode of a streamed read for a rank section under opts o, into *st, with k its
 * state (both to outlive the read; o too; free k with tp_rkeep_free): every range the
 * section's analyses other than the range tables and the CPU basis read (steps.c,
 * breakdown.c, memory.c, report_timers.c, data loading): the start/end ones, those named as
 * a step may be and their children, the data, phase and module ranges, the trainprof
 * domain's; the threads' top-level time counted beside (k->top, tp_cpu_top). wide: the ranges
 * at depth 0 and 1 too, which the CPU basis reads when it is computed from the model (its
 * stream failed). */
typedef struct tp_rkeep {
    const tp_report_opts *o;
    int wide;
    tp_cpu_top top;
    struct { const char *name; int kind; } memo[1024];
} tp_rkeep;
void tp_rscan_keep(tp_range_stream *st, tp_rkeep *k, const tp_report_opts *o, int wide);
void tp_rkeep_free(tp_rkeep *k);
void tp_rscan_free(tp_rscan *sc);

/* The range tables into *out from the scan (its rows sorted in place). */
void tp_rscan_ranges(tp_ranges_result *out, tp_rscan *sc, const tp_process *p, int top,
                     int per_step, double per, double denom);
/* The rank's "ranges" from its results. */
void tp_rscan_ranges_json(cJSON *rs, const tp_ranges_result *rg);
/* The rank's data loading into *out: the union of the data-named spans of the scan. */
void tp_rscan_data(tp_data_result *out, tp_rscan *sc, const tp_steps *s, const tp_step *meas,
                   size_t nm, double per, double denom);
/* The rank's "data_loading" from its results. */
void tp_rscan_data_json(cJSON *rs, const tp_data_result *d, const tp_report_opts *o);

/* Slim rank p's file read again for its section into *whole, its GPU records bounded by o
 * (tp_report_gpu_records), no communication op kept with no_ops (comm.h,
 * tp_comm_stream_open): report_ranges.c says how. ks, k: a keep-mode stream set up again for
 * a second read, or NULL. The load's error. */
int tp_section_load(const tp_run *run, const tp_process *p, const tp_report_opts *o,
                    tp_process *whole, tp_range_stream *ks, tp_rkeep *k, int wide, int no_ops);
/* 1 when slim rank p's section streams its ranges (past STREAM_SECTION_RANGES, or as
 * o->stream_sections says) and could: *whole its file in keep mode, *pre the range tables
 * and data loading of its section (not made for memos_only); 0: read it whole (nothing
 * held). */
int tp_section_stream(const tp_run *run, const tp_process *p, const tp_report_opts *o,
                      tp_process *whole, tp_rscan *pre, int memos_only, int no_ops);

#endif /* TP_REPORT_RANGES_H */
