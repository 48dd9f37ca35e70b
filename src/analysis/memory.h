/*
 * memory.h — a rank's GPU memory over time: the CUDA caching allocator's samples
 * (trainprof.torch's cuda.memory_* counters, one sample per phase boundary), the device
 * allocations CUPTI recorded (cudaMalloc/cudaFree, any program), and the out-of-memory
 * post-mortem (memory.oom.* metadata). The record contract is docs/report-json.md ("Memory").
 *
 * Per step: the peak allocated and reserved, exact or bounded (tp_mem_bound: the allocator's
 * max_memory_allocated is its peak since the job's last reset, so a step's peak is exact
 * only when that reading changed during the step), the phase whose interval set the peak,
 * allocated at the step's first sample (the leak rule's series), and the device peak of
 * CUPTI's allocations where their records are complete. Over the run: the peaks against the
 * capacity, fragmentation (1 - allocated/reserved) at the sampled peak, inactive split
 * bytes, cumulative allocation retries and OOMs.
 *
 * Not thread safe; pure functions of the loaded run. Strings point into the run or are
 * static; tp_memory_result owns its steps and the OOM's frames (tp_memory_result_free).
 */
#ifndef TPROF_MEMORY_H
#define TPROF_MEMORY_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "analysis/model.h"
#include "analysis/results.h"
#include "analysis/steps.h"

/* The document's name of phase i < TP_MEM_NPHASES ("data", ..., "other"). */
const char *tp_mem_phase_name(size_t i);

/* The document's name of a bound: "exact", "at_most", "at_least". */
const char *tp_mem_bound_name(tp_mem_bound b);

/* Computes p's memory into *out (zeroed first): samples are grouped from the cuda.memory_*
 * counters of every thread (a sample is a run of those counters in which no name repeats),
 * steps are s's (all of them, warm-up marked), phases the ranges data/forward/backward/
 * optimizer of the steps' thread, the capacity cuda.<d>.memory_total_bytes else the NVML GPU
 * of that ordinal in nvml (may be NULL). complete_until_ns: CUPTI's memory records are
 * complete from the process's start up to then (tp_capture_result.complete_until_ns; 0:
 * not complete). Returns TPROF_OK or TPROF_ERR_NO_MEMORY (out then holds what was done,
 * present 0 when nothing). */
int tp_memory_compute(tp_memory_result *out, const tp_process *p, const tp_steps *s,
                      const tp_nvml_result *nvml, uint64_t complete_until_ns);

/* Writes "memory" into the rank's object when out->present. At most TP_MEM_JSON_STEPS of
 * the last steps are listed ("steps_left_out" counts the others). */
#define TP_MEM_JSON_STEPS 1000
void tp_memory_json(cJSON *rank, const tp_memory_result *m);

/* The rank's memory section of the text report; nothing when not present. */
void tp_memory_text(FILE *f, const tp_memory_result *m);

/* The OOM's one-line summary for the headline and the finding ("step 7 (backward): request
 * 2.00 GiB, 1.50 GiB free of 80.00 GiB; ..."), into buf. */
void tp_memory_oom_line(const tp_mem_oom *o, char *buf, size_t n);

void tp_memory_result_free(tp_memory_result *m);

/* The memory diagnosis rule `id` (out_of_memory, memory_peak, memory_fragmentation,
 * memory_leak, memory_alloc_retries; memory_rules.c documents each test) over the ranks of
 * res: appends at most one finding to fs, with recommendation rec (static). Returns the
 * number of findings appended (0 for an unknown id). */
struct tp_report_opts;
int tp_memory_rule(const char *id, const tp_run_results *res, tp_findings_result *fs,
                   const struct tp_report_opts *o, const char *rec);

#endif /* TPROF_MEMORY_H */
