/*
 * test_report_slim.c — the report of a slim run (tp_run_load_slim: each rank file read again
 * whole for its section, its bulky records dropped after) is the report of the whole run,
 * byte for byte in JSON, text and HTML, on one thread and on several; and a slim run holds
 * no GPU record, API call, allocation or mark and at most a stack of ranges per thread.
 * Inputs: a synthetic run of four ranks (GPU kernels and API calls, NCCL ops, named steps,
 * one rank killed inside open ranges, one rank sampling NVML for its host), a node sampler
 * and a helper; every rank file of the fuzz corpus alone; and the whole corpus as one run
 * (processes of many kinds sharing ranks, damaged files), with a torch.profiler trace; and the
 * diagnosis scenarios of diag_scen.c (two hosts, a late rank, memory, throttling, ...).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "analysis/counter_pack.h"
#include "analysis/energy.h"
#include "analysis/model.h"
#include "analysis/report.h"
#include "analysis/stats.h"
#include "analysis/step_pack.h"
#include "analysis/steps.h"
#include "export/html.h"
#include "diag_scen.h"
#include "format/format.h"
#include "slim_runs.h"
#include "synth.h"
#include "trainprof.h"
#include "report_text.h"

/* The JSON, text and HTML of the report of `ops` loaded whole or slim, with `threads`
 * section threads, into one string (owned). */
static char *render(const char *const *ops, size_t nops, int slim, int threads) {
    tp_run run;
    char err[512];
    int rc = slim ? tp_run_load_slim(ops, nops, &run, err, sizeof err)
                  : tp_run_load_list(ops, nops, &run, err, sizeof err);
    if (rc != 0) return strdup(err);
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.threads = threads;
    o.step_name = getenv("SLIM_TEST_STEP_NAME");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    slim_render(&run, &o, f);
    if (slim) {
        /* what stays of a slim run: no bulky record, a stack of ranges at most per thread */
        for (size_t i = 0; i < run.nprocs; i++) {
            const tp_process *p = &run.procs[i];
            if (!p->slim) continue;
            assert_int_equal(p->ngpu + p->napi + p->novh + p->ngmem, 0);
            /* steps and step events packed (step_pack.h), at most 12 bytes a step event
             * and 10 a step on these runs (their 24 and 32 unpacked) */
            uint8_t *b = NULL;
            size_t blen = 0;
            if (p->steps_memo && p->steps_memo->nsteps && p->steps_memo->steps) /* can't be */
                assert_int_equal(tp_steps_pack(p->steps_memo->steps, p->steps_memo->nsteps, &b,
                                               &blen), -1);
            else if (p->steps_memo && p->steps_memo->nsteps)
                assert_true(p->steps_memo->packed_len <= 10 * p->steps_memo->nsteps);
            for (size_t t = 0; t < p->nthreads; t++) {
                const tp_thread *th = &p->threads[t];
                /* the GPU samples alone, which the run-level readers read */
                tp_counter_it it;
                tp_counter c;
                assert_int_equal(tp_counter_it_init(&it, th), 0);
                while (tp_counter_next(&it, &c)) assert_true(tp_slim_keeps_counter(c.name));
                assert_int_equal(tp_counter_it_done(&it), 0);
                if (p->rank == 2 && t == 2) assert_int_equal(th->ncounters, 12);
                if (th->nsteps && th->steps) /* can't be */
                    assert_int_equal(tp_stepevs_pack(th->steps, th->nsteps, &b, &blen), -1);
                else
                    assert_true(!th->nsteps || ((th->steps_packed || th->steps_spilled) &&
                                                th->steps_packed_len <= 12 * th->nsteps));
                assert_int_equal(p->threads[t].nmarks, 0);
                assert_true(p->threads[t].nranges <= 64);
            }
        }
    }
    fclose(f);
    tp_run_free(&run);
    return buf;
}

static void same_reports(const char *const *ops, size_t nops) {
    char *whole = render(ops, nops, 0, 1);
    for (int threads = 1; threads <= 3; threads++) {
        char *slim = render(ops, nops, 1, threads);
        char label[32];
        snprintf(label, sizeof label, "%d threads", threads);
        slim_same(ops[0], label, "whole", whole, "slim ", slim);
        free(slim);
    }
    free(whole);
}

static void synthetic_run(void **state) {
    (void)state;
    char top[512], dir[600];
    assert_int_equal(synth_tmpdir(top, sizeof top, "report-slim"), 0);
    /* a directory name that is not UTF-8: the files are read again by the names they had */
    snprintf(dir, sizeof dir, "%s/run-\xff\xfe-\x01-\"q\"", top);
    assert_int_equal(mkdir(dir, 0755), 0);
    four_ranks_run(dir); /* with the node sampler of host h0, and a helper of rank 0 */
    const char *ops[] = {dir};
    same_reports(ops, 1);
    setenv("SLIM_TEST_STEP_NAME", "train_step", 1);
    same_reports(ops, 1);
    unsetenv("SLIM_TEST_STEP_NAME");
    synth_rmtree(top);
}

static void reports_same(const char *const *ops, size_t n, int must_compare) {
    (void)must_compare; /* same_reports compares whatever loads */
    same_reports(ops, n);
}

/* The diagnosis scenarios (diag_scen.h): the cross-rank analyses (clocks over two hosts,
 * stragglers, the rules) read what a slim run keeps. */
static void scenarios(void **state) {
    (void)state;
    slim_scenarios(reports_same);
}

/* A rank file of 19 MB: the loader gives the pages it has read back as it goes
 * (tprof__reader_release, in steps of 8 MiB) and sizes its arrays by the slim load's counts;
 * the report is the same. */
static void large_rank(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-slim-large"), 0);
    synth_file *f = synth_open(dir, "h", 7, RT0, T0);
    synth_rank(f, 0, 1);
    synth_thread(f, 1, 7);
    synth_thread(f, 2, 8);
    synth_string(f, 2, 1, "ampere_gemm_kernel");
    synth_string(f, 2, 2, "flash_fwd_kernel");
    uint32_t corr = 1;
    for (int s = 0; s < 2000; s++) {
        uint64_t b = T0 + MS + (uint64_t)s * 10 * MS;
        synth_step_begin(f, 1, b, (uint64_t)s);
        for (int k = 0; k < 150; k++) {
            uint64_t ks = b + (uint64_t)k * 60 * US + 1000;
            tprof_pl_gpu pl = {ks + 40 * US + (uint64_t)((s * 7 + k) % 13) * 100, 0, 0, 7,
                               corr++, 0, 0, 0};
            synth_raw(f, 2, TPROF_REC_GPU_KERNEL, 1 + (uint32_t)(k % 2), ks, &pl, sizeof pl,
                      NULL, 0);
        }
        synth_step_end(f, 1, b + 10 * MS, (uint64_t)s);
        synth_flush(f);
    }
    synth_end_of_file(f, T0 + 30000 * MS, 0);
    const char *path = synth_path(f);
    char file[1024];
    snprintf(file, sizeof file, "%s", path);
    assert_int_equal(synth_close(f), 0);
    assert_true(synth_file_size(file) > 16 << 20);
    const char *ops[] = {dir};
    same_reports(ops, 1);
    synth_rmtree(dir);
}

/* Step events and steps packed (step_pack.h) come back exactly: any values, those a damaged
 * or forged file may hold included (times that run backwards, numbers that wrap); what the
 * flag bits cannot hold is refused; bytes that are short, long or unterminated are damage. */
static void step_packing(void **state) {
    (void)state;
    enum { N = 12 };
    const tp_stepev ev[N] = {
        {0, T0, 1}, {0, T0 + 10 * MS, 0}, {1, T0 + 10 * MS + 50, 1}, {1, T0 + 20 * MS, 0},
        {7, T0 + 5, 1}, {3, UINT64_MAX, 0}, {UINT64_MAX, 0, 1}, {0, 1, 0},
        {(1ull << 62) - 1, 2, 1}, {0, UINT64_MAX - 1, 1}, {5, 3, 0}, {5, 3, 0}};
    const tp_step st[N] = {
        {T0, T0 + MS, 0, 1}, {T0 + MS, T0 + 2 * MS, 1, 0}, {T0 + 3 * MS, T0 + MS, 9, 0},
        {0, UINT64_MAX, 3, 1}, {UINT64_MAX, 0, UINT64_MAX, 0}, {5, 5, 0, 1}, {5, 5, 0, 0},
        {1, 2, (1ull << 62) - 1, 0}, {9, 8, 0, 1}, {0, 0, 1, 0}, {2, 1, 2, 0}, {2, 1, 3, 1}};
    uint8_t *b = NULL;
    size_t len = 0;
    tp_stepev eo[N + 1];
    tp_step so[N + 1];
    for (size_t n = 1; n <= N; n++) {
        assert_int_equal(tp_stepevs_pack(ev, n, &b, &len), 0);
        assert_int_equal(tp_stepevs_unpack(b, len, eo, n), 0);
        for (size_t i = 0; i < n; i++) {
            assert_true(eo[i].step == ev[i].step && eo[i].ts == ev[i].ts);
            assert_int_equal(eo[i].begin, ev[i].begin);
        }
        /* one element more than it holds; one byte short; one byte more */
        assert_int_equal(tp_stepevs_unpack(b, len, eo, n + 1), -1);
        assert_int_equal(tp_stepevs_unpack(b, len - 1, eo, n), -1);
        free(b);
        assert_int_equal(tp_steps_pack(st, n, &b, &len), 0);
        assert_int_equal(tp_steps_unpack(b, len, so, n), 0);
        for (size_t i = 0; i < n; i++) {
            assert_true(so[i].start == st[i].start && so[i].end == st[i].end);
            assert_true(so[i].app_step == st[i].app_step);
            assert_int_equal(so[i].warmup, st[i].warmup);
        }
        assert_int_equal(tp_steps_unpack(b, len, so, n + 1), -1);
        assert_int_equal(tp_steps_unpack(b, len - 1, so, n), -1);
        if (n > 1) assert_int_equal(tp_steps_unpack(b, len, so, n - 1), -1);
        free(b);
    }
    /* a varint that never ends (eleven bytes with the high bit) */
    const uint8_t bad[11] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    assert_int_equal(tp_stepevs_unpack(bad, sizeof bad, eo, 1), -1);
    /* refused: a flag other than 0 or 1, a number's difference of 2^62 or more either way */
    tp_stepev e2[2] = {{0, 1, 2}, {0, 2, 0}};
    assert_int_equal(tp_stepevs_pack(e2, 1, &b, &len), -1);
    assert_null(b);
    e2[0].begin = 1;
    e2[1].step = 1ull << 62;
    assert_int_equal(tp_stepevs_pack(e2, 2, &b, &len), -1);
    e2[1].step = 0 - (1ull << 62) - 1;
    assert_int_equal(tp_stepevs_pack(e2, 2, &b, &len), -1);
    e2[1].step = 0 - (1ull << 62); /* -2^62 fits: zigzag 2^63 - 1 */
    assert_int_equal(tp_stepevs_pack(e2, 2, &b, &len), 0);
    assert_int_equal(tp_stepevs_unpack(b, len, eo, 2), 0);
    assert_true(eo[1].step == e2[1].step);
    free(b);
    tp_step s2[1] = {{1, 2, 3, -1}};
    assert_int_equal(tp_steps_pack(s2, 1, &b, &len), -1);
    /* a training loop's: 100 ms steps 50 us apart, numbered in order: 8 bytes a step (its
     * start 3 bytes, its length 4, its number and flag 1: a quarter of tp_step's 32) and 9
     * bytes the two step events of a step (their 48) */
    enum { M = 1000 };
    tp_step *loop = calloc(M, sizeof *loop);
    tp_stepev *lev = calloc(2 * M, sizeof *lev);
    assert_true(loop && lev);
    for (size_t i = 0; i < M; i++) {
        loop[i] = (tp_step){T0 + i * (100 * MS + 50 * US), T0 + i * (100 * MS + 50 * US) + 100 * MS,
                            i, i < 3};
        lev[2 * i] = (tp_stepev){i, loop[i].start, 1};
        lev[2 * i + 1] = (tp_stepev){i, loop[i].end, 0};
    }
    assert_int_equal(tp_steps_pack(loop, M, &b, &len), 0);
    assert_true(len <= 8 * M + 10); /* the first step's start, from 0: 10 bytes at most */
    free(b);
    assert_int_equal(tp_stepevs_pack(lev, 2 * M, &b, &len), 0);
    assert_true(len <= 9 * M + 10);
    free(b);
    free(loop);
    free(lev);
}

/* Every packed array of step events and steps memo written out to the temporary file (the
 * threshold at 1 byte, step_pack.h): the slim reports of the four-rank run and of the
 * diagnosis scenarios (clocks, stragglers and the rules read every rank's steps) are the
 * whole ones, byte for byte; a slim thread holds its events written out, and reads them,
 * and its first step's time, as the thread held in memory does. */
static void steps_written_out(void **state) {
    (void)state;
    size_t before = tp_steps_set_spill(1);
    char dir[512], err[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-slim-stepspill"), 0);
    four_ranks_run(dir); /* steps from ranges: the memos are written out */
    const char *ops[] = {dir};
    same_reports(ops, 1);
    synth_rmtree(dir);
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-slim-stepspill"), 0);
    slim_steps_rank(dir, 500, 5 * MS, T0 + 6 * 1000 * MS); /* the API's steps: events */
    same_reports(ops, 1);
    tp_run out, in;
    assert_int_equal(tp_run_load_slim(ops, 1, &out, err, sizeof err), 0);
    tp_steps_set_spill(0);
    assert_int_equal(tp_run_load_slim(ops, 1, &in, err, sizeof err), 0);
    size_t spilled = 0;
    for (size_t i = 0; i < out.nprocs; i++)
        for (size_t t = 0; t < out.procs[i].nthreads; t++) {
            const tp_thread *a = &out.procs[i].threads[t], *b = &in.procs[i].threads[t];
            assert_int_equal(a->nsteps, b->nsteps);
            if (!a->nsteps) continue;
            assert_non_null(a->steps_spilled);
            assert_null(a->steps_packed);
            assert_null(b->steps_spilled);
            spilled++;
            assert_true(tp_thread_first_step_ts(a) == tp_thread_first_step_ts(b));
            assert_true(tp_thread_first_step_ts(a) == T0 + MS);
            int oa, ob;
            tp_stepev *ea = tp_thread_stepevs(a, &oa), *eb = tp_thread_stepevs(b, &ob);
            assert_true(ea && eb && oa && ob);
            for (size_t k = 0; k < a->nsteps; k++)
                assert_true(ea[k].step == eb[k].step && ea[k].ts == eb[k].ts &&
                            ea[k].begin == eb[k].begin);
            free(ea);
            free(eb);
        }
    assert_int_equal(spilled, 1);
    tp_run_free(&out);
    tp_run_free(&in);
    synth_rmtree(dir);
    tp_steps_set_spill(1);
    slim_scenarios(reports_same);
    tp_steps_set_spill(before);
}

/* A rank file whose step numbers jump by 2^63 part way (a damaged or forged file): the light
 * load, which packs step events as it reads them, meets one it cannot pack and keeps them all
 * in the array from there; the slim report is the whole one's. A second thread's events,
 * all packable, stay packed. */
static void steps_unpackable(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-slim-unpackable"), 0);
    synth_file *f = synth_open(dir, "h", 9, RT0, T0);
    synth_rank(f, 0, 1);
    synth_thread(f, 1, 9);
    synth_thread(f, 2, 10);
    for (uint64_t s = 0; s < 12; s++) {
        uint64_t b = T0 + MS + s * 10 * MS, n = s < 6 ? s : s + (1ull << 63);
        synth_step_begin(f, 1, b, n);
        synth_step_end(f, 1, b + 9 * MS, n);
        synth_push(f, 2, b + MS, "other", 0, 0);
        synth_pop(f, 2, b + 2 * MS, 0);
        synth_flush(f);
    }
    synth_step_begin(f, 2, T0 + 200 * MS, 0); /* the second thread's, after the first's */
    synth_step_end(f, 2, T0 + 201 * MS, 0);
    synth_end_of_file(f, T0 + 300 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    const char *ops[] = {dir};
    same_reports(ops, 1);
    tp_run run;
    char err[256];
    assert_int_equal(tp_run_load_slim(ops, 1, &run, err, sizeof err), 0);
    assert_int_equal(run.nprocs, 1);
    const tp_process *p = &run.procs[0];
    assert_int_equal(p->threads[0].nsteps, 24);
    assert_non_null(p->threads[0].steps);
    assert_null(p->threads[0].steps_packed);
    assert_true(p->threads[0].steps[12].step == 6 + (1ull << 63));
    assert_int_equal(p->threads[1].nsteps, 2);
    assert_null(p->threads[1].steps);
    assert_non_null(p->threads[1].steps_packed);
    tp_steps st;
    assert_int_equal(tp_find_steps(p, NULL, 1, &st), 0);
    assert_int_equal(st.nsteps, 12);
    assert_true(st.steps[11].app_step == 11 + (1ull << 63));
    tp_steps_free(&st);
    tp_run_free(&run);
    synth_rmtree(dir);
}

static void free_thread_counters(tp_thread *t) {
    tp_thread_free_counters(t);
    memset(t, 0, sizeof *t);
}

/* Packed counters (counter_pack.h) come back bit for bit whatever their values and times,
 * from the packed form, unpacked into the array and packed again; damage is told; a table
 * past its bound of names is refused; an NVML sampler's series takes at most 5 bytes a
 * sample where it took 24. */
static void counter_packing(void **state) {
    (void)state;
    double nan_payload;
    uint64_t bits = 0x7ff8000000abcdefull;
    memcpy(&nan_payload, &bits, sizeof bits);
    const char *a = "gpu0.power_w", *b = "gpu0.temperature_c", *c = "gpu1.energy_j";
    const tp_counter in[] = {
        {a, T0, 250.125}, {b, T0, 45}, {c, T0, 0.001}, {a, T0 + 100 * MS, 251.5},
        {b, T0 + 100 * MS, 46}, {c, T0 + 100 * MS, 25.126}, {a, 0, -0.0}, {b, UINT64_MAX, 0},
        {c, 1, NAN}, {a, 5, nan_payload}, {b, 4, INFINITY}, {c, 3, -INFINITY},
        {a, 2, 9007199254740992.0}, {b, 2, 9007199254740994.0}, {c, 2, -9007199254740992.0},
        {a, 2, 0.1}, {b, 2, 1.0 / 3}, {c, 2, 1e300}, {a, 2, 5e-324}, {a, 2, -123.456},
        {b, 2, 9007199254740.991}, {b, 2, -9007199254740.993}, {c, 2, 250}, {c, 2, 250.5},
        {c, UINT64_MAX - 1, 251}, {b, 0, 46}, {a, T0, 250.125}, {a, T0, 250.125}};
    const size_t n = sizeof in / sizeof *in;
    tp_thread t = {0};
    tp_cpack st = {0};
    for (size_t i = 0; i < n; i++) assert_int_equal(tp_counter_append(&t, &st, &in[i]), 0);
    tp_cpack_free(&st);
    assert_int_equal(t.ncounter_names, 3);
    slim_counters_are(&t, in, n);
    assert_int_equal(tp_thread_unpack_counters(&t), 0);
    assert_null(t.counters_packed);
    for (size_t i = 0; i < n; i++) assert_true(slim_same_counter(&t.counters[i], &in[i]));
    tp_thread_pack_counters(&t);
    assert_null(t.counters);
    slim_counters_are(&t, in, n);
    /* damage: a byte short, a name index past the table, an unread byte left */
    t.counters_packed_len--;
    tp_counter_it it;
    tp_counter got;
    assert_int_equal(tp_counter_it_init(&it, &t), 0);
    while (tp_counter_next(&it, &got)) {}
    assert_int_equal(tp_counter_it_done(&it), TPROF_ERR_CORRUPT);
    assert_int_equal(tp_thread_unpack_counters(&t), TPROF_ERR_CORRUPT);
    assert_non_null(t.counters_packed); /* unchanged */
    t.counters_packed_len++;
    t.ncounter_names = 2; /* c's index is 2 */
    assert_int_equal(tp_counter_it_init(&it, &t), 0);
    while (tp_counter_next(&it, &got)) {}
    assert_int_equal(tp_counter_it_done(&it), TPROF_ERR_CORRUPT);
    t.ncounter_names = 3;
    t.ncounters--;
    assert_int_equal(tp_counter_it_init(&it, &t), 0);
    while (tp_counter_next(&it, &got)) {}
    assert_int_equal(tp_counter_it_done(&it), TPROF_ERR_CORRUPT);
    t.ncounters++;
    free_thread_counters(&t);

    /* the bound on names: the one past it is refused and nothing changes */
    static char names[TP_CPACK_NAMES + 1][16];
    for (size_t i = 0; i <= TP_CPACK_NAMES; i++) {
        snprintf(names[i], sizeof names[i], "gpu%zu.power_w", i);
        tp_counter k = {names[i], T0 + i, (double)i};
        assert_int_equal(tp_counter_append(&t, &st, &k), i < TP_CPACK_NAMES ? 0 : 1);
    }
    tp_cpack_free(&st);
    assert_int_equal(t.ncounters, TP_CPACK_NAMES);
    assert_int_equal(t.ncounter_names, TP_CPACK_NAMES);
    free_thread_counters(&t);

    /* an NVML sampler of 8 GPUs at 10 Hz for 1000 samples, as capture/nvml.c writes it:
     * every metric of a sample at one time, watts and joules from milliwatts and millijoules */
    static const char *const metric[10] = {
        "energy_j", "power_w", "power_limit_w", "sm_clock_mhz", "mem_clock_mhz",
        "temperature_c", "util_gpu_pct", "util_mem_pct", "mem_used_bytes", "clock_events"};
    static char gname[8][10][40];
    for (int g = 0; g < 8; g++)
        for (int m = 0; m < 10; m++)
            snprintf(gname[g][m], sizeof gname[g][m], "gpu%d.%s", g, metric[m]);
    enum { SAMPLES = 1000 };
    tp_counter *nv = malloc(SAMPLES * 80 * sizeof *nv);
    assert_non_null(nv);
    size_t k = 0;
    uint64_t mj[8] = {0}, seed = 7;
    for (uint64_t s = 0; s < SAMPLES; s++) {
        uint64_t ts = T0 + s * 100 * MS + (s * 7919) % 3000;
        for (int g = 0; g < 8; g++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            uint64_t mw = 300000 + (seed >> 40) % 400000; /* 300-700 W */
            mj[g] += mw / 10;
            const double v[10] = {(double)mj[g] / 1000.0, (double)mw / 1000.0, 700, 1980,
                                  2619, 40 + (double)((seed >> 20) % 30), (double)(seed % 101),
                                  (double)((seed >> 8) % 101),
                                  80e9 + (double)((seed >> 30) % 64) * 2097152, 0};
            for (int m = 0; m < 10; m++) nv[k++] = (tp_counter){gname[g][m], ts, v[m]};
        }
    }
    for (size_t i = 0; i < k; i++) assert_int_equal(tp_counter_append(&t, &st, &nv[i]), 0);
    tp_cpack_free(&st);
    slim_counters_are(&t, nv, k);
    assert_true(t.counters_packed_len <= 5 * k);
    print_message("NVML series: %zu samples in %zu bytes (%.2f a sample; 24 unpacked)\n", k,
                  t.counters_packed_len, (double)t.counters_packed_len / (double)k);
    free_thread_counters(&t);
    free(nv);
}

/* A node sampler with more GPU names than a packed table holds: the light load falls back
 * to the array for that thread, and the slim report is the whole one's. */
static void counters_unpackable(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-slim-counters"), 0);
    slim_wide_sampler_run(dir);
    const char *ops[] = {dir};
    same_reports(ops, 1);
    tp_run run;
    char err[256];
    assert_int_equal(tp_run_load_slim(ops, 1, &run, err, sizeof err), 0);
    const tp_process *sp = NULL;
    for (size_t i = 0; i < run.nprocs; i++)
        if (run.procs[i].role == TP_ROLE_SAMPLER) sp = &run.procs[i];
    assert_non_null(sp);
    assert_int_equal(sp->threads[0].ncounters, 3 * (TP_CPACK_NAMES + 4));
    assert_non_null(sp->threads[0].counters);
    assert_null(sp->threads[0].counters_packed);
    assert_int_equal(sp->threads[1].ncounters, 3);
    assert_null(sp->threads[1].counters);
    assert_non_null(sp->threads[1].counters_packed);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* The first GPU of rank 0's NVML section in report document rep. */
/* Rank 0's NVML section in report.json, its GPUs, and the first of them. */
static cJSON *rank0_nvml(cJSON *rep) {
    return cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "ranks"), 0), "nvml");
}

static cJSON *rank0_gpus(cJSON *rep) { return cJSON_GetObjectItem(rank0_nvml(rep), "gpus"); }

static cJSON *rank0_gpu0(cJSON *rep) { return cJSON_GetArrayItem(rank0_gpus(rep), 0); }

/* The report.json of the run in dir (loaded into *run), every step measured (no warm-up). */
static cJSON *report_all_steps(const char *dir, tp_run *run) {
    load_run(dir, run);
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.warmup = 0;
    return report_json(run, &o);
}

/* GPU 0's power sample idx of nvml_run (watts) */
static double nvml_power(unsigned idx) { return 250.125 + (double)(idx * 37 % 11) * 1.5; }

/* One rank of ten 10 ms steps and the node sampler of its host, whose 30 samples of GPU 0
 * are written in time order (swapped 0), or each pair swapped (1): the NVML section then
 * keeps every series whole and sorts them (energy.c, nv_collect's keep_all) where it
 * otherwise takes the gauges as it reads. */
static void nvml_run(const char *dir, int swapped) {
    slim_steps_rank(dir, 10, 9 * MS, T0 + 130 * MS);
    synth_file *f = slim_node_sampler(dir);
    for (unsigned k = 0; k < 30; k++) {
        unsigned idx = swapped ? k ^ 1u : k;
        uint64_t ts = T0 + idx * 4 * MS;
        synth_counter(f, 1, ts, "gpu0.power_w", nvml_power(idx));
        synth_counter(f, 1, ts, "gpu0.energy_j", 100 + idx * 1.003);
        synth_counter(f, 1, ts, "gpu0.sm_clock_mhz", 1900 + (double)(idx % 3) * 40);
        synth_counter(f, 1, ts, "gpu0.clock_event_reasons", idx % 4 ? 0 : 4); /* SW power cap */
        synth_counter(f, 1, ts, "gpu0.temp_c", 50 + (double)(idx % 5));
    }
    synth_end_of_file(f, T0 + 130 * MS, 0);
    assert_int_equal(synth_close(f), 0);
}

/* The NVML section's gauges over the measured steps (1 ms to 100 ms: samples 1 to 25) are
 * those of the samples in time order, whether the sampler wrote them in order (gauges taken
 * as read) or not (series kept whole and sorted): the same section, equal to the figures
 * computed here. */
static void nvml_sample_order(void **state) {
    (void)state;
    char top[512], dir[2][600];
    assert_int_equal(synth_tmpdir(top, sizeof top, "report-slim-nvml-order"), 0);
    char *sect[2];
    for (int sw = 0; sw < 2; sw++) {
        snprintf(dir[sw], sizeof dir[sw], "%s/%d", top, sw);
        assert_int_equal(mkdir(dir[sw], 0755), 0);
        nvml_run(dir[sw], sw);
        const char *ops[] = {dir[sw]};
        same_reports(ops, 1);
        tp_run run;
        cJSON *rep = report_all_steps(dir[sw], &run);
        cJSON *g = rank0_gpu0(rep);
        assert_non_null(g);
        double sum = 0, mx = 0;
        for (unsigned i = 1; i <= 25; i++) {
            sum += nvml_power(i);
            if (nvml_power(i) > mx) mx = nvml_power(i);
        }
        assert_true(cJSON_GetObjectItem(g, "power_mean_w")->valuedouble == sum / 25);
        assert_true(cJSON_GetObjectItem(g, "power_max_w")->valuedouble == mx);
        assert_int_equal(cJSON_GetObjectItem(g, "samples")->valueint, 30);
        cJSON *ce = cJSON_GetObjectItem(g, "clock_events");
        assert_non_null(ce);
        assert_true(cJSON_GetObjectItem(ce, "throttled_share")->valuedouble == 6.0 / 25);
        sect[sw] = cJSON_PrintUnformatted(rank0_nvml(rep));
        cJSON_Delete(rep);
        tp_run_free(&run);
    }
    assert_string_equal(sect[0], sect[1]);
    free(sect[0]);
    free(sect[1]);
    synth_rmtree(top);
}

/* Samples of each series of nvml_streamed_run: even, so that each has its pair swapped */
#define STREAM_N 46

/* Sample k of nvml_streamed_run: 3 ms apart with up to 0.5 ms of jitter (gaps distinct
 * around their median), samples 11 and 12 at the same time (they fall in different pairs,
 * so a pair swap keeps their order). */
static uint64_t stream_ts(unsigned k) {
    unsigned j = k == 12 ? 11 : k;
    return T0 + j * 3 * MS + (uint64_t)(j * j * 7919 % 101) * 5000;
}

/* GPU 2's instantaneous power at sample k: uneven, 12 and 11 differ at the same time */
static double stream_inst(unsigned k) { return 300.5 + (double)(k * 37 % 17) * 2.25; }

/* One rank of nsteps 9 ms steps (10 ms apart from T0 + 1 ms) and the node sampler of its
 * host, STREAM_N samples (stream_ts) written in time order or each pair swapped: GPU 0 an energy
 * counter 0.3 J a ms and power readings, GPU 1 power only (1 W a ms over 200 W), GPU 2
 * instantaneous and averaged power. */
static void nvml_streamed_run(const char *dir, uint64_t nsteps, int swapped) {
    slim_steps_rank(dir, nsteps, 9 * MS, T0 + 140 * MS);
    synth_file *f = slim_node_sampler(dir);
    for (unsigned i = 0; i < STREAM_N; i++) {
        unsigned k = swapped ? i ^ 1u : i;
        uint64_t ts = stream_ts(k);
        double ms = (double)(ts - T0) / 1e6;
        synth_counter(f, 1, ts, "gpu0.energy_j", 100 + 0.3 * ms);
        synth_counter(f, 1, ts, "gpu0.power_w", stream_inst(k) - 40);
        synth_counter(f, 1, ts, "gpu1.power_w", 200 + ms);
        synth_counter(f, 1, ts, "gpu2.power_instant_w", stream_inst(k));
        synth_counter(f, 1, ts, "gpu2.power_w", 250);
    }
    synth_end_of_file(f, T0 + 140 * MS, 0);
    assert_int_equal(synth_close(f), 0);
}

/* The trapezoids of the series v (at stream_ts) over [a, b] (a test's own walk: every two
 * consecutive samples' span clipped to the window). */
static double stream_trapezoids(double (*v)(unsigned), uint64_t a, uint64_t b) {
    double sum = 0;
    for (unsigned k = 0; k + 1 < STREAM_N; k++) {
        uint64_t t0 = stream_ts(k), t1 = stream_ts(k + 1);
        uint64_t lo = t0 > a ? t0 : a, hi = t1 < b ? t1 : b;
        if (t1 == t0 || lo >= hi) continue;
        double w = (double)(t1 - t0);
        double p0 = v(k) + (v(k + 1) - v(k)) * (double)(lo - t0) / w;
        double p1 = v(k) + (v(k + 1) - v(k)) * (double)(hi - t0) / w;
        sum += 0.5 * (p0 + p1) * (double)(hi - lo) / 1e9;
    }
    return sum;
}

static double stream_power0(unsigned k) { return stream_inst(k) - 40; }

static double gpu_num(cJSON *rep, int gpu, const char *key) {
    cJSON *x = cJSON_GetObjectItem(cJSON_GetArrayItem(rank0_gpus(rep), gpu), key);
    assert_non_null(x);
    return x->valuedouble;
}

#define assert_rel(got, want)                                                                  \
    assert_true(fabs((got) - (want)) <= 1e-9 * fabs(want))

/* The energy figures the NVML section takes from the energy counter's and the power's
 * samples as it reads them (energy.c, nv_acc): the counter interpolated at the steps' ends,
 * the power's trapezoids over them, the median sample interval, over the steps (10) and over
 * the whole run (no steps); the same whether the sampler wrote in time order or not (series
 * kept whole, sorted, then read the same way). */
static void nvml_streamed_energy(void **state) {
    (void)state;
    char top[512], dir[600];
    assert_int_equal(synth_tmpdir(top, sizeof top, "report-slim-nvml-stream"), 0);
    /* the gaps: the ((n - 1) / 2)-th smallest (from 0) of the n - 1, one of them 0 */
    uint64_t gaps[STREAM_N - 1];
    for (unsigned k = 0; k + 1 < STREAM_N; k++) gaps[k] = stream_ts(k + 1) - stream_ts(k);
    qsort(gaps, STREAM_N - 1, sizeof *gaps, tp_cmp_u64);
    assert_true(gaps[0] == 0 && gaps[1] > 0);
    double interval = (double)gaps[(STREAM_N - 1) / 2] / 1e6;
    char *first = NULL;
    /* with every gap kept, and with so few kept that the median is selected again from the
     * samples read again (energy.c, nv_reread_intervals; the swapped runs from the series
     * kept whole) */
    static const size_t keep[] = {1u << 20, 1, 2, 7};
    for (int c = 0; c < 16; c++) {
        size_t was = tp_nvml_set_gaps_keep(keep[c / 4]);
        uint64_t nsteps = c % 4 < 2 ? 10 : 0;
        snprintf(dir, sizeof dir, "%s/%d", top, c);
        assert_int_equal(mkdir(dir, 0755), 0);
        nvml_streamed_run(dir, nsteps, c % 2);
        tp_run run;
        cJSON *rep = report_all_steps(dir, &run);
        uint64_t a = nsteps ? T0 + MS : stream_ts(0),
                 b = nsteps ? T0 + 100 * MS : stream_ts(STREAM_N - 1);
        double span_ms = (double)(b - a) / 1e6;
        /* linear series: the counter's and GPU 1's figures by hand */
        assert_rel(gpu_num(rep, 0, "energy_j"), 0.3 * span_ms);
        double tau0 = (double)(a - T0) / 1e9, tau1 = (double)(b - T0) / 1e9;
        assert_rel(gpu_num(rep, 1, "energy_j"),
                   200 * (tau1 - tau0) + 500 * (tau1 * tau1 - tau0 * tau0));
        /* uneven ones: the test's own trapezoids */
        assert_rel(gpu_num(rep, 2, "energy_j"), stream_trapezoids(stream_inst, a, b));
        if (nsteps)
            assert_rel(gpu_num(rep, 0, "energy_per_step_from_power_j"),
                       stream_trapezoids(stream_power0, a, b) / 10);
        for (int g = 0; g < 3; g++)
            assert_true(gpu_num(rep, g, "sample_interval_ms") == interval);
        char *sect = cJSON_PrintUnformatted(rank0_nvml(rep));
        if (c % 2 == 0) first = sect;
        else {
            assert_string_equal(first, sect);
            free(first);
            free(sect);
        }
        cJSON_Delete(rep);
        tp_run_free(&run);
        tp_nvml_set_gaps_keep(was);
    }
    synth_rmtree(top);
}

/* A NaN or infinite sample inside the steps (a damaged or hand-made file: NVML's are finite)
 * makes no energy figure: none for GPU 0 (power 250 W with a NaN) and GPU 1 (a counter
 * infinite at the steps' end), a reason given; GPU 2 (finite) has its 250 W x 99 ms; GPU 3's
 * counter gives its energy but its NaN power no cross-check. The power gauges are those of
 * the finite samples. */
static void nvml_not_finite(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-slim-not-finite"), 0);
    slim_steps_rank(dir, 10, 9 * MS, T0 + 130 * MS);
    synth_file *f = slim_node_sampler(dir);
    for (unsigned k = 0; k <= 30; k++) {
        uint64_t ts = T0 + k * 4 * MS;
        double ms = (double)(ts - T0) / 1e6;
        synth_counter(f, 1, ts, "gpu0.power_w", k == 7 ? NAN : 250);
        synth_counter(f, 1, ts, "gpu1.energy_j", k == 25 ? INFINITY : 100 + 0.25 * ms);
        synth_counter(f, 1, ts, "gpu2.power_w", 250);
        synth_counter(f, 1, ts, "gpu3.energy_j", 100 + 0.25 * ms);
        synth_counter(f, 1, ts, "gpu3.power_w", k == 11 ? NAN : 250);
    }
    synth_end_of_file(f, T0 + 130 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    const char *ops[] = {dir};
    same_reports(ops, 1);
    tp_run run;
    cJSON *rep = report_all_steps(dir, &run);
    cJSON *gpus = rank0_gpus(rep);
    for (int g = 0; g < 2; g++) {
        cJSON *x = cJSON_GetArrayItem(gpus, g);
        assert_string_equal(cJSON_GetObjectItem(x, "energy_method")->valuestring, "none");
        assert_null(cJSON_GetObjectItem(x, "energy_j"));
        assert_non_null(strstr(cJSON_GetObjectItem(x, "energy_unavailable")->valuestring,
                               "not a finite number"));
    }
    /* the gauges are of the finite samples */
    assert_true(gpu_num(rep, 0, "power_mean_w") == 250 && gpu_num(rep, 0, "power_max_w") == 250);
    assert_true(fabs(gpu_num(rep, 2, "energy_j") - 250 * 0.099) < 1e-9);
    assert_true(fabs(gpu_num(rep, 3, "energy_j") - 0.25 * 99) < 1e-9);
    assert_null(cJSON_GetObjectItem(cJSON_GetArrayItem(gpus, 3), "energy_per_step_from_power_j"));
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* Clock-event reasons that no bit mask can be (NaN, negative, 2^64 and past: a damaged file)
 * hold no reason: of the five samples in the steps, the two of SW power cap (4) are the
 * throttled ones and the mask is 4 (converting the others was undefined, and on x86-64 gave
 * bit 63). */
static void nvml_bad_reasons(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-slim-reasons"), 0);
    slim_steps_rank(dir, 3, 9 * MS, T0 + 40 * MS);
    synth_file *f = slim_node_sampler(dir);
    const double reasons[5] = {4, NAN, -17430, 1e30, 4};
    for (int k = 0; k < 5; k++) {
        synth_counter(f, 1, T0 + 2 * MS + (uint64_t)k * 5 * MS, "gpu0.power_w", 300);
        synth_counter(f, 1, T0 + 2 * MS + (uint64_t)k * 5 * MS, "gpu0.clock_event_reasons",
                      reasons[k]);
    }
    synth_end_of_file(f, T0 + 40 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    const char *ops[] = {dir};
    same_reports(ops, 1);
    tp_run run;
    cJSON *rep = report_all_steps(dir, &run);
    cJSON *g = rank0_gpu0(rep);
    cJSON *ce = cJSON_GetObjectItem(g, "clock_events");
    assert_non_null(ce);
    assert_true(cJSON_GetObjectItem(ce, "mask")->valuedouble == 4);
    assert_true(cJSON_GetObjectItem(ce, "throttled_share")->valuedouble == 2.0 / 5);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* A program's own counters named like the samplers' without their dot ("gpu0_mem", "gpu1")
 * are no GPU samples: the rank that has them does not read as the sampler of its GPUs (its
 * NVML figures are the node sampler's), and its slim process, which drops them, answers the
 * same as its whole one: the reports are the same. */
static void gpu_named_counters(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-slim-gpu-names"), 0);
    for (int r = 0; r < 2; r++) {
        synth_file *f = synth_open(dir, "h0", 100 + r, RT0, T0);
        synth_rank(f, r, 2);
        synth_thread(f, 1, 100 + r);
        for (uint64_t s = 0; s < 5; s++) {
            uint64_t b = T0 + MS + s * 10 * MS;
            synth_step_begin(f, 1, b, s);
            synth_step_end(f, 1, b + 9 * MS, s);
            if (r == 0) {
                synth_counter(f, 1, b + MS, "gpu0_mem", (double)s);
                synth_counter(f, 1, b + MS, "gpu1", 1);
            }
        }
        synth_end_of_file(f, T0 + 100 * MS, 0);
        assert_int_equal(synth_close(f), 0);
    }
    synth_file *f = synth_open(dir, "h0", 90, RT0, T0);
    synth_meta(f, "trainprof.role", "node-sampler");
    synth_thread(f, 1, 90);
    for (uint64_t s = 0; s < 20; s++)
        synth_counter(f, 1, T0 + s * 5 * MS, "gpu0.power_w", 250 + (double)s);
    synth_end_of_file(f, T0 + 100 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    const char *ops[] = {dir};
    same_reports(ops, 1);
    tp_run run;
    char err[256];
    assert_int_equal(tp_run_load_list(ops, 1, &run, err, sizeof err), 0);
    const tp_process *r0 = NULL, *sampler = NULL;
    for (size_t i = 0; i < run.nprocs; i++) {
        if (run.procs[i].role == TP_ROLE_SAMPLER) sampler = &run.procs[i];
        else if (run.procs[i].rank == 0) r0 = &run.procs[i];
    }
    assert_true(r0 && sampler);
    assert_false(tp_has_gpu_counters(r0));
    assert_true(tp_has_gpu_counters(sampler));
    assert_ptr_equal(tp_gpu_samples_for(&run, r0), sampler);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* tp_select_double: the value a sort puts at the nearest rank, on arrays with repeats. */
static void select_matches_sort(void **state) {
    (void)state;
    static const double ps[] = {0.01, 0.1, 0.25, 0.5, 0.9, 0.99, 1.0};
    unsigned seed = 12345;
    for (size_t n = 1; n <= 300; n++) {
        double v[300], sorted[300];
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            v[i] = (double)((seed >> 16) % (n % 3 ? 7 : 1000)); /* few or many distinct */
        }
        memcpy(sorted, v, n * sizeof *v);
        qsort(sorted, n, sizeof *sorted, tp_cmp_double);
        for (size_t k = 0; k < sizeof ps / sizeof *ps; k++) {
            double w[300];
            memcpy(w, v, n * sizeof *v);
            assert_true(tp_select_double(w, n, ps[k]) == tp_pct_double(sorted, n, ps[k]));
        }
    }
    assert_true(tp_select_double(NULL, 0, 0.5) == 0);
}

/* tp_spans_sort: a few sorted runs are merged, many go to qsort; either way the spans end in
 * start order, those of equal start in their input order (a stable sort's). */
typedef struct tagged {
    tp_span sp;
    size_t at;
} tagged;

static int by_start_then_at(const void *a, const void *b) {
    const tagged *x = a, *y = b;
    if (x->sp.s != y->sp.s) return x->sp.s < y->sp.s ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

enum { SORT_N = 3000 };

/* Sorted runs of the given lengths (repeated starts within and across runs) sorted. */
static void sort_runs_check(const size_t *lens, int runs, unsigned *seed) {
    static tp_span v[SORT_N];
    static tagged ref[SORT_N];
    size_t n = 0;
    for (int r = 0; r < runs; r++) {
        uint64_t s = 0;
        for (size_t i = 0; i < lens[r] && n < SORT_N; i++, n++) {
            *seed = *seed * 1103515245u + 12345u;
            s += (*seed >> 16) % 5;
            v[n] = (tp_span){s, s + n}; /* the end tells the spans apart */
            ref[n] = (tagged){v[n], n};
        }
    }
    qsort(ref, n, sizeof *ref, by_start_then_at);
    tp_spans_sort(v, n);
    for (size_t i = 0; i < n; i++) {
        assert_true(v[i].s == ref[i].sp.s);
        assert_true(v[i].e == ref[i].sp.e);
    }
}

static void spans_sort_stable(void **state) {
    (void)state;
    unsigned seed = 777;
    size_t lens[40];
    for (int runs = 1; runs <= 40; runs++) {
        for (int r = 0; r < runs; r++) lens[r] = (size_t)(SORT_N / runs) - (size_t)r % 3;
        sort_runs_check(lens, runs, &seed);
    }
    /* two runs of unequal lengths: merged through a copy of the shorter, forward when it
     * is the first, backward when it is the second */
    static const size_t first[] = {1, 2, 7, 1499, 1500, 1501, 2993, 2999};
    for (size_t k = 0; k < sizeof first / sizeof *first; k++) {
        lens[0] = first[k];
        lens[1] = SORT_N - first[k];
        sort_runs_check(lens, 2, &seed);
    }
}

static void corpus(void **state) {
    (void)state;
    slim_corpus(reports_same);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(synthetic_run),
        cmocka_unit_test(scenarios),
        cmocka_unit_test(large_rank),
        cmocka_unit_test(step_packing),
        cmocka_unit_test(steps_unpackable),
        cmocka_unit_test(steps_written_out),
        cmocka_unit_test(gpu_named_counters),
        cmocka_unit_test(counter_packing),
        cmocka_unit_test(counters_unpackable),
        cmocka_unit_test(nvml_sample_order),
        cmocka_unit_test(nvml_streamed_energy),
        cmocka_unit_test(nvml_not_finite),
        cmocka_unit_test(nvml_bad_reasons),
        cmocka_unit_test(select_matches_sort),
        cmocka_unit_test(spans_sort_stable),
        cmocka_unit_test(corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
