/*
 * slim_runs.h — the runs that the slim-versus-whole tests of the report (test_report_slim.c)
 * and the export (test_export_slim.c) both read: a synthetic run of 4 ranks on 2 hosts, in
 * which what a slim load keeps and drops is all present, and the fuzz corpus's rank files.
 * Header-only, static functions for each including test (which provides cmocka, and
 * TPROF_SOURCE_DIR for the corpus).
 */
#ifndef TPROF_TESTS_SLIM_RUNS_H
#define TPROF_TESTS_SLIM_RUNS_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "analysis/counter_pack.h"
#include "analysis/report.h"
#include "diag_scen.h" /* T0, MS, RT0 */
#include "export/html.h"
#include "format/format.h"
#include "synth.h"

/* report.json (tp_report_write_doc) and the HTML of r, into a string (owned). */
static inline char *slim_doc_html(const tp_report *r, const tp_report_opts *o) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(tp_report_write_doc(r, f), 0);
    assert_int_equal(tp_html_write(r, o, f), 0);
    fclose(f);
    return buf;
}

/* The report the command makes (tp_report_make_spilled: its rank sections in a temporary
 * file, the document's "ranks" empty) gives the JSON and HTML of the one that holds them,
 * byte for byte; the caller's run is then read again, its memos already kept. */
static inline void slim_spilled_same(tp_run *run, const tp_report_opts *o, const tp_report *r) {
    tp_report sp;
    assert_int_equal(tp_report_make_spilled(run, o, &sp), 0);
    assert_non_null(sp.spill);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(sp.doc, "ranks")), 0);
    assert_int_equal(tp_report_nsections(&sp), tp_report_nsections(r));
    char *held = slim_doc_html(r, o), *spilled = slim_doc_html(&sp, o);
    if (strcmp(held, spilled)) {
        size_t i = 0;
        while (held[i] && held[i] == spilled[i]) i++;
        size_t from = i > 200 ? i - 200 : 0;
        fprintf(stderr, "spilled sections: differs at byte %zu:\nheld: %.400s\nspilled: %.400s\n",
                i, held + from, spilled + from);
    }
    assert_string_equal(held, spilled);
    free(held);
    free(spilled);
    tp_report_free(&sp);
}

/* The JSON, text and HTML of run's report with options o, written to f: what the
 * slim-versus-whole tests compare byte for byte; the report with its sections spilled is
 * checked against it on the way (slim_spilled_same). used (may be NULL): the rank summaries
 * the report read, those it found stale, the processes its load took from summaries
 * (summary.h; test_summary.c), and the slim processes of the run (those the load could have
 * taken). */
static inline void slim_render_used(tp_run *run, const tp_report_opts *o, FILE *f,
                                    size_t used[4]) {
    tp_report r;
    assert_int_equal(tp_report_make(run, o, &r), 0);
    assert_null(r.spill);
    if (used) {
        used[0] = r.res.summaries_read;
        used[1] = r.res.summaries_stale;
        used[2] = r.res.slims_read;
        used[3] = 0;
        for (size_t i = 0; i < run->nprocs; i++) used[3] += run->procs[i].slim != 0;
    }
    char *json = cJSON_Print(r.doc);
    fputs(json, f);
    free(json);
    assert_int_equal(tp_report_write_text(&r, f, 0), 0);
    assert_int_equal(tp_html_write(&r, o, f), 0);
    slim_spilled_same(run, o, &r);
    tp_report_free(&r);
}

static inline void slim_render(tp_run *run, const tp_report_opts *o, FILE *f) {
    slim_render_used(run, o, f, NULL);
}

/* slim_render's text of run under o, into a string (owned). */
static inline char *slim_render_str(tp_run *run, const tp_report_opts *o) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    slim_render(run, o, f);
    fclose(f);
    return buf;
}

/* Whether counters a and b are the same: one name (interned), time and value bit for bit. */
static inline int slim_same_counter(const tp_counter *a, const tp_counter *b) {
    return a->name == b->name && a->ts == b->ts && !memcmp(&a->value, &b->value, sizeof a->value);
}

/* Every counter of t read back through tp_counter_it equals want[0..n), bit for bit. */
static inline void slim_counters_are(const tp_thread *t, const tp_counter *want, size_t n) {
    tp_counter_it it;
    tp_counter c;
    size_t i = 0;
    assert_int_equal(t->ncounters, n);
    assert_int_equal(tp_counter_it_init(&it, t), 0);
    while (tp_counter_next(&it, &c)) {
        assert_true(i < n);
        assert_true(slim_same_counter(&c, &want[i]));
        i++;
    }
    assert_int_equal(tp_counter_it_done(&it), 0);
    assert_int_equal(i, n);
}

/* Fails when a and b differ, first printing both around the first byte that differs. */
static inline void slim_same(const char *what, const char *label, const char *name_a,
                             const char *a, const char *name_b, const char *b) {
    if (strcmp(a, b)) {
        size_t i = 0;
        while (a[i] && a[i] == b[i]) i++;
        size_t from = i > 200 ? i - 200 : 0;
        fprintf(stderr, "%s (%s): differs at byte %zu:\n%s: %.400s\n%s: %.400s\n", what, label,
                i, name_a, a + from, name_b, b + from);
    }
    assert_string_equal(a, b);
}

/* Rank r of 4 on host h<r/2> (host 1's clock 3 ms off): named steps "train_step" with a
 * phase, a mark, a launch and its kernels, an AllReduce per step with its NCCL kernel (the
 * alignment reads its end), rank 1 killed inside open ranges, rank 2 sampling NVML; every
 * rank with the process sampler's counters, trainprof.torch's allocator samples and one of
 * its own (which a rank's section reads from its file, and a slim process does not keep). */
static void four_ranks_write(const char *dir, int r) {
    char host[16];
    snprintf(host, sizeof host, "h%d", r / 2);
    uint64_t rt = RT0 + (r / 2 ? 3 * MS : 0);
    synth_file *f = synth_open(dir, host, 100 + r, rt, T0);
    synth_rank(f, r, 4);
    synth_meta(f, "torch.pg.0", "backend=nccl size=4 ranks=0,1,2,3");
    synth_thread(f, 1, 100 + r);
    synth_thread(f, 2, 200 + r);
    synth_thread(f, 3, 300 + r);
    for (int s = 0; s < 6; s++) {
        uint64_t b = T0 + MS + (uint64_t)s * (10 + (uint64_t)r) * MS;
        synth_push(f, 1, b, "train_step", 0, 0);
        synth_push(f, 1, b + MS / 2, "forward", 0, 0);
        synth_mark(f, 1, b + MS, "marker", 0, 0);
        synth_api(f, 1, b + MS, b + MS + 20000, 100 + (uint32_t)r, 211, 7 + (uint32_t)s,
                  "cudaLaunchKernel");
        /* rank 0's work on device 1: the node sampler's GPU 1 is its GPU */
        synth_kernel(f, 2, b + 2 * MS, b + 6 * MS, r == 0, 7, 7 + (uint32_t)s,
                     "ampere_gemm_kernel");
        synth_kernel(f, 2, b + 6 * MS, b + 7 * MS, 0, 7, 100 + (uint32_t)s,
                     "_ZN2at6native18elementwise_kernelEv");
        if (r == 1 && s == 5) break; /* killed inside "forward" of "train_step" */
        synth_pop(f, 1, b + 7 * MS, 0);
        tprof_pl_comm c;
        memset(&c, 0, sizeof c);
        c.end_ns = b + 8 * MS;
        c.bytes = 1 << 20;
        c.count = 1 << 18;
        c.comm_hash = 0xabc;
        c.seq = (uint32_t)s;
        c.nranks = 4;
        c.rank = (uint32_t)r;
        c.op = TPROF_COMM_ALLREDUCE;
        synth_comm(f, 1, b + 7 * MS + 1000, &c, NULL);
        synth_kernel(f, 2, b + 7 * MS + 5000 + (uint64_t)r * 1000, b + 8 * MS + 500000, 0, 13,
                     1000 + (uint32_t)s, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
        synth_pop(f, 1, b + 9 * MS, 0);
        if (r == 2) {
            synth_counter(f, 3, b, "gpu0.power_w", 300 + s);
            synth_counter(f, 3, b, "gpu0.util_percent", 80);
        }
        synth_counter(f, 3, b + MS, "process.cpu_percent", 90 + r + s);
        synth_counter(f, 3, b + MS, "process.rss_bytes", (double)(1000000 * (r + s + 1)));
        synth_counter(f, 3, b + MS, "process.threads", 8 + r);
        synth_counter(f, 3, b + MS, "process.ctx_switches_per_s", 100 * s);
        synth_counter(f, 1, b + 2 * MS, "cuda.memory_allocated_bytes", (double)((s + 1) << 20));
        synth_counter(f, 1, b + 2 * MS, "cuda.memory_reserved_bytes", (double)((s + 2) << 20));
        synth_counter(f, 1, b + 3 * MS, "queue_depth", s);
        synth_flush(f);
    }
    if (r != 1) synth_end_of_file(f, T0 + 200 * MS, 0);
    assert_int_equal(synth_close(f), 0);
}

/* The synthetic run of four_ranks_write in dir, with the node sampler of host h0 and a
 * helper of rank 0 (its parent) that records a range. */
static inline void four_ranks_run(const char *dir) {
    for (int r = 0; r < 4; r++) four_ranks_write(dir, r);
    synth_file *f = synth_open(dir, "h0", 90, 1700000000000000000ull, T0);
    synth_meta(f, "trainprof.role", "node-sampler");
    synth_thread(f, 1, 90);
    for (int s = 0; s < 20; s++)
        synth_counter(f, 1, T0 + (uint64_t)s * 5 * MS, "gpu0.power_w", 250 + s);
    synth_end_of_file(f, T0 + 200 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    synth_header h;
    memset(&h, 0, sizeof h);
    h.host = "h0";
    h.pid = 91;
    h.ppid = 100;
    h.start_realtime_ns = 1700000000000000000ull;
    h.start_mono_ns = T0;
    f = synth_open_ex(dir, &h);
    synth_thread(f, 1, 91);
    synth_push(f, 1, T0 + MS, "data", 0, 0);
    synth_pop(f, 1, T0 + 3 * MS, 0);
    synth_end_of_file(f, T0 + 200 * MS, 0);
    assert_int_equal(synth_close(f), 0);
}

/* The diagnosis scenarios of diag_scen.c (two hosts, a late rank, short kernels and host
 * syncs, data loading, memory, throttling, few steps), each run in a directory of its own
 * given to `same` (must_compare 1), then removed. */
static inline void slim_scenarios(void (*same)(const char *const *ops, size_t n,
                                               int must_compare)) {
    scen v[8];
    for (int i = 0; i < 8; i++) v[i] = scen_base();
    v[1].nranks = 4, v[1].hosts = 2, v[1].clock_err = 3 * (int64_t)MS, v[1].lag_rank = 2,
    v[1].lag = 2 * MS;
    v[2].short_kernels = 1, v[2].sync = 1;
    v[3].data = 2 * MS, v[3].buckets = 3;
    v[4].alloc_share = 0.95, v[4].mem_share = 0.97;
    v[5].throttle = 1, v[5].power_at_limit = 1, v[5].meta_model = "llama-7b",
    v[5].meta_tokens = "4096";
    v[6].nranks = 3, v[6].data_over_busy = 1, v[6].data = MS;
    v[7].steps = 2;
    for (int i = 0; i < 8; i++) {
        char dir[512];
        assert_int_equal(synth_tmpdir(dir, sizeof dir, "report-slim-scen"), 0);
        for (int r = 0; r < v[i].nranks; r++) scen_write_rank(dir, &v[i], r);
        const char *ops[] = {dir};
        same(ops, 1, 1);
        synth_rmtree(dir);
    }
}

/* The corpus's rank files (tests/fuzz/corpus/rankfile) each alone, then as one run, then with
 * a torch.profiler trace beside them, each given to `same` (whole against slim); must_compare
 * is 1 for the last two, which have something to compare (a damaged file alone may not). */
#ifdef TPROF_SOURCE_DIR
static inline void slim_corpus(void (*same)(const char *const *ops, size_t n,
                                            int must_compare)) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/rankfile", TPROF_SOURCE_DIR);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    size_t files = 0;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 6, ".tprof")) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        const char *ops[] = {path};
        same(ops, 1, 0);
        files++;
    }
    closedir(d);
    assert_true(files >= 20);
    const char *ops[] = {dir};
    same(ops, 1, 1); /* the corpus as one run */
    /* a torch.profiler trace beside rank files: loaded whole in a slim run */
    char trace[8192];
    snprintf(trace, sizeof trace, "%s/tests/data/kineto/megatron_step17.pt.trace.json.gz",
             TPROF_SOURCE_DIR);
    const char *mixed[] = {trace, dir};
    same(mixed, 2, 1);
}
#endif

/* Rank 0 of 1 on host h0 (pid 100): `n` steps 10 ms apart, the first at T0 + 1 ms, each
 * `len` ns long; its file ends at `end`. */
static inline void slim_steps_rank(const char *dir, uint64_t n, uint64_t len, uint64_t end) {
    synth_file *f = synth_open(dir, "h0", 100, RT0, T0);
    synth_rank(f, 0, 1);
    synth_thread(f, 1, 100);
    for (uint64_t s = 0; s < n; s++) {
        synth_step_begin(f, 1, T0 + MS + s * 10 * MS, s);
        synth_step_end(f, 1, T0 + MS + s * 10 * MS + len, s);
    }
    synth_end_of_file(f, end, 0);
    assert_int_equal(synth_close(f), 0);
}

/* The node sampler of host h0 (pid 90), its thread 1 (tid 90) open for samples. */
static inline synth_file *slim_node_sampler(const char *dir) {
    synth_file *f = synth_open(dir, "h0", 90, RT0, T0);
    synth_meta(f, "trainprof.role", "node-sampler");
    synth_thread(f, 1, 90);
    return f;
}

/* One rank and the node sampler of its host, whose first thread samples more GPUs than a
 * packed table of counter names holds (TP_CPACK_NAMES: a slim thread keeps them unpacked),
 * its second one GPU (packed). */
static inline void slim_wide_sampler_run(const char *dir) {
    slim_steps_rank(dir, 5, 8 * MS, T0 + 100 * MS);
    synth_file *f = slim_node_sampler(dir);
    synth_thread(f, 2, 91);
    for (uint64_t s = 0; s < 3; s++) {
        for (unsigned g = 0; g < TP_CPACK_NAMES + 4; g++) {
            char name[32];
            snprintf(name, sizeof name, "gpu%u.power_w", g);
            synth_counter(f, 1, T0 + s * 20 * MS, name, 250.5 + g + (double)s);
        }
        synth_counter(f, 2, T0 + s * 20 * MS, "gpu0.temperature_c", 40 + (double)s);
        synth_flush(f);
    }
    synth_end_of_file(f, T0 + 100 * MS, 0);
    assert_int_equal(synth_close(f), 0);
}

/* One rank and a node sampler of 20,000 samples of 4 GPU metrics: its packed samples (tens
 * of kB) larger than a summary's windows but the last (test_summary_stream.c) and than the
 * spill thresholds of test_counter_spill.c. */
static inline void slim_long_sampler_run(const char *dir) {
    slim_steps_rank(dir, 5, 8 * MS, T0 + 100 * MS);
    synth_file *f = slim_node_sampler(dir);
    static const char *const names[] = {"gpu0.power_w", "gpu0.energy_j", "gpu1.power_w",
                                        "gpu1.sm_clock_mhz"};
    for (unsigned k = 0; k < 20000; k++) {
        for (unsigned m = 0; m < 4; m++)
            synth_counter(f, 1, T0 + (uint64_t)k * 100000, names[m],
                          m == 1 ? 100 + k * 0.037 : 250.125 + (double)(k * 37 % 11));
        if (k % 1000 == 999) synth_flush(f);
    }
    synth_end_of_file(f, T0 + 2100 * MS, 0);
    assert_int_equal(synth_close(f), 0);
}

#endif /* TPROF_TESTS_SLIM_RUNS_H */
