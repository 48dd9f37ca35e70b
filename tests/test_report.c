/*
 * test_report.c — report figures on synthetic runs with known answers: recursion (a range
 * inside a range of the same name) is counted once in inclusive time, exclusive time
 * subtracts children of any domain, and a run with only counters (no ranges) reports.
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

#include "analysis/megatron.h"
#include "analysis/model.h"
#include "analysis/report.h"
#include "report_text.h"
#include "analysis/steps.h"
#include "export/chrome.h"
#include "format/format.h"
#include "synth.h"

static const uint64_t T0 = 1000000000ull, MS = 1000000ull;

static cJSON *row(cJSON *rep, const char *table, const char *name, const char *domain) {
    cJSON *r0 = cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "ranks"), 0);
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(cJSON_GetObjectItem(r0, "ranges"), table)) {
        cJSON *d = cJSON_GetObjectItem(e, "domain");
        if (!strcmp(cJSON_GetObjectItem(e, "name")->valuestring, name) &&
            (domain ? d && !strcmp(d->valuestring, domain) : !d))
            return e;
    }
    return NULL;
}

static double num(cJSON *o, const char *k) { return cJSON_GetObjectItem(o, k)->valuedouble; }

/* The synthetic run in dir, loaded into *run (the test fails when it does not load). */
/* The first rank's GPU section of a report (NULL when it has none). */
static cJSON *rank0_gpu(const cJSON *rep) {
    return cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "ranks"), 0), "gpu");
}

/* A run directory with one rank file of process `pid`, holding the step thread (serial 1,
 * tid pid) and, with `cupti`, CUPTI's worker (serial 2, tid pid + 1), as the tests below
 * need. */
static synth_file *open_run(char *dir, size_t n, const char *tag, uint32_t pid, int cupti) {
    assert_int_equal(synth_tmpdir(dir, n, tag), 0);
    synth_file *f = synth_open(dir, "h", pid, 1700000000000000000ull, T0);
    synth_thread(f, 1, pid);
    if (cupti) synth_thread(f, 2, pid + 1);
    return f;
}

/* 3 steps of 20 ms (the first warm-up). In each: "rec" 0..15 ms holding "rec" 2..12 ms
 * (recursion), and "a" 15..19 ms holding "b" of domain "other" 16..18 ms. */
static void test_recursion_and_cross_domain_exclusive(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "report"), 0);
    synth_file *f = synth_open(dir, "h", 1, 1700000000000000000ull, T0);
    synth_domain(f, 1, "other");
    synth_thread(f, 1, 1);
    for (uint64_t s = 0; s < 3; s++) {
        uint64_t b = T0 + s * 20 * MS;
        synth_step_begin(f, 1, b, s);
        synth_push(f, 1, b, "rec", 0, 0);
        synth_push(f, 1, b + 2 * MS, "rec", 0, 0);
        synth_pop(f, 1, b + 12 * MS, 0);
        synth_pop(f, 1, b + 15 * MS, 0);
        synth_push(f, 1, b + 15 * MS, "a", 0, 0);
        synth_push(f, 1, b + 16 * MS, "b", 1, 0);
        synth_pop(f, 1, b + 18 * MS, 1);
        synth_pop(f, 1, b + 19 * MS, 0);
        synth_step_end(f, 1, b + 20 * MS, s);
    }
    synth_end_of_file(f, T0 + 60 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = default_report(&run);
    cJSON *rec = row(rep, "top_inclusive", "rec", NULL);
    assert_non_null(rec);
    /* 15 ms per step, not 25: the inner rec is inside the outer's time */
    assert_true(fabs(num(rec, "inclusive_ms") - 15.0) < 1e-9);
    assert_true(fabs(num(rec, "inclusive_share") - 0.75) < 1e-9);
    assert_true(fabs(num(rec, "count_per_unit") - 2.0) < 1e-9);
    /* exclusive: outer 15 - 10 = 5, inner 10: 15 ms of self time per step */
    assert_true(fabs(num(rec, "exclusive_ms") - 15.0) < 1e-9);
    /* "a" (default domain) holds "b" (domain other): a's exclusive is 4 - 2 = 2 ms */
    cJSON *a = row(rep, "top_inclusive", "a", NULL), *b = row(rep, "top_inclusive", "b", "other");
    assert_non_null(a);
    assert_non_null(b);
    assert_true(fabs(num(a, "inclusive_ms") - 4.0) < 1e-9);
    assert_true(fabs(num(a, "exclusive_ms") - 2.0) < 1e-9);
    assert_true(fabs(num(b, "exclusive_ms") - 2.0) < 1e-9);
    /* exclusive shares of the step's contents add up to at most the step */
    double sum = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "ranks"), 0), "ranges"), "top_exclusive"))
        sum += num(e, "exclusive_share");
    assert_true(sum <= 1.0 + 1e-9);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

static void test_counters_only(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = open_run(dir, sizeof dir, "report-cnt", 2, 0);
    synth_counter(f, 1, T0 + MS, "loss", 1.5);
    synth_mark(f, 1, T0 + 2 * MS, "tick", 0, 0);
    synth_end_of_file(f, T0 + 3 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = default_report(&run);
    assert_non_null(rep);
    cJSON *r0 = cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "ranks"), 0);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(r0, "ranges"), "top_inclusive")), 0);
    char buf[8192];
    FILE *mf = fmemopen(buf, sizeof buf, "w");
    tp_report tr;
    assert_int_equal(tp_report_make(&run, NULL, &tr), 0);
    assert_int_equal(tp_report_write_text(&tr, mf, 0), 0);
    tp_report_free(&tr);
    fclose(mf);
    assert_non_null(strstr(buf, "steps: none found"));
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* The text is rendered from the typed results (results.h), not from the document read back:
 * with the rank's "steps" and "ranges" taken out of the document after the report was built,
 * the text still shows the 2 measured steps of 20 ms and the range tables (rec: 15 ms
 * inclusive, 75 % of the step; a: 4 ms inclusive, 2 ms exclusive). */
static void test_text_from_results(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = open_run(dir, sizeof dir, "report-typed", 3, 0);
    for (uint64_t s = 0; s < 3; s++) {
        uint64_t b = T0 + s * 20 * MS;
        synth_step_begin(f, 1, b, s);
        synth_push(f, 1, b, "rec", 0, 0);
        synth_pop(f, 1, b + 15 * MS, 0);
        synth_push(f, 1, b + 15 * MS, "a", 0, 0);
        synth_push(f, 1, b + 16 * MS, "b", 0, 0);
        synth_pop(f, 1, b + 18 * MS, 0);
        synth_pop(f, 1, b + 19 * MS, 0);
        synth_step_end(f, 1, b + 20 * MS, s);
    }
    synth_end_of_file(f, T0 + 60 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    tp_report tr;
    assert_int_equal(tp_report_make(&run, NULL, &tr), 0);
    cJSON *r0 = cJSON_GetArrayItem(cJSON_GetObjectItem(tr.doc, "ranks"), 0);
    cJSON_DeleteItemFromObject(r0, "steps");
    cJSON_DeleteItemFromObject(r0, "ranges");
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    assert_non_null(mf);
    assert_int_equal(tp_report_write_text(&tr, mf, 0), 0);
    fclose(mf);
    tp_report_free(&tr);
    assert_non_null(strstr(buf, "  steps: 3 from tprof_step_begin/end calls, 1 warm-up\n"));
    assert_non_null(strstr(buf, "  step time: mean 20.00 ms  p50 20.00  p90 20.00  max 20.00  "
                                "min 20.00 ms\n"));
    assert_non_null(strstr(buf, "  warm-up step(s): 20.00 ms (not in the statistics)\n"));
    assert_non_null(strstr(buf, "\n  top ranges by inclusive time per step\n"));
    assert_non_null(strstr(buf, "  rec                                           1.00       "
                                "15.000   75.0%       15.000\n"));
    assert_non_null(strstr(buf, "  a                                             1.00        "
                                "4.000   20.0%        2.000\n"));
    free(buf);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* ------------------------------------------------------------------ GPU figures */

/* a kernel on device 0, stream 7, recorded by thread serial 2 (CUPTI's worker) */
static void kernel(synth_file *f, uint64_t s, uint64_t e, const char *name, uint32_t corr) {
    synth_kernel(f, 2, s, e, 0, 7, corr, name);
}

static void launch_at(synth_file *f, uint64_t t, uint32_t corr) {
    tprof_pl_gpu api = {t + 10000, 0, 0, 0, corr, 211, 3, 0};
    synth_raw(f, 2, TPROF_REC_GPU_API, TPROF_INLINE_NAME, t, &api, sizeof api,
              "cudaLaunchKernel", sizeof "cudaLaunchKernel");
}

/* A process killed in its fifth step: the four whole "step" ranges are the steps; the fifth,
 * cut short by the end of the file, is not one (its 0.1 ms says only when recording
 * stopped). */
static void test_cut_step_left_out(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = open_run(dir, sizeof dir, "report-cut", 7, 0);
    for (uint64_t s = 0; s < 5; s++) {
        synth_push(f, 1, T0 + s * 10 * MS, "step", 0, 0);
        if (s < 4) synth_pop(f, 1, T0 + (s + 1) * 10 * MS - MS, 0);
    }
    synth_counter(f, 1, T0 + 40 * MS + MS / 10, "x", 1.0); /* the last thing written */
    assert_int_equal(synth_close(f), 0); /* no END_OF_FILE: killed */
    tp_run run;
    load_run(dir, &run);
    tp_steps st;
    assert_int_equal(tp_find_steps(&run.procs[0], NULL, 1, &st), 0);
    assert_int_equal(st.nsteps, 4);
    for (size_t i = 0; i < st.nsteps; i++) assert_int_equal(st.steps[i].end - st.steps[i].start, 9 * MS);
    tp_steps_free(&st);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* API steps 0..5 of 10 ms, with step 2's end and step 3's begin lost (a damaged chunk the
 * reader skipped): step 2's length is unknown and step 3 has no begin, so the steps are 0, 1,
 * 4, 5, each 9 ms; step 2 must not run on to step 4's begin. Programs that only call
 * step_begin still get steps from one begin to the next. */
static void test_lost_step_end(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = open_run(dir, sizeof dir, "report-lost-end", 7, 0);
    for (uint64_t s = 0; s < 6; s++) {
        if (s != 3) synth_step_begin(f, 1, T0 + s * 10 * MS, s);
        if (s != 2) synth_step_end(f, 1, T0 + s * 10 * MS + 9 * MS, s);
    }
    synth_end_of_file(f, T0 + 70 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    tp_steps st;
    assert_int_equal(tp_find_steps(&run.procs[0], NULL, 0, &st), 0);
    assert_int_equal(st.nsteps, 4);
    const uint64_t want[4] = {0, 1, 4, 5};
    for (size_t i = 0; i < st.nsteps; i++) {
        assert_int_equal(st.steps[i].app_step, want[i]);
        assert_int_equal(st.steps[i].start, T0 + want[i] * 10 * MS);
        assert_int_equal(st.steps[i].end - st.steps[i].start, 9 * MS);
    }
    tp_steps_free(&st);
    tp_run_free(&run);
    synth_rmtree(dir);

    /* begins only: each step ends where the next begins */
    f = open_run(dir, sizeof dir, "report-begins", 7, 0);
    for (uint64_t s = 0; s < 4; s++) synth_step_begin(f, 1, T0 + s * 10 * MS, s);
    synth_end_of_file(f, T0 + 50 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    load_run(dir, &run);
    assert_int_equal(tp_find_steps(&run.procs[0], NULL, 0, &st), 0);
    assert_int_equal(st.nsteps, 3);
    for (size_t i = 0; i < st.nsteps; i++) assert_int_equal(st.steps[i].end - st.steps[i].start, 10 * MS);
    tp_steps_free(&st);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* trainprof.torch's steps (metadata trainprof.torch.steps = iteration): API steps 0..4 that
 * begin every 10 ms and end at 7 ms (the optimizer's return), with step 3 lost (a damaged
 * chunk). Each step runs to the next one's begin (10 ms), except step 2, followed by a
 * missing step, and the last: they keep their 7 ms. Without the metadata the same events
 * give 7 ms steps; a step name the user gives wins over both. */
static void test_iteration_steps(void **state) {
    (void)state;
    char dir[512];
    for (int iter = 0; iter < 2; iter++) {
        synth_file *f = open_run(dir, sizeof dir, "report-iter", 7, 0);
        if (iter) synth_meta(f, "trainprof.torch.steps", "iteration");
        for (uint64_t s = 0; s < 6; s++) {
            if (s == 3) continue;
            synth_step_begin(f, 1, T0 + s * 10 * MS, s);
            synth_push(f, 1, T0 + s * 10 * MS + MS, "iter", 0, 0);
            synth_pop(f, 1, T0 + s * 10 * MS + 2 * MS, 0);
            synth_step_end(f, 1, T0 + s * 10 * MS + 7 * MS, s);
        }
        synth_end_of_file(f, T0 + 70 * MS, 0);
        assert_int_equal(synth_close(f), 0);
        tp_run run;
        load_run(dir, &run);
        tp_steps st;
        assert_int_equal(tp_find_steps(&run.procs[0], NULL, 0, &st), 0);
        assert_int_equal(st.source, iter ? TP_STEPS_ITERATION : TP_STEPS_API);
        assert_int_equal(st.nsteps, 5);
        const uint64_t want[5] = {0, 1, 2, 4, 5};
        for (size_t i = 0; i < st.nsteps; i++) {
            uint64_t len = iter && (want[i] == 0 || want[i] == 1 || want[i] == 4) ? 10 : 7;
            assert_int_equal(st.steps[i].app_step, want[i]);
            assert_int_equal(st.steps[i].end - st.steps[i].start, len * MS);
        }
        tp_steps_free(&st);
        assert_int_equal(tp_find_steps(&run.procs[0], "iter", 0, &st), 0);
        assert_int_equal(st.source, TP_STEPS_NAMED);
        assert_int_equal(st.nsteps, 5);
        for (size_t i = 0; i < st.nsteps; i++) assert_int_equal(st.steps[i].end - st.steps[i].start, MS);
        tp_steps_free(&st);
        assert_int_equal(tp_find_steps(&run.procs[0], "no-such-range", 0, &st), 0);
        assert_int_equal(st.source, iter ? TP_STEPS_ITERATION : TP_STEPS_API);
        tp_steps_free(&st);
        /* one process, no communication: the text says why there is none */
        char *text = report_text(&run, NULL);
        assert_non_null(strstr(text, "communication: none recorded (world size 1: a collective "
                                     "has no peer"));
        free(text);
        tp_run_free(&run);
        synth_rmtree(dir);
    }
}

/* A step ended twice (trainprof.torch ends an iteration again at each optimizer step that
 * follows the first with nothing between): the last end is the step's. */
static void test_step_ended_twice(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = open_run(dir, sizeof dir, "report-end-twice", 7, 0);
    for (uint64_t s = 0; s < 2; s++) {
        synth_step_begin(f, 1, T0 + s * 10 * MS, s);
        synth_step_end(f, 1, T0 + s * 10 * MS + 7 * MS, s);
        synth_step_end(f, 1, T0 + s * 10 * MS + 8 * MS, s);
    }
    synth_end_of_file(f, T0 + 30 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    tp_steps st;
    assert_int_equal(tp_find_steps(&run.procs[0], NULL, 0, &st), 0);
    assert_int_equal(st.nsteps, 2);
    for (size_t i = 0; i < 2; i++) assert_int_equal(st.steps[i].end - st.steps[i].start, 8 * MS);
    tp_steps_free(&st);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* torchrun's agent (no rank of its own) is the parent of ranks 0 and 1 on host h; rank 2 on
 * host g has a parent of the same pid on its own host: the agent is named the launcher of
 * ranks 0-1, by torchrun. A process of no rank that launched none stays "process <pid>". */
static void test_launcher_role(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-launcher"), 0);
    const struct { const char *host; int32_t pid, ppid; int rank; } pr[] = {
        {"h", 100, 1, -1}, {"h", 101, 100, 0}, {"h", 102, 100, 1}, {"g", 101, 100, 2},
        {"h", 300, 1, -1}};
    for (size_t i = 0; i < sizeof pr / sizeof *pr; i++) {
        synth_header h = {pr[i].host, pr[i].pid, pr[i].ppid, 1700000000000000000ull, T0,
                          "run", "test", NULL};
        synth_file *f = synth_open_ex(dir, &h);
        assert_non_null(f);
        if (pr[i].rank >= 0) synth_rank(f, pr[i].rank, 3);
        if (pr[i].pid == 100)
            synth_meta(f, "cmdline", "/usr/bin/python3 /usr/local/bin/torchrun --nproc_per_node=2 t.py");
        synth_push(f, 1, T0 + MS, "x", 0, 0);
        synth_pop(f, 1, T0 + 2 * MS, 0);
        synth_end_of_file(f, T0 + 3 * MS, 0);
        assert_int_equal(synth_close(f), 0);
    }
    tp_run run;
    load_run(dir, &run);
    int seen = 0;
    for (size_t i = 0; i < run.nprocs; i++) {
        char label[64];
        tp_process_label(&run.procs[i], label, sizeof label);
        if (run.procs[i].hdr.pid == 100) {
            assert_string_equal(label, "launcher of ranks 0-1 (torchrun)");
            seen++;
        } else if (run.procs[i].hdr.pid == 300) {
            assert_string_equal(label, "process 300");
            seen++;
        }
    }
    assert_int_equal(seen, 2);
    /* the text's role column is as wide as the longest label (32 columns here), so every
     * row's host:pid starts in the same column */
    tp_report tr;
    assert_int_equal(tp_report_make(&run, NULL, &tr), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    assert_non_null(mf);
    assert_int_equal(tp_report_write_text(&tr, mf, 0), 0);
    fclose(mf);
    assert_non_null(strstr(buf, "\nprocesses\n  role                             host:pid   "));
    assert_non_null(strstr(buf, "\n  launcher of ranks 0-1 (torchrun) h:100    "));
    assert_non_null(strstr(buf, "\n  rank 0                           h:101    "));
    assert_non_null(strstr(buf, "\n  process 300                      h:300    "));
    free(buf);
    tp_report_free(&tr);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* NVML measured by trainprof run's node sampler: the rank's file (read first) says its own
 * sampling is off for that reason, the sampler's says what it sampled. The run has NVML, and
 * its line is the sampler's; with only the rank's line it has none. */
static void test_capability_from_any_process(void **state) {
    (void)state;
    char dir[512];
    for (int with_sampler = 1; with_sampler >= 0; with_sampler--) {
        assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-caps"), 0);
        synth_file *f = synth_open(dir, "a", 10, 1700000000000000000ull, T0);
        synth_rank(f, 0, 1);
        synth_meta(f, "capability.nvml", "off: sampled by trainprof run's node sampler (pid 11)");
        synth_end_of_file(f, T0 + MS, 0);
        assert_int_equal(synth_close(f), 0);
        if (with_sampler) {
            f = synth_open(dir, "b", 11, 1700000000000000000ull, T0);
            synth_meta(f, "trainprof.role", "node-sampler");
            synth_meta(f, "capability.nvml", "sampling 1 GPU (NVML index 0) at 10 Hz");
            synth_end_of_file(f, T0 + MS, 0);
            assert_int_equal(synth_close(f), 0);
        }
        tp_run run;
        load_run(dir, &run);
        cJSON *rep = default_report(&run);
        const cJSON *nv = cJSON_GetObjectItem(cJSON_GetObjectItem(rep, "capabilities"), "nvml");
        assert_int_equal(cJSON_IsTrue(cJSON_GetObjectItem(nv, "found")), with_sampler);
        assert_string_equal(cJSON_GetObjectItem(nv, "status")->valuestring,
                            with_sampler ? "sampling 1 GPU (NVML index 0) at 10 Hz"
                                         : "off: sampled by trainprof run's node sampler (pid 11)");
        cJSON_Delete(rep);
        tp_run_free(&run);
        synth_rmtree(dir);
    }
}

/* The Megatron-LM configuration of the reference runs, as torchrun starts it: its arguments
 * read back, and advice that names only what the job did not do. A command line that is no
 * Megatron training script gets none. */
static void test_megatron_args_and_advice(void **state) {
    (void)state;
    tp_megatron_args a;
    tp_megatron_args_parse(
        "/usr/bin/python3 -u pretrain_gpt.py --mock-data --transformer-impl local --bf16 "
        "--num-layers 4 --micro-batch-size 4 --global-batch-size 16 "
        "--no-gradient-accumulation-fusion --no-masked-softmax-fusion --no-bias-dropout-fusion "
        "--no-bias-gelu-fusion --no-persist-layer-norm --tensor-model-parallel-size=2", &a);
    assert_int_equal(a.found, 1);
    assert_string_equal(a.transformer_impl, "local");
    assert_int_equal(a.micro_batch, 4);
    assert_int_equal(a.tp, 2);
    assert_int_equal(a.fusions_off, TP_MEG_NO_GRADIENT_ACCUMULATION_FUSION |
                                        TP_MEG_NO_MASKED_SOFTMAX_FUSION |
                                        TP_MEG_NO_BIAS_DROPOUT_FUSION | TP_MEG_NO_BIAS_GELU_FUSION |
                                        TP_MEG_NO_PERSIST_LAYER_NORM);
    char buf[1024];
    assert_true(tp_megatron_advice(&a, "launch_bound", buf, sizeof buf) > 0);
    assert_string_equal(buf,
        "--transformer-impl transformer_engine instead of local (fused attention, LayerNorm and "
        "GEMM kernels: fewer, larger kernels); turn the fusions back on (drop "
        "--no-masked-softmax-fusion --no-bias-dropout-fusion --no-bias-gelu-fusion "
        "--no-gradient-accumulation-fusion --no-persist-layer-norm); CUDA graphs "
        "(--cuda-graph-impl local or transformer_engine) to replay the step's launches; a larger "
        "--micro-batch-size (now 4) with fewer micro-batches per step");
    tp_megatron_advice(&a, "exposed_communication", buf, sizeof buf);
    assert_non_null(strstr(buf, "--overlap-grad-reduce"));
    assert_non_null(strstr(buf, "--tp-comm-overlap"));
    assert_int_equal(tp_megatron_advice(&a, "host_sync", buf, sizeof buf), 0);
    assert_string_equal(buf, "");
    /* what the job already does is not advised */
    tp_megatron_args_parse("python pretrain_gpt.py --overlap-grad-reduce "
                           "--use-distributed-optimizer --overlap-param-gather", &a);
    assert_int_equal(tp_megatron_advice(&a, "exposed_communication", buf, sizeof buf), 0);
    tp_megatron_args_parse("python train.py --lr 1e-4 --micro-batch-size 4", &a);
    assert_int_equal(a.found, 0);
    assert_int_equal(tp_megatron_advice(&a, "launch_bound", buf, sizeof buf), 0);
}

/* A kernel of unknown launch (driver API) just after the warm-up step ended: the run's
 * median launch delay (0.1 ms) would place its launch in step 1, but its neighbours on the
 * same stream, launched at 9.0 and 9.9 ms (in the warm-up step, queue 0.8 ms deep), bound
 * its launch to the warm-up step: it must not count for the measured steps. */
static void test_gpu_unknown_launch(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = open_run(dir, sizeof dir, "report-gpu-launch", 3, 1);
    for (uint64_t s = 0; s < 3; s++) {
        synth_step_begin(f, 1, T0 + s * 10 * MS, s);
        synth_step_end(f, 1, T0 + (s + 1) * 10 * MS, s);
    }
    /* stream 9: five kernels launched in step 1, each starting 0.1 ms later, 0.1 ms long */
    for (uint32_t k = 0; k < 5; k++) {
        uint64_t l = T0 + (11 + k) * MS;
        launch_at(f, l, 100 + k);
        synth_kernel(f, 2, l + MS / 10, l + 2 * MS / 10, 0, 9, 100 + k, "known_kernel");
    }
    /* stream 5: K1 launched 9.0 ms runs 9.6-10.1; U (unknown) runs 10.2-10.6; K2 launched
     * 9.9 ms runs 10.7-11.0 */
    launch_at(f, T0 + 9 * MS, 1);
    synth_kernel(f, 2, T0 + 96 * MS / 10, T0 + 101 * MS / 10, 0, 5, 1, "k1");
    synth_kernel(f, 2, T0 + 102 * MS / 10, T0 + 106 * MS / 10, 0, 5, 0, "unknown_launch_gemm");
    launch_at(f, T0 + 99 * MS / 10, 2);
    synth_kernel(f, 2, T0 + 107 * MS / 10, T0 + 110 * MS / 10, 0, 5, 2, "k2");
    synth_end_of_file(f, T0 + 31 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = default_report(&run);
    cJSON *g = rank0_gpu(rep);
    assert_non_null(g);
    assert_true(fabs(num(g, "launch_lag_ms") - 0.1) < 1e-9);
    cJSON *d0 = cJSON_GetArrayItem(cJSON_GetObjectItem(g, "devices"), 0);
    /* the measured steps (1, 2) hold only the five known kernels: 0.5 ms over 2 steps */
    assert_true(fabs(num(d0, "kernel_ms") - 0.25) < 1e-9);
    assert_true(fabs(num(d0, "kernels") - 2.5) < 1e-9);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* A rank on GPU 1 (torchrun's rank 1): CUPTI's synchronisation records carry no device.
 * Older rank files hold 0 there, current ones TPROF_DEVICE_UNKNOWN; either way they take the
 * device of the work on their stream (or the process's only device), so the report lists
 * GPU 1 alone, not a phantom idle GPU 0, and still counts the host synchronisations. */
static void test_sync_device_from_stream(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = open_run(dir, sizeof dir, "report-sync-dev", 3, 1);
    for (uint64_t s = 0; s < 3; s++) {
        synth_step_begin(f, 1, T0 + s * 10 * MS, s);
        synth_step_end(f, 1, T0 + (s + 1) * 10 * MS, s);
        uint64_t l = T0 + s * 10 * MS + MS;
        launch_at(f, l, 100 + (uint32_t)s);
        synth_kernel(f, 2, l + MS / 10, l + 2 * MS, 1, 7, 100 + (uint32_t)s, "gemm_kernel");
        /* one sync on the kernel's stream (old files: device 0), one on a stream with no work
         * (new files: unknown device) */
        tprof_pl_gpu sy = {l + 3 * MS, 0, 0, 7, 0, 3, 3, 0};
        synth_raw(f, 2, TPROF_REC_GPU_SYNC, 0, l + 2 * MS, &sy, sizeof sy, NULL, 0);
        tprof_pl_gpu sy2 = {l + 4 * MS, 0, TPROF_DEVICE_UNKNOWN, 0, 0, 1, 3, 0};
        synth_raw(f, 2, TPROF_REC_GPU_SYNC, 0, l + 3 * MS, &sy2, sizeof sy2, NULL, 0);
    }
    synth_end_of_file(f, T0 + 31 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    for (size_t i = 0; i < run.procs[0].ngpu; i++)
        if (run.procs[0].gpu[i].type == TPROF_REC_GPU_SYNC) assert_int_equal(run.procs[0].gpu[i].device, 1);
    cJSON *rep = default_report(&run);
    cJSON *g = rank0_gpu(rep);
    assert_non_null(g);
    cJSON *devs = cJSON_GetObjectItem(g, "devices");
    assert_int_equal(cJSON_GetArraySize(devs), 1);
    assert_int_equal((int)num(cJSON_GetArrayItem(devs, 0), "device"), 1);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* A process on two GPUs (kernels on device 0 stream 7 and device 1 stream 9). With the
 * metadata cupti.sync_device=context (the capture wrote the context's device), device-wide
 * synchronisations (stream 0, no work of its own) keep that device (1, and 0), a device with
 * no work (5) or none (unknown) gives no device; a sync on a stream with work takes that
 * stream's device whatever the capture wrote. Without the metadata (files whose capture
 * wrote 0 for every sync), the capture's device counts for nothing: the device-wide syncs
 * have no device. */
static void sync_two_gpus(int new_file) {
    char dir[512];
    synth_file *f = open_run(dir, sizeof dir, "report-sync-2dev", 3, 1);
    if (new_file) synth_meta(f, "cupti.sync_device", "context");
    synth_step_begin(f, 1, T0, 0);
    synth_step_end(f, 1, T0 + 10 * MS, 0);
    synth_kernel(f, 2, T0 + MS, T0 + 2 * MS, 0, 7, 100, "gemm_kernel");
    synth_kernel(f, 2, T0 + MS, T0 + 2 * MS, 1, 9, 101, "gemm_kernel");
    const uint32_t dev[5] = {1, 5, TPROF_DEVICE_UNKNOWN, 0, 0}, stream[5] = {0, 0, 0, 9, 0};
    for (uint32_t i = 0; i < 5; i++) {
        tprof_pl_gpu sy = {T0 + (3 + i) * MS + MS / 2, 0, dev[i], stream[i], 0, 3, 3, 0};
        synth_raw(f, 2, TPROF_REC_GPU_SYNC, 0, T0 + (3 + i) * MS, &sy, sizeof sy, NULL, 0);
    }
    synth_end_of_file(f, T0 + 11 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    const uint32_t U = TPROF_DEVICE_UNKNOWN;
    const uint32_t want_new[5] = {1, U, U, 1, 0}, want_old[5] = {U, U, U, 1, U};
    const uint32_t *want = new_file ? want_new : want_old;
    size_t k = 0;
    for (size_t i = 0; i < run.procs[0].ngpu; i++)
        if (run.procs[0].gpu[i].type == TPROF_REC_GPU_SYNC) {
            assert_true(k < 5);
            assert_int_equal(run.procs[0].gpu[i].device, want[k]);
            k++;
        }
    assert_int_equal(k, 5);
    tp_run_free(&run);
    synth_rmtree(dir);
}

static void test_sync_device_two_gpus(void **state) {
    (void)state;
    sync_two_gpus(1);
    sync_two_gpus(0);
}

/* 3 steps of 10 ms (first warm-up). Each: a GEMM kernel 1-5 ms and an elementwise kernel
 * 4-6 ms (overlapping on another stream), launched through the driver (no runtime record:
 * their launch is estimated from the typical delay, 0.5 ms here), a 1 MB host-to-device copy
 * 6-7 ms, and a cudaStreamSynchronize 7-9 ms on the host. Memory: +100 MB, -60 MB, +30 MB:
 * peak 100 MB. */
static void test_gpu_section(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = open_run(dir, sizeof dir, "report-gpu", 3, 1);
    for (uint64_t s = 0; s < 3; s++) {
        uint64_t b = T0 + s * 10 * MS;
        synth_step_begin(f, 1, b, s);
        synth_step_end(f, 1, b + 10 * MS, s);
        kernel(f, b + 1 * MS, b + 5 * MS, "ampere_bf16_s16816gemm_128x128", (uint32_t)(10 * s + 1));
        synth_kernel(f, 2, b + 4 * MS, b + 6 * MS, 0, 8, (uint32_t)(10 * s + 2),
                     "_ZN2at6native29vectorized_elementwise_kernelILi4EEEviT_");
        tprof_pl_gpu cp = {b + 7 * MS, 1000000, 0, 7, (uint32_t)(10 * s + 3), 1, 0, 0};
        synth_raw(f, 2, TPROF_REC_GPU_MEMCPY, 0, b + 6 * MS, &cp, sizeof cp, NULL, 0);
        tprof_pl_gpu api = {b + 9 * MS, 0, 0, 0, 0, 131, 3, 0};
        synth_raw(f, 2, TPROF_REC_GPU_API, TPROF_INLINE_NAME, b + 7 * MS, &api, sizeof api,
                  "cudaStreamSynchronize", sizeof "cudaStreamSynchronize");
        /* CUPTI's overhead: a buffer flush of 0.2 ms and an instrumentation of 0.1 ms */
        tprof_pl_gpu fl = {b + 2 * MS + 200000, 0, TPROF_DEVICE_UNKNOWN, 0, 0, 1u << 16, 100, 0};
        synth_raw(f, 2, TPROF_REC_GPU_OVERHEAD, TPROF_INLINE_NAME, b + 2 * MS, &fl, sizeof fl,
                  "CUPTI buffer flush", sizeof "CUPTI buffer flush");
        tprof_pl_gpu in = {b + 3 * MS + 100000, 0, 0, 0, 0, 2u << 16, 0, 0};
        synth_raw(f, 2, TPROF_REC_GPU_OVERHEAD, TPROF_INLINE_NAME, b + 3 * MS, &in, sizeof in,
                  "CUPTI instrumentation", sizeof "CUPTI instrumentation");
        /* the driver's time, which CUPTI also reports: a launch waited 0.05 ms for room */
        tprof_pl_gpu full = {b + 4 * MS + 50000, 0, TPROF_DEVICE_UNKNOWN, 0, 0, 6u << 16, 100, 0};
        synth_raw(f, 2, TPROF_REC_GPU_OVERHEAD, TPROF_INLINE_NAME, b + 4 * MS, &full, sizeof full,
                  "command buffer full", sizeof "command buffer full");
        /* an asynchronous copy call (its copy lost): no host synchronisation */
        tprof_pl_gpu cpa = {b + 6 * MS - 40000, 0, 0, 0, (uint32_t)(500 + s), 41, 3, 0};
        synth_raw(f, 2, TPROF_REC_GPU_API, TPROF_INLINE_NAME, b + 6 * MS - 50000, &cpa, sizeof cpa,
                  "cudaMemcpyAsync", sizeof "cudaMemcpyAsync");
    }
    /* launched at the end of the last step (cudaLaunchKernel, correlation 99), run after it:
     * it belongs to that step (docs/design.md §4), though no step window holds its execution */
    tprof_pl_gpu launch = {T0 + 29600000ull, 0, 0, 0, 99, 211, 3, 0};
    synth_raw(f, 2, TPROF_REC_GPU_API, TPROF_INLINE_NAME, T0 + 29500000ull, &launch, sizeof launch,
              "cudaLaunchKernel", sizeof "cudaLaunchKernel");
    kernel(f, T0 + 30 * MS, T0 + 32 * MS, "late_gemm_kernel", 99);
    uint64_t mems[3][2] = {{1, 100000000}, {2, 60000000}, {1, 30000000}};
    for (int i = 0; i < 3; i++) {
        tprof_pl_gpu_mem m = {0x1000u * (uint64_t)(i + 1), mems[i][1], 0, (uint32_t)mems[i][0], 3, 0};
        synth_raw(f, 2, TPROF_REC_GPU_MEMORY, 0, T0 + (uint64_t)i * MS, &m, sizeof m, NULL, 0);
    }
    /* records the capture left out for unknown times: 2, then 3 in all (the last value wins) */
    synth_meta(f, "cupti.untimed_records", "2");
    synth_meta(f, "cupti.untimed_records", "3");
    synth_end_of_file(f, T0 + 33 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = default_report(&run);
    cJSON *g = rank0_gpu(rep);
    assert_non_null(g);
    assert_true(num(g, "cupti_records_untimed") == 3.0);
    /* overhead in the 2 measured steps: 0.3 ms per step, the flush first */
    cJSON *ovh = cJSON_GetObjectItem(g, "cupti_overhead");
    assert_true(num(ovh, "records") == 6.0);
    assert_true(fabs(num(ovh, "ms") - 0.3) < 1e-9);
    assert_true(fabs(num(ovh, "driver_ms") - 0.05) < 1e-9);
    assert_true(num(ovh, "driver_records") == 2.0);
    cJSON *k0o = cJSON_GetArrayItem(cJSON_GetObjectItem(ovh, "by_kind"), 0);
    assert_string_equal(cJSON_GetObjectItem(k0o, "name")->valuestring, "CUPTI buffer flush");
    assert_true(fabs(num(k0o, "ms") - 0.2) < 1e-9);
    char *text = report_text(&run, NULL);
    assert_non_null(strstr(text, "3 CUPTI records had no start or end time"));
    assert_non_null(strstr(text, "CUPTI's own overhead, the part its records show: 0.300 ms per "
                                 "step (4 records): CUPTI buffer flush 0.200 ms; CUPTI "
                                 "instrumentation 0.100 ms\n"));
    assert_non_null(strstr(text, "driver time reported by CUPTI: 0.050 ms per step (2 records): command "
                                 "buffer full 0.050 ms (a launch waited for room in a GPU command queue"));
    free(text);
    cJSON *d0 = cJSON_GetArrayItem(cJSON_GetObjectItem(g, "devices"), 0);
    /* busy: union of 1-6 ms (kernels) and 6-7 ms (copy) = 6 ms of 10 */
    assert_true(fabs(num(d0, "busy_share") - 0.6) < 1e-9);
    assert_true(fabs(num(g, "launch_lag_ms") - 0.5) < 1e-9);
    assert_null(cJSON_GetObjectItem(g, "records_stopped")); /* records to the end: silent */
    /* 6 ms per step, plus the late kernel's 2 ms for the last of the 2 measured steps */
    assert_true(fabs(num(d0, "kernel_ms") - 7.0) < 1e-9);
    cJSON *cls = cJSON_GetObjectItem(d0, "kernel_ms_by_class");
    assert_true(fabs(num(cls, "gemm") - 5.0) < 1e-9);
    assert_true(fabs(num(cls, "elementwise/norm") - 2.0) < 1e-9);
    assert_true(fabs(num(d0, "h2d_bytes") - 1e6) < 1e-6);
    assert_true(fabs(num(d0, "memory_peak_bytes") - 1e8) < 1e-3);
    assert_true(fabs(num(g, "host_syncs") - 1.0) < 1e-9);
    assert_true(fabs(num(g, "host_sync_blocked_ms") - 2.0) < 1e-9);
    cJSON *k0 = cJSON_GetArrayItem(cJSON_GetObjectItem(g, "top_kernels"), 0);
    assert_string_equal(cJSON_GetObjectItem(k0, "name")->valuestring, "ampere_bf16_s16816gemm_128x128");
    assert_true(fabs(num(k0, "share") - 8.0 / 14.0) < 1e-9);
    cJSON *k1 = cJSON_GetArrayItem(cJSON_GetObjectItem(g, "top_kernels"), 1);
    /* demangled */
    assert_string_equal(cJSON_GetObjectItem(k1, "name")->valuestring,
                        "void at::native::vectorized_elementwise_kernel<4>(int, 4)");
    cJSON_Delete(rep);
    /* the Chrome export: kernels on a GPU stream track, a flow from the launch */
    char *buf = NULL;
    size_t blen = 0;
    FILE *mf = open_memstream(&buf, &blen);
    assert_int_equal(tp_export_chrome(&run, mf, NULL), 0);
    fclose(mf);
    cJSON *tr = cJSON_Parse(buf);
    free(buf);
    assert_non_null(tr);
    int kernels = 0, copies = 0, runtime = 0;
    double gpu_tid = -1;
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(tr, "traceEvents")) {
        const char *cat = cJSON_GetStringValue(cJSON_GetObjectItem(e, "cat"));
        if (!cat) continue;
        if (!strcmp(cat, "kernel")) {
            kernels++;
            if (num(e, "tid") == (double)(0x40000000u | 7u)) gpu_tid = num(e, "tid");
        }
        copies += !strcmp(cat, "gpu_memcpy");
        runtime += !strcmp(cat, "cuda_runtime");
    }
    assert_int_equal(kernels, 7);
    assert_int_equal(copies, 3);
    assert_int_equal(runtime, 7); /* 3 synchronise, 3 async copy calls, 1 launch */
    assert_true(gpu_tid == (double)(0x40000000u | 7u)); /* device 0, stream 7 */
    cJSON_Delete(tr);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* GPU records for 3 steps, then 5 more steps of 1 s without any: another CUPTI client took
 * over. The report says when and for how long. */
static void test_gpu_records_stop(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = open_run(dir, sizeof dir, "report-gpu-stop", 5, 1);
    const uint64_t S = 1000 * MS;
    for (uint64_t s = 0; s < 8; s++) {
        uint64_t b = T0 + s * S;
        synth_step_begin(f, 1, b, s);
        synth_step_end(f, 1, b + S, s);
        if (s < 3) kernel(f, b + MS, b + 100 * MS, "k", (uint32_t)s + 1);
    }
    synth_end_of_file(f, T0 + 8 * S, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = default_report(&run);
    cJSON *lost = cJSON_GetObjectItem(rank0_gpu(rep), "records_stopped");
    assert_non_null(lost);
    assert_int_equal((int)num(lost, "steps_without_gpu_records"), 5);
    /* last record at 2.1 s; measured steps start at 1 s: 1.1 s in, 5.9 s to the end */
    assert_true(fabs(num(lost, "after_s") - 1.1) < 1e-9);
    assert_true(fabs(num(lost, "span_s") - 5.9) < 1e-9);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* A rank and the node's GPU sampler on one host. The rank's CUDA device 0 is, by UUID (its
 * CUPTI device record), the sampler's NVML GPU 1; by position it would be GPU 0. The report
 * must take the UUID: GPU 1's power (300 W, GPU 0 draws 100 W), and the device's own
 * description (name, SMs, capacity from the record). */
/* Ends the rank file `f` (its steps within 40 ms), adds the node sampler's file of a host
 * with two GPUs (NVML 0 = U0 and 1 = U1, drawing 100 and 300 W), loads the run into `run` and
 * returns its report, asserting that rank 0 was given exactly one NVML GPU: `index`, which
 * is its CUDA device `cuda`. */
static const char *const U0 = "GPU-00000000-0000-4000-8000-000000000000";
static const char *const U1 = "GPU-11111111-1111-4111-8111-111111111111";
static cJSON *report_two_gpus(synth_file *f, const char *dir, tp_run *run, unsigned index, unsigned cuda) {
    synth_end_of_file(f, T0 + 41 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    synth_file *sf = synth_open(dir, "h", 61, 1700000000000000000ull, T0);
    synth_thread(sf, 1, 61);
    synth_meta(sf, "trainprof.role", "node-sampler");
    synth_meta(sf, "nvml.devices", "0,1");
    synth_meta(sf, "gpu.0.uuid", U0);
    synth_meta(sf, "gpu.1.uuid", U1);
    for (uint64_t t = 0; t <= 40; t += 2) {
        synth_counter(sf, 1, T0 + t * MS, "gpu0.power_w", 100);
        synth_counter(sf, 1, T0 + t * MS, "gpu1.power_w", 300);
    }
    synth_end_of_file(sf, T0 + 41 * MS, 0);
    assert_int_equal(synth_close(sf), 0);
    load_run(dir, run);
    cJSON *rep = default_report(run);
    cJSON *r0 = cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "ranks"), 0);
    cJSON *gpus = cJSON_GetObjectItem(cJSON_GetObjectItem(r0, "nvml"), "gpus");
    assert_int_equal(cJSON_GetArraySize(gpus), 1);
    cJSON *g = cJSON_GetArrayItem(gpus, 0);
    assert_true(num(g, "index") == (double)index);
    assert_true(num(g, "cuda_device") == (double)cuda);
    return rep;
}

static void test_gpu_by_uuid(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = open_run(dir, sizeof dir, "report-uuid", 60, 1);
    synth_rank(f, 0, 1);
    synth_meta(f, "cuda.0.uuid", U1);
    synth_meta(f, "cuda.0.name", "NVIDIA H200");
    synth_meta(f, "cuda.0.sm_count", "132");
    synth_meta(f, "cuda.0.memory_total_bytes", "150000000000");
    for (uint64_t s = 0; s < 4; s++) {
        uint64_t b = T0 + s * 10 * MS;
        synth_step_begin(f, 1, b, s);
        synth_step_end(f, 1, b + 10 * MS, s);
        kernel(f, b + MS, b + 9 * MS, "ampere_bf16_s16816gemm_128x128", (uint32_t)(s + 1));
    }
    tprof_pl_gpu_mem m = {0x1000, 30000000000ull, 0, 1, 3, 0};
    synth_raw(f, 2, TPROF_REC_GPU_MEMORY, 0, T0, &m, sizeof m, NULL, 0);
    /* CUPTI's overhead after the last step only: no overhead line */
    tprof_pl_gpu fl = {T0 + 40 * MS + 800000, 0, TPROF_DEVICE_UNKNOWN, 0, 0, 1u << 16, 100, 0};
    synth_raw(f, 2, TPROF_REC_GPU_OVERHEAD, TPROF_INLINE_NAME, T0 + 40 * MS + 500000, &fl, sizeof fl,
              "CUPTI buffer flush", sizeof "CUPTI buffer flush");
    tp_run run;
    cJSON *rep = report_two_gpus(f, dir, &run, 1, 0); /* by UUID; by position CUDA 0 is NVML 0 */
    cJSON *d0 = cJSON_GetArrayItem(cJSON_GetObjectItem(rank0_gpu(rep), "devices"), 0);
    assert_string_equal(cJSON_GetObjectItem(d0, "name")->valuestring, "NVIDIA H200");
    assert_string_equal(cJSON_GetObjectItem(d0, "uuid")->valuestring, U1);
    assert_true(num(d0, "sm_count") == 132.0);
    assert_true(num(d0, "memory_capacity_bytes") == 150000000000.0);
    assert_true(fabs(num(d0, "memory_peak_share") - 0.2) < 1e-12);
    char *text = report_text(&run, NULL);
    assert_non_null(strstr(text, "GPU 0 (NVIDIA H200, 132 SMs):"));
    assert_null(strstr(text, "overhead"));
    assert_null(cJSON_GetObjectItem(rank0_gpu(rep), "cupti_overhead"));
    free(text);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* No GPU records (no CUPTI): the rank's GPU is the one its driver had in use
 * (cuda.<o>.in_use), found by UUID; the others of the node are left out. With two in use and
 * the launcher's local rank 1 (a DDP rank that also touched cuda:0), its own. */
static void test_gpu_in_use(void **state) {
    (void)state;
    for (int stray = 0; stray < 2; stray++) {
        char dir[512];
        synth_file *f = open_run(dir, sizeof dir, "report-inuse", 60, 1);
        synth_rank(f, 0, 1);
        synth_meta(f, "cuda.0.uuid", U1);
        synth_meta(f, "cuda.1.uuid", U0);
        synth_meta(f, "cuda.1.in_use", "1");
        if (stray) {
            synth_meta(f, "cuda.0.in_use", "1");
            synth_meta(f, "local_rank", "1");
        }
        for (uint64_t s = 0; s < 4; s++) {
            synth_step_begin(f, 1, T0 + s * 10 * MS, s);
            synth_step_end(f, 1, T0 + (s + 1) * 10 * MS, s);
        }
        tp_run run;
        cJSON *rep = report_two_gpus(f, dir, &run, 0, 1); /* by UUID */
        cJSON_Delete(rep);
        tp_run_free(&run);
        synth_rmtree(dir);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recursion_and_cross_domain_exclusive),
        cmocka_unit_test(test_counters_only),
        cmocka_unit_test(test_text_from_results),
        cmocka_unit_test(test_gpu_section),
        cmocka_unit_test(test_gpu_unknown_launch),
        cmocka_unit_test(test_sync_device_from_stream),
        cmocka_unit_test(test_sync_device_two_gpus),
        cmocka_unit_test(test_cut_step_left_out),
        cmocka_unit_test(test_lost_step_end),
        cmocka_unit_test(test_iteration_steps),
        cmocka_unit_test(test_step_ended_twice),
        cmocka_unit_test(test_launcher_role),
        cmocka_unit_test(test_capability_from_any_process),
        cmocka_unit_test(test_megatron_args_and_advice),
        cmocka_unit_test(test_gpu_records_stop),
        cmocka_unit_test(test_gpu_by_uuid),
        cmocka_unit_test(test_gpu_in_use),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
