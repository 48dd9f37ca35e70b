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
#include "analysis/report.h"
#include "report_text.h"
#include "export/chrome.h"
#include "format/format.h"
#include "synth.h"

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

static void load_run(const char *dir, tp_run *run) {
    char err[256];
    if (tp_run_load(dir, run, err, sizeof err) != 0) fail_msg("%s: %s", dir, err);
}

static cJSON *report_warmup(const tp_run *run, int warmup) {
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.warmup = warmup;
    cJSON *rep = tp_report_build(run, &o);
    assert_non_null(rep);
    return rep;
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
    char *text = report_text(rep);
    assert_non_null(strstr(text, "2 on thread \"loader\" (tid 301), the first 0.007 s in"));
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
    char *text = report_text(rep);
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
    text = report_text(rep);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_process_range_across_threads),
        cmocka_unit_test(test_unclosed_ends_at_thread_last_event),
        cmocka_unit_test(test_orphan_pops_per_thread),
        cmocka_unit_test(test_text_valid_utf8_and_cut_marks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
