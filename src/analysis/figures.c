/*
 * figures.c — impossible figures flagged instead of reported (figures.h has the rule).
 */
#define _GNU_SOURCE
#include "analysis/figures.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Rounding slack: figures computed as sums of parts may pass a bound by an ulp or two */
#define SHARE_EPS 1e-9

int tp_figure_in_bounds(double x, double lo, double hi) {
    return isfinite(x) && x >= lo - SHARE_EPS * fabs(lo) && x <= hi + SHARE_EPS * fabs(hi);
}

/* NVML's utilization.gpu: "percent of time over the past sample period during which one or
 * more kernels was executing" (nvmlUtilization_t), so 0-100 */
const char tp_flag_reason_util[] = "outside 0-100 %: NVML's utilisation is the share of time a "
                                   "kernel ran; the samples are wrong";
const char tp_flag_reason_mem_share[] = "above the GPU's memory: the memory used or the total "
                                        "in the rank file does not belong to this GPU";
const char tp_flag_reason_busy[] = "the GPU was busy longer than the steps lasted: its records "
                                   "contradict the steps' clock";
const char tp_flag_reason_mem_peak[] = "above the device's memory: CUPTI's device allocation "
                                       "records sum past what the device holds, so a release or "
                                       "a failed allocation was recorded as it was not";

/* Checks *x (with its has_* flag) against [lo, hi]: past it, the flag is cleared and *f set. */
static void check(int *has, double *x, double lo, double hi, tp_flagged_figure *f) {
    memset(f, 0, sizeof *f);
    if (!*has || tp_figure_in_bounds(*x, lo, hi)) return;
    *f = (tp_flagged_figure){1, *x, *x < lo ? lo : hi};
    *has = 0;
    *x = 0;
}

double tp_figures_cpu_limit(const tp_process *p) {
    const char *c = tp_meta(p, "process.host_cpus");
    double cpus = c ? atof(c) : 0;
    return cpus >= 1 ? 100 * cpus : INFINITY;
}

void tp_figures_check_process(tp_process_sampler_result *pr, const tp_process *p) {
    /* CPU time cannot exceed wall time times the CPUs the host has online (proc(5): the
     * process's utime + stime; sysconf(_SC_NPROCESSORS_ONLN), written by the sampler) */
    const char *c = tp_meta(p, "process.host_cpus");
    double cpus = c ? atof(c) : 0;
    double hi = tp_figures_cpu_limit(p);
    if (cpus >= 1)
        snprintf(pr->cpu_flag_reason, sizeof pr->cpu_flag_reason,
                 "above 100 %% per core: the host has %.0f CPUs online, so the process can use "
                 "at most %.0f %%; the sample's CPU time or clock is wrong", cpus, 100 * cpus);
    else
        snprintf(pr->cpu_flag_reason, sizeof pr->cpu_flag_reason,
                 "negative: CPU time cannot decrease; the sample's CPU time or clock is wrong");
    check(&pr->has_cpu_mean, &pr->cpu_percent_mean, 0, hi, &pr->cpu_mean_flagged);
    check(&pr->has_cpu_max, &pr->cpu_percent_max, 0, hi, &pr->cpu_max_flagged);
}

void tp_figures_check_nvml(tp_nvml_result *nv) {
    for (size_t i = 0; i < nv->ngpus; i++) {
        tp_nvml_gpu_result *g = &nv->gpus[i];
        check(&g->has_util, &g->util_percent_mean, 0, 100, &g->util_flagged);
        check(&g->has_mem_used_share, &g->mem_used_peak_share, 0, 1, &g->mem_used_share_flagged);
    }
}

void tp_figures_check_gpu(tp_gpu_result *gr) {
    for (size_t i = 0; i < gr->ndevices; i++) {
        tp_gpu_device_result *d = &gr->devices[i];
        check(&d->has_busy_share, &d->busy_share, 0, 1, &d->busy_share_flagged);
        memset(&d->memory_peak_flagged, 0, sizeof d->memory_peak_flagged);
        if (d->has_capacity) {
            check(&d->has_memory_peak, &d->memory_peak_share, 0, 1, &d->memory_peak_flagged);
            if (d->memory_peak_flagged.flagged) d->memory_peak_bytes = 0;
        }
    }
}

void tp_figure_invalid_json(cJSON **inv, cJSON *sec, const char *key, const tp_flagged_figure *f,
                            const char *reason) {
    if (!f->flagged) return;
    if (!*inv) *inv = cJSON_AddObjectToObject(sec, "invalid");
    cJSON *e = cJSON_AddObjectToObject(*inv, key);
    cJSON_AddNumberToObject(e, "value", f->value);
    cJSON_AddNumberToObject(e, "limit", f->limit);
    cJSON_AddStringToObject(e, "reason", reason);
}

static void line(FILE *f, const char *path, const char *key, const tp_flagged_figure *x,
                 const char *reason, const char *Y, const char *N) {
    if (!x->flagged) return;
    fprintf(f, "%s  flagged, not a result: %s.%s = %.4g (limit %.4g): %s%s\n", Y, path, key,
            x->value, x->limit, reason, N);
}

void tp_figures_text(FILE *f, const tp_rank_result *rr, const char *Y, const char *N) {
    char path[48];
    for (size_t i = 0; i < rr->gpu.ndevices; i++) {
        snprintf(path, sizeof path, "gpu.devices[%zu]", i);
        line(f, path, "busy_share", &rr->gpu.devices[i].busy_share_flagged, tp_flag_reason_busy,
             Y, N);
        line(f, path, "memory_peak_share", &rr->gpu.devices[i].memory_peak_flagged,
             tp_flag_reason_mem_peak, Y, N);
    }
    line(f, "process", "cpu_percent_mean", &rr->process.cpu_mean_flagged,
         rr->process.cpu_flag_reason, Y, N);
    line(f, "process", "cpu_percent_max", &rr->process.cpu_max_flagged,
         rr->process.cpu_flag_reason, Y, N);
    for (size_t i = 0; i < rr->nvml.ngpus; i++) {
        snprintf(path, sizeof path, "nvml.gpus[%zu]", i);
        line(f, path, "util_percent_mean", &rr->nvml.gpus[i].util_flagged, tp_flag_reason_util,
             Y, N);
        line(f, path, "mem_used_peak_share", &rr->nvml.gpus[i].mem_used_share_flagged,
             tp_flag_reason_mem_share, Y, N);
    }
}
