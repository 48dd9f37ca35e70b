/*
 * report_text.h — test helper: the text report of `rep` (tp_report_write_text, no colour) in
 * memory; the caller frees it. Include after <cmocka.h>, <stdio.h> and "analysis/report.h".
 */
#ifndef TPROF_TEST_REPORT_TEXT_H
#define TPROF_TEST_REPORT_TEXT_H

static __attribute__((unused)) char *report_text(const cJSON *rep) {
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    assert_non_null(mf);
    assert_int_equal(tp_report_write_text(rep, mf, 0), 0);
    fclose(mf);
    return buf;
}

#endif
