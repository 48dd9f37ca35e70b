/*
 * report_text.h — test helpers for reports: load_run (a run directory, failing the test with
 * the loader's message), report_json and default_report (the JSON document with the given or
 * the default options; the caller deletes it) and the text report of a run (tp_report_make
 * with opts o, NULL for the defaults; tp_report_write_text, no colour) in memory; the caller
 * frees it; report_has and report_lacks fail the test when a text lacks (has) a string.
 * Include after
 * <cmocka.h>, <stdio.h>, "analysis/model.h" and "analysis/report.h".
 */
#ifndef TPROF_TEST_REPORT_TEXT_H
#define TPROF_TEST_REPORT_TEXT_H

#include <string.h>

static __attribute__((unused)) void report_has(const char *text, const char *want) {
    if (!strstr(text, want)) fail_msg("no \"%s\" in:\n%s", want, text);
}

static __attribute__((unused)) void report_lacks(const char *text, const char *bad) {
    if (strstr(text, bad)) fail_msg("\"%s\" in:\n%s", bad, text);
}

static __attribute__((unused)) void load_run(const char *dir, tp_run *run) {
    char err[256];
    if (tp_run_load(dir, run, err, sizeof err) != 0) fail_msg("%s: %s", dir, err);
}

/* The JSON document of run with options o (NULL: the defaults); the caller deletes it. */
static __attribute__((unused)) cJSON *report_json(const tp_run *run, const tp_report_opts *o) {
    tp_report_opts d;
    tp_report_opts_init(&d);
    cJSON *rep = tp_report_build(run, o ? o : &d);
    assert_non_null(rep);
    return rep;
}

static __attribute__((unused)) cJSON *default_report(const tp_run *run) {
    return report_json(run, NULL);
}

static __attribute__((unused)) char *report_text(const tp_run *run, const tp_report_opts *o) {
    tp_report rep;
    assert_int_equal(tp_report_make(run, o, &rep), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    assert_non_null(mf);
    assert_int_equal(tp_report_write_text(&rep, mf, 0), 0);
    fclose(mf);
    tp_report_free(&rep);
    return buf;
}

/* The same with the default options but `warmup` warm-up steps. */
static __attribute__((unused)) char *report_text_warmup(const tp_run *run, int warmup) {
    tp_report_opts o;
    tp_report_opts_init(&o);
    o.warmup = warmup;
    return report_text(run, &o);
}

#endif
