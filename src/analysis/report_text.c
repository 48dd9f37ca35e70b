/*
 * report_text.c — the text report (report.h) of what tp_report_make built: run summary,
 * steps per rank, top ranges, GPU, NVML, communication, findings. Every part is read from
 * the typed results (results.h), never from the document (docs/design.md §5.1; the lint
 * check `results` holds this file to it); this file also writes the document out as JSON
 * (tp_report_write_json).
 */
#define _GNU_SOURCE
#include "analysis/report.h"
#include "analysis/alloc.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "analysis/breakdown.h"
#include "analysis/capture.h"
#include "analysis/comm.h"
#include "analysis/diagnose.h"
#include "analysis/processes.h"
#include "analysis/ended.h"
#include "analysis/energy.h"
#include "analysis/figures.h"
#include "analysis/gpu.h"
#include "analysis/memory.h"
#include "analysis/text.h"
#include "trainprof.h"

/* ------------------------------------------------------------------ text rendering */


/* s as shown in the report (text.h): valid UTF-8, control characters as '?', so a file or
 * thread name cannot disturb the terminal; at most 255 bytes, cut between characters with a
 * mark. Uses one of two static buffers. */
static const char *printable(const char *s) {
    static char bufs[2][256];
    static int which;
    return tp_text_fit(bufs[which ^= 1], sizeof bufs[0], s, -1);
}

static const char *basename_of(const char *p) {
    const char *s = strrchr(p, '/');
    return printable(s ? s + 1 : p);
}

/* Names are printed in a fixed-width column: long ones are cut between characters and end
 * with TP_TEXT_CUT (text.h). */
static void put_name(FILE *f, const char *s, int width) { tp_text_put(f, s, width, width); }

/* The GPU's capture notes: the steps the figures are over (capture.h), a kernel-capture
 * window that never opened, and the pauses. */
static void gpu_capture_text(FILE *f, const tp_gpu_result *g, const tp_capture_result *cap) {
    tp_capture_text(f, cap);
    /* "the capture plan": --kernel-steps, --gpu-capture, its environment twin and the default
     * plan all write the window they open as kernel_steps */
    if (g->has_kernel_steps && !g->kernel_steps_opened)
        fprintf(f, "  GPU activity capture was limited to steps %s (the capture plan), which "
                   "never began: no GPU activity recorded\n",
                printable(g->kernel_steps_spec));
    else if (g->has_kernel_steps && !cap->limited && !g->kernel_steps_measured)
        fprintf(f, "  GPU activity captured in the capture plan's steps %s; this rank has no "
                   "measured steps, so the GPU figures are over the run\n",
                printable(g->kernel_steps_spec));
    else if (g->has_kernel_steps && !cap->limited)
        fprintf(f, "  GPU activity captured in steps %s (the capture plan): every measured "
                   "step\n", printable(g->kernel_steps_spec));
    for (size_t i = 0; i < g->npauses; i++) {
        const tp_gpu_pause *d = &g->pauses[i];
        fprintf(f, "  GPU activity paused%s%s%s from %.3f s to %.3f s%s: no GPU records then\n",
                d->reason ? " for " : "", d->reason ? printable(d->reason) : "", "", d->from_s,
                d->to_s, d->never_resumed ? " (never resumed)" : "");
    }
    if (g->pauses_more)
        fprintf(f, "  GPU activity paused %zu more time%s, %.3f s in all: no GPU records then\n",
                g->pauses_more, g->pauses_more == 1 ? "" : "s", g->pauses_more_s);
}

/* A CUDA device of the rank: busy time, kernels by class, copies, memory. A kind CUPTI did
 * not capture reads "not captured": unknown, not 0. */
static void gpu_device_text(FILE *f, const tp_gpu_device_result *d, const char *unit,
                            const char *of, const char *B, const char *N) {
    fprintf(f, "  %sGPU %.0f%s", B, (double)d->device, N);
    if (d->name) { /* the driver's text */
        fputs(" (", f);
        tp_fput_printable(f, d->name);
        if (d->has_sm_count) fprintf(f, ", %.0f SMs", d->sm_count);
        fputc(')', f);
    }
    fputc(':', f);
    if (d->has_busy_share) fprintf(f, " busy %.1f %% of the %s,", 100 * d->busy_share, of);
    fprintf(f, " kernels %.2f ms %s (%.0f kernels), ", d->kernel_ms, unit, d->kernels);
    if (d->has_memcpy_memset) fprintf(f, "memcpy/memset %.2f ms\n", d->memcpy_memset_ms);
    else fputs("memcpy/memset not captured\n", f);
    fprintf(f, "    by class:");
    for (int c = 0; c < TP_GPU_NCLASSES; c++)
        fprintf(f, " %s %.2f ms;", tp_kernel_class_name(c), d->kernel_ms_by_class[c]);
    if (d->has_copies)
        fprintf(f, "\n    copies host->device %.1f MiB, device->host %.1f MiB %s;",
                d->h2d_bytes / 1048576.0, d->d2h_bytes / 1048576.0, unit);
    else
        fputs("\n    copies not captured (no copy record: CUPTI's memcpy kind off, or no copy "
              "ran);", f);
    if (d->memory_peak_flagged.flagged) {
        fputs(" device memory peak not shown (flagged below)\n", f);
        return;
    }
    if (!d->has_memory_peak) {
        fputs(" device memory peak not captured (no allocation record while capture was on "
              "from the start)\n", f);
        return;
    }
    fprintf(f, " device memory peak %.1f MiB", d->memory_peak_bytes / 1048576.0);
    if (d->has_capacity)
        fprintf(f, " (%.1f %% of %.1f GiB)", 100 * d->memory_peak_share,
                d->memory_capacity_bytes / 1073741824.0);
    if (d->has_memory_peak_until)
        fprintf(f, " up to %.3f s, when capture first went off", d->memory_peak_until_s);
    fputc('\n', f);
}

/* CUPTI's own time, then the driver's that CUPTI reported. */
static void gpu_overhead_text(FILE *f, const tp_gpu_result *g, const char *unit) {
    if (!g->has_overhead) return;
    const double nd = (double)g->overhead_driver_records;
    for (int driver = 0; driver < 2; driver++) {
        const double n = driver ? nd : (double)g->overhead_records - nd;
        if (n <= 0) continue;
        fprintf(f, driver ? "  driver time reported by CUPTI: %.3f ms %s (%.0f records)"
                          : "  CUPTI's own overhead, the part its records show: %.3f ms %s "
                            "(%.0f records)",
                driver ? g->overhead_driver_ms : g->overhead_ms, unit, n);
        int first = 1, full = 0;
        for (size_t i = 0; i < g->noverhead_kinds; i++) {
            const tp_gpu_overhead *k = &g->overhead_kinds[i];
            if (k->driver != driver) continue;
            fprintf(f, "%s%s %.3f ms", first ? ": " : "; ", k->name, k->ms);
            full |= !strcmp(k->name, "command buffer full") && k->ms > 0;
            first = 0;
        }
        if (full)
            fputs(" (a launch waited for room in a GPU command queue: the host ran ahead of "
                  "the GPU)",
                  f);
        fputc('\n', f);
    }
}

static void gpu_text(FILE *f, const tp_gpu_result *g, const tp_capture_result *cap,
                     const char *B, const char *N) {
    if (!g->present) {
        tp_capture_text(f, cap);
        return;
    }
    const char *unit = g->per_step ? "per step" : g->in_span ? "in the span" : "in total";
    gpu_capture_text(f, g, cap);
    if (g->not_captured) {
        if (g->has_records_stopped)
            fprintf(f, "  warning: GPU records stopped %.1f s into the measured steps while %.0f "
                       "steps went on for %.1f s: %s\n",
                    g->stopped_after_s, (double)g->steps_without_gpu_records, g->stopped_span_s,
                    g->stopped_cause);
        return;
    }
    for (size_t i = 0; i < g->ndevices; i++)
        gpu_device_text(f, &g->devices[i], unit, g->in_span ? "span" : "step", B, N);
    if (g->has_host_syncs)
        fprintf(f, "  host synchronisations: %.1f %s, blocking the host %.2f ms\n", g->host_syncs,
                unit, g->host_sync_blocked_ms);
    else
        fputs("  host synchronisations: not captured (no CUDA runtime record: CUPTI's runtime "
              "kind off)\n", f);
    if (g->graph_launches > 0 || g->graph_kernels > 0) {
        fprintf(f, "  CUDA graphs: %.1f graph launches %s running %.1f kernels", g->graph_launches,
                unit, g->graph_kernels);
        if (g->graph_launches > 0)
            fprintf(f, " (%.1f kernels per launch)", g->graph_kernels / g->graph_launches);
        fputc('\n', f);
    }
    /* work no step holds: worth a line when it is not a trailing crumb */
    double all_ms = g->kernel_ms_total * (g->per_step ? (double)g->steps_measured : 1.0);
    if (g->kernels_after_steps && g->kernel_ms_after_steps >= 1.0 &&
        g->kernel_ms_after_steps >= 0.01 * all_ms)
        fprintf(f, "  note: %.1f ms of GPU kernels (%zu kernel%s) ran after the last measured "
                   "step, in no step: the step figures do not cover them\n",
                g->kernel_ms_after_steps, g->kernels_after_steps,
                g->kernels_after_steps == 1 ? "" : "s");
    if (g->has_records_stopped)
        fprintf(f,
                "  warning: GPU records stopped %.1f s into the measured steps while %.0f steps "
                "went on for %.1f s: %s\n",
                g->stopped_after_s, (double)g->steps_without_gpu_records, g->stopped_span_s,
                g->stopped_cause);
    if (g->cupti_records_dropped)
        fprintf(f, "  warning: CUPTI dropped %.0f records (its buffers were full)\n",
                (double)g->cupti_records_dropped);
    gpu_overhead_text(f, g, unit);
    if (g->records_clipped)
        fprintf(f,
                "  note: %.0f GPU %s clipped to %s stream's order (%.3f ms of recorded time "
                "removed): a record cannot end after the next one on its stream begins, nor "
                "after a synchronisation of its stream returned\n",
                (double)g->records_clipped, g->records_clipped == 1 ? "record" : "records",
                g->records_clipped == 1 ? "its" : "their", g->records_clipped_ms);
    if (g->cupti_records_untimed > 0)
        fprintf(f, "  note: %.0f CUPTI records had no start or end time (work still running when "
                   "its buffer was flushed, as at exit): left out\n",
                g->cupti_records_untimed);
    if (!g->nkernels) return;
    fprintf(f, "\n  top kernels (%s)\n  %-60s %9s %11s %10s %7s\n", unit, "kernel", "count",
            "total ms", "mean us", "share");
    /* short forms that keep rows apart (PyTorch's elementwise kernels differ only deep in
     * their template arguments) */
    enum { SHORT = 4 * 60 + 1 };
    char *shortn = tp_malloc(g->nkernels * SHORT);
    const char **names = tp_malloc(g->nkernels * sizeof *names);
    if (shortn && names) {
        for (size_t i = 0; i < g->nkernels; i++) names[i] = g->kernels[i].name;
        tp_kernel_short_names(names, g->nkernels, 60, shortn, SHORT);
    }
    for (size_t i = 0; i < g->nkernels; i++) {
        const tp_gpu_kernel *row = &g->kernels[i];
        fputs("  ", f);
        put_name(f, shortn && names ? shortn + i * SHORT : row->name, 60);
        fprintf(f, " %9.1f %11.3f %10.1f %6.1f%%\n", row->count_per_unit, row->total_ms,
                row->mean_us, 100 * row->share);
    }
    free(shortn);
    free(names);
}

/* Who sampled NVML for the rank, and the rank's GPUs that were not sampled. */
static void nvml_source_text(FILE *f, const tp_nvml_result *nv) {
    if (nv->has_sampled_by) {
        if (!strcmp(nv->sampled_by, "node sampler"))
            fprintf(f, "  NVML sampled by trainprof run's node sampler (pid %.0f)",
                    nv->sampler_pid);
        else
            fprintf(f, "  NVML sampled by %s (pid %.0f)", nv->sampled_by, nv->sampler_pid);
        fprintf(f, "%s\n", nv->shared_with_other_ranks
                               ? ": this rank's GPU is not known, every GPU of the host is shown"
                               : "");
    }
    if (nv->has_not_sampled) {
        fputs("  NVML: this rank's GPU", f);
        int first = 1;
        for (size_t a = 0; a < nv->nnot_sampled; a++) {
            if (!nv->not_sampled[a]) continue; /* the document has no entry for it either */
            fputs(first ? " " : ", ", f);
            tp_fput_printable(f, nv->not_sampled[a]);
            first = 0;
        }
        fputs(" was not among the GPUs sampled: no energy or power for it\n", f);
    }
}

/* One NVML GPU's energy and power line, and its MIG and approximation notes. */
static void nvml_energy_text(FILE *f, const tp_nvml_gpu_result *g, int per_step) {
    if (g->has_energy) {
        if (per_step)
            fprintf(f, " %.1f J per step (%.4f Wh) over %.0f step%s,", g->energy_per_step_j,
                    g->energy_per_step_wh, (double)g->steps_with_energy,
                    g->steps_with_energy == 1 ? "" : "s");
        else
            fprintf(f, " %.1f J in total,", g->energy_j);
        fprintf(f, " %.1f W average", g->avg_power_w);
        if (!strcmp(g->energy_method, "integrated_power"))
            fprintf(f, ", integrated from %s samples every %.0f ms (no energy counter)",
                    g->energy_series, g->sample_interval_ms);
    } else {
        fputs(" no energy (", f);
        tp_fput_printable(f, g->energy_unavailable);
        fputc(')', f);
    }
    if (g->has_power)
        fprintf(f, "; power samples %.1f W mean, %.1f W max", g->power_mean_w, g->power_max_w);
    if (g->has_power_limit) fprintf(f, "; limit %.0f W", g->power_limit_w);
    fputc('\n', f);
    if (g->shared_by_mig) {
        fputs("    MIG mode", f);
        if (g->mig_device) {
            fputs(" (this rank's MIG device ", f);
            tp_fput_printable(f, g->mig_device);
            fputc(')', f);
        }
        fputs(": energy and power are the whole GPU's, shared by its MIG instances, not "
              "this rank's own\n", f);
    }
    if (g->energy_approximate)
        fprintf(f, "    energy per step approximate: the steps are shorter than the %s (about "
                   "%.0f ms), so it is the span's energy shared out, not each step's\n",
                !strcmp(g->energy_method, "counter") ? "energy counter's update period"
                                                     : "interval of the power readings",
                g->energy_resolution_ms);
}

/* One NVML GPU's gauges: clocks, temperature, memory, utilisation; clock-event reasons. */
static void nvml_gauges_text(FILE *f, const tp_nvml_gpu_result *g) {
    fputs("   ", f);
    if (g->has_sm_clock)
        fprintf(f, " SM clock %.0f / %.0f / %.0f MHz (min/mean/max);", g->sm_clock_mhz_min,
                g->sm_clock_mhz_mean, g->sm_clock_mhz_max);
    if (g->has_temp) fprintf(f, " %.0f C max;", g->temp_c_max);
    if (g->has_mem_used) {
        fprintf(f, " memory used peak %.2f GiB", g->mem_used_peak_bytes / 1073741824.0);
        if (g->has_mem_used_share)
            fprintf(f, " of %.2f GiB (%.0f %%)", g->mem_total_bytes / 1073741824.0,
                    100 * g->mem_used_peak_share);
        fputc(';', f);
    }
    if (g->has_util) fprintf(f, " utilisation %.0f %% mean", g->util_percent_mean);
    fputc('\n', f);
    if (g->has_clock_events) {
        fputs("    clock events:", f);
        const char *names[TP_NVML_NREASONS];
        size_t n = tp_nvml_reasons(g->clock_event_mask, names, TP_NVML_NREASONS);
        for (size_t r = 0; r < n; r++) fprintf(f, "%s%s", r ? ", " : " ", names[r]);
        if (!n) fputs(" none", f);
        if (g->throttled)
            fprintf(f, " (throttled in %.0f %% of samples)", 100 * g->throttled_share);
        fputc('\n', f);
    }
}

/* The "nvml" section of a rank: a line per GPU for energy and power, one for clocks,
 * temperature, memory and utilisation, one for the clock-event reasons. */
static void nvml_text(FILE *f, const tp_nvml_result *nv) {
    if (!nv->present) return;
    nvml_source_text(f, nv);
    for (size_t i = 0; i < nv->ngpus; i++) {
        const tp_nvml_gpu_result *g = &nv->gpus[i];
        fprintf(f, "  NVML GPU %.0f", (double)g->index);
        if (g->name) fprintf(f, " %s", printable(g->name));
        if (g->uuid) fprintf(f, " (%s)", printable(g->uuid));
        fputc(':', f);
        nvml_energy_text(f, g, nv->per_step);
        nvml_gauges_text(f, g);
    }
    if (nv->has_total)
        fprintf(f, "  NVML GPUs together: %.1f J %s, %.1f W average\n", nv->total_energy_j,
                nv->per_step ? "per step" : "in total", nv->total_avg_power_w);
    if (nv->device_match && !strcmp(nv->device_match, "index"))
        fprintf(f, "  note: CUDA_VISIBLE_DEVICES held indices, read in NVML's PCI order (CUDA's "
                   "order agrees on identical GPUs or with CUDA_DEVICE_ORDER=PCI_BUS_ID)\n");
}

/* The run's summary line, its warnings and the capabilities. */
static void run_text(FILE *f, const tp_run_results *res, const char *B, const char *N,
                     const char *Y) {
    const tp_run_summary *run = &res->run;
    fprintf(f, "%strainprof report%s %s\n", B, N, run->dir);
    const tp_headline *h = &res->headline;
    for (size_t i = 0; i < h->nlines; i++)
        fprintf(f, "%s%s%s\n", !i ? (h->has_finding ? Y : B) : "", h->lines[i], !i ? N : "");
    fprintf(
        f,
        "run: %zu process%s (%d rank%s, %d helper%s%s), %.2f s, %.0f events, %.0f dropped\n",
        run->processes, run->processes == 1 ? "" : "es", run->ranks, run->ranks == 1 ? "" : "s",
        run->helpers, run->helpers == 1 ? "" : "s",
        run->node_samplers > 0 ? ", GPU sampler of the node" : "", run->duration_s,
        (double)run->events, (double)run->events_dropped);
    if (run->source) {
        /* the step rule's source when every rank's is the same (steps.h), else per rank */
        const char *steps = res->nranks ? res->ranks[0].steps.source : NULL;
        for (size_t i = 1; steps && i < res->nranks; i++)
            if (strcmp(res->ranks[i].steps.source, steps)) steps = NULL;
        fprintf(f, "from torch.profiler traces: %d file%s, %d rank%s, steps from %s; what a "
                   "trace does not hold (NVML, process samples, NCCL's own records) is not in "
                   "the trace\n",
                run->source_files, run->source_files == 1 ? "" : "s", run->ranks,
                run->ranks == 1 ? "" : "s",
                !steps                                       ? "each rank's own rule (below)"
                : !strcmp(steps, "PyTorch ProfilerStep#N ranges") ? "ProfilerStep#N"
                                                                   : steps);
    }
    if (res->no_memory) fprintf(f, "%s  note: %s%s\n", Y, TP_RUN_NO_MEMORY, N);
    if (run->events_dropped > 0)
        fprintf(f, "%s  warning: %.0f events were dropped: %s%s\n", Y,
                (double)run->events_dropped,
                run->threads_over_limit > 0
                    ? "threads beyond TRAINPROF_MAX_THREADS record nothing (raise it), and "
                      "full rings drop events (raise TRAINPROF_RING_KB)"
                    : "rings were full (raise TRAINPROF_RING_KB)",
                N);
    if (run->nvtx_strings_over_limit > 0)
        fprintf(f, "%s  warning: %.0f NVTX string registrations were past "
                   "TRAINPROF_NVTX_STRINGS_KB: their events are named \"(registered string "
                   "past the limit)\" (raise it)%s\n",
                Y, run->nvtx_strings_over_limit, N);
    if (run->has_write_errors && run->records_lost_to_write_errors > 0)
        fprintf(f, "%s  warning: %.0f records lost to write errors (%s: %s): the rank file "
                   "could not take them; the figures below lack them%s\n",
                Y, run->records_lost_to_write_errors, printable(run->first_write_error_errno),
                printable(run->first_write_error), N);
    if (run->distinct_run_ids > 1)
        fprintf(f,
                "%s  warning: these rank files come from %d different runs (run ids differ)%s\n",
                Y, run->distinct_run_ids, N);
    fprintf(f, "capabilities:\n");
    for (size_t c = 0; c < TP_NCAPABILITIES; c++)
        fprintf(f, "  %-6s %s %s\n", res->caps[c].name, res->caps[c].found ? "yes" : "no ",
                res->caps[c].status);
}

/* A process's unmatched range pops, by thread. */
static void pops_text(FILE *f, const tp_process_result *p) {
    fprintf(f, "    %.0f range pop(s) with no open range on their thread (ignored):",
            p->unmatched_pops);
    for (size_t i = 0; i < p->npops; i++) {
        const tp_pops_thread *t = &p->pops[i];
        fprintf(f, "%s %.0f on ", i ? "," : "", t->count);
        if (t->thread) {
            fputs("thread \"", f);
            tp_fput_printable(f, t->thread);
            fputs("\" ", f);
        } else {
            fputs("an unnamed thread ", f);
        }
        fprintf(f, "(tid %u, first at %.3f s)", (unsigned)t->tid, t->first_s);
    }
    if (p->unmatched_pops_after_drops > 0)
        fprintf(f, "; %.0f after dropped events: their push was likely dropped by the "
                   "thread's full ring",
                p->unmatched_pops_after_drops);
    fputc('\n', f);
}

/* The processes table, with each file's damage and lost records, and the unreadable files.
 * The role column is as wide as the longest label (at least 18 columns), so a long label
 * ("launcher of ranks 0-7 (torchrun)") keeps the rows in line. */
static void processes_text(FILE *f, const tp_run_results *res, const tp_run *run,
                           const char *B, const char *N, const char *Y) {
    int w = tp_processes_label_cols(res, 18);
    fprintf(f, "\n%sprocesses%s\n  %-*s %-24s %7s %9s %8s %9s  %s\n", B, N, w, "role",
            "host:pid", "threads", "events", "dropped", "duration", "file");
    for (size_t i = 0; i < res->nprocs; i++) {
        const tp_process_result *p = &res->procs[i];
        char hp[96];
        snprintf(hp, sizeof hp, "%s:%.0f", p->host, p->pid);
        /* padded by columns, not bytes: a host name may hold any character */
        fputs("  ", f);
        tp_text_put(f, p->label, -1, w);
        fputc(' ', f);
        tp_text_put(f, hp, -1, 24);
        fprintf(f, " %7.0f %9.0f %8.0f %7.2f s  %s%s\n", p->threads, p->events,
                p->events_dropped, p->duration_s, basename_of(p->file),
                p->rank_implied ? "  (rank implied: no launcher rank)" : "");
        for (size_t k = 0; k < p->ndamage; k++)
            fprintf(f, "%s    damage in %s: %s%s\n", Y, basename_of(p->file),
                    printable(p->damage[k]), N);
        if (p->has_write_errors)
            fprintf(f, "%s    %.0f records lost to write errors (%s: %s) in %.0f chunk(s)%s\n", Y,
                    p->records_lost, printable(p->first_errno), printable(p->first_error),
                    p->chunks_lost, N);
        if (p->rank_file_reopened > 0)
            fprintf(f, "    the program closed the rank file's descriptor: reopened %.0f time(s)\n",
                    p->rank_file_reopened);
        if (p->unmatched_pops > 0) pops_text(f, p);
        if (p->unmatched_range_ends > 0)
            fprintf(f, "    %.0f range end(s) for unknown ids (ignored)\n",
                    p->unmatched_range_ends);
    }
    for (size_t i = 0; run && i < run->nerrors; i++)
        fprintf(f, "%s  unreadable: %s%s\n", Y, run->errors[i], N);
    /* never trusted: the sections are the rank files', but the summaries want writing again;
     * what makes one stale without the user's doing is named too (a copy's status-change
     * times, another build's summary format: an upgrade makes every summary stale) */
    if (res->summaries_stale)
        fprintf(f, "%s  %zu summar%s out of date, recomputed from the rank files (the rank "
                   "file, or this report's --step-name, --warmup, --data-names, --top or "
                   "--gpu-records, or TRAINPROF_COMM_KEEP, changed since `trainprof "
                   "summarize`, the run was copied, "
                   "another trainprof build wrote it, or the summary is damaged or could not "
                   "be read)%s\n",
                Y, res->summaries_stale, res->summaries_stale == 1 ? "y" : "ies", N);
}

/* The steps of a rank: where they came from, their statistics, the missing and flagged ones,
 * the warm-up. */
static void steps_text(FILE *f, const tp_steps_result *sr, const char *N, const char *Y) {
    if (sr->count == 0 && sr->torch_hooks && !sr->requested_name) {
        fputs("  steps: none found: trainprof.torch makes a step of each optimizer step "
              "(torch.optim.Optimizer.step()), and this process made none. Mark steps with "
              "trainprof.step(), tprof_step_begin/end, or pass --step-name NAME.\n", f);
        return;
    }
    if (sr->count == 0) {
        fprintf(
            f,
            "  steps: none found (%s%s%s). Mark steps with tprof_step_begin/end, an "
            "NVTX range named \"step\", or pass --step-name NAME.\n",
            sr->requested_name
                ? "no range named \""
                : "tried API steps, ProfilerStep#*, train_step, training_step, step, "
                  "iteration, train_iter",
            sr->requested_name ? sr->requested_name : "", sr->requested_name ? "\"" : "");
        return;
    }
    const char *name = sr->name ? sr->name : "";
    int api = !strcmp(name, "tprof_step_begin/end"); /* says it already */
    fprintf(f, "  steps: %zu from %s%s%s%s%s%s%s, %zu warm-up\n", sr->count, sr->source,
            api ? "" : " \"", api ? "" : printable(name), api ? "" : "\"",
            sr->thread ? " (thread " : "", sr->thread ? printable(sr->thread) : "",
            sr->thread ? ")" : "", sr->warmup);
    if (sr->note) fprintf(f, "  note: %s\n", sr->note);
    if (sr->measured > 0)
        fprintf(f, "  step time: mean %.2f ms  p50 %.2f  p90 %.2f  max %.2f  min %.2f ms\n",
                sr->mean_ms, sr->p50_ms, sr->p90_ms, sr->max_ms, sr->min_ms);
    if (sr->missing_count) {
        fprintf(f, "%s  missing: %.0f step(s) (", Y, (double)sr->missing_count);
        for (size_t i = 0; i < sr->nmissing; i++) {
            double a = sr->missing[i][0], b = sr->missing[i][1];
            fprintf(f, "%s%.0f", i ? ", " : "", a);
            if (b != a) fprintf(f, "-%.0f", b);
        }
        if (sr->missing_left_out) fputs(", ...", f);
        fprintf(f, "): %s%s\n", sr->missing_flag, N);
    }
    if (sr->has_dropped) {
        fprintf(f, "%s  flagged: %.0f of %zu measured steps built on dropped events (%.0f "
                   "dropped by full rings inside them",
                Y, sr->steps_touched, sr->measured, sr->events_in_steps);
        if (sr->events_unplaced > 0)
            fprintf(f, ", %.0f at unknown times", (double)sr->events_unplaced);
        fprintf(f, "): %s%s\n", sr->dropped_flag, N);
    }
    size_t nw = sr->warmup_ms ? sr->warmup : 0;
    for (size_t i = 0; i < nw; i++) {
        if (i == 8) { /* the JSON has them all */
            fprintf(f, ", ... (%zu in all)", nw);
            break;
        }
        fprintf(f, "%s%.2f", i ? ", " : "  warm-up step(s): ", sr->warmup_ms[i]);
    }
    if (nw) fprintf(f, " ms (not in the statistics)\n");
}

/* The process sampler's line of a rank. */
static void process_text(FILE *f, const tp_process_sampler_result *pr) {
    if (!pr->present) return;
    /* a CPU figure past its bound is not printed here: the flagged lines say why */
    fputs("  process: CPU ", f);
    if (!pr->cpu_sampled) {
        fputs("not sampled (a rate needs 100 ms); ", f);
    } else {
        if (pr->has_cpu_mean) fprintf(f, "%.0f %% mean, ", pr->cpu_percent_mean);
        else fputs("mean flagged, ", f);
        if (pr->has_cpu_max) fprintf(f, "%.0f %% max; ", pr->cpu_percent_max);
        else fputs("max flagged; ", f);
    }
    fprintf(f, "RSS peak %.1f MiB; %.0f threads; %.0f context switches/s (%.0f samples)\n",
            pr->rss_peak_bytes / 1048576.0, pr->threads_max, pr->ctx_switches_per_s_mean,
            pr->samples);
}

/* The data-loading line of a rank (results.h tp_data_result). */
static void data_text(FILE *f, const tp_data_result *d) {
    if (d->found)
        fprintf(f, "  data loading: %.2f ms %s = %.1f %% of the %s (%s)\n", d->ms,
                d->per_step ? "per step" : "in total", 100 * d->share,
                d->per_step ? "step" : "run", d->where);
    else
        fprintf(f, "  data loading: no range named like data loading (data, batch, loader, "
                   "get_batch, batch-generator)\n");
}

/* The ranges never closed and the top-range tables of a rank. */
static void ranges_text(FILE *f, const tp_ranges_result *rg) {
    if (!rg->present) return;
    for (size_t i = 0; i < rg->nunclosed; i++) {
        const tp_range_row *u = &rg->unclosed[i];
        fprintf(f, "%s%s%s%s (%.0f)", i ? ", " : "  never closed (left out of the tables): ",
                u->domain, *u->domain ? "::" : "", u->name, u->count);
    }
    if (rg->nunclosed) fputc('\n', f);
    for (int ti = 0; ti < 2; ti++) {
        const tp_range_row *rows = ti == 0 ? rg->top_inclusive : rg->top_exclusive;
        size_t n = ti == 0 ? rg->ninclusive : rg->nexclusive;
        if (!n) continue;
        fprintf(f, "\n  top ranges by %s time per %s\n  %-40s %9s %12s %7s %12s\n",
                ti == 0 ? "inclusive" : "exclusive", rg->per_step ? "step" : "run", "name",
                rg->per_step ? "count/st" : "count", "incl ms", "share", "excl ms");
        for (size_t i = 0; i < n; i++) {
            /* "domain::name", whole: the column cut alone shortens it */
            const char *dom = rows[i].domain, *name = rows[i].name;
            size_t nl = strlen(dom) + strlen(name) + 3;
            char *nm = tp_malloc(nl);
            if (nm) snprintf(nm, nl, "%s%s%s", dom, *dom ? "::" : "", name);
            fputs("  ", f);
            put_name(f, nm ? nm : name, 40);
            free(nm);
            fprintf(f, " %9.2f %12.3f %6.1f%% %12.3f\n", rows[i].count_per_unit,
                    rows[i].inclusive_ms,
                    100 * (ti == 0 ? rows[i].inclusive_share : rows[i].exclusive_share),
                    rows[i].exclusive_ms);
        }
    }
}

/* One rank, from its typed results. */
static void rank_text(FILE *f, const tp_rank_result *rr, const char *B, const char *N,
                      const char *Y) {
    fprintf(f, "\n%s%s%s (%s:%d)\n", B, rr->label, N, rr->host, rr->pid);
    if (rr->no_memory) fprintf(f, "  %snote: %s%s\n", Y, TP_SECTION_NO_MEMORY, N);
    if (!rr->steps.present) return;
    steps_text(f, &rr->steps, N, Y);
    process_text(f, &rr->process);
    tp_figures_text(f, rr, Y, N);
    nvml_text(f, &rr->nvml);
    gpu_text(f, &rr->gpu, &rr->capture, B, N);
    tp_memory_text(f, &rr->memory);
    tp_comm_rank_text(f, &rr->comm);
    tp_breakdown_text(f, &rr->breakdown);
    tp_phases_text(f, &rr->phases);
    data_text(f, &rr->data);
    ranges_text(f, &rr->ranges);
}

/* Megatron's timers across ranks, in Megatron-LM's own text. */
static void timers_text(FILE *f, const tp_run_timers_result *tm, const char *B, const char *N) {
    if (!tm->present) return;
    fprintf(f, "\n%stimers%s (Megatron-LM format; ms per %s)\n", B, N,
            tm->per_step ? "measured step" : "run, in total");
    if (tm->megatron_minmax) fprintf(f, "%s\n", tm->megatron_minmax);
    if (tm->megatron_all) fprintf(f, "%s\n", tm->megatron_all);
}

static void findings_text(FILE *f, const tp_findings_result *fs, const char *B, const char *N,
                          const char *Y) {
    for (size_t i = 0; i < fs->n; i++) {
        const tp_finding *fd = &fs->items[i];
        if (!i) fprintf(f, "\n%sfindings%s\n", B, N);
        const char *sev = fd->severity;
        fprintf(f, "%s  %s: %s%s\n", !strcmp(sev, "critical") || !strcmp(sev, "warning") ? Y : "",
                sev, fd->message, N);
        if (fd->recommendation) fprintf(f, "    try: %s\n", fd->recommendation);
        if (fd->megatron) fprintf(f, "    in Megatron-LM's arguments: %s\n", fd->megatron);
    }
    if (fs->nnear)
        fprintf(f, "\n%snear a threshold%s (not findings: the shares of identical runs move by a "
                   "few points, so a finding needs a margin of %.0f %% of its threshold)\n",
                B, N, 100 * fs->diag_band);
    for (size_t i = 0; i < fs->nnear; i++) {
        const tp_near *nr = &fs->near[i];
        int share = !strcmp(nr->unit, "share");
        double k = share ? 100 : 1;
        const char *u = share ? " %" : " ms per sample";
        fprintf(f, "  %s, rank %d: %.1f%s (threshold %.1f%s, a finding from %.1f%s)\n", nr->id,
                nr->rank, k * nr->value, u, k * nr->threshold, u, k * nr->finding_from, u);
    }
}

static int write_text(const tp_report *report, FILE *f, int color) {
    const char *B = color ? "\033[1m" : "", *N = color ? "\033[0m" : "";
    const char *Y = color ? "\033[33m" : "";
    run_text(f, &report->res, B, N, Y);
    processes_text(f, &report->res, report->run, B, N, Y);
    for (size_t i = 0; i < report->res.nranks; i++) rank_text(f, &report->res.ranks[i], B, N, Y);
    tp_comm_run_text(f, &report->res.comm, B, N);
    tp_diagnose_text(f, &report->res, B, N, Y); /* clocks, throughput, stragglers */
    timers_text(f, &report->res.timers, B, N);
    tp_ended_text(f, &report->res.ended, B, N, Y);
    findings_text(f, &report->res.findings, B, N, Y);
    fflush(f);
    return ferror(f) ? TPROF_ERR_IO : TPROF_OK;
}

/* The text is rendered in memory and written through tp_utf8_write, so whatever a section
 * prints (names from the program, text of other tools), the report is valid UTF-8; the
 * sections themselves cut names between characters (text.h). */
struct text_ctx {
    const tp_report *rep;
    int color;
};

static int render_text(FILE *out, const void *ctx) {
    const struct text_ctx *c = ctx;
    return write_text(c->rep, out, c->color);
}

int tp_report_write_text(const tp_report *rep, FILE *f, int color) {
    struct text_ctx c = {rep, color};
    return tp_utf8_render(f, render_text, &c);
}

int tp_report_write_json(const cJSON *rep, FILE *f) {
    char *s = cJSON_Print(rep);
    if (!s) return TPROF_ERR_NO_MEMORY;
    fputs(s, f);
    fputc('\n', f);
    cJSON_free(s);
    fflush(f);
    return ferror(f) ? TPROF_ERR_IO : TPROF_OK;
}
