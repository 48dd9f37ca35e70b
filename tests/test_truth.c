/*
 * test_truth.c — the report says what happened, on synthetic runs with known answers:
 * NVTX process ranges (start/end, ended on another thread) in the CPU step breakdown with
 * exact shares; thread ranges left open end at their thread's last event, not the process's;
 * orphan pops counted per thread; the text report valid UTF-8 with long names cut on a
 * character boundary and marked; impossible figures (MFU above 100 %, CPU above 100 % per
 * core) flagged instead of printed as results; steps touched by ring drops flagged;
 * torch.distributed ops of every backend counted as communication and labelled with it.
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

#include "analysis/model.h"
#include "analysis/text.h"
#include "analysis/report.h"
#include "report_text.h"
#include "export/chrome.h"
#include "format/format.h"
#include "synth.h"
#include "trainprof.h"

static const uint64_t T0 = 1000000000ull, MS = 1000000ull;
static const uint64_t RT0 = 1700000000000000000ull;

#define NEAR(a, b) assert_true(fabs((double)(a) - (double)(b)) < 1e-9)

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItem(o, k);
    if (!cJSON_IsNumber(v)) fail_msg("no number \"%s\"", k);
    return v->valuedouble;
}

static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItem(o, k);
    if (!cJSON_IsString(v)) fail_msg("no string \"%s\"", k);
    return v->valuestring;
}

static cJSON *report_warmup(const tp_run *run, int warmup) {
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.warmup = warmup;
    return report_json(run, &o);
}

static cJSON *rank0(const cJSON *rep) {
    cJSON *r = cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "ranks"), 0);
    assert_non_null(r);
    return r;
}

/* the CPU breakdown row named `name`, or NULL */
static const cJSON *bd_row(const cJSON *rep, const char *name) {
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(cJSON_GetObjectItem(rank0(rep), "breakdown"), "ranges"))
        if (!strcmp(str(e, "name"), name)) return e;
    return NULL;
}

static synth_file *open_run(char *dir, size_t n, const char *tag, uint32_t pid) {
    assert_int_equal(synth_tmpdir(dir, n, tag), 0);
    synth_file *f = synth_open(dir, "h", (int32_t)pid, RT0, T0);
    synth_rank(f, 0, 1);
    return f;
}

/* ------------------------------------------------------------------ ranges and threads */

/* Three API steps of 100 ms on thread 1 ("main", tid 100), each holding:
 *   prep     push/pop on main                                   0 -  5 ms
 *   work     started on main, ended by the worker (tid 101)     5 - 96 ms
 *   inner    started and ended on main, inside work           10 - 20 ms
 *   handoff  started by the worker, ended on main              96 - 98 ms
 *   bg       started and ended by the worker                   97 - 99.5 ms
 * NVTX's process ranges may end on another thread; those the step thread started or ended are
 * part of its step: prep 5 %, work 91 %, handoff 2 % (98 - 96; bg is the worker's own), 2 %
 * outside any range; inner is inside work, so it owns no time of its own. */
static void test_process_range_across_threads(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = open_run(dir, sizeof dir, "truth-xthread", 100);
    synth_thread(f, 1, 100);
    synth_thread(f, 2, 101);
    for (uint64_t s = 0; s < 3; s++) {
        uint64_t b = T0 + s * 100 * MS, id = 1 + s * 10;
        synth_step_begin(f, 1, b, s);
        synth_push(f, 1, b, "prep", 0, 0);
        synth_pop(f, 1, b + 5 * MS, 0);
        synth_start(f, 1, b + 5 * MS, id, "work", 0, 0);
        synth_start(f, 1, b + 10 * MS, id + 1, "inner", 0, 0);
        synth_end(f, 1, b + 20 * MS, id + 1);
        synth_end(f, 2, b + 96 * MS, id);
        synth_start(f, 2, b + 96 * MS, id + 2, "handoff", 0, 0);
        synth_start(f, 2, b + 97 * MS, id + 3, "bg", 0, 0);
        synth_end(f, 1, b + 98 * MS, id + 2);
        synth_end(f, 2, b + 99 * MS + MS / 2, id + 3);
        synth_step_end(f, 1, b + 100 * MS, s);
    }
    synth_end_of_file(f, T0 + 300 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = report_warmup(&run, 0);
    const cJSON *b = cJSON_GetObjectItem(rank0(rep), "breakdown");
    assert_string_equal(str(b, "basis"), "cpu");
    assert_non_null(bd_row(rep, "prep"));
    assert_non_null(bd_row(rep, "work"));
    assert_non_null(bd_row(rep, "handoff"));
    NEAR(num(bd_row(rep, "prep"), "share"), 0.05);
    NEAR(num(bd_row(rep, "work"), "share"), 0.91);
    NEAR(num(bd_row(rep, "handoff"), "share"), 0.02);
    NEAR(num(cJSON_GetObjectItem(bd_row(rep, "work"), "ms"), "p50"), 91.0);
    assert_null(bd_row(rep, "bg"));
    assert_null(bd_row(rep, "inner"));
    NEAR(num(cJSON_GetObjectItem(b, "share"), "untracked"), 0.02);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* Thread 2 (tid 201) pushes "left" at 10 ms and records its last event at 20 ms (it exited
 * without popping); a process range "flight" is started at 15 ms and never ended; the
 * process runs to 100 ms. The thread range was known open only until its thread's last
 * event (20 ms: nothing later is known of that thread, and only it could pop the range); the
 * process range could have been ended by any thread up to the process's end. Both are
 * flagged unterminated, in the model and in the Chrome export. */
static void test_unclosed_ends_at_thread_last_event(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = open_run(dir, sizeof dir, "truth-unclosed", 200);
    synth_thread(f, 1, 200);
    synth_thread(f, 2, 201);
    synth_mark(f, 1, T0 + MS, "begin", 0, 0);
    synth_push(f, 2, T0 + 10 * MS, "left", 0, 0);
    synth_start(f, 2, T0 + 15 * MS, 7, "flight", 0, 0);
    synth_mark(f, 2, T0 + 20 * MS, "last", 0, 0);
    synth_mark(f, 1, T0 + 99 * MS, "end", 0, 0);
    synth_end_of_file(f, T0 + 100 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    const tp_process *p = &run.procs[0];
    const tp_range *left = NULL, *flight = NULL;
    for (size_t i = 0; i < p->nthreads; i++)
        for (size_t k = 0; k < p->threads[i].nranges; k++) {
            const tp_range *r = &p->threads[i].ranges[k];
            if (!strcmp(r->name, "left")) left = r;
            if (!strcmp(r->name, "flight")) flight = r;
        }
    assert_non_null(left);
    assert_non_null(flight);
    assert_true(left->flags & TP_R_UNCLOSED);
    assert_int_equal(left->end, T0 + 20 * MS);
    assert_true(flight->flags & TP_R_UNCLOSED);
    assert_int_equal(flight->end, T0 + 100 * MS);
    /* the export draws what is known: 10 ms, marked unclosed */
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    assert_int_equal(tp_export_chrome(&run, mf, NULL), 0);
    fclose(mf);
    cJSON *tr = cJSON_Parse(buf);
    assert_non_null(tr);
    const cJSON *e, *found = NULL;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(tr, "traceEvents")) {
        const cJSON *n = cJSON_GetObjectItem(e, "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, "left")) found = e;
    }
    assert_non_null(found);
    assert_string_equal(str(found, "ph"), "X");
    NEAR(num(found, "dur"), 10000.0); /* us */
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(found, "args"), "unclosed")));
    cJSON_Delete(tr);
    free(buf);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* Pops with nothing open: one on "main" (tid 300) at 5 ms, two on "loader" (tid 301) from
 * 7 ms, beside a matched push/pop. NVTX keeps a range stack per thread, so the report counts
 * them per thread and names the thread, with the time of the first. */
static void test_orphan_pops_per_thread(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = open_run(dir, sizeof dir, "truth-pops", 300);
    synth_thread(f, 1, 300);
    synth_thread(f, 2, 301);
    synth_thread_name(f, 1, T0, 300, "main");
    synth_thread_name(f, 2, T0, 301, "loader");
    synth_pop(f, 1, T0 + 5 * MS, 0);
    synth_push(f, 2, T0 + 6 * MS, "ok", 0, 0);
    synth_pop(f, 2, T0 + 6 * MS + 1, 0);
    synth_pop(f, 2, T0 + 7 * MS, 0);
    synth_pop(f, 2, T0 + 9 * MS, 0);
    synth_end_of_file(f, T0 + 10 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = report_warmup(&run, 0);
    const cJSON *jp = cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "processes"), 0);
    NEAR(num(jp, "unmatched_pops"), 3);
    const cJSON *bt = cJSON_GetObjectItem(jp, "unmatched_pops_by_thread");
    assert_int_equal(cJSON_GetArraySize(bt), 2);
    const cJSON *m = cJSON_GetArrayItem(bt, 0), *l = cJSON_GetArrayItem(bt, 1);
    if (num(m, "tid") != 300) {
        const cJSON *x = m;
        m = l;
        l = x;
    }
    NEAR(num(m, "tid"), 300);
    assert_string_equal(str(m, "thread"), "main");
    NEAR(num(m, "count"), 1);
    NEAR(num(m, "first_s"), 0.005);
    NEAR(num(l, "tid"), 301);
    assert_string_equal(str(l, "thread"), "loader");
    NEAR(num(l, "count"), 2);
    NEAR(num(l, "first_s"), 0.007);
    char *text = report_text_warmup(&run, 0);
    assert_non_null(strstr(text, "2 on thread \"loader\" (tid 301, first at 0.007 s)"));
    free(text);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* ------------------------------------------------------------------ valid UTF-8 */

/* 1 when s[0..n) is valid UTF-8 (RFC 3629: shortest forms, no surrogates, at most
 * U+10FFFF); written here apart from the code under test. */
static int utf8_valid(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                   : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!len || i + len > n) return 0;
        for (size_t k = 1; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && s[i + 1] < 0xA0) return 0;
        if (c == 0xED && s[i + 1] >= 0xA0) return 0;
        if (c == 0xF0 && s[i + 1] < 0x90) return 0;
        if (c == 0xF4 && s[i + 1] >= 0x90) return 0;
        i += len;
    }
    return 1;
}

/* n copies of s, in a static buffer */
static const char *rep_str(const char *s, int n, char *buf, size_t cap) {
    size_t o = 0, l = strlen(s);
    for (int i = 0; i < n && o + l < cap; i++, o += l) memcpy(buf + o, s, l);
    buf[o] = 0;
    return buf;
}

/* Names whose column cut falls inside a character: "a" + 30 x "é" (2 bytes each; the CPU
 * breakdown's 28-column cut fell on byte 28, inside an é), 30 CJK characters (2 columns, 3
 * bytes each) in the 40-column ranges table, a thread name of 200 x "é" (400 bytes; shown
 * names were cut at 255 bytes, inside an é), and a --step-name holding invalid bytes. The
 * text and JSON reports must be valid UTF-8, every cut name must end with the mark, and the
 * invalid bytes must show as U+FFFD. */
/* tp_utf8_write: each invalid byte becomes U+FFFD, the valid ones pass as they are; a stream
 * that refuses the bytes (a full device, unbuffered so the write itself fails; a stream open
 * for reading) gives TPROF_ERR_IO, with or without a replacement to write. */
static void test_utf8_write_codes(void **state) {
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    assert_non_null(mf);
    assert_int_equal(tp_utf8_write(mf, "ab\xff" "cd\n", 6), TPROF_OK);
    assert_int_equal(fclose(mf), 0);
    assert_int_equal(len, 8);
    assert_memory_equal(buf, "ab\xef\xbf\xbd" "cd\n", 8);
    free(buf);

    FILE *full = fopen("/dev/full", "w");
    assert_non_null(full);
    assert_int_equal(setvbuf(full, NULL, _IONBF, 0), 0);
    assert_int_equal(tp_utf8_write(full, "valid", 5), TPROF_ERR_IO);
    assert_int_equal(tp_utf8_write(full, "\xff", 1), TPROF_ERR_IO);
    fclose(full);
    FILE *ro = fopen("/dev/null", "r");
    assert_non_null(ro);
    assert_int_equal(tp_utf8_write(ro, "x\xffy", 3), TPROF_ERR_IO);
    assert_int_equal(tp_utf8_write(ro, "", 0), TPROF_OK); /* nothing to write */
    fclose(ro);
}

static void test_text_valid_utf8_and_cut_marks(void **state) {
    (void)state;
    char dir[512], e30[128], e26[128], cjk30[128], cjk19[128], e200[512], e126[512];
    char want[1024];
    const char *acc = "a";
    snprintf(want, sizeof want, "%s%s", acc, rep_str("\xC3\xA9", 30, e30, sizeof e30));
    const char *longe = strdup(want);
    rep_str("\xE6\x95\xB0", 30, cjk30, sizeof cjk30); /* 数 */
    rep_str("\xC3\xA9", 200, e200, sizeof e200);
    synth_file *f = open_run(dir, sizeof dir, "truth-utf8", 400);
    synth_thread(f, 1, 400);
    synth_thread_name(f, 1, T0, 400, e200);
    for (uint64_t s = 0; s < 3; s++) {
        uint64_t b = T0 + s * 10 * MS;
        synth_step_begin(f, 1, b, s);
        synth_push(f, 1, b, longe, 0, 0);
        synth_pop(f, 1, b + 4 * MS, 0);
        synth_push(f, 1, b + 4 * MS, cjk30, 0, 0);
        synth_pop(f, 1, b + 6 * MS, 0);
        synth_step_end(f, 1, b + 10 * MS, s);
    }
    synth_end_of_file(f, T0 + 30 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = report_warmup(&run, 0);
    char *text = report_text_warmup(&run, 0);
    assert_true(utf8_valid((const unsigned char *)text, strlen(text)));
    /* the breakdown's 28 columns: "a" and 26 é, then the mark */
    snprintf(want, sizeof want, "    a%s\xE2\x80\xA6 ", rep_str("\xC3\xA9", 26, e26, sizeof e26));
    assert_non_null(strstr(text, want));
    /* the ranges table's 40 columns: 19 wide characters (38 columns) and the mark */
    snprintf(want, sizeof want, "  %s\xE2\x80\xA6 ", rep_str("\xE6\x95\xB0", 19, cjk19, sizeof cjk19));
    assert_non_null(strstr(text, want));
    /* the step thread's name within 255 bytes: 126 é (252 bytes) and the mark */
    snprintf(want, sizeof want, "(thread %s\xE2\x80\xA6)", rep_str("\xC3\xA9", 126, e126, sizeof e126));
    assert_non_null(strstr(text, want));
    char *js = cJSON_Print(rep);
    assert_true(utf8_valid((const unsigned char *)js, strlen(js)));
    free(js);
    free(text);
    cJSON_Delete(rep);

    /* a --step-name with invalid bytes (ignored here: the program marks its steps): quoted
     * back in report.json with U+FFFD for each invalid byte */
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.step_name = "st\xFF" "ep\xC3";
    rep = tp_report_build(&run, &o);
    text = report_text(&run, &o);
    assert_true(utf8_valid((const unsigned char *)text, strlen(text)));
    assert_string_equal(str(cJSON_GetObjectItem(rank0(rep), "steps"), "requested_name"),
                        "st\xEF\xBF\xBD" "ep\xEF\xBF\xBD");
    js = cJSON_Print(rep);
    assert_true(utf8_valid((const unsigned char *)js, strlen(js)));
    free(js);
    free(text);
    cJSON_Delete(rep);
    free((void *)longe);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* ------------------------------------------------------------------ impossible figures */

/* One rank, five API steps of 10 ms, with figures past their bounds: model FLOPs of 1e16 per
 * step (1e6 TFLOP/s on an H100 whose bf16 dense peak is 989.5: MFU about 101,000 %), CPU
 * samples of 150 % and 900 % on a host of 4 CPUs (at most 400 %), NVML utilisation of 130 %,
 * and NVML memory used 100 GB of an 80 GB GPU (a memory-peak finding would follow from it).
 * None may be printed as a result: each is flagged with its reason in the JSON and the
 * text, and no diagnosis rule acts on one. */
static void test_impossible_figures_flagged(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = open_run(dir, sizeof dir, "truth-figures", 500);
    synth_thread(f, 1, 500);
    synth_thread(f, 2, 501);
    synth_meta(f, "process.host_cpus", "4");
    synth_meta(f, "gpu.0.name", "NVIDIA H100 80GB HBM3");
    synth_meta(f, "gpu.0.memory_total_bytes", "80000000000");
    for (uint64_t s = 0; s < 5; s++) {
        synth_step_begin(f, 1, T0 + s * 10 * MS, s);
        synth_step_end(f, 1, T0 + (s + 1) * 10 * MS, s);
    }
    for (int i = 0; i < 2; i++) {
        uint64_t t = T0 + (uint64_t)(10 + 20 * i) * MS;
        synth_counter(f, 2, t, "process.cpu_percent", i ? 900.0 : 150.0);
        synth_counter(f, 2, t, "process.rss_bytes", 1e9);
        synth_counter(f, 2, t, "gpu0.util_percent", 130.0);
        synth_counter(f, 2, t, "gpu0.mem_used_bytes", 1e11);
    }
    synth_end_of_file(f, T0 + 50 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.warmup = 0;
    o.flops_per_step = 1e16;
    cJSON *rep = tp_report_build(&run, &o);
    assert_non_null(rep);
    /* MFU and TFLOP/s: out of their keys, into "invalid" with the reason */
    const cJSON *t = cJSON_GetObjectItem(rep, "throughput");
    assert_null(cJSON_GetObjectItem(t, "mfu"));
    assert_null(cJSON_GetObjectItem(t, "tflops_per_gpu"));
    const cJSON *inv = cJSON_GetObjectItem(t, "invalid");
    NEAR(num(cJSON_GetObjectItem(inv, "tflops_per_gpu"), "value"), 1e6);
    NEAR(num(cJSON_GetObjectItem(inv, "mfu"), "value"), 1e6 / 989.5);
    NEAR(num(cJSON_GetObjectItem(inv, "mfu"), "limit"), 1);
    assert_non_null(strstr(str(cJSON_GetObjectItem(inv, "mfu"), "reason"), "--flops-per-step"));
    /* CPU: the mean (525 %) and the max (900 %) past 4 x 100 % */
    const cJSON *pr = cJSON_GetObjectItem(rank0(rep), "process");
    assert_null(cJSON_GetObjectItem(pr, "cpu_percent_max"));
    assert_null(cJSON_GetObjectItem(pr, "cpu_percent_mean"));
    const cJSON *pinv = cJSON_GetObjectItem(pr, "invalid");
    NEAR(num(cJSON_GetObjectItem(pinv, "cpu_percent_max"), "value"), 900);
    NEAR(num(cJSON_GetObjectItem(pinv, "cpu_percent_max"), "limit"), 400);
    NEAR(num(cJSON_GetObjectItem(pinv, "cpu_percent_mean"), "value"), 525);
    /* NVML utilisation and memory share */
    const cJSON *g = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(rank0(rep), "nvml"), "gpus"), 0);
    assert_non_null(g);
    assert_null(cJSON_GetObjectItem(g, "util_percent_mean"));
    NEAR(num(cJSON_GetObjectItem(cJSON_GetObjectItem(g, "invalid"), "util_percent_mean"), "value"), 130);
    assert_null(cJSON_GetObjectItem(g, "mem_used_peak_share"));
    NEAR(num(cJSON_GetObjectItem(cJSON_GetObjectItem(g, "invalid"), "mem_used_peak_share"), "value"), 1.25);
    /* no rule acted on a flagged figure */
    const cJSON *fd;
    cJSON_ArrayForEach(fd, cJSON_GetObjectItem(rep, "findings"))
        assert_string_not_equal(str(fd, "id"), "memory_peak");
    char *text = report_text(&run, &o);
    assert_null(strstr(text, "; MFU"));
    assert_null(strstr(text, "  model FLOPs"));
    assert_non_null(strstr(text, "flagged, not a result: model FLOPs 1e+16 per step per rank (option) "
                                 "give 1000000.0 TFLOP/s per GPU, MFU 101061.1 %: above the peak of "
                                 "989.5 TFLOP/s"));
    assert_non_null(strstr(text, "process: CPU mean flagged, max flagged; "));
    assert_non_null(strstr(text, "flagged, not a result: process.cpu_percent_max = 900 (limit 400): "
                                 "above 100 % per core"));
    assert_non_null(strstr(text, "flagged, not a result: nvml.gpus[0].util_percent_mean = 130 (limit 100)"));
    assert_null(strstr(text, "utilisation 130"));
    free(text);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* ------------------------------------------------------------------ drops on steps */

/* Six API steps of 10 ms on thread 1, one chunk per flush pass, with the sampler's thread 2
 * flushed after it in each pass (as the library writes). The pass holding step 3 reports 7
 * events dropped by the full ring. They were recorded after the thread's last event before
 * that pass (step 2's end, 30 ms) and before its first event of the next pass (step 4's
 * begin, 40 ms): step 3 is built on dropped events and is flagged, the others are not. When
 * the drain that reports them is written in two chunks (the full ring wrapped), the second
 * holding step 4's begin, the drops may come after that begin: the window runs on to the
 * next drain (step 4's end, 50 ms) and step 4 is flagged too. */
static void drops_run(char *dir, size_t n, const char *tag, int wrapped) {
    synth_file *f = open_run(dir, n, tag, 600);
    synth_thread(f, 1, 600);
    synth_thread(f, 2, 601);
    for (uint64_t s = 0; s < 6; s++) {
        uint64_t b = T0 + s * 10 * MS;
        if (s == 3) synth_set_dropped(f, 1, 7);
        synth_step_begin(f, 1, b, s);
        /* wrapped: step 3's drain goes on in a second chunk, step 4's begin */
        if (s == 4 && wrapped) synth_flush_thread(f, 1);
        synth_step_end(f, 1, b + 10 * MS, s);
        synth_flush_thread(f, 1);
        if (s == 3 && wrapped) continue; /* no other chunk before the drain's second one */
        synth_counter(f, 2, b + 5 * MS, "process.threads", 2);
        synth_flush_thread(f, 2);
    }
    synth_end_of_file(f, T0 + 60 * MS, 7);
    assert_int_equal(synth_close(f), 0);
}

static void test_drops_flag_steps(void **state) {
    (void)state;
    char dir[512];
    for (int wrapped = 0; wrapped < 2; wrapped++) {
        drops_run(dir, sizeof dir, wrapped ? "truth-drops-wrap" : "truth-drops", wrapped);
        tp_run run;
        load_run(dir, &run);
        assert_int_equal(run.procs[0].ndrops, 1);
        assert_int_equal(run.procs[0].drops[0].from, T0 + 30 * MS);
        assert_int_equal(run.procs[0].drops[0].to, T0 + (wrapped ? 50 : 40) * MS);
        cJSON *rep = report_warmup(&run, 0);
        const cJSON *x = cJSON_GetObjectItem(cJSON_GetObjectItem(rank0(rep), "steps"), "dropped_events");
        assert_non_null(x);
        NEAR(num(x, "steps_touched"), wrapped ? 2 : 1);
        NEAR(num(x, "events_in_steps"), 7);
        assert_null(cJSON_GetObjectItem(x, "events_unplaced"));
        char *text = report_text_warmup(&run, 0);
        char want[200];
        snprintf(want, sizeof want, "flagged: %d of 6 measured steps built on dropped events (7 "
                                    "dropped by full rings inside them)", wrapped ? 2 : 1);
        assert_non_null(strstr(text, want));
        free(text);
        cJSON_Delete(rep);
        tp_run_free(&run);
        synth_rmtree(dir);
    }
    tp_run run;
    synth_file *f;
    cJSON *rep;
    const cJSON *x;

    /* 5 more dropped where no thread says (the process stream, a thread without a ring) */
    f = open_run(dir, sizeof dir, "truth-drops-unplaced", 601);
    synth_thread(f, 1, 601);
    for (uint64_t s = 0; s < 4; s++) {
        synth_step_begin(f, 1, T0 + s * 10 * MS, s);
        synth_step_end(f, 1, T0 + (s + 1) * 10 * MS, s);
    }
    synth_end_of_file(f, T0 + 40 * MS, 5);
    assert_int_equal(synth_close(f), 0);
    load_run(dir, &run);
    rep = report_warmup(&run, 0);
    x = cJSON_GetObjectItem(cJSON_GetObjectItem(rank0(rep), "steps"), "dropped_events");
    assert_non_null(x);
    NEAR(num(x, "steps_touched"), 4);
    NEAR(num(x, "events_unplaced"), 5);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* Six API steps on thread 1 (tid 610, unnamed), step s from s*10 to s*10+8 ms, one chunk
 * per step. The ring fills during step 2: its end and step 3's begin are dropped (2 events),
 * and the chunk holding step 3's end reports them; the window runs from step 2's begin (20 ms,
 * the thread's last event before) to step 4's begin (40 ms, its first event of the next
 * drain). Steps 2 and 3 have no whole step: exactly 2 missing, numbers 2-3; 4 steps remain.
 * Range pops with nothing open: 1 at 5 ms, before any drop (a program mistake), and 2 after
 * the drops (39 and 45 ms): their pushes were likely the dropped events. */
static void test_drops_missing_steps(void **state) {
    (void)state;
    char dir[512];
    synth_file *f = open_run(dir, sizeof dir, "truth-drops-missing", 610);
    synth_thread(f, 1, 610);
    synth_thread(f, 2, 612);
    for (uint64_t s = 0; s < 6; s++) {
        uint64_t b = T0 + s * 10 * MS;
        if (s == 3) synth_set_dropped(f, 1, 2);
        if (s != 3) synth_step_begin(f, 1, b, s);
        if (s == 0) synth_pop(f, 1, b + 5 * MS, 0);
        if (s != 2) synth_step_end(f, 1, b + 8 * MS, s);
        if (s == 3) synth_pop(f, 1, b + 9 * MS, 0);
        if (s == 4) synth_pop(f, 1, b + 5 * MS, 0);
        synth_flush_thread(f, 1);
        /* the sampler's chunk after each pass, as the library writes: the next chunk of
         * thread 1 is a new drain */
        synth_counter(f, 2, b + 9 * MS, "process.threads", 2);
        synth_flush_thread(f, 2);
    }
    synth_end_of_file(f, T0 + 60 * MS, 2);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    assert_int_equal(run.procs[0].ndrops, 1);
    assert_int_equal(run.procs[0].drops[0].from, T0 + 20 * MS);
    assert_int_equal(run.procs[0].drops[0].to, T0 + 40 * MS);
    cJSON *rep = report_warmup(&run, 0);
    const cJSON *js = cJSON_GetObjectItem(rank0(rep), "steps");
    NEAR(num(js, "count"), 4);
    const cJSON *mx = cJSON_GetObjectItem(js, "missing");
    assert_non_null(mx);
    NEAR(num(mx, "count"), 2);
    const cJSON *mr = cJSON_GetObjectItem(mx, "ranges");
    assert_int_equal(cJSON_GetArraySize(mr), 1);
    NEAR(cJSON_GetArrayItem(cJSON_GetArrayItem(mr, 0), 0)->valuedouble, 2);
    NEAR(cJSON_GetArrayItem(cJSON_GetArrayItem(mr, 0), 1)->valuedouble, 3);
    const cJSON *jp = cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "processes"), 0);
    NEAR(num(jp, "unmatched_pops"), 3);
    NEAR(num(jp, "unmatched_pops_after_drops"), 2);
    const cJSON *pt = cJSON_GetArrayItem(cJSON_GetObjectItem(jp, "unmatched_pops_by_thread"), 0);
    NEAR(num(pt, "count"), 3);
    NEAR(num(pt, "after_drops"), 2);
    char *text = report_text_warmup(&run, 0);
    assert_non_null(strstr(text, "missing: 2 step(s) (2-3): the thread's full ring dropped"));
    assert_non_null(strstr(text, "3 range pop(s) with no open range on their thread (ignored): "
                                 "3 on an unnamed thread (tid 610, first at 0.005 s); 2 after "
                                 "dropped events: their push was likely dropped"));
    free(text);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);

    /* the same numbers without drops: a program that skips numbers, nothing missing */
    f = open_run(dir, sizeof dir, "truth-gaps-no-drops", 611);
    synth_thread(f, 1, 611);
    for (uint64_t s = 0; s < 6; s++) {
        uint64_t b = T0 + s * 10 * MS;
        if (s != 3) synth_step_begin(f, 1, b, s);
        if (s != 2) synth_step_end(f, 1, b + 8 * MS, s);
        synth_flush_thread(f, 1);
    }
    synth_end_of_file(f, T0 + 60 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    load_run(dir, &run);
    rep = report_warmup(&run, 0);
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(rank0(rep), "steps"), "missing"));
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* Text columns: a host name holding U+FFFD (3 bytes, 1 column) is padded by columns in the
 * processes table, so the threads column stays where the header puts it; and a range name
 * used in two domains (the program's "ok" and "ok" in domain "megatron") is two breakdown
 * rows, each saying its domain when it has one. Two API steps of 20 ms; "ok" 2 ms in the
 * default domain, 4 ms in "megatron", per step. */
static void test_text_columns_and_domains(void **state) {
    (void)state;
    char dir[512];
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "truth-columns"), 0);
    synth_file *f = synth_open(dir, "h\xEF\xBF\xBDx", 620, RT0, T0);
    synth_rank(f, 0, 1);
    synth_domain(f, 1, "megatron");
    synth_thread(f, 1, 620);
    for (uint64_t s = 0; s < 2; s++) {
        uint64_t b = T0 + s * 20 * MS;
        synth_step_begin(f, 1, b, s);
        synth_push(f, 1, b + 1 * MS, "ok", 0, 0);
        synth_pop(f, 1, b + 3 * MS, 0);
        synth_push(f, 1, b + 5 * MS, "ok", 1, 0);
        synth_pop(f, 1, b + 9 * MS, 1);
        synth_step_end(f, 1, b + 20 * MS, s);
    }
    synth_end_of_file(f, T0 + 40 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = report_warmup(&run, 0);
    char *text = report_text_warmup(&run, 0);
    char want[200];
    snprintf(want, sizeof want, "\n  %-18s %s%17s %7d ", "rank 0", "h\xEF\xBF\xBDx:620", "", 1);
    if (!strstr(text, want)) fail_msg("no \"%s\" in:\n%s", want, text);
    snprintf(want, sizeof want, "\n    ok%26s ", "");
    if (!strstr(text, want)) fail_msg("no \"%s\" in:\n%s", want, text);
    snprintf(want, sizeof want, "\n    ok [megatron]%11s ", "");
    if (!strstr(text, want)) fail_msg("no \"%s\" in:\n%s", want, text);
    free(text);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* ------------------------------------------------------------------ torch.distributed */

static tprof_pl_comm torch_op(uint32_t op, uint64_t hash, uint64_t end, uint32_t flags) {
    tprof_pl_comm c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.comm_hash = hash;
    c.nranks = 2;
    c.bytes = op == TPROF_COMM_UNKNOWN ? 0 : 4u << 20;
    c.count = c.bytes / 4;
    c.end_ns = end;
    c.peer = TPROF_COMM_NO_PEER;
    c.source = TPROF_COMM_SRC_TORCH;
    c.flags = flags;
    return c;
}

static const cJSON *comm_of(const cJSON *rep, int i) {
    return cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "ranks"), i), "communication");
}

/* A CPU job over gloo, three steps of 100 ms. In each, DDP's bucket all-reduce is in flight
 * from 10 to 60 ms (async: the host computes meanwhile) and the host waits for it at the end
 * of backward from 50 to 60 ms (its Wait record); then a blocking all_reduce takes 70-75 ms.
 * Communication is 55 ms of the step ([10, 60] and [70, 75]), 15 ms of it exposed (the wait
 * and the blocking call) and 40 ms overlapped; the communicator and the Chrome export say
 * torch recorded it over gloo. */
static void test_torch_gloo_counted(void **state) {
    (void)state;
    char dir[512];
    const uint64_t H = 0xab;
    synth_file *f = open_run(dir, sizeof dir, "truth-gloo", 700);
    synth_thread(f, 1, 700);
    synth_thread(f, 2, 701); /* gloo's thread, where the async op completes */
    synth_meta(f, "torch.pg.00000000000000ab", "backend=gloo size=2 ranks=0,1");
    for (uint64_t s = 0; s < 3; s++) {
        uint64_t b = T0 + s * 100 * MS;
        synth_step_begin(f, 1, b, s);
        tprof_pl_comm a = torch_op(TPROF_COMM_ALLREDUCE, H, b + 60 * MS, TPROF_COMM_F_NONBLOCKING);
        a.seq = (uint32_t)(2 * s + 1);
        synth_comm(f, 2, b + 10 * MS, &a, NULL);
        tprof_pl_comm w = torch_op(TPROF_COMM_UNKNOWN, H, b + 60 * MS, 0);
        synth_comm(f, 1, b + 50 * MS, &w, "Wait");
        tprof_pl_comm c = torch_op(TPROF_COMM_ALLREDUCE, H, b + 75 * MS, 0);
        c.seq = (uint32_t)(2 * s + 2);
        synth_comm(f, 1, b + 70 * MS, &c, NULL);
        synth_step_end(f, 1, b + 100 * MS, s);
    }
    synth_end_of_file(f, T0 + 300 * MS, 0);
    assert_int_equal(synth_close(f), 0);
    tp_run run;
    load_run(dir, &run);
    cJSON *rep = report_warmup(&run, 0);
    const cJSON *c = comm_of(rep, 0), *x = cJSON_GetObjectItem(c, "exposure");
    assert_string_equal(str(x, "basis"), "host");
    NEAR(num(cJSON_GetObjectItem(x, "comm_ms"), "mean"), 55.0);
    NEAR(num(cJSON_GetObjectItem(x, "exposed_ms"), "mean"), 15.0);
    NEAR(num(cJSON_GetObjectItem(x, "overlapped_ms"), "mean"), 40.0);
    NEAR(num(x, "exposed_share"), 0.15);
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(c, "torch_backends"), 0)->valuestring, "gloo");
    const cJSON *cm = cJSON_GetArrayItem(cJSON_GetObjectItem(c, "communicators"), 0);
    assert_string_equal(str(cm, "source"), "torch");
    assert_string_equal(str(cm, "backend"), "gloo");
    char *text = report_text_warmup(&run, 0);
    assert_non_null(strstr(text, "9 ops (0 NCCL, 0 MPI, 9 torch.distributed over gloo)"));
    assert_non_null(strstr(text, "comm 0x00000000000000ab via gloo"));
    free(text);
    /* the export labels every op with its source and backend */
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    assert_int_equal(tp_export_chrome(&run, mf, NULL), 0);
    fclose(mf);
    cJSON *tr = cJSON_Parse(buf);
    assert_non_null(tr);
    int ops = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(tr, "traceEvents")) {
        const cJSON *cat = cJSON_GetObjectItem(e, "cat");
        if (!cJSON_IsString(cat) || strcmp(cat->valuestring, "comm")) continue;
        const cJSON *args = cJSON_GetObjectItem(e, "args");
        assert_string_equal(str(args, "source"), "torch");
        assert_string_equal(str(args, "backend"), "gloo");
        ops++;
    }
    assert_int_equal(ops, 9);
    cJSON_Delete(tr);
    free(buf);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

/* The default group of torch 2.x maps devices to backends ("cpu:gloo,cuda:nccl"). Rank 0 has
 * no NCCL profiler records (NCCL older than its plugin API): torch's record of a CUDA
 * all-reduce (flagged enqueue) is its only record, labelled nccl and taken as an enqueue
 * time, and a CPU tensor's all-reduce on the same group is gloo's. Rank 1's NCCL plugin
 * recorded the CUDA all-reduce itself: torch's twin is dropped, so it counts once. */
static void test_torch_backends_and_twins(void **state) {
    (void)state;
    char dir[512];
    const uint64_t H = 0xcd;
    assert_int_equal(synth_tmpdir(dir, sizeof dir, "truth-twins"), 0);
    for (int r = 0; r < 2; r++) {
        synth_file *f = synth_open(dir, "h", 800 + r, RT0, T0);
        synth_rank(f, r, 2);
        synth_thread(f, 1, (uint32_t)(800 + r));
        synth_meta(f, "torch.pg.00000000000000cd", "backend=cpu:gloo,cuda:nccl size=2 ranks=0,1");
        synth_step_begin(f, 1, T0, 0);
        tprof_pl_comm g = torch_op(TPROF_COMM_ALLREDUCE, H, T0 + 30 * MS, 0);
        synth_comm(f, 1, T0 + 20 * MS, &g, NULL);
        tprof_pl_comm n = torch_op(TPROF_COMM_ALLREDUCE, H, T0 + 40 * MS + 5000, TPROF_COMM_F_ENQUEUE);
        synth_comm(f, 1, T0 + 40 * MS, &n, NULL);
        if (r == 1) {
            tprof_pl_comm p = torch_op(TPROF_COMM_ALLREDUCE, 0x77, T0 + 40 * MS + 6000, 0);
            p.source = TPROF_COMM_SRC_NCCL;
            synth_comm(f, 1, T0 + 40 * MS + 1000, &p, NULL);
        }
        synth_step_end(f, 1, T0 + 100 * MS, 0);
        synth_end_of_file(f, T0 + 100 * MS, 0);
        assert_int_equal(synth_close(f), 0);
    }
    tp_run run;
    load_run(dir, &run);
    const tp_process *p0 = run.procs[0].rank == 0 ? &run.procs[0] : &run.procs[1];
    const tp_process *p1 = p0 == &run.procs[0] ? &run.procs[1] : &run.procs[0];
    assert_int_equal(p0->ncomm, 2);
    assert_int_equal(p1->ncomm, 2); /* gloo's and the plugin's: torch's NCCL twin dropped */
    for (size_t i = 0; i < p1->ncomm; i++) assert_false(p1->comm[i].flags & TPROF_COMM_F_ENQUEUE);
    cJSON *rep = report_warmup(&run, 0);
    const cJSON *c = comm_of(rep, 0);
    NEAR(num(c, "torch_ops"), 2);
    const cJSON *tb = cJSON_GetObjectItem(c, "torch_backends");
    assert_int_equal(cJSON_GetArraySize(tb), 2);
    assert_string_equal(cJSON_GetArrayItem(tb, 0)->valuestring, "gloo");
    assert_string_equal(cJSON_GetArrayItem(tb, 1)->valuestring, "nccl");
    /* the NCCL one is an enqueue, not a duration: no bandwidth from it */
    const cJSON *ops = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(c, "communicators"), 0), "ops");
    const cJSON *ar = cJSON_GetArrayItem(ops, 0);
    NEAR(num(ar, "count"), 2);
    NEAR(num(ar, "enqueue_only"), 1);
    NEAR(num(ar, "bw_ops"), 1);
    cJSON_Delete(rep);
    tp_run_free(&run);
    synth_rmtree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_write_codes),
        cmocka_unit_test(test_process_range_across_threads),
        cmocka_unit_test(test_unclosed_ends_at_thread_last_event),
        cmocka_unit_test(test_orphan_pops_per_thread),
        cmocka_unit_test(test_text_valid_utf8_and_cut_marks),
        cmocka_unit_test(test_impossible_figures_flagged),
        cmocka_unit_test(test_drops_flag_steps),
        cmocka_unit_test(test_drops_missing_steps),
        cmocka_unit_test(test_text_columns_and_domains),
        cmocka_unit_test(test_torch_gloo_counted),
        cmocka_unit_test(test_torch_backends_and_twins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
