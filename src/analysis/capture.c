/*
 * capture.c — the steps in which GPU activity was recorded (capture.h has the rule), and the
 * step time that recording cost, measured in the run itself: the median captured step
 * against the median of the steps run with capture off.
 *
 * The timeline of capture on/off is rebuilt from the metadata the runtime writes when it
 * switches (docs/format.md): the windows of a capture plan (gpu_capture.windows), or in files
 * written before plans every value of kernel_steps.on_ns/off_ns and capture.detail_on_ns/off_ns
 * (the file keeps each one, the last wins only for readers asking for one value), applied in
 * time order from the initial state (off before a
 * kernel-capture window opens, else on); the pauses are gpu_capture.pauses' spans and an
 * open gpu_capture.paused_since_ns.
 */
#define _GNU_SOURCE
#include "analysis/capture.h"
#include "analysis/alloc.h"
#include "analysis/stats.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainprof.h"

/* GPU records end this long before the steps do, over at least two steps: the records
 * stopped (another CUPTI client took the activity API over), rather than a quiet tail. */
#define STOPPED_NS 1000000000ull

/* Sides of the cost with fewer steps than this are no measurement. */
#define COST_MIN_STEPS 3
/* Uncaptured steps taken beside each run of captured steps, at least (cost_neighbours). */
#define COST_LOCAL 4
/* Steps left out of the captured ones though recording went on in them, under another client
 * or in trainprof (its records not held): none stands for the pace with capture off. */
#define CAP_RECORDING (TP_CAP_PAUSED | TP_CAP_STOPPED | TP_CAP_BOUND)

typedef struct cap_event {
    uint64_t t;
    int on;
    unsigned why; /* TP_CAP_KERNEL_STEPS or TP_CAP_DETAIL */
} cap_event;

static int by_time(const void *a, const void *b) {
    const cap_event *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t;
}

/* A decimal number at q, digits only (no sign, no space, within 64 bits): 0 with *v and *e
 * past it, else -1. The metadata is the runtime's; a hand-edited or damaged value is
 * refused rather than read as strtoull would ("-5" as 2^64 - 5, "x" as 0). */
static int digits(const char *q, uint64_t *v, const char **e) {
    if (*q < '0' || *q > '9') return -1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(q, &end, 10);
    if (errno) return -1;
    *v = x;
    *e = end;
    return 0;
}

static int by_on(const void *a, const void *b) {
    const tp_span *x = a, *y = b;
    return x->s < y->s ? -1 : x->s > y->s;
}

/* gpu_capture.windows ("on-off,...", an open one "on-") as switches into v (room for two per
 * entry), in time order: the union of the windows, so that entries the runtime never writes
 * (overlapping, out of order) cannot turn capture off inside another window or leave it on
 * after one; an entry that is not "on-off" or "on-", or that ends before it begins, is left
 * out and counted in *ignored. Returns the switches, SIZE_MAX when out of memory. */
static size_t window_events(const char *wl, cap_event *v, size_t cap, size_t *ignored) {
    tp_span *w = tp_malloc((cap / 2 + 1) * sizeof *w);
    size_t nw = 0, n = 0;
    if (!w) return SIZE_MAX;
    for (const char *q = wl; *q;) {
        uint64_t on, off = UINT64_MAX;
        const char *e;
        int ok = nw < cap / 2 && digits(q, &on, &e) == 0 && *e == '-';
        if (ok) {
            q = e + 1;
            if (*q != ',' && *q && (digits(q, &off, &e) != 0 || (*e && *e != ',')))
                ok = 0;
            else if (*q && *q != ',')
                q = e;
        }
        if (ok && off >= on) w[nw++] = (tp_span){on, off};
        else ++*ignored;
        while (*q && *q != ',') q++; /* past a malformed entry too */
        if (*q == ',') q++;
    }
    qsort(w, nw, sizeof *w, by_on);
    for (size_t i = 0; i < nw;) {
        uint64_t s0 = w[i].s, e0 = w[i].e;
        for (i++; i < nw && e0 != UINT64_MAX && w[i].s <= e0; i++)
            if (w[i].e > e0) e0 = w[i].e;
        v[n++] = (cap_event){s0, 1, TP_CAP_KERNEL_STEPS};
        if (e0 != UINT64_MAX) v[n++] = (cap_event){e0, 0, TP_CAP_KERNEL_STEPS};
        else break; /* open to the end: later ones are inside it */
    }
    free(w);
    return n;
}

/* The window list: gpu_capture.windows, then its pages gpu_capture.windows.2, .3, ...
 * (tp_meta_page), joined by commas; owned by the caller. NULL when there is no list, or an
 * empty one (none opened), and out of memory (*oom set). */
static char *window_list(const tp_process *p, int *oom) {
    static const char key[] = "gpu_capture.windows";
    const char *first = tp_meta_page(p, key, 1), *pg;
    if (!first || !*first) return NULL;
    size_t len = strlen(first);
    for (unsigned k = 2; (pg = tp_meta_page(p, key, k)); k++) len += 1 + strlen(pg);
    char *wl = tp_malloc(len + 1);
    if (!wl) {
        *oom = 1;
        return NULL;
    }
    size_t at = strlen(first);
    memcpy(wl, first, at);
    for (unsigned k = 2; (pg = tp_meta_page(p, key, k)); k++) {
        size_t l = strlen(pg);
        if (!l) continue; /* (the runtime writes a page with its first window) */
        wl[at++] = ',';
        memcpy(wl + at, pg, l);
        at += l;
    }
    wl[at] = 0;
    return wl;
}

/* The switches of capture in p's metadata, in time order; *n of them (NULL when none or out
 * of memory: *oom then set). *ignored (may be NULL): entries of gpu_capture.windows left out
 * as malformed. */
static cap_event *events(const tp_process *p, size_t *n, int *oom, size_t *ignored) {
    size_t ign = 0;
    if (!ignored) ignored = &ign;
    *ignored = 0;
    /* a file of a capture plan lists every window, the metrics endpoint's switches included
     * (gpu_capture.windows "on-off,...", an open one "on-", and its later pages): that list,
     * when present */
    char *wl = window_list(p, oom);
    if (*oom) return NULL;
    if (wl) {
        size_t cap = 2;
        for (const char *q = wl; *q; q++) cap += 2 * (*q == ',');
        cap_event *v = tp_malloc(cap * sizeof *v);
        *n = 0;
        if (!v) {
            free(wl);
            *oom = 1;
            return NULL;
        }
        *n = window_events(wl, v, cap, ignored);
        free(wl);
        if (*n == SIZE_MAX) {
            free(v);
            *n = 0;
            *oom = 1;
            return NULL;
        }
        return v;
    }
    static const struct { const char *key; int on; unsigned why; } keys[] = {
        {"kernel_steps.on_ns", 1, TP_CAP_KERNEL_STEPS},
        {"kernel_steps.off_ns", 0, TP_CAP_KERNEL_STEPS},
        {"capture.detail_on_ns", 1, TP_CAP_DETAIL},
        {"capture.detail_off_ns", 0, TP_CAP_DETAIL}};
    size_t k = 0;
    for (size_t i = 0; i < p->nmeta; i++)
        for (size_t j = 0; j < sizeof keys / sizeof *keys; j++)
            k += !strcmp(p->meta[i].key, keys[j].key);
    *n = 0;
    if (!k) return NULL;
    cap_event *v = tp_malloc(k * sizeof *v);
    if (!v) {
        *oom = 1;
        return NULL;
    }
    for (size_t i = 0; i < p->nmeta; i++)
        for (size_t j = 0; j < sizeof keys / sizeof *keys; j++)
            if (!strcmp(p->meta[i].key, keys[j].key) && *p->meta[i].value)
                v[(*n)++] = (cap_event){strtoull(p->meta[i].value, NULL, 10), keys[j].on,
                                        keys[j].why};
    qsort(v, *n, sizeof *v, by_time);
    return v;
}

/* Calls f(ctx, x, y, at, ok) for each entry of list l, numbered from *at on, in order: ok
 * when it reads as "start-end" and nothing else; *at past them. */
static void each_pause_of(const char *l, void (*f)(void *, uint64_t, uint64_t, size_t, int),
                          void *ctx, size_t *at_io) {
    size_t at = *at_io;
    for (const char *q = l ? l : ""; *q; at++) {
        uint64_t x = 0, y = 0;
        const char *r;
        int ok = !digits(q, &x, &r) && *r == '-' && !digits(r + 1, &y, &r) && (*r == ',' || !*r);
        if (f) f(ctx, x, y, at, ok);
        const char *c = strchr(q, ',');
        if (!c) {
            at++;
            break;
        }
        q = c + 1;
    }
    *at_io = at;
}

/* each_pause_of over p's pauses: gpu_capture.pauses, then its pages gpu_capture.pauses.2,
 * .3, ... (tp_meta_page), numbered across them; returns the entries' count. */
static size_t each_pause(const tp_process *p,
                         void (*f)(void *, uint64_t, uint64_t, size_t, int), void *ctx) {
    size_t at = 0;
    const char *l;
    for (unsigned k = 1; (l = tp_meta_page(p, "gpu_capture.pauses", k)); k++)
        each_pause_of(l, f, ctx, &at);
    return at;
}

typedef struct pause_fill {
    tp_capture_pause *v;
    size_t n, cap;
} pause_fill;

static void fill_pause(void *ctx, uint64_t x, uint64_t y, size_t at, int ok) {
    pause_fill *pf = ctx;
    if (ok && y > x && pf->n < pf->cap) pf->v[pf->n++] = (tp_capture_pause){x, y, at, 0};
}

int tp_capture_pause_list(const tp_process *p, tp_capture_pause **v, size_t *n) {
    const char *open = tp_meta(p, "gpu_capture.paused_since_ns");
    *v = NULL;
    *n = 0;
    /* a pause never resumed whose start does not read is no pause (it would start at 0) */
    uint64_t since = 0;
    const char *r;
    if (open && (digits(open, &since, &r) || *r)) open = NULL;
    size_t entries = each_pause(p, NULL, NULL), cap = entries + (open && *open);
    if (!cap) return TPROF_OK;
    pause_fill pf = {tp_malloc(cap * sizeof *pf.v), 0, cap};
    if (!pf.v) return TPROF_ERR_NO_MEMORY;
    each_pause(p, fill_pause, &pf);
    if (open && *open)
        pf.v[pf.n++] = (tp_capture_pause){since, UINT64_MAX, entries, 1};
    if (!pf.n) {
        free(pf.v);
        pf.v = NULL;
    }
    *v = pf.v;
    *n = pf.n;
    return TPROF_OK;
}

/* The pauses as spans into *v (*n); -1 when out of memory. */
static int pauses(const tp_process *p, tp_span **v, size_t *n) {
    tp_capture_pause *l;
    size_t nl;
    *v = NULL;
    *n = 0;
    if (tp_capture_pause_list(p, &l, &nl) != TPROF_OK) return -1;
    *v = tp_malloc((nl ? nl : 1) * sizeof **v);
    if (!*v) {
        free(l);
        return -1;
    }
    for (size_t i = 0; i < nl; i++) (*v)[(*n)++] = (tp_span){l[i].from_ns, l[i].to_ns};
    free(l);
    return 0;
}

size_t tp_capture_npauses(const tp_process *p) {
    const char *open = tp_meta(p, "gpu_capture.paused_since_ns");
    return each_pause(p, NULL, NULL) + (open && *open);
}

/* Items [0, want) of comma-separated list l into r[base + j] and len[base + j] (those with
 * base + j < n): the items the list has, the rest left as they are (NULL). */
static void reason_items(const char *l, size_t want, const char **r, size_t *len, size_t base,
                         size_t n) {
    for (size_t j = 0; l && j < want && base + j < n; j++) {
        const char *e = strchr(l, ',');
        size_t k = e ? (size_t)(e - l) : strlen(l);
        r[base + j] = k ? l : NULL;
        len[base + j] = k;
        l = e ? e + 1 : NULL;
    }
}

void tp_capture_pause_reasons(const tp_process *p, const char **r, size_t *len, size_t n) {
    static const char pk[] = "gpu_capture.pauses", rk[] = "gpu_capture.pause_reasons";
    for (size_t i = 0; i < n; i++) r[i] = NULL, len[i] = 0;
    const char *l = tp_meta_page(p, rk, 1);
    if (!l) { /* an older file: one reason for all */
        const char *one = tp_meta(p, "gpu_capture.pause_reason");
        for (size_t i = 0; one && *one && i < n; i++) r[i] = one, len[i] = strlen(one);
        return;
    }
    size_t base = 0;
    unsigned k = 1;
    const char *pl;
    for (; (pl = tp_meta_page(p, pk, k)); k++) {
        size_t cnt = 0;
        each_pause_of(pl, NULL, NULL, &cnt);
        const char *rl = tp_meta_page(p, rk, k);
        /* the last page's reasons may name the pause under way after its own */
        int last = !tp_meta_page(p, pk, k + 1);
        reason_items(rl, last && !tp_meta_page(p, rk, k + 1) ? cnt + 1 : cnt, r, len, base, n);
        base += cnt;
    }
    /* the pause under way begun on a page of its own: that page's one item */
    reason_items(tp_meta_page(p, rk, k), 1, r, len, base, n);
}

static int by_span_start(const void *a, const void *b) {
    const tp_span *x = a, *y = b;
    return x->s < y->s ? -1 : x->s > y->s;
}

static int overlaps(const tp_span *v, size_t n, uint64_t s, uint64_t e) {
    for (size_t i = 0; i < n; i++)
        if (v[i].s < (e > s ? e : s + 1) && v[i].e > s) return 1;
    return 0;
}

/* 1 when GPU activity capture applies to p: it has GPU records, or CUPTI started in it
 * (a window that never opened leaves no record but the capability line). */
static int applies(const tp_process *p) {
    if (p->ngpu || p->napi || p->ngmem || p->novh || p->gpu_window_to) return 1;
    const char *c = tp_meta(p, "capability.cupti");
    return c && !strncmp(c, "activity capture", 16);
}

static int spans_of(const tp_process *p, uint64_t t0, uint64_t t1, int clip, tp_step **out,
                    size_t *n) {
    *out = NULL;
    *n = 0;
    size_t nev = 0, npz = 0;
    int oom = 0;
    tp_span *pz = NULL;
    const int use = applies(p);
    cap_event *ev = use ? events(p, &nev, &oom, NULL) : NULL;
    if (!oom && use && pauses(p, &pz, &npz) != 0) oom = 1;
    /* at most one span per switch and per pause, and the first */
    tp_step *v = oom ? NULL : tp_malloc((nev + 2 * npz + 2) * sizeof *v);
    if (!v) {
        free(ev);
        free(pz);
        return TPROF_ERR_NO_MEMORY;
    }
    if (npz > 1) qsort(pz, npz, sizeof *pz, by_span_start);
    /* the capture-on spans, then each cut by the pauses */
    int on = !use || !tp_meta(p, "kernel_steps");
    uint64_t from = t0;
    size_t k = 0;
    for (size_t i = 0; i <= nev; i++) {
        uint64_t t = i < nev ? ev[i].t : t1;
        if (t > t1) t = t1;
        if (t < t0) t = t0;
        if (on && t > from) {
            uint64_t s = from;
            for (size_t j = 0; j < npz && s < t; j++) {
                if (pz[j].e <= s || pz[j].s >= t) continue;
                if (pz[j].s > s) v[k++] = (tp_step){s, pz[j].s, 0, 0};
                s = pz[j].e;
            }
            if (s < t) v[k++] = (tp_step){s, t, 0, 0};
        }
        if (i < nev) {
            on = ev[i].on;
            from = t;
        }
    }
    /* a load bounded in GPU records held those of its span alone (bound_span) */
    size_t kept = 0;
    for (size_t i = 0; i < k; i++) {
        tp_step w = v[i];
        if (clip && p->gpu_window_to) {
            if (w.start < p->gpu_window_from) w.start = p->gpu_window_from;
            if (w.end > p->gpu_window_to) w.end = p->gpu_window_to;
            if (w.end <= w.start) continue;
        }
        v[kept] = w;
        v[kept].app_step = kept;
        kept++;
    }
    free(ev);
    free(pz);
    *out = v;
    *n = kept;
    return TPROF_OK;
}

int tp_capture_spans(const tp_process *p, uint64_t t0, uint64_t t1, tp_step **out, size_t *n) {
    return spans_of(p, t0, t1, 1, out, n);
}

size_t tp_capture_unlisted(const tp_process *p) {
    const char *lo = tp_meta(p, "gpu_capture.windows_left_out"), *end = NULL;
    uint64_t n = 0;
    return lo && digits(lo, &n, &end) == 0 && !*end ? (size_t)n : 0;
}

int tp_capture_timeline(const tp_process *p, tp_step **out, size_t *n) {
    return spans_of(p, 0, UINT64_MAX, 0, out, n);
}

/* The runs of captured measured steps as numbers and words. */
static void step_runs(tp_capture_result *out, const tp_step *meas, size_t nm, const uint8_t *in) {
    size_t len = 0;
    for (size_t i = 0; i < nm; i++) {
        if (!in[i] || (i && in[i - 1] && meas[i].app_step == meas[i - 1].app_step + 1)) continue;
        size_t j = i;
        while (j + 1 < nm && in[j + 1] && meas[j + 1].app_step == meas[j].app_step + 1) j++;
        if (out->nranges < TP_CAPTURE_RANGES) {
            out->ranges[out->nranges][0] = (double)meas[i].app_step;
            out->ranges[out->nranges++][1] = (double)meas[j].app_step;
            if (len < sizeof out->steps) {
                int w = j > i ? snprintf(out->steps + len, sizeof out->steps - len, "%s%llu-%llu",
                                         len ? ", " : "", (unsigned long long)meas[i].app_step,
                                         (unsigned long long)meas[j].app_step)
                              : snprintf(out->steps + len, sizeof out->steps - len, "%s%llu",
                                         len ? ", " : "", (unsigned long long)meas[i].app_step);
                len += w > 0 ? (size_t)w : 0;
            }
        } else {
            out->ranges_left_out++;
        }
    }
    if (out->ranges_left_out && len + 6 < sizeof out->steps)
        snprintf(out->steps + len, sizeof out->steps - len, ", ...");
}

/* Why nothing was captured, in words. */
static void none_reason(tp_capture_result *out, const tp_process *p) {
    char *b = out->not_captured;
    size_t n = sizeof out->not_captured, l = 0;
    l += (size_t)snprintf(b, n, "no measured step was captured");
    const char *kw = tp_meta(p, "kernel_steps");
    if ((out->limited_by & TP_CAP_KERNEL_STEPS) && kw && l < n)
        l += (size_t)snprintf(b + l, n - l, tp_meta(p, "kernel_steps.on_ns")
                                                ? "; the capture plan's window %.40s held none"
                                                : "; the capture plan's window %.40s never began",
                              kw);
    if ((out->limited_by & TP_CAP_DETAIL) && l < n)
        l += (size_t)snprintf(b + l, n - l, "; the metrics endpoint turned detailed capture off");
    if ((out->limited_by & TP_CAP_PAUSED) && l < n) {
        l += (size_t)snprintf(b + l, n - l, "; capture was paused");
        /* for each reason named, once, in the order of the pauses: the first few that fit */
        const size_t np = tp_capture_npauses(p);
        const char **rs = np ? tp_malloc(np * sizeof *rs) : NULL;
        size_t *rl = np ? tp_malloc(np * sizeof *rl) : NULL;
        if (rs && rl) tp_capture_pause_reasons(p, rs, rl, np);
        size_t shown[8], named = 0; /* the pauses whose reasons were written */
        for (size_t i = 0; rs && rl && i < np && l < n && named < 8; i++) {
            int seen = !rs[i];
            for (size_t j = 0; !seen && j < named; j++)
                seen = rl[shown[j]] == rl[i] && !memcmp(rs[shown[j]], rs[i], rl[i]);
            if (seen) continue;
            l += (size_t)snprintf(b + l, n - l, "%s%.*s", named ? ", " : " for ",
                                  (int)(rl[i] < 60 ? rl[i] : 60), rs[i]);
            shown[named++] = i;
        }
        free(rs);
        free(rl);
    }
    if ((out->limited_by & TP_CAP_STOPPED) && l < n)
        l += (size_t)snprintf(b + l, n - l,
                              "; GPU records stopped (another CUPTI client took the activity "
                              "API)");
    if ((out->limited_by & TP_CAP_BOUND) && l < n)
        snprintf(b + l, n - l, "; the span of GPU records held (--gpu-records) holds no "
                               "measured step whole: --gpu-records all reads them all");
}

/* A step that can stand for the pace with capture off: not captured, not the first after a
 * captured run (its start switches capture off, which flushes CUPTI's buffers: that time is
 * the capture's, in a step that counts as not captured), and not paused for another client or
 * after the records stopped (those ran under that client). */
static int cost_other(const uint8_t *in, const unsigned *why, size_t i) {
    return !in[i] && !(i && in[i - 1]) && !(why[i] & CAP_RECORDING);
}

/* Step j into o (its time in ms) and marked used, when it stands for the pace with capture
 * off (cost_other) and no other run took it. 1 if taken. */
static int take_other(const tp_step *meas, const uint8_t *in, const unsigned *why, size_t j,
                      uint8_t *used, double *o, size_t *no) {
    if (used[j] || !cost_other(in, why, j)) return 0;
    used[j] = 1;
    o[(*no)++] = (double)(meas[j].end - meas[j].start) / 1e6;
    return 1;
}

/* For the captured run in[i0..i1]: the uncaptured steps next to it into o (used marks those
 * taken), as many as it has and at least COST_LOCAL: the nearest before it, or, when fewer
 * than COST_MIN_STEPS precede it (a window at the start of the run), those after it too. */
static void cost_neighbours(const tp_step *meas, size_t nm, const uint8_t *in,
                            const unsigned *why, size_t i0, size_t i1, uint8_t *used, double *o,
                            size_t *no) {
    size_t want = i1 - i0 + 1 < COST_LOCAL ? COST_LOCAL : i1 - i0 + 1, got = 0;
    /* up to the next captured run either way: its side is its own */
    for (size_t j = i0; j-- > 0 && got < want && !in[j];)
        got += take_other(meas, in, why, j, used, o, no);
    if (got >= COST_MIN_STEPS) return;
    for (size_t j = i1 + 1; j < nm && got < want && !in[j]; j++)
        got += take_other(meas, in, why, j, used, o, no);
}

/* The median of v[0..n), sorted ascending: the middle value, or the mean of the two middle
 * ones (a side holds 3 to a few dozen steps, where the lower of the two would shift it). */
static double median_sorted(const double *v, size_t n) {
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The median of |v[i]| over v[0..n), v reordered. */
static double median_abs(double *v, size_t n) {
    for (size_t i = 0; i < n; i++) v[i] = fabs(v[i]);
    qsort(v, n, sizeof *v, tp_cmp_double);
    return median_sorted(v, n);
}

/* The capture's cost: the captured measured steps against the uncaptured steps next to each
 * run of them (cost_neighbours), not against the whole run: a job's pace drifts over a run
 * (Megatron-LM on an H200 ran its iterations 2-10 about 1.5 % faster than 11-15, which would
 * have doubled a 1.5 % cost), and the steps beside a window drift with it. The difference of
 * the medians is a result when it exceeds twice its standard error, 1.2533 sigma
 * sqrt(1/na + 1/no) for medians of normal samples (the asymptotic variance of the sample
 * median, pi sigma^2 / 2n: Kendall and Stuart, The Advanced Theory of Statistics, vol. 1), with
 * sigma estimated as 1.4826 times the pooled median absolute deviation (its consistency factor
 * for a normal distribution: Rousseeuw and Croux, JASA 88 (1993)). */
static void cost(tp_capture_result *out, const tp_step *meas, size_t nm, const uint8_t *in,
                 const unsigned *why) {
    double *a = tp_malloc((nm ? nm : 1) * sizeof *a), *o = tp_malloc((nm ? nm : 1) * sizeof *o);
    double *dev = tp_malloc((nm ? nm : 1) * sizeof *dev);
    uint8_t *used = tp_calloc(nm ? nm : 1, 1);
    size_t na = 0, no = 0, skipped = 0;
    if (!a || !o || !dev || !used) goto out;
    for (size_t i = 0; i < nm; i++) {
        if (in[i]) a[na++] = (double)(meas[i].end - meas[i].start) / 1e6;
        /* the first step after a captured run holds the closing flush; one paused for
         * another client ran under it instead, and is on neither side (cost_other) */
        else if (i && in[i - 1] && !(why[i] & CAP_RECORDING)) skipped++;
        if (in[i] && (i + 1 == nm || !in[i + 1])) { /* a captured run ends at i */
            size_t i0 = i;
            while (i0 && in[i0 - 1]) i0--;
            cost_neighbours(meas, nm, in, why, i0, i, used, o, &no);
        }
    }
    if (!na || !no) goto out;
    qsort(a, na, sizeof *a, tp_cmp_double);
    qsort(o, no, sizeof *o, tp_cmp_double);
    out->captured_median_ms = median_sorted(a, na);
    out->other_median_ms = median_sorted(o, no);
    out->other_spread_ms = tp_pct_double(o, no, 0.9) - tp_pct_double(o, no, 0.1);
    for (size_t i = 0; i < na; i++) dev[i] = a[i] - out->captured_median_ms;
    for (size_t i = 0; i < no; i++) dev[na + i] = o[i] - out->other_median_ms;
    double sigma = 1.4826 * median_abs(dev, na + no); /* the pooled MAD */
    out->noise_ms = 2 * 1.2533 * sigma * sqrt(1.0 / (double)na + 1.0 / (double)no);
    out->cost_ms = out->captured_median_ms - out->other_median_ms;
    out->cost_share = out->other_median_ms > 0 ? out->cost_ms / out->other_median_ms : 0;
    out->cost_captured = na;
    out->cost_other = no;
    out->cost_skipped = skipped;
    double d = out->cost_ms < 0 ? -out->cost_ms : out->cost_ms;
    if (na < COST_MIN_STEPS || no < COST_MIN_STEPS) {
        out->cost_flagged = 1;
        snprintf(out->cost_reason, sizeof out->cost_reason,
                 "fewer than %d steps on a side (%zu captured, %zu others)", COST_MIN_STEPS, na,
                 no);
    } else if (d < out->noise_ms) {
        out->cost_flagged = 1;
        snprintf(out->cost_reason, sizeof out->cost_reason,
                 "the difference is within the noise (+/-%.2f ms: two standard errors)",
                 out->noise_ms);
    } else if (out->cost_ms < 0) {
        /* recording adds work to each launch and takes none away: captured steps that ran
         * faster say the job's pace changed beside the window, not what capture cost */
        out->cost_flagged = 1;
        snprintf(out->cost_reason, sizeof out->cost_reason,
                 "the captured steps ran faster than the steps beside them: the job's pace "
                 "changed, which no cost of recording explains");
    } else {
        out->has_cost = 1;
    }
out:
    free(a);
    free(o);
    free(dev);
    free(used);
}

/* GPU records that stopped while the captured steps went on: those steps are taken out
 * (in[] cleared, why[] set) and the span noted. */
static void records_stopped(tp_capture_result *out, const tp_process *p, const tp_step *meas,
                            size_t nm, uint8_t *in, unsigned *why) {
    uint64_t last = 0;
    for (size_t i = 0; i < p->ngpu; i++)
        if (p->gpu[i].end > last) last = p->gpu[i].end;
    for (size_t i = 0; i < p->napi; i++)
        if (p->api[i].end > last) last = p->api[i].end;
    size_t first = SIZE_MAX, lastc = SIZE_MAX, silent = 0;
    for (size_t i = 0; i < nm; i++) {
        if (!in[i]) continue;
        if (first == SIZE_MAX) first = i;
        lastc = i;
        silent += meas[i].start > last;
    }
    if (!last || first == SIZE_MAX || meas[lastc].end <= last + STOPPED_NS || silent < 2) return;
    out->has_records_stopped = 1;
    out->stopped_after_s = (double)(last - meas[first].start) / 1e9;
    out->stopped_span_s = (double)(meas[lastc].end - last) / 1e9;
    out->steps_without_gpu_records = silent;
    for (size_t i = 0; i < nm; i++)
        if (in[i] && meas[i].start > last) {
            in[i] = 0;
            why[i] = TP_CAP_STOPPED;
        }
}

/* A load bounded in GPU records (model.h, tp_process_load_bounded) held those of one span
 * alone: a step outside it is not captured, nor the first inside it when a step precedes it
 * (work launched before the span that ran in it has no launch held: its launch would be
 * estimated from its stream's neighbours, gpu.c launch_times, and may fall in the step), nor
 * the last inside it when a step follows (a kernel it launched may have run after the span,
 * and is not held). */
static void bound_span(tp_capture_result *out, const tp_process *p, const tp_steps *s,
                       uint8_t *in, unsigned *why) {
    if (!p->gpu_window_to) return;
    out->bound_records = p->gpu_bound;
    out->bound_kept = p->gpu_held;
    out->bound_left_out = p->gpu_left_out;
    uint64_t t0 = p->hdr.start_mono_ns;
    out->bound_from_s = p->gpu_window_from > t0 ? (double)(p->gpu_window_from - t0) / 1e9 : 0;
    out->bound_to_s = p->gpu_window_to > t0 ? (double)(p->gpu_window_to - t0) / 1e9 : 0;
    size_t first = SIZE_MAX, last = 0, inside = 0;
    for (size_t i = 0; i < s->nsteps; i++) {
        const tp_step *st = &s->steps[i];
        if (st->start >= p->gpu_window_from && st->end <= p->gpu_window_to) {
            if (first == SIZE_MAX) first = i;
            last = i;
            inside++;
        } else if (in[i]) {
            in[i] = 0;
            why[i] = TP_CAP_BOUND;
        }
    }
    size_t edge[2] = {first, last};
    int cut[2] = {first > 0, last + 1 < s->nsteps};
    for (int k = 0; inside && k < 2; k++)
        if (cut[k] && in[edge[k]]) {
            in[edge[k]] = 0;
            why[edge[k]] = TP_CAP_BOUND;
        }
}

int tp_capture_compute(tp_capture_result *out, tp_steps *cap, const tp_process *p,
                       const tp_steps *s) {
    memset(out, 0, sizeof *out);
    memset(cap, 0, sizeof *cap);
    cap->source = s->source;
    cap->name = s->name;
    cap->thread = s->thread;
    out->complete_until_ns = UINT64_MAX;
    out->complete_until_s = -1;
    size_t n = s->nsteps, nm = n - s->nwarmup;
    cap->steps = tp_malloc((n ? n : 1) * sizeof *cap->steps);
    uint8_t *in = tp_calloc(n ? n : 1, 1);
    unsigned *why = tp_calloc(n ? n : 1, sizeof *why);
    tp_span *pz = NULL;
    size_t npz = 0, nev = 0;
    int oom = !cap->steps || !in || !why;
    cap_event *ev = oom ? NULL : events(p, &nev, &oom, &out->windows_ignored);
    if (!oom && pauses(p, &pz, &npz) != 0) oom = 1;
    if (oom) {
        free(in);
        free(why);
        free(ev);
        free(pz);
        tp_steps_free(cap);
        return TPROF_ERR_NO_MEMORY;
    }
    int use = applies(p);
    int on = !tp_meta(p, "kernel_steps");
    unsigned off_why = TP_CAP_KERNEL_STEPS;
    /* the allocator's records are complete from the start until capture first went off */
    if (!on) out->complete_until_ns = 0;
    for (size_t k = 0; on && k < nev; k++)
        if (!ev[k].on) {
            out->complete_until_ns = ev[k].t;
            break;
        }
    if (npz && pz[0].s < out->complete_until_ns) out->complete_until_ns = pz[0].s;
    for (size_t k = 1; k < npz; k++)
        if (pz[k].s < out->complete_until_ns) out->complete_until_ns = pz[k].s;
    if (out->complete_until_ns && out->complete_until_ns != UINT64_MAX)
        out->complete_until_s =
            out->complete_until_ns > p->hdr.start_mono_ns
                ? (double)(out->complete_until_ns - p->hdr.start_mono_ns) / 1e9 : 0;
    for (size_t i = 0, k = 0; i < n; i++) {
        const tp_step *st = &s->steps[i];
        for (; k < nev && ev[k].t <= st->start; k++) {
            on = ev[k].on;
            if (!on) off_why = ev[k].why;
        }
        if (!use) in[i] = 1;
        else if (!on) why[i] = off_why;
        else if (overlaps(pz, npz, st->start, st->end)) why[i] = TP_CAP_PAUSED;
        else in[i] = 1;
    }
    bound_span(out, p, s, in, why);
    const tp_step *meas = tp_steps_measured(s);
    if (use && nm) records_stopped(out, p, meas, nm, in + s->nwarmup, why + s->nwarmup);
    for (size_t i = 0; i < n; i++) {
        if (!in[i]) continue;
        cap->steps[cap->nsteps++] = s->steps[i];
        cap->nwarmup += i < s->nwarmup;
    }
    out->present = use && nm > 0;
    out->windows_unlisted = tp_capture_unlisted(p);
    out->measured = nm;
    for (size_t i = 0; i < nm; i++) {
        out->captured += in[s->nwarmup + i];
        out->limited_by |= why[s->nwarmup + i];
    }
    out->limited = out->present && out->captured < nm;
    if (p->gpu_window_to) out->limited_by |= TP_CAP_BOUND; /* said even without steps */
    if (out->limited) {
        step_runs(out, meas, nm, in + s->nwarmup);
        if (!out->captured) none_reason(out, p);
        cost(out, meas, nm, in + s->nwarmup, why + s->nwarmup);
    }
    free(in);
    free(why);
    free(ev);
    free(pz);
    return TPROF_OK;
}

const char *tp_capture_words(const tp_capture_result *c, char *buf, size_t n) {
    if (!n) return buf;
    *buf = 0;
    if (!c->limited) return buf;
    /* a bound held the records of some steps, where every step was recorded */
    const char *what = c->limited_by & TP_CAP_BOUND ? "GPU records held for"
                                                     : "GPU activity recorded in";
    if (!c->captured)
        snprintf(buf, n, "%s no measured step (0 of %zu)", what, c->measured);
    else
        snprintf(buf, n, "%s step%s %s (%zu of %zu measured steps)", what,
                 c->captured == 1 ? "" : "s", c->steps, c->captured, c->measured);
    return buf;
}

static void cost_fields(cJSON *o, const tp_capture_result *c) {
    cJSON_AddNumberToObject(o, "ms_per_step", c->cost_ms);
    cJSON_AddNumberToObject(o, "share", c->cost_share);
    cJSON_AddNumberToObject(o, "captured_median_ms", c->captured_median_ms);
    cJSON_AddNumberToObject(o, "other_median_ms", c->other_median_ms);
    cJSON_AddNumberToObject(o, "other_spread_ms", c->other_spread_ms);
    cJSON_AddNumberToObject(o, "noise_ms", c->noise_ms);
    cJSON_AddNumberToObject(o, "captured_steps", (double)c->cost_captured);
    cJSON_AddNumberToObject(o, "other_steps", (double)c->cost_other);
    cJSON_AddNumberToObject(o, "skipped_steps", (double)c->cost_skipped);
}

void tp_capture_json(cJSON *rank, const tp_capture_result *c) {
    if (!c->limited && !(c->present && (c->windows_ignored || c->windows_unlisted)) &&
        !(c->limited_by & TP_CAP_BOUND))
        return;
    static const struct { unsigned bit; const char *name; } causes[] = {
        {TP_CAP_KERNEL_STEPS, "kernel_steps"}, {TP_CAP_DETAIL, "detail"},
        {TP_CAP_PAUSED, "paused"}, {TP_CAP_STOPPED, "records_stopped"},
        {TP_CAP_BOUND, "gpu_records_bound"}};
    cJSON *j = cJSON_AddObjectToObject(rank, "gpu_capture");
    cJSON_AddNumberToObject(j, "measured_steps", (double)c->measured);
    cJSON_AddNumberToObject(j, "captured_steps", (double)c->captured);
    cJSON *r = cJSON_AddArrayToObject(j, "steps");
    for (size_t i = 0; i < c->nranges; i++)
        tp_json_item_to_array(r, cJSON_CreateDoubleArray(c->ranges[i], 2));
    if (c->ranges_left_out)
        cJSON_AddNumberToObject(j, "steps_left_out", (double)c->ranges_left_out);
    cJSON *why = cJSON_AddArrayToObject(j, "limited_by");
    for (size_t i = 0; i < sizeof causes / sizeof *causes; i++)
        if (c->limited_by & causes[i].bit)
            tp_json_item_to_array(why, cJSON_CreateString(causes[i].name));
    if (!c->captured) cJSON_AddStringToObject(j, "not_captured", c->not_captured);
    if (c->limited_by & TP_CAP_BOUND) {
        cJSON *b = cJSON_AddObjectToObject(j, "gpu_records_bound");
        cJSON_AddNumberToObject(b, "bound", (double)c->bound_records);
        cJSON_AddNumberToObject(b, "held", (double)c->bound_kept);
        cJSON_AddNumberToObject(b, "left_out", (double)c->bound_left_out);
        cJSON_AddNumberToObject(b, "from_s", c->bound_from_s);
        cJSON_AddNumberToObject(b, "to_s", c->bound_to_s);
    }
    if (c->present && c->windows_ignored)
        cJSON_AddNumberToObject(j, "windows_ignored", (double)c->windows_ignored);
    if (c->present && c->windows_unlisted)
        cJSON_AddNumberToObject(j, "windows_not_listed", (double)c->windows_unlisted);
    if (c->has_cost) {
        cost_fields(cJSON_AddObjectToObject(j, "cost"), c);
    } else if (c->cost_flagged) {
        cJSON *f = cJSON_AddObjectToObject(j, "cost_flagged");
        cost_fields(f, c);
        cJSON_AddStringToObject(f, "reason", c->cost_reason);
    }
}

int tp_capture_span_decimals(const tp_capture_result *c) {
    return c->bound_to_s - c->bound_from_s < 0.01 ? 6 : 3;
}

void tp_capture_text(FILE *f, const tp_capture_result *c) {
    if (c->present && c->windows_ignored)
        fprintf(f, "  damaged metadata: %zu entr%s of gpu_capture.windows not \"on-off\" or "
                   "ending before %s, left out of the captured steps\n",
                c->windows_ignored, c->windows_ignored == 1 ? "y" : "ies",
                c->windows_ignored == 1 ? "it begins" : "they begin");
    if (c->present && c->windows_unlisted)
        fprintf(f, "  %zu later capture window%s not listed in the rank file (its list of "
                   "windows holds the first ones only): %s steps count as not captured, and "
                   "%s GPU records are not read\n",
                c->windows_unlisted, c->windows_unlisted == 1 ? " is" : "s are",
                c->windows_unlisted == 1 ? "its" : "their",
                c->windows_unlisted == 1 ? "its" : "their");
    int dec = tp_capture_span_decimals(c);
    if (c->limited_by & TP_CAP_BOUND)
        fprintf(f, "  GPU records held: %zu, those that began %.*f-%.*f s into the process, and "
                   "every communication kernel; %zu more left out: the rank's GPU records are "
                   "more than the bound of %zu (--gpu-records, TRAINPROF_GPU_RECORDS)%s\n",
                c->bound_kept, dec, c->bound_from_s, dec, c->bound_to_s, c->bound_left_out,
                c->bound_records,
                c->measured ? "" : "; without measured steps, the GPU figures are totals over "
                                   "that span, not the run's");
    if (!c->limited) return;
    char w[256];
    tp_capture_words(c, w, sizeof w);
    if (!c->captured)
        fprintf(f, "  %s: %s; GPU figures: %s\n", w, c->not_captured,
                c->limited_by & TP_CAP_BOUND ? "none (no measured step's records held whole)"
                                             : "not captured");
    else fprintf(f, "  %s: the GPU figures are over those steps only\n", w);
    if (!c->has_cost && !c->cost_flagged) return;
    fprintf(f, "  capture cost: %s%+.2f ms per step (%+.1f %%) while GPU activity was recorded "
               "(median of %zu captured steps vs median of %zu uncaptured steps beside them",
            c->has_cost ? "" : "flagged, not a result: ", c->cost_ms, 100 * c->cost_share,
            c->cost_captured, c->cost_other);
    if (c->cost_skipped)
        fprintf(f, "; %zu step%s right after capture went off left out: %s the closing flush",
                c->cost_skipped, c->cost_skipped == 1 ? "" : "s",
                c->cost_skipped == 1 ? "it holds" : "they hold");
    fprintf(f, ")%s%s\n", c->has_cost ? "" : ": ", c->has_cost ? "" : c->cost_reason);
}
