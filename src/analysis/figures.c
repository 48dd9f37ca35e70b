/*
 * figures.c — impossible figures flagged instead of reported (figures.h has the rule).
 */
#define _GNU_SOURCE
#include "analysis/figures.h"
#include "analysis/jsonget.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void tp_figure_flag(cJSON *sec, const char *key, double limit, const char *reason) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(sec, key);
    if (!cJSON_IsNumber(v)) return;
    cJSON *inv = cJSON_GetObjectItemCaseSensitive(sec, "invalid");
    if (!inv) inv = cJSON_AddObjectToObject(sec, "invalid");
    cJSON_DeleteItemFromObjectCaseSensitive(inv, key);
    cJSON *e = cJSON_AddObjectToObject(inv, key);
    cJSON_AddNumberToObject(e, "value", v->valuedouble);
    cJSON_AddNumberToObject(e, "limit", limit);
    cJSON_AddStringToObject(e, "reason", reason);
    cJSON_DeleteItemFromObjectCaseSensitive(sec, key);
}

/* Rounding slack: figures computed as sums of parts may pass a bound by an ulp or two */
#define SHARE_EPS 1e-9

int tp_figure_in_bounds(double x, double lo, double hi) {
    return isfinite(x) && x >= lo - SHARE_EPS * fabs(lo) && x <= hi + SHARE_EPS * fabs(hi);
}

/* Flags sec[key] when it is not finite or lies outside [lo, hi] (by more than rounding). */
static void bound(cJSON *sec, const char *key, double lo, double hi, const char *reason) {
    const cJSON *v = tp_jobj(sec, key);
    if (!cJSON_IsNumber(v)) return;
    double x = v->valuedouble;
    if (tp_figure_in_bounds(x, lo, hi)) return;
    tp_figure_flag(sec, key, x < lo ? lo : hi, reason);
}

void tp_figures_check_results(tp_rank_result *rr) {
    for (size_t i = 0; i < rr->nvml.ngpus; i++) {
        tp_nvml_gpu_result *g = &rr->nvml.gpus[i];
        if (g->has_mem_used_share && !tp_figure_in_bounds(g->mem_used_peak_share, 0, 1)) {
            g->has_mem_used_share = 0;
            g->mem_used_peak_share = 0;
        }
        if (g->has_util && !tp_figure_in_bounds(g->util_percent_mean, 0, 100)) {
            g->has_util = 0;
            g->util_percent_mean = 0;
        }
    }
    for (size_t i = 0; i < rr->gpu.ndevices; i++) {
        tp_gpu_device_result *d = &rr->gpu.devices[i];
        if (d->has_busy_share && !tp_figure_in_bounds(d->busy_share, 0, 1)) {
            d->has_busy_share = 0;
            d->busy_share = 0;
        }
    }
}

double tp_figures_cpu_limit(const tp_process *p) {
    const char *c = tp_meta(p, "process.host_cpus");
    double cpus = c ? atof(c) : 0;
    return cpus >= 1 ? 100 * cpus : INFINITY;
}

void tp_figures_check_rank(cJSON *rank, const tp_process *p) {
    /* CPU time cannot exceed wall time times the CPUs the host has online (proc(5): the
     * process's utime + stime; sysconf(_SC_NPROCESSORS_ONLN), written by the sampler) */
    cJSON *pr = cJSON_GetObjectItemCaseSensitive(rank, "process");
    if (pr) {
        const char *c = tp_meta(p, "process.host_cpus");
        double cpus = c ? atof(c) : 0;
        double hi = tp_figures_cpu_limit(p);
        char why[200];
        if (cpus >= 1)
            snprintf(why, sizeof why, "above 100 %% per core: the host has %.0f CPUs online, so "
                                      "the process can use at most %.0f %%; the sample's CPU time "
                                      "or clock is wrong", cpus, 100 * cpus);
        else
            snprintf(why, sizeof why, "negative: CPU time cannot decrease; the sample's CPU time or "
                                      "clock is wrong");
        bound(pr, "cpu_percent_mean", 0, hi, why);
        bound(pr, "cpu_percent_max", 0, hi, why);
    }
    cJSON *g;
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(rank, "nvml"), "gpus")) {
        /* NVML's utilization.gpu: "percent of time over the past sample period during which
         * one or more kernels was executing" (nvmlUtilization_t), so 0-100 */
        bound(g, "util_percent_mean", 0, 100,
              "outside 0-100 %: NVML's utilisation is the share of time a kernel ran; the "
              "samples are wrong");
        bound(g, "mem_used_peak_share", 0, 1,
              "above the GPU's memory: the memory used or the total in the rank file does not "
              "belong to this GPU");
    }
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(rank, "gpu"), "devices"))
        bound(g, "busy_share", 0, 1,
              "the GPU was busy longer than the steps lasted: its records contradict the "
              "steps' clock");
}

/* Depth-first over the document; `path` holds the JSON path of o ("nvml.gpus[0]"), plen
 * its length. */
static void walk(FILE *f, const cJSON *o, char *path, size_t plen, size_t cap, const char *Y,
                 const char *N) {
    const cJSON *c;
    int idx = 0;
    cJSON_ArrayForEach(c, o) {
        int i = idx++;
        if (!cJSON_IsObject(c) && !cJSON_IsArray(c)) continue;
        if (c->string && !strcmp(c->string, "invalid") && cJSON_IsObject(c)) {
            const cJSON *e;
            cJSON_ArrayForEach(e, c)
                fprintf(f, "%s  flagged, not a result: %s%s%s = %.4g (limit %.4g): %s%s\n", Y, path,
                        plen ? "." : "", e->string, tp_jnum(e, "value"), tp_jnum(e, "limit"),
                        tp_jstr(e, "reason"), N);
            continue;
        }
        int k = c->string ? snprintf(path + plen, cap - plen, "%s%s", plen ? "." : "", c->string)
                          : snprintf(path + plen, cap - plen, "[%d]", i);
        size_t n = k > 0 && (size_t)k < cap - plen ? plen + (size_t)k : plen;
        path[n] = 0;
        walk(f, c, path, n, cap, Y, N);
        path[plen] = 0;
    }
}

void tp_figures_text(FILE *f, const cJSON *root, const char *Y, const char *N) {
    char path[256] = "";
    walk(f, root, path, 0, sizeof path, Y, N);
}
