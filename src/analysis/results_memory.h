/*
 * results_memory.h — the memory section's typed results (part of results.h, which includes
 * it; kept apart to keep each header readable): the CUDA caching allocator's samples of a
 * PyTorch rank and its out-of-memory post-mortem, computed by memory.c.
 */
#ifndef TP_RESULTS_MEMORY_H
#define TP_RESULTS_MEMORY_H

#include <stddef.h>

/* ------------------------------------------------------------------ memory
 * The CUDA caching allocator's samples of a PyTorch rank (trainprof.torch's cuda.memory_*
 * counters, one sample per phase boundary) and its out-of-memory post-mortem (memory.oom.*
 * metadata): memory.c, docs/report-json.md "memory". */

/* The phases a sample interval is given to, in the document's order (memory.c). */
#define TP_MEM_NPHASES 5 /* data, forward, backward, optimizer, other */

/* How well a peak is known. The allocator's max_memory_allocated is its peak since the job's
 * last reset: a reading that changed over an interval was set inside it (exact); one that
 * did not only bounds the interval's peak from above; without the reading, the sampled
 * current values bound it from below. */
typedef enum tp_mem_bound {
    TP_MEM_EXACT = 0,
    TP_MEM_AT_MOST = 1,
    TP_MEM_AT_LEAST = 2
} tp_mem_bound;

typedef struct tp_mem_peak {
    int has;
    double bytes;
    tp_mem_bound bound;
} tp_mem_peak;

/* One step of the memory timeline ("memory.steps[]"). */
typedef struct tp_mem_step_result {
    double step;                 /* the application's step number */
    int warmup;
    size_t samples;              /* samples taken in it */
    int has_start;               /* its first sample holds allocated: */
    double start_allocated_bytes; /* allocated at the step's first sample */
    double start_reserved_bytes;
    tp_mem_peak allocated, reserved;
    const char *peak_phase;      /* the phase whose interval set an exact allocated peak, or
                                  * NULL (static) */
    const char *peak_module;     /* with peak_phase: the model's innermost module (a name
                                  * under the model, "decoder.layers.3") whose forward held
                                  * that whole interval, or NULL (into the run) */
    const char *top_sample_module; /* the module the step's largest allocated sample was
                                  * taken in (module detail: steps of the GPU capture plan),
                                  * or NULL (into the run); top_sample_bytes is that sample */
    double top_sample_bytes;
    tp_mem_peak phase_allocated[TP_MEM_NPHASES];
    int has_device_peak;         /* CUPTI's device allocations, complete over the step: */
    double device_peak_bytes;    /* the largest sum live in it */
} tp_mem_step_result;

/* One of the largest live allocations at the OOM ("memory.oom.top[]"). */
typedef struct tp_mem_alloc {
    double bytes, stream;
    char *frames;                /* owned; "" when no history was recorded */
} tp_mem_alloc;

#define TP_MEM_TOP 10

/* The out-of-memory post-mortem ("memory.oom"; present when memory.oom.* was written). */
typedef struct tp_mem_oom {
    int present;
    const char *source;          /* "torch" or "cuda" (into the run), or NULL */
    int has_request, has_free, has_total, has_allocated, has_reserved, has_largest_free;
    double request_bytes, free_bytes, total_bytes, allocated_bytes, reserved_bytes;
    double largest_free_block_bytes;
    int has_device, has_step;
    double device, step;
    const char *phase;           /* into the run, or NULL */
    const char *module;          /* the model's innermost module whose forward was running
                                  * (memory.oom.module), or NULL (into the run) */
    const char *snapshot;        /* file name beside the rank file (into the run), or NULL */
    int snapshot_unusable;       /* memory.oom.snapshot was no plain file name: not shown */
    int has_count;
    double count;                /* OOMs in the process; the figures describe the first */
    int has_time;
    double at_s;                 /* the cuda.oom mark, s from the process's start */
    size_t ntop;
    tp_mem_alloc top[TP_MEM_TOP];
    int top_unreadable;          /* memory.oom.top was written but is no JSON array */
    int history;                 /* allocation history was recorded (memory.history_entries):
                                  * an entry without frames was allocated outside Python */
    /* what grew before it: allocated at the OOM against allocated at the start of the step
     * before the OOM's step (growth_step: that step), from the samples */
    int has_growth;
    double growth_step, growth_from_bytes, growth_bytes;
    /* a failed device allocation (source "cuda") after which whole steps still ran: PyTorch's
     * caching allocator frees its cache and retries, so the program carried on; no
     * post-mortem, no out_of_memory finding */
    int recovered;
    size_t steps_after;
} tp_mem_oom;

/* The rank's memory ("memory"; memory.h). */
typedef struct tp_memory_result {
    int present;                 /* samples or an OOM post-mortem */
    int has_device;
    unsigned device;             /* torch.cuda.device: the CUDA ordinal sampled */
    int has_capacity;
    double capacity_bytes;
    const char *capacity_source; /* "cuda" (cuda.<i>.memory_total_bytes) or "nvml" (static) */
    size_t samples;
    tp_mem_peak peak_allocated, peak_reserved; /* over the whole run */
    int has_shares;              /* capacity known and both peaks exact or at least: */
    double peak_allocated_share, peak_reserved_share, headroom_bytes;
    /* at the sample with the most allocated (the sampled peak) */
    int has_fragmentation;
    double fragmentation;        /* 1 - allocated / reserved there */
    double frag_allocated_bytes, frag_reserved_bytes, frag_at_s;
    int has_inactive_split;
    double inactive_split_bytes;
    int has_alloc_retries, has_ooms;
    double alloc_retries, ooms;  /* cumulative counts at the last sample */
    size_t nsteps;
    tp_mem_step_result *steps;   /* owned, every step with a sample, in order */
    /* the leak rule's series: allocated at the start of each measured step with a sample */
    size_t leak_steps, leak_rises;
    int leak_monotonic;          /* it never came back down */
    double leak_first_bytes, leak_last_bytes, leak_first_step, leak_last_step;
    /* CUPTI's device allocations (cudaMalloc/cudaFree, any program): the largest sum live */
    int has_device_peak;
    double device_peak_bytes;
    tp_mem_oom oom;
} tp_memory_result;

#endif /* TP_RESULTS_MEMORY_H */
