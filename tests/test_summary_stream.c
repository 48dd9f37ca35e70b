/*
 * test_summary_stream.c — a summary's slim block streamed to and from its file (summary.h,
 * tp_sum_stream_write, tp_summary_slim_decode_file) rather than held whole in memory beside
 * the process it codes: through windows of every size from 1 byte, the bytes on disk and
 * their CRC are the block coded in memory, read back they decode to the same process, and a
 * body cut short decodes to none. A temporary file a dead writer left is removed when its
 * summary is written, or found current by `summarize`. Inputs: the synthetic runs of
 * slim_runs.h (four ranks and a node sampler, a sampler of more GPU metrics than a packed
 * table holds), a sampler of 80,000 samples, and diag_scen.c's diagnosis scenarios.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "analysis/model.h"
#include "analysis/summary.h"
#include "slim_runs.h"
#include "synth.h"
#include "trainprof.h"

/* Slim process p's block streamed through windows of every size from 1 byte (strings and
 * arrays across their edge, a thread's packed samples larger than the window going straight
 * to and from the file) is the block coded in memory, byte for byte, with its CRC; read
 * back streamed it gives the same process (coded again, the same bytes). */
static void streamed_same(tp_run *run, tp_process *p) {
    tp_sum_buf m = {0};
    tp_sum_slim(&m, p, 0);
    assert_false(m.bad);
    uint32_t want = (uint32_t)crc32(crc32(0L, Z_NULL, 0), m.b, (uInt)m.len);
    static const size_t windows[] = {1, 2, 3, 7, 64, 4096, 1u << 20};
    for (size_t w = 0; w < sizeof windows / sizeof *windows; w++) {
        FILE *f = tmpfile();
        assert_non_null(f);
        tp_sum_buf out = {0};
        assert_int_equal(tp_sum_stream_write(&out, fileno(f), windows[w]), 0);
        tp_sum_slim(&out, p, 0);
        assert_true(tp_sum_stream_end(&out) == want);
        assert_false(out.bad);
        assert_int_equal(out.len, m.len);
        free(out.b);
        unsigned char *disk = malloc(m.len + 1);
        assert_non_null(disk);
        rewind(f);
        assert_int_equal(fread(disk, 1, m.len + 1, f), m.len);
        assert_memory_equal(disk, m.b, m.len);
        free(disk);
        rewind(f);
        tp_process q;
        uint32_t crc = 0;
        assert_int_equal(
            tp_summary_slim_decode_file(run, f, 0, m.len, windows[w], &crc, &q), 1);
        assert_true(crc == want);
        tp_sum_buf again = {0};
        tp_sum_slim(&again, &q, 0);
        assert_int_equal(again.len, m.len);
        assert_memory_equal(again.b, m.b, m.len);
        free(again.b);
        tp_process_free(&q);
        /* the body cut short: no process, whatever the window */
        FILE *half = tmpfile();
        assert_non_null(half);
        assert_int_equal(fwrite(m.b, 1, m.len / 2, half), m.len / 2);
        rewind(half);
        assert_int_equal(
            tp_summary_slim_decode_file(run, half, 0, m.len, windows[w], &crc, &q), 0);
        for (size_t i = 0; i < sizeof q; i++) assert_int_equal(((unsigned char *)&q)[i], 0);
        fclose(half);
        fclose(f);
    }
    free(m.b);
}

static void streamed_runs(const char *const *ops, size_t nops, int must_compare) {
    (void)must_compare;
    tp_run run;
    char err[512];
    assert_int_equal(tp_run_load_slim(ops, nops, &run, err, sizeof err), 0);
    for (size_t i = 0; i < run.nprocs; i++) streamed_same(&run, &run.procs[i]);
    tp_run_free(&run);
}

static void slim_streamed(void **state) {
    (void)state;
    void (*const runs[])(const char *) = {four_ranks_run, slim_wide_sampler_run,
                                          slim_long_sampler_run};
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
        char dir[512];
        assert_int_equal(synth_tmpdir(dir, sizeof dir, "summary-streamed"), 0);
        runs[i](dir);
        const char *ops[] = {dir};
        streamed_runs(ops, 1, 1);
        synth_rmtree(dir);
    }
    slim_scenarios(streamed_runs);
}

/* A temporary file of a summary (`<summary>.tmp.<host>.<pid>.<tid>`) left by a writer of this
 * host that died is removed when that summary is written; one of a live process (the test's
 * parent) or of another host (one whose name is ours and more) stays. */
static void tmp_left_by_dead_writer(void **state) {
    (void)state;
    char dir[512], file[700], sum[800], host[65] = "", why[256];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "summary-tmp-left"), 0);
    four_ranks_run(dir);
    snprintf(file, sizeof file, "%s/h0-90.tprof", dir);
    snprintf(sum, sizeof sum, "%s%s", file, TP_SUMMARY_SUFFIX);
    if (gethostname(host, sizeof host - 1) != 0 || strchr(host, '/')) host[0] = 0;
    pid_t dead = fork();
    assert_true(dead >= 0);
    if (!dead) _exit(0);
    assert_int_equal(waitpid(dead, NULL, 0), dead);
    char left[4][1000];
    snprintf(left[0], sizeof left[0], "%s.tmp.%s.%ld.7", sum, host, (long)dead);
    snprintf(left[1], sizeof left[1], "%s.tmp.%s.%ld.7", sum, host, (long)getppid());
    snprintf(left[2], sizeof left[2], "%s.tmp.%s-elsewhere.%ld.7", sum, host, (long)dead);
    /* host "<ours>.<dead pid>"'s */
    snprintf(left[3], sizeof left[3], "%s.tmp.%s.%ld.%ld.7", sum, host, (long)dead, (long)dead);
    for (int i = 0; i < 4; i++) {
        FILE *f = fopen(left[i], "w");
        assert_non_null(f);
        assert_int_equal(fclose(f), 0);
    }
    assert_int_equal(tp_summary_write_slim(file, why, sizeof why), 0);
    assert_int_equal(access(sum, F_OK), 0);
    assert_int_equal(access(left[0], F_OK), -1);
    assert_int_equal(access(left[1], F_OK), 0);
    assert_int_equal(access(left[2], F_OK), 0);
    assert_int_equal(access(left[3], F_OK), 0);
    synth_rmtree(dir);
}

/* `summarize` removes the temporary files dead writers of this host left beside each summary
 * of its files, a rank's and the others', whether it writes them (the first round) or finds
 * them all current (the second); the one of a summary that is not its files' stays. */
static void tmp_left_beside_current(void **state) {
    (void)state;
    char dir[512], host[65] = "", stranger[1200];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "summary-tmp-current"), 0);
    four_ranks_run(dir);
    if (gethostname(host, sizeof host - 1) != 0 || strchr(host, '/')) host[0] = 0;
    pid_t dead = fork();
    assert_true(dead >= 0);
    if (!dead) _exit(0);
    assert_int_equal(waitpid(dead, NULL, 0), dead);
    snprintf(stranger, sizeof stranger, "%s/other.tprof%s.tmp.%s.%ld.7", dir, TP_SUMMARY_SUFFIX,
             host, (long)dead);
    FILE *sf = fopen(stranger, "w");
    assert_non_null(sf);
    assert_int_equal(fclose(sf), 0);
    const char *ops[] = {dir};
    for (int round = 0; round < 2; round++) {
        tp_run run;
        char err[512], left[16][1200];
        size_t nleft = 0;
        assert_int_equal(tp_run_load_slim(ops, 1, &run, err, sizeof err), 0);
        for (size_t i = 0; i < run.nprocs && nleft < 16; i++) {
            char sum[1100];
            if (!run.procs[i].slim || tp_summary_path(&run.procs[i], sum, sizeof sum)) continue;
            snprintf(left[nleft], sizeof left[nleft], "%s.tmp.%s.%ld.7", sum, host, (long)dead);
            FILE *f = fopen(left[nleft++], "w");
            assert_non_null(f);
            assert_int_equal(fclose(f), 0);
        }
        assert_true(nleft >= 4);
        tp_summarize_stats st = {0};
        assert_int_equal(tp_report_summarize(&run, NULL, NULL, &st), TPROF_OK);
        assert_int_equal(st.failed, 0);
        assert_int_equal(round ? st.current : st.written, st.files);
        for (size_t i = 0; i < nleft; i++) assert_int_equal(access(left[i], F_OK), -1);
        assert_int_equal(access(stranger, F_OK), 0);
        tp_summarize_stats_free(&st);
        tp_run_free(&run);
    }
    synth_rmtree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(slim_streamed),
                                       cmocka_unit_test(tmp_left_by_dead_writer),
                                       cmocka_unit_test(tmp_left_beside_current)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
