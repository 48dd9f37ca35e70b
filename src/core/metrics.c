/*
 * metrics.c — the live metrics registry: metric families and their labelled series, fed
 * off the training threads and rendered on demand as Prometheus text (0.0.4) or OpenMetrics
 * (1.0) by the HTTP endpoint (metrics_http.c). docs/metrics.md lists the metrics.
 *
 * Concurrency (metrics.h): a value is one atomic 64-bit word (a double's bits); counters add
 * with a CAS loop, histograms count per bucket with fetch_add and keep their sum like a
 * counter. A scrape derives a histogram's count from its buckets, so `_count` always equals
 * the `+Inf` bucket even while an observation lands. Families and series are appended under
 * a mutex and linked into per-family lists with release stores; a reader follows the links
 * with acquire loads and never waits. Nothing is ever removed: the registry's size is
 * bounded (TPROF_M_MAX_SERIES) and lives as long as the process.
 */
#define _GNU_SOURCE
#include "metrics.h"
#include "trainprof.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tprof__metrics_on;

typedef struct m_family {
    char name[96];
    char help[200];
    int type;
    int nbounds;
    double bounds[TPROF_M_MAX_BUCKETS];
    _Atomic int first, last; /* series ids + 1; 0 = none */
} m_family;

typedef struct m_series {
    int fam;
    _Atomic int next; /* next series of the family, id + 1 */
    char labels[TPROF_M_LABELS_MAX];
    _Atomic uint64_t value;           /* double bits: gauge, counter, histogram sum */
    _Atomic uint64_t *buckets;        /* histograms: nbounds + 1 counts (not cumulative) */
} m_series;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static m_family g_fam[TPROF_M_MAX_FAMILIES];
static _Atomic int g_nfam;
static m_series *g_series; /* TPROF_M_MAX_SERIES, allocated when enabled */
static _Atomic int g_nseries;
static char g_const[TPROF_M_LABELS_MAX]; /* under g_lock */

int tprof__m_enable(void) {
    pthread_mutex_lock(&g_lock);
    if (!g_series) g_series = calloc(TPROF_M_MAX_SERIES, sizeof *g_series);
    int ok = g_series != NULL;
    pthread_mutex_unlock(&g_lock);
    return ok ? 0 : -1;
}

static int valid_name(const char *s) {
    if (!s || !*s) return 0;
    for (const char *p = s; *p; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
                 (p != s && c >= '0' && c <= '9');
        if (!ok) return 0;
    }
    return 1;
}

int tprof__m_family(const char *name, const char *help, int type, const double *bounds,
                    int nbounds) {
    if (!valid_name(name) || strlen(name) >= sizeof g_fam[0].name || type < 0 ||
        type > TPROF_M_HISTOGRAM || nbounds < 0 || nbounds > TPROF_M_MAX_BUCKETS ||
        (type == TPROF_M_HISTOGRAM && nbounds && !bounds))
        return -1;
    pthread_mutex_lock(&g_lock);
    int n = atomic_load_explicit(&g_nfam, memory_order_relaxed), id = -1;
    for (int i = 0; i < n; i++)
        if (!strcmp(g_fam[i].name, name)) { id = i; break; }
    if (id < 0 && n < TPROF_M_MAX_FAMILIES) {
        m_family *f = &g_fam[n];
        snprintf(f->name, sizeof f->name, "%s", name);
        snprintf(f->help, sizeof f->help, "%s", help ? help : "");
        f->type = type;
        f->nbounds = type == TPROF_M_HISTOGRAM ? nbounds : 0;
        for (int b = 0; b < f->nbounds; b++) f->bounds[b] = bounds[b];
        atomic_store_explicit(&g_nfam, n + 1, memory_order_release);
        id = n;
    }
    pthread_mutex_unlock(&g_lock);
    return id;
}

/* Length of the UTF-8 sequence at p (n bytes left, n >= 1) when it is well-formed (Unicode
 * Standard, section 3.9, table 3-7: no overlong form, no surrogate, nothing above U+10FFFF);
 * else 0, with *bad set to its maximal subpart: the bytes that begin a well-formed sequence
 * but do not complete one (at least 1), which one U+FFFD replaces (the same section's
 * "substitution of maximal subparts", as Python, browsers and Go's strings.ToValidUTF8
 * count replacements). */
static size_t utf8_seq(const unsigned char *p, size_t n, size_t *bad) {
    unsigned c = p[0];
    size_t len;
    unsigned lo = 0x80, hi = 0xBF; /* the range of the second byte */
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;      /* overlong below U+0800 */
        else if (c == 0xED) hi = 0x9F; /* surrogates U+D800..U+DFFF */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;      /* overlong below U+10000 */
        else if (c == 0xF4) hi = 0x8F; /* above U+10FFFF */
    } else {
        *bad = 1; /* a continuation byte, C0, C1 or F5..FF: never a lead */
        return 0;
    }
    size_t k = 1;
    for (; k < len; k++) {
        if (k >= n) break;
        unsigned b = p[k];
        if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) break;
    }
    if (k == len) return len;
    *bad = k;
    return 0;
}

size_t tprof__m_utf8_cut(const char *s, size_t max) {
    size_t n = strnlen(s, max + 1);
    if (n <= max) return n;
    /* s[max] is the first byte left out: when it continues a sequence, that sequence's
     * bytes before it go too (a sequence has at most 3 continuation bytes; more are
     * invalid whatever the cut) */
    size_t k = max;
    while (k > 0 && max - k < 3 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
    if (((unsigned char)s[k] & 0xC0) == 0x80) return max; /* no lead within reach */
    /* s[k] leads the cut sequence; keep it only if the sequence ends by max */
    size_t bad = 0, len = utf8_seq((const unsigned char *)s + k, strnlen(s + k, 4), &bad);
    return len && k + len <= max ? k + len : k;
}

/* Appends `k="v"` pairs: each value made valid UTF-8 (a maximal invalid subpart becomes
 * U+FFFD), then escaped as the text formats require (backslash, double quote and line
 * feed: Prometheus text format 0.0.4, "label_value"; OpenMetrics 1.0, "Escaping"). One
 * invalid byte in one value would make the whole scrape unparsable (Prometheus refuses it
 * and marks the target down), so no value reaches the output unchecked. 0, or -1 when the
 * pairs do not fit in cap. */
static int format_labels(char *out, size_t cap, const char *const *labels) {
    size_t n = 0;
    out[0] = 0;
    for (int i = 0; labels && labels[i] && labels[i + 1]; i += 2) {
        const char *k = labels[i], *v = labels[i + 1];
        if (!valid_name(k)) return -1;
        size_t kl = strlen(k);
        if (n + kl + 4 >= cap) return -1;
        if (n) out[n++] = ',';
        memcpy(out + n, k, kl);
        n += kl;
        out[n++] = '=';
        out[n++] = '"';
        const unsigned char *p = (const unsigned char *)v;
        size_t left = strlen(v);
        while (left) {
            size_t bad = 0, len = utf8_seq(p, left, &bad);
            if (n + 5 >= cap) return -1; /* room for 4 bytes, the quote and the NUL */
            if (!len) {
                memcpy(out + n, "\xEF\xBF\xBD", 3);
                n += 3;
                p += bad;
                left -= bad;
                continue;
            }
            if (*p == '\\' || *p == '"') { out[n++] = '\\'; out[n++] = (char)*p; }
            else if (*p == '\n') { out[n++] = '\\'; out[n++] = 'n'; }
            else { memcpy(out + n, p, len); n += len; }
            p += len;
            left -= len;
        }
        out[n++] = '"';
        out[n] = 0;
    }
    return 0;
}

/* 1 when s is well-formed UTF-8 */
static int valid_utf8(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    size_t left = strlen(s), bad;
    while (left) {
        size_t len = utf8_seq(p, left, &bad);
        if (!len) return 0;
        p += len;
        left -= len;
    }
    return 1;
}

int tprof__m_series_raw(int fam, const char *labels) {
    if (fam < 0 || fam >= atomic_load(&g_nfam) || !g_series) return -1;
    if (!labels) labels = "";
    if (strlen(labels) >= TPROF_M_LABELS_MAX || !valid_utf8(labels)) return -1;
    pthread_mutex_lock(&g_lock);
    m_family *f = &g_fam[fam];
    int id = -1;
    for (int s = atomic_load_explicit(&f->first, memory_order_relaxed); s;
         s = atomic_load_explicit(&g_series[s - 1].next, memory_order_relaxed))
        if (!strcmp(g_series[s - 1].labels, labels)) { id = s - 1; break; }
    int n = atomic_load_explicit(&g_nseries, memory_order_relaxed);
    if (id < 0 && n < TPROF_M_MAX_SERIES) {
        m_series *se = &g_series[n];
        se->fam = fam;
        snprintf(se->labels, sizeof se->labels, "%s", labels);
        atomic_store_explicit(&se->value, 0, memory_order_relaxed); /* bits of 0.0 */
        int ok = 1;
        if (f->type == TPROF_M_HISTOGRAM) {
            _Atomic uint64_t *b = calloc((size_t)f->nbounds + 1, sizeof *b);
            if (b) se->buckets = b;
            else ok = 0;
        }
        if (ok) {
            atomic_store_explicit(&g_nseries, n + 1, memory_order_relaxed);
            /* publish: the series is complete before any link to it */
            int last = atomic_load_explicit(&f->last, memory_order_relaxed);
            if (last) atomic_store_explicit(&g_series[last - 1].next, n + 1, memory_order_release);
            else atomic_store_explicit(&f->first, n + 1, memory_order_release);
            atomic_store_explicit(&f->last, n + 1, memory_order_relaxed);
            id = n;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return id;
}

int tprof__m_series(int fam, const char *const *labels) {
    char buf[TPROF_M_LABELS_MAX];
    if (format_labels(buf, sizeof buf, labels) != 0) return -1;
    return tprof__m_series_raw(fam, buf);
}


static m_series *get(int s) {
    if (s < 0 || !g_series || s >= atomic_load_explicit(&g_nseries, memory_order_relaxed))
        return NULL;
    return &g_series[s];
}

void tprof__m_set(int s, double v) {
    m_series *se = get(s);
    if (se) atomic_store_explicit(&se->value, tprof__m_d2u(v), memory_order_relaxed);
}

static void add_bits(_Atomic uint64_t *w, double v) {
    uint64_t old = atomic_load_explicit(w, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(w, &old, tprof__m_d2u(tprof__m_u2d(old) + v),
                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
}

void tprof__m_add(int s, double v) {
    m_series *se = get(s);
    if (se && v >= 0) add_bits(&se->value, v);
}

void tprof__m_observe(int s, double v) {
    m_series *se = get(s);
    if (!se || !se->buckets || isnan(v)) return;
    const m_family *f = &g_fam[se->fam];
    int b = 0;
    while (b < f->nbounds && v > f->bounds[b]) b++;
    /* the sum first: a scrape in between sees a sum short of one value, never a count
     * ahead of its sum by a whole step */
    add_bits(&se->value, v);
    atomic_fetch_add_explicit(&se->buckets[b], 1, memory_order_relaxed);
}

void tprof__m_integrate(int s, tprof__m_integ *st, double ratio, uint64_t now_ns,
                        uint64_t max_gap_ns) {
    uint64_t last = st->last_ns;
    if (now_ns <= last) return; /* not after the previous sample: nothing to integrate */
    st->last_ns = now_ns;
    if (!last || now_ns - last > max_gap_ns || isnan(ratio)) return;
    if (ratio < 0) ratio = 0;
    if (ratio > 1) ratio = 1;
    tprof__m_add(s, ratio * ((double)(now_ns - last) / 1e9));
}

void tprof__m_set_const_labels(const char *const *labels) {
    char buf[TPROF_M_LABELS_MAX];
    if (format_labels(buf, sizeof buf, labels) != 0) return;
    pthread_mutex_lock(&g_lock);
    memcpy(g_const, buf, sizeof g_const);
    pthread_mutex_unlock(&g_lock);
}

/* ------------------------------------------------------------------------ rendering */

typedef struct mbuf {
    char *p;
    size_t n, cap;
    int oom;
} mbuf;

static void put(mbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 16384;
        while (cap < b->n + n + 1) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) { b->oom = 1; return; }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void puts_(mbuf *b, const char *s) { put(b, s, strlen(s)); }

/* A sample value: integers exactly (counts, bytes), others with 15 significant digits. */
static void put_num(mbuf *b, double v) {
    char t[40];
    int n;
    if (isnan(v)) n = snprintf(t, sizeof t, "NaN");
    else if (isinf(v)) n = snprintf(t, sizeof t, v > 0 ? "+Inf" : "-Inf");
    else if (v == (double)(long long)v && fabs(v) < 1e15) {
        /* the common case, without printf */
        long long x = (long long)v;
        char r[24];
        int k = 0, neg = x < 0;
        unsigned long long ux = neg ? (unsigned long long)(-x) : (unsigned long long)x;
        do { r[k++] = (char)('0' + ux % 10); ux /= 10; } while (ux);
        n = 0;
        if (neg) t[n++] = '-';
        while (k) t[n++] = r[--k];
        t[n] = 0;
    } else n = snprintf(t, sizeof t, "%.15g", v);
    put(b, t, (size_t)n);
}

static void put_help(mbuf *b, const char *s) {
    for (const char *p = s; *p; p++) {
        if (*p == '\\') put(b, "\\\\", 2);
        else if (*p == '\n') put(b, "\\n", 2);
        else put(b, p, 1);
    }
}

/* name{const,labels[,extra]} */
static void put_head(mbuf *b, const char *name, const char *suffix, const char *cst,
                     const char *labels, const char *extra) {
    puts_(b, name);
    if (suffix) puts_(b, suffix);
    int any = 0;
    const char *parts[3] = {cst, labels, extra};
    for (int i = 0; i < 3; i++) {
        if (!parts[i] || !*parts[i]) continue;
        put(b, any ? "," : "{", 1);
        puts_(b, parts[i]);
        any = 1;
    }
    if (any) put(b, "}", 1);
    put(b, " ", 1);
}

int tprof__m_render(int openmetrics, char **out, size_t *len) {
    mbuf b = {0};
    char cst[TPROF_M_LABELS_MAX];
    pthread_mutex_lock(&g_lock);
    memcpy(cst, g_const, sizeof cst);
    pthread_mutex_unlock(&g_lock);
    static const char *const types[] = {"counter", "gauge", "histogram"};
    int nfam = atomic_load_explicit(&g_nfam, memory_order_acquire);
    for (int fi = 0; fi < nfam && g_series; fi++) {
        const m_family *f = &g_fam[fi];
        int s = atomic_load_explicit(&((m_family *)f)->first, memory_order_acquire);
        if (!s) continue;
        /* OpenMetrics names a counter family without its _total */
        char fname[sizeof f->name];
        memcpy(fname, f->name, sizeof fname);
        size_t fl = strlen(fname);
        if (openmetrics && f->type == TPROF_M_COUNTER && fl > 6 &&
            !strcmp(fname + fl - 6, "_total"))
            fname[fl - 6] = 0;
        puts_(&b, "# HELP ");
        puts_(&b, fname);
        put(&b, " ", 1);
        put_help(&b, f->help);
        puts_(&b, "\n# TYPE ");
        puts_(&b, fname);
        put(&b, " ", 1);
        puts_(&b, types[f->type]);
        put(&b, "\n", 1);
        for (; s; s = atomic_load_explicit(&g_series[s - 1].next, memory_order_acquire)) {
            m_series *se = &g_series[s - 1];
            double v = tprof__m_u2d(atomic_load_explicit(&se->value, memory_order_relaxed));
            if (f->type != TPROF_M_HISTOGRAM) {
                put_head(&b, f->name, NULL, cst, se->labels, NULL);
                put_num(&b, v);
                put(&b, "\n", 1);
                continue;
            }
            uint64_t cum = 0;
            for (int k = 0; k <= f->nbounds; k++) {
                cum += atomic_load_explicit(&se->buckets[k], memory_order_relaxed);
                char le[48];
                if (k == f->nbounds) snprintf(le, sizeof le, "le=\"+Inf\"");
                else snprintf(le, sizeof le, "le=\"%.15g\"", f->bounds[k]);
                put_head(&b, f->name, "_bucket", cst, se->labels, le);
                put_num(&b, (double)cum);
                put(&b, "\n", 1);
            }
            put_head(&b, f->name, "_sum", cst, se->labels, NULL);
            put_num(&b, v);
            put(&b, "\n", 1);
            put_head(&b, f->name, "_count", cst, se->labels, NULL);
            put_num(&b, (double)cum);
            put(&b, "\n", 1);
        }
    }
    if (openmetrics) puts_(&b, "# EOF\n");
    else if (!b.p) put(&b, "", 0);
    if (b.oom) {
        free(b.p);
        return TPROF_ERR_NO_MEMORY;
    }
    *out = b.p;
    *len = b.n;
    return 0;
}
