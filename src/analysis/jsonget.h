/*
 * jsonget.h — reading the report's cJSON tree: a missing key or a value of another type
 * reads as absent (NULL object, 0, ""), so the renderers (text, HTML, diff) never branch on
 * a missing section. cJSON_GetObjectItemCaseSensitive accepts a NULL object.
 */
#ifndef TPROF_JSONGET_H
#define TPROF_JSONGET_H

#include <cjson/cJSON.h>

static inline const cJSON *tp_jobj(const cJSON *o, const char *k) {
    return cJSON_GetObjectItemCaseSensitive(o, k);
}
static inline int tp_jhas(const cJSON *o, const char *k) { return cJSON_IsNumber(tp_jobj(o, k)); }
static inline double tp_jnum(const cJSON *o, const char *k) {
    const cJSON *v = tp_jobj(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}
static inline const char *tp_jstr(const cJSON *o, const char *k) {
    const cJSON *v = tp_jobj(o, k);
    return cJSON_IsString(v) && v->valuestring ? v->valuestring : "";
}

#endif /* TPROF_JSONGET_H */
