/*
 * report.c — the report: run summary, capabilities, processes, and per rank its steps, the top
 * ranges by inclusive and exclusive time per step, the share of data loading and the other
 * rank sections; then the run-level analyses and rules.
 *
 * Each part is computed into its typed result (results.h) first and written into the cJSON
 * document (report.json) from those values by a writer apart; the text (report_text.c) and
 * the HTML read the results. Range times are counted only inside measured (non-warm-up)
 * steps, clipped to each step's window, so a range that straddles a step boundary is split
 * correctly and threads other than the step thread (a loader thread) count too. Exclusive
 * time inside the window is prorated from the range's whole exclusive share.
 */
#define _GNU_SOURCE
#include "analysis/report.h"
#include "analysis/alloc.h"
#include "analysis/stats.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <string.h>
#include <strings.h>

#include "analysis/breakdown.h"
#include "analysis/capture.h"
#include "analysis/comm.h"
#include "analysis/counter_pack.h"
#include "analysis/diagnose.h"
#include "analysis/findings.h"
#include "analysis/ended.h"
#include "analysis/energy.h"
#include "analysis/figures.h"
#include "analysis/gpu.h"
#include "analysis/jobs.h"
#include "analysis/memory.h"
#include "analysis/processes.h"
#include "analysis/steps.h"
#include "analysis/summary.h"
#include "analysis/text.h"
#include "analysis/report_ranges.h"
#include "analysis/report_spill.h"
#include "analysis/report_timers.h"
#include "trainprof.h"

static const char *const default_data_names[] = {"data", "batch", "loader", "get_batch",
                                                 "batch-generator"};

void tp_report_opts_init(tp_report_opts *o) {
    memset(o, 0, sizeof *o);
    o->warmup = 1;
    o->top_n = 15;
    o->data_names = default_data_names;
    o->ndata_names = sizeof default_data_names / sizeof *default_data_names;
    o->comm_warn_share = 0.10;
    o->comm_crit_share = 0.30;
    tp_diagnose_opts_init(o); /* throughput inputs and diagnosis thresholds */
}

size_t tp_report_gpu_records(const tp_report_opts *o) {
    return o->gpu_records ? o->gpu_records : TP_GPU_RECORDS_DEFAULT;
}

static double ms(uint64_t ns) { return (double)ns / 1e6; }

/* The process sampler's counters (capture/procfs.c) into *out: CPU %, RSS, threads,
 * switches; a CPU figure past the host's bound (figures.h) is not a result. */
static void process_section(tp_process_sampler_result *out, const tp_process *p) {
    static const char *const keys[4] = {"process.cpu_percent", "process.rss_bytes",
                                        "process.threads", "process.ctx_switches_per_s"};
    double sum[4] = {0}, mx[4] = {0};
    uint64_t n[4] = {0};
    for (size_t ti = 0; ti < p->nthreads; ti++) {
        tp_counter_it it;
        tp_counter c;
        tp_counter_it_init(&it, &p->threads[ti]); /* a slim process keeps none of these */
        while (tp_counter_next(&it, &c))
            for (int j = 0; j < 4; j++)
                if (!strcmp(c.name, keys[j])) {
                    sum[j] += c.value;
                    if (!n[j]++ || c.value > mx[j]) mx[j] = c.value;
                }
        tp_counter_it_done(&it);
    }
    if (!n[1]) return;
    out->present = 1;
    out->samples = (double)n[1];
    out->cpu_sampled = n[0] > 0;
    if (n[0]) {
        out->cpu_percent_mean = sum[0] / (double)n[0];
        out->cpu_percent_max = mx[0];
    }
    /* an impossible CPU figure is flagged, not a result (figures.h) */
    out->has_cpu_mean = out->has_cpu_max = out->cpu_sampled;
    tp_figures_check_process(out, p);
    out->rss_peak_bytes = mx[1];
    out->has_threads = n[2] > 0;
    out->threads_max = mx[2];
    out->has_ctx_switches = n[3] > 0;
    out->ctx_switches_per_s_mean = n[3] ? sum[3] / (double)n[3] : 0;
}

/* The rank's "process"; an impossible CPU figure in its "invalid" (figures.h). */
static void sampler_json(cJSON *rs, const tp_process_sampler_result *pr) {
    if (!pr->present) return;
    cJSON *pj = cJSON_AddObjectToObject(rs, "process");
    cJSON_AddNumberToObject(pj, "samples", pr->samples);
    if (pr->has_cpu_mean) cJSON_AddNumberToObject(pj, "cpu_percent_mean", pr->cpu_percent_mean);
    if (pr->has_cpu_max) cJSON_AddNumberToObject(pj, "cpu_percent_max", pr->cpu_percent_max);
    cJSON_AddNumberToObject(pj, "rss_peak_bytes", pr->rss_peak_bytes);
    if (pr->has_threads) cJSON_AddNumberToObject(pj, "threads_max", pr->threads_max);
    if (pr->has_ctx_switches)
        cJSON_AddNumberToObject(pj, "ctx_switches_per_s_mean", pr->ctx_switches_per_s_mean);
    cJSON *inv = NULL;
    tp_figure_invalid_json(&inv, pj, "cpu_percent_mean", &pr->cpu_mean_flagged,
                           pr->cpu_flag_reason);
    tp_figure_invalid_json(&inv, pj, "cpu_percent_max", &pr->cpu_max_flagged, pr->cpu_flag_reason);
}

/* The measured steps whose figures miss dropped events into *out (has_dropped): those
 * overlapping a window in which a thread's ring dropped events (model.h, tp_drop_window),
 * and all of them when events were dropped at unknown times. */
static void drops_on_steps(tp_steps_result *out, const tp_process *p, const tp_step *meas,
                           size_t nm) {
    uint8_t *hit = tp_calloc(nm, 1);
    if (!hit) return;
    uint64_t events = 0, touched = 0;
    for (size_t i = 0; i < p->ndrops; i++) {
        const tp_drop_window *d = &p->drops[i];
        size_t lo = 0, hi = nm; /* the first step ending after the window's start */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (meas[mid].end <= d->from) lo = mid + 1;
            else hi = mid;
        }
        int any = 0;
        for (size_t k = lo; k < nm && meas[k].start < d->to; k++) {
            touched += !hit[k];
            hit[k] = 1;
            any = 1;
        }
        if (any) events += d->count;
    }
    free(hit);
    /* records of chunks the writer could not write (write_errors.*, docs/format.md) are lost
     * at times the file does not hold: like drops at unknown times, any step may miss them */
    const char *wl = tp_meta(p, "write_errors.records");
    uint64_t lost = wl ? strtoull(wl, NULL, 10) : 0;
    uint64_t unplaced = p->drops_unplaced + lost;
    if (!touched && !unplaced) return;
    out->has_dropped = 1;
    out->steps_touched = (double)(unplaced ? nm : touched);
    out->events_in_steps = (double)events;
    out->events_unplaced = unplaced;
    out->records_lost = lost;
    out->dropped_flag = lost ? "records were lost to write errors at times not known: any "
                               "step's figures may miss them"
                        : p->drops_unplaced
                            ? "events were dropped at times not known: any step's figures may "
                              "miss them"
                            : "the step statistics, breakdown and ranges of these steps miss "
                              "the events dropped in them";
}

/* The rank's steps into *out from the steps found (s); *total_step_ns: the measured steps'
 * time. */
static void steps_result(tp_steps_result *out, const tp_process *p, const tp_report_opts *o,
                         const tp_steps *s, uint64_t *total_step_ns) {
    out->present = 1;
    out->count = s->nsteps;
    out->warmup = s->nwarmup;
    out->measured = s->nsteps - s->nwarmup;
    out->source = tp_step_source_name(s->source);
    out->name = s->name;
    out->requested_name = o->step_name;
    out->torch_hooks = tp_meta(p, "trainprof.torch") != NULL;
    if (o->step_name && *o->step_name && s->source != TP_STEPS_NAMED)
        out->note = "no range of this rank matches --step-name";
    if (s->nmissing_steps) {
        /* ranges, not numbers: a forged file's gap could name billions */
        out->missing_count = s->nmissing_steps;
        size_t k = s->nmissing < 100 ? s->nmissing : 100;
        out->missing = k ? tp_malloc(k * sizeof *out->missing) : NULL;
        out->nmissing = out->missing ? k : 0;
        for (size_t i = 0; i < out->nmissing; i++) {
            out->missing[i][0] = (double)s->missing[i].s;
            out->missing[i][1] = (double)s->missing[i].e;
        }
        out->missing_left_out = s->nmissing > 100 ? s->nmissing - 100 : 0;
        out->missing_flag = "the thread's full ring dropped their begin or end: the step "
                            "statistics do not cover them, and they are likely the slowest "
                            "(the ring fills when a step records most)";
    }
    const tp_step *meas = tp_steps_measured(s);
    size_t nm = out->measured;
    *total_step_ns = 0;
    if (s->source != TP_STEPS_NONE) {
        const tp_thread *st = &p->threads[s->thread];
        out->has_thread = 1;
        out->thread = st->name;
        out->tid = st->os_tid;
        out->warmup_ms = s->nwarmup ? tp_malloc(s->nwarmup * sizeof *out->warmup_ms) : NULL;
        for (size_t i = 0; out->warmup_ms && i < s->nwarmup; i++)
            out->warmup_ms[i] = ms(s->steps[i].end - s->steps[i].start);
    }
    if (!nm) return;
    uint64_t *d = tp_malloc(nm * sizeof *d);
    if (d) {
        for (size_t i = 0; i < nm; i++) {
            d[i] = meas[i].end - meas[i].start;
            *total_step_ns += d[i];
        }
        qsort(d, nm, sizeof *d, tp_cmp_u64);
        out->has_stats = 1;
        out->mean_ms = ms(*total_step_ns) / (double)nm;
        out->p50_ms = ms(tp_pct_u64(d, nm, 0.5));
        out->p90_ms = ms(tp_pct_u64(d, nm, 0.9));
        out->min_ms = ms(d[0]);
        out->max_ms = ms(d[nm - 1]);
        out->first_ms = ms(meas[0].start - p->first_ts);
        free(d);
    }
    drops_on_steps(out, p, meas, nm);
}

/* The rank's "steps" from its results. */
static void steps_json(cJSON *rs, const tp_steps_result *s) {
    cJSON *js = cJSON_AddObjectToObject(rs, "steps");
    cJSON_AddStringToObject(js, "source", s->source);
    if (s->name) cJSON_AddStringToObject(js, "name", s->name);
    if (s->requested_name) cJSON_AddStringToObject(js, "requested_name", s->requested_name);
    if (s->note) cJSON_AddStringToObject(js, "note", s->note);
    cJSON_AddNumberToObject(js, "count", (double)s->count);
    cJSON_AddNumberToObject(js, "warmup", (double)s->warmup);
    cJSON_AddNumberToObject(js, "measured", (double)s->measured);
    if (s->missing_count) {
        cJSON *mx = cJSON_AddObjectToObject(js, "missing");
        cJSON_AddNumberToObject(mx, "count", (double)s->missing_count);
        cJSON *mr = cJSON_AddArrayToObject(mx, "ranges");
        for (size_t i = 0; i < s->nmissing; i++)
            tp_json_item_to_array(mr, cJSON_CreateDoubleArray(s->missing[i], 2));
        if (s->missing_left_out)
            cJSON_AddNumberToObject(mx, "ranges_left_out", (double)s->missing_left_out);
        cJSON_AddStringToObject(mx, "flag", s->missing_flag);
    }
    if (s->has_thread) {
        if (s->thread) cJSON_AddStringToObject(js, "thread", s->thread);
        cJSON_AddNumberToObject(js, "tid", s->tid);
        cJSON *wu = cJSON_AddArrayToObject(js, "warmup_ms");
        for (size_t i = 0; s->warmup_ms && i < s->warmup; i++)
            tp_json_item_to_array(wu, cJSON_CreateNumber(s->warmup_ms[i]));
    }
    if (s->has_stats) {
        cJSON_AddNumberToObject(js, "mean_ms", s->mean_ms);
        cJSON_AddNumberToObject(js, "p50_ms", s->p50_ms);
        cJSON_AddNumberToObject(js, "p90_ms", s->p90_ms);
        cJSON_AddNumberToObject(js, "min_ms", s->min_ms);
        cJSON_AddNumberToObject(js, "max_ms", s->max_ms);
        cJSON_AddNumberToObject(js, "first_ms", s->first_ms);
    }
    if (s->has_dropped) {
        cJSON *x = cJSON_AddObjectToObject(js, "dropped_events");
        cJSON_AddNumberToObject(x, "steps_touched", s->steps_touched);
        cJSON_AddNumberToObject(x, "events_in_steps", s->events_in_steps);
        if (s->events_unplaced)
            cJSON_AddNumberToObject(x, "events_unplaced", (double)s->events_unplaced);
        if (s->records_lost)
            cJSON_AddNumberToObject(x, "records_lost_to_write_errors", (double)s->records_lost);
        cJSON_AddStringToObject(x, "flag", s->dropped_flag);
    }
}

/* The rank's section of the document; its figures also into *out (results.h), which the
 * run-level analyses and the rules read. pre: the range tables and data loading already
 * scanned (a streamed section, section_job), else NULL. */
static cJSON *rank_section(const tp_run *run, const tp_process *p, const tp_report_opts *o,
                           tp_rank_result *out, tp_rscan *pre) {
    memset(out, 0, sizeof *out);
    out->rank = p->rank;
    out->host = p->hdr.host;
    out->pid = p->hdr.pid;
    tp_process_label(p, out->label, sizeof out->label);
    cJSON *rs = cJSON_CreateObject();
    cJSON_AddNumberToObject(rs, "rank", p->rank);
    cJSON_AddStringToObject(rs, "label", out->label);
    cJSON_AddStringToObject(rs, "host", p->hdr.host);
    cJSON_AddNumberToObject(rs, "pid", p->hdr.pid);

    tp_steps s;
    if (tp_find_steps(p, o->step_name, o->warmup, &s) != TPROF_OK) return rs;
    uint64_t total_step_ns = 0;
    steps_result(&out->steps, p, o, &s, &total_step_ns);
    steps_json(rs, &out->steps);
    size_t nm = s.nsteps - s.nwarmup;
    /* top ranges: inside measured steps when there are some, else over the whole run */
    int per_step = nm > 0;
    const tp_step *meas = per_step ? tp_steps_measured(&s) : NULL;
    double per = per_step ? (double)nm : 1.0;
    double denom = per_step ? (double)total_step_ns
                            : (double)(p->end_mono > p->first_ts ? p->end_mono - p->first_ts : 0);
    /* a streamed section's scan was made from its file, the same figures (report_ranges.h) */
    tp_rscan own = {0}, *sc = pre ? pre : &own;
    if (!pre) (void)tp_rscan_whole(&own, p, o, &s, meas, nm); /* out of memory: what fitted */
    tp_rscan_ranges(&out->ranges, sc, p, o->top_n, per_step, per, denom);
    tp_rscan_ranges_json(rs, &out->ranges);

    tp_timers_rank(rs, &out->timers, p, meas, nm);
    /* the steps in which GPU activity was recorded: every GPU figure is over them alone */
    tp_steps cap;
    /* out of memory for the copy: every step stands for itself (capture not present) */
    const tp_steps *capp = tp_capture_compute(&out->capture, &cap, p, &s) == TPROF_OK ? &cap : &s;
    tp_capture_json(rs, &out->capture);
    const tp_step *cmeas = tp_steps_measured(capp);
    size_t ncm = capp->nsteps - capp->nwarmup;
    uint64_t cap_ns = 0;
    for (size_t i = 0; i < ncm; i++) cap_ns += cmeas[i].end - cmeas[i].start;
    /* the GPU's devices take their capacity from NVML: both computed before either is written */
    tp_gpu_compute(&out->gpu, p, cmeas, per_step ? ncm : 0, cap_ns, o->top_n, &out->capture);
    tp_nvml_compute(&out->nvml, run, p, tp_steps_measured(&s), nm);
    tp_memory_capacity(&out->gpu, &out->nvml, p);
    /* before any is written or read: impossible figures leave the results (figures.h) */
    tp_figures_check_gpu(&out->gpu);
    tp_figures_check_nvml(&out->nvml);
    tp_gpu_json(rs, &out->gpu);
    tp_comm_rank_section(rs, &out->comm, p, meas, per_step ? nm : 0, cmeas, per_step ? ncm : 0);
    process_section(&out->process, p);
    sampler_json(rs, &out->process);
    tp_nvml_json(rs, &out->nvml);
    /* out of memory: the section keeps what was computed (present says whether any) */
    (void)tp_memory_compute(&out->memory, p, &s, &out->nvml, out->capture.complete_until_ns);
    tp_memory_json(rs, &out->memory);
    tp_breakdown_compute(&out->breakdown, p, &s, capp, out->capture.not_captured,
                         out->capture.steps, o->data_names, o->ndata_names, sc->cpu);
    tp_breakdown_json(rs, &out->breakdown);
    tp_phases_compute(&out->phases, p, &s, sc->cpu);
    tp_phases_json(rs, &out->phases);
    tp_rscan_data(&out->data, sc, &s, meas, nm, per, denom);
    tp_rscan_data_json(rs, &out->data, o);
    tp_rscan_free(&own);
    tp_steps_free(&cap);
    tp_steps_free(&s);
    return rs;
}

static const char *const known_caps[TP_NCAPABILITIES][2] = {
    {"nvtx", "no NVTX call reached trainprof (the program uses no NVTX3, or ran outside "
             "trainprof run)"},
    {"cupti", "no process used CUDA under trainprof run (or the build had no CUPTI headers)"},
    {"nccl", "NCCL never loaded the profiler plugin (no NCCL communicator, NCCL older than "
             "2.23, or NCCL_PROFILER_PLUGIN overridden)"},
    {"nvml", "no process sampled NVML (the run ended before the sampler's first pass, "
             "TRAINPROF_NVML_HZ=0, or no recording session)"},
    {"mpi", "no process called MPI_Init under trainprof run (or the build had no MPI)"},
};

/* The run's summary into *out: its span, events and drops over every file. */
static void run_summary(tp_run_summary *out, const tp_run *run) {
    uint64_t t0 = UINT64_MAX, t1 = 0;
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < run->nprocs; i++) {
        const tp_process *p = &run->procs[i];
        uint64_t s = tp_to_realtime(p, p->first_ts ? p->first_ts : p->hdr.start_mono_ns);
        uint64_t e = tp_to_realtime(p, p->end_mono);
        if (s < t0) t0 = s;
        if (e > t1) t1 = e;
        out->events += p->events;
        out->events_dropped += p->dropped;
        const char *src = tp_meta(p, "trainprof.source");
        if (src && !strcmp(src, "torch.profiler")) {
            out->source = "torch.profiler";
            out->source_files++;
        }
        if (p->role == TP_ROLE_RANK) out->ranks++;
        else if (p->role == TP_ROLE_SAMPLER) out->node_samplers++;
        else out->helpers++;
    }
    out->dir = run->dir;
    out->run_id = run->nprocs ? run->procs[0].hdr.run_id : "";
    /* files of different runs in one directory: say so, the figures mix them */
    out->distinct_run_ids = run->nprocs ? 1 : 0;
    for (size_t i = 1; i < run->nprocs; i++) {
        int seen = 0;
        for (size_t k = 0; k < i && !seen; k++)
            seen = !strcmp(run->procs[i].hdr.run_id, run->procs[k].hdr.run_id);
        out->distinct_run_ids += !seen;
    }
    out->processes = run->nprocs;
    out->start_realtime_ns = t0 == UINT64_MAX ? 0 : t0;
    out->duration_s = t1 > t0 && t0 != UINT64_MAX ? (double)(t1 - t0) / 1e9 : 0;
    for (size_t i = 0; i < run->nprocs; i++) {
        const char *v = tp_meta(&run->procs[i], "threads_over_limit");
        if (v) out->threads_over_limit += atof(v);
        /* events named "(registered string past the limit)" instead of their string */
        v = tp_meta(&run->procs[i], "nvtx.strings_over_limit");
        if (v) out->nvtx_strings_over_limit += atof(v);
    }
    /* records the writer could not write (disk full, quota, file size limit, I/O error):
     * counted in the file by the writer (metadata write_errors.*, docs/format.md) */
    const tp_process *wfirst = NULL;
    for (size_t i = 0; i < run->nprocs; i++) {
        const char *v = tp_meta(&run->procs[i], "write_errors.records");
        if (!v) continue;
        out->records_lost_to_write_errors += atof(v);
        if (!wfirst) wfirst = &run->procs[i];
    }
    if (wfirst) {
        out->has_write_errors = 1;
        const char *en = tp_meta(wfirst, "write_errors.first_errno");
        const char *et = tp_meta(wfirst, "write_errors.first_error");
        out->first_write_error_errno = en ? en : "";
        out->first_write_error = et ? et : "";
    }
}

/* The document's "run" from the summary; returns it (NULL without memory). */
static cJSON *run_json(cJSON *rep, const tp_run_summary *r) {
    cJSON *jr = cJSON_AddObjectToObject(rep, "run");
    cJSON_AddStringToObject(jr, "dir", r->dir);
    cJSON_AddStringToObject(jr, "run_id", r->run_id);
    if (r->distinct_run_ids > 1)
        cJSON_AddNumberToObject(jr, "distinct_run_ids", r->distinct_run_ids);
    cJSON_AddNumberToObject(jr, "processes", (double)r->processes);
    cJSON_AddNumberToObject(jr, "ranks", r->ranks);
    cJSON_AddNumberToObject(jr, "helpers", r->helpers);
    cJSON_AddNumberToObject(jr, "node_samplers", r->node_samplers);
    char t0s[32]; /* exact: a double would round nanoseconds since 1970 */
    snprintf(t0s, sizeof t0s, "%llu", (unsigned long long)r->start_realtime_ns);
    cJSON_AddRawToObject(jr, "start_realtime_ns", t0s);
    cJSON_AddNumberToObject(jr, "duration_s", r->duration_s);
    cJSON_AddNumberToObject(jr, "events", (double)r->events);
    cJSON_AddNumberToObject(jr, "events_dropped", (double)r->events_dropped);
    if (r->source) {
        cJSON_AddStringToObject(jr, "source", r->source);
        cJSON_AddNumberToObject(jr, "source_files", r->source_files);
    }
    if (r->threads_over_limit > 0)
        cJSON_AddNumberToObject(jr, "threads_over_limit", r->threads_over_limit);
    if (r->nvtx_strings_over_limit > 0)
        cJSON_AddNumberToObject(jr, "nvtx_strings_over_limit", r->nvtx_strings_over_limit);
    if (r->has_write_errors) {
        cJSON_AddNumberToObject(jr, "records_lost_to_write_errors",
                                r->records_lost_to_write_errors);
        cJSON_AddStringToObject(jr, "first_write_error_errno", r->first_write_error_errno);
        cJSON_AddStringToObject(jr, "first_write_error", r->first_write_error);
    }
    return jr;
}

/* The capabilities into caps: what each source reported in the first file that names it,
 * else why it is absent (known_caps). */
static void capabilities(tp_capability *caps, const tp_run *run) {
    for (size_t c = 0; c < TP_NCAPABILITIES; c++) {
        char key[64];
        snprintf(key, sizeof key, "capability.%s", known_caps[c][0]);
        /* a capability that reported itself unavailable or off was not captured there; any
         * process that captured it makes it captured (the node sampler measures NVML while
         * the ranks say theirs is off for it), and its line is the one shown */
        const char *first = NULL, *on = NULL;
        for (size_t i = 0; i < run->nprocs && !on; i++) {
            const char *v = tp_meta(&run->procs[i], key);
            if (!v) continue;
            if (!first) first = v;
            if (strncmp(v, "unavailable", 11) && strncmp(v, "off", 3)) on = v;
        }
        caps[c].name = known_caps[c][0];
        caps[c].found = on != NULL;
        caps[c].status = on ? on : first ? first : known_caps[c][1];
    }
}

/* The document's "capabilities". */
static void capabilities_json(cJSON *rep, const tp_capability *caps) {
    cJSON *cj = cJSON_AddObjectToObject(rep, "capabilities");
    for (size_t c = 0; c < TP_NCAPABILITIES; c++) {
        cJSON *e = cJSON_AddObjectToObject(cj, caps[c].name);
        cJSON_AddBoolToObject(e, "found", caps[c].found);
        cJSON_AddStringToObject(e, "status", caps[c].status);
    }
}

/* The rank files read whole at once for their sections are kept under this many bytes of
 * estimated memory, SECTION_COST times the file's size: the model takes a little more than
 * the records it holds (a 56-byte kernel record, a 64-byte tp_gpu_op), and the analyses walk
 * the GPU records instead of copying them, keeping at most 12 bytes per record beside them
 * (gpu.c's launch times); bench_report_scale: 0.77 GB at the peak for a 586 MB file of 10 M
 * kernels, so the estimate is on the safe side. The pages of the file itself are given back
 * as they are read. One file is always read, whatever its size. */
#define SECTION_BUDGET (512ull << 20)
#define SECTION_COST 2

/* One rank section: the process, where its results and section go, and what it keeps. */
typedef struct rank_job {
    size_t proc;          /* index in run->procs */
    tp_rank_result *out;
    cJSON *section;
    tp_steps *steps;      /* a slim rank's steps, found in its whole file (then kept in it) */
    tp_comm_time *comm;   /* a slim rank's resolved communication times (the same) */
    int unread;           /* a slim rank whose file could not be read again */
    const char *unread_why; /* why, when known (else note_unread finds it) */
    int sum;              /* a slim rank's summary (summary.h): 1 its key is valid, 0 none,
                           * -1 stale or damaged (the section is computed from the file) */
    char *why;            /* tp_report_summarize: why no summary was written (owned) */
    int kept_short;       /* memory ran out while what the run-level analyses read of the
                           * rank was kept (its steps packed, its times, its spilled section):
                           * they may read it short (tp_run_results.no_memory) */
} rank_job;

/* What the jobs of rank_sections, tp_run_fill_memos and tp_report_summarize share. */
typedef struct sections {
    const tp_run *run;
    const tp_report_opts *o;
    rank_job *jobs;
    int memos_only; /* tp_run_fill_memos: no section, only what a slim rank keeps */
    int summarize;  /* tp_report_summarize: each section into its summary file, then freed */
    tp_section_spill *spill; /* tp_report_make_spilled: each section into it as it is made */
} sections;

/* A section read from a valid summary holds no file: it costs nothing against the budget (one
 * whose body then proves damaged is read from its file beyond the budget: rare, and one file). */
static uint64_t section_cost(void *ctx, size_t i) {
    const sections *sc = ctx;
    const tp_process *p = &sc->run->procs[sc->jobs[i].proc];
    return p->slim && sc->jobs[i].sum != 1 ? SECTION_COST * p->file_bytes : 0;
}


/* The section and memos of slim rank j from its summary (summary.h): 1, or 0 when it could
 * not be read after all (damaged: its job counts it stale and reads the file). */
static int from_summary(const sections *sc, rank_job *j, const tp_process *p) {
    tp_summary_parts parts = {.res = j->out};
    if (tp_summary_read((tp_run *)sc->run, p, sc->o, sc->memos_only, &parts) != 1) {
        j->sum = -1;
        return 0;
    }
    j->section = parts.section;
    j->steps = parts.steps;
    j->comm = parts.comm;
    return 1;
}

/* Why slim rank p's file could not be read again for its section, into why (n bytes): the
 * cause known where it failed, else what changed in the file, else `otherwise` (the file is
 * as it was: the second read ran short of a resource). */
static void unread_cause(const tp_process *p, const char *known, const char *otherwise,
                         char *why, size_t n) {
    if (known) snprintf(why, n, "%s", known);
    else if (tp_process_file_check(p, why, n) == TPROF_OK) snprintf(why, n, "%s", otherwise);
}

/* tp_report_summarize: slim rank j's section and memos into its summary file, then freed. */
static void to_summary(const sections *sc, rank_job *j, const tp_process *p) {
    char why[256];
    tp_summary_parts parts = {j->section, j->out, j->steps, j->comm};
    if (j->unread) { /* its section is the slim process's: no summary of the file */
        unread_cause(p, j->unread_why, "out of memory", why, sizeof why);
    } else if (j->out->no_memory) {
        /* a short section would stand for the file until it changed: the report computes it
         * again instead, and summarize writes it when it finds none */
        snprintf(why, sizeof why, "memory ran out while its section was computed");
    } else if (tp_summary_write(sc->run, p, sc->o, &parts, why, sizeof why) == 0) {
        why[0] = 0;
    }
    if (why[0]) {
        char line[768];
        snprintf(line, sizeof line, "%s: no summary written: %s", p->path, why);
        j->why = tp_strdup(line);
    }
    cJSON_Delete(j->section);
    tp_rank_result_free(j->out);
    if (j->steps) tp_steps_free(j->steps);
    free(j->steps);
    free(j->comm);
    j->section = NULL;
    j->steps = NULL;
    j->comm = NULL;
}

static void section_compute(const sections *sc, rank_job *j, const tp_process *p);

/* Job j's section says so when an allocation was refused to its thread since the count was
 * nomem (alloc.h): whatever fell short, its note and the headline tell it (docs/design.md §6).
 * A refused note still leaves the result's flag, which the text and the headline read. */
static void section_short(rank_job *j, unsigned long nomem) {
    if (tp_nomem_thread() == nomem || !j->out) return;
    j->out->no_memory = 1;
    if (j->section) cJSON_AddStringToObject(j->section, "note", TP_SECTION_NO_MEMORY);
}

/* One rank's section: a slim rank's from its valid summary, else from its file read again
 * whole (freed after), its steps and communication times kept for the run-level analyses
 * (memos, model.h), its strings pointing into the run's process. A file that can no longer be
 * read gives the section of what the slim process holds, and no memos. tp_report_summarize
 * writes it into the rank's summary (one already valid is left as it is). nomem: the job's
 * thread's refusals as it began (a job runs on one thread). */
static void section_make(const sections *sc, size_t i, unsigned long nomem) {
    rank_job *j = &sc->jobs[i];
    const tp_process *p = &sc->run->procs[j->proc];
    if (!p->slim) {
        if (!sc->memos_only) j->section = rank_section(sc->run, p, sc->o, j->out, NULL);
        return section_short(j, nomem);
    }
    if (j->sum == 1 && (sc->summarize || from_summary(sc, j, p))) return;
    section_compute(sc, j, p);
    section_short(j, nomem); /* before its summary, which carries it */
    if (sc->summarize) to_summary(sc, j, p);
}

/* A slim rank's times from its whole file (t, p->ncomm of them, taken) into its comm memo,
 * over the load's in place where it has them, as its job ends: only that job touches its
 * process's memo while the jobs run. Every job's spans held until all had ended lay beside
 * the load's, on the workers' arenas: +440 MB at 10.24 M ops (bench/README.md). */
static void memo_whole(tp_process *p, tp_comm_time *t) {
    tp_comm_span *sp = tp_comm_spans(t, p->ncomm); /* takes t; NULL: the load's times stay */
    if (sp && p->comm_memo) memcpy(p->comm_memo, sp, p->ncomm * sizeof *sp), free(sp);
    else if (sp) p->comm_memo = sp;
    p->comm_memo_whole |= sp != NULL;
}

/* section_make, the section then spilled when the report holds none (job i is the
 * document's "ranks"[i]: rank_sections makes them in that order), its communication times
 * then kept in its process (memo_whole). */
static void section_job(void *ctx, size_t i) {
    const sections *sc = ctx;
    rank_job *j = &sc->jobs[i];
    unsigned long nomem = tp_nomem_thread();
    section_make(sc, i, nomem);
    unsigned long made = tp_nomem_thread();
    /* packed as the job ends (its summary, if any, is written): every job's steps are held
     * until all have ended (run_jobs), 32 bytes a step unpacked */
    if (j->steps) tp_steps_pack_in(j->steps);
    if (sc->spill) {
        tp_spill_put(sc->spill, i, j->section);
        j->section = NULL;
    }
    if (j->comm) {
        memo_whole((tp_process *)&sc->run->procs[j->proc], j->comm);
        j->comm = NULL;
    }
    j->kept_short = tp_nomem_thread() != made;
    /* the job says its own (its section's note, kept_short): the caller's thread, which runs
     * jobs too, counts the report's other refusals alone */
    tp_nomem_thread_set(nomem);
}

/* Slim rank j's section from what its slim process kept, its file not read again (or
 * changed while read: noted as unreadable, run_jobs). */
static void section_unread(const sections *sc, rank_job *j, const tp_process *p) {
    const tp_run *run = sc->run;
    const tp_report_opts *o = sc->o;
    j->unread = 1;
    /* from what the slim process kept, which of its communication ops may be their
     * keys alone (tp_process_slim_comm): a section reads the ops themselves */
    tp_process kept = *p;
    if (!kept.comm) kept.ncomm = 0, kept.comm_memo = NULL;
    if (sc->memos_only) return;
    j->section = rank_section(run, &kept, o, j->out, NULL);
    j->out->host = p->hdr.host; /* not kept's: a copy on this stack */
    if (kept.ncomm == p->ncomm) return;
    /* ops it had but cannot show: no section, never one that says none were recorded
     * (the note of its file says so; the merge still matches its keys) */
    cJSON_DeleteItemFromObjectCaseSensitive(j->section, "communication");
    j->out->comm.present = 0;
}

/* section_job's slim rank read from its file. */
static void section_compute(const sections *sc, rank_job *j, const tp_process *p) {
    const tp_run *run = sc->run;
    const tp_report_opts *o = sc->o;
    tp_process whole;
    tp_rscan pre = {0};
    /* the pool is the run's shared store of strings and locks: loading interns there; a
     * file of more communication ops than a section holds has them read apart, unless they
     * need each other (then read again with them) */
    int apart = tp_comm_apart(p, o->comm_ops), streamed, rc;
    for (;;) {
        streamed = tp_section_stream(run, p, o, &whole, &pre, sc->memos_only, apart);
        rc = streamed ? TPROF_OK : tp_section_load(run, p, o, &whole, NULL, NULL, 0, apart);
        if (rc != TPROF_OK || !apart ||
            tp_comm_stream_open((tp_run *)run, p, &whole, o->comm_ops) == 1)
            break;
        if (streamed) tp_rscan_free(&pre);
        pre = (tp_rscan){0};
        tp_process_free(&whole);
        apart = 0;
    }
    if (rc != TPROF_OK) return section_unread(sc, j, p);
    (void)tp_comm_resolve_once(&whole); /* shared by its analyses; without memory, each its own */
    if (!sc->memos_only) {
        j->section = rank_section(run, &whole, o, j->out, streamed ? &pre : NULL);
        j->out->host = p->hdr.host; /* the whole process's copy is freed below */
    }
    tp_rscan_free(&pre);
    j->steps = tp_calloc(1, sizeof *j->steps);
    if (j->steps && tp_find_steps(&whole, o->step_name, o->warmup, j->steps) != TPROF_OK) {
        free(j->steps);
        j->steps = NULL;
    }
    j->comm = whole.comm_stream ? tp_comm_stream_kept(&whole, p) : tp_comm_times_kept(&whole, p);
    int failed = whole.comm_stream ? tp_comm_stream_failed(&whole) : 0;
    if (failed) {
        /* the file changed, or went, while its ops were read apart: what was computed of it
         * may be of two files; or the spans its ops left on disk were not read back whole */
        if (failed == 2)
            j->unread_why = "its MPI and gloo calls' spans, kept in a temporary file in "
                            "$TMPDIR (else /tmp), could not be read back";
        cJSON_Delete(j->section);
        j->section = NULL;
        tp_rank_result_free(j->out);
        if (j->steps) tp_steps_free(j->steps);
        free(j->steps);
        free(j->comm);
        j->steps = NULL;
        j->comm = NULL;
        tp_process_free(&whole);
        return section_unread(sc, j, p);
    }
    tp_process_free(&whole);
}

/* Notes in run->errors (the unreadable files) a slim rank file that could not be read again:
 * its section holds only what the first read kept (no GPU records, no steps, of its
 * counters the GPU samples alone, and of its communication only the keys the merge matches,
 * which a section cannot show: no communication section), which would otherwise read as a
 * rank that had none. */
static void note_unread(tp_run *run, const tp_process *p, const char *known) {
    char why[256], line[768];
    /* the file is as it was: the second read ran out of memory or of descriptors */
    unread_cause(p, known, "out of memory or of open files (ulimit -n)", why, sizeof why);
    snprintf(line, sizeof line, "%s: could not be read again for its section (%s); the section "
                                "holds only what its first read kept (no GPU records, steps, "
                                "communication ops, or counters other than the GPU samples)",
             p->path, why);
    char **e = tp_realloc(run->errors, (run->nerrors + 1) * sizeof *e);
    if (!e) return;
    run->errors = e;
    e[run->nerrors] = tp_strdup(line);
    if (e[run->nerrors]) run->nerrors++;
}

/* Runs the n jobs on o->threads threads under the budget, then keeps each slim rank's steps
 * in it, once no job reads the run any more (its communication times are kept as its job
 * ends, memo_whole, which only its own job reads). First, which slim
 * ranks have a summary whose key is valid (summary.h): their jobs read it instead of the
 * file. used[0] (may be NULL): the summaries read; used[1]: those stale or damaged (their
 * sections computed again). */
static void run_jobs(const tp_run *run, const tp_report_opts *o, rank_job *jobs, size_t n,
                     int memos_only, int summarize, size_t used[2], tp_section_spill *spill) {
    sections sc = {run, o, jobs, memos_only, summarize, spill};
    for (size_t k = 0; k < n; k++) {
        const tp_process *p = &run->procs[jobs[k].proc];
        /* summarize leaves a summary as it is only when its slim block is whole too */
        jobs[k].sum = !p->slim || p->role != TP_ROLE_RANK ? 0
                      : summarize ? (tp_summary_current(run, p, o) ? 1 : -1)
                                  : tp_summary_check(run, p, o);
    }
    tp_jobs_run(&(tp_jobs){n, o->threads, SECTION_BUDGET, section_cost, section_job, &sc});
    for (size_t k = 0; k < n; k++) {
        /* the run-level analyses, the HTML and the exports find the rank's steps and
         * communication times again (diagnose.c, html.c, clocks.c, chrome.c): a slim rank
         * answers from these */
        tp_process *p = (tp_process *)&run->procs[jobs[k].proc];
        if (used) used[jobs[k].sum < 0] += jobs[k].sum != 0;
        if (jobs[k].unread && !summarize) note_unread((tp_run *)run, p, jobs[k].unread_why);
        if (jobs[k].steps) tp_process_keep_steps(p, jobs[k].steps, o->step_name, o->warmup);
    }
#ifdef __GLIBC__
    /* the sections' files were read whole on the worker threads, into their own arenas,
     * which keep what was freed there; given back here before the run-level analyses grow
     * (64 ranks of 100,000 collectives each: 1.32 GB peak RSS before, 1.16 GB after) */
    malloc_trim(0);
#endif
}

/* "ranks": each rank's section, in rank order, and its results into res->ranks (nranks of
 * them). With spill, the sections go into *spill (made here) instead, "ranks" left empty
 * (report_spill.h); out of memory for it, into "ranks" as without. Returns TPROF_OK, or
 * TPROF_ERR_NO_MEMORY. */
static int rank_sections(cJSON *rep, const tp_run *run, const tp_report_opts *o, int nranks,
                         tp_run_results *res, tp_section_spill **spill) {
    cJSON *ranks = cJSON_AddArrayToObject(rep, "ranks");
    res->ranks = nranks ? tp_calloc((size_t)nranks, sizeof *res->ranks) : NULL;
    if (nranks && !res->ranks) return TPROF_ERR_NO_MEMORY;
    rank_job *jobs = nranks ? tp_calloc((size_t)nranks, sizeof *jobs) : NULL;
    if (nranks && !jobs) return TPROF_ERR_NO_MEMORY;
    size_t n = 0;
    for (int want = 0, left = nranks; left > 0 && want < 1 << 20; want++) {
        for (size_t i = 0; i < run->nprocs; i++) {
            const tp_process *p = &run->procs[i];
            if (p->role != TP_ROLE_RANK || p->rank != want) continue;
            jobs[n] = (rank_job){.proc = i, .out = &res->ranks[n]};
            n++;
            left--;
        }
    }
    size_t used[2] = {0, 0};
    if (spill) *spill = tp_spill_open(n);
    run_jobs(run, o, jobs, n, 0, 0, used, spill ? *spill : NULL);
    res->summaries_read = used[0];
    res->summaries_stale = used[1];
    res->slims_read = run->from_summaries;
    for (size_t k = 0; k < n; k++) {
        tp_json_item_to_array(ranks, jobs[k].section);
        res->no_memory |= jobs[k].kept_short;
    }
    res->nranks = n;
    free(jobs);
    return TPROF_OK;
}

/* A job for each slim rank of run that want selects (NULL: all), its results into out[k] when
 * out is given: *n of them (NULL when none, or out of memory: *n then SIZE_MAX). */
static rank_job *slim_rank_jobs(const tp_run *run, const unsigned char *want,
                                tp_rank_result *out, size_t *n) {
    size_t k = 0;
    for (size_t i = 0; i < run->nprocs; i++)
        k += run->procs[i].slim && run->procs[i].role == TP_ROLE_RANK && (!want || want[i]);
    *n = 0;
    if (!k) return NULL;
    rank_job *jobs = tp_calloc(k, sizeof *jobs);
    if (!jobs) {
        *n = SIZE_MAX;
        return NULL;
    }
    for (size_t i = 0; i < run->nprocs; i++)
        if (run->procs[i].slim && run->procs[i].role == TP_ROLE_RANK && (!want || want[i])) {
            jobs[*n] = (rank_job){.proc = i, .out = out ? &out[*n] : NULL};
            ++*n;
        }
    return jobs;
}

int tp_run_fill_memos(tp_run *run, const tp_report_opts *o, const unsigned char *want) {
    tp_report_opts def;
    if (!o) {
        tp_report_opts_init(&def);
        o = &def;
    }
    size_t n;
    rank_job *jobs = slim_rank_jobs(run, want, NULL, &n);
    if (n == SIZE_MAX) return TPROF_ERR_NO_MEMORY;
    if (!n) return TPROF_OK;
    run_jobs(run, o, jobs, n, 1, 0, NULL, NULL);
    int kept_short = 0;
    for (size_t k = 0; k < n; k++) kept_short |= jobs[k].kept_short;
    free(jobs);
    return kept_short ? TPROF_ERR_NO_MEMORY : TPROF_OK;
}

int tp_report_summarize(tp_run *run, const tp_report_opts *o, const unsigned char *want,
                        tp_summarize_stats *st) {
    memset(st, 0, sizeof *st);
    tp_report_opts def;
    if (!o) {
        tp_report_opts_init(&def);
        o = &def;
    }
    tp_summary_sweep_run(run, want); /* what dead writers left, before any write */
    tp_rank_result *out = tp_calloc(run->nprocs ? run->nprocs : 1, sizeof *out);
    size_t n = SIZE_MAX;
    rank_job *jobs = out ? slim_rank_jobs(run, want, out, &n) : NULL;
    if (n == SIZE_MAX || (n && !(st->errors = tp_calloc(n, sizeof *st->errors)))) {
        free(jobs);
        free(out);
        return TPROF_ERR_NO_MEMORY;
    }
    run_jobs(run, o, jobs, n, 0, 1, NULL, NULL);
    st->files = st->ranks = n;
    for (size_t k = 0; k < n; k++) {
        if (jobs[k].why) st->errors[st->nerrors++] = jobs[k].why;
        st->current += jobs[k].sum == 1;
        st->written += jobs[k].sum != 1 && !jobs[k].why;
    }
    free(jobs);
    free(out);
    int rc = tp_summarize_others(run, o, want, st);
    st->failed = st->nerrors;
    return rc;
}

/* The run's note (into jrun, its "run" object) when memory ran out (short) in its load or
 * its run-level analyses, or a rank's kept memos did (res->no_memory already set): once
 * (*noted). */
static void run_short(cJSON *jrun, tp_run_results *res, int short_, int *noted) {
    if ((!short_ && !res->no_memory) || *noted) return;
    res->no_memory = *noted = 1;
    cJSON_AddStringToObject(jrun, "note", TP_RUN_NO_MEMORY);
}

/* tp_report_make, the rank sections spilled (tp_report_make_spilled) or not. */
static int report_make(const tp_run *run, const tp_report_opts *o, tp_report *out, int spill) {
    memset(out, 0, sizeof *out);
    tp_report_opts def;
    if (!o) {
        tp_report_opts_init(&def);
        o = &def;
    }
    unsigned long nomem_start = tp_nomem_thread();
    cJSON *rep = cJSON_CreateObject();
    if (!rep) return TPROF_ERR_NO_MEMORY;
    /* the headline leads the document: its place is taken now, its value written last,
     * once the findings it is built from are known */
    cJSON *slot = cJSON_AddNullToObject(rep, "headline");
    cJSON_AddStringToObject(rep, "schema", "trainprof.report");
    cJSON_AddNumberToObject(rep, "schema_version", TP_REPORT_SCHEMA_VERSION);
    cJSON_AddStringToObject(rep, "trainprof_version", tprof_version());
    tp_run_results res = {0};
    run_summary(&res.run, run);
    cJSON *jrun = run_json(rep, &res.run);
    int noted = 0;
    int nranks = res.run.ranks;
    capabilities(res.caps, run);
    capabilities_json(rep, res.caps);
    if (tp_processes_compute(&res, run) != TPROF_OK) {
        tp_run_results_free(&res);
        cJSON_Delete(rep);
        return TPROF_ERR_NO_MEMORY;
    }
    cJSON *procs = cJSON_AddArrayToObject(rep, "processes");
    for (size_t i = 0; i < res.nprocs; i++)
        tp_json_item_to_array(procs, tp_process_json(&res.procs[i]));
    cJSON *errs = cJSON_AddArrayToObject(rep, "unreadable_files");
    tp_section_spill *sp = NULL;
    if (rank_sections(rep, run, o, nranks, &res, spill ? &sp : NULL) != TPROF_OK) {
        tp_run_results_free(&res);
        cJSON_Delete(rep);
        return TPROF_ERR_NO_MEMORY;
    }
    /* after the sections: a rank file that could not be read again for its own is one */
    for (size_t i = 0; i < run->nerrors; i++)
        tp_json_item_to_array(errs, cJSON_CreateString(run->errors[i]));
    tp_timers_run(&res.timers, &res);
    tp_timers_json(rep, &res.timers);
    /* findings: rules that name a problem, with the figures that show it (severity
     * "warning" or "critical"); each analysis appends its own */
    cJSON *findings = cJSON_AddArrayToObject(rep, "findings");
    size_t comm_finding = tp_comm_run_section(rep, run, &res, o->comm_warn_share,
                                              o->comm_crit_share);
    /* clocks, throughput/MFU, stragglers and the diagnosis rules */
    tp_diagnose_run(rep, run, &res, comm_finding, o);
    tp_ended_section(rep, &res.findings, run, &res.ended); /* killed by a signal or cut short */
    tp_findings_json(findings, &res.findings);
    /* this thread's refusals, the sections' (run here too by tp_jobs_run) left out */
    run_short(jrun, &res, run->no_memory || tp_nomem_thread() != nomem_start, &noted);
    tp_headline_build(&res);
    cJSON *headline = tp_headline_json(&res);
    /* keyed here: cJSON_ReplaceItemInObject (1.7.15) leaves an item with no key when the
     * key's copy finds no memory, which every reader of keys then meets */
    char *key = headline ? tp_strdup("headline") : NULL;
    if (key && slot) {
        headline->string = key;
        cJSON_ReplaceItemViaPointer(rep, slot, headline);
    } else {
        free(key);
        cJSON_Delete(headline);
    }
    /* options and metadata reach the document as given (a --step-name, a model spec, a
     * host name): report.json, and the text rendered from it, stay valid UTF-8 */
    tp_json_clean_utf8(rep);
    /* the headline's own refusals: a line of it may be missing */
    run_short(jrun, &res, tp_nomem_thread() != nomem_start, &noted);
    out->doc = rep;
    out->res = res;
    out->run = run;
    out->spill = sp;
    return TPROF_OK;
}

int tp_report_make(const tp_run *run, const tp_report_opts *o, tp_report *out) {
    return report_make(run, o, out, 0);
}

int tp_report_make_spilled(const tp_run *run, const tp_report_opts *o, tp_report *out) {
    return report_make(run, o, out, 1);
}

void tp_report_free(tp_report *r) {
    if (!r) return;
    cJSON_Delete(r->doc);
    tp_spill_free(r->spill);
    tp_run_results_free(&r->res);
    memset(r, 0, sizeof *r);
}

cJSON *tp_report_build(const tp_run *run, const tp_report_opts *o) {
    tp_report r;
    if (tp_report_make(run, o, &r) != TPROF_OK) return NULL;
    cJSON *doc = r.doc;
    r.doc = NULL;
    tp_report_free(&r);
    return doc;
}
