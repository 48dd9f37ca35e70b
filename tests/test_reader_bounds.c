/*
 * test_reader_bounds.c — what a rank file may claim, as the reader and the model bound it
 * (src/analysis/model.h, docs/format.md): times at or above TPROF_TIME_MAX, communication
 * ranks beyond an int, string ids beyond what the file could hold and steps that overlap
 * are damage, each with an exact, known outcome; and the saturating sums the clock alignment
 * and the memory curves use. The fuzz targets (tests/fuzz) check the same readers for any
 * crash or undefined behaviour; these pin down what the reader makes of such input.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/model.h"
#include "analysis/stats.h"
#include "analysis/steps.h"
#include "format/format.h"
#include "synth.h"

static const uint64_t RT0 = 1700000000000000000ull, T0 = 1000000000ull, MS = 1000000ull;

static synth_file *one_file(char *dir, size_t n, const char *tag) {
    assert_int_equal(synth_tmpdir(dir, n, tag), 0);
    synth_file *f = synth_open(dir, "h", 4242, RT0, T0);
    assert_non_null(f);
    synth_thread(f, 1, 4243);
    return f;
}

static void load(const char *dir, tp_run *run) {
    char err[256];
    if (tp_run_load(dir, run, err, sizeof err) != 0) fail_msg("%s: %s", dir, err);
    assert_int_equal(run->nprocs, 1);
}

static int has_damage(const tp_process *p, const char *line) {
    for (size_t i = 0; i < p->ndamage; i++)
        if (!strcmp(p->damage[i], line)) return 1;
    return 0;
}

/* A start pair at 2^62 ns is no clock's reading: the file is unreadable, and says why; one
 * nanosecond less loads. */
static void test_start_pair_beyond(void **state) {
    (void)state;
    for (int beyond = 0; beyond < 2; beyond++) {
        char dir[512];
        assert_int_equal(synth_tmpdir(dir, sizeof dir, "bounds-start"), 0);
        synth_header h = {.host = "h", .pid = 7, .start_realtime_ns = RT0,
                          .start_mono_ns = TPROF_TIME_MAX - 1 + (uint64_t)beyond};
        synth_file *f = synth_open_ex(dir, &h);
        synth_thread(f, 1, 8);
        synth_mark(f, 1, T0, "m", 0, 0);
        synth_end_of_file(f, T0 + MS, 0);
        assert_int_equal(synth_close(f), 0);
        tp_run run;
        char err[256] = "";
        int rc = tp_run_load(dir, &run, err, sizeof err);
        if (beyond) {
            assert_int_not_equal(rc, 0);
            assert_int_equal(run.nprocs, 0);
            assert_int_equal(run.nerrors, 1);
            assert_non_null(strstr(run.errors[0], "start clock pair out of range "
                                                  "(1700000000000000000, 4611686018427387904 ns)"));
        } else {
            assert_int_equal(rc, 0);
            assert_int_equal(run.nprocs, 1);
            assert_int_equal(run.procs[0].hdr.start_mono_ns, TPROF_TIME_MAX - 1);
        }
        tp_run_free(&run);
        synth_rmtree(dir);
    }
}

/* Records holding a time at or above 2^62 ns, and communication records whose rank does not
 * fit an int, are skipped and counted; their neighbours load as written. */
static void test_records_beyond_skipped(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = one_file(dir, sizeof dir, "bounds-rec");
    synth_mark(f, 1, T0 + MS, "kept", 0, 0);
    synth_mark(f, 1, TPROF_TIME_MAX, "ts beyond", 0, 0);
    synth_kernel(f, 1, T0 + 2 * MS, T0 + 3 * MS, 0, 7, 1, "k_kept");
    synth_kernel(f, 1, T0 + 4 * MS, TPROF_TIME_MAX, 0, 7, 2, "k_end_beyond");
    tprof_pl_comm c;
    memset(&c, 0, sizeof c);
    c.op = TPROF_COMM_ALLREDUCE;
    c.nranks = 2;
    c.rank = 1;
    c.bytes = c.count = 1024;
    c.comm_hash = 0xabc;
    c.peer = TPROF_COMM_NO_PEER;
    c.source = TPROF_COMM_SRC_NCCL;
    c.end_ns = T0 + 6 * MS;
    synth_comm(f, 1, T0 + 5 * MS, &c, NULL);           /* kept */
    c.nranks = 0x80000000u;                              /* 2^31 ranks */
    synth_comm(f, 1, T0 + 7 * MS, &c, NULL);
    c.nranks = 2;
    c.rank = 0xFFFFFFF0u;
    synth_comm(f, 1, T0 + 8 * MS, &c, NULL);
    c.rank = 0;
    c.flags = TPROF_COMM_F_GPU_TIME;
    c.gpu_start_ns = T0 + 9 * MS;
    c.gpu_end_ns = UINT64_MAX;
    synth_comm(f, 1, T0 + 9 * MS, &c, NULL);
    synth_end_of_file(f, T0 + 10 * MS, 0);
    assert_int_equal(synth_close(f), 0);

    tp_run run;
    load(dir, &run);
    const tp_process *p = &run.procs[0];
    assert_int_equal(p->nthreads, 1);
    assert_int_equal(p->threads[0].nmarks, 1);
    assert_string_equal(p->threads[0].marks[0].name, "kept");
    assert_int_equal(p->ngpu, 1);
    assert_string_equal(p->gpu[0].name, "k_kept");
    assert_int_equal(p->ncomm, 1);
    assert_int_equal(p->comm[0].start, T0 + 5 * MS);
    assert_int_equal(p->comm[0].rank, 1);
    assert_true(has_damage(p, "5 record(s) with a malformed payload skipped"));
    assert_int_equal(p->end_mono, T0 + 10 * MS);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* String ids are dense from 1: one beyond what the file could hold (its size over the
 * smallest STRING record) defines nothing, and a range naming it has no name; a near id
 * names its range. */
static void test_string_id_beyond_file(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = one_file(dir, sizeof dir, "bounds-str");
    synth_string(f, 1, 1, "near");
    synth_string(f, 1, 1000000, "far");
    synth_push_sid(f, 1, T0 + MS, 1, 0, 0);
    synth_pop(f, 1, T0 + 2 * MS, 0);
    synth_push_sid(f, 1, T0 + 3 * MS, 1000000, 0, 0);
    synth_pop(f, 1, T0 + 4 * MS, 0);
    synth_end_of_file(f, T0 + 5 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    char path[600];
    snprintf(path, sizeof path, "%s/h-4242.tprof", dir);
    assert_true(synth_file_size(path) < 1000000 * 24); /* id 1000000 cannot be dense */

    tp_run run;
    load(dir, &run);
    const tp_thread *t = &run.procs[0].threads[0];
    assert_int_equal(t->nranges, 2);
    assert_string_equal(t->ranges[0].name, "near");
    assert_string_equal(t->ranges[1].name, "(unknown name)");
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* Steps whose times run backwards or overlap the previous step are left out; the others
 * keep their program's numbers. */
static void test_overlapping_steps(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = one_file(dir, sizeof dir, "bounds-steps");
    synth_step_begin(f, 1, T0 + 1 * MS, 0);
    synth_step_end(f, 1, T0 + 5 * MS, 0);
    synth_step_begin(f, 1, T0 + 3 * MS, 1); /* inside step 0 */
    synth_step_end(f, 1, T0 + 8 * MS, 1);
    synth_step_begin(f, 1, T0 + 9 * MS, 2);
    synth_step_end(f, 1, T0 + 10 * MS, 2);
    synth_step_begin(f, 1, T0 + 20 * MS, 3); /* ends before it begins */
    synth_step_end(f, 1, T0 + 15 * MS, 3);
    synth_end_of_file(f, T0 + 30 * MS, 0);
    assert_int_equal(synth_close(f), 0);

    tp_run run;
    load(dir, &run);
    tp_steps s;
    assert_int_equal(tp_find_steps(&run.procs[0], NULL, 1, &s), 0);
    assert_int_equal(s.source, TP_STEPS_API);
    assert_int_equal(s.nsteps, 2);
    assert_int_equal(s.steps[0].start, T0 + 1 * MS);
    assert_int_equal(s.steps[0].end, T0 + 5 * MS);
    assert_int_equal(s.steps[0].app_step, 0);
    assert_int_equal(s.steps[1].start, T0 + 9 * MS);
    assert_int_equal(s.steps[1].end, T0 + 10 * MS);
    assert_int_equal(s.steps[1].app_step, 2);
    assert_int_equal(s.nwarmup, 1);
    assert_ptr_equal(tp_steps_measured(&s), &s.steps[1]);
    tp_steps_free(&s);

    /* no step source: no array, and no measured steps */
    memset(&s, 0, sizeof s);
    assert_null(tp_steps_measured(&s));
    tp_run_free(&run);
    synth_rmtree(dir);
}

static void test_saturating_sums(void **state) {
    (void)state;
    assert_true(tp_add_sat(INT64_MAX, 1) == INT64_MAX);
    assert_true(tp_add_sat(INT64_MIN, -1) == INT64_MIN);
    assert_true(tp_add_sat(-5, 3) == -2);
    assert_true(tp_sub_sat(INT64_MIN, 1) == INT64_MIN);
    assert_true(tp_sub_sat(INT64_MAX, -1) == INT64_MAX);
    assert_true(tp_sub_sat(1700000000000000000, -8792996353455643545) == INT64_MAX);
    assert_true(tp_sub_sat(7, 9) == -2);
    /* device memory: + allocation, - release; sizes from the file are u64 */
    assert_true(tp_mem_step(100, 28, 1) == 128);
    assert_true(tp_mem_step(100, 28, 0) == 72);
    assert_true(tp_mem_step(0, UINT64_MAX, 1) == INT64_MAX);
    assert_true(tp_mem_step(INT64_MAX - 1, 5, 1) == INT64_MAX);
    assert_true(tp_mem_step(0, (uint64_t)1 << 63, 0) == -INT64_MAX);
    assert_true(tp_mem_step(INT64_MIN + 5, (uint64_t)1 << 63, 0) == INT64_MIN);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_pair_beyond),
        cmocka_unit_test(test_records_beyond_skipped),
        cmocka_unit_test(test_string_id_beyond_file),
        cmocka_unit_test(test_overlapping_steps),
        cmocka_unit_test(test_saturating_sums),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
