/*
 * results.c — helpers of the typed analysis results (results.h).
 */
#include "analysis/results.h"
#include "analysis/memory.h"

#include <stdlib.h>
#include <string.h>

#include "analysis/clocks.h"
#include "analysis/comm.h"
#include "analysis/findings.h"
#include "analysis/stats.h"

tp_stat5 tp_stat5_of(double *v, size_t n) {
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += v[i];
    if (n > 1) qsort(v, n, sizeof *v, tp_cmp_double);
    return (tp_stat5){n ? sum / (double)n : 0, tp_pct_double(v, n, 0.5), tp_pct_double(v, n, 0.9),
                      n ? v[0] : 0, n ? v[n - 1] : 0};
}

const tp_rank_result *tp_results_rank(const tp_run_results *r, int rank) {
    for (size_t i = 0; i < r->nranks; i++)
        if (r->ranks[i].rank == rank) return &r->ranks[i];
    return NULL;
}

const tp_nvml_gpu_result *tp_results_first_gpu(const tp_rank_result *rr) {
    return rr && rr->nvml.ngpus ? &rr->nvml.gpus[0] : NULL;
}

void tp_rank_result_free(tp_rank_result *rr) {
    free(rr->gpu.pauses);
    free(rr->gpu.pause_reasons);
    free(rr->gpu.overhead_kinds);
    free(rr->gpu.kernels);
    free(rr->breakdown.ranges);
    free(rr->breakdown.warmup);
    free(rr->phases.ranges);
    free(rr->phases.warmup);
    rr->phases.ranges = NULL;
    rr->phases.warmup = NULL;
    rr->phases.nranges = rr->phases.nwarmup = 0;
    rr->gpu.pauses = NULL;
    rr->gpu.pause_reasons = NULL;
    rr->gpu.overhead_kinds = NULL;
    rr->gpu.kernels = NULL;
    rr->breakdown.ranges = NULL;
    rr->breakdown.warmup = NULL;
    rr->gpu.npauses = rr->gpu.noverhead_kinds = rr->gpu.nkernels = 0;
    rr->breakdown.nranges = rr->breakdown.nwarmup = 0;
    free(rr->gpu.devices);
    free(rr->nvml.gpus);
    free(rr->comm.torch_backends);
    free(rr->comm.comms);
    free(rr->comm.rows);
    free(rr->timers.rows);
    free(rr->steps.warmup_ms);
    free(rr->steps.missing);
    free(rr->ranges.top_inclusive);
    free(rr->ranges.top_exclusive);
    free(rr->ranges.unclosed);
    rr->steps.warmup_ms = NULL;
    rr->steps.missing = NULL;
    rr->ranges.top_inclusive = rr->ranges.top_exclusive = rr->ranges.unclosed = NULL;
    rr->ranges.ninclusive = rr->ranges.nexclusive = rr->ranges.nunclosed = 0;
    rr->steps.nmissing = 0;
    rr->comm.torch_backends = NULL;
    rr->comm.comms = NULL;
    rr->comm.rows = NULL;
    rr->timers.rows = NULL;
    rr->comm.ntorch_backends = rr->comm.ncomms = rr->comm.nrows = rr->timers.nrows = 0;
    rr->gpu.devices = NULL;
    rr->nvml.gpus = NULL;
    rr->gpu.ndevices = rr->nvml.ngpus = 0;
    tp_memory_result_free(&rr->memory);
}

void tp_run_results_free(tp_run_results *r) {
    for (size_t i = 0; i < r->nranks; i++) tp_rank_result_free(&r->ranks[i]);
    free(r->ranks);
    free(r->stragglers.named);
    free(r->stragglers.ranks);
    r->stragglers.ranks = NULL;
    r->stragglers.nranks = 0;
    free(r->ended.ranks);
    free(r->timers.rows);
    free(r->timers.megatron_minmax);
    free(r->timers.megatron_all);
    tp_findings_free(&r->findings);
    tp_clocks_result_free(&r->clocks);
    tp_comm_run_result_free(&r->comm);
    for (size_t i = 0; i < r->nprocs; i++) free(r->procs[i].pops);
    free(r->procs);
    r->procs = NULL;
    r->nprocs = 0;
    memset(&r->timers, 0, sizeof r->timers);
    r->ended.ranks = NULL;
    r->ended.n = 0;
    r->ranks = NULL;
    r->stragglers.named = NULL;
    r->nranks = r->stragglers.nnamed = 0;
}
