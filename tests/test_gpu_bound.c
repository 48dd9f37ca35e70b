/*
 * test_gpu_bound.c — a rank section bounded in GPU records (model.h, tp_process_load_bounded;
 * tp_report_opts.gpu_records), on synthetic runs (tests/synth.c) with known answers. Each step
 * of 10 ms runs some compute kernels of 0.1 ms, each launched by a cudaLaunchKernel, and one
 * NCCL all-reduce kernel of 1 ms matched to its communication op:
 *  - 200 even steps of 4 kernels under a bound of 400: the records held are those that began
 *    in the span the process names, every one of them (counted against a whole load of the
 *    same file), and the NCCL kernels all; the captured steps are those inside the span less
 *    its first and last; per-step GPU figures equal the whole report's, and so does the
 *    communication section (each op still matched to its kernel), without any kernel "after
 *    the last step"; the text says the bound;
 *  - 40 dense steps of 30 kernels in the middle of 200 sparse ones, each step's records
 *    written in reverse order, the sample of the records' start times made to mislead (as
 *    if they were spread evenly): the span's end moves back until the records held fit the
 *    bound, and the same exact-span property holds;
 *  - 50 dense steps after 150 sparse ones: the sample places the span on the middle record,
 *    in the dense steps, and it holds most of the bound;
 *  - steps only in the first quarter, or 5 s of GPU work between two steps at the middle: the
 *    span is placed again from the first measured step, as many records as fit;
 *  - a bound under one sample's records: a span a sample gap wide, cut to the bound; a span
 *    under 10 ms printed to the microsecond;
 *  - a heavy warm-up and three measured steps: read again, the last two held whole; with one
 *    measured step, none is, and the headline names the bound as the cause;
 *  - without steps: the span at the middle stands, and the GPU figures are totals over it
 *    (each record where it began, the busy share and the exposure of the span), counted
 *    against a whole load of the file; the report from summaries is the same to the byte;
 *    with the capture paused inside the span, the busy share and the exposure are of its
 *    captured parts, as the breakdown's; records longer than their stream's order allows are
 *    cut back at the span's end as in a whole load; a CUDA graph's nodes held last before
 *    the span's end, by the first record left out after them outside their graph;
 *  - with nothing outside the span (communication kernels alone), the rank is read whole;
 *  - under the bound, or with no bound, the section is the whole one.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/comm.h"
#include "analysis/model.h"
#include "analysis/report.h"
#include "analysis/summary.h"
#include "export/html.h"
#include "format/format.h"
#include "json_path.h"
#include "report_text.h"
#include "synth.h"
#include "trainprof.h"

static const uint64_t T0 = 1000000000ull, US = 1000ull, MS = 1000000ull;
#define RT0 1700000000000000000ull
#define NSTEPS 200
#define NCCL_KERNEL "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"

/* Kernels in step k: kernels_of(k). */
typedef uint32_t (*kernels_fn)(uint32_t k);

static uint32_t even4(uint32_t k) { (void)k; return 4; }
static uint32_t dense_middle(uint32_t k) { return k >= 80 && k < 120 ? 30 : 1; }

/* write_run marks steps 0 .. g_steps - 1 only (NSTEPS: all of them, 0: none), and its steps
 * run g_kernels_of(k) compute kernels; g_nccl 0: no NCCL kernel and op */
static uint32_t g_steps = NSTEPS;
static int g_nccl = 1;
/* write_run puts 5 s of GPU work outside any step before step 100 (an evaluation pass):
 * 2500 kernels with their launches, one every 2 ms */
static int g_gap;
static uint32_t g_nsteps = NSTEPS; /* steps write_run writes */
#define GAP_NS (5000 * MS)
/* write_run pauses the GPU capture (gpu_capture.pauses, as for another CUPTI client) over
 * iterations g_pause_from .. g_pause_to - 1, which then leave no record (both 0: none) */
static uint32_t g_pause_from, g_pause_to;
/* write_run records every compute kernel as running 25 ms, past the next ones on its stream
 * (a record that cannot be, which the load cuts back to the next one's start) */
static int g_long;
/* write_run also runs a compute kernel on the NCCL kernels' stream after each of them: the
 * stream then holds records the bound leaves out beside those it keeps whole */
static int g_side;
#define ITER_T(k) (T0 + MS + (uint64_t)(k) * 10 * MS)

static void write_run(char *dir, size_t n, kernels_fn kernels_of, int reversed) {
    assert_int_equal(synth_tmpdir(dir, n, "gbound"), 0);
    synth_file *f = synth_open(dir, "h", 50, RT0, T0);
    synth_thread(f, 1, 50);
    synth_thread(f, 2, 51);
    synth_rank(f, 0, 1);
    synth_meta(f, "capability.cupti", "activity capture on: 8 kinds");
    if (g_pause_to) {
        char v[64];
        snprintf(v, sizeof v, "%llu-%llu", (unsigned long long)ITER_T(g_pause_from),
                 (unsigned long long)ITER_T(g_pause_to));
        synth_meta(f, "gpu_capture.pauses", v);
    }
    uint32_t corr = 1;
    for (uint32_t k = 0; k < g_nsteps; k++) {
        if (k >= g_pause_from && k < g_pause_to) continue; /* nothing recorded */
        uint64_t t = T0 + MS + (uint64_t)k * 10 * MS + (g_gap && k >= 100 ? GAP_NS : 0);
        for (uint32_t q = 0; g_gap && k == 100 && q < 2500; q++, corr++) {
            uint64_t ks = t - GAP_NS + (uint64_t)q * 2 * MS;
            synth_api(f, 2, ks - 50 * US, ks - 45 * US, 50, 211, corr, "cudaLaunchKernel");
            synth_kernel(f, 2, ks, ks + MS, 0, 7, corr, "eval_kernel");
            if (q % 100 == 99) synth_flush(f);
        }
        if (k < g_steps) synth_step_begin(f, 1, t, k);
        uint32_t nk = kernels_of(k);
        /* more than 35 kernels: closer together and shorter, all within the step */
        uint64_t gap = nk > 35 ? 8 * MS / nk : 200 * US, len = nk > 35 ? gap / 2 : 100 * US;
        uint64_t lgap = nk > 35 ? gap / 2 : 20 * US;
        for (uint32_t q = 0; q < nk; q++) {
            uint32_t j = reversed ? nk - 1 - q : q;
            uint64_t ls = t + 10 * US + (uint64_t)j * lgap, ks = t + MS + (uint64_t)j * gap;
            synth_api(f, 2, ls, ls + lgap / 4, 50, 211, corr + j, "cudaLaunchKernel");
            synth_kernel(f, 2, ks, ks + (g_long ? 25 * MS : len), 0, 7, corr + j,
                         "ampere_sgemm_128x64_nn");
        }
        corr += nk;
        tprof_pl_comm c;
        memset(&c, 0, sizeof c);
        c.bytes = 1u << 20;
        c.count = 1u << 18;
        c.comm_hash = 0xabc;
        c.nranks = 1;
        c.op = TPROF_COMM_ALLREDUCE;
        c.seq = k;
        c.end_ns = t + 7900 * US;
        if (g_nccl) {
            synth_comm(f, 1, t + 7880 * US, &c, NULL);
            synth_kernel(f, 2, t + 8 * MS, t + 9 * MS, 0, 13, 0, NCCL_KERNEL);
            if (g_side) synth_kernel(f, 2, t + 9100 * US, t + 9150 * US, 0, 13, 0, "side_kernel");
        }
        if (k < g_steps) synth_step_end(f, 1, t + 10 * MS, k);
        synth_flush(f);
    }
    synth_end_of_file(f, T0 + 2 * MS + NSTEPS * 10 * MS + (g_gap ? GAP_NS : 0), 0);
    assert_int_equal(synth_close(f), 0);
}

static void load_slim(const char *dir, tp_run *run) {
    char err[256];
    const char *ops[] = {dir};
    if (tp_run_load_slim(ops, 1, run, err, sizeof err) != 0) fail_msg("%s: %s", dir, err);
    assert_int_equal(run->nprocs, 1);
}

static cJSON *report_bounded(const tp_run *run, size_t bound) {
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.gpu_records = bound;
    return report_json(run, &o);
}

static char *text_bounded(const tp_run *run, size_t bound) {
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.gpu_records = bound;
    return report_text(run, &o);
}

/* Rank 0's communication sections of reports a and b are the same but for their exposure,
 * which is over each one's own windows (the whole run's, the span's or its steps'). */
static void comm_same(const cJSON *a, const cJSON *b) {
    cJSON *ca = cJSON_Duplicate(jget(a, "ranks.0.communication"), 1);
    cJSON *cb = cJSON_Duplicate(jget(b, "ranks.0.communication"), 1);
    assert_non_null(ca);
    assert_non_null(cb);
    cJSON_DeleteItemFromObjectCaseSensitive(ca, "exposure");
    cJSON_DeleteItemFromObjectCaseSensitive(cb, "exposure");
    assert_true(cJSON_Compare(ca, cb, 1));
    cJSON_Delete(ca);
    cJSON_Delete(cb);
}

/* Whether the bound applies to o (model.h: not to NCCL kernels and overhead records). */
static int windowed(const tp_gpu_op *o) {
    return o->type != TPROF_REC_GPU_OVERHEAD &&
           !(o->type == TPROF_REC_GPU_KERNEL && o->cls == TP_KC_COMM);
}

static int load_bounded(tp_run *run, tp_process *out, size_t bound) {
    tp_gpu_bound b = {bound, 0};
    return tp_process_load_bounded(run, &run->procs[0], out, NULL, &b);
}

typedef struct counts { size_t windowed, in_span, comm; } counts;

static void count(counts *c, const tp_gpu_op *v, size_t n, uint64_t from, uint64_t to) {
    for (size_t i = 0; i < n; i++) {
        if (!windowed(&v[i])) {
            c->comm += v[i].type == TPROF_REC_GPU_KERNEL;
            continue;
        }
        c->windowed++;
        c->in_span += v[i].start >= from && v[i].start < to;
    }
}

/* The bounded load of run's process holds exactly the windowed records that began in its
 * span (a whole load of the file counts them), every NCCL kernel, at most `bound` windowed
 * ones, and counts the rest as left out. Returns the span through from/to. */
static void check_span(tp_run *run, size_t bound, uint64_t *from, uint64_t *to) {
    tp_process whole, b;
    assert_int_equal(load_bounded(run, &whole, 0), TPROF_OK);
    assert_int_equal(whole.gpu_window_to, 0);
    assert_int_equal(load_bounded(run, &b, bound), TPROF_OK);
    assert_true(b.gpu_window_to > b.gpu_window_from);
    assert_int_equal(b.gpu_bound, bound);
    counts all = {0}, held = {0};
    count(&all, whole.gpu, whole.ngpu, b.gpu_window_from, b.gpu_window_to);
    count(&all, whole.api, whole.napi, b.gpu_window_from, b.gpu_window_to);
    count(&held, b.gpu, b.ngpu, b.gpu_window_from, b.gpu_window_to);
    count(&held, b.api, b.napi, b.gpu_window_from, b.gpu_window_to);
    assert_int_equal(held.in_span, held.windowed); /* none held from outside the span */
    assert_int_equal(held.windowed, all.in_span);  /* and every one from inside it */
    assert_true(held.windowed <= bound);
    assert_true(held.windowed > 0);
    assert_int_equal(held.comm, g_nccl ? NSTEPS : 0);
    assert_int_equal(held.comm, all.comm);
    assert_int_equal(b.gpu_left_out, all.windowed - held.windowed);
    /* the rest of the process is the whole load's */
    assert_int_equal(b.ncomm, whole.ncomm);
    assert_int_equal(b.events, whole.events);
    assert_int_equal(b.first_ts, whole.first_ts);
    *from = b.gpu_window_from;
    *to = b.gpu_window_to;
    tp_process_free(&whole);
    tp_process_free(&b);
}

/* The measured steps (step 0 is the warm-up) inside [from, to), less the first when a step
 * precedes it and the last when one follows; *first: the first of them. */
static size_t steps_inside(uint64_t from, uint64_t to, size_t *first) {
    size_t n = 0, last = 0;
    *first = SIZE_MAX;
    for (uint32_t k = 0; k < g_steps; k++) {
        uint64_t t = T0 + MS + (uint64_t)k * 10 * MS;
        if (t < from || t + 10 * MS > to) continue;
        if (*first == SIZE_MAX) *first = k;
        last = k;
        n++;
    }
    assert_true(n >= 3);
    if (*first > 0) n--;
    (*first)++; /* the first inside is left out, or it is the warm-up step */
    if (last + 1 < g_steps) n--;
    assert_true(*first >= 1); /* the warm-up step is not among them */
    return n;
}

static void test_even_steps(void **state) {
    (void)state;
    char dir[512];
    write_run(dir, sizeof dir, even4, 0);
    tp_run run;
    load_slim(dir, &run);
    uint64_t from, to;
    check_span(&run, 400, &from, &to);
    size_t first, want = steps_inside(from, to, &first);
    cJSON *whole = report_bounded(&run, SIZE_MAX), *rep = report_bounded(&run, 400);
    assert_null(jget(whole, "ranks.0.gpu_capture"));
    jnear(jnum(rep, "ranks.0.gpu_capture.captured_steps"), (double)want, "captured");
    jnear(jnum(rep, "ranks.0.gpu_capture.measured_steps"), NSTEPS - 1, "measured");
    jnear(jnum(rep, "ranks.0.gpu_capture.steps.0.0"), (double)first, "first captured");
    jnear(jnum(rep, "ranks.0.gpu_capture.steps.0.1"), (double)(first + want - 1), "last");
    assert_string_equal(jstr(rep, "ranks.0.gpu_capture.limited_by.0"), "gpu_records_bound");
    jnear(jnum(rep, "ranks.0.gpu_capture.gpu_records_bound.bound"), 400, "bound");
    jnear(jnum(rep, "ranks.0.gpu_capture.gpu_records_bound.from_s"),
          (double)(from - T0) / 1e9, "from_s");
    jnear(jnum(rep, "ranks.0.gpu_capture.gpu_records_bound.to_s"), (double)(to - T0) / 1e9,
          "to_s");
    assert_null(jget(rep, "ranks.0.gpu_capture.cost")); /* recording went on outside: no cost */
    /* each step: 4 x 0.1 ms + 1 ms of 10 ms busy, 5 kernels, in both */
    jnear(jnum(whole, "ranks.0.gpu.devices.0.busy_share"), 0.14, "whole busy");
    jnear(jnum(rep, "ranks.0.gpu.devices.0.busy_share"), 0.14, "bounded busy");
    jnear(jnum(rep, "ranks.0.gpu.devices.0.kernels"), 5, "kernels per step");
    jnear(jnum(rep, "ranks.0.breakdown.windows"), (double)want, "breakdown windows");
    jnear(jnum(rep, "ranks.0.breakdown.ms.compute.mean"), 0.4, "compute per step");
    assert_null(jget(rep, "ranks.0.gpu.after_last_step"));
    /* the ops matched to their kernels wherever they ran: the section's rows are the same */
    comm_same(whole, rep);
    assert_string_equal(jstr(rep, "ranks.0.communication.communicators.0.ops.0.time_source"),
                        "kernel");
    jnear(jnum(rep, "ranks.0.communication.communicators.0.ops.0.time_sources.kernel"),
          NSTEPS, "ops timed by their kernels");
    jnear(jnum(rep, "ranks.0.communication.exposure.windows"), (double)want, "exposure windows");
    cJSON_Delete(whole);
    cJSON_Delete(rep);
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.gpu_records = 400;
    char *text = report_text(&run, &o);
    report_has(text, "GPU records held: ");
    report_has(text, "the rank's GPU records are more than the bound of 400 (--gpu-records, "
                     "TRAINPROF_GPU_RECORDS)");
    free(text);
    /* the HTML's note says which steps and why */
    tp_report r;
    assert_int_equal(tp_report_make(&run, &o, &r), 0);
    char *html = NULL;
    size_t hl = 0;
    FILE *hf = open_memstream(&html, &hl);
    assert_non_null(hf);
    assert_int_equal(tp_html_write(&r, &o, hf), 0);
    fclose(hf);
    tp_report_free(&r);
    report_has(html, "its GPU figures are over those steps only. The report held ");
    report_has(html, "out: it had more than the bound of 400 (--gpu-records).");
    free(html);
    tp_run_free(&run);
    synth_rmtree(dir);
}

static void test_dense_middle_moves_the_end(void **state) {
    (void)state;
    char dir[512];
    write_run(dir, sizeof dir, dense_middle, 1);
    tp_run run;
    load_slim(dir, &run);
    /* a sample of the records' start times that misleads (as if they were spread evenly over
     * the run): the window placed from it holds more than the bound, and its end moves back */
    tp_process *p = &run.procs[0];
    assert_int_equal(p->nrec_gpu + p->nrec_api, 2920);
    uint64_t span = p->last_ts - p->first_ts;
    for (size_t i = 0; i < TP_GPU_STARTS; i++)
        p->gpu_starts[i] = p->first_ts + span / TP_GPU_STARTS * i;
    p->gpu_nstarts = TP_GPU_STARTS;
    uint64_t from, to;
    check_span(&run, 400, &from, &to);
    /* the middle samples standing for 0.9 x 400 of the 2920 records: 256 x 360 / 2920 =
     * 31.6 of them, from the 112th to the 143rd */
    assert_int_equal(from, p->gpu_starts[112]);
    assert_true(to < p->gpu_starts[143]); /* moved back: the middle holds 60 records a step */
    cJSON *rep = report_bounded(&run, 400);
    size_t first, want = steps_inside(from, to, &first);
    jnear(jnum(rep, "ranks.0.gpu_capture.captured_steps"), (double)want, "captured");
    jnear(jnum(rep, "ranks.0.gpu.devices.0.kernels"), 31, "kernels per dense step");
    jnear(jnum(rep, "ranks.0.gpu.devices.0.busy_share"), 0.4, "busy per dense step");
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* The records' histogram (the slim load's) places the window on the middle of the records,
 * not of the process's span: 150 sparse steps then 50 dense ones, the middle record in
 * step 172 or so (300 records before step 150, 60 a step after it). */
static uint32_t late_dense(uint32_t k) { return k >= 150 ? 30 : 1; }

static void test_window_where_the_records_are(void **state) {
    (void)state;
    char dir[512];
    write_run(dir, sizeof dir, late_dense, 0);
    tp_run run;
    load_slim(dir, &run);
    uint64_t from, to;
    check_span(&run, 400, &from, &to);
    uint64_t mid = T0 + MS + 172 * 10 * MS;
    assert_true(from < mid && mid < to);
    /* most of the bound used: about 0.9 x 400 windowed records held in 6 dense steps */
    tp_process b;
    assert_int_equal(load_bounded(&run, &b, 400), TPROF_OK);
    size_t held = b.gpu_held;
    assert_true(held >= 300 && held <= 400);
    tp_process_free(&b);
    cJSON *rep = report_bounded(&run, 400);
    jnear(jnum(rep, "ranks.0.gpu.devices.0.kernels"), 31, "kernels per dense step");
    jnear(jnum(rep, "ranks.0.gpu_capture.gpu_records_bound.held"), (double)held, "held");
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* run's report with options o, its JSON, text and HTML in one string; *read: the rank
 * summaries it read (summary.h). */
static char *render_all(const tp_run *run, const tp_report_opts *o, size_t *read) {
    tp_report r;
    assert_int_equal(tp_report_make(run, o, &r), 0);
    *read = r.res.summaries_read;
    char *buf = NULL, *json = cJSON_Print(r.doc);
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_non_null(json);
    fputs(json, f);
    free(json);
    assert_int_equal(tp_report_write_text(&r, f, 0), 0);
    assert_int_equal(tp_html_write(&r, o, f), 0);
    fclose(f);
    tp_report_free(&r);
    return buf;
}

/* What a whole load of run's process ran in [from, to): the kernels that began there (their
 * count and time), the device's busy time in it (the kernels clipped to it; none of this
 * run's overlap) and the NCCL kernels' share of that. */
typedef struct in_span_want { size_t kernels; uint64_t kernel_ns, busy_ns, comm_ns; } in_span_want;

static in_span_want span_truth(tp_run *run, uint64_t from, uint64_t to) {
    tp_process whole;
    assert_int_equal(load_bounded(run, &whole, 0), TPROF_OK);
    in_span_want w = {0};
    for (size_t i = 0; i < whole.ngpu; i++) {
        const tp_gpu_op *o = &whole.gpu[i];
        if (o->type != TPROF_REC_GPU_KERNEL) continue;
        if (o->start >= from && o->start < to) {
            w.kernels++;
            w.kernel_ns += o->end - o->start;
        }
        uint64_t s = o->start > from ? o->start : from, e = o->end < to ? o->end : to;
        if (e <= s) continue;
        w.busy_ns += e - s;
        if (o->cls == TP_KC_COMM) w.comm_ns += e - s;
    }
    tp_process_free(&whole);
    return w;
}

/* No step, over the bound: the rank keeps the span at the middle of its records, and its GPU
 * figures are totals over that span ("per": "span"), each record where it began, the busy
 * share and the exposed communication of the span; its ops are all counted still. The whole
 * report's figures are over the run, and a report from bounded summaries equals the bounded
 * report. */
static void test_no_steps(void **state) {
    (void)state;
    char dir[512];
    g_steps = 0;
    write_run(dir, sizeof dir, even4, 0);
    g_steps = NSTEPS;
    tp_run run;
    load_slim(dir, &run);
    uint64_t from, to;
    check_span(&run, 400, &from, &to);
    in_span_want w = span_truth(&run, from, to);
    double span_ms = (double)(to - from) / 1e6;
    assert_true(w.kernels > 100 && w.kernels < 1000); /* a part of the run's */
    cJSON *whole = report_bounded(&run, SIZE_MAX), *rep = report_bounded(&run, 400);
    assert_null(jget(whole, "ranks.0.gpu_capture"));
    assert_string_equal(jstr(whole, "ranks.0.gpu.per"), "run");
    jnear(jnum(whole, "ranks.0.gpu.devices.0.kernels"), 1000, "every kernel");
    assert_string_equal(jstr(rep, "ranks.0.gpu_capture.limited_by.0"), "gpu_records_bound");
    jnear(jnum(rep, "ranks.0.gpu_capture.gpu_records_bound.from_s"),
          (double)(from - T0) / 1e9, "from_s");
    assert_string_equal(jstr(rep, "ranks.0.gpu.per"), "span");
    jnear(jnum(rep, "ranks.0.gpu.devices.0.kernels"), (double)w.kernels, "kernels in the span");
    jnear(jnum(rep, "ranks.0.gpu.devices.0.kernel_ms"), (double)w.kernel_ns / 1e6, "kernel ms");
    jnear(jnum(rep, "ranks.0.gpu.kernel_ms_total"), (double)w.kernel_ns / 1e6, "total");
    jnear(jnum(rep, "ranks.0.gpu.devices.0.busy_share"), (double)w.busy_ns / 1e6 / span_ms,
          "busy share of the span");
    /* the ops are every one; the exposure is the span's: no compute overlaps an NCCL kernel */
    jnear(jnum(rep, "ranks.0.communication.ops"), NSTEPS, "ops");
    assert_string_equal(jstr(rep, "ranks.0.communication.exposure.per"), "span");
    jnear(jnum(rep, "ranks.0.communication.exposure.window_ms"), span_ms, "exposure window");
    jnear(jnum(rep, "ranks.0.communication.exposure.exposed_ms.mean"), (double)w.comm_ns / 1e6,
          "exposed in the span");
    assert_string_equal(jstr(whole, "ranks.0.communication.exposure.per"), "run");
    assert_string_equal(jstr(rep, "communication.exposure.per"), "span");
    jnear(jnum(rep, "ranks.0.breakdown.captured_s"), span_ms / 1e3, "breakdown over the span");
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.gpu_records = 400;
    char *text = report_text(&run, &o);
    char line[160];
    snprintf(line, sizeof line, "kernels %.2f ms in the span (%zu kernels)",
             (double)w.kernel_ns / 1e6, w.kernels);
    report_has(text, line);
    report_has(text, "without measured steps, the GPU figures are totals over that span, not "
                     "the run's");
    report_has(text, "top kernels (in the span)");
    report_has(text, "% of the span (median ");
    report_has(text, "no steps: the span whose GPU records the report held as one window, ");
    report_lacks(text, "in which GPU activity was recorded");
    free(text);
    /* the summaries hold the span's figures: the report from them is the same, to the byte */
    size_t read = 0;
    char *before = render_all(&run, &o, &read);
    assert_int_equal(read, 0);
    tp_summarize_stats st;
    assert_int_equal(tp_report_summarize(&run, &o, NULL, &st), 0);
    assert_int_equal(st.written, 1);
    tp_summarize_stats_free(&st);
    tp_run again;
    load_slim(dir, &again);
    char *after = render_all(&again, &o, &read);
    assert_int_equal(read, 1);
    assert_string_equal(before, after);
    free(before);
    free(after);
    tp_run_free(&again);
    cJSON_Delete(whole);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* A stepless run of 400 iterations of 10 ms: in each, two kernels of 0.2 ms and two of no
 * length (CUPTI gives them: a record its stream's order cut back to its start), each with its
 * launch, a blocking cudaDeviceSynchronize of 3 ms from 8.5 ms and a CUPTI overhead record of
 * 3 ms from 8.5 ms (both run into the next iteration, so some cross the span's ends). */
static void write_edges(char *dir, size_t n) {
    assert_int_equal(synth_tmpdir(dir, n, "gbedge"), 0);
    synth_file *f = synth_open(dir, "h", 50, RT0, T0);
    synth_thread(f, 1, 50);
    synth_thread(f, 2, 51);
    synth_rank(f, 0, 1);
    synth_meta(f, "capability.cupti", "activity capture on: 8 kinds");
    uint32_t corr = 1;
    for (uint32_t k = 0; k < 400; k++, corr += 5) {
        uint64_t t = T0 + MS + (uint64_t)k * 10 * MS;
        for (uint32_t j = 0; j < 4; j++) {
            uint64_t ks = t + MS + j * 300 * US;
            synth_api(f, 2, t + j * 20 * US, t + j * 20 * US + 5 * US, 50, 211, corr + j,
                      "cudaLaunchKernel");
            synth_kernel(f, 2, ks, ks + (j % 2 ? 0 : 200 * US), 0, 7, corr + j,
                         j % 2 ? "zero_kernel" : "ampere_sgemm_128x64_nn");
        }
        synth_api(f, 2, t + 8500 * US, t + 11500 * US, 50, 165, corr + 4,
                  "cudaDeviceSynchronize");
        tprof_pl_gpu ov = {t + 11500 * US, 0, TPROF_DEVICE_UNKNOWN, 0, 0, 0, 50, 0};
        static const char flush[] = "CUPTI buffer flush";
        synth_raw(f, 2, TPROF_REC_GPU_OVERHEAD, TPROF_INLINE_NAME, t + 8500 * US, &ov, sizeof ov,
                  flush, sizeof flush);
        synth_flush(f);
    }
    synth_end_of_file(f, T0 + 2 * MS + 400 * 10 * MS, 0);
    assert_int_equal(synth_close(f), 0);
}

/* The bounded stepless rank's figures are those of the records that began in the span, each
 * whole, counted against a whole load of the file: kernels of no length among them, and the
 * overhead records and synchronisations that ran across the span's ends where they began. */
static void test_no_steps_edges(void **state) {
    (void)state;
    char dir[512];
    write_edges(dir, sizeof dir);
    tp_run run;
    load_slim(dir, &run);
    tp_process whole, b;
    assert_int_equal(load_bounded(&run, &whole, 0), TPROF_OK);
    assert_int_equal(load_bounded(&run, &b, 1000), TPROF_OK);
    uint64_t from = b.gpu_window_from, to = b.gpu_window_to;
    assert_true(to > from);
    size_t kernels = 0, zero = 0;
    for (size_t i = 0; i < whole.ngpu; i++) {
        const tp_gpu_op *o = &whole.gpu[i];
        if (o->type != TPROF_REC_GPU_KERNEL || o->start < from || o->start >= to) continue;
        kernels++;
        zero += o->end == o->start;
    }
    assert_true(zero > 100 && zero < kernels);
    /* the overhead records and synchronisations that began in the span, each whole; one of
     * each ran across one of its ends at least */
    size_t novh = 0, nsync = 0, across = 0;
    uint64_t ovh_ns = 0, sync_ns = 0;
    for (size_t i = 0; i < whole.novh; i++) {
        const tp_gpu_op *o = &whole.ovh[i];
        across += (o->start < from && o->end > from) + (o->start < to && o->end > to);
        if (o->start < from || o->start >= to) continue;
        novh++;
        ovh_ns += o->end - o->start;
    }
    for (size_t i = 0; i < whole.napi; i++) {
        const tp_gpu_op *a = &whole.api[i];
        if (strcmp(a->name, "cudaDeviceSynchronize")) continue;
        across += (a->start < from && a->end > from) + (a->start < to && a->end > to);
        if (a->start < from || a->start >= to) continue;
        nsync++;
        sync_ns += a->end - a->start;
    }
    assert_true(across >= 2);
    cJSON *rep = report_bounded(&run, 1000);
    assert_string_equal(jstr(rep, "ranks.0.gpu.per"), "span");
    jnear(jnum(rep, "ranks.0.gpu.devices.0.kernels"), (double)kernels, "kernels, no length too");
    jnear(jnum(rep, "ranks.0.gpu.top_kernels.1.count_per_unit"), (double)zero, "zero_kernel");
    assert_string_equal(jstr(rep, "ranks.0.gpu.top_kernels.1.name"), "zero_kernel");
    jnear(jnum(rep, "ranks.0.gpu.cupti_overhead.records"), (double)novh, "overhead records");
    jnear(jnum(rep, "ranks.0.gpu.cupti_overhead.ms"), (double)ovh_ns / 1e6, "overhead ms");
    jnear(jnum(rep, "ranks.0.gpu.host_syncs"), (double)nsync, "host syncs");
    jnear(jnum(rep, "ranks.0.gpu.host_sync_blocked_ms"), (double)sync_ns / 1e6, "blocked");
    cJSON_Delete(rep);
    tp_process_free(&whole);
    tp_process_free(&b);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* Ranks whose exposure windows differ (a stepless rank's span next to one with steps): the
 * run's line says each share is of its rank's own window, not of the run, which neither is. */
static void test_mixed_windows_text(void **state) {
    (void)state;
    tp_comm_run_result c;
    memset(&c, 0, sizeof c);
    c.present = 1;
    c.has_summary = 1;
    c.per = "mixed";
    c.nexposed = 2;
    c.mean_exposed_share = 0.149;
    c.worst_rank = 1;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    tp_comm_run_text(f, &c, "", "");
    fclose(f);
    report_has(text, "exposed communication: mean 14.9 % of each rank's window (its step, "
                     "span or run) over 2 ranks");
    report_lacks(text, "of the run");
    free(text);
}

/* No step, the capture paused over iterations 95-104 (another CUPTI client), inside the span:
 * the busy share and the exposure are of the span's captured parts, as the step breakdown's
 * one window and the headline are (a pause is no idle GPU, nor exposed time). */
static void test_no_steps_paused(void **state) {
    (void)state;
    char dir[512];
    g_steps = 0;
    g_pause_from = 95;
    g_pause_to = 105;
    write_run(dir, sizeof dir, even4, 0);
    g_steps = NSTEPS;
    g_pause_from = g_pause_to = 0;
    tp_run run;
    load_slim(dir, &run);
    tp_process b;
    assert_int_equal(load_bounded(&run, &b, 400), TPROF_OK);
    uint64_t from = b.gpu_window_from, to = b.gpu_window_to, p0 = ITER_T(95), p1 = ITER_T(105);
    tp_process_free(&b);
    assert_true(from < p0 && p1 < to);
    in_span_want w = span_truth(&run, from, to);
    double held_ms = (double)(to - from - (p1 - p0)) / 1e6;
    double busy = (double)w.busy_ns / 1e6 / held_ms;
    cJSON *rep = report_bounded(&run, 400);
    jnear(jnum(rep, "ranks.0.gpu.devices.0.busy_share"), busy, "busy share of the captured span");
    jnear(jnum(rep, "ranks.0.breakdown.share.busy"), busy, "the breakdown's, the same");
    jnear(jnum(rep, "ranks.0.breakdown.captured_s"), held_ms / 1e3, "breakdown window");
    jnear(jnum(rep, "ranks.0.communication.exposure.window_ms"), held_ms, "exposure window");
    jnear(jnum(rep, "ranks.0.communication.exposure.windows"), 1, "one window");
    jnear(jnum(rep, "ranks.0.communication.exposure.exposed_ms.mean"), (double)w.comm_ns / 1e6,
          "exposed in the span");
    jnear(jnum(rep, "ranks.0.communication.exposure.exposed_share"),
          (double)w.comm_ns / 1e6 / held_ms, "exposed share of the captured span");
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* No step, every compute kernel recorded as running 25 ms, past the next ones on its stream:
 * the load cuts each back to the next one's start, and the last one the span holds to the
 * first record left out after the span (model.h, tp_gpu_fence), so that the span's kernel time
 * is the whole load's, not one kernel's 25 ms more. A compute kernel after each NCCL kernel on
 * its stream: the NCCL kernels held whole after the span are not cut back to that stream's
 * fence, which lies before them, and the communication section is the whole one's. */
static void test_no_steps_long_records(void **state) {
    (void)state;
    char dir[512];
    g_steps = 0;
    g_long = g_side = 1;
    write_run(dir, sizeof dir, even4, 0);
    g_steps = NSTEPS;
    g_long = g_side = 0;
    tp_run run;
    load_slim(dir, &run);
    uint64_t from, to;
    check_span(&run, 400, &from, &to);
    in_span_want w = span_truth(&run, from, to);
    cJSON *rep = report_bounded(&run, 400);
    jnear(jnum(rep, "ranks.0.gpu.devices.0.kernels"), (double)w.kernels, "kernels");
    jnear(jnum(rep, "ranks.0.gpu.devices.0.kernel_ms"), (double)w.kernel_ns / 1e6, "kernel ms");
    cJSON *whole = report_bounded(&run, SIZE_MAX);
    comm_same(whole, rep);
    cJSON_Delete(whole);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* Steps only in the first quarter of the run, GPU work all along: the span first placed at
 * the middle of the records lies outside the measured steps, so the section is read again
 * with the span among the records of the steps, and its figures are theirs. */
static void test_steps_at_the_start(void **state) {
    (void)state;
    char dir[512];
    g_steps = 50;
    write_run(dir, sizeof dir, even4, 0);
    tp_run run;
    load_slim(dir, &run);
    cJSON *rep = report_bounded(&run, 400);
    double from = jnum(rep, "ranks.0.gpu_capture.gpu_records_bound.from_s") * 1e9 + (double)T0;
    double to = jnum(rep, "ranks.0.gpu_capture.gpu_records_bound.to_s") * 1e9 + (double)T0;
    assert_true(to <= (double)(T0 + MS + 50 * 10 * MS) + 1e6); /* within the steps */
    size_t first, want = steps_inside((uint64_t)from, (uint64_t)to, &first);
    jnear(jnum(rep, "ranks.0.gpu_capture.captured_steps"), (double)want, "captured");
    jnear(jnum(rep, "ranks.0.gpu.devices.0.busy_share"), 0.14, "busy");
    jnear(jnum(rep, "ranks.0.gpu.devices.0.kernels"), 5, "kernels per step");
    g_steps = NSTEPS;
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* Communication kernels alone over the bound: they are all kept, nothing is left out, and the
 * rank reads as a whole one (no span said). */
static uint32_t none(uint32_t k) { (void)k; return 0; }

static void test_nothing_left_out(void **state) {
    (void)state;
    char dir[512];
    write_run(dir, sizeof dir, none, 0);
    tp_run run;
    load_slim(dir, &run);
    tp_process b;
    assert_int_equal(load_bounded(&run, &b, 100), TPROF_OK);
    assert_int_equal(b.gpu_window_to, 0);
    assert_int_equal(b.ngpu, NSTEPS);
    tp_process_free(&b);
    cJSON *rep = report_bounded(&run, 100);
    assert_null(jget(rep, "ranks.0.gpu_capture"));
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* A bound under the records one sample of their start times stands for (1800 records, 8 a
 * sample, bound 5): the span is a gap between samples wide, cut to the bound as the records
 * come, never one nanosecond that holds one record. */
static void test_bound_under_a_sample(void **state) {
    (void)state;
    char dir[512];
    write_run(dir, sizeof dir, even4, 0);
    tp_run run;
    load_slim(dir, &run);
    assert_true(run.procs[0].gpu_stride >= 8);
    uint64_t from, to;
    check_span(&run, 5, &from, &to);
    tp_process b;
    assert_int_equal(load_bounded(&run, &b, 5), TPROF_OK);
    assert_true(b.gpu_held >= 4 && b.gpu_held <= 5);
    tp_process_free(&b);
    /* the report's span (read again from the first measured step) is under 10 ms: its ends
     * are printed to the microsecond, apart */
    cJSON *rep = report_bounded(&run, 5);
    double fs = jnum(rep, "ranks.0.gpu_capture.gpu_records_bound.from_s"),
           ts = jnum(rep, "ranks.0.gpu_capture.gpu_records_bound.to_s");
    cJSON_Delete(rep);
    assert_true(ts > fs && ts - fs < 0.01);
    char *text = text_bounded(&run, 5), want[96];
    snprintf(want, sizeof want, "those that began %.6f-%.6f s into the process", fs, ts);
    report_has(text, want);
    free(text);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* 5 s of GPU work between steps 99 and 100 (an evaluation pass) holds the middle of the
 * records: the span placed there holds no step, so the section is read again from the first
 * measured step on, as many records as fit. */
static void test_gap_between_steps(void **state) {
    (void)state;
    char dir[512];
    g_gap = 1;
    write_run(dir, sizeof dir, even4, 0);
    g_gap = 0;
    tp_run run;
    load_slim(dir, &run);
    cJSON *rep = report_bounded(&run, 400);
    /* from step 2: the first measured step is left out, the warm-up preceding it */
    jnear(jnum(rep, "ranks.0.gpu_capture.steps.0.0"), 2, "from the second measured step");
    assert_true(jnum(rep, "ranks.0.gpu_capture.captured_steps") >= 30);
    assert_true(jnum(rep, "ranks.0.gpu_capture.gpu_records_bound.held") <= 400);
    jnear(jnum(rep, "ranks.0.gpu.devices.0.busy_share"), 0.14, "busy");
    jnear(jnum(rep, "ranks.0.gpu.devices.0.kernels"), 5, "kernels per step");
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* A heavy warm-up step (500 kernels) and three measured steps: the span first placed in the
 * warm-up holds no measured step; read again from the first measured step on, never cut, it
 * holds to the process's end, and the last two steps are captured (the first is left out:
 * the warm-up precedes it), the last whole though the span starts from a record's time. */
static uint32_t heavy_warmup(uint32_t k) { return k == 0 ? 500 : 4; }

static void test_heavy_warmup(void **state) {
    (void)state;
    char dir[512];
    g_nsteps = 4;
    write_run(dir, sizeof dir, heavy_warmup, 0);
    g_nsteps = NSTEPS;
    tp_run run;
    load_slim(dir, &run);
    cJSON *rep = report_bounded(&run, 400), *whole = report_bounded(&run, SIZE_MAX);
    jnear(jnum(rep, "ranks.0.gpu_capture.captured_steps"), 2, "steps 2 and 3");
    jnear(jnum(rep, "ranks.0.gpu_capture.steps.0.0"), 2, "from step 2");
    jnear(jnum(rep, "ranks.0.gpu.devices.0.busy_share"), 0.14, "busy");
    jnear(jnum(whole, "ranks.0.gpu.devices.0.busy_share"), 0.14, "busy, whole");
    jnear(jnum(rep, "ranks.0.gpu.devices.0.kernels"), 5, "kernels per step");
    cJSON_Delete(rep);
    cJSON_Delete(whole);
    tp_run_free(&run);
    synth_rmtree(dir);
    /* one measured step after it: a step precedes the span read from it, so no step is held
     * whole, and the headline says that it is the bound, not the capture, that left it out */
    g_nsteps = 2;
    write_run(dir, sizeof dir, heavy_warmup, 0);
    g_nsteps = NSTEPS;
    load_slim(dir, &run);
    rep = report_bounded(&run, 400);
    jnear(jnum(rep, "ranks.0.gpu_capture.captured_steps"), 0, "no step held whole");
    cJSON_Delete(rep);
    char *text = text_bounded(&run, 400);
    report_has(text, "no measured step's GPU records held whole (--gpu-records) (rank 0)");
    report_lacks(text, "GPU activity not captured in any measured step");
    free(text);
    tp_run_free(&run);
    synth_rmtree(dir);
}

static void test_under_the_bound(void **state) {
    (void)state;
    char dir[512];
    write_run(dir, sizeof dir, even4, 0);
    tp_run run;
    load_slim(dir, &run);
    /* 1800 records: a bound of 1800 holds them all, the default too */
    cJSON *whole = report_bounded(&run, SIZE_MAX), *at = report_bounded(&run, 1800);
    cJSON *def = report_bounded(&run, 0);
    cJSON *rw = cJSON_Duplicate(jget(whole, "ranks"), 1);
    cJSON *ra = cJSON_Duplicate(jget(at, "ranks"), 1), *rd = cJSON_Duplicate(jget(def, "ranks"), 1);
    assert_true(cJSON_Compare(rw, ra, 1));
    assert_true(cJSON_Compare(rw, rd, 1));
    assert_null(jget(at, "ranks.0.gpu_capture"));
    cJSON_Delete(rw);
    cJSON_Delete(ra);
    cJSON_Delete(rd);
    cJSON_Delete(whole);
    cJSON_Delete(at);
    cJSON_Delete(def);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* A CUDA graph's nodes past the span's end: a stepless run whose iterations launch graph 7
 * (four kernels on stream 7, each recorded as running 25 ms, past the iteration), then a plain
 * kernel at 9 ms on the same stream. A whole load cuts each node back to that plain kernel's
 * start (a graph's nodes do not bound each other). The span, from iteration 100 and 70 records
 * at most, ends at iteration 110's second node: the first left out there is a node of the
 * graph the last one held belongs to, so it is the plain kernel after them, left out too,
 * that cuts that last node back, to the whole load's 8 ms. */
static void test_graph_nodes_past_the_span(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "gbgraph"), 0);
    synth_file *f = synth_open(dir, "h", 50, RT0, T0);
    synth_thread(f, 2, 51);
    synth_rank(f, 0, 1);
    synth_meta(f, "capability.cupti", "activity capture on: 8 kinds");
    for (uint32_t k = 0, corr = 1; k < 200; k++, corr += 2) {
        uint64_t t = T0 + MS + (uint64_t)k * 10 * MS;
        synth_api(f, 2, t + 5 * US, t + 15 * US, 51, 311, corr, "cudaGraphLaunch");
        for (uint64_t j = 0; j < 4; j++) {
            tprof_pl_gpu pl = {t + MS + j * 300 * US + 25 * MS, 0, 0, 7, corr, 0, 51, 7};
            synth_raw(f, 2, TPROF_REC_GPU_KERNEL, TPROF_INLINE_NAME, t + MS + j * 300 * US, &pl,
                      sizeof pl, "node", 5);
        }
        synth_kernel(f, 2, t + 9 * MS, t + 9100 * US, 0, 7, corr + 1, "plain");
        synth_flush(f);
    }
    synth_end_of_file(f, T0 + 2 * MS + 200 * 10 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_slim(dir, &run);
    tp_gpu_bound bound = {70, T0 + MS + 100 * 10 * MS};
    tp_process b;
    assert_int_equal(tp_process_load_bounded(&run, &run.procs[0], &b, NULL, &bound), TPROF_OK);
    uint64_t t110 = T0 + MS + 110 * 10 * MS;
    assert_int_equal(b.gpu_window_to, t110 + MS + 300 * US); /* the second node's start */
    in_span_want w = span_truth(&run, b.gpu_window_from, b.gpu_window_to);
    size_t kernels = 0;
    uint64_t kernel_ns = 0, last_ns = 0;
    for (size_t i = 0; i < b.ngpu; i++) {
        kernels++;
        kernel_ns += b.gpu[i].end - b.gpu[i].start;
        if (b.gpu[i].start == t110 + MS) last_ns = b.gpu[i].end - b.gpu[i].start;
    }
    assert_int_equal(last_ns, 8 * MS);
    assert_int_equal(kernels, w.kernels);
    assert_int_equal(kernel_ns, w.kernel_ns);
    tp_process_free(&b);
    tp_run_free(&run);
    synth_rmtree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_even_steps),
        cmocka_unit_test(test_dense_middle_moves_the_end),
        cmocka_unit_test(test_window_where_the_records_are),
        cmocka_unit_test(test_no_steps),
        cmocka_unit_test(test_no_steps_paused),
        cmocka_unit_test(test_no_steps_long_records),
        cmocka_unit_test(test_no_steps_edges),
        cmocka_unit_test(test_graph_nodes_past_the_span),
        cmocka_unit_test(test_mixed_windows_text),
        cmocka_unit_test(test_steps_at_the_start),
        cmocka_unit_test(test_nothing_left_out),
        cmocka_unit_test(test_bound_under_a_sample),
        cmocka_unit_test(test_gap_between_steps),
        cmocka_unit_test(test_heavy_warmup),
        cmocka_unit_test(test_under_the_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
