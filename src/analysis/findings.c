/*
 * findings.c — the typed findings, their writer, and the report's headline built from them
 * (findings.h).
 */
#define _GNU_SOURCE
#include "analysis/findings.h"
#include "analysis/alloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/text.h"

tp_finding *tp_finding_add(tp_findings_result *fs, const char *id, const char *severity,
                           int rank, const char *msg, const char *rec) {
    tp_finding *a = tp_realloc(fs->items, (fs->n + 1) * sizeof *a);
    if (!a) return NULL;
    fs->items = a;
    char *m = tp_strdup(msg ? msg : "");
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
    tp_evidence *a = tp_realloc(f->ev, (f->nev + 1) * sizeof *a);
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
    e->ints = tp_malloc(n * sizeof *e->ints);
    if (!e->ints) return;
    memcpy(e->ints, v, n * sizeof *v);
    e->n = n;
}

void tp_ev_strings(tp_finding *f, const char *key, const char *const *v, size_t n) {
    tp_evidence *e = ev_add(f, key, TP_EV_STRINGS);
    if (!e || !n) return;
    e->strs = tp_malloc(n * sizeof *e->strs);
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
    tp_near *a = tp_realloc(fs->near, (fs->nnear + 1) * sizeof *a);
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
        for (size_t i = 0; i < e->n; i++) tp_json_item_to_array(a, cJSON_CreateNumber(e->ints[i]));
        break;
    }
    case TP_EV_STRINGS: {
        cJSON *a = cJSON_AddArrayToObject(ev, e->key);
        for (size_t i = 0; i < e->n; i++) tp_json_item_to_array(a, cJSON_CreateString(e->strs[i]));
        break;
    }
    case TP_EV_STRAGGLER:
        tp_json_item_to_object(ev, e->key, tp_straggler_json(e->straggler));
        break;
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
        tp_json_item_to_array(arr, fd);
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
        tp_json_item_to_array(a, e);
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

/* ------------------------------------------------------------------ headline */

static int ev_num(const tp_finding *f, const char *key, double *v) {
    for (size_t k = 0; k < f->nev; k++)
        if (f->ev[k].kind == TP_EV_NUMBER && !strcmp(f->ev[k].key, key)) {
            *v = f->ev[k].num;
            return 1;
        }
    return 0;
}

double tp_finding_step_share(const tp_finding *f) {
    double v = 0, w = 0;
    if (!strcmp(f->id, "data_loading")) {
        ev_num(f, "data_share", &v);
        ev_num(f, "start_idle_data_share", &w);
        return v > w ? v : w;
    }
    if (!strcmp(f->id, "exposed_communication")) return ev_num(f, "exposed_share", &v) ? v : 0;
    if (!strcmp(f->id, "launch_bound"))
        return ev_num(f, "idle_other_short_gaps_share", &v) ? v : 0;
    if (!strcmp(f->id, "host_sync")) return ev_num(f, "idle_host_sync_share", &v) ? v : 0;
    /* GPU idle that no specific rule explains: the data-loading and host-sync parts of the
     * idle time have rules of their own, which lead when they fire */
    if (!strcmp(f->id, "gpu_busy")) return ev_num(f, "idle_other_share", &v) ? v : 0;
    if (!strcmp(f->id, "straggler")) {
        for (size_t k = 0; k < f->nev; k++) {
            const tp_straggler *s = f->ev[k].kind == TP_EV_STRAGGLER ? f->ev[k].straggler : NULL;
            if (!s || !ev_num(f, "median_step_ms", &w) || w <= 0) continue;
            double lag = s->has_lag ? s->lag_excess_ms : 0;
            double step = s->has_step ? s->step_excess_ms : 0;
            return (lag > step ? lag : step) / w;
        }
    }
    return 0;
}

/* What the rule names, in words, for the headline. */
static const char *finding_title(const char *id) {
    static const struct { const char *id, *title; } t[] = {
        {"data_loading", "data loading"},
        {"exposed_communication", "exposed communication"},
        {"launch_bound", "kernel launch overhead"},
        {"host_sync", "host synchronisation"},
        {"memory_peak", "GPU memory"},
        {"out_of_memory", "CUDA out of memory"},
        {"memory_fragmentation", "GPU memory fragmentation"},
        {"memory_leak", "a GPU memory leak"},
        {"memory_alloc_retries", "allocator retries"},
        {"straggler", "a straggler rank"},
        {"throttling", "GPU throttling"},
        {"gpu_busy", "GPU idle"},
        {"ended_early", "ranks ended early"},
        {"helper_crashed", "a helper process crashed"}};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        if (!strcmp(t[i].id, id)) return t[i].title;
    return id;
}

static int sev_rank(const char *sev) {
    return !strcmp(sev, "critical") ? 2 : !strcmp(sev, "warning");
}

/* The order findings lead in: an out-of-memory post-mortem first (the job died of it:
 * every other figure describes a run cut short), then by severity. */
static int lead_rank(const tp_finding *f) {
    return !strcmp(f->id, "out_of_memory") ? 3 : sev_rank(f->severity);
}

/* The value of string evidence `key` of f, or NULL. */
static const char *ev_str(const tp_finding *f, const char *key) {
    for (size_t i = 0; i < f->nev; i++)
        if (f->ev[i].kind == TP_EV_STRING && !strcmp(f->ev[i].key, key)) return f->ev[i].str;
    return NULL;
}

/* Appends a formatted line (cut to the line's size, between characters: text.h). */
static void hl_line(tp_headline *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void hl_line(tp_headline *h, const char *fmt, ...) {
    if (h->nlines >= TP_HEADLINE_LINES) return;
    char raw[4 * TP_HEADLINE_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    tp_text_fit(h->lines[h->nlines++], TP_HEADLINE_LINE_MAX, raw, -1);
}

/* The run's figures: mean step, least GPU busy, most exposed communication, most data loading. */
static void hl_figures(tp_headline *h, const tp_run_results *res) {
    double steps = 0;
    size_t nsteps = 0;
    for (size_t i = 0; i < res->nranks; i++) {
        const tp_rank_result *r = &res->ranks[i];
        if (r->steps.measured > 0) {
            steps += r->steps.mean_ms;
            nsteps++;
        }
        const tp_breakdown_result *b = &r->breakdown;
        if (b->present && b->gpu_basis && b->has_parts &&
            (!h->has_busy || b->busy_share < h->busy_share)) {
            h->has_busy = 1;
            h->busy_share = b->busy_share;
            h->busy_rank = r->rank;
            h->busy_steps = r->capture.limited ? r->capture.steps : NULL;
            h->busy_of = b->per_step         ? "the step"
                         : !b->has_uncaptured ? "the run"
                         : b->bounded        ? "the span whose GPU records were held"
                                             : "the time GPU activity was recorded";
        }
        if (b->present && b->gpu_basis && b->not_captured && !h->has_not_captured) {
            h->has_not_captured = 1;
            h->not_captured_rank = r->rank;
            h->not_captured_run = !b->per_step;
            h->not_captured_bound = (r->capture.limited_by & TP_CAP_BOUND) != 0;
        }
        const tp_comm_exposure_result *x = &r->comm.exposure;
        if (x->present && !x->has_figures && x->note && !strcmp(x->note, TP_EXPOSURE_NO_MEMORY) &&
            !h->has_unjudged) {
            h->has_unjudged = 1;
            h->unjudged_rank = r->rank;
        }
        if (r->data.found && (!h->has_data || r->data.share > h->data_share)) {
            h->has_data = 1;
            h->data_share = r->data.share;
            h->data_rank = r->rank;
        }
    }
    h->unjudged_stragglers = res->clocks.no_memory;
    for (size_t i = 0; i < res->nranks && !h->has_short_section; i++)
        if (res->ranks[i].no_memory) {
            h->has_short_section = 1;
            h->short_section_rank = res->ranks[i].rank;
        }
    h->short_run = res->no_memory;
    if (nsteps) {
        h->has_step = 1;
        h->step_ms = steps / (double)nsteps;
    }
    if (res->comm.present && res->comm.has_summary) {
        h->has_exposed = 1;
        h->exposed_share = res->comm.worst_exposed_share;
        h->exposed_rank = res->comm.worst_rank;
    }
}

/* The line of a report some part of which ran out of memory (alloc.h): with a finding or
 * without, the reader must know that one may be missing. */
static void hl_short(tp_headline *h) {
    if (!h->has_short_section && !h->short_run) return;
    char what[64] = "";
    if (h->has_short_section)
        snprintf(what, sizeof what, "rank %d's section (maybe others')%s", h->short_section_rank,
                 h->short_run ? " and " : "");
    hl_line(h, "incomplete: memory ran out while the report computed %s%s: a figure or finding "
               "may be missing or made of part of the records (see the notes)",
            what, h->short_run ? "the run-level analyses" : "");
}

void tp_headline_build(tp_run_results *res) {
    tp_headline *h = &res->headline;
    memset(h, 0, sizeof *h);
    hl_figures(h, res);
    const tp_findings_result *fs = &res->findings;
    size_t best = 0;
    double best_share = 0;
    /* the idle time a launch-bound finding names is part of gpu_busy's "other" idle, and the
     * ranks waiting at collectives for a named straggler show it as exposed communication:
     * there the specific finding is the cause, the other its symptom */
    double launch = 0;
    int straggler = 0;
    for (size_t i = 0; i < fs->n; i++) {
        if (!strcmp(fs->items[i].id, "launch_bound")) launch = tp_finding_step_share(&fs->items[i]);
        straggler |= !strcmp(fs->items[i].id, "straggler");
    }
    for (size_t i = 0; i < fs->n; i++) {
        double s = tp_finding_step_share(&fs->items[i]);
        if (!strcmp(fs->items[i].id, "gpu_busy")) s = s > launch ? s - launch : 0;
        if (straggler && !strcmp(fs->items[i].id, "exposed_communication")) s = 0;
        int sev = lead_rank(&fs->items[i]);
        int best_sev = h->has_finding ? lead_rank(&fs->items[best]) : -1;
        if (sev > best_sev || (sev == best_sev && s > best_share)) {
            h->has_finding = 1;
            best = i;
            best_share = s;
        }
    }
    if (h->has_finding) {
        const tp_finding *f = &fs->items[best];
        h->finding = best;
        h->step_share = best_share;
        const char *snap = !strcmp(f->id, "out_of_memory") ? ev_str(f, "snapshot") : NULL;
        hl_line(h, "%s: %s (%s, %s): %s", snap || !strcmp(f->id, "out_of_memory")
                                              ? "the job ran out of memory" : "bottleneck",
                finding_title(f->id), f->severity, f->id, f->message);
        if (snap) {
            hl_line(h, "open the memory snapshot: python -m torch.cuda._memory_viz trace_plot "
                       "%s -o out.html (the file is beside the rank file; or "
                       "https://pytorch.org/memory_viz)", snap);
        } else if (f->recommendation) {
            /* the first thing to try: the recommendation up to its first ';' */
            const char *semi = strchr(f->recommendation, ';');
            int len = semi ? (int)(semi - f->recommendation) : (int)strlen(f->recommendation);
            hl_line(h, "first try: %.*s", len, f->recommendation);
        }
        if (fs->n > 1) {
            char ids[TP_HEADLINE_LINE_MAX] = "";
            size_t l = 0;
            for (size_t i = 0; i < fs->n && l < sizeof ids; i++)
                if (i != best)
                    l += (size_t)snprintf(ids + l, sizeof ids - l, "%s%s (%s)", l ? ", " : "",
                                          fs->items[i].id, fs->items[i].severity);
            hl_line(h, "also: %zu more finding%s below: %s", fs->n - 1, fs->n == 2 ? "" : "s", ids);
        }
        hl_short(h);
        return;
    }
    char fig[TP_HEADLINE_LINE_MAX] = "";
    size_t l = 0;
    if (h->has_step)
        l += (size_t)snprintf(fig + l, sizeof fig - l, "step %.2f ms", h->step_ms);
    if (h->has_busy && l < sizeof fig)
        l += (size_t)snprintf(fig + l, sizeof fig - l, "%sGPU busy %.1f %% of %s (rank %d, "
                              "the least%s%s)", l ? ", " : "", 100 * h->busy_share, h->busy_of,
                              h->busy_rank,
                              h->busy_steps ? "; GPU activity recorded in steps " : "",
                              h->busy_steps ? h->busy_steps : "");
    if (h->has_exposed && l < sizeof fig)
        l += (size_t)snprintf(fig + l, sizeof fig - l, "%sexposed communication %.1f %% (rank %d, "
                              "the most)", l ? ", " : "", 100 * h->exposed_share, h->exposed_rank);
    if (h->has_not_captured && l < sizeof fig)
        l += (size_t)snprintf(fig + l, sizeof fig - l, "%s%s (rank %d)", l ? ", " : "",
                              h->not_captured_run ? "GPU activity recorded at no time of the run"
                              : h->not_captured_bound
                                  ? "no measured step's GPU records held whole (--gpu-records)"
                                  : "GPU activity not captured in any measured step",
                              h->not_captured_rank);
    if (h->has_data && l < sizeof fig)
        l += (size_t)snprintf(fig + l, sizeof fig - l, "%sdata loading %.1f %% (rank %d, the most)",
                              l ? ", " : "", 100 * h->data_share, h->data_rank);
    if (l) hl_line(h, "no bottleneck found: %s", fig);
    else hl_line(h, "no bottleneck found: no measured steps to judge (the rules need steps)");
    if (h->has_unjudged || h->unjudged_stragglers) {
        char what[96] = "";
        if (h->has_unjudged)
            snprintf(what, sizeof what, "exposed communication of rank %d and maybe others%s",
                     h->unjudged_rank, h->unjudged_stragglers ? ", " : "");
        int both = h->has_unjudged && h->unjudged_stragglers;
        hl_line(h, "not judged: %s%s (memory ran out while the report computed %s)", what,
                h->unjudged_stragglers ? "stragglers" : "", both ? "them" : "it");
    }
    hl_short(h);
    if (fs->nnear)
        hl_line(h, "near a threshold: %zu value%s past a threshold but inside its band, listed "
                   "below (not findings)", fs->nnear, fs->nnear == 1 ? "" : "s");
}

cJSON *tp_headline_json(const tp_run_results *res) {
    const tp_headline *h = &res->headline;
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    cJSON *lines = cJSON_AddArrayToObject(j, "lines");
    for (size_t i = 0; i < h->nlines; i++)
        tp_json_item_to_array(lines, cJSON_CreateString(h->lines[i]));
    if (h->has_finding) {
        const tp_finding *f = &res->findings.items[h->finding];
        cJSON_AddStringToObject(j, "finding", f->id);
        cJSON_AddStringToObject(j, "severity", f->severity);
        if (f->has_rank) cJSON_AddNumberToObject(j, "rank", f->rank);
        cJSON_AddNumberToObject(j, "step_share", h->step_share);
    } else {
        cJSON_AddNullToObject(j, "finding");
    }
    cJSON *fig = cJSON_AddObjectToObject(j, "figures");
    if (h->has_step) cJSON_AddNumberToObject(fig, "step_ms", h->step_ms);
    if (h->has_busy) {
        cJSON_AddNumberToObject(fig, "gpu_busy_share", h->busy_share);
        cJSON_AddNumberToObject(fig, "gpu_busy_rank", h->busy_rank);
        if (h->busy_steps) cJSON_AddStringToObject(fig, "gpu_busy_steps", h->busy_steps);
    }
    if (h->has_exposed) {
        cJSON_AddNumberToObject(fig, "exposed_comm_share", h->exposed_share);
        cJSON_AddNumberToObject(fig, "exposed_comm_rank", h->exposed_rank);
    }
    if (h->has_data) {
        cJSON_AddNumberToObject(fig, "data_share", h->data_share);
        cJSON_AddNumberToObject(fig, "data_rank", h->data_rank);
    }
    cJSON_AddNumberToObject(j, "near", (double)res->findings.nnear);
    return j;
}
