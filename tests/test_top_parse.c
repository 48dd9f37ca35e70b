/*
 * test_top_parse.c — the parsers of `trainprof top` (cli/top_parse.c) on known input: the
 * Prometheus text format (comments, labels with escaped quotes, backslashes and newlines,
 * +Inf/-Inf/NaN, histograms, timestamps) and hostile lines (unterminated values, too many
 * labels, over-long names, NUL bytes, junk), and HTTP responses (Content-Length, chunked,
 * truncated and malformed ones).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "top_parse.h"

static int line(const char *s, tp_prom_sample *out) {
    return tp_prom_parse_line(s, strlen(s), out);
}

static void test_basic(void **st) {
    (void)st;
    tp_prom_sample s;
    assert_int_equal(line("trainprof_steps_total 765", &s), 1);
    assert_string_equal(s.name, "trainprof_steps_total");
    assert_int_equal(s.nlabels, 0);
    assert_true(s.value == 765.0);
    assert_int_equal(line("# HELP x a comment { with \" junk", &s), 0);
    assert_int_equal(line("# TYPE x histogram", &s), 0);
    assert_int_equal(line("   ", &s), 0);
    assert_int_equal(line("# EOF", &s), 0);
    assert_int_equal(line("x 1.5e-3 1700000000000\r", &s), 1);
    assert_true(fabs(s.value - 1.5e-3) < 1e-15);
    assert_int_equal(s.has_timestamp, 1);
    assert_true(s.timestamp == 1700000000000LL);
    assert_int_equal(line("a:b_c 0", &s), 1);
    assert_string_equal(s.name, "a:b_c");
    assert_int_equal(line("x +Inf", &s), 1);
    assert_true(isinf(s.value) && s.value > 0);
    assert_int_equal(line("x -Inf", &s), 1);
    assert_true(isinf(s.value) && s.value < 0);
    assert_int_equal(line("x NaN", &s), 1);
    assert_true(isnan(s.value));
    assert_int_equal(line("x -0.25", &s), 1);
    assert_true(s.value == -0.25);
}

static void test_labels(void **st) {
    (void)st;
    tp_prom_sample s;
    assert_int_equal(line("m{rank=\"3\",local_rank=\"1\"} 2", &s), 1);
    assert_int_equal(s.nlabels, 2);
    assert_string_equal(tp_prom_get_label(&s, "rank"), "3");
    assert_string_equal(tp_prom_get_label(&s, "local_rank"), "1");
    assert_null(tp_prom_get_label(&s, "gpu"));
    /* escapes: \" \\ \n, a '}' and ',' inside a value, a trailing comma, blanks */
    assert_int_equal(line("m{ a = \"x\\\"y\" , b=\"c:\\\\d\\n}e,f\", } 7 ", &s), 1);
    assert_int_equal(s.nlabels, 2);
    assert_string_equal(tp_prom_get_label(&s, "a"), "x\"y");
    assert_string_equal(tp_prom_get_label(&s, "b"), "c:\\d\n}e,f");
    assert_true(s.value == 7.0);
    assert_int_equal(line("m{} 1", &s), 1);
    assert_int_equal(s.nlabels, 0);
    assert_int_equal(line("m{le=\"+Inf\"} 12", &s), 1);
    assert_string_equal(tp_prom_get_label(&s, "le"), "+Inf");
}

typedef struct agg {
    int n, buckets;
    double sum, count, inf_bucket;
} agg;

static void on_sample(const tp_prom_sample *s, void *arg) {
    agg *a = arg;
    a->n++;
    if (!strcmp(s->name, "h_bucket")) {
        a->buckets++;
        const char *le = tp_prom_get_label(s, "le");
        if (le && !strcmp(le, "+Inf")) a->inf_bucket = s->value;
    } else if (!strcmp(s->name, "h_sum")) {
        a->sum = s->value;
    } else if (!strcmp(s->name, "h_count")) {
        a->count = s->value;
    }
}

static void test_histogram(void **st) {
    (void)st;
    const char *text = "# HELP h step time\n"
                       "# TYPE h histogram\n"
                       "h_bucket{rank=\"0\",le=\"0.001\"} 3\n"
                       "h_bucket{rank=\"0\",le=\"0.01\"} 9\r\n"
                       "h_bucket{rank=\"0\",le=\"+Inf\"} 10\n"
                       "\n"
                       "h_sum{rank=\"0\"} 0.0345\n"
                       "h_count{rank=\"0\"} 10"; /* no final newline */
    agg a = {0};
    tp_prom_stats ps;
    tp_prom_parse(text, strlen(text), on_sample, &a, &ps);
    assert_int_equal(a.n, 5);
    assert_int_equal(a.buckets, 3);
    assert_true(a.inf_bucket == 10.0);
    assert_true(fabs(a.sum - 0.0345) < 1e-12);
    assert_true(a.count == 10.0);
    assert_int_equal(ps.samples, 5);
    assert_int_equal(ps.bad, 0);
    assert_int_equal(ps.lines, 7);
}

static void test_hostile(void **st) {
    (void)st;
    tp_prom_sample s;
    const char *bad[] = {
        "m{a=\"unterminated} 1",
        "m{a=\"x\\",
        "m{a=x} 1",
        "m{a=\"x\"",
        "m{a=\"x\" b=\"y\"} 1",
        "m{=\"x\"} 1",
        "m{1a=\"x\"} 1",
        "m",
        "m ",
        "m abc",
        "m 0x10",
        "m infinity",
        "m 1 2 3",
        "m 1 notatime",
        "9m 1",
        "{a=\"b\"} 1",
        "m{a=\"b\"}1x",
        "\x1b[2J 1",
        "m \x1b[2J",
        "m 1e",
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        int r = line(bad[k], &s);
        if (r != -1) fail_msg("accepted hostile line %zu: '%s' (%d)", k, bad[k], r);
    }
    /* a NUL inside a line */
    assert_int_equal(tp_prom_parse_line("m 1\0 2", 6, &s), -1);
    /* too many labels, an over-long name, an over-long label value, a huge value token */
    char big[8192];
    strcpy(big, "m{");
    for (int k = 0; k < TP_PROM_MAX_LABELS + 1; k++)
        sprintf(big + strlen(big), "l%d=\"v\",", k);
    strcat(big, "} 1");
    assert_int_equal(line(big, &s), -1);
    memset(big, 'a', 4000);
    strcpy(big + 4000, " 1");
    assert_int_equal(line(big, &s), -1);
    strcpy(big, "m{a=\"");
    memset(big + 5, 'v', 3000);
    strcpy(big + 3005, "\"} 1");
    assert_int_equal(line(big, &s), -1);
    strcpy(big, "m ");
    memset(big + 2, '1', 200);
    big[202] = 0;
    assert_int_equal(line(big, &s), -1);
    /* a whole hostile document: good lines survive, bad ones are counted */
    static const char doc[] =
        "good 1\n\xff\xfe\x00junk\nm{a=\"\n\"} 2\n{{{{\n} 3\ngood{x=\"\\\\\"} 4\n"
        "#\n# TYPE\n\n\n\r\n";
    size_t dl = sizeof doc - 1;
    agg a = {0};
    tp_prom_stats ps;
    tp_prom_parse(doc, dl, on_sample, &a, &ps);
    assert_int_equal(ps.samples, 2);
    assert_int_equal(ps.bad, 5);
    /* lengths that end mid-line, an empty buffer */
    for (size_t k = 0; k <= dl; k++) tp_prom_parse(doc, k, on_sample, &a, &ps);
    tp_prom_parse("", 0, on_sample, &a, &ps);
    assert_int_equal(ps.lines, 0);
}

static int http(const char *s, tp_http_resp *r, char *copy) {
    size_t n = strlen(s);
    memcpy(copy, s, n + 1);
    char err[128];
    return tp_http_parse(copy, n, r, err, sizeof err);
}

static void test_http(void **st) {
    (void)st;
    char buf[1024];
    tp_http_resp r;
    assert_int_equal(http("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello world", &r, buf), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 5);
    assert_memory_equal(r.body, "hello", 5);
    assert_int_equal(http("HTTP/1.0 404 Not Found\n\nnope", &r, buf), 0);
    assert_int_equal(r.status, 404);
    assert_int_equal(r.body_len, 4);
    assert_int_equal(http("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
                          "4\r\nm 1\n\r\na;ext=1\r\nn{a=\"b\"}  \r\n2\r\n2\n\r\n0\r\n\r\n",
                          &r, buf),
                     0);
    assert_int_equal(r.body_len, 16);
    assert_memory_equal(r.body, "m 1\nn{a=\"b\"}  2\n", 16);
    /* malformed */
    assert_int_equal(http("", &r, buf), -1);
    assert_int_equal(http("SSH-2.0-OpenSSH_9.2\r\n", &r, buf), -1);
    assert_int_equal(http("HTTP/1.1 2x0 OK\r\n\r\n", &r, buf), -1);
    assert_int_equal(http("HTTP/1.1 200 OK\r\nContent-Length: 50", &r, buf), -1);
    assert_int_equal(http("HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nshort", &r, buf), -1);
    assert_int_equal(http("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nx", &r, buf), -1);
    assert_int_equal(
        http("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\nx", &r, buf), -1);
    assert_int_equal(
        http("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nx", &r,
             buf),
        -1);
    assert_int_equal(
        http("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nshort", &r, buf), -1);
    assert_int_equal(http("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", &r, buf),
                     -1);
    assert_int_equal(
        http("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd", &r, buf), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),     cmocka_unit_test(test_labels),
        cmocka_unit_test(test_histogram), cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_http),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
