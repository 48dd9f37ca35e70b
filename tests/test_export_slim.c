/*
 * test_export_slim.c — the exports of a slim run (tp_run_load_slim, memos filled by
 * tp_export_fill_memos, each rank file read again whole just before its events are written)
 * are those of the whole run, byte for byte: the merged Chrome trace, each rank's file and
 * the Perfetto trace, with no selection and with --ranks, --steps and --time (export_same.h).
 * Inputs: the two-rank GPU run HTA reads (hta_run.h); a run of four ranks on two hosts with
 * NCCL ops timed by their kernels, named steps, a rank killed inside open ranges, a node
 * sampler of two GPUs (rank 0's is the second, known from its GPU records alone) and a rank
 * sampling NVML for its host, and a helper; the diagnosis scenarios of
 * diag_scen.c (two hosts with a clock error, a late rank, memory records, ...); every rank
 * file of the fuzz corpus alone and the corpus as one run, with a torch.profiler trace. The
 * exporters' own tests (test_chrome.c, test_perfetto.c, test_chrome_hta.c) check their runs
 * the same way.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis/model.h"
#include "diag_scen.h"
#include "export_same.h"
#include "slim_runs.h"
#include "format/format.h"
#include "hta_run.h"
#include "synth.h"

static void hta(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "export-slim-hta"), 0);
    assert_int_equal(hta_write_run(dir), 0);
    const char *ops[] = {dir};
    /* 5 selections: merged and perfetto each, and the selected ranks' files */
    assert_int_equal(export_same(ops, 1, NULL), 5 * 2 + 2 + 1 + 2 + 2 + 1);
    synth_rmtree(dir);
}

static void four_ranks(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "export-slim-four"), 0);
    for (int r = 0; r < 4; r++) four_ranks_write(dir, r);
    /* the node sampler of host h0, and a helper of rank 0 (its parent) with a range */
    synth_file *f = synth_open(dir, "h0", 90, RT0, T0);
    synth_meta(f, "trainprof.role", "node-sampler");
    synth_meta(f, "nvml.devices", "0,1");
    synth_thread(f, 1, 90);
    for (int s = 0; s < 20; s++) {
        synth_counter(f, 1, T0 + (uint64_t)s * 5 * MS, "gpu0.power_w", 250 + s);
        synth_counter(f, 1, T0 + (uint64_t)s * 5 * MS, "gpu1.power_w", 150 + s);
    }
    synth_end_of_file(f, T0 + 200 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    synth_header h;
    memset(&h, 0, sizeof h);
    h.host = "h0";
    h.pid = 91;
    h.ppid = 100;
    h.start_realtime_ns = RT0;
    h.start_mono_ns = T0;
    f = synth_open_ex(dir, &h);
    synth_thread(f, 1, 91);
    synth_push(f, 1, T0 + MS, "data", 0, 0);
    synth_pop(f, 1, T0 + 3 * MS, 0);
    synth_end_of_file(f, T0 + 200 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    const char *ops[] = {dir};
    assert_true(export_same(ops, 1, NULL) > 20);
    assert_true(export_same(ops, 1, "train_step") > 20);
    synth_rmtree(dir);
}

static void scenarios(void **state) {
    (void)state;
    scen v[5];
    for (int i = 0; i < 5; i++) v[i] = scen_base();
    v[1].nranks = 4, v[1].hosts = 2, v[1].clock_err = 3 * (int64_t)MS, v[1].lag_rank = 2,
    v[1].lag = 2 * MS;
    v[2].short_kernels = 1, v[2].sync = 1;
    v[3].data = 2 * MS, v[3].buckets = 3;
    v[4].alloc_share = 0.95, v[4].mem_share = 0.97;
    for (int i = 0; i < 5; i++) {
        char dir[512];
        assert_int_equal(synth_tmpdir(dir, sizeof dir, "export-slim-scen"), 0);
        for (int r = 0; r < v[i].nranks; r++) scen_write_rank(dir, &v[i], r);
        const char *ops[] = {dir};
        assert_true(export_same(ops, 1, NULL) > 0);
        synth_rmtree(dir);
    }
}

/* export_same, which must find something to compare where asked to. */
static void exports_same(const char *const *ops, size_t n, int must_compare) {
    size_t compared = export_same(ops, n, NULL); /* a file that cannot be read compares nothing */
    if (must_compare) assert_true(compared > 0);
}

static void corpus(void **state) {
    (void)state;
    slim_corpus(exports_same);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hta),
        cmocka_unit_test(four_ranks),
        cmocka_unit_test(scenarios),
        cmocka_unit_test(corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
