/*
 * fuzz_report_json.c — fuzz target: a report.json read back by `trainprof diff` (a run
 * given as its report.json, or a directory without rank files; tests/fuzz/README.md):
 * cJSON's parser, the schema check of cli/trainprof.c's read_json_file, then
 * tp_diff_build on report documents alone (no run: the report's means without a noise
 * estimate) and both renderings of the comparison.
 *
 * The input is one or two JSON documents separated by a NUL byte (a byte JSON text never
 * holds): run A and run B. With one document, it is compared with itself.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "analysis/diff.h"
#include "analysis/report.h"

/* read_json_file's test: an object whose "schema" is the string "trainprof.report" */
static cJSON *parse_report(const uint8_t *data, size_t len) {
    char *buf = malloc(len + 1);
    if (!buf) return NULL;
    memcpy(buf, data, len);
    buf[len] = 0;
    cJSON *j = cJSON_Parse(buf);
    free(buf);
    const char *schema = cJSON_GetStringValue(cJSON_GetObjectItem(j, "schema"));
    if (!j || !cJSON_IsObject(j) || !schema || strcmp(schema, "trainprof.report")) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static FILE *null;
    if (!null && !(null = fopen("/dev/null", "w"))) abort();
    const uint8_t *nul = memchr(data, 0, size);
    size_t first = nul ? (size_t)(nul - data) : size;
    cJSON *a = parse_report(data, first);
    cJSON *b = nul ? parse_report(nul + 1, size - first - 1) : NULL;
    if (a && (b || !nul)) {
        tp_report_opts o;
        tp_report_opts_init(&o);
        tp_diff_side sa = {"a", a, NULL, &o};
        tp_diff_side sb = {"b", b ? b : a, NULL, &o};
        cJSON *d = tp_diff_build(&sa, &sb, NULL);
        if (d) {
            tp_diff_write_text(d, null);
            tp_report_write_json(d, null);
        }
        cJSON_Delete(d);
    }
    cJSON_Delete(a);
    cJSON_Delete(b);
    return 0;
}
