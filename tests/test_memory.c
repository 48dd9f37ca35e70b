/*
 * test_memory.c — the memory analysis (src/analysis/memory.c, memory_rules.c) on synthetic
 * runs (tests/synth.c) holding the records of the memory contract (docs/report-json.md
 * "Memory"), with known answers:
 *  - a job of 8 API steps (step 0 warm-up) with trainprof.torch's phases data [0,10) ms,
 *    forward [10,40), backward [40,80), optimizer [80,95) of each 100 ms step and a sample
 *    of the caching allocator at each phase boundary and after the step's end. Allocated
 *    at the step's start is B(k); the forward leaves B+7 GiB live, the backward peaks
 *    inside at B+8.5 GiB (only max_memory_allocated sees it) and ends at B+1 GiB;
 *  - flat (B = 1 GiB every step): step 0's peak is exact, 9.5 GiB, set in the backward;
 *    every later step's only bounded ("≤ 9.5 GiB": the allocator's peak did not change);
 *    no leak finding;
 *  - leaking (B(k) = 1 GiB + k x 64 MiB): every step's peak exact, B(k) + 8.5 GiB, in the
 *    backward; the leak finding with +384 MiB over the 7 measured steps; a leak that comes
 *    back down once is none;
 *  - reserved 10 GiB on a capacity of 10 GiB / 0.91 is the memory_peak finding at 91 %,
 *    and none at 89 %; reserved 16 GiB gives fragmentation 1 - 8/16 = 0.5 at the sampled
 *    peak (the forward's end), with its inactive split bytes, and the finding;
 *  - allocation retries 2 give the retries finding;
 *  - an OOM post-mortem (memory.oom.* and the cuda.oom mark) in a process that died right
 *    after (no end record) leads the headline with its figures and the snapshot's command;
 *  - trainprof diff compares the peaks per device: reserved 10 GiB against 12 GiB;
 *  - module detail (trainprof.torch's "nn.Module: NAME" ranges with a sample at each end,
 *    in steps 0 and 1 only): a peak of B+9 GiB inside blocks.0.mlp (nested in blocks.0)
 *    names that module for step 0's exact peak; step 1's peak is only bounded, its largest
 *    sample (B+7.5 GiB, at the mlp's end) is named with its module; later steps name none;
 *    the OOM's module (memory.oom.module) is in its headline; a largest sample taken as a
 *    module begins is named after the module around it (Net), not the one beginning.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/diff.h"
#include "analysis/model.h"
#include "analysis/report.h"
#include "format/format.h"
#include "json_path.h"
#include "report_text.h"
#include "synth.h"

static const uint64_t T0 = 1000000000ull, US = 1000ull, MS = 1000000ull;
#define RT0 1700000000000000000ull
static const double GIB = 1073741824.0, MIB = 1048576.0;

typedef struct job {
    int leak;            /* B(k) = 1 GiB + k x 64 MiB */
    int dip_at;          /* > 0: B of this step back at 1 GiB (the leak comes down) */
    double reserved;     /* bytes, every sample */
    double capacity;     /* cuda.0.memory_total_bytes; 0: none */
    double retries_last; /* cumulative retries at the last sample */
    int oom;             /* post-mortem after step 5's backward, no end record; 1 with the
                          * allocation history on, 2 without */
    int cuda_fail;       /* a failed cudaMalloc seen by CUPTI in step 2's forward, then the
                          * run goes on (the caching allocator retried) */
    int modules;         /* module ranges and samples in the forward of steps 0 and 1; 2: inside
                          * a "Net" range, and step 1's largest sample as blocks.0 begins */
} job;

static double base(const job *j, uint32_t k) {
    if (j->dip_at > 0 && (int)k == j->dip_at) return GIB;
    return GIB + (j->leak ? k * 64 * MIB : 0);
}

/* One sample: every counter of the contract, back to back 1 us apart. */
static void sample(synth_file *f, uint64_t ts, double alloc, double maxa, const job *j,
                   double retries) {
    synth_counter(f, 1, ts, "cuda.memory_allocated_bytes", alloc);
    synth_counter(f, 1, ts + 1 * US, "cuda.memory_reserved_bytes", j->reserved);
    synth_counter(f, 1, ts + 2 * US, "cuda.max_memory_allocated_bytes", maxa);
    synth_counter(f, 1, ts + 3 * US, "cuda.max_memory_reserved_bytes", j->reserved);
    synth_counter(f, 1, ts + 4 * US, "cuda.memory_inactive_split_bytes", 3 * GIB);
    synth_counter(f, 1, ts + 5 * US, "cuda.memory_alloc_retries", retries);
}

static void phase(synth_file *f, uint64_t a, uint64_t b, const char *name) {
    synth_push(f, 1, a, name, 0, 0);
    synth_pop(f, 1, b, 0);
}

static void oom_meta(synth_file *f, int history) {
    if (history) synth_meta(f, "memory.history_entries", "1000");
    synth_meta(f, "memory.oom.source", "torch");
    synth_meta(f, "memory.oom.request_bytes", "2147483648");
    synth_meta(f, "memory.oom.device", "0");
    synth_meta(f, "memory.oom.free_bytes", "1610612736");
    synth_meta(f, "memory.oom.total_bytes", "85899345920");
    synth_meta(f, "memory.oom.allocated_bytes", "75161927680");
    synth_meta(f, "memory.oom.reserved_bytes", "81604378624");
    synth_meta(f, "memory.oom.largest_free_block_bytes", "1073741824");
    synth_meta(f, "memory.oom.step", "5");
    synth_meta(f, "memory.oom.phase", "backward");
    synth_meta(f, "memory.oom.module", "decoder.layers.3");
    synth_meta(f, "memory.oom.snapshot", "h-50.oom.pickle");
    synth_meta(f, "memory.oom.count", "1");
    synth_meta(f, "memory.oom.top",
               "[{\"bytes\":4294967296,\"stream\":0,\"frames\":\"train.py:42 forward; "
               "model.py:7 attn\"},{\"bytes\":1073741824,\"stream\":7,\"frames\":\"\"}]");
}

static void mem_run(char *dir, size_t n, const job *j) {
    assert_int_equal(synth_tmpdir(dir, n, "mem"), 0);
    synth_file *f = synth_open(dir, "h", 50, RT0, T0);
    synth_thread(f, 1, 50);
    synth_rank(f, 0, 1);
    synth_meta(f, "torch.cuda.device", "0");
    if (j->capacity > 0) {
        char c[64];
        snprintf(c, sizeof c, "%.0f", j->capacity);
        synth_meta(f, "cuda.0.memory_total_bytes", c);
    }
    double maxa = GIB; /* the allocator's peak before the first step: the model's weights */
    uint64_t t = T0;
    uint32_t steps = j->oom ? 6 : 8;
    for (uint32_t k = 0; k < steps; k++) {
        double B = base(j, k), r = k + 1 == steps ? j->retries_last : 0;
        synth_step_begin(f, 1, t, k);
        phase(f, t, t + 10 * MS, "data");
        sample(f, t + 10 * MS, B, maxa, j, r);
        if (j->modules && k < 2) { /* the forward with its modules, nested as recorded */
            synth_push(f, 1, t + 10 * MS + 10 * US, "forward", 0, 0);
            sample(f, t + 10 * MS + 20 * US, B, maxa, j, r);
            if (j->modules == 2) synth_push(f, 1, t + 10 * MS + 30 * US, "nn.Module: Net", 0, 0);
            synth_push(f, 1, t + 11 * MS, "nn.Module: embed", 0, 0);
            sample(f, t + 11 * MS + 10 * US, B, maxa, j, r);
            sample(f, t + 14 * MS, B + GIB, maxa, j, r);
            synth_pop(f, 1, t + 14 * MS + 10 * US, 0);
            synth_push(f, 1, t + 15 * MS, "nn.Module: blocks.0", 0, 0);
            /* modules 2: Net's own code left 8 GiB live before blocks.0 began (then freed) */
            sample(f, t + 15 * MS + 10 * US, j->modules == 2 && k == 1 ? B + 8 * GIB : B + GIB,
                   maxa, j, r);
            synth_push(f, 1, t + 20 * MS, "nn.Module: blocks.0.mlp", 0, 0);
            sample(f, t + 20 * MS + 10 * US, B + 2 * GIB, maxa, j, r);
            if (B + 9 * GIB > maxa) maxa = B + 9 * GIB;
            sample(f, t + 28 * MS, B + 7.5 * GIB, maxa, j, r);
            synth_pop(f, 1, t + 28 * MS + 10 * US, 0);
            sample(f, t + 29 * MS, B + 7 * GIB, maxa, j, r);
            synth_pop(f, 1, t + 29 * MS + 10 * US, 0);
            if (j->modules == 2) synth_pop(f, 1, t + 30 * MS, 0);
            synth_pop(f, 1, t + 40 * MS, 0);
        } else {
            phase(f, t + 10 * MS + 10 * US, t + 40 * MS, "forward");
            sample(f, t + 10 * MS + 20 * US, B, maxa, j, r);
        }
        if (j->cuda_fail && k == 2) {
            synth_mark(f, 1, t + 20 * MS, "cuda.oom", 0, 0);
            synth_meta(f, "memory.oom.source", "cuda");
            synth_meta(f, "memory.oom.request_bytes", "2147483648");
            synth_meta(f, "memory.oom.count", "1");
        }
        if (B + 7 * GIB > maxa) maxa = B + 7 * GIB;
        sample(f, t + 40 * MS, B + 7 * GIB, maxa, j, r);
        phase(f, t + 40 * MS + 10 * US, t + 80 * MS, "backward");
        sample(f, t + 40 * MS + 20 * US, B + 7 * GIB, maxa, j, r);
        if (j->oom && k == 5) {
            synth_mark(f, 1, t + 60 * MS, "cuda.oom", 0, 0);
            sample(f, t + 60 * MS + 10 * US, 70 * GIB, 70 * GIB, j, r);
            oom_meta(f, j->oom == 1);
            break; /* the process dies right after: no end record */
        }
        if (B + 8.5 * GIB > maxa) maxa = B + 8.5 * GIB;
        sample(f, t + 80 * MS, B + GIB, maxa, j, r);
        phase(f, t + 80 * MS + 10 * US, t + 95 * MS, "optimizer");
        sample(f, t + 80 * MS + 20 * US, B + GIB, maxa, j, r);
        sample(f, t + 95 * MS, B + GIB, maxa, j, r);
        synth_step_end(f, 1, t + 100 * MS, k);
        sample(f, t + 100 * MS + 10 * US, B, maxa, j, r);
        t += 101 * MS;
    }
    if (!j->oom) synth_end_of_file(f, t + MS, 0);
    assert_int_equal(synth_close(f), 0);
}

static cJSON *report_of(const job *j, tp_run *run, char *dir, size_t n) {
    mem_run(dir, n, j);
    load_run(dir, run);
    return default_report(run);
}

/* ------------------------------------------------------------------ peaks and phases */

static void test_flat_peaks_bounded(void **state) {
    (void)state;
    char dir[512];
    tp_run run;
    job j = {.reserved = 10 * GIB, .capacity = 80 * GIB};
    cJSON *rep = report_of(&j, &run, dir, sizeof dir);
    jnear(jnum(rep, "ranks.0.memory.samples"), 8 * 8, "samples");
    jnear(jnum(rep, "ranks.0.memory.device"), 0, "device");
    /* step 0: the allocator's peak rose inside the backward: exact */
    jnear(jnum(rep, "ranks.0.memory.steps.0.step"), 0, "step 0");
    jnear(jnum(rep, "ranks.0.memory.steps.0.peak_allocated_bytes"), 9.5 * GIB, "step 0 peak");
    assert_string_equal(jstr(rep, "ranks.0.memory.steps.0.peak_allocated_bound"), "exact");
    assert_string_equal(jstr(rep, "ranks.0.memory.steps.0.peak_phase"), "backward");
    jnear(jnum(rep, "ranks.0.memory.steps.0.phases.forward.peak_allocated_bytes"), 8 * GIB,
         "step 0 forward peak");
    assert_string_equal(jstr(rep, "ranks.0.memory.steps.0.phases.forward.bound"), "exact");
    jnear(jnum(rep, "ranks.0.memory.steps.0.start_allocated_bytes"), GIB, "step 0 start");
    /* later steps: the reading did not change: only bounded, never exact */
    for (int k = 1; k < 8; k++) {
        char p[96];
        snprintf(p, sizeof p, "ranks.0.memory.steps.%d.peak_allocated_bound", k);
        assert_string_equal(jstr(rep, p), "at_most");
        snprintf(p, sizeof p, "ranks.0.memory.steps.%d.peak_allocated_bytes", k);
        jnear(jnum(rep, p), 9.5 * GIB, p);
        snprintf(p, sizeof p, "ranks.0.memory.steps.%d.peak_phase", k);
        assert_null(jget(rep, p));
    }
    /* over the run: the largest reading, exact; headroom against the capacity */
    jnear(jnum(rep, "ranks.0.memory.peak_allocated_bytes"), 9.5 * GIB, "run peak");
    assert_string_equal(jstr(rep, "ranks.0.memory.peak_allocated_bound"), "exact");
    jnear(jnum(rep, "ranks.0.memory.peak_reserved_bytes"), 10 * GIB, "run reserved");
    jnear(jnum(rep, "ranks.0.memory.headroom_bytes"), 70 * GIB, "headroom");
    jnear(jnum(rep, "ranks.0.memory.peak_reserved_share"), 0.125, "reserved share");
    /* the sampled peak is the forward's end: 8 of 10 GiB */
    jnear(jnum(rep, "ranks.0.memory.fragmentation.share"), 0.2, "fragmentation");
    jnear(jnum(rep, "ranks.0.memory.leak_series.steps"), 7, "leak series steps");
    jnear(jnum(rep, "ranks.0.memory.leak_series.growth_bytes"), 0, "flat growth");
    assert_null(jfinding(rep, "memory_leak"));
    assert_null(jfinding(rep, "memory_peak"));
    assert_null(jfinding(rep, "memory_fragmentation"));
    assert_null(jfinding(rep, "memory_alloc_retries"));
    char *text = report_text(&run, NULL);
    report_has(text, "peak allocated 9.50 GiB");
    report_has(text, "≤ 9.50 GiB");
    report_has(text, "fragmentation at the sampled peak 20.0 %");
    free(text);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

static void test_leak(void **state) {
    (void)state;
    char dir[512];
    tp_run run;
    job j = {.leak = 1, .reserved = 20 * GIB, .capacity = 80 * GIB};
    cJSON *rep = report_of(&j, &run, dir, sizeof dir);
    for (int k = 0; k < 8; k++) {
        char p[96];
        snprintf(p, sizeof p, "ranks.0.memory.steps.%d.peak_allocated_bytes", k);
        jnear(jnum(rep, p), GIB + k * 64 * MIB + 8.5 * GIB, p);
        snprintf(p, sizeof p, "ranks.0.memory.steps.%d.peak_allocated_bound", k);
        assert_string_equal(jstr(rep, p), "exact");
        snprintf(p, sizeof p, "ranks.0.memory.steps.%d.peak_phase", k);
        assert_string_equal(jstr(rep, p), "backward");
        snprintf(p, sizeof p, "ranks.0.memory.steps.%d.start_allocated_bytes", k);
        jnear(jnum(rep, p), GIB + k * 64 * MIB, p);
    }
    const cJSON *f = jfinding(rep, "memory_leak");
    assert_non_null(f);
    jnear(jnum(f, "evidence.growth_bytes"), 384 * MIB, "growth");
    jnear(jnum(f, "evidence.first_step"), 1, "first step");
    jnear(jnum(f, "evidence.last_step"), 7, "last step");
    jnear(jnum(f, "evidence.steps"), 7, "steps");
    jnear(jnum(f, "evidence.rises"), 6, "rises");
    /* the same series comes from a job whose batch (or sequence) grows each step while it
     * holds the last step's outputs: the message names both causes */
    report_has(jstr(f, "message"), "something keeps tensors alive across steps, or what the "
                                 "step keeps grows (a batch or sequence that grows each step)");
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
    /* the same growth that comes back down once is no leak */
    job d = {.leak = 1, .dip_at = 4, .reserved = 20 * GIB, .capacity = 80 * GIB};
    rep = report_of(&d, &run, dir, sizeof dir);
    assert_false(cJSON_IsTrue(jget(rep, "ranks.0.memory.leak_series.never_down")));
    assert_null(jfinding(rep, "memory_leak"));
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* ------------------------------------------------------------------ thresholds */

static void test_peak_threshold(void **state) {
    (void)state;
    char dir[512];
    tp_run run;
    job j = {.reserved = 10 * GIB, .capacity = 10 * GIB / 0.91};
    cJSON *rep = report_of(&j, &run, dir, sizeof dir);
    const cJSON *f = jfinding(rep, "memory_peak");
    assert_non_null(f);
    jnear(jnum(f, "evidence.peak_share"), 0.91, "91 %");
    jnear(jnum(f, "evidence.peak_bytes"), 10 * GIB, "peak bytes");
    assert_string_equal(jstr(f, "evidence.source"), "allocator");
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
    job k = {.reserved = 10 * GIB, .capacity = 10 * GIB / 0.89};
    rep = report_of(&k, &run, dir, sizeof dir);
    jnear(jnum(rep, "ranks.0.memory.peak_reserved_share"), 0.89, "89 %");
    assert_null(jfinding(rep, "memory_peak"));
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

static void test_fragmentation_and_retries(void **state) {
    (void)state;
    char dir[512];
    tp_run run;
    job j = {.reserved = 16 * GIB, .capacity = 80 * GIB, .retries_last = 2};
    cJSON *rep = report_of(&j, &run, dir, sizeof dir);
    jnear(jnum(rep, "ranks.0.memory.fragmentation.share"), 0.5, "fragmentation");
    jnear(jnum(rep, "ranks.0.memory.fragmentation.allocated_bytes"), 8 * GIB, "at the peak");
    jnear(jnum(rep, "ranks.0.memory.fragmentation.inactive_split_bytes"), 3 * GIB, "split");
    jnear(jnum(rep, "ranks.0.memory.alloc_retries"), 2, "retries");
    const cJSON *f = jfinding(rep, "memory_fragmentation");
    assert_non_null(f);
    jnear(jnum(f, "evidence.fragmentation"), 0.5, "finding fragmentation");
    jnear(jnum(f, "evidence.reserved_bytes"), 16 * GIB, "finding reserved");
    f = jfinding(rep, "memory_alloc_retries");
    assert_non_null(f);
    jnear(jnum(f, "evidence.alloc_retries"), 2, "finding retries");
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* ------------------------------------------------------------------ OOM */

/* A failed device allocation the program carried on from (PyTorch's caching allocator frees
 * its cache and retries): no out_of_memory finding, no post-mortem, said as such. */
static void test_failed_allocation_carried_on(void **state) {
    (void)state;
    char dir[512];
    tp_run run;
    job j = {.reserved = 16 * GIB, .capacity = 80 * GIB, .cuda_fail = 1};
    cJSON *rep = report_of(&j, &run, dir, sizeof dir);
    assert_null(jfinding(rep, "out_of_memory"));
    assert_true(cJSON_IsTrue(jget(rep, "ranks.0.memory.oom.recovered")));
    jnear(jnum(rep, "ranks.0.memory.oom.steps_after"), 5, "steps after"); /* steps 3-7 */
    cJSON_Delete(rep);
    char *text = report_text(&run, NULL);
    report_has(text, "a device allocation failed at ");
    report_has(text, "and the program carried on for 5 more steps: not an out-of-memory "
                   "end");
    assert_null(strstr(text, "OUT OF MEMORY"));
    free(text);
    tp_run_free(&run);
    synth_rmtree(dir);
}

static void test_oom_headline(void **state) {
    (void)state;
    char dir[512];
    tp_run run;
    job j = {.reserved = 76 * GIB, .capacity = 80 * GIB, .oom = 1};
    cJSON *rep = report_of(&j, &run, dir, sizeof dir);
    assert_string_equal(jstr(rep, "headline.finding"), "out_of_memory");
    assert_string_equal(jstr(rep, "headline.severity"), "critical");
    const char *l0 = jstr(rep, "headline.lines.0");
    if (strncmp(l0, "the job ran out of memory", 25) != 0) fail_msg("line 0: %s", l0);
    report_has(l0, "step 5 (backward, in decoder.layers.3): request 2.00 GiB, 1.50 GiB free of "
                   "80.00 GiB; allocated 70.00 GiB, reserved 76.00 GiB, largest free block "
                   "1.00 GiB");
    report_has(jstr(rep, "headline.lines.1"),
             "python -m torch.cuda._memory_viz trace_plot h-50.oom.pickle -o out.html");
    jnear(jnum(rep, "ranks.0.memory.oom.request_bytes"), 2 * GIB, "request");
    jnear(jnum(rep, "ranks.0.memory.oom.free_bytes"), 1.5 * GIB, "free");
    jnear(jnum(rep, "ranks.0.memory.oom.step"), 5, "step");
    /* what grew: 70 GiB allocated at the OOM, 1 GiB at step 4's first sample */
    jnear(jnum(rep, "ranks.0.memory.oom.growth.since_step"), 4, "growth since");
    jnear(jnum(rep, "ranks.0.memory.oom.growth.from_bytes"), GIB, "growth from");
    jnear(jnum(rep, "ranks.0.memory.oom.growth.bytes"), 69 * GIB, "growth");
    assert_string_equal(jstr(rep, "ranks.0.memory.oom.phase"), "backward");
    assert_string_equal(jstr(rep, "ranks.0.memory.oom.module"), "decoder.layers.3");
    /* the cuda.oom mark: step 5 starts at 5 x 101 ms, the mark 60 ms into it */
    jnear(jnum(rep, "ranks.0.memory.oom.at_s"), 0.565, "at");
    jnear(jnum(rep, "ranks.0.memory.oom.top.0.bytes"), 4 * GIB, "top 0");
    assert_string_equal(jstr(rep, "ranks.0.memory.oom.top.0.frames"),
                        "train.py:42 forward; model.py:7 attn");
    jnear(jnum(rep, "ranks.0.memory.oom.top.1.stream"), 7, "top 1 stream");
    /* step 5 never ended: the OOM's sample is no part of step 4, which keeps its own peak */
    jnear(jnum(rep, "ranks.0.memory.steps.4.step"), 4, "last step");
    jnear(jnum(rep, "ranks.0.memory.steps.4.peak_allocated_bytes"), 9.5 * GIB, "step 4 peak");
    assert_null(jget(rep, "ranks.0.memory.steps.5"));
    char *text = report_text(&run, NULL);
    report_has(text, "OUT OF MEMORY (torch, device 0, at 0.565 s)");
    report_has(text, "largest live allocations:");
    report_has(text, "allocated +69.00 GiB since step 4 began (1.00 GiB then)");
    report_has(text, "train.py:42 forward; model.py:7 attn");
    /* history on: the entry without frames was allocated outside Python */
    report_has(text, "(no Python stack: allocated from C++");
    report_lacks(text, "(no history recorded");
    free(text);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
    /* without the history no entry has frames, and the text says how to get them */
    j.oom = 2;
    rep = report_of(&j, &run, dir, sizeof dir);
    text = report_text(&run, NULL);
    report_has(text, "(no history recorded: TRAINPROF_MEMORY_HISTORY)");
    free(text);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* ------------------------------------------------------------------ hostile rank files */

/* Four counters of one sample, back to back. */
static void sample4(synth_file *f, uint64_t ts, double alloc, double resv, double maxa,
                    double maxr) {
    synth_counter(f, 1, ts, "cuda.memory_allocated_bytes", alloc);
    synth_counter(f, 1, ts + 1 * US, "cuda.memory_reserved_bytes", resv);
    synth_counter(f, 1, ts + 2 * US, "cuda.max_memory_allocated_bytes", maxa);
    synth_counter(f, 1, ts + 3 * US, "cuda.max_memory_reserved_bytes", maxr);
}

/* A rank file that contradicts itself: step 1's sample has 12 GiB allocated of 8 GiB reserved
 * (the allocator allocates inside what it reserved), step 2 a negative and a 2^70-byte
 * allocated, the capacity is "inf", the OOM's request negative, its step and device
 * negative, one of its top allocations negative, and its snapshot name a shell command
 * with a path. The figures from the consistent samples stay (fragmentation 1 - 3/4 at step
 * 2's 3 GiB); none of the contradicting values is printed, and no command is built from the
 * name. */
static void test_hostile_values(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "memhostile"), 0);
    synth_file *f = synth_open(dir, "h", 50, RT0, T0);
    synth_thread(f, 1, 50);
    synth_rank(f, 0, 1);
    synth_meta(f, "torch.cuda.device", "0");
    synth_meta(f, "cuda.0.memory_total_bytes", "inf");
    synth_meta(f, "memory.oom.source", "torch");
    synth_meta(f, "memory.oom.request_bytes", "-2147483648");
    synth_meta(f, "memory.oom.total_bytes", "85899345920");
    synth_meta(f, "memory.oom.step", "-3");
    synth_meta(f, "memory.oom.device", "-1");
    synth_meta(f, "memory.oom.phase", "forward");
    synth_meta(f, "memory.oom.snapshot", "../../x; rm -rf ~ #.pickle");
    synth_meta(f, "memory.oom.top", "[{\"bytes\":-5,\"stream\":0,\"frames\":\"neg\"},"
                                    "{\"bytes\":1048576,\"stream\":0,\"frames\":\"ok\"}]");
    const double A[3] = {2 * GIB, 12 * GIB, 3 * GIB}, R[3] = {4 * GIB, 8 * GIB, 4 * GIB};
    uint64_t t = T0;
    for (uint32_t k = 0; k < 3; k++) {
        synth_step_begin(f, 1, t, k);
        sample4(f, t + 10 * MS, A[k], R[k], A[k], R[k]);
        if (k == 2) {
            synth_counter(f, 1, t + 20 * MS, "cuda.memory_allocated_bytes", -1 * GIB);
            synth_counter(f, 1, t + 30 * MS, "cuda.memory_allocated_bytes", 0x1p70);
        }
        synth_step_end(f, 1, t + 90 * MS, k);
        t += 100 * MS;
    }
    synth_end_of_file(f, t, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = default_report(&run);
    jnear(jnum(rep, "ranks.0.memory.samples"), 3, "samples");
    jnear(jnum(rep, "ranks.0.memory.fragmentation.share"), 0.25, "fragmentation");
    jnear(jnum(rep, "ranks.0.memory.fragmentation.allocated_bytes"), 3 * GIB, "at");
    assert_null(jget(rep, "ranks.0.memory.capacity_bytes"));
    assert_null(jget(rep, "ranks.0.memory.oom.request_bytes"));
    assert_null(jget(rep, "ranks.0.memory.oom.step"));
    assert_null(jget(rep, "ranks.0.memory.oom.device"));
    jnear(jnum(rep, "ranks.0.memory.oom.total_bytes"), 80 * GIB, "total");
    jnear(jnum(rep, "ranks.0.memory.oom.top.0.bytes"), MIB, "top 0");
    assert_null(jget(rep, "ranks.0.memory.oom.top.1"));
    assert_null(jget(rep, "ranks.0.memory.oom.snapshot"));
    assert_null(jget(rep, "ranks.0.memory.oom.snapshot_open"));
    assert_true(cJSON_IsTrue(jget(rep, "ranks.0.memory.oom.snapshot_unusable")));
    char *doc = cJSON_Print(rep);
    if (strstr(doc, "rm -rf")) fail_msg("the snapshot name reached the document:\n%s", doc);
    free(doc);
    char *text = report_text(&run, NULL);
    if (strstr(text, "rm -rf") || strstr(text, "trace_plot ..") || strstr(text, "-2.00 GiB") ||
        strstr(text, "-1024.0 MiB") || strstr(text, "step -3"))
        fail_msg("a contradicting value or the name in the text:\n%s", text);
    report_has(text, "OUT OF MEMORY (torch): phase (forward), total 80.00 GiB\n");
    report_has(text, "snapshot: its name in the rank file is not a plain file name; not shown");
    free(text);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* ------------------------------------------------------------------ diff */

/* The row of `key` in the diff's memory section, or NULL. */
static const cJSON *mem_row(const cJSON *d, const char *key) {
    const cJSON *r;
    cJSON_ArrayForEach(r, jget(d, "sections.memory")) {
        if (!strcmp(jstr(r, "key"), key)) return r;
    }
    return NULL;
}

static void test_module_of_peak(void **state) {
    (void)state;
    char dir[512];
    tp_run run;
    job j = {.reserved = 12 * GIB, .capacity = 80 * GIB, .modules = 1};
    cJSON *rep = report_of(&j, &run, dir, sizeof dir);
    /* step 0: the allocator's peak rose inside blocks.0.mlp, which is inside blocks.0 */
    jnear(jnum(rep, "ranks.0.memory.steps.0.peak_allocated_bytes"), 10 * GIB, "step 0 peak");
    assert_string_equal(jstr(rep, "ranks.0.memory.steps.0.peak_allocated_bound"), "exact");
    assert_string_equal(jstr(rep, "ranks.0.memory.steps.0.peak_phase"), "forward");
    assert_string_equal(jstr(rep, "ranks.0.memory.steps.0.peak_module"), "blocks.0.mlp");
    /* step 1: bounded; its largest sample, taken as blocks.0.mlp ended */
    assert_string_equal(jstr(rep, "ranks.0.memory.steps.1.peak_allocated_bound"), "at_most");
    assert_null(jget(rep, "ranks.0.memory.steps.1.peak_module"));
    assert_string_equal(jstr(rep, "ranks.0.memory.steps.1.largest_sample.module"),
                        "blocks.0.mlp");
    jnear(jnum(rep, "ranks.0.memory.steps.1.largest_sample.allocated_bytes"), 8.5 * GIB,
          "step 1 largest sample");
    /* no module ranges in step 2: nothing named */
    assert_null(jget(rep, "ranks.0.memory.steps.2.largest_sample"));
    assert_null(jget(rep, "ranks.0.memory.steps.2.peak_module"));
    char *text = report_text(&run, NULL);
    report_has(text, "peak phase, module");
    report_has(text, "forward, blocks.0.mlp");
    report_has(text, "(largest sample 8.50 GiB in blocks.0.mlp)");
    free(text);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* A largest sample taken as a module begins is its caller's: allocated came to it before
 * blocks.0 ran, in Net's own code */
static void test_module_of_sample(void **state) {
    (void)state;
    char dir[512];
    tp_run run;
    job j = {.reserved = 12 * GIB, .capacity = 80 * GIB, .modules = 2};
    cJSON *rep = report_of(&j, &run, dir, sizeof dir);
    assert_string_equal(jstr(rep, "ranks.0.memory.steps.0.peak_module"), "blocks.0.mlp");
    jnear(jnum(rep, "ranks.0.memory.steps.1.largest_sample.allocated_bytes"), 9 * GIB,
          "step 1 largest sample");
    assert_string_equal(jstr(rep, "ranks.0.memory.steps.1.largest_sample.module"), "Net");
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

static void test_diff_peaks(void **state) {
    (void)state;
    char da[512], db[512];
    tp_run ra, rb;
    job a = {.reserved = 10 * GIB, .capacity = 80 * GIB};
    job b = {.leak = 1, .reserved = 12 * GIB, .capacity = 80 * GIB};
    cJSON *ja = report_of(&a, &ra, da, sizeof da), *jb = report_of(&b, &rb, db, sizeof db);
    tp_diff_side sa = {"A", ja, &ra, NULL}, sb = {"B", jb, &rb, NULL};
    cJSON *d = tp_diff_build(&sa, &sb, NULL);
    assert_non_null(d);
    const cJSON *r = mem_row(d, "rank 0 GPU 0 peak reserved");
    assert_non_null(r);
    jnear(jnum(r, "a"), 10, "reserved a");
    jnear(jnum(r, "b"), 12, "reserved b");
    assert_string_equal(jstr(r, "unit"), "GiB");
    assert_true(cJSON_IsTrue(jget(r, "significant")));
    r = mem_row(d, "rank 0 GPU 0 peak allocated");
    assert_non_null(r);
    jnear(jnum(r, "a"), 9.5, "allocated a");
    jnear(jnum(r, "b"), 9.5 + 7 * 64 / 1024.0, "allocated b");
    cJSON_Delete(d);
    cJSON_Delete(ja);
    cJSON_Delete(jb);
    tp_run_free(&ra);
    tp_run_free(&rb);
    synth_rmtree(da);
    synth_rmtree(db);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flat_peaks_bounded), cmocka_unit_test(test_leak),
        cmocka_unit_test(test_peak_threshold),     cmocka_unit_test(test_fragmentation_and_retries),
        cmocka_unit_test(test_oom_headline),
        cmocka_unit_test(test_failed_allocation_carried_on),
        cmocka_unit_test(test_hostile_values),
        cmocka_unit_test(test_diff_peaks),          cmocka_unit_test(test_module_of_peak),
        cmocka_unit_test(test_module_of_sample),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
