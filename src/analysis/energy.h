/*
 * energy.h — the rank's NVML section (energy.c): per GPU of the rank, energy over the
 * measured steps (the energy counter, or the power samples integrated), power, SM clocks,
 * temperature, memory used and the clock-event reasons; and the capacity of the rank's CUDA
 * devices (CUPTI's device record, else NVML's total memory).
 */
#ifndef TPROF_ENERGY_H
#define TPROF_ENERGY_H

#include <cjson/cJSON.h>

#include "analysis/model.h"
#include "analysis/results.h"
#include "analysis/steps.h"

/* Computes the rank's NVML figures into *out (results.h; zeroed first; out->gpus allocated,
 * freed by tp_rank_result_free; present = 0 when no process sampled the rank's GPUs, or out
 * of memory). meas/nm: the measured steps (nm 0: the whole run). Strings in *out point into
 * the run or are static. Time O(samples); the samples of one GPU are sorted if they are not
 * in time order. */
void tp_nvml_compute(tp_nvml_result *out, const tp_run *run, const tp_process *rank_p,
                     const tp_step *meas, size_t nm);

/* Sets how many gaps between samples a series keeps for its median sample interval (default
 * 2^20, about 4 MB; at least 1); past it the median is selected in passes over the samples
 * read again, the same value. Returns the one before. For tests, which make every series
 * take that path; set it before reports run, not while they do. */
size_t tp_nvml_set_gaps_keep(size_t n);

/* Adds "nvml" to the rank's JSON from *nv (docs/report-json.md; nothing when !nv->present). */
void tp_nvml_json(cJSON *rank_json, const tp_nvml_result *nv);

/* The clock-event reasons NVML names (nvml_abi.h), in bit order; at most this many. */
#define TP_NVML_NREASONS 9

/* The names of the reasons set in mask, into names[0..max), in the table's order; returns
 * how many. The strings are static. */
size_t tp_nvml_reasons(unsigned long long mask, const char **names, size_t max);

/* Each CUDA device of the rank's GPU result (gpu->devices) gets what CUPTI's device record
 * said of it (cuda.<ordinal>.*: name, UUID, SM count) and its capacity, from that record or
 * else NVML's total memory of the GPU with that CUDA ordinal (not one shared by MIG
 * instances), with the allocator peak's share of it. Call before tp_gpu_json. */
void tp_memory_capacity(tp_gpu_result *gpu, const tp_nvml_result *nvml, const tp_process *p);

#endif /* TPROF_ENERGY_H */
