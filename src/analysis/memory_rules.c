/*
 * memory_rules.c — the diagnosis rules over GPU memory (memory.h's results): the peak
 * against capacity, fragmentation, a leak, allocation retries, and the out-of-memory
 * post-mortem. diagnose.c's table holds their ids, tests and recommendations; each rule
 * appends at most one finding, for the worst rank, with the figures that show it.
 *
 * Thresholds (tp_report_opts, docs/report-json.md "diagnosis.thresholds"):
 * - memory_share (0.90): the 90 % of capacity engineers keep peak memory under, a
 *   configurable convention (docs/design.md §5.2), not a vendor limit;
 * - fragmentation_share (0.30) with fragmentation_min_bytes (1 GiB): reserved but
 *   unallocated memory at the sampled peak. PyTorch names this waste ("Optimizing memory
 *   usage with PYTORCH_CUDA_ALLOC_CONF", CUDA semantics) without a number; the share is a
 *   configurable convention, and the floor keeps a small job's few cached MiB out;
 * - the leak rule, precisely: over the measured steps that have a sample, the allocated
 *   bytes at each step's first sample; a leak when there are at least leak_min_steps (5)
 *   of them, the series never comes back down (no value below the one before it), it rose
 *   in at least half of the step-to-step transitions, and it grew by at least
 *   leak_min_bytes (1 MiB) from the first to the last. A steady job's allocated returns to
 *   the same bytes at the same point of every step (a flat sawtooth), so it never fires;
 * - alloc_retries: any cudaMalloc retry (PyTorch's num_alloc_retries: the allocator freed
 *   its cache and retried, which synchronises the device; CUDA semantics, "Memory
 *   management").
 */
#define _GNU_SOURCE
#include "analysis/memory.h"

#include <stdio.h>
#include <string.h>

#include "analysis/findings.h"
#include "analysis/report.h"

#define GIB 1073741824.0
#define MAXR 4096 /* ranks listed in a finding */

/* The largest of the rank's sampled peaks that is a result against capacity: exact or a
 * lower bound (an upper bound cannot show a peak over a threshold). */
static int peak_share(const tp_memory_result *m, double *share, double *bytes) {
    if (!m->has_shares) return 0;
    const tp_mem_peak *pk = &m->peak_reserved;
    if (pk->bound == TP_MEM_AT_MOST) return 0;
    *share = m->peak_reserved_share;
    *bytes = pk->bytes;
    return 1;
}

/* memory_peak: NVML's used/total of the rank's GPUs, CUPTI's device peak against the NVML
 * total, and the caching allocator's reserved peak against the capacity; the largest. */
static int rule_peak(const tp_run_results *res, tp_findings_result *fs, const tp_report_opts *o,
                     const char *id, const char *rec) {
    const tp_rank_result *worst = NULL;
    double wv = 0, wpeak = 0, wtot = 0;
    const char *wsrc = "";
    int rk[MAXR];
    size_t n = 0;
    for (size_t i = 0; i < res->nranks; i++) {
        const tp_rank_result *r = &res->ranks[i];
        double best = 0, peak = 0, tot = 0;
        const char *src = "";
        for (size_t k = 0; k < r->nvml.ngpus; k++) {
            const tp_nvml_gpu_result *g = &r->nvml.gpus[k];
            if (g->has_mem_used_share && g->mem_used_peak_share > best) {
                best = g->mem_used_peak_share;
                peak = g->mem_used_peak_bytes;
                tot = g->mem_total_bytes;
                src = "nvml";
            }
        }
        const tp_nvml_gpu_result *g0 = tp_results_first_gpu(r);
        double total = g0 && g0->has_mem_total ? g0->mem_total_bytes : 0;
        for (size_t k = 0; k < r->gpu.ndevices; k++) {
            if (!r->gpu.devices[k].has_memory_peak) continue; /* not captured */
            double pk = r->gpu.devices[k].memory_peak_bytes;
            double s = total > 0 ? pk / total : 0;
            if (s > best) {
                best = s;
                peak = pk;
                tot = total;
                src = "cupti";
            }
        }
        double s, b;
        if (peak_share(&r->memory, &s, &b) && s > best) {
            best = s;
            peak = b;
            tot = r->memory.capacity_bytes;
            src = "allocator";
        }
        if (best <= o->memory_share) continue;
        if (n < sizeof rk / sizeof *rk) rk[n++] = r->rank;
        if (best > wv) {
            wv = best;
            worst = r;
            wpeak = peak;
            wtot = tot;
            wsrc = src;
        }
    }
    if (!worst) return 0;
    char msg[400];
    snprintf(msg, sizeof msg,
             "GPU memory peak on rank %d is %.1f %% of capacity (%.2f of %.2f "
             "GiB): little headroom; fragmentation or a longer sequence can "
             "run out of memory",
             worst->rank, 100 * wv, wpeak / GIB, wtot / GIB);
    tp_finding *ev = tp_finding_add(fs, id, "warning", worst->rank, msg, rec);
    tp_ev_number(ev, "peak_share", wv);
    tp_ev_number(ev, "peak_bytes", wpeak);
    tp_ev_number(ev, "capacity_bytes", wtot);
    tp_ev_string(ev, "source", wsrc);
    tp_ev_number(ev, "threshold", o->memory_share);
    tp_ev_ints(ev, "ranks", rk, n);
    return 1;
}

static int rule_fragmentation(const tp_run_results *res, tp_findings_result *fs,
                              const tp_report_opts *o, const char *id, const char *rec) {
    const tp_rank_result *worst = NULL;
    int rk[MAXR];
    size_t n = 0;
    for (size_t i = 0; i < res->nranks; i++) {
        const tp_memory_result *m = &res->ranks[i].memory;
        if (!m->has_fragmentation || m->fragmentation <= o->fragmentation_share ||
            m->frag_reserved_bytes - m->frag_allocated_bytes < o->fragmentation_min_bytes)
            continue;
        if (n < sizeof rk / sizeof *rk) rk[n++] = res->ranks[i].rank;
        if (!worst || m->fragmentation > worst->memory.fragmentation) worst = &res->ranks[i];
    }
    if (!worst) return 0;
    const tp_memory_result *m = &worst->memory;
    char msg[400];
    snprintf(msg, sizeof msg,
             "GPU memory fragmentation on rank %d: at the sampled peak %.1f %% "
             "of the reserved memory is not allocated (%.2f of %.2f GiB "
             "reserved in use)",
             worst->rank, 100 * m->fragmentation, m->frag_allocated_bytes / GIB,
             m->frag_reserved_bytes / GIB);
    tp_finding *ev = tp_finding_add(fs, id, "warning", worst->rank, msg, rec);
    tp_ev_number(ev, "fragmentation", m->fragmentation);
    tp_ev_number(ev, "allocated_bytes", m->frag_allocated_bytes);
    tp_ev_number(ev, "reserved_bytes", m->frag_reserved_bytes);
    if (m->has_inactive_split) tp_ev_number(ev, "inactive_split_bytes", m->inactive_split_bytes);
    tp_ev_number(ev, "threshold", o->fragmentation_share);
    tp_ev_number(ev, "min_bytes", o->fragmentation_min_bytes);
    tp_ev_ints(ev, "ranks", rk, n);
    return 1;
}

/* The leak rule of the file's comment, on one rank's series. */
static int leaks(const tp_memory_result *m, const tp_report_opts *o) {
    if (m->leak_steps < (size_t)o->leak_min_steps || !m->leak_monotonic) return 0;
    size_t transitions = m->leak_steps - 1;
    return 2 * m->leak_rises >= transitions &&
           m->leak_last_bytes - m->leak_first_bytes >= o->leak_min_bytes;
}

static int rule_leak(const tp_run_results *res, tp_findings_result *fs, const tp_report_opts *o,
                     const char *id, const char *rec) {
    const tp_rank_result *worst = NULL;
    int rk[MAXR];
    size_t n = 0;
    for (size_t i = 0; i < res->nranks; i++) {
        const tp_memory_result *m = &res->ranks[i].memory;
        if (!leaks(m, o)) continue;
        if (n < sizeof rk / sizeof *rk) rk[n++] = res->ranks[i].rank;
        double g = m->leak_last_bytes - m->leak_first_bytes;
        if (!worst || g > worst->memory.leak_last_bytes - worst->memory.leak_first_bytes)
            worst = &res->ranks[i];
    }
    if (!worst) return 0;
    const tp_memory_result *m = &worst->memory;
    double g = m->leak_last_bytes - m->leak_first_bytes;
    char msg[512];
    snprintf(msg, sizeof msg,
             "GPU memory grows from step to step on rank %d and never comes "
             "back down: allocated at step start %.1f MiB at step %.0f, %.1f "
             "MiB at step %.0f (+%.1f MiB over %zu steps, %.2f MiB per step): "
             "something keeps tensors alive across steps, or what the step keeps grows (a "
             "batch or sequence that grows each step)",
             worst->rank, m->leak_first_bytes / 1048576.0, m->leak_first_step,
             m->leak_last_bytes / 1048576.0, m->leak_last_step, g / 1048576.0, m->leak_steps,
             g / 1048576.0 / (double)(m->leak_steps - 1));
    tp_finding *ev = tp_finding_add(fs, id, "warning", worst->rank, msg, rec);
    tp_ev_number(ev, "growth_bytes", g);
    tp_ev_number(ev, "first_bytes", m->leak_first_bytes);
    tp_ev_number(ev, "last_bytes", m->leak_last_bytes);
    tp_ev_number(ev, "first_step", m->leak_first_step);
    tp_ev_number(ev, "last_step", m->leak_last_step);
    tp_ev_number(ev, "steps", (double)m->leak_steps);
    tp_ev_number(ev, "rises", (double)m->leak_rises);
    tp_ev_number(ev, "min_steps", o->leak_min_steps);
    tp_ev_number(ev, "min_bytes", o->leak_min_bytes);
    tp_ev_ints(ev, "ranks", rk, n);
    return 1;
}

static int rule_retries(const tp_run_results *res, tp_findings_result *fs, const tp_report_opts *o,
                        const char *id, const char *rec) {
    (void)o;
    const tp_rank_result *worst = NULL;
    int rk[MAXR];
    size_t n = 0;
    for (size_t i = 0; i < res->nranks; i++) {
        const tp_memory_result *m = &res->ranks[i].memory;
        if (!m->has_alloc_retries || m->alloc_retries <= 0) continue;
        if (n < sizeof rk / sizeof *rk) rk[n++] = res->ranks[i].rank;
        if (!worst || m->alloc_retries > worst->memory.alloc_retries) worst = &res->ranks[i];
    }
    if (!worst) return 0;
    char msg[400];
    snprintf(msg, sizeof msg,
             "the CUDA caching allocator on rank %d retried cudaMalloc %.0f "
             "times after freeing its cache: each retry synchronises the "
             "device and slows the step; memory is close to full",
             worst->rank, worst->memory.alloc_retries);
    tp_finding *ev = tp_finding_add(fs, id, "warning", worst->rank, msg, rec);
    tp_ev_number(ev, "alloc_retries", worst->memory.alloc_retries);
    tp_ev_ints(ev, "ranks", rk, n);
    return 1;
}

static int rule_oom(const tp_run_results *res, tp_findings_result *fs, const tp_report_opts *o,
                    const char *id, const char *rec) {
    (void)o;
    const tp_rank_result *first = NULL;
    int rk[MAXR];
    size_t n = 0;
    for (size_t i = 0; i < res->nranks; i++) {
        /* a failed allocation the program carried on from is no out-of-memory end */
        if (!res->ranks[i].memory.oom.present || res->ranks[i].memory.oom.recovered) continue;
        if (n < sizeof rk / sizeof *rk) rk[n++] = res->ranks[i].rank;
        const tp_mem_oom *a = &res->ranks[i].memory.oom;
        if (!first ||
            (a->has_time && (!first->memory.oom.has_time || a->at_s < first->memory.oom.at_s)))
            first = &res->ranks[i];
    }
    if (!first) return 0;
    const tp_mem_oom *x = &first->memory.oom;
    char line[400], msg[600];
    tp_memory_oom_line(x, line, sizeof line);
    snprintf(msg, sizeof msg, "CUDA out of memory on rank %d%s%s%s", first->rank,
             *line ? " at " : "", line, x->snapshot ? "; memory snapshot written" : "");
    tp_finding *ev = tp_finding_add(fs, id, "critical", first->rank, msg, rec);
    if (x->source) tp_ev_string(ev, "source", x->source);
    if (x->has_step) tp_ev_number(ev, "step", x->step);
    if (x->phase) tp_ev_string(ev, "phase", x->phase);
    if (x->has_request) tp_ev_number(ev, "request_bytes", x->request_bytes);
    if (x->has_free) tp_ev_number(ev, "free_bytes", x->free_bytes);
    if (x->has_total) tp_ev_number(ev, "total_bytes", x->total_bytes);
    if (x->has_allocated) tp_ev_number(ev, "allocated_bytes", x->allocated_bytes);
    if (x->has_reserved) tp_ev_number(ev, "reserved_bytes", x->reserved_bytes);
    if (x->has_largest_free)
        tp_ev_number(ev, "largest_free_block_bytes", x->largest_free_block_bytes);
    if (x->snapshot) tp_ev_string(ev, "snapshot", x->snapshot);
    tp_ev_ints(ev, "ranks", rk, n);
    return 1;
}

int tp_memory_rule(const char *id, const tp_run_results *res, tp_findings_result *fs,
                   const tp_report_opts *o, const char *rec) {
    static const struct {
        const char *id;
        int (*eval)(const tp_run_results *, tp_findings_result *, const tp_report_opts *,
                    const char *, const char *);
    } t[] = {{"out_of_memory", rule_oom},
             {"memory_peak", rule_peak},
             {"memory_fragmentation", rule_fragmentation},
             {"memory_leak", rule_leak},
             {"memory_alloc_retries", rule_retries}};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        if (!strcmp(t[i].id, id)) return t[i].eval(res, fs, o, t[i].id, rec);
    return 0;
}
