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
 * Ownership: tp_run_results owns every array marked "owned" below: its ranks and their
 * arrays, the processes, the findings (their messages and evidence), the clocks' hosts, the
 * stragglers and the communicators across ranks (tp_run_results_free). Strings point into
 * the loaded run (tp_run), into the report options or into static tables, never into the
 * cJSON document: they live as long as the run.
 * Not thread safe; built once per report by tp_report_build.
 */
#ifndef TPROF_RESULTS_H
#define TPROF_RESULTS_H

#include <stddef.h>
#include <stdint.h>

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

/* Why some measured steps were not captured (tp_capture_result.limited_by, bits). */
#define TP_CAP_KERNEL_STEPS 1u   /* the kernel-capture window (--kernel-steps) */
#define TP_CAP_DETAIL 2u         /* the metrics endpoint's detail on/off */
#define TP_CAP_PAUSED 4u         /* paused for another CUPTI client (gpu_capture.pauses) */
/* The capture pauses a rank's GPU result lists one by one (tp_gpu_result.pauses); later ones
 * are counted with their time (pauses_more, pauses_more_s). */
#define TP_GPU_PAUSES_LISTED 24u
#define TP_CAP_STOPPED 8u        /* GPU records stopped while the steps went on */
#define TP_CAP_BOUND 16u         /* the report held the GPU records of a span of the run only:
                                  * the rank's were more than its bound (model.h,
                                  * tp_process_load_bounded; tp_report_opts.gpu_records) */

/* Runs of captured step numbers kept (the rest are counted in ranges_left_out). */
#define TP_CAPTURE_RANGES 8

/* The measured steps in which GPU activity was recorded ("gpu_capture"; capture.h): the
 * steps every GPU figure of the rank is over, and the step time they cost. */
typedef struct tp_capture_result {
    int present;           /* the rank's GPU activity was captured, or meant to be, and it has
                            * measured steps */
    int limited;           /* some measured step was not captured (the section is written) */
    unsigned limited_by;   /* TP_CAP_* */
    size_t measured, captured;
    size_t nranges;        /* runs of consecutive captured steps, at most TP_CAPTURE_RANGES */
    double ranges[TP_CAPTURE_RANGES][2]; /* [first, last] application step numbers */
    size_t ranges_left_out;
    char steps[128];       /* the runs in words: "30-34", "10-15, 22"; "" when none */
    char not_captured[240]; /* captured == 0: why, in words; else "" */
    /* capture on from the start of the process until this time (CLOCK_MONOTONIC ns;
     * UINT64_MAX: never off; 0: not on at the start): the allocator's records before it
     * are complete, so a device-memory peak can be read from them */
    uint64_t complete_until_ns;
    double complete_until_s; /* the same in s from the process's start (UINT64_MAX: -1) */
    int has_records_stopped; /* GPU records stopped while the steps went on */
    double stopped_after_s, stopped_span_s;
    size_t steps_without_gpu_records;
    /* the capture's cost: median captured step against the median of the uncaptured steps
     * beside the captured ones */
    int has_cost;          /* a result */
    int cost_flagged;      /* computed but not a result: cost_reason says why */
    double cost_ms, cost_share, captured_median_ms, other_median_ms, other_spread_ms;
    double noise_ms;       /* two standard errors of cost_ms (capture.c, cost) */
    size_t cost_captured, cost_other, cost_skipped;
    char cost_reason[200];
    size_t windows_ignored; /* gpu_capture.windows entries malformed or reversed (damaged
                             * metadata), left out: no step is captured by them */
    size_t windows_unlisted; /* windows past the list the file holds (the runtime counts
                              * them, gpu_capture.windows_left_out): their steps count as
                              * not captured, their GPU records unread */
    /* TP_CAP_BOUND: the bound, the GPU records held and those left out, and the span held
     * (s from the process's start) */
    size_t bound_records, bound_kept, bound_left_out;
    double bound_from_s, bound_to_s;
} tp_capture_result;

/* The rank's steps (the document's "steps"; steps.h). */
typedef struct tp_steps_result {
    int present;           /* steps were looked for (the section exists) */
    size_t count, warmup, measured;
    double mean_ms;        /* mean measured step; 0 without measured steps */
    const char *source;    /* tp_step_source_name: "api", "named", ... "none" (static) */
    const char *name;      /* the range name or pattern matched, or NULL (static, or the
                            * report options' step_name: lives as long as they do) */
    const char *requested_name; /* the options' step_name, or NULL */
    const char *note;      /* why the requested name was not used, or NULL (static) */
    int torch_hooks;       /* trainprof.torch instrumented the process (metadata) */
    int has_thread;        /* steps were found on a thread (source not "none") */
    const char *thread;    /* its name, or NULL (into the run) */
    uint32_t tid;          /* its OS thread id */
    double *warmup_ms;     /* owned: the warm-up steps' lengths, `warmup` of them */
    int has_stats;         /* the measured steps' statistics below were computed */
    double p50_ms, p90_ms, min_ms, max_ms;
    double first_ms;       /* from the process's first event to the first measured step */
    uint64_t missing_count;     /* step numbers lost to drops (API steps); 0: none */
    size_t nmissing;            /* ranges of them listed (at most 100) */
    double (*missing)[2];       /* owned: [first, last] step number of each range */
    size_t missing_left_out;    /* ranges beyond those listed */
    const char *missing_flag;   /* what the statistics miss because of them (static) */
    int has_dropped;       /* measured steps overlap dropped events (or lost records) */
    double steps_touched, events_in_steps;
    uint64_t events_unplaced;   /* dropped at unknown times plus records lost to write errors */
    uint64_t records_lost;      /* records lost to write errors */
    const char *dropped_flag;   /* what the figures of those steps miss (static) */
} tp_steps_result;

/* Data loading ("data_loading"): the union of the data-named ranges inside the steps. */
typedef struct tp_data_result {
    int found;             /* a data-named range lies in the measured steps (or the run) */
    int per_step;          /* ms_per_step is per measured step; else ms_total over the run */
    double ms;             /* per measured step (per_step) or in total */
    double share;          /* of the measured steps' time (or of the run) */
    const char *where;     /* "step thread", "other threads" or "all threads" (static) */
} tp_data_result;

/* The step breakdown ("breakdown"; breakdown.h). The figures below `windows` are filled for
 * the GPU basis only, those from `has_cpu` on for the CPU basis only. */
typedef struct tp_breakdown_result {
    int present;
    int gpu_basis;         /* "basis": "gpu" (1) or "cpu" (0) */
    int per_step;          /* "per": "step" (1) or "run" (0) */
    size_t windows;        /* measured steps (or 1 window without steps); GPU basis: the
                            * captured ones (capture.h) */
    const char *not_captured; /* GPU basis, measured steps but none captured: why (into the
                               * rank's capture result); no part is known */
    const char *captured_steps; /* GPU basis over fewer steps than measured: which ones, in
                                 * words (into the rank's capture result); else NULL */
    size_t measured_all;   /* with captured_steps: every measured step */
    /* GPU basis without steps: GPU activity was not recorded the whole run (paused for
     * another CUPTI client, a plan's window closed): the one window is the captured_s
     * seconds in which it was, of run_s (capture.h, tp_capture_spans) */
    int has_uncaptured;
    double captured_s, run_s;
    /* with has_uncaptured: the load was bounded in GPU records, and captured_s is the time
     * whose records it held (a span of the run: model.h, tp_process_load_bounded) */
    int bounded;
    int has_device;        /* GPU basis: the device was chosen (figures may still be missing) */
    uint32_t device;       /* CUDA ordinal of the main device: the most kernel time */
    size_t ndevices;       /* devices with kernels ("devices" in the document when over 1) */
    int has_parts;         /* ms and share below were computed */
    tp_stat5 ms[TP_BD_NPARTS];
    double share[TP_BD_NPARTS];  /* TP_BD_STEP unused; TP_BD_IDLE_DATA.. of the step */
    double busy_share;     /* 1 - idle share */
    double kernels_per_step, kernel_median_us, idle_gaps_per_step, idle_gap_median_us;
    int has_most_idle_step;
    double most_idle_step; /* the application's step number with the most idle time */
    int has_cpu;           /* CPU basis: the rows below were computed */
    size_t nranges;        /* at most TP_BD_CPU_ROWS + 1: the last is "(other ranges)" */
    struct tp_bd_range *ranges;  /* owned: ranges under the step, most time first */
    tp_stat5 step_ms, untracked_ms; /* CPU basis: per measured step */
    double untracked_share;
    size_t nwarmup;
    struct tp_bd_warmup *warmup; /* owned: the warm-up steps, either basis */
} tp_breakdown_result;

/* The kernel classes (TP_KC_COUNT of model.h; gpu.c checks that they agree). */
#define TP_GPU_NCLASSES 5

/* A figure past its hard bound, moved to the section's "invalid" (figures.h): its value
 * and the bound it passed; `flagged` 0: the figure is a result. */
typedef struct tp_flagged_figure {
    int flagged;
    double value, limit;
} tp_flagged_figure;

/* One CUDA device of the rank's GPU activity ("gpu.devices[]"; gpu.h). Time and counts are
 * per measured step (tp_gpu_result.per_step) or in total. */
typedef struct tp_gpu_device_result {
    unsigned device;       /* CUDA ordinal */
    /* the allocator's peak from CUPTI's memory records of the time capture was on from the
     * start (tp_capture_result.complete_until_ns); has_memory_peak 0: no such record, the
     * peak is not captured (unknown, not 0) */
    int has_memory_peak;
    double memory_peak_bytes;
    int has_memory_peak_until; /* capture went off later: the peak is up to then */
    double memory_peak_until_s; /* s from the process's start */
    int has_busy_share;    /* per step only; cleared when impossible (figures.h) */
    double busy_share;     /* of the measured steps' time */
    double busy_ms, kernels, kernel_ms;
    double kernel_ms_by_class[TP_GPU_NCLASSES]; /* TP_KC_* order (model.h, gpu.h) */
    /* copies and memsets: the process holds no record of the kind at all (has_* 0) when
     * CUPTI's kind was off: not captured, unknown rather than 0 */
    int has_memcpy_memset, has_copies;
    double memcpy_memset_ms, h2d_bytes, d2h_bytes;
    /* from CUPTI's device record or NVML (tp_memory_capacity): */
    const char *name, *uuid;   /* NULL when not recorded */
    int has_sm_count;
    double sm_count;
    int has_capacity;
    double memory_capacity_bytes, memory_peak_share;
    tp_flagged_figure busy_share_flagged; /* busy_share past 1 (has_busy_share then 0) */
    /* memory_peak_share past 1: CUPTI's allocation records sum past the device's memory
     * (has_memory_peak then 0, and the peak is not shown) */
    tp_flagged_figure memory_peak_flagged;
} tp_gpu_device_result;

/* The rank's GPU activity ("gpu"; gpu.h). */
typedef struct tp_gpu_result {
    int present;
    int per_step;          /* figures per measured step (1) or over the run (0) */
    /* a rank without measured steps whose load was bounded in GPU records (model.h,
     * tp_process_load_bounded): per_step 0 and the figures are totals over the span it held
     * (the capture result's bound_from_s .. bound_to_s), not over the run; busy shares are
     * of the span */
    int in_span;
    int has_launch_lag;
    double launch_lag_ms;  /* median launch-to-start delay */
    int has_kernel_steps;  /* a kernel-capture window (TRAINPROF_KERNEL_STEPS); in_window:
                            * the captured measured steps (capture.h) */
    const char *kernel_steps_spec;
    size_t kernel_steps_in_window, kernel_steps_measured;
    int kernel_steps_opened;
    int has_pauses;        /* the capture was paused (the list may still be empty) */
    size_t npauses;        /* the first TP_GPU_PAUSES_LISTED of them at most */
    struct tp_gpu_pause *pauses;   /* owned */
    size_t pauses_more;    /* the pauses past those, counted (a job that pauses for
                            * torch.profiler every few hundred steps pauses thousands of times) */
    double pauses_more_s;  /* their time, s */
    char *pause_reasons;           /* owned: the text pauses[].reason point into (or NULL) */
    uint64_t cupti_records_dropped;
    double cupti_records_untimed;  /* 0: none */
    int has_overhead;      /* CUPTI overhead records in the measured steps */
    size_t overhead_records, overhead_driver_records;
    double overhead_ms, overhead_driver_ms;
    size_t noverhead_kinds;
    struct tp_gpu_overhead *overhead_kinds; /* owned: by kind, most time first */
    size_t records_clipped;
    double records_clipped_ms;
    size_t ndevices;
    tp_gpu_device_result *devices; /* owned */
    size_t nkernels;
    struct tp_gpu_kernel *kernels; /* owned: the top kernels, most time first */
    double kernel_ms_total;
    const char *not_captured; /* measured steps, none captured: why (into the rank's
                               * capture result); no figure below is known */
    int has_records_stopped; /* GPU records stopped while the steps went on */
    double stopped_after_s, stopped_span_s;
    size_t steps_without_gpu_records;
    const char *stopped_cause;     /* static */
    int has_host_syncs;    /* runtime-API records exist (CUPTI's runtime kind was on) */
    double host_syncs;     /* blocking synchronisations per step (or in total) */
    double host_sync_blocked_ms;
    /* CUDA graphs: launches (cudaGraphLaunch, cuGraphLaunch) per step (or in total) and the
     * kernels that ran as nodes of a graph; 0 without graphs */
    double graph_launches, graph_kernels;
    /* kernels that started after the last measured step ended: in no step (whole run) */
    size_t kernels_after_steps;
    double kernel_ms_after_steps;
    size_t steps_measured; /* the steps the per-step figures are over (0: in total) */
} tp_gpu_result;

/* One GPU of the NVML samples of the rank ("nvml.gpus[]"), over the measured steps' span. */
typedef struct tp_nvml_gpu_result {
    unsigned index;        /* NVML index */
    const char *name, *uuid;   /* NULL when the sampler did not write them */
    int has_cuda_device;
    int cuda_device;           /* the CUDA ordinal of this GPU in the rank */
    int shared_by_mig;         /* in MIG mode: power, energy and clocks are the whole GPU's */
    const char *mig_device;    /* the rank's MIG device UUID, or NULL */
    size_t samples;            /* of its longest series */
    int has_energy;            /* energy_* and avg_power_w below were computed */
    const char *energy_method; /* "counter", "integrated_power" (static) */
    const char *energy_counter;/* the sampler's reason for no counter, or NULL */
    const char *energy_series; /* the series read (static) */
    double sample_interval_ms;
    char energy_unavailable[400]; /* !has_energy: why */
    int has_per_step_energy;   /* the figures below are per measured step */
    size_t steps_with_energy;
    double energy_per_step_j, energy_per_step_wh, energy_resolution_ms;
    int energy_approximate;    /* the steps are shorter than the resolution */
    int has_energy_from_power;
    double energy_per_step_from_power_j;
    double energy_j, avg_power_w;
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
    int has_util;              /* cleared when impossible (figures.h) */
    double util_percent_mean;
    int has_clock_events;
    int throttled;             /* a throttling reason set in some sample */
    double throttled_share;    /* of the samples with clock events */
    unsigned long long clock_event_mask;
    tp_flagged_figure util_flagged, mem_used_share_flagged; /* past their bounds (figures.h) */
} tp_nvml_gpu_result;

/* The rank's NVML section ("nvml"). Strings point into the loaded run or are static. */
typedef struct tp_nvml_result {
    int present;
    int per_step;                /* over the measured steps' span (1) or the run (0) */
    int shared_with_other_ranks; /* the samples are every GPU of the host: the rank's is unknown */
    int has_sampled_by;          /* another process sampled: */
    char sampled_by[48];         /* "node sampler" or its label */
    double sampler_pid;
    const char *rank_gpus_by;    /* "uuid", "mig_parent", "position"; NULL: not linked */
    int has_not_sampled;         /* the rank's GPUs are known and none was sampled: */
    size_t nnot_sampled;
    const char *not_sampled[64]; /* their UUIDs */
    const char *device_match, *driver_version; /* NULL when not written */
    int has_hz;
    double hz;
    int has_total;               /* the GPUs together (more than one, all with energy) */
    double total_energy_j;       /* per measured step (per_step) or over the run */
    double total_avg_power_w;
    const char *energy_method;   /* of the GPUs with energy: one, "mixed", or NULL */
    size_t ngpus;
    tp_nvml_gpu_result *gpus;    /* owned, in NVML index order */
} tp_nvml_result;

/* ------------------------------------------------------------------ GPU details
 * The rows of the GPU, NVML and breakdown results above (gpu.c, energy.c, breakdown.c). */

/* A span in which GPU capture was paused ("gpu.capture_paused[]"), in s from the process's
 * start. */
typedef struct tp_gpu_pause {
    double from_s, to_s;
    int never_resumed;
    const char *reason;    /* NULL when none was written */
} tp_gpu_pause;

/* CUPTI overhead of one kind ("gpu.cupti_overhead.by_kind[]"). */
typedef struct tp_gpu_overhead {
    const char *name;
    int driver;            /* the driver's time ("source": "driver"), else CUPTI's own */
    double ms;             /* per measured step (or in total) */
} tp_gpu_overhead;

/* A top kernel ("gpu.top_kernels[]"). */
typedef struct tp_gpu_kernel {
    const char *name;      /* into the loaded run */
    const char *cls;       /* its class (gpu.h; static) */
    double count_per_unit, total_ms, mean_us;
    double share;          /* of all kernel time */
} tp_gpu_kernel;

/* Rows of the CPU breakdown: at most this many ranges, then "(other ranges)". */
#define TP_BD_CPU_ROWS 8

/* A range row of the CPU breakdown ("breakdown.ranges[]"). */
typedef struct tp_bd_range {
    const char *name;      /* into the loaded run, or "(other ranges)" (static) */
    const char *domain;    /* NULL: the default domain (or the rest) */
    tp_stat5 ms;           /* per measured step */
    double share;          /* of the measured steps' time */
} tp_bd_range;

/* A warm-up step of the breakdown ("breakdown.warmup[]"). */
typedef struct tp_bd_warmup {
    double step;                   /* the application's step number */
    double ms[TP_BD_NPARTS];       /* GPU basis: each part */
    double step_ms, untracked_ms;  /* CPU basis */
    size_t nranges;
    struct {
        const char *name;
        double ms;
    } ranges[TP_BD_CPU_ROWS];      /* CPU basis: the rows' time in this step, when any */
} tp_bd_warmup;

/* The document's name of a breakdown part ("compute", ...; static). */
const char *tp_bd_part_name(tp_bd_part part);

/* Megatron's timers of the rank ("timers"; report.c): time per timer name, first start first. */
typedef struct tp_timer_row {
    const char *name;        /* into the loaded run */
    double ms;               /* per measured step (per_step) or over the run */
    double count;
} tp_timer_row;

typedef struct tp_timers_result {
    int present;
    int per_step;
    size_t nrows;
    tp_timer_row *rows;      /* owned */
} tp_timers_result;

/* One row of a rank's range tables ("ranges.top_inclusive[]", "top_exclusive[]", "unclosed[]";
 * report.c): times per measured step (per_step) or over the run; shares of the steps' time
 * (or of the rank's span). An "unclosed" row has its name, domain and count only. */
typedef struct tp_range_row {
    const char *name;        /* into the loaded run */
    const char *domain;      /* "" for the default domain (into the run, or static) */
    double count, count_per_unit;
    double inclusive_ms, exclusive_ms, inclusive_share, exclusive_share;
} tp_range_row;

/* The rank's ranges ("ranges"): the top rows by inclusive and by exclusive time. */
typedef struct tp_ranges_result {
    int present;
    int per_step;
    size_t ninclusive, nexclusive, nunclosed;
    tp_range_row *top_inclusive, *top_exclusive; /* owned, at most the options' top_n each */
    tp_range_row *unclosed;  /* owned: the ranges never closed, left out of the tables */
    size_t distinct_names;
} tp_ranges_result;

/* The process sampler's figures of the rank ("process"; capture/procfs.c). A CPU figure past
 * its bound (figures.h) has its has_* flag cleared while cpu_sampled stays set. */
typedef struct tp_process_sampler_result {
    int present;             /* the sampler recorded the RSS at least once */
    double samples;
    int cpu_sampled;         /* a CPU rate was sampled (needs 100 ms between samples) */
    int has_cpu_mean, has_cpu_max;
    double cpu_percent_mean, cpu_percent_max;
    tp_flagged_figure cpu_mean_flagged, cpu_max_flagged; /* past 100 % x the host's CPUs */
    char cpu_flag_reason[200];
    double rss_peak_bytes;
    int has_threads, has_ctx_switches;
    double threads_max, ctx_switches_per_s_mean;
} tp_process_sampler_result;

/* One op of a communicator in the rank ("communication.communicators[].ops[]"; comm.c): the
 * sums over the rank's ops of that name on that communicator. The document's derived figures
 * (time_ms, mean_us, algbw_gbs, busbw_gbs, bus_factor, per-step counts) come from these with
 * tp_comm_row_bw and tp_comm_bus_factor (comm.h). */
typedef struct tp_comm_row_result {
    uint64_t hash;           /* the communicator's id */
    uint32_t op;             /* enum tprof_comm_op */
    uint32_t nranks, rank;   /* the communicator's size (largest seen) and this rank's place */
    const char *name;        /* the op's name in the document */
    uint64_t first;          /* ns, first host start on the communicator (for ordering) */
    uint64_t count, bytes, timed, unfinished, enqueue_only, in_steps, bytes_in_steps;
    uint64_t time_ns;        /* sum over the timed ops */
    uint64_t bw_ops, bw_ns;  /* ops with a real duration (not an NCCL enqueue), their time */
    double bw_size;          /* and their nccl-tests size S, bytes */
    uint64_t src[3];         /* timed ops per time source (tp_comm_src) */
    uint32_t dtypes;         /* bit d: an op of enum tprof_comm_dtype d */
    size_t op0;              /* index in the process's comm ops of one of its ops */
} tp_comm_row_result;

/* One communicator of the rank ("communication.communicators[]"), most time first. */
typedef struct tp_comm_communicator_result {
    char id[24];             /* "0x" and 16 hex digits of the hash */
    uint64_t hash;
    uint32_t size, rank;     /* largest size of its ops; this rank's place in it */
    unsigned nodes;          /* from NCCL's init; 0 = not known */
    const char *name;        /* NCCL's name for it, or NULL (into the run's metadata) */
    const char *torch_group; /* trainprof.torch's description, or NULL (the run's metadata) */
    const char *source;      /* who recorded it: "nccl", "mpi", "torch" (static) */
    char backend[32];        /* what carried it: "nccl", "gloo", ... */
    size_t nrows;
    const tp_comm_row_result *rows; /* into tp_comm_result.rows */
} tp_comm_communicator_result;

/* The exposure's note when memory ran out while it was computed (no figures): the headline
 * tells that the rule could not judge that rank. */
#define TP_EXPOSURE_NO_MEMORY                                                                \
    "memory ran out while it was computed: the report may miss what it would have found "   \
    "(run the report where more memory is free)"

/* Exposed and overlapped communication of the rank ("communication.exposure"). */
typedef struct tp_comm_exposure_result {
    int present;
    int per_step;            /* windows are the measured steps (1) or the whole run (0) */
    /* no step, a load bounded in GPU records, the GPU basis: the one window is the span whose
     * GPU records the report held (model.h, tp_process_load_bounded), not the run */
    int in_span;
    const char *basis;       /* "gpu", "host" or "none" (static) */
    const char *note;        /* what the basis counts (static) */
    size_t ndevices;         /* the CUDA devices compared (GPU basis) */
    uint32_t devices[64];
    int has_figures;         /* the figures below were computed */
    size_t windows;
    double window_ms;        /* mean window */
    tp_stat5 comm_ms, exposed_ms, overlapped_ms, exposed_share_per_window; /* per window */
    double exposed_share, overlapped_share; /* of all the windows' time */
    int has_worst_step;
    double worst_step;       /* the application's step number with the largest exposed share */
} tp_comm_exposure_result;

/* The note of a rank's "communication" whose rows were lost to memory. */
#define TP_COMM_ROWS_NO_MEMORY                                                               \
    "memory ran out while the ops were summed per communicator: the communicators are not "  \
    "listed (run the report where more memory is free)"

/* The rank's communication ("communication"; comm.h). */
typedef struct tp_comm_result {
    int present;
    size_t ops, nccl_ops, mpi_ops, torch_ops;
    size_t ntorch_backends;
    char (*torch_backends)[32]; /* owned: torch.distributed's backends, in order of first use */
    int has_not_recorded;
    double nccl_ops_not_recorded; /* NCCL ops the plugin's full pool refused (at least) */
    int nothing;             /* no op and no communication kernel: "note", nothing below */
    int resolved;            /* the ops were timed: placement, communicators and exposure */
    int has_placement;       /* kernel-channel intervals checked against CUPTI */
    int rows_no_memory;      /* memory ran out summing the ops: no rows, no communicators
                              * ("note": TP_COMM_ROWS_NO_MEMORY) */
    double placement_ops, shift_us_p50, shift_us_min, shift_us_max;
    size_t ncomms;
    tp_comm_communicator_result *comms; /* owned */
    size_t nrows;
    tp_comm_row_result *rows;           /* owned; each communicator's rows are consecutive */
    tp_comm_exposure_result exposure;
    size_t nsteps;           /* measured steps the per-step counts are over; 0: the whole run */
} tp_comm_result;

#include "results_memory.h" /* the memory section's results */

/* One rank of the report ("ranks[]"). */
typedef struct tp_rank_result {
    int rank;
    const char *host;
    tp_steps_result steps;
    tp_data_result data;
    tp_breakdown_result breakdown;
    tp_gpu_result gpu;
    tp_nvml_result nvml;
    tp_comm_result comm;
    tp_timers_result timers;
    char label[64];          /* tp_process_label: "rank N", with its kind */
    int pid;
    int no_memory;           /* memory ran out while the section was computed: any figure of
                              * it may be missing or short (alloc.h, TP_SECTION_NO_MEMORY) */
    tp_ranges_result ranges;
    tp_process_sampler_result process;
    tp_breakdown_result phases; /* "phases": the CPU basis's rows for a GPU-basis rank */
    tp_capture_result capture; /* the steps the GPU figures are over */
    tp_memory_result memory;   /* the caching allocator's timeline and any OOM */
} tp_rank_result;

/* One op of a communicator across the ranks ("communication.communicators[].ops[]";
 * comm_run.c): counts per rank (the most any rank saw), bytes, timing, bandwidth. */
typedef struct tp_comm_xop_result {
    const char *op;          /* static */
    double ranks;            /* ranks that ran it */
    double count_per_rank;   /* the most any rank saw */
    int has_count_min;       /* some rank saw fewer: */
    double count_min_rank;
    double bytes_per_rank;
    int has_bytes_per_op;
    double bytes_per_op;
    int has_mean;
    double mean_ms;          /* mean over the timed ops */
    int has_bw;
    double algbw_gbs, busbw_gbs;
    const char *time_source; /* tp_comm_time_source (static) */
    double enqueue_only;     /* ops timed by their NCCL enqueue only; 0: none */
} tp_comm_xop_result;

/* One communicator across the ranks ("communication.communicators[]"), most time first. */
typedef struct tp_comm_xcomm_result {
    const char *id;          /* into the ranks' results */
    double size;
    size_t nmembers;         /* rank files that show it ("ranks_seen") */
    struct {
        int rank, comm_rank;
    } *members;              /* owned, by world rank */
    const char *traffic;     /* "point-to-point" or "collective" (static) */
    const char *torch_group; /* trainprof.torch's description, or NULL (into the run) */
    char role_guess[64], role_basis[200];
    size_t nops;
    tp_comm_xop_result *ops; /* owned */
    /* the names the program gave the torch group(s) with these members (new_group's
     * group_desc, as Megatron-LM names its groups), " or " between several groups of the
     * same members; "" when none was named. role_named: the role comes from a name. */
    char group_names[200];
    int role_named;
} tp_comm_xcomm_result;

/* The run's communication ("communication"; comm_run.c). */
typedef struct tp_comm_run_result {
    int present;
    int world_size;
    size_t ncomms;
    tp_comm_xcomm_result *comms; /* owned */
    size_t nexposed;
    const tp_rank_result **exposed; /* owned array: the ranks with exposure figures */
    const char *per;         /* "step", "span", "run" or "mixed" (static) */
    double warn_share, crit_share;
    int has_summary;         /* some rank has exposure figures: */
    double mean_exposed_share, median_exposed_share;
    int worst_rank;
    double worst_exposed_share;
} tp_comm_run_result;

/* Throughput, model FLOPs and MFU ("throughput"; mfu.h), every figure of the section.
 * Per-step inputs are per rank; sources are "option", "metadata" or "model" (static). */
typedef struct tp_throughput_result {
    int present;             /* some rank has measured steps */
    double step_ms;          /* mean over ranks of their mean measured step */
    size_t ranks;
    double samples_per_step; /* per rank and step; 0 = unknown */
    const char *samples_source;  /* NULL: samples per step unknown; else the figures below */
    double samples_per_s, samples_per_s_per_gpu;
    double tokens_per_step;
    const char *tokens_source;   /* NULL: tokens per step unknown */
    double tokens_per_s, tokens_per_s_per_gpu;
    int has_model_error;
    char model_error[200];   /* why the model description was refused */
    int has_model;           /* a model description was parsed: */
    const char *model_spec;  /* as given (the options' or the run's metadata) */
    const char *model_source; /* "option" or "metadata" */
    size_t nmodel;
    struct {
        const char *key;     /* "layers", "hidden", ... in the document's order (static) */
        double v;
    } model[11];
    int model_gated;
    double flops_per_token;  /* Megatron-LM's formula for one token */
    const char *model_formula; /* where the formula comes from (static) */
    const char *note;        /* static, or NULL */
    const char *flops_source; /* NULL: no FLOPs, none of the figures below */
    double flops_per_step;
    double tflops_per_gpu;   /* achieved; see tflops_flagged */
    char dtype[16];          /* the dtype of the peak */
    const char *gpu;         /* the first NVML GPU's name, or NULL (into the run) */
    int has_peak;
    double peak_tflops;
    const char *peak_entry, *peak_source; /* the peak table's row and its reference (static) */
    double mfu;              /* tflops_per_gpu / peak_tflops; see mfu_flagged */
    const char *mfu_note;    /* why there is no MFU (static), or NULL */
    tp_flagged_figure mfu_flagged, tflops_flagged; /* past the peak: not results */
    char flag_reason[400];   /* why (both share it) */
} tp_throughput_result;

/* One host of the clock alignment ("clocks.per_host[]"; clocks.c). */
typedef struct tp_host_clock_result {
    const char *host;        /* into the run */
    size_t nranks;
    int *ranks;              /* owned: the ranks on it */
    int reference;           /* the first host: the others are aligned to it */
    int aligned;
    double offset_us;
    int64_t offset_ns;       /* the same, exact */
    int64_t map_ns;          /* aligned wall ns = monotonic ns of the host + map_ns */
    const char *found_by;    /* how the mapping was found (static): "reference", "matched
                              * collectives", "start pair only", "reference's start" */
    double collectives_used; /* matched collectives the offset came from (not the reference) */
    int has_residual;
    double residual_median_us, residual_max_us;
    const char *note;        /* why it is not aligned (static), or NULL */
} tp_host_clock_result;

/* A rank file whose start clock pair was not used ("clocks.unusable_clock_pairs[]"). */
typedef struct tp_clock_issue {
    const char *host;        /* into the run */
    int pid, rank;           /* rank -1: not a rank */
    const char *problem;     /* tp_clock_pair_problem (static) */
    const char *placed_by;   /* (static) "the clock pair of another file of its host",
                              * "matched collectives", "the reference's start",
                              * "its host's first event at the reference's first event" */
    char *line;              /* owned: "clock pair of HOST:PID is not usable (...): placed by
                              * ..." */
} tp_clock_issue;

/* Clock alignment across hosts ("clocks"). */
typedef struct tp_clocks_result {
    int present;
    double hosts, collectives_matched, collectives_with_ends;
    const char *status;      /* "single host", "aligned" or "partly aligned" (static) */
    const char *note;        /* with one host (static), or NULL */
    const char *method;      /* with several (static), or NULL */
    size_t nper_host;
    tp_host_clock_result *per_host; /* owned; every host (one with a single host too) */
    size_t nprocs;
    int64_t *proc_map_ns;    /* owned, per run->procs[i]: aligned ns = monotonic + map */
    unsigned char *proc_pair_ok; /* owned, per run->procs[i]: its start pair is usable */
    size_t nissues;
    tp_clock_issue *issues;  /* owned */
    /* the merge's sample of the collectives (comm.h, TP_COMM_KEEP): 0 when every collective
     * of every rank file was matched; else the longest period (sequence numbers) whose first
     * TP_COMM_WINDOW a communicator's collectives were matched in (tp_comm_period) */
    double sample_period;
    size_t sample_keep;      /* the least bound of the files that sampled (tp_comm_keep_of) */
    int sample_world;        /* the world size that bound follows; <= 0: configured, or none
                              * named (TP_COMM_KEEP) */
    int no_memory;           /* not computed, nor the stragglers (present 0): memory ran out;
                              * "clocks" says so (TP_CLOCKS_NO_MEMORY), the headline too */
} tp_clocks_result;

/* The note of "clocks" when memory ran out while they were aligned. */
#define TP_CLOCKS_NO_MEMORY                                                                  \
    "memory ran out while the collectives were matched across ranks: no clock alignment and " \
    "no straggler analysis (run the report where more memory is free, or bound the "          \
    "collectives kept with TRAINPROF_COMM_KEEP)"

/* One rank of the stragglers' table ("stragglers.ranks[]"). */
typedef struct tp_straggler_rank {
    int rank;
    const char *host;        /* into the run */
    int has_step;
    double step_ms;
    double collectives;      /* matched collectives inside its measured steps */
    double lag_ms_median, lag_ms_mean, lag_ms_p90, lag_ms_per_step; /* with collectives */
} tp_straggler_rank;

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
    double floor_ms;         /* straggler_share of the median step: the least threshold */
    const char *rule;        /* the criterion in words (static) */
    size_t nranks;
    tp_straggler_rank *ranks; /* owned, in the clocks' rank order */
    const char *note;        /* static, or NULL */
    int note_last;           /* no measured steps: the note follows "named" in the document */
    int has_lag_mad, has_step_mad;
    double lag_mad_ms, step_mad_ms;
    double sample_period;    /* the lags are over the clocks' sample: its period, else 0 */
} tp_stragglers_result;

/* A rank that ended early ("ended_early[]"; ended.h): killed by a signal, or its file has no
 * end record. The pointers lead into the loaded run (model.h). */
typedef struct tp_ended_rank {
    const struct tp_process *proc;
    int by_signal;           /* the end record names a signal; else no end record */
    int signal;
    char signal_name[24];    /* "SIGTERM", ...; "" without a signal */
    double ended_s;          /* from the process's start to its file's end */
    const struct tp_thread *thread;     /* of last_range */
    const struct tp_range *last_range;  /* the innermost open range, else the last ended; or NULL */
    const struct tp_comm_op *last_collective; /* the op it started last, or NULL */
} tp_ended_rank;

/* The ranks that ended early ("ended_early"), in the run's process order. */
typedef struct tp_ended_result {
    size_t n;
    tp_ended_rank *ranks;    /* owned */
} tp_ended_result;

/* The run as a whole ("run"; report.c): its span, events and drops over every file. */
typedef struct tp_run_summary {
    const char *dir;         /* the run directory (the loaded run's) */
    const char *run_id;      /* of the first file; "" without files (into the run) */
    int distinct_run_ids;    /* over 1: the files come from different runs */
    size_t processes;
    int ranks, helpers, node_samplers;
    uint64_t start_realtime_ns; /* earliest first event, ns since 1970; 0 without files */
    double duration_s;
    uint64_t events, events_dropped;
    double threads_over_limit;  /* threads that recorded nothing: over TRAINPROF_MAX_THREADS */
    double nvtx_strings_over_limit; /* NVTX string registrations past TRAINPROF_NVTX_STRINGS_KB */
    int has_write_errors;       /* some file counted records lost to write errors */
    double records_lost_to_write_errors;
    const char *first_write_error_errno, *first_write_error; /* of the first such file */
    /* where the processes come from: NULL for trainprof's rank files, "torch.profiler" when
     * some are torch.profiler (Kineto) traces (kineto.h; metadata trainprof.source) */
    const char *source;
    int source_files;           /* the processes read from such traces */
} tp_run_summary;

/* One capture source's capability ("capabilities.<name>"). */
typedef struct tp_capability {
    const char *name;        /* "nvtx", "cupti", "nccl", "nvml", "mpi" (static) */
    int found;               /* it reported itself and was not unavailable or off */
    const char *status;      /* what it reported (into the run), or why it is absent (static) */
} tp_capability;

#define TP_NCAPABILITIES 5

/* Megatron's timers across ranks ("timers"; report.c). */
typedef struct tp_run_timer_row {
    const char *name;        /* into the loaded run */
    int has_minmax;          /* some rank has the timer */
    double min_ms, max_ms;   /* over the ranks that have it */
} tp_run_timer_row;

typedef struct tp_run_timers_result {
    int present;
    int per_step;            /* ms per measured step (1) or over the run (0) */
    size_t nrows;
    tp_run_timer_row *rows;  /* owned, first use first */
    char *megatron_minmax;   /* owned: Megatron's min/max table text, or NULL */
    char *megatron_all;      /* owned: its per-rank table (more than one rank), or NULL */
} tp_run_timers_result;

/* A thread's range pops with no open range ("processes[].unmatched_pops_by_thread[]"). */
typedef struct tp_pops_thread {
    uint32_t tid;            /* OS thread id */
    const char *thread;      /* its name, or NULL (into the run) */
    double count, after_drops; /* pops; of them after the thread's ring dropped events */
    double first_s;          /* the first one, s from the process's start */
} tp_pops_thread;

/* One process of the run ("processes[]"; processes.c), in the run's order. */
typedef struct tp_process_result {
    char label[64];          /* tp_process_label: "rank 0", "launcher of ranks 0-7 (torchrun)" */
    const char *role;        /* "rank", "node-sampler" or "helper" (static) */
    int rank, world_size;
    int rank_implied;        /* the rank was implied: the launcher gave none */
    const char *host;        /* into the run */
    double pid, ppid;
    const char *cmdline;     /* or NULL (into the run) */
    const char *file;        /* the rank file's path (into the run) */
    double threads, events, events_dropped, duration_s;
    int complete;            /* the file has its end record */
    int has_write_errors;
    double records_lost, chunks_lost, bytes_lost;
    const char *first_errno, *first_error; /* "" when not written (into the run, or static) */
    int has_reopened;
    double rank_file_reopened; /* the program closed the file's descriptor: reopens */
    double unmatched_range_ends; /* ends for unknown range ids; 0: none */
    double unmatched_pops, unmatched_pops_after_drops;
    size_t npops;
    tp_pops_thread *pops;    /* owned: the threads with unmatched pops */
    size_t ndamage;
    char *const *damage;     /* what the loader found damaged in the file (into the run) */
} tp_process_result;

/* One figure of a finding's evidence ("findings[].evidence.<key>"), in the document's order. */
typedef enum tp_evidence_kind {
    TP_EV_NUMBER,            /* num */
    TP_EV_BOOL,              /* num: 0 or 1 */
    TP_EV_STRING,            /* str */
    TP_EV_INTS,              /* ints[0..n): a list of numbers (ranks) */
    TP_EV_STRINGS,           /* strs[0..n): a list of names */
    TP_EV_STRAGGLER          /* straggler: the named straggler's figures (an object) */
} tp_evidence_kind;

typedef struct tp_evidence {
    const char *key;         /* static */
    tp_evidence_kind kind;
    double num;
    const char *str;         /* static, or into the loaded run */
    size_t n;
    int *ints;               /* owned */
    const char **strs;       /* owned array of static names */
    const tp_straggler *straggler; /* into tp_run_results.stragglers.named */
} tp_evidence;

/* A finding ("findings[]"): a rule that names a problem, with the figures that show it. */
typedef struct tp_finding {
    const char *id;          /* the rule's id (static) */
    const char *severity;    /* "warning" or "critical" (static) */
    int has_rank;
    int rank;                /* the rank it names (the worst one) */
    char *message;           /* owned; names in it are made safe for a terminal (text.h) */
    const char *recommendation; /* static, or NULL */
    int recommendation_last; /* the document puts the recommendation after the evidence */
    char *megatron;          /* owned, or NULL: the advice in Megatron-LM's arguments, when
                              * the job is Megatron-LM (megatron.h) */
    size_t nev;
    tp_evidence *ev;         /* owned, in the document's order */
} tp_finding;

/* A rank whose value is past a rule's threshold but inside its band ("diagnosis.near[]"). */
typedef struct tp_near {
    const char *id;          /* the rule's id (static) */
    const char *unit;        /* "share" (of the step) or "ms per sample" (static) */
    int rank;
    double value, threshold, finding_from;
} tp_near;

/* The findings of the run, in the order the analyses appended them (communication, the
 * diagnosis rules, the ranks that ended early), and the values near a threshold. */
typedef struct tp_findings_result {
    size_t n;
    tp_finding *items;       /* owned */
    size_t nnear;
    tp_near *near;           /* owned */
    double diag_band;        /* the band of the thresholds (tp_report_opts.diag_band) */
} tp_findings_result;

/* The report's headline ("headline", the document's first key; findings.c): one to four
 * lines that lead the text, the HTML and the JSON. With findings, the leading one: critical
 * before warning, then the largest share of the step it explains (tp_finding_step_share),
 * then the first appended; its line names the rule, its figures and the first thing to try.
 * Without, "no bottleneck found" and the figures that show it (below). */
#define TP_HEADLINE_LINES 4
#define TP_HEADLINE_LINE_MAX 640

typedef struct tp_headline {
    size_t nlines;
    char lines[TP_HEADLINE_LINES][TP_HEADLINE_LINE_MAX]; /* terminal-safe (text.h) */
    int has_finding;
    size_t finding;          /* index in tp_run_results.findings.items */
    double step_share;       /* of the leading finding; 0: not a share of the step */
    /* the run's figures (each with its flag), with or without a finding */
    int has_step;
    double step_ms;          /* mean measured step, over the ranks with steps */
    int has_busy;
    double busy_share;       /* the least busy rank's GPU busy share (GPU breakdown) */
    int busy_rank;
    const char *busy_steps;  /* the steps that share is over when GPU activity was not
                              * recorded in every measured step ("30-34"; into the rank's
                              * capture result), else NULL */
    const char *busy_of;     /* what that share is of, in words: "the step", or for a rank
                              * without steps "the run", "the time GPU activity was
                              * recorded" or the span held (static) */
    int has_not_captured;    /* a rank with GPU records captured none of its measured steps
                              * (or, without steps, at no time of the run) */
    int not_captured_rank;   /* the first such rank */
    int not_captured_run;    /* that rank has no steps */
    int not_captured_bound;  /* that rank's load was bounded in GPU records (capture.h,
                              * TP_CAP_BOUND): no measured step's records were held whole */
    int has_exposed;
    double exposed_share;    /* the rank with the most exposed communication */
    int exposed_rank;
    int has_data;
    double data_share;       /* the rank with the largest data-loading share */
    int data_rank;
    int has_unjudged;        /* a rank's exposure was not computed, memory having run out
                              * (TP_EXPOSURE_NO_MEMORY): "no bottleneck found" says so */
    int unjudged_rank;       /* the first such rank */
    int unjudged_stragglers; /* nor were the clocks and stragglers (TP_CLOCKS_NO_MEMORY) */
    int has_short_section;   /* a rank's section ran out of memory (tp_rank_result.no_memory) */
    int short_section_rank;  /* the first such rank */
    int short_run;           /* the run-level analyses did (tp_run_results.no_memory) */
} tp_headline;

/* Everything the run-level analyses and the rules read. */
typedef struct tp_run_results {
    size_t nranks;
    tp_rank_result *ranks;   /* owned, in rank order (as the document's "ranks") */
    tp_throughput_result throughput;
    tp_stragglers_result stragglers;
    tp_ended_result ended;
    tp_run_timers_result timers;
    tp_run_summary run;
    tp_capability caps[TP_NCAPABILITIES];
    tp_findings_result findings;
    size_t nprocs;
    tp_process_result *procs;  /* owned, in the run's process order ("processes") */
    tp_clocks_result clocks;
    tp_comm_run_result comm;
    tp_headline headline;    /* built last, from the findings and the ranks */
    size_t summaries_read;   /* rank sections read from their summaries (summary.h) */
    size_t summaries_stale;  /* rank summaries out of date or damaged, their sections computed
                              * from the rank files again; the text says so */
    size_t slims_read;       /* processes the load took from their summaries, rank files not
                              * decoded (tp_run.from_summaries); in no rendering */
    int no_memory;           /* memory ran out while the run was loaded (tp_run.no_memory) or
                              * while the run-level analyses ran: TP_RUN_NO_MEMORY */
} tp_run_results;

/* The rank result of `rank`, or NULL. */
const tp_rank_result *tp_results_rank(const tp_run_results *r, int rank);

/* The rank's first NVML GPU, or NULL. */
const tp_nvml_gpu_result *tp_results_first_gpu(const tp_rank_result *rr);

void tp_rank_result_free(tp_rank_result *rr);
void tp_run_results_free(tp_run_results *r);

#endif /* TPROF_RESULTS_H */
