/*
 * diff.c — compares two runs (diff.h): step time, kernel time by class, the top kernels
 * (matched by name), communication (matched by op and communicator size: communicator ids
 * differ between runs) and energy per step, and says which differences are beyond noise.
 *
 * Noise is the step-to-step spread of each run. Every figure is taken per measured step
 * (and per rank: a rank's steps are samples of the same quantity, so ranks are pooled for
 * the figures that are not per rank), and a difference of means is significant when it
 * exceeds noise_k (3) standard errors of the difference, sqrt(sdA²/nA + sdB²/nB), *and*
 * min_rel (1 %) of the baseline: three standard errors keep a comparison of some fifty
 * figures from crying wolf on noise (about 0.3 % false alarms each for normal noise, where
 * two would give 5 %), and the relative floor keeps long runs, whose standard errors are
 * tiny, from flagging changes nobody would act on. Step time series are autocorrelated
 * (thermal drift, a slow phase), which makes the standard error an underestimate; the
 * relative floor also absorbs some of that.
 *
 * Per-step values come from the loaded runs: kernels count for the step in which they
 * start, communication ops for the step in which they were issued (host start), energy is
 * the NVML energy counter interpolated at each step's start and end (as report.c does).
 * When only a report.json is available, the report's means are compared without a noise
 * estimate, and unknown_rel (5 %) is the rule.
 */
#define _GNU_SOURCE
#include "analysis/diff.h"
#include "analysis/alloc.h"
#include "analysis/capture.h"
#include "analysis/jsonget.h"
#include "analysis/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/comm.h"
#include "analysis/counter_pack.h"
#include "analysis/gpu.h"
#include "analysis/steps.h"
#include "analysis/text.h"
#include "format/format.h"
#include "trainprof.h"

void tp_diff_opts_init(tp_diff_opts *o) {
    o->noise_k = 3;
    o->min_rel = 0.01;
    o->unknown_rel = 0.05;
    o->top_n = 30;
}


/* ------------------------------------------------------------------ metrics */

enum { SEC_STEP, SEC_PARTS, SEC_PHASE, SEC_CLASS, SEC_KERNEL, SEC_COMM, SEC_ENERGY, SEC_MEMORY, SEC_N };
static const char *const sec_name[SEC_N] = {"step_time", "step_parts", "phases", "gpu_classes",
                                            "kernels", "communication", "energy", "memory"};
static const char *const sec_title[SEC_N] = {"step time (ms)",
                                             "parts of the step (ms per step, from the reports)",
                                             "phases of the step (ms per step, from the reports)",
                                             "GPU kernel time by class (ms per step)",
                                             "top kernels (ms per step)",
                                             "communication (ms per step, by op and communicator size)",
                                             "energy (J per step)",
                                             "GPU memory peak (GiB per device, from the reports)"};
static const char *const sec_unit[SEC_N] = {"ms", "ms", "ms", "ms", "ms", "ms", "J", "GiB"};

/* The parts of the step a diff explains the change of the step time with: the data-loading
 * ranges (the CPU's time in them, either basis) and the GPU breakdown's parts (docs/design.md
 * §5.2: compute, exposed communication, copies, and the idle time by what the CPU was doing).
 * Key in the document, key of the row (the words of the explanation). */
static const struct { const char *doc, *key; } bd_parts[] = {
    {"compute", "compute"},
    {"exposed_comm", "exposed communication"},
    {"memcpy_memset", "memory copies (memcpy/memset)"},
    {"idle_data", "GPU idle under data loading"},
    {"idle_host_sync", "GPU idle under host sync"},
    {"idle_other", "GPU idle, other"}};
#define DATA_KEY "data loading"

/* One side of a figure: per-step samples (model), or the sum of report values over the
 * ranks that have it (report.json only). */
typedef struct mside {
    double *v;
    size_t n, cap;
    double json_sum;
    int json_n;
    double count, bytes; /* communication: totals over the samples */
    double p50, p90;     /* step time from the report (report.json only) */
} mside;

typedef struct metric {
    int sec;
    char *key;
    mside s[2];
} metric;

typedef struct mtab {
    metric *m;
    size_t n, cap;
    int oom;
    unsigned invalid[2]; /* figures of a report.json left out (see push_json), per side */
} mtab;

static metric *mt_get(mtab *t, int sec, const char *key) {
    for (size_t i = 0; i < t->n; i++)
        if (t->m[i].sec == sec && !strcmp(t->m[i].key, key)) return &t->m[i];
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        metric *nm = tp_realloc(t->m, cap * sizeof *nm);
        if (!nm) { t->oom = 1; return NULL; }
        t->m = nm;
        t->cap = cap;
    }
    metric *m = &t->m[t->n];
    memset(m, 0, sizeof *m);
    m->sec = sec;
    if (!(m->key = tp_strdup(key))) { t->oom = 1; return NULL; }
    t->n++;
    return m;
}

static void ms_push(mtab *t, mside *s, const double *v, size_t n) {
    if (s->n + n > s->cap) {
        size_t cap = s->cap ? s->cap : 64;
        while (cap < s->n + n) cap *= 2;
        double *nv = tp_realloc(s->v, cap * sizeof *nv);
        if (!nv) { t->oom = 1; return; }
        s->v = nv;
        s->cap = cap;
    }
    memcpy(s->v + s->n, v, n * sizeof *v);
    s->n += n;
}

static void push(mtab *t, int side, int sec, const char *key, const double *v, size_t n) {
    metric *m = mt_get(t, sec, key);
    if (m) ms_push(t, &m->s[side], v, n);
}

/* Every figure a diff reads from a report.json is a time, an energy or a count: one that is
 * negative, not finite or beyond any run (1e12: 30 years in ms) was edited or damaged, and
 * is left out and counted (the diff names the count), never compared. */
#define TP_DIFF_FIGURE_MAX 1e12

static void push_json(mtab *t, int side, int sec, const char *key, double v) {
    if (!isfinite(v) || v < 0 || v > TP_DIFF_FIGURE_MAX) {
        t->invalid[side]++;
        return;
    }
    metric *m = mt_get(t, sec, key);
    if (!m) return;
    m->s[side].json_sum += v;
    m->s[side].json_n++;
}

/* ------------------------------------------------------------------ key sets */

typedef struct keyset {
    char **k;
    size_t n, cap;
} keyset;

static int ks_find(const keyset *s, const char *k) {
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->k[i], k)) return (int)i;
    return -1;
}

static void ks_add(keyset *s, const char *k) {
    if (ks_find(s, k) >= 0) return;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 32;
        char **nk = tp_realloc(s->k, cap * sizeof *nk);
        if (!nk) return;
        s->k = nk;
        s->cap = cap;
    }
    if ((s->k[s->n] = tp_strdup(k))) s->n++;
}

static void ks_free(keyset *s) {
    for (size_t i = 0; i < s->n; i++) free(s->k[i]);
    free(s->k);
}

static void comm_key(char *buf, size_t n, const char *op, double size) {
    snprintf(buf, n, "%s on %.0f rank%s", op, size, size == 1 ? "" : "s");
}

/* The kernels both reports list (top_kernels of every rank, in order, up to top_n) and the
 * communication keys either run has. */
static void collect_keys(const cJSON *rep, keyset *kern, keyset *comm, int top_n) {
    const cJSON *r, *k, *c, *op;
    cJSON_ArrayForEach(r, tp_jobj(rep, "ranks")) {
        cJSON_ArrayForEach(k, tp_jobj(tp_jobj(r, "gpu"), "top_kernels"))
            if ((int)kern->n < top_n) ks_add(kern, tp_jstr(k, "name"));
        cJSON_ArrayForEach(c, tp_jobj(tp_jobj(r, "communication"), "communicators"))
            cJSON_ArrayForEach(op, tp_jobj(c, "ops")) {
                char key[160];
                comm_key(key, sizeof key, tp_jstr(op, "op"), tp_jnum(c, "size"));
                ks_add(comm, key);
            }
    }
}

/* ------------------------------------------------------------------ per-step values */

static size_t step_of(const tp_step *st, size_t n, uint64_t t) {
    if (!n || t < st[0].start) return SIZE_MAX;
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t mid = (lo + hi + 1) / 2;
        if (st[mid].start <= t) lo = mid;
        else hi = mid - 1;
    }
    return t < st[lo].end ? lo : SIZE_MAX;
}

typedef struct tv {
    uint64_t t;
    double v;
} tv;

static int by_t(const void *a, const void *b) {
    const tv *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t;
}

static int energy_at(const tv *s, size_t n, uint64_t t, double *out) {
    if (!n || t < s[0].t || t > s[n - 1].t) return 0;
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t mid = (lo + hi + 1) / 2;
        if (s[mid].t <= t) lo = mid;
        else hi = mid - 1;
    }
    if (lo + 1 >= n || s[lo].t == t) *out = s[lo].v;
    else *out = s[lo].v + (double)(t - s[lo].t) / (double)(s[lo + 1].t - s[lo].t) * (s[lo + 1].v - s[lo].v);
    return 1;
}

/* Energy per measured step of each GPU the report gives the rank (its nvml section). */
static void rank_energy(mtab *t, int side, const tp_run *run, const tp_process *p,
                        const cJSON *r, const tp_step *st, size_t nm) {
    /* the samples the report read for this rank (its GPUs there are found by UUID) */
    const tp_process *src = tp_gpu_samples_for(run, p);
    if (!src) return;
    const cJSON *g;
    cJSON_ArrayForEach(g, tp_jobj(tp_jobj(r, "nvml"), "gpus")) {
        char cname[48];
        snprintf(cname, sizeof cname, "gpu%.0f.energy_j", tp_jnum(g, "index"));
        tv *s = NULL;
        size_t n = 0, cap = 0;
        for (size_t ti = 0; ti < src->nthreads; ti++) {
            tp_counter_it it;
            tp_counter c;
            if (tp_counter_it_init(&it, &src->threads[ti])) { free(s); t->oom = 1; return; }
            while (tp_counter_next(&it, &c)) {
                if (strcmp(c.name, cname)) continue;
                if (n == cap) {
                    cap = cap ? cap * 2 : 256;
                    tv *ns = tp_realloc(s, cap * sizeof *ns);
                    if (!ns) { tp_counter_it_done(&it); free(s); t->oom = 1; return; }
                    s = ns;
                }
                s[n++] = (tv){c.ts, c.value};
            }
            tp_counter_it_done(&it);
        }
        if (n > 1) qsort(s, n, sizeof *s, by_t); /* s is NULL when no sample matched */
        double *e = tp_malloc((nm ? nm : 1) * sizeof *e);
        size_t ne = 0;
        for (size_t i = 0; e && i < nm; i++) {
            double a, b;
            if (energy_at(s, n, st[i].start, &a) && energy_at(s, n, st[i].end, &b)) e[ne++] = b - a;
        }
        if (ne) {
            char key[96];
            snprintf(key, sizeof key, "rank %.0f GPU %.0f", tp_jnum(r, "rank"), tp_jnum(g, "index"));
            push(t, side, SEC_ENERGY, key, e, ne);
        }
        free(e);
        free(s);
    }
}

/* Kernel name (interned: pointer identity) -> kernel class and index in the kernel key set. */
typedef struct kslot {
    const char *name;
    int cls, key;
} kslot;

static const char *const classes[] = {"communication", "attention", "gemm", "elementwise/norm", "other"};
#define NCLS 5

static int class_index(const char *c) {
    for (int i = 0; i < NCLS; i++)
        if (!strcmp(classes[i], c)) return i;
    return NCLS - 1;
}

static void rank_samples(mtab *t, int side, const tp_run *run, const tp_process *p,
                         const cJSON *r, const tp_report_opts *o, const keyset *kern,
                         const keyset *comm) {
    tp_steps s, cs = {0};
    if (tp_find_steps(p, o->step_name, o->warmup, &s) != TPROF_OK) { t->oom = 1; return; }
    size_t nm = s.nsteps - s.nwarmup;
    const tp_step *st = tp_steps_measured(&s);
    char key[192];
    int rank = (int)tp_jnum(r, "rank");
    double *v = NULL, *kv = NULL, *cv = NULL;
    kslot *slots = NULL;
    tp_comm_time *ct = NULL;
    if (!nm) goto out;
    v = tp_malloc(nm * sizeof *v);
    if (!v) goto oom;
    for (size_t i = 0; i < nm; i++) v[i] = (double)(st[i].end - st[i].start) / 1e6;
    snprintf(key, sizeof key, "rank %d", rank);
    push(t, side, SEC_STEP, key, v, nm);
    push(t, side, SEC_STEP, "all ranks", v, nm);

    /* kernels: per class and per listed kernel, ms per step of the steps in which GPU
     * activity was recorded (capture.h): a step without records ran kernels all the same */
    size_t nk = 0;
    for (size_t i = 0; i < p->ngpu; i++) nk += p->gpu[i].type == TPROF_REC_GPU_KERNEL;
    tp_capture_result cr;
    if (nk && tp_capture_compute(&cr, &cs, p, &s) != TPROF_OK) goto oom;
    const tp_step *cst = tp_steps_measured(&cs);
    size_t ncm = cs.nsteps - cs.nwarmup;
    if (nk && ncm) {
        size_t nkey = kern->n, nslot = 1024;
        kv = tp_calloc((NCLS + nkey) * ncm, sizeof *kv);
        slots = tp_calloc(nslot, sizeof *slots);
        size_t used = 0;
        if (!kv || !slots) goto oom;
        for (size_t i = 0; i < p->ngpu; i++) {
            const tp_gpu_op *g = &p->gpu[i];
            if (g->type != TPROF_REC_GPU_KERNEL) continue;
            size_t si = step_of(cst, ncm, g->start);
            if (si == SIZE_MAX) continue;
            size_t h = ((uintptr_t)g->name >> 3) * 0x9E3779B97F4A7C15ull >> 20 & (nslot - 1);
            while (slots[h].name && slots[h].name != g->name) h = (h + 1) & (nslot - 1);
            if (!slots[h].name) {
                if (2 * (used + 1) > nslot) { /* grow: rehash */
                    size_t n2 = nslot * 2;
                    kslot *ns = tp_calloc(n2, sizeof *ns);
                    if (!ns) goto oom;
                    for (size_t j = 0; j < nslot; j++) {
                        if (!slots[j].name) continue;
                        size_t h2 = ((uintptr_t)slots[j].name >> 3) * 0x9E3779B97F4A7C15ull >> 20 & (n2 - 1);
                        while (ns[h2].name) h2 = (h2 + 1) & (n2 - 1);
                        ns[h2] = slots[j];
                    }
                    free(slots);
                    slots = ns;
                    nslot = n2;
                    h = ((uintptr_t)g->name >> 3) * 0x9E3779B97F4A7C15ull >> 20 & (nslot - 1);
                    while (slots[h].name) h = (h + 1) & (nslot - 1);
                }
                slots[h] = (kslot){g->name, class_index(tp_kernel_class_name(g->cls)), ks_find(kern, g->name)};
                used++;
            }
            double d = (double)(g->end > g->start ? g->end - g->start : 0) / 1e6;
            kv[(size_t)slots[h].cls * ncm + si] += d;
            if (slots[h].key >= 0) kv[(NCLS + (size_t)slots[h].key) * ncm + si] += d;
        }
        for (int c = 0; c < NCLS; c++) push(t, side, SEC_CLASS, classes[c], kv + (size_t)c * ncm, ncm);
        for (size_t k = 0; k < nkey; k++) push(t, side, SEC_KERNEL, kern->k[k], kv + (NCLS + k) * ncm, ncm);
    }

    /* communication: per op and communicator size, ms per step of the ops issued in it */
    if (p->ncomm && comm->n) {
        ct = tp_malloc(p->ncomm * sizeof *ct);
        cv = tp_calloc(comm->n * nm, sizeof *cv);
        if (!ct || !cv) goto oom;
        tp_comm_resolve(p, ct);
        double *cnt = tp_calloc(comm->n, sizeof *cnt), *byt = tp_calloc(comm->n, sizeof *byt);
        if (!cnt || !byt) { free(cnt); free(byt); goto oom; }
        for (size_t i = 0; i < p->ncomm; i++) {
            const tp_comm_op *c = &p->comm[i];
            size_t si = step_of(st, nm, c->start);
            if (si == SIZE_MAX) continue;
            comm_key(key, sizeof key, c->name, (double)c->nranks);
            int k = ks_find(comm, key);
            if (k < 0) continue;
            cv[(size_t)k * nm + si] += (double)(ct[i].end > ct[i].start ? ct[i].end - ct[i].start : 0) / 1e6;
            cnt[k] += 1;
            byt[k] += (double)c->bytes;
        }
        for (size_t k = 0; k < comm->n; k++) {
            metric *m = mt_get(t, SEC_COMM, comm->k[k]);
            if (!m) break;
            ms_push(t, &m->s[side], cv + k * nm, nm);
            m->s[side].count += cnt[k];
            m->s[side].bytes += byt[k];
        }
        free(cnt);
        free(byt);
    }
    rank_energy(t, side, run, p, r, st, nm);
    goto out;
oom:
    t->oom = 1;
out:
    free(v);
    free(kv);
    free(slots);
    free(ct);
    free(cv);
    tp_steps_free(&cs);
    tp_steps_free(&s);
}

/* A rank known only from its report: the report's means. */
static void rank_json(mtab *t, int side, const cJSON *r) {
    char key[192];
    const cJSON *s = tp_jobj(r, "steps");
    if (tp_jhas(s, "mean_ms")) {
        snprintf(key, sizeof key, "rank %.0f", tp_jnum(r, "rank"));
        metric *m = mt_get(t, SEC_STEP, key);
        if (m) {
            m->s[side].p50 = tp_jnum(s, "p50_ms");
            m->s[side].p90 = tp_jnum(s, "p90_ms");
        }
        push_json(t, side, SEC_STEP, key, tp_jnum(s, "mean_ms"));
        push_json(t, side, SEC_STEP, "all ranks", tp_jnum(s, "mean_ms"));
    }
    const cJSON *g = tp_jobj(r, "gpu"), *d, *c;
    /* a bounded stepless rank's GPU figures are totals over a span of its run the bound chose
     * (docs/report-json.md, gpu_records_bound): no figure to set against another run's */
    if (!strcmp(tp_jstr(g, "per"), "span")) g = NULL;
    double cls[NCLS] = {0};
    int any = 0;
    cJSON_ArrayForEach(d, tp_jobj(g, "devices")) {
        any = 1;
        cJSON_ArrayForEach(c, tp_jobj(d, "kernel_ms_by_class"))
            if (cJSON_IsNumber(c)) cls[class_index(c->string)] += c->valuedouble;
    }
    for (int i = 0; any && i < NCLS; i++) push_json(t, side, SEC_CLASS, classes[i], cls[i]);
    cJSON_ArrayForEach(d, tp_jobj(g, "top_kernels")) push_json(t, side, SEC_KERNEL, tp_jstr(d, "name"), tp_jnum(d, "total_ms"));
    cJSON_ArrayForEach(c, tp_jobj(tp_jobj(r, "communication"), "communicators")) {
        const cJSON *op;
        cJSON_ArrayForEach(op, tp_jobj(c, "ops")) {
            if (!tp_jhas(op, "count_per_step") || tp_jnum(op, "count") <= 0) continue;
            comm_key(key, sizeof key, tp_jstr(op, "op"), tp_jnum(c, "size"));
            push_json(t, side, SEC_COMM, key, tp_jnum(op, "time_ms") * tp_jnum(op, "count_per_step") / tp_jnum(op, "count"));
        }
    }
    cJSON_ArrayForEach(d, tp_jobj(tp_jobj(r, "nvml"), "gpus")) {
        if (!tp_jhas(d, "energy_per_step_j")) continue;
        snprintf(key, sizeof key, "rank %.0f GPU %.0f", tp_jnum(r, "rank"), tp_jnum(d, "index"));
        push_json(t, side, SEC_ENERGY, key, tp_jnum(d, "energy_per_step_j"));
    }
}

/* The peaks of a rank's GPU memory, from its report: the caching allocator's allocated and
 * reserved peaks over the run (memory.*, exact over the run) and CUPTI's device-allocation peak
 * of each device (gpu.devices[].memory_peak_bytes), in GiB. */
static void rank_memory(mtab *t, int side, const cJSON *r) {
    char key[192];
    const cJSON *m = tp_jobj(r, "memory"), *d;
    double rank = tp_jnum(r, "rank");
    static const struct { const char *doc, *what; } peaks[] = {
        {"peak_allocated_bytes", "allocated"}, {"peak_reserved_bytes", "reserved"}};
    for (size_t i = 0; m && i < sizeof peaks / sizeof *peaks; i++) {
        if (!tp_jhas(m, peaks[i].doc)) continue;
        snprintf(key, sizeof key, "rank %.0f GPU %.0f peak %s", rank, tp_jnum(m, "device"),
                 peaks[i].what);
        push_json(t, side, SEC_MEMORY, key, tp_jnum(m, peaks[i].doc) / 1073741824.0);
    }
    cJSON_ArrayForEach(d, tp_jobj(tp_jobj(r, "gpu"), "devices")) {
        if (!tp_jhas(d, "memory_peak_bytes")) continue;
        snprintf(key, sizeof key, "rank %.0f GPU %.0f device allocations", rank,
                 tp_jnum(d, "device"));
        push_json(t, side, SEC_MEMORY, key, tp_jnum(d, "memory_peak_bytes") / 1073741824.0);
    }
}

/* The parts and phases of a rank's step, from its report (means per measured step: the
 * per-step values of the breakdown are not in the rank files' records, so their noise is
 * unknown and the unknown_rel rule applies). */
static void rank_parts(mtab *t, int side, const cJSON *r) {
    const cJSON *dl = tp_jobj(r, "data_loading");
    if (cJSON_IsTrue(tp_jobj(dl, "found")) && tp_jhas(dl, "ms_per_step"))
        push_json(t, side, SEC_PARTS, DATA_KEY, tp_jnum(dl, "ms_per_step"));
    const cJSON *b = tp_jobj(r, "breakdown"), *ph = NULL;
    if (strcmp(tp_jstr(b, "per"), "step")) return;
    if (!strcmp(tp_jstr(b, "basis"), "gpu")) {
        const cJSON *ms = tp_jobj(b, "ms");
        for (size_t i = 0; i < sizeof bd_parts / sizeof *bd_parts; i++)
            if (tp_jhas(tp_jobj(ms, bd_parts[i].doc), "mean"))
                push_json(t, side, SEC_PARTS, bd_parts[i].key,
                          tp_jnum(tp_jobj(ms, bd_parts[i].doc), "mean"));
        ph = tp_jobj(r, "phases");
        if (strcmp(tp_jstr(ph, "per"), "step")) ph = NULL;
    } else {
        ph = b;
    }
    const cJSON *x;
    cJSON_ArrayForEach(x, tp_jobj(ph, "ranges"))
        if (tp_jhas(tp_jobj(x, "ms"), "mean"))
            push_json(t, side, SEC_PHASE, tp_jstr(x, "name"), tp_jnum(tp_jobj(x, "ms"), "mean"));
    if (ph && tp_jhas(tp_jobj(tp_jobj(ph, "ms"), "untracked"), "mean"))
        push_json(t, side, SEC_PHASE, "(untracked)",
                  tp_jnum(tp_jobj(tp_jobj(ph, "ms"), "untracked"), "mean"));
}

/* ------------------------------------------------------------------ statistics */

typedef struct stat {
    int present;   /* the run has this figure at all */
    int samples;   /* from per-step values (noise known) */
    double mean, sd, se;
    size_t n;
} stat;

static stat stat_of(mside *s) {
    stat r = {0};
    if (s->n) {
        double sum = 0;
        for (size_t i = 0; i < s->n; i++) sum += s->v[i];
        r.mean = sum / (double)s->n;
        double ss = 0;
        for (size_t i = 0; i < s->n; i++) ss += (s->v[i] - r.mean) * (s->v[i] - r.mean);
        r.sd = s->n > 1 ? sqrt(ss / (double)(s->n - 1)) : 0;
        r.se = r.sd / sqrt((double)s->n);
        r.n = s->n;
        r.present = 1;
        r.samples = s->n > 1;
    } else if (s->json_n) {
        r.mean = s->json_sum / s->json_n;
        r.n = (size_t)s->json_n;
        r.present = 1;
    }
    return r;
}

static double pctl(mside *s, double p) {
    if (!s->n) return s->p50 || s->p90 ? (p < 0.7 ? s->p50 : s->p90) : NAN;
    qsort(s->v, s->n, sizeof *s->v, tp_cmp_double);
    return tp_pct_double(s->v, s->n, p);
}

static void add_num(cJSON *o, const char *k, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(o, k, v);
}

/* A figure that changed beyond noise and can explain a change of the step time. */
typedef struct cand {
    int sec;
    const char *key;
    double a, b;      /* ms per step; 0 where absent */
    size_t order;     /* the document's order: ties keep it */
    double rank;      /* |b - a| in steps of 0.1 % of the step's change (explain) */
} cand;

/* Largest share of the step's change first, in steps of 0.1 % of it (figures that move
 * together, such as a data range and the GPU idle under it, keep the document's order). */
static int by_share(const void *x, const void *y) {
    const cand *p = x, *q = y;
    if (p->rank != q->rank) return p->rank < q->rank ? 1 : -1;
    /* the data-loading ranges before the GPU idle under them and their phase: the cause */
    int dp = p->sec == SEC_PARTS && !strcmp(p->key, DATA_KEY);
    int dq = q->sec == SEC_PARTS && !strcmp(q->key, DATA_KEY);
    if (dp != dq) return dq - dp;
    return p->order < q->order ? -1 : p->order > q->order;
}

/* The explanation of the step time's change ("explained"): the candidates ranked by their
 * share of it, each with its share of the step in A and in B. */
static void explain(cJSON *e, cand *c, size_t n, double step_a, double step_b, int step_sig) {
    if (!e) return;
    int has = isfinite(step_a) && isfinite(step_b);
    double change = has ? step_b - step_a : 0;
    cJSON *st = cJSON_AddObjectToObject(e, "step_ms");
    add_num(st, "a", step_a);
    add_num(st, "b", step_b);
    if (has) {
        cJSON_AddNumberToObject(st, "delta", change);
        if (step_a != 0) cJSON_AddNumberToObject(st, "delta_rel", change / step_a);
    }
    cJSON_AddBoolToObject(st, "significant", step_sig);
    double unit = fabs(change) > 0 ? fabs(change) : 1;
    for (size_t i = 0; i < n; i++) c[i].rank = round(1000 * fabs(c[i].b - c[i].a) / unit);
    if (n > 1) qsort(c, n, sizeof *c, by_share);
    cJSON *ra = cJSON_AddArrayToObject(e, "ranked");
    for (size_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "section", sec_name[c[i].sec]);
        cJSON_AddStringToObject(o, "key", c[i].key);
        cJSON_AddNumberToObject(o, "a_ms", c[i].a);
        cJSON_AddNumberToObject(o, "b_ms", c[i].b);
        cJSON_AddNumberToObject(o, "delta_ms", c[i].b - c[i].a);
        if (has && step_a > 0) cJSON_AddNumberToObject(o, "a_share", c[i].a / step_a);
        if (has && step_b > 0) cJSON_AddNumberToObject(o, "b_share", c[i].b / step_b);
        if (has && change != 0)
            cJSON_AddNumberToObject(o, "share_of_change", (c[i].b - c[i].a) / change);
        tp_json_item_to_array(ra, o);
    }
}

static int by_key(const void *a, const void *b) {
    const metric *x = a, *y = b;
    if (x->sec != y->sec) return x->sec - y->sec;
    /* "all ranks" first, then rank order, numerically */
    int xa = !strcmp(x->key, "all ranks"), ya = !strcmp(y->key, "all ranks");
    if (xa != ya) return ya - xa;
    return strverscmp(x->key, y->key);
}

/* The document's head: schema, the two sides, the rule. */
static cJSON *diff_head(const tp_diff_side *const side[2], const mtab *t, const tp_diff_opts *o) {
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "schema", "trainprof.diff");
    cJSON_AddNumberToObject(d, "schema_version", TP_DIFF_SCHEMA_VERSION);
    cJSON_AddStringToObject(d, "trainprof_version", tprof_version());
    for (int i = 0; i < 2; i++) {
        cJSON *s = cJSON_AddObjectToObject(d, i ? "b" : "a");
        cJSON_AddStringToObject(s, "label", side[i]->label ? side[i]->label : "");
        cJSON_AddStringToObject(s, "dir", tp_jstr(tp_jobj(side[i]->rep, "run"), "dir"));
        cJSON_AddNumberToObject(s, "ranks", cJSON_GetArraySize(tp_jobj(side[i]->rep, "ranks")));
        cJSON_AddBoolToObject(s, "per_step_values", side[i]->run != NULL);
        if (t->invalid[i]) cJSON_AddNumberToObject(s, "invalid_figures", t->invalid[i]);
    }
    cJSON *rule = cJSON_AddObjectToObject(d, "rule");
    cJSON_AddNumberToObject(rule, "noise_k", o->noise_k);
    cJSON_AddNumberToObject(rule, "min_rel", o->min_rel);
    cJSON_AddNumberToObject(rule, "unknown_rel", o->unknown_rel);
    cJSON_AddStringToObject(rule, "text",
                            "significant when |delta| > noise_k x sqrt(sdA^2/nA + sdB^2/nB) over "
                            "the per-step values (ranks pooled) and |delta| > min_rel x A; "
                            "without per-step values, |delta| > unknown_rel x A");
    return d;
}

/* Side i's figures into t: per-step samples where its run is at hand, else its report's. */
static void side_rows(mtab *t, int i, const tp_diff_side *sd, const keyset *kern,
                      const keyset *comm) {
    tp_report_opts ro;
    const tp_report_opts *op = sd->o;
    if (!op) {
        tp_report_opts_init(&ro);
        op = &ro;
    }
    const cJSON *r;
    cJSON_ArrayForEach(r, tp_jobj(sd->rep, "ranks")) {
        const tp_process *p = tp_rank_process(sd->run, tp_jstr(r, "host"), tp_jnum(r, "pid"));
        /* a slim run's rank is read again whole for its samples, one at a time, as the
         * report reads it for its section (model.h): memory is the slim run and one file */
        tp_process whole;
        int reread = p && p->slim &&
                     tp_process_load_whole((tp_run *)sd->run, p, &whole) == TPROF_OK;
        if (p && p->slim && !reread) p = NULL; /* unreadable now: the report's figures */
        if (p && tp_jnum(tp_jobj(r, "steps"), "measured") > 0)
            rank_samples(t, i, sd->run, reread ? &whole : p, r, op, kern, comm);
        else
            rank_json(t, i, r);
        if (reread) tp_process_free(&whole);
        rank_parts(t, i, r);
        rank_memory(t, i, r);
    }
}

cJSON *tp_diff_build(const tp_diff_side *a, const tp_diff_side *b, const tp_diff_opts *o) {
    tp_diff_opts def;
    if (!o) {
        tp_diff_opts_init(&def);
        o = &def;
    }
    const tp_diff_side *side[2] = {a, b};
    keyset kern = {0}, comm = {0};
    for (int i = 0; i < 2; i++) collect_keys(side[i]->rep, &kern, &comm, o->top_n);
    mtab t = {0};
    for (int i = 0; i < 2; i++) side_rows(&t, i, side[i], &kern, &comm);
    /* the baseline's step time, for the relative floor of figures present in one run only */
    double base_step = 0;
    for (size_t i = 0; i < t.n; i++)
        if (t.m[i].sec == SEC_STEP && !strcmp(t.m[i].key, "all ranks")) base_step = stat_of(&t.m[i].s[0]).mean;
    if (t.n > 1) qsort(t.m, t.n, sizeof *t.m, by_key);

    cJSON *d = diff_head(side, &t, o);
    cJSON *expl = cJSON_AddObjectToObject(d, "explained");
    cJSON *secs = cJSON_AddObjectToObject(d, "sections");
    cand *cands = tp_calloc(t.n ? t.n : 1, sizeof *cands);
    size_t ncand = 0;
    double step_a = NAN, step_b = NAN;
    int step_sig = 0;
    if (!cands) t.oom = 1;
    cJSON *sig = cJSON_AddArrayToObject(d, "significant");
    for (int sec = 0; sec < SEC_N; sec++) cJSON_AddArrayToObject(secs, sec_name[sec]);
    for (size_t i = 0; i < t.n; i++) {
        metric *m = &t.m[i];
        stat sa = stat_of(&m->s[0]), sb = stat_of(&m->s[1]);
        cJSON *row = cJSON_CreateObject();
        tp_json_item_to_array(cJSON_GetObjectItem(secs, sec_name[m->sec]), row);
        cJSON_AddStringToObject(row, "key", m->key);
        cJSON_AddStringToObject(row, "unit", sec_unit[m->sec]);
        int significant = 0;
        double delta = NAN, noise = NAN;
        if (sa.present) add_num(row, "a", sa.mean);
        if (sb.present) add_num(row, "b", sb.mean);
        if (m->sec == SEC_STEP) {
            add_num(row, "a_p50", pctl(&m->s[0], 0.5));
            add_num(row, "a_p90", pctl(&m->s[0], 0.9));
            add_num(row, "b_p50", pctl(&m->s[1], 0.5));
            add_num(row, "b_p90", pctl(&m->s[1], 0.9));
        }
        if (m->sec == SEC_COMM) {
            for (int k = 0; k < 2; k++)
                if (m->s[k].n) {
                    add_num(row, k ? "b_count_per_step" : "a_count_per_step", m->s[k].count / (double)m->s[k].n);
                    add_num(row, k ? "b_bytes_per_step" : "a_bytes_per_step", m->s[k].bytes / (double)m->s[k].n);
                }
        }
        cJSON_AddNumberToObject(row, "a_n", (double)sa.n);
        cJSON_AddNumberToObject(row, "b_n", (double)sb.n);
        if (sa.present && sb.present) {
            delta = sb.mean - sa.mean;
            cJSON_AddNumberToObject(row, "delta", delta);
            if (sa.mean != 0) cJSON_AddNumberToObject(row, "delta_rel", delta / sa.mean);
            if (sa.samples && sb.samples) {
                noise = sqrt(sa.se * sa.se + sb.se * sb.se);
                cJSON_AddNumberToObject(row, "noise", noise);
                significant = fabs(delta) > o->noise_k * noise && fabs(delta) > o->min_rel * fabs(sa.mean);
            } else {
                cJSON_AddBoolToObject(row, "noise_unknown", 1);
                significant = fabs(delta) > o->unknown_rel * fabs(sa.mean);
            }
            /* a figure that was (almost) zero: judge against the step time instead */
            if (significant && fabs(sa.mean) < o->min_rel * base_step && fabs(sb.mean) < o->min_rel * base_step)
                significant = 0;
        } else {
            const stat *only = sa.present ? &sa : &sb;
            cJSON_AddStringToObject(row, "only_in", sa.present ? "a" : "b");
            /* present in one run only: a communication op or kernel that appeared or vanished
             * matters when it takes more than min_rel of the step */
            significant = m->sec != SEC_STEP && m->sec != SEC_ENERGY && m->sec != SEC_MEMORY &&
                          only->mean > o->min_rel * base_step && base_step > 0;
        }
        cJSON_AddBoolToObject(row, "significant", significant);
        if (m->sec == SEC_STEP && !strcmp(m->key, "all ranks")) {
            step_a = sa.present ? sa.mean : NAN;
            step_b = sb.present ? sb.mean : NAN;
            step_sig = significant;
        }
        /* what can explain a change of the step time: ms per step of a part, a phase, a
         * kernel class or a communication op (the kernels are in their classes) */
        if (significant && cands &&
            (m->sec == SEC_PARTS || m->sec == SEC_PHASE || m->sec == SEC_CLASS || m->sec == SEC_COMM))
        {
            cands[ncand] = (cand){m->sec, m->key, sa.present ? sa.mean : 0,
                                  sb.present ? sb.mean : 0, ncand};
            ncand++;
        }
        if (significant) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "section", sec_name[m->sec]);
            cJSON_AddStringToObject(e, "key", m->key);
            char msg[512];
            if (sa.present && sb.present)
                snprintf(msg, sizeof msg, "%s %s: %.4g -> %.4g %s (%+.1f %%%s)",
                         m->sec == SEC_STEP ? "step time" : m->sec == SEC_PARTS ? "step part"
                         : m->sec == SEC_PHASE ? "phase" : m->sec == SEC_CLASS ? "kernel class"
                         : m->sec == SEC_KERNEL ? "kernel" : m->sec == SEC_COMM ? "communication"
                         : m->sec == SEC_MEMORY ? "GPU memory" : "energy",
                         m->key, sa.mean, sb.mean, m->sec == SEC_STEP ? "ms" : m->sec == SEC_ENERGY ? "J per step"
                         : m->sec == SEC_MEMORY ? "GiB" : "ms per step",
                         sa.mean != 0 ? 100 * delta / sa.mean : INFINITY,
                         isfinite(noise) ? "" : ", noise unknown");
            else
                snprintf(msg, sizeof msg, "%s %s: only in %s (%.4g ms per step)",
                         m->sec == SEC_KERNEL ? "kernel" : m->sec == SEC_COMM ? "communication"
                         : m->sec == SEC_PARTS ? "step part" : m->sec == SEC_PHASE ? "phase" : "kernel class",
                         m->key, sa.present ? "A" : "B", sa.present ? sa.mean : sb.mean);
            cJSON_AddStringToObject(e, "message", msg);
            tp_json_item_to_array(sig, e);
        }
    }
    explain(expl, cands, ncand, step_a, step_b, step_sig);
    free(cands);
    if (t.oom) cJSON_AddStringToObject(d, "error", "out of memory: the comparison is partial");
    for (size_t i = 0; i < t.n; i++) {
        free(t.m[i].key);
        free(t.m[i].s[0].v);
        free(t.m[i].s[1].v);
    }
    free(t.m);
    ks_free(&kern);
    ks_free(&comm);
    tp_json_clean_utf8(d); /* labels and keys from the runs' names: valid UTF-8 out */
    return d;
}

/* ------------------------------------------------------------------ text */

static void put_num(FILE *f, const cJSON *o, const char *k, int w) {
    if (tp_jhas(o, k)) fprintf(f, " %*.*f", w, fabs(tp_jnum(o, k)) >= 100 ? 1 : 3, tp_jnum(o, k));
    else fprintf(f, " %*s", w, "-");
}

/* What a row of the explanation is, in words: the phase's or the op's name with what it is. */
static void explain_what(FILE *f, const cJSON *x) {
    const char *sec = tp_jstr(x, "section");
    fputs(!strcmp(sec, "phases") ? "phase " : !strcmp(sec, "gpu_classes") ? "kernels: "
          : !strcmp(sec, "communication") ? "communication " : "", f);
    tp_text_put(f, tp_jstr(x, "key"), 60, 0);
}

/* The lead: the step's change and the (at most 3) figures that explain most of it. */
#define EXPLAIN_LEAD 3
static void explain_text(FILE *f, const cJSON *e) {
    const cJSON *st = tp_jobj(e, "step_ms"), *ra = tp_jobj(e, "ranked"), *x;
    if (!tp_jhas(st, "delta")) return;
    if (tp_jhas(st, "delta_rel")) fprintf(f, "step time %+.1f %%", 100 * tp_jnum(st, "delta_rel"));
    else fprintf(f, "step time %+.3f ms", tp_jnum(st, "delta"));
    fprintf(f, " (%.3f -> %.3f ms%s)", tp_jnum(st, "a"), tp_jnum(st, "b"),
            cJSON_IsTrue(tp_jobj(st, "significant")) ? "" : ", within noise");
    /* figures that moved by the same amount (to 0.1 % of the change) are views of one change
     * (a data range, the GPU idle under it, its phase): one item, the others named with it */
    int i = 0, shown = 0, also = 0, left = 0;
    double change = fabs(tp_jnum(st, "delta")) > 0 ? fabs(tp_jnum(st, "delta")) : 1, last = NAN;
    cJSON_ArrayForEach(x, ra) {
        double key = round(1000 * fabs(tp_jnum(x, "delta_ms")) / change);
        if (shown && key == last) {
            if (i == EXPLAIN_LEAD && !also) { left++; continue; }
            fputs(also++ ? ", " : "; with it ", f);
            explain_what(f, x);
            continue;
        }
        if (shown) fputc(')', f);
        shown = 0;
        if (i == EXPLAIN_LEAD) { left++; continue; }
        fputs(i++ ? ", " : ": ", f);
        explain_what(f, x);
        if (tp_jhas(x, "a_share") && tp_jhas(x, "b_share"))
            fprintf(f, " %.1f %% -> %.1f %% of the step", 100 * tp_jnum(x, "a_share"),
                    100 * tp_jnum(x, "b_share"));
        fprintf(f, " (%+.3f ms", tp_jnum(x, "delta_ms"));
        if (tp_jhas(x, "share_of_change"))
            fprintf(f, ", %.0f %% of the change", 100 * tp_jnum(x, "share_of_change"));
        shown = 1;
        also = 0;
        last = key;
    }
    if (shown) fputc(')', f);
    if (!i) fputs(": no part, phase, kernel class or collective changed beyond noise", f);
    else if (left) fprintf(f, "; %d more below", left);
    fputc('\n', f);
}

static int write_text(const cJSON *d, FILE *f) {
    const cJSON *a = tp_jobj(d, "a"), *b = tp_jobj(d, "b"), *rule = tp_jobj(d, "rule");
    fputs("trainprof diff\n", f);
    explain_text(f, tp_jobj(d, "explained"));
    fprintf(f, "  A: %s\n  B: %s\n", tp_jstr(a, "label"), tp_jstr(b, "label"));
    fprintf(f, "rule: a change is significant when |B - A| > %.0f x noise and > %.0f %% of A, noise "
               "being the standard error of the difference of the per-step means (ranks pooled); "
               "without per-step values (report.json only) when it is > %.0f %% of A\n",
            tp_jnum(rule, "noise_k"), 100 * tp_jnum(rule, "min_rel"), 100 * tp_jnum(rule, "unknown_rel"));
    for (int i = 0; i < 2; i++) {
        const cJSON *sd = i ? b : a;
        if (tp_jhas(sd, "invalid_figures"))
            fprintf(f, "%s: %.0f figure(s) of its report.json left out: negative, not finite or "
                       "beyond any run (an edited or damaged file)\n",
                    i ? "B" : "A", tp_jnum(sd, "invalid_figures"));
    }
    for (int sec = 0; sec < SEC_N; sec++) {
        const cJSON *rows = tp_jobj(tp_jobj(d, "sections"), sec_name[sec]), *r;
        if (!cJSON_GetArraySize(rows)) continue;
        fprintf(f, "\n%s\n  %-44s %10s %10s %10s %8s %9s\n", sec_title[sec], "", "A", "B",
                "B - A", "change", "noise");
        cJSON_ArrayForEach(r, rows) {
            fputs("  ", f);
            tp_text_put(f, tp_jstr(r, "key"), 44, 44);
            put_num(f, r, "a", 10);
            put_num(f, r, "b", 10);
            if (tp_jhas(r, "delta")) fprintf(f, " %+10.3f", tp_jnum(r, "delta"));
            else fprintf(f, " %10s", "-");
            if (tp_jhas(r, "delta_rel")) fprintf(f, " %+7.1f%%", 100 * tp_jnum(r, "delta_rel"));
            else fprintf(f, " %8s", "-");
            if (tp_jhas(r, "noise")) fprintf(f, " %9.3f", tp_jnum(r, "noise"));
            else fprintf(f, " %9s", "?");
            if (tp_jobj(r, "only_in")) fprintf(f, "  only in %s", !strcmp(tp_jstr(r, "only_in"), "a") ? "A" : "B");
            if (cJSON_IsTrue(tp_jobj(r, "significant"))) fputs("  << changed", f);
            fputc('\n', f);
            if (sec == SEC_STEP && tp_jhas(r, "a_p50"))
                fprintf(f, "    p50 %.3f -> %.3f ms, p90 %.3f -> %.3f ms\n", tp_jnum(r, "a_p50"),
                        tp_jnum(r, "b_p50"), tp_jnum(r, "a_p90"), tp_jnum(r, "b_p90"));
        }
    }
    const cJSON *sig = tp_jobj(d, "significant"), *e;
    if (!cJSON_GetArraySize(sig)) {
        fputs("\nno change beyond noise\n", f);
    } else {
        fputs("\nchanged beyond noise:\n", f);
        cJSON_ArrayForEach(e, sig) fprintf(f, "  %s\n", tp_jstr(e, "message"));
    }
    if (tp_jobj(d, "error")) fprintf(f, "warning: %s\n", tp_jstr(d, "error"));
    fflush(f);
    return ferror(f) ? TPROF_ERR_IO : TPROF_OK;
}

/* Rendered in memory and written as valid UTF-8 (text.h): the reports compared may come
 * from report.json files of any origin. */
static int render_text(FILE *out, const void *ctx) { return write_text(ctx, out); }

int tp_diff_write_text(const cJSON *d, FILE *f) { return tp_utf8_render(f, render_text, d); }
