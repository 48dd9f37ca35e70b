/*
 * findings.c — the typed findings and their writer (findings.h).
 */
#define _GNU_SOURCE
#include "analysis/findings.h"

#include <stdlib.h>
#include <string.h>

tp_finding *tp_finding_add(tp_findings_result *fs, const char *id, const char *severity,
                           int rank, const char *msg, const char *rec) {
    tp_finding *a = realloc(fs->items, (fs->n + 1) * sizeof *a);
    if (!a) return NULL;
    fs->items = a;
    char *m = strdup(msg ? msg : "");
    if (!m) return NULL;
    tp_finding *f = &a[fs->n++];
    memset(f, 0, sizeof *f);
    f->id = id;
    f->severity = severity;
    f->has_rank = rank >= 0;
    f->rank = rank;
    f->message = m;
    f->recommendation = rec;
    return f;
}

/* A new figure of f's evidence, zeroed, or NULL. */
static tp_evidence *ev_add(tp_finding *f, const char *key, tp_evidence_kind kind) {
    if (!f) return NULL;
    tp_evidence *a = realloc(f->ev, (f->nev + 1) * sizeof *a);
    if (!a) return NULL;
    f->ev = a;
    tp_evidence *e = &a[f->nev++];
    memset(e, 0, sizeof *e);
    e->key = key;
    e->kind = kind;
    return e;
}

void tp_ev_number(tp_finding *f, const char *key, double v) {
    tp_evidence *e = ev_add(f, key, TP_EV_NUMBER);
    if (e) e->num = v;
}

void tp_ev_bool(tp_finding *f, const char *key, int v) {
    tp_evidence *e = ev_add(f, key, TP_EV_BOOL);
    if (e) e->num = v != 0;
}

void tp_ev_string(tp_finding *f, const char *key, const char *s) {
    tp_evidence *e = ev_add(f, key, TP_EV_STRING);
    if (e) e->str = s ? s : "";
}

void tp_ev_ints(tp_finding *f, const char *key, const int *v, size_t n) {
    tp_evidence *e = ev_add(f, key, TP_EV_INTS);
    if (!e || !n) return;
    e->ints = malloc(n * sizeof *e->ints);
    if (!e->ints) return;
    memcpy(e->ints, v, n * sizeof *v);
    e->n = n;
}

void tp_ev_strings(tp_finding *f, const char *key, const char *const *v, size_t n) {
    tp_evidence *e = ev_add(f, key, TP_EV_STRINGS);
    if (!e || !n) return;
    e->strs = malloc(n * sizeof *e->strs);
    if (!e->strs) return;
    memcpy(e->strs, v, n * sizeof *v);
    e->n = n;
}

void tp_ev_straggler(tp_finding *f, const char *key, const tp_straggler *s) {
    tp_evidence *e = ev_add(f, key, TP_EV_STRAGGLER);
    if (e) e->straggler = s;
}

void tp_near_add(tp_findings_result *fs, const char *id, const char *unit, int rank, double v,
                 double thr, double from) {
    tp_near *a = realloc(fs->near, (fs->nnear + 1) * sizeof *a);
    if (!a) return;
    fs->near = a;
    a[fs->nnear++] = (tp_near){id, unit, rank, v, thr, from};
}

cJSON *tp_straggler_json(const tp_straggler *e) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "rank", e->rank);
    cJSON_AddStringToObject(j, "host", e->host);
    cJSON_AddStringToObject(j, "by", e->by);
    if (e->has_lag) {
        cJSON_AddNumberToObject(j, "lag_ms", e->lag_ms);
        cJSON_AddNumberToObject(j, "lag_ms_per_step", e->lag_ms_per_step);
        cJSON_AddNumberToObject(j, "lag_excess_ms", e->lag_excess_ms);
    }
    if (e->has_step) {
        cJSON_AddNumberToObject(j, "step_ms", e->step_ms);
        cJSON_AddNumberToObject(j, "step_excess_ms", e->step_excess_ms);
    }
    if (e->gpu) {
        cJSON *gj = cJSON_AddObjectToObject(j, "gpu");
        cJSON_AddNumberToObject(gj, "index", e->gpu->index);
        if (e->gpu->name) cJSON_AddStringToObject(gj, "name", e->gpu->name);
        if (e->gpu->uuid) cJSON_AddStringToObject(gj, "uuid", e->gpu->uuid);
    } else if (e->has_cuda_device) {
        cJSON_AddNumberToObject(j, "cuda_device", e->cuda_device);
    }
    if (e->gpu_unknown)
        cJSON_AddStringToObject(j, "gpu_note", "the rank's GPU is not known (NVML shows every "
                                               "GPU of the host): no comparison");
    if (e->vs_present) {
        cJSON *dj = cJSON_AddObjectToObject(j, "vs_others");
        for (size_t q = 0; q < e->nvs; q++) {
            cJSON *v = cJSON_AddObjectToObject(dj, e->vs[q].key);
            cJSON_AddNumberToObject(v, "rank", e->vs[q].rank);
            cJSON_AddNumberToObject(v, "others_median", e->vs[q].others_median);
            cJSON_AddBoolToObject(v, "differs", e->vs[q].differs);
        }
        if (e->compared) cJSON_AddBoolToObject(j, "gpu_differs", e->gpu_differs);
    }
    return j;
}

static void evidence_json(cJSON *ev, const tp_evidence *e) {
    switch (e->kind) {
    case TP_EV_NUMBER: cJSON_AddNumberToObject(ev, e->key, e->num); break;
    case TP_EV_BOOL: cJSON_AddBoolToObject(ev, e->key, e->num != 0); break;
    case TP_EV_STRING: cJSON_AddStringToObject(ev, e->key, e->str); break;
    case TP_EV_INTS: {
        cJSON *a = cJSON_AddArrayToObject(ev, e->key);
        for (size_t i = 0; i < e->n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(e->ints[i]));
        break;
    }
    case TP_EV_STRINGS: {
        cJSON *a = cJSON_AddArrayToObject(ev, e->key);
        for (size_t i = 0; i < e->n; i++) cJSON_AddItemToArray(a, cJSON_CreateString(e->strs[i]));
        break;
    }
    case TP_EV_STRAGGLER: cJSON_AddItemToObject(ev, e->key, tp_straggler_json(e->straggler)); break;
    }
}

void tp_findings_json(cJSON *arr, const tp_findings_result *fs) {
    for (size_t i = 0; arr && i < fs->n; i++) {
        const tp_finding *f = &fs->items[i];
        cJSON *fd = cJSON_CreateObject();
        cJSON_AddStringToObject(fd, "id", f->id);
        cJSON_AddStringToObject(fd, "severity", f->severity);
        if (f->has_rank) cJSON_AddNumberToObject(fd, "rank", f->rank);
        cJSON_AddStringToObject(fd, "message", f->message);
        if (f->recommendation && !f->recommendation_last)
            cJSON_AddStringToObject(fd, "recommendation", f->recommendation);
        cJSON *ev = cJSON_AddObjectToObject(fd, "evidence");
        for (size_t k = 0; k < f->nev; k++) evidence_json(ev, &f->ev[k]);
        if (f->recommendation && f->recommendation_last)
            cJSON_AddStringToObject(fd, "recommendation", f->recommendation);
        if (f->megatron) cJSON_AddStringToObject(fd, "megatron", f->megatron);
        cJSON_AddItemToArray(arr, fd);
    }
}

cJSON *tp_near_json(const tp_findings_result *fs) {
    if (!fs->nnear) return NULL;
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < fs->nnear; i++) {
        const tp_near *n = &fs->near[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "id", n->id);
        cJSON_AddStringToObject(e, "unit", n->unit);
        cJSON_AddNumberToObject(e, "rank", n->rank);
        cJSON_AddNumberToObject(e, "value", n->value);
        cJSON_AddNumberToObject(e, "threshold", n->threshold);
        cJSON_AddNumberToObject(e, "finding_from", n->finding_from);
        cJSON_AddItemToArray(a, e);
    }
    return a;
}

void tp_findings_free(tp_findings_result *fs) {
    for (size_t i = 0; i < fs->n; i++) {
        tp_finding *f = &fs->items[i];
        for (size_t k = 0; k < f->nev; k++) {
            free(f->ev[k].ints);
            free(f->ev[k].strs);
        }
        free(f->ev);
        free(f->message);
        free(f->megatron);
    }
    free(fs->items);
    free(fs->near);
    memset(fs, 0, sizeof *fs);
}
