/*
 * breakdown.h — the step breakdown of a rank (docs/design.md §5.2, in HTA's terms; breakdown.c).
 *
 * GPU jobs: each step's wall time on the rank's main device (the one with the most kernel
 * time) is split in priority order into compute kernels, exposed communication (the
 * communication set of comm.c's exposure rule, tp_comm_device_spans, outside compute),
 * memcpy/memset (outside both) and idle; overlapped communication is given beside. Idle is
 * attributed gap by gap: the part a data-loading range covers is data loading; the rest of a
 * gap during which the host sat in a blocking CUDA call (a *Synchronize, a synchronous
 * cudaMemcpy) is host synchronisation; the rest is other.
 * CPU jobs (no GPU records): the step's wall time split by the top-level ranges under the
 * step on the step thread and the process ranges (NVTX start/end: "the range start event can
 * happen on a different thread than the end", nvToolsExt.h, Process Ranges) that the step
 * thread started or ended, each instant given to one of them (the thread's own first, then
 * the earlier start), and what no range covers.
 */
#ifndef TPROF_BREAKDOWN_H
#define TPROF_BREAKDOWN_H

#include <cjson/cJSON.h>

#include "analysis/model.h"
#include "analysis/results.h"
#include "analysis/steps.h"

typedef struct tp_cpu_stream tp_cpu_stream;

/* Computes the breakdown into *out (results.h; zeroed first, present = 0 when nothing was
 * measured; out->ranges and out->warmup allocated, freed by tp_rank_result_free). s: the
 * rank's steps (warm-up ones are kept apart); without steps the whole process is one window
 * (per "run"). cap: the steps in which GPU activity was recorded (capture.h; NULL: all of
 * s), the windows of the GPU basis; with measured steps and none captured, the GPU basis
 * has no parts and out->not_captured = not_captured; over fewer steps than measured,
 * out->captured_steps = captured_words (both strings live as long as the result, or NULL).
 * data_names: the range names that mark data loading (case-insensitive, as the
 * report's data_loading). cpu: the CPU basis streamed from p's file (tp_cpu_stream, below)
 * when p holds only some of its thread ranges, used (and spent) when the breakdown is on the
 * CPU basis; NULL: from p's ranges. Out of memory: the figures after the basis are left out
 * (has_parts / has_cpu 0). Time O(n log n) in the process's records. */
void tp_breakdown_compute(tp_breakdown_result *out, const tp_process *p, const tp_steps *s,
                          const tp_steps *cap, const char *not_captured,
                          const char *captured_words, const char *const *data_names,
                          size_t ndata_names, tp_cpu_stream *cpu);

/* Adds "breakdown" to a rank's JSON from *b (docs/report-json.md; nothing when !b->present). */
void tp_breakdown_json(cJSON *rank, const tp_breakdown_result *b);

/* The phases of the step for a rank whose breakdown is on the GPU basis: the host side of
 * the step split as the CPU basis splits it (each instant of a measured step to one top-level
 * range of the step thread: trainprof.torch's data, forward, backward and optimizer, or the
 * program's own), with the rest outside any phase, so the rows and the rest add up to the
 * step. Zeroed, present = 0, for a rank whose breakdown is the CPU one already (it is these
 * rows) or without measured steps. Ownership, cost and cpu as tp_breakdown_compute. */
void tp_phases_compute(tp_breakdown_result *out, const tp_process *p, const tp_steps *s,
                       tp_cpu_stream *cpu);

/* The CPU basis of a rank file whose thread ranges are streamed (model.h, tp_range_stream;
 * report.c streams a section past STREAM_SECTION_RANGES), for the breakdown's rows or the
 * phases, whichever the rank has: the same figures as from the whole model, in memory bounded
 * by the rows (names) times the windows (steps), the process ranges of the view (kept anyway
 * in keep mode), and the thread's ranges from one moment it has none open to the next (one
 * step's, for ranges as steps; breakdown_cpu.c says why). Not thread safe; one per read.
 *
 * First read (keep mode): tp_cpu_top_closed on every thread range as it closes counts the
 * threads' top-level time (without steps the view is the thread with the most), beside the
 * model, which then need not keep the ranges at depth 0 and 1. */
typedef struct tp_cpu_top {
    uint64_t *ns; /* per thread: the time of its closed thread ranges at depth 0 */
    size_t n;
    int oom;
} tp_cpu_top;
void tp_cpu_top_closed(tp_cpu_top *t, size_t thread, const tp_range *r);
void tp_cpu_top_free(tp_cpu_top *t);
/* After the first read, from its model kept (its process ranges, steps s, times, GPU
 * records) and top: *out, or NULL when the rank has no CPU basis (nothing to stream: the
 * kept model's answer is the whole one's). 0 or TPROF_ERR_NO_MEMORY. max_held: the most
 * thread ranges held at once (0: 1 Mi); past it the stream fails. */
int tp_cpu_stream_new(tp_cpu_stream **out, const tp_process *kept, const tp_steps *s,
                      const tp_cpu_top *top, size_t max_held);
/* Second read (take mode): every thread range as it opens and as it closes (its end set),
 * in the file's order (tp_range_stream's opened and closed); c may be NULL. */
void tp_cpu_stream_opened(tp_cpu_stream *c, size_t thread, const tp_range *r);
void tp_cpu_stream_closed(tp_cpu_stream *c, size_t thread, const tp_range *r);
/* After the second read, with its process p (threads' last events): the last ranges swept.
 * 0; 1 when the ranges could not be followed so (a step holding more than max_held ranges, a
 * range around the run that never ended with ranges inside it, a file whose pops do not
 * match): compute the basis from a model that keeps the ranges at depth 0 and 1 instead;
 * or TPROF_ERR_NO_MEMORY. */
int tp_cpu_stream_finish(tp_cpu_stream *c, const tp_process *p);
/* Whether c failed (finish's 1, or out of memory); 0 for NULL. */
int tp_cpu_stream_failed(const tp_cpu_stream *c);
void tp_cpu_stream_free(tp_cpu_stream *c);

/* Adds "phases" to a rank's JSON from *b (docs/report-json.md; nothing when !b->present). */
void tp_phases_json(cJSON *rank, const tp_breakdown_result *b);

/* {"mean","p50","p90","min","max"} of computed statistics (a new object, owned by the
 * caller). */
cJSON *tp_stat5_json(const tp_stat5 *s);

/* 1 for the CUDA calls that block the host until the device is done: names with
 * "Synchronize", and the synchronous cudaMemcpy/cuMemcpy family (not *Async, not the peer
 * copies, which return at once). A synchronous device-to-device copy, which does not wait
 * either, is not told apart by its name. The report's host synchronisations (gpu.c) and the
 * idle-time breakdown use this one rule. */
int tp_is_blocking_sync(const char *api_name);

#endif
