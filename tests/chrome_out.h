/*
 * chrome_out.h — test helper: a run exported as a Chrome trace into memory and parsed with
 * cJSON (the events array), and the readers the Chrome export tests share: the event's
 * string and number fields, its args, and counts by phase and name. Header-only, as spawn.h:
 * include it after <cmocka.h>, <cjson/cJSON.h>, "analysis/model.h" and "export/chrome.h".
 */
#ifndef TPROF_TEST_CHROME_OUT_H
#define TPROF_TEST_CHROME_OUT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CO_UNUSED __attribute__((unused))

typedef struct chrome_out {
    char *text;
    size_t len;
    cJSON *root;
    cJSON *events;
} chrome_out;

static CO_UNUSED chrome_out export_run(const tp_run *run, int rank, const tp_export_opts *opts) {
    chrome_out o = {0};
    FILE *f = open_memstream(&o.text, &o.len);
    assert_non_null(f);
    int rc = rank < 0 ? tp_export_chrome(run, f, opts) : tp_export_chrome_rank(run, rank, f, opts);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rc, TPROF_OK);
    o.root = cJSON_Parse(o.text);
    if (!o.root) fprintf(stderr, "unparsable JSON near: %.80s\n", cJSON_GetErrorPtr());
    assert_non_null(o.root);
    o.events = cJSON_GetObjectItemCaseSensitive(o.root, "traceEvents");
    assert_true(cJSON_IsArray(o.events));
    return o;
}

static CO_UNUSED void out_free(chrome_out *o) {
    cJSON_Delete(o->root);
    free(o->text);
}

static CO_UNUSED void load(const char *dir, tp_run *run) {
    char err[256] = "";
    int rc = tp_run_load(dir, run, err, sizeof err);
    if (rc) fprintf(stderr, "load: %s\n", err);
    assert_int_equal(rc, TPROF_OK);
}

static CO_UNUSED const char *str(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static CO_UNUSED double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static CO_UNUSED const cJSON *arg(const cJSON *ev, const char *key) {
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ev, "args"), key);
}

static CO_UNUSED int is(const cJSON *ev, const char *ph, const char *name) {
    const char *p = str(ev, "ph"), *n = str(ev, "name");
    return p && !strcmp(p, ph) && (!name || (n && !strcmp(n, name)));
}

static CO_UNUSED size_t count(const chrome_out *o, const char *ph, const char *name) {
    size_t n = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, o->events) n += is(ev, ph, name);
    return n;
}

#endif /* TPROF_TEST_CHROME_OUT_H */
