/*
 * json_path.h — test helper: a member of a report document by its path, "a.0.b" (an object
 * member by name, an array element by index), read where a test checks the document itself.
 * Include after <cmocka.h> and <cjson/cJSON.h>.
 *
 *   jget(j, path)   the value, NULL when absent
 *   jnum(j, path)   its number; jstr(j, path) its string (the test fails on another type)
 *   jnear(got, want, what)   got equals want to 1e-9 (relative above 1), else the test fails
 *   jfinding(rep, id)        the report's finding of that id, NULL when it did not fire
 */
#ifndef TPROF_TEST_JSON_PATH_H
#define TPROF_TEST_JSON_PATH_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static __attribute__((unused)) const cJSON *jget(const cJSON *j, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *tok = strtok_r(buf, ".", &save); tok && j;
         tok = strtok_r(NULL, ".", &save)) {
        if (cJSON_IsArray(j)) j = cJSON_GetArrayItem(j, atoi(tok));
        else j = cJSON_GetObjectItemCaseSensitive(j, tok);
    }
    return j;
}

static __attribute__((unused)) double jnum(const cJSON *j, const char *path) {
    const cJSON *v = jget(j, path);
    if (!cJSON_IsNumber(v)) fail_msg("%s is not a number", path);
    return v->valuedouble;
}

static __attribute__((unused)) const char *jstr(const cJSON *j, const char *path) {
    const cJSON *v = jget(j, path);
    if (!cJSON_IsString(v)) fail_msg("%s is not a string", path);
    return v->valuestring;
}

static __attribute__((unused)) void jnear(double got, double want, const char *what) {
    if (fabs(got - want) > 1e-9 * (fabs(want) > 1 ? fabs(want) : 1))
        fail_msg("%s: %.12g, want %.12g", what, got, want);
}

static __attribute__((unused)) const cJSON *jfinding(const cJSON *rep, const char *id) {
    const cJSON *f;
    cJSON_ArrayForEach(f, jget(rep, "findings")) {
        const cJSON *x = jget(f, "id");
        if (cJSON_IsString(x) && !strcmp(x->valuestring, id)) return f;
    }
    return NULL;
}

#endif
