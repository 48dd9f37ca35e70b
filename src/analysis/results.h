/*
 * results.h — the typed results of the analyses: what each analysis computed, as C values,
 * so that the analyses that come after it (the diagnosis rules, the stragglers, throughput)
 * read the figures themselves and not the report document back by key. A key renamed in the
 * document cannot switch a rule off: the rules name struct fields, which the compiler checks.
 *
 * The report document (report.json, docs/report-json.md) is an output: the section writers
 * turn these values into JSON, with the same names and units as the fields here.
 *
 * Units are in the field names (ms, us, bytes, mhz, w, c); a share is a fraction of 1.
 * A `has_*` flag says the figure was computed (and is in the document); a figure whose flag
 * is 0 reads 0 and a rule must not use it. A figure flagged impossible (figures.h) is
 * cleared the same way, as the document moves it to "invalid".
 *
 * Ownership: tp_run_results owns its rank array and each rank's nvml.gpus / gpu.devices
 * arrays (tp_run_results_free). Strings point into the loaded run (tp_run) or into static
 * tables, never into the cJSON document: they live as long as the run.
 * Not thread safe; built once per report by tp_report_build.
 */
#ifndef TPROF_RESULTS_H
#define TPROF_RESULTS_H

#include <stddef.h>

/* mean, median, 90th percentile, min, max of a per-step series (nearest-rank percentiles) */
typedef struct tp_stat5 {
    double mean, p50, p90, min, max;
} tp_stat5;

/* Statistics of v[0..n) (sorted in place). All 0 for n = 0. */
tp_stat5 tp_stat5_of(double *v, size_t n);

/* The parts of a step in the GPU breakdown (breakdown.h), in the document's names
 * (tp_bd_part_name): ms per step and share of the step. */
typedef enum tp_bd_part {
    TP_BD_STEP, TP_BD_COMPUTE, TP_BD_EXPOSED_COMM, TP_BD_OVERLAPPED_COMM, TP_BD_MEMCPY,
    TP_BD_IDLE, TP_BD_IDLE_DATA, TP_BD_IDLE_HOST_SYNC, TP_BD_IDLE_OTHER, TP_BD_START_IDLE,
    TP_BD_START_IDLE_DATA, TP_BD_IDLE_OTHER_SHORT_GAPS, TP_BD_NPARTS
} tp_bd_part;

/* The rank's steps (the document's "steps"; steps.h). */
typedef struct tp_steps_result {
    int present;           /* steps were looked for (the section exists) */
    size_t count, warmup, measured;
    double mean_ms;        /* mean measured step; 0 without measured steps */
} tp_steps_result;

/* Data loading ("data_loading"): the union of the data-named ranges inside the steps. */
typedef struct tp_data_result {
    int found;             /* a data-named range lies in the measured steps (or the run) */
    int per_step;          /* ms_per_step is per measured step; else ms_total over the run */
    double ms;             /* per measured step (per_step) or in total */
    double share;          /* of the measured steps' time (or of the run) */
} tp_data_result;

/* The step breakdown ("breakdown"; breakdown.h). The figures below `windows` are filled for
 * the GPU basis only. */
typedef struct tp_breakdown_result {
    int present;
    int gpu_basis;         /* "basis": "gpu" (1) or "cpu" (0) */
    int per_step;          /* "per": "step" (1) or "run" (0) */
    size_t windows;        /* measured steps (or 1 window without steps) */
    int has_parts;         /* ms and share below were computed */
    tp_stat5 ms[TP_BD_NPARTS];
    double share[TP_BD_NPARTS];  /* TP_BD_STEP unused; TP_BD_IDLE_DATA.. of the step */
    double busy_share;     /* 1 - idle share */
    double kernels_per_step, kernel_median_us, idle_gaps_per_step, idle_gap_median_us;
    int has_most_idle_step;
    double most_idle_step; /* the application's step number with the most idle time */
} tp_breakdown_result;

/* One CUDA device of the rank's GPU activity ("gpu.devices[]"; gpu.h). */
typedef struct tp_gpu_device_result {
    unsigned device;       /* CUDA ordinal */
    double memory_peak_bytes;  /* the allocator's peak from CUPTI's memory records */
} tp_gpu_device_result;

/* The rank's GPU activity ("gpu"; gpu.h). */
typedef struct tp_gpu_result {
    int present;
    double host_syncs;     /* blocking synchronisations per step (or in total) */
    double host_sync_blocked_ms;
    size_t ndevices;
    tp_gpu_device_result *devices; /* owned */
} tp_gpu_result;

/* One GPU of the NVML samples of the rank ("nvml.gpus[]"), over the measured steps' span. */
typedef struct tp_nvml_gpu_result {
    unsigned index;        /* NVML index */
    const char *name, *uuid;   /* NULL when the sampler did not write them */
    int has_cuda_device;
    int cuda_device;           /* the CUDA ordinal of this GPU in the rank */
    int shared_by_mig;         /* in MIG mode: power, energy and clocks are the whole GPU's */
    int has_sm_clock;
    double sm_clock_mhz_min, sm_clock_mhz_mean, sm_clock_mhz_max;
    int has_power;
    double power_mean_w, power_max_w;
    int has_power_limit;
    double power_limit_w;
    int has_temp;
    double temp_c_max;
    int has_mem_used;
    double mem_used_peak_bytes;
    int has_mem_used_share;    /* cleared when the share is impossible (figures.h) */
    double mem_used_peak_share;
    int has_mem_total;
    double mem_total_bytes;
    int has_clock_events;
    int throttled;             /* a throttling reason set in some sample */
    double throttled_share;    /* of the samples with clock events */
    unsigned long long clock_event_mask;
} tp_nvml_gpu_result;

/* The rank's NVML section ("nvml"). */
typedef struct tp_nvml_result {
    int present;
    int shared_with_other_ranks; /* the samples are every GPU of the host: the rank's is unknown */
    size_t ngpus;
    tp_nvml_gpu_result *gpus;    /* owned, in NVML index order */
} tp_nvml_result;

/* One rank of the report ("ranks[]"). */
typedef struct tp_rank_result {
    int rank;
    const char *host;
    tp_steps_result steps;
    tp_data_result data;
    tp_breakdown_result breakdown;
    tp_gpu_result gpu;
    tp_nvml_result nvml;
} tp_rank_result;

/* Throughput ("throughput"; mfu.h): the inputs the rules use. */
typedef struct tp_throughput_result {
    int present;
    double samples_per_step; /* per rank and step; 0 = unknown */
} tp_throughput_result;

/* A rank named a straggler ("stragglers.named[]"; diagnose.c). */
typedef struct tp_straggler {
    int rank;
    const char *host;
    const char *by;          /* "collective lag", "step time", or both */
    int has_lag;             /* the rank took part in matched collectives */
    double lag_ms, lag_ms_per_step, lag_excess_ms;
    int has_step;
    double step_ms, step_excess_ms;
    const tp_nvml_gpu_result *gpu; /* its first NVML GPU, or NULL */
    int has_cuda_device;     /* without an NVML GPU: its first CUDA device */
    unsigned cuda_device;
    int gpu_unknown;         /* NVML shows every GPU of the host: no comparison */
    int vs_present;          /* its GPU's figures were compared with the other ranks' */
    int compared;            /* ... and at least one figure had others to compare with */
    int gpu_differs;
    size_t nvs;
    struct {
        const char *key;     /* document key of the figure compared */
        double rank, others_median;
        int differs;
    } vs[3];
} tp_straggler;

/* The run's stragglers ("stragglers"). */
typedef struct tp_stragglers_result {
    int present;
    double median_step_ms, lag_threshold_ms, step_threshold_ms;
    size_t nnamed;
    tp_straggler *named;     /* owned */
} tp_stragglers_result;

/* Everything the run-level analyses and the rules read. */
typedef struct tp_run_results {
    size_t nranks;
    tp_rank_result *ranks;   /* owned, in rank order (as the document's "ranks") */
    tp_throughput_result throughput;
    tp_stragglers_result stragglers;
} tp_run_results;

/* The rank result of `rank`, or NULL. */
const tp_rank_result *tp_results_rank(const tp_run_results *r, int rank);

/* The rank's first NVML GPU, or NULL. */
const tp_nvml_gpu_result *tp_results_first_gpu(const tp_rank_result *rr);

void tp_rank_result_free(tp_rank_result *rr);
void tp_run_results_free(tp_run_results *r);

#endif /* TPROF_RESULTS_H */
