/*
 * metrics_check.c — what the live-metrics tests share (metrics_check.h): their scratch
 * directory, a sample's value, and the check of a scrape against the text format (the
 * test's own, and promtool's when it is installed).
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
#include <unistd.h>

#include "metrics_check.h"

char g_dir[512];

void fresh_dir(const char *tag) {
    const char *base = getenv("TPROF_TEST_TMP");
    snprintf(g_dir, sizeof g_dir, "%s/metrics-%s-XXXXXX", base && *base ? base : "/tmp", tag);
    assert_non_null(mkdtemp(g_dir));
}

/* The value of the sample line starting with `prefix` (name{labels} up to the space) */
double sample(const char *text, const char *prefix) {
    const char *p = text;
    size_t pl = strlen(prefix);
    while ((p = strstr(p, prefix))) {
        if ((p == text || p[-1] == '\n')) {
            const char *sp = strchr(p + pl, ' ');
            const char *nl = strchr(p + pl, '\n');
            if (sp && (!nl || sp < nl)) return strtod(sp + 1, NULL);
        }
        p += pl;
    }
    return NAN;
}

/* -------------------------------------------- the text format, checked by the test */

/* Length of the well-formed UTF-8 sequence at p (Unicode 3.9, table 3-7), or 0. Written
 * apart from the registry's own decoder so that the check does not share its mistakes. */
static size_t utf8_ok(const unsigned char *p) {
    static const struct { unsigned char lo, hi, lo2, hi2; int len; } t[] = {
        {0xC2, 0xDF, 0x80, 0xBF, 2}, {0xE0, 0xE0, 0xA0, 0xBF, 3}, {0xE1, 0xEC, 0x80, 0xBF, 3},
        {0xED, 0xED, 0x80, 0x9F, 3}, {0xEE, 0xEF, 0x80, 0xBF, 3}, {0xF0, 0xF0, 0x90, 0xBF, 4},
        {0xF1, 0xF3, 0x80, 0xBF, 4}, {0xF4, 0xF4, 0x80, 0x8F, 4}};
    if (p[0] && p[0] < 0x80) return 1;
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        if (p[0] < t[i].lo || p[0] > t[i].hi) continue;
        if (p[1] < t[i].lo2 || p[1] > t[i].hi2) return 0;
        for (int k = 2; k < t[i].len; k++)
            if (p[k] < 0x80 || p[k] > 0xBF) return 0;
        return (size_t)t[i].len;
    }
    return 0;
}

static int name_char(char c, int first, int colon) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (colon && c == ':') || (!first && c >= '0' && c <= '9');
}

/* Checks `text` against the Prometheus text format 0.0.4 (and OpenMetrics' `# EOF`): valid
 * UTF-8 throughout; every line a `# HELP`/`# TYPE` comment or a sample `name{k="v",...}
 * value`, label values with only the escapes \\, \" and \n. Returns NULL, or a message
 * naming the first bad line (static buffer). This check runs whether promtool is there or
 * not. */
const char *exposition_error(const char *text) {
    static char why[300];
    const unsigned char *u = (const unsigned char *)text;
    for (size_t i = 0; u[i];) {
        size_t l = utf8_ok(u + i);
        if (!l) {
            snprintf(why, sizeof why, "byte %zu (0x%02x) is not UTF-8", i, u[i]);
            return why;
        }
        i += l;
    }
    int line = 0;
    for (const char *p = text; *p;) {
        line++;
        const char *nl = strchr(p, '\n');
        if (!nl) {
            snprintf(why, sizeof why, "line %d has no line feed", line);
            return why;
        }
        const char *q = p;
#define BAD(what)                                                                        \
    do {                                                                                 \
        snprintf(why, sizeof why, "line %d, column %d: %s: %.*s", line, (int)(q - p) + 1, \
                 what, (int)(nl - p > 120 ? 120 : nl - p), p);                           \
        return why;                                                                      \
    } while (0)
        if (*q == '#') {
            if (!strncmp(q, "# EOF\n", 6) && !nl[1]) break;
            if (strncmp(q, "# HELP ", 7) && strncmp(q, "# TYPE ", 7)) BAD("unknown comment");
            q += 7;
            if (!name_char(*q, 1, 1)) BAD("metric name");
            while (name_char(*q, 0, 1)) q++;
            if (q != nl && *q != ' ') BAD("after the metric name");
            p = nl + 1;
            continue;
        }
        if (!name_char(*q, 1, 1)) BAD("metric name");
        while (name_char(*q, 0, 1)) q++;
        if (*q == '{') {
            q++;
            while (*q != '}') {
                if (!name_char(*q, 1, 0)) BAD("label name");
                while (name_char(*q, 0, 0)) q++;
                if (q[0] != '=' || q[1] != '"') BAD("label without =\"");
                q += 2;
                while (*q != '"') {
                    if (q >= nl) BAD("label value runs past the line");
                    if (*q == '\\') {
                        if (q[1] != '\\' && q[1] != '"' && q[1] != 'n') BAD("unknown escape");
                        q++;
                    }
                    q++;
                }
                q++;
                if (*q == ',') q++;
                else if (*q != '}') BAD("after a label value");
            }
            q++;
        }
        if (*q != ' ') BAD("no space before the value");
        q++;
        char *end;
        if (!strncmp(q, "+Inf", 4) || !strncmp(q, "-Inf", 4)) end = (char *)q + 4;
        else if (!strncmp(q, "NaN", 3)) end = (char *)q + 3;
        else {
            strtod(q, &end);
            if (end == q) BAD("value");
        }
        if (end != nl && *end != ' ') BAD("after the value");
        p = nl + 1;
#undef BAD
    }
    return NULL;
}

void promtool_check(const char *text) {
    const char *bad = exposition_error(text);
    if (bad) fprintf(stderr, "scrape not in the text format: %s\n", bad);
    CHECK(bad == NULL);
    if (system("command -v promtool >/dev/null 2>&1") != 0) {
        fprintf(stderr, "promtool not installed: `promtool check metrics` skipped\n");
        return;
    }
    char path[600];
    snprintf(path, sizeof path, "%s/scrape.txt", g_dir);
    FILE *f = fopen(path, "w");
    CHECK(f);
    fputs(text, f);
    fclose(f);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "promtool check metrics < '%s' >'%s.out' 2>&1", path, path);
    int rc = system(cmd);
    if (rc != 0) {
        snprintf(cmd, sizeof cmd, "cat '%s.out' >&2", path);
        if (system(cmd)) {}
    }
    CHECK(rc == 0);
}
