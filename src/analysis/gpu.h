/*
 * gpu.h — the GPU part of a rank's report (gpu.c).
 */
#ifndef TPROF_GPU_H
#define TPROF_GPU_H

#include <cjson/cJSON.h>

#include "analysis/model.h"
#include "analysis/results.h"
#include "analysis/steps.h"

/* Computes the rank's GPU figures into *out (results.h; zeroed first; present = 0 when the
 * process has no GPU records, or out of memory). st/nst: the captured measured steps
 * (capture.h; NULL/0 without measured steps: the whole run); step_ns: their total length;
 * top_n: rows of the top-kernel table; cap: the rank's capture (with measured steps and
 * none captured, out->not_captured and no figure). The arrays of *out are allocated, freed
 * by tp_rank_result_free. Time O(records log records). */
void tp_gpu_compute(tp_gpu_result *out, const tp_process *p, const tp_step *st, size_t nst,
                    uint64_t step_ns, int top_n, const tp_capture_result *cap);

/* Adds "gpu" to the rank's JSON from *g (docs/report-json.md; nothing when !g->present).
 * The devices' capacity (tp_memory_capacity, energy.h) must be filled in before. */
void tp_gpu_json(cJSON *rank, const tp_gpu_result *g);
/* What g's figures are per, as the document says it ("gpu"."per"): "step" (per measured
 * step), "span" (totals over a bounded load's span: results.h, in_span) or "run" (totals). A
 * static string. */
const char *tp_gpu_per(const tp_gpu_result *g);

/* Makes p's GPU records agree with their streams' order, once, as the loader's last step
 * (model.c), so that the report, the step breakdown and every export see the same records.
 * CUPTI sometimes returns a record that cannot be: a copy "lasting" 11 ms while thousands of
 * kernels ran on its stream and a synchronisation of that stream returned microseconds after
 * it began. A record's end is cut back to
 *  - the start of the next record on its (device, stream) (a stream runs its work in order;
 *    nodes of the same CUDA graph are exempt from each other), or for the last record a load
 *    bounded in GPU records held there, of the first it left out after its span
 *    (p->gpu_fences), and
 *  - the return of a cudaStreamSynchronize on its stream, or a context synchronisation on its
 *    device, that began after the record was enqueued (the end of its launch call, else its
 *    start): such a call returns only when that work is done.
 * Each clipped record gets TP_GPU_CLIPPED in its flags and an entry in p->clips (the recorded
 * end and which rule cut it); p->clipped_ns sums the recorded time removed. Starts never
 * move, so the records stay in start order. Time O(n) plus a sort of the synchronisations;
 * returns 0, or -1 when out of memory (records clipped so far stay clipped). */
int tp_gpu_clip_to_streams(tp_process *p);

/* The clip entry of record `o` of p (NULL when o was not clipped). O(log clips). */
const tp_gpu_clip *tp_gpu_clip_of(const tp_process *p, const tp_gpu_op *o);

/* The class of a kernel name: "communication", "attention", "gemm", "elementwise/norm" or
 * "other" (one table, docs/design.md §5.2). The loader stores each kernel's class id in its
 * tp_gpu_op (cls), matched once per distinct name: use tp_kernel_class_name(op->cls) on
 * loaded ops rather than matching the name again. */
const char *tp_kernel_class(const char *name);
int tp_kernel_class_id(const char *name);     /* TP_KC_* */
const char *tp_kernel_class_name(int id);     /* "other" for an id out of range */

#endif
