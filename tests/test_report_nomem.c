/*
 * test_report_nomem.c — a report whose making runs out of memory says so. Each allocation of
 * the analyses (analysis/alloc.h) is refused in turn, one per report, the report made as the
 * command makes it (the run loaded slim, the sections on one thread and spilled, the text,
 * the JSON and the HTML written), and every outcome must be one the user can tell from the
 * whole report:
 *   - the load or the report fails with TPROF_ERR_NO_MEMORY (the command's error line), or
 *   - a writer fails or memory ran out while the output was written (the command's error), or
 *   - the output is the whole report's, byte for byte, or
 *   - it says where memory ran out: the note of a rank (TP_SECTION_NO_MEMORY) or of the run
 *     (TP_RUN_NO_MEMORY); and any refusal while the report was made gives such a note, so a
 *     report without one is whole.
 * Runs: a straggler scenario (4 ranks on 2 hosts, rank 2 late at every collective: clocks,
 * stragglers, the diagnosis rules) and the slim tests' four ranks (GPU kernels and API calls,
 * NCCL ops, a rank killed inside open ranges, a node sampler and a helper), each also read
 * from its summaries (trainprof summarize), where the refusal may fall in a summary's read;
 * and a job of MPI calls whose sections read their ops apart (16 held), the calls' spans in
 * sorted runs on disk (span_store.h) walked by the exposure and the step breakdown.
 * A stride through the allocations keeps it to seconds; NOMEM_SWEEP_ALL=1 refuses each.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/alloc.h"
#include "analysis/comm.h"
#include "analysis/results.h"
#include "analysis/summary.h"
#include "diag_scen.h"
#include "slim_runs.h"
#include "synth.h"
#include "trainprof.h"

enum outcome { LOAD_FAILED, MAKE_FAILED, WRITE_SHORT, WRITTEN };

/* The ops a section holds (tp_report_opts.comm_ops; 0: the default). */
static size_t g_comm_ops;

/* The report of dir as `trainprof report` makes it, text then JSON then HTML, into *out
 * (owned; NULL unless WRITTEN); *refused: whether an allocation was refused while the run
 * was loaded and the report made. */
static enum outcome report_of(const char *dir, char **out, int *refused) {
    const char *ops[] = {dir};
    *out = NULL;
    unsigned long nomem = tp_nomem_process();
    tp_run run;
    char err[512];
    int rc = tp_run_load_slim(ops, 1, &run, err, sizeof err);
    if (rc != TPROF_OK) {
        assert_int_equal(rc, TPROF_ERR_NO_MEMORY);
        tp_run_free(&run); /* what the load made before it failed (as the command does) */
        return LOAD_FAILED;
    }
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.threads = 1; /* one thread allocates at a time: the k-th allocation is always the same */
    o.comm_ops = g_comm_ops;
    tp_report rep;
    rc = tp_report_make_spilled(&run, &o, &rep);
    if (rc != TPROF_OK) {
        assert_int_equal(rc, TPROF_ERR_NO_MEMORY);
        tp_run_free(&run);
        return MAKE_FAILED;
    }
    *refused = tp_nomem_process() != nomem;
    nomem = tp_nomem_process();
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    int w = tp_report_write_text(&rep, f, 0);
    w |= tp_report_write_doc(&rep, f);
    tp_report_sections_once(&rep);
    w |= tp_html_write(&rep, &o, f);
    fclose(f);
    tp_report_free(&rep);
    tp_run_free(&run);
    if (w || tp_nomem_process() != nomem) {
        free(buf);
        return WRITE_SHORT;
    }
    *out = buf;
    return WRITTEN;
}

/* Every allocation of dir's report refused in turn (all of them, or a stride through them
 * where there are more than `most`): each outcome is one of the file's list. Returns how
 * many reports said where memory ran out. */
static size_t sweep(const char *dir, size_t most) {
    if (getenv("NOMEM_SWEEP_ALL")) most = SIZE_MAX; /* every allocation: minutes, not seconds */
    char *whole;
    int refused = 0;
    tp_alloc_fail_at(ULONG_MAX); /* counts, refuses none */
    assert_int_equal(report_of(dir, &whole, &refused), WRITTEN);
    unsigned long n = tp_alloc_fail_at(0);
    assert_false(refused);
    assert_true(n > 100);
    unsigned long stride = n > most ? n / most + 1 : 1;
    size_t noted = 0, same = 0, failed = 0, section_only = 0, run_only = 0;
    for (unsigned long k = 1; k <= n; k += stride) {
        char *got;
        tp_alloc_fail_at(k);
        enum outcome r = report_of(dir, &got, &refused);
        tp_alloc_fail_at(0);
        if (r != WRITTEN) {
            failed++;
            continue;
        }
        int note = strstr(got, TP_SECTION_NO_MEMORY) || strstr(got, TP_RUN_NO_MEMORY);
        if (refused && !note) fprintf(stderr, "allocation %lu of %lu: refused, no note\n", k, n);
        if (!note && strcmp(got, whole)) {
            size_t i = 0;
            while (got[i] && got[i] == whole[i]) i++;
            size_t from = i > 100 ? i - 100 : 0;
            fprintf(stderr, "allocation %lu of %lu: differs at byte %zu without a note:\n"
                            "whole: %.300s\ngot:   %.300s\n", k, n, i, whole + from, got + from);
        }
        assert_true(note || !refused);
        assert_true(note || !strcmp(got, whole));
        noted += note;
        same += !strcmp(got, whole);
        /* each note where its refusal was: a section's alone, or the run's alone */
        int in_section = strstr(got, TP_SECTION_NO_MEMORY) != NULL;
        int in_run = strstr(got, TP_RUN_NO_MEMORY) != NULL;
        section_only += in_section && !in_run;
        run_only += in_run && !in_section;
        free(got);
    }
    fprintf(stderr, "%s: %lu allocations, every %lu-th refused: %zu reports noted (%zu a "
                    "section alone, %zu the run alone), %zu whole, %zu failed with an error\n",
            dir, n, stride, noted, section_only, run_only, same, failed);
    assert_true(section_only > 0);
    assert_true(run_only > 0);
    free(whole);
    return noted;
}

/* dir swept as it is, then from the summaries trainprof summarize writes. */
static void sweep_both(const char *dir, size_t most) {
    assert_true(sweep(dir, most) > 0);
    const char *ops[] = {dir};
    tp_run run;
    char err[512];
    assert_int_equal(tp_run_load_slim(ops, 1, &run, err, sizeof err), TPROF_OK);
    tp_summarize_stats st;
    assert_int_equal(tp_report_summarize(&run, NULL, NULL, &st), TPROF_OK);
    assert_true(st.written > 0);
    tp_summarize_stats_free(&st);
    tp_run_free(&run);
    assert_true(sweep(dir, most) > 0);
}

static void straggler_run(void **state) {
    (void)state;
    scen sc = scen_base();
    sc.nranks = 4, sc.hosts = 2, sc.lag_rank = 2, sc.lag = 2 * MS, sc.buckets = 2;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-nomem-straggler"), 0);
    for (int r = 0; r < sc.nranks; r++) scen_write_rank(dir, &sc, r);
    sweep_both(dir, 1500);
    synth_rmtree(dir);
}

static void four_ranks(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-nomem-four"), 0);
    four_ranks_run(dir);
    sweep_both(dir, 1500);
    synth_rmtree(dir);
}

/* Two ranks of a job of MPI calls, 40 steps of 10 ms with 30 calls each (some nonblocking:
 * the host's overlapped communication; some unfinished), rank 1 with a GEMM a step on its
 * GPU (the exposure and the breakdown on the GPU basis, rank 0's on the host's), read with
 * 16 ops a section: their spans go to disk in runs of 16. */
static void mpi_apart(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-nomem-mpi"), 0);
    uint64_t rs = 88172645463325252ull;
    for (int r = 0; r < 2; r++) {
        synth_file *f = synth_open(dir, "h", 4000 + r, RT0, T0);
        assert_non_null(f);
        synth_rank(f, r, 2);
        synth_thread(f, 1, 4000 + r);
        synth_thread(f, 2, 5000 + r);
        if (r) synth_meta(f, "capability.cupti", "activity capture on: 8 kinds");
        for (int s = 0; s < 40; s++) {
            uint64_t b = T0 + (uint64_t)s * 10 * MS;
            synth_step_begin(f, 1, b, (uint64_t)s);
            if (r) synth_kernel(f, 2, b + 200 * US, b + 3 * MS, 0, 7, 0, "sm90_gemm_bf16");
            for (int k = 0; k < 30; k++) {
                rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
                tprof_pl_comm m;
                memset(&m, 0, sizeof m);
                m.op = rs % 3 ? TPROF_COMM_ALLREDUCE : TPROF_COMM_BARRIER;
                m.comm_hash = 0x77 + rs % 3;
                m.nranks = 2;
                m.rank = (uint32_t)r;
                m.bytes = 64;
                m.peer = TPROF_COMM_NO_PEER;
                m.source = TPROF_COMM_SRC_MPI;
                m.seq = (uint32_t)(30 * s + k);
                uint64_t t = b + (uint64_t)(1 + k) * 300 * US;
                m.end_ns = t + 50 * US + (rs >> 8) % (200 * US);
                if (rs % 8 == 0) m.flags |= TPROF_COMM_F_NONBLOCKING, m.end_ns += 600 * US;
                if (rs % 8 == 1) m.flags |= TPROF_COMM_F_UNFINISHED, m.end_ns = t;
                synth_comm(f, 1, t, &m, NULL);
            }
            synth_step_end(f, 1, b + 10 * MS, (uint64_t)s);
        }
        synth_end_of_file(f, T0 + 41 * 10 * MS, 0);
        assert_int_equal(synth_close(f), 0);
    }
    g_comm_ops = 16;
    size_t opened = tp_comm_streams_opened();
    sweep_both(dir, 1500);
    assert_true(tp_comm_streams_opened() > opened); /* the sections read their ops apart */
    g_comm_ops = 0;
    synth_rmtree(dir);
}

int main(void) {
    tp_alloc_json_hooks(); /* the document's nodes counted, as in the command */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(straggler_run),
        cmocka_unit_test(four_ranks),
        cmocka_unit_test(mpi_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
