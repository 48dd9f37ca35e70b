/*
 * test_diff.c — trainprof diff (src/analysis/diff.c) on synthetic runs with known
 * differences: a GEMM kernel 20 % slower must be named (kernel, class and step time), the
 * unchanged kernel and communication must not; two runs that differ only by noise must show
 * nothing significant; with report.json only (no per-step values) the 5 % rule applies.
 *
 * `test_diff --write DIR GEMM_MS SEED` writes one such run (for tests/diff_cli.sh).
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
#include "synth.h"

static const uint64_t T0 = 1000000000ull, US = 1000ull, MS = 1000000ull;

/* deterministic noise in [-1, 1) */
static double noise(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / (double)(1ull << 52) - 1.0;
}

/* Two ranks, 41 steps (the first warm-up). A step: a "data" range of data_ms (+-3 %; none
 * when 0) with the GPU idle under it, then the GEMM kernel gemm_ms (+-3 %), then an
 * elementwise kernel 2 ms (+-3 %), then an AllReduce of 8 MB whose GPU interval lasts 1 ms
 * (+-3 %), then 0.5 ms of host time (+-0.2 ms): the step is their sum. */
static void write_run_data(const char *dir, double gemm_ms, double data_ms, uint64_t seed) {
    for (int r = 0; r < 2; r++) {
        uint64_t s = seed * 1000 + (uint64_t)r + 1;
        synth_file *f = synth_open(dir, "h", 300 + r, 1700000000000000000ull, T0);
        assert_non_null(f);
        synth_rank(f, r, 2);
        synth_thread(f, 1, (uint32_t)(300 + r));
        synth_thread(f, 2, (uint32_t)(400 + r));
        uint64_t b = T0 + MS;
        for (uint64_t st = 0; st < 41; st++) {
            synth_step_begin(f, 1, b, st);
            uint64_t t = b;
            if (data_ms > 0) {
                uint64_t dl = (uint64_t)(data_ms * (1 + 0.03 * noise(&s)) * (double)MS);
                synth_push(f, 1, t, "data", 0, 0);
                synth_pop(f, 1, t + dl, 0);
                t += dl;
            }
            t += 100 * US;
            uint64_t g = (uint64_t)(gemm_ms * (1 + 0.03 * noise(&s)) * (double)MS);
            synth_kernel(f, 2, t, t + g, 0, 7, (uint32_t)(st * 10 + 1), "ampere_sgemm_128x64_nn");
            t += g;
            uint64_t e = (uint64_t)(2.0 * (1 + 0.03 * noise(&s)) * (double)MS);
            synth_kernel(f, 2, t, t + e, 0, 7, (uint32_t)(st * 10 + 2), "vectorized_elementwise_kernel");
            t += e;
            uint64_t c = (uint64_t)(1.0 * (1 + 0.03 * noise(&s)) * (double)MS);
            tprof_pl_comm pl;
            memset(&pl, 0, sizeof pl);
            pl.end_ns = t + 10 * US;
            pl.bytes = 8000000;
            pl.count = 2000000;
            pl.comm_hash = 0x1234 + seed; /* ids differ between runs: matched by op and size */
            pl.seq = (uint32_t)st;
            pl.nranks = 2;
            pl.rank = (uint32_t)r;
            pl.op = TPROF_COMM_ALLREDUCE;
            pl.flags = TPROF_COMM_F_GPU_TIME;
            pl.gpu_start_ns = t;
            pl.gpu_end_ns = t + c;
            synth_comm(f, 1, t, &pl, NULL);
            t += c;
            t += (uint64_t)((0.5 + 0.2 * noise(&s)) * (double)MS);
            synth_step_end(f, 1, t, st);
            b = t;
        }
        synth_end_of_file(f, b + MS, 0);
        assert_int_equal(synth_close(f), 0);
    }
}

static void write_run(const char *dir, double gemm_ms, uint64_t seed) {
    write_run_data(dir, gemm_ms, 0, seed);
}

typedef struct side {
    char dir[512];
    tp_run run;
    cJSON *rep;
} side;

/* Reports only, one a bounded stepless rank's (its GPU figures totals over a span of the
 * run), the other over its whole run: the span's kernel times are no figure per step to set
 * against the other's, and no change is named from them. */
static void test_span_totals_not_compared(void **state) {
    (void)state;
    static const char *fmt =
        "{\"schema\":\"trainprof.report\",\"ranks\":[{\"rank\":0,\"gpu\":{\"per\":\"%s\","
        "\"devices\":[{\"device\":0,\"kernel_ms_by_class\":{\"gemm\":%d}}],"
        "\"top_kernels\":[{\"name\":\"ampere_sgemm\",\"total_ms\":%d}]}}]}";
    char ja[512], jb[512];
    snprintf(ja, sizeof ja, fmt, "span", 100, 100);
    snprintf(jb, sizeof jb, fmt, "run", 400, 400);
    cJSON *a = cJSON_Parse(ja), *b = cJSON_Parse(jb);
    assert_non_null(a);
    assert_non_null(b);
    tp_diff_side da = {"A", a, NULL, NULL}, db = {"B", b, NULL, NULL};
    cJSON *d = tp_diff_build(&da, &db, NULL);
    assert_non_null(d);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(d, "significant")), 0);
    /* the same two reports, both over their runs: the change is named */
    snprintf(ja, sizeof ja, fmt, "run", 100, 100);
    cJSON *a2 = cJSON_Parse(ja);
    tp_diff_side da2 = {"A", a2, NULL, NULL};
    cJSON *d2 = tp_diff_build(&da2, &db, NULL);
    assert_non_null(d2);
    assert_true(cJSON_GetArraySize(cJSON_GetObjectItem(d2, "significant")) > 0);
    cJSON_Delete(d);
    cJSON_Delete(d2);
    cJSON_Delete(a);
    cJSON_Delete(a2);
    cJSON_Delete(b);
}

/* The run loaded whole, or slim (`trainprof diff`'s load: each rank file read again whole
 * for its samples, one at a time) when g_slim is set. */
static int g_slim;
static void load_data(side *s, double gemm_ms, double data_ms, uint64_t seed, const char *tag) {
    assert_int_equal(synth_tmpdir(s->dir, sizeof s->dir, tag), 0);
    write_run_data(s->dir, gemm_ms, data_ms, seed);
    char err[256];
    const char *ops[] = {s->dir};
    assert_int_equal(g_slim ? tp_run_load_slim(ops, 1, &s->run, err, sizeof err)
                            : tp_run_load(s->dir, &s->run, err, sizeof err), 0);
    assert_true(s->run.nprocs > 0 && s->run.procs[0].slim == g_slim);
    s->rep = tp_report_build(&s->run, NULL);
    assert_non_null(s->rep);
}

static void load(side *s, double gemm_ms, uint64_t seed, const char *tag) {
    load_data(s, gemm_ms, 0, seed, tag);
}

static void unload(side *s) {
    cJSON_Delete(s->rep);
    tp_run_free(&s->run);
    synth_rmtree(s->dir);
}

static cJSON *diff(side *a, side *b, int with_runs) {
    tp_diff_side da = {"A", a->rep, with_runs ? &a->run : NULL, NULL};
    tp_diff_side db = {"B", b->rep, with_runs ? &b->run : NULL, NULL};
    cJSON *d = tp_diff_build(&da, &db, NULL);
    assert_non_null(d);
    return d;
}

static cJSON *row(cJSON *d, const char *sec, const char *key) {
    cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(cJSON_GetObjectItem(d, "sections"), sec))
        if (!strcmp(cJSON_GetObjectItem(r, "key")->valuestring, key)) return r;
    fail_msg("no row %s / %s", sec, key);
    return NULL;
}

static int sig(cJSON *r) { return cJSON_IsTrue(cJSON_GetObjectItem(r, "significant")); }
static double num(cJSON *o, const char *k) { return cJSON_GetObjectItem(o, k)->valuedouble; }

static void print_text(cJSON *d) {
    if (getenv("TPROF_TEST_VERBOSE")) tp_diff_write_text(d, stdout);
}

static void test_kernel_20_percent_slower(void **state) {
    (void)state;
    side a, b;
    load(&a, 5.0, 1, "diff-a");
    load(&b, 6.0, 2, "diff-b");
    cJSON *d = diff(&a, &b, 1);
    print_text(d);
    cJSON *k = row(d, "kernels", "ampere_sgemm_128x64_nn");
    assert_true(sig(k));
    assert_true(fabs(num(k, "delta") - 1.0) < 0.05);
    assert_true(fabs(num(k, "delta_rel") - 0.2) < 0.01);
    assert_true(num(k, "noise") > 0 && num(k, "noise") < 0.05);
    assert_true(sig(row(d, "gpu_classes", "gemm")));
    assert_false(sig(row(d, "gpu_classes", "elementwise/norm")));
    assert_false(sig(row(d, "kernels", "vectorized_elementwise_kernel")));
    assert_false(sig(row(d, "communication", "AllReduce on 2 ranks")));
    cJSON *st = row(d, "step_time", "all ranks");
    assert_true(sig(st));
    assert_true(fabs(num(st, "delta") - 1.0) < 0.1);
    assert_true(sig(row(d, "step_time", "rank 0")));
    assert_true(sig(row(d, "step_time", "rank 1")));
    /* the summary names the kernel */
    int named = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(d, "significant"))
        named |= strstr(cJSON_GetObjectItem(e, "message")->valuestring, "ampere_sgemm_128x64_nn") != NULL;
    assert_true(named);
    /* text rendering */
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    assert_int_equal(tp_diff_write_text(d, mf), 0);
    fclose(mf);
    assert_non_null(strstr(buf, "changed beyond noise:"));
    assert_non_null(strstr(buf, "kernel ampere_sgemm_128x64_nn: 5"));
    free(buf);
    cJSON_Delete(d);

    /* report.json only: no per-step values, the 5 % rule; step time +14 %: changed */
    d = diff(&a, &b, 0);
    st = row(d, "step_time", "rank 0");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(st, "noise_unknown")));
    assert_true(sig(st));
    assert_true(sig(row(d, "kernels", "ampere_sgemm_128x64_nn")));
    assert_false(sig(row(d, "kernels", "vectorized_elementwise_kernel")));
    cJSON_Delete(d);
    unload(&a);
    unload(&b);
}

static void test_noise_only(void **state) {
    (void)state;
    side a, b;
    load(&a, 5.0, 3, "diff-n1");
    load(&b, 5.0, 4, "diff-n2");
    cJSON *d = diff(&a, &b, 1);
    print_text(d);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(d, "significant")), 0);
    /* the runs do differ, by noise */
    cJSON *k = row(d, "kernels", "ampere_sgemm_128x64_nn");
    assert_true(num(k, "delta") != 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    assert_int_equal(tp_diff_write_text(d, mf), 0);
    fclose(mf);
    assert_non_null(strstr(buf, "no change beyond noise"));
    free(buf);
    cJSON_Delete(d);
    unload(&a);
    unload(&b);
}

/* A report.json edited by hand (a step time of -5 ms in one rank, 1e308 in the other):
 * neither figure is compared or printed, both are counted and named. */
static void test_impossible_figures(void **state) {
    (void)state;
    side a, b;
    load(&a, 5.0, 3, "diff-i1");
    load(&b, 5.0, 4, "diff-i2");
    cJSON *r;
    int k = 0;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(b.rep, "ranks")) {
        cJSON *steps = cJSON_GetObjectItem(r, "steps");
        cJSON_ReplaceItemInObject(steps, "mean_ms", cJSON_CreateNumber(k++ ? 1e308 : -5));
    }
    assert_int_equal(k, 2);
    cJSON *d = diff(&a, &b, 0);
    /* each rank's step row and the "all ranks" row: 4 figures left out */
    assert_int_equal((int)num(cJSON_GetObjectItem(d, "b"), "invalid_figures"), 4);
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "a"), "invalid_figures"));
    cJSON *all = row(d, "step_time", "all ranks");
    assert_null(cJSON_GetObjectItem(all, "b"));
    assert_false(sig(all));
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    assert_int_equal(tp_diff_write_text(d, mf), 0);
    fclose(mf);
    assert_non_null(strstr(buf, "B: 4 figure(s) of its report.json left out"));
    assert_null(strstr(buf, "inf"));
    assert_null(strstr(buf, "-5.000"));
    free(buf);
    cJSON_Delete(d);
    unload(&a);
    unload(&b);
}

/* Only the data loader slowed: 0.05 ms -> 8 ms per step, the rest the same. The step grows by
 * about 8 ms (8.6 -> 16.5 ms), and diff's text leads with it: its second line is the step's
 * change, data loading first; the JSON's "explained" ranks data loading first, with nearly
 * all the change, and no kernel class or collective (unchanged) among the figures. */
/* The diff of runs loaded slim, their ranks read again whole one at a time, is the diff of
 * the runs loaded whole, byte for byte: a slower kernel, and a slower data loader. */
static char *diff_json(double gemm_a, double gemm_b, double data_a, double data_b) {
    side a, b;
    load_data(&a, gemm_a, data_a, 7, "diff-slim-a");
    load_data(&b, gemm_b, data_b, 8, "diff-slim-b");
    cJSON *d = diff(&a, &b, 1);
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(d, "a"), "dir"); /* the temporary's name */
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(d, "b"), "dir");
    char *out = cJSON_Print(d);
    cJSON_Delete(d);
    unload(&a);
    unload(&b);
    return out;
}

static void test_slim_load_same_diff(void **state) {
    (void)state;
    static const double cases[][4] = {{5.0, 6.0, 0, 0}, {5.0, 5.0, 0.05, 8.0}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const double *c = cases[i];
        g_slim = 0;
        char *whole = diff_json(c[0], c[1], c[2], c[3]);
        g_slim = 1;
        char *slim = diff_json(c[0], c[1], c[2], c[3]);
        g_slim = 0;
        assert_non_null(strstr(whole, "\"significant\":\ttrue"));
        assert_string_equal(whole, slim);
        free(whole);
        free(slim);
    }
}

static void test_data_loader_slowed(void **state) {
    (void)state;
    side a, b;
    load_data(&a, 5.0, 0.05, 5, "diff-d1");
    load_data(&b, 5.0, 8.0, 6, "diff-d2");
    cJSON *d = diff(&a, &b, 1);
    print_text(d);
    cJSON *ex = cJSON_GetObjectItem(d, "explained");
    cJSON *st = cJSON_GetObjectItem(ex, "step_ms");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(st, "significant")));
    assert_true(fabs(num(st, "delta") - 7.95) < 0.3);
    cJSON *ranked = cJSON_GetObjectItem(ex, "ranked");
    assert_true(cJSON_GetArraySize(ranked) >= 1);
    cJSON *top = cJSON_GetArrayItem(ranked, 0);
    assert_string_equal(cJSON_GetObjectItem(top, "section")->valuestring, "step_parts");
    assert_string_equal(cJSON_GetObjectItem(top, "key")->valuestring, "data loading");
    assert_true(fabs(num(top, "share_of_change") - 1.0) < 0.05);
    assert_true(num(top, "a_share") < 0.01);
    assert_true(fabs(num(top, "b_share") - 7.95 / 16.5) < 0.03);
    /* the data range itself is a part of the step ("data loading") and a phase ("data") */
    int part = 0, phase = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, ranked) {
        const char *sec = cJSON_GetObjectItem(e, "section")->valuestring;
        const char *key = cJSON_GetObjectItem(e, "key")->valuestring;
        part |= !strcmp(sec, "step_parts") && !strcmp(key, "data loading");
        phase |= !strcmp(sec, "phases") && !strcmp(key, "data");
        assert_string_not_equal(sec, "gpu_classes");
        assert_string_not_equal(sec, "communication");
    }
    assert_true(part && phase);
    assert_true(sig(row(d, "step_parts", "data loading")));
    assert_false(sig(row(d, "step_parts", "compute")));
    /* text: "trainprof diff", then the step's change explained, data loading first */
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    assert_int_equal(tp_diff_write_text(d, mf), 0);
    fclose(mf);
    const char *lead = "trainprof diff\nstep time +9";
    assert_true(!strncmp(buf, lead, strlen(lead)));
    const char *l2 = buf + strlen("trainprof diff\n");
    const char *colon = strstr(l2, " ms): ");
    assert_non_null(colon);
    assert_true(colon < strchr(l2, '\n'));
    const char *first = colon + strlen(" ms): ");
    const char *comma = strstr(first, "), ");
    const char *eol = strchr(first, '\n');
    const char *item_end = comma && comma < eol ? comma : eol;
    assert_true(!strncmp(first, "data loading 0.6 % -> 4", 23));
    assert_true(first + 23 < item_end);
    free(buf);
    cJSON_Delete(d);
    unload(&a);
    unload(&b);
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "--write")) {
        write_run(argv[2], atof(argv[3]), strtoull(argv[4], NULL, 10));
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_20_percent_slower),
        cmocka_unit_test(test_span_totals_not_compared),
        cmocka_unit_test(test_noise_only),
        cmocka_unit_test(test_impossible_figures),
        cmocka_unit_test(test_data_loader_slowed),
        cmocka_unit_test(test_slim_load_same_diff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
